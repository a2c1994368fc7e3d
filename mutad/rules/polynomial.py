"""``numpy.polynomial``: the series of its six kinds, evaluated and fitted with traced values.

NumPy writes ``numpy.polynomial`` in Python, but its functions are not dispatched through
``__array_function__`` and convert their arguments with ``np.array`` first, which would cut the
gradient. The compositions here take NumPy's steps one by one (Horner's and Clenshaw's
recurrences of ``polyval``, ``chebval``, ``legval``, ``hermval``, ``hermeval``, ``lagval``; the
recurrences of the pseudo-Vandermonde matrices; the scaled least-squares solve of
``polyutils._fit``; the loops of ``*der`` and ``*int``; the companion matrices of
``*companion`` and their eigenvalues, ``*roots``; the products of lines of ``*fromroots``;
``*line``; ``*trim``; the 2-d and 3-d ``*val``, ``*grid`` and ``*vander``; the arithmetic
``*add``, ``*sub``, ``*mul``, ``*mulx``, ``*div`` and ``*pow`` line for line, NumPy's in-place
updates on copies the differentiation follows; the basis conversions ``poly2*`` and ``*2poly``
as NumPy's loops of that arithmetic), so their values are NumPy's bit for bit and
every step is differentiated by its own rule, in both modes and to every order. They stand in
for NumPy's functions by name while a differentiation runs (``registry.defroute``), and run
NumPy's own when no traced value reaches them.

The series classes (``Polynomial``, ``Chebyshev``, ...) follow traced coefficients: their
constructor keeps them (``Polynomial(c)``), ``p(x)`` evaluates them, at traced points too, and
``Polynomial.fit(x, y, deg)`` fits traced ``y``, ``p.deriv(m)`` and ``p.integ(m, k, lbnd)``
differentiate and integrate them, ``p.roots()`` finds their roots, and their arithmetic
(``p * q - 2 * p``, ``p ** 2``, ``divmod(p, q)``, ``p / 2``) is NumPy's (``registry.defmethod``
of their ``__init__``, ``__call__``, ``_val``, ``_fit``, ``_der``, ``_int``, ``_roots``,
``_add``, ``_sub``, ``_mul``, ``_div`` and ``_pow``; the module functions ``*der`` and ``*int``
are NumPy's loops on a list of rows). ``fit`` of a traced ``x`` (whose domain would follow it)
is refused by name, and so are trailing zeros NumPy trims from an array that carries a
derivative (``_trimseq``).
"""

import sys
import threading
import warnings

import numpy as np
import numpy.polynomial as _P
from numpy.polynomial import polyutils as _pu
from numpy.polynomial._polybase import ABCPolyBase

from ..core.allocation import (by_user_code, holds_derivative, holds_wrapped,
                               lists_as_arrays)
from ..core.errors import MutadError, UnsupportedOperationError
from ..core.registry import defcomposite, defmethod, defroute
from ..core.views import wrapped
from ._helpers import check_fit_data


def _coefficients(c):
    """``np.array(c, ndmin=1)`` as the ``*val`` functions take it, integers as doubles."""
    if wrapped(c):
        return np.atleast_1d(c)
    c = np.array(c, ndmin=1)
    return c + 0.0 if c.dtype.char in "?bBhHiIlLqQpP" else c


def _points(x, tensor, c):
    """The points and the coefficients shaped against them, as every ``*val`` shapes them."""
    if isinstance(x, (tuple, list)):
        [x] = lists_as_arrays([x])  # (NumPy's np.asarray; the array it makes of traced items)
        x = x if wrapped(x) else np.asarray(x)
    if (isinstance(x, np.ndarray) or wrapped(x)) and tensor:
        c = np.reshape(c, np.shape(c) + (1,) * np.ndim(x))
    return x, c


def polyval(x, c, tensor=True):
    x, c = _points(x, tensor, _coefficients(c))
    c0 = c[-1] + x * 0
    for i in range(2, len(c) + 1):
        c0 = c[-i] + c0 * x
    return c0


def _clenshaw(step, last):
    """A ``*val`` of three-term recurrence: ``step(c, c0, c1, nd, x)`` gives the next pair,
    ``last(c0, c1, x)`` the value, as NumPy's loop computes them."""
    def evaluate(x, c, tensor=True):
        x, c = _points(x, tensor, _coefficients(c))
        if len(c) == 1:
            c0, c1 = c[0], 0
        elif len(c) == 2:
            c0, c1 = c[0], c[1]
        else:
            nd = len(c)
            c0, c1 = c[-2], c[-1]
            for i in range(3, len(c) + 1):
                nd = nd - 1
                c0, c1 = step(c[-i], c0, c1, nd, x)
        return last(c0, c1, x)
    return evaluate


chebval = _clenshaw(  # (NumPy doubles x once; each 2 * x here gives the same bits)
    lambda ci, c0, c1, nd, x: (ci - c1, c0 + c1 * (2 * x)),
    lambda c0, c1, x: c0 + c1 * x)
legval = _clenshaw(
    lambda ci, c0, c1, nd, x: (ci - c1 * ((nd - 1) / nd), c0 + c1 * x * ((2 * nd - 1) / nd)),
    lambda c0, c1, x: c0 + c1 * x)
hermval = _clenshaw(
    lambda ci, c0, c1, nd, x: (ci - c1 * (2 * (nd - 1)), c0 + c1 * (x * 2)),
    lambda c0, c1, x: c0 + c1 * (x * 2))
hermeval = _clenshaw(
    lambda ci, c0, c1, nd, x: (ci - c1 * (nd - 1), c0 + c1 * x),
    lambda c0, c1, x: c0 + c1 * x)
lagval = _clenshaw(
    lambda ci, c0, c1, nd, x: (ci - (c1 * (nd - 1)) / nd, c0 + (c1 * ((2 * nd - 1) - x)) / nd),
    lambda c0, c1, x: c0 + c1 * (1 - x))


def _vander(first, recurrence):
    """A ``*vander``: row 0 is ``x * 0 + 1``, row 1 ``first(x)``, row ``i``
    ``recurrence(v, i, x)`` of the rows before, stacked along the last axis as NumPy's."""
    def vander(x, deg):
        ideg = _pu._as_int(deg, "deg")
        if ideg < 0:
            raise ValueError("deg must be non-negative")
        x = (np.atleast_1d(x) if wrapped(x) else np.array(x, copy=None, ndmin=1)) + 0.0
        v = [x * 0 + 1]
        if ideg > 0:
            v.append(first(x))
            for i in range(2, ideg + 1):
                v.append(recurrence(v, i, x))
        return np.moveaxis(np.stack(v), 0, -1)
    return vander


