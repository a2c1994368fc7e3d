"""``np.array([a, b])`` of traced float64 numbers in a replayed program: a join
(``replay.Function.joined``) written as a line of its compiled block, its reverse pass each
element of the output's cotangent added into its traced value's; also with the user's
numbers beside them (``np.array([a, 1.0, b])``), nested (``np.array([[a, b], [c, d]])``, a
join of the rows joins made) and with ``dtype=float``. Each program is replayed on inputs that
take every path (the output's cotangent a local of the block or the shadows', a value read
again after the join or twice in it, zeros, infinities and NaNs), and the replayed gradients
must be the traced ones bit for bit."""

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


def _partly_local(x, m):  # one scalar's cotangent a local, the other's and the output's not
    a = x[0] * x[1]  # (read by the join alone)
    b = x[1] + 1.0  # (read by a product too)
    w = m @ np.array([a, b])
    return np.sum(w * w) + np.sum(np.dot(b, x))


def _with_constants(x):  # the user's numbers in the line: Python's, NumPy's, an integer
    a, b = x[0] * x[1], x[1] - 1.0
    r = np.array([a, 1.0, b, 2, np.float32(0.5), np.float64(-3.0), a * b, True])
    return np.sum(r * r * r)


def _matrices(x):  # 2x2 rotations and Jacobians built of scalars, a constant row beside them
    a, b = x[0], x[1]
    c, s = np.cos(a), np.sin(a)
    rotation = np.array([[c, -s], [s, c]])
    jacobian = np.array([[0.0, 1.0], [-b * b, -0.1 * a]])
    ints = np.array([[0, 1], [-a, b]], dtype=float)
    v = rotation @ np.array([a, b]) + jacobian.T @ np.array([1.0, b])
    return np.sum(v * v) + np.sum(ints * jacobian)


def _of_rows(x):  # rows the program made (one of them twice, read again after), deeper nests
    a, b = x[0], x[1]
    r = np.array([a * b, b - a])
    m = np.array([r, 2.0 * r, r])
    cube = np.array([[[a, b]], [[b, 0.5]]])
    return np.sum(m * m) + np.sum(r) + np.sum(cube * cube * a)


def _implicit_euler(x):  # (I - hJ) y1 = y0, J of the state's scalars, three steps
    y = x.copy()
    for _ in range(3):
        p, q = y[0], y[1]
        jac = np.array([[-1.0, q], [-q * p, -2.0]])
        y = np.linalg.solve(np.eye(2) - 0.1 * jac, y)
    return np.sum(y * y)


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
    (lambda x, m: _partly_local(_two(x), m[:2, :2]), (M,)),
    (lambda x: _with_constants(_two(x)), ()),
    (lambda x: _matrices(_two(x)), ()),
    (lambda x: _of_rows(_two(x)), ()),
    (lambda x: _implicit_euler(_two(x)), ()),
]


def _joins(replaying):
    """The joins the replaying function's programs compiled, each one of them: none is left to
    the rule (an ``Opaque`` step of the block)."""
    steps = [getattr(step, "step", step) for program in replaying.programs.values()
             if type(program) is not str for block in program.steps if type(block) is Block
             for step in block.steps]
    joins = [step for step in steps if type(step) is Function and step.rule.__name__ == "stack"]
    assert all(step.joined is not None for step in joins)
    return joins


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


@pytest.mark.parametrize("f", [_repeated, _with_constants, _of_rows])
def test_joined_scalars_deopt_as_traced(monkeypatch, f):
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
        replaying = replayed_like_traced(lambda x: f(_two(x)), calls, traced_once=True)
    assert _joins(replaying)
