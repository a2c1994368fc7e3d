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
    # regression: np.common_type of a traced array refused as a function without a rule
    "common_type": lambda x: np.asarray(x, dtype=np.common_type(np.atleast_1d(x))) * x
    + np.ones(1, np.common_type(np.atleast_1d(x), np.ones(2, np.float32))),
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
    replaying = replayed_like_traced(f, [(x + 0.01 * k,) for k in range(3)], replayed=False)
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
    replaying = replayed_like_traced(f, [(x * s,) for s in (1.0, 2.0, -1.0, 3.0)], replayed=False)
    shown.clear()
    replaying(x * 5.0)  # a replayed call logs its own state
    assert shown == [text(state(x * 5.0))]


# A result without a derivative (np.floor's, a comparison's, an index) is an array the function
# made: a traced value written into it is followed, as into np.zeros's, and so are the floats
# computed from a boolean or integer one ((x > 0).astype(float), np.where(x > 0, 1.0, 0.5)).
# Regression: those writing into such an array raised UntracedWriteError while tracing, and
# those writing into np.round's or np.sign's while recording for a replay too.
DECIDED = {
    "floor + 1, written": lambda x: _written_at(np.floor(x) + 1, x),
    "round copy, written": lambda x: _written_at(np.round(x * 3).copy(), x),
    "ceil, element added": lambda x: _added_at(np.ceil(x), x),
    "sign, multiplied in place": lambda x: _multiplied(np.sign(x), x),
    "rint, added in place": lambda x: _added(np.rint(x * 4), x),
    "trunc, out= into it": lambda x: _multiplied_out(np.trunc(x * 3), x),
    "modf's whole part, written": lambda x: _written_at(np.modf(x * 3)[1], x),
    "comparison astype(float), written": lambda x: _written_at((x > 0).astype(float), x),
    "comparison times 1.0, written": lambda x: _written_at((x > 0) * 1.0, x),
    "where of a comparison, multiplied": lambda x: _multiplied(np.where(x > 0, 2.0, 0.5), x),
    "argsort as floats, written": lambda x: _written_at(np.argsort(x) / 4.0, x),
    "digitize as floats, multiplied": lambda x: _multiplied(
        np.digitize(x, [-0.5, 0.0, 0.5]).astype(float), x),
    "mask and-ed in place": lambda x: _masked(x),
    "cells of a deposit": lambda x: _deposit(x),
}


def _written_at(w, x):
    w[0] = x[0] ** 2
    w[2:4] = np.sin(x[2:4])
    return (w * x).sum()


def _added_at(w, x):
    w[1] += x[1] * x[0]
    return (w * x).sum()


def _multiplied(w, x):
    w *= x
    return (w * w).sum() + w[0]


def _added(w, x):
    w += x
    return (w * x).sum()


def _multiplied_out(w, x):
    np.multiply(w, x, out=w)
    return (w * w).sum()


def _masked(x):
    m = x > -0.6
    m &= x < 0.6
    y = np.zeros_like(x)
    y[m] = x[m] ** 2
    return y.sum() + m.sum()


def _deposit(x):
    """Particle-in-cell: each particle's weight goes to the two cells around it."""
    position = 2.0 * (x + 1.0)
    cell = np.floor(position).astype(int)
    fraction = position - cell
    density = np.zeros(6)
    np.add.at(density, cell, 1.0 - fraction)
    np.add.at(density, cell + 1, fraction)
    return (density * density).sum()


# (away from every step of the functions above: their derivatives are those of NumPy's values)
DECIDED_POINTS = [np.array([0.31, -0.71, 1.21, -0.12, 0.45, 0.79]),
                  np.array([-0.37, 0.58, 0.14, -0.9, 0.55, 0.07]),
                  np.array([0.31, -0.71, 1.21, -0.12, 0.45, 0.79])]


@pytest.mark.parametrize("name", DECIDED)
def test_a_traced_value_written_into_a_result_without_a_derivative(name):
    f = DECIDED[name]
    for x in DECIDED_POINTS[:2]:
        before = x.tobytes()
        value, _ = mutad.value_and_grad(f)(x)
        assert same(value, f(x.copy())) and x.tobytes() == before
        y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
        assert same(y, f(x.copy())) and x.tobytes() == before
        mutad.check_grads(f, x, step=1e-6)
        mutad.check_jvp(f, x)
        assert x.tobytes() == before
    replaying = replayed_like_traced(f, [(np.copy(x),) for x in DECIDED_POINTS], replayed=False)
    assert not replaying.reasons


def test_results_without_a_derivative_are_numpys_arrays_to_the_program():
    """What the function gets is NumPy's (its class, values, and a view's base), and what it
    makes of them is followed: an integer index indexes, a float one holds NumPy's values."""
    def f(x):
        k = np.argsort(x)
        m = x > 0
        r = np.floor(x * 3)
        assert isinstance(k, np.ndarray) and k.dtype == np.intp and m.dtype == bool
        assert isinstance(r, np.ndarray) and r[1:].base is r
        assert np.array_equal(k, np.argsort(np.asarray(mutad.stop_gradient(x))))
        if not m.any():
            raise ValueError("a comparison decides as NumPy's does")
        return (x[k] * np.arange(4)).sum() + (x[m] ** 2).sum() + int(k[0]) * x[0]

    x = np.array([0.5, -1.25, 2.0, 0.3])
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    replayed_like_traced(f, [(x,), (-x,), (x[::-1].copy(),)], replayed=False)


def test_assertions_of_numpy_testing_on_traced_values_in_both_modes_and_replayed():
    """np.testing's assertions read the values of traced arrays (no number comes back):
    differentiated through, in both modes, and a replay asserts again on its own values.
    Regression: NumPy's code converted the traced arrays, refused as cutting a gradient."""
    from numpy.testing import assert_array_less

    def f(x):
        y = np.exp(x)
        np.testing.assert_allclose(np.log(y), x, rtol=1e-12)
        np.testing.assert_array_almost_equal(y, np.exp(x))
        np.testing.assert_equal(y.shape, (3,))
        assert_array_less(0.0, [y[0], y[1]])
        np.testing.assert_array_less(x, 1.0)
        return (y * y).sum()

    x = np.array([0.2, -0.4, 0.7])
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    replaying = replayed_like_traced(f, [(x,), (x - 0.5,), (x * 0.5,)])
    with pytest.raises(AssertionError):
        replaying(x + 1.0)  # x[2] > 1: the replayed program asserts on its own values
    with pytest.raises(AssertionError):
        mutad.gradient(f, x + 1.0)


def test_saving_traced_values_writes_numpys_bytes_in_both_modes_and_replayed():
    """np.save and np.savetxt of traced arrays write their values (nothing comes back), as
    NumPy writes them; a replay writes its own. Regression: refused as functions without a
    rule."""
    import io
    files = []

    def f(x):
        y = np.sin(x) * 2.0
        binary, text = io.BytesIO(), io.StringIO()
        np.save(binary, y)
        np.savetxt(text, y[:2])
        files.append((binary.getvalue(), text.getvalue()))
        return (y * x).sum()

    x = np.array([0.2, -0.4, 0.7])
    mutad.check_grads(f, x)
    files.clear()
    f(x.copy())
    mutad.gradient(f, x)
    mutad.jvp(f, (x,), (np.ones_like(x),))
    assert files[1:] == [files[0]] * 2
    replaying = replayed_like_traced(f, [(x,), (x * 2.0,), (x * 3.0,)], replayed=False)
    files.clear()
    replaying(x * 4.0)
    f(x * 4.0)
    assert files[0] == files[1]
