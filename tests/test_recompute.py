"""Recomputation: temporaries the reverse pass computes again from their recipes instead of
keeping them alive (mutad/engines/recompute.py)."""

import collections
import gc
import weakref
import tracemalloc

import numpy as np
import pytest

import mutad
from cases import replays_as_traced
from mutad.engines.session import ReverseDifferentiation
from mutad.bench.workloads import big_elementwise, heat_fit, leapfrog_initial_state
from mutad.bench.workloads import leapfrog as leapfrog_workload
from mutad.errors import PolicyError
from mutad.engines.recompute import SMALL, Chain, Lazy, Recomputation, advance

N = 2 * SMALL // 8  # arrays large enough to be recomputed rather than kept


def _records(f, *args):
    with ReverseDifferentiation("restore") as d:
        d.call(f, d.wrap(args))
        return list(d.tape.records)


def force(q):
    padded = np.concatenate((np.zeros(1), q, np.zeros(1)))
    d = padded[1:] - padded[:-1]
    cube = d * d * d
    return (d[1:] - d[:-1]) + 0.1 * (cube[1:] - cube[:-1])


def leapfrog(q, p, steps, keep=None):
    for _ in range(steps):
        for half in (0, 1):
            s = 0.005 * force(q)
            if keep is not None:
                keep.append(s)  # the program holds the temporaries: nothing is recomputed
            p += s
            if not half:
                q += 0.01 * p
    return np.sum(q * q) + np.sum(p * p)


def state(n=N):
    x = np.linspace(0, 1, n)
    return np.sin(7 * x), 0.3 * np.cos(3 * x)


def test_the_temporaries_of_a_step_are_recomputed_not_kept(inverting):
    q, p = state()
    records = _records(lambda q, p: leapfrog(q, p, 1), q, p)
    lazy = [r for r in records if any(type(k) is Lazy for k in (r.kept or ()))]
    # d * d, (d * d) * d and the three inverses of p += s, q += 0.01 p, p += s
    assert len(lazy) >= 7
    kept = [k for r in records for k in (r.kept or ()) if isinstance(k, np.ndarray)]
    # what is kept is small, or the arguments themselves (the loss q * q reads q)
    assert all(k.nbytes < SMALL or np.shares_memory(k, q) or np.shares_memory(k, p)
               for k in kept)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_recomputed_temporaries_give_the_gradient_of_kept_ones(policy):
    q, p = state()
    before = q.tobytes(), p.tobytes()
    recomputed = mutad.gradient(lambda q, p: leapfrog(q, p, 5), q, p, policy=policy)
    kept = mutad.gradient(lambda q, p: leapfrog(q, p, 5, keep=[]), q, p, policy=policy)
    assert (q.tobytes(), p.tobytes()) == before
    for a, b in zip(recomputed, kept, strict=True):
        if policy == "checkpoint":  # every input restored bit for bit: the same bytes
            assert a.tobytes() == b.tobytes()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    mutad.check_grads(lambda q, p: leapfrog(q, p, 2), *state())


def growth_per_step(gradient, few, many):
    """The growth of the peak memory of ``gradient(steps)`` per step, from ``few`` to ``many``
    steps (NumPy reports its arrays to tracemalloc)."""
    peaks = []
    for steps in (few, many):
        tracemalloc.start()
        gradient(steps)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return (peaks[1] - peaks[0]) / (many - few)


@pytest.mark.slow
def test_memory_does_not_grow_with_the_number_of_steps():
    n = 100_000
    q, p = state(n)
    per_step = growth_per_step(
        lambda steps: mutad.gradient(lambda q, p: leapfrog(q, p, steps), q, p), 4, 24)
    # Keeping the temporaries costs several states per step; the records alone, a few KiB.
    assert per_step < n * 8 / 8, per_step


@pytest.mark.parametrize("make", [
    lambda u: np.ones(N) * 1.0,  # a constant
    lambda u: u[0] + np.ones(N),  # a value whose pullback needs no operand
], ids=["constant", "sum"])
def test_a_replay_lets_go_of_a_large_temporary_held_by_a_small_view(make):
    """A step's large temporary, read through a small view of it (``t[:3].sum()``), is let
    go after the view's last reader, as the traced call lets go of it: the replay held every
    one to the end of the call (about N * 8 bytes a step)."""
    def loss(x, steps):
        u = x.copy()
        for _ in range(steps):
            t = make(u)
            u = u * 1.0001 + t[:3].sum() * 1e-3
        return u.sum()

    peaks = []
    for steps in (4, 24):
        g = mutad.value_and_grad(lambda x: loss(x, steps), replay=True)
        g(np.ones(3))  # (records)
        g(np.ones(3))  # (replays and compiles)
        peaks.append(peak_bytes(lambda: g(np.ones(3))))
    assert (peaks[1] - peaks[0]) / 20 < N * 8 / 8


def test_a_replay_of_the_leapfrog_holds_a_few_kib_of_records_per_step():
    """A replay of W2's leapfrog (the benchmark's program: large temporaries recomputed, each
    write inverted) holds no array per step until its reverse pass, only the records of its
    steps; those cost about 10 KiB a step (each record's recompute plans copied, a set of its
    operands' ids, a closure and an attribute dictionary per join), now under 8 KiB."""
    q, p = leapfrog_initial_state(10_000)
    peaks = []
    for steps in (20, 120):
        g = mutad.value_and_grad(lambda q, p: leapfrog_workload(q, p, steps), argnums=(0, 1),
                                 replay=True)
        g(q, p)  # (records)
        g(q, p)  # (replays and compiles)
        peaks.append(peak_bytes(lambda: g(q, p)))
    assert (peaks[1] - peaks[0]) / 100 < 8 * 1024, peaks


