"""The operations of the traced engine: ufuncs, assignment, and functions with rules.

Each runs a rule on the plain values of its operands (``_unwrap``, ``_unwrap_args``) and records
what it did: a ufunc (``apply_ufunc``) as an ``elementwise.Elementwise`` record, or, with
``out=``, as an elementwise write (``WritePlan``, which the replay of a recording runs too);
an assignment (``assign``) as the write of ``np.positive``; a function with a pure rule
(``apply_function``) as a record of the rule's ``back`` (``function_pullback``), named by a
``Primitive`` (``primitive``); a NumPy function (``apply_array_function``) by its rule, its
in-place or composite handler (``door``), or as a function without a derivative; and an
in-place custom rule (``apply_inplace_rule``) as a write whose undo the rule's ``back`` does.
The commonest calls of a scalar loop take shorter paths that make the same records: a ufunc
on traced arrays with an elementwise rule (``fast_ufunc``) or a pure one (``a @ b``,
``_fast_function``, which also takes a NumPy function's pure rule on such arrays: ``np.sum(x)``),
and the assignment of one element (``assign(..., element=True)``); so do a stencil's or a
row's writes whose bytes are saved, augmented (``fast_write``) or assigned (``fast_assign``).

They call one another (a ufunc's complex or generalized rule is a function's, a function's
``out=`` is an assignment, an assignment is a ufunc's write), so they are one module: above the
tape and the traced array (``reverse``) and the write path (``inplace``), below the dispatch
(``tracing``) that sends NumPy's calls here.
"""

import functools
import types
import weakref

import numpy as np

from ..core.allocation import (Preexisting, converted_by_numpy, joined_operands, stand_in_value,
                               ufunc_operands,
                               without_derivative)
from .arraylike import (as_assigned, inexact_output, integers_assigned, integers_out,
                        joined_in_order, keywords_in_place, masked_ufunc, judge_out,
                        numpys_loop_error, out_by_keyword,
                        out_computation, out_position, stands_for_scalar, untraced_write,
                        weak_beside_arrays, weak_value)
from ..core.devices import is_device
from ..core.debug import ERRORS, SKIPPED, from_user_line
from .elementwise import (_NOTHING_KEPT, ARITHMETIC, ASSIGNMENT, ElementWrite, Elementwise,
                          Gathered, Rerun, arithmetic_in_python, differentiable, elementwise_kept,
                          in_the_loops_kinds, read_by_partials, write_kept, write_pullback)
from ..core.errors import (MutadError, RuleError, UnsupportedOperationError,
                           differentiated_keyword, function_name, holds_objects, no_rule,
                           objects_refused)
from .inplace import (SavedWrite, _destination, _finder, _named, _rule_restores, apart_from,
                      check_destination, on_constants, record_element_write, record_saved_write,
                      record_write, target_position, write_constant)
from .recompute import SMALL, Held, Kept, Tracked, flat, keeps_memory, small, written
from ..core.registry import (CONVENTION, HOLOMORPHIC, NO_RULE, RULES, ElementwiseRule, Rule,
                             dropped_derivative, pyfunc_ufunc_rule,
                             check_complex, complex_among, is_recomputable, is_user_rule, lookup,
                             value_arguments)
from .reverse import (Traced, _NUMBERS, _if_held, _read_only, active, add_cotangents, carries,
                      check_alias, constant_result, ended, freeze, fresh, fresh_value, innermost,
                      keep, locate, place_at, place_of, plain, private, recipe,
                      view_of)
from ..core.levels import ACTIVE, escaped, handled
from ..core.shadows import (Buffer, Place, lendable, overlapping, result_buffer, scalar_buffer,
                            zeros)
from ..core.tape import OneOutput, Primitive, Record, Write
from ..core.views import (NDARRAY, itself, memory, overlaps_itself, owner, same_region, views,
                          weaken, wrapped, writeable)
from .writes import (raised_after_writing, CopyBack, ElementwiseInverse, Reads, Undo, Undos,
                     raising_ignored, reads_written, written_before_raising)

_FLOAT64 = np.float64
_new_ref = weakref.ref.__new__
_new = object.__new__
_REAL = np.dtype(float)

CONSTANT = ElementwiseRule((None, None, None))
"""The rule of a non-differentiable ufunc writing into a traced array: no gradient flows."""
Rule(elementwise=CONSTANT, complex=HOLOMORPHIC)  # the core's own row (no key): complex values too


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
                x = private(x)  # (a ufunc's result is new memory: never a view of it)
            elif kind is list or kind is tuple or kind is Preexisting or (
                    kind is not float and kind is not int and converted_by_numpy(x)):
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
        if type(x) is Preexisting:
            x = stand_in_value(x)
        if type(x) is Traced and x.tape is tape:
            values.append(weak_value(x.value) if numbers and x.buffer.weak else x.value)
            if not x.buffer.constant:
                traced |= 1 << i
        elif ended(x):
            values.append(memory(x))
        else:
            if type(x) is np.ndarray:
                check_alias(x)
            values.append(x)
    return tape, values, traced


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
                raise differentiated_keyword(name, key, "traced array")
            value.buffer.read = True
            values = dict(values) if values is kwargs else values
            values[key] = value.value
    return values


# ----------------------------------------------------------------------------------------------
# Elementwise ufuncs


def apply_ufunc(ufunc, inputs, out=None, kwargs=None, rule=None):
    """``ufunc(*inputs, out=out, **kwargs)`` with ``ufunc``'s rule (or ``rule``, given)."""
    if kwargs and ("dtype" in kwargs or "signature" in kwargs):
        inputs = in_the_loops_kinds(ufunc, inputs, kwargs)
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
    if pattern and type(out) is not Traced and out is not None:
        written = integers_out(ufunc, inputs, out, kwargs or {})
        if written is not None:
            return written
    if kwargs and kwargs.get("where", True) is not True and (pattern or not (
            out is None or type(out) is Traced and out.tape is tape and out.buffer.constant)):
        return masked_ufunc(ufunc, inputs, out, kwargs)
    if tape.recorder is not None:
        if tape.recorder.ready:
            return tape.recorder.ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern)
    elif out is None and not kwargs and rule is None and pattern and tape.outer is None:
        # the common case: ``fast_ufunc`` (called by this, called by the engine)
        yt = fast_ufunc(ufunc, inputs, tape, values, pattern, SKIPPED)
        if yt is not None:
            return yt
    return unwrapped_ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern)


def unwrapped_ufunc(ufunc, inputs, out, kwargs, rule, tape, values, pattern):
    """``apply_ufunc`` once the inputs are unwrapped (``_unwrap``: ``tape``, their ``values``
    and the ``pattern`` of traced ones)."""
    kwargs = dict(kwargs) if kwargs else {}
    if not pattern and (out is None or (type(out) is Traced and out.tape is tape
                                        and out.buffer.constant)):
        return _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape)
    if rule is None:
        entry = RULES.get(ufunc, NO_RULE)
        rule = entry.elementwise
        if entry.complex_rules is not None and complex_among(values):  # not complex-differentiable
            if out is not None:
                kwargs["out"] = out
            return apply_function(function_name(ufunc), entry.complex_rules[0], inputs,
                                  kwargs)
        if rule is None and entry.reverse is not None:  # generalized ufuncs (matmul)
            if complex_among(values):
                numpys_loop_error(ufunc, values)
            if out is not None:
                kwargs["out"] = out
            return apply_function(function_name(ufunc), entry.reverse, inputs, kwargs)
        if rule is None:
            if entry is NO_RULE and pyfunc_ufunc_rule(ufunc).composite is not None:
                if out is not None:
                    kwargs["out"] = out
                return door(tape, pyfunc_ufunc_rule(ufunc).composite, (ufunc, *inputs), kwargs)
            if not entry.nondifferentiable:
                raise no_rule(ufunc)
            if out is None:
                return without_derivative(ufunc(*values, **kwargs), values, kwargs, tape.level)
            rule = CONSTANT
    if out is not None:
        if rule is not ASSIGNMENT and type(out) is Traced and out.value.dtype.kind != "c" \
                and complex_among(values):
            # complex values into a real ``out`` (casting='unsafe'): NumPy's complex loop, then
            # its real part written; a rule's partials read the complex result (exp's y), not
            # the real part the target holds
            y = unwrapped_ufunc(ufunc, inputs, None, kwargs, rule, tape, values, pattern)
            return apply_ufunc(np.positive, (y,), out, _UNSAFE, ASSIGNMENT)
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


class _FastPlan:
    """What ``fast_ufunc`` needs of a ufunc's rule for one ``pattern`` of traced inputs, worked
    out once (``_fast_plan``): the rule's plan (``elementwise.differentiable``), the positions
    its partials read, the untraced positions, and the rule's decision and use of the output."""

    __slots__ = ("rule", "traced", "reads", "state", "read_at", "untraced", "decide", "uses_y",
                 "nothing", "extends", "complex_rules", "arithmetic")

    def __init__(self, rule, count, pattern, traced, reads, state, complex_rules, arithmetic):
        self.rule = rule
        self.traced = traced
        self.reads = reads
        self.state = state
        self.read_at = tuple(range(count)) if reads is None else tuple(
            i for i in range(count) if i in reads)
        self.untraced = tuple(i for i in range(count) if pattern >> i & 1 == 0)
        self.decide = rule.decide
        self.uses_y = "y" in rule.uses
        self.nothing = None
        if not self.uses_y and reads is not None and not reads and rule.decide is None:
            self.nothing = _NOTHING_KEPT.get(count) or (None,) * count
        # whether the record keeps more than the operands read: the decision, the output
        self.extends = self.uses_y or rule.decide is not None
        self.complex_rules = complex_rules
        # whether ``arithmetic_in_python`` may compute it (+ - * / of two operands)
        self.arithmetic = arithmetic


