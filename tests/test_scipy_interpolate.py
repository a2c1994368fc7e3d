"""scipy.interpolate by SciPy's names: interpolants of traced data, at traced query points.

Each calling form is checked by mutad.check_grads (finite differences, both policies, forward
mode, second order, the caller's arrays restored), its value against SciPy's own bit for bit,
and the linear interpolants' gradients against their closed form (the interpolants of the
identity's columns).
"""

import numpy as np
import pytest
import scipy.interpolate
import scipy.sparse.linalg
from scipy.interpolate import (Akima1DInterpolator, BarycentricInterpolator, BSpline,
                               CubicHermiteSpline, CubicSpline, PchipInterpolator, PPoly,
                               RegularGridInterpolator, barycentric_interpolate, interp1d, interpn,
                               make_interp_spline, make_lsq_spline, pchip_interpolate)

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import interpolate

from cases import replays_as_traced

POLICIES = ("restore", "checkpoint")

X = np.array([0.0, 0.4, 1.1, 1.5, 2.3, 2.9, 3.6])  # uneven knots
Y = np.sin(X) + 0.3 * X
QUERIES = np.array([0.15, 0.7, 1.35, 2.05, 3.3])  # inside, off the knots
OUTSIDE = np.array([-0.3, 0.7, 3.9])


LSQ_KNOTS = np.r_[[X[0]] * 4, [1.5], [X[-1]] * 4]  # 5 coefficients fitted to 7 points
LSQ_KNOTS_2 = np.r_[[X[0]] * 3, [1.2, 2.4], [X[-1]] * 3]


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
    # a traced fill_value (it was refused): the fill's derivative where SciPy fills
    "interp1d traced fill": lambda y, q: interp1d(
        X, y, bounds_error=False, fill_value=(2.0 * y[0], y[-1] ** 2))(q * 1.4 - 0.4),
    "interp1d traced fill cubic 2-d": lambda y, q: interp1d(
        X, np.outer(y, [1.0, 3.0]), kind="cubic", axis=0, bounds_error=False,
        fill_value=y[1:3])(q * 1.4 - 0.4),
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
    "make_lsq_spline": lambda y, q: make_lsq_spline(X, y, LSQ_KNOTS)(q),
    "make_lsq_spline weighted k=2 derivative": lambda y, q: make_lsq_spline(
        X, y, LSQ_KNOTS_2, k=2, w=np.linspace(1.0, 2.0, 7)).derivative()(q),
    "make_lsq_spline 2-d": lambda y, q: make_lsq_spline(X, np.stack([y, y * y], 1), LSQ_KNOTS)(q),
    # linear in y with lam given (it was refused as a smoothing fit of FITPACK's)
    "make_smoothing_spline lam": lambda y, q: scipy.interpolate.make_smoothing_spline(
        X, y, lam=1e-2)(q),
    "make_smoothing_spline w, 2-d derivative": lambda y, q: scipy.interpolate.make_smoothing_spline(
        X, np.stack([y, y * y]), w=np.linspace(1.0, 2.0, 7), lam=0.1, axis=1).derivative()(q),
    "CubicHermiteSpline": lambda y, q: CubicHermiteSpline(X, y, np.cos(y))(q),
    "BSpline": lambda y, q: BSpline(np.r_[[0.0] * 3, X[1:-1:2], [3.6] * 3], y[:6], 2)(q),
    "BSpline derivative": lambda y, q: BSpline(np.r_[[0.0] * 3, X[1:-1:2], [3.6] * 3],
                                                y[:6], 2).derivative()(q),
    "pchip_interpolate": lambda y, q: pchip_interpolate(X, y, q),
    "pchip_interpolate der": lambda y, q: np.stack(pchip_interpolate(X, y, q, der=[0, 1])),
    "PchipInterpolator": lambda y, q: PchipInterpolator(X, y)(q),
    "PchipInterpolator nu=1": lambda y, q: PchipInterpolator(X, y)(q, 1),
    "PchipInterpolator 2-d": lambda y, q: PchipInterpolator(X, np.stack([y, -y * y], 1))(q),
    "PchipInterpolator axis=1": lambda y, q: PchipInterpolator(X, np.stack([y, y ** 3]), axis=1)(q),
    "Akima1DInterpolator": lambda y, q: Akima1DInterpolator(X, y)(q),
    "Akima1DInterpolator outside": lambda y, q: np.nan_to_num(Akima1DInterpolator(X, y)(q + 1.05)),
    "Akima1DInterpolator axis=1": lambda y, q: Akima1DInterpolator(
        X, np.stack([y, np.cos(y)]), axis=1, method="makima")(q),
    "Akima1DInterpolator makima": lambda y, q: Akima1DInterpolator(X, y, method="makima")(q),
    "PPoly": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]])(q),
    "PPoly nu=1": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]])(q, 1),
    "PPoly derivative": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]]).derivative()(q),
    "PPoly 2-d": lambda y, q: PPoly(np.reshape(np.outer(y[:6], [1.0, -2.0]), (2, 3, 2)),
                                    X[[0, 2, 4, 6]])(q),
    "PPoly no extrapolate": lambda y, q: np.nan_to_num(
        PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]], extrapolate=False)(q + 1.05)),
    "barycentric_interpolate": lambda y, q: barycentric_interpolate(X, y, q, rng=0),
    "barycentric_interpolate der=1": lambda y, q: barycentric_interpolate(X, y, q, der=1, rng=0),
    "BarycentricInterpolator": lambda y, q: BarycentricInterpolator(X, y, rng=0)(q),
    "BarycentricInterpolator 2-d": lambda y, q: BarycentricInterpolator(
        X, np.stack([y, y * y], 1), rng=0)(q),
    "BarycentricInterpolator derivative": lambda y, q: BarycentricInterpolator(
        X, y, rng=0).derivative(q, 2),
    "CubicSpline antiderivative": lambda y, q: CubicSpline(X, y).antiderivative()(q),
    "CubicSpline antiderivative(2)": lambda y, q: CubicSpline(X, y).antiderivative(2)(q, 1),
    "CubicSpline integrate": lambda y, q: CubicSpline(X, y).integrate(q[0], q[3]),
    "CubicSpline integrate backwards": lambda y, q: CubicSpline(X, y).integrate(q[4], 0.2),
    "CubicSpline integrate outside": lambda y, q: CubicSpline(X, y).integrate(q[0] - 0.5,
                                                                             q[4] + 1.0),
    "CubicSpline integrate no extrapolate": lambda y, q: CubicSpline(X, y).integrate(
        q[1], 3.0, extrapolate=False),
    "CubicSpline 2-d integrate": lambda y, q: CubicSpline(X, np.outer(y, [1.0, -2.0])).integrate(
        0.2, q[2]),
    "PchipInterpolator integrate": lambda y, q: PchipInterpolator(X, y).integrate(q[1], q[4]),
    # periodic extrapolation with bounds within the data's interval: no period wraps in
    "CubicSpline periodic integrate inside": lambda y, q: CubicSpline(
        X, _periodic(y[:-1]), bc_type="periodic").integrate(q[0], q[3]),
    "BSpline periodic integrate inside": lambda y, q: BSpline(
        np.arange(-3.0, 11.0), y[:7].repeat(2)[:10], 3, extrapolate="periodic").integrate(
            q[4], 0.5),
    "PPoly antiderivative": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)),
                                               X[[0, 3, 6]]).antiderivative()(q),
    "PPoly integrate": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]]).integrate(
        q[0], q[4]),
    "make_interp_spline integrate": lambda y, q: make_interp_spline(X, y).integrate(q[0], q[3]),
    "make_interp_spline integrate no extrapolate": lambda y, q: make_interp_spline(X, y).integrate(
        q[0] - 0.5, q[4], extrapolate=False),
    "BSpline integrate backwards": lambda y, q: BSpline(
        np.r_[[X[0]] * 3, X, [X[-1]] * 3], np.r_[y, y[:2]], 3).integrate(q[4], 0.2),
    "make_lsq_spline integrate": lambda y, q: make_lsq_spline(X, y, LSQ_KNOTS).integrate(
        0.1, q[2]),
    "mutad.scipy.interpolate": lambda y, q: interpolate.CubicSpline(X, y)(q),
    "scipy.interpolate.CubicSpline": lambda y, q: scipy.interpolate.CubicSpline(X, y)(q),
    # the coefficients .c, linear in the data as the values are (they were refused)
    "CubicSpline c": lambda y, q: CubicSpline(X, y).c,
    "CubicSpline clamped values c": lambda y, q: CubicSpline(
        X, y, bc_type=((1, 0.5), (2, -1.0))).c[:, 1:4],
    "CubicSpline axis=1 c": lambda y, q: CubicSpline(X, np.stack([y, y * y]), axis=1).c,
    "CubicSpline derivative c": lambda y, q: CubicSpline(X, y).derivative().c,
    "CubicSpline antiderivative c": lambda y, q: CubicSpline(X, y).antiderivative().c,
    "CubicSpline c copied, written": lambda y, q: (lambda c: (c.__setitem__(0, 2.0 * c[0]),
                                                              c)[1])(CubicSpline(X, y).c.copy()),
    "make_interp_spline c": lambda y, q: make_interp_spline(X, y).c * make_interp_spline(X, y).t[
        :len(X)],
    "make_lsq_spline c": lambda y, q: make_lsq_spline(X, y, LSQ_KNOTS).c,
    "PchipInterpolator c": lambda y, q: PchipInterpolator(X, y).c,
    "PPoly c": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]]).c,
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


