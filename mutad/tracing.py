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
* in-place (``out=``, augmented assignment, slice assignment): decide how the overwritten bytes
  will be put back (``Tape.undo_for``), write, and record a pullback that reads the cotangent of
  the new values from the target's shadow and zeroes it there (``Shadows.take``), undoes the
  write, then runs the rule's pullback.
* indexing (``x[key]``, ``x[key] = v``), handled by ``rules/indexing.py`` through the same
  paths: basic indexing gives views, assignment to them is the in-place path.
* non-differentiable: run on plain values, return plain results.

Differentiations nest. Each has a level (``levels.LEVELS``), and an operation belongs to the
innermost tape among its operands (``innermost``): arrays traced by outer tapes are its
constants, and its own values are arrays the outer one traces (``ReverseTape.lift``), so
everything the inner differentiation does, its reverse pass included, is recorded by the outer
one. Forward mode's duals (``forward.py``) take part through the same levels: a traced array
defers to a value of a deeper level of the other mode (``defers``), and a dual of an outer
level is a constant to a tape.
"""

import operator
import zlib

import numpy as np

from .arraylike import (ArrayMethods, conversion_error, install_operators, lost_tangent,
                        out_by_keyword, out_position, single_out, stands_for_scalar,
                        untraced_write)
from .errors import (
    ConstantModifiedError,
    RuleError,
    ReadOnlyError,
    UnsupportedArrayError,
    UnsupportedFunctionError,
    UnsupportedOperationError,
    function_name,
)
from .levels import ACTIVE, LEVELS, Tracer, escaped
from .levels import innermost as innermost_tracer
from .products import CHUNK, times_partial
from .registry import (COMPOSITES, FUNCTIONS, INPLACE, NONDIFF, ONE, UFUNCS, ElementwiseRule,
                       NoClosedForm)
from .shadows import Buffer, Place, overlapping
from .tape import Tape
from .trees import unsupported_array
from .views import (address, itself, may_overlap, memory, overlaps_itself, owner, owner_view,
                    same_region, strided, views, wrapped)

CONSTANT = ElementwiseRule((None, None, None))
"""The rule of a non-differentiable ufunc writing into a traced array: no gradient flows."""


class ReverseTape(Tape):
    """The tape of one reverse-mode differentiation, and what the engine keeps beside its
    records: its level, the differentiation it is nested in (``outer``, None at the top), and
    the untraced arrays its records read (``freeze``)."""

    __slots__ = ("level", "outer", "frozen", "sums")

    def __init__(self, policy, outer):
        super().__init__(policy)
        self.level = next(LEVELS)
        self.outer = outer
        self.frozen = {}  # untraced arrays records read, kept read-only while the tape lives
        self.sums = {}  # the checksums of their bytes, checked before the replay

    def lift(self, y):
        """``y`` as an array this tape traces, a constant to it unless it already is traced
        by it.

        Under nested differentiation every value of the inner one is an array the outer one
        traces, so that whatever the inner one writes into it (values that depend on the
        outer arguments, restorations, shadow updates) is recorded by the outer one."""
        if type(y) is Traced and y.tape is self:
            return y
        return fresh(y, self)

    def constant(self, y):
        """``y`` as an array this tape follows, a constant of it unless it already is its
        array."""
        if type(y) is Traced and y.tape is self:
            return y
        return constant(y, self)


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
    """Plain values of ``items``, the tape of the traced ones, and which are traced (a bit
    mask: bit i for item i)."""
    tape = None
    values = []
    traced = 0
    for i, x in enumerate(items):
        if type(x) is Traced:
            if tape is None:
                tape = x.tape
            elif x.tape is not tape:  # nested differentiations: rare, so checked apart
                return _unwrap_at(items, innermost(items))
            values.append(x.value)
            if not x.buffer.constant:
                traced |= 1 << i
        else:
            values.append(x)
    return tape, values, traced


def _unwrap_at(items, tape):
    """``_unwrap`` for ``tape``: arrays traced by other (outer) tapes stay as they are. A
    constant whose differentiation has ended (kept in a cache, say) is the plain array it
    holds."""
    values = []
    traced = 0
    for i, x in enumerate(items):
        if type(x) is Traced and x.tape is tape:
            values.append(x.value)
            if not x.buffer.constant:
                traced |= 1 << i
        elif ended(x):
            values.append(memory(x))
        else:
            values.append(x)
    return tape, values, traced


def ended(x):
    """Whether ``x`` is a constant whose differentiation is no longer running."""
    return type(x) is Traced and x.buffer.constant and x.tape not in ACTIVE.running


def _unwrap_args(args):
    """Like ``_unwrap``, one level into lists and tuples (``np.concatenate([a, b])``)."""
    tape = innermost(args)
    values = []
    for x in args:
        if type(x) is Traced and x.tape is tape:
            values.append(x.value)
        elif type(x) in (list, tuple) and any(type(e) is Traced for e in x):
            values.append(type(x)(_unwrap_at(x, tape)[1]))
        elif ended(x):
            values.append(memory(x))
        else:
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


def unbroadcast(g, shape):
    """Sum ``g`` over the axes along which an input of ``shape`` was broadcast."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if stretched:
        g = g.sum(axis=stretched, keepdims=True)
    return g.reshape(shape)


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
            _protect(tape, value)
    elif type(value) in (list, tuple):
        for item in value:
            freeze(tape, item)


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


