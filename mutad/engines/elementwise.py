"""Elementwise operations as both engines' records hold them: which inputs get a gradient and
what their partials read (``differentiable``), what a record keeps, and the cotangents a
record of an elementwise operation or write passes back to its inputs
(``elementwise_cotangents``). The traced engine (``tracing``) makes these records; the replay
of a recording (``replay``) and its compiled blocks make the same ones from new values, so
that their gradients are the traced ones, bit for bit.
"""

import ast
import cmath
import math
import operator
import string
import sys
from sys import getrefcount

import numpy as np

from ..core.devices import is_device
from ..core.debug import READ_PULLBACKS

from .recompute import Written, current_region
from .products import (UNTHREADED, _vdot, _times_partial_of, add_times_partial, partial_at, times,
                       times_partial, writable)
from ..core.registry import (HOLOMORPHIC, ONE, Applied, Constant, ElementwiseRule,
                             NoClosedForm, Operand, Rule)
from ..core.shadows import Buffer, Place, bytes_of, lendable, overlapping
from ..core.tape import OneOutput, Write
from ..core.views import NDARRAY, writeable
from .writes import EXACT_AS_SCALAR, CopyBack, reads_written


_REAL = np.dtype(float)
_FLOAT64 = np.float64

SHORT = 1 << 16
"""Bytes below which an elementwise cotangent is computed the short way
(``_small_cotangents``): a product per input and no shadow shared, as Python's overhead, not
memory, is then the cost. The replay's lean steps and compiled blocks take the arrays below it
and add into whole buffers' shadows directly, which no shared shadow then reaches."""


def in_the_loops_kinds(ufunc, inputs, kwargs):
    """``inputs`` as the loop a ufunc's ``dtype=`` or ``signature=`` chooses reads them, where
    that loop is of another kind than an array operand: real values in a complex loop
    (``np.sqrt(x, dtype=complex)`` of negative x, whose derivative is complex), complex values
    in a real one under ``casting='unsafe'`` (their real parts). The rules' partials are then
    those of the loop's values: each such operand is cast by a call that dispatches (followed
    as any cast is); the others, and every operand where no loop is resolved (NumPy's own call
    raises), are as given."""
    if "dtype" not in kwargs and "signature" not in kwargs:
        return inputs
    dtypes = [getattr(x, "dtype", None) if type(x) not in (int, float, complex) else type(x)
              for x in inputs]
    signature = kwargs.get("signature")
    if signature is None:
        signature = (None,) * ufunc.nin + (kwargs["dtype"],) * ufunc.nout
    try:
        loop = ufunc.resolve_dtypes((*dtypes, *(None,) * ufunc.nout), signature=signature,
                                    casting=kwargs.get("casting", "same_kind"))
    except Exception:  # noqa: BLE001 (NumPy's own call raises it, or takes another route)
        return inputs
    cast = list(inputs)
    for i, (dtype, read) in enumerate(zip(dtypes, loop, strict=False)):
        if isinstance(dtype, np.dtype) and dtype.kind in "fc" and read.kind in "fc" \
                and dtype.kind != read.kind:
            cast[i] = inputs[i].astype(read) if read.kind == "c" else np.real(inputs[i])
    return tuple(cast)


def short(value):
    """Whether ``value`` (an array, or all of a buffer, or the values at a place in one) is
    below :data:`SHORT`."""
    return bytes_of(value) < SHORT


