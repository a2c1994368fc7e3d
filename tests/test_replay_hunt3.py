"""Replays that answered as the recorded call where a decision went otherwise: more programs
whose replaying function is called on inputs that flip one decision the replay did not guard,
each call compared with a traced one, bit for bit, and the caller's bytes."""

import argparse
import collections
import ctypes
import inspect
import io
import mmap
import os
import random
import struct
import tempfile
import types

import numpy as np
import pytest

import mutad
from test_replay import replayed_like_traced, same


def flips(*rows):
    return [(np.array(row, dtype=float),) for row in rows]


# ----------------------------------------------------------------------------------------------
# Values f writes out and reads back


def _text_read_back(x):
    buffer = io.StringIO()
    np.savetxt(buffer, x)
    return (x * np.array([float(t) for t in buffer.getvalue().split()])).sum()


def _length_of_text(x):
    buffer = io.StringIO()
    np.savetxt(buffer, x)
    return x.sum() * len(buffer.getvalue())


def _bytes_read_back(x):
    buffer = io.BytesIO()
    np.save(buffer, x)
    return (x * np.frombuffer(buffer.getvalue()[-x.nbytes:])).sum()


def _rounded_read_back(x):
    buffer = io.BytesIO()
    np.save(buffer, np.floor(x))
    return (x * np.frombuffer(buffer.getvalue()[-x.nbytes:])).sum()


def _archive_read_back(x):
    buffer = io.BytesIO()
    np.savez(buffer, x=x)
    return x.sum() * len(buffer.getvalue()) + x[0] * (b"\x00\x00\x1c@" in buffer.getvalue())


def _file_read_back(x, path):
    np.savetxt(path, x)
    with open(path) as file:
        return (x * np.array([float(t) for t in file.read().split()])).sum()


WRITTEN = {"np.savetxt, read back": _text_read_back, "np.savetxt, its length": _length_of_text,
           "np.save, read back": _bytes_read_back, "np.save of np.floor(x)": _rounded_read_back,
           "np.savez, read back": _archive_read_back,
           "np.savetxt to a path, read back": _file_read_back}


@pytest.mark.parametrize("name", WRITTEN)
def test_values_f_writes_to_a_file_and_reads_back_are_not_replayed(name, tmp_path):
    """np.savetxt(buffer, x) and f reads the buffer (or the file) back: the replay ran
    savetxt again into the recorded call's buffer, and answered with what f had read back in
    the recorded call (the value for 1.5 on a call with 7.0; the length of "0.0..." where
    f wrote "-0.0...")."""
    f = WRITTEN[name]
    if f is _file_read_back:
        path = str(tmp_path / "values.txt")
        f = (lambda write: lambda x: write(x, path))(f)
    replaying = replayed_like_traced(f, flips([1.5, 2.0], [1.5, 2.0], [7.0, 2.0], [-0.0, 2.0],
                                              [0.0, 2.0], [1.5, 2.0]), replayed=False)
    assert "writes" in "".join(replaying.reasons.values())


def test_values_f_writes_to_a_file_it_does_not_read_are_written_on_each_call(tmp_path):
    """The file holds what the last call wrote, whether that call replayed or traced."""
    path = tmp_path / "values.txt"

    def f(x):
        np.savetxt(path, x * 2.0)
        return (x * x).sum()

    replaying = replayed_like_traced(f, flips([1.5, 2.0], [1.5, 2.0], [7.0, 2.0]), replayed=False)
    replaying(np.array([3.0, 4.0]))
    assert np.loadtxt(path).tolist() == [6.0, 8.0]


# ----------------------------------------------------------------------------------------------
# Fresh entropy


@pytest.mark.parametrize("draw", [
    lambda: random.Random().random(),
    lambda: (lambda r: (r.seed(), r.random())[1])(random.Random(3)),
    lambda: len(tempfile._RandomNameSequence().__next__()) * random.Random().random(),
    lambda: int.from_bytes(os.getrandom(8), "little") / 2.0 ** 64,
], ids=["Random()", "Random.seed()", "a temporary name's generator", "os.getrandom"])
def test_a_python_generator_seeded_from_fresh_entropy_in_f_traces_the_call(draw):
    """random.Random() in f seeds itself from the operating system's entropy in C, which no
    function os or random exposes counted, and os.getrandom is os.urandom's twin: a replay
    reused the recorded call's numbers."""
    replaying = mutad.value_and_grad(lambda x: (x * (1.0 + draw())).sum(), replay=True)
    values = {replaying(np.ones(2))[0] for _ in range(4)}
    assert len(values) == 4
    assert "fresh entropy" in "".join(replaying.reasons.values())


