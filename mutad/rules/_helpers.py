"""What rules of several families share: cotangent plumbing, matrix helpers, and what pullbacks
need to stay differentiable under nested reverse mode. Rule modules import shared helpers from
here, never from one another.

Under nested differentiation (a gradient of a function that itself calls ``mutad.gradient``)
the inner differentiation's values, and so the cotangents its pullbacks receive, are arrays the
outer one traces. A pullback then builds its cotangents with NumPy calls that dispatch, so the
outer tape records them: no ``np.asarray``, no ``np.bincount`` with traced weights, and no
traced value written into a buffer made with ``np.zeros(shape)``. ``accumulator`` and ``stacked``
make accumulators that are traced when what will be added into them is, and plain (as fast as
before) otherwise.
"""

import importlib

import numpy as np

from ..core.devices import device_of, ufunc_at
from ..core.errors import UnsupportedOperationError
# the core's own, for rules to import from here
from ..engines.elementwise import unbroadcast  # noqa: F401
from ..core.views import NDARRAY, wrapped


class Template:
    """An input's shape, dtype and index order: all most pullbacks need to know about it.

    A pullback that keeps this instead of the array does not keep the array's values alive
    until the reverse pass.
    """

    __slots__ = ("shape", "ndim", "size", "dtype", "fortran", "device")

    def __init__(self, a):
        if not hasattr(a, "flags"):  # a scalar or a list; arrays (traced ones too) have it
            a = np.asarray(a)
        self.shape = a.shape
        self.ndim = a.ndim
        self.size = a.size
        self.dtype = a.dtype
        self.fortran = a.flags.f_contiguous and not a.flags.c_contiguous
        # the namespace of the device library whose array it is (CuPy), None for NumPy's
        self.device = None if type(a) is np.ndarray else device_of(a)

    def zeros(self, dtype=None):
        """Zeros of its shape and dtype (or ``dtype``), where its array lives."""
        dtype = self.dtype if dtype is None else dtype
        if self.device is None:
            return np.zeros(self.shape, dtype)
        return self.device.zeros(self.shape, dtype)