def unbroadcast(g, shape):
    """Sum ``g`` over the axes along which an input of ``shape`` was broadcast (``shape`` may
    have more axes than ``g``, each of length 1: ``x[[0, 1]] = v[None]``)."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    elif lead:  # an assigned value's leading length-1 axes, which NumPy's assignment drops
        g = g.reshape((1,) * -lead + g.shape)
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if stretched:
        g = g.sum(axis=stretched, keepdims=True)
    return g.reshape(shape)


def differentiable(ufunc, rule, pattern, count):
    """The positions of the inputs that get a gradient, those their partials read (None: all),
    and ``(rule, positions)``, the state its records share: worked out once per rule and
    ``pattern`` of traced inputs (bit i: input i is traced)."""
    plan = rule.plans.get(pattern)
    if plan is None:
        traced = tuple(i for i in range(count)
                       if pattern >> i & 1 and rule.partials[i] is not None)
        for i in traced:
            if type(rule.partials[i]) is NoClosedForm:
                raise rule.partials[i].error(ufunc)
        read = {j for i in traced for j in rule.reads[i]}
        plan = rule.plans[pattern] = (traced, None if len(read) == count else read,
                                      (rule, traced))
    return plan


def read_by_partials(values, read):
    """``values`` with None for every input no partial reads (``read`` None: all are read)."""
    if read is None:
        return values
    return [v if i in read else None for i, v in enumerate(values)]


def elementwise_kept(rule, reads, read, values, y):
    """What the record of a pure elementwise operation keeps: ``read``, the inputs its
    partials read (``read_by_partials``), then the decision, then the output ``y`` if the
    partials read it (last: the partials take the inputs and the decision as ``*values``)."""
    if rule.decide is not None:
        read = [*read, rule.decide(*values)]
    if "y" in rule.uses:
        read.append(y)
    elif reads is not None and not reads and rule.decide is None:
        read = _NOTHING_KEPT.get(len(values)) or (None,) * len(values)
    return read


_NOTHING_KEPT = {count: (None,) * count for count in range(1, 4)}
"""What a record of an elementwise ufunc of ``count`` inputs keeps when its partials read
none of them (``a + b``): one tuple for all such records."""


class Elementwise(OneOutput):
    """The record of a pure elementwise operation: ``state`` is the rule's plan for the pattern
    of traced inputs (``differentiable``); ``kept`` ends with the output's value if the
    partials read it."""

    __slots__ = ()

    @staticmethod
    def pullback(record, shadows, _):
        # (``shadows.pop(record.output, read_only=True)`` written out: the common case first)
        entry = shadows.entries.pop(record.output.key, None)
        if entry is None:
            return
        dy = entry[1] if entry[3] is None else shadows.handed(entry, read_only=True)
        # (``_elementwise_back`` written out: a long program runs this once per operation)
        rule, traced = record.state
        kept = record.kept
        y = None
        if "y" in rule.uses:
            y, kept = kept[-1], kept[:-1]
        if type(dy) is NDARRAY and dy.nbytes < SHORT and dy.flags.writeable:
            _small_cotangents(shadows, rule, dy, y, record.inputs, kept, traced)
        else:
            elementwise_cotangents(shadows, rule, dy, y, record.inputs, kept, traced)


def reverse_elementwise(records, shadows, watch):
    """Reverse the run of :class:`Elementwise` records at the end of ``records``, newest first,
    each as ``ReverseTape.replay`` reverses a pure record (``Elementwise.pullback``, then its
    output forgets its recipe), in one loop: a program of small operations spends most of its
    reverse pass in Python's calls, not in NumPy's. ``watch`` is the replay's
    ``debug.Warnings``, told which record runs.

    Where the cotangent is a small float64 array of its own, C-ordered (as the engine makes
    them), ``_small_cotangents`` runs here written out, each product added as ``Shadows.add``
    adds a float64 array it is handed into a whole buffer (the common case, a chain of
    operations on whole arrays); everything else takes those functions themselves. So the
    same products are added in the same order, bit for bit. A cotangent of one float64
    element (a scalar loop's) is first offered to ``_scalar_back``, which may hand the last
    record's cotangent into the buffer an :class:`ElementsRead` record made on, where that
    record is next (``reverse_folded``): returned then, as Python's float, else None."""
    entries = shadows.entries
    handed = None
    while records and type(records[-1]) is Elementwise:
        record = watch.record = records.pop()
        output = record.output
        entry = entries.pop(output.key, None)
        if entry is not None:
            dy = entry[1] if entry[3] is None else shadows.handed(entry, read_only=True)
            state = record.state
            rule, traced = state
            kept = record.kept
            y = None
            if "y" in rule.uses:
                y, kept = kept[-1], kept[:-1]
            # (a shadow ``_lean_cotangents`` made, marked so, is known to be what the
            # questions of the other case establish)
            flags = None if entry[-1] is dy else \
                dy.flags if type(dy) is NDARRAY and dy.nbytes < SHORT else False
            done = False
            if (flags is None or flags is not False and flags.writeable) and not dy.ndim \
                    and dy.dtype is _REAL:
                following = records[-1] if records else None
                done = _scalar_back(shadows, state, dy.item(), record.inputs, record.kept, (),
                                    following.output if type(following) is ElementsRead
                                    else None)
            if done is not False:
                if type(done) is tuple:
                    handed = done[0]
            elif flags is None:
                _lean_cotangents(shadows, entries, rule, dy, y, record.inputs, kept, traced)
            elif flags is False or not flags.writeable:
                elementwise_cotangents(shadows, rule, dy, y, record.inputs, kept, traced)
            elif dy.dtype is not _REAL or dy.base is not None or not flags.c_contiguous:
                _small_cotangents(shadows, rule, dy, y, record.inputs, kept, traced)
            else:
                _lean_cotangents(shadows, entries, rule, dy, y, record.inputs, kept, traced)
        output.origin = None
        if type(output.ref) is Written:
            output.ref = output.ref.was
    return handed


def _elementwise_back(shadows, state, dy, places, kept, handed):
    """``Elementwise.pullback`` once its cotangent ``dy`` is taken, into ``places`` (an
    ``ElementsRead`` record's stand-ins), the cotangents of stand-ins that would be their
    shadows as they are put in ``handed`` instead (``_small_cotangents``)."""
    rule, traced = state
    y = None
    if "y" in rule.uses:
        y, kept = kept[-1], kept[:-1]
    if type(dy) is np.ndarray and dy.nbytes < SHORT and dy.flags.writeable:
        # (``elementwise_cotangents``' first question, asked here: the common case)
        _small_cotangents(shadows, rule, dy, y, places, kept, traced, handed)
    else:
        elementwise_cotangents(shadows, rule, dy, y, places, kept, traced)


class Gathered(OneOutput):
    """The record of ``x[key]`` that copies (an advanced index, one element): ``inputs`` are
    the place of ``x`` and the key, ``state`` whether an element may have come from one place
    several times (repeated indices, a view whose elements share memory). A scalar loop makes
    one per element it reads: a record of the kind's own pullback, with no tuple of outputs."""

    __slots__ = ()

    @staticmethod
    def pullback(record, shadows, _):
        """Add the cotangent back where each element came from, each repeat its share."""
        _gathered_back(shadows, shadows.pop(record.output), record.inputs, record.state)


def _gathered_back(shadows, dy, inputs, repeats):
    """``Gathered.pullback`` once its cotangent ``dy`` is taken (None: none reached it)."""
    if dy is None:
        return
    source, key = inputs
    if repeats:
        shadows.add_at(source, key, dy)
        return
    if type(dy) is NDARRAY and type(source) is Buffer:
        # (``shadows.of``'s answer where the whole buffer's shadow exists, of its own memory:
        # that shadow; a scalar loop reads each element many times)
        entry = shadows.entries.get(source.key)
        if entry is not None and entry[3] is None:
            shadow = entry[1]
            if not dy.ndim and dy.dtype is _REAL and type(shadow) is NDARRAY \
                    and shadow.dtype is _REAL and (type(key) is int or type(key) is tuple and
                                                   len(key) == shadow.ndim):
                # (one element, an integer per axis: a scalar loop's; the sum is added as
                # ``shadow[key] += dy`` would add it, where Python's is that one)
                total = shadow.item(key) + dy.item()
                if exact_in_python(total):
                    shadow[key] = total
                    return
            shadow[key] += dy
            return
    # (a plain cotangent makes no shadow traced like it: ``like`` only for others)
    region = shadows.of(source, like=None if type(dy) is np.ndarray else dy)
    region[key] += dy


READ_PULLBACKS.add(_gathered_back.__code__)


class ElementsRead(OneOutput):
    """An :class:`Elementwise` record with the records of the elements it read folded in
    (``fold_reads``): a scalar loop's ``x[i, j - 1] + x[i, j]``. ``inputs`` are the elementwise
    record's, with the inputs of each read (its source's place and the key) in place of the
    buffer it made; ``state`` is the elementwise record's, then the positions of those reads
    in ``inputs``, in the order they ran. Its pullback is theirs, in the order the reverse pass
    ran them: the operation's, into a stand-in buffer for each value read, then each read's,
    the last first, from its stand-in's shadow. So it adds the same cotangents in the same
    order, and a scalar loop keeps neither a record nor a buffer per element it reads. A
    cotangent of one float64 element is first offered to ``_scalar_back``, which runs them
    all with Python's floats."""

    __slots__ = ()

    @staticmethod
    def pullback(record, shadows, _):
        # (``shadows.pop(record.output, read_only=True)`` written out: the common case first)
        entry = shadows.entries.pop(record.output.key, None)
        if entry is None:
            return
        dy = entry[1] if entry[3] is None else shadows.handed(entry, read_only=True)
        state, positions = record.state
        # (a shadow marked as ``_lean_cotangents`` marks one is a float64 array of its own,
        # writable: the questions of the other case answered; a scalar loop's, which
        # ``_scalar_back`` makes so, passed from one record to the next)
        if type(dy) is NDARRAY and not dy.ndim and (
                entry[-1] is dy or dy.dtype is _REAL and dy.flags.writeable) \
                and _scalar_back(shadows, state, dy.item(), record.inputs, record.kept,
                                 positions):
            return
        _folded_back(record, shadows, dy)


def _folded_back(record, shadows, dy):
    """``ElementsRead.pullback`` for the cotangent ``dy`` it took, where ``_scalar_back`` does
    not take it: the operation's pullback into a stand-in for each element read, then each
    read's."""
    state, positions = record.state
    inputs = record.inputs
    places = list(inputs)
    for n, i in enumerate(positions):
        dtype = inputs[i][0].dtype
        # (a float64's, by position: the common case, without hashing the dtype)
        places[i] = _REAL_STAND_INS[n] if dtype is _REAL and n < len(_REAL_STAND_INS) \
            else _stand_in(dtype, n)
    handed = dict.fromkeys(positions)
    _elementwise_back(shadows, state, dy, places, record.kept, handed)
    for i in reversed(positions):
        g = handed.pop(i, None)
        _gathered_back(shadows, shadows.pop(places[i]) if g is None else g, inputs[i], False)


def reverse_folded(records, shadows, watch, d=None):
    """Reverse the run of :class:`ElementsRead` records at the end of ``records``, newest
    first, each as ``ReverseTape.replay`` reverses one (its pullback, then its output forgets
    its recipe), in one loop. Where one's cotangent into a 0-d float64 buffer that has no
    shadow is the next one's (that record made the buffer, and this one names it once, as
    an operand: a scalar loop's chain, ``x[i - 1, j] + x[i, j] + x[i + 1, j]``),
    ``_scalar_back`` hands it on as Python's float: the shadow it would have made, a 0-d
    array, would be taken out again at once by the next pullback, whose first step reads it
    as that float. The same sums in the same order; where the next pullback cannot take the
    float, it takes that array. ``d``: the cotangent the record reversed before handed on
    so to the first (``reverse_elementwise``), or None."""
    entries = shadows.entries  # (``d``: the cotangent handed on to ``records[-1]``'s output)
    while records and type(records[-1]) is ElementsRead:
        record = watch.record = records.pop()
        output = record.output
        dy = None
        if d is None:
            entry = entries.pop(output.key, None)
            if entry is not None:
                dy = entry[1] if entry[3] is None else shadows.handed(entry, read_only=True)
                if type(dy) is NDARRAY and not dy.ndim and (
                        entry[-1] is dy or dy.dtype is _REAL and dy.flags.writeable):
                    d = dy.item()
                else:
                    _folded_back(record, shadows, dy)
        if d is not None:
            following = records[-1] if records else None
            state, positions = record.state
            done = _scalar_back(shadows, state, d, record.inputs, record.kept, positions,
                                following.output if type(following) is ElementsRead else None)
            if done is False:
                _folded_back(record, shadows, np.array(d) if dy is None else dy)
            d = done[0] if type(done) is tuple else None
        output.origin = None
        if type(output.ref) is Written:
            output.ref = output.ref.was


_STAND_INS = {}
"""The 0-d buffers cotangents pass through between two pullbacks that run one right after the
other (``ElementsRead.pullback``'s, by position; ``fold_written``'s, "written"), by dtype and
role: each is shadowed only between those two (added into, then taken out), so all share
them."""


def _stand_in(dtype, role):
    buffer = _STAND_INS.get((dtype, role))
    if buffer is None:
        buffer = _STAND_INS[dtype, role] = Buffer(np.zeros((), dtype))
    return buffer


_REAL_STAND_INS = tuple(_stand_in(_REAL, n) for n in range(4))
"""The first stand-ins of float64 by position, as ``_stand_in`` gives them."""


_WRITTEN = {}
_WRITTEN_IDS = set()
"""The ids of the tuples ``_WRITTEN`` holds for good: whether a write's inputs are one of them
is a question of one lookup (``ElementWrite.reverse``, which the replay runs too)."""


def _written_inputs(dtype):
    """``(stand-in,)``, the inputs of a write of a value through the stand-in
    (``fold_written``): one tuple for all writes of ``dtype``."""
    try:  # (a subscript, not ``dict.get``: the interpreter's specialised lookup, per write)
        return _WRITTEN[dtype]
    except KeyError:
        inputs = _WRITTEN[dtype] = (_stand_in(dtype, "written"),)
        _WRITTEN_IDS.add(id(inputs))
        return inputs


def fold_reads(records, errors_of):
    """Fold into the last of ``records``, if it is an :class:`Elementwise` record, the records
    just before it that read the elements it operates on (:class:`Gathered` records of one
    element each, the one place it came from), where nothing else can reach what those made:
    no traced array, view or record holds their buffers but these two records. The traced
    values read are gone (the loop's operands of one statement, ``x[i, j] += x[i, j - 1]``),
    so no later record can name their buffers, and the pullbacks of the records folded
    together run as they would have: in a row, in the same order (``ElementsRead``).

    Called before each record is appended, when the operands of the one before have gone.
    ``errors_of``: the records whose pullbacks run under NumPy's error handling of their own
    (``ReverseTape.errors_of``), which are left as they are."""
    last = records[-1]
    if type(last) is not Elementwise or last.output.origin is not None:
        return
    inputs = last.inputs
    count = len(inputs)
    start = len(records) - 1
    positions = ()  # (the newest read's last: its position is put before the others')
    while start:
        read = records[start - 1]
        if type(read) is not Gathered or read.state:
            break
        output = read.output
        # Held by ``read.output``, by ``inputs`` and by ``output`` here, and by getrefcount's
        # argument: nothing else (CPython's count of references); a shape is a tuple, empty
        # of a 0-d buffer's
        if getrefcount(output) != 4 or output.shape or output.weak \
                or output.device is not None or (output.dtype is not read.inputs[0].dtype
                                                 and output.dtype != read.inputs[0].dtype):
            break
        i = 0
        while i < count and inputs[i] is not output:
            i += 1
        if i == count:  # not an input of ``last``
            break
        positions = (i, *positions)
        start -= 1
    if not positions or (errors_of and any(id(r) in errors_of for r in records[start:])):
        return
    named = list(inputs)
    k = start
    for i in positions:
        named[i] = records[k].inputs
        k += 1
    # The elementwise record becomes the folded one in place (the two kinds share its fields:
    # only its inputs and state change), cheaper than a new record: nothing else holds it (no
    # recipe names it, its output has none, and no replay or anomaly detection watches)
    last.__class__ = ElementsRead
    last.inputs = tuple(named)
    last.state = _folded_state(last.state, positions)
    del records[start:-1]


def fold_written(records):
    """Where the last of ``records`` is the write of one value, a 0-d array that the record
    just before it computed (``x[i, j] = v``, ``x[i, j] += v``: an :class:`ElementWrite` or a
    ``Write`` after an :class:`Elementwise` or :class:`ElementsRead` record) and that nothing
    else holds (neither a traced value nor another record: CPython's count of references), let
    the two records pass its cotangent through a stand-in buffer instead of its own: the
    write's pullback adds it there, and the other's, which the reverse pass runs right after,
    takes it out. A scalar loop keeps no buffer per value it writes.

    Called before each record is appended, when the value written has gone."""
    write = records[-1]
    if type(write) is not Write and type(write) is not ElementWrite or len(records) < 2:
        return
    made = records[-2]
    if type(made) is not Elementwise and type(made) is not ElementsRead:
        return
    buffer = made.output
    if buffer.shape != () or buffer.origin is not None or buffer.weak or buffer.constant \
            or buffer.device is not None or type(write.inputs) is not tuple \
            or len(write.inputs) != 1 or write.inputs[0] is not buffer:
        return
    # Held by ``made.output``, ``write.inputs`` and ``buffer``, and by getrefcount's argument
    if getrefcount(buffer) != 4:
        return
    write.inputs = _written_inputs(buffer.dtype)
    made.output = write.inputs[0]


_FOLDED_STATES = {}
FOLDED_STATES = 256
"""How many states of ``ElementsRead`` records ``_folded_state`` remembers: by the id of the
state, ``(state, {positions: (state, positions)})``."""


def _folded_state(state, positions):
    """``(state, positions)``, one tuple for all equal ones (a loop's records share a few
    plans' states and positions)."""
    try:  # (subscripts, not ``dict.get``: the interpreter's specialised lookup, per fold)
        known = _FOLDED_STATES[id(state)]
    except KeyError:
        known = None
    if known is None or known[0] is not state:  # (held here, its id is no other object's)
        if len(_FOLDED_STATES) >= FOLDED_STATES:
            _FOLDED_STATES.clear()
        known = _FOLDED_STATES[id(state)] = (state, {})
    try:
        return known[1][positions]
    except KeyError:
        folded = known[1][positions] = (state, positions)
        return folded


_NORMAL, _LARGEST = sys.float_info.min, sys.float_info.max


def exact_in_python(result):
    """Whether ``result``, one addition, subtraction, multiplication or division of float64
    values computed with Python's floats, is NumPy's ufunc's result, bit for bit, and one that
    raised no floating-point error NumPy would act on: a normal, finite number. Both round the
    exact result of the operands, binary64 alike, to nearest (IEEE 754); a NaN's payload may
    differ, and an overflow or underflow (its tininess, before rounding or after) is the
    ufunc's to report, so those are left to it."""
    return _NORMAL < abs(result) <= _LARGEST


ARITHMETIC = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
               np.divide: operator.truediv}
