"""``scipy.signal`` functions mutad differentiates: import them from here instead of SciPy.

>>> import numpy as np, mutad
>>> from mutad.scipy import signal
>>> smooth = lambda b, x: (signal.lfilter(b, [1.0, -0.5], x) ** 2).sum()
>>> db, dx = mutad.gradient(smooth, np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0]))
>>> db.round(3).tolist(), dx.round(3).tolist()
([3.875, 3.75], [7.625, 5.25, 1.5])

``lfilter`` differentiates b, a, x and the initial state zi, along any axis, and with zi given
the final state zf it returns as well.
"""

import numpy as np
import scipy.signal as _signal

from ..tracing import unbroadcast
from ._adjoints import scipy_adjoint

lfilter = scipy_adjoint(_signal.lfilter)

__all__ = ["lfilter"]


def _lagged_products(v, u, count):
    """``Σ_n v[..., n] u[..., n - k]`` for ``k < count``, summed over every leading axis too: the
    cross-correlation that turns a filter's cotangent into its coefficients' cotangents."""
    length = v.shape[-1]
    return np.array([np.vdot(v[..., k:], u[..., :length - k]) if k < length else 0.0
                     for k in range(count)])


def _final_state_back(dzf, x, y, zi, b_normal, a_normal):
    """Cotangents from zf's cotangent ``dzf`` (all along the last axis).

    In SciPy's transposed direct form II, with n = N - 1 the last sample and K the filter order,
    zf[m] = Σ_i (b_{m+1+i} x[n-i] - a_{m+1+i} y[n-i]) + zi[m+N] (the last term when m+N < K),
    i running while m+1+i <= K and n-i >= 0, for the coefficients divided by a[0]. Returns the
    extra cotangents of x, y and zi and those of the divided coefficients (padded to K+1).
    """
    order, length = len(a_normal) - 1, x.shape[-1]
    dx, dy, dzi = np.zeros_like(x), np.zeros_like(y), np.zeros_like(zi)
    db_normal, da_normal = np.zeros(order + 1), np.zeros(order + 1)
    for m in range(order):
        for i in range(min(length - 1, order - m - 1) + 1):
            j, n = m + 1 + i, length - 1 - i
            dx[..., n] += b_normal[j] * dzf[..., m]
            dy[..., n] -= a_normal[j] * dzf[..., m]
            db_normal[j] += np.vdot(dzf[..., m], x[..., n])
            da_normal[j] -= np.vdot(dzf[..., m], y[..., n])
        if m + length < order:
            dzi[..., m + length] += dzf[..., m]
    return dx, dy, dzi, db_normal, da_normal


@lfilter.rule
def _lfilter_rule(b, a, x, axis=-1, zi=None):
    result = _signal.lfilter(b, a, x, axis, zi)
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
        return np.flip(_signal.lfilter(numerator, a, np.flip(signal, -1), -1), -1)

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
            da[0] += np.vdot(v[..., :start], zi_last[..., :start])
            dzi_full = dzi_final
            dzi_full[..., :start] += a_first * v[..., :start]
            dzi = np.moveaxis(unbroadcast(dzi_full, zi_shape), -1, axis)
            dx = dx + dx_final
            # zf used the coefficients divided by a[0]: b_j / a[0] and a_j / a[0] (j >= 1).
            db = db + db_normal[:np.size(b)] / a_first
            da[1:] += da_normal[1:np.size(a)] / a_first
            da[0] -= (np.dot(db_normal, b_normal) + np.dot(da_normal[1:], a_normal[1:])) / a_first
        return (np.reshape(db, np.shape(b)), np.reshape(da, np.shape(a)),
                np.moveaxis(dx, -1, axis), None, dzi)

    return result, back