polyvander = _vander(lambda x: x, lambda v, i, x: v[i - 1] * x)
legvander = _vander(lambda x: x,
                    lambda v, i, x: (v[i - 1] * x * (2 * i - 1) - v[i - 2] * (i - 1)) / i)
hermevander = _vander(lambda x: x, lambda v, i, x: v[i - 1] * x - v[i - 2] * (i - 1))
lagvander = _vander(lambda x: 1 - x,
                    lambda v, i, x: (v[i - 1] * (2 * i - 1 - x) - v[i - 2] * (i - 1)) / i)


chebvander = _vander(lambda x: x, lambda v, i, x: v[i - 1] * (2 * x) - v[i - 2])
hermvander = _vander(lambda x: x * 2,
                     lambda v, i, x: v[i - 1] * (x * 2) - v[i - 2] * (2 * (i - 1)))


# Derivatives and integrals (``*der``, ``*int``): NumPy's loops write row by row into
# ``np.empty`` and update rows of ``c`` in place; here the rows are a list, each row computed
# by the same operations in the same order (so the same bits), stacked at the end.


def _rows_of(c, iaxis):
    return list(np.moveaxis(c, iaxis, 0))


def _derivative(step, early_return=False):
    """A ``*der``: ``step(rows, n)`` turns the rows of one differentiation (already scaled)
    into the ``n`` rows of the derivative, as NumPy's inner loop does. ``early_return``:
    ``hermeder`` returns ``c[:1] * 0`` before moving the axis back (NumPy's own quirk, kept)."""
    def der(c, m=1, scl=1, axis=0):
        c = np.copy(_coefficients(c))
        cnt = _pu._as_int(m, "the order of derivation")
        iaxis = _pu._as_int(axis, "the axis")
        if cnt < 0:
            raise ValueError("The order of derivation must be non-negative")
        iaxis = np.lib.array_utils.normalize_axis_index(iaxis, c.ndim)
        if cnt == 0:
            return c
        rows = _rows_of(c, iaxis)
        n = len(rows)
        if cnt >= n:
            c = np.moveaxis(c, iaxis, 0)[:1] * 0
            if early_return:
                return c
        else:
            dtype = c.dtype
            for _ in range(cnt):
                n = n - 1
                rows = step([_updated(r * scl, dtype) for r in rows], n)
            c = np.stack(rows)
        return np.moveaxis(c, 0, iaxis)
    return der


def _updated(value, dtype):
    """``value``, which NumPy's ``c *= scl`` or ``tmp[0] += ...`` writes into its array of the
    coefficients' ``dtype``, as that write leaves it: float32 coefficients scaled by a float64
    (a series' mapparms) stay float32, rounded."""
    return value if value.dtype == dtype else value.astype(dtype)


def _polyder_step(c, n):
    return [j * c[j] for j in range(1, n + 1)]


def _chebder_step(c, n):
    der = [None] * n
    for j in range(n, 2, -1):
        der[j - 1] = (2 * j) * c[j]
        c[j - 2] = c[j - 2] + (j * c[j]) / (j - 2)
    if n > 1:
        der[1] = 4 * c[2]
    der[0] = c[1]
    return der


def _legder_step(c, n):
    der = [None] * n
    for j in range(n, 2, -1):
        der[j - 1] = (2 * j - 1) * c[j]
        c[j - 2] = c[j - 2] + c[j]
    if n > 1:
        der[1] = 3 * c[2]
    der[0] = c[1]
    return der


def _hermder_step(c, n):
    return [(2 * j) * c[j] for j in range(1, n + 1)]


def _lagder_step(c, n):
    der = [None] * n
    for j in range(n, 1, -1):
        der[j - 1] = -c[j]
        c[j - 1] = c[j - 1] + c[j]
    der[0] = -c[1]
    return der


def _integral(step, val):
    """A ``*int``: ``step(rows, n)`` gives the ``n + 1`` rows of one integration of the
    (scaled) rows, before the constant; row 0 then gets ``k - val(lbnd, rows)`` added, as
    NumPy's ``tmp[0] += k[i] - val(lbnd, tmp)``."""
    def integral(c, m=1, k=[], lbnd=0, scl=1, axis=0):  # noqa: B006 (NumPy's signature)
        c = np.copy(_coefficients(c))
        if not np.iterable(k):
            k = [k]
        cnt = _pu._as_int(m, "the order of integration")
        iaxis = _pu._as_int(axis, "the axis")
        if cnt < 0:
            raise ValueError("The order of integration must be non-negative")
        if len(k) > cnt:
            raise ValueError("Too many integration constants")
        if np.ndim(lbnd) != 0:
            raise ValueError("lbnd must be a scalar.")
        if np.ndim(scl) != 0:
            raise ValueError("scl must be a scalar.")
        iaxis = np.lib.array_utils.normalize_axis_index(iaxis, c.ndim)
        if cnt == 0:
            return c
        c = np.moveaxis(c, iaxis, 0)
        k = list(k) + [0] * (cnt - len(k))
        dtype = c.dtype
        for i in range(cnt):
            n = len(c)
            c = _updated(c * scl, dtype)
            if n == 1 and np.all(c[0] == 0):
                c = np.stack([_updated(c[0] + k[i], dtype)])
            else:
                tmp = step(list(c), n)
                tmp[0] = _updated(tmp[0] + (k[i] - val(lbnd, np.stack(tmp))), dtype)
                c = np.stack(tmp)
        return np.moveaxis(c, 0, iaxis)
    return integral


def _polyint_step(c, n):
    return [c[0] * 0, c[0]] + [c[j] / (j + 1) for j in range(1, n)]


def _chebint_step(c, n):
    tmp = [c[0] * 0, c[0]] + [None] * (n - 1)
    if n > 1:
        tmp[2] = c[1] / 4
    for j in range(2, n):
        tmp[j + 1] = c[j] / (2 * (j + 1))
        tmp[j - 1] = tmp[j - 1] - c[j] / (2 * (j - 1))
    return tmp


def _legint_step(c, n):
    tmp = [c[0] * 0, c[0]] + [None] * (n - 1)
    if n > 1:
        tmp[2] = c[1] / 3
    for j in range(2, n):
        t = c[j] / (2 * j + 1)
        tmp[j + 1] = t
        tmp[j - 1] = tmp[j - 1] - t
    return tmp


