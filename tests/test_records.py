"""Records are data: the replay interprets them in the order each states, with toy values (the
tape knows nothing about arrays); the records the engine makes name what they read and keep."""

import numpy as np
import pytest

import mutad
from mutad.engines import tracing, writes
from mutad.engines.inplace import SavedWrite
from mutad.engines.session import ReverseDifferentiation
from mutad.engines.recompute import SMALL
from mutad.core.shadows import Buffer, Place
from mutad.core.tape import Absent, Primitive, Record, Tape, Write


class ToyShadows:
    """Cotangents in a dict by place name; ``take`` reads and zeroes, as ``Shadows.take``."""

    def __init__(self, **values):
        self.values = values
        self.log = []

    def take(self, place, key=None):
        self.log.append(("take", place, key))
        return self.values.pop(place, None)


def _write(log, undo_first, taken="a"):
    def pullback(record, shadows, dy):
        shadows.log.append(("pullback", dy))

    return Write("scale", [taken, 2.0], None, None, None, pullback, taken,
                 lambda: log.append(("undo",)), "inverse", taken=taken, undo_first=undo_first)


@pytest.mark.parametrize("undo_first", [True, False])
def test_a_write_is_taken_then_undone_before_or_after_its_pullback(undo_first):
    tape = Tape()
    shadows = ToyShadows(a=3.0)
    tape.record(_write(shadows.log, undo_first))
    tape.replay(shadows)
    steps = [entry[0] for entry in shadows.log]
    assert steps == (["take", "undo", "pullback"] if undo_first else ["take", "pullback", "undo"])
    assert ("pullback", 3.0) in shadows.log


def test_a_write_no_gradient_reached_is_only_undone():
    tape = Tape()
    shadows = ToyShadows()
    tape.record(_write(shadows.log, True))
    tape.replay(shadows)
    assert [entry[0] for entry in shadows.log] == ["take", "undo"]


def test_a_pure_record_runs_its_pullback_with_no_cotangent_taken():
    seen = []
    tape = Tape()
    tape.record(Record(Primitive("double", None), ["x"], None, ("y",), None, None,
                       lambda record, shadows, dy: seen.append((record.primitive, dy))))
    tape.replay(ToyShadows())
    assert [(repr(p), dy) for p, dy in seen] == [("double", None)]


def _records(f, *args):
    """The records of ``f(*args)``, taken before the run is undone."""
    with ReverseDifferentiation("restore") as d:
        y = d.call(f, d.wrap(args))
        return list(d.tape.records), y


def test_a_pure_record_names_its_recipe_and_keeps_only_what_its_pullback_reads():
    c = np.arange(3.0)

    def f(x):
        return np.add(x, c) * np.sin(x)

    records, _ = _records(f, np.ones(3))
    add, sin, multiply = records
    assert add.primitive is np.add and add.undo is None
    # c is not kept for the pullback; being small, the recipe names a copy of it
    assert type(add.inputs[0]) is Buffer and add.inputs[1] is not c
    assert np.array_equal(add.inputs[1], c) and list(add.kept) == [None, None]
    assert sin.kept[0] is not None  # cos(x) reads x
    assert len(add.outputs) == 1 and multiply.written is None


def test_the_records_of_a_loop_hold_only_what_is_their_own():
    """A long program is mostly records of elementwise operations, one per operation: what does
    not change from one step to the next (the rule's plan, the pullback, a layout) is one object
    for all of them, not one per record."""
    weights = np.linspace(1, 2, 3 * SMALL)

    def f(u):
        for _ in range(3):
            u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] + np.exp(u[1:-1:2]))
        return np.sum(weights * u * u)

    records, _ = _records(f, np.sin(np.linspace(0, 3, weights.size)))
    exps = [r for r in records if r.primitive is np.exp]
    writes = [r for r in records if r.written is not None]
    assert len(exps) == len(writes) == 3
    assert all(r.state is exps[0].state for r in exps)
    assert all(w.state is writes[0].state and w.pullback is writes[0].pullback for w in writes)
    assert all(type(r.inputs) is tuple for r in records)
    assert all(r.outputs == (r.output,) and r.output.shape is exps[0].output.shape
               and r.output.strides is exps[0].output.strides for r in exps)
    assert exps[0].where is not None and all(r.where is exps[0].where for r in exps)  # its line


def test_a_large_constant_the_pullback_does_not_read_is_described_not_held():
    c = np.arange(float(SMALL))

    records, _ = _records(lambda x: np.add(x, c).sum(), np.ones(c.size))
    assert type(records[0].inputs[1]) is Absent and records[0].inputs[1].shape == c.shape


def test_a_write_names_its_target_its_undo_and_the_temporary_its_inverse_reads(inverting):
    def f(u, v):
        u[1:] += 0.5 * v[1:]
        return u.sum()

    records, _ = _records(f, np.ones(4), np.ones(4))
    write = records[1]
    assert write.primitive is np.add and write.undo_kind == "inverse"
    assert type(write.written) is Place and write.written.shape == (3,)
    assert write.taken is write.written
    # The inverse (u -= t) reads the temporary t = 0.5 * v[1:]: named by its place, and kept.
    assert type(write.inputs[1]) is Buffer and write.kept[1] is not None


def test_a_scatter_goes_through_the_tapes_decision_and_is_checkpointed(monkeypatch):
    chosen = []
    undo_for = Tape.undo_for

    def spy(self, *args, **kwargs):
        chosen.append(undo_for(self, *args, **kwargs))
        return chosen[-1]

    monkeypatch.setattr(Tape, "undo_for", spy)
    x = np.arange(4.0)
    mutad.check_grads(_scatter, x)
    records, _ = _records(lambda x: _scatter(x), x)
    assert chosen and all(type(undo) is writes.CopyBack for undo in chosen)
    scatter = records[-2]
    assert scatter.undo_kind == "checkpoint" and scatter.key is not None


