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
