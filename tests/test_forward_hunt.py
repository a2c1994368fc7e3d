"""Forward mode and nested differentiation of in-place programs: second derivatives where the
first-order modes already followed the program."""

import numpy as np
import pytest

import mutad


def _one_element_through_windows(x):
    """One element of a self-overlapping (as_strided) view written: NumPy writes one element
    the same in any order, so every mode follows it."""
    w = np.lib.stride_tricks.as_strided(x, shape=(3, 3), strides=(16, 8), writeable=True)
    w[0, 0] = w[1, 1] * 2.0
    return (x * x * x).sum()


def test_one_element_written_through_a_self_overlapping_view_under_nesting():
    """A write of one element into a view whose elements share memory was refused by the
    nested modes (a Hessian, reverse over forward) while jvp and gradient followed it: the
    check of the written region indexed the traced destination, whose element is a traced
    0-d array rather than NumPy's scalar, so the region did not look apart."""
    x, v = np.linspace(0.5, 1.5, 8), np.cos(np.arange(8.0))
    before = x.tobytes(), v.tobytes()
    # f = 8 x3³ + Σ_{i≠0} xᵢ³: H = diag(0, 6x₁, 6x₂, 54x₃, 6x₄, ...)
    expected = 6.0 * x
    expected[0], expected[3] = 0.0, 54.0 * x[3]
    np.testing.assert_allclose(mutad.hessian(_one_element_through_windows, x),
                               np.diag(expected), rtol=1e-12)
    np.testing.assert_allclose(mutad.hvp(_one_element_through_windows, (x,), (v,)),
                               expected * v, rtol=1e-12)
    gradient = mutad.grad(_one_element_through_windows)
    np.testing.assert_allclose(mutad.jvp(gradient, (x,), (v,))[1], expected * v, rtol=1e-12)
    assert (x.tobytes(), v.tobytes()) == before


@pytest.mark.parametrize("primal, tangent", [
    (2.0, np.complex128(1.0 + 1.0j)),            # NumPy's cast dropped 1j: dy was 4, a warning
    (np.float32(2.0), np.array(1.0 + 1.0j)),
    (np.ones(2), np.array([1.0j, 0.0])),          # NumPy's cast refused in the middle
])
def test_a_complex_tangent_for_a_real_primal_is_refused(primal, tangent):
    with pytest.raises(mutad.errors.InvalidArgumentError, match="complex tangent"):
        mutad.jvp(lambda x: x * x, (primal,), (tangent,))