"""The ufuncs ``arithmetic_in_python`` computes with Python's floats, and the operator of each."""


def arithmetic_in_python(ufunc, values):
    """``ufunc(*values)``'s value as a Python float, computed with Python's floats, for
    ``ufunc`` one of + - * / and ``values`` two float64 0-d arrays or Python floats (a scalar
    loop's operands), where that is the ufunc's result bit for bit (``exact_in_python``);
    else None (the ufunc computes it: another operation or operand, a result NumPy alone
    decides, a division by zero, which Python refuses)."""
    operation = ARITHMETIC.get(ufunc)
    if operation is None or len(values) != 2:
        return None
    a, b = values  # (each operand's question written out: this runs per operation of a loop)
    if type(a) is NDARRAY and not a.ndim and a.dtype is _REAL:
        a = a.item()
    elif type(a) is not float:
        return None
    if type(b) is NDARRAY and not b.ndim and b.dtype is _REAL:
        b = b.item()
    elif type(b) is not float:
        return None
    if not b and operation is operator.truediv:
        return None
    result = operation(a, b)
    return result if exact_in_python(result) else None


def _small_product(dy, partial, y, values, out, suggested):
    """``times_partial`` of a small array ``dy``, into ``out`` unless None: where the partial
    (not ``ONE``) is a finite non-zero float or a real array of ``dy``'s shape,
    ``products.times`` needs no mask if one dot product of both is finite
    (``products.unmasked``); else it is asked. The partials' own calls are made here (one
    call fewer), ``out`` passed by position (NumPy parses no keyword: the same product)."""
    kind = type(partial)
    if kind is Operand:
        p = values[partial.position]
    elif kind is Applied:
        p = partial.function(y if partial.position is None else values[partial.position])
    else:
        try:  # (``partial_at``'s call, written out: this runs per operation of a loop)
            p = partial(y, *values)
        except (ZeroDivisionError, OverflowError):
            p = partial_at(partial, y, values)
    kind = type(p)
    if kind is float or kind is _FLOAT64:
        if p != 0.0 and math.isfinite(p):
            if out is not None and not dy.ndim and dy.dtype is _REAL:
                product = dy.item() * float(p)
                if exact_in_python(product):
                    out[()] = product
                    return out
            return dy * p if out is None else np.multiply(dy, p, out)
        return times(dy, p, out)
    if kind is NDARRAY and p.dtype is _REAL and p.shape == dy.shape and dy.ndim <= 1 \
            and dy.size <= UNTHREADED:
        # (of one element, a scalar loop's: the dot product is its one product, Python's numbers
        # multiplied: no warning, as none from the dot product)
        if not dy.ndim:
            product = dy.item() * p.item()
            if out is not None and dy.dtype is _REAL and exact_in_python(product):
                out[()] = product  # (``out`` is float64 as ``dy`` is: ``empty_like``, or it)
                return out
            if cmath.isfinite(product):
                return dy * p if out is None else np.multiply(dy, p, out)
        elif cmath.isfinite(_vdot(dy, p)):
            return dy * p if out is None else np.multiply(dy, p, out)
        return times(dy, p, out)
    return _times_partial_of(dy, p, out, suggested)


