"""A region written again and again, ``C[i, :i + 1] += a * A[i, k] * A[:i + 1, k]``: each
write copies the bytes it overwrites and copies them back in the reverse pass. In a compiled
block, where no reverse line between the first write of such a run and a later one reads the
buffer's memory, the later write's copy goes: the first's copy puts back the bytes before the
run, and nothing reads the region until then (``blocks.Code.rewrite``).

Replayed calls against traced ones, bit for bit, with the caller's arrays unchanged: the runs
whose copies go; programs whose lines between the writes read the region (a product of the
row, a write whose pullback reads its target, writes into overlapping regions), where every
copy must stay; and a copy allowance spent in the middle of a run, where some writes are
inverted (an inverse computes back from the bytes the later writes left)."""

import numpy as np
import pytest

import mutad.core.tape
from mutad.engines import blocks
from test_replay_stretches import MODES, replayed_like_traced

N = 7


def rank_updates(C, A):
    """syrk's loop: each row scaled, then updated once per column of ``A``."""
    for i in range(N):
        C[i, :i + 1] *= 1.5
        for k in range(A.shape[1]):
            C[i, :i + 1] += 1.2 * A[i, k] * A[:i + 1, k]
    return (C * C).sum()


def reading_the_row(C, A):
    """A product of the row before each write: its pullback reads the row's bytes."""
    for i in range(N):
        for k in range(A.shape[1]):
            C[i, :] += C[i, :] * A[i, k]
    return (C * C).sum()


def interleaved(C, A):
    """Writes between which a product reads the row, and writes between which nothing
    does: only the second kind's copies go."""
    for i in range(N):
        for k in range(A.shape[1]):
            C[i, :] += A[i, k] * A[:, k]
            C[i, :] += C[i, :] * A[i, k]
    return (C * C).sum()


def scaled_by_traced(C, A):
    """``C[i, :] *= A[i, k]``: the product's pullback reads the row it overwrote."""
    for i in range(N):
        for k in range(A.shape[1]):
            C[i, :] *= A[i, k]
            C[i, :] += A[:, k]
    return (C * C).sum()


def overlapping(C, A):
    """Writes into regions of the row that overlap but differ, after a product that reads
    the row as it was before them."""
    total = 0.0
    for i in range(N):
        total = total + (C[i, :] ** 3).sum()
        for k in range(A.shape[1]):
            C[i, :-1] += A[i, k] * A[:-1, k]
            C[i, 1:] += A[i, k] * A[1:, k]
    return total + (C * C).sum()


def assigned(C, A):
    """A run whose first write is inverted once the copy allowance is spent, and whose
    assignments are copied whatever the allowance: those copies must stay (the inverse
    computes back from the bytes they leave)."""
    total = 0.0
    for i in range(N):
        total = total + (C[i, :] ** 3).sum()
        for k in range(A.shape[1]):
            C[i, :] += A[i, k] * A[:, k]
            C[i, :] = A[:, k] * A[i, k]
    return total + (C * C).sum()


def _calls(scale=1.0):
    rng = np.random.default_rng(11)
    return [(scale * rng.standard_normal((N, N)), rng.standard_normal((N, 5)))
            for _ in range(3)]


def _dropped():
    return sum(source.count(" = None if again") for source in blocks.TEMPLATES)


@pytest.mark.parametrize("f, drops", [(rank_updates, True), (reading_the_row, False),
                                      (interleaved, True),
                                      (scaled_by_traced, False), (overlapping, False)],
                         ids=lambda x: getattr(x, "__name__", ""))
def test_a_rewritten_region_replays_as_traced(f, drops, capfd):
    blocks.TEMPLATES.clear()
    replaying = replayed_like_traced(f, _calls(), MODES["all-ignore"], capfd)
    assert len(replaying.traced) == 1  # every call after the first replayed
    assert (_dropped() > 0) == drops


@pytest.mark.parametrize("f", [rank_updates, assigned], ids=lambda f: f.__name__)
def test_a_run_inverted_once_the_allowance_is_spent(f, monkeypatch, capfd):
    # (room for a few writes' copies: the later writes into a row are inverted)
    monkeypatch.setattr(mutad.core.tape, "SMALL_COPIES", 12 * N * 8)
    blocks.TEMPLATES.clear()
    replaying = replayed_like_traced(f, _calls(1e3), MODES["all-ignore"], capfd)
    assert len(replaying.traced) == 1
    assert _dropped() > 0
