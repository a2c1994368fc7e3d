"""mutad.linalg: in-place routines whose reverse pass restores their inputs, proven by
mutad.testing.check_rule (finite differences, accumulation, restoration, aliasing)."""

import numpy as np
import pytest
import scipy.linalg

import mutad
import mutad.linalg.inplace as linalg
from mutad.errors import NotPositiveDefiniteError
from mutad.linalg import cholesky_, ldiv_, lu_factor_, solve_triangular_
from mutad.testing import check_jvp, check_rule, directional_fd
from cases import case_id, normal as normal_sampler
from rule_checks import assert_tangent, dominant, forward_case, spd, split_tangents

ORDERS = ["C", "F"]


def positive_definite(rng, n, order="C"):
    B = rng.standard_normal((n, n))
    return np.array(B @ B.T + n * np.eye(n), order=order)


def well_conditioned(rng, n, order="C"):
    return np.array(rng.standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n), order=order)


def right_hand_sides(rng, n, order):
    return [rng.standard_normal(n), np.array(rng.standard_normal((n, 3)), order=order)]


@pytest.mark.parametrize("order", ORDERS)
def test_cholesky_rule(rng, order):
    check_rule(linalg._cholesky_, positive_definite(rng, 7, order), symmetric=(0,))


@pytest.mark.parametrize("order", ORDERS)
def test_cholesky_solve_rule(rng, order):
    L = positive_definite(rng, 7, order)
    cholesky_(L)
    for b in right_hand_sides(rng, 7, order):
        check_rule(linalg._cholesky_solve_, L, b)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_rule(rng, order, lower, transpose, unit):
    T = np.tril(rng.standard_normal((6, 6))) + 4 * np.eye(6)
    T = np.array(T if lower else T.T, order=order)
    T[np.triu_indices(6, 1) if lower else np.tril_indices(6, -1)] = 9.0  # never read
    for b in right_hand_sides(rng, 6, order):
        check_rule(linalg._solve_triangular_, T, b, lower, transpose, unit)


@pytest.mark.parametrize("order", ORDERS)
def test_lu_factor_and_solve_rules(rng, order):
    A = well_conditioned(rng, 6, order)
    check_rule(linalg._lu_factor_, A)
    F = lu_factor_(A.copy(order="K"))
    for b in right_hand_sides(rng, 6, order):
        check_rule(linalg._lu_solve_, F.packed, F.pivots, b)


@pytest.mark.parametrize("order", ORDERS)
def test_general_solve_rule(rng, order):
    A = well_conditioned(rng, 6, order)
    for b in right_hand_sides(rng, 6, order):
        check_rule(linalg._general_solve_, A, b)


def test_plain_arrays_agree_with_scipy(rng):
    A = positive_definite(rng, 5)
    original = A.copy()
    F = cholesky_(A)
    assert F.L is A and np.allclose(A, scipy.linalg.cholesky(original, lower=True))
    b = rng.standard_normal(5)
    expected = scipy.linalg.solve(original, b)
    assert ldiv_(F, b) is b and np.allclose(b, expected)
    M = well_conditioned(rng, 5)
    c = rng.standard_normal((5, 2))
    assert np.allclose(ldiv_(M.copy(), c.copy()), np.linalg.solve(M, c))
    assert np.allclose(ldiv_(lu_factor_(M.copy()), c.copy()), np.linalg.solve(M, c))
    T = np.triu(M)
    assert np.allclose(solve_triangular_(T, c.copy(), trans=1),
                       scipy.linalg.solve_triangular(T, c, trans=1))


@pytest.mark.parametrize("order", ORDERS)
def test_not_positive_definite_leaves_the_matrix_as_it_was(order):
    A = np.array([[2.0, 1.0, 3.0], [1.0, 2.0, 1.0], [3.0, 1.0, 2.0]], order=order)
    before = A.tobytes()
    with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
        cholesky_(A)
    assert A.tobytes() == before
    with pytest.raises(np.linalg.LinAlgError):
        mutad.gradient(lambda A: cholesky_(A).L.sum(), A)
    assert A.tobytes() == before
    with pytest.raises(NotPositiveDefiniteError):  # nested: the dispatching equivalent
        mutad.gradient(lambda A: mutad.gradient(lambda A: cholesky_(A).L.sum(), A)[0].sum(), A)
    assert A.tobytes() == before