def _scalar_back(shadows, state, d, inputs, kept, positions, handing=None):
    """The pullback of an elementwise record of one float64 element (an :class:`Elementwise`
    record's, ``positions`` empty, or an :class:`ElementsRead` one's) for its cotangent
    ``d``, a Python float, computed with Python's floats, where each product is one of
    NumPy's, bit for bit and raising nothing (``exact_in_python``): every partial 1, an
    operand, a constant or the expression it offers for float64 scalars
    (``_scalar_partial``), and every float64. Adds what ``_small_cotangents`` and then
    ``_gathered_back`` (the reads, the last first) would add, in their order: each sum into
    an element of a real shadow as ``_gathered_back`` adds a one-element cotangent, the
    others as ``Shadows.add`` adds a 0-d array of its own. Returns False, having changed
    nothing, where a partial or product is not such (the caller then takes those paths): a
    scalar loop's reverse pass makes neither a 0-d array nor a call per product.

    ``handing``: the 0-d buffer the pullback that runs next made (``reverse_folded``), or
    None. A cotangent into it that would become its shadow, where this record names it once,
    as an operand that is no read, is handed on instead: returns ``(cotangent,)``, a Python
    float, having made no shadow of it."""
    rule, traced = state
    partials = rule.partials
    products = []  # (the cotangent of each traced input, in order)
    others = False  # (whether a traced input is not a read folded in)
    for i in traced:
        partial = partials[i]
        if partial is ONE:
            g = d
        else:
            kind = type(partial)
            if kind is Operand:
                p = _float64(kept[partial.position])
                if p is None:
                    return False
            elif kind is Constant and type(partial.value) is float:
                p = partial.value
            else:
                p = _scalar_partial(partial, kept, rule)
                if p is None:
                    return False
            g = d * p
            if not exact_in_python(g):
                return False
        if i in positions:
            if inputs[i][0].dtype is not _REAL:
                return False
        elif inputs[i].shape != ():
            return False
        else:
            others = True
        products.append(g)
    entries = shadows.entries
    handed = None
    if others:  # (inputs other than reads, added first)
        if handing is not None:
            # (handed where the record names it once, as an operand that is no read: else
            # other steps here add to its shadow too)
            named = 0
            for i, place in enumerate(inputs):
                if i in positions:
                    place = place[0]
                if place is handing or type(place) is Place and place.buffer is handing:
                    named += 1
            if named != 1:
                handing = None
        for i, g in zip(traced, products):
            if i in positions:
                continue
            place = inputs[i]
            if type(place) is Buffer and place.dtype is _REAL and place.device is None:
                # (``Shadows.add``'s two first cases, of a 0-d float64 array of its own: it
                # becomes the shadow, marked as ``_lean_cotangents`` marks one, or is added
                # into it)
                entry = entries.get(place.key)
                if entry is None and place is handing:
                    handed = (g,)
                    continue
                if entry is None:
                    g = np.array(g)
                    entries[place.key] = [place, g, None, None, g]
                    continue
                shadow = entry[1]
                if entry[3] is None and type(shadow) is NDARRAY and shadow.dtype is _REAL:
                    total = shadow.item() + g  # (``shadow += g``, where Python's sum is NumPy's)
                    if exact_in_python(total):
                        shadow[()] = total
                        continue
            shadows.add(place, np.array(g), owned=True)
    for i in reversed(positions):
        if i not in traced:
            continue
        g = products[traced.index(i)]
        read = inputs[i]
        source, key = read
        if type(source) is Buffer:
            # (``_gathered_back``'s first case)
            entry = entries.get(source.key)
            if entry is not None and entry[3] is None:
                shadow = entry[1]
                if type(shadow) is NDARRAY and shadow.dtype is _REAL and (
                        type(key) is int or type(key) is tuple and len(key) == shadow.ndim):
                    total = shadow.item(key) + g
                    if exact_in_python(total):
                        shadow[key] = total
                        continue
        _gathered_back(shadows, np.array(g), read, False)
    return True if handed is None else handed


