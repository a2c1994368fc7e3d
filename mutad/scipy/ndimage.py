"""``scipy.ndimage`` filters, grey morphology and measurements mutad differentiates, by
SciPy's names too.

>>> import numpy as np, mutad
>>> from mutad.scipy import ndimage
>>> blur = lambda x: (ndimage.gaussian_filter1d(x, 1.0, mode="wrap") ** 2).sum()
>>> mutad.gradient(blur, np.array([1.0, 0.0, 0.0, 0.0]))[0].round(3).tolist()
[0.585, 0.5, 0.415, 0.5]

The linear filters (``correlate``, ``convolve``, their 1-d forms, ``gaussian_filter``,
``uniform_filter``, ``sobel``, ``prewitt``, ``laplace``, ``gaussian_laplace``,
``gaussian_gradient_magnitude``) are differentiated in their input, their weights and a
``constant`` mode's ``cval``, for every boundary mode, to any order and in forward mode, and
the Gaussian ones in sigma, through SciPy's kernel's steps (its radius, a whole number, decided
from sigma's value: a replay where it changes traces the call again). The
rank filters (``maximum_filter``, ``minimum_filter``, ``median_filter``, ``rank_filter``,
``percentile_filter``) pass each output's cotangent to the element it selected. The
interpolations (``map_coordinates``, ``shift``, ``zoom``, ``rotate``, ``affine_transform``,
``geometric_transform``, whose mapping's coordinates are computed once, plain) are
differentiated in the image for every order, mode and prefilter (and ``spline_filter``,
``spline_filter1d``) and in a constant mode's ``cval`` (affine in image and ``cval`` jointly:
its derivative the interpolation of zeros with ``cval=1``), and at order 1 in
``map_coordinates``' coordinates and ``shift``'s shift
(see below; every mode, ``'grid-constant'`` with ``cval=0``). The Fourier filters
(``fourier_gaussian``, ``fourier_uniform``, ``fourier_ellipsoid``, ``fourier_shift``) are
differentiated in their real or complex input, for ``n=-1`` and a real transform's ``n``, and
in ``fourier_gaussian``'s sigma and ``fourier_shift``'s shift, to any order and in forward
mode (the box's and the ellipsoid's sizes are refused when traced). ``generic_filter`` calls
the user's function on each window of the traced image (SciPy's windows, its boundaries), so
what the function computes is differentiated; ``generic_filter1d`` calls it on each line of the
traced image, extended as SciPy extends it, and on a new output line the differentiation
follows, so what it writes there is differentiated. ``output=`` may be a
dtype, or an array made inside the differentiated function, which is then written as an
assignment is (and put back by the reverse pass).

Grey morphology (``grey_erosion``, ``grey_dilation``, ``grey_opening``, ``grey_closing``,
``morphological_gradient``, ``white_tophat``, ``black_tophat``) is the rank filters'
minimum and maximum over SciPy's windows (a size, a footprint or a structure; a dilation's
mirrored, its origin moved as SciPy moves it): SciPy's values, each output's cotangent going
to the element it selected (where a structure is given, the element whose value less (plus)
the structure's is the output). A differentiated structure sends each output's cotangent
to (less, in an erosion) the structure's value it took as well; ``cval`` is a constant
(refused when differentiated).

The measurements over labelled regions (``sum``, ``sum_labels``, ``mean``, ``variance``,
``standard_deviation``, ``minimum``, ``maximum``, ``extrema``, ``center_of_mass``) take SciPy's
own values and the derivatives of the same quantities written with one primitive, the sums of
the input over the regions (a ``bincount``; its transpose gives each element its region's
cotangent): the mean the sum over the count, the variance the mean of squared deviations, the
centre of mass the quotient of the coordinate-weighted sums; a region's minimum or maximum
passes its cotangent to the element at SciPy's ``minimum_position`` (``maximum_position``). A
missing label's value is SciPy's (0, or NaN for a quotient), its derivative 0. Labels and
``index`` are regions, constants (refused when differentiated); the positions carry no
derivative. ``labeled_comprehension`` runs SciPy's steps on the traced input: the user's
function is called on the same chunks, in the same order, so what it computes is
differentiated (its result cast to a float ``out_dtype``; another dtype gives SciPy's own,
plain result). ``median`` is the mean of the two elements (one twice for an odd count) SciPy's
own steps pick on the plain values, the quirks of an index not among the labels included.
``histogram``, ``label``, the binary morphology (``binary_erosion``, ``binary_dilation``,
``binary_opening``, ``binary_closing``, ``binary_fill_holes``, ``binary_hit_or_miss``,
``binary_propagation``) and the chamfer and brute-force distance transforms of a
differentiated input are decisions about its values (nonzero, in a bin): SciPy's own
results, with no derivative (a differentiated ``sampling=``, or an ``output=`` holding
differentiated values, is refused).

Every function is built as SciPy builds it, out of one primitive, SciPy's 1-d or n-d
correlation (or its running mean), whose values are SciPy's own. Its derivative is the
correlation's as a linear map: SciPy extends each line of the input by its boundary mode and
correlates the extended line, y[i] = Σ_j w[j] x̃[i + j], x̃ = P x (+ cval where the extension
is constant). Which element of x each position of x̃ copies (P, a gather) is asked of SciPy
itself, so every mode, origin and filter longer than the input is SciPy's; the transpose is
then x̄ = Pᵀ (ȳ convolved fully with w), and w̄[j] = Σ_i ȳ[i] x̃[i + j].
"""

import functools
import inspect
import math
import numbers
import warnings
from typing import Any

import numpy as np
import scipy.ndimage as _ndimage
import scipy.special as _special
from numpy.lib.array_utils import normalize_axis_index
from numpy.lib.stride_tricks import sliding_window_view
from scipy.ndimage import _filters, _measurements, _ni_support

from ..core.allocation import allocate, lists_as_arrays
from ..engines.arraylike import carries_derivative, settled
from ..core.errors import UnsupportedOperationError, UntracedWriteError
from ..core.levels import ACTIVE, innermost
from ..core.registry import CONVENTION
from ..rules._helpers import gather_cotangent, stacked
from ..core.devices import beside
from ..core.views import may_overlap, memory, same_region
from ..api import stop_gradient
from ._devices import call, through_counterparts
from ._adjoints import (ScipyAdjoint, ScipysCode, StandIn, Value, _plain, scipys_value,
                        stands_in_for)

__all__ = ["affine_transform", "binary_closing", "binary_dilation", "binary_erosion",
           "binary_fill_holes", "binary_hit_or_miss", "binary_opening", "binary_propagation",
           "distance_transform_bf", "distance_transform_cdt", "histogram", "label", "convolve",
           "convolve1d", "correlate", "correlate1d",
           "fourier_ellipsoid", "fourier_gaussian", "fourier_shift", "fourier_uniform",
           "gaussian_filter", "gaussian_filter1d", "gaussian_gradient_magnitude",
           "geometric_transform", "gaussian_laplace", "generic_filter", "generic_filter1d",
           "generic_gradient_magnitude", "generic_laplace", "laplace", "map_coordinates",
           "maximum_filter", "maximum_filter1d", "median_filter", "minimum_filter", "minimum_filter1d", "percentile_filter", "prewitt", "rank_filter",
           "rotate", "shift", "sobel", "spline_filter", "spline_filter1d", "uniform_filter",
           "uniform_filter1d", "zoom", "black_tophat", "center_of_mass", "extrema", "grey_closing",
           "grey_dilation", "grey_erosion", "grey_opening", "labeled_comprehension", "maximum",
           "maximum_position", "mean", "median", "minimum", "minimum_position",
           "morphological_gradient", "standard_deviation", "sum", "sum_labels", "variance",
           "white_tophat"]


# ----------------------------------------------------------------------------------------------
# The primitive: one correlation, SciPy's values, its transpose for the derivatives


@through_counterparts
def _plain_filter(input, weights, cval, kind, axis, mode, origin, dtype, followed=None):
    """SciPy's correlation of ``input`` with ``weights`` into a new array of ``dtype``:
    ``kind`` "correlate" (n-d, ``origin`` one per axis), "correlate1d" along ``axis``, or
    "uniform1d" (SciPy's running mean, the correlation with ``weights`` = 1/size).
    ``followed`` says which of input, weights, cval a differentiation follows."""
    # (SciPy's, or the device's counterpart for a device array: ``_devices.call``)
    if kind == "correlate":
        return call(_ndimage.correlate, (input, weights, dtype, mode, cval, origin), {})
    if kind == "correlate1d":
        return call(_ndimage.correlate1d, (input, weights, axis, dtype, mode, cval, origin), {})
    return call(_ndimage.uniform_filter1d,
                (input, np.size(weights), axis, dtype, mode, cval, origin), {})


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
        x = np.take(x, beside(memory(x), np.maximum(line, 0)), axis=axis)
        if line.min(initial=0) < 0:
            edge = np.expand_dims(line < 0, tuple(range(1, len(lines) - axis)))
            outside = edge if outside is None else outside | edge
    # (the mask, made on the host from the cached lines, where x lives: a device's memory)
    return x if outside is None else np.where(beside(memory(x), outside), fill, x)


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
    if np.size(input) == 0:  # no element: the output reads nothing, every derivative is 0
        return y, lambda dy: (np.zeros(np.shape(input)), np.zeros(np.shape(weights)), 0.0)
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
                constant = _extended(np.zeros(np.shape(input), dtype=bool), True, lines)
                dcval = np.sum(np.where(beside(memory(dextended), constant), dextended, 0.0))
            elif follow_cval:  # (the other modes never read cval: its derivative is 0)
                dcval = 0.0
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


def _dtype(output, input, name, shape=None):
    """The dtype SciPy filters into (its ``_get_output``), refused unless a float's."""
    if output is None:
        dtype = input.dtype if hasattr(input, "dtype") else np.asarray(input).dtype
    elif _is_dtype(output):
        dtype = np.dtype(output)
    else:
        dtype = output.dtype
        if np.shape(output) != (np.shape(input) if shape is None else tuple(shape)):
            raise RuntimeError("output shape not correct")
    if dtype.kind != "f":
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} into a {dtype} output: mutad differentiates filters into "
            "float outputs only (integers round, complex values are split); pass a float "
            "input, or output=np.float64.")
    return dtype


def _into_itself(name, input, output, by_lines=True):
    """Whether ``output`` is the input's own memory, for the filters SciPy computes from the
    input straight into ``output``: line by line through a buffer of a few lines (each line
    read before it is written, so its own values are the filter's; a 1-d input is one line),
    or otherwise (``generic_filter``'s windows, the Fourier filters: not ``by_lines``). An
    output over the input in another layout is refused: SciPy then reads what it has already
    written (lines: as many as its buffer holds at a time)."""
    if output is None or _is_dtype(output) or not hasattr(input, "shape") \
            or (by_lines and np.ndim(input) <= 1) or not may_overlap(input, output):
        return False
    if not same_region(memory(input), memory(output)):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} with output= overlapping the input in another layout: "
            "SciPy reads the input while it writes the output, in an order mutad does not "
            "follow; write into a new array (output=np.empty_like(x)) and copy it back, or "
            "into the input itself.")
    return True


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
    if np.shape(output) != np.shape(result):
        raise RuntimeError("output shape not correct")
    output[...] = result
    return output


def _constant(value, what, name):
    if innermost((value,)) is None:
        return value
    if _carries(value):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name}: mutad does not differentiate with respect to {what}; pass "
            "it as a constant (a number not computed from the differentiated arguments).")
    what = what if what.startswith("the ") else f"a {what}"  # "the matrix", "a cval"
    return settled(value, f"scipy.ndimage.{name} with {what} the program computes")


