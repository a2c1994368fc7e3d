"""mutad.scipy.integrate: the quadratures of samples, solve_ivp (every method), odeint and quad.

Called by SciPy's names inside the differentiated function and by mutad.scipy.integrate's.
The quadratures of samples are SciPy's steps, so their derivatives are exact (finite
differences, forward mode, second order). The solvers' derivatives are those of SciPy's own
steps (RK23, RK45: checked against the same steps taken by hand) or the continuous adjoint and
forward sensitivities (derivatives of the exact solution), all checked against closed forms
(y' = -k y) and finite differences at tight tolerances. Values are always SciPy's, bit for bit.
"""

import dataclasses
import functools
import math
import types
import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.sparse
from scipy.integrate import (cumulative_simpson, cumulative_trapezoid, nquad, odeint, quad,
                             quad_vec, romb, simpson, solve_ivp, trapezoid)

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import integrate
from cases import replays_as_traced

# The slow kind (ODE solves, forward, adjoint and by finite differences): not in the fast subset,
# python -m pytest -m "not slow".
pytestmark = pytest.mark.slow

POLICIES = ("restore", "checkpoint")
METHODS = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")
TIGHT = dict(rtol=1e-10, atol=1e-12)


def unchanged(*arrays):
    """The bytes of ``arrays``, to compare after a differentiation."""
    return [np.asarray(a).tobytes() for a in arrays]


# ----------------------------------------------------------------------------------------------
# trapezoid, simpson, cumulative_trapezoid


def _abscissae(n):
    return np.cumsum(np.random.default_rng(n).uniform(0.2, 1.0, n))


QUADRATURES = [
    ("trapezoid x", lambda y, x: trapezoid(y, x), lambda y, x: integrate.trapezoid(y, x)),
    ("trapezoid dx", lambda y, x: trapezoid(y, dx=0.3),
     lambda y, x: integrate.trapezoid(y, dx=0.3)),
    ("simpson x", lambda y, x: simpson(y, x=x), lambda y, x: integrate.simpson(y, x=x)),
    ("simpson dx", lambda y, x: simpson(y, dx=0.3), lambda y, x: integrate.simpson(y, dx=0.3)),
    ("cumulative_trapezoid x", lambda y, x: cumulative_trapezoid(y, x, initial=0),
     lambda y, x: integrate.cumulative_trapezoid(y, x, initial=0)),
    ("cumulative_trapezoid dx", lambda y, x: cumulative_trapezoid(y, dx=0.3),
     lambda y, x: integrate.cumulative_trapezoid(y, dx=0.3)),
    ("cumulative_simpson x", lambda y, x: cumulative_simpson(y, x=x, initial=0.5),
     lambda y, x: integrate.cumulative_simpson(y, x=x, initial=0.5)),
    ("cumulative_simpson dx", lambda y, x: cumulative_simpson(y, dx=x[0]),
     lambda y, x: integrate.cumulative_simpson(y, dx=x[0])),
]


@pytest.mark.parametrize("n", [2, 3, 6, 7])
@pytest.mark.parametrize("name, by_scipy, by_mutad", QUADRATURES, ids=[q[0] for q in QUADRATURES])
def test_quadratures_of_samples(name, by_scipy, by_mutad, n):
    x = _abscissae(n)
    y = np.sin(x)
    expected = by_scipy(y, x)  # SciPy's own, outside a differentiation
    for f in (by_scipy, by_mutad):
        value, _ = mutad.value_and_gradient(lambda y, x: np.sum(f(y, x) ** 2), y, x)
        assert value == np.sum(expected ** 2)
        for policy in POLICIES:
            mutad.check_grads(f, y, x, policy=policy)
        mutad.check_jvp(f, y, x)
    mutad.check_grads(by_scipy, y, x, order=2)


def test_trapezoid_and_romb_keep_scipys_dtypes():
    """Regression: mutad's trapezoid was NumPy's, which promotes y with x: float64 for a
    float32 (or float16) y over float64 x where SciPy's is float32, complex for a complex x,
    whose imaginary part SciPy drops (with NumPy's ComplexWarning); a list y with traced x
    raised a TypeError."""
    x = _abscissae(5)
    y = np.sin(x)
    cases = [lambda y, x: trapezoid(y.astype(np.float32), x),
             lambda y, x: trapezoid(np.stack([y, y]).astype(np.float16), x, axis=1),
             lambda y, x: trapezoid(y, x + 0.5j),
             lambda y, x: trapezoid([1.0, 2.0, 4.0, 3.0, 0.5], x) * y[0],
             # romb reads dx as a float64 (a float32 or complex traced dx was kept)
             lambda y, x: romb(y, dx=x[1].astype(np.float32)),
             lambda y, x: romb(y, dx=x[1] + 0.5j)]
    _computed_as_scipy(cases, y, x, lambda f, expected: expected.dtype == np.float64
                       and f is not cases[4])  # (not through float32)


def _computed_as_scipy(cases, y, x, checked):
    """Each case ``f(y, x)``'s value bit for bit as SciPy's in both modes, its derivatives
    checked where ``checked(f, value)`` (not through float32: finite differences' steps are
    finer than its precision), and ``y`` and ``x`` unchanged."""
    for f in cases:
        before = unchanged(y, x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            expected = f(y, x)
            for value in (mutad.pullback(f, y, x)[0], mutad.jvp(f, (y, x), (y, x))[0]):
                assert type(value) is type(expected) and value.tobytes() == expected.tobytes()
            if checked(f, expected):
                mutad.check_grads(f, y, x)
                mutad.check_jvp(f, y, x)
        assert unchanged(y, x) == before


@pytest.mark.parametrize("quadrature", ["simpson", "cumulative_trapezoid", "cumulative_simpson",
                                        "romb"])
def test_quadratures_read_samples_and_spacings_as_scipy_does(quadrature):
    """Regression: simpson's spacings of a float32 x stayed float32 (SciPy widens them: the
    value differed in its last bits) and a complex x's stayed complex (SciPy drops the
    imaginary part: a complex value); a list y with traced abscissae raised a TypeError in
    each of these."""
    x = _abscissae(5)
    y = np.sin(x)
    integrate = getattr(scipy.integrate, quadrature)
    if quadrature == "romb":
        cases = [lambda y, x: integrate([1.0, 2.0, 4.0, 3.0, 0.5], dx=x[1]) * y[0]]
    else:
        def given_x(y, x):
            return integrate(y, x=x)
        cases = [lambda y, x: given_x([1.0, 2.0, 4.0, 3.0, 0.5], x) * y[0]]
        if quadrature == "simpson":
            cases += [lambda y, x: given_x(y, x + 0.5j),
                      lambda y, x: given_x(y, x.astype(np.float32))]
    _computed_as_scipy(cases, y, x, lambda f, expected: quadrature != "simpson"
                       or f is not cases[-1])  # (not through float32)


def test_quadratures_along_an_axis():
    x = _abscissae(5)
    y = np.cos(np.outer(np.arange(1.0, 4.0), x))  # (3, 5): integrate each row, and columns
    for f in (lambda y, x: simpson(y, x=x, axis=1), lambda y, x: trapezoid(y.T, x, axis=0),
              lambda y, x: cumulative_trapezoid(y, np.broadcast_to(x, y.shape), axis=-1),
              lambda y, x: simpson(y.T, x=np.broadcast_to(x, y.shape).T, axis=0)):
        mutad.check_grads(f, y, x)
        mutad.check_jvp(f, y, x)


def test_cumulative_simpson_along_an_axis_with_arrays_of_spacings_and_initial_values():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(3, 6))
    x = np.cumsum(rng.uniform(0.2, 1.0, size=(3, 6)), axis=1)
    cases = [
        (lambda y, x, i: cumulative_simpson(y, x=x, initial=i), (y, x, np.array([[0.1], [0.2],
                                                                                  [0.3]]))),
        (lambda y, d: cumulative_simpson(y.T, dx=d.T, axis=0, initial=1.5),
         (y, np.array([[0.1], [0.2], [0.3]]))),
        (lambda y, x: cumulative_simpson(y[:, :5], x=x[0, :5], axis=-1), (y, x)),
        (lambda y: cumulative_simpson(y[:, :2], dx=0.5, initial=0.0), (y,)),
    ]
    for f, args in cases:
        before = unchanged(*args)
        value, _ = mutad.jvp(f, args, args)
        assert value.tobytes() == f(*args).tobytes()
        for policy in POLICIES:
            mutad.check_grads(f, *args, policy=policy)
        mutad.check_jvp(f, *args)
        mutad.check_grads(f, *args, order=2)
        assert unchanged(*args) == before


@pytest.mark.parametrize("n", [2, 3, 5, 9, 17])
def test_romb(n):
    y = np.cos(np.linspace(0.0, 2.0, n)) * np.arange(1.0, 4.0)[:, None]
    for f in (lambda y, dx: romb(y, dx), lambda y, dx: integrate.romb(y.T, dx, axis=0)):
        before = unchanged(y)
        value, _ = mutad.jvp(f, (y, 0.25), (y, 1.0))
        assert value.tobytes() == romb(y, 0.25).tobytes()
        for policy in POLICIES:
            mutad.check_grads(f, y, 0.25, policy=policy)
        mutad.check_jvp(f, y, 0.25)
        mutad.check_grads(f, y, 0.25, order=2)
        assert unchanged(y) == before
    # Romberg's extrapolation integrates polynomials up to the table's order exactly.
    (g,) = mutad.gradient(lambda dx: romb(np.linspace(0.0, 1.0, 9) ** 3, dx) * 1.0, 0.125)
    np.testing.assert_allclose(g, 2.0, rtol=1e-13)


def test_romb_refuses_what_scipy_refuses_and_prints_its_table(capsys):
    with pytest.raises(ValueError, match="power of 2"):
        mutad.gradient(lambda y: romb(y), np.ones(6))
    mutad.gradient(lambda y: romb(y, show=True), np.arange(5.0))
    assert "Richardson Extrapolation Table" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------
# solve_ivp: y' = -k y, y(t) = y0 exp(-k t)


def decay(t, y, k):
    dy = np.empty(1)  # the user's in-place NumPy
    dy[0] = -k * y[0]
    return dy


