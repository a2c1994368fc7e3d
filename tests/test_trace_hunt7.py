"""Wrong answers found in traced, forward and second-order differentiation at special values,
each checked against NumPy's own run bit for bit; every one failed before its fix."""

import numpy as np
import pytest

import mutad

inf, nan = np.inf, np.nan


def bits(v):
    return np.asarray(v).tobytes()


# ----------------------------------------------------------------------------------------------
# np.prod's and np.cumprod's derivatives took the product of the other factors as prod / x (and
# y / x along a cumulative product) wherever no factor was zero: beside an infinity that is
# inf / inf, beside a NaN NaN for every element, and where the product overflows or underflows
# inf / x or 0 / x, where the others' product is finite. They are now taken without dividing
# wherever a product is not finite and normal (exclusive products; cumprod step by step).

def exclusive(x):
    return np.array([np.prod(np.delete(x, k)) for k in range(x.size)])


PRODUCTS = [np.array([inf, -inf, 1.0, 2.0, -1.0]), np.array([nan, 1.0, 2.0, -1.0, 0.5]),
            np.array([1e-200, 1e-200, 1e200, 2.0]), np.array([1e200, 1e200, 1e-200, 0.5]),
            np.array([0.0, inf, 2.0])]


@pytest.mark.parametrize("x", PRODUCTS, ids=str)
@pytest.mark.parametrize("reduce", [np.prod, np.nanprod, np.multiply.reduce])
def test_the_derivatives_of_prod_beside_infinities_nans_and_beyond_the_floats(x, reduce):
    def f(x):
        x *= 1.0  # in place
        return reduce(x)

    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    others = exclusive(x) if reduce is not np.nanprod else np.where(
        np.isnan(x), 0.0, exclusive(np.where(np.isnan(x), 1.0, x)))
    np.testing.assert_array_equal(g, others)
    for k in range(x.size):  # forward mode: the other factors' product, direction by direction
        e = np.zeros_like(x)
        e[k] = 1.0
        _, t = mutad.jvp(f, (x.copy(),), (e,))
        np.testing.assert_array_equal(t, others[k])


@pytest.mark.parametrize("x", [np.array([inf, 2.0, 3.0]), np.array([nan, 2.0, 0.5, 4.0]),
                               np.array([1e200, 1e200, 1e-200, 3.0]),
                               np.array([1e-200, 1e-200, 1e200, 3.0])], ids=str)
def test_the_derivatives_of_cumprod_beside_infinities_nans_and_beyond_the_floats(x):
    w = np.arange(1.0, x.size + 1)

    def f(x):
        x *= 1.0  # in place
        return np.cumprod(x) @ w

    # d y[i] / d x[k] = the product of x[:i + 1] but x[k], taken in NumPy's order
    jac = np.array([[np.prod(np.delete(x[:i + 1], k)) if k <= i else 0.0 for k in range(x.size)]
                    for i in range(x.size)])
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    with np.errstate(invalid="ignore"):
        expected = np.array([np.sum(np.where(jac[:, k] == 0, 0.0, w * jac[:, k]))
                             for k in range(x.size)])
    np.testing.assert_allclose(g, expected, rtol=1e-15)  # sums in another order
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = 1.0
        y, t = mutad.jvp(np.cumprod, (x.copy(),), (e,))
        assert bits(y) == bits(np.cumprod(x))
        np.testing.assert_allclose(t, jac[:, k], rtol=1e-15)
