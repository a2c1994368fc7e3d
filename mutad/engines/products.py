"""The products both engines take of a (co)tangent and a partial derivative: an exact zero
wherever either factor is zero, whatever the other (an infinite or NaN partial, cotangent or
tangent), and a piece at a time for large arrays.

A complex partial ``p`` is a complex derivative (docs/guide.md, "Complex numbers and the FFT"): a
tangent ``t`` moves the output by ``p * t``, and a cotangent ``g`` of the output reaches the
input as ``g * conj(p)``, which is what the reverse products here take."""

import cmath
import math

import numpy as np

from ..core.debug import Handling
from ..core.devices import is_device
from ..core.levels import deeper
from ..core.views import memory, owner, wrapped, writeable

_ABSENT = object()

CHUNK = 1 << 15
"""Elements per piece when a partial derivative of a large array is evaluated piecewise, in
``CHUNK`` s: an array of fewer than four is evaluated whole."""

PIECE = 1
"""``CHUNK`` s per piece of a product evaluated a piece at a time (``times_partial``,
``add_times_partial``): each piece costs a few NumPy calls of its own, and its arrays (the
cotangent's piece, the operands', the partial, its product: a quarter megabyte each) should
stay in the second level of cache, which a piece of a megabyte each overflows (2 MiB per core:
a product of 2^17 float64 elements in pieces of 2^15 in 52 us, in one in 106 us). W5's traced
gradient at n = 10^7, pieces of a megabyte -> a quarter of one (here and in ``writes.PIECE``):
668 -> 574 ms, median of 9, 582 -> 559 ms fastest; at n = 10^6 and 2*10^6 the same within
noise (an earlier machine's: 2.85 -> 2.77 NumPy forwards at n = 2*10^6 from a quarter to
one megabyte)."""


def writable(a):
    """Whether ``a`` may be written without changing memory some tape froze (its owner's)."""
    if type(a) is np.ndarray:
        if a.base is None:  # (its own owner: a shadow, a fresh product, asked first)
            return a.flags.writeable
        return a.flags.writeable and owner(a).flags.writeable
    return writeable(a) and writeable(owner(a))  # traced, or a device's (views.writeable)


_REAL = np.dtype(float)
_REAL_PLAIN = frozenset((np.ndarray, float, int, np.float64))
"""Types of a partial that is a plain value, real unless an array of complex dtype."""


def partial_at(partial, y, values):
    """``partial(y, *values)``, both engines' one call of an elementwise rule's partial.
    Python's arithmetic on the number of a weak operand (``1.0 / sigma`` at ``sigma = 0.0``)
    raises where NumPy's, on an array, gives inf or nan: there the partial is computed on
    NumPy's scalars of those numbers, as NumPy computes it for an array."""
    try:
        return partial(y, *values)
    except (ZeroDivisionError, OverflowError):
        return partial(y, *[numpys_scalar(v) for v in values])


def numpys_scalar(v):
    """NumPy's scalar of a Python float or complex ``v``; anything else as it is."""
    return np.float64(v) if type(v) is float else np.complex128(v) if type(v) is complex else v


def adjoint(p):
    """The factor a cotangent takes from partial ``p``: ``p``, conjugated if complex."""
    return p.conjugate() if type(p) is complex or getattr(p, "dtype", _REAL).kind == "c" else p


def times_partial(dy, partial, y, values, out):
    """``out = dy * conj(partial(y, *values))`` (``out`` is a suggestion where the product is
    complex and it is not). For large arrays of one shape the partial is evaluated a piece at
    a time, so its temporaries stay small and in cache."""
    if type(dy) is np.ndarray and dy.size < 4 * CHUNK:  # not in pieces (``_pieces``)
        return _times_partial_of(dy, partial_at(partial, y, values),
                                 out if writable(out) else None, out)
    pieces = _pieces(dy, out, y, values)
    if pieces is None:
        return _times(dy, adjoint(partial_at(partial, y, values)), out)
    flat_dy, flat_out = dy.reshape(-1), out.reshape(-1)
    for part, (y_part, *parts) in pieces:
        times(flat_dy[part], adjoint(partial_at(partial, y_part, parts)), flat_out[part])
    return out


