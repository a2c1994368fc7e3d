"""Reverse mode's tape and its traced array, and what the traced engine does with values: the
ground every path of the engine stands on (``tracing`` lists the paths).

:class:`ReverseTape` is the tape of one reverse-mode differentiation: its level, the
differentiation it is nested in, and what the engine keeps beside its records. :class:`Traced`
is the array it follows, a plain float ndarray (``value``) and the memory whose shadow it uses
(``buffer``, a :class:`shadows.Buffer`), with its state and conversions; the methods that send
NumPy's calls, indexing and operators down the paths are ``tracing``'s, installed on it there.

Beside them, the helpers every path shares: which tape an operation belongs to (``innermost``,
``active``); the untraced arrays a record reads, kept unchanged while the tape lives
(``freeze``, ``keep``, ``check_constants``, ``thaw``), and those that view the memory of an
argument a differentiation traces (``check_alias``, ``AliasRead``); results wrapped as fresh
buffers, views of their inputs or constants (``fresh``, ``view_of``, ``constant``,
``constant_result``); where a record names its inputs without holding their memory
(``locate``, ``place_of``, ``recipe``); and how cotangents are added to the shadows
(``add_cotangents``). They make and recognise traced arrays and call no path: the writes
(``inplace``), the operations (``operations``) and the dispatch (``tracing``) build on this
module, which imports none of them.
"""

import operator
import struct
import sys
import threading
import weakref
import zlib

import numpy as np

from ..core.allocation import (PLAIN_ACCESS, Preexisting, called_by_name, plain_memory,
                               without_derivative)
from ..core.arguments import no_full_collections
from .arraylike import (ArrayMethods, alias_read_after_write, alias_written,
                        alias_written_after_read, bytearray_refused, conversion_error,
                        numpy_value, weak_value)
from ..core.devices import is_device
from ..core.debug import (ERRORS, SKIPPED, Warnings, anomaly, at_user_lines, caller, errors_as,
                          gradient_errors)
from ..core.errors import ConstantModifiedError, UnsupportedArrayError, plain_copy_missed
from ..core.levels import ACTIVE, LEVELS, escaped
from ..core.levels import ended as any_ended
from .elementwise import (ElementWrite, Elementwise, ElementsRead, Gathered, fold_reads,
                          fold_written, reverse_elementwise, reverse_folded)
from .products import CHUNK
from .recompute import SMALL, Held, Recomputation, Written, flat, small, track
from ..core.shadows import Buffer, Place, result_buffer, shared
from ..core.tape import Absent, OneOutput, Tape, Write
from ..core.trees import unsupported_array
from ..core.views import (address, itself, made_writable, may_share, owner, owner_view,
                          strided, wrapped, writeable)


class _Reversing(threading.local):
    """The tapes whose reverse pass runs in this thread, innermost last: a pullback that runs
    user code again finds there the arrays mutad keeps read-only (``session.kept_state_writable``)."""

    def __init__(self):
        self.tapes = []


REVERSING = _Reversing()


class reversing(gradient_errors):
    """The block of ``tape``'s reverse pass, which runs in this thread (``REVERSING``), with
    the garbage collector's full collections held off (``no_full_collections``) and its
    floating-point errors labelled (``gradient_errors``, whose warnings go to ``writer``): one
    block for the three, always entered together. (A class, not a generator: cheaper to enter
    and leave, once per reverse pass.)"""

    __slots__ = ("tape",)

    def __init__(self, tape, writer):
        self.tape = tape
        self.writer = writer

    def __enter__(self):
        _COLLECTIONS.__enter__()
        REVERSING.tapes.append(self.tape)

    def __exit__(self, kind, error, traceback):
        REVERSING.tapes.pop()
        _COLLECTIONS.__exit__(kind, error, traceback)
        return super().__exit__(kind, error, traceback)


_COLLECTIONS = no_full_collections()


