"""Forward mode: arrays that carry their tangent alongside, through every in-place update.

A :class:`Dual` pairs a primal ``value`` with a ``tangent`` of the same shape and layout. Every
operation computes both: a pure one makes a new dual, an in-place one updates the target's
primal and tangent in place, and a view of a dual is the same view of its primal and of its
tangent, so a write through any alias reaches both. Nothing is recorded and nothing needs
undoing: forward mode has no tape.

Tangent memory mirrors primal memory: a fresh dual's tangent has its primal's strides, and the
arguments' tangents are laid out as their primals. NumPy then makes a view of a tangent exactly
when it makes a view of the primal, which is what keeps aliasing right.

Rules compute with NumPy calls that dispatch, so the primal and tangent may themselves be traced
by an enclosing reverse pass: reverse mode over this forward mode gives Hessian-vector products
(``api.hvp``). Each differentiation has its own *level* (``levels.LEVELS``); an operation is
handled by the innermost level among its operands, and values of outer levels are constants to
it, which is what prevents perturbation confusion.
"""

import math
import sys
import warnings

import numpy as np
from numpy.lib.array_utils import byte_bounds

from ..core.allocation import (PLAIN_ACCESS, Preexisting, TracedObjects, called_by_name,
                               converted_by_numpy, follows_floats, joined_operands,
                               lists_as_arrays, plain_memory, python_objects,
                               rebound_in_place, stand_in_value,
                               stands_in, ufunc_operands, without_derivative)
from .arraylike import (FRESH_FIX, SCALAR_METHOD_FUNCTIONS, ArrayMethods, carries_derivative,
                        alias_read_after_write, alias_written,
                        conversion_error, inexact_output, install_operators, integers_assigned,
                        integers_out,
                        as_assigned, item_assignment_refused, numpy_scalar, numpys_loop_error,
                        sequence_assigned,
                        numpys_scalar_operator, put_square_right,
                        joined_in_order, keywords_in_place, lost_tangent, masked_ufunc,
                        out_by_keyword, holds_records, records_function, records_gathered,
                        records_key, text_element, record_field, by_mutad, subclass_call,
                        takes_over_kinds, picks_one_record, as_one_record,
                        records_write, refuse_records,
                        into_outs, judge_out, out_computation, single_out, stands_for_scalar,
                        takes_over, weak, weak_arithmetic,
                        weak_beside_arrays, weak_value)
from ..core.errors import (
    MutadError,
    RuleError,
    UnsupportedArrayError,
    UnsupportedFunctionError,
    UntracedWriteError,
    differentiated_keyword,
    function_name,
    holds_objects,
    no_rule,
    objects_refused,
    plain_copy_missed,
)
from ..core.debug import (CATEGORIES, ERRORS, HELD, HOLDING, Warnings, from_user_line, handed_on,
                          warn_at)
from ..core.devices import is_device
from ..core.levels import ACTIVE, Tracer, ended, escaped, handled, innermost, running
from .elementwise import in_the_loops_kinds
from .products import partial_at, times
from .recompute import flat
from ..core.registry import (NO_RULE, ONE, RULES, ZERO_TANGENT, NoClosedForm, check_complex,
                             dropped_derivative, pyfunc_ufunc_method, pyfunc_ufunc_rule,
                             complex_among)
from ..core.trees import unsupported_array
from ..core.views import (address, may_overlap, memory, overlaps_itself, owner, owner_view,
                          real_part_if, strided, view_as, wrapped, writeable,
                          writes_freely)
from .writes import (raised_after_writing, at_target, check_region, over_target,
                     raising_ignored, reads_written, unknown_write_refused,
                     written_before_raising, written_in_place_before_raising)


# ----------------------------------------------------------------------------------------------
# A tangent's floating-point events

_RAISING = [None, ()]
"""The last handling seen (``ERRORS``' value) and its categories that raise, or call an error
callback or log of the user's (which may raise, as f may catch after NumPy wrote: the same as
raising), with their modes."""


class _TangentErrors:
    """NumPy's error handler (``call=``) while a tangent is computed where a category raises
    or calls the user's callback or log: its message is held (with the callback, for a
    category that calls one: ``debug.issue_held`` hands it on); another category's goes on to
    the handler this one stands for."""

    __slots__ = ("before", "raising", "level")

    def __init__(self, before, raising, level):
        self.before, self.raising, self.level = before, raising, level

    def __call__(self, kind, flag):  # a category the caller hands to a function of theirs
        self.before(kind, flag)

    def write(self, text):
        category = next((c for words, c in CATEGORIES.items() if words in text), None)
        if category in self.raising:
            message = text.removeprefix("Warning: ").rstrip("\n")
            mode = self.raising[category]
            HELD.setdefault(self.level, []).append(
                (message,) if mode == "raise" else (message, handed_on(mode, self.before)))
        elif self.before is not None:
            self.before.write(text)


class tangent_errors:
    """The context in which a tangent of ``level`` is computed inside ``f``: its floating-point
    events (``1 / (2 sqrt(x))`` at ``x = 0``) are the derivative's, not NumPy's, so they are
    held (``debug.HELD``) and issued once ``f`` has returned, as a reverse pass issues its
    gradient's."""

    __slots__ = ("level", "outer", "errors")

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        self.outer = HOLDING.level
        HOLDING.level = self.level
        errors = ERRORS.get()
        if errors is not _RAISING[0]:
            log = not isinstance(np.geterrcall(), Warnings)  # (the user's log, not mutad's)
            _RAISING[:] = errors, {k: v for k, v in np.geterr().items()
                                   if v in ("raise", "call") or v == "log" and log}
        raising = _RAISING[1]
        self.errors = None
        if raising:
            self.errors = np.errstate(call=_TangentErrors(np.geterrcall(), raising, self.level),
                                      **dict.fromkeys(raising, "log"))
            self.errors.__enter__()

    def __exit__(self, *exception):
        if self.errors is not None:
            self.errors.__exit__(*exception)
        HOLDING.level = self.outer


# ----------------------------------------------------------------------------------------------
# Batches of directions: a jvp whose tangents carry B directions at once


BATCH = {}
"""``level -> B`` for a forward pass that carries a batch of B tangent directions
(``session.jvp_batched``): every dual of that level has a tangent of shape ``(B,) + shape``
(entry ``b`` laid out as the value is, so a view of the value is a view of each entry), and
every operation on it is one the batch is known to handle exactly as B passes of one direction
would: an elementwise row, indexing and assignment, and a function whose Rule has the facet
``batched``. Anything else stops the pass (``unbatched``): its caller then takes one direction
per pass."""
NESTED = set()
"""The batched levels inside which one reverse differentiation may run (``api.hessian``'s
forward over reverse: ``session.jvp_batched(..., nested=True)``): its values are traced arrays
over duals of the level, and every operation on those duals, in its forward and its reverse
pass, goes through the same batched handlers (or stops the pass) as at the top. Any other
nesting, a second reverse one or one inside that, stops the pass."""
FAILED = set()
"""The batched levels that met something they do not handle: their results are never used,
even where the differentiated function caught the exception that stopped them."""


class BatchUnsupported(Exception):
    """A batched forward pass met an operation it does not handle (``unbatched``)."""


def unbatched(level, what):
    """Stop the batched pass of ``level``: it met ``what``, not verified for batches."""
    FAILED.add(level)
    raise BatchUnsupported(what)


def batch_of(level):
    """B, for a dual of ``level`` in a batched pass that runs alone (no other differentiation
    nested in it or around it, whose values would meet batched tangents); None otherwise."""
    size = BATCH.get(level)
    if size is not None and len(ACTIVE.running) != 1 and not _one_reverse_inside(level):
        unbatched(level, "a nested differentiation")
    return size


def _one_reverse_inside(level):
    """Whether the differentiations running are the batched forward one of ``level``, which
    allows it (``NESTED``), and one reverse differentiation directly inside it."""
    running = ACTIVE.running
    return (level in NESTED and len(running) == 2 and running[0].level == level
            and getattr(running[1], "outer", None) is running[0])


def _aligned(t, ndim):
    """A batched tangent ``(B,) + shape`` with axes of length 1 inserted after the batch axis
    so that it has ``ndim`` axes besides it: NumPy then broadcasts it with a value's arrays of
    up to ``ndim`` axes as it broadcasts one direction's, aligning trailing axes."""
    extra = ndim + 1 - t.ndim
    if extra <= 0:
        return t
    return t.reshape(t.shape[:1] + (1,) * extra + t.shape[1:])


_BASIC = (slice, type(None), type(Ellipsis))


