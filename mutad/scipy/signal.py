"""``scipy.signal`` functions mutad differentiates: import them from here instead of SciPy.

>>> import numpy as np, mutad
>>> from mutad.scipy import signal
>>> smooth = lambda b, x: (signal.lfilter(b, [1.0, -0.5], x) ** 2).sum()
>>> db, dx = mutad.gradient(smooth, np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0]))
>>> db.round(3).tolist(), dx.round(3).tolist()
([3.875, 3.75], [7.625, 5.25, 1.5])
"""

import numpy as np
import scipy.signal as _signal

from ..errors import UnsupportedOperationError
from ._adjoints import scipy_adjoint

lfilter = scipy_adjoint(_signal.lfilter)

__all__ = ["lfilter"]


def _lagged_products(v, u, count):
    """``Σ_n v[..., n] u[..., n - k]`` for ``k < count``, summed over every leading axis too: the
    cross-correlation that turns a filter's cotangent into its coefficients' cotangents."""
    length = v.shape[-1]
    return np.array([np.vdot(v[..., k:], u[..., :length - k]) if k < length else 0.0
                     for k in range(count)])


@lfilter.rule
def _lfilter_rule(b, a, x, axis=-1, zi=None):
    if zi is not None:
        raise UnsupportedOperationError(
            "mutad.scipy.signal.lfilter(..., zi=...): initial conditions are not differentiated "
            "yet. Filter without zi, or prepend the past samples to x and drop their outputs "
            "(scipy.signal.lfiltic relates zi to past inputs and outputs).")
    y = _signal.lfilter(b, a, x, axis)
    x_last = np.moveaxis(x, axis, -1)
    y_last = np.moveaxis(y, axis, -1)

    def anticausal(numerator, signal):
        """The adjoint of the causal filter ``numerator / a`` along the last axis: the same
        filter run backwards in time (its matrix is lower triangular Toeplitz, its transpose
        the upper one)."""
        return np.flip(_signal.lfilter(numerator, a, np.flip(signal, -1), -1), -1)

    def back(dy):
        # A(z) y = B(z) x with SciPy's raw coefficients (it divides both by a[0], which leaves
        # the equation unchanged), so dy = A⁻¹ (dB x - dA y): with v = A⁻ᵀ ȳ,
        # b̄_k = Σ_n v[n] x[n-k], ā_k = -Σ_n v[n] y[n-k] (for every k, a[0] included), and
        # x̄ = (B/A)ᵀ ȳ. The filters are lower triangular Toeplitz matrices, so their
        # transposes are the same filters run backwards in time.
        dy_last = np.moveaxis(dy, axis, -1)
        v = anticausal([1.0], dy_last)
        db = _lagged_products(v, x_last, np.size(b))
        da = -_lagged_products(v, y_last, np.size(a))
        dx = np.moveaxis(anticausal(b, dy_last), -1, axis)
        return np.reshape(db, np.shape(b)), np.reshape(da, np.shape(a)), dx

    return y, back
