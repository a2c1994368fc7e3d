"""The traced array's dispatch: the paths every NumPy call on it takes, and its indexing.

A :class:`reverse.Traced` wraps a plain float ndarray (``value``) and names the memory whose
shadow it uses (``buffer``, a :class:`shadows.Buffer`): for a view, that of the array it views;
for a fresh result, its own. Records keep :class:`shadows.Place` descriptors of their inputs,
not the inputs, and only the input values their pullbacks read (``locate``). Code written with
plain ``import numpy as np`` reaches mutad through ``__array_ufunc__`` and
``__array_function__``; operators, methods and indexing call the same paths directly. Those
methods are this module's (``TracedDispatch``), installed on the class below, as its binary
operators are (``arraylike.install_operators``): the modules under this one make and recognise
traced arrays without importing the paths that send calls to them.

Every call takes one of four paths:

* pure: run the rule on plain values, wrap a fresh result, record its pullback
  (``operations``). A result that views an input's memory is a view: it shares the input's
  buffer and records nothing, since its shadow is the same view of the input's shadow.
* in-place (``out=``, augmented assignment, slice assignment, scatters, the functions that
  write into an argument, in-place custom rules), all through ``record_write`` (``inplace``):
  decide how the overwritten bytes will be put back (``Tape.undo_for``), write, and record a
  ``tape.Write`` whose replay reads the cotangent of the new values from the target's shadow
  and zeroes it there (``Shadows.take``), undoes the write, then runs the rule's pullback.
* indexing (``x[key]``, ``x[key] = v``): the engine's own view and assignment semantics
  (``getitem``, ``setitem``, here), through the same paths: basic indexing gives views,
  assignment to them is the in-place path.
* non-differentiable: run on plain values, return plain results.

Differentiations nest. Each has a level (``levels.LEVELS``), and an operation belongs to the
innermost tape among its operands (``innermost``): arrays traced by outer tapes are its
constants, and its own values are arrays the outer one traces (``ReverseTape.lift``), so
everything the inner differentiation does, its reverse pass included, is recorded by the outer
one. Forward mode's duals (``forward.py``) take part through the same levels: a traced array
defers to a value of a deeper level of the other mode (``defers``), and a dual of an outer
level is a constant to a tape.

The engine is four modules, each importing only those before it: ``reverse`` (the tape, the
traced array, and what is done with values), ``inplace`` (the writes), ``operations`` (ufuncs,
assignment, functions and their rules) and this one.
"""

import math
import operator
import sys
import types

import numpy as np

from ..core.allocation import (DISPATCHED, READ_BESIDE, Preexisting, lists_as_arrays,
                               python_objects, rebound_in_place, stand_in_value, stands_in,
                               without_derivative)
from .arraylike import (as_assigned, OPERATORS, SCALAR_METHOD_FUNCTIONS, array_methods_only,
                        install_operators, put_nan_right, subclass_call, takes_over_kinds,
                        item_assignment_refused, lost_tangent, numpys_scalar_operator,
                        holds_records, judge_out, out_computation, put_abs_right,
                        put_square_right, records_function, records_gathered, records_key,
                        records_write, sequence_assigned, text_element, numpy_scalar,
                        record_field, by_mutad, picks_one_record, as_one_record,
                        refuse_records,
                        integers_out, into_outs, single_out, stands_for_scalar, takes_over,
                        weak_arithmetic, integer_events)
from .elementwise import Gathered, unbroadcast
from ..core.debug import SCALAR_OPERATORS, SKIPPED, scalar_math_error
from ..core.errors import no_rule
from .inplace import (check_destination, copy_into, on_constants, overlaps, record_write,
                      write_constant, writes_into)
from ..core.levels import ACTIVE, Tracer, escaped
from ..core.levels import innermost as innermost_tracer
from .operations import (_unwrap, apply_array_function, apply_function, apply_ufunc,
                         assign, door, fast_out, fast_ufunc, fast_write,
                         write_into_element)
from ..core.registry import NO_RULE, RULES, lookup, pyfunc_ufunc_method
from .recompute import Held
from .reverse import (Traced, _read_only, active, carries, check_alias, constant_result, fresh,
                      innermost, keep, locate, place_of, plain, private,
                      values_at, view_of)
from ..core.shadows import overlapping, scalar_buffer
from ..core.views import NDARRAY, WRITEABLE, same_region, views
from .writes import CopyBack, Reads, Undo


# ----------------------------------------------------------------------------------------------
# The traced array's dispatch


def defers(tape, items):
    """Whether an operation on ``items`` belongs to a level inside ``tape``'s of another mode
    (a dual of an inner jvp): it then handles the operation. Values of outer levels are
    constants to ``tape``, and arrays of inner tapes are handled by this engine."""
    for x in items:
        if type(x) is not Traced and (isinstance(x, Tracer) or type(x) in (list, tuple)):
            inner = innermost_tracer(items)  # another kind of value takes part: by levels
            return inner is not None and type(inner) is not Traced and inner.level > tape.level
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
        written = fast_write(ufunc, self, other)  # (the common case, in one function)
        return apply_ufunc(ufunc, (self, other), out=self) if written is None else written

    return forward, reflected, inplace