def test_in_place_program_through_factor_and_solves(rng):
    A, u = positive_definite(rng, 6), rng.standard_normal(6)

    def implicit_steps(A, u):
        F = cholesky_(A)
        for _ in range(5):
            ldiv_(F, u)
            u *= 1.5
        return np.sin(u)

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(implicit_steps, A, u, policy=policy, symmetric=(0,))
    restored = mutad.gradient(lambda A, u: implicit_steps(A, u).sum(), A, u)
    checkpointed = mutad.gradient(lambda A, u: implicit_steps(A, u).sum(), A, u,
                                  policy="checkpoint")
    for r, c in zip(restored, checkpointed, strict=True):
        assert np.max(np.abs(r - c)) <= 1e-10 * np.max(np.abs(c))


def test_the_factor_of_a_traced_matrix_shares_its_memory(rng):
    def f(A):
        F = cholesky_(A)
        assert F.L is A
        return (A * A).sum()

    mutad.check_grads(f, positive_definite(rng, 4), symmetric=(0,))


def test_writing_into_a_right_hand_side_allocated_before_the_gradient_is_followed(rng):
    """A right-hand side made before the call, reached by a closure, that the solve writes
    into: followed as an argument outside argnums would be, and left holding what NumPy's run
    of the function leaves in it (the solution), as plain values; the argument comes back."""
    A, b = positive_definite(rng, 3), np.ones(3)
    before = A.tobytes()
    expected = mutad.gradient(lambda A: ldiv_(cholesky_(A), np.ones(3)).sum(), A)[0]
    got = mutad.gradient(lambda A: ldiv_(cholesky_(A), b).sum(), A)[0]
    assert got.tobytes() == expected.tobytes()
    numpys = np.ones(3)
    ldiv_(cholesky_(A.copy()), numpys)
    assert type(b) is np.ndarray and b.tobytes() == numpys.tobytes()
    assert A.tobytes() == before


SOLVES = {  # b ← F⁻¹ b for each kind of factor, the matrix first
    "cholesky": lambda A, b: ldiv_(cholesky_(A), b),
    "lu": lambda A, b: ldiv_(lu_factor_(A), b),
    "general": lambda A, b: ldiv_(A, b),
    "triangular": lambda A, b: solve_triangular_(A, b, lower=True),
}


@pytest.mark.parametrize("name", list(SOLVES))
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_right_hand_side_outside_argnums_that_the_solve_overwrites(rng, name, policy):
    """b outside argnums, overwritten by the solution and read again: the gradient in A is the
    one with every argument differentiated and with b made inside f, traced and replayed, and
    finite differences' along a symmetric direction; the caller's arrays keep their bytes."""
    solve = SOLVES[name]

    def f(A, b):
        x = solve(A, b)
        return (x * b).sum() + np.sin(b).sum()

    A, b = positive_definite(rng, 3), np.linspace(0.5, 1.5, 3)
    before = A.tobytes(), b.tobytes()
    alone = mutad.gradient(f, A, b, argnums=0, policy=policy)
    every = mutad.gradient(f, A, b, policy=policy)[0]
    inside = mutad.gradient(lambda A: f(A, np.linspace(0.5, 1.5, 3)), A, policy=policy)[0]
    replayed = mutad.grad(f, policy=policy, replay=True)
    for _ in range(3):
        assert replayed(A, b).tobytes() == alone.tobytes()
    assert alone.tobytes() == every.tobytes() == inside.tobytes()
    assert (A.tobytes(), b.tobytes()) == before
    D = rng.standard_normal((3, 3))
    D = D + D.T
    fd = directional_fd(f, (A, b), (D, None))
    assert abs(np.sum(alone * D) - fd) <= 1e-7 * max(1.0, abs(fd))