def _is_integer(item):
    return (type(item) is int or isinstance(item, np.integer)) and type(item) is not bool


def batch_key(key, level):
    """``key`` for a batched tangent: the batch axis taken whole, then ``key``. NumPy puts the
    axes of advanced indices first when they are not next to each other (then they would go
    before the batch axis); such keys, and keys holding anything but integers, slices, None,
    Ellipsis and integer or boolean arrays and lists (duals), stop the pass."""
    items = tuple(plain_memory(item) if type(item) is Preexisting else item
                  for item in (key if type(key) is tuple else (key,)))
    advanced, arrays = [], False
    for position, item in enumerate(items):
        if isinstance(item, _BASIC):
            continue
        if _is_integer(item):
            advanced.append(position)  # advanced only beside an array: then as one
            continue
        if (type(item) is list and all(_is_integer(i) for i in item)) or (
                type(item) is np.ndarray and item.dtype.kind in "iub" and item.ndim > 0):
            advanced.append(position)
            arrays = True
            continue
        unbatched(level, f"an index of type {type(item).__name__}")
    if arrays and advanced[-1] - advanced[0] + 1 != len(advanced):
        unbatched(level, "advanced indices apart from each other")
    return (slice(None),) + items


def _batched_zeros(like, size, level):
    """Zero tangents for ``size`` directions, entry ``b`` laid out as NumPy lays out
    ``np.zeros_like(like)``."""
    one = np.empty_like(like)
    order = sorted(range(one.ndim), key=lambda i: -one.strides[i])
    block = np.zeros((size,) + tuple(one.shape[i] for i in order), one.dtype)
    tangent = block.transpose((0,) + tuple(1 + order.index(i) for i in range(one.ndim)))
    if any(n > 1 and a != b for n, a, b in zip(one.shape, one.strides, tangent.strides[1:],
                                                strict=True)):
        unbatched(level, "a layout the batch does not mirror")
    return tangent


def level_of(items, level=-1):
    """The innermost level among the duals in ``items`` (one level into lists and tuples)."""
    for x in items:
        if type(x) is Dual:
            level = max(level, x.level)
        elif type(x) in (list, tuple):
            level = level_of(x, level)
    return level


def split(x, level, numbers=True):
    """``(primal, tangent)`` of ``x`` at ``level``: duals of other levels are constants. A dual
    that stands for a Python number (``arraylike.weak``) gives Python's numbers, as a ufunc's
    operands, unless not ``numbers`` (a function's arguments, which its rule takes as
    arrays)."""
    if type(x) is Dual and x.level == level:
        if numbers and x.weak and level in BATCH:
            unbatched(level, "a value standing for a Python number")
        if numbers and x.weak:  # it stands for a Python number, and so does its tangent
            return weak_value(x.value), weak_value(x.tangent)
        return x.value, x.tangent
    if type(x) in (list, tuple) and level_of(x) == level:
        pairs = [split(e, level, numbers) for e in x]
        tangents = [t for _, t in pairs]
        return type(x)(p for p, _ in pairs), None if all(t is None for t in tangents) else tangents
    if type(x) is Preexisting:
        x = stand_in_value(x)
        if type(x) is Dual:  # (a write adopted its memory)
            return split(x, level, numbers)
    if type(x) is np.ndarray:
        _check_alias(x)
    elif ended(x):  # cached by an earlier differentiation: a constant, as in reverse mode
        return memory(x), None  # (a rule's own calls on it would dispatch to its ended tape)
    elif type(x) in (list, tuple) and any(ended(e) for e in x):  # (lu_factor's (lu, piv))
        return type(x)(memory(e) if ended(e) else e for e in x), None
    return x, None


def _check_alias(x, written=False):
    """``x`` is a plain array an operation reads beside duals. A jvp works on private copies
    of the caller's arrays (``session.ForwardDifferentiation``): if ``x`` shares memory with
    one (a global or a closure viewing an argument) and the function has changed the copy
    there, ``x`` holds the old values, not those NumPy would read, and is refused; unchanged,
    it is read as a constant, as in reverse mode (``reverse.check_alias``). ``written``: NumPy
    writes into ``x`` itself, which the copy would not see: refused. So is ``x`` where a
    conversion handed it out of a dual's memory (``Dual.__array__``) whose tangent is no
    longer zero: ``x`` would read the dual's values as constants."""
    root = None
    for run in ACTIVE.running:
        handed = getattr(run, "handed", None)
        if handed:
            root = id(owner(x)) if root is None else root
            if any(may_overlap(x, value) and not dual.constant_here()
                   for value, dual in handed.get(root, [None])[1:]):
                raise plain_copy_missed("a plain array read beside dual arrays")
        copies = getattr(run, "copies", None)
        if not copies:
            continue
        if root is None:
            root = id(owner(x))
        pair = copies.get(root)
        if pair is not None:
            whole, dual = pair
            if written:
                raise alias_written(x.shape, whole.shape)
            flat = memory(dual.value).reshape(-1, order="A")  # laid out as whole: a view
            copied = strided(flat, x.shape, x.dtype, address(x) - address(whole), x.strides)
            if copied.tobytes() != x.tobytes():
                raise alias_read_after_write(x.shape, whole.shape)


PLAIN_ACCESS.append(_check_alias)


def as_array(y):
    """NumPy returns scalars for 0-d results; a dual holds arrays, so writes into it work. A
    result of an ndarray subclass (a constant's: a masked array, a matrix) is refused."""
    if type(y) is np.ndarray or isinstance(y, Tracer):  # (an enclosing level's: told by its
        return y                                         # type, not its shown __class__)
    if isinstance(y, np.ndarray):
        raise UnsupportedArrayError(unsupported_array(
            y, "a result computed from a dual array and an array the function uses"))
    if isinstance(y, (np.generic, float, int, complex)):
        y = np.array(y)
        y.flags.writeable = False  # as a NumPy scalar (arraylike.stands_for_scalar)
    return y


def enclosed(y, level):
    """``y``, an array a dual of ``level`` holds (its value or its tangent), as allocation mode
    makes an array inside the differentiations running outside ``level``: a constant of each
    of them deeper than the levels ``y`` already belongs to (``allocation.allocate``). Their
    values may then be written into it, and they follow the writes, whatever made ``y``: a
    copy of an array made before any of them started, or a zero tangent. ``y`` itself when
    none runs."""
    running = ACTIVE.running
    if not running or running[0].level >= level:  # not nested: the common case, at once
        return y
    inner = innermost([y])
    floor = -1 if inner is None else inner.level
    for outer in running:
        if outer.level >= level:
            break
        if outer.level > floor:
            y = outer.constant(y)
    return y


def constant_result(y, level, primals, args=()):
    """What a function of constants of ``level`` alone gives (``np.histogram``'s edges of an
    array f made), as reverse mode's ``constant_result`` gives it: each new float array a
    constant, a dual with a zero tangent into which f may write duals; a view of the memory
    of a dual among ``args`` (``np.einsum('ii->i', D)``) the same view of the dual, into which
    f may write as into the argument; a new integer or boolean array as ``without_derivative``
    gives it; a view of a plain argument, a number as they are."""
    if type(y) in (tuple, list) or isinstance(y, tuple) and hasattr(y, "_fields"):
        items = [constant_result(item, level, primals, args) for item in y]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    if type(y) is not np.ndarray:
        return y
    if not follows_floats(y.dtype):
        return without_derivative(y, [*flat(primals), *(memory(x) for x in flat(args)
                                                         if type(x) is Dual)], {}, level)
    root = owner(y)
    for x in flat(args):
        if type(x) is Dual and x.level == level and owner(memory(x)) is root:
            view = view_as(x, y)
            return y if view is None else view
    if any(isinstance(p, np.ndarray) and owner(p) is root for p in flat(primals)):
        return y
    y = enclosed(y, level)
    return Dual(y, zero_tangent(y, level), level)


def zero_tangent(like, level):
    """A zero tangent for a dual of ``level`` laid out as ``like``: a plain array, or an array
    of the levels outside ``level`` (``enclosed``), into which the tangents they compute can be
    written. In a batched pass (``BATCH``), one for each direction."""
    size = BATCH.get(level)
    if size is not None:
        return _batched_zeros(memory(like), size, level)
    return enclosed(np.zeros_like(memory(like)), level)