_FAST = {}
"""``_FastPlan`` (or False: the general path) by ufunc, then by pattern of traced inputs."""


def _fast_plan(ufunc, pattern, count):
    """The ``_FastPlan`` of ``ufunc`` for ``pattern``, or False where the general path of
    ``unwrapped_ufunc`` is taken (no elementwise rule, a rule that refuses the pattern): made
    once, remembered in ``_FAST``."""
    entry = RULES.get(ufunc, NO_RULE)
    rule = entry.elementwise
    plan = False
    if rule is None and entry.reverse is not None and count == ufunc.nin and ufunc.nout == 1:
        plan = _FastFunction(ufunc, entry.reverse)  # ``_fast_function``
    elif rule is not None and count == ufunc.nin:
        try:
            traced, reads, state = differentiable(ufunc, rule, pattern, count)
        except Exception as error:  # noqa: BLE001 (the general path raises it, where it does)
            handled(error)
            traced = None
        if traced:
            plan = _FastPlan(rule, count, pattern, traced, reads, state,
                             entry.complex_rules is not None,
                             count == 2 and ufunc in ARITHMETIC)
    _FAST.setdefault(ufunc, {})[pattern] = plan
    return plan


def fast_ufunc(ufunc, inputs, tape, values, pattern, skip, named=None):
    """``unwrapped_ufunc`` for the common case, in one function, or None where the general
    path is taken: a ufunc on ``inputs`` (``_unwrap``: ``tape``, their ``values`` and the
    ``pattern`` of traced ones, not 0), no ``out=``, no keyword argument, an elementwise rule
    that gives some input a gradient (or a generalized ufunc's pure rule, on real arrays of
    the tape: ``_fast_function``), a tape that no replay records and no other differentiation
    encloses. It does what the general path does, in the same order, with what the plan of
    ``ufunc`` for ``pattern`` worked out once (``_fast_plan``). ``skip``: how many frames
    ``debug.caller`` skips, its own and this one's included: those of the engine's on every
    path here (``debug.SKIPPED``). ``named``: the record's inputs (``recipe``), where the caller
    found every input a whole array of ``tape`` or a Python number; None: worked out here."""
    try:  # (subscripts, not ``dict.get``: the interpreter's specialised lookup, per operation)
        plan = _FAST[ufunc][pattern]
    except KeyError:
        plan = _fast_plan(ufunc, pattern, len(inputs))
    if type(plan) is not _FastPlan:
        if type(plan) is _FastFunction and plan.rule is RULES.get(ufunc, NO_RULE).reverse:
            if pattern == (1 << len(inputs)) - 1:
                if _real_arrays(inputs):
                    return _fast_function(ufunc, inputs, tape, values, plan, skip + 1)
            elif _real_constants(inputs, values, pattern):
                return _constant_product(plan, inputs, values, pattern, tape, skip + 1)
        return None
    # (a rule declared again since the plan was made: the general path, which reads it; a
    # plan of this kind was made from the ufunc's entry, which may since have gone)
    try:
        if plan.rule is not RULES[ufunc].elementwise:
            return None
    except KeyError:
        return None
    if plan.complex_rules is not False:  # (a complex operand: the general path's own rules)
        for value in values:  # (``complex_among``, its common answers first: float64, numbers)
            kind = type(value)
            if kind is NDARRAY:
                dtype = value.dtype
                if dtype is not _REAL and dtype.kind == "c":
                    return None
            elif kind is not float and kind is not int and complex_among((value,)):
                return None
    running = ACTIVE.running  # (``active``)
    if not running or (running[-1] is not tape and tape not in running):
        raise escaped("a traced array")
    # (a scalar loop's: Python's float, the same; not asked where the first operand is an
    # array with axes, which ``arithmetic_in_python`` refuses: an array program's operations)
    y = None
    if plan.arithmetic:
        first = values[0]
        if type(first) is not NDARRAY or not first.ndim:
            y = arithmetic_in_python(ufunc, values)
    if y is not None:  # (a real 0-d result, of its own buffer: as ``fresh`` wraps it, below)
        y = np.array(y)
        _read_only(y, False)
        buffer = scalar_buffer(_REAL)
        yt = Traced(y, buffer, tape, True)
    else:
        y = ufunc(*values)
        kind = type(y)
        if kind is NDARRAY:  # (the common case first)
            pass
        elif kind is _FLOAT64 or kind is float:  # a 0-d result: NumPy's scalar (``fresh_value``)
            y = np.array(y)
            _read_only(y, False)
        elif isinstance(y, np.inexact):
            y = fresh_value(y)
        if type(y) is NDARRAY:  # (``fresh``)
            dtype = y.dtype
            if dtype is not _REAL and dtype.kind == "c":
                check_complex(function_name(ufunc), plan.rule)
            buffer = result_buffer(y)
            if y.nbytes >= SMALL:
                if y.base is None:  # (``Tracked(y)`` of a new array, made as the Kept below)
                    buffer.ref = ref = _new_ref(Tracked, y)
                    ref.layout = None
                else:
                    buffer.ref = Tracked(y)
            # (``Traced(y, buffer, tape, True)``, its fields set here, without the class's call:
            # its owner noted by ``view_of``, as ``fresh``)
            yt = _new(Traced)
            yt.value = y
            yt.buffer = buffer
            yt.tape = tape
            yt.whole = True
            yt.indexed = None
        else:
            if getattr(y, "dtype", None) is not None and y.dtype.kind == "c":
                check_complex(function_name(ufunc), plan.rule)
            yt = fresh(y, tape)
            buffer, y = yt.buffer, yt.value
    nothing = plan.nothing
    if nothing is not None:  # (what ``read_by_partials`` gives is not kept: all None)
        read = nothing
    elif plan.reads is None:  # (``read_by_partials``)
        read = values
    else:
        read = [None] * len(values)
        for i in plan.read_at:
            read[i] = values[i]
    for i in plan.untraced:
        if type(inputs[i]) not in _NUMBERS:
            keep(tape, inputs[i], read[i])
    # (``recipe``, for arrays of the tape and Python's numbers: the commonest operands; else
    # the caller's)
    if named is None and len(inputs) == 1:
        x = inputs[0]  # (traced: ``pattern`` is not 0)
        named = (x.buffer,) if x.whole and x.tape is tape else recipe(inputs, values, read,
                                                                      tape)
    elif named is None:
        named = []
        for x in inputs:
            if type(x) is Traced and x.tape is tape:  # (a view's place: a slice's stencil)
                named.append(x.buffer if x.whole else place_of(x))
            elif type(x) is float or type(x) is int:
                named.append(x)
            else:
                named = recipe(inputs, values, read, tape)
                break
        else:
            named = tuple(named)
    uses_y = plan.uses_y
    if plan.extends:  # (a decision or the output kept; ``nothing``: neither)
        if plan.decide is not None:
            read = [*read, plan.decide(*values)]
        if uses_y:
            read.append(y)
    # (``Elementwise(ufunc, named, None, buffer, read, plan.state)``, its fields set here,
    # without the class's call: a record per operation)
    record = _new(Elementwise)
    record.primitive = ufunc
    record.inputs = named
    record.settings = None
    record.output = buffer
    record.kept = read
    record.state = plan.state
    record.where = tape.caller(skip, tape.lines)  # (``ReverseTape.record``)
    recomputation = tape.recomputation
    if recomputation is not None:
        if nothing is None:  # (``ReverseTape.hold``)
            for i in plan.read_at:
                value, place = read[i], named[i]
                if value is None:
                    continue
                kind = type(place)
                if kind is Buffer and place.origin is None and type(value) is NDARRAY:
                    # (``Recomputation.hold``'s answer where no recipe can recompute the
                    # buffer, the common case: the record keeps the array, and says so once)
                    ref = place.ref
                    if ref is None and value.base is None:
                        # (``Kept(value)`` of an array of its own memory, as ``Tracked``
                        # makes it, without the call of its ``__new__``: a third of the cost)
                        place.ref = ref = _new_ref(Kept, value)
                        ref.layout = None
                    elif ref is None:
                        place.ref = Kept(value)
                    elif type(ref) is not Kept and type(ref) is not Held:
                        read[i] = recomputation.hold(place, value)
                elif kind is Buffer or kind is Place:
                    read[i] = recomputation.hold(place, value)
        if buffer.ref is not None:
            recomputation.give_recipe(record, 0, buffer, None)
        if uses_y:
            read[-1] = recomputation.hold(buffer, y)
    records = tape.records
    # (``ReverseTape.fold``'s first question, asked here: it folds only after a write, or
    # after an elementwise record that follows a read of an element; after another
    # elementwise record or a read, the common cases, it has nothing to fold)
    if records:
        kind = type(records[-1])
        if kind is Elementwise:  # (the commonest first: a chain of operations on arrays)
            if len(records) > 1 and type(records[-2]) is Gathered:
                tape.fold()
        elif kind is Write or kind is ElementWrite:
            tape.fold()
    records.append(record)
    errors = ERRORS.get()  # (as ReverseTape.record notes an np.errstate block's handling)
    if errors is not tape.errors and tape.errors is not None:
        tape.errors_of[id(record)] = (record, errors)
    if tape.anomaly is not None:
        tape.anomaly.produced(record, values, [y])
    return yt


