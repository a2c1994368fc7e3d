"""Writes whose overwritten bytes nothing reads are undone by nothing (``writes.UNREAD``).

Each program is differentiated with the skip and without it (``writes.SKIP_UNREAD``): the
gradients must agree bit for bit, and the caller's arrays stay unchanged. The programs write
large temporaries (above ``tape.SMALL_WRITE``, where the skip is asked) whose old values are,
or are not, read later: by the record that made them, a view a record keeps, the write's own
pullback, the inverse of an earlier write, the caller.
"""

import numpy as np
import pytest

import mutad
from mutad.engines import inplace, writes
from mutad.bench.workloads import big_elementwise  # (W5, the chain the skip was built for)

N = 20_000  # 160 KB of float64: above SMALL_WRITE


def kinds_in(monkeypatch, call, *args):
    """``(call(*args), the undo kinds decided for the writes it made)``."""
    kinds = []
    decide = inplace.decide_undo

    def recording(*a, **k):
        chosen = decide(*a, **k)
        kinds.append(chosen[1])
        return chosen

    monkeypatch.setattr(inplace, "decide_undo", recording)
    result = call(*args)
    monkeypatch.setattr(inplace, "decide_undo", decide)
    return result, kinds


def kinds_of(monkeypatch, f, *args):
    """The undo kinds decided for the writes of one gradient of ``f``."""
    return kinds_in(monkeypatch, mutad.gradient, f, *args)[1]


def replayed(monkeypatch, f, *args):
    """``(value, gradients)`` of ``f`` at its third call under ``replay=True``, with the skip,
    which the replays decide too (the recording call does not), and the undo kinds decided
    for its writes."""
    monkeypatch.setattr(writes, "SKIP_UNREAD", True)
    g = mutad.value_and_grad(f, argnums=tuple(range(len(args))), replay=True)
    g(*args)
    g(*args)
    answer = kinds_in(monkeypatch, g, *args)
    assert not g.reasons  # replayed, not traced
    return answer


def both(monkeypatch, f, *args, **kwargs):
    """The gradient of ``f`` with and without the skip, traced, and replayed with it (unless
    ``kwargs``), and the caller's arrays unchanged."""
    before = [a.copy() for a in args]
    results = []
    for skip in (True, False):
        monkeypatch.setattr(writes, "SKIP_UNREAD", skip)
        results.append(mutad.value_and_gradient(f, *args, **kwargs))
        for a, b in zip(args, before):
            assert a.tobytes() == b.tobytes()
    if not kwargs:
        results.append(replayed(monkeypatch, f, *args)[0])
        for a, b in zip(args, before):
            assert a.tobytes() == b.tobytes()
    (v1, g1), *others = results
    g1 = g1 if type(g1) is tuple else (g1,)
    for v2, g2 in others:
        assert np.asarray(v1).tobytes() == np.asarray(v2).tobytes()
        g2 = g2 if type(g2) is tuple else (g2,)
        for a, b in zip(g1, g2, strict=True):
            assert a.tobytes() == b.tobytes()
    return g1


def test_unread_writes_skipped_and_gradient_unchanged(monkeypatch):
    x = np.linspace(-3.0, 3.0, N)
    # tanh's record reads a, not b: b's two writes overwrite values nothing reads; a's first
    # write is read by its own pullback, c's by exp's record (its output)
    assert kinds_of(monkeypatch, big_elementwise, x) == ["inverse", "unread", "unread",
                                                        "inverse"]
    both(monkeypatch, big_elementwise, x)
    # and so do its replays
    assert replayed(monkeypatch, big_elementwise, x)[1] == ["inverse", "unread", "unread",
                                                           "inverse"]


def test_output_read_by_its_record_is_undone(monkeypatch):
    def f(x):
        c = np.exp(x)  # exp's pullback reads c
        c += x
        return np.sum(c * c)
    x = np.linspace(-1.0, 1.0, N)
    assert "unread" not in kinds_of(monkeypatch, f, x)
    g, = both(monkeypatch, f, x)
    c = np.exp(x) + x
    assert np.allclose(g, 2 * c * (np.exp(x) + 1), rtol=1e-12)


def test_view_kept_by_a_record_is_undone(monkeypatch):
    def f(x):
        t = np.sin(x)
        v = t[::2]
        w = v * x[::2]  # the product keeps v, a view of t
        t += x
        t *= 0.5
        return w.sum() + t.sum()
    x = np.linspace(-2.0, 2.0, N)
    assert "unread" not in kinds_of(monkeypatch, f, x)
    g, = both(monkeypatch, f, x)
    expected = 0.5 * np.cos(x) + 0.5
    expected[::2] += np.cos(x[::2]) * x[::2] + np.sin(x[::2])
    assert np.allclose(g, expected, rtol=1e-12, atol=1e-15)


