"""Steps a replay's block runs as they are, their records reversed in their place
(``blocks.Opaque``): the operations the engine records again on each call (``np.add.at``, a
scatter, ``np.copyto``: as many records as it makes on the call), elementwise steps on
complex values and on arrays too large for lines of the block's own, and complex gathers.
Before, each ended its block's run. Replayed calls against traced ones, bit for bit (values,
gradients, warnings, floating-point events) with the caller's arrays unchanged, on inputs
that flip the products' decisions from call to call."""

import collections

import numpy as np
import pytest

import mutad
from mutad.engines import blocks, replay
from test_replay_broadcasts import flipped
from test_replay_stretches import MODES, replayed_like_traced

IDX = np.array([0, 2, 2, 4])


def scatters(x, w):
    """``ufunc.at`` with a repeated index, a scatter, ``copyto`` and an augmented scatter,
    between small elementwise steps."""
    u = x * 1.0
    np.add.at(u, IDX, w[:4] * 2.0)
    v = u * u + 1.0
    v[IDX] = w[1:5] * v[:4]
    np.copyto(u, v * 0.5)
    z = np.zeros(5)
    z[[1, 3]] += u[:2]
    c = np.sin(u) * z + v
    return np.sum(c * c) + np.sum(v)


def complex_values(x, w):
    """Elementwise steps and a gather on complex values, between real ones."""
    u = x * 1.5
    c = u + 1j * w[:5]
    c = c * c - np.exp(1j * u)
    r = np.abs(c[[0, 2, 4]]) * w[:3]
    return np.sum(r * r) + np.sum(u)


def large(x, w):
    """An elementwise step on arrays too large for the block's lines, between small ones."""
    u = x * 1.0
    big = np.outer(u, w)  # (larger than a short array)
    big = np.tanh(big) * 2.0
    s = np.sum(big, axis=0) * w
    return np.sum(s * u[:len(w)])


PROGRAMS = {scatters: (5, 6), complex_values: (5, 6), large: (600, 40)}


def _calls(f, dtype):
    rng = np.random.default_rng(len(f.__name__))
    return flipped(*(rng.standard_normal(n).astype(dtype) for n in PROGRAMS[f]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["default", "all-ignore"])
@pytest.mark.parametrize("f", list(PROGRAMS), ids=lambda f: f.__name__)
def test_a_step_run_as_it_is_in_a_block_is_replayed_with_the_traced_bits(f, dtype, mode,
                                                                          capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(f, _calls(f, dtype), MODES[mode], capfd)


def _program(f):
    args = _calls(f, np.float64)[0]
    g = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        g(*args)
    (program,) = g.programs.values()
    return program


@pytest.mark.parametrize("f, kinds", [(scatters, (replay.Reenter,)),
                                      (complex_values, (replay.Pure, replay.Gather))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_the_steps_run_inside_a_block(f, kinds):
    """Not a test that passes trivially: the steps of these kinds run inside compiled blocks
    (before, each ended its block's run), none left between blocks."""
    program = _program(f)
    opaque = [step.step for block in program.steps if type(block) is blocks.Block
              for step in block.steps if type(step) is blocks.Opaque]
    assert any(type(step) in kinds for step in opaque)
    assert not any(type(step) in kinds and (type(step) is replay.Reenter or not step.lean)
                   for step in program.steps)


def test_a_large_step_stays_between_blocks():
    """A step on large arrays is not run inside a block, whose lines that read its value
    would hold it until the block's forward pass is over: the replay lets it go after its
    last reader, as the traced call does (``replay.Free``)."""
    program = _program(large)
    big = [step for step in program.steps if type(step) is replay.Pure and not step.lean]
    assert big and any(type(step) is blocks.Block for step in program.steps)
