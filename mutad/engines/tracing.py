"""The traced array, and the paths every NumPy call on it takes.

A :class:`Traced` wraps a plain float ndarray (``value``) and names the memory whose shadow it
uses (``buffer``, a :class:`shadows.Buffer`): for a view, that of the array it views; for a fresh
result, its own. Records keep :class:`shadows.Place` descriptors of their inputs, not the inputs,
and only the input values their pullbacks read (``locate``). Code
written with plain ``import numpy as np`` reaches mutad through ``__array_ufunc__`` and
``__array_function__``; operators, methods and indexing call the same paths directly.

Every call takes one of four paths:

* pure: run the rule on plain values, wrap a fresh result, record its pullback. A result that
  views an input's memory is a view: it shares the input's buffer and records nothing, since
  its shadow is the same view of the input's shadow.
* in-place (``out=``, augmented assignment, slice assignment, scatters, the functions that
  write into an argument, in-place custom rules), all through ``record_write``: decide how the
  overwritten bytes will be put back (``Tape.undo_for``), write, and record a ``tape.Write``
  whose replay reads the cotangent of the new values from the target's shadow and zeroes it
  there (``Shadows.take``), undoes the write, then runs the rule's pullback.
* indexing (``x[key]``, ``x[key] = v``): the engine's own view and assignment semantics
  (``getitem``, ``setitem``), through the same paths: basic indexing gives views, assignment
  to them is the in-place path.
* non-differentiable: run on plain values, return plain results.

Differentiations nest. Each has a level (``levels.LEVELS``), and an operation belongs to the
innermost tape among its operands (``innermost``): arrays traced by outer tapes are its
constants, and its own values are arrays the outer one traces (``ReverseTape.lift``), so
everything the inner differentiation does, its reverse pass included, is recorded by the outer
one. Forward mode's duals (``forward.py``) take part through the same levels: a traced array
defers to a value of a deeper level of the other mode (``defers``), and a dual of an outer
level is a constant to a tape.
"""

import functools
import operator
import types
import zlib

import numpy as np

from ..core.allocation import Preexisting, joined_operands, stands_in, ufunc_operands
from ..core.arguments import no_full_collections
from .arraylike import (ArrayMethods, alias_read_after_write, alias_written_after_read,
                        conversion_error, inexact_output, install_operators,
                        item_assignment_refused, keywords_in_place,
                        lost_tangent, numpy_value, out_by_keyword, out_position, put_right,
                        single_out, stands_for_scalar, untraced_write, weak_arithmetic,
                        weak_beside_arrays, weak_value)
from ..core.devices import beside, is_device, namespace, ufunc_at
from ..core.debug import SKIPPED, Warnings, anomaly, at_user_lines, caller
from .elementwise import (ASSIGNMENT, Elementwise, Rerun, differentiable, elementwise_kept,
                          read_by_partials, unbroadcast, write_kept, write_pullback)
from ..core.errors import (
    ConstantModifiedError,
    MutadError,
    RuleError,
    UnsupportedArrayError,
    UnsupportedOperationError,
    function_name,
    no_rule,
)
from ..core.levels import ACTIVE, LEVELS, Tracer, escaped
from ..core.levels import innermost as innermost_tracer
from .products import CHUNK
from .recompute import (SMALL, Held, Rebuild, Recomputation, Written, current_region, flat,
                        keeps_memory, small, track)
from ..core.registry import (CONVENTION, HOLOMORPHIC, NO_RULE, RULES, ElementwiseRule, Rule,
                             check_complex, complex_among, is_recomputable, is_user_rule, lookup)
from ..core.shadows import Buffer, Place, overlapping, zeros
from ..core.tape import Absent, OneOutput, Primitive, Record, Tape, Write
from ..core.trees import unsupported_array
from ..core.views import (address, byte_span, itself, may_overlap, memory, overlaps_itself, owner,
                          owner_view, real_part_if, same_region, strided, views, wrapped, writeable)
from .writes import (SAVED, CopyBack, Destination, ElementwiseInverse, Reads, Undo, Undos,
                     check_region, decide_undo, saving)

CONSTANT = ElementwiseRule((None, None, None))
"""The rule of a non-differentiable ufunc writing into a traced array: no gradient flows."""
Rule(elementwise=CONSTANT, complex=HOLOMORPHIC)  # the core's own row (no key): complex values too


class ReverseTape(Tape):
    """The tape of one reverse-mode differentiation, and what the engine keeps beside its
    records: its level, the differentiation it is nested in (``outer``, None at the top), the
    untraced arrays its records read (``freeze``), how it finds the user's line that ran an
    operation (``caller``: ``debug.caller``, or ``debug.nowhere`` for a replay's tape, whose
    program was recorded with its lines) and, under ``debug.detect_anomaly``, the checks it
    makes (``anomaly``; else None)."""

    __slots__ = ("level", "outer", "frozen", "read_views", "sums", "arguments", "recomputation",
                 "places", "caller", "lines", "anomaly", "originals", "heard")

    def __init__(self, policy, outer, memory=None):
        super().__init__(policy)
        self.level = next(LEVELS)
        self.outer = outer
        self.frozen = {}  # untraced arrays records read, kept read-only while the tape lives
        self.read_views = False  # whether read-only views of read constants were handed out
        self.sums = {}  # the checksums of their bytes, checked before the replay
        # The caller's float arrays it traces and their buffers' keys, by the id of their
        # owner: a plain array read that views their memory is checked (``check_alias``).
        self.arguments = {}
        # Under nested differentiation every value is an array the outer one traces, and its
        # recomputation would have to be traced too: only the outermost recomputes.
        self.recomputation = Recomputation(memory) if outer is None else None
        self.places = {}  # the places of arguments' views records name, each made once
        self.caller = caller
        self.lines = {}  # each ``where`` its records name, one tuple for all (a loop's lines)
        self.anomaly = anomaly()
        self.originals = None  # the caller's bytes its differentiation writes back at its end
        self.heard = None  # while a replay records: where its reverse pass lists its warnings

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

    def record(self, record, skip=SKIPPED):
        """``Tape.record``, noting the user's line that ran the operation (``where``, for
        listings and diagnostics): ``skip`` is how many frames up the stack, this one's
        included, are mutad's on every path to it (``debug.SKIPPED``)."""
        if self.recorder is not None and self.recorder.ready:
            self.recorder.outside(f"{record.primitive!r}")
        where = self.caller(skip)
        record.where = where if where is None else self.lines.setdefault(where, where)
        self.records.append(record)

    def replay(self, shadows):
        """``Tape.replay``, with the stand-ins of each record resolved just before it runs.

        Once a record has run, nothing older can read what it created: its outputs forget
        their recipe, which also breaks the cycle record, output, recipe, record (which would
        keep the values the record read alive until the garbage collector runs).

        NumPy's warnings from a pullback are issued at the line of the record that ran it
        (``debug.Warnings``); under ``detect_anomaly`` each record is checked as it runs."""
        recomputation = self.recomputation
        if recomputation is not None:
            recomputation.finish()
        records = self.records
        reverse = self.reverse if self.anomaly is None else self.anomaly.checked(self.reverse)
        watch = Warnings(ReverseTape.replay.__code__)
        watch.heard = self.heard
        with at_user_lines(watch), no_full_collections():
            while records:
                record = watch.record = records.pop()
                keys = None
                if recomputation is not None and recomputation.readers:
                    plans = None if recomputation.planner is None else \
                        recomputation.planner(record)
                    keys = [key for held in (record.kept, record.state) if type(held) is list
                            for key in recomputation.resolve(
                                held, None if held is not record.kept else plans)]
                reverse(record, shadows)
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


def _unwrap(items):
    """Plain values of ``items`` (a ufunc's operands: Python's numbers for values that stand
    for one, ``arraylike.weak``), the tape of the traced ones, and which are traced (a bit
    mask: bit i for item i)."""
    tape = None
    values = []
    traced = 0
    for i, x in enumerate(items):
        if type(x) is Traced:
            if tape is None:
                tape = x.tape
            elif x.tape is not tape:  # nested differentiations: rare, so checked apart
                if any(type(item) in (list, tuple) for item in items):
                    return None, None, None  # ufunc_operands first (apply_ufunc)
                return _unwrap_at(items, innermost(items))
            buffer = x.buffer
            values.append(weak_value(x.value) if buffer.weak else x.value)
            if not buffer.constant:
                traced |= 1 << i
        else:
            kind = type(x)
            if kind is np.ndarray:
                check_alias(x)
            elif kind is list or kind is tuple or kind is Preexisting:
                return None, None, None  # ufunc_operands first: an array, as NumPy makes it
            values.append(x)
    return tape, values, traced