# SciPy's values bit for bit, of its types, in both modes: pchip_interpolate's derivatives are
# its derivative polynomials' values (not the interpolant's of order nu, which round apart),
# and an integral of 1-d data is SciPy's 0-d array (it was a NumPy scalar)
EXACT_FORMS = {
    "pchip_interpolate der=1": lambda y: pchip_interpolate(X, y, QUERIES, der=1),
    "pchip_interpolate der=[1, 2]": lambda y: pchip_interpolate(X, y, QUERIES, der=[1, 2]),
    "CubicSpline integrate": lambda y: CubicSpline(X, y).integrate(0.2, 3.1),
    "make_interp_spline integrate": lambda y: make_interp_spline(X, y).integrate(-0.5, 3.1),
    "PchipInterpolator integrate": lambda y: PchipInterpolator(X, y).integrate(0.2, 3.1),
}


@pytest.mark.parametrize("form", EXACT_FORMS)
def test_values_are_scipys_bit_for_bit_and_of_its_types(form):
    f = EXACT_FORMS[form]
    data = np.cos(2.0 * X) + X  # (data whose orders of derivatives round apart)
    y = data.copy()
    expected = f(data)
    for got in (mutad.pullback(f, y)[0], mutad.jvp(f, (y,), (np.ones_like(y),))[0]):
        pairs = zip(got, expected, strict=True) if isinstance(expected, list) else [(got,
                                                                                        expected)]
        assert type(got) is type(expected)
        for value, scipys in pairs:
            assert type(value) is type(scipys) and value.tobytes() == scipys.tobytes()
    assert y.tobytes() == data.tobytes()


# SciPy's own interpolants, built from plain data before the differentiation, at traced queries
BUILT = {
    "CubicSpline": CubicSpline(X, Y),
    "PchipInterpolator": PchipInterpolator(X, Y),
    "Akima1DInterpolator": Akima1DInterpolator(X, Y),
    "make_interp_spline": make_interp_spline(X, Y),
    "BSpline": BSpline(np.r_[[0.0] * 3, X[1:-1:2], [3.6] * 3], Y[:6], 2),
    "interp1d cubic": interp1d(X, Y, kind="cubic"),
    "interp1d linear": interp1d(X, Y),
    "interp1d fill": interp1d(X, Y, bounds_error=False, fill_value=0.5),
    "BarycentricInterpolator": BarycentricInterpolator(X, np.stack([Y, -Y]), axis=1, rng=0),
    "PPoly": PPoly(np.reshape(Y[:6], (3, 2)), X[[0, 3, 6]]),
}
QUERY_FORMS = {
    **{name: (lambda s: lambda q: s(q))(s) for name, s in BUILT.items()},
    "CubicSpline nu=1": lambda q: BUILT["CubicSpline"](q, 1),
    "CubicSpline derivative": lambda q: BUILT["CubicSpline"].derivative()(q),
    "make_interp_spline nu=2": lambda q: BUILT["make_interp_spline"](q, nu=2),
    "interp1d fill outside": lambda q: BUILT["interp1d fill"](q + 1.05),
    "built inside f": lambda q: CubicSpline(X, Y, bc_type="natural")(q),
    "BarycentricInterpolator derivative": lambda q: BUILT["BarycentricInterpolator"].derivative(
        q, 2),
    "barycentric_interpolate": lambda q: barycentric_interpolate(X, Y, q, der=1, rng=0),
}


@pytest.mark.parametrize("form", QUERY_FORMS)
def test_queries_of_scipy_interpolants(form):
    f = QUERY_FORMS[form]
    q = QUERIES.copy()
    assert mutad.value_and_gradient(lambda q: np.sum(f(q)), q)[0] == np.sum(f(QUERIES))
    for policy in POLICIES:
        mutad.check_grads(f, q, policy=policy, order=2)
    assert np.array_equal(q, QUERIES)


def test_query_derivative_is_the_interpolants():
    spline = CubicSpline(X, Y)
    grad = mutad.gradient(lambda q: spline(q).sum(), QUERIES.copy())[0]
    np.testing.assert_array_equal(grad, spline(QUERIES, 1))
    hessian_diagonal = mutad.hvp(lambda q: spline(q).sum(), (QUERIES.copy(),), (np.ones(5),))
    np.testing.assert_allclose(hessian_diagonal, spline(QUERIES, 2), rtol=1e-12)


@pytest.mark.parametrize("form", ["CubicSpline", "interp1d cubic", "make_interp_spline"])
def test_data_gradient_closed_form(form, rng):
    """The values are W y, W the interpolants of the identity's columns: ȳ = Wᵀ v̄."""
    f = FORMS[form]
    w = np.stack([f(column, QUERIES) for column in np.eye(len(X))], axis=1)
    cotangent = rng.standard_normal(len(QUERIES))
    grad = mutad.gradient(lambda y: f(y, QUERIES) @ cotangent, Y.copy())[0]
    np.testing.assert_allclose(grad, w.T @ cotangent, rtol=1e-12, atol=1e-14)
    tangent = mutad.jvp(lambda y: f(y, QUERIES), (Y.copy(),), (np.arange(7.0),))[1]
    np.testing.assert_allclose(tangent, w @ np.arange(7.0), rtol=1e-12, atol=1e-13)


def test_data_written_after_construction():
    """A traced interpolant keeps its data as SciPy does: later writes into y do not reach it."""
    def f(y):
        spline = CubicSpline(X, y)
        y *= 2.0
        return spline(QUERIES).sum() + y.sum()

    for policy in POLICIES:
        mutad.check_grads(f, Y.copy(), policy=policy, order=2)


GRID = (np.array([0.0, 0.5, 1.2, 2.0, 2.4, 3.0]), np.array([-1.0, 0.0, 0.7, 1.5, 1.9, 2.5]))
VALUES = np.add.outer(np.sin(GRID[0]), GRID[1] ** 2) + np.outer(GRID[0], GRID[1])
POINTS = np.array([[0.3, -0.4], [1.1, 0.2], [1.75, 1.2], [2.1, 0.9]])  # off the grid's lines
EXACT = {"solver": scipy.sparse.linalg.spsolve}  # the spline methods' coefficients, solved directly
GRID_FORMS = {
    **{method: (lambda m: lambda v, p: RegularGridInterpolator(GRID, v, method=m)(p))(method)
       for method in ("linear", "nearest", "slinear", "cubic_legacy")},
    **{method: (lambda m: lambda v, p: RegularGridInterpolator(GRID, v, method=m, **EXACT)(p))(
        method) for method in ("cubic", "quintic")},
    "method at call": lambda v, p: RegularGridInterpolator(GRID, v, "slinear")(p, method="linear"),
    "nu": lambda v, p: RegularGridInterpolator(GRID, v, method="cubic", **EXACT)(p, nu=(1, 0)),
    "fill_value": lambda v, p: RegularGridInterpolator(
        GRID, v, bounds_error=False, fill_value=-3.0)(p + [0.95, 0.0]),
    "fill_value cubic nu": lambda v, p: RegularGridInterpolator(
        GRID, v, "cubic", bounds_error=False, fill_value=-3.0, **EXACT)(p + [0.95, 0.0], nu=(0, 1)),
    "extrapolate": lambda v, p: RegularGridInterpolator(
        GRID, v, bounds_error=False, fill_value=None)(p + [0.95, 0.0]),
    "batch values": lambda v, p: RegularGridInterpolator(GRID, np.stack([v, v * v], -1))(p),
    "one point": lambda v, p: RegularGridInterpolator(GRID, v)(p[1]),
    "flat points": lambda v, p: RegularGridInterpolator(GRID, v)(np.reshape(p, -1)),
    "coordinate tuple": lambda v, p: RegularGridInterpolator(GRID, v)((p[:, 0], p[:, 1])),
    "list of points": lambda v, p: RegularGridInterpolator(GRID, v)([p[0], p[2]]),
    "interpn": lambda v, p: interpn(GRID, v, p, method="cubic_legacy"),
    "mutad.scipy.interpolate": lambda v, p: interpolate.RegularGridInterpolator(GRID, v)(p),
}


def test_regular_grid_spline_solve_with_spsolve_either_binding(monkeypatch):
    """SciPy's spline solve takes spsolve's direct path where the solver equals
    scipy.sparse.linalg.spsolve as the module gives it then; SciPy's function and mutad's
    stand-in for it (which a name bound while a differentiation ran holds: mutad's own
    binding where its rule module was imported then) were taken one for the other, and SciPy
    called spsolve with atol= (a TypeError that came and went with the order programs ran
    in). Either solves directly: SciPy's values, the gradient spsolve's."""
    from mutad.scipy import sparse as msparse
    gx, gy = np.linspace(0, 3, 6), np.linspace(0, 2, 5)
    points = np.array([[1.3, 0.7], [2.2, 1.1]])
    values = np.add.outer(np.sin(gx), np.cos(gy))

    def f(v, solver):
        return np.sum(scipy.interpolate.RegularGridInterpolator(
            (gx, gy), v, method="cubic", solver=solver)(points) ** 2)

    expected = f(values, scipy.sparse.linalg.spsolve)
    monkeypatch.setattr(interpolate, "spsolve", msparse.spsolve)
    v = values.copy()
    for solver in (None, scipy.sparse.linalg.spsolve, msparse.spsolve):
        value, (g,) = mutad.value_and_gradient(lambda v: f(v, solver), v)
        if solver is not None:
            assert value == expected
        assert np.allclose(g, mutad.gradient(lambda v: f(v, scipy.sparse.linalg.spsolve),
                                             values)[0], rtol=1e-6, atol=1e-9)
    assert v.tobytes() == values.tobytes()


@pytest.mark.parametrize("form", GRID_FORMS)
def test_regular_grid(form):
    f = GRID_FORMS[form]
    v, p = VALUES.copy(), POINTS.copy()
    assert mutad.value_and_gradient(lambda v, p: np.sum(f(v, p)), v, p)[0] == np.sum(
        f(VALUES, POINTS))
    for policy in POLICIES:
        mutad.check_grads(f, v, p, policy=policy, order=2)
    assert np.array_equal(v, VALUES) and np.array_equal(p, POINTS)