def _times_partial_of(dy, p, out, suggested=_ABSENT):
    """``times_partial`` of a small ``dy`` once its partial ``p`` is evaluated: ``out`` is
    ``suggested`` if it is writable, else None (``suggested`` left out: ``out`` is that)."""
    if type(p) in _REAL_PLAIN and (type(p) is not np.ndarray or p.dtype.kind == "f"):
        # real, so its own adjoint, and no differentiation's (not deeper than ``out``):
        # what ``_times`` asks, answered for the partials of most small operations
        return times(dy, p, out)
    return _times(dy, adjoint(p), out if suggested is _ABSENT else suggested)


def add_times_partial(into, dy, partial, y, values):
    """``into += dy * partial(y, *values)`` a piece at a time, so no temporary of ``dy``'s size
    is made: for accumulating into a shadow that already exists. Returns False, having done
    nothing, where the arrays cannot be taken in pieces (the caller then forms the product
    whole)."""
    if wrapped(into) or not into.flags.c_contiguous or into.dtype != dy.dtype:
        return False
    pieces = _pieces(dy, into, y, values)
    if pieces is None:
        return False
    flat_dy, flat_into = dy.reshape(-1), into.reshape(-1)
    scratch = np.empty(min(PIECE * CHUNK, dy.size), np.result_type(dy, into))
    for part, (y_part, *parts) in pieces:
        d = flat_dy[part]
        product = times(d, adjoint(partial_at(partial, y_part, parts)), scratch[:d.size])
        np.add(flat_into[part], product, out=flat_into[part])
    return True


def _pieces(dy, out, y, values):
    """``(part, arguments of the partial)`` for each piece of the flat arrays, or None where
    they are not taken in pieces: small, or not all C-contiguous arrays of ``dy``'s shape
    (scalars aside), or belonging to an outer differentiation, or ``out`` not writable."""
    if type(dy) is not np.ndarray or dy.size < 4 * CHUNK or not dy.flags.c_contiguous \
            or out.shape != dy.shape or not out.flags.c_contiguous or not writable(out):
        return None
    flat = []
    real = out.dtype.kind == "f"
    for v in (y, *values):
        if real and (type(v) is complex or getattr(v, "dtype", _REAL).kind == "c"):
            return None  # a complex product, which ``out`` cannot hold
        if wrapped(v) or (type(v) is np.ndarray and v.ndim and (
                v.shape != dy.shape or not v.flags.c_contiguous)):
            return None
        flat.append(v.reshape(-1) if type(v) is np.ndarray and v.ndim else v)
    return ((part, [v[part] if type(v) is np.ndarray and v.ndim else v for v in flat])
            for part in (slice(start, start + PIECE * CHUNK)
                         for start in range(0, dy.size, PIECE * CHUNK)))


def _times(dy, p, out):
    """``dy * p`` into ``out``; into a new array where ``p`` belongs to an outer
    differentiation deeper than any ``out`` belongs to, or where an outer differentiation
    froze ``out`` (it read ``dy`` as a constant: nested, ``dy`` may already have gone into an
    outer-traced shadow)."""
    if deeper(p, out) or not writable(out) \
            or (out.dtype.kind == "f" and getattr(p, "dtype", _REAL).kind == "c"):
        out = None
    return times(dy, p, out)


def _finite(p):
    """Whether every element of ``p`` is finite; may say no for a few huge ones (|p|² overflows
    in the dot product that checks a short array, the sum a long one), which costs only time
    and raises or warns of nothing, whatever ``np.errstate`` says."""
    kind = type(p)
    if kind is float:
        return math.isfinite(p)
    if kind is not np.ndarray:
        if not hasattr(p, "dtype"):
            return cmath.isfinite(p)
        p = memory(p)
    if p.dtype.kind == "c":  # its real and imaginary parts, as floats
        p = p.view(p.real.dtype) if p.ndim and p.flags.c_contiguous else np.abs(p)
    elif p.dtype.kind != "f":
        return True
    if p.ndim == 0:
        return math.isfinite(p)
    if p.size <= UNTHREADED:  # (NumPy's vdot, unlike ndarray.dot, warns of no overflow)
        return math.isfinite(_vdot(p, p))
    with Handling(all="ignore"):  # a sum past the largest float: a no, not a warning
        return math.isfinite(np.add.reduce(p, axis=None))