def _tangent_for(y, dy, sources, level, owned=True):
    """``dy`` as the tangent of a fresh result ``y`` of ``level``: laid out as ``y`` and sharing
    no memory with the tangents ``sources`` (a later write into ``y`` must not reach them). Not
    ``owned`` (a user's rule returned it: it may be an array the rule keeps), it is copied.
    Nested, it is an array of the enclosing levels (``enclosed``), whatever levels it was
    computed from: their values may be written into it later (``y *= w``)."""
    if dy is None or dy is ZERO_TANGENT:
        return zero_tangent(y, level)
    size = BATCH.get(level)
    if size is not None:  # a batch: (B,) + shape, each entry laid out as y
        dy = as_array(dy)
        if dy.ndim == 0 or dy.shape[0] != size:
            unbatched(level, "a rule's tangent without the batch axis")
        if (not owned or dy.shape != (size,) + y.shape or dy.strides[1:] != y.strides
                or not writes_freely(dy) or overlaps_itself(dy)
                or any(s is not None and may_overlap(dy, s) for s in sources)):
            fresh = zero_tangent(y, level)
            fresh[...] = _aligned(dy, y.ndim)
            return fresh
        return dy
    dy = real_part_if(y, as_array(dy))
    if (not owned or dy.shape != y.shape or dy.strides != y.strides or not writes_freely(dy)
            or any(s is not None and may_overlap(dy, s) for s in sources)):
        fresh = zero_tangent(y, level)
        fresh[...] = dy
        return fresh
    return enclosed(dy, level)


def _differentiated(args, level):
    """Whether any of a call's ``args`` (items of lists and tuples too) is a dual of ``level``
    whose tangent is not a constant's zero."""
    if type(args) in (list, tuple):
        return any(_differentiated(x, level) for x in args)
    return type(args) is Dual and args.level == level and not args.constant()


def _of_constants(args, level):
    """Whether no dual of ``level`` among ``args`` carries a derivative, asked of a call whose
    rule gave no tangent; not in a batched pass, where the answer for each direction would be
    a decision of its own (its results are NumPy's plain arrays there)."""
    return level not in BATCH and not _differentiated(args, level)


def _wrap(y, dy, level, args, tangents, owned=True):
    """Duals of the outputs ``y`` with tangents ``dy`` (``owned``: see ``_tangent_for``). An
    output that views an argument's memory keeps its tangent as the same view of that
    argument's tangent."""
    if isinstance(y, (tuple, list)):  # named tuples (eigh's) too
        dys = dy if dy is not None else (None,) * len(y)
        items = [_wrap(a, b, level, args, tangents, owned) for a, b in zip(y, dys, strict=True)]
        return type(y)(*items) if hasattr(y, "_fields") else type(y)(items)
    python_number = type(y) in (float, complex)  # (promoted weakly, as NumPy does)
    if python_number and dy is None:
        return y  # a Python number without a derivative stays one (SciPy's distances)
    y = inexact_output(y)
    if dy is None or not hasattr(y, "dtype") or not follows_floats(y.dtype):
        return y
    y = as_array(y)
    pairs = list(_with_tangents(args, tangents))
    sources = [t for _, t in pairs]
    for p, t in pairs:
        if may_overlap(y, p):
            if not may_overlap(dy, t):
                raise RuleError(
                    "a forward rule returned an output that views an argument's memory with "
                    "a tangent that is not the same view of the argument's tangent; a write "
                    "through the output would miss the argument's tangent. Return that view "
                    "of the tangent, or copy the output.")
            return Dual(y, dy, level)
    return Dual(y, _tangent_for(y, dy, sources, level, owned), level, python_number)


def _with_tangents(args, tangents):
    """``(argument, tangent)`` for every array argument that has a tangent, one level into
    sequences (a sequence of settings has no tangent at all: ``None``)."""
    for a, t in zip(args, tangents, strict=True):
        if t is None:
            continue
        if type(a) in (list, tuple):
            yield from ((e, te) for e, te in zip(a, t, strict=True) if te is not None)
        else:
            yield a, t


# ----------------------------------------------------------------------------------------------
# Elementwise ufuncs: the tangent is the sum of partial derivative times input tangent


def _term(rule, i, y, primals, tangent, original=None, operand=None):
    """``partial_i * tangent``, None where the partial of ``operand`` is refused and it is a
    constant (``_partial``). A partial NumPy computed afresh takes the product in its own
    memory (plain arrays only: an enclosing reverse pass should see new arrays, not writes).
    ``original``: in a batched pass, the batch of tangents before ``_aligned``."""
    partial = rule.partials[i]
    if partial is ONE:
        return tangent
    p = _partial(partial, y, primals, operand)
    if p is None:
        return None
    if original is not None:
        return _batch_times(tangent, p, original)
    if (type(p) is np.ndarray and type(tangent) is np.ndarray
            and p.shape == np.broadcast_shapes(p.shape, tangent.shape)
            and p.dtype == np.result_type(p, tangent)  # a real partial of a complex tangent
            and not any(may_overlap(p, v) for v in (y, tangent, *primals)
                        if type(v) is np.ndarray) and writes_freely(p)):
        return times(tangent, p, out=p)
    return times(tangent, p)


def _partial(partial, y, primals, operand=None):
    """``partial(y, *primals)``; None where mutad refuses it (jv's in an order v <= -1) for
    an ``operand`` that carries no derivative: a constant (an allocation's zero tangent), whose
    term is zero, as reverse mode computes no cotangent for it. Only a refusal leaves the term
    out, so every other term is the one computed in each direction alone, in a batch, and on a
    device alike; in a batch, an operand that moves along some directions only stops the pass
    (``carries_derivative``), and each direction alone refuses where it moves."""
    try:
        return partial_at(partial, y, primals)
    except MutadError as error:
        if operand is None or carries_derivative(operand):
            raise
        handled(error)
        return None


def _batch_times(d, p, original, out=None):
    """``times(d, p)`` of a batch of tangents ``d`` (``original`` before ``_aligned``), as one
    direction per pass computes it for each. ``times`` masks zero factors only where a factor
    is not finite (or a sum checking that overflows), and the mask decides the sign of a zero
    product, so each direction must take the path it would take alone: where every factor is
    finite and no sum of products can overflow, the plain product, which every direction
    takes too; otherwise ``times`` of each direction in turn (rare: infinities, NaNs, values
    near overflow)."""
    with np.errstate(all="ignore"):
        top = max(abs(float(np.max(d))), abs(float(np.min(d)))) if d.size else 0.0
        bound = float(np.max(np.abs(p))) if np.size(p) else 0.0
    count = max(d.size, np.size(p), 1)
    if (math.isfinite(top) and math.isfinite(bound) and top * max(bound, 1.0) * count < 1e300
            and bound * count < 1e300):
        return d * p if out is None else np.multiply(d, p, out=out)
    if out is None:
        out = np.empty(np.broadcast_shapes(d.shape, np.shape(p)), np.result_type(d, p))
    for b in range(d.shape[0]):
        out[b] = times(original[b], p)
    return out


def _partial_arguments(rule, primals, traced):
    """What the partials read: the inputs, then the rule's decision taken from them as they
    are now (``ElementwiseRule.decide``)."""
    if rule.decide is None or not traced:
        return primals
    return [*primals, rule.decide(*primals)]


def _sum_terms(terms, sources):
    """The sum of ``terms``, accumulated in the first one's memory when that is a new plain
    array (not one of the tangents ``sources``)."""
    total = None
    for term in terms:
        if term is None:
            continue  # a constant's, refused (``_partial``)
        if total is None:
            total = term
        elif (type(total) is np.ndarray and type(term) is np.ndarray
              and total.shape == np.broadcast_shapes(total.shape, term.shape)
              and total.dtype == np.result_type(total, term)
              and not any(total is s for s in sources)):
            np.add(total, term, out=total)
        else:
            total = total + term
    return total