def _unwrap_at(items, tape, numbers=True):
    """``_unwrap`` for ``tape``: arrays traced by other (outer) tapes stay as they are. A
    constant whose differentiation has ended (kept in a cache, say) is the plain array it
    holds. Not ``numbers`` (a function's arguments, which its rule takes as arrays), a value
    that stands for a Python number is its 0-d array."""
    values = []
    traced = 0
    for i, x in enumerate(items):
        if type(x) is Traced and x.tape is tape:
            values.append(weak_value(x.value) if numbers and x.buffer.weak else x.value)
            if not x.buffer.constant:
                traced |= 1 << i
        elif ended(x):
            values.append(memory(x))
        else:
            if type(x) is Preexisting:
                x = x.view(np.ndarray)
            if type(x) is np.ndarray:
                check_alias(x)
            values.append(x)
    return tape, values, traced


def ended(x):
    """Whether ``x`` is a constant whose differentiation is no longer running."""
    return type(x) is Traced and x.buffer.constant and x.tape not in ACTIVE.running


def _unwrap_args(args):
    """Like ``_unwrap``, one level into lists and tuples (``np.concatenate([a, b])``), for a
    function's rule: a value that stands for a Python number is that number beside arrays,
    else its 0-d array (``arraylike.weak_beside_arrays``)."""
    tape = innermost(args)
    values = []
    numbers = None  # whether weak values go as numbers, found at the first one
    for x in args:
        if type(x) is Traced and x.tape is tape:
            if x.buffer.weak:
                if numbers is None:
                    numbers = weak_beside_arrays(args)
                values.append(weak_value(x.value) if numbers else x.value)
            elif x.buffer.constant and stands_for_scalar(x):
                values.append(x.value[()])  # a number the program computed: as NumPy's
            else:
                values.append(x.value)
        elif type(x) in (list, tuple) and any(type(e) is Traced for e in x):
            values.append(type(x)(_unwrap_at(x, tape, numbers=False)[1]))
        elif ended(x):
            values.append(memory(x))
        else:
            if type(x) is np.ndarray:
                check_alias(x)
            values.append(x)
    return tape, values


def _leaves(args, tape):
    """The arrays ``tape`` traces among ``args``, one level into lists and tuples (not its
    constants)."""
    for x in args:
        if type(x) is Traced:
            if x.tape is tape and not x.buffer.constant:
                yield x
        elif type(x) in (list, tuple):
            yield from (e for e in x
                        if type(e) is Traced and e.tape is tape and not e.buffer.constant)


def _keyword_values(name, kwargs, tape):
    """``kwargs`` with the constants of ``tape`` replaced by their values (a record may read
    them); a traced array there is refused."""
    values = kwargs
    for key, value in kwargs.items():
        if type(value) is Traced and value.tape is tape:
            if not value.buffer.constant:
                raise UnsupportedOperationError(
                    f"{name}: the traced array passed as keyword argument {key}= cannot be "
                    "differentiated; pass it positionally.")
            value.buffer.read = True
            values = dict(values) if values is kwargs else values
            values[key] = value.value
    return values


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
    if type(value) is np.ndarray:
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


def check_alias(value, kept=False):
    """``value`` is a plain array an operation reads beside traced arrays or constants. If it
    shares memory with an argument a running differentiation traces (a global or a closure
    viewing the argument's memory), it is read as a constant, which holds only while the
    function does not write into that argument: refused if the function did already; if a
    record keeps it (``kept``: ``freeze``), a later write into the argument is refused
    (``AliasRead``). Such an array has the argument's owner (``views.owner``), so the test
    costs a lookup."""
    root = None
    for differentiation in ACTIVE.running:
        arguments = getattr(differentiation, "arguments", None)
        if not arguments:
            continue
        if root is None:
            root = id(value if value.base is None else owner(value))
        for argument, key in arguments.get(root, ()):
            if not _shares_memory(value, argument):
                continue
            guard = differentiation.guards.get(key)
            if guard is None and writeable(argument):  # its save ran: it was written
                raise alias_read_after_write(value.shape, argument.shape)
            if kept and type(guard) is not AliasRead:
                differentiation.guards[key] = AliasRead(value.shape, argument.shape)


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


def _shares_memory(a, b):
    """Whether ``a`` and ``b`` share a byte; where NumPy cannot tell quickly, assume so."""
    try:
        return np.shares_memory(a, b, max_work=10_000)
    except np.exceptions.TooHardError:
        return True


def _protect(tape, value):
    chain = [value]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    root = chain[-1]
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
        tape.sums[region] = (value, _checksum(value), None)
    tape.sums[id(value)] = (value, None, (value.shape, value.strides))  # x.shape = ... later


def _checksum(a):
    """A checksum of the bytes of ``a``, whatever its layout, without copying it whole."""
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
        if total is not None and (_checksum(value) != total if type(total) is int
                                  else not total.same(value)):
            raise ConstantModifiedError(
                f"an array of shape {value.shape} that an operation mutad recorded read as a "
                "constant was changed before the gradient was computed (through a view of its "
                "memory made before the differentiation started, which mutad cannot make "
                "read-only, or by another thread). Its old values are needed by the gradient: "
                "allocate it inside the differentiated function (mutad then follows its "
                "writes), or write into a new array instead.")


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


def thaw(tape):
    """Make the arrays ``freeze`` made read-only writable again (owners first). NumPy will
    not for an array whose memory belongs to no array (a C library's buffer handed over
    through a capsule, as odeint's function receives its state): that one stays read-only,
    as the library's own buffer, which nothing else writes, may."""
    frozen, tape.frozen = tape.frozen, {}
    for a in frozen.values():
        try:
            a.flags.writeable = True
        except ValueError:  # "cannot set WRITEABLE flag to True of this array"
            pass
    tape.sums.clear()


def fresh_value(y):
    """A fresh float result as a traced array holds it: NumPy's scalars (for 0-d results) as
    read-only 0-d arrays, as immutable as they are (see ``stands_for_scalar``)."""
    if isinstance(y, (np.generic, float, int, complex)):
        y = np.array(y)
        y.flags.writeable = False
    return y


def fresh(y, tape):
    """Wrap a fresh float result as a buffer of its own."""
    plain_array = type(y) is np.ndarray  # (the common case, asked once: this runs per result)
    if not plain_array:
        y = fresh_value(y)
    if tape.recorder is not None and y.dtype.kind == "c" and tape.recorder.outside_argnums:
        # the recording traces those arrays, which the traced call holds as constants: with
        # complex values, the products of the extra pullbacks may round otherwise
        tape.recorder.refuse("complex values in a program with arrays outside argnums")
    if not plain_array and type(y) is not np.ndarray and isinstance(y, np.ndarray):
        raise UnsupportedArrayError(unsupported_array(
            y, "a result computed from a traced array and an array the function uses"))
    buffer = Buffer(y)
    if tape.outer is not None:
        y = tape.outer.lift(y)
    elif y.nbytes >= SMALL:  # a small array is never recomputed: nothing to follow
        track(buffer, y)
    return Traced(y, buffer, tape, True)


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
    return Traced(y, buffer, tape, True)


def constant_result(y, tape, sources):
    """The result of an operation on constants of ``tape`` (and plain values): an argument
    itself, a view of a constant's memory (the same buffer), a plain non-float value, or a
    new constant. ``sources`` are the operation's arguments."""
    if type(y) in (tuple, list):
        items = [constant_result(item, tape, sources) for item in y]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    if isinstance(y, np.inexact):  # NumPy's scalar: immutable, as a fresh result's is
        y = fresh_value(y)
    if not (type(y) is np.ndarray or wrapped(y) or is_device(y)) or y.dtype.kind not in "fc":
        return y
    root = owner(y)
    for x in flat(sources):
        if type(x) is Traced and x.tape is tape:
            if itself(y, x.value):
                return x
            if x.buffer.constant and owner(x.value) is root:
                return view_of(x, y, tape)
        elif type(x) is np.ndarray and owner(x) is root:
            return y  # a view of a plain array stays plain
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