class ReverseTape(Tape):
    """The tape of one reverse-mode differentiation, and what the engine keeps beside its
    records: its level, the differentiation it is nested in (``outer``, None at the top), the
    untraced arrays its records read (``freeze``), how it finds the user's line that ran an
    operation (``caller``: ``debug.caller``, or ``debug.nowhere`` for a replay's tape, whose
    program was recorded with its lines) and, under ``debug.detect_anomaly``, the checks it
    makes (``anomaly``; else None)."""

    __slots__ = ("level", "outer", "frozen", "read_views", "sums", "arguments", "recomputation",
                 "places", "caller", "lines", "anomaly", "originals", "heard", "errors",
                 "errors_of", "adopter", "locked", "plain_handed")

    def __init__(self, policy, outer, memory=None, recomputes=True):
        super().__init__(policy)
        self.level = next(LEVELS)
        self.outer = outer
        self.frozen = {}  # untraced arrays records read, kept read-only while the tape lives
        self.read_views = False  # whether read-only views of read constants were handed out
        # The memory of traced arrays conversions handed out as plain arrays, by the id of its
        # owner, with its buffer: a record reading it once the buffer is traced is refused
        self.plain_handed = {}
        self.sums = {}  # the checksums of their bytes, checked before the replay
        # The caller's float arrays it traces and their buffers' keys, by the id of their
        # owner: a plain array read that views their memory is checked (``check_alias``).
        self.arguments = {}
        # Under nested differentiation every value is an array the outer one traces, and its
        # recomputation would have to be traced too: only the outermost recomputes (and not
        # a replay's: ``recomputes``, it keeps what tracing kept)
        self.recomputation = Recomputation(memory) if outer is None and recomputes else None
        # the places of arguments' views records name, and the reads of their elements
        # (``tracing.getitem``), each made once
        self.places = {}
        self.caller = caller
        self.lines = {}  # each ``where`` its records name, one tuple for all (``caller``)
        self.anomaly = anomaly()
        self.originals = None  # the caller's bytes its differentiation writes back at its end
        self.adopter = None  # its differentiation, which adopts arrays made before (session)
        self.heard = None  # while a replay records: where its reverse pass lists its warnings
        # NumPy's floating-point error handling f runs under (``arguments.run`` sets it), and
        # per record run under another (np.ma's own np.errstate, a block of the user's), that
        # handling, under which its pullback runs too: id(record) -> (record, handling)
        self.errors = None
        self.errors_of = {}
        self.locked = []  # the arrays the program made read-only (``Traced.lock``)

    def hold(self, kept, places):
        """What a record keeps of the values ``kept`` it reads at ``places`` (both lists, None
        where it reads none): stand-ins for those the replay can recompute (``recompute``)."""
        recomputation = self.recomputation
        if recomputation is None or kept is None:
            return kept
        for i, (value, place) in enumerate(zip(kept, places)):
            if value is not None and (type(place) is Buffer or type(place) is Place):
                kept[i] = recomputation.hold(place, value)
        return kept

    def fold(self):
        """Before a record is appended: fold the reads of elements into the elementwise record
        before it that read them (``elementwise.fold_reads``), and let a value written pass its
        cotangent through a stand-in (``elementwise.fold_written``), where the tape is its own
        (no replay records it, no other differentiation encloses it, no anomaly detection
        checks each record)."""
        records = self.records
        # (what each asks first, asked here: this runs per record, and an elementwise record
        # after another, a chain of operations on arrays, has nothing to fold)
        if records and self.recorder is None and self.outer is None and self.anomaly is None:
            kind = type(records[-1])
            if kind is Write or kind is ElementWrite:
                fold_written(records)
            elif kind is Elementwise and len(records) > 1 and type(records[-2]) is Gathered:
                fold_reads(records, self.errors_of)

    def record(self, record, skip=SKIPPED):
        """``Tape.record``, noting the user's line that ran the operation (``where``, for
        listings and diagnostics): ``skip`` is how many frames up the stack, this one's
        included, are mutad's on every path to it (``debug.SKIPPED``)."""
        if self.recorder is not None and self.recorder.ready:
            self.recorder.outside(f"{record.primitive!r}")
        record.where = self.caller(skip, self.lines)
        records = self.records
        # (``fold``, written out: it runs before every record)
        if records and self.recorder is None and self.outer is None and self.anomaly is None:
            kind = type(records[-1])
            if kind is Write or kind is ElementWrite:
                fold_written(records)
            elif kind is Elementwise and len(records) > 1 and type(records[-2]) is Gathered:
                fold_reads(records, self.errors_of)
        records.append(record)
        errors = ERRORS.get()
        if errors is not self.errors and self.errors is not None:
            self.errors_of[id(record)] = (record, errors)

    def replay(self, shadows):
        """``Tape.replay``, with the stand-ins of each record resolved just before it runs.

        Once a record has run, nothing older can read what it created: its outputs forget
        their recipe, which also breaks the cycle record, output, recipe, record (which would
        keep the values the record read alive until the garbage collector runs).

        NumPy's warnings from a pullback are issued at the line of the record that ran it
        (``debug.Warnings``); under ``detect_anomaly`` each record is checked as it runs."""
        unlock(self)  # (the undos write into the arrays the program made read-only)
        recomputation = self.recomputation
        if recomputation is not None:
            recomputation.finish()
        records = self.records
        if not records:  # (nothing to run: no pullback to hear, nor its errors to label)
            self.clear()
            return
        reverse = self.reverse if self.anomaly is None else self.anomaly.checked(self.reverse)
        checked = reverse is not Tape.reverse  # (else a pure record's pullback is called here)
        watch = Warnings(ReverseTape.replay.__code__)
        watch.heard = self.heard
        readers = None if recomputation is None else recomputation.readers  # (one dict)
        errors_of = self.errors_of
        # (a run of pure elementwise records, where none has its own error handling or
        # stand-ins to resolve, is reversed in one loop: ``reverse_elementwise``)
        runs = not checked and not readers and not errors_of
        with at_user_lines(watch), reversing(self, watch):
            while records:
                if runs:
                    kind = type(records[-1])
                    if kind is Elementwise:
                        handed = reverse_elementwise(records, shadows, watch)
                        if handed is not None:  # (into what the folded record next made)
                            reverse_folded(records, shadows, watch, handed)
                        continue
                    # (a scalar loop's other records, reversed as below, without its questions)
                    if kind is ElementWrite:  # (no outputs)
                        record = watch.record = records.pop()
                        following = records[-1] if records else None
                        handed = record.reverse(shadows, following.output if type(following)
                                                is ElementsRead else None)
                        if handed is not None:  # (the value written's, into what it made)
                            reverse_folded(records, shadows, watch, handed[0])
                        continue
                    if kind is ElementsRead:
                        reverse_folded(records, shadows, watch)
                        continue
                    if kind is Gathered:
                        record = watch.record = records.pop()
                        record.pullback(record, shadows, None)
                        buffer = record.output
                        buffer.origin = None
                        if type(buffer.ref) is Written:
                            buffer.ref = buffer.ref.was
                        continue
                record = watch.record = records.pop()
                keys = None
                if readers:
                    plans = None if recomputation.planner is None else \
                        recomputation.planner(record)
                    keys = [key for held in (record.kept, record.state) if type(held) is list
                            for key in recomputation.resolve(
                                held, None if held is not record.kept else plans)]
                errors = errors_of.pop(id(record), None) if errors_of else None
                if errors is not None:  # its derivative's errors handled as its own were
                    with errors_as(errors[1], watch):
                        if checked or record.undo is not None:
                            reverse(record, shadows)
                        else:
                            record.pullback(record, shadows, None)
                elif checked or record.undo is not None:
                    reverse(record, shadows)
                else:  # a pure operation (``Tape.reverse``)
                    record.pullback(record, shadows, None)
                if isinstance(record, OneOutput):  # (its ``outputs``, without the tuple)
                    buffer = record.output
                    buffer.origin = None
                    if type(buffer.ref) is Written:
                        buffer.ref = buffer.ref.was
                else:
                    for buffer in record.outputs:
                        buffer.origin = None
                        if type(buffer.ref) is Written:  # from now on only what reads it holds it
                            buffer.ref = buffer.ref.was
                if keys:
                    recomputation.release(keys)
        self.clear()

    def clear(self):
        """Drop the records, and what recomputation kept beside them (its chains refer back to
        it: without this the garbage collector would have to free them)."""
        self.records.clear()
        # a save not run and the adopter refer back to the differentiation: without this a
        # reference cycle the garbage collector would have to free
        self.guards.clear()
        self.adopter = None
        self.lines.clear()
        if self.recomputation is not None:
            self.recomputation.clear()

    def lift(self, y):
        """``y`` as an array this tape traces, a constant to it unless it already is traced
        by it.

        Under nested differentiation every value of the inner one is an array the outer one
        traces, so that whatever the inner one writes into it (values that depend on the
        outer arguments, restorations, shadow updates) is recorded by the outer one."""
        if type(y) is Traced and y.tape is self:
            return y
        return fresh(y, self)

    def caller_memory(self, traced, array):
        """``traced``, an array of this tape over ``array``, the memory of a caller of a
        differentiation nested inside this one (a global passed to an inner gradient): the
        inner one writes it through this tape, whose reverse pass undoes those writes by
        inversion, within rounding. So its bytes are kept before this tape's first write into
        it and written back when this differentiation ends, as its own arguments' are."""
        if self.originals is not None:
            self.guard(traced.buffer.key, lambda: self.originals.keep(array))

    def constant(self, y, made=None):
        """``y`` as an array this tape follows, a constant of it unless it already is its
        array. ``made``: ``(function, args, kwargs)`` that allocated it, for a replay."""
        if type(y) is Traced and y.tape is self:
            return y
        t = constant(y, self)
        if self.recorder is not None and self.recorder.ready:
            self.recorder.allocated(t, made)
        return t