@pytest.mark.parametrize("method", ["cubic", "quintic"])
def test_regular_grid_iterative_solver(method, rng):
    """SciPy's default solver for the spline's coefficients is iterative (gcrotmk, atol 1e-6):
    the values are SciPy's, the values' gradient that of the exactly solved spline, the points'
    gradient the derivative of SciPy's own spline."""
    weights = rng.standard_normal(len(POINTS))

    def f(v, p, **solver):
        return RegularGridInterpolator(GRID, v, method=method, **solver)(p) @ weights

    value, (dv, dp) = mutad.value_and_gradient(f, VALUES.copy(), POINTS.copy())
    assert value == f(VALUES, POINTS)
    exact_dv = mutad.gradient(lambda v: f(v, POINTS, **EXACT), VALUES.copy())[0]
    np.testing.assert_allclose(dv, exact_dv, rtol=1e-12, atol=1e-14)
    spline = RegularGridInterpolator(GRID, VALUES, method=method)
    partials = np.stack([spline(POINTS, nu=nu) for nu in ((1, 0), (0, 1))], axis=-1)
    np.testing.assert_allclose(dp, weights[:, None] * partials, rtol=1e-12)


def test_regular_grid_built_outside():
    interpolant = RegularGridInterpolator(GRID, VALUES)
    for policy in POLICIES:
        mutad.check_grads(lambda p: interpolant(p), POINTS.copy(), policy=policy, order=2)
        mutad.check_grads(lambda p: interpn(GRID, VALUES, p, method="slinear"), POINTS.copy(),
                          policy=policy, order=2, rtol=1e-4, atol=1e-5)


Y2 = np.stack([Y, Y ** 2, np.cos(X)])
KNOTS_FORMS = {
    "linear": lambda x: interp1d(x, Y)(QUERIES),
    "unsorted": lambda x: interp1d(x[::-1], Y[::-1])(QUERIES),
    "slinear": lambda x: interp1d(x, Y, kind="slinear")(QUERIES),
    "data of two axes": lambda x: interp1d(x, Y2)(np.reshape(QUERIES[:4], (2, 2))),
    "along axis 0": lambda x: interp1d(x, Y2.T, axis=0)(np.reshape(QUERIES[:4], (2, 2))),
    "filled outside": lambda x: np.nan_to_num(interp1d(x, Y, bounds_error=False)(OUTSIDE)),
    "extrapolated": lambda x: interp1d(x, Y, fill_value="extrapolate")(OUTSIDE),
    "knots, data and queries": lambda x: interp1d(x, np.sin(x))(x[1:] - 0.1),
    "one query": lambda x: interp1d(x, Y)(0.7),
}


def in_its_knots(f):
    """``f`` of the knots X: NumPy's bits in forward mode, both modes and policies to second
    order against finite differences, the caller's knots unchanged, replayed as traced on
    other knots (the query 0.7 in another interval of the moved ones)."""
    x = X.copy()
    y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert np.asarray(y).tobytes() == np.asarray(f(X)).tobytes()
    for policy in POLICIES:
        mutad.check_grads(f, x, policy=policy, modes=("rev", "fwd"), order=2)
    assert x.tobytes() == X.tobytes()
    moved = X.copy()
    moved[1] = 0.8
    replays_as_traced(lambda x: np.sum(f(x) ** 2), [(X,), (X * 1.05 - 0.02,), (moved,)])


@pytest.mark.parametrize("form", KNOTS_FORMS)
def test_interp1d_in_its_knots(form):
    """interp1d(x, y) of traced knots x (a stop: refused), kind 'linear' or 'slinear': SciPy's
    values bit for bit, the derivatives of its formula in the knots (and the data and
    queries), both modes, both policies, second order, replayed as traced on other knots."""
    in_its_knots(KNOTS_FORMS[form])


SPLINE_KNOTS_FORMS = {
    "not-a-knot": lambda x: CubicSpline(x, Y)(QUERIES),
    "natural": lambda x: CubicSpline(x, Y, bc_type="natural")(QUERIES),
    "clamped": lambda x: CubicSpline(x, Y, bc_type="clamped")(QUERIES),
    "orders and values": lambda x: CubicSpline(x, Y, bc_type=((1, 0.5), (2, -1.0)))(QUERIES),
    "first derivative": lambda x: CubicSpline(x, Y)(QUERIES, 1),
    "derivative's derivative": lambda x: CubicSpline(x, Y).derivative()(QUERIES, 1),
    "third derivative": lambda x: CubicSpline(x, Y)(QUERIES, 3),
    "along axis 1": lambda x: CubicSpline(x, Y2, axis=1)(np.reshape(QUERIES, (5, 1))),
    "extrapolated": lambda x: CubicSpline(x, Y)(OUTSIDE),
    "NaN outside": lambda x: np.nan_to_num(CubicSpline(x, Y, extrapolate=False)(OUTSIDE)),
    "three knots": lambda x: CubicSpline(x[:3], Y[:3])(QUERIES[:2]),
    "two knots": lambda x: CubicSpline(x[:2], Y[:2])(QUERIES[:1]),
    "knots, data and queries": lambda x: CubicSpline(x, np.sin(x))(x[1:] - 0.05),
    "periodic": lambda x: CubicSpline(x, _periodic(Y[:-1]), bc_type="periodic")(
        np.r_[QUERIES, 4.1, -0.5]),
    "periodic, first derivative, a column": lambda x: CubicSpline(
        x, _periodic(Y[:-1])[:, None], bc_type="periodic")(QUERIES, 1),
    "periodic, three knots": lambda x: CubicSpline(x[:3], np.array([1.0, 2.0, 1.0]),
                                                   bc_type="periodic")(QUERIES[:2]),
    "periodic extrapolation": lambda x: CubicSpline(x, Y, extrapolate="periodic")(
        np.r_[QUERIES, 4.1]),
}


@pytest.mark.parametrize("form", SPLINE_KNOTS_FORMS)
def test_cubic_spline_in_its_knots(form):
    """CubicSpline(x, y) of traced knots x (a stop: refused): SciPy's values bit for bit, the
    derivatives of SciPy's steps (its tridiagonal system, the parabola of three knots, the
    periodic cyclic system, the Hermite pieces) in the knots, both modes, both policies, second order, replayed as
    traced on other knots."""
    in_its_knots(SPLINE_KNOTS_FORMS[form])


REFUSED = {
    "traced knots' attribute": lambda y: CubicSpline(np.cumsum(y), X).c,
    "interp1d traced knots of a cubic": lambda y: interp1d(y, X, kind="cubic")(QUERIES),
    "traced boundary value at traced knots": lambda y: CubicSpline(
        np.cumsum(y), X, bc_type=((1, y[0]), (2, 0.0)))(QUERIES),
    "make_interp_spline traced boundary value": lambda y: make_interp_spline(
        X, X, bc_type=([(1, y[0])], [(2, 0.0)]))(QUERIES),
    "traced grid": lambda y: RegularGridInterpolator((y[:5], GRID[1]), VALUES)(POINTS),
    "pchip grid": lambda y: RegularGridInterpolator(GRID, VALUES * y[0], method="pchip")(POINTS),
    "attribute": lambda y: CubicSpline(X, y).solve_ivp,
    "interp1d coefficients": lambda y: interp1d(X, y).c,
    "interp1d derivative": lambda y: interp1d(X, y).derivative(),
    "antiderivative's derivative": lambda y: CubicSpline(X, y).antiderivative().derivative()(
        QUERIES),
    "derivative's antiderivative": lambda y: CubicSpline(X, y).derivative().antiderivative()(
        QUERIES),
    "derivative's integral": lambda y: CubicSpline(X, y).derivative().integrate(0.0, 1.0),
    "periodic integral": lambda y: CubicSpline(X, _periodic(y[:-1]), bc_type="periodic").integrate(
        0.0, 5.0),
    "BSpline periodic integral": lambda y: BSpline(
        np.arange(-3.0, 11.0), y[:7].repeat(2)[:10], 3, extrapolate="periodic").integrate(0.5, 9.0),
    "make_lsq_spline traced weights": lambda y: make_lsq_spline(X, X, LSQ_KNOTS, w=y)(QUERIES),
    "PPoly traced breakpoints": lambda y: PPoly(np.ones((2, 2)), np.sort(y[:3]))(QUERIES),
    "PPoly axis": lambda y: PPoly(np.reshape(np.outer(y[:6], [1.0, 2.0]), (2, 3, 2)), X[:3],
                                  axis=1)(QUERIES),
    "PPoly attribute": lambda y: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]]).breakpoints,
    "barycentric traced nodes": lambda y: barycentric_interpolate(y, X, QUERIES),
    "barycentric orders": lambda y: barycentric_interpolate(X, y, QUERIES, der=[0, 1]),
    "barycentric attribute": lambda y: BarycentricInterpolator(X, y).wi,
    "barycentric weights at traced queries": lambda y: BarycentricInterpolator(
        X, X, wi=np.linspace(1.0, 2.0, 7) * (-1.0) ** np.arange(7))(QUERIES + y[:5]),
}


@pytest.mark.parametrize("form", REFUSED)
def test_refused(form):
    y = Y + 1.0
    with pytest.raises(UnsupportedOperationError, match="scipy.interpolate"):
        mutad.gradient(lambda y: np.sum(REFUSED[form](y)), y)
    assert np.array_equal(y, Y + 1.0)


@pytest.mark.parametrize("y", [Y, np.array([0.0, 1.0, 1.0, 0.5, 2.0, 2.1, 0.0]),
                               np.array([3.0, 1.0, 0.9, 0.0, -2.0, 1.0, 1.5])])
