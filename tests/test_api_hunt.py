"""The public API's contracts on the kinds of arguments a caller passes: what type and dtype a
derivative comes back as, and that every route (traced, replayed, forward) agrees."""

import numpy as np
import pytest

import mutad


def _square(a, b):
    return a * a * b


@pytest.mark.parametrize("x", [np.float32(1.1), np.float16(1.1), np.float64(1.1),
                               np.longdouble(1) / 3])
def test_gradient_of_a_numpy_scalar_is_a_numpy_scalar_of_its_dtype(x):
    """A NumPy scalar's gradient is NumPy's scalar of its dtype, as an array's is an array of
    its dtype, traced and replayed alike (a longdouble's lost its bits as a Python float)."""
    b = x.dtype.type(3)
    expected = x.dtype.type(2) * (x * b)  # NumPy's own arithmetic in x's dtype
    gradients = [mutad.gradient(_square, x, b)[0],
                 *[mutad.grad(_square, replay=True)(x, b) for _ in range(3)]]
    for g in gradients:
        assert type(g) is type(x)
        assert g.tobytes() == expected.tobytes()
    jvp = mutad.jvp(lambda a: _square(a, b), (x,), (x.dtype.type(1),))[1]
    assert type(jvp) is type(x) and jvp.tobytes() == expected.tobytes()


def test_jacobian_and_hessian_of_numpy_scalars_keep_their_dtype():
    x = np.longdouble(1) / 3
    J = mutad.jacobian(lambda a: a * a, x)
    assert type(J) is np.longdouble and J == 2 * x
    H = mutad.hessian(lambda a: a * a * a, x)
    assert type(H) is np.longdouble and H == 6 * x
    assert type(mutad.hessian(lambda a: a * a * a, np.float32(2.0))) is np.float32


def test_derivatives_of_python_numbers_stay_python_numbers():
    assert type(mutad.gradient(_square, 2.0, 3.0)[0]) is float
    assert type(mutad.grad(_square, replay=True)(2.0, 3.0)) is float
    assert type(mutad.gradient(lambda z: (z * z).real, 1.0 + 2.0j)[0]) is complex
    assert type(mutad.jacobian(lambda a: a * a, 2.0)) is float
    assert type(mutad.hessian(lambda a: a * a * a, 2.0)) is float


@pytest.mark.parametrize("primal, tangent", [(np.array([1, 2, 3]), np.ones(3)), (3, 1.0),
                                             (True, 1.0), (np.int64(2), np.float64(2))])
def test_jvp_refuses_a_tangent_for_an_integer_primal(primal, tangent):
    """A tangent for an integer or boolean primal was dropped: the derivative along it
    silently left out of the result (JAX refuses it too)."""
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(mutad.errors.InvalidArgumentError, match="not differentiated"):
        mutad.jvp(lambda a, n: a * n, (x, primal), (np.ones(3), tangent))
    with pytest.raises(mutad.errors.InvalidArgumentError, match="not differentiated"):
        mutad.hvp(lambda a, n: (a * a * n).sum(), (x, primal), (np.ones(3), tangent))


def test_jvp_takes_none_or_zeros_for_an_integer_primal():
    x = np.array([1.0, 2.0, 3.0])
    for n, tangent in [(np.array([1, 2, 3]), None), (np.array([1, 2, 3]), np.zeros(3)),
                       (2, 0.0)]:
        y, dy = mutad.jvp(lambda a, n: a * n, (x, n), (np.ones(3), tangent))
        assert np.array_equal(y, x * n) and np.array_equal(dy, np.ones(3) * n)


_OF_ANOTHER_DTYPE = {  # f and an argument, whose output's dtype is not the argument's
    "float64 to float32": (lambda a: np.sin(a).astype(np.float32), np.array([1.0, 2.0, 3.0])),
    "float32 to float64": (lambda a: np.sin(a.astype(np.float64)),
                           np.array([1.0, 2.0, 3.0], np.float32)),
    "float64 to a float32 sum": (lambda a: np.sin(a).astype(np.float32).sum(),
                                 np.array([1.0, 2.0])),
    "float64 to float16, 2-d": (lambda a: (a * a).astype(np.float16), np.ones((2, 2)) / 3),
    "Python float to float32": (lambda a: np.float32(np.sin(a)), 1.0),
    "empty float64 to float32": (lambda a: np.sin(a).astype(np.float32), np.ones((2, 0))),
}


@pytest.mark.parametrize("case", sorted(_OF_ANOTHER_DTYPE))
def test_a_jacobian_has_its_outputs_dtype_in_either_mode(case):
    """Regression: jacrev's rows, gradients, had the argument's dtype: a float64 Jacobian of a
    float32 output where jacfwd gave float32, and jacobian either, by the mode it took (a
    float32 sum of two float64 elements: reverse mode, float64). Each has the output's dtype
    now, as forward mode's columns do."""
    f, x = _OF_ANOTHER_DTYPE[case]
    forward, reverse, either = mutad.jacfwd(f)(x), mutad.jacrev(f)(x), mutad.jacobian(f, x)
    assert type(reverse) is type(forward) is type(either)
    assert np.result_type(reverse) == np.result_type(forward) == np.result_type(either) == \
        np.result_type(f(x))
    np.testing.assert_allclose(np.float64(reverse), np.float64(forward), rtol=1e-6)
    np.testing.assert_allclose(np.float64(either), np.float64(forward), rtol=1e-6)


def test_derivatives_with_respect_to_empty_arrays_keep_the_dtype_of_the_others():
    """Without columns, the Jacobian and Hessian blocks were float64 whatever the dtypes: an
    empty float32 argument gives float32 blocks, as one with elements does."""
    x32, empty32 = np.ones(3, np.float32), np.ones((0, 2), np.float32)
    for x in (x32, empty32):
        assert mutad.jacobian(lambda a: a * 2, x).dtype == np.float32
        assert mutad.jacobian(lambda a: (a * 2).astype(np.float16), x).dtype == np.float16
        assert mutad.hessian(lambda a: (a * a).sum(), x).dtype == np.float32
    H = mutad.hessian(lambda a, b: (a * a).sum() * b.sum(), empty32, np.ones(2), argnums=(0, 1))
    assert [[block.dtype for block in row] for row in H] == [[np.float32, np.float32],
                                                             [np.float64, np.float64]]
    assert H[0][1].shape == (0, 2, 2) and H[1][0].shape == (2, 0, 2)
