"""Indexing beyond ``x[key]``: the gathers (take, sort, choose, diff, interp) and the functions
that write into an argument (ufunc.at, put, place, putmask, put_along_axis, copyto).
``x[key]`` and ``x[key] = value`` themselves are the engine's view and assignment semantics.

A gather copies elements of its input, so its pullback adds each output's cotangent back where
the element came from (``gather_cotangent``, which also sums repeated indices).
``np.sort`` and ``np.partition`` take their values (bits and memory layout included) from
NumPy's own functions, and their gradient through a permutation that maps the input onto those
values (``_matching``). A gather is linear in what it gathers from, so its forward rule gathers the tangent the same way.

Functions that write into an argument are in-place handlers: each says how it writes, and the
engine's one in-place path (``record_write``) records it. ``np.add.at`` / ``np.subtract.at``
checkpoint the touched elements. Writes that copy elements (``copyto``, ``put``, ``place``,
``putmask``, ``put_along_axis``) compute what NumPy computes, which is not always "as if the
source were copied first"; the engine's ``copy_into`` finds where each new element came from
and records the write as the gather NumPy performed. In forward mode each of these writes does
the same write into the target's tangent, with the values' tangent (``_same_write_on_tangents``).
"""

import functools
import warnings

import numpy as np

from ..core.debug import from_user_line
from ..core.devices import beside, device_of, index_for, ufunc_at
from ..core.errors import UnsupportedOperationError, UntracedWriteError
from ..core.registry import (complex_aware, defbatched, defcomposite, definplace, deflinear,
                             defjvp, defrule, holomorphic, recomputable, zero_derivative)
from ..core.allocation import allocate, lists_as_arrays
from ..engines.elementwise import unbroadcast
from ..engines.forward import tangent_into
from ..engines.inplace import check_destination, copy_into, overlaps, record_write, writes_into
from ..engines.reverse import Traced, locate, plain, private
from ..engines.writes import raised_after_writing, Reads, Undo, checkpoint
from ..core import views
from ..custom import adjoint
from ..core.views import memory, wrapped
from ..engines.arraylike import carries_derivative, settled
from ._helpers import accumulator, batch_aligned, gather_cotangent, interp_piece, interp_sides


def _resolve_mode(indices, length, mode):
    """``indices`` as NumPy's ``mode`` ("raise", "wrap" or "clip") resolves them."""
    indices = np.asarray(indices)
    if mode == "wrap":
        return indices % length
    if mode == "clip":
        return np.clip(indices, 0, length - 1)
    return indices


# ----------------------------------------------------------------------------------------------
# Gathers


@defrule(np.take, leading=2)
def take(a, indices, axis=None, mode="raise"):
    y = np.take(a, indices, axis, mode=mode)

    def back(dy):
        return gather_cotangent(dy, a, lambda s: np.take(s, indices, axis, mode=mode)), None

    return y, back


deflinear(np.take)


@defrule(np.take_along_axis, leading=2)
def take_along_axis(arr, indices, axis=-1):
    y = np.take_along_axis(arr, indices, axis)

    def back(dy):
        return gather_cotangent(dy, arr, lambda s: np.take_along_axis(s, indices, axis)), None

    return y, back


deflinear(np.take_along_axis)


@defrule(np.compress, leading=2)
def compress(condition, a, axis=None):
    y = np.compress(condition, a, axis)

    def back(dy):
        return None, gather_cotangent(dy, a, lambda s: np.compress(condition, s, axis))

    return y, back


deflinear(np.compress, operands=(1,))


@defrule(np.extract, leading=2)
def extract(condition, arr):
    y = np.extract(condition, arr)

    def back(dy):
        return None, gather_cotangent(dy, arr, lambda s: np.extract(condition, s))

    return y, back


deflinear(np.extract, operands=(1,))


def _rearranging(order, axis):
    """The gather that rearranges an array by ``order`` along ``axis`` (flattened when None)."""
    along = -1 if axis is None else axis
    return lambda x: np.take_along_axis(np.ravel(x) if axis is None else x, order, along)


def _matching(a, y, axis):
    """A permutation ``p`` along ``axis`` (of the flattened ``a`` when None) with
    ``a[p] == y``, ``y`` a rearrangement of ``a`` along it: the ranks of ``y``'s elements among
    the stably sorted ``a``. Equal elements (+0.0 and -0.0 too) are interchangeable, so any
    such ``p`` routes the gradient validly."""
    source = np.ravel(a) if axis is None else a
    along = -1 if axis is None else axis
    by_rank = np.argsort(source, axis=along, kind="stable")
    rank = np.argsort(np.argsort(y, axis=along, kind="stable"), axis=along, kind="stable")
    return np.take_along_axis(by_rank, rank, along)


def _laid_out_as(y, values):
    """``values`` in a new array with ``y``'s shape and memory layout."""
    out = np.empty_like(y, dtype=np.result_type(values))
    out[...] = values
    return out


def _sorting_gather(a, y, order, axis):
    """``y`` (NumPy's own result, so its values, bits and memory layout are NumPy's) with the
    pullback of the gather of ``a`` by ``order`` along ``axis``, which gives ``y``'s values."""
    rearrange = _rearranging(order, axis)
    source = np.ravel(a) if axis is None else a

    def back(dy):
        g = gather_cotangent(dy, source, rearrange)
        return (np.reshape(g, np.shape(a)),)

    return y, back


@defrule(np.sort, leading=1)
def sort(a, axis=-1, kind=None, order=None, **kwargs):
    # A sort permutes: the gradient goes back through a permutation a stable argsort finds
    # (ties are equal values, so either choice is a valid one-sided derivative).
    y = np.sort(a, axis=axis, kind=kind, order=order, **kwargs)
    along = -1 if axis is None else axis
    permutation = np.argsort(np.ravel(a) if axis is None else a, axis=along, kind="stable",
                             order=order)
    return _sorting_gather(a, y, permutation, axis)


@defjvp(np.sort)
def sort_jvp(tangents, a, axis=-1, kind=None, order=None, **kwargs):
    y = np.sort(a, axis=axis, kind=kind, order=order, **kwargs)
    rearrange = _rearranging(_matching(a, y, axis), axis)
    return y, _laid_out_as(y, rearrange(tangents[0]))