@pytest.mark.parametrize("method", METHODS)
def test_solve_ivp_closed_form_every_method(method):
    y0, k, T = np.array([1.5]), 0.7, 2.0

    # RK23, of third order, would take many steps at the tightest tolerances.
    tolerances, rtol = (dict(rtol=1e-8, atol=1e-10), 1e-5) if method == "RK23" else (TIGHT, 1e-7)

    def final(y0, k):
        sol = solve_ivp(decay, (0.0, T), y0, method=method, args=(k,), **tolerances)
        return sol.y[0, -1]

    before = unchanged(y0)
    value, (dy0, dk) = mutad.value_and_gradient(final, y0, k)
    assert unchanged(y0) == before
    assert value == scipy.integrate.solve_ivp(decay, (0.0, T), y0, method=method, args=(k,),
                                              **tolerances).y[0, -1]
    np.testing.assert_allclose(dy0, [np.exp(-k * T)], rtol=rtol)
    np.testing.assert_allclose(dk, -T * y0[0] * np.exp(-k * T), rtol=rtol)
    # Forward mode: the forward sensitivities.
    _, tangent = mutad.jvp(final, (y0, k), (np.array([1.0]), 0.5))
    np.testing.assert_allclose(tangent, np.exp(-k * T) * (1.0 - 0.5 * T * y0[0]), rtol=rtol)


def test_solve_ivp_values_are_scipys_and_y_is_traced():
    y0 = np.array([1.0, 0.5])

    def f(y0):
        sol = solve_ivp(lambda t, y: -y, (0.0, 1.0), y0, t_eval=[0.25, 1.0])
        plain = scipy.integrate.solve_ivp(lambda t, y: -y, (0.0, 1.0),
                                          mutad.stop_gradient(y0), t_eval=[0.25, 1.0])
        assert np.array_equal(mutad.stop_gradient(sol.y), plain.y)
        assert np.array_equal(sol.t, plain.t) and sol.success and sol.sol is None
        assert sol.y[:, -1].shape == (2,)
        return sol.y.sum()

    grad, = mutad.gradient(f, y0)
    np.testing.assert_allclose(grad, [np.exp(-0.25) + np.exp(-1.0)] * 2, rtol=1e-3)


def test_jacobian_of_a_linear_system_is_its_exponential():
    A = np.array([[-1.0, 0.5], [0.0, -2.0]])
    flow = lambda y0: solve_ivp(lambda t, y: A @ y, (0, 1), y0, **TIGHT).y[:, -1]  # noqa: E731
    np.testing.assert_allclose(mutad.jacobian(flow, np.array([1.0, 2.0])), scipy.linalg.expm(A),
                               rtol=1e-8)


def lotka_volterra(t, z, alpha, beta):
    dz = np.empty(2)
    dz[0] = alpha * z[0] - beta * z[0] * z[1]
    dz[1] = -0.8 * z[1] + 0.3 * z[0] * z[1]
    return dz


@pytest.mark.parametrize("method", ["RK45", "LSODA"])
@pytest.mark.parametrize("policy", POLICIES)
def test_solve_ivp_args_and_closure_by_finite_differences(method, policy):
    """Parameters through args= and closed over (the in-place right-hand side), outputs at
    several times: finite differences, reverse and forward mode."""
    def loss(z0, alpha, beta):
        def rhs(t, z, alpha):
            return lotka_volterra(t, z, alpha, beta)  # beta closed over, alpha through args

        sol = solve_ivp(rhs, (0.0, 3.0), z0, method=method, t_eval=np.linspace(0.5, 3.0, 6),
                        args=(alpha,), **TIGHT)
        return (sol.y[0] * sol.y[1]).sum() + sol.y[:, -1] @ z0

    args = (np.array([1.2, 0.7]), 1.1, np.array(0.4))
    mutad.check_grads(loss, *args, policy=policy, rtol=1e-5)
    if policy == "restore":
        mutad.check_jvp(loss, *args, rtol=1e-5)


def test_solve_ivp_closing_over_a_traced_sparse_matrix():
    """The method of lines with a sparse operator of the parameters (A @ y): the function read
    a traced sparse matrix from its closure, which was refused as read "neither in args= nor
    in its closure"."""
    def loss(d, y0):
        n = len(d)
        A = scipy.sparse.diags([np.ones(n - 1), -2.0 - d ** 2, np.ones(n - 1)], [-1, 0, 1],
                               format="csr")
        sol = solve_ivp(lambda t, y: A @ y + np.sin(y), (0.0, 1.0), y0, **TIGHT)
        return sol.y[:, -1] @ np.arange(1.0, n + 1)

    args = (np.array([0.5, 0.2, 0.8, 0.3]), np.array([1.0, -0.5, 0.3, 0.7]))
    before = [a.tobytes() for a in args]
    value, _ = mutad.value_and_gradient(loss, *args)
    assert value == loss(*args)
    assert [a.tobytes() for a in args] == before
    mutad.check_grads(loss, *args, rtol=1e-5)
    mutad.check_jvp(loss, *args, rtol=1e-5)


def test_solve_ivp_mutad_name_tuple_closure_and_decreasing_time():
    def loss(z0, params):
        theta = (params[0], params[1])  # a tuple of differentiated values, closed over

        def rhs(t, z):
            return lotka_volterra(t, z, *theta)

        sol = integrate.solve_ivp(rhs, (2.0, 0.0), z0, method="DOP853", **TIGHT)
        return sol.y[0, -1] - 2.0 * sol.y[1, -1]

    args = (np.array([1.2, 0.7]), np.array([1.1, 0.4]))
    mutad.check_grads(loss, *args, rtol=1e-5)
    mutad.check_jvp(loss, *args, rtol=1e-5)


@pytest.mark.parametrize("method", ["Radau", "BDF"])
def test_stiff_solve_with_a_parameter_array(method):
    """A stiff right-hand side and an array of parameters, closed over: the implicit adjoint's
    Jacobian skips μ's components."""
    def loss(y0, theta):
        def rhs(t, y):
            dy = np.empty(2)
            dy[0] = -50.0 * (y[0] - np.cos(t)) + 0.1 * (theta @ np.sin(np.arange(6.0) * t))
            dy[1] = y[0] - y[1]
            return dy

        return solve_ivp(rhs, (0, 1), y0, method=method, rtol=1e-8, atol=1e-10).y[:, -1].sum()

    mutad.check_grads(loss, np.array([1.0, 0.0]), np.linspace(0.0, 1.0, 6), rtol=1e-4)


def test_right_hand_side_reading_the_time():
    """f makes t a Python number, or branches on it: the adjoint's replayed program is
    re-recorded at the branch, and gives way to pullbacks where t is converted."""
    def converted(t, y, k):
        return -k * y * float(t)

    def branching(t, y, k):
        return -k * y if t < 0.5 else -2.0 * k * y

    for rhs, exact in ((converted, -0.5 * np.exp(-0.35)), (branching, -1.5 * np.exp(-1.05))):
        final = lambda k: solve_ivp(rhs, (0, 1), [1.0], args=(k,), **TIGHT).y[0, -1]  # noqa
        np.testing.assert_allclose(mutad.gradient(final, 0.7)[0], exact, rtol=1e-7)
        np.testing.assert_allclose(mutad.jvp(final, (0.7,), (1.0,))[1], exact, rtol=1e-7)


def test_the_adjoints_replay_records_one_program_for_every_stage(monkeypatch):
    """The discrete adjoint pulls back each stage of a step with its own row of the stage
    cotangents: one program serves them all (a row of a larger array, at each row's offset,
    would be a layout of its own, and record one program each), replayed as traced."""
    replaying = []

    def kept(*args, **kwargs):
        replaying.append(mutad.grad(*args, **kwargs))
        return replaying[-1]

    monkeypatch.setattr(integrate, "grad", kept)

    def loss(y0, k):
        def rhs(t, y):
            return np.array([y[1], -k * y[0] - 0.1 * y[1]])

        sol = solve_ivp(rhs, (0.0, 2.0), y0, t_eval=np.linspace(0.0, 2.0, 5), rtol=1e-8)
        return (sol.y[0] ** 2).sum()

    y0 = np.array([0.0, 1.0])
    got = mutad.gradient(loss, y0, 1.3)
    assert [sum(type(p) is not str for p in r.programs.values()) for r in replaying] == [1]
    monkeypatch.setattr(integrate, "grad", mutad.grad)
    monkeypatch.setattr(mutad.engines.replay.Replayed, "_replay_or_record",
                        lambda self, args, kwargs, *_: self.trace(
                            self.f, args, kwargs, self.argnums, self.policy, self.has_aux))
    traced = mutad.gradient(loss, y0, 1.3)
    assert got[0].tobytes() == traced[0].tobytes() and got[1] == traced[1]
    assert y0.tolist() == [0.0, 1.0]


def _two_states(t, y, a, p):
    return np.array([-a * y[0] + p[1], y[0] - p[1] * y[1]])


@pytest.mark.parametrize("method, t_eval", [
    ("RK45", None), ("RK45", np.linspace(0.0, 1.0, 4)), ("LSODA", np.linspace(0.0, 1.0, 4)),
], ids=["RK45 at its steps", "RK45 at t_eval", "LSODA at t_eval"])
def test_solve_ivp_replays_while_the_solver_decides_as_recorded(method, t_eval):
    """A replay solves again on the new values, and checks that the solver decided as it did
    when recorded: the times it returns (its accepted steps where t_eval is not given) and
    its counts and status, which f may read. Values and gradients bit for bit the traced
    ones; parameters that keep those decisions replay, ones that change them (more steps)
    record again."""
    def loss(p):
        sol = solve_ivp(lambda t, y, a: _two_states(t, y, a, p), (0.0, 1.0), np.array([1.0, 2.0]),
                        method=method, t_eval=t_eval, args=(p[0],))
        return sol.y[:, -1].sum() * sol.t[-1] + sol.nfev

    p = np.array([0.7, 1.3])
    before = p.tobytes()
    near, far = p * 1.0001, p * 5.0
    solved = [scipy.integrate.solve_ivp(_two_states, (0.0, 1.0), [1.0, 2.0], method=method,
                                        t_eval=t_eval, args=(q[0], q)) for q in (p, near, far)]
    assert solved[0].nfev == solved[1].nfev != solved[2].nfev
    assert solved[0].t.tobytes() != solved[1].t.tobytes() or t_eval is not None
    # (at its own steps, the near parameters move the times: recorded again)
    replays_as_traced(loss, [(p,), (p,), (near,), (far,), (far,)],
                      replayed=2 if t_eval is None else 3)
    assert p.tobytes() == before


