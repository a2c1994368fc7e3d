"""mutad.linalg: in-place routines whose reverse pass restores their inputs, proven by
mutad.testing.check_rule (finite differences, accumulation, restoration, aliasing)."""

import numpy as np
import pytest
import scipy.linalg

import mutad
import mutad.linalg as linalg
from mutad.errors import NotPositiveDefiniteError
from mutad.linalg import cholesky_, ldiv_, lu_factor_, solve_triangular_
from mutad.testing import check_rule

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


def test_writing_into_an_untraced_right_hand_side_is_refused(rng):
    A = positive_definite(rng, 3)
    with pytest.raises(mutad.MutadError, match="not tracing"):
        mutad.gradient(lambda A: ldiv_(cholesky_(A), np.ones(3)).sum(), A)


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