def _float64(value):
    """``value`` as Python's float where it is a float64 (Python's float, NumPy's scalar or a
    0-d array of its own dtype), else None."""
    kind = type(value)
    if kind is float:
        return value
    if kind is NDARRAY:
        return value.item() if not value.ndim and value.dtype is _REAL else None
    return float(value) if kind is _FLOAT64 else None


_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
"""The operations of Python's floats a partial's expression for float64 scalars may use."""

_SCALAR_PARTIALS = {}
"""Each partial that offers an expression for float64 scalars (``scalar``, as to a compiled
replay) -> ``(function, uses_y)``, that expression as a function of a record's kept values
computed with Python's floats (``_python_partial``), or None."""


def _python_partial(offer):
    """The expression ``offer`` (``(template, guarded)``: a template of the operands ``{0}``,
    ``{1}``, ... and ``{y}``, which a partial offers for NumPy's float64 scalars) as
    ``(function, uses_y)``: ``function(kept)`` computes it with Python's floats of a record's
    kept values (``kept[i]`` for ``{i}``, ``kept[-1]`` for ``{y}``), where each value it reads
    is a float64 (Python's float, NumPy's scalar, a 0-d array) and each operation gives NumPy's
    bits, raising nothing (``exact_in_python``; a division by zero, which Python refuses,
    neither), else None; a negation is exact. Written out as one function, each operation
    and its check in line: a scalar loop's reverse pass runs it per division. None where the
    expression is other than such operations, negations and floats."""
    fields = []
    for _, field, _, _ in string.Formatter().parse(offer[0]):
        if field is not None and field not in fields:
            if field != "y" and not field.isdigit():
                return None
            fields.append(field)
    names = {field: f"v{k}" for k, field in enumerate(fields)}
    count = 1 + max([int(field) for field in fields if field != "y"], default=-1)
    tree = ast.parse(offer[0].format(*[names.get(str(i), "None") for i in range(count)],
                                     y=names.get("y", "None")), mode="eval")
    for node in ast.walk(tree):
        if type(node) is ast.Constant and type(node.value) is not float or type(node) not in (
                ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Name, ast.Load,
                ast.Constant, *_OPERATORS):
            return None
    lines = []
    for field, name in names.items():  # (``_float64`` of each value read, in line)
        lines += [f"{name} = kept[{-1 if field == 'y' else int(field)}]",
                  f"kind = type({name})",
                  "if kind is NDARRAY:",
                  f"    if {name}.ndim or {name}.dtype is not REAL: return None",
                  f"    {name} = {name}.item()",
                  f"elif kind is FLOAT64: {name} = float({name})",
                  "elif kind is not float: return None"]
    constants = {}

    def emit(node):  # the expression's value, each operation assigned and checked first
        kind = type(node)
        if kind is ast.Name:
            return node.id
        if kind is ast.Constant:
            name = f"c{len(constants)}"
            constants[name] = node.value
            return name
        if kind is ast.UnaryOp:
            return f"(-{emit(node.operand)})"
        left, right = emit(node.left), emit(node.right)
        if type(node.op) is ast.Div:
            lines.append(f"if not {right}: return None")
        result = f"r{len(lines)}"
        lines.extend((f"{result} = {left} {_OPERATORS[type(node.op)]} {right}",
                      f"if not NORMAL < abs({result}) <= LARGEST: return None"))
        return result

    value = emit(tree.body)
    lines.append(f"return {value}")
    namespace = {"NDARRAY": NDARRAY, "REAL": _REAL, "FLOAT64": _FLOAT64, "NORMAL": _NORMAL,
                 "LARGEST": _LARGEST, **constants}
    exec("def partial(kept):\n" + "".join(f"    {line}\n" for line in lines), namespace)
    return namespace["partial"], "y" in fields


def _scalar_partial(partial, kept, rule):
    """The value of ``partial`` (neither 1, an operand nor a constant) for a record's ``kept``
    values, computed with Python's floats by the expression it offers for float64 scalars,
    where every value it reads is a float64 and every operation gives NumPy's bits, raising
    nothing; else None (nothing is called: the caller calls the partial)."""
    compiled = _SCALAR_PARTIALS.get(partial, False)
    if compiled is False:
        offer = getattr(partial, "scalar", None)
        compiled = _SCALAR_PARTIALS[partial] = None if offer is None else _python_partial(offer)
    if compiled is None:
        return None
    function, uses_y = compiled
    if uses_y and "y" not in rule.uses:
        return None
    return function(kept)


