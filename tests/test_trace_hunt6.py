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
