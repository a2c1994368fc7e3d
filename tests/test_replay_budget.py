"""Replay under a memory budget (``grad(f, replay=True, memory=...)``): the writes tracing
rebuilds from a few snapshots (``recompute.Chain``) are rebuilt by the replay too, by the same
schedule, so that its values, gradients and the caller's arrays are the traced call's bit for
bit under the same budget, and its memory stays as flat in the number of steps as tracing's."""

import numpy as np
import pytest

import mutad
from mutad.bench.workloads import heat_fit
from mutad.engines.blocks import Block
from mutad.engines.replay import ElementwiseWrite, Program
from test_budget_hunt import (N, branching, damped_then_assigned, growth_per_step,
                              heat_with_boundaries, rounded, stopping_early, work_array)
from test_recompute import leapfrog, peak_bytes as peak, sweeps


def replays(replaying):
    """The calls replayed so far, over every program of ``replaying`` (each signature's
    most recently used and the others it keeps)."""
    kept = [*replaying.programs.values(), *(p for ps in replaying.others.values() for p in ps)]
    return sum(p.replays for p in kept if type(p) is Program)


def chained_writes(replaying):
    """The write steps of ``replaying``'s programs that its chains rebuild."""
    return [step for p in replaying.programs.values() if type(p) is Program
            for member in p.steps for step in (member.steps if type(member) is Block
                                              else (member,))
            if type(getattr(step, "step", step)) is ElementwiseWrite
            and getattr(step, "step", step).chained is not None]


def replayed_as_traced(f, calls, budget, argnums=0, policy="restore"):
    """``f`` differentiated with ``replay=True`` and ``memory=budget`` on each argument tuple
    of ``calls`` gives the value and gradient of the traced call under the same budget, bit
    for bit, and leaves the caller's arrays as they were; returns the replaying function."""
    replaying = mutad.value_and_grad(f, argnums=argnums, policy=policy, memory=budget,
                                     replay=True)
    for args in calls:
        before = [np.asarray(a).tobytes() for a in args]
        value, grads = replaying(*args)
        assert [np.asarray(a).tobytes() for a in args] == before
        expected_value, expected = mutad.value_and_gradient(
            f, *[a.copy() if type(a) is np.ndarray else a for a in args], argnums=argnums,
            policy=policy, memory=budget)
        assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
        if type(grads) is not tuple:
            grads, expected = (grads,), (expected,)
        assert [np.asarray(g).tobytes() for g in grads] == [np.asarray(g).tobytes()
                                                            for g in expected], budget
    return replaying


def states(n, calls=4, seed=0):
    rng = np.random.default_rng(seed)
    return [np.sin(np.linspace(0, 3, n)) + 0.1 * rng.standard_normal(n) for _ in range(calls)]


@pytest.mark.parametrize("budget", [0, 3, 12])
def test_rebuilt_assignments_are_replayed_as_traced(budget):
    """Red-black sweeps (assignments no inverse undoes): every write rebuilt, the calls after
    the first replayed, compiled from the second."""
    weights = 1 + np.cos(np.linspace(0, 5, N)) ** 2
    replaying = replayed_as_traced(lambda u: sweeps(u, weights, 25), [(u,) for u in states(N)],
                                   budget * N * 8)
    assert not replaying.reasons and replays(replaying) == 3
    assert len(chained_writes(replaying)) == 50


@pytest.mark.parametrize("budget", [0, 6])
def test_a_heat_fit_with_its_ends_assigned_is_replayed_as_traced(budget):
    """The newcomer's heat fit: the slice update saved for want of a stable inverse, the ends
    assigned, all three rebuilt in one chain; a target outside ``argnums``."""
    target = np.cos(np.linspace(0, 2, N))
    replaying = replayed_as_traced(heat_fit, [(u, target, 30) for u in states(N)],
                                   budget * N * 8, argnums=0)
    assert not replaying.reasons and replays(replaying) == 3
    assert len(chained_writes(replaying)) == 90


