"""Replays that answered otherwise than tracing on fresh programs whose later calls take
other paths than the recorded one: each program's replaying function is called on inputs
that change what Python reads of the values, each call compared with a traced one, bit for
bit, with NumPy's value, and the caller's data."""

import warnings

import numpy as np
import pytest

import mutad

from test_replay_budget import replays
from test_replay_hunt14 import replayed_like_traced
from test_replay_warnings import outcome


# ----------------------------------------------------------------------------------------------
# Text computed from traced values (``x.astype(str)``, ``np.char`` of it, a text array read at
# an index the data picks) is NumPy's own ``str`` or ``bytes`` when f reads one element of it,
# which a recording did not guard: the replay went on with the recorded call's text (the length
# of '0.5' where the call had '0.25'). A recording guards each element Python reads of text
# computed from traced values, and the traced index it reads it at


def _length_of_text(x):
    return x.sum() * len(x.astype(str)[0])


def _bytes_compared(x):
    return x.sum() * (x.astype("S8")[1] == b"1.0")


def _characters_joined(x):
    return x.sum() * len("".join(np.char.upper(x.astype(str))))


def _text_at_the_largest(x):
    return x.sum() * len((x * x).astype(str)[np.argmax(x)])


def _text_of_a_view_in_a_loop(x):
    return x.sum() * sum(len(e) for e in (10 * x).astype(int).astype(str)[1:])


@pytest.mark.parametrize("f", [_length_of_text, _bytes_compared, _characters_joined,
                               _text_at_the_largest, _text_of_a_view_in_a_loop])
def test_text_read_of_traced_values_is_guarded(f):
    calls = [(np.array(v),) for v in ([0.5, 1.0, 2.0], [0.5, 1.0, 2.0], [0.25, 1.0, 2.0],
                                      [0.25, 1.0, 2.0], [2.0, 0.5, 0.125], [0.5, 1.5, 12.0])]
    replayed_like_traced(f, calls)


# ----------------------------------------------------------------------------------------------
# NumPy's own operations between the steps (on NumPy's scalars f made of an ``int()`` of a
# traced value: plain values, which no step redoes) warn in the traced call; a recording
# dropped those events, and a replay issued none. Their operands are what the guards let
# through, so a replay issues them as the traced call did, at the same lines


def _plain_scalars_overflowing(x):
    k = np.int8(int(x[0] * 100))
    k = k + np.int8(100)
    return x.sum() * float(k)


def test_warnings_of_plain_operations_between_the_steps_are_issued_again():
    replaying = mutad.value_and_grad(_plain_scalars_overflowing, replay=True)
    for values in ([1.0, 2.0], [1.0, 3.0], [0.5, 2.0], [1.0, 2.0]):
        x = np.array(values)
        assert outcome(replaying, x) == outcome(_plain_scalars_overflowing, x.copy())
    assert not replaying.reasons


# ----------------------------------------------------------------------------------------------
# A recording holds NumPy's integer scalars computed from traced values (``np.argmax(x)``,
# ``(x > 0).sum()``) as stand-ins, whose sums, differences, products, negations and absolute
# values a ufunc loop computed: NumPy's scalar math warns where they overflow, the loop does
# not. So f, hearing the warnings (``catch_warnings(record=True)``), took another path than
# NumPy's when the call recorded, and every replay did too (1.0 where NumPy gives 2.0); and a
# replay issued no warning. The recording raises the events in the operation, and a replay's
# step computes with NumPy's scalar math


def _hears_an_overflow(x):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        k = (x > 0).sum().astype(np.uint8) - np.uint8(3)
    return x.sum() * (2.0 if heard else 1.0) + float(k)


def _overflows(x):
    k = np.argmax(x).astype(np.int8) * np.int8(100)
    j = -(k - np.int8(100))
    return x.sum() * float(abs(j + np.int8(127)))


def test_integer_overflow_of_numpys_scalars_is_heard_and_warned_as_numpy():
    replayed_like_traced(_hears_an_overflow, [(np.array(v),) for v in (
        [1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 0.0, 2.0], [1.0, 3.0, 2.0], [1.0, 0.0, 2.0])])
    replaying = mutad.value_and_grad(_overflows, replay=True)
    for values in ([1.0, 0.0, 0.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.5],
                   [0.0, 0.0, 1.0], [0.0, 0.0, 1.5], [0.0, 0.5, 1.5]):
        x = np.array(values)
        assert outcome(replaying, x) == outcome(_overflows, x.copy())
        assert outcome(mutad.value_and_grad(_overflows), x) == outcome(_overflows, x.copy())
    assert replays(replaying) == 4 and not replaying.reasons  # (one program per argmax)