def _hermint_step(c, n):
    return [c[0] * 0, c[0] / 2] + [c[j] / (2 * (j + 1)) for j in range(1, n)]


def _hermeint_step(c, n):
    return [c[0] * 0, c[0]] + [c[j] / (j + 1) for j in range(1, n)]


def _lagint_step(c, n):
    tmp = [c[0], -c[0]] + [None] * (n - 1)
    for j in range(1, n):
        tmp[j] = tmp[j] + c[j]
        tmp[j + 1] = -c[j]
    return tmp


polyder, polyint = _derivative(_polyder_step), _integral(_polyint_step, polyval)
chebder, chebint = _derivative(_chebder_step), _integral(_chebint_step, chebval)
legder, legint = _derivative(_legder_step), _integral(_legint_step, legval)
hermder, hermint = _derivative(_hermder_step), _integral(_hermint_step, hermval)
hermeder = _derivative(_polyder_step, early_return=True)
hermeint = _integral(_hermeint_step, hermeval)
lagder, lagint = _derivative(_lagder_step), _integral(_lagint_step, lagval)


def _as_float(a):
    """``np.asarray(a) + 0.0``."""
    return (a if wrapped(a) else np.asarray(a)) + 0.0


def _fit(vander_f, x, y, deg, rcond=None, full=False, w=None):
    """``numpy.polynomial.polyutils._fit``, step by step."""
    x, y = _as_float(x), _as_float(y)
    deg = np.asarray(deg)
    if deg.ndim > 1 or deg.dtype.kind not in "iu" or deg.size == 0:
        raise TypeError("deg must be an int or non-empty 1-D array of int")
    if deg.min() < 0:
        raise ValueError("expected deg >= 0")
    check_fit_data(x, y)
    if deg.ndim == 0:
        lmax = deg
        order = lmax + 1
        van = vander_f(x, lmax)
    else:
        deg = np.sort(deg)
        lmax = deg[-1]
        order = len(deg)
        van = vander_f(x, lmax)[:, deg]
    lhs = van.T
    rhs = y.T
    if w is not None:
        w = _as_float(w)
        if np.ndim(w) != 1:
            raise TypeError("expected 1D vector for w")
        if len(x) != len(w):
            raise TypeError("expected x and w to have same length")
        lhs = lhs * w
        rhs = rhs * w
    if rcond is None:
        rcond = len(x) * np.finfo(x.dtype).eps
    if issubclass(lhs.dtype.type, np.complexfloating):
        scl = np.sqrt((np.square(np.real(lhs)) + np.square(np.imag(lhs))).sum(1))
    else:
        scl = np.sqrt(np.square(lhs).sum(1))
    scl = np.where(scl == 0, 1.0, scl)  # NumPy's scl[scl == 0] = 1
    c, resids, rank, s = np.linalg.lstsq(lhs.T / scl, rhs.T, rcond)
    c = (c.T / scl).T
    if deg.ndim > 0:
        shape = (lmax + 1, c.shape[1]) if c.ndim == 2 else (lmax + 1,)
        cc = np.zeros_like(c, shape=shape)
        cc[deg] = c
        c = cc
    if rank != order and not full:
        warnings.warn("The fit may be poorly conditioned", np.exceptions.RankWarning,
                      stacklevel=4)
    if full:
        return c, [resids, rank, s, rcond]
    return c


def _fitting(vander_f):
    def fit(x, y, deg, rcond=None, full=False, w=None):
        return _fit(vander_f, x, y, deg, rcond, full, w)
    return fit


# Roots (``*roots``): the eigenvalues of NumPy's companion matrix (rotated, but for the power
# series), sorted. Its constant entries are NumPy's companion of the unit series; its last
# column, the one the coefficients enter, NumPy's update of them, differentiated (eigvals'
# rule: simple roots).


def _trimseq(seq):
    """``polyutils.trimseq``: ``seq`` without its trailing zeros (at least one coefficient).
    Zeros trimmed from differentiated coefficients are refused, as ``np.trim_zeros`` refuses
    them: the series' degree falls where they are zero, and the trimmed series has not the
    derivative of the whole (its roots go to infinity as its leading coefficient goes to 0)."""
    if len(seq) == 0 or not seq[-1] == 0:
        return seq
    n = len(seq)
    while n > 1 and seq[n - 1] == 0:
        n -= 1
    if n < len(seq) and holds_derivative([seq]):
        raise UnsupportedOperationError(
            "a numpy.polynomial series whose trailing coefficients are zeros of an array that "
            "carries a derivative (an argument, a result, or a step of NumPy's arithmetic on "
            "series): NumPy trims them, and the trimmed series has not the derivative of the "
            "whole (its degree falls; its roots go to infinity). Slice off constant zeros "
            "yourself (c[:-1]); where a product or quotient cancels exactly, compute it with "
            "*val of the series instead.")
    return seq[:n]


def _as_series(*alist, trim=True):
    """``polyutils.as_series(alist, trim)``: each a 1-d copy, without trailing zeros
    (``_trimseq``) where ``trim``, all of NumPy's common type (a list holding traced numbers as
    the array NumPy makes of it)."""
    alist = lists_as_arrays(alist)
    arrays = [np.reshape(a, (-1,)) if wrapped(a) and np.ndim(a) == 0 else
              a if wrapped(a) else np.array(a, ndmin=1, copy=None) for a in alist]
    for a in arrays:
        if np.size(a) == 0:
            raise ValueError("Coefficient array is empty")
        if np.ndim(a) != 1:
            raise ValueError("Coefficient array is not 1-d")
    if trim:
        arrays = [_trimseq(a) for a in arrays]
    dtype = np.common_type(*(np.empty(0, np.dtype(a.dtype)) for a in arrays))
    like = next((a for a in arrays if wrapped(a)), None)  # a plain copy beside a traced one
    return [a.astype(dtype) if wrapped(a) else  # is followed: NumPy writes into its copies
            np.array(a, copy=True, dtype=dtype, **({} if like is None else {"like": like}))
            for a in arrays]


def _buffer(n, dtype, *like):
    """NumPy's ``np.empty(n, dtype)`` of a series' loop, followed where ``like`` holds a traced
    series (zeros: every entry is written before it is read)."""
    traced = next((x for x in like if wrapped(x)), None)
    return np.zeros(n, dtype) if traced is None else np.zeros_like(traced, shape=n, dtype=dtype)