def _small_cotangents(shadows, rule, dy, y, places, values, traced, handed=None):
    """``elementwise_cotangents`` for a small ``dy``, where Python's overhead is the cost:
    a product each (the last one into ``dy``'s memory, if real), no sharing. Each is added as soon as
    it is made: none is ``dy`` but the last, and adding one writes nothing a later product
    reads (the primal values, ``dy``, which is no shadow: popped, and writable).

    ``handed``: the positions of ``ElementsRead``'s stand-ins (its keys), which have no
    shadow yet; each takes the cotangent that ``Shadows.add`` would make the stand-in's shadow
    as it is (a writable 0-d array of its dtype), for the caller to take instead of popping
    that shadow: the same array, without the entry made and popped."""
    last = traced[-1]
    # NumPy's product of one complex element written over an operand rounds otherwise than
    # into memory of its own (its loop without fused multiply-adds): the last product, whose
    # position depends on which inputs are traced (a recording traces the arrays outside
    # argnums), goes into dy's memory only for real values, so each input's cotangent is one
    # product whichever others are traced
    into_dy = last if dy.dtype.kind != "c" else None
    for i in traced:
        partial = rule.partials[i]
        if partial is ONE:
            if i == last:
                g = dy
            elif places[i].shape == dy.shape and shadows.has(places[i]):
                shadows.add(places[i], dy)  # an existing shadow takes dy as it is: no copy
                continue
            else:
                g = dy.copy()
        elif type(dy) is NDARRAY:
            # (an empty_like is its own memory: writable; so is ``dy``, its own owner, which
            # both callers found writeable)
            if i != into_dy:
                suggested = out = np.empty_like(dy)
            else:
                suggested = out = dy
                if dy.base is not None and not writable(dy):
                    out = None
            g = _small_product(dy, partial, y, values, out, suggested)
        else:
            g = times_partial(dy, partial, y, values, dy if i == into_dy else np.empty_like(dy))
        place = places[i]
        if g.shape != place.shape:
            g = unbroadcast(g, place.shape)
        if handed is not None and i in handed and type(g) is NDARRAY \
                and g.dtype is place.dtype and g.shape == () and g.flags.writeable:
            handed[i] = g
            continue
        shadows.add(place, g, owned=True)


def _lean_cotangents(shadows, entries, rule, dy, y, places, values, traced):
    """``_small_cotangents`` for ``dy`` a float64 array that owns its C-ordered, writable
    memory (``reverse_elementwise``), with ``Shadows.add`` written out where a product is such
    an array too, of the shape of a whole float64 C-ordered buffer (``entries``: the shadows'):
    it becomes the buffer's shadow, or is added into the one it has. The same branches, in the
    same order, as those functions take."""
    last = traced[-1]
    partials = rule.partials
    for i in traced:
        partial = partials[i]
        place = places[i]
        if partial is ONE:
            if i == last:
                g = dy
            elif place.shape == dy.shape and (
                    entry := entries.get((place if type(place) is Buffer else place.buffer).key)
            ) is not None:  # (``shadows.has(place)``, its entry kept)
                if type(place) is Buffer and entry[3] is None and type(entry[1]) is NDARRAY:
                    entry[1] += dy  # (``Shadows.add``'s first case)
                    continue
                shadows.add(place, dy)  # an existing shadow takes dy as it is: no copy
                continue
            else:
                g = dy.copy()
        else:
            out = dy if i == last else np.empty_like(dy)  # (of dy's layout: C-ordered)
            g = _small_product(dy, partial, y, values, out, out)
            if g is not out:  # (not known to be a float64 array of dy's layout)
                shadows.add(place, g if g.shape == place.shape else
                            unbroadcast(g, place.shape), owned=True)
                continue
        # ``g``: ``dy``, a copy of it or a product into memory of its layout
        if type(place) is Buffer and g.shape == place.shape:
            entry = entries.get(place.key)
            if entry is None:
                if place.c_contiguous and place.device is None and place.dtype is _REAL:
                    # (``Shadows.add``'s entry, which ends with ``g`` again while it is the
                    # shadow: so marked, ``reverse_elementwise`` knows it a small float64 array
                    # of its own, C-ordered and writable, as ``g`` is here)
                    entries[place.key] = [place, g, None, None, g]
                    continue
            elif entry[3] is None and type(entry[1]) is NDARRAY:
                entry[1] += g
                continue
        shadows.add(place, g if g.shape == place.shape else unbroadcast(g, place.shape),
                    owned=True)


def elementwise_cotangents(shadows, rule, dy, y, places, values, traced):
    """Accumulate ``dy * partial`` into each traced input. Into a shadow that exists already
    the product is added a piece at a time. Of the others, those whose partial is 1 and that
    are whole buffers of ``dy``'s layout share ``dy``'s own memory as their new shadow (else
    one of them, of ``dy``'s shape if any, takes it), after every other product has read
    ``dy``; the rest get fresh memory."""
    if (type(dy) is np.ndarray and dy.flags.writeable and dy.nbytes < SHORT
            or is_device(dy) and writeable(dy) and short(dy)):
        # (a device's too: the same order of sums, the same bits)
        return _small_cotangents(shadows, rule, dy, y, places, values, traced)
    existing = {}
    for i in traced:
        if places[i].shape == dy.shape and not overlapping(places[i]):
            shadow = shadows.get(places[i])
            if shadow is not None:
                existing[i] = shadow
                if type(dy) is np.ndarray and not dy.flags.writeable \
                        and np.may_share_memory(dy, shadow):
                    dy = dy.copy()  # a shared shadow, about to be written: read a copy
    pending = []
    for i in traced:
        partial = rule.partials[i]
        if i in existing:
            if partial is ONE:
                shadows.add(places[i], dy)  # an existing shadow takes dy as it is: no copy
                continue
            if add_times_partial(existing[i], dy, partial, y, values):
                continue
        pending.append(i)
    if not pending:
        return
    sharing = _sharing(rule, dy, places, pending, shadows)
    reuser = None if sharing else next(
        (i for i in pending if places[i].shape == dy.shape), pending[-1])
    # A partial of -1 (subtract's second input) other than the reuser's is subtracted as
    # ``shadow -= dy`` when its row is added (``Shadows.subtract``, the bits of adding -dy),
    # rather than formed as a negated copy first: so ``dy`` must outlive the rows, and the
    # reuser's product then goes to memory of its own.
    negated = () if sharing or type(dy) is not np.ndarray or dy.dtype is not _REAL else [
        i for i in pending if i != reuser and type(rule.partials[i]) is Constant
        and rule.partials[i].value == -1.0 and places[i].shape == dy.shape]
    rows = []  # (place, cotangent, how it is added: OWNED, SHARED or SUBTRACTED)
    for i in (*(i for i in pending if i != reuser and i not in sharing),
              *([] if reuser is None else [reuser])):
        partial = rule.partials[i]
        if i in negated:
            rows.append([places[i], dy, SUBTRACTED])
            continue
        if partial is ONE:
            g = dy if i == reuser else dy.copy()
        else:
            twin = _twin_product(rule, i, places, values, rows)
            if twin is not None:  # added twice: neither may become a shadow itself
                twin[2] = SHARED
                rows.append([places[i], twin[1], SHARED])
                continue
            g = times_partial(dy, partial, y, values,
                              dy if i == reuser and not negated else shadows.empty_like(dy))
        rows.append([places[i], unbroadcast(g, places[i].shape), OWNED, i])
    if sharing:
        shadows.share([places[i] for i in sharing], dy)
    for p, g, how, *_ in rows:
        if how is SUBTRACTED:
            shadows.subtract(p, g)
        else:
            shadows.add(p, g, owned=how is OWNED)


OWNED, SHARED, SUBTRACTED = "owned", "shared", "subtracted"
"""How a row of ``elementwise_cotangents`` is added: an array of its own (which may become the
shadow), one another row adds too, or ``dy`` subtracted."""


