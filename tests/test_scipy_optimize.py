"""``scipy.optimize`` solvers inside differentiated functions (``mutad/scipy/optimize.py``):
solutions differentiated by the implicit function theorem.

Each solver's derivative is checked against a closed form where there is one (a quadratic's
minimiser ``A⁻¹θ``, Rosenbrock's ``(a, a²)``, a cubic's root), and against central finite
differences of the whole function otherwise, with the solver's tolerances tight enough that
the differences measure the derivative and not the solver (the derivative is accurate to the
solver's tolerance). Reverse mode under both policies and forward mode; SciPy's name inside
the function (module-level ``from scipy.optimize import ...``, ``scipy.optimize.<name>``) and
``mutad.scipy.optimize``'s; the caller's arrays bit for bit; SciPy's values bit for bit; and
minima held by strictly active bounds; and the refusals: a minimum on a bound that is not
strictly active, a singular Hessian or Jacobian, a saddle point, a result that is not a
solution, constraints not strictly active or given as objects that depend on the
differentiated values, second derivatives, a value reached other than through ``args=`` or a
closure, and the result fields without a derivative.
"""

import functools
import inspect
import warnings

import numpy as np
import pytest
import scipy.optimize
from scipy.optimize import brentq, curve_fit, fixed_point, fsolve, least_squares, minimize, root

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import optimize
from rule_checks import central_differences

RNG = np.random.default_rng(7)
N = 3
M = RNG.standard_normal((N, N))
A = M @ M.T + N * np.eye(N)  # symmetric positive definite
W = RNG.standard_normal(N)
THETA = RNG.standard_normal(N)


def gradient_keeping(f, *args, policy="restore"):
    """``mutad.gradient``, checking that the caller's arrays come back bit for bit."""
    before = [a.tobytes() for a in args]
    grads = mutad.gradient(f, *args, policy=policy)
    assert [a.tobytes() for a in args] == before
    return grads


# ----------------------------------------------------------------------------------------------
# minimize: a quadratic, every method, closed form


def quadratic(x, theta):
    return 0.5 * x @ A @ x - theta @ x


def quadratic_jac(x, theta):
    return A @ x - theta


def quadratic_hess(x, theta):
    return A


def quadratic_hessp(x, p, theta):
    return A @ p


METHODS = {
    "BFGS": dict(options={"gtol": 1e-11}),
    "L-BFGS-B": dict(options={"gtol": 1e-12, "ftol": 1e-16}),
    "CG": dict(options={"gtol": 1e-11}),
    "Newton-CG": dict(jac=quadratic_jac, hessp=quadratic_hessp, options={"xtol": 1e-12}),
    "trust-ncg": dict(jac=quadratic_jac, hess=quadratic_hess, options={"gtol": 1e-11}),
    "trust-krylov": dict(jac=quadratic_jac, hessp=quadratic_hessp, options={"gtol": 1e-11}),
    "trust-exact": dict(jac=quadratic_jac, hess=quadratic_hess, options={"gtol": 1e-11}),
    "Nelder-Mead": dict(options={"xatol": 1e-11, "fatol": 1e-15, "maxiter": 20000,
                                 "maxfev": 20000}),
    "Powell": dict(options={"xtol": 1e-11, "ftol": 1e-15}),
    "TNC": dict(jac=quadratic_jac, options={"gtol": 1e-12, "xtol": 1e-14, "ftol": 1e-16}),
    "SLSQP": dict(options={"ftol": 1e-14}),
    "dogleg": dict(jac=quadratic_jac, hess=quadratic_hess, options={"gtol": 1e-11}),
    "trust-constr": dict(jac=quadratic_jac, hess=quadratic_hess,
                         options={"gtol": 1e-12, "xtol": 1e-14}),
    "COBYLA": dict(options={"rhobeg": 0.5, "tol": 1e-12, "maxiter": 10000}),
}


@pytest.mark.parametrize("method", METHODS)
def test_minimize_quadratic_every_method(method):
    """x*(θ) = A⁻¹θ and L* = -½θᵀA⁻¹θ: the loss w·x* + 0.3 L* has gradient A⁻¹w - 0.3 x*."""
    settings = METHODS[method]
    tol = 1e-6 if method in ("Nelder-Mead", "Powell", "COBYLA") else 1e-8

    def f(theta):
        res = minimize(quadratic, np.zeros(N), args=(theta,), method=method, **settings)
        return W @ res.x + 0.3 * res.fun

    x_star = np.linalg.solve(A, THETA)
    expected = np.linalg.solve(A, W) - 0.3 * x_star
    for policy in ("restore", "checkpoint"):
        np.testing.assert_allclose(gradient_keeping(f, THETA, policy=policy)[0], expected,
                                   rtol=tol, atol=tol)
    direction = np.array([1.0, -2.0, 0.5])
    _, dy = mutad.jvp(f, (THETA,), (direction,))
    np.testing.assert_allclose(dy, expected @ direction, rtol=tol, atol=tol)


def test_minimize_closure_and_scipy_names():
    """θ reached through the objective's closure; SciPy's name as imported at module level,
    as an attribute of scipy.optimize, and mutad.scipy.optimize's."""
    expected = np.linalg.solve(A, W)
    for solve in (minimize, scipy.optimize.minimize, optimize.minimize):
        def f(theta, solve=solve):
            res = solve(lambda x: quadratic(x, theta), np.zeros(N), method="BFGS",
                        options={"gtol": 1e-11})
            return W @ res.x

        np.testing.assert_allclose(gradient_keeping(f, THETA)[0], expected, rtol=1e-8)


def test_minimize_values_are_scipys():
    def solve(theta):
        return scipy.optimize.minimize(lambda x: quadratic(x, theta) + (x ** 4).sum(),
                                       np.zeros(N), method="BFGS")

    plain = solve(THETA)
    y, back = mutad.pullback(lambda theta: (solve(theta).x, solve(theta).fun), THETA)
    assert y[0].tobytes() == plain.x.tobytes()
    assert float(y[1]) == plain.fun


def test_minimize_outside_a_differentiation_is_scipys():
    res = optimize.minimize(quadratic, np.zeros(N), args=(THETA,), method="BFGS")
    plain = scipy.optimize.minimize(quadratic, np.zeros(N), args=(THETA,), method="BFGS")
    assert res.x.tobytes() == plain.x.tobytes()
    assert inspect.signature(optimize.minimize) == inspect.signature(scipy.optimize.minimize)


def test_minimize_args_of_every_kind():
    """args= holding a dict of arrays, a string, an integer and a namedtuple: only the
    differentiated values in them are replaced for the solver."""
    import collections

    Pair = collections.namedtuple("Pair", "theta weight")

    def objective(x, settings, kind, power, pair):
        assert kind == "squares" and power == 2
        return settings["scale"] * quadratic(x, settings["theta"]) + pair.weight * (
            (x - pair.theta) ** power).sum()

    def f(theta, other):
        res = minimize(objective, np.zeros(N),
                       args=({"scale": 2.0, "theta": theta}, "squares", 2, Pair(other, 0.5)),
                       method="BFGS", options={"gtol": 1e-11})
        return W @ res.x

    # ∇: 2 (A x - θ) + (x - φ) = 0, so x* = (2A + I)⁻¹ (2θ + φ).
    K = np.linalg.inv(2 * A + np.eye(N))
    dtheta, dother = gradient_keeping(f, THETA, W.copy())
    np.testing.assert_allclose(dtheta, 2 * K.T @ W, rtol=1e-8)
    np.testing.assert_allclose(dother, K.T @ W, rtol=1e-8)


def test_minimize_with_user_jacobian_true():
    """fun returns (value, gradient) with jac=True: SciPy uses the gradient, mutad
    differentiates the value."""
    def f(theta):
        res = minimize(lambda x: (quadratic(x, theta), quadratic_jac(x, theta)), np.zeros(N),
                       jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-16})
        return W @ res.x

    np.testing.assert_allclose(gradient_keeping(f, THETA)[0], np.linalg.solve(A, W),
                               rtol=1e-7)


def test_minimize_with_mutads_value_and_grad():
    """fun = mutad.value_and_grad(objective), jac=True, the objective in place and closing over
    θ: x*(θ) = θ, and L* = 0 with a zero gradient."""
    def f(theta):
        def objective(x):
            x -= theta
            x *= x
            return x.sum() + (x * x).sum()

        res = minimize(mutad.value_and_grad(objective), np.zeros(N), jac=True, method="BFGS",
                       options={"gtol": 1e-11})
        return W @ res.x + res.fun

    np.testing.assert_allclose(gradient_keeping(f, THETA)[0], W, rtol=1e-8)
    np.testing.assert_allclose(mutad.jvp(f, (THETA,), (np.ones(N),))[1], W.sum(), rtol=1e-8)


def test_minimize_differentiates_closed_over_matrix():
    """x* = A⁻¹θ with A closed over and differentiated: dx*/dA = -A⁻¹ (w) x*ᵀ, symmetrised as
    A enters only through xᵀAx."""
    def f(a):
        res = minimize(lambda x: 0.5 * x @ a @ x - THETA @ x, np.zeros(N), method="BFGS",
                       options={"gtol": 1e-11})
        return W @ res.x

    x_star = np.linalg.solve(A, THETA)
    u = np.linalg.solve(A, W)
    expected = -0.5 * (np.outer(u, x_star) + np.outer(x_star, u))
    np.testing.assert_allclose(gradient_keeping(f, A.copy())[0], expected, rtol=1e-7,
                               atol=1e-9)


# ----------------------------------------------------------------------------------------------
# minimize: Rosenbrock with parameters, finite differences


def rosenbrock(x, a, b):
    return (a - x[0]) ** 2 + b * (x[1] - x[0] ** 2) ** 2


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "trust-exact"])
def test_minimize_rosenbrock_closed_form(method):
    """x* = (a, a²) whatever b: the gradient of x*₀ + x*₁ is (1 + 2a, 0)."""
    def f(params):
        a, b = params[0], params[1]
        objective = functools.partial(rosenbrock, a=a, b=b)
        extra = {}
        if method == "trust-exact":
            extra = dict(jac=mutad.grad(objective), hess=lambda x: mutad.hessian(objective, x))
        res = minimize(objective, np.array([-1.0, 1.5]), method=method,
                       options={"gtol": 1e-10} if method != "L-BFGS-B" else
                       {"gtol": 1e-12, "ftol": 1e-16, "maxiter": 2000}, **extra)
        return res.x.sum()

    params = np.array([1.3, 10.0])
    # BFGS stops at "precision loss", Rosenbrock's valley leaving x* accurate to ~1e-6.
    np.testing.assert_allclose(gradient_keeping(f, params)[0], [1 + 2 * 1.3, 0.0],
                               atol=1e-5 if method == "BFGS" else 1e-6)


def test_minimize_matches_finite_differences():
    """A non-quadratic objective whose minimiser has no closed form: the gradient of the whole
    function against central differences, with the solver converged to rounding."""
    def f(theta):
        def objective(x):
            return np.sum(np.cosh(x - theta)) + 0.5 * x @ A @ x

        # Newton's method converges to rounding: jac and hess by mutad, closing over theta.
        res = minimize(objective, np.zeros(N), method="trust-exact", jac=mutad.grad(objective),
                       hess=lambda x: mutad.hessian(objective, x), options={"gtol": 1e-13})
        return np.sin(res.x).sum() + res.fun

    g = gradient_keeping(f, THETA)[0]
    np.testing.assert_allclose(g, central_differences(f, THETA, 1e-4), rtol=1e-6, atol=1e-7)
    _, dy = mutad.jvp(f, (THETA,), (np.ones(N),))
    np.testing.assert_allclose(dy, g.sum(), rtol=1e-10)


