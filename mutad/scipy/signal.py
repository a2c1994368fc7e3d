"""``scipy.signal`` functions mutad differentiates, by SciPy's names too: the filters
``lfilter``, ``sosfilt``, ``filtfilt``, ``sosfiltfilt``, ``lfilter_zi``, ``sosfilt_zi``,
``savgol_filter``, ``medfilt``, ``detrend`` and ``hilbert``; the convolutions ``convolve``,
``fftconvolve``, ``oaconvolve``, ``correlate``, ``convolve2d``, ``correlate2d``; resampling
(``resample``, ``resample_poly``, ``upfirdn``, ``decimate``); spectral analysis (``welch``,
``periodogram``, ``csd``, ``coherence``, ``spectrogram``, ``stft``, ``istft``, and the
``stft``, ``stft_detrend``, ``spectrogram`` and ``istft`` methods of ``ShortTimeFFT``); and the
filter design functions ``freqz`` (in b and a) and ``firwin`` (in the cutoffs); linear
time-invariant systems (``lti``, ``dlti``, ``TransferFunction``, ``ZerosPolesGain``,
``StateSpace``), their conversions (``tf2ss``, ``ss2tf``, ``zpk2tf``, ``zpk2ss``,
``normalize``, ``cont2discrete``), simulations (``lsim``, ``step``, ``impulse``, ``dlsim``,
``dstep``, ``dimpulse``) and frequency responses (``freqs``, ``freqs_zpk``, ``freqresp``,
``bode``, ``dfreqresp``, ``dbode``).

>>> import numpy as np, mutad
>>> from mutad.scipy import signal
>>> smooth = lambda b, x: (signal.lfilter(b, [1.0, -0.5], x) ** 2).sum()
>>> db, dx = mutad.gradient(smooth, np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0]))
>>> db.round(3).tolist(), dx.round(3).tolist()
([3.875, 3.75], [7.625, 5.25, 1.5])

``lfilter`` differentiates b, a, x and the initial state zi, along any axis, and with zi given
the final state zf it returns as well, in reverse and in forward mode; ``sosfilt`` is its
cascade of sections (its value SciPy's own), ``filtfilt`` (``method="pad"`` and ``"gust"``) and
``sosfiltfilt`` SciPy's own steps on them. ``convolve2d`` and ``correlate2d`` differentiate
both operands and the fillvalue, for every mode and boundary; ``savgol_filter`` is linear in x,
ndimage's ``convolve1d`` but in ``mode="interp"``, whose end rows are SciPy's polynomial fits;
``upfirdn`` is linear in h and in x, and in every extension mode the zero extension's filter
of the signal as SciPy extends it (linear in x; ``cval`` differentiated too); ``medfilt``
and ``order_filter`` are ndimage's rank filter (as in SciPy), each output taking the cotangent of the element it selected, and
``medfilt2d`` the same filter of a 2-d array (checked to select SciPy's values); ``wiener`` is
SciPy's own steps on ``correlate``. ``find_peaks`` (every setting, as constants),
``peak_prominences`` and ``peak_widths`` take SciPy's peaks, bases, plateau edges and
crossings (decisions on the values) and differentiate its arithmetic on the values there: the
heights and thresholds, x[peak] - max(x[left base], x[right base]), and the linear
interpolation around each crossing.

The functions SciPy writes in Python on NumPy and ``scipy.fft`` (the spectral functions,
``detrend``, ``hilbert``, ``resample``, ``resample_poly``, ``decimate``, ``freqz``,
``firwin``, the chirp z-transforms ``czt`` and ``zoom_fft`` and the ``CZT`` and ``ZoomFFT``
objects' calls) run SciPy's own steps on the traced arrays, so their values are SciPy's and their
derivatives those of SciPy's computation: windows and frequencies are constants, every
``detrend`` option (``'constant'``, ``'linear'``, ``False``, a function) is followed, and
``average='median'`` takes the derivative of the median segment (the mean of the two middle
ones for an even count). ``spectrogram(mode='phase')`` stops at ``np.unwrap``, which has no
rule.

A system built by SciPy's classes from values a differentiation follows is mutad's own
object, an instance of SciPy's classes for ``isinstance``, holding SciPy's representation
(a transfer function's ``num`` and ``den`` normalized as SciPy normalizes them, a state
space's matrices 2-d) as traced arrays. ``tf2ss``, ``zpk2tf``, ``zpk2ss``, ``normalize``,
``to_tf`` and ``to_ss`` are SciPy's own steps (the controller canonical form, the
polynomials of the roots by convolution), so their values are SciPy's and their derivatives
those of its steps; ``ss2tf``'s values are SciPy's own call's (the polynomials of the
eigenvalues of A and of A - B C_k), and its derivatives those of the same characteristic
polynomials by Faddeev and LeVerrier's recursion (polynomials in the entries, exact at
repeated eigenvalues too). ``lsim`` is SciPy's steps: the exponential of its block matrix
(``scipy.linalg.expm``, differentiated), then each state from the last; ``step`` and
``impulse`` are SciPy's ``lsim`` calls; ``dlsim`` SciPy's loop, x[i+1] = A x[i] + B u[i],
its inputs at times ``t`` interpolated by ``make_interp_spline(t, u, k=1)``, and ``dstep``
and ``dimpulse`` its calls for each input. ``cont2discrete`` (and ``to_discrete``) is
SciPy's steps on the state-space matrices: the exponential of its block matrix (``zoh``,
``foh``, ``impulse``) or its solves (``gbt``, ``bilinear``, ``euler``, ``backward_diff``),
a transfer function through ``tf2ss`` and ``ss2tf``. ``freqs`` and ``freqs_zpk`` are SciPy's
steps at the frequencies given (Horner's scheme at s = iω; k Π(s - z) / Π(s - p)),
``freqresp`` (and a system's ``freqresp``) theirs of a transfer function or of zeros and
poles, ``dfreqresp`` ``freqz`` of the transfer function in z⁻¹ (or ``freqz_zpk``), and
``bode`` and ``dbode`` (and a system's ``bode``) SciPy's magnitude and unwrapped phase of
those responses. ``output`` of
SciPy's own systems, called with differentiated inputs, is ``lsim`` or ``dlsim``. Refused,
with an error that says what to do: the default times of ``step`` and ``impulse`` when A is
differentiated (they come from its eigenvalues: pass ``T``), the default frequencies of
``freqs`` and ``freqs_zpk`` (from the roots: pass ``worN``), ``freqresp`` of a state space or
of a ``(num, den)`` tuple (SciPy converts them to zeros and poles), ``cont2discrete`` of zeros
and poles (SciPy returns the roots) and of a differentiated ``dt``, differentiated ``t`` of
``dlsim``, differentiated frequencies, ``zpk2sos`` of differentiated zeros, poles or gain
with ``analog=True`` or ``pairing='minimal'`` (use ``zpk2tf``), and the other attributes
of a differentiated system (``to_zpk`` of a transfer function or state space, ``poles``,
``bode``: build it from plain values).

``zpk2sos`` of differentiated zeros, poles or gain (digital, pairing ``'nearest'`` or
``'keep_odd'``; and ``output='sos'`` of the IIR designs) is SciPy's sections, with the
derivatives of the sections written from the zeros and poles SciPy paired (a decision on
their values, read off SciPy's sections as the roots each one has).

The waveforms ``chirp`` and ``sawtooth`` and the designs ``iirnotch``, ``iirpeak`` and
``bilinear`` are SciPy's steps on differentiated times, frequencies, widths, quality factors
and coefficients (``bilinear``'s transformed polynomials, linear in the coefficients, SciPy's
values with the derivatives of that map, then ``normalize``); ``square`` is SciPy's own code,
followed step by step (its values, constant between jumps, have the derivative zero).
"""

import functools
import inspect
import math
import operator
import warnings
from typing import Any

import numpy as np
import scipy.fft as _fft
import scipy.signal as _signal
from numpy.lib.array_utils import normalize_axis_index
from scipy.signal import (_arraytools, _filter_design, _lti_conversion, _ltisys, _signaltools,
                          _spectral_py)
from scipy.signal import _spline, _upfirdn_apply
from scipy.signal._upfirdn import _output_len, _upfirdn_modes

from ..core.allocation import lists_as_arrays
from ..engines.arraylike import carries_derivative, settled
from ..engines.products import product_times
from ..api import stop_gradient
from ..core.errors import UnsupportedOperationError
from ..core.levels import Tracer, innermost
from ..core.registry import HOLOMORPHIC, defmethod, defroute
from ..rules._helpers import accumulator, gather_cotangent, stacked, unbroadcast
from . import fft, linalg, ndimage
from ._adjoints import (ScipyAdjoint, ScipysCode, StandIn, Value, _plain, array_argument,
                        array_tangent, following_scipys_code, linear_function, linear_map,
                        not_replayed, refused_attribute, scipy_adjoint, scipys_value,
                        stands_in_for)

lfilter = scipy_adjoint(_signal.lfilter)
convolve = scipy_adjoint(_signal.convolve)
fftconvolve = scipy_adjoint(_signal.fftconvolve)

__all__ = ["StateSpace", "TransferFunction", "ZerosPolesGain", "bilinear", "bode", "butter",
           "cheby1", "cheby2", "chirp", "coherence", "cont2discrete",
           "convolve", "convolve2d", "correlate", "correlate2d", "csd", "cspline1d_eval", "czt", "decimate", "deconvolve",
           "dbode", "detrend", "dfreqresp",
           "dimpulse", "dlsim", "dlti", "dstep", "ellip", "fftconvolve", "filtfilt", "find_peaks",
           "firwin", "freqresp", "freqs", "freqs_zpk", "freqz", "hilbert", "iirfilter", "impulse",
           "iirnotch", "iirpeak",
           "istft", "lfilter", "lfilter_zi", "lfiltic", "lombscargle", "lsim", "lti", "medfilt", "medfilt2d", "normalize", "oaconvolve", "order_filter", "peak_prominences", "peak_widths", "periodogram", "qspline1d_eval",
           "resample", "resample_poly", "savgol_filter", "sawtooth", "sepfir2d", "sosfilt", "square", "sosfilt_zi", "sosfreqz", "freqz_sos",
           "sosfiltfilt",
           "spectrogram", "ss2tf", "step", "stft", "tf2sos", "tf2ss", "tf2zpk", "upfirdn", "welch", "wiener",
           "zoom_fft",
           "zpk2sos", "zpk2ss", "zpk2tf"]


def _lagged_products(v, u, count):
    """``Σ_n v[..., n] u[..., n - k]`` for ``k < count``, summed over every leading axis too: the
    cross-correlation that turns a filter's cotangent into its coefficients' cotangents."""
    length = v.shape[-1]
    return stacked([np.vdot(v[..., k:], u[..., :length - k]) if k < length else 0.0
                    for k in range(count)])


def _final_state_back(dzf, x, y, zi, b_normal, a_normal):
    """Cotangents from zf's cotangent ``dzf`` (all along the last axis).

    In SciPy's transposed direct form II, with n = N - 1 the last sample and K the filter order,
    zf[m] = Σ_i (b_{m+1+i} x[n-i] - a_{m+1+i} y[n-i]) + zi[m+N] (the last term when m+N < K),
    i running while m+1+i <= K and n-i >= 0, for the coefficients divided by a[0]. Returns the
    extra cotangents of x, y and zi and those of the divided coefficients (padded to K+1).
    """
    order, length = len(a_normal) - 1, x.shape[-1]
    # Traced like what is added into them, under nested reverse mode.
    dx = accumulator(np.shape(x), x.dtype, dzf, b_normal)
    dy = accumulator(np.shape(y), y.dtype, dzf, a_normal)
    dzi = accumulator(np.shape(zi), zi.dtype, dzf)
    db_normal, da_normal = [0.0] * (order + 1), [0.0] * (order + 1)
    for m in range(order):
        for i in range(min(length - 1, order - m - 1) + 1):
            j, n = m + 1 + i, length - 1 - i
            dx[..., n] += b_normal[j] * dzf[..., m]
            dy[..., n] -= a_normal[j] * dzf[..., m]
            db_normal[j] = db_normal[j] + np.vdot(dzf[..., m], x[..., n])
            da_normal[j] = da_normal[j] - np.vdot(dzf[..., m], y[..., n])
        if m + length < order:
            dzi[..., m + length] += dzf[..., m]
    return dx, dy, dzi, stacked(db_normal), stacked(da_normal)


@lfilter.rule
def _lfilter_rule(b, a, x, axis=-1, zi=None):
    b, a, x, zi = map(array_argument, (b, a, x, zi))  # lfilter([b0, 0.5], ...)
    # Every filter here is the wrapper, not SciPy's own: under nested reverse mode the arrays
    # are traced by the outer differentiation, which differentiates them again.
    result = lfilter(b, a, x, axis, zi)
    y = result if zi is None else result[0]
    x_last = np.moveaxis(x, axis, -1)
    y_last = np.moveaxis(y, axis, -1)
    order = max(np.size(a), np.size(b)) - 1
    a_first = np.ravel(a)[0]
    if zi is not None:
        zi_shape = np.shape(np.moveaxis(zi, axis, -1))
        zi_last = np.broadcast_to(np.moveaxis(zi, axis, -1), x_last.shape[:-1] + (order,))
        b_normal = np.pad(np.ravel(b), (0, order + 1 - np.size(b))) / a_first
        a_normal = np.pad(np.ravel(a), (0, order + 1 - np.size(a))) / a_first

    def anticausal(numerator, signal):
        """The adjoint of the causal filter ``numerator / a`` along the last axis: the same
        filter run backwards in time (its matrix is lower triangular Toeplitz, its transpose
        the upper one)."""
        return np.flip(lfilter(numerator, a, np.flip(signal, -1), -1), -1)

    def back(dresult):
        dy_last = np.moveaxis(dresult if zi is None else dresult[0], axis, -1)
        if zi is not None:
            dx_final, dy_final, dzi_final, db_normal, da_normal = _final_state_back(
                np.moveaxis(dresult[1], axis, -1), x_last, y_last, zi_last, b_normal, a_normal)
            dy_last = dy_last + dy_final
        # A(z) y = B(z) x + a[0] c with SciPy's raw coefficients (it divides both by a[0]),
        # c holding zi in its first K samples (the response to the initial state), so
        # dy = A⁻¹ (dB x - dA y + c da[0] + a[0] dc): with v = A⁻ᵀ ȳ, b̄_k = Σ_n v[n] x[n-k],
        # ā_k = -Σ_n v[n] y[n-k] (for every k, a[0] included), x̄ = (B/A)ᵀ ȳ and
        # z̄i = a[0] v[:K]. The filters are lower triangular Toeplitz matrices, so their
        # transposes are the same filters run backwards in time.
        v = anticausal([1.0], dy_last)
        db = _lagged_products(v, x_last, np.size(b))
        da = -_lagged_products(v, y_last, np.size(a))
        dx = anticausal(b, dy_last)
        dzi = None
        if zi is not None:
            start = min(order, v.shape[-1])
            padding = [(0, 0)] * (v.ndim - 1) + [(0, order - start)]
            dzi_full = dzi_final + np.pad(a_first * v[..., :start], padding)
            dzi = np.moveaxis(unbroadcast(dzi_full, zi_shape), -1, axis)
            dx = dx + dx_final
            # zf used the coefficients divided by a[0]: b_j / a[0] and a_j / a[0] (j >= 1).
            db = db + db_normal[:np.size(b)] / a_first
            first = np.vdot(v[..., :start], zi_last[..., :start]) - (
                np.dot(db_normal, b_normal) + np.dot(da_normal[1:], a_normal[1:])) / a_first
            da = da + stacked([first] + [da_normal[k] / a_first for k in range(1, np.size(a))])
        return (np.reshape(db, np.shape(b)), np.reshape(da, np.shape(a)),
                np.moveaxis(dx, -1, axis), None, dzi)

    return result, back


def _coefficients_tangent(db, da, b, a, x, y, axis, state):
    """The part of lfilter's tangent that comes from the coefficients' tangents ``db``, ``da``.

    SciPy filters with b̂ = b / a[0], â = a / a[0]: â(z) y = b̂(z) x + c, c holding zi in its
    first K samples and independent of the coefficients. So â dy = w with w = db̂ x - dâ y, and
    dy = w filtered by 1 / â. The final state is linear in the same way: with every filter run
    from a zero state (``state``), zf's tangent is the final state of the FIR filters making w
    plus that of the recursive one making dy. Returns dy, or (dy, dzf) when ``state`` is given.
    """
    order = max(np.size(a), np.size(b)) - 1
    a_first = np.ravel(a)[0]
    b_normal, a_normal = np.ravel(b) / a_first, np.ravel(a) / a_first
    da_first = 0.0 if da is None else np.ravel(da)[0]
    db_normal = ((0.0 if db is None else np.ravel(db)) - b_normal * da_first) / a_first

    def fir(coefficients, signal):
        padded = np.pad(coefficients, (0, order + 1 - np.size(coefficients)))
        return lfilter(padded, [1.0], signal, axis, state)

    w = fir(db_normal, x)
    if da is not None:
        # dâ = (da - â da[0]) / a[0]; its first entry is 0, as â's is always 1.
        w = _plus(w, fir((a_normal * da_first - np.ravel(da)) / a_first, y))
    unit = np.eye(1, order + 1).ravel()  # 1, padded so that the state has K entries
    if state is None:
        return lfilter(unit, a_normal, w, axis)
    w, w_final = w
    dy, dy_final = lfilter(unit, a_normal, w, axis, state)
    return dy, w_final + dy_final


def _plus(p, q):
    """``p + q`` for arrays, item by item for (y, zf) pairs."""
    return tuple(u + v for u, v in zip(p, q, strict=True)) if type(p) is tuple else p + q


@lfilter.jvp_rule
def _lfilter_jvp(tangents, b, a, x, axis=-1, zi=None):
    # The filter is linear in x and zi jointly; the coefficients add _coefficients_tangent.
    # Every lfilter here is the wrapper and every tangent passed positionally, so that a
    # reverse pass can differentiate this rule again (hvp).
    result = lfilter(b, a, x, axis, zi)
    db, da, dx, _, dzi = map(array_tangent, (b, a, x, axis, zi),
                             (tuple(tangents) + (None,) * 5)[:5])  # lfilter([b0, 0.5], ...)
    b, a, x, zi = map(array_argument, (b, a, x, zi))
    y = result if zi is None else result[0]
    state = None
    if zi is not None:
        shape = list(np.shape(x))
        shape[axis] = max(np.size(a), np.size(b)) - 1
        state = np.zeros(shape)
    parts = []
    if dx is not None or dzi is not None:
        parts.append(lfilter(b, a, np.zeros(np.shape(x)) if dx is None else dx, axis,
                             state if dzi is None else dzi))
    if db is not None or da is not None:
        parts.append(_coefficients_tangent(db, da, b, a, x, y, axis, state))
    if not parts:
        return result, None
    return result, functools.reduce(_plus, parts)


# ----------------------------------------------------------------------------------------------
# convolve: bilinear, each output mode a window of the full convolution