def active(tape):
    """``tape``, if its differentiation is in progress in this thread; otherwise a clear error."""
    running = ACTIVE.running
    if not running or (running[-1] is not tape and tape not in running):
        raise escaped("a traced array")
    return tape


def innermost(items, tape=None):
    """The tape of the innermost differentiation among the traced ``items`` (one level into
    lists and tuples): it handles the operation, and values of outer ones are its constants."""
    for x in items:
        if type(x) is Traced:
            if tape is None or x.tape.level > tape.level:
                tape = x.tape
        elif type(x) in (list, tuple):
            tape = innermost(x, tape)
    return tape


def ended(x):
    """Whether ``x`` is an array of a tape, a constant whose differentiation is no longer
    running (``levels.ended``)."""
    return type(x) is Traced and any_ended(x)


def freeze(tape, value):
    """Keep the memory of an untraced array that a record reads unchanged while the tape lives.

    A record keeps such arrays by reference; if the program overwrote one later (a work array
    refilled on every step), the replay would read the new values and the gradient would be
    silently wrong. So the array and the array that owns its memory (its ``base``) are made
    read-only: a write through either, or through a view made from them later, fails, and
    ``api`` reports it as a ``ConstantModifiedError`` naming the fix. A view made before (NumPy
    does not make those read-only with their owner) could still write, so the bytes read are
    also summed now and checked before the replay reads them (``check_constants``). The flags
    are the process's: another thread writing such an array meanwhile fails too.
    """
    if type(value) is np.ndarray or (type(value) is Preexisting  # (an index f made: np.arange)
                                     and value.dtype.kind in "iub"):
        if id(value) not in tape.sums:  # an array seen before is protected already
            check_alias(value, kept=True)
            _protect(tape, value)
    elif type(value) in (list, tuple):
        for item in value:
            freeze(tape, item)
    elif type(value) not in _NUMBERS and is_device(value) and id(value) not in tape.sums:
        # A device library has no read-only arrays: a copy is compared before the replay.
        region = (address(value), value.shape, value.strides, value.dtype.str)
        if region not in tape.sums:
            tape.sums[region] = (value, DeviceCopy(value.copy()), None)
        tape.sums[id(value)] = (value, None, (value.shape, value.strides))


_NUMBERS = frozenset((float, int, complex, bool, np.float64))


def keep(tape, x, value):
    """A record of ``tape`` reads ``value``, the value of its untraced operand ``x``. A constant
    of the tape is marked read, so that later writes into it are undone in the replay; a plain
    array is frozen (``freeze``)."""
    if type(x) is Traced:
        if x.tape is tape and x.buffer.constant:
            x.buffer.read = True
        elif ended(x):
            freeze(tape, value)
    elif type(x) in (list, tuple) and type(value) in (list, tuple):
        for item, v in zip(x, value, strict=True):
            keep(tape, item, v)
    else:
        freeze(tape, value)