def observed_ufunc(ufunc, inputs, tape, values, pattern):
    """``unwrapped_ufunc`` of a ufunc with no ``out=`` and no keyword argument while a replay
    records the call (``replay.Recorder.ufunc``, which writes down what it did): the common
    case's ``fast_ufunc`` where the ufunc's plan for ``pattern`` is an elementwise one, whose
    one ``Elementwise`` record is the general path's, or a product's of traced operands alone
    (``_fast_function``, whose ``Product`` record ``replay.Function`` takes as the general
    path's); else the general path."""
    plans = _FAST.get(ufunc)
    plan = None if plans is None else plans.get(pattern)
    if plan is None:
        plan = _fast_plan(ufunc, pattern, len(inputs))
    kind = type(plan)
    if kind is _FastPlan or kind is _FastFunction and pattern == (1 << len(inputs)) - 1:
        yt = fast_ufunc(ufunc, inputs, tape, values, pattern, SKIPPED)
        if yt is not None:
            return yt
    return unwrapped_ufunc(ufunc, inputs, None, None, None, tape, values, pattern)


class _FastFunction:
    """What ``_fast_function`` needs of a generalized ufunc (np.matmul) or a NumPy function
    with a pure rule, worked out once (``_fast_plan``, ``_function_plan``): the rule, the
    primitive that names it in records, whether it is a user's (whose cotangents are never
    adopted) and whether it offers plain functions (``_plain_functions``)."""

    __slots__ = ("rule", "primitive", "user", "specialized", "plain", "kept_small")

    def __init__(self, func, rule):
        self.rule = rule
        self.primitive = primitive(function_name(func), rule)
        self.user = is_user_rule(rule)
        self.specialized = getattr(getattr(rule, "__wrapped__", rule), "specialized",
                                   None) is not None
        # the operands' numbers of dimensions -> what the rule offers for them (``_offered``):
        # asked once, not per dot product
        self.plain = {}
        # the operands' shapes and dtypes -> whether the output is small, which the memory
        # policy keeps rather than recomputes (``_constant_product``)
        self.kept_small = {}

    def plain_functions(self, values):
        """``_plain_functions(self.rule, values, None)``, the rule's offer kept by ``values``'
        numbers of dimensions (the arrays' own, as ``np.ndim`` reads them)."""
        # (a product's two operands, the commonest, without a list's comprehension)
        dims = (values[0].ndim, values[1].ndim) if len(values) == 2 else tuple(
            [v.ndim for v in values])
        offered = self.plain.get(dims, False)
        if offered is False:
            offered = self.plain[dims] = _offered(self.rule, dims, None)
        return offered if offered is not None and _fit(offered, values) else None


_FUNCTIONS = {}
"""``_FastFunction`` by NumPy function (``_function_plan``)."""

SHAPES_KEPT = 64
"""How many operands' shapes a ``_FastFunction`` remembers the size of the output of."""


def _function_plan(func, rule, args, tape):
    """The ``_FastFunction`` of ``func``, whose pure rule is ``rule``, where
    ``apply_function(name, rule, args, {}, tape)`` may be ``_fast_function``'s: ``args`` are
    real NumPy arrays ``tape`` traces (not constants, none standing for a Python number), on a
    tape that no replay records and no other differentiation encloses; else None. There
    ``apply_function`` hands the rule the arrays' values as they are and keeps nothing else."""
    if not args or tape.recorder is not None or tape.outer is not None:
        return None
    for x in args:
        if type(x) is not Traced or x.tape is not tape:
            return None
        buffer, value = x.buffer, x.value
        if buffer.constant or buffer.weak or type(value) is not NDARRAY \
                or value.dtype.kind != "f":
            return None
    return _function_of(func, rule)


def _function_of(func, rule):
    """The ``_FastFunction`` of ``func``, whose pure rule is ``rule``, made once."""
    plan = _FUNCTIONS.get(func)
    if plan is None or plan.rule is not rule:
        plan = _FUNCTIONS[func] = _FastFunction(func, rule)
    return plan


def _real_arrays(inputs):
    """Whether each of ``inputs`` (traced arrays, ``_unwrap`` found) is a real array that does not
    stand for a Python number: its value is what ``apply_function`` hands the rule."""
    for x in inputs:
        if x.buffer.weak or x.value.dtype.kind != "f":
            return False
    return True


def _real_constants(inputs, values, pattern):
    """Whether the traced ones of ``inputs`` (bit i of ``pattern`` set) are real arrays that do
    not stand for a Python number, and the others (``values``, as ``_unwrap`` found them) NumPy's
    real arrays, as the general path hands them to the rule: a product with a constant operand
    (``W @ x``), whose record computes the traced operand's cotangent alone (``_traced_back``)."""
    for i, (x, v) in enumerate(zip(inputs, values)):
        if type(v) is not NDARRAY or v.dtype.kind != "f":
            return False
        if pattern >> i & 1 and x.buffer.weak:
            return False
    return True


def _constant_plan(func, rule, args, tape):
    """``(plan, values, pattern)`` where ``apply_function(name, rule, args, {}, tape)`` may be
    ``_fast_function``'s with constant operands: some of ``args`` real arrays ``tape`` traces,
    the others its constants or NumPy's real arrays (``_real_constants``); else None."""
    if not args or tape.recorder is not None or tape.outer is not None:
        return None
    values = []
    pattern = 0
    for i, x in enumerate(args):
        if type(x) is Traced:
            if x.tape is not tape or x.buffer.weak:
                return None
            if not x.buffer.constant:
                pattern |= 1 << i
            value = x.value
        elif type(x) is NDARRAY:
            check_alias(x)  # (as ``_unwrap_args``)
            value = x
        else:
            return None
        if type(value) is not NDARRAY or value.dtype.kind != "f":
            return None
        values.append(value)
    if not pattern:
        return None
    return _function_of(func, rule), values, pattern


def _traced_back(back, pattern):
    """``back(dy, *values)`` of a rule's plain functions (``_plain_functions``), made to give the
    cotangents of the operands of ``pattern`` alone, from its ``parts`` (one function per
    operand's cotangent, the same expressions); None where it has none. Made once for each."""
    key = (back, pattern)
    traced = _TRACED_BACKS.get(key)
    if traced is None:
        parts = getattr(back, "parts", None)
        if parts is None:
            return None
        chosen = tuple(part for i, part in enumerate(parts) if pattern >> i & 1)

        def traced(dy, *values):
            return tuple([part(dy, *values) for part in chosen])

        traced = _TRACED_BACKS[key] = traced
    return traced


_TRACED_BACKS = {}
"""``_traced_back``'s functions by back and pattern."""


def _plain_settings(kwargs):
    """Whether each of ``kwargs`` is a plain setting of a NumPy function, a Python ``int``,
    ``bool`` or None, or a tuple of ``int`` (``axis=0``, ``keepdims=True``, ``ddof=1``,
    ``axis=(0, 1)``), other than ``out`` and ``like``: a value that carries no derivative,
    which the general path hands the rule as it is and its record keeps as it is
    (``_record_function``'s settings)."""
    for name, value in kwargs.items():
        kind = type(value)
        if kind is tuple:
            for item in value:
                if type(item) is not int:
                    return False
        elif kind is not int and kind is not bool and value is not None:
            return False
        if name == "out" or name == "like":
            return False
    return True


def _fast_function(ufunc, inputs, tape, values, plan, skip, settings=None):
    """``apply_function`` for a generalized ufunc (``a @ b``) whose operands are all real arrays
    traced by ``tape``, in one function called by ``fast_ufunc`` (its conditions; ``skip``
    counts ``ReverseTape.record``'s frame too): the rule runs and its record is made as there,
    with what ``plan`` worked out once. A dot product in a loop over rows makes one per step.
    A NumPy function's (``np.sum(x)``: ``apply_array_function``, ``_function_plan``'s
    conditions) too, which may give several outputs, or an array of objects: those are the
    general path's, which takes what the rule gave. Where only some operands are traced, the
    others constants: ``_constant_product``. ``settings``: a NumPy function's plain keyword
    arguments (``_plain_settings``), handed to the rule and kept by its record, as the general
    path's ``apply_function`` does; None where there are none."""
    active(tape)
    rule = plan.rule
    plain = None if plan.user or not plan.specialized or settings is not None \
        else plan.plain_functions(values)
    if plain is not None:
        y, back = plain[0](*values), plain[1]
    else:
        y, back = rule(*values) if settings is None else rule(*values, **settings)
        if isinstance(y, (tuple, list)) or type(y) is NDARRAY and y.dtype.kind == "O":
            return apply_function(str(plan.primitive), rule, inputs, dict(settings or {}),
                                  tape, (y, back))
    if type(y) is _FLOAT64:
        # (a dot product's NumPy scalar, a loop's commonest: ``_output``'s answer, as
        # ``fast_ufunc`` wraps one, its conditions those of ``fresh``'s short path)
        y = np.array(y)
        _read_only(y, False)
        result = Traced(y, scalar_buffer(_REAL), tape, True)
    else:
        if type(y) is NDARRAY:
            for x, v in zip(inputs, values):
                if y is v:
                    return x  # NumPy's result is the argument itself
        if plain is None and complex_among((y,)):
            back = complex_back(str(plan.primitive), rule, back)
        result, created = _output(tape, y, inputs)
        if not created:
            return result
    # (``_record_function``: every argument traced; a product's two, without a comprehension)
    places = (place_of(inputs[0]), place_of(inputs[1])) if len(inputs) == 2 else tuple(
        [place_of(x) for x in inputs])
    if plain is not None:
        record = Product(plan.primitive, places, None, result.buffer, None,
                         (back, *_kept(plain, values)))
    else:
        primals = None if plan.user else {id(owner(x.value)) for x in inputs}
        outputs = [result.buffer]
        record = Record(plan.primitive, places, settings, (result.buffer,), None,
                        (back, list(places), primals, outputs, False), function_pullback)
    if tape.recomputation is not None and is_recomputable(rule):
        tape.recomputation.give_recipe(record, None, result.buffer, settings)
    tape.record(record, skip)
    if tape.anomaly is not None:
        tape.anomaly.produced(record, [*values, *(settings or {}).values()], [result])
    return result


