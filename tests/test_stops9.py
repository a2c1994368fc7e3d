"""Reductions given a starting value with a derivative (``initial=`` a traced value)."""

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