@pytest.mark.parametrize("name", list(SOLVES))
@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_an_integer_right_hand_side_beside_differentiated_values_is_refused(rng, name, dtype):
    """The solution cast into an integer b is truncated, so the reverse pass could not restore
    b from it: refused by name, in reverse and forward mode, b left as it was. Outside a
    differentiation b takes the cast solution, as NumPy's b[...] = x would."""
    solve = SOLVES[name]
    A = positive_definite(rng, 3)
    b = np.ones(3, dtype)
    before = A.tobytes(), b.tobytes()
    calls = [lambda: mutad.gradient(lambda A, b: solve(A, b).sum(), A, b, argnums=0),
             lambda: mutad.gradient(lambda A, b: solve(A, b).sum(), A, b, argnums=0,
                                    policy="checkpoint"),
             lambda: mutad.jvp(lambda A: solve(A, b).sum(), (A,), (np.eye(3),))]
    for call in calls:
        with pytest.raises(mutad.errors.UnsupportedArrayError, match="right-hand side b of dtype"):
            call()
        assert (A.tobytes(), b.tobytes()) == before
    plain = np.ones(3, dtype)
    solve(A.copy(), plain)
    assert plain.dtype == dtype


def test_a_right_hand_side_allocated_inside_is_followed(rng):
    def f(A):
        b = np.ones(3)
        b[0] = 2.0
        return (ldiv_(cholesky_(A), b) ** 2).sum()

    mutad.check_grads(f, positive_definite(rng, 3), symmetric=(0,))


@pytest.mark.parametrize("routine", ["cholesky_", "cholesky ldiv_", "lu_factor_", "lu ldiv_",
                                     "solve_triangular_", "general ldiv_"])
def test_restoration_error_at_size_500(rng, routine):
    """The worst relative error of the reverse pass's restoration, well-conditioned n = 500."""
    n = 500
    A, b = positive_definite(rng, n), rng.standard_normal(n)
    if routine == "cholesky_":
        error = check_rule(linalg._cholesky_, A, symmetric=(0,))
    elif routine == "cholesky ldiv_":
        cholesky_(A)
        error = check_rule(linalg._cholesky_solve_, A, b)
    elif routine == "lu_factor_":
        error = check_rule(linalg._lu_factor_, well_conditioned(rng, n))
    elif routine == "lu ldiv_":
        F = lu_factor_(well_conditioned(rng, n))
        error = check_rule(linalg._lu_solve_, F.packed, F.pivots, b)
    elif routine == "solve_triangular_":
        error = check_rule(linalg._solve_triangular_, np.linalg.cholesky(A), b, True, False, False)
    else:
        error = check_rule(linalg._general_solve_, well_conditioned(rng, n), b)
    print(f"{routine}: worst relative restoration error {error:.2e}")
    assert error < 1e-12


def test_long_chains_of_dissipative_solves_stay_accurate():
    # Undoing u <- A^-1 u by u <- A u multiplies the error already in u by up to cond(A):
    # after 200 steps with cond(A) near 4 that is 4^200. The tape checkpoints often enough.
    n = 40
    K = (2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)) * 0.75
    u0 = np.sin(np.linspace(0.1, 3.0, n)) + 0.1 * np.cos(np.arange(n) ** 2)

    def f(kappa, u):
        F = cholesky_(np.eye(n, like=u) + kappa * K)
        for _ in range(200):
            ldiv_(F, u)
        return (u * u).sum()

    restored = mutad.gradient(f, 1.0, u0)
    checkpointed = mutad.gradient(f, 1.0, u0, policy="checkpoint")
    assert abs(restored[0] - checkpointed[0]) <= 1e-10 * abs(checkpointed[0])
    assert np.max(np.abs(restored[1] - checkpointed[1])) <= 1e-10 * np.max(np.abs(checkpointed[1]))


# ----------------------------------------------------------------------------------------------
# Nested reverse mode: each routine inside a gradient that is itself differentiated


def sine_of(routine, *written):
    """A program that calls ``routine`` on copies of its arguments and returns the sine of the
    arrays at positions ``written`` (the sine makes the cotangents reaching the routine depend
    on the point, as they do in programs)."""

    def program(*args):
        copies = [a.copy() for a in args]
        routine(*copies)
        return tuple(np.sin(copies[i]) for i in written)

    return program


def factor_then_solve(factorise):
    def routine(A, b):
        ldiv_(factorise(A), b)

    return routine