def _constant_product(plan, inputs, values, pattern, tape, skip):
    """``_fast_function`` where only the operands of ``pattern`` are traced (bit i for operand
    i), the others constants (``_real_constants``, ``_constant_plan``), called as it is
    (``skip``: the same frames): where the rule offers plain functions
    whose back computes each cotangent apart (``_traced_back``), the product runs as them and
    its record computes the traced operands' cotangents alone (``W @ x``: not the outer product
    that would be ``W``'s), keeping the constants as the general path does; else the general
    path's."""
    plain = None if plan.user or not plan.specialized else plan.plain_functions(values)
    back = None if plain is None or len(plain) != 2 else _traced_back(plain[1], pattern)
    # (a record without the constants' places has no recipe: where the memory policy would
    # recompute the output rather than keep it, the general path's record, which has one)
    shapes = None if tape.recomputation is None or back is None else tuple(
        [(v.shape, v.dtype) for v in values])
    if back is None or (shapes is not None and plan.kept_small.get(shapes) is not True):
        result = apply_function(str(plan.primitive), plan.rule, inputs, {}, tape)
        if shapes is not None and type(result) is Traced:
            if len(plan.kept_small) > SHAPES_KEPT:
                plan.kept_small.clear()
            plan.kept_small[shapes] = small(result.value)
        return result
    active(tape)
    y = plain[0](*values)
    leaves = []
    for i, x in enumerate(inputs):
        if pattern >> i & 1:
            leaves.append(x)
        else:
            keep(tape, x, values[i])  # (the pullback reads it: ``apply_function``)
    result, created = _output(tape, y, leaves)
    if not created:
        return result
    record = Product(plan.primitive, tuple([place_of(x) for x in leaves]), None, result.buffer,
                     None, (back, *values))
    tape.record(record, skip)
    if tape.anomaly is not None:
        tape.anomaly.produced(record, list(values), [result])
    return result


def _ufunc_on_constants(ufunc, inputs, values, out, kwargs, tape):
    """A ufunc whose operands are constants and plain values, written into a constant or
    into a new array: it runs as on plain arrays."""
    if out is None:
        return constant_result(ufunc(*values, **kwargs), tape, inputs)
    write_constant(tape, out, None, lambda: ufunc(*values, out=out.value, **kwargs))
    return out


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


def _write_elementwise(ufunc, rule, tape, inputs, values, pattern, out, kwargs):
    traced, reads, state = differentiable(ufunc, rule, pattern, len(inputs))
    if type(out) is not Traced or out.tape is not tape:
        if traced:
            raise untraced_write(f"{function_name(ufunc)}(..., out=...)", out)
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
    recorder = tape.recorder  # (recording: its step runs the plan, as decided here)

    if not plan.invertible:  # (an assignment: no inverse to ask about)
        plan.run(tape, _destination(out), inputs, values, None)
        if recorder is not None:
            recorder.written = plan, None
        return out

    if recorder is None:  # asked only if the inverse is
        apart = functools.partial(apart_from, out, inputs, position)
    else:  # asked now, for the step too, whose replays share memory as the operands do now
        recorder.written = plan, apart_from(out, inputs, position)
        apart = _APART if recorder.written[1] else _OVER

    def withheld(kept):
        """Whether the inverse is withheld (:func:`_kept_for_the_inverse`): the write is saved,
        or rebuilt under a budget: exact, for no more memory."""
        if tape.recomputation is None or not any(
                _kept_for_the_inverse(inputs[i], values[i], kept[i], tape, out)
                for i in plan.others_at):
            return False
        if recorder is not None:  # a decision of the program's structure: replayed
            recorder.written = plan.withholding(), recorder.written[1]
        return True

    plan.run(tape, _destination(out), inputs, values, apart, withheld)
    return out


_FAST_WRITES = {}
"""By ufunc (``ASSIGNMENT`` for an assignment), then by pattern of traced operands: ``(reads,
state, plan)`` of the writes ``fast_write`` and ``fast_assign`` take (their
``differentiable`` and ``WritePlan``), or False where the general path is taken."""


_FAST_OUTS = {}
"""``_FAST_WRITES`` of the writes ``fast_out`` takes into an array apart from the operands."""


def _fast_write_plan(ufunc, pattern, apart=False):
    """What ``fast_write`` needs of ``ufunc``'s rule for ``pattern`` (of its operands, the
    first the target: two, or one, ``_fast_self_write``'s; ``ufunc`` ``ASSIGNMENT``: ``fast_assign``'s, of one operand, the value
    assigned; ``apart``: ``fast_out``'s, of its operands, none of them the target), worked out
    once and remembered in ``_FAST_WRITES`` (``_FAST_OUTS``): False where the general path is
    taken (no elementwise rule, or one that gives no operand a gradient, has complex rules of
    its own, refuses the pattern, or keeps more than a saved write's record does)."""
    if ufunc is ASSIGNMENT:
        rule, count, position, ufunc = ASSIGNMENT, 1, None, np.positive
    else:
        entry = RULES.get(ufunc, NO_RULE)
        rule, count, position = entry.elementwise, ufunc.nin, None if apart else 0
        if entry.complex_rules is not None or ufunc.nout != 1 or count > 2:
            rule = None
    plan = False
    if rule is not None:
        try:
            traced, reads, state = differentiable(ufunc, rule, pattern, count)
        except Exception as error:  # noqa: BLE001 (the general path raises it, where it does)
            handled(error)
            traced = None
        if not traced and rule is ASSIGNMENT and pattern == 0:
            state = None  # (a number assigned: no gradient reaches it, as ``_write_elementwise``
            traced = True  # plans it)
        if traced:
            write_plan = WritePlan.at(ufunc, rule, _NO_SETTINGS, position, reads, state, count)
            if write_plan.saves:
                plan = (reads, state, write_plan)
    plans = _FAST_OUTS if apart else _FAST_WRITES
    plans.setdefault(ASSIGNMENT if rule is ASSIGNMENT else ufunc, {})[pattern] = plan
    return plan


def _write_plan(ufunc, pattern, apart=False):
    """``_fast_write_plan(ufunc, pattern, apart)``, as remembered once worked out."""
    plans = (_FAST_OUTS if apart else _FAST_WRITES).get(ufunc)
    plan = None if plans is None else plans.get(pattern)
    return _fast_write_plan(ufunc, pattern, apart) if plan is None else plan


def _fast_operand(tape, target, other):
    """``other``'s value and whether it is traced (a pair), where ``_saved_write`` writes
    it into ``target`` (the checks the short paths share): a real traced array of a tape that no
    replay records, no other differentiation encloses, no anomaly detection watches and no
    memory budget rebuilds for, and a Python float or int or a real traced array of the same
    tape, neither standing for a Python number. None: the general path is taken."""
    recomputation = tape.recomputation
    value = target.value
    if tape.recorder is not None or tape.outer is not None or tape.anomaly is not None \
            or (recomputation is not None and recomputation.budget is not None) \
            or target.buffer.weak or type(value) is not NDARRAY or value.dtype.kind != "f":
        return None
    kind = type(other)
    if kind is float or kind is int:
        return other, False
    if kind is Traced and other.tape is tape and not other.buffer.weak \
            and type(other.value) is NDARRAY and other.value.dtype.kind == "f":
        return other.value, not other.buffer.constant
    return None


def fast_write(ufunc, target, other, skip=SKIPPED + 2):
    """The augmented assignment ``target op= other`` (``apply_ufunc(ufunc, (target, other),
    out=target)``) in one function where its bytes are saved, or None, with nothing done,
    where the general path is taken: operands ``_fast_operand`` takes, a ufunc whose rule gives
    an operand a gradient and whose write ``saves`` (``WritePlan``), a write ``Tape.copied``
    checkpoints. There what ``apply_ufunc``, ``_write_elementwise``, ``WritePlan.run`` and
    ``record_saved_write`` ask has one answer: the operands unwrap to their values, the target
    is operand 0 (its ``target_position``), and the record is the :class:`inplace.SavedWrite`
    those make, in the same order of steps (``_saved_write``; ``tracing``'s ``inplace`` calls it
    after its own questions, and its operators' short path before them: ``skip``, the frames
    ``debug.caller`` skips, one fewer)."""
    tape = target.tape
    operand = _fast_operand(tape, target, other)
    if operand is None:
        return None
    operand, traced = operand
    pattern = (0 if target.buffer.constant else 1) | traced << 1
    plan = _write_plan(ufunc, pattern)
    if plan is False:
        return None
    return _saved_write(ufunc, tape, target, other, [target.value, operand], plan, skip)