def _carries(value):
    """Whether ``value`` (inside lists and tuples too: a tuple of settings) carries a
    derivative."""
    if type(value) in (list, tuple):
        return any(_carries(v) for v in value)
    return carries_derivative(value)


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
    _into_itself("correlate1d", input, output)
    return _deliver(_correlate1d(input, weights, axis, dtype, mode, cval, origin), output)


@stands_in_for(_ndimage.convolve1d)
def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    # SciPy's own reduction to correlate1d: the weights reversed, the origin mirrored.
    dtype = _dtype(output, input, "convolve1d")
    _into_itself("convolve1d", input, output)
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
    _into_itself("uniform_filter1d", input, output)
    return _deliver(_uniform1d(input, size, axis, dtype, mode, cval, origin), output)


def _copy(input, dtype):
    """SciPy's ``output[...] = input`` where no axis is filtered."""
    return np.array(input, dtype=dtype, copy=True, like=input)


@stands_in_for(_ndimage.uniform_filter)
def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None):
    dtype = _dtype(output, input, "uniform_filter")
    _into_itself("uniform_filter", input, output)
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
    if carries_derivative(sigma):
        # differentiated through SciPy's own kernel (NumPy's steps on sigma); its radius, a
        # whole number, is decided from sigma's value and constant in it
        sd = float(settled(sigma, "the radius of scipy.ndimage.gaussian_filter's kernel "
                                  "(decided from a differentiated sigma)"))
    else:
        sigma = _constant(sigma, "sigma", "gaussian_filter")
        sd = float(sigma)
    lw = int(truncate * sd + 0.5) if radius is None else radius
    if not isinstance(lw, numbers.Integral) or lw < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    # SciPy's own kernel, reversed as SciPy reverses it (it correlates).
    weights = _gaussian_kernel1d(sigma, order, lw)[::-1]
    return _correlate1d(input, weights, axis, dtype, mode, cval, 0)


def _gaussian_kernel1d(sigma, order, radius):
    """SciPy's ``_gaussian_kernel1d``; of a differentiated sigma and an order above 0, its
    steps with the last product as ``np.dot(powers, q)`` (SciPy's ``powers.dot(q)``, a plain
    array's method, would convert the traced ``q``): the same product, the same values."""
    if order == 0 or not carries_derivative(sigma):
        return _filters._gaussian_kernel1d(sigma, order, radius)
    if order < 0:
        raise ValueError("order must be non-negative")
    exponent_range = np.arange(order + 1)
    sigma2 = sigma * sigma
    x = np.arange(-radius, radius + 1)
    phi_x = np.exp(-0.5 / sigma2 * x ** 2)
    phi_x = phi_x / phi_x.sum()
    q = np.zeros(order + 1)
    q[0] = 1
    D = np.diag(exponent_range[1:], 1)  # D @ q(x) = q'(x)
    P = np.diag(np.ones(order) / -sigma2, -1)  # P @ q(x) = q(x) * p'(x)
    Q_deriv = D + P
    for _ in range(order):
        q = Q_deriv.dot(q)
    return np.dot(x[:, None] ** exponent_range, q) * phi_x


@stands_in_for(_ndimage.gaussian_filter1d)
def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    dtype = _dtype(output, input, "gaussian_filter1d")
    _into_itself("gaussian_filter1d", input, output)
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
    _into_itself("gaussian_filter", input, output)
    y = _gaussian(input, sigma, order, dtype, mode, cval, truncate, radius, axes)
    return _deliver(y, output)


def _edges(input, axis, output, mode, cval, across, name):
    """``sobel`` and ``prewitt``: a central difference along ``axis``, then the smoothing
    ``across`` along every other axis, as SciPy filters them."""
    dtype = _dtype(output, input, name)
    ndim = np.ndim(input)
    axis = normalize_axis_index(axis, ndim)
    _into_itself(name, input, output)
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


def _summed(input, derivative, dtype, mode, axes, output, square=False):
    """SciPy's ``generic_laplace`` (the sum of the second derivatives along ``axes``) and,
    with ``square``, ``generic_gradient_magnitude`` (the root of the sum of the squared first
    derivatives), in SciPy's order of operations. Into an ``output`` array, as SciPy does
    it: the first term written there, the others added in place, so that an output that is
    the input (or overlaps it) makes the later terms read what the first wrote, as SciPy's."""
    axes = _ni_support._check_axes(axes, np.ndim(input))
    if not axes:
        return _deliver(_copy(input, dtype), output)
    modes = _ni_support._normalize_sequence(mode, len(axes))
    into = output is not None and not _is_dtype(output)
    total = None
    for axis, mode in zip(axes, modes):
        term = derivative(input, axis, mode)
        if total is None and into:
            total = _deliver(term, output)
            if square:
                np.multiply(total, total, out=total)
            continue
        if square:
            term = term * term
        if total is None:
            total = term
        elif into:
            total += term
        else:
            total = total + term
    if square:
        total = np.sqrt(total, out=total) if into else np.sqrt(total)
    return total


@stands_in_for(_ndimage.laplace)
def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    dtype = _dtype(output, input, "laplace")
    _into_itself("laplace", input, output)
    return _summed(input, lambda x, axis, mode: _correlate1d(x, [1.0, -2.0, 1.0], axis, dtype,
                                                              mode, cval, 0), dtype, mode, axes,
                   output)


# SciPy's own code on a traced image (ScipysCode): generic_laplace calls the user's second
# derivative along each axis, the first into the output it allocates, and adds the others to
# it in place (generic_gradient_magnitude their squares, then takes the root in place); the
# filters the user's function calls are routed
generic_laplace = ScipysCode(_ndimage.generic_laplace)
generic_gradient_magnitude = ScipysCode(_ndimage.generic_gradient_magnitude)


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
    _into_itself("gaussian_laplace", input, output)
    derivative = _gaussian_derivatives(input, sigma, 2, dtype, cval, axes, kwargs)
    return _summed(input, derivative, dtype, mode, axes, output)


@stands_in_for(_ndimage.gaussian_gradient_magnitude)
def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *,
                                axes=None, **kwargs):
    dtype = _dtype(output, input, "gaussian_gradient_magnitude")
    _into_itself("gaussian_gradient_magnitude", input, output)
    derivative = _gaussian_derivatives(input, sigma, 1, dtype, cval, axes, kwargs)
    return _summed(input, derivative, dtype, mode, axes, output, square=True)


# ----------------------------------------------------------------------------------------------
# Rank filters: each output is one element of its window, chosen in the forward pass


def _plain_select(input, cval, call):
    """SciPy's rank filter: ``call`` holds the function and every other setting of the user's
    call; ``cval``, differentiated or not, is an argument (the value of the outputs that take
    it from their window's extension), so that a replay gives SciPy the cval of its call."""
    return call(input, cval=cval)


_select = ScipyAdjoint(_plain_select)


def _chosen(input, y, footprint, origins, modes, cval, offsets=None, positions=False):
    """The flat index of the element each output of a rank filter took (-1: the constant
    ``cval``), decided now and kept: the first element of its window equal to it (plus its
    offset in the window, a grey morphology's structure); with ``positions``, and its place
    among the window's elements (the offset it took)."""
    lines = _lines(np.shape(input), footprint.shape, origins, modes)
    sources = _extended(np.arange(np.size(input)).reshape(np.shape(input)), -1, lines)
    windows = sliding_window_view(sources, footprint.shape)[..., footprint]
    values = np.where(windows >= 0, np.ravel(input)[np.maximum(windows, 0)], cval)
    if offsets is not None:
        values = values + offsets
    hit = values.astype(y.dtype) == y[..., None]
    hit |= np.isnan(values) & np.isnan(y)[..., None]
    if not hit.any(axis=-1).all():
        raise UnsupportedOperationError(
            "a scipy.ndimage rank filter returned a value mutad finds in no window of its "
            "input, so it cannot say which element was selected; differentiate a float64 "
            "filter of a float64 input.")
    first = np.argmax(hit, axis=-1)[..., None]
    if positions:
        return np.take_along_axis(windows, first, axis=-1)[..., 0], first[..., 0]
    return np.take_along_axis(windows, first, axis=-1)[..., 0]


@_select.rule
def _select_rule(input, cval, call):
    y = _select(input, cval, call)
    chosen = _chosen(input, y, *_with_cval(call.keywords["geometry"], cval))

    def back(dy):
        # the outputs that took the constant send their cotangents to cval
        return (gather_cotangent(dy, input, lambda sources: chosen),
                np.sum(np.where(chosen < 0, dy, np.zeros_like(dy))), None)

    return y, back


@_select.jvp_rule
def _select_jvp(tangents, input, cval, call):
    y = _select(input, cval, call)
    chosen = _chosen(input, y, *_with_cval(call.keywords["geometry"], cval))
    dx, dcval = (tuple(tangents) + (None, None))[:2]
    gathered = (np.zeros(np.shape(y), dtype=y.dtype) if dx is None
                else np.take(np.ravel(dx), np.maximum(chosen, 0)))
    extension = np.zeros_like(gathered) if dcval is None else dcval + np.zeros_like(gathered)
    return y, np.where(chosen >= 0, gathered, extension)


def _with_cval(geometry, cval):
    """A rank filter's window ``geometry`` (footprint, origins, modes, cval, offsets) with the
    cval of this call."""
    return geometry[:3] + (cval,) + geometry[4:]


def _rank_cval(cval, name):
    """A rank filter's ``cval``: the number SciPy is given, and the one the selection takes,
    differentiated where it is (the same number)."""
    if carries_derivative(cval):
        return _plain(cval, numbers=True), cval
    _constant(cval, "cval", name)
    return cval, cval


def _rank(original, name, input, size, footprint, output, mode, cval, origin, axes, **settings):
    """A rank filter of ``input``: SciPy's ``original`` with the user's settings, each output
    taking the cotangent of the element it selected from its window (footprint ``footprint``
    or a box of ``size``, extended by ``mode``: the same windows SciPy reads)."""
    dtype = _dtype(output, input, name)
    cval, taken_cval = _rank_cval(cval, name)
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
    return _deliver(_select(input, taken_cval, call), output)


def _call(original, settings, input, **recipe):
    """``original`` of ``input`` with the user's settings; ``recipe`` is what the rule reads
    (the windows' geometry, the interpolation's weights; a rank filter's cval, a setting
    too)."""
    settings = dict(settings, cval=recipe["cval"]) if "cval" in recipe else settings
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
        cval, taken_cval = _rank_cval(cval, name)
        ndim = np.ndim(input)
        _into_itself(name, input, output)
        box = np.ones([size if a == axis else 1 for a in range(ndim)], dtype=bool)
        origins = tuple(origin if a == axis else 0 for a in range(ndim))
        geometry = (box, origins, (mode,) * ndim, cval)
        call = functools.partial(_call, original, dict(size=size, axis=axis, output=dtype,
                                                       mode=mode, cval=cval, origin=origin),
                                 geometry=geometry)
        return _deliver(_select(input, taken_cval, call), output)

    return stand_in


maximum_filter1d = _rank1d_stand_in(_ndimage.maximum_filter1d)
minimum_filter1d = _rank1d_stand_in(_ndimage.minimum_filter1d)


# ----------------------------------------------------------------------------------------------
# Interpolation: linear in the image, through SciPy's own weights
#
# SciPy interpolates with tensor-product splines: it extends the image along each axis by the
# mode, prefilters it along each axis (order > 1), and evaluates at each output point the
# product of one 1-d spline per axis. So each output is Σ_i x[i] ∏_a W_a[p, i_a], W_a[p, :]
# the response of the 1-d interpolation along axis a at that point's coordinate to the unit
# vectors, which SciPy computes itself (the unit vectors interpolated by SciPy's own 1-d
# call); where the coordinates along each axis depend on that axis alone (shift, zoom, a
# diagonal affine_transform) the outputs form a grid and W_a maps that axis alone. The value
# is SciPy's; the weights give its transpose, and its tangent.