class TracedDispatch:
    """The methods of :class:`reverse.Traced` that send NumPy's calls, indexing and operators
    down the engine's paths, installed on it below (``install_dispatch``), as its binary
    operators are: the class and the modules that make and recognise traced arrays stand
    below those paths, and do not import them."""

    # NumPy's protocols ---------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not kwargs and method == "__call__":
            for x in inputs:
                if type(x) is not Traced:
                    break
            else:  # traced operands alone: no stand-in, no out=, no other mode's value
                if len(inputs) == 1:  # np.sin(x): what ``apply_ufunc`` asks, answered here
                    if ufunc is np.square:  # (NumPy's complex scalars square otherwise)
                        return put_square_right(apply_ufunc(ufunc, inputs), self)
                    tape, buffer = self.tape, self.buffer
                    if not buffer.weak and not buffer.constant and tape.recorder is None \
                            and tape.outer is None:
                        # (``debug.caller``'s frame, fast_ufunc's and this one's skipped)
                        yt = fast_ufunc(ufunc, inputs, tape, [self.value], 1, SKIPPED - 1,
                                        (buffer,) if self.whole else None)
                        if yt is not None:
                            return yt
                return apply_ufunc(ufunc, inputs, None, kwargs)
            if type(inputs[0]) is not Traced:  # np.float32(1.3) ** x[0]: NumPy's scalar math
                result = numpys_scalar_operator(ufunc, inputs)
                if result is not None:
                    return result
        if method == "__call__" and type(kwargs.get("out")) is tuple:
            out = kwargs["out"]
            if len(kwargs) == 1 and len(out) == 1 and type(out[0]) is Traced:
                written = fast_out(ufunc, inputs, out[0])  # np.multiply(a, b, out=c)
                if written is not None:
                    return written
            rebound = rebound_in_place(ufunc, inputs, kwargs)  # y *= x, y a new plain array
            if rebound is not None:
                return rebound
        if stands_in(inputs, kwargs) or takes_over(inputs):
            return NotImplemented  # it hands the plain array it views to this method
        y = subclass_call(getattr(ufunc, method), map(type, inputs), inputs, kwargs)
        if y is not None:  # np.matrix(A) + x: as the subclass computes
            return y
        if method == "__call__" and len(kwargs.get("out") or ()) > 1:
            return into_outs(ufunc, inputs, kwargs)  # np.divmod(a, b, out=(q, r))
        out = single_out(ufunc, kwargs)
        if defers(self.tape, inputs):
            return NotImplemented
        if method == "__call__":
            return apply_ufunc(ufunc, inputs, out, kwargs)
        inputs = tuple(lists_as_arrays(inputs))  # np.add.at(a, i, [x[0], x[1]]): an array
        if out is not None:
            kwargs["out"] = out
            written = integers_out(ufunc, inputs, out, kwargs, method)
            if written is not None:  # np.add.accumulate(x, out=k) of integers k
                return written
        level = innermost((*inputs, out))
        if not carries((*inputs, out), level):  # ufunc.at writes into its first operand
            written = (out, inputs[0]) if method == "at" else (out,)
            return on_constants(getattr(ufunc, method), inputs, kwargs, level, written)
        key = (ufunc, method)
        entry = RULES.get(key, NO_RULE)
        if entry.reverse is not None:
            if entry.composite is not None:  # the composite's calls first (initial= traced)
                active(self.tape)
                y = door(self.tape, entry.composite, inputs, kwargs)
                if y is not NotImplemented:
                    return without_derivative(y, inputs, kwargs, level.level)
            if out is not None:
                judge_out(key, inputs, kwargs)  # NumPy's error where it refuses out
            inputs, kwargs = out_computation(key, inputs, kwargs)  # np.add.reduce(x32, out=o64)
            return apply_function(f"np.{ufunc.__name__}.{method}", entry.reverse, inputs, kwargs)
        handler = entry.inplace or entry.composite
        if handler is not None:
            active(self.tape)
            return door(self.tape, handler, inputs, kwargs)
        if lookup(ufunc).nondifferentiable:
            if level.recorder is not None and level.recorder.ready:
                return level.recorder.nondiff(getattr(ufunc, method), inputs, kwargs)
            inputs, kwargs = plain(inputs), plain(kwargs)
            y = getattr(ufunc, method)(*inputs, **kwargs)
            return without_derivative(y, inputs, kwargs, level.level)
        pyfunc = pyfunc_ufunc_method(ufunc, method)
        if pyfunc is not None:  # U.reduce(x) of a ufunc np.frompyfunc made
            active(self.tape)
            return door(self.tape, pyfunc, (getattr(ufunc, method), *inputs), kwargs)
        raise no_rule(key)

    def __array_function__(self, func, types, args, kwargs):
        if len(types) > 1:
            if Preexisting in types or takes_over_kinds(types) \
                    or defers(self.tape, [*args, *kwargs.values()]):
                return NotImplemented
            y = subclass_call(func, types, args, kwargs)
            if y is not None:  # np.linalg.solve(np.matrix(A), x): as the subclass computes
                return y
        if holds_records(args) and not lookup(func).nondifferentiable:
            y = records_function(func, args, kwargs)
            if y is not None:
                return y
            refuse_records(func, args)
        y = apply_array_function(func, args, kwargs, self.tape)
        if not args or func is np.broadcast_to:
            return y
        return numpy_scalar(args[0], y, func not in SCALAR_METHOD_FUNCTIONS)

    # indexing -------------------------------------------------------------------------------

    def __getitem__(self, key):
        if type(key) is tuple or type(key) is int:
            y = _element_read(self, key)
            if y is not None:  # a scalar loop's x[i, j]
                return y
        if _row_or_slice(self, key):
            return getitem(self, key, True)
        if self.value.dtype.names is not None:  # an array of records: by its fields
            y = records_gathered(self, key)
            if y is not None:
                return y
            if picks_one_record(self, key):
                return as_one_record(self[records_key(self, key)])
            key = records_key(self, key)
        index = _index(key)
        element = text_element(self.value, index)
        if element is not None:
            if self.tape.recorder is not None and self.tape.recorder.ready:
                self.tape.recorder.text_read(self, key, index, element)
            return element
        if self.tape.recorder is not None and self.tape.recorder.ready:
            y = self.tape.recorder.getitem(self, key)
        else:
            y = self._indexed(key)
        if stands_for_scalar(self) and not stands_for_scalar(y):
            # NumPy's scalar[...], scalar[None]: a new, writable array (a step of its own to a
            # recording, which records the index as ``_indexed``'s)
            return np.copy(y)
        if self.value.dtype.names is not None and not by_mutad(sys._getframe(1)):
            return record_field(self, y)  # (a field of one record: NumPy's scalar)
        return y

    def _indexed(self, key):
        """``self[key]``, a view where NumPy's is one (of a scalar too)."""
        if self.buffer.constant:
            return constant_result(self.value[_index(key)], self.tape, (self,))
        return getitem(self, key)

    def __setitem__(self, key, value):
        kind = type(value)
        if kind is Traced and value.indexed is not None and assigned_back(self, key, value):
            return  # `x[k] += v` ends by assigning the updated view onto itself
        if (kind is Traced or kind is float or kind is int) \
                and _element_written(self, key, value):
            return  # a scalar loop's x[i, j] = v
        if (kind is Traced or kind is float) and _region_written(self, key, value):
            return  # a stencil's u[1:-1] = v, a boundary's u[:, 0] = 0.0
        if stands_for_scalar(self):  # immutable, as NumPy's scalars are
            raise item_assignment_refused(self)
        if self.value.dtype.names is not None:  # an array of records: by its fields
            if records_write(self, key, value):
                return
        if type(value) in (list, tuple):  # x[:3] = [x[2], 2 * x[1], 5.0]: the array NumPy
            dtype = self.value.dtype  # makes of it
            value = sequence_assigned(self, key, value,
                                      lambda v: lists_as_arrays([as_assigned(v, dtype)])[0])
        if type(value) is Preexisting:
            value = stand_in_value(value)
        if type(value) is np.ndarray:
            check_alias(value)
        recorder = self.tape.recorder
        if recorder is not None and recorder.ready and recorder.opens(Traced.__setitem__):
            return recorder.door(Traced.__setitem__, (self, key, value), {})
        if _deeper(value, self.tape):
            raise lost_tangent("x[key] = value")
        if self.buffer.constant and innermost((value,), self.tape) is self.tape:
            # (a constant of integers or booleans, an index or a comparison's result only a
            # recording holds, which tracing holds plain: NumPy writes the values, the
            # gradient ends there; records hold floats, and are followed)
            if not carries((value,), self.tape) or self.value.dtype.kind in "biu":
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
        if result.value.dtype.kind in "iu":
            integer_events(result, operator.neg, self)
        return weak_arithmetic(result) if self.buffer.weak else result

    def __pos__(self):
        result = apply_ufunc(np.positive, (self,))
        return weak_arithmetic(result) if self.buffer.weak else result

    def __abs__(self):
        result = apply_ufunc(np.absolute, (self,))
        put_abs_right(result, self)
        if result.value.dtype.kind in "iu":
            integer_events(result, abs, self)
        return weak_arithmetic(result) if self.buffer.weak else result

    def astype(self, dtype, **kwargs):
        if self.value.dtype.names is not None:  # (records: by their fields)
            y = records_function(np.ndarray.astype, (self, dtype), kwargs)
            if y is not None:
                return y
        refuse_records(np.ndarray.astype, (self,))
        if np.dtype(dtype) == object and self.value.dtype.kind in "fc" \
                and set(kwargs) <= {"order", "copy", "casting", "subok"}:
            return python_objects(self, kwargs.get("order", "K"))  # (Python's numbers)
        return numpy_scalar(self, apply_function("ndarray.astype", RULES[np.ndarray.astype].reverse,
                                                 (self, dtype), kwargs))


