"""Replays that answered as the recorded call where a setting or state outside f's names
changed, and recordings traced again whose first run of f left its effects: each program's
replaying function is called on inputs or under settings that change one decision, each call
compared with a traced one, bit for bit, and the caller's bytes."""

import abc
import array
import asyncio
import decimal
import enum
import os
import queue
import random
import sys
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import mutad
from test_replay import same


def replayed_under(f, settings, x=(1.0, 2.0), traced=None):
    """Call ``value_and_grad(f, replay=True)`` once under each setting of ``settings`` (a
    function setting the ``i``-th call's), and check each against a traced call under the
    same setting, and the caller's bytes. ``traced``: a list to which each call the replaying
    function traces appends."""
    replaying = mutad.value_and_grad(f, replay=True)
    if traced is not None:
        trace = replaying.trace
        replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    for i in range(len(settings)):
        settings[i]()
        x = np.array(x)
        before = x.tobytes()
        got = replaying(x)
        assert x.tobytes() == before
        settings[i]()
        assert same(got, mutad.value_and_grad(f)(x.copy()))
    return replaying


def twice(first, then):
    return [first] * 3 + [then] * 3


# ----------------------------------------------------------------------------------------------
# What the walk reaches through the standard library's descriptors


class Mode(enum.Enum):
    SCALED = [1.0]


def test_the_value_of_an_enum_member_is_what_f_reaches():
    """Mode.SCALED.value, a list the caller changes in place: member.value is a property of
    the standard library's reading member._value_, a name f's code does not name, so a replay
    answered with the recorded scale."""
    def scale(v):
        return lambda: Mode.SCALED.value.__setitem__(0, v)

    try:
        replayed_under(lambda x: (x * Mode.SCALED.value[0]).sum(), twice(scale(1.0), scale(5.0)))
    finally:
        Mode.SCALED.value[0] = 1.0


# ----------------------------------------------------------------------------------------------
# Settings the libraries keep outside the names a walk compares


CONSTANT = np.array([1.23456789, 2.0])


def test_a_string_of_a_constant_is_written_under_the_callers_print_options():
    """len(str(CONSTANT)) after the caller set np.set_printoptions(precision=2): a replay
    answered with the string's length under the recorded call's options."""
    def precision(p):
        return lambda: np.set_printoptions(precision=p)

    try:
        replayed_under(lambda x: x.sum() * len(str(CONSTANT)), twice(precision(8), precision(2)))
    finally:
        np.set_printoptions(precision=8)


def test_the_decimal_context_is_a_setting_of_the_program():
    """Decimal(1) / Decimal(3) after the caller set the context's precision to 3: a replay
    answered with the recorded precision's quotient."""
    context = decimal.getcontext()

    def precision(p):
        return lambda: setattr(context, "prec", p)

    try:
        replayed_under(lambda x: x.sum() * float(decimal.Decimal(1) / decimal.Decimal(3)),
                       twice(precision(28), precision(3)))
    finally:
        context.prec = 28


@pytest.mark.parametrize("read", ["os.environ", "os.getenv"])
def test_the_environment_is_a_setting_of_the_program(read):
    """float(os.environ["SCALE"]) after the caller set another: the walk compared os.environ
    (a library's object) by identity alone, so a replay answered with the recorded scale."""
    f = ((lambda x: x.sum() * float(os.environ.get("MUTAD_TEST_SCALE", "1")))
         if read == "os.environ" else
         (lambda x: x.sum() * float(os.getenv("MUTAD_TEST_SCALE", "1"))))

    def scale(v):
        return lambda: os.environ.__setitem__("MUTAD_TEST_SCALE", v)

    try:
        replayed_under(f, twice(scale("1"), scale("4")))
    finally:
        os.environ.pop("MUTAD_TEST_SCALE", None)


def test_the_items_of_sys_argv_are_settings_of_the_program():
    """sys.argv[1] changed in place by the caller: compared by identity alone, a replay
    answered with the recorded argument."""
    saved = list(sys.argv)

    def argument(v):
        return lambda: sys.argv.__setitem__(slice(None), ["program", v])

    try:
        replayed_under(lambda x: x.sum() * float(sys.argv[1]), twice(argument("1"),
                                                                    argument("5")))
    finally:
        sys.argv[:] = saved


def depth(n):
    return 1 if n == 0 else 1 + depth(n - 1)


def deep_or_caught(x):
    try:
        d = depth(150)
    except RecursionError:
        d = -1
    return x.sum() * d


def test_the_recursion_limit_is_a_setting_of_the_program():
    """A RecursionError f catches, after the caller lowered the recursion limit: a replay
    answered with the recorded depth."""
    limit = sys.getrecursionlimit()

    def limited(n):
        return lambda: sys.setrecursionlimit(n)

    try:
        replayed_under(deep_or_caught, twice(limited(limit), limited(100)))
    finally:
        sys.setrecursionlimit(limit)