def test_hermite_slopes_are_scipys(y):
    """The slopes mutad differentiates for PchipInterpolator and Akima1DInterpolator are
    SciPy's, at extrema, flat pieces and monotone runs alike."""
    np.testing.assert_allclose(interpolate._pchip_slopes(X, y), PchipInterpolator(X, y)(X, 1),
                               rtol=1e-13, atol=1e-14)
    for method in ("akima", "makima"):
        np.testing.assert_allclose(interpolate._akima_slopes(X, y, method),
                                   Akima1DInterpolator(X, y, method=method)(X, 1),
                                   rtol=1e-13, atol=1e-14)


def test_routed_classes_stay_classes():
    """While a differentiation runs, SciPy's names stand for constructors that are still the
    classes to isinstance and to their class methods."""
    seen = []

    def f(y):
        traced, plain = CubicSpline(X, y), CubicSpline(X, Y)
        seen.append((isinstance(traced, CubicSpline), isinstance(plain, CubicSpline),
                     isinstance(plain, scipy.interpolate.PPoly),
                     PchipInterpolator.from_spline.__self__ is type(PchipInterpolator(X, Y)),
                     CubicSpline is not type(plain)))
        return traced(QUERIES).sum()

    mutad.gradient(f, Y.copy())
    assert seen == [(True, True, True, True, True)]
    assert CubicSpline is type(CubicSpline(X, Y))  # SciPy's own again


@pytest.mark.parametrize("form", ["CubicSpline values", "CubicSpline periodic", "interp1d fill",
                                  "make_interp_spline values", "CubicSpline 2-d",
                                  "PchipInterpolator axis=1"])
def test_basis_in_blocks(form, monkeypatch, rng):
    """The pullback computes the data's basis a block of columns at a time: blocks of any
    size give the one gradient."""
    f = FORMS[form]
    cotangent = rng.standard_normal(np.shape(f(Y, QUERIES)))
    whole = mutad.gradient(lambda y: np.sum(f(y, QUERIES) * cotangent), Y.copy())[0]
    monkeypatch.setattr(interpolate, "_BLOCK", 3)  # a column or two at a time
    blocks = mutad.gradient(lambda y: np.sum(f(y, QUERIES) * cotangent), Y.copy())[0]
    np.testing.assert_allclose(blocks, whole, rtol=1e-13, atol=1e-15)
    tangent = rng.standard_normal(len(Y))
    _, by_blocks = mutad.jvp(lambda y: f(y, QUERIES), (Y.copy(),), (tangent,))
    np.testing.assert_allclose(np.sum(by_blocks * cotangent), whole @ tangent, rtol=1e-12)


def test_grid_basis_in_blocks(monkeypatch):
    f = GRID_FORMS["cubic"]
    whole = mutad.gradient(lambda v: f(v, POINTS).sum(), VALUES.copy())[0]
    monkeypatch.setattr(interpolate, "_BLOCK", 50)
    blocks = mutad.gradient(lambda v: f(v, POINTS).sum(), VALUES.copy())[0]
    np.testing.assert_allclose(blocks, whole, rtol=1e-12, atol=1e-15)


def test_scipys_errors_and_objects():
    """Outside the data with bounds_error, SciPy's ValueError, traced data or not; plain data
    give SciPy's own objects, by mutad's names too."""
    with pytest.raises(ValueError, match="above the interpolation range"):
        mutad.gradient(lambda y: interp1d(X, y)(QUERIES + 1.05).sum(), Y.copy())
    with pytest.raises(ValueError, match="out of bounds"):
        mutad.gradient(lambda v: RegularGridInterpolator(GRID, v)(POINTS + 1.0).sum(),
                       VALUES.copy())
    assert type(interpolate.CubicSpline(X, Y)) is type(CubicSpline(X, Y))
    assert type(interpolate.make_interp_spline(X, Y)) is scipy.interpolate.BSpline
    np.testing.assert_array_equal(interpolate.interpn(GRID, VALUES, POINTS),
                                  interpn(GRID, VALUES, POINTS))


def test_arrays_made_inside_f_are_constants():
    """Knots and data the differentiated function makes from none of its arguments are
    constants: SciPy reads them, and only what depends on the arguments is differentiated."""
    def f(y, q):
        x = np.linspace(0.0, 3.6, 7)  # knots made inside f
        table = np.cos(x)  # data made inside f
        return (CubicSpline(x, y)(q) * CubicSpline(x, table)(q)
                + RegularGridInterpolator((x,), table)(q) + make_interp_spline(x, table)(q, 1))

    for policy in POLICIES:
        mutad.check_grads(f, Y.copy(), QUERIES.copy(), policy=policy, order=2)


SMOOTHING = {
    # (UnivariateSpline and splrep at s > 0 are differentiated on FITPACK's knots:
    # test_scipy_stops.py)
    "make_smoothing_spline": lambda x, y: scipy.interpolate.make_smoothing_spline(x, y)(1.5),
    # (lam=None: SciPy's generalized cross-validation chooses lam from y)
}


@pytest.mark.parametrize("name", SMOOTHING)
def test_smoothing_splines_are_refused_by_name(name):
    x, y = np.arange(6.0), np.sin(np.arange(6.0))
    before = y.tobytes()
    with pytest.raises(UnsupportedOperationError, match=f"{name}.*make_interp_spline"):
        mutad.gradient(lambda y: SMOOTHING[name](x, y), y)
    assert y.tobytes() == before
    # Constant data inside a differentiation: SciPy's own fit, its objects SciPy's classes.
    (g,) = mutad.gradient(lambda s: s * SMOOTHING[name](x, y), 2.0)
    assert g == SMOOTHING[name](x, y)
    spline = mutad.jvp(lambda s: s * 0.0 + isinstance(scipy.interpolate.UnivariateSpline(x, y),
                                                      scipy.interpolate.UnivariateSpline),
                       (1.0,), (1.0,))[0]
    assert spline == 1.0


SPLREP_X = np.linspace(0.0, 3.0, 9)
SPLREP_QUERIES = np.array([0.2, 1.1, 2.95, -0.3, 3.4])


@pytest.mark.parametrize("options, ext, der", [
    ({}, 0, 0), ({"s": 0, "k": 2}, 0, 0), ({"k": 5}, 1, 0), ({}, 0, 1), ({"k": 1}, 0, 0),
    ({"w": np.full(9, 2.0), "s": 0}, 2, 0), ({"xb": -1.0, "xe": 4.0, "s": 0.0}, 0, 2),
    ({}, 3, 0), ({"k": 4}, 3, 1),
])
def test_splrep_interpolating_then_splev(options, ext, der):
    """At s = 0 splrep's knots depend on x alone and its coefficients are linear in y: SciPy's
    values, differentiated in y and in splev's queries, to second order."""
    queries = SPLREP_QUERIES[:3] if ext == 2 else SPLREP_QUERIES  # ext=2 raises outside

    def f(y, q):
        tck = scipy.interpolate.splrep(SPLREP_X, y * y, **options)
        return scipy.interpolate.splev(q * 1.0, tck, der=der, ext=ext)

    y = np.sin(SPLREP_X)
    tck = scipy.interpolate.splrep(SPLREP_X, y * y, **options)
    expected = scipy.interpolate.splev(queries, tck, der=der, ext=ext)
    value = mutad.jvp(f, (y, queries), (y, queries))[0]
    assert np.array_equal(value, expected)
    for policy in POLICIES:
        mutad.check_grads(f, y, queries.copy(), policy=policy, order=2)
    mutad.check_jvp(f, y, queries.copy())
    # the coefficients themselves, the trailing k + 1 of them zeros
    mutad.check_grads(lambda y: scipy.interpolate.splrep(SPLREP_X, y, **options)[1], y, order=2)


@pytest.mark.parametrize("program, message", [
    (lambda x, y: scipy.interpolate.splrep(x + y, y), "in y alone"),             # traced x
    (lambda x, y: scipy.interpolate.splrep(x, y, s=y[0] ** 2), "in y alone"),    # traced s
    (lambda x, y: scipy.interpolate.splrep(x, y, task=1, s=0.1), "in y alone"),
    (lambda x, y: scipy.interpolate.splrep(x, y, per=1), "in y alone"),
    (lambda x, y: scipy.interpolate.splder((x + y[0], np.ones(9), 3))[1], "the knots t"),
])
def test_splrep_and_splev_refuse_what_they_do_not_differentiate(program, message):
    x, y = np.arange(6.0), np.sin(np.arange(6.0))
    with pytest.raises(UnsupportedOperationError, match=message):
        mutad.gradient(lambda y: np.sum(program(x, y)[1]), y)  # raised before [1]


INTERPOLANT = scipy.interpolate.CubicSpline(np.linspace(0.0, 1.0, 5), np.arange(5.0) ** 2)
TABLE = scipy.interpolate.interp1d(np.linspace(0.0, 1.0, 5), np.arange(5.0) ** 2)


@pytest.mark.parametrize("at", [
    lambda: np.array([0.3]),               # an array the function makes
    lambda: np.linspace(0.0, 1.0, 3),
    lambda: 0.3,
])
def test_an_interpolant_made_before_at_points_the_function_makes_is_scipys_own(at):
    """Constant points (allocated in the function) reach SciPy's own call: the rule, which
    evaluates the interpolant again, recursed without end."""
    def f(x):
        return (INTERPOLANT(at()).sum() + TABLE(at()).sum()) * x.sum()

    x = np.array([0.5, 2.0])
    value, (g,) = mutad.value_and_grad(f, argnums=(0,))(x)
    assert value == f(x)
    assert np.array_equal(g, np.full(2, INTERPOLANT(at()).sum() + TABLE(at()).sum()))


# Scattered data ---------------------------------------------------------------------------------