def install_dispatch(cls, methods):
    """Give ``cls`` each function the class ``methods`` defines, as a method of its own (named
    as one: ``Traced.__setitem__``)."""
    for name, method in vars(methods).items():
        if type(method) is types.FunctionType:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, method)
    array_methods_only(cls)


def _fast_operator(ufunc, general, reflected, scalars=False):
    """The operator ``general`` (``install_operators``'), first taking the common case in
    one call: an array of the tape's own that does not stand for a Python number, beside a
    Python float or int or another such array, on a tape that no replay records and no other
    differentiation encloses, where the result has elements or no operand is complex. There
    what ``general`` asks has one answer (no operand takes the operation over or belongs to
    another level, no scalar math or Python arithmetic puts the result right: they do only
    for complex scalars, ``arraylike._operator``, and it is not weak), and ``apply_ufunc``
    would take ``operations.fast_ufunc``: it is called at once. (A real scalar's NaN alone
    may be NumPy's scalar math's other NaN: ``arraylike.put_nan_right``.)

    ``scalars``: ``general`` is the augmented assignment ``a op= b``, taken here where ``a``
    stands for NumPy's scalar (``x[i, j] /= 9.0`` reads one: ``stands_for_scalar``), which
    Python rebinds to ``a op b`` as ``_binary``'s ``inplace`` computes it, and where ``a`` is
    an array with axes, which ``inplace`` writes by ``operations.fast_write``."""

    def method(self, other):
        value, buffer, tape, given = self.value, self.buffer, self.tape, other
        if scalars and value.ndim and type(value) is NDARRAY and not buffer.weak \
                and tape.recorder is None and tape.outer is None:
            # ``a op= b`` into an array with axes, beside a Python number or an array of the
            # tape that does not stand for one: ``general``'s questions have one answer (no
            # operand takes it over, neither stands for a Python number, the result has
            # elements), and ``_binary``'s ``inplace`` calls ``fast_write``, as here
            kind = type(other)
            if kind is float or kind is int or kind is Traced and other.tape is tape \
                    and not other.buffer.weak:
                try:  # (``debug.caller``'s frame, fast_write's, this one's: ``inplace``'s less one)
                    written = fast_write(ufunc, self, other, SKIPPED + 1)
                except FloatingPointError as error:  # (np.errstate's "raise")
                    raise scalar_math_error(error, self, other) from None
                if written is not None:
                    return written
            return general(self, given)
        if type(value) is NDARRAY and not buffer.weak and tape.recorder is None \
                and tape.outer is None and (not scalars or not value.ndim and value.base is None
                                            and not value.flags.writeable):
            kind = type(other)
            if kind is float or kind is int:
                operand, traced, place = other, 0, other
                scalar = not value.ndim and value.dtype.kind == "c"
            elif kind is Traced and other.tape is tape and not (its := other.buffer).weak \
                    and type(operand := other.value) is NDARRAY:
                # (``its``: its buffer, read once: a traced array's attributes are read through
                # its class's ``__getattr__`` hook, each read a slow lookup)
                traced = 0 if its.constant else 1
                place = its if other.whole else None
                scalar = not value.ndim and not operand.ndim and (
                    value.dtype.kind == "c" or operand.dtype.kind == "c")
            elif kind is Preexisting and not scalars and not buffer.constant and (
                    operand := _read_before(other)) is not None:
                other, traced, place, scalar = operand, 0, None, False  # (general: as given)
            else:
                return general(self, other)
            mine = 0 if buffer.constant else 1
            if (mine or traced) and not scalar:
                # (the record's inputs where both are whole arrays or numbers: ``recipe``)
                if reflected:
                    inputs, values, pattern = (other, self), [operand, value], traced | mine << 1
                    named = (place, buffer) if place is not None and self.whole else None
                else:
                    inputs, values, pattern = (self, other), [value, operand], mine | traced << 1
                    named = (buffer, place) if place is not None and self.whole else None
                # (``debug.caller``'s frame, fast_ufunc's and this one's skipped)
                try:
                    yt = fast_ufunc(ufunc, inputs, tape, values, pattern, SKIPPED - 1, named)
                except FloatingPointError as error:  # (np.errstate's "raise")
                    raise scalar_math_error(error, self, other) from None
                if yt is not None:
                    # (a result of no axes has operands of none: of an array with axes, not
                    # asked)
                    if not value.ndim:
                        y = yt.value
                        if not y.ndim and y.dtype.kind == "f" and math.isnan(y):  # scalar math's?
                            put_nan_right(yt, self, other, ufunc, reflected)
                    return yt
        return general(self, given)

    method.__name__ = general.__name__
    method.__qualname__ = general.__qualname__
    return method