_vdot = getattr(np.vdot, "_implementation", np.vdot)
"""``np.vdot`` without the ``__array_function__`` dispatch. Unlike ``ndarray.dot`` it does not
warn of the invalid ``0 * inf`` in a sum."""

UNTHREADED = 8192
"""Elements up to which a dot product checks finiteness (BLAS computes it in one thread). A
longer one is NumPy's own reduction: BLAS libraries spread a long dot product over threads,
which on a machine busy with other work wait for a core to come free, at up to fifty times
the cost (the dot products of W2's reverse pass at n = 10^5 took 1.2 of its 3.2 s so)."""


def _sum_of_products(d, p):
    """``sum(d * p)`` of two arrays of one shape, C-contiguous where not 1-D, in one pass
    (``unmasked``): BLAS's dot product where short (``UNTHREADED``); a long float64 pair's as
    Python's sum of the dot products of its pieces of that length (each a BLAS call in one
    thread: at a piece of a large product, ``times_partial``'s, in two thirds of the time of
    NumPy's own reduction, which any other long pair takes). Whatever the order, a finite sum
    means every product is finite: its one use, where an overflow of finite terms costs only
    time."""
    if d.size <= UNTHREADED:
        return _vdot(d, p)
    d, p = d.reshape(-1), p.reshape(-1)
    if d.dtype is not _REAL or p.dtype is not _REAL:
        return np.einsum("i,i->", d, p)
    total = 0.0  # (a Python float: its overflow warns of nothing, as NumPy's scalars would)
    for start in range(0, d.size, UNTHREADED):
        total += float(_vdot(d[start:start + UNTHREADED], p[start:start + UNTHREADED]))
    return total


def unmasked(d, p):
    """Whether ``d * p`` needs no mask (``times``): no zero factor meets a non-finite one. A
    number (a float, or a Python int) that is finite and not zero needs no look at the other
    factor; arrays of one shape are checked by one dot product of both, each of whose terms
    is non-finite where either factor is; otherwise each factor is checked (``_finite``,
    which may say no for a few huge elements: that costs only time)."""
    if type(p) is float or type(p) is np.float64 or type(p) is int:  # (int: 2 * x's)
        return math.isfinite(p) and (p != 0.0 or _finite(d))
    if type(d) is float or type(d) is np.float64:
        return math.isfinite(d) and (d != 0.0 or _finite(p))
    if type(d) is np.ndarray and type(p) is np.ndarray and d.shape == p.shape \
            and (d.ndim <= 1 or d.flags.c_contiguous and p.flags.c_contiguous):
        return cmath.isfinite(_sum_of_products(d, p))
    return _finite(p) and _finite(d)


def times(d, p, out=None):
    """``d * p`` (into ``out`` if given): a (co)tangent ``d`` times a partial derivative ``p``,
    where a zero factor gives zero whatever the other is, infinite or NaN: a zero ``d`` (no
    change in the input, or no sensitivity of the loss) times any slope, the derivative of
    ``sqrt`` at 0, say, and a zero ``p`` (the output does not move with that input: a factor
    of an exact zero, an operand ``minimum`` did not take) times any (co)tangent, an infinite
    one from ``sqrt`` at 0 further on, say. Checked by one reduction, so only products with a
    non-finite factor pay for the mask. The mask replaces only the NaNs that a zero factor
    makes: every other element is NumPy's product (a zero of its sign), so a check that says
    no where no factor is non-finite (``unmasked``: a sum that overflows) changes no bit, and
    neither does a product taken without one where none is (``blocks``).

    On a device (CuPy) the check is made there, not read: see ``_device_times``."""
    if (type(d) not in _HOST or type(p) not in _HOST) and (_on_device(d) or _on_device(p)):
        return _device_times(d, p, out)
    if type(out) is np.ndarray and type(d) is np.ndarray and type(p) is np.ndarray \
            and d.size > UNTHREADED and _apart(out, d, p):
        return _product_first(d, p, out)
    if unmasked(d, p):
        return d * p if out is None else np.multiply(d, p, out=out)
    zero = np.logical_or(memory(d) == 0, memory(p) == 0)  # before out, which may be d or p
    with Handling(invalid="ignore"):  # 0 * inf, replaced below
        product = d * p if out is None else np.multiply(d, p, out=out)
    made = _made_by_a_zero(zero, product)  # (0 * x is NaN or a zero, never infinite)
    if out is None or wrapped(out):
        return np.where(made, 0.0, product) if np.any(made) else product
    np.copyto(out, 0.0, where=made)
    return out


