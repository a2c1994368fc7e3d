"""Record once, replay fast: a differentiated function's program, recorded the first time it
is called and replayed on later calls as plain NumPy calls.

Tracing pays, on every operation of every call, for NumPy's dispatch to a traced array, for
the bookkeeping that follows buffers, places and versions, and for Python running the
function itself. Code that calls a gradient thousands of times (an optimiser, a sampler, a
time-stepping loop over small arrays) pays it thousands of times for the same program.

``grad(f, replay=True)`` and ``value_and_grad(f, replay=True)`` trace ``f`` on its first call
for each *signature* of arguments, as ``gradient`` does, and a :class:`Recorder` writes down
the program as it runs: one *step* for each operation mutad handles where NumPy hands it over
(a ufunc, a function with a rule, an index, an assignment, an allocation). A step holds the
same call again, for plain arrays, and what the tracing engine would record for it, built the
way the engine builds it: the replay's reverse pass runs the engine's own pullbacks and undos
(``Tape.reverse``), so its gradients are the traced gradients bit for bit, and the restore and
checkpoint policies decide each write afresh, on the values at hand.

After a signature's first replay, its runs of small elementwise steps (arrays under
``elementwise.SHORT``, 64 KiB; single elements read or assigned), with the views, writes,
functions with rules and guards between them, are compiled into straight-line Python
(:func:`with_blocks`, :mod:`blocks`): the same NumPy calls, without a step's dispatch, its
record, or the shadows' dictionary for the values only the run reads.

Every decision the program depends on is a *guard*:

* what Python read of a traced value (``if``, ``while``, ``int()``, ``float()``, ``str()``,
  ``hash()``: ``Traced._decided``), and Python values NumPy functions computed from traced
  ones (a bool of ``np.allclose``: :class:`Same`): a step that checks the replayed value gives
  the same answer, else the call replays another program of its signature whose guards hold
  (``PER_SIGNATURE``), or is recorded again;
* Python's own arithmetic on Python numbers (``x[0].item() ** 0.5``, ``v / w``), which
  tracing computes with NumPy's where Python's gives a number of the same kind: a step asks
  Python again (:class:`PythonsOwn`), and a call on which it raises or gives another kind
  of number (a complex one) is traced;
* NumPy's floating-point error handling at each step (:class:`Modes`) and the events the call
  warned about (:class:`Heard`), in its steps (each message, and the step that raised it, of
  the operation that warned) and in its reverse pass (whose warnings a replay issues as
  tracing's did, at the user's lines); an operation that raised while
  recording, which Python may have caught, leaves the signature traced
  (``Recorder.raised``), and a step that raises while replaying traces the call;
* the arguments' structure, shapes, dtypes and memory layouts, which arguments share memory,
  and the values of the arguments that are not differentiated (numbers, strings, integer
  arrays), and NumPy's error handling at the call (Python's warnings filters too, where one
  turns a RuntimeWarning into an error): the signature that picks a program;
* what ``f`` reaches besides its arguments (:func:`reach`): its code, closures, defaults,
  the globals its code names, a bound method's object, and on, by identity, and the arrays
  among them by their bytes (:class:`Contents`); a change drops every program of ``f``. From
  the first call that rebinds one, the float arrays bound to modules' names are inputs of
  the program instead, as arguments outside argnums are (:func:`_as_inputs`).

A recording that drew random numbers from a generator living between calls leaves its
signature traced (``_random_states``), and so does code that reaches the clock
(``CLOCK_READERS``) or a file (``FILE_READERS``). Replay runs ``f``'s program, not ``f``: what
``f`` reads from outside what it reaches (a file a library opens by its name) is read as it was
when the program was recorded, as under ``jax.jit``. Pass what changes between calls as an
argument.

A plain value computed from a traced one (a comparison, an index) comes back, while
recording, as a constant of the tape, so that Python's decisions on it are seen; Python's
``is``, ``type()`` and ``id()``, which no hook reaches, tell it from NumPy's, so a function
whose code reads one (:func:`_identity_read`), or that reaches one of them or ``operator.is_``
as a value (``IDENTITY_READERS``), is traced on every call. An operation
the engine records in ways no step of its own redoes (a scatter, ``ufunc.at``, an in-place
rule) is a :class:`Reenter` step: the engine's operation again, on traced arrays made for the
call, its result a new array of its own too (np.piecewise's, np.bincount's), which takes the
recorded array's key, where the operation reads nothing but its arguments. What a replay
cannot redo at all (a differentiation nested in ``f``) leaves that signature traced on every
call, correct but not faster; :attr:`Replayed.reasons` says why.

A temporary that tracing recomputes in its reverse pass (``recompute``: one of 4 KiB or more,
so that memory stays O(state)) is recomputed by the replay too: the recording's reverse pass
writes down how it found each such value (read alive, recomputed from what, kept for several
records), and the replay finds it the same way (:class:`Recomputed`), from the bytes its
undos put back, so its gradients stay the traced ones bit for bit and its memory tracing's.
Under a memory budget, the writes tracing rebuilds from a few snapshots (``recompute.Chain``)
are rebuilt by the replay too (:class:`Chained`): the same snapshots at the same writes, each
redone from its inputs found as the recording's first redo of it found them.
"""

import abc
import array
import builtins
import collections
import collections.abc
import contextlib
import contextvars
import ctypes
import datetime
import dis
import enum
import functools
import gc
import glob
import hashlib
import importlib.util
import inspect
import itertools
import mmap
import math
import operator
import os
import pathlib
import pickle
import queue
import random
import re
import string
import struct
import sys
import threading
import time
import types
import typing
import uuid
import warnings
import weakref

try:
    import resource
except ImportError:  # (not on Windows)
    resource = None  # type: ignore[assignment]

import numpy as np

from ..core.devices import LIBRARIES, is_device
from ..core.allocation import (_VERSION, LRU_CACHED, SELF_STANDING, Preexisting, _codes,
                               _global_names, _ModeUfunc, _read_views, _Route, as_floats,
                               as_objects, put_value)
from ..core.arguments import Originals, check_argnums
from .arraylike import ArrayMethods, integers_assigned, out_position, text_element, weak
from .blocks import (PARTIAL_TRY, Block, Opaque, Pair, _factory, flat_slice, held_number,
                     indent, operand_buffers, partial_as_traced, scalar_cotangents, unchecked)
from ..core.debug import (ERRORS, Capture, Warnings, anomaly_detection, logged_categories, nowhere,
                          show_below, show_to, unshow, user_frames, users_callback, warn_at)
from .elementwise import (ASSIGNMENT, SHORT, ElementWrite, Elementwise, _gathered_back,
                          differentiable, elementwise_kept, read_by_partials, short,
                          unbroadcast)
from ..core.errors import MutadError, UnsupportedOperationError, function_name
from ..core.levels import ACTIVE, handled
from .products import UNTHREADED, _vdot, partial_at, product_times, times
from .recompute import (ALIVE, CACHED, CONSTANT, READ, RUN, SAME, SEQUENCE, Chain, Lazy,
                        Rebuild, count_down, recomputable, small)
from .inplace import SavedWrite, on_constants, record_constant_write, unobserved, unseen
from .operations import (Product, apply_function, assign, complex_back, function_pullback,
                         observed_ufunc, unwrapped_ufunc)
from ..core.registry import NO_RULE, ONE, RULES, Applied, Constant, Operand, complex_among
from .reverse import (REVERSING, ReverseTape, Traced, add_cotangents, check_constants, constant,
                      fresh_value, plain, thaw)
from ..core.shadows import Buffer, Place, Shadows, _next_key, overlapping
from ..core.tape import SMALL_WRITE, Record, Tape, Write
from .tracing import Gathered  # (the one import of tracing, which gives Traced its operations)
from ..core.trees import attributes, flatten, scalar_derivative
from ..core.views import (WRAPPERS, WRITEABLE, address, overlaps_itself, owner, real_part_if,
                          stands_for_scalar, strided, writeable)
from .writes import Destination, copy_back, exact_as_scalar

CACHE_SIZE = 8
"""Signatures kept per replayed function (each with up to ``PER_SIGNATURE`` programs), the
least recently used dropped."""


BLOCK_STEPS = 128
"""Steps per compiled block at most: a long run is cut into blocks of this many, which share
compiled templates wherever a loop body repeats (Python compiles one long function slowly)."""

STRICT = False
"""Whether a replay or a recording that raises ``NameError`` or ``AttributeError`` (which no
recorded NumPy call raises: a mistake in mutad's own steps or generated code) raises it,
rather than tracing the call as after any other error. The test suite and the soak set it."""

REPLAY_WAIT = 1.0
"""Seconds a call waits for another thread's replay of the same function before it is traced
instead: the bound of a wait on code that may itself wait for the caller's thread."""

FAILED_GUARDS = 4
"""A signature whose guards fail this many calls in a row is traced from then on: its program
changes from call to call."""

PER_SIGNATURE = 4
"""Programs kept per signature: a call replays the most recently used one whose guards all
hold, and records another (the least recently used dropped) where none does. A decision that
goes one of a few ways from call to call (how many of ``x > 0``, which of two dtypes a root
finder returns) is then replayed each way; a failing guard leaves no trace of its partial run
(:meth:`Program.run`), so the next program runs on the call as it came."""

WRITTEN_OUT = frozenset((np.save, np.savez, np.savez_compressed, np.savetxt))
"""NumPy's functions that write values to a file: a replay would write the new values, but
what ``f`` does with the file after (reads it back: ``buffer.getvalue()``, ``open(path)``)
is Python's, which it does not run. A recording that writes traced values is refused."""


class GuardFailed(Exception):
    """A decision the recorded program depends on went the other way on this call."""


class Slot:
    """In a step's arguments: the value the program computed at ``index`` (else a constant)."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def resolve(spec, values, wrapped=None):
    """``spec`` with every :class:`Slot` replaced by its value in this call, or by the traced
    array ``wrapped`` has for it (:class:`Reenter`)."""
    kind = type(spec)
    if kind is Slot:
        if wrapped is not None and spec.index in wrapped:
            return wrapped[spec.index]
        return values[spec.index]
    if kind is tuple or kind is list:
        return kind(resolve(item, values, wrapped) for item in spec)
    if kind is dict:
        return {key: resolve(item, values, wrapped) for key, item in spec.items()}
    return spec


def resolver(spec):
    """``lambda values: resolve(spec, values)``, made once for a step: only the slots are
    looked up on each call. (A program keeps one per step: the smallest, and no keywords'
    is shared.)"""
    kind = type(spec)
    if kind is dict and not spec:
        return _no_keywords
    if not any(within(spec, Slot)):
        return lambda values: spec
    if kind is Slot:
        return operator.itemgetter(spec.index)
    if kind is tuple or kind is list:
        parts = [resolver(item) for item in spec]
        return lambda values: kind([part(values) for part in parts])
    return lambda values: resolve(spec, values)


_NOTHING = {}


def _no_keywords(values):
    return _NOTHING


def within(tree, kind, found=None):
    """The items of type ``kind`` in ``tree``, at any depth of tuples, lists and dicts, as a
    list (a recursive generator cost recording a tenth of its time)."""
    if found is None:
        found = []
    branch = type(tree)
    if branch is kind:
        found.append(tree)
    elif branch is tuple or branch is list or branch is dict:
        for item in tree.values() if branch is dict else tree:
            branch = type(item)
            if branch is kind:
                found.append(item)
            elif branch is tuple or branch is list or branch is dict:
                within(item, kind, found)
    return found


# ----------------------------------------------------------------------------------------------
# How a step's result becomes the value the traced array held


def as_constant(y):
    """A constant allocated or computed in the function, as ``reverse.constant`` holds it; a
    NumPy scalar as itself, as the engine hands such a constant to the functions that read it
    (``operations._unwrap_args``)."""
    return np.asarray(y) if isinstance(y, (float, int)) else y


def as_scalar(y):
    """A constant integer or boolean the recording held as standing for NumPy's scalar
    (``s.astype(int)`` of a scalar ``s``), as NumPy's scalar: a key holding it is a basic index
    (``M[i]`` a view), as the recording's was (``tracing._index``), where a 0-d array the
    replay computed (``np.copy``'s) would be an advanced one (a copy)."""
    if type(y) is np.ndarray:
        return y[()]
    return y if isinstance(y, np.generic) else np.asarray(y)[()]


def as_fresh(y):
    """A rule's new float output, as ``operations._output`` holds it: a broadcast view copied."""
    if type(y) is np.ndarray and y.base is not None and overlaps_itself(y):
        y = np.copy(y)
    return fresh_value(y)


def _as_is(y):
    return y


# ----------------------------------------------------------------------------------------------
# Steps: each is called with this call's values and tape, and appends the records it makes


def _shape_guard(y, shape, code, layout=None, dtype=None):
    """The lines of a block that check the shape of the value ``y`` an index gave, which a key
    computed by the program may change (``x[x > 0]``), and for a view, where it lies in its
    memory (``Out.layout``). Every value of a replayed program has the shape it was recorded
    with (the arguments by their signature, what each step makes by its operands' shapes, or
    by a guard like this one), so a constant key into one gives the recorded shape, and needs
    no guard. ``dtype``: the dtype ``y`` had, where a function made it (``Out.dtype``)."""
    lines = [f"if {y}.shape != {code.bind(shape)}:", "    raise GuardFailed"]
    if dtype is not None:
        lines += [f"if {y}.dtype != {code.bind(dtype)}:", "    raise GuardFailed"]
    if layout is not None:
        lines += [f"if {code.bind(_layout)}({y}) != {code.bind(layout)}:", "    raise GuardFailed"]
    return lines


def _no_lines(code, k):
    """A block's reverse lines for a step that has no pullback: none."""
    return []


def _no_pullback(shadows):
    """The reverse of a step's record ``()``, where it has no pullback: nothing."""


class Call:
    """``function(*args, **kwargs)``, whose results the program holds as ``outputs`` says
    (``_store``)."""

    __slots__ = ("function", "args", "kwargs", "outputs", "args_of", "kwargs_of")

    def __init__(self, function, args, kwargs, outputs):
        self.function = function
        self.args = args
        self.kwargs = kwargs
        self.outputs = outputs
        self.args_of = self.kwargs_of = None  # prepare(), before the first replay

    def prepare(self):
        self.args_of, self.kwargs_of = resolver(self.args), resolver(self.kwargs)

    def __call__(self, values, tape):
        y = self.function(*self.args_of(values), **self.kwargs_of(values))
        _store(self.outputs, y, values)

    @property
    def inline(self):
        """Whether a block writes this call as lines of its own (:meth:`emit`): one array out
        (a view ``x[key]`` of a value of the program, mostly; a comparison, an allocation)."""
        outputs = self.outputs
        if type(outputs) is not Out or outputs.buffer is not None and outputs.buffer.weak:
            return False
        if self.function is operator.getitem:
            return not self.kwargs and type(self.args[0]) is Slot
        return type(self.args) in (tuple, list)

    def emit(self, code, k):
        """As :meth:`Pure.emit`: ``_store`` of ``x[key]``, or of the call."""
        out = self.outputs
        if self.function is not operator.getitem:
            args = ", ".join(code.value(a.index) if type(a) is Slot else
                             code.bind(a) if not any(within(a, Slot)) else
                             f"{code.bind(resolve)}({code.bind(a)}, values)" for a in self.args)
            if self.kwargs:
                kwargs = code.bind(self.kwargs) if not any(within(self.kwargs, Slot)) else \
                    f"{code.bind(resolve)}({code.bind(self.kwargs)}, values)"
                args += f", **{kwargs}"
            y = f"{code.bind(self.function)}({args})"
            if out.convert is not _as_is:
                y = f"{code.bind(out.convert)}({y})"
            y = code.made(out.slot, y, False)
            code.forward += _shape_guard(y, out.shape, code, out.layout, out.dtype)
            code.records.append(())
            return
        source, key = self.args
        constant = not any(within(key, Slot))
        key = code.bind(key) if constant else f"{code.bind(resolve)}({code.bind(key)}, values)"
        y = f"{code.value(source.index)}[{key}]"
        # (x[key] is an array where it has dimensions, which the conversions leave as it is)
        if out.convert is not _as_is and not (
                out.shape != () and out.convert in (fresh_value, as_constant)):
            y = f"{code.bind(out.convert)}({y})"
        y = code.made(out.slot, y, False)
        if not constant:
            code.forward += _shape_guard(y, out.shape, code, out.layout)
        code.records.append(())

    @property
    def writes_nothing(self):
        """Whether its lines write into no memory (``blocks.Code.elements``): ``x[key]``'s."""
        return self.function is operator.getitem

    emit_back = staticmethod(_no_lines)
    back = staticmethod(_no_pullback)
    # (the buffers whose memory its reverse pass reads: ``blocks.Code.read_back``)
    reverse_reads: frozenset = frozenset()


ARITHMETIC = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
              np.true_divide: operator.truediv}
"""Ufuncs a step computes with Python's operators: the same ufunc for arrays, and NumPy's own
scalar arithmetic for NumPy scalars (the values a replay holds for read-only 0-d arrays)."""


class Out:
    """Where a step stores a traced array it made: its slot, ``convert``, which makes the
    value NumPy gave the value the traced array held (see ``as_constant``), and the shape and
    dtype it had when recorded: guards, since a shape may depend on values (``x[x > 0]``), and
    so may a function's dtype (``np.linalg.eigvals``, real or complex as the eigenvalues
    are), and the program's later steps on it were recorded for those."""

    __slots__ = ("slot", "convert", "shape", "dtype", "buffer", "layout")

    def __init__(self, slot, convert, t, view=False):
        self.slot = slot
        self.convert = convert
        self.shape = t.value.shape
        self.dtype = t.value.dtype
        self.buffer = t.buffer if type(t) is Traced else None  # weak: a Python number
        # of a view of an operand, where it lies in its memory: a guard too, since settings
        # the program computes may move it (np.flip(x, axis) of a computed axis), and the
        # program's records name that place; not of a read-only 0-d array, which a replay
        # holds as NumPy's scalar (its ``.imag``: an array of its own there), one element
        # that no setting moves a view in and no write reaches
        self.layout = _layout(t.value) if view and _movable(t.value) else None


def _movable(view):
    """Whether where ``view`` lies in its memory may change: not in a read-only 0-d array."""
    base = owner(view)
    return base.ndim > 0 or base.flags.writeable


def _layout(view):
    """Where ``view`` lies in its memory, and whether an array of dimensions is a view at all:
    one of its own (an advanced index's copy where the recording's key gave a view, which a
    write through it would miss) lies at offset 0 too. (A 0-d one may be either: a replay
    holds a scalar the recording viewed, ``x[0].item()``'s, as a value of its own.)"""
    base = view.base if type(view) is _NDARRAY else None  # (the common view, of a plain
    if type(base) is not _NDARRAY or base.base is not None:  # array that owns its memory:
        base = owner(view)  # that array, without owner's search)
    return view.strides, address(view) - address(base), base is view and view.ndim > 0


class Same:
    """In a step's outputs: a Python value computed from traced ones (a ``bool`` of
    ``np.allclose``), which Python may decide on: the replayed call must compute it again."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


PYTHON_SCALARS = (bool, int, float, complex, str)


def identical(a, b):
    """Whether Python values ``a`` and ``b`` are the same: type and value, a float's bits
    (the sign of a zero or a NaN, a NaN's payload: a later ``copysign`` or ``view`` reads
    them)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack('<d', a) == struct.pack('<d', b)
    if type(a) is complex:
        return struct.pack('<dd', a.real, a.imag) == struct.pack('<dd', b.real, b.imag)
    return a == b


def _store(outputs, y, values):
    """Store ``y`` as ``outputs`` says: an :class:`Out`, a :class:`Same` (nothing to store,
    a value to check), None (nothing to store), or a tuple of those for the items of ``y``."""
    if outputs is None:
        return
    if type(outputs) is Same:
        if not identical(y, outputs.value):
            raise GuardFailed
        return
    if type(outputs) is Out:
        value = outputs.convert(y)
        if value.shape != outputs.shape or value.dtype != outputs.dtype \
                or outputs.layout is not None and _layout(value) != outputs.layout:
            raise GuardFailed
        if outputs.buffer is not None and outputs.buffer.weak and value.ndim == 0:
            value = value.item()  # as the traced value stood for it (arraylike.weak); a
            # view of it (np.ravel of a Python float) is the array it is
        values[outputs.slot] = value
        return
    for out, item in zip(outputs, y, strict=True):
        _store(out, item, values)


class Pure:
    """A pure elementwise operation: the ufunc, and the engine's record of it
    (``elementwise.Elementwise``) with this call's values.

    On small arrays Python's overhead is the cost, so where the pullback takes the engine's
    path for those (``elementwise._small_cotangents``: each traced input a whole C-contiguous
    buffer of the output's shape and dtype, no decision) the step does the same arithmetic in
    the same order itself (``lean``: per traced input, its partial, whether it is the last,
    its buffer), from a tuple of this call's values in place of a record."""

    __slots__ = ("ufunc", "record_ufunc", "args", "at", "kwargs", "out", "rule", "reads",
                 "inputs", "buffer", "state", "lean", "weak", "scalar_math", "scalar_nan",
                 "later", "exact", "complex_values")

    @property
    def writes_nothing(self):
        """Whether its lines write into no memory (``blocks.Code.elements``)."""
        return not self.kwargs or "out" not in self.kwargs

    @property
    def reverse_reads(self):
        """The keys of the buffers whose memory its reverse pass may read (its operands'; None:
        any buffer's): ``blocks.Code.read_back``."""
        if self.kwargs or self.later is not None:
            return None
        return operand_buffers(self.args, self.inputs)

    def __init__(self, ufunc, args, kwargs, out, rule, reads, record):
        # NumPy's scalars compute the four operations in their own arithmetic, at a tenth of
        # a ufunc call's cost, to the same correctly rounded bits
        self.ufunc = self.record_ufunc = ufunc
        self.args = list(args)
        self.at = []
        operands = True  # every argument a value of the program or a Python number
        for i, a in enumerate(args):
            if type(a) is Slot:
                self.args[i] = None
                self.at.append((i, a.index))
            elif type(a) is not float and type(a) is not int and type(a) is not complex:
                operands = False
        if operands and not kwargs and ufunc in ARITHMETIC:
            self.ufunc = ARITHMETIC[ufunc]
        self.at = tuple(self.at)
        self.kwargs = kwargs or None
        self.out = out
        self.rule = rule
        self.reads = reads
        self.inputs = _places(record.inputs)
        self.buffer = record.output
        self.state = record.state
        self.lean = None  # prepare(), before the first replay
        self.weak = False  # prepare(): the value stands for a Python number (Buffer.weak)
        self.scalar_math = None  # NumPy's scalar math, where it made the value (Recorder)
        self.scalar_nan = None  # the same, where only its NaN is its own (Recorder)
        self.later = None  # the values its record recomputes in the reverse pass (Recomputed)
        self.exact = None  # math's function of its arguments, whose value it gives (PutValue)
        # whether a value of the program its partials may read is complex (``record``)
        self.complex_values = record.output.dtype.kind == "c" or any(
            place is not None and place.dtype.kind == "c" for place in self.inputs)

    def prepare(self):
        buffer, rule = self.buffer, self.rule
        # Python's numbers (a float argument, Python's arithmetic on them) are held as such,
        # so that NumPy promotes them as it did when the call was traced (arraylike.weak):
        # Python's operators on them give Python's numbers, which stand for NumPy's scalar
        # only where the traced value did; NumPy's ufunc gives NumPy's scalar.
        self.weak = buffer.weak
        if not self.weak and self.ufunc is not self.record_ufunc and all(
                weak(a) if a is not None else place is not None and place.buffer.weak
                for a, place in zip(self.args, self.inputs, strict=True)):
            self.ufunc = self.record_ufunc
        if buffer.dtype.kind == "c":
            # NumPy's complex scalar math rounds otherwise than its loops: the engine takes a
            # product of complex scalars from the former (``arraylike._scalar_math``), the
            # rest from the latter
            self.ufunc = self.record_ufunc
        if self.scalar_nan is not None and self.ufunc is self.record_ufunc:
            self.scalar_math = self.scalar_nan  # (not computed on NumPy's scalars)
        if self.scalar_math is not None:
            at = dict(self.at)
            self.ufunc = functools.partial(_on_scalars, self.scalar_math,
                                           [i in at for i in range(len(self.args))])
        if buffer.c_contiguous and short(buffer) and buffer.dtype.kind == "f" \
                and self.later is None and self.exact is None:
            # (a complex partial is conjugated: the engine's; math's value is put in by
            # ``__call__``, which a compiled block's lines do not run)
            self.lean = _lean_inputs(rule, self.state[1], self.inputs, buffer, broadcast=True)

    def __call__(self, values, tape):
        vals = self.args.copy()
        for i, slot in self.at:
            vals[i] = values[slot]
        y = self.ufunc(*vals, **self.kwargs) if self.kwargs else self.ufunc(*vals)
        if self.ufunc is not self.record_ufunc and self.scalar_math is None \
                and isinstance(y, np.generic) and y != y:
            # a NaN as the ufunc makes it (see blocks), or as NumPy's scalar math does, where
            # the engine put it right (arraylike.put_right), whose events the ufunc raised
            with np.errstate(all="ignore"):
                y = self._nan_again()(*vals)
        if self.exact is not None:  # math's value, before the record reads it (PutValue)
            y = _with_math_value(y, *self.exact, values)
        # A NumPy scalar where the traced array was a read-only 0-d one; a Python number where
        # it stood for one, but NumPy's scalar to the partials, which compute on it as on the
        # traced value (sqrt's 0.5 / y: inf, not Python's ZeroDivisionError, at y = 0.0)
        values[self.out] = y.item() if self.weak and isinstance(y, np.generic) else y
        if self.lean is not None:  # what the partials read, no more (as ``record`` keeps)
            read = read_by_partials(vals, self.reads)
            if self.rule.decide is not None:  # and the decision they take, after the inputs
                read = [*read, self.rule.decide(*vals)]
            tape.records.append((self, read, y if "y" in self.rule.uses else None))
        elif self.later is not None:
            tape.records.append(Recomputed.later(self.later, self.record(vals, y), values))
        else:
            tape.records.append(self.record(vals, y))

    def _nan_again(self):
        """What computes a NaN result again: the ufunc, or NumPy's scalar math on the values
        as its scalars (an operand may be a 0-d array: ``_on_scalars``)."""
        if self.scalar_nan is None:
            return self.record_ufunc
        at = dict(self.at)
        return functools.partial(_on_scalars, self.scalar_nan,
                                 [i in at for i in range(len(self.args))])

    def record(self, vals, y):
        if self.complex_values:  # (the partials of the program's complex values, 0-d
            # arrays in tracing: NumPy's scalars multiply otherwise, ``_as_traced``; the
            # constants as they are)
            vals = list(vals)
            for i, _ in self.at:
                vals[i] = _as_traced(vals[i])
            y = _as_traced(y)
        kept = elementwise_kept(self.rule, self.reads, read_by_partials(vals, self.reads),
                                vals, y)
        return Elementwise(self.record_ufunc, self.inputs, self.kwargs or None, self.buffer,
                           kept, self.state)

    def back(self, shadows, vals, y):
        """The pullback from ``(self, vals, y)`` (``vals``: what the partials read, then the
        decision): ``Elementwise.pullback`` and ``_small_cotangents``, for a program in which
        no shadow is shared."""
        entries = shadows.entries
        entry = entries.pop(self.buffer.key, None)
        if entry is None:
            return
        dy = entry[1]
        if entry[3] is not None or not dy.flags.writeable:  # the engine's general path
            entries[self.buffer.key] = entry
            kept = [*vals, y] if "y" in self.rule.uses else list(vals)
            Elementwise.pullback(Elementwise(self.record_ufunc, self.inputs, self.kwargs or None,
                                             self.buffer, kept, self.state), shadows, None)
            return
        rows = []
        for i, partial, last, place, direct, summed in self.lean:
            if partial is ONE:
                if not last and not summed:
                    if direct:
                        existing = entries.get(place.key)
                        if existing is not None:  # takes dy as it is
                            existing[1] += dy
                            continue
                    elif shadows.has(place):
                        shadows.add(place, dy)
                        continue
                    g = dy.copy()
                else:
                    g = dy if last else dy.copy()
            else:
                p = partial_at(partial, y, vals)
                if not dy.ndim and p != p:  # as tracing computes it (partial_as_traced)
                    p = partial_as_traced(partial, y, *vals)
                g = times(dy, p, dy if last else np.empty_like(dy))
            rows.append((place, unbroadcast(g, place.shape) if summed else g,
                         direct and not summed))
        laid_out = self.buffer.c_contiguous  # dy, its shadow, in C order (as _lean_cotangents)
        for place, g, direct in rows:
            if not direct or not laid_out:
                shadows.add(place, g, owned=True)
                continue
            existing = entries.get(place.key)
            if existing is None:
                entries[place.key] = [place, g, None, None]
            else:
                existing[1] += g

    def emit(self, code, k):
        """This step's line in a :class:`blocks.Block`'s forward pass."""
        at = dict(self.at)
        vals = [code.value(at[i]) if i in at else code.bind(a) for i, a in enumerate(self.args)]
        infix = INFIX.get(self.ufunc)
        if infix is not None and len(vals) == 2:
            operands = vals
            if self.buffer.dtype == np.float64 and self.buffer.shape != ():
                # NumPy takes longer over a Python number than over a float64 0-d array, for
                # the same float64 loop on the same numbers (the partials see the number, and
                # where one is that number, the product takes the array: _lean_back)
                arrays = [_as_operand(a, self.buffer.dtype) if type(a) in (float, int)
                          else None for a in self.args]
                operands = [name if array is None else code.bind(array)
                            for array, name in zip(arrays, vals)]
                code.arrays.update((name, operand) for a, name, operand
                                   in zip(self.args, vals, operands)
                                   if operand != name and _finite_nonzero(a))
            expression = f"{operands[0]} {infix} {operands[1]}"
            if self.buffer.shape == ():  # NumPy's scalars: a NaN as NumPy made it
                y = code.made(self.out, expression, True)
                ufunc = code.bind(self._nan_again())
                expression = f"{y} if {y} == {y} else {ufunc}({vals[0]}, {vals[1]})"
        else:
            kwargs = f", **{code.bind(self.kwargs)}" if self.kwargs else ""
            expression = f"{code.bind(self.ufunc)}({', '.join(vals)}{kwargs})"
        kept = None
        if self.weak:  # a Python number, as __call__ holds it (its partials NumPy's scalar)
            if "y" in self.rule.uses:
                kept = code.keep(f"w{k}")
                code.forward.append(f"{kept} = {expression}")
                expression = kept
            expression = f"number({expression})"
        elif infix is not None and len(vals) == 2 and self.buffer.shape == ():
            # (its NaN check, which the block may take later: Code.defer_nan_checks)
            code.nan_checks.append((len(code.forward), y, f"{ufunc}({vals[0]}, {vals[1]})"))
        y = code.made(self.out, expression, self.buffer.key in code.internal)
        decide = self.rule.decide
        if decide is not None:  # the decision the partials take, from the inputs
            decision = code.keep(f"d{k}")
            code.forward.append(f"{decision} = {code.bind(decide)}({', '.join(vals)})")
        # the reverse pass reads what the partials read, no more (as a record keeps)
        vals = read_by_partials(vals, self.reads)
        vals = ["None" if name is None else code.keep(name) if name[0] == "v" else name
                for name in vals]
        if decide is not None:
            vals.append(decision)
        y = "None" if "y" not in self.rule.uses else kept if kept is not None else code.keep(y)
        code.records.append((vals, y))

    def emit_back(self, code, k):
        """Its lines in the block's reverse pass: :meth:`back`, unrolled."""
        vals, y = code.records[k]
        vals = ", ".join(vals)
        local = _local_only(code, self.lean) if code.stretches else ()
        opened = dict(code.live) if local else None
        if self.buffer.key in code.internal:
            owned = not code.shares(self.buffer)
            other = code.sharing.get(self.buffer.key)
            dy = code.take(self.buffer)
            if dy is None:  # no cotangent reaches the value
                return []
            if other is not None:  # the other local holds dy's array while these lines read
                # dy: not added into in place (v - v, once v + (v - v)'s dy is both's)
                code.sharing[self.buffer.key], code.sharing[other] = other, self.buffer.key
            lines = self._lean_back(code, vals, y, owned=owned, dy=dy, fast=bool(local))
            code.unshare(self.buffer.key)  # the other holds it alone from here on
            return code.stretch(lines, opened, None, local and local | {self.buffer.key},
                                (k, "None"))
        if self.buffer.key in code.unreached:
            return []
        key = code.key(self.buffer)
        # A float64 scalar's cotangent is NumPy's scalar, not a 0-d array (scalar_cotangents)
        dy = "x[1][()]" if scalar_cotangents(self.buffer) else "x[1]"
        if not any(code.cotangent(place) for *_, place, direct, _ in self.lean if direct):
            return [f"x = pop({key}, None)", "if x is not None:",
                    "    if x[3] is not None or not x[1].flags.writeable:",
                    f"        entries[{key}] = x",
                    f"        {code.bind(self)}.back(shadows, [{vals}], {y})",
                    "    else:", f"        dy = {dy}",
                    *indent(self._lean_back(code, vals, y, always=False), 2)]
        # The local cotangents of its inputs are known to hold arrays only if it has one
        taken = [f"x = pop({key}, None)",
                 "if x is None or x[3] is not None or not x[1].flags.writeable:",
                 f"    {code.deopt(k, 'x')}", f"dy = {dy}"]
        lines = self._lean_back(code, vals, y, fast=bool(local))
        return [*taken, *code.stretch(lines, opened, ("dy", self.buffer), local, (k, "x"))]

    def _lean_back(self, code, vals, y, always=True, owned=True, dy="dy", fast=False):
        """The lean path of :meth:`back`, from ``dy`` on (``always``, ``owned``, ``dy``,
        ``fast``: see ``_lean_cotangents``)."""
        return _lean_cotangents(code, self.lean, self.buffer, vals, y, always=always,
                                owned=owned, dy=dy, fast=fast)


def _local_only(code, lean):
    """The keys of the local cotangents that the lean pullback ``lean`` of an elementwise step
    (``_lean_inputs``) may write, where its lines touch nothing else (``blocks.Stretch``):
    each input a whole buffer whose cotangent is a local, none broadcast; else an empty
    set."""
    if not lean or any(not direct or summed or code.cotangent(place) is None
                       for *_, place, direct, summed in lean):
        return frozenset()
    return frozenset(place.key for *_, place, _, _ in lean)


def _lean_inputs(rule, traced, inputs, made, scalar=True, broadcast=False):
    """Per traced input of an elementwise operation that made ``made`` (small), what its lean
    pullback needs (``_lean_cotangents``); None if an input is not of ``made``'s shape and
    dtype (or a 0-d whole buffer, broadcast: ``summed``; or, where ``broadcast``, any input
    NumPy broadcast to ``made``'s shape: ``x[:, None] - x[None, :]``). A whole C-contiguous
    buffer's shadow is an entry of its own, which the cotangent may become; a region's, or
    another layout's, is added into through ``Shadows.add`` (not where elements share memory,
    nor for a 0-d output whose cotangent a block holds as NumPy's scalar: ``scalar``)."""
    lean = []
    for i in traced:
        place = inputs[i]
        direct = type(place) is Buffer and place.c_contiguous
        # an input broadcast against the others (r * u, m[:, None] * v): its cotangent summed
        # over the axes it was stretched along (unbroadcast), as the engine's pullback sums it
        summed = place.shape != made.shape and (
            direct and place.shape == () or broadcast and _broadcasts(place.shape, made.shape))
        if place.shape != made.shape and not summed or place.dtype != made.dtype:
            return None
        if not direct and (overlapping(place) or scalar and made.shape == ()):
            return None
        lean.append((i, rule.partials[i], i == traced[-1], place, direct, summed))
    return tuple(lean)


def _broadcasts(shape, to):
    """Whether NumPy broadcasts an operand of ``shape`` to ``to`` (its axes as many or fewer,
    each trailing one of ``to``'s length or 1)."""
    lead = len(to) - len(shape)
    return lead >= 0 and all(n == m or n == 1 for n, m in zip(shape, to[lead:]))


def _lean_cotangents(code, lean, made, vals, y, scalar=None, always=True, owned=True,
                     dy="dy", fast=False):
    """Lines that accumulate the cotangent ``dy`` of ``made`` (the buffer an elementwise step
    made, the place a write wrote) into those of its inputs, as ``elementwise._small_cotangents``
    does, for the inputs ``lean`` (per traced input: its position, partial, whether it is the
    last, its place, whether that is a whole C-contiguous buffer, whether it is a broadcast
    scalar whose cotangent is summed: ``_lean_inputs``); ``vals`` and ``y`` name the
    inputs and the output the partials read. For a float64 scalar, the same arithmetic on
    NumPy's scalars, which need no copies (``scalar``: None, as ``blocks`` holds a cotangent
    of ``made``). ``always``: the lines run whenever the block's reverse pass reaches them (so
    a region's shadow they look up stays a local: ``Code.shadow``). ``owned``: whether
    ``dy`` is the step's own, to write into and hand over (not where another local cotangent
    holds its array too: ``Code.shares``); where it is not, each input's cotangent is made as
    for an input that is not the last (a copy, a product into a new array). ``dy``: the
    name that holds it (a local cotangent the step took, read where it is). ``fast``: the
    lines are a ``blocks.Stretch``'s, each checked product of a short float64 vector a
    ``blocks.Pair`` whose fast line takes it unchecked."""
    if scalar is None:
        scalar = scalar_cotangents(made)
    lines, rows = [], []
    shared = None if scalar or not owned else _shared_sum(code, lean)
    named = set()  # the keys of the new local cotangents made in place of a g<j>
    for j, (_, partial, last, buffer, direct, summed) in enumerate(lean):
        g = f"g{j}"
        last = last and owned
        copy = dy if scalar else f"{dy}.copy()"
        if summed:  # a broadcast scalar: the product summed, as unbroadcast sums it
            if partial is ONE:
                lines.append(f"{g} = {dy if last else copy}")
            else:  # (an operand, a number: as it is)
                into = dy if last else "None"
                evaluate, p = _partial_value(code, partial, y, vals, scalars=made.shape == ())
                if made.shape == ():
                    lines += [*evaluate, f"{g} = product({dy}, {p}, {into})"]
                else:  # (a traced scalar times a vector, syrk's alpha * A[i, k] * A[:i, k])
                    times, array, number = _unmasked_lines(code, made, dy, p, into)
                    lines += [*evaluate, f"{g} = ({times} if {array}{number} else "
                                         f"product({dy}, {p}, {into}))"]
            if scalar_cotangents(buffer) and made.shape != ():
                # unbroadcast's sum over every axis of g (of made's shape), as the float64
                # scalar it makes a 0-d array of, which the block holds as NumPy's scalar
                axes = code.bind(tuple(range(len(made.shape))))
                lines.append(f"{g} = add_reduce({g}, axis={axes})")
            elif buffer.shape != ():  # the sum over the axes it was broadcast along
                lines.append(f"{g} = {code.bind(unbroadcast)}({g}, {code.bind(buffer.shape)})")
            else:
                total = f"{code.bind(unbroadcast)}({g}, ())"  # NumPy's scalar: a sum of all
                lines.append(f"{g} = {total}[()]" if scalar_cotangents(buffer) else
                             f"{g} = {code.bind(np.asarray)}({total})")  # else the 0-d array
                # a block holds for a 0-d buffer (a later product may write into it: out=dy)
            rows.append((g, buffer, False))
            continue
        if partial is ONE and not last and not direct:
            # a region's shadow, made zero-filled if needed, takes dy as Shadows.add would
            # (an existing one as it is, a new one a copy added into its zeros)
            lines += code.add_into(buffer, dy, always)
            continue
        if partial is ONE and not last:
            local = code.cotangent(buffer)
            if local is None:
                lines += [f"x = get({code.key(buffer)})", "if x is not None:",
                          f"    x[1] += {dy}", f"    {g} = None", "else:", f"    {g} = {copy}"]
                rows.append((g, buffer, True))
            elif buffer.key in code.live:
                lines += code.plus(local, dy) if scalar else \
                    code.accumulate(buffer, local, dy)
            elif shared is not None:  # dy itself, which the last input's local takes too
                rows.append((dy, buffer, False))
            else:
                g = _new_local(code, buffer, named, g)
                lines.append(f"{g} = {copy}")
                rows.append((g, buffer, False))
            continue
        if partial is ONE:
            rows.append((dy, buffer, False))
            continue
        g = _new_local(code, buffer, named, g)
        if scalar:  # times(dy, p): zero where a factor is, whatever the other (of two
            # factors not zero, the product is times's own, and computes no 0 * inf; a NaN
            # is computed again by the ufunc, which may choose another one: blocks)
            evaluate, p = _partial_value(code, partial, y, vals, scalar=True)
            # (by a number known now, finite and not zero, a zero dy's product is with_a_zero's)
            number = code.constant(p)
            product = (f"{dy} * {p}" if _finite_nonzero(number) else
                       f"{dy} * {p} if {dy} and {p} else with_a_zero({dy}, {p})")
            if made.dtype.kind == "f" and _finite_nonzero(number) and number == -1 and (
                    type(number) in (float, int) or made.dtype == number.dtype):
                # subtract's -1: a real float's product by -1 of its own type is its negation,
                # the same bits (zeros and infinities too); a NaN, the check's product
                product = f"-{dy}"
            if made.dtype.kind == "f" and _finite_nonzero(number):
                code.real_products.add(f"{g} = {product}")  # (Code.fold_negations)
            lines += [*evaluate, f"{g} = {product}", f"if {g} != {g}:",
                      f"    {g} = times_scalar({dy}, {p})"]
        else:
            into = (dy if last else "None" if made.shape != ()
                    else f"empty_like({dy})")  # dy * p gives a NumPy scalar for a 0-d dy
            evaluate, p = _partial_value(code, partial, y, vals, scalars=made.shape == ())
            # NumPy's float64 number promotes a product with another dtype's array (NEP 50),
            # which the engine's takes into an array of dy's dtype (Pure.back)
            strong = made.dtype != np.float64
            factor = code.arrays.get(p)  # an operand that is a finite nonzero float: its array
            if factor is None and _finite_nonzero(code.constant(p)):
                # a number known now: the operand of 2 * u, subtract's -1, x / 4's 0.25 (as
                # a 0-d array where that is the same operand of the same loop: _as_operand)
                number = code.constant(p)
                array = _as_operand(number, made.dtype)
                factor = p if array is None else code.bind(array)
                if into == "None" and strong and type(number) is np.float64:
                    into = f"empty_like({dy})"
            if factor is not None:  # needs no mask: the product (products.times, unmasked)
                general = (f"{dy} * {factor}" if into == "None" else
                           f"multiply({dy}, {factor}, {into})")
                if into == dy and made.dtype.kind == "f":  # (Code.fold_negations)
                    code.real_products.add(f"{g} = {general}")
            else:  # a finite nonzero Python number needs none either, nor an array of dy's
                # shape, of at most one dimension, whose dot product with it is finite
                # (products.unmasked's own questions; the array, the partial most steps have,
                # asked first, and a short one's dot product BLAS's: _sum_of_products)
                times, array, number = _unmasked_lines(code, made, dy, "p", into)
                general = f"({times} if {array}{number} else product({dy}, p, {into}))"
                known = code.constant(p)  # (a number known now: zero or not finite here)
                if p != "p":
                    evaluate.append(f"p = {p}")
                if fast and unchecked(made):  # a vector, or a finite nonzero number: unchecked
                    lines += [*evaluate, Pair(
                        None if known is not None and type(known) is not np.ndarray else
                        f"{g} = ({times} if type(p) is ndarray and p.shape == "
                        f"{code.bind(made.shape)} or {number} else retake())",
                        f"{g} = {general}")]
                    rows.append((g, buffer, False))
                    continue
            lines += [*evaluate, f"{g} = {general}"]
        rows.append((g, buffer, False))
    # A cotangent becomes the shadow of a whole C-contiguous buffer only in C order (as
    # Shadows.add adopts it): a later pullback (a matmul's, a sum's) rounds in the order of
    # its memory. Laid out as ``made`` (its whole buffer's shadow, not C-ordered), a copy.
    laid_out = made.c_contiguous if type(made) is Buffer else \
        made.buffer.c_contiguous if made.whole else True  # (a region's: Shadows.take's copy)
    for g, buffer, optional in rows:
        if type(buffer) is Buffer and buffer.c_contiguous:
            # (a 0-d buffer's cotangent has no layout: ascontiguousarray would make it 1-d)
            add = code.add(buffer, g if laid_out or buffer.shape == () else
                           f"{code.bind(np.ascontiguousarray)}({g})")
        else:  # a region: Shadows.add of an array nothing else holds
            add = code.add_into(buffer, g, always and not optional)
        lines += [f"if {g} is not None:", *indent(add)] if optional else add
    if shared is not None:
        code.share(*shared)
    return lines


def _unmasked_lines(code, made, dy, p, into):
    """``(times, array, number)``: the expressions of ``blocks._product(dy, p, into)`` where
    ``products.unmasked`` says yes on its own questions, told inline for a ``p`` (a name)
    that is an array or a number: ``times``, the product; ``array``, the condition (with
    its ``or``, or empty) that ``p`` is an array of ``made``'s shape (a short float64 vector)
    whose dot product with ``dy`` is finite; ``number``, that it is a finite nonzero number
    (not NumPy's float64 where ``made`` is of another dtype, which NEP 50 promotes)."""
    times = f"{dy} * {p}" if into == "None" else f"multiply({dy}, {p}, {into})"
    dot = "vdot" if math.prod(made.shape) <= UNTHREADED else "sum_of_products"
    array = (f"type({p}) is ndarray and {p}.shape == {code.bind(made.shape)} and "
             f"isfinite({dot}({dy}, {p})) or " if len(made.shape) <= 1
             and made.dtype == np.float64 else "")
    number = (f"(type({p}) is float and isfinite({p}) or type({p}) is int) and {p}"
              if made.dtype != np.float64 else f"((type({p}) is float or type({p}) is float64) "
              f"and isfinite({p}) or type({p}) is int) and {p}")
    return times, array, number


def _new_local(code, buffer, named, g):
    """The name to make an input's cotangent in: the local of ``buffer``'s cotangent where it
    is a new one (which ``Code.add`` then names as it is, with no line of its own), once per
    step; else ``g``."""
    local = code.cotangent(buffer) if type(buffer) is Buffer and buffer.c_contiguous else None
    if local is None or buffer.key in code.live or buffer.key in named:
        return g
    named.add(buffer.key)
    return local


def _shared_sum(code, lean):
    """The buffers of the two inputs of a step whose partials in both are one (``a + b``),
    where the cotangent ``dy`` may become both of their local cotangents, one array
    (``Code.share``): new locals of two buffers, each made by a lean elementwise step of the
    block (whose lines heed ``Code.shares``), neither a broadcast scalar; else None."""
    if len(lean) != 2:
        return None
    buffers = []
    for _, partial, _, buffer, direct, summed in lean:
        if partial is not ONE or not direct or summed or code.cotangent(buffer) is None \
                or buffer.key in code.live or type(code.makers.get(buffer.key)) is not Pure \
                or code.makers[buffer.key].lean is None:
            return None
        buffers.append(buffer)
    return None if buffers[0].key == buffers[1].key else buffers


def _partial_value(code, partial, y, vals, scalar=False, scalars=False):
    """``(lines, name)``: where a block's reverse line finds the value of ``partial`` for the
    step whose inputs are named ``vals`` (a string) and output ``y``: the input itself for an
    :class:`registry.Operand`, the number for a :class:`registry.Constant`, else ``p``, which
    ``lines`` compute by calling the partial (an :class:`registry.Applied`'s function, on the
    value it reads), or, for float64 scalars (``scalar``), by the expression it offers for
    NumPy's scalars (``_scalar_partial``). Of NumPy's scalars (``scalar``, or ``scalars``: the
    values of 0-d buffers of another dtype), a NaN is computed again as tracing computes it."""
    if type(partial) is Operand:
        name = vals.split(", ")[partial.position]
        if name != "None":
            return [], name
    if type(partial) is Constant:
        return [], code.bind(partial.value)
    folded = _folded(code, partial, y, vals)
    if folded is not None:
        return [], code.bind(folded)
    if type(partial) is Applied:
        name = y if partial.position is None else vals.split(", ")[partial.position]
        if name != "None":
            return [f"p = {code.bind(partial.function)}({name})"], "p"
    call = f"{code.bind(partial)}({y}, {vals})"
    again = f"partial_as_traced({code.bind(partial)}, {y}, {vals})"
    offer = getattr(partial, "scalar", None) if scalar else None
    lines = None if offer is None else _scalar_partial(code, offer, call, again, y, vals)
    if lines is None:
        lines = [f"p = {call}"]
        if scalar or scalars:  # a NaN as tracing makes it (``blocks.partial_as_traced``)
            lines += ["if p != p:", f"    p = {again}"]
    # Python's arithmetic on a weak operand's number raises where NumPy's gives inf or nan:
    # there the partial is computed as tracing computes it (``products.partial_at``)
    at = f"{code.bind(partial_at)}({code.bind(partial)}, {y}, ({vals},))"
    return [PARTIAL_TRY, f"    {lines[0]}", "except (ZeroDivisionError, OverflowError):",
            f"    p = {at}", *lines[1:]], "p"


def _scalar_partial(code, offer, call, again, y, vals):
    """Lines that compute a partial for float64 scalars by the expression it offers
    (``scalar``: ``(template, guarded)``, a template of the operands ``{0}``, ``{1}``, ... and
    ``{y}``, and the positions of the operands that must be NumPy's float64 scalars for it to
    be the partial's own value, else the partial is called), a NaN as tracing makes it
    (``again``: which of two NaNs comes out is up to the code, ``blocks.partial_as_traced``);
    None where the template reads a value the step does not keep."""
    template, guarded = offer
    names = vals.split(", ")
    fields = [field for _, field, _, _ in string.Formatter().parse(template) if field]
    if any((y if field == "y" else names[int(field)]) == "None" for field in fields):
        return None
    expression = template.format(*names, y=y)
    if not guarded:  # (the partial's own expression)
        return [f"p = {expression}", "if p != p:", f"    p = {again}"]
    test = " and ".join(f"type({names[i]}) is {code.bind(np.float64)}" for i in guarded)
    return [f"p = {expression} if {test} else {call}", "if p != p:", f"    p = {again}"]


def _folded(code, partial, y, vals):
    """The value of ``partial`` where it reads only constants of the block (``u /= 9.0``'s
    ``1 / 9.0``): the same function of the same numbers on every call, so computed once, here.
    None where it reads a value of the program, or where computing it raises a floating-point
    event, which the replay's reverse pass must hear on every call as tracing's does."""
    if y != "None":
        return None
    names = vals.split(", ")
    if not all(name == "None" or code.constant(name) is not None for name in names):
        return None
    operands = [None if name == "None" else code.constant(name) for name in names]
    try:
        with np.errstate(all="raise"):
            value = partial(None, *operands)
    except (FloatingPointError, ArithmeticError):
        return None
    return value if isinstance(value, (float, np.float64)) else None


def _as_operand(number, dtype):
    """A read-only 0-d array that NumPy takes in place of the Python or NumPy number ``number``
    beside arrays of the float dtype ``dtype`` (a result of that dtype), in the same loop on
    the same numbers, at half the cost of a Python number's call: a Python number (which
    NumPy converts to ``dtype``) that ``dtype`` holds exactly, or NumPy's float64 as its own
    0-d array; else None."""
    kind = type(number)
    if kind is np.float64:
        array = np.array(number)
    elif kind is float or kind is int:
        if kind is float and not math.isfinite(number):
            return None
        try:
            if dtype == np.float64:  # (which holds any Python float, and raises no event)
                array = np.array(number, dtype)
            else:
                with np.errstate(all="ignore"):  # (a number past the dtype's range: inf)
                    array = np.array(number, dtype)
        except OverflowError:  # (an int past any float's)
            return None
        if array.item() != number:
            return None
    else:
        return None
    array.flags.writeable = False
    return array


def _finite_nonzero(number):
    """Whether ``number`` is a Python or NumPy float64 number (a partial folded by
    ``_folded``: ``u /= 9.0``'s ``1 / 9.0``), or an int, that is finite and not zero."""
    return type(number) in (float, int, np.float64) and math.isfinite(number) and number != 0


def _stands_for_scalar(x):
    """``arraylike._stands_for_scalar_operand`` of a value of a replay: a Python or NumPy
    number, or a read-only 0-d array of its own."""
    if type(x) is np.ndarray:
        return x.ndim == 0 and x.base is None and not x.flags.writeable
    return isinstance(x, (int, float, complex, np.generic)) and not isinstance(x, bool)


INFIX = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/"}
"""The operators a :class:`Pure` step's line in a block writes as Python's own."""


_COMPLEX_SCALARS = frozenset((np.complex128, np.complex64, np.clongdouble))


def _as_traced(value):
    """``value`` as tracing holds it for an operation's partials: NumPy's complex scalar, which
    a replay holds for a 0-d value, as the 0-d array tracing holds. NumPy's scalar math
    multiplies complex scalars otherwise than its loops do 0-d arrays (without fused
    multiply-adds), and the partials (``-(y * y)``, np.reciprocal's) multiply with Python's
    operators. (A Python complex number stays one: its weak type promotes as tracing's.)"""
    return np.array(value) if type(value) in _COMPLEX_SCALARS else value


def _on_scalars(operation, traced, *values):
    """``operation`` (``*``, ``**``) of NumPy's scalars ``values`` (0-d arrays as the scalars
    they stand for): their own math, as the engine took the value (``arraylike.put_right``).
    The values of the program (``traced``, per value) are NumPy's scalars there, also those a
    replay holds as Python's numbers (``Pure.weak``): ``(-2.0) ** 0.5`` is Python's complex
    number, NumPy's NaN. (Where the engine took Python's arithmetic, ``operation`` takes them
    back to Python's numbers: ``arraylike._on_pythons_numbers``.)"""
    return operation(*(v[()] if type(v) is np.ndarray else
                       np.float64(v) if t and type(v) is float else
                       np.complex128(v) if t and type(v) is complex else v
                       for v, t in zip(values, traced, strict=True)))


class ElementwiseWrite:
    """An elementwise write into a traced array (``out=``, an augmented assignment, an
    assignment to a region): the engine's own :class:`operations.WritePlan` run on the call's
    values, which decides afresh how the overwritten bytes will be put back; or, where the
    tape copies them whatever the operands (``Tape.copied``), the write and tracing's record
    of it, an ``inplace.SavedWrite`` or, for an assignment to one element of a NumPy array,
    an ``elementwise.ElementWrite`` (:meth:`saved_write`), done here with no question asked
    twice."""

    __slots__ = ("plan", "ufunc", "args", "kwargs", "target", "rule", "reads", "apart",
                 "traced", "state", "inputs", "written", "buffer", "key", "whole", "args_of",
                 "lean", "cotangents", "later", "unplanned", "operands", "element", "saved",
                 "chained", "unseen")

    def __init__(self, plan, args, target, apart, record, key, whole, element, unseen=False):
        # The write's decisions, those tracing made and handed over (``Recorder.written``):
        # where the target is among the operands, whether an inverse is on offer (none where
        # tracing withheld it), what the record keeps; and ``apart``: no other operand
        # overlaps the target (so the inverse may run)
        self.plan = plan
        self.ufunc, self.kwargs, self.rule, self.reads = (  # (the plan's, at hand)
            plan.ufunc, plan.kwargs, plan.rule, plan.reads)
        self.args = args
        self.args_of = None  # prepare(), before the first replay
        self.target = target
        self.apart = apart
        self.traced = record.pullback is not None
        self.state = None if record.state is None else record.state[:2]  # (rule, positions)
        self.inputs = _places(record.inputs)
        self.written = record.written
        self.buffer = record.written.buffer
        self.key = key
        self.whole = whole
        # an assignment to one element of a NumPy array (the kind of the program's values is
        # the same on every call: ``signature``), whose record is an ElementWrite
        self.element = element and self.rule is ASSIGNMENT
        self.later = None  # the values its record recomputes in the reverse pass (Recomputed)
        # Tracing saved what the write overwrote, and would recompute an operand its inverse
        # reads in the reverse pass: a replay that inverts it cannot tell how (GuardFailed)
        self.unplanned = False
        # Under a memory budget: whether tracing saved (or rebuilt) what the write overwrote,
        # which a replay must decide too (else its chains would take other writes); and where
        # tracing rebuilt it, how the replay's chain of its buffer takes it (:class:`Chained`)
        self.saved = None
        self.chained = None
        # Nobody outside the differentiation saw the target when the write was recorded
        # (``inplace.unseen``): each call may then leave the write undone where nothing reads
        # what it overwrites (``inplace.unread``, asked of this call's records): prepare()
        # makes it the recorded buffer, which those records name, or None
        self.unseen = True if unseen else None

    def prepare(self):
        self.args_of = resolver(self.args)
        if self.unseen is True:  # (not where the undo decided must be the recorded call's:
            # ``decided``)
            self.unseen = self.buffer if not self.unplanned and self.saved is None \
                and self.chained is None else None
        rule, invertible = self.rule, self.plan.invertible
        # Where the write's bytes are copied (``Tape.copied``), its record is a SavedWrite
        # (unless they are rebuilt: a chain's)
        self.lean = self.plan.saves and self.chained is None
        # and in a block, its pullback as lines of the block's own where it is a small
        # elementwise one (``_lean_cotangents``; None: the step's ``back``)
        written = self.written
        self.cotangents = None
        if self.lean and self.traced and written.dtype.kind == "f" and short(written):
            # (the cotangent a write takes is an array, a 0-d one for an element)
            self.cotangents = _lean_inputs(rule, self.state[1], self.inputs, written,
                                           scalar=False)
        # The slots of the operands whose cotangents a block may hold in locals (``with_blocks``):
        # where the write is copied on every call (no inverse: an assignment), its lines are
        # all there is of it, in both passes, and hand the cotangent over as they take it
        # Where it may be inverted (u[1:-1] += ...), its record is the engine's on some calls,
        # whose cotangent the lines take out of the dictionary: for one operand, read once
        self.operands = ()
        if self.cotangents is None or not all(
                place.shape != () for *_, place, _, _ in self.cotangents):
            pass
        elif not invertible:
            self.operands = tuple(a.index for a in self.args
                                  if type(a) is Slot and a.index != self.target)
        else:
            held = [self.args[i] for i, *_, place, _, _ in self.cotangents
                    if type(place) is Buffer]
            if len(held) == 1 and type(held[0]) is Slot and held[0].index != self.target \
                    and sum(a is held[0] or type(a) is Slot and a.index == held[0].index
                            for a in self.args) == 1:
                self.operands = (held[0].index,)

    def __call__(self, values, tape):
        ufunc = self.ufunc
        vals = self.args_of(values)
        target = values[self.target]
        if self.lean and tape.copied(self.plan.invertible, target.nbytes, self.key, self.whole):
            if self.element:  # (an assignment, np.positive, raises nothing)
                saved, raised = ElementWrite.write(tape, self.key, ufunc, vals, target), None
            else:
                saved, raised = SavedWrite.write(tape, self.key, ufunc, vals, target)
            tape.records.append(self.saved_write(vals, target, saved))
            if raised is not None:
                raise raised
            return
        # The undo of a write into all of a large temporary finds it then, as tracing's does
        # (``inplace._finder``): it alone does not keep it alive, and does nothing if nothing
        # else does (nothing reads it: tracing lets it go, ``Recomputation.finish``)
        find = weakref.ref(target) if self.whole and target.base is None \
            and not small(target) else None
        destination = Destination(target, self.key, self.whole, self.written, find,
                                  unseen=self.unseen)
        chained = self.chained
        rebuilt = None if chained is None else chained.undo(values)
        record = self.plan.run(tape, destination, self.inputs, vals, self.apart_now,
                               named=self.inputs, rebuilt=rebuilt,
                               decided=self.decided if self.unplanned or self.saved is not None
                               else None)
        if rebuilt is not None:
            chained.wrote(rebuilt, vals, self.plan.redo)
        if self.later is not None:
            tape.records[-1] = Recomputed.later(self.later, record, values)

    def decided(self, kinds):
        """The undo decided for the write is the recorded call's, where it must be: tracing
        saved what the write overwrote, and would recompute an operand its inverse reads in the
        reverse pass (``unplanned``: a replay that inverts it cannot tell how); under a memory
        budget, tracing saved or rebuilt it, or undid it otherwise (``saved``: the writes the
        chains of the recorded call took, and only those, are taken by the replay's)."""
        saved = kinds[0] == "checkpoint" or kinds[0] == "rebuild"
        if self.unplanned and not saved or self.saved is not None and saved != self.saved:
            raise GuardFailed

    def apart_now(self):
        """No other operand over the target's memory (as recorded: the program's values
        share memory as they did then)."""
        return self.apart

    def back(self, shadows, vals, saved, record=None):
        """The step's reverse where a block's reverse pass finishes one step at a time
        (``Block.deopt``), from what the block kept of it: the engine's ``record`` where the
        block did not save the write, else its :meth:`saved_write` (``saved``: the target and
        the copy)."""
        Tape.reverse(self.saved_write(vals, saved[0], saved.pop()) if record is None else record,
                     shadows)

    def saved_write(self, vals, target, saved):
        """The record of the write where its bytes were ``saved`` (``inplace.SavedWrite``, as
        tracing's): it keeps what its partials read of the operands ``vals``, no more; an
        assignment to one element of a NumPy array, tracing's record of it
        (``elementwise.ElementWrite``), which keeps none."""
        if self.element:
            return ElementWrite(self.plan.primitive, self.inputs, self.state, self.written,
                                target, saved)
        return SavedWrite(self.plan.primitive, self.inputs, self.state, self.written,
                          read_by_partials(vals, self.reads) if self.traced else None, target,
                          None, saved)

    def emit(self, code, k):
        """As :meth:`Pure.emit`: the lean write (:meth:`__call__`) where the tape copies its
        bytes, else the step itself, its record kept for the reverse pass."""
        vals = [code.value(a.index) if type(a) is Slot else code.bind(a) for a in self.args]
        target = code.keep(code.value(self.target))
        saved = code.keep(f"saved{k}")
        read = [name if self.traced and (self.reads is None or i in self.reads) else None
                for i, name in enumerate(vals)]  # what the pullback reads, no more
        for name in read:
            if name is not None and name[0] == "v":
                code.keep(name)
        key = code.bind(self.key, "key")
        if self.element:  # (its record's lines: :meth:`saved_write`)
            lean = ElementWrite.write_lines(target, "()", vals[0], saved,
                                            code.before_write(self.key), code.bind(self.ufunc),
                                            exact_as_scalar(self.written.dtype))
            flag, first = None, False
        else:
            lean = SavedWrite.write_lines(code.bind(self.ufunc), vals, target, saved,
                                          code.before_write(self.key))
            # where no reverse line reads the region between the first write of a run and
            # this one, the copy may go (``Code.rewrite``): the first's is put back
            flag, first = code.rewrite(self.written, self._rewritable(), k)
            if first:
                lean.append(f"{flag} = {code.bind(unobserved)}(tape)")
            elif flag is not None:
                lean[0] = f"{saved} = None if {flag} else {target}.copy()"
        if not self.plan.invertible and self.lean:  # always copied (Tape.copied): no record
            if self.whole:
                code.forward.append(f"tape.copied(False, {target}.nbytes, {key}, True)")
            code.forward += lean
            code.records.append((read, [target, saved], None))
            return
        record = code.keep(f"r{k}")
        # (the engine's write reads its operands from the program's values: those only the
        # block reads are its locals, stored for it)
        stored = [f"    values[{code.bind(a.index, 'slot')}] = {name}"
                  for a, name, place in zip(self.args, vals, self.inputs)
                  if type(a) is Slot and a.index in self.operands and type(place) is Buffer
                  and place.key in code.internal]
        code.forward += [
            f"if tape.copied({self.plan.invertible}, {target}.nbytes, {key}, {self.whole}):",
            *indent(lean), f"    {record} = None", "else:", *stored,
            f"    {code.bind(self)}(values, tape)",
            f"    {record} = tape.records.pop()", f"    {saved} = None",
            *([f"    {flag} = False"] if first else [])]
        code.records.append((read, [target, saved], record))

    def _rewritable(self):
        """Whether the write may be one of a run of writes into its region whose later copies
        go (``blocks.Code.rewrite``): it is copied in the lines of a block (:meth:`emit`), and
        its reverse lines read nothing of its buffer's memory: no operand over the buffer but
        the target, which its pullback does not read, and no value recomputed."""
        if self.element or not self.lean or self.later is not None or self.unplanned \
                or self.saved is not None or self.chained is not None:
            return False
        for i, (a, place) in enumerate(zip(self.args, self.inputs, strict=True)):
            if place is None:
                if type(a) is Slot or not held_number(a):
                    return False
            elif (place if type(place) is Buffer else place.buffer) is self.buffer and (
                    type(a) is not Slot or a.index != self.target
                    or self.traced and (self.reads is None or i in self.reads)):
                return False
        return True

    @property
    def reverse_reads(self):
        """The keys of the buffers, other than its target's (``blocks.Code.rewrite``), whose
        memory its reverse pass may read: its operands' (an inverse's too); None: any."""
        keys = operand_buffers(self.args, self.inputs)
        if keys is not None:
            keys.discard(self.buffer.key)
        return keys

    def emit_back(self, code, k):
        """As :meth:`Pure.emit_back`: :meth:`back` unrolled, where it is lean."""
        vals, (target, saved), record = code.records[k]
        vals = ", ".join("None" if name is None else name for name in vals)
        written = self.written
        if written.whole or not short(written):
            # a shadow the write takes whole leaves the dictionary, and a large cotangent's
            # pullback may share shadows: the earlier steps' locals of shadows are looked up
            # again (a small region's is zeroed in place)
            code.shadows.clear()
        take = [f"dy = shadows.take({code.bind(written)})"]
        take = ElementWrite.back_lines(take, target, "()", saved) if self.element \
            else SavedWrite.back_lines(take, code.bind(copy_back), target, saved)
        if k in code.dropped:  # (no copy: the bytes the run's first write saved come back)
            take[-1] = f"if {saved} is not None: {take[-1]}"
        hoisted = []
        span = None if written.whole else flat_slice(written)
        _, flat = code.flat_of(written.buffer, always=False)
        if span is not None and flat is not None:  # a row's, in the flat shadow a local holds
            region = f"{flat}[{code.bind(span)}]"
            take[:1] = [f"dy = {region}.copy()", f"{region} = 0.0"]
        if not self.traced:  # the values written get no gradient
            lean = [*_dropped(code, written, take[:-1]), take[-1]]
        elif record is None and self.operands and any(
                type(place) is Buffer and code.cotangent(place) is not None
                for *_, place, _, _ in self.cotangents):
            # an operand's cotangent is a local (``operands``), which its step takes as known
            # to exist: so the cotangent taken must be an array, which it is where the buffer
            # written has a shadow (else the block finishes one step at a time, from here)
            if span is not None:
                looked_up, flat = code.existing_flat(written.buffer, k)
                region = f"{flat}[{code.bind(span)}]"
                take = [*looked_up, f"dy = {region}.copy()", f"{region} = 0.0", take[-1]]
            else:
                take[:0] = [f"if {code.key(written.buffer)} not in entries:",
                            f"    {code.deopt(k, 'None')}"]
            lean = [*take, *_lean_cotangents(code, self.cotangents, written, vals, "None",
                                             scalar=False)]
        elif record is not None and self.operands and any(
                type(place) is Buffer and code.cotangent(place) is not None
                for *_, place, _, _ in self.cotangents):
            return self._back_into_local(code, k, vals, target, saved, record, span, take)
        elif self.cotangents is None:
            lean = [f"{code.bind(self)}.saved_write([{vals}], {target}, {saved})"
                    ".reverse(shadows)"]
        elif span is not None:
            # a row's: its cotangent taken from the flat shadow, a local from here on (made
            # before the write's undo is chosen, both ways finding it), and known to exist
            # (else the block finishes one step at a time, from here)
            hoisted, flat = code.existing_flat(written.buffer, k)
            region = f"{flat}[{code.bind(span)}]"
            lean = _added_back([f"dy = {region}.copy()", f"{region} = 0.0", take[-1],
                                *_lean_cotangents(code, self.cotangents, written, vals, "None",
                                                  scalar=False, always=record is None)],
                               region, written.dtype, code)
        else:
            lean = [*take, "if dy is not None:",
                    *indent(_lean_cotangents(code, self.cotangents, written, vals, "None",
                                             scalar=False, always=False))]
        if record is None:  # copied on every call (emit)
            return [*hoisted, *lean]
        return [*hoisted, f"if {record} is None:", *indent(lean), "else:",
                f"    {code.bind(Tape.reverse)}({record}, shadows)"]


    def _back_into_local(self, code, k, vals, target, saved, record, span, take):
        """:meth:`emit_back` where the write may be inverted and its one operand's cotangent is
        a local (``operands``): the lean lines hand it over as they take it; the engine's
        record, reversed on the calls that inverted the write, adds it into the shadows'
        dictionary (into the local, handed over first where it holds one already, as the
        entry the engine would add into), whence it is taken back. Where no cotangent
        reached the values written, the block finishes one step at a time."""
        written = self.written
        buffer = next(place for *_, place, _, _ in self.cotangents if type(place) is Buffer)
        local, key = code.cotangent(buffer), code.key(buffer)
        live, shared = dict(code.live), code.shares(buffer)
        hoisted = []
        if span is not None:
            hoisted, flat = code.existing_flat(written.buffer, k)
            region = f"{flat}[{code.bind(span)}]"
            take = [f"dy = {region}.copy()", f"{region} = 0.0", take[-1]]
        else:
            take = [f"if {code.key(written.buffer)} not in entries:",
                    f"    {code.deopt(k, 'None')}", *take]
        lean = [*take, *_lean_cotangents(code, self.cotangents, written, vals, "None",
                                         scalar=False, always=False)]
        if span is not None:
            lean = _added_back(lean, region, written.dtype, code)
        handed = []
        if buffer.key in live:
            copy = ".copy()" if shared else ""
            handed = [f"entries[{key}] = [{code.bind(buffer)}, {local}{copy}, None, None]"]
        after, code.live = code.live, {key_: b for key_, b in live.items() if key_ != buffer.key}
        deopt = code.deopt(k - 1, "None")  # (this step reversed: the rest, one at a time)
        code.live = after
        general = [*handed, f"{code.bind(Tape.reverse)}({record}, shadows)",
                   f"x = pop({key}, None)",
                   "if x is None or x[3] is not None or not x[1].flags.writeable:",
                   "    if x is not None:", f"        entries[{key}] = x", f"    {deopt}",
                   f"{local} = x[1]"]
        return [*hoisted, f"if {record} is None:", *indent(lean), "else:", *indent(general)]


def _added_back(lines, region, dtype, code):
    """A write's reverse ``lines`` where they take its cotangent out of a ``region`` of a flat
    shadow, zero it, put the values written back, and add the cotangent back into it (the
    cotangent of the values the write read there: ``u[1:-1] += v``'s): the cotangent copied,
    the values put back, and 0.0 added into the region, which holds it still. Of a float or
    complex dtype, 0 + dy and dy + 0 are the same bits (-0.0 becomes 0.0 either way, and a NaN
    is passed on as it is) with the same floating-point events, and putting the values back
    touches no shadow."""
    taken = [f"dy = {region}.copy()", f"{region} = 0.0"]
    if dtype.kind not in "fc" or lines[:2] != taken or len(lines) < 5 \
            or not code.alike(lines[3], f"view = {region}") or lines[4] != "view += dy":
        return lines
    zero = code.bind(_as_operand(0.0, dtype))  # (0.0 as the same operand: _as_operand)
    return [f"view = {region}", "dy = view.copy()", lines[2], f"view += {zero}", *lines[5:]]


class ConstantWrite:
    """A write of constants into an array allocated in the function: ``write(target,
    *args)``; if a record read the array before, its bytes are saved first
    (``inplace.record_constant_write``), at ``key`` within it (None: all of it)."""

    __slots__ = ("write", "target", "args", "saved", "key")

    def __init__(self, write, target, args, saved, key):
        self.write = write
        self.target = target
        self.args = args
        self.saved = saved  # the written place, if the bytes are saved
        self.key = key

    def __call__(self, values, tape):
        target = values[self.target]
        args = resolve(self.args, values)
        if self.saved is None:
            self.write(target, *args)
            return
        record_constant_write(None, Destination(target, None, False, self.saved), target,
                              resolve(self.key, values), lambda: self.write(target, *args), tape)


class Gather:
    """``x[key]`` that copies (an advanced index, one element): ``tracing.getitem``'s record."""

    __slots__ = ("source", "key", "out", "place", "buffer", "repeats")

    writes_nothing = True  # (into memory: ``blocks.Code.elements``)
    reverse_reads: frozenset = frozenset()  # (it adds cotangents, at the key it kept)

    def __init__(self, source, key, out, record):
        self.source = source
        self.key = key
        self.out = out
        self.place = record.inputs[0]
        self.buffer = record.outputs[0]  # its shape is a guard (``Out``): x[x > 0]
        self.repeats = record.state

    def __call__(self, values, tape):
        key = resolve(self.key, values)
        y = values[self.source][key]
        if y.shape != self.buffer.shape:
            raise GuardFailed
        values[self.out] = y
        if not self.lean:
            tape.records.append(Gathered(operator.getitem, (self.place, key), None, self.buffer,
                                         None, self.repeats))
        else:
            tape.records.append((self, key, None))

    def back(self, shadows, key, _):
        """``Gathered.pullback``: each element's cotangent added back where it came from,
        each repeat its share (``Shadows.add_at``)."""
        _gathered_back(shadows, shadows.pop(self.buffer), (self.place, key), self.repeats)

    @property
    def lean(self):
        """Whether the step records itself (:meth:`back`), not the engine's record (and a
        block may compile it: not for complex values, whose cotangents a block would hold as
        NumPy's scalars, nor for one element taken from where elements share memory, whose
        cotangent ``Shadows.add_at`` takes as an array)."""
        return self.buffer.dtype.kind != "c" and not (self.repeats and self.buffer.shape == ())

    def emit(self, code, k):
        """As :meth:`Pure.emit`: this step's lines in a :class:`blocks.Block`."""
        computed = any(within(self.key, Slot))
        if computed:
            key = code.keep(f"key{k}")
            code.forward.append(f"{key} = {code.bind(resolve)}({code.bind(self.key)}, values)")
        else:
            key = code.bind(self.key)
        source = code.value(self.source)
        y = code.made(self.out, f"{source}[{key}]", self.buffer.key in code.internal)
        if computed:  # (a constant key gives the recorded shape: _shape_guard)
            code.forward += _shape_guard(y, self.buffer.shape, code)
        elif self.buffer.shape == ():  # one element, which a write of it may keep
            code.elements[(source, code.read_as(key))] = y
        code.records.append((key, None))

    def emit_back(self, code, k):
        """As :meth:`Pure.emit_back`."""
        key = code.records[k][0]
        if self.buffer.key in code.internal:
            dy = code.take(self.buffer)
            if dy is None:
                return []
            if self.repeats:  # (an array: lean)
                return [f"shadows.add_at({code.bind(self.place)}, {key}, {dy})"]
            element = _element_at(self.place, code.constant(key))
            if scalar_cotangents(self.buffer) and element is not None:
                # (the flat shadow, where an integer finds the element at half the cost)
                lines, flat = code.flat_of(self.place, always=True)
                element = code.bind(element)
                # (where a write's reverse took the element's cotangent: stored over it)
                back = code.added_back(flat, element, dy)
                return [*lines, *(back if back is not None else
                                  code.plus(f"{flat}[{element}]", dy, in_place=False))]
            lines, shadow = code.shadow(self.place, always=True)
            if scalar_cotangents(self.buffer):
                return [*lines, *code.plus(f"{shadow}[{key}]", dy, in_place=False)]
            return [*lines, f"{shadow}[{key}] += {dy}"]
        _, shadow = code.shadow(self.place, always=False)
        return [f"dy = shadows.pop({code.bind(self.buffer)})", "if dy is not None:",
                f"    shadows.add_at({code.bind(self.place)}, {key}, dy)" if self.repeats
                else f"    {shadow}[{key}] += dy"]


def _element_at(buffer, key):
    """Where in ``buffer``'s flat shadow (``Shadows.flat``) the element ``key`` of the whole
    buffer is (a position, as ``Shadows._view`` maps it), if ``key`` is a tuple of one integer
    per dimension, or one integer of a vector (``u[i]``, which NumPy reads as ``u[i,]``);
    else None."""
    if type(key) is int:
        key = (key,)
    if type(buffer) is not Buffer or buffer.device is not None or type(key) is not tuple \
            or len(key) != len(buffer.shape) or not all(type(i) is int for i in key):
        return None
    at = buffer.offset
    for i, n, stride in zip(key, buffer.shape, buffer.strides):
        if not -n <= i < n:
            return None
        at += i % n * stride
    position, rest = divmod(at, buffer.dtype.itemsize)
    return None if rest else position


class SetElement:
    """``x[i, j] = v``: one element of a float64 array, ``v`` a float64 scalar the program
    computed, or a number (a constant: ``u[0] = 0.0``). Recorded as a view (:class:`Call`)
    and an assignment into it (:class:`ElementwiseWrite` with the engine's ``ASSIGNMENT``),
    which :func:`with_blocks` fuses into this step when a run of steps is compiled: a member
    of a block alone, which runs its lines (``emit``), never the step itself. Its record is
    tracing's, an ``elementwise.ElementWrite``, whose lines the block runs: the element saved
    and put back in the reverse pass (an assignment has no inverse, under either policy), and
    its cotangent taken from the array's and handed to ``v``, or dropped for a constant."""

    __slots__ = ("source", "index", "value", "place", "written", "key", "buffer", "out",
                 "constant", "state")

    def __init__(self, source, index, value, place, written, key, state, constant=None):
        self.source = source  # the slot of the array
        self.index = index  # a tuple of integers
        self.value = value  # the slot of v; None for a constant
        self.place = place  # v's buffer; None for a constant
        self.written = written  # the element's place
        self.key = key  # the array's buffer key
        self.state = state  # the rule's plan (as the record's); None for a constant
        self.constant = constant  # the number assigned, where ``value`` is None
        self.buffer = self.out = None  # it makes no value

    @classmethod
    def fused(cls, view, write):
        """The step that does ``view`` and then ``write``, or None if they are not that."""
        if type(view) is not Call or view.function is not operator.getitem or view.kwargs \
                or type(view.outputs) is not Out or view.outputs.shape != () \
                or view.outputs.convert is not _as_is or type(view.args[0]) is not Slot:
            return None
        index = view.args[1]
        index = tuple(i for i in (index if type(index) is tuple else (index,))
                      if i is not Ellipsis)
        if not all(type(i) is int for i in index):
            return None
        if type(write) is not ElementwiseWrite or write.rule is not ASSIGNMENT \
                or write.target != view.outputs.slot or write.kwargs or write.saved is not None:
            return None  # (under a memory budget: the undo is the chain's, the write the plan's)
        written, value = write.written, write.args[0]
        if written.whole or written.shape != () or written.dtype != np.float64:
            return None
        if not write.traced and _float64_exactly(value):  # a number: as np.positive writes it
            return cls(view.args[0].index, index, None, None, written, write.key, None, value)
        if not write.traced or type(value) is not Slot or type(write.inputs[0]) is not Buffer \
                or not scalar_cotangents(write.inputs[0]):
            return None
        return cls(view.args[0].index, index, value.index, write.inputs[0], written, write.key,
                   write.state)

    def back(self, shadows, array, old):
        """The step's reverse where a block's reverse pass finishes one step at a time
        (``Block.deopt``): its record's, made of what the block kept (the array, the element
        before the write)."""
        ElementWrite(assign, (self.place,), self.state, self.written,
                     array[self.index + (Ellipsis,)], old).reverse(shadows)

    def emit(self, code, k):
        """As :meth:`Pure.emit`: its record's lines."""
        array = code.keep(code.value(self.source))
        old = code.keep(f"old{k}")
        value = code.bind(self.constant) if self.value is None else code.value(self.value)
        index = code.bind(self.index)
        lines = ElementWrite.write_lines(array, index, value, old, code.before_write(self.key))
        read = code.element(array, index)
        if read is not None and lines[0] == f"{old} = {array}[{index}]":
            lines[0] = f"{old} = {read}"  # (the same element, the same bits: read already)
        code.forward += lines
        code.records.append((array, old))

    def emit_back(self, code, k):
        """As :meth:`Pure.emit_back`: its record's lines, the cotangent taken as the block
        holds it."""
        array, old = code.records[k]
        index = code.bind(self.index)
        take = f"dy = shadows.take({code.bind(self.written)})"
        if self.value is None:  # a constant: the element's cotangent dropped
            return ElementWrite.back_lines(_dropped(code, self.written, [take]), array, index,
                                           old)
        if code.cotangent(self.place) is None:
            return [*ElementWrite.back_lines([take], array, index, old), "if dy is not None:",
                    f"    shadows.add({code.bind(self.place)}, dy, True)"]
        # v's cotangent is a local, known to hold a scalar if the array has a shadow
        buffer = self.written.buffer
        if buffer.dtype != np.float64:  # (a complex array's real part)
            return [*ElementWrite.back_lines(
                        [f"x = get({code.bind(self.key, 'key')})", "if x is None:",
                         f"    {code.deopt(k, 'None')}", take], array, index, old),
                    *code.add(self.place, "dy[()]")]
        # the element read and zeroed where it lies
        lines, flat = code.existing_flat(buffer, k)
        element = code.bind(self.written.offset // 8)
        return [*ElementWrite.back_lines([*lines, f"dy = {flat}[{element}]",
                                          code.took(flat, element)], array, index, old),
                *code.add(self.place, "dy")]


def _float64_exactly(number):
    """Whether NumPy's assignment of ``number`` into a float64 array writes the bits
    ``np.positive(number, out=...)`` writes there (the engine's assignment): a float, or an
    integer a float64 holds exactly."""
    kind = type(number)
    return kind is float or kind is np.float64 or kind is int and abs(number) <= 1 << 53


def _dropped(code, written, take):
    """Lines that drop the cotangent of the values a write left at ``written``, which get no
    gradient, as the lines ``take`` do (``Shadows.take``); one float64 element of a float64
    buffer is zeroed where it lies: in the flat shadow a local holds, else in its buffer's
    entry's (a shadow other buffers share: by ``take``)."""
    if written.shape != () or written.dtype != np.float64 \
            or written.buffer.dtype != np.float64:  # (a complex array's real part, say)
        return take
    _, flat = code.flat_of(written.buffer, always=False)
    if flat is not None:
        return [f"{flat}[{code.bind(written.offset // 8)}] = 0.0"]
    return [f"x = get({code.key(written.buffer)})", "if x is not None:",
            "    if x[3] is not None:", *indent(take, 2), "    else:",
            *indent(_take_element(code, written, read=False), 2)]


def _take_element(code, written, read):
    """Lines that do what ``Shadows.take`` does to ``written``, one float64 element of a
    float64 buffer, where ``x`` is its buffer's entry in the shadows and the shadow is not
    shared: ``dy`` its cotangent (if ``read``), then zero there, in the shadow's flat view as
    ``Shadows._view`` makes it."""
    element = code.bind(written.offset // 8)
    return ["f = x[2]", "if f is None:", "    f = x[2] = x[1].reshape(-1)",
            *([f"dy = f[{element}]"] if read else []), f"f[{element}] = 0.0"]


def _offer(rule):
    """What ``rule`` offers a compiled block (``rule.specialized``), or None."""
    return getattr(getattr(rule, "__wrapped__", rule), "specialized", None)


class Function:
    """A function with a pure rule: the rule again (``y, back = rule(...)``), and the engine's
    record of ``back`` (``operations.function_pullback``)."""

    __slots__ = ("rule", "args", "kwargs", "outputs", "primals", "primitive", "settings",
                 "created", "places", "buffers", "multiple", "args_of", "kwargs_of", "adopts",
                 "lean", "dims", "special", "scalar_math", "joined")

    writes_nothing = Pure.writes_nothing

    def __init__(self, rule, args, kwargs, outputs, traced, record, dims=None):
        self.rule = rule
        self.args = args
        self.kwargs = kwargs
        self.args_of = self.kwargs_of = None  # prepare(), before the first replay
        self.outputs = outputs
        self.primals = traced  # the slots of the traced arrays among the arguments
        self.primitive = record.primitive
        self.settings = record.settings
        self.created = record.outputs
        if type(record) is Product:  # the rule run as its plain functions, every argument
            # traced (``operations._fast_function``): the general path's record would name
            # the same places and output, with the ids of the operands' memory
            self.places, primals = list(record.inputs), True
            self.buffers, self.multiple = [record.output], False
        else:
            _, self.places, primals, self.buffers, self.multiple = record.state
        self.adopts = primals is not None  # a user's rule's cotangents are never adopted
        # A block writes its lines (``emit``) where it needs none of ``__call__``'s
        # conversions but one: one real array made from real operands, each a traced value of
        # the program (a 0-d one handed over as the array it stands for), a constant array of
        # the program, or a setting (``_arrays`` leaves those as they are)
        out, places = self.outputs, self.places
        self.lean = bool(
            type(out) is Out and out.convert is as_fresh and not self.multiple
            and self.created[0] is not None and self.created[0].dtype.kind == "f"
            and not any(within(kwargs, Slot)) and len(places) == len(args)
            and all(p is None or type(p) in (Buffer, Place) and p.dtype.kind == "f"
                    and not p.buffer.weak if type(a) is Slot else
                    p is None and _passed_as_is(a) for a, p in zip(args, places)))
        self.dims = dims  # the arguments' dimensions as recorded, where the rule may use them
        self.special = self._specialized()
        self.joined = self._joined()
        self.scalar_math = None  # NumPy's scalar math, where it made the value (Recorder)

    def prepare(self):
        Call.prepare(self)
        if self.lean and self.buffer.weak:  # (known once the recording is over) a Python
            self.lean, self.special = False, None  # float, as _store holds it: as it is
        if self.joined is not None and any(place is not None and place.buffer.weak
                                           for place in self.places[0]):
            self.joined = None  # (Python's floats: as _arrays makes them arrays)

    def __call__(self, values, tape):
        args = _arrays(self.args_of(values), self.args, self.primals)
        y, back = self.rule(*args, **self.kwargs_of(values))
        if complex_among(args) or complex_among(y if isinstance(y, (tuple, list)) else (y,)):
            back = complex_back(str(self.primitive), self.rule, back)  # as apply_function
        if self.scalar_math is not None:  # abs() of a complex scalar (arraylike.put_right)
            y = np.asarray(self.scalar_math(*(np.asarray(a)[()] for a in args)), y.dtype)
        _store(self.outputs, y, values)
        # (a tuple: ``add_cotangents`` copies it into a set of its own; the record holds it
        # until the reverse pass, and most rules have one or two operands)
        primals = tuple([id(owner(values[slot])) for slot in self.primals  # (not Python's
                         if type(values[slot]) not in (float, complex)]) \
            if self.adopts else None  # numbers)
        tape.records.append(Record(self.primitive, (), self.settings, self.created, None,
                                   (back, self.places, primals, self.buffers, self.multiple),
                                   function_pullback))

    def emit(self, code, k):
        """Its lines in a :class:`blocks.Block` where it is ``lean``: the rule, its ``back``
        kept for the reverse pass, and the output stored as ``_store`` stores it."""
        if self.joined is not None:
            return self._emit_joined(code)
        args = [code.value(a.index) if type(a) is Slot else code.bind(a) for a in self.args]
        for i, (a, place, name) in enumerate(zip(self.args, self.places, args)):
            if type(a) is Slot and place is None:  # a constant of the program: an array as
                # recorded (a number or a complex array would take __call__'s conversions),
                # of the dimensions the rule's plain functions were chosen for
                ndim = "" if self.special is None else f" or {name}.ndim != {self.dims[i]}"
                code.forward += [  # (a NumPy scalar it computed, as itself: _arrays)
                    f"if type({name}) is not ndarray and not isinstance({name}, "
                    f"{code.bind(np.generic)}) or {name}.dtype.kind == 'c'{ndim}:",
                    "    raise GuardFailed"]
            elif type(a) is not Slot and self.special is not None:  # an array bound as it
                # was recorded, whose dimensions (``.shape =`` can change them) chose the
                # rule's plain functions
                code.forward += [f"if {name}.ndim != {self.dims[i]}:", "    raise GuardFailed"]
            elif type(a) is Slot and place.shape == ():  # NumPy's scalar, as the 0-d array
                args[i] = f"{code.bind(fresh_value)}({name})"  # it stands for (_arrays)
                if self.special is not None:  # (a local, which back reads: kept)
                    code.forward.append(f"a{k}_{i} = {args[i]}")
                    args[i] = f"a{k}_{i}"
        special = self.special
        if special is not None:  # the rule's plain functions: its operands kept for back,
            # or what back reads of them, where the rule says (a sum's: not the operand)
            code.forward.append(f"y = {code.bind(special[0])}({', '.join(args)})")
            if len(special) > 2:
                held = code.keep(f"held{k}")
                code.forward.append(f"{held} = {code.bind(special[2])}({', '.join(args)})")
                code.records.append((held,))
            else:
                code.records.append(tuple(code.keep(name) if type(a) is Slot else name
                                          for a, name in zip(self.args, args)))
        else:
            kwargs = f", **{code.bind(self.kwargs)}" if self.kwargs else ""
            back = code.keep(f"back{k}")
            code.forward.append(f"y, {back} = {code.bind(self.rule)}({', '.join(args)}{kwargs})")
            code.records.append((back,))
        made = f"{code.bind(as_fresh)}(y)"
        internal = self.buffer.key in code.internal
        if internal and scalar_cotangents(self.buffer):  # only the block's elementwise steps
            # read it, which take a float64 scalar as NumPy's scalar (as they make them)
            if self.outputs.shape == () and self.outputs.dtype == np.float64:
                # NumPy's float64 scalar has the shape and dtype recorded: guarded otherwise
                code.forward += [f"if type(y) is not {code.bind(np.float64)}:",
                                 *indent([f"y = {made}", *_shape_guard(
                                     "y", self.outputs.shape, code, dtype=self.outputs.dtype)])]
                code.made(self.outputs.slot, "y", internal)
                return
            made = f"y if type(y) is {code.bind(np.float64)} else {made}"
        elif self.outputs.shape != ():  # an array of its own, as_fresh's answer without a call
            made = f"y if type(y) is ndarray and y.base is None else {made}"
        y = code.made(self.outputs.slot, made, internal)
        code.forward += _shape_guard(y, self.outputs.shape, code, dtype=self.outputs.dtype)

    def _joined(self):
        """Where the rule offers ``of_scalars`` (np.stack's: what ``np.array([a, b])`` of
        traced numbers records, and each level of ``np.array([[a, b], [c, d]])``) and the step
        joins float64 values of the program of one shape, traced ones (scalars, or the rows a
        join made) beside constants (``_joined_constant``: the user's numbers), into a float64
        array of its own, without settings: that plain function, which a block's lines call on
        the values as they hold them (NumPy's scalars, or 0-d arrays: the same values), the
        cotangent of each traced one its element of the output's (``_emit_joined``); else
        None."""
        of_scalars = getattr(getattr(self.rule, "__wrapped__", self.rule), "of_scalars", None)
        if of_scalars is None or self.kwargs or len(self.args) != 1 or self.multiple:
            return None
        items, out, places = self.args[0], self.outputs, self.places
        if type(items) not in (list, tuple) or not items or type(out) is not Out \
                or out.convert is not as_fresh or out.shape[:1] != (len(items),) \
                or out.dtype != np.float64 or self.created[0] is None \
                or len(places) != 1 or type(places[0]) not in (list, tuple) \
                or len(places[0]) != len(items) \
                or len(self.primals) != sum(type(a) is Slot for a in items):
            return None
        shape = out.shape[1:]
        if not self.primals or not all(
                type(place) is Buffer and place.shape == shape and place.dtype == np.float64
                if type(a) is Slot else place is None and _joined_constant(a, shape)
                for a, place in zip(items, places[0])):
            return None
        return of_scalars

    def _emit_joined(self, code):
        """:meth:`emit` of a join (``joined``): its one line, the output stored."""
        items = [code.value(a.index) if type(a) is Slot else code.bind(a) for a in self.args[0]]
        code.forward.append(f"y = {code.bind(self.joined)}(({', '.join(items)},))")
        code.records.append(())  # (its reverse pass reads the output's cotangent alone)
        y = code.made(self.outputs.slot, "y", self.buffer.key in code.internal)
        code.forward += _shape_guard(y, self.outputs.shape, code, dtype=self.outputs.dtype)

    def _emit_joined_back(self, code, k):
        """:meth:`emit_back` of a join: each element of the output's cotangent (NumPy's scalar,
        or a row, copied) added into its traced value's cotangent, as ``function_pullback``
        adds the rule's pieces of it (``Code.add``: into a copy where the value has none; a
        local of the block where only its lines read the value). Where the output's cotangent
        is the shadows' and a value's a local, the lines that add into that local must run:
        the block leaves its compiled pass where none reached the output, as ``Pure``'s do."""
        places = self.places[0]
        if self.buffer.key in code.internal:
            dy = code.take(self.buffer)
            if dy is None:  # no cotangent reaches the output
                return []
            lines, level = [], 0
        elif any(place is not None and code.cotangent(place) is not None for place in places):
            dy, level = "dy", 0  # (Code.add's lines take x for their own)
            lines = [f"x = pop({code.key(self.buffer)}, None)",
                     "if x is None or x[3] is not None:", f"    {code.deopt(k, 'x')}",
                     "dy = x[1]"]
        else:
            dy, level = "dy", 1
            lines = [f"dy = shadows.pop({code.bind(self.buffer)})", "if dy is not None:"]
        copy = "" if self.outputs.shape[1:] == () else ".copy()"  # (a row: its own array)
        for i, place in enumerate(places):
            if place is not None:
                lines += indent(code.add(place, f"{dy}[{i}]{copy}"), level)
        return lines

    def _specialized(self):
        """``(forward, back)``, plain functions that compute what the rule and its ``back``
        compute for operands of these dimensions, where the rule offers them
        (``rule.specialized(dims, kwargs)``) and every argument is an array: a value of the
        program (a traced one, or a constant array) or a real array the step holds as
        recorded (a module's), whose dimensions ``emit`` guards; else None.
        ``back(dy, *operands)``, or, where the offer has a third function ``held``,
        ``back(dy, held(*operands))``: the operands need not live until the reverse pass."""
        offer = _offer(self.rule)
        if offer is None or not self.lean or self.dims is None \
                or not all(type(a) is Slot or type(a) is np.ndarray for a in self.args):
            return None
        return offer(self.dims, self.kwargs)

    @property
    def out(self):
        """The slot of the array it makes, where a block compiles it (``lean`` or
        ``joined``)."""
        return self.outputs.slot if self.lean or self.joined is not None else None

    @property
    def buffer(self):
        return self.created[0]

    def emit_back(self, code, k):
        """:meth:`back` unrolled: a region's shadow added into as a view of it. The cotangent
        of the output is a local of the block where only the block's elementwise steps read
        the output; ``back`` takes it as the engine's record hands it over, a 0-d array for a
        float64 scalar's (``blocks.scalar_cotangents``)."""
        if self.joined is not None:
            return self._emit_joined_back(code, k)
        held = code.records[k]
        # The products of a rule's plain back (``special``) of float64 operands are arrays
        # nothing else holds, of their operands' shapes and dtype: one becomes the shadow of
        # a whole short buffer (whose shadow is never shared: ``elementwise._sharing``), or is
        # added into it, as ``Pure``'s lean cotangents are (``Code.add``)
        adopted = self.special is not None and self.buffer.dtype == np.float64 and all(
            place is None or place.dtype == np.float64 for place in self.places)
        # A plain back that says its products as expressions (``lines``) is written out,
        # each product a line; a float64 scalar's cotangent as a 0-d array, the same
        # products, which NumPy computes at half the cost of one with NumPy's scalar
        expressions = getattr(self.special[1], "lines", None) if adopted and len(
            self.special) == 2 else None
        if self.buffer.key in code.internal:
            dy = code.take(self.buffer)
            if dy is None:  # no cotangent reaches the output
                return []
            if expressions is not None:
                lines, level = [], 0
                if scalar_cotangents(self.buffer):
                    lines, dy = [f"d = array({dy})"], "d"
                return [*lines, *self._inline_back(code, expressions, dy, held)]
            if self.special is None and scalar_cotangents(self.buffer):
                dy = f"array({dy})"  # the rule's back takes the 0-d array the engine hands it
            lines, level = [f"g = {self._back_call(code, held, dy)}"], 0
        else:
            lines = [f"dy = shadows.pop({code.bind(self.buffer)})", "if dy is not None:"]
            if expressions is not None:  # (the engine's 0-d array for a scalar's: as back's)
                return [*lines, *indent(self._inline_back(code, expressions, "dy", held,
                                                          always=False))]
            lines.append(f"    g = {self._back_call(code, held, 'dy')}")
            level = 1
        for i, place in enumerate(self.places):
            if place is None:  # a constant's
                continue
            if adopted and type(place) is Buffer and place.c_contiguous and short(place):
                add = code.add(place, f"g{i}")
            elif place.whole or overlapping(place):  # (a plain back's array: its own)
                owned = ", True" if self.special is not None else ""
                add = [f"shadows.add({code.bind(place)}, g{i}{owned})"]
            else:  # (Shadows.add, for a region of elements apart: of a real one, the real
                add = code.add_into(place, f"g{i}", always=False)  # part of a complex g;
                if place.dtype.kind == "f" and self.special is None:  # a plain back's of
                    # real operands, which emit guards, is real)
                    add = [f"g{i} = {code.bind(real_part_if)}({code.bind(place)}, g{i})", *add]
            lines += indent([f"g{i} = g[{i}]", f"if g{i} is not None:", *indent(add)], level)
        return lines

    def _back_call(self, code, held, dy):
        """The call of the rule's ``back``, or of its plain one on the operands ``held``
        (NumPy's scalar ``dy`` or the 0-d array: the same products)."""
        if self.special is not None:
            return f"{code.bind(self.special[1])}({dy}, {', '.join(held)})"
        return f"{held[0]}({dy})"

    def _inline_back(self, code, expressions, dy, held, always=True):
        """The lines of ``emit_back`` for a plain back written out (``expressions``: per
        operand, its cotangent as an expression of ``dy`` and the operands ``held``), each an
        array of the operand's shape that nothing else holds, added as ``emit_back`` adds
        ``adopted`` ones; ``always``: whether the lines always run (not where a cotangent
        may not reach the output)."""
        lines = []
        for i, place in enumerate(self.places):
            if place is None:  # a constant's
                continue
            g = f"g{i}"
            lines.append(f"{g} = " + expressions[i].format(
                *held, dy=dy, product_times=code.bind(product_times),
                multiply=code.bind(np.multiply), matmul=code.bind(np.matmul),
                isfinite=code.bind(math.isfinite), vdot=code.bind(_vdot)))
            if type(place) is Buffer and place.c_contiguous and short(place):
                lines += code.add(place, g)
            elif place.whole or overlapping(place):
                lines.append(f"shadows.add({code.bind(place)}, {g}, True)")
            else:
                lines += code.add_into(place, g, always=always)
        return lines

    def back(self, shadows, *held):
        """``function_pullback`` of the lean record: the cotangents of a real rule added
        into the arguments' shadows (copied where one becomes a shadow: none is adopted).
        ``held``: the rule's ``back``, or the operands of its plain ``back`` (``emit``)."""
        dy = shadows.pop(self.created[0])
        if dy is not None and self.joined is not None:  # the rule's pieces of dy (_Split's)
            shape = self.outputs.shape[1:]
            add_cotangents(shadows, [(place, np.reshape(dy[i:i + 1], shape))
                                     for i, place in enumerate(self.places[0])
                                     if place is not None], None)
        elif dy is not None:
            special = self.special
            cotangents = special[1](dy, *held) if special is not None else held[0](dy)
            add_cotangents(shadows, [(p, g) for p, g in zip(self.places, cotangents)
                                     if p is not None], None)


class Guard:
    """Python took a decision on the value at ``slot``: ``decide(value)`` must be ``taken``.
    ``why``: what the decision is, in words, which the failure carries (``Replayed.reasons``
    names it where the guard fails on call after call), or None."""

    __slots__ = ("slot", "decide", "taken", "why")

    def __init__(self, slot, decide, taken, why=None):
        self.slot = slot
        self.decide = decide
        self.taken = taken
        self.why = why

    def __call__(self, values, tape):
        if self.decide(values[self.slot]) != self.taken:
            raise GuardFailed if self.why is None else GuardFailed(self.why)

    def emit(self, code, k):
        failed = "GuardFailed" if self.why is None else f"GuardFailed({code.bind(self.why)})"
        code.forward += [f"if {code.bind(self.decide)}({code.value(self.slot)}) != "
                         f"{code.bind(self.taken)}:", f"    raise {failed}"]
        code.records.append(())

    emit_back = staticmethod(_no_lines)
    back = staticmethod(_no_pullback)


class PythonsOwn:
    """Python's ``operation`` (``/``, ``//``, ``%``, ``**``) of the Python numbers ``args``
    stand for: tracing computed it with NumPy's arithmetic, Python's number being of ``kind``
    (``arraylike._pythons_own``), and a replay does only where it is again. Where Python
    raises (ZeroDivisionError, OverflowError) or gives another kind of number (a negative
    number to a fractional power, a complex one), the call is traced, which raises as Python
    or computes Python's number."""

    __slots__ = ("operation", "args", "kind")

    def __init__(self, operation, args, kind):
        self.operation = operation
        self.args = args
        self.kind = kind

    def __call__(self, values, tape):
        a, b = (_python_number(values[x.index]) if type(x) is Slot else x for x in self.args)
        if type(self.operation(a, b)) is not self.kind:
            raise GuardFailed

    def emit(self, code, k):
        a, b = (f"{code.bind(_python_number)}({code.value(x.index)})" if type(x) is Slot
                else code.bind(x) for x in self.args)
        code.forward += [f"if type({code.bind(self.operation)}({a}, {b})) is not "
                         f"{code.bind(self.kind)}:", "    raise GuardFailed"]
        code.records.append(())

    emit_back = staticmethod(_no_lines)
    back = staticmethod(_no_pullback)


def _python_number(v):
    """The Python number a value of a replay stands for (a NumPy scalar or a read-only 0-d
    array among them), as ``arraylike._python_number`` takes it."""
    kind = type(v)
    if kind is float or kind is complex:
        return v
    v = v.item() if isinstance(v, (np.ndarray, np.generic)) else v
    return float(v) if type(v) is int else v


class Warned:
    """A warning the recorded call issued outside any step, decided by what the program
    holds (SciPy's of a write that changes a sparse matrix's pattern): issued again, where
    it was."""

    __slots__ = ("message", "category", "filename", "lineno")

    def __init__(self, message, category, filename, lineno):
        self.message, self.category = message, category
        self.filename, self.lineno = filename, lineno

    def __call__(self, values, tape):
        warn_at(self.message, self.category, self.filename, self.lineno)


class Reshape:
    """``x.shape = shape`` of an array the function made: its value becomes a view of that
    shape (``Traced.shape``)."""

    __slots__ = ("slot", "shape")

    def __init__(self, slot, shape):
        self.slot = slot
        self.shape = shape

    def __call__(self, values, tape):
        values[self.slot] = values[self.slot].reshape(self.shape)


class PutValue:
    """``math.<name>`` of a traced scalar (``allocation.math_function``): its ufunc's step
    made the value, and ``math``'s own is put in its place, as when traced."""

    __slots__ = ("slot", "function", "args")

    def __init__(self, slot, function, args):
        self.slot = slot
        self.function = function
        self.args = args

    def __call__(self, values, tape):
        put_value(values[self.slot], self.function(*as_floats(resolve(self.args, values))))


def _with_math_value(y, function, args, values):
    """``y``, the value a ufunc's step made for ``math.<name>`` of traced scalars, given
    math's value ``function(*args)`` (``PutValue``): NumPy's scalar, which a replay's ufunc
    gives where tracing's was a 0-d array, is replaced, as it cannot be written into."""
    exact = function(*as_floats(resolve(args, values)))
    if isinstance(y, np.generic):
        return y.dtype.type(exact)
    put_value(y, exact)
    return y


class Modes:
    """NumPy's floating-point error handling from here on, as the traced call had it
    (``Recorder.watch``): ``"ignore"``, or ``"log"`` for the categories the traced call
    warned about, to :class:`Heard`, which lists them for ``Program.run`` to compare."""

    __slots__ = ("modes",)

    def __init__(self, modes):
        self.modes = modes

    def __call__(self, values, tape):
        np.seterr(**self.modes)


class Heard:
    """Where NumPy logs its floating-point events while a program replays (error handling
    ``"log"``): per event, in order, ``(message, step)``, NumPy's message (``"invalid value
    encountered in log"``) and the id of the step among ``steps`` (ids) that raised it, None
    where it is none of them. NumPy names the function, not the step: the step is the
    innermost frame's of those ``steps``, found only when an event comes (a compiled block
    runs them as its own lines: ``with_blocks`` leaves them out)."""

    __slots__ = ("kinds", "steps")

    def __init__(self, steps=()):
        self.kinds = []
        self.steps = steps

    def write(self, text):
        step = None
        if self.steps:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code is not _RUN:
                if id(frame.f_locals.get("self")) in self.steps:
                    step = id(frame.f_locals["self"])
                    break
                frame = frame.f_back
        self.kinds.append((text.removeprefix("Warning: ").rstrip("\n"), step))


class Hearing:
    """NumPy's error handling with the categories ``modes`` set and its events logged to
    ``heard`` (a :class:`Heard`), what ``np.errstate(call=heard, **modes)`` sets over the
    handling in force: made once per handling in force (``ERRORS``' value, one object per
    handling set), not on every replay (a third of a short replay's fixed cost was the two
    ``np.errstate`` of its steps and its reverse pass)."""

    __slots__ = ("heard", "modes", "over", "handling")

    def __init__(self, heard, modes):
        self.heard, self.modes = heard, modes
        self.over = self.handling = None

    def set(self):
        """Set it, its events forgotten; returns the token that ``ERRORS.reset`` takes."""
        self.heard.kinds = []
        over = ERRORS.get()
        if over is not self.over:
            self.handling = _made_handling(call=self.heard, **self.modes)
            self.over = over
        return ERRORS.set(self.handling)


_made_handling = importlib.import_module("numpy._core._multiarray_umath")._make_extobj
"""NumPy's handling in force with the settings given changed (what ``np.errstate`` sets)."""


def _numpys(message):
    """NumPy's own words in the ``message`` of a warning the reverse pass issued (which names
    the gradient it was raised in: ``debug.Warnings``)."""
    return message.partition(", in the gradient of ")[0]


def _arrays(args, spec, traced, numbers=None):
    """A rule's arguments ``args`` (made from ``spec``) as the tracing engine hands them over
    (``operations._unwrap_args``): NumPy scalars the replay holds for traced values (at the slots
    ``traced``) as the read-only 0-d arrays they stood for (``reverse.fresh_value``), those of
    constants as themselves, and the Python numbers it holds for weak values (at slots) as
    such beside arrays, else as their 0-d arrays (``arraylike.weak_beside_arrays``)."""
    if numbers is None:
        numbers = _weak_beside_arrays(args, spec)
    return [type(x)(_arrays(x, s, traced, False)) if type(x) in (list, tuple) else
            fresh_value(x) if isinstance(x, np.generic) and (
                type(s) is not Slot or s.index in traced) or (
                not numbers and type(s) is Slot and type(x) is float) else x
            for x, s in zip(args, spec, strict=True)]


def _joined_constant(a, shape):
    """Whether a constant ``a`` beside traced values in a join (``Function.joined``) is one
    that ``np.array`` of the tuple of them converts as ``np.stack`` does (a float64 result is
    guarded): a real array of that shape, read as it is when the line runs, or, of no shape,
    a Python or NumPy real number (an integer within int64's range, as ``np.stack`` reads
    it: its array)."""
    if type(a) is np.ndarray:
        return a.shape == shape and a.dtype.kind in "biuf"
    if shape != ():
        return False
    if type(a) is int:
        return -2 ** 63 <= a < 2 ** 63
    return type(a) in (float, bool) or isinstance(a, np.generic) and a.dtype.kind in "biuf"


def _passed_as_is(a):
    """Whether a constant argument of a rule is handed to it as it is (``_arrays``), and holds
    no complex value (``complex_among``): a real array, a setting, a sequence of those."""
    if type(a) is np.ndarray:
        return a.dtype.kind in "fiub"
    if type(a) is tuple or type(a) is list:
        return all(_passed_as_is(x) for x in a)
    return type(a) in (int, float, bool, str, slice, type(None))


def _weak_beside_arrays(args, spec):
    """``arraylike.weak_beside_arrays`` of the values ``args`` made from ``spec``."""
    found = other = False
    for x, s in zip(args, spec, strict=True):
        if type(s) is Slot and type(x) is float:
            found = True
        elif isinstance(x, (np.ndarray, np.generic)):
            other = True
    return found and other


def _bytes(value):
    return np.asarray(value).tobytes()


def _layout_and_bytes(value):
    """What a conversion of ``value`` to a plain array takes: its dtype, shape and bytes (a
    BLAKE2 digest of those of an array over ``COPIED`` bytes, as ``Contents`` compares)."""
    value = np.asarray(value)
    return value.dtype.str, value.shape, (
        value.tobytes() if value.nbytes <= COPIED else _digest(value))


def _places(inputs):
    """A record's inputs as a step keeps them: the places (what its pullback reads), not the
    values of the first call."""
    return tuple([x if type(x) is Buffer or type(x) is Place else None for x in inputs])


class Reenter:
    """An operation the engine records in ways no other step redoes (a scatter, ``ufunc.at``,
    ``np.copyto``, an in-place rule, a composite that writes into an array it allocates:
    ``np.piecewise``): the engine's own ``operation`` again, on traced arrays made for this
    call over the program's buffers, so that it records and decides as when it was recorded.
    ``traced`` maps the slot of each traced argument to its buffer, whether it was all of it,
    its byte offset in it, and the buffer's state then (constant, read).

    ``made``: by slot, the results that were new buffers of the operation's own (None: none),
    each the facts of its buffer (``_made_facts``). The operation makes a new buffer on each
    call, which the records it makes name; the program's later steps name the recorded one.
    The new buffer takes the recorded one's key (the shadows' key), so that the cotangents the
    later steps' records leave there reach the operation's records, once its facts are the
    recorded ones: its layout, which the later records' places index, and its state, on
    which they decided (a constant then gets no cotangent: the composite wrote no traced value
    into it this time); else the call is recorded again."""

    __slots__ = ("operation", "args", "kwargs", "traced", "outputs", "made")

    def __init__(self, operation, args, kwargs, traced, outputs, made=None):
        self.operation = operation
        self.args = args
        self.kwargs = kwargs
        self.traced = traced
        self.outputs = outputs
        self.made = made

    def __call__(self, values, tape):
        wrapped = {}
        for slot, (buffer, whole, offset, constant, read) in self.traced.items():
            value = values[slot]
            if type(value) is not np.ndarray:  # (a NumPy scalar, or a Python number a
                value = fresh_value(value)      # float argument's arithmetic gave)
            buffer.low = address(value) - (buffer.offset if whole else offset)
            buffer.constant, buffer.read = constant, read
            wrapped[slot] = Traced(value, buffer, tape, whole)
        first = _next_key() if self.made is not None else None
        y = self.operation(*resolve(self.args, values, wrapped),
                           **resolve(self.kwargs, values, wrapped))
        if first is not None:
            _adopt(self.outputs, y, self.made, first, tape)
        _store(self.outputs, y, values)


def _made_facts(buffer):
    """What the program's later steps took of a buffer an operation made (:class:`Reenter`):
    its layout and state."""
    return (buffer.dtype, buffer.shape, buffer.strides, buffer.offset, buffer.span,
            buffer.c_contiguous, buffer.device, buffer.constant, buffer.read, buffer.weak)


def _adopt(outputs, y, made, first, tape):
    """Give each new buffer among the results ``y`` that ``made`` names (by the slot of its
    :class:`Out` in ``outputs``) the key of the buffer it stands for, the recorded one: it
    must be the operation's own (made since key ``first``), all of it, and have the recorded
    facts (``_made_facts``), else the call is recorded again. What ``tape`` counts by the key
    goes with it: the drift of the inverses that undo the operation's writes into it, which
    decides how the later writes into it are undone (``Tape.undo_for``), as in the traced
    call, where it had one key throughout."""
    kind = type(outputs)
    if kind is Out:
        facts = made.get(outputs.slot)
        if facts is not None:
            buffer = y.buffer if type(y) is Traced else None
            if buffer is None or not y.whole or buffer.key < first \
                    or _made_facts(buffer) != facts:
                raise GuardFailed
            key = outputs.buffer.key
            drift = tape.drift.pop(buffer.key, None)
            if drift is not None:
                tape.drift[key] = drift
            buffer.key = key
    elif kind is tuple:
        if type(y) not in (tuple, list) or len(y) != len(outputs):
            raise GuardFailed
        for out, item in zip(outputs, y):
            _adopt(out, item, made, first, tape)


def _closed(tree):
    """Whether the callables among an operation's arguments ``tree`` read nothing made in the
    call but their arguments, so that running the operation again on a later call's values
    (:class:`Reenter`) computes what the call would: NumPy's functions and ufuncs (not one
    ``np.frompyfunc`` made of a Python function, its loops all of objects), as f's code names
    them in the allocation mode too, the libraries' routed functions, builtins, NumPy's
    and Python's types, and functions of no free variables whose defaults are Python's
    numbers and strings (a lambda written in ``f`` reads what it names from ``f``'s globals,
    which a replay follows). A function closing over ``f``'s variables reads the values the
    recorded call bound them to, a bound method its object's state."""
    kind = type(tree)
    if kind is tuple or kind is list:
        return all(_closed(item) for item in tree)
    if kind is dict:
        return all(_closed(item) for item in tree.values())
    if kind is types.FunctionType:
        if tree.__closure__ is not None:  # (a library's wrapper of its own functions: np.cumsum
            return str(tree.__module__).split(".")[0] in LIBRARIES and all(  # as f's code
                _filled(cell) and callable(cell.cell_contents)           # names it there)
                and _closed(cell.cell_contents) for cell in tree.__closure__)
        return all(
            type(d) in PYTHON_SCALARS or d is None
            for d in (*(tree.__defaults__ or ()), *(tree.__kwdefaults__ or {}).values()))
    if kind is np.ufunc:
        return not all("O" in loop for loop in tree.types)
    if kind is _ModeUfunc:  # (NumPy's ufunc as f's code names it: ``np.sin``)
        return _closed(tree.ufunc)
    if kind is _Route:  # (a library's function as f's code names it)
        return True
    if kind is types.BuiltinFunctionType:  # (and method: ``np.add.at``; ``d.get`` reads d)
        bound = tree.__self__
        return bound is None or type(bound) is types.ModuleType \
            or type(bound) is np.ufunc and _closed(bound)
    if kind is type:
        return tree.__module__ == "builtins" or tree.__module__.split(".")[0] == "numpy"
    if kind is types.MethodType:  # (mutad's own: an in-place rule's runner, which runs the
        owner = tree.__self__      # rule and the function its object holds)
        return type(owner).__module__.split(".")[0] == "mutad" and _closed(tree.__func__) \
            and _closed(vars(owner))
    return not callable(tree) or kind is _DISPATCHER or isinstance(tree, np.dtype)


_DISPATCHER = type(np.sum)  # (NumPy's functions that dispatch to ``__array_function__``)


def _value_of(y):
    return y.value if type(y) is Traced else y


class Recomputed:
    """The values a replay's reverse pass computes again, found as the traced call it replays
    found them (``recompute.Recomputation.read``'s plans, which ``Program.plan`` turns into
    plans over the program's slots): an array alive then is read from its slot, one
    recomputed is computed again from what its recipe reads, by the same calls, so the
    records read the bytes the traced reverse pass gave them. A value recomputed for several
    records is kept until the last of them has read it.

    A program that recomputes has one in a slot of its own (``Program.recomputes``); a step
    whose record reads such values appends ``later(plans, record, values)`` for its record.
    Under a memory budget it also holds the call's chains (``recompute.Chain``), by the key of
    the buffer each rebuilds, whose redone writes find their inputs through it too
    (:class:`Chained`). It holds the call's ``values`` (the program lets go of it once the
    call is over, which breaks that cycle)."""

    __slots__ = ("cache", "left", "alive", "chains", "values")

    def __init__(self, cached, alive, values):
        self.cache = {}
        self.left = dict(cached)  # buffer key -> how many records will read it from the cache
        self.alive = dict(alive)  # slot -> how many will read it alive: then it is let go
        self.chains = {}
        self.values = values

    @staticmethod
    def later(plans, record, values):
        """The record ``record`` to reverse, its values of ``plans`` (``(slot, [(position,
        read), ...])``, ``read`` a plan's lines: :func:`_reading`) let go now and found again
        just before it is reversed: ``(the recomputed values, record, plans)``, as
        ``Tape.reverse`` takes it. A long program
        holds one such tuple per record until its reverse pass: the step's own list of plans
        where the record kept every value it names (the common case), a list of its own
        only where it kept fewer."""
        slot, plans = plans
        kept = record.kept
        for i, _ in plans:
            if kept[i] is None:
                plans = [(i, plan) for i, plan in plans if kept[i] is not None]
                break
        for i, _ in plans:
            kept[i] = None
        return (values[slot], record, plans)

    def back(self, shadows, record, plans):
        kept, values = record.kept, self.values
        for i, read in plans:
            kept[i] = read(self, values, None)
        Tape.reverse(record, shadows)


def _alive_counted(recomputed, values, slot):
    """The array alive at ``slot``, read by a record's plan: the last such read lets it go
    (the records that read it hold it)."""
    array = values[slot]
    alive = recomputed.alive
    if slot in alive and count_down(alive, slot):
        values[slot] = None
    return array


def _cached(recomputed, key, again, values):
    """The value recomputed for several records under ``key``. Missing from the cache, it
    was not computed by the plan that keeps it, which comes first: its record keeps none this
    time (its write's bytes copied, or an undo decided otherwise). It is computed here by
    ``again``, that plan outside the plans, counting nothing (all it reads is still held for
    the plan's own reads, which never ran)."""
    array = recomputed.cache.get(key)
    return again(recomputed, values, {}) if array is None else array


def _cached_counted(recomputed, key, again, values):
    """:func:`_cached`, read by a record's plan: the last such read lets it go."""
    array = _cached(recomputed, key, again, values)
    if count_down(recomputed.left, key):
        recomputed.cache.pop(key, None)
    return array


def _kept(recomputed, key, y):
    """``y``, the value of ``key``, kept for the records left that read it."""
    if key in recomputed.left:
        recomputed.cache[key] = y
    return y


def _alive_number(array):
    """What a ufunc read of a number alive: Python's (``Buffer.weak``, NumPy's scalar's)."""
    return array.item() if isinstance(array, (np.ndarray, np.generic)) else array


def _alive_array(array):
    return array if type(array) is np.ndarray else np.asarray(array)


def _alive_region(array, shape, dtype, offset, strides):
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    return strided(array.reshape(-1), shape, dtype, offset, strides)


def _region(array, shape, dtype, offset, strides):
    return strided(array.reshape(-1), shape, dtype, offset, strides)


class _Reading:
    """The lines of a plan (:func:`_replan`'s): one expression, the calls of the recursion
    that plans stand for written out, in the same order, so that each value lives exactly
    as long (an operand until the call that reads it returns); its constants bound by name
    (``c0``, ``c1``, ...), so that plans alike in shape share their compiled lines.

    ``counted``: the plan of a record's value (``Recomputed.back``), whose reads of arrays
    alive and of values recomputed for several records count down, the last letting go. Only
    those reads count: each runs at most once per call, in the order the traced reverse pass
    made them, so a count reaches 0 at the last planned read of its array or value, never
    before. Else a plan read outside the plans, counting nothing: a value missing from the
    cache (:func:`_cached`; that plan's computations nested in another's may run again this
    way), or a write a chain redoes (``rebuilt``: the arrays that stand for the buffers it
    rebuilds, by key, read before any alive; what it reads alive is held for the whole
    call)."""

    def __init__(self, counted, plans=()):
        self.counted = counted
        self.constants = []
        self.names = {}
        # A computation several reads share (``_replan``'s ``shared``): by ``id``, how many
        # read it; its first read computes it into a list, the middle ones read the list, the
        # last pops it, so it lives no longer than it did computed for each read.
        self.reads = collections.Counter()
        self.held = {}
        for plan in plans:
            self._count(plan)

    def _count(self, plan):
        kind = plan[0]
        if kind is READ:
            source = plan[5]
            if plan[4] is not ALIVE and plan[4] is not CACHED:
                self.reads[id(source)] += 1
                if self.reads[id(source)] == 1:
                    self._count(source)
        elif kind is SEQUENCE:
            for p in plan[2]:
                self._count(p)
        elif kind is SAME:
            self._count(plan[3])
        elif kind is RUN:
            for p in (*plan[6], *plan[7].values()):
                self._count(p)

    def computed(self, source):
        """The lines of ``source``, a computation: computed here, or read as computed for an
        earlier read that shares it."""
        reads = self.reads[id(source)]
        if reads < 2:
            return self.compute(source)
        held = self.held.get(id(source))
        if held is None:
            name = f"h{len(self.held)}"
            self.held[id(source)] = [name, reads - 1]
            return f"({name} := [{self.compute(source)}])[0]"
        held[1] -= 1
        return f"{held[0]}.pop()" if held[1] == 0 else f"{held[0]}[0]"

    def bind(self, value):
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"c{len(self.constants)}"
            self.constants.append(value)
        return name

    def input(self, plan):
        kind = plan[0]
        if kind is READ:
            return self.read(plan)
        if kind is SEQUENCE:
            items = "".join(f"{self.input(p)}, " for p in plan[2])
            return f"[{items}]" if plan[1] is list else f"({items})"
        return self.bind(plan[1])  # a constant

    def read(self, plan):
        _, key, layout, number, how, source = plan
        if how is ALIVE:
            if self.counted:
                array = f"{self.bind(_alive_counted)}(recomputed, values, {self.bind(source)})"
            else:
                array = (f"(a if (a := rebuilt.get({self.bind(key)})) is not None "
                         f"else values[{self.bind(source)}])")
            if number:
                return f"{self.bind(_alive_number)}({array})"
            if layout is None:
                return f"{self.bind(_alive_array)}({array})"
            return f"{self.bind(_alive_region)}({array}, {self.layout(layout)})"
        if how is CACHED:
            again = _Again(source)
            cached = _cached_counted if self.counted else _cached
            array = (f"{self.bind(cached)}(recomputed, {self.bind(key)}, {self.bind(again)}, "
                     "values)")
        else:
            array = self.computed(source)
        if number:
            return f"{array}.item()"
        return array if layout is None else f"{self.bind(_region)}({array}, {self.layout(layout)})"

    def layout(self, layout):
        shape, dtype, offset, strides = layout
        if 0 in shape:  # an empty view may sit at the end of the buffer: it reads no byte
            offset = 0
        return ", ".join(self.bind(x) for x in (shape, dtype, offset, strides))

    def compute(self, plan):
        if plan[0] is SAME:
            _, key, stored, same = plan
            y = self.read(same)
        else:
            _, key, stored, primitive, rule, output, inputs, settings = plan
            args = [self.input(p) for p in inputs]
            args += [f"**{{{self.bind(k)}: {self.input(p)}}}" for k, p in settings.items()]
            if rule is not None:
                y = f"{self.bind(rule)}({', '.join(args)})[0]"
                if output is not None:
                    y = f"{y}[{self.bind(output)}]"
            else:
                y = f"{self.bind(primitive)}({', '.join(args)})"
        if stored:
            return f"{self.bind(_kept)}(recomputed, {self.bind(key)}, {y})"
        return y


class _Again:
    """The lines of ``plan`` read outside the plans, made where first needed (a value missing
    from the cache, :func:`_cached`: seldom)."""

    __slots__ = ("plan", "read")

    def __init__(self, plan):
        self.plan = plan
        self.read = None

    def __call__(self, recomputed, values, rebuilt):
        if self.read is None:
            self.read = _reading(self.plan, False)
        return self.read(recomputed, values, rebuilt)


def _reading(plan, counted):
    """``read(recomputed, values, rebuilt)``, the value of ``plan`` (:class:`_Reading`)."""
    code = _Reading(counted, (plan,))
    value = code.read(plan) if plan[0] is READ else code.compute(plan)
    return _made(code, value, "recomputed, values, rebuilt")


def _reading_all(plans):
    """``read(recomputed, values, rebuilt)``, the tuple of the values of ``plans`` (a rebuilt
    write's inputs, read outside the plans); where one is None, ``read(copied, recomputed,
    values, rebuilt)``, the next of the values ``copied`` as the write read them in its place
    (``Chained.copies``)."""
    code = _Reading(False, [p for p in plans if p is not None])
    copies = iter(range(len(plans)))
    value = "(" + "".join(f"copied[{next(copies)}], " if p is None else f"{code.input(p)}, "
                          for p in plans) + ")"
    arguments = "recomputed, values, rebuilt"
    return _made(code, value, f"copied, {arguments}" if None in plans else arguments)


def _made(code, value, arguments):
    names = ", ".join(f"c{i}" for i in range(len(code.constants)))
    source = (f"def make({names}):\n"
              f"    def read({arguments}):\n"
              f"        return {value}\n"
              f"    return read\n")
    return _factory(source)(*code.constants)


class Redone:
    """What the replay's chain of a buffer (``recompute.Chain``) reads the inputs of the writes
    it redoes through, in place of tracing's ``Recomputation``: their plans' lines
    (:class:`Chained`), over the call's ``values``."""

    __slots__ = ("recomputed", "values")

    def __init__(self, recomputed, values):
        self.recomputed = recomputed
        self.values = values

    def read_all(self, inputs, rebuilt):
        if inputs is None:  # a write the recorded call's chain never redid
            raise GuardFailed
        return inputs(self.recomputed, self.values, rebuilt)

    @staticmethod
    def recompute_into(inputs, rebuilt, out):
        """Never: a write is redone as the recorded call's first redo of it was, whose plan
        (the recording call's) reads its value and then copies it."""
        return False


class Chained:
    """A write that the recorded call's memory budget rebuilt (``recompute.Chain``): the
    replay's chain of its buffer takes it as the recorded call's did, the snapshots kept at the
    same writes (so the reverse pass redoes the same writes, by revolve's same schedule), and
    redoes it from its inputs found as the recorded call's first redo of it found them
    (``inputs``: the lines of their plans, ``Recomputation.read``'s over the program's slots,
    :func:`_reading_all`; ``copies``: the positions of the small values no reference follows,
    copied as the write reads them, as tracing copies them: ``recompute.redone``; None: a write
    the recorded call never redid). The chain, and the arrays its redone writes read alive (``Program.held``),
    live as long as tracing's."""

    __slots__ = ("slot", "buffer", "whole", "budget", "first", "version", "snapshot", "place",
                 "inputs", "copies")

    def __init__(self, slot, rebuild, whole, budget, inputs, copies):
        chain = rebuild.chain
        self.slot = slot  # the program's Recomputed, which holds the call's chains
        self.buffer = chain.buffer
        self.whole = whole  # the slot of all of the buffer
        self.budget = budget
        self.first = chain.first
        self.version = rebuild.version
        self.snapshot = rebuild.snapshot
        self.place = rebuild.place
        self.inputs = inputs
        self.copies = copies

    def undo(self, values):
        """The undo of the write about to be made: its buffer's chain's, the chain made at its
        first write."""
        recomputed = values[self.slot]
        chain = recomputed.chains.get(self.buffer.key)
        if chain is None:
            chain = recomputed.chains[self.buffer.key] = Chain(
                Redone(recomputed, values), self.buffer, values[self.whole], self.budget)
            chain.first = self.first
        return chain.again(self.version, self.place, self.snapshot)

    def wrote(self, rebuild, vals, redo):
        """The write just made, from the values ``vals``."""
        inputs = self.inputs
        if self.copies and inputs is not None:
            inputs = functools.partial(inputs, tuple(
                [v.copy() if type(v) is np.ndarray else v for v in map(vals.__getitem__,
                                                                        self.copies)]))
        rebuild.chain.wrote(inputs, self.place, redo)


class Unplanned(Exception):
    """A value the traced reverse pass recomputed that a replay could not find as it did."""


def _replan(plan, slots, program, stored, rebuilt=None, shared=None):
    """``plan`` (``recompute.Recomputation.read``'s) over the program's slots (``slots``:
    buffer key -> slot): ``(READ, key, layout, number, how, source)``, ``source`` the slot
    of an array read alive (``program.alive``), or its computation again, its inputs replanned
    (for a value kept for several records, the computation that kept it, in ``stored``: plans
    are replanned in the order the reverse pass made them); counts the reads of values kept
    for several records (``program.cached``). ``rebuilt``: the key of the buffer a chain
    rebuilds, for the plan of a write it redoes, which reads that buffer from the chain and
    what else it reads alive from slots held for the whole call (``program.held``).
    ``shared``: the computations replanned so far, by ``id``: one computation that several
    reads of a recipe's inputs share (``Recomputation.read``'s ``once``) is replanned once,
    its reads alive counted once, and stays one object, which ``_Reading`` computes once."""
    if shared is None:
        shared = {}
    kind = plan[0]
    if kind is READ:
        _, place, numbers, source = plan
        buffer = place.buffer
        if not buffer.c_contiguous:
            raise Unplanned("a value recomputed from an array laid out otherwise than in C order")
        layout = None if place.whole else (place.shape, place.dtype, place.offset, place.strides)
        how = source if type(source) is str else None
        if how is ALIVE:
            source = slots.get(buffer.key)
            if rebuilt is not None:
                if source is None and buffer.key != rebuilt:
                    raise Unplanned("a rebuilt write redone from an array the replay does not "
                                    "follow")
                if buffer.key != rebuilt:
                    program.held.add(source)
            elif source is None:
                raise Unplanned("a value recomputed from an array the replay does not follow")
            else:
                program.alive[source] = program.alive.get(source, 0) + 1
        elif how is CACHED and rebuilt is not None:
            raise Unplanned("a rebuilt write redone from a value recomputed for several records")
        elif how is CACHED:
            program.cached[buffer.key] = program.cached.get(buffer.key, 0) + 1
            source = stored.get(buffer.key)
            if source is None:
                raise Unplanned("a value recomputed for several records in an unknown order")
        elif id(source) in shared:
            source = shared[id(source)][1]
        else:
            shared[id(source)] = (source, _replan(source, slots, program, stored, rebuilt,
                                                  shared))
            source = shared[id(source)][1]
        return (READ, buffer.key, layout, numbers and buffer.weak, how, source)
    if kind is SAME or kind is RUN:  # a computation: (kind, key, kept, ...)
        key, kept = plan[1], plan[2]
        program.recomputed.add(key)
        if kind is SAME:
            how = (_replan(plan[3], slots, program, stored, rebuilt, shared),)
        else:
            primitive, rule, output, inputs, settings = plan[3:]
            how = (primitive, rule, output,
                   tuple(_replan(p, slots, program, stored, rebuilt, shared) for p in inputs),
                   {k: _replan(p, slots, program, stored, rebuilt, shared)
                    for k, p in settings.items()})
        plan = (kind, key, kept, *how)
        if kept:
            stored[key] = plan
        return plan
    if kind is SEQUENCE:
        return (SEQUENCE, plan[1],
                tuple(_replan(p, slots, program, stored, rebuilt, shared) for p in plan[2]))
    return plan  # a constant


class Free:
    """Let go of the values at ``slots``, which no later step reads (the records that need
    them hold them)."""

    __slots__ = ("slots",)

    def __init__(self, slots):
        self.slots = slots

    def __call__(self, values, tape):
        for slot in self.slots:
            values[slot] = None

    def emit(self, code, k):
        """In a block: the values let go, and the locals holding them unless the reverse pass
        reads them (the block's records hold those, as the steps' records would)."""
        for slot in self.slots:
            if slot not in code.unstored:
                code.forward.append(f"values[{code.bind(slot, 'slot')}] = None")
            local = code.locals.get(slot)
            if local is not None and local not in code.kept:
                code.forward.append(f"{local} = None")
                code.forget(local)
        code.records.append(())

    writes_nothing = True  # (into memory: ``blocks.Code.elements``)
    reverse_reads: frozenset = frozenset()  # (of memory: ``blocks.Code.read_back``)

    emit_back = staticmethod(_no_lines)
    back = staticmethod(_no_pullback)


_FIELDS = {}
"""Per class of step, the names of its fields that may hold slots (``_fields``)."""


def _fields(kind):
    """``(nested, plain, at, primals)``: the fields of a step of class ``kind`` whose
    structures may hold :class:`Slot` s, those that may be a slot's index, and whether it has
    ``at`` and ``primals``. (A program of scalar loops has hundreds of thousands of steps:
    asking each for fields it lacks costs seconds.)"""
    fields = _FIELDS.get(kind)
    if fields is None:
        names = set(dir(kind))
        fields = _FIELDS[kind] = (
            tuple(name for name in ("args", "kwargs", "key") if name in names),
            tuple(name for name in ("target", "source", "slot", "value") if name in names),
            "at" in names, "primals" in names)
    return fields


def _read_slots(step):
    """The slots a step reads or writes, as a list."""
    nested, plain, at, primals = _fields(type(step))
    found = []
    for name in nested:
        found.extend(slot.index for slot in within(getattr(step, name, None), Slot))
    for name in plain:
        slot = getattr(step, name, None)
        if type(slot) is int:
            found.append(slot)
    if at:
        found.extend(slot for _, slot in step.at)
    if primals:
        found.extend(step.primals)
    return found


def with_frees(steps, large, reads):
    """``steps`` with a :class:`Free` after the last step that uses each of the slots
    ``large``, so that the replay holds a large temporary no longer than the traced call, and
    the slots each of them reads: ``reads`` (``_read_slots``' per step) with none for each
    ``Free``."""
    if not large:
        return steps, reads
    last = {}
    for k, slots in enumerate(reads):
        for slot in slots:
            if slot in large:
                last[slot] = k
    after = collections.defaultdict(list)
    for slot, k in last.items():
        after[k].append(slot)
    out, out_reads = [], []
    for k, (step, slots) in enumerate(zip(steps, reads)):
        out.append(step)
        out_reads.append(slots)
        if k in after:
            out.append(Free(after[k]))
            out_reads.append(())
    return out, out_reads


REPEAT = 8
"""Steps that must repeat for a run to be cut there (``_pieces``)."""


def _step_kind(step):
    """What a step's code depends on besides its operands: its class and operation."""
    return (type(step), getattr(step, "record_ufunc", None) or getattr(step, "ufunc", None)
            or getattr(step, "function", None))


def _pieces(run, steps, crossing):
    """``run`` (positions in ``steps``) cut into pieces of at most ``BLOCK_STEPS`` steps.
    Each cut, among the last half of a full piece's positions, is where the fewest values
    cross it (``crossing[k]``: the values made before step ``k`` and read from it on), whose
    cotangents the reverse pass would hand from one block to the other through the shadows'
    dictionary rather than in locals (at lu's sizes, a tenth of the replay); among those,
    where the steps that begin the piece begin again (a loop body's start), so that the pieces
    of a loop are the same code, which one compiled template serves (``blocks.TEMPLATES``),
    rather than a template for each phase of the loop against a fixed length; then the
    latest."""
    kinds = [_step_kind(steps[k]) for k in run]
    pieces, start = [], 0
    while len(run) - start > BLOCK_STEPS:
        head = kinds[start:start + REPEAT]
        cut = min(range(start + (BLOCK_STEPS + 1) // 2, start + BLOCK_STEPS + 1),
                  key=lambda p: (crossing[run[p]], kinds[p:p + REPEAT] != head, -p))
        pieces.append(run[start:cut])
        start = cut
    return [*pieces, run[start:]] if run else []


def _crossing(steps, reads, held):
    """Per position ``k`` in ``steps`` (and one past the last): how many of the values the
    steps before ``k`` make, that a block may hold the cotangent of in a local (``out``), are
    read by step ``k`` or a later one (``reads``), or once the steps are done (``held``)."""
    last = {}
    for k, slots in enumerate(reads):
        for slot in slots:
            last[slot] = k
    for slot in held:
        last[slot] = len(steps)
    change = [0] * (len(steps) + 2)
    for k, step in enumerate(steps):
        out = getattr(step, "out", None)
        if out is not None and last.get(out, k) > k:  # live from k + 1 to its last reader
            change[k + 1] += 1
            change[last[out] + 1] -= 1
    return list(itertools.accumulate(change))


def _member(step):
    """``step`` as a compiled block runs it: itself where it writes its own lines, as an
    :class:`blocks.Opaque` step where it runs as it is (a function's rule, a guard, a write
    of another kind, an elementwise step on large or complex values, an operation the engine
    records again); None where it ends a run."""
    kind = type(step)
    if kind is SetElement or kind is Free:
        return step
    # (not a large one, whose value the block's lines that read it would hold until its
    # forward pass is over, where the replay lets it go after its last reader: ``Free``)
    if kind is Pure or kind is Gather:
        if step.lean:
            return step
        small = short(step.buffer) and getattr(step, "later", None) is None
        return Opaque(step, 1) if small else None
    if kind is Reenter:  # (the records the engine makes, as many as it makes on the call)
        return Opaque(step, None) if all(short(value[0]) for value in step.traced.values()) \
            and all(math.prod(out.shape) * out.dtype.itemsize < SHORT
                    for out in within(step.outputs, Out)) else None
    if kind is Call:
        return step if step.inline else Opaque(step, 0)
    if kind is ElementwiseWrite:
        # (a large write's lines would hold its target and operands in the block's locals
        # until its reverse pass is over: as it is, the undo alone does not hold a temporary)
        return step if step.lean and short(step.written) and all(
            type(a) is Slot or not any(within(a, Slot)) for a in step.args) else Opaque(step, 1)
    if kind is ConstantWrite:
        return Opaque(step, 0 if step.saved is None else 1)
    if kind is Guard or kind is PythonsOwn:
        return step
    if kind is Function:
        return step if step.lean or step.joined is not None else Opaque(step, 1)
    return None


def _integral(outputs):
    """Whether a step stores integers or booleans alone (``_store``), which no cotangent
    reaches."""
    if type(outputs) is Out:
        return outputs.dtype.kind in "biu"
    return type(outputs) is tuple and all(_integral(out) for out in outputs)


_LINES_ALONE = (Pure, Function, SetElement, Free)
"""The steps whose lines in a block read the values the block made from its locals alone (an
index's values a ``Gather`` or a ``Call`` computes, ``resolve``, are read from the program's)."""


def with_blocks(steps, held, guarded=(), raising=frozenset(), reads=None):
    """``steps`` with each run of lean elementwise steps (:class:`Pure`, :class:`Gather`, and
    :class:`SetElement`, fused here), and of the indexing, writes and guards between them
    (``_member``), as one :class:`blocks.Block`. ``held``: the slots the program reads when
    its steps are done (its result, its aux); ``guarded``: the keys of the buffers whose
    bytes a call saves before their first write (``Tape.guard``: the arguments'); ``raising``:
    the ids of the steps of the operations that warned of a floating-point event when
    recorded (``Program.raising``), which run as themselves, where ``Heard`` tells them apart
    (and which stay alive: no other object takes their ids); ``reads``: the slots each step
    reads, where known (``with_frees``' answer)."""
    reads = [set(slots) for slots in (map(_read_slots, steps) if reads is None else reads)]
    readers = collections.Counter(slot for slots in reads for slot in slots)
    fused, fused_reads = [], []
    for step, slots in zip(steps, reads):
        if fused and type(step) is ElementwiseWrite and readers[step.target] == 1 \
                and step.target not in held and not {id(fused[-1]), id(step)} & raising:
            element = SetElement.fused(fused[-1], step)
            if element is not None:
                fused[-1], fused_reads[-1] = element, {element.source, element.value}
                continue
        fused.append(step)
        fused_reads.append(slots)
    steps, reads = fused, fused_reads
    members = [None if id(step) in raising else _member(step) for step in steps]
    crossing = _crossing(steps, reads, held)
    runs, run = [], []
    for k, member in enumerate((*members, None)):
        if member is not None:
            run.append(k)
            continue
        runs += _pieces(run, steps, crossing)
        run = []
    # worth compiling: a run with steps that write their own lines, more than one or an
    # element's assignment
    runs = [run for run in runs if sum(type(members[k]) is not Opaque for k in run) > 1
            or any(type(steps[k]) is SetElement for k in run)]
    if not runs:
        return steps
    block_of = {k: j for j, run in enumerate(runs) for k in run}
    for k in block_of:
        if type(steps[k]) is ElementwiseWrite:
            # (the records of a block's steps are its own until its forward pass ends, not on
            # the tape, where ``inplace.unread`` looks for what reads the target)
            steps[k].unseen = None
    # A value's cotangent is a local of its block if only the block's Pure steps, its joins
    # of scalars, or the assignment of an element, read it, and it is a whole C-contiguous
    # buffer (into which their lean pullbacks add directly: a function's output laid out as its
    # operand, F-ordered, is added into through the shadows)
    outside = set(held)
    read_in = {}
    for k, step in enumerate(steps):
        own = members[k] is step  # (an Opaque step's operands: through the shadows)
        local = (tuple(slot for _, slot in step.at) if own and type(step) is Pure else
                 tuple(a.index for a in step.args[0] if type(a) is Slot)
                 if own and type(step) is Function
                 and step.joined is not None else
                 (step.value,) if type(step) is SetElement and step.value is not None
                 else step.operands if own and type(step) is ElementwiseWrite
                 else ()) if k in block_of else ()
        for slot in local:
            if read_in.setdefault(slot, block_of[k]) != block_of[k]:
                outside.add(slot)
        outside.update(reads[k].difference(local))
    # A value that only guards read (int(x / dx), a comparison Python decides on) gets no
    # cotangent, on any call; nor do the operands of a ufunc that recorded nothing (np.less,
    # whose bool value has no derivative), of a call that makes integers alone (np.argmin),
    # or of a pure step or a function whose value gets none (np.sqrt(r @ r) < tol's square
    # root; np.argmin(((c - x) ** 2).sum(axis=1))'s sum): from the last step back
    reached = set(held)
    for step, slots in zip(reversed(steps), reversed(reads)):
        kind = type(step)
        if kind is Guard or kind is Free \
                or kind is Call and (type(step.function) is np.ufunc or _integral(step.outputs)) \
                or (kind is Pure or kind is Function and step.out is not None) \
                and step.out not in reached:
            continue
        reached.update(slots)
    # A value a block makes that only its own lines read (the slices of lu's dot products)
    # is its local alone: never stored into the program's values, nor let go from them
    made_in, readers_at = {}, collections.defaultdict(list)
    for k, slots in enumerate(reads):
        for slot in slots:
            readers_at[slot].append(k)
    for k, step in enumerate(steps):
        kind = type(step)
        if k in block_of and members[k] is step and kind in (Pure, Gather, Function, Call):
            made_in.setdefault(block_of[k], []).append(
                step.outputs.slot if kind is Function or kind is Call else step.out)
    out, start = [], 0
    shared = {}  # the indices the blocks bind, each one object (``blocks.Code.bind``)
    for j, run in enumerate(runs):
        out += steps[start:run[0]]
        run_members = [members[k] for k in run]
        internal = {step.buffer.key for step in run_members
                    if type(step) in (Pure, Gather, Function) and step.buffer.c_contiguous
                    and step.out not in outside and read_in.get(step.out, j) == j}
        unreached = {step.buffer.key for step in run_members
                     if type(step) is Pure and step.out not in reached}
        unstored = {slot for slot in made_in.get(j, ()) if slot not in held and all(
            block_of.get(k) == j and members[k] is steps[k] and type(steps[k]) in _LINES_ALONE
            for k in readers_at[slot])}
        out.append(Block(run_members, internal, GuardFailed, unreached, guarded, shared,
                         unstored))
        start = run[-1] + 1
    return out + steps[start:]


# ----------------------------------------------------------------------------------------------
# Recording


def _holds_arrays_of_the_call(tape, items):
    """Whether an object among ``items`` (at any depth of lists, tuples and dicts), other than
    an array itself, holds an array ``tape`` traces: a function closing over one (or holding
    one among its defaults), a partial or bound method holding one, an object holding one
    among its attributes. Such an object was made by the recorded call (``solve_ivp``'s
    ``fun`` closing over the parameters, the problem its rule keeps), and a rule given it
    would read that call's arrays when replayed; unless its class says it reads only the
    arrays the rule is given (``replays_on_its_operands``: ``quad``'s integrand), or that it
    keeps what the recorded call computed (``replays_on_its_operands = False``: a solve's
    problem, which keeps its forward solution)."""
    work, seen = [(items, False)], set()
    while work and len(seen) < REACHED_ITEMS:
        x, inside = work.pop()  # inside: held by an object, not an argument itself
        kind = type(x)
        if kind is Traced:
            if inside and x.tape is tape:
                return True
            continue
        if (id(x), inside) in seen:
            continue
        seen.add((id(x), inside))
        if kind in (tuple, list):
            found = x
        elif kind is dict:
            found = x.values()
        elif kind is types.FunctionType:
            found = [cell.cell_contents for cell in x.__closure__ or () if _filled(cell)]
            found += [*(x.__defaults__ or ()), *(x.__kwdefaults__ or {}).values()]
        elif kind is types.MethodType:
            found = (x.__func__, x.__self__)
        elif kind is functools.partial:
            found = (x.func, *x.args, *x.keywords.values())
        elif getattr(kind, "replays_on_its_operands", None) is False:
            return True  # an object that keeps what the recorded call computed
        elif isinstance(x, (np.ndarray, np.generic, type, types.ModuleType, str, bytes)) \
                or getattr(kind, "replays_on_its_operands", False):
            continue  # (an object that reads the arrays its rule is given, not those it holds)
        else:  # an object: its attributes
            found = list(getattr(x, "__dict__", {}).values()) if type(
                getattr(x, "__dict__", None)) is dict else []
            found += [getattr(x, name) for cls in kind.__mro__ for name in _slot_names(cls)
                      if hasattr(x, name)]
            if not found:
                continue
        held = inside or kind not in (tuple, list, dict)
        work.extend((item, held) for item in found)
    return False


class Recorder:
    """Writes down the program of one traced call, step by step (``tape.recorder``).

    The engine asks it at each door (``ready`` says it is not inside a step already): it runs
    the operation as the engine would, with ``ready`` off so that the operations inside it are
    not steps of their own, and then writes the step. ``ReverseTape.record`` and
    ``write_constant`` report what the engine records outside any step (``outside``): inside a
    ``door`` that makes the door a :class:`Reenter` step; elsewhere, as anything else no step
    can redo, it is ``refuse``d, and the program is dropped (``reason`` says why)."""

    def __init__(self, tape):
        self.tape = tape
        self.ready = True
        self.reason = None
        # it traces arrays outside argnums (``session.ReverseDifferentiation.wrap``)
        self.outside_argnums = False
        # why the call took another path than tracing would (a rule that refused an array
        # outside argnums, which f may have caught): it is traced again (``Replayed``)
        self.mistraced = None
        self.steps = []
        self.slots = {}  # id of a traced array (or of a plain argument) -> its slot
        self.objects = []  # what each slot stood for when recorded (``bind``)
        self.buffers, self.wholes, self.large = [], {}, set()
        # The buffers of constants whose values were computed from traced ones: Python's
        # decisions on them are guarded as on traced values (``derive``).
        self.derived = set()
        self.soft = None  # inside a door: what the engine recorded outside a step
        self.entering = None  # the operation a door is about to run (``opens``)
        self.modes = self.call = None  # NumPy's error handling at the last step (``watch``)
        self.errors = None  # and the object that holds it (``debug.ERRORS``)
        special = sys.modules.get("scipy.special")  # and scipy.special's, as the call began
        self.special = None if special is None else (special.geterr, special.geterr())
        self.printing = np.get_printoptions()  # NumPy's print options, as the call began
        # Python's warnings handling as the call began, the caller's (``hearing``), and
        # whether f heard (or silenced) a warning the steps issued under its own
        self.handling = (warnings.filters, warnings._showwarnmsg_impl, warnings.showwarning)
        self.filters = _filters_number()
        self.hears = False
        # The warnings of floating-point events the steps issued, (message, file, line); the
        # first ``counted`` of them, those issued inside steps (``enter``, ``leave``)
        self.heard = _Issued(self)
        self.counted = 0
        # per warning heard, the ids of the steps of the operation that issued it (``enter``),
        # of which the one that raised it when replayed must be; and where that operation's
        # steps begin
        self.sources = []
        self.opened = 0
        self.depth = 0
        # Python's warnings the steps issued and Python showed, (category, message): f may
        # have acted on them (``catch_warnings(record=True)``; ``Shown``); per warning,
        # whether it was shown under the caller's handling, to be issued again by a replay
        self.shown = []
        self.reissued = []
        self.shown_at = []  # (file, line) each was issued at, where a replay issues it again
        self.issuing = False  # while ``issue`` issues an operation's warnings again
        self.capture = None  # while an operation runs, what catches its warnings (``Capture``)
        self.showing = None  # the Shown installed while the call records
        self.writers = []  # the debug.Warnings that report to ``heard``
        # The write just traced: its plan (``operations.WritePlan``, one offering no inverse
        # where tracing withheld it for the memory its operands would hold) and whether its
        # other operands lie apart from its target (None: not asked), its step's decisions
        self.written = None
        # The steps whose records keep stand-ins for values recomputed in the reverse pass,
        # by the id of the traced record (``recomputed``), until it is reversed (``plans_of``)
        self.lazy = {}
        # The memory of the arguments the call does not trace (integer and boolean arrays) by
        # id: (the array owning it, its bytes when the call began); and the copies a step
        # reads of such memory once f wrote into it (``_plain_read``)
        self.plain_arguments = {}
        self.snapshots = {}
        # The other writable plain arrays the steps read (an integer array f made), by id:
        # (the array, a digest of its bytes when a step read it). A replay's step reads the
        # array itself, as it is when the program was recorded: f must not change it after
        # (``w += 1``, plain NumPy code no step redoes), which ``end`` checks
        self.plain_reads = {}
        # The constants converted to plain arrays (``converted``): (buffer, its version then,
        # the plain array, a digest of its bytes then)
        self.conversions = []

    def note_plain(self, leaf):
        """``leaf`` is an array argument the call does not trace. f may write into it (``k +=
        1``, ``k.sort()``) as plain NumPy code, which no step redoes and a replay does not
        see: a replay leaves the caller's array as it was, as tracing gives it back."""
        base = owner(leaf)
        if id(base) not in self.plain_arguments:
            self.plain_arguments[id(base)] = (base, base.tobytes())

    def outside(self, what):
        """The engine recorded ``what`` outside a step: inside a door (``door``), the door
        becomes a :class:`Reenter` step; else the program cannot be replayed."""
        if self.soft is not None:
            self.soft.append(what)
        else:
            self.refuse(f"an operation recorded outside a replayable step ({what})")

    def opens(self, operation):
        """Whether ``operation`` (one that calls :meth:`door` on itself: ``Traced.__setitem__``,
        an in-place rule) opens a door: not where it is the door's own call of it."""
        if self.entering is operation:
            self.entering = None
            return False
        return True

    def door(self, operation, args, kwargs):
        """``operation(*args, **kwargs)`` (``operations.door``): the operations it makes are steps
        of their own, unless the engine records anything else meanwhile; then they are dropped
        and the whole operation is one :class:`Reenter` step.

        A door inside another's operation (an assignment in a composite such as
        np.piecewise's) is one of its own. Where all the outer operation records is in steps,
        such doors' among them, it is one :class:`Reenter` step too if it reads nothing but
        its arguments (``_closed``): its decisions (piecewise's conditions) are then taken
        again on each call rather than guarded. Else its steps are kept, so that the user's
        functions it calls (piecewise's, closing over values of the call) are recorded as
        steps whose slots name what they read, rather than run again as they were made,
        over the values they closed over in the recorded call."""
        self.enter()
        mark, first = len(self.steps), len(self.objects)
        since = _next_key()  # (the keys of the buffers the operation makes, on)
        traced = {}
        for x in within((args, kwargs), Traced):
            slot = self.slots.get(id(x))
            if slot is None or x.tape is not self.tape:
                continue  # spec() refuses it below
            buffer = x.buffer
            offset = 0 if x.whole else address(x.value) - buffer.low
            traced[slot] = (buffer, x.whole, offset, buffer.constant, buffer.read)
        outer, self.soft = self.soft, []
        before = len(self.tape.records)
        self.entering = operation
        try:
            y = operation(*args, **kwargs)
        except BaseException as error:
            self.raised(error)
            raise
        finally:
            soft, self.soft = self.soft, outer
            self.entering = None
            self.leave()
        if self.reason is not None:
            return y
        results = y if type(y) in (tuple, list) else (y,)
        closed = _closed((args, kwargs))
        if not soft:
            # All it recorded is in steps; where doors inside it made steps that run the
            # engine's operation again, the whole operation runs again as one, if that
            # reads its arguments alone: its decisions then are taken again rather than
            # guarded (np.piecewise's conditions)
            if not closed or not any(type(step) is Reenter for step in self.steps[mark:]) \
                    or any(_stands_in(record) for record in self.tape.records[before:]) \
                    or not self._runs_again(results, traced, first, since, []):
                return y
        elif any(_stands_in(record) for record in self.tape.records[before:]):
            self.refuse("a value recomputed in the reverse pass inside an operation the "
                        "replay runs as the engine does")
            return y
        elif not closed:
            # Run again, a function among its arguments would read what it closed over in
            # the recorded call (its decisions on them, taken inside, are not guarded)
            self.refuse("an operation the replay runs as the engine does (an in-place rule) "
                        "given a function that reads values other than its arguments (a "
                        "closure, a default array, a bound method)")
            return y
        del self.steps[mark:]
        if any(type(item) is not Traced and isinstance(item, (np.ndarray, np.generic, float))
               for item in results):
            # (lu_factor_'s pivots: later steps would take the recorded call's as constants)
            self.refuse("an operation run as the engine runs it whose results include "
                        "plain values computed from the arrays (lu_factor_'s pivots)")
            return y
        buffers = {info[0] for info in traced.values()}
        # The slots the operation's own steps bound are filled by no step now: the reverse
        # pass's plans find no buffer whole there (``Program.plan``)
        self.wholes = {key: slot for key, slot in self.wholes.items() if slot < first}
        made = {}
        outputs = self._reentered(y, buffers, first, since, made if closed else None)
        self.steps.append(Reenter(operation, self.spec(args), self.spec(kwargs), traced,
                                  outputs, {slot: facts for slot, (_, facts)
                                            in made.items()} or None))
        return y

    def _runs_again(self, results, traced, first, since, made):
        """Whether an operation's ``results`` (a tuple) can be a :class:`Reenter` step's
        (``_reentered``, asked without binding or refusing): no plain values computed from
        the arrays, and each traced array a value of the program from before, a view of a
        buffer it was given (``traced``), or all of a buffer of its own, one each."""
        buffers = [info[0] for info in traced.values()]
        for item in results:
            kind = type(item)
            if kind is tuple or kind is list:
                if not self._runs_again(item, traced, first, since, made):
                    return False
            elif kind is Traced:
                if self.slots.get(id(item), first) < first or item.buffer in buffers:
                    continue
                if item.buffer.key < since or not item.whole \
                        or any(buffer is item.buffer for buffer in made):
                    return False
                made.append(item.buffer)
            elif isinstance(item, (np.ndarray, np.generic, float)) or kind is dict:
                return False
        return True

    def _reentered(self, y, buffers, first, since, made):
        """How a :class:`Reenter` step stores its result: views of the buffers it was given,
        or all of a buffer the operation made (its key ``since`` or later), which the step's
        replays give the recorded buffer's key (``made``: by slot, that buffer and its facts,
        ``_made_facts``; None where the operation may read what it was not given, and a
        new buffer is refused: ``_closed``). A result bound to a slot by a step of the
        operation's own, dropped (slot ``first`` on), is bound anew: no step fills that
        slot."""
        if type(y) is Traced:
            if self.slots.get(id(y), first) < first:
                return None  # a value of the program from before: its slot holds it
            if y.buffer not in buffers:
                # (a view of one, or a buffer that holds two results, is a place the later
                # records name, which its replay would have to find again; an array of the
                # program's the operation reached otherwise has a key no new buffer takes)
                if made is None or y.buffer.key < since or not y.whole \
                        or any(buffer is y.buffer for buffer, _ in made.values()):
                    self.refuse("an operation that records its own new arrays")
                    return None
                out = Out(self.bind(y), _value_of, y)
                made[out.slot] = (y.buffer, _made_facts(y.buffer))
                return out
            return Out(self.bind(y), _value_of, y)
        if type(y) in (tuple, list):
            return tuple(self._reentered(item, buffers, first, since, made) for item in y)
        return self._plain_output(y)

    def refuse(self, reason):
        if self.reason is None:
            self.reason = reason
            self.tape.recorder = None  # the rest of the call is traced as usual
            # and the arrays it holds let go: whether the program still holds a temporary
            # decides whether tracing reads or recomputes it, which is not always the same bits
            self.steps, self.slots, self.objects = [], {}, []
            self.buffers, self.wholes, self.large = [], {}, set()

    def hearing(self):
        """Whether f's own warnings handling is in force (``warnings.catch_warnings`` in f: its
        filters, a list it records to), under which f may hear or silence a warning the steps
        issue: a replay does not issue that one again, and the caller's filters pick the
        program (``hears``), as they set what f hears."""
        filters, shows, show = self.handling
        capture = self.capture  # (which swaps the filters while an operation runs)
        if (warnings.filters if capture is None else capture.filters) is filters \
                and warnings._showwarnmsg_impl is shows \
                and warnings.showwarning is show:
            return False
        self.hears = True
        return True

    def recomputed(self, record, step):
        """If the traced call's ``record``, of ``step``, keeps stand-ins for values it
        recomputes in the reverse pass (``recompute.Lazy``), the step's records will too, and
        find them as the traced reverse pass does (``plans_of``): keeping the values instead
        would hold memory tracing does not, and give other bits where the inputs they are
        recomputed from were put back within rounding."""
        if _stands_in(record):
            self.lazy[id(record)] = step

    def plans_of(self, record):
        """Where the traced reverse pass writes down how it finds the values ``record`` reads
        (``Recomputation.planner``): the list of its step's plans, or None."""
        step = self.lazy.pop(id(record), None)
        if step is None:
            return None
        step.later = []
        return step.later

    def release(self):
        """Let go of what the slots stood for, once the call's forward pass is over (before
        the collector runs again: fewer objects to walk)."""
        self.objects.clear()

    def bind(self, x):
        """The new slot of ``x``. A traced array is followed by a weak reference, which
        forgets its id when it dies (a new array may then have it): the recording holds no
        temporary longer than the program does, so its memory is a traced call's, and its
        reverse pass finds alive what a traced call finds alive (what it reads rather than
        recomputes: ``Program.plan``). Its buffer is remembered: all of them (``buffers``), by
        key the slot of the whole of each (``wholes``), and the large ones (``large``)."""
        slot = len(self.objects)
        key = id(x)
        self.slots[key] = slot
        if type(x) is not Traced:
            self.objects.append(x)
            value = x
        else:
            slots = self.slots
            self.objects.append(weakref.ref(
                x, lambda _, key=key, slot=slot: slots.get(key) == slot and slots.pop(key)))
            self.buffers.append(x.buffer)
            if x.whole:
                self.wholes.setdefault(x.buffer.key, slot)
            value = x.value
        if type(value) is np.ndarray and not (small(value) and (
                type(value.base) is not np.ndarray or small(value.base))):
            # let go after the last step that reads it, as tracing lets go of what it
            # recomputes rather than keeps (recompute.small): the replay's memory is tracing's
            # (a small view of a large array too, which holds all of its memory)
            self.large.add(slot)
        return slot

    def spec(self, x):
        """``x`` (an argument of an operation) with each array the program computes replaced
        by its :class:`Slot`."""
        kind = type(x)
        if kind is Traced:
            slot = self.slots.get(id(x))
            if slot is None or x.tape is not self.tape:
                self.refuse("an array mutad made outside the operations a replay redoes")
                return x
            return Slot(slot)
        if kind is tuple or kind is list:
            return kind(self.spec(item) for item in x)
        if kind is dict:
            return {key: self.spec(item) for key, item in x.items()}
        if kind is slice:  # bounds the program computed (x[:k]): guarded, as recorded
            parts = []
            for part in (x.start, x.stop, x.step):
                if type(part) is Traced:
                    self.guard(part, part.value.tobytes())
                    part = part.value[()]
                parts.append(part)
            return slice(*parts)
        if kind is np.ndarray and self.plain_arguments:
            held = self.plain_arguments.get(id(owner(x)))
            if held is not None:
                return self._plain_read(x, held)
        if (kind is np.ndarray or kind is Preexisting and x.dtype.kind in SELF_STANDING) \
                and writeable(x):  # (no FutureWarning on a broadcast)
            self._read_plain(x)  # (an index or a mask f made: a stand-in of its own)
        if kind in PYTHON_SCALARS:
            # the same on every call a program replays (a signature holds the values of the
            # numbers and strings among the arguments, and a step guards those it computes):
            # a number equal to an argument, the same object (CPython shares small ints), is
            # not read from the argument's slot (u[10] where steps is 10)
            return x
        slot = self.slots.get(id(x))
        if slot is not None and self.objects[slot] is x:
            return Slot(slot)
        return x

    def _read_plain(self, x):
        """A step reads the writable plain array ``x``: note its bytes, and refuse the
        recording if it changed since a step read it before."""
        digest = _digest(x)
        seen = self.plain_reads.setdefault(id(x), (x, digest))
        if seen[1] != digest:
            self.refuse("a plain array the program reads (an integer array f made) changed "
                        "between the operations that read it")

    def changed_plain(self):
        """Whether a plain array a step read holds other bytes now (``_read_plain``)."""
        return any(_digest(x) != digest for x, digest in self.plain_reads.values())

    def converted(self, t, plain):
        """Code no step redoes (SciPy's, given a spline's knots that f made) took the values
        of the constant ``t`` as the plain array ``plain``; later steps may hold what it made
        of them, the recorded call's. So a replay runs the program where ``t`` holds the same
        values here: guarded, its bytes (a constant computed from constants always does; one
        computed from the arguments fails where they change). And ``plain`` must hold those
        values until the call ends: neither a write into ``t`` (its buffer's version) nor
        one through ``plain`` (its digest) may follow, which ``changed_converted`` tells."""
        if self._slot_of(t, "a conversion to a plain array of") is None:
            return
        self.guard(t, _layout_and_bytes(t.value), _layout_and_bytes)
        self.conversions.append((t.buffer, t.buffer.version, plain, _digest(plain)))
        if plain.flags.writeable:
            self.plain_reads.setdefault(id(plain), (plain, self.conversions[-1][3]))

    def changed_converted(self):
        """Whether a constant converted to a plain array was written since (``converted``)."""
        return any(buffer.version != version or _digest(plain) != digest
                   for buffer, version, plain, digest in self.conversions)

    def _plain_read(self, x, held):
        """A step reads ``x``, memory of an argument the call does not trace: the argument's
        slot while its memory holds what the call was given (a replay's signature holds those
        bytes); else a copy of what ``x`` holds now, which f computed from them by plain
        NumPy code a replay does not run, and which the caller's array no longer holds when
        the program is replayed (nor, for a view of it, when the call is over)."""
        base, given = held
        slot = self.slots.get(id(x))
        if slot is not None and self.objects[slot] is x and base.tobytes() == given:
            return Slot(slot)
        key = (x.dtype.str, x.shape, x.strides, x.tobytes())
        snapshot = self.snapshots.get(key)
        if snapshot is None:
            snapshot = self.snapshots[key] = np.copy(x, order="K")
        return snapshot

    def outputs(self, y, depends=False):
        """How a step stores its result ``y``: a new slot for each traced array in it, and
        for each Python number, string or bool in it computed from traced values (``depends``:
        ``np.allclose``, ``np.count_nonzero``) the value it must be again (:class:`Same`)."""
        if depends and (type(y) in PYTHON_SCALARS or isinstance(y, np.dtype)):
            return Same(y)  # (a dtype: np.min_scalar_type(x[0]), float16 or float64)
        if depends and type(y) is dict:
            return self._plain_output(y)
        if type(y) is Traced:
            if y.tape is not self.tape:
                self.refuse("an array of another differentiation")
                return None
            if id(y) in self.slots:
                return None  # the array itself (``np.asarray(x)``, an ``out=``)
            convert = fresh_value if not y.buffer.constant else as_scalar if (
                y.value.dtype.kind in "iub" and stands_for_scalar(y)) else as_constant
            return Out(self.bind(y), convert, y, view=not y.whole)
        if type(y) in (tuple, list) or (isinstance(y, tuple) and hasattr(y, "_fields")):
            return tuple(self.outputs(item, depends) for item in y)
        return None

    def made_scalar(self, y):
        """``y``, a constant the last step stored, was made to stand for NumPy's scalar
        (``arraylike.numpy_scalar``: ``s.astype(int)`` of a scalar ``s``): that step stores
        it as NumPy's scalar too where it is an integer or a boolean (``as_scalar``)."""
        out = getattr(self.steps[-1], "outputs", None) if self.steps else None
        if type(out) is Out and out.slot == self.slots.get(id(y)) \
                and out.convert is as_constant and y.value.dtype.kind in "iub":
            out.convert = as_scalar

    def depends(self, items):
        """Whether a traced array, or a constant computed from one, is among ``items``."""
        return any(x.tape is self.tape and (not x.buffer.constant or id(x.buffer) in self.derived)
                   for x in within(items, Traced))

    def derive(self, y, depends):
        """``y``, an operation's result; if it ``depends`` on traced values, each NumPy array
        or scalar in it (a comparison's result, an index) becomes a constant of the tape, so
        that what Python decides on it is seen (``Traced.__bool__``, ``_converted``) and
        guarded. Python's own numbers (a shape) stay as they are."""
        if not depends:
            return y
        if type(y) is Traced:
            if y.buffer.constant:
                self.derived.add(id(y.buffer))
            return y
        if type(y) in (tuple, list):
            return type(y)(self.derive(item, True) for item in y)
        if isinstance(y, tuple) and hasattr(y, "_fields"):  # slogdet's SlogdetResult
            return type(y)(*(self.derive(item, True) for item in y))
        if type(y) is np.ndarray and y.dtype.kind == "O":
            self.refuse("an array of objects made by a call of traced arrays "
                        "(np.empty_like(x, dtype=object)), whose elements a replay does not guard")
            return as_objects(y)  # (takes traced values, as the traced run's)
        if isinstance(y, (np.ndarray, np.generic)):
            # a NumPy scalar as the read-only 0-d array that stands for one (hashable, a
            # number to the functions it is handed to), as tracing holds a scalar result
            t = constant(fresh_value(y) if isinstance(y, np.generic) else y, self.tape)
            self.derived.add(id(t.buffer))
            return t
        return y

    def watch(self, special=True):
        """Before a step: NumPy's floating-point error handling, a decision of Python's (an
        ``np.errstate`` block in ``f``), becomes a :class:`Modes` step where it changed. The
        categories ignored are ignored when replayed; those warned about (``"log"``, to
        ``debug.Warnings``) are counted, and a replay whose events are not the recorded
        ones is traced. Raising, or a handler of the user's, Python may act on: refused.
        So is scipy.special's error handling changed inside f (``scipy.special.errstate``),
        which the replay, run under the caller's, would not have its functions raise or warn
        as f asked: asked before each step that may consult it (``special``; not NumPy's
        own ufunc on arrays and numbers, ``_consults_special``, which reading it would cost
        a tenth of), and once the call is over (``special_left``)."""
        if special and self.special_left():
            return
        errors = ERRORS.get()  # (one object per handling set: the same, nothing changed)
        if errors is self.errors:
            return
        self.errors = errors
        modes, call = np.geterr(), np.geterrcall()
        if modes == self.modes and call is self.call:
            return
        self.modes, self.call = modes, call
        if type(call) is Warnings and call.heard is not self.heard:
            call.heard = self.heard  # the events it warns about, to compare when replayed
            self.writers.append(call)
        replayed = {}
        for category, mode in modes.items():
            if mode == "ignore":
                replayed[category] = "ignore"
            elif mode == "log" and type(call) is Warnings:
                replayed[category] = "log"
            else:
                self.refuse(f"floating-point errors ({category}) handled by {mode!r} "
                            "(np.errstate): Python may act on them")
                return
        self.steps.append(Modes(replayed))

    def special_left(self):
        """Whether scipy.special's error handling is another than as the call began (f
        changed it): then the recording is refused (``watch``)."""
        if self.special is not None and self.special[0]() != self.special[1]:
            self.refuse("scipy.special's error handling changed inside f (scipy.special."
                        "errstate): Python may act on its errors")
            return True
        return False

    def enter(self, special=True):
        """A step begins: the floating-point events heard since the last one ended came from
        operations on plain arrays, which no step redoes (``watch`` for the rest; ``special``:
        whether the step may consult scipy.special's error handling)."""
        if not self.depth:
            self.close()
            del self.heard[self.counted:]
            self.watch(special)
            self.opened = len(self.steps)
            self.capture = Capture()
        self.depth += 1

    def close(self):
        """The steps of the last operation are all recorded (those made after it returned
        too): the events it warned about came from one of them."""
        missing = self.counted - len(self.sources)
        if missing > 0:
            self.sources += [frozenset(id(step) for step in self.steps[self.opened:])] * missing

    def leave(self):
        self.depth -= 1
        if not self.depth:
            capture, self.capture = self.capture, None
            if capture is not None:
                issued = capture.stop()
                if issued:
                    self.issue(issued, self.heard[self.counted:])
            self.counted = len(self.heard)

    def issue(self, issued, events):
        """The warnings an operation issued (``Capture``), whatever the filters do with them:
        kept to compare with a replay's, on the same footing, and issued again, at their
        lines, under the filters in force (the caller's, or f's own), which show, ignore or
        raise them as they would NumPy's own call's. Those of floating-point events
        (``events``, ``debug.Warnings``) a replay hears otherwise (``Heard``)."""
        self.issuing = True  # (``Shown`` tells what f's own filters let through)
        try:
            for w in issued:
                if (str(w.message), w.filename, w.lineno) not in events:
                    self.shown.append((w.category, str(w.message)))
                    self.reissued.append(not self.hearing())
                    self.shown_at.append((w.filename, w.lineno))
                warn_at(w.message, w.category, w.filename, w.lineno)
        finally:
            self.issuing = False

    def _run(self, operation, *args, **kwargs):
        return self._run_step(True, operation, args, kwargs)

    def _run_step(self, special, operation, args, kwargs):
        """``operation(*args, **kwargs)`` as one step (``special``: ``enter``'s)."""
        self.enter(special)
        self.ready = False
        try:
            y = operation(*args, **kwargs)
        except BaseException as error:
            self.raised(error)
            raise
        finally:
            self.ready = True
            self.leave()
        return y

    def raised(self, error):
        """An operation raised ``error`` while recording: Python may catch it and go on (a
        ``FloatingPointError`` under ``np.errstate``, a ``LinAlgError``), a decision no step
        can guard, so the signature is traced."""
        self.refuse(f"an operation raised {type(error).__name__} while recording (Python may "
                    "catch it and take another path)")
        if isinstance(error, MutadError) and self.outside_argnums and self.mistraced is None:
            # a rule may refuse an array outside argnums, which the recording follows as an
            # input and tracing holds a constant (scipy.special.kv in its order): if f catches
            # it, this call took another path than tracing takes, and is traced again
            self.mistraced = str(error)

    # the doors ---------------------------------------------------------------------------

    def ufunc(self, ufunc, inputs, out, kwargs, rule, tape, values, pattern):
        before = len(tape.records)
        self.written = None
        target = out if type(out) is Traced and out.tape is tape else None
        constant_target = target is not None and target.buffer.constant
        # (asked before the write, as tracing asks it: ``inplace.record_write``)
        hidden = target is not None and target.value.nbytes > SMALL_WRITE \
            and unseen(tape, target.buffer, target.value, recording=True)
        entry = RULES.get(ufunc, NO_RULE)
        if out is not None and rule is None and (pattern or not constant_target) and (
                entry.complex_rules is not None and complex_among(values)
                or entry.elementwise is None and entry.reverse is not None):
            # a ufunc with a function's rule (matmul), which the engine computes, then assigns
            # into ``out`` (``operations.apply_function``): the two steps that does
            # (an operator, A @= B, passes no keywords: None)
            settings = {k: v for k, v in (kwargs or {}).items() if k != "out"}
            y = self.ufunc(ufunc, inputs, None, settings, rule, tape, values, pattern)
            return assign(out, y)
        if out is None and not kwargs and rule is None and pattern and tape.outer is None:
            y = self._run_step(_consults_special(ufunc, values), observed_ufunc,
                               (ufunc, inputs, tape, values, pattern), {})
        else:
            y = self._run(unwrapped_ufunc, ufunc, inputs, out, kwargs, rule, tape, values,
                          pattern)
        if self.reason is not None:
            return y
        slots = self.slots
        args = []
        for x in inputs:  # self.spec, for the common case inline
            slot = slots.get(id(x)) if type(x) is Traced and x.tape is tape else None
            args.append(self.spec(x) if slot is None else Slot(slot))
        settings = {}
        if kwargs:
            settings = self.spec({k: v for k, v in kwargs.items() if k != "out"})
        new = tape.records[before:]
        rule = rule or entry.elementwise
        if out is not None:
            if target is None:
                self.refuse(f"np.{ufunc.__name__}(..., out=...) into an array the "
                            "differentiation does not follow")
            elif type(into := self.spec(target)) is not Slot:
                pass  # (refused: a view mutad made of it, np.ndarray(buffer=x), holds no slot)
            elif constant_target and target.buffer.constant:  # constants into a constant
                self.derive(target, self.depends(inputs))
                self.steps.append(ConstantWrite(_ufunc_into(ufunc, settings), into.index, args,
                                                new[0].written if new else None, None))
            elif len(new) == 1 and type(new[0]) is Write and rule is not None \
                    and self.written is not None:
                plan, apart = self.written
                element = type(target.value) is np.ndarray and target.value.shape == ()
                step = ElementwiseWrite(plan, args, into.index, apart, new[0],
                                        target.buffer.key, target.whole, element, hidden)
                self.steps.append(step)
                self.recomputed(new[0], step)
                step.unplanned = new[0].undo_kind == "checkpoint" and any(
                    _recomputable(inputs[i], values[i], tape) for i in step.plan.others_at)
                if tape.recomputation is not None and tape.recomputation.budget is not None:
                    step.saved = new[0].undo_kind in ("checkpoint", "rebuild")
                    step.chained = _chained(tape.recomputation, new[0], target.buffer)
            else:
                self.refuse(f"np.{ufunc.__name__}(..., out=...) of this kind")
            return y
        if not new:
            depends = self.depends(inputs)
            y = self.derive(y, depends)
            self.steps.append(Call(ufunc, args, settings, self.outputs(y, depends)))
        elif len(new) == 1 and type(new[0]) is Elementwise:
            reads = differentiable(ufunc, rule, pattern, len(inputs))[1]
            self.steps.append(Pure(ufunc, args, settings, self.bind(y), rule, reads, new[0]))
            self.recomputed(new[0], self.steps[-1])
        elif len(new) == 1 and (new[0].pullback is function_pullback
                                or type(new[0]) is Product):
            # np.matmul's rule (run as its plain functions: observed_ufunc), or a ufunc's rule
            # for complex values (np.abs: unwrapped_ufunc)
            entry = RULES[ufunc]
            rule = entry.complex_rules[0] if entry.complex_rules is not None and complex_among(
                values) else entry.reverse
            self._function(rule, inputs, settings, y, new[0])
        else:
            self.refuse(f"np.{ufunc.__name__} recorded as {len(new)} operations")
        return y

    def function(self, name, rule, args, kwargs, tape):
        settings = {k: v for k, v in kwargs.items() if k != "out"}
        out = kwargs.get("out")
        if out is not None:  # computed, then assigned, as ``operations.apply_function`` does
            y = self.function(name, rule, args, settings, tape)
            if isinstance(y, (tuple, list)):
                self.refuse(f"{name}(..., out=...) with several outputs")
                raise UnsupportedOperationError(f"{name}(..., out=...) with several outputs.")
            written = integers_assigned(out, y)  # (k integers f made: a guarded cast)
            return assign(out, y) if written is None else written
        before = len(tape.records)
        traced = [x for x in _items(args)
                  if type(x) is Traced and x.tape is tape and not x.buffer.constant]
        y = self._run(apply_function, name, rule, args, dict(kwargs), tape)
        if self.reason is not None:
            return y
        if _holds_arrays_of_the_call(tape, (args, settings)):
            self.refuse(f"{name} given arrays of the call held by an object it keeps (a "
                        "closure over them, such as solve_ivp's fun, or the arguments it "
                        "passes on, args=): a replay would read the recorded call's arrays")
            return y
        new = tape.records[before:]
        if not new:
            depends = self.depends(args)
            y = self.derive(y, depends)
            self.steps.append(Call(_first_of(rule), self.spec(args), self.spec(settings),
                                   self.outputs(y, depends)))
        elif len(new) == 1 and new[0].pullback is function_pullback:
            y = self._plain_outputs_derived(y)
            self._function(rule, args, self.spec(settings), y, new[0], traced)
        else:
            self.refuse(f"{name} recorded as {len(new)} operations")
        return y

    def _plain_outputs_derived(self, y):
        """A rule's result with each plain array in its items (``lu_factor``'s pivots, an
        integer array computed from the traced operands) made a constant the program computes
        (``derive``): what Python decides on it is seen and guarded, and the steps that read it
        read it from its slot."""
        if type(y) is tuple or (isinstance(y, tuple) and hasattr(y, "_fields")):
            items = [self.derive(item, True) if isinstance(item, (np.ndarray, np.generic))
                     else item for item in y]
            return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
        return y

    def _function(self, rule, args, settings, y, record, traced=None):
        if traced is None:
            traced = [x for x in _items(args) if type(x) is Traced and x.tape is self.tape
                      and not x.buffer.constant]
        leaves = {x.buffer for x in traced}
        outputs = self._function_outputs(y, leaves)
        spec = self.spec(args)  # (refuses an array of another differentiation: a cache's)
        if self.reason is not None:  # refused: the recording's slots are gone
            return
        dims = None if _offer(rule) is None else tuple(
            np.ndim(x.value if type(x) is Traced else x) for x in args)
        self.steps.append(Function(rule, spec, settings, outputs,
                                   [self.slots[id(x)] for x in traced], record, dims))

    def _function_outputs(self, y, leaves):
        if type(y) is Traced:
            if id(y) in self.slots:
                return None
            view = y.buffer in leaves
            convert = as_constant if y.buffer.constant else _as_is if view else as_fresh
            return Out(self.bind(y), convert, y, view)
        if type(y) in (tuple, list) or (isinstance(y, tuple) and hasattr(y, "_fields")):
            return tuple(self._function_outputs(item, leaves) for item in y)
        if isinstance(y, (np.ndarray, np.generic)):
            self.refuse("a function whose result is a plain array computed from traced ones")
        return self._plain_output(y)

    def _plain_output(self, y):
        """How a step stores a Python value in the result of an operation on traced values,
        computed from them (scipy's lstsq's rank, quad's infodict of counts): a number the
        replay must compute again (:class:`Same`); a dict, which no step checks, refuses."""
        if type(y) in PYTHON_SCALARS:
            return Same(y)
        if type(y) is dict and y:
            self.refuse("a function whose result holds a dict computed from traced values")
        return None

    def _written_out(self, function, items):
        """Whether ``function`` writes values computed from traced ones among ``items`` to a
        file (``WRITTEN_OUT``): the recording is refused."""
        if function in WRITTEN_OUT and self.depends(items):
            self.refuse(f"np.{function.__name__} of traced values: a replay writes them again, "
                        "but what f reads back of the file it runs as recorded")
            return True
        return False

    def on_constants(self, call, args, kwargs, tape, written):
        if self._written_out(call, (*args, kwargs)):
            return on_constants(call, args, kwargs, tape, written)
        if not _closed((call, args, kwargs)):
            # (its step calls it again: a function closing over the call's values would read
            # the recorded call's, np.apply_along_axis(lambda r: r * m, 1, ones))
            self.refuse(f"{function_name(call)} of constants given a function that reads "
                        "values other than its arguments (a closure, a default array, a bound "
                        "method)")
            return on_constants(call, args, kwargs, tape, written)
        targets = {id(t): t for t in written if type(t) is Traced or isinstance(t, np.ndarray)}
        if targets:
            return self._constants_written(call, args, kwargs, tape, written,
                                           list(targets.values()))
        y = self._run(on_constants, call, args, kwargs, tape, written)
        depends = self.depends((*args, kwargs))
        y = self.derive(y, depends)
        self.steps.append(Call(call, self.spec(args), self.spec(kwargs), self.outputs(y, depends)))
        return y

    def _constants_written(self, call, args, kwargs, tape, written, targets):
        """A function of constants that may write into ``targets``: one that returned a value
        and wrote none of them (a NumPy function mutad composes, not knowing which of its
        arguments it writes: ``np.diagflat``, ``np.setdiff1d``) is a call, whose replays are
        checked to write nothing either; one writing into a constant array of the program
        (``np.fill_diagonal(A, v)``, ``np.put``, ``np.copyto`` into an array allocated in the
        function) is redone as a :class:`ConstantWrite` of the call, as ``a[k] = c`` and
        ``np.add(a, c, out=a)`` are, its bytes saved first where a record read them
        (``inplace.on_constants``). A write into an array the program does not follow, into
        several, or a call that writes and returns a value: refused (traced, as it ran)."""
        before = len(tape.records)
        held = [(t.value if type(t) is Traced else t).tobytes() for t in targets]
        y = self._run(on_constants, call, args, kwargs, tape, written)
        if self.reason is not None:
            return y
        wrote = bool(tape.records[before:]) or any(
            (t.value if type(t) is Traced else t).tobytes() != b for t, b in zip(targets, held))
        if y is not None:
            if wrote:
                self.refuse("a function that writes into an array and returns a value")
                return y
            depends = self.depends((*args, kwargs))
            y = self.derive(y, depends)
            self.steps.append(Call(_writing_nothing(call), self.spec(args), self.spec(kwargs),
                                   self.outputs(y, depends)))
            return y
        target = targets[0]
        if len(targets) > 1 or type(target) is not Traced or target.tape is not tape \
                or not target.buffer.constant:
            self.refuse("a function that may write into its arguments")
            return y
        slot = self.spec(target)
        if type(slot) is not Slot:
            self.refuse("a write into an array the recording has not bound")
            return y
        self.derive(target, self.depends((args, kwargs)))
        new = tape.records[before:]
        self.steps.append(ConstantWrite(_calling(call), slot.index,
                                        (self.spec(args), self.spec(kwargs)),
                                        new[0].written if new else None, None))
        return y

    def nondiff(self, function, args, kwargs):
        """A function without a derivative (a comparison, an index): run on the plain values,
        its result derived (``derive``). Written into an array the program holds
        (``np.argmax(x, out=k)``), the decision is read later as that array's values, which
        the steps reading it hold as recorded: such a call is traced."""
        position = out_position(function)
        out = kwargs.get("out", args[position] if position is not None and len(args) > position
                         else None)
        if out is not None and type(out) is not Traced and self.depends((*args, kwargs)):
            self.refuse(f"{getattr(function, '__name__', 'a function')}(..., out=...) of traced "
                        "values into an array the program reads afterwards (a decision)")
            return function(*plain(args), **plain(kwargs))
        if self._written_out(function, (*args, kwargs)):
            return function(*plain(args), **plain(kwargs))
        depends = self.depends((*args, kwargs))
        y = self.derive(self._run(function, *plain(args), **plain(kwargs)), depends)
        self.steps.append(Call(function, self.spec(args), self.spec(kwargs),
                               self.outputs(y, depends)))
        return y

    def getitem(self, x, key):
        tape = self.tape
        before = len(tape.records)
        y = self._run(Traced._indexed, x, key)
        if self.reason is not None:
            return y
        new = tape.records[before:]
        source, index = self.spec(x), self.spec(key)
        if type(source) is not Slot:
            return y
        if not new:
            depends = self.depends((x, key))
            y = self.derive(y, depends)
            self.steps.append(Call(operator.getitem, (source, index), {}, self.outputs(y, depends)))
        elif len(new) == 1 and type(new[0]) is Gathered:
            self.steps.append(Gather(source.index, index, self.bind(y), new[0]))
        else:
            self.refuse("an index recorded as several operations")
        return y

    def view(self, x, key, y):
        """``setitem`` made ``y = x[key]``, a view, to assign into it."""
        source = self.spec(x)
        if type(source) is Slot:
            self.steps.append(Call(operator.getitem, (source, self.spec(key)), {},
                                   Out(self.bind(y), _as_is, y)))

    def constant_setitem(self, x, key, value):
        tape = self.tape
        before = len(tape.records)
        self._run(Traced.__setitem__, x, key, value)
        self.derive(x, self.depends((key, value)))
        new = tape.records[before:]
        target = self.spec(x)
        if type(target) is Slot:
            self.steps.append(ConstantWrite(operator.setitem, target.index,
                                            (self.spec(key), self.spec(value)),
                                            new[0].written if new else None, self.spec(key)))

    def allocated(self, t, made):
        if made is None:
            self.refuse("an array allocated in the function by a call a replay cannot redo")
            return
        function, args, kwargs = made
        # The mode's factory handed NumPy the stand-ins of pre-existing arrays among its
        # operands (``np.empty_like(U0)``), whose own ``__array_function__`` gave it the plain
        # views, called from mutad's code: a plain result. Called from the replay's, a
        # stand-in would make it a constant of the replay's tape instead, a traced array where
        # the recording held a plain one. So the step reads the plain views, as the
        # operations that read the stand-ins do.
        args, kwargs = _read_views((args, kwargs))
        if self.depends((args, kwargs)):  # a stop_gradient: its values are the traced ones
            self.derived.add(id(t.buffer))  # so Python's decisions on them are guarded
        self.steps.append(Call(function, self.spec(args), self.spec(kwargs),
                               Out(self.bind(t), as_constant, t)))

    def _slot_of(self, x, what):
        """The slot of ``x``, or None if the program does not make it (then it is refused: a
        step on it would read an array the program does not hold)."""
        slot = self.slots.get(id(x))
        if slot is None:
            self.refuse(f"{what} an array mutad made outside the operations a replay redoes")
        return slot

    def reshaped(self, x, shape):
        slot = self._slot_of(x, "a reshape in place of")
        if slot is not None:
            self.steps.append(Reshape(slot, shape))

    def put_value(self, y, function, args):
        slot = self._slot_of(y, f"math.{function.__name__} giving")
        if slot is None:
            return
        step = self.steps[-1] if self.steps else None
        if type(step) is Pure and step.out == slot:
            # The step that made y gives math's value itself: its record, which reads y (exp's
            # partial), reads math's value, as tracing's reads the 0-d array it was put into
            step.exact = (function, self.spec(args))
        else:
            self.steps.append(PutValue(slot, function, self.spec(args)))

    def scalar_math(self, y, operation, nan_only=False):
        """``y`` is ``operation`` (``+``, ``*``, ``**``) of scalars, whose value the engine
        takes from NumPy's scalar math (``arraylike._scalar_math``; ``nan_only``: where it is
        NaN, a real sum or product): so does the step that made it."""
        slot = self.slots.get(id(y))
        step = self.steps[-1] if self.steps else None
        if type(step) is Pure and step.out == slot and nan_only:
            step.scalar_nan = operation  # (its operators on NumPy's scalars: ``prepare``)
        elif type(step) is Pure and step.out == slot or type(step) is Function \
                and not step.lean and type(step.outputs) is Out and step.outputs.slot == slot:
            step.scalar_math = operation
        elif type(step) is Call and type(step.outputs) is Out and step.outputs.slot == slot \
                and type(step.function) is np.ufunc and not step.kwargs \
                and type(step.args) in (tuple, list):  # of values without a derivative
            step.function = functools.partial(_on_scalars, operation,
                                              [type(a) is Slot for a in step.args])
        else:
            self.refuse("an operation of NumPy's scalars recorded otherwise")

    def pythons_own(self, operation, operands, kind):
        """Python's ``operation`` of the Python numbers ``operands`` stand for gave a number of
        ``kind``, not NumPy's (``arraylike._pythons_own``): a replay asks again."""
        self.steps.append(PythonsOwn(operation, tuple(self.spec(x) for x in operands), kind))

    def events_of(self, operation, scalars):
        """``operation`` of NumPy's ``scalars`` run again for the floating-point events its
        scalar math raises (``arraylike.integer_events``): those of the operation whose steps
        were recorded last, as its step, computing so, raises them when replayed."""
        self.depth += 1
        try:
            operation(*scalars)
        finally:
            self.leave()

    def text_read(self, x, key, index, element):
        """Python read ``element``, NumPy's ``str`` or ``bytes`` at ``x[key]`` (``index``, as
        NumPy takes ``key``; text carries no derivative, so f gets NumPy's own): where the text
        or the index was computed from traced values (``x.astype(str)``,
        ``s[np.argmax(x)]``), a replay reads the same."""
        for t in within(key, Traced):
            if self.depends((t,)):
                self.guard(t, t.value.tobytes())
        if self.depends((x,)):
            self.guard(x, element, lambda value: text_element(value, index))

    def warned(self, message, category, filename, lineno):
        """Code outside any step issued this warning, decided by what the program holds (the
        pattern of a sparse matrix a write changes, ``TracedSparse.__setitem__``): a replay
        issues it again (inside a step, which issues it again itself, nothing to do), as
        ``issue`` keeps an operation's."""
        if self.ready:
            self.steps.append(Warned(message, category, filename, lineno))
            self.shown.append((category, str(message)))
            self.reissued.append(not self.hearing())
            self.shown_at.append((filename, lineno))

    def settle(self, t, what):
        """Code that takes plain values alone read those of ``t`` (``arraylike.settled``: an
        index, a count the function computed), which the program then holds as recorded: a
        replay checks they are the same again (their dtype, shape and bytes), else records
        again; where the program does not make ``t`` (it cannot check them), it is refused,
        saying ``what``."""
        slot = self.slots.get(id(t))
        if slot is None:
            self.refuse(what)
            return
        self.steps.append(Guard(slot, _layout_and_bytes, _layout_and_bytes(t.value),
                                f"{what}, which took other values"))

    def guard(self, x, taken, decide=None, why=None):
        """Python read ``taken`` of ``x``: ``decide(value)``, or its truth, or its bytes
        (``why``: the decision in words, for ``Guard``)."""
        slot = self._slot_of(x, "a decision on")
        if slot is None:
            return
        if type(taken) is str and np.get_printoptions() != self.printing:
            # (a replay's guard writes the string under the caller's print options)
            self.refuse("a string of a traced value written under print options f set "
                        "(np.printoptions)")
            return
        if decide is None:
            decide = bool if type(taken) is bool else _bytes
        self.steps.append(Guard(slot, decide, taken, why))


def _chained(recomputation, record, buffer):
    """The ``recompute.Rebuild`` with which the chain of ``buffer`` took the write ``record``
    just made into it, its undo or (a write undone by its inverse that joined the chain) only
    how the chain redoes it; None if no chain took it. Its first redo will write down how it
    found its inputs (``plans``), for the replay's chain to find them so (``Program.plan``)."""
    rebuild = record.undo
    if type(rebuild) is not Rebuild:
        chain = recomputation.chains.get(buffer.key)
        if chain is None or chain.last != buffer.version:  # (its last write is not this one)
            return None
        rebuild = chain.writes[-1]
    rebuild.plans = []
    return rebuild


def _ufunc_into(ufunc, settings):
    def write(target, *args):
        ufunc(*args, out=target, **settings)
    return write


def _calling(function):
    """A :class:`ConstantWrite`'s ``write`` of a call that writes into one of its own
    arguments: the target is among them."""
    def write(target, args, kwargs):
        function(*args, **kwargs)
    return write


def _writing_nothing(function):
    """``function`` (a call on constants whose recording wrote none of its arguments), raising
    :class:`GuardFailed` where a replay's call writes into one of its arrays (the values
    decide: ``np.nan_to_num(x, copy=False)`` of a NaN), which the recording did not save."""
    def call(*args, **kwargs):
        arrays = [x for x in flatten((args, kwargs))[0] if type(x) is np.ndarray]
        held = [x.tobytes() for x in arrays]
        y = function(*args, **kwargs)
        if any(x.tobytes() != b for x, b in zip(arrays, held)):
            raise GuardFailed
        return y
    return call


def _first_of(rule):
    """What computes the value alone of ``rule``'s call, for a step that records no back (a
    view's): the plain function a linear map's rule computes its value with
    (``rule.plain``), without the template and back the rule would make for nothing; else
    the rule's first output. Only of the rule itself or of one wrapper that hands its value
    on (``registry.padded``): another wrapper may change the value, and is called."""
    inner = getattr(rule, "__wrapped__", rule)
    plain = None if hasattr(inner, "__wrapped__") else vars(inner).get("plain")
    if plain is not None:
        return plain

    def outputs(*args, **kwargs):
        return rule(*args, **kwargs)[0]
    return outputs


def _items(args):
    for x in args:
        if type(x) in (list, tuple):
            yield from x
        else:
            yield x


# ----------------------------------------------------------------------------------------------
# Programs


_NUMPYS_UFUNCS = frozenset(u for u in vars(np).values() if type(u) is np.ufunc)
"""NumPy's own ufuncs (np.multiply), which never consult scipy.special's error handling."""

_PLAIN_OPERANDS = frozenset((np.ndarray, float, int, bool, complex))
"""The operands a NumPy ufunc takes without calling code of another library (``__array__``)."""


def _consults_special(ufunc, values):
    """Whether ``ufunc`` on ``values`` may consult scipy.special's error handling: not
    NumPy's own ufunc on NumPy's arrays and Python's numbers (``Recorder.watch``)."""
    return ufunc not in _NUMPYS_UFUNCS or any(
        type(value) not in _PLAIN_OPERANDS for value in values)


def _stands_in(record):
    """Whether ``record`` keeps a stand-in for a value recomputed in the reverse pass."""
    return type(record.kept) is list and any(type(k) is Lazy for k in record.kept)


def _recomputable(x, value, tape):
    """Whether tracing would hold a stand-in for the operand ``x`` (of ``value``) of a write
    just made, if the write's inverse read it (``Recomputation.hold``)."""
    return type(x) is Traced and x.tape is tape and type(value) is np.ndarray \
        and recomputable(x.buffer, value)


class Program:
    """The steps of one recorded call, and how to run them on another call's arguments."""

    def __init__(self, recorder, run, y, aux=None):
        self.steps = recorder.steps
        # (message, file, line) of the warnings issued, those f did not hear issued again
        self.warned = [w for w in recorder.heard.issued if id(w) not in recorder.heard.quiet]
        # and of each, the message and the steps one of which must raise it (``Heard``)
        self.kinds = [(message, steps) for (message, _, _), steps
                      in zip(recorder.heard, recorder.sources, strict=True)]
        # the ids of those steps (kept out of compiled blocks: ``with_blocks``)
        self.raising = frozenset().union(*(steps for _, steps in self.kinds))
        self.shown, self.reissued = recorder.shown, recorder.reissued
        self.shown_at = recorder.shown_at
        # and those its reverse pass heard (the traced call's: ``Recording.end``), their kinds
        # once it is over (``prepare``)
        self.warned_back, self.back_kinds = [], None
        # (leaves, rebuild, scalars) of the aux output: leaves Slots or values, and per leaf
        # whether it stands for a number (``_scalar``)
        self.aux = aux
        self.size = len(recorder.objects)
        self.policy = run.tape.policy
        recomputation = run.tape.recomputation
        # the memory budget (``memory=``) its chains rebuild writes under, None if none
        self.budget = None if recomputation is None else recomputation.budget
        self.replays = 0  # successful replays
        self.prepared = False  # (before the first run, which a failing guard may end early)
        # per leaf: (slot, a float scalar's type or None), slot None if not an array
        self.inputs = []
        self.places = []  # per leaf: where its gradient is, None if it has none
        self.saves = {}  # buffer key -> the leaves to save before its first write
        for j, (leaf, t) in enumerate(zip(run.leaves, run.traced, strict=True)):
            slot = recorder.slots.get(id(t if t is not None else leaf))
            self.inputs.append((slot, run.scalar[j]))
            self.places.append(None if t is None else _place(t))
            if t is not None and writeable(t.value) and not run.scalar[j]:
                self.saves.setdefault(t.buffer.key, []).append(j)
        # per leaf, whether no other leaf has its buffer: its shadow is handed over, not copied
        keys = collections.Counter(p.buffer.key for p in self.places if p is not None)
        # per leaf: (place, whether handed over, whether it stands for a float scalar)
        self.returned = [(p, p is not None and keys[p.buffer.key] == 1, scalar)
                         for p, (_, scalar) in zip(self.places, self.inputs, strict=True)]
        self.output = recorder.slots.get(id(y)) if type(y) is Traced else None
        self.output_place = _place(y) if type(y) is Traced else None
        self.seed = None  # the output's buffer, where its shadow is made directly (prepare)
        # whether it stands for NumPy's scalar, returned as one (a 0-d array f made, such as
        # np.asarray(x @ x) or a spline's value at one point, stays a 0-d array: api._returned)
        self.scalar_output = type(y) is Traced and _scalar(y)
        self.constant = None if type(y) is Traced else y
        self.output_as = None  # what makes the output's value the object f returned (``end``)
        # the slots of the values returned (the output, the aux output's arrays): read once
        # the steps are over, never let go before
        self.returned_slots = {self.output} - {None} | (
            set() if aux is None else {x.index for x in aux[0] if type(x) is Slot})
        # the large temporaries, let go after the last step that reads them (``prepare``)
        self.large = recorder.large - self.returned_slots
        # Values its reverse pass recomputes (``plan``): the slot of its ``Recomputed``, the
        # slots it reads alive then, the buffers it recomputes, and how many records read
        # each one recomputed for several from the ``Recomputed``'s cache
        self.recomputes = None
        self.alive, self.recomputed, self.cached = {}, set(), {}
        # the slots its chains read (all of each buffer rebuilt, what their redone writes read
        # alive): held for the whole call, as tracing's chains hold them (:class:`Chained`)
        self.held = set()
        self.read = None  # the plain arrays the steps read (what f closes over): aliases()
        self.read_owners = None  # the ids of their owners, where each owns its memory
        self.modes = {}  # the error handling of its first Modes step, set as the steps start
        self.hearing = None  # that handling, its events heard (``prepare``)
        # The categories its reverse pass logs (``debug.logged_categories``) under the caller's
        # error handling, which picked the program, set with their events heard (a
        # :class:`Hearing`, None where it logs none), and whether that prints and calls
        # nothing then (its events are heard as they come): kept where it calls and logs
        # nothing
        self.logged = None
        self.reached = None  # what the classes of the arguments reach (``Replayed``)
        # (read, value) of the settings that picked it (``_settings``): the caller's warnings
        # filters where f heard a warning the steps issued
        self.settings = ((_filters_number, recorder.filters),) if recorder.hears else ()

    def plan(self, recorder):
        """Once the traced call's reverse pass is over: the plans it wrote down for the steps
        whose records recompute values (``Recorder.plans_of``), over the program's slots;
        raises :class:`Unplanned` where that cannot be."""
        if recorder.lazy and self.output is not None:  # (a constant result: no reverse pass)
            raise Unplanned("a record whose values the reverse pass did not recompute")
        slots = recorder.wholes
        planned = [step for step in self.steps if getattr(step, "later", None) is not None]
        chained = [step for step in self.steps
                   if type(step) is ElementwiseWrite and step.chained is not None]
        if not planned and not chained:
            return
        self.recomputes = self.size
        self.size += 1
        stored = {}
        for step in reversed(planned):  # in the order of the reverse pass
            step.later = (self.recomputes,
                          [(i, _replan(plan, slots, self, stored)) for i, plan in step.later])
        for step in chained:
            step.chained = self._chained(step, step.chained, slots)
        # What the chains read alive is held for the whole call: the records that read it
        # alive too do not let it go after the last of them (a chain redoes a write from it
        # later, when it rebuilds an earlier state of its buffer)
        for slot in self.held:
            self.alive.pop(slot, None)
        for step in planned:
            slot, plans = step.later
            step.later = (slot, [(i, _reading(plan, True)) for i, plan in plans])
        self.large |= {slots[key] for key in self.recomputed if key in slots} - self.returned_slots

    def _chained(self, step, rebuild, slots):
        """The :class:`Chained` of ``step``, a write the recorded call's chain rebuilt
        (``rebuild``, its undo then, whose ``plans`` its first redo wrote down)."""
        key = rebuild.chain.buffer.key
        whole = slots.get(key)
        if whole is None:
            raise Unplanned("a rebuilt write into an array the replay does not hold whole")
        self.held.add(whole)
        inputs, copies = None, []
        if rebuild.plans:
            inputs = []
            for i, (arg, plan) in enumerate(zip(step.args, rebuild.plans[0][2], strict=True)):
                if type(arg) is not Slot:
                    if any(within(arg, Slot)):
                        raise Unplanned("a rebuilt write of a list of values the program "
                                        "computes")
                    inputs.append((CONSTANT, arg))
                elif plan[0] is CONSTANT:  # a small value no reference follows: copied
                    if type(plan[1]) is np.ndarray and not small(plan[1]):
                        raise Unplanned("a rebuilt write of a large value kept as it is")
                    inputs.append(None)
                    copies.append(i)
                else:
                    inputs.append(_replan(plan, slots, self, {}, key))
            inputs = _reading_all(inputs)
        return Chained(self.recomputes, rebuild, whole, self.budget, inputs, tuple(copies))

    def aliases(self, leaves):
        """Whether an argument shares memory with an array the program reads as a constant:
        tracing would keep that array read-only, and refuse a write into the argument."""
        if self.read is None:  # found here, not while the first call records
            self.read = list({id(a): a for step in self.steps
                              for name in _fields(type(step))[0]
                              for a in within(getattr(step, name, None), np.ndarray)}.values())
            # Their owners, where each owns its memory: an allocation of its own, which no
            # other array's owner overlaps (an owner and its flag are fixed for good)
            owners = [owner(a) for a in self.read]
            self.read_owners = {id(o) for o in owners} if all(
                o.flags.owndata for o in owners) else None
        read, read_owners = self.read, self.read_owners
        for x in leaves:
            if type(x) is not np.ndarray or not read:
                continue
            if read_owners is not None:
                base = x if x.base is None else owner(x)  # (owner's answer, at once)
                if id(base) not in read_owners and base.flags.owndata:
                    continue  # apart from every array read (np.may_share_memory's answer,
                    # which compares the bounds of their memory, at a tenth of its cost)
            if any(np.may_share_memory(x, a) for a in read):
                return True
        return False

    def prepare(self):
        """What the steps need to replay, made before the first replay rather than while the
        first call records (which is timed against a traced call)."""
        # (The lean pullbacks add into the shadows of whole buffers directly, which would be
        # wrong for a shadow two buffers share; only the engine's path for large elementwise
        # cotangents makes those (``elementwise._sharing``), for buffers as large as the
        # cotangent, and a lean step's whole buffers are small.)
        self.back_kinds = [_numpys(message) for message, _, _ in self.warned_back]
        if self.steps and type(self.steps[0]) is Modes:  # set with the replay's own callback
            self.modes = self.steps[0].modes
            self.steps = self.steps[1:]
        self.hearing = Hearing(Heard(self.raising), self.modes)
        # The output's buffer, where ``Shadows.add(place, 1.0)`` into shadows that have none
        # makes its shadow a fresh array of ones and nothing else (a whole float64 buffer in
        # order, in NumPy's memory): made so by ``_seeded``, without the add's questions
        place = self.output_place
        self.seed = place if type(place) is Buffer and place.c_contiguous \
            and place.device is None and place.dtype == np.float64 else None
        # (The slots each step reads, found once for both: preparing a step changes none)
        self.steps, reads = with_frees(self.steps, self.large - self.alive.keys() - self.held,
                                       [_read_slots(step) for step in self.steps])
        for step in self.steps:
            if hasattr(step, "prepare"):
                step.prepare()
        # Its runs of small elementwise steps as straight-line Python (:mod:`blocks`), each
        # compiled as the first replay reaches it: a signature called again is likely to be
        # called many times, and the first replay runs the compiled lines (interpreted, its
        # steps would cost about what the traced call did, on top of compiling them); where
        # a guard fails on the way, the blocks after it were never compiled.
        held = [*self.returned_slots, *self.alive, *self.held]
        self.steps = with_blocks(self.steps, held, self.saves, self.raising, reads)
        self.prepared = True

    def run(self, leaves, modes):
        """``(value, gradients per leaf)`` for the flattened arguments ``leaves``, under the
        caller's floating-point error handling ``modes`` (``np.geterr()``, which picked the
        program); raises :class:`GuardFailed` (the caller's arrays as they were) if a decision
        goes otherwise.

        A long program is many objects the cyclic garbage collector would walk on every
        collection its records trigger (at 20,000 operations, half the replay's time, and
        most of the time its steps take to be prepared and compiled); what a replay frees,
        it frees by reference count, so the collector waits until it ends."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._run(leaves, modes)
        finally:
            if collecting:
                gc.enable()

    def _run(self, leaves, modes):
        for read, value in self.settings:
            now = read()
            if now is not value and now != value:
                raise GuardFailed
        if not self.prepared:
            self.prepare()
        values = [None] * self.size
        if self.recomputes is not None:
            values[self.recomputes] = Recomputed(self.cached, self.alive, values)
        for x, (slot, scalar) in zip(leaves, self.inputs, strict=True):
            if slot is not None:  # a Python float as it is (arraylike.weak)
                values[slot] = fresh_value(np.result_type(x).type(x)) \
                    if scalar and type(x) is not float else x
        # (a replay keeps what tracing keeps, and recomputes nothing: Recorder.recomputed)
        tape = ReverseTape(self.policy, None, recomputes=False)
        tape.caller = nowhere  # what the engine records for a step (Reenter) needs no line
        originals = Originals()
        for key, saved in self.saves.items():
            tape.guard(key, lambda saved=saved: [originals.keep(leaves[j]) for j in saved])
        try:
            hearing = self.hearing
            heard = hearing.heard
            try:
                capture = Capture()  # (every warning, as the recording kept them)
                try:
                    token = hearing.set()
                    # The engine's own operations (Reenter) run on the tape while the steps
                    # run; its reverse pass runs as tracing's does, the tape no longer running
                    # but reversing (``reverse.REVERSING``): a differentiation a pullback
                    # starts (a custom rule's back that calls ``mutad.pullback``) is not
                    # nested in the replay's, and a rule's pullback sees the differentiations
                    # running as after a traced call.
                    # A differentiation a rule's forward pass starts (a custom rule that calls
                    # ``mutad.gradient`` of its plain values) is not nested in it either, as
                    # in the traced call (``levels.nesting``).
                    ACTIVE.running.append(tape)
                    ACTIVE.rules.append(tape.level)
                    try:
                        for step in self.steps:
                            step(values, tape)
                    finally:
                        ACTIVE.rules.pop()
                        ACTIVE.running.remove(tape)
                        ERRORS.reset(token)
                finally:
                    issued = capture.stop()
            except GuardFailed:
                raise
            except Exception as error:  # tracing raises too, or Python takes another path
                if STRICT and isinstance(error, (NameError, AttributeError)):
                    raise  # mutad's own mistake, not the program's
                handled(error)  # (the call is traced again, raising where f does)
                raise GuardFailed from error
            if (heard.kinds or self.kinds) and not _same_events(heard.kinds, self.kinds):
                raise GuardFailed  # what Python may have acted on, or warns about
            if issued or self.shown:
                shown = [(w.category, str(w.message)) for w in issued]
                if shown != self.shown:  # f's filters, which may act on them, run no more
                    raise GuardFailed
                for w, again, (filename, line) in zip(issued, self.reissued, self.shown_at):
                    if again:  # under the caller's filters, at the recorded line
                        warn_at(w.message, w.category, filename, line)
            aux = None
            if self.aux is not None:  # plain copies, as f returned them (api._loss_and_aux)
                held, rebuild, scalars = self.aux
                aux = rebuild([_detached(values[x.index], scalar) if type(x) is Slot else x
                               for x, scalar in zip(held, scalars, strict=True)])
            shadows = Shadows()
            if self.output is None:
                value = self.constant
            else:
                value = values[self.output]
                if type(value) is not float:  # a Python float, if it stands for one
                    # a size-1 array as tracing returns it: a copy (the reverse pass rewinds)
                    value = value[()] if self.scalar_output else value.copy()
                if self.output_as is not None:
                    value = self.output_as(value)
                check_constants(tape)
                seed = self.seed
                if seed is None:
                    shadows.add(self.output_place, 1.0)
                else:  # (what that add does into no shadow yet: ``prepare``)
                    shadows.entries[seed.key] = [seed, _seeded(seed), None, None]
                records, reverse = tape.records, Tape.reverse
                # The floating-point events of the reverse pass are heard as those of the
                # steps are (``at_user_lines``, as tracing's reverse pass has them logged): a
                # replay whose events are not the recorded ones is traced, and warns as it
                known = self.logged
                if known is None:
                    logged = logged_categories(modes)
                    known = Hearing(Heard(), logged) if logged else None, all(
                        mode in ("ignore", "raise") or category in logged
                        for category, mode in modes.items())
                    if "call" not in modes.values() and "log" not in modes.values():
                        self.logged = known  # (of the modes alone: ``logged_categories``)
                hearing, quiet = known
                token = None if hearing is None else hearing.set()  # (the caller's handling
                heard_back = Heard() if hearing is None else hearing.heard  # again)
                if quiet:  # (none printed, none called)
                    shadows.events = heard_back
                REVERSING.tapes.append(tape)
                try:
                    while records:
                        reverse(records.pop(), shadows)
                finally:
                    REVERSING.tapes.pop()
                    if token is not None:
                        ERRORS.reset(token)
                if [message for message, _ in heard_back.kinds] != self.back_kinds:
                    raise GuardFailed
            grads = []
            for place, hand_over, scalar in self.returned:
                if place is None:
                    grads.append(None)
                    continue
                g = shadows.release(place, hand_over=hand_over)
                grads.append(scalar_derivative(g, scalar) if scalar else g)
        finally:
            tape.records.clear()
            if self.recomputes is not None:  # (its chains refer back to the values)
                values[self.recomputes] = None
            thaw(tape)
            originals.restore()
        if self.warned or self.warned_back:
            for message, filename, line in (*self.warned, *self.warned_back):  # as traced
                if line is not None:  # (not one a rule's own filters silenced: ``silenced``)
                    warn_at(message, RuntimeWarning, filename, line)
        self.replays += 1
        return (value if self.aux is None else (value, aux)), grads


def _warning_filters():
    """Python's warnings filters, as ``(a number that stands for them, the filters where one
    may turn a RuntimeWarning into an error, else None)``. Filters that raise (``-W error``,
    ``warnings.simplefilter("error")``) make NumPy's floating-point warnings raise inside
    ``f``, where Python may catch them, and a replay warns only once its program has run: they
    pick a program as NumPy's error handling does. The others pick one where ``f`` hears
    warnings (``Recorder.hearing``). The last answer is kept with the filters it was given
    for: a list equal to those (item by item, the same tuples, told by identity first) has the
    same answer."""
    filters = warnings.filters
    last, answer = _LAST_FILTERS[0]  # (one pair, replaced whole: read in one step)
    if filters == last:
        return answer
    held = tuple(filters)
    answer = _FILTERS.get(held)
    if answer is None:
        answer = _FILTERS[held] = (len(_FILTERS), held if any(
            action == "error" and issubclass(RuntimeWarning, category)
            for action, _, category, _, _ in filters) else None)
    _LAST_FILTERS[0] = list(filters), answer
    return answer


def _error_handling():
    """NumPy's floating-point error handling in force, as ``(np.geterr(), what of it picks a
    program)``: the modes, and the callable where one of them calls or logs. Kept with the
    handling object it was read from (``ERRORS``' value: one immutable object per handling
    set, held here so that no other takes its identity), and read again only when that
    changes."""
    over = ERRORS.get()
    last, answer = _LAST_HANDLING[0]  # (one pair, replaced whole: read in one step)
    if over is last:
        return answer
    modes = np.geterr()
    answer = modes, (*modes.values(), id(np.geterrcall()) if "call" in modes.values()
                     or "log" in modes.values() else None)
    _LAST_HANDLING[0] = over, answer
    return answer


_LAST_HANDLING = [(None, None)]
"""``_error_handling``'s last handling object and its answer for it."""


def _filters_number():
    return _warning_filters()[0]


_FILTERS = {}
"""``_warning_filters``'s answer for each list of filters it was given (as a tuple)."""

_LAST_FILTERS = [(None, None)]
"""``_warning_filters``'s last filters (a copy) and its answer for them."""


def _scalar(t):
    """Whether traced ``t``, which f returns, stands for a number (``api._returned``)."""
    return t.weak or stands_for_scalar(t)


def _detached(x, scalar):
    """A value of the program as a plain copy (NumPy's scalar for a 0-d array that stands
    for a number, as ``api._returned`` gives it); a Python number (a weak value's) as it is."""
    if isinstance(x, (np.generic, float, complex)):
        return x
    return x[()] if x.ndim == 0 and scalar else x.copy()


def _place(t):
    """The place of the traced array ``t``, holding none of its memory."""
    if t.whole:
        return t.buffer
    value = t.value
    return Place(t.buffer, False, t.offset, value.shape, value.strides, value.dtype)


def _seeded(buffer):
    """The shadow ``Shadows.add(buffer, 1.0)`` makes for ``Program.seed``'s buffer."""
    shape = buffer.shape
    return np.array(1.0) if shape == () else np.full(shape, 1.0, np.float64)


def _same_events(heard, recorded):
    """Whether the events a replay's steps raised, ``(message, step)`` (``Heard``), are those
    recorded, ``(message, steps)``: each the same message, raised by a step of the operation
    that issued it, whose line the replay issues it at (the recorded message words an
    operator's event on scalars as NumPy's scalar math does, ``debug.SCALAR_OPERATORS``; the
    step may compute it by a ufunc, which words it as its loop does)."""
    return len(heard) == len(recorded) and all(
        _unscalar(message) == _unscalar(expected) and step in steps
        for (message, step), (expected, steps) in zip(heard, recorded))


def _unscalar(message):
    return message.replace(" encountered in scalar ", " encountered in ", 1)


_RUN = Program._run.__code__
"""Where a replay runs its steps: ``Heard`` looks for the step that raised an event below."""


class Shown:
    """The handler (``debug.show_to``) of each warning Python shows in the thread (its
    filters neither ignore nor raise it, C code's too) while a call records: those shown
    the caller, to be shown once if the call is traced again (``ShownAgain``). (What the
    operations issue, f may act on under its own filters, which the replay does not run:
    ``scipy.linalg.solve``'s ``LinAlgWarning`` on an ill-conditioned matrix caught by
    ``catch_warnings(record=True)``; a replay issues the same, or it is traced:
    ``Recorder.issue``, ``Program._run``.)"""

    def __init__(self, recorder):
        self.recorder = recorder
        self.outside = []  # every warning shown under the caller's handling (``ShownAgain``)
        show_to(self)

    def __call__(self, message):
        recorder = self.recorder
        _, shows, show = recorder.handling
        if warnings._showwarnmsg_impl is shows and warnings.showwarning is show:
            self.outside.append(_shown_as(message))
            if recorder.issuing and recorder.hearing():
                # f's own filters (``catch_warnings()`` in f, without a record of its own)
                # let an operation's warning through to the caller, which a replay, not
                # running f's filters, does not issue again (``_Issued``)
                recorder.refuse("a warning an operation issued under f's own warnings "
                                "filters (warnings.catch_warnings in f) shown to the caller")
        show_below(self, message)

    def remove(self):
        unshow(self)


def _shown_as(message):
    """What tells a warning Python shows (a ``warnings.WarningMessage``) from another."""
    return message.category, str(message.message), message.filename, message.lineno


class ShownAgain:
    """The handler (``debug.show_to``) of the warnings Python shows while ``f`` runs again, traced, after a recording
    that cannot stand (it raised, or a rule refused what it follows, where tracing may not):
    the warnings the first run showed the caller (``Shown.outside``) are shown again by the
    second run, which is the call's answer; each is dropped the second time, in order, so the
    caller sees each once, as from one traced call. From the first warning that differs from
    the first run's on (one the first run did not reach, or a repeat Python's filters
    dropped themselves), every one is shown."""

    def __init__(self, shown):
        self.expected = shown
        self.next = 0
        self.handling = (warnings._showwarnmsg_impl, warnings.showwarning)
        show_to(self)

    def __call__(self, message):
        if self.next < len(self.expected) and self.handling == (
                warnings._showwarnmsg_impl, warnings.showwarning):
            if _shown_as(message) == self.expected[self.next]:
                self.next += 1
                return
            self.next = len(self.expected)
        show_below(self, message)

    def remove(self):
        unshow(self)


class _Issued(list):
    """``Recorder.heard``: the warnings of floating-point events the steps issued, ``(message,
    file, line)``; ``quiet`` holds (by id) those issued under f's own warnings handling
    (``Recorder.hearing``), which f heard or silenced: a replay does not issue them again.
    ``issued`` lists, in order, those too that NumPy's plain operations issued between the
    steps (``np.int8(k) + np.int8(100)`` of an ``int()`` of a traced value), which ``heard``
    drops (``Recorder.enter``): no step redoes them, but their operands are what the guards
    let through, so a replay issues them as the traced call did."""

    __slots__ = ("recorder", "quiet", "issued")

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder
        self.quiet = {}
        self.issued = []

    def append(self, item):
        super().append(item)
        self.issued.append(item)
        if self.recorder.hearing():
            self.quiet[id(item)] = item  # (kept: its id is no other's while the recording runs)


class Recording:
    """What ``api._value_and_gradient`` calls while it traces a call to be replayed: ``start``
    once the arguments are traced, ``end`` once the function returned; ``program`` is then
    the recorded program, or None (``reason`` says why)."""

    def __init__(self, has_aux=False, inputs=None):
        self.has_aux = has_aux  # f returns (loss, aux)
        self.recorder = None
        self.shown = None  # its Shown, which lists what the call showed the caller
        self.program = None
        self.reason = None
        self.errors = None
        # The arrays bound to modules' names that the program takes as inputs (``_as_inputs``):
        # ``[(namespace, name, array)]``; their traced arrays, bound to those names while f
        # runs; and those f wrote into, with their bytes as it left them
        self.inputs = inputs or ()
        self.traced, self.bound = (), ()
        self.written = []

    def given(self):
        """What the traced call takes after its arguments: the inputs, as one more argument
        outside argnums (``start`` binds their traced arrays to their names)."""
        return (tuple(a for _, _, a in self.inputs),) if self.inputs else ()

    def start(self, run, given=()):
        if given:
            self.traced = given[0]
            self.bound = [(namespace, name, namespace.get(name), t) for (namespace, name, _), t
                          in zip(self.inputs, self.traced, strict=True)]
            for namespace, name, _, t in self.bound:
                namespace[name] = t
        tape = run.tape  # never nested: Replayed traces without recording inside another
        self.recorder = recorder = Recorder(tape)
        recorder.outside_argnums = run.outside_argnums
        for leaf, t in zip(run.leaves, run.traced, strict=True):
            recorder.bind(t if t is not None else leaf)
            if t is None and type(leaf) is np.ndarray:
                recorder.note_plain(leaf)
        tape.recorder = recorder
        recorder.showing = self.shown = Shown(recorder)
        self.errors = ERRORS.get()  # NumPy's error handling at the call, which f may change

    def unbind(self):
        """The inputs' names bound again to what they held before ``start`` (the arrays, or
        what stands in for them: ``allocation.Preexisting``)."""
        bound, self.bound = self.bound, ()
        for namespace, name, held, t in bound:
            if namespace.get(name) is t:
                namespace[name] = held

    def end(self, run, y, output_as=None):
        self.unbind()
        recorder = self.recorder
        if recorder is None:
            return
        for (_, _, a), t in zip(self.inputs, self.traced, strict=True):
            if writeable(a) and t.buffer.key not in run.pending:  # (written: ``_save``)
                # NumPy's run of f leaves the array written, the caller's as it is not: as f
                # left it, once the differentiation put it back (``Replayed``), and traced
                self.written.append((a, a.copy()))
                recorder.refuse(WRITTEN_INPUT)
        run.tape.recorder = None
        recorder.showing.remove()
        recorder.close()
        if ERRORS.get() is not self.errors:  # (which a replay, not running f, would not)
            recorder.refuse("f left NumPy's floating-point error handling changed (np.seterr)")
        recorder.special_left()  # (and scipy.special's: ``Recorder.watch``)
        del recorder.heard[recorder.counted:]
        aux = None
        if self.has_aux:
            if not (isinstance(y, (tuple, list)) and len(y) == 2):
                recorder.refuse("has_aux=True, but f did not return a pair")
            else:
                y, aux = y
                aux = self._aux(recorder, aux)
        if type(y) is Traced and id(y) not in recorder.slots:
            recorder.refuse("a result mutad made outside the operations a replay redoes")
        if recorder.changed_converted():  # (first: the plain arrays read include those)
            recorder.refuse("an array f made was written after its values were converted to a "
                            "plain array, which the program holds as they were converted")
        if recorder.changed_plain():
            recorder.refuse("a plain array the program reads (an integer array f made) changed "
                            "after an operation read it")
        recomputation = run.tape.recomputation
        if recomputation is not None and recomputation.chains:
            taken = {id(step.chained) for step in recorder.steps
                     if type(step) is ElementwiseWrite and step.chained is not None}
            if any(chain.pins for chain in recomputation.chains.values()):
                recorder.refuse("a memory budget rebuilt writes that read an array a write "
                                "undone by its inverse then overwrote")
            elif any(id(w) not in taken for chain in recomputation.chains.values()
                     for w in chain.writes):
                recorder.refuse("a memory budget rebuilt writes of an operation the replay "
                                "runs through the engine")
        if recorder.reason is not None:
            self.reason = recorder.reason
        else:
            self.program = Program(recorder, run, y, aux)
            self.program.output_as = output_as  # (api._unwrapped_output)
            run.tape.heard = self.program.warned_back  # what the reverse pass warns about
            if recorder.lazy:  # how the reverse pass finds what it recomputes: written down
                run.tape.recomputation.planner = recorder.plans_of
        recorder.release()

    @staticmethod
    def _aux(recorder, aux):
        """``(leaves, rebuild)`` of the aux output: a slot for each array the program
        computed, else the value itself (a Python number or string, the same on every call
        the guards let through); an array from elsewhere is refused."""
        leaves, rebuild = flatten(aux)
        held = []
        for leaf in leaves:
            if type(leaf) is Traced:
                slot = recorder.slots.get(id(leaf))
                if slot is None:
                    recorder.refuse("an aux output mutad made outside the operations a replay "
                                    "redoes")
                held.append(Slot(slot))
            elif isinstance(leaf, (np.ndarray, np.generic)):
                recorder.refuse("an aux output holding a NumPy value the replay does not "
                                "compute")
            else:
                held.append(leaf)
        return held, rebuild, [type(leaf) is Traced and _scalar(leaf) for leaf in leaves]

    def seal(self):
        """Once the traced call is over: the buffers the program names forget the first
        call's arrays (``shadows.Buffer.ref``), which the program must not keep alive."""
        self.unbind()  # (f raised)
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.showing.remove()  # (also if the call raised)
            if recorder.tape.recomputation is not None:
                recorder.tape.recomputation.planner = None
            if self.program is not None:
                try:
                    self.program.plan(recorder)
                except Unplanned as error:
                    self.program, self.reason = None, str(error)
            for writer in recorder.writers:
                writer.heard = None
            recorder.release()
            for buffer in recorder.buffers:
                buffer.ref = buffer.origin = None


# ----------------------------------------------------------------------------------------------
# The replaying function


def signature(parts):
    """What picks a program for the flattened arguments ``parts`` (``(leaves, argument,
    plain)`` per argument, ``plain`` when its numbers are passed as they are: outside
    ``argnums``): the structure, and per leaf its kind, shape, dtype and layout (which
    arguments share memory, and where, an integer array's too), and its value if it is not
    differentiated (the bits of a plain float: -0.0 is not 0.0 to ``math.copysign``), and
    which leaves are one object. Returns ``(key, None)``, or ``(what, why)`` if an argument
    is of a kind a replay does not follow: ``what`` names that kind, ``why`` says why it is
    traced (``Replayed.reasons``)."""
    owners = {}
    objects = {}  # which leaves are one object (f(a, a): ``x is y`` in f)
    key = []
    for leaves, argument, plain in parts:
        described = "leaf" if type(argument) is np.ndarray else structure(argument)
        if described is None:
            device = next((x for x in leaves if is_device(x)), None)
            if device is not None:
                name = f"{type(device).__module__.partition('.')[0]}.{type(device).__name__}"
                return name, (f"a device array ({name}): a replay does not follow device "
                              "arrays yet; each call is traced, on the device")
            name = other_container(argument)
            return name, (f"an argument in a {name}: a replay follows arrays, numbers and "
                          "strings in tuples, lists, dicts, namedtuples, dataclasses and plain "
                          "objects (not a registered pytree, nor an object holding a function)")
        key.append(described)
        for x in leaves:
            if type(x) is _NDARRAY and x.base is None:  # (a float array that owns its
                dtype = x.dtype  # memory, the common case, told at once: as below)
                if dtype.kind in "fc":
                    shape, strides, i = x.shape, x.strides, id(x)
                    key.append((shape, dtype, strides, x.flags.num & WRITEABLE != 0,
                                owners.setdefault(i, len(owners)), None, shape, strides,
                                objects.setdefault(i, len(objects)), None))
                    continue
            kind = type(x)
            if kind is not np.ndarray and (kind is complex or isinstance(x, np.complexfloating)):
                return f"a {np.result_type(x)} number", "complex numbers as arguments"
            if kind is np.ndarray:
                # An array not differentiated (integers, booleans) is described as one that is,
                # and by its values too, on which the program may depend: its layout and the
                # memory it shares with other arguments decide what f reads from it after a
                # write into either (k += 1 where k2 is k), and its order (k.ravel('K'))
                dtype = x.dtype
                values = None if dtype.kind in "fc" else x.tobytes() if not dtype.hasobject \
                    else _objects_held(x)
                if values is None and dtype.hasobject:
                    return ("an array of dtype object", "an array of Python objects other than "
                            "numbers, strings and None: its bytes are the objects' addresses, "
                            "which another object may take, and an object may change in place")
                same = objects.setdefault(id(x), len(objects))
                if x.base is None:  # (its own owner, the common case: owner()'s answer)
                    shape, strides = x.shape, x.strides
                    key.append((shape, dtype, strides, x.flags.num & WRITEABLE != 0,
                                owners.setdefault(id(x), len(owners)), None, shape, strides,
                                same, values))  # (offset None: owns its memory, x.base is None)
                    continue
                base = x.base
                if type(base) is not np.ndarray or base.base is not None:  # (a view of a view)
                    base = owner(x)
                    if type(base) is not np.ndarray:
                        return (f"a view of a {type(base).__name__}",
                                f"an array whose memory is a {type(base).__name__}'s")
                key.append((x.shape, dtype, x.strides, x.flags.num & WRITEABLE != 0,
                            owners.setdefault(id(base), len(owners)), address(x) - address(base),
                            base.shape, base.strides, same, values))  # (x: a view, not base)
            elif kind is bool or x is None:
                key.append((kind, x))
            elif kind in (float, np.float64, np.float32, np.float16) and not plain:
                key.append(kind)
            else:
                # A number or string not differentiated, by its value, and which leaves are
                # one object, as for arrays (f(x, s, s): ``a is b`` in f, where equal strings
                # made apart are two objects)
                same = objects.setdefault(id(x), len(objects))
                if kind in (float, np.float64, np.float32, np.float16):
                    key.append((kind, np.array(x).tobytes(), same))
                elif kind in (int, str, bytes):
                    key.append((kind, x, same))
                elif isinstance(x, np.generic):
                    # By its bits, not by ==: np.longdouble(-0.0) == 0.0, and datetimes and
                    # timedeltas of other units are equal (a day is 24 hours) where
                    # astype(int) tells them apart; a structured scalar (np.void) has no hash
                    key.append((kind, x.dtype.str, x.tobytes(), same))
                else:
                    return kind.__name__, f"an argument of type {kind.__name__}"
    return tuple(key), None


def _objects_held(x):
    """What an array of dtype object holds, as a signature compares it: each item's type and
    value (a float's bits), where all are Python's numbers, strings, bytes or None; else None.
    Its bytes are addresses, which a later object may take after the first is freed."""
    if x.dtype.kind != "O":
        return None  # (a structured dtype with object fields)
    items = []
    for item in x.ravel(order="K").tolist():
        kind = type(item)
        if kind is float:
            item = np.float64(item).tobytes()
        elif kind not in (int, bool, str, bytes, type(None)):
            return None
        items.append((kind, item))
    return tuple(items)


def structure(tree):
    """A hashable description of the containers around the leaves of ``tree`` (tuples, lists,
    dicts, namedtuples, and dataclass instances and plain objects by their attributes, as
    ``trees.flatten`` follows them), None for any other container."""
    kind = type(tree)
    if kind is dict and not tree:  # no keyword arguments: the common case, told at once
        return _NO_ITEMS
    if kind is tuple or kind is list or isinstance(tree, tuple) and hasattr(kind, "_fields"):
        items = tuple(structure(x) for x in tree)
        return None if None in items else (kind, items)
    if kind is dict:
        items = tuple(structure(x) for x in tree.values())
        return None if None in items else (dict, tuple(map(_exactly, tree)), items)
    if kind is np.ndarray or isinstance(tree, (float, int, str, bytes, type(None), np.generic)):
        return "leaf"
    names = attributes(tree)
    if names is not None:
        items = tuple(structure(getattr(tree, name)) for name in names)
        return None if None in items else (kind, tuple(names), items)
    return None


_NO_ITEMS = (dict, (), ())
"""``structure({})``."""


def _exactly(key):
    """A dict's ``key`` as a signature tells keys apart: by type, and a float's by its bits.
    To a dict, 1, 1.0 and True are one key, and 0.0 and -0.0 too; not to f, which may index
    with the key (``x[True]`` is all of ``x``), write it (``str(1.0)``) or take its sign."""
    kind = type(key)
    if isinstance(key, tuple):  # (a namedtuple's too)
        return kind, tuple(map(_exactly, key))
    if kind is frozenset:
        return kind, frozenset(map(_exactly, key))
    if kind is float or kind is complex or isinstance(key, np.generic):
        return kind, np.array(key).tobytes()
    return kind, key


def other_container(tree):
    """The name of the first container in ``tree`` that ``structure`` does not describe."""
    kind = type(tree)
    if kind is tuple or kind is list or kind is dict:
        return next(name for x in (tree.values() if kind is dict else tree)
                    if (name := other_container(x)) is not None)  # structure() found one
    return None if structure(tree) == "leaf" else kind.__name__


REACHED_ITEMS = 10_000
"""Items of a container that ``reach`` walks into at most: a function that reaches a larger
one is traced on every call (``Replayed.reasons`` says so)."""

COPIED = 1 << 24
"""Arrays ``f`` reaches of up to this many bytes are compared with a copy on each call; larger
ones with a BLAKE2 digest of their bytes (no second copy of a large dataset)."""


_NDARRAY = np.ndarray

_NOT_OBJECTS = frozenset((np.ndarray, float, int, bool, str, type(None)))
"""Exact types of the arguments ``classes`` finds no class in (``attributes`` has none)."""


def classes(tree, found=None):
    """The classes of the namedtuples, dataclass instances and plain objects in ``tree`` (as
    ``structure`` describes them): their methods may be called on the arguments."""
    found = {} if found is None else found
    kind = type(tree)
    if kind in (tuple, list) or kind is dict:
        for x in tree.values() if kind is dict else tree:
            if type(x) not in _NOT_OBJECTS:  # (the most common items, told without a call)
                classes(x, found)
    elif isinstance(tree, tuple) and hasattr(kind, "_fields"):
        found[id(kind)] = kind
        for x in tree:
            classes(x, found)
    elif kind is not np.ndarray and (names := attributes(tree)) is not None:
        found[id(kind)] = kind
        for name in names:
            classes(getattr(tree, name), found)
    return list(found.values())


def reach(f, kinds=(), kept=None, bound=None):
    """What ``f``'s program may depend on besides its arguments: ``(objects, arrays, large)``.

    From ``f``, its code object, what it closes over, its defaults, the globals its code names,
    a bound method's object, a partial's (or partial method's) function and arguments, and on
    from each of those: functions, methods, properties, containers (lists, tuples, dicts, sets and their subclasses, up to
    ``REACHED_ITEMS`` items), and the attributes of objects, of classes (their bases' too) and
    of modules and functions (not NumPy's, SciPy's, mutad's or the standard library's classes
    and modules) whose names some code reached names, or some string reached holds
    (``getattr(p, "dt")``, ``vars(p)["dt"]``, names in a global tuple); the special methods of
    the user's classes (a ``__getattr__`` reading a dict; a class's ``__init__``, which
    Python calls) and a module's ``__getattr__``; the
    arrays, numbers and containers NumPy's, SciPy's and mutad's objects hold, in their
    ``__dict__`` or ``__slots__`` (a sparse matrix's, a spline's), the objects of those
    libraries they hold (a LinearOperator's sparse matrix), the user's functions they hold (a
    rule attached to a function), the attributes of an array of a subclass (a masked array's
    mask), the bytes of a record (``np.void``) that views an array's, of a ctypes value and
    of an ``mmap``, the mapping a dict view shows, a metaclass's special methods. ``objects``
    are compared by identity
    on each call, each as often as it was reached (a rebound global, a replaced ``__code__``,
    a rebound ``self.w``, a list grown by the same float), ``arrays`` by their bytes (``Contents``):
    Python may decide on their values without mutad seeing it (``if W[0] > 0``).
    ``unfollowed``: why a replay cannot compare what ``f`` reaches (None: it can): a container
    too long to compare item by item on each call, an iterator (its state is what ``f``
    consumes), a function of the user's cached by ``functools.lru_cache`` (its cache), more
    than ``REACHED_OBJECTS`` objects. Where the user's code reached may read
    attributes by names it builds (``getattr(p, f"w{i}")``, ``vars(p)``: it names one of
    ``DYNAMIC``, or reaches such a function under another name), every attribute of the
    objects, classes, modules and functions reached is held. ``kinds``: classes reached as an
    object's class is (the arguments': ``f`` may call their methods). ``kept``: a list to which the
    answer is appended as a :class:`Reached`, with what the walk read, where everything it
    met is of a kind ``Reached`` can read again (a function, a module, what it reads nothing
    of); left as it is otherwise. ``bound``: a list to which each ``(namespace, name)`` of a
    module's namespace (a function's globals, a module of the user's reached as an object) is
    appended whose value the walk took is a float array (:func:`_as_inputs`)."""
    objects, arrays, seen, large = [], [], set(), []
    walk = _Walk(_home(f))
    names = walk.names
    work = [f]
    states = [] if kept is not None and not kinds else None  # (x, read, read(x)) per object
    for kind in kinds:  # the classes of the arguments (``classes``): as an object's class
        objects.append(kind)
        _hold_class(kind, walk)
    while work:
        while work:
            if large:  # the answer is the first reason found: walking on would not change it
                return objects, arrays, large[0]
            x = work.pop()
            objects.append(x)  # each time it is reached: [a] and [a, a] differ
            key = id(x)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > REACHED_OBJECTS:
                large.append(f"f reaches more than {REACHED_OBJECTS:,} objects, which a replay "
                             "would compare on every call: pass what it reads as arguments")
                return objects, arrays, large[0]
            if key in _READING_BY_NAME:  # (ga = getattr)
                walk.dynamic = True
            librarys = _reach_into(x, work, arrays, walk, large)
            if states is not None:
                kind = type(x)
                read = _STATES.get(kind) or (_library_state if librarys else None)
                if kind is types.FunctionType and not _library_file(x.__code__.co_filename):
                    imported = tuple(_module_names(x))
                    read = _importing_state(imported) if imported else read
                if read is not None and (kind is not np.ufunc or all(  # (of the values the
                        type(v) in _READS_NOTHING or not (_data(v) or _users_function(v))
                        for v in x.__dict__.values())):  # walk takes, as _reach_into does)
                    states.append((x, read, read(x)))
                elif not (kind in _READS_NOTHING or isinstance(x, np.generic)
                          or kind is np.ndarray and not x.dtype.hasobject):
                    states = None  # (what it reads of x, Reached cannot read again)
        for namespace, done, whole, read in list(walk.held.values()):  # their attributes
            every = whole and walk.dynamic                      # named since, or all of them
            new = [name for name in (namespace if every else _named(read, namespace))
                   if name not in done and type(name) is str]
            if new:
                new = sorted(new)
                done.update(new)
                if id(namespace) in walk.shallow:  # a library module's, the builtins
                    for name in reversed(new):
                        value = namespace[name]
                        if id(value) in FILE_READERS:
                            large.append(_reads_files(FILE_READERS[id(value)]))
                        clock = _reads_clock(value, names)
                        if clock is not None:
                            large.append(clock)
                        if _walked_in_library(name, value, namespace):
                            work.append(value)
                        else:  # compared by identity alone (np.exp = g: another object)
                            objects.append(value)
                else:
                    work.extend(namespace[name] for name in reversed(new))
                    if bound is not None and id(namespace) in walk.modules:
                        bound.extend((namespace, name) for name in new
                                     if _bindable(namespace[name]))
    if walk.builtins and not names.isdisjoint(_BUILTIN_READERS):  # (builtins.type(i))
        large.append(f"f {_reads_identity(f'builtins.{min(names & _BUILTIN_READERS)}')}")
    if states is not None and not large:
        namespaces = [(namespace, whole and walk.dynamic, frozenset(done),
                       [(name, namespace[name]) for name in sorted(done)], frozenset(read))
                      for namespace, done, whole, read in walk.held.values()]
        kept.append(Reached(objects, arrays, states, namespaces,
                            None if bound is None else list(bound)))
    if bound is not None and walk.dynamic:  # (what code stores by names it builds: unseen)
        bound.clear()
    return objects, arrays, large[0] if large else None


def _bindable(value):
    """Whether ``value``, bound to a module's name, may be an input of the program: a float
    array (an integer one is most often an index, on whose values the program decides)."""
    return type(value) is np.ndarray and value.dtype.kind in "fc"


class Reached:
    """What ``reach(f)`` found (``objects``, ``arrays``), kept with what its walk read, to
    tell on a later call without walking again that a walk would find the same (``holds``):
    per object met, what the walk reads of it (``states``: a function's code, defaults,
    closure cells and attribute dict, a module's name and file), and per namespace held, the
    names taken from it and their values, for the names the code met names by which it was
    held (``namespaces``). The walk is a function of these alone: the same, it meets the same
    objects in the same order. The arrays' bytes are compared on each call as a walk's are.
    A namespace whose dict's version (``allocation._VERSION``, which every change to the dict
    renews) is the one it had when its names last held binds what it bound then: its names
    hold again, told without looking them up (``versions``)."""

    __slots__ = ("objects", "arrays", "states", "namespaces", "bound", "versions")

    def __init__(self, objects, arrays, states, namespaces, bound=None):
        self.objects, self.arrays, self.states = objects, arrays, states
        self.bound = bound  # (reach's ``bound``)
        # Per namespace held by the names the code names (each taken is one of them), those
        # of them it did not have (``absent``): it has the same of them again exactly where
        # it has every name taken (the values below are looked up) and none of those
        self.namespaces = []
        for namespace, every, taken, values, names in namespaces:
            strings = frozenset(name for name in names if type(name) is str)
            self.namespaces.append((namespace, every, taken, values, names, strings - taken
                                    if not every and taken <= strings else None))
        # Per namespace, its version's reader (kept with the namespace, which it must not
        # outlive; None for a mapping not a dict, a class's) and the version with which its
        # names last held (None: not yet)
        self.versions = None if _VERSION is None else [
            [_VERSION(held[0]) if type(held[0]) is dict else None, None]
            for held in self.namespaces]

    def holds(self):
        for x, read, state in self.states:
            now = read(x)
            if len(now) != len(state) or not all(map(operator.is_, now, state)):
                return False
        versions = self.versions
        if versions is None:
            return self._names_hold(self.namespaces)
        for held, version in zip(self.namespaces, versions):
            reader = version[0]
            if reader is None:
                if not self._names_hold((held,)):
                    return False
                continue
            now = reader.value
            if now != version[1]:
                if not self._names_hold((held,)):
                    return False
                version[1] = now
        return True

    def _names_hold(self, namespaces):
        """Whether each of ``namespaces`` has the names it had, bound as they were."""
        for namespace, every, taken, values, names, absent in namespaces:
            if absent is not None:
                if absent and any(map(namespace.__contains__, absent)):
                    return False
            elif {name for name in (namespace if every else _named(names, namespace))
                  if type(name) is str} != taken:
                return False
            for i, (name, value) in enumerate(values):
                now = namespace.get(name, _APART)
                if now is not value and not self._rebound(namespace, name, value, now, values, i):
                    return False
        return True

    def _rebound(self, namespace, name, value, now, values, i):
        """Whether the walk would meet the float array ``now``, bound to ``name`` in place of
        ``value``, where it met ``value``, and nothing else otherwise (a float array it
        reached once, by one of ``bound``'s names: it walks no further into one), which its
        answer then holds in ``value``'s place (new lists: ``_changed`` compares them)."""
        if not (self.bound and _bindable(now) and _bindable(value)
                and any(held is namespace and key == name for held, key in self.bound)):
            return False
        objects = [k for k, x in enumerate(self.objects) if x is value]
        arrays = [k for k, a in enumerate(self.arrays) if a is value]
        if len(objects) != 1 or len(arrays) != 1:
            return False
        self.objects, self.arrays = list(self.objects), list(self.arrays)
        self.objects[objects[0]] = self.arrays[arrays[0]] = now
        values[i] = name, now
        return True


def _named(names, namespace):
    """The names of ``names`` that ``namespace`` has, looked up from the smaller (a library
    module's namespace is held by the few names the code names)."""
    if len(names) < len(namespace):
        return [name for name in names if name in namespace]
    return names.intersection(namespace)


_APART = object()
"""Parts of a state apart (``_function_state``): no value of the user's is this object."""

_BUILTINS = vars(builtins)
_PRISTINE = dict(_BUILTINS)
"""The builtins as they were when mutad was imported."""


def _walked_in_library(name, value, namespace):
    """Whether ``reach`` walks into ``value``, taken by ``name`` from the namespace of a
    library's module or from the builtins, or compares it by identity alone: the
    interpreter's own builtins (a walk into ``getattr`` would take it for a dynamic read), and
    a library's functions and classes (what they close over is the library's, and walking it
    would reach thousands of objects) are compared by identity; a module is walked (by the
    names the code names), a ufunc (its attributes can be set: ``np.add.scale = 2.0``), data
    (``np.pi``, an array set there) and an object of the user's set there."""
    if namespace is _BUILTINS:  # (code that names type or id: found by its instructions)
        return _PRISTINE.get(name, _APART) is not value
    kind = type(value)
    if id(value) in IDENTITY_READERS:  # operator.is_: met, the walk tells why it is traced
        return True
    if kind is types.ModuleType or kind is np.ufunc or _users_function(value):
        return True
    if _data(value):  # but the library's own names (``__all__``), which the walk would
        return not (kind is str or kind in (tuple, list, dict) and str in map(  # take for
            type, value.values() if kind is dict else value))  # names read (getattr)
    if kind is types.FunctionType or isinstance(value, type):
        return False
    module = getattr(kind, "__module__", "builtins")
    if type(module) is not str:
        return False
    filename = getattr(sys.modules.get(module), "__file__", None)  # (a compiled function's
    return module == "__main__" or bool(filename) and _users_file(filename)  # has none)


def _function_state(f):
    """What ``reach`` reads of a function: its code (with its globals, which a function keeps
    for good), defaults, keyword defaults, the contents of its closure's cells, and its
    attribute dict, and whether that is empty."""
    keywords = f.__kwdefaults__
    return (f.__code__, f.__defaults__, keywords, *(keywords.values() if keywords else ()),
            _APART, *(_cell_contents(f) if f.__closure__ else ()), _APART, f.__dict__,
            not f.__dict__)


def _attributes_state(x):
    """What ``reach`` reads of a ufunc (a library's object): its attributes' values (which
    ``Reached`` keeps only where each the walk takes is a number or a string, as NumPy's
    ``__qualname__``, of which it reads nothing more; the others, as the ``__signature__``
    ``inspect`` keeps there, it compares by identity alone)."""
    return x.__dict__, *x.__dict__.values()


def _module_state(module):
    """What ``reach`` reads of a module, besides its namespace: its name and file."""
    return module.__name__, getattr(module, "__file__", None)


_STATES = {types.FunctionType: _function_state, types.ModuleType: _module_state,
           np.ufunc: _attributes_state, list: tuple, set: tuple,
           dict: lambda d: (*d.keys(), *d.values()), Traced: lambda x: (x.value,)}
"""What ``Reached`` reads again of the objects of these exact types."""


REACHED_OBJECTS = 20_000
"""Objects ``reach`` walks at most: a function that reaches more is traced on every call
(``Replayed.reasons`` says so)."""


class _Walk:
    """The namespaces ``reach`` holds, one entry each by the identity of their owner:
    ``[namespace, the names taken from it, whether it is held whole where the user's code
    builds names (an object's, a class's, a module's reached as an object: not a function's
    globals), the names by which it is held]``: ``names``, those the code met names and the
    strings met (an attribute's name, a keyword's, ``getattr(p, "dt")``), or for a function's
    globals and builtins (not reached as an object too) ``globals``, the names its code reads
    or writes as globals; ``dynamic``: the user's code reached builds names (``DYNAMIC``)."""

    __slots__ = ("held", "dynamic", "home", "shallow", "builtins", "names", "globals", "modules")

    def __init__(self, home):
        self.held = {}
        self.modules = set()  # the ids of the modules' namespaces held (``reach``'s ``bound``)
        self.dynamic = False
        self.builtins = False  # the builtins module met as an object (builtins.id)
        self.home = home  # the file of f's code: the program's, whose built names count
        self.shallow = set()  # (the ids of those whose values _walked_in_library tells)
        self.names, self.globals = set(), set()

    def hold(self, namespace, owner=None, whole=False, shallow=False, as_globals=False):
        key = id(namespace if owner is None else owner)
        if shallow:
            self.shallow.add(key)
        held = self.held.get(key)
        if held is None:
            self.held[key] = [namespace, set(), whole,
                              self.globals if as_globals else self.names]
        else:
            held[2] = held[2] or whole
            if not as_globals:  # (a module reached as an object too: by every name met)
                held[3] = self.names


DYNAMIC = frozenset(("getattr", "hasattr", "vars", "__dict__", "attrgetter", "methodcaller",
                     "dir", "__getattribute__", "getattr_static", "getmembers",
                     "getmembers_static", "asdict", "astuple", "globals", "locals", "eval",
                     "exec"))
"""Names through which code reads an object's attributes by names it builds at run time
(``getattr(p, f"w{i}")``, ``vars(p).values()``, ``object.__getattribute__(p, name)``): where
some code ``reach`` reaches names one, every attribute of the objects, classes and modules
reached is held, not only those named."""

GLOBALS_BY_NAME = frozenset(("globals", "locals", "eval", "exec"))
"""Names through which code reads its module's globals by names it builds: its function's
globals are then held whole too."""

MODULES_BY_NAME = frozenset(("modules", "import_module"))
"""Names through which code reaches modules by names it builds (``sys.modules[name]``),
which the walk cannot follow: such a function is traced on every call."""

_READING_BY_NAME = frozenset(map(id, (getattr, hasattr, vars, dir, operator.attrgetter,
                                      operator.methodcaller, object.__getattribute__, globals,
                                      eval, exec)))
"""The ids of the functions of ``DYNAMIC``, which code may reach under another name."""

_READERS_BY_NAME = (operator.attrgetter, operator.methodcaller)
"""Objects that read attributes by names they hold (``read_w = operator.attrgetter("w")``)."""


def _too_large(what):
    return (f"f reaches {what} (more than {REACHED_ITEMS:,}, which a replay would compare one "
            "by one on every call): pass it as an argument, or as an array")


_CTYPES = ctypes._SimpleCData.__base__
"""The base class of ctypes' values, arrays and structures (``_ctypes._CData``)."""

_CTYPES_POINTERS = (ctypes._Pointer, ctypes.CFUNCTYPE(None).__base__, ctypes.c_char_p,
                    ctypes.c_wchar_p, ctypes.c_void_p)
"""ctypes' pointers: to data, to a C function (which may wrap a Python one), to a string."""

_BUILTIN_CONTAINERS = frozenset((tuple, list, set, frozenset, dict, collections.deque,
                                 collections.OrderedDict, collections.defaultdict))

_FOLLOWS_NOTHING = frozenset((int, float, complex, bool, bytes, type(None), types.CodeType))
"""The exact types of what ``reach`` holds but does not walk into (a code object's names are
its function's)."""

_READS_NOTHING = _FOLLOWS_NOTHING | {str, tuple, frozenset, types.BuiltinFunctionType}
"""Exact types of which ``reach`` reads nothing that can change (a tuple's items, a builtin
function's ``__self__``): NumPy's scalars and arrays of numbers too."""


def _reach_into(x, work, arrays, walk, large):
    kind = type(x)
    names = walk.names
    # (The walk is made on every call: the exact types it meets most are told first, before
    # the tests by subclass, none of which takes any of them.)
    if kind in _FOLLOWS_NOTHING:
        pass
    elif kind is str:  # a name an attribute may be read by (getattr(p, name))
        names.add(x)
    elif kind is types.FunctionType:
        code = x.__code__
        if _library_file(code.co_filename):
            # NumPy's, SciPy's, mutad's own: its module's globals are not the program's state,
            # but what it closes over may be (a solver's step closing over the user's function)
            work.extend(_cell_contents(x))
            work.extend(x.__defaults__ or ())
            return
        work.append(code)
        work.extend(_imported_modules(x))  # (import config in f: its attributes are state)
        missing = _not_imported(x)
        if missing is not None and _users_file(code.co_filename):
            large.append(f"f imports {missing} when it runs, which is not imported yet: what "
                         "f reads of it a replay cannot tell before the call imports it "
                         "(traced until it is imported)")
        names.update(_code_names(code))
        walk.globals.update(_code_globals(code))
        identifiers = _code_identifiers(code)
        if not walk.dynamic and not DYNAMIC.isdisjoint(identifiers):
            walk.dynamic = code.co_filename == walk.home and _users_file(code.co_filename)
        if not MODULES_BY_NAME.isdisjoint(identifiers) and _users_file(code.co_filename):
            large.append("f reads modules by names it builds (sys.modules[...], "
                         "importlib.import_module): a replay cannot tell which; pass what it "
                         "reads as arguments")
        unanswered = _identity_read(code)
        if unanswered is not None:
            large.append(unanswered)
        whole_globals = not GLOBALS_BY_NAME.isdisjoint(identifiers)  # (globals()[name])
        work.extend(_cell_contents(x))
        work.extend(x.__defaults__ or ())
        work.extend((x.__kwdefaults__ or {}).values())
        walk.hold(x.__globals__, whole=whole_globals, as_globals=True)
        walk.modules.add(id(x.__globals__))
        # a name its globals lack is the builtins' (builtins.SCALE = 2.0, a shadowed print)
        walk.hold(x.__builtins__ if type(x.__builtins__) is dict else vars(x.__builtins__),
                  shallow=True, as_globals=True)
        if whole_globals and code.co_filename == walk.home:
            walk.dynamic = walk.dynamic or _users_file(code.co_filename)
        if x.__dict__:  # its attributes (f.scale; getattr(f, f"w{i}"): whole, as a module's)
            walk.hold(x.__dict__, whole=_users_file(code.co_filename))
    elif x is _BUILTINS:  # a module's __builtins__ (its globals held whole): as its functions'
        walk.hold(x, shallow=True)  # builtins are held, by the names the code names
    elif kind in _BUILTIN_CONTAINERS:
        _reach_items(x, kind, work, large)
    elif kind is Traced:
        # an array of a differentiation (one no longer running: a replay runs under none), as
        # the pullbacks of SciPy's solvers close over the parameters of the enclosing one: its
        # value is all a program reads of it (``operations._unwrap``), not its tape's records
        work.append(x.value)
    elif id(x) in IDENTITY_READERS:  # (ident = id, operator.is_, partial(operator.is_, c))
        large.append(f"f {_reads_identity(IDENTITY_READERS[id(x)] + ' as a value')}")
    elif id(x) in FILE_READERS:  # (from os.path import exists; a helper module's open)
        large.append(_reads_files(FILE_READERS[id(x)]))
    elif id(x) in CLOCK_READERS:  # (from time import perf_counter)
        large.append(_reads_clock(x, names))
    elif isinstance(x, pathlib.Path):  # (path.read_text(), path.exists())
        large.append(_reads_files(f"a {kind.__name__}, whose methods read files"))
    elif isinstance(x, np.ndarray):  # subclasses too (a memory-mapped array)
        arrays.append(x)
        if x.dtype.hasobject:  # and the objects it holds (its bytes are their addresses)
            if x.size > REACHED_ITEMS:
                large.append(_too_large(f"an object array of {x.size} items"))
            else:
                work.extend(x.ravel().tolist())
        if kind is not np.ndarray:  # and a subclass's attributes (a masked array's mask)
            _reach_object(x, kind, work, walk)
    elif isinstance(x, _CTYPES_POINTERS):  # (what it points to has no extent to compare)
        large.append(f"f reaches a ctypes pointer ({kind.__name__}): what it points to a "
                     "replay cannot compare; pass what f reads through it as an argument")
    elif kind in (bytearray, memoryview) or kind.__module__ in ("array", "mmap") \
            or isinstance(x, _CTYPES):  # mutable bytes (a ctypes value: a C library's memory)
        try:
            view = np.frombuffer(x, np.uint8) if kind is not memoryview else np.asarray(x)
            arrays.append(x if kind in _BUFFERS else view)
        except (TypeError, ValueError, BufferError):
            large.append(f"f reaches a {kind.__name__} mutad cannot compare: pass its "
                         "contents as an argument")
    elif isinstance(x, np.generic):
        if kind is np.void and x.base is not None:  # a record of an array: a view of its bytes
            arrays.append(np.asarray(x))
    elif kind is types.MethodType:
        work.extend((x.__func__, x.__self__))
    elif kind in (types.BuiltinMethodType, types.MethodWrapperType):  # params.get, W.sum
        work.append(x.__self__)
    elif kind is functools.partial or kind is functools.partialmethod:
        work.extend((x.func, *x.args, *x.keywords.values()))
    elif kind is LRU_CACHED:
        wrapped = getattr(x, "__wrapped__", None)
        if type(wrapped) is types.FunctionType and not _library_file(
                wrapped.__code__.co_filename):
            large.append(f"f reaches {wrapped.__qualname__}, cached by functools.lru_cache: "
                         "the results it keeps between calls are not f's to compare, and a "
                         "call it answers from its cache runs none of its code; call it "
                         "outside f and pass what it returns as an argument")
        elif wrapped is not None:
            work.append(wrapped)
    elif kind is property:
        work.extend(g for g in (x.fget, x.fset, x.fdel) if g is not None)
    elif kind in (staticmethod, classmethod, functools.cached_property):
        work.append(x.__func__ if kind is not functools.cached_property else x.func)
    elif kind is types.ModuleType:
        walk.builtins = walk.builtins or x is builtins
        if not _library(x.__name__):
            # (getattr(module, name): whole where it is the user's, not an installed library)
            walk.hold(vars(x), whole=_users_file(getattr(x, "__file__", None) or ""))
            walk.modules.add(id(vars(x)))
            names.add("__getattr__")  # what Python calls for a name its namespace lacks
        else:  # NumPy's, SciPy's, the standard library's: by the names the code names, as
            walk.hold(vars(x), shallow=True)  # one may be set or rebound (np.add.scale = 2.0)
    elif isinstance(x, type):
        if _dated(x) and not names.isdisjoint(_CLOCK_METHODS):
            large.append(_reads_clock(x, names))  # (from datetime import datetime: .now())
        _hold_class(x, walk)
        work.extend(_special_methods(type(x)))  # (its metaclass's __getattr__: cls.scale)
        work.extend(_special_methods(x))  # what Python calls unnamed on its objects f makes
    elif kind in _READERS_BY_NAME:
        walk.dynamic = True
    elif isinstance(x, weakref.ref):  # what f calls it for (a weakly held object)
        referent = x()
        if referent is not None:
            work.append(referent)
    elif kind is contextvars.ContextVar:  # its value in the caller's context (SCALE.get())
        work.append(x.get(None))
    elif isinstance(x, collections.abc.MappingView):  # d.values(): the mapping it shows
        mapping = getattr(x, "_mapping", _APART)  # (a view of collections.abc's; dict's
        work.append(gc.get_referents(x)[0] if mapping is _APART else mapping)  # hides it)
    elif isinstance(x, collections.abc.Iterator) or getattr(kind, "__next__", None) is not None:
        # a generator, iter(list), itertools.count, an object of a class with __next__
        large.append(f"f reaches an iterator ({kind.__name__}): what it gives next is its "
                     "state, which a replay cannot compare; pass what f takes from it as an "
                     "argument")
    else:
        if isinstance(x, (tuple, list, set, frozenset, collections.deque,
                          collections.abc.Mapping)):  # a container of another class
            _reach_items(x, kind, work, large)
            _reach_object(x, kind, work, walk)
        elif isinstance(x, (collections.UserList, collections.UserString)):
            work.append(x.data)  # (what its methods, the standard library's, read)
            _reach_object(x, kind, work, walk)
        elif isinstance(x, enum.Enum):  # its value (a list changed in place), which f reads
            work.append(x._value_)     # as member.value, a property of the standard library's
            _reach_object(x, kind, work, walk)
        elif isinstance(x, _queues()):
            large.append(f"f reaches a queue ({kind.__name__}): what it gives next is its "
                         "state, which a replay cannot compare; pass what f takes from it as "
                         "an argument")
        else:
            return _reach_object(x, kind, work, walk)
    return False


def _queues():
    """The classes of queues, whose ``get`` gives the next item as an iterator does: the queue
    module's, and asyncio's and multiprocessing's where they are imported."""
    found = [queue.Queue, queue.SimpleQueue]
    for module, names in (("asyncio", ("Queue",)),
                          ("multiprocessing.queues", ("Queue", "SimpleQueue"))):
        imported = sys.modules.get(module)
        found += (getattr(imported, name) for name in names if hasattr(imported, name))
    return tuple(found)


def _reach_object(x, kind, work, walk):
    """Walk into an object's attributes, and its classes' (methods, class-level arrays); an
    object of the standard library's (a SimpleNamespace) by its attributes alone. Returns
    whether it was a library's object, of which the walk read ``_library_state(x)``."""
    module = getattr(kind, "__module__", "builtins")
    if type(module) is not str:  # (a class whose metaclass makes it a descriptor)
        module = "builtins"
    if _library(module) and not _standard(module):
        # NumPy's, SciPy's or mutad's object (a sparse matrix, a poly1d, a frozen
        # distribution, a function with a rule attached, a spline's __slots__): what it
        # holds that a program computes with (``_computed_with``)
        work.extend(_library_state(x))
        return True
    namespace = getattr(x, "__dict__", None)
    slots = {name: getattr(x, name) for cls in kind.__mro__
             for name in _slot_names(cls) if hasattr(x, name)}
    # (an installed package's objects: by names only; the standard library's plain ones, a
    # SimpleNamespace, hold the user's values)
    users = _standard(module) or _users_module(module)
    if type(namespace) is dict:
        walk.hold(namespace, whole=users)
    if _standard(module):
        if (module, kind.__qualname__) in _ATTRIBUTE_BAGS and type(namespace) is dict:
            work.append(namespace)  # (its repr and == read every attribute)
        return
    if slots:  # a new dict on each walk: compared by what it holds
        walk.hold(slots, owner=slots, whole=users)
    _hold_class(kind, walk)
    if x is not None:  # what Python calls on it unnamed: x(), x.name, x[k]
        work.extend(_special_methods(kind))
    return False


_BUFFERS = frozenset((bytearray, array.array, mmap.mmap))
"""The types of the buffers not NumPy's that ``reach`` holds as they are among the arrays,
their bytes compared through a view made for the moment (``_memory_of``): a view kept alive
while f runs would keep f from resizing or closing them."""

_ATTRIBUTE_BAGS = frozenset((("types", "SimpleNamespace"), ("argparse", "Namespace")))
"""The standard library's classes of objects that are their attributes (``__module__``,
``__qualname__``): their ``repr`` and ``==`` read every one, whatever names ``f`` names."""


def _library_state(x):
    """What ``reach`` reads of an object of NumPy's, SciPy's or mutad's: the values in its
    ``__dict__`` and ``__slots__`` that a program computes with (``_computed_with``), and the
    function of a ufunc ``np.frompyfunc`` made."""
    namespace = getattr(x, "__dict__", None)
    held = [*namespace.values()] if type(namespace) is dict else []
    held += [getattr(x, name) for cls in type(x).__mro__ for name in _slot_names(cls)
             if hasattr(x, name)]
    if type(x) is np.ufunc:  # np.frompyfunc's: the Python function it calls, held in C
        held += [v for v in gc.get_referents(x) if type(v) is types.FunctionType]
    return tuple(v for v in held if _computed_with(v))


def _computed_with(x):
    """Whether ``x``, held by a library's object, is what a program may compute with: data
    (``_data``), a function of the user's (a rule attached, a LinearOperator's matvec), a
    library's object (aslinearoperator's sparse matrix), or a tuple, list or dict of those
    (the operands of a sum of LinearOperators)."""
    kind = type(x)
    if kind in _COMPUTED_KINDS:  # (told by its exact type: isinstance asks a traced value's
        return True              # ``__class__``, a walk up the stack, on every call)
    # (a tuple, list or dict of data is one of those: asked first, their items' answers; no
    # other is data but as an array or a number, _data's first question)
    if kind is tuple or kind is list:
        return all(map(_computed_with, x))
    if kind is dict:
        return all(map(_computed_with, x.values()))
    # (a traced value told by its type: isinstance would ask its shown ``__class__``, which
    # walks the frames, to give the same answer)
    return (issubclass(kind, _NUMBERS) or kind not in WRAPPERS and isinstance(x, _NUMBERS)) \
        or _users_function(x) or _librarys_object(x)


_COMPUTED_KINDS = frozenset((np.ndarray, np.float64, float, int, bool, complex, str,
                             type(None), Traced))
"""Exact types ``_computed_with`` answers yes for at once: data, and a traced value (an
object of mutad's, as ``_librarys_object`` tells)."""


def _librarys_object(x):
    """Whether ``x`` is an object of a class of NumPy's, SciPy's or mutad's (a sparse matrix),
    not one of their classes, functions, modules or ufuncs."""
    kind = type(x)
    if kind in _NOT_LIBRARYS_OBJECTS or isinstance(x, type):
        return False
    module = getattr(kind, "__module__", None)
    return type(module) is str and _librarys_module(module)


@functools.lru_cache(maxsize=4096)
def _librarys_module(module):
    """Whether the module named ``module`` is NumPy's, SciPy's or mutad's."""
    return _library(module) and not _standard(module)


_NOT_LIBRARYS_OBJECTS = frozenset((types.FunctionType, types.BuiltinFunctionType,
                                   types.ModuleType, np.ufunc))


def _users_function(x):
    """Whether ``x`` is a function of the user's code (not a library's)."""
    return type(x) is types.FunctionType and not _library_file(x.__code__.co_filename)


def _cell_contents(f):
    """What the closure cells of ``f`` hold (those filled)."""
    found = []
    for cell in f.__closure__ or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # (a cell not filled yet)
            pass
    return found


def _reach_items(x, kind, work, large):
    """Walk into the items of the container ``x``, and a mapping's keys too (``"a" in d``)."""
    if len(x) > REACHED_ITEMS:
        large.append(_too_large(f"a {kind.__name__} of {len(x)} items"))
    elif isinstance(x, collections.abc.Mapping):
        work.extend((*x.keys(), *x.values()))
    else:
        work.extend(x)


def _hold_class(cls, walk):
    """Hold the namespaces of ``cls`` and its bases, but those of NumPy's, SciPy's, mutad's
    and the standard library's: a method a subclass inherits, a class attribute; and those
    of its metaclass and its bases, where a class attribute ``cls.scale`` may be found."""
    for base in (*cls.__mro__, *type(cls).__mro__):
        module = getattr(base, "__module__", "builtins")
        if type(module) is str and not _library(module):  # (a new proxy on each call)
            walk.hold(vars(base), owner=base, whole=_users_module(module))


@functools.lru_cache(maxsize=4096)
def _code_globals(code):
    """The names ``code`` and the code objects within it read or write as globals (or, in a
    class's body, as names): not those of attributes, which ``co_names`` holds as well."""
    found: set = set()
    for c in _codes(code):
        _global_names(c, found)
    return frozenset(found)


def _names_by(code, operations):
    """The names the instructions ``operations`` of ``code`` and of the code objects within
    it name."""
    found, codes = set(), [code]
    while codes:
        c = codes.pop()
        found.update(i.argval for i in dis.get_instructions(c) if i.opname in operations)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(found)


@functools.lru_cache(maxsize=4096)
def _code_identifiers(code):
    """The names ``code`` and the code objects within it name (not its strings)."""
    found, codes = set(), [code]
    while codes:
        c = codes.pop()
        found.update(c.co_names)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(found)


@functools.lru_cache(maxsize=4096)
def _identity_read(code):
    """Why a recording of ``code`` (or of a function defined in it) may answer otherwise than
    NumPy, naming the line; None where it cannot. While it records, the replay hands ``f``
    its stand-ins for NumPy's integers and booleans computed from the arguments, which
    Python's ``is``, ``type()`` and ``id()`` tell apart from NumPy's (``(x[0] > 0) is
    np.True_``, ``type(np.argmax(x)) is np.int64``), and no hook reaches: such a recording is
    not replayed. ``v is c`` (``is not`` too) of a constant ``c`` (``out is None``) or of a class
    read as ``__class__`` answers as NumPy's value would (``_answered_as_numpys``). (Python
    3.11 writes ``if out is None`` as a jump, with no ``is`` at all.)"""
    for c in _codes(code):
        instructions = list(dis.get_instructions(c))
        line = c.co_firstlineno
        for k, instruction in enumerate(instructions):
            # (3.13 numbers every instruction; before, the first of each line)
            number = getattr(instruction, "line_number", instruction.starts_line)
            line = number if type(number) is int else line
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") \
                    and instruction.argval in ("eval", "exec"):
                why = ("runs code it builds (eval, exec), in which a replay cannot find what "
                       "would answer otherwise than NumPy while recording: is, type()")
            elif instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") \
                    and instruction.argval in _BUILTIN_READERS:
                why = _reads_identity(f"{instruction.argval}()")
            elif instruction.opname in _BY_NAME and instruction.argval in ATTRIBUTES_APART:
                why = _reads_identity(f"the attribute {instruction.argval} (hasattr, getattr)")
            elif instruction.opname == "IS_OP" and not _answered_as_numpys(instructions, k):
                why = ("compares by identity (is), which a recording would answer otherwise "
                       "than NumPy: it hands f stand-ins for NumPy's integers and booleans "
                       "computed from the arguments ((x[0] > 0) is not np.True_ there); "
                       "compare values with ==, and types with isinstance")
            else:
                continue
            return f"{getattr(c, 'co_qualname', c.co_name)} ({c.co_filename}, line {line}) {why}"
    return None


def _reads_identity(reader):
    """Why a recording of code reading ``reader`` (``type()``, ``id()``, ``operator.is_``) may
    answer otherwise than NumPy."""
    return (f"reads {reader}, which a recording would answer otherwise than NumPy: it hands f "
            "stand-ins for NumPy's integers and booleans computed from the arguments "
            "(type(np.argmax(x)) is not np.int64 there, nor is x[0] > 0 np.True_); compare "
            "values with ==, and types with isinstance")


_NUMPYS_SCALARS = (np.True_, np.int64(0), np.intp(0))


def _attributes_apart():
    """The attributes by whose presence code tells a recording's stand-in from NumPy's integers
    and booleans (``hasattr(b, "__len__")``, ``getattr(i, "numerator", None)``): the special
    ones one of them has and the other lacks, the stand-in's array interface, which it refuses
    as missing, and the others NumPy's scalars have alone (the stand-in's own, ``value``,
    ``dot``, are names too common to read as telling anything)."""
    names = set(dir(Traced)).union(*(dir(type(v)) for v in _NUMPYS_SCALARS))
    numpys = {name for name in names if any(hasattr(type(v), name) for v in _NUMPYS_SCALARS)}
    stand_ins = {name for name in names if getattr(inspect.getattr_static(Traced, name, None),
                                                   "fget", None) is not _REFUSED_AS_MISSING
                 and hasattr(Traced, name)}
    return frozenset(name for name in numpys ^ stand_ins
                     if name in numpys or name[:2] == "__" == name[-2:])


_REFUSED_AS_MISSING = ArrayMethods.__array_interface__.fget
ATTRIBUTES_APART = _attributes_apart()

_BY_NAME = frozenset(("LOAD_CONST", "LOAD_ATTR", "LOAD_METHOD"))
"""Instructions through which code names an attribute (``getattr(b, "__len__")``,
``b.__iter__``)."""


def _protocols_told_apart():
    """The abstract classes of ``collections.abc`` and ``typing``'s runtime protocols (with
    ``typing``'s aliases of the former) that answer ``isinstance`` of a stand-in otherwise than
    of NumPy's integers and booleans, as they test its class for methods (``Iterable``,
    ``Sized``), by ids, with their names."""
    found = {}
    for module in (collections.abc, typing):
        for name, c in vars(module).items():
            origin = getattr(c, "__origin__", c)  # (typing.Iterable: collections.abc's)
            if isinstance(origin, abc.ABCMeta) and (module is not typing or getattr(
                    origin, "_is_runtime_protocol", False) or c is not origin):
                try:
                    apart = issubclass(Traced, origin) != any(
                        isinstance(v, origin) for v in _NUMPYS_SCALARS)
                except TypeError:
                    continue
                if apart:
                    found[id(c)] = f"{module.__name__}.{name}"
    return found


IDENTITY_READERS = {id(type): "type()", id(builtins.id): "id()",
                    id(operator.is_): "operator.is_", id(operator.is_not): "operator.is_not",
                    id(memoryview): "memoryview()", id(sys.getsizeof): "sys.getsizeof",
                    id(weakref.ref): "weakref.ref", id(weakref.proxy): "weakref.proxy",
                    **_protocols_told_apart()}
"""The functions and abstract classes that tell a recording's stand-ins from NumPy's scalars
as ``is`` does, by the ids of those objects: code that names ``type`` or ``id`` is found by its
instructions (``_identity_read``), and where a walk meets one as a value (``ident = id``,
``T = type``, ``operator.is_``, ``functools.partial(operator.is_, np.True_)``,
``collections.abc.Iterable``), it is called there. (``memoryview``: NumPy's scalars have a
buffer, the stand-in none; ``weakref``: the stand-in can be referred to weakly.)"""

FILE_READERS = {id(v): name for name, v in (
    ("open()", builtins.open), ("os.open", os.open),
    ("os.stat", os.stat), ("os.lstat", os.lstat), ("os.listdir", os.listdir),
    ("os.scandir", os.scandir), ("os.path.exists", os.path.exists),
    ("os.path.lexists", os.path.lexists), ("os.path.isfile", os.path.isfile),
    ("os.path.isdir", os.path.isdir), ("os.path.getsize", os.path.getsize),
    ("os.path.getmtime", os.path.getmtime), ("os.getcwd", os.getcwd),
    ("glob.glob", glob.glob), ("glob.iglob", glob.iglob),
    ("pathlib.Path", pathlib.Path), (f"pathlib.{type(pathlib.Path()).__name__}",
                                     type(pathlib.Path())))}
"""The functions (and classes) through which code reads or writes files (or asks after them), by ids: what
they read changes between calls where nothing a replay guards does, and what is written
through them a replay would not write (it runs the recorded steps, not ``f``'s Python), so
code that reaches one is traced on every call. (NumPy's own readers and writers, ``np.load``,
``np.save``, are operations a replay follows.)"""


def _reads_files(reader):
    """Why a function reaching ``reader`` (``open()``, ``os.path.exists``) is traced."""
    return (f"f reaches {reader}: what a file holds may change between calls, and what f "
            "writes to one a replay would not write again; pass what f reads as an argument")


CLOCK_READERS = {id(getattr(module, name)): (f"{module.__name__}.{name}", what)
                 for module, names, what in (
    (time, ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
            "process_time", "process_time_ns", "thread_time", "thread_time_ns",
            "clock_gettime", "clock_gettime_ns", "localtime", "gmtime", "ctime", "asctime",
            "strftime"), "the clock"),
    (os, ("times", "getloadavg"), "the clock"), (resource, ("getrusage",), "the clock"),
    (uuid, ("uuid1",), "the clock"),
    (gc, ("get_count", "get_stats"), "the interpreter's counters"),
    (sys, ("getallocatedblocks",), "the interpreter's counters"))
                 for name in names if module is not None and hasattr(module, name)}
"""The functions that read the clock (or the process's and the interpreter's counters: CPU
time, load, objects allocated), by ids, with what they read: they answer
otherwise on every call, where nothing a replay guards changes, so code that reaches one is
traced on every call (a replay would give each call the recorded reading).
``time.localtime()``, ``ctime()``, ``asctime()`` and ``strftime(format)`` read it when given no
time, ``uuid.uuid1()`` makes its identifier of it. ``datetime``'s ``now()``, ``utcnow()`` and
``today()``, and ``np.datetime64("now")``, are told by ``_reads_clock``."""

_CLOCK_METHODS = frozenset(("now", "utcnow", "today"))


def _dated(x):
    """Whether ``x`` is a class that reads the clock by one of ``_CLOCK_METHODS``:
    ``datetime``'s (``datetime.now()``, ``date.today()``) and ``np.datetime64`` (given
    ``"now"`` or ``"today"``)."""
    return x is np.datetime64 or isinstance(x, type) and issubclass(x, datetime.date)


def _reads_clock(x, names):
    """Why code reaching ``x`` (among code that names ``names``) is traced, where ``x`` is a
    function of ``CLOCK_READERS`` or a class of ``_dated`` whose clock the code names
    (``datetime.now()``, ``date.today()``, ``np.datetime64("now")``); else None."""
    if id(x) in CLOCK_READERS:
        reader, what = CLOCK_READERS[id(x)]
    elif _dated(x) and not names.isdisjoint(_CLOCK_METHODS):
        now = min(names & _CLOCK_METHODS)
        reader, what = (f"numpy.datetime64('{now}')" if x is np.datetime64 else
                        f"datetime.{x.__name__}.{now}()"), "the clock"
    else:
        return None
    return (f"f reaches {reader}, which reads {what}: its reading changes between calls, "
            "where a replay would give every call the recorded one; pass what f reads of it "
            "as an argument")


_BUILTIN_READERS = frozenset(name for name, v in vars(builtins).items()
                             if id(v) in IDENTITY_READERS) | {"eval", "exec"}
"""The builtins among them, which the walk compares by identity alone (``type``, ``id``), and
``eval`` and ``exec``, whose code no scan sees: code that names one is found by its
instructions, and the builtins module met as an object (``builtins.type``) by the names."""


def _answered_as_numpys(instructions, k):
    """Whether the ``is`` of instruction ``k`` has a constant or a class among its operands,
    which no stand-in and no NumPy scalar is: a constant loaded just before it, or before a
    single load (``None is v``), where no jump lands in between (``v is (w if c else None)``),
    or an object's ``__class__``, which a stand-in answers as NumPy's value does (a
    dataclass's ``other.__class__ is self.__class__``)."""
    right = instructions[k - 1] if k else None
    if right is None or instructions[k].is_jump_target:
        return False
    if right.opname == "LOAD_CONST" or right.opname == "LOAD_ATTR" \
            and right.argval == "__class__":
        return True
    return k > 1 and right.opname in _SINGLE_LOADS and not right.is_jump_target \
        and instructions[k - 2].opname == "LOAD_CONST"


_SINGLE_LOADS = frozenset(("LOAD_FAST", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF",
                           "LOAD_CLASSDEREF"))
"""Instructions that push one value and pop none (an operand of ``is``; a LOAD_GLOBAL that
also pushes a call's NULL is not one)."""


@functools.lru_cache(maxsize=4096)
def _imports(code):
    """``(level, name, fromlist, statement)`` of each ``import`` statement of ``code`` and of
    the code objects within it (``import config``, ``from .config import dt``; ``statement``
    True), and of each string among their constants where they call ``__import__``
    (``__import__("config")``; False: any string may be one)."""
    found, codes = [], [code]
    while codes:
        c = codes.pop()
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        if "__import__" in c.co_names:
            found.extend((0, k, None, False) for k in c.co_consts if type(k) is str)
        constants = []  # (an import's level and fromlist are the constants loaded before it)
        for instruction in dis.get_instructions(c):
            if instruction.opname == "IMPORT_NAME":
                level, fromlist = constants[-2:] if len(constants) >= 2 else (0, None)
                found.append((level, instruction.argval, fromlist, True))
            constants = [*constants, instruction.argval] \
                if instruction.opname == "LOAD_CONST" else []
    return tuple(found)


def _imported_names(function):
    """``(name, fromlist, statement)`` of each import of ``function``'s code (``_imports``),
    its name made absolute."""
    package = function.__globals__.get("__package__") or ""
    for level, name, fromlist, statement in _imports(function.__code__):
        if type(level) is not int or type(name) is not str:
            continue
        if level:
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            name = f"{base}.{name}" if name else base
        yield name, fromlist, statement


def _module_names(function):
    """The names of the modules ``function``'s code imports when it runs, and of the packages
    on their way (``a``, ``a.b`` of ``import a.b``; ``a.b.c`` of ``from a.b import c``, which
    may be a module)."""
    for name, fromlist, _ in _imported_names(function):
        parts = name.split(".")
        yield from (".".join(parts[:k]) for k in range(1, len(parts) + 1))
        yield from (f"{name}.{item}" for item in (fromlist if type(fromlist) is tuple else ()))


def _imported_modules(function):
    """The modules ``function``'s code imports when it runs (``import config`` inside f), as
    ``sys.modules`` holds them now: what it reads of them is f's state as a global module's
    is. (One not imported yet: ``_not_imported``.)"""
    return [module for module in map(sys.modules.get, _module_names(function))
            if module is not None]


def _importing_state(names):
    """What ``reach`` reads of a function whose code imports the modules ``names`` (a tuple):
    its ``_function_state`` and those modules as ``sys.modules`` holds them (one imported anew
    between calls, ``del sys.modules[name]``, is another module)."""
    def read(f):
        return (*_function_state(f), _APART, *map(sys.modules.get, names))
    return read


def _not_imported(function):
    """The first module an ``import`` statement of ``function``'s code names that is not
    imported yet, or None: the call imports it, after the walk that would have read what f
    reaches through it (its code, ``operator.is_`` there; a walk kept as ``Reached`` reads
    only what it met)."""
    for name, _, statement in _imported_names(function):
        if statement and name not in sys.modules and not _library(name):
            return name  # (NumPy's, SciPy's, the standard library's: held by names alone)
    return None


@functools.lru_cache(maxsize=4096)
def _code_names(code):
    """The names ``code`` (immutable) and the code objects within it name, and the strings
    among their constants, in tuples too (a name an attribute may be given as), and the
    attributes their format fields read (``"{0.scale}".format(p)``)."""
    found = set()
    codes = [code]
    while codes:
        c = codes.pop()
        found.update(c.co_names)
        constants = list(c.co_consts)
        while constants:
            k = constants.pop()
            if type(k) is str:
                found.add(k)
                if "{" in k:
                    found.update(_FORMATTED_ATTRIBUTE.findall(k))
            elif type(k) in (tuple, frozenset):
                constants.extend(k)
            elif isinstance(k, types.CodeType):
                codes.append(k)
    return frozenset(found)


_FORMATTED_ATTRIBUTE = re.compile(r"(?<=[\w\]])\.([A-Za-z_]\w*)(?=[^{}]*})")
"""An attribute a format field reads (``scale`` of ``{0.scale}``, ``{p.w.scale:.3f}``)."""

_NUMBERS = (np.ndarray, np.generic, int, float, complex, bool, str, type(None))


def _data(x):
    """Whether ``x``, held by a library's object, is data a program may compute with: an
    array, a number, or a container of them (a frozen distribution's ``kwds``)."""
    if isinstance(x, _NUMBERS):
        return True
    if type(x) in (tuple, list):
        return all(isinstance(v, _NUMBERS) for v in x)
    if type(x) is dict:
        return all(isinstance(v, _NUMBERS) for v in x.values())
    return False


def _special_methods(cls):
    """The special methods (``__name__``) that ``cls`` and its bases other than the
    libraries' define as functions: Python calls them on an object without the program naming
    them, and what they read may come from elsewhere (``x.name`` through ``__getattr__``,
    ``x[k]``, ``x()``, ``float(x)``, ``x * y``, a descriptor's ``__get__``)."""
    found = []
    for base in cls.__mro__:
        module = getattr(base, "__module__", "builtins")
        if type(module) is str and not _library(module):
            every = _users_module(module)  # (an installed package's: the four of SPECIAL)
            found.extend(v for k, v in vars(base).items() if type(v) is types.FunctionType and (
                k in SPECIAL or every and k[:2] == "__" == k[-2:]))
    return found


SPECIAL = ("__getattr__", "__getattribute__", "__getitem__", "__call__")
"""The special methods through which an installed package's object may read what the program
depends on (``x.name``, ``x[k]``, ``x()``): the user's classes' are all walked."""


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _slot_names(cls):
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else slots


@functools.lru_cache(maxsize=4096)
def _users_file(filename):
    """Whether the code or module of ``filename`` is the user's, not NumPy's, SciPy's,
    mutad's, the standard library's or an installed package's: the names a user's program
    builds are the user's to guard (a library's ``getattr`` reads its own objects, which are
    not the program's parameters)."""
    return not _installed(filename) and not _library_file(filename)


def _home(f):
    """The file of ``f``'s code (a method's, a partial's function's), None if it has none."""
    while True:
        if isinstance(f, functools.partial):
            f = f.func
        elif isinstance(f, types.MethodType):
            f = f.__func__
        else:
            break
    code = getattr(f, "__code__", None)
    return None if code is None else code.co_filename


def _users_module(name):
    """Whether the module named ``name`` is the user's (its file not an installed package's
    nor a library's; one with no file, ``__main__`` in a notebook, or not imported, is)."""
    module = sys.modules.get(name)
    filename = getattr(module, "__file__", None)
    return not filename or _users_file(filename)


def _installed(filename):
    return any(part in filename for part in ("site-packages", "dist-packages"))


@functools.lru_cache(maxsize=4096)
def _library_file(filename):
    """Whether ``filename`` is NumPy's, SciPy's, mutad's (its benchmark workloads aside: code
    differentiated as a user's is) or the standard library's (not the packages installed
    beside it, which may be the user's), wherever they are."""
    if any(filename.startswith(directory) for directory in _LIBRARIES):  # (NumPy's may be
        return not filename.startswith(_WORKLOADS)  # installed within the standard library's)
    return filename.startswith(_STANDARD) and not _installed(filename)


_MUTAD = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SCIPY = importlib.util.find_spec("scipy")
_LIBRARIES = tuple(os.path.dirname(path) + os.sep for path in (
    np.__file__, _SCIPY.origin if _SCIPY is not None else None, _MUTAD) if path)
"""Where NumPy, SciPy and mutad are."""
_STANDARD = os.path.dirname(os.__file__) + os.sep
"""Where the standard library is (``os``'s folder), the installed packages often within."""
_WORKLOADS = os.path.join(_MUTAD, "bench") + os.sep


def _library(module):
    """Whether ``module`` (a name) is NumPy's, SciPy's, mutad's or the standard library's,
    whose state a program does not depend on by the values of its arrays."""
    top = module.partition(".")[0]
    return top in ("numpy", "scipy", "mutad") or _standard(module)


def _standard(module):
    """Whether ``module`` (a name) is the standard library's (``builtins`` included)."""
    top = module.partition(".")[0]
    return top == "builtins" or top in sys.stdlib_module_names


class Contents:
    """The bytes of an array ``f`` reaches, as they were when a program was recorded: a copy,
    or a digest of a large array, with its layout."""

    __slots__ = ("layout", "copy", "digest", "bytes")

    def __init__(self, a):
        a = _memory_of(a)
        self.layout = _reached_layout(a)
        self.copy = self.digest = self.bytes = None
        if _as_bytes(a) and not a.dtype.hasobject:  # (kept as the bytes they are compared
            self.bytes = a.tobytes()  # with: one copy a call; a copy of objects keeps them)
        elif a.nbytes <= COPIED:
            self.copy = a.copy()
        else:
            self.digest = _digest(a)

    def same(self, a):
        a = _memory_of(a)
        if _reached_layout(a) != self.layout:
            return False
        if self.bytes is not None:
            return a.tobytes() == self.bytes
        if self.copy is None:
            return _digest(a) == self.digest
        return _same_bits(a, self.copy)

    def restore(self, a):
        """Write the bytes kept back into ``a``, where they changed; False where they did and
        only a digest was kept (or its layout changed)."""
        if self.same(a):
            return True
        a = _memory_of(a)
        if _reached_layout(a) != self.layout or self.digest is not None:
            return False
        a[...] = self.copy if self.bytes is None else np.frombuffer(
            self.bytes, a.dtype).reshape(a.shape)
        return True


def _reached_layout(a):
    """Where ``a``'s memory lies and how it is read, and whether it may be written: code that
    asks (``a.flags.writeable``) decides on it as on the bytes."""
    return address(a), a.shape, a.strides, a.dtype, a.flags.num & WRITEABLE != 0


def _memory_of(a):
    """An ndarray subclass's memory as a plain array: a subclass's copy and bytes may be its
    own (np.ma.masked, the constant a function compares results with, raises on tobytes); a
    buffer not NumPy's (``_BUFFERS``) viewed as bytes."""
    if type(a) in _BUFFERS:
        return np.frombuffer(a, np.uint8)
    if type(a) is not np.ndarray and isinstance(a, np.ndarray):
        return np.ndarray.view(a, np.ndarray)  # (not a stand-in's own view: ``plain_memory``)
    return a


def _as_bytes(a):
    """Whether ``_same_bits`` compares ``a``'s bytes as bytes: a short array's, at a fifth of
    the cost of comparing them as unsigned integers (compared on every call, for each array
    ``f`` reaches: a loss's weights), or of a dtype that has no integers of its size."""
    return a.dtype.hasobject or a.dtype.itemsize not in (1, 2, 4, 8) or a.nbytes < SHORT


def _same_bits(a, b):
    """Whether ``a`` and ``b``, arrays of one shape and dtype, hold the same bytes (NaN equal to
    itself, -0.0 not equal to 0.0): as bytes (``_as_bytes``), else as unsigned integers, which
    copies nothing."""
    if _as_bytes(a):
        return a.tobytes() == b.tobytes()
    bits = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(bits), b.view(bits)))


def _digest(a):
    return hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8).reshape(-1)).digest()


class FreshEntropy:
    """Counts, while some recording runs, the draws of fresh entropy: the generators NumPy
    seeds from it (``np.random.default_rng()``, ``RandomState()``, ``PCG64()`` without a
    seed: NumPy's ``bit_generator.randbits``), and the operating system's bytes the standard
    library draws (``os.urandom``, ``os.getrandom``, ``secrets``, ``uuid.uuid4()``,
    ``random.SystemRandom``, ``random.Random()`` without a seed): a recording during which
    one was would replay its numbers. Installed by the first recording that starts and
    removed by the last that ends; a draw made by another thread meanwhile counts too (that
    signature is traced)."""

    lock = threading.Lock()
    users = 0
    count = 0
    originals = []  # (module, name, function) of each function counted

    def __enter__(self):
        cls = type(self)
        with cls.lock:
            if cls.users == 0:
                for module, name in ((np.random.bit_generator, "randbits"), (os, "urandom"),
                                     (os, "getrandom"), (random, "_urandom"),
                                     (random.Random, "seed")):
                    draw = getattr(module, name, None)
                    if draw is not None:
                        cls.originals.append((module, name, draw))
                        setattr(module, name, (cls._seeded if module is random.Random
                                               else cls._counted)(draw))
            cls.users += 1
            self.before = cls.count
        return self

    @classmethod
    def _counted(cls, draw):
        def counted(*args):
            cls.count += 1
            return draw(*args)
        return counted

    @classmethod
    def _seeded(cls, seed):
        """``random.Random.seed``, counted where it seeds from fresh entropy (``Random()``,
        ``r.seed()``: CPython's C code reads the operating system's bytes itself)."""
        def seeded(self, a=None, *args, **kwargs):
            if a is None:
                cls.count += 1
            return seed(self, a, *args, **kwargs)
        return seeded

    def __exit__(self, *exc):
        cls = type(self)
        with cls.lock:
            self.seeded = cls.count != self.before
            cls.users -= 1
            if cls.users == 0:
                while cls.originals:
                    module, name, draw = cls.originals.pop()
                    setattr(module, name, draw)


def _generators(objects, global_ones=True):
    """``(read, write)`` of the state of each random generator a call may draw from: NumPy's
    global one, the random module's (where ``global_ones``), and the generators among
    ``objects`` (what ``f`` reaches: NumPy's, and instances of ``random.Random``), and the
    seed sequences, which count the children they spawned (``rng.spawn(1)``,
    ``seed_sequence.spawn(1)``: the next gives other seeds)."""
    found = [(functools.partial(np.random.get_state, legacy=False), np.random.set_state),
             (random.getstate, random.setstate)] if global_ones else []
    for x in objects:
        if isinstance(x, (np.random.Generator, np.random.BitGenerator)):
            bits = x.bit_generator if isinstance(x, np.random.Generator) else x
            found.append((lambda bits=bits: bits.state,
                          lambda state, bits=bits: setattr(bits, "state", state)))
            x = bits.seed_seq
        if isinstance(x, np.random.SeedSequence):  # (its count is read-only: set as pickle
            found.append((lambda x=x: x.__reduce__()[2], x.__setstate_cython__))  # sets it)
        elif isinstance(x, np.random.RandomState):
            found.append((functools.partial(x.get_state, legacy=False), x.set_state))
        elif isinstance(x, random.Random):  # an instance of the random module's own
            found.append((x.getstate, x.setstate))
    return found


def _random_states(objects, global_ones=True):
    """The states of the random generators a call may draw from (``_generators``), as bytes.
    A draw while recording changes them: the program would replay its numbers."""
    return pickle.dumps([read() for read, _ in _generators(objects, global_ones)])


class Saved:
    """What ``f`` may change of the state it reaches, as it was before a call that records:
    the random generators' states (``_generators``), the items of the containers, the
    attributes of the user's objects and classes, the globals of the user's functions, and
    the bytes of the arrays reached (``contents``, their ``Contents``). A recording that a
    rule refused is traced again, running ``f`` a second time: restored first, what ``f`` did
    on the first run (a draw, an append, a count kept in a global) is done once, as NumPy
    alone does it."""

    def __init__(self, objects, arrays, contents):
        self.generators = [(write, read()) for read, write in _generators(objects)]
        self.items, self.namespaces, seen = [], [], set()
        for x in objects:
            if id(x) in seen:
                continue
            seen.add(id(x))
            kind = type(x)
            if kind in (list, bytearray, set, collections.deque):
                self.items.append((x, kind(x)))
            elif kind in _BUILTIN_CONTAINERS and isinstance(x, dict):
                self.namespaces.append((x, dict(x), x.__setitem__, x.__delitem__))
            elif _users_function(x):
                namespace = x.__globals__
                if id(namespace) not in seen and _users_file(x.__code__.co_filename):
                    seen.add(id(namespace))
                    self.namespaces.append((namespace, dict(namespace), namespace.__setitem__,
                                            namespace.__delitem__))
            elif isinstance(x, type):
                if _users_module(getattr(x, "__module__", "builtins")):
                    self.namespaces.append((vars(x), dict(vars(x)),
                                            functools.partial(setattr, x),
                                            functools.partial(delattr, x)))
            elif type(getattr(x, "__dict__", None)) is dict and _users_module(
                    getattr(kind, "__module__", "builtins")):
                namespace = x.__dict__
                self.namespaces.append((namespace, dict(namespace), namespace.__setitem__,
                                        namespace.__delitem__))
        self.arrays = list(zip(arrays, contents, strict=True))

    def restore(self):
        for write, state in self.generators:
            write(state)
        for x, items in self.items:
            if type(x) in (list, bytearray):
                x[:] = items
            else:
                x.clear()
                x.extend(items) if type(x) is collections.deque else x.update(items)
        for namespace, items, put, remove in self.namespaces:
            for name in [name for name in namespace if name not in items]:
                remove(name)
            for name, value in items.items():
                if namespace.get(name, _APART) is not value:
                    put(name, value)
        for a, contents in self.arrays:
            if not contents.restore(a):
                raise UnsupportedOperationError(
                    f"f wrote an array of shape {_memory_of(a).shape} it reaches besides its "
                    f"arguments (of more than {COPIED:,} bytes, which a replay compares by a "
                    "digest) on a call it recorded and must trace again (a rule refused an "
                    "array outside argnums, and f caught the error): running f again would "
                    "find it written. Pass the array as an argument, or differentiate f "
                    "without replay=True")


try:  # NumPy's print options, which it replaces (never changes) as they are set: told at once
    _print_options = importlib.import_module("numpy._core.printoptions").format_options.get
except (ImportError, AttributeError):
    _print_options = np.get_printoptions


def _decimal_context():
    context = sys.modules["decimal"].getcontext()
    return (context.prec, context.rounding, context.Emin, context.Emax, context.capitals,
            context.clamp, *context.traps.values())


_ENVIRONMENT = getattr(os.environ, "_data", os.environ)
"""The environment's items as the operating system has them, copied without decoding them (at
a small fraction of the cost of ``dict(os.environ)``)."""

_SETTINGS = {
    "decimal": _decimal_context,
    "os": lambda: dict(_ENVIRONMENT),  # (os.getenv, os.environ.get read it)
    "sys": lambda: tuple(sys.argv),
}
"""Per module, its settings kept outside the names the walk compares, which change its
functions' answers: the decimal context (a thread's, changed in place: its precision), the
environment, and the items of ``sys.argv``."""


def _error_filters():
    """Python's warnings filters that turn a warning into an error: a warning ``f``'s own code
    issues (``warnings.warn``), which a replay does not issue again, raises under one where
    it is shown under others."""
    return tuple(held for held in warnings.filters if held[0] == "error")


def _reads_a_setting(x):
    """Whether ``x`` is a function of NumPy's or SciPy's that reads one of their settings
    and takes no arguments, whose answer the program may depend on (``f`` decides on it):
    ``np.getbufsize``, ``scipy.special.geterr`` (NumPy's error handling at the call is the
    signature's, and its print options are always read)."""
    return x is np.getbufsize or (callable(x) and getattr(x, "__name__", None) == "geterr"
                                  and str(getattr(x, "__module__", "")).startswith("scipy."))


def _settings(objects):
    """``(read, value)`` of the settings a program's answers may depend on: NumPy's print
    options (a string of a constant array, written as the program was recorded), the
    recursion limit (a RecursionError f catches), those of ``_SETTINGS`` of the modules
    whose functions, classes or namespaces ``f`` reaches, the caller's floating-point error
    callback where it reaches ``np.geterrcall``, the settings of ``_reads_a_setting`` it
    reaches (``scipy.special.geterr()``), the warnings filters that raise where it reaches
    ``warnings.warn`` (``_error_filters``), the virtual subclasses registered
    with abstract base classes where it reaches one, and the states of the random generators
    it reaches; a replay under others records anew."""
    modules = {x.__name__ if type(x) is types.ModuleType else getattr(x, "__module__", None)
               for x in objects if isinstance(x, (types.ModuleType, type, types.FunctionType,
                                                  types.BuiltinFunctionType))}
    found = [(_print_options, _print_options()), (sys.getrecursionlimit, sys.getrecursionlimit())]
    found += ((read, read()) for name, read in _SETTINGS.items() if name in modules)
    if any(x is np.geterrcall or x is np.seterrcall for x in objects):  # (the caller's
        found.append((users_callback, users_callback()))  # callback, which f reads)
    found += ((x, x()) for x in {id(x): x for x in objects if _reads_a_setting(x)}.values())
    if any(x is warnings.warn or x is warnings.warn_explicit for x in objects):
        found.append((_error_filters, _error_filters()))  # (f's own warnings: raised or not)
    if any(isinstance(x, abc.ABCMeta) for x in objects):  # (isinstance(obj, Base): a class
        found.append((abc.get_cache_token, abc.get_cache_token()))  # registered since)
    # the state of a generator f reaches, itself or by a method of it (np.random.normal is
    # one of NumPy's global generator), which it may read without drawing (a program that
    # draws is not kept: ``_random_states``): np.random.get_state(), copy.deepcopy(rng); or
    # draw from and then put back (np.random.seed(0) after a draw, set_state): the numbers
    # drawn are the state's at the call
    generators = {id(x): x for x in objects if isinstance(x, _GENERATORS)}
    generators.update((id(x.__self__), x.__self__) for x in objects if type(x) in (
        types.BuiltinMethodType, types.MethodType) and isinstance(x.__self__, _GENERATORS))
    if generators:
        read = functools.partial(_random_states, generators.values(), False)
        found.append((read, read()))
    return tuple(found)


_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
               random.Random)

REACHED = "what f reaches"
"""The key of ``Replayed.reasons`` for a function whose reach changes on every call."""

PLAIN_NUMBERS = "numbers outside argnums"
"""The key of ``Replayed.reasons`` for a function whose numbers outside ``argnums`` (passed as
they are, so a program holds their values) take new values on every call."""


def _changed(objects, arrays, held):
    """What changed in what ``f`` reaches since ``held`` (``(objects, contents)``), in words,
    or None."""
    if held is None:
        return "first call"
    if len(objects) != len(held[0]):
        return "the objects it reaches"
    # (the list itself where the last walk holds: ``Replayed._reach``; else compared in one
    # pass, the common answer)
    if objects is not held[0] and not all(map(operator.is_, objects, held[0])):
        a = next(a for a, b in zip(objects, held[0]) if a is not b)
        return f"an object of type {type(a).__name__} rebound"
    for a, contents in zip(arrays, held[1]):
        if not contents.same(a):
            return f"an array of shape {_memory_of(a).shape} changed"
    return None


def _as_inputs(bound, objects, arrays, parts):
    """The float arrays bound to modules' names that ``f`` reaches (``bound``: ``reach``'s) as
    inputs of its programs, which a recording traces as it traces an argument outside argnums
    (its decisions on their values are guards; their dtypes, shapes, layouts and the memory
    they share with the arguments pick a program) and a replay reads afresh on each call:
    ``([(namespace, name, array)], objects, arrays)``, ``objects`` and ``arrays`` (what ``reach``
    found) less those arrays, which a rebinding of the name no longer changes. None where one
    of them is not an input alone: where ``f`` reaches it another way too (an object's
    attribute: it is compared as before), shares memory with another array ``f`` reaches or
    another argument of the call, or where some code reached rebinds such a name (``global A;
    A = ...``, ``cfg.A = ...``: it would rebind it to a traced array)."""
    stored = set()
    for x in objects:
        if type(x) is types.CodeType:
            stored.update(_stored_names(x))
    inputs = [(namespace, name, namespace[name]) for namespace, name in bound
              if name not in stored]
    if not inputs:
        return None
    ids = {id(a) for _, _, a in inputs}
    owners = {id(owner(a)) for _, _, a in inputs}
    if len(ids) != len(inputs) or len(owners) != len(inputs):  # one array, two names
        return None
    others = [x for x in objects if id(x) not in ids]
    apart = [a for a in arrays if id(a) not in ids]
    if len(objects) - len(others) != len(inputs) or len(arrays) - len(apart) != len(inputs) or (
            any(id(owner(a)) in owners for a in apart) or any(
                isinstance(leaf, np.ndarray) and id(owner(leaf)) in owners
                for leaves, _ in parts for leaf in leaves)):
        return None
    return inputs, others, apart


def _other_threads():
    """Whether a thread of the program's other than this one runs (not a daemon thread, as
    an interpreter's or a notebook's own threads are)."""
    current = threading.current_thread()
    return threading.active_count() > 1 and any(
        t is not current and not t.daemon for t in threading.enumerate())


@functools.lru_cache(maxsize=4096)
def _stored_names(code):
    """The names ``code`` and the code objects within it bind or delete as globals or as
    attributes."""
    return _names_by(code, _STORE_OPS)


WRITTEN_INPUT = ("f wrote into an array bound to a module's name: its bytes before each call "
                 "would be an input of the program, which a replay does not read, so each "
                 "call is traced")
"""Why a recording stops where ``f`` writes into one of its inputs bound to names."""


_STORE_OPS = frozenset(("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR",
                        "STORE_NAME", "DELETE_NAME"))


_REFUSALS_OF_TRACED = (MutadError, TypeError, struct.error)
"""The errors of code given a traced value where it takes NumPy's (a rule's refusal, a type
it does not take), which a recording that follows arrays outside argnums may meet where
tracing, holding them as NumPy's, does not."""


class Replayed:
    """``grad(f, replay=True)``: records ``f``'s program per signature and replays it."""

    def __init__(self, f, trace, argnums, policy, with_value, has_aux=False, memory=None):
        self.f = f
        self.trace = trace  # api._value_and_gradient
        self.argnums = argnums
        self.policy = policy
        self.with_value = with_value
        self.has_aux = has_aux
        self.memory = memory
        self.programs = collections.OrderedDict()  # signature -> Program, or why it is traced
        self.others = {}  # signature -> its other programs, the most recently used first
        # Programs share their buffers' descriptions between calls: one call at a time
        # replays or records. A call made meanwhile from another thread waits for a replay,
        # which costs less than tracing, and is traced during a recording, which runs f (f
        # may wait for that thread)
        self.lock = threading.Lock()
        self.recording = False
        self.failures = collections.Counter()
        self.changes = 0  # calls in a row on which what f reaches changed
        self.new_numbers = 0  # calls in a row that recorded for new numbers outside argnums
        self._shapes = {}  # signature -> the signature without those numbers' values
        self.unfollowed = {}  # what a replay does not follow among the arguments -> why
        self.held = None
        self.reached = None  # the last walk of what f reaches, while what it read holds
        # The float arrays bound to modules' names that f reaches (``reach``'s ``bound``),
        # those bound on the last call, and whether they are inputs of its programs (from the
        # first call on which one of them was rebound: ``_as_inputs``)
        self.bound, self.last_bound, self.binding = (), {}, False
        self.checked = {}  # number of positional arguments -> check_argnums's answer
        self.__wrapped__ = f
        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(f, name):
                setattr(self, name, getattr(f, name))

    @property
    def reasons(self):
        """Why each signature that is traced on every call is: ``{signature: reason}``. Of
        arguments a replay does not follow (a complex number, a registered pytree), which
        have no signature, the key names their kind (``"a complex128 number"``, the class's
        name)."""
        reasons = {key: p for key, p in self.programs.items() if type(p) is str}
        reasons.update(self.unfollowed)
        return reasons

    @user_frames
    def __call__(self, *args, **kwargs):
        value, grads = self._value_and_gradient(args, kwargs)
        if self.with_value:
            return value, grads
        return (grads, value[1]) if self.has_aux else grads

    def _value_and_gradient(self, args, kwargs):
        checked = self.checked.get(len(args))  # (argnums is fixed: checked once per count)
        if checked is None:
            checked = self.checked[len(args)] = check_argnums(self.argnums, len(args))
        selected, single = checked
        # Under detect_anomaly every call is traced: a program's steps keep no source lines
        if ACTIVE.running or anomaly_detection() or not self.lock.acquire(blocking=False) and (
                self.recording or not self.lock.acquire(timeout=REPLAY_WAIT)):
            return self._traced(args, kwargs)
        try:
            return self._replay_or_record(args, kwargs, selected, single)
        finally:
            self.lock.release()

    def _traced(self, args, kwargs, recording=None):
        """The call traced (``api._value_and_gradient``), its program written down by
        ``recording`` if given."""
        return self.trace(self.f, args, kwargs, self.argnums, self.policy, self.has_aux,
                          self.memory, recording=recording)

    def _reach(self):
        """``reach(self.f)``: the last walk's answer where what it read holds (``Reached``)."""
        known = self.reached
        if known is not None and known.holds():
            self.bound = known.bound
            return known.objects, known.arrays, None
        kept, self.bound = [], []
        answer = reach(self.f, kept=kept, bound=self.bound)
        self.reached = kept[0] if kept else None
        return answer

    def _replay_or_record(self, args, kwargs, selected, single):
        objects, arrays, unfollowed = self._reach()
        if unfollowed is not None:  # what a replay cannot compare (or only at tracing's cost)
            self.unfollowed[REACHED] = unfollowed
            return self._traced(args, kwargs)
        parts = [flatten(arg) for arg in (*args, kwargs)]
        inputs = None
        if self.binding and self.bound:  # (float arrays bound to modules' names)
            inputs = _as_inputs(self.bound, objects, arrays, parts)
            if inputs is not None:
                inputs, objects, arrays = inputs
        changed = _changed(objects, arrays, self.held)
        if changed is not None:
            if self.bound and not self.binding:  # one of them rebound since the last change?
                last, self.last_bound = self.last_bound, {
                    (id(namespace), name): namespace[name] for namespace, name in self.bound}
                self.binding = any(last.get(key, a) is not a
                                   for key, a in self.last_bound.items())
                inputs = _as_inputs(self.bound, objects, arrays, parts) if self.binding else None
                if inputs is not None:
                    inputs, objects, arrays = inputs
            self.programs.clear()  # what f reaches changed: every program may differ
            self.others.clear()
            self.held = objects, [Contents(a) for a in arrays]
            self.changes += 1
            if self.changes >= FAILED_GUARDS:  # on every call: recording would cost more
                self.unfollowed[REACHED] = (
                    f"what f reaches besides its arguments changed on {self.changes} calls in a "
                    f"row ({changed}): pass what changes between calls as an argument")
                return self._traced(args, kwargs)
        else:
            self.changes = 0
            self.unfollowed.pop(REACHED, None)
        given = (*args, kwargs)
        if inputs is not None:  # (after the arguments: outside argnums)
            given = (*given, tuple(a for _, _, a in inputs))
            parts.append(flatten(given[-1]))
        described = [(leaves, arg, i > len(args) or self.argnums is not None and i not in
                      selected) for i, ((leaves, _), arg) in enumerate(zip(parts, given))]
        key, why = signature(described)
        if why is not None:  # arguments a replay does not follow: traced, reasons says why
            self.unfollowed[key] = why
            return self._traced(args, kwargs)
        if PLAIN_NUMBERS in self.unfollowed and key not in self.programs:
            return self._traced(args, kwargs)
        modes, picks = _error_handling()  # the caller's floating-point error handling
        key = (key, *picks, _warning_filters()[1])  # picks a program too
        program = self.programs.get(key)
        # The classes of the arguments' objects, whose methods f may call, are reached as f
        # is, per program (they are part of its signature)
        kinds = classes((args, kwargs)) if kwargs or not all(  # (arrays and numbers alone,
            type(x) in _NOT_OBJECTS for x in args) else []   # the common case, told at once)
        reached = reach(self.f, kinds) if kinds else None  # (their methods by f's names)
        if reached is not None and reached[2] is not None:
            self.unfollowed[REACHED] = f"through its arguments, {reached[2]}"
            return self._traced(args, kwargs)
        if reached is not None and inputs is not None:  # (the inputs: as in ``_as_inputs``)
            ids = {id(a) for _, _, a in inputs}
            reached = ([x for x in reached[0] if id(x) not in ids],
                       [a for a in reached[1] if id(a) not in ids], None)
        candidates = [] if type(program) is not Program else [program, *self.others.get(
            key, ())] if self.others else [program]  # (a key hashed once less, in the common case)
        if kinds:
            candidates = [p for p in candidates if not _changed(*reached[:2], p.reached)]
            if not candidates and type(program) is Program:
                program = None
        flat = [leaf for leaves, _ in parts for leaf in leaves]
        if any(p.aliases(flat) for p in candidates):
            return self._traced(args, kwargs)
        if candidates:
            if len(self.programs) > 1:  # (one is the last already: the key hashed once less)
                self.programs.move_to_end(key)
            try:
                value, grads = self._first_that_holds(key, program, candidates, flat, modes)
            except GuardFailed as failed:
                self.failures[key] += 1
                if self.failures[key] >= FAILED_GUARDS:
                    del self.failures[key]
                    program = (f"its guards failed on {FAILED_GUARDS} calls in a row: the "
                               "program changes from call to call" + (
                                   f" ({failed.args[0]})" if failed.args else ""))
                    self._keep(key, program)  # this call and the later ones are traced
            else:
                self.failures.pop(key, None)
                start, per_argument = 0, []
                for leaves, rebuild in parts[:len(args)]:  # (keyword arguments: not selected)
                    per_argument.append(rebuild(grads[start:start + len(leaves)]))
                    start += len(leaves)
                grads = per_argument[selected[0]] if single else tuple(
                    per_argument[i] for i in selected)
                return value, grads
        if program is None and self._numbers_change(described, key):
            return self._traced(args, kwargs)
        if inputs is not None and type(program) is not str and _other_threads():
            return self._traced(args, kwargs)  # (it would meet the traced arrays bound to the
            # inputs' names while the call records: ``Recording.start``)
        recording = Recording(self.has_aux, inputs) if type(program) is not str else None
        drawn = None if recording is None else _random_states(objects)
        saved = None if recording is None else Saved(  # (self.held: the arrays as they are)
            objects if reached is None else (*objects, *reached[0]),
            arrays if reached is None else (*arrays, *reached[1]),
            self.held[1] if reached is None else (*self.held[1],
                                                  *(Contents(a) for a in reached[1])))
        entropy = FreshEntropy()
        refused = None
        self.recording = True
        try:
            with entropy if recording is not None else contextlib.nullcontext():
                value, grads = self._traced(args, kwargs, recording)
            mistraced = None if recording is None or recording.recorder is None else \
                recording.recorder.mistraced
            if mistraced is not None:  # (and f caught the refusal)
                refused = (f"a rule refused an array outside argnums, which a recording "
                           f"follows as an input of the program ({mistraced.split('. ')[0]}), "
                           "and f caught the error")
        except Exception as error:
            # The recording traces the arrays outside argnums (a replay reads them as inputs);
            # a rule that takes one as a setting (a spline's knots) may refuse it as
            # differentiated. Traced as usual, they are constants. And it holds what NumPy
            # computes from traced values (an index) as a traced constant, which code that
            # takes NumPy's scalars alone may refuse (np.random.default_rng(np.argmax(x))):
            # tracing holds NumPy's; so may code that takes plain values alone of an element
            # of an array outside argnums, the TypeError of a traced value where a number is
            # taken (decimal.Decimal(float(c[0])), struct.pack("d", c[0])'s struct.error); any
            # other error there, NumPy's (a FloatingPointError under np.errstate), tracing
            # raises too, after the same warnings. Traced again, as usual, the call raises or
            # not as f does (f, which raised, runs twice).
            recorder = None if recording is None else recording.recorder
            if recorder is None or not (recorder.derived or recorder.outside_argnums and
                                        isinstance(error, _REFUSALS_OF_TRACED)) or (
                    STRICT and isinstance(error, (NameError, AttributeError))):
                raise
            handled(error)  # (traced again, it raises where f does)
            first = str(error).split(". ")[0]
            refused = (f"a rule refused an array outside argnums, which a recording follows as "
                       f"an input of the program ({first})"
                       if isinstance(error, MutadError) and recorder.outside_argnums else
                       f"the recording raised {type(error).__name__} ({first}) where tracing "
                       "did not: it holds what NumPy computes from traced values (an index), "
                       "and the arrays outside argnums, as traced values, which code that takes "
                       "NumPy's values alone may refuse")
        finally:
            self.recording = False
            if recording is not None:
                recording.seal()
        if refused is not None:
            saved.restore()  # (f runs again: what it did on the first run, undone)
            again = ShownAgain(recording.shown.outside)  # (and what it showed, shown once)
            try:
                value, grads = self._traced(args, kwargs)
            finally:
                again.remove()
            self._keep(key, refused)
            return value, grads
        if recording is not None:
            for a, written in recording.written:  # as f left them (``Recording.end``)
                np.copyto(a, written)
            if recording.program is not None and _random_states(objects) != drawn:
                recording.program = None  # the next call draws other numbers
                recording.reason = ("a random draw from a generator that lives between calls "
                                    "(np.random's, the random module's, or one f reaches), or "
                                    "a spawn of its seed sequence: a replay would reuse the "
                                    "recorded numbers")
            if recording.program is not None and entropy.seeded:
                recording.program = None
                recording.reason = ("fresh entropy drawn in f (a generator seeded from it, "
                                    "such as np.random.default_rng() without a seed, or "
                                    "os.urandom, secrets, uuid.uuid4()): a replay would "
                                    "reuse the recorded numbers; pass the generator or its "
                                    "seed as an argument")
            if recording.program is not None and reached is not None:
                recording.program.reached = reached[0], [Contents(a) for a in reached[1]]
            if recording.program is not None:
                recording.program.settings += _settings(
                    objects if reached is None else (*objects, *reached[0]))
            self._keep(key, recording.program or recording.reason, candidates)
        return value, grads

    def _first_that_holds(self, key, front, candidates, flat, modes):
        """``(value, gradients)`` of the first of ``candidates`` (programs of the signature
        ``key``, whose most recently used is ``front``) whose guards all hold on this call,
        which becomes the most recently used; raises :class:`GuardFailed` where none does
        (the first failure that says why, for ``reasons``)."""
        failed = None
        for program in candidates:
            try:
                answer = program.run(flat, modes)
                break
            except GuardFailed as error:
                if failed is None or error.args and not failed.args:
                    failed = error
        else:
            raise failed
        if program is not front:  # (the others in the order they were last used)
            self.programs[key] = program
            self.others[key] = [p for p in candidates if p is not program]
        return answer

    def _numbers_change(self, described, key):
        """Whether to stop recording because numbers outside ``argnums`` take a new value on
        every call (a time step's ``t``): each would record a program, which costs more than
        tracing. Counted on calls that would record a program for the same arguments but
        other such numbers than one recorded already."""
        if not any(plain for _, _, plain in described):
            return False
        shapes, _ = signature([(leaves, arg, False) for leaves, arg, _ in described])
        if any(k != key and type(p) is Program and self._shapes.get(k) == shapes
               for k, p in self.programs.items()):
            self.new_numbers += 1
        else:
            self.new_numbers = 0
        self._shapes = {k: v for k, v in self._shapes.items() if k in self.programs}
        self._shapes[key] = shapes
        if self.new_numbers < FAILED_GUARDS:
            return False
        self.unfollowed[PLAIN_NUMBERS] = (
            f"numbers passed outside argnums took new values on {self.new_numbers} calls in a "
            "row; a program holds such numbers as they are (Python's functions of them, "
            "math.log(t), are not followed), so each value would record one: select them in "
            "argnums to have them followed instead (their gradients are then computed too)")
        return True

    def _keep(self, key, program, others=()):
        """``program`` (or why the signature ``key`` is traced) for ``key``; a program keeps
        ``others``, the signature's programs recorded before it, to replay beside it."""
        self.programs[key] = program
        self.programs.move_to_end(key)
        if type(program) is Program and others:
            self.others[key] = list(others[:PER_SIGNATURE - 1])
        else:
            self.others.pop(key, None)
        while len(self.programs) > CACHE_SIZE:
            self.others.pop(self.programs.popitem(last=False)[0], None)
