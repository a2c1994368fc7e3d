"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import numpy as np
import pytest

import mutad
from test_scipy_stops import check


# ----------------------------------------------------------------------------------------------
# np.convolve of 0-d operands, which NumPy takes as 1-element vectors

def _convolve_scalar_first(x):
    return np.convolve(x[0], x).sum() + np.convolve(x[0], x)[1] ** 2


def _convolve_scalar_second(x):
    return (np.convolve(x, 2.0 * x[1], mode="same") ** 2).sum()


def _convolve_scalars(x):
    return np.convolve(x[0], x[1], mode="valid")[0] + np.convolve(x[1], 3.0)[0]


@pytest.mark.parametrize("f", [_convolve_scalar_first, _convolve_scalar_second,
                               _convolve_scalars])
def test_convolve_of_0d_operands(f):
    check(f, np.array([0.3, -0.7, 1.1]))


# ----------------------------------------------------------------------------------------------
# np.interp of complex scalars: NumPy takes a complex x by its real part (with a ComplexWarning)
# and complex left and right beside complex fp, as NumPy scalars (not as 0-d arrays)

def _interp_complex_x(x):
    return np.interp(x[0] * (1 + 1j) + 0.2, [0.0, 1.0], x * (1 - 1j)).imag


def _interp_complex_x_real_fp(x):
    return np.interp(x[1] * (2 - 1j) + 1.6, [0.0, 0.5, 1.0], [x[0], 2.0, x[1] ** 2])


def _interp_complex_left(x):
    return np.interp(-2.0, [0.0, 1.0], x * (1 + 2j), left=x[0] * 1j).imag


def _interp_complex_right(x):
    return np.interp(x[0] + 1.5, [0.0, 1.0], [1j, 2.0], right=x[1] * (2 + 1j)).imag


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("f", [_interp_complex_x, _interp_complex_x_real_fp,
                               _interp_complex_left, _interp_complex_right])
def test_interp_of_complex_scalars(f):
    check(f, np.array([0.3, -0.7]))


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_interp_of_a_complex_argument():
    """A complex x's imaginary part, which NumPy discards, has no derivative."""
    z = np.array([0.3 + 0.2j, 0.6 - 0.1j])

    def f(z):
        return 2.0 * np.interp(z[0], [0.0, 1.0], [1.0, 3.0]) \
            + np.abs(np.interp(z[1], [0.0, 1.0], [1j, 3.0]))

    before = z.tobytes()
    value, (g,) = mutad.value_and_gradient(f, z)
    assert z.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(f(z.copy())).tobytes()
    slope = (9 * 0.6 - (1 - 0.6)) / np.hypot(3 * 0.6, 1 - 0.6)  # d|3t + i(1 - t)|/dt, t = 0.6
    np.testing.assert_allclose(g, [4.0, slope], rtol=1e-12)
    direction = np.array([1 + 1j, 2 - 1j])
    _, tangent = mutad.jvp(f, (z,), (direction,))
    np.testing.assert_allclose(tangent, 4.0 + 2.0 * slope, rtol=1e-12)
    np.testing.assert_array_equal(mutad.grad(f, replay=True)(z), g)
    assert z.tobytes() == before
