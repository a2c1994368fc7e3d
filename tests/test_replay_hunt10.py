"""Replays that answered otherwise than tracing and NumPy on fresh programs: each program's
replaying function is called on inputs that change one decision the recording made, each call
compared with a traced one, bit for bit, with NumPy's value, and the caller's data."""

import collections
import copy
import dataclasses
import decimal
import math
import struct

import numpy as np
import pytest

import mutad

from test_replay import program_count, same


def replayed_like_numpy(f, makers, argnums=0):
    """Call ``value_and_grad(f, replay=True)`` on the arguments each of ``makers`` makes, and
    check each call against a traced one and NumPy's value on arguments made afresh, and that
    the caller's arguments (arrays in containers too) are as they were."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for make in makers:
        args = make()
        before = copy.deepcopy(args)
        got = replaying(*args)
        assert same(args, before)
        expected = mutad.value_and_grad(f, argnums=argnums)(*make())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(*make()))
    return replaying


# ----------------------------------------------------------------------------------------------
# A dict among the arguments picks a program by its keys as f tells them apart: a dict takes
# 1, 1.0 and True for one key, and 0.0 and -0.0 too


def _indexed_by_keys(x, weights):
    total = 0.0
    for k, w in weights.items():
        total = total + (x[k] * w).sum()  # x[True] is all of x, x[1] one element
    return total


def _signed_by_key(x, weights):
    (k, w), = weights.items()
    return (x * math.copysign(w, k)).sum()


_Point = collections.namedtuple("_Point", "t level")


def _signed_by_field(x, weights):
    (k, w), = weights.items()
    return (x * math.copysign(w, k.t)).sum()


def _named_by_key(x, weights):
    (k, w), = weights.items()
    return (x * w).sum() * len(str(k))  # "1", "1.0", "True"


@pytest.mark.parametrize("f, keys", [
    (_indexed_by_keys, [1, True, 1, True]),
    (_indexed_by_keys, [(1, 0), (True, False), (1, 0)]),
    (_signed_by_key, [0.0, -0.0, 0.0, -0.0]),
    (_signed_by_key, [np.float64(0.0), np.float64(-0.0), np.float64(0.0)]),
    (_signed_by_field, [_Point(0.0, 1), _Point(-0.0, 1), _Point(0.0, 1)]),
    (_named_by_key, [1, 1.0, True, np.int64(1), 1, 1.0])])
def test_dict_keys_equal_to_a_dict_but_not_to_f_pick_programs_apart(f, keys):
    if type(keys[0]) is tuple:  # (indices into a matrix)
        def at(key):
            return lambda: (np.arange(6.0).reshape(2, 3), {key: 2.0})
    else:
        def at(key):
            return lambda: (np.array([1.0, 2.0, 3.0]), {key: 2.0})
    replayed_like_numpy(f, [at(k) for k in keys])


# ----------------------------------------------------------------------------------------------
# Code that takes plain values alone, given an element of an array outside argnums: tracing
# holds that array as NumPy's, a recording follows it as an input of the program


@pytest.mark.parametrize("plain", [
    lambda v: struct.unpack("<d", struct.pack("<d", v))[0],
    lambda v: float(decimal.Decimal(float(v)))])
def test_plain_code_given_an_element_outside_argnums_is_traced_as_tracing_does(plain):
    def scaled(x, c):
        return (x * plain(c[0])).sum()

    def at(value):
        return lambda: (np.ones(2), np.array([value, 3.0]))

    replaying = replayed_like_numpy(scaled, [at(2.0), at(-0.5), at(2.0)])
    assert "where tracing did not" in next(iter(replaying.reasons.values()))


# ----------------------------------------------------------------------------------------------
# NumPy's boolean scalar squared is its scalar math's int64; a boolean array squared is
# np.square's int8. A recording holds the comparison x[0] > 0 as a 0-d array standing for
# NumPy's scalar, and took np.square's int8: 127 + 1 wrapped around to -128; np.asarray of it
# was that stand-in itself, not NumPy's 0-d array


def _squared(b):
    return b ** 2


def _squared_in_place(b):
    b **= 2
    return b


def _array_squared(b):
    return np.asarray(b) ** 2  # NumPy's 0-d array: np.square's int8, 127 + 1 is -128


@pytest.mark.filterwarnings("ignore:overflow encountered")  # (NumPy's, of its int8)
@pytest.mark.parametrize("square", [_squared, _squared_in_place, _array_squared])
def test_numpys_boolean_scalar_squared_is_an_int64(square):
    def counted(x):
        return (x * (square(x[0] > 0) + 127)).sum()

    def at(value):
        return lambda: (np.array([value, 2.0]),)

    replayed_like_numpy(counted, [at(1.0), at(1.0), at(-1.0), at(1.0)])


# ----------------------------------------------------------------------------------------------
# A draw from NumPy's global generator that f puts back (seeds it again, or sets the state it
# read): the recording left the state as it found it, so the program was kept, and replayed
# the recorded numbers under another state the caller set


def _reseeding(x):
    noise = np.random.standard_normal(x.shape)
    np.random.seed(0)
    return (x * noise).sum()


def _restoring(x):
    state = np.random.get_state()
    noise = np.random.uniform(size=x.shape)
    np.random.set_state(state)
    return (x * noise).sum()


@pytest.mark.parametrize("f", [_reseeding, _restoring])
def test_a_draw_from_the_global_generator_put_back_is_the_callers_state(f):
    state = np.random.get_state()
    try:
        replaying = mutad.value_and_grad(f, replay=True)
        for seed in (0, 0, 1, 2, 0):
            np.random.seed(seed)
            got = replaying(np.arange(3.0))
            np.random.seed(seed)
            assert same(got, mutad.value_and_grad(f)(np.arange(3.0)))
    finally:
        np.random.set_state(state)


# ----------------------------------------------------------------------------------------------
# Python's `is` and type() told the recording's stand-ins for NumPy's integers and booleans
# from NumPy's own (no hook reaches them): the recording took the other branch, and every
# replay ran it, 10.5 for NumPy's 5.25. A function whose code (or a function it reaches) reads
# either is traced on every call, and reasons names the line


def _is_numpys_true(x):
    return (x ** 2).sum() if (x[0] > 0) is np.True_ else (3 * x).sum()


def _type_of_a_comparison(x):
    b = x[0] > 0
    return (x ** 2).sum() if type(b) is np.bool_ else (3 * x).sum()


def _type_of_an_index(x):
    return (x ** 2).sum() if type(np.argmax(x)) is np.int64 else (3 * x).sum()


def _same_decisions(a, b):
    return a is b


def _through_a_helper(x):
    return (x ** 2).sum() if _same_decisions(x[0] > 0, x[2] > 0) else (3 * x).sum()


def _in_a_lambda(x):
    positive = lambda v: (v > 0) is not np.False_  # noqa: E731
    return (x ** 2).sum() if positive(x[0]) else (3 * x).sum()


class _Decision:
    def __init__(self, b):  # (Python calls it, f does not name it)
        self.positive = b is np.True_


def _in_an_object_made(x):
    return (x ** 2).sum() if _Decision(x[0] > 0).positive else (3 * x).sum()


class _Decides:
    def __call__(self, b):
        return type(b) is np.bool_


def _in_an_object_called(x):
    return (x ** 2).sum() if _Decides()(x[0] > 0) else (3 * x).sum()


@pytest.mark.parametrize("f, at, offset", [
    (_in_an_object_made, _Decision.__init__, 1), (_in_an_object_called, _Decides.__call__, 1),
    (_is_numpys_true, _is_numpys_true, 1), (_type_of_a_comparison, _type_of_a_comparison, 2),
    (_type_of_an_index, _type_of_an_index, 1), (_through_a_helper, _same_decisions, 1),
    (_in_a_lambda, _in_a_lambda, 1)])
def test_identity_and_type_of_numpys_scalars_are_traced(f, at, offset):
    x = np.array([1.0, 0.5, 2.0])
    assert f(x) == 5.25
    for replaying in (mutad.grad(f, replay=True), mutad.value_and_grad(f, replay=True)):
        for _ in range(3):
            expected = mutad.value_and_grad(f)(x)
            assert same(expected[1], 2 * x)
            got = replaying(x.copy())
            assert same(got, expected if type(got) is tuple else expected[1])
        assert program_count(replaying) == 0
        why = replaying.reasons["what f reaches"]
        line = at.__code__.co_firstlineno + offset
        assert f"line {line})" in why and ("type()" in why or "(is)" in why)
    replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),),
                            lambda: (np.array([-1.0, 0.5, -2.0]),)])


def _defaulted(x, out=None, scale=None):
    if out is None:
        out = np.zeros_like(x)
    missing = scale is None
    unset = None is scale
    out[:] = x * x if missing and unset and out is not None else x
    return out.sum()


@dataclasses.dataclass
class _Weights:
    w: np.ndarray
    scale: float = 1.0


def _compares_dataclasses(x):
    same_weights = _Weights(x) == _Weights(x)  # (other.__class__ is self.__class__)
    return (x * x).sum() if same_weights else x.sum()


@pytest.mark.parametrize("f", [_defaulted, _compares_dataclasses])
def test_identity_with_a_constant_or_a_class_still_replays(f):
    """`v is None` (a jump, or an `is` of a constant) and `a.__class__ is b.__class__` answer
    as NumPy's values would: no stand-in and no NumPy scalar is a constant or a class, and a
    stand-in's `__class__` is NumPy's. Such a function is replayed."""
    x = np.array([1.0, 0.5, 2.0])
    replaying = replayed_like_numpy(f, [lambda: (x.copy(),)] * 3)
    assert program_count(replaying) == 1 and replaying.reasons == {}


# ----------------------------------------------------------------------------------------------
# The aux output of has_aux=True, where it is a large temporary (one the replay lets go after
# the last step that reads it, as tracing does): it is read once the steps are over


def _large_aux(x):
    y = np.exp(x * 0.001)
    return y.sum(), y


def _large_aux_in_a_dict(x):
    y = x * 2.0  # no pullback reads y
    return (y + 1.0).sum(), {"head": y[:3], "y": y}


@pytest.mark.parametrize("f", [_large_aux, _large_aux_in_a_dict])
def test_a_large_temporary_returned_as_aux_is_held_to_the_end(f):
    """The replay let a temporary of 4 KiB or more go after the last step that read it, the
    aux output's too: its second call raised AttributeError where tracing returns it."""
    replaying = mutad.value_and_grad(f, has_aux=True, replay=True)
    for start in (0.5, 1.5, 0.7, 2.5):
        x = np.linspace(start, 2 * start, 1000)
        before = x.copy()
        (value, aux), grads = replaying(x)
        assert same(x, before)
        (value_t, aux_t), grads_t = mutad.value_and_grad(f, has_aux=True)(before.copy())
        assert same(value, value_t) and same(aux, aux_t) and same(grads, grads_t)
    assert program_count(replaying) == 1 and replaying.reasons == {}
