"""``scipy.ndimage`` filters mutad differentiates, by SciPy's names too.

>>> import numpy as np, mutad
>>> from mutad.scipy import ndimage
>>> blur = lambda x: (ndimage.gaussian_filter1d(x, 1.0, mode="wrap") ** 2).sum()
>>> mutad.gradient(blur, np.array([1.0, 0.0, 0.0, 0.0]))[0].round(3).tolist()
[0.585, 0.5, 0.415, 0.5]

The linear filters (``correlate``, ``convolve``, their 1-d forms, ``gaussian_filter``,
``uniform_filter``, ``sobel``, ``prewitt``, ``laplace``, ``gaussian_laplace``,
``gaussian_gradient_magnitude``) are differentiated in their input, their weights and a
``constant`` mode's ``cval``, for every boundary mode, to any order and in forward mode. The
rank filters (``maximum_filter``, ``minimum_filter``, ``median_filter``, ``rank_filter``,
``percentile_filter``) pass each output's cotangent to the element it selected. ``output=``
may be a dtype, or an array made inside the differentiated function, which is then written
as an assignment is (and put back by the reverse pass).

Every function is built as SciPy builds it, out of one primitive, SciPy's 1-d or n-d
correlation (or its running mean), whose values are SciPy's own. Its derivative is the
correlation's as a linear map: SciPy extends each line of the input by its boundary mode and
correlates the extended line, y[i] = Σ_j w[j] x̃[i + j], x̃ = P x (+ cval where the extension
is constant). Which element of x each position of x̃ copies (P, a gather) is asked of SciPy
itself, so every mode, origin and filter longer than the input is SciPy's; the transpose is
then x̄ = Pᵀ (ȳ convolved fully with w), and w̄[j] = Σ_i ȳ[i] x̃[i + j].
"""

import functools
import numbers

import numpy as np
import scipy.ndimage as _ndimage
from numpy.lib.array_utils import normalize_axis_index
from numpy.lib.stride_tricks import sliding_window_view
from scipy.ndimage import _filters, _ni_support

from ..errors import UnsupportedOperationError, UntracedWriteError
from ..levels import innermost
from ..rules._helpers import gather_cotangent
from ._adjoints import ScipyAdjoint, stands_in_for

__all__ = ["convolve", "convolve1d", "correlate", "correlate1d", "gaussian_filter",
           "gaussian_filter1d", "gaussian_gradient_magnitude", "gaussian_laplace", "laplace",
           "maximum_filter", "maximum_filter1d", "median_filter", "minimum_filter",
           "minimum_filter1d", "percentile_filter", "prewitt", "rank_filter", "sobel",
           "uniform_filter", "uniform_filter1d"]


# ----------------------------------------------------------------------------------------------
# The primitive: one correlation, SciPy's values, its transpose for the derivatives


def _plain_filter(input, weights, cval, kind, axis, mode, origin, dtype, followed=None):
    """SciPy's correlation of ``input`` with ``weights`` into a new array of ``dtype``:
    ``kind`` "correlate" (n-d, ``origin`` one per axis), "correlate1d" along ``axis``, or
    "uniform1d" (SciPy's running mean, the correlation with ``weights`` = 1/size).
    ``followed`` says which of input, weights, cval a differentiation follows."""
    if kind == "correlate":
        return _ndimage.correlate(input, weights, dtype, mode, cval, origin)
    if kind == "correlate1d":
        return _ndimage.correlate1d(input, weights, axis, dtype, mode, cval, origin)
    return _ndimage.uniform_filter1d(input, np.size(weights), axis, dtype, mode, cval, origin)


_filter = ScipyAdjoint(_plain_filter)


@functools.lru_cache(maxsize=512)
def _extension(length, size, origin, mode):
    """The extended line SciPy correlates a line of ``length`` elements with a filter of
    ``size`` taps at ``origin``: for each of its ``length + size - 1`` positions, the index of
    the element it copies, -1 where it is the constant ``cval``. Asked of SciPy: correlating
    the indices themselves with each unit filter reads them off (read-only, as it is cached)."""
    line = np.full(length + size - 1, -1, dtype=np.intp)
    indices = np.arange(length, dtype=np.float64)
    for j in range(size):
        unit = np.zeros(size)
        unit[j] = 1.0
        line[j:j + length] = _ndimage.correlate1d(indices, unit, 0, None, mode, -1.0, origin)
    line.flags.writeable = False
    return line