def test_solve_ivp_whose_steps_move_on_every_call_says_why_it_is_traced():
    """Parameters that move the adaptive steps on every call record again each time, until
    the replay gives up: ``reasons`` names the solver's decisions as what changed."""
    def loss(p):
        sol = solve_ivp(_two_states, (0.0, 1.0), np.array([1.0, 2.0]), args=(p[0], p))
        return sol.y[:, -1].sum()

    p = np.array([0.7, 1.3])
    calls = [(p * (1.0 + 0.001 * k),) for k in range(6)]
    replaying = replays_as_traced(loss, calls, replayed=0)
    assert any("sol.t" in why for why in replaying.reasons.values())
    assert p.tobytes() == np.array([0.7, 1.3]).tobytes()


def test_a_replayed_solve_ivp_keeps_no_solve_between_calls(monkeypatch):
    """The program of a replayed solve_ivp holds its problem between calls: what a solve keeps
    for its reverse pass (its steps, its solution, copies of its inputs) is released by that
    pass, on the recording call and on each replay, or by the guard that stops a replay whose
    solver decided otherwise; the gradients stay the traced ones."""
    problems = []
    made = integrate._SolvedAnew.__init__

    def kept(self, *args, **kwargs):
        made(self, *args, **kwargs)
        problems.append(self)

    monkeypatch.setattr(integrate._SolvedAnew, "__init__", kept)

    def loss(p):
        sol = solve_ivp(_two_states, (0.0, 1.0), np.array([1.0, 2.0]), args=(p[0], p),
                        t_eval=np.linspace(0.0, 1.0, 3))
        return sol.y[:, -1].sum()

    p = np.array([0.7, 1.3])
    # (the last call's solver decides otherwise: its replay stops at the guard, recorded again)
    replays_as_traced(loss, [(p,), (p,), (p * 1.0001,), (p * 5.0,)], replayed=2)
    assert problems and all(problem.solution is problem.steps is problem.solved is None
                                for problem in problems)
    assert p.tobytes() == np.array([0.7, 1.3]).tobytes()


def test_odeint_replays_a_new_solve():
    """odeint shows f its outputs at f's times alone: a replay solves again, however many
    steps LSODA takes for the new values, bit for bit the traced calls. With full_output, its
    counts are the recorded call's: traced on every call."""
    times = np.linspace(0.0, 1.0, 5)

    def stiff(y, t, p):
        return np.array([-10.0 * p[0] * (y[0] - np.cos(t)), y[0] - p[1] * y[1]])

    def loss(p):
        return odeint(stiff, np.array([0.0, 1.0]), times, args=(p,))[-1].sum()

    p = np.array([0.7, 1.3])
    before = p.tobytes()
    steps = [scipy.integrate.odeint(stiff, [0.0, 1.0], times, args=(q,), full_output=1)[1]
             ["nst"][-1] for q in (p, p * 0.01)]
    assert steps[0] != steps[1]
    replays_as_traced(loss, [(p,), (p,), (p * 0.01,)], replayed=2)
    assert p.tobytes() == before
    counted = replays_as_traced(lambda p: odeint(stiff, np.array([0.0, 1.0]), times, args=(p,),
                                                 full_output=1)[0][-1].sum(), [(p,), (p,)],
                                replayed=0)
    assert any("odeint" in why for why in counted.reasons.values())


def test_solve_ivp_jacobian_sharing_the_closure():
    """fun and jac close over the same cell: one parameter, differentiated once."""
    def final(k):
        fun = lambda t, y: -k * y
        jac = lambda t, y: -k * np.eye(1)
        return solve_ivp(fun, (0, 1), [1.0], method="Radau", jac=jac, **TIGHT).y[0, -1]

    np.testing.assert_allclose(mutad.gradient(final, 0.5)[0], -np.exp(-0.5), rtol=1e-8)



@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_solve_ivp_jacobian_function_giving_a_sparse_matrix(method):
    """A method of lines: jac= a function returning a scipy.sparse matrix (of differentiated
    values) reaches SciPy as that matrix, not an array NumPy makes of it."""
    def final(p):
        L = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(4, 4), format="csc") * p[0]
        u0 = np.array([0.2, 0.9, 0.7, 0.1])
        return solve_ivp(lambda t, u: L @ u - p[1] * u, (0, 0.3), u0, method=method,
                         jac=lambda t, u: L - p[1] * scipy.sparse.eye(4), rtol=1e-8,
                         atol=1e-10).y[:, -1].sum()

    p = np.array([0.8, 0.3])
    saved = p.tobytes()
    mutad.check_grads(final, p, rtol=1e-5)
    assert p.tobytes() == saved

def test_solve_ivp_vectorized_and_outputs_at_the_solvers_steps():
    def loss(y0, k):
        sol = solve_ivp(lambda t, y: -k * y ** 2, (0.0, 1.0), y0, vectorized=True, **TIGHT)
        return (sol.y[:, -1] ** 2).sum() + sol.y[1, 0]  # t_span's ends: fixed times

    mutad.check_grads(loss, np.array([0.9, 1.3]), 0.6, rtol=1e-5)
    mutad.check_jvp(loss, np.array([0.9, 1.3]), 0.6, rtol=1e-5)

    def every_step(y0, k):  # the step times move with k: refused, not a wrong number
        return (solve_ivp(lambda t, y: -k * y, (0.0, 1.0), y0).y ** 2).sum()

    with pytest.raises(UnsupportedOperationError, match="t_eval"):
        mutad.gradient(every_step, np.array([0.9]), 0.6)
    _, tangent = mutad.jvp(every_step, (np.array([0.9]), 0.6), (np.array([1.0]), 0.0))
    assert np.isnan(tangent)


def test_solve_ivp_dense_output():
    y0, k = np.array([2.0]), 0.3
    times = np.array([1.5, 0.25, 1.0])

    def at(y0, k):
        sol = solve_ivp(decay, (0.0, 2.0), y0, args=(k,), dense_output=True, **TIGHT)
        return sol.sol(times)[0] @ np.array([1.0, 2.0, 3.0]) + sol.sol(0.5)[0]

    dy0, dk = mutad.gradient(at, y0, k)
    weights = np.array([1.0, 2.0, 3.0, 1.0])
    every = np.append(times, 0.5)
    np.testing.assert_allclose(dy0, [weights @ np.exp(-k * every)], rtol=1e-7)
    np.testing.assert_allclose(dk, weights @ (-every * y0[0] * np.exp(-k * every)), rtol=1e-7)
    mutad.check_jvp(at, y0, k, rtol=1e-5)


# RK23 and RK45 in reverse mode: through SciPy's own steps. The oracle is the same steps taken
# by hand, at the step sizes SciPy chose (held fixed), differenced: at SciPy's default
# tolerances the gradient is that exact derivative, where the continuous adjoint's is off by
# about the tolerance.


def _stepped(method, rhs, span, y0, times, steps):
    """The outputs at ``times`` of explicit Runge-Kutta ``steps`` ``(t, h)`` of ``rhs`` from
    ``y0``: each output is SciPy's dense output of the step that reaches it."""
    solver = {"RK23": scipy.integrate.RK23, "RK45": scipy.integrate.RK45}[method]
    A, B, C, P, s = solver.A, solver.B, solver.C, solver.P, solver.n_stages
    direction = np.sign(span[1] - span[0])
    ends = direction * np.array([t + h for t, h in steps])
    owner = np.minimum(np.searchsorted(ends, direction * times, side="left"), len(steps) - 1)
    y, outputs = np.array(y0, dtype=float), np.empty((np.size(y0), times.size))
    for k, (t, h) in enumerate(steps):
        K = np.empty((s + 1, y.size))
        K[0] = rhs(t, y)
        for i in range(1, s):
            K[i] = rhs(t + C[i] * h, y + h * K[:i].T @ A[i, :i])
        y_new = y + h * K[:-1].T @ B
        K[s] = rhs(t + h, y_new)
        for j in np.flatnonzero(owner == k):
            outputs[:, j] = y + h * (K.T @ P) @ np.cumprod(np.full(P.shape[1], (times[j] - t) / h))
        y = y_new
    return outputs


@pytest.mark.parametrize("method", ["RK23", "RK45"])
@pytest.mark.parametrize("span, times", [((0.0, 3.0), np.linspace(0.0, 3.0, 13)),
                                         ((3.0, 0.5), np.linspace(3.0, 0.5, 7))],
                         ids=["forward", "backward"])
def test_explicit_runge_kutta_derivatives_are_those_of_scipys_steps(method, span, times):
    a, z0 = 0.7, np.array([1.2, 0.7])
    weights = np.random.default_rng(5).standard_normal((2, times.size))
    reference = solve_ivp(forced, span, z0, method=method, args=(a,), dense_output=True)
    steps = [(d.t_old, d.h) for d in reference.sol.interpolants]

    def by_hand(z0, a):
        return (weights * _stepped(method, lambda t, z: forced(t, z, a), span, z0, times,
                                   steps)).sum()

    def loss(z0, a):
        sol = solve_ivp(forced, span, z0, method=method, t_eval=times, args=(a,))
        return (weights * sol.y).sum()

    def last(z0, a):  # no t_eval: the end of the last step
        return solve_ivp(forced, span, z0, method=method, args=(a,)).y[:, -1] @ weights[:, 0]

    def dense(z0, a):
        sol = solve_ivp(forced, span, z0, method=method, args=(a,), dense_output=True)
        return (weights * sol.sol(times)).sum()

    assert by_hand(z0, a) == pytest.approx(loss(z0, a), rel=1e-13)
    before = z0.copy()
    expected = [np.array([(by_hand(z0 + e, a) - by_hand(z0 - e, a)) / 2e-6
                          for e in np.eye(2) * 1e-6]),
                (by_hand(z0, a + 1e-6) - by_hand(z0, a - 1e-6)) / 2e-6]
    direction = np.array([0.3, -1.1])
    for f in (loss, dense):
        dz0, da = mutad.gradient(f, z0, a)
        np.testing.assert_allclose(dz0, expected[0], rtol=1e-7)
        assert da == pytest.approx(expected[1], rel=1e-7)
        # forward mode through the same steps
        tangent = mutad.jvp(f, (z0, a), (direction, 0.5))[1]
        assert tangent == pytest.approx(expected[0] @ direction + 0.5 * expected[1], rel=1e-7)
    end = np.array([len(times) - 1])
    dz0, da = mutad.gradient(last, z0, a)
    np.testing.assert_allclose(dz0, [(_stepped(method, lambda t, z: forced(t, z, a), span,
                                               z0 + e, times[end], steps)[:, 0]
                                      - _stepped(method, lambda t, z: forced(t, z, a), span,
                                                 z0 - e, times[end], steps)[:, 0])
                                     @ weights[:, 0] / 2e-6 for e in np.eye(2) * 1e-6],
                               rtol=1e-7)
    assert np.array_equal(z0, before)