def expand(dy, shape, axis, keepdims):
    """Broadcast a cotangent reduced over ``axis`` back to ``shape``."""
    if axis is not None and not keepdims and shape:  # a 0-d input's axis 0 removes no axis
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        dy = np.expand_dims(dy, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(dy, shape)


def gather_cotangent(dy, a, rearrange, layout=None):
    """The cotangent of ``a`` for ``y = rearrange(a)`` that only copies elements of ``a``.

    ``rearrange`` is applied to the flat index of each element of ``a`` (laid out in memory as
    the array ``layout``, if given, for functions that read in memory order); every element of
    ``y`` then names its source, and its cotangent is added there. A source of -1 marks an
    element that came from no input (constant padding). A plain ``dy`` is added with
    ``np.bincount``; one an outer differentiation traces (nested reverse mode), with
    ``np.add.at`` into traced zeros, which that differentiation records, as is one wider than
    float64 (a long double), which ``np.bincount`` would refuse to add in float64.
    """
    xp = device_of(dy) or np  # the indices live where the cotangent does (a device's memory)
    sources = xp.arange(a.size).reshape(a.shape)
    if layout is not None:
        laid_out = np.empty_like(layout, dtype=np.intp)  # integers: plain even if layout is traced
        laid_out[...] = sources
        sources = laid_out
    sources = xp.asarray(rearrange(sources)).reshape(-1)
    weights = np.reshape(dy, -1)
    if xp is not np:  # on a device, without reading whether any source is -1 on the host
        outside = sources < 0
        weights = np.where(outside, 0.0, weights)
        sources = np.where(outside, 0, sources)
    elif sources.size and sources.min() < 0:
        weights = weights[sources >= 0]
        sources = sources[sources >= 0]
    if wrapped(dy) or np.finfo(weights.dtype).bits > 64:  # (bincount adds in float64)
        g = np.zeros_like(dy, shape=(a.size,))
        ufunc_at(np.add, g, sources, weights)
        return g.reshape(a.shape)
    if weights.dtype.kind == "c":  # np.bincount adds real weights: each part on its own
        g = (np.bincount(sources, weights=weights.real, minlength=a.size)
             + 1j * np.bincount(sources, weights=weights.imag, minlength=a.size))
    else:
        g = np.bincount(sources, weights=weights, minlength=a.size)
    return g.astype(dy.dtype, copy=False).reshape(a.shape)


def along(ndim, axis, key):
    """The index tuple that applies ``key`` along ``axis`` of an ``ndim``-dimensional array."""
    index = [slice(None)] * ndim
    index[axis] = key
    return tuple(index)


def transpose(x):
    """The matrix transpose of a stack of matrices (of a matrix, its ``.T``: the same view,
    without ``np.swapaxes``'s dispatch, which a pullback of small matrices in a loop pays
    several times per step)."""
    if type(x) is np.ndarray and x.ndim == 2:
        return x.T
    return np.swapaxes(x, -1, -2)


def symmetric_part(g):
    return 0.5 * (g + transpose(g))


class OneTriangle:
    """A real matrix ``a`` that is not symmetric, handed to a function that reads one triangle
    of it (``lower``, or the upper one; the diagonal included), as LAPACK's symmetric
    routines do: the call is that function of the symmetric matrix the triangle stands for
    (``matrix``), so the rules of the symmetric gradient serve it, with the cotangent of
    ``matrix`` carried back onto the triangle read (the other gets 0: ``pulled``) and a
    tangent of ``a`` carried onto ``matrix`` (``tangent``)."""

    def __init__(self, a, lower):
        self.lower = lower
        self.matrix = self.tangent(a)

    def tangent(self, da):
        """The symmetric matrix the triangle of ``da`` read stands for."""
        if self.lower:
            return np.tril(da) + transpose(np.tril(da, -1))
        return np.triu(da) + transpose(np.triu(da, 1))

    def cotangent(self, g):
        """The cotangent of ``a`` from ``g``, that of ``matrix``: each element read off the
        diagonal stands for two of ``matrix``."""
        if self.lower:
            return np.tril(g) + np.tril(transpose(g), -1)
        return np.triu(g) + np.triu(transpose(g), 1)

    def pulled(self, back):
        """``back``, a pullback giving ``matrix``'s cotangent first, giving ``a``'s."""
        def back_onto_the_triangle(dy):
            return (self.cotangent(back(dy)[0]),)

        back_onto_the_triangle.unreached_as_none = getattr(back, "unreached_as_none", False)
        return back_onto_the_triangle


def one_triangle(a, lower, name):
    """None for a symmetric (complex: Hermitian) matrix ``a``, which gets the symmetric
    gradient; else the :class:`OneTriangle` a function reading the ``lower`` (else the upper)
    triangle of ``a`` reads, for a real ``a``; a complex one is refused
    (:func:`require_symmetric`)."""
    if np.iscomplexobj(a):
        require_symmetric(a, name)
        return None
    return None if _symmetric(a) else OneTriangle(a, lower)  # (one check: a device's flag)


def _symmetric(a):
    """Whether the real matrix ``a`` is symmetric up to rounding (:func:`require_symmetric`);
    one whose infinities (inf - inf) or NaNs leave it undecided counts as symmetric. The
    check's own floating-point events are not the program's: none is reported."""
    with np.errstate(all="ignore"):
        scale = np.max(np.abs(a), initial=0.0)
        return not np.max(np.abs(a - transpose(a)), initial=0.0) > 1e-8 * scale


def require_symmetric(a, name):
    """Refuse a matrix that is not symmetric for a rule with the symmetric gradient (the
    derivative along symmetric perturbations): NumPy's function of a non-symmetric matrix reads
    one triangle, and its derivative along other perturbations is not that gradient. Rounding
    leaves a computed symmetric matrix (B @ B.T) asymmetric by a few ulps: that passes. A
    complex matrix must be Hermitian (its diagonal real), its rule having the Hermitian
    gradient."""
    if np.iscomplexobj(a):
        with np.errstate(all="ignore"):  # (as ``_symmetric``'s)
            scale = np.max(np.abs(a), initial=0.0)
            asymmetry = np.max(np.abs(a - np.conjugate(transpose(a))), initial=0.0)
        if asymmetry > 1e-8 * scale:
            raise UnsupportedOperationError(
                f"{name} of a complex matrix that is not Hermitian: it reads one triangle, and "
                "mutad gives the Hermitian gradient, the derivative along Hermitian "
                "perturbations, which is not the derivative of this call. Pass a Hermitian "
                "matrix, (A + A.conj().T) / 2, or the matrix its triangle stands for, "
                "np.tril(A, -1) + np.diag(A.diagonal().real) + np.tril(A, -1).conj().T.")
        return
    if not _symmetric(a):
        raise UnsupportedOperationError(
            f"{name} of a matrix that is not symmetric: it reads one triangle, and mutad gives "
            "the symmetric gradient, the derivative along symmetric perturbations, which is not "
            "the derivative of this call. Pass a symmetric matrix, (A + A.T) / 2, or the "
            "matrix its triangle stands for, np.tril(A) + np.tril(A, -1).T.")


def sign_of(x):
    """The sign of each element, NaN for NaN; two bytes (float16 holds -1, 0, 1 and NaN)."""
    return np.sign(x).astype(np.float16)


def logistic_density(x, scale=1.0):
    """scale² σ'(scale x), σ the logistic sigmoid, from x: scale² e / (1 + e)² with
    e = exp(-scale |x|) (for complex x, of whichever of ±x has a real part ≥ 0: σ' is even), a
    few ulps everywhere, also through its own derivative. From σ's rounded outputs it is 0
    where σ(-x) underflows, and tanh's derivative 4 σ'(2x) as 1 - tanh² 0 beyond |x| = 19.1
    (4.6e-17 at 19.5) and 4% off at 18. A plain real array takes two arrays of memory (the
    ufunc's output did one); a traced one is split at 0 by np.where, not by np.abs, whose
    subgradient 0 there would be each side's derivative."""
    if type(x) is np.ndarray and x.ndim and x.dtype.kind == "f":  # (0-d: np.abs gives a scalar)
        e = np.abs(x)
        np.multiply(e, -scale, out=e)
        np.exp(e, out=e)
        square = np.add(1.0, e)
        np.multiply(square, square, out=square)
        np.divide(e, square, out=e)
        return e if scale == 1.0 else np.multiply(e, scale * scale, out=e)
    e = np.exp(np.where(np.real(x) < 0, scale * x, -scale * x))
    return e / ((1.0 + e) * (1.0 + e)) * (scale * scale)


_clip = importlib.import_module("numpy._core.umath").clip  # the ufunc: np.clip's wrapper costs
# as much again


_COSH_FINITE = {}
"""Per real float dtype, the whole number below which cosh is finite (710 for float64, 89 for
float32, 11 for float16): past it 1 / cosh² is below half the smallest subnormal number, 0;
with ``-bound``, ``bound`` and 1 as read-only 0-d arrays of the dtype, the operands of a plain
array's loops (NumPy takes twice as long to clip between NumPy's scalars, and to divide a
Python float, as between 0-d arrays of the array's dtype, in the same loop on the same
numbers)."""


def _cosh_finite(dtype):
    bound = np.floor(np.arccosh(np.finfo(dtype).max))
    operands = tuple(np.array(v, dtype) for v in (-bound, bound, 1))
    for operand in operands:
        operand.flags.writeable = False
    return bound, *operands


_cosh, _divide, _multiply = np.cosh, np.divide, np.multiply  # (NumPy's module looks its
# names up through its __getattr__: bound once)


def sech_squared(x):
    """tanh's derivative 1 / cosh²(x). Of real values not traced, ``(1 / cosh(x))²`` of x
    clipped where cosh overflows (``_COSH_FINITE``): a few ulps, as ``logistic_density``
    (measured on [-30, 30] against extended precision: at most 4.3 ulps in float64, 3.5 by
    ``logistic_density``; 6.2 and 4.2 in float32), in four NumPy calls instead of seven:
    tanh's pullback was a third of the reverse pass of a replayed chain of tanh on short
    arrays. The same formula for every kind of array (a plain one in place), so that their
    bits agree. Traced (a derivative of a higher order follows) and complex values:
    ``logistic_density``'s 4 σ'(2x), which stays accurate through its own derivative."""
    if type(x) is NDARRAY and x.ndim:  # (asked first: a replay's blocks call it on short
        # plain arrays, where the questions below cost half as much as the four loops)
        constants = _COSH_FINITE.get(x.dtype)  # (a real float dtype's, once it was seen)
        if constants is not None:
            return _sech_squared_plain(x, constants)
    dtype = getattr(x, "dtype", None)
    if dtype is None or dtype.kind != "f" or wrapped(x):
        return logistic_density(x, 2.0)
    constants = _COSH_FINITE.get(dtype)
    if constants is None:
        constants = _COSH_FINITE[dtype] = _cosh_finite(dtype)
    if type(x) is NDARRAY and x.ndim:
        return _sech_squared_plain(x, constants)
    bound = constants[0]
    c = 1.0 / np.cosh(np.clip(x, -bound, bound))
    return c * c


def _sech_squared_plain(x, constants):
    """``sech_squared`` of a plain array of a real float dtype, in place of one clipped copy
    (out= by position: a keyword costs a fifth of the call)."""
    _, low, high, one = constants
    c = _clip(x, low, high)
    _cosh(c, c)
    _divide(one, c, c)
    return _multiply(c, c, c)


def logistic(x, power=np.exp):
    """1 / (1 + power(-x)) of a real x (the logistic sigmoid, for power e^x), as e / (1 + e)
    with e = power(x) where x < 0: there power(-x) overflows to a result of 0 where the sigmoid
    is a subnormal number (SciPy's expit(-710) is 0, not 4.5e-309). NaN for NaN; 0 and 1 at
    -inf and inf. Split at 0 by np.where, so that its derivative holds there."""
    negative = x < 0
    e = power(np.where(negative, x, -x))
    return np.where(negative, e, 1.0) / (1.0 + e)


def as_float(sign):
    return np.multiply(sign, 1.0, dtype=np.float64)


def traced_among(*values):
    """The value among ``values`` that the innermost differentiation traces (to pass as
    ``like=``), or None when all are plain."""
    best = None
    for v in values:
        if wrapped(v):
            level = getattr(getattr(v, "tape", None), "level", -1)
            if best is None or level > best[0]:
                best = (level, v)
    return None if best is None else best[1]


def accumulator(shape, dtype, *operands):
    """Zeros to accumulate values computed from ``operands`` into: traced like the innermost
    traced operand, plain when none is."""
    like = traced_among(*operands)
    if like is None:
        return np.zeros(shape, dtype)
    return np.zeros_like(like, dtype=dtype, shape=shape)


def stacked(items):
    """``np.array(items)`` of scalars and 0-d arrays, some of which may be traced."""
    if any(wrapped(item) for item in items):
        return np.stack(items)  # dispatches on the traced items; plain ones are constants
    for item in items:
        xp = device_of(item)
        if xp is not None:  # on the device: NumPy would copy its values to the host
            return xp.stack([xp.asarray(item) for item in items])
    return np.array(items)


def check_fit_data(x, y):
    """NumPy's checks of a least-squares fit's data (np.polyfit's and numpy.polynomial's, the
    same errors): x one non-empty vector, y one or two dimensions of x's length."""
    if np.ndim(x) != 1:
        raise TypeError("expected 1D vector for x")
    if np.size(x) == 0:
        raise TypeError("expected non-empty vector for x")
    if np.ndim(y) < 1 or np.ndim(y) > 2:
        raise TypeError("expected 1D or 2D array for y")
    if np.shape(x)[0] != np.shape(y)[0]:
        raise TypeError("expected x and y to have same length")


# ----------------------------------------------------------------------------------------------
# Batched forward rules (facet batched): tangents with a leading axis of directions


def batch_size(tangents):
    """The number of directions of a batched rule's tangents (one level into sequences): the
    leading axis of the first one given; None when none is."""
    for t in tangents:
        if type(t) in (list, tuple):
            found = batch_size(t)
            if found is not None:
                return found
        elif t is not None:
            return t.shape[0]
    return None


def batch_aligned(t, ndim):
    """A batch of tangents ``(B,) + shape`` with axes of length 1 inserted after the batch
    axis so that it has ``ndim`` axes besides it: it then broadcasts against an array of
    ``ndim`` axes as one direction's tangent broadcasts against that array's value."""
    extra = ndim + 1 - np.ndim(t)
    return t if extra <= 0 else np.reshape(t, np.shape(t)[:1] + (1,) * extra + np.shape(t)[1:])


def batch_or_zeros(arg, tangent, size):
    """A linear operand's batch of tangents; zeros where it carries none (as
    ``registry.deflinear`` puts zeros in for one direction)."""
    if tangent is not None:
        return tangent
    return np.zeros((size,) + np.shape(arg), np.result_type(arg, 0.0))


def batch_axes(axis, ndim):
    """Reduction axes ``axis`` of an array of ``ndim`` axes, on its batch of tangents (whose
    axis 0 is the batch): every axis but the batch's for None."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    from numpy.lib.array_utils import normalize_axis_tuple

    return tuple(i + 1 for i in normalize_axis_tuple(axis, ndim))


def interp_sides(x, xp):
    """Where NumPy's interp puts each x: right of xp (``x > xp[-1]``, asked first, as NumPy's
    search asks it: of an xp that decreases an x may be both), else left of it
    (``x < xp[0]``), else inside, on the interval ``i`` (``xp[i] <= x < xp[i + 1]``, the last
    one for ``x == xp[-1]``), a decision taken now: a pullback may see x and xp restored up to
    rounding. Inside an xp that decreases somewhere, NumPy's search finds an interval mutad
    does not follow: refused."""
    above = x > xp[-1]
    below = (x < xp[0]) & ~above
    inside = ~below & ~above
    interval = None
    if np.shape(xp)[0] > 1:
        if np.any(inside) and np.any(np.diff(xp) < 0):
            raise UnsupportedOperationError(
                "np.interp of differentiated values with xp not increasing and x inside its "
                "range: NumPy's result there is its search's (its documentation calls it "
                "meaningless), whose interval mutad does not follow. Sort xp (and fp with it: "
                "order = np.argsort(xp); np.interp(x, xp[order], fp[order])).")
        interval = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, np.shape(xp)[0] - 2)
    return below, above, inside, interval


def interp_piece(x, xp, fp, i, inside):
    """On the interval ``i`` of each x, ``t = (x - xp_i) / h`` and the slope
    ``s = (fp_(i+1) - fp_i) / h``, ``h = xp_(i+1) - xp_i``: zero outside xp (which they do not
    reach: no 0/0 of an x beyond repeated end points, no inf of an infinite x), and t = 1,
    s = 0 on an interval of no width (x == xp[-1] == xp[-2], where NumPy gives fp[-1])."""
    start = np.take(xp, i)
    h = np.take(xp, i + 1) - start
    wide = inside & (h != 0)
    width = np.where(wide, h, 1.0)
    t = np.where(wide, (np.where(wide, x, start) - start) / width, np.where(inside, 1.0, 0.0))
    s = np.where(wide, (np.take(fp, i + 1) - np.take(fp, i)) / width, 0.0)
    return t, s