def _lines(shape, sizes, origins, modes):
    """The extension of every axis (None where the filter is one tap at origin 0)."""
    return tuple(None if size == 1 and origin == 0 else _extension(n, size, origin, mode)
                 for n, size, origin, mode in zip(shape, sizes, origins, modes, strict=True))


def _extended(x, fill, lines):
    """x̃: ``x`` extended along every axis by ``lines`` (``fill`` where a line says -1), with
    NumPy calls that dispatch."""
    outside = None
    for axis, line in enumerate(lines):
        if line is None:
            continue
        x = np.take(x, np.maximum(line, 0), axis=axis)
        if line.min(initial=0) < 0:
            edge = np.expand_dims(line < 0, tuple(range(1, len(lines) - axis)))
            outside = edge if outside is None else outside | edge
    return x if outside is None else np.where(outside, fill, x)


def _geometry(input, weights, kind, axis, mode, origin):
    """The filter's taps along each axis, and its extension lines."""
    ndim = np.ndim(input)
    if kind == "correlate":
        sizes, origins = np.shape(weights), tuple(origin)
    else:
        sizes = tuple(np.size(weights) if a == axis else 1 for a in range(ndim))
        origins = tuple(origin if a == axis else 0 for a in range(ndim))
    return sizes, _lines(np.shape(input), sizes, origins, (mode,) * ndim)


@_filter.rule
def _filter_rule(input, weights, cval, kind, axis, mode, origin, dtype, followed=None):
    # The wrapper, not SciPy's own: nested reverse mode differentiates the pullback again.
    y = _filter(input, weights, cval, kind, axis, mode, origin, dtype, followed)
    sizes, lines = _geometry(input, weights, kind, axis, mode, origin)
    follow_input, follow_weights, follow_cval = followed or (True, True, True)

    def back(dy):
        dinput = dweights = dcval = None
        if follow_input or follow_cval:
            # x̃'s cotangent: ȳ convolved fully with w, i.e. ȳ padded with zeros and correlated
            # with w flipped, whose centre tap (size // 2) shifts the window read.
            taps = np.reshape(weights, sizes)
            padded = np.pad(dy, [(s - 1, s - 1) for s in sizes])
            full = _filter(padded, np.flip(taps), 0.0, "correlate", None, "constant",
                           (0,) * len(sizes), None)
            dextended = full[tuple(slice(s // 2, s // 2 + n + s - 1)
                                   for s, n in zip(sizes, np.shape(dy), strict=True))]
            # Pᵀ: each position's cotangent to the element it copies (none for cval's).
            dinput = gather_cotangent(dextended, input,
                                      lambda sources: _extended(sources, -1, lines))
            if follow_cval and mode in ("constant", "grid-constant"):
                dcval = np.sum(dextended) - np.sum(dinput)
        if follow_weights:
            windows = sliding_window_view(_extended(input, cval, lines), sizes)
            dweights = np.reshape(np.tensordot(dy, windows, axes=np.ndim(dy)),
                                  np.shape(weights))
        return dinput, dweights, dcval

    return y, back


@_filter.jvp_rule
def _filter_jvp(tangents, input, weights, cval, kind, axis, mode, origin, dtype, followed=None):
    # Linear in (input, cval) jointly and in weights: the filter of the tangents.
    dinput, dweights, dcval = (tuple(tangents) + (None,) * 3)[:3]
    y = _filter(input, weights, cval, kind, axis, mode, origin, dtype, followed)
    parts = []
    if dinput is not None or dcval is not None:
        parts.append(_filter(np.zeros_like(input) if dinput is None else dinput, weights,
                             0.0 if dcval is None else dcval, kind, axis, mode, origin, dtype))
    if dweights is not None:
        parts.append(_filter(input, dweights, cval, kind, axis, mode, origin, dtype))
    return y, functools.reduce(np.add, parts) if parts else None


# ----------------------------------------------------------------------------------------------
# SciPy's names: each built as SciPy builds it, on the primitive


def _is_dtype(output):
    return isinstance(output, type | np.dtype | str)


def _dtype(output, input, name):
    """The dtype SciPy filters into (its ``_get_output``), refused unless a float's."""
    if output is None:
        dtype = input.dtype if hasattr(input, "dtype") else np.asarray(input).dtype
    elif _is_dtype(output):
        dtype = np.dtype(output)
    else:
        dtype = output.dtype
        if np.shape(output) != np.shape(input):
            raise RuntimeError("output shape not correct")
    if dtype.kind != "f":
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} into a {dtype} output: mutad differentiates filters into "
            "float outputs only (integers round, complex values are split); pass a float "
            "input, or output=np.float64.")
    return dtype