def private(value):
    """What a record keeps of ``value``, an operand it reads: a read-only copy of an integer or
    boolean array the differentiated code made (a plain view of a stand-in: ``x > 0``,
    ``np.arange(n)``, an index it computed, an integer field of an array of records, whose
    other fields the function writes), which the code may go on writing, as NumPy lets it
    (``m[:] = ~m``) where a record keeping the array itself would need it frozen; a mask or an
    index costs little to copy beside the floats the operation reads. The records reading the
    same bytes there share one copy (a mask read on every step of a loop: ``_COPIES``).
    Anything else as it is; one level into tuples and lists (a key)."""
    kind = type(value)
    if kind is np.ndarray or kind is Preexisting:
        if value.dtype.kind in "iub" and (type(whole := owner(value)) is Preexisting or (
                type(whole) is np.ndarray and whole.dtype.names is not None)):
            value = plain_memory(value)
            region = (address(value), value.shape, value.strides, value.dtype.str)
            copy = _COPIES.get(region)
            if copy is None or not np.array_equal(copy, value):
                copy = value.copy(order="K")
                copy.flags.writeable = False
                _COPIES[region] = copy
            return copy
        return value
    if kind is tuple or kind is list:
        return kind(private(item) for item in value)
    return value


_COPIES: "weakref.WeakValueDictionary[tuple, np.ndarray]" = weakref.WeakValueDictionary()
"""The copies ``private`` made, by the region they were read from, while a record holds them:
a copy is shared where the region holds the same bytes again (compared whole, not summed)."""


def check_alias(value, kept=False, written=False):
    """``value`` is a plain array an operation reads beside traced arrays or constants. If it
    shares memory with an argument a running differentiation traces (a global or a closure
    viewing the argument's memory), it is read as a constant, which holds only while the
    function does not write into that argument: refused if the function did already; if a
    record keeps it (``kept``: ``freeze``), a later write into the argument is refused
    (``AliasRead``). ``written``: NumPy writes into ``value`` itself, which would change the
    argument behind the tape's back: refused. Such an array has the argument's owner
    (``views.owner``), so the test costs a lookup."""
    root = None
    for differentiation in ACTIVE.running:
        arguments = getattr(differentiation, "arguments", None)
        if not arguments:
            continue
        if root is None:
            root = id(value if value.base is None else owner(value))
        for argument, key in arguments.get(root, ()):
            if not may_share(value, argument, 10_000):
                continue
            if written:
                raise alias_written(value.shape, argument.shape)
            guard = differentiation.guards.get(key)
            if guard is None and writeable(argument):  # its save ran: it was written
                raise alias_read_after_write(value.shape, argument.shape)
            if kept and type(guard) is not AliasRead:
                differentiation.guards[key] = AliasRead(value.shape, argument.shape)


PLAIN_ACCESS.append(lambda value, written: check_alias(value, written=written))


class AliasRead:
    """The guard of an argument's buffer (``Tape.guard``) once a record keeps an array the
    function read from elsewhere than its arguments that shares the argument's memory: writing
    into the argument would change values the record reads as constants, so the write is
    refused before it happens."""

    __slots__ = ("shape", "argument")

    def __init__(self, shape, argument):
        self.shape = shape
        self.argument = argument

    def __call__(self):
        raise alias_written_after_read(self.shape, self.argument)


def _protect(tape, value):
    chain = [value]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    root = chain[-1]
    handed = tape.plain_handed.get(id(root))
    if handed is not None and not handed[1].constant:
        raise plain_copy_missed("a plain array read by an operation mutad records")
    if writeable(root) or id(root) in tape.frozen:
        # The memory of an argument a running differentiation traces (a global viewing it,
        # read apart from it: check_alias) stays writable, for the writes into the argument
        # and their undos; the sum below still catches a change of the bytes read, and they
        # are written back at the end, as the argument's are.
        traced = id(root) in tape.arguments or any(
            id(root) in (getattr(d, "arguments", None) or ()) for d in ACTIVE.running)
        if traced and tape.originals is not None and writeable(value):
            tape.originals.keep(value)
        # Owner first: a view can be made writable again only while its owner is.
        for a in reversed(chain[:-1] if traced else chain):
            if writeable(a):
                a.flags.writeable = False
                tape.frozen[id(a)] = a
    # One sum per region read, keyed by where it lies (a new slice of the same bytes on every
    # step is summed once); the array is kept so that its id stays its own.
    region = (address(value), value.shape, value.strides, value.dtype.str)
    if region not in tape.sums:
        tape.sums[region] = (value, checksum(value), None)
    tape.sums[id(value)] = (value, None, (value.shape, value.strides))  # x.shape = ... later


def checksum(a):
    """A checksum of the bytes of ``a``, whatever its layout, without copying it whole (of an
    array of references, ``References``)."""
    if a.dtype.hasobject:
        return References(a)
    if a.flags.c_contiguous:
        return zlib.crc32(a.reshape(-1).view(np.uint8))
    if a.flags.f_contiguous:
        return zlib.crc32(a.T.reshape(-1).view(np.uint8))
    total = 0
    for part in np.nditer(a, flags=("external_loop", "buffered", "zerosize_ok"),
                          buffersize=CHUNK, order="C"):
        total = zlib.crc32(np.ascontiguousarray(part).view(np.uint8), total)
    return total