@defcomposite(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           **kwargs):
    """NumPy's unique values (its index, inverse and counts as they are), each gathered from
    its first occurrence, so that it takes that element's derivative: equal elements are one
    value, of which the first is a valid one-sided choice, as ``np.sort`` takes ties (and the
    right one where the equal elements are copies of one value, ``np.concatenate([x, x])``).
    Where the first occurrences do not hold NumPy's bits (a signed zero, NaNs beside one
    another), refused. Those and the index, inverse and counts are decisions on the values,
    taken on every call (``unique_decided``, a step a replay runs again)."""
    bits_agree, first, *result = unique_decided(ar, return_index, return_inverse,
                                                return_counts, axis, **kwargs)
    if not bits_agree:
        raise UnsupportedOperationError(
            "np.unique of differentiated values where equal elements differ in their bits (0.0 "
            "and -0.0, NaNs): NumPy's unique value need not be the first one's, whose "
            "derivative mutad gives. Make them one value first (x + 0.0 turns -0.0 into 0.0), "
            "or take np.unique(x, return_index=True) and gather x[index] yourself.")
    gathered = np.ravel(ar)[first] if axis is None else np.take(ar, first, axis=axis)
    return (gathered, *result) if result else gathered


for _unique in (np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all):
    # NumPy's own code, a call of np.unique (whose composite above it reaches) in a named tuple
    defcomposite(_unique)(getattr(_unique, "__wrapped__"))


@adjoint
def unique_decided(ar, return_index, return_inverse, return_counts, axis, **kwargs):
    """Of the values ``ar``, as constants: whether the first occurrences of NumPy's unique
    values hold its bits (``np.bool_``), their index, and NumPy's index, inverse and counts
    asked for."""
    result = np.unique(ar, return_index, return_inverse, return_counts, axis, **kwargs)
    values = result[0] if type(result) is tuple else result
    first = np.unique(ar, True, axis=axis, **kwargs)[1]
    if kwargs.get("sorted", True) is False and axis is None:
        # NumPy's unsorted values (a hash table's order: np.unique_values of complex values)
        # need not be in the order its index of first occurrences is: each value's own
        ordered, first = np.unique(ar, True, equal_nan=kwargs.get("equal_nan", True))
        if ordered.shape == values.shape:
            first = first[np.minimum(np.searchsorted(ordered, values), len(first) - 1)]
    found = np.ravel(ar)[first] if axis is None else np.take(ar, first, axis=axis)
    bits_agree = found.shape == values.shape and found.tobytes() == values.tobytes()
    return (np.bool_(bits_agree), first, *(result[1:] if type(result) is tuple else ()))


@unique_decided.rule
@zero_derivative("ar")  # (decisions: integers and a flag, piecewise constant in the values)
def _unique_decided_rule(ar, return_index, return_inverse, return_counts, axis, **kwargs):
    decided = unique_decided(ar, return_index, return_inverse, return_counts, axis, **kwargs)
    return decided, lambda dy: (None,) * 5


@unique_decided.jvp_rule
def _unique_decided_jvp(tangents, ar, return_index, return_inverse, return_counts, axis,
                        **kwargs):
    return unique_decided(ar, return_index, return_inverse, return_counts, axis, **kwargs), None


