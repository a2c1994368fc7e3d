"""Replay under a memory budget against tracing under the same budget, on the kinds of writes
the budget's chains meet: scatters, masked and ``where=`` writes (of a value-dependent number
of elements, on both sides of the few bytes a budget saves rather than rebuilds), ``out=``
ufuncs into work arrays passed in, views made before the loop, in-place LAPACK, elementwise
loops through NaN (with a payload), -0.0 and infinities, snapshots kept in a list, a zero
factor that changes one write's undo on some calls, and an exception that ``f`` raises on
some calls: values, gradients and the caller's arrays bit for bit, call after call."""

import warnings

import numpy as np
import pytest
import scipy.linalg

import mutad
from test_replay_budget import replayed_as_traced, replays

N = 64
BUDGETS = [0, 3 * N * 8, 10**12]  # (the fewest snapshots a chain keeps, a few, all it wants)


def states(calls, seed, n=N):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, n) for _ in range(calls)]


IDX = np.random.default_rng(0).integers(0, N, 12)


def scatters(u, steps=6):
    for _ in range(steps):
        u[1:-1] = 0.5 * u[1:-1] + 0.25 * (u[2:] + u[:-2])
        np.add.at(u, IDX, 0.1 * np.sin(u[IDX]))
        u[IDX] = u[IDX] * 0.5 + 0.01
        u[IDX[:3]] += 1.0
    return np.sum(u ** 2)


def masked(u, steps=6):
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[u > 0.5] = 0.5
        np.putmask(u, u < -0.7, u * 0.3)
        np.copyto(u, np.sin(u) * 2, where=u > 0.45)
        u += 0.01
    return np.sum(u ** 2)