def apply_ufunc(ufunc, inputs, out, kwargs, level):
    if "dtype" in kwargs or "signature" in kwargs:
        inputs = in_the_loops_kinds(ufunc, inputs, kwargs)
    if out is not None and type(out) is not Dual:
        written = integers_out(ufunc, inputs, out, kwargs)
        if written is not None:
            return written
    if kwargs.get("where", True) is not True:
        return masked_ufunc(ufunc, inputs, out, kwargs)
    pairs = [split(x, level) for x in inputs]
    primals = [p for p, _ in pairs]
    tangents = [t for _, t in pairs]
    entry = RULES.get(ufunc, NO_RULE)
    rule = entry.elementwise
    originals = None
    if batch_of(level) is not None:
        originals = tangents
        tangents = _batch_operands(ufunc, rule, primals, tangents, out, kwargs, level)
    if entry.complex_rules is not None and complex_among(primals):  # not complex-differentiable
        if out is not None:
            kwargs = dict(kwargs, out=out)
        return apply_function(ufunc, inputs, kwargs, level, entry.complex_rules[1])
    if rule is None:
        if entry.reverse is not None:  # generalized ufuncs (matmul) have function rules
            if complex_among(primals):
                numpys_loop_error(ufunc, primals)
            if out is not None:
                kwargs = dict(kwargs, out=out)
            return apply_function(ufunc, inputs, kwargs, level)
        if entry is NO_RULE and pyfunc_ufunc_rule(ufunc).composite is not None:
            if out is not None:
                kwargs = dict(kwargs, out=out)
            return pyfunc_ufunc_rule(ufunc).composite(ufunc, *inputs, **kwargs)
        if not entry.nondifferentiable:
            raise no_rule(ufunc, forward=True)
        if out is None:
            return without_derivative(ufunc(*primals, **kwargs), primals, kwargs, level)
        return _write_constant(ufunc, primals, out, kwargs, level)
    traced = [i for i, t in enumerate(tangents) if t is not None and rule.partials[i] is not None]
    for i in list(traced):
        if type(rule.partials[i]) is NoClosedForm:
            if carries_derivative(inputs[i]):
                raise rule.partials[i].error(ufunc)
            traced.remove(i)  # a constant (an allocation's zero tangent): no derivative needed
    if traced and not any(_moves(inputs[i], level) for i in traced):
        traced = []  # constants alone: NumPy's operation, no partial (1 / (2 sqrt(0))) computed
    if out is not None and traced and ufunc is not np.positive \
            and np.dtype(out.dtype).kind != "c" and complex_among(primals):
        # complex values into a real ``out`` (casting='unsafe'): NumPy's complex loop, then its
        # real part written; a rule's partials read the complex result (exp's y), not the real
        # part the target holds
        y = apply_ufunc(ufunc, inputs, None, kwargs, level)
        return apply_ufunc(np.positive, (y,), out, {"casting": "unsafe"}, level)
    if out is not None:
        if not _followed(out, level) and not _carry([inputs[i] for i in traced]):
            traced = []  # constants only: written into an array the jvp does not follow
        still = _still(originals, traced)
        target = _write_elementwise(ufunc, rule, primals, tangents, traced, out, kwargs, level,
                                    originals, inputs)
        if still is not None:
            target.tangent[still] = 0.0
        return target
    y = as_array(ufunc(*primals, **kwargs))
    if not traced:
        if all(t is None for t in tangents):
            return y
        return Dual(y, zero_tangent(y, level), level)  # a constant, written into later
    if y.dtype.kind == "c":  # of complex operands: a row declared for them (facet complex)
        check_complex(function_name(ufunc), rule)
    with tangent_errors(level):
        given = _partial_arguments(rule, primals, traced)
        dy = _sum_terms((_term(rule, i, y, given, tangents[i], originals and originals[i],
                               inputs[i]) for i in traced), tangents)
    dy = _tangent_for(y, dy, tangents, level)
    still = _still(originals, traced)
    if still is not None:
        dy[still] = 0.0
    return Dual(y, dy, level)


def _moves(x, level):
    """Whether a derivative of ``level`` flows through the operand ``x``: not a constant (an
    array the function made, ``np.zeros(n)``, whose tangent is zero until a value with one is
    written into it), as reverse mode records no rule for an operation of constants alone. In
    a batched pass, whether it moves along some direction (``_still``: the others)."""
    if type(x) is not Dual or is_device(x.tangent):
        return True  # (a device's tangent: asking would wait for the device, every operation)
    if x.level in BATCH:
        return bool(np.any(x.tangent))
    return not x.constant_here()


def _still(originals, traced):
    """In a batched pass, the directions along which none of the ``traced`` operands moves
    (their tangents ``originals``), None where there is none: one pass per direction runs the
    operation on constants there, whose tangent is NumPy's zero, not a sum of zero products
    (whose sign would follow the partials')."""
    if originals is None or not traced:
        return None
    moving = None
    for i in traced:
        t = originals[i]
        if type(t) is not np.ndarray:
            return None  # a device's (asking would wait for it) or a traced one: not asked
        along = np.any(t.reshape(t.shape[0], -1), axis=1)
        moving = along if moving is None else moving | along
    return None if moving.all() else ~moving


def _batch_operands(ufunc, rule, primals, tangents, out, kwargs, level):
    """The tangents of a ufunc's operands in a batched pass, aligned with the output's axes
    (``_aligned``), where the batch handles the call: an elementwise row (whose partials read
    the values only, so each direction's tangent is multiplied by the same partials, element by
    element: the same bits as one direction per pass) of real operands, without settings. A
    generalized ufunc (matmul) goes to its function rule (facet ``batched``)."""
    if rule is None:
        entry = RULES.get(ufunc, NO_RULE)
        if entry.reverse is not None or not entry.nondifferentiable:
            return tangents  # apply_function, or no rule at all (its error)
    if set(kwargs) - {"dtype"} or kwargs.get("dtype") not in (None, float, np.float64):
        unbatched(level, f"{function_name(ufunc)} with settings")
    if complex_among(primals) or (out is not None and getattr(out, "dtype", None) is not None
                                  and out.dtype.kind == "c"):
        unbatched(level, "complex values")
    if rule is None:
        return tangents
    ndim = max((np.ndim(p) for p in primals), default=0)
    if type(out) is Dual:
        ndim = max(ndim, out.ndim)
    return [None if t is None else _aligned(t, ndim) for t in tangents]


def _followed(out, level):
    """Whether ``out`` is a dual of this jvp, which follows what is written into it."""
    return type(out) is Dual and out.level == level


def _carry(values):
    """Whether a derivative flows through one of ``values``: a dual whose tangent is zero (of
    an argument given no tangent, or made from one alone) is a constant along the direction, as
    reverse mode takes an argument outside ``argnums``, and an array the jvp does not follow
    may take its value."""
    return any(type(v) is not Dual or carries_derivative(v) for v in values)


def _target(out, level, carries_tangent, name, key=None):
    """The dual ``out`` an operation writes into (at ``key``: a region NumPy writes in an
    order-free way, ``writes.check_region``, as in reverse mode); a plain target is fine only
    for constants."""
    if _followed(out, level):
        check_region(out.value, name, key=key)
        return out
    if carries_tangent:
        raise UntracedWriteError(
            f"{name}: a value with a tangent was written into an array that carries none (one "
            "created before jvp started, or by an enclosing differentiation), so its tangent "
            "would be lost. Allocate the destination inside the function jvp differentiates: "
            "arrays created there (np.zeros, np.empty, np.array, ...) carry tangents. "
            + FRESH_FIX)
    return None


def _write_constant(func, primals, out, kwargs, level):
    """A non-differentiable ufunc or function (``np.round``) writing into ``out``: its new
    values are constants."""
    target = _target(out, level, False, f"{function_name(func)}(..., out=...)")
    if target is None:
        return func(*primals, out=out, **kwargs)
    func(*primals, out=target.value, **kwargs)  # in place: where= leaves the rest as it was
    target.tangent[...] = 0.0
    return target


def _write_tangent(rule, target, position, over, traced, y, given, tangents, originals, inputs):
    """``_write_elementwise``'s update of the target's tangent."""
    others = []
    for i in traced:
        if i == position:
            continue
        term = _term(rule, i, y, given, tangents[i], originals and originals[i],
                     inputs and inputs[i])
        if term is None:
            continue  # a constant's, refused (``_partial``)
        if term is tangents[i] and i in over:
            term = term.copy()  # the target's tangent changes before this term is added
        others.append(term)
    t = target.tangent
    own = None
    if position is not None and rule.partials[position] is not ONE:
        own = _partial(rule.partials[position], y, given, inputs and inputs[position])
        if own is None:
            position = None  # the target a constant, whose partial is refused: its term left out
    if position is None:
        t[...] = 0.0 if not others else np.broadcast_to(_sum_terms(others, tangents), t.shape)
    else:
        if own is not None:
            if originals is None:
                times(t, own, out=t)
            else:
                _batch_times(t, own, t, out=t)
        for term in others:
            np.add(t, term, out=t)


def _fits(ufunc, primals, target, kwargs):
    """Raise NumPy's error for ``ufunc(*primals, out=target)`` whose operands do not broadcast
    to the target's shape, before its tangent is written (whose broadcast would word the error
    otherwise): the write itself raises it."""
    shape = target.shape
    for p in primals:  # (the common case first: operands of the target's shape, or numbers)
        given = getattr(p, "shape", ())
        if given != shape and given != ():
            break
    else:
        return
    try:
        if np.broadcast_shapes(*[np.shape(p) for p in primals], shape) == shape:
            return
    except ValueError:
        pass
    ufunc(*primals, out=target, **kwargs)


