"""Wrong answers found in traced and forward differentiation of realistic programs, each checked
against NumPy's own run bit for bit; every one failed before its fix."""

import numpy as np
import pytest

import mutad


def bits(v):
    v = np.asarray(v)
    return v.dtype.str, v.shape, v.tobytes()


# ----------------------------------------------------------------------------------------------
# ``.item()`` of an extended-precision element is NumPy's np.longdouble (np.clongdouble), no
# Python number: it was handed back as a plain number, so the derivative through it was lost
# (the gradient of b.sum().item() + a.sum() was 1 where it is 2). ``float()`` of one, which
# is Python's float, was that np.longdouble too: a value of the wrong type, which made the
# loss np.longdouble, and again no derivative.

def _extended_items(a):
    b = a.astype(np.longdouble)
    c = a.astype(np.clongdouble) * (1 + 1j)
    return (b.sum().item() + b[1].item() + b.reshape(2, 1).item(1, 0)
            + c[0].item().real * a[1] + a.sum())


def _float_of_extended(a):
    return float(a.astype(np.longdouble).sum()) * 2 + a[0]


@pytest.mark.parametrize("f, gradient", [(_extended_items, [4.0, 5.0]),
                                         (_float_of_extended, [3.0, 2.0])])
def test_extended_precision_items_and_floats_keep_their_derivative(f, gradient):
    x = np.array([1.0, 2.0])
    caller = x.copy()
    expected = f(x.copy())
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(expected)
    assert caller.tobytes() == x.tobytes()
    assert g.tolist() == gradient
    y, t = mutad.jvp(f, (x.copy(),), (np.array([1.0, 10.0]),))
    assert bits(y) == bits(expected)
    assert t == gradient[0] + 10 * gradient[1]