@pytest.mark.parametrize("f", [heat_with_boundaries, branching, rounded, stopping_early],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("budget", [0, 3])
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_loops_of_rebuilt_and_other_writes_are_replayed_as_traced(f, budget, policy):
    """Writes that read elements of the array they rebuild (``u[0] = u[1]``: a small value,
    copied as the write reads it), inverted writes into other arrays, branches that change
    the program (another signature's program, or traced again), loops that stop early."""
    rng = np.random.default_rng(1)
    calls = [(rng.uniform(-0.5, 0.6, 700),) for _ in range(3)]
    calls.append(calls[0])
    replayed_as_traced(lambda u: f(u, 30), calls, budget * 700 * 8, policy=policy)


def test_inverted_writes_and_recomputed_temporaries_are_replayed_as_traced_under_a_budget():
    """Leapfrog: every write undone by its inverse, its large temporaries recomputed in the
    reverse pass, a budget with nothing to rebuild."""
    q, p = states(N, 2), states(N, 2, seed=1)
    replaying = replayed_as_traced(lambda q, p: leapfrog(q, p, 5), list(zip(q, p)) * 2,
                                   4 * N * 8, argnums=(0, 1))
    assert not replaying.reasons and replays(replaying) == 3 and not chained_writes(replaying)


def test_a_write_decided_otherwise_than_recorded_is_traced():
    """``u *= c`` is undone by its inverse while ``c`` is not 0, saved (and so rebuilt, under a
    budget) where it is: a replay recorded with one and called with the other would take
    other writes into its chain than tracing, and traces that call instead."""
    def f(u, c):
        for _ in range(5):
            u *= c
            u[1:] = np.sin(u[:-1]) + u[1:]
        return np.sum(u * u)

    u = np.linspace(0.1, 1.0, 600)
    calls = [(u, np.full(600, 1.5)), (u, np.zeros(600)), (u, np.full(600, 1.5)),
             (u, np.zeros(600))]
    replaying = replayed_as_traced(f, calls, 0, argnums=(0, 1))
    assert replays(replaying) >= 1  # (the calls like the recorded one)


@pytest.mark.parametrize("budget", [0, 4])
def test_an_inverted_write_that_joins_the_rebuilt_writes_is_replayed_as_traced(budget):
    """``u *= 0.9`` (a large write, undone by its inverse) between the assignments a budget
    rebuilds: the chain redoes it too when it rebuilds the writes before it."""
    calls = [(u,) for u in states(N, 3)]
    replaying = replayed_as_traced(lambda u: damped_then_assigned(u, 20), calls, budget * N * 8)
    assert not replaying.reasons and replays(replaying) == 2
    assert len(chained_writes(replaying)) == 39  # (the first write, before the chain begins)


def test_rebuilt_writes_that_read_an_array_an_inverse_overwrites_are_traced_and_say_why():
    """Writes into a work array that read ``v``, which a write undone by its inverse overwrites
    at every step (the chain keeps a copy of ``v`` for them: a pin): not replayed, and
    ``reasons`` says why; the calls are still the traced ones."""
    rng = np.random.default_rng(2)
    calls = [tuple(rng.uniform(0.1, 0.6, N) for _ in range(2)) for _ in range(2)]
    replaying = replayed_as_traced(lambda u, v: work_array(u, v, 20), calls, 0, argnums=(0, 1))
    assert [reason for reason in replaying.reasons.values()] == [
        "a memory budget rebuilt writes that read an array a write undone by its inverse then "
        "overwrote"]


def test_a_replayed_budget_keeps_the_memory_flat_in_the_number_of_steps():
    """The heat fit at 10^5 points: each step saves 780 KiB without a budget; with one, the
    replay keeps a few snapshots, as tracing does, whatever the number of steps."""
    n = 100_000
    u0 = np.sin(np.linspace(0, 3, n))
    target = np.cos(np.linspace(0, 2, n))
    budget = 6 * u0.nbytes

    def replayed(steps):
        replaying = mutad.grad(heat_fit, argnums=0, memory=budget, replay=True)
        replaying(u0, target, steps), replaying(u0, target, steps)  # records, then replays
        return replaying

    # (from 20 steps on, the chain keeps all the snapshots its budget allows)
    programs = {steps: replayed(steps) for steps in (20, 100)}
    per_step = growth_per_step(lambda steps: programs[steps](u0, target, steps), 20, 100)
    assert per_step < u0.nbytes / 16, per_step / u0.nbytes
    assert all(replays(r) == 2 and not r.reasons for r in programs.values())
    # and as much as tracing under the same budget, within an array
    peaks = [peak(lambda: programs[100](u0, target, 100)),
             peak(lambda: mutad.grad(heat_fit, argnums=0, memory=budget)(u0, target, 100))]
    assert peaks[0] < peaks[1] + u0.nbytes, [p / u0.nbytes for p in peaks]


def _bratu_with_settings(u, c, weights, steps):
    """Red-black sweeps reading a Python float ``c`` (a number the recomputed values read as
    Python's, ``Buffer.weak``), a ufunc's keyword and a function's setting (``np.diff``'s
    ``axis``), each recomputed in the reverse pass and by the redone writes."""
    for _ in range(steps):
        u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] + c * np.exp(u[1:-1:2], dtype=np.float64))
        d = np.diff(u, axis=0)
        u[2:-1:2] = 0.5 * (u[1:-2:2] + u[3::2] + c * np.exp(u[2:-1:2])) + 0.1 * np.sin(d[1::2])
    return np.sum(weights * u * u)


@pytest.mark.parametrize("budget", [0, 4])
def test_recomputed_numbers_and_settings_are_replayed_as_traced(budget):
    """The lines the replay reads recomputed values by (``replay._Reading``) read a float
    argument as Python's number, and pass a ufunc's keywords and a function's settings."""
    n = 1200
    weights = 1 + np.cos(np.linspace(0, 5, n)) ** 2
    calls = [(u, c, weights, 6) for u, c in zip(states(n), (-1e-3, 2e-3, -3e-3, 1e-3))]
    replaying = replayed_as_traced(_bratu_with_settings, calls, budget * n * 8, argnums=(0, 1))
    assert not replaying.reasons and replays(replaying) == 3
