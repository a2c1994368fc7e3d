"""The replay's differential test: random programs whose control flow and writes depend on the
data (``replay_programs``), each replayed on inputs that flip its decisions and compared with a
fresh traced call, bit for bit, with the caller's arrays intact. ``python -m tests.soak
--replay`` runs many more."""

import warnings

import numpy as np
import pytest

import mutad
import replay_programs

PROGRAMS = 80


@pytest.mark.parametrize("policy", ("restore", "checkpoint"))
@pytest.mark.parametrize("seed", range(0, PROGRAMS, 2))
def test_replayed_calls_are_traced_calls(seed, policy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # divisions by zero, on purpose
        replay_programs.check(seed + (policy == "checkpoint"), policy=policy)


def test_the_programs_replay():
    """Not all traced: most signatures of these programs are replayed (the test would pass
    trivially if every call were traced)."""
    replayed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for seed in range(40):
            replaying = replay_programs.check(seed)
            replayed += any(type(p) is not str for p in replaying.programs.values())
    assert replayed >= 20


def test_replayed_calls_on_arguments_laid_out_otherwise():
    """Arguments reversed, strided, columns of 2-D arrays and views past a larger array's start
    (``replay_programs.laid_out``), drawn per call: each layout is a signature of its own, and
    every call matches a traced one on the same layouts, bit for bit, with the caller's arrays
    intact. Some of those signatures are replayed (else the test would prove nothing)."""
    replayed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for seed in range(7, 13):  # (six programs of which several replay)
            replaying = replay_programs.check(seed, calls=10, layouts=True)
            replayed += sum(p.replays for p in replaying.programs.values() if type(p) is not str)
    assert replayed >= 6


def _expand_and_add_an_element(a):
    v = np.expand_dims(a, 0)
    v[[0, 0]] += np.sin(v[0, -1, 0])  # a 0-d operand broadcast into a repeated-index write
    return (v * np.linspace(1.0, 2.0, v.size).reshape(v.shape)).sum()


@pytest.mark.parametrize("order", ("C", "F"))
def test_a_compiled_write_of_a_broadcast_element(order):
    """A random program's shrunk failure: a compiled block laid the summed cotangent of a 0-d
    operand out in C order with ``ascontiguousarray``, which makes it 1-d, and the second
    replay raised ValueError in the element read's pullback. Every call matches a traced one,
    bit for bit, with the caller's array intact."""
    replayed = mutad.value_and_grad(_expand_and_add_an_element, replay=True)
    for k in range(4):
        x = np.asarray(np.arange(6.0).reshape(3, 2) / 7 + k / 10, order=order)
        before = x.copy()
        value, grad = replayed(x)
        assert np.array_equal(x, before)
        want_value, want_grad = mutad.value_and_grad(_expand_and_add_an_element)(x)
        assert value == want_value and np.array_equal(grad, want_grad)
