"""Wrong answers found by a hunt over traced, replayed and forward-mode programs: each test
fails without its fix."""

import math
import warnings

import numpy as np
import pytest

import mutad


def _run(compute):
    """``compute()``'s value (or the type of its error), as its repr, and the messages of the warnings it
    issued, those of mutad's derivatives (labelled so) left out."""
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            value = compute()
        except Exception as error:  # noqa: BLE001 (compared with NumPy's)
            value = type(error)
    return repr(value), [str(w.message) for w in issued
                   if ", in the gradient of " not in str(w.message)
                   and ", in a tangent" not in str(w.message)]


PYTHON_FLOATS = [
    (lambda a, b: a + b, [np.inf, -np.inf]),
    (lambda a, b: a - b, [np.inf, np.inf]),
    (lambda a, b: a * b, [np.inf, 0.0]),
    (lambda a, b: a * b, [1e200, 1e200]),
    (lambda a, b: a % b, [np.inf, 1.0]),
    (lambda a, b: math.sqrt(a), [-1.0, 0.0]),
    (lambda a, b: math.log(a), [0.0, 0.0]),
    (lambda a, b: math.exp(a) * b, [1000.0, 1.0]),
    (lambda a, b: math.exp(a) * b, [-1000.0, 1.0]),
    (lambda a, b: math.dist([a], [b]), [np.inf, np.inf]),
]


@pytest.mark.parametrize("operation, values", PYTHON_FLOATS)
def test_arithmetic_of_python_floats_raises_no_numpy_event(operation, values):
    # float(x[0]) is a Python float: its arithmetic and math's functions of it warn of
    # nothing, under any np.errstate (inf - inf is nan, silently; math.sqrt(-1.0) raises
    # ValueError alone), where the NumPy loop computing it warned
    def f(x):
        return operation(float(x[0]), x[1].item())

    def raising(x):
        with np.errstate(all="raise"):
            return f(x)

    x = np.array(values)
    kept = x.copy()
    for g in (f, raising):
        expected = _run(lambda: g(x.copy()))
        assert _run(lambda: mutad.value_and_gradient(g, x)[0]) == expected
        assert _run(lambda: mutad.jvp(g, (x,), (np.ones(2),))[0]) == expected
        replayed = mutad.value_and_grad(g, replay=True)
        for y in (np.array([0.5, 0.25]), x, x, np.array([0.5, 0.25]), x):
            assert _run(lambda: replayed(y)[0]) == _run(lambda: g(y.copy()))
    np.testing.assert_array_equal(x, kept)


def _replayed_as_numpy(f, inputs):
    """``f`` traced, in forward mode and replayed on each of ``inputs`` (in that order): its
    value and warnings NumPy's, the replay's gradient the traced one, bit for bit."""
    replayed = mutad.value_and_grad(f, replay=True)
    for x in inputs:
        kept = x.copy()
        expected = _run(lambda: f(x.copy()))
        assert _run(lambda: mutad.value_and_gradient(f, x)[0]) == expected
        assert _run(lambda: mutad.jvp(f, (x,), (np.ones_like(x),))[0]) == expected
        assert _run(lambda: replayed(x)[0]) == expected
        if not expected[0].startswith("<class"):
            traced, again = mutad.grad(f)(x), replayed(x)[1]
            assert traced.tobytes() == again.tobytes()
        np.testing.assert_array_equal(x, kept)


AT_INPUTS = [np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
             np.array([-1.0, np.nan, 0.0, 4.0, -5.0, 1e300]),
             np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
             np.array([np.nan, -2.0, -np.inf, 0.0, 5.0, 6.0])]


def _sqrt_at(x):
    y = x.copy()
    np.sqrt.at(y, [0, 0, 2])
    return y.sum()


def _log_at_columns(x):
    y = x.reshape(2, 3).copy()
    np.log.at(y, (slice(None), [0, 0]))
    return (y * y).sum()


def _maximum_at(x):
    y = x.copy()
    np.maximum.at(y, [1, 1, 4], x[3:] * 2.0)
    return y.sum()


def _minimum_at_a_number(x):
    y = x.copy()
    np.minimum.at(y, [1, 1], 0.5)
    return y.sum()


def _power_at(x):
    y = x.copy()
    np.power.at(y, [0, 5, 5], x[:3] * 300.0)
    return y.sum()


@pytest.mark.parametrize("f", [_sqrt_at, _log_at_columns, _maximum_at, _minimum_at_a_number,
                               _power_at])
@pytest.mark.parametrize("raising", [False, True])
def test_ufunc_at_warns_and_raises_as_numpys_own_call(f, raising):
    # NumPy's ufunc.at words its events "in at" (np.sqrt.at of -1.0: "invalid value
    # encountered in at", not "in sqrt"), and its maximum and minimum warn of a NaN where
    # np.maximum is silent: tracing and replay warned as the ufunc's call, or not at all
    def g(x):
        if not raising:
            return f(x)
        with np.errstate(all="raise"):
            return f(x)

    _replayed_as_numpy(g, AT_INPUTS)