@defcomposite(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """NumPy's booleans: a decision on the values, taken on every call (``isin_decided``)."""
    return isin_decided(element, test_elements, assume_unique, invert, kind)


@adjoint
def isin_decided(element, test_elements, assume_unique, invert, kind):
    """``np.isin`` of the values, as constants."""
    return np.isin(element, test_elements, assume_unique=assume_unique, invert=invert, kind=kind)


@isin_decided.rule
def _isin_decided_rule(element, test_elements, assume_unique, invert, kind):
    decided = isin_decided(element, test_elements, assume_unique, invert, kind)
    return decided, lambda dy: (None,) * 5


@isin_decided.jvp_rule
def _isin_decided_jvp(tangents, element, test_elements, assume_unique, invert, kind):
    return isin_decided(element, test_elements, assume_unique, invert, kind), None


# The set functions: NumPy's values, each gathered from the element of an input it is (of
# equal ones, the first, as np.unique takes them), so that it takes that element's derivative.

for _set_function in (np.union1d, np.setxor1d):
    # NumPy's own code: np.unique and np.concatenate, sorting, masks (which reach their rules)
    defcomposite(_set_function)(getattr(_set_function, "_implementation"))


@defcomposite(np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique=False):
    """NumPy's code, its masking by np.isin (whose composite above it reaches)."""
    if assume_unique:
        ar1 = np.ravel(ar1)
    else:
        ar1, ar2 = np.unique(ar1), np.unique(ar2)
    return ar1[np.isin(ar1, ar2, assume_unique=True, invert=True)]


@defcomposite(np.intersect1d)
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """NumPy's common values, each gathered from its element of ``ar1`` (NumPy's index of it:
    the first occurrence), so that it takes that element's derivative (where ``ar2``'s equal
    element is a copy of the same value, ``np.intersect1d(x, x[::2])``, the same one). Where
    that element does not hold NumPy's bits (0.0 beside -0.0), refused, as np.unique's is.
    The indices are decisions on the values, taken on every call (``intersect1d_decided``)."""
    bits_agree, first, second = intersect1d_decided(ar1, ar2, assume_unique)
    if not bits_agree:
        raise UnsupportedOperationError(
            "np.intersect1d of differentiated values where equal elements differ in their bits "
            "(0.0 and -0.0): NumPy's common value need not be the first array's, whose "
            "derivative mutad gives. Make them one value first (x + 0.0 turns -0.0 into 0.0).")
    common = np.ravel(ar1)[first]
    return (common, first, second) if return_indices else common


@adjoint
def intersect1d_decided(ar1, ar2, assume_unique):
    """Of the values, as constants: whether ``ar1``'s elements at NumPy's indices hold the
    bits of NumPy's common values (``np.bool_``), and NumPy's indices into each input."""
    values = np.intersect1d(ar1, ar2, assume_unique)
    common, first, second = np.intersect1d(ar1, ar2, assume_unique, return_indices=True)
    bits_agree = np.ravel(ar1)[first].tobytes() == values.tobytes() == common.tobytes()
    return np.bool_(bits_agree), first, second


@intersect1d_decided.rule
def _intersect1d_decided_rule(ar1, ar2, assume_unique):
    return intersect1d_decided(ar1, ar2, assume_unique), lambda dy: (None,) * 3


@intersect1d_decided.jvp_rule
def _intersect1d_decided_jvp(tangents, ar1, ar2, assume_unique):
    return intersect1d_decided(ar1, ar2, assume_unique), None


@defrule(np.partition, leading=1)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    # NumPy leaves the order within each side of kth unspecified, so the permutation is found
    # from NumPy's own result rather than from np.argpartition.
    y = np.partition(a, kth, axis=axis, kind=kind, order=order)
    return _sorting_gather(a, y, _matching(a, y, axis), axis)


@defjvp(np.partition)
def partition_jvp(tangents, a, kth, axis=-1, kind="introselect", order=None):
    y = np.partition(a, kth, axis=axis, kind=kind, order=order)
    rearrange = _rearranging(_matching(a, y, axis), axis)
    return y, _laid_out_as(y, rearrange(tangents[0]))


@defrule(np.choose, leading=2)
def choose(a, choices, mode="raise"):
    y = np.choose(a, choices, mode=mode)
    picked = np.broadcast_to(_resolve_mode(a, len(choices), mode), np.shape(y))

    def back(dy):
        cotangents = [unbroadcast(np.where(picked == k, dy, 0.0), np.shape(choice))
                      for k, choice in enumerate(choices)]
        if not isinstance(choices, (list, tuple)):  # an array (one an outer tape traces, too)
            return None, np.stack(cotangents)
        return None, cotangents

    return y, back


deflinear(np.choose, operands=(1,))


@defrule(np.select, leading=3)
def select(condlist, choicelist, default=0):
    y = np.select(condlist, choicelist, default)

    def back(dy):
        # Each element comes from the first true condition, or from default if none is true.
        unclaimed = np.ones(np.shape(y), bool)
        cotangents = []
        for condition, choice in zip(condlist, choicelist, strict=True):
            taken = unclaimed & condition
            unclaimed = unclaimed & ~taken
            cotangents.append(unbroadcast(np.where(taken, dy, 0.0), np.shape(choice)))
        return None, cotangents, unbroadcast(np.where(unclaimed, dy, 0.0), np.shape(default))

    return y, back


@defjvp(np.select)
def select_jvp(tangents, condlist, choicelist, default=0):
    # A default given by keyword is a constant; the choices broadcast, so zeros can be scalars.
    y = np.select(condlist, choicelist, default)
    dchoices, ddefault = (tuple(tangents[1:]) + (None, None))[:2]
    if dchoices is None and ddefault is None:
        return y, None
    dchoices = [0.0 if t is None else t for t in dchoices or [None] * len(choicelist)]
    return y, np.select(condlist, dchoices, 0.0 if ddefault is None else ddefault)


def _diff_ends(ends, kwargs):
    """``prepend`` and ``append`` of ``np.diff``, given positionally or by keyword."""
    prepend = (ends + (kwargs.get("prepend", np._NoValue),))[0]
    append = (ends[1:] + (kwargs.get("append", np._NoValue),))[0]
    return prepend, append


@defrule(np.diff, leading=5)
def diff(a, n=1, axis=-1, *ends, **kwargs):
    if n == 0:
        # NumPy returns a itself; as a view, it shares a's shadow
        return a[...], lambda dy: (dy, None, None, None, None)
    y = np.diff(a, n, axis, *ends, **kwargs)
    prepend, append = _diff_ends(ends, kwargs)
    axis = axis % np.ndim(a)

    def width(end):
        if end is np._NoValue:
            return 0
        return 1 if np.ndim(end) == 0 else np.shape(end)[axis]

    def back(dy):
        if np.shape(dy)[axis] == 0:  # n at least the length: nothing depends on the input
            return (np.zeros_like(a), None, None, *(None if end is np._NoValue else
                                                    np.zeros_like(end, dtype=float)
                                                    for end in (prepend, append)))
        # One difference y_i = x_(i+1) - x_i has the transpose x̄_j = ȳ_(j-1) - ȳ_j (with ȳ zero
        # past either end): minus the difference of ȳ padded by one zero on each side.
        g = dy
        padding = [(0, 0)] * np.ndim(dy)
        padding[axis] = (1, 1)
        for _ in range(n):
            g = -np.diff(np.pad(g, padding), axis=axis)
        first, last = width(prepend), g.shape[axis] - width(append)
        pieces = np.split(g, [first, last], axis=axis)
        ends_cotangents = [None if end is np._NoValue else unbroadcast(piece, np.shape(end))
                           for end, piece in ((prepend, pieces[0]), (append, pieces[2]))]
        return (pieces[1], None, None, *ends_cotangents)

    return y, back


recomputable(np.diff)


@defjvp(np.diff)
def diff_jvp(tangents, a, n=1, axis=-1, *ends, **kwargs):
    y = np.diff(a, n, axis, *ends, **kwargs)
    if n == 0:
        return y, tangents[0]  # a itself
    if all(t is None for t in tangents):
        return y, None
    # Differences are linear in a and the ends jointly; ends given by keyword are constants.
    end_tangents = (tuple(tangents[3:]) + (None, None))[:2]
    moved = [end if end is np._NoValue else np.zeros(np.shape(end)) if t is None else t
             for end, t in zip(_diff_ends(ends, kwargs), end_tangents, strict=True)]
    da = np.zeros(np.shape(a)) if tangents[0] is None else tangents[0]
    return y, np.diff(da, n, axis, *moved)  # positional: the tangents may be traced


def _periodic(x, xp, fp, period):
    """NumPy's own reduction of a periodic interpolation to a plain one: x and xp modulo the
    period, xp sorted (fp with it), and xp's last and first points repeated one period before
    and after. Also the sorting order, a decision taken now."""
    period = abs(period)
    xp_mod = np.mod(xp, period)
    order = np.argsort(xp_mod)
    xp_sorted, fp_sorted = np.take(xp_mod, order), np.take(fp, order)
    xp_reduced = np.concatenate((xp_sorted[-1:] - period, xp_sorted, xp_sorted[:1] + period))
    fp_reduced = np.concatenate((fp_sorted[-1:], fp_sorted, fp_sorted[:1]))
    return np.mod(x, period), xp_reduced, fp_reduced, order


def _unreduced(g, order):
    """The cotangent of xp (or fp) from that of its reduced form: the repeated points add to
    the points they repeat, and the sorting is undone (x mod p has slope 1)."""
    n = np.size(order)
    inner = g[1:-1] + g[-1] * (np.arange(n) == 0) + g[0] * (np.arange(n) == n - 1)
    return np.take(inner, np.argsort(order))


def _reduced(t, order):
    """The tangent of the reduced xp (or fp) from that of xp (or fp)."""
    t_sorted = np.take(t, order)
    return np.concatenate((t_sorted[-1:], t_sorted, t_sorted[:1]))


def _complex_scalars(*values):
    """``values`` (np.interp's x, left and right) with each complex value that stands for a
    NumPy scalar (``x[0] * 1j``) that scalar: NumPy's interp takes a complex scalar (as x it
    reads its real part, with a ComplexWarning) but refuses a complex 0-d array, which the
    rules are given in its place."""
    return tuple(v[()] if type(v) is np.ndarray and np.iscomplexobj(v)
                 and views.stands_for_scalar(v) else v for v in values)


@defrule(np.interp, leading=5)
def interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:  # left and right are ignored, as NumPy ignores them
        x_reduced, xp_reduced, fp_reduced, order = _periodic(x, xp, fp, period)
        y, reduced_back = interp(x_reduced, xp_reduced, fp_reduced)

        def periodic_back(dy):
            dx, dxp, dfp = reduced_back(dy)[:3]
            return dx, _unreduced(dxp, order), _unreduced(dfp, order), None, None

        return y, periodic_back
    x, left, right = _complex_scalars(x, left, right)
    y = np.interp(x, xp, fp, left, right)
    if not hasattr(x, "shape"):  # a Python float or list: plain, so converting it is safe
        x = np.asarray(x)
    complex_x = np.iscomplexobj(x)
    if complex_x:  # y depends on its real part alone
        x = np.real(x)
    x_shape, xp_shape, fp_shape = np.shape(x), np.shape(xp), np.shape(fp)
    below, above, inside, interval = interp_sides(x, xp)

    def back(dy):
        # Built with calls that dispatch: under nested reverse mode dy, x, xp and fp are arrays
        # an outer differentiation traces, and it records what is computed from them here.
        dy = np.broadcast_to(dy, x_shape)
        dleft = np.sum(np.where(below, dy, 0.0))
        dright = np.sum(np.where(above, dy, 0.0))
        if xp_shape[0] > 1:
            # On [xp_i, xp_(i+1)]: y = fp_i + s (x - xp_i), s = (fp_(i+1) - fp_i) / h,
            # t = (x - xp_i) / h. Then ∂y/∂x = s, ∂y/∂fp_i = 1 - t, ∂y/∂fp_(i+1) = t,
            # ∂y/∂xp_i = s (t - 1), ∂y/∂xp_(i+1) = -s t.
            i = interval
            t, s = interp_piece(x, xp, fp, i, inside)
            inner = np.where(inside, dy, 0.0)
            # a complex x: ∂y/∂Re x = s, none in Im x (its cotangent real, by the holomorphic
            # rules' conjugations, see registry.holomorphic)
            dx = np.real(inner * s) if complex_x else inner * s
            dfp = accumulator(fp_shape, np.result_type(inner, t), inner, t, dleft, dright)
            dxp = accumulator(xp_shape, np.result_type(inner, s), inner, s, t)  # complex fp:
            # complex, and the core keeps the real part for the real xp
            ufunc_at(np.add, dfp, i, inner * (1.0 - t))
            ufunc_at(np.add, dfp, i + 1, inner * t)
            ufunc_at(np.add, dxp, i, inner * s * (t - 1.0))
            ufunc_at(np.add, dxp, i + 1, -inner * s * t)
        else:
            dx = np.zeros(x_shape)
            dxp = np.zeros(xp_shape)
            dfp = accumulator(fp_shape, np.result_type(dy, 0.0), dy)
            dfp[0] += np.sum(np.where(inside, dy, 0.0))
        if left is None:
            dfp[0] += dleft
        if right is None:
            dfp[-1] += dright
        return np.reshape(dx, x_shape), dxp, dfp, dleft, dright

    return y, back


@defjvp(np.interp)
def interp_jvp(tangents, x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        x_reduced, xp_reduced, fp_reduced, order = _periodic(x, xp, fp, period)
        dx, dxp, dfp = (tuple(tangents) + (None,) * 3)[:3]
        return interp_jvp((dx, None if dxp is None else _reduced(dxp, order),
                           None if dfp is None else _reduced(dfp, order)),
                          x_reduced, xp_reduced, fp_reduced)
    x, left, right = _complex_scalars(x, left, right)
    y = np.interp(x, xp, fp, left, right)
    if all(t is None for t in tangents):
        return y, None
    if not hasattr(x, "shape"):  # a Python float or list: plain, so converting it is safe
        x = np.asarray(x)
    dx, dxp, dfp, dleft, dright = (tuple(tangents) + (None,) * 5)[:5]
    if np.iscomplexobj(x):  # y depends on its real part alone
        x = np.real(x)
        dx = None if dx is None else np.real(dx)
    below, above, inside, i = interp_sides(x, xp)
    terms = []
    if np.size(xp) > 1:
        # The partial derivatives of the reverse rule: on [xp_i, xp_(i+1)], with slope s and
        # t = (x - xp_i) / h,
        # dy = s dx + (1 - t) dfp_i + t dfp_(i+1) + s (t - 1) dxp_i - s t dxp_(i+1).
        t, s = interp_piece(x, xp, fp, i, inside)
        if dx is not None:
            terms.append(s * dx)
        if dfp is not None:
            terms.append((1.0 - t) * np.take(dfp, i) + t * np.take(dfp, i + 1))
        if dxp is not None:
            terms.append(s * (t - 1.0) * np.take(dxp, i) - s * t * np.take(dxp, i + 1))
    elif dfp is not None:
        terms.append(dfp[0])
    # Outside xp, y is left (default fp[0]) or right (default fp[-1]).
    left_tangent = dleft if left is not None else None if dfp is None else dfp[0]
    right_tangent = dright if right is not None else None if dfp is None else dfp[-1]
    outside = np.where(below, 0.0 if left_tangent is None else left_tangent,
                       0.0 if right_tangent is None else right_tangent)
    return y, np.where(below | above, outside, sum(terms, 0.0))


# ----------------------------------------------------------------------------------------------
# In-place writes: how each writes (the engine records them), and forward mode's same write into
# the tangent


def refuse_misread_at(ufunc, a, indices, b):
    """Refuse ``ufunc.at(a, indices, b)`` where NumPy reads past the end of ``b``: into a 1-d
    array, at an index array of two or more dimensions, with values of one dimension that
    NumPy should broadcast along the index's last axis (``np.add.at(u, [[0, 1], [1, 2]],
    [v0, v1])``). NumPy's loop for that case takes the values as if they had one element per
    index, so its result holds whatever lies in memory past them: no derivative describes it."""
    key = plain(indices)
    if type(key) is tuple and len(key) == 1:
        key = key[0]
    if (b is not None and np.ndim(a) == 1 and np.ndim(b) == 1 and np.size(b) > 1
            and np.ndim(key) >= 2 and np.size(b) != np.size(key)):
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}.at: values of shape {np.shape(b)} broadcast against an index "
            f"of shape {np.shape(key)} into a 1-d array, where NumPy reads past the end of the "
            "values (its result depends on memory it does not own). Broadcast the values "
            "first: np.broadcast_to(values, np.shape(indices)).")