def fast_assign(target, value):
    """``assign``'s write of ``value``, a traced array of the target's tape and dtype (neither
    weak nor a constant) or a Python float (``x[1:-1] = 0.0``, ``_number_into``'s: the target
    no constant), into the traced region ``target`` (``target[...] = value``), as
    :func:`fast_write` writes an augmented assignment: None, with nothing done, where the
    general path is taken (``_fast_operand`` refuses, ``value`` is a 0-d array, whose record
    the general path may fold, or the target itself, whose assignment offers an inverse, or
    the bytes are not saved). A number's write is ``_write_elementwise``'s of pattern 0: no
    position, so no inverse on offer, the plan's partials None."""
    tape = target.tape
    if type(value) is float:
        if _fast_operand(tape, target, value) is None:
            return None
        plan = _write_plan(ASSIGNMENT, 0)
        if plan is False:
            return None
        return _saved_write(np.positive, tape, target, value, [value], plan)
    if not value.value.ndim or _fast_operand(tape, target, value) is None or (
            value.buffer is target.buffer and same_region(value.value, target.value)):
        return None
    plan = _write_plan(ASSIGNMENT, 1)
    if plan is False:
        return None
    return _saved_write(np.positive, tape, target, value, [value.value], plan)


def fast_out(ufunc, inputs, out):
    """``ufunc(*inputs, out=out)`` for ``out`` a traced array and no other keyword argument
    (``np.multiply(a, b, out=c)``, as ``Traced.__array_ufunc__`` receives it: the general path
    is ``apply_ufunc(ufunc, inputs, out)``) in one function, or None, with nothing done, where
    the general path is taken. ``np.add(u, v, out=u)`` is ``u += v``: :func:`fast_write`'s.
    Into an array none of whose memory an operand is traced in (``target_position`` finds
    none, so no inverse is on offer), :func:`_saved_write` makes the record the general path
    makes (``_write_elementwise``, ``WritePlan.run``, ``record_saved_write``), where the
    operands and the target are those ``_fast_operand`` takes and the rule's write saves."""
    tape = out.tape
    if inputs[0] is out:
        if len(inputs) == 2:
            return fast_write(ufunc, out, inputs[1])
        return _fast_self_write(ufunc, tape, out)
    values = []
    pattern = 0
    for i, x in enumerate(inputs):
        if type(x) is Traced and x.buffer is out.buffer:
            return None  # the target, or over it
        operand = _fast_operand(tape, out, x)
        if operand is None:
            return None
        values.append(operand[0])
        pattern |= operand[1] << i
    if len(values) == 1 and getattr(values[0], "shape", None) == ():
        return None  # (a 0-d value written: its record may fold, ``record_saved_write``)
    plan = _write_plan(ufunc, pattern, True)
    if plan is False:
        return None
    # (called by this, called by the engine)
    return _saved_write(ufunc, tape, out, None, values, plan, SKIPPED + 1, inputs)


def _fast_self_write(ufunc, tape, target):
    """``ufunc(target, out=target)`` (``np.sin(u, out=u)``) as :func:`fast_write` writes an
    augmented assignment, by the plan of the target alone (operand 0, as ``target_position``
    finds it): None, with nothing done, where the general path is taken (``_fast_operand``
    refuses the target, it is a constant or 0-d, whose record the general path may fold, or
    the bytes are not saved)."""
    if ufunc.nin != 1 or target.buffer.constant or _fast_operand(tape, target, target) is None \
            or not target.value.ndim:
        return None
    plan = _write_plan(ufunc, 1)
    if plan is False:
        return None
    # (called by this, called by ``fast_out``, called by the engine)
    return _saved_write(ufunc, tape, target, target, [target.value], plan)


def _saved_write(ufunc, tape, target, other, values, plan, skip=SKIPPED + 2, inputs=None):
    """The steps of ``_write_elementwise``, ``WritePlan.run`` and ``record_saved_write`` of the
    write ``ufunc(*values, out=target.value)`` by ``plan`` (``_fast_write_plan``'s), of the
    operands ``(target, other)`` (an augmented assignment), ``(other,)`` (an assignment:
    ``np.positive``) or ``inputs``, where given (``fast_out``: none of them the target, and
    no inverse on offer), in their order: ``target`` if recorded as the
    :class:`inplace.SavedWrite` they make, or None with nothing done where ``Tape.copied``
    inverts it (the general path records it then, asking the same again)."""
    reads, state, write_plan = plan
    operand = values[-1]
    buffer, value = target.buffer, target.value
    recomputation = tape.recomputation
    active(tape)
    if not (writeable(value) and (target.whole or not value.ndim
                                  or not overlaps_itself(value))):
        check_destination(target, ufunc)  # (its error; else it passes as this would)
    whole = target.whole
    place = buffer if whole else place_of(target)
    find = _finder(target, place)
    kept = list(read_by_partials(values, reads))  # (``write_kept`` of a plan that saves)
    invertible = write_plan.invertible and not (  # (``withheld``: of an augmented assignment)
        recomputation is not None and len(values) == 2
        and _kept_for_the_inverse(other, operand, kept[1], tape, target))
    if not tape.copied(invertible, value.nbytes, buffer.key, whole):
        return None  # inverted: the general path records its inverse
    # (a constant target is marked traced once the write is this one's: the general path,
    # which would ask it again, sees it as it was)
    buffer.constant = False  # it now holds values that depend on the arguments
    if recomputation is not None:
        recomputation.write(buffer)
    saved, raised = SavedWrite.write(tape, buffer.key, ufunc, values, value)
    written(buffer)
    # (``inplace._named``: the ``recipe`` of the target, at ``place``, and of a traced array
    # or a number; a constant read marked so; what the replay recomputes held as such)
    if inputs is not None:
        named, kept = _named(tape, inputs, values, kept, True)
    else:
        if type(other) is Traced:
            named = other.buffer if other.whole else place_of(other)
            if kept[-1] is not None and other.buffer.constant:
                keep(tape, other, operand)
        else:
            named = other
        named = (named,) if len(values) == 1 else (place, named)
        kept = tape.hold(kept, named)
    if not any(x is not None for x in kept):
        # (a write whose pullback reads no value, the common case: the one tuple of Nones
        # that all such records share, not a list each; only a list's stand-ins are filled in)
        kept = _NOTHING_KEPT.get(len(kept)) or kept
    record = SavedWrite(write_plan.primitive, named, state, place, kept,
                        value if find is None else None, find, saved)
    # (by default: called by ``fast_write`` or ``fast_assign``, called by the engine
    # (``inplace``, ``assign``), called by the engine)
    tape.record(record, skip)
    if raised is not None:
        raise raised
    return target


def _APART():
    """``apart`` of a write whose other operands were found apart from its target."""
    return True


def _OVER():
    """``apart`` of a write an operand of which was found over its target."""
    return False


_NO_SETTINGS: types.MappingProxyType[str, object] = types.MappingProxyType({})
"""The keyword arguments of a write without any, as the plans of such writes share them."""


class WritePlan:
    """The elementwise write ``ufunc(*values, out=target)`` at one point of a program (an
    ``out=``, an augmented assignment, an assignment to a region), as the traced engine and
    the replay of its recording both do it (:meth:`run`; tracing hands its plan to the
    recording's step, ``Recorder.written``): what the record keeps, the inverse it offers, how
    the overwritten bytes will be put back (decided afresh on the values at hand), the write
    and its record. ``position``: that of the operand that is the target itself
    (``writes.at_target``); ``partials``: the rule's plan for the traced operands
    (``elementwise.differentiable``; None: no gradient reaches the values written);
    ``withheld``: the program's recording offered no inverse (:meth:`withholding`)."""

    __slots__ = ("ufunc", "rule", "kwargs", "position", "others_at", "reads", "partials",
                 "invertible", "primitive", "pullback", "redo", "undo_first", "saves")

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
        # (partials that read the values written run before the write is undone)
        self.undo_first = not reads_written(rule)
        # where its bytes are saved, a write recorded as an ``inplace.SavedWrite``: its
        # partials read neither the values written nor a decision
        self.saves = not kwargs and rule.decide is None and "y" not in rule.uses

    _shared = {}

    @classmethod
    def at(cls, ufunc, rule, kwargs, position, reads, partials, count, withheld=False):
        """The plan of a write (as constructed), one for all the writes of ``ufunc`` without
        keyword arguments by the same ``rule`` with the target at ``position``, the same
        ``partials`` (those of a loop's statement) and ``withheld``: a plan is never changed
        once made."""
        if kwargs:
            return cls(ufunc, rule, kwargs, position, reads, partials, count, withheld)
        key = (ufunc, rule, position, partials, count, withheld)
        plan = cls._shared.get(key)
        if plan is None:
            if len(cls._shared) >= 4096:  # rules made on the fly cannot fill the memory
                cls._shared.clear()
            plan = cls._shared[key] = cls(ufunc, rule, _NO_SETTINGS, position, reads,
                                          partials, count, withheld)
        return plan

    def withholding(self):
        """This write's plan where its recording offered no inverse (``withheld``): the plan
        of its step, whose replays do the same."""
        return WritePlan.at(self.ufunc, self.rule, self.kwargs, self.position, self.reads,
                            self.partials, len(self.others_at) + (self.position is not None),
                            True)


    def run(self, tape, destination, inputs, values, apart, withheld=None, named=None,
            decided=None, rebuilt=None):
        """Write and record, on ``tape``, into ``destination`` (a :class:`writes.Destination`)
        from the operands ``inputs`` and their ``values``: an inverse is on offer where the
        rule has one, ``apart()`` says no other operand lies over the target (None where the
        plan offers none), and ``withheld(kept)`` (if given) does not withhold it. ``named``,
        ``decided`` and ``rebuilt``: as :func:`record_write` takes them. Returns the record."""
        ufunc, rule, kwargs, target = self.ufunc, self.rule, self.kwargs, destination.value
        kept, state = write_kept(ufunc, rule, values, self.reads, self.partials, target)
        invertible = self.invertible and not (withheld is not None and withheld(kept))
        if self.saves and named is None:  # (the replay's step records its own: ``saves``)
            record = record_saved_write(self.primitive, ufunc, tape, destination, inputs,
                                        values, kept, state, invertible)
            if record is not None:
                return record
        inverse = None
        if invertible:
            inverse = ElementwiseInverse(ufunc, rule, self.position, self.others_at, values,
                                         target, kept, apart, destination.find, kwargs)
        if kwargs and kwargs.get("casting") == "unsafe":  # (complex into real: NumPy's
            # ComplexWarning, which names the frame calling the ufunc, at the user's line)
            write = lambda: from_user_line(ufunc, *values, out=target, **kwargs)  # noqa: E731
        elif kwargs:
            write = lambda: ufunc(*values, out=target, **kwargs)  # noqa: E731
        else:
            write = lambda: ufunc(*values, out=target)  # noqa: E731
        record = record_write(self.primitive, destination, write,
                              Reads(inputs, values, kept, self.others_at, True, named),
                              Undo(inverse, redo=self.redo), pullback=self.pullback,
                              state=state, settings=kwargs or None, undo_first=self.undo_first,
                              tape=tape, decided=decided, rebuilt=rebuilt)
        undo = record.undo
        if type(undo) is CopyBack and self.undo_first and self.pullback is not None \
                and lendable(undo.saved):
            undo.lends = True  # its copy, put back before the pullback, lent on (``lend``)
        return record


