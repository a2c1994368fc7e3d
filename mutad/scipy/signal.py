"""``scipy.signal`` functions mutad differentiates (``lfilter``, ``convolve``, ``fftconvolve``), by
SciPy's names too.

>>> import numpy as np, mutad
>>> from mutad.scipy import signal
>>> smooth = lambda b, x: (signal.lfilter(b, [1.0, -0.5], x) ** 2).sum()
>>> db, dx = mutad.gradient(smooth, np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0]))
>>> db.round(3).tolist(), dx.round(3).tolist()
([3.875, 3.75], [7.625, 5.25, 1.5])

``lfilter`` differentiates b, a, x and the initial state zi, along any axis, and with zi given
the final state zf it returns as well, in reverse and in forward mode.
"""

import functools

import numpy as np
import scipy.signal as _signal

from ..errors import UnsupportedOperationError
from ..registry import HOLOMORPHIC
from ..rules._helpers import accumulator, stacked, unbroadcast
from ._adjoints import scipy_adjoint

lfilter = scipy_adjoint(_signal.lfilter)
convolve = scipy_adjoint(_signal.convolve)
fftconvolve = scipy_adjoint(_signal.fftconvolve)

__all__ = ["convolve", "fftconvolve", "lfilter"]


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
    db, da, dx, _, dzi = (tuple(tangents) + (None,) * 5)[:5]
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
        _window(in1, in2, mode, setting if takes_axes else None)
        d1, d2 = (tuple(tangents) + (None, None))[:2]
        parts = [convolution(d, other, mode, setting) if first
                 else convolution(other, d, mode, setting)
                 for d, other, first in ((d1, in2, True), (d2, in1, False)) if d is not None]
        return (convolution(in1, in2, mode, setting),
                functools.reduce(np.add, parts) if parts else None)


_convolution_rules(convolve, "auto", takes_axes=False)
_convolution_rules(fftconvolve, None, takes_axes=True)
