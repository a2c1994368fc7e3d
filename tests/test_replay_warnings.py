"""A replay warns of NumPy's floating-point events as tracing does: the same messages, naming
the function that raised each, at the same lines, in the same order, and raises where tracing
does (``np.errstate``, Python's warnings filters). A replay hears each event's message and
the step that raised it, and replays only where they are the recorded call's."""

import warnings

import numpy as np
import pytest

import mutad
from mutad.engines.blocks import Block
from test_replay_budget import replays


def outcome(function, x, mode="warn", action="always"):
    """What calling ``function(x)`` shows of NumPy's floating-point events under the error
    handling ``mode`` and the warnings filter ``action``: the warnings (category, message,
    line), what an error callback was told, and the exception raised (class, message, line)."""
    called = []
    with warnings.catch_warnings(record=True) as issued, \
            np.errstate(all=mode, call=lambda kind, flag: called.append(kind)):
        warnings.simplefilter(action)
        try:
            function(x)
            raised = None
        except (FloatingPointError, RuntimeWarning) as error:
            lines, tb = [], error.__traceback__
            while tb is not None:  # the line of f that raised it
                if tb.tb_frame.f_code.co_filename == __file__:
                    lines.append(tb.tb_lineno)
                tb = tb.tb_next
            raised = type(error), str(error), lines[-1]
    return [(w.category, str(w.message), w.lineno) for w in issued], called, raised


def two_logs(x):
    a = np.log(x)
    b = np.log(2.0 - x)
    return np.nansum(a * a) + np.nansum(b * x)


def log_then_sqrt(x):
    a = np.log(x[:1]) + np.sqrt(x[1:2])
    return np.nansum(a) + np.nansum(np.log(x[2:]))


def blocked(x):
    """Small elementwise steps a replay compiles into a block."""
    y = x * 2.0
    z = np.log(y) + 1.0
    w = np.sqrt(y - 1.0) * z
    v = np.log(3.0 - y) - w
    return np.nansum(v * z) + np.nansum(w)


CASES = [
    (two_logs, [-1.0, 0.5], [3.0, 0.5]),  # the same function, another line
    (log_then_sqrt, [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]),  # the same kind, another function
    (blocked, [-1.0, 0.25], [0.25, 2.0]),  # between steps of a compiled block
]


