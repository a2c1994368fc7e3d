"""Forward mode, second derivatives and nested differentiation, through in-place updates.

Each differentiation has its own level; these tests pin the classic perturbation-confusion
cases (Siskind and Pearlmutter, "Perturbation confusion and referential transparency", 2005),
in every pairing mutad supports, and check that the caller's arrays come back bit-for-bit.
"""

import functools

import numpy as np
import pytest

import mutad
from mutad import errors

gradient, jvp, hvp = mutad.gradient, mutad.jvp, mutad.hvp


def tangent(f, x):
    """d/dx f at a float, by forward mode."""
    return float(jvp(f, (x,), (1.0,))[1])


def test_design_example_gives_six():
    assert gradient(lambda x: x * gradient(lambda y: x * y, 2.0)[0], 3.0) == (6.0,)


@pytest.mark.parametrize("outer", ["reverse", "forward"])
@pytest.mark.parametrize("inner", ["reverse", "forward"])
def test_siskind_pearlmutter(outer, inner):
    """d/dx (x * d/dy (x + y) at y = 1) at x = 1 is 1; confusing the perturbations gives 2."""
    def inner_derivative(x):
        if inner == "reverse":
            return gradient(lambda y: x + y, 1.0)[0]
        return jvp(lambda y: x + y, (1.0,), (1.0,))[1]

    def f(x):
        return x * inner_derivative(x)

    result = gradient(f, 1.0)[0] if outer == "reverse" else tangent(f, 1.0)
    assert result == 1.0



@pytest.mark.parametrize("outer", ["reverse", "forward"])
@pytest.mark.parametrize("inner", ["reverse", "forward"])
def test_a_scalar_of_the_outer_level_passed_twice_is_two_values(outer, inner):
    """An enclosing level's scalar is immutable, as a float is: passed in two places, each
    place is a value of its own, not one buffer with the total derivative in each.
    d/dy0 (y0 * y1) at (x, x) is x, so f(x) = x and f'(x) = 1."""
    def f(x):
        if inner == "reverse":
            return gradient(lambda y: y[0] * y[1], (x, x))[0][0]
        return jvp(lambda y: y[0] * y[1], ((x, x),), ((1.0, 0.0),))[1]

    assert f(5.0) == 5.0
    if outer == "reverse":
        value, (slope,) = mutad.value_and_gradient(f, 5.0)
    else:
        value, slope = jvp(f, (5.0,), (1.0,))
    assert (value, slope) == (5.0, 1.0)
    x = np.array([2.0, 3.0])
    mutad.check_grads(lambda x: f(x.sum()) * x, x)  # a reduction's result is a scalar too
    half_square = lambda x: f(x) ** 2 / 2  # noqa: E731  (second derivative 1, at three levels)
    if outer == "reverse":
        assert mutad.hvp(half_square, (5.0,), (1.0,)) == 1.0
        assert gradient(lambda x: jvp(half_square, (x,), (1.0,))[1], 5.0) == (1.0,)
    else:
        assert jvp(lambda x: jvp(half_square, (x,), (1.0,))[1], (5.0,), (1.0,))[1] == 1.0
        assert jvp(mutad.grad(half_square), (5.0,), (1.0,))[1] == 1.0

def test_the_three_orders_agree_through_in_place_code():
    """Reverse over forward (hvp), forward over reverse (jvp of a gradient whose reverse pass
    restores and accumulates in place, carrying tangents) and nested reverse mode."""
    def f(x):
        x[1:] *= x[:-1]
        np.exp(x, out=x)
        return (x * x).sum()

    x = np.array([0.1, 0.2, 0.3, -0.4])
    v = np.array([1.0, -1.0, 0.5, 2.0])
    before = x.tobytes()
    reverse_over_forward = hvp(f, (x,), (v,))
    forward_over_reverse = jvp(lambda x: gradient(f, x)[0], (x,), (v,))[1]
    nested = gradient(lambda x: (gradient(f, x)[0] * v).sum(), x)[0]
    np.testing.assert_allclose(forward_over_reverse, reverse_over_forward, rtol=1e-12)
    np.testing.assert_allclose(nested, reverse_over_forward, rtol=1e-12)
    assert x.tobytes() == before


