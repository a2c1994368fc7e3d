"""Whole programs as a scientist writes them, in every mode, each of which once stopped or
gave a wrong answer: NumPy's values bit for bit, the derivative of that program (against finite
differences of mutad's own gradient), the caller's arrays back bit for bit."""

import numpy as np
import pytest
import scipy.interpolate

import mutad
from mutad.testing import directional_fd


def _hessian_like_finite_differences(f, y, x):
    """``hessian(f, y, x, argnums=0)`` is symmetric, leaves both arrays as they were, and its
    product with a direction is the finite difference of the gradient along it."""
    before = (y.tobytes(), x.tobytes())
    H = mutad.hessian(f, y, x, argnums=0)
    assert (y.tobytes(), x.tobytes()) == before
    v = np.linspace(-1.0, 1.0, y.size)
    expected = directional_fd(lambda z, c: mutad.gradient(f, z, c, argnums=0), (y, x), (v, None))
    assert np.allclose(H @ v, expected, rtol=1e-6, atol=1e-8)
    assert np.allclose(H, H.T, rtol=1e-10, atol=1e-10)


def _series_fit(y, x):
    p = np.polynomial.Polynomial.fit(x, y, 2)
    return np.sum(p(x) ** 3)


def _pchip_through_fixed_knots(y, x):
    x *= 2.0  # a write into the argument held fixed
    return np.sum(scipy.interpolate.PchipInterpolator(x, y)(1.3) ** 2) + np.sum(x * y ** 3)


def _spline_then_moved_knots(y, x):
    s = scipy.interpolate.make_interp_spline(x, y, k=3)
    x -= 0.1
    return np.sum(s(x) ** 2) + np.sum(y * x)


def _interp1d(y, x):
    return np.sum(scipy.interpolate.interp1d(x, y, kind="cubic")(np.array([0.4, 0.7])) ** 2)


def _fitted_series_written_into_fixed_points(y, x):
    c = np.polynomial.Polynomial.fit(x, y, 2)
    x[:] = c(x)  # a value of y into the array held fixed: followed from then on
    return np.sum(x ** 2 * y)


@pytest.mark.parametrize("f", [_series_fit, _pchip_through_fixed_knots,
                               _spline_then_moved_knots, _interp1d,
                               _fitted_series_written_into_fixed_points])
def test_hessian_with_respect_to_values_through_fixed_knots(f):
    """The Hessian with respect to the values of a fit or an interpolant whose knots are the
    other argument: the nested gradient traced the argument outside argnums as an array that
    carries a derivative (an enclosing level's array), so the rules that refuse differentiated
    knots or domains (Polynomial.fit, PchipInterpolator, make_interp_spline, interp1d) stopped
    with "mutad does not differentiate with respect to the knots". It is a constant at every
    level, as it is in the gradient alone."""
    x = np.linspace(0.0, 1.0, 6)
    y = np.cos(3 * x) + 1.5
    assert mutad.gradient(f, y.copy(), x.copy(), argnums=0) is not None
    _hessian_like_finite_differences(f, y, x)


def test_a_gradient_penalty_through_fixed_knots():
    """Reverse over reverse: a loss holding the squared gradient of a fit in ``y`` through
    the fixed knots ``x`` (a write into them too), differentiated in ``y``; the inner gradient
    refused the knots as differentiated. Its gradient is the finite difference's, a replay's
    the traced one's, and ``x`` comes back as it was."""
    def fit(y, x):
        x *= 1.0
        knots = scipy.interpolate.PchipInterpolator(x, y)(np.array([0.3, 0.6]))
        return np.sum(knots ** 3) + np.sum(np.polynomial.Polynomial.fit(x, y, 2)(x) ** 2)

    def penalised(y, x):
        return np.sum(mutad.gradient(fit, y, x, argnums=0) ** 2) + fit(y, x.copy())

    x = np.linspace(0.0, 1.0, 6)
    y = np.cos(3 * x) + 1.5
    before = (y.tobytes(), x.tobytes())
    g = mutad.gradient(penalised, y, x, argnums=0)
    assert (y.tobytes(), x.tobytes()) == before
    v = np.linspace(-1.0, 1.0, 6)
    assert g @ v == pytest.approx(directional_fd(penalised, (y, x), (v, None)), rel=1e-7)
    replaying = mutad.grad(penalised, replay=True)
    for k in range(3):
        z = y + 0.01 * k
        assert replaying(z, x).tobytes() == mutad.gradient(penalised, z, x, argnums=0).tobytes()