SCATTERED = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.4], [0.2, 0.7],
                      [0.8, 0.3], [0.45, 0.9]])
SCATTERED_VALUES = np.array([1.0, 2.0, 0.5, 3.0, 1.5, -0.4, 0.8, 2.2])
INSIDE = np.array([[0.2, 0.3], [0.7, 0.6], [0.33, 0.52], [0.9, 0.17], [1.4, 0.55]])

# name: (a call of the values v and queries q, which arguments it differentiates)
SCATTERED_CASES = {
    "griddata-linear": (lambda v, q: scipy.interpolate.griddata(SCATTERED, v, q), (0, 1)),
    "griddata-linear-fill-rescale": (lambda v, q: scipy.interpolate.griddata(
        SCATTERED * [3.0, 0.5], v, q * [3.0, 0.5], fill_value=-1.0, rescale=True), (0, 1)),
    "griddata-linear-tuple-queries": (lambda v, q: scipy.interpolate.griddata(
        SCATTERED, v, (q[:, 0], q[:, 1]), fill_value=0.5), (0, 1)),
    "griddata-nearest": (lambda v, q: scipy.interpolate.griddata(SCATTERED, v, q, "nearest"),
                         (0, 1)),
    "griddata-1d-linear": (lambda v, q: scipy.interpolate.griddata(
        SCATTERED[:, 0] + SCATTERED[:, 1] * 0.13, v, q[:, 0], fill_value=0.0), (0, 1)),
    "griddata-1d-cubic": (lambda v, q: scipy.interpolate.griddata(
        SCATTERED[:, 0] + SCATTERED[:, 1] * 0.13, v, q[:4, 0] * 0.9, "cubic"), (0, 1)),
    "griddata-vector-values": (lambda v, q: scipy.interpolate.griddata(
        SCATTERED, np.stack([v, v * v], axis=1), q, fill_value=0.0), (0, 1)),
    "LinearNDInterpolator": (lambda v, q: scipy.interpolate.LinearNDInterpolator(
        SCATTERED, v, fill_value=0.0)(q), (0, 1)),
    "NearestNDInterpolator": (lambda v, q: scipy.interpolate.NearestNDInterpolator(
        SCATTERED, v)(q), (0, 1)),
    "RBFInterpolator": (lambda v, q: scipy.interpolate.RBFInterpolator(SCATTERED, v)(INSIDE),
                        (0,)),
    "RBFInterpolator-gaussian-neighbors": (lambda v, q: scipy.interpolate.RBFInterpolator(
        SCATTERED, np.stack([v, 2.0 * v], axis=1), neighbors=5, kernel="gaussian",
        epsilon=1.5, smoothing=0.1, degree=1)(INSIDE), (0,)),
    "plain-LinearNDInterpolator-at-queries": (
        lambda v, q: LINEAR_ND(q) + v.sum(), (0, 1)),
    "plain-NearestNDInterpolator-at-queries": (
        lambda v, q: NEAREST_ND(q) * v[0], (0, 1)),
}
LINEAR_ND = scipy.interpolate.LinearNDInterpolator(SCATTERED, SCATTERED_VALUES, rescale=True)
NEAREST_ND = scipy.interpolate.NearestNDInterpolator(SCATTERED, SCATTERED_VALUES)


@pytest.mark.parametrize("name", SCATTERED_CASES)
def test_scattered_data_interpolation(name):
    """griddata, LinearNDInterpolator, NearestNDInterpolator and RBFInterpolator of
    differentiated values (and at differentiated queries): SciPy's values bit for bit, the
    gradients in both modes, policies and to second order, replayed."""
    call, argnums = SCATTERED_CASES[name]
    args = (SCATTERED_VALUES.copy(), INSIDE.copy())
    expected = call(*args)
    y, _ = mutad.jvp(call, args, (np.ones(8), np.ones((5, 2))))
    assert np.asarray(y).tobytes() == np.asarray(expected).tobytes()

    def f(v, q):
        out = call(v, q)
        out = np.where(np.isnan(out), 0.0, out)
        return (np.sin(out) * np.arange(1.0, np.size(out) + 1).reshape(np.shape(out))).sum()

    assert mutad.value_and_grad(f, argnums=argnums)(*args)[0] == f(*args)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *args, policy=policy)
    mutad.check_jvp(f, *args)
    mutad.check_grads(f, *args, order=2)
    replays_as_traced(f, [(SCATTERED_VALUES * s, INSIDE * s) for s in (1.0, 1.1, 0.95)],
                      argnums=argnums)


SCATTERED_POINTS_CASES = {
    "griddata": lambda p, v, q: scipy.interpolate.griddata(p, v, q),
    "griddata-fill-rescale": lambda p, v, q: scipy.interpolate.griddata(
        p * [3.0, 0.5], v, q * [3.0, 0.5], fill_value=-1.0, rescale=True),
    "griddata-vector-values": lambda p, v, q: scipy.interpolate.griddata(
        p, np.stack([v, v * v], axis=1), q, fill_value=0.0),
    "griddata-1d": lambda p, v, q: scipy.interpolate.griddata(
        p[:, 0] + p[:, 1] * 0.13, v, q[:, 0], fill_value=0.0),
    "griddata-3d": lambda p, v, q: scipy.interpolate.griddata(
        np.concatenate([p, np.sin(3.0 * p[:, :1] + p[:, 1:])], axis=1), v,
        np.concatenate([q, q[:, :1] * 0.2 + 0.3], axis=1), fill_value=0.0),
    "LinearNDInterpolator": lambda p, v, q: scipy.interpolate.LinearNDInterpolator(
        p, v, fill_value=0.0)(q),
}


@pytest.mark.parametrize("name", SCATTERED_POINTS_CASES)
def test_linear_scattered_interpolation_in_its_data_points(name):
    """griddata(method='linear') and LinearNDInterpolator of traced data points (a stop:
    refused): SciPy's values bit for bit, the triangulation and each query's simplex decided
    on the plain points, the barycentric weights following the points; both modes, policies,
    second order; replayed on moved points (traced again where the simplices differ)."""
    call = SCATTERED_POINTS_CASES[name]
    args = (SCATTERED.copy(), SCATTERED_VALUES.copy(), INSIDE.copy())
    y, _ = mutad.jvp(call, args, tuple(np.ones_like(a) for a in args))
    assert np.asarray(y).tobytes() == np.asarray(call(*args)).tobytes()

    def f(p, v, q):
        out = call(p, v, q)
        out = np.where(np.isnan(out), 0.0, out)
        return (np.sin(out) * np.arange(1.0, np.size(out) + 1).reshape(np.shape(out))).sum()

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *args, policy=policy)
    mutad.check_jvp(f, *args)
    mutad.check_grads(f, *args, order=2)
    moved = SCATTERED.copy()
    moved[4] = [0.6, 0.55]  # another triangulation
    replays_as_traced(f, [(p, SCATTERED_VALUES, INSIDE) for p in (SCATTERED, SCATTERED * 1.05,
                                                                    moved)], argnums=(0, 1, 2))


def test_scattered_data_refusals():
    with pytest.raises(UnsupportedOperationError, match="data points"):
        mutad.gradient(lambda p: scipy.interpolate.griddata(p, SCATTERED_VALUES, INSIDE,
                                                            "nearest").sum(), SCATTERED)
    with pytest.raises(UnsupportedOperationError, match="CloughTocher2DInterpolator.*query"):
        mutad.gradient(lambda v: scipy.interpolate.griddata(SCATTERED, v, INSIDE * v[0],
                                                            "cubic").sum(), SCATTERED_VALUES)
    with pytest.raises(UnsupportedOperationError, match="fill_value"):
        mutad.gradient(lambda c: scipy.interpolate.griddata(SCATTERED, SCATTERED_VALUES, INSIDE,
                                                            fill_value=c).sum(), 0.5)
    with pytest.raises(UnsupportedOperationError, match="neighbors"):
        mutad.gradient(lambda q: scipy.interpolate.RBFInterpolator(
            SCATTERED, SCATTERED_VALUES * 1.0, neighbors=4)(q).sum(), INSIDE)
    rbf = scipy.interpolate.RBFInterpolator(SCATTERED, SCATTERED_VALUES, neighbors=4)
    with pytest.raises(UnsupportedOperationError, match="neighbors"):
        mutad.gradient(lambda q: rbf(q).sum(), INSIDE)
    with pytest.raises(UnsupportedOperationError, match="data points"):
        mutad.gradient(lambda p: scipy.interpolate.RBFInterpolator(
            p, SCATTERED_VALUES, neighbors=4)(INSIDE).sum(), SCATTERED)
    with pytest.raises(UnsupportedOperationError, match="epsilon"):
        mutad.gradient(lambda e: scipy.interpolate.RBFInterpolator(
            SCATTERED, SCATTERED_VALUES, kernel="gaussian", epsilon=e, neighbors=4)(
                INSIDE).sum(), 1.5)


@pytest.mark.parametrize("kernel", ["gaussian", "thin_plate_spline"])
def test_rbf_interpolation_in_its_shape_parameter_and_smoothing(kernel):
    """A differentiated epsilon and smoothing (were refused): SciPy's values, the composition's
    derivatives in them, with the values and the queries too."""
    def f(s, d, q):
        return np.sum(np.sin(scipy.interpolate.RBFInterpolator(
            SCATTERED, d, kernel=kernel, epsilon=s[0], smoothing=s[1:] ** 2)(q)))

    args = (np.concatenate([[1.5], np.linspace(0.1, 0.3, len(SCATTERED))]),
            SCATTERED_VALUES.copy(), INSIDE.copy())
    assert mutad.value_and_grad(f, argnums=(0, 1, 2))(*args)[0] == f(*args)
    mutad.check_grads(f, *args)
    mutad.check_jvp(f, *args)


