"""Answers that differed from NumPy's, and refusals that misnamed their cause: each test fails
without its fix."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import mutad


# ----------------------------------------------------------------------------------------------
# as_strided of a differentiated array with a step of zero (``strides=(0, 8)``) gave a read-only
# broadcast where NumPy's view is writeable: ``flags.writeable`` said False, a write of one
# element (which NumPy's memory takes in any order) was refused, and a write of several was
# refused as into "a read-only view, as NumPy makes it". The view is writeable as NumPy's.


def _one_element_through_a_repeating_view(x):
    u = x.copy()
    z = as_strided(u, shape=(2, 3), strides=(0, 8))
    assert z.flags.writeable and not as_strided(u, (2, 3), (0, 8), writeable=False).flags.writeable
    z[1, 2] = x[0] * 3.0
    return (u * [1.0, 2.0, 3.0]).sum() + (z ** 2).sum()


def test_a_view_with_a_step_of_zero_is_writeable_as_numpys():
    x = np.array([0.5, -0.3, 0.8])
    before = x.tobytes()
    value, (gradient,) = mutad.value_and_gradient(_one_element_through_a_repeating_view, x)
    assert x.tobytes() == before
    assert value == _one_element_through_a_repeating_view(x.copy())
    # u = [x0, x1, 3 x0]: 1 x0 + 2 x1 + 9 x0 + 2 (x0² + x1² + 9 x0²)
    np.testing.assert_allclose(gradient, [10.0 + 40.0 * x[0], 2.0 + 4.0 * x[1], 0.0])
    tangent = mutad.jvp(_one_element_through_a_repeating_view, (x,), (np.ones(3),))[1]
    np.testing.assert_allclose(tangent, gradient.sum())
    assert x.tobytes() == before

    def several(x):
        u = x.copy()
        as_strided(u, shape=(4,), strides=(0,))[...] += 1.0
        return u.sum()

    with pytest.raises(mutad.MutadError, match="elements share memory"):
        mutad.gradient(several, x)
    assert x.tobytes() == before


# ----------------------------------------------------------------------------------------------
# x.shape = ... of an array made before the call, once the function wrote into it, was refused
# as of "a traced array [that] stands for its argument": the refusal names such arrays too, and
# what works (the shape set before the first write).

GRID = np.linspace(0.0, 1.0, 6)  # a module-level work array


def test_the_shape_of_an_array_made_before_is_refused_by_its_cause():
    def reshaped_after_a_write(x):
        GRID[:3] = x
        GRID.shape = (2, 3)
        return GRID.sum()

    def reshaped_before(x):
        GRID.shape = (2, 3)
        GRID[1] = x
        return (GRID * [[1.0], [2.0]]).sum()

    x = np.array([0.5, -0.3, 0.8])
    with pytest.raises(mutad.MutadError, match="made before the call that the function wrote"):
        mutad.gradient(reshaped_after_a_write, x)
    assert GRID.shape == (6,) and GRID.tolist() == np.linspace(0.0, 1.0, 6).tolist()
    assert mutad.gradient(reshaped_before, x)[0].tolist() == [2.0, 2.0, 2.0]
    assert GRID.shape == (2, 3) and GRID[1].tolist() == x.tolist()  # as NumPy's run leaves it
    GRID.shape = (6,)
    GRID[:] = np.linspace(0.0, 1.0, 6)