def assign(target, value, element=False):
    """``target[...] = value`` for the traced array ``target``, recorded as an assignment. A
    complex value into a real target keeps its real part, as NumPy's assignment does (with
    its ComplexWarning): the cast NumPy's ufuncs refuse unless told. ``element``: ``target``
    is one element, a 0-d view of an array ``tracing.setitem`` checked (``check_destination``)
    and found apart from ``value`` (``overlaps``)."""
    if type(target) is Traced and target.value.dtype.kind in "US":
        return _write_text(target, value)
    value = as_assigned(value, target.value.dtype if type(target) is Traced else target.dtype)
    tape = value.tape if type(value) is Traced else None
    if type(target) is Traced and target.tape is tape and not value.buffer.weak \
            and not value.buffer.constant and value.value.dtype == target.value.dtype \
            and (tape.recorder is None or not tape.recorder.ready):
        # What ``apply_ufunc`` does with a traced value of the target's own dtype (neither a
        # number nor a constant) outside a recording, without asking: a scalar loop's writes
        if element and not target.buffer.constant and target.value.dtype.kind == "f":
            write_element(target, value, value.value)
            return target
        written = fast_assign(target, value)  # (the common case, in one function)
        if written is not None:
            return written
        return _write_elementwise(np.positive, ASSIGNMENT, tape, (value,), [value.value], 1,
                                  target, {})
    if element and (type(value) is float or type(value) is int) and type(target) is Traced \
            and not target.buffer.constant and target.value.dtype.kind == "f" \
            and (target.tape.recorder is None or not target.tape.recorder.ready):
        # x[i, j] = 0.0: what ``apply_ufunc`` and ``_write_elementwise`` do with a Python
        # number written into an element of a traced array outside a recording, without asking
        # (setitem answered the destination's questions)
        write_number(target, value)
        return target
    if _number_into(target, value):
        written = fast_assign(target, value)  # (saved, the common case: in one function)
        if written is not None:
            return written
        return _write_elementwise(np.positive, ASSIGNMENT, target.tape, (value,), [value], 0,
                                  target, {})
    if type(value) is bool or getattr(value, "dtype", None) == np.bool_:
        # NumPy's assignment casts booleans to the target's 0 and 1, exactly; np.positive, which
        # writes the values below, has no boolean loop (nor for a traced one: a recording's
        # constant x[2] > 0, which tracing holds as NumPy's bool)
        value = value.astype(target.dtype) if hasattr(value, "astype") \
            else np.asarray(value, target.dtype)
    unsafe = target.dtype.kind == "f" and complex_among((value,))
    return apply_ufunc(np.positive, (value,), target, _UNSAFE if unsafe else None, ASSIGNMENT)


_UNSAFE = {"casting": "unsafe"}


def _write_text(target, value):
    """``target[...] = value`` into strings (a field of an array of records beside its floats,
    ``rec["name"] = "H"``, or one moved by a sort of the records): no derivative flows through
    text and no pullback reads it, so the write is NumPy's own, unrecorded (no ufunc copies
    strings); a replay, which would not redo it, is refused (the call is traced)."""
    if target.tape.recorder is not None:
        target.tape.recorder.refuse("strings written into an array of records")
    memory(target)[...] = memory(value) if wrapped(value) else value
    return target


def _number_into(target, value):
    """Whether ``assign(target, value)`` is ``_write_elementwise``'s at once, as
    ``apply_ufunc`` would find it: ``value`` a Python float (``x[1:-1] = 0.0``: no traced
    operand, pattern 0) into a real traced array that is no constant, outside a recording."""
    return type(value) is float and type(target) is Traced and not target.buffer.constant \
        and target.value.dtype.kind == "f" and target.tape.recorder is None


def write_element(target, value, plain, pattern=1):
    """``target[...] = value`` for ``target`` one element (a 0-d view) of a real traced array,
    not a constant, and ``value`` a traced value of its tape and dtype (``plain``, its
    value), neither a number nor a constant, outside a recording: ``_write_elementwise``,
    whose questions ``tracing.setitem`` answered (the destination is writable, the value is
    not the target: no position), by the plan that is always the same (``pattern`` 0: of a
    Python number, ``write_number``'s). The write is recorded by ``record_element_write``,
    which skips the steps that cannot apply to it (no inverse on offer, nothing kept), or else
    by the plan itself."""
    plan = _ELEMENT_PLANS.get(pattern) or _element_plan(pattern)
    tape = target.tape
    region = target.value
    # (ASSIGNMENT keeps no operand and offers no inverse: write_kept's kept is [None] and its
    # state the plan's partials, as record_element_write takes them)
    if target.whole or type(region) is not NDARRAY or record_element_write(
            plan.primitive, plan.ufunc, tape, target.buffer, region, place_of(target),
            (value,), [plain], plan.partials) is None:
        plan.run(tape, _destination(target), (value,), [plain], None)


def write_into_element(x, key, value, plain, pattern=1):
    """:func:`write_element` into ``x[key]``, one element of ``x``, a traced NumPy array that
    is all of its buffer (``key``: a tuple of integers, one per axis), without the traced
    view of that element: a scalar loop's ``x[i, j] = v`` (``tracing._element_written``,
    which asked its questions)."""
    try:  # (a subscript, not ``dict.get``: the interpreter's specialised lookup, per write)
        plan = _ELEMENT_PLANS[pattern]
    except KeyError:
        plan = _element_plan(pattern)
    tape, buffer, array = x.tape, x.buffer, x.value
    index = (*key, Ellipsis)
    region = array[index]  # (the element's 0-d view; IndexError past the ends)
    # (``place_of`` the view, found from the key rather than its address: all of ``x`` is
    # the buffer, laid out as it, ``buffer.offset`` bytes past its lowest)
    offset = buffer.offset
    shape, strides = array.shape, array.strides
    if len(key) == 2:  # (a matrix's element, the commonest: the loop below, unrolled)
        i, j = key
        offset += (i + shape[0] if i < 0 else i) * strides[0] \
            + (j + shape[1] if j < 0 else j) * strides[1]
    else:
        for k, n, stride in zip(key, shape, strides):
            offset += (k + n if k < 0 else k) * stride
    # (``debug.caller`` skips this frame, its caller's and ``Traced.__setitem__``'s too)
    if record_element_write(plan.primitive, plan.ufunc, tape, buffer, region,
                            place_at(buffer, offset, (), (), region.dtype, tape), (value,),
                            [plain], plan.partials, SKIPPED + 2) is None:
        write_element(view_of(x, region, tape), value, plain, pattern)


def write_number(target, value):
    """``target[...] = value`` for ``target`` one element (a 0-d view) of a real traced array,
    not a constant, and ``value`` a Python float or int, outside a recording: a number is no
    operand at the target's position, and no gradient reaches it; the write by the plan of a
    constant."""
    value = as_assigned(value, target.value.dtype if type(target) is Traced else target.dtype)
    write_element(target, value, value, 0)


_ELEMENT_PLANS = {}
"""The ``WritePlan`` of ``assign(..., element=True)`` by the pattern of its value (1: traced, 0:
a Python number), each made at its first use."""


def _element_plan(pattern):
    """The plan ``_write_elementwise`` makes for a value assigned to an element of another
    array, traced (``pattern`` 1: its gradient taken) or a Python number (0: none):
    ``np.positive``'s write by ``ASSIGNMENT``, no operand at the target's position."""
    traced, reads, state = differentiable(np.positive, ASSIGNMENT, pattern, 1)
    plan = _ELEMENT_PLANS[pattern] = WritePlan.at(np.positive, ASSIGNMENT, _NO_SETTINGS, None,
                                                  reads, state if traced else None, 1)
    return plan


# ----------------------------------------------------------------------------------------------
# Functions with pure rules