def _responses(interpolate, length):
    """The matrix whose column j is ``interpolate`` of the j-th unit vector of ``length``."""
    columns = []
    for j in range(length):
        unit = np.zeros(length)
        unit[j] = 1.0
        columns.append(interpolate(unit))
    return np.stack(columns, axis=-1)


def _apply_grid(weights, x, transpose=False):
    """Each axis a of ``x`` mapped by ``weights[a]`` (or its transpose)."""
    for axis, w in enumerate(weights):
        x = np.moveaxis(np.tensordot(w.T if transpose else w, x, axes=(1, axis)), 0, axis)
    return x


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _apply_points(weights, x, shape):
    """Σ_i x[i] ∏_a weights[a][p, i_a] at every point p, shaped ``shape``."""
    axes = _LETTERS[:len(weights)]
    subscripts = ",".join(f"p{a}" for a in axes) + f",{axes}->p"
    return np.reshape(np.einsum(subscripts, *weights, x, optimize=True), shape)


def _transpose_points(weights, dy):
    axes = _LETTERS[:len(weights)]
    subscripts = "p," + ",".join(f"p{a}" for a in axes) + f"->{axes}"
    return np.einsum(subscripts, np.ravel(dy), *weights, optimize=True)


def _plain_resample(input, call):
    """SciPy's interpolation of ``input``: ``call`` holds the function, the user's settings and
    the weights' recipe."""
    return call(input)


_resample = ScipyAdjoint(_plain_resample)


@_resample.rule
def _resample_rule(input, call):
    y = _resample(input, call)
    if np.size(input) == 0 or np.size(y) == 0:  # no element: every derivative is 0
        return y, lambda dy: (np.zeros(np.shape(input)), None)
    grid, weights = call.keywords["weights"](np.shape(input))

    def back(dy):
        if grid:
            return _apply_grid(weights, dy, transpose=True), None
        return _transpose_points(weights, dy), None

    return y, back


@_resample.jvp_rule
def _resample_jvp(tangents, input, call):
    y = _resample(input, call)
    if np.size(input) == 0 or np.size(y) == 0:  # no element: the tangent is empty too
        return y, np.zeros_like(y)
    grid, weights = call.keywords["weights"](np.shape(input))
    dx = tangents[0]
    return y, _apply_grid(weights, dx) if grid else _apply_points(weights, dx, np.shape(y))


def _point_weights(coordinates, order, mode, prefilter):
    """The weights of ``map_coordinates`` at ``coordinates`` (one array per axis, plain):
    ``(False, [W_a])``, W_a[p, j] SciPy's 1-d interpolation of the j-th unit vector at the
    p-th coordinate along axis a."""
    def weights(shape):
        return False, [_responses(lambda unit, c=np.ravel(c): _ndimage.map_coordinates(
            unit, c[None], None, order, mode, 0.0, prefilter), n).reshape(-1, n)
                       for c, n in zip(coordinates, shape, strict=True)]
    return weights


def _grid_weights(per_axis):
    """The weights of a separable interpolation: ``per_axis(a, unit)`` interpolates a unit
    vector along axis a alone, as the n-d call does along it."""
    def weights(shape):
        return True, [_responses(lambda unit, a=a: per_axis(a, unit), n)
                      for a, n in enumerate(shape)]
    return weights


def _apart(name, input, output, order, prefilter):
    """Refuse an ``output`` over the input's memory where SciPy interpolates the input itself
    (order 0 or 1, or no prefilter: no filtered copy between), reading what it has written
    already, element by element in its own order."""
    if (order <= 1 or not prefilter) and output is not None and not _is_dtype(output) \
            and hasattr(input, "shape") and may_overlap(input, output):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} with output= over the input's memory at order {order}: "
            "SciPy then reads values it has already written, in an order mutad does not "
            "follow; write into a new array (output=np.empty_like(x)) and copy it back.")


def _interpolated(original, name, input, output, shape, weights, settings, cval):
    """SciPy's ``original(input, **settings)`` into ``output``, its derivative by ``weights``."""
    _apart(name, input, output, settings.get("order", 3), settings.get("prefilter", True))
    dtype = _dtype(output, input, name, shape)
    traced_cval = cval if carries_derivative(cval) else None
    if traced_cval is not None:  # (its number: the value is SciPy's with it)
        cval = stop_gradient(cval)
    cval = _constant(cval, "cval", name)
    settings = dict(settings, output=dtype) if cval is None else dict(settings, output=dtype,
                                                                         cval=cval)
    call = functools.partial(_call, original, settings, weights=weights)
    y = _resample(input, call)
    if traced_cval is not None:
        # linear in (input, cval) jointly: y(x, c) = y(x, 0) + c y(0, 1), so the derivative in
        # cval is SciPy's interpolation of zeros with cval 1
        y = scipys_value(y, traced_cval * original(np.zeros(np.shape(input)),
                                                   **dict(settings, cval=1.0)))
    return _deliver(y, output)


def _settings(name, order, *constants):
    """The ``(value, what)`` settings of ``constants`` as plain values (a setting the program
    computes is a constant: refused if it carries a derivative)."""
    if not 0 <= order <= 5:
        raise RuntimeError("spline order not supported")
    return [_constant(value, what, name) for value, what in constants]


