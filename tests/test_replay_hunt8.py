"""Replays and traced calls that answered otherwise than NumPy and Python: each program is
differentiated on inputs that change one decision, each replayed call compared with a traced
one, bit for bit, with NumPy's value, and the caller's bytes."""

import numpy as np
import pytest

import mutad

from test_replay import same
from test_replay_hunt7 import replayed_like_numpy


# ----------------------------------------------------------------------------------------------
# A Python float (``x[0].item()``) compared with a Python int: Python compares them exactly,
# where NumPy rounds the int to a float first (or raises OverflowError beyond the floats)

_BIG = 2 ** 53 + 1  # no float: 2.0**53 < _BIG in Python, not in NumPy


@pytest.mark.parametrize("compare", [
    lambda v: v < _BIG, lambda v: v <= _BIG, lambda v: v > _BIG, lambda v: v >= _BIG,
    lambda v: v == _BIG, lambda v: v != _BIG, lambda v: _BIG > v, lambda v: _BIG == v,
    lambda v: v < -_BIG, lambda v: v > -_BIG, lambda v: v < 10 ** 400, lambda v: v > -10 ** 400,
    lambda v: v == 10 ** 400, lambda v: v != -10 ** 400, lambda v: v > 10 ** 400,
    lambda v: v < 2 ** 53, lambda v: v == 2 ** 53])
def test_a_python_float_compared_with_a_python_int_is_pythons_exact_comparison(compare):
    def branched(x):
        if compare(x[0].item()):
            return (x * x).sum()
        return (3 * x).sum()

    def at(value):
        return lambda: (np.array([value, 2.0]),)

    values = [2.0 ** 53, 2.0 ** 53 + 2, -2.0 ** 53, -2.0 ** 53 - 2, np.inf, -np.inf, 1.5]
    replayed_like_numpy(branched, [at(v) for v in values + values[::-1]])
    for value in values:
        x = np.array([value, 2.0])
        assert same(mutad.jvp(branched, (x,), (np.ones(2),))[0], branched(x.copy()))


# ----------------------------------------------------------------------------------------------
# A Python float beside a list, tuple, range, string or None: Python's float neither computes
# nor compares with them (TypeError, or not equal), where NumPy made them arrays


@pytest.mark.parametrize("other", [[1.5], (1.5, 2.0), range(2), "1.5", None, [[1.5]]])
def test_a_python_float_beside_a_python_container_is_pythons_float(other):
    def tried(x):
        v = x[0].item()
        outcomes = []
        for operation in (lambda: v + other, lambda: other - v, lambda: v / other,
                          lambda: v ** other, lambda: v % other, lambda: v < other,
                          lambda: other >= v):
            try:
                outcomes.append(operation())
            except TypeError:
                outcomes.append(None)
        assert all(outcome is None for outcome in outcomes)
        if v == other or other == v or not v != other:
            return (x * x).sum()
        return (x * 3).sum()

    def made():
        return (np.array([1.5, 2.0]),)

    replayed_like_numpy(tried, [made] * 4)
    assert same(mutad.jvp(tried, made(), (np.ones(2),))[0], tried(*made()))
