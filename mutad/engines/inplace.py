"""The traced engine's writes: every write into a traced array is recorded here.

``record_write`` is the one in-place path, the traced engine's and the replay's: it decides how
the overwritten bytes will be put back from what the write offers (``writes.decide_undo``),
saves the caller's bytes before their first write (``Tape.before_write``), writes, keeps the
constants the record reads unchanged, and records a ``tape.Write``; ``record_element_write``
takes the same steps for a scalar loop's assignment of one element, less those that cannot
apply to it, recorded as an ``elementwise.ElementWrite``, and ``record_saved_write`` for an
elementwise write whose bytes are saved, recorded as a :class:`SavedWrite`: each the record
the replay of a recording makes of its write too.
Around them: the checks of a destination (``check_destination``, ``writes_into``,
``overlaps``); which operands of an elementwise write are its target, or lie over it
(``target_position``, ``apart_from``); writes into constants a record has read (``write_constant``, whose record the replay's makes
too: ``record_constant_write``; and ``on_constants``, a call on constants alone, which may
write into them); and writes that copy elements (``copy_into``),
recorded as the gather NumPy performed, which it is asked on integer twins of the operands.

How a write is undone is decided a layer below (``writes``, which forward mode's checks of a
destination share); this module, reverse mode's own, builds on the tape and the traced array
(``reverse``). The elementwise writes (``out=``, augmented and plain assignment:
``operations.WritePlan``), the in-place rules (``operations``) and ``x[key] = value``
(``tracing.setitem``) all come here.
"""


import numpy as np

from .arraylike import settled, untraced_write
from ..core.devices import beside, is_device, namespace, ufunc_at
from ..core.debug import SKIPPED, from_user_line
from ..core.errors import MutadError, UnsupportedOperationError
from .recompute import FEW_BYTES, CurrentRegion, Held, Lazy, Rebuild, redone, written
from .reverse import (AliasRead, Traced, active, carries, constant_result, innermost, keep, locate,
                      place_of, recipe, values_at)
from ..core.shadows import Buffer, Place
from ..core.tape import SMALL_WRITE, Write
from .elementwise import ElementWrite, write_cotangents
from ..core.views import (address, byte_span, may_share, memory, real_part_if,
                          strided, wrapped, writeable)
from .writes import (raised_after_writing, SAVED, UNREAD, VERIFYING, CopyBack, Destination,
                     Reads, Undo, Undos, at_target, check_region, copy_back, decide_undo,
                     over_target, saving, unknown_write_refused,
                     written_in_place_before_raising)


def write_constant(tape, target, key, write, primitive=None):
    """Run ``write()``, which writes constants into ``target[key]`` (``key`` None: all of it),
    a constant of ``tape``. If a record already read its buffer, the bytes about to be
    overwritten are saved and put back in the replay, so that record reads them again."""
    if tape.recorder is not None and tape.recorder.ready:
        tape.recorder.outside("a write into an array allocated in the function")
    tape.before_write(target.buffer.key)  # an argument's: its caller's bytes saved first
    if not target.buffer.read:
        written(target.buffer)
        write()
        return
    record_constant_write(primitive, target, target.value, key, write)


def record_constant_write(primitive, target, value, key, write, tape=None):
    """:func:`record_write` of ``write()``, which writes constants into ``value[key]`` (None:
    all of it) of ``target`` (a traced array, or a :class:`writes.Destination` on ``tape``),
    an array a record read: its bytes there saved and put back, its cotangent passed through
    (the values written get none). The traced engine's (``write_constant``) and the replay's
    (``replay.ConstantWrite``)."""
    record_write(primitive, target, write, undo=Undo(save=saving(value, key)), taken=False,
                 tape=tape)


def on_constants(call, args, kwargs, tape, written=()):
    """``call(*args, **kwargs)`` where every array of ``tape`` among the arguments is a
    constant: run on their values, as on plain arrays, recording nothing but the undoing of
    writes into constants a record has read (``written``: the arguments it may write)."""
    if tape.recorder is not None and tape.recorder.ready:
        return tape.recorder.on_constants(call, args, kwargs, tape, written)
    for target in written:
        if type(target) is Traced and target.tape is tape and target.buffer.constant:
            write_constant(tape, target, None, lambda: None)
    # (called from the user's line: a warning NumPy issues at its caller's frame names that
    # line, np.nanmean's "Mean of empty slice", as NumPy's own call would)
    y = from_user_line(call, *values_at(args, tape),
                       **{k: values_at(v, tape) for k, v in kwargs.items()})
    return constant_result(y, tape, (*args, *kwargs.values()))


