"""Gathers (``x[idx]``, ``x[mask]``) compiled into a replay's blocks where an index names an
element more than once (a mesh's edges, a neighbour list: each repeat adds its share back,
``Shadows.add_at``), where they gather from a region (``x[1:][idx]``) and where elements of
the source share memory (``np.broadcast_to``). Replayed calls against traced ones, bit for bit
(values, gradients, warnings, floating-point events) with the caller's arrays unchanged, on
inputs that flip the products' decisions, and on masks computed from the data whose pattern
changes from call to call with the same count of elements taken, or another count (which
records a program of its own)."""

import collections

import numpy as np
import pytest

import mutad
from mutad.engines import blocks, replay
from test_replay_broadcasts import flipped
from test_replay_stretches import MODES, replayed_like_traced

EDGES = np.array([[0, 1], [1, 2], [2, 0], [0, 3], [3, 3], [4, 1]])


def mesh(x, w):
    """Edge differences of a mesh (each node on several edges: repeated indices)."""
    d = x[EDGES[:, 1]] - x[EDGES[:, 0]]
    e = np.sum(w[:len(EDGES)] * d * d)
    y = x[[0, 0, 2, 2, 2]] * w[:5]
    return e + np.sum(np.tanh(y))


def regions(x, w):
    """Gathers from regions of the arguments: an integer index, repeated, and a mask."""
    y = x[1:][[0, 2, 2]] * w[1:4]
    z = w[::2][np.array([True, False, True])] * x[:2]
    return np.sum(y * y) + np.sum(np.sin(z))


def masked(x, w):
    """A mask computed from the data: which elements it takes changes from call to call."""
    m = x > 0.0
    y = w[m] * x[m]
    return np.sum(y * y) + np.sum(x[x < 1.0] * 0.5)


def shared_memory(x, w):
    """Elements taken from a view whose elements share memory (each takes its share)."""
    b = np.broadcast_to(x[:3], (2, 3))
    y = b[[0, 1, 1], [2, 2, 0]] * w[:3]
    return np.sum(y * y)


PROGRAMS = {mesh: (5, 6), regions: (4, 5), masked: (6, 6), shared_memory: (5, 5)}


def _calls(f, dtype):
    rng = np.random.default_rng(len(f.__name__))
    x, w = (rng.standard_normal(n).astype(dtype) for n in PROGRAMS[f])
    if f is not masked:
        return flipped(x, w)
    x = np.array([0.5, -1.0, 2.0, -0.5, 0.25, 3.0], dtype)
    # the same count of elements taken, others; then another count
    return flipped(x, w, [(x[::-1].copy(), w), (np.roll(x, 1), w[::-1].copy()), (-x, w)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["default", "all-ignore"])
@pytest.mark.parametrize("f", list(PROGRAMS), ids=lambda f: f.__name__)
def test_a_gather_is_replayed_with_the_traced_bits(f, dtype, mode, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(f, _calls(f, dtype), MODES[mode], capfd)


@pytest.mark.parametrize("f", [mesh, regions, shared_memory], ids=lambda f: f.__name__)
def test_the_gathers_write_their_own_lines_in_a_block(f):
    """Not a test that passes trivially: every gather runs in a compiled block as lines of
    its own (before, a repeated index or a region's gather ended its block's run and recorded
    the engine's record)."""
    args = _calls(f, np.float64)[0]
    g = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        g(*args)
    (program,) = g.programs.values()
    inside = [step for block in program.steps if type(block) is blocks.Block
              for step in block.steps if type(step) is replay.Gather]
    outside = [step for step in program.steps if type(step) is replay.Gather]
    assert inside and not outside
    assert any(step.repeats for step in inside)
