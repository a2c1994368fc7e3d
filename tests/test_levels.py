"""Levels with toy values: nesting is settled by numbers alone, whatever the mode."""

import threading

import pytest

from mutad.errors import EscapedTracerError
from mutad.core.levels import ACTIVE, LEVELS, Tracer, escaped, innermost, running


class Toy(Tracer):
    __slots__ = ("level",)

    def __init__(self, level):
        self.level = level


class Level:
    def __init__(self, level):
        self.level = level


def test_innermost_is_the_deepest_tracer_inside_sequences_too():
    a, b, c = Toy(1), Toy(5), Toy(3)
    assert innermost([1.0, a, "x"]) is a
    assert innermost([a, [c, b], (2.0,)]) is b
    assert innermost([a, ([c], [[b]])]) is b
    assert innermost([a, {"key": b}]) is a  # lists and tuples only, as NumPy's sequences
    assert innermost([c], a) is c and innermost([a], c) is c
    assert innermost([1.0, [2.0], None]) is None


def test_only_tracers_take_part():
    # An object of the user's with an attribute named level is not a differentiation's value.
    assert innermost([Level(7), Toy(2)]).level == 2


def test_levels_increase():
    first, second = next(LEVELS), next(LEVELS)
    assert second > first


def test_running_is_per_thread():
    level = next(LEVELS)
    seen = []
    ACTIVE.running.append(Level(level))
    try:
        thread = threading.Thread(target=lambda: seen.append(running(level)))
        thread.start()
        thread.join()
        assert running(level) and seen == [False]
    finally:
        ACTIVE.running.pop()
    assert not running(level)


def test_the_escaped_error_names_the_value_and_the_differentiation():
    with pytest.raises(EscapedTracerError, match="a dual array was used outside the jvp"):
        raise escaped("a dual array", "the jvp")