# Arithmetic (``*add``, ``*sub``, ``*mul``, ``*mulx``, ``*div``, ``*pow``): NumPy's code, line
# for line, on copies the differentiation follows (its in-place updates recorded), so the
# values are NumPy's bit for bit.


def _add(c1, c2):
    c1, c2 = _as_series(c1, c2)
    if len(c1) > len(c2):
        c1[:len(c2)] += c2
        ret = c1
    else:
        c2[:len(c1)] += c1
        ret = c2
    return _trimseq(ret)


def _sub(c1, c2):
    c1, c2 = _as_series(c1, c2)
    if len(c1) > len(c2):
        c1[:len(c2)] -= c2
        ret = c1
    else:
        c2 = -c2
        c2[:len(c1)] += c1
        ret = c2
    return _trimseq(ret)


def _pow(mul_f, c, pow, maxpower):
    [c] = _as_series(c)
    power = int(pow)
    if power != pow or power < 0:
        raise ValueError("Power must be a non-negative integer.")
    elif maxpower is not None and power > maxpower:
        raise ValueError("Power is too large")
    elif power == 0:
        return np.array([1], dtype=c.dtype)
    elif power == 1:
        return c
    prd = c
    for _ in range(2, power + 1):
        prd = mul_f(prd, c)
    return prd


def _div(mul_f, c1, c2):
    c1, c2 = _as_series(c1, c2)
    if c2[-1] == 0:
        raise ZeroDivisionError
    lc1, lc2 = len(c1), len(c2)
    if lc1 < lc2:
        return c1[:1] * 0, c1
    elif lc2 == 1:
        return c1 / c2[-1], c1[:1] * 0
    quo = _buffer(lc1 - lc2 + 1, c1.dtype, c1, c2)
    rem = c1
    for i in range(lc1 - lc2, - 1, -1):
        p = mul_f([0] * i + [1], c2)
        q = rem[-1] / p[-1]
        rem = rem[:-1] - q * p[:-1]
        quo[i] = q
    return quo, _trimseq(rem)


def polymul(c1, c2):
    c1, c2 = _as_series(c1, c2)
    return _trimseq(np.convolve(c1, c2))


def polydiv(c1, c2):
    c1, c2 = _as_series(c1, c2)
    if c2[-1] == 0:
        raise ZeroDivisionError
    lc1, lc2 = len(c1), len(c2)
    if lc1 < lc2:
        return c1[:1] * 0, c1
    elif lc2 == 1:
        return c1 / c2[-1], c1[:1] * 0
    dlen = lc1 - lc2
    scl = c2[-1]
    c2 = c2[:-1] / scl
    i, j = dlen, lc1 - 1
    while i >= 0:
        c1[i:j] -= c2 * c1[j]
        i -= 1
        j -= 1
    return c1[j + 1:] / scl, _trimseq(c1[:j + 1])


def polypow(c, pow, maxpower=None):
    return _pow(np.convolve, c, pow, maxpower)


def _cseries_to_zseries(c):
    n = len(c)
    zs = _buffer(2 * n - 1, c.dtype, c)
    zs[n - 1:] = c / 2
    return zs + zs[::-1]


def _zseries_to_cseries(zs):
    n = (len(zs) + 1) // 2
    c = zs[n - 1:].copy()
    c[1:n] *= 2
    return c


def _zseries_div(z1, z2):
    z1, z2 = z1.copy(), z2.copy()
    lc1, lc2 = len(z1), len(z2)
    if lc2 == 1:
        z1 /= z2
        return z1, z1[:1] * 0
    elif lc1 < lc2:
        return z1[:1] * 0, z1
    dlen = lc1 - lc2
    scl = z2[0]
    z2 /= scl
    quo = _buffer(dlen + 1, z1.dtype, z1, z2)
    i, j = 0, dlen
    while i < j:
        r = z1[i]
        quo[i] = z1[i]
        quo[dlen - i] = r
        tmp = r * z2
        z1[i:i + lc2] -= tmp
        z1[j:j + lc2] -= tmp
        i += 1
        j -= 1
    r = z1[i]
    quo[i] = r
    tmp = r * z2
    z1[i:i + lc2] -= tmp
    quo /= scl
    rem = z1[i + 1:i - 1 + lc2].copy()
    return quo, rem


def chebmul(c1, c2):
    c1, c2 = _as_series(c1, c2)
    prd = np.convolve(_cseries_to_zseries(c1), _cseries_to_zseries(c2))
    return _trimseq(_zseries_to_cseries(prd))


def chebdiv(c1, c2):
    c1, c2 = _as_series(c1, c2)
    if c2[-1] == 0:
        raise ZeroDivisionError
    lc1, lc2 = len(c1), len(c2)
    if lc1 < lc2:
        return c1[:1] * 0, c1
    elif lc2 == 1:
        return c1 / c2[-1], c1[:1] * 0
    quo, rem = _zseries_div(_cseries_to_zseries(c1), _cseries_to_zseries(c2))
    return _trimseq(_zseries_to_cseries(quo)), _trimseq(_zseries_to_cseries(rem))


def chebpow(c, pow, maxpower=16):
    [c] = _as_series(c)
    power = int(pow)
    if power != pow or power < 0:
        raise ValueError("Power must be a non-negative integer.")
    elif maxpower is not None and power > maxpower:
        raise ValueError("Power is too large")
    elif power == 0:
        return np.array([1], dtype=c.dtype)
    elif power == 1:
        return c
    zs = _cseries_to_zseries(c)
    prd = zs
    for _ in range(2, power + 1):
        prd = np.convolve(prd, zs)
    return _zseries_to_cseries(prd)


def _times_x(first, step):
    """A ``*mulx``: ``first(prd, c)`` writes the first two entries, ``step(prd, c, i)`` the
    entries of term ``i``, into NumPy's ``np.empty`` (here followed)."""
    def mulx(c):
        [c] = _as_series(c)
        if len(c) == 1 and c[0] == 0:  # the zero series
            return c
        prd = _buffer(len(c) + 1, c.dtype, c)
        first(prd, c)
        for i in range(1, len(c)):
            step(prd, c, i)
        return prd
    return mulx


def _polymulx_step(prd, c, i):  # (NumPy's prd[1:] = c)
    prd[i + 1] = c[i]