def test_a_temporary_whose_input_is_written_afterwards_is_kept():
    def f(x):
        t = np.sin(x) * 2.0
        x += 1.0  # t can no longer be computed from x when its reader's pullback runs
        return np.sum(t * t * x)

    records = _records(f, np.linspace(0, 1, N))
    reads_t = [r for r in records if r.primitive is np.multiply and r.undo is None][1]
    assert isinstance(reads_t.kept[0], np.ndarray)
    mutad.check_grads(f, np.linspace(0, 1, N))


def test_a_temporary_written_after_it_was_read_is_recomputed_as_it_was():
    def f(x):
        t = np.sin(x)
        y = t * t  # reads t as np.sin(x) made it
        t *= 3.0
        return np.sum(y) + np.sum(t)

    mutad.check_grads(f, np.linspace(0, 1, N))


def test_recomputation_reads_views_of_arguments_laid_out_in_fortran_order():
    """Regression: a view of an F-ordered argument was read from a C-ordered copy of it."""
    a0 = np.asfortranarray(np.linspace(-1, 1, 2 * N).reshape(2, N))
    a1 = np.asfortranarray(np.linspace(1, -1, 2 * N).reshape(2, N))

    def f(a0, a1):
        a0[0:1] /= 1.5 + np.sin(a1[0:1])
        return np.sum(a0 * a0)

    mutad.check_grads(f, a0, a1)


def _keeps_part_of_a_reshaped_copy(a):
    v = a.reshape(N, 2)
    v *= 2.0
    c = v[:, 1]
    z = c * c  # keeps c, a view of the copy rather than of v
    v *= 3.0
    return np.sum(z) + np.sum(v)


def _drops_a_reshaped_copy_at_once(a):
    c = a.reshape(N, 2)[:, 1]
    c *= 2.0
    return np.sum(np.sin(np.exp(c)))  # exp's value is recomputed from c


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("f", [_keeps_part_of_a_reshaped_copy, _drops_a_reshaped_copy_at_once])
def test_a_result_that_views_memory_of_its_own_lives_as_long_as_that_memory(f, policy):
    """Regression: ``np.reshape`` of an F-ordered array gives a view of the copy it makes. A weak
    reference to that view followed the buffer, and died with it while other views kept the
    memory (a record's, the program's): the replay took the array for gone, and skipped the
    undos of the writes into it or recomputed it from its recipe, as it was before them."""
    mutad.check_grads(f, np.asfortranarray(np.linspace(-1, 1, 2 * N).reshape(2, N)),
                      policy=policy)


# ----------------------------------------------------------------------------------------------
# A memory budget: writes that cannot be inverted, rebuilt from a few snapshots


def sweeps(u, weights, steps):
    """Red-black Gauss-Seidel sweeps: assignments whose old values the new ones do not give."""
    for _ in range(steps):
        u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] - 1e-3 * np.exp(u[1:-1:2]))
        u[2:-1:2] = 0.5 * (u[1:-2:2] + u[3::2] - 1e-3 * np.exp(u[2:-1:2]))
    return np.sum(weights * u * u)


def heat(u, steps):
    """Explicit heat steps: dissipative, so their inverse is not safe."""
    for _ in range(steps):
        u[1:-1] += 0.4 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u * u)


def test_a_budget_gives_the_checkpoint_policys_gradient_of_writes_that_cannot_be_inverted():
    u = np.sin(np.linspace(0, 3, N))
    weights = 1 + np.cos(np.linspace(0, 5, N)) ** 2
    before = u.tobytes()
    for f in (lambda u: sweeps(u, weights, 25), lambda u: heat(u, 25)):
        exact = mutad.gradient(f, u, policy="checkpoint")
        for budget in (0, 3 * u.nbytes, 12 * u.nbytes):
            assert mutad.gradient(f, u, memory=budget)[0].tobytes() == exact[0].tobytes()
        assert u.tobytes() == before


def test_a_budget_bounds_the_memory_of_writes_that_cannot_be_inverted():
    n = 100_000
    u = np.sin(np.linspace(0, 3, n))
    per_step = growth_per_step(
        lambda steps: mutad.gradient(lambda u: heat(u, steps), u, memory=6 * u.nbytes), 4, 44)
    assert per_step < n * 8 / 8, per_step


def test_a_budget_bounds_the_memory_of_a_heat_fit_with_its_ends_assigned():
    """The heat fit as a first script writes it (``u = u0.copy()``, a slice update, then
    ``u[0] = u[-1] = 0.0`` at every step): the update cannot be inverted (its inverse would
    keep the increment, as large as the bytes a checkpoint saves, since the increment reads
    what the update overwrites), so without a budget each step keeps an array; with one, the
    assignments of the ends join the rebuilt writes and the memory stays flat, the gradient
    the checkpoint policy's bit for bit and the caller's ``u0`` untouched."""
    n = 100_000
    u0 = np.sin(np.linspace(0, 3, n))
    target = np.cos(np.linspace(0, 2, n))
    before = u0.tobytes()
    per_step = growth_per_step(lambda steps: mutad.gradient(
        heat_fit, u0, target, steps, argnums=0, memory=6 * u0.nbytes), 4, 44)
    assert per_step < n * 8 / 8, per_step
    exact = mutad.gradient(heat_fit, u0, target, 30, argnums=0, policy="checkpoint")
    budget = mutad.gradient(heat_fit, u0, target, 30, argnums=0, memory=6 * u0.nbytes)
    assert budget.tobytes() == exact.tobytes()
    assert u0.tobytes() == before


