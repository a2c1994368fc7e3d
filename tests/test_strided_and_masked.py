"""``np.lib.stride_tricks.as_strided`` of a differentiated array is the view NumPy makes of
its memory (an MFCC framing function, a Hankel matrix, im2col), read-only or writeable as
NumPy's, in both modes, replayed and however it is imported; a write through one whose elements
share memory, and one reaching outside the array's memory, are refused; masked arrays are
refused with a message that says so."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import mutad
from cases import replays_as_traced

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


VIEWS = {  # NumPy's default, writeable=True, read only
    "a Hankel matrix": lambda x: np.linalg.svd(as_strided(np.sqrt(x), (4, 3), (8, 8)),
                                               compute_uv=False)[0],
    "im2col": lambda x: np.einsum("ijkl,kl->ij", as_strided(
        x.reshape(2, 3) * x[:3], (1, 2, 2, 2), (24, 8, 24, 8)), [[1.0, 2.0], [3.0, -1.0]]).sum(),
    "negative strides": lambda x: (as_strided(x[-1:], (3, 2), (-16, -8)) ** 2).sum(),
    "both signs": lambda x: (as_strided(x[3:], (2, 2), (-8, 16)) ** 3).sum(),
    "a step of zero": lambda x: (as_strided(x[1:], (3, 2), (0, 8))
                                 * np.arange(6.0).reshape(3, 2)).sum(),
    "one element": lambda x: as_strided(x[2:], (), ()) * 2.0,
    "no elements": lambda x: as_strided(x, (0, 3), (8, 8)).sum() + x[0],
    "a non-overlapping reshape, written": lambda x: _written(x),
}


def _written(x):
    y = x * 1.0
    v = as_strided(y, (3, 2), (16, 8))  # y's elements once each: a write has a derivative
    v *= x[:3].reshape(3, 1)
    return (y ** 2).sum()


def _later_write(x):
    y = x * 1.0
    windows = as_strided(y, (2, 2), (8, 8))
    y[0] = 3.0 * y[1]  # shows through the view, as through NumPy's
    return (windows ** 2).sum()


VIEWS["a write into the array after the view"] = _later_write


@pytest.mark.parametrize("name", VIEWS)
def test_a_writeable_strided_view_is_numpys_view(name):
    """They were refused (writeable=True, NumPy's default), and a read-only one was a copy,
    which a later write into its array did not change, as it changes NumPy's view."""
    f = VIEWS[name]
    x = np.arange(1.0, 7.0)
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    assert mutad.jvp(f, (x,), (np.ones(6),))[0] == f(x.copy())
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    replays_as_traced(f, [(x,), (x + 0.5,)])
    assert x.tobytes() == before


def test_a_strided_view_is_a_view_writeable_as_numpys():
    def program(x):
        y = x * 1.0
        views = [as_strided(y, (2, 2), (8, 8)), as_strided(y, (2, 2), (8, 8), writeable=False)]
        plain = [as_strided(np.ones(3), (2, 2), (8, 8)),
                 as_strided(np.ones(3), (2, 2), (8, 8), writeable=False)]
        assert [v.flags.writeable for v in views] == [v.flags.writeable for v in plain]
        assert all(np.shares_memory(v, y) for v in views)
        y[1] = 5.0
        assert views[1][0, 1] == 5.0
        return views[0].sum()

    np.testing.assert_array_equal(mutad.gradient(program, np.ones(3))[0], [1.0, 0.0, 1.0])


def test_what_a_strided_view_cannot_do_is_refused():
    def writes(x):
        windows = as_strided(x * 1.0, (2, 2), (8, 8))
        windows += 1.0  # its elements share memory: the result depends on the order of writes
        return windows.sum()

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="share memory"):
        mutad.gradient(writes, np.ones(3))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="outside"):
        mutad.gradient(lambda x: as_strided(x, (3, 3), (8, 8)).sum(), np.ones(3))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="element by element"):
        mutad.gradient(lambda x: as_strided(x, (2,), (4,)).sum(), np.ones(3))


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
        mutad.gradient(lambda x: np.ma.masked_where(x > 1, x).repeat(2).sum() * x[0], np.ones(3))
