"""scipy.special.factorial of traced values (SciPy's Python, which converts its argument with
np.asarray) stopped with a ConversionError: with exact=False it is SciPy's value bit for bit,
differentiated as Γ(n + 1), 0 below 0; exact=True gives SciPy's integers; the variants mutad
does not differentiate are refused by name."""

import numpy as np
import pytest
import scipy.special

import mutad
from mutad.errors import UnsupportedOperationError


def loss(x):
    n = np.stack([x * 3.0, x - 1.0, x[::-1] + 171.0])  # below 0, and beyond 170 (inf) too
    y = scipy.special.factorial(n, exact=False)
    return np.sum(np.where(np.isfinite(y), y, 0.0)) + scipy.special.factorial(x[0] + 1.0)


def test_factorial_is_scipys_value_differentiated_as_gamma():
    x = np.array([0.3, 1.7, 0.9, 2.2])
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(loss, x)
    assert x.tobytes() == before and np.asarray(value).tobytes() == np.asarray(loss(x)).tobytes()
    n = np.stack([x * 3.0, x - 1.0])
    slope = scipy.special.gamma(n + 1) * scipy.special.digamma(n + 1) * (n >= 0)
    expected = 3.0 * slope[0] + slope[1]
    expected[0] += scipy.special.gamma(x[0] + 2) * scipy.special.digamma(x[0] + 2)
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    mutad.check_grads(loss, x, modes=("rev", "fwd"), rtol=1e-6)
    replayed = mutad.grad(loss, replay=True)
    np.testing.assert_array_equal(replayed(x), g)
    np.testing.assert_array_equal(replayed(x * 0.9), mutad.gradient(loss, x * 0.9)[0])


def test_exact_factorials_and_the_variants_mutad_does_not_differentiate():
    x = np.array([3.0, 4.0])
    value, (g,) = mutad.value_and_gradient(
        lambda x: np.sum(x) * scipy.special.factorial(np.array([5]), exact=True)[0], x)
    assert value == 7.0 * 120 and np.array_equal(g, [120.0, 120.0])
    with pytest.raises(UnsupportedOperationError, match="factorial2 of traced values"):
        mutad.gradient(lambda x: np.sum(scipy.special.factorial2(x, extend="complex").real), x)
    with pytest.raises(ValueError, match="extend='complex'"):  # SciPy's own, as in NumPy
        mutad.gradient(lambda x: np.sum(scipy.special.factorial2(x)), x)
    with pytest.raises(UnsupportedOperationError, match="extend='complex'"):
        mutad.gradient(lambda x: np.sum(scipy.special.factorial(x, extend="complex").real), x)