def _deliver(result, output):
    """SciPy's return: a preallocated ``output`` written (the core's assignment, which the
    reverse pass undoes) and returned; else the new result."""
    if output is None or _is_dtype(output):
        return result
    if innermost((output,)) is None and innermost((result,)) is not None:
        raise UntracedWriteError(
            "scipy.ndimage: a filter of traced arrays was given output= an array made before "
            "the differentiation started, which mutad cannot follow; allocate the output "
            "inside the differentiated function (np.empty_like(x)), or leave output out and "
            "use the filter's return value.")
    output[...] = result
    return output


def _constant(value, what, name):
    if innermost((value,)) is not None:
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name}: mutad does not differentiate with respect to {what}; pass "
            "it as a constant (a number not computed from the differentiated arguments).")
    return value


def _weights(weights):
    """Plain weights as SciPy reads them (float64); traced ones as they are."""
    return np.asarray(weights, dtype=np.float64) if innermost((weights,)) is None else weights


def _correlate1d(input, weights, axis, dtype, mode, cval, origin, kind="correlate1d"):
    axis = normalize_axis_index(axis, np.ndim(input))
    followed = tuple(innermost((v,)) is not None for v in (input, weights, cval))
    return _filter(input, _weights(weights), cval, kind, axis, mode, origin, dtype, followed)


@stands_in_for(_ndimage.correlate1d)
def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    dtype = _dtype(output, input, "correlate1d")
    return _deliver(_correlate1d(input, weights, axis, dtype, mode, cval, origin), output)


@stands_in_for(_ndimage.convolve1d)
def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    # SciPy's own reduction to correlate1d: the weights reversed, the origin mirrored.
    dtype = _dtype(output, input, "convolve1d")
    weights = np.flip(_weights(weights))
    origin = -origin - (0 if np.shape(weights)[0] & 1 else 1)
    return _deliver(_correlate1d(input, weights, axis, dtype, mode, cval, origin), output)


def _correlate_nd(input, weights, output, mode, cval, origin, convolution, axes, name):
    dtype = _dtype(output, input, name)
    if not isinstance(mode, str):
        raise RuntimeError("A sequence of modes is not supported")
    axes = _ni_support._check_axes(axes, np.ndim(input))
    weights = _filters._expand_footprint(np.ndim(input), axes, _weights(weights), "weights")
    origins = _filters._expand_origin(np.ndim(input), axes, origin)
    if convolution:  # as SciPy: every axis reversed, the origins mirrored
        weights = np.flip(weights)
        origins = [-o - (0 if n & 1 else 1) for o, n in zip(origins, np.shape(weights))]
    followed = tuple(innermost((v,)) is not None for v in (input, weights, cval))
    y = _filter(input, weights, cval, "correlate", None, mode, tuple(origins), dtype, followed)
    return _deliver(y, output)


@stands_in_for(_ndimage.correlate)
def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return _correlate_nd(input, weights, output, mode, cval, origin, False, axes, "correlate")


@stands_in_for(_ndimage.convolve)
def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return _correlate_nd(input, weights, output, mode, cval, origin, True, axes, "convolve")


