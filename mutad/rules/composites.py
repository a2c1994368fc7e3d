"""Functions NumPy writes in Python, as compositions of functions mutad differentiates.

NumPy's own implementations convert their arguments with ``np.asarray``, which would cut the
gradient; the compositions here compute the same values from functions with rules (``np.diff``,
``np.cumsum``, ``np.linalg.svd``, ``np.convolve``, ...), called on the traced arrays themselves,
so every step is recorded by its own rule and reverse mode, forward mode and every order follow.
They take NumPy's arguments and follow its conventions; an option they do not follow raises an
``UnsupportedOperationError`` rather than computing something else. The functions whose outputs
carry no gradient (index helpers, ranks) are in ``nondiff``-style rows at the end.
"""

import gc
import math
import sys
import warnings

import numpy as np

from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..core.debug import caller, warn_at
from ..core.tape import source_line
from ..core.allocation import (TracedObjects, from_plain_objects, holds_derivative,
                               lists_as_arrays, python_number, ufunc_operands)
from ..core.levels import Tracer
from ..core.views import wrapped
from ..engines.arraylike import settled, stands_for_scalar
from ..core.errors import UnsupportedOperationError
from ..core.registry import complex_aware, defcomposite, defmethod, nondifferentiable
from ._helpers import along, check_fit_data


def _refuse(name, option):
    raise UnsupportedOperationError(
        f"np.{name} with {option} on differentiated arrays: mutad follows only its other "
        "options; compute it from functions mutad differentiates.")


# ----------------------------------------------------------------------------------------------
# Differences, integrals and scans


