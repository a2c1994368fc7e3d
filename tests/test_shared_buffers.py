"""Arguments whose memory overlaps though no one NumPy array owns it (two ``np.frombuffer``
arrays over one buffer) are refused before ``f`` runs, with the caller's bytes intact: mutad
follows memory through NumPy's ``.base`` chains, and a write through one chain would not reach
the other's gradient."""

import numpy as np
import pytest

import mutad


def scaled_product(a, b):
    a *= 2.0
    return (a * b).sum()


def over_one_buffer(offset=0):
    memory = bytearray(np.arange(1.0, 5.0).tobytes())
    a = np.frombuffer(memory, count=2)
    b = np.ndarray((2,), float, buffer=memory, offset=offset)
    return a, b


@pytest.mark.parametrize("offset", (0, 8))
@pytest.mark.parametrize("differentiate", (
    lambda f, a, b: mutad.gradient(f, a, b),
    lambda f, a, b: mutad.grad(f, replay=True)(a, b),
    lambda f, a, b: mutad.jvp(f, (a, b), (np.ones(2), np.ones(2))),
), ids=("reverse", "replay", "forward"))
def test_two_arrays_over_one_foreign_buffer_are_refused(differentiate, offset):
    a, b = over_one_buffer(offset)
    before = bytes(a.base)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="np.frombuffer"):
        differentiate(scaled_product, a, b)
    assert bytes(a.base) == before


def test_disjoint_arrays_over_one_foreign_buffer_are_differentiated():
    memory = bytearray(np.arange(1.0, 5.0).tobytes())
    a = np.frombuffer(memory, count=2)
    b = np.ndarray((2,), float, buffer=memory, offset=16)
    before = bytes(memory)
    grads = mutad.gradient(scaled_product, a, b)
    assert [g.tolist() for g in grads] == [[6.0, 8.0], [2.0, 4.0]]
    assert bytes(memory) == before