def target_position(target, inputs):
    """``writes.at_target`` of an elementwise write into the traced array ``target``: among
    the operands traced in its buffer."""
    buffer = target.buffer
    return at_target(target.value, [x.value if type(x) is Traced and x.buffer is buffer
                                     else None for x in inputs])


def apart_from(target, inputs, position):
    """Whether no operand of an elementwise write but its target's own (at ``position``) lies
    over the target's memory (``writes.over_target``), traced or a plain array viewing an
    argument's: such an operand would read the written values, not those an inverse needs."""
    buffer = target.buffer
    return not over_target(target.value, [
        x.value if type(x) is Traced and x.buffer is buffer else x if type(x) is np.ndarray
        else None for x in inputs], position)


def check_destination(target, what, key=None):
    """``writes.check_region`` for a write into the traced array ``target`` (at ``key``); a
    destination read-only because mutad froze an array sharing its memory says so."""
    value = target.value
    if not writeable(value):
        alias = target.tape.guards.get(target.buffer.key)
        if type(alias) is AliasRead:
            alias()
        check_region(value, what, target.whole)
    elif not target.whole and value.ndim:  # (writeable: check_region's one other question,
        check_region(value, what, key=key)   # which a 0-d view's one element never raises)


def record_write(primitive, target, write, reads=None, undo=SAVED, *, pullback=None, state=None,
                 settings=None, taken=True, key=None, undo_first=True, tape=None, decided=None,
                 rebuilt=None):
    """The one in-place path, the traced engine's and the replay's: ``write()`` overwrites
    (part of) ``target``, an array of its tape or a :class:`writes.Destination` on ``tape``
    (or several: a list, the offers of ``undo`` lists too), and the write is recorded as a
    ``tape.Write`` of ``primitive`` with ``settings``.

    In order: decide how the overwritten bytes will be put back from what ``undo`` (an
    :class:`writes.Undo`) offers (``writes.decide_undo``), and tell ``decided`` (if given) the
    kinds decided; save the caller's bytes before their first write (``Tape.before_write``);
    write; keep the constants the record reads unchanged (``reads``, a :class:`writes.Reads`:
    the operands, and what the pullback and the inverse read of them; None: the record reads
    none); record. The reverse pass reads and zeroes the cotangent of the new values at
    ``taken`` (the target's place, at ``key`` within it; ``taken=False``: the target's
    cotangent passes through), undoes the write and runs ``pullback(record, shadows, dy)``
    (before the undo if not ``undo_first``), which reads ``state`` beside what the record
    keeps. Under a memory budget, a write that would be saved is instead rebuilt in the
    reverse pass (``recompute.Chain``) where ``undo.redo`` can do it again from what it read
    (unless it writes a few bytes: ``recompute.FEW_BYTES``);
    in the replay of a recording under a budget, ``rebuilt`` (a ``recompute.Rebuild`` of the
    replay's chain) is the undo of a write that would be saved.
    A long elementwise write into one target whose inverse is chosen is done by the inverse's
    verification, a piece at a time while each piece is in cache (``writes.VERIFYING``), in
    place of ``write()``. A write into one target of more than ``tape.SMALL_WRITE`` bytes
    whose overwritten bytes nothing will read (:func:`unread`) is undone by nothing
    (``writes.UNREAD``): neither inverted (nor verified) nor copied. Returns the record.
    """
    several = type(target) is list
    if several:
        targets = [t if type(t) is Destination else _destination(t) for t in target]
        inverses = undo.inverse
    else:  # (one target, nearly every write: no list to build twice)
        targets = [target if type(target) is Destination else _destination(target)]
        inverses = (undo.inverse,)
    inputs, values = (reads.inputs, reads.values) if reads is not None else ((), None)
    if tape is None:
        tape = (target[0] if several else target).tape if targets else innermost(inputs)
    undos, kinds = [], []
    recomputation = tape.recomputation
    rebuilding = (undo.redo is not None and not several and undo.save is None
                  and recomputation is not None and recomputation.budget is not None)
    if rebuilding:
        redo_inputs = redone(recipe(inputs, values, None, tape), values)
    for t, inverse in zip(targets, inverses, strict=True):
        save = undo.save or (lambda t=t: CopyBack(t.value, at=t.find))
        if t.value.nbytes <= FEW_BYTES:
            pass  # (saved, and joins the chain of its array below)
        elif rebuilding:
            save = lambda t=t: (recomputation.chain(t.place, redo_inputs)  # noqa: E731
                                or CopyBack(t.value))
        elif rebuilt is not None:
            save = lambda: rebuilt  # noqa: E731
        buffer = t.buffer if t.buffer is not None else t.unseen
        chosen, kind = decide_undo(
            tape, inverse, save, t.key, t.whole and undo.save is None,
            t.value.nbytes if undo.save is None and inverse is not _rule_restores else None,
            undo.growth, writing=not several,
            unread=None if several or buffer is None or t.value.nbytes <= SMALL_WRITE
            else lambda t=t, buffer=buffer: unread(tape, buffer, t.value, (
                None if reads is None else reads.kept, state, settings, pullback)))
        undos.append(chosen)
        kinds.append(kind)
    joined = None
    if rebuilding and kinds[0] != "rebuild":
        # undone by its inverse: the chain of its target, if any, goes on through it
        joined = recomputation.chain(targets[0].place, redo_inputs, undone=True)
    if decided is not None:
        decided(kinds)
    if tape.anomaly is not None:
        finite_before = tape.anomaly.before_write([t.value for t in targets], values)
    for t, kind in zip(targets, kinds, strict=True):
        tape.before_write(t.key)
        if recomputation is not None:
            recomputation.overwriting(t.buffer, kind in ("checkpoint", "rebuild"))
            if not several:
                recomputation.write(t.buffer)
    raised = None
    if not several and kinds[0] == VERIFYING:  # the inverse writes as it is verified
        undos[0], kinds[0] = undos[0].write_verified(tape, targets[0].key)
    else:
        try:
            write()
        except Exception as error:
            if not raised_after_writing(error):
                raise
            # Under np.errstate(...="raise") NumPy raises after writing its result: the write
            # happened, and f may catch the error and go on, so it is recorded all the same;
            # unless an operand overlaps the target in another layout, where NumPy may have
            # computed into a copy it dropped
            if reads is not None and not all(written_in_place_before_raising(t.value,
                                                                            reads.values)
                                             for t in targets):
                raise unknown_write_refused(primitive) from error
            raised = error
    for t in targets:
        if t.buffer is not None:
            written(t.buffer)
    held, named = None, []
    if values is not None:
        held = reads.kept
        if reads.inverse_reads and ("inverse" in kinds or "partial" in kinds):
            if held is None:
                held = [None] * len(values)
            for i in reads.inverse_reads:  # into ``kept`` itself, which an inverse may read
                held[i] = values[i]
        named = reads.named
        if named is None:
            named, held = _named(tape, inputs, values, held, reads.recompute)
    places = [t.place for t in targets]
    record = Write(primitive, named, settings, held, state, pullback,
                   tuple(places) if several else places[0],
                   undos[0] if len(undos) == 1 else Undos(undos),
                   kinds[0] if len(kinds) == 1 else ", ".join(sorted(set(kinds))) or "none",
                   places[0] if taken else None, key,
                   undo_first)
    tape.record(record, SKIPPED + 1)  # called by the engine's writes, called by the engine
    if tape.anomaly is not None:
        tape.anomaly.wrote(record, [t.value for t in targets], finite_before)
    if rebuilding and (type(record.undo) is Rebuild or joined is not None):
        (joined or record.undo).chain.wrote(redo_inputs, places[0], undo.redo)
    if raised is not None:
        raise raised
    return record