def _protect(tape, value):
    chain = [value]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    root = chain[-1]
    if root.flags.writeable or id(root) in tape.frozen:
        # Owner first: a view can be made writable again only while its owner is.
        for a in reversed(chain):
            if a.flags.writeable:
                a.flags.writeable = False
                tape.frozen[id(a)] = a
    # One sum per region read, keyed by where it lies (a new slice of the same bytes on every
    # step is summed once); the array is kept so that its id stays its own.
    region = (address(value), value.shape, value.strides, value.dtype.str)
    if region not in tape.sums:
        tape.sums[region] = (value, _checksum(value))
    tape.sums[id(value)] = (value, None)


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
    for value, total in tape.sums.values():
        if total is not None and _checksum(value) != total:
            raise ConstantModifiedError(
                f"an array of shape {value.shape} that an operation mutad recorded read as a "
                "constant was changed before the gradient was computed (through a view of its "
                "memory made before the differentiation started, which mutad cannot make "
                "read-only, or by another thread). Its old values are needed by the gradient: "
                "allocate it inside the differentiated function (mutad then follows its "
                "writes), or write into a new array instead.")


def thaw(tape):
    """Make the arrays ``freeze`` made read-only writable again (owners first)."""
    frozen, tape.frozen = tape.frozen, {}
    for a in frozen.values():
        a.flags.writeable = True
    tape.sums.clear()


def checkpoint(region):
    """Save ``region`` before it is overwritten; return the callable that copies it back."""
    saved = region.copy()
    return lambda: np.copyto(region, saved)


def fresh(y, tape):
    """Wrap a fresh float result as a buffer of its own."""
    if isinstance(y, (np.generic, float, int)):  # NumPy gives scalars for 0-d results
        y = np.array(y)
        y.flags.writeable = False  # as a NumPy scalar: see stands_for_scalar
    elif type(y) is not np.ndarray and isinstance(y, np.ndarray):
        raise UnsupportedArrayError(unsupported_array(
            y, "a result computed from a traced array and an array the function uses"))
    if tape.outer is not None:
        y = tape.outer.lift(y)
    return Traced(y, Buffer(y), tape, True)


def constant(y, tape):
    """Wrap a float array made inside the differentiated code, whose values do not depend on
    the arguments, as a constant of ``tape``: operations on constants alone run as on plain
    arrays and record nothing, and writing a traced value into one makes it traced (its
    buffer's ``constant`` state). Its value is an array the enclosing differentiations follow,
    as ``fresh`` makes it (a constant of theirs)."""
    if isinstance(y, (np.generic, float, int)):
        y = np.asarray(y)
    if tape.outer is not None:
        y = tape.outer.constant(y)
    return Traced(y, Buffer(y, constant=True), tape, True)


def constant_result(y, tape, sources):
    """The result of an operation on constants of ``tape`` (and plain values): an argument
    itself, a view of a constant's memory (the same buffer), a plain non-float value, or a
    new constant. ``sources`` are the operation's arguments."""
    if type(y) in (tuple, list):
        items = [constant_result(item, tape, sources) for item in y]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    if isinstance(y, np.floating):
        y = np.asarray(y)
    if not (type(y) is np.ndarray or wrapped(y)) or y.dtype.kind != "f":
        return y
    root = owner(y)
    for x in _flat(sources):
        if type(x) is Traced and x.tape is tape:
            if itself(y, x.value):
                return x
            if x.buffer.constant and owner(x.value) is root:
                return view_of(x, y, tape)
        elif type(x) is np.ndarray and owner(x) is root:
            return y  # a view of a plain array stays plain
    return constant(y, tape)