def _read_before(x):
    """What ``apply_ufunc`` reads for ``x``, the stand-in of an array made before f that an
    operator reads as a constant (a global, a closure's, on every step): the plain array it
    views (``ufunc_operands``), checked and kept as ``_unwrap`` does; None where it is not an
    array of one or more dimensions (whose result ``general`` would return as it is) or a
    write adopted its memory: ``general`` takes it."""
    plain = stand_in_value(x)
    if type(plain) is not NDARRAY or not plain.ndim:
        return None
    check_alias(plain)
    return private(plain)


def _read_beside(ufunc, inputs):
    """``ufunc(a, b)`` without keywords, ``a`` or ``b`` a stand-in (``Preexisting``: the
    operator ``U0 * x``, ``np.multiply(x, U0)``) and the other an array of a tape that no replay
    records, the one differentiation running, where the traced operand is an array with a
    gradient that does not stand for a Python number and the stand-in an array of one or more
    dimensions read as a constant (``_read_before``). There the general path (the stand-in's
    ``__array_ufunc__`` handing its plain view to this engine's, then ``apply_ufunc``) has the
    answers ``_fast_operator`` has for ``x * U0``, no other level's check to run, and takes
    ``operations.fast_ufunc``: called at once (``allocation.READ_BESIDE``). None: the general
    path."""
    first, second = inputs
    traced, stand_in = (first, second) if type(first) is Traced else (second, first)
    tape, buffer, value = traced.tape, traced.buffer, traced.value
    running = ACTIVE.running
    if type(value) is not NDARRAY or buffer.weak or buffer.constant or tape.recorder is not None \
            or tape.outer is not None or len(running) != 1 or running[0] is not tape \
            or type(stand_in) is not Preexisting:
        return None
    operand = _read_before(stand_in)
    if operand is None:
        return None
    if traced is first:
        inputs, values, pattern = (traced, operand), [value, operand], 1
    else:
        inputs, values, pattern = (operand, traced), [operand, value], 2
    # (``debug.caller``'s frame, fast_ufunc's, this one's and the stand-in's method's skipped)
    return fast_ufunc(ufunc, inputs, tape, values, pattern, SKIPPED)