UNREAD_SCAN = 16
"""The most records :func:`unread` looks back over; past them it proves nothing."""

UNREAD_NODES = 400
"""The most objects :func:`unread` looks into per write; past them it proves nothing."""


def unseen(tape, buffer, value, recording=False):
    """Whether nobody outside the differentiation sees the array ``value`` of ``buffer``, of
    ``tape``, nor will read back what a write into it overwrites: a temporary of the tape, not
    an argument's or anything it holds for good (``Held``), not a constant (which may have been
    handed out as a plain array), and no plain array was handed out on this tape at all; no
    other differentiation encloses it, no anomaly detection or memory budget redoes its
    writes, no recomputation reads it (``Buffer.read``, a stand-in for it), and no replay
    records it (``recording``: the recorder of ``tape`` asks, for the replays of its
    recording, which ask the rest again on their own tapes)."""
    recomputation = tape.recomputation
    return not (buffer.constant or buffer.read or type(buffer.ref) is Held or tape.plain_handed
                or tape.outer is not None or (tape.recorder is not None and not recording)
                or tape.anomaly is not None or type(value) is not np.ndarray
                or (recomputation is not None and (recomputation.budget is not None
                                                   or buffer.key in recomputation.lazy)))


def unobserved(tape):
    """Whether, while the reverse pass of ``tape`` runs, only its own records read the memory
    of its buffers: no enclosing differentiation, anomaly detection or memory budget, which
    read them as the pass goes (:func:`unseen`)."""
    recomputation = tape.recomputation
    return tape.outer is None and tape.anomaly is None and (
        recomputation is None or recomputation.budget is None)