@pytest.mark.parametrize("method", ["RK23", "RK45"])
def test_a_long_explicit_solve_keeps_a_few_states_and_takes_the_others_again(monkeypatch,
                                                                              method):
    """Without dense output, the reverse pass keeps every step's times but only some states
    (one every stride steps, KEPT_STATES at most); the steps between are taken again. Its
    derivatives are bit for bit those of the solve that kept SciPy's dense output."""
    records, Record = [], integrate._Record
    monkeypatch.setattr(integrate, "KEPT_STATES", 3)
    monkeypatch.setattr(integrate, "_Record", type("Kept", (Record,), {
        "__init__": lambda self: (Record.__init__(self), records.append(self))[0]}))
    times = np.linspace(0.0, 6.0, 9)

    def loss(z0, a, dense):
        sol = solve_ivp(forced, (0.0, 6.0), z0, method=method, t_eval=times, args=(a,),
                        dense_output=dense)
        return (sol.y ** 2).sum()

    before = Z0.copy()
    kept = mutad.gradient(lambda z0, a: loss(z0, a, False), Z0, 0.7)
    dense = mutad.gradient(lambda z0, a: loss(z0, a, True), Z0, 0.7)
    assert np.array_equal(kept[0], dense[0]) and kept[1] == dense[1]
    v = np.array([0.3, -0.4])
    assert mutad.jvp(lambda z0: loss(z0, 0.7, False), (Z0,), (v,))[1] == \
        mutad.jvp(lambda z0: loss(z0, 0.7, True), (Z0,), (v,))[1]
    record = records[0]
    assert len(record) > 8 and record.stride > 1 and len(record.states) <= 4
    assert np.array_equal(Z0, before)


def test_a_right_hand_side_the_steps_do_not_reproduce_takes_the_continuous_adjoint(
        monkeypatch):
    calls, found = [0], []
    discrete = integrate._discrete_adjoint
    monkeypatch.setattr(integrate, "_discrete_adjoint",
                        lambda *a: found.append(discrete(*a)) or found[-1])

    def drifting(t, z, a):  # its values change from call to call: SciPy's steps are not
        calls[0] += 1       # reproduced, so the reverse pass takes the continuous adjoint
        return forced(t, z, a) + 1e-13 * calls[0]

    def loss(z0, a):
        return solve_ivp(drifting, (0.0, 2.0), z0, t_eval=[1.0, 2.0], args=(a,), **TIGHT).y.sum()

    dz0, da = mutad.gradient(loss, Z0, 0.7)
    reference = mutad.gradient(lambda z0, a: solve_ivp(forced, (0.0, 2.0), z0, t_eval=[1.0, 2.0],
                                                      args=(a,), **TIGHT).y.sum(), Z0, 0.7)
    np.testing.assert_allclose(dz0, reference[0], rtol=1e-6)
    assert da == pytest.approx(reference[1], rel=1e-6)
    assert found[0] is None and found[1] is not None  # refused, then taken


def forced(t, z, a):
    dz = np.empty(2)
    dz[0] = a * z[0] - 0.4 * z[0] * z[1] + np.sin(t)  # not autonomous
    dz[1] = -0.8 * z[1] + 0.3 * z[0] * z[1]
    return dz


Z0 = np.array([1.2, 0.7])


def _span(t0, t1, a):
    sol = solve_ivp(forced, (t0, t1), Z0, args=(a,), **TIGHT)
    return (sol.y[:, -1] ** 2).sum() + sol.y[0, 0]


def _evaluation_times(times, a):
    return (solve_ivp(forced, (0.0, 3.0), Z0, t_eval=times, args=(a,), **TIGHT).y ** 2).sum()


def _start_with_evaluation_times(t0, a):
    sol = solve_ivp(forced, (t0, 3.0), Z0, t_eval=[1.0, 2.0], args=(a,), **TIGHT)
    return (sol.y ** 2).sum()


def _dense_times(times, a):
    sol = solve_ivp(forced, (0.0, 3.0), Z0, args=(a,), dense_output=True, **TIGHT)
    return (sol.sol(times) ** 2).sum() + sol.sol(times[1])[0]


def _odeint_times(times, a):
    return (odeint(forced, Z0, times, args=(a,), tfirst=True, rtol=1e-11, atol=1e-12) ** 2).sum()


TIMES = [(_span, (0.1, 2.5, 1.1), 1e-5),
         (_evaluation_times, (np.array([0.5, 1.5, 2.5]), 1.1), 1e-5),
         (_start_with_evaluation_times, (0.2, 1.1), 1e-5),
         (_dense_times, (np.array([0.5, 1.5, 2.5]), 1.1), 1e-4),  # the interpolant's accuracy
         (_odeint_times, (np.array([0.1, 1.0, 2.0]), 1.1), 1e-5)]


@pytest.mark.parametrize("f, args, rtol", TIMES, ids=[f.__name__ for f, _, _ in TIMES])
def test_differentiable_times(f, args, rtol):
    """t_span, t_eval, sol.sol's t and odeint's t: the solution moves with each as y' = f."""
    mutad.check_grads(f, *args, rtol=rtol)
    mutad.check_jvp(f, *args, rtol=rtol)


def test_times_closed_form():
    def final(y0, k, T):
        return solve_ivp(decay, (0.0, T), y0, args=(k,), **TIGHT).y[0, -1]

    dT = mutad.gradient(final, np.array([1.5]), 0.7, 2.0)[2]
    np.testing.assert_allclose(dT, -0.7 * 1.5 * np.exp(-1.4), rtol=1e-8)


def ball(t, y, c):
    dy = np.empty(2)  # height and velocity, with drag c
    dy[0] = y[1]
    dy[1] = -9.81 - c * y[1]
    return dy


def ground(t, y, c):
    return y[0]


ground.terminal, ground.direction = True, -1


def _landing(v0, c):
    sol = solve_ivp(ball, (0, 10), np.array([0.0, v0]), args=(c,), events=ground, **TIGHT)
    return sol.t_events[0][0] + sol.y[1, -1] + sol.y_events[0][0][1] + sol.t[-1]


def _height_reached(v0, c, h):
    """A non-terminal event whose function closes over a differentiated threshold."""
    reach = lambda t, y, c: y[0] - h  # noqa: E731
    sol = solve_ivp(ball, (0, 1.5), np.array([0.0, v0]), args=(c,), events=reach,
                    t_eval=[1.0], **TIGHT)
    return 2.0 * sol.t_events[0][0] + sol.y_events[0][0][1] + sol.y[0, -1]