RBF_SETTINGS = {
    "thin_plate_spline": dict(),
    "gaussian-degree": dict(kernel="gaussian", epsilon=1.5, degree=1),
    "cubic-smoothing": dict(kernel="cubic", smoothing=0.05),
    "multiquadric": dict(kernel="multiquadric", epsilon=2.0),
    "inverse_quadratic": dict(kernel="inverse_quadratic", epsilon=0.8, degree=0),
    "linear": dict(kernel="linear"),
    "quintic": dict(kernel="quintic"),
    "inverse_multiquadric": dict(kernel="inverse_multiquadric", epsilon=1.2),
}


@pytest.mark.parametrize("settings", RBF_SETTINGS)
def test_rbf_interpolation_in_data_points_values_and_queries(settings):
    """RBFInterpolator differentiated in its data points, values and queries (a query on a data
    point too), and SciPy's own interpolant at differentiated queries: SciPy's values bit for
    bit, gradients in both modes and to second order, replayed."""
    options = RBF_SETTINGS[settings]
    fixed = scipy.interpolate.RBFInterpolator(SCATTERED, SCATTERED_VALUES, **options)
    # a query on a data point too, but for linear's kink there
    queries = np.concatenate([INSIDE, SCATTERED[5:6] + (0.01 if settings == "linear" else 0.0)])

    def call(y, d, q):
        return np.concatenate([
            scipy.interpolate.RBFInterpolator(y, np.stack([d, d * d], axis=1), **options)(q)
            .ravel(), fixed(q[::-1])])

    args = (SCATTERED.copy(), SCATTERED_VALUES.copy(), queries)
    expected = call(*args)
    y, _ = mutad.jvp(call, args, tuple(np.ones_like(a) for a in args))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda y, d, q: (np.sin(call(y, d, q)) * np.arange(1.0, 19.0)).sum()  # noqa: E731
    assert mutad.value_and_grad(f, argnums=(0, 1, 2))(*args)[0] == f(*args)
    mutad.check_grads(f, *args)
    mutad.check_jvp(f, *args)
    if settings in ("gaussian-degree", "multiquadric"):  # smooth at the query on a point
        mutad.check_grads(f, *args, order=2)
    replays_as_traced(f, [(SCATTERED * s, SCATTERED_VALUES * s, queries * s)
                          for s in (1.0, 1.1, 0.95)], argnums=(0, 1, 2))


def test_an_interpolant_that_refers_to_its_data_sees_later_writes():
    """Regression (silently wrong values): BSpline, RegularGridInterpolator (linear, nearest)
    and interp1d(copy=False) of sorted data keep a reference to their data in SciPy, so a
    write into it after construction changes their values; mutad's interpolants held copies.
    Those whose coefficients SciPy computes when built (a cubic grid spline) keep theirs."""
    knots = np.r_[[0.0] * 3, 1.0, 2.0, [3.0] * 3]
    grid = np.linspace(0.0, 1.0, 3)
    x = np.linspace(0.0, 1.0, 5)

    def bspline(c):
        s = scipy.interpolate.BSpline(knots, c, 2)
        c *= 2.0
        return s(1.5)

    def grid_linear(v, method="linear"):
        r = scipy.interpolate.RegularGridInterpolator((grid,), v, method=method)
        v += 1.0
        v *= 1.5
        return r(np.array([[0.25], [0.8]])).sum()

    def not_copied(y):
        i = scipy.interpolate.interp1d(x, y, copy=False, assume_sorted=True)
        y *= 3.0
        return i(0.3)

    cases = [(bspline, np.array([1.0, 2.0, 3.0, 4.0, 5.0])),
             (grid_linear, np.array([1.0, 2.0, 4.0])),
             (lambda v: grid_linear(v, "nearest"), np.array([1.0, 2.0, 4.0])),
             (lambda v: grid_linear(v, "slinear"), np.array([1.0, 2.0, 4.0])),
             (not_copied, x ** 2)]
    for f, data in cases:
        before = data.tobytes()
        value, _ = mutad.value_and_grad(f)(data)
        assert np.asarray(value).tobytes() == np.asarray(f(data.copy())).tobytes()
        assert data.tobytes() == before
        mutad.check_grads(f, data)


def test_a_grid_of_values_the_function_computes_at_differentiated_points():
    """Regression: RegularGridInterpolator and interpn of values computed in the function (a
    constant of the differentiation) at differentiated points raised SciPy's compiled code's
    TypeError; the values are the numbers SciPy reads."""
    g = np.linspace(0.0, 3.0, 8)
    V = np.outer(np.sin(g), np.cos(g))
    points = np.array([[0.2, 1.0], [2.5, 0.4]])
    for f in (lambda p: scipy.interpolate.RegularGridInterpolator((g, g), V * 1.0)(p),
              lambda p: scipy.interpolate.interpn((g, g), V * 1.0, p)):
        value, _ = mutad.pullback(f, points)
        assert value.tobytes() == f(points).tobytes()
        mutad.check_grads(f, points)


def test_interpn_splinef2d_of_traced_values():
    """It was refused by name (before that, SciPy's ValueError of the grid interpolator,
    which does not have it). SciPy's code is followed: its RectBivariateSpline of the grid,
    read at the points inside, fill_value outside; SciPy's values bit for bit, gradients in the
    values or the points, the caller's arrays unchanged (check_grads). (In both at once the
    spline of traced values is refused its traced points, by RectBivariateSpline's rule.)"""
    gx, gy = np.linspace(0, 1, 4), np.linspace(0, 1, 5)
    values = np.outer(np.cos(gx), np.sin(gy + 1))
    points = np.array([[0.2, 0.5], [0.7, 0.1], [1.5, 0.3]])  # (the last one outside)

    def f(v, p):
        return scipy.interpolate.interpn((gx, gy), v * v, p, method="splinef2d",
                                         bounds_error=False, fill_value=-1.0)

    for g, x in ((lambda v: f(v, points), values), (lambda p: f(values, p), points)):
        value, _ = mutad.pullback(g, x)
        assert value.tobytes() == g(x).tobytes()
        mutad.check_grads(g, x, modes=("rev",))


def test_barycentric_at_the_nodes_and_replay():
    """At a node SciPy's value is the datum itself; the derivatives there are the
    interpolant's, and a replay decides the weights' evaluation again at each call."""
    at_nodes = np.r_[X[1:3], 0.9]

    def f(y, q):
        return barycentric_interpolate(X, y, q, rng=0)

    y, q = Y.copy(), at_nodes.copy()
    assert np.array_equal(mutad.pullback(f, y, q)[0][:2], Y[1:3])
    mutad.check_grads(f, y, q)
    mutad.check_jvp(f, y, q)
    weights = np.linspace(1.0, 2.0, 7) * (-1.0) ** np.arange(7)  # a rational interpolant's
    mutad.check_grads(lambda y: BarycentricInterpolator(X, y, wi=weights)(QUERIES), Y.copy())
    replays_as_traced(lambda y, q: np.sum(np.sin(f(y, q))) + np.sum(
        PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]])(q) ** 2),
        [(Y * k, QUERIES + 0.1 * k) for k in (1.0, 2.0)], argnums=(0, 1))


COMPLEX_FORMS = {
    "PPoly": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]])(q),
    "PPoly derivative": lambda y, q: PPoly(np.reshape(y[:6], (3, 2)), X[[0, 3, 6]]).derivative()(
        q, 1),
    "barycentric_interpolate": lambda y, q: barycentric_interpolate(X, y, q, rng=0),
    "BarycentricInterpolator derivative": lambda y, q: BarycentricInterpolator(
        X, y, rng=0).derivative(q, 1),
}


@pytest.mark.parametrize("form", COMPLEX_FORMS)
def test_complex_data(form):
    """PPoly's coefficients and a barycentric interpolant's values may be complex (the
    interpolant is linear in them with real coefficients), the queries real."""
    f = COMPLEX_FORMS[form]
    y, q = Y * np.exp(0.3j * X), QUERIES.copy()
    value, _ = mutad.pullback(f, y.copy(), q.copy())
    assert value.tobytes() == f(y, q).tobytes()
    for policy in POLICIES:
        mutad.check_grads(f, y.copy(), q.copy(), policy=policy, order=2)
    mutad.check_jvp(f, y.copy(), q.copy())


@pytest.mark.parametrize("method", ["akima", "makima"])
def test_akima_replays_as_traced(method):
    """Regression: Akima1DInterpolator of traced values was traced on every call (its slopes
    index a scalar with None, ``second[None]``, which a recording refused)."""
    def f(y, q):
        return np.sum(Akima1DInterpolator(X, y, method=method)(q) ** 2)

    replays_as_traced(f, [(Y * s, QUERIES * s) for s in (1.0, 1.2, 0.9)], argnums=(0, 1),
                      replayed=2)


def test_integrals_and_antiderivatives_replay_as_traced():
    def f(y, q):
        spline = CubicSpline(X, y)
        return spline.integrate(q[0], q[3]) ** 2 + np.sum(spline.antiderivative()(q) ** 2)

    replays_as_traced(f, [(Y * s, QUERIES * s) for s in (1.0, 1.2, 0.9)], argnums=(0, 1))


# ----------------------------------------------------------------------------------------------
# RectBivariateSpline of traced values (s=0): linear in z, SciPy's values bit for bit