@stands_in_for(_ndimage.shift)
def shift(input, shift, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    shift, = lists_as_arrays([shift])  # (t[1], -t[0]): the array NumPy makes of it
    if innermost((shift,)) is not None and not carries_derivative(shift):
        shift = settled(shift, "scipy.ndimage.shift with a shift the program computes")
    if innermost((shift,)) is not None:
        _traced_coordinates("shift", order, mode, cval, "shift")
        _apart("shift", input, output, order, prefilter)
        dtype = _dtype(output, input, "shift")
        shifts = shift * np.ones(np.ndim(input)) if np.ndim(shift) == 0 else shift
        return _deliver(_shift(input, shifts, cval, order, mode, prefilter, dtype), output)
    _settings("shift", order)
    shifts = _ni_support._normalize_sequence(shift, np.ndim(input))
    weights = _grid_weights(lambda a, unit: _ndimage.shift(
        unit, shifts[a], None, order, mode, 0.0, prefilter))
    return _interpolated(_ndimage.shift, "shift", input, output, np.shape(input), weights,
                         dict(shift=shift, order=order, mode=mode, prefilter=prefilter), cval)


@stands_in_for(_ndimage.zoom)
def zoom(input, zoom, output=None, order=3, mode="constant", cval=0.0, prefilter=True, *,
         grid_mode=False):
    # SciPy reads the zoom only through the output's shape, round(n * zoom): the output is
    # piecewise constant in it, its derivative 0 (taken as a constant, exactly)
    zoom, = lists_as_arrays([zoom])
    if carries_derivative(zoom):
        zoom = np.asarray(stop_gradient(zoom))
    zoom, = _settings("zoom", order, (zoom, "the zoom"))
    zooms = _ni_support._normalize_sequence(zoom, np.ndim(input))
    shape = tuple(int(round(n * z)) for n, z in zip(np.shape(input), zooms))
    weights = _grid_weights(lambda a, unit: _ndimage.zoom(
        unit, zooms[a], None, order, mode, 0.0, prefilter, grid_mode=grid_mode))
    return _interpolated(_ndimage.zoom, "zoom", input, output, shape, weights,
                         dict(zoom=zoom, order=order, mode=mode, prefilter=prefilter,
                              grid_mode=grid_mode), cval)


def _affine_coordinates(matrix, offset, shape, ndim, name, order):
    """The input coordinates of every output point of ``affine_transform`` (its matrix as
    SciPy reads it), one array per axis; None for a diagonal matrix (a separable map)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim == 2 and matrix.shape[1] == ndim + 1 and matrix.shape[0] in (ndim, ndim + 1):
        offset, matrix = matrix[:ndim, ndim], matrix[:ndim, :ndim]
    offset = np.asarray(_ni_support._normalize_sequence(offset, ndim), dtype=np.float64)
    if matrix.ndim == 1:
        return None, matrix, offset
    if order == 0:
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name}(order=0) with a matrix that is not diagonal: which element "
            "each output takes is decided by coordinates SciPy computes in its own arithmetic; "
            "use order=1 or more, or map_coordinates with the coordinates.")
    return _scipy_coordinates(matrix, offset, shape), matrix, offset


def _scipy_coordinates(matrix, offset, shape):
    """The input coordinates SciPy's ``affine_transform`` reads at every point of the output
    grid ``shape``, one array per axis, in SciPy's own arithmetic: with a square matrix each
    starts from the offset and adds the index times each matrix entry in turn; with a diagonal
    one (1-d ``matrix``) it is ``(index + offset / matrix) * matrix``. Another rounding can put
    a coordinate on the other side of an edge of the image ('constant') or of a seam ('wrap'),
    where the output jumps, and its derivative would then not be that of SciPy's value."""
    grid = np.indices(shape, dtype=np.float64).reshape(len(shape), -1)
    if np.ndim(matrix) == 1:
        return list((grid + (offset / matrix)[:, None]) * matrix[:, None])
    coordinates = []
    for row, start in zip(matrix, offset):
        coordinate = np.full(grid.shape[1], start)
        for index, entry in zip(grid, row):
            coordinate += index * entry
        coordinates.append(coordinate)
    return coordinates


@stands_in_for(_ndimage.affine_transform)
def affine_transform(input, matrix, offset=0.0, output_shape=None, output=None, order=3,
                     mode="constant", cval=0.0, prefilter=True):
    if output_shape is None:
        output_shape = np.shape(output) if not (output is None or _is_dtype(output)) else (
            np.shape(input))
    output_shape = tuple(output_shape)
    matrix, offset = lists_as_arrays([matrix, offset])
    if carries_derivative(matrix) or carries_derivative(offset):
        _traced_coordinates("affine_transform", order, mode, cval, "matrix or offset")
        if order == 0 and np.ndim(matrix) == 2:  # (SciPy's refusal for a constant matrix)
            _affine_coordinates(np.eye(2), 0.0, (1, 1), 2, "affine_transform", order)
        _apart("affine_transform", input, output, order, prefilter)
        dtype = _dtype(output, input, "affine_transform", output_shape)
        return _deliver(_affine(input, matrix, offset, output_shape, cval, order, mode,
                                prefilter, dtype), output)
    matrix, offset = _settings("affine_transform", order, (matrix, "the matrix"),
                               (offset, "the offset"))
    coordinates, diagonal, shifts = _affine_coordinates(matrix, offset, output_shape,
                                                        np.ndim(input), "affine_transform", order)
    if coordinates is None:
        weights = _grid_weights(lambda a, unit: _ndimage.affine_transform(
            unit, diagonal[a:a + 1], shifts[a], (output_shape[a],), None, order, mode, 0.0,
            prefilter))
    else:
        weights = _point_weights(coordinates, order, mode, prefilter)
    return _interpolated(_ndimage.affine_transform, "affine_transform", input, output,
                         output_shape, weights,
                         dict(matrix=matrix, offset=offset, output_shape=output_shape,
                              order=order, mode=mode, prefilter=prefilter), cval)


@stands_in_for(_ndimage.rotate)
def rotate(input, angle, axes=(1, 0), reshape=True, output=None, order=3, mode="constant",
           cval=0.0, prefilter=True):
    # SciPy's geometry (ndimage/_interpolation.py): the rotation of the plane of ``axes``
    # about its centre, every other axis as it is.
    if carries_derivative(angle) and 0 <= order <= 5:
        if np.ndim(input) < 2:
            raise RuntimeError("input array should be at least 2D")  # SciPy's own
        if np.ndim(input) == 2:
            return _rotated_by_a_traced_angle(input, angle, reshape, output, order, mode, cval,
                                              prefilter)
        return _planes_rotated_by_a_traced_angle(input, angle, axes, reshape, output, order,
                                                 mode, cval, prefilter)
    angle, = _settings("rotate", order, (angle, "the angle"))
    ndim = np.ndim(input)
    plane = sorted(a % ndim for a in axes)
    c, s = _special.cosdg(angle), _special.sindg(angle)
    rotation = np.array([[c, s], [-s, c]])
    shape = np.asarray(np.shape(input))
    in_plane = shape[plane]
    if reshape:
        iy, ix = in_plane
        bounds = rotation @ [[0, 0, iy, iy], [0, ix, 0, ix]]
        out_plane = (np.ptp(bounds, axis=1) + 0.5).astype(int)
    else:
        out_plane = in_plane
    offset = (in_plane - 1) / 2 - rotation @ ((out_plane - 1) / 2)
    output_shape = shape.copy()
    output_shape[plane] = out_plane
    output_shape = tuple(int(n) for n in output_shape)
    if order == 0:
        _affine_coordinates(rotation, offset, out_plane, 2, "rotate", order)
    grid = np.indices(output_shape, dtype=np.float64).reshape(ndim, -1)
    coordinates = list(grid)
    rotated = rotation @ grid[plane] + offset[:, None]
    coordinates[plane[0]], coordinates[plane[1]] = rotated
    weights = _point_weights(coordinates, order, mode, prefilter)
    return _interpolated(_ndimage.rotate, "rotate", input, output, output_shape, weights,
                         dict(angle=angle, axes=axes, reshape=reshape, order=order, mode=mode,
                              prefilter=prefilter), cval)


def _planes_rotated_by_a_traced_angle(input, angle, axes, reshape, output, order, mode, cval,
                                      prefilter):
    """``rotate`` of an n-d array by a differentiated angle, as SciPy does it: each plane
    parallel to ``axes`` (its axes in their order in the array) rotated as an image, the
    planes stacked back in place."""
    ndim = np.ndim(input)
    plane = sorted(int(a) % ndim for a in axes)
    if len(axes) != 2 or plane[0] == plane[1]:
        raise ValueError("axes should contain exactly two values")  # SciPy's check
    others = [a for a in range(ndim) if a not in plane]
    moved = np.moveaxis(input, plane, (-2, -1))
    lines = np.reshape(moved, (-1,) + np.shape(moved)[-2:])
    into = output is not None and not _is_dtype(output)  # the caller's array
    kind = None if into else output
    rotated = np.stack([_rotated_by_a_traced_angle(image, angle, reshape, kind, order, mode,
                                                   cval, prefilter) for image in lines])
    rotated = np.moveaxis(np.reshape(rotated, tuple(np.shape(input)[a] for a in others)
                                     + np.shape(rotated)[-2:]), (-2, -1), plane)
    if into:
        if np.shape(output) != np.shape(rotated):
            raise RuntimeError("output shape not correct")  # SciPy's check
        output[...] = rotated
        return output
    return rotated


def _rotated_by_a_traced_angle(input, angle, reshape, output, order, mode, cval, prefilter):
    """``rotate`` of an image by a differentiated angle: SciPy's own steps (an image's
    rotation is ``affine_transform`` by its matrix and the offset that keeps the centre),
    which differentiate in the angle through the matrix and the offset; the output's shape,
    whole numbers, is constant in it."""
    c, s = _special.cosdg(angle), _special.sindg(angle)
    rotation = np.stack([np.stack([c, s]), np.stack([-s, c])])
    in_plane = np.asarray(np.shape(input))
    if reshape:
        iy, ix = in_plane
        plain = np.asarray(settled(rotation, "the output shape of scipy.ndimage.rotate"))
        bounds = plain @ [[0, 0, iy, iy], [0, ix, 0, ix]]
        out_plane = (np.ptp(bounds, axis=1) + 0.5).astype(int)
    else:
        out_plane = in_plane
    offset = (in_plane - 1) / 2 - rotation @ ((out_plane - 1) / 2)
    return affine_transform(input, rotation, offset, tuple(int(n) for n in out_plane), output,
                            order, mode, cval, prefilter)


@stands_in_for(_ndimage.map_coordinates)
def map_coordinates(input, coordinates, output=None, order=3, mode="constant", cval=0.0,
                    prefilter=True):
    _settings("map_coordinates", order)
    coordinates, = lists_as_arrays([coordinates])  # [yy + s[0], xx + s[1]]: NumPy's array
    shape = np.shape(coordinates)[1:]
    if innermost((coordinates,)) is not None and not carries_derivative(coordinates):
        coordinates = settled(coordinates, "scipy.ndimage.map_coordinates with coordinates "
                                           "the program computes")
    if innermost((coordinates,)) is not None:
        _apart("map_coordinates", input, output, order, prefilter)
        return _deliver(_map_traced(input, coordinates, order, mode, cval, prefilter,
                                    _dtype(output, input, "map_coordinates", shape)), output)
    plain = np.asarray(coordinates, dtype=np.float64)
    weights = _point_weights(list(plain), order, mode, prefilter)
    return _interpolated(_ndimage.map_coordinates, "map_coordinates", input, output, shape,
                         weights, dict(coordinates=coordinates, order=order, mode=mode,
                                       prefilter=prefilter), cval)


class _MappingStandIn(StandIn):
    """A stand-in that runs whenever a differentiation does, even with a plain image: the
    mapping may read differentiated arrays, which it then refuses by name."""

    def __call__(self, *args, **kwargs):
        if not ACTIVE.running:
            return self.original(*args, **kwargs)
        return self.fn(*args, **kwargs)


def _geometric_transform(input, mapping, output_shape=None, output=None, order=3,
                        mode="constant", cval=0.0, prefilter=True, extra_arguments=(),
                        extra_keywords=None):
    # The user's mapping of output coordinates is plain Python: its input coordinates are
    # computed once here, as SciPy computes them (the same calls, the same numbers), and the
    # derivative in the image is map_coordinates' at them. Where they depend on the
    # differentiated arguments (a mapping reading a traced shift), they are map_coordinates'
    # traced coordinates: SciPy interpolates both the same way, at the same numbers.
    _settings("geometric_transform", order)  # (the extra arguments go to the mapping)
    output_shape = tuple(int(n) for n in (np.shape(input) if output_shape is None
                                          else output_shape))
    keywords = extra_keywords or {}
    ndim = np.ndim(input)
    found = [list(mapping(index, *extra_arguments, **keywords))
             for index in np.ndindex(*output_shape)]
    if innermost((found,)) is not None:
        points, = lists_as_arrays([found])
        coordinates = np.reshape(np.transpose(points * 1.0), (ndim, *output_shape))
        return map_coordinates(input, coordinates, output, order, mode, cval, prefilter)
    coordinates = np.empty((ndim, int(np.prod(output_shape))))
    for p, point in enumerate(found):
        coordinates[:, p] = [float(c) for c in point]
    weights = _point_weights(list(coordinates), order, mode, prefilter)
    # SciPy's own, held by the stand-in: scipy.ndimage's name is the stand-in while this runs.
    return _interpolated(geometric_transform.original, "geometric_transform", input, output,
                         output_shape, weights,
                         dict(mapping=mapping, output_shape=output_shape, order=order,
                              mode=mode, prefilter=prefilter, extra_arguments=extra_arguments,
                              extra_keywords=extra_keywords), cval)


geometric_transform = _MappingStandIn(_ndimage.geometric_transform, _geometric_transform)


@stands_in_for(_ndimage.spline_filter1d)
def spline_filter1d(input, order=3, axis=-1, output=np.float64, mode="mirror"):
    # Linear along one axis: SciPy's filter of the unit vectors there, the identity elsewhere.
    _settings("spline_filter1d", order)
    _into_itself("spline_filter1d", input, output)
    axis = normalize_axis_index(axis, np.ndim(input))
    weights = _grid_weights(lambda a, unit: _ndimage.spline_filter1d(
        unit, order, 0, np.float64, mode) if a == axis else unit)
    return _interpolated(_ndimage.spline_filter1d, "spline_filter1d", input, output,
                         np.shape(input), weights, dict(order=order, axis=axis, mode=mode), None)


@stands_in_for(_ndimage.spline_filter)
def spline_filter(input, order=3, output=np.float64, mode="mirror"):
    # SciPy filters along each axis in turn (none below order 2): separable.
    _settings("spline_filter", order)
    _into_itself("spline_filter", input, output)
    weights = _grid_weights(lambda a, unit: _ndimage.spline_filter1d(
        unit, order, 0, np.float64, mode) if order > 1 else unit)
    return _interpolated(_ndimage.spline_filter, "spline_filter", input, output,
                         np.shape(input), weights, dict(order=order, mode=mode), None)


def _plain_map(input, coordinates, cval, order, mode, prefilter, dtype):
    return _ndimage.map_coordinates(input, coordinates, dtype, order, mode, cval, prefilter)


_map = ScipyAdjoint(_plain_map)

# Modes that extend the image by its own elements, with no constant and no seam ("wrap"
# repeats the image with period n - 1, so its two ends meet at one coordinate: a jump): the linear
# interpolation is then piecewise linear in the coordinates everywhere.
_WITHOUT_CONSTANT = ("nearest", "grid-wrap", "reflect", "grid-mirror", "mirror")


def _traced_coordinates(name, order, mode, cval, what="coordinates"):
    """Refuse differentiated coordinates but with a mode whose interpolation is a polynomial
    in the coordinate between knots (``_coordinate_weights``): not 'wrap' (its period n - 1
    joins the image's ends at a seam), nor 'grid-constant' with a cval other than 0."""
    _constant(cval, "cval", name)
    if order not in range(6) or mode not in (*_WITHOUT_CONSTANT, "constant",
                                             "grid-constant") or (
            mode == "grid-constant" and np.any(np.asarray(cval) != 0)):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} with differentiated {what}: mutad differentiates orders "
            f"0 to 5 with a mode in {(*_WITHOUT_CONSTANT, 'constant')} (or 'grid-constant' "
            f"with cval=0), not order={order}, mode={mode!r}.")


def _map_traced(input, coordinates, order, mode, cval, prefilter, dtype):
    """``map_coordinates`` with traced coordinates (``_traced_coordinates``)."""
    _traced_coordinates("map_coordinates", order, mode, cval)
    return _map(input, coordinates, cval, order, mode, prefilter, dtype)


def _coordinate_weights(coordinates, shape, order, mode, prefilter):
    """At each point, per axis: SciPy's interpolation weights at its coordinate, and their
    derivative in it. Between knots (whole coordinates for odd orders, half-way between them
    for even ones) each weight is a polynomial of degree ``order`` in the coordinate (SciPy's
    B-spline, its prefilter and the mode's extension are linear), so its derivative is that of
    the polynomial through SciPy's weights at ``order + 1`` points of the interval (at order
    1, W(f + 1) - W(f)). With mode 'constant' the interval is cut to the image's extent
    [0, n - 1], beyond which the constant is not interpolated: flat there. Decided from the
    coordinates as they are."""
    weights, slopes = [], []
    for c, n in zip(coordinates, shape, strict=True):
        c = np.ravel(c)
        at = lambda where: _responses(lambda unit: _ndimage.map_coordinates(  # noqa: E731
            unit, where[None], None, order, mode, 0.0, prefilter), n).reshape(-1, n)
        weights.append(at(c))
        lo = np.floor(c) if order % 2 else np.floor(c + 0.5) - 0.5
        hi = lo + 1.0
        if mode == "constant":
            lo, hi = np.maximum(lo, 0.0), np.minimum(hi, n - 1.0)
        nodes = [lo + (hi - lo) * (j / order) for j in range(order + 1)] if order else []
        slope = np.zeros((c.size, n))
        with np.errstate(invalid="ignore"):  # (an interval cut to nothing: flat, below)
            for node, derivative in zip(nodes, _lagrange_slopes(nodes, c)):
                slope = slope + derivative[:, None] * at(node)
        if mode == "constant":
            slope = np.where(((c >= lo) & (c <= hi) & (hi > lo))[:, None], slope, 0.0)
        slopes.append(slope)
    return weights, slopes