def _chebmulx_step(prd, c, i):  # (NumPy's prd[2:] = c[1:] / 2, then prd[:-2] += c[1:] / 2)
    prd[i + 1] = c[i] / 2
    prd[i - 1] += c[i] / 2


def _legmulx_step(prd, c, i):
    j, k = i + 1, i - 1
    s = i + j
    prd[j] = (c[i] * j) / s
    prd[k] += (c[i] * i) / s


def _hermmulx_step(prd, c, i):
    prd[i + 1] = c[i] / 2
    prd[i - 1] += c[i] * i


def _hermemulx_step(prd, c, i):
    prd[i + 1] = c[i]
    prd[i - 1] += c[i] * i


def _lagmulx_step(prd, c, i):
    prd[i + 1] = -c[i] * (i + 1)
    prd[i] += c[i] * (2 * i + 1)
    prd[i - 1] -= c[i] * i


def _first(second):
    def first(prd, c):
        prd[0] = c[0] * 0
        prd[1] = second(c[0])
    return first


def _lag_first(prd, c):
    prd[0] = c[0]
    prd[1] = -c[0]


polymulx = _times_x(_first(lambda c0: c0), _polymulx_step)
chebmulx = _times_x(_first(lambda c0: c0), _chebmulx_step)
legmulx = _times_x(_first(lambda c0: c0), _legmulx_step)
hermmulx = _times_x(_first(lambda c0: c0 / 2), _hermmulx_step)
hermemulx = _times_x(_first(lambda c0: c0), _hermemulx_step)
lagmulx = _times_x(_lag_first, _lagmulx_step)


def _by_recurrence(step, last):
    """``legmul``, ``hermmul``, ``hermemul``, ``lagmul``: the shorter series' Clenshaw
    recurrence on the longer one, ``step(c0, c1, ci_xs, nd)`` the next pair,
    ``last(c0, c1)`` the product, as NumPy's loop computes them."""
    def mul(c1, c2):
        c1, c2 = _as_series(c1, c2)
        c, xs = (c2, c1) if len(c1) > len(c2) else (c1, c2)

        def term(ci):
            # ci xs, which NumPy's add and sub trim to its first entry where it is all zeros:
            # sliced here where it is so for a constant ci = 0 (the unit series of *div), as
            # the trim would slice it, since the trim refuses differentiated zeros
            product = ci * xs
            if not holds_derivative([c]) and ci == 0 and np.all(product == 0):
                return product[:1]
            return product

        if len(c) == 1:
            c0, c1 = term(c[0]), 0
        elif len(c) == 2:
            c0, c1 = term(c[0]), term(c[1])
        else:
            nd = len(c)
            c0, c1 = term(c[-2]), term(c[-1])
            for i in range(3, len(c) + 1):
                nd = nd - 1
                c0, c1 = step(c0, c1, term(c[-i]), nd)
        return last(c0, c1)
    return mul


legmul = _by_recurrence(
    lambda c0, c1, cx, nd: (_sub(cx, (c1 * (nd - 1)) / nd),
                            _add(c0, (legmulx(c1) * (2 * nd - 1)) / nd)),
    lambda c0, c1: _add(c0, legmulx(c1)))
hermmul = _by_recurrence(
    lambda c0, c1, cx, nd: (_sub(cx, c1 * (2 * (nd - 1))), _add(c0, hermmulx(c1) * 2)),
    lambda c0, c1: _add(c0, hermmulx(c1) * 2))
hermemul = _by_recurrence(
    lambda c0, c1, cx, nd: (_sub(cx, c1 * (nd - 1)), _add(c0, hermemulx(c1))),
    lambda c0, c1: _add(c0, hermemulx(c1)))
lagmul = _by_recurrence(
    lambda c0, c1, cx, nd: (_sub(cx, (c1 * (nd - 1)) / nd),
                            _add(c0, _sub((2 * nd - 1) * c1, lagmulx(c1)) / nd)),
    lambda c0, c1: _add(c0, _sub(c1, lagmulx(c1))))


def _hermite_scale(two):
    def scale(n):
        return np.multiply.accumulate(np.hstack((1., 1. / np.sqrt(
            (2. if two else 1.) * np.arange(n - 1, 0, -1)))))[::-1]
    return scale


_ROOTS = {  # prefix: (the root of a degree-1 series, the update of the last column, its sign)
    "poly": (lambda c: -c[0] / c[1], lambda c, n: c[:-1] / c[-1], -1),
    "cheb": (lambda c: -c[0] / c[1], lambda c, n: (c[:-1] / c[-1]) * (
        (lambda scl: scl / scl[-1])(np.array([1.] + [np.sqrt(.5)] * (n - 1)))) * .5, -1),
    "leg": (lambda c: -c[0] / c[1], lambda c, n: (c[:-1] / c[-1]) * (
        (lambda scl: scl / scl[-1])(1. / np.sqrt(2 * np.arange(n) + 1))) * (n / (2 * n - 1)),
        -1),
    "herm": (lambda c: -.5 * c[0] / c[1],
             lambda c, n: _hermite_scale(True)(n) * c[:-1] / (2.0 * c[-1]), -1),
    "herme": (lambda c: -c[0] / c[1], lambda c, n: _hermite_scale(False)(n) * c[:-1] / c[-1],
              -1),
    "lag": (lambda c: 1 + c[0] / c[1], lambda c, n: (c[:-1] / c[-1]) * n, 1),
}


def _companion(module, prefix):
    """``*companion(c)``: NumPy's companion matrix of unit coefficients, its last column
    updated by the coefficients' terms as NumPy updates it."""
    linear, update, sign = _ROOTS[prefix]
    original = getattr(module, prefix + "companion")
    name = f"{original.__module__}.{original.__name__}"  # (as _standing_in keys it)
    NUMPYS[name] = original

    def companion_matrix(c, trimmed=False):
        if not trimmed:
            [c] = _as_series(c)
            if len(c) < 2:
                raise ValueError("Series must have maximum degree of at least 1.")
        if len(c) == 2:
            return np.reshape(linear(c), (1, 1))
        n = len(c) - 1
        unit = np.zeros(n + 1, dtype=c.dtype)
        unit[-1] = 1
        base = NUMPYS[name](unit)  # NumPy's, its last column updated by zeros
        column = base[:, -1] - update(c, n) if sign < 0 else base[:, -1] + update(c, n)
        # (NumPy updates the column in place: in the companion's dtype, where the update of
        # float32 coefficients by float64 scales is float64)
        column = column.astype(base.dtype, copy=False)
        return np.concatenate([base[:, :-1], np.reshape(column, (n, 1))], axis=1)
    return companion_matrix