def _unbuffered(ufunc, sign):
    """The handler of ``ufunc.at(a, indices, b)`` (``a[indices] ±= b``, repeated indices each
    adding their share). The touched elements are saved, never restored by ``opposite.at``:
    a scatter touches few elements, and subtracting back loses those an addition absorbed."""

    def handler(a, indices, b=None):
        call = f"np.{ufunc.__name__}.at"
        if not writes_into(call, a, b):
            return ufunc.at(a, plain(indices), plain(b))
        refuse_misread_at(ufunc, a, indices, b)
        check_destination(a, call)
        tape = a.tape
        target = a.value
        # on the device of a device array; the record's own copy of an index f made, which
        # f may go on writing (``private``)
        key = index_for(memory(target), private(plain(indices)))
        values = b.value if type(b) is Traced and b.tape is tape else b

        def save():
            if wrapped(target):
                # Nested reverse mode: the target is traced by an outer differentiation, which
                # refuses an assignment through repeated indices; a mask names each place once.
                written = np.zeros_like(memory(target), bool)
                written[key] = True
                return checkpoint(target, written)
            return checkpoint(target, key)  # repeated indices all get the same original value

        b_place = locate(b, tape)

        def pullback(record, shadows, _):
            # a_after = a_before ± scatter(b): a's cotangent passes through unchanged, and b's
            # is the gather of it (copied before b's shadow, which may be a view of a's, grows).
            da = shadows.get(record.written)
            if da is not None:
                gathered = np.copy(da[key])
                if sign < 0:
                    np.negative(gathered, out=gathered)
                shadows.add(b_place, unbroadcast(gathered, b_place.shape), owned=True)

        record_write(ufunc.at, a, lambda: ufunc_at(ufunc, target, key, values),
                     Reads((a, indices, b), (target, key, values), [None, key, None]),
                     Undo(save=save), pullback=None if b_place is None else pullback,
                     taken=False)

    return handler


