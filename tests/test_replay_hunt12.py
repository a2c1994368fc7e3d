"""Replays whose recording took a decision on the values inside a library, which no step
saw: each program's replaying function is called on inputs that change that decision, each
call compared with a traced one, bit for bit, with NumPy's and SciPy's value, and the caller's
data."""

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg

import mutad

from test_replay import program_count, same


def replayed_like_scipy(f, matrices, order="F"):
    """Call ``value_and_grad(f, replay=True)`` on each of ``matrices`` (as arrays of memory
    order ``order``, which SciPy's ``overwrite_a=True`` overwrites), and check each call
    against a traced one and SciPy's value on copies, and that the caller's array is as it
    was."""
    replaying = mutad.value_and_grad(f, replay=True)
    for m in matrices:
        a = np.array(m, order=order)
        got = replaying(a)
        assert same(a, np.array(m, order=order))
        expected = mutad.value_and_grad(f)(np.array(m, order=order))
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(np.array(m, order=order)))
    return replaying


EYE = np.eye(2)
SPD = np.array([[2.0, 1.0], [1.0, 2.0]])
INDEFINITE = np.array([[1.0, 2.0], [2.0, 1.0]])


# ----------------------------------------------------------------------------------------------
# SciPy's overwrite_a=True of a traced array is first asked of SciPy on a copy, which tells
# where SciPy leaves its result. An error SciPy raised there (an indefinite matrix's
# LinAlgError, which f caught) came from no step: the recording went on down f's except
# branch, and every replay took it, with its gradient (tracing's is cho_solve's)


def _cholesky_or_solve(a):
    try:
        c = scipy.linalg.cho_factor(a, overwrite_a=True, check_finite=False)
        return scipy.linalg.cho_solve(c, np.array([1.0, 2.0])).sum()
    except np.linalg.LinAlgError:
        return scipy.linalg.solve(a, np.array([1.0, 2.0])).sum()


def test_what_scipy_raised_overwriting_a_copy_leaves_the_signature_traced():
    replaying = replayed_like_scipy(_cholesky_or_solve, [INDEFINITE, SPD, SPD, INDEFINITE, SPD],
                                    order="C")
    assert "an operation raised LinAlgError while recording" in \
        " ".join(replaying.reasons.values())


# ----------------------------------------------------------------------------------------------
# And it told whether SciPy overwrote the array by its bytes: inv(I)'s result is I, bytes for
# bytes, so the array was left as it was, not written with the inverse (tracing's gradient was
# that of the argument, C for the inverse's -C), and every replay left it so (A's sum for its
# inverse's); solve's LU workspace of I is I, so the call was not refused, and every replay
# left the array unchanged where SciPy leaves the factors


C = np.array([[1.0, 2.0], [3.0, 4.0]])


def _reads_the_inverse_in_place(a):
    scipy.linalg.inv(a, overwrite_a=True)
    return (a * C).sum()


def test_an_inverse_equal_to_its_argument_is_written_into_it():
    value, grad = mutad.value_and_grad(_reads_the_inverse_in_place)(np.asfortranarray(EYE))
    assert value == 5.0 and same(grad, -C)
    replayed_like_scipy(_reads_the_inverse_in_place, [EYE, EYE, SPD, EYE, SPD])


def _solves_then_reads_the_workspace(a):
    x = scipy.linalg.solve(a, np.array([1.0, 2.0]), overwrite_a=True)
    return x.sum() + a.sum()


def test_a_workspace_equal_to_the_argument_is_decided_on_each_call():
    replaying = mutad.value_and_grad(_solves_then_reads_the_workspace, replay=True)
    for m in [EYE, EYE, EYE]:
        assert same(replaying(np.asfortranarray(m))[0], 5.0)
    with pytest.raises(mutad.MutadError, match="overwrite_a=True"):
        replaying(np.asfortranarray(SPD))  # (SciPy's 5.21: tracing refuses the workspace)
    assert "left `a` as it was on these values only" in " ".join(replaying.reasons.values())