def check_constants(tape):
    """Before the replay: raise if the bytes of an untraced array a record reads changed since
    it was read (written through a view made before the differentiation started, which
    ``freeze`` could not make read-only)."""
    for value, total, layout in tape.sums.values():
        if layout is not None and layout != (value.shape, value.strides):
            raise ConstantModifiedError(
                f"an array that an operation mutad recorded read as a constant, of shape "
                f"{layout[0]} then, was given the shape {value.shape} in place (x.shape = ...) "
                "before the gradient was computed, which needs it as it was read. Make a "
                "reshaped view under another name instead: w2 = x.reshape(...).")
        if total is not None and (checksum(value) != total if type(total) is int
                                  else not total.same(value)):
            raise ConstantModifiedError(
                f"an array of shape {value.shape} that an operation mutad recorded read as a "
                "constant was changed before the gradient was computed (through a view of its "
                "memory made before the differentiation started, which mutad cannot make "
                "read-only, or by another thread). Its old values are needed by the gradient: "
                "allocate it inside the differentiated function (mutad then follows its "
                "writes), or write into a new array instead.")


class References:
    """The objects an array of references (an object array: ``np.array([2**70, 1])``) held
    when a record read it as a constant: its bytes are addresses, which NumPy does not view
    as bytes to sum, so ``check_constants`` compares the array with them, element by element,
    each the same object (which this copy keeps alive, so that no other takes its address)."""

    __slots__ = ("shape", "objects")

    def __init__(self, a):
        self.shape = a.shape
        self.objects = list(a.flat)

    def same(self, value):
        return value.shape == self.shape and all(
            now is then for now, then in zip(value.flat, self.objects))


class DeviceCopy:
    """The values of a device array a record reads as a constant, as they were read: a device
    library has no read-only arrays, so ``check_constants`` compares the array with this copy
    (on the device; the one flag it reads decides whether to raise)."""

    __slots__ = ("copy",)

    def __init__(self, copy):
        self.copy = copy

    def same(self, value):
        if value.dtype.kind in "fc":
            return bool(np.array_equal(value, self.copy, equal_nan=True))
        return bool(np.array_equal(value, self.copy))


def unfreeze(tape, root):
    """Make the arrays over the memory of ``root`` that ``freeze`` made read-only writable
    again, and forget the sums of their bytes: the memory becomes a buffer the tape follows
    (an array made before the call, adopted by a write: ``session.Differentiation.adopt``).
    The records that read it as a constant keep reading it: the reverse pass undoes the
    writes that follow them before they run (the invariant of ``core.tape``), provided the
    tape records every one of them: whether such records were made, so that the memory must
    be traced rather than a constant (a constant's plain writes record nothing)."""
    frozen = [a for a in tape.frozen.values() if owner(a) is root]
    for a in sorted(frozen, key=_depth):  # owners first
        del tape.frozen[id(a)]
        made_writable(a)
    read = False
    for key, (value, total, _) in list(tape.sums.items()):
        if total is not None and owner(value) is root:
            del tape.sums[key]
            read = True
    return read or bool(frozen)


def _depth(a):
    """How many arrays lie between ``a`` and the array owning its memory."""
    depth = 0
    while isinstance(a.base, np.ndarray):
        a, depth = a.base, depth + 1
    return depth


def unlock(tape):
    """Make the arrays the program made read-only (``Traced.lock``) writable again, newest
    first (a view locked after its owner), for the undos of the reverse pass, or at the end."""
    locked, tape.locked = tape.locked, []
    for a in reversed(locked):
        a.setflags(write=True)


def thaw(tape):
    """Make the arrays ``freeze`` made read-only writable again (owners first)."""
    unlock(tape)
    frozen, tape.frozen = tape.frozen, {}
    for a in frozen.values():
        made_writable(a)
    tape.sums.clear()


def fresh_value(y):
    """A fresh float result as a traced array holds it: NumPy's scalars (for 0-d results) as
    read-only 0-d arrays, as immutable as they are (see ``stands_for_scalar``)."""
    if isinstance(y, (np.generic, float, int, complex)):
        y = np.array(y)
        _read_only(y, False)
    return y


_read_only = np.ndarray.setflags
"""``_read_only(a, False)`` is ``a.flags.writeable = False`` without the flags object, at
half the cost (a scalar loop makes a 0-d array per element it reads)."""


def fresh(y, tape):
    """Wrap a fresh float result as a buffer of its own."""
    plain_array = type(y) is np.ndarray  # (the common case, asked once: this runs per result)
    if not plain_array:
        y = fresh_value(y)
    if not plain_array and type(y) is not np.ndarray and isinstance(y, np.ndarray):
        raise UnsupportedArrayError(unsupported_array(
            y, "a result computed from a traced array and an array the function uses"))
    buffer = result_buffer(y)
    if tape.outer is not None:
        y = tape.outer.lift(y)
    elif y.nbytes >= SMALL:  # a small array is never recomputed: nothing to follow
        track(buffer, y)
    # (its owner, what ``.base`` of its views gives, is noted by ``view_of`` at its first view:
    # most results are never viewed, and a scalar loop makes one per element)
    return Traced(y, buffer, tape, True)


def as_owner(x):
    """``x``, a traced array over all of a new buffer, as what ``.base`` of its views gives
    (NumPy's ``view.base is x``): held weakly, as a program may let it go."""
    x.buffer.owner = weakref.ref(x)
    return x


