"""``scipy.signal`` functions mutad differentiates (``lfilter``, ``sosfilt``, ``filtfilt``,
``convolve``, ``fftconvolve``, ``correlate``, ``convolve2d``, ``correlate2d``,
``savgol_filter``, ``lfilter_zi``), by SciPy's names too.

>>> import numpy as np, mutad
>>> from mutad.scipy import signal
>>> smooth = lambda b, x: (signal.lfilter(b, [1.0, -0.5], x) ** 2).sum()
>>> db, dx = mutad.gradient(smooth, np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0]))
>>> db.round(3).tolist(), dx.round(3).tolist()
([3.875, 3.75], [7.625, 5.25, 1.5])

``lfilter`` differentiates b, a, x and the initial state zi, along any axis, and with zi given
the final state zf it returns as well, in reverse and in forward mode; ``sosfilt`` is its
cascade of sections (its value SciPy's own), ``filtfilt`` (``method="pad"``) SciPy's own steps
on it. ``convolve2d`` and ``correlate2d`` differentiate both operands and the fillvalue, for
every mode and boundary; ``savgol_filter`` is linear in x, ndimage's ``convolve1d`` but in
``mode="interp"``, whose end rows are SciPy's polynomial fits.
"""

import functools

import numpy as np
import scipy.signal as _signal
from scipy.signal import _arraytools, _signaltools

from ..errors import UnsupportedOperationError
from ..registry import HOLOMORPHIC
from ..rules._helpers import accumulator, gather_cotangent, stacked, unbroadcast
from . import ndimage
from ._adjoints import (ScipyAdjoint, StandIn, array_argument, array_tangent, scipy_adjoint,
                        stands_in_for)

lfilter = scipy_adjoint(_signal.lfilter)
convolve = scipy_adjoint(_signal.convolve)
fftconvolve = scipy_adjoint(_signal.fftconvolve)

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "fftconvolve", "filtfilt",
           "lfilter", "lfilter_zi", "savgol_filter", "sosfilt"]


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

        def back(dy):
            if np.size(in1) == 0 or np.size(in2) == 0:  # "same" of an empty in1: y is empty
                return (np.zeros_like(dy, shape=np.shape(in1)),
                        np.zeros_like(dy, shape=np.shape(in2)))
            # y is a window of the full convolution; each input's cotangent is the full
            # cotangent correlated with the other input: a valid convolution with it flipped
            # along the convolved axes (summed where the input was broadcast along the others).
            dfull = np.zeros_like(dy, shape=full)
            dfull[window] = dy
            return (unbroadcast(convolution(dfull, np.flip(in2, axes), "valid", setting),
                                np.shape(in1)),
                    unbroadcast(convolution(dfull, np.flip(in1, axes), "valid", setting),
                                np.shape(in2)))

        return y, back

    @convolution.jvp_rule
    def jvp(tangents, in1, in2, mode="full", setting=default):
        d1, d2 = map(array_tangent, (in1, in2), (tuple(tangents) + (None, None))[:2])
        in1, in2 = array_argument(in1), array_argument(in2)
        _window(in1, in2, mode, setting if takes_axes else None)
        parts = [convolution(d, other, mode, setting) if first
                 else convolution(other, d, mode, setting)
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

    def back(dy):
        if np.size(in1) == 0 or np.size(in2) == 0:
            return (np.zeros_like(dy, shape=np.shape(in1)),
                    np.zeros_like(dy, shape=np.shape(in2)))
        dfull = np.zeros_like(dy, shape=full)
        dfull[window] = dy
        return (unbroadcast(convolve(dfull, in2, "valid", method), np.shape(in1)),
                unbroadcast(np.flip(convolve(dfull, np.flip(in1), "valid", method)),
                            np.shape(in2)))

    return y, back


@correlate.jvp_rule
def _correlate_jvp(tangents, in1, in2, mode="full", method="auto"):
    d1, d2 = map(array_tangent, (in1, in2), (tuple(tangents) + (None, None))[:2])
    in1, in2 = array_argument(in1), array_argument(in2)
    _window(in1, in2, mode)
    parts = [correlate(d1, in2, mode, method)] if d1 is not None else []
    if d2 is not None:
        parts.append(correlate(in1, d2, mode, method))
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
            dfill = np.sum(np.where(sources == -1, spread, 0.0)) if boundary == "fill" else None
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
# Windows: SciPy's own, their arrays new ones the differentiated code may write into


for _maker in (_signal.get_window, *(getattr(_signal.windows, name)
                                     for name in _signal.windows.__all__)):
    if callable(_maker):
        StandIn(_maker, _maker)


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
    a = np.concatenate((a, np.zeros(n - np.shape(a)[0])))
    b = np.concatenate((b, np.zeros(n - np.shape(b)[0])))
    # companion(a).T has -a[1:] / a[0] (a[0] is 1) down its first column, ones above it.
    companion_t = np.eye(n - 1, k=1) - a[1:, None] * np.eye(1, n - 1)
    return np.linalg.solve(np.eye(n - 1) - companion_t, b[1:] - a[1:] * b[0])


@stands_in_for(_signal.filtfilt)
def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    if method != "pad":
        raise UnsupportedOperationError(
            "scipy.signal.filtfilt(method='gust'): mutad differentiates method='pad' only.")
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
