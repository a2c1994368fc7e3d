"""Replays of functions that read state outside their arguments which no guard saw change:
each replaying function is called as that state changes between calls, each call compared
with a traced one, bit for bit, and with NumPy's value."""

import datetime
import gc
import glob
import os
import pathlib
import time
import uuid
from time import perf_counter

import numpy as np
import pytest
import scipy.special

import mutad

from test_replay import same
from test_replay_budget import replays


def replayed_like_numpy(f, change, calls=5):
    """Call ``value_and_grad(f, replay=True)`` after each ``change(i)`` of what ``f`` reads,
    and check each call against a traced one and NumPy's value."""
    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([1.0, -0.5, 2.0])
    for i in range(calls):
        change(i)
        got = replaying(x.copy())
        expected = mutad.value_and_grad(f)(x.copy())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(x.copy()))
    return replaying


# ----------------------------------------------------------------------------------------------
# A file f reads (or asks after) changes between calls where nothing a replay guards does: the
# recording read it once, and every replay used what it read then


def test_a_file_read_in_f_leaves_it_traced(tmp_path):
    path = tmp_path / "scale.txt"
    name = str(path)  # (a pathlib.Path's methods read files too)

    def loss(x):
        with open(name) as file:
            scale = float(file.read())
        return scale * x.sum()

    replaying = replayed_like_numpy(loss, lambda i: path.write_text(str(1.0 + i)))
    assert "open()" in " ".join(replaying.reasons.values())


def test_a_file_asked_after_in_f_leaves_it_traced(tmp_path):
    path = tmp_path / "flag"
    name = str(path)

    def change(i):
        if i % 2:
            path.touch()
        elif path.exists():
            path.unlink()

    def loss(x):
        return (2.0 if os.path.exists(name) else 1.0) * x.sum()

    replaying = replayed_like_numpy(loss, change)
    assert "os.path.exists" in " ".join(replaying.reasons.values())



def test_a_file_read_through_pathlib_leaves_it_traced(tmp_path):
    path = tmp_path / "scale.txt"

    def loss(x):
        return float(path.read_text()) * x.sum()

    def loss_of_its_name(x):
        return float(pathlib.Path(str(path)).read_text()) * x.sum()

    for f in (loss, loss_of_its_name):
        replaying = replayed_like_numpy(f, lambda i: path.write_text(str(1.0 + i)))
        assert "pathlib.Path" in " ".join(replaying.reasons.values()) \
            or "PosixPath" in " ".join(replaying.reasons.values())



def test_a_directory_listed_in_f_leaves_it_traced(tmp_path):
    pattern = str(tmp_path / "*.txt")

    def loss(x):
        return len(glob.glob(pattern)) * x.sum()

    replaying = replayed_like_numpy(loss, lambda i: (tmp_path / f"{i}.txt").touch())
    assert "glob.glob" in " ".join(replaying.reasons.values())


# And what f writes to a file a replay did not write (it runs the recorded steps)


def test_a_file_written_in_f_is_written_on_every_call(tmp_path):
    path = tmp_path / "log.txt"

    def loss(x):
        value = (x ** 2).sum()
        with open(path, "a") as file:
            file.write(f"{float(value)!r}\n")
        return value

    replaying = mutad.value_and_grad(loss, replay=True)
    x = np.array([1.0, -0.5, 2.0])
    for _ in range(4):
        replaying(x.copy())
    assert path.read_text().count("\n") == 4



def test_the_working_directory_read_in_f_leaves_it_traced(tmp_path):
    (tmp_path / "a").mkdir()
    directories = [str(tmp_path), str(tmp_path / "a")]
    start = os.getcwd()

    def loss(x):
        return len(os.getcwd()) * x.sum()

    try:
        replaying = replayed_like_numpy(loss, lambda i: os.chdir(directories[i % 2]))
    finally:
        os.chdir(start)
    assert "os.getcwd" in " ".join(replaying.reasons.values())


# The clock f reads changes between calls where nothing a replay guards does: every replay gave
# the recorded reading (and what f computed from it)


def _time_time():
    return time.time() % 1.0


def _perf_counter():  # (a function of the module's, imported by its name)
    return perf_counter() % 1.0


def _datetime_now():  # (a class's method)
    return datetime.datetime.now().microsecond * 1e-6


def _date_today():
    return float(datetime.date.today().day)


def _datetime64_now():  # (NumPy's, given "now")
    return float(np.datetime64("now").astype(np.int64) % 60)


def _uuid1():  # (an identifier made of the time)
    return float(uuid.uuid1().time % 1000)


def _gc_count():  # (the interpreter's counters)
    return float(gc.get_count()[0])


@pytest.mark.parametrize("reading", [_time_time, _perf_counter, _datetime_now, _date_today,
                                     _datetime64_now, _uuid1, _gc_count])
def test_the_clock_read_in_f_leaves_it_traced(reading):
    def loss(x):
        t = reading()
        return t * x.sum(), t

    replaying = mutad.value_and_grad(loss, has_aux=True, replay=True)
    x = np.array([1.0, -0.5, 2.0])
    for _ in range(4):
        (value, t), gradient = replaying(x.copy())
        assert same(value, t * x.sum()) and same(gradient, np.full(3, t))  # (its own reading)
    assert replays(replaying) == 0
    assert "which reads" in " ".join(replaying.reasons.values())


# A setting of NumPy's or SciPy's that f reads (not the floating-point error handling the
# signature holds) changed between calls: every replay gave the recorded setting's answer


def _special_raises():
    return 2.0 if scipy.special.geterr()["singular"] == "raise" else 1.0


def _buffer_size():
    return np.getbufsize() / 8192


@pytest.mark.parametrize("read, settings, setting", [
    (_special_raises, scipy.special.geterr, lambda k: scipy.special.seterr(
        singular=("ignore", "raise")[k])),
    (_buffer_size, np.getbufsize, lambda k: np.setbufsize((8192, 16384)[k]))])
def test_a_setting_f_reads_changed_between_calls_records_anew(read, settings, setting):
    def loss(x):
        return read() * (x * x).sum()

    before = settings()
    replaying = mutad.value_and_grad(loss, replay=True)
    x = np.array([1.0, -0.5, 2.0])
    try:
        for k in (0, 0, 1, 1, 0):
            setting(k)
            got, expected = replaying(x.copy()), mutad.value_and_grad(loss)(x.copy())
            assert same(got[0], expected[0]) and same(got[1], expected[1])
            assert same(got[0], (1.0 + k) * (x * x).sum())
    finally:
        scipy.special.seterr(**before) if settings is scipy.special.geterr else np.setbufsize(
            before)
    assert replays(replaying) == 3  # (the second call, the fourth, and the fifth: the first
    # program again)


# ----------------------------------------------------------------------------------------------
# An array f reaches was guarded by its bytes and where they lie, not by whether it may be
# written: code deciding on its writeable flag took the recorded branch on every replay


READ_ONLY_SOMETIMES = np.array([1.0, 2.0])


def _scaled_where_writeable(x):
    return (2.0 if READ_ONLY_SOMETIMES.flags.writeable else 1.0) * x.sum()


def test_an_array_made_read_only_between_calls_drops_the_programs():
    def change(i):
        READ_ONLY_SOMETIMES.flags.writeable = bool(i % 2)

    try:
        replayed_like_numpy(_scaled_where_writeable, change)
    finally:
        READ_ONLY_SOMETIMES.flags.writeable = True