def constant(y, tape):
    """Wrap a float array made inside the differentiated code, whose values do not depend on
    the arguments, as a constant of ``tape``: operations on constants alone run as on plain
    arrays and record nothing, and writing a traced value into one makes it traced (its
    buffer's ``constant`` state). Its value is an array the enclosing differentiations follow,
    as ``fresh`` makes it (a constant of theirs)."""
    if isinstance(y, (np.generic, float, int)):
        y = np.asarray(y)
    buffer = Buffer(y, constant=True)
    if tape.outer is not None:
        y = tape.outer.constant(y)
    elif type(y) is np.ndarray:  # small ones too: a recipe may hold it (recompute._reads)
        track(buffer, y)
    return as_owner(Traced(y, buffer, tape, True))


def constant_result(y, tape, sources):
    """The result of an operation on constants of ``tape`` (and plain values): an argument
    itself, a view of a constant's memory (the same buffer), a new constant, or a non-float
    value: a new integer or boolean array as ``without_derivative`` gives it (an index or a
    count of constants, ``np.argsort(c)``, stands in for itself as ``np.argsort(x)``'s does:
    a record reading it keeps a copy, ``private``, and f may go on writing into it).
    ``sources`` are the operation's arguments."""
    if type(y) in (tuple, list) or isinstance(y, tuple) and hasattr(y, "_fields"):
        # (NumPy's named results too: np.linalg.qr's, eigh's, svd's, slogdet's)
        items = [constant_result(item, tape, sources) for item in y]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    if isinstance(y, np.inexact):  # NumPy's scalar: immutable, as a fresh result's is
        y = fresh_value(y)
    if not (type(y) is np.ndarray or wrapped(y) or is_device(y)):
        return y
    root = owner(y)
    for x in flat(sources):
        if type(x) is Traced and x.tape is tape:
            if itself(y, x.value):
                return x
            if x.buffer.constant and owner(x.value) is root:
                # (integers too: v = i[1:] of a constant index, read by x[v], is i's buffer,
                # so that a write into i is undone for that record's reverse)
                return view_of(x, y, tape)
        elif type(x) is np.ndarray and owner(x) is root:
            return y  # a view of a plain array stays plain
    if y.dtype.kind not in "fc" and y.dtype.names is None:  # (records: as floats)
        return without_derivative(y, [x.value if type(x) is Traced else x
                                      for x in flat(sources)], {}, tape.level)
    return constant(y, tape)


def carries(items, tape):
    """Whether an array ``tape`` traces (not a constant) is among ``items``, at any depth of
    lists and tuples."""
    for x in items:
        if type(x) is Traced:
            if x.tape is tape and not x.buffer.constant:
                return True
        elif type(x) in (list, tuple) and carries(x, tape):
            return True
    return False


def values_at(tree, tape):
    """``tree`` with the arrays of ``tape`` (constants, here) replaced by their values, at any
    depth of lists and tuples."""
    if type(tree) is Traced and tree.tape is tape:
        return tree.value
    if type(tree) in (list, tuple):
        return type(tree)(values_at(x, tape) for x in tree)
    return tree


def view_of(x, y, tape):
    """The traced view ``y`` of traced ``x``'s memory: the same buffer, a part of it."""
    if x.whole:
        x.buffer.note_address(x.value)
        if x.buffer.owner is None:
            # the owner of a fresh result, noted at its first view rather than at its making
            # (``fresh``): most are never viewed
            as_owner(x)
    return Traced(y, x.buffer, tape, False)


def locate(x, tape):
    """Where the shadow of ``x`` lives if ``tape`` traces it, as a record keeps it: without
    ``x``'s memory, so a record does not keep alive an array whose values its pullback does not
    read. None for anything else (constants, arrays of outer differentiations)."""
    if type(x) is not Traced or x.tape is not tape or x.buffer.constant:
        return None
    return place_of(x)


def place_of(x):
    """The place of traced ``x`` in its buffer (a constant's too), holding none of its memory."""
    if x.whole:
        return x.buffer  # a buffer is the place of all of itself
    value, buffer = x.value, x.buffer
    return place_at(buffer, address(value) - buffer.low, value.shape, value.strides,
                    value.dtype, x.tape)


def place_at(buffer, offset, shape, strides, dtype, tape):
    """The place of the view of part of ``buffer``'s memory ``offset`` bytes past its lowest
    byte, laid out by ``shape``, ``strides`` and ``dtype``, traced by ``tape``."""
    if type(buffer.ref) is not Held:
        # (its layout by the one object of each: a stepper's records hold places of views of
        # its temporaries by the thousand, all of a few layouts)
        return Place(buffer, False, offset, shared(shape), shared(strides), dtype)
    # The views of an argument repeat on every step of a loop: one place for each
    place = (buffer, offset, shape, strides, dtype)
    places = tape.places
    named = places.get(place)
    if named is None:
        named = places[place] = Place(buffer, False, offset, shape, strides, dtype)
    return named


def recipe(inputs, values, kept, tape):
    """The inputs of a record, as its recipe names them: the place of each array ``tape``
    follows (its constants included), the value of each other input the record keeps
    (``kept[i]`` not None) or that is not an array (a number, a setting), and an ``Absent``
    stand-in for an array it does not keep, so that the record holds no memory the
    pullback does not read. A tuple: a record holds it for its whole life, unchanged."""
    named = []
    for i, x in enumerate(inputs):
        if type(x) is Traced and x.tape is tape:
            named.append(x.buffer if x.whole else place_of(x))
        elif type(x) in (list, tuple) and kept is not None and kept[i] is not None:
            named.append(type(x)(recipe(x, values[i], kept[i], tape)))  # concatenate's arrays
        elif kept is not None and kept[i] is not None and type(kept[i]) is not Absent:
            named.append(kept[i])
        else:
            named.append(_small_copy(values[i], tape))
    return tuple(named)


