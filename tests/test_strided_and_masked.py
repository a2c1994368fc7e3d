"""``np.lib.stride_tricks.as_strided(..., writeable=False)`` of a differentiated array is a
gather of the elements its view reads (an MFCC framing function), in both modes and however it
is imported; a writeable one is refused; masked arrays are refused with a message that says
so."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import mutad

FRAMINGS = {
    "overlapping frames": lambda x: (np.lib.stride_tricks.as_strided(
        x, shape=(4, 2), strides=(8, 8), writeable=False) ** 2).sum(),
    "of a view": lambda x: (as_strided(x[1:], shape=(2, 2), strides=(16, 8),
                                       writeable=False) ** 2).sum(),
    "a repeated element": lambda x: (as_strided(x, shape=(3,), strides=(0,),
                                                writeable=False) * x[:3]).sum(),
    "of a 2-d array": lambda x: np.sin(as_strided(x.reshape(5, 1) * x[:2], shape=(4, 2, 2),
                                                  strides=(16, 16, 8), writeable=False)).sum(),
}


@pytest.mark.parametrize("name", FRAMINGS)
def test_a_read_only_strided_view_is_a_gather(name):
    f = FRAMINGS[name]
    x = np.arange(1.0, 6.0)
    before = x.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)
    assert x.tobytes() == before


def test_a_writeable_strided_view_is_refused():
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="writeable=False"):
        mutad.gradient(lambda x: as_strided(x, shape=(2, 2), strides=(8, 8)).sum(), np.ones(3))


@pytest.mark.parametrize("f", [
    lambda x: np.ma.masked_array(x, mask=[0, 1, 0]).sum(),
    lambda x: np.ma.masked_where(x > 1, x).sum(),
])
def test_masked_arrays_are_followed(f):
    """They were refused; now np.ma's values, and the derivative of what was kept
    (tests/test_numpy_ma.py has the rest)."""
    x = np.array([0.5, 1.5, 0.25])
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value == f(x.copy())
    np.testing.assert_array_equal(g, [1.0, 0.0, 1.0])


def test_what_masked_arrays_are_not_followed_in_is_refused_with_a_message_that_says_so():
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="m.filled"):
        mutad.gradient(lambda x: np.ma.masked_where(x > 1, x).min(), np.ones(3))