def _made_by_a_zero(zero, product):
    """Where ``product`` is a NaN that a zero factor made (``zero``: where a factor is zero)."""
    return np.logical_and(zero, np.isnan(memory(product)))


_HOST = frozenset((np.ndarray, float, int, complex, np.float64))

_smallest = np.minimum.reduce
_PRODUCT_FIRST = frozenset((np.dtype(np.float64), np.dtype(np.float32)))
"""The real float types whose products ``times`` forms first (``_product_first``)."""


def _product_first(d, p, out):
    """``times(d, p, out)`` where ``out`` shares no memory with ``d`` or ``p`` (``_apart``):
    the product is formed first, and only its smallest element is read, in cache, instead of
    a pass over both factors before it: the mask replaces only NaNs (``_made_by_a_zero``),
    and a NaN anywhere makes that minimum NaN, so ``unmasked`` is asked, of the factors still
    at hand, only where it is (a product with none is NumPy's, bit for bit, whatever it
    says). One reduction, not the two of the extremes: W5's traced gradient at n = 10^7
    makes about 1,500 such products of a piece each."""
    with Handling(invalid="ignore"):  # 0 * inf, replaced below
        np.multiply(d, p, out=out)
    low = _smallest(out, axis=None)  # (a NaN: NaN)
    if low != low and not unmasked(d, p):
        np.copyto(out, 0.0, where=_made_by_a_zero(np.logical_or(d == 0, p == 0), out))
    return out


def _apart(out, d, p):
    """Whether ``times`` may write the product of ``d`` and ``p`` into ``out`` before it asks
    ``unmasked``, which reads them: arrays of one real float type and shape, laid out as
    ``unmasked`` sums their products (in one pass), ``out`` sharing no memory with either."""
    dtype = out.dtype
    return (dtype in _PRODUCT_FIRST and d.dtype == dtype and p.dtype == dtype
            and d.shape == p.shape == out.shape
            and (d.ndim <= 1 or d.flags.c_contiguous and p.flags.c_contiguous)
            and not np.may_share_memory(out, d) and not np.may_share_memory(out, p))


def _on_device(x):
    """Whether ``x`` (a plain, traced or dual value) is in a device library's memory."""
    return type(x) not in _HOST and is_device(memory(x))


def _device_times(d, p, out):
    """``times`` on a device, without reading anything on the host (which would wait for the
    device): the mask, computed there, is applied whether or not it holds any element, so the
    result is ``times``' bit for bit."""
    zero = np.logical_or(memory(d) == 0, memory(p) == 0)  # before out, which may be d or p
    product = d * p if out is None else np.multiply(d, p, out=out)
    made = _made_by_a_zero(zero, product)
    if out is None or wrapped(out):
        return np.where(made, 0.0, product)
    np.copyto(out, 0.0, where=made)
    return out


def times_scalar(d, p):
    """``times(d, p)`` where ``unmasked(d, p)`` said no, for a NumPy scalar ``d`` (the cotangents
    of a replayed block's float64 scalars): zero where a factor is, else the ufunc's product,
    as ``times`` computes it on 0-d arrays."""
    if d == 0 or p == 0:
        return ZERO
    return np.multiply(d, p)


ZERO = np.float64(0.0)


