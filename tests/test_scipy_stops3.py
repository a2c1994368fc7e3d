"""SciPy programs that stopped, or whose forward mode differed from the reverse, found among
programs written as scientists use SciPy inside a differentiated function: each checked with
``mutad.testing``'s finite differences, its value SciPy's bit for bit and the caller's arrays
unchanged."""

import numpy as np
import pytest
import scipy.integrate
import scipy.signal
import scipy.stats

import mutad
from mutad.errors import UnsupportedOperationError
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


# ----------------------------------------------------------------------------------------------
# scipy.signal.sepfir2d: compiled code reading the image's memory; a separable linear filter


IMAGE = np.cos(np.arange(20.0).reshape(4, 5) * 0.7) + 0.1 * np.arange(20.0).reshape(4, 5)


def test_sepfir2d_of_a_row():
    check(lambda x: np.sum(scipy.signal.sepfir2d(x.reshape(1, 6), [1., 2., 1.], [1.]) ** 2),
          X.copy(), order=2)


@pytest.mark.parametrize("hrow, hcol", [([1., 2., 1.], [0.5, -1., 2.]),
                                        ([0.2, -1., 3., 0.5, 1.], [1.]),
                                        ([1.], [0.3, 1., 0.7, 2., -1.])])
def test_sepfir2d_of_an_image(hrow, hcol):
    weights = np.sin(np.arange(20.0)).reshape(4, 5)
    check(lambda x: np.sum(scipy.signal.sepfir2d(x, hrow, hcol) * weights)
          + np.sum(scipy.signal.sepfir2d(x * x, hrow, hcol) ** 2), IMAGE.copy(), order=2)


@pytest.mark.parametrize("which", ["hrow", "hcol", "all"])
def test_sepfir2d_of_differentiated_kernels(which):
    """Bilinear in the kernels (and the image): C(hcol) @ x @ R(hrow).T, each matrix linear
    in its kernel, its values SciPy's."""
    weights = np.sin(np.arange(20.0)).reshape(4, 5)

    def f(p):
        hrow = p[:3] if which != "hcol" else np.array([1., 2., 1.])
        hcol = p[3:8] if which != "hrow" else np.array([0.5, -1., 2.])
        image = IMAGE * p[8] if which == "all" else IMAGE
        return np.sum(scipy.signal.sepfir2d(image, hrow, hcol) * weights) \
            + np.sum(scipy.signal.sepfir2d(image, hrow, hcol) ** 2)

    check(f, np.array([0.2, -1., 3., 0.3, 1., 0.7, 2., -1., 1.3]), order=2)


# ----------------------------------------------------------------------------------------------
# Conversions in SciPy's code: uniform.fit's float() of its closed form


@pytest.mark.parametrize("settings", [{}, {"floc": 0.1}, {"fscale": 2.0}])
def test_uniform_fit(settings):
    check(lambda x: np.sum(np.array(scipy.stats.uniform.fit(x, **settings)) ** 2), X.copy())


def test_uniform_fit_errors_are_scipys():
    with pytest.raises(scipy.stats._continuous_distns.FitDataError):
        mutad.gradient(lambda x: scipy.stats.uniform.fit(x, floc=0.5)[1], X.copy())
    with pytest.raises(scipy.stats._continuous_distns.FitUniformFixedScaleDataError):
        mutad.gradient(lambda x: scipy.stats.uniform.fit(x, fscale=0.5)[1], X.copy())


# np.polyint and np.polyder of a poly1d of traced coefficients (a poly1d, as NumPy's), in the
# user's code and in SciPy's (sweep_poly's phase)

T = np.linspace(0.0, 1.0, 7)


def test_sweep_poly_of_traced_coefficients():
    check(lambda x: np.sum(scipy.signal.sweep_poly(T, np.poly1d([x[1], 1.0, x[0]]))),
          X.copy(), order=2)


@pytest.mark.parametrize("function", [np.polyint, np.polyder])
def test_polyint_and_polyder_of_a_poly1d(function):
    def f(x):
        p = function(np.poly1d([x[0], x[1], 2.0, x[2]]))
        assert type(p) is np.poly1d
        return p(1.3) + np.sum(p.coeffs ** 2)

    check(f, X.copy(), order=2)
