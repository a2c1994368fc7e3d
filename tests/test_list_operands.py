"""A list or tuple (of traced values or plain numbers) is an array operand, as NumPy treats it
(``x / [x @ x]`` in a Levenberg-Marquardt step, ``log_probs - [m]`` in a logsumexp,
``x ** [1.0, 2.0]``), in both modes; and ``ufunc.outer`` of every elementwise row."""

import numpy as np
import pytest
import scipy.special

import mutad

from cases import replays_as_traced

PROGRAMS = {
    "x / [x @ x]": lambda x: (x / [x @ x]).sum(),
    "array - [max]": lambda x: (np.log(x) - [x.max()]).sum(),
    "np.maximum([a, 0.0], b)": lambda x: np.maximum([x[3], 0.0], x[4]).sum(),
    "tuple + x": lambda x: ((x[0], x[1], 1.0, 2.0, 3.0) + x).sum(),
    "x * nested list": lambda x: (x[:2] * [[x[0], 1.0], [2.0, x[1]]]).sum(),
    "in place": lambda x: _in_place(x),
    "x ** [1.0, 2.0]": lambda x: (x[:2] ** [1.0, 2.0]).sum(),
    "np.arctan2(x, list)": lambda x: np.arctan2(x[:2], [1.0, 2.0]).sum(),
    "np.power.outer(x, list)": lambda x: (np.power.outer(x, [1.0, 2.0]) ** 2).sum(),
    "np.add.outer": lambda x: (np.add.outer(x, x[:2]) ** 2).sum(),
    "np.minimum.outer": lambda x: np.minimum.outer(x, 2.0 * x).sum(),
    "np.multiply.outer of 2-d": lambda x: np.multiply.outer(x.reshape(5, 1), x[:2]).sum(),
    # a list among the arrays a function joins, a list of values a write copies
    "np.concatenate([x, list])": lambda x: (np.concatenate([x, [1.0, x[0]]]) ** 2).sum(),
    "np.hstack((x, list))": lambda x: (np.hstack((x, [2.0 * x[1]])) ** 2).sum(),
    "np.vstack([list, x[:2]])": lambda x: (np.vstack([[x[0], 3.0], x[:2]]) ** 2).sum(),
    "np.stack([x[:2], list])": lambda x: (np.stack([x[:2], (x[4], x[3])]) ** 3).sum(),
    "y.put(i, list)": lambda x: _written(x, lambda y: y.put([0, 3], [x[0] * 2.0, x[1]])),
    "np.copyto(y, list)": lambda x: _written(x, lambda y: np.copyto(y, [x[2]] * 5)),
    "np.copyto(y, mixed list)": lambda x: _written(
        x, lambda y: np.copyto(y, [x[0], 1.0, x[1], 2.0, x[4]])),
    "np.put_along_axis(y, i, nested list)": lambda x: _written(
        x, lambda y: np.put_along_axis(y.reshape(5, 1), np.zeros((2, 1), int) + [[0], [3]],
                                       [[x[0]], [1.0]], 0)),
    "np.place(y, mask, list)": lambda x: _written(
        x, lambda y: np.place(y, y > 1.5, [x[4], x[0] * 3.0])),
    # a module-level array (the mode's stand-in of it) beside the list, as a camera model's
    # ``f * (P[:, :2] + [tx, ty])`` reads it; a list of traced values np.add.at scatters
    "module array + list": lambda x: ((_GRID + [x[0], x[1]]) ** 2).sum(),
    "list * module array": lambda x: ([x[2], 1.0] * _GRID[:, :2] * x[3]).sum(),
    "np.add.at(y, i, list)": lambda x: _written(x, lambda y: np.add.at(y, [0, 3], [x[1], x[2]])),
    "np.subtract.at(module array view, i, list)": lambda x: _scattered(x),
    # ndarray's methods of a module-level array that compute with their operands
    "module array.dot(list)": lambda x: (_GRID.dot([x[0], x[1]]) ** 2).sum(),
    "module array.searchsorted(list)": lambda x: _KNOTS.searchsorted([x[0], x[1]]).sum() * x[2],
}

_GRID = np.arange(6.0).reshape(3, 2)
_KNOTS = np.array([0.5, 1.7, 2.6])


def _scattered(x):
    G = _GRID.copy()
    np.subtract.at(G, ([0, 2], [1, 0]), [x[0] * x[1], x[4]])
    return (G * G).sum() * x[3]


