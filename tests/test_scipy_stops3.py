"""SciPy programs that stopped, or whose forward mode differed from the reverse, found among
programs written as scientists use SciPy inside a differentiated function: each checked with
``mutad.testing``'s finite differences, its value SciPy's bit for bit and the caller's arrays
unchanged."""

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

import mutad
from mutad.testing import check_grads

X = np.array([0.3, 0.5, 0.9, 1.4, 0.7, 1.1])


def check(f, *args, modes=("rev", "fwd"), **settings):
    """``f``'s value SciPy's bit for bit and the caller's arrays unchanged, then
    ``check_grads`` (which checks the arguments come back too) in ``modes``."""
    copies = [np.array(a, copy=True) for a in args]
    before = [a.tobytes() for a in args]
    value, _ = mutad.value_and_gradient(f, *args)
    assert [a.tobytes() for a in args] == before
    assert np.asarray(value).tobytes() == np.asarray(f(*copies)).tobytes()
    check_grads(f, *args, modes=modes, **settings)


# ----------------------------------------------------------------------------------------------
# quad's forward rule: an infinite limit computed from differentiated values (loc + a * scale
# of a distribution's expect) does not move, as in the reverse rule; its tangent's term is
# not the integrand there (NaN) times zero


# (the tangent of (x - loc) / scale at x = -inf is inf - inf on the way: its warning says so,
# and the pdf there, 0, makes its term zero)
@pytest.mark.filterwarnings("ignore:invalid value encountered in add, in a tangent")
def test_expect_over_an_infinite_support_in_forward_mode():
    def f(x):
        return scipy.stats.norm.expect(lambda v: v ** 2, loc=x[0], scale=x[1])

    check(f, X.copy(), rtol=1e-5)
    for direction, expected in ((0, 2 * X[0]), (1, 2 * X[1])):  # d(loc² + scale²)
        value, tangent = mutad.jvp(f, (X.copy(),), (np.eye(6)[direction],))
        assert np.isclose(tangent, expected, rtol=1e-7)


def test_quad_with_an_infinite_limit_from_a_differentiated_value():
    def f(x):
        lower = x[0] - np.inf * x[1]  # -inf, computed from x (the integrand there is NaN)
        return scipy.integrate.quad(lambda t: t ** 2 * np.exp(-(t - x[2]) ** 2), lower, x[3])[0]

    check(f, X.copy(), rtol=1e-5)