def _roots(companion_matrix, prefix):
    def roots(c):
        [c] = _as_series(c)
        if len(c) < 2:
            return np.array([], dtype=c.dtype)
        if len(c) == 2:
            return np.reshape(_ROOTS[prefix][0](c), (1,))
        m = companion_matrix(c, trimmed=True)
        r = np.linalg.eigvals(m if prefix == "poly" else m[::-1, ::-1])
        r.sort()
        return r
    return roots


_LINES = {  # prefix: the coefficients of off + scl x
    "poly": lambda off, scl: [off, scl], "cheb": lambda off, scl: [off, scl],
    "leg": lambda off, scl: [off, scl], "herm": lambda off, scl: [off, scl / 2],
    "herme": lambda off, scl: [off, scl], "lag": lambda off, scl: [off + scl, -scl],
}


def _line(prefix):
    """``*line(off, scl)``: the array NumPy makes of the coefficients (one where scl is 0)."""
    coefficients = _LINES[prefix]

    def line(off, scl):
        return np.array(coefficients(off, scl) if scl != 0 else [off], like=_like(off, scl))
    return line


def _like(*values):
    """A traced value among ``values`` (the ``like=`` of an array mutad makes of them), or
    None."""
    return next((v for v in values if wrapped(v)), None)


def _fromroots(line_f, mul_f, roots):
    """``polyutils._fromroots``: the product of the lines of the sorted roots, paired as NumPy
    pairs them."""
    if len(roots) == 0:
        return np.ones(1)
    [roots] = _as_series(roots, trim=False)
    roots = np.sort(roots)  # (NumPy sorts its copy in place)
    p = [line_f(-r, 1) for r in roots]
    n = len(p)
    while n > 1:
        m, r = divmod(n, 2)
        tmp = [mul_f(p[i], p[i + m]) for i in range(m)]
        if r:
            tmp[0] = mul_f(tmp[0], p[-1])
        p = tmp
        n = m
    return p[0]


def _trimcoef(c, tol=0):
    """``polyutils.trimcoef`` (every ``*trim``): the series without its trailing coefficients
    of magnitude at most ``tol`` (exact zeros of differentiated values refused, ``_trimseq``)."""
    if tol < 0:
        raise ValueError("tol must be non-negative")
    [c] = _as_series(c)
    [ind] = np.nonzero(np.abs(c) > tol)
    if len(ind) == 0:
        return c[:1] * 0
    return c[:ind[-1] + 1].copy()


def _valnd(val_f, c, *args):
    """``polyutils._valnd`` (``*val2d``, ``*val3d``): ``val_f`` along each ordinate."""
    args = [a if wrapped(a) else np.asanyarray(a) for a in args]
    shape0 = np.shape(args[0])
    if not all(np.shape(a) == shape0 for a in args[1:]):
        raise ValueError({3: "x, y, z are incompatible", 2: "x, y are incompatible"}.get(
            len(args), "ordinates are incompatible"))
    c = val_f(args[0], c)
    for xi in args[1:]:
        c = val_f(xi, c, tensor=False)
    return c


def _vander_nd(vander_fs, points, degrees):
    """``polyutils._vander_nd`` (``*vander2d``, ``*vander3d``): the product of the 1-d
    pseudo-Vandermonde matrices, each along an axis of its own, of the points as one array."""
    n_dims = len(vander_fs)
    if n_dims != len(points):
        raise ValueError(f"Expected {n_dims} dimensions of sample points, got {len(points)}")
    if n_dims != len(degrees):
        raise ValueError(f"Expected {n_dims} dimensions of degrees, got {len(degrees)}")
    if n_dims == 0:
        raise ValueError("Unable to guess a dtype or shape when no points are given")
    [stacked] = lists_as_arrays([tuple(points)])
    points = tuple(np.asarray(stacked) + 0.0) if not wrapped(stacked) else tuple(stacked + 0.0)
    result = None
    for i in range(n_dims):
        v = vander_fs[i](points[i], degrees[i])[(...,) + _pu._nth_slice(i, n_dims)]
        result = v if result is None else result * v
    return result


_ARITHMETIC = {  # prefix: its mul, div, pow and mulx
    "poly": (polymul, polydiv, polypow, polymulx),
    "cheb": (chebmul, chebdiv, chebpow, chebmulx),
    "leg": (legmul, lambda c1, c2: _div(legmul, c1, c2),
            lambda c, pow, maxpower=16: _pow(legmul, c, pow, maxpower), legmulx),
    "herm": (hermmul, lambda c1, c2: _div(hermmul, c1, c2),
             lambda c, pow, maxpower=16: _pow(hermmul, c, pow, maxpower), hermmulx),
    "herme": (hermemul, lambda c1, c2: _div(hermemul, c1, c2),
              lambda c, pow, maxpower=16: _pow(hermemul, c, pow, maxpower), hermemulx),
    "lag": (lagmul, lambda c1, c2: _div(lagmul, c1, c2),
            lambda c, pow, maxpower=16: _pow(lagmul, c, pow, maxpower), lagmulx),
}


_KINDS = {  # module: (class, its val, vander, der, int, as NumPy names them)
    _P.polynomial: (_P.Polynomial, "poly", polyval, polyvander, polyder, polyint),
    _P.chebyshev: (_P.Chebyshev, "cheb", chebval, chebvander, chebder, chebint),
    _P.legendre: (_P.Legendre, "leg", legval, legvander, legder, legint),
    _P.hermite: (_P.Hermite, "herm", hermval, hermvander, hermder, hermint),
    _P.hermite_e: (_P.HermiteE, "herme", hermeval, hermevander, hermeder, hermeint),
    _P.laguerre: (_P.Laguerre, "lag", lagval, lagvander, lagder, lagint),
}


NUMPYS = {}
"""NumPy's functions the compositions and stand-ins call, by name: not in a closure cell, where
the allocation mode would swap in the route of the very function (``_swap_cells``: the user's
``f = polyder`` reaches the stand-in), which calls the stand-in again."""