def _twin_product(rule, i, places, values, rows):
    """The row of ``rows`` whose cotangent input ``i``'s would equal, bit for bit, or None: both
    inputs are one place and both partials the operand at one place (the two factors of
    ``x * x``), so ``dy`` times the same values; added twice, as two equal products would be."""
    partial = rule.partials[i]
    if type(partial) is not Operand:
        return None
    for row in rows:
        if len(row) < 4:  # (a row not made by a product here)
            continue
        other = rule.partials[row[3]]
        if type(other) is Operand and _same_place(places[i], places[row[3]]) and _same_value(
                places, values, partial.position, other.position):
            return row
    return None


def _same_place(a, b):
    """Whether places ``a`` and ``b`` are the same elements of one buffer, laid out alike."""
    if a is b:
        return True
    if type(a) is Buffer or type(b) is Buffer or type(a) is not Place or type(b) is not Place:
        return False
    return a.buffer is b.buffer and a.whole == b.whole and a.offset == b.offset \
        and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype


def _same_value(places, values, k, m):
    """Whether inputs ``k`` and ``m`` of a record are the same values: one object, or read at
    one place (an operation reads all of its inputs at once)."""
    return k == m or values[k] is values[m] or (
        type(places[k]) in (Buffer, Place) and _same_place(places[k], places[m]))


def _sharing(rule, dy, places, pending, shadows):
    """The inputs among ``pending`` that may share ``dy``'s memory as their new shadow: if
    there are several, those whose partial is 1 and that are distinct whole C-contiguous
    buffers of ``dy``'s shape and dtype with no shadow yet; ``dy`` must be writable."""
    if type(dy) is not np.ndarray or not dy.flags.writeable or not dy.flags.c_contiguous:
        return []
    sharing, keys = [], set()
    for i in pending:
        buffer = places[i]
        if rule.partials[i] is ONE and buffer.whole and type(buffer) is Buffer \
                and buffer.c_contiguous and buffer.shape == dy.shape \
                and buffer.dtype == dy.dtype and buffer.key not in keys \
                and shadows.get(buffer) is None:
            sharing.append(i)
            keys.add(buffer.key)
    return sharing if len(sharing) > 1 else []


def write_kept(ufunc, rule, values, reads, state, target):
    """``(kept, state)`` of the record of the elementwise write ``ufunc(*values, out=target)``,
    from the operands as they are before it (the target may be one of them): ``kept``, the
    values its pullback and its inverse read (``record_write`` adds those only the inverse
    reads, and the replay of a recording puts in it the values it recomputes), then the rule's
    decision; ``state`` (None: no traced input), the rule's plan (``differentiable``), then
    the target if the partials read the values written, or the ufunc if they read the output
    and the inputs (the output is computed again from the inputs kept)."""
    recompute_y = "x" in rule.uses and "y" in rule.uses
    kept = list(values) if recompute_y else list(read_by_partials(values, reads))
    if state is not None:
        if rule.decide is not None:
            kept.append(rule.decide(*values))
        if reads_written(rule):
            state = (*state, target)
        elif recompute_y:
            state = (*state, ufunc)
    return kept, state


def write_pullback(record, shadows, dy):
    """The pullback of an elementwise write: ``state`` is the rule's plan for the pattern of
    traced inputs (``differentiable``), then the target if the partials read only the values
    written, or the ufunc if they read the output and the inputs (the output is computed
    again from those the record keeps)."""
    state, kept = record.state, record.kept
    rule = state[0]
    y = None
    if len(state) > 2:
        y = state[2] if rule.uses == "y" else state[2](*kept[:len(record.inputs)],
                                                       **(record.settings or {}))
    undo = record.undo
    if type(undo) is not CopyBack and shadows.spare is None:
        # (``write_cotangents`` where nothing is lent, now or before, and
        # ``elementwise_cotangents``' first question, asked here: a scalar loop's writes)
        if type(dy) is NDARRAY and dy.nbytes < SHORT and dy.flags.writeable:
            _small_cotangents(shadows, rule, dy, y, record.inputs, kept, state[1])
        else:
            elementwise_cotangents(shadows, rule, dy, y, record.inputs, kept, state[1])
        return
    write_cotangents(shadows, rule, dy, y, record.inputs, kept, state[1],
                     undo.lent() if type(undo) is CopyBack and undo.lends else None)


def write_cotangents(shadows, rule, dy, y, places, kept, traced, spare=None):
    """The cotangents of the operands of an elementwise write (``elementwise_cotangents``),
    the traced record's (``write_pullback``) and the replay's lean record's: ``spare``, the
    copy the write's checkpoint put back, which nothing else holds (passed as it is let go of,
    never from a variable: ``Shadows.lend`` counts its references), is lent to the cotangents
    made here, and to no later ones."""
    earlier = shadows.spare
    if spare is not None and lendable(spare):  # (``lend``'s first question: most are small)
        shadows.lend(spare)
    del spare  # (not lent: freed before the cotangents are made)
    if type(dy) is NDARRAY and dy.nbytes < SHORT and dy.flags.writeable:
        # (``elementwise_cotangents``' first question, asked here: a small write's)
        _small_cotangents(shadows, rule, dy, y, places, kept, traced)
    else:
        elementwise_cotangents(shadows, rule, dy, y, places, kept, traced)
    if earlier is not None:  # (nearly always None: only large copies are lent)
        shadows.let_go(earlier)