def test_minimize_large_problem_is_solved_without_the_hessian():
    """Beyond optimize.DENSE unknowns, conjugate gradients on Hessian-vector products."""
    n = optimize.DENSE + 8
    rng = np.random.default_rng(3)
    B = rng.standard_normal((n, n)) / np.sqrt(n)
    H = B @ B.T + np.eye(n)
    w = rng.standard_normal(n)

    def f(theta):
        res = minimize(lambda x: 0.5 * x @ H @ x - theta @ x, np.zeros(n), method="L-BFGS-B",
                       options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 5000})
        return w @ res.x

    theta = rng.standard_normal(n)
    np.testing.assert_allclose(gradient_keeping(f, theta)[0], np.linalg.solve(H, w),
                               rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------------------------
# minimize: refusals


def test_minimize_holds_strictly_active_bounds_and_refuses_the_others():
    """x* = clip(θ, lo, hi) for Σ (x - θ)²: on a bound x*ᵢ does not move (while θᵢ stays
    beyond it), inside it follows θᵢ. A minimum on a bound the gradient does not push
    against (θᵢ at the bound) has no derivative: refused."""
    def f(theta, method="L-BFGS-B"):
        res = minimize(lambda x: ((x - theta) ** 2).sum() + 0.1 * (x[0] * x[2]) ** 2,
                       np.zeros(3), method=method, bounds=[(-1.0, 0.5), (None, None), (-2, 2)],
                       options={"gtol": 1e-12, "ftol": 1e-16} if method == "L-BFGS-B"
                       else {"xtol": 1e-12, "ftol": 1e-15})
        return res.x @ np.array([1.0, 2.0, 3.0])

    theta = np.array([2.0, 1.0, 0.7])  # the first coordinate held at 0.5
    # With x0 = 0.5 fixed: x2 minimises (x2 - θ2)² + 0.1 (0.5 x2)²: x2 = θ2 / 1.025.
    expected = [0.0, 2.0, 3.0 / 1.025]
    for method in ("L-BFGS-B", "Powell"):
        np.testing.assert_allclose(gradient_keeping(lambda t: f(t, method), theta)[0],
                                   expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mutad.jvp(f, (theta,), (np.ones(3),))[1], sum(expected),
                               rtol=1e-6)

    def degenerate(theta):  # θ₀ on the bound: x*₀ = min(θ₀, 0.5) has a kink there
        res = minimize(lambda x: ((x - theta) ** 2).sum(), np.array([0.5, 0.0, 0.0]),
                       method="L-BFGS-B", bounds=[(-1.0, 0.5), (None, None), (-2, 2)])
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="not strictly active"):
        mutad.gradient(degenerate, np.array([0.5, 1.0, 0.7]))

    def gradient_on_the_bound(theta):  # not zero where a bound holds the minimum: refused
        return minimize(lambda x: ((x - theta) ** 2).sum(), np.zeros(3), method="L-BFGS-B",
                        bounds=[(-1.0, 0.5), (None, None), (-2, 2)]).jac.sum()

    with pytest.raises(UnsupportedOperationError, match="jac"):
        mutad.gradient(gradient_on_the_bound, theta)
    # No bound active: the unconstrained derivative.
    inside = np.array([0.2, 1.0, 0.7])
    x0 = scipy.optimize.minimize(lambda x: ((x - inside) ** 2).sum() + 0.1 * (x[0] * x[2]) ** 2,
                                 inside, method="BFGS", options={"gtol": 1e-12}).x
    H = np.diag([2.0, 2.0, 2.0]) + 0.2 * np.array(
        [[x0[2] ** 2, 0, 2 * x0[0] * x0[2]], [0, 0, 0], [2 * x0[0] * x0[2], 0, x0[0] ** 2]])
    np.testing.assert_allclose(gradient_keeping(f, inside)[0],
                               2.0 * np.linalg.solve(H, [1.0, 2.0, 3.0]), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::UserWarning")  # (trust-constr's own, of bounds)
def _held_by_a_moving_bound(solver):
    """x₀ + 2x₁ + f* at the minimum x* of f = (x₀ - 3)² + (x₁ - 3)² + x₀x₁ with x₀ ≤ θ₀, which
    holds x₀ = θ₀ (θ₀ < 1.5) and x₁ = 3 - θ₀/2: its derivative is 2θ₀ - 6 + θ₀/2 + 3 - θ₀;
    least_squares' and curve_fit's twins are in the test."""
    def objective(x):
        return (x[0] - 3.0) ** 2 + (x[1] - 3.0) ** 2 + x[0] * x[1]

    def f(theta):
        if solver == "least_squares":  # ½‖r‖² with r = (x₀ - 3, x₁ - 3 + x₀/2)
            res = least_squares(lambda x: np.array([x[0] - 3.0, x[1] - 3.0 + 0.5 * x[0]]),
                                [0.1, 0.1], bounds=([0.0, 0.0], [theta[0], 5.0]),
                                xtol=1e-15, ftol=1e-15, gtol=1e-15)
            return res.x[0] + 2.0 * res.x[1] + res.cost
        if solver == "curve_fit":  # a line a + b t through 3 + 2t, a ≤ θ₀
            t = np.linspace(0.0, 1.0, 6)
            popt, _ = curve_fit(line, t, 2.0 * t + 3.0, p0=[0.5, 0.5],
                                bounds=([0.0, 0.0], [5.0, theta[0]]))
            return popt[1] + 2.0 * popt[0]
        if solver == "fmin_l_bfgs_b":
            x, value, _ = scipy.optimize.fmin_l_bfgs_b(
                objective, [0.1, 0.1], approx_grad=True, bounds=[(0.0, theta[0]), (0.0, 5.0)],
                pgtol=1e-12, factr=10)
            return x[0] + 2.0 * x[1] + value
        options = {"SLSQP": {"tol": 1e-14, "constraints": [
            {"type": "ineq", "fun": lambda x: 10.0 - x[0]}]}}.get(solver, {})
        res = minimize(objective, [0.1, 0.1], method=solver,
                       bounds=[(0.0, theta[0]), (None, 5.0)], **options)
        return res.x[0] + 2.0 * res.x[1] + res.fun

    return f


@pytest.mark.parametrize("solver", ["L-BFGS-B", "TNC", "SLSQP", "least_squares", "curve_fit",
                                    "fmin_l_bfgs_b"])
def test_a_bound_that_depends_on_the_differentiated_values_moves_the_minimum_it_holds(solver):
    """The coordinates a bound holds are the bound, whose derivative they have, and the free
    ones follow them (the minimum with those fixed); the objective there too. Was: the held
    coordinates' derivative zero, as for a constant bound — silently wrong."""
    f = _held_by_a_moving_bound(solver)
    theta = np.array([1.0])
    expected = {"least_squares": -2.0,  # x = (θ, 3 - θ/2), cost ½(θ - 3)²
                # b = θ held, a = 2 + (3 - θ) Σt / Σt²: d(b + 2a)/dθ = 1 - 2 Σt / Σt²
                "curve_fit": 1.0 - 2.0 * 3.0 / 2.2}.get(solver, -1.5)
    value = f(theta)
    g = gradient_keeping(f, theta)[0]
    np.testing.assert_allclose(g, [expected], rtol=1e-6)
    np.testing.assert_allclose(g, central_differences(f, theta, 1e-5), rtol=2e-3)
    assert f(theta) == value  # (SciPy's value: the derivatives add nothing to it)
    if solver in ("L-BFGS-B", "least_squares"):  # second order: d²/dθ² = 3/2, and 1
        np.testing.assert_allclose(mutad.hessian(f, theta), [[1.5 if solver == "L-BFGS-B"
                                                              else 1.0]], rtol=1e-6)


def test_minimize_trust_constr_inside_an_active_bound_is_refused_naming_barrier_tol():
    """trust-constr, an interior point method, stops inside an active bound: the refusal spoke
    of a Newton step alone, not of the bound it is near nor of the options that set how near
    (barrier_tol) or the methods that stop on it; L-BFGS-B, which it names, is followed."""
    def f(theta, method="trust-constr"):
        res = minimize(lambda x: ((x - theta) ** 2).sum(), np.zeros(2), method=method,
                       bounds=[(0.0, 1.0), (0.0, 1.0)])
        return res.x @ np.array([1.0, 2.0])

    theta = np.array([0.5, 2.0])  # the second coordinate held at 1
    before = theta.tobytes()
    with pytest.raises(UnsupportedOperationError,
                       match=r"coordinate 1 is .* from a bound.*barrier_tol.*L-BFGS-B"):
        mutad.gradient(f, theta)
    assert theta.tobytes() == before
    np.testing.assert_allclose(gradient_keeping(lambda t: f(t, "L-BFGS-B"), theta)[0],
                               [1.0, 0.0], rtol=1e-6, atol=1e-8)


def test_minimize_refuses_a_singular_hessian():
    def f(theta):
        res = minimize(lambda x: (x[0] + x[1] - theta[0]) ** 2, np.zeros(2), method="BFGS")
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="singular"):
        mutad.gradient(f, np.array([1.0]))


def test_minimize_refuses_a_saddle_point_and_a_large_singular_hessian():
    def saddle(theta):  # BFGS starts at the stationary point x = θ of an indefinite form
        res = minimize(lambda x: (x[0] - theta[0]) ** 2 - (x[1] - theta[1]) ** 2,
                       mutad.stop_gradient(theta), method="BFGS")
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="saddle"):
        mutad.gradient(saddle, np.array([1.0, 2.0]))

    n = optimize.DENSE + 4

    def flat(theta):  # the last coordinate does not enter: a zero direction of the Hessian
        res = minimize(lambda x: ((x[:-1] - theta) ** 2).sum() + 0.0 * x[-1], np.zeros(n),
                       method="BFGS")
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="curvature|singular"):
        mutad.gradient(flat, np.ones(n - 1))


def test_minimize_refuses_what_has_not_converged():
    def f(theta):
        res = minimize(lambda x: np.sum(np.cosh(x - theta)) + (x ** 4).sum(), np.zeros(N),
                       method="BFGS", options={"maxiter": 1})
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="Newton step"):
        mutad.gradient(f, THETA)


# Constrained minima: the KKT conditions in (x, λ) at SciPy's minimum (optimize's section).

WEIGHTS = np.array([1.0, 2.0, 3.0])


def test_minimize_under_an_equality_constraint_is_the_closed_form():
    """min ‖x - θ‖² subject to Σx = 1 is x = θ - (Σθ - 1)/n: its derivative I - 11ᵀ/n, and
    res.fun's, by the envelope theorem, 2 (x - θ)·(-1) + λ·0 ... = 2 (θ - x)."""
    theta = np.array([0.3, 0.9, -0.2])
    before = theta.tobytes()

    def f(theta):
        res = minimize(lambda x: np.sum((x - theta) ** 2), np.zeros(3), method="SLSQP",
                       constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0}],
                       options={"ftol": 1e-14})
        return res.x @ WEIGHTS + res.fun

    value, (gradient,) = mutad.value_and_gradient(f, theta)
    assert value == f(theta.copy())
    x = theta - (theta.sum() - 1.0) / 3
    expected = WEIGHTS - WEIGHTS.mean() + 2 * (theta - x)
    assert np.allclose(gradient, expected, atol=1e-7)
    assert theta.tobytes() == before