def _write_elementwise(ufunc, rule, primals, tangents, traced, out, kwargs, level,
                       originals=None, inputs=None):
    """``ufunc(*inputs, out=out)``, updating ``out``'s tangent in place (``inputs``: the
    operands, duals, whose partials ``_partial`` may leave out).

    The target's own tangent is updated in place where it is an input (``a *= b`` makes
    ``ȧ *= b; ȧ += a ḃ``), so an enclosing reverse pass sees invertible in-place updates, not
    copies. Partials that read the inputs are evaluated before the primal write, those that read
    only the output after it.
    """
    target = _target(out, level, bool(traced), f"{function_name(ufunc)}(..., out=...)")
    if target is None:
        return ufunc(*primals, out=out, **kwargs)
    if traced and target.value.dtype.kind == "c":
        check_complex(function_name(ufunc), rule)
    # (the operands with a derivative, and an array: ``writes.at_target``)
    operands = [p if i in traced and not weak(p) else None for i, p in enumerate(primals)]
    position = at_target(target.value, operands)
    over = over_target(target.value, operands, position)
    with tangent_errors(level):
        given = _partial_arguments(rule, primals, traced)
    after = reads_written(rule)  # partials that read only the output: after the write
    raised = None  # NumPy's FloatingPointError, raised once value and tangent are written
    if after:
        raised = _write_value(ufunc, primals, target.value, kwargs)
        y = target.value
    else:
        # the errors NumPy raises before writing, raised before the tangent is written
        _fits(ufunc, primals, target.value, kwargs)
        if kwargs:
            _settings_fit(ufunc, primals, target.value, kwargs)
        y = None
        if "y" in rule.uses:
            try:
                y = ufunc(*primals, **kwargs)
            except Exception as error:  # the write raises it too, having written
                if not raised_after_writing(error):
                    raise
                if not written_in_place_before_raising(target.value, primals):
                    raise unknown_write_refused(ufunc) from error
                raised = error
                with np.errstate(**raising_ignored()):
                    y = ufunc(*primals, **kwargs)
    with tangent_errors(level):
        _write_tangent(rule, target, position, over, traced, y, given, tangents, originals,
                       inputs)
    if not after:  # the partials above read the primals as they were
        if raised is None:
            raised = _write_value(ufunc, primals, target.value, kwargs)
        else:
            with np.errstate(**raising_ignored()):
                ufunc(*primals, out=target.value, **kwargs)
    if raised is not None:
        raise raised
    return target


def _write_value(ufunc, primals, out, kwargs):
    """``ufunc(*primals, out=out, **kwargs)``; the FloatingPointError NumPy raises after
    writing (``np.errstate(...="raise")``) is returned, to be raised once the tangent is
    written too, as f may catch it and go on with both (None: none was raised)."""
    try:
        ufunc(*primals, out=out, **kwargs)
    except Exception as error:
        if not raised_after_writing(error):
            raise
        if not written_in_place_before_raising(out, primals):
            raise unknown_write_refused(ufunc) from error
        return error
    return None


def _settings_fit(ufunc, primals, out, kwargs):
    """Raise NumPy's error for ``ufunc(*primals, out=out, **kwargs)`` whose settings refuse its
    dtypes (``casting="no"``, ``dtype=``, ``signature=``), which NumPy raises before writing,
    before the target's tangent is: the same call on no elements raises it."""
    ufunc(*map(_no_elements, primals), out=np.empty(0, out.dtype), **kwargs)


def _no_elements(value):
    """An array of no elements of ``value``'s dtype (an enclosing differentiation's traced
    value's too, whose values are not read); a Python number as itself (NumPy's weak type)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if type(value) in (int, float, complex, bool):
            return value
        dtype = np.asarray(value).dtype
    return np.empty(0, dtype)


# ----------------------------------------------------------------------------------------------
# Functions


def apply_function(func, args, kwargs, level, rule=None):
    """``func(*args, **kwargs)`` with its forward rule (or ``rule``, given)."""
    joined = joined_in_order(func, args, kwargs)
    if joined is not None:
        return joined
    args = joined_operands(func, args)
    entry = RULES.get(func, NO_RULE)
    composite = entry.composite
    if composite is not None:  # beside a forward rule, it serves the calls it takes (np.pad)
        if complex_among(args):
            check_complex(function_name(func), composite)
        y = composite(*args, **kwargs)
        if y is not NotImplemented or entry.forward is None:
            # (its own arrays, np.histogram's counts, the user's as a rule's results are)
            return without_derivative(y, args, kwargs, level)
    args, kwargs = out_by_keyword(func, args, kwargs)  # np.dot(a, b, c): c is out
    if "out" in kwargs:
        judge_out(func, args, kwargs)  # NumPy's error where it refuses out
    args, kwargs = out_computation(func, args, kwargs)  # np.sum(x32, out=o64): in float64
    # (the positions the reverse rule differentiates: the forward rule's too)
    args, kwargs = keywords_in_place(func, entry.reverse, args, kwargs)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    like = kwargs.get("like")
    if type(like) is Dual:
        kwargs["like"] = like.value
    primals, tangents = _split_call(function_name(func), args, kwargs, level)
    rule = rule or entry.forward
    if rule is not None and batch_of(level) is not None:
        rule = _batched_rule(func, entry, rule, primals, out, level)
    if rule is None:
        # (constants alone, the function's own arrays: NumPy's values, as reverse mode has them)
        if entry.nondifferentiable or not _differentiated(args, level):
            if out is None:
                y = func(*primals, **kwargs)
                if type(y) is np.ndarray and any(
                        type(x) is Dual and x.level == level and owner(memory(x)) is owner(y)
                        for x in flat(args)):
                    # a view of a dual's memory (rfn.structured_to_unstructured(a) of records
                    # f made): that view of the dual, as reverse mode's constant_result gives
                    return constant_result(y, level, primals, args)
                return without_derivative(y, primals, kwargs, level)
            return _write_constant(func, primals, out, kwargs, level)
        raise no_rule(func, forward=True, reverse_rule=entry.reverse is not None)
    complex_values = complex_among(primals)
    if complex_values:  # before the rule, which may refuse them for another reason
        check_complex(function_name(func), rule)
    (y, dy), raised = _ruled(func, rule, tangents, primals, kwargs, level, out)
    if dy is None and holds_objects(y) and _differentiated(args, level):
        if type(y) is TracedObjects and out is None:
            return y  # new, of no argument's values (np.empty_like(x, dtype=object))
        raise objects_refused(function_name(func))
    if out is None:  # NumPy's result is the argument itself: np.atleast_1d(y) is y
        itself = _argument_itself(y, args, primals, level)
        if itself is not None:
            return itself
    if not complex_values and complex_among(y if isinstance(y, (tuple, list)) else (y,)):
        check_complex(function_name(func), rule)
    if dy is None and type(like) is Dual:  # created like a dual: a dual with zero tangent
        y = enclosed(y, level)
        dy = zero_tangent(y, level)
    elif dy is None and out is None and _of_constants(args, level):
        return constant_result(y, level, primals, args)
    result = _wrap(y, dy, level, primals, tangents)
    if out is None and type(result) in (list, tuple):  # (np.broadcast_arrays' arguments)
        itself = [_argument_itself(yi, args, primals, level) for yi in y]
        result = type(result)([item if x is None else x
                               for x, item in zip(itself, result, strict=True)])
    for item in result if type(result) in (list, tuple) else (result,):  # (np.split's views)
        if type(item) is Dual and item.value.base is not None:
            _viewing(item, args)
    if out is None:
        return result
    written = integers_assigned(out, result)  # np.clip(x, 0, 5, out=k, casting=...)
    if written is None:  # (k integers f made: cast, their tangent zero)
        written = _assign(out, result, level, function_name(func))
    if raised is not None:
        raise raised
    return written


def _ruled(func, rule, tangents, primals, kwargs, level, out=None):
    """``rule(tangents, *primals, **kwargs)`` under ``tangent_errors``, the events of the
    value among those it met issued as NumPy's own, inside f; with the FloatingPointError
    that NumPy raised after writing ``out`` (None: none), which the caller raises once it has
    written its result and tangent, as NumPy does."""
    held = HELD.setdefault(level, [])
    before = len(held)
    with tangent_errors(level):
        result = rule(tangents, *primals, **kwargs)
    raised = None
    if len(held) > before:  # the value's events among them are NumPy's, issued inside f
        met = held[before:]
        del held[before:]
        try:
            _issue_numpys_events(func, primals, kwargs, met)
        except Exception as error:
            if not raised_after_writing(error):
                raise
            if not written_before_raising(out, primals):
                raise
            raised = error  # computed as NumPy computed it, written with its tangent, then raised
        held.extend(met)
    return result, raised


def _issue_numpys_events(func, primals, kwargs, met):
    """Issue the floating-point events of NumPy's own call ``func(*primals, **kwargs)`` inside
    ``f``, as NumPy issues them (raising its FloatingPointError), taking each warning from
    ``met``, the events a rule computing the value beside its tangent met
    (``tangent_errors``): what is left of ``met`` is the tangent's. Made on copies of the
    arrays, only where the rule met an event."""
    def plain(x):
        while isinstance(x, Tracer):
            x = x.value
        return x.copy() if type(x) is np.ndarray else x

    def take(message):
        same = next((e for e in met if e[0] == message), None)
        if same is not None:
            met.remove(same)

    call = getattr(*func) if type(func) is tuple else func  # (ufunc, method)
    own = object()  # where NumPy's warnings are held while its call runs
    outer, HOLDING.level = HOLDING.level, own
    try:
        with warnings.catch_warnings():  # its Python warnings ("Mean of empty slice"): the
            warnings.simplefilter("ignore")  # rule's call of NumPy's has issued them
            call(*map(plain, primals), **{k: plain(v) for k, v in kwargs.items()})
    except Exception as error:
        if not raised_after_writing(error):
            raise
        # NumPy raises for the first event its loop met (its FloatingPointError, or what the
        # error callback raises); the others it met (an overflow, then an invalid inf - inf)
        # are the value's too, not the tangent's
        log = _EventLog()
        with np.errstate(all="log", call=log), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(*map(plain, primals), **{k: plain(v) for k, v in kwargs.items()})
        take(str(error))
        for message in log.messages:
            take(message)
        raise
    finally:
        HOLDING.level = outer
        events = HELD.pop(own, ())
        for event in events:  # (all taken first: a warning made an error stops the issuing)
            take(event[0])
        for event in events:
            warn_at(event[0], RuntimeWarning, *event[1:])


class _EventLog:
    """NumPy's error handler (``call=``, mode "log") that keeps the messages of its events."""

    def __init__(self):
        self.messages = []

    def write(self, text):
        self.messages.append(text.removeprefix("Warning: ").rstrip("\n"))