def peak_bytes(gradient):
    tracemalloc.start()
    try:
        gradient()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_budget_saves_the_writes_of_a_few_bytes_and_rebuilds_the_others(monkeypatch):
    """The heat fit's ends (``u[0] = 0.0``: 8 bytes) are saved under a budget, not rebuilt:
    rebuilding one redid the slice updates before it into a copy of all of ``u``, so that two
    rebuilds in three were for the ends. They still join the chain of ``u``, which redoes them
    when it rebuilds the slice updates; the gradient is the checkpoint policy's, bit for bit."""
    n, steps = 20_000, 12
    u0 = np.sin(np.linspace(0, 3, n))
    target = np.cos(np.linspace(0, 2, n))
    with ReverseDifferentiation("restore", memory=4 * u0.nbytes) as d:
        d.call(heat_fit, [*d.wrap((u0,)), target, steps])
        kinds = [r.undo_kind for r in d.tape.records if r.undo is not None]
        chain, = d.tape.recomputation.chains.values()
        joined = len(chain.writes)
    assert kinds == ["rebuild", "checkpoint", "checkpoint"] * steps
    assert joined == 3 * steps
    rebuilt = []
    state_at = Chain.state_at
    monkeypatch.setattr(Chain, "state_at",
                        lambda chain, version: rebuilt.append(version) or state_at(chain, version))
    exact = mutad.gradient(heat_fit, u0, target, steps, argnums=0, policy="checkpoint")
    budget = mutad.gradient(heat_fit, u0, target, steps, argnums=0, memory=4 * u0.nbytes)
    assert budget.tobytes() == exact.tobytes() and len(rebuilt) == steps


def test_a_budget_costs_no_memory_where_inverses_serve():
    """Regression: under a budget, ``c *= a`` (``a`` written before, kept by a record) was
    rebuilt from snapshots rather than undone by its inverse, and a rebuilt array was held
    until the replay ended: W5 took six arrays with a budget, four without."""
    x = np.linspace(-3, 3, 200_000)
    restore = peak_bytes(lambda: mutad.gradient(big_elementwise, x))
    budget = peak_bytes(lambda: mutad.gradient(big_elementwise, x, memory=8 * x.nbytes))
    assert budget < restore + x.nbytes / 4, (budget / x.nbytes, restore / x.nbytes)
    with ReverseDifferentiation("restore", memory=8 * x.nbytes) as d:
        d.call(big_elementwise, d.wrap((x,)))
        kinds = [r.undo_kind for r in d.tape.records if r.undo is not None]
    assert kinds == ["inverse", "partial", "inverse", "inverse", "rebuild"]


def test_a_replay_lets_go_of_a_saved_copy_before_the_pullback_as_tracing_does():
    """Regression: the replay of a large write with no inverse (W5's ``np.cos(c, out=c)``)
    held the copy of the bytes it overwrote until that write's pullback had made its
    cotangents, where tracing's undo lets go of it once copied back: W5 replayed took five
    arrays, traced four."""
    x = np.linspace(-3, 3, 200_000)
    before = x.copy()
    traced = mutad.gradient(big_elementwise, x)
    traced_peak = peak_bytes(lambda: mutad.gradient(big_elementwise, x))
    replayed = mutad.grad(big_elementwise, replay=True)
    replayed(x), replayed(x)  # records, then replays (and compiles)
    assert not replayed.reasons
    replayed_peak = peak_bytes(lambda: replayed(x))
    assert replayed_peak < traced_peak + x.nbytes / 4, (replayed_peak / x.nbytes,
                                                        traced_peak / x.nbytes)
    assert replayed(x).tobytes() == traced[0].tobytes()
    assert x.tobytes() == before.tobytes()