def unread(tape, buffer, value, own):
    """Whether nothing will read the bytes a write into ``buffer`` (its array ``value``, of
    ``tape``) is about to overwrite, so that the write needs no undo (``writes.UNREAD``): a
    proof, never a guess, and False wherever it cannot be had.

    Nobody outside the differentiation sees the array (:func:`unseen`; in the replay of a
    recording, asked of the recorded buffer, whose records the replay's name: it was when the
    write was recorded, too: ``Destination.unseen``). No record reads its current values: the
    records made since it got them (since the record that made it, or since the last write
    into it, whose undo must be ``UNREAD`` itself: an inverse computes back from the values it
    left), and this write's own (``own``: what its record keeps, its state, settings and
    pullback), hold no array that may share its memory and do not name its buffer beyond
    their operands and results (:func:`_reads_none`); a record this cannot look into (a
    replay's compiled block, its tuple) proves nothing."""
    if not unseen(tape, buffer, value):
        return False
    budget = [UNREAD_NODES]
    if not _holds_none(own, value, buffer, budget):
        return False
    records = tape.records
    for i in range(len(records) - 1, max(len(records) - 1 - UNREAD_SCAN, -1), -1):
        record = records[i]
        if type(record) is tuple or not _reads_none(record, value, buffer, budget):
            return False
        written = record.written
        if written is not None:
            if any(place.buffer is buffer for place in (
                    written if type(written) is tuple else (written,))):
                # the last write into it: undone by nothing, it reads nothing of it either
                return record.undo is UNREAD
        elif any(place.buffer is buffer for place in record.outputs):
            return True  # the record that made it, which reads none of it
    return False


_NAMES = frozenset(("inputs", "output", "written", "taken", "where", "primitive", "undo_kind",
                    "key", "undo_first"))
"""The slots of a record that name places (its operands, its results, what it wrote) or
describe it, rather than hold values its reverse pass reads (:func:`_reads_none`)."""


def _reads_none(record, value, buffer, budget):
    """Whether the reverse pass of ``record`` (a record of mutad's: its slots) reads nothing
    of ``value``, the array of ``buffer``: its values (:func:`_holds_none`), the undo of a
    write into ``buffer`` aside (which :func:`unread` asks of itself)."""
    kind = type(record)
    if not (getattr(kind, "__module__", "") or "").startswith("mutad.") \
            or hasattr(record, "__dict__"):
        return False
    for cls in kind.__mro__:
        for name in getattr(cls, "__slots__", ()):
            x = getattr(record, name, None)
            if name in _NAMES or (name == "undo" and x is UNREAD):
                if not _holds_none(x, value, None, budget):
                    return False
            elif not _holds_none(x, value, buffer, budget):
                return False
    return _holds_none(getattr(record, "pullback", None), value, buffer, budget)


_LEAVES = frozenset((type(None), bool, int, float, complex, str, bytes, np.dtype, np.ufunc,
                     type, np.float64, np.float32, np.int64, np.intp, np.bool_,
                     np.complex128, slice, type(Ellipsis), type(_reads_none.__code__)))