def _batched_rule(func, entry, rule, primals, out, level):
    """The rule for a batched pass: the function's ``batched`` facet, of real values; else the
    pass stops."""
    batched = entry.batched
    if batched is None or rule is not entry.forward:
        unbatched(level, f"{function_name(func)}: no batched rule")
    if complex_among(primals) or (out is not None and getattr(out, "dtype", None) is not None
                                  and out.dtype.kind == "c"):
        unbatched(level, "complex values")

    def rule_of_the_batch(tangents, *args, **kwargs):
        result = batched(tangents, *args, **kwargs)
        if result is NotImplemented:
            unbatched(level, f"{function_name(func)}: a call its batched rule does not cover")
        return result

    return rule_of_the_batch


def _argument_itself(y, args, primals, level):
    """The dual among ``args`` whose primal is ``y`` itself (a plain array, or an enclosing
    level's value), which NumPy's result then is; else None."""
    if type(y) is np.ndarray or wrapped(y):
        for x, p in zip(args, primals, strict=True):
            if y is p and type(x) is Dual and x.level == level:
                return x
    return None


def _viewing(view, args):
    """Give ``view``, a function's result that views an argument's memory (``np.reshape``,
    ``x.T``), the dual owning that memory, as ``Dual.__getitem__`` does (``.base``)."""
    root = view.value.base
    for x in args:
        if type(x) is Dual and x.value is root:
            view.owner = x
            return
        if type(x) is Dual and x.owner is not None and x.owner.value is root:
            view.owner = x.owner
            return


def _split_call(name, args, kwargs, level):
    """The primals and tangents of a call's positional arguments (keyword arguments are
    settings: a dual there is refused, unless its tangent is zero, as that of an array the
    function allocated: then it is its value)."""
    for key, value in kwargs.items():
        if level_of([value]) == level:
            if type(value) is Dual and value.constant():
                kwargs[key] = value.value
                continue
            raise differentiated_keyword(name, key, "dual")
    # Python's numbers as NumPy's function would take them; in a list, arrays
    numbers = any(type(x) is Dual and x.weak for x in args) and weak_beside_arrays(args)
    pairs = [split(x, level, numbers) if type(x) is Dual else split(x, level, False)
             for x in args]
    return [p for p, _ in pairs], tuple(t for _, t in pairs)


def _assign(target, value, level, name, key=...):
    """``target[key] = value``, tangent included: forward mode's one assignment, for ``out=``
    arguments and ``x[key] = value``."""
    if level_of([value]) > level:
        raise lost_tangent(name)
    value_primal, value_tangent = split(value, level, numbers=False)
    carries = value_tangent is not None and (_followed(target, level) or _carry([value]))
    dual = _target(target, level, carries, name, key)
    if dual is None:
        target[key] = value_primal
        return target
    if batch_of(level) is not None:
        return _assign_batch(dual, key, value_primal, value_tangent, level)
    if dual.value.dtype.kind != "c" and np.iscomplexobj(value_primal):
        from_user_line(dual.value.__setitem__, key, value_primal)  # its ComplexWarning there
    else:
        dual.value[key] = value_primal
    if value_tangent is None:
        dual.tangent[key] = 0.0
        return dual
    value_tangent = tangent_into(value_tangent, dual.tangent)
    with tangent_errors(level):  # (a cast that overflows: the derivative's event)
        dual.tangent[key] = value_tangent
    return dual


def tangent_into(tangent, target):
    """``tangent`` as it is written into ``target``, a tangent: its real part where ``target``
    is real and it complex (the value's cast issued NumPy's ComplexWarning; the tangent's
    would issue it again)."""
    if target.dtype.kind != "c" and np.iscomplexobj(tangent):
        return np.real(tangent)
    return tangent


def _assign_batch(dual, key, value_primal, value_tangent, level):
    """``dual[key] = value`` in a batched pass: the batch axis of the tangent taken whole, the
    value's tangent given the target region's axes after its batch axis. NumPy copies
    overlapping operands first and lets the last of repeated indices win, for each direction
    as for the value."""
    bkey = batch_key(key, level)
    if dual.dtype.kind == "c" or np.iscomplexobj(value_primal):
        unbatched(level, "complex values")
    dual.value[key] = value_primal
    if value_tangent is None:
        dual.tangent[bkey] = 0.0
        return dual
    region = np.ndim(dual.value[key])
    extra = value_tangent.ndim - 1 - region
    if extra > 0:  # leading axes of length 1, which NumPy drops (it took the value)
        if any(n != 1 for n in value_tangent.shape[1:1 + extra]):
            unbatched(level, "an assignment NumPy broadcasts otherwise")
        value_tangent = value_tangent.reshape(value_tangent.shape[:1]
                                              + value_tangent.shape[1 + extra:])
    dual.tangent[bkey] = _aligned(value_tangent, region)
    return dual


# ----------------------------------------------------------------------------------------------
# The dual array