def test_hvp_of_a_function_that_calls_gradient():
    """Three levels: reverse over forward over the inner reverse pass."""
    def f(x):
        g = gradient(lambda y: (np.sin(y) * x).sum(), x)[0]
        return (g * g).sum()

    mutad.check_grads(f, np.array([0.3, -0.2, 0.5]), order=2)


@pytest.mark.parametrize("convert", [lambda d: float(d.sum()), lambda d: d[1].item(),
                                     lambda d: d.tolist()[0]])
def test_a_number_whose_tangent_is_zero_keeps_the_reverse_derivative(convert):
    """float(), .item() and .tolist() of a dual whose tangent is zero (x - x) but whose value
    an enclosing reverse pass traces: converted as that traced value converts, followed. They
    were refused as a traced array converted by np.asarray (the dual's constant value was
    taken as plain), though NumPy computes f (scipy.signal.detrend(x) @ a line is one)."""
    def f(x):
        return 3.0 * convert(x - x) + np.sum(x ** 3)

    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])
    expected = 6 * x * v
    np.testing.assert_array_equal(mutad.hvp(f, (x,), (v,)), expected)
    np.testing.assert_array_equal(gradient(lambda x: mutad.jvp(f, (x,), (v,))[1], x)[0],
                                  expected)


def test_third_derivative_by_nesting_three_gradients():
    def d(f):
        return lambda x: gradient(f, x)[0]

    assert d(d(d(lambda x: x ** 4)))(2.0) == pytest.approx(24 * 2.0)


def test_inner_gradient_mutates_and_outer_mutates_its_result():
    def inner(u, k):
        u *= k
        u[1:] += u[:-1] * u[1:]
        return (u * u).sum()

    def outer(k, u):
        du, dk = gradient(inner, u, k)
        w = np.zeros_like(du)
        w += du            # the outer function updates the inner gradient in place
        w[1:] *= np.sin(w[:-1])
        return w.sum() + dk * dk

    u = np.array([1.0, 2.0, 3.0])
    before = u.copy()
    mutad.check_grads(outer, 0.7, u)
    mutad.check_grads(outer, 0.7, u, order=2)
    assert u.tobytes() == before.tobytes()


def test_an_inner_value_written_into_an_outer_array_is_refused():
    def outer(x):
        w = np.zeros_like(x)

        def inner(y):
            w[...] = y * y   # w belongs to the outer differentiation: y's gradient is lost
            return y.sum()

        gradient(inner, np.ones(2))
        return w.sum()

    with pytest.raises(errors.UntracedWriteError):
        gradient(outer, np.ones(2))


def test_a_jvp_value_written_into_an_outer_jvp_array_is_refused():
    def outer(x):
        def inner(y):
            x[...] += y     # y's tangent (the inner level) has nowhere to go in x
            return y

        jvp(inner, (np.ones(2),), (np.ones(2),))
        return x

    with pytest.raises(errors.UntracedWriteError):
        jvp(outer, (np.ones(2),), (np.ones(2),))


HEAT_U0 = np.sin(np.linspace(0.0, 3.0, 6))


def _heat_energy(u, k):
    """A few hundred explicit in-place steps of a nonlinear heat equation, then the energy."""
    u = u.copy()
    for _ in range(200):
        u[1:-1] += 0.2 * k * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[1:-1] -= 0.01 * u[1:-1] ** 3
    return (u * u).sum()