def install_fast_operators(cls):
    """Give ``cls``'s binary operators their common case's short path (``_fast_operator``),
    and their augmented assignments that of a value standing for NumPy's scalar; not ``**``,
    whose small integer powers are other ufuncs (``arraylike._fast_powers``)."""
    for name, ufunc in OPERATORS.items():
        if name != "pow":
            for prefix in ("", "r", "i"):
                attribute = f"__{prefix}{name}__"
                method = _fast_operator(ufunc, getattr(cls, attribute), prefix == "r",
                                        prefix == "i")
                SCALAR_OPERATORS.add(method.__code__)
                setattr(cls, attribute, method)


install_dispatch(Traced, TracedDispatch)


def _mode_ufunc(ufunc, inputs):
    """``__array_ufunc__`` of ``inputs``, one per input of ``ufunc``, traced arrays and Python
    floats and ints beside them, with no keyword, as a ufunc the user's code calls in the
    allocation mode calls it (``allocation.DISPATCHED``), told that the mode's frame lies
    between it and the user's line (``debug.caller`` skips it without looking: Python makes no
    object of it). A unary ufunc (``np.sin(x)``) takes ``fast_ufunc`` as ``__array_ufunc__``
    would; with more operands (``np.maximum(x, 0.0)``, ``np.hypot(x, y)``),
    ``__array_ufunc__`` has nothing to ask of such operands (no stand-in, ``out=``, subclass,
    scalar math or other mode's value) and calls ``apply_ufunc``, whose common case
    (``fast_ufunc``, on ``_unwrap``'s values) is taken here."""
    x = inputs[0]
    if len(inputs) == 1:
        if ufunc is np.square:  # (``__array_ufunc__`` squares a complex scalar as NumPy does)
            return x.__array_ufunc__(ufunc, "__call__", *inputs)
        tape, buffer = x.tape, x.buffer
        if not buffer.weak and not buffer.constant and tape.recorder is None \
                and tape.outer is None:
            # (``debug.caller``'s frame, fast_ufunc's, this one's and the mode's skipped)
            yt = fast_ufunc(ufunc, inputs, tape, [x.value], 1, SKIPPED,
                            (buffer,) if x.whole else None)
            if yt is not None:
                return yt
        return x.__array_ufunc__(ufunc, "__call__", *inputs)
    tape, values, pattern = _unwrap(inputs)
    if pattern and tape.recorder is None and tape.outer is None:
        yt = fast_ufunc(ufunc, inputs, tape, values, pattern, SKIPPED)  # (as for one operand)
        if yt is not None:
            return yt
    for x in inputs:
        if type(x) is Traced:  # (NumPy's choice: the first operand that overrides)
            return x.__array_ufunc__(ufunc, "__call__", *inputs)


DISPATCHED[Traced] = _mode_ufunc
install_operators(Traced, _binary)
install_fast_operators(Traced)
READ_BESIDE[Traced] = _read_beside


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