definplace((np.add, "at"))(_unbuffered(np.add, +1))
definplace((np.subtract, "at"))(_unbuffered(np.subtract, -1))


def at_in_rounds(ufunc):
    """``ufunc.at(a, indices[, b])`` for any other ufunc with a rule, as a composition: NumPy
    applies ``a[i] = ufunc(a[i], b_k)`` once per occurrence of ``i``, in order, so round ``r``
    applies the ``r``-th occurrence of every index at once, where no index repeats, as an
    indexed assignment the engine follows. Same operations on the same values in the same order
    per element: NumPy's result, bit for bit, in both modes and at every order. Except that
    ``np.multiply.at`` computes a complex product as NumPy's scalar arithmetic does, which
    rounds otherwise than its array loop: those are applied one occurrence at a time, each a
    product of two elements, which the engine takes as NumPy's scalars do."""

    def at(a, indices, b=None):
        name = f"np.{ufunc.__name__}.at"
        if (b is None) != (ufunc.nin == 1):
            return ufunc.at(plain(a), plain(indices), *(() if b is None else (plain(b),)))
        refuse_misread_at(ufunc, a, indices, b)
        if b is not None and np.shares_memory(views.memory(a), views.memory(b)):
            raise UnsupportedOperationError(
                f"{name}: its operand shares memory with the array it writes, which NumPy reads "
                "as it writes; pass a copy of the operand.")
        # NumPy's events are its own call's, on a copy of the array it writes (its loop
        # for ``at`` words them "in at", its maximum and minimum warn of a NaN where their
        # call is silent): the rounds, the same operations, run ignoring theirs, and a
        # recording keeps both (a step that calls NumPy again, and np.errstate's modes)
        recorder = getattr(getattr(a, "tape", None), "recorder", None)
        try:
            if recorder is not None and recorder.ready:
                recorder.nondiff(_numpys_at, (ufunc, a, indices, b), {})
            else:
                _numpys_at(ufunc, a, indices, b)
        except Exception as error:
            if not raised_after_writing(error):
                raise
            # NumPy applies every occurrence, then raises for the floating-point errors met
            # (f may catch it and go on): its error raised after the rounds
            with np.errstate(all="ignore"):
                _at_in_rounds(ufunc, a, indices, b)
            raise error
        with np.errstate(all="ignore"):
            _at_in_rounds(ufunc, a, indices, b)

    return at


def _numpys_at(ufunc, a, indices, b):
    """NumPy's ``ufunc.at(a, indices[, b])`` on a copy of ``a``, for its floating-point events
    alone (``at_in_rounds``, whose rounds read every position of ``a`` already). A device
    library's ``at`` raises none of NumPy's events: nothing to do there."""
    if device_of(views.memory(a)) is not None:
        return
    ufunc.at(np.array(views.memory(a)), plain(indices),
             *(() if b is None else (views.memory(b),)))


def _at_in_rounds(ufunc, a, indices, b):
    """``at_in_rounds(ufunc)``'s rounds."""
    shape = np.shape(a)
    positions = np.arange(np.size(a)).reshape(shape)[plain(indices)]  # NumPy's indexing
    flat = positions.reshape(-1)
    values = None if b is None else np.broadcast_to(
        beside(views.memory(a), b), positions.shape).reshape(-1)
    if ufunc is np.multiply and np.result_type(views.memory(a), plain(b)).kind == "c":
        for k, position in enumerate(flat.tolist()):
            index = np.unravel_index(position, shape)
            a[index] = a[index] * values[k]
        return
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(flat)) - np.repeat(first, np.diff(np.r_[first, len(flat)]))
    for r in range(rank.max() + 1 if len(rank) else 0):
        chosen = rank == r
        index = np.unravel_index(flat[chosen], shape)
        a[index] = ufunc(a[index]) if b is None else ufunc(a[index], values[chosen])



def _list_tangent(values, tangents):
    """The tangent of the array NumPy makes of the list ``values``, from its items' tangents
    (lists of them for nested lists; None: zeros)."""
    if type(values) not in (list, tuple):
        return np.zeros(np.shape(values)) if tangents is None else tangents
    return np.array([_list_tangent(v, None if tangents is None else t)
                     for v, t in zip(values, tangents if tangents is not None
                                     else [None] * len(values), strict=True)])


def _zero(tangent):
    """Whether ``tangent`` is zero, and no enclosing differentiation follows it (as
    ``Dual.constant``): its values are constants along the direction, as those of an argument
    jvp was given no tangent for."""
    if wrapped(tangent):
        tangent = tangent.plain_value()
    return isinstance(tangent, np.ndarray) and not tangent.any()