@pytest.mark.parametrize("method", ("SLSQP", "trust-constr"))
def test_minimize_under_active_and_inactive_constraints(method):
    """Inequalities (a dict whose function reads θ, one holding through args=), an inactive
    one, a bound, and NonlinearConstraint and LinearConstraint objects: both modes and
    policies against finite differences, with tight tolerances."""
    theta = np.array([0.3, 0.9, -0.2])
    tight = {"ftol": 1e-15, "maxiter": 1000} if method == "SLSQP" else \
        {"gtol": 1e-13, "xtol": 1e-15, "maxiter": 20000}

    def dicts(theta):
        res = minimize(lambda x: np.sum((x - theta) ** 2) + 0.1 * np.sum(x ** 4), np.zeros(3),
                       method=method, bounds=[(None, None), (None, None), (-5.0, 5.0)],
                       constraints=[{"type": "ineq", "fun": lambda x: x[0] - 1.0 - 0.5 * theta[2]},
                                    {"type": "ineq", "fun": lambda x, c: c - x[1],
                                     "args": (0.5,)},
                                    {"type": "ineq", "fun": lambda x: 10.0 - x[2]}],
                       options=tight)
        return res.x @ WEIGHTS + res.fun

    def objects(theta):
        res = minimize(lambda x: np.sum((x - theta) ** 2) + np.sum(x ** 4), np.zeros(3),
                       method=method, options=tight,
                       constraints=[scipy.optimize.LinearConstraint(np.ones((1, 3)), 1.0, 1.0),
                                    scipy.optimize.NonlinearConstraint(lambda x: x[0] ** 2,
                                                                       -np.inf, 0.04)])
        return res.x @ WEIGHTS

    # trust-constr's barrier stops about 3e-7 short of an active constraint, an error that
    # finite differences divide by their step: a step of 1e-3 keeps it below the tolerance
    step = 1e-4 if method == "SLSQP" else 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (trust-constr's about its quasi-Newton updates)
        for f in (dicts, objects):
            for policy in ("restore", "checkpoint"):
                mutad.check_grads(f, theta.copy(), policy=policy, modes=("rev", "fwd"),
                                  rtol=1e-4, step=step)


def _projection(theta, constraint, start):
    """The point nearest θ that ``constraint`` admits, weighted by (1, 3)."""
    res = minimize(lambda x: np.sum((x - theta) ** 2), start, method="SLSQP",
                   constraints=[constraint], options={"ftol": 1e-15})
    return res.x @ np.array([1.0, 3.0])


def test_minimize_under_constraint_objects_bounded_on_both_sides():
    """``NonlinearConstraint(fun, lb, ub)`` and ``LinearConstraint`` with both bounds finite:
    each value makes two rows, whose kinds were read from those rows again (four for two),
    and the call raised NumPy's ValueError. Against the projections' closed forms: onto the
    disc |x| ≤ 1 (θ/|θ|), the ring 2 ≤ |x|² ≤ 9 from inside (√2 θ/|θ|), and the band
    -1 ≤ x₀ + x₁ ≤ 1 (θ moved along (1, 1))."""
    c = np.array([1.0, 3.0])

    def radial(theta, r):  # the gradient of r (θ·c)/|θ|
        norm = np.linalg.norm(theta)
        return r * (c / norm - (theta @ c) * theta / norm ** 3)

    cases = [
        (scipy.optimize.NonlinearConstraint(lambda x: x @ x, 0.0, 1.0), np.zeros(2),
         np.array([1.0, 2.0]), lambda theta: radial(theta, 1.0)),
        (scipy.optimize.NonlinearConstraint(lambda x: x @ x, 2.0, 9.0), np.ones(2),
         np.array([0.3, 0.4]), lambda theta: radial(theta, np.sqrt(2.0))),
        (scipy.optimize.LinearConstraint([[1.0, 1.0], [1.0, -1.0]], [-1.0, -5.0], [1.0, 5.0]),
         np.zeros(2), np.array([1.0, 2.0]), lambda theta: c - 0.5 * c.sum()),
    ]
    for constraint, start, theta, expected in cases:
        before = theta.tobytes()
        value, (gradient,) = mutad.value_and_gradient(
            lambda t: _projection(t, constraint, start), theta)
        assert value == _projection(theta.copy(), constraint, start)
        np.testing.assert_allclose(gradient, expected(theta), rtol=1e-7)
        assert theta.tobytes() == before


@pytest.mark.filterwarnings("ignore::UserWarning")  # (trust-constr's own, of a linear objective)
def test_constraint_objects_that_depend_on_the_differentiated_values():
    """A NonlinearConstraint whose function closes over the differentiated values, or whose
    lb and ub are computed from them, is differentiated as the dicts are (was refused):
    max x₀ + 2x₁ on the ellipse x₀² + a x₁² ≤ c, of value (a + 4)/(2λa) - 1/(2λ) with
    λ = √((a + 4)/(4ac)), and min |x|² on the line x₀ + a x₁ = c (lb = ub = c)."""
    def on_the_ellipse(theta, method):
        a, c = theta
        constraint = scipy.optimize.NonlinearConstraint(lambda x: x[0] ** 2 + a * x[1] ** 2,
                                                        0.0, c)
        options = ({"tol": 1e-14} if method == "SLSQP" else {"options": {
            "gtol": 1e-13, "xtol": 1e-15, "maxiter": 5000, "initial_barrier_parameter": 1e-10,
            "initial_barrier_tolerance": 1e-10}})
        res = minimize(lambda x: -(x[0] + 2.0 * x[1]), [0.1, 0.1], method=method,
                       constraints=[constraint], **options)
        return res.fun + res.x[0]

    def on_the_line(theta):
        a, c = theta
        res = minimize(lambda x: x @ x, [0.1, 0.1], method="SLSQP", tol=1e-14,
                       constraints=scipy.optimize.NonlinearConstraint(
                           lambda x: x[0] + a * x[1], c, c))
        return res.fun + res.x[0]  # c²/(1 + a²) + c/(1 + a²)

    theta = np.array([1.0, 2.0])
    for method in ("SLSQP", "trust-constr"):
        np.testing.assert_allclose(
            gradient_keeping(lambda t: on_the_ellipse(t, method), theta)[0],
            [1.5178932777, -0.6324555320], rtol=1e-7)
    np.testing.assert_allclose(gradient_keeping(on_the_line, theta)[0], [-3.0, 2.5],
                               rtol=1e-7)


def test_bounds_and_linear_constraints_made_of_the_differentiated_values():
    """Bounds(lb, ub) and LinearConstraint(A, lb, ub) of differentiated values (SciPy's
    constructors converted them: a ConversionError in np.atleast_1d), isinstance of them
    still SciPy's: a bound holding x₀ = θ₀ (the L-BFGS-B case of the moving bound above),
    and the line x₀ + a x₁ = c as a LinearConstraint."""
    def held(theta):
        bounds = scipy.optimize.Bounds([0.0, 0.0], [theta[0], 5.0])
        assert isinstance(bounds, scipy.optimize.Bounds)
        res = minimize(lambda x: (x[0] - 3.0) ** 2 + (x[1] - 3.0) ** 2 + x[0] * x[1],
                       [0.1, 0.1], method="L-BFGS-B", bounds=bounds)
        return res.x[0] + 2.0 * res.x[1] + res.fun

    def on_the_line(theta):
        a, c = theta
        res = minimize(lambda x: x @ x, [0.1, 0.1], method="SLSQP", tol=1e-14,
                       constraints=scipy.optimize.LinearConstraint([[1.0, a]], c, c))
        return res.fun + res.x[0]

    np.testing.assert_allclose(gradient_keeping(held, np.array([1.0, 2.0]))[0], [-1.5, 0.0],
                               rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(gradient_keeping(on_the_line, np.array([1.0, 2.0]))[0],
                               [-3.0, 2.5], rtol=1e-7)


def test_minimize_refuses_what_its_constraints_do_not_determine():
    theta = np.array([0.3, 0.9])

    def weakly_active(theta):  # the unconstrained minimum lies on the constraint
        res = minimize(lambda x: np.sum((x - theta) ** 2), np.zeros(2), method="SLSQP",
                       constraints=[{"type": "ineq", "fun": lambda x: x[0] - theta[0]}],
                       options={"ftol": 1e-15})
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="strictly active"):
        mutad.gradient(weakly_active, theta.copy())

    def equality(theta):
        res = minimize(lambda x: np.sum((x - theta) ** 4) + np.sum(x ** 2), np.zeros(2),
                       method="SLSQP", options={"ftol": 1e-15},
                       constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0}])
        return res.x @ res.x

    with pytest.raises(UnsupportedOperationError, match="higher order"):
        mutad.hessian(equality, theta.copy())


# Second order through a solution: chord steps from SciPy's solution (optimize._solution).
# The oracle is the closed form of a separable problem, x*(θ) per coordinate the root of
# 2 (x - θ) + x³ = 0, and central differences of mutad's own first derivatives elsewhere.


def _quartic_minimum(theta):
    x = np.array([brentq(lambda x: 2 * (x - t) + x ** 3, -10, 10, xtol=1e-15) for t in theta])
    dx = 2 / (2 + 3 * x * x)
    return x, dx, -12 * x * dx / (2 + 3 * x * x) ** 2


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "Newton-CG", "trust-exact",
                                    "Nelder-Mead"])
def test_second_derivatives_through_minimize(method):
    options = {"Nelder-Mead": dict(options={"xatol": 1e-13, "fatol": 1e-15, "maxiter": 40000}),
               "Newton-CG": dict(options={"xtol": 1e-14})}.get(method, dict(tol=1e-14))

    def f(theta):
        objective = lambda x: ((x - theta) ** 2).sum() + (x ** 4).sum() / 4  # noqa: E731
        extra = ({} if method in ("BFGS", "L-BFGS-B", "Nelder-Mead")
                 else dict(jac=mutad.grad(objective),
                           hess=lambda x: mutad.hessian(objective, x)))
        res = minimize(objective, np.zeros(2), method=method, **options, **extra)
        return W[:2] @ res.x + res.fun

    theta = np.array([1.0, 2.0])
    x, dx, d2x = _quartic_minimum(theta)
    # res.fun: d/dθ = x³ (the envelope), d²/dθ² = 3 x² dx
    expected = np.diag(W[:2] * d2x + 3 * x * x * dx)
    before = theta.copy()
    np.testing.assert_allclose(mutad.hessian(f, theta), expected, rtol=1e-6, atol=1e-9)
    v = np.array([0.3, -0.8])
    np.testing.assert_allclose(mutad.hvp(f, (theta,), (v,)), expected @ v, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mutad.gradient(lambda t: mutad.gradient(f, t)[0] @ v, theta)[0],
                               expected @ v, rtol=1e-6, atol=1e-9)
    assert mutad.jvp(lambda t: mutad.jvp(f, (t,), (v,))[1], (theta,), (v,))[1] == \
        pytest.approx(v @ expected @ v, rel=1e-6)
    assert np.array_equal(theta, before)


def _second_by_differences(f, theta, eps=1e-3):
    """Central differences of mutad's gradient: the Hessian to about eps² and the solves'
    accuracy over eps."""
    return np.array([(mutad.gradient(f, theta + e)[0] - mutad.gradient(f, theta - e)[0])
                     / (2 * eps) for e in np.eye(theta.size) * eps])


SOLVED = {
    "root": lambda t: root(lambda x: x ** 3 + t * x - 1.0, np.ones(2), tol=1e-14).x,
    "fsolve": lambda t: fsolve(lambda x: x ** 3 + t * x - 1.0, np.ones(2), xtol=1e-14),
    "fixed_point": lambda t: fixed_point(lambda x: np.cos(t * x), np.ones(2), xtol=1e-14),
    "brentq": lambda t: np.stack([brentq(lambda x, s: x ** 3 + s * x - 1.0, 0.0, 2.0,
                                         args=(s,), xtol=1e-15) for s in t]),
    "least_squares": lambda t: least_squares(lambda x: np.exp(t * x) - 2.0 - x, np.zeros(2),
                                             xtol=1e-15, ftol=1e-15, gtol=1e-15).x,
    "curve_fit": lambda t: curve_fit(lambda s, a, b: a * np.exp(-b * s), np.linspace(0, 2, 7),
                                     t[0] * np.exp(-np.linspace(0, 2, 7)) + t[1]
                                     * np.linspace(0, 2, 7) ** 2, p0=[1.0, 1.0],
                                     xtol=1e-15, ftol=1e-15, gtol=1e-15)[0],
}