def _written(x, write):
    y = x * 1.0
    write(y)
    return (y * y * x).sum()


def _in_place(x):
    y = x * 1.0
    y += [x[0]] * 5
    return (y * y).sum()


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_list_of_traced_values_is_an_array_operand(name):
    f = PROGRAMS[name]
    x = np.array([1.0, 2.0, 3.0, 0.5, 0.2])
    before = x.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x, modes=("rev", "fwd"))  # both modes against finite differences
    replays_as_traced(f, [(x,), (np.array([1.5, 0.25, 2.0, 0.75, 0.4]),)])
    assert x.tobytes() == before


# Lists of traced values with no traced array beside them, which NumPy would convert: the
# mode's ufuncs and functions stack them first (the arrays NumPy makes of them).
ALONE = {
    "np.exp([a, b])": lambda x: np.exp([x[0] - x[2], x[1]]).sum(),
    "np.maximum((a, b), 0.5)": lambda x: np.maximum((x[0], x[1] * x[3]), 1.5).sum(),
    "np.add.reduce([a, b])": lambda x: np.add.reduce([x[0], x[1] * 2.0]),
    "np.sum([a, b * 2])": lambda x: np.sum([x[0], x[1] * 2.0]),
    "np.asarray([x[0], x[1] ** 2])": lambda x: np.sum(np.asarray([x[0], x[1] ** 2]) ** 2),
    "np.array([[a, 1], [b, c]])": lambda x: np.array([[x[0], 1.0], [x[1], x[2]]]).prod(),
    "np.dot(list, list)": lambda x: np.dot([x[0], x[1]], [x[1], x[2]]),
    "np.outer": lambda x: np.outer([x[0], x[1]], (x[3], 2.0)).sum(),
    "np.linalg.norm([a, b])": lambda x: np.linalg.norm([x[0], x[1]]),
    "np.linalg.solve(nested, list)": lambda x: np.linalg.solve(
        [[x[0], 0.1], [0.2, x[2]]], [1.0, x[4]]).sum(),
    "np.linalg.det(nested)": lambda x: np.linalg.det([[x[0], x[1]], [x[3], x[2]]]),
    "np.fft.fft([a, b, c])": lambda x: np.abs(np.fft.fft([x[0], x[1], x[2]])).sum(),
    "np.polyval([a, b], 2.0)": lambda x: np.polyval([x[0], x[1]], 2.0),
    "np.interp(0.5, xp, [a, b])": lambda x: np.interp(0.5, [0.0, 1.0], [x[0], x[1]]),
    "np.where(mask, [a, b], 0.0)": lambda x: np.where([True, False], [x[0], x[1]], 0.0).sum(),
    "np.reshape(list, shape)": lambda x: (np.reshape([x[0], x[1], x[2], x[3]], (2, 2))
                                          @ [1.0, 2.0]).sum(),
    "np.einsum('i,i', list, list)": lambda x: np.einsum("i,i", [x[0], x[1]], [x[1], 3.0]),
    "np.clip(list)": lambda x: np.clip([x[0], x[1], x[4]], 0.5, 2.5).sum(),
    "np.cross(list, list)": lambda x: np.cross([x[0], x[1], x[2]], [1.0, 2.0, x[3]]).sum(),
}


@pytest.mark.parametrize("name", ALONE)
def test_a_list_of_traced_values_alone_is_the_array_numpy_makes(name):
    f = ALONE[name]
    x = np.array([1.0, 2.0, 3.0, 0.5, 0.2])
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x)).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))  # both modes against finite differences
    replays_as_traced(f, [(x,), (np.array([1.5, 0.25, 2.0, 0.75, 0.4]),)])
    assert x.tobytes() == before


def test_the_modes_ufuncs_are_numpys_ufuncs_to_the_code():
    def f(x):
        exp = np.exp
        assert isinstance(exp, np.ufunc) and exp.nin == 1 and exp.__name__ == "exp"
        assert exp == np.exp and {np.exp: 1}[exp] == 1
        return np.add.accumulate([x[0], x[1]]).sum() * exp(x[2])

    x = np.array([0.5, 1.5, 0.25])
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    assert type(np.exp) is np.ufunc  # NumPy's own again after


def assigns_a_list_of_traced_values(x):
    y = x * 1.0
    y[:3] = [x[2], x[1] * 2.0, 5.0]      # a list with traced items and a number
    x[1:3] = (x[0], 2.0)                 # into the argument itself
    return (y * y).sum() + (x * x).sum()