def _holds_none(x, value, buffer, budget):
    """Whether ``x`` holds, at any depth this can follow, no array that may share memory with
    ``value`` and names no place of ``buffer`` (None: places are names, not reads): lists,
    tuples, sets, dicts, arrays, mutad's own objects (their slots) and functions of mutad's
    (their closures) are looked into, a rule made at import holds no value; anything else, a
    stand-in a recomputation resolves (``recompute.Lazy``) or a traced array, or more than
    ``budget[0]`` objects in all, proves nothing."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    kind = type(x)
    if kind in _LEAVES:
        return True
    if kind is np.ndarray:
        return not np.may_share_memory(x, value)
    if kind is Buffer:
        return x is not buffer
    if kind is Place:
        return x.buffer is not buffer
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return all(_holds_none(item, value, buffer, budget) for item in x)
    if kind is dict:
        return all(_holds_none(item, value, buffer, budget) for item in x.values())
    if kind is Lazy or kind is Traced:
        return False
    if kind is type(_holds_none):
        return (x.__module__ or "").startswith("mutad.") and _holds_none(
            (x.__defaults__, *(cell.cell_contents for cell in x.__closure__ or ())),
            value, buffer, budget)
    module = getattr(kind, "__module__", "") or ""
    if module == "mutad.core.registry":
        return True  # a rule, made once at import, holds no value of a differentiation
    if not module.startswith("mutad.") or hasattr(x, "__dict__"):
        return False
    return all(_holds_none(getattr(x, name, None), value, buffer, budget)
               for cls in kind.__mro__ for name in getattr(cls, "__slots__", ()))


def _named(tape, inputs, values, held, recompute):
    """``(named, held)``: the operands ``inputs`` (their ``values``) of a record of ``tape`` as
    its recipe names them (``reverse.recipe``), the constants among those it keeps (``held``,
    None where it keeps none) marked read, and what it keeps, with stand-ins for the values the
    reverse pass recomputes where ``recompute`` (``ReverseTape.hold``)."""
    for i, x in enumerate(inputs):
        if held is not None and held[i] is not None and not (
                type(x) is Traced and x.tape is tape and not x.buffer.constant):
            keep(tape, x, values[i])
    named = recipe(inputs, values, held, tape)
    return named, tape.hold(held, named) if recompute else held


class SavedWrite:
    """The record of an elementwise write ``ufunc(*values, out=target)`` whose overwritten
    bytes are saved (``Tape.copied``: no inverse on offer, or a small write) and whose
    partials read neither the values it wrote nor a decision of the rule (a plan that
    ``saves``): the one record of such a write, the traced engine's
    (:func:`record_saved_write`) and the replay's (``replay.ElementwiseWrite``), reversed by
    :meth:`reverse` in both, whose lines a compiled block runs in its place
    (:meth:`write_lines`, :meth:`back_lines`). It keeps what a ``tape.Write`` with a
    ``writes.CopyBack`` undo and ``elementwise.write_pullback`` keep, in one object: the
    operands' places (``inputs``), the rule's plan for the traced ones (``state``, None: no
    gradient reaches the values written), the place written, the values the partials read
    (``kept``), the target (``region``, or ``find()`` finds it in the reverse pass:
    ``recompute.current_region``, None once nothing reads it) and its bytes before the write
    (``saved``)."""

    __slots__ = ("primitive", "inputs", "state", "written", "kept", "region", "find", "saved",
                 "where")

    settings = key = None
    outputs = ()
    undo_kind = "checkpoint"
    undo_first = True

    def __init__(self, primitive, inputs, state, written, kept, region, find, saved):
        self.primitive = primitive
        self.inputs = inputs
        self.state = state
        self.written = written
        self.kept = kept
        self.region = region
        self.find = find
        self.saved = saved
        self.where = None

    line = Write.line
    taken = ElementWrite.taken  # (the place written, whose cotangent the reverse pass takes)
    undo = ElementWrite.undo

    def __call__(self):
        region = self.region if self.find is None else self.find()
        if region is not None and self.saved is not None:
            # (else a temporary nothing reads any more, or bytes nothing reads before an
            # earlier write's undo puts them back: ``blocks.Code.rewrite``)
            copy_back(region, self.saved)

    def lent(self):
        """The saved copy, put back, let go of: for the pullback to lend its memory on."""
        saved, self.saved = self.saved, None
        return saved

    def reverse(self, shadows):
        """What ``Write.reverse`` does with a checkpoint's undo and ``write_pullback``: the
        cotangent of the values written taken, the bytes copied back, and the cotangents of
        the operands made from it, the copy's memory lent to them (``write_cotangents``)."""
        dy = shadows.take(self.written)
        self()
        if dy is None or self.state is None:
            self.saved = None
            return
        SavedWrite.cotangents(self, shadows, dy)

    @staticmethod
    def cotangents(record, shadows, dy):
        """Its pullback: the cotangents of the operands, from ``dy``."""
        rule, traced = record.state
        write_cotangents(shadows, rule, dy, None, record.inputs, record.kept, traced,
                         record.lent())

    @property
    def pullback(self):
        return None if self.state is None else SavedWrite.cotangents

    @staticmethod
    def write(tape, key, ufunc, values, target):
        """``ufunc(*values, out=target)`` into the buffer named ``key`` of ``tape``, as its
        record needs it done, the traced engine's (:func:`record_saved_write`) and the
        replay's: a copy of ``target`` first, then ``Tape.before_write``, then the write (the
        steps of :meth:`write_lines`). Returns the copy and the FloatingPointError NumPy
        raised after writing (``record_write``: the write is recorded, then raised), or
        None."""
        saved = target.copy()
        tape.before_write(key)
        try:
            ufunc(*values, out=target)
        except Exception as error:
            if not raised_after_writing(error):
                raise
            if not written_in_place_before_raising(target, values):
                raise unknown_write_refused(ufunc) from error
            return saved, error
        return saved, None

    @staticmethod
    def write_lines(ufunc, values, target, saved, before):
        """The lines of a compiled block that do the write and keep what its record keeps
        (:meth:`write`'s steps): ``saved``, a copy of ``target``, then ``before``
        (``Tape.before_write``'s lines), then ``ufunc(*values, out=target)`` (names the block
        binds)."""
        return [f"{saved} = {target}.copy()", *before,
                f"{ufunc}({', '.join(values)}, out={target})"]

    @staticmethod
    def back_lines(take, put_back, target, saved):
        """The lines of a compiled block that begin :meth:`reverse`: ``dy``, the cotangent
        of the values written (``take``, ``Shadows.take``'s lines), and the bytes put back
        (``put_back``, ``writes.copy_back`` as the block binds it)."""
        return [*take, f"{put_back}({target}, {saved})"]