def _uniform1d(input, size, axis, dtype, mode, cval, origin):
    if size < 1:
        raise RuntimeError("incorrect filter size")
    return _correlate1d(input, np.full(int(size), 1.0 / int(size)), axis, dtype, mode, cval,
                        origin, kind="uniform1d")


@stands_in_for(_ndimage.uniform_filter1d)
def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    dtype = _dtype(output, input, "uniform_filter1d")
    return _deliver(_uniform1d(input, size, axis, dtype, mode, cval, origin), output)


def _copy(input, dtype):
    """SciPy's ``output[...] = input`` where no axis is filtered."""
    return np.array(input, dtype=dtype, copy=True, like=input)


@stands_in_for(_ndimage.uniform_filter)
def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None):
    dtype = _dtype(output, input, "uniform_filter")
    axes = _ni_support._check_axes(axes, np.ndim(input))
    sizes = _ni_support._normalize_sequence(size, len(axes))
    origins = _ni_support._normalize_sequence(origin, len(axes))
    modes = _ni_support._normalize_sequence(mode, len(axes))
    y = input
    passes = [(a, s, o, m) for a, s, o, m in zip(axes, sizes, origins, modes) if s > 1]
    for axis, size, origin, mode in passes:
        y = _uniform1d(y, int(size), axis, dtype, mode, cval, origin)
    return _deliver(y if passes else _copy(input, dtype), output)


def _gaussian1d(input, sigma, axis, order, dtype, mode, cval, truncate, radius):
    _constant(sigma, "sigma", "gaussian_filter")
    sd = float(sigma)
    lw = int(truncate * sd + 0.5) if radius is None else radius
    if not isinstance(lw, numbers.Integral) or lw < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    # SciPy's own kernel, reversed as SciPy reverses it (it correlates).
    weights = _filters._gaussian_kernel1d(sigma, order, lw)[::-1]
    return _correlate1d(input, weights, axis, dtype, mode, cval, 0)


@stands_in_for(_ndimage.gaussian_filter1d)
def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    dtype = _dtype(output, input, "gaussian_filter1d")
    y = _gaussian1d(input, sigma, axis, order, dtype, mode, cval, truncate, radius)
    return _deliver(y, output)


def _gaussian(input, sigma, order, dtype, mode, cval, truncate, radius, axes):
    axes = _ni_support._check_axes(axes, np.ndim(input))
    count = len(axes)
    passes = [(a, s, o, m, r) for a, s, o, m, r in zip(
        axes, _ni_support._normalize_sequence(sigma, count),
        _ni_support._normalize_sequence(order, count),
        _ni_support._normalize_sequence(mode, count),
        _ni_support._normalize_sequence(radius, count)) if s > 1e-15]
    y = input
    for axis, sigma, order, mode, radius in passes:
        y = _gaussian1d(y, sigma, axis, order, dtype, mode, cval, truncate, radius)
    return y if passes else _copy(input, dtype)


@stands_in_for(_ndimage.gaussian_filter)
def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None):
    dtype = _dtype(output, input, "gaussian_filter")
    y = _gaussian(input, sigma, order, dtype, mode, cval, truncate, radius, axes)
    return _deliver(y, output)


def _edges(input, axis, output, mode, cval, across, name):
    """``sobel`` and ``prewitt``: a central difference along ``axis``, then the smoothing
    ``across`` along every other axis, as SciPy filters them."""
    dtype = _dtype(output, input, name)
    ndim = np.ndim(input)
    axis = normalize_axis_index(axis, ndim)
    modes = _ni_support._normalize_sequence(mode, ndim)
    y = _correlate1d(input, [-1.0, 0.0, 1.0], axis, dtype, modes[axis], cval, 0)
    for other in range(ndim):
        if other != axis:
            y = _correlate1d(y, across, other, dtype, modes[other], cval, 0)
    return _deliver(y, output)


@stands_in_for(_ndimage.sobel)
def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return _edges(input, axis, output, mode, cval, [1.0, 2.0, 1.0], "sobel")


@stands_in_for(_ndimage.prewitt)
def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return _edges(input, axis, output, mode, cval, [1.0, 1.0, 1.0], "prewitt")


