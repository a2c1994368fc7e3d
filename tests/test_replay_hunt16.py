"""Replays that answered otherwise than tracing on fresh programs: each program's replaying
function is called on inputs that repeat (so that its steps are compiled) and on values that
are not finite, each call compared with a traced one, bit for bit, with NumPy's value, and
the caller's data."""

import numpy as np
import pytest

from test_replay_hunt14 import replayed_like_traced

NAN = np.float64(np.nan)


# ----------------------------------------------------------------------------------------------
# Where two cotangents of a float64 scalar are both NaN, which NaN their sum is (its sign) is
# the choice of the code that adds them: tracing adds each into the scalar's shadow, a 0-d
# array, in place (``shadow += g``), where NumPy's loop keeps the second operand's NaN, while
# ``np.add`` into a new array keeps the first one's. A compiled block computed such a sum again
# with ``np.add``: from the third call on, the gradient of ``v / v`` at a NaN (or of a time
# stepper gone to NaN) had the other sign. A block adds as tracing does at each place: in place
# into a cotangent, as ``np.add`` into an element of a shadow (``shadow[key] += dy``)


def _ratio_of_itself(x):
    v = x[0]
    return v / v + x[1]


def _quotients(x):
    a, b = x[0], x[1]
    return b / a + a / a + np.exp(b)


def _stepper(x):
    a, b = x[0], x[1]
    for _ in range(4):
        a = a * b + np.exp(-a)
        b = b - 0.1 * a
    return a + b + x[2]


def _element_written_and_read(x):
    u, v, w = x[0].copy(), x[1].copy(), x[2].copy()
    v[0] = u[1]
    w += u
    return (w * v + v * 0.5 + np.abs(v)).sum()


@pytest.mark.parametrize("f, first", [(_ratio_of_itself, [NAN, -np.inf, 0.0]),
                                      (_ratio_of_itself, [-NAN, 1.0, 0.0]),
                                      (_quotients, [NAN, -np.inf, 0.0]),
                                      (_quotients, [-NAN, -np.inf, 0.0]),
                                      (_stepper, [np.inf, 2.0, 0.5]),
                                      (_stepper, [1e308, 2.0, 0.5])])
def test_a_sum_of_nan_cotangents_of_a_scalar_is_tracings(f, first):
    x = np.array(first)
    replayed_like_traced(f, [(x,)] * 4 + [(np.array([1.5, 0.5, 2.0]),)] * 3 + [(x,)] * 2)


def test_a_sum_of_nan_cotangents_into_an_element_is_tracings():
    x = np.array([[np.inf, NAN, -2.0], [-NAN, -NAN, -NAN], [1.5, np.inf, 1.5]])
    replayed_like_traced(_element_written_and_read, [(x,)] * 4)


# ----------------------------------------------------------------------------------------------
# The partials of an operation of two values of the program (a ** b's b * a ** (b - 1)) are
# computed by tracing on the 0-d arrays it holds for scalars, by a replay on NumPy's scalars,
# whose arithmetic keeps another of two NaN operands than NumPy's loops over 0-d arrays do: the
# gradient of x[0] ** x[1] at two NaNs had the other sign from the second call on (float32's
# from the first replay). A replay computes a partial that is NaN again on its values as
# tracing holds them (``blocks.partial_as_traced``)


def _power_of_elements(x):
    return x[0] ** x[1] + x[2]


def _power_in_a_loop(x):
    a, b = x[0], x[1]
    for _ in range(2):
        c = np.sin(a) ** (b * b)
        a, b = c * 0.5 - c / 3, c
    return a + b


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f, first", [(_power_of_elements, [-NAN, NAN, 1.0]),
                                      (_power_of_elements, [NAN, -NAN, 1.0]),
                                      (_power_in_a_loop, [np.inf, NAN, -np.inf])])