def record_saved_write(primitive, ufunc, tape, destination, inputs, values, kept, state,
                       invertible):
    """:func:`record_write` of the write ``ufunc(*values, out=destination.value)`` of a plan
    that ``saves`` (``operations.WritePlan``), where ``Tape.copied`` saves its bytes (with an
    inverse on offer if ``invertible``), as the :class:`SavedWrite` it records then, in the
    order ``record_write`` takes its steps, less those that ask what the write does not
    have. Returns the record; None, with nothing done, where the tape inverts the write, a
    memory budget may rebuild it, anomaly detection watches it, a replay's recording reads
    the engine's record of it (``Recorder.ufunc``), or the record of the value it writes may
    fold into it (``elementwise.fold_written``): ``record_write`` then records it."""
    recomputation = tape.recomputation
    target = destination.value
    if tape.recorder is not None or tape.anomaly is not None or (
            recomputation is not None and recomputation.budget is not None) or (
            len(values) == 1 and getattr(values[0], "shape", None) == ()) or not tape.copied(
                invertible, target.nbytes, destination.key, destination.whole):
        return None
    find = destination.find
    buffer = destination.buffer
    if recomputation is not None:  # (checkpointed: ``overwriting`` pins nothing)
        recomputation.write(buffer)
    saved, raised = SavedWrite.write(tape, destination.key, ufunc, values, target)
    written(buffer)
    named, kept = _named(tape, inputs, values, kept, True)
    record = SavedWrite(primitive, named, state, destination.place, kept,
                        target if find is None else None, find, saved)
    tape.record(record, SKIPPED + 1)  # called by the engine's writes, called by the engine
    if raised is not None:
        raise raised
    return record


def record_element_write(primitive, ufunc, tape, buffer, region, place, inputs, values, state,
                         skip=SKIPPED + 1):
    """:func:`record_write` of the assignment ``ufunc(*values, out=region)``
    (``np.positive``), with no inverse on offer and a pullback that keeps none of its
    ``inputs``, into ``region``, one element (a 0-d view, at ``place``) of a NumPy array whose
    memory is ``buffer``, traced by ``tape``: a scalar loop's ``x[i, j] = v``
    (``operations.assign``, ``tracing.setitem``), recorded as the
    :class:`elementwise.ElementWrite` the replay makes of it too. Its steps in their order,
    less those that ask what such a write cannot have: it is checkpointed, as ``decide_undo``
    decides for any write without an inverse (so no other place is pinned:
    ``Recomputation.overwriting``), of a view, not all of its buffer (so ``Tape.copied`` has no
    drift to end), and it keeps no operand. Returns the record; None, with nothing done, where
    a memory budget would rebuild it or anomaly detection watches it: ``record_write`` then
    records it. Its callers ask what else it needs: the element is not all of its buffer, and
    ``region`` is a NumPy array. ``skip``: the frames ``debug.caller`` skips (by default, as
    called by the engine's writes, called by the engine)."""
    recomputation = tape.recomputation
    if tape.anomaly is not None or (recomputation is not None
                                    and recomputation.budget is not None):
        return None
    # (an argument's buffer, the common case: nothing to hold, as ``Recomputation.write`` finds)
    if recomputation is not None and type(buffer.ref) is not Held:
        recomputation.write(buffer)
    saved = ElementWrite.write(tape, buffer.key, ufunc, values, region)
    written(buffer)
    if len(inputs) == 1 and type(inputs[0]) is Traced and inputs[0].tape is tape:
        value = inputs[0]  # (``recipe`` of the one traced value written: its place)
        inputs = (value.buffer if value.whole else place_of(value),)
    else:
        inputs = recipe(inputs, values, (None,) * len(inputs), tape)  # (it keeps none)
    record = ElementWrite(primitive, inputs, state, place,
                          place if buffer.ref is not None and buffer.c_contiguous else region,
                          saved)  # (``_follows``)
    tape.record(record, skip)
    return record