class Dual(ArrayMethods):
    """A float array and its tangent, for one forward-mode level. Behaves like the array."""

    __slots__ = ("value", "tangent", "level", "weak", "owner")

    def __init__(self, value, tangent, level, weak=False):
        self.value = value
        self.tangent = tangent
        self.level = level
        self.weak = weak  # it stands for a Python number (arraylike.weak)
        self.owner = None  # the dual owning its memory, of a view made by indexing it

    def owning(self):
        return self.owner

    @property
    def shape(self):
        return self.value.shape

    @shape.setter
    def shape(self, shape):
        """``x.shape = ...`` as NumPy's, of an array made inside the function or a view of an
        argument's (``Traced.shape``), its tangent alike; an argument's array keeps its shape."""
        if self.level in BATCH:
            unbatched(self.level, "x.shape = ...")
        if any(run.stands_for_callers(self) for run in ACTIVE.running
               if hasattr(run, "stands_for_callers")):
            ArrayMethods.shape.fset(self, shape)  # refused, with what to write instead
        value, tangent = self.value.view(), self.tangent.view()
        value.shape = shape  # NumPy's rule, and its error
        try:
            tangent.shape = shape
        except AttributeError:
            ArrayMethods.shape.fset(self, shape)
        self.value, self.tangent = value, tangent

    def resizable(self):
        """Whether ``x.resize`` may give this dual new memory (``ArrayMethods.resize``): one
        the function made (no argument's copy), owning its memory as NumPy requires."""
        if self.level in BATCH:
            unbatched(self.level, "x.resize(...)")
        root = owner(self.value)
        return (self.owner is None and self.value.flags.owndata and self.value.flags.c_contiguous
                and not any(owner(dual.value) is root for run in ACTIVE.running
                            for _, dual in getattr(run, "copies", {}).values()))

    def adopt(self, other):
        """Stand for ``other``'s value and tangent from now on (``x.resize``)."""
        self.value, self.tangent, self.owner = other.value, other.tangent, other.owner

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and type(kwargs.get("out")) is tuple:
            rebound = rebound_in_place(ufunc, inputs, kwargs)  # y *= x, y a new plain array
            if rebound is not None:
                return rebound
        if stands_in(inputs, kwargs) or takes_over(inputs):
            return NotImplemented  # it hands the plain array it views to this method
        y = subclass_call(getattr(ufunc, method), map(type, inputs), inputs, kwargs)
        if y is not None:  # np.matrix(A) + x: as the subclass computes
            return y
        if method == "__call__" and any(type(x) in (list, tuple) or converted_by_numpy(x)
                                        for x in inputs):
            # x / [x @ x], x ** [1.0, 2.0]: a list is the array NumPy makes of it (and an
            # object of the user's with an __array__, that array)
            return getattr(ufunc, method)(*ufunc_operands(inputs), **kwargs)
        if method == "__call__" and not kwargs:  # np.float32(1.3) ** x[0]: NumPy's scalar math
            result = numpys_scalar_operator(ufunc, inputs)
            if result is not None:
                return result
        if method == "__call__" and len(kwargs.get("out") or ()) > 1:
            return into_outs(ufunc, inputs, kwargs)  # np.divmod(a, b, out=(q, r))
        out = single_out(ufunc, kwargs)
        # NumPy asks one dual per call whatever their levels: it answers for the innermost.
        level = active(level_of(inputs + (out,)))
        if _outranked(inputs + (out,), level):
            return NotImplemented
        if method == "__call__":
            if ufunc is np.square and out is None and not kwargs:  # (NumPy's complex scalars
                return put_square_right(apply_ufunc(ufunc, inputs, None, kwargs, level),
                                        inputs[0])  # square otherwise than its loops)
            return apply_ufunc(ufunc, inputs, out, kwargs, level)
        if out is not None:
            kwargs["out"] = out
            written = integers_out(ufunc, inputs, out, kwargs, method)
            if written is not None:  # np.add.accumulate(x, out=k) of integers k
                return written
        pyfunc = pyfunc_ufunc_method(ufunc, method)
        if pyfunc is not None and (ufunc, method) not in RULES:  # U.reduce(x), np.frompyfunc's
            return pyfunc(getattr(ufunc, method), *inputs, **kwargs)
        return apply_function((ufunc, method), inputs, kwargs, level)

    def __array_function__(self, func, types, args, kwargs):
        if Preexisting in types:
            return NotImplemented  # it hands the plain array it views to this method
        if len(types) > 1:
            if takes_over_kinds(types):
                return NotImplemented  # (a masked array's, np.interp(xp, fp=m))
            y = subclass_call(func, types, args, kwargs)
            if y is not None:  # np.linalg.solve(np.matrix(A), x): as the subclass computes
                return y
        items = list(args) + list(kwargs.values())
        level = level_of(items)
        if level < 0:  # np.zeros(n, like=x): NumPy hands over the call without its like=
            kwargs, level = dict(kwargs, like=self), self.level
        active(level)
        if _outranked(items, level):
            return NotImplemented
        if holds_records(args) and not RULES.get(func, NO_RULE).nondifferentiable:
            y = records_function(func, args, kwargs)
            if y is not None:
                return y
            refuse_records(func, args)
        y = apply_function(func, args, kwargs, level)
        if not args or func is np.broadcast_to:
            return y
        return numpy_scalar(args[0], y, func not in SCALAR_METHOD_FUNCTIONS)

    def __array__(self, dtype=None, copy=None):
        if copy is not True and (dtype is None or np.dtype(dtype) == self.dtype) \
                and called_by_name("__array__"):
            return self  # w.__array__() in the user's code: w itself, as NumPy's (Traced's)
        if dtype is not None and np.dtype(dtype).kind in "iub":
            # Integers or booleans (np.int64(x[0]), np.asarray(x, int)): as NumPy casts, whose
            # derivative is zero, as reverse mode's Traced.__array__ converts them
            return np.asarray(self.value, dtype=dtype)
        value = self.plain_value()
        if value is None:
            active(self.level)  # stored during the jvp, used after it
            raise conversion_error("np.asarray")
        # A plain array of its memory, which would read a tangent's later values as constants
        root = owner(value)
        for run in ACTIVE.running:
            if run.level == self.level:
                run.handed.setdefault(id(root), [root]).append((value, self))
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def plain_value(self):
        """A dual whose tangent is zero converts as its value: along the tangent direction it
        is constant, so no derivative is lost (``ArrayMethods``); where an enclosing
        differentiation traces that value, as it converts (None if it is traced there)."""
        if not self.constant():
            return None
        return self.value.plain_value() if wrapped(self.value) else np.asarray(self.value)

    def constant_here(self):
        """Whether no derivative of this differentiation flows through it: its tangent is
        zero, or a constant of enclosing ones that is zero."""
        tangent = self.tangent
        while isinstance(tangent, Tracer):
            if not tangent.constant_here():
                return False
            tangent = tangent.value
        if tangent is not None and tangent.dtype.names is not None:  # records: field by field
            if self.level in BATCH:
                unbatched(self.level, "an array of records")
            return not _any_field(tangent)
        if tangent is not None and self.level in BATCH:
            return self._constant_in_every_direction()
        if type(tangent) is np.ndarray and tangent.size and tangent.flat[0]:
            return False  # its first element says so: no pass over a large tangent per operation
        return tangent is None or not np.any(tangent)

    def _constant_in_every_direction(self):
        """Whether the batch's tangent is zero, where it is for every direction or for none;
        otherwise one pass per direction would decide differently in each: the pass stops."""
        moving = np.any(self.tangent.reshape(self.tangent.shape[0], -1), axis=1)
        if moving.all():
            return False
        if moving.any():
            unbatched(self.level, "a decision on whether a tangent is zero")
        return True

    def unwritten_constant(self):
        return self.constant()  # (forward mode puts nothing back)

    def lock(self, write):
        """``x.setflags(write=...)``: the value's flag, as NumPy's (forward mode puts nothing
        back, and ``f`` works on copies of the caller's arrays). Writes check the value first,
        so a refused one leaves the tangent as it was."""
        self.value.setflags(write=write)
        tangent = self.tangent
        if write and type(tangent) is np.ndarray and writeable(tangent):
            # (a broadcast's, as its value's: NumPy's warning about writes into a view
            # np.broadcast_arrays made taken back)
            tangent.setflags(write=True)
        return True

    def constant(self):
        """Whether the tangent is zero, and not an array an enclosing differentiation traces
        (one it follows only as a constant is fine)."""
        tangent = self.tangent
        if wrapped(tangent):
            tangent = tangent.plain_value()
        if tangent is not None and tangent.dtype.names is not None:  # records: field by field
            if self.level in BATCH:
                unbatched(self.level, "an array of records")
            return not _any_field(tangent)
        if tangent is not None and self.level in BATCH:
            return self._constant_in_every_direction()
        return tangent is not None and not tangent.any()

    def owner_view(self):
        """This dual's view of all of its memory (``views.owner_view``): its tangent's memory
        mirrors its value's."""
        if batch_of(self.level) is not None:
            return self._batched_view(owner_view(self.value))
        return Dual(owner_view(self.value), owner_view(self.tangent), self.level)

    def restrided(self, shape, dtype, offset, strides):
        """The view of this one-dimensional dual at byte ``offset`` (``views.strided``): its
        tangent is laid out as its value, so the same view of each."""
        if batch_of(self.level) is not None:
            return self._batched_view(strided(self.value, shape, dtype, offset, strides))
        return Dual(strided(self.value, shape, dtype, offset, strides),
                    strided(self.tangent, shape, dtype, offset, strides), self.level)

    def _batched_view(self, value):
        """The dual of ``value``, a plain view of this dual's memory, in a batched pass: the
        same view of each direction's tangent, which mirrors the value's memory byte for byte
        (entry ``b`` laid out as the value, in a block of its own: ``_batched_zeros``). A
        tangent that is not laid out so, or a view it would not hold, stops the pass."""
        t, v = self.tangent, self.value
        if (type(t) is not np.ndarray or type(value) is not np.ndarray or t.dtype != v.dtype
                or value.dtype != v.dtype or t.shape != (t.shape[0],) + v.shape
                or any(n > 1 and a != b for n, a, b in zip(v.shape, v.strides, t.strides[1:],
                                                            strict=True))):
            unbatched(self.level, "a view of memory the batch does not mirror")
        block = owner(t)
        size = t.shape[0]
        start = address(t) - address(block) + address(value) - address(v)
        step = t.strides[0] if size > 1 else 0
        try:
            tangent = np.ndarray((size,) + value.shape, value.dtype, block, start,
                                 (step,) + value.strides)
        except (TypeError, ValueError):  # out of the block's bounds, or not a buffer
            unbatched(self.level, "a view of memory the batch does not mirror")
        low, high = byte_bounds(tangent)
        block_low = address(block)
        if value.size and (low < block_low or high > block_low + block.nbytes):
            unbatched(self.level, "a view of memory the batch does not mirror")
        return Dual(value, tangent, self.level)

    def astype(self, dtype, **kwargs):
        if self.value.dtype.names is not None:  # (records: by their fields)
            y = records_function(np.ndarray.astype, (self, dtype), kwargs)
            if y is not None:
                return y
        refuse_records(np.ndarray.astype, (self,))
        if np.dtype(dtype) == object and self.value.dtype.kind in "fc" \
                and set(kwargs) <= {"order", "copy", "casting", "subok"}:
            return python_objects(self, kwargs.get("order", "K"))  # (Python's numbers)
        return numpy_scalar(self, apply_function(np.ndarray.astype, (self, dtype), kwargs,
                                                 self.level))

    def __getitem__(self, key):
        if self.value.dtype.names is not None:  # an array of records: by its fields
            y = records_gathered(self, key)
            if y is not None:
                return y
            if picks_one_record(self, key):
                return as_one_record(self[records_key(self, key)])
            key = records_key(self, key)
        if type(self.value) is np.ndarray:
            element = text_element(self.value, key)
            if element is not None:
                return element
        if batch_of(self.level) is not None:
            value = as_array(self.value[key])
            tangent = self.tangent[batch_key(key, self.level)]
            if not may_overlap(value, self.value) and may_overlap(tangent, self.tangent):
                tangent = tangent.copy()  # an element: NumPy's scalar, not a view
            y = Dual(value, tangent, self.level)
        else:
            y = Dual(as_array(self.value[key]), as_array(self.tangent[key]), self.level)
        if stands_for_scalar(self) and not stands_for_scalar(y):
            return np.copy(y)  # NumPy's scalar[...], scalar[None]: a new, writable array
        if y.value.base is not None:  # a view keeps what owns its memory, as NumPy's does
            y.owner = self if self.value.base is None else self.owner
        if self.value.dtype.names is not None and not by_mutad(sys._getframe(1)):
            return record_field(self, y)  # (a field of one record: NumPy's scalar)
        return y

    def __setitem__(self, key, value):
        if stands_for_scalar(self):  # immutable, as NumPy's scalars are
            raise item_assignment_refused(self)
        if self.value.dtype.names is not None:  # an array of records: by its fields
            if records_write(self, key, value):
                return
        if type(value) in (list, tuple):  # x[:3] = [x[2], 2 * x[1], 5.0]: the array NumPy
            dtype = self.value.dtype  # makes of it, its items converted as NumPy converts them
            value = sequence_assigned(self, key, value,
                                      lambda v: lists_as_arrays([as_assigned(v, dtype)])[0])
        _assign(self, value, self.level, "x[key] = value", key)

    def _inplace(self, ufunc, other):
        if level_of([other]) > self.level:
            raise lost_tangent(f"augmented assignment ({ufunc.__name__})")
        if stands_for_scalar(self):
            return apply_ufunc(ufunc, (self, other), None, {}, self.level)
        return apply_ufunc(ufunc, (self, other), self, {}, self.level)


