"""``x.shape = ...`` reshapes an array made inside the function in place, as NumPy does (a
Mandelbrot kernel reshapes its work arrays so), in both modes and under replay; an argument's
array stands for the caller's and keeps its shape, a view of it is reshaped as NumPy reshapes
that view; where no view exists, NumPy's error."""

import numpy as np
import pytest

import mutad
from test_replay import replayed_like_traced


def kernel(c):
    z = np.zeros(6)
    z.shape = (2, 3)
    w = c.reshape(2, 3) * 1.0
    w.shape = (3, 2)
    z2 = z + w.reshape(2, 3) ** 2
    z2.shape = (6,)
    z2 *= c
    return (z2 * c).sum()


def test_an_array_made_inside_is_reshaped_in_place():
    c = np.arange(6.0)
    before = c.tobytes()
    assert mutad.value_and_grad(kernel)(c)[0] == kernel(c)
    mutad.check_grads(kernel, c)
    assert mutad.jvp(kernel, (c,), (np.ones(6),))[0] == kernel(c)
    assert c.tobytes() == before
    replayed_like_traced(kernel, [(c,), (c + 1.0,), (c - 2.0,)])


def test_an_arguments_shape_stays():
    for differentiate in (lambda f, c: mutad.gradient(f, c),
                          lambda f, c: mutad.jvp(f, (c,), (np.ones(6),))):
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="reshape"):
            differentiate(lambda c: (setattr(c, "shape", (3, 2)), c.sum())[1], np.ones(6))


def views_reshaped(a):
    b = a.view()  # a new object over the argument's memory: NumPy reshapes it alone
    b.shape = (a.size,)
    b[::2] *= 3.0
    v = a.ravel()
    v.shape = (3, 2)
    v[:, 0] *= v[:, 1]
    return (a ** 2).sum() + v[0, 0]


def test_a_view_of_an_argument_is_reshaped_in_place():
    a = np.arange(1.0, 7.0).reshape(2, 3)
    before = a.tobytes()
    assert mutad.value_and_grad(views_reshaped)(a)[0] == views_reshaped(a.copy())
    mutad.check_grads(views_reshaped, a)
    assert mutad.jvp(views_reshaped, (a,), (np.ones((2, 3)),))[0] == views_reshaped(a.copy())
    h = mutad.hessian(views_reshaped, a).reshape(6, 6)
    np.testing.assert_allclose(h, h.T)
    assert a.tobytes() == before and a.shape == (2, 3)
    replayed_like_traced(views_reshaped, [(a,), (a + 1.0,), (a - 2.0,)])


WORK = np.zeros(6)


def test_an_adopted_arrays_shape_stays():
    def f(c):
        WORK[:] = c
        WORK.shape = (3, 2)
        return (WORK ** 2).sum()

    for differentiate in (lambda c: mutad.gradient(f, c),
                          lambda c: mutad.jvp(f, (c,), (np.ones(6),))):
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="reshape"):
            differentiate(np.ones(6))
    assert WORK.shape == (6,)


def test_numpys_error_where_no_view_exists():
    def f(c):
        w = (c.reshape(2, 3) * 1.0).T
        w.shape = (6,)
        return w.sum()

    with pytest.raises(AttributeError, match="Incompatible shape"):
        mutad.gradient(f, np.ones(6))