def _lagrange_slopes(nodes, c):
    """The derivative at ``c`` of each Lagrange basis polynomial of ``nodes`` (arrays of the
    points' nodes): for node j, the sum over m of 1 / (x_j - x_m) times the product of
    (c - x_l) / (x_j - x_l) over the other l (for two nodes, -1 / h and 1 / h)."""
    slopes = []
    for j, xj in enumerate(nodes):
        total = 0.0
        for m, xm in enumerate(nodes):
            if m == j:
                continue
            with np.errstate(divide="ignore", invalid="ignore"):  # (an interval cut to nothing)
                term = 1.0 / (xj - xm)
                for l, xl in enumerate(nodes):
                    if l != j and l != m:
                        term = term * (c - xl) / (xj - xl)
            total = total + term
        slopes.append(total)
    return slopes


@_map.rule
def _map_rule(input, coordinates, cval, order, mode, prefilter, dtype):
    y = _map(input, coordinates, cval, order, mode, prefilter, dtype)
    # Decided now, from the coordinates as they are: which interval each one lies in.
    weights, slopes = _coordinate_weights(coordinates, np.shape(input), order, mode,
                                          prefilter)

    def back(dy):
        dinput = _transpose_points(weights, dy)
        dcoordinates = np.stack([dy * part for part in _slopes_applied(weights, slopes, input,
                                                                        np.shape(dy))])
        return dinput, dcoordinates

    return y, back


@_map.jvp_rule
def _map_jvp(tangents, input, coordinates, cval, order, mode, prefilter, dtype):
    y = _map(input, coordinates, cval, order, mode, prefilter, dtype)
    weights, slopes = _coordinate_weights(coordinates, np.shape(input), order, mode,
                                          prefilter)
    dinput, dcoordinates = (tuple(tangents) + (None, None))[:2]
    parts = [] if dinput is None else [_apply_points(weights, dinput, np.shape(y))]
    if dcoordinates is not None:
        parts += [dcoordinates[a] * part for a, part in enumerate(
            _slopes_applied(weights, slopes, input, np.shape(y)))]
    return y, functools.reduce(np.add, parts) if parts else None


def _plain_shift(input, shifts, cval, order, mode, prefilter, dtype):
    return _ndimage.shift(input, shifts, dtype, order, mode, cval, prefilter)


_shift = ScipyAdjoint(_plain_shift)


def _shift_coordinates(shape, shifts):
    """Where ``shift`` reads each output: its index less the shift, along every axis."""
    return [np.indices(shape, dtype=np.float64)[a] - shifts[a] for a in range(len(shape))]


def _slopes_applied(weights, slopes, input, shape):
    """Each output's derivative in its coordinate along each axis."""
    return [_apply_points(weights[:a] + [slopes[a]] + weights[a + 1:], input, shape)
            for a in range(len(weights))]


@_shift.rule
def _shift_rule(input, shifts, cval, order, mode, prefilter, dtype):
    # SciPy's shift reads the image at index - shift: map_coordinates' derivatives there, the
    # shift's the negated sum of the coordinates'.
    y = _shift(input, shifts, cval, order, mode, prefilter, dtype)
    shape = np.shape(input)
    weights, slopes = _coordinate_weights(_shift_coordinates(shape, shifts), shape, order,
                                          mode, prefilter)

    def back(dy):
        along = _slopes_applied(weights, slopes, input, shape)
        return (_transpose_points(weights, dy),
                -stacked([np.vdot(dy, part) for part in along]))

    return y, back


@_shift.jvp_rule
def _shift_jvp(tangents, input, shifts, cval, order, mode, prefilter, dtype):
    y = _shift(input, shifts, cval, order, mode, prefilter, dtype)
    shape = np.shape(input)
    weights, slopes = _coordinate_weights(_shift_coordinates(shape, shifts), shape, order,
                                          mode, prefilter)
    dinput, dshifts = (tuple(tangents) + (None, None))[:2]
    parts = [] if dinput is None else [_apply_points(weights, dinput, shape)]
    if dshifts is not None:
        parts += [-dshifts[a] * part
                  for a, part in enumerate(_slopes_applied(weights, slopes, input, shape))]
    return y, functools.reduce(np.add, parts) if parts else None


def _plain_affine(input, matrix, offset, output_shape, cval, order, mode, prefilter, dtype):
    return _ndimage.affine_transform(input, matrix, offset, output_shape, dtype, order, mode,
                                     cval, prefilter)


_affine = ScipyAdjoint(_plain_affine)


def _affine_parts(matrix, offset, ndim):
    """The linear part (a square matrix) and the offset SciPy reads from ``matrix`` (diagonal,
    square, or homogeneous with the offset in its last column) and ``offset``, and the
    cotangents of the user's ``matrix`` and ``offset`` from theirs. Its rules are of the first
    order: a matrix or offset an enclosing differentiation follows is refused."""
    if innermost((matrix, offset)) is not None:
        raise UnsupportedOperationError(
            "scipy.ndimage.affine_transform (or rotate) with a differentiated matrix, offset or "
            "angle under a differentiation of a differentiation (a hessian, a gradient of a "
            "gradient): its rule is of the first order. Compute the input coordinates of each "
            "output point from the matrix (matrix @ np.indices(shape).reshape(ndim, -1) + "
            "offset) and use scipy.ndimage.map_coordinates, which every order differentiates.")
    matrix = np.asarray(matrix, dtype=np.float64)
    homogeneous = matrix.ndim == 2 and matrix.shape[1] == ndim + 1
    if homogeneous:
        linear, offset = matrix[:ndim, :ndim], matrix[:ndim, ndim]
    else:
        linear = np.diag(matrix) if matrix.ndim == 1 else matrix
    offset = np.broadcast_to(np.asarray(offset, dtype=np.float64), (ndim,))

    def cotangents(dlinear, doffset, offset_shape):
        if homogeneous:
            dmatrix = np.zeros(matrix.shape)
            dmatrix[:ndim, :ndim], dmatrix[:ndim, ndim] = dlinear, doffset
            return dmatrix, np.zeros(offset_shape)  # SciPy ignores offset then
        dmatrix = np.diagonal(dlinear).copy() if matrix.ndim == 1 else dlinear
        return dmatrix, np.sum(doffset) if offset_shape == () else doffset

    def tangents(dmatrix, doffset):
        if homogeneous:
            return (None if dmatrix is None else dmatrix[:ndim, :ndim],
                    None if dmatrix is None else dmatrix[:ndim, ndim])
        dlinear = None if dmatrix is None else (np.diag(dmatrix) if matrix.ndim == 1
                                                 else dmatrix)
        return dlinear, None if doffset is None else np.broadcast_to(doffset, (ndim,))

    return linear, offset, cotangents, tangents


def _affine_geometry(input, matrix, offset, output_shape, order, mode, prefilter):
    """The output grid, the linear part and offset, and each output's interpolation weights
    and slopes at its coordinates ``linear @ grid + offset``."""
    linear, shifts, cotangents, tangents = _affine_parts(matrix, offset, np.ndim(input))
    grid = np.indices(output_shape, dtype=np.float64).reshape(len(output_shape), -1)
    diagonal = np.ndim(matrix) == 1
    weights, slopes = _coordinate_weights(
        _scipy_coordinates(np.diag(linear) if diagonal else linear, shifts, output_shape),
        np.shape(input), order, mode, prefilter)
    return grid, weights, slopes, cotangents, tangents


@_affine.rule
def _affine_rule(input, matrix, offset, output_shape, cval, order, mode, prefilter, dtype):
    # SciPy's affine_transform reads the image at linear @ index + offset: map_coordinates'
    # derivatives there, each coordinate's cotangent times the index for the matrix, summed
    # for the offset.
    y = _affine(input, matrix, offset, output_shape, cval, order, mode, prefilter, dtype)
    grid, weights, slopes, cotangents, _ = _affine_geometry(input, matrix, offset,
                                                            output_shape, order, mode,
                                                            prefilter)

    def back(dy):
        along = np.stack([np.ravel(dy * part) for part in _slopes_applied(
            weights, slopes, input, output_shape)])
        dmatrix, doffset = cotangents(along @ grid.T, along.sum(axis=1), np.shape(offset))
        return _transpose_points(weights, dy), dmatrix, doffset

    return y, back


@_affine.jvp_rule
def _affine_jvp(tangents, input, matrix, offset, output_shape, cval, order, mode, prefilter,
                dtype):
    y = _affine(input, matrix, offset, output_shape, cval, order, mode, prefilter, dtype)
    grid, weights, slopes, _, split = _affine_geometry(input, matrix, offset, output_shape,
                                                       order, mode, prefilter)
    dinput, dmatrix, doffset = (tuple(tangents) + (None, None, None))[:3]
    dlinear, dshifts = split(dmatrix, doffset)
    parts = [] if dinput is None else [_apply_points(weights, dinput, output_shape)]
    if dlinear is not None or dshifts is not None:
        moved = 0.0
        if dlinear is not None:
            moved = moved + dlinear @ grid
        if dshifts is not None:
            moved = moved + np.reshape(dshifts, (-1, 1))
        moved = np.broadcast_to(moved, grid.shape)
        parts += [np.reshape(moved[a], output_shape) * part for a, part in enumerate(
            _slopes_applied(weights, slopes, input, output_shape))]
    return y, functools.reduce(np.add, parts) if parts else None


# ----------------------------------------------------------------------------------------------
# Fourier filters: the input (an FFT) multiplied by a fixed kernel
#
# ``fourier_gaussian``, ``fourier_uniform``, ``fourier_ellipsoid`` and ``fourier_shift`` multiply
# each element of their input by K, the product over the axes of a factor of that axis'
# frequency f_a (k / n_a, or k / n along the real transform's ``axis`` for ``n >= 0``): for
# the Gaussian exp(-2π² σ_a² f_a²), for the shift exp(-2πi s_a f_a). The value is SciPy's; the
# derivative in the input is the multiplication by K (its adjoint, by conj(K): the Gaussian's,
# the box's and the ellipsoid's are real, the shift's conj(K(s)) is K(-s)), and in σ_a and s_a
# it is y times the derivative of the log of their factor: -4π² σ_a f_a² and -2πi f_a; in
# the box's and the ellipsoid's sizes, the derivative of their kernel (_size_derivatives).

_FOURIER = {"fourier_gaussian": _ndimage.fourier_gaussian,
            "fourier_uniform": _ndimage.fourier_uniform,
            "fourier_ellipsoid": _ndimage.fourier_ellipsoid,
            "fourier_shift": _ndimage.fourier_shift}
_SIZED = ("fourier_uniform", "fourier_ellipsoid")


def _plain_fourier(input, parameters, name, n, axis, dtype):
    """SciPy's Fourier filter ``name`` of ``input`` (``parameters``: one per axis) into a new
    array of ``dtype`` (SciPy's default where None)."""
    return _FOURIER[name](input, parameters, n, axis, None if dtype is None else dtype.type)


_fourier: Any = ScipyAdjoint(_plain_fourier)  # Any: its complex_values is set below
_fourier.complex_values = CONVENTION  # complex inputs and outputs, in mutad's convention


def _frequencies(shape, a, n, axis):
    """The frequency of each index along axis ``a`` as SciPy's kernels take it, shaped to
    broadcast against an array of ``shape``."""
    length = shape[a]
    f = np.arange(length) / n if a == axis and n >= 0 else np.fft.fftfreq(length)
    return np.reshape(f, [length if b == a else 1 for b in range(len(shape))])


def _logarithmic(name, shape, a, n, axis):
    """The derivative of log K in the parameter of axis a, less the parameter's own factor
    (the Gaussian's σ_a): -4π² f_a², or the shift's -2πi f_a."""
    f = _frequencies(shape, a, n, axis)
    return -4.0 * np.pi ** 2 * f * f if name == "fourier_gaussian" else -2j * np.pi * f