def product_times(f, *factors):
    """``f(*factors)`` for ``f`` multilinear, a sum of products of one element of each factor
    (a matrix product, an einsum), with each product a ``times``: a term with a zero factor
    contributes zero, whatever the others (a zero cotangent of one output beside a NaN of an
    operand in a column it does not read; a zero tangent beside an infinity), as the
    elementwise rules' products do, where NumPy's sum of them would be NaN.

    Where that is finite (one reduction, of the product) it is ``f(*factors)``, bit for bit:
    no term had a non-finite factor. Otherwise the finite terms sum as ``f`` of the finite
    parts, and the others are counted by ``f`` of indicators, which sums ones (or signs) where
    a term is of a kind: an element is NaN where a NaN term meets no zero, or infinite terms
    of both signs, else the sign of its infinite terms, else the finite sum (past the
    floats: the infinity of its sign, ``_scaled``). Factors an
    enclosing differentiation traces, on a device, or not of a real float type: ``f``'s."""
    product = f(*factors)
    # (the first answer below for a short real array, asked without a call: a loop of dot
    # products makes two per step)
    if type(product) is np.ndarray and product.dtype.kind == "f" and product.ndim \
            and product.size <= UNTHREADED and math.isfinite(_vdot(product, product)):
        return product
    # finite: then no term was 0 * inf or NaN, and every one is NumPy's
    if type(product) is np.ndarray:
        if product.dtype.kind != "f" or _finite(product) or np.isfinite(product).all():
            return product
    elif not isinstance(product, np.floating) or math.isfinite(product):
        return product  # (or traced by an enclosing differentiation, or a device's)
    if not all(type(x) is np.ndarray and x.dtype.kind == "f" for x in factors):
        return product

    def count(*indicators):  # exact: sums of at most 2**53 terms of -1, 0 and 1
        return f(*(u.astype(np.float64) for u in indicators))

    finite = [np.isfinite(x) for x in factors]
    finite_parts = [np.where(ok, x, 0) for ok, x in zip(finite, factors, strict=True)]
    value = f(*finite_parts)
    if not np.isfinite(value).all():  # finite terms past the floats, or their sum
        value = np.where(np.isfinite(value), value, _scaled(f, finite_parts))
    nonzero = [x != 0 for x in factors]
    nan = np.zeros(np.shape(product), bool)
    for k, x in enumerate(factors):  # a NaN factor and no zero one
        nan |= count(*nonzero[:k], np.isnan(x), *nonzero[k + 1:]) > 0
    # the terms of no zero or NaN factor, and of those the finite ones: by sign, those of an
    # infinite factor are the difference
    numbers = [np.sign(np.where(np.isnan(x), 0, x)) for x in factors]
    size, signed = count(*map(abs, numbers)), count(*numbers)
    finite_numbers = [np.where(ok, s, 0) for ok, s in zip(finite, numbers, strict=True)]
    finite_size, finite_signed = count(*map(abs, finite_numbers)), count(*finite_numbers)
    up = size + signed > finite_size + finite_signed
    down = size - signed > finite_size - finite_signed
    value = np.where(up, np.inf, np.where(down, -np.inf, value))
    # A NaN is NumPy's own where NumPy's product has one there (its sign and payload: a NaN
    # factor's, as ``times`` and the compiled replay's ``dy * b`` give it), else NumPy's nan
    nan = nan | (up & down)
    value = np.where(nan, np.where(np.isnan(product), product, np.nan), value)
    value = value.astype(np.result_type(product))
    return value if type(product) is np.ndarray else value[()]


def _scaled(f, factors):
    """``f(*factors)`` of finite factors, computed on them scaled by powers of two to
    magnitudes below one and scaled back: where the sum of an element is beyond the floats,
    the infinity of its sign, not the NaN (``inf - inf``) or the infinity of whichever term
    overflowed first that the sum in its own order gives (``1e200 * 1e200 - 1e200 * 2e200``)."""
    exponents = [int(np.frexp(np.max(np.abs(x)))[1]) if x.size else 0 for x in factors]
    with Handling(all="ignore"):
        scaled = f(*(np.ldexp(x, -e) for x, e in zip(factors, exponents, strict=True)))
        return np.ldexp(scaled, sum(exponents))