def test_a_python_generator_seeded_from_a_number_replays():
    """random.Random(5) gives the same numbers on every call: replayed, not traced."""
    replaying = replayed_like_traced(lambda x: (x * random.Random(5).random()).sum(),
                                     flips([1.0, 2.0], [1.0, 2.0], [3.0, 2.0]))
    assert not replaying.reasons


# ----------------------------------------------------------------------------------------------
# What f reaches besides its arguments


SETTINGS = {"scale": 1.0}
VIEWS = {"values": SETTINGS.values(), "items": SETTINGS.items(), "keys": SETTINGS.keys()}


@pytest.mark.parametrize("view", VIEWS)
def test_the_dict_a_view_f_reaches_shows_is_what_f_reaches(view):
    """SETTINGS.values() held in a global, which f reads: the walk stopped at the view, so a
    replay answered with the recorded scale after the caller set another (or added a key)."""
    shown = VIEWS[view]

    def f(x):
        if view == "keys":
            return x.sum() * len(shown)
        return x.sum() * (next(iter(shown)) if view == "values" else dict(shown)["scale"])

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([1.0, 2.0])
    try:
        for step in range(6):
            if step == 3:
                SETTINGS["scale"] = 3.0
                SETTINGS["offset"] = 0.5
            assert same(replaying(x), mutad.value_and_grad(f)(x.copy()))
    finally:
        SETTINGS.clear()
        SETTINGS["scale"] = 1.0


class Lookup(type):
    def __getattr__(cls, name):
        if name not in LOOKED_UP:
            raise AttributeError(name)
        return LOOKED_UP[name]


LOOKED_UP = {"scale": 1.0}


class Looked(metaclass=Lookup):
    pass


def test_a_metaclass_special_method_is_what_f_reaches():
    """Looked.scale, found through its metaclass's __getattr__ in a dict: the walk held the
    metaclass's namespace but not what its __getattr__ reads, so a replay answered with the
    recorded scale after the caller set another."""
    replaying = mutad.value_and_grad(lambda x: (x * Looked.scale).sum(), replay=True)
    x = np.array([1.0, 2.0])
    try:
        for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
            LOOKED_UP["scale"] = scale
            value, grad = replaying(x)
            assert value == 3.0 * scale and grad.tolist() == [scale, scale]
    finally:
        LOOKED_UP["scale"] = 1.0


class Pair(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_double), ("count", ctypes.c_int)]


SHARED = {"double": ctypes.c_double(1.0), "array": (ctypes.c_double * 2)(1.0, 2.0),
          "structure": Pair(1.0, 1)}


@pytest.mark.parametrize("kind", SHARED)
def test_memory_of_ctypes_f_reaches_is_compared_by_its_bytes(kind):
    """A ctypes value f reads (memory a C library shares, say), changed by the caller between
    calls: the walk did not compare its bytes, so a replay answered with the recorded one."""
    held = SHARED[kind]
    read = {"double": lambda: held.value, "array": lambda: held[0],
            "structure": lambda: held.scale * held.count}[kind]
    replaying = mutad.value_and_grad(lambda x: (x * read()).sum(), replay=True)
    x = np.array([1.0, 2.0])
    for step in range(6):
        if step == 3:
            if kind == "array":
                held[0] = 3.0
            else:
                setattr(held, "value" if kind == "double" else "scale", 3.0)
        scale = read()
        value, grad = replaying(x)
        assert value == 3.0 * scale and grad.tolist() == [scale, scale]


@pytest.mark.parametrize("kind", ["pointer", "function"])
def test_a_ctypes_pointer_f_reaches_traces_the_call(kind):
    """What a pointer points to is memory the walk cannot tell the extent of, and a C
    function wrapping a Python one hides it: traced."""
    target = ctypes.c_double(1.0)
    pointer = ctypes.pointer(target)
    scaled = ctypes.CFUNCTYPE(ctypes.c_double)(lambda: target.value)
    read = (lambda: pointer.contents.value) if kind == "pointer" else scaled
    replaying = mutad.value_and_grad(lambda x: (x * read()).sum(), replay=True)
    for scale in (1.0, 1.0, 3.0):
        target.value = scale
        assert replaying(np.array([1.0, 2.0]))[0] == 3.0 * scale
    assert "pointer" in "".join(replaying.reasons.values())


UNITS = {"scale": 1.0}
SCALED = np.frompyfunc(lambda v: v * UNITS["scale"], 1, 1)