# ----------------------------------------------------------------------------------------------
# The engine computes an operation of scalars (``x[0] * x[1]``, ``x[0] ** x[1]``) with the
# ufunc's loop, then puts a NaN or a complex result right with NumPy's scalar math, which
# raised the floating-point events a second time: tracing warned twice where NumPy warns once,
# and f counting what it heard (``catch_warnings(record=True)``) computed another value, traced
# and replayed. The scalar math puts a value right silently where the loop's was not finite


def _counts_warnings(x, operation):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        operation(x[0], x[1])
    return x[2] * len(heard)


@pytest.mark.parametrize("operation, a, b", [
    (lambda a, b: a * b, np.inf, 0.0), (lambda a, b: a + b, np.inf, -np.inf),
    (lambda a, b: a ** b, -1.0, 0.5), (lambda a, b: (a + 1j) * (b + 0j), np.inf, np.inf)],
    ids=["product", "sum", "power", "complex product"])
def test_an_operation_of_scalars_warns_once_as_numpy(operation, a, b):
    def f(x):
        return _counts_warnings(x, operation)

    calls = [(np.array([a, b, c]),) for c in (1.0, 2.0, 3.0)]
    for (x,) in calls:
        assert mutad.value_and_grad(f)(x.copy())[0] == f(x.copy()) == x[2]
    replayed_like_traced(f, calls)


# ----------------------------------------------------------------------------------------------
# What a rule computes in the forward pass for its pullback (np.remainder's quotient, np.fmod's,
# the direction z / |z| of a complex absolute value, 1 / |z| for a complex sign, which of two
# complex values np.maximum took) raised floating-point events NumPy's operation does not: a
# zero divisor's division by zero, inf / inf's and a comparison of a NaN's invalid value, an
# underflow. Under
# ``np.errstate(divide="raise")`` or ``invalid="raise"`` the traced call raised where NumPy
# returns (and warned where NumPy is silent). They are computed silently


def _remainder_by_zero(x):
    with np.errstate(divide="raise"):
        r = x % x[0]
    return np.nansum(r) + x[2]


def _fmod_by_zero(x):
    with np.errstate(divide="raise"):
        r = np.fmod(x, x[0])
    return np.nansum(r) + x[2]


def _absolute_of_a_complex_infinity(x):
    with np.errstate(invalid="raise"):
        r = np.abs(x[3:] * (1 + 1j))
    return np.nan_to_num(r).sum() + x[2]


def _larger_of_complex_values_with_a_nan(x):
    z = x + 1j
    with np.errstate(invalid="raise"):
        r = np.maximum(z, z[::-1]) + np.fmin(z, z[::-1])
    return np.nansum(r.imag) + x[2]


def _sign_of_a_large_complex_value(x):
    with np.errstate(all="raise"):
        r = np.sign(x[2:4] * (1e308 + 0j))
    return np.abs(r).sum() + x[2]


@pytest.mark.parametrize("f", [_remainder_by_zero, _fmod_by_zero,
                               _absolute_of_a_complex_infinity,
                               _larger_of_complex_values_with_a_nan,
                               _sign_of_a_large_complex_value])
def test_what_a_rule_keeps_for_its_pullback_raises_no_event(f):
    x = np.array([0.0, -1.0, 1.0, 1.5, np.inf])
    if f is _larger_of_complex_values_with_a_nan:
        x[1] = np.nan
    calls = [f, mutad.value_and_grad(f), lambda x: mutad.jvp(f, (x,), (np.ones(5),))]
    if f is _absolute_of_a_complex_infinity:  # (its tangent at an infinity is inf / inf,
        calls.pop()                           # raised under invalid="raise", as a tangent's)
    for call in calls:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            value = call(x.copy())
        events = [w.category for w in heard if "gradient" not in str(w.message)
                  and "tangent" not in str(w.message)]
        if call is f:
            expected = value, events
        else:  # (the gradient's and the tangent's own events aside)
            assert (value[0], events) == expected
    replayed_like_traced(f, [(x * s,) for s in (1.0, 0.5, 0.25)])