def test_a_write_that_reads_an_array_changed_later_starts_from_a_snapshot_of_its_own():
    def f(u, v):
        for k in range(12):
            u[1:] = np.sin(u[:-1]) * v[1:]
            if k == 4:
                v *= 1.5  # what the next writes read changed: they cannot be redone from before
        return np.sum(u * u)

    u, v = np.linspace(0, 1, N), np.linspace(1, 2, N)
    exact = mutad.gradient(f, u, v, policy="checkpoint")
    rebuilt = mutad.gradient(f, u, v, policy="checkpoint", memory=2 * u.nbytes)
    for a, b in zip(rebuilt, exact, strict=True):
        assert a.tobytes() == b.tobytes()
    # under the restore policy v comes back by an inverse, within rounding
    for a, b in zip(mutad.gradient(f, u, v, memory=2 * u.nbytes), exact, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_a_chain_forgets_the_temporaries_its_writes_read_once_they_are_gone():
    # Before each write a chain checks that what the writes since its last barrier read is
    # unchanged. A temporary the program dropped can no longer change: kept in that list, it
    # grew by every temporary of every step (holding their buffers), each write checking all.
    u = np.sin(np.linspace(0, 3, 4 * N))  # the half-sweeps' temporaries are recomputed
    weights = np.ones(u.size)
    checked = []
    for steps in (4, 40):
        with ReverseDifferentiation("restore", memory=3 * u.nbytes) as d:
            d.call(lambda u: sweeps(u, weights, steps), d.wrap((u,)))
            (chain,) = d.tape.recomputation.chains.values()
            checked.append(len(chain.depends))
    assert checked[1] == checked[0] < 10, checked


def test_the_budget_is_a_number_of_bytes():
    with pytest.raises(PolicyError):
        mutad.gradient(lambda x: np.sum(x * x), np.ones(3), memory="a lot")


def test_a_budget_leaves_nothing_behind_for_the_garbage_collector():
    """Regression: the snapshots of a budget stayed alive after the gradient returned, in a
    reference cycle, until the garbage collector ran."""
    x = np.linspace(0, 1, 200_000)
    # a first gradient fills what is kept once for all (the routes of the libraries, the
    # verification's scratch memory, bounded): the second is measured
    mutad.gradient(big_elementwise, x, memory=8 * x.nbytes)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        grad = mutad.gradient(big_elementwise, x, memory=8 * x.nbytes)
        left = tracemalloc.get_traced_memory()[0] - base - grad[0].nbytes
        tracemalloc.stop()
    finally:
        gc.enable()
    assert left < 0.5 * x.nbytes, left / x.nbytes


def _writes_in_place(x):
    u = x.copy()
    u *= 2.0
    u[1:] += np.sin(x[:-1])
    return (u * u).sum()


@pytest.mark.parametrize("differentiate", [
    lambda x: mutad.gradient(_writes_in_place, x),
    lambda x: mutad.gradient(_writes_in_place, x, policy="checkpoint"),
    lambda x: mutad.gradient(_writes_in_place, x, memory=0),
    lambda x: mutad.jvp(_writes_in_place, (x,), (x,)),
    lambda x: mutad.hvp(_writes_in_place, (x,), (x,)),
    lambda x: mutad.jacobian(lambda x: x * np.sin(x), x),
], ids=["gradient", "checkpoint", "budget", "jvp", "hvp", "jacobian"])
def test_a_differentiation_leaves_no_reference_cycle(differentiate):
    """Regression: every differentiation left a reference cycle (the tape's unrun saves and
    its adopter naming the differentiation, a forward level naming itself, a temporary's
    holder and its buffer), which held its objects until the garbage collector ran."""
    x = np.linspace(0.1, 1.0, 5)
    before = x.copy()
    differentiate(x)  # (first calls fill what is kept once for all)
    gc.collect()
    gc.disable()
    try:
        differentiate(x)
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert np.array_equal(x, before)


@pytest.mark.parametrize("refill", [False, True])
def test_a_recipe_that_reads_an_array_the_program_allocated_sees_it_as_it_was(refill):
    """Regression: a recipe read a work array the program allocated, which died before the
    replay (a crash), or was refilled afterwards without the refill being undone (values read
    from the new contents)."""

    def f(x):
        w = np.zeros(x.size)
        w[:] = 2.0
        t = x + w  # the pullback reads nothing: only the recipe reads w
        y = t * t
        if refill:
            w[:] = 5.0
        return np.sum(y)

    x = np.linspace(0, 1, N)
    np.testing.assert_allclose(mutad.gradient(f, x)[0], 2 * (x + 2), rtol=1e-15)
    mutad.check_grads(f, x)


def test_a_chain_ends_where_a_write_it_cannot_redo_comes_between():
    """Regression: a write undone by its inverse between two rebuilt writes of one array was
    missing from the writes to redo (a KeyError in the replay)."""

    def f(u):
        for _ in range(6):
            u[1:] = np.sin(u[:-1])  # rebuilt under a budget
            u *= 1.1  # undone by its inverse
        return np.sum(u * u)

    u = np.linspace(0, 1, N)
    exact = mutad.gradient(f, u, policy="checkpoint")[0]
    np.testing.assert_allclose(mutad.gradient(f, u, memory=0)[0], exact, rtol=1e-14)


def filtered_means(theta, ys):
    """A small state computed anew each step (no reference follows a small temporary), then
    written in place, then assigned into an array allocated before the loop."""
    F = np.array([[1.0, 0.1], [0.0, 1.0]])
    means = np.zeros((len(ys), 2))
    x = np.zeros(2)
    for t in range(len(ys)):
        x = F @ x
        x += theta[1:] / theta[0] * ys[t]
        means[t] = x
    return np.sum(means ** 2)


@pytest.mark.parametrize("budget", [0, 100, 300, 10_000])
def test_a_rebuilt_write_does_not_read_a_small_temporary_no_reference_finds(budget):
    """Regression: a rebuilt write read the small state it copied from (written in place,
    so taken for alive) through a reference it never had (an AttributeError in the reverse
    pass, found by a Kalman filter under a budget): such a write is saved instead."""
    theta, ys = np.array([2.0, -1.0, 0.3]), np.linspace(0.0, 1.0, 7)
    exact = mutad.gradient(filtered_means, theta, ys, argnums=0, policy="checkpoint")
    got = mutad.gradient(filtered_means, theta, ys, argnums=0, memory=budget)
    assert got.tobytes() == exact.tobytes()


def test_a_temporary_computed_twice_from_the_same_bytes_is_recomputed_once():
    def f(x, changed, zero):
        first = np.sin(x) * 2.0
        if changed:
            x *= 1.5
        second = np.sin(x) * zero  # the same computation only if x did not change and zero is 2.0
        return np.sum(first * first) + np.sum(second * second)

    x = np.linspace(0, 1, N)
    for changed, zero, same in ((False, 2.0, True), (True, 2.0, False), (False, -2.0, False)):
        records = _records(lambda x: f(x, changed, zero), x.copy())
        products = [r for r in records if r.primitive is np.multiply and r.undo is None]
        recipe = products[1].outputs[0].origin
        assert (recipe.same is products[0].outputs[0]) is same
        mutad.check_grads(lambda x: f(x, changed, zero), x)


def test_a_temporary_a_recipe_reads_at_two_places_is_recomputed_once(monkeypatch):
    """The force's padding is read by ``padded[1:] - padded[:-1]`` at two places, its cube by
    ``cube[1:] - cube[:-1]``: recomputed for the undo of ``p += s``, each is computed once for
    both reads, traced and in the replay's lines, with the traced bits."""
    from mutad.engines import replay

    def f(q, p):
        p += 0.005 * force(q)
        return np.sum(p * p)

    traced = collections.Counter()
    recompute = Recomputation._recompute

    def counted(self, buffer, rebuilt, plan=None):
        traced[buffer.key] += 1
        return recompute(self, buffer, rebuilt, plan)

    compiled = []
    compute = replay._Reading.compute

    def compiled_counted(self, plan):
        compiled.append((id(self), plan[1]))
        return compute(self, plan)

    monkeypatch.setattr(Recomputation, "_recompute", counted)
    monkeypatch.setattr(replay._Reading, "compute", compiled_counted)
    q, p = state()
    before = q.tobytes(), p.tobytes()
    mutad.gradient(f, q, p, argnums=(0, 1))
    assert traced and max(traced.values()) == 1, traced
    replays_as_traced(f, [(q, p)] * 3, argnums=(0, 1), replayed=2)
    assert compiled and max(collections.Counter(compiled).values()) == 1
    assert (q.tobytes(), p.tobytes()) == before


def test_an_array_a_record_keeps_is_freed_once_that_record_has_run(monkeypatch):
    """Regression: an array a record kept stayed alive until the replay ended."""
    from mutad.engines.reverse import ReverseTape

    refs, alive = [], []
    reverse = ReverseTape.reverse

    def watched(record, shadows):  # by then the record before it has been dropped
        alive.append(refs[0]() is not None)
        reverse(record, shadows)

    monkeypatch.setattr(ReverseTape, "reverse", staticmethod(watched))

    def f(x):
        c = np.exp(2 * x)
        c *= x  # its pullback keeps c's old values
        refs.append(weakref.ref(c.value))
        return np.sum(c)

    mutad.gradient(f, np.linspace(0, 1, N))
    # before sum, c *= x, exp, 2 * x: a temporary written in place stays alive until the
    # record that made it has run (exp reads it rather than recomputes it), not longer
    assert alive == [True, True, True, False]


def _alive_when_the_replay_starts(f, x, monkeypatch, policy="restore"):
    """Run ``mutad.gradient(f, x)``; f appends weak references to the arrays to watch to the
    list it is given. Returns the gradient, and which of them were alive at the first
    record the replay reversed."""
    from mutad.engines.reverse import ReverseTape

    refs, alive = [], []
    reverse = ReverseTape.reverse

    def watched(record, shadows):
        if not alive:
            alive.append([ref() is not None for ref in refs])
        reverse(record, shadows)

    monkeypatch.setattr(ReverseTape, "reverse", staticmethod(watched))
    g, = mutad.gradient(lambda x: f(x, refs), x, policy=policy)
    return g, alive[0]


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_dead_temporary_is_not_put_back(monkeypatch, policy):
    """W5's ``b``: written twice in place, read later only through a recipe (exp reads its own
    output, which stays alive), so nothing reads the bytes its undos would put back: it is
    freed when the forward pass ends. ``a`` and ``c``, which pullbacks read, are not."""
    dead = []
    finish = Recomputation.finish

    def watched(self):
        holders = list(self.written)  # a, b, c: in the order of their first writes
        finish(self)
        dead.extend(holder.array is None for holder in holders)

    monkeypatch.setattr(Recomputation, "finish", watched)
    x = np.linspace(-3, 3, N)
    before = x.tobytes()
    g, = mutad.gradient(big_elementwise, x, policy=policy)
    assert dead == [False, True, False]
    assert x.tobytes() == before
    monkeypatch.undo()
    kept, = mutad.gradient(big_elementwise, x, policy="checkpoint")
    if policy == "checkpoint":
        assert g.tobytes() == kept.tobytes()
    np.testing.assert_allclose(g, kept, rtol=1e-13)
    mutad.check_grads(big_elementwise, x)


def test_a_temporary_a_later_recipe_reads_after_a_write_is_put_back(monkeypatch):
    """``t`` is dead to the program once ``u`` is made, but ``u``'s recipe reads it after its
    write, and ``u`` (dropped, not written) is recomputed in the replay: ``t``'s write must
    be undone, so it stays alive."""

    def f(x, refs):
        t = np.sin(x)
        t *= 2.0
        u = np.exp(t)  # its recipe reads t as it is now
        refs.append(weakref.ref(t.value))
        t = None
        return np.sum(u * u)

    g, alive = _alive_when_the_replay_starts(f, np.linspace(0, 1, N), monkeypatch)
    assert alive == [True]
    np.testing.assert_allclose(g, 4 * np.cos(np.linspace(0, 1, N))
                               * np.exp(4 * np.sin(np.linspace(0, 1, N))), rtol=1e-13)


def test_a_temporary_the_program_still_holds_is_put_back(monkeypatch):
    """An array the program keeps after it returns (here in a list) is not dead: its writes
    are undone as every other's, so it holds its first values after the gradient."""
    held = collections.deque()  # (a list would hold NumPy's value after the call)

    def f(x, refs):
        t = np.sin(x)
        held.append(t)
        t += x
        t *= 3.0
        refs.append(weakref.ref(t.value))
        return np.sum(np.exp(t))

    x = np.linspace(0, 1, N)
    g, alive = _alive_when_the_replay_starts(f, x, monkeypatch)
    assert alive == [True]
    np.testing.assert_allclose(np.asarray(held[0].value), np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(g, 3 * np.exp(3 * (np.sin(x) + x)) * (np.cos(x) + 1),
                               rtol=1e-13)


def test_what_a_dead_temporary_is_recomputed_from_is_put_back(monkeypatch):
    """``t`` is dead (written, then only summed), so exp's pullback recomputes it from ``d``
    as it was after its write: ``d``, though dropped by the program, must have that write
    undone, not be recomputed from its own recipe (``sin(x)``, before the write)."""

    def f(x, refs):
        d = np.sin(x)
        d *= 2.0
        t = np.exp(d)
        t += 1.0
        refs.extend(weakref.ref(v.value) for v in (d, t))
        return np.sum(t)

    x = np.linspace(0, 1, N)
    g, alive = _alive_when_the_replay_starts(f, x, monkeypatch)
    assert alive == [True, False]
    np.testing.assert_allclose(g, 2 * np.cos(x) * np.exp(2 * np.sin(x)), rtol=1e-13)


def test_the_undo_of_a_write_into_a_temporary_laid_out_in_neither_order():
    """Regression: the undo looked its target up in a flat view of its memory, which a
    temporary contiguous in neither order (a ufunc of a broadcast F-ordered argument keeps
    its layout) cannot give."""
    x = np.asfortranarray(np.linspace(-1, 1, N).reshape(N // 4, 4))

    def f(x):
        t = np.broadcast_to(x, (2, *x.shape)) * 1.5
        t[:, 1:] *= 3.0  # a view of it
        return np.sum(t * t)

    mutad.check_grads(f, x)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_temporary_computed_again_after_its_twin_was_written_is_not_read_from_it(policy):
    """Regression (found by the random programs; silently wrong on the simplest program): the
    second ``np.sin(x)`` was recomputed by reading the first one's buffer (value numbering),
    which ``t *= ...`` had overwritten by the time the replay read it."""

    def f(x):
        t = np.sin(x)
        t *= np.sin(x)
        return t

    def read_before_the_write(x):
        t = np.sin(x)
        y = np.sin(x) * x  # reads the twin while t still holds it
        t *= 3.0
        return np.sum(y) + np.sum(t * t)

    x = np.linspace(-1, 1, N)
    mutad.check_grads(f, x, policy=policy)
    mutad.check_grads(read_before_the_write, x, policy=policy)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_twins_written_the_same_number_of_times_are_told_apart(policy):
    """Regression (silently wrong): two temporaries made by one recipe (``u0.copy()`` twice)
    were numbered by the older one's key and their own version, so once each had been written
    once, ``B + 1.0`` was recomputed as ``A + 1.0`` (the gradient in ``c`` was 2000 for
    3000). A twin stands for its older one only while it is unwritten."""

    def slice_writes(u0, c):
        A = u0.copy()
        B = u0.copy()
        A[:] = B + 1.0
        B[:] = A + 1.0
        return (c * (B + 1.0)).sum()

    def in_place(x, c):
        A = x * 1.0
        B = x * 1.0
        A *= 1.5
        B += 0.25
        return (c * np.exp(A)).sum() + (c * np.exp(B)).sum()

    u0 = np.linspace(-1, 1, N)
    before = u0.tobytes()
    dc = mutad.gradient(slice_writes, u0, 0.7, policy=policy)[1]
    assert dc == np.sum(u0 + 1.0 + 1.0 + 1.0)  # B + 1.0, as the program computes it
    dc = mutad.gradient(in_place, u0, 0.7, policy=policy)[1]
    np.testing.assert_allclose(dc, np.exp(1.5 * u0).sum() + np.exp(u0 + 0.25).sum(),
                               rtol=1e-14)
    assert u0.tobytes() == before
    mutad.check_grads(in_place, u0, 0.7, policy=policy)
    replays_as_traced(slice_writes, [(u0, 0.7), (u0 + 1.0, 0.5), (u0, 0.7)], argnums=(0, 1))


# ----------------------------------------------------------------------------------------------
# A budget changes no bit of the gradient


FORCE = np.random.default_rng(3).standard_normal((700, 700)) / 30


def kick_drift(q, p, steps=12, dt=0.1):
    for _ in range(steps):
        p -= 0.5 * dt * np.sin(q)
        q += dt * p * p
        p -= 0.5 * dt * np.sin(q)
    return (q * q * q).sum() + (p * p).sum()


def linear_force(q, p, steps=12, dt=0.1):  # the force, a matrix product, has no recipe
    n = q.size
    for _ in range(steps):
        p -= 0.5 * dt * (FORCE[:n, :n] @ q)
        q += dt * np.tanh(p)
        p -= 0.5 * dt * (FORCE[:n, :n] @ q)
    return (q * q * q).sum() + (p * p).sum()


def damped(q, p, steps=12, dt=0.1):
    for _ in range(steps):
        p *= np.exp(-dt * q * q)
        q += dt * np.tanh(p)
        p[1:-1] += dt * (q[2:] - 2 * q[1:-1] + q[:-2])
    return (q * q * q).sum() + (p * p).sum()


def with_assignments(q, p, steps=8, dt=0.1):
    """Assignments (rebuilt under a budget) reading p, which inverted writes then change."""
    for _ in range(steps):
        q[:] = q + dt * p
        q[:] = q + 0.5 * dt * np.tanh(p)
        p -= dt * np.sin(q)
        p *= 1.01
    return (q * q * q).sum() + (p * p).sum()


def rescaled_midway(q, p, steps=12):
    """Assignments redone from a snapshot read p, which an inverted write changes midway."""
    for k in range(steps):
        q[1:] = np.sin(q[:-1]) * p[1:]
        if k == 4:
            p *= 1.5
    return (q * q).sum()


def strided_assignments(q, p, steps=6):
    """Strided assignments, redone under a budget straight into their region where the value's
    last step is exact arithmetic (a product, a quotient), as computed where it is not (exp)."""
    for _ in range(steps):
        q[1:-1:2] = 0.5 * (q[0:-2:2] + q[2::2] + p[1:-1:2] * np.exp(q[1:-1:2]))
        q[2:-1:2] = (q[1:-2:2] + q[3::2] - 0.1 * np.exp(q[2:-1:2])) / 2.5
        q[1::3] = np.exp(-q[1::3] * q[1::3])
    return (q * q).sum()


@pytest.mark.parametrize("n", [10, 700])  # temporaries kept, or as large as a snapshot
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("f", [kick_drift, linear_force, damped, with_assignments,
                               rescaled_midway, strided_assignments],
                         ids=lambda f: f.__name__)
def test_a_budget_changes_no_bit_of_the_gradient(f, policy, n):
    rng = np.random.default_rng(n)
    q, p = rng.uniform(-0.5, 0.5, n), rng.uniform(-0.5, 0.5, n)
    before = q.tobytes(), p.tobytes()
    expected = mutad.value_and_gradient(f, q, p, policy=policy)
    for budget in (0, 3 * q.nbytes, 10**9):
        value, grads = mutad.value_and_gradient(f, q, p, policy=policy, memory=budget)
        assert (q.tobytes(), p.tobytes()) == before
        assert value == expected[0]
        assert [g.tobytes() for g in grads] == [g.tobytes() for g in expected[1]], budget


def test_a_rebuilt_assignment_of_exact_arithmetic_is_computed_in_its_region(monkeypatch):
    """The redo of ``q[1:-1:2] = 0.5 * (...)`` computes the product into the region it assigns
    (no temporary, no copy); that of ``q[1::3] = np.exp(...)`` does not (a strided output may
    take a loop of other rounding). No bit of the gradient changes either way."""
    taken = []
    into = Recomputation.recompute_into

    def counted(self, inputs, rebuilt, out):
        done = into(self, inputs, rebuilt, out)
        origin = None if type(inputs[0]) is np.ndarray else inputs[0].buffer.origin
        if origin is not None:  # (not a small value copied, nor one without a recipe)
            taken.append((origin.record.primitive, done))
        return done

    q, p = np.linspace(-0.5, 0.5, 2000), np.linspace(0.1, 0.3, 2000)  # (halves not small)
    before = q.tobytes(), p.tobytes()
    expected = mutad.value_and_gradient(strided_assignments, q, p, policy="checkpoint")
    monkeypatch.setattr(Recomputation, "recompute_into", counted)
    value, grads = mutad.value_and_gradient(strided_assignments, q, p, memory=3 * q.nbytes)
    assert {(np.multiply, True), (np.true_divide, True), (np.exp, False)} <= set(taken)
    assert value == expected[0]
    assert [g.tobytes() for g in grads] == [g.tobytes() for g in expected[1]]
    assert (q.tobytes(), p.tobytes()) == before


def test_a_force_padded_with_new_zeros_each_time_is_recomputed_once():
    """The force at the end of a step and at the start of the next read equal constants the
    program allocates anew (``np.zeros(1)``) and the same ``q``: the later padding, and all
    that follows from it, is the older one's twin (value numbering by the constants' bytes),
    so the replay recomputes it once. With other pads, or ``q`` written in between, it is
    not."""

    def two_forces(q, p, pad, write):
        f1 = force(q)
        p += 0.005 * f1
        if write:
            q += 0.01 * p
        padded = np.concatenate((np.zeros(1), q, np.full(1, pad)))
        d = padded[1:] - padded[:-1]
        return np.sum(f1 * f1) + np.sum(d[1:] * d[1:] * p)

    q, p = state()
    for pad, write, same in ((0.0, False, True), (-0.0, False, False), (1.0, False, False),
                             (0.0, True, False)):
        records = _records(lambda q, p: two_forces(q, p, pad, write), q.copy(), p.copy())
        pads = [r for r in records if r.primitive.__class__.__name__ == "Primitive"
                and "concatenate" in repr(r.primitive)]
        assert len(pads) == 2
        recipe = pads[1].outputs[0].origin
        assert (recipe.same is pads[0].outputs[0]) is same
        before = q.tobytes(), p.tobytes()
        exact = mutad.gradient(lambda q, p: two_forces(q, p, pad, write), q, p,
                               policy="checkpoint")
        got = mutad.gradient(lambda q, p: two_forces(q, p, pad, write), q, p)
        for g, e in zip(got, exact):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        assert (q.tobytes(), p.tobytes()) == before


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_twin_whose_constant_is_written_later_is_not_read_for_its_value(policy):
    """Two paddings of ``x`` with equal constants are twins while the constants are unwritten;
    once the older one's constant is written (a traced value into it), what reads the later
    padding after that computes it from its own recipe, not from the twin's, whose constant
    no longer holds those bytes where the replay reads it."""

    def f(x, c):
        z1 = np.zeros(1)
        first = np.concatenate((z1, x))
        y1 = np.sum(first * first)
        z2 = np.zeros(1)
        second = np.concatenate((z2, x))  # the twin of first, while z1 is unwritten
        z1 += c  # z1 now holds c, and depends on it
        third = np.concatenate((z1, x))
        # read after the write: recomputed from the twin, it would be third, whose first
        # element is c, which the difference carries into x[0]'s gradient
        d = second[1:] - second[:-1]
        return y1 + np.sum(d * np.exp(d)) + np.sum(third * third)

    x = np.linspace(-1, 1, N)
    before = x.tobytes()
    gx, gc = mutad.gradient(f, x, 0.5, policy=policy)
    assert x.tobytes() == before
    d = np.diff(x, prepend=0.0)
    h = np.exp(d) * (1 + d)
    ex = 4 * x + h - np.append(h[1:], 0.0)
    np.testing.assert_allclose(gx, ex, rtol=1e-12, atol=1e-15)
    assert gc == pytest.approx(2 * 0.5, rel=1e-14)
    mutad.check_grads(lambda x: f(x, 0.5), x, policy=policy)


def test_a_recipe_found_current_is_asked_again_after_any_write():
    """``Recipe.current`` remembers an answer until the next write into any buffer: a recipe
    found current, then a write into what it reads (an argument, a temporary of its chain, a
    constant of its twin), is not current any more; one a write did not touch still is."""
    answers = []

    def f(x, y):
        z = np.zeros(1)
        t = np.concatenate((z, np.sin(x)))  # a chain: sin(x), then the padding
        u = np.cos(y)
        recipe_t, recipe_u = t.buffer.origin, u.buffer.origin
        answers.append((recipe_t.current(), recipe_u.current()))
        answers.append((recipe_t.current(), recipe_u.current()))  # remembered
        x += 1.0
        answers.append((recipe_t.current(), recipe_u.current()))
        w = np.concatenate((np.zeros(1), np.cos(y)))
        v = np.concatenate((np.zeros(1), np.cos(y)))  # the twin of w
        answers.append((w.buffer.origin.current(), v.buffer.origin.current()))
        w[0] = 2.0  # w written: v is no longer its twin, and is still current
        answers.append((w.buffer.origin.current(), v.buffer.origin.current(),
                        v.buffer.origin.same))
        return np.sum(t * t) + np.sum(u * v[1:])

    x, y = np.linspace(0, 1, N), np.linspace(1, 2, N)
    _records(f, x, y)
    assert answers == [(True, True), (True, True), (False, True), (True, True),
                       (False, True, None)]


def sines_and_cosines_of_an_f_ordered_view(s):
    a = s.reshape(2, 3, order="F")  # the argument seen in Fortran order
    a *= np.tanh(a)  # reads a temporary laid out in Fortran order: saved, not rebuilt
    for _ in range(3):  # rebuilt under a budget, each redone write a different one
        np.sin(a, out=a)
        np.cos(a, out=a)
    return np.sum(a * np.arange(1.0, 7.0).reshape(2, 3))


def test_a_chain_counts_its_writes_from_its_first_rebuilt_write():
    """Regression: a write that read a temporary not in C order was refused by the chain of
    its array (saved instead) after the chain had been made, at the version before that
    write; the chain then counted its writes from there, and the reverse pass redid each
    rebuilt write's successor in its place: a wrong gradient under ``memory=``, with finite
    values, and the caller's bytes back."""
    s = np.array([0.274, -0.46, -0.918, -0.967, 0.627, 0.826])
    before = s.tobytes()
    exact = mutad.gradient(sines_and_cosines_of_an_f_ordered_view, s, policy="checkpoint")[0]
    for budget in (0, 200, 10_000):
        got = mutad.gradient(sines_and_cosines_of_an_f_ordered_view, s, memory=budget)[0]
        assert got.tobytes() == exact.tobytes()
        assert s.tobytes() == before
    replaying = mutad.value_and_grad(sines_and_cosines_of_an_f_ordered_view, memory=0,
                                     replay=True)
    for shift in (0.0, 0.1, -0.2):
        x = s + shift
        expected = mutad.gradient(sines_and_cosines_of_an_f_ordered_view, x,
                                  policy="checkpoint")[0]
        assert replaying(x)[1].tobytes() == expected.tobytes()


def _fewest_redone(states, free, memo={}):
    """The fewest writes redone to give the states of ``states`` versions from a snapshot's
    on, newest first, with ``free`` more snapshots allowed: by trying every place for the
    next one (the definition ``recompute.advance`` answers in closed form)."""
    if states <= 1:
        return 0
    if free == 0:
        return states * (states - 1) // 2
    if (states, free) not in memo:
        memo[states, free] = min(m + _fewest_redone(states - m, free - 1)
                                 + _fewest_redone(m, free) for m in range(1, states))
    return memo[states, free]


def test_the_next_snapshot_is_left_where_the_fewest_writes_are_redone():
    for free in range(1, 6):
        for states in range(2, 90):
            m = advance(states, free)
            assert 1 <= m < states
            assert (m + _fewest_redone(states - m, free - 1) + _fewest_redone(m, free)
                    == _fewest_redone(states, free)), (states, free, m)


def red_black(u, steps):
    """Red-black sweeps that cannot be inverted (W6's), rebuilt under a budget."""
    for _ in range(steps):
        u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] - 1e-3 * np.exp(u[1:-1:2]))
        u[2:-1:2] = 0.5 * (u[1:-2:2] + u[3::2] - 1e-3 * np.exp(u[2:-1:2]))
    return np.sum(u * u)


def test_a_budget_redoes_the_fewest_writes_its_snapshots_allow(monkeypatch):
    """200 rebuilt writes, 8 snapshots: the forward pass leaves 4 (every 64 writes), and the
    reverse pass places the others by revolve's schedule: 449 writes redone, where halving
    each stretch redid 588; the gradient is the checkpoint policy's, bit for bit."""
    redone = []
    redo = Chain._redo

    def counted(self, snapshot, start, stop):
        redone.append(stop - start)
        return redo(self, snapshot, start, stop)

    monkeypatch.setattr(Chain, "_redo", counted)
    u = np.sin(np.linspace(0, 3, 2 * N))  # (each half as large as N: recomputed, not kept)
    before = u.tobytes()
    got = mutad.gradient(lambda u: red_black(u, 100), u, memory=8 * u.nbytes)[0]
    assert sum(redone) == 449
    assert got.tobytes() == mutad.gradient(lambda u: red_black(u, 100), u,
                                           policy="checkpoint")[0].tobytes()
    assert u.tobytes() == before


def test_a_budget_rebuilds_states_in_the_memory_of_those_it_has_done_with(monkeypatch):
    """The reverse pass rebuilds a state of the buffer for each of the 200 writes (and
    snapshots on the way) into the memory of the states it no longer reads: no more arrays are
    made than the budget's 8 snapshots and one state besides, not one per rebuild, and the
    gradient is the checkpoint policy's, bit for bit."""
    rebuilt = []
    redo = Chain._redo

    def noted(self, snapshot, start, stop):
        state = redo(self, snapshot, start, stop)
        rebuilt.append(state)  # (held: a new array never takes another's id)
        return state

    monkeypatch.setattr(Chain, "_redo", noted)
    u = np.sin(np.linspace(0, 3, 2 * N))
    before = u.tobytes()
    got = mutad.gradient(lambda u: red_black(u, 100), u, memory=8 * u.nbytes)[0]
    assert len(rebuilt) > 100
    assert len({id(state) for state in rebuilt}) <= 8 + 1
    assert got.tobytes() == mutad.gradient(lambda u: red_black(u, 100), u,
                                           policy="checkpoint")[0].tobytes()
    assert u.tobytes() == before