def _small_copy(value, tape):
    """An untraced input a record's pullback does not read, as its recipe names it: a copy of a
    small plain array (so that the recipe can be computed again, at little cost in memory and
    without making the array read-only), else ``_if_held``'s description."""
    if type(value) is np.ndarray and small(value) and tape.recomputation is not None:
        return value.copy()
    if type(value) in (list, tuple):
        return type(value)(_small_copy(v, tape) for v in value)
    return _if_held(value, ())


SETTINGS = (int, float, complex, str, bytes, slice, type(None), type(Ellipsis), np.generic,
            np.dtype, type)
"""Values a record may hold whatever its pullback reads: numbers and settings, which keep no
array alive."""


def _if_held(value, held):
    """``value`` if it is a number or a setting, or ``held`` (ids) holds it; else an ``Absent``
    stand-in (one level into lists and tuples)."""
    if type(value) in (list, tuple):
        return type(value)(_if_held(v, held) for v in value)
    if id(value) in held or isinstance(value, SETTINGS):
        return value
    return Absent(getattr(value, "shape", None), getattr(value, "dtype", None))


def add_cotangents(shadows, rows, primals):
    """Accumulate ``(place, cotangent)`` rows. A fresh cotangent may become the shadow itself,
    unless another row already took the same memory or it is memory of the inputs
    (``primals``: ids of their owners; None: no cotangent is the core's to adopt)."""
    taken = None if primals is None else set(primals)
    for p, g in rows:
        if g is None:
            continue
        if getattr(g, "shape", None) != p.shape:
            g = np.broadcast_to(g, p.shape)
        if taken is None:  # (nothing to adopt: no owners to compare)
            shadows.add(p, g)
            continue
        root = id(owner(g))
        shadows.add(p, g, owned=root not in taken)
        taken.add(root)


def plain(tree):
    """``tree`` with every traced array replaced by its plain value (for non-differentiable
    functions, whose outputs carry no gradient)."""
    kind = type(tree)
    if kind is int or kind is slice:
        return tree
    if kind is Traced:
        return weak_value(tree.value) if tree.buffer.weak else tree.value
    if kind is Preexisting:  # an index the function made (np.arange): the array it views
        return plain_memory(tree)
    if kind is list or kind is tuple:
        return kind([plain(x) for x in tree])
    if kind is dict:
        return {k: plain(v) for k, v in tree.items()}
    return tree


# ----------------------------------------------------------------------------------------------
# The traced array


