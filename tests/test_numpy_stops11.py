"""NumPy programs that stopped with an error of mutad's, or another error than NumPy's, where
NumPy gives a value or raises its own."""

import numpy as np
import pytest

import mutad

X = np.array([0.3, -0.7, 1.1, 0.4])


# ----------------------------------------------------------------------------------------------
# np.errstate inside f: a category set to "call" with no callback raises NumPy's NameError


def _called_without_a_callback(x):
    with np.errstate(divide="call", invalid="ignore"):
        return (x / np.zeros(4)).sum() + np.log(x - 1.0).sum()


@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x),
    lambda f, x: mutad.grad(f, replay=True)(x),
    lambda f, x: mutad.jvp(f, (x,), (x,)),
], ids=["reverse", "replay", "forward"])
def test_a_category_set_to_call_with_no_callback_raises_numpys_name_error(differentiate):
    with pytest.raises(NameError) as numpys:
        _called_without_a_callback(X)
    with pytest.raises(NameError) as ours:
        differentiate(_called_without_a_callback, X)
    assert str(ours.value) == str(numpys.value)