def _scatter(x):
    y = x * 1.0
    y[[0, 2]] = x[[1, 3]]
    return y.sum()


@mutad.adjoint
def _doubled_plus(x, c):
    return 2.0 * x + c


@_doubled_plus.rule
def _doubled_plus_rule(x, c):
    return _doubled_plus(x, c), lambda dy: (2.0 * dy, None)  # holds neither x nor c


@pytest.mark.parametrize("operation", [
    lambda x, c: x + c,                                  # an elementwise rule that reads no input
    _doubled_plus,                                       # a rule whose pullback holds neither
    lambda x, c: np.add(x, [c, c]),                      # a sequence of constants
], ids=["elementwise", "function", "sequence"])
def test_a_record_keeps_alive_no_constant_its_pullback_does_not_read(operation):
    import gc
    import weakref

    holder = [np.arange(3.0)]
    refs = []

    def f(x):
        c = holder.pop()
        refs.append(weakref.ref(c))
        y = operation(x, c)
        del c
        return y.sum()

    records, _ = _records(f, np.ones(3))
    gc.collect()
    assert records and refs[0]() is None


def _undo_kinds(f, *args):
    return [r.undo_kind for r in mutad.make_tape(f, *args).records if r.undo_kind]


def _scaled_five_times(u, v):
    for _ in range(5):
        u *= v
    return u.sum()


def test_a_small_write_is_copied_a_large_one_inverted():
    """Under the restore policy a write of at most SMALL_WRITE bytes is checkpointed: a copy
    that small costs less than the inverse and its check; large ones are inverted."""
    assert _undo_kinds(_scaled_five_times, np.ones(8), np.full(8, 2.0)) == ["checkpoint"] * 5
    assert _undo_kinds(_scaled_five_times, np.ones(10_000), np.full(10_000, 2.0)) == \
        ["inverse"] * 5
    u, v = np.ones(8), np.full(8, 2.0)
    assert mutad.gradient(_scaled_five_times, u, v)[0].tolist() == [32.0] * 8
    assert u.tolist() == [1.0] * 8


def test_small_copies_stop_at_their_allowance(monkeypatch):
    monkeypatch.setattr(mutad.core.tape, "SMALL_COPIES", 3 * 64)  # three writes of 8 float64
    assert _undo_kinds(_scaled_five_times, np.ones(8), np.full(8, 2.0)) == \
        ["checkpoint"] * 3 + ["inverse"] * 2


def test_a_write_read_by_a_plain_view_of_its_target_is_checkpointed(inverting):
    """``x += v`` where ``v`` is the caller's plain view of ``x`` itself (a closure's): the write
    changes ``v`` too, so an inverse (``x -= v``) would read the new values. The write is
    saved instead (``inplace.apart_from``); the gradient takes ``v`` for the constant it was
    when read, and the caller's bytes come back."""
    x = np.linspace(0.3, 2.3, 6)
    before = x.copy()
    v = x[::-1]

    def f(x):
        x += v
        return (x * x).sum()

    assert _undo_kinds(f, x) == ["checkpoint"]
    assert np.array_equal(x, before)
    assert mutad.gradient(f, x)[0].tolist() == (2.0 * (before + before[::-1])).tolist()
    assert x.tobytes() == before.tobytes()


def _stencil(u):
    u = u.copy()
    for _ in range(3):
        u[1:-1] += 0.25 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u * u)


def test_a_saved_write_is_one_record_traced_and_replayed(monkeypatch):
    """A small write, whose bytes are saved, is recorded as one kind of record by tracing and
    by the replay of its recording, reversed by that record's own reverse: the same
    gradient, bit for bit."""
    reversed_ = []
    reverse = SavedWrite.reverse
    monkeypatch.setattr(SavedWrite, "reverse",
                        lambda self, shadows: (reversed_.append(self), reverse(self, shadows)))
    u = np.sin(np.linspace(0, 3, 9))
    records, _ = _records(_stencil, u)
    assert [type(r) for r in records].count(SavedWrite) == 3
    traced = mutad.grad(_stencil)(u)
    assert len(reversed_) == 3
    compiled = mutad.grad(_stencil, replay=True)
    compiled(u)
    assert compiled(u).tobytes() == traced.tobytes()
    # The replay's interpreted steps (a first replay compiles its blocks: none here)
    from mutad.engines import replay
    monkeypatch.setattr(replay, "with_blocks", lambda steps, *rest: steps)
    g = mutad.grad(_stencil, replay=True)
    g(u)  # (records, as tracing's engine records for the recording)
    del reversed_[:]
    replayed = g(u)
    assert len(reversed_) == 3 and all(type(r) is SavedWrite for r in reversed_)
    assert traced.tobytes() == replayed.tobytes()


def _raising_scale(x, mode):
    u = x.copy()
    with np.errstate(over=mode):
        try:
            u[1:] *= 1e300
        except FloatingPointError:
            pass
    return np.sum(np.sin(u[:2]))


def test_a_saved_write_that_raises_after_writing_is_recorded_and_undone():
    """Under np.errstate(over="raise") NumPy raises after it wrote: f may catch it and go on,
    and the write is recorded all the same (its factor reaches the gradient, the copy's
    bytes come back)."""
    x = np.array([0.5, 1e-300, 1e10, 2.0])
    before = x.copy()
    quiet = mutad.gradient(_raising_scale, x, "ignore", argnums=0)
    raised = mutad.gradient(_raising_scale, x, "raise", argnums=0)
    assert raised.tobytes() == quiet.tobytes() and raised[1] == np.cos(1.0) * 1e300
    assert x.tobytes() == before.tobytes()
