"""The replay's per-call questions answered from what the last call answered: NumPy's error
handling read again only when its object changes, the objects ``f`` reaches compared only
when the walk found others, the output's shadow made directly where ``Shadows.add`` would
make a fresh array of ones. Each is tested differentially: replayed calls whose answers flip
from call to call, against fresh traced calls, bit for bit, with the caller's arrays intact."""

import warnings

import numpy as np
import pytest

import mutad


def _logs(x):
    return np.sum(np.log(x) * x)


def _traced_and_replayed(f, replayed, args, settings, count=lambda: None):
    """Run the traced and the replayed gradient under ``settings()`` (a context manager
    factory); returns both outcomes as (value, gradient, warnings' messages, what ``count()``
    moved by) or the error's type."""
    outcomes = []
    for g in (mutad.value_and_grad(f), replayed):
        copies = [a.copy() for a in args]
        before = count()
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            with settings():
                try:
                    value, grad = g(*copies)
                except FloatingPointError as error:
                    outcomes.append(type(error))
                    continue
        for a, c in zip(args, copies):
            assert a.tobytes() == c.tobytes()  # the caller's arrays, bit for bit
        after = count()
        outcomes.append((np.float64(value).tobytes(), np.asarray(grad).tobytes(),
                         [str(w.message) for w in heard],
                         None if after is None else [b - a for a, b in zip(before, after)]))
    return outcomes


def test_the_error_handling_in_force_picks_the_program_on_every_call():
    called = {"a": [], "b": []}
    handlers = {name: (lambda kind, flag, name=name: called[name].append(kind))
                for name in called}

    def under(**modes):
        call = modes.pop("call", None)

        def settings():
            if call is None:
                return np.errstate(**modes)
            previous = np.seterrcall(handlers[call])
            state = np.errstate(**modes)

            class Both:
                def __enter__(self):
                    state.__enter__()

                def __exit__(self, *exc):
                    state.__exit__(*exc)
                    np.seterrcall(previous)
            return Both()
        return settings

    handlings = [under(), under(divide="ignore"), under(divide="raise"),
                 under(divide="call", call="a"), under(divide="call", call="b"),
                 under(all="ignore"), under()]
    replayed = mutad.value_and_grad(_logs, replay=True)
    x = np.array([0.0, 0.5, 2.0])  # log(0): a division by zero
    for _ in range(4):  # every handling replayed, and each differs from the one before
        for settings in handlings:
            # (and each callback called by the replay as by the traced call)
            traced, replay = _traced_and_replayed(
                _logs, replayed, (x,), settings,
                count=lambda: [len(kinds) for kinds in called.values()])
            assert traced == replay
    assert any(type(p) is not str for p in replayed.programs.values())


def _sum_of_squares(x):
    return np.sum(x * x)


def _an_element(x):
    y = np.sin(x) * 3.0
    return y[1]


def _python_float(x):
    return float(np.sum(np.cos(x)))


@pytest.mark.parametrize("f", (_sum_of_squares, _an_element, _python_float))
def test_the_outputs_shadow_of_each_kind(f):
    """Programs whose output is a whole float64 buffer (its shadow made directly), a float32
    one, an element of a larger array, a Python float: called in turns, each replayed, each
    the traced call's gradient."""
    replayed = mutad.value_and_grad(f, replay=True)
    inputs = [np.linspace(0.1, 1.0, 4), np.linspace(0.1, 1.0, 4).astype(np.float32),
              np.linspace(-1.0, 1.0, 3).reshape(3, 1)[:, 0]]
    for k in range(4):
        for x in inputs:
            x = x + np.asarray(k / 8, x.dtype)
            before = x.copy()
            value, grad = replayed(x)
            assert np.array_equal(x, before) and x.tobytes() == before.tobytes()
            want_value, want_grad = mutad.value_and_grad(f)(x)
            assert type(value) is type(want_value)
            assert np.asarray(value).tobytes() == np.asarray(want_value).tobytes()
            assert grad.dtype == want_grad.dtype and grad.tobytes() == want_grad.tobytes()
    assert sum(type(p) is not str for p in replayed.programs.values()) >= 2


WEIGHTS = np.array([1.0, 2.0, 3.0])


def _weighted(x):
    return np.sum(WEIGHTS * x * x)


def test_objects_it_reaches_rebound_or_changed_between_calls():
    """The global array ``f`` reads rebound, changed in place, and put back, in turns: each
    call the traced call's gradient."""
    global WEIGHTS
    replayed = mutad.grad(_weighted, replay=True)
    first, second = WEIGHTS, np.array([-1.0, 0.5, 4.0])
    x = np.array([0.3, -0.7, 1.1])
    try:
        for k in range(12):
            if k % 4 == 1:
                WEIGHTS = second
            elif k % 4 == 2:
                WEIGHTS[0] += 1.0  # in place: the bytes compared
            elif k % 4 == 3:
                WEIGHTS = first
            for _ in range(3):  # and replayed while it stays
                assert replayed(x).tobytes() == mutad.grad(_weighted)(x).tobytes()
    finally:
        WEIGHTS = first


def _doubled(x):
    return 2.0 * x


def _cubed(x):
    return x * x * x


STEP = _doubled
SCALE = 0.5


def _through_a_global_function(x):
    return np.sum(STEP(x) * SCALE)


def test_functions_and_numbers_it_reaches_rebound_between_calls():
    """The global function and number ``f`` calls and reads rebound in turns (objects, not
    arrays: told apart by identity alone), each call the traced call's gradient."""
    global STEP, SCALE
    replayed = mutad.grad(_through_a_global_function, replay=True)
    x = np.array([0.3, -0.7, 1.1])
    try:
        for k in range(12):
            STEP = _cubed if k % 3 == 1 else _doubled
            SCALE = 0.25 if k % 4 == 2 else 0.5
            for _ in range(3):
                got = replayed(x)
                assert got.tobytes() == mutad.grad(_through_a_global_function)(x).tobytes()
    finally:
        STEP, SCALE = _doubled, 0.5



FACTOR = 0.5


def _through_a_global_and_a_builtin(x):
    return np.sum(x * FACTOR) * abs(-2.0)


def _tripled(v):
    return 3.0 * v


def test_names_rebound_after_replays_stop_them():
    """A module's name, and a builtin shadowed by a module's name, each rebound after calls
    that replayed (whose namespaces held unchanged, told by their dicts' versions): each call
    the traced call's gradient, and the calls while they stay replayed."""
    global FACTOR
    this = globals()
    replayed = mutad.grad(_through_a_global_and_a_builtin, replay=True)
    x = np.array([0.3, -0.7, 1.1])
    try:
        for k in range(8):
            if k % 4 == 1:
                FACTOR = 3.0
            elif k % 4 == 2:
                this["abs"] = _tripled  # (in this module's namespace, before builtins')
            elif k % 4 == 3:
                FACTOR = 0.5
                del this["abs"]
            for _ in range(3):  # the first records, the later two replay
                got = replayed(x)
                assert got.tobytes() == mutad.grad(_through_a_global_and_a_builtin)(
                    x).tobytes()
            assert [p.replays >= 2 for p in replayed.programs.values()] == [True]
        assert not replayed.reasons
    finally:
        FACTOR = 0.5
        this.pop("abs", None)