def _same_write_on_tangents(call, name, values_at, accumulates=False):
    """Forward mode's rule of ``call``, which writes into its first argument values (argument
    ``values_at``) that enter linearly, at given indices or under a mask: the same write into
    the target's tangent, with the values' tangent (zeros where they carry none). An
    accumulating write (``ufunc.at``) of constants leaves the tangent as it was."""
    def jvp(tangents, *args, **kwargs):
        if any(t is not None for i, t in enumerate(tangents) if i not in (0, values_at)):
            raise UnsupportedOperationError(
                f"{name}: only its target and values may carry tangents.")
        values_tangent = tangents[values_at] if values_at < len(tangents) else None
        if tangents[0] is None and values_tangent is not None and (
                _zero(values_tangent) or np.asarray(args[0]).dtype.kind in "iub"):
            # constants, or a cast to integers (no derivative), into an array the jvp does
            # not follow
            values_tangent = None
        if tangents[0] is None and values_tangent is not None:
            raise UntracedWriteError(
                f"{name}: a value with a tangent was written into an array that carries none "
                "(one created before jvp started, or by an enclosing differentiation), so its "
                "tangent would be lost. Allocate the destination inside the function jvp "
                "differentiates: arrays created there (np.zeros, np.empty, np.array, ...) "
                "carry tangents.")
        try:
            from_user_line(call, *args, **kwargs)  # (its ComplexWarning at the user's line)
        except Exception as error:
            # NumPy may raise after writing (np.put meeting an index out of bounds after those
            # before it; a ufunc.at's FloatingPointError): f may catch it and go on, so the
            # same write is made on the tangent, then the error raised
            raised = error
        else:
            raised = None
        if tangents[0] is None or (values_tangent is None and accumulates):
            if raised is not None:
                raise raised
            return None, None
        if type(values_tangent) in (list, tuple):  # values given as a list: its array's
            values_tangent = _list_tangent(args[values_at], values_tangent)
        moved = [tangents[0], *args[1:]]
        if values_at < len(moved):  # (zeros of the target's type, an integer field's too, of
            # the values' shape, which NumPy's checks read: np.place's of no values raises)
            moved[values_at] = np.zeros(np.shape(args[values_at]), tangents[0].dtype) \
                if values_tangent is None \
                else values_tangent if raised is not None \
                else tangent_into(values_tangent, tangents[0])  # (the write NumPy made, once)
        if raised is None:
            call(*moved, **kwargs)
            return None, None
        try:
            call(*moved, **kwargs)
        except type(raised):
            pass
        raise raised

    return jvp


for _func, _values_at in ((np.put, 2), (np.place, 2), (np.putmask, 2), (np.put_along_axis, 2),
                          (np.copyto, 1), (np.fill_diagonal, 1)):
    defjvp(_func)(_same_write_on_tangents(_func, f"np.{_func.__name__}", _values_at))


def _checked_at(ufunc, a, indices, b):
    """``ufunc.at(a, indices, b)`` once ``refuse_misread_at`` has passed it."""
    refuse_misread_at(ufunc, a, indices, b)
    ufunc_at(ufunc, a, indices, b)


for _ufunc in (np.add, np.subtract):
    defjvp((_ufunc, "at"))(_same_write_on_tangents(functools.partial(_checked_at, _ufunc),
                                                   f"np.{_ufunc.__name__}.at", 2,
                                                   accumulates=True))
del _func, _values_at, _ufunc


@defbatched(np.copyto)
def copyto_batched(tangents, dst, src, casting="same_kind", where=True):
    """``np.copyto`` of real floats without ``where=``, into a target carrying tangents: the
    same copy of each direction's tangent (NumPy copies an overlapping source first, for the
    tangents as for the values: the same bits). What else ``jvp`` refuses or handles (a
    target without tangents, a mask) is not covered."""
    src_tangent = tangents[1] if len(tangents) > 1 else None
    if (where is not True or tangents[0] is None or any(t is not None for t in tangents[2:])
            or type(dst) is not np.ndarray or dst.dtype.kind != "f"
            or np.result_type(src).kind not in "fiub" or np.ndim(src) > dst.ndim
            or type(src_tangent) in (list, tuple)):
        return NotImplemented
    np.copyto(dst, src, casting=casting)
    if src_tangent is None:
        tangents[0][...] = 0.0
    else:
        np.copyto(tangents[0], batch_aligned(src_tangent, dst.ndim), casting=casting)
    return None, None


def _accumulate_batched(ufunc):
    """``ufunc.at(a, indices, b)`` (add, subtract) of real floats at one integer array (or list)
    of indices: the same accumulation into each direction's tangent, the batch axis taken
    whole. NumPy adds the repeated indices of each element in their order, for each direction
    as for one: the same bits. Other keys (tuples, masks, slices) are not covered."""

    def rule(tangents, a, indices, b):
        refuse_misread_at(ufunc, a, indices, b)
        if (tangents[1] is not None or type(a) is not np.ndarray or a.dtype.kind != "f"
                or np.iscomplexobj(b) or a.ndim == 0
                or not ((type(indices) is np.ndarray and indices.dtype.kind in "iu")
                        or (type(indices) is list and indices
                            and all(type(i) is int for i in indices)))
                or (tangents[0] is None and tangents[2] is not None)):
            return NotImplemented
        ufunc_at(ufunc, a, indices, b)
        if tangents[0] is None or tangents[2] is None:
            return None, None
        region = np.ndim(indices) + a.ndim - 1
        if np.ndim(tangents[2]) - 1 > region:
            return NotImplemented
        ufunc_at(ufunc, tangents[0], (slice(None), np.asarray(indices)),
                 batch_aligned(tangents[2], region))
        return None, None

    rule.__name__ = rule.__qualname__ = f"{ufunc.__name__}_at_batched"
    defbatched((ufunc, "at"))(rule)


_accumulate_batched(np.add)
_accumulate_batched(np.subtract)


# ----------------------------------------------------------------------------------------------
# Writes that copy elements: the engine's copy_into follows what NumPy does where the source
# overlaps the target or an index repeats


def as_array(values):
    """The values a write copies: a list or tuple holding traced values as the array NumPy
    makes of it (``y.put(i, [a, b])``), which the engines follow; NumPy would convert it."""
    return lists_as_arrays((values,))[0]


@definplace(np.put)
def put(a, ind, v, mode="raise"):
    ind, v = plain(ind), as_array(v)
    if writes_into("np.put", a, v):
        copy_into(np.put, a, v, lambda t, s: np.put(t, ind, s, mode=mode),
                  {"ind": ind, "mode": mode})
    else:
        np.put(a, ind, plain(v), mode=mode)


@definplace(np.place)
def place(arr, mask, vals):
    mask, vals = plain(mask), as_array(vals)
    if writes_into("np.place", arr, vals):
        copy_into(np.place, arr, vals, lambda t, s: np.place(t, mask, s), {"mask": mask})
    else:
        np.place(arr, mask, plain(vals))


@definplace(np.putmask)
def putmask(a, mask, values):
    mask, values = plain(mask), as_array(values)
    if writes_into("np.putmask", a, values):
        copy_into(np.putmask, a, values, lambda t, s: np.putmask(t, mask, s), {"mask": mask})
    else:
        np.putmask(a, mask, plain(values))


