"""Wrong answers found in traced and forward differentiation of realistic programs, each checked
against NumPy's own run; every one failed before its fix."""

import warnings

import numpy as np
import pytest

import mutad


def _outcome(call):
    """``call()``'s value, or its exception's type and message."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 (NumPy's own, compared)
        return type(error), str(error)


# ----------------------------------------------------------------------------------------------
# NumPy's assignment drops a value's leading length-1 axes (``x[[0, 1, 2]] = v[None]``): the
# pullback of an advanced-index or masked write summed the cotangent onto the value's shape as
# onto a broadcast operand's, and a cotangent with fewer axes than the value raised
# "cannot reshape array of size 1 into shape (1,3)" where NumPy gives a value.

@pytest.mark.parametrize("key", [
    [0, 2, 4],
    np.array([5, 1, 3]),
    [-1, -2, -3],
    slice(1, 4),
])
@pytest.mark.parametrize("shape", [(1, 3), (1, 1, 3)])
def test_a_write_of_a_value_with_leading_length_one_axes(key, shape):
    def f(x):
        y = 1.5 * x
        y[key] = np.sin(x[:3]).reshape(shape)
        return (y * y * np.arange(1.0, 7.0)).sum()

    x = np.array([0.3, -1.2, 0.7, 2.0, -0.4, 1.1])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(f)(x)
    assert value == f(x.copy())
    # the same program, the value written without its leading axes
    plain = mutad.grad(lambda x: _flat_write(x, key))(x)
    np.testing.assert_allclose(grad, plain, rtol=1e-14, atol=0)
    np.testing.assert_allclose(mutad.jacfwd(f)(x), grad, rtol=1e-12, atol=1e-15)
    assert x.tobytes() == before


def _flat_write(x, key):
    y = 1.5 * x
    y[key] = np.sin(x[:3])
    return (y * y * np.arange(1.0, 7.0)).sum()


def test_a_scatter_into_rows_of_a_value_with_a_leading_axis():
    def f(x):
        y = x.reshape(2, 3).copy()
        y[[1, 0]] = x[:3].reshape(1, 1, 3) ** 2
        return (y * np.arange(6.0).reshape(2, 3)).sum()

    x = np.array([0.5, -1.0, 2.0, 0.25, 3.0, -0.5])
    grad = mutad.grad(f)(x)
    # y is x[:3]**2 in both rows: d/dx_j = 2 x_j (j + j + 3)
    expected = np.zeros(6)
    expected[:3] = 2 * x[:3] * (np.arange(3.0) * 2 + 3)
    np.testing.assert_allclose(grad, expected, rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# ``y[:2] = v`` of a value that does not broadcast to the region raised the ufunc's
# "operands could not be broadcast together with shapes (3,) (2,)" where NumPy raises
# "could not broadcast input array from shape (3,) into shape (2,)" (and np.copyto likewise);
# forward mode's ``np.multiply(a, b, out=y)`` raised np.broadcast_to's wording of the tangent's
# broadcast where NumPy's ufunc raises its own.

def _assign(key, value, target=lambda x: x.copy()):
    def f(x):
        y = target(x)
        y[key] = value(x)
        return y.sum()
    return f


@pytest.mark.parametrize("f", [
    _assign(slice(0, 2), lambda x: x[:3]),
    _assign(slice(0, 3), lambda x: x.reshape(2, 3)),
    _assign(slice(0, 2), lambda x: x[:3], lambda x: np.zeros(6)),
    _assign((0,), lambda x: x[:2], lambda x: x.reshape(2, 3).copy()),
    _assign((slice(None), 0), lambda x: x[:2].reshape(2, 1), lambda x: x.reshape(2, 3).copy()),
    _assign(slice(0, 2), lambda x: [x[0], x[1], x[2]]),
    lambda x: (lambda y: (np.copyto(y, x[:3]), y.sum())[1])(x[:2].copy()),
    lambda x: (lambda y: (np.multiply(x[:3], 2.0, out=y), y.sum())[1])(np.zeros(2)),
    lambda x: (lambda y: (np.multiply(x[:3], 2.0, out=y), y.sum())[1])(x[:2].copy()),
])
def test_an_assignment_that_does_not_broadcast_raises_numpys_error(f):
    x = np.arange(6.0)
    expected = _outcome(lambda: f(x.copy()))
    assert expected[0] is ValueError
    assert _outcome(lambda: mutad.value_and_grad(f)(x)) == expected
    assert _outcome(lambda: mutad.jvp(f, (x,), (np.ones(6),))) == expected
    assert np.array_equal(x, np.arange(6.0))


# ----------------------------------------------------------------------------------------------
# The symmetry check of eigh, eigvalsh and cholesky subtracted the matrix's transpose from it
# and warned "invalid value encountered in subtract" of an infinite diagonal (inf - inf), where
# NumPy's eigvalsh warns of nothing.

@pytest.mark.parametrize("f", [
    lambda a: np.linalg.eigvalsh(a).sum(),
    lambda a: np.linalg.eigh(a)[0].sum(),
    lambda a: np.linalg.eigvalsh(a + 0j).sum(),
])
def test_the_symmetry_check_of_an_infinite_matrix_warns_of_nothing(f):
    a = np.array([[np.inf, 1.0], [1.0, 2.0]])
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        f(a)
    assert not heard
    for call in (lambda: mutad.value_and_grad(f)(a), lambda: mutad.jvp(f, (a,), (np.eye(2),))):
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            call()
        assert [str(w.message) for w in heard
                if ", in the gradient" not in str(w.message)
                and ", in a tangent" not in str(w.message)] == []


# ----------------------------------------------------------------------------------------------
# np.ptp is NumPy's ufunc np.subtract of the maximum and the minimum, whose overflow NumPy words
# "overflow encountered in subtract"; the rule subtracted NumPy's scalars by Python's operator,
# whose scalar math says "in scalar subtract".

@pytest.mark.parametrize("f", [lambda x: np.ptp(x), lambda x: np.ptp(x.reshape(2, 2), axis=1).sum()])
def test_the_overflow_of_a_peak_to_peak_range_is_worded_as_numpys(f):
    x = np.array([1e308, -1e308, 1e308, -1e308])

    def heard(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = call()
        return value, [str(w.message) for w in caught if ", in the gradient" not in str(w.message)
                       and ", in a tangent" not in str(w.message)]

    expected, messages = heard(lambda: f(x))
    assert messages == ["overflow encountered in subtract"]
    value, heard_traced = heard(lambda: mutad.value_and_grad(f)(x)[0])
    assert heard_traced == messages and value == expected and type(value) is type(expected)
    assert heard(lambda: mutad.jvp(f, (x,), (np.ones(4),))[0])[1] == messages


# ----------------------------------------------------------------------------------------------
# Events of what a rule computes beside NumPy's value are not NumPy's: np.linalg.lstsq's rule
# computed the pseudo-inverse its gradient reads as the value was computed, and its underflow
# at a tiny matrix was reported as the program's event (an extra warning; under
# np.errstate(all="raise") an error where NumPy gives a value); np.linalg.eigvals' check for
# repeated eigenvalues squared the entries of a matrix of 1e300s ("overflow encountered in
# square"), and that overflow made every pair of its eigenvalues repeated.

def _of_the_program(call):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        value = call()
    return value, [str(w.message) for w in heard if ", in the gradient" not in str(w.message)]


def test_the_pseudo_inverse_of_a_least_squares_gradient_is_the_gradients():
    f = lambda a: np.linalg.lstsq(a, np.ones(2), rcond=None)[0].sum()
    a = np.array([[1e-320, 0.0], [0.0, 1e-320]])
    expected, heard = _of_the_program(lambda: f(a))
    (value, _), heard_traced = _of_the_program(lambda: mutad.value_and_grad(f)(a))
    assert heard_traced == heard == [] and value == expected
    with np.errstate(all="raise"):
        f(a)
        with pytest.raises(FloatingPointError, match="in the gradient of np.linalg.lstsq"):
            mutad.value_and_grad(f)(a)


def test_the_eigenvalues_of_a_matrix_of_huge_entries():
    f = lambda a: np.abs(np.linalg.eigvals(a))[1] - np.abs(np.linalg.eigvals(a))[0]
    a = np.array([[1e300, 2e300], [0.5e300, 1e300]])
    (value, grad), heard = _of_the_program(lambda: mutad.value_and_grad(f)(a))
    assert heard == _of_the_program(lambda: f(a))[1] == [] and value == f(a)
    np.testing.assert_allclose(grad, mutad.grad(f)(a / 1e300), rtol=1e-12)  # f is homogeneous


# ----------------------------------------------------------------------------------------------
# jacfwd of a function with an integer output (an index beside the values) raised Python's
# "TypeError: 'NoneType' object is not subscriptable" from the batched pass, whose integer
# output has no tangent, where jacrev raises the NonScalarOutputError that names it.

# An output beside the float ones that has no derivative (an index, an iteration count, a mask,
# a label, None) has the Jacobian None, as an argument's leaf that is not a float; only a
# function with no float output at all is refused.

def test_a_forward_jacobian_of_an_integer_output_alone_is_refused_by_name():
    x = np.array([0.5, 2.0, 1.0])
    for jacobian in (mutad.jacfwd, mutad.jacrev, lambda f: lambda x: mutad.jacobian(f, x)):
        with pytest.raises(mutad.errors.NonScalarOutputError, match="not int64"):
            jacobian(lambda x: np.argmax(x))(x)
        with pytest.raises(mutad.errors.NonScalarOutputError, match="return out"):
            jacobian(lambda x: None)(x)


@pytest.mark.parametrize("f, expected", [
    (lambda x: (x * 2, np.argmax(x)), lambda x: (2 * np.eye(3), None)),
    (lambda x: {"y": x[:2] ** 2, "iterations": 3, "converged": True, "method": "newton",
                "info": None},
     lambda x: {"y": np.diag(2 * x)[:2], "iterations": None, "converged": None,
                "method": None, "info": None}),
    (lambda x: [x > 1.0, np.sin(x).sum(), np.arange(2)],
     lambda x: [None, np.cos(x), None]),
], ids=["index", "dict of counts and flags", "mask and integers"])
def test_a_jacobian_of_outputs_without_derivative_beside_floats_is_none_for_them(f, expected):
    x = np.array([0.5, 2.0, 1.0])
    for jacobian in (mutad.jacfwd, mutad.jacrev, lambda f: lambda x: mutad.jacobian(f, x)):
        result = jacobian(f)(x)
        want = expected(x)
        leaves = list(want.values()) if isinstance(want, dict) else list(want)
        got = list(result.values()) if isinstance(result, dict) else list(result)
        assert type(result) is type(want) and len(got) == len(leaves)
        for J, E in zip(got, leaves):
            assert (J is None) if E is None else np.allclose(J, E, rtol=1e-15, atol=0)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.solve of an ill-conditioned matrix warns once (LinAlgWarning); its derivative
# solves with the same matrix, and warned the same again, in both modes.

@pytest.mark.parametrize("assume_a", [None, "pos", "sym"])
def test_an_ill_conditioned_solve_warns_once(assume_a):
    import scipy.linalg

    def f(a):
        return scipy.linalg.solve(a, np.ones(2), assume_a=assume_a).sum()

    a = np.array([[1.0, 2.0], [2.0, 4.0 + 1e-15]])

    def warned(call):
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            call()
        return [(w.category, str(w.message)) for w in heard]

    expected = warned(lambda: f(a))
    assert [category for category, _ in expected] == [scipy.linalg.LinAlgWarning]
    assert warned(lambda: mutad.value_and_grad(f)(a)) == expected
    assert warned(lambda: mutad.jvp(f, (a,), (np.eye(2),))) == expected