def _flat(items):
    for x in items:
        if type(x) in (list, tuple):
            yield from _flat(x)
        else:
            yield x


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


def write_constant(tape, target, key, write):
    """Run ``write()``, which writes constants into ``target[key]`` (``key`` None: all of it),
    a constant of ``tape``. If a record already read its buffer, the bytes about to be
    overwritten are saved and put back in the replay, so that record reads them again."""
    if target.buffer.read:
        value = target.value
        if key is None:
            restore = checkpoint(value)
        else:
            region = value[key]
            if views(region, value):
                restore = checkpoint(region)
            else:  # an advanced index, or one element: a copy of what it selects
                saved = np.copy(region)

                def restore():
                    value[key] = saved

        tape.record(lambda shadows: restore())
    write()


def on_constants(call, args, kwargs, tape, written=()):
    """``call(*args, **kwargs)`` where every array of ``tape`` among the arguments is a
    constant: run on their values, as on plain arrays, recording nothing but the undoing of
    writes into constants a record has read (``written``: the arguments it may write)."""
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
    if x.whole:
        return x.buffer  # a buffer is the place of all of itself
    value = x.value
    return Place(x.buffer, False, address(value) - x.buffer.low, value.shape, value.strides,
                 value.dtype)


def _add_all(shadows, rows, primals):
    """Accumulate ``(place, cotangent)`` rows. A fresh cotangent may become the shadow itself,
    unless another row already took the same memory or it is memory of the inputs
    (``primals``: ids of their owners)."""
    taken = set(primals)
    for p, g in rows:
        if g is None:
            continue
        if getattr(g, "shape", None) != p.shape:
            g = np.broadcast_to(g, p.shape)
        root = id(owner(g))
        shadows.add(p, g, owned=root not in taken)
        taken.add(root)


# ----------------------------------------------------------------------------------------------
# Elementwise ufuncs


def _elementwise_cotangents(shadows, rule, dy, y, places, values, traced):
    """Accumulate ``dy * partial`` into each traced input; the last one reuses ``dy``'s memory."""
    last = traced[-1]
    rows = []
    for i in traced:
        partial = rule.partials[i]
        if partial is ONE and i != last and places[i].shape == dy.shape \
                and shadows.get(places[i]) is not None:
            shadows.add(places[i], dy)  # an existing shadow takes dy as it is: no copy
            continue
        if partial is ONE:
            g = dy if i == last else dy.copy()
        else:
            g = times_partial(dy, partial, y, values, dy if i == last else np.empty_like(dy))
        rows.append((places[i], unbroadcast(g, places[i].shape)))
    for p, g in rows:
        shadows.add(p, g, owned=True)


def _differentiable(ufunc, rule, pattern, count):
    """The positions of the inputs that get a gradient, and of those their partials read:
    worked out once per rule and ``pattern`` of traced inputs (bit i: input i is traced)."""
    plan = rule.plans.get(pattern)
    if plan is None:
        traced = [i for i in range(count) if pattern >> i & 1 and rule.partials[i] is not None]
        for i in traced:
            if type(rule.partials[i]) is NoClosedForm:
                raise rule.partials[i].error(ufunc)
        read = {j for i in traced for j in rule.reads[i]}
        plan = rule.plans[pattern] = (traced, None if len(read) == count else read)
    return plan


def _read_by_partials(values, read):
    """``values`` with None for every input no partial reads (``read`` None: all are read)."""
    if read is None:
        return values
    return [v if i in read else None for i, v in enumerate(values)]