def _fourier_parameter_terms(name, y, parameters, n, axis, weigh):
    """``weigh(y · ∂ log K/∂p_a / p-factor)`` for each axis a (the Gaussian's and the
    shift's)."""
    shape = np.shape(y)
    return [weigh(y * _logarithmic(name, shape, a, n, axis), a) for a in range(len(shape))]


# The box's K = Π_a sinc(s_a f_a) and the ellipsoid's K = g_d(π r), r = |(s_a f_a)_a|, of the
# d = 1, 2 or 3 dimensions: g_1(x) = sin x / x, g_2(x) = 2 J_1(x) / x, g_3(x) = 3 (sin x -
# x cos x) / x³ (SciPy's kernels). With x_a = π s_a f_a, ∂x/∂s_a = π² s_a f_a² / x for both
# (x = x_a for the box), so ∂K/∂s_a = π² s_a f_a² (g'(x) / x), times the other axes' factors
# for the box. g'(x) / x is (cos x - g_1) / x², 2 (J_0(x) - g_2) / x², 3 (sin x / x - g_3) /
# x², whose series -1/3 + x²/30, -1/4 + x²/48, -1/5 + x²/70 are taken near 0.
_SIZE_SERIES = {1: (-1.0 / 3.0, 1.0 / 30.0), 2: (-0.25, 1.0 / 48.0), 3: (-0.2, 1.0 / 70.0)}


def _slope_over_x(d, x2):
    """g_d'(x) / x (above) of x² = ``x2`` (no square root of 0: its derivative would be
    infinite), at a safe point where its series is taken."""
    small = x2 < 1e-4
    safe = np.sqrt(np.where(small, 1.0, x2))
    if d == 1:
        g, top = np.sin(safe) / safe, np.cos(safe)
    elif d == 2:
        g, top = 2.0 * _special.j1(safe) / safe, _special.j0(safe)
    else:
        g, top = 3.0 * (np.sin(safe) - safe * np.cos(safe)) / safe ** 3, np.sin(safe) / safe
    c0, c1 = _SIZE_SERIES[d]
    return np.where(small, c0 + c1 * x2, d * (top - g) / (safe * safe))


def _size_derivatives(name, input, sizes, n, axis):
    """∂y/∂s_a, for each axis a, of the box's or the ellipsoid's filter of ``input``."""
    shape = np.shape(input)
    f = [_frequencies(shape, a, n, axis) for a in range(len(shape))]
    x = [math.pi * sizes[a] * f[a] for a in range(len(shape))]
    scale = [(math.pi ** 2) * sizes[a] * f[a] * f[a] for a in range(len(shape))]
    if name == "fourier_uniform":
        factors = [np.sinc(sizes[a] * f[a]) for a in range(len(shape))]
        return [input * scale[a] * _slope_over_x(1, x[a] * x[a]) * functools.reduce(
            np.multiply, [factors[b] for b in range(len(shape)) if b != a], 1.0)
            for a in range(len(shape))]
    slope = _slope_over_x(len(shape), functools.reduce(np.add, [t * t for t in x]))
    return [input * scale[a] * slope for a in range(len(shape))]


@_fourier.rule
def _fourier_rule(input, parameters, name, n, axis, dtype):
    # The wrapper, not SciPy's own: nested reverse mode differentiates the pullback again.
    y = _fourier(input, parameters, name, n, axis, dtype)
    real_input = not np.iscomplexobj(input)

    def back(dy):
        if name == "fourier_shift":  # conj(K(s)) = K(-s)
            dinput = _fourier(dy, -parameters, name, n, axis, None)
        else:
            dinput = _fourier(dy, parameters, name, n, axis, None)
        if real_input and np.iscomplexobj(dinput):
            dinput = np.real(dinput)
        if name in _SIZED:  # Re Σ conj(ȳ) ∂y/∂s_a
            return dinput, stacked([np.real(np.vdot(dy, t)) for t in _size_derivatives(
                name, input, parameters, n, axis)])
        # Re Σ conj(ȳ) y ∂log K/∂p_a, the Gaussian's σ_a factored out and put back after.
        terms = _fourier_parameter_terms(name, y, parameters, n, axis,
                                         lambda t, a: np.real(np.vdot(dy, t)))
        dparameters = stacked(terms)
        if name == "fourier_gaussian":
            dparameters = dparameters * parameters
        return dinput, dparameters

    return y, back


@_fourier.jvp_rule
def _fourier_jvp(tangents, input, parameters, name, n, axis, dtype):
    dinput, dparameters = (tuple(tangents) + (None, None))[:2]
    y = _fourier(input, parameters, name, n, axis, dtype)
    parts = [] if dinput is None else [_fourier(dinput, parameters, name, n, axis, dtype)]
    if dparameters is not None and name in _SIZED:
        parts += [t * dparameters[a] for a, t in enumerate(_size_derivatives(
            name, input, parameters, n, axis))]
    elif dparameters is not None:
        scale = dparameters * parameters if name == "fourier_gaussian" else dparameters
        parts += _fourier_parameter_terms(name, y, parameters, n, axis,
                                          lambda t, a: t * scale[a])
    if not parts:
        return y, None
    dy = functools.reduce(np.add, parts)
    return y, np.real(dy) if not np.iscomplexobj(y) and np.iscomplexobj(dy) else dy


def _fourier_dtype(output, input, name):
    """The dtype SciPy's Fourier filter writes (its ``_get_output_fourier``)."""
    dtype = np.result_type(input) if hasattr(input, "dtype") else np.asarray(input).dtype
    complex_only = name == "fourier_shift"
    if output is None:
        if dtype.type in (np.complex64, np.complex128) or (
                dtype.type is np.float32 and not complex_only):
            return dtype
        return np.dtype(np.complex128 if complex_only else np.float64)
    if type(output) is type:
        allowed = (np.complex64, np.complex128) + (() if complex_only else
                                                    (np.float32, np.float64))
        if output not in allowed:
            raise RuntimeError("output type not supported")
        chosen = np.dtype(output)
    else:
        if np.shape(output) != np.shape(input):
            raise RuntimeError("output shape not correct")
        chosen = output.dtype
    if chosen.kind not in "fc" or (dtype.kind == "c" and chosen.kind != "c"):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} of a {dtype} input into a {chosen} output: mutad "
            "differentiates Fourier filters into float or complex outputs that keep the "
            "input's imaginary part; leave output out, or pass output=np.complex128.")
    return chosen


def _fourier_stand_in(name, parameter_name):
    original = _FOURIER[name]

    @stands_in_for(original)
    def stand_in(input, *args, **kwargs):
        # SciPy's signature, its parameter by its own name (sigma, size or shift)
        input, parameter, n, axis, output = _FOURIER_SIGNATURES[parameter_name](
            input, *args, **kwargs)
        parameter, = lists_as_arrays([parameter])  # (a, b): the array NumPy makes of it
        dtype = _fourier_dtype(output, input, name)
        _into_itself(name, input, output, by_lines=False)  # (not line by line, even 1-d)
        ndim = np.ndim(input)
        axis = normalize_axis_index(axis, ndim)
        if innermost((parameter,)) is None:
            parameters = np.asarray(_ni_support._normalize_sequence(parameter, ndim),
                                    dtype=np.float64)
        else:
            parameters = (parameter * np.ones(ndim) if np.ndim(parameter) == 0
                          else parameter * 1.0)
            if np.shape(parameters) != (ndim,):
                raise RuntimeError("sequence argument must have length equal to input rank")
        y = _fourier(input, parameters, name, int(n), axis, dtype)
        return _deliver(y, output)

    return stand_in


_FOURIER_SIGNATURES = {
    "sigma": lambda input, sigma, n=-1, axis=-1, output=None: (input, sigma, n, axis, output),
    "size": lambda input, size, n=-1, axis=-1, output=None: (input, size, n, axis, output),
    "shift": lambda input, shift, n=-1, axis=-1, output=None: (input, shift, n, axis, output)}
"""SciPy's signatures of the Fourier filters, whose second parameter each names its own way:
the arguments of a call, in order."""

fourier_gaussian = _fourier_stand_in("fourier_gaussian", "sigma")
fourier_uniform = _fourier_stand_in("fourier_uniform", "size")
fourier_ellipsoid = _fourier_stand_in("fourier_ellipsoid", "size")
fourier_shift = _fourier_stand_in("fourier_shift", "shift")


# ----------------------------------------------------------------------------------------------
# Filters of the user's Python functions


@stands_in_for(_ndimage.generic_filter)
def generic_filter(input, function, size=None, footprint=None, output=None, mode="reflect",
                   cval=0.0, origin=0, extra_arguments=(), extra_keywords=None, *, axes=None):
    """The user's function called on each window as SciPy calls it, a 1-d float64 array of the
    window's elements in SciPy's order, here gathered from the traced image (so what the
    function computes is recorded): SciPy's own filter of the elements' positions, with a
    function that notes each window, tells which elements, boundaries included."""
    extra_keywords = extra_keywords or {}
    if not any(carries_derivative(v) for v in (input, cval, *extra_arguments,
                                                *extra_keywords.values())):
        cval = _constant(cval, "cval", "generic_filter")
        return generic_filter.original(input, function, size, footprint, output, mode, cval,
                                       origin, extra_arguments, extra_keywords, axes=axes)
    if np.iscomplexobj(input):
        raise TypeError("Complex type not supported")
    dtype = _dtype(output, input, "generic_filter")
    shape = np.shape(input)
    windows = []

    def note(window):
        windows.append(window.astype(np.intp))
        return 0.0

    # (outside the image, in mode "constant": position -1, the constant after the elements)
    generic_filter.original(np.arange(math.prod(shape), dtype=np.float64).reshape(shape), note,
                            size, footprint, None, mode, -1.0, origin, axes=axes)
    elements = np.concatenate([np.ravel(input).astype(np.float64, copy=False),
                               np.reshape(cval, (1,)).astype(np.float64, copy=False)])
    if _into_itself("generic_filter", input, output, by_lines=False):
        # SciPy reads each window from the memory it writes into, element by element in
        # C order: later windows see the results already written
        for k, window in enumerate(windows):
            value = function(elements[window], *extra_arguments, **extra_keywords)
            elements[k] = value
            if np.dtype(dtype) != np.float64:  # the value as the output holds it
                elements[k:k + 1] = elements[k:k + 1].astype(dtype).astype(np.float64)
        return _deliver(np.reshape(elements[:-1], shape).astype(dtype), output)
    gathered = elements[np.stack(windows)] if windows else elements[:0]
    results = [function(window, *extra_arguments, **extra_keywords) for window in gathered]
    y = np.reshape(np.stack(results) if results else np.zeros(0), shape)
    return _deliver(y.astype(dtype, copy=False), output)


