"""The bits of a differentiated program's value are NumPy's own, a NaN's sign and payload too,
and a derivative beyond the floats is the infinity of its exact sign. A SciPy solver calls the
functions handed to it more times than NumPy's run does, as docs/sharp-bits.md says.

NumPy computes ``a + b`` and ``a * b`` of two of its scalars (a reduction's result, ``x[0]``)
with its scalar math, whose NaN is the other operand's where both are NaN (the compiler orders
a commutative operation's operands), and ``np.add`` of them with its loops. Every mode gives the
value NumPy's run of the program gives, bit for bit, recorded and replayed alike.
"""

import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.optimize
from numpy.testing import assert_array_equal

import mutad
from mutad.engines.products import product_times

NAN = np.float64(np.nan)
X = np.array([-0., 2, 1, -0., -1, 2])
Y = np.array([-1, -1, -0., np.inf, 2, 2])  # x * y: -0.0 * inf, the machine's NaN (-nan on x86)


def sorted_and_plain_sums(x, y):
    return np.sort(x * y).sum() + (x * y).sum()


def product_of_sums(x, y):
    return np.sort(x * y).sum() * (x * y).sum()


def elements(x, y):
    total = x[0] * y[3]
    total += np.sort(x * y)[-1]
    return total * (x[1] + y[1]) + x[3] * y[3]


def condition_number(x, y):
    return np.linalg.cond(np.array([[2, x[3] * y[3]], [x[2], 3]]), "fro")


def ufunc_of_scalars(x, y):
    return np.add(np.sort(x * y).sum(), (x * y).sum())  # the loop's NaN, not scalar math's


PROGRAMS = [sorted_and_plain_sums, product_of_sums, elements, condition_number, ufunc_of_scalars]


def _bits(v):
    return np.asarray(v).tobytes()


def _numpys(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args)


@pytest.mark.parametrize("f", PROGRAMS)
def test_value_is_numpys_bit_for_bit(f):
    x, y = X.copy(), Y.copy()
    expected = _numpys(f, X, Y)
    assert np.isnan(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, _ = mutad.value_and_grad(f, argnums=(0, 1))(x, y)
        forward, _ = mutad.jvp(f, (x, y), (np.ones(6), np.ones(6)))
    assert _bits(value) == _bits(expected)
    assert _bits(forward) == _bits(expected)
    assert _bits(x) == _bits(X) and _bits(y) == _bits(Y)


@pytest.mark.parametrize("f", PROGRAMS)
def test_replay_gives_numpys_nan(f):
    """Recorded where no NaN appears, replayed where one does, and the other way round."""
    finite = Y.copy()
    finite[3] = 5.0
    g = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for y in (finite, Y, finite, Y):
            value, _ = g(X.copy(), y.copy())
            assert _bits(value) == _bits(_numpys(f, X, y))


def test_scalar_math_nan_of_either_sign():
    """``np.float64`` operators beside traced scalars, NaNs of both signs, in each order."""
    def f(x):
        a, b = x[0] * np.inf, x[1] * np.inf  # NaN of 0 * inf beside a NaN of the input
        return (a + b) * (b + a) + np.float64(-NAN) * a + a * NAN + x[2] * x[3]

    for x0, x1 in ((0.0, NAN), (0.0, -NAN), (-NAN, 0.0), (NAN, -0.0)):
        x = np.array([x0, x1, NAN, -NAN])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = f(x)
            value, _ = mutad.value_and_grad(f)(x.copy())
            replayed = mutad.value_and_grad(f, replay=True)
            replayed(x.copy())
            again, _ = replayed(x.copy())
        assert _bits(value) == _bits(expected) == _bits(again)


def test_replay_takes_scalar_maths_nan_beside_a_reductions():
    """A reduction's result beside a power of elements, recorded where both are NaN."""
    def f(x):
        return (x ** 2).sum() + x[0] ** x[1]

    recorded = np.array([NAN, -NAN, 0.0, 3.0])
    x = np.array([-NAN, 1.0, np.inf, 0.0])  # -nan + nan: NumPy's scalar math gives nan
    g = mutad.value_and_grad(f, replay=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g(recorded.copy())
        for _ in range(3):
            assert _bits(g(x.copy())[0]) == _bits(f(x))


W = np.array([[1, -2], [0.5, 3]])


@pytest.mark.parametrize("solve", [np.linalg.solve, scipy.linalg.solve_triangular],
                         ids=["solve", "solve_triangular"])
def test_cotangent_past_the_floats_has_the_exact_sign(solve):
    """At A = 1e-200 I the gradient of sum(A⁻¹ W) is 1e400 times that at I: beyond the floats,
    the infinity of the exact sign, not that of the term a product's sum overflowed on first."""
    a = 1e-200 * np.eye(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (g,) = mutad.gradient(lambda a: np.sum(solve(a, W)), a.copy())
    (at_identity,) = mutad.gradient(lambda a: np.sum(solve(a, W)), np.eye(2))
    assert np.all(np.isfinite(at_identity))
    assert_array_equal(g, np.where(at_identity != 0, np.copysign(np.inf, at_identity), 0.0))
    assert _bits(a) == _bits(1e-200 * np.eye(2))


def test_product_past_the_floats_keeps_finite_elements_bits():
    u = np.array([[1e200, 1e200], [1.0, 3.0]])
    v = np.array([[1e200, 1.0], [-2e200, 0.1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        product = product_times(np.matmul, u, v)
        plain = u @ v
    assert product[0, 0] == -np.inf  # 1e400 - 2e400
    assert np.isfinite(plain[1]).all() and _bits(product[1]) == _bits(plain[1])
    assert _bits(product[0, 1]) == _bits(plain[0, 1])


def _counted(solve):
    """``f`` handing a counting function to ``solve``, and the list it appends to."""
    calls = []

    def f(x):
        def fun(t):
            calls.append(1)
            return t ** 3 + t - x[0]
        return solve(fun) + len(calls) * x[1]

    return f, calls


def test_a_solvers_extra_calls_are_documented():
    """docs/sharp-bits.md, "What the function leaves in your state": a root finder of one
    unknown calls the user's function twice more (at the root, and for f'(x*)) in either mode,
    after SciPy's own run, whose root is SciPy's."""
    f, calls = _counted(lambda fun: scipy.optimize.brentq(fun, -100, 100))
    x = np.array([2.0, 1.0])
    expected = f(x)
    numpys = len(calls)
    root = expected - numpys * x[1]
    calls.clear()
    value, _ = mutad.value_and_grad(f)(x.copy())
    assert len(calls) == numpys + 2 and value == root + len(calls) * x[1]
    calls.clear()
    value, _ = mutad.jvp(f, (x.copy(),), (np.ones(2),))
    assert len(calls) == numpys + 2 and value == root + len(calls) * x[1]


@pytest.mark.parametrize("solve", [
    lambda fun: scipy.integrate.quad(fun, 0.0, 1.0)[0],
    lambda fun: scipy.optimize.root(fun, np.ones(1)).x[0],
], ids=["quad", "root"])
def test_other_solvers_call_again_too(solve):
    f, calls = _counted(solve)
    x = np.array([2.0, 1.0])
    f(x)
    numpys = len(calls)
    calls.clear()
    mutad.value_and_grad(f)(x.copy())
    assert len(calls) > numpys