def _factors_a_copy_in_place(a):
    lu, piv = scipy.linalg.lu_factor(a, overwrite_a=True)  # (SciPy copies a C-ordered a)
    return scipy.linalg.lu_solve((lu, piv), np.array([1.0, 2.0])).sum() + a.sum()


def test_an_array_scipy_copies_whatever_its_values_is_replayed():
    replaying = replayed_like_scipy(_factors_a_copy_in_place, [EYE, EYE, SPD, EYE], order="C")
    assert program_count(replaying) == 1 and not replaying.reasons


# ----------------------------------------------------------------------------------------------
# A Python number a rule returns, computed from the traced operands, was held by the program
# as the recording's: scipy.linalg.lstsq's rank (a Python int, where np.linalg's is NumPy's)
# was 2 on every replay, SciPy's 1 or 0 for a matrix of lower rank. It is checked again on
# each replay, and a call on which it differs is recorded again


def _solution_and_rank(a):
    x, residues, rank, s = scipy.linalg.lstsq(a, np.array([1.0, 2.0]))
    return x.sum() + rank


def test_a_rank_scipy_returns_is_guarded():
    replayed_like_scipy(_solution_and_rank, [SPD, SPD, np.ones((2, 2)), np.zeros((2, 2)), SPD],
                        order="C")


# ----------------------------------------------------------------------------------------------
# And what a solver found besides its solution on the recording's values, held outside the
# program: quad's error estimate and full_output's counts, lsqr's istop and iteration count,
# were the recording's on every replay (lsqr's 5 iterations where SciPy took 1)


def _integral_and_error(x):
    value, error = scipy.integrate.quad(lambda t: np.sin(x[0] * t) * x[1], 0.0, 1.0)
    return value + error * 1e10


def _integral_and_evaluations(x):
    value, error, info = scipy.integrate.quad(lambda t: np.exp(-x[0] * t) * x[1], 0.0, np.inf,
                                              full_output=1)
    return value + info["neval"]


def _least_squares_iterations(x):
    a = scipy.sparse.diags([x + 3.0], [0])
    solution, stop, iterations = scipy.sparse.linalg.lsqr(a, np.ones(x.size))[:3]
    return solution.sum() + stop + iterations


@pytest.mark.parametrize("f, other", [(_integral_and_error, [30.0, 1.0, 1.0]),
                                      (_integral_and_evaluations, [30.0, 1.0, 1.0]),
                                      (_least_squares_iterations, [1.0, 1.0, 1.0])])
def test_what_a_solver_found_besides_its_solution_is_guarded(f, other):
    first = [0.5, 2.0, 1.5]
    replaying = mutad.value_and_grad(f, replay=True)
    for v in [first, first, other, first, other]:
        got = replaying(np.array(v))
        expected = mutad.value_and_grad(f)(np.array(v))
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(np.array(v)))


# ----------------------------------------------------------------------------------------------
# A callback SciPy's iterative solver calls on each iteration (counting them into a list) ran
# while recording alone: every replay read the recorded count (7.0 for SciPy's 2.0)

DIAGONAL = scipy.sparse.diags([np.arange(1.0, 7.0)], [0], format="csr")


def _solution_and_iterations(b):
    iterations = []
    x, info = scipy.sparse.linalg.cg(DIAGONAL, b, callback=lambda xk: iterations.append(1),
                                     rtol=1e-12)
    return x.sum() + len(iterations)


def test_a_solver_given_a_callback_is_traced():
    replaying = mutad.value_and_grad(_solution_and_iterations, replay=True)
    for b in [np.ones(6), np.ones(6), np.eye(6)[2] * 3.0, np.ones(6)]:
        got = replaying(b.copy())
        expected = mutad.value_and_grad(_solution_and_iterations)(b.copy())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], _solution_and_iterations(b.copy()))
    assert "with a callback" in " ".join(replaying.reasons.values())