def _destination(target):
    """The :class:`writes.Destination` of a write into the traced array ``target``."""
    place = place_of(target)
    return Destination(target.value, target.buffer.key, target.whole, place,
                       _finder(target, place), target.buffer)


def _finder(target, place):
    """What the undo of a write into the traced ``target``, at ``place``, calls to find it
    then (None: the undo holds ``target``)."""
    return CurrentRegion(place) if _follows(target) else None


def _follows(target):
    """Whether the undo of a write into the traced ``target`` finds it then, through its
    buffer's reference (``recompute.Written``), where one follows the buffer (a C-contiguous
    one: ``recompute.view`` maps views of those), so that the undo alone does not keep a
    temporary alive."""
    return target.buffer.ref is not None and target.buffer.c_contiguous


def _rule_restores():
    """The undo of an in-place rule that restores its own arguments in ``back``."""


# ----------------------------------------------------------------------------------------------
# Indexing and assignment (``tracing.setitem``, the rules that write): the destination


def writes_into(call, target, *values):
    """Whether ``call``, writing ``values`` into ``target``, writes into an array a
    differentiation traces; refuses to write a traced value into an array mutad does not trace."""
    if len(values) == 1 and type(target) is Traced and type(values[0]) is Traced \
            and values[0].tape is target.tape:  # (one value of the target's tape: x[i] = v)
        if not values[0].buffer.constant:
            target.buffer.constant = False
        return True
    tape = innermost((target, *values))
    if carries(values, tape):
        if type(target) is not Traced or target.tape is not tape:
            if isinstance(target, np.ndarray) and target.dtype.kind in "iub":
                # NumPy's cast to integers carries no derivative: the values written, as an
                # assignment of them (``o[...] = x * 4``) writes them
                settled(values, f"{call} of differentiated values into an integer array")
                return False
            raise untraced_write(call, target)
        target.buffer.constant = False  # a constant written with traced values is traced
    return type(target) is Traced


def overlaps(target, value, region=None):
    """Whether the memory of the array ``value`` may overlap ``region`` of ``target`` (all of it
    by default): traced by this differentiation, by an enclosing one (whose arrays a nested
    one's arguments may be) or by none. (A traced value is told by ``wrapped`` first: asked
    ``isinstance``, its ``__class__`` looks for the caller's frame.) Asked of bytes, not of
    bounds (``may_share``): a write from a value that shares none of its target's (another
    column of one matrix) reads no element it writes, as NumPy's does, whatever the order of
    the writes, so its callers write it as a value apart, which is no copy of NumPy's."""
    return ((wrapped(value) or isinstance(value, np.ndarray) or is_device(value))
            and may_share(value, target.value if region is None else region))


# ----------------------------------------------------------------------------------------------
# Writes that copy elements: what NumPy does where the source overlaps the target or an index
# repeats