def _any_field(records):
    """Whether a field of ``records`` (an array of a structured dtype, fields within fields
    too) holds a nonzero number."""
    return any(_any_field(records[name]) if records[name].dtype.names is not None
               else np.any(records[name]) for name in records.dtype.names)


def active(level):
    """``level``, if its ``jvp`` is running in this thread; otherwise a clear error (a dual
    that escaped the function jvp differentiated would compute a meaningless tangent)."""
    if not running(level):
        raise escaped("a dual array (forward mode)", "the jvp")
    return level


def _outranked(items, level):
    """Whether a value of a level inside this one takes part (of a reverse pass nested inside
    this jvp: the innermost dual among ``items`` is of ``level``): it then handles the
    operation (and refuses forward mode over it)."""
    inner = innermost(items)
    return inner is not None and inner.level > level


def _binary(ufunc):
    """Operators as NumPy calls: they reach ``__array_ufunc__`` with every operand, so the
    innermost level handles them whatever side it is on. Python's arithmetic on values that
    stand for Python numbers gives one (``arraylike.weak_arithmetic``)."""

    def forward(self, other):
        result = ufunc(self, other)
        return weak_arithmetic(result, other) if self.weak else result

    def reflected(self, other):
        result = ufunc(other, self)
        return weak_arithmetic(result, other) if self.weak else result

    def inplace(self, other):
        result = self._inplace(ufunc, other)
        return weak_arithmetic(result, other) if self.weak else result

    return forward, reflected, inplace


install_operators(Dual, _binary)


# ----------------------------------------------------------------------------------------------
# Decorated functions (mutad.adjoint, mutad.inplace_adjoint) and the arguments of a run


def apply_adjoint(adjoint, level, args, kwargs):
    """Call a decorated function's forward rule on the primals, tangents alongside."""
    name = adjoint._name()
    if level in BATCH:
        unbatched(level, f"{name}: a user's rule")
    rule = adjoint.forward_rule
    if rule is None:
        raise UnsupportedFunctionError(
            f"{name} was given dual arrays (forward mode) but has no forward rule: attach one "
            f"with @{getattr(adjoint.fn, '__name__', 'f')}.jvp_rule.")
    primals, tangents = _split_call(name, args, kwargs, level)
    if complex_among(primals):
        check_complex(name, rule)
    writes = getattr(adjoint, "writes", None)
    if writes is None:
        read = _Read(tangents)
        (y, dy), _ = _ruled(adjoint.fn, rule, read, primals, kwargs, level)
        for i in read.unread():
            # (a dual constant here, whose tangent is zero, the rule may take for a constant:
            # dropping a zero tangent is exact, as an interpolant's constant query points)
            # (an argument with no elements has no tangent to drop)
            if not (type(args[i]) is Dual and (args[i].constant_here()
                                               or 0 in np.shape(primals[i]))):
                dropped_derivative(name, i, ((rule, 1), (adjoint.pure_rule, 0)))
        if dy is None and _of_constants(args, level):
            return constant_result(y, level, primals, args)
        return _wrap(y, dy, level, primals, tangents, owned=False)
    plain = [i for i in writes if i < len(args) and tangents[i] is None
             and getattr(args[i], "dtype", np.dtype(int)).kind in "fc"]
    if plain and any(t is not None for t in tangents):
        if _carry([a for a, t in zip(args, tangents, strict=True) if t is not None]):
            _target(args[plain[0]], level, True, name)
        if all(tangents[i] is None for i in writes if i < len(args)):
            tangents = (None,) * len(tangents)  # constants only, into arrays not followed
    result, _ = _ruled(adjoint.fn, rule, tangents, primals, kwargs, level)
    return _returned(result, args, primals)


class _Read(tuple):
    """A forward rule's tangents, which note the ones it reads: a tangent it never read is
    one it dropped (a setting given a silent zero derivative: ``registry.dropped_derivative``).
    Iterating or slicing reads every one it reaches."""

    def __init__(self, tangents):
        self.seen = set()

    def __getitem__(self, index):
        if type(index) is slice:
            self.seen.update(range(*index.indices(len(self))))
        else:
            self.seen.add(index % len(self))
        return tuple.__getitem__(self, index)

    def __iter__(self):
        self.seen.update(range(len(self)))
        return tuple.__iter__(self)

    def unread(self):
        """The positions of the tangents (not None) never read."""
        return [i for i, t in enumerate(tuple.__iter__(self))
                if t is not None and i not in self.seen]


def _returned(result, args, primals):
    """What an in-place function returned, its arguments replaced by the duals they came from."""
    if type(result) in (tuple, list):
        return type(result)(_returned(r, args, primals) for r in result)
    for x, p in zip(args, primals, strict=True):
        if result is p and x is not p:
            return x
    return result
