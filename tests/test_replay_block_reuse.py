"""The blocks of a loop write the same lines and differ in their constants: finishing the
lines (NaN checks deferred, stretches written out, negations folded, the source compiled) is
done once and reused by the blocks whose lines, and what finishing reads of their constants
and stretches, are the same (``blocks.Code.factory``).

Programs whose blocks have one structure with constants that flip what finishing decides
(a constant -1, or one whose negation is -1, zero, signed zeros, subnormals, infinities and
NaNs that a product masks, large integers, a -1 beside a -2 as the first of two products),
cotangents shared or not, float32 beside float64, NumPy's scalars beside arrays: replayed
calls bit for bit the traced ones on inputs that flip the replay's decisions, and each
block's generated functions and constants those it gets when finished on its own."""

import collections

import numpy as np
import pytest

import mutad
from mutad.engines import blocks
from test_replay_broadcasts import flipped
from test_replay_stretches import MODES, replayed_like_traced

ITERATIONS = 20
STEPS = 128
"""Each choice of the program is used in about as many steps in a row (a block's)."""
KS = [2.0, 3.0, 1.0, 0.5, -1.0, 2.5, 0.0, 4.0, -0.0, 1.5, 5e-324, 2.0 ** 30, 7, 2 ** 25,
      -1, 1]
"""Numbers of the program, in a cycle whose length is no multiple of a block's iterations."""
MASKED = [2.0, np.inf, 1.0, np.nan, -np.inf, 3.0, -1.0, 0.0, -0.0, np.inf]


