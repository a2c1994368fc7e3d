"""An element updated by ``A[i, j] -= A[i, :i] @ A[:i, j]`` or ``A[i, j] /= A[j, j]``: the
reverse pass takes the cotangent of the value written where it lies (read, then zeroed), and
the element read before the write gives its own back to where it was taken. A compiled
block's lines then store ``0.0 + g`` over the element rather than zero it and add into it
(``blocks.Code.added_back``), wherever no line between reads or writes the element; and where
``g`` is the cotangent taken, handed on whole (the subtraction's partial is one), they leave
the element as it is, but for a zero (whose sign the sum makes positive) and a NaN.

Replayed calls against traced ones, bit for bit, with the caller's arrays unchanged, on
cotangents that are zeros of either sign, NaNs, infinities and subnormals; and programs where
lines between do add into the element (the rows two products take hold it), the element is
written twice, or the cotangent given back is not the one taken (a scaled update)."""

import re

import numpy as np
import pytest

from mutad.engines import blocks
from test_replay_stretches import MODES, replayed_like_traced

N = 6


def rows(A, W):
    """Doolittle's LU, row by row: the upper triangle's elements hand their cotangents back
    whole, the lower's divided."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return (W * A).sum()


def including(A, W):
    """The rows two products take hold the element written: lines between the cotangent's
    take and its return add into the element (in another order, another sum)."""
    n = A.shape[0]
    for i in range(n):
        for j in range(1, n):
            A[i, j] -= A[i, :j + 1] @ A[:j + 1, j - 1] - A[i, :j + 1] @ A[:j + 1, j]
    return (W * A).sum()


def twice(A, W):
    """Each element written twice, read before each write."""
    n = A.shape[0]
    for i in range(1, n):
        for j in range(n):
            A[i, j] -= A[i - 1, :i] @ A[:i, j]
            A[i, j] -= A[i - 1, :i] @ A[:i, j]
    return (W * A).sum()


def scaled(A, W):
    """The element read again after a product: its cotangent is not the one taken."""
    n = A.shape[0]
    for i in range(1, n):
        for j in range(n):
            A[i, j] = 0.5 * A[i, j] - A[i - 1, :i] @ A[:i, j]
    return (W * A).sum()


def vector(A, W):
    """heat-scalar's update of a vector, ``u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])``:
    the element read with the integer, written with a tuple of it, one element either way,
    whose cotangent the addition hands back whole."""
    u = A[1] * 1.0
    un = u.copy()
    for i in range(1, N - 1):
        u[i] += 0.25 * (un[i + 1] - 2 * un[i] + un[i - 1])
    return (W[1] * u).sum()


def _calls():
    """Weights whose entries are the cotangents taken: ordinary, then zeros of either sign,
    NaN, infinities and the smallest subnormal among them."""
    rng = np.random.default_rng(7)
    A = rng.uniform(0.5, 1.5, (N, N)) + N * np.eye(N)
    calls = [(A, rng.standard_normal((N, N)))]
    for special in ([0.0, -0.0], [-0.0], [np.nan, 1.0], [np.inf, -np.inf, 2.0],
                    [5e-324, -5e-324, -0.0]):
        W = rng.standard_normal((N, N))
        W.flat[rng.permutation(N * N)[:N * 2]] = np.resize(special, N * 2)
        calls.append((A, W))
    return calls


@pytest.mark.parametrize("f", [rows, including, twice, scaled, vector],
                         ids=lambda f: f.__name__)
def test_an_element_handed_back_replays_as_traced(f, capfd):
    replaying = replayed_like_traced(f, _calls(), MODES["all-ignore"], capfd)
    assert len(replaying.traced) == 1  # every call after the first replayed


def test_the_lines_store_the_cotangent_given_back(capfd):
    # (rows' blocks: both forms, the element left as it is and the sum stored)
    blocks.TEMPLATES.clear()
    replaying = replayed_like_traced(rows, _calls()[:2], MODES["all-ignore"], capfd)
    assert len(replaying.traced) == 1
    left = re.compile(r"\n {8}if not \((c[0-9]+) and \1 == \1\):\n {12}t = k[0-9]+ \+ \1\n")
    stored = re.compile(r"\n {8}t = k[0-9]+ \+ c[0-9]+\n {8}s[0-9]+\[k[0-9]+\] = t if t == t")
    assert any(left.search(source) for source in blocks.TEMPLATES)
    assert any(stored.search(source) for source in blocks.TEMPLATES)


def test_a_vectors_element_read_with_the_integer_is_left_as_it_is(capfd):
    blocks.TEMPLATES.clear()
    replaying = replayed_like_traced(vector, _calls()[:2], MODES["all-ignore"], capfd)
    assert len(replaying.traced) == 1
    left = re.compile(r"\n {8}if not \((c[0-9]+) and \1 == \1\):\n {12}t = k[0-9]+ \+ \1\n")
    assert any(left.search(source) for source in blocks.TEMPLATES)