def test_a_nan_partial_of_two_values_is_tracings(f, first, dtype):
    x = np.array(first, dtype=dtype)
    replayed_like_traced(f, [(x,)] * 4 + [(np.array([1.5, 0.5, 2.0], dtype=dtype),)] * 2)


# ----------------------------------------------------------------------------------------------
# v + (v - v): the cotangent of a sum is one array for both its operands in a compiled block
# (``Code.share``), and the step that made the second took it, which forgot that the first one
# holds it too: v - v added into v's cotangent in place, into its own dy, then read that dy for
# its second operand. The gradient was 0, not 1, from the third call on, whatever the values.
# The other local is added into in a new array while the step's lines read its dy


def _sum_with_its_difference(x):
    v = x[1:] * 1
    return (v + (v - v)).sum()


def _element_with_its_difference(x):
    v = x[1] * 1
    return v + (v - v)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f", [_sum_with_its_difference, _element_with_its_difference])
def test_a_difference_of_a_value_with_itself_beside_it_has_its_gradient(f, dtype):
    calls = [(np.array(v, dtype=dtype),) for v in ([1.5, -2.0, 3.0], [1.5, -2.0, 3.0],
                                                  [1.5, -2.0, 3.0], [0.5, 4.0, 1.0])]
    replaying = replayed_like_traced(f, calls)
    assert replaying(np.array([1.0, 2.0, 3.0], dtype=dtype))[1].tolist() == \
        [0.0, 1.0, 1.0][:3 if f is _sum_with_its_difference else 2] + \
        ([] if f is _sum_with_its_difference else [0.0])


# ----------------------------------------------------------------------------------------------
# A float32 scalar's cotangents are 0-d arrays in a compiled block, and the sum of two that
# share one array was ``c + g``: NumPy's scalar, not an array, into which the next product was
# taken (``out=``), which raised TypeError where tracing answered


def _logs_of_a_square(x):
    v0 = x[0] * 1.0
    v1 = x[1] + 0.0
    _ = x[2] - 0.0  # (the values alive to the end, as a program's variables)
    v3 = np.abs(v0)
    v4 = v0 * v0
    v5 = np.log(v4)
    v6 = v1 - v3
    v7 = 1.0 / v5
    v8 = v5 + v0
    return v6 + v7 + v8


def test_a_sum_of_float32_scalar_cotangents_is_an_array():
    x = np.array([0.0, -0.0, NAN], dtype=np.float32)
    x2 = np.array([-2.0, -np.inf, 0.5], dtype=np.float32)
    replayed_like_traced(_logs_of_a_square, [(x,)] * 3 + [(x2,)] * 3)


# ----------------------------------------------------------------------------------------------
# A compiled block subtracted the cotangent of subtract's second operand from its region's
# shadow (``shadow -= dy``), where the engine's pullback of a short array adds dy * -1 (it
# subtracts only for long ones, which a block does not unroll): where the shadow already held
# a NaN and dy was one, NumPy's subtraction keeps the shadow's NaN and its addition dy's, so
# the gradient's NaN had the other sign from the third call on. A block adds dy * -1 too


def _quotient_of_a_difference(x):
    u = x[0:1]
    v = x[2:3] * 1
    return (u / (v - u)).sum()


def _hypotenuse_of_a_difference(x):
    u, v = x[0:1], x[2:3] * 1
    d = v - u
    return d + np.hypot(d, np.maximum(x[1:2].copy(), v)) + (d / u).sum()


@pytest.mark.parametrize("f, first, dtype", [
    (_quotient_of_a_difference, [NAN, 0.5, -0.0], np.float32),
    (_hypotenuse_of_a_difference, [-2.0, NAN, -NAN], np.float64)])
def test_a_difference_adds_its_negated_cotangent_as_tracing(f, first, dtype):
    x = np.array(first, dtype=dtype)
    replayed_like_traced(f, [(x,)] * 4 + [(np.array([1.0, 0.5, 3.0], dtype=dtype),)] * 2)