def _output(tape, y, leaves, sources=()):
    """Wrap one output of a pure rule; returns ``(wrapped, is_fresh_buffer)``. (Under nested
    differentiation the output is an array an outer tape traces; it is wrapped the same way.)
    ``sources``: the call's arguments, given for the outputs of a rule with several, one of
    which may be an untraced argument or a view of its memory (``np.broadcast_arrays(x, c)``'s
    second): its values are that argument's, so it stays what it is on constants alone
    (``constant_result``): a plain array's view plain, a constant's view a constant."""
    if type(y) is NDARRAY and y.base is None and y.dtype.kind in "fc" and not sources:
        # (a plain float array of its own memory, a product's or a reduction's, answered first:
        # the questions below come to ``fresh`` unless it is an input's very array)
        for t in leaves:
            v = t.value  # (``itself``, written out for a plain ``y``)
            if v is y or type(v) is not NDARRAY and memory(v) is y:
                break
        else:
            return fresh(y, tape), True
    python_number = type(y) in (float, complex)
    y = inexact_output(y)
    if isinstance(y, np.inexact):  # NumPy's scalar (a dot product's): asked first
        x = fresh(y, tape)
        if python_number:  # (scipy.linalg.norm's by BLAS) promoted weakly, as NumPy does
            weaken(x)
        return x, True
    if isinstance(y, np.ndarray) or wrapped(y) or is_device(y):
        if y.dtype.kind not in "fc":
            return y, False
        for t in leaves:
            if y is t.value:  # NumPy's result is the argument itself (np.broadcast_arrays')
                return t, False
            if itself(y, t.value):  # the input itself: the same place
                return Traced(y, t.buffer, tape, t.whole), False
        if sources:
            root = owner(y)
            for x in sources:
                if type(x) is np.ndarray and owner(x) is root:
                    return y, False
                if type(x) is Traced and x.tape is tape and x.buffer.constant \
                        and owner(x.value) is root:
                    return view_of(x, y, tape), False
        if memory(y).base is not None:
            root = owner(y)
            for t in leaves:
                if owner(t.value) is root:  # read-only views too: later writes show through
                    return view_of(t, y, tape), False
            if overlaps_itself(y):  # a broadcast of a constant: a buffer's shadow cannot be
                y = np.copy(y)      # laid out with elements that share memory
        return fresh(y, tape), True
    return y, False


def apply_function(name, rule, args, kwargs, tape=None, ran=None):
    """Run a pure ``rule`` on the plain values of ``args``, wrap and record its outputs.
    ``ran``: ``(y, back)``, what the rule returned for these arguments, handed here by
    ``_fast_function`` (which takes one output of floats only), not run again."""
    arg_tape, values = _unwrap_args(args)
    tape = active(arg_tape or tape)
    if tape.recorder is not None and tape.recorder.ready:
        return tape.recorder.function(name, rule, args, kwargs, tape)
    out = kwargs.pop("out", None) if "out" in kwargs else None
    kwargs = _keyword_values(name, kwargs, tape)
    complex_values = complex_among(values)
    if complex_values:  # before the rule, which may refuse them for another reason
        check_complex(name, rule)
    kept = [private(v) for v in values]
    kwargs = {k: private(v) for k, v in kwargs.items()}  # (a mask as where=)
    raised = None
    try:
        y, back = rule(*kept, **kwargs) if ran is None else ran
    except Exception as error:
        if not raised_after_writing(error):
            raise
        if not written_before_raising(out, values):
            raise
        raised = error  # computed as NumPy computed it, written and recorded, then raised
        with np.errstate(**raising_ignored()):
            y, back = rule(*kept, **kwargs)
    if any(k is not v and _views(y, k) for k, v in zip(kept, values, strict=True)):
        y, back = rule(*values, **kwargs)  # NumPy's result views that array: as NumPy's
    else:
        values = kept
    if out is None and (type(y) is np.ndarray or wrapped(y)):  # (nested: an outer level's)
        for x, v in zip(args, values, strict=True):
            if y is v and type(x) is Traced and x.tape is tape:
                return x  # NumPy's result is the argument itself: np.atleast_1d(y) is y
    if complex_values or complex_among(y if isinstance(y, (tuple, list)) else (y,)):
        back = complex_back(name, rule, back)
    leaves = list(_leaves(args, tape))
    if not leaves:  # constants and plain values only: nothing to record
        result = constant_result(y, tape, args)
        return result if out is None else _into_out(out, result, raised)
    if holds_objects(y):
        raise objects_refused(name)
    # The pullback may read the untraced arguments: keep them as they are.
    for x, v in zip(args, values, strict=True):
        if not (type(x) is Traced and x.tape is tape and not x.buffer.constant):
            keep(tape, x, v)
    for v in kwargs.values():
        freeze(tape, v)
    if isinstance(y, (tuple, list)):
        outputs = [_output(tape, yi, leaves, args) for yi in y]
        items = [w for w, _ in outputs]
        # Named tuples (eigh's EighResult) take their fields as separate arguments.
        result = type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    else:
        outputs = [_output(tape, y, leaves)]
        result = outputs[0][0]
    created = [w.buffer if is_fresh else None for w, is_fresh in outputs]
    if leaves and any(created):
        _record_function(tape, name, rule, back, args, values, kwargs, created,
                         multiple=isinstance(y, (tuple, list)), leaves=leaves)
        if tape.anomaly is not None:
            tape.anomaly.produced(tape.records[-1], [*values, *kwargs.values()],
                                  [w for w, is_fresh in outputs if is_fresh])
    if out is not None:
        if isinstance(y, (tuple, list)):
            raise UnsupportedOperationError(f"{name}(..., out=...) with several outputs.")
        written = integers_assigned(out, result)  # np.clip(x, 0, 5, out=k, casting=...)
        if written is not None:  # (k integers f made)
            if raised is not None:
                raise raised
            return written
        if type(out) is np.ndarray:  # (assign would refuse it too, naming np.positive)
            raise untraced_write(f"{name}(..., out=...)", out)
        return _into_out(out, result, raised)
    return result


def _into_out(out, result, raised):
    """``result`` written into ``out``, as NumPy writes it, then ``raised`` (the error NumPy
    raised after writing, or None) raised."""
    written = assign(out, result)
    if raised is not None:
        raise raised
    return written


def _views(y, a):
    """Whether an array among ``y`` (a rule's output: one level into tuples and lists) views
    the memory of ``a``."""
    if isinstance(y, (tuple, list)):
        return any(_views(item, a) for item in y)
    return isinstance(y, np.ndarray) and owner(y) is a


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