def into_work(u, w, steps=6):
    t = u[::-1]  # views made before the loop
    half = u[:N // 2]
    for _ in range(steps):
        np.multiply(u, 0.9, out=w)
        np.sin(w, out=w)
        np.add(u, w, out=u)
        np.add(t[:-1], 0.5 * t[1:], out=t[1:])
        half[:] = np.cos(u[N // 2:]) - 0.5 * half
        np.clip(u, -0.8, 0.8, out=u)
    return np.sum(u ** 2) + np.sum(w)


def kept(u, steps=6):
    keep = []
    for _ in range(steps):
        u[:] = np.sin(u) + 0.5 * u
        u[0] = u[-1]
        keep.append(u.copy())
        keep.append(u[::2])  # a view: sees the later writes
    return sum(np.sum(k * k) for k in keep)


def elementwise(u, steps=3):
    for _ in range(steps):
        for i in range(1, u.size):
            u[i] = np.sin(u[i]) * 0.9 + u[i - 1] * 0.5
        u[0] = -u[-1]
        u[1:-1] += 0.1 * (u[2:] - u[:-2])
    return np.nansum(u * u) + np.sum(np.isnan(u)) + np.sum(np.signbit(u))


A = np.random.default_rng(1).standard_normal((12, 12)) + 12 * np.eye(12)


def factored(u, m, steps=4):
    for _ in range(steps):
        m[:] = A + np.diag(u)
        lu, piv = scipy.linalg.lu_factor(m, overwrite_a=True, check_finite=False)
        u[:] = np.tanh(scipy.linalg.lu_solve((lu, piv), u)) + 0.1 * u
        u[0] = u[-1]
    return np.sum(u ** 2)


def special(u):
    """``u`` with a NaN of the other sign and a payload, -0.0, 0.0 and an infinity."""
    u = u.copy()
    u[5] = np.copysign(np.nan, -1.0)
    u[6] = np.frombuffer(np.array([0x7FF8000000000123], dtype=np.uint64).tobytes())[0]
    u[3], u[4], u[7] = -0.0, 0.0, np.inf
    return u


def calls_of(f, seed):
    if f is masked:  # as many elements above 0.5 as: more than, then at most, a few bytes
        rng = np.random.default_rng(seed)
        calls = []
        for count in (20, 12, 3, 8, 0, 9):
            u = rng.uniform(-0.6, 0.4, N)
            u[rng.choice(N, count, replace=False)] = rng.uniform(0.6, 0.9, count)
            calls.append((u,))
        return calls
    if f is into_work:
        return [(u, np.zeros(N)) for u in states(5, seed)]
    if f is factored:
        return [(u, np.empty((12, 12))) for u in states(5, seed, 12)]
    if f is elementwise:
        us = states(5, seed, 24)
        return [(special(u),) for u in us]
    return [(u,) for u in states(5, seed)]


@pytest.mark.parametrize("f", [scatters, masked, into_work, kept, elementwise, factored],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("budget", BUDGETS)
def test_writes_of_every_kind_are_replayed_as_traced_under_a_budget(f, budget):
    replaying = replayed_as_traced(f, calls_of(f, 2), budget)
    assert not replaying.reasons and replays(replaying) >= 3


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_zero_factor_late_in_some_calls_is_replayed_or_traced_as_tracing(policy):
    """``u *= c[k]``, undone by its inverse, saved where ``c[k]`` is 0: at step 7 of some calls
    only, after the chain of ``u`` has taken the writes before it."""
    rng = np.random.default_rng(3)
    steps = 10

    def f(u, c):
        for k in range(steps):
            u[1:-1] = 0.5 * u[1:-1] + 0.25 * (u[2:] + u[:-2])
            u *= c[k]
            u[0] = u[1]
            u += 0.01
        return np.sum(u ** 2)

    calls = []
    for i in range(7):
        c = np.full((steps, N), 1.1)
        if i in (2, 5):
            c[7] = 0.0
        if i == 6:
            c[3, 10] = 0.0
        calls.append((rng.uniform(-1, 1, N), c))
    for budget in (0, 3 * N * 8):
        replayed_as_traced(f, calls, budget, argnums=(0, 1), policy=policy)


def test_an_exception_f_raises_on_some_calls_leaves_the_replay_and_the_arrays_right():
    class Stop(Exception):
        pass

    def f(u):
        for k in range(10):
            u[1:-1] = 0.5 * u[1:-1] + 0.25 * (u[2:] + u[:-2])
            u[0] = u[1] * 1.01
            u *= 1.05
            if k == 6 and u[3] > 0.3:
                raise Stop
        return np.sum(u ** 2)

    rng = np.random.default_rng(4)
    replaying = mutad.value_and_grad(f, memory=0, replay=True)
    raised = 0
    for i in range(8):
        u = rng.uniform(-1, 1, N)
        if i % 3 == 1:
            u[2:5] = 0.9
        before = u.tobytes()
        try:
            value, grad = replaying(u)
        except Stop:
            raised += 1
            assert u.tobytes() == before
            with pytest.raises(Stop):
                mutad.value_and_grad(f, memory=0)(u.copy())
            continue
        assert u.tobytes() == before
        expected_value, expected = mutad.value_and_grad(f, memory=0)(u.copy())
        assert value == expected_value and grad.tobytes() == expected.tobytes()
    assert 0 < raised < 8 and replays(replaying) >= 2


def test_a_replay_warns_of_the_function_that_raised_the_event():
    """(More in test_replay_warnings.py.)"""
    def f(x):
        return (np.nansum(np.log(x[:1])) + np.nansum(np.sqrt(x[1:2]))
                + np.nansum(np.log(x[2:])))

    def messages(function, x):
        with warnings.catch_warnings(record=True) as issued:
            warnings.simplefilter("always")
            function(x)
        return [str(w.message) for w in issued]

    replaying = mutad.value_and_grad(f, replay=True)
    messages(replaying, np.array([-1.0, 1.0, -1.0]))  # records: log, log
    x = np.array([-1.0, -1.0, 1.0])  # log, then sqrt: as many events, of the same kind
    assert messages(replaying, x) == messages(f, x.copy())
