"""A compiled block writes the cotangent of subtract's second operand, a real float scalar, as
its negation (``-dy``) where the engine multiplies by -1: the same bits for every number but
a NaN, whose check computes the engine's product again. Each program is replayed on inputs
that repeat (so that its steps are compiled) and on ones that make the cotangents zeros of
either sign, infinities and NaNs, and take the other branch, each call compared with a traced
one bit for bit, with NumPy's value, and the caller's data."""

import numpy as np
import pytest

from test_replay_hunt14 import replayed_like_traced

NAN = np.float64(np.nan)
INF = np.float64(np.inf)


def _differences(x):
    a, b, c = x[0], x[1], x[2]
    d = a - b * c
    e = (c - d) * 2.0  # subtract's -1, then a product by 2: folded as one product
    h = a - 3.0 * c  # the same, the other way round
    return d * a - e + (b - a) * (b - a) + h * h


def _row_of_lu(A):
    # lu's row: dot products of a row with a column, subtracted element by element
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] = (A[i, j] - A[i, :j] @ A[:j, j]) / A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return np.sum(A * A) if A[0, 0] > 0 else np.sum(A)


def _inputs(dtype, values):
    return (np.array(values, dtype=dtype),)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_scalar_difference_gives_the_traced_bits(dtype):
    plain = _inputs(dtype, [1.5, -0.25, 3.0])
    replayed_like_traced(_differences, [plain] * 4 + [
        _inputs(dtype, [0.0, -0.0, 0.0]), _inputs(dtype, [-0.0, 0.0, -0.0]),
        _inputs(dtype, [INF, 1.0, -INF]), _inputs(dtype, [NAN, -NAN, 2.0]),
        _inputs(dtype, [1e38, -1e38, 3e38]), plain, _inputs(dtype, [2.0, -NAN, INF])])


def test_lus_rows_give_the_traced_bits_as_inputs_flip_decisions():
    rng = np.random.default_rng(7)
    A = rng.random((4, 4)) + 4 * np.eye(4)
    negative = -A
    zeros = A.copy()
    zeros[1, :] = -0.0
    infinite, nan = A.copy(), A.copy()
    infinite[2, 1] = np.inf
    nan[3, 0] = -np.nan
    replayed_like_traced(_row_of_lu, [(A,)] * 4 + [
        (negative,), (zeros,), (infinite,), (nan,), (A,), (negative,)])


# The slices a block makes that only its own lines read (lu's rows and columns, each read by a
# dot product) are locals alone, never stored into the program's values; one read by a step
# that runs as itself, or after the block, is stored as before


def _slices_read_again(A):
    total = 0.0
    for i in range(1, 4):
        row, column = A[i, :i], A[:i, i]
        A[i, i] -= row @ column
        total = total + np.linalg.norm(row) * np.sort(column)[-1]  # read again, outside
    return total + (np.sum(A) if A[3, 3] > 0 else np.prod(A[1:, 1:]))


@pytest.mark.parametrize("f", [_row_of_lu, _slices_read_again])
def test_slices_read_by_one_block_alone_give_the_traced_bits(f):
    rng = np.random.default_rng(3)
    A = rng.random((4, 4)) + 4 * np.eye(4)
    flipped = A.copy()
    flipped[3, 3] = -40.0
    odd = A.copy()
    odd[2, :2] = [-0.0, np.inf]
    replayed_like_traced(f, [(A,)] * 4 + [(flipped,), (odd,), (A,), (flipped,), (A,)])