class Registered(abc.ABC):
    pass


class Plain:
    pass


PLAIN = Plain()


def test_a_virtual_subclass_registered_since_the_recording_is_a_setting_of_the_program():
    """isinstance(PLAIN, Registered) after the caller registered Plain with the abstract base
    class: the registry lives in C, where the walk did not look, so a replay answered with
    the recorded False."""
    def registered(now):
        return lambda: Registered.register(Plain) if now else None

    replayed_under(lambda x: x.sum() * (2.0 if isinstance(PLAIN, Registered) else 1.0),
                   twice(registered(False), registered(True)))


GENERATOR = np.random.default_rng(0)


@pytest.mark.parametrize("read", ["np.random.get_state", "a Generator's state"])
def test_a_generators_state_f_reads_without_drawing_is_a_setting_of_the_program(read):
    """np.random.get_state() read in f (no draw, so the program was kept), after the caller
    seeded the generator anew: a replay answered with the recorded state's number."""
    if read == "np.random.get_state":
        def f(x):
            return x.sum() * float(np.random.get_state()[1][3] % 5)

        def seeded(s):
            return lambda: np.random.seed(s)
    else:
        def f(x):
            return x.sum() * float(GENERATOR.bit_generator.state["state"]["state"] % 5)

        def seeded(s):
            return lambda: setattr(GENERATOR.bit_generator, "state",
                                   np.random.default_rng(s).bit_generator.state)
    replayed_under(f, twice(seeded(0), seeded(7)))


def heard_or_not(x):
    with warnings.catch_warnings(record=True) as heard:
        y = np.log(x)
    return x.sum() if heard else y.sum()


def filtered(action):
    def set_filters():
        warnings.resetwarnings()
        if action is not None:
            warnings.simplefilter(action)
    return set_filters


def test_the_callers_warnings_filters_pick_a_program_where_f_hears_warnings():
    """warnings.catch_warnings(record=True) in f, and the caller's filters set to ignore
    after the recorded call: f hears nothing and takes its other branch, where a replay
    answered as recorded (only filters that raise picked a program)."""
    with warnings.catch_warnings():
        replayed_under(heard_or_not, twice(filtered(None), filtered("ignore")), x=(0.0, 2.0))


def test_the_callers_warnings_filters_pick_no_program_where_f_hears_none():
    """The filters change nothing else: recorded once, whatever they are."""
    traced = []
    with warnings.catch_warnings():
        replayed_under(lambda x: np.log(x).sum(), twice(filtered("always"), filtered("ignore")),
                       traced=traced)
    assert len(traced) == 1