def apply_ufunc(ufunc, inputs, out=None, kwargs=None):
    if out is None:
        tape, values, pattern = _unwrap(inputs)
    else:  # the target takes part in choosing the level
        tape, values, pattern = _unwrap((*inputs, out))
        values.pop()
        pattern &= ~(1 << len(inputs))
    kwargs = dict(kwargs) if kwargs else {}
    if not pattern and (out is None or (type(out) is Traced and out.tape is tape
                                        and out.buffer.constant)):
        return _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape)
    if kwargs.get("where", True) is not True:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}(..., where=...) on traced arrays: compute both branches and "
            "select with np.where(mask, new, old) instead.")
    rule = UFUNCS.get(ufunc)
    if rule is None and ufunc in FUNCTIONS:  # generalized ufuncs (matmul) have function rules
        if out is not None:
            kwargs["out"] = out
        return apply_function(f"np.{ufunc.__name__}", FUNCTIONS[ufunc], inputs, kwargs)
    if rule is None:
        if ufunc not in NONDIFF:
            raise UnsupportedFunctionError(
                f"{function_name(ufunc)} has no differentiation rule in mutad. Give it one with "
                "mutad.adjoint, or compute it from ufuncs mutad differentiates.")
        if out is None:
            return ufunc(*values, **kwargs)
        rule = CONSTANT
    if out is not None:
        return _write_elementwise(ufunc, rule, tape, inputs, values, pattern, out, kwargs)
    active(tape)
    yt = fresh(ufunc(*values, **kwargs), tape)
    traced, reads = _differentiable(ufunc, rule, pattern, len(inputs))
    if not traced:
        return yt
    y = yt.value if "y" in rule.uses else None
    read = _read_by_partials(values, reads)
    for i, v in enumerate(read):
        if pattern >> i & 1 == 0:
            keep(tape, inputs[i], v)
    if rule.decide is not None:
        read = [*read, rule.decide(*values)]
    places = [locate(x, tape) for x in inputs]
    buffer = yt.buffer

    def back(shadows):
        dy = shadows.pop(buffer)
        if dy is not None:
            _elementwise_cotangents(shadows, rule, dy, y, places, read, traced)

    tape.record(back)
    return yt


def _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape):
    """A ufunc whose operands are constants and plain values, written into a constant or
    into a new array: it runs as on plain arrays."""
    if out is None:
        return constant_result(ufunc(*values, **kwargs), tape, inputs)
    write_constant(tape, out, None, lambda: ufunc(*values, out=out.value, **kwargs))
    return out


def _may_overlap(target, x):
    return type(x) is Traced and x.buffer is target.buffer and may_overlap(x.value, target.value)


ULPS = 2
"""The restore policy's per-element guarantee: where an elementwise write is undone by its
inverse, each element comes back within this many units in the last place of the value it
held (bit for bit where that is zero or subnormal), given the bytes the write left; any other
element is saved before the write."""


def _exactly(inverse, ufunc, invert, target, values, position, kwargs):
    """``inverse``, made to give back every element of ``target`` that ``ufunc(*values,
    out=target)`` is about to overwrite to within ``ULPS``.

    Run before the write: the write and its inverse are computed on the values at hand, a piece
    at a time into scratch memory, and the elements the inverse would not give back (an
    underflow, an overflow, a small term absorbed by a large one, a division by zero) are saved
    now, as a bit mask and their values, and put back after the inverse runs. The replay
    computes the same correctly rounded operations on the same bytes, so it gives back what was
    verified here. An inverse marked ``bounded_where_normal`` (a product undone by a division)
    is within ``ULPS`` wherever the write's result is a normal float, so that is all a piece is
    checked for before its elements are. Under nested differentiation (the target is an array an outer one traces),
    saved values would have to be traced too: the whole region is checkpointed instead.
    """
    plain = [memory(v) if wrapped(v) else v for v in values]
    plain[position] = memory(target)
    bounded = getattr(invert, "bounded_where_normal", False)
    saved = []
    scratch = None
    with np.errstate(all="ignore"):  # the write itself warns, as NumPy does
        for where, piece, operands in _pieces(plain, position):
            if scratch is None or scratch[0].size < piece.size:
                scratch = np.empty(piece.size, piece.dtype), np.empty(piece.size, bool)
            back = scratch[0][:piece.size].reshape(piece.shape)
            ufunc(*operands, out=back, **kwargs)
            if bounded and _normal(back):
                continue
            invert(back, [v for i, v in enumerate(operands) if i != position])
            lost = _far(back, piece, scratch[1][:piece.size].reshape(piece.shape))
            if not lost.any():
                continue
            if wrapped(target):
                return checkpoint(target)
            saved.append((where, np.packbits(lost), piece[lost]))
    if not saved:
        return inverse

    def inverse_then_put_back():
        with np.errstate(all="ignore"):  # at the elements put back below
            inverse()
        for where, packed, original in saved:
            region = target if where is None else target.reshape(-1)[where]
            lost = np.unpackbits(packed, count=region.size).view(bool)
            region[lost.reshape(region.shape)] = original

    return inverse_then_put_back


