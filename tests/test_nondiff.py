"""Functions whose outputs carry no gradient (``mutad/rules/nondiff.py``, and SciPy's in
``mutad/scipy/special.py``): they run on plain values in both modes, and a program using them
is differentiated through its other operations."""

import numpy as np
import pytest
import scipy.special

import mutad
from test_replay import program_count, replayed_like_traced, same

PROGRAMS = {
    "iscomplex": lambda x: x * (1.0 + np.iscomplex(x)) + np.sin(x) * np.iscomplex(x * x),
    "isreal": lambda x: np.sin(x) * np.isreal(x) + x * np.sum(np.isreal(2.0 * x)),
    "gammasgn": lambda x: x * scipy.special.gammasgn(x) + scipy.special.gammasgn(-x) * x * x,
    "special.round": lambda x: x * scipy.special.round(3.0 * x) + scipy.special.round(x) * x * x,
    # regression: refused as functions without a rule
    "nanargmax": lambda x: x * np.nanargmax(np.atleast_1d(np.where(x > 2.0, np.nan, x)))
    + x * x * np.nanargmin(np.atleast_1d(x)),
}


@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_predicates_and_signs_are_plain_in_both_modes(program):
    x = np.array([0.7, -1.3, 2.2])
    mutad.check_grads(program, x)
    mutad.check_jvp(program, x)
    mutad.check_grads(program, x, order=2)
    mutad.check_grads(program, 0.4)


# A function without a derivative writing into a traced array: the write ends the gradient of
# what the array held, in both modes, and its values are NumPy's (its own call, into an array
# of out's dtype: float32 rounds at each of np.round's steps).
WRITES = {
    "round": lambda x, y: np.round(x * 10, out=y),
    "around, out by position": lambda x, y: np.around(x * 10, 1, y),
    "ndarray.round": lambda x, y: (x * 3).round(1, out=y),
    "fix": lambda x, y: np.fix(x * 10, out=y),
    "fix, broadcast into out": lambda x, y: np.fix(x[0] * 10, out=y),
    "round, out is the operand": lambda x, y: np.round(y, 1, out=y),
    "round, reversed operand": lambda x, y: np.round(y[::-1] * 7, 1, out=y),
    "round into the argument": lambda x, y: np.round(x * 10, out=x),
    "round into float32": lambda x, y: np.round(x * 10, 1, out=y),
}


def _writing(write, dtype=np.float64):
    def f(x):
        y = x.astype(dtype) * 1.0
        write(x, y)
        return (y * x).sum() + (x * x).sum()
    return f


@pytest.mark.parametrize("name", WRITES)
def test_a_function_without_a_derivative_writing_into_out(name):
    f = _writing(WRITES[name], np.float32 if "float32" in name else np.float64)
    x = np.array([0.423, 0.612, 0.271, 0.334, 0.741])  # away from rounding's steps
    before = x.tobytes()
    expected = f(x.copy())
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert same(value, expected) and x.tobytes() == before
    value, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert same(value, expected) and x.tobytes() == before
    rounded = np.round(x * 10)  # constants: no gradient flows through what out held before
    if name == "round":
        assert np.array_equal(grad, rounded + 2 * x)
    if name == "round into the argument":
        assert np.array_equal(grad, rounded)
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    mutad.check_grads(f, x, order=2)
    replaying = replayed_like_traced(f, [(x + 0.01 * k,) for k in range(3)])
    if "float32" in name or "broadcast" in name:  # not NumPy's call without out=: traced
        (reason,) = replaying.reasons.values()
        assert "another dtype or shape" in reason
    else:
        assert program_count(replaying) == 1 and not replaying.reasons


def test_einsum_path_plans_a_contraction_that_einsum_then_follows():
    A = np.arange(12.0).reshape(3, 4) / 10.0

    def f(x):
        path, text = np.einsum_path("ij,j,j,i->", A, x, x, x[:3], optimize="optimal")
        if path[0] != "einsum_path" or not isinstance(text, str):
            raise TypeError("not NumPy's plan")  # (no assert: pytest's rewriting is reached)
        return np.einsum("ij,j,j,i->", A, x, x, x[:3], optimize=path)

    x = np.array([0.3, -0.7, 1.1, 0.5])
    saved = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x)).tobytes()
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    from cases import replays_as_traced
    replays_as_traced(f, [(x,), (np.array([1.5, 0.25, -2.0, 0.75]),)])
    assert x.tobytes() == saved


def test_text_of_traced_values_is_numpys_in_both_modes_and_replayed():
    """Regression: np.array2string, array_repr and array_str of a traced array (a program
    logging its state) were refused as functions without a rule; their text is NumPy's, and
    the program is differentiated through its other operations, replayed as traced."""
    shown = []

    def state(x):
        u = x * 1.0
        u[1:] += 0.5 * u[:-1]
        return u

    def text(u):
        return np.array2string(u, precision=3) + np.array_repr(u[1:3]) + np.array_str(u)

    def f(x):
        u = state(x)
        shown.append(text(u))
        return (u * u).sum()

    x = np.array([0.7, -1.3, 2.2])
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    shown.clear()
    mutad.gradient(f, x)
    mutad.jvp(f, (x,), (np.ones_like(x),))
    assert shown == [text(state(x))] * 2
    replaying = replayed_like_traced(f, [(x * s,) for s in (1.0, 2.0, -1.0, 3.0)])
    shown.clear()
    replaying(x * 5.0)  # a replayed call logs its own state
    assert shown == [text(state(x * 5.0))]