def silenced(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = np.log(x)
    return np.where(np.isfinite(y), y, 0.0).sum()


def recorded(x):
    with warnings.catch_warnings(record=True):
        y = np.log(x)
    return np.where(np.isfinite(y), y, 0.0).sum()


def solved_and_recorded(a):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        x = scipy.linalg.solve(a, np.ones(len(a)))
    return (x * x).sum() * (2.0 if heard else 1.0)


@pytest.mark.parametrize("f", [silenced, recorded, solved_and_recorded])
def test_a_warning_f_silenced_or_heard_is_not_issued_again_by_a_replay(f):
    """np.log(0.0) under warnings.simplefilter("ignore") in f, or heard by f's own
    catch_warnings(record=True) (scipy.linalg.solve's LinAlgWarning too): a replay issued the
    warning again to the caller, which NumPy, and tracing, never showed."""
    x = scipy.linalg.hilbert(14) if f is solved_and_recorded else np.array([0.0, 2.0])
    replaying = mutad.value_and_grad(f, replay=True)

    def shown(g):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = g(x.copy())
        return result, [(w.category, str(w.message)) for w in caught]

    traced = shown(mutad.value_and_grad(f))
    for _ in range(3):
        got = shown(replaying)
        assert same(got[0], traced[0]) and got[1] == traced[1]
    assert not replaying.reasons


# ----------------------------------------------------------------------------------------------
# A recording traced again runs f a second time: what f did the first time is undone


def special_of_an_order_from_data(x, orders):
    try:
        return scipy.special.struve(orders[0] * 1.0, x).sum()
    except Exception:  # (the recording's refusal, caught)
        return x.sum() * 1000.0


HISTORY = []
COUNT = 0


class Counted:
    calls = 0


COUNTED = Counted()
COUNTED.calls = 0
# A count in an integer array: a float one f writes is adopted, and written back after each
# differentiation (docs/sharp-bits.md), where NumPy's run leaves it counted.
BUFFER = np.zeros(1, dtype=np.int64)
TOTALS = {"calls": 0}
DRAWN = np.random.default_rng(0)
PYTHONS = random.Random(0)


def with_effects(x, orders):
    global COUNT
    HISTORY.append(1.0)
    COUNT += 1
    Counted.calls += 1
    COUNTED.calls += 1
    BUFFER[0] += 1
    TOTALS["calls"] += 1
    scale = np.random.rand() + random.random() + DRAWN.random() + PYTHONS.random() \
        + len(HISTORY) + COUNT + Counted.calls + COUNTED.calls + BUFFER[0] + TOTALS["calls"]
    return special_of_an_order_from_data(x, orders) * scale


def effects():
    return (np.random.rand(), random.random(), DRAWN.random(), PYTHONS.random(), len(HISTORY),
            COUNT, Counted.calls, COUNTED.calls, BUFFER[0], TOTALS["calls"])


def start():
    global COUNT
    np.random.seed(1)
    random.seed(1)
    DRAWN.bit_generator.state = np.random.default_rng(1).bit_generator.state
    PYTHONS.seed(1)
    HISTORY.clear()
    COUNT = Counted.calls = COUNTED.calls = TOTALS["calls"] = 0
    BUFFER[0] = 0


def test_a_recording_traced_again_does_what_f_does_once():
    """A rule's refusal of an array outside argnums, caught by f, makes the recording call
    traced again, which ran f a second time: its draws from NumPy's and the random module's
    generators (global, and held in globals), its appends, and the counts it keeps in a global, a class, an object, an
    array and a dict were made twice, and that call answered with the doubled counts."""
    calls = [(np.array([0.7, 1.3]), np.array([1.5, 2.0]))] * 3
    replaying = mutad.value_and_grad(with_effects, replay=True)
    start()
    got = [replaying(*(a.copy() for a in args))[0] for args in calls], effects()
    start()
    expected = [with_effects(*(a.copy() for a in args)) for args in calls], effects()
    assert same(got[0], expected[0]) and got[1] == expected[1]
    start()
    traced = [mutad.value_and_grad(with_effects)(*args)[0] for args in calls], effects()
    assert same(got[0], traced[0]) and got[1] == traced[1]
    assert "refused" in "".join(map(str, replaying.reasons.values()))


def seeded_by_an_index(x):
    HISTORY.append(1.0)
    generator = np.random.default_rng(np.argmax(x))
    return (x * generator.random(2)).sum() * len(HISTORY) * np.random.rand()


def test_a_recording_that_raised_traced_again_does_what_f_does_once():
    """The same where the recording raised (a generator seeded by an index the recording
    holds as a traced constant) and the call was traced again."""
    x = np.array([0.7, 1.3])
    replaying = mutad.value_and_grad(seeded_by_an_index, replay=True)
    start()
    got = [replaying(x.copy())[0] for _ in range(3)], effects()
    start()
    expected = [seeded_by_an_index(x.copy()) for _ in range(3)], effects()
    assert same(got[0], expected[0]) and got[1] == expected[1]


# ----------------------------------------------------------------------------------------------
# What f consumes, and buffers f resizes


@pytest.mark.parametrize("kind", [queue.Queue, queue.SimpleQueue, asyncio.Queue])
def test_a_queue_f_takes_from_traces_the_call(kind):
    """SCALES.get_nowait() in f: a queue's next item is its state, as an iterator's is, which
    the walk did not take for one (queue.Queue keeps its items in an attribute f's code does
    not name; SimpleQueue in C), so every replay answered with the first item."""
    scales = kind()
    for v in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0):
        scales.put_nowait(v)
    replaying = mutad.value_and_grad(lambda x: x.sum() * scales.get_nowait(), replay=True)
    assert [float(replaying(np.array([1.0, 2.0]))[0]) for _ in range(4)] == [3.0, 6.0, 9.0,
                                                                            12.0]
    assert "queue" in "".join(replaying.reasons.values())


@pytest.mark.parametrize("kind", ["array.array", "bytearray"])
def test_a_buffer_f_resizes_is_not_held_by_the_replay(kind):
    """SCALES.pop() in f, of an array.array (or a bytearray): the walk held a view of its
    bytes (np.frombuffer) while f ran, so f's pop raised BufferError ("cannot resize an array
    that is exporting buffers"), where NumPy's run pops."""
    scales = array.array("d", [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) if kind == "array.array" \
        else bytearray([6, 5, 4, 3, 2, 1])
    replaying = mutad.value_and_grad(lambda x: x.sum() * scales.pop(), replay=True)
    assert [float(replaying(np.array([1.0, 2.0]))[0]) for _ in range(5)] == [3.0, 6.0, 9.0,
                                                                            12.0, 15.0]
    scales.append(1)
