"""Replays that answered otherwise than tracing: each program is differentiated on inputs that
change one decision, each replayed call compared with a traced one, bit for bit, with NumPy's
value, and the caller's bytes."""

import numpy as np
import pytest

import mutad

from test_replay import same
from test_replay_hunt7 import replayed_like_numpy


def _points():
    return np.array([0.5, -1.0, 2.0])


# ----------------------------------------------------------------------------------------------
# A NumPy scalar among the arguments not differentiated picks a program by its bits: NumPy's
# == holds between scalars a program tells apart


@pytest.mark.parametrize("first, second", [
    (np.longdouble(0.0), np.longdouble(-0.0)),
    (np.timedelta64(1, "D"), np.timedelta64(24, "h")),
    (np.datetime64("2020-01-01"), np.datetime64("2020-01-01T00:00"))])
def test_numpy_scalars_equal_by_numpy_but_not_by_bits_pick_programs_apart(first, second):
    def scaled(x, t):
        if isinstance(t, np.floating):
            return (x * np.copysign(1.0, t)).sum()
        return (x * (t - np.zeros((), t.dtype)).astype(np.int64).astype(float)).sum()

    def at(t):
        return lambda: (_points(), t)

    replayed_like_numpy(scaled, [at(first), at(second), at(first), at(second)])


def test_a_structured_numpy_scalar_among_the_arguments_replays():
    """np.void has no hash: the signature raised TypeError where tracing answered."""
    def weighted(x, r):
        return (x * r["a"]).sum() + (x * r["b"]).sum()

    def at(a, b):
        return lambda: (_points(), np.array([(a, b)], dtype=[("a", "f8"), ("b", "i4")])[0])

    replayed_like_numpy(weighted, [at(1.0, 2), at(2.0, 2), at(1.0, 3), at(1.0, 2)])


# ----------------------------------------------------------------------------------------------
# An array of dtype object among the arguments: its bytes are its items' addresses, the same
# for a list changed in place, and for a string made where a freed one lay


def _holding(*items):
    held = np.empty(len(items), dtype=object)
    held[:] = items
    return held


def test_an_object_array_holding_an_object_changed_in_place_is_not_replayed_as_it_was():
    def scaled(x, held):
        return (x * held[0][0]).sum()

    held = _holding([1.0], "label")
    replaying = mutad.value_and_grad(scaled, replay=True)
    for value in (1.0, 2.0, 3.0, 2.0):
        held[0][0] = value
        got = replaying(_points(), held)
        assert same(got[0], scaled(_points(), held))
        assert same(got[1], mutad.value_and_grad(scaled)(_points(), held)[1])
    assert "an array of dtype object" in replaying.reasons


def test_an_object_array_of_strings_picks_a_program_by_its_strings():
    """The signature held the strings' addresses: a string made where a freed one lay (as
    CPython's allocator does with the last one freed) replayed the other one's program."""
    def branched(x, labels):
        if labels[0] == "aa":
            return (x * x).sum()
        return (x * 3).sum()

    expected = {label: mutad.value_and_grad(branched)(_points(), _holding(label, None))
                for label in ("aa", "bb")}
    replaying = mutad.value_and_grad(branched, replay=True)
    got = []
    for label in ["aa", "bb", "aa", "cc", "dd", "aa"] * 4:
        labels = _holding("".join(label), None)  # a new string object each call
        got.append((label, replaying(_points(), labels)))
        del labels
    for label, (value, gradient) in got:
        assert same(value, expected[label if label == "aa" else "bb"][0])
        assert same(gradient, expected[label if label == "aa" else "bb"][1])
    assert not replaying.reasons


# ----------------------------------------------------------------------------------------------
# Numbers and strings among the arguments not differentiated: which of them are one object, as
# for arrays (equal strings or large integers made apart are two)


@pytest.mark.parametrize("made", [lambda: "".join(["a", "b"]), lambda: int("1" * 30),
                                  lambda: float("2.5"), lambda: np.int64(7)])
def test_arguments_that_are_one_object_pick_another_program_than_equal_ones(made):
    def branched(x, a, b):
        if a is b:
            return (x * x).sum()
        return (x * 3).sum()

    def one():
        value = made()
        return _points(), value, value

    def two():
        return _points(), made(), made()

    for order in ([one, two, one, two], [two, one, two, one]):
        replaying = mutad.value_and_grad(branched, replay=True)
        for make in order:
            got = replaying(*make())
            expected = mutad.value_and_grad(branched)(*make())
            assert same(got[0], expected[0]) and same(got[1], expected[1])
            assert same(got[0], branched(*make()))