def getitem(x, key, basic=None):
    """``x[key]``: a view for basic indexing (no record), else a gather. ``basic``: whether
    ``key`` is a plain index (``_plain_index``), where the caller asked already; None: asked
    here."""
    tape = active(x.tape)
    if basic is None:
        basic = _plain_index(key)  # (a loop's key: nothing to make plain or freeze)
    if not basic:
        given, key = key, private(_index(key))  # (advanced: a copy; basic once _index's)
    value = x.value
    y = value[key]
    if basic and type(y) is NDARRAY and type(value) is NDARRAY:
        yt = view_of(x, y, tape)  # (an ndarray's basic index: a view of it, not asked)
        yt.indexed = (x, value, key, y)  # (``assigned_back``)
        return yt
    if not isinstance(y, np.generic) and views(y, value):  # (NumPy's scalar: a copy)
        return view_of(x, y, tape)
    yt = fresh(y, tape)
    source = locate(x, tape)
    read = (source, key)
    if not basic:  # (a constant array of the tape it holds: its later writes are undone)
        keep(tape, given, key)
    elif source is not None and type(source.buffer.ref) is Held:
        # One element of an argument (a basic key that gave no view: integers): a loop reads
        # each on every step, so its records share one pair, as its views share one place
        # (``reverse.place_of``), rather than each keeping a pair and the loop's key
        read = tape.places.setdefault(read, read)
    tape.record(Gathered(operator.getitem, read, None, yt.buffer, None,
                         (not basic and _has_integer_array(key)) or overlapping(source)))
    return yt


def _row_or_slice(x, key):
    """Whether ``x[key]`` is ``getitem``'s at once: ``key`` a basic index (``_plain_index``) of
    ``x``, a real or complex NumPy array with axes, traced (not a constant) by a tape that no
    replay records (but inside the step it records: ``Recorder.getitem``). There what
    ``__getitem__`` asks before has one answer: no field, the key
    is its own index (``_index``), no text element, no copy of a scalar's view."""
    value, recorder = x.value, x.tape.recorder
    return type(value) is NDARRAY and value.ndim != 0 and value.dtype.kind in "fc" \
        and (recorder is None or not recorder.ready) and not x.buffer.constant \
        and _plain_index(key)


def _one_element(key, ndim):
    """Whether ``key`` is Python integers, one per axis of ``ndim``: a scalar loop's."""
    if type(key) is tuple:
        if len(key) != ndim or not key:
            return False
        for k in key:
            if type(k) is not int:
                return False
        return True
    return type(key) is int and ndim == 1


def _element_read(x, key):
    """``x[key]`` in one function where it is a scalar loop's: ``key`` Python integers naming
    one element of ``x``, a real or complex array traced (not a constant) by a tape that no
    replay records (but inside the step it records: ``Recorder.getitem``, which writes down
    the record) and no other differentiation encloses. There what ``__getitem__`` and
    ``getitem`` ask has one answer: the key is basic and gives NumPy's scalar, no view, which
    is recorded as ``getitem`` records it. Returns the traced element, or None (nothing
    done: the general path is taken)."""
    value, tape = x.value, x.tape
    # (the key first: a row's or a slice's, ``x[i, :j]``, is told at once)
    if type(key) is tuple:  # (``_one_element``, written out: this runs per element read)
        for k in key:
            if type(k) is not int:
                return None
        if type(value) is not NDARRAY or len(key) != value.ndim or not key:
            return None
    elif type(key) is not int or type(value) is not NDARRAY or value.ndim != 1:
        return None
    recorder = tape.recorder  # (inside a step a replay records: it writes down the record)
    if x.buffer.constant or recorder is not None and recorder.ready or tape.outer is not None \
            or value.dtype.kind not in "fc":
        return None
    running = ACTIVE.running  # (``active``)
    if not running or (running[-1] is not tape and tape not in running):
        raise escaped("a traced array")
    # (``fresh`` of NumPy's scalar ``value[key]``, written out: a 0-d array, read-only as the
    # scalar is immutable (``fresh_value``), a buffer of its own, too small to follow)
    y = np.array(value[key])
    _read_only(y, False)
    buffer = scalar_buffer(y.dtype)
    yt = Traced(y, buffer, tape, True)
    if x.whole:
        source, repeats = x.buffer, False  # (a whole buffer's elements share no bytes)
        ref = source.ref  # (a buffer is its own: its ``buffer`` is a property)
    else:
        source = place_of(x)
        repeats = overlapping(source)
        ref = source.buffer.ref
    read = (source, key)
    if type(ref) is Held:  # (``getitem``: one pair per element of an argument)
        read = tape.places.setdefault(read, read)
    tape.record(Gathered(operator.getitem, read, None, buffer, None, repeats))
    return yt