def test_events_time_by_the_implicit_function_theorem():
    v0, c = 5.0, 0.3
    # Without drag the ball lands at 2 v0 / g.
    landing = lambda v0, c: solve_ivp(ball, (0, 10), np.array([0.0, v0]), args=(c,),  # noqa
                                      events=ground, **TIGHT).t_events[0][0]
    np.testing.assert_allclose(mutad.gradient(landing, v0, 0.0)[0], 2 / 9.81, rtol=1e-8)

    def same_values(v0, c):
        sol = solve_ivp(ball, (0, 10), np.array([0.0, v0]), args=(c,), events=ground, **TIGHT)
        plain = scipy.integrate.solve_ivp(ball, (0, 10), np.array([0.0, 5.0]), args=(0.3,),
                                          events=ground, **TIGHT)
        assert mutad.stop_gradient(sol.t_events[0]).tobytes() == plain.t_events[0].tobytes()
        assert mutad.stop_gradient(sol.y_events[0]).tobytes() == plain.y_events[0].tobytes()
        assert mutad.stop_gradient(sol.y).tobytes() == plain.y.tobytes()
        return sol.t_events[0][0]

    mutad.gradient(same_values, v0, c)
    for f, args in ((_landing, (v0, c)), (_height_reached, (v0, c, 1.0))):
        mutad.check_grads(f, *args, rtol=1e-5)
        mutad.check_jvp(f, *args, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# odeint


def test_odeint_closed_form_and_finite_differences():
    y0, k = np.array([1.5]), 0.7
    t = np.array([0.0, 1.0, 2.0])

    def loss(y0, k):
        Y = odeint(lambda y, t, k: -k * y, y0, t, args=(k,), rtol=1e-11, atol=1e-12)
        return Y[1, 0] + 2.0 * Y[2, 0]

    value, (dy0, dk) = mutad.value_and_gradient(loss, y0, k)
    plain = scipy.integrate.odeint(lambda y, t, k: -k * y, y0, t, args=(k,), rtol=1e-11,
                                   atol=1e-12)
    assert value == plain[1, 0] + 2.0 * plain[2, 0]
    np.testing.assert_allclose(dy0, [np.exp(-k) + 2.0 * np.exp(-2 * k)], rtol=1e-7)
    np.testing.assert_allclose(dk, -y0[0] * (np.exp(-k) + 4.0 * np.exp(-2 * k)), rtol=1e-7)
    _, tangent = mutad.jvp(loss, (y0, k), (np.array([0.0]), 1.0))
    np.testing.assert_allclose(tangent, dk, rtol=1e-7)


def test_odeint_tfirst_full_output_and_closure():
    def loss(z0, beta):
        def rhs(t, z):
            return lotka_volterra(t, z, 1.1, beta)

        Y, info = integrate.odeint(rhs, z0, np.linspace(0.0, 2.0, 5), tfirst=True,
                                   full_output=1, rtol=1e-11, atol=1e-12)
        assert info["message"] == "Integration successful."
        return (Y ** 2).sum()

    for policy in POLICIES:
        mutad.check_grads(loss, np.array([1.2, 0.7]), 0.4, policy=policy, rtol=1e-5)
    mutad.check_jvp(loss, np.array([1.2, 0.7]), 0.4, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# quad


def test_quad_parameters_and_limits():
    def area(a, b, c):
        return quad(lambda x, c: np.sin(c * x) * x, a, b, args=(c,))[0]

    def area_mutad(a, b, c):
        value, error = integrate.quad(lambda x: np.exp(-c * x * x), a, b)
        return value

    value, _ = mutad.value_and_gradient(area, 0.2, 1.3, 0.9)
    assert value == scipy.integrate.quad(lambda x, c: np.sin(c * x) * x, 0.2, 1.3, args=(0.9,))[0]
    for f in (area, area_mutad):
        for policy in POLICIES:
            mutad.check_grads(f, 0.2, 1.3, 0.9, policy=policy)
        mutad.check_jvp(f, 0.2, 1.3, 0.9)
    # d/dc of ∫_0^∞ exp(-c x²) = sqrt(pi / c) / 2 is -sqrt(pi) / (4 c^1.5).
    dc, = mutad.gradient(lambda c: integrate.quad(lambda x: np.exp(-c * x * x), 0, np.inf)[0],
                         0.9)
    np.testing.assert_allclose(dc, -np.sqrt(np.pi) / (4 * 0.9 ** 1.5), rtol=1e-7)


@pytest.mark.parametrize("integrand", [
    lambda x, c: np.exp(-c * x) * np.cos(c * x * x),  # replayed at each point
    lambda x, c: np.exp(-c * math.sqrt(float(x)) - c),  # a plain number: a pullback at each
    lambda x, c: c * x if x < 0.7 else c * c * x,  # a decision on x: the replay re-records
    lambda x, c: np.float32(c) * x,  # x a Python number, as NumPy promotes it: float32
], ids=["smooth", "float(x)", "branching on x", "float32"])
def test_quad_derivative_of_the_integrand_at_each_point(integrand):
    """The parameters' derivative is the integral of the integrand's pullback, evaluated at
    each point quad_vec picks by a replay of its program (``_Integral.vector_jacobian``)."""
    def area(c):
        return quad(integrand, 0.0, 1.5, args=(c,))[0]

    if "float32" not in integrand.__code__.co_names:  # (finite differences of float32: noise)
        for policy in POLICIES:
            mutad.check_grads(area, 0.8, policy=policy)
    c = np.array([0.8])
    before = c.copy()
    dc, = mutad.gradient(lambda c: quad(integrand, 0.0, 1.5, args=(c[0],))[0], c)
    traced = []  # each point a pullback, as where the replay cannot follow x
    _, pull = mutad.pullback(lambda c: quad(lambda x: traced.append(x) or integrand(
        x, c[0]), 0.0, 1.5)[0], c)
    np.testing.assert_allclose(dc, pull(1.0)[0], rtol=1e-12)
    assert c.tobytes() == before.tobytes()


def test_quad_vec_and_break_points():
    def moments(a, b, c):
        value, error = quad_vec(lambda x: np.sin(c * x) * np.array([1.0, x]), a, b)
        return value

    def powers(c):
        return integrate.quad_vec(lambda x, c: c * x ** np.arange(3.0), 0.0, 1.0, args=(c,))[0]

    def kinked(c):
        return quad(lambda x: np.abs(x - 0.5) * c, 0.0, 1.0, points=[0.5])[0]

    for policy in POLICIES:
        mutad.check_grads(moments, 0.2, 1.3, np.array(0.9), policy=policy)
    mutad.check_jvp(moments, 0.2, 1.3, np.array(0.9))
    np.testing.assert_allclose(mutad.jacobian(powers, np.array([1.0, 2.0, 3.0])),
                               np.diag([1.0, 1 / 2, 1 / 3]), rtol=1e-8)
    np.testing.assert_allclose(mutad.gradient(kinked, 2.0)[0], 0.25, rtol=1e-8)


@pytest.mark.parametrize("f", [
    lambda p: quad(lambda x: np.exp(-p[0] * x), 0, 2, weight="cos", wvar=3.0)[0],
    lambda p: quad(lambda x: np.exp(-p[0] * x) * p[1], 0, p[1], weight="sin", wvar=2.0)[0],
    lambda p: quad(lambda x: np.exp(-p[0] * x), 0, np.inf, weight="cos", wvar=1.5)[0],
    lambda p: quad(lambda x: np.exp(-p[0] * x) * p[1], 0, 1, weight="alg", wvar=(-0.5, 0.3))[0],
    lambda p: quad(lambda x: 1.0 / (1 + p[0] * x * x), -1, 2, weight="cauchy", wvar=0.5)[0]
    * p[1],
    lambda p: quad(lambda x, q: np.exp(-q * x), 0, 2, args=(p[0],), weight="alg-loga",
                   wvar=(0.0, 0.0))[0] * p[1],
], ids=["cos", "sin_in_a_limit", "fourier", "alg", "cauchy", "alg_loga"])
def test_quad_with_a_weight(f):
    """quad's weights (QUADPACK's weighted rules): ∫ ∂f/∂θ w by quad with the same weight, and
    for cos and sin, whose weight does not depend on the limits, f(b) w(b) in a limit."""
    p = np.array([1.5, 0.7])
    before = p.tobytes()
    value, _ = mutad.value_and_grad(f)(p)
    assert value == f(p.copy())
    mutad.check_grads(f, p)
    mutad.check_jvp(f, p)
    # (new parameters give another error estimate, which f might decide on: recorded again)
    replays_as_traced(f, [(p,), (p,), (p * 1.1,), (p * 1.1,)], replayed=2)
    assert p.tobytes() == before


@pytest.mark.parametrize("f", [
    lambda p: quad(lambda x: np.exp(-p[0] * x) * p[1], 0, p[1])[0],
    lambda p: quad(lambda x: np.exp(-p[0] * x * x), p[1], np.inf)[0],
    lambda p: quad(lambda x, c: np.sin(c * x) * x, 0.2, p[1], args=(p[0],))[0],
], ids=["closure", "infinite", "args"])
def test_quad_replays(f):
    """quad's rule, whose back integrates the integrand's pullback (a differentiation the
    back starts), replays as traced, bit for bit: the same arguments replay; new ones give
    another error estimate (a Python number f may decide on) and are recorded again."""
    p = np.array([1.5, 0.7])
    before = p.tobytes()
    replays_as_traced(f, [(p,), (p,), (p * 1.1,), (p * 1.1,)], replayed=2)
    assert p.tobytes() == before


def test_quad_with_a_weight_second_derivatives_and_refusals():
    p = np.array([1.5, 0.7])
    mutad.check_grads(lambda p: quad(lambda x: np.exp(-p[0] * x) * p[1], 0, p[1], weight="sin",
                                     wvar=2.0)[0], p, order=2)
    with pytest.raises(UnsupportedOperationError, match="limits"):
        mutad.gradient(lambda p: quad(lambda x: np.exp(-x), 0, p[0], weight="alg",
                                      wvar=(0.5, 0.5))[0], p)
    with pytest.raises(UnsupportedOperationError, match="wvar"):
        mutad.gradient(lambda p: quad(lambda x: np.exp(-x), 0, 1, weight="alg",
                                      wvar=(p[0], 0.5))[0], p)


# ----------------------------------------------------------------------------------------------
# What is refused, with a clear error


def _oscillator(k, tol=1e-8, x=None):
    """y'' = -k y, y(0) = 0, y(1) = 1: y = sin(√k t) / sin(√k)."""
    return scipy.integrate.solve_bvp(lambda t, y: np.vstack([y[1], -k * y[0]]),
                                     lambda a, b: np.array([a[0], b[0] - 1.0]),
                                     np.linspace(0.0, 1.0, 5) if x is None else x,
                                     np.ones((2, 5)), tol=tol)


def test_solve_bvp_by_the_implicit_function_theorem():
    """solve_bvp (a stop: refused) differentiated in what its functions close over: SciPy's
    values bit for bit, the derivative of the collocation solution (against the exact
    solution's, to the solver's accuracy, and finite differences), of res.y, res.yp and
    res.sol (its values and slopes), in both modes, both policies, to second order."""
    def loss(k):
        res = _oscillator(k)
        return res.sol(0.5)[0] + res.sol(np.array([0.2, 0.7]), 1)[1].sum() \
            + res.y[0, 1] * res.yp[1, -1]

    value, (g,) = mutad.value_and_gradient(loss, 1.3)
    assert value == loss(1.3)
    exact = lambda k: np.sin(np.sqrt(k) * 0.5) / np.sin(np.sqrt(k))  # noqa: E731
    (at_half,) = mutad.gradient(lambda k: _oscillator(k).sol(0.5)[0], 1.3)
    np.testing.assert_allclose(at_half, (exact(1.3 + 1e-6) - exact(1.3 - 1e-6)) / 2e-6,
                               rtol=1e-6)
    for policy in POLICIES:
        mutad.check_grads(loss, 1.3, policy=policy)
    mutad.check_jvp(loss, 1.3)
    mutad.check_grads(lambda k: _oscillator(k).sol(0.5)[0], 1.3, order=2)


def test_solve_bvp_with_unknown_parameters_and_arrays_closed_over():
    """An eigenvalue problem (p, with the boundary conditions fixing its scale): res.p and the
    solution differentiated in an array the functions close over; the caller's array
    unchanged (check_grads); each replayed call traced again (the solver runs on plain
    numbers), its gradient the traced one."""
    def loss(w):
        res = scipy.integrate.solve_bvp(
            lambda t, y, p: np.vstack([y[1], -p[0] * (1.0 + w[0] * t) * y[0]]),
            lambda a, b, p: np.array([a[0], b[0], a[1] - w[1]]),
            np.linspace(0.0, 1.0, 7), np.vstack([np.sin(np.pi * np.linspace(0.0, 1.0, 7)),
                                                 np.zeros(7)]), p=[9.0], tol=1e-8)
        return res.p[0] + res.sol(0.3)[0]

    w = np.array([0.2, 1.5])
    value, _ = mutad.value_and_gradient(loss, w)
    assert value == loss(w)
    mutad.check_grads(loss, w)
    replaying = replays_as_traced(loss, [(w,), (w * 1.1,)])
    assert any("solve_bvp" in why for why in replaying.reasons.values())


def test_solve_bvp_refusals():
    with pytest.raises(UnsupportedOperationError, match="solve_bvp with a differentiated mesh"):
        mutad.gradient(lambda b: _oscillator(1.0, x=np.linspace(0.0, b, 5)).sol(0.5)[0], 1.0)
    with pytest.raises(UnsupportedOperationError, match="rms_residuals"):
        mutad.gradient(lambda k: _oscillator(k).rms_residuals.sum(), 1.0)
    with pytest.raises(UnsupportedOperationError, match="sol.c"):
        mutad.gradient(lambda k: _oscillator(k).sol.c.sum(), 1.0)
    # A plain problem inside a differentiation is SciPy's own.
    (g,) = mutad.gradient(lambda s: s * _oscillator(0.5).y[0, 2], 2.0)
    assert g == _oscillator(0.5).y[0, 2]


class _Model:
    pass


_GLOBAL_MODEL = _Model()


def test_parameters_in_the_attributes_of_an_object_closed_over():
    """``-p.k * y`` with ``p`` a dataclass, a frozen one, a namespace or a plain object in the
    closure: refused before (the parameters were reached through an object); its attributes
    holding differentiated values are now bound as cells are, and put back after."""
    @dataclasses.dataclass
    class Params:
        k: object
        c: float = 0.1

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        k: object
        c: float = 0.1

    y0 = np.array([1.0, 2.0])
    for make in (Params, Frozen, lambda k: types.SimpleNamespace(k=k, c=0.1)):
        def final(k, make=make):
            p = make(k)
            sol = solve_ivp(lambda t, y: -p.k * y + p.c, (0.0, 1.0), y0, **TIGHT)
            value = sol.y[:, -1].sum() + quad(lambda x: np.exp(-p.k * x), 0.0, 1.0)[0]
            assert type(p.k) is type(k)  # the caller's own value again
            return value

        value, _ = mutad.value_and_gradient(final, 0.7)
        assert value == final(0.7)
        mutad.check_grads(final, 0.7, rtol=1e-5)

    def changed_after(k):  # a plain attribute changed after the solve: the pullback runs
        p = Params(k, 1.0)  # the function the solve ran, with what it held then
        value = quad(lambda t: np.exp(-p.k * p.c * t), 0.0, 1.0)[0]
        p.c = 3.0
        return value

    mutad.check_grads(changed_after, 0.7, rtol=1e-6)


def _forced_decay(y, t, a, b):
    return -a * y + b * np.sin(t)


def test_parameters_a_functools_partial_binds():
    """``functools.partial(rhs, a=p[0], b=p[1])`` handed to the solver, or closed over by its
    function: refused before (pass them with args=); what it binds is now bound as cells are,
    and the partial holds the caller's values again after."""
    t = np.linspace(0.0, 2.0, 5)

    def by_keywords(p):
        a = p[0]
        rhs = functools.partial(_forced_decay, a=a, b=p[1])
        y = odeint(lambda y, t: rhs(y, t), [1.0], t, rtol=1e-11, atol=1e-12)
        assert rhs.keywords["a"] is a  # the function's own value again
        return y[-1, 0] + y.sum()

    def positional(p):
        a = p[0]
        rhs = functools.partial(lambda a, t, y: -a * y, a)
        sol = solve_ivp(rhs, (0.0, 1.0), [1.0, 2.0], **TIGHT)
        value = sol.y[:, -1].sum() + quad(functools.partial(np.multiply, p[1]), 0.0, 1.0)[0]
        assert rhs.args[0] is a
        return value

    p = np.array([1.0, 0.3])
    before = unchanged(p)
    for f in (by_keywords, positional):
        value, _ = mutad.value_and_gradient(f, p)
        assert value == f(p.copy())
        assert unchanged(p) == before
        mutad.check_grads(f, p, rtol=1e-5)


def test_refusals():
    y0 = np.array([1.0])

    def hidden(k):
        _GLOBAL_MODEL.k = k  # reached through a global object: not found, so refused
        return solve_ivp(lambda t, y: -_GLOBAL_MODEL.k * y, (0, 1), y0).y.sum()

    with pytest.raises(UnsupportedOperationError, match="args="):
        mutad.gradient(hidden, 0.5)
    with pytest.raises(mutad.errors.ComplexInputError):
        mutad.gradient(lambda y0: np.abs(solve_ivp(lambda t, y: -1j * y, (0, 1), y0).y[0, -1]),
                       np.array([1.0 + 0.5j]))

    def final(k):
        return solve_ivp(decay, (0.0, 1.0), y0, args=(k,)).y[0, -1]

    # Times and events are differentiated to first order only.
    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hvp(lambda T: solve_ivp(decay, (0.0, T), y0, args=(0.5,)).y[0, -1], (1.0,), (1.0,))
    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hvp(_landing, (5.0, 0.3), (1.0, 0.0))


def _oscillating(theta):
    """∫₀^1.5 e^(a x) sin(b x) dx over (a, b) = θ[:2], the upper limit moved by θ[2]."""
    return quad(lambda x, a, b: np.exp(a * x) * np.sin(b * x), 0.0, 1.5 + theta[2],
                args=(theta[0], theta[1]), epsabs=1e-13, epsrel=1e-13)[0]


def test_second_derivatives_through_quad():
    theta = np.array([0.4, 1.1, 0.0])
    a, b, top = theta[0], theta[1], 1.5

    def integral(g):
        return quad(g, 0.0, top, epsabs=1e-13, epsrel=1e-13)[0]

    f = lambda x: np.exp(a * x) * np.sin(b * x)  # noqa: E731
    fa = lambda x: x * np.exp(a * x) * np.sin(b * x)  # noqa: E731
    fb = lambda x: x * np.exp(a * x) * np.cos(b * x)  # noqa: E731
    # Under the integral for the parameters; f(top) moves with the limit, and so do ∂f/∂θ(top).
    expected = np.array([
        [integral(lambda x: x * fa(x)), integral(lambda x: x * fb(x)), fa(top)],
        [integral(lambda x: x * fb(x)), integral(lambda x: -x * fa(x)), fb(top)],
        [fa(top), fb(top), a * f(top) + b * np.exp(a * top) * np.cos(b * top)]])
    before = theta.copy()
    np.testing.assert_allclose(mutad.hessian(_oscillating, theta), expected, rtol=1e-9)
    v = np.array([0.3, -0.7, 0.5])
    np.testing.assert_allclose(mutad.hvp(_oscillating, (theta,), (v,)), expected @ v, rtol=1e-9)
    np.testing.assert_allclose(
        mutad.gradient(lambda t: mutad.gradient(_oscillating, t)[0] @ v, theta)[0],
        expected @ v, rtol=1e-9)
    assert mutad.jvp(lambda t: mutad.jvp(_oscillating, (t,), (v,))[1], (theta,), (v,))[1] == \
        pytest.approx(v @ expected @ v, rel=1e-9)
    assert np.array_equal(theta, before)
    # a parameter of the outer differentiation, a limit of the inner one
    mixed = mutad.gradient(lambda c: mutad.gradient(
        lambda b: quad(lambda x: c * x * x, 0.0, b)[0], 1.3)[0], 0.5)[0]
    assert mixed == pytest.approx(1.3 ** 2, rel=1e-12)


def test_a_right_hand_side_calling_an_interpolant_of_a_traced_table():
    """A forcing term read from an interp1d, CubicSpline or RegularGridInterpolator of traced
    values in the closure: refused before ("neither in args= nor in its closure"); the
    interpolant's data are bound as the closure's cells are."""
    times = np.linspace(0.0, 2.0, 9)

    def final(theta, kind):
        table = np.sin(times) * theta[0] + theta[2]
        forcing = {"interp1d": lambda: scipy.interpolate.interp1d(times, table),
                   "CubicSpline": lambda: scipy.interpolate.CubicSpline(times, table),
                   "grid": lambda: scipy.interpolate.RegularGridInterpolator((times,), table),
                   }[kind]()
        at = (lambda t: forcing([t])[0]) if kind == "grid" else forcing
        sol = solve_ivp(lambda t, y: -theta[1] * y + at(t), (0.0, 2.0), [1.0], **TIGHT)
        return sol.y[0, -1]

    theta = np.array([0.5, 1.0, 0.2])
    for kind in ("interp1d", "CubicSpline", "grid"):
        assert mutad.value_and_grad(final)(theta, kind)[0] == final(theta, kind)
        mutad.check_grads(lambda t, kind=kind: final(t, kind), theta, rtol=1e-4)


def test_dblquad_and_tplquad_are_scipys_nquad_differentiated():
    """SciPy makes an nquad of them, the limits functions of the outer variables: the same
    nquad, by mutad's, SciPy's values bit for bit, in the parameters and the limits. (A
    triple integral's derivative nests three levels of quad, each integrating the next one's
    pullback: tplquad's construction is checked on plain values here, its derivative being
    nquad's.)"""
    def double(p):
        return scipy.integrate.dblquad(lambda y, x: np.exp(-p[0] * (x * x + y * y)) * p[1],
                                       0.0, 1.0, lambda x: 0.0, lambda x: x * p[1])[0]

    def triple(p, q):
        return q * scipy.integrate.tplquad(lambda z, y, x: p[0] * x * y * z + z, 0.0, 1.0,
                                           0.0, 1.0, 0.0, lambda x, y: p[1] + x * y)[0]

    p = np.array([1.3, 0.7])
    assert mutad.value_and_grad(double)(p)[0] == double(p)
    mutad.check_grads(double, p, rtol=1e-6)
    value, g = mutad.value_and_grad(triple, argnums=1)(p, 2.0)
    assert value == triple(p, 2.0) and g == triple(p, 1.0)


def _nested_quad_benchmark():
    """benchmarks/nested_quad.py as a module: its integrals (``KINDS``) and the count of the
    integrand's calls (``CALLS``)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "nested_quad.py"
    spec = importlib.util.spec_from_file_location("nested_quad", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["dblquad", "nquad", "quad of quad"])
def test_nested_quad_evaluates_the_integrand_a_few_times_as_often_as_scipy(kind):
    """A nested quad's gradient called the integrand 13 times as often as SciPy's value did
    (seconds for a dblquad of a few hundred points): each inner quad's derivative integral was
    a quad_vec (at least 63 points, against QUADPACK's 21), and under the outer replay each
    inner pullback was traced (its floating-point events were the replay's to hear), not
    replayed. Values SciPy's bit for bit, derivatives (in a parameter and in the limits)
    those of central differences. The integrals are the benchmark's, which cannot rot so."""
    benchmark = _nested_quad_benchmark()
    f, calls = benchmark.KINDS[kind], benchmark.CALLS
    p = np.array([0.7, 1.2])
    calls[0] = 0
    expected = f(p.copy())
    plain = calls[0]
    calls[0] = 0
    value, g = mutad.value_and_grad(f)(p)
    assert calls[0] <= 4 * plain
    assert value == expected and p.tolist() == [0.7, 1.2]
    mutad.check_grads(f, p, modes=("rev",), rtol=1e-6)


def test_a_derivative_integral_inside_a_replay_replays_its_pullbacks():
    """A quad's derivative integral (``outside_differentiations``) runs inside the reverse pass
    of an enclosing replay (the outer quad of a dblquad), whose listener hears NumPy's
    floating-point events ("log"): the integrand's pullback at each point, a replay of its
    own, saw that handling and was traced at every point. Its events are issued at the user's
    lines instead, as a differentiation's own are, and the pullbacks replay."""
    from mutad.engines.replay import Heard
    from mutad.scipy._adjoints import outside_differentiations

    def f(x):
        return np.exp(-x) * x

    pullback = mutad.grad(f, replay=True)
    with np.errstate(call=Heard(), divide="log", over="log", invalid="log"):
        with outside_differentiations("quad"):
            values = [pullback(x) for x in (0.5, 1.5, 2.5)]
    assert not pullback.reasons
    assert values == [mutad.grad(f)(x) for x in (0.5, 1.5, 2.5)]


def test_scipys_module_attributes():
    """``scipy.integrate.solve_ivp`` and the others, spelled through the module."""
    def loss(y0, k):
        sol = scipy.integrate.solve_ivp(decay, (0.0, 1.0), y0, t_eval=[0.5, 1.0], args=(k,),
                                        **TIGHT)
        Y = scipy.integrate.odeint(lambda y, t: -k * y, y0, [0.0, 1.0], rtol=1e-11,
                                   atol=1e-12)
        area = scipy.integrate.quad(lambda x: k * x, 0.0, 1.0)[0]
        samples = scipy.integrate.simpson(sol.y[0], dx=0.5) + scipy.integrate.trapezoid(sol.y[0])
        return sol.y[0, -1] + Y[-1, 0] + area + samples

    mutad.check_grads(loss, np.array([1.5]), 0.7, rtol=1e-5)
    mutad.check_jvp(loss, np.array([1.5]), 0.7, rtol=1e-5)


def test_second_order():
    """hvp (reverse over forward), hessian (forward over reverse) and a gradient of a
    gradient: the sensitivities solved by a solve the enclosing differentiation follows."""
    loose = dict(rtol=1e-8, atol=1e-10)

    def final(y0, k):
        return solve_ivp(decay, (0.0, 2.0), y0, args=(k,), **loose).y[0, -1]

    y0, k = np.array([1.5]), 0.7  # y0 e^{-2k}
    mixed, second = -2 * np.exp(-2 * k), 4 * y0[0] * np.exp(-2 * k)
    hvp = mutad.hvp(final, (y0, k), (np.array([1.0]), 1.0))
    np.testing.assert_allclose(hvp[0], [mixed], rtol=1e-5)
    np.testing.assert_allclose(hvp[1], mixed + second, rtol=1e-5)
    np.testing.assert_allclose(mutad.hessian(final, y0, k, argnums=1), second, rtol=1e-5)
    np.testing.assert_allclose(mutad.gradient(lambda k: mutad.gradient(final, y0, k)[1], k)[0],
                               second, rtol=1e-5)

    # (checked against finite differences to 1e-3: tolerances 1e-6 and 1e-8 suffice)
    looser = dict(rtol=1e-6, atol=1e-8)

    def final_state(z0, a):
        sol = solve_ivp(lambda t, z: lotka_volterra(t, z, a, 0.4), (0, 1.0), z0, **looser)
        return (sol.y[:, -1] ** 2).sum()

    def outputs(z0, a):
        Y = odeint(lambda z, t, a: lotka_volterra(t, z, a, 0.4), z0, [0.0, 1.0], args=(a,),
                   **looser)
        return (Y ** 2).sum()

    z0 = np.array([1.2, 0.7])
    mutad.check_grads(final_state, z0, 1.1, order=2, modes=("rev",), rtol=1e-3)
    mutad.check_grads(outputs, z0, 1.1, order=2, modes=("fwd",), rtol=1e-3)


def test_plain_calls_are_scipys():
    sol = integrate.solve_ivp(decay, (0.0, 1.0), [1.0], args=(0.5,))
    expected = scipy.integrate.solve_ivp(decay, (0.0, 1.0), [1.0], args=(0.5,))
    assert np.array_equal(sol.y, expected.y)
    assert integrate.quad(np.sin, 0, 1) == scipy.integrate.quad(np.sin, 0, 1)
    assert integrate.simpson([1.0, 2.0, 4.0]) == scipy.integrate.simpson([1.0, 2.0, 4.0])


def _double(theta):
    """nquad over a region whose upper y limit moves with a parameter, the integrand reading
    args= and a closed-over array (a polynomial, which each quad integrates exactly at once)."""
    w = theta[2:]
    return nquad(lambda x, y, a, b: a * x * y * y + b * b * x + w[0] * y,
                 [[0.0, 1.0], lambda a, b: [0.0, 1.0 + a]], args=(theta[0], theta[1]))


def test_nquad_is_scipys_and_differentiated_as_nested_quads():
    theta = np.array([0.3, 0.8, 0.5])
    value, error = _double(theta)
    plain = scipy.integrate.nquad(lambda x, y, a, b: a * x * y * y + b * b * x + 0.5 * y,
                                  [[0.0, 1.0], lambda a, b: [0.0, 1.0 + a]], args=(0.3, 0.8))
    assert (value, error) == plain
    f = lambda t: _double(t)[0]  # noqa: E731
    before = theta.copy()
    expected = np.array([(f(theta + e) - f(theta - e)) / 2e-6 for e in np.eye(3) * 1e-6])
    np.testing.assert_allclose(mutad.gradient(f, theta)[0], expected, rtol=1e-7)
    v = np.array([0.4, -0.2, 1.0])
    assert mutad.jvp(f, (theta,), (v,))[1] == pytest.approx(expected @ v, rel=1e-7)
    assert np.array_equal(theta, before)  # second order: that of quad (test above), nested
    # limits given as numbers, and by a range function, that are differentiated
    c = np.array([1.2, 0.7])
    np.testing.assert_allclose(mutad.gradient(
        lambda c: nquad(lambda x, y: x * y + 1.0, [[0.0, c[0]], [0.0, c[1]]])[0], c)[0],
        [c[1] ** 2 * c[0] / 2 + c[1], c[0] ** 2 * c[1] / 2 + c[0]], rtol=1e-12)
    np.testing.assert_allclose(mutad.gradient(
        lambda c: nquad(lambda x, y: x * y + 1.0, [[0.0, 1.0], lambda: [0.0, c[1]]])[0], c)[0],
        [0.0, c[1] / 2 + 1.0], rtol=1e-12)


# The function a solve called, in the reverse pass too -----------------------------------------

def _experiments_in_a_loop(solve):
    """A loss over three experiments, each a solve whose function closes over the loop's
    variable (and a number the loop rebinds after the solve)."""
    def loss(p):
        total, scale = 0.0, 1.0
        for k in range(3):
            total = total + scale * solve(lambda t, y: -p[k] * y, p[k])
            scale = 10.0  # rebound after the first solve: that solve's function read 1.0
        return total
    return loss


LATE_BINDING = {
    "quad": lambda f, pk: quad(lambda x: f(x, 1.0), 0.0, 2.0, epsabs=1e-13, epsrel=1e-13)[0],
    "solve_ivp-RK45": lambda f, pk: solve_ivp(f, (0.0, 1.0), np.array([1.0]), rtol=1e-11,
                                              atol=1e-12).y[0, -1],
    "solve_ivp-Radau": lambda f, pk: solve_ivp(f, (0.0, 1.0), np.array([1.0]), "Radau",
                                               rtol=1e-11, atol=1e-12).y[0, -1],
    "odeint": lambda f, pk: odeint(f, np.array([1.0]), [0.0, 1.0], rtol=1e-11, atol=1e-12,
                                   tfirst=True)[-1, 0],
}


@pytest.mark.parametrize("name", LATE_BINDING)
def test_a_solve_in_a_loop_is_differentiated_with_the_function_it_called(name):
    """The reverse pass calls the function again; the loop's variable it closes over has moved
    on by then (p[k] read p[2] for every experiment: a silently wrong gradient)."""
    loss = _experiments_in_a_loop(LATE_BINDING[name])
    p = np.array([1.0, 0.2, 0.3])
    value, (g,) = mutad.value_and_grad(loss, argnums=(0,))(p)
    assert abs(value - loss(p)) < 1e-9
    h = 1e-5
    numeric = np.array([(loss(p + h * e) - loss(p - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(g, numeric, rtol=1e-6)


def test_a_solve_that_counts_its_calls_counts_them_as_scipy_does():
    def loss(p, counter):
        calls = 0

        def f(t, y):
            nonlocal calls
            calls += 1
            return -p[0] * y

        y = solve_ivp(f, (0.0, 1.0), np.array([1.0]), method="Radau").y[0, -1]
        counter.append(calls)
        return y

    p, plain, traced = np.array([0.7]), [], []
    loss(p, plain)
    mutad.gradient(lambda p: loss(p, traced), p)
    assert traced == plain


@pytest.mark.slow
def test_second_order_of_a_closure_and_of_args():
    """A hessian of solve_ivp whose right-hand side reads the parameters from its closure said
    they were "neither in args= nor in its closure", then was refused saying to pass them with
    args=; a differentiation the solver's rule starts is now nested in the enclosing levels
    alone, not in the one recording the rule, and the closure's hessian is args='s."""
    # (tolerances 1e-8 and 1e-10: within the 1e-6 the closed form is checked to, in fewer steps)
    def closure(p):
        return solve_ivp(lambda t, y: -p[0] * y + p[1], (0, 1), [1.0], rtol=1e-8,
                         atol=1e-10).y[0, -1]

    def through_args(p):
        return solve_ivp(lambda t, y, a, b: -a * y + b, (0, 1), [1.0], args=(p[0], p[1]),
                         rtol=1e-8, atol=1e-10).y[0, -1]

    p = np.array([0.5, 0.3])
    a, b = p  # y(1) = b/a + (1 - b/a) e^{-a}
    e = np.exp(-a)
    expected = np.array([[2 * b / a ** 3 * (1 - e) - 2 * b / a ** 2 * e + (1 - b / a) * e, 0.0],
                         [0.0, 0.0]])
    expected[0, 1] = expected[1, 0] = -1 / a ** 2 + e / a ** 2 + e / a
    np.testing.assert_allclose(mutad.hessian(through_args, p), expected, rtol=1e-6)
    np.testing.assert_allclose(mutad.hessian(closure, p), expected, rtol=1e-6)


def test_an_array_odeint_hands_its_function_kept_by_the_function():
    """odeint hands its function a state whose memory is SciPy's buffer (no array owns it):
    kept by the function and read after the solve, NumPy refused to make it writable again
    when the differentiation ended, and a ValueError replaced the gradient."""
    def f(x):
        states = []

        def rhs(y, t):
            states.append(y)
            return -y

        odeint(rhs, [1.0], [0.0, 1e-3])
        return (x * states[0]).sum()

    x = np.array([2.0])
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value == f(x) and np.array_equal(g, [f(np.array([1.0]))])


def test_a_gradient_of_quad_with_an_integer_limit_differentiated_again_by_reverse_mode():
    """``jacrev`` of a gradient through ``quad(..., 0, 1)``: the integer limit 0 reached the
    integrand's recorded pullback as the integer it was written, which refused it as an
    argument without a derivative (ArgnumsError); QUADPACK evaluates at the float."""
    def loss(z):
        return quad(lambda t: np.sin(z[0] * t) * z[1], 0, 1)[0]

    x = np.array([0.7, 1.3])
    kept = x.copy()
    (h,) = mutad.jacrev(lambda z: mutad.gradient(loss, z))(x)
    np.testing.assert_allclose(h, mutad.hessian(loss, x), rtol=1e-12)
    z0, z1 = x  # d/dz0 ∫ sin(z0 t) z1 dt = z1 ∫ t cos(z0 t) dt, d²/dz0² = -z1 ∫ t² sin(z0 t) dt
    np.testing.assert_allclose(h[0, 0], -z1 * quad(lambda t: t * t * np.sin(z0 * t), 0, 1)[0],
                               rtol=1e-8)
    assert h[1, 1] == 0 and np.array_equal(x, kept)


def test_solve_bvp_leaves_in_a_buffer_what_scipys_last_call_wrote():
    """fun writing into an array the differentiated function allocated: SciPy's run wrote
    into a copy, and the array kept its zeros (a silently wrong value); now NumPy's."""
    def f(p):
        last = np.zeros(1)

        def fun(x, y):
            last[0] = x.size
            return np.vstack([y[1], -np.exp(y[0])])

        scipy.integrate.solve_bvp(fun, lambda ya, yb: np.array([ya[0], yb[0]]),
                                  np.linspace(0, 1, 5), np.zeros((2, 5)), tol=1e-8)
        return last[0] + p[0]

    p = np.array([1.0])
    value, (gradient,) = mutad.value_and_gradient(f, p)
    assert value == f(p.copy()) and value > 1.0
    assert gradient.tolist() == [1.0]


def _ivp_buffer(p, buf):
    def rhs(t, y):
        buf[0] = y[1]
        buf[1] = -p[0] * y[0]
        return buf.copy()
    return scipy.integrate.solve_ivp(rhs, (0, 1), [1.0, 0.0], rtol=1e-8).y[0, -1]


def _ivp_args_buffer(p, buf):
    def rhs(t, y, k, work):
        np.multiply(-k[0], y[::-1], out=work)
        return work * np.array([-1.0, 1.0])
    return scipy.integrate.solve_ivp(rhs, (0, 1), [1.0, 0.0], args=(p, buf)).y[0, -1]


def _odeint_buffer(p, buf):
    def rhs(y, t):
        buf[:] = [y[1], -p[0] * y[0]]
        return buf.copy()
    return odeint(rhs, [1.0, 0.0], [0.0, 1.0])[-1, 0]


def _quad_buffer(p, buf):
    def g(x):
        buf[0] = x
        return np.exp(-p[0] * x)
    return quad(g, 0, 1)[0]


def _rhs_writes_the_parameter(p, buf):
    def rhs(t, y):
        p[1] = y[0]  # the differentiated value itself
        return -p[0] * y
    return scipy.integrate.solve_ivp(rhs, (0, 1), [1.0]).y[0, -1]


@pytest.mark.parametrize("solve", [_ivp_buffer, _ivp_args_buffer, _odeint_buffer, _quad_buffer,
                                   _rhs_writes_the_parameter])
def test_a_function_writing_into_an_array_the_differentiation_follows_is_refused(solve):
    """A right-hand side (integrand) writing into an array holding differentiated values,
    read after the solve: SciPy ran it on that array's numbers, so the array held the values
    of SciPy's last call with the derivative of what it held before (a gradient of -0.37
    where it is -0.74); one writing into the differentiated value itself also changed the
    caller's array. Now refused, the caller's array untouched."""
    def f(p):
        buf = p * 1.0
        return solve(p, buf) + 1e3 * buf.sum()

    p = np.array([1.0, 0.5])
    kept = p.copy()
    with pytest.raises(UnsupportedOperationError, match="writes into an array holding differentiated"):
        mutad.gradient(f, p)
    assert p.tobytes() == kept.tobytes()


def test_a_buffer_allocated_inside_the_right_hand_side_is_differentiated():
    """What the refusal above asks for: the buffer allocated in the function, the state it
    leaves read from the solution."""
    def f(p):
        def rhs(t, y):
            buf = np.empty(2)
            buf[0] = y[1]
            buf[1] = -p[0] * y[0]
            return buf
        return scipy.integrate.solve_ivp(rhs, (0, 1), [1.0, 0.0], rtol=1e-10,
                                         atol=1e-12).y[0, -1]

    p = np.array([1.0])
    kept = p.copy()
    (gradient,) = mutad.gradient(f, p)
    assert p.tobytes() == kept.tobytes()
    # y = cos(√p t): d/dp cos(√p) = -sin(√p) / (2√p)
    np.testing.assert_allclose(gradient, [-np.sin(1.0) / 2], rtol=1e-6)


_WORK = np.zeros(2)  # a module-level work buffer a right-hand side writes into


def _closure_buffer(solver, read):
    """A loss whose solver's function writes into a buffer the loss allocated (or, with
    ``solver`` ending in "global", the module-level one), read after the solve when ``read``."""
    def loss(p):
        buf = _WORK if solver.endswith("global") else np.zeros(2)

        def rhs(t, y):
            buf[0] = y[0]
            buf[1] = -p[0] * y[0]
            return -p[0] * y

        if solver.startswith("solve_ivp"):
            y = scipy.integrate.solve_ivp(rhs, (0, 1), [1.0], rtol=1e-6, t_eval=[1.0]).y[0, -1]
        elif solver == "odeint":
            y = odeint(rhs, [1.0], [0.0, 1.0], tfirst=True)[-1, 0]
        elif solver.startswith("solve_bvp"):  # (y' = -p y, y(0) = 1, as a boundary value)
            y = scipy.integrate.solve_bvp(
                lambda t, y: rhs(t, y[0])[None], lambda ya, yb: ya - 1.0,
                np.linspace(0.0, 1.0, 5), np.ones((1, 5)), tol=1e-10).y[0, -1]
        elif solver == "ode":
            r = scipy.integrate.ode(rhs).set_integrator("dopri5")
            y = r.set_initial_value([1.0], 0.0).integrate(1.0)[0]
        else:
            y = quad(lambda x: rhs(x, np.array([1.0]))[0], 0.0, 1.0)[0]
        return y + (buf.sum() if read else 0.0 * buf[0])
    return loss


BUFFER_SOLVERS = ["solve_ivp", "solve_ivp global", "odeint", "ode", "quad", "solve_bvp global"]


@pytest.mark.parametrize("solver", BUFFER_SOLVERS)
def test_a_buffer_the_solvers_function_writes_and_the_loss_reads_is_refused(solver):
    """Regression: the values SciPy's last call left in the buffer are NumPy's, but a read of
    them had derivative zero (a silently wrong gradient). Reverse mode refuses a gradient
    reaching them; forward mode gives them a NaN tangent."""
    loss = _closure_buffer(solver, read=True)
    p = np.array([0.7])
    _WORK[:] = 0.0
    expected = loss(p.copy())
    _WORK[:] = 0.0
    with pytest.raises(UnsupportedOperationError, match="wrote into an array"):
        mutad.gradient(loss, p)
    assert p.tolist() == [0.7]
    _WORK[:] = 0.0
    value, tangent = mutad.jvp(loss, (p,), (np.ones(1),))
    assert value == expected and np.isnan(tangent) and p.tolist() == [0.7]


@pytest.mark.parametrize("solver", BUFFER_SOLVERS)
def test_a_buffer_the_solvers_function_writes_and_nothing_reads_is_differentiated(solver):
    """The same buffer, which the loss reads only multiplied by zero: the gradient is the
    solution's, and the buffer holds what NumPy's run leaves in it."""
    loss = _closure_buffer(solver, read=False)
    p = np.array([0.7])
    _WORK[:] = 0.0
    expected = loss(p.copy())
    left = _WORK.copy()
    _WORK[:] = 0.0
    value, (gradient,) = mutad.value_and_gradient(loss, p)
    assert value == expected and _WORK.tobytes() == left.tobytes() and p.tolist() == [0.7]
    h = 1e-6
    assert np.isclose(gradient[0], (loss(p + h) - loss(p - h)) / (2 * h), rtol=1e-4)


@pytest.mark.parametrize("solver", ["solve_ivp", "quad"])
def test_a_module_level_buffer_under_a_derivative_of_second_order_is_refused_saying_so(solver):
    """The solver's function writing into a module-level buffer, run again for the derivatives
    inside mutad.hvp's nested differentiation: refused with a message naming the buffer and
    what to do (was the general UntracedWriteError about caches and deques)."""
    def loss(p):
        def rhs(t, y):
            _WORK[0] = y[0] if solver == "solve_ivp" else t
            return -p[0] * y
        if solver == "quad":
            return quad(lambda t: rhs(t, np.ones(1))[0], 0.0, 1.0)[0] ** 2
        return scipy.integrate.solve_ivp(rhs, (0, 1), [1.0], rtol=1e-8).y[0, -1] ** 2

    p = np.array([1.3])
    _WORK[:] = 0.0
    with pytest.raises(UnsupportedOperationError, match="run again for the derivatives"):
        mutad.hvp(loss, (p,), (np.ones(1),))
    assert p.tolist() == [1.3]
    _WORK[:] = 0.0