def _standing_in(original, composite):
    """``original``'s stand-in while a differentiation runs: the composition when a value
    carrying a derivative is among the arguments, NumPy's function otherwise."""
    key = f"{original.__module__}.{original.__name__}"
    NUMPYS[key] = original

    def stand_in(*args, **kwargs):
        if holds_derivative(list(args)) or holds_derivative(list(kwargs.values())):
            return composite(*args, **kwargs)
        return by_user_code(NUMPYS[key](*args, **kwargs), NUMPYS[key], args, kwargs,
                            sys._getframe(1))
    stand_in.__name__ = stand_in.__qualname__ = original.__name__
    stand_in.__doc__ = original.__doc__
    stand_in.__module__ = __name__
    defroute(original, stand_in)
    return stand_in


_REFUSED = threading.local()
"""The refusal a series' arithmetic raised last in this thread: NumPy's operators turn any error
of it into NotImplemented (Python's TypeError of unsupported operands), so ``_operator``
raises it again."""


def _recording(composite):
    def recorded(*args, **kwargs):
        try:
            return composite(*args, **kwargs)
        except MutadError as error:
            _REFUSED.error = error
            raise
    return recorded


def _operator(name):
    """NumPy's operator ``name`` of the series classes, raising the refusal of mutad's
    arithmetic that NumPy's would turn into NotImplemented."""
    original = getattr(ABCPolyBase, name)

    def operator(self, *args):
        _REFUSED.error = None
        result = original(self, *args)
        if result is NotImplemented and getattr(_REFUSED, "error", None) is not None:
            raise _REFUSED.error
        return result

    operator.always = True  # it reads the operands' coefficients: every call
    defmethod(ABCPolyBase, name, operator)


for _name in ("__add__", "__sub__", "__mul__", "__floordiv__", "__mod__", "__divmod__",
              "__radd__", "__rsub__", "__rmul__", "__rfloordiv__", "__rmod__", "__rdivmod__"):
    _operator(_name)


COMPOSITES = {}
"""NumPy's function -> the composition that stands in for it on traced values."""

for _module, (_cls, _prefix, _val, _van, _der, _int) in _KINDS.items():
    _fit_f = _fitting(_van)
    _companion_f = _companion(_module, _prefix)
    _roots_f = _roots(_companion_f, _prefix)
    _mul, _div_f, _pow_f, _mulx = _ARITHMETIC[_prefix]
    for _name, _composite in ((_prefix + "val", _val), (_prefix + "vander", _van),
                              (_prefix + "fit", _fit_f), (_prefix + "der", _der),
                              (_prefix + "int", _int), (_prefix + "roots", _roots_f),
                              (_prefix + "add", _add), (_prefix + "sub", _sub),
                              (_prefix + "mul", _mul), (_prefix + "div", _div_f),
                              (_prefix + "pow", _pow_f), (_prefix + "mulx", _mulx),
                              (_prefix + "companion", _companion_f),
                              (_prefix + "line", _line(_prefix))):
        _original = getattr(_module, _name)
        COMPOSITES[_original] = _composite
        _standing_in(_original, _composite)
    # The class's own: its staticmethods _val, _fit, _der and _int (of deriv() and integ()),
    # called with traced coefficients or values (the original functions run otherwise).
    defmethod(_cls, "_val", _val)
    defmethod(_cls, "_fit", _fit_f)
    defmethod(_cls, "_der", _der)
    defmethod(_cls, "_int", _int)
    defmethod(_cls, "_roots", _roots_f)
    for _name, _composite in (("_add", _add), ("_sub", _sub), ("_mul", _mul),
                              ("_div", _div_f), ("_pow", _pow_f)):
        defmethod(_cls, _name, _recording(_composite))


# Conversions between the power basis and the others (``poly2cheb``, ``cheb2poly``, ...):
# NumPy's loops, line for line, of the arithmetic above.


def _from_power(mulx_f):
    """NumPy's ``poly2*``: Horner's scheme in the other basis, ``res = add(mulx(res), p)``
    from the top coefficient down."""
    def convert(pol):
        [pol] = _as_series(pol)
        res = 0
        for i in range(len(pol) - 1, -1, -1):
            res = _add(mulx_f(res), pol[i])
        return res
    return convert


def _to_power(step, last, fewest=3, pair=None):
    """NumPy's ``*2poly``: the basis's recurrence run down from the top two coefficients
    (``step(c, c0, c1, i)`` gives the next pair), a series shorter than ``fewest`` as it is
    (of two coefficients ``pair(c)`` where NumPy rescales it)."""
    def convert(c):
        [c] = _as_series(c)
        n = len(c)
        if n < fewest:
            return c if pair is None or n == 1 else pair(c)
        c0, c1 = c[-2], c[-1]
        for i in range(n - 1, 1, -1):
            c0, c1 = step(c, c0, c1, i)
        return last(c0, c1)
    return convert


def _herm_pair(c):
    c[1] *= 2
    return c


for _original, _composite in (
        (_P.chebyshev.poly2cheb, _from_power(chebmulx)),
        (_P.legendre.poly2leg, _from_power(legmulx)),
        (_P.hermite.poly2herm, _from_power(hermmulx)),
        (_P.hermite_e.poly2herme, _from_power(hermemulx)),
        (_P.laguerre.poly2lag, _from_power(lagmulx)),
        (_P.chebyshev.cheb2poly, _to_power(
            lambda c, c0, c1, i: (_sub(c[i - 2], c1), _add(c0, polymulx(c1) * 2)),
            lambda c0, c1: _add(c0, polymulx(c1)))),
        (_P.legendre.leg2poly, _to_power(
            lambda c, c0, c1, i: (_sub(c[i - 2], (c1 * (i - 1)) / i),
                                  _add(c0, (polymulx(c1) * (2 * i - 1)) / i)),
            lambda c0, c1: _add(c0, polymulx(c1)))),
        (_P.hermite.herm2poly, _to_power(
            lambda c, c0, c1, i: (_sub(c[i - 2], c1 * (2 * (i - 1))), _add(c0, polymulx(c1) * 2)),
            lambda c0, c1: _add(c0, polymulx(c1) * 2), pair=_herm_pair)),
        (_P.hermite_e.herme2poly, _to_power(
            lambda c, c0, c1, i: (_sub(c[i - 2], c1 * (i - 1)), _add(c0, polymulx(c1))),
            lambda c0, c1: _add(c0, polymulx(c1)))),
        (_P.laguerre.lag2poly, _to_power(
            lambda c, c0, c1, i: (_sub(c[i - 2], (c1 * (i - 1)) / i),
                                  _add(c0, _sub((2 * i - 1) * c1, polymulx(c1)) / i)),
            lambda c0, c1: _add(c0, _sub(c1, polymulx(c1))), fewest=2))):
    COMPOSITES[_original] = _composite
    _standing_in(_original, _composite)