def _pieces(values, position):
    """``(where, piece, operands)``: the target ``values[position]`` of a write and the
    operands, a piece at a time (``where`` slices the flat target) when the target is large and
    contiguous and the array operands are laid out as it, else all at once (``where`` None)."""
    target = values[position]
    size = target.size
    if size > 2 * CHUNK and target.flags.c_contiguous and all(
            type(v) is not np.ndarray or v.ndim == 0
            or (v.shape == target.shape and v.flags.c_contiguous) for v in values):
        flat = [v.reshape(-1) if type(v) is np.ndarray and v.ndim else v for v in values]
        for start in range(0, size, CHUNK):
            where = slice(start, start + CHUNK)
            yield (where, flat[position][where],
                   [v[where] if type(v) is np.ndarray and v.ndim else v for v in flat])
    else:
        yield None, target, values


def _normal(a):
    """Whether every element of ``a`` is a normal float (not zero, subnormal, infinite or
    NaN), as magnitudes; overwrites ``a``."""
    np.abs(a, out=a)
    info = np.finfo(a.dtype)
    # ``initial`` makes an empty ``a`` (every element of nothing) normal
    return bool(np.min(a, initial=info.max) >= info.smallest_normal
                and np.max(a, initial=info.smallest_normal) <= info.max)


def _far(a, b, out):
    """Into bool ``out``: where ``a`` is more than ``ULPS`` units in the last place from ``b``
    (of the other sign, a zero of the other sign included, or NaN where ``b`` is not), or is
    not ``b`` itself where ``b`` is zero or subnormal. Uses ``a``'s memory.

    Below the normal range an ulp is no longer a small relative error (5e-324 is one ulp from
    0), and a later inverse (undoing ``x *= 5e-324``) would magnify it to a wrong value of any
    size: there an element must come back bit for bit."""
    tiny = np.abs(b) < np.finfo(b.dtype).smallest_normal
    if a.dtype.itemsize in (2, 4, 8):  # the ordered bit patterns of same-signed floats
        kind = f"i{a.dtype.itemsize}"
        d = a.view(kind)
        np.subtract(d, b.view(kind), out=d)
        tiny &= d != 0
        np.add(d, ULPS, out=d)
        np.greater(d.view(f"u{a.dtype.itemsize}"), 2 * ULPS, out=out)
        return np.logical_or(out, tiny, out=out)
    close = np.abs(a - b) <= ULPS * np.spacing(b)
    tiny &= a != b
    return np.logical_or(~close | tiny, np.signbit(a) != np.signbit(b), out=out)


def check_destination(target, what):
    """Refuse, before anything is recorded, a write into a traced array NumPy would not write
    (a read-only view, as ``np.diagonal`` gives) or whose elements share bytes, whose gradient
    depends on the order NumPy writes them in. ``what`` names the write (a ufunc: its out=)."""
    value = target.value
    if value.flags.writeable and (target.whole or not overlaps_itself(value)):
        return
    if isinstance(what, np.ufunc):
        what = f"np.{what.__name__}(..., out=...)"
    if not value.flags.writeable:
        raise ReadOnlyError(f"{what}: the destination is read-only, as NumPy makes it (a view "
                            "from np.diagonal, np.broadcast_to, ...). Write into a copy of it.")
    raise UnsupportedOperationError(
        f"{what}: the destination is a view whose elements share memory (from "
        "np.broadcast_arrays, sliding_window_view(..., writeable=True) or as_strided), so the "
        "result depends on the order of the writes. Write into the base array instead.")