@pytest.mark.parametrize("f, recorded, moved", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_replay_warns_where_tracing_warns(f, recorded, moved):
    replaying = mutad.value_and_grad(f, replay=True)
    for values in (recorded, moved, recorded):
        for _ in range(3):
            x = np.array(values)
            before = x.tobytes()
            assert outcome(replaying, x) == outcome(f, x.copy())
            assert x.tobytes() == before
            value, grad = replaying(x)
            expected_value, expected = mutad.value_and_grad(f)(x.copy())
            assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
            assert grad.tobytes() == expected.tobytes()
        # the events the recording heard replay (compiled or not); others record again
        assert replays(replaying) >= 4


def test_the_steps_that_raised_an_event_run_as_themselves_in_a_block():
    replaying = mutad.value_and_grad(blocked, replay=True)
    for _ in range(3):
        replaying(np.array([-1.0, 0.25]))
    program, = replaying.programs.values()
    assert program.replays == 2 and program.kinds
    assert any(type(step) is Block for step in program.steps)
    in_blocks = {id(s) for step in program.steps if type(step) is Block for s in step.steps}
    assert not in_blocks & program.raising


@pytest.mark.parametrize("mode", ["warn", "raise", "ignore", "call", "print"])
@pytest.mark.parametrize("action", ["always", "error", "ignore", "default"])
@pytest.mark.parametrize("f, recorded, moved", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_replay_raises_and_warns_as_tracing_under_the_callers_handling(
        f, recorded, moved, mode, action, capfd):
    replaying = mutad.value_and_grad(f, replay=True)
    for values in (recorded, recorded, moved, recorded):
        x = np.array(values)
        capfd.readouterr()
        got = outcome(replaying, x, mode, action)
        printed = capfd.readouterr()
        assert got == outcome(f, x.copy(), mode, action)
        assert printed == capfd.readouterr()


def test_an_errstate_inside_f_replays_as_traced():
    def f(x):
        with np.errstate(invalid="ignore"):
            a = np.log(x[:1])
        return np.nansum(a) + np.nansum(np.log(x[1:]))

    replaying = mutad.value_and_grad(f, replay=True)
    for values in ([-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [1.0, -1.0]):
        x = np.array(values)
        assert outcome(replaying, x) == outcome(f, x.copy())


@pytest.mark.xfail(strict=True, reason="a replay compares the messages and order of its "
                   "reverse pass's events, not the records that raised them: one of the same "
                   "message from another operation's gradient is issued at the recorded line")
def test_a_replay_warns_at_the_line_of_the_gradient_that_raised_the_event():
    def f(x):
        a = np.sqrt(x[:1])
        b = np.sqrt(x[1:])
        return np.sum(a) + np.sum(b)

    replaying, traced = mutad.value_and_grad(f, replay=True), mutad.value_and_grad(f)
    for values in ([0.0, 1.0], [0.0, 1.0], [1.0, 0.0]):
        x = np.array(values)
        assert outcome(replaying, x) == outcome(traced, x.copy())


# Python's warnings other than floating-point events (NumPy 2's DeprecationWarning of an
# n-dimensional transform given s without axes): the replay catches every one its steps
# issue, whatever the filters, as the recording does, and issues them at the recorded line
# under the caller's filters and registry, which show, ignore or raise them as NumPy's call


def transformed(x):
    y = np.fft.irfftn(x.reshape(4, 4) + 0j, s=(4, 4))
    return np.sum(y * y)


def seen(function, calls, action=None):
    """The warnings ``function`` shows over ``calls`` under the filter ``action`` (None: the
    filters as they are), and per call its value or the warning it raised."""
    outcomes = []
    with warnings.catch_warnings(record=True) as issued:
        if action is not None:
            warnings.simplefilter(action)
        for x in calls:
            try:
                result = function(x)
                outcomes.append(np.asarray(result[0] if type(result) is tuple
                                           else result).tobytes())
            except DeprecationWarning as error:
                outcomes.append((type(error), str(error)))
    return [(w.category, str(w.message), w.filename, w.lineno) for w in issued], outcomes


CALLS = [np.linspace(-1.0, 1.0, 16) ** 3, np.arange(16.0), np.linspace(-1.0, 1.0, 16) ** 5,
         np.ones(16), np.arange(16.0)]  # (arrays that own their memory: one signature)


@pytest.mark.parametrize("action", [None, "ignore", "default", "module", "once", "always",
                                    "error"])
def test_a_replay_shows_the_warnings_numpy_shows_under_the_callers_filters(action):
    replaying = mutad.value_and_grad(transformed, replay=True)
    inputs = [x.copy() for x in CALLS]
    assert seen(replaying, inputs, action) == seen(transformed, CALLS, action)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(inputs, CALLS))
    if action != "error":  # (which raises in the recorded operation: traced every call)
        assert replays(replaying) == len(CALLS) - 1 and not replaying.reasons
        for x in CALLS:  # the gradients, replayed, are the traced ones bit for bit
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got, expected = replaying(x)[1], mutad.value_and_grad(transformed)(x)[1]
            assert got.tobytes() == expected.tobytes()


def test_a_warning_shown_once_before_the_recording_is_not_shown_again_and_replays():
    replaying = mutad.value_and_grad(transformed, replay=True)
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("default")
        transformed(CALLS[0])  # NumPy shows it once, at the line of transformed
        for x in CALLS:
            replaying(x)
        transformed(CALLS[1])
    assert [(w.category, w.filename, w.lineno) for w in issued] == [
        (DeprecationWarning, __file__, transformed.__code__.co_firstlineno + 1)]
    assert replays(replaying) == len(CALLS) - 1 and not replaying.reasons


def test_a_warning_f_silences_itself_replays_and_stays_silent():
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return transformed(x)

    replaying = mutad.value_and_grad(f, replay=True)
    assert seen(replaying, CALLS, "always") == seen(f, CALLS, "always")
    assert replays(replaying) == len(CALLS) - 1 and not replaying.reasons


def test_a_filter_added_to_the_same_list_between_recordings_is_obeyed():
    """The recorder's capture of an operation's warnings reads the filters in force each time,
    not those of the last capture (``debug._capturing`` remembers its last answer): a filter
    added into the same list between two recordings raises where NumPy's call would."""
    def f(x):
        return np.sum(np.log(x))

    x = np.array([-1.0, 2.0])
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        mutad.grad(f, replay=True)(x)
        assert [str(w.message) for w in issued] == ["invalid value encountered in log"]
        filters = warnings.filters
        warnings.simplefilter("error", RuntimeWarning)  # (into the same list)
        assert warnings.filters is filters
        with pytest.raises(RuntimeWarning, match="invalid value encountered in log"):
            mutad.grad(f, replay=True)(x)
        with pytest.raises(RuntimeWarning, match="invalid value encountered in log"):
            f(x)


def test_a_warning_of_fs_own_code_raises_under_the_callers_error_filter():
    """A replay does not run f's own ``warnings.warn``: under a filter that makes its category
    an error (set by the caller between calls), the call picks a program of its own, which
    raises where NumPy's run raises, not the program recorded where the warning was shown."""
    def f(x):
        if x[0] > 1.0:
            warnings.warn("a large first element", UserWarning)
        return (x * x).sum()

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([2.0, 1.0])
    for action in ("ignore", "ignore", "error", "ignore", "error"):
        with warnings.catch_warnings():
            warnings.simplefilter(action, UserWarning)
            if action == "error":
                with pytest.raises(UserWarning, match="a large first element"):
                    replaying(x.copy())
            else:
                assert replaying(x.copy())[0] == 5.0
    assert replays(replaying) == 2  # (the second call, and the fourth)


def made_matrix(a):
    return np.matrix(np.diag(a)).sum()


def made_bmat(a):
    m = np.asmatrix(np.diag(a))
    return np.bmat([[m, 2.0 * m]]).sum()


@pytest.mark.parametrize("f", [made_matrix, made_bmat])
def test_a_replay_warns_as_numpys_constructors_it_does_not_call_again(f):
    """np.matrix of traced values is made of NumPy's matrix of the plain values, whose
    PendingDeprecationWarning a replay (which does not make it) issues again, each call."""
    def shown(function, x):
        with warnings.catch_warnings(record=True) as issued:
            warnings.simplefilter("always")
            function(x)
        return [(w.category, str(w.message), w.filename, w.lineno) for w in issued]

    replaying = mutad.value_and_grad(f, replay=True)
    for k in range(3):
        x = np.array([1.0, 2.0 + k])
        expected = shown(f, x.copy())
        assert expected and shown(replaying, x) == expected
    assert replays(replaying) == 2


def test_a_replay_reads_the_users_filters_one_by_one_only_where_they_changed(monkeypatch):
    """A replay catches its steps' warnings under filters of its own (``debug.Capture``) and
    gives the user's back as it stops: where none was added meanwhile, it tells so without a
    loop over the filters (a call costs the same under a hundred filters as under none); a
    filter added into the list it put on, in the same thread, stays, and the next capture
    puts on the filters as they were before it, not that changed list."""
    from mutad.core import debug
    users = []
    monkeypatch.setattr(debug, "_users", lambda filters: users.append(1) or [
        entry for entry in filters if type(entry[1]) is not debug._WhileCapturing])
    replaying = mutad.value_and_grad(two_logs, replay=True)
    x = np.array([0.5, 1.5])
    with warnings.catch_warnings():
        for k in range(100):
            warnings.filterwarnings("ignore", f"not this {k}", UserWarning)
        filters = list(warnings.filters)
        for _ in range(3):
            replaying(x)
        value, grad = mutad.value_and_grad(two_logs)(x)
        users.clear()
        replayed, replayed_grad = replaying(x)
        assert not users and replayed == value and np.array_equal(replayed_grad, grad)
        assert warnings.filters == filters
        capture = debug.Capture()
        try:
            warnings.filterwarnings("error", "added")  # (into the list the capture put on)
        finally:
            capture.stop()
        assert warnings.filters[0][0] == "error" and warnings.filters[1:] == filters and users
        del warnings.filters[0]
        capture = debug.Capture()
        try:
            assert not any(entry[0] == "error" and entry[1] is not None
                           and entry[1].pattern == "added" for entry in warnings.filters)
            warnings.warn("added", UserWarning)
        finally:
            assert [str(w.message) for w in capture.stop()] == ["added"]
    assert replays(replaying) == 3