def setitem(x, key, value):
    """``x[key] = value``: the core's in-place path on the view ``x[key]``, or a scatter; NumPy's
    own assignment where the value overlaps its target or an index repeats."""
    tape = active(x.tape)
    writes_into("x[key] = value", x, value)
    check_destination(x, "x[key] = value", key)
    if tape.recorder is not None and tape.recorder.ready:
        for t in _traced_in(key):  # a replay redoes the write at these positions: guarded
            tape.recorder.guard(t, t.value.tobytes())
    if _element_of(x.value, key):  # (a scalar loop's key, answered first)
        viewing, region = False, None
    else:
        basic = _plain_index(key)
        if not basic:  # (its record keeps the index: ``private``)
            key = private(_integers_as_scalars(plain(key)))
        target = x.value
        region = target[key]
        # (NumPy's scalar: one element, copied; otherwise a view, or an advanced index's copy;
        # an ndarray's basic index gives a view of it, not asked)
        viewing = basic and type(region) is NDARRAY and type(target) is NDARRAY or \
            not isinstance(region, np.generic) and views(region, target)
    if viewing or getattr(region, "ndim", 0) == 0:
        element = not viewing
        index = key
        if element:  # x[i] = v with a scalar element: a 0-d view
            index = (key if type(key) is tuple else (key,)) + (Ellipsis,)
            region = x.value[index]
        else:
            value = _without_leading_ones(value, region.ndim)
            _fits(value, region.shape)
        if type(value) is Traced and value.buffer is x.buffer and value.tape is tape \
                and same_region(value.value, region):
            return  # `x[k] += v` ends by assigning the updated view onto itself: nothing to do
        if not overlaps(x, value, region):
            target = view_of(x, region, tape)
            if tape.recorder is not None and tape.recorder.ready:
                tape.recorder.view(x, index, target)
            assign(target, value, element)
        elif element:  # NumPy's own rules for assigning one element
            copy_into(operator.setitem, x, value, lambda t, v: operator.setitem(t, key, v),
                      {"key": key})
        else:  # x[key] = v is view[...] = v: only the view's memory is asked about
            copy_into(operator.setitem, view_of(x, region, tape), value,
                      lambda t, v: operator.setitem(t, Ellipsis, v), {"key": Ellipsis})
    else:
        overlapping = overlaps(x, value)
        if overlapping and _copies_its_source(x.value, key):
            value, overlapping = value.copy(order="A"), False
        if overlapping or _repeats(x.value, key):
            copy_into(operator.setitem, x, value, lambda t, v: operator.setitem(t, key, v),
                      {"key": key})
        else:
            _scatter(tape, x, key, value)


def _copies_its_source(target, key):
    """Whether NumPy's ``target[key] = value`` with the advanced index ``key`` reads a
    ``value`` whose memory may overlap ``target`` from a copy of it (an ndarray's, unless
    ``key`` is one boolean array, which takes its own path), as mutad then does: its elements
    may have another layout than ``target``'s (``h[diagonal] = h.diagonal().real``)."""
    items = key if type(key) is tuple else (key,)
    return type(target) is NDARRAY and not (
        len(items) == 1 and isinstance(items[0], np.ndarray) and items[0].dtype == bool)


def assigned_back(x, key, value):
    """Whether ``x[key] = value`` is the assignment of the view ``x[key]`` onto itself that
    ends ``x[key] op= v``, found without indexing ``x`` again: ``value`` still holds the array
    ``getitem`` made as the view ``x[key]`` (``value.indexed``), by this key, which holds only
    Python integers and slices of them, so that nothing can have changed what it names, of
    the array ``x`` still holds (``x.shape = ...`` and ``x.resize`` give it another), on
    ``x``'s buffer and tape, active; ``x`` all of its buffer, writeable, of no record type, on
    a tape that no replay records. There ``__setitem__`` and ``setitem`` ask what has one
    answer (the view has axes: no element, no scalar loop's write; no record of a constant;
    the destination checked as a whole writeable array) and return at their ``same_region``:
    nothing is done. False where any of it is not so (the general path)."""
    source, array, index, view = value.indexed
    if source is not x or array is not x.value or index is not key or view is not value.value:
        return False
    tape = x.tape
    if value.buffer is not x.buffer or value.tape is not tape or not x.whole \
            or tape.recorder is not None or x.buffer.constant or not view.ndim \
            or not array.flags.num & WRITEABLE or array.dtype.names is not None \
            or not _fixed(key):
        return False
    active(tape)
    return True


def _fixed(key):
    """Whether the basic index ``key`` (``_plain_index``) holds nothing that may change: its
    slices' bounds and steps are Python integers or None."""
    for k in key if type(key) is tuple else (key,):
        if type(k) is slice and not (_bound(k.start) and _bound(k.stop) and _bound(k.step)):
            return False
    return True


def _bound(k):
    return k is None or type(k) is int


def _element_written(x, key, value):
    """``x[key] = value`` in one function where it is a scalar loop's: ``key`` Python integers
    naming one element of ``x``, all of a real array of its own memory that can be written,
    on a tape that no replay records, no other differentiation encloses and no anomaly
    detection watches; ``value`` a Python float or int into a traced array (not a constant),
    or a traced value of the tape and the array's dtype standing for NumPy's scalar, of its
    own memory, neither weak nor a constant. There what ``__setitem__`` and ``setitem`` ask
    has one answer: the element is a 0-d view, no key is traced, the destination is writable
    and the value, apart from ``x`` (each owns its memory, or it is a number), is no view of
    it, so ``assign`` writes it as an element. Returns whether it did (False: nothing done,
    the general path is taken)."""
    target, tape = x.value, x.tape
    # (the key first: a region's write asks this too, and is told at once)
    if type(target) is not NDARRAY or not _one_element(key, target.ndim):
        return False
    if not x.whole or tape.recorder is not None \
            or tape.outer is not None or tape.anomaly is not None \
            or target.dtype.kind != "f" or target.base is not None \
            or not target.flags.num & WRITEABLE:  # (``writeable`` of a plain array)
        return False
    if type(key) is not tuple:
        key = (key,)
    if type(value) is not Traced:  # a Python number
        if x.buffer.constant:
            return False
        value = as_assigned(value, target.dtype)
        write_into_element(x, key, value, value, 0)
        return True
    source, buffer = value.value, value.buffer
    if value.tape is not tape or type(source) is not NDARRAY or source.ndim \
            or source.base is not None or buffer is x.buffer or buffer.weak or buffer.constant \
            or (source.dtype is not target.dtype and source.dtype != target.dtype) \
            or source.flags.num & WRITEABLE:
        return False
    x.buffer.constant = False  # a constant written with a traced value is traced
    write_into_element(x, key, value, source)
    return True