@pytest.mark.parametrize("name", list(SOLVED))
def test_second_derivatives_through_solutions(name):
    def f(t):
        z = SOLVED[name](t)
        return (z * z).sum() + z[0] * z[1]

    theta = np.array([0.7, 1.3])
    before = theta.copy()
    H = mutad.hessian(f, theta)
    np.testing.assert_allclose(H, _second_by_differences(f, theta), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    assert np.array_equal(theta, before)


def test_a_solution_inside_a_nested_differentiation():
    """A solution that depends on the enclosing differentiation's values alone is that
    differentiation's; one whose objective reaches both levels' values is differentiated by
    both (chord steps: optimize._solution)."""
    def outer(theta):
        res = minimize(lambda x: ((x - theta) ** 2).sum() + (x ** 4).sum(), np.zeros(2),
                       method="BFGS", options={"gtol": 1e-11})
        inner = mutad.gradient(lambda phi: (phi * phi * res.x).sum(), np.ones(2))[0]
        return inner.sum()  # 2 Σ x*

    theta = np.array([1.0, 2.0])
    x = np.array([brentq(lambda x: 2 * (x - t) + 4 * x ** 3, -5, 5, xtol=1e-15)
                  for t in theta])
    np.testing.assert_allclose(gradient_keeping(outer, theta)[0], 2 * 2 / (2 + 12 * x * x),
                               rtol=1e-7)

    def mixed(theta):
        def inner(phi):
            return minimize(lambda x: ((x - theta * phi) ** 2).sum(), np.zeros(2),
                            method="BFGS").x.sum()

        return mutad.gradient(inner, np.ones(2))[0].sum()

    # x* = θ φ: the inner gradient is θ, summed; its gradient is ones.
    np.testing.assert_allclose(gradient_keeping(mixed, theta)[0], np.ones(2), rtol=1e-8)


class _Model:
    pass


_GLOBAL_MODEL = _Model()


def test_minimize_refuses_a_value_reached_through_a_global_object():
    """(Objects in the closure are followed: ``test_parameters_in_the_attributes_...``.)"""
    def f(theta):
        _GLOBAL_MODEL.theta = theta
        res = minimize(lambda x: ((x - _GLOBAL_MODEL.theta) ** 2).sum(), np.zeros(2),
                       method="BFGS")
        return res.x.sum()

    with pytest.raises(UnsupportedOperationError, match="args="):
        mutad.gradient(f, np.array([1.0, 2.0]))


def test_minimize_refuses_fields_without_a_derivative():
    def f(theta):
        res = minimize(quadratic, np.zeros(N), args=(theta,), method="BFGS")
        assert repr(res.hess_inv).startswith("<")
        return (res.hess_inv @ theta).sum()

    with pytest.raises(UnsupportedOperationError, match="hess_inv"):
        mutad.gradient(f, THETA)


def test_minimize_without_differentiated_values_is_scipys_call():
    def f(theta):
        res = minimize(quadratic, np.zeros(N), args=(THETA,), method="BFGS")
        return (res.x * theta).sum() + res.hess_inv.sum() * 0.0

    np.testing.assert_allclose(gradient_keeping(f, THETA)[0], np.linalg.solve(A, THETA),
                               rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# Scalar roots


def cubic(x, c):
    return x ** 3 + x - c


def cubic_derivative(c):
    """dx*/dc = 1 / f'(x*), x* the real root of x³ + x = c."""
    x = brentq(cubic, -10, 10, args=(c,), xtol=1e-15)
    return 1.0 / (3 * x * x + 1)


SCALAR = {
    "brentq": lambda f, args: brentq(f, -10.0, 10.0, args=args),
    "brenth": lambda f, args: optimize.brenth(f, -10.0, 10.0, args=args),
    "ridder": lambda f, args: scipy.optimize.ridder(f, -10.0, 10.0, args=args),
    "bisect": lambda f, args: scipy.optimize.bisect(f, -10.0, 10.0, args=args),
    "toms748": lambda f, args: scipy.optimize.toms748(f, -10.0, 10.0, args=args),
    "brentq-full": lambda f, args: brentq(f, -10.0, 10.0, args=args, full_output=True)[1].root,
    "root_scalar": lambda f, args: scipy.optimize.root_scalar(f, args=args,
                                                              bracket=(-10.0, 10.0)).root,
    "root_scalar-newton": lambda f, args: scipy.optimize.root_scalar(
        f, args=args, x0=1.0, fprime=lambda x, *a: 3 * x * x + 1, xtol=1e-14).root,
    "newton": lambda f, args: scipy.optimize.newton(f, 1.0, args=args, tol=1e-14),
    "root_scalar-fprime-True": lambda f, args: scipy.optimize.root_scalar(
        lambda x, *a: (f(x, *a), 3 * x * x + 1), args=args, x0=1.0, fprime=True,
        method="newton", xtol=1e-14).root,
    "root_scalar-halley": lambda f, args: scipy.optimize.root_scalar(
        lambda x, *a: (f(x, *a), 3 * x * x + 1, 6 * x), args=args, x0=1.0, fprime=True,
        fprime2=True, method="halley", xtol=1e-14).root,
}


@pytest.mark.parametrize("name", SCALAR)
def test_scalar_roots(name):
    solve = SCALAR[name]
    c = 2.5

    def by_args(c):
        return solve(cubic, (c,)) * 2.0

    def by_closure(c):
        return solve(lambda x: cubic(x, c), ()) * 2.0

    for f in (by_args, by_closure):
        for policy in ("restore", "checkpoint"):
            np.testing.assert_allclose(mutad.gradient(f, c, policy=policy)[0],
                                       2.0 * cubic_derivative(c), rtol=1e-9)
        np.testing.assert_allclose(mutad.jvp(f, (c,), (1.0,))[1], 2.0 * cubic_derivative(c),
                                   rtol=1e-9)


@pytest.mark.parametrize("method", ["brent", "golden", "bounded"])
def test_minimize_scalar(method):
    """argmin (x - c)² + x⁴ / 4: 2 (x - c) + x³ = 0, so dx*/dc = 2 / (2 + 3 x*²); the minimum's
    value has derivative -2 (x* - c)."""
    c = 0.8

    def f(c):
        res = scipy.optimize.minimize_scalar(
            lambda x, c: (x - c) ** 2 + x ** 4 / 4, args=(c,), method=method,
            bounds=(-3.0, 3.0) if method == "bounded" else None,
            options={"xatol": 1e-12} if method == "bounded" else {"xtol": 1e-12})
        return res.x + 0.5 * res.fun

    x = brentq(lambda x: 2 * (x - c) + x ** 3, -5, 5, xtol=1e-15)
    expected = 2 / (2 + 3 * x * x) - (x - c)
    np.testing.assert_allclose(mutad.gradient(f, c)[0], expected, rtol=1e-6)
    np.testing.assert_allclose(mutad.jvp(f, (c,), (1.0,))[1], expected, rtol=1e-6)


LEGACY_SCALAR_MINIMIZERS = {
    "golden": lambda c: scipy.optimize.golden(
        lambda x, c: (x - c) ** 2 + x ** 4 / 4, args=(c,), brack=(-1.0, 2.0), tol=1e-12),
    "golden closure, full_output": lambda c: (lambda r: r[0] + 0.5 * r[1])(
        scipy.optimize.golden(lambda x: (x - c) ** 2 + x ** 4 / 4, tol=1e-12, full_output=1)),
    "brent": lambda c: scipy.optimize.brent(lambda x, c: (x - c) ** 2 + x ** 4 / 4, args=(c,),
                                            tol=1e-12),
    "brent full_output": lambda c: (lambda r: r[0] + 0.5 * r[1])(scipy.optimize.brent(
        lambda x: (x - c) ** 2 + x ** 4 / 4, brack=(-1.0, 2.0), full_output=True)),
    "fminbound": lambda c: scipy.optimize.fminbound(
        lambda x, c: (x - c) ** 2 + x ** 4 / 4, -3.0, 3.0, args=(c,), xtol=1e-12),
    "fminbound full_output": lambda c: (lambda r: r[0] + 0.5 * r[1])(scipy.optimize.fminbound(
        lambda x: (x - c) ** 2 + x ** 4 / 4, -3.0, 3.0, xtol=1e-12, full_output=1)),
}


@pytest.mark.parametrize("name", LEGACY_SCALAR_MINIMIZERS)
def test_golden_brent_and_fminbound(name):
    """The legacy scalar minimizers, differentiated at the minimum as minimize_scalar is:
    golden's arithmetic moves by fixed ratios, so following it gave a derivative of 0 (a
    wrong number), brent's and fminbound's the derivative of their last step."""
    f = LEGACY_SCALAR_MINIMIZERS[name]
    c = 0.8
    x = brentq(lambda x: 2 * (x - c) + x ** 3, -5, 5, xtol=1e-15)
    expected = 2 / (2 + 3 * x * x) - ((x - c) if "full" in name else 0.0)
    assert mutad.value_and_gradient(f, c)[0] == f(c)  # SciPy's own values
    np.testing.assert_allclose(mutad.gradient(f, c)[0], expected, rtol=1e-6)
    np.testing.assert_allclose(mutad.jvp(f, (c,), (1.0,))[1], expected, rtol=1e-6)


GLOBAL_MINIMIZERS = {
    "differential_evolution": lambda f, c: scipy.optimize.differential_evolution(
        f, [(-2.0, 2.0)], args=(c,), seed=0, tol=1e-10),
    "shgo": lambda f, c: scipy.optimize.shgo(f, [(-2.0, 2.0)], args=(c,)),
    "dual_annealing": lambda f, c: scipy.optimize.dual_annealing(f, [(-2.0, 2.0)], args=(c,),
                                                                 seed=0),
    "direct": lambda f, c: scipy.optimize.direct(f, [(-2.0, 2.0)], args=(c,), eps=1e-8,
                                                 vol_tol=1e-30, len_tol=1e-12),
    "brute": lambda f, c: (lambda r: scipy.optimize.OptimizeResult(x=np.atleast_1d(r[0]),
                                                                   fun=r[1]))(
        scipy.optimize.brute(f, [(-2.0, 2.0)], args=(c,), full_output=True, finish=_fmin_tight)),
}


def _fmin_tight(func, x0, args=(), full_output=0, disp=0):
    return scipy.optimize.fmin(func, x0, args, xtol=1e-12, ftol=1e-15,
                               full_output=full_output, disp=disp)


@pytest.mark.parametrize("name", GLOBAL_MINIMIZERS)
def test_global_minimizers(name):
    """SciPy's global minimizers, their minimum differentiated as minimize's (they stopped on
    NumPy conversions inside SciPy): argmin (x - c)² + x⁴ / 4, dx*/dc = 2 / (2 + 3 x*²), the
    minimum's value -2 (x* - c)."""
    c = 0.8

    def f(c):
        res = GLOBAL_MINIMIZERS[name](lambda x, c: (x[0] - c) ** 2 + x[0] ** 4 / 4, c)
        return res.x[0] + 0.5 * res.fun

    x = brentq(lambda x: 2 * (x - c) + x ** 3, -5, 5, xtol=1e-15)
    expected = 2 / (2 + 3 * x * x) - (x - c)
    assert mutad.value_and_gradient(f, c)[0] == f(c)  # SciPy's own values
    np.testing.assert_allclose(mutad.gradient(f, c)[0], expected, rtol=1e-4)
    np.testing.assert_allclose(mutad.jvp(f, (c,), (1.0,))[1], expected, rtol=1e-4)


@pytest.mark.parametrize("options", [
    {"method": "BFGS", "options": {"gtol": 1e-12}},
    {"method": "L-BFGS-B", "bounds": [(-3.0, 3.0)], "options": {"gtol": 1e-12, "ftol": 1e-15}},
    {"method": "BFGS", "jac": True, "options": {"gtol": 1e-12}}], ids=["BFGS", "bounds", "jac"])
def test_basinhopping_differentiates_its_lowest_minimum(options):
    """basinhopping's lowest minimum, of a function with several: it stopped (SciPy's
    Metropolis test took math.exp of the traced energies of two minima). Its minimum is
    differentiated as minimize's: 2 (x* - c) = 0.9 sin 3x*, dx*/dc = 2 / (2 - 2.7 cos 3x*),
    and the minimum's value has the derivative -2 (x* - c)."""
    def wavy(x, c):
        value = (x[0] - c) ** 2 + 0.3 * np.cos(3.0 * x[0])
        if options.get("jac"):
            return value, np.array([2.0 * (x[0] - c) - 0.9 * np.sin(3.0 * x[0])])
        return value

    def f(c):
        res = scipy.optimize.basinhopping(wavy, np.array([-1.0]), niter=8, rng=3,
                                          minimizer_kwargs={"args": (c,), **options})
        return res.x[0] + 0.5 * res.fun

    c = 0.4
    x = scipy.optimize.basinhopping(wavy, np.array([-1.0]), niter=8, rng=3,
                                    minimizer_kwargs={"args": (c,), **options}).x[0]
    expected = 2.0 / (2.0 - 2.7 * np.cos(3.0 * x)) - (x - c)
    assert mutad.value_and_gradient(f, c)[0] == f(c)  # SciPy's own values
    np.testing.assert_allclose(mutad.gradient(f, c)[0], expected, rtol=1e-6)
    np.testing.assert_allclose(mutad.jvp(f, (c,), (1.0,))[1], expected, rtol=1e-6)


def test_brute_refuses_the_values_on_its_grid():
    with pytest.raises(UnsupportedOperationError, match="Jout"):
        mutad.gradient(lambda c: scipy.optimize.brute(
            lambda x: (x[0] - c) ** 2, [(-1.0, 1.0)], full_output=True)[3].sum(), 0.3)


def test_fminbound_refuses_differentiated_bounds():
    with pytest.raises(UnsupportedOperationError, match="bounds"):
        mutad.gradient(lambda c: scipy.optimize.fminbound(lambda x: (x - 5.0) ** 2, -c, c), 2.0)


def test_scalar_root_refusals():
    def step(c):  # a sign change that is a jump, not a root
        return brentq(lambda x: np.sign(x - c) + 0.0 * c, -1.0, 1.0)

    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(step, 0.3)

    def jump(c):  # a jump across zero, with a slope: f(x*) is not small
        return scipy.optimize.bisect(lambda x: x - c + np.where(x > c, 1.0, -1.0), -1.0, 1.0)

    with pytest.raises(UnsupportedOperationError, match="Newton step"):
        mutad.gradient(jump, 0.3)


# ----------------------------------------------------------------------------------------------
# root, fsolve, fixed_point


def system(x, theta):
    return A @ x + 0.1 * x ** 3 - theta


def test_root_and_fsolve():
    def by_root(theta):
        return W @ root(system, np.zeros(N), args=(theta,), tol=1e-13).x

    def by_fsolve(theta):
        return W @ scipy.optimize.fsolve(lambda x: system(x, theta), np.zeros(N), xtol=1e-13)

    def by_fsolve_full(theta):
        x, info, ier, message = optimize.fsolve(system, np.zeros(N), args=(theta,),
                                                full_output=True, xtol=1e-13)
        assert ier == 1
        return W @ x

    x_star = root(system, np.zeros(N), args=(THETA,), tol=1e-13).x
    J = A + np.diag(0.3 * x_star ** 2)
    expected = np.linalg.solve(J.T, W)  # -(∂F/∂x)⁻ᵀ w times ∂F/∂θ = -I
    for f in (by_root, by_fsolve, by_fsolve_full):
        np.testing.assert_allclose(gradient_keeping(f, THETA)[0], expected, rtol=1e-8)
        np.testing.assert_allclose(mutad.jvp(f, (THETA,), (np.ones(N),))[1], expected.sum(),
                                   rtol=1e-8)
    np.testing.assert_allclose(gradient_keeping(by_root, THETA)[0],
                               central_differences(by_root, THETA, 1e-5),
                               rtol=1e-6)


def test_functions_that_return_lists():
    """SciPy reads a list as an array: so does the derivative (no silent zero)."""
    def by_root(t):
        return root(lambda x: [x[0] - t[0], x[1] ** 3 + x[1] - t[1]], np.zeros(2),
                    tol=1e-13).x.sum()

    np.testing.assert_allclose(gradient_keeping(by_root, np.array([1.0, 2.0]))[0],
                               [1.0, 1.0 / (3 * 1.0 + 1)], rtol=1e-9)

    def by_least_squares(t):
        return least_squares(lambda x: [x[0] - t[0], x[1] - t[1], x[0] + x[1]],
                             np.zeros(2)).x.sum()

    design = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(gradient_keeping(by_least_squares, np.array([1.0, 2.0]))[0],
                               np.linalg.pinv(design).sum(axis=0)[:2], rtol=1e-8)


def test_root_large_uses_gmres_and_refuses_a_singular_jacobian():
    n = optimize.DENSE + 6
    rng = np.random.default_rng(5)
    J = np.eye(n) * 3 + rng.standard_normal((n, n)) / np.sqrt(n)
    w = rng.standard_normal(n)

    def f(theta):
        return w @ root(lambda x: J @ x - theta, np.zeros(n), tol=1e-13).x

    np.testing.assert_allclose(gradient_keeping(f, rng.standard_normal(n))[0],
                               np.linalg.solve(J.T, w), rtol=1e-7)

    def singular(theta):
        return root(lambda x: np.array([x[0] ** 3 - theta[0], x[1] - 1.0]), np.array([0.5, 0.0]),
                    method="lm", tol=1e-14).x.sum()

    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(singular, np.array([0.0]))


def test_root_fields_without_a_derivative_are_refused():
    def f(theta):
        res = root(system, np.zeros(N), args=(theta,))
        return res.fjac.sum()

    with pytest.raises(UnsupportedOperationError, match="fjac"):
        mutad.gradient(f, THETA)


def test_fixed_point():
    """x = θ cos x: dx*/dθ = cos x* / (1 + θ sin x*)."""
    def f(theta):
        return scipy.optimize.fixed_point(lambda x: theta * np.cos(x), 0.5, xtol=1e-14)

    theta = 0.8
    x = scipy.optimize.fixed_point(lambda x: theta * np.cos(x), 0.5, xtol=1e-14)
    expected = np.cos(x) / (1 + theta * np.sin(x))
    np.testing.assert_allclose(mutad.gradient(f, theta)[0], expected, rtol=1e-9)
    np.testing.assert_allclose(mutad.jvp(f, (theta,), (1.0,))[1], expected, rtol=1e-9)

    def vector(theta):  # x = θ cos x elementwise, by args
        return optimize.fixed_point(lambda x, t: t * np.cos(x), np.full(2, 0.5),
                                    args=(theta,), xtol=1e-14).sum()

    thetas = np.array([0.8, 0.3])
    xs = scipy.optimize.fixed_point(lambda x: thetas * np.cos(x), np.full(2, 0.5), xtol=1e-14)
    np.testing.assert_allclose(gradient_keeping(vector, thetas)[0],
                               np.cos(xs) / (1 + thetas * np.sin(xs)), rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# least_squares, curve_fit

B = RNG.standard_normal((7, N))
Y = RNG.standard_normal(7)


def test_least_squares_linear_closed_form():
    """x* = B⁺y: dx*/dy = B⁺; cost* = ½‖(I - BB⁺)y‖², of gradient (I - BB⁺)y."""
    def f(y):
        res = least_squares(lambda x, y: B @ x - y, np.zeros(N), args=(y,), xtol=1e-15,
                            ftol=1e-15, gtol=1e-15)
        return W @ res.x + res.cost

    pinv = np.linalg.pinv(B)
    expected = pinv.T @ W + (Y - B @ (pinv @ Y))

    def by_kwargs(y):
        res = least_squares(lambda x, y: B @ x - y, np.zeros(N), kwargs={"y": y}, xtol=1e-15,
                            ftol=1e-15, gtol=1e-15)
        return W @ res.x + res.cost

    np.testing.assert_allclose(gradient_keeping(by_kwargs, Y)[0], expected, rtol=1e-7,
                               atol=1e-8)
    for policy in ("restore", "checkpoint"):
        np.testing.assert_allclose(gradient_keeping(f, Y, policy=policy)[0], expected,
                                   rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(mutad.jvp(f, (Y,), (np.ones(7),))[1], expected.sum(), rtol=1e-8)


def test_least_squares_with_an_active_bound():
    """x*₀ held at its lower bound: the others are B_F⁺ (y - B₀ lb), of derivative B_F⁺."""
    free = np.linalg.lstsq(B, Y, rcond=None)[0]
    lower = np.array([free[0] + 1.0, -np.inf, -np.inf])

    def f(y):
        res = least_squares(lambda x: B @ x - y, np.array([lower[0] + 1.0, 0.0, 0.0]),
                            bounds=(lower, np.inf),
                            xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return W @ res.x

    np.testing.assert_allclose(gradient_keeping(f, Y)[0], np.linalg.pinv(B[:, 1:]).T @ W[1:],
                               rtol=1e-6, atol=1e-8)


def test_least_squares_nonlinear_uses_the_exact_hessian():
    """Residuals that stay large at the solution: Gauss-Newton's JᵀJ would be wrong, the
    exact Hessian of ½‖r‖² agrees with finite differences."""
    t = np.linspace(0.0, 2.0, 9)

    def f(y):
        res = scipy.optimize.least_squares(lambda p: p[0] * np.exp(p[1] * t) - y,
                                           np.array([1.0, -0.5]), xtol=1e-15, ftol=1e-15,
                                           gtol=1e-15, method="lm")
        return res.x.sum() + (res.fun ** 2).sum()

    y = 2.0 * np.exp(-0.7 * t) + np.cos(5 * t)  # far from the model: large residuals
    np.testing.assert_allclose(gradient_keeping(f, y)[0], central_differences(f, y, 1e-3), rtol=1e-5,
                               atol=1e-7)


LOSSES = {
    "soft_l1": lambda z: 2.0 * (np.sqrt(1.0 + z) - 1.0),
    "huber": lambda z: np.where(z <= 1.0, z, 2.0 * np.sqrt(np.maximum(z, 1.0)) - 1.0),
    "cauchy": np.log1p,
    "arctan": np.arctan,
}


@pytest.mark.parametrize("loss", LOSSES)
def test_least_squares_robust_losses(loss):
    """The cost ½ C² Σ ρ((r / C)²) (SciPy's, checked against its res.cost) differentiated as it
    is, against finite differences of its minimum found to rounding by Newton's method (SciPy's
    own stops at ftol, too early for differences); the residuals on both sides of huber's
    kink; f_scale differentiated too."""
    y = Y + np.array([0.0, 3.0, 0.0, -2.5, 0.0, 0.0, 4.0])  # outliers
    rho = LOSSES[loss]

    def f(y, scale):
        res = least_squares(lambda x: B @ x - y, np.zeros(N), loss=loss, f_scale=scale,
                            xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return W @ res.x + res.cost

    def cost(x, y, scale):
        return 0.5 * scale ** 2 * rho(((B @ x - y) / scale) ** 2).sum()

    def exact(y, scale):
        res = minimize(cost, np.zeros(N), args=(y, scale), method="trust-exact",
                       jac=mutad.grad(cost), hess=lambda x, *a: mutad.hessian(cost, x, *a),
                       options={"gtol": 1e-14})
        return W @ res.x + res.fun

    scale = np.float64(0.7)
    res = least_squares(lambda x: B @ x - y, np.zeros(N), loss=loss, f_scale=scale)
    np.testing.assert_allclose(cost(res.x, y, scale), res.cost, rtol=1e-13)
    dy, dscale = gradient_keeping(f, y, scale)
    d = np.linspace(-1.0, 1.0, 7)  # a direction: two solves, not fourteen
    np.testing.assert_allclose(dy @ d, (exact(y + 1e-4 * d, scale) - exact(y - 1e-4 * d, scale))
                               / 2e-4, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dscale, (exact(y, scale + 1e-4) - exact(y, scale - 1e-4)) / 2e-4,
                               rtol=1e-5, atol=1e-6)


def test_least_squares_from_a_differentiated_start_has_constant_cost_and_fun():
    """Where only x0 is differentiated (it picks the minimum, which does not move), res.cost
    and res.fun are SciPy's numbers, of derivative zero. Was: refused as followed."""
    def f(x0):
        res = least_squares(lambda x: B @ x - Y, x0, xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return res.cost + res.fun.sum() + x0[0]

    x0 = np.zeros(N)
    plain = least_squares(lambda x: B @ x - Y, x0, xtol=1e-15, ftol=1e-15, gtol=1e-15)
    assert f(x0) == plain.cost + plain.fun.sum()
    np.testing.assert_array_equal(gradient_keeping(f, x0)[0], np.eye(N)[0])


def test_least_squares_refusals():
    def robust(y):
        return least_squares(lambda x: B @ x - y, np.zeros(N),
                             loss=lambda z: np.stack([z, np.ones_like(z), 0 * z])).x.sum()

    with pytest.raises(UnsupportedOperationError, match="loss"):
        mutad.gradient(robust, Y)

    def jacobian_field(y):
        return least_squares(lambda x: B @ x - y, np.zeros(N)).jac.sum()

    with pytest.raises(UnsupportedOperationError, match="jac"):
        mutad.gradient(jacobian_field, Y)


def line(x, a, b):
    return a * x + b


def test_curve_fit():
    """A line: popt = X⁺ y, differentiated in ydata; a nonlinear model against finite
    differences, in xdata and ydata; pcov, (XᵀX)⁻¹ ‖r‖² / (m - n) for the line."""
    x = np.linspace(0.0, 1.0, 6)
    y = 0.5 + 2.0 * x + 0.1 * np.sin(7 * x)
    X = np.stack([x, np.ones_like(x)], axis=1)

    def f(ydata):
        popt, pcov = curve_fit(line, x, ydata, p0=[1.0, 0.0])
        return popt @ np.array([1.0, 3.0])

    np.testing.assert_allclose(gradient_keeping(f, y)[0],
                               np.linalg.pinv(X).T @ np.array([1.0, 3.0]), rtol=1e-7)

    def model(x, a, k):
        return a * np.exp(-k * x)

    def g(xdata, ydata):
        popt, _ = optimize.curve_fit(model, xdata, ydata, p0=[1.0, 1.0], xtol=1e-15,
                                     ftol=1e-15, gtol=1e-15)
        return popt.sum()

    data = 1.5 * np.exp(-0.8 * x) + 0.05 * np.cos(9 * x)
    dx, dy = gradient_keeping(g, x, data)
    # leastsq converges to a gradient of 1e-10: differences of 1e-3, accurate to O(1e-6).
    np.testing.assert_allclose(dy, central_differences(lambda d: g(x, d), data, 1e-3), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(dx, central_differences(lambda d: g(d, data), x, 1e-3), rtol=1e-5,
                               atol=1e-5)

    def uses_pcov(ydata):
        popt, pcov = curve_fit(line, x, ydata)
        return np.sqrt(np.diag(pcov)).sum()

    def exact(ydata):  # the line's covariance, with the residuals of its exact fit
        r = ydata - X @ np.linalg.lstsq(X, ydata, rcond=None)[0]
        return np.sqrt(np.diag(np.linalg.inv(X.T @ X)) * (r @ r) / (len(x) - 2)).sum()

    np.testing.assert_allclose(gradient_keeping(uses_pcov, y)[0],
                               mutad.gradient(exact, y)[0], rtol=1e-6)


def test_a_replayed_gradient_runs_the_solver_each_time():
    """grad(f, replay=True) cannot replay a solver's solution: each call traces it again."""
    def f(c):
        return brentq(lambda x: x ** 3 + x - c, -10.0, 10.0) * 2.0

    g = mutad.grad(f, replay=True)
    for c in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(g(c), 2.0 * cubic_derivative(c), rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# Calling forms and values


def test_a_start_or_a_bracket_carries_no_derivative():
    """The solution does not depend on where the solver starts, nor on the bracket."""
    def start(theta):
        return minimize(lambda x: ((x - THETA) ** 2).sum(), theta, method="BFGS").x.sum()

    np.testing.assert_array_equal(gradient_keeping(start, THETA.copy())[0], np.zeros(N))

    def bracket(c):
        return brentq(lambda x: x ** 3 + x - 2.5 + 0.0 * c, c - 10.0, c + 10.0) * c

    x = brentq(cubic, -10, 10, args=(2.5,))
    np.testing.assert_allclose(mutad.gradient(bracket, 0.5)[0], x, rtol=1e-12)


def test_a_counter_in_the_closure_counts_the_solvers_calls():
    """Cells that hold no differentiated value are the user's own."""
    def f(theta):
        calls = 0

        def objective(x):
            nonlocal calls
            calls += 1
            return ((x - theta) ** 2).sum()

        res = minimize(objective, np.zeros(2), method="BFGS")
        assert calls >= res.nfev
        return res.x.sum()

    np.testing.assert_allclose(mutad.gradient(f, np.array([1.0, 2.0]))[0], [1.0, 1.0],
                               rtol=1e-6)


def test_an_objective_that_works_in_place():
    """The objective updates its argument in place, as mutad's users write: SciPy calls it on
    its own arrays, mutad differentiates it on its copies."""
    def f(theta):
        def objective(x, theta):
            x -= theta
            x *= x
            return x.sum() + 0.1 * (x * x).sum()

        return W @ minimize(objective, np.zeros(N), args=(theta,), method="BFGS",
                            options={"gtol": 1e-11}).x

    # x*(θ) = θ: the derivative of w·x* is w.
    np.testing.assert_allclose(gradient_keeping(f, THETA)[0], W, rtol=1e-7)


def test_root_with_its_jacobian():
    def f(theta):
        res = root(lambda x: (system(x, theta), A + np.diag(0.3 * x ** 2)), np.zeros(N),
                   jac=True, tol=1e-13)
        return W @ res.x

    x_star = root(system, np.zeros(N), args=(THETA,), tol=1e-13).x
    expected = np.linalg.solve((A + np.diag(0.3 * x_star ** 2)).T, W)
    np.testing.assert_allclose(gradient_keeping(f, THETA)[0], expected, rtol=1e-8)


def test_values_are_scipys_bit_for_bit():
    def solutions(theta):
        c = theta[0]
        return (brentq(cubic, -10.0, 10.0, args=(c,)),
                root(system, np.zeros(N), args=(theta,)).x,
                least_squares(lambda x: B @ x - Y * c, np.zeros(N)).x,
                curve_fit(line, np.linspace(0, 1, 5), np.arange(5.0) * c)[0])

    y, _ = mutad.pullback(solutions, THETA)
    plain = solutions(THETA)
    for mine, scipys in zip(y, plain, strict=True):
        assert np.asarray(mine).tobytes() == np.asarray(scipys).tobytes()


def test_newton_of_an_array():
    """SciPy's vectorized Newton (it was refused: "call it per root")."""
    def f(c):
        return scipy.optimize.newton(lambda x: x ** 3 + x - c, np.zeros(2), tol=1e-14).sum()

    c = np.array([1.0, 2.0])
    roots = scipy.optimize.newton(lambda x: x ** 3 + x - c, np.zeros(2), tol=1e-14)
    np.testing.assert_allclose(mutad.gradient(f, c)[0], 1 / (3 * roots ** 2 + 1), rtol=1e-12)


def test_curve_fit_forward_mode_and_sigma():
    x = np.linspace(0.0, 1.0, 6)
    y = 0.5 + 2.0 * x + 0.1 * np.sin(7 * x)
    sigma = np.linspace(1.0, 2.0, 6)

    def f(ydata, sigma):
        popt, _ = curve_fit(line, x, ydata, sigma=sigma)
        return popt.sum()

    dy, dsigma = gradient_keeping(f, y, sigma)
    X = np.stack([x, np.ones_like(x)], axis=1) / sigma[:, None]
    np.testing.assert_allclose(dy, (np.linalg.pinv(X).T @ np.ones(2)) / sigma, rtol=1e-7)

    def weighted(s):  # the weighted least-squares line, by its formula
        return np.linalg.lstsq(np.stack([x, np.ones_like(x)], axis=1) / s[:, None], y / s,
                               rcond=None)[0].sum()

    np.testing.assert_allclose(dsigma, central_differences(weighted, sigma, 1e-5), rtol=1e-6,
                               atol=1e-8)
    _, tangent = mutad.jvp(f, (y, sigma), (np.ones(6), np.zeros(6)))
    np.testing.assert_allclose(tangent, dy.sum(), rtol=1e-9)


def test_check_grads_and_the_jacobian_of_a_solution():
    """Newton's method solves the quadratic to rounding, so mutad.check_grads' finite
    differences apply as they are, in both modes; the Jacobian of x*(θ) = A⁻¹θ is A⁻¹."""
    def solution(theta):
        return minimize(quadratic, np.zeros(N), args=(theta,), method="trust-exact",
                        jac=quadratic_jac, hess=quadratic_hess, options={"gtol": 1e-12}).x

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(solution, THETA, policy=policy, modes=("rev", "fwd"))
    np.testing.assert_allclose(mutad.jacobian(solution, THETA), np.linalg.inv(A), rtol=1e-9,
                               atol=1e-12)


def test_scalar_roots_and_integrals_are_python_floats_as_scipys():
    """brentq's root and quad's value are Python floats in SciPy (promoted weakly: a float32
    array times one stays float32); mutad gave float64 scalars."""
    import scipy.integrate

    def f(p):
        root = scipy.optimize.brentq(lambda z: z ** 3 - p[0], 0.0, 3.0)
        area = scipy.integrate.quad(lambda t: np.exp(-p[1] * t), 0.0, 1.0)[0]
        return root, area, (np.ones(2, np.float32) * root * area)

    p = np.array([2.0, 0.5])
    root, area, y = f(p)
    assert type(root) is float and type(area) is float and y.dtype == np.float32
    value, _ = mutad.value_and_gradient(lambda p: f(p)[2].sum(), p)
    assert np.asarray(value).tobytes() == np.asarray(y.sum()).tobytes()


def test_parameters_in_the_attributes_of_an_object_closed_over():
    """``((x - p.k) ** 2).sum()`` with ``p`` a (frozen) dataclass in the closure: refused
    before; the solver now runs on a copy of ``p`` holding the parameters' numbers, and ``p``
    itself is left as it is."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Params:
        k: object
        scale: float = 1.0

    def f(k):
        p = Params(k)
        best = minimize(lambda x: p.scale * ((x - p.k) ** 2).sum() + (x ** 4).sum(),
                        np.zeros(2), method="BFGS", tol=1e-12)
        root = brentq(lambda x: x ** 3 - p.k, 0.0, 2.0, xtol=1e-14)
        assert isinstance(p.k, type(k))
        return best.x.sum() + root

    value, (g,) = mutad.value_and_gradient(f, 0.7)
    assert value == f(0.7)
    assert g == pytest.approx((f(0.7 + 1e-5) - f(0.7 - 1e-5)) / 2e-5, rel=1e-4)

    class Lookup:  # attributes served by __getattr__, and a __copy__ giving itself
        def __init__(self, **values):
            self.values = values

        def __getattr__(self, name):
            return self.values[name]

        def __copy__(self):
            return self

    def g(k):
        p = Lookup(k=k)
        root = brentq(lambda z: z ** 3 + z - p.k, -2.0, 2.0, xtol=1e-14)
        assert isinstance(p.values["k"], type(k))  # the caller's object left as it was
        return root

    value, (dg,) = mutad.value_and_gradient(g, 0.7)
    assert value == g(0.7)
    assert dg == pytest.approx(1.0 / (3.0 * value ** 2 + 1.0), rel=1e-9)


# ----------------------------------------------------------------------------------------------
# nnls: SciPy's solution, differentiated through its active set (the free coordinates are the
# least-squares solution of their columns; the coordinates at 0 stay there).

NNLS_A = np.random.default_rng(3).standard_normal((6, 4))
NNLS_B = np.random.default_rng(4).standard_normal(6)
NNLS_FORMS = {
    "both": (lambda a, b: scipy.optimize.nnls(a, b), (NNLS_A, NNLS_B)),
    "solution in b": (lambda b: scipy.optimize.nnls(NNLS_A, b)[0], (NNLS_B,)),
    "residual in a": (lambda a: scipy.optimize.nnls(a, NNLS_B)[1], (NNLS_A,)),
    "every coordinate free": (lambda a, b: scipy.optimize.nnls(a, b),
                              (np.eye(3) + 0.1, np.array([1.0, 2.0, 3.0]))),
    "every coordinate at 0": (lambda a, b: scipy.optimize.nnls(a, b),
                              (np.eye(3) + 0.1, np.array([-1.0, -2.0, -3.0]))),
    "mutad's name": (lambda a, b: optimize.nnls(a, b, maxiter=50), (NNLS_A, NNLS_B)),
}


@pytest.mark.parametrize("form", NNLS_FORMS)
def test_nnls(form):
    f, args = NNLS_FORMS[form]
    copies = [a.copy() for a in args]
    y, _ = mutad.pullback(f, *copies)
    for ours, scipys in zip(y if isinstance(y, tuple) else (y,),
                            (f(*args) if isinstance(y, tuple) else (f(*args),)), strict=True):
        assert np.asarray(ours).tobytes() == np.asarray(scipys).tobytes()  # bit for bit
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *copies, policy=policy, order=2)
    mutad.check_jvp(f, *copies)
    for a, original in zip(copies, args, strict=True):
        assert a.tobytes() == original.tobytes()


def test_nnls_free_coordinates_are_the_least_squares_solution_of_their_columns():
    x = scipy.optimize.nnls(NNLS_A, NNLS_B)[0]
    free = x > 0
    assert 0 < free.sum() < x.size  # a coordinate held at 0
    (g,) = mutad.gradient(lambda b: np.sum(scipy.optimize.nnls(NNLS_A, b)[0]), NNLS_B.copy())
    assert np.allclose(g, np.linalg.pinv(NNLS_A[:, free]).T @ np.ones(free.sum()))


def test_nnls_replay_follows_the_active_set():
    def loss(a, b):
        x, rnorm = scipy.optimize.nnls(a, b)
        return np.sum(x ** 2) + rnorm

    replayed = mutad.grad(loss, argnums=(0, 1), replay=True)
    rng = np.random.default_rng(5)
    sets = set()
    for k in range(4):
        b = NNLS_B + 0.4 * k * rng.standard_normal(6)
        sets.add(tuple(scipy.optimize.nnls(NNLS_A, b)[0] > 0))
        traced = mutad.gradient(loss, NNLS_A.copy(), b.copy())
        for ours, expected in zip(replayed(NNLS_A.copy(), b.copy()), traced, strict=True):
            assert ours.tobytes() == expected.tobytes()
    assert len(sets) > 1  # the active set changed between the calls


# ----------------------------------------------------------------------------------------------
# approx_fprime: SciPy's forward differences, step by step

AF_W = np.array([0.3, -0.2, 0.5, 0.0])
AF_C = np.array([1.0, 2.0, 3.0, 4.0])
APPROX_FPRIME = {
    "a scalar function": lambda w: np.sum(scipy.optimize.approx_fprime(
        w, lambda v: np.sum(np.sin(v) * v), 1e-7) ** 2),
    "the default step": lambda w: np.sum(scipy.optimize.approx_fprime(
        w, lambda v: np.sum(v ** 3)) * AF_C),
    "a vector function": lambda w: np.sum(scipy.optimize.approx_fprime(
        w, lambda v: np.array([np.sum(v ** 2), np.prod(np.cos(v))]), 1e-6) ** 2),
    "in a closure": lambda w: np.sum(scipy.optimize.approx_fprime(
        AF_C, lambda v: np.sum(np.sin(v * w)), 1e-6)),
    "with args": lambda w: np.sum(scipy.optimize.approx_fprime(
        w, lambda v, a: np.sum(a * v ** 2), 1e-6, AF_C)),
}


@pytest.mark.parametrize("name", APPROX_FPRIME)
def test_approx_fprime(name):
    from cases import replays_as_traced
    f = APPROX_FPRIME[name]
    w = AF_W.copy()
    mutad.check_grads(f, w, modes=["rev", "fwd"], rtol=1e-4)
    replays_as_traced(f, [(w,), (w * 1.1,), (w * 0.9,)])
    assert np.asarray(mutad.value_and_grad(f)(w)[0]).tobytes() == np.asarray(
        f(AF_W.copy())).tobytes()
    assert w.tobytes() == AF_W.tobytes()


# ----------------------------------------------------------------------------------------------
# linprog: SciPy's solution, differentiated at a nondegenerate vertex

LP_A = np.array([[1.0, 1.0], [1.0, -1.0]])
LINPROG = {
    "in the costs, on bounds": (lambda c: scipy.optimize.linprog(
        c, A_ub=np.array([[1.0, 1.0, 1.0]]), b_ub=[1.0], bounds=[(0, 1)] * 3).fun,
        np.array([1.0, 2.0, 0.5])),
    "in b_ub": (lambda b: scipy.optimize.linprog(
        [-1.0, -2.0], A_ub=LP_A, b_ub=b, bounds=[(0, None)] * 2).fun, np.array([1.0, 2.0])),
    "the default bounds": (lambda c: scipy.optimize.linprog(
        c, A_ub=-np.eye(3), b_ub=-np.ones(3)).fun, np.array([1.0, 2.0, 3.0])),
    "x, in A_ub": (lambda t: np.sum(scipy.optimize.linprog(
        [-1.0, -2.0], A_ub=LP_A * t[0] + np.array([[0, t[1]], [0, 0]]), b_ub=[2.0, 0.5],
        bounds=(0, None)).x * np.array([1.0, 3.0])), np.array([1.0, 0.3])),
    "equalities": (lambda t: scipy.optimize.linprog(
        [1.0, 2.0, 3.0], A_eq=np.array([[1.0, 1.0, 1.0]]), b_eq=t[:1],
        A_ub=np.array([[1.0, -1.0, 0.0]]) * t[1], b_ub=[0.1]).fun, np.array([2.0, 1.0])),
}


@pytest.mark.parametrize("name", LINPROG)
def test_linprog(name):
    from cases import replays_as_traced
    f, x0 = LINPROG[name]
    x = x0.copy()
    mutad.check_grads(f, x, modes=["rev", "fwd"], rtol=1e-5)
    replays_as_traced(f, [(x,), (x * 1.1,), (x * 0.9,)])
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(
        f(x0.copy())).tobytes()
    assert x.tobytes() == x0.tobytes()


def test_linprog_refuses_what_has_no_derivative():
    with pytest.raises(UnsupportedOperationError, match="nondegenerate vertex"):
        mutad.gradient(lambda c: scipy.optimize.linprog(
            c, A_ub=np.array([[1.0, 1.0, 1.0]]), b_ub=[1.0], bounds=[(0, 1)] * 3).fun,
            np.array([-1.0, -2.0, 0.5]))  # x = (0, 1, 0): four constraints active
    with pytest.raises(UnsupportedOperationError, match="nondegenerate vertex"):
        mutad.gradient(lambda c: scipy.optimize.linprog(
            c, A_ub=np.array([[-1.0, -1.0]]), b_ub=[-1.0]).fun, np.array([1.0, 1.0]))
    with pytest.raises(UnsupportedOperationError, match="integrality"):
        mutad.gradient(lambda c: scipy.optimize.linprog(
            c, A_ub=-np.eye(2), b_ub=-np.ones(2), integrality=[1, 0]).fun, np.array([1.0, 2.0]))
    with pytest.raises(mutad.MutadError, match="slack"):
        mutad.gradient(lambda c: np.sum(scipy.optimize.linprog(
            c, A_ub=-np.eye(2), b_ub=-np.ones(2)).slack), np.array([1.0, 2.0]))


LSQ_BOUNDS = {"none": (-np.inf, np.inf), "nonnegative": (0, np.inf), "box": (-0.2, 0.3),
              "per coordinate": ([-1, 0, -0.1, -1], [1, 0.5, 0.1, 0.05])}


@pytest.mark.parametrize("bounds", LSQ_BOUNDS)
def test_lsq_linear(bounds):
    """SciPy's solution, residuals and cost bit for bit, differentiated in A and b through
    SciPy's active set (coordinates at a bound held there); the other float fields refused."""
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((8, 4)), rng.standard_normal(8)
    copies = A.copy(), b.copy()

    def solve(A, b):
        return scipy.optimize.lsq_linear(A, b, bounds=LSQ_BOUNDS[bounds], tol=1e-12)

    expected = solve(A, b)
    got, _ = mutad.pullback(lambda A, b: (solve(A, b).x, solve(A, b).fun, solve(A, b).cost),
                            *copies)
    assert got[0].tobytes() == expected.x.tobytes() and got[1].tobytes() == expected.fun.tobytes()
    assert got[2] == expected.cost
    for g in (lambda A, b: np.sum(np.sin(solve(A, b).x)), lambda A, b: solve(A, b).cost,
              lambda A, b: np.sum(solve(A, b).fun * np.arange(8.0))):
        mutad.check_grads(g, *copies, rtol=1e-5)
        mutad.check_jvp(g, *copies)
    assert copies[0].tobytes() == A.tobytes() and copies[1].tobytes() == b.tobytes()
    with pytest.raises(mutad.MutadError, match="optimality"):
        mutad.gradient(lambda b: solve(A, b).optimality, b)


@pytest.mark.parametrize("settings", [{}, {"lsq_solver": "exact"}, {"method": "bvls"},
                                      {"lsq_solver": "lsmr"}])
def test_lsq_linear_of_float32_values(settings):
    """Of float32 A and b SciPy's unbounded solves return float32 x, fun and cost (lsmr's
    float64 ones): the same dtypes and bits, where mutad's were float64 copies; the gradient
    of b in its dtype, the float64 one's to float32's rounding."""
    rng = np.random.default_rng(2)
    A, b = rng.standard_normal((6, 3)), rng.standard_normal(6)
    narrow = A.astype(np.float32), b.astype(np.float32)

    def fields(A, b):
        result = scipy.optimize.lsq_linear(A, b, **settings)
        return result.x, result.fun, result.cost

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (lsmr's own overflow warnings on float32)
        expected = fields(*narrow)
        got, _ = mutad.pullback(fields, *[a.copy() for a in narrow])
        (g,) = mutad.gradient(lambda b: fields(narrow[0], b)[2], narrow[1].copy())
    for a, e in zip(got, expected, strict=True):
        assert np.asarray(a).dtype == np.asarray(e).dtype
        assert np.asarray(a).tobytes() == np.asarray(e).tobytes()
    (wide,) = mutad.gradient(lambda b: fields(A, b)[2], b)
    assert g.dtype == np.float32 and np.allclose(g, wide, rtol=1e-4, atol=1e-5)


def test_lsq_linear_refusals():
    rng = np.random.default_rng(1)
    A, b = rng.standard_normal((6, 3)), rng.standard_normal(6)
    dependent = np.concatenate([A[:, :2], A[:, :1]], axis=1)
    with pytest.raises(mutad.MutadError, match="linearly dependent"):
        mutad.gradient(lambda b: np.sum(scipy.optimize.lsq_linear(dependent, b).x), b)
    with pytest.raises(mutad.MutadError, match="differentiated bounds"):
        mutad.gradient(lambda lo: np.sum(scipy.optimize.lsq_linear(A, b, bounds=(lo, 1.0)).x),
                       np.full(3, -0.1))


@pytest.mark.parametrize("solver", ["newton_krylov", "anderson", "broyden1", "broyden2",
                                    "diagbroyden", "excitingmixing", "linearmixing"])
def test_large_scale_nonlinear_solvers(solver):
    """scipy.optimize.newton_krylov and the other large-scale solvers inside a loss: their
    solution of F(u) = 0 (a contraction's fixed point, one root; a 2-d xin), differentiated
    by the implicit function theorem in what F's closure reaches, in both modes; they
    converted it."""
    solve = getattr(scipy.optimize, solver)

    def loss(p):
        def F(u):
            return p[0] * np.cos(p[1] + u) + np.array([[0.1, 0.2]]) - u
        u = solve(F, np.zeros((2, 2)), f_tol=1e-13, maxiter=5000)
        return np.sum(u ** 2) + u[1, 0]

    p = np.array([0.5, 0.3])
    value, _ = mutad.value_and_grad(loss)(p)
    assert value == loss(p)
    mutad.check_grads(loss, p, modes=("rev", "fwd"), rtol=1e-6)


def test_scipys_followed_code_raising_on_traced_values_alone_is_refused_by_name():
    """SciPy's own code run on traced values (check_grad, followed step by step) that raises
    where the plain values pass (here the user's function, handed a traced array, takes a
    memoryview of it): an UnsupportedOperationError naming the SciPy function, the error's
    cause the one raised, the caller's array unchanged."""
    def fun(p):
        memoryview(p)
        return (p ** 2).sum()

    x = np.array([0.3, 0.7])
    with pytest.raises(UnsupportedOperationError,
                       match=r"scipy\.optimize\.check_grad does not run on differentiated values"
                             r".*raised TypeError \(memoryview.*where the plain values pass"
                       ) as raised:
        mutad.gradient(lambda x: scipy.optimize.check_grad(fun, lambda p: 2.0 * p, x), x)
    assert type(raised.value.__cause__) is TypeError
    assert x.tolist() == [0.3, 0.7]


def test_a_buffer_the_solver_writes_into_holds_what_scipys_last_call_wrote():
    """A function given to the solver that writes into an array the differentiated function
    allocated: SciPy's run wrote into a copy, and the array kept its zeros (a silently wrong
    value). Now it holds what NumPy leaves there where nothing in the call is differentiated,
    and is refused where its values would depend on the differentiated ones."""
    t = np.linspace(0.0, 1.0, 6)

    def last_residuals(p):
        r = np.zeros(6)

        def residuals(q):
            r[:] = q[0] * np.exp(-q[1] * t) - 2.0 * np.exp(-0.5 * t)
            return r

        least_squares(residuals, [0.5, 0.5], xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return r.sum() + p[0]

    p = np.array([1.0])
    value, (gradient,) = mutad.value_and_gradient(last_residuals, p)
    assert value == last_residuals(p.copy())
    assert gradient.tolist() == [1.0]

    def moving(p):
        seen = np.zeros(1)

        def fun(x):
            seen[0] = x[0]
            return x ** 3 - 2.0 * p[0]

        return fsolve(fun, [1.0], xtol=1e-14)[0] + seen[0]

    # fsolve's last call is at its solution: the buffer holds x*, with its derivative
    # (was refused); d(2 x*)/dp = 4/3 (2p)^(-2/3)
    value, (gradient,) = mutad.value_and_gradient(moving, p)
    assert value == moving(p.copy())
    assert np.allclose(gradient, 4 / 3 * 2.0 ** (-2 / 3), rtol=1e-10)

    def finite_differences(p):
        seen = np.zeros(2)

        def fun(x):
            seen[:] = x
            return (x[0] - p[0]) ** 2 + 3 * (x[1] - 1) ** 2 + 0.1 * x[0] ** 4

        return minimize(fun, [0.0, 0.0], method="BFGS").x[0] + seen.sum()

    # BFGS's last call is a finite-difference step from its solution: the loss reads the
    # buffer, and a gradient reaching it is refused (the values the buffer holds were, before
    # the copies were read right after SciPy's run, the solution's)
    with pytest.raises(UnsupportedOperationError, match="wrote into an array"):
        mutad.gradient(finite_differences, p)
    assert p.tolist() == [1.0]


A3 = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "Newton-CG"])
def test_buffers_the_objective_and_its_gradient_write_into(method):
    """Buffers in the objective's closure, written by it (and by its jac), the differentiated
    function's arrays: the nested differentiations the derivatives need wrote into them (an
    enclosing differentiation's array: refused); now they write into copies, and the buffers
    hold SciPy's last numbers, those of the objective and jac at the solution."""
    def f(p):
        r, g = np.zeros(3), np.zeros(3)

        def objective(x):
            r[:] = x - p[0] * A3
            return r @ r + p[1] * x @ x

        def jac(x):
            g[:] = 2 * (x - p[0] * A3) + 2 * p[1] * x
            return g.copy()

        hess = (lambda x: 2 * (1 + p[1]) * np.eye(3)) if method == "Newton-CG" else None
        res = minimize(objective, np.zeros(3), jac=jac, hess=hess, method=method)
        return np.sum(res.x ** 2) + r.sum() + g.sum()

    p = np.array([1.0, 2.0])
    value, (gradient,) = mutad.value_and_gradient(f, p)
    assert value == f(p.copy())
    # x* = p0 a / (1 + p1), r = x* - p0 a, g = 0 at x*
    assert np.allclose(gradient, [28 / 9 - 4, -28 / 27 - 2 / 3], rtol=1e-7)
    assert p.tolist() == [1.0, 2.0]


_SEEN = np.zeros(2)  # a module-level buffer the solvers' functions write into


def _objective(x, p):
    _SEEN[0] = x[0] if np.ndim(x) else x
    return (_SEEN[0] - 2.0 * p[0]) ** 2 + 0.1 * (_SEEN[0] - 2.0 * p[0]) ** 4


def _residual(x, p):
    _SEEN[0] = x[0] if np.ndim(x) else x
    return np.atleast_1d(_SEEN[0] ** 3 + _SEEN[0] - 10.0 * p[0])


def _line(t, a):
    _SEEN[0] = a
    return a * t


GLOBAL_BUFFER_SOLVES = {
    "minimize": lambda p: minimize(_objective, [0.5], args=(p,), method="BFGS").x[0],
    "minimize Nelder-Mead": lambda p: minimize(_objective, [0.5], args=(p,),
                                               method="Nelder-Mead", tol=1e-10).x[0],
    "minimize_scalar": lambda p: scipy.optimize.minimize_scalar(_objective, args=(p,)).x,
    "least_squares": lambda p: least_squares(_residual, [1.0], args=(p,)).x[0],
    "curve_fit": lambda p: curve_fit(_line, np.arange(3.0),
                                     p[0] * np.arange(3.0) + [0.0, 0.1, -0.1], p0=[1.0])[0][0],
    "root": lambda p: root(_residual, [1.0], args=(p,)).x[0],
    "fsolve": lambda p: fsolve(_residual, [1.0], args=(p,))[0],
    "brentq": lambda p: brentq(lambda x: _residual(x, p)[0], 0.0, 5.0),
}


@pytest.mark.parametrize("solver", GLOBAL_BUFFER_SOLVES)
@pytest.mark.parametrize("read", [True, False])
def test_a_module_level_buffer_the_solvers_function_writes(solver, read):
    """Regression: a module-level array the function writes into held, after the solve, what
    the derivatives' runs of the function wrote (a value other than NumPy's), and a loss
    reading it got a silently wrong gradient. It now holds what SciPy's last call wrote; a
    gradient reaching those values is refused, forward mode gives them a NaN tangent, and a
    loss not reading them is differentiated, the array left as NumPy's run leaves it."""
    solve = GLOBAL_BUFFER_SOLVES[solver]

    def loss(p):
        return solve(p) + (_SEEN[0] if read else 0.0)

    _holds_scipys_last_values(loss, _SEEN, refused=read)


def _holds_scipys_last_values(loss, buffer, refused):
    """Check ``loss`` of a solve whose function writes into an array that ``buffer`` shows
    after it: the value and ``buffer`` NumPy's bit for bit, the derivative (reverse and jvp)
    that of central differences, or, where ``refused`` (the loss reads values SciPy's last
    call wrote away from the solution), a gradient refused and a NaN tangent."""
    p = np.array([1.3])
    buffer[:] = 0.0
    expected = loss(p.copy())
    left = buffer.tobytes()
    h = 1e-5
    slope = (loss(p + h) - loss(p - h)) / (2 * h)
    for mode in ("reverse", "forward"):
        buffer[:] = 0.0
        if mode == "forward":
            value, derivative = mutad.jvp(loss, (p,), (np.ones(1),))
        elif refused:
            with pytest.raises(UnsupportedOperationError, match="wrote into an array"):
                mutad.value_and_gradient(loss, p)
            assert p.tolist() == [1.3]
            continue
        else:
            value, (derivative,) = mutad.value_and_gradient(loss, p)
        assert value == expected and buffer.tobytes() == left and p.tolist() == [1.3]
        if refused:
            assert np.isnan(derivative)
        else:
            assert np.allclose(derivative, slope, rtol=1e-5)
    buffer[:] = 0.0


def _closure_solve(solver, p, seen):
    """``solver``'s solution of a problem whose functions write into ``seen``, a buffer in
    their closure (the differentiated function's array)."""
    def objective(x):
        seen[0] = x[0] if np.ndim(x) else x
        return (seen[0] - 2.0 * p[0]) ** 2 + 0.1 * (seen[0] - 2.0 * p[0]) ** 4

    def residual(x):
        seen[0] = x[0] if np.ndim(x) else x
        return np.atleast_1d(seen[0] ** 3 + seen[0] - 10.0 * p[0])

    def line(t, a):
        seen[0] = a
        return a * t

    if solver == "minimize":
        return minimize(objective, [0.5], method="BFGS").x[0]
    if solver == "minimize Nelder-Mead":
        return minimize(objective, [0.5], method="Nelder-Mead", tol=1e-10).x[0]
    if solver == "minimize_scalar":
        return scipy.optimize.minimize_scalar(objective).x
    if solver == "least_squares":
        return least_squares(residual, [1.0]).x[0]
    if solver == "curve_fit":
        return curve_fit(line, np.arange(3.0), p[0] * np.arange(3.0) + [0.0, 0.1, -0.1],
                         p0=[1.0])[0][0]
    if solver == "root_scalar":
        return scipy.optimize.root_scalar(lambda x: residual(x)[0], x0=1.0, x1=2.0).root
    if solver == "newton":
        return scipy.optimize.newton(lambda x: residual(x)[0], 1.0)
    assert solver == "fsolve"
    return fsolve(residual, [1.0])[0]


CLOSURE_BUFFER_SOLVERS = ["minimize", "minimize Nelder-Mead", "minimize_scalar", "least_squares",
                          "curve_fit", "root_scalar", "newton", "fsolve"]
_LEFT = np.zeros(2)  # what the closure buffer held after the solve


@pytest.mark.parametrize("solver", CLOSURE_BUFFER_SOLVERS)
@pytest.mark.parametrize("read", [True, False])
def test_a_closure_buffer_the_solvers_function_writes(solver, read):
    """Regression: a buffer in the function's closure (the differentiated function's array)
    that SciPy's last call wrote at a point other than its solution (a finite-difference
    step, a trial point) was refused even when the loss did not read it. As a module-level
    array's, it now holds what SciPy's last call wrote; a gradient reaching those values is
    refused, forward mode gives them a NaN tangent, and a loss not reading them is
    differentiated, the buffer holding NumPy's numbers (fsolve's last call is at its solution:
    the buffer's derivative is the solution's)."""
    def loss(p):
        seen = np.zeros(2)
        x = _closure_solve(solver, p, seen)
        _LEFT[:] = seen
        return x + (seen[0] if read else 0.0)

    _holds_scipys_last_values(loss, _LEFT, refused=read and solver != "fsolve")


@pytest.mark.parametrize("increasing", [True, False])
def test_isotonic_regression_of_traced_values_and_weights(increasing):
    """isotonic_regression's compiled pool-adjacent-violators pass stopped at traced values:
    each fitted value is its block's weighted mean, the blocks SciPy's decisions. SciPy's
    values bit for bit, the gradient in y and in the weights against differences, the
    caller's arrays unchanged."""
    y0 = np.array([1.0, 3.0, 2.0, 4.0, 3.5, 5.0, 4.9, 4.8])
    w0 = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 2.0, 1.5])

    def f(y, w):
        r = scipy.optimize.isotonic_regression(y, weights=w, increasing=increasing)
        return np.sum(r.x ** 2 * np.arange(1.0, 9.0)) + np.sum(r.weights ** 2)

    y, w = y0.copy(), w0.copy()
    value, (gy, gw) = mutad.value_and_gradient(f, y, w, argnums=(0, 1))
    assert value == f(y0, w0)
    assert y.tobytes() == y0.tobytes() and w.tobytes() == w0.tobytes()
    np.testing.assert_allclose(gy, central_differences(lambda q: f(q, w0), y0, 1e-6), atol=1e-6)
    np.testing.assert_allclose(gw, central_differences(lambda q: f(y0, q), w0, 1e-6), atol=1e-6)