def test_own_pullback_reads_old_values(monkeypatch):
    def f(x):
        t = np.tanh(x)
        t *= x  # the product's pullback reads t's old values for x's cotangent
        return t.sum()
    x = np.linspace(-2.0, 2.0, N)
    assert kinds_of(monkeypatch, f, x) == ["inverse"]
    g, = both(monkeypatch, f, x)
    assert np.allclose(g, np.tanh(x) + x / np.cosh(x) ** 2, rtol=1e-12)


def test_earlier_inverse_reads_the_values(monkeypatch):
    def f(x):
        t = np.exp(x)
        t += x  # undone: exp's record reads t; its inverse reads the values it left
        t *= 3.0  # so these are read too
        return t.sum()
    x = np.linspace(-1.0, 1.0, N)
    assert "unread" not in kinds_of(monkeypatch, f, x)
    g, = both(monkeypatch, f, x)
    assert np.allclose(g, 3 * (np.exp(x) + 1), rtol=1e-12)


def test_arguments_always_undone(monkeypatch):
    def f(x, y):
        x += y  # the caller's: always given back
        x *= 2.0
        return np.sum(np.sin(x))
    x, y = np.linspace(-1.0, 1.0, N), np.linspace(0.0, 1.0, N)
    assert "unread" not in kinds_of(monkeypatch, f, x, y)
    both(monkeypatch, f, x, y)


def test_write_within_a_compiled_block_is_undone(monkeypatch):
    def f(x, s):
        t = np.sin(x)
        a = s * 2.0  # small steps: the replay compiles them, the dot and the write as a block
        b = a * s
        d = np.dot(t, t)  # whose record the block holds until its end, not the tape
        t += x
        return d + np.sum(t * t) + np.sum(b * a)
    x, s = np.linspace(-1.5, 1.5, N), np.linspace(0.1, 0.5, 4)
    assert "unread" not in replayed(monkeypatch, f, x, s)[1]
    both(monkeypatch, f, x, s)


def test_pullback_result_written_after_it_is_made(monkeypatch):
    def f(x):
        t = np.tanh(x)
        t += x
        t *= 2.0
        return t
    x = np.linspace(-1.0, 1.0, N)
    results = []
    for skip in (True, False):
        monkeypatch.setattr(writes, "SKIP_UNREAD", skip)
        y, back = mutad.pullback(f, x)
        kept = y.copy()
        g = back(np.ones(N))
        results.append((y.tobytes(), kept.tobytes(), np.asarray(g[0] if type(g) is tuple
                                                               else g).tobytes()))
    assert results[0] == results[1]


OPERATIONS = ("sin", "tanh", "exp", "own_add", "own_mul", "add_x", "mul_const", "mul_x",
              "cos_out", "keep_view", "keep_whole", "new")


def random_program(seed):
    """A program of in-place writes into a few large temporaries, with reads between them."""
    rng = np.random.default_rng(seed)
    steps = [(OPERATIONS[rng.integers(len(OPERATIONS))], int(rng.integers(3)),
              float(rng.uniform(-0.9, 0.9))) for _ in range(int(rng.integers(4, 12)))]

    def f(x):
        temps = [np.sin(x), np.tanh(x), x * 0.5]
        total = 0.0
        for op, i, c in steps:
            t = temps[i]
            if op == "sin":
                temps[i] = np.sin(t)
            elif op == "tanh":
                temps[i] = np.tanh(t)
            elif op == "exp":
                temps[i] = np.exp(0.1 * t)
            elif op == "own_add":
                t += temps[(i + 1) % 3]
            elif op == "own_mul":
                t *= temps[(i + 2) % 3]
            elif op == "add_x":
                t += x
            elif op == "mul_const":
                t *= c
            elif op == "mul_x":
                t *= x
            elif op == "cos_out":
                np.cos(t, out=t)
            elif op == "keep_view":
                total = total + np.sum(t[1::3] * t[1::3])
            elif op == "keep_whole":
                total = total + np.sum(np.tanh(t))
            else:
                temps[i] = t + c
        return total + sum(np.sum(t * t) for t in temps)

    return f


@pytest.mark.parametrize("seed", range(40))
def test_random_programs(monkeypatch, seed):
    x = np.linspace(-1.5, 1.5, N)
    both(monkeypatch, random_program(seed), x)