# ----------------------------------------------------------------------------------------------
# The series classes


def _init(self, coef, domain=None, window=None, symbol="x"):
    """``ABCPolyBase.__init__`` of traced coefficients: NumPy's checks of the domain, window
    and symbol on its own constructor (given plain zeros of the coefficients' shape), then the
    traced coefficients, copied as NumPy copies them (a list holding traced numbers as the
    array NumPy makes of it). Of plain ones (``Polynomial([1.0, 2.0])``), NumPy's constructor,
    whose new array of coefficients the user's code receives as a constant the function may
    write traced values into (``p.coef[0] = x[0]``, ``c = p.coef.copy()``), as np.zeros' is;
    NumPy's own code (``p.deriv()``'s series) receives NumPy's."""
    [coef] = lists_as_arrays([coef])
    if not holds_wrapped([coef]):
        _INIT(self, coef, domain, window, symbol)
        self.coef = by_user_code(self.coef, _coefficients_of, (type(self), coef, domain, window,
                                                                symbol), {}, sys._getframe(2))
        return
    if np.ndim(coef) != 1:
        raise ValueError("Coefficient array is not 1-d")
    if np.size(coef) == 0:
        raise ValueError("Coefficient array is empty")
    _INIT(self, np.zeros(np.shape(coef)), domain, window, symbol)
    self.coef = np.copy(coef) + 0.0 if np.dtype(coef.dtype).kind not in "fc" else np.copy(coef)


def _coefficients_of(cls, coef, domain, window, symbol):
    """The coefficients of NumPy's series ``cls(coef, ...)`` (a replay's constant, made again)."""
    return cls(coef, domain, window, symbol).coef


def _mapped(x, old, new):
    """``polyutils.mapdomain`` of traced points ``x`` (plain domain and window)."""
    off, scl = _pu.mapparms(old, new)
    return off + scl * x


def _call(self, arg):
    """``ABCPolyBase.__call__`` of traced points: mapped to the window, then evaluated."""
    if holds_derivative([self.domain, self.window]):
        _refuse_traced_domain(type(self).__name__ + "()")
    return self._val(_mapped(arg, self.domain, self.window), self.coef)


def _refuse_traced_domain(name):
    raise UnsupportedOperationError(
        f"{name} with a differentiated domain: mutad follows the coefficients and the points "
        "of a series, not its domain. Fit with the module's function instead "
        "(np.polynomial.polynomial.polyfit(x, y, deg), chebfit, ...: x and y differentiated) "
        "and evaluate with its val function (polyval(xq, coef), chebval, ...).")


def _fit_method(cls, x, y, deg, domain=None, rcond=None, full=False, w=None, window=None,
                symbol="x"):
    """``ABCPolyBase.fit`` with traced values: NumPy's own method when only ``y`` (or ``w``)
    carries a derivative (its ``_fit`` is then the composition); a traced ``x`` moves the
    domain, which mutad does not follow: refused, naming the module functions that fit a
    traced ``x``."""
    if holds_derivative([x]) or holds_derivative([domain, window]):
        _refuse_traced_domain(f"{cls.__name__}.fit")
    return _FIT.__func__(cls, x, y, deg, domain=domain, rcond=rcond, full=full, w=w,
                         window=window, symbol=symbol)


def _fromroots_method(cls, roots, domain=[], window=None, symbol="x"):  # noqa: B006 (NumPy's)
    """``ABCPolyBase.fromroots`` of traced roots, NumPy's steps: the roots mapped to the
    window, the product of their lines, scaled back. ``domain=None`` (the roots' own extent)
    would move the domain with them, which mutad does not follow: refused."""
    if domain is None or holds_derivative([domain, window]):
        raise UnsupportedOperationError(
            f"{cls.__name__}.fromroots with a differentiated domain (domain=None, the roots' "
            "extent): mutad follows the coefficients and the points of a series, not its "
            "domain. Give a plain domain (domain=[a, b]; the default is the class's), or use "
            "the module's function (np.polynomial.polynomial.polyfromroots(r), "
            "chebfromroots, ...).")
    [roots] = _as_series(roots, trim=False)
    if isinstance(domain, list) and len(domain) == 0:
        domain = cls.domain
    if window is None:
        window = cls.window
    deg = len(roots)
    off, scl = _pu.mapparms(domain, window)
    coef = cls._fromroots(off + scl * roots) / scl**deg
    return cls(coef, domain=domain, window=window, symbol=symbol)


_INIT = ABCPolyBase.__init__
_FIT = ABCPolyBase.__dict__["fit"]
# every construction while a differentiation runs: of coefficients the function follows, a
# constant among them (``Polynomial(np.ones(n))``), that array's copy, followed, so that traced
# values written into ``p.coef`` reach what the series computes; of plain ones, a constant too
_init.always = True  # type: ignore[attr-defined]
defmethod(ABCPolyBase, "__init__", _init)
defmethod(ABCPolyBase, "__call__", _call)
defmethod(ABCPolyBase, "fit", _fit_method)
defmethod(ABCPolyBase, "fromroots", _fromroots_method)


def _mapdomain(x, old, new):
    """``polyutils.mapdomain`` of traced points (``roots()`` maps the roots so), with a plain
    domain and window."""
    if holds_derivative([old, new]):
        _refuse_traced_domain("numpy.polynomial.polyutils.mapdomain")
    return _mapped(x, old, new)


_standing_in(_pu.mapdomain, _mapdomain)
for _original, _composite in ((_pu._fromroots, _fromroots), (_pu.trimcoef, _trimcoef),
                              (_pu._valnd, _valnd), (_pu._vander_nd, _vander_nd)):
    COMPOSITES[_original] = _composite
    _standing_in(_original, _composite)
del _original  # (a name of this module's left bound to a routed function would make the
# mode switch the module's class on every entry to route it: ``_RoutingModule``)


# The power series' polyval2d and polygrid2d dispatch on their arguments (NumPy's
# ``array_function_dispatch``): compositions of polyval, as NumPy computes them.

@defcomposite(_P.polynomial.polyval2d)
def _polyval2d(x, y, c):
    return _valnd(polyval, c, x, y)


@defcomposite(_P.polynomial.polygrid2d)
def _polygrid2d(x, y, c):
    return polyval(y, polyval(x, c))