def _summed(input, derivative, dtype, mode, axes, square=False):
    """SciPy's ``generic_laplace`` (the sum of the second derivatives along ``axes``) and,
    with ``square``, ``generic_gradient_magnitude`` (the root of the sum of the squared first
    derivatives), in SciPy's order of operations."""
    axes = _ni_support._check_axes(axes, np.ndim(input))
    if not axes:
        return _copy(input, dtype)
    modes = _ni_support._normalize_sequence(mode, len(axes))
    total = None
    for axis, mode in zip(axes, modes):
        term = derivative(input, axis, mode)
        if square:
            term = term * term
        total = term if total is None else total + term
    return np.sqrt(total) if square else total


@stands_in_for(_ndimage.laplace)
def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    dtype = _dtype(output, input, "laplace")
    y = _summed(input, lambda x, axis, mode: _correlate1d(x, [1.0, -2.0, 1.0], axis, dtype,
                                                           mode, cval, 0), dtype, mode, axes)
    return _deliver(y, output)


def _gaussian_derivatives(input, sigma, order, dtype, cval, axes, kwargs):
    """The ``derivative`` of ``gaussian_laplace`` (``order`` 2) or
    ``gaussian_gradient_magnitude`` (``order`` 1): a Gaussian filter along every axis, of that
    order along one."""
    ndim = np.ndim(input)
    if order == 2:  # gaussian_laplace: sigma 0 along the axes it does not filter
        count = len(_ni_support._check_axes(axes, ndim))
        sigma = _ni_support._normalize_sequence(sigma, count)
        if count < ndim:
            full = [0] * ndim
            for s, a in zip(sigma, _ni_support._check_axes(axes, ndim)):
                full[a] = s
            sigma = full

    def derivative(x, axis, mode):
        orders = [0] * ndim
        orders[axis] = order
        return _gaussian(x, sigma, orders, dtype, mode, cval, kwargs.get("truncate", 4.0),
                         kwargs.get("radius"), kwargs.get("axes"))

    unknown = set(kwargs) - {"truncate", "radius"}
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}")
    return derivative


@stands_in_for(_ndimage.gaussian_laplace)
def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None,
                     **kwargs):
    dtype = _dtype(output, input, "gaussian_laplace")
    derivative = _gaussian_derivatives(input, sigma, 2, dtype, cval, axes, kwargs)
    return _deliver(_summed(input, derivative, dtype, mode, axes), output)


@stands_in_for(_ndimage.gaussian_gradient_magnitude)
def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *,
                                axes=None, **kwargs):
    dtype = _dtype(output, input, "gaussian_gradient_magnitude")
    derivative = _gaussian_derivatives(input, sigma, 1, dtype, cval, axes, kwargs)
    return _deliver(_summed(input, derivative, dtype, mode, axes, square=True), output)


# ----------------------------------------------------------------------------------------------
# Rank filters: each output is one element of its window, chosen in the forward pass


def _plain_select(input, call):
    """SciPy's rank filter: ``call`` holds the function and every setting of the user's call."""
    return call(input)


_select = ScipyAdjoint(_plain_select)


def _chosen(input, y, footprint, origins, modes, cval):
    """The flat index of the element each output of a rank filter took (-1: the constant
    ``cval``), decided now and kept: the first element of its window equal to it."""
    lines = _lines(np.shape(input), footprint.shape, origins, modes)
    sources = _extended(np.arange(np.size(input)).reshape(np.shape(input)), -1, lines)
    windows = sliding_window_view(sources, footprint.shape)[..., footprint]
    values = np.where(windows >= 0, np.ravel(input)[np.maximum(windows, 0)], cval)
    hit = values.astype(y.dtype) == y[..., None]
    hit |= np.isnan(values) & np.isnan(y)[..., None]
    if not hit.any(axis=-1).all():
        raise UnsupportedOperationError(
            "a scipy.ndimage rank filter returned a value mutad finds in no window of its "
            "input, so it cannot say which element was selected; differentiate a float64 "
            "filter of a float64 input.")
    first = np.argmax(hit, axis=-1)[..., None]
    return np.take_along_axis(windows, first, axis=-1)[..., 0]


