"""An element a compiled block read, and then writes: the write keeps the element as read
(``blocks.Code.elements``) where no line between may have written into memory, and reads it
again where one may have (a write of its row, a view's, a function's), the traced bits
either way."""

import collections
import re

import numpy as np
import pytest

from test_replay import POLICIES, blocks, replayed_like_traced


def rewritten(A):
    """Each element read, then written (``A[i, j] = f(A[i, j], ...)``), nothing between."""
    A = A * 1.0
    for i in range(1, 4):
        for j in range(1, 4):
            A[i, j] = np.sin(A[i, j]) * A[i, j - 1] + A[i - 1, j]
    return np.sum(A * A)


def vector_rewritten(A):
    """A vector's elements read, then each updated in place (heat-scalar's
    ``u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])``): the read's index is the integer,
    the write's a tuple of it, one element either way."""
    u = A[2] * 1.0
    un = u.copy()
    for i in range(1, 4):
        u[i] += 0.25 * (un[i + 1] - 2 * un[i] + un[i - 1])
    return np.sum(u * u)


def row_between(A):
    """The element read, its row written in place (through a view) and read, then the
    element written: what the row's read sees in the reverse pass is the element the write
    kept, put back."""
    A = A * 1.0
    total = 0.0
    for i in range(1, 4):
        a = A[i, 2]
        A[i, :] += 1.0
        total = total + np.sum(np.sin(A[i, :]))
        A[i, 2] = a * A[i, 1]
    return np.sum(A * A) + total


def view_between(A):
    """The element read, a view of its row taken and written, then the element."""
    A = A * 1.0
    for i in range(1, 4):
        a = A[i, 2]
        row = A[i]
        row *= row
        A[i, 2] = a + A[i, 3]
    return np.sum(A * A)


def element_between(A):
    """The element read, then written twice (the second write reads it after the first)."""
    A = A * 1.0
    for i in range(1, 4):
        a = A[i, 2]
        A[i, 2] = np.sin(a)
        A[i, 2] = A[i, 2] * a
    return np.sum(A * A)


def calls():
    rng = np.random.default_rng(5)
    made = [(rng.standard_normal((5, 5)),) for _ in range(4)]
    made[2][0][2, 2] = -0.0
    return made


@pytest.fixture
def templates(monkeypatch):
    """The blocks' compiled sources, of this test alone."""
    from mutad.engines import blocks as blocks_module
    fresh = collections.OrderedDict()
    monkeypatch.setattr(blocks_module, "TEMPLATES", fresh)
    return fresh


KEPT_AS_READ = re.compile(r"\bold\d+ = v\d+\n")
"""A write's line that keeps the element from the local that read it."""


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f", [rewritten, vector_rewritten], ids=lambda f: f.__name__)
def test_an_element_read_then_written_is_kept_as_read(f, policy, templates):
    replaying = replayed_like_traced(f, calls(), policy, traced_once=True)
    assert blocks(replaying)
    assert any(KEPT_AS_READ.search(source) for source in templates)


READ_AGAIN = re.compile(r"\bold\d+ = v\d+\[")
"""A write's line that reads the element again."""


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f, kept", [(row_between, False), (view_between, False),
                                     (element_between, True)])
def test_an_element_written_between_is_read_again(f, kept, policy, templates):
    """(``element_between``'s first write keeps it as ``a`` read it; its second, as the
    step that read it after the first write did.)"""
    replaying = replayed_like_traced(f, calls(), policy, traced_once=True)
    assert blocks(replaying)
    assert any(KEPT_AS_READ.search(source) for source in templates) == kept
    assert any(READ_AGAIN.search(source) for source in templates) != kept