def _twins(target, source):
    """Integer arrays with the shapes and relative memory layout of the plain arrays ``target``
    and ``source`` (strides counted in items), over one scratch buffer: each element of
    ``source`` holds its C-order position in ``source``, memory outside it holds -1. Operands
    whose memory may overlap overlap there too; otherwise they lie side by side."""
    spans = [byte_span(a) for a in (target, source)]
    (target_low, target_count), (source_low, source_count) = spans
    if np.may_share_memory(target, source):
        size = target.itemsize
        if source.itemsize != size or (target_low - source_low) % size:
            raise UnsupportedOperationError(
                "a write whose source overlaps its target with a different item layout (a "
                "reinterpreted view): copy the source first (x[key] = v.copy()).")
        low = min(target_low, source_low)
        high = max(target_low + target_count * size, source_low + source_count * size)
        starts = ((target_low - low) // size, (source_low - low) // size)
        total = (high - low) // size
    else:
        starts, total = (0, target_count), target_count + source_count
    xp = namespace(target)  # on the device of a device array: the write runs there
    scratch = xp.full(total, -1, np.int64)
    twins = []
    for a, (low, _), start in zip((target, source), spans, starts, strict=True):
        first = start + (address(a) - low) // a.itemsize
        twins.append(strided(scratch, a.shape, scratch.dtype, first * scratch.itemsize,
                             tuple(s // a.itemsize * scratch.itemsize for s in a.strides)))
    twins[1][...] = xp.arange(source.size).reshape(source.shape)
    return twins


def _provenance(write, target, source):
    """Which elements ``write(target, source)`` changes in the plain array ``target``, and where
    each new value comes from, as NumPy itself does it (reading overlapping elements before or
    after writing them, keeping one of repeated indices): the same call runs on integer twins
    of the operands that hold the source's element positions. Returns a mask of the changed
    elements of ``target`` and, for each in C order, the C-order position of the element of
    ``source`` whose value it took, and the error the call raised after writing them (an index
    out of bounds that ``np.put`` meets after writing those before it), or None; an error
    raised before anything was written is raised."""
    target_twin, source_twin = _twins(target, source)
    before = target_twin.copy()
    raised = None
    try:
        write(target_twin, source_twin)
    except Exception as error:
        raised = error
    changed = target_twin != before
    if raised is not None and not changed.any():
        raise raised
    origins = target_twin[changed]
    if np.any(origins < 0):
        raise MutadError(
            "a write copied values that do not come from its source, so mutad cannot tell what "
            "it differentiates; copy the source first (x[key] = v.copy()).")
    return changed, origins, raised


def _indexable(a):
    """``a``, or its one-element 1-d view if it is 0-d, so element positions can index it."""
    return a.reshape(1) if a.ndim == 0 else a


def _elements(positions, shape):
    """The advanced index of the elements at C-order ``positions`` of an array of ``shape``
    (of its ``_indexable`` view)."""
    return np.unravel_index(positions, shape or (1,))


def _same_bits(a, b):
    """Whether the arrays ``a`` and ``b`` of one dtype hold the same bits (NaNs and signed
    zeros included)."""
    if a.itemsize > 8:
        if type(a) is np.ndarray:
            return a.tobytes() == b.tobytes()
        a, b = a.view(np.uint64), b.view(np.uint64)  # on a device: its words
        return bool(np.array_equal(a, b))
    bits = np.dtype(f"u{a.itemsize}")
    return np.array_equal(a.view(bits), b.view(bits))


def copy_into(primitive, target, value, write, settings):
    """``write(target, value)``, a NumPy call that copies elements of ``value`` into the traced
    ``target`` (assignment, copyto, put, place, putmask, put_along_axis), recorded as the gather
    NumPy performed: each changed element takes the cotangent back to the element of ``value``
    it came from. The changed elements are checkpointed: an inverse would read its own target.
    ``settings`` are the call's other arguments by name (indices, mask, mode): with
    ``primitive`` and the two inputs, the recipe of the write."""
    tape = active(target.tape)
    here = type(value) is Traced and value.tape is tape
    source = value.value if here else value
    layout = memory(source) if isinstance(source, np.ndarray) or wrapped(source) \
        or is_device(source) else beside(memory(target.value), np.asarray(source))
    changed, origins, raised = _provenance(write, memory(target.value), layout)
    checked = not (wrapped(target.value) or wrapped(source))
    if checked:
        expected = np.take(layout, origins)  # before the write, which may overwrite the source

    def checked_write():
        nonlocal raised
        if raised is None:
            write(target.value, source)
        else:  # NumPy raises after writing what the twins show: recorded, then raised to f
            try:
                write(target.value, source)
            except type(raised) as error:
                raised = error
            else:
                raise MutadError(f"NumPy raised {raised!r} on integer labels laid out as the "
                                 "operands, not on them, so mutad cannot tell what it wrote")
        if checked:
            written = target.value[changed]
            cast = real_part_if(written, expected).astype(written.dtype, copy=False)
            if not _same_bits(written, cast):
                raise MutadError(
                    "NumPy wrote other values than it wrote into integer labels laid out as the "
                    "operands, so mutad cannot tell which elements it copied; copy the source "
                    "first (x[key] = v.copy()) and remove repeated indices (np.unique).")

    shape = layout.shape
    source_place = locate(value, tape)
    if source_place is None or not origins.size:
        pullback = None  # a constant, or nothing written: nothing to keep for the replay
    else:
        if layout.size <= np.iinfo(np.int32).max:
            origins = origins.astype(np.int32)  # kept until the replay: half the memory

        def pullback(record, shadows, dy):
            # Several elements may come from one: each adds its share.
            ufunc_at(np.add, _indexable(shadows.of(source_place, like=dy)),
                      _elements(origins, shape), real_part_if(source_place, dy))

    record_write(primitive, target, checked_write,
                 Reads((target, value), (target.value, source), [None, None]),
                 Undo(save=lambda: CopyBack(target.value, changed)), pullback=pullback,
                 state=origins if pullback else None, settings=settings, key=changed)
    if raised is not None:
        raise raised
