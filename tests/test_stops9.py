"""Reductions given a starting value with a derivative (``initial=`` a traced value)."""

import functools

import numpy as np
import pytest

import mutad

PROGRAMS = [
    lambda c: np.sum(c * c, initial=c[0]),
    lambda c: np.sum(np.sum(np.outer(c, c), axis=1, initial=c[1]) ** 2),
    lambda c: np.max(c, initial=c[2]),
    lambda c: np.min(c, initial=c[0]),
    lambda c: np.prod(c, initial=c[1]),
    lambda c: np.sum(np.max(np.outer(c, c), axis=0, initial=c[3])),
    lambda c: np.nansum(np.where(c > 2.5, np.nan, c), initial=c[2]),
    lambda c: np.nanprod(np.where(c > 2.5, np.nan, c), initial=c[0]),
    lambda c: np.nanmax(np.where(c > 2.5, np.nan, c), initial=c[3]),
    lambda c: np.nanmin(np.where(c > 2.5, np.nan, c), initial=c[3]),
]


def numeric(f, c, h=1e-6):
    return np.array([(f(c + h * e) - f(c - h * e)) / (2 * h) for e in np.eye(c.size)])


@pytest.mark.parametrize("f", PROGRAMS)
def test_traced_initial(f):
    c = np.array([1.5, 2.0, 3.0, 0.5])
    kept = c.copy()
    (g,) = mutad.gradient(f, c)
    assert np.array_equal(c, kept)
    y, dy = mutad.jvp(f, (c,), (np.ones_like(c),))
    assert y.tobytes() == np.asarray(f(c)).tobytes()
    np.testing.assert_allclose(g, numeric(f, c), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dy, g.sum(), rtol=1e-12)
    replayed, traced = mutad.value_and_grad(f, replay=True), mutad.value_and_grad(f)
    for k in range(3):  # the replay's calls as the traced ones, bit for bit
        x = c + k
        (v, r), (w, t) = replayed(x), traced(x)
        assert v.tobytes() == w.tobytes() and r.tobytes() == t.tobytes()


def test_extreme_shares_a_tie_with_initial():
    c = np.array([1.0, 2.0, 3.0, 3.0])
    (g,) = mutad.gradient(lambda c: np.max(c, initial=c[2]), c)
    np.testing.assert_allclose(g, [0, 0, 2 / 3, 1 / 3], rtol=1e-15, atol=0)


UFUNC_PROGRAMS = [
    lambda c: np.add.reduce(c * c, initial=c[0]),
    lambda c: np.sum(np.add.reduce(np.outer(c, c), 1, initial=c[1]) ** 2),
    lambda c: np.multiply.reduce(c, initial=c[2]),
    lambda c: np.maximum.reduce(c, initial=c[2]),
    lambda c: np.sum(np.minimum.reduce(np.outer(c, c), initial=c[3])),
]


@pytest.mark.parametrize("f", UFUNC_PROGRAMS)
def test_traced_initial_of_a_ufunc_reduce(f):
    test_traced_initial(f)


# ----------------------------------------------------------------------------------------------
# Work arrays an lru_cache'd function of the user's returns in a dict or a list


def cached_containers():
    @functools.lru_cache(maxsize=None)
    def by_name(n):
        return {"a": np.zeros(n), "index": np.arange(n)}

    @functools.lru_cache(maxsize=None)
    def in_a_list(n):
        return [np.zeros(n), np.ones(n)]

    def f(u):
        w = by_name(len(u))
        w["a"][:] = 2 * u
        layers = in_a_list(len(u))
        layers[1][:] = 0.5 * layers[1] + u  # read before written: state between calls
        return w["a"] @ u + np.sum(layers[1] ** 2)

    return f, (by_name, in_a_list)


def state(caches):
    return [[x.tobytes() for x in (c(4).values() if type(c(4)) is dict else c(4))]
            for c in caches]


def run(call, caches, calls):
    for c in caches:
        c.cache_clear()
    results = [call(u) for u in calls]
    assert all(type(x) is np.ndarray for c in caches
               for x in (c(4).values() if type(c(4)) is dict else c(4)))
    return results, state(caches)


def test_cached_dict_and_list_of_work_arrays():
    f, caches = cached_containers()
    calls = [np.array([1.0, -2.0, 3.0, 0.5]) + k for k in range(3)]
    kept = [u.copy() for u in calls]
    numpys, numpy_state = run(f, caches, calls)
    traced, traced_state = run(mutad.value_and_grad(f), caches, calls)
    replayed, replayed_state = run(mutad.value_and_grad(f, replay=True), caches, calls)
    forward, forward_state = run(lambda u: mutad.jvp(f, (u,), (np.ones(4),)), caches, calls)
    assert traced_state == replayed_state == forward_state == numpy_state
    assert [v for v, _ in traced] == [v for v, _ in replayed] == [v for v, _ in forward] \
        == numpys
    assert all(g.tobytes() == h.tobytes() for (_, g), (_, h) in zip(traced, replayed))
    np.testing.assert_allclose([g.sum() for _, g in traced], [t for _, t in forward],
                               rtol=1e-12)

    def first_call(u):  # from the state NumPy starts with: the caches empty
        for c in caches:
            c.cache_clear()
        return f(u)

    assert all(u.tobytes() == v.tobytes() for u, v in zip(calls, kept))
    np.testing.assert_allclose(traced[0][1], numeric(first_call, calls[0]), rtol=1e-6)