def negations(x, y):
    """``a - k * b``: subtract's -1 and ``k``'s product, which finishing folds into one
    product where ``k`` is finite and nonzero (its negation -1 where ``k`` is 1)."""
    u, w = x * 1.0, y * 1.0
    for i in range(ITERATIONS):
        k = KS[i % len(KS)]
        for _ in range(STEPS // 8):
            u = np.sin(u) - k * np.tanh(w)
            w = np.cos(w) - k * np.tanh(u)
    return (u * w).sum()


def minus_ones(x, y):
    """``c * (k * b)``: ``c``'s product, then ``k``'s, which finishing folds into one where
    ``c`` is -1 (not where it is -2, a block that reads otherwise of the same lines)."""
    u, w = x * 1.0, y * 1.0
    for i in range(ITERATIONS):
        c = [-1.0, -2.0, -1.0, 0.5][i % 4]
        for _ in range(STEPS // 8):
            u = np.sin(u) + c * (3.0 * np.tanh(w))
            w = np.cos(w) * 0.5 - u * 0.25
    return (u * w).sum()


def masked(x, y):
    """Infinite and NaN numbers whose products ``fmax`` and ``fmin`` leave out."""
    u, w = x * 1.0, y * 1.0
    for i in range(ITERATIONS):
        k = MASKED[i % len(MASKED)]
        for _ in range(STEPS // 11):
            u = np.sin(u) - np.fmin(np.fmax(k * (w * w + 1.0), -2.0), 2.0)
            w = np.cos(w) * 0.5 - u * 0.25
    return (u + w).sum()


def aliasing(x, y):
    """One cotangent for both operands of a product on some iterations, two on others."""
    u, w = x * 1.0, y * 1.0
    for i in range(ITERATIONS):
        for _ in range(STEPS // 5):
            v = np.tanh(u)
            u = v * v if i % 3 else v * w
            w = np.sin(w) - u * 0.5
    return (u - w).sum()


def dtypes(x, y):
    """float32 values on some iterations, float64 on the others."""
    u, w = x * 1.0, y * 1.0
    for i in range(ITERATIONS):
        for _ in range(STEPS // 9):
            v = u.astype(np.float32) if i % 3 == 0 else u
            u = np.sin(v) * 0.5 - w * 0.25
            w = np.cos(w) - (u * 2.0).astype(np.float64)
    return (u * w).sum(dtype=np.float64)


PROGRAMS = [negations, minus_ones, masked, aliasing, dtypes]


def _calls(f, scalar):
    if scalar:
        return [(np.float64(0.3), np.float64(0.7))] * 3 + [
            (np.float64(-0.0), np.float64(0.7)), (np.float64(0.3), np.float64(np.inf)),
            (np.float64(np.nan), np.float64(0.7)), (np.float64(0.3), np.float64(0.7))]
    rng = np.random.default_rng(len(f.__name__))
    calls = flipped(rng.standard_normal(5), rng.standard_normal(5))
    return calls[:3] + calls[3::4]  # (each flip once, after a call on finite values)


@pytest.mark.parametrize("mode", ["default",
                                  pytest.param("all-ignore", marks=pytest.mark.slow)])
@pytest.mark.parametrize("scalar", [False, True], ids=["arrays", "scalars"])
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_a_reused_finishing_replays_the_traced_bits(f, scalar, mode, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
    replayed_like_traced(f, _calls(f, scalar), MODES[mode], capfd)


class _Forgetting(collections.OrderedDict):
    """A :data:`blocks.FINISHED` that keeps nothing: each block finishes its own lines."""

    def __setitem__(self, key, value):
        pass


def _blocks(f, args):
    g = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        g(*args)
    (program,) = g.programs.values()
    return [step for step in program.steps if type(step) is blocks.Block]


def _same_constant(a, b):
    """Of one type; numbers and arrays bit for bit, but Python's integers (buffer keys, which
    each recording numbers anew, and slots)."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(map(_same_constant, a, b))
    if isinstance(a, (float, complex, np.generic, np.ndarray)):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return True  # (a step, a rule: the recording's own objects)


@pytest.mark.parametrize("scalar", [False, True], ids=["arrays", "scalars"])
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_a_reused_finishing_is_the_blocks_own(f, scalar, monkeypatch):
    """Each block's functions are those of the source it finishes on its own (one template
    per source: the same code objects), its constants the same; and not trivially: blocks
    reused another's finishing, and, for ``negations``, some tried and could not (a constant
    derived there whose negation reads otherwise, -1 for 1)."""
    args = _calls(f, scalar)[0]
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    monkeypatch.setattr(blocks, "FINISHED", _Forgetting())
    own = _blocks(f, args)
    monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
    tried = []
    derived_again = blocks.Code._derived_again

    def counted(code, derived):
        tried.append(derived_again(code, derived))
        return tried[-1]

    monkeypatch.setattr(blocks.Code, "_derived_again", counted)
    reused = _blocks(f, args)
    assert len(own) == len(reused) > 1
    for mine, theirs in zip(reused, own):
        assert mine.forward.__code__ is theirs.forward.__code__
        assert mine.backward.__code__ is theirs.backward.__code__
        assert len(mine.constants) == len(theirs.constants)
        assert all(map(_same_constant, mine.constants, theirs.constants))
    assert any(tried)
    if f is negations:
        assert not all(tried)


def pairs(x, y):
    """Pair forces summed into rows of a zeroed buffer (a row's cotangent added back where it
    was taken: ``replay._added_back``), cut into blocks of a few pairs each: blocks in which
    one pair's ``j`` is the next one's ``i`` and blocks in which no index equals another."""
    n = len(x)
    p, m = np.stack([x, y], axis=1) * 1.0, np.linspace(1.0, 2.0, n)
    out = np.zeros((n, 2))
    for i in range(n):
        for j in range(i + 1, n):
            d = p[j] - p[i]
            w = (d @ d + 0.01) ** -1.5
            out[i] += m[j] * w * d
            out[j] -= m[i] * w * d
    return (p * out).sum()


def elements(x, y):
    """An element read, then written, and its mirror read, at indices equal on the diagonal
    alone: the write keeps the element as read (``Code.elements``) where the mirror is it."""
    n = len(x)
    a = np.outer(x, y)
    for _ in range(3):
        for i in range(n):
            for j in range(n):
                a[i, j] = a[i, j] * 0.5 + np.tanh(a[j, i])
    return (a * a).sum()


def _pair_calls():
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal(16), rng.standard_normal(16)
    calls = flipped(x, y)
    same = (np.full(16, 0.5), np.full(16, -0.25))  # every pair's positions coincide
    return calls[:3] + calls[3::4] + [same, (x, y), same]


@pytest.mark.parametrize("f", [pairs, elements], ids=lambda f: f.__name__)
def test_indices_equal_by_chance_replay_the_traced_bits(f, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
    replayed_like_traced(f, _pair_calls(), MODES["default"], capfd)


@pytest.mark.parametrize("f", [pairs, elements], ids=lambda f: f.__name__)
def test_indices_equal_by_chance_share_a_template(f, monkeypatch):
    """Each index a block binds has a name of its own (``Code.bind``): blocks whose indices
    coincide otherwise write the same source, one template for most of ``pairs``' blocks
    (``elements``' differ where the diagonal lets a write keep the element read); and the
    source of each is the one it finishes on its own."""
    args = _pair_calls()[0]
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    monkeypatch.setattr(blocks, "FINISHED", _Forgetting())
    own = _blocks(f, args)
    assert len(own) >= 8
    if f is pairs:
        assert 4 * len({block.forward.__code__ for block in own}) <= len(own)
    monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
    reused = _blocks(f, args)
    assert len(own) == len(reused)
    for mine, theirs in zip(reused, own):
        assert mine.forward.__code__ is theirs.forward.__code__
        assert mine.backward.__code__ is theirs.backward.__code__
        assert all(map(_same_constant, mine.constants, theirs.constants))
