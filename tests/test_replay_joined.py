"""``np.array([a, b])`` of traced float64 numbers in a replayed program: a join of scalars
(``replay.Function.joined``) written as a line of its compiled block, its reverse pass each
element of the output's cotangent added into its scalar's. Each program is replayed on
inputs that take every path (the output's cotangent a local of the block or the shadows',
a scalar read again after the join or twice in it, zeros, infinities and NaNs), and the
replayed gradients must be the traced ones bit for bit."""

import numpy as np
import pytest

from mutad.engines.blocks import Block
from mutad.engines.replay import Function
from test_replay import replayed_like_traced


def _rotations(x):  # the output read only by the block's elementwise steps: a local
    for _ in range(3):
        a, b = x[0], x[1]
        r = np.array([a * b - a, b - 0.5 * a * a])
        x = x + 0.25 * r
    return np.sum(x * x)


def _through_a_product(x, m):  # read by a matrix product: its cotangent through the shadows
    total = 0.0
    for _ in range(2):
        a, b, c = x[0], x[1], x[2]
        v = np.array([a * c, b + c, a - b])
        x = m @ v + x
        total = total + v @ v
    return total + np.sum(x)


def _repeated(x):  # one scalar twice in the join, and read again after it
    a, b = x[0] * 2.0, x[1] - x[0]
    r = np.array([a, b, a])
    s = np.array([b * a, a / b])
    return np.sum(r * r) + np.sum(s) + a * b


def _returned(x):  # the joined vector is what f returns the sum of, nothing else reads it
    a, b = x[0], x[1]
    return np.sum(np.array([np.sin(a), a * b, np.exp(b)]))


def _finite():
    rng = np.random.default_rng(7)
    return [np.array([0.3, 0.7, -0.2]), rng.standard_normal(3), np.array([-0.0, 1.5, 2.0])]


def _special():
    return [np.array([np.inf, 0.5, 1.0]), np.array([0.0, np.nan, 0.0]),
            np.array([-np.inf, 0.0, -0.0]), np.array([1e308, 1e308, -1e-320])]


def _two(x):
    return x[:2].copy()


M = np.array([[0.5, -1.0, 0.25], [2.0, 0.0, 1.0], [-0.5, 0.75, 0.0]])

PROGRAMS = [
    (lambda x: _rotations(_two(x)), ()),
    (_through_a_product, (M,)),
    (lambda x: _repeated(_two(x)), ()),
    (lambda x: _returned(_two(x)), ()),
]


def _joins(replaying):
    """The joins of scalars the replaying function's programs compiled."""
    return [step for program in replaying.programs.values() if type(program) is not str
            for block in program.steps if type(block) is Block
            for step in block.steps if type(step) is Function and step.joined is not None]


@pytest.mark.parametrize("k", range(len(PROGRAMS)))
def test_joined_scalars_replay_as_traced(k):
    f, rest = PROGRAMS[k]
    assert _joins(replayed_like_traced(f, [(x, *rest) for x in _finite()]))
    # (an infinity or a NaN warns, and a replay whose events differ is traced: silenced, the
    # one program replays them all)
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(f, [(x, *rest) for x in _finite() + _special()],
                                         traced_once=True)
    assert _joins(replaying)


def test_joined_scalars_deopt_as_traced(monkeypatch):
    """A block that leaves its compiled reverse pass (``Block.deopt``) finishes it with each
    step's own ``back``: the join's, as its lines would. (Every block here leaves it at its
    first step back.)"""
    calls = [(x,) for x in _finite() + _special()]
    compiled = Block.__init__

    def leaving(block, steps, *args, **kwargs):
        compiled(block, steps, *args, **kwargs)
        make = block.compile

        def leave_at_once(stretches):
            code, (forward, backward) = make(stretches)
            last = len(block.steps) - 1
            return code, (forward, lambda shadows, kept: block.deopt(
                shadows, kept, last, None, (), ()))
        block.compile = leave_at_once

    monkeypatch.setattr(Block, "__init__", leaving)
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(lambda x: _repeated(_two(x)), calls, traced_once=True)
    assert _joins(replaying)