def _region_written(x, key, value):
    """``x[key] = value`` in one function where ``key`` is a basic index of Python integers and
    slices (``_plain_index``) naming a region with axes of ``x``, all of a real NumPy array with
    axes that can be written, traced (not a constant) by a tape that no replay records; and
    ``value`` a Python float or a NumPy array traced by the same tape with no more axes than
    the region. There what ``__setitem__`` and ``setitem`` ask before assigning has one answer:
    no scalar, record type, list, stand-in or other level's value; ``writes_into`` finds the
    target traced already, ``check_destination`` a whole writeable array; the region is a view
    (an ndarray's basic index), no element; no leading length-1 axis to drop. What is left is
    asked in ``setitem``'s order: the value fits the region (NumPy's error otherwise), is the
    region itself (nothing to do), or may overlap it (False: the general path, NumPy's own
    assignment); else the view of the region is assigned (``assign``). Returns whether it was
    done (False: nothing done, the general path is taken)."""
    target, tape = x.value, x.tape
    if type(target) is not NDARRAY or not target.ndim or not x.whole \
            or tape.recorder is not None or x.buffer.constant \
            or target.dtype.kind != "f" or not target.flags.num & WRITEABLE \
            or not _plain_index(key):
        return False
    traced = type(value) is Traced
    if traced and (value.tape is not tape or type(value.value) is not NDARRAY):
        return False
    active(tape)
    region = target[key]
    if type(region) is not NDARRAY:  # (one element: NumPy's scalar)
        return False
    if traced:
        if value.value.ndim > region.ndim:  # (leading length-1 axes to drop)
            return False
        _fits(value, region.shape)
        if value.buffer is x.buffer and same_region(value.value, region):
            return True  # the region itself: nothing to do
        if overlaps(x, value, region):
            return False
    assign(view_of(x, region, tape), value)
    return True


def _traced_in(key):
    return [k for k in (key if type(key) is tuple else (key,)) if type(k) is Traced]


def _element_of(value, key):
    """Whether ``key`` is Python integers, one per axis of the plain array ``value``: it names
    one element, which ``value[key]`` gives as NumPy's scalar."""
    if type(value) is not np.ndarray:
        return False
    if type(key) is int:
        return value.ndim == 1
    if type(key) is not tuple or len(key) != value.ndim:
        return False
    for k in key:
        if type(k) is not int:
            return False
    return True


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


def _index(key):
    """``plain(key)`` as NumPy takes the index: a traced integer that stands for NumPy's
    scalar (``np.argmax(x)``, which a recording holds as a read-only 0-d array of the tape:
    ``Recorder.derive``) as that scalar, a basic index. To NumPy a 0-d array is an advanced
    one: ``M[np.array(1)]`` is a copy of a row, ``M[np.intp(1)]`` a view f may write through."""
    if type(key) is tuple:
        if _plain_index(key):  # (a loop's row or slice: each item is its own plain index)
            return key
        return tuple([_index(k) for k in key])
    if type(key) is Traced and key.value.dtype.kind in "iu" and stands_for_scalar(key):
        return key.value[()]
    return plain(key)


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
    if type(value) is float or type(value) is int:  # (no axis: a boundary's x[0] = 0.0)
        return value
    shape = value.shape if hasattr(value, "shape") else np.shape(value)
    drop = 0
    while len(shape) - drop > ndim and shape[drop] == 1:
        drop += 1
    return np.reshape(value, shape[drop:]) if drop else value


def _fits(value, shape):
    """Raise NumPy's error for an assigned ``value`` (its leading length-1 axes dropped) that
    does not broadcast to the ``shape`` of its target (``x[:2] = v[:3]``), which the
    elementwise write would word as a ufunc's: NumPy's own assignment raises it, between
    arrays of the two shapes that hold no memory of their own."""
    kind = type(value)
    if kind is float or kind is int:
        return
    # (a traced array's shape read from its array: its property asks whether it stands for a
    # Python number, which the engine's own reads need not)
    given = value.value.shape if kind is Traced else \
        value.shape if hasattr(value, "shape") else np.shape(value)
    if given == shape or given == ():
        return
    try:
        if np.broadcast_shapes(given, shape) == shape:
            return
    except ValueError:
        pass
    target = np.lib.stride_tricks.as_strided(np.empty(1, np.bool_), shape, (0,) * len(shape))
    target[...] = np.broadcast_to(np.False_, given)


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
