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


def _foreign(memory, count, offset, stride=1):
    return np.ndarray((count,), float, buffer=memory, offset=8 * offset, strides=(8 * stride,))


def summed_squares(xs):
    xs[0] *= 2.0
    return sum((x * x).sum() for x in xs)


@pytest.mark.parametrize("differentiate", (
    lambda f, xs: mutad.gradient(f, xs),
    lambda f, xs: mutad.grad(f, replay=True)(xs),
), ids=("reverse", "replay"))
def test_an_overlap_with_an_argument_that_is_not_the_next_in_memory_is_refused(differentiate):
    # Over one buffer: the even elements, single odd ones (apart from them, each next in
    # memory to the one before), and one even element, which shares memory with the first
    # argument alone, seven arguments before it in memory: each pair whose bytes may meet is
    # asked, not only neighbours
    memory = bytearray(np.arange(1.0, 65.0).tobytes())
    evens = _foreign(memory, 32, 0, 2)
    odds = [_foreign(memory, 1, 1 + 2 * k) for k in range(6)]
    inside = _foreign(memory, 1, 20)
    xs = [odds[3], evens, *odds[:3], inside, *odds[4:]]
    before = bytes(memory)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="np.frombuffer"):
        differentiate(summed_squares, xs)
    assert bytes(memory) == before


def test_arguments_whose_bytes_interleave_without_sharing_are_differentiated():
    # even and odd elements of one foreign buffer: their bounds meet, their memory does not
    memory = bytearray(np.arange(1.0, 11.0).tobytes())
    xs = [_foreign(memory, 4, 0, 2), _foreign(memory, 4, 1, 2), _foreign(memory, 1, 9)]
    before = bytes(memory)
    grads = mutad.gradient(summed_squares, xs)
    assert [g.tolist() for g in grads[0]] == [[8.0, 24.0, 40.0, 56.0], [4.0, 8.0, 12.0, 16.0],
                                              [20.0]]
    assert bytes(memory) == before


@pytest.mark.parametrize("differentiate", (
    lambda f, a, b: mutad.gradient(f, a, b),
    lambda f, a, b: mutad.jvp(f, (a, b), (np.ones(4), np.ones(4))),
), ids=("reverse", "forward"))
def test_an_array_and_a_foreign_view_of_its_memory_are_refused(differentiate):
    """One argument owns its memory, the other views it through a memoryview: two chains,
    asked about though the first owns its memory (owners that all own theirs are not)."""
    a = np.arange(1.0, 5.0)
    b = np.frombuffer(memoryview(a))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="np.frombuffer"):
        differentiate(scaled_product, a, b)
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]