def write_constant(tape, target, key, write, primitive=None):
    """Run ``write()``, which writes constants into ``target[key]`` (``key`` None: all of it),
    a constant of ``tape``. If a record already read its buffer, the bytes about to be
    overwritten are saved and put back in the replay, so that record reads them again."""
    if tape.recorder is not None and tape.recorder.ready:
        tape.recorder.outside("a write into an array allocated in the function")
    tape.before_write(target.buffer.key)  # an argument's: its caller's bytes saved first
    if not target.buffer.read:
        target.buffer.version += 1
        write()
        return
    record_write(primitive, target, write, undo=Undo(save=saving(target.value, key)),
                 taken=False)


def on_constants(call, args, kwargs, tape, written=()):
    """``call(*args, **kwargs)`` where every array of ``tape`` among the arguments is a
    constant: run on their values, as on plain arrays, recording nothing but the undoing of
    writes into constants a record has read (``written``: the arguments it may write)."""
    if tape.recorder is not None and tape.recorder.ready:
        return tape.recorder.on_constants(call, args, kwargs, tape, written)
    for target in written:
        if type(target) is Traced and target.tape is tape and target.buffer.constant:
            write_constant(tape, target, None, lambda: None)
    y = call(*values_at(args, tape), **{k: values_at(v, tape) for k, v in kwargs.items()})
    return constant_result(y, tape, (*args, *kwargs.values()))


def view_of(x, y, tape):
    """The traced view ``y`` of traced ``x``'s memory: the same buffer, a part of it."""
    if x.whole:
        x.buffer.note_address(x.value)
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
    value = x.value
    place = (x.buffer, address(value) - x.buffer.low, value.shape, value.strides, value.dtype)
    if type(x.buffer.ref) is not Held:
        return Place(place[0], False, *place[1:])
    # The views of an argument repeat on every step of a loop: one place for each
    places = x.tape.places
    named = places.get(place)
    if named is None:
        named = places[place] = Place(place[0], False, *place[1:])
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
    if isinstance(value, SETTINGS) or id(value) in held:
        return value
    return Absent(getattr(value, "shape", None), getattr(value, "dtype", None))


def add_cotangents(shadows, rows, primals):
    """Accumulate ``(place, cotangent)`` rows. A fresh cotangent may become the shadow itself,
    unless another row already took the same memory or it is memory of the inputs
    (``primals``: ids of their owners; None: no cotangent is the core's to adopt)."""
    taken = set(primals or ())
    for p, g in rows:
        if g is None:
            continue
        if getattr(g, "shape", None) != p.shape:
            g = np.broadcast_to(g, p.shape)
        root = id(owner(g))
        shadows.add(p, g, owned=primals is not None and root not in taken)
        taken.add(root)


# ----------------------------------------------------------------------------------------------
# Elementwise ufuncs


def apply_ufunc(ufunc, inputs, out=None, kwargs=None, rule=None):
    """``ufunc(*inputs, out=out, **kwargs)`` with ``ufunc``'s rule (or ``rule``, given)."""
    if out is None:
        tape, values, pattern = _unwrap(inputs)
    else:  # the target takes part in choosing the level
        tape, values, pattern = _unwrap((*inputs, out))
        if values is not None:
            values.pop()
            pattern &= ~(1 << len(inputs))
    if values is None:  # x / [x @ x], x ** [1.0, 2.0]: a list is the array NumPy makes of it
        out, = ufunc_operands((out,))
        return apply_ufunc(ufunc, ufunc_operands(inputs), out, kwargs, rule)
    if tape.recorder is not None and tape.recorder.ready:
        return tape.recorder.ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern)
    return unwrapped_ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern)


def unwrapped_ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern):
    """``apply_ufunc`` once the inputs are unwrapped (``_unwrap``: ``tape``, their ``values``
    and the ``pattern`` of traced ones)."""
    kwargs = dict(kwargs) if kwargs else {}
    if not pattern and (out is None or (type(out) is Traced and out.tape is tape
                                        and out.buffer.constant)):
        return _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape)
    if kwargs.get("where", True) is not True:
        raise UnsupportedOperationError(
            f"{function_name(ufunc)}(..., where=...) on traced arrays: compute both branches and "
            "select with np.where(mask, new, old) instead.")
    if rule is None:
        entry = RULES.get(ufunc, NO_RULE)
        rule = entry.elementwise
        if entry.complex_rules is not None and complex_among(values):  # not complex-differentiable
            if out is not None:
                kwargs["out"] = out
            return apply_function(function_name(ufunc), entry.complex_rules[0], inputs,
                                  kwargs)
        if rule is None and entry.reverse is not None:  # generalized ufuncs (matmul)
            if out is not None:
                kwargs["out"] = out
            return apply_function(function_name(ufunc), entry.reverse, inputs, kwargs)
        if rule is None:
            if not entry.nondifferentiable:
                raise no_rule(ufunc)
            if out is None:
                return ufunc(*values, **kwargs)
            rule = CONSTANT
    if out is not None:
        return _write_elementwise(ufunc, rule, tape, inputs, values, pattern, out, kwargs)
    active(tape)
    y = ufunc(*values, **kwargs)
    if y.dtype.kind == "c":  # of complex operands: a row declared for them (facet complex)
        check_complex(function_name(ufunc), rule)
    yt = fresh(y, tape)
    traced, reads, state = differentiable(ufunc, rule, pattern, len(inputs))
    if not traced:
        return yt
    read = read_by_partials(values, reads)
    for i, v in enumerate(read):
        if pattern >> i & 1 == 0 and type(inputs[i]) not in _NUMBERS:  # (nothing to keep)
            keep(tape, inputs[i], v)
    named = recipe(inputs, values, read, tape)
    read = elementwise_kept(rule, reads, read, values, yt.value)
    uses_y = "y" in rule.uses
    # ``state`` is shared by every record of this rule and pattern: what a record holds of its
    # own is in its other fields.
    record = Elementwise(ufunc, named, kwargs or None, yt.buffer, read, state)
    if tape.recomputation is not None:
        tape.hold(read, named)  # first: an input it keeps may be read by the recipe
        if yt.buffer.ref is not None:  # (else none is given: a small array, not followed)
            tape.recomputation.give_recipe(record, 0, yt.buffer, kwargs)
        if uses_y:
            read[-1] = tape.recomputation.hold(yt.buffer, yt.value)
    tape.record(record, SKIPPED + 1)  # called by apply_ufunc, called by the engine
    if tape.anomaly is not None:
        tape.anomaly.produced(record, values, [yt.value])
    return yt


def _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape):
    """A ufunc whose operands are constants and plain values, written into a constant or
    into a new array: it runs as on plain arrays."""
    if out is None:
        return constant_result(ufunc(*values, **kwargs), tape, inputs)
    write_constant(tape, out, None, lambda: ufunc(*values, out=out.value, **kwargs))
    return out


def target_position(target, inputs):
    """The position of the operand of an elementwise write that is its target ``target``
    itself, the same region of the same buffer (None: none is)."""
    return next((i for i, x in enumerate(inputs) if type(x) is Traced
                 and x.buffer is target.buffer and same_region(x.value, target.value)), None)


def apart_from(target, inputs, position):
    """Whether no operand of an elementwise write but its target's own (at ``position``) lies
    over the target's memory, traced or a plain array viewing an argument's: such an operand
    would read the written values, not those an inverse needs."""
    value = target.value
    return not any(
        (type(x) is Traced and x.buffer is target.buffer and may_overlap(x.value, value))
        or (type(x) is np.ndarray and may_overlap(x, value))
        for i, x in enumerate(inputs) if i != position)


def check_destination(target, what):
    """``writes.check_region`` for a write into the traced array ``target``; a
    destination read-only because mutad froze an array sharing its memory says so."""
    value = target.value
    if not writeable(value):
        alias = target.tape.guards.get(target.buffer.key)
        if type(alias) is AliasRead:
            alias()
    check_region(value, what, target.whole)