@pytest.mark.parametrize("order", ORDERS)
def test_second_derivatives_of_each_routine(rng, order):
    """check_grads(order=2) differentiates each routine twice: reverse over forward (hvp) and
    nested reverse (a gradient of a gradient, the routine running on arrays the outer
    differentiation traces)."""
    S, M = positive_definite(rng, 4, order), well_conditioned(rng, 4, order)
    T = np.array(np.tril(M), order=order)
    P = np.array(np.roll(M, 1, axis=0), order=order)  # LU pivots: a cyclic permutation
    programs = [
        (sine_of(cholesky_, 0), (S,), (0,)),
        (sine_of(factor_then_solve(cholesky_), 0, 1), (S, rng.standard_normal(4)), (0,)),
        (sine_of(lu_factor_, 0), (P,), ()),
        (sine_of(factor_then_solve(lu_factor_), 0, 1),
         (P, np.array(rng.standard_normal((4, 2)), order=order)), ()),
        (sine_of(ldiv_, 1), (M, rng.standard_normal(4)), ()),
    ] + [
        (sine_of(lambda T, b, lower=lower, trans=trans, unit=unit:
                 solve_triangular_(T if lower else T.T, b, lower, trans, unit), 1),
         (T, np.array(rng.standard_normal((4, 2)), order=order)), ())
        for lower, trans, unit in [(True, 0, False), (False, 1, True)]
    ]
    for program, args, symmetric in programs:
        for policy in ("restore", "checkpoint"):
            mutad.check_grads(program, *args, order=2, policy=policy, symmetric=symmetric)


def gaussian_log_likelihood(mean, S, data):
    """log N(data | mean, S) up to a constant, with S factored and solved with in place: S
    holds L while the program runs."""
    F = cholesky_(S)
    r = (data - mean).T.copy()
    ldiv_(F, r)  # r <- S⁻¹ (x - mean)
    # log det S = 2 Σ log L_ii; the diagonal read with einsum, whose pullback nests (that of
    # np.diagonal, in rules/shape.py, does not yet)
    return -0.5 * ((data - mean).T * r).sum() - len(data) * np.log(np.einsum("ii->i", S)).sum()


def score_norms(log_likelihood, *data):
    """A function of the parameters through the gradient of ``log_likelihood``, which mutates
    the parameters in place while it runs: differentiating it is nested reverse mode."""

    def f(*parameters):
        scores = mutad.gradient(log_likelihood, *parameters, *data)[:len(parameters)]
        return sum((g * g).sum() for g in scores) + np.sin(scores[0]).sum()

    return f


def lu_residual(A, b):
    F = lu_factor_(A)
    ldiv_(F, b)  # b <- A⁻¹ b
    return np.cos(b).sum()


def general_residual(A, b):
    ldiv_(A, b)
    return np.cos(b).sum()


def triangular_residual(T, b):
    solve_triangular_(T, b, lower=True)
    solve_triangular_(T, b, lower=True, trans=1)
    return np.cos(b).sum()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name", ["cholesky", "lu", "general", "triangular"])
def test_gradient_of_a_function_of_an_in_place_gradient(rng, name, order):
    n = 3
    if name == "cholesky":
        data = rng.standard_normal((5, n))
        f = score_norms(gaussian_log_likelihood, data)
        args, symmetric = (rng.standard_normal(n), positive_definite(rng, n, order)), (1,)
    else:
        inner = {"lu": lu_residual, "general": general_residual,
                 "triangular": triangular_residual}[name]
        f = score_norms(inner)
        A = well_conditioned(rng, n, order)
        A = np.tril(A) if name == "triangular" else np.roll(A, 1, axis=0)  # LU pivots
        args, symmetric = (np.array(A, order=order),
                           np.array(rng.standard_normal((n, 2)), order=order)), ()
    before = [a.tobytes() for a in args]
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *args, policy=policy, symmetric=symmetric)
        mutad.gradient(f, *args, policy=policy)
        assert [a.tobytes() for a in args] == before  # the caller's arrays, bit for bit

# ----------------------------------------------------------------------------------------------
# Forward mode: each in-place routine updates its argument's tangent in place beside the primal

def _like(x, original):
    """``x`` laid out as ``original`` (the in-place routines work on the memory as it is)."""
    if not isinstance(original, np.ndarray):
        return x
    out = np.empty_like(original)
    out[...] = x
    return out