def test_the_function_a_ufunc_of_frompyfunc_calls_is_what_f_reaches():
    """SCALED = np.frompyfunc(lambda v: v * UNITS["scale"], 1, 1), which f calls: the ufunc
    holds its Python function in C, where the walk did not look, so a replay answered with
    the recorded scale after the caller set another."""
    def f(x):
        return x.sum() * float(SCALED(2.0))

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([1.0, 2.0])
    try:
        for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
            UNITS["scale"] = scale
            assert same(replaying(x), mutad.value_and_grad(f)(x.copy()))
    finally:
        UNITS["scale"] = 1.0


def test_an_mmap_f_reaches_is_compared_by_its_bytes():
    """struct.unpack of an mmap f reads (memory another process may write): the walk did not
    compare its bytes, so a replay answered with the recorded value."""
    shared = mmap.mmap(-1, 8)
    shared[:] = struct.pack("d", 1.0)

    def f(x):
        return x.sum() * struct.unpack("d", shared[:8])[0]

    replaying = mutad.value_and_grad(f, replay=True)
    for step in range(5):
        if step == 3:
            shared[:] = struct.pack("d", 3.0)
        assert same(replaying(np.array([1.0, 2.0])), mutad.value_and_grad(f)(np.ones(2) * [1, 2]))


class Weights:
    pass


WEIGHTS = Weights()
SETTINGS_NS = types.SimpleNamespace(rate=0.5, decay=2.0)
SAME_NS = types.SimpleNamespace(rate=0.5, decay=2.0)
ARGUMENTS = argparse.Namespace(rate=0.5, decay=2.0)

BY_BUILT_NAMES = {
    "inspect.getmembers": lambda x: x.sum() * sum(v for n, v in inspect.getmembers(WEIGHTS)
                                                  if n[:1] in "fs"),
    "repr": lambda x: x.sum() * len(repr(SETTINGS_NS)),
    "==": lambda x: x.sum() * (1.0 + (SETTINGS_NS == SAME_NS)),
    "repr of argparse's": lambda x: x.sum() * len(repr(ARGUMENTS)),
}


@pytest.mark.parametrize("read", BY_BUILT_NAMES)
def test_attributes_read_by_names_f_does_not_write_are_what_f_reaches(read):
    """inspect.getmembers(WEIGHTS) reads each attribute by a name it builds; repr and == of a
    SimpleNamespace (or argparse's Namespace) read all of them: the walk held only the names
    f's code names, so a replay answered with the recorded weights after the caller set
    another."""
    f = BY_BUILT_NAMES[read]
    WEIGHTS.first, WEIGHTS.second = 1.0, 2.0
    SETTINGS_NS.decay = ARGUMENTS.decay = 2.0
    replaying = mutad.value_and_grad(f, replay=True)
    try:
        for step in range(5):
            if step == 3:
                WEIGHTS.second = 5.0
                SETTINGS_NS.decay = ARGUMENTS.decay = 20.5
            x = np.array([1.0, 2.0])
            assert same(replaying(x), mutad.value_and_grad(f)(x.copy()))
    finally:
        SETTINGS_NS.decay = ARGUMENTS.decay = 2.0


class Tolerances:
    scale = 1.0


def test_an_attribute_a_format_string_reads_is_what_f_reaches():
    """"{0.scale}".format(settings): str.format reads the attribute by the name in the
    string, which the walk did not take for a name, so a replay answered with the recorded
    scale after the caller set another."""
    def f(x):
        return x.sum() * float("{0.scale}".format(Tolerances))

    replaying = mutad.value_and_grad(f, replay=True)
    try:
        for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
            Tolerances.scale = scale
            x = np.array([1.0, 2.0])
            assert same(replaying(x), mutad.value_and_grad(f)(x.copy()))
    finally:
        Tolerances.scale = 1.0


HISTORY = collections.UserList([1.0])
LABEL = collections.UserString("abc")


@pytest.mark.parametrize("kind", ["UserList", "UserString"])
def test_the_data_of_a_user_list_f_reaches_is_what_f_reaches(kind):
    """HISTORY[-1] of a collections.UserList: its methods (the standard library's) read
    HISTORY.data, a name f's code does not name, so a replay answered with the recorded item
    after the caller appended another."""
    f = ((lambda x: x.sum() * HISTORY[-1]) if kind == "UserList" else
         (lambda x: x.sum() * len(LABEL)))
    replaying = mutad.value_and_grad(f, replay=True)
    try:
        for step in range(5):
            if step == 3:
                HISTORY.append(3.0)
                LABEL.data = "abcd"
            x = np.array([1.0, 2.0])
            assert same(replaying(x), mutad.value_and_grad(f)(x.copy()))
    finally:
        HISTORY[:] = [1.0]
        LABEL.data = "abc"