def _record_function(tape, name, rule, back, args, values, kwargs, outputs, multiple, leaves):
    """Record a pure rule's ``back``: ``outputs`` are the buffers it created (None for other
    outputs); the record keeps places of the arguments, not the arguments. ``leaves``: the
    arguments ``tape`` traces (``_leaves``)."""
    places = [[locate(e, tape) for e in x] if type(x) in (list, tuple) else locate(x, tape)
              for x in args]
    # Every argument traced (``a @ b``): the recipe names each by the place just found; else
    # (a constant, a plain value, a sequence) the recipe below names them.
    named = tuple(places) if all(type(p) is Buffer or type(p) is Place for p in places) \
        else None
    # Cotangents that are memory of the arguments are never adopted as shadows; those of a
    # user's rule never at all (None): they may be arrays it keeps (facet user).
    primals = None if is_user_rule(rule) else {id(owner(x.value)) for x in leaves}
    # The recipe names the constants the rule's pullback holds, and describes the others: the
    # record keeps no memory the pullback does not.
    held = _held_by(back)
    kept = [_if_held(v, held) for v in values]
    settings = {k: _if_held(v, held) for k, v in kwargs.items()} if kwargs else None
    # (every argument a traced array of the tape, which ``leaves`` are)
    plain = None if (named is None or len(leaves) != len(args) or multiple or primals is None
                     or tape.recorder is not None or outputs[0].dtype.kind == "c"
                     or complex_among(values)) \
        else _plain_functions(rule, values, kwargs)
    if named is None:
        named = recipe(args, values, kept, tape)
    if plain is not None:  # (the replay's recorder reads the closure's record: not while it runs)
        record = Product(primitive(name, rule), named, settings, outputs[0], None,
                         (plain[1], *_kept(plain, values)))
    else:
        record = Record(primitive(name, rule), named, settings,
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


def _plain_functions(rule, values, kwargs):
    """``(forward, back)`` or ``(forward, back, held)``: plain functions that compute what the
    built-in pure ``rule`` and the ``back`` it returns compute for the real ``values``
    (``back(dy, *values)``, or ``back(dy, held(*values))`` where ``back`` reads only what
    ``held`` keeps of them: a sum's, their layout), where the rule offers them
    (``rule.specialized``, as to a compiled replay: np.matmul's and np.outer's for operands
    without a batch, np.sum's over every axis) and every positional argument is
    differentiated; else None."""
    offered = _offered(rule, tuple([np.ndim(v) for v in values]), kwargs)
    return offered if offered is not None and _fit(offered, values) else None


def _offered(rule, dims, kwargs):
    """What ``rule`` offers for operands of ``dims`` dimensions and settings ``kwargs``
    (``_plain_functions``), a function of those alone; None where it offers nothing."""
    offer = getattr(getattr(rule, "__wrapped__", rule), "specialized", None)
    if offer is None or kwargs or getattr(rule, "leading", None) != len(dims):
        return None
    functions = offer(dims, {})
    return functions if functions is not None and len(functions) in (2, 3) else None


def _fit(plain, values):
    """Whether ``plain`` functions run on ``values``: any real operands without a ``held``;
    with one, NumPy's real arrays alone (not an enclosing differentiation's traced values,
    whose cotangents its own operations make, as ``back`` does not: ``np.full``)."""
    return len(plain) == 2 or all(type(v) is NDARRAY and v.dtype.kind == "f" for v in values)


def _kept(plain, values):
    """What the record of a rule run as its ``plain`` functions keeps for their ``back``: the
    operands' ``values``, or what ``held`` keeps of them (a tuple: a layout, not an array)."""
    return values if len(plain) == 2 else (plain[2](*values),)


class Product(OneOutput):
    """The record of a pure rule run as the plain functions it offers (``_plain_functions``:
    ``a @ b`` of vectors and matrices, ``np.outer``, ``np.sum(x)``), every argument traced:
    ``state`` is the plain ``back`` and what it reads, the arguments' values or what ``held``
    keeps of them (``_kept``). With constant operands (``_constant_product``), ``inputs`` are
    the traced ones alone, and ``back`` (``_traced_back``) gives their cotangents alone. Its pullback is
    ``function_pullback``'s on the record of the rule's closure, without the closure: a loop
    of dot products makes one per step, a third of that record's memory."""

    __slots__ = ()

    @staticmethod
    def pullback(record, shadows, _):
        dy = shadows.pop(record.output)
        if dy is None:
            return
        back, *values = record.state
        rows = list(zip(record.inputs, back(dy, *values), strict=True))
        # A shadow adopts a cotangent only as the whole of a buffer: arguments that are parts
        # (``x[i, :j] @ x[:j, j]``) need not know whose memory their cotangents are (asked of
        # a list: a generator that any() stops early is closed by a GeneratorExit, dearer)
        add_cotangents(shadows, rows, {id(owner(v)) for v in values if type(v) is not tuple}
                       if any([p.whole for p in record.inputs]) else None)


def function_pullback(record, shadows, _):
    """The pullback of a pure rule: ``state`` is the rule's ``back``, the places of the
    arguments (None where none is differentiated), the ids of their memory, the buffers the
    rule created (None for other outputs), and whether it returned several outputs."""
    back, places, primals, outputs, multiple = record.state
    dys = [None if b is None else shadows.pop(b) for b in outputs]
    if all(dy is None for dy in dys):
        return
    if multiple:  # outputs no gradient reached: zeros, or None for a back that asks so
        unreached = None if getattr(back, "unreached_as_none", False) else zeros
        cotangents = back(tuple(unreached(b) if dy is None and b is not None and unreached
                                else dy for dy, b in zip(dys, outputs, strict=True)))
    else:
        cotangents = back(dys[0])
    rows, dropped = [], False
    for p, g in zip(places, cotangents, strict=True):
        if type(p) is list:  # a sequence argument: one place per item
            if g is not None:
                rows.extend((e, ge) for e, ge in zip(p, g, strict=True) if e is not None)
            elif any(e is not None for e in p):
                dropped = True
        elif p is not None:
            if g is None:
                dropped = True
            rows.append((p, g))
    if dropped:
        no_cotangent(record.primitive, places, cotangents)
    add_cotangents(shadows, rows, primals)


def no_cotangent(primitive, places, cotangents):
    """A rule's ``back`` gave arguments the differentiation follows (their ``places``) no
    cotangent: refused unless declared (``registry.dropped_derivative``). (Their positions
    are found here, off the common path.)"""
    for i, (p, g) in enumerate(zip(places, cotangents, strict=True)):
        if g is None and (any(e is not None for e in p) if type(p) is list else p is not None):
            dropped_derivative(primitive.name, i, ((primitive.rule, 0),))


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
    if not kwargs or _plain_settings(kwargs):
        # The commonest call, np.sum(x), np.dot(a, b) or x.sum(axis=0) of real arrays
        # ``tape`` traces (``_function_plan``) with no keyword argument but plain settings
        # (``_plain_settings``) and no ``out`` by position, of a function whose result
        # depends on their values, with a pure rule and no composite that may take the call
        # (one marked ``keywords_only`` takes a call whose keyword argument carries a
        # derivative alone: np.sum's of ``initial=``): what the questions below ask has one
        # answer there (nothing to join or move, the arrays carry the derivative, the
        # settings none), and it is ``_fast_function``'s. Asked first.
        entry = RULES.get(func, NO_RULE)
        rule, composite = entry.reverse, entry.composite
        if rule is not None and entry.shaped is None and (
                composite is None or getattr(composite, "keywords_only", False)):
            plan = _function_plan(func, rule, args, tape)
            if plan is not None and ((position := out_position(func)) is None
                                     or len(args) <= position):
                # (the frames of debug.caller, ReverseTape.record, _fast_function and this
                # one skipped)
                return _fast_function(func, args, tape, [x.value for x in args], plan,
                                      SKIPPED, dict(kwargs) if kwargs else None)
    joined = joined_in_order(func, args, kwargs)
    if joined is not None:
        return joined
    args = joined_operands(func, args)
    level = innermost((*args, *kwargs.values()), tape)
    entry = RULES.get(func, NO_RULE)
    # (np.zeros_like(x) reads x's shape alone: its result a constant, as np.zeros(n)'s)
    if not carries(value_arguments(entry, args, kwargs), level):
        return on_constants(func, args, kwargs, level, _written(func, args, kwargs))
    rule = entry.reverse
    if rule is not None and entry.composite is not None:  # the composite's calls first (np.pad)
        active(tape)
        y = door(tape, entry.composite, args, kwargs)
        if y is not NotImplemented:
            return without_derivative(y, args, kwargs, level.level)
    if rule is not None:
        args, kwargs = out_by_keyword(func, args, kwargs)  # np.dot(a, b, c): c is out
        if "out" in kwargs:
            judge_out(func, args, kwargs)  # NumPy's error where it refuses out
        args, kwargs = out_computation(func, args, kwargs)  # np.sum(x32, out=o64): in float64
        args, kwargs = keywords_in_place(func, rule, args, kwargs)  # np.diff(x, append=a)
        plan = None if kwargs else _function_plan(func, rule, args, tape)
        if plan is not None:  # (the frames of debug.caller, ReverseTape.record,
            # _fast_function and this one skipped)
            return _fast_function(func, args, tape, [x.value for x in args], plan, SKIPPED)
        constants = None if kwargs else _constant_plan(func, rule, args, tape)
        if constants is not None:  # (the frames of _constant_product instead)
            return _constant_product(constants[0], args, constants[1], constants[2], tape,
                                     SKIPPED)
        return apply_function(function_name(func), rule, args, kwargs, tape)
    handler = entry.inplace or entry.composite
    if handler is not None:
        if complex_among(args):
            check_complex(function_name(func), handler)
        active(tape)
        y = door(tape, handler, args, kwargs)
        # (a composite's own arrays, np.histogram's counts, the user's as a rule's results are)
        return y if handler is entry.inplace else without_derivative(y, args, kwargs,
                                                                      level.level)
    if entry.nondifferentiable:
        out = next((t for t in _written(func, args, kwargs) if type(t) is Traced), None)
        if out is not None:
            return _nondiff_into(func, args, kwargs, out, level)
        if level.recorder is not None and level.recorder.ready:
            return level.recorder.nondiff(func, args, kwargs)
        args, kwargs = plain(args), plain(kwargs)
        return without_derivative(func(*args, **kwargs), args, kwargs, level.level)
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
    if recorder is not None and recorder.ready:
        return recorder.door(operation, args, kwargs)
    return operation(*args, **kwargs)


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
    if tape.recorder is not None and tape.recorder.ready and tape.recorder.opens(
            apply_inplace_rule):
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

    def run():
        try:
            ran.append(run_rule(*values, **kwargs))
        except Exception as error:  # recorded all the same: f may catch it and go on
            ran.append(error)

    record = record_write(
        primitive(name, rule), [t for _, t in written], run, Reads(args, values, kept),
        Undo([None if i in checkpointed else _rule_restores for i, _ in written],
             growth=factor),
        pullback=_inplace_rule_pullback, taken=False, undo_first=False,
        settings={k: _if_held(v, held) for k, v in kwargs.items()} or None)
    if isinstance(ran[0], Exception):
        record.state = (_raised_back(name, ran[0], record.undo), values,
                        [locate(x, tape) for x in args])
        raise ran[0]
    back, result = ran[0]
    if not callable(back):
        raise RuleError(f"the in-place rule of {name} must return its back function.")
    record.state = (back, values, [locate(x, tape) for x in args])
    return _map_result(name, result, args, values, tape)


def _raised_back(name, error, undo):
    """The ``back`` of an in-place rule that raised ``error`` (its write's ``undo``): the
    function may have written into its arguments before raising, and the rule gave no
    ``back`` for it. Where they are left as they were, the identity: so are they when mutad
    saved them and finds them unchanged, and when a mutad function raised its own error (they
    leave their arguments as they were, ``mutad.linalg.cholesky_``'s
    ``NotPositiveDefiniteError``). Otherwise differentiating through the call is refused."""
    undos = undo.undos if type(undo) is Undos else [undo]
    if isinstance(error, MutadError) or all(
            type(u) is CopyBack and u.key is None and _unchanged(u) for u in undos):
        return lambda *shadows: None

    def refuse(*shadows):
        raise UnsupportedOperationError(
            f"{name} raised {type(error).__name__} ({error}) inside its in-place rule, which "
            "gave no back for what it may have written into its arguments before raising, and "
            "f went on: its gradient is not known. Let the function leave its arguments as "
            "they were when it raises, declare them with checkpoint= so mutad can check, or "
            "call it on a copy") from error
    return refuse


def _unchanged(undo):
    """Whether the region a ``CopyBack`` saved holds the bytes it saved."""
    region = undo.region if undo.at is None else undo.at()
    return type(region) is np.ndarray and undo.saved.tobytes() == region.tobytes()


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