def _spacing_derivative(f, axis, spacing, edge_order, otype):
    """NumPy's second-order accurate differences of ``f`` along ``axis`` with ``spacing`` (a
    scalar step or the differences of the coordinates), one-sided of ``edge_order`` at the
    ends: NumPy's expressions, each rounded into ``otype`` (NumPy assigns them into an array of
    f's dtype: float32 data with float64 coordinates give float32 values computed in float64)."""
    n = f.shape[axis]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")

    def at(key):
        return f[along(f.ndim, axis, key)]

    def shaped(values):  # a 1-d array of coefficients along ``axis``
        return np.reshape(values, tuple(-1 if i == axis else 1 for i in range(f.ndim)))

    uniform = np.ndim(spacing) == 0
    if uniform:
        interior = (at(slice(2, None)) - at(slice(None, -2))) / (2. * spacing)
    else:
        dx1, dx2 = spacing[0:-1], spacing[1:]
        a = shaped(-(dx2) / (dx1 * (dx1 + dx2)))
        b = shaped((dx2 - dx1) / (dx1 * dx2))
        c = shaped(dx1 / (dx2 * (dx1 + dx2)))
        interior = a * at(slice(None, -2)) + b * at(slice(1, -1)) + c * at(slice(2, None))
    if edge_order == 1:
        first = (at(slice(1, 2)) - at(slice(0, 1))) / (spacing if uniform else spacing[0])
        last = (at(slice(-1, None)) - at(slice(-2, -1))) / (spacing if uniform else spacing[-1])
    else:
        if uniform:
            a, b, c = -1.5 / spacing, 2. / spacing, -0.5 / spacing
        else:
            dx1, dx2 = spacing[0], spacing[1]
            a = -(2. * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = - dx1 / (dx2 * (dx1 + dx2))
        first = a * at(slice(0, 1)) + b * at(slice(1, 2)) + c * at(slice(2, 3))
        if uniform:
            a, b, c = 0.5 / spacing, -2. / spacing, 1.5 / spacing
        else:
            dx1, dx2 = spacing[-2], spacing[-1]
            a = (dx2) / (dx1 * (dx1 + dx2))
            b = - (dx2 + dx1) / (dx1 * dx2)
            c = (2. * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(slice(-3, -2)) + b * at(slice(-2, -1)) + c * at(slice(-1, None))
    return np.concatenate([part.astype(otype, copy=False) for part in (first, interior, last)],
                          axis=axis)


@defcomposite(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's steps: coordinates made their differences (one scalar step where those are all
    equal; integer coordinates in float64), integer data in float64, every derivative in
    f's dtype."""
    f = _as_array(f)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    axes = tuple(range(f.ndim)) if axis is None else tuple(
        a % f.ndim for a in np.atleast_1d(axis).tolist())
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = []
        for i, distances in enumerate(varargs):
            if np.ndim(distances) == 0:
                spacings.append(distances)
                continue
            distances = _as_array(distances)
            if np.ndim(distances) != 1:
                raise ValueError("distances must be either scalars or 1d")
            if len(distances) != f.shape[axes[i]]:
                raise ValueError("when 1d, distances must match the length of the "
                                 "corresponding dimension")
            if np.result_type(distances).kind in "biu":
                distances = distances.astype(np.float64)
            differences = np.diff(distances)
            if np.all(differences == differences[0]):  # NumPy's test: one step
                differences = differences[0]
            spacings.append(differences)
    else:
        raise TypeError("invalid number of arguments")
    otype = np.result_type(f)
    if otype.kind not in "fc":
        if otype.kind in "iu":
            f = f.astype(np.float64)
        otype = np.dtype(np.float64)
    derivatives = tuple(_spacing_derivative(f, a, s, edge_order, otype)
                        for a, s in zip(axes, spacings, strict=True))
    return derivatives[0] if len(derivatives) == 1 else derivatives


@defcomposite(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    ndim = np.ndim(y)
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = np.reshape(np.diff(x), tuple(-1 if i == axis % ndim else 1 for i in range(ndim)))
    else:
        d = np.diff(x, axis=axis)
    upper, lower = y[along(ndim, axis, slice(1, None))], y[along(ndim, axis, slice(None, -1))]
    return np.sum(d * (upper + lower) / 2.0, axis=axis)


@defcomposite(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """NumPy's: the differences in ``ary``'s dtype, ``to_begin`` and ``to_end`` cast into it
    (refused, as NumPy refuses them, where that cast is not of the same kind)."""
    ary = np.ravel(_as_array(ary))
    dtype = np.result_type(ary)
    ends = []
    for name, end in (("to_begin", to_begin), ("to_end", to_end)):
        if end is None:
            ends.append(None)
            continue
        end = _as_array(end)
        if not np.can_cast(np.result_type(end), dtype, casting="same_kind"):
            raise TypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                            "`same_kind` rule.")
        ends.append(np.ravel(end).astype(dtype, copy=False))
    parts = [part for part in (ends[0], np.diff(ary), ends[1]) if part is not None]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _cumulative(scan, identity):
    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if axis is None:
            if np.ndim(x) != 1:
                raise ValueError("For arrays which have more than one dimension ``axis`` "
                                 "argument is required.")
            axis = 0
        if out is not None and dtype is None and hasattr(x, "dtype"):
            # NumPy accumulates into out: in the promotion of x's dtype and out's
            dtype = np.promote_types(x.dtype, out.dtype)
        y = scan(x, axis=axis, dtype=dtype)
        if include_initial:
            shape = tuple(1 if i == axis % y.ndim else n for i, n in enumerate(y.shape))
            y = np.concatenate([np.full_like(y, identity, shape=shape), y], axis=axis)
        if out is not None:
            out[...] = y
            return out
        return y

    return cumulative


defcomposite(np.cumulative_sum)(_cumulative(np.cumsum, 0.0))
defcomposite(np.cumulative_prod)(_cumulative(np.cumprod, 1.0))


@defcomposite(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    return np.cumsum(np.where(np.isnan(a), 0.0, a), axis=axis, dtype=dtype, out=out)


@defcomposite(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    return np.cumprod(np.where(np.isnan(a), 1.0, a), axis=axis, dtype=dtype, out=out)


@defcomposite(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """NumPy's steps on the traced phases: the corrections (multiples of the period, up to
    rounding) are computed from them as NumPy computes them, so the values are NumPy's and the
    derivative is that of those steps (1 through each phase: the corrections' derivative is
    zero almost everywhere)."""
    p = p if hasattr(p, "dtype") else np.asarray(p)
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(dd, period)
    if np.issubdtype(dtype, np.integer):
        return np.unwrap(np.asarray(p), discont, axis, period=period)  # integers: no gradient
    high = period / 2
    ddmod = np.mod(dd + high, period) - high
    # (where abs(dd) == period/2 NumPy keeps the sign of dd)
    ddmod = np.where((ddmod == -high) & (dd > 0), high, ddmod)
    correct = np.where(np.abs(dd) < discont, 0.0, ddmod - dd)
    first = p[along(p.ndim, axis, slice(None, 1))]
    rest = p[along(p.ndim, axis, slice(1, None))] + np.cumsum(correct, axis=axis)
    return np.concatenate([first, rest], axis=axis).astype(dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# Statistics


@defcomposite(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """NumPy's steps: the weighted sum and the sum of the weights both in the promotion of
    the data's dtype and the weights' (float64 for integer data), the weights shaped as
    NumPy shapes them (not broadcast: their sum is NumPy's)."""
    a = _as_array(a)  # (NumPy's np.asanyarray of each: a list of weights, [1, 2, 3])
    if weights is not None:
        weights = _as_array(weights)
    if axis is not None:  # (as NumPy first: its errors' words, "axis: axis 2 is out of ...")
        axis = normalize_axis_tuple(axis, np.ndim(a), "axis")
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        dtype = np.result_type(avg)
        scale = dtype.type(np.size(a) / max(np.size(avg), 1))  # in the average's dtype
    else:
        dtype = np.result_type(a)
        if dtype.kind in "biu":
            result_dtype = np.result_type(dtype, np.result_type(weights), "f8")
        else:
            result_dtype = np.result_type(dtype, np.result_type(weights))
        if np.shape(weights) != np.shape(a):
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            axes = axis
            if np.shape(weights) != tuple(np.shape(a)[ax] for ax in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            weights = np.transpose(weights, np.argsort(axes))
            weights = np.reshape(weights, tuple(n if i in axes else 1
                                                for i, n in enumerate(np.shape(a))))
        scale = np.sum(weights, axis=axis, dtype=result_dtype, keepdims=keepdims)
        if np.any(scale == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(a, weights, dtype=result_dtype), axis=axis,
                     keepdims=keepdims) / scale
    if returned:
        if np.shape(scale) != np.shape(avg):
            scale = np.broadcast_to(scale, np.shape(avg)).copy()
        return avg, scale
    return avg


@defcomposite(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    """NumPy's steps: the sums in ``dtype`` (by default the data's), each divided by its
    integer count in float64 and rounded back into the sum's dtype (NumPy divides into the
    sum's array), the deviations rounded into the data's dtype (NumPy subtracts in place).
    ``correction=`` is NumPy's other name for ``ddof``."""
    correction = kwargs.pop("correction", np._NoValue)
    if correction is not np._NoValue:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    if out is not None or kwargs:
        _refuse("nanvar", "out=, where= or mean=")
    data = np.result_type(a)
    present = ~np.isnan(a)
    count = np.sum(present, axis=axis, dtype=np.intp, keepdims=True)
    zeroed = np.where(present, a, np.zeros((), data))
    total = np.sum(zeroed, axis=axis, dtype=dtype, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # (NumPy's, of its divisions)
        mean = np.divide(total, count).astype(np.result_type(total), copy=False)
    deviation = np.where(present, (zeroed - mean).astype(data, copy=False), np.zeros((), data))
    variance = np.sum(deviation * deviation, axis=axis, dtype=dtype, keepdims=keepdims)
    if not keepdims:
        count = np.squeeze(count, axis=axis)
    dof = count - ddof
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.divide(variance, dof).astype(np.result_type(variance), copy=False)
    if np.any(dof <= 0):  # NumPy's convention: its warning, and NaN
        _degrees_of_freedom_warning("Degrees of freedom <= 0 for slice.")
        variance = np.where(dof <= 0, np.nan, variance)
    # a 0-d result as NumPy's number (the cast into a float32 sum's dtype above, by mutad's
    # own code, makes an array)
    return variance[()] if np.ndim(variance) == 0 else variance


def _degrees_of_freedom_warning(message):
    """NumPy's RuntimeWarning ``message`` (its words differ by function), at the program's
    line, as NumPy's stacklevel puts it."""
    line = source_line(caller(skip=2))
    if line is None:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    else:
        warn_at(message, RuntimeWarning, *line)


@defcomposite(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    return np.sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                          **kwargs))


def _float_weights(weights):
    """``np.asarray(weights, dtype=float)``, NumPy's conversion of cov's weights."""
    if isinstance(weights, (list, tuple)) or not hasattr(weights, "astype"):
        return np.asarray(weights, dtype=float)
    return weights if weights.dtype == np.float64 else weights.astype(np.float64)


@defcomposite(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """NumPy's steps: the data converted to ``dtype`` (by default the promotion of theirs
    with float64) before the mean is taken, and the centring and scaling done in place, in
    the data's dtype (``np.cov(x, dtype=np.float32)`` is float32)."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    m = _as_array(m)  # (NumPy's np.asarray of each: y given as a list)
    if y is not None:
        y = _as_array(y)
    if np.ndim(m) > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None and np.ndim(y) > 2:
        raise ValueError("y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(m, np.float64) if y is None else \
            np.result_type(m, y, np.float64)
    x = np.atleast_2d(m).astype(dtype)  # a copy, as NumPy's np.array(m, ndmin=2)
    if not rowvar and np.ndim(m) != 1:
        x = x.T
    if x.shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        y = np.atleast_2d(y).astype(dtype, copy=False)
        if not rowvar and y.shape[0] != 1:
            y = y.T
        x = np.concatenate((x, y), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    weights = None
    if fweights is not None:
        weights = fweights = _float_weights(fweights)
    if aweights is not None:
        aweights = _float_weights(aweights)
        weights = aweights if weights is None else weights * aweights
    mean, total = average(x, axis=1, weights=weights, returned=True)
    total = total[0]
    if weights is None:
        factor = x.shape[1] - ddof
    elif ddof == 0:
        factor = total
    elif aweights is None:
        factor = total - ddof
    else:
        factor = total - ddof * np.sum(weights * aweights) / total
    if factor <= 0:  # NumPy's convention: a warning, and the covariance divided by 0
        _degrees_of_freedom_warning("Degrees of freedom <= 0 for slice")
        factor = 0.0
    x -= mean[:, None]  # in place, in x's dtype, as NumPy centres
    weighted = x.T if weights is None else (x * weights).T
    if np.result_type(weighted).kind == "c":
        weighted = np.conj(weighted)
    c = np.dot(x, weighted)
    # NumPy multiplies, in place, by the reciprocal of the factor, which may round otherwise
    # than dividing
    c *= np.true_divide(1, factor)
    return np.squeeze(c)


@defcomposite(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    deviation = np.sqrt(np.diagonal(c))
    return np.clip(c / deviation[:, None] / deviation[None, :], -1, 1)


# ----------------------------------------------------------------------------------------------
# Polynomials and products


@defcomposite(np.trim_zeros)
def trim_zeros(filt, trim="fb", axis=None):
    """NumPy's: the view of ``filt`` without its leading and trailing zeros (``np.poly1d``'s
    coefficients), its bounds read from the values (as ``np.argwhere`` reads them, which a
    replay guards). Zeros trimmed from differentiated values are refused, as ``roots``'
    are: what is computed from the rest still moves with them (a polynomial's value with
    its leading coefficient), and the derivative of the trimmed program would miss that."""
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    ndim = np.ndim(filt)
    axes = tuple(range(ndim)) if axis is None else normalize_axis_tuple(axis, ndim, "axis")
    if not axes:
        return filt
    nonzero = np.argwhere(filt)
    if nonzero.size == 0:  # all zero: an empty slice
        start = stop = (0,) * ndim
    else:
        start = nonzero.min(axis=0) if "f" in trim else (None,) * ndim
        stop = nonzero.max(axis=0) + 1 if "b" in trim else (None,) * ndim
    key = tuple(slice(start[a], stop[a]) if a in axes else slice(None) for a in range(ndim))
    trimmed = filt[key[0]] if ndim == 1 else filt[key]
    if np.shape(trimmed) != np.shape(filt) and holds_derivative([filt]):
        raise UnsupportedOperationError(
            "np.trim_zeros of differentiated values with a leading or trailing zero (np.poly1d "
            "trims its coefficients so): what is computed from the rest still moves with the "
            "zeros, and the derivative of the trimmed values would miss that. Where the zeros "
            "are constants, slice them off yourself (c[1:]), or evaluate with np.polyval(c, x), "
            "which keeps them.")
    return trimmed


def _as_array(value):
    """The array NumPy's ``np.asarray(value)`` makes (traced, if ``value`` holds traced
    values): a Python number is a 0-d array, whose dtype is not weak."""
    if isinstance(value, Tracer) or hasattr(value, "dtype"):
        return value
    if type(value) in (list, tuple):
        return ufunc_operands((value,))[0]
    return np.asarray(value)


@defcomposite(np.polyval)
def polyval(p, x):
    """NumPy's Horner steps on the arrays NumPy makes of ``p`` and ``x``: a list of float
    coefficients is a float64 array, whose elements are float64 scalars (not Python numbers),
    so float32 ``x`` gives float64 values, as NumPy's."""
    p, x = _as_array(p), _as_array(x)
    y = np.zeros_like(x)
    for coefficient in p:
        y = y * x + coefficient
    return y


@defcomposite(np.poly)
def poly(seq_of_zeros):
    """NumPy's: the coefficients of the monic polynomial with these roots (of a square
    matrix, its eigenvalues), one convolution with [1, -root] per root, in NumPy's dtype; its
    real part where the roots come in conjugate pairs (a decision on their values, as
    NumPy's)."""
    zeros = np.atleast_1d(seq_of_zeros)
    shape = np.shape(zeros)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        zeros = np.linalg.eigvals(zeros)
    elif len(shape) == 1:
        zeros = zeros.astype(np.mintypecode(zeros.dtype.char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if shape[0] == 0:
        return 1.0
    a = np.ones_like(zeros, shape=(1,))
    for zero in zeros:
        a = np.convolve(a, np.stack([np.ones_like(zero), -zero]), mode="full")
    if np.iscomplexobj(a):
        roots = zeros.astype(complex)
        if np.all(np.sort(roots) == np.sort(np.conjugate(roots))):
            a = np.real(a).copy()
    return a


@defcomposite(np.polyder)
def polyder(p, m=1):
    for _ in range(m):
        n = np.shape(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1.0)
    return p


@defcomposite(np.polyint)
def polyint(p, m=1, k=None):
    # k as np.atleast_1d takes it, its items kept (a list may hold traced values, which
    # np.ndim would convert)
    constants = [0.0] * m if k is None else list(k) if type(k) in (list, tuple) \
        else [k] if np.ndim(k) == 0 else list(k)
    if len(constants) == 1 and m > 1:
        constants = constants * m
    if len(constants) < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):
        n = np.shape(p)[0]
        p = np.concatenate([p / np.arange(n, 0, -1.0), np.reshape(constants[i], (1,))])
    return p


def _aligned(a, b):
    """Two coefficient vectors padded at the front to one length."""
    n = max(np.shape(a)[0], np.shape(b)[0])
    return (np.pad(a, (n - np.shape(a)[0], 0)), np.pad(b, (n - np.shape(b)[0], 0)))


@defcomposite(np.polyadd)
def polyadd(a1, a2):
    a, b = _aligned(np.atleast_1d(a1), np.atleast_1d(a2))
    return a + b


@defcomposite(np.polysub)
def polysub(a1, a2):
    a, b = _aligned(np.atleast_1d(a1), np.atleast_1d(a2))
    return a - b


def _as_poly1d(p):
    """The coefficients ``np.poly1d(p)`` keeps: leading zeros dropped (refused where they are
    differentiated, ``trim_zeros``), at least one."""
    p = trim_zeros(np.atleast_1d(p), "f")
    return p if np.shape(p)[0] else np.zeros_like(p, shape=(1,))


def _poly1d_init(self, c_or_r, r=False, variable=None):
    """``np.poly1d`` of a list or tuple holding traced numbers (``np.poly1d([a, b, c])``):
    NumPy's own constructor, given the array NumPy makes of the list, which it would convert
    (its ``np.atleast_1d``); a traced array it takes as it is. Of Python's numbers alone
    (``np.poly1d([1.0, 2.0, 3.0])``), NumPy's constructor, whose new array of coefficients the
    user's code receives as a constant the function may write traced values into
    (``c = p.coeffs.copy(); c[-1] = x[0]``), as np.zeros' is; NumPy's own code receives
    NumPy's."""
    if type(c_or_r) in (list, tuple):
        [c_or_r] = lists_as_arrays([c_or_r])
    _POLY1D_INIT(self, c_or_r, r, variable)
    if type(self.coeffs) is np.ndarray:  # (of plain values: by_user_code tells them apart)
        self._coeffs = from_plain_objects(self.coeffs, _poly1d_coefficients,
                                          (c_or_r, r, variable), {}, sys._getframe(2))


def _poly1d_coefficients(c_or_r, r, variable):
    """The coefficients of NumPy's ``np.poly1d(c_or_r, r, variable)`` (a replay's constant,
    made again)."""
    return np.poly1d(c_or_r, r, variable).coeffs


_POLY1D_INIT = np.poly1d.__init__
# every construction while a differentiation runs: of traced coefficients, NumPy's of their
# array; of Python's numbers, NumPy's, its coefficients a constant of the differentiation
_poly1d_init.always = True  # type: ignore[attr-defined]
defmethod(np.poly1d, "__init__", _poly1d_init)


def _poly1d_divided(self, other):
    """``p / c`` of a ``poly1d``: NumPy divides the coefficients by a number (``np.isscalar``),
    which a traced value standing for a NumPy scalar is (``x[j] - x[k]``, as
    ``scipy.interpolate.lagrange`` divides), though ``np.isscalar`` does not say so of it;
    else ``np.polydiv``, as NumPy's."""
    if np.isscalar(other) or isinstance(other, Tracer) and stands_for_scalar(other):
        return np.poly1d(self.coeffs / other)
    return polydiv(self, np.poly1d(other))


setattr(_poly1d_divided, "on_constants", True)  # (x[j] - x[k] of an x allocated in f)
defmethod(np.poly1d, "__truediv__", _poly1d_divided)


@defcomposite(np.polymul)
def polymul(a1, a2):
    """NumPy's: the convolution of the coefficients ``np.poly1d`` keeps of each (its result
    not trimmed: [0.] times [1., 2.] is [0., 0.]), a ``poly1d`` where one operand is one."""
    product = np.convolve(_as_poly1d(a1), _as_poly1d(a2))
    return np.poly1d(product) if isinstance(a1, np.poly1d) or isinstance(a2, np.poly1d) \
        else product


@defcomposite(np.polydiv)
def polydiv(u, v):
    """NumPy's long division step by step: each quotient coefficient written into q, the
    remainder updated in place, its leading entries NumPy finds close to 0 dropped. Those the
    division cancels are 0 whatever the coefficients; one of the remainder's own dropped from
    differentiated coefficients is refused (the remainder still moves with it)."""
    truepoly = isinstance(u, np.poly1d) or isinstance(v, np.poly1d)
    u = np.atleast_1d(_as_array(u.coeffs if isinstance(u, np.poly1d) else u)) + 0.0
    v = np.atleast_1d(_as_array(v.coeffs if isinstance(v, np.poly1d) else v)) + 0.0
    w = u[0] + v[0]
    m, n = len(u) - 1, len(v) - 1
    scale = 1. / v[0]
    q = np.zeros_like(w, shape=(max(m - n + 1, 1),))
    r = u.astype(np.result_type(w))
    for k in range(m - n + 1):
        d = scale * r[k]
        q[k] = d
        r[k:k + n + 1] -= d * v
    cancelled = max(m - n + 1, 0)
    dropped = 0
    while np.allclose(r[0], 0, rtol=1e-14) and (r.shape[-1] > 1):
        r = r[1:]
        dropped += 1
    if dropped > cancelled and holds_derivative([r]):
        raise UnsupportedOperationError(
            "np.polydiv of differentiated coefficients whose remainder has a leading "
            "coefficient close to 0: NumPy drops it, but the remainder still moves with it, and "
            "the derivative of the shorter remainder would miss that. Compute the remainder "
            "with its leading coefficient kept yourself: r = np.polysub(u, np.polymul(q, v)).")
    if truepoly:
        return np.poly1d(q), np.poly1d(r)
    return q, r


@defcomposite(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's steps: x and y made float arrays (``+ 0.0``), the Vandermonde matrix in float64
    (np.vander), rcond from x's precision, the weights applied in place (y's dtype kept), the
    columns scaled before the least-squares solve; a rank short of the order warned about at
    the caller's line (unless ``full``); ``full``'s residuals, rank, singular values and rcond
    and ``cov``'s covariance as NumPy computes them."""
    order = int(deg) + 1
    x = _as_array(x) + 0.0
    y = _as_array(y) + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    check_fit_data(x, y)
    if rcond is None:
        rcond = np.shape(x)[0] * np.finfo(np.result_type(x)).eps
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w = _as_array(w) + 0.0
        if np.ndim(w) != 1:
            raise TypeError("expected a 1-d array for weights")
        if np.shape(w)[0] != np.shape(y)[0]:
            raise TypeError("expected w and y to have the same length")
        # NumPy multiplies in place: each product rounded into lhs's and rhs's dtypes
        lhs = (lhs * w[:, None]).astype(np.result_type(lhs), copy=False)
        rhs = (rhs * (w if np.ndim(rhs) == 1 else w[:, None])).astype(np.result_type(rhs),
                                                                       copy=False)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    coefficients, residuals, rank, singular_values = np.linalg.lstsq(lhs, rhs, rcond)
    coefficients = (coefficients.T / scale).T
    if rank != order and not full:
        where = source_line(caller(1))
        if where is not None:
            warn_at("Polyfit may be poorly conditioned", np.exceptions.RankWarning, *where)
    if full:
        return coefficients, residuals, rank, singular_values, rcond
    if not cov:
        return coefficients
    base = np.linalg.inv(np.dot(lhs.T, lhs)) / np.outer(scale, scale)
    if cov == "unscaled":
        factor = 1
    else:
        if np.shape(x)[0] <= order:
            raise ValueError("the number of data points must exceed order "
                             "to scale the covariance matrix")
        factor = residuals / (np.shape(x)[0] - order)
    return coefficients, (base * factor if np.ndim(y) == 1 else base[:, :, None] * factor)


@defcomposite(np.roots)
def roots(p):
    """NumPy's steps: the leading and trailing zeros stripped (the trailing ones are roots at
    0), the eigenvalues of the companion matrix (``np.linalg.eigvals``: real when they all
    are, as NumPy's), the zeros appended. A repeated root has no derivative (its eigenvalue's
    derivative divides by the distance between the roots: infinite or NaN). Zeros stripped
    from differentiated coefficients are refused: the roots move with them."""
    p = np.atleast_1d(p)
    if np.ndim(p) != 1:
        raise ValueError("Input must be a rank-1 array.")
    non_zero = np.flatnonzero(np.ravel(p) != 0)
    if len(non_zero) == 0:
        return np.array([])
    trailing_zeros = len(p) - non_zero[-1] - 1
    if (trailing_zeros or non_zero[0]) and holds_derivative([p]):
        raise UnsupportedOperationError(
            "np.roots of differentiated coefficients with a leading or trailing zero: NumPy "
            "strips it (a trailing zero is a root at 0, a leading one a root at infinity), but "
            "the roots still move with it, and the stripped polynomial's derivative would miss "
            "that. Where the zero is a constant, strip it yourself (np.roots(p[:-1]), "
            "np.roots(p[1:])) and append the root at 0 (np.append(r, 0.0)).")
    p = p[int(non_zero[0]):int(non_zero[-1]) + 1]
    if np.result_type(p).kind not in "fc":
        p = p.astype(float)
    n = len(p)
    if n > 1:  # the companion matrix in p's dtype: float32 coefficients, float32 roots
        below = np.diag(np.ones((n - 2,), np.result_type(p)), -1)[1:]
        companion = np.concatenate([np.reshape(-p[1:] / p[0], (1, n - 1)), below])
        found = np.linalg.eigvals(companion)
    else:
        found = np.array([])
    return np.concatenate([found, np.zeros_like(found, shape=(trailing_zeros,))])


@defcomposite(np.vander)
def vander(x, N=None, increasing=False):
    """NumPy's: in the promotion of x's dtype with int (float64 for float32 x), the powers
    accumulated by multiplication along each row, C-contiguous as NumPy's (the decreasing
    powers are not a reversed view: a later product would round in another order)."""
    if np.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = np.shape(x)[0] if N is None else N
    column = np.reshape(x, (-1, 1)).astype(np.promote_types(np.result_type(x), int), copy=False)
    if n == 0:
        return column[:, :0]
    powers = np.cumprod(np.concatenate(
        [np.ones_like(column), np.broadcast_to(column, (np.shape(x)[0], n - 1))], axis=1), axis=1)
    return powers if increasing else powers[:, ::-1].copy()


@defcomposite(np.correlate)
def correlate(a, v, mode="valid"):
    if np.shape(v)[0] > np.shape(a)[0]:  # NumPy correlates the other way round, reversed
        # into a contiguous array, as NumPy's (not a view of negative stride: a later product
        # would round in another order)
        return correlate(v, a, mode)[::-1].copy()
    return np.convolve(a, v[::-1], mode)


@defcomposite(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """NumPy's steps: a first or last vector as a row or a column, then the products in the
    order of least cost NumPy chooses (its matrix-chain order, ties to the first split), so
    the values are its own bit for bit."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")  # NumPy's words
    if len(arrays) == 2:
        return np.dot(arrays[0], arrays[1], out=out)
    vector_first, vector_last = np.ndim(arrays[0]) == 1, np.ndim(arrays[-1]) == 1
    if vector_first:
        arrays[0] = np.atleast_2d(arrays[0])
    if vector_last:
        arrays[-1] = np.atleast_2d(arrays[-1]).T
    split = _chain_order([np.shape(a) for a in arrays])

    def product(i, j, out=None):
        if i == j:
            return arrays[i]
        return np.dot(product(i, split[i][j]), product(split[i][j] + 1, j), out=out)

    whole = vector_first or vector_last or out is None
    result = product(0, len(arrays) - 1, None if whole else out)
    if vector_first and vector_last:
        result = result[0, 0]
    elif vector_first or vector_last:
        result = result.ravel()
    if whole and out is not None:
        out[...] = result
        return out
    return result


def _chain_order(shapes):
    """``split[i][j]``: where NumPy's ``multi_dot`` splits the product of matrices i to j
    (Cormen's matrix-chain order as NumPy computes it: costs in floats, the first split of
    least cost; three matrices by its shortcut, which compares the two orders the same way)."""
    n = len(shapes)
    p = [shape[0] for shape in shapes] + [shapes[-1][1]]
    if n == 3:
        a0, a1b0, b1c0, c1 = p
        first = a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0)  # (AB)C
        split = [[0] * 3 for _ in range(3)]
        split[0][2] = 1 if first else 0
        split[0][1], split[1][2] = 0, 1
        return split
    cost = [[0.0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i][j]:
                    cost[i][j] = q
                    split[i][j] = k
    return split


# ----------------------------------------------------------------------------------------------
# Shapes


@defcomposite(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    ndim = len(xi)
    grids = []
    for i, x in enumerate(xi):
        shape = [1] * ndim
        shape[i] = -1
        grids.append(np.reshape(x, shape))
    if indexing == "xy" and ndim > 1:
        grids[0] = np.swapaxes(grids[0], 0, 1)
        grids[1] = np.swapaxes(grids[1], 0, 1)
    if not sparse:
        grids = np.broadcast_arrays(*grids)
    return tuple(g.copy() for g in grids) if copy else tuple(grids)


@defcomposite(np.diagflat)
def diagflat(v, k=0):
    return np.diag(np.ravel(v), k)


@defcomposite(np.angle)
def angle(z, deg=False):
    if np.iscomplexobj(z):
        y = np.arctan2(np.imag(z), np.real(z))
    else:  # 0 or pi by the sign bit, as NumPy's arctan2(0, x): a constant of its dtype (the
        # float of x's size: float32 for float32), a scalar for 0-d
        y = np.where(np.isnan(z), np.nan, np.where(np.signbit(z), np.pi, 0.0)).astype(
            np.result_type(z.dtype, np.float16))[()]
    return y * (180 / np.pi) if deg else y


@defcomposite(np.real_if_close)
def real_if_close(a, tol=100):
    a = np.asanyarray(a, like=a)  # as NumPy's: an array (a scalar's copy), dispatched
    if not np.iscomplexobj(a):
        return a  # a real array is its own real part
    if tol > 1:  # NumPy's reading: in units of the machine epsilon
        tol = np.finfo(np.result_type(a)).eps * tol
    return np.real(a) if np.all(np.abs(np.imag(a)) < tol) else a


@defcomposite(np.insert)
def insert(arr, obj, values, axis=None):
    """NumPy's own insert of the indices of ``arr``'s elements and of ``values``'s tells where
    each element of the result comes from (NumPy broadcasts and moves ``values`` as it would
    the values): the result gathers them from both, joined."""
    obj = settled(obj, "np.insert's positions")
    arr, values = (x if hasattr(x, "dtype") else np.asarray(x) for x in lists_as_arrays((arr,
                                                                                          values)))
    size = arr.size
    sources = np.insert(np.arange(size).reshape(arr.shape), obj,
                        size + np.arange(values.size).reshape(values.shape), axis)
    if values.dtype != arr.dtype:
        values = values.astype(arr.dtype)
    return np.concatenate([np.ravel(arr), np.ravel(values)])[sources]


def _block_depth(arrays):
    """How deep ``np.block``'s lists nest (0: an array)."""
    depth = 0
    while type(arrays) is list:
        depth, arrays = depth + 1, arrays[0]
    return depth


def _block_leaves(arrays):
    return [x for item in arrays for x in _block_leaves(item)] if type(arrays) is list \
        else [arrays]


@defcomposite(np.block)
def block(arrays):
    """The concatenations ``np.block`` stands for, innermost lists along the last axis, each
    array first given the result's dimensions in front; NumPy's own block of stand-ins of the
    same shapes checks the nesting first, with its errors."""
    def stand_ins(x):
        return [stand_ins(v) for v in x] if type(x) is list else \
            x if type(x) is tuple else np.empty(np.shape(x), bool)

    np.block(stand_ins(arrays))
    depth = _block_depth(arrays)
    ndim = max(depth, *(np.ndim(x) for x in _block_leaves(arrays)))

    def assembled(x, level):
        if type(x) is list:
            return np.concatenate([assembled(v, level + 1) for v in x], axis=level - depth)
        return np.reshape(x, (1,) * (ndim - np.ndim(x)) + np.shape(x))

    y = assembled(arrays, 0)
    return y if depth else y.copy()  # (a new array, as NumPy's)


@defcomposite(np.apply_along_axis)
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` called on each 1-d slice along ``axis`` (the traced slice itself: what it
    computes is recorded), its results broadcast to the first's shape and stacked where NumPy
    puts them."""
    arr = np.asanyarray(arr) if not hasattr(arr, "dtype") else arr
    axis = normalize_axis_index(axis, arr.ndim)
    slices = np.moveaxis(arr, axis, -1)
    outer = slices.shape[:-1]
    if 0 in outer:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [func1d(slices[index], *args, **kwargs) for index in np.ndindex(*outer)]
    shape = np.shape(results[0])
    y = np.stack([np.broadcast_to(r, shape) for r in results]).reshape(outer + shape)
    inner = range(len(outer), len(outer) + len(shape))
    return np.moveaxis(y, inner, range(axis, axis + len(shape)))


@defcomposite(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """NumPy's loop on the traced array: ``func(a, axis)`` for each axis in turn, a reduced
    axis put back (what ``func`` computes is recorded)."""
    val = a if hasattr(a, "dtype") else np.asarray(a)
    n = np.ndim(a)
    for axis in ((axes,) if np.ndim(axes) == 0 else axes):
        axis = axis + n if axis < 0 else axis
        res = func(val, axis)
        if np.ndim(res) != np.ndim(val):
            res = np.expand_dims(res, axis)
            if np.ndim(res) != np.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


@defcomposite(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """NumPy's steps on the traced ``x``: each function's values (or constant) written where
    its condition holds into zeros of ``x``'s type, the last function, where there is one more
    than conditions, where none holds. The conditions are booleans, settings."""
    x = x if hasattr(x, "dtype") else np.asanyarray(x)
    n2 = len(funclist)
    condlist = settled(condlist, "np.piecewise's conditions")
    if np.isscalar(condlist) or (not isinstance(condlist[0], (list, np.ndarray))
                                 and x.ndim != 0):
        condlist = [condlist]  # (NumPy's: a single condition)
    condlist = np.asarray(condlist, dtype=bool)
    n = len(condlist)
    if n == n2 - 1:  # the "otherwise" condition
        condlist = np.concatenate([condlist, ~np.any(condlist, axis=0, keepdims=True)], axis=0)
        n += 1
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for cond, func in zip(condlist, funclist):
        if not callable(func):
            y[cond] = func
        else:
            vals = x[cond]
            if vals.size > 0:
                y[cond] = func(vals, *args, **kw)
    return y


@defcomposite(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """NumPy's ``base ** linspace(start, stop)``, start, stop and base differentiated."""
    if not isinstance(base, (float, int)) and np.ndim(base):
        # NumPy broadcasts a non-scalar base with the others: it may decide what axis means
        ndmax = len(np.broadcast_shapes(np.shape(start), np.shape(stop), np.shape(base)))
        start, stop, base = (np.reshape(v, (1,) * (ndmax - np.ndim(v)) + np.shape(v))
                             for v in lists_as_arrays((start, stop, base)))
        base = np.expand_dims(base, axis=axis)
    y = np.power(base, np.linspace(start, stop, num=num, endpoint=endpoint, axis=axis))
    return y if dtype is None else y.astype(dtype, copy=False)


@defcomposite(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """NumPy's steps: the logspace of the logarithms of start and stop rotated to positive
    values (their signs constants), its ends replaced by start and stop themselves."""
    start, stop = (v if hasattr(v, "dtype") else np.asanyarray(v)
                   for v in lists_as_arrays((start, stop)))
    if np.any(start == 0) or np.any(stop == 0):
        raise ValueError("Geometric sequence cannot include zero")
    dt = np.result_type(start, stop, float(num), np.zeros((), dtype))
    dtype = dt if dtype is None else np.dtype(dtype)
    start, stop = start.astype(dt, copy=True), stop.astype(dt, copy=True)
    out_sign = np.sign(start)
    start = start / out_sign
    stop = stop / out_sign
    result = logspace(np.log10(start), np.log10(stop), num=num, endpoint=endpoint, base=10.0,
                      dtype=dt)
    if num > 0:  # (NumPy's: exp(log(x)) need not be x)
        result[0] = start
        if num > 1 and endpoint:
            result[-1] = stop
    result = result * out_sign
    if axis != 0:
        result = np.moveaxis(result, 0, axis)
    return result.astype(dtype, copy=False)


_NUMPYS_VECTORIZE_CALL = np.vectorize.__call__


def vectorized(self, *args, **kwargs):
    """``np.vectorize(f)(*args)`` on traced arrays: ``f`` called on each element of the
    broadcast arguments (a traced 0-d array, where NumPy gives it a Python scalar: what ``f``
    computes is recorded) in the order NumPy's ufunc machinery visits them (order 'K': the
    arguments' memory order), after one call on the first element of each argument that
    decides the output types where ``otypes`` does not (reused for the first element visited
    where ``cache`` is set), as NumPy calls it; its results cast to those types and laid out
    as that machinery lays out its output, one array per output."""
    if self.pyfunc is np._NoValue:  # (``@np.vectorize(otypes=...)`` given its function)
        return _NUMPYS_VECTORIZE_CALL(self, *args, **kwargs)
    if self.signature is not None:
        return _vectorized_with_signature(self, *args, **kwargs)
    kwargs = {**kwargs}
    names = [name for name in kwargs if name not in self.excluded]
    positions = [i for i in range(len(args)) if i not in self.excluded]
    vectorized_args = lists_as_arrays([args[i] for i in positions]
                                      + [kwargs[name] for name in names])
    operands = np.broadcast_arrays(*vectorized_args)
    shape = operands[0].shape if operands else ()

    def call(elements):
        given = list(args)
        for i, x in zip(positions, elements[:len(positions)]):
            given[i] = x
        kwargs.update(zip(names, elements[len(positions):]))
        return self.pyfunc(*given, **kwargs)

    if not operands:
        return call([])  # NumPy's f() where every argument is excluded
    first = None
    if not self.otypes:
        if any(np.size(x) == 0 for x in vectorized_args):
            raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
        # (NumPy's np.asarray(x).flat[0]: a Python number as NumPy's scalar)
        first = call([np.asarray(x).flat[0] if not hasattr(x, "flat") else
                      x.flat[0] if x.ndim else x[()] for x in vectorized_args])
    visits, axes = _ufunc_iteration(vectorized_args, shape)
    results = {}
    for index in visits:
        reuse = first is not None and self.cache and not results
        results[index] = first if reuse else call([x[index] for x in operands])
    if not results:
        arrays = [np.empty(shape, dtype) for dtype in self.otypes]
        return tuple(arrays) if len(arrays) > 1 else arrays[0]
    results = [results[index] for index in np.ndindex(*shape)]
    several = type(results[0]) is tuple
    outputs = list(zip(*results)) if several else [results]
    typed = first if first is not None else results[0]
    dtypes = self.otypes or [getattr(r, "dtype", None) or np.asarray(r).dtype
                             for r in (typed if several else [typed])]
    arrays = []
    for values, dtype in zip(outputs, dtypes, strict=True):
        if np.dtype(dtype) == object:  # NumPy's array of the objects f returned
            arrays.append(_objects_laid_out(shape, axes, zip(np.ndindex(*shape), values)))
            continue
        y = np.stack(list(values))
        y = (y if y.dtype == dtype else y.astype(dtype)).reshape(shape)
        if axes != sorted(axes):  # NumPy's memory order, which a later reduction sums in
            y = y.transpose(axes).copy().transpose(np.argsort(axes))
        arrays.append(y)
    return tuple(arrays) if several else arrays[0]


def _ufunc_iteration(operands, shape):
    """The multi-indices of ``shape`` in the order NumPy's ufunc machinery (``np.vectorize``'s
    ``frompyfunc``) visits them for ``operands`` (order 'K'), and the axes of the output it
    allocates from outermost to innermost in memory: NumPy's iterator decides on stand-ins
    with the operands' strides, whose memory it never reads."""
    stand_ins = [np.lib.stride_tricks.as_strided(  # (operands before broadcasting: a number's
        np.empty(1), np.shape(x), np.shape(x) and  # strides are 0, which the order ignores)
        (x.strides if hasattr(x, "strides") else np.asarray(x).strides)) for x in operands]
    stand_ins = [*np.broadcast_arrays(*stand_ins)]
    it = np.nditer(stand_ins + [None], flags=["zerosize_ok", "refs_ok", "multi_index"],
                   op_flags=[["readonly"]] * len(stand_ins) + [["writeonly", "allocate"]],
                   order="K")
    layout = it.operands[-1]
    visits = []
    while not it.finished:
        visits.append(it.multi_index)
        it.iternext()
    return visits, sorted(range(len(shape)), key=lambda axis: -layout.strides[axis])


def _vectorized_with_signature(self, *args, **kwargs):
    """``np.vectorize(f, signature=...)(*args)`` on traced arrays, NumPy's loop: ``f`` called
    on the core slices of the arguments (their loop axes broadcast), in C order, each output's
    results broadcast to its core shape (the first result's, or the inputs' sizes of its
    dimensions), cast to ``otypes`` or the first result's type and stacked, where NumPy writes
    them into arrays mutad would not follow."""
    excluded = self.excluded
    names = [name for name in kwargs if name not in excluded]
    positions = [i for i in range(len(args)) if i not in excluded]
    operands = [args[i] for i in positions] + [kwargs[name] for name in names]

    def func(*items):
        given = list(args)
        for i, x in zip(positions, items[:len(positions)]):
            given[i] = x
        return self.pyfunc(*given, **{**kwargs, **dict(zip(names, items[len(positions):]))})

    in_dims, out_dims = self._in_and_out_core_dims
    if len(operands) != len(in_dims):
        raise TypeError(f"wrong number of positional arguments: expected {len(in_dims)}, got "
                        f"{len(operands)}")
    operands = [x if hasattr(x, "shape") else np.asanyarray(x)
                for x in lists_as_arrays(operands)]
    sizes = {}
    for x, dims in zip(operands, in_dims):
        if x.ndim < len(dims):
            raise ValueError(f"{x.ndim}-dimensional argument does not have enough dimensions "
                             f"for all core dimensions {dims!r}")
        _core_sizes(sizes, x.shape[x.ndim - len(dims):], dims)
    loop = np.broadcast_shapes(*(x.shape[:x.ndim - len(dims)] for x, dims in zip(operands, in_dims)))
    operands = [np.broadcast_to(x, loop + x.shape[x.ndim - len(dims):])
                for x, dims in zip(operands, in_dims)]
    results = []
    for index in np.ndindex(*loop):
        result = func(*(x[index] for x in operands))
        result = result if len(out_dims) > 1 and isinstance(result, tuple) else (result,)
        if len(result) != len(out_dims):
            raise ValueError(f"wrong number of outputs from pyfunc: expected {len(out_dims)}, "
                             f"got {len(result)}")
        if not results:
            for r, dims in zip(result, out_dims):
                _core_sizes(sizes, np.shape(r)[np.ndim(r) - len(dims):], dims)
        results.append(result)
    if not results:
        if not self.otypes:
            raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
        if any(d not in sizes for dims in out_dims for d in dims):
            raise ValueError("cannot call `vectorize` with a signature including new output "
                             "dimensions on size 0 inputs")
    dtypes = self.otypes or [getattr(r, "dtype", None) or np.asarray(r).dtype for r in results[0]]
    arrays = []
    for k, (dims, dtype) in enumerate(zip(out_dims, dtypes, strict=True)):
        core = tuple(sizes[d] for d in dims)
        if not results:
            arrays.append(np.empty(loop + core, dtype))
            continue
        y = np.stack([np.broadcast_to(result[k], core) for result in results])
        arrays.append((y if y.dtype == dtype else y.astype(dtype)).reshape(loop + core))
    return tuple(arrays) if len(out_dims) > 1 else arrays[0]


def _core_sizes(sizes, shape, dims):
    """Note the sizes ``shape`` gives the core dimensions ``dims``; NumPy's error where one
    differs from the size noted before."""
    if len(shape) != len(dims):
        raise ValueError(f"{len(shape)}-dimensional argument does not have enough dimensions "
                         f"for all core dimensions {dims!r}")
    for dim, size in zip(dims, shape):
        if sizes.setdefault(dim, size) != size:
            raise ValueError(f"inconsistent size for core dimension {dim!r}: {size} vs "
                             f"{sizes[dim]}")


# Every call while a differentiation runs: ``f`` may read differentiated values it closes
# over (``np.vectorize(lambda r: model(r, params))(grid)``) where every argument is plain.
vectorized.always = True  # type: ignore[attr-defined]
defmethod(np.vectorize, "__call__", vectorized)


# ----------------------------------------------------------------------------------------------
# The ufuncs np.frompyfunc makes: NumPy's object arrays of what the Python function returns


@defcomposite(np.frompyfunc)
def pyfunc_ufunc_called(ufunc, *args, **kwargs):
    """A call of ``ufunc``, made by ``np.frompyfunc``, on traced arguments: its Python function
    called on each element of the broadcast arguments (a traced 0-d array where NumPy gives a
    Python number) in the order NumPy's ufunc machinery visits them, its results in object
    arrays laid out as NumPy lays out its outputs (``allocation.TracedObjects``), or themselves
    where the arguments are numbers, as NumPy gives them. (``np.frompyfunc``'s Rule serves
    every ufunc it makes: ``registry.pyfunc_ufunc_rule``.) ``ufunc`` a method of one
    (``U.reduce``, ``accumulate``, ``reduceat``, ``outer``): ``_pyfunc_ufunc_method``."""
    if not isinstance(ufunc, np.ufunc):
        return _pyfunc_ufunc_method(ufunc, args, kwargs)
    held = [v for v in gc.get_referents(ufunc) if callable(v)]
    if kwargs or len(held) != 1:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__} (made by np.frompyfunc) with the keyword arguments "
            f"{sorted(kwargs)} on traced values: mutad follows its calls without keywords. "
            "Call it without them and write the result where it should go (y[...] = "
            "f(x).astype(float)), or use np.vectorize(f, otypes=[float]).")
    pyfunc, = held
    given = lists_as_arrays(args)
    operands = np.broadcast_arrays(*given)
    shape = operands[0].shape

    def element(x, index):  # (NumPy's: a number of the array as a Python object)
        e = x[index]
        if x.dtype == object:
            return e
        return e.item() if isinstance(e, np.generic) else python_number(e)

    visits, axes = _ufunc_iteration(given, shape)
    results = {index: pyfunc(*[element(x, index) for x in operands]) for index in visits}
    if ufunc.nout > 1:
        results = {index: tuple(r) for index, r in results.items()}
        for r in results.values():
            if len(r) != ufunc.nout:
                raise ValueError("Function returned wrong number of outputs")
    if not shape:
        return results[()]
    outputs = [_objects_laid_out(shape, axes, ((index, r[k] if ufunc.nout > 1 else r)
                                               for index, r in results.items()))
               for k in range(ufunc.nout)]
    return tuple(outputs) if ufunc.nout > 1 else outputs[0]


def _objects_laid_out(shape, axes, items):
    """An array of objects of ``shape`` laid out in memory with ``axes`` outermost first (as
    NumPy's ufunc machinery lays out its output: ``_ufunc_iteration``), holding the objects of
    ``items``, ``(index, object)`` pairs: a ``TracedObjects``."""
    y = np.empty([shape[axis] for axis in axes], dtype=object).transpose(np.argsort(axes))
    for index, item in items:
        y[index] = item
    return y.view(TracedObjects)


def _pyfunc_ufunc_method(method, args, kwargs):
    """``U.reduce(x)`` (``accumulate``, ``reduceat``, ``outer``) of a ufunc ``U`` np.frompyfunc
    made, on traced arrays: NumPy's own method on arrays of objects, each traced array's of
    its elements (traced 0-d arrays where NumPy casts the floats to Python numbers; laid out
    in its memory order, which NumPy's output follows), so that NumPy's loop calls the Python
    function on them in its order, which mutad follows; an array of objects as
    ``TracedObjects``, as ``U(x)`` gives."""
    name = f"np.{method.__self__.__name__}.{method.__name__}"
    if "out" in kwargs or any(holds_derivative(v) for v in kwargs.values()):
        raise UnsupportedOperationError(
            f"{name} (made by np.frompyfunc) with out= or a traced keyword argument on traced "
            "values: mutad follows it without them. Write the result where it should go "
            "(y[...] = f.reduce(x).astype(float)).")
    operands = []
    for x in lists_as_arrays(args):
        if wrapped(x):  # (NumPy would hand a traced array back to mutad)
            _, axes = _ufunc_iteration([x], x.shape)
            x = _objects_laid_out(x.shape, axes, ((i, python_number(x[i]))
                                                  for i in np.ndindex(x.shape)))
        operands.append(x)
    return method(*operands, **kwargs)  # (TracedObjects' own: of objects, its type again)


# ----------------------------------------------------------------------------------------------
# Linear algebra


def _singular_values(x):
    return np.linalg.svd(x, compute_uv=False)


@defcomposite(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """NumPy's steps: the tensor as a square matrix, solved for the raveled right-hand side."""
    a = a if hasattr(a, "ndim") else np.asarray(a)
    b = b if hasattr(b, "ndim") else np.asarray(b)
    if axes is not None:
        order = list(range(a.ndim))
        for k in axes:
            order.remove(k)
            order.insert(a.ndim, k)
        a = np.transpose(a, order)
    shape = a.shape[-(a.ndim - b.ndim):]
    size = math.prod(shape)
    if a.size != size ** 2:
        raise np.linalg.LinAlgError(
            "Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == "
            "prod(a.shape[:b.ndim])")
    return np.reshape(np.linalg.solve(np.reshape(a, (size, size)), np.ravel(b)), shape)


@defcomposite(np.linalg.tensorinv)
def tensorinv(a, ind=2):
    """NumPy's steps: the tensor as a matrix, inverted, reshaped."""
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    shape = np.shape(a)
    size = math.prod(shape[ind:])
    return np.reshape(np.linalg.inv(np.reshape(a, (size, -1))), shape[ind:] + shape[:ind])


@defcomposite(np.linalg.svdvals)
def svdvals(x, /):
    return _singular_values(x)


@defcomposite(np.linalg.cond)
def cond(x, p=None):
    """NumPy's steps, under its ``np.errstate(all="ignore")``: the ratio of the extreme
    singular values, or the norms of ``x`` and of its inverse, taken in double precision (a
    singular matrix's inverse NaN, as LAPACK's is), in ``x``'s real precision; a NaN where
    ``x`` holds none is inf."""
    x = x if hasattr(x, "ndim") else np.asarray(x)
    if x.size == 0 and math.prod(x.shape[-2:]) == 0:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    if p is None or p in {2, -2}:
        s = _singular_values(x)
        with np.errstate(all="ignore"):
            r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        if x.ndim < 2:
            raise np.linalg.LinAlgError(f"{x.ndim}-dimensional array given. Array must be at "
                                        "least two-dimensional")
        if x.shape[-1] != x.shape[-2]:
            raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
        if x.dtype.kind in "fc" and x.dtype not in (np.float32, np.float64, np.complex64,
                                                    np.complex128):
            raise TypeError(f"array type {x.dtype.name} is unsupported in linalg")
        single = x.dtype in (np.float32, np.complex64)
        wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        with np.errstate(all="ignore"):
            r = np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(_inverse_or_nan(wide), p,
                                                                     axis=(-2, -1))
        r = r.astype(np.float32 if single else np.float64, copy=False)
    r = np.where(np.isnan(r) & ~np.isnan(x).any(axis=(-2, -1)), np.inf, r)
    return r[()] if r.ndim == 0 else r


def _inverse_or_nan(a):
    """The inverses of the matrices of ``a`` as NumPy's ``cond`` takes them: LAPACK's, NaN for
    a singular one."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        if a.ndim == 2:
            return np.full(a.shape, np.nan, a.dtype)
        return np.stack([_inverse_or_nan(m) for m in a])


# ``np.emath`` (``np.lib.scimath``): NumPy's steps, a real argument outside the function's real
# domain cast to complex first (a decision on its values, which a replay guards), then the ufunc.


def _as_complex(x):
    single = issubclass(x.dtype.type, (np.single, np.byte, np.short, np.ubyte, np.ushort,
                                       np.csingle))
    return x.astype(np.complex64 if single else np.complex128)


def _array(x):
    return x if isinstance(x, Tracer) else np.asarray(x)


def _complex_below_zero(x):
    x = _array(x)
    return _as_complex(x) if np.any(np.isreal(x) & (x < 0)) else x


def _complex_beyond_one(x):
    x = _array(x)
    return _as_complex(x) if np.any(np.isreal(x) & (abs(x) > 1)) else x


def _emath(ufunc, fix):
    def composite(x):
        return ufunc(fix(x))

    composite.__name__ = composite.__qualname__ = ufunc.__name__
    return composite


for _ufunc in (np.sqrt, np.log, np.log10, np.log2):
    defcomposite(getattr(np.emath, _ufunc.__name__))(_emath(_ufunc, _complex_below_zero))
for _ufunc in (np.arccos, np.arcsin, np.arctanh):
    defcomposite(getattr(np.emath, _ufunc.__name__))(_emath(_ufunc, _complex_beyond_one))


@defcomposite(np.emath.logn)
def logn(n, x):
    x = _complex_below_zero(x)
    n = _complex_below_zero(n)
    return np.log(x) / np.log(n)


@defcomposite(np.emath.power)
def power(x, p):
    x = _complex_below_zero(x)
    p = _array(p)
    if np.any(np.isreal(p) & (p < 0)):  # NumPy's: an integer power below zero as floats
        p = p * 1.0
    return np.power(x, p)


# Index helpers, ranks and the parts of real arrays that are constants.
nondifferentiable(np.diag_indices_from, np.triu_indices_from, np.tril_indices_from, np.spacing,
                  np.linalg.matrix_rank)


# Complex values (facet complex): the compositions that compute NumPy's values for complex
# arrays too. The others (the variances, covariances and correlation, which conjugate or take
# magnitudes) are refused for complex values.
complex_aware(np.gradient, np.trapezoid, np.ediff1d, np.cumulative_sum, np.cumulative_prod,
              np.nancumsum, np.nancumprod, np.average, np.polyval, np.polyder, np.polyint,
              np.poly, np.polyadd, np.polysub, np.polymul, np.roots, np.vander,
              np.linalg.multi_dot, np.meshgrid,
              np.diagflat, np.angle, np.real_if_close, np.linalg.svdvals, np.linalg.cond,
              np.insert, np.block, np.apply_along_axis, np.apply_over_axes, np.piecewise,
              np.emath.sqrt, np.emath.log, np.emath.log10, np.emath.log2, np.emath.logn,
              np.emath.power, np.emath.arccos, np.emath.arcsin, np.emath.arctanh)
