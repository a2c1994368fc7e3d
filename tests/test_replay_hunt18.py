"""Replays that answered otherwise than tracing, or never settled, and what mutad left of
Python's state: each replaying function's calls are compared with traced ones, and what
Python shows the caller afterwards checked."""

import sys
import threading
import types
import warnings

import numpy as np
import pytest

import mutad
from mutad.core.debug import Capture


# ----------------------------------------------------------------------------------------------
# Python's warnings set-up (``warnings.filters``, ``warnings._showwarnmsg``) is the process's.
# Each call that records or replays swapped it and gave back what it found: calls in threads
# overlapping and finishing out of order gave back another thread's capture, which stayed, and
# every warning the user's code issued later went to it, shown nowhere. Each thread's warnings
# go to its own handlers now (``debug.show_to``), through one hook the last to finish removes


def _log_shifted(x):
    return np.sum(np.log(x - 0.5))


def test_threads_replaying_leave_the_warnings_set_up_as_they_found_it():
    grads = {}

    def work(seed):
        replaying = mutad.grad(_log_shifted, replay=True)
        rng = np.random.default_rng(seed)
        grads[seed] = [(x, replaying(x)) for x in rng.uniform(0.0, 2.0, (12, 5))]

    interval = sys.getswitchinterval()
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        filters, show = warnings.filters, warnings._showwarnmsg
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        assert warnings._showwarnmsg is show and warnings.filters is filters
    line = _log_shifted.__code__.co_firstlineno + 1
    assert {(str(w.message), w.filename, w.lineno) for w in shown} == {
        ("invalid value encountered in log", __file__, line)}
    assert len(shown) == sum((x < 0.5).any() for calls in grads.values() for x, _ in calls)
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        warnings.warn("the user's own")
    assert [(str(w.message), w.filename) for w in heard] == [("the user's own", __file__)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for calls in grads.values():
            for x, grad in calls:
                assert np.array_equal(grad, mutad.grad(_log_shifted)(x), equal_nan=True)


def _warned_elsewhere(registry):
    for message in ("quiet", "loud", "loud", "once", "once", "other"):
        warnings.warn_explicit(message, UserWarning, "elsewhere.py", 7, "elsewhere", registry)


def test_a_thread_without_a_capture_meets_the_users_filters_as_they_are():
    # While a call records or replays in one thread, every warning it issues is caught,
    # whatever the filters say, and the filters are the process's: another thread's warnings
    # were all shown, those the user ignores or shows once too. They meet the user's filters
    # now, matched as Python matches them; the capturing thread's are still all caught.
    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()
        warnings.filterwarnings("ignore", "quiet")
        warnings.filterwarnings("default", "loud")
        warnings.filterwarnings("once", "once")
        filters = warnings.filters
        capture = Capture()
        try:
            nested = Capture()  # (one nested in the same thread, as an operation's in a call)
            try:
                thread = threading.Thread(target=_warned_elsewhere, args=({},))
                thread.start()
                thread.join()
                thread = threading.Thread(target=warnings.filterwarnings, args=("error", "mine"))
                thread.start()  # (a filter added meanwhile, which stays)
                thread.join()
                warnings.warn("quiet")
            finally:
                inner = nested.stop()
            warnings.warn("loud")
        finally:
            outer = capture.stop()
        assert warnings.filters[1:] == filters and warnings.filters[0][0] == "error" \
            and warnings.filters[0][1].pattern == "mine"
    assert [str(w.message) for w in shown] == ["loud", "once", "other"]
    assert [str(w.message) for w in inner] == ["quiet"]
    assert [str(w.message) for w in outer] == ["loud"]
    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()  # (no filters at all)
        capture = Capture()
        try:
            warnings.warn("quiet")
        finally:
            issued = capture.stop()
        assert warnings.filters == []
    assert shown == [] and [str(w.message) for w in issued] == ["quiet"]


# ----------------------------------------------------------------------------------------------
# The globals a replay holds f to are those its code reads as globals: an attribute's name or a
# keyword's in f's code (``res.k``, ``g(x, k=...)``) is none, and a module-level variable of
# that name rebound between calls (a loop's ``for k in ...``) made every call trace


k = 0
_SETTINGS = types.SimpleNamespace(k=2.0)


def _scaled(x, k=1.0):
    return x * k


def _keyword_and_attribute(x):
    return np.sum(_scaled(x, k=_SETTINGS.k) ** 2)


def test_a_global_named_as_an_attribute_or_keyword_of_f_is_not_held():
    global k
    replaying = mutad.value_and_grad(_keyword_and_attribute, replay=True)
    trace, traced = replaying.trace, []
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    for k in range(4):  # (the module's k, as a script's loop at module level rebinds it)
        x = np.arange(3.0) + k
        got = replaying(x)
        expected = mutad.value_and_grad(_keyword_and_attribute)(x)
        assert got[0] == expected[0] and np.array_equal(got[1], expected[1])
    assert len(traced) == 1, replaying.reasons
    _SETTINGS.k = 3.0  # (what f reads of it is still held)
    assert np.array_equal(replaying(np.arange(3.0))[1], 18.0 * np.arange(3.0))


# ----------------------------------------------------------------------------------------------
# Tracing folds the reads of single elements into the elementwise operation that uses them (a
# scalar loop's ``u[i - 1] * u[i]``), whose pullback then runs the reads' too: an event of a
# read's adding its cotangent into what it read was named the operation's ("in the gradient of
# np.multiply"), where a replay, which keeps each read a step of its own, and tracing of a read
# not folded name it the read's ("x[key]")


def _two_reads_of_one_element(x):
    return x[0] * x[1] + x[2] * x[1]


def _element_recurrence(x):
    u = x.copy()
    for i in range(1, u.size):
        u[i] = u[i - 1] * u[i] + np.exp(-u[i] ** 2)
    return u[-1]


def _events(function, x, modes):
    with warnings.catch_warnings(record=True) as shown, np.errstate(**modes):
        warnings.simplefilter("always")
        try:
            function(x.copy())
            raised = None
        except FloatingPointError as error:
            raised = str(error)
    return [str(w.message) for w in shown], raised


@pytest.mark.parametrize("raises", [False, True])
@pytest.mark.parametrize("f, x, event", [
    (_two_reads_of_one_element, [1e308, 1e-10, 1e308], "over"),
    (_element_recurrence, [-0.7, -1.0, 2.0, -np.inf], "invalid")])
def test_an_event_of_a_folded_reads_pullback_is_named_the_reads(f, x, event, raises):
    x, modes = np.array(x), {event: "raise"} if raises else {}
    replaying = mutad.value_and_grad(f, replay=True)
    expected = _events(mutad.value_and_grad(f), x, modes)
    assert "encountered in add, in the gradient of x[key]" in str(expected)
    for _ in range(3):
        assert _events(replaying, x, modes) == expected


# ----------------------------------------------------------------------------------------------
# A seed sequence counts the children it spawned, which seed the next ones: f seeding a
# generator from a spawn of a seed sequence that lives between calls (or of a generator's,
# ``rng.spawn``) was replayed with the first call's numbers, and the count left as it was


_SEEDS = np.random.SeedSequence(5)
_SPAWNING = np.random.default_rng(7)


def _seeded_by_a_spawn(x):
    child = _SEEDS.spawn(1)[0]
    return np.sum(x * np.random.default_rng(child).random(3))


def _a_spawned_generator(x):
    return np.sum(x * _SPAWNING.spawn(1)[0].random(3))


def test_a_spawn_of_a_seed_sequence_draws_other_numbers_on_each_call():
    global _SEEDS, _SPAWNING
    replaying = [mutad.value_and_grad(f, replay=True)
                 for f in (_seeded_by_a_spawn, _a_spawned_generator)]
    got = [[f(np.ones(3)) for _ in range(3)] for f in replaying]
    counts = _SEEDS.n_children_spawned, _SPAWNING.bit_generator.seed_seq.n_children_spawned
    _SEEDS, _SPAWNING = np.random.SeedSequence(5), np.random.default_rng(7)
    expected = [[mutad.value_and_grad(f)(np.ones(3)) for _ in range(3)]
                for f in (_seeded_by_a_spawn, _a_spawned_generator)]
    assert counts == (3, 3)
    for mine, theirs in zip(got, expected):
        assert len({value for value, _ in mine}) == 3
        for (value, grad), (value_traced, grad_traced) in zip(mine, theirs):
            assert value == value_traced and np.array_equal(grad, grad_traced)
