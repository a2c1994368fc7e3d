"""Replays (and recordings) that answered otherwise than tracing on fresh realistic programs:
each program's replaying function is called on inputs that change one decision, each call
compared with a traced one, bit for bit, and the caller's bytes."""

import numpy as np

import mutad

from test_replay import replayed_like_traced, same


def calls(*rows):
    return [(np.array(row),) for row in rows]


# ----------------------------------------------------------------------------------------------
# Python's booleans of comparisons of Python numbers


def test_a_comparison_of_python_numbers_is_pythons_bool_when_recorded():
    """a + b of a = x[0].item() > 1, b = ...: Python's bools add as integers (True + True is
    2), where NumPy's booleans add as a logical or; tracing gives Python's bools, a recording
    gave the tape's boolean constants, so that its first call and every replay added them
    as NumPy does."""
    def count(x):
        a = x[0].item() > 1
        b = x[1].item() > 1
        return (a + b) * x[2] + (a ^ b) * (x ** 2).sum()

    replayed_like_traced(count, calls([1.5, 2.5, 0.5], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0],
                                      [1.5, 2.5, 0.5], [1.5, 2.5, 0.5], [0.0, 0.0, 1.0]))


def test_a_comparison_of_python_numbers_is_the_bool_python_compares_by_identity():
    """``flag is True`` of a comparison of Python numbers: True in Python and when traced, and
    a recording's boolean constant is not Python's True."""
    def gated(x):
        flag = x[0].item() > 0
        return (x ** 2).sum() if flag is True else x.sum()

    replayed_like_traced(gated, calls([1.0, 2.0], [1.0, 2.0], [-1.0, 2.0], [-1.0, 2.0],
                                      [1.0, 3.0]))


# ----------------------------------------------------------------------------------------------
# What a replay returns


def test_a_python_complex_number_in_aux_is_returned_by_a_replay():
    """aux holding (y[0] + 1j * y[1]).item(), a Python complex computed from traced values:
    the replay held it as Python's number and raised AttributeError reading its ndim."""
    def loss(x):
        y = x * 1.0
        return (y ** 2).sum(), {"z": (y[0] + 1j * y[1]).item(), "v": y[2].item() / 3.0}

    replaying = mutad.value_and_grad(loss, has_aux=True, replay=True)
    for row in ([1.0, 2.0, 3.0], [1.0, 5.0, 3.0], [-2.0, 0.5, 1.0]):
        x = np.array(row)
        (value, aux), grads = replaying(x)
        (want, wanted), expected = mutad.value_and_grad(loss, has_aux=True)(x.copy())
        assert x.tolist() == row
        assert type(aux["z"]) is type(wanted["z"]) is complex and aux["z"] == wanted["z"]
        assert type(aux["v"]) is float and aux["v"] == wanted["v"]
        assert same(value, want) and same(grads, expected)


# ----------------------------------------------------------------------------------------------
# NumPy's fast path of ** (np.square, np.sqrt, np.reciprocal), of float and complex arrays alone


def test_a_count_in_a_small_integer_dtype_to_the_power_half_is_a_float64():
    """n ** 0.5 of n = (x > 0).sum(dtype=np.int16), which a recording holds as a 0-d array of
    the program: NumPy's power gives a float64, and the recording took np.sqrt, whose result
    for an int16 is a float16 (1.732 for 1.7320508...), on its first call and every replay."""
    def scaled(x):
        n = (x > 0).sum(dtype=np.int16)
        return (x * n ** 0.5).sum()

    replayed_like_traced(scaled, calls([1.0, 2.0, 3.0, -1.0, -0.3], [1.0, 2.0, 3.0, -1.0, -0.3],
                                       [1.0, 2.0, 3.0, 1.0, -0.3], [1.0, 2.0, 3.0, -1.0, -0.3]))


def test_an_integer_to_the_power_minus_one_raises_as_numpys():
    """np.argmax(x) ** -1: NumPy's ValueError (integers to negative integer powers), which f
    catches; the recording took np.reciprocal, 1 // k, and answered 0 or 1."""
    def inverse_position(x):
        try:
            w = np.argmax(x) ** -1
        except ValueError:
            w = 0.5
        return x.sum() * w

    replayed_like_traced(inverse_position, calls([1.0, 3.0, 2.0], [1.0, 3.0, 2.0],
                                                 [3.0, 1.0, 2.0], [1.0, 3.0, 2.0]), replayed=False)


def test_a_complex_array_to_the_float_power_two_is_numpys_power():
    """z ** 2.0 and z ** -1.0 of a complex array: NumPy's fast path takes Python's int 2 and
    -1 alone, so a float exponent is np.power, which rounds otherwise than np.square and
    np.reciprocal (on about a third of random values); mutad took those."""
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(64) + 1j * rng.standard_normal(64)) * np.exp(rng.uniform(-30, 30, 64))

    def powers(z):
        return np.concatenate([(z ** 2.0).real, (z ** -1.0).imag, (z ** 2).real])

    y, back = mutad.pullback(powers, z.copy())
    assert same(y, powers(z.copy()))


def test_a_boolean_array_squared_is_numpys_int8():
    """m ** 2 of a boolean array is np.square's int8, NumPy's fast path for Python's int 2
    (np.power would give int64): 100 * m ** 2 wraps around as NumPy's does."""
    def wrapped(x):
        m = x > 0.5
        return (x * (m ** 2 * 100 + m ** 2 * 100)).sum()

    replayed_like_traced(wrapped, calls([1.0, 0.2, 3.0], [1.0, 0.2, 3.0], [0.1, 0.7, 3.0]))
    x = np.array([1.0, 0.2, 3.0])
    assert mutad.value_and_grad(wrapped)(x)[0] == wrapped(x.copy())
