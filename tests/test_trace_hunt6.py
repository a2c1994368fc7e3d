"""Wrong answers found in traced differentiation at special values, each checked against NumPy's
own run bit for bit; every one failed before its fix."""

import numpy as np
import pytest

import mutad

# ----------------------------------------------------------------------------------------------
# A reduction of masked elements alone is np.ma.masked, which f returns as its loss: the value
# came back as the masked constant's data, 0.0 (np.asarray of it), where NumPy's is np.ma.masked.
# No derivative reaches it: the gradient is zero.

X = np.array([2.0, 3.0, 4.0])

MASKING = {
    "masked_greater": lambda x: np.ma.masked_greater(x, 1.5),
    "masked_less": lambda x: np.ma.masked_less(x, 10.0),
    "masked_where": lambda x: np.ma.masked_where(x > 0.0, x),
    "masked_outside": lambda x: np.ma.masked_outside(x, -1.0, 1.0),
    "masked_array(mask=True)": lambda x: np.ma.masked_array(x, mask=True),
}
REDUCTIONS = {
    "sum": lambda m: m.sum(),
    "mean": lambda m: m.mean(),
    "max": lambda m: m.max(),
    "std": lambda m: m.std(),
    "np.ma.average": np.ma.average,
    "sum(keepdims).sum()": lambda m: m.sum(axis=0, keepdims=True).sum(),
}


@pytest.mark.parametrize("masking", MASKING)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_a_reduction_of_masked_elements_alone_returns_the_masked_constant(masking, reduction):
    def f(x):
        x *= 1.0  # in place
        return REDUCTIONS[reduction](MASKING[masking](x))

    x = X.copy()
    assert f(X.copy()) is np.ma.masked
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value is np.ma.masked
    assert g.tobytes() == np.zeros(3).tobytes()
    assert x.tobytes() == X.tobytes()


def test_the_masked_constant_replays_as_traced_whatever_the_mask():
    def f(x):
        return np.ma.masked_greater(x, 1.5).sum()

    replayed = mutad.value_and_grad(f, replay=True)
    for x in [X, X + 1.0, np.array([1.0, 3.0, 4.0]), X, np.array([1.0, 1.0, 4.0]), X]:
        before = x.tobytes()
        value, g = replayed(x)
        expected = f(x.copy())
        if expected is np.ma.masked:
            assert value is np.ma.masked
        else:
            assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert g.tobytes() == (x <= 1.5).astype(float).tobytes()
        assert x.tobytes() == before


# ----------------------------------------------------------------------------------------------
# abs() of a Python complex number (a traced value standing for one: complex(z) ** 1, z.item())
# was NumPy's: hypot's NaN keeps a NaN part's sign (abs(s * s) of s = (inf+0j) * 0 gave -nan),
# where Python's own abs gives its NaN; and beyond the floats Python raises OverflowError where
# NumPy's is inf. abs() of NumPy's complex scalar stays NumPy's.

def bits(v):
    return np.asarray(v, np.float64).tobytes()


@pytest.mark.parametrize("z", [complex(np.inf, 0.0), complex(-np.inf, -0.0), complex(0.0, np.inf),
                               complex(np.nan, 1.0), complex(3.0, -4.0), complex(1e308, 1e308)])
def test_abs_of_a_python_complex_number_is_pythons(z):
    def f(z):
        s = z * 0
        return abs(s * s) + abs(z)

    def g(x, i):  # element i of an array: 0 a Python complex number, 1 NumPy's complex scalar
        v = x.astype(complex)
        v *= 1.0  # in place
        w = v[i].item() if i == 0 else v[i]
        return abs(w * 0 * w) + abs(w)

    expected = f(z)
    assert bits(mutad.value_and_gradient(f, z)[0]) == bits(expected)
    assert bits(mutad.jvp(f, (z,), (1.0 + 0j,))[0]) == bits(expected)
    assert bits(mutad.vjp(f, z)[0]) == bits(expected)
    x = np.array([z, z])
    before = x.tobytes()
    for i in (0, 1):
        expected = g(x.copy(), i)
        assert bits(mutad.value_and_gradient(g, x, i, argnums=0)[0]) == bits(expected)
        replayed = mutad.value_and_grad(g, replay=True)
        replayed(np.array([1.0 + 2j, 3.0 - 1j]), i)
        assert bits(replayed(x, i)[0]) == bits(expected)
    assert x.tobytes() == before


def test_abs_of_a_python_complex_number_beyond_the_floats_raises_as_pythons():
    z = complex(1.5e308, 1.5e308)
    with pytest.raises(OverflowError):
        abs(z)
    with pytest.raises(OverflowError):
        mutad.value_and_gradient(abs, z)
    with pytest.raises(OverflowError):
        mutad.jvp(abs, (z,), (1.0 + 0j,))
    replayed = mutad.value_and_grad(abs, replay=True)
    replayed(complex(1.0, 2.0))
    replayed(complex(1.0, 2.0))
    with pytest.raises(OverflowError):
        replayed(z)
    # NumPy's complex scalar: inf, NumPy's own
    x = np.array([z])
    value, (g,) = mutad.value_and_gradient(lambda x: abs(x[0]), x)
    assert bits(value) == bits(abs(x[0]))