@functools.cache
def _heat_hessian_by_finite_differences():
    """Central differences of the (default policy's) gradient, column by column: computed once
    for both policies' Hessians."""
    h = 1e-5
    grad = lambda u: gradient(_heat_energy, u, 0.9)[0]  # noqa: E731
    return np.array([(grad(HEAT_U0 + h * e) - grad(HEAT_U0 - h * e)) / (2 * h)
                     for e in np.eye(HEAT_U0.size)])


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_hessian_of_an_explicit_heat_solver(policy):
    """A few hundred in-place steps; the Hessian against finite differences of the gradient."""
    u0 = HEAT_U0.copy()
    H = mutad.hessian(_heat_energy, u0, 0.9, policy=policy)
    fd = _heat_hessian_by_finite_differences()
    np.testing.assert_allclose(H, fd.T, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    assert u0.tobytes() == HEAT_U0.tobytes()
    mutad.check_grads(_heat_energy, u0, 0.9, policy=policy, order=2)


def test_hessian_of_a_cholesky_gaussian_log_likelihood():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((5, 3))

    def nll(mean, A):
        C = A @ A.T + np.eye(3)
        F = mutad.linalg.cholesky_(C)
        r = (data - mean).T.copy()
        mutad.linalg.ldiv_(F, r)           # r <- C^-1 (x - mean), in place
        logdet = 2 * np.log(np.diagonal(C)).sum()
        return 0.5 * ((data - mean).T * r).sum() + 0.5 * len(data) * logdet

    mean = np.array([0.1, -0.2, 0.3])
    A = np.eye(3) + 0.1 * rng.standard_normal((3, 3))
    before = A.copy()
    H = mutad.hessian(nll, mean, A, argnums=1)
    h = 1e-5
    grad = lambda A: gradient(nll, mean, A)[1]  # noqa: E731
    basis = np.eye(9).reshape(9, 3, 3)
    fd = np.array([(grad(A + h * e) - grad(A - h * e)) / (2 * h) for e in basis])
    np.testing.assert_allclose(H.reshape(9, 9), fd.reshape(9, 9).T, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mutad.hessian(nll, mean, A), np.linalg.inv(
        (A @ A.T + np.eye(3))) * len(data), rtol=1e-10)  # d²/dmean² = n C⁻¹
    assert A.tobytes() == before.tobytes()



@pytest.mark.parametrize("outputs", [2, 4])  # fewer outputs than inputs: reverse rows
def test_jacobians_nest_in_jacobians_and_gradients(outputs):
    def f(x):
        y = np.zeros(outputs)
        y += np.sin(x[:1] * x[1:outputs + 1].sum())  # in place into a work array
        y[1:] *= x[:outputs - 1]
        return y

    x = np.array([0.3, -0.7, 1.1, 0.4, 0.9])
    before = x.tobytes()
    jac = lambda x: mutad.jacobian(f, x)  # noqa: E731
    second = mutad.jacobian(jac, x)
    assert second.shape == (outputs, 5, 5)
    h = 1e-6
    fd = np.stack([(jac(x + h * e) - jac(x - h * e)) / (2 * h) for e in np.eye(5)], axis=-1)
    np.testing.assert_allclose(second, fd, rtol=1e-6, atol=1e-8)
    mutad.check_grads(lambda x: np.sin(jac(x)), x)
    mutad.check_jvp(lambda x: np.sin(jac(x)), x)
    assert mutad.jacobian(lambda s: mutad.jacobian(lambda t: np.sin(t) * t, s), 0.5) == (
        pytest.approx(2 * np.cos(0.5) - 0.5 * np.sin(0.5), rel=1e-12))
    assert x.tobytes() == before

def test_jacobian_uses_either_mode_and_has_jax_shape():
    def f(x):
        y = np.zeros_like(x[:2])
        y += x[1:] * x[:-1]
        return y

    x = np.array([1.0, 2.0, 3.0])
    J = mutad.jacobian(f, x)
    assert J.shape == (2, 3)
    np.testing.assert_allclose(J, [[2.0, 1.0, 0.0], [0.0, 3.0, 2.0]])
    # more outputs than inputs: forward passes; fewer: reverse passes; the same matrix
    tall = mutad.jacobian(lambda s: s * x, 2.0)
    np.testing.assert_allclose(tall, x)
    wide = mutad.jacobian(lambda x: (x * x).sum(), x)
    np.testing.assert_allclose(wide, 2 * x)


@pytest.mark.parametrize("n", [2, 5])  # more outputs than inputs (forward), fewer (reverse)
def test_jacobian_of_outputs_in_containers(n):
    def f(x):
        x[1:] *= x[:-1]    # in place
        return {"total": (x * x).sum(), "head": (x[:2] * 3.0, x[0])}

    x = np.linspace(0.5, 1.5, n)
    J = mutad.jacobian(f, x)
    assert J["total"].shape == (n,) and J["head"][0].shape == (2, n) and J["head"][1].shape == (n,)
    for leaf, path in ((J["total"], lambda y: y["total"]), (J["head"][0], lambda y: y["head"][0])):
        h = 1e-6
        fd = np.array([(np.asarray(path(f(x + h * e))) - np.asarray(path(f(x - h * e)))) / (2 * h)
                       for e in np.eye(n)])
        np.testing.assert_allclose(leaf, np.moveaxis(fd, 0, -1), rtol=1e-7, atol=1e-9)


def test_hessian_blocks_for_several_arguments():
    def f(a, b):
        a *= b
        return (a * a).sum()

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (Haa, Hab), (Hba, Hbb) = mutad.hessian(f, a, b, argnums=(0, 1))
    np.testing.assert_allclose(Haa, np.diag(2 * b * b))
    np.testing.assert_allclose(Hab, np.diag(4 * a * b))
    np.testing.assert_allclose(Hba, Hab.T)
    np.testing.assert_allclose(Hbb, np.diag(2 * a * a))


def test_a_nested_gradient_gives_back_an_index_array_the_outer_one_froze():
    x, index = np.array([1.0, 2.0, 3.0]), np.array([0, 2])

    def inner(x, index):
        return (x[index] ** 3).sum()

    result = gradient(lambda x: gradient(inner, x, index)[0].sum(), x)[0]
    np.testing.assert_allclose(result, [6.0, 0.0, 18.0])
    np.testing.assert_array_equal(index, [0, 2])


def test_a_user_in_place_rule_nests_and_hvp_falls_back_to_nested_reverse():
    """The rule's back accumulates into shadows that the outer differentiation traces; with
    no forward rule, hvp and hessian differentiate it by nested reverse mode, inside an
    enclosing differentiation too."""
    @mutad.inplace_adjoint(writes=("a",))
    def scale_(a, b):
        a *= b
        return a

    @scale_.rule
    def _scale_rule(a, b):
        scale_(a, b)

        def back(da, db):
            a[...] /= b
            if db is not None:  # None where no gradient is asked of b (hessian's argnums=0)
                db += da * a
            da *= b

        return back

    def f(a, b):
        scale_(a, b)
        return (a * a).sum()

    a, b = np.array([1.0, 2.0]), np.array([3.0, 0.5])
    mutad.check_grads(f, a, b, order=2)
    np.testing.assert_allclose(mutad.hessian(f, a, b), np.diag(2 * b * b))

    # Regression: inside an enclosing differentiation, hvp's own fallback (the refusal of
    # forward mode caught) was taken for the program going past a refusal, and raised.
    def column_sums(v):
        return mutad.hvp(f, (a, b), (v, np.zeros(2)))[0].sum()

    v = np.array([1.0, -1.0])
    np.testing.assert_allclose(mutad.gradient(column_sums, v)[0], (2 * b * b))
    np.testing.assert_array_equal(v, [1.0, -1.0])


# Nested gradients through every family of rules, with in-place updates in both levels ----------


def _scans_and_scatters(x, w):
    u = x.copy()
    u[1:-1] += 0.1 * (u[2:] - 2.0 * u[1:-1] + u[:-2])   # slice assignment
    np.add.at(u, [0, 0, 3], w[:3] * u[1:4])              # repeated indices add twice
    s = np.sort(u)                                       # a gather through argsort
    c = np.cumsum(s * w)
    u[::2] = c[::2] ** 2                                 # a strided write over the sorted input
    return (np.sin(c) * s).sum() + np.prod(u[:3]) + (u * u).sum()


def _gathers_and_writes(a, v):
    m = a.reshape(3, 3).copy()
    d = np.diagonal(m).copy()
    np.put(m, [1, 5], v[:2] * d[:2])
    np.copyto(m[2], np.interp(m[2], [-2.0, 0.0, 2.0], v))
    p = np.pad(m, 1, mode="reflect")
    t = np.take_along_axis(p, np.argsort(p, axis=1), 1)
    r = np.repeat(np.diff(t, axis=0), [1, 2, 1, 1], axis=0)
    chosen = np.select([r[:, 0] > 0], [r[:, 1]], 0.5) * np.choose([0, 1, 1, 0, 1], [r[:, 2], r[:, 3]])
    return (np.var(r, axis=1) * chosen).sum() + np.sin(np.diag(np.diag(d))).sum()


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("inner", [_scans_and_scatters, _gathers_and_writes])
def test_gradient_of_a_gradient_through_rules_of_every_family(inner, policy):
    def outer(x, w):
        gx, gw = gradient(inner, x, w, policy=policy)
        gx[1:3] *= np.tanh(gw[:2])   # the outer function updates the inner gradient
        return (gx * gx).sum() + np.max(gw)

    rng = np.random.default_rng(3)
    x, w = rng.uniform(-1.5, 1.5, 9 if inner is _gathers_and_writes else 6), rng.standard_normal(
        3 if inner is _gathers_and_writes else 6)
    before = [x.tobytes(), w.tobytes()]
    mutad.check_grads(inner, x, w, policy=policy, order=2)
    mutad.check_grads(outer, x, w, policy=policy)   # outer's gradient: second derivatives
    hessian_row = gradient(outer, x, w, policy=policy)
    assert all(np.all(np.isfinite(g)) for g in hessian_row)
    assert [x.tobytes(), w.tobytes()] == before


def test_derivatives_of_float_arguments_are_floats():
    """As gradient gives a float for a float argument."""
    assert mutad.jacobian(lambda x: x * x, 2.0) == 4.0
    assert mutad.hessian(lambda x, y: x * x * y, 2.0, 3.0, argnums=(0, 1)) == (
        (6.0, 4.0), (4.0, 0.0))
    assert isinstance(mutad.hessian(lambda x: x ** 3, 2.0), float)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_second_derivatives_with_arguments_that_are_overlapping_views(policy):
    """Every order of nesting follows the aliasing: one buffer, views of it in each level."""
    base = np.random.default_rng(0).uniform(-1.0, 1.0, 16).reshape(4, 4)
    before = base.tobytes()

    def f(a, b):
        a *= b
        b[...] = np.sin(b)
        return (a * a).sum() + (b * a).sum()

    mutad.check_grads(f, base[:3, :3], base[1:, 1:].T, policy=policy, order=2)
    H = mutad.hessian(f, base[:3, :3], base[1:, 1:], argnums=(0, 1))
    np.testing.assert_allclose(H[0][1], np.moveaxis(H[1][0], (0, 1), (2, 3)), rtol=1e-10)
    assert base.tobytes() == before


def test_a_cotangent_an_outer_level_froze_is_not_reused_in_place():
    """Nested, the inner pullback of `a0 = a1 - a0` hands its cotangent to an outer-traced
    shadow (the outer tape keeps it, read-only, for its own restoration) before computing the
    other input's cotangent, which must then go to new memory."""
    rng = np.random.default_rng(0)

    def f(a0, a1):
        np.subtract(a1[0:1, 0:1], a0[0:1, 0:1], out=a0[0:1, 0:1])
        np.sin(a1[0:1, 0:1], out=a1[0:1, 0:1])
        return a0, a1

    mutad.check_grads(f, rng.uniform(-1, 1, (2, 2)), rng.uniform(-1, 1, (2, 2)), order=2)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_second_derivatives_through_a_write_into_a_reshape_that_copies(policy, monkeypatch):
    """Regression: the outer replay took ``v`` (a view of the copy ``np.reshape`` makes of an
    F-ordered array) for gone once the program dropped it, though other views of that copy
    kept its memory, and recomputed it from its recipe (reading ``a`` doubled) where the inner
    differentiation had written it since."""
    monkeypatch.setattr(mutad.engines.recompute, "SMALL", 0)  # these small temporaries recomputed too

    def f(a):
        v = a.reshape(3, 2)
        a *= 2.0
        np.sin(v[:, 1], out=v[:, 1])
        return v

    a = np.asfortranarray(np.linspace(-1, 1, 6).reshape(2, 3))
    mutad.check_grads(f, a, policy=policy, order=2)


# ----------------------------------------------------------------------------------------------
# Every nesting, with the inner level's primal and seed (a tangent, or a pullback's cotangent)
# made outside every level, inside the outer one, or from the outer one's variable


MODES = ("forward", "reverse")
MADE = ("outside", "inside", "dependent")
X0 = np.array([1.0, 2.0])    # made before any differentiation starts
T0 = np.array([1.0, -1.0])
C0 = np.array(1.5)           # a cotangent of a scalar output


def derivative(mode, f, primal, seed):
    """The derivative of ``f`` at ``primal`` along ``seed`` (forward) or of ``seed * f``
    (reverse, through mutad.pullback), reduced to a scalar."""
    if mode == "forward":
        return jvp(f, (primal,), (seed,))[1]
    _, back = mutad.pullback(f, primal)
    d, = back(seed)
    return d if np.ndim(d) == 0 else d.sum()


def made(how, outside, inside, w):
    """``outside`` (an array made before any differentiation), a new array of the same
    values made inside the level whose variable is ``w``, or one that depends on ``w``."""
    if how == "outside":
        return outside
    value = np.array(outside)  # allocated inside: an array of every running level
    if isinstance(outside, float):
        value = value[()] * 1.0
    return value * w[0] if how == "dependent" else value


def pure(p, w):  # (NumPy's functions: a Python float primal has no .sum(), no .copy())
    return np.sum(p * p) * w[0]


def in_place(p, w):
    q = np.copy(p)
    q *= w[0]
    q += p
    z = np.zeros(np.shape(p))
    z[...] = q
    return (z * q).sum()


def argument_written(p, w):
    p *= w[0]
    p += w[0]
    return (p * p).sum()


NESTINGS = [pytest.param(outer, inner, primal_made, seed_made, scalar, program,
                         id="-".join((outer, inner, primal_made, seed_made,
                                      "scalar" if scalar else "array", program.__name__)))
            for outer in MODES for inner in MODES for primal_made in MADE for seed_made in MADE
            for scalar in (False, True) for program in (pure, in_place, argument_written)
            if not (scalar and program is argument_written)]  # a float is immutable


@pytest.mark.parametrize("outer, inner, primal_made, seed_made, scalar, program", NESTINGS)
def test_every_nesting_with_primals_and_seeds_made_anywhere(outer, inner, primal_made,
                                                            seed_made, scalar, program):
    """The inner derivative, a function of the outer variable w, differentiated by the outer
    level: against central differences of the inner derivative computed alone. The arrays
    made before (X0, T0, C0) come back bit for bit."""
    primal, tangent = (1.5, 0.5) if scalar else (X0, T0)

    def inner_derivative(w):
        p = made(primal_made, primal, None, w)
        seed = made(seed_made, tangent if inner == "forward" else C0, None, w)
        return derivative(inner, lambda p: program(p, w), p, seed)

    before = X0.tobytes(), T0.tobytes(), C0.tobytes()
    w = np.array([0.7])
    h = 1e-5
    expected = (inner_derivative(w + h) - inner_derivative(w - h)) / (2 * h)
    value = inner_derivative(w)
    if outer == "forward":
        got_value, got = jvp(inner_derivative, (w,), (np.ones(1),))
    else:
        got_value, (got,) = mutad.value_and_gradient(inner_derivative, w)
        got = got[0]
    assert got_value == pytest.approx(value, rel=1e-14)
    assert got == pytest.approx(expected, rel=1e-7)
    assert (X0.tobytes(), T0.tobytes(), C0.tobytes()) == before


@pytest.mark.parametrize("seed_made", ["outside", "outermost", "middle"])
@pytest.mark.parametrize("primal_made", ["outside", "outermost", "middle"])
@pytest.mark.parametrize("modes", [(a, b, c) for a in MODES for b in MODES for c in MODES],
                         ids="-".join)
def test_three_levels_with_primals_and_seeds_of_any_level(modes, primal_made, seed_made):
    """d/du of d/dw of the inner derivative of g(p) = (p * p).sum() * w * u, the inner primal
    and seed made before everything, from the outermost variable u or from the middle one w."""
    first, second, third = modes

    def pick(how, outside, u, w):
        return outside if how == "outside" else outside * (u if how == "outermost" else w)[0]

    def innermost(u, w):
        p = pick(primal_made, X0, u, w)
        seed = pick(seed_made, T0 if third == "forward" else C0, u, w)
        return derivative(third, lambda p: (p * p).sum() * w[0] * u[0], p, seed)

    def middle(u):
        w = np.array([0.7])
        return derivative(second, lambda w: innermost(u, w), w,
                          np.ones(1) if second == "forward" else np.array(1.0))

    before = X0.tobytes(), T0.tobytes(), C0.tobytes()
    u = np.array([1.3])
    h = 1e-5
    expected = (middle(u + h) - middle(u - h)) / (2 * h)
    got = derivative(first, middle, u, np.ones(1) if first == "forward" else np.array(1.0))
    assert got == pytest.approx(expected, rel=1e-7)
    assert (X0.tobytes(), T0.tobytes(), C0.tobytes()) == before


def test_a_jvp_inside_a_jvp_of_a_primal_made_before_both():
    """The reproducer: the inner primal made before the outer jvp, the inner tangent inside it."""
    def outer(w):
        return jvp(lambda p: (p * p).sum() * w[0], (X0,), (np.eye(2)[0],))[1]

    assert jvp(outer, (np.ones(1),), (np.ones(1),)) == (2.0, 2.0)
