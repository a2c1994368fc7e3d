"""Memory lent on in the reverse pass (``Shadows.lend``): the copy a checkpointed elementwise
write put back holds the next new cotangent of its shape, not fresh pages. Only where that
memory goes changes: every value and gradient is the same, bit for bit, as without lending."""

import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import mutad
import mutad.core.shadows as shadows_module
from mutad.bench.workloads import big_elementwise
from mutad.core.shadows import Shadows
from mutad.engines import elementwise
from mutad.errors import MutadError
from random_programs import REAL_FEATURES, _plain, _weights, programs


# W5's chain: the cosine is written over ``c``, which it cannot be undone from, so ``c`` is
# copied; the cotangent of ``a`` in ``c *= a`` is the next new one of that shape.
chain = big_elementwise


def chain_with_view(x):
    """As ``chain``, with a view of ``c`` read after the write that is copied."""
    c = np.exp(-0.1 * x)
    head = c[: c.size // 2]
    np.cos(c, out=c)
    c *= x
    return c.sum() + (head * head).sum()


def two_shapes(x):
    """The copy of a write into a 2-D array, then cotangents of another shape and layout."""
    m = np.outer(x, x[:3])
    np.cos(m, out=m)
    t = m.T * 1.0  # Fortran-ordered: its cotangent is not laid out as the copy
    t *= x[:3, None]
    y = np.sin(x)
    np.cos(y, out=y)
    y *= x
    return t.sum() + y.sum()


def slice_write(x):
    """A checkpointed write into a slice, whose copy is not all of the array's memory."""
    u = np.exp(x)
    np.cos(u[1:-1], out=u[1:-1])
    u *= x
    return (u * u).sum()


PROGRAMS = [chain, chain_with_view, two_shapes, slice_write]


def _gradients(f, x, lend, monkeypatch, replay):
    monkeypatch.setattr(shadows_module, "SPARE", 0 if lend else 1 << 62)
    before = x.copy()
    if replay:
        g = mutad.value_and_grad(f, replay=True)
        results = [g(x) for _ in range(3)]  # recorded, then replayed
    else:
        results = [mutad.value_and_gradient(f, x)]
    np.testing.assert_array_equal(x, before)
    assert x.tobytes() == before.tobytes()  # the caller's data, bit for bit
    return [(float(v).hex(), np.asarray(d).tobytes()) for v, d in results]


SIZES = [20_000, 300_000]
"""Above the size whose cotangents are made without a new array, whole and in pieces."""


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("replay", [False, True])
@pytest.mark.parametrize("f", PROGRAMS)
def test_lent_memory_changes_no_bit(f, replay, n, monkeypatch):
    x = np.linspace(-3.0, 3.0, n)
    lent = _gradients(f, x, True, monkeypatch, replay)
    fresh = _gradients(f, x, False, monkeypatch, replay)
    assert lent == fresh


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("replay", [False, True])
def test_the_copy_of_a_large_write_holds_the_next_cotangent(replay, n, monkeypatch):
    taken = []
    empty_like = Shadows.empty_like

    def watched(self, a):
        spare = self.spare
        result = empty_like(self, a)
        taken.append(spare is not None and result is spare)
        return result

    monkeypatch.setattr(Shadows, "empty_like", watched)
    _gradients(chain, np.linspace(-3.0, 3.0, n), True, monkeypatch, replay)
    assert any(taken)


def test_a_replayed_copied_write_lends_its_copy(monkeypatch):
    """The replay's own record of a copied write (``replay.ElementwiseWrite``'s) lends the copy
    it put back to its pullback's cotangents, as the engine's record does
    (``elementwise.write_cotangents``): asked on the replayed calls alone."""
    monkeypatch.setattr(shadows_module, "SPARE", 0)
    x = np.linspace(-3.0, 3.0, 30_000)
    g = mutad.value_and_grad(chain, replay=True)
    expected = [g(x) for _ in range(2)][-1]  # recorded, then replayed
    spares = []
    cotangents = elementwise.elementwise_cotangents

    def watched(shadows, *args):
        spares.append(shadows.spare is not None)
        return cotangents(shadows, *args)

    monkeypatch.setattr(elementwise, "elementwise_cotangents", watched)
    value, gradient = g(x)
    assert any(spares)
    assert float(value).hex() == float(expected[0]).hex()
    assert np.asarray(gradient).tobytes() == np.asarray(expected[1]).tobytes()


def test_only_memory_nothing_else_holds_is_lent(monkeypatch):
    monkeypatch.setattr(shadows_module, "SPARE", 0)
    cache = Shadows()
    spare = np.ones(100)
    view = spare[:10]
    cache.lend(spare)
    assert cache.spare is None  # a view of it is alive
    del view
    cache.lend(spare)
    assert cache.spare is spare
    cache.let_go(spare)
    assert cache.spare is None
    found = weakref.ref(spare)
    cache.lend(spare)
    assert cache.spare is None  # something could find it again
    del found
    cache.lend(np.ones(100)[::2])  # not memory of its own
    assert cache.spare is None
    other = np.ones(100)
    cache.lend(other)
    assert cache.empty_like(np.zeros(50)) is not other  # not its shape
    assert cache.empty_like(np.zeros(100, dtype=np.float32)) is not other  # not its type
    assert cache.empty_like(np.zeros((10, 10))) is not other
    assert cache.empty_like(np.zeros(100)) is other
    assert cache.spare is None


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(REAL_FEATURES))
def test_random_programs_lent_memory_changes_no_bit(monkeypatch, program):
    assume(not program.numpy_raises)
    # every cotangent made by the general path (not the small arrays' own), every copy lent
    monkeypatch.setattr(elementwise, "SHORT", 0)
    f, args = program.make()
    weights = _weights(_plain(f, [a.copy() for a in args]))

    def loss(*arguments):
        return sum(np.sum(y * w) for y, w in zip(f(*arguments), weights, strict=True))

    argnums = tuple(range(len(args)))
    seen = []
    for spare in (0, 1 << 62):
        monkeypatch.setattr(shadows_module, "SPARE", spare)
        runs = []
        replayed = mutad.value_and_grad(loss, argnums=argnums, replay=True)
        for gradient in [lambda *a: mutad.value_and_gradient(loss, *a, argnums=argnums)] \
                + [replayed] * 3:
            _, arguments = program.make()
            before = [a.tobytes() for a in arguments]
            try:
                value, grads = gradient(*arguments)
            except MutadError as error:
                runs.append(type(error))
                continue
            assert [a.tobytes() for a in arguments] == before
            runs.append((np.asarray(value).tobytes(),
                         [np.asarray(g).tobytes() for g in grads]))
        seen.append(runs)
    assert seen[0] == seen[1]