@definplace(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    indices, values = plain(indices), as_array(values)
    if writes_into("np.put_along_axis", arr, values):
        copy_into(np.put_along_axis, arr, values,
                  lambda t, s: np.put_along_axis(t, indices, s, axis),
                  {"indices": indices, "axis": axis})
    else:
        np.put_along_axis(arr, indices, plain(values), axis)


@definplace(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    src = as_array(src)
    if not writes_into("np.copyto", dst, src):
        return np.copyto(dst, plain(src), casting=casting, where=where)
    # NumPy's casting check, and its error, before anything is written (the assignments below
    # cast as assignment does, with its ComplexWarning): on an empty destination, a Python or
    # NumPy scalar as itself
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        np.copyto(np.empty(0, dst.dtype), src if isinstance(src, (int, float, complex, np.generic))
                  else np.empty(0, src.dtype if hasattr(src, "dtype") else np.asarray(src).dtype),
                  casting=casting)
    if overlaps(dst, src):
        copy_into(np.copyto, dst, src, lambda t, s: np.copyto(t, s, casting=casting, where=where),
                  {"casting": casting, "where": where})
    elif where is True:
        dst[...] = src
    else:
        # Elements outside `where` keep their value: a select between the new and the old.
        dst[...] = np.where(where, src, dst)
    return None


# Complex values (facet complex): selections, sorts (in NumPy's order of complex numbers)
# and differences are linear with real coefficients, and interpolation's formulas hold for
# complex values; the in-place handlers write through the core's assignment, which takes them.
holomorphic(np.take, np.take_along_axis, np.compress, np.extract, np.sort, np.partition,
            np.choose, np.select, np.diff, np.interp)
# The set functions gather their values from the inputs (in NumPy's order of complex numbers,
# the same bits found as for reals) and np.isin is a decision on the values: no formula in them
# is written for reals.
holomorphic(np.unique, np.unique_values, np.unique_counts, np.unique_inverse, np.unique_all,
            np.isin, np.union1d, np.setxor1d, np.setdiff1d, np.intersect1d)
complex_aware((np.add, "at"), (np.subtract, "at"), np.put, np.place, np.putmask, np.put_along_axis,
              np.copyto)


# Counting with weights: np.bincount and np.histogram are linear in their weights; the counts
# of differentiated samples are constants, as those of any function whose output is piecewise
# constant. Which bin each sample falls in is decided anew on every call (``histogram_counts``,
# an operation of its own that a replay runs again), and the edges NumPy computes from the
# samples are differentiated through the samples' min and max (``histogram_bin_edges``).


@defcomposite(np.bincount)
def bincount(x, weights=None, minlength=0):
    """Each weight added into its bin, in order, as NumPy adds them (the same bits)."""
    counts = np.bincount(views.memory(x), minlength=minlength)  # NumPy's checks, and the size
    if weights is None or not wrapped(weights):
        return np.bincount(views.memory(x), views.memory(weights), minlength)
    if np.shape(weights) != np.shape(x):
        raise ValueError("The weights and list don't have the same length.")
    total = np.zeros_like(weights, dtype=np.float64, shape=counts.shape)
    ufunc_at(np.add, total, views.memory(x), weights)
    return total


def _sequence_as_array(bins):
    """A list or tuple of edges as the array NumPy makes of it (stacked, if it holds traced
    values)."""
    if type(bins) in (list, tuple):
        bins = as_array(bins)
        return np.asarray(bins) if type(bins) in (list, tuple) else bins
    return bins


@defcomposite(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    given, bins = bins, _sequence_as_array(bins)
    counts = histogram_counts(weights, a, bins, range)
    edges = histogram_bin_edges(a, given, range, weights)
    if density:  # as NumPy computes it
        return counts / np.diff(edges).astype(float) / counts.sum(), edges
    return counts, edges


@defcomposite(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """NumPy's edges: ``bins`` itself where it is a sequence of edges; else
    ``np.linspace(first, last, n + 1)``, whose ends NumPy takes from ``range`` or, without
    one, from the samples' min and max (widened by 0.5 each way where they are equal), through
    which they are differentiated; a string ``bins`` decides ``n`` from the samples."""
    given, bins = bins, _sequence_as_array(bins)
    edges, n = plain_bin_edges(a, bins, range, weights)  # NumPy's checks, errors
    if not isinstance(bins, str) and np.ndim(bins) == 1:
        if type(bins) is np.ndarray and type(given) in (list, tuple):  # (np.asarray of plain
            return allocate(bins, (np.asarray, (given,), {}))  # numbers: a replay makes it)
        return bins  # as NumPy returns it (np.asarray of it)
    if isinstance(bins, str):
        int(n)  # decided by the samples: a replay checks it again
    if range is not None:
        if not any(wrapped(r) for r in range):
            return edges  # a constant range
        first, last = range  # differentiated ends
    elif not wrapped(a) or np.size(a) == 0 or a.dtype.kind != "f":
        return edges  # from samples without a gradient (integers)
    else:
        first, last = np.min(a), np.max(a)
    if first == last:  # NumPy's expansion of an empty range
        first, last = first - 0.5, last + 0.5
    return np.linspace(first, last, edges.size, endpoint=True, dtype=edges.dtype)


@adjoint
def plain_bin_edges(a, bins, range, weights):
    """``np.histogram_bin_edges``, and the number of bins, as constants of the samples (a
    copy of ``bins`` where NumPy returns it as it is: a constant never aliases an array)."""
    edges = np.array(np.histogram_bin_edges(a, bins, range, weights))
    return edges, np.intp(edges.size - 1)


@plain_bin_edges.rule
@zero_derivative("a", "bins", "range", "weights")  # (constants: the edges' derivative is the composition's)
def _plain_bin_edges_rule(a, bins, range, weights):
    return plain_bin_edges(a, bins, range, weights), lambda dy: (None, None, None, None)


@plain_bin_edges.jvp_rule
def _plain_bin_edges_jvp(tangents, a, bins, range, weights):
    return plain_bin_edges(a, bins, range, weights), None


@adjoint
def histogram_counts(weights, a, bins, range):
    """``np.histogram(a, bins, range, weights=weights)[0]``: NumPy's own counts or sums (an
    algorithm of its own for uneven bins), each weight's derivative its bin's; the bins decided
    from the samples on every call."""
    return np.histogram(a, bins, range, weights=weights)[0]


def _bins_of(a, bins, range, weights):
    """NumPy's counts, and the bin of each sample (-1 where it falls outside the edges): the
    last bin holds its right edge, as NumPy's does."""
    counts, edges = np.histogram(a, bins, range, weights=weights)
    a = np.ravel(a)
    where = np.searchsorted(edges, a, side="right") - 1
    where[a == edges[-1]] = edges.size - 2
    where[~((a >= edges[0]) & (a <= edges[-1]))] = -1
    return counts, where


@histogram_counts.rule
@zero_derivative("a", "bins", "range")  # (counts of bins: piecewise constant in the samples)
def _histogram_counts_rule(weights, a, bins, range):
    if weights is None:  # counts: constants
        return histogram_counts(weights, a, bins, range), lambda dy: (None, None, None, None)
    counts, where = _bins_of(a, bins, range, weights)
    inside = where >= 0

    def back(dy):
        return np.where(inside, dy[np.maximum(where, 0)], 0.0).reshape(np.shape(weights)), \
            None, None, None

    return counts, back


@histogram_counts.jvp_rule
def _histogram_counts_jvp(tangents, weights, a, bins, range):
    counts = histogram_counts(weights, a, bins, range)  # an enclosing reverse pass records it
    if tangents[0] is None:
        return counts, None
    _, where = _bins_of(views.memory(a), views.memory(bins), range, views.memory(weights))
    inside = where >= 0
    return counts, np.bincount(where[inside], weights=np.ravel(tangents[0])[inside],
                               minlength=counts.size)


# np.histogramdd and np.histogram2d: NumPy's counts of the samples (decisions, taken anew on
# every call), linear in the weights; the edges NumPy computes from differentiated samples
# (no range, a number of bins) differentiated through their min and max, as np.histogram's.


def _plain_value(x, what):
    """``x`` as its plain value where it carries no derivative (a constant the function made,
    read as a setting: a replay recording the call is refused, as its program would keep this
    call's edges); a differentiated one is refused by name."""
    if not wrapped(x):
        return x
    if carries_derivative(x):
        raise UnsupportedOperationError(
            f"np.histogramdd (np.histogram2d) with differentiated {what}: mutad differentiates "
            "the histogram in its weights (and its edges in the samples, where NumPy computes "
            "them from the samples' min and max); pass the bin edges and range as constants "
            "(mutad.stop_gradient).")
    return settled(x, f"np.histogramdd (np.histogram2d) with {what} the program computes")


def _plain_bins(bins, D):
    if isinstance(bins, str):
        return bins
    if type(bins) in (list, tuple):
        return [b if isinstance(b, str) else _plain_value(b, "bins") for b in bins]
    return _plain_value(bins, "bins")


@defcomposite(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """NumPy's ``histogramdd``: its counts (or sums of weights) bit for bit, each weight's
    derivative its bin's; NumPy's steps for ``density``."""
    if not (hasattr(sample, "shape") and np.ndim(sample) == 2):
        if type(sample) in (list, tuple) and any(wrapped(x) for x in sample):
            sample = np.stack(sample)
        else:
            sample = np.atleast_2d(sample)
        sample = sample.T
    D = np.shape(sample)[1]
    if range is not None:
        range = [r if r is None else tuple(_plain_value(v, "range") for v in r) for r in range]
    bins = _plain_bins(bins, D)
    plain_sample = memory(sample) if wrapped(sample) else sample
    hist = histogramdd_counts(weights, sample, bins, range)
    edges = list(_histogramdd_edges(plain_sample, bins, range))
    scalar_bins = isinstance(bins, str) or (type(bins) not in (list, tuple)
                                            and np.ndim(bins) == 0)
    # Edges NumPy takes from the sample's extremes are computed again of the traced sample, a
    # constant the program computes too (an integer sample, a stop_gradient's), whose
    # extremes change from call to call as well: the steps a replay runs again, and the
    # decision on them (a tie) guarded. Those of the plain values would be the
    # recorded call's.
    follows = wrapped(sample) and np.asarray(plain_sample).dtype.kind in "fiu"
    for i in builtins_range(D):
        bins_i = bins if scalar_bins else bins[i]
        if (np.ndim(bins_i) == 0 and not isinstance(bins_i, str)
                and (range is None or range[i] is None) and np.size(sample)):
            if not follows:
                if wrapped(sample):
                    settled(sample, "np.histogramdd's edges of a sample the program computes")
                continue
            first, last = np.min(sample[:, i]), np.max(sample[:, i])
            if first == last:
                first, last = first - 0.5, last + 0.5
            edges[i] = np.linspace(first, last, edges[i].size)
    if density:
        dedges = [np.diff(e) for e in edges]
        total = hist.sum()
        for i in builtins_range(D):
            shape = np.ones(D, int)
            shape[i] = np.size(edges[i]) - 1
            hist = hist / dedges[i].reshape(shape)
        hist /= total
    return hist, edges


builtins_range = range


def _histogramdd_edges(sample, bins, range):
    """NumPy's edges of the plain samples (and its checks and errors)."""
    return np.histogramdd(sample, bins, range)[1]


@defcomposite(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """NumPy's ``histogram2d``: its steps, on ``histogramdd``."""
    if len(x) != len(y):
        raise ValueError('x and y must have the same length.')
    try:
        N = len(bins)
    except TypeError:
        N = 1
    if N not in {1, 2}:
        xedges = yedges = np.asarray(_plain_value(bins, "bin edges"))
        bins = [xedges, yedges]
    hist, edges = np.histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


@adjoint
def histogramdd_counts(weights, sample, bins, range):
    """``np.histogramdd(sample, bins, range, weights=weights)[0]``: NumPy's own."""
    return np.histogramdd(sample, bins, range, weights=weights)[0]


def _cells_of(sample, bins, range):
    """The cell of each sample in the histogram's flat array (-1 outside), by NumPy's steps:
    searchsorted on each axis's edges, the last edge in the last bin."""
    edges = np.histogramdd(sample, bins, range)[1]
    sample = np.asarray(sample)
    counts = tuple(np.searchsorted(edges[i], sample[:, i], side="right")
                   for i in builtins_range(len(edges)))
    nbin = np.array([len(e) + 1 for e in edges])
    inside = np.ones(sample.shape[0], bool)
    for i, c in enumerate(counts):
        c[sample[:, i] == edges[i][-1]] -= 1
        inside &= (c >= 1) & (c <= nbin[i] - 2)
    cells = np.full(sample.shape[0], -1, np.intp)
    if inside.any():
        cells[inside] = np.ravel_multi_index(tuple(c[inside] - 1 for c in counts), nbin - 2)
    return cells, int(np.prod(nbin - 2))


@histogramdd_counts.rule
@zero_derivative("sample", "bins", "range")  # (piecewise constant in the samples)
def _histogramdd_counts_rule(weights, sample, bins, range):
    hist = histogramdd_counts(weights, sample, bins, range)
    if weights is None:
        return hist, lambda dy: (None, None, None, None)
    cells, _ = _cells_of(sample, bins, range)
    inside = cells >= 0

    def back(dy):
        flat = np.ravel(dy)
        return (np.where(inside, flat[np.maximum(cells, 0)], 0.0).reshape(np.shape(weights)),
                None, None, None)

    return hist, back


@histogramdd_counts.jvp_rule
def _histogramdd_counts_jvp(tangents, weights, sample, bins, range):
    hist = histogramdd_counts(weights, sample, bins, range)
    if tangents[0] is None:
        return hist, None
    cells, size = _cells_of(memory(sample) if wrapped(sample) else sample, bins, range)
    inside = cells >= 0
    return hist, np.bincount(cells[inside], weights=np.ravel(tangents[0])[inside],
                             minlength=size).reshape(np.shape(hist))