def _window(in1, in2, mode, axes=None):
    """The shape of the full convolution of ``in1`` and ``in2`` along ``axes`` (None: all;
    along the others the shapes broadcast), and the slices of it that ``mode`` keeps, centred
    as SciPy centres them."""
    shapes = list(zip(np.shape(in1), np.shape(in2), strict=True))
    along = range(len(shapes)) if axes is None else {
        a % len(shapes) for a in ((axes,) if np.ndim(axes) == 0 else axes)}
    full = tuple(m + n - 1 if i in along else max(m, n) for i, (m, n) in enumerate(shapes))
    if mode == "full":
        kept = full
    elif mode == "same":
        kept = tuple(m if i in along else f for i, ((m, _), f) in enumerate(zip(shapes, full)))
    elif mode == "valid":
        kept = tuple(abs(m - n) + 1 if i in along else f
                     for i, ((m, n), f) in enumerate(zip(shapes, full)))
    else:
        raise UnsupportedOperationError(f"scipy.signal.convolve(mode={mode!r}): a mode mutad "
                                        "does not know; use 'full', 'same' or 'valid'.")
    return full, tuple(slice((f - k) // 2, (f - k) // 2 + k) for f, k in zip(full, kept))


def _convolution_method(in1, in2, mode, method):
    """The method SciPy's ``convolve(in1, in2, mode, method)`` runs (and ``correlate``'s, which
    convolves with ``in2`` reversed): ``method`` itself unless ``"auto"``, then SciPy's choice
    on the operands' values, swapped as SciPy swaps them."""
    if method != "auto":
        return method
    volume, kernel = (_held(x) for x in (in1, in2))
    if not all(isinstance(v, np.ndarray) for v in (volume, kernel)):
        return method  # a device's arrays: SciPy's choice there, its value's and derivative's
    if np.ndim(volume) == 0 or np.ndim(volume) != np.ndim(kernel):
        return "direct"  # SciPy's product of scalars (or its error)
    if _signaltools._inputs_swap_needed(mode, np.shape(volume), np.shape(kernel)):
        volume, kernel = kernel, volume
    return _signal.choose_conv_method(volume, kernel, mode=mode)


def _held(x):
    """The value ``x`` holds, for SciPy's choice of method: of a float, its shape and dtype
    decide (a replay keeps them); of an integer, its values too (a replay is refused)."""
    value = x
    while isinstance(value, Tracer):
        value = value.value
    if not hasattr(value, "dtype"):  # a Python number
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iub":
        return settled(x, "scipy.signal.convolve(method='auto') of integers")
    return value


def _as_arrays(*operands):
    """The operands, an array of a subclass (a caller's, as mutad marks it) as the plain array
    it views; any other (traced by an enclosing differentiation) as it is."""
    return [np.asarray(x) if isinstance(x, np.ndarray) else x for x in operands]


def _convolution_product(convolution, in1, in2, mode, setting, takes_axes):
    """``product(a, b, mode)``: ``convolution(a, b, mode)`` by the method the call of
    ``in1`` and ``in2`` runs. The direct method's sums of products are exact, so each of its
    products is a ``times`` (``product_times``): a zero of a cotangent or tangent beside an
    infinity or a NaN of the other operand contributes zero, and the Jacobian is the other
    operand's, with no infinity of the differentiated one in it. The FFT's every output mixes
    every input along the convolved axes: a term is NaN along them where a factor has a
    non-finite element and the other is not zero there (as SciPy's value is of a non-finite
    operand), where the FFTs of the two modes' different lengths would scatter infinities and
    NaNs differently."""
    method = None if takes_axes else _convolution_method(in1, in2, mode, setting)
    if method == "direct":
        return lambda a, b, mode: product_times(
            lambda u, v: convolution(u, v, mode, "direct"), *_as_arrays(a, b))
    axes = setting if takes_axes else None
    setting = method or setting

    def fft_product(a, b, mode):
        a, b = _as_arrays(a, b)
        y = convolution(a, b, mode, setting)
        if not all(type(x) is np.ndarray for x in (a, b)):
            return y  # (traced by an enclosing differentiation: SciPy's)
        along = None if axes is None else tuple(
            np.atleast_1d(axes) % max(np.ndim(y), 1))
        infinite, nonzero = ([~np.isfinite(x).all(axis=along, keepdims=True) for x in (a, b)],
                             [(x != 0).any(axis=along, keepdims=True) for x in (a, b)])
        if not (infinite[0].any() or infinite[1].any()):
            return y
        # (SciPy's FFT spreads a non-finite factor's NaN over a zero other one's slices too)
        mixed = (infinite[0] & nonzero[1]) | (infinite[1] & nonzero[0])
        zero = ~(nonzero[0] & nonzero[1])
        return np.where(mixed, np.nan, np.where(zero, 0, y)).astype(y.dtype)

    return fft_product


def _convolution_rules(convolution, default, takes_axes):
    """The rules of ``convolution(in1, in2, mode, setting)``, bilinear: ``convolve`` (the
    setting its method) and ``fftconvolve`` (its axes: ``takes_axes``); ``default`` is the
    setting's default."""
    # No conjugate in a convolution: the real formulas hold for complex values.
    convolution.complex_values = HOLOMORPHIC

    @convolution.rule
    def rule(in1, in2, mode="full", setting=default):
        in1, in2 = array_argument(in1), array_argument(in2)
        axes = setting if takes_axes else None
        # The wrapper, not SciPy's own, so that nested reverse mode differentiates the pullback.
        y = convolution(in1, in2, mode, setting)
        full, window = _window(in1, in2, mode, axes)
        product = _convolution_product(convolution, in1, in2, mode, setting, takes_axes)

        def back(dy):
            if np.size(in1) == 0 or np.size(in2) == 0:  # "same" of an empty in1: y is empty
                return (np.zeros_like(dy, shape=np.shape(in1)),
                        np.zeros_like(dy, shape=np.shape(in2)))
            # y is a window of the full convolution; each input's cotangent is the full
            # cotangent correlated with the other input: a valid convolution with it flipped
            # along the convolved axes (summed where the input was broadcast along the others).
            dfull = np.zeros_like(dy, shape=full)
            dfull[window] = dy
            return (unbroadcast(product(dfull, np.flip(in2, axes), "valid"), np.shape(in1)),
                    unbroadcast(product(dfull, np.flip(in1, axes), "valid"), np.shape(in2)))

        return y, back

    @convolution.jvp_rule
    def jvp(tangents, in1, in2, mode="full", setting=default):
        d1, d2 = map(array_tangent, (in1, in2), (tuple(tangents) + (None, None))[:2])
        in1, in2 = array_argument(in1), array_argument(in2)
        _window(in1, in2, mode, setting if takes_axes else None)
        product = _convolution_product(convolution, in1, in2, mode, setting, takes_axes)
        parts = [product(d, other, mode) if first else product(other, d, mode)
                 for d, other, first in ((d1, in2, True), (d2, in1, False)) if d is not None]
        return (convolution(in1, in2, mode, setting),
                functools.reduce(np.add, parts) if parts else None)


_convolution_rules(convolve, "auto", takes_axes=False)
_convolution_rules(fftconvolve, None, takes_axes=True)


# ----------------------------------------------------------------------------------------------
# correlate: convolve with the second operand reversed

correlate = scipy_adjoint(_signal.correlate)


@correlate.rule
def _correlate_rule(in1, in2, mode="full", method="auto"):
    in1, in2 = array_argument(in1), array_argument(in2)
    # SciPy's correlation is the convolution with in2 reversed along every axis (its fft
    # method computes it so; the direct one the same sums), so the cotangents are the
    # convolution's, in2's reversed back.
    y = correlate(in1, in2, mode, method)
    full, window = _window(in1, in2, mode)
    product = _convolution_product(convolve, in1, in2, mode, method, takes_axes=False)

    def back(dy):
        if np.size(in1) == 0 or np.size(in2) == 0:
            return (np.zeros_like(dy, shape=np.shape(in1)),
                    np.zeros_like(dy, shape=np.shape(in2)))
        dfull = np.zeros_like(dy, shape=full)
        dfull[window] = dy
        return (unbroadcast(product(dfull, in2, "valid"), np.shape(in1)),
                unbroadcast(np.flip(product(dfull, np.flip(in1), "valid")), np.shape(in2)))

    return y, back


@correlate.jvp_rule
def _correlate_jvp(tangents, in1, in2, mode="full", method="auto"):
    d1, d2 = map(array_tangent, (in1, in2), (tuple(tangents) + (None, None))[:2])
    in1, in2 = array_argument(in1), array_argument(in2)
    _window(in1, in2, mode)
    product = _convolution_product(correlate, in1, in2, mode, method, takes_axes=False)
    parts = [product(d1, in2, mode)] if d1 is not None else []
    if d2 is not None:
        parts.append(product(in1, d2, mode))
    return correlate(in1, in2, mode, method), functools.reduce(np.add, parts) if parts else None


# ----------------------------------------------------------------------------------------------
# convolve2d, correlate2d: each output a sum of in2's taps times elements of in1 (or fillvalue)

convolve2d = scipy_adjoint(_signal.convolve2d)
correlate2d = scipy_adjoint(_signal.correlate2d)


@functools.lru_cache(maxsize=256)
def _taps(function, length, size, mode, boundary):
    """Along one axis of ``function(in1, in2, mode, boundary)`` (SciPy's ``convolve2d`` or
    ``correlate2d``), for output i and tap k of in2: the index of the element of in1 that tap
    multiplies, -1 where it multiplies the fillvalue, -2 where it multiplies nothing (in
    "valid" mode, where in2 is the longer). Asked of SciPy: the function of the indices
    (counted from 1) with each unit tap reads them off, so every boundary, mode and the swap of
    inputs SciPy makes are SciPy's (read-only, as it is cached)."""
    indices = np.arange(1.0, length + 1).reshape(-1, 1)
    columns = []
    for k in range(size):
        unit = np.zeros((size, 1))
        unit[k, 0] = 1.0
        columns.append(function(indices, unit, mode, boundary, -1.0)[:, 0])
    read = np.stack(columns, axis=1).astype(np.intp)
    taps = np.where(read > 0, read - 1, np.where(read == 0, -2, -1))
    taps.flags.writeable = False
    return taps


def _sources(function, in1, in2, mode, boundary):
    """For every output (i, j) and tap (k, l): the flat index into in1 of the element the tap
    multiplies, -1 for the fillvalue, -2 for nothing (the extension is per axis, as SciPy's)."""
    rows, columns = (_taps(function, n, k, mode, boundary)
                     for n, k in zip(np.shape(in1), np.shape(in2), strict=True))
    rows, columns = rows[:, None, :, None], columns[None, :, None, :]
    return np.where((rows == -2) | (columns == -2), -2,
                    np.where((rows == -1) | (columns == -1), -1, rows * np.shape(in1)[1] + columns))


def _two_dimensional_rules(function):
    """The rules of ``convolve2d`` or ``correlate2d``: y[i, j] = Σ_kl in2[k, l] x̃[i, j, k, l],
    x̃ gathering in1 (or the fillvalue) as SciPy does; linear in (in1, fillvalue) jointly and
    in in2."""
    original = function.fn

    @function.rule
    def rule(in1, in2, mode="full", boundary="fill", fillvalue=0):
        y = function(in1, in2, mode, boundary, fillvalue)
        sources = _sources(original, in1, in2, mode, boundary)
        if not (np.ndim(in1) == np.ndim(in2) == 2) or np.ndim(fillvalue) != 0:
            raise UnsupportedOperationError(
                f"scipy.signal.{original.__name__} of arrays that are not 2-d or a fillvalue "
                "that is not a scalar.")

        def back(dy):
            spread = dy[:, :, None, None] * in2  # each output's cotangent times each tap
            din1 = gather_cotangent(spread, in1, lambda flat: sources)
            gathered = np.where(sources >= 0, np.ravel(in1)[np.maximum(sources, 0)],
                                np.where(sources == -1, fillvalue, 0.0))
            din2 = np.tensordot(dy, gathered, axes=2)
            # (SciPy reads the fillvalue with boundary="fill" alone: elsewhere its derivative is 0)
            dfill = np.sum(np.where(sources == -1, spread, 0.0)) if boundary == "fill" else 0.0
            return din1, din2, None, None, dfill

        return y, back

    @function.jvp_rule
    def jvp(tangents, in1, in2, mode="full", boundary="fill", fillvalue=0):
        d1, d2, _, _, dfill = map(array_tangent, (in1, in2, mode, boundary, fillvalue),
                                  (tuple(tangents) + (None,) * 5)[:5])
        parts = []
        if d1 is not None or dfill is not None:
            parts.append(function(np.zeros_like(in1, dtype=float) if d1 is None else d1, in2,
                                  mode, boundary, 0.0 if dfill is None else dfill))
        if d2 is not None:
            parts.append(function(in1, d2, mode, boundary, fillvalue))
        return (function(in1, in2, mode, boundary, fillvalue),
                functools.reduce(np.add, parts) if parts else None)


_two_dimensional_rules(convolve2d)
_two_dimensional_rules(correlate2d)


# ----------------------------------------------------------------------------------------------
# sosfilt: a cascade of second-order lfilter sections

sosfilt = scipy_adjoint(_signal.sosfilt)


def _section(sos, s):
    """Section ``s``'s numerator and denominator."""
    return sos[s, :3], sos[s, 3:]


@sosfilt.rule
def _sosfilt_rule(sos, x, axis=-1, zi=None):
    # The value is SciPy's own; the derivative is that of the cascade of lfilter sections it
    # computes (each section's a[0] is 1), through each section's lfilter rule in turn.
    result = sosfilt(sos, x, axis, zi)
    backs = []
    for s in range(np.shape(sos)[0]):
        section, back = _lfilter_rule(*_section(sos, s), x, axis, None if zi is None else zi[s])
        backs.append(back)
        x = section if zi is None else section[0]

    def back(dresult):
        dy = dresult if zi is None else dresult[0]
        rows, dzi = [None] * len(backs), [None] * len(backs)
        for s in reversed(range(len(backs))):
            db, da, dy, _, dzi[s] = backs[s](dy if zi is None else (dy, dresult[1][s]))
            rows[s] = np.concatenate([db, da])
        return np.stack(rows), dy, None, None if zi is None else np.stack(dzi)

    return result, back


@sosfilt.jvp_rule
def _sosfilt_jvp(tangents, sos, x, axis=-1, zi=None):
    # Section by section, lfilter's forward rule carrying the tangent of each one's output on
    # to the next as its input's.
    dsos, dx, _, dzi = map(array_tangent, (sos, x, axis, zi),
                           (tuple(tangents) + (None,) * 4)[:4])
    sos, x, zi = map(array_argument, (sos, x, zi))
    result = sosfilt(sos, x, axis, zi)
    dzf = []
    for s in range(np.shape(sos)[0]):
        coefficients = _section(sos, s)
        tangents_s = ((None, None) if dsos is None else _section(dsos, s)) + (
            dx, None, None if dzi is None else dzi[s])
        section, dsection = _lfilter_jvp(tangents_s, *coefficients, x, axis,
                                         None if zi is None else zi[s])
        x = section if zi is None else section[0]
        dx = dsection if zi is None or dsection is None else dsection[0]
        dzf.append(None if zi is None or dsection is None else dsection[1])
    if zi is None or dx is None:
        return result, dx
    return result, (dx, np.stack([np.zeros_like(z) if d is None else d
                                  for d, z in zip(dzf, result[1])]))


# ----------------------------------------------------------------------------------------------
# Linear time-invariant systems: SciPy's conversions and simulations, step by step, on systems
# of differentiated coefficients; lsim's zero-order-hold or linear steps, each a product with
# matrix exponentials


def _followed(value):
    """Whether a differentiation follows ``value`` (a traced array that is not a constant),
    inside lists and tuples too."""
    if type(value) in (list, tuple):
        return any(_followed(item) for item in value)
    return isinstance(value, Tracer) and value.plain_value() is None


def _traced_among(*values):
    return innermost(values) is not None


def _refuse_followed(value, what, instead):
    if _followed(value):
        raise UnsupportedOperationError(
            f"scipy.signal: mutad does not differentiate {what}, and it depends on the "
            f"differentiated arguments. {instead}")


def _poly(roots):
    """SciPy's ``poly`` (signal/_polyutils.py) of the 1-d ``roots``, step by step: the
    coefficients of the monic polynomial with those roots, the real part where the roots
    come in conjugate pairs."""
    roots = np.atleast_1d(array_argument(roots))
    if np.shape(roots)[0] == 0:
        return np.asarray(1.0, dtype=np.real(np.zeros(0, dtype=roots.dtype)).dtype)
    a = np.ones((1,), dtype=roots.dtype)
    one = np.ones_like(roots[0])
    for zero in roots:
        a = np.convolve(a, np.stack((one, -zero)), mode="full")
    if np.iscomplexobj(a):
        imaginary = np.imag(np.asarray(stop_gradient(roots), dtype=np.complex128))
        if np.all(np.sort(imaginary) == np.sort(-imaginary)):
            a = np.real(a) * 1.0
    return a


def _characteristic(M):
    """The coefficients of det(sI - M), highest first, by Faddeev and LeVerrier's recursion:
    sums and products of M, whose derivatives hold at repeated eigenvalues too (the
    coefficients are polynomials in M's entries). Only derivatives are taken from it: the
    values are SciPy's (its ``poly`` of the eigenvalues)."""
    n = np.shape(M)[0]
    identity = np.eye(n)
    coefficients, power = [np.ones((), dtype=float)], identity
    for k in range(1, n + 1):
        product = M @ power
        c = -np.trace(product) / k
        coefficients.append(c)
        power = product + c * identity
    return stacked(coefficients)


def _scipys_value(value, composition, name):
    """SciPy's ``value`` with the derivatives of ``composition`` (``scipys_value``), refused
    where SciPy's value is complex and the composition's real."""
    if np.iscomplexobj(value) and not np.iscomplexobj(composition):
        raise UnsupportedOperationError(
            f"{name}: SciPy's result is complex (the eigenvalues of the state matrix did not "
            "come in exact conjugate pairs), and mutad differentiates real coefficients only.")
    return scipys_value(value, composition)


def _normalize(b, a):
    """SciPy's ``normalize`` (signal/_filter_design.py), step by step: the denominator's
    leading zeros trimmed, both divided by its first coefficient, the numerator's leading
    columns of magnitude at most 1e-14 trimmed (with SciPy's warning)."""
    den = np.atleast_1d(array_argument(a))
    num = np.atleast_2d(array_argument(b))
    if den.ndim != 1:
        raise ValueError("Denominator polynomial must be rank-1 array.")
    if num.ndim > 2:
        raise ValueError("Numerator polynomial must be rank-1 or rank-2 array.")
    if np.all(den == 0):
        raise ValueError("Denominator must have at least on nonzero element.")
    den = den[int(np.argmax(den != 0)):]
    num, den = num / den[0], den / den[0]
    leading_zeros = 0
    for j in range(np.shape(num)[-1]):
        if np.all(np.abs(num[:, j]) <= 1e-14):
            leading_zeros += 1
        else:
            break
    if leading_zeros > 0:
        warnings.warn("Badly conditioned filter coefficients (numerator): the results may be "
                      "meaningless", _filter_design.BadCoefficients, stacklevel=3)
        if leading_zeros == np.shape(num)[1]:
            leading_zeros -= 1
        num = num[:, leading_zeros:]
    if np.shape(num)[0] == 1:
        num = num[0, :]
    return num, den


def _tf2ss(num, den):
    """SciPy's ``tf2ss`` (signal/_lti_conversion.py), step by step: the controller canonical
    form, whose entries are the normalized coefficients."""
    num, den = _normalize(num, den)
    if np.ndim(num) == 1:
        num = num[None]
    M, K = np.shape(num)[1], np.shape(den)[0]
    if M > K:
        raise ValueError("Improper transfer function. `num` is longer than `den`.")
    if M == 0 or K == 0:
        return (np.array([], float), np.array([], float), np.array([], float),
                np.array([], float))
    num = np.concatenate((np.zeros((np.shape(num)[0], K - M), dtype=num.dtype), num), axis=1)
    D = np.atleast_2d(num[:, 0])
    if K == 1:
        D = np.reshape(D, np.shape(num))
        return np.zeros((1, 1)), np.zeros((1, np.shape(D)[1])), np.zeros((np.shape(D)[0], 1)), D
    frow = -(den[1:][None])
    A = np.concatenate((frow, np.eye(K - 2, K - 1)), axis=0)
    B = np.eye(K - 1, 1)
    C = num[:, 1:] - np.outer(num[:, 0], den[1:])
    D = np.reshape(D, (np.shape(C)[0], np.shape(B)[1]))
    return A, B, C, D


def _abcd(A, B, C, D):
    """SciPy's ``abcd_normalize``: each matrix 2-d, a missing or empty one zeros of the
    system's dimensions (asked of SciPy, on the plain numbers)."""
    shapes = _lti_conversion.abcd_normalize(*(
        None if m is None else stop_gradient(array_argument(m)) for m in (A, B, C, D)))
    return tuple(plain if m is None or np.size(plain) == 0 or np.size(m) == 0
                 else np.reshape(np.atleast_2d(array_argument(m)), np.shape(plain))
                 for m, plain in zip((A, B, C, D), shapes))


_ss2tf_num = Value(lambda A, B, C, D, input: _lti_conversion.ss2tf(A, B, C, D, input)[0],
                   "scipy.signal.ss2tf")
_ss2tf_den = Value(lambda A, B, C, D, input: _lti_conversion.ss2tf(A, B, C, D, input)[1],
                   "scipy.signal.ss2tf")


def _ss2tf(A, B, C, D, input=0):
    """``ss2tf``: SciPy's values (its polynomials of the eigenvalues of A and of A - B C_k),
    with the derivatives of the same characteristic polynomials by Faddeev and LeVerrier."""
    A, B, C, D = _abcd(A, B, C, D)
    nout, nin = np.shape(D)
    if input >= nin:
        raise ValueError("System does not have the input specified.")
    num = _ss2tf_num(A, B, C, D, input)
    den = _ss2tf_den(A, B, C, D, input)
    B, D = B[:, input:input + 1], D[:, input:input + 1]
    den_composition = _characteristic(A) if np.size(A) else None
    if np.size(B) == 0 and np.size(C) == 0:
        return num if np.size(D) == 0 else np.ravel(D), den
    den = _scipys_value(den, den_composition, "scipy.signal.ss2tf")
    rows = [_characteristic(A - B @ np.atleast_2d(C[k, :])) + (D[k] - 1) * den_composition
            for k in range(nout)]
    return _scipys_value(num, stacked(rows), "scipy.signal.ss2tf"), den


def _zpk2tf(z, p, k):
    """SciPy's ``zpk2tf``, step by step: the gain times the polynomial of the zeros (of each
    row of a 2-d ``z``), over the polynomial of the poles."""
    z, p = array_argument(z), array_argument(p)
    k = array_argument(k) * 1.0 if np.issubdtype(np.result_type(k), np.integer) else \
        array_argument(k)
    z, k = np.atleast_1d(z), np.atleast_1d(k)
    if np.ndim(z) > 1:
        if np.shape(k)[0] == 1:
            k = [k[0]] * np.shape(z)[0]
        b = stacked([k[i] * _poly(z[i, ...]) for i in range(np.shape(z)[0])])
    else:
        b = np.multiply(k, _poly(z))
    return b, np.atleast_1d(_poly(p))


class _LTIClass(type):
    """The type of a stand-in for one of SciPy's system classes: calling it constructs
    (SciPy's object from plain values, a :class:`_System` from differentiated ones), and
    otherwise it is SciPy's class (``isinstance`` included)."""

    def __call__(cls, *args, **kwargs):
        return cls.construct(*args, **kwargs)

    def __instancecheck__(cls, instance):
        if isinstance(instance, _System):
            return instance.is_a(cls.scipy)
        return isinstance(instance, cls.scipy)

    def __subclasscheck__(cls, subclass):
        return issubclass(subclass, cls.scipy)

    def __getattr__(cls, name):
        return getattr(cls.scipy, name)


_KINDS = {"tf": _ltisys.TransferFunction, "zpk": _ltisys.ZerosPolesGain, "ss": _ltisys.StateSpace}


class _System:
    """A linear time-invariant system of differentiated coefficients: what ``lti``, ``dlti``,
    ``TransferFunction``, ``ZerosPolesGain`` and ``StateSpace`` return, while a
    differentiation runs, given a value it follows. It holds SciPy's representation (the
    normalized ``num`` and ``den``; ``zeros``, ``poles``, ``gain``; or ``A``, ``B``, ``C``,
    ``D``) as the differentiation's arrays, converts between them with SciPy's steps
    (``to_tf``, ``to_ss``), and simulates (``output``, ``step``, ``impulse`` of a continuous
    system, ``output`` of a discrete one), and gives its frequency responses (``freqresp``,
    ``bode``); its other attributes are refused by name."""

    def __init__(self, kind, arrays, dt):
        self._kind, self._arrays, self.dt = kind, tuple(arrays), dt

    def is_a(self, cls):
        continuous = self.dt is None
        return (cls in (_ltisys.lti, _ltisys.dlti) and (cls is _ltisys.lti) == continuous) or (
            cls is _KINDS[self._kind]) or cls is _ltisys.LinearTimeInvariant or (
            issubclass(_KINDS[self._kind], cls) and issubclass(
                cls, _ltisys.lti if continuous else _ltisys.dlti))

    @property
    def _dt_dict(self):
        return {} if self.dt is None else {"dt": self.dt}

    def to_tf(self):
        """The transfer function (SciPy's ``to_tf``: normalized)."""
        if self._kind == "tf":
            return _System("tf", self._arrays, self.dt)
        converted = _zpk2tf(*self._arrays) if self._kind == "zpk" else _ss2tf(*self._arrays)
        return _System("tf", _normalize(*converted), self.dt)

    def to_ss(self):
        """The state-space form (SciPy's ``to_ss``: the controller canonical form)."""
        if self._kind == "ss":
            return _System("ss", self._arrays, self.dt)
        tf = self._arrays if self._kind == "tf" else _zpk2tf(*self._arrays)
        return _System("ss", _abcd(*_tf2ss(*tf)), self.dt)

    def to_zpk(self):
        if self._kind == "zpk":
            return _System("zpk", self._arrays, self.dt)
        return self.__getattr__("to_zpk")

    def _as_ss(self):
        return self if self._kind == "ss" else self.to_ss()

    def _as_tf(self):
        return self if self._kind == "tf" else self.to_tf()

    def _part(self, kind, index):
        if self._kind == kind:
            return self._arrays[index]
        if kind == "zpk":
            return self.__getattr__(("zeros", "poles", "gain")[index])
        return (self.to_tf() if kind == "tf" else self.to_ss())._arrays[index]

    num = property(lambda self: self._part("tf", 0))
    den = property(lambda self: self._part("tf", 1))
    zeros = property(lambda self: self._part("zpk", 0))
    poles = property(lambda self: self._part("zpk", 1))
    gain = property(lambda self: self._part("zpk", 2))
    A = property(lambda self: self._part("ss", 0))
    B = property(lambda self: self._part("ss", 1))
    C = property(lambda self: self._part("ss", 2))
    D = property(lambda self: self._part("ss", 3))

    def output(self, U, T=None, X0=None):
        """``lsim`` of a continuous system, ``dlsim`` of a discrete one."""
        if self.dt is None:
            return lsim(self, U, T, X0=X0)
        return dlsim(self, U, t=T, x0=X0)

    def step(self, X0=None, T=None, N=None):
        """The step response (continuous systems)."""
        if self.dt is not None:
            return self.__getattr__("step")
        return step(self, X0=X0, T=T, N=N)

    def to_discrete(self, dt, method="zoh", alpha=None):
        """The discretized system (``cont2discrete``; a transfer function or a state space)."""
        if self.dt is not None or self._kind == "zpk":
            return self.__getattr__("to_discrete")
        converted = cont2discrete(self._arrays, dt, method=method, alpha=alpha)
        if self._kind == "tf":
            return _System("tf", _normalize(*converted[:-1]), dt)
        return _System("ss", _abcd(*converted[:-1]), dt)

    def freqresp(self, w=None, n=10000, whole=False):
        """The frequency response (``freqresp``; ``dfreqresp`` of a discrete system)."""
        if self.dt is None:
            return freqresp(self, w=w, n=n)
        return dfreqresp(self, w=w, n=n, whole=whole)

    def bode(self, w=None, n=100):
        """The Bode magnitude and phase (``bode``; ``dbode`` of a discrete system)."""
        return bode(self, w=w, n=n) if self.dt is None else dbode(self, w=w, n=n)

    def impulse(self, X0=None, T=None, N=None):
        """The impulse response (continuous systems)."""
        if self.dt is not None:
            return self.__getattr__("impulse")
        return impulse(self, X0=X0, T=T, N=N)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.signal.{_KINDS[self._kind].__name__}(...).{name}: this system was built "
            "from differentiated coefficients, and mutad differentiates its coefficients "
            "(num, den, A, B, C, D, zeros, poles, gain as given), its conversions to_tf and "
            "to_ss, its simulations (output, step, impulse; lsim, dlsim) and its frequency "
            "responses (freqresp, bode) only. Build it from plain values for the others (a "
            "conversion to zeros and poles), or compute the quantity from the coefficients "
            "with NumPy.")


def _system_from(kind, system, dt):
    """The :class:`_System` of ``kind`` made from ``system``'s arguments, as SciPy's
    constructors make theirs (a transfer function normalized, a state space's matrices 2-d)."""
    if kind == "tf":
        if len(system) != 2:
            raise ValueError("Needs 2 arguments: numerator and denominator.")
        return _System("tf", _normalize(*system), dt)
    if kind == "zpk":
        if len(system) != 3:
            raise ValueError("Needs 3 arguments: zeros, poles and gain.")
        z, p, k = system
        return _System("zpk", (np.atleast_1d(array_argument(z)),
                               np.atleast_1d(array_argument(p)), array_argument(k)), dt)
    if len(system) != 4:
        raise ValueError("Needs 4 arguments: A, B, C and D.")
    return _System("ss", _abcd(*system), dt)


def _lti_class(scipy_class, make):
    """Route SciPy's ``scipy_class``: its stand-in makes a :class:`_System` when a value a
    differentiation runs on is among the arguments (``make(system, dt)``), else SciPy's."""
    def construct(*system, **kwargs):
        if not _traced_among(*system, *kwargs.values()) and not (
                len(system) == 1 and isinstance(system[0], _System)):
            return scipy_class(*system, **kwargs)
        return make(system, kwargs)

    stand_in = _LTIClass(scipy_class.__name__, (), {
        "construct": staticmethod(construct), "scipy": scipy_class,
        "__doc__": f"``scipy.signal.{scipy_class.__name__}``, of differentiated coefficients "
                   "too (see the module).", "__module__": __name__,
        "__qualname__": scipy_class.__qualname__})
    return defroute(scipy_class, stand_in)


def _by_count(system, dt):
    if len(system) not in (2, 3, 4):
        raise ValueError("`system` needs to be an instance of `lti` or have 2, 3 or 4 "
                         "arguments.")
    return _system_from({2: "tf", 3: "zpk", 4: "ss"}[len(system)], system, dt)


def _of_kind(kind):
    def make(system, kwargs):
        dt = kwargs.get("dt")
        if len(system) == 1 and isinstance(system[0], _System):
            converted = {"tf": system[0].to_tf, "ss": system[0].to_ss,
                         "zpk": system[0].to_zpk}[kind]()
            return converted
        return _system_from(kind, system, dt)
    return make


lti = _lti_class(_signal.lti, lambda system, kwargs: _by_count(system, None))
dlti = _lti_class(_signal.dlti, lambda system, kwargs: _by_count(
    system, kwargs.get("dt", True)))
TransferFunction = _lti_class(_signal.TransferFunction, _of_kind("tf"))
ZerosPolesGain = _lti_class(_signal.ZerosPolesGain, _of_kind("zpk"))
StateSpace = _lti_class(_signal.StateSpace, _of_kind("ss"))


class _SystemStandIn(StandIn):
    """A :class:`StandIn` that takes a :class:`_System` argument (whose arrays ``innermost``
    does not look into) for a traced one."""

    def __call__(self, *args, **kwargs):
        if any(isinstance(a, _System) for a in (*args, *kwargs.values())):
            return self.fn(*args, **kwargs)
        return super().__call__(*args, **kwargs)


def _system_stand_in(original):
    return lambda fn: _SystemStandIn(original, fn)


@stands_in_for(_signal.tf2ss)
def tf2ss(num, den):
    """SciPy's steps on differentiated coefficients (see the module)."""
    return _tf2ss(num, den)


@stands_in_for(_signal.ss2tf)
def ss2tf(A, B, C, D, input=0):
    """SciPy's values, differentiated through the characteristic polynomials."""
    return _ss2tf(A, B, C, D, input)


# IIR filter design of differentiated critical frequencies: SciPy's steps (iirfilter, its
# frequency transformations and bilinear transform) on the traced Wn, the analog prototype
# (a function of the order and ripples alone) SciPy's own.


def _iirfilter(N, Wn, rp=None, rs=None, btype="band", analog=False, ftype="butter",
               output="ba", fs=None):
    name = "scipy.signal.iirfilter"
    Wn = array_argument(Wn) * 1.0
    fs = _filter_design._validate_fs(fs, allow_none=True)
    ftype, btype, output = (x.lower() for x in (ftype, btype, output))
    if fs is not None:
        if analog:
            raise ValueError("fs cannot be specified for an analog filter")
        Wn = Wn / (fs / 2)
    plain = np.asarray(stop_gradient(Wn))
    if np.any(plain <= 0):
        raise ValueError("filter critical frequencies must be greater than 0")
    if plain.size > 1 and not plain[0] < plain[1]:
        raise ValueError("Wn[0] must be less than Wn[1]")
    btype = _filter_design.band_dict.get(btype, btype)
    if btype not in ("lowpass", "highpass", "bandpass") or output not in ("ba", "zpk", "sos"):
        raise UnsupportedOperationError(
            f"{name}(btype={btype!r}, ftype={ftype!r}, output={output!r}) of differentiated "
            "critical frequencies: mutad follows the lowpass, highpass and bandpass designs "
            "of butter, cheby1, cheby2, ellip and bessel with output='ba', 'zpk' or 'sos'.")
    # the analog lowpass prototype, SciPy's: its design at the frequency 1 (lp2lp_zpk by 1.0);
    # of a differentiated ripple or attenuation, SciPy's own code followed (cheb1ap, ellipap)
    z, p, k = following_scipys_code(_filter_design.iirfilter, (N, 1.0, rp, rs), dict(
        btype="lowpass", analog=True, ftype=ftype, output="zpk"))
    degree = _filter_design._relative_degree(z, p)
    if not analog:
        if np.any(plain >= 1):
            if fs is not None:
                raise ValueError("Digital filter critical frequencies must "
                                 f"be 0 < Wn < fs/2 (fs={fs} -> fs/2={fs/2})")
            raise ValueError("Digital filter critical frequencies must be 0 < Wn < 1")
        fs = 2.0
        warped = 2 * fs * np.tan(np.pi * Wn / fs)
    else:
        warped = Wn
    if btype in ("lowpass", "highpass"):
        if plain.size != 1:
            raise ValueError("Must specify a single critical frequency Wn for lowpass or "
                             "highpass filter")
        wo = np.reshape(warped, ())
        if btype == "lowpass":  # lp2lp_zpk
            z, p, k = wo * z, wo * p, k * wo ** degree
        else:  # lp2hp_zpk
            z, p, k = (np.concatenate((wo / z, np.zeros(degree))), wo / p,
                       k * np.real(np.prod(-z) / np.prod(-p)))
    else:  # lp2bp_zpk
        bw = warped[1] - warped[0]
        wo = np.sqrt(warped[0] * warped[1])
        z_lp = (z * bw / 2).astype(np.complex128)
        p_lp = (p * bw / 2).astype(np.complex128)
        z = np.concatenate((z_lp + np.sqrt(z_lp ** 2 - wo ** 2),
                            z_lp - np.sqrt(z_lp ** 2 - wo ** 2), np.zeros(degree)))
        p = np.concatenate((p_lp + np.sqrt(p_lp ** 2 - wo ** 2),
                            p_lp - np.sqrt(p_lp ** 2 - wo ** 2)))
        k = k * bw ** degree
    if not analog:  # bilinear_zpk
        degree = _filter_design._relative_degree(z, p)
        fs2 = 2.0 * fs
        k = k * np.real(np.prod(fs2 - z) / np.prod(fs2 - p))
        z = np.concatenate(((fs2 + z) / (fs2 - z), -np.ones(degree)))
        p = (fs2 + p) / (fs2 - p)
    if output == "sos":
        return zpk2sos(z, p, k, analog=analog)
    return (z, p, k) if output == "zpk" else _zpk2tf(z, p, k)


iirfilter = stands_in_for(_signal.iirfilter)(_iirfilter)


@stands_in_for(_signal.butter)
def butter(N, Wn, btype="low", analog=False, output="ba", fs=None):
    return _iirfilter(N, Wn, btype=btype, analog=analog, output=output, ftype="butter", fs=fs)


@stands_in_for(_signal.cheby1)
def cheby1(N, rp, Wn, btype="low", analog=False, output="ba", fs=None):
    return _iirfilter(N, Wn, rp=rp, btype=btype, analog=analog, output=output, ftype="cheby1",
                      fs=fs)


@stands_in_for(_signal.cheby2)
def cheby2(N, rs, Wn, btype="low", analog=False, output="ba", fs=None):
    return _iirfilter(N, Wn, rs=rs, btype=btype, analog=analog, output=output, ftype="cheby2",
                      fs=fs)


@stands_in_for(_signal.ellip)
def ellip(N, rp, rs, Wn, btype="low", analog=False, output="ba", fs=None):
    return _iirfilter(N, Wn, rp=rp, rs=rs, btype=btype, analog=analog, output=output,
                      ftype="elliptic", fs=fs)


@stands_in_for(_signal.zpk2tf)
def zpk2tf(z, p, k):
    """SciPy's steps on differentiated zeros, poles and gain."""
    return _zpk2tf(z, p, k)


@stands_in_for(_signal.zpk2ss)
def zpk2ss(z, p, k):
    """SciPy's steps: ``tf2ss`` of ``zpk2tf``."""
    return _tf2ss(*_zpk2tf(z, p, k))


@stands_in_for(_signal.normalize)
def normalize(b, a):
    """SciPy's steps on differentiated coefficients."""
    return _normalize(b, a)


@stands_in_for(_signal.zpk2sos)
def zpk2sos(z, p, k, pairing=None, *, analog=False):
    """SciPy's sections. Of differentiated zeros, poles or gain (digital, ``pairing``
    'nearest' or 'keep_odd'): SciPy's values, with the derivatives of the same sections
    written from the zeros and poles SciPy paired, ``[k, -k(a + b), k ab, 1, -(c + d), cd]``
    (the gain in the first), the pairing (a decision on their values) read off SciPy's
    sections as the roots each one has."""
    if not _followed((z, p, k)):
        return _signal.zpk2sos(*settled((z, p, k), "scipy.signal.zpk2sos's arguments"),
                               pairing=pairing, analog=analog)
    if analog or pairing not in (None, "nearest", "keep_odd"):
        raise UnsupportedOperationError(
            "scipy.signal.zpk2sos(analog=True or pairing='minimal') of differentiated zeros, "
            "poles or gain: mutad follows the digital pairings 'nearest' and 'keep_odd'. "
            "Differentiate the transfer function instead: b, a = zpk2tf(z, p, k), filtered by "
            "lfilter(b, a, x).")
    plain = _signal.zpk2sos(*(np.asarray(stop_gradient(v)) for v in (z, p, k)),
                            pairing=pairing, analog=analog)
    count = 2 * len(plain)
    zeros, poles = ((np.concatenate((np.reshape(v, (-1,)) * (1 + 0j),
                                     np.zeros(count - np.size(v))))
                     if np.size(v) <= count else None) for v in (z, p))
    if zeros is None or poles is None:
        raise ValueError("more zeros or poles than the sections hold")
    taken_zeros, taken_poles = set(), set()  # each zero and pole is in one section
    sections = np.real(np.stack([np.stack(_paired(row[:3], zeros, taken_zeros)
                                          + _paired(row[3:], poles, taken_poles))
                                 for row in plain]))
    gain = np.concatenate((np.reshape(k, (1, 1)) * np.ones((1, 3)),
                           np.ones((len(plain) - 1, 3))))
    composition = np.concatenate((sections[:, :3] * gain, sections[:, 3:]), axis=1)
    if plain[0, 0] == 0 or not np.allclose(stop_gradient(composition), plain, rtol=1e-8,
                                           atol=1e-12 * np.abs(plain).max()):
        raise UnsupportedOperationError(
            "scipy.signal.zpk2sos of differentiated zeros, poles or gain: its sections could "
            "not be matched to the zeros and poles they pair (repeated or nearly equal ones). "
            "Differentiate the transfer function instead: b, a = zpk2tf(z, p, k).")
    return scipys_value(plain, composition)


def _paired(row, candidates, used):
    """The quadratic ``[1, -(a + b), ab]`` of the two of ``candidates`` (traced, complex) that
    are the roots of SciPy's section ``row`` (nearest in value, each taken once)."""
    roots = np.roots(row / row[0]) if row[0] != 0 else np.array([])
    plain = np.asarray(stop_gradient(candidates))
    chosen = []
    for r in list(roots) + [0.0] * (2 - len(roots)):
        distance = np.abs(plain - r)
        distance[list(used)] = np.inf
        j = int(np.argmin(distance))
        used.add(j)
        chosen.append(candidates[j])
    a, b = chosen
    return [np.ones((), dtype=complex), -(a + b), a * b]


@stands_in_for(_signal.tf2zpk)
def tf2zpk(b, a):
    """SciPy's steps on differentiated coefficients: ``normalize``, then the roots of the
    numerator and denominator (``np.roots``, an eigenvalue problem mutad differentiates) and
    the gain."""
    b, a = _normalize(b, a)
    b, a = b * 1.0, a * 1.0  # (SciPy's promotion to floating point)
    k = b[0]
    b = b / b[0]
    empty = lambda c: np.asarray([], dtype=c.dtype)  # noqa: E731 (SciPy's, of fewer than 2)
    return (np.roots(b) if np.shape(b)[0] >= 2 else empty(b),
            np.roots(a) if np.shape(a)[0] >= 2 else empty(a), k)


def _array_of(v):
    v = array_argument(v)
    return v if hasattr(v, "dtype") else np.asarray(v)


@stands_in_for(_signal.lfiltic)
def lfiltic(b, a, y, x=None):
    """SciPy's steps (signal/_signaltools.py) on differentiated coefficients and histories:
    the initial state of ``lfilter``'s transposed direct form."""
    a, b, y = np.atleast_1d(_array_of(a)), np.atleast_1d(_array_of(b)), _array_of(y)
    if np.ndim(a) > 1:
        raise ValueError("Filter coefficients `a` must be 1-D.")
    if np.ndim(b) > 1:
        raise ValueError("Filter coefficients `b` must be 1-D.")
    N, M = np.shape(a)[0] - 1, np.shape(b)[0] - 1
    K = max(M, N)
    if N < 0:
        raise ValueError("There must be at least one `a` coefficient.")
    dtypes = [b.dtype, a.dtype, y.dtype] + ([] if x is None else [_array_of(x).dtype])
    result_type = np.result_type(*dtypes)
    if result_type.kind in "bui":
        result_type = np.dtype(np.float64)
    if x is None:
        x = np.zeros(M, dtype=result_type)
    else:
        x = _array_of(x).astype(result_type)
        if np.size(x) < M:
            x = np.concatenate((x, np.zeros(M - np.size(x))))
    y = y.astype(result_type)
    if np.size(y) < N:
        y = np.concatenate((y, np.zeros(N - np.size(y))))
    # SciPy's zi[m] = Σ b[m+1:] x[:M-m], then zi[m] -= Σ a[m+1:] y[:N-m], from zeros
    zero = np.zeros((), dtype=result_type)
    zi = [np.sum(b[m + 1:] * x[:M - m], axis=0) if m < M else zero for m in range(K)]
    zi = [z - np.sum(a[m + 1:] * y[:N - m], axis=0) if m < N else z for m, z in enumerate(zi)]
    zi = stacked(zi) if K else np.zeros(0, dtype=result_type)
    first = np.asarray(stop_gradient(a[0]))
    if first != 1.0:
        if first == 0.0:
            raise ValueError("First `a` filter coefficient must be non-zero.")
        zi = zi / a[0]
    return zi


def _continuous(system, name):
    """The state-space matrices of a continuous ``system`` as SciPy's ``name`` reads them: an
    ``lti`` (SciPy's or a :class:`_System`) as it converts itself, a tuple through ``lti``."""
    if isinstance(system, _System):
        if system.dt is not None:
            raise AttributeError(f"{name} can only be used with continuous-time systems.")
        return system._as_ss()._arrays
    if isinstance(system, _ltisys.lti):
        ss = system._as_ss()
        return ss.A, ss.B, ss.C, ss.D
    if isinstance(system, _ltisys.dlti):
        raise AttributeError(f"{name} can only be used with continuous-time systems.")
    if not _traced_among(*system):
        ss = _ltisys.lti(*system)._as_ss()
        return ss.A, ss.B, ss.C, ss.D
    return _by_count(tuple(system), None)._as_ss()._arrays


@_system_stand_in(_signal.lsim)
def lsim(system, U, T, X0=None, interp=True):
    """SciPy's steps (signal/_ltisys.py) on a system of traced coefficients, traced inputs or
    initial state: the exponential of SciPy's block matrix (scipy.linalg.expm,
    differentiated), then each state row from the last."""
    A, B, C, D = (np.asarray(m) if not _traced_among(m) else m
                  for m in _continuous(system, "lsim"))
    T = np.atleast_1d(T)
    if len(T.shape) != 1:
        raise ValueError("T must be a rank-1 array.")
    n_states, n_inputs, n_steps = np.shape(A)[0], np.shape(B)[1], np.shape(T)[0]
    x0 = np.zeros(n_states) if X0 is None else X0 * 1.0
    if T[0] > 0:
        x0 = x0 @ linalg.expm(np.transpose(A) * T[0])
    elif T[0] < 0:
        raise ValueError("Initial time must be nonnegative")
    no_input = U is None or (isinstance(U, int | float) and U == 0.0) or not np.any(U)
    if n_steps == 1:
        yout = np.squeeze(x0[None] @ np.transpose(C))
        if not no_input:
            yout = yout + np.squeeze(U @ np.transpose(D))
        return T, yout, np.squeeze(x0[None])
    dt = T[1] - T[0]
    if not np.allclose(np.diff(T), dt):
        raise ValueError("Time steps are not equally spaced.")
    rows = [x0]
    if no_input:
        step = linalg.expm(np.transpose(A) * dt)
        for _ in range(1, n_steps):
            rows.append(rows[-1] @ step)
        xout = np.stack(rows)
        return T, np.squeeze(xout @ np.transpose(C)), np.squeeze(xout)
    U = np.atleast_1d(U)
    if np.ndim(U) == 1:
        U = U[:, None]
    if np.shape(U)[0] != n_steps:
        raise ValueError("U must have the same number of rows as elements in T.")
    if np.shape(U)[1] != n_inputs:
        raise ValueError("System does not define that many inputs.")
    if not interp:
        M = np.vstack([np.hstack([A * dt, B * dt]),
                       np.zeros((n_inputs, n_states + n_inputs))])
        expMT = linalg.expm(np.transpose(M))
        Ad, Bd = expMT[:n_states, :n_states], expMT[n_states:, :n_states]
        for i in range(1, n_steps):
            rows.append(rows[-1] @ Ad + U[i - 1] @ Bd)
    else:
        M = np.vstack([np.hstack([A * dt, B * dt, np.zeros((n_states, n_inputs))]),
                       np.hstack([np.zeros((n_inputs, n_states + n_inputs)),
                                  np.identity(n_inputs)]),
                       np.zeros((n_inputs, n_states + 2 * n_inputs))])
        expMT = linalg.expm(np.transpose(M))
        Ad = expMT[:n_states, :n_states]
        Bd1 = expMT[n_states + n_inputs:, :n_states]
        Bd0 = expMT[n_states:n_states + n_inputs, :n_states] - Bd1
        for i in range(1, n_steps):
            rows.append(rows[-1] @ Ad + U[i - 1] @ Bd0 + U[i] @ Bd1)
    xout = np.stack(rows)
    return T, np.squeeze(xout @ np.transpose(C)) + np.squeeze(U @ np.transpose(D)), \
        np.squeeze(xout)


def _response_times(A, N, name):
    """SciPy's default times of a response, from the eigenvalues of A: refused when A is
    differentiated (the times would move with it)."""
    _refuse_followed(A, f"{name}'s default times (they come from the eigenvalues of A)",
                     f"Pass the times as T (for instance T=np.linspace(0, 10, 100)) to {name}.")
    return _ltisys._default_response_times(np.asarray(stop_gradient(A)), N)


@_system_stand_in(_signal.step)
def step(system, X0=None, T=None, N=None):
    """SciPy's steps: ``lsim`` of a unit input, with ``interp=False``."""
    A, B, C, D = _continuous(system, "step")
    if N is None:
        N = 100
    T = (_response_times(A, N, "step") if T is None else T if _traced_among(T) else
         np.asarray(T))
    U = np.ones(T.shape, np.result_type(A))
    vals = lsim((A, B, C, D), U, T, X0=X0, interp=False)
    return vals[0], vals[1]


@_system_stand_in(_signal.impulse)
def impulse(system, X0=None, T=None, N=None):
    """SciPy's steps: ``lsim`` of no input from the initial state B (plus X0)."""
    A, B, C, D = _continuous(system, "impulse")
    X = np.squeeze(B) if X0 is None else np.squeeze(B + X0)
    if N is None:
        N = 100
    T = (_response_times(A, N, "impulse") if T is None else T if _traced_among(T) else
         np.asarray(T))
    _, h, _ = lsim((A, B, C, D), 0.0, T, X, interp=False)
    return T, h


@_system_stand_in(_signal.dlsim)
def dlsim(system, u, t=None, x0=None):
    """SciPy's steps (signal/_ltisys.py) on a discrete system of traced coefficients, traced
    inputs or initial state: each state from the last, x[i+1] = A x[i] + B u[i]; inputs given
    at times ``t`` are interpolated linearly onto the steps first."""
    if isinstance(system, _ltisys.lti) or (isinstance(system, _System) and system.dt is None):
        raise AttributeError("dlsim can only be used with discrete-time dlti systems.")
    if isinstance(system, _System):
        is_ss_input = system._kind == "ss"
        ss = system._as_ss()
        (A, B, C, D), dt = ss._arrays, ss.dt
    elif isinstance(system, _ltisys.dlti):
        is_ss_input = isinstance(system, _ltisys.StateSpace)
        ss = system._as_ss()
        A, B, C, D, dt = ss.A, ss.B, ss.C, ss.D, ss.dt
    else:
        made = dlti(*system[:-1], dt=system[-1])
        return dlsim(made, u, t=t, x0=x0)
    u = np.atleast_1d(array_argument(u))
    if np.ndim(u) == 1:
        u = np.atleast_2d(u).T
    if t is None:
        out_samples = len(u)
        stoptime = (out_samples - 1) * dt
    else:
        _refuse_followed(t, "dlsim's input times t", "Pass t as constants.")
        t = np.asarray(stop_gradient(t))
        stoptime = t[-1]
        out_samples = int(np.floor(stoptime / dt)) + 1
    n_states = np.shape(A)[0]
    tout = np.linspace(0.0, stoptime, num=out_samples)
    state = np.zeros((np.shape(A)[1],)) if x0 is None else \
        np.asarray(array_argument(x0), dtype=float) * 1.0 if not _traced_among(x0) else \
        array_argument(x0) + np.zeros((n_states,))
    if t is None:
        u_dt = u
    else:
        from .interpolate import make_interp_spline
        u_dt = make_interp_spline(t, u, k=1)(tout)
    states, outputs = [state], []
    for i in range(0, out_samples - 1):
        outputs.append(np.dot(C, states[i]) + np.dot(D, u_dt[i, :]))
        states.append(np.dot(A, states[i]) + np.dot(B, u_dt[i, :]))
    outputs.append(np.dot(C, states[-1]) + np.dot(D, u_dt[out_samples - 1, :]))
    xout = np.stack(states) * 1.0
    yout = np.stack(outputs) * 1.0
    if is_ss_input:
        return tout, yout, xout
    return tout, yout


def _discrete_responses(name, system, x0, t, n, first_only):
    """SciPy's ``dstep`` (``first_only`` False: a unit step) or ``dimpulse`` (a unit impulse at
    the first sample) of each input, by ``dlsim``."""
    if isinstance(system, _System) and system.dt is None or isinstance(system, _ltisys.lti):
        raise AttributeError(f"{name} can only be used with discrete-time dlti systems.")
    if isinstance(system, _System | _ltisys.dlti):
        ss = system._as_ss()
    else:
        ss = dlti(*system[:-1], dt=system[-1])._as_ss()
    n = 100 if n is None else n
    t = np.linspace(0, n * ss.dt, n, endpoint=False) if t is None else np.asarray(t)
    inputs = np.shape(ss.B)[1]
    yout, tout = None, None
    for i in range(inputs):
        u = np.zeros((t.shape[0], inputs))
        if first_only:
            u[0, i] = 1.0
        else:
            u[:, i] = np.ones((t.shape[0],))
        one_output = dlsim(ss, u, t=t, x0=x0)
        yout = (one_output[1],) if yout is None else yout + (one_output[1],)
        tout = one_output[0]
    return tout, yout


@_system_stand_in(_signal.dstep)
def dstep(system, x0=None, t=None, n=None):
    """SciPy's steps: ``dlsim`` of a unit step into each input."""
    return _discrete_responses("dstep", system, x0, t, n, False)


@_system_stand_in(_signal.dimpulse)
def dimpulse(system, x0=None, t=None, n=None):
    """SciPy's steps: ``dlsim`` of a unit impulse into each input."""
    return _discrete_responses("dimpulse", system, x0, t, n, True)


def _frequencies(worN, name, coefficients):
    """The frequencies given, or SciPy's choice from the roots, refused when the roots are
    differentiated (the frequencies would move with them)."""
    if worN is None or _filter_design._is_int_type(worN):
        _refuse_followed(coefficients, f"{name}'s default frequencies (they come from the "
                         "roots of the polynomials)", f"Pass the frequencies as worN to {name} "
                         "(an array, np.logspace(-2, 2, 200) say).")
        return None
    _refuse_followed(worN, f"{name}'s frequencies", "Pass worN as constants.")
    return np.atleast_1d(np.asarray(stop_gradient(worN)))


def _polyval(p, x):
    """SciPy's old-style ``polyval``: Horner's scheme over the first axis of ``p``."""
    p = array_argument(p)
    y = np.zeros_like(x)
    for j in range(np.shape(p)[0]):
        y = y * x + p[j, ...]
    return y


@stands_in_for(_signal.freqs)
def freqs(b, a, worN=200, plot=None):
    """SciPy's steps on differentiated coefficients: the polynomials at s = iω, by Horner's
    scheme, and their quotient (the frequencies given)."""
    w = _frequencies(worN, "freqs", (b, a))
    if w is None:
        w = _filter_design.findfreqs(stop_gradient(array_argument(b)),
                                     stop_gradient(array_argument(a)),
                                     200 if worN is None else worN)
    s = 1j * w
    h = _polyval(b, s) / _polyval(a, s)
    if plot is not None:
        plot(w, h)
    return w, h


@stands_in_for(_signal.freqs_zpk)
def freqs_zpk(z, p, k, worN=200):
    """SciPy's steps on differentiated zeros, poles and gain: k Π(s - z) / Π(s - p) at
    s = iω (the frequencies given)."""
    z, p = array_argument(z), array_argument(p)
    k = array_argument(k) * 1.0
    if np.size(k) > 1:
        raise ValueError("k must be a single scalar gain")
    w = _frequencies(worN, "freqs_zpk", (z, p))
    if w is None:
        w = _filter_design.findfreqs(stop_gradient(z), stop_gradient(p),
                                     200 if worN is None else worN, kind="zp")
    s = 1j * w

    def from_roots(r):
        r = np.atleast_1d(r)
        return np.prod(s - np.reshape(r, np.shape(r) + (1,) * s.ndim), axis=0)

    return w, k * from_roots(z) / from_roots(p)


@_system_stand_in(_signal.freqresp)
def freqresp(system, w=None, n=10000):
    """SciPy's steps: ``freqs`` of a transfer function, ``freqs_zpk`` of zeros and poles."""
    if isinstance(system, _System):
        if system.dt is not None:
            raise AttributeError("freqresp can only be used with continuous-time systems.")
        sys = system
    elif isinstance(system, _ltisys.lti):
        return _signal.freqresp(system, w=w, n=n)
    elif isinstance(system, _ltisys.dlti):
        raise AttributeError("freqresp can only be used with continuous-time systems.")
    else:
        sys = lti(*system)
        if not isinstance(sys, _System):
            return _signal.freqresp(system, w=w, n=n)
        if sys._kind == "tf":  # SciPy converts a tuple to zeros and poles (to_zpk), of any
            # kind: tf2zpk's roots, differentiated, then freqs_zpk
            return freqs_zpk(*tf2zpk(np.ravel(sys.num), sys.den),
                             worN=w if w is not None else n)
    if sys._kind == "ss":
        raise UnsupportedOperationError(
            "scipy.signal.freqresp of a state-space system of differentiated matrices: SciPy "
            "converts it to zeros and poles, which mutad does not differentiate. Convert it "
            "with to_tf() (or ss2tf) and take freqresp of the transfer function.")
    worN = w if w is not None else n
    if sys._kind == "tf":
        return freqs(np.ravel(sys.num), sys.den, worN=worN)
    return freqs_zpk(*sys._arrays, worN=worN)


@_system_stand_in(_signal.dfreqresp)
def dfreqresp(system, w=None, n=10000, whole=False):
    """SciPy's steps: ``freqz`` of the transfer function in z⁻¹ (a state space's through
    ``to_tf``), ``freqz_zpk`` of zeros and poles."""
    if not isinstance(system, _System):
        if isinstance(system, _ltisys.lti | _ltisys.dlti):
            return _signal.dfreqresp(system, w=w, n=n, whole=whole)
        system = dlti(*system[:-1], dt=system[-1])
    if system.dt is None:
        raise AttributeError("dfreqresp can only be used with discrete-time systems.")
    worN = w if w is not None else n
    if system._kind == "zpk":
        return _signal.freqz_zpk(*system._arrays, worN=worN, whole=whole)
    tf = system._as_tf()
    num, den = _ltisys.TransferFunction._z_to_zinv(np.ravel(tf.num), tf.den)
    return freqz(num, den, worN=worN, whole=whole)


@_system_stand_in(_signal.bode)
def bode(system, w=None, n=100):
    """SciPy's steps on ``freqresp``'s response: its magnitude in dB, its unwrapped phase."""
    w, y = freqresp(system, w=w, n=n)
    mag = 20.0 * np.log10(abs(y))
    phase = np.unwrap(np.arctan2(y.imag, y.real)) * 180.0 / np.pi
    return w, mag, phase


@_system_stand_in(_signal.dbode)
def dbode(system, w=None, n=100):
    """SciPy's steps on ``dfreqresp``'s response, its frequencies over the sampling time."""
    w, y = dfreqresp(system, w=w, n=n)
    dt = system.dt if isinstance(system, _System | _ltisys.dlti) else system[-1]
    mag = 20.0 * np.log10(abs(y))
    phase = np.rad2deg(np.unwrap(np.angle(y)))
    return w / dt, mag, phase


@_system_stand_in(_signal.cont2discrete)
def cont2discrete(system, dt, method="zoh", alpha=None):
    """SciPy's steps (signal/_lti_conversion.py) on a system of differentiated coefficients:
    the matrix exponentials (``zoh``, ``foh``, ``impulse``) or the solves (the generalized
    bilinear transforms) of its state-space matrices; a transfer function through ``tf2ss``
    and ``ss2tf``."""
    _refuse_followed(dt, "cont2discrete's sampling time", "Pass dt as a constant.")
    if isinstance(system, _System):
        return system.to_discrete(dt, method=method, alpha=alpha)
    if hasattr(system, "to_discrete") and callable(system.to_discrete):
        return system.to_discrete(dt=dt, method=method, alpha=alpha)
    if len(system) == 2:
        sysd = cont2discrete(_tf2ss(system[0], system[1]), dt, method=method, alpha=alpha)
        return _ss2tf(sysd[0], sysd[1], sysd[2], sysd[3]) + (dt,)
    if len(system) == 3:
        raise UnsupportedOperationError(
            "scipy.signal.cont2discrete of differentiated zeros, poles and gain: SciPy converts "
            "the discrete system back to zeros and poles (the roots), which mutad does not "
            "differentiate. Discretize the state space (zpk2ss first) or the transfer function.")
    if len(system) != 4:
        raise ValueError("First argument must either be a tuple of 2 (tf), 3 (zpk), or 4 (ss) "
                         "arrays.")
    a, b, c, d = (array_argument(m) for m in system)
    if method == "gbt":
        if alpha is None:
            raise ValueError("Alpha parameter must be specified for the generalized bilinear "
                             "transform (gbt) method")
        elif alpha < 0 or alpha > 1:
            raise ValueError("Alpha parameter must be within the interval [0,1] for the gbt "
                             "method")
        ima = np.eye(np.shape(a)[0]) - alpha * dt * a
        ad = linalg.solve(ima, np.eye(np.shape(a)[0]) + (1.0 - alpha) * dt * a)
        bd = linalg.solve(ima, dt * b)
        cd = np.transpose(linalg.solve(np.transpose(ima), np.transpose(c)))
        dd = d + alpha * np.dot(c, bd)
    elif method in ("bilinear", "tustin"):
        return cont2discrete(system, dt, method="gbt", alpha=0.5)
    elif method in ("euler", "forward_diff"):
        return cont2discrete(system, dt, method="gbt", alpha=0.0)
    elif method == "backward_diff":
        return cont2discrete(system, dt, method="gbt", alpha=1.0)
    elif method == "zoh":
        n, m = np.shape(a)[0], np.shape(b)[1]
        em = np.concatenate((np.concatenate((a, b), axis=1), np.zeros((m, n + m))), axis=0)
        ms = linalg.expm(dt * em)[:n, :]
        ad, bd, cd, dd = ms[:, 0:np.shape(a)[1]], ms[:, np.shape(a)[1]:], c, d
    elif method == "foh":
        n, m = np.shape(a)[0], np.shape(b)[1]
        em_upper = linalg.block_diag(np.concatenate((a, b), axis=1) * dt, np.eye(m))
        em = np.concatenate((em_upper, np.zeros((m, n + 2 * m))), axis=0)
        ms = linalg.expm(em)
        ms11, ms12, ms13 = ms[:n, 0:n], ms[:n, n:n + m], ms[:n, n + m:]
        ad, bd, cd, dd = ms11, ms12 - ms13 + ms11 @ ms13, c, d + c @ ms13
    elif method == "impulse":
        if not np.allclose(stop_gradient(d), 0):
            raise ValueError("Impulse method is only applicable to strictly proper systems")
        ad = linalg.expm(a * dt)
        bd, cd, dd = ad @ b * dt, c, c @ b * dt
    else:
        raise ValueError(f"Unknown transformation method '{method}'")
    return ad, bd, cd, dd, dt


# The chirp z-transform: SciPy's CZT (and ZoomFFT) applied as SciPy's __call__ computes it, on
# the transform's arrays: a product, an FFT, another product, an inverse FFT and a product,
# each differentiated. A ZoomFFT of a differentiated range or fs is made by SciPy's own
# __init__, followed: its chirps are traced arrays, differentiated through the call as well.


def _czt_call(self, x, *, axis=-1):
    if np.shape(x)[axis] != self.n:
        raise ValueError(f"CZT defined for length {self.n}, not {np.shape(x)[axis]}")
    order = np.arange(np.ndim(x))
    order[[axis, -1]] = [-1, axis]
    x = np.transpose(x, order)
    y = fft.ifft(self._Fwk2 * fft.fft(x * self._Awk2, self._nfft))
    y = y[..., self._yidx] * self._wk2
    return np.transpose(y, order)


_czt_call.always = True  # type: ignore[attr-defined]  # (a transform of a differentiated
# frequency range holds traced arrays: its call on a constant signal differentiates them too)
defmethod(_signal.CZT, "__call__", _czt_call)
_ZOOM_FFT_INIT = _signal.ZoomFFT.__init__


def _zoom_fft_init(self, *args, **kwargs):
    """A ``ZoomFFT`` of a differentiated frequency range or sampling frequency: SciPy's own
    ``__init__``, followed, whose ``cmath.exp(2j * pi * f1 / fs)`` is the mode's ``cmath``."""
    following_scipys_code(_ZOOM_FFT_INIT.__get__(self), args, kwargs)


defmethod(_signal.ZoomFFT, "__init__", _zoom_fft_init)


@stands_in_for(_signal.czt)
def czt(x, m=None, w=None, a=1 + 0j, *, axis=-1):
    return _signal.CZT(np.shape(x)[axis], m=m, w=w, a=a)(x, axis=axis)


@stands_in_for(_signal.zoom_fft)
def zoom_fft(x, fn, m=None, *, fs=2, endpoint=False, axis=-1):
    return _signal.ZoomFFT(np.shape(x)[axis], fn, m=m, fs=fs, endpoint=endpoint)(x, axis=axis)


defmethod(_ltisys.lti, "output", lambda self, U, T, X0=None: lsim(self, U, T, X0=X0))
defmethod(_ltisys.dlti, "output", lambda self, u, t=None, x0=None: dlsim(self, u, t=t, x0=x0))


# ----------------------------------------------------------------------------------------------
# Peaks: where they are is a decision on the values (no derivative); their heights are values


def _property_names(height, threshold, prominence, width, plateau_size):
    """The keys of find_peaks' properties for these settings, in SciPy's order."""
    names = []
    if plateau_size is not None:
        names += ["plateau_sizes", "left_edges", "right_edges"]
    if height is not None:
        names += ["peak_heights"]
    if threshold is not None:
        names += ["left_thresholds", "right_thresholds"]
    if prominence is not None or width is not None:
        names += ["prominences", "left_bases", "right_bases"]
    if width is not None:
        names += ["widths", "width_heights", "left_ips", "right_ips"]
    return names


def _found_peaks(x, settings, names):
    peaks, properties = _signal.find_peaks(x, **settings)
    return (peaks, *(properties[name] for name in names))


_peaks_found = Value(_found_peaks, "scipy.signal.find_peaks")


@stands_in_for(_signal.find_peaks)
def find_peaks(x, height=None, threshold=None, distance=None, prominence=None, width=None,
               wlen=None, rel_height=0.5, plateau_size=None):
    """SciPy's peaks of the values and their properties: the positions, the bases, the plateaus'
    edges (decisions SciPy takes on the values: constants of the signal, taken again on every
    call a replay makes) are SciPy's own; the heights, thresholds, prominences and widths are
    SciPy's arithmetic on the signal's values at those places (peak_prominences and
    peak_widths, below), with SciPy's own values, differentiated."""
    settings = dict(height=height, threshold=threshold, distance=distance,
                    prominence=prominence, width=width, wlen=wlen, rel_height=rel_height,
                    plateau_size=plateau_size)
    if innermost(tuple(settings.values())):
        raise UnsupportedOperationError(
            "scipy.signal.find_peaks with a differentiated height=, threshold=, distance=, "
            "prominence=, width=, wlen=, rel_height= or plateau_size=: they decide which peaks "
            "are kept, which has no derivative. Pass them as constants (mutad.stop_gradient).")
    x = _array(x)
    names = _property_names(height, threshold, prominence, width, plateau_size)
    peaks, *found = _peaks_found(x, settings, names)
    peaks = np.asarray(stop_gradient(peaks))
    values = dict(zip(names, found, strict=True))
    properties = {}
    for name in names:
        value = values[name]
        if name in ("plateau_sizes", "left_edges", "right_edges", "left_bases", "right_bases"):
            properties[name] = np.asarray(stop_gradient(value))  # positions: no derivative
        elif name == "peak_heights":
            properties[name] = x[peaks]
        elif name == "left_thresholds":
            properties[name] = scipys_value(value, x[peaks] - x[peaks - 1])
        elif name == "right_thresholds":
            properties[name] = scipys_value(value, x[peaks] - x[peaks + 1])
        elif name == "prominences":
            left = np.asarray(stop_gradient(values["left_bases"]))
            right = np.asarray(stop_gradient(values["right_bases"]))
            properties[name] = scipys_value(value, _prominences(x, peaks, left, right))
    if width is not None:
        widths = _widths(x, peaks, rel_height, properties["prominences"],
                         properties["left_bases"], properties["right_bases"],
                         tuple(values[name] for name in
                               ("widths", "width_heights", "left_ips", "right_ips")))
        properties.update(zip(("widths", "width_heights", "left_ips", "right_ips"), widths))
    return peaks, {name: properties[name] for name in names}


# peak_prominences and peak_widths: where the bases and the crossings lie is a decision SciPy
# takes on the values (made again here on the plain values, in the forward pass, with SciPy's
# own loops); the prominences and widths are then SciPy's arithmetic on the signal's values at
# those places (_peak_finding_utils: x[peak] - max(x[left base], x[right base]), and a linear
# interpolation between the two samples around each crossing), differentiated.

_prominence_data = Value(
    lambda x, peaks, wlen: _signal.peak_prominences(x, peaks, wlen),
    "scipy.signal.peak_prominences")


def _peaks_argument(x, peaks, name):
    x = _array(x)
    if np.ndim(x) != 1:
        raise ValueError("`x` must be a 1-D array")
    _refuse_followed(peaks, f"scipy.signal.{name}'s peaks",
                     "Pass the positions of the peaks (find_peaks' first result).")
    return x, np.asarray(stop_gradient(peaks))


@stands_in_for(_signal.peak_prominences)
def peak_prominences(x, peaks, wlen=None):
    """SciPy's prominences, x[peak] - max(x[left base], x[right base]) at SciPy's bases
    (np.maximum's convention where the two bases' values tie), and its bases."""
    x, peaks = _peaks_argument(x, peaks, "peak_prominences")
    value, left, right = _prominence_data(x, peaks, wlen)
    left, right = np.asarray(stop_gradient(left)), np.asarray(stop_gradient(right))
    return scipys_value(value, _prominences(x, peaks, left, right)), left, right


def _prominences(x, peaks, left, right):
    """SciPy's x[peak] - max(x[left base], x[right base]) at its bases."""
    return x[peaks] - np.maximum(x[left], x[right])


_width_data = Value(
    lambda x, peaks, rel_height, prominences, left, right, wlen: _signal.peak_widths(
        x, peaks, rel_height, (prominences, left, right), wlen),
    "scipy.signal.peak_widths")


def _crossing(x, start, stop, peak, height, step):
    """SciPy's loop (_peak_finding_utils._peak_widths): the sample where the signal, walked
    from the peak by ``step`` towards ``stop``, first falls to ``height`` or reaches
    ``stop``, and whether SciPy interpolates there (the sample below the height)."""
    i = peak
    while (start < i if step < 0 else i < stop) and height < x[i]:
        i += step
    return i, bool(x[i] < height)


@stands_in_for(_signal.peak_widths)
def peak_widths(x, peaks, rel_height=0.5, prominence_data=None, wlen=None):
    """SciPy's widths at the height x[peak] - prominence * rel_height, its crossings the
    linear interpolations SciPy makes between the samples around them (each crossing's sample
    taken by SciPy's own loop on the plain values), differentiated in the signal, the
    prominences and ``rel_height``."""
    x, peaks = _peaks_argument(x, peaks, "peak_widths")
    if prominence_data is None:
        prominence_data = peak_prominences(x, peaks, wlen)
    prominences, left, right = prominence_data
    _refuse_followed(left, "scipy.signal.peak_widths' bases", "Pass peak_prominences' bases.")
    _refuse_followed(right, "scipy.signal.peak_widths' bases", "Pass peak_prominences' bases.")
    left = np.asarray(stop_gradient(left))
    right = np.asarray(stop_gradient(right))
    values = _width_data(x, peaks, rel_height, prominences, left, right, wlen)
    return _widths(x, peaks, rel_height, prominences, left, right, values)


def _widths(x, peaks, rel_height, prominences, left, right, values):
    """SciPy's (widths, width_heights, left_ips, right_ips), ``values``, with the derivatives
    of its arithmetic at the crossings its loops find on the plain values."""
    heights = x[peaks] - prominences * rel_height  # SciPy's arithmetic, in its order
    plain_x = np.asarray(stop_gradient(x), dtype=np.float64)
    plain_heights = np.asarray(stop_gradient(heights), dtype=np.float64).reshape(-1)
    left_ips, right_ips = [], []
    for p in range(np.shape(peaks)[0]):
        peak, height = int(peaks[p]), plain_heights[p]
        i, between = _crossing(plain_x, left[p], right[p], peak, height, -1)
        left_ips.append(i + (heights[p] - x[i]) / (x[i + 1] - x[i]) if between
                        else np.float64(i) + 0.0 * heights[p])
        i, between = _crossing(plain_x, left[p], right[p], peak, height, 1)
        right_ips.append(i - (heights[p] - x[i]) / (x[i - 1] - x[i]) if between
                         else np.float64(i) + 0.0 * heights[p])
    if not left_ips:
        return values
    left_ips, right_ips = stacked(left_ips), stacked(right_ips)
    composition = (right_ips - left_ips, heights, left_ips, right_ips)
    return tuple(scipys_value(v, c) for v, c in zip(values, composition, strict=True))


# ----------------------------------------------------------------------------------------------
# Windows: SciPy's own, their arrays new ones the differentiated code may write into; of a
# traced shape parameter (kaiser's beta, gaussian's std), SciPy's own code followed, its
# conversions (xp.asarray(beta)) those arrays themselves


def _following_window_maker(maker):
    return functools.wraps(maker)(lambda *args, **kwargs: following_scipys_code(maker, args,
                                                                                 kwargs))


for _maker in (_signal.get_window, *(getattr(_signal.windows, name)
                                     for name in _signal.windows.__all__)):
    if callable(_maker):
        StandIn(_maker, _following_window_maker(_maker))
del _maker  # (a routed function left bound: the mode would switch the module's class)


# ----------------------------------------------------------------------------------------------
# filtfilt and savgol_filter: SciPy's own steps, on the differentiated functions


@stands_in_for(_signal.lfilter_zi)
def lfilter_zi(b, a):
    """SciPy's ``lfilter_zi`` (the steady state of the step response), in its steps, for
    traced coefficients: SciPy's companion matrix, its linear solve."""
    b, a = np.atleast_1d(b), np.atleast_1d(a)
    if np.ndim(b) != 1:
        raise ValueError("Numerator b must be 1-D.")
    if np.ndim(a) != 1:
        raise ValueError("Denominator a must be 1-D.")
    while np.shape(a)[0] > 1 and a[0] == 0.0:
        a = a[1:]
    if np.size(a) < 1:
        raise ValueError("There must be at least one nonzero `a` coefficient.")
    # SciPy divides by a[0] only where it is not 1; dividing by 1 changes no bit, and always
    # dividing gives a[0] its derivative there too.
    b, a = b / a[0], a / a[0]
    n = max(np.shape(a)[0], np.shape(b)[0])
    if n < 2:  # SciPy's companion matrix of a has no rows
        raise ValueError("The length of `a` along the last axis must be at least 2.")
    a = np.concatenate((a, np.zeros(n - np.shape(a)[0])))
    b = np.concatenate((b, np.zeros(n - np.shape(b)[0])))
    # companion(a).T has -a[1:] / a[0] (a[0] is 1) down its first column, ones above it.
    companion_t = np.eye(n - 1, k=1) - a[1:, None] * np.eye(1, n - 1)
    return np.linalg.solve(np.eye(n - 1) - companion_t, b[1:] - a[1:] * b[0])


def _filtfilt_gust(b, a, x, axis, irlen):
    """SciPy's ``_filtfilt_gust`` (Gustafsson's initial conditions, fitted by least squares),
    its steps each differentiated: its matrices built by stacking where SciPy writes into
    zeros, the same values."""
    b, a = np.atleast_1d(b), np.atleast_1d(a)
    order = max(len(b), len(a)) - 1
    if order == 0:
        return (b[0] / a[0]) ** 2 * x
    x = np.moveaxis(x, axis, -1)
    n = np.shape(x)[-1]
    m = n if irlen is None or n <= 2 * irlen else irlen
    impulse = lfilter(b, a, np.zeros(m), zi=np.eye(1, order)[0])[0]
    obs = np.stack([impulse] + [np.concatenate((np.zeros(k), impulse[:-k]))
                                for k in range(1, order)], axis=1)
    obs_r = obs[::-1]
    s = lfilter(b, a, obs_r, axis=0)
    s_r = s[::-1]

    def blocks(top, bottom):  # SciPy's hstack, or its block diagonal when m < n
        if m == n:
            return np.concatenate((top, bottom), axis=1)
        zeros = np.zeros((m, order))
        return np.concatenate((np.concatenate((top, zeros), axis=1),
                               np.concatenate((zeros, bottom), axis=1)))

    y_fb = lfilter(b, a, lfilter(b, a, x)[..., ::-1])[..., ::-1]
    y_bf = lfilter(b, a, lfilter(b, a, x[..., ::-1])[..., ::-1])
    delta = y_bf - y_fb
    if m != n:
        delta = np.concatenate((delta[..., :m], delta[..., -m:]), axis=-1)
    matrix = blocks(s_r - obs, obs_r - s)
    if np.ndim(delta) == 1:
        fitted = linalg.lstsq(matrix, delta)[0]
    else:
        columns = np.transpose(np.reshape(delta, (-1, np.shape(delta)[-1])))
        fitted = np.reshape(np.transpose(linalg.lstsq(matrix, columns)[0]),
                            np.shape(delta)[:-1] + (np.shape(matrix)[-1],))
    correction = np.dot(fitted, np.transpose(blocks(s_r, obs_r)))
    # SciPy adds the correction into y_fb, a reversed view: its result has that view's
    # strides, which decide how later sums of it (y @ w) round.
    y = y_fb
    if m == n:
        y += correction
    else:
        y[..., :m] += correction[..., :m]
        y[..., -m:] += correction[..., -m:]
    return np.moveaxis(y, -1, axis)


@stands_in_for(_signal.filtfilt)
def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    if method == "gust":
        return _filtfilt_gust(b, a, x, axis, irlen)
    if method != "pad":
        raise ValueError("method must be 'pad' or 'gust'.")
    # SciPy's steps (signal/_signaltools.py), each differentiated.
    b, a = np.atleast_1d(b), np.atleast_1d(a)
    edge, ext = _signaltools._validate_pad(padtype, padlen, x, axis,
                                           ntaps=max(len(a), len(b)))
    zi = lfilter_zi(b, a)
    zi_shape = [1] * np.ndim(x)
    zi_shape[axis] = np.size(zi)
    zi = np.reshape(zi, zi_shape)
    x0 = _arraytools.axis_slice(ext, stop=1, axis=axis)
    y, _ = lfilter(b, a, ext, axis=axis, zi=zi * x0)
    y0 = _arraytools.axis_slice(y, start=-1, axis=axis)
    y, _ = lfilter(b, a, _arraytools.axis_reverse(y, axis=axis), axis=axis, zi=zi * y0)
    y = _arraytools.axis_reverse(y, axis=axis)
    if edge > 0:
        y = _arraytools.axis_slice(y, start=edge, stop=-edge, axis=axis)
    return y


@stands_in_for(_signal.savgol_filter)
def savgol_filter(x, window_length, polyorder, deriv=0, delta=1.0, axis=-1, mode="interp",
                  cval=0.0):
    if np.dtype(x.dtype) not in (np.float64, np.float32):
        x = x.astype(np.float64)
    if mode != "interp":  # SciPy's own: ndimage's convolve1d with its coefficients
        coefficients = _signal.savgol_coeffs(window_length, polyorder, deriv=deriv, delta=delta)
        return ndimage.convolve1d(x, coefficients, axis=axis, mode=mode, cval=cval)
    if deriv > 0 and innermost((delta,)) is not None:
        # A differentiated spacing: the fit's derivative is the same fit's at the plain spacing
        # times (delta0 / delta)**deriv, exactly (SciPy divides its coefficients, and its end
        # polynomials' values, by delta**deriv), and that factor is 1.0, changing no bit.
        plain = _plain(delta, numbers=True)  # a number at every level of differentiation
        not_replayed("scipy.signal.savgol_filter's fit at the spacing's plain value")
        return (_savgol_interp(x, window_length, polyorder, deriv, plain, axis)
                * (plain / delta) ** deriv)
    return _savgol_interp(x, window_length, polyorder, deriv, delta, axis)


def _plain_savgol_interp(x, window_length, polyorder, deriv, delta, axis):
    return savgol_filter.original(x, window_length, polyorder, deriv, delta, axis, "interp")


_savgol_interp = ScipyAdjoint(_plain_savgol_interp)


@_savgol_interp.rule
def _savgol_interp_rule(x, window_length, polyorder, deriv, delta, axis):
    # Linear in x: the convolution with SciPy's coefficients (zeros beyond the ends) but for
    # the window_length // 2 outputs at each end, which are the fitted polynomial's, linear
    # in the first (last) window_length elements. Those rows are asked of SciPy, filtering
    # the unit vectors of one window.
    y = _savgol_interp(x, window_length, polyorder, deriv, delta, axis)
    if window_length % 2 == 0:
        raise UnsupportedOperationError(
            "scipy.signal.savgol_filter(mode='interp') with an even window_length: mutad "
            "differentiates odd windows.")
    half = window_length // 2
    n = np.shape(x)[axis]
    coefficients = _signal.savgol_coeffs(window_length, polyorder, deriv=deriv, delta=delta)
    ends = savgol_filter.original(np.eye(window_length), window_length, polyorder, deriv, delta,
                                 0, "interp")
    inside = np.ones(n)
    inside[:half] = inside[n - half:] = 0.0
    shape = [1] * np.ndim(x)
    shape[axis] = n

    def back(dy):
        # The convolution's transpose (zeros beyond the ends) is the correlation with the
        # same coefficients (an odd window, centred).
        dx = ndimage.correlate1d(dy * np.reshape(inside, shape), coefficients, axis,
                                 mode="constant")
        dy_last = np.moveaxis(dy, axis, -1)
        first = dy_last[..., :half] @ ends[:half]
        last = dy_last[..., n - half:] @ ends[window_length - half:]
        pad = [(0, 0)] * (np.ndim(x) - 1)
        edges = (np.pad(first, pad + [(0, n - window_length)])
                 + np.pad(last, pad + [(n - window_length, 0)]))
        return dx + np.moveaxis(edges, -1, axis), None, None, None, None, None

    return y, back


@_savgol_interp.jvp_rule
def _savgol_interp_jvp(tangents, x, window_length, polyorder, deriv, delta, axis):
    return (_savgol_interp(x, window_length, polyorder, deriv, delta, axis),
            _savgol_interp(tangents[0], window_length, polyorder, deriv, delta, axis))


# ----------------------------------------------------------------------------------------------
# detrend, hilbert, sosfiltfilt, medfilt: SciPy's own steps, on the differentiated functions


def _setting(value, what, name):
    """``value``, a setting of ``name`` SciPy checks by type (a sampling frequency, a window):
    a constant the program computed as the plain value it holds; a differentiated one
    refused by name."""
    if isinstance(value, (list, tuple)) or not isinstance(value, Tracer):
        return settled(value, f"scipy.signal.{name} with a {what} the program computes")
    if carries_derivative(value):
        raise UnsupportedOperationError(
            f"scipy.signal.{name}: mutad does not differentiate with respect to {what}; pass "
            "it as a constant (a number not computed from the differentiated arguments).")
    value = settled(value, f"scipy.signal.{name} with a {what} the program computes")
    return value[()] if np.ndim(value) == 0 else value  # a number as NumPy's scalar


def _array(x):
    """The signal ``x`` as an array: a list or tuple holding traced values the array NumPy makes
    of it (as SciPy's np.asarray does), stacked so that the differentiation follows it."""
    x = lists_as_arrays([x])[0]
    return np.asarray(x) if type(x) in (list, tuple) else x


@stands_in_for(_signal.detrend)
def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=False):
    data = _array(data)
    # SciPy's steps (signal/_signaltools.py): the mean, or per segment between breakpoints the
    # least-squares line (scipy.linalg.lstsq, differentiated), subtracted; with overwrite_data,
    # into data itself where SciPy's reshape is a view of it, as SciPy's.
    if type not in ["linear", "l", "constant", "c"]:
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    dtype = data.dtype.char
    if dtype not in "dfDF":
        dtype = "d"
    if type in ["constant", "c"]:
        return data - np.mean(data, axis, keepdims=True)
    dshape = np.shape(data)
    n = dshape[axis]
    bp = np.sort(np.unique(np.concatenate(np.atleast_1d(0, bp, n))))
    if np.any(bp > n):
        raise ValueError("Breakpoints must be less than length of data along given axis.")
    axis = normalize_axis_index(axis, len(dshape))
    newdata = np.moveaxis(data, axis, 0)
    newdata_shape = newdata.shape
    newdata = newdata.reshape(n, -1)
    if not overwrite_data:
        newdata = newdata.copy()
    if newdata.dtype.char not in "dfDF":
        newdata = newdata.astype(dtype)
    for m in range(len(bp) - 1):
        npts = bp[m + 1] - bp[m]
        design = np.ones((npts, 2), dtype)
        design[:, 0] = np.arange(1, npts + 1, dtype=dtype) / npts
        sl = slice(bp[m], bp[m + 1])
        coef = linalg.lstsq(design, newdata[sl])[0]
        newdata[sl] = newdata[sl] - design @ coef
    return np.moveaxis(newdata.reshape(newdata_shape), 0, axis)


