"""Wrong answers found by writing programs as scientists write them, each checked against NumPy's
and SciPy's values and exact derivatives (mpmath); every one failed before its fix."""

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import mutad

# ----------------------------------------------------------------------------------------------
# scipy.special.expn: E_n' = -E_(n-1), but SciPy has no E_-1 (its expn(-1, x) is NaN), so the
# derivative of E_0 = e^-x / x, and the second derivative of E_1, were NaN.

X = np.array([0.2, 0.7, 1.3, 2.0, 5.5])


def _exact(n, x, order):
    return np.array([float(mpmath.diff(lambda t: mpmath.expint(n, t), float(v), order))
                     for v in x])


@pytest.mark.filterwarnings("ignore:floating point number truncated")  # SciPy's, for n = 0.6
@pytest.mark.parametrize("n", [0, 0.6, 1, 2])
def test_expn_first_and_second_derivatives_at_every_order_n(n):
    x = X.copy()
    g = mutad.gradient(lambda x: np.sum(sp.expn(n, x)), x)[0]
    h = mutad.hessian(lambda x: np.sum(sp.expn(n, x)), x)
    _, t = mutad.jvp(lambda x: sp.expn(n, x), (x,), (np.ones_like(x),))
    assert np.array_equal(x, X)
    m = int(n)  # SciPy truncates the order to an integer
    assert np.allclose(g, _exact(m, X, 1), rtol=1e-12)
    assert np.allclose(t, g, rtol=1e-14)
    assert np.allclose(np.diag(h), _exact(m, X, 2), rtol=1e-9)
    assert np.all(h[~np.eye(len(X), dtype=bool)] == 0.0)