def test_a_list_of_traced_values_assigned_into_a_slice():
    """x[:3] = [x[2], 2 * x[1], 5.0] stopped in reverse mode (a misleading "plain array"
    error) and gave a NaN tangent in forward mode: the list is the array NumPy makes of it."""
    x = np.arange(1.0, 5.0)
    assert mutad.value_and_grad(assigns_a_list_of_traced_values)(x)[0] == \
        assigns_a_list_of_traced_values(x.copy())
    mutad.check_grads(assigns_a_list_of_traced_values, x, order=2)
    replaying = mutad.grad(assigns_a_list_of_traced_values, replay=True)
    for scale in (1.0, 2.0):
        assert replaying(x * scale).tobytes() == \
            mutad.grad(assigns_a_list_of_traced_values)(x * scale).tobytes()


JOINS_OF_LISTS = {
    "column_stack": lambda x: np.column_stack(([x[0], x[1]], [1.0, x[2]])),
    "concatenate": lambda x: np.concatenate([[x[0], 2.0], [x[1] * x[2]]]),
    "stack": lambda x: np.stack([[x[0], x[1]], (1.0, x[2])], axis=1),
    "vstack": lambda x: np.vstack([[x[0], 1.0], [x[1], x[2]]]),
    "hstack": lambda x: np.hstack(([x[0]], [x[1], x[2] ** 2])),
    "dstack": lambda x: np.dstack([[x[0], x[1]], [x[2], 1.0]]),
}


@pytest.mark.parametrize("name", sorted(JOINS_OF_LISTS))
def test_a_join_whose_traced_values_are_inside_its_lists_is_followed(name, rng):
    # no item of the sequence is a traced array itself, so NumPy did not dispatch and
    # converted them: a ConversionError
    join = JOINS_OF_LISTS[name]
    weights = rng.standard_normal(join(np.ones(3)).shape)

    def f(x):
        return (np.sin(join(x)) * weights).sum()

    x = rng.standard_normal(3)
    before = x.tobytes()
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(
        f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    replays_as_traced(f, [(x,), (rng.standard_normal(3),)])
    assert x.tobytes() == before


# NumPy's and SciPy's functions of plain lists, tuples and numbers make new arrays inside f,
# which the mode follows as np.zeros' and np.array's: a traced value written into one is
# followed, not refused.
MADE_OF_LISTS = {
    "np.sin(list)": lambda: np.sin([0.1, 0.2, 0.3]),
    "np.add(tuple, 1.0)": lambda: np.add((0.1, 0.2, 0.3), 1.0),
    "np.cumsum(list)": lambda: np.cumsum([0.1, 0.2, 0.3]),
    "np.interp(list, list, list)": lambda: np.interp([0.1, 0.2, 0.3], [0.0, 1.0], [1.0, 2.0]),
    "np.unique(list)": lambda: np.unique([0.3, 0.1, 0.2, 0.1]),
    "np.maximum.accumulate(list)": lambda: np.maximum.accumulate([0.1, 0.3, 0.2]),
    "chebvander(list)[:, 1].copy()": lambda: np.polynomial.chebyshev.chebvander(
        [0.1, 0.2, 0.3], 2)[:, 1].copy(),
    "scipy.special.gammaln(list)": lambda: scipy.special.gammaln([0.1, 0.2, 0.3]),
}


def _filled(make):
    def f(x):
        p = make()
        p[1] = x[0] * x[1]
        p[-1] += x[1]
        return (p * p).sum() + p[0]
    return f


@pytest.mark.parametrize("name", MADE_OF_LISTS)
def test_an_array_made_of_plain_lists_takes_traced_values(name):
    f = _filled(MADE_OF_LISTS[name])
    x = np.array([0.7, 1.3])
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x)).tobytes()
    y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert np.asarray(y).tobytes() == np.asarray(f(x)).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))  # both modes against finite differences
    replays_as_traced(f, [(x,), (np.array([1.5, 0.25]),), (np.array([-0.5, 2.0]),)])
    assert x.tobytes() == before


def test_an_array_made_of_a_global_list_is_made_again_of_its_values():
    values = [0.1, 0.2, 0.3]

    def f(x):
        p = np.sin(values)
        p[1] = x[0]
        return (p * x[0]).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([0.5])
    for first in (0.1, 0.9, -0.4):
        values[0] = first
        assert replaying(x).tobytes() == mutad.grad(f)(x).tobytes()