@stands_in_for(_ndimage.generic_filter1d)
def generic_filter1d(input, function, filter_size, axis=-1, output=None, mode="reflect",
                     cval=0.0, origin=0, extra_arguments=(), extra_keywords=None):
    """SciPy's steps on the traced image: each line extended as SciPy extends it (the same
    extension as ``correlate1d``'s, asked of SciPy), the user's ``function`` called on it and
    on a new output line the differentiation follows, line after line, so that what it
    writes there is differentiated."""
    extra_keywords = {} if extra_keywords is None else extra_keywords
    if not any(carries_derivative(v) for v in (input, cval, *extra_arguments,
                                                *extra_keywords.values())):
        cval = _constant(cval, "cval", "generic_filter1d")
        return generic_filter1d.original(input, function, filter_size, axis, output, mode,
                                         cval, origin, extra_arguments, extra_keywords)
    if np.iscomplexobj(input):
        raise TypeError("Complex type not supported")
    dtype = _dtype(output, input, "generic_filter1d")
    axis = normalize_axis_index(axis, np.ndim(input))
    length = np.shape(input)[axis]
    # SciPy's checks of the settings, on one line of zeros
    probe = np.zeros([length if a == axis else 1 for a in range(np.ndim(input))])
    generic_filter1d.original(probe, lambda line, out: None, filter_size, axis, None, mode,
                              0.0, origin)
    _into_itself("generic_filter1d", input, output)  # (each line is read before it is written)
    line = _extension(length, filter_size, origin, mode)
    lines = np.take(np.moveaxis(input, axis, -1).astype(np.float64, copy=False),
                    np.maximum(line, 0), axis=-1)
    if line.min(initial=0) < 0:
        lines = np.where(line < 0, cval, lines)
    lines = np.reshape(lines, (-1, line.size))
    written = []
    for extended in lines:
        out = allocate(np.zeros(length), (np.zeros, (length,), {}))  # (a replay makes it too)
        function(extended, out, *extra_arguments, **extra_keywords)
        written.append(out)
    shape = np.shape(input)
    moved = shape[:axis] + shape[axis + 1:] + (length,)
    y = np.reshape(stacked(written), moved) if written else np.zeros(moved)
    # (in C order, as SciPy's new output: a sum over it then adds in SciPy's order)
    return _deliver(np.moveaxis(y, -1, axis).astype(dtype, order="C"), output)


# ----------------------------------------------------------------------------------------------
# Grey morphology: the rank filters' minimum and maximum, with a footprint's or a structure's
# windows


def _grey(original, minimum, input, size, footprint, structure, output, mode, cval, origin,
          axes):
    """``grey_erosion`` (``minimum``) or ``grey_dilation`` of ``input``: SciPy's own values,
    each output taking the cotangent of the element it selected from its window. The window is
    SciPy's: a dilation mirrors the footprint and the structure and moves the origin, and a
    structure's value is subtracted from (added to) each element of the window."""
    name = original.__name__
    if size is None and footprint is None and structure is None:
        raise ValueError("size, footprint, or structure must be specified")
    dtype = _dtype(output, input, name)
    _constant(cval, "cval", name)
    traced_structure = structure if carries_derivative(structure) else None
    if traced_structure is not None:
        structure = _plain(structure)
    ndim = np.ndim(input)
    axes = _ni_support._check_axes(axes, ndim)
    origins = list(_ni_support._normalize_sequence(origin, len(axes)))
    flip = (lambda a: a) if minimum else (lambda a: a[(slice(None, None, -1),) * a.ndim])
    if innermost((structure,)) is not None:
        structure = settled(structure, f"scipy.ndimage.{name} with a structure it computes")
    given_footprint, given_structure = footprint, structure
    if structure is not None:
        structure = flip(np.asarray(structure, dtype=np.float64))
    if footprint is not None:
        footprint = flip(np.asarray(footprint))
    if not minimum:
        for ii in range(len(origins)):
            origins[ii] = -origins[ii]
            sz = (footprint.shape[ii] if footprint is not None else
                  structure.shape[ii] if structure is not None else
                  size if np.isscalar(size) else size[ii])
            if not sz & 1:
                origins[ii] -= 1
    if footprint is not None:
        box = np.asarray(footprint, dtype=bool)
    elif structure is not None:
        box = np.ones(structure.shape, dtype=bool)
    else:
        box = np.ones(_ni_support._normalize_sequence(size, len(axes)), dtype=bool)
    box = _filters._expand_footprint(ndim, axes, box)
    offsets = None
    if structure is not None:
        if structure.ndim != ndim:
            structure = np.expand_dims(structure, tuple(a for a in range(ndim) if a not in axes))
        offsets = (-structure if minimum else structure)[box]
    modes = ["constant"] * ndim
    for a, m in zip(axes, _ni_support._normalize_sequence(mode, len(axes))):
        modes[a] = m
    geometry = (box, tuple(_filters._expand_origin(ndim, axes, origins)), tuple(modes), cval,
                offsets)
    if traced_structure is not None:
        # SciPy's value; each output the element it took plus (less) the structure's value
        # there, as a composition of the input and the structure (SciPy's choices kept)
        value = original(_plain(input), size=size, footprint=given_footprint,
                         structure=given_structure, output=dtype, mode=mode, cval=cval,
                         origin=origin,
                         axes=axes)
        if value.dtype.kind != "f":
            raise UnsupportedOperationError(
                f"scipy.ndimage.{name} with a differentiated structure into {value.dtype} "
                "values: differentiate a float filter (a float input or output=float).")
        chosen, position = _chosen(_plain(input), value, *geometry, positions=True)
        traced = flip(traced_structure.astype(np.float64))
        if traced.ndim != ndim:
            traced = np.expand_dims(traced, tuple(a for a in range(ndim) if a not in axes))
        offsets = (-traced if minimum else traced)[box]
        taken = np.where(chosen >= 0, np.take(np.ravel(input), np.maximum(chosen, 0)), cval)
        return _deliver(scipys_value(value, taken + np.take(offsets, position)), output)
    call = functools.partial(_call, original, dict(
        size=size, footprint=given_footprint, structure=given_structure, output=dtype, mode=mode,
        cval=cval, origin=origin, axes=axes), geometry=geometry)
    return _deliver(_select(input, cval, call), output)


