"""Replays that answered otherwise than tracing and NumPy on fresh programs: each program's
replaying function is called on inputs that change one decision the recording made, each call
compared with a traced one, bit for bit, with NumPy's value, and the caller's data."""

import functools
import operator
import types

import numpy as np
import pytest

import mutad

from test_replay import program_count, same


def replayed_like_numpy(f, makers, argnums=0):
    """Call ``value_and_grad(f, replay=True)`` on the arguments each of ``makers`` makes, and
    check each call against a traced one and NumPy's value on arguments made afresh, and that
    the caller's arrays are as they were."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for make in makers:
        args = make()
        before = [a.copy() for a in args]
        got = replaying(*args)
        assert all(same(a, b) for a, b in zip(args, before))
        expected = mutad.value_and_grad(f, argnums=argnums)(*make())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(*make()))
    return replaying


# ----------------------------------------------------------------------------------------------
# id(), operator.is_ and operator.is_not, and type() under another name, told the recording's
# stand-ins for NumPy's integers and booleans from NumPy's own, as `is` does: the recording
# took the other branch, and every replay ran it (10.5 for NumPy's 5.25). Only `is` and
# type() named as such were found; a function reaching any of them is now traced on every
# call, whether its own code names it, a helper module's does, or it holds it as a value


HELPERS = """
import operator
import numpy as np

as_type = type


def positive(b):
    return operator.is_(b, np.True_)


def same_object(b):
    return id(b) == id(np.True_)


def is_an_int64(i):
    return as_type(i) == np.int64
"""

helpers = types.ModuleType("replay_helpers")
exec(compile(HELPERS, "replay_helpers.py", "exec"), helpers.__dict__)


def _operator_is(x):
    return (x ** 2).sum() if operator.is_(x[0] > 0, np.True_) else (3 * x).sum()


def _operator_is_not(x):
    return (x ** 2).sum() if operator.is_not(x[0] > 0, np.False_) else (3 * x).sum()


def _ids(x):
    return (x ** 2).sum() if id(x[0] > 0) == id(np.True_) else (3 * x).sum()


_is_true = functools.partial(operator.is_, np.True_)


def _partial_of_is(x):
    return (x ** 2).sum() if _is_true(x[0] > 0) else (3 * x).sum()


def _mapped_is(x):
    return (x ** 2).sum() if all(map(operator.is_, [x[0] > 0], [np.True_])) else (3 * x).sum()


def _helper_is(x):
    return (x ** 2).sum() if helpers.positive(x[0] > 0) else (3 * x).sum()


def _helper_id(x):
    return (x ** 2).sum() if helpers.same_object(x[0] > 0) else (3 * x).sum()


def _helper_type_renamed(x):
    return (x ** 2).sum() if helpers.is_an_int64(np.argmax(x)) else (3 * x).sum()


@pytest.mark.parametrize("f", [_operator_is, _operator_is_not, _ids, _partial_of_is,
                               _mapped_is, _helper_is, _helper_id, _helper_type_renamed])
def test_identity_read_by_other_routes_is_traced(f):
    x = np.array([1.0, 0.5, 2.0])
    assert f(x) == 5.25
    replaying = replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),)] * 2 + [
        lambda: (np.array([-1.0, 0.5, -2.0]),), lambda: (np.array([1.0, 0.5, 2.0]),)])
    assert program_count(replaying) == 0
    why = " ".join(replaying.reasons.values())
    assert "a recording would answer otherwise than NumPy" in why


# ----------------------------------------------------------------------------------------------
# The recording's stand-ins have methods NumPy's integers and booleans lack (__len__,
# __iter__): isinstance of collections.abc's Iterable or Sized, which test a class for them,
# and hasattr(b, "__len__") answered True where NumPy answers False, and every replay took that
# branch. A function whose code reads those attributes by name or reaches those classes is
# traced on every call


def _iterable(x):
    import collections.abc
    return (x ** 2).sum() if isinstance(x[0] > 0, collections.abc.Iterable) else (3 * x).sum()


def _sized(x):
    import typing
    return (x ** 2).sum() if isinstance(np.argmax(x), typing.Sized) else (3 * x).sum()


def _has_a_length(x):
    return (x ** 2).sum() if hasattr(np.argmax(x), "__len__") else (3 * x).sum()


@pytest.mark.parametrize("f", [_iterable, _sized, _has_a_length])
def test_what_a_stand_in_has_and_numpys_scalars_lack_is_traced(f):
    x = np.array([1.0, 0.5, 2.0])
    assert f(x) == 10.5
    replaying = replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),)] * 2 + [
        lambda: (np.array([-1.0, 0.5, -2.0]),), lambda: (np.array([1.0, 0.5, 2.0]),)])
    assert program_count(replaying) == 0
    assert "a recording would answer otherwise than NumPy" in " ".join(replaying.reasons.values())


# ----------------------------------------------------------------------------------------------
# And the other way: NumPy's scalars have a buffer (memoryview), an array interface and
# attributes the stand-ins lack (numerator), and cannot be referred to weakly, where a stand-in
# can; sys.getsizeof tells their sizes apart


def _has_a_buffer(x):
    try:
        memoryview(x[0] > 0)
    except TypeError:
        return (3 * x).sum()
    return (x ** 2).sum()


def _has_an_array_interface(x):
    return (x ** 2).sum() if hasattr(np.argmax(x), "__array_interface__") else (3 * x).sum()


def _has_a_numerator(x):
    return (x ** 2).sum() if getattr(np.argmax(x), "numerator", None) == 2 else (3 * x).sum()


def _not_weakly_held(x):
    import weakref
    try:
        weakref.ref(x[0] > 0)
    except TypeError:
        return (x ** 2).sum()
    return (3 * x).sum()


def _sized_by_python(x):
    import sys
    return (x ** 2).sum() if sys.getsizeof(np.argmax(x)) < 100 else (3 * x).sum()


@pytest.mark.parametrize("f", [_has_a_buffer, _has_an_array_interface, _has_a_numerator,
                               _not_weakly_held, _sized_by_python])
def test_what_numpys_scalars_have_and_a_stand_in_lacks_is_traced(f):
    x = np.array([1.0, 0.5, 2.0])
    assert f(x) == 5.25
    replaying = replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),)] * 2 + [
        lambda: (np.array([-1.0, 0.5, -2.0]),), lambda: (np.array([1.0, 0.5, 2.0]),)])
    assert program_count(replaying) == 0
    assert "a recording would answer otherwise than NumPy" in " ".join(replaying.reasons.values())