def check_inplace(routine, args, tangents, written):
    """``routine.forward_rule`` overwrites argument ``written`` as ``routine`` does and its
    tangent, in place, with the finite differences of the routine along ``tangents``."""
    expected = [_like(a, a) for a in args]
    routine(*expected)

    def f(*xs):
        xs = [_like(x, a) for x, a in zip(xs, args, strict=True)]
        routine(*xs)
        return xs[written]

    expected_tangent = directional_fd(f, args, tangents, step=1e-3)
    result = routine.forward_rule(tangents, *args)
    assert (result[0] if isinstance(result, tuple) else result) is args[written]
    np.testing.assert_array_equal(args[written], expected[written])
    assert_tangent(tangents[written], expected_tangent)


@pytest.mark.parametrize("order", ORDERS)
def test_forward_rule_of_cholesky_inplace_overwrites_the_tangent_by_the_factor_tangent(rng, order):
    from mutad.linalg.inplace import _cholesky_

    A = np.array(spd(5, 5)(rng), order=order)
    dA = np.array(split_tangents([A], rng, symmetric=(0,))[1][0], order=order)
    check_inplace(_cholesky_, [A], [dA], 0)
    assert not np.any(np.triu(dA, 1))  # L's tangent is lower triangular, as L is


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("columns", [(), (3,)])
def test_forward_rule_of_cholesky_solve_inplace(rng, order, columns):
    from mutad.linalg.inplace import _cholesky_solve_, cholesky_

    L = cholesky_(np.array(spd(5, 5)(rng), order=order)).L
    b = np.array(rng.standard_normal((5, *columns)), order=order)
    dL, db = np.tril(rng.standard_normal((5, 5))), rng.standard_normal(b.shape)
    check_inplace(_cholesky_solve_, [L, b, 10.0], [dL, db, None], 1)
    # b alone carries a tangent (a constant factor)
    b = rng.standard_normal(5)
    check_inplace(_cholesky_solve_, [L, b], [None, rng.standard_normal(5)], 1)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("lower, transpose, unit",
                         [(True, False, False), (False, True, False), (True, True, True),
                          (False, False, True)])
def test_solve_triangular_inplace(rng, order, lower, transpose, unit):
    from mutad.linalg.inplace import _solve_triangular_

    T = np.array(rng.standard_normal((5, 5)) + 10 * np.eye(5), order=order)  # both triangles:
    b = np.array(rng.standard_normal((5, 2)), order=order)                    # one is never read
    dT, db = rng.standard_normal((5, 5)), rng.standard_normal((5, 2))
    check_inplace(_solve_triangular_, [T, b, lower, transpose, unit], [dT, db, None, None, None], 1)


@pytest.mark.parametrize("order", ORDERS)
def test_forward_rule_of_lu_factor_and_solve_inplace(rng, order):
    from mutad.linalg.inplace import _general_solve_, _lu_factor_, _lu_solve_, lu_factor_

    A = np.array(rng.standard_normal((5, 5)), order=order)  # LAPACK pivots
    check_inplace(_lu_factor_, [A.copy(order="K")], [rng.standard_normal((5, 5))], 0)
    F = lu_factor_(A.copy(order="K"))
    for b in (rng.standard_normal(5), np.array(rng.standard_normal((5, 2)), order=order)):
        tangents = [rng.standard_normal((5, 5)), None, rng.standard_normal(b.shape), None]
        check_inplace(_lu_solve_, [F.packed, F.pivots, b.copy(order="K"), 1.0], tangents, 2)
        tangents = [rng.standard_normal((5, 5)), rng.standard_normal(b.shape)]
        check_inplace(_general_solve_, [A, b.copy(order="K")], tangents, 1)


# ----------------------------------------------------------------------------------------------
# Forward mode through mutad.jvp and mutad.hvp

def chol_solve_twice(A, b):
    from mutad.linalg import cholesky_, ldiv_

    F = cholesky_(A)
    ldiv_(F, b)
    ldiv_(F, b)
    return b, A  # A holds L now


def lu_solve_program(A, b):
    from mutad.linalg import ldiv_, lu_factor_

    ldiv_(lu_factor_(A), b)
    return b


def triangular_then_general(T, b):
    from mutad.linalg import ldiv_, solve_triangular_

    solve_triangular_(T, b, lower=True, trans=1)
    return ldiv_(T, b) * 2.0


def numpy_program(a, b):
    return np.linalg.solve(a, b) @ np.linalg.inv(a) + np.linalg.det(a) * np.linalg.norm(b)