def _grey_stand_in(original, minimum):
    @stands_in_for(original)
    def stand_in(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
        return _grey(original, minimum, input, size, footprint, structure, output, mode, cval,
                     origin, axes)
    return stand_in


grey_erosion = _grey_stand_in(_ndimage.grey_erosion, True)
grey_dilation = _grey_stand_in(_ndimage.grey_dilation, False)


def _grey_composite(original, steps, writes_output=False):
    """A morphology function SciPy composes of erosions and dilations: the same steps on the
    stand-ins above (``output=`` a dtype or an array made inside the function), their result
    written into ``output``; with ``writes_output``, ``steps(x, settings, output)`` write it
    themselves, at the step SciPy does."""
    @stands_in_for(original)
    def stand_in(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
        if size is not None and footprint is not None:
            warnings.warn("ignoring size because footprint is set", UserWarning, stacklevel=2)
        settings = dict(size=size, footprint=footprint, structure=structure, mode=mode,
                        cval=cval, origin=origin, axes=axes)
        if writes_output:
            return steps(input, settings, output)
        return _deliver(steps(input, settings).astype(_dtype(output, input, original.__name__),
                                                      copy=False), output)
    return stand_in


grey_opening = _grey_composite(_ndimage.grey_opening, lambda x, s: grey_dilation(
    grey_erosion(x, **s), **s))
grey_closing = _grey_composite(_ndimage.grey_closing, lambda x, s: grey_erosion(
    grey_dilation(x, **s), **s))
morphological_gradient = _grey_composite(_ndimage.morphological_gradient, lambda x, s: (
    grey_dilation(x, **s) - grey_erosion(x, **s)))


def _tophat(first, second, white):
    """A top-hat's steps as SciPy takes them: ``second(first(x))`` written into ``output``,
    then its difference with the input taken in place there. An ``output`` over the input's
    memory so makes the difference read the input after that write, as SciPy's does."""
    def steps(x, settings, output):
        opened = second(first(x, **settings), output=output, **settings)
        return np.subtract(*((x, opened) if white else (opened, x)), out=opened)
    return steps


white_tophat = _grey_composite(_ndimage.white_tophat, _tophat(grey_erosion, grey_dilation, True),
                               writes_output=True)
black_tophat = _grey_composite(_ndimage.black_tophat, _tophat(grey_dilation, grey_erosion, False),
                               writes_output=True)


# ----------------------------------------------------------------------------------------------
# Measurements over labelled regions: SciPy's values, the derivatives of sums over the regions


class _Groups:
    """Which region of a measurement each element of the input counts in: ``ids`` (flat, one
    per element, ``count`` for an element in none), ``count`` regions, the number of elements
    of each (``sizes``), and how the measurement's result is laid out (``shape``: SciPy's,
    ``()`` for one region; ``take``: the region of each result)."""

    def __init__(self, shape, labels, index):
        if labels is None:
            if index is not None:
                raise ValueError("index without defined labels")
            ids, self.count, self.take, self.shape = np.zeros(math.prod(shape), np.intp), 1, \
                np.zeros(1, np.intp), ()
        else:
            labels = np.broadcast_to(np.asarray(labels), shape).ravel()
            if index is None:
                ids, self.count, self.take, self.shape = np.where(labels > 0, 0, 1), 1, \
                    np.zeros(1, np.intp), ()
            elif np.isscalar(index):
                ids, self.count, self.take, self.shape = np.where(labels == index, 0, 1), 1, \
                    np.zeros(1, np.intp), ()
            else:
                index = np.asarray(index)
                unique, self.take = np.unique(index, return_inverse=True)
                self.count, self.shape = unique.size, index.shape
                place = np.minimum(np.searchsorted(unique, labels), max(unique.size - 1, 0))
                ids = np.where(unique.size and (unique[place] == labels), place, unique.size) \
                    if unique.size else np.zeros(labels.size, np.intp)
        self.ids = np.asarray(ids, dtype=np.intp)
        self.sizes = np.bincount(self.ids, minlength=self.count + 1)[:self.count]

    def laid_out(self, per_region):
        """Per-region values (the last axis) in SciPy's layout of the result."""
        taken = np.take(per_region, np.ravel(self.take), axis=-1)
        return np.reshape(taken, np.shape(per_region)[:-1] + self.shape)

    def spread(self, per_region):
        """Each element's region's value (0 for an element in none)."""
        return np.take(np.concatenate([per_region, np.zeros_like(per_region, shape=(1,))]),
                       self.ids)


def _plain_region_sums(input, groups):
    return np.bincount(groups.ids, weights=np.ravel(input),
                       minlength=groups.count + 1)[:groups.count]


_region_sums = ScipyAdjoint(_plain_region_sums)


@_region_sums.rule
def _region_sums_rule(input, groups):
    shape = np.shape(input)
    return _region_sums(input, groups), lambda dy: (np.reshape(groups.spread(dy), shape), None)


@_region_sums.jvp_rule
def _region_sums_jvp(tangents, input, groups):
    return _region_sums(input, groups), _region_sums(tangents[0], groups)


def _measured(name, input, labels, index):
    """The input as a float array of the labels' broadcast shape, and its regions."""
    if np.iscomplexobj(input) or not np.issubdtype(np.result_type(input), np.floating):
        raise UnsupportedOperationError(
            f"scipy.ndimage.{name} of a differentiated {np.result_type(input)} input: mutad "
            "differentiates float inputs only.")
    if labels is not None:
        shape = np.broadcast_shapes(np.shape(input), np.shape(labels))
        if shape != np.shape(input):
            input = np.broadcast_to(input, shape)
    return input, _Groups(np.shape(input), _constant_labels(labels, name), index)


def _constant_labels(labels, name):
    if labels is not None and innermost((labels,)) is not None:
        if carries_derivative(labels):
            raise UnsupportedOperationError(
                f"scipy.ndimage.{name}: the labels depend on the differentiated arguments; "
                "labels are regions, not values: pass them as constants (mutad.stop_gradient).")
        return settled(labels, f"scipy.ndimage.{name} with labels the program computes")
    return labels


def _scipy_measure(original):
    return Value(lambda input, labels, index: np.asarray(original(input, labels, index)),
                 f"scipy.ndimage.{original.__name__}")


_VALUES = {name: _scipy_measure(getattr(_ndimage, name))
           for name in ("sum_labels", "mean", "variance", "standard_deviation", "minimum",
                        "maximum", "center_of_mass")}


def _region_means(input, groups):
    return _region_sums(input, groups) / np.maximum(groups.sizes, 1)


def _region_variances(input, groups):
    deviations = np.ravel(input) - groups.spread(_region_means(input, groups))
    return _region_sums(deviations * deviations, groups) / np.maximum(groups.sizes, 1)


def _measurement(name, composition):
    original = getattr(_ndimage, name)

    @stands_in_for(original)
    def stand_in(input, labels=None, index=None):
        input, groups = _measured(name, input, labels, index)
        value = _VALUES[name](input, labels, index)
        return scipys_value(value, groups.laid_out(composition(input, groups)))

    return stand_in


sum_labels = _measurement("sum_labels", _region_sums)
mean = _measurement("mean", _region_means)
variance = _measurement("variance", _region_variances)
standard_deviation = _measurement("standard_deviation",
                                  lambda x, groups: np.sqrt(_region_variances(x, groups)))


@stands_in_for(_ndimage.sum)
def sum(input, labels=None, index=None):  # noqa: A001 (SciPy's name)
    """``scipy.ndimage.sum``, SciPy's other name of ``sum_labels``."""
    return sum_labels(input, labels, index)


def _extremum(name, position_name):
    original, positions = getattr(_ndimage, name), getattr(_ndimage, position_name)

    @stands_in_for(original)
    def stand_in(input, labels=None, index=None):
        input, groups = _measured(name, input, labels, index)
        value = _VALUES[name](input, labels, index)
        # The element SciPy's value is, at the position SciPy gives (decided now, on the
        # plain values): each region's extremum takes the cotangent, ties going to that one.
        plain = np.asarray(stop_gradient(input))
        where = positions(plain, labels, index)
        where = np.asarray([where] if groups.shape == () else where, dtype=np.intp)
        flat = np.ravel_multi_index(tuple(np.reshape(where, (-1, np.ndim(plain))).T),
                                    np.shape(plain)) if np.ndim(plain) else \
            np.zeros(np.size(where), np.intp)
        present = np.reshape(groups.sizes[np.ravel(groups.take)] > 0, groups.shape)
        composition = np.where(present, np.reshape(np.take(np.ravel(input), flat),
                                                   groups.shape), 0.0)
        if not np.array_equal(np.where(present, np.asarray(stop_gradient(value)), 0.0),
                              np.asarray(stop_gradient(composition)), equal_nan=True):
            raise UnsupportedOperationError(
                f"scipy.ndimage.{name}: SciPy's value is not the element at SciPy's "
                f"{position_name}, so mutad cannot say which element was selected.")
        return scipys_value(value, composition)

    return stand_in


minimum = _extremum("minimum", "minimum_position")
maximum = _extremum("maximum", "maximum_position")


_VALUES["median"] = _scipy_measure(_ndimage.median)


def _median_positions(plain, labels, index):
    """The flat positions of the two elements SciPy's median of each region averages (the
    same one twice for an odd count), by SciPy's own steps (scipy/ndimage/_measurements.py,
    ``_select``) on the plain values: for an index SciPy does not find among the labels, the
    elements it reads."""
    positions = np.arange(plain.size)
    if labels is None or index is None or np.isscalar(index):
        mask = (np.ones(plain.shape, bool) if labels is None else
                np.broadcast_to(labels, plain.shape) > 0 if index is None else
                np.broadcast_to(labels, plain.shape) == index)
        chosen = positions[np.ravel(mask)]
        ranked = chosen[np.argsort(np.ravel(plain)[chosen], kind="stable")]
        if ranked.size == 0:
            return None
        return ranked[(ranked.size - 1) // 2], ranked[ranked.size // 2]
    labels = np.broadcast_to(np.asarray(labels), plain.shape)
    index = np.asarray(index)
    if (not _measurements._safely_castable_to_int(labels.dtype) or labels.min() < 0
            or labels.max() > labels.size):
        unique_labels, labels = np.unique(labels, return_inverse=True)
        idxs = np.searchsorted(unique_labels, index)
        idxs[idxs >= unique_labels.size] = 0
        found = unique_labels[idxs] == index
    else:
        idxs = np.asanyarray(index, np.int_).copy()
        found = (idxs >= 0) & (idxs <= labels.max())
    idxs[~found] = labels.max() + 1
    labels = np.reshape(labels, plain.shape)
    order = np.lexsort((plain.ravel(), labels.ravel()))
    labels = labels.ravel()[order]
    locs = np.arange(len(labels))
    lo = np.zeros(labels.max() + 2, np.int_)
    lo[labels[::-1]] = locs[::-1]
    hi = np.zeros(labels.max() + 2, np.int_)
    hi[labels] = locs
    lo, hi = lo[idxs], hi[idxs]
    step = (hi - lo) // 2
    return order[lo + step], order[hi - step]


@stands_in_for(_ndimage.median)
def median(input, labels=None, index=None):
    """SciPy's values; each region's median the mean of the middle element (the two middle
    ones for an even count) SciPy's steps pick on the plain values."""
    input, _ = _measured("median", input, labels, index)
    labels = _constant_labels(labels, "median")
    value = _VALUES["median"](input, labels, index)
    chosen = _median_positions(np.asarray(stop_gradient(input)), labels, index)
    if chosen is None:  # an empty region: SciPy's NaN
        return value
    flat = np.ravel(input)
    composition = (np.take(flat, chosen[0]) + np.take(flat, chosen[1])) / 2.0
    return scipys_value(value, composition)


@stands_in_for(_ndimage.extrema)
def extrema(input, labels=None, index=None):
    """``minimum``, ``maximum`` and SciPy's positions of them (which carry no derivative)."""
    plain = np.asarray(stop_gradient(input))
    return (minimum(input, labels, index), maximum(input, labels, index),
            _ndimage.minimum_position(plain, labels, index),
            _ndimage.maximum_position(plain, labels, index))


def _positions(original):
    @stands_in_for(original)
    def stand_in(input, labels=None, index=None):
        return original(np.asarray(stop_gradient(input)), labels, index)
    return stand_in


minimum_position = _positions(_ndimage.minimum_position)
maximum_position = _positions(_ndimage.maximum_position)


@stands_in_for(_ndimage.center_of_mass)
def center_of_mass(input, labels=None, index=None):
    """SciPy's values; the derivatives of its quotient of sums, Σ x·coordinate / Σ x."""
    input, groups = _measured("center_of_mass", input, labels, index)
    value = _VALUES["center_of_mass"](input, labels, index)
    # (a missing region's value is SciPy's NaN, 0 / 0; its derivative 0, not NaN)
    normalizer = np.where(groups.sizes > 0, _region_sums(input, groups), 1.0)
    grids = np.ogrid[[slice(0, i) for i in np.shape(input)]]
    composition = stacked([groups.laid_out(
        _region_sums(input * grids[axis].astype(float), groups) / normalizer)
        for axis in range(np.ndim(input))])
    if groups.shape == ():
        result = scipys_value(value, composition)
        return tuple(result[axis] for axis in range(np.ndim(input)))
    # SciPy's layout: [tuple(v) for v in np.array(results).T], every axis reversed
    result = scipys_value(value, np.transpose(composition))
    return [tuple(row) for row in result]


@stands_in_for(_ndimage.labeled_comprehension)
def labeled_comprehension(input, labels, index, func, out_dtype, default, pass_positions=False):
    """SciPy's steps on the traced input: the user's ``func`` called on the same chunks of it,
    in the same order, so that what ``func`` computes is differentiated."""
    name = "labeled_comprehension"
    if not np.issubdtype(np.dtype(out_dtype), np.floating):
        return _ndimage.labeled_comprehension(np.asarray(stop_gradient(input)), labels, index,
                                              func, out_dtype, default, pass_positions)
    labels = _constant_labels(labels, name)
    as_scalar = np.isscalar(index)
    positions = np.arange(np.size(input)).reshape(np.shape(input)) if pass_positions else None
    extra = lambda chosen: () if positions is None else (positions[chosen],)  # noqa: E731
    if labels is None:
        if index is not None:
            raise ValueError("index without defined labels")
        return func(np.ravel(input), *(() if positions is None else (np.ravel(positions),)))
    labels = np.asarray(labels)
    shape = np.broadcast_shapes(np.shape(input), np.shape(labels))
    input = input if np.shape(input) == shape else np.broadcast_to(input, shape)
    labels = np.broadcast_to(labels, shape)
    if positions is not None:
        positions = np.broadcast_to(positions, shape)
    if index is None:
        return func(input[labels > 0], *extra(labels > 0))
    index = np.atleast_1d(index)
    if np.any(index.astype(labels.dtype).astype(index.dtype) != index):
        raise ValueError(f"Cannot convert index values from <{index.dtype}> to "
                         f"<{labels.dtype}> (labels' type) without loss of precision")
    index = index.astype(labels.dtype)
    mask = (labels >= index.min()) & (labels <= index.max())
    labels, input = labels[mask], input[mask]
    if positions is not None:
        positions = positions[mask]
    label_order = labels.argsort()
    labels, input = labels[label_order], input[label_order]
    if positions is not None:
        positions = positions[label_order]
    index_order = index.argsort()
    sorted_index = index[index_order]
    lo = np.searchsorted(labels, sorted_index, side="left")
    hi = np.searchsorted(labels, sorted_index, side="right")
    out_dtype = np.dtype(out_dtype)
    temp = []
    for l, h in zip(lo, hi):
        if l == h:
            temp.append(np.full((), default, dtype=out_dtype))
            continue
        value = func(input[l:h], *(() if positions is None else (positions[l:h],)))
        temp.append(np.reshape(value, ()).astype(out_dtype, copy=False))
    temp = stacked(temp) if temp else np.zeros(0, out_dtype)
    output = temp[np.argsort(index_order)]
    return output[0] if as_scalar else output


# ----------------------------------------------------------------------------------------------
# Decisions about the image: which of its elements are nonzero (the binary morphology, label,
# the chamfer and brute-force distance transforms), in which bin each lies (histogram). Their
# results are piecewise constant in its values, so they have no derivative: SciPy's own call
# on the plain values, taken again on every call a replay makes (SciPy's code would convert
# the traced image itself).


def _decided_call(original, input, settings):
    return original(input, **settings)


def _decided(original):
    name = f"scipy.ndimage.{original.__name__}"
    signature = inspect.signature(original)
    value = Value(functools.partial(_decided_call, original), name)

    @stands_in_for(original)
    def decided(*args, **kwargs):
        settings = signature.bind(*args, **kwargs).arguments
        input = settings.pop("input")
        if carries_derivative(settings.get("sampling")):
            raise UnsupportedOperationError(
                f"{name} with a differentiated sampling=: mutad has no derivative of the "
                "distances in the spacing. Pass it as a constant, or scale the distances "
                "computed at a constant spacing.")
        output = settings.get("output")
        if innermost((output,)) is not None:
            raise UnsupportedOperationError(
                f"{name} into an output= array that holds differentiated values: SciPy would "
                "write into its memory unseen. Write the result into it after the call "
                f"(out[...] = {name.rsplit('.', 1)[1]}(x)).")
        settings = {key: np.asarray(stop_gradient(setting))
                    if innermost((setting,)) is not None else setting
                    for key, setting in settings.items()}
        made = value(input, settings)
        return tuple(_no_derivative(part) for part in made) if type(made) is tuple else (
            _no_derivative(made))

    return decided


def _no_derivative(x):
    return np.asarray(stop_gradient(x)) if innermost((x,)) is not None else x


(binary_closing, binary_dilation, binary_erosion, binary_fill_holes, binary_hit_or_miss,
 binary_opening, binary_propagation, distance_transform_bf, distance_transform_cdt, histogram,
 label) = (_decided(original) for original in (
    _ndimage.binary_closing, _ndimage.binary_dilation, _ndimage.binary_erosion,
    _ndimage.binary_fill_holes, _ndimage.binary_hit_or_miss, _ndimage.binary_opening,
    _ndimage.binary_propagation, _ndimage.distance_transform_bf,
    _ndimage.distance_transform_cdt, _ndimage.histogram, _ndimage.label))