def _write_elementwise(ufunc, rule, tape, inputs, values, pattern, out, kwargs):
    traced, reads = _differentiable(ufunc, rule, pattern, len(inputs))
    if type(out) is not Traced or out.tape is not tape:
        if traced:
            raise untraced_write(f"np.{ufunc.__name__}(..., out=...)")
        return ufunc(*values, out=out, **kwargs)
    tape = active(tape)
    check_destination(out, ufunc)
    if out.buffer.constant:
        if not traced:  # constants only: what gradient reaches them goes nowhere
            write_constant(tape, out, None, lambda: ufunc(*values, out=out.value, **kwargs))
            return out
        out.buffer.constant = False  # it now holds values that depend on the arguments
    target = out.value
    position = next((i for i, x in enumerate(inputs)
                     if type(x) is Traced and x.buffer is out.buffer
                     and same_region(x.value, target)), None)
    inverse = None
    if position is not None and position < len(rule.inverse) and rule.inverse[position]:
        others = [v for i, v in enumerate(values) if i != position]
        invert = rule.inverse[position]

        def inverse():
            invert(target, others)

        def is_safe():
            return (not any(_may_overlap(out, x) for i, x in enumerate(inputs) if i != position)
                    and rule.is_safe(others))

        growth = 1.0 if rule.growth is None else (lambda: rule.growth(target, others))
    else:
        is_safe, growth = None, 1.0
    undo = tape.undo_for(inverse, is_safe, lambda: checkpoint(target), out.buffer.key,
                         growth, out.whole)
    if undo is inverse:
        undo = _exactly(undo, ufunc, invert, target, values, position, kwargs)
    tape.before_write(out.buffer.key)
    # From the inputs as they are before the write (the target may be one of them).
    decision = rule.decide(*values) if rule.decide is not None and traced else None
    ufunc(*values, out=target, **kwargs)
    recompute_y = "x" in rule.uses and "y" in rule.uses
    read = values if recompute_y else _read_by_partials(values, reads)
    for i, v in enumerate(values):  # keep the untraced operands the replay will read
        if pattern >> i & 1 == 0 and (read[i] is not None or (undo is inverse and i != position)):
            keep(tape, inputs[i], v)
    given = read if rule.decide is None else [*read, decision]
    places = [locate(x, tape) for x in inputs]
    target_place = locate(out, tape)

    def back(shadows):
        dy = shadows.take(target_place)
        if dy is None or not traced:
            undo()
            return
        if rule.uses == "y":
            y = target
        else:
            undo()
            y = ufunc(*read, **kwargs) if recompute_y else None
        _elementwise_cotangents(shadows, rule, dy, y, places, given, traced)
        if rule.uses == "y":
            undo()

    tape.record(back)
    return out


# ----------------------------------------------------------------------------------------------
# Functions with pure rules


def _output(tape, y, leaves):
    """Wrap one output of a pure rule; returns ``(wrapped, is_fresh_buffer)``. (Under nested
    differentiation the output is an array an outer tape traces; it is wrapped the same way.)"""
    if isinstance(y, np.ndarray) or wrapped(y):
        if y.dtype.kind != "f":
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
    if isinstance(y, np.floating):
        return fresh(y, tape), True
    return y, False


def apply_function(name, rule, args, kwargs, tape=None):
    """Run a pure ``rule`` on the plain values of ``args``, wrap and record its outputs."""
    out = kwargs.pop("out", None) if "out" in kwargs else None
    arg_tape, values = _unwrap_args(args)
    tape = active(arg_tape or tape)
    kwargs = _keyword_values(name, kwargs, tape)
    y, back = rule(*values, **kwargs)
    leaves = list(_leaves(args, tape))
    if not leaves:  # constants and plain values only: nothing to record
        result = constant_result(y, tape, args)
        return result if out is None else apply_ufunc(np.positive, (result,), out=out)
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
        _record_function(tape, back, args, created, multiple=isinstance(y, (tuple, list)))
    if out is not None:
        if isinstance(y, (tuple, list)):
            raise UnsupportedOperationError(f"{name}(..., out=...) with several outputs.")
        return apply_ufunc(np.positive, (result,), out=out)
    return result