@_select.rule
def _select_rule(input, call):
    y = _select(input, call)
    chosen = _chosen(input, y, *call.keywords["geometry"])

    def back(dy):
        return gather_cotangent(dy, input, lambda sources: chosen), None

    return y, back


@_select.jvp_rule
def _select_jvp(tangents, input, call):
    y = _select(input, call)
    chosen = _chosen(input, y, *call.keywords["geometry"])
    gathered = np.take(np.ravel(tangents[0]), np.maximum(chosen, 0))
    return y, np.where(chosen >= 0, gathered, np.zeros_like(gathered))


def _rank(original, name, input, size, footprint, output, mode, cval, origin, axes, **settings):
    """A rank filter of ``input``: SciPy's ``original`` with the user's settings, each output
    taking the cotangent of the element it selected from its window (footprint ``footprint``
    or a box of ``size``, extended by ``mode``: the same windows SciPy reads)."""
    dtype = _dtype(output, input, name)
    _constant(cval, "cval", name)
    ndim = np.ndim(input)
    axes = _ni_support._check_axes(axes, ndim)
    if footprint is None:
        if size is None:
            raise RuntimeError("no footprint provided")
        box = np.ones(_ni_support._normalize_sequence(size, len(axes)), dtype=bool)
    else:
        box = np.asarray(footprint, dtype=bool)
    box = _filters._expand_footprint(ndim, axes, box)
    origins = tuple(_filters._expand_origin(ndim, axes, origin))
    modes = ["constant"] * ndim
    for a, m in zip(axes, _ni_support._normalize_sequence(mode, len(axes))):
        modes[a] = m
    geometry = (box, origins, tuple(modes), cval)
    call = functools.partial(_call, original, dict(settings, size=size, footprint=footprint,
                                                   output=dtype, mode=mode, cval=cval,
                                                   origin=origin, axes=axes),
                             geometry=geometry)
    return _deliver(_select(input, call), output)


def _call(original, settings, input, geometry):
    return original(input, **settings)


def _rank_stand_in(original, *leading):
    """The stand-in of a rank filter whose first parameters after ``input`` are ``leading``."""
    name = original.__name__

    @stands_in_for(original)
    def stand_in(input, *args, **kwargs):
        parameters = (*leading, "size", "footprint", "output", "mode", "cval", "origin")
        bound = dict(zip(parameters, args), **kwargs)
        settings = {p: bound.pop(p) for p in leading}
        return _rank(original, name, input, bound.pop("size", None),
                     bound.pop("footprint", None), bound.pop("output", None),
                     bound.pop("mode", "reflect"), bound.pop("cval", 0.0),
                     bound.pop("origin", 0), bound.pop("axes", None), **settings, **bound)

    return stand_in


maximum_filter = _rank_stand_in(_ndimage.maximum_filter)
minimum_filter = _rank_stand_in(_ndimage.minimum_filter)
median_filter = _rank_stand_in(_ndimage.median_filter)
rank_filter = _rank_stand_in(_ndimage.rank_filter, "rank")
percentile_filter = _rank_stand_in(_ndimage.percentile_filter, "percentile")


def _rank1d_stand_in(original):
    """``maximum_filter1d`` and ``minimum_filter1d``: a box of ``size`` along ``axis``."""
    name = original.__name__

    @stands_in_for(original)
    def stand_in(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
        axis = normalize_axis_index(axis, np.ndim(input))
        dtype = _dtype(output, input, name)
        _constant(cval, "cval", name)
        ndim = np.ndim(input)
        box = np.ones([size if a == axis else 1 for a in range(ndim)], dtype=bool)
        origins = tuple(origin if a == axis else 0 for a in range(ndim))
        geometry = (box, origins, (mode,) * ndim, cval)
        call = functools.partial(_call, original, dict(size=size, axis=axis, output=dtype,
                                                       mode=mode, cval=cval, origin=origin),
                                 geometry=geometry)
        return _deliver(_select(input, call), output)

    return stand_in


maximum_filter1d = _rank1d_stand_in(_ndimage.maximum_filter1d)
minimum_filter1d = _rank1d_stand_in(_ndimage.minimum_filter1d)