class Traced(ArrayMethods):
    """A float array whose operations mutad records. Behaves like the ndarray it wraps."""

    __slots__ = ("value", "buffer", "tape", "whole", "indexed",
                 "__weakref__")  # (weakref: a recording)

    def __init__(self, value, buffer, tape, whole):
        self.value = value
        self.buffer = buffer  # the memory its shadow maps (a shadows.Buffer)
        self.tape = tape
        self.whole = whole  # whether value is that whole buffer, laid out as it
        # ``(x, x.value, key, value)`` where this is the view ``x[key]`` of a basic index made
        # by tracing's ``getitem``, which ``x[key] op= v`` assigns back (``assigned_back``)
        self.indexed = None

    level = property(lambda self: self.tape.level)

    def owning(self):
        held = self.buffer.owner
        return None if held is None else held()

    def _set_weak(self, weak):
        self.buffer.weak = weak

    # Whether it stands for a Python number (``arraylike.weak``): a property of its buffer, a
    # 0-d one of its own.
    weak = property(lambda self: self.buffer.weak, _set_weak)

    # Its dispatch (NumPy's ufuncs and functions, indexing, operators) is
    # ``tracing.TracedDispatch``, installed on this class there.

    # NumPy's protocols ---------------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        """A constant converts as a plain array would (read-only once a record has read it:
        code without a rule must not change it behind mutad's back); a traced array cannot.
        Called by the user's code (``v = w.__array__()``), the array itself, as NumPy's: a
        plain array of its memory would read the traced values later written into it as
        constants."""
        if copy is not True and (dtype is None or np.dtype(dtype) == self.dtype) \
                and called_by_name("__array__"):
            return self
        if dtype is not None and np.dtype(dtype).kind in "iub" and not self.buffer.constant:
            # Integers or booleans (k[:] = x into an integer array, np.asarray(x, int)): as
            # NumPy casts, whose derivative is zero; a replay guards the values made.
            value = self.value.astype(dtype)
            if self.tape.recorder is not None and self.tape.recorder.ready:
                self.tape.recorder.guard(self, value.tobytes(),
                                         lambda v: np.asarray(v).astype(dtype).tobytes())
            return value
        if not self.buffer.constant:
            active(self.tape)  # stored during the differentiation, used after it
            raise conversion_error("np.asarray")
        value = np.asarray(self.value)
        root = owner(value)
        self.tape.plain_handed[id(root)] = (root, self.buffer)
        if self.buffer.read or type(self.buffer.ref) is Held:
            # Read-only: a record needs its values, or it is the caller's argument, whose
            # writes must be followed to be undone.
            value = value.view()
            value.flags.writeable = False
            self.tape.read_views = True  # a write through it: api explains NumPy's error
        if self.tape.recorder is not None and self.tape.recorder.ready:
            self.tape.recorder.converted(self, value)  # code no step redoes takes its values
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def constant_here(self):
        """Whether no derivative of this differentiation flows through it."""
        return self.buffer.constant

    def unwritten_constant(self):
        return self.buffer.constant and self.buffer.version == 0 and not self.buffer.read

    def lock(self, write):
        """``x.setflags(write=False)``: the array read-only, as NumPy's, until the reverse pass
        begins (``unlock``), whose undos write into it; ``write=True`` again of one the program
        locked so. An array read-only otherwise (the caller's, a broadcast) is refused: its
        flag is the caller's, or NumPy's to keep."""
        value, locked = self.value, self.tape.locked
        if write:
            if writeable(value):
                # (NumPy's own call, which takes back its warning about writes into a view
                # np.broadcast_arrays made)
                value.setflags(write=True)
                return True
            if not any(a is value for a in locked):
                return False
        elif not writeable(value):
            return True  # read-only already (the caller's array): nothing to undo
        else:
            if self.tape.recorder is not None and self.tape.recorder.ready:
                self.tape.recorder.refuse("x.setflags(write=False), which a replay does not redo")
            locked.append(value)
        value.setflags(write=write)
        return True

    def plain_value(self):
        """The plain array a constant stands for (``ArrayMethods``), None if traced."""
        return self.__array__() if self.buffer.constant else None

    def _converted(self, what, attempt=None):
        recorder = self.tape.recorder
        if recorder is None or not recorder.ready:
            return ArrayMethods._converted(self, what, attempt)
        recorder.ready = False  # not a conversion of the program's own: a decision of Python's
        value = None
        try:
            value = ArrayMethods._converted(self, what, attempt)
        finally:  # (also where NumPy's own error, which f may catch, is raised: the bytes
            recorder.ready = True  # decide it, inf.as_integer_ratio()'s OverflowError)
            recorder.guard(self, (self.value if value is None else value).tobytes())
        return value

    def __index__(self):
        refused = bytearray_refused(self, sys._getframe(1))  # (bytearray(x) asks it first)
        if refused is not None:
            raise refused
        value = self._converted("an index", operator.index)
        if value.ndim or value.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return operator.index(value[()])

    @property
    def shape(self):
        return self.value.shape

    @shape.setter
    def shape(self, shape):
        """``x.shape = ...`` reshapes in place as NumPy does (a view of the same memory, or
        NumPy's error where none exists), for an array made inside the function or a view of
        an argument's (``v = x.view()``, ``x.ravel()``: a new object, as NumPy's); the
        argument's array itself stands for the caller's, whose shape stays."""
        session = self.tape.adopter
        if (session.stands_for_callers(self) if session is not None else
                any(key == self.buffer.key for entries in self.tape.arguments.values()
                    for _, key in entries)):
            ArrayMethods.shape.fset(self, shape)  # refused, with what to write instead
        new = self.value.view()
        new.shape = shape  # NumPy's rule, and its error
        if self.whole and self.buffer.low is None:  # where it lies, for views of other shapes
            self.buffer.note_address(self.value)
        recorder = self.tape.recorder
        if recorder is not None and recorder.ready:
            recorder.reshaped(self, new.shape)
        self.value = new
        self.whole = self.whole and new.shape == self.buffer.shape

    def resizable(self):
        """Whether ``x.resize`` may give this array new memory (``ArrayMethods.resize``): one
        the function made, owning its memory as NumPy requires, outside a recording replay
        (which knows arrays by the memory they stand for)."""
        if self.tape.recorder is not None and self.tape.recorder.ready:
            self.tape.recorder.refuse("x.resize(...), which gives an array new memory")
        return (self.whole and self.value.flags.owndata and self.value.flags.c_contiguous
                and not any(key == self.buffer.key for entries in self.tape.arguments.values()
                            for _, key in entries))

    def adopt(self, other):
        """Stand for ``other``'s memory from now on (``x.resize``)."""
        self.value, self.buffer, self.whole = other.value, other.buffer, other.whole

    def _decided(self, decide):
        """What Python reads of the value (``ArrayMethods._decided``), guarded by a replay."""
        recorder = self.tape.recorder
        if recorder is None or not recorder.ready:
            return ArrayMethods._decided(self, decide)
        try:
            taken = ArrayMethods._decided(self, decide)
        except Exception:  # int(inf)'s OverflowError, which f may catch: the bytes decide it
            recorder.guard(self, self.value.tobytes())
            raise
        if type(taken) is float:  # by its bits: 0.0 == -0.0, which "%+.1f" % x tells apart
            recorder.guard(self, _float_bits(taken),
                           lambda value: _float_bits(decide(numpy_value(value))))
        else:
            recorder.guard(self, taken, lambda value: decide(numpy_value(value)))
        return taken

    offset = property(lambda self: address(self.value) - self.buffer.low)

    def owner_view(self):
        """This traced array's view of all of its memory (``views.owner_view``)."""
        return view_of(self, owner_view(self.value), self.tape)

    def restrided(self, shape, dtype, offset, strides):
        """The view of this one-dimensional array at byte ``offset`` (``views.strided``)."""
        return view_of(self, strided(self.value, shape, dtype, offset, strides), self.tape)


def _float_bits(number):
    """The bits of Python's float ``number`` (``Traced._decided`` guards a float by them)."""
    return struct.pack("<d", number)