_detrend = detrend  # for the functions below whose parameter is named detrend


@stands_in_for(_signal.hilbert)
def hilbert(x, N=None, axis=-1):
    x = _array(x)
    # SciPy's steps: the FFT, the negative frequencies zeroed and the positive ones doubled,
    # the inverse FFT (scipy.fft's, differentiated).
    if np.iscomplexobj(x):
        raise ValueError("x must be real.")
    if N is None:
        N = np.shape(x)[axis]
    if N <= 0:
        raise ValueError("N must be positive.")
    spectrum = np.moveaxis(fft.fft(x, N, axis=axis), axis, -1)
    half = N // 2 if N % 2 == 0 else (N + 1) // 2
    spectrum[..., 1:half] *= 2.0
    spectrum[..., N // 2 + 1 if N % 2 == 0 else half:N] = 0.0
    return fft.ifft(np.moveaxis(spectrum, -1, axis), axis=axis)


@stands_in_for(_signal.sosfilt_zi)
def sosfilt_zi(sos):
    """SciPy's ``sosfilt_zi`` in its steps: each section's ``lfilter_zi``, scaled by the DC
    gain of the sections before it (rows stacked, not written into SciPy's buffer)."""
    if np.ndim(sos) != 2 or np.shape(sos)[1] != 6:
        raise ValueError("sos must be shape (n_sections, 6)")
    rows, scale = [], 1.0
    for section in range(np.shape(sos)[0]):
        b, a = sos[section, :3], sos[section, 3:]
        rows.append(scale * lfilter_zi(b, a))
        scale = scale * (np.sum(b) / np.sum(a))
    return np.stack(rows)


@stands_in_for(_signal.sosfiltfilt)
def sosfiltfilt(sos, x, axis=-1, padtype="odd", padlen=None):
    # SciPy's steps: the padded signal filtered forwards and backwards by sosfilt, each pass
    # started from sosfilt_zi's steady state.
    if np.ndim(sos) != 2 or np.shape(sos)[1] != 6:
        raise ValueError("sos array must be shape (n_sections, 6)")
    if np.ndim(x) == 0:
        raise ValueError("x must be at least 1-D")
    x = _array(x)
    n_sections = np.shape(sos)[0]
    ntaps = 2 * n_sections + 1
    ntaps -= min(int(np.sum(sos[:, 2] == 0)), int(np.sum(sos[:, 5] == 0)))
    edge, ext = _signaltools._validate_pad(padtype, padlen, x, axis, ntaps=ntaps)
    zi = sosfilt_zi(sos)
    zi_shape = [1] * np.ndim(x)
    zi_shape[axis] = 2
    zi = np.reshape(zi, [n_sections] + zi_shape)
    x0 = _arraytools.axis_slice(ext, stop=1, axis=axis)
    y, _ = sosfilt(sos, ext, axis=axis, zi=zi * x0)
    y0 = _arraytools.axis_slice(y, start=-1, axis=axis)
    y, _ = sosfilt(sos, _arraytools.axis_reverse(y, axis=axis), axis=axis, zi=zi * y0)
    y = _arraytools.axis_reverse(y, axis=axis)
    if edge > 0:
        y = _arraytools.axis_slice(y, start=edge, stop=-edge, axis=axis)
    return y


@stands_in_for(_signal.medfilt)
def medfilt(volume, kernel_size=None):
    # SciPy's steps: ndimage's rank filter at the middle rank, zeros beyond the ends; each
    # output takes the cotangent of the element it selected.
    volume = _array(volume)
    if np.ndim(volume) == 0:
        volume = np.atleast_1d(volume)
    if volume.dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype={volume.dtype} is not supported by medfilt")
    if kernel_size is None:
        kernel_size = [3] * volume.ndim
    kernel_size = np.asarray(kernel_size)
    if kernel_size.shape == ():
        kernel_size = np.repeat(kernel_size, volume.ndim)
    if any(k % 2 != 1 for k in kernel_size):
        raise ValueError("Each element of kernel_size should be odd.")
    if any(k > s for k, s in zip(kernel_size, volume.shape)):
        warnings.warn("kernel_size exceeds volume extent: the volume will be zero-padded.",
                      stacklevel=2)
    size = math.prod(kernel_size)
    return ndimage.rank_filter(volume, size // 2, size=kernel_size, mode="constant")


@stands_in_for(_signal.order_filter)
def order_filter(a, domain, rank):
    # SciPy's steps: ndimage's rank filter over the footprint ``domain``, zeros beyond the
    # ends; each output takes the cotangent of the element it selected.
    domain = np.asarray(domain)
    if any(n % 2 != 1 for n in domain.shape):
        raise ValueError("Each dimension of domain argument should have an odd number of "
                         "elements.")
    a = _array(a)
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype in (np.float32, np.float64)):
        raise ValueError(f"dtype={a.dtype} is not supported by order_filter")
    return ndimage.rank_filter(a, rank, footprint=domain, mode="constant")


_medfilt2d_value = Value(lambda x, kernel_size: _signal.medfilt2d(x, kernel_size),
                         "scipy.signal.medfilt2d")


@stands_in_for(_signal.medfilt2d)
def medfilt2d(input, kernel_size=3):
    # medfilt of a 2-d array (zeros beyond the edges, the middle rank of each window) by
    # SciPy's own selection: it picks the same element, checked, so the same values and
    # medfilt's derivative (each output takes the cotangent of the element it selected).
    input = _array(input)
    if np.ndim(input) != 2:
        raise ValueError("medfilt2d: the input must be a 2-D array.")
    value = _medfilt2d_value(input, kernel_size)
    y = medfilt(input, kernel_size)
    if not np.array_equal(stop_gradient(y), value, equal_nan=True):
        raise UnsupportedOperationError(  # (a guard: NaNs, which the two selections order apart)
            "scipy.signal.medfilt2d: mutad's median filter, which gives its derivative, did not "
            "select SciPy's values here (NaNs in the input?), so it cannot differentiate it. "
            "Filter with scipy.signal.medfilt or scipy.ndimage.median_filter.")
    return y


@stands_in_for(_signal.wiener)
def wiener(im, mysize=None, noise=None):
    # SciPy's own steps (_signaltools.wiener) on the differentiated functions: the local mean
    # and variance by correlate, the noise power their mean, then the choice of the local mean
    # where the local variance is below the noise (a decision taken here, kept as the mask).
    im = _array(im)
    if mysize is None:
        mysize = [3] * np.ndim(im)
    if np.shape(np.asarray(mysize)) == ():
        mysize = [mysize] * np.ndim(im)
    size = math.prod(mysize)
    local_mean = correlate(im, np.ones(mysize), "same")
    lsize = float(size)
    local_mean = local_mean / lsize
    local_var = correlate(im ** 2, np.ones(mysize), "same") / lsize - local_mean ** 2
    if noise is None:
        noise = np.mean(np.reshape(local_var, (-1,)), axis=0)
    res = im - local_mean
    res = res * (1 - noise / local_var)
    res = res + local_mean
    return np.where(local_var < noise, local_mean, res)


# ----------------------------------------------------------------------------------------------
# upfirdn: linear in h and in x; resample_poly and decimate are SciPy's steps around it

upfirdn = scipy_adjoint(_signal.upfirdn)


def _upsampled(x, up, length):
    """``x`` along the last axis with ``up - 1`` zeros after each element, to ``length``."""
    u = np.zeros_like(x, shape=np.shape(x)[:-1] + (length,))
    u[..., ::up] = x
    return u


def _extension(n, width, mode):
    """SciPy's extension of a length-``n`` signal by ``width`` samples at each end in ``mode``
    (other than 'constant'), linear in the signal: ``(near, left, right)``, the extension
    before (after) it being ``signal[near] @ left.T`` (``right.T``). Every mode extends from
    the samples within ``width + 1`` of an end ('wrap' of the other end's); SciPy's own
    extension of the unit vectors there gives the matrices."""
    near = np.unique(np.r_[np.arange(min(n, width + 2)), np.arange(max(0, n - width - 2), n)])
    extended = np.stack([_upfirdn_apply._pad_test(np.eye(1, n, j)[0], width, width, mode)
                         for j in near], axis=1)
    return near, extended[:width], extended[width + n:]


def _upfirdn_extended_rule(h, x, up, down, axis, mode, cval):
    """upfirdn in an extension ``mode`` other than zeros: the zero extension's upfirdn of the
    signal extended by SciPy's extension, enough samples for every tap, a multiple of
    ``down`` so that its outputs are SciPy's, shifted. Linear in h and in the extended
    signal, itself linear in x (and, mode 'constant', in cval)."""
    y = upfirdn(h, x, up, down, axis, mode, cval)
    x_last = np.moveaxis(x, axis, -1)
    n = np.shape(x_last)[-1]
    width = down * -(-(-(-(np.size(h) - 1) // up) + 1) // down)
    if mode == "constant":
        near = np.arange(0)
        left = right = np.zeros((width, 0))
        before = after = np.zeros(np.shape(x_last)[:-1] + (width,)) + cval
    else:
        near, left, right = _extension(n, width, mode)
        before, after = x_last[..., near] @ left.T, x_last[..., near] @ right.T
    extended = np.concatenate((before, x_last, after), axis=-1)
    start = width * up // down
    count = np.shape(y)[axis]
    _, back_extended = _upfirdn_rule(h, np.moveaxis(extended, -1, axis), up, down, axis)
    full = _output_len(np.size(h), n + 2 * width, up, down)
    shifted = np.moveaxis(upfirdn(h, extended, up, down), -1, axis)
    expected = np.asarray(_plain(y))  # (the check decides nothing a derivative follows)
    got = np.take(np.asarray(_plain(shifted)), np.arange(start, start + count), axis=axis)
    if not np.allclose(got, expected, rtol=1e-10,
                       atol=1e-12 * (1.0 + np.max(np.abs(expected), initial=0.0))):
        raise UnsupportedOperationError(  # (SciPy's extension changed: refuse, never guess)
            f"scipy.signal.upfirdn(mode={mode!r}): SciPy's result is not the filter of its "
            "extension as mutad computes it; differentiate mode='constant'.")

    def back(dy):
        z_shape = list(np.shape(dy))
        z_shape[axis] = full
        z = np.zeros_like(dy, shape=z_shape)
        index = [slice(None)] * np.ndim(z)
        index[axis] = slice(start, start + count)
        z[tuple(index)] = dy
        dh, d_extended = back_extended(z)[:2]
        d_last = np.moveaxis(d_extended, axis, -1)
        d_before, d_after = d_last[..., :width], d_last[..., width + n:]
        dx = d_last[..., width:width + n].copy()
        dx[..., near] += d_before @ left + d_after @ right
        dcval = np.sum(d_before) + np.sum(d_after) if mode == "constant" else None
        return dh, np.moveaxis(dx, -1, axis), None, None, None, None, dcval

    return y, back


@upfirdn.rule
def _upfirdn_rule(h, x, up=1, down=1, axis=-1, mode="constant", cval=0):
    if np.ndim(h) != 1:
        raise UnsupportedOperationError("scipy.signal.upfirdn of an h that is not 1-d.")
    if mode not in _upfirdn_modes:
        raise ValueError(f"Unknown mode: {mode}")
    if mode != "constant" or not (type(cval) is int and cval == 0):
        # (a differentiated cval reaches the rule as a float, 0.0 too: it needs its cotangent)
        return _upfirdn_extended_rule(h, x, up, down, axis, mode, cval)
    y = upfirdn(h, x, up, down, axis, mode, cval)
    x_last = np.moveaxis(x, axis, -1)
    length, taps = np.shape(x_last)[-1], np.size(h)
    # y[n] = Σ_k h[k] u[n·down - k], u the upsampled x (span samples): every down-th sample
    # of the full convolution (full samples; SciPy's output may run on past it, in zeros).
    span = (length - 1) * up + 1
    full = span + taps - 1
    count = min(np.shape(y)[axis], -(-full // down))

    def back(dy):
        # z holds dy at every down-th sample of the full convolution: ū[m] = Σ_k h[k] z[m+k],
        # x̄ = ū at the upsampled positions; h̄[k] = Σ_m u[m] z[m+k].
        dy_last = np.moveaxis(dy, axis, -1)
        z = np.zeros_like(dy_last, shape=np.shape(dy_last)[:-1] + (full,))
        z[..., ::down] = dy_last[..., :count]
        du = functools.reduce(np.add, [h[k] * z[..., k:k + span] for k in range(taps)])
        u = _upsampled(x_last, up, span)
        dh = stacked([np.vdot(z[..., k:k + span], u) for k in range(taps)])
        return dh, np.moveaxis(du[..., ::up], -1, axis)

    return y, back


@upfirdn.jvp_rule
def _upfirdn_jvp(tangents, h, x, up=1, down=1, axis=-1, mode="constant", cval=0):
    # bilinear in h and in the extended signal, which is linear in x and cval
    dh, dx = (tuple(tangents) + (None, None))[:2]
    dcval = (tuple(tangents) + (None,) * 7)[6]
    parts = [upfirdn(h, dx, up, down, axis, mode)] if dx is not None else []
    if dh is not None:
        parts.append(upfirdn(dh, x, up, down, axis, mode, cval))
    if dcval is not None and mode == "constant":
        parts.append(upfirdn(h, np.zeros_like(x), up, down, axis, mode, 1.0) * dcval)
    return (upfirdn(h, x, up, down, axis, mode, cval),
            functools.reduce(np.add, parts) if parts else None)


@stands_in_for(_signal.resample_poly)
def resample_poly(x, up, down, axis=0, window=("kaiser", 5.0), padtype="constant", cval=None):
    # SciPy's steps (signal/_signaltools.py): its FIR filter (a constant), upfirdn, the
    # delay removed.
    x = _array(x)
    window = _setting(window, "window", "resample_poly")
    if up != int(up):
        raise ValueError("up must be an integer")
    if down != int(down):
        raise ValueError("down must be an integer")
    up, down = int(up), int(down)
    if up < 1 or down < 1:
        raise ValueError("up and down must be >= 1")
    if cval is not None and padtype != "constant":
        raise ValueError("cval has no effect when padtype is ", padtype)
    g = math.gcd(up, down)
    up //= g
    down //= g
    if up == down == 1:
        return x.copy()
    n_in = np.shape(x)[axis]
    n_out = n_in * up
    n_out = n_out // down + bool(n_out % down)
    if isinstance(window, list) or isinstance(window, np.ndarray):
        h = np.array(window, copy=True)
        if h.ndim > 1:
            raise ValueError("window must be 1-D")
        half_len = (np.size(h) - 1) // 2
    else:
        max_rate = max(up, down)
        half_len = 10 * max_rate
        h = _signal.firwin(2 * half_len + 1, 1.0 / max_rate, window=window)
        if np.issubdtype(x.dtype, np.inexact):
            h = np.asarray(h, dtype=x.dtype)
    h *= up
    n_pre_pad = down - half_len % down
    n_post_pad = 0
    n_pre_remove = (half_len + n_pre_pad) // down
    while _output_len(h.shape[0] + n_pre_pad + n_post_pad, n_in, up, down) < (
            n_out + n_pre_remove):
        n_post_pad += 1
    h = np.concatenate((np.zeros(n_pre_pad, dtype=h.dtype), h,
                        np.zeros(n_post_pad, dtype=h.dtype)))
    funcs = {"mean": np.mean, "median": np.median, "minimum": np.min, "maximum": np.max}
    extension = {"mode": "constant", "cval": 0}
    if padtype in funcs:
        background = funcs[padtype](x, axis=axis, keepdims=True)
        x = x - background
    elif padtype in _upfirdn_modes:
        extension = {"mode": padtype}
        if padtype == "constant":
            extension["cval"] = 0 if cval is None else cval
    else:
        raise ValueError("padtype must be one of: maximum, mean, median, minimum, "
                         + ", ".join(_upfirdn_modes))
    y = upfirdn(h, x, up, down, axis=axis, **extension)
    keep = [slice(None)] * np.ndim(x)
    keep[axis] = slice(n_pre_remove, n_pre_remove + n_out)
    y_keep = y[tuple(keep)]
    if padtype in funcs:
        y_keep += background
    return y_keep


@stands_in_for(_signal.decimate)
def decimate(x, q, n=None, ftype="iir", axis=-1, zero_phase=True):
    # SciPy's steps: its filter design (constants), then the differentiated filters.
    x = _array(x)
    q = operator.index(q)
    if n is not None:
        n = operator.index(n)
    result_type = x.dtype
    if not np.issubdtype(result_type, np.inexact) or result_type.type == np.float16:
        result_type = np.float64
    if ftype == "fir":
        if n is None:
            n = 20 * q
        b = np.asarray(_signal.firwin(n + 1, 1.0 / q, window="hamming"), dtype=result_type)
        a = np.asarray(1.0, dtype=result_type)
    elif ftype == "iir":
        sos = np.asarray(_signal.cheby1(8 if n is None else n, 0.05, 0.8 / q, output="sos"),
                         dtype=result_type)
    else:
        raise UnsupportedOperationError(
            "scipy.signal.decimate(ftype=<a dlti system>): mutad differentiates ftype='iir' "
            "and 'fir'; filter with the system's coefficients (sosfiltfilt, filtfilt) and "
            "slice instead.")
    sl = [slice(None)] * np.ndim(x)
    if ftype == "fir":
        b = b / a
        if zero_phase:
            y = resample_poly(x, 1, q, axis=axis, window=b)
        else:
            y = upfirdn(b, x, up=1, down=q, axis=axis)
            sl[axis] = slice(None, np.shape(x)[axis] // q + bool(np.shape(x)[axis] % q), None)
    else:
        y = sosfiltfilt(sos, x, axis=axis) if zero_phase else sosfilt(sos, x, axis=axis)
        sl[axis] = slice(None, None, q)
    return y[tuple(sl)]


@stands_in_for(_signal.resample)
def resample(x, num, t=None, axis=0, window=None, domain="time"):
    # SciPy's steps (signal/_signaltools.py): the spectrum (scipy.fft's, differentiated),
    # windowed by a constant, cut or zero-padded to num bins, transformed back.
    x = _array(x)
    if domain not in ("time", "freq"):
        raise ValueError(f"Parameter {domain=} not in ('time', 'freq')!")
    if np.ndim(x) > 1:
        x = np.moveaxis(x, axis, -1)
    n_x = np.shape(x)[-1]
    s_fac = n_x / num
    m = min(num, n_x)
    m2 = m // 2 + 1
    if window is None:
        W = None
    elif callable(window):
        W = window(_fft.fftfreq(n_x))
    elif hasattr(window, "shape"):
        if window.shape != (n_x,):
            raise ValueError(f"{window.shape=} != ({n_x},), i.e., window length is not equal "
                             "to number of frequency bins!")
        W = np.array(window, copy=True)
    else:
        W = _fft.fftshift(_signal.get_window(window, n_x)).astype(np.float64)
    if domain == "time" and not np.iscomplexobj(x):
        X = fft.rfft(x)
        if W is not None:
            n_X = X.shape[-1]
            W[1:n_X] += np.flip(W[-n_X + 1:])
            W[1:n_X] /= 2
            X = _updated(np.multiply, X, W[:n_X])
        X = X[..., :m2]
        if m % 2 == 0 and num != n_x:
            X[..., m // 2] *= 2 if num < n_x else 0.5
        x_r = fft.irfft(X / s_fac, n=num)
    else:
        X = fft.fft(x) if domain == "time" else x
        if W is not None:
            X = X * W
        Y = np.zeros_like(X, shape=X.shape[:-1] + (num,))
        Y[..., :m2] = X[..., :m2]
        if m2 < m:
            Y[..., m2 - m:] = X[..., m2 - m:]
        if m % 2 == 0:
            if num < n_x:
                Y[..., -m // 2] += X[..., -m // 2]
            elif n_x < num:
                Y[..., m // 2] /= 2
                Y[..., num - m // 2] = Y[..., m // 2]
        x_r = fft.ifft(Y / s_fac, n=num)
    if np.ndim(x_r) > 1:
        x_r = np.moveaxis(x_r, -1, axis)
    if t is not None:
        return x_r, t[0] + (t[1] - t[0]) * s_fac * np.arange(num)
    return x_r


# oaconvolve: bilinear, as fftconvolve (its value SciPy's own, overlap-add)
oaconvolve = scipy_adjoint(_signal.oaconvolve)
_convolution_rules(oaconvolve, None, takes_axes=True)


@stands_in_for(_signal.firwin)
def firwin(numtaps, cutoff, *, width=None, window="hamming", pass_zero=True, scale=True,
           fs=None):
    # SciPy's steps (signal/_fir_filter_design.py): windowed differences of sincs at the band
    # edges, scaled to unit gain; the cutoffs traced, the window a constant.
    fs = _arraytools._validate_fs(_setting(fs, "sampling frequency fs", "firwin"),
                                  allow_none=True)
    fs = 2 if fs is None else fs
    nyq = 0.5 * fs
    cutoff = np.atleast_1d(cutoff).astype(np.float64) / float(nyq)
    if cutoff.ndim > 1:
        raise ValueError("The cutoff argument must be at most one-dimensional.")
    if np.size(cutoff) == 0:
        raise ValueError("At least one cutoff frequency must be given.")
    if np.min(cutoff) <= 0 or np.max(cutoff) >= 1:
        raise ValueError("Invalid cutoff frequency: frequencies must be greater than 0 and "
                         "less than fs/2.")
    if np.any(cutoff[1:] - cutoff[:-1] <= 0):
        raise ValueError("Invalid cutoff frequencies: the frequencies must be strictly "
                         "increasing.")
    if width is not None:
        width = width if isinstance(width, Tracer) else float(width)  # (SciPy's float)
        window = ("kaiser", _signal.kaiser_beta(_signal.kaiser_atten(numtaps, width / nyq)))
    # SciPy's named responses: whether each passes zero, and whether it takes one cutoff
    named = {"lowpass": (True, True), "bandstop": (True, False), "highpass": (False, True),
             "bandpass": (False, False)}
    if isinstance(pass_zero, str) and pass_zero in named:
        passes, single = named[pass_zero]
        if single and np.size(cutoff) != 1:
            raise ValueError(f'cutoff must have one element if pass_zero=="{pass_zero}", got '
                             f"{cutoff.shape}")
        if not single and np.size(cutoff) <= 1:
            raise ValueError("cutoff must have at least two elements if "
                             f'pass_zero=="{pass_zero}", got {cutoff.shape}')
        pass_zero = passes
    elif not (pass_zero is True or pass_zero is False):
        raise ValueError(f"Parameter {pass_zero=} not in (True, False, 'bandpass', "
                         "'lowpass', 'highpass', 'bandstop')")
    pass_nyquist = (np.size(cutoff) % 2 == 0) == pass_zero
    if pass_nyquist and numtaps % 2 == 0:
        raise ValueError("A filter with an even number of coefficients must have zero "
                         "response at the Nyquist frequency.")
    cutoff = np.concatenate((np.zeros(int(pass_zero)), cutoff, np.ones(int(pass_nyquist))))
    bands = np.reshape(cutoff, (-1, 2))
    alpha = 0.5 * (numtaps - 1)
    m = np.arange(0, numtaps, dtype=np.float64) - alpha
    h = 0
    for j in range(bands.shape[0]):
        left, right = bands[j, 0], bands[j, 1]
        h += right * np.sinc(right * m)
        h -= left * np.sinc(left * m)
    h = _updated(np.multiply, h, _signal.get_window(window, numtaps, fftbins=False))
    if scale:
        left, right = bands[0, ...]
        if left == 0:
            scale_frequency = 0.0
        elif right == 1:
            scale_frequency = 1.0
        else:
            scale_frequency = 0.5 * (left + right)
        h /= np.sum(h * np.cos(np.pi * m * scale_frequency))
    return h


def _updated(ufunc, x, y):
    """SciPy's in-place ``x op= y`` as a new array: the values NumPy writes (the operation in
    the operands' common type, cast to x's dtype), without writing into x, a plain array made
    from constants where only y is differentiated (a setting: the window, fs)."""
    return ufunc(x, y).astype(np.result_type(x), copy=False)


def _as_python_float(value, dtype):
    """A number SciPy holds as a Python float, in arithmetic with an array of ``dtype``: NumPy
    converts it to that dtype first (weak promotion), as this does a differentiated one."""
    return value.astype(dtype) if isinstance(value, Tracer) else value


@stands_in_for(_signal.freqz)
def freqz(b, a=1, worN=512, whole=False, plot=None, fs=2 * np.pi, include_nyquist=False):
    # SciPy's steps (signal/_filter_design.py) for 1-d coefficients: the FFT of b divided by
    # a, or both polynomials evaluated by Horner's rule at the frequencies (constants).
    b, a = np.atleast_1d(b), np.atleast_1d(a)
    if np.ndim(b) != 1 or np.ndim(a) != 1:
        raise UnsupportedOperationError("scipy.signal.freqz of coefficients that are not 1-d: "
                                        "mutad differentiates 1-d b and a.")
    if np.issubdtype(a.dtype, np.integer):
        a = a.astype(np.float64)
    res_dtype = np.result_type(b, a)
    real_dtype = np.finfo(res_dtype).dtype if np.issubdtype(res_dtype, np.inexact) else (
        np.float64)
    if carries_derivative(fs):  # a differentiated sampling frequency scales the frequencies
        if np.ndim(fs) != 0:
            raise ValueError("Sampling frequency fs must be a single scalar.")
        fs = fs * 1.0  # (SciPy's float(fs))
    else:
        fs = _filter_design._validate_fs(_setting(fs, "sampling frequency fs", "freqz"),
                                         allow_none=False)
    if worN is None:
        worN = 512
    h = None
    if _filter_design._is_int_type(worN):
        N = operator.index(worN)
        if N < 0:
            raise ValueError(f"worN must be nonnegative, got {N}")
        lastpoint = 2 * np.pi if whole else np.pi
        w = np.linspace(0, lastpoint, N, endpoint=include_nyquist and not whole,
                        dtype=real_dtype)
        n_fft = N if whole else 2 * (N - 1) if include_nyquist else 2 * N
        if np.size(a) == 1 and n_fft >= b.shape[0] and n_fft > 0:
            real = (np.issubdtype(b.dtype, np.floating) and np.issubdtype(a.dtype, np.floating))
            h = (fft.rfft if real else fft.fft)(b, n=n_fft, axis=0)
            h = h[:min(N, h.shape[0])]
            h = _updated(np.divide, h, a)
            if real and whole:
                stop = None if n_fft % 2 == 1 else -1
                h = np.concatenate((h, np.conj(np.flip(h[1:stop], axis=0))))
    else:
        if isinstance(worN, complex):
            worN = worN.real
        w = np.atleast_1d(array_argument(worN)).astype(res_dtype)  # (traced frequencies too)
        if np.issubdtype(w.dtype, np.integer):
            w = w.astype(np.float64)
        w = 2 * np.pi * w / _as_python_float(fs, w.dtype)
    if h is None:
        zm1 = np.exp(-1j * w)
        h = _horner(zm1, b) / _horner(zm1, a)
    w = w * _as_python_float(fs / (2 * np.pi), w.dtype)
    if plot is not None:
        plot(w, h)
    return w, h


def _horner(z, c):
    """SciPy's ``npp_polyval(z, c, tensor=False)``: Horner's rule, the last coefficient first."""
    if np.issubdtype(c.dtype, np.integer):
        c = c.astype(np.float64)
    c0 = np.broadcast_to(c[-1].astype(np.result_type(c, z)), np.shape(z))
    for i in range(2, c.shape[0] + 1):
        c0 = c[-i] + c0 * z
    return c0


# ----------------------------------------------------------------------------------------------
# Spectral analysis: SciPy's own steps (signal/_spectral_py.py, _short_time_fft.py). Windows
# and frequencies are constants; the FFTs are scipy.fft's, which mutad differentiates (SciPy's
# ShortTimeFFT calls them through the scipy.fft module, whose functions are mutad's while a
# differentiation runs).


def _stft_detrend(self, x, detr, p0=None, p1=None, *, k_offset=0, padding="zeros", axis=-1):
    """SciPy's ``ShortTimeFFT.stft_detrend``: the slices stacked, not written into SciPy's
    buffer (a plain array, which a traced value cannot be written into)."""
    if self.onesided_fft and np.iscomplexobj(x):
        raise ValueError(f"Complex-valued `x` not allowed for {self.fft_mode=}'! Set property "
                         "`fft_mode` to 'twosided' or 'centered'.")
    if isinstance(detr, str):
        detr = functools.partial(_detrend, type=detr)
    elif not (detr is None or callable(detr)):
        raise ValueError(f"Parameter {detr=} is not a str, function or None!")
    n = np.shape(x)[axis]
    if not (n >= (m2p := self.m_num - self.m_num_mid)):
        raise ValueError(f"length {n} of x along axis {axis} must be >= ceil(m_num/2) = {m2p}!")
    if np.ndim(x) > 1:
        x = np.moveaxis(x, axis, -1)
    p0, p1 = self.p_range(n, p0, p1)
    columns = [self._fft_func((x_ if detr is None else detr(x_)) * self.win.conj())
               for x_ in self._x_slices(x, k_offset, p0, p1, padding)]
    if columns:
        S = np.stack(columns, axis=-1).astype(complex)
    else:
        S = np.zeros(np.shape(x)[:-1] + (self.f_pts, 0), dtype=complex)
    if np.ndim(x) > 1:
        return np.moveaxis(S, -2, axis if axis >= 0 else axis - 1)
    return S


def _stft(self, x, p0=None, p1=None, *, k_offset=0, padding="zeros", axis=-1):
    """SciPy's ``ShortTimeFFT.stft``."""
    return _stft_detrend(self, x, None, p0, p1, k_offset=k_offset, padding=padding, axis=axis)


def _spectrogram(self, x, y=None, detr=None, *, p0=None, p1=None, k_offset=0,
                 padding="zeros", axis=-1):
    """SciPy's ``ShortTimeFFT.spectrogram``."""
    Sx = _stft_detrend(self, x, detr, p0, p1, k_offset=k_offset, padding=padding, axis=axis)
    if y is None or y is x:
        return Sx.real ** 2 + Sx.imag ** 2
    Sy = _stft_detrend(self, y, detr, p0, p1, k_offset=k_offset, padding=padding, axis=axis)
    return Sx * Sy.conj()


def _istft(self, S, k0=0, k1=None, *, f_axis=-2, t_axis=-1):
    """SciPy's ``ShortTimeFFT.istft``: its overlap-add into a buffer of the differentiation's
    (its values SciPy's: the same additions into zeros, in the same order)."""
    if f_axis == t_axis:
        raise ValueError(f"{f_axis=} may not be equal to {t_axis=}!")
    if S.shape[f_axis] != self.f_pts:
        raise ValueError(f"{S.shape[f_axis]=} must be equal to {self.f_pts=} ({S.shape=})!")
    n_min = self.m_num - self.m_num_mid
    if not (S.shape[t_axis] >= (q_num := self.p_num(n_min))):
        raise ValueError(f"{S.shape[t_axis]=} needs to have at least {q_num} slices "
                         f"({S.shape=})!")
    if t_axis != S.ndim - 1 or f_axis != S.ndim - 2:
        t_axis = S.ndim + t_axis if t_axis < 0 else t_axis
        f_axis = S.ndim + f_axis if f_axis < 0 else f_axis
        S = np.moveaxis(S, (f_axis, t_axis), (-2, -1))
    q_max = S.shape[-1] + self.p_min
    k_max = (q_max - 1) * self.hop + self.m_num - self.m_num_mid
    k1 = k_max if k1 is None else k1
    if not (self.k_min <= k0 < k1 <= k_max):
        raise ValueError(f"({self.k_min=}) <= ({k0=}) < ({k1=}) <= ({k_max=}) is false!")
    if not (num_pts := k1 - k0) >= n_min:
        raise ValueError(f"({k1=}) - ({k0=}) = {num_pts} has to be at least the half the "
                         f"window length {n_min}!")
    q0 = k0 // self.hop + self.p_min if k0 >= 0 else k0 // self.hop
    q1 = min(self.p_max(k1), q_max)
    k_q0, k_q1 = self.nearest_k_p(k0), self.nearest_k_p(k1, left=False)
    n_pts = k_q1 - k_q0 + self.m_num - self.m_num_mid
    x = np.zeros_like(S, shape=S.shape[:-2] + (n_pts,),
                      dtype=float if self.onesided_fft else complex)
    for q_ in range(q0, q1):
        xs = self._ifft_func(S[..., :, q_ - self.p_min]) * self.dual_win
        i0 = q_ * self.hop - self.m_num_mid
        i1 = min(i0 + self.m_num, n_pts + k0)
        j0, j1 = 0, i1 - i0
        if i0 < k0:
            j0 += k0 - i0
            i0 = k0
        x[..., i0 - k0:i1 - k0] += xs[..., j0:j1]
    x = x[..., :k1 - k0]
    if x.ndim > 1:
        x = np.moveaxis(x, -1, f_axis if f_axis < x.ndim else t_axis)
    return x


# ShortTimeFFT's methods, called with traced arrays by user code, run these steps.
for _name, _method in (("stft_detrend", _stft_detrend), ("stft", _stft),
                       ("spectrogram", _spectrogram), ("istft", _istft)):
    defmethod(_signal.ShortTimeFFT, _name, _method)


@stands_in_for(_signal.csd)
def csd(x, y, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    # SciPy's steps: a ShortTimeFFT's cross-spectrogram of the segments, averaged.
    same_data, axis = y is x, int(axis)
    x = _array(x)
    y = x if same_data else _array(y)
    if not same_data:
        x_outer, y_outer = list(np.shape(x)), list(np.shape(y))
        x_outer.pop(axis)
        y_outer.pop(axis)
        try:
            outer_shape = np.broadcast_shapes(x_outer, y_outer)
        except ValueError as e:
            raise ValueError("x and y cannot be broadcast together.") from e
        if np.size(x) == 0 or np.size(y) == 0:
            out_shape = outer_shape + (min([np.shape(x)[axis], np.shape(y)[axis]]),)
            empty_out = np.moveaxis(np.empty(out_shape), -1, axis)
            return empty_out, empty_out
        out_dtype = np.result_type(x, y, np.complex64)
    else:
        if np.size(x) == 0:
            return np.empty(np.shape(x)), np.empty(np.shape(x))
        out_dtype = np.result_type(x, np.complex64)
    n = np.shape(x)[axis] if same_data else max(np.shape(x)[axis], np.shape(y)[axis])
    if isinstance(window, str) or isinstance(window, tuple):
        nperseg = int(nperseg) if nperseg is not None else 256
        if nperseg < 1:
            raise ValueError(f"Parameter {nperseg=} is not a positive integer!")
        elif n < nperseg:
            warnings.warn(f"{nperseg=} is greater than signal length max(len(x), len(y)) = "
                          f"{n}, using nperseg = {n}", stacklevel=3)
            nperseg = n
        win = _signal.get_window(window, nperseg)
    else:
        win = np.asarray(window)
        if nperseg is None:
            nperseg = len(win)
    if nperseg != len(win):
        raise ValueError(f"{nperseg=} does not equal {len(win)=}")
    nfft = int(nfft) if nfft is not None else nperseg
    if nfft < nperseg:
        raise ValueError(f"{nfft=} must be greater than or equal to {nperseg=}!")
    noverlap = int(noverlap) if noverlap is not None else nperseg // 2
    if noverlap >= nperseg:
        raise ValueError(f"{noverlap=} must be less than {nperseg=}!")
    if np.iscomplexobj(x) and return_onesided:
        return_onesided = False
    if np.shape(x)[axis] < np.shape(y)[axis]:
        z_shape = list(np.shape(y))
        z_shape[axis] = np.shape(y)[axis] - np.shape(x)[axis]
        x = np.concatenate((x, np.zeros(z_shape)), axis=axis)
    elif np.shape(y)[axis] < np.shape(x)[axis]:
        z_shape = list(np.shape(x))
        z_shape[axis] = np.shape(x)[axis] - np.shape(y)[axis]
        y = np.concatenate((y, np.zeros(z_shape)), axis=axis)
    if scaling not in (scales := {"spectrum": "magnitude", "density": "psd"}):
        raise ValueError(f"Parameter {scaling=} not in {scales}!")
    SFT = _signal.ShortTimeFFT(win, nperseg - noverlap, fs,
                               fft_mode="onesided" if return_onesided else "twosided",
                               mfft=nfft, scale_to=scales[scaling], phase_shift=None)
    # SciPy's csd computes X.conj() * Y: the spectrogram of (y, x).
    Pxy = _spectrogram(SFT, y, x, detr=None if detrend is False else detrend, p0=0,
                       p1=(n - noverlap) // SFT.hop, k_offset=nperseg // 2, axis=axis)
    if return_onesided:
        f_axis = Pxy.ndim - 1 + axis if axis < 0 else axis
        Pxy = np.moveaxis(Pxy, f_axis, -1)
        Pxy[..., 1:-1 if SFT.mfft % 2 == 0 else None] *= 2
        Pxy = np.moveaxis(Pxy, -1, f_axis)
    if Pxy.shape[-1] > 1:
        if average == "median":
            # np.median's derivative: the middle segment's (the mean of the two middle ones).
            bias = _spectral_py._median_bias(Pxy.shape[-1])
            if np.iscomplexobj(Pxy):
                Pxy = np.median(np.real(Pxy), axis=-1) + np.median(np.imag(Pxy), axis=-1) * 1j
            else:
                Pxy = np.median(Pxy, axis=-1)
            Pxy /= bias
        elif average == "mean":
            Pxy = Pxy.mean(axis=-1)
        else:
            raise ValueError(f"Parameter {average=} must be 'median' or 'mean'!")
    else:
        Pxy = np.reshape(Pxy, Pxy.shape[:-1])
    Pxy = Pxy.astype(out_dtype)
    if same_data:
        Pxy = Pxy.real
    return SFT.f, Pxy


@stands_in_for(_signal.welch)
def welch(x, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1, average="mean"):
    freqs, Pxx = csd(x, x, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling,
                     axis=axis, average=average)
    return freqs, Pxx.real


@stands_in_for(_signal.periodogram)
def periodogram(x, fs=1.0, window="boxcar", nfft=None, detrend="constant",
                return_onesided=True, scaling="density", axis=-1):
    # SciPy's steps: welch of one segment, the signal cut to nfft.
    x = _array(x)
    if np.size(x) == 0:
        return np.empty(np.shape(x)), np.empty(np.shape(x))
    if window is None:
        window = "boxcar"
    length = np.shape(x)[axis]
    if nfft is None:
        nperseg = length
    elif nfft == length:
        nperseg = nfft
    elif nfft > length:
        nperseg = length
    else:
        s = [np.s_[:]] * np.ndim(x)
        s[axis] = np.s_[:nfft]
        x = x[tuple(s)]
        nperseg = nfft
        nfft = None
    if hasattr(window, "size") and window.size != nperseg:
        raise ValueError("the size of the window must be the same size of the input on the "
                         "specified axis")
    return welch(x, fs=fs, window=window, nperseg=nperseg, noverlap=0, nfft=nfft,
                 detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis)


@stands_in_for(_signal.coherence)
def coherence(x, y, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None,
              detrend="constant", axis=-1):
    settings = dict(fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                    detrend=detrend, axis=axis)
    freqs, Pxx = welch(x, **settings)
    _, Pyy = welch(y, **settings)
    _, Pxy = csd(x, y, **settings)
    return freqs, np.abs(Pxy) ** 2 / Pxx / Pyy


def _spectral_helper(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
                     detrend="constant", return_onesided=True, scaling="density", axis=-1,
                     mode="psd", boundary=None, padded=False):
    """SciPy's ``_spectral_helper`` (of ``stft`` and ``spectrogram``), for x alone."""
    if mode not in ["psd", "stft"]:
        raise ValueError(f"Unknown value for mode {mode}, must be one of: {{'psd', 'stft'}}")
    boundary_funcs = {"even": _arraytools.even_ext, "odd": _arraytools.odd_ext,
                      "constant": _arraytools.const_ext, "zeros": _arraytools.zero_ext,
                      None: None}
    if boundary not in boundary_funcs:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(boundary_funcs.keys())}")
    if y is not x:
        raise UnsupportedOperationError("the cross spectral helper: use scipy.signal.csd.")
    axis = int(axis)
    outdtype = np.result_type(x, np.complex64)
    if np.size(x) == 0:
        return np.empty(np.shape(x)), np.empty(np.shape(x)), np.empty(np.shape(x))
    if np.ndim(x) > 1 and axis != -1:
        x = np.moveaxis(x, axis, -1)
    if nperseg is not None:
        nperseg = int(nperseg)
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    win, nperseg = _spectral_py._triage_segments(window, nperseg,
                                                 input_length=np.shape(x)[-1])
    if nfft is None:
        nfft = nperseg
    elif nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    else:
        nfft = int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    if boundary is not None:
        x = boundary_funcs[boundary](x, nperseg // 2, axis=-1)
    if padded:
        nadd = (-(np.shape(x)[-1] - nperseg) % nstep) % nperseg
        x = np.concatenate((x, np.zeros(list(np.shape(x)[:-1]) + [nadd])), axis=-1)
    if not detrend:
        def detrend_func(d):
            return d
    elif not callable(detrend):
        def detrend_func(d):
            return _detrend(d, type=detrend, axis=-1)
    elif axis != -1:
        def detrend_func(d):
            return np.moveaxis(detrend(np.moveaxis(d, -1, axis)), axis, -1)
    else:
        detrend_func = detrend
    if np.result_type(win, np.complex64) != outdtype:
        win = win.astype(outdtype)
    if scaling == "density":
        scale = 1.0 / (fs * (win * win).sum())
    elif scaling == "spectrum":
        scale = 1.0 / win.sum() ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling!r}")
    if mode == "stft":
        scale = np.sqrt(scale)
    if return_onesided and np.iscomplexobj(x):
        warnings.warn("Input data is complex, switching to return_onesided=False",
                      stacklevel=3)
    sides = "onesided" if return_onesided and not np.iscomplexobj(x) else "twosided"
    freqs = (_fft.fftfreq if sides == "twosided" else _fft.rfftfreq)(nfft, 1 / fs)
    # SciPy's _fft_helper. Its windows are a writeable view; nothing writes through it, and
    # mutad refuses writes through overlapping windows, so they are read-only here.
    if nperseg == 1 and noverlap == 0:
        result = x[..., np.newaxis]
    else:
        result = np.lib.stride_tricks.sliding_window_view(x, window_shape=nperseg, axis=-1)
        result = result[..., 0::nstep, :]
    result = win * detrend_func(result)
    result = fft.fft(result, n=nfft) if sides == "twosided" else fft.rfft(result.real, n=nfft)
    if mode == "psd":
        result = np.conjugate(result) * result
    result = _updated(np.multiply, result, scale)
    if sides == "onesided" and mode == "psd":
        if nfft % 2:
            result[..., 1:] *= 2
        else:
            result[..., 1:-1] *= 2
    time = np.arange(nperseg / 2, np.shape(x)[-1] - nperseg / 2 + 1,
                     nperseg - noverlap) / (fs if isinstance(fs, Tracer) else float(fs))
    if boundary is not None:
        time -= (nperseg / 2) / fs
    result = result.astype(outdtype)
    if mode != "stft":
        result = result.real
    if axis < 0:
        axis -= 1
    return freqs, time, np.moveaxis(result, -1, axis)


@stands_in_for(_signal.stft)
def stft(x, fs=1.0, window="hann_periodic", nperseg=256, noverlap=None, nfft=None,
         detrend=False, return_onesided=True, boundary="zeros", padded=True, axis=-1,
         scaling="spectrum"):
    if scaling == "psd":
        scaling = "density"
    elif scaling != "spectrum":
        raise ValueError(f"Parameter {scaling=} not in ['spectrum', 'psd']!")
    x = _array(x)
    return _spectral_helper(x, x, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, scaling=scaling, axis=axis, mode="stft",
                            boundary=boundary, padded=padded)


@stands_in_for(_signal.spectrogram)
def spectrogram(x, fs=1.0, window=("tukey_periodic", 0.25), nperseg=None, noverlap=None,
                nfft=None, detrend="constant", return_onesided=True, scaling="density",
                axis=-1, mode="psd"):
    modelist = ["psd", "complex", "magnitude", "angle", "phase"]
    if mode not in modelist:
        raise ValueError(f"unknown value for mode {mode}, must be one of {modelist}")
    x = _array(x)
    window, nperseg = _spectral_py._triage_segments(window, nperseg,
                                                    input_length=np.shape(x)[axis])
    if noverlap is None:
        noverlap = nperseg // 8
    freqs, time, Sxx = _spectral_helper(x, x, fs, window, nperseg, noverlap, nfft, detrend,
                                        return_onesided, scaling, axis,
                                        mode="psd" if mode == "psd" else "stft")
    if mode == "magnitude":
        Sxx = np.abs(Sxx)
    elif mode in ["angle", "phase"]:
        Sxx = np.angle(Sxx)
        if mode == "phase":
            Sxx = np.unwrap(Sxx, axis=axis - 1 if axis < 0 else axis)
    return freqs, time, Sxx


@stands_in_for(_signal.istft)
def istft(Zxx, fs=1.0, window="hann_periodic", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2, scaling="spectrum"):
    # SciPy's steps: the inverse FFT of each segment, windowed and overlap-added into a
    # buffer of the differentiation's (the same additions into zeros, in the same order),
    # divided by the summed squared window.
    Zxx = _array(Zxx) + 0j
    freq_axis, time_axis = int(freq_axis), int(time_axis)
    if Zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    nseg = Zxx.shape[time_axis]
    n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
    if nperseg is None:
        nperseg = n_default
    else:
        nperseg = int(nperseg)
        if nperseg < 1:
            raise ValueError("nperseg must be a positive integer")
    if nfft is None:
        nfft = nperseg if input_onesided and nperseg == n_default + 1 else n_default
    elif nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    else:
        nfft = int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    if time_axis != Zxx.ndim - 1 or freq_axis != Zxx.ndim - 2:
        if freq_axis < 0:
            freq_axis = Zxx.ndim + freq_axis
        if time_axis < 0:
            time_axis = Zxx.ndim + time_axis
        zouter = list(range(Zxx.ndim))
        for ax in sorted([time_axis, freq_axis], reverse=True):
            zouter.pop(ax)
        Zxx = np.transpose(Zxx, zouter + [freq_axis, time_axis])
    if isinstance(window, str) or type(window) is tuple:
        win = _signal.get_window(window, nperseg)
    else:
        win = np.asarray(window)
        if len(win.shape) != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
    ifunc = fft.irfft if input_onesided else fft.ifft
    xsubs = ifunc(Zxx, axis=-2, n=nfft)[..., :nperseg, :]
    outputlength = nperseg + (nseg - 1) * nstep
    x = np.zeros_like(xsubs, shape=tuple(Zxx.shape[:-2]) + (outputlength,))
    norm = np.zeros(outputlength, dtype=xsubs.dtype)
    if np.result_type(win, xsubs) != xsubs.dtype:
        win = win.astype(xsubs.dtype)
    if scaling == "spectrum":
        xsubs *= win.sum()
    elif scaling == "psd":
        xsubs *= np.sqrt(fs * sum(win ** 2))
    else:
        raise ValueError(f"Parameter {scaling=} not in ['spectrum', 'psd']!")
    for ii in range(nseg):
        x[..., ii * nstep:ii * nstep + nperseg] += xsubs[..., ii] * win
        norm[..., ii * nstep:ii * nstep + nperseg] += win ** 2
    if boundary:
        x = x[..., nperseg // 2:-(nperseg // 2)]
        norm = norm[..., nperseg // 2:-(nperseg // 2)]
    if np.sum(norm > 1e-10) != len(norm):
        warnings.warn("NOLA condition failed, STFT may not be invertible."
                      + (" Possibly due to missing boundary" if not boundary else ""),
                      stacklevel=2)
    x /= np.where(norm > 1e-10, norm, 1.0)
    if input_onesided:
        x = x.real
    if x.ndim > 1 and time_axis != Zxx.ndim - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = np.moveaxis(x, -1, time_axis)
    time = np.arange(x.shape[0]) / float(fs)
    return time, x


# ----------------------------------------------------------------------------------------------
# lombscargle: SciPy's steps on the differentiated functions (its values bit for bit)

_NO_PRECENTER = inspect.signature(_signal.lombscargle).parameters["precenter"].default


def _float64(v, name):
    if innermost((v,)) is None:
        return np.asarray(v, dtype=np.float64)
    if np.iscomplexobj(v):
        raise UnsupportedOperationError(
            f"scipy.signal.lombscargle of a complex {name}: SciPy casts it to float64 (dropping "
            "its imaginary part with a ComplexWarning); pass its real part.")
    return v if v.dtype == np.float64 else v.astype(np.float64)


def _lombscargle(x, y, freqs, *, precenter=_NO_PRECENTER, normalize=False, weights=None,
                 floating_mean=False):
    """SciPy's ``lombscargle``, step by step (its casts to float64 aside)."""
    if weights is None:
        weights = np.ones_like(stop_gradient(y), dtype=np.float64)
    else:
        weights = _float64(weights, "weights")
    x, y, freqs = _float64(x, "x"), _float64(y, "y"), _float64(freqs, "freqs")
    if not (x.ndim == 1 and x.size > 0 and x.shape == y.shape == weights.shape):
        raise ValueError("Parameters x, y, weights must be 1-D arrays of "
                         "equal non-zero length!")
    if not (freqs.ndim == 1 and freqs.size > 0):
        raise ValueError("Parameter freqs must be a 1-D array of non-zero length!")
    if not (np.all(weights >= 0) and np.sum(weights) > 0):
        raise ValueError("Parameter weights must have only non-negative entries "
                         "which sum to a positive value!")
    if isinstance(normalize, bool):
        normalize = "normalize" if normalize else "power"
    if normalize not in ["power", "normalize", "amplitude"]:
        raise ValueError("Normalize must be: False (or 'power'), True (or 'normalize'), "
                         "or 'amplitude'.")
    weights = weights * (1.0 / weights.sum())
    if precenter is not _NO_PRECENTER:
        warnings.warn("Use of parameter 'precenter' is deprecated as of SciPy 1.17.0 and "
                      "will be removed in 1.19.0. Please leave 'precenter' unspecified.",
                      DeprecationWarning, stacklevel=3)
        if precenter:
            y = y - y.mean()
    freqs = freqs.reshape(1, -1)
    x = x.reshape(-1, 1)
    y = y.reshape(-1, 1)
    weights = weights.reshape(-1, 1)
    weights_y = weights * y
    freqst = freqs * x
    coswt = np.cos(freqst)
    sinwt = np.sin(freqst)
    Y = np.dot(weights.T, y)
    CC = np.dot(weights.T, coswt * coswt)
    SS = 1.0 - CC
    CS = np.dot(weights.T, coswt * sinwt)
    if floating_mean:
        C = np.dot(weights.T, coswt)
        S = np.dot(weights.T, sinwt)
        CC -= C * C
        SS -= S * S
        CS -= C * S
    tau = 0.5 * np.arctan2(2.0 * CS, CC - SS)
    freqst_tau = freqst - tau
    coswt_tau = np.cos(freqst_tau)
    sinwt_tau = np.sin(freqst_tau)
    YC = np.dot(weights_y.T, coswt_tau)
    YS = np.dot(weights_y.T, sinwt_tau)
    CC = np.dot(weights.T, coswt_tau * coswt_tau)
    SS = 1.0 - CC
    if floating_mean:
        C = np.dot(weights.T, coswt_tau)
        S = np.dot(weights.T, sinwt_tau)
        YC -= Y * C
        YS -= Y * S
        CC -= C * C
        SS -= S * S
    epsneg = np.finfo(np.float64).epsneg
    CC[CC < epsneg] = epsneg
    SS[SS < epsneg] = epsneg
    a = YC / CC
    b = YS / SS
    pgram = 2.0 * (a * YC + b * YS)
    pgram = np.squeeze(pgram)
    if normalize == "power":
        pgram *= float(x.shape[0]) / 4.0
    elif normalize == "normalize":
        YY = np.dot(weights_y.T, y)
        if floating_mean:
            YY -= Y * Y
        pgram *= 0.5 / np.squeeze(YY)
    else:
        a = np.squeeze(a)
        b = np.squeeze(b)
        tau = np.squeeze(tau)
        pgram = (a + 1j * b) * np.exp(1j * tau)
    return pgram


lombscargle = StandIn(_signal.lombscargle, _lombscargle)


# ----------------------------------------------------------------------------------------------
# Waveforms and second-order designs of differentiated parameters: SciPy's steps


def _float(x):
    """SciPy's ``float(x)`` of a parameter: a traced one as a 0-d float64 array."""
    return np.reshape(x, ()).astype(np.float64) if _traced_among(x) else float(x)


@stands_in_for(_signal.chirp)
def chirp(t: Any, f0: Any, t1: Any, f1: Any, method: str = "linear", phi: Any = 0,
          vertex_zero: bool = True, *, complex: bool = False) -> Any:
    """SciPy's steps (signal/_waveforms.py) on differentiated times, frequencies and phase."""
    phase = _chirp_phase(_array_of(t), _float(f0), _float(t1), _float(f1), method,
                         vertex_zero) + np.deg2rad(phi)
    return np.exp(1j * phase) if complex else np.cos(phase)


def _chirp_phase(t, f0, t1, f1, method, vertex_zero):
    pi = np.pi
    if method in ["linear", "lin", "li"]:
        beta = (f1 - f0) / t1
        return 2 * pi * (f0 * t + 0.5 * beta * t * t)
    if method in ["quadratic", "quad", "q"]:
        beta = (f1 - f0) / (t1 ** 2)
        if vertex_zero:
            return 2 * pi * (f0 * t + beta * t ** 3 / 3)
        return 2 * pi * (f1 * t + beta * ((t1 - t) ** 3 - t1 ** 3) / 3)
    if method in ["logarithmic", "log", "lo"]:
        if f0 * f1 <= 0.0:
            raise ValueError("For a logarithmic chirp, f0 and f1 must be nonzero and have the "
                             "same sign.")
        if f0 == f1:
            return 2 * pi * f0 * t
        beta = t1 / np.log(f1 / f0)
        return 2 * pi * beta * f0 * (np.power(f1 / f0, t / t1) - 1.0)
    if method in ["hyperbolic", "hyp"]:
        if f0 == 0 or f1 == 0:
            raise ValueError("For a hyperbolic chirp, f0 and f1 must be nonzero.")
        if f0 == f1:
            return 2 * pi * f0 * t
        sing = -f1 * t1 / (f0 - f1)
        return 2 * pi * (-sing * f0) * np.log(np.abs(1 - t / sing))
    raise ValueError("method must be 'linear', 'quadratic', 'logarithmic', or 'hyperbolic', "
                     f"but a value of {method!r} was given.")


@stands_in_for(_signal.sawtooth)
def sawtooth(t: Any, width: Any = 1) -> Any:
    """SciPy's steps (signal/_waveforms.py) on differentiated times and width: NaN where the
    width is outside [0, 1], ``tmod / (π w) - 1`` on the rise, ``(π (w + 1) - tmod) /
    (π (1 - w))`` on the fall (each branch's width 1/2 where the other is taken, so that its
    derivative there is finite)."""
    t, w = _array_of(t), _array_of(width)
    w = w + (t - t)
    t = t + (w - w)
    dtype = t.dtype if t.dtype.char in "fFdD" else np.dtype("d")
    pi = np.pi
    outside = (w > 1) | (w < 0)
    tmod = np.mod(t, 2 * pi)
    rising = ~outside & (tmod < w * 2 * pi)
    falling = ~outside & ~rising
    up = np.where(rising, w, 0.5)
    down = np.where(falling, w, 0.5)
    y = np.where(rising, tmod / (pi * up) - 1, (pi * (down + 1) - tmod) / (pi * (1 - down)))
    return np.where(outside, np.nan, y).astype(dtype)


def _notch_peak(ftype):
    def design(w0: Any, Q: Any, fs: Any = 2.0, *, xp: Any = None, device: Any = None) -> Any:
        """SciPy's steps (signal/_filter_design.py, ``_design_notch_peak_filter``) on a
        differentiated frequency ``w0`` and quality factor ``Q``."""
        _refuse_followed(fs, "the sampling frequency fs of a filter design",
                         "Pass fs as a constant.")
        fs = _filter_design._validate_fs(fs, allow_none=False)
        w0 = 2 * _float(w0) / fs
        Q = _float(Q)
        if w0 > 1.0 or w0 < 0.0:
            raise ValueError("w0 should be such that 0 < w0 < 1")
        bw = w0 / Q
        bw = bw * np.pi
        w0 = w0 * np.pi
        beta = np.tan(bw / 2.0)
        gain = 1.0 / (1.0 + beta)
        if ftype == "notch":
            b = gain * array_argument([1.0, -2.0 * np.cos(w0), 1.0])
        else:
            b = (1.0 - gain) * np.array([1.0, 0.0, -1.0])
        a = array_argument([1.0, -2.0 * gain * np.cos(w0), (2.0 * gain - 1.0)])
        return b, a
    return design


iirnotch = stands_in_for(_signal.iirnotch)(_notch_peak("notch"))
iirpeak = stands_in_for(_signal.iirpeak)(_notch_peak("peak"))


@stands_in_for(_signal.bilinear)
def bilinear(b: Any, a: Any, fs: Any = 1.0) -> Any:
    """SciPy's steps (signal/_filter_design.py) on differentiated coefficients: the
    transformed numerator and denominator are linear in ``b`` and ``a`` (SciPy's values, their
    derivatives the map's, SciPy's polynomial arithmetic on the identity columns), then
    ``normalize``."""
    _refuse_followed(fs, "the sampling frequency fs of bilinear", "Pass fs as a constant.")
    b, a = np.atleast_1d(_array_of(b)), np.atleast_1d(_array_of(a))
    if not np.ndim(a) == 1:
        raise ValueError(f"Parameter a is not a 1d array since a.shape={np.shape(a)}")
    if not np.ndim(b) == 1:
        raise ValueError(f"Parameter b is not a 1d array since b.shape={np.shape(b)}")
    # SciPy's np.trim_zeros(·, 'f'): the leading zeros, by value
    b, a = (c[int(np.argmax(settled(c, "bilinear") != 0)) if np.any(
        settled(c, "bilinear") != 0) else len(c):] for c in (b, a))
    fs = _filter_design._validate_fs(fs, allow_none=False)
    fac = np.sqrt(fs * 2)
    N = max(len(a), len(b)) - 1

    def transformed(c):  # SciPy's, of plain coefficients
        zp1 = np.polynomial.Polynomial((+1, 1)) / fac
        zm1 = np.polynomial.Polynomial((-1, 1)) * fac
        total = sum(c_ * zp1 ** (N - q) * zm1 ** q for q, c_ in enumerate(c[::-1]))
        return np.asarray(total.coef[::-1].copy())

    def linear(c):
        size = len(transformed(settled(c, "bilinear")))  # (NumPy trims a zero leading one)

        def laid_out(v):  # of that size: the coefficients of the identity columns too
            found = transformed(v)
            return np.concatenate([np.zeros(max(size - len(found), 0)), found])[-size:]
        return linear_map(laid_out, len(c), "scipy.signal.bilinear")(c)

    return _normalize(linear(b), linear(a))


# SciPy's own code on traced coefficients (ScipysCode): tf2sos is zpk2sos of tf2zpk, the
# response of second-order sections the product of freqz's (each of them routed); deconvolve
# is lfilter of an impulse and convolve (routed)
tf2sos = ScipysCode(_signal.tf2sos)
sosfreqz = ScipysCode(_signal.sosfreqz)
freqz_sos = ScipysCode(_signal.freqz_sos)
deconvolve = ScipysCode(_signal.deconvolve)
# square's steps: its values, constant between the jumps its decisions on the times and duty
# place, have the derivative zero where they have one
square = ScipysCode(_signal.square)


def _spline_evaluation(name):
    """``scipy.signal.<name>`` (``cspline1d_eval``, ``qspline1d_eval``) of traced coefficients
    at constant points: a sum of the coefficients near each point times B-spline weights of the
    point alone, linear in the coefficients (``linear_map``; SciPy's compiled B-spline basis
    evaluates the weights, which the allocation mode's followed buffers cannot reach)."""
    original = getattr(_signal, name)

    @stands_in_for(original)
    def evaluate(cj, newx, dx=1.0, x0=0):
        if any(map(carries_derivative, (newx, dx, x0))):
            raise UnsupportedOperationError(
                f"scipy.signal.{name} at differentiated points (newx, dx or x0): mutad "
                "differentiates it in the coefficients cj alone. Pass the points as constants, "
                "or evaluate the spline with scipy.interpolate.BSpline, which mutad "
                "differentiates in its points too.")
        cj, newx = array_argument(cj), settled(newx, name)
        if np.ndim(cj) != 1:
            raise UnsupportedOperationError(
                f"scipy.signal.{name} of differentiated coefficients of shape {np.shape(cj)}: "
                "mutad differentiates a 1-D array of coefficients, as cspline1d makes.")
        return linear_map(lambda c: original(c, newx, dx, x0), np.size(cj),
                          f"scipy.signal.{name}")(cj)

    return evaluate


cspline1d_eval = _spline_evaluation("cspline1d_eval")
qspline1d_eval = _spline_evaluation("qspline1d_eval")


@stands_in_for(_signal.sepfir2d)
def sepfir2d(input, hrow, hcol):
    """``scipy.signal.sepfir2d`` of a traced image and constant kernels: a separable filter,
    ``C @ input @ R.T`` for a filter ``R`` along the rows and ``C`` along the columns, each
    with SciPy's mirror-symmetric boundaries (SciPy's compiled code reads the image's memory,
    which a traced array does not hand out). The values are SciPy's; the derivatives are
    those of the matrices, which SciPy's filter of identities gives."""
    if carries_derivative(hrow) or carries_derivative(hcol):
        raise UnsupportedOperationError(
            "scipy.signal.sepfir2d of differentiated kernels (hrow, hcol): mutad "
            "differentiates it in the image alone. Pass the kernels as constants, or write "
            "the filter with scipy.signal.convolve2d, which mutad differentiates in both.")
    image = array_argument(input)
    if np.ndim(image) != 2:  # SciPy's own error
        sepfir2d.original(stop_gradient(image), hrow, hcol)
        raise UnsupportedOperationError(
            f"scipy.signal.sepfir2d of a differentiated array of shape {np.shape(image)}: "
            "mutad differentiates a 2-D image.")
    return _separable_filter(hrow, hcol, *np.shape(image))(image)


def _separable_filter(hrow, hcol, rows, columns):
    """``sepfir2d(·, hrow, hcol)`` of images of ``rows × columns``, as a function that
    differentiates: linear, ``C @ x @ RT``, its transpose ``C.T @ u @ RT.T``."""
    original = sepfir2d.original  # (SciPy's name for it is routed to the stand-in)
    C = original(np.eye(rows), [1.0], hcol)  # the columns' filter of each column of I
    RT = original(np.eye(columns), hrow, [1.0])  # the rows' filter of each row of I: R.T
    return linear_function(lambda x: original(x, hrow, hcol), lambda u: C.T @ u @ RT.T,
                           lambda v: C @ v @ RT, "scipy.signal.sepfir2d")


# symiirorder1: SciPy's Python code (followed) starts its forward pass from the compiled
# symiirorder1_ic, the mirror-symmetric start x[0] + Σ_{k=1..K} z1ᵏ x[k-1], summed term by term
# until |z1|ᵏ is within the precision (K a decision of |z1|). The stand-in finds SciPy's K as
# the number of terms whose sum, taken in SciPy's order, is SciPy's value bit for bit; where no
# single K is (a zero term, a dtype SciPy sums otherwise) it refuses.


@stands_in_for(_spline.symiirorder1_ic)
def _symiirorder1_ic(signal, z1, precision=-1.0):
    plain_signal, plain_z1 = _plain(signal), complex(_plain(z1)) if np.iscomplexobj(
        _plain(z1)) else float(_plain(z1))
    value = _symiirorder1_ic.original(plain_signal, plain_z1, precision)
    rows = np.reshape(plain_signal, (-1, np.shape(plain_signal)[-1]))
    total, power, terms = rows[:, 0].copy(), 1.0, []
    for k in range(rows.shape[1]):
        power = power * plain_z1
        total = total + power * rows[:, k]
        if np.array_equal(total, np.ravel(value)):
            terms.append(k + 1)
    if len(terms) != 1:
        raise UnsupportedOperationError(
            "scipy.signal.symiirorder1 of differentiated values where mutad cannot tell how "
            "many terms SciPy's starting sum took (a zero term, or another summation order): "
            "its derivative would be another sum's. Filter with scipy.signal.lfilter, whose "
            "start you give as zi.")
    count = terms[0]
    powers = z1 ** np.arange(1.0, count + 1.0)
    composition = signal[..., 0] + np.sum(signal[..., :count] * powers, axis=-1)
    return scipys_value(value, np.reshape(composition, np.shape(value)))
