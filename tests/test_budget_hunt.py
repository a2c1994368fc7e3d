"""Memory budgets (``memory=``) on time-stepping loops: the gradient is that without a budget,
bit for bit, the caller's arrays come back, and the memory the budget bounds stays bounded."""

import tracemalloc

import numpy as np
import pytest

import mutad


def growth_per_step(gradient, few, many):
    """The growth of the peak memory of ``gradient(steps)`` per step, from ``few`` to ``many``
    steps (NumPy reports its arrays to tracemalloc)."""
    peaks = []
    for steps in (few, many):
        tracemalloc.start()
        try:
            gradient(steps)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    return (peaks[1] - peaks[0]) / (many - few)


def budget_growth(f, *args, budget):
    """The growth per step of the peak memory of the gradient of ``f(*args, steps)`` under
    the memory budget ``budget``."""
    return growth_per_step(lambda steps: mutad.gradient(
        lambda *a: f(*a, steps), *args, memory=budget), 10, 40)


N = 10_000
"""Arrays whose snapshots and saved regions are all the memory that grows."""


def damped_then_assigned(u, steps):
    """An inverted write (``u *= 0.9``) between the assignments a budget rebuilds."""
    for _ in range(steps):
        u *= 0.9
        u[:] = u + 0.1 * np.sin(u)
    return np.sum(u ** 3)


def branching(u, steps):
    for _ in range(steps):
        if u.sum() > 0:
            u *= 0.9
            u[:] = u + 0.1 * np.sin(u)
        else:
            u += 0.2
            u[u.size // 2:] = u[u.size // 2:] ** 2
    return np.sum(u ** 3)


def rounded(u, steps):
    for _ in range(steps):
        u *= 1.1
        u[:] = np.floor(u * 8) / 8 + 0.01 * np.sin(u)
        u += 0.001
    return np.sum(u ** 2)


def stopping_early(u, steps):
    for _ in range(steps):
        u[:] = np.sqrt(u * u + 0.01)
        u[1:] -= 0.05 * u[:-1]
        if np.max(np.abs(u)) > 5:
            break
        u *= 1.02
    return np.sum(u)


def heat_with_boundaries(u, steps, r=0.3):
    """Boundary writes that read elements of the array (``u[0] = u[1]``: small temporaries)
    between the dissipative steps a budget rebuilds."""
    for _ in range(steps):
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[0] = u[1]
        u[-1] = 0.5 * u[-2]
    return np.sum(u ** 2)


@pytest.mark.slow
def test_a_write_that_reads_an_element_does_not_end_the_rebuilt_writes_of_its_array():
    """Regression: a rebuilt write could not read a small temporary (an element, ``u[1]``),
    which no reference follows: ``u[0] = u[1]`` was saved instead, which ended the chain of
    rebuilt writes into ``u`` for good, and under ``memory=`` an explicit heat step with
    boundary writes grew by an array per step. Such a value is kept by the chain instead."""
    u = np.sin(np.linspace(0, 3, N))
    per_step = budget_growth(heat_with_boundaries, u, budget=4 * u.nbytes)
    assert per_step < u.nbytes / 8, per_step / u.nbytes


def work_array(u, v, steps):
    """Writes into a work array that read arrays changed at every step (barriers of its chain
    at every step), and pins of ``v`` for them."""
    t = np.empty_like(u)
    for _ in range(steps):
        np.multiply(u, v, out=t)
        np.add(u, 0.01 * t, out=u)
        np.subtract(v, 0.01 * np.cos(u), out=v)
        np.sin(t, out=t)
        v += t * 0.001
    return np.sum(u * v)


@pytest.mark.slow
def test_a_budget_costs_no_more_memory_than_saving_where_every_step_needs_a_barrier():
    """Regression: a chain whose writes read arrays written at every step kept a snapshot of
    its whole array per step (a barrier), and copies of what the replay would give back only
    within rounding (pins): with ``memory=`` the loop above grew by three arrays per step, by
    two without a budget. A chain that has used its budget on barriers now ends, and its
    later writes are saved."""
    u, v = np.linspace(0.1, 0.5, N), np.linspace(0.2, 0.3, N)
    assert budget_growth(work_array, u, v, budget=4 * u.nbytes) \
        < budget_growth(work_array, u, v, budget=None) + u.nbytes / 8


def test_an_inverted_write_does_not_end_the_rebuilt_writes_of_its_array():
    """Regression: a write undone by its inverse between two writes a budget rebuilds ended
    the chain of rebuilt writes for good, and every later write was saved again: under
    ``memory=`` the memory grew by a whole array per step, as without a budget."""
    u = np.sin(np.linspace(0, 3, N))
    per_step = budget_growth(damped_then_assigned, u, budget=4 * u.nbytes)
    assert per_step < u.nbytes / 8, per_step / u.nbytes


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("f", [damped_then_assigned, branching, rounded, stopping_early,
                               heat_with_boundaries, work_array],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [40, 700])
def test_a_budget_changes_no_bit_of_a_loop_with_inverted_writes_between(f, policy, n):
    rng = np.random.default_rng(n)
    count = f.__code__.co_argcount - 1 - len(f.__defaults__ or ())  # less steps=
    args = [rng.uniform(-0.5, 0.6, n) for _ in range(count)]
    before = [a.tobytes() for a in args]
    steps = 30
    expected_value = f(*[a.copy() for a in args], steps)
    value, grad = mutad.value_and_gradient(lambda *a: f(*a, steps), *args, policy=policy)
    assert value == expected_value
    for budget in (0, args[0].nbytes - 1, 2 * args[0].nbytes, 3 * args[0].nbytes + 1, 10**9):
        v, g = mutad.value_and_gradient(lambda *a: f(*a, steps), *args, policy=policy,
                                        memory=budget)
        assert [a.tobytes() for a in args] == before
        assert v == expected_value
        assert [x.tobytes() for x in g] == [x.tobytes() for x in grad], budget
