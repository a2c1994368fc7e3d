"""Python's ``complex`` of traced scalars in a differentiated function: the value stands for the
Python complex Python gives (its parts exactly the numbers), and the gradient flows to both parts."""

import numpy as np
import pytest

import mutad


def _parts(x):
    z = complex(x[0], x[1])
    w = z * z + complex(x[2]) / z
    return w.real * 3.0 + w.imag ** 2 + abs(z)


def _of_a_real_number(x):
    z = complex(-0.0, x[1]) * complex(x[0], 2) - complex(x[2], True)
    return z.real + 2.0 * z.imag


@pytest.mark.parametrize("f", [_parts, _of_a_real_number])
@pytest.mark.parametrize("replay", [False, True])
def test_complex_of_traced_scalars_is_pythons_with_its_gradient(f, replay):
    x = np.array([0.7, -1.3, 2.1])
    before = x.copy()
    expected = f(x)
    value_and_grad = mutad.value_and_grad(f, replay=replay)
    for _ in range(2):  # (a replayed second call too)
        value, g = value_and_grad(x)
        assert np.asarray(value).tobytes() == np.float64(expected).tobytes()
        assert x.tobytes() == before.tobytes()
        h = 1e-6
        fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_complex_keeps_the_parts_bit_for_bit():
    def f(x):
        z = complex(x[0], x[1])
        return z.imag - z.real, (z.real, z.imag)

    x = np.array([-0.0, 1e-310])
    (value, parts), g = mutad.value_and_grad(f, has_aux=True)(x)
    assert np.array(parts).tobytes() == x.tobytes()
    assert np.float64(value).tobytes() == np.float64(1e-310 + 0.0).tobytes()
    assert g.tolist() == [-1.0, 1.0]