RB_Z = np.random.default_rng(5).standard_normal((8, 9))
RB_X = np.linspace(0, 1, 8)
RB_Y = np.linspace(0, 2, 9) ** 1.2
RB_W = np.cos(np.arange(20)).reshape(5, 4)
RBS = scipy.interpolate.RectBivariateSpline
RECT_BIVARIATE = {
    "on a grid": lambda z: np.sum(RBS(RB_X, RB_Y, z)(np.linspace(0, 1, 5),
                                                     np.linspace(0, 2, 4)) * RB_W),
    "ev": lambda z: np.sum(RBS(RB_X, RB_Y, z, kx=3, ky=3, s=0).ev(
        [0.1, 0.5, 0.9], [0.3, 1.1, 1.9]) ** 2),
    "partial derivatives": lambda z: RBS(RB_X, RB_Y, z).ev(0.4, 1.2, dx=1)
    + RBS(RB_X, RB_Y, z).ev(0.6, 0.7, dy=2),
    "other degrees": lambda z: np.sum(RBS(RB_X, RB_Y, z, kx=2, ky=1)(
        np.linspace(0.05, 0.95, 5), np.linspace(0, 2, 4), dx=1) * RB_W),
    "a wider bbox, queries outside the data": lambda z: np.sum(RBS(
        RB_X, RB_Y, z, bbox=[-0.5, 1.5, -1, 3])(np.linspace(-0.4, 1.3, 5),
                                                 np.linspace(-0.5, 2.5, 4)) * RB_W),
    "grid=False": lambda z: np.sum(RBS(RB_X, RB_Y, np.sin(z))(
        np.linspace(0, 1, 5), np.linspace(0, 2, 5), grid=False)),
    # s > 0 (regressions: refused): FITPACK's smoothing fit on its knots, through its p
    "smoothing": lambda z: np.sum(RBS(RB_X, RB_Y, z, s=20.0)(
        np.linspace(0, 1, 5), np.linspace(0, 2, 4)) * RB_W),
    "smoothing, other degrees, ev, coefficients": lambda z: (lambda s: np.sum(s.ev(
        [0.1, 0.5, 0.9], [0.3, 1.1, 1.9], dx=1) ** 2) + s.get_coeffs() @ np.cos(np.arange(
            s.get_coeffs().size)))(RBS(RB_X, RB_Y, z, kx=2, ky=2, s=5.0)),
    "smoothing to a least-squares spline": lambda z: RBS(RB_X, RB_Y, z, s=60.0)(0.3, 1.2)[0, 0],
}


@pytest.mark.parametrize("name", RECT_BIVARIATE)
def test_rect_bivariate_spline(name):
    f = RECT_BIVARIATE[name]
    z = RB_Z.copy()
    mutad.check_grads(f, z, modes=["rev", "fwd"], rtol=1e-5)
    mutad.check_grads(f, z, policy="checkpoint", rtol=1e-5)
    replays_as_traced(f, [(z,), (z * 1.1,), (z * 0.9,)])
    assert np.asarray(mutad.value_and_grad(f)(z)[0]).tobytes() == np.asarray(
        f(RB_Z.copy())).tobytes()
    assert z.tobytes() == RB_Z.tobytes()


@pytest.mark.parametrize("name", [n for n in RECT_BIVARIATE if "smoothing" not in n])
def test_rect_bivariate_spline_second_derivatives(name):
    # regression: the forward rule converted values an enclosing differentiation follows (a
    # Hessian's reverse over forward), refused as cutting the gradient
    f = RECT_BIVARIATE[name]
    mutad.check_grads(lambda z: f(z) ** 2, RB_Z.copy(), order=2, rtol=1e-4)


def test_rect_bivariate_spline_values_are_scipys():
    def f(z):
        s = RBS(RB_X, RB_Y, z)
        return s(np.linspace(0, 1, 5), np.linspace(0, 2, 4), dy=1), s.ev([0.2, 0.3], [1.0, 0.1])

    got = mutad.jvp(f, (RB_Z.copy(),), (np.ones((8, 9)),))[0]
    for a, b in zip(got, f(RB_Z.copy())):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("f, match", [
    (lambda z: RBS(RB_X, RB_Y, z).ev(z[0, 0], 0.5), "query points"),
    (lambda z: RBS(RB_X + z[0, 0], RB_Y, z)(0.5, 0.5).sum(), "grid"),
    (lambda z: RBS(RB_X, RB_Y, z).integral(0, z[0, 0], 0, 1), "integral.*bounds"),
    (lambda z: RBS(RB_X, RB_Y, z).get_coeffs(), "get_coeffs")])
def test_rect_bivariate_spline_refusals(f, match):
    with pytest.raises(UnsupportedOperationError, match=match):
        mutad.gradient(f, RB_Z.copy())


def test_bisplrep_is_refused_by_name():
    X, Y = np.meshgrid(RB_X, RB_Y, indexing="ij")
    z = RB_Z.copy()
    with pytest.raises(UnsupportedOperationError, match="bisplrep.*RectBivariateSpline"):
        mutad.gradient(lambda z: scipy.interpolate.bisplev(0.5, 1.0, scipy.interpolate.bisplrep(
            X.ravel(), Y.ravel(), z.ravel(), s=0)), z)
    assert z.tobytes() == RB_Z.tobytes()


FITPACK_X = np.linspace(0.0, 3.0, 12)
FITPACK_GRID = (np.linspace(0.0, 1.0, 8), np.linspace(0.0, 2.0, 9))
FITPACK_SCATTERED = np.random.default_rng(0).random((40, 2))


def _fitpack_curves():
    x, y = FITPACK_X, np.sin(FITPACK_X)
    return {"UnivariateSpline": scipy.interpolate.UnivariateSpline(x, y, s=0.1),
            "InterpolatedUnivariateSpline": scipy.interpolate.InterpolatedUnivariateSpline(
                x, y, k=2),
            "LSQUnivariateSpline": scipy.interpolate.LSQUnivariateSpline(x, y, [1.0, 2.0])}


@pytest.mark.parametrize("ext", [0, 1, 3, "const"])
@pytest.mark.parametrize("name", ["UnivariateSpline", "InterpolatedUnivariateSpline",
                                  "LSQUnivariateSpline"])
def test_fitpack_curves_at_traced_points(name, ext):
    """SciPy's FITPACK curves fitted to plain data (outside the function too), called at
    traced points: they converted them. SciPy's values; the derivative of one order more,
    0 beyond the knots where SciPy's values are constant there (zeros, or the boundary
    value of the curve itself: its derivatives SciPy extrapolates), in both modes, to second
    order, replayed."""
    spline = _fitpack_curves()[name]
    for nu in range(spline._eval_args[2] + 1):
        def f(q):
            return np.sum(np.sin(spline(q, nu, ext)))

        q = np.array([-0.4, 0.51, 2.2, 3.5])
        value, _ = mutad.value_and_grad(f)(q)
        assert value == f(q.copy())
        mutad.check_grads(f, q, modes=("rev", "fwd"))
        mutad.check_grads(f, q, order=2)
        replays_as_traced(f, [(q,), (q[::-1] * 0.9,)])


def _fitpack_surfaces():
    x, y = FITPACK_GRID
    values = np.sin(3.0 * FITPACK_SCATTERED[:, 0]) + FITPACK_SCATTERED[:, 1] ** 2
    return {"RectBivariateSpline": scipy.interpolate.RectBivariateSpline(
                x, y, np.cos(3.0 * x[:, None]) * y[None, :]),
            "SmoothBivariateSpline": scipy.interpolate.SmoothBivariateSpline(
                *FITPACK_SCATTERED.T, values),
            "LSQBivariateSpline": scipy.interpolate.LSQBivariateSpline(
                *FITPACK_SCATTERED.T, values, [0.5], [0.5])}


SURFACE_CALLS = {
    "ev": lambda s, q: s.ev(q[:3], q[3:]),
    "ev dx": lambda s, q: s.ev(q[:3], q[3:], dx=1),
    "ev of one traced coordinate": lambda s, q: s.ev(q[:3], 0.4),
    "grid": lambda s, q: s(np.sort(q[:3]), np.sort(q[3:])),
    "grid dy": lambda s, q: s(np.sort(q[:3]), q[3:4], dy=1),
    "beyond the knots": lambda s, q: s.ev(q[:3] * 3.0, q[3:]),
    "broadcast": lambda s, q: s(q[:3, None], q[None, 3:], grid=False),
}


@pytest.mark.parametrize("call", SURFACE_CALLS)
@pytest.mark.parametrize("name", ["RectBivariateSpline", "SmoothBivariateSpline",
                                  "LSQBivariateSpline"])
def test_fitpack_surfaces_at_traced_points(name, call):
    """SciPy's bivariate splines (__call__, ev) at traced points: they converted them.
    SciPy's values; the partial derivative of one order more along each coordinate, 0 beyond
    the knots (FITPACK evaluates the boundary there), in both modes, replayed."""
    spline, evaluate = _fitpack_surfaces()[name], SURFACE_CALLS[call]

    def f(q):
        return np.sum(np.sin(evaluate(spline, q)))

    q = np.array([0.13, 0.52, 0.71, 0.33, 0.47, 0.91])
    value, _ = mutad.value_and_grad(f)(q)
    assert value == f(q.copy())
    mutad.check_grads(f, q, modes=("rev", "fwd"))
    if call not in ("ev dx", "grid dy"):  # (their second derivatives need order 3)
        mutad.check_grads(f, q, order=2)
    replays_as_traced(f, [(q,), (q * 0.8,)])


def test_a_fitpack_derivative_it_does_not_compute_is_refused():
    x, y = FITPACK_GRID
    linear = scipy.interpolate.RectBivariateSpline(x, y, np.outer(x, y), kx=1)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="degree 1 along x"):
        mutad.gradient(lambda q: linear.ev(q, 0.3).sum(), np.array([0.2, 0.6]))
    assert mutad.gradient(lambda q: linear.ev(0.3, q).sum(), np.array([0.2, 0.6]))[0].shape == (2,)


