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
