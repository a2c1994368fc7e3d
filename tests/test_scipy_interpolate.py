"""scipy.interpolate by SciPy's names: interpolants of traced data, at traced query points.

Each calling form is checked by mutad.check_grads (finite differences, both policies, forward
mode, second order, the caller's arrays restored), its value against SciPy's own bit for bit,
and the linear interpolants' gradients against their closed form (the interpolants of the
identity's columns).
"""

import numpy as np
import pytest
import scipy.interpolate
from scipy.interpolate import (Akima1DInterpolator, CubicHermiteSpline, CubicSpline,
                               PchipInterpolator, RegularGridInterpolator, interp1d, interpn,
                               make_interp_spline)

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import interpolate

POLICIES = ("restore", "checkpoint")

X = np.array([0.0, 0.4, 1.1, 1.5, 2.3, 2.9, 3.6])  # uneven knots
Y = np.sin(X) + 0.3 * X
QUERIES = np.array([0.15, 0.7, 1.35, 2.05, 3.3])  # inside, off the knots
OUTSIDE = np.array([-0.3, 0.7, 3.9])


def _periodic(y):
    return np.concatenate([y, y[:1]])


# f(y, xq): every calling form, its data and its queries traced
FORMS = {
    "CubicSpline": lambda y, q: CubicSpline(X, y)(q),
    "CubicSpline natural": lambda y, q: CubicSpline(X, y, bc_type="natural")(q),
    "CubicSpline clamped": lambda y, q: CubicSpline(X, y, bc_type="clamped")(q),
    "CubicSpline values": lambda y, q: CubicSpline(X, y, bc_type=((1, 0.5), (2, -1.0)))(q),
    "CubicSpline periodic": lambda y, q: CubicSpline(X, _periodic(y[:-1]), bc_type="periodic")(q),
    "CubicSpline nu=1": lambda y, q: CubicSpline(X, y)(q, 1),
    "CubicSpline derivative": lambda y, q: CubicSpline(X, y).derivative()(q),
    "CubicSpline derivative(2)": lambda y, q: CubicSpline(X, y).derivative(2)(q, 0),
    "CubicSpline extrapolate": lambda y, q: CubicSpline(X, y)(q + 1.05),
    "CubicSpline no extrapolate": lambda y, q: np.nan_to_num(
        CubicSpline(X, y, extrapolate=False)(q + 1.05)),
    "CubicSpline 2-d": lambda y, q: CubicSpline(X, np.outer(y, [1.0, -2.0]))(q.reshape(1, -1)),
    "CubicSpline axis=1": lambda y, q: CubicSpline(X, np.stack([y, y * y]), axis=1)(q),
    "interp1d linear": lambda y, q: interp1d(X, y)(q),
    "interp1d cubic": lambda y, q: interp1d(X, y, kind="cubic")(q),
    "interp1d quadratic": lambda y, q: interp1d(X, y, kind="quadratic")(q),
    "interp1d slinear": lambda y, q: interp1d(X, y, kind="slinear")(q),
    "interp1d nearest": lambda y, q: interp1d(X, y, kind="nearest")(q),
    "interp1d previous": lambda y, q: interp1d(X, y, kind="previous")(q),
    "interp1d next": lambda y, q: interp1d(X, y, kind="next")(q),
    "interp1d zero": lambda y, q: interp1d(X, y, kind="zero")(q),
    "interp1d extrapolate": lambda y, q: interp1d(X, y, kind="cubic", fill_value="extrapolate")(
        q + 1.05),
    "interp1d fill": lambda y, q: interp1d(X, y, bounds_error=False, fill_value=(-1.0, 2.0))(
        q + 1.05),
    "interp1d unsorted axis=0": lambda y, q: interp1d(X[::-1], np.outer(y[::-1], [1.0, 3.0]),
                                                     kind="cubic", axis=0)(q),
    "make_interp_spline": lambda y, q: make_interp_spline(X, y)(q),
    "make_interp_spline k=1": lambda y, q: make_interp_spline(X, y, k=1)(q),
    "make_interp_spline k=5": lambda y, q: make_interp_spline(X, y, k=5)(q),
    "make_interp_spline nu=1": lambda y, q: make_interp_spline(X, y)(q, nu=1),
    "make_interp_spline derivative": lambda y, q: make_interp_spline(X, y).derivative()(q),
    "make_interp_spline natural": lambda y, q: make_interp_spline(X, y, bc_type="natural")(q),
    "make_interp_spline values": lambda y, q: make_interp_spline(
        X, y, bc_type=([(1, 0.5)], [(2, 1.0)]))(q),
    "make_interp_spline periodic": lambda y, q: make_interp_spline(
        X, _periodic(y[:-1]), bc_type="periodic")(q),
    "CubicHermiteSpline": lambda y, q: CubicHermiteSpline(X, y, np.cos(y))(q),
    "PchipInterpolator": lambda y, q: PchipInterpolator(X, y)(q),
    "PchipInterpolator nu=1": lambda y, q: PchipInterpolator(X, y)(q, 1),
    "PchipInterpolator 2-d": lambda y, q: PchipInterpolator(X, np.stack([y, -y * y], 1))(q),
    "Akima1DInterpolator": lambda y, q: Akima1DInterpolator(X, y)(q),
    "Akima1DInterpolator makima": lambda y, q: Akima1DInterpolator(X, y, method="makima")(q),
    "mutad.scipy.interpolate": lambda y, q: interpolate.CubicSpline(X, y)(q),
    "scipy.interpolate.CubicSpline": lambda y, q: scipy.interpolate.CubicSpline(X, y)(q),
}


@pytest.mark.parametrize("form", FORMS)
def test_data_and_queries(form):
    f = FORMS[form]
    y, q = Y.copy(), QUERIES.copy()
    value = mutad.value_and_gradient(lambda y, q: np.sum(f(y, q) ** 2), y, q)[0]
    assert value == np.sum(f(Y, QUERIES) ** 2)  # SciPy's own values
    for policy in POLICIES:
        mutad.check_grads(f, y, q, policy=policy, order=2)
    assert np.array_equal(y, Y) and np.array_equal(q, QUERIES)