def record_write(primitive, target, write, reads=None, undo=SAVED, *, pullback=None, state=None,
                 settings=None, taken=True, key=None, undo_first=True, tape=None, decided=None):
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
    reverse pass (``recompute.Chain``) where ``undo.redo`` can do it again from what it read.
    Returns the record.
    """
    several = type(target) is list
    targets = [t if type(t) is Destination else _destination(t)
               for t in (target if several else [target])]
    inputs, values = (reads.inputs, reads.values) if reads is not None else ((), None)
    if tape is None:
        tape = (target[0] if several else target).tape if targets else innermost(inputs)
    undos, kinds = [], []
    recomputation = tape.recomputation
    rebuilding = (undo.redo is not None and not several and undo.save is None
                  and recomputation is not None and recomputation.budget is not None)
    if rebuilding:
        redo_inputs = recipe(inputs, values, None, tape)
    for t, inverse in zip(targets, undo.inverse if several else [undo.inverse], strict=True):
        save = undo.save or (lambda t=t: CopyBack(t.value, at=t.find))
        if rebuilding:
            save = lambda t=t: (recomputation.chain(t.place, redo_inputs)  # noqa: E731
                                or CopyBack(t.value))
        chosen, kind = decide_undo(
            tape, inverse, save, t.key, t.whole and undo.save is None,
            t.value.nbytes if undo.save is None and inverse is not _rule_restores else None,
            undo.growth)
        undos.append(chosen)
        kinds.append(kind)
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
    write()
    for t in targets:
        if t.buffer is not None:
            t.buffer.version += 1
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
            for i, x in enumerate(inputs):
                if held is not None and held[i] is not None and not (
                        type(x) is Traced and x.tape is tape and not x.buffer.constant):
                    keep(tape, x, values[i])
            named = recipe(inputs, values, held, tape)
            if reads.recompute:
                held = tape.hold(held, named)
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
    if type(record.undo) is Rebuild:
        record.undo.chain.wrote(redo_inputs, places[0], undo.redo)
    return record


def _destination(target):
    """The :class:`writes.Destination` of a write into the traced array ``target``."""
    place = place_of(target)
    return Destination(target.value, target.buffer.key, target.whole, place,
                       _finder(target, place), target.buffer)


def _kept_for_the_inverse(x, value, kept, tape, out):
    """Whether the inverse of a write into ``out`` would be alone in keeping ``value``, operand
    ``x``, as large as the values it writes and memory of its own (a temporary the replay
    cannot recompute: ``keeps_memory``) that the pullback does not read (``kept`` None). Such
    a write is undone by saving what it overwrites instead, which costs no more memory, is
    exact, and under a memory budget is rebuilt from snapshots (``recompute.Chain``): the
    undo does not depend on the budget, so neither does the gradient, bit for bit. A small
    value is kept (cheaper than the save, and the inverse's)."""
    return (kept is None and type(x) is Traced and x.tape is tape and type(value) is np.ndarray
            and not small(value)
            and value.size >= out.value.size and keeps_memory(place_of(x), out.buffer))


def _finder(target, place):
    """What the undo of a write into the traced ``target``, at ``place``, calls to find it
    then: through its buffer's reference (``recompute.Written``) where one follows the buffer
    (a C-contiguous one: ``recompute.view`` maps views of those), so that the undo alone does
    not keep a temporary alive; else None (the undo holds ``target``)."""
    if target.buffer.ref is None or not target.buffer.c_contiguous:
        return None
    return functools.partial(current_region, place)


def _write_elementwise(ufunc, rule, tape, inputs, values, pattern, out, kwargs):
    traced, reads, state = differentiable(ufunc, rule, pattern, len(inputs))
    if type(out) is not Traced or out.tape is not tape:
        if traced:
            raise untraced_write(f"{function_name(ufunc)}(..., out=...)")
        return ufunc(*values, out=out, **kwargs)
    tape = active(tape)
    check_destination(out, ufunc)
    if out.value.dtype.kind == "c":
        check_complex(function_name(ufunc), rule)
    if out.buffer.constant:
        if not traced:  # constants only: what gradient reaches them goes nowhere
            write_constant(tape, out, None, lambda: ufunc(*values, out=out.value, **kwargs),
                           assign if rule is ASSIGNMENT else ufunc)
            return out
        out.buffer.constant = False  # it now holds values that depend on the arguments
    position = target_position(out, inputs)
    plan = WritePlan.at(ufunc, rule, kwargs, position, reads, state if traced else None,
                        len(inputs))

    def withheld(kept):
        """Whether the inverse is withheld (:func:`_kept_for_the_inverse`): the write is saved,
        or rebuilt under a budget: exact, for no more memory."""
        if tape.recomputation is None or not any(
                _kept_for_the_inverse(inputs[i], values[i], kept[i], tape, out)
                for i in plan.others_at):
            return False
        if tape.recorder is not None:  # a decision of the program's structure: replayed
            tape.recorder.withheld = True
        return True

    plan.run(tape, _destination(out), inputs, values,
             functools.partial(apart_from, out, inputs, position), withheld)
    return out


_NO_SETTINGS: types.MappingProxyType[str, object] = types.MappingProxyType({})
"""The keyword arguments of a write without any, as the plans of such writes share them."""


class WritePlan:
    """The elementwise write ``ufunc(*values, out=target)`` at one point of a program (an
    ``out=``, an augmented assignment, an assignment to a region), as the traced engine and
    the replay of its recording both do it (:meth:`run`): what the record keeps, the inverse
    it offers, how the overwritten bytes will be put back (decided afresh on the values at
    hand), the write and its record. ``partials``: the rule's plan for the traced operands
    (``elementwise.differentiable``; None: no gradient reaches the values written);
    ``withheld``: the program's recording offered no inverse (``Recorder.withheld``)."""

    __slots__ = ("ufunc", "rule", "kwargs", "position", "others_at", "reads", "partials",
                 "invertible", "primitive", "pullback", "redo")

    def __init__(self, ufunc, rule, kwargs, position, reads, partials, count, withheld=False):
        self.ufunc = ufunc
        self.rule = rule
        self.kwargs = kwargs
        self.position = position
        self.reads = reads
        self.partials = partials
        self.others_at = [i for i in range(count) if i != position]
        self.invertible = bool(not withheld and position is not None
                               and position < len(rule.inverse) and rule.inverse[position])
        self.primitive = assign if rule is ASSIGNMENT else ufunc
        self.pullback = write_pullback if partials is not None else None
        self.redo = Rerun.of(ufunc, kwargs)

    _shared = {}

    @classmethod
    def at(cls, ufunc, rule, kwargs, position, reads, partials, count):
        """The plan of a write (as constructed), one for all the writes of ``ufunc`` without
        keyword arguments by the same ``rule`` with the target at ``position`` and the same
        ``partials`` (those of a loop's statement): a plan is never changed once made."""
        if kwargs:
            return cls(ufunc, rule, kwargs, position, reads, partials, count)
        key = (ufunc, rule, position, partials, count)
        plan = cls._shared.get(key)
        if plan is None:
            if len(cls._shared) >= 4096:  # rules made on the fly cannot fill the memory
                cls._shared.clear()
            plan = cls._shared[key] = cls(ufunc, rule, _NO_SETTINGS, position, reads,
                                          partials, count)
        return plan


    def run(self, tape, destination, inputs, values, apart, withheld=None, named=None,
            decided=None):
        """Write and record, on ``tape``, into ``destination`` (a :class:`writes.Destination`)
        from the operands ``inputs`` and their ``values``: an inverse is on offer where the
        rule has one, ``apart()`` says no other operand lies over the target, and
        ``withheld(kept)`` (if given) does not withhold it. ``named`` and ``decided``: as
        :func:`record_write` takes them. Returns the record."""
        ufunc, rule, kwargs, target = self.ufunc, self.rule, self.kwargs, destination.value
        kept, state = write_kept(ufunc, rule, values, self.reads, self.partials, target)
        inverse = None
        if self.invertible:
            inverse = ElementwiseInverse(ufunc, rule, self.position, values, target, kept, apart,
                                         destination.find, kwargs)
            if withheld is not None and withheld(kept):
                inverse = None
        if kwargs:
            write = lambda: ufunc(*values, out=target, **kwargs)  # noqa: E731
        else:
            write = lambda: ufunc(*values, out=target)  # noqa: E731
        return record_write(self.primitive, destination, write,
                            Reads(inputs, values, kept, self.others_at, True, named),
                            Undo(inverse, redo=self.redo), pullback=self.pullback, state=state,
                            settings=kwargs or None, undo_first=rule.uses != "y", tape=tape,
                            decided=decided)


def assign(target, value):
    """``target[...] = value`` for the traced array ``target``, recorded as an assignment. A
    complex value into a real target keeps its real part, as NumPy's assignment does (with
    its ComplexWarning): the cast NumPy's ufuncs refuse unless told."""
    tape = value.tape if type(value) is Traced else None
    if type(target) is Traced and target.tape is tape and not value.buffer.weak \
            and not value.buffer.constant and value.value.dtype == target.value.dtype \
            and (tape.recorder is None or not tape.recorder.ready):
        # What ``apply_ufunc`` does with a traced value of the target's own dtype (neither a
        # number nor a constant) outside a recording, without asking: a scalar loop's writes
        return _write_elementwise(np.positive, ASSIGNMENT, tape, (value,), [value.value], 1,
                                  target, {})
    unsafe = target.dtype.kind == "f" and complex_among((value,))
    return apply_ufunc(np.positive, (value,), target, _UNSAFE if unsafe else None, ASSIGNMENT)


_UNSAFE = {"casting": "unsafe"}


# ----------------------------------------------------------------------------------------------
# Functions with pure rules


def _output(tape, y, leaves):
    """Wrap one output of a pure rule; returns ``(wrapped, is_fresh_buffer)``. (Under nested
    differentiation the output is an array an outer tape traces; it is wrapped the same way.)"""
    y = inexact_output(y)
    if isinstance(y, np.ndarray) or wrapped(y) or is_device(y):
        if y.dtype.kind not in "fc":
            return y, False
        for t in leaves:
            if itself(y, t.value):  # the input itself: the same place
                return Traced(y, t.buffer, tape, t.whole), False
        if memory(y).base is not None:
            root = owner(y)
            for t in leaves:
                if owner(t.value) is root:  # read-only views too: later writes show through
                    return view_of(t, y, tape), False
            if overlaps_itself(y):  # a broadcast of a constant: a buffer's shadow cannot be
                y = np.copy(y)      # laid out with elements that share memory
        return fresh(y, tape), True
    if isinstance(y, np.inexact):
        return fresh(y, tape), True
    return y, False


def apply_function(name, rule, args, kwargs, tape=None):
    """Run a pure ``rule`` on the plain values of ``args``, wrap and record its outputs."""
    arg_tape, values = _unwrap_args(args)
    tape = active(arg_tape or tape)
    if tape.recorder is not None and tape.recorder.ready:
        return tape.recorder.function(name, rule, args, kwargs, tape)
    out = kwargs.pop("out", None) if "out" in kwargs else None
    kwargs = _keyword_values(name, kwargs, tape)
    complex_values = complex_among(values)
    if complex_values:  # before the rule, which may refuse them for another reason
        check_complex(name, rule)
    y, back = rule(*values, **kwargs)
    if complex_values or complex_among(y if isinstance(y, (tuple, list)) else (y,)):
        back = complex_back(name, rule, back)
    leaves = list(_leaves(args, tape))
    if not leaves:  # constants and plain values only: nothing to record
        result = constant_result(y, tape, args)
        return result if out is None else assign(out, result)
    # The pullback may read the untraced arguments: keep them as they are.
    for x, v in zip(args, values, strict=True):
        if not (type(x) is Traced and x.tape is tape and not x.buffer.constant):
            keep(tape, x, v)
    for v in kwargs.values():
        freeze(tape, v)
    if isinstance(y, (tuple, list)):
        wrapped = [_output(tape, yi, leaves) for yi in y]
        items = [w for w, _ in wrapped]
        # Named tuples (eigh's EighResult) take their fields as separate arguments.
        result = type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    else:
        wrapped = [_output(tape, y, leaves)]
        result = wrapped[0][0]
    created = [w.buffer if is_fresh else None for w, is_fresh in wrapped]
    if leaves and any(created):
        _record_function(tape, name, rule, back, args, values, kwargs, created,
                         multiple=isinstance(y, (tuple, list)))
        if tape.anomaly is not None:
            tape.anomaly.produced(tape.records[-1], [*values, *kwargs.values()],
                                  [w for w, is_fresh in wrapped if is_fresh])
    if out is not None:
        if isinstance(y, (tuple, list)):
            raise UnsupportedOperationError(f"{name}(..., out=...) with several outputs.")
        if type(out) is np.ndarray:  # (assign would refuse it too, naming np.positive)
            raise untraced_write(f"{name}(..., out=...)")
        return assign(out, result)
    return result


def complex_back(name, rule, back):
    """The pullback of a rule that met complex values: its ``back`` as it is if the rule is
    written in mutad's convention; for a rule whose real formulas hold for complex values
    (``HOLOMORPHIC``), those give the transpose of the derivative, so the cotangents are
    conjugated around it to give the adjoint."""
    if check_complex(name, rule) is CONVENTION:
        return back

    def adjoint_back(dy):
        return _conjugated(back(_conjugated(dy)))

    return adjoint_back


def _conjugated(tree):
    """Each complex array in ``tree`` (tuples and lists of them) conjugated."""
    if type(tree) in (list, tuple):
        return type(tree)(_conjugated(x) for x in tree)
    if not complex_among((tree,)):
        return tree
    conjugated = np.conjugate(tree)  # of a 0-d array, NumPy's scalar: an array, as it came
    return np.asarray(conjugated) if type(tree) is np.ndarray else conjugated


PRIMITIVES = {}


def primitive(name, rule):
    """The ``Primitive`` that names ``rule`` as ``name`` in records, one per pair."""
    named = PRIMITIVES.get((name, rule))
    if named is None:
        named = PRIMITIVES[name, rule] = Primitive(name, rule)
    return named


def _record_function(tape, name, rule, back, args, values, kwargs, outputs, multiple):
    """Record a pure rule's ``back``: ``outputs`` are the buffers it created (None for other
    outputs); the record keeps places of the arguments, not the arguments."""
    places = [[locate(e, tape) for e in x] if type(x) in (list, tuple) else locate(x, tape)
              for x in args]
    # Cotangents that are memory of the arguments are never adopted as shadows; those of a
    # user's rule never at all (None): they may be arrays it keeps (facet user).
    primals = None if is_user_rule(rule) else {id(owner(x.value)) for x in _leaves(args, tape)}
    # The recipe names the constants the rule's pullback holds, and describes the others: the
    # record keeps no memory the pullback does not.
    held = _held_by(back)
    kept = [_if_held(v, held) for v in values]
    settings = {k: _if_held(v, held) for k, v in kwargs.items()} if kwargs else None
    record = Record(primitive(name, rule), recipe(args, values, kept, tape), settings,
                    tuple(b for b in outputs if b is not None), None,
                    (back, places, primals, outputs, multiple), function_pullback)
    if tape.recomputation is not None and is_recomputable(rule):
        for i, buffer in enumerate(outputs):
            if buffer is not None:
                tape.recomputation.give_recipe(record, i if multiple else None, buffer,
                                               settings)
    tape.record(record, SKIPPED + 1)  # called by apply_function, called by the engine


def _held_by(back):
    """The ids of the values the closure ``back`` holds."""
    held = set()
    for cell in getattr(back, "__closure__", None) or ():
        try:
            held.add(id(cell.cell_contents))
        except ValueError:  # an empty cell
            pass
    return held


def function_pullback(record, shadows, _):
    """The pullback of a pure rule: ``state`` is the rule's ``back``, the places of the
    arguments (None where none is differentiated), the ids of their memory, the buffers the
    rule created (None for other outputs), and whether it returned several outputs."""
    back, places, primals, outputs, multiple = record.state
    dys = [None if b is None else shadows.pop(b) for b in outputs]
    if all(dy is None for dy in dys):
        return
    if multiple:
        cotangents = back(tuple(zeros(b) if dy is None and b is not None
                                else dy for dy, b in zip(dys, outputs, strict=True)))
    else:
        cotangents = back(dys[0])
    rows = []
    for p, g in zip(places, cotangents, strict=True):
        if type(p) is list:  # a sequence argument: one place per item
            if g is not None:
                rows.extend((e, ge) for e, ge in zip(p, g, strict=True) if e is not None)
        elif p is not None:
            rows.append((p, g))
    add_cotangents(shadows, rows, primals)


def _written(func, args, kwargs):
    """The arguments a NumPy function may write into: its ``out``, the target of an in-place
    function, and every argument of a function mutad knows nothing about."""
    out = kwargs.get("out")
    position = out_position(func)
    if out is None and position is not None and len(args) > position:
        out = args[position]
    targets = list(out) if type(out) is tuple else [] if out is None else [out]
    rule = lookup(func)
    if rule.inplace is not None and args:
        targets.append(args[0])
    elif rule.reverse is None and not rule.nondifferentiable:
        targets.extend(flat(args))
    return targets


def apply_array_function(func, args, kwargs, tape):
    args = joined_operands(func, args)
    level = innermost((*args, *kwargs.values()), tape)
    if not carries((*args, *kwargs.values()), level):
        return on_constants(func, args, kwargs, level, _written(func, args, kwargs))
    entry = RULES.get(func, NO_RULE)
    rule = entry.reverse
    if rule is not None:
        args, kwargs = out_by_keyword(func, args, kwargs)  # np.dot(a, b, c): c is out
        args, kwargs = keywords_in_place(func, rule, args, kwargs)  # np.diff(x, append=a)
        return apply_function(function_name(func), rule, args, kwargs, tape)
    handler = entry.inplace or entry.composite
    if handler is not None:
        if complex_among(args):
            check_complex(function_name(func), handler)
        active(tape)
        return door(tape, handler, args, kwargs)
    if entry.nondifferentiable:
        out = next((t for t in _written(func, args, kwargs) if type(t) is Traced), None)
        if out is not None:
            return _nondiff_into(func, args, kwargs, out, level)
        if level.recorder is not None and level.recorder.ready:
            return level.recorder.nondiff(func, args, kwargs)
        return func(*plain(args), **plain(kwargs))
    raise no_rule(func)


def _nondiff_into(func, args, kwargs, out, tape):
    """``func(*args, out=out)`` for a function without a derivative (``np.round``) and a
    traced ``out``: its values are computed apart and assigned, so that the write is recorded
    (the gradient of what ``out`` held ends there) and undone as any assignment. Into an
    array of ``out``'s dtype and shape, by NumPy's own call: a result of another dtype
    (float32 ``out`` of float64 values) rounds at each of its steps, as NumPy's does."""
    args, kwargs = out_by_keyword(func, args, kwargs)  # np.round(x, 1, y): y is out
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    recorder = tape.recorder
    if recorder is not None and recorder.ready:
        # the replay redoes the two steps: the call, as any without a derivative, and the
        # assignment; where NumPy's result is not already out's dtype and shape, that would
        # not be NumPy's call, and the recording is refused
        y = recorder.nondiff(func, args, kwargs)
        if np.shape(y) == out.shape and getattr(y, "dtype", None) == out.dtype:
            assign(out, y)
            return out
        recorder.refuse(f"{function_name(func)}(..., out=...) into an array of another dtype "
                        "or shape than its result")
    values = np.empty(out.shape, out.dtype)
    func(*plain(args), out=values, **plain(kwargs))
    assign(out, values)
    return out


def door(tape, operation, args, kwargs):
    """``operation(*args, **kwargs)``, an operation whose records may be of any kind (a
    write, a composite of others): a recording replay redoes it as the engine does it, unless
    every record it makes is one of a step of its own (``replay.Recorder.door``)."""
    recorder = tape.recorder
    if recorder is not None and recorder.ready and recorder.soft is None:
        return recorder.door(operation, args, kwargs)
    return operation(*args, **kwargs)


def plain(tree):
    """``tree`` with every traced array replaced by its plain value (for non-differentiable
    functions, whose outputs carry no gradient)."""
    kind = type(tree)
    if kind is int or kind is slice:
        return tree
    if kind is Traced:
        return weak_value(tree.value) if tree.buffer.weak else tree.value
    if kind is Preexisting:  # an index the function made (np.arange): the array it views
        return tree.view(np.ndarray)
    if kind is list or kind is tuple:
        return kind([plain(x) for x in tree])
    if kind is dict:
        return {k: plain(v) for k, v in tree.items()}
    return tree


# ----------------------------------------------------------------------------------------------
# The traced array


def defers(tape, items):
    """Whether an operation on ``items`` belongs to a level inside ``tape``'s of another mode
    (a dual of an inner jvp): it then handles the operation. Values of outer levels are
    constants to ``tape``, and arrays of inner tapes are handled by this engine."""
    for x in items:
        if type(x) is not Traced and (isinstance(x, Tracer) or type(x) in (list, tuple)):
            inner = innermost_tracer(items)  # another kind of value takes part: by levels
            return type(inner) is not Traced and inner.level > tape.level
    return False


def _deeper(x, tape):
    """``defers`` for one operand."""
    return isinstance(x, Tracer) and type(x) is not Traced and x.level > tape.level


def _binary(ufunc):
    """Python's operators; on values that stand for Python numbers, they give one
    (``arraylike.weak_arithmetic``)."""

    def forward(self, other):
        if _deeper(other, self.tape):
            return NotImplemented
        result = apply_ufunc(ufunc, (self, other))
        return weak_arithmetic(result, other) if self.buffer.weak else result

    def reflected(self, other):
        if _deeper(other, self.tape):
            return NotImplemented
        result = apply_ufunc(ufunc, (other, self))
        return weak_arithmetic(result, other) if self.buffer.weak else result

    def inplace(self, other):
        if _deeper(other, self.tape):
            raise lost_tangent(f"augmented assignment ({ufunc.__name__})")
        if stands_for_scalar(self):
            result = apply_ufunc(ufunc, (self, other))
            return weak_arithmetic(result, other) if self.buffer.weak else result
        return apply_ufunc(ufunc, (self, other), out=self)

    return forward, reflected, inplace


class Traced(ArrayMethods):
    """A float array whose operations mutad records. Behaves like the ndarray it wraps."""

    __slots__ = ("value", "buffer", "tape", "whole", "__weakref__")  # (weakref: a recording)

    def __init__(self, value, buffer, tape, whole):
        self.value = value
        self.buffer = buffer  # the memory its shadow maps (a shadows.Buffer)
        self.tape = tape
        self.whole = whole  # whether value is that whole buffer, laid out as it

    level = property(lambda self: self.tape.level)

    def _set_weak(self, weak):
        self.buffer.weak = weak

    # Whether it stands for a Python number (``arraylike.weak``): a property of its buffer, a
    # 0-d one of its own.
    weak = property(lambda self: self.buffer.weak, _set_weak)

    # NumPy's protocols ---------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if stands_in(inputs, kwargs):
            return NotImplemented  # it hands the plain array it views to this method
        out = single_out(ufunc, kwargs)
        if defers(self.tape, inputs):
            return NotImplemented
        if method == "__call__":
            return apply_ufunc(ufunc, inputs, out, kwargs)
        if out is not None:
            kwargs["out"] = out
        level = innermost((*inputs, out))
        if not carries((*inputs, out), level):  # ufunc.at writes into its first operand
            written = (out, inputs[0]) if method == "at" else (out,)
            return on_constants(getattr(ufunc, method), inputs, kwargs, level, written)
        key = (ufunc, method)
        entry = RULES.get(key, NO_RULE)
        if entry.reverse is not None:
            return apply_function(f"np.{ufunc.__name__}.{method}", entry.reverse, inputs, kwargs)
        handler = entry.inplace or entry.composite
        if handler is not None:
            active(self.tape)
            return door(self.tape, handler, inputs, kwargs)
        if lookup(ufunc).nondifferentiable:
            if level.recorder is not None and level.recorder.ready:
                return level.recorder.nondiff(getattr(ufunc, method), inputs, kwargs)
            return getattr(ufunc, method)(*plain(inputs), **plain(kwargs))
        raise no_rule(key)

    def __array_function__(self, func, types, args, kwargs):
        if len(types) > 1 and (Preexisting in types or defers(self.tape, [*args, *kwargs.values()])):
            return NotImplemented
        return apply_array_function(func, args, kwargs, self.tape)

    def __array__(self, dtype=None, copy=None):
        """A constant converts as a plain array would (read-only once a record has read it:
        code without a rule must not change it behind mutad's back); a traced array cannot."""
        if dtype is not None and np.dtype(dtype).kind in "iub" and not self.buffer.constant:
            # Integers or booleans (k[:] = x into an integer array, np.asarray(x, int)): as
            # NumPy casts, whose derivative is zero; a replay guards the values made.
            value = self.value.astype(dtype)
            if self.tape.recorder is not None and self.tape.recorder.ready:
                self.tape.recorder.guard(self, value.tobytes(),
                                         lambda v: np.asarray(v).astype(dtype).tobytes())
            return value
        if not self.buffer.constant:
            raise conversion_error("np.asarray")
        if self.tape.recorder is not None and self.tape.recorder.ready:
            self.tape.recorder.refuse("the conversion of an array allocated in the function to "
                                      "a plain array")
        value = np.asarray(self.value)
        if self.buffer.read or type(self.buffer.ref) is Held:
            # Read-only: a record needs its values, or it is the caller's argument, whose
            # writes must be followed to be undone.
            value = value.view()
            value.flags.writeable = False
            self.tape.read_views = True  # a write through it: api explains NumPy's error
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def constant_here(self):
        """Whether no derivative of this differentiation flows through it."""
        return self.buffer.constant

    def unwritten_constant(self):
        return self.buffer.constant and self.buffer.version == 0 and not self.buffer.read

    def plain_value(self):
        """The plain array a constant stands for (``ArrayMethods``), None if traced."""
        return self.__array__() if self.buffer.constant else None

    def _converted(self, what):
        recorder = self.tape.recorder
        if recorder is None or not recorder.ready:
            return ArrayMethods._converted(self, what)
        recorder.ready = False  # not a conversion of the program's own: a decision of Python's
        try:
            value = ArrayMethods._converted(self, what)
        finally:
            recorder.ready = True
        recorder.guard(self, value.tobytes())
        return value

    def __index__(self):
        value = self._converted("an index")
        if value.ndim or value.dtype.kind not in "iub":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return operator.index(value[()])

    @property
    def shape(self):
        return self.value.shape

    @shape.setter
    def shape(self, shape):
        """``x.shape = ...`` reshapes in place as NumPy does (a view of the same memory, or
        NumPy's error where none exists), for an array made inside the function; an argument's
        array stands for the caller's, whose shape stays."""
        if any(key == self.buffer.key for entries in self.tape.arguments.values()
               for _, key in entries):
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

    def _decided(self, decide):
        """What Python reads of the value (``ArrayMethods._decided``), guarded by a replay."""
        taken = ArrayMethods._decided(self, decide)
        if self.tape.recorder is not None and self.tape.recorder.ready:
            self.tape.recorder.guard(self, taken, lambda value: decide(numpy_value(value)))
        return taken

    def __repr__(self):
        return self._decided(lambda v: f"Traced({np.asarray(v)!r})")

    offset = property(lambda self: address(self.value) - self.buffer.low)

    def owner_view(self):
        """This traced array's view of all of its memory (``views.owner_view``)."""
        return view_of(self, owner_view(self.value), self.tape)

    def restrided(self, shape, dtype, offset, strides):
        """The view of this one-dimensional array at byte ``offset`` (``views.strided``)."""
        return view_of(self, strided(self.value, shape, dtype, offset, strides), self.tape)

    # indexing -------------------------------------------------------------------------------

    def __getitem__(self, key):
        if self.tape.recorder is not None and self.tape.recorder.ready:
            return self.tape.recorder.getitem(self, key)
        if self.buffer.constant:
            return constant_result(self.value[plain(key)], self.tape, (self,))
        return getitem(self, key)

    def __setitem__(self, key, value):
        if stands_for_scalar(self):  # immutable, as NumPy's scalars are
            raise item_assignment_refused(self)
        if type(value) is Preexisting:
            value = value.view(np.ndarray)
        if type(value) is np.ndarray:
            check_alias(value)
        recorder = self.tape.recorder
        if recorder is not None and recorder.ready and recorder.soft is None:
            return recorder.door(Traced.__setitem__, (self, key, value), {})
        if _deeper(value, self.tape):
            raise lost_tangent("x[key] = value")
        if self.buffer.constant and innermost((value,), self.tape) is self.tape:
            if not carries((value,), self.tape):
                if self.tape.recorder is not None and self.tape.recorder.ready:
                    return self.tape.recorder.constant_setitem(self, key, value)
                key, value = plain(key), values_at(value, self.tape)
                write_constant(self.tape, self, key, lambda: self.value.__setitem__(key, value))
                return
            self.buffer.constant = False  # a traced value written: it now depends on them
        setitem(self, key, value)

    # operators (the binary ones: install_operators below) -----------------------------------

    def __neg__(self):
        result = apply_ufunc(np.negative, (self,))
        return weak_arithmetic(result) if self.buffer.weak else result

    def __pos__(self):
        result = apply_ufunc(np.positive, (self,))
        return weak_arithmetic(result) if self.buffer.weak else result

    def __abs__(self):
        result = apply_ufunc(np.absolute, (self,))
        if stands_for_scalar(self):  # of a complex scalar: NumPy's scalar math rounds otherwise
            put_right(result, abs, self.value[()])
        return weak_arithmetic(result) if self.buffer.weak else result

    def astype(self, dtype, **kwargs):
        return apply_function("ndarray.astype", RULES[np.ndarray.astype].reverse, (self, dtype),
                              kwargs)


install_operators(Traced, _binary)


# ----------------------------------------------------------------------------------------------
# Decorated functions with user rules (mutad.adjoint, mutad.inplace_adjoint)


def apply_inplace_rule(name, rule, args, kwargs, writes, checkpointed, growth, run_rule):
    """Run an in-place rule on the plain values of ``args`` and record its ``back``.

    ``writes`` are the positions of the arguments the function may write; ``checkpointed``
    those whose bytes mutad saves (the rule declared it cannot restore them): under
    ``policy="checkpoint"`` every written argument is saved. ``growth(*values)`` (or None: 1)
    bounds how much the rule's restoration amplifies relative errors (``Tape.undo_for``). ``back`` always runs on the
    state the function left and restores what it can; saved arguments are copied back after it.
    ``run_rule(*values, **kwargs)`` returns ``(back, result)``, ``result`` being what the
    function returned; arguments in it come back as the traced arguments themselves.
    """
    tape, values = _unwrap_args(args)
    tape = active(tape)
    if tape.recorder is not None and tape.recorder.ready and tape.recorder.soft is None:
        return tape.recorder.door(apply_inplace_rule, (name, rule, args, kwargs, writes,
                                                       checkpointed, growth, run_rule), {})
    kwargs = _keyword_values(name, kwargs, tape)
    if complex_among(values):  # a rule takes them only if it said so (facet complex)
        check_complex(name, rule)
    if not carries(args, tape):  # constants and plain values only: it runs as on plain arrays
        for i in writes:
            if i < len(args) and type(args[i]) is Traced and args[i].tape is tape:
                write_constant(tape, args[i], None, lambda: None)
        return _map_result(name, run_rule(*values, **kwargs)[1], args, values, tape)
    for i in writes:
        if i < len(args) and isinstance(args[i], np.ndarray) and args[i].dtype.kind in "fc":
            raise untraced_write(f"{name} writes into argument {i} while other arguments are "
                                 "traced")
    written = [(i, args[i]) for i in writes
               if i < len(args) and type(args[i]) is Traced and args[i].tape is tape]
    for _, t in written:
        check_destination(t, name)
    for _, t in written:  # the values written depend on the traced arguments
        t.buffer.constant = False
    # growth bounds rounding errors, a number: taken of the plain numbers (memory), which an
    # enclosing differentiation does not follow (hessian, hvp, check_grads(order=2)).
    factor = 1.0 if growth is None or not written else float(
        growth(*map(memory, values), **{k: memory(v) for k, v in kwargs.items()}))
    kept = [None if i in writes else v for i, v in enumerate(values)]
    ran = []
    held = {id(v) for v in values}
    record = record_write(
        primitive(name, rule), [t for _, t in written],
        lambda: ran.append(run_rule(*values, **kwargs)), Reads(args, values, kept),
        Undo([None if i in checkpointed else _rule_restores for i, _ in written],
             growth=factor),
        pullback=_inplace_rule_pullback, taken=False, undo_first=False,
        settings={k: _if_held(v, held) for k, v in kwargs.items()} or None)
    back, result = ran[0]
    if not callable(back):
        raise RuleError(f"the in-place rule of {name} must return its back function.")
    record.state = (back, values, [locate(x, tape) for x in args])
    return _map_result(name, result, args, values, tape)


def _inplace_rule_pullback(record, shadows, _):
    """Run an in-place rule's ``back`` on the shadows of its arguments (``state``: ``back``,
    the arguments' values, and the places of those it differentiates)."""
    back, values, places = record.state
    # Nested in another differentiation, the values are arrays it traces, and so must be the
    # shadows the rule accumulates into: made like the values. A read-only argument whose
    # elements share memory gets zeros to accumulate into, added up afterwards.
    summed = [np.zeros_like(v) if p is not None and overlapping(p) else None
              for p, v in zip(places, values, strict=True)]
    back(*(s if s is not None else None if p is None else shadows.of(p, like=v)
           for p, v, s in zip(places, values, summed, strict=True)))
    for p, s in zip(places, summed, strict=True):
        if s is not None:
            shadows.add(p, s)


def _rule_restores():
    """The undo of an in-place rule that restores its own arguments in ``back``."""


def _map_result(name, result, args, values, tape):
    """What an in-place function returned, with its arguments replaced by the traced ones."""
    if type(result) in (tuple, list):
        return type(result)(_map_result(name, r, args, values, tape) for r in result)
    if not (isinstance(result, np.ndarray) or wrapped(result) or is_device(result)) \
            or result.dtype.kind not in "fc":
        return result
    for x, value in zip(args, values, strict=True):
        if type(x) is Traced and x.tape is tape:
            if itself(result, value):
                return x
            if views(result, value):
                return view_of(x, result, tape)
    raise UnsupportedOperationError(
        f"{name} returned a new float array from an in-place rule: its gradient would be lost. "
        "Return the arguments it wrote into, and give new outputs a pure rule (mutad.adjoint).")


# ----------------------------------------------------------------------------------------------
# Indexing and assignment: the engine's view and write semantics


def writes_into(call, target, *values):
    """Whether ``call``, writing ``values`` into ``target``, writes into an array a
    differentiation traces; refuses to write a traced value into an array mutad does not trace."""
    tape = innermost((target, *values))
    if carries(values, tape):
        if type(target) is not Traced or target.tape is not tape:
            raise untraced_write(call)
        target.buffer.constant = False  # a constant written with traced values is traced
    return type(target) is Traced


def overlaps(target, value, region=None):
    """Whether the memory of the array ``value`` may overlap ``region`` of ``target`` (all of it
    by default): traced by this differentiation, by an enclosing one (whose arrays a nested
    one's arguments may be) or by none."""
    return ((isinstance(value, np.ndarray) or wrapped(value) or is_device(value))
            and may_overlap(value, target.value if region is None else region))


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
    ``source`` whose value it took."""
    target_twin, source_twin = _twins(target, source)
    before = target_twin.copy()
    write(target_twin, source_twin)
    changed = target_twin != before
    origins = target_twin[changed]
    if np.any(origins < 0):
        raise MutadError(
            "a write copied values that do not come from its source, so mutad cannot tell what "
            "it differentiates; copy the source first (x[key] = v.copy()).")
    return changed, origins


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
    changed, origins = _provenance(write, memory(target.value), layout)
    checked = not (wrapped(target.value) or wrapped(source))
    if checked:
        expected = np.take(layout, origins)  # before the write, which may overwrite the source

    def checked_write():
        write(target.value, source)
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


# ----------------------------------------------------------------------------------------------
# x[key] and x[key] = value: views, gathers and scatters (the engine's, not rules)


def _has_integer_array(key):
    items = key if type(key) is tuple else (key,)
    return any(isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype.kind in "iu"
               for k in items)


def _repeats(x, key):
    """Whether the advanced index ``key`` names an element of ``x`` more than once (negative
    indices count from the end, so ``[0, -n]`` repeats too)."""
    if not _has_integer_array(key):
        return False
    written = np.zeros(x.shape, bool)
    written[key] = True
    return np.count_nonzero(written) < written[key].size


def getitem(x, key):
    """``x[key]``: a view for basic indexing (no record), else a gather."""
    tape = active(x.tape)
    basic = _plain_index(key)  # (a loop's key: nothing to make plain or freeze)
    if not basic:
        key = plain(key)
    y = x.value[key]
    if not isinstance(y, np.generic) and views(y, x.value):  # (NumPy's scalar: a copy)
        return view_of(x, y, tape)
    yt = fresh(y, tape)
    source = locate(x, tape)
    if not basic:
        freeze(tape, key)
    tape.record(Gathered(operator.getitem, (source, key), None, yt.buffer, None,
                         (not basic and _has_integer_array(key)) or overlapping(source)))
    return yt


class Gathered(OneOutput):
    """The record of ``x[key]`` that copies (an advanced index, one element): ``inputs`` are
    the place of ``x`` and the key, ``state`` whether an element may have come from one place
    several times (repeated indices, a view whose elements share memory). A scalar loop makes
    one per element it reads: a record of the kind's own pullback, with no tuple of outputs."""

    __slots__ = ()

    @staticmethod
    def pullback(record, shadows, _):
        """Add the cotangent back where each element came from, each repeat its share."""
        dy = shadows.pop(record.output)
        if dy is None:
            return
        source, key = record.inputs
        if record.state:
            shadows.add_at(source, key, dy)
        else:
            region = shadows.of(source, like=dy)
            region[key] += dy


def setitem(x, key, value):
    """``x[key] = value``: the core's in-place path on the view ``x[key]``, or a scatter; NumPy's
    own assignment where the value overlaps its target or an index repeats."""
    tape = active(x.tape)
    writes_into("x[key] = value", x, value)
    check_destination(x, "x[key] = value")
    if tape.recorder is not None and tape.recorder.ready:
        for t in _traced_in(key):  # a replay redoes the write at these positions: guarded
            tape.recorder.guard(t, t.value.tobytes())
    if not _plain_index(key):
        key = _integers_as_scalars(plain(key))
    region = x.value[key]
    # (NumPy's scalar: one element, copied; otherwise a view, or an advanced index's copy)
    viewing = not isinstance(region, np.generic) and views(region, x.value)
    if viewing or getattr(region, "ndim", 0) == 0:
        element = not viewing
        index = key
        if element:  # x[i] = v with a scalar element: a 0-d view
            index = (key if type(key) is tuple else (key,)) + (Ellipsis,)
            region = x.value[index]
        else:
            value = _without_leading_ones(value, region.ndim)
        if type(value) is Traced and value.buffer is x.buffer and value.tape is tape \
                and same_region(value.value, region):
            return  # `x[k] += v` ends by assigning the updated view onto itself: nothing to do
        if not overlaps(x, value, region):
            target = view_of(x, region, tape)
            if tape.recorder is not None and tape.recorder.ready:
                tape.recorder.view(x, index, target)
            assign(target, value)
        elif element:  # NumPy's own rules for assigning one element
            copy_into(operator.setitem, x, value, lambda t, v: operator.setitem(t, key, v),
                      {"key": key})
        else:  # x[key] = v is view[...] = v: only the view's memory is asked about
            copy_into(operator.setitem, view_of(x, region, tape), value,
                      lambda t, v: operator.setitem(t, Ellipsis, v), {"key": Ellipsis})
    elif overlaps(x, value) or _repeats(x.value, key):
        copy_into(operator.setitem, x, value, lambda t, v: operator.setitem(t, key, v),
                  {"key": key})
    else:
        _scatter(tape, x, key, value)


def _traced_in(key):
    return [k for k in (key if type(key) is tuple else (key,)) if type(k) is Traced]


def _plain_index(key):
    """Whether ``key`` is a Python integer or slice, or a tuple of them, which neither
    :func:`plain` nor :func:`_integers_as_scalars` changes, and which holds no array to freeze
    (the keys of loops over elements and rows, checked first for speed)."""
    kind = type(key)
    if kind is int or kind is slice:
        return True
    if kind is not tuple:
        return False
    for k in key:
        if type(k) is not int and type(k) is not slice:
            return False
    return True


def _integers_as_scalars(key):
    """``key`` with each 0-d integer array as the integer it holds: to NumPy an advanced index
    (``x[np.array(1)]`` is a copy), which writes the same element as the integer does, and
    with the integer the element is a view the core can write through."""
    if type(key) is int:
        return key
    if type(key) is tuple:
        return tuple([_integers_as_scalars(k) for k in key])
    if type(key) is np.ndarray and key.ndim == 0 and key.dtype.kind in "iu":
        return key[()]
    return key


def _without_leading_ones(value, ndim):
    """``value`` without the leading length-1 axes that NumPy's assignment drops to fit a
    target of ``ndim`` axes (``x[0, ...] = v[1:2]``), which a ufunc's ``out=`` would refuse."""
    shape = value.shape if hasattr(value, "shape") else np.shape(value)
    drop = 0
    while len(shape) - drop > ndim and shape[drop] == 1:
        drop += 1
    return np.reshape(value, shape[drop:]) if drop else value


def _scatter(tape, x, key, value):
    """``x[key] = value`` with an advanced index naming each element once, its value apart from
    ``x``: checkpoint the region, write, record."""
    here = type(value) is Traced and value.tape is tape
    target = x.value
    source = value.value if here else value
    value_place = locate(value, tape)

    def pullback(record, shadows, dy):
        shadows.add(value_place, unbroadcast(dy, value_place.shape), owned=True)

    record_write(operator.setitem, x, lambda: target.__setitem__(key, source),
                 Reads((x, key, value), (target, key, source), [None, key, None]),
                 Undo(save=lambda: CopyBack(target, key)),
                 pullback=None if value_place is None else pullback, key=key)