KROGH_NODES = np.array([0.0, 0.7, 1.3, 2.0, 3.1])
KROGH = {
    "values": lambda y: scipy.interpolate.KroghInterpolator(KROGH_NODES, y)(
        np.array([0.5, 1.7, 2.5])),
    "points": lambda q: scipy.interpolate.KroghInterpolator(KROGH_NODES, np.sin(KROGH_NODES))(
        q[:3] * 0.5),
    "nodes": lambda xi: scipy.interpolate.KroghInterpolator(xi + 0.01 * xi ** 2, np.cos(
        KROGH_NODES))(np.array([0.5, 1.7])),
    "axis 1": lambda y: scipy.interpolate.KroghInterpolator(KROGH_NODES, np.stack([y, y ** 2]),
                                                           axis=1)(np.array([[0.5], [1.7]])),
    "repeated nodes": lambda y: scipy.interpolate.KroghInterpolator(
        [0.0, 0.0, 1.0, 2.0, 2.5], y)(np.array([0.5, 1.5])),
    "krogh_interpolate": lambda y: scipy.interpolate.krogh_interpolate(KROGH_NODES, y,
                                                                       [0.3, y[0]]),
}


@pytest.mark.parametrize("name", KROGH)
def test_krogh_interpolator(name):
    """KroghInterpolator of traced values, nodes or points (it converted them): SciPy's
    divided differences and Newton form on the traced arrays, its values bit for bit, in both
    modes, to second order, replayed."""
    f = KROGH[name]
    y = np.sin(KROGH_NODES) + 1.0

    def loss(y):
        return np.sum(f(y) ** 2)

    value, _ = mutad.value_and_grad(loss)(y)
    assert np.asarray(value).tobytes() == np.asarray(loss(y.copy())).tobytes()
    mutad.check_grads(loss, y, modes=("rev", "fwd"))
    mutad.check_grads(loss, y, order=2)
    replays_as_traced(loss, [(y,), (y * 0.7,)])
    with pytest.raises(UnsupportedOperationError, match="derivatives"):
        mutad.gradient(lambda y: scipy.interpolate.KroghInterpolator(
            KROGH_NODES, y).derivatives(0.5).sum(), y)


def test_bernstein_polynomials_of_traced_values():
    """BPoly(c, x) and BPoly.from_derivatives(xi, yi) of traced values stopped with a
    ConversionError: SciPy's values bit for bit, linear in the coefficients and in the values
    and derivatives at the knots, in both modes and replayed; the caller's arrays unchanged."""
    points = np.linspace(-0.2, 2.1, 9)  # (beyond the knots: extrapolated)

    def from_derivatives(y):
        p = scipy.interpolate.BPoly.from_derivatives(
            [0.0, 1.0, 2.0], [[y[0], y[1]], [y[2]], [y[3], 0.5, y[0] * y[1]]])
        return np.sum(p(points) ** 2) + np.sum(p(points, nu=1) * y[1]) + p.integrate(0.1, 1.9)

    def coefficients(y):
        c = np.stack([y, y ** 2, np.cos(y)])[:, :3]
        return np.sum(np.sin(scipy.interpolate.BPoly(c, [0.0, 1.0, 2.5, 3.0])(points)))

    y = np.array([0.3, -1.2, 0.8, 2.0])
    for f in (from_derivatives, coefficients):
        before = y.tobytes()
        value, _ = mutad.value_and_gradient(f, y)
        assert np.asarray(value).tobytes() == np.asarray(f(y.copy())).tobytes()
        assert y.tobytes() == before
        mutad.check_grads(f, y, modes=("rev", "fwd"), rtol=1e-6)
        replays_as_traced(f, [(y,), (y * 1.3,), (y[::-1].copy(),)])


@pytest.mark.parametrize("fill_value", [0.0, (-1.0, 3.0)], ids=["fill", "below-above"])
def test_interp1d_linear_of_repeated_knots_differentiates_numpys_interp(fill_value):
    """Regression: interp1d(x, y) of one-dimensional float64 data computes its values with
    np.interp (SciPy's _call_linear_np), and mutad took their derivative in y from SciPy's
    interpolant of several columns (_call_linear), whose search picks another interval at a
    repeated knot: at x = 1.0 of knots [0, 1, 1, 2] the gradient went to y[1] where NumPy's
    value is y[2], and at x = 0.0 of knots [0, 0, 1, 2] (0/0 there) it was lost. Each query's
    gradient is now np.interp's, written by hand here."""
    knots = np.array([0.0, 1.0, 1.0, 2.0])
    y = np.array([1.0, 3.0, 2.0, 5.0])
    before = y.tobytes()
    expected = {0.5: [0.5, 0.5, 0.0, 0.0], 1.0: [0.0, 0.0, 1.0, 0.0], 1.5: [0.0, 0.0, 0.5, 0.5],
                2.0: [0.0, 0.0, 0.0, 1.0], 3.0: [0.0, 0.0, 0.0, 0.0]}
    for point, gradient in expected.items():
        f = lambda y: interp1d(knots, y, bounds_error=False, fill_value=fill_value)(point)  # noqa: E731,B023
        value, got = mutad.value_and_grad(f)(y)
        assert value == f(y)
        assert got.tolist() == gradient, point
    f = lambda y: interp1d([0.0, 0.0, 1.0, 2.0], y, bounds_error=False)(0.0)  # noqa: E731
    assert f(y) == 3.0 and mutad.gradient(f, y)[0].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert y.tobytes() == before


def test_interp1d_linear_of_traced_repeated_knots_is_scipys_value():
    """Regression: interp1d(x, y)(0.0) of traced knots [0, 0, 1, 2] (SciPy's value 3.0, by
    np.interp) came back NaN: the derivative's formula took SciPy's other search's interval,
    of width 0 there, and its 0/0 reached the value. The intervals are np.interp's where
    SciPy computes with it; the value SciPy's, in a replay too."""
    y = np.array([1.0, 3.0, 2.0, 5.0])
    f = lambda x: interp1d(x, y, bounds_error=False, fill_value=0.0)(  # noqa: E731
        np.array([0.0, 0.5, 1.0, 2.0])) @ np.arange(1.0, 5.0)
    calls = [(np.array(knots),) for knots in ([0.0, 0.0, 1.0, 2.0], [0.0, 1.0, 1.0, 2.0],
                                              [0.0, 0.5, 1.0, 2.0], [0.0, 0.0, 1.0, 2.0])]
    for (x,) in calls:
        value, gradient = mutad.value_and_grad(f)(x)
        assert value == f(x) and np.isfinite(gradient).all(), x
    replays_as_traced(f, calls, replayed=1)  # (a call whose intervals are a recording's)
    assert y.tolist() == [1.0, 3.0, 2.0, 5.0]


_NOISY_X = np.linspace(0.0, 3.0, 15)
_NOISY_Y = np.sin(_NOISY_X) + 0.1 * np.cos(7.0 * _NOISY_X)


def _smoothed(y):  # curfit's iteration on p
    s = scipy.interpolate.UnivariateSpline(_NOISY_X, y, s=0.05)
    return s(np.array([0.4, 1.7])).sum() + s.integral(0.5, 2.0) + s.get_residual()


def _smoothed_splrep(y):  # the same fit by splrep (which was traced at every call: its
    # FITPACK fit was SciPy's value computed from plain values outside a recorded step)
    tck = scipy.interpolate.splrep(_NOISY_X, y, s=0.05)
    return scipy.interpolate.splev(np.array([0.4, 1.7]), tck).sum() + np.sum(tck[1] ** 2)


@pytest.mark.parametrize("smoothed", [_smoothed, _smoothed_splrep])
def test_a_smoothing_fit_replays_while_fitpack_places_the_same_knots(smoothed):
    """FITPACK's fit at s > 0 is a step a replay runs again on the new y; the knots it places,
    which the steps after it read as numbers, are a decision the replay checks: data that keep
    them replay, bit for bit the traced calls; data given other knots record again."""
    y, near, other = _NOISY_Y, _NOISY_Y * 1.001, _NOISY_Y + 0.3 * np.sin(9.0 * _NOISY_X)
    knots = [scipy.interpolate.UnivariateSpline(_NOISY_X, v, s=0.05).get_knots()
             for v in (y, near, other)]
    assert knots[0].tobytes() == knots[1].tobytes() and len(knots[0]) != len(knots[2])
    before = y.tobytes()
    replays_as_traced(smoothed, [(y,), (y,), (near,), (other,), (other,)], replayed=3)
    assert y.tobytes() == before


def test_a_smoothing_splrep_replays_while_its_ier_is_the_recorded_one(monkeypatch):
    """``splrep(full_output=1)``'s ``ier``, read by f in arithmetic and in a branch, comes from
    the fit the replay runs again and is a decision it checks: the same ier replays, another
    (FITPACK's fit made to report one) records again, bit for bit the traced calls."""
    moved = [0]
    fit = interpolate._splrep_numbers

    def reported(*args):
        knots, c, fp, ier = fit(*args)
        return knots, c, fp, ier + moved[0]

    monkeypatch.setattr(interpolate, "_splrep_numbers", reported)

    def loss(y):
        (_, c, _), fp, ier, message = scipy.interpolate.splrep(_NOISY_X, y, s=0.05,
                                                               full_output=1)
        return np.sum(c ** 2) + fp * (ier + 1) + (len(message) if ier > 0 else 0.0)

    y = _NOISY_Y.copy()
    replaying = replays_as_traced(loss, [(y,), (y,), (y * 1.001,)], replayed=2)
    moved[0] = 3
    (value, gradient), traced = replaying(y), mutad.value_and_grad(loss)(y)
    assert [p.replays for p in replaying.programs.values()] == [0]  # (recorded again)
    assert value == traced[0] and gradient.tobytes() == traced[1].tobytes()
    assert y.tobytes() == _NOISY_Y.tobytes()