def symmetric_program(s):
    w = np.linalg.eigvalsh(s) * np.linalg.slogdet(s)[1] + np.linalg.svd(s, compute_uv=False)
    return w @ np.linalg.cholesky(s)


def scipy_program(a, b):
    from mutad.scipy import linalg as sl

    x = sl.cho_solve(sl.cho_factor(a), b) + sl.lu_solve(sl.lu_factor(a), b, trans=1)
    return sl.expm(0.1 * a) @ x


# fmt: off
FORWARD_PROGRAMS = [
    forward_case("cholesky_-ldiv_-C",  chol_solve_twice,   (spd(5, 5), normal_sampler(5)), symmetric=(0,)),
    forward_case("cholesky_-ldiv_-F",  chol_solve_twice,   (lambda rng: np.asfortranarray(spd(5, 5)(rng)),
                                                    lambda rng: np.asfortranarray(rng.standard_normal((5, 2)))),
                                                   symmetric=(0,)),
    forward_case("lu_factor_-ldiv_",   lu_solve_program,   (normal_sampler(5, 5), normal_sampler(5, 3))),
    forward_case("solve_triangular_",  triangular_then_general, (dominant(4, 4), normal_sampler(4))),
    forward_case("numpy",              numpy_program,      (dominant(4, 4), normal_sampler(4))),
    forward_case("numpy-symmetric",    symmetric_program,  (spd(4, 4),), symmetric=(0,)),
    forward_case("scipy",              scipy_program,      (spd(4, 4), normal_sampler(4)), symmetric=(0,)),
]
# fmt: on


@pytest.mark.parametrize("case", FORWARD_PROGRAMS, ids=case_id)
def test_jvp_of_programs(case, rng):
    args, tangents = split_tangents(case.sample(rng), rng, case.symmetric)
    originals = [a.copy() for a in args]

    def program(*xs):  # on copies laid out as the arguments: the routines work in place
        return case.function(*(_like(x, a) for x, a in zip(xs, args, strict=True)))

    y, dy = mutad.jvp(case.function, args, tangents)
    for a, original in zip(args, originals, strict=True):
        np.testing.assert_array_equal(a, original)  # the caller's arrays are as they were
    expected = program(*args)
    assert_tangent(y, expected, rtol=1e-12)
    assert_tangent(dy, directional_fd(program, args, tangents, step=1e-3))


@pytest.mark.parametrize("case", FORWARD_PROGRAMS, ids=case_id)
def test_hvp_of_programs(case, rng):
    args, tangents = split_tangents(case.sample(rng), rng, case.symmetric)

    def program(*xs):  # hvp and gradient leave the arguments as they were: no copies needed
        out = case.function(*xs)
        out = out[0] if isinstance(out, tuple) else out
        return np.vdot(out, out)

    hv = mutad.hvp(program, args, tangents)
    hv = (hv,) if len(args) == 1 else hv
    expected = directional_fd(lambda *xs: mutad.gradient(program, *xs), args, tangents, step=1e-3)
    assert_tangent(hv, expected, rtol=1e-6)


@pytest.mark.parametrize("case", FORWARD_PROGRAMS, ids=case_id)
def test_programs_pass_check_jvp(case, rng):
    args = case.sample(rng)
    check_jvp(case.function, *args, symmetric=case.symmetric)


def test_jvp_of_jvp_through_inplace_factorisations(rng):
    """Forward over forward: the inner rules run on the outer level's duals, so every tangent
    they compute is differentiated again (second directional derivatives)."""
    from mutad.linalg import cholesky_, ldiv_, lu_factor_
    from mutad.scipy import linalg as sl

    A, b = spd(4, 4)(rng), rng.standard_normal(4)
    v, w = split_tangents([A, A], rng, symmetric=(0, 1))[1]

    def program(A):
        x = np.zeros_like(A[0])
        x[...] = b
        y = np.zeros_like(x)
        y[...] = b
        ldiv_(cholesky_(A.copy()), x)
        ldiv_(lu_factor_(A.copy()), y)
        return sl.expm(0.1 * A) @ (x + y)

    def first(A):
        return mutad.jvp(program, (A,), (v,))[1]

    _, second = mutad.jvp(first, (A,), (w,))
    assert_tangent(second, directional_fd(first, (A,), (w,), step=1e-3))