def _record_function(tape, back, args, outputs, multiple):
    """Record a pure rule's ``back``: ``outputs`` are the buffers it created (None for other
    outputs); the record keeps places of the arguments, not the arguments."""
    places = [[locate(e, tape) for e in x] if type(x) in (list, tuple) else locate(x, tape)
              for x in args]
    primals = {id(owner(x.value)) for x in _leaves(args, tape)}

    def back_record(shadows):
        dys = [None if b is None else shadows.pop(b) for b in outputs]
        if all(dy is None for dy in dys):
            return
        if multiple:
            cotangents = back(tuple(np.zeros(b.shape, b.dtype) if dy is None and b is not None
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
        _add_all(shadows, rows, primals)

    tape.record(back_record)


def _written(func, args, kwargs):
    """The arguments a NumPy function may write into: its ``out``, the target of an in-place
    function, and every argument of a function mutad knows nothing about."""
    out = kwargs.get("out")
    position = out_position(func)
    if out is None and position is not None and len(args) > position:
        out = args[position]
    targets = list(out) if type(out) is tuple else [] if out is None else [out]
    if func in INPLACE and args:
        targets.append(args[0])
    elif func not in FUNCTIONS and func not in NONDIFF:
        targets.extend(_flat(args))
    return targets


def apply_array_function(func, args, kwargs, tape):
    level = innermost((*args, *kwargs.values()), tape)
    if not carries((*args, *kwargs.values()), level):
        return on_constants(func, args, kwargs, level, _written(func, args, kwargs))
    rule = FUNCTIONS.get(func)
    if rule is not None:
        args, kwargs = out_by_keyword(func, args, kwargs)  # np.dot(a, b, c): c is out
        return apply_function(function_name(func), rule, args, kwargs, tape)
    handler = INPLACE.get(func)
    if handler is not None:
        active(tape)
        return handler(*args, **kwargs)
    composite = COMPOSITES.get(func)
    if composite is not None:
        active(tape)
        return composite(*args, **kwargs)
    if func in NONDIFF:
        return func(*plain(args), **plain(kwargs))
    raise UnsupportedFunctionError(
        f"{function_name(func)} has no differentiation rule in mutad. Give it one by wrapping it "
        "with mutad.adjoint (see the README, 'Custom rules'), or compute the same thing with "
        "functions mutad differentiates.")


def plain(tree):
    """``tree`` with every traced array replaced by its plain value (for non-differentiable
    functions, whose outputs carry no gradient)."""
    if type(tree) is Traced:
        return tree.value
    if type(tree) in (list, tuple):
        return type(tree)(plain(x) for x in tree)
    if type(tree) is dict:
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
    def forward(self, other):
        if _deeper(other, self.tape):
            return NotImplemented
        return apply_ufunc(ufunc, (self, other))

    def reflected(self, other):
        if _deeper(other, self.tape):
            return NotImplemented
        return apply_ufunc(ufunc, (other, self))

    def inplace(self, other):
        if _deeper(other, self.tape):
            raise lost_tangent(f"augmented assignment ({ufunc.__name__})")
        if stands_for_scalar(self):
            return apply_ufunc(ufunc, (self, other))
        return apply_ufunc(ufunc, (self, other), out=self)

    return forward, reflected, inplace


class Traced(ArrayMethods):
    """A float array whose operations mutad records. Behaves like the ndarray it wraps."""

    __slots__ = ("value", "buffer", "tape", "whole")

    def __init__(self, value, buffer, tape, whole):
        self.value = value
        self.buffer = buffer  # the memory its shadow maps (a shadows.Buffer)
        self.tape = tape
        self.whole = whole  # whether value is that whole buffer, laid out as it

    level = property(lambda self: self.tape.level)

    # NumPy's protocols ---------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
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
        if key in FUNCTIONS:
            return apply_function(f"np.{ufunc.__name__}.{method}", FUNCTIONS[key], inputs, kwargs)
        if key in INPLACE:
            active(self.tape)
            return INPLACE[key](*inputs, **kwargs)
        if ufunc in NONDIFF:
            return getattr(ufunc, method)(*plain(inputs), **plain(kwargs))
        raise UnsupportedFunctionError(
            f"np.{ufunc.__name__}.{method} has no differentiation rule in mutad; compute it with "
            "functions mutad differentiates.")

    def __array_function__(self, func, types, args, kwargs):
        if len(types) > 1 and defers(self.tape, [*args, *kwargs.values()]):
            return NotImplemented
        return apply_array_function(func, args, kwargs, self.tape)

    def __array__(self, dtype=None, copy=None):
        """A constant converts as a plain array would (read-only once a record has read it:
        code without a rule must not change it behind mutad's back); a traced array cannot."""
        if not self.buffer.constant:
            raise conversion_error("np.asarray")
        value = np.asarray(self.value)
        if self.buffer.read:
            value = value.view()
            value.flags.writeable = False
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def plain_value(self):
        """The plain array a constant stands for (``ArrayMethods``), None if traced."""
        return self.__array__() if self.buffer.constant else None

    offset = property(lambda self: address(self.value) - self.buffer.low)

    def owner_view(self):
        """This traced array's view of all of its memory (``views.owner_view``)."""
        return view_of(self, owner_view(self.value), self.tape)

    def restrided(self, shape, dtype, offset, strides):
        """The view of this one-dimensional array at byte ``offset`` (``views.strided``)."""
        return view_of(self, strided(self.value, shape, dtype, offset, strides), self.tape)

    def __repr__(self):
        return f"Traced({self.value!r})"

    # indexing -------------------------------------------------------------------------------

    def __getitem__(self, key):
        if self.buffer.constant:
            return constant_result(self.value[plain(key)], self.tape, (self,))
        return INPLACE[operator.getitem](self, key)

    def __setitem__(self, key, value):
        if _deeper(value, self.tape):
            raise lost_tangent("x[key] = value")
        if self.buffer.constant and innermost((value,), self.tape) is self.tape:
            if not carries((value,), self.tape):
                key, value = plain(key), values_at(value, self.tape)
                write_constant(self.tape, self, key, lambda: self.value.__setitem__(key, value))
                return
            self.buffer.constant = False  # a traced value written: it now depends on them
        INPLACE[operator.setitem](self, key, value)

    # operators (the binary ones: install_operators below) -----------------------------------

    def __neg__(self):
        return apply_ufunc(np.negative, (self,))

    def __pos__(self):
        return apply_ufunc(np.positive, (self,))

    def __abs__(self):
        return apply_ufunc(np.absolute, (self,))

    def astype(self, dtype, **kwargs):
        return apply_function("ndarray.astype", FUNCTIONS[np.ndarray.astype], (self, dtype), kwargs)


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
    kwargs = _keyword_values(name, kwargs, tape)
    if not carries(args, tape):  # constants and plain values only: it runs as on plain arrays
        for i in writes:
            if i < len(args) and type(args[i]) is Traced and args[i].tape is tape:
                write_constant(tape, args[i], None, lambda: None)
        return _map_result(name, run_rule(*values, **kwargs)[1], args, values, tape)
    for i in writes:
        if i < len(args) and isinstance(args[i], np.ndarray) and args[i].dtype.kind == "f":
            raise untraced_write(f"{name} writes into argument {i} while other arguments are "
                                 "traced")
    written = [(i, args[i]) for i in writes
               if i < len(args) and type(args[i]) is Traced and args[i].tape is tape]
    for _, t in written:
        check_destination(t, name)
    for _, t in written:  # the values written depend on the traced arguments
        t.buffer.constant = False
    factor = 1.0 if growth is None or not written else float(growth(*values, **kwargs))
    undos = [tape.undo_for(None if i in checkpointed else _rule_restores, None,
                           lambda t=t: checkpoint(t.value), t.buffer.key, factor, t.whole)
             for i, t in written]
    for _, t in written:
        tape.before_write(t.buffer.key)
    back, result = run_rule(*values, **kwargs)
    for i, (x, v) in enumerate(zip(args, values, strict=True)):
        if i not in writes:
            keep(tape, x, v)
    if not callable(back):
        raise RuleError(f"the in-place rule of {name} must return its back function.")
    places = [locate(x, tape) for x in args]

    def back_record(shadows):
        # Nested in another differentiation, the values are arrays it traces, and so must be
        # the shadows the rule accumulates into: made like the values. A read-only argument
        # whose elements share memory gets zeros to accumulate into, added up afterwards.
        summed = [np.zeros_like(v) if p is not None and overlapping(p) else None
                  for p, v in zip(places, values, strict=True)]
        back(*(s if s is not None else None if p is None else shadows.of(p, like=v)
               for p, v, s in zip(places, values, summed, strict=True)))
        for p, s in zip(places, summed, strict=True):
            if s is not None:
                shadows.add(p, s)
        for undo in undos:
            undo()

    tape.record(back_record)
    return _map_result(name, result, args, values, tape)


def _rule_restores():
    """The undo of an in-place rule that restores its own arguments in ``back``."""


def _map_result(name, result, args, values, tape):
    """What an in-place function returned, with its arguments replaced by the traced ones."""
    if type(result) in (tuple, list):
        return type(result)(_map_result(name, r, args, values, tape) for r in result)
    if not (isinstance(result, np.ndarray) or wrapped(result)) or result.dtype.kind != "f":
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