class ElementWrite:
    """The record of a checkpointed write into one element of a NumPy array, a scalar loop's
    ``x[i, j] = v`` (``np.positive(v, out=element)``, the engine's ``ASSIGNMENT``): the one
    record of such a write, the traced engine's (``inplace.record_element_write``) and the
    replay's (``replay.SetElement``, or ``ElementwiseWrite`` where a block does not fuse the
    write), reversed by :meth:`reverse` in both, whose lines a
    compiled block runs in its place (:meth:`write_lines`, :meth:`back_lines`). It keeps
    what a ``tape.Write`` with :func:`write_pullback` would, less what such a write cannot
    have (no inverse, no operand kept): the value's place (``inputs``), the rule's plan
    (``state``, None: no gradient reaches the value written, a constant), the element's place
    (``written``), and the element before the write (``saved``): NumPy's scalar of its dtype
    where that holds every bit (``writes.exact_as_scalar``: 32 bytes against 112 for a 0-d
    copy of a float64), else a 0-d copy, put back into ``region``, the element's 0-d view, or,
    where ``region`` is the element's place, into the element of its buffer found then
    (``recompute.current_region``), so that the record does not keep the array alive."""

    __slots__ = ("primitive", "inputs", "state", "written", "region", "saved", "where")

    settings = key = None
    outputs = ()
    kept = (None,)  # (it keeps no operand: a replay's recomputation has nothing to replace)
    undo_kind = "checkpoint"
    undo_first = True
    line = Write.line

    def __init__(self, primitive, inputs, state, written, region, saved):
        self.primitive = primitive
        self.inputs = inputs
        self.state = state
        self.written = written
        self.region = region
        self.saved = saved
        self.where = None

    @property
    def taken(self):
        return self.written

    @property
    def undo(self):
        """The callable that puts back what the write overwrote: the record itself."""
        return self

    @property
    def pullback(self):
        return None if self.state is None else write_pullback

    def __call__(self):
        region = self.region
        if type(region) is not np.ndarray:
            place = region
            buffer = place.buffer
            array = buffer.ref()
            if array is None:  # a temporary nothing reads any more
                return
            if type(array) is np.ndarray and buffer.c_contiguous and array.dtype is place.dtype \
                    and place.offset % array.itemsize == 0:
                # (the element by its position in C order, which is its place in memory: what
                # ``current_region`` would view, without making the view)
                array.flat[place.offset // array.itemsize] = self.saved
                return
            region = current_region(place)
        region[()] = self.saved

    def reverse(self, shadows, handing=None):
        """What ``Write.reverse`` does with this record: the cotangent of the value written
        taken, the element put back, and the value's cotangent made from it
        (:func:`write_pullback`). A float64 element's cotangent in a shadow of its own, mapped
        flat, is taken as Python's float (``Shadows.take``'s element, without its 0-d array),
        for ``_scalar_back``, else as the array it would have been.

        ``handing``: the output of the :class:`ElementsRead` record the reverse pass runs next
        (``ReverseTape.replay``), or None. Where the value written passes its cotangent to it
        through the stand-in (``fold_written``: ``x[i, j] += x[i, j - 1]``), which has no
        shadow, and that cotangent is Python's float, it is handed on as such
        (``reverse_folded``'s ``d``), not made the stand-in's shadow, which that record's
        pullback would take out at once and read as that float: returns ``(cotangent,)``.
        Else None."""
        written, inputs = self.written, self.inputs
        d = dy = None
        entry = None if written.whole or written.dtype is not _REAL or written.shape else \
            shadows.entries.get(written.buffer.key)
        flat = None if entry is None or entry[3] is not None else entry[2]
        if type(flat) is NDARRAY and flat.dtype is _REAL and written.offset % 8 == 0:
            i = written.offset >> 3
            d = flat.item(i)
            flat[i] = 0.0
        else:
            dy = shadows.take(written)
        self()
        state = self.state
        if state is None or d is None and dy is None:
            return
        if id(inputs) in _WRITTEN_IDS and shadows.spare is None \
                and inputs[0].key not in shadows.entries:
            # (``write_pullback``'s answer where the value written passes its cotangent
            # through the stand-in (``fold_written``), which has no shadow yet: the cotangent
            # becomes its shadow, as ``Shadows.add`` makes an array it owns, marked as
            # ``_lean_cotangents`` marks its own where it is made here)
            written = inputs[0]
            if d is not None and written.dtype is _REAL:
                if written is handing:
                    return (d,)
                dy = np.array(d)
                shadows.entries[written.key] = [written, dy, None, None, dy]
                return
            if type(dy) is NDARRAY and dy.dtype is written.dtype and not dy.ndim \
                    and dy.flags.writeable:
                shadows.entries[written.key] = [written, dy, None, None]
                return
        elif d is not None and len(state) == 2 and shadows.spare is None \
                and _scalar_back(shadows, state, d, inputs, self.kept, ()):
            return  # (``write_pullback``'s, which reads no more of the record here)
        write_pullback(self, shadows, np.array(d) if dy is None else dy)

    @staticmethod
    def write(tape, key, ufunc, values, region):
        """``ufunc(*values, out=region)`` into the element ``region`` (a 0-d view) of the
        buffer named ``key`` of ``tape``, as its record needs it done, the traced engine's
        (``inplace.record_element_write``) and the replay's: the element kept first (NumPy's
        scalar where that holds every bit, ``writes.exact_as_scalar``, else a 0-d copy), then
        ``Tape.before_write``, then the write (the steps of :meth:`write_lines`). Returns
        what was kept."""
        saved = region[()] if region.dtype in EXACT_AS_SCALAR else region.copy()
        tape.before_write(key)
        value = values[0]
        if ufunc is np.positive and region.dtype is _REAL and (
                type(value) is float or type(value) is NDARRAY and value.dtype is _REAL):
            # (np.positive of a float64 copies its bytes, a NaN's as they are, and raises no
            # error: NumPy's assignment of one, at a tenth of the cost)
            region[()] = value
        else:
            ufunc(*values, out=region)
        return saved

    @staticmethod
    def write_lines(array, index, value, saved, before, ufunc=None, exact=True):
        """The lines of a compiled block that do the write and keep what its record keeps
        (:meth:`write`'s steps): ``saved``, the element ``array[index]``, then ``before``
        (``Tape.before_write``'s lines), then the assignment of ``value`` (names the block
        binds). Where ``ufunc`` is given, ``array`` is the element's 0-d view (``index``
        ``()``), written as tracing writes it, ``ufunc(value, out=array)`` (NumPy's assignment
        may round otherwise: a large integer into a float32), and kept as tracing keeps it:
        NumPy's scalar where it is ``exact`` (``writes.exact_as_scalar``), else a 0-d copy."""
        if ufunc is None:
            return [f"{saved} = {array}[{index}]", *before, f"{array}[{index}] = {value}"]
        kept = f"{array}[()]" if exact else f"{array}.copy()"
        return [f"{saved} = {kept}", *before, f"{ufunc}({value}, out={array})"]

    @staticmethod
    def back_lines(take, array, index, saved):
        """The lines of a compiled block that begin :meth:`reverse`: ``take``, lines that take
        the cotangent of the value written (as ``Shadows.take``), then the element put back."""
        return [*take, f"{array}[{index}] = {saved}"]


class Rerun:
    """How an elementwise write is redone (``writes.Undo``'s ``redo``): ``ufunc`` again, from
    the inputs read now, into ``out``. Writes without keyword arguments share one per ufunc."""

    __slots__ = ("ufunc", "kwargs", "copies")

    _shared = {}

    def __init__(self, ufunc, kwargs):
        self.ufunc = ufunc
        self.kwargs = kwargs
        # an assignment (``x[key] = v``): its one input copied into ``out`` as it is, which a
        # chain may compute there instead (``recompute.Recomputation.recompute_into``)
        self.copies = ufunc is np.positive and not kwargs

    @classmethod
    def of(cls, ufunc, kwargs):
        if kwargs:
            return cls(ufunc, kwargs)
        rerun = cls._shared.get(ufunc)
        if rerun is None:
            rerun = cls._shared[ufunc] = cls(ufunc, None)
        return rerun

    def __call__(self, inputs, out):
        if self.kwargs:
            return self.ufunc(*inputs, out=out, **self.kwargs)
        return self.ufunc(*inputs, out=out)


ASSIGNMENT = ElementwiseRule((ONE,), reads=((),), inverse=(lambda t, others: None,))
"""The engine's own rule for assignment (``x[key] = v``, a function's ``out=``): NumPy copies
``v`` into the target (``np.positive`` with ``out=``), and the cotangent passes back to ``v``.
Assigning a region onto itself changes nothing, so its inverse does nothing."""
Rule(elementwise=ASSIGNMENT, complex=HOLOMORPHIC)  # the core's own row (no key): complex too
