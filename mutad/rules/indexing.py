"""Indexing: ``x[key]`` and ``x[key] = value``, and the gathers and scatters beyond them: take,
sort, choose, diff, interp; ufunc.at, put, copyto.

Basic indexing gives a view, which records nothing; assigning to one is the core's in-place
path (``np.positive`` into the view). Advanced indexing gathers (its pullback adds the
cotangent back where each element came from, repeated indices each adding their share) and
scatters (the written region is checkpointed).

A gather copies elements of its input, so its pullback adds each output's cotangent back where
the element came from (``gather_cotangent``, which also sums repeated indices).
``np.sort`` and ``np.partition`` take their values (bits and memory layout included) from
NumPy's own functions, and their gradient through a permutation that maps the input onto those
values (``_matching``). A gather is linear in what it gathers from, so its forward rule gathers the tangent the same way.

Functions that write into an argument are in-place handlers. ``np.add.at`` / ``np.subtract.at``
record themselves: their inverse is the opposite ``.at``, safe when the added values do not
overlap the target, otherwise the written region is checkpointed (NumPy reads overlapping
values as they were before the call).

Writes that copy elements (``x[key] = v``, ``copyto``, ``put``, ``place``, ``putmask``,
``put_along_axis``) compute what NumPy computes, which is not always "as if the source were
copied first": assigning ``x[0:3]`` to ``x[::2]`` reads ``x[2]`` after writing it, and of
repeated indices one write wins. Where the source overlaps the target or an index repeats, the
same NumPy call is first run on integer labels laid out in memory as the operands, which says
where each new element came from (``_provenance``); the write is then a gather whose pullback
adds each new element's cotangent to its origin, and it is checkpointed.
"""

import operator

import numpy as np

from ..arraylike import untraced_write
from ..errors import MutadError, UnsupportedOperationError
from ..registry import definplace, deflinear, defjvp, defrule
from ..shadows import overlapping
from ..tracing import (Traced, active, apply_ufunc, carries, check_destination, freeze, fresh,
                       innermost, keep, locate, plain, unbroadcast, view_of)
from ..views import address, byte_span, may_overlap, memory, same_region, views, wrapped
from ._helpers import accumulator, gather_cotangent


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


@defrule(np.interp, leading=5)
def interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:  # left and right are ignored, as NumPy ignores them
        x_reduced, xp_reduced, fp_reduced, order = _periodic(x, xp, fp, period)
        y, reduced_back = interp(x_reduced, xp_reduced, fp_reduced)

        def periodic_back(dy):
            dx, dxp, dfp = reduced_back(dy)[:3]
            return dx, _unreduced(dxp, order), _unreduced(dfp, order), None, None

        return y, periodic_back
    y = np.interp(x, xp, fp, left, right)
    if not hasattr(x, "shape"):  # a Python float or list: plain, so converting it is safe
        x = np.asarray(x)
    x_shape, xp_shape, fp_shape = np.shape(x), np.shape(xp), np.shape(fp)
    below = x < xp[0]
    above = x > xp[-1]
    inside = ~below & ~above
    # The interval of each x is found now: back may see x and xp restored up to rounding.
    interval = None
    if xp_shape[0] > 1:
        interval = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, xp_shape[0] - 2)

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
            start = np.take(xp, i)
            h = np.take(xp, i + 1) - start
            t = (x - start) / h
            s = (np.take(fp, i + 1) - np.take(fp, i)) / h
            inner = np.where(inside, dy, 0.0)
            dx = inner * s
            dfp = accumulator(fp_shape, float, inner, t, dleft, dright)
            dxp = accumulator(xp_shape, float, inner, s, t)
            np.add.at(dfp, i, inner * (1.0 - t))
            np.add.at(dfp, i + 1, inner * t)
            np.add.at(dxp, i, inner * s * (t - 1.0))
            np.add.at(dxp, i + 1, -inner * s * t)
        else:
            dx = np.zeros(x_shape)
            dxp = np.zeros(xp_shape)
            dfp = accumulator(fp_shape, float, dy)
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
    y = np.interp(x, xp, fp, left, right)
    if all(t is None for t in tangents):
        return y, None
    if not hasattr(x, "shape"):  # a Python float or list: plain, so converting it is safe
        x = np.asarray(x)
    dx, dxp, dfp, dleft, dright = (tuple(tangents) + (None,) * 5)[:5]
    below = x < xp[0]
    above = x > xp[-1]
    terms = []
    if np.size(xp) > 1:
        # The partial derivatives of the reverse rule: on [xp_i, xp_(i+1)], with slope s and
        # t = (x - xp_i) / h,
        # dy = s dx + (1 - t) dfp_i + t dfp_(i+1) + s (t - 1) dxp_i - s t dxp_(i+1).
        i = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, np.size(xp) - 2)
        start = np.take(xp, i)
        h = np.take(xp, i + 1) - start
        t = (x - start) / h
        s = (np.take(fp, i + 1) - np.take(fp, i)) / h
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
# In-place writes


def _require_traced_target(call, target, *values):
    """Refuse to write a traced value into an array mutad does not trace."""
    tape = innermost((target, *values))
    if carries(values, tape):
        if type(target) is not Traced or target.tape is not tape:
            raise untraced_write(call)
        target.buffer.constant = False  # a constant written with traced values is traced
    return type(target) is Traced


def _overlaps(target, value, region=None):
    """Whether the memory of the array ``value`` may overlap ``region`` of ``target`` (all of it
    by default): traced by this differentiation, by an enclosing one (whose arrays a nested
    one's arguments may be) or by none."""
    return ((isinstance(value, np.ndarray) or wrapped(value))
            and may_overlap(value, target.value if region is None else region))


def _unbuffered(ufunc, sign):
    """The handler of ``ufunc.at(a, indices, b)`` (``a[indices] ±= b``, repeated indices each
    adding their share). The touched elements are saved, never restored by ``opposite.at``:
    a scatter touches few elements, and subtracting back loses those an addition absorbed."""

    def handler(a, indices, b=None):
        call = f"np.{ufunc.__name__}.at"
        if not _require_traced_target(call, a, b):
            return ufunc.at(a, plain(indices), plain(b))
        check_destination(a, call)
        tape = a.tape
        key = plain(indices)
        values = b.value if type(b) is Traced and b.tape is tape else b
        target = a.value

        def save():
            if wrapped(target):
                # Nested reverse mode: the target is traced by an outer differentiation, which
                # refuses an assignment through repeated indices; a mask names each place once.
                written = np.zeros(target.shape, bool)
                written[key] = True
                saved_once = target[written]

                def copy_back_once():
                    target[written] = saved_once

                return copy_back_once
            saved = np.copy(target[key])

            def copy_back():
                target[key] = saved  # repeated indices all get the same original value

            return copy_back

        undo = tape.undo_for(None, None, save)
        tape.before_write(a.buffer.key)
        ufunc.at(target, key, values)
        freeze(tape, key)
        keep(tape, b, values)
        a_place, b_place = locate(a, tape), locate(b, tape)

        def back(shadows):
            # a_after = a_before ± scatter(b): a's cotangent passes through unchanged, and b's
            # is the gather of it (copied before b's shadow, which may be a view of a's, grows).
            da = shadows.get(a_place)
            undo()
            if da is not None and b_place is not None:
                gathered = np.copy(da[key])
                if sign < 0:
                    np.negative(gathered, out=gathered)
                shadows.add(b_place, unbroadcast(gathered, b_place.shape), owned=True)

        tape.record(back)

    return handler


definplace((np.add, "at"))(_unbuffered(np.add, +1))
definplace((np.subtract, "at"))(_unbuffered(np.subtract, -1))


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
    scratch = np.full(total, -1, np.int64)
    twins = []
    for a, (low, _), start in zip((target, source), spans, starts, strict=True):
        first = start + (address(a) - low) // a.itemsize
        twins.append(np.ndarray(a.shape, scratch.dtype, scratch, first * scratch.itemsize,
                                tuple(s // a.itemsize * scratch.itemsize for s in a.strides)))
    twins[1][...] = np.arange(source.size).reshape(source.shape)
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
        return a.tobytes() == b.tobytes()
    bits = np.dtype(f"u{a.itemsize}")
    return np.array_equal(a.view(bits), b.view(bits))


def _taken(shadows, place, key):
    """The cotangent of the elements ``key`` of ``place`` overwrote, zeroed there (their old
    values had no path to the output past the write); None if no gradient reached the place."""
    shadow = shadows.get(place)
    if shadow is None:
        return None
    dy = shadow[key]
    shadow[key] = 0
    return dy


def _copying_write(target, value, write):
    """``write(target, value)``, a NumPy call that copies elements of ``value`` into the traced
    ``target`` (assignment, copyto, put, place, putmask, put_along_axis), recorded as the gather
    NumPy performed: each changed element takes the cotangent back to the element of ``value``
    it came from. The changed elements are checkpointed: an inverse would read its own target."""
    tape = active(target.tape)
    here = type(value) is Traced and value.tape is tape
    source = value.value if here else value
    layout = memory(source) if isinstance(source, np.ndarray) or wrapped(source) \
        else np.asarray(source)
    changed, origins = _provenance(write, memory(target.value), layout)
    checked = not (wrapped(target.value) or wrapped(source))
    if checked:
        expected = np.take(layout, origins)  # before the write, which may overwrite the source

    def checkpoint():
        saved = target.value[changed]  # a boolean index: a copy

        def copy_back():
            target.value[changed] = saved

        return copy_back

    undo = tape.undo_for(None, None, checkpoint, target.buffer.key)
    tape.before_write(target.buffer.key)
    write(target.value, source)
    if checked:
        written = target.value[changed]
        if not _same_bits(written, expected.astype(written.dtype, copy=False)):
            raise MutadError(
                "NumPy wrote other values than it wrote into integer labels laid out as the "
                "operands, so mutad cannot tell which elements it copied; copy the source first "
                "(x[key] = v.copy()) and remove repeated indices (np.unique).")
    if not origins.size:
        return
    shape = layout.shape
    target_place, source_place = locate(target, tape), locate(value, tape)
    if source_place is None:
        origins = None  # a constant: nothing to keep for the replay
    elif layout.size <= np.iinfo(np.int32).max:
        origins = origins.astype(np.int32)  # kept until the replay: half the memory

    def back(shadows):
        dy = _taken(shadows, target_place, changed)
        undo()
        if dy is not None and source_place is not None:
            # Several elements may come from one: each adds its share.
            np.add.at(_indexable(shadows.of(source_place, like=dy)), _elements(origins, shape),
                      dy)

    tape.record(back)


@definplace(np.put)
def put(a, ind, v, mode="raise"):
    ind = plain(ind)
    if _require_traced_target("np.put", a, v):
        _copying_write(a, v, lambda t, s: np.put(t, ind, s, mode=mode))
    else:
        np.put(a, ind, plain(v), mode=mode)


@definplace(np.place)
def place(arr, mask, vals):
    mask = plain(mask)
    if _require_traced_target("np.place", arr, vals):
        _copying_write(arr, vals, lambda t, s: np.place(t, mask, s))
    else:
        np.place(arr, mask, plain(vals))


@definplace(np.putmask)
def putmask(a, mask, values):
    mask = plain(mask)
    if _require_traced_target("np.putmask", a, values):
        _copying_write(a, values, lambda t, s: np.putmask(t, mask, s))
    else:
        np.putmask(a, mask, plain(values))


@definplace(np.put_along_axis)
def put_along_axis(arr, indices, values, axis):
    indices = plain(indices)
    if _require_traced_target("np.put_along_axis", arr, values):
        _copying_write(arr, values, lambda t, s: np.put_along_axis(t, indices, s, axis))
    else:
        np.put_along_axis(arr, indices, plain(values), axis)


@definplace(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    if not _require_traced_target("np.copyto", dst, src):
        return np.copyto(dst, plain(src), casting=casting, where=where)
    if _overlaps(dst, src):
        _copying_write(dst, src, lambda t, s: np.copyto(t, s, casting=casting, where=where))
    elif where is True:
        dst[...] = src
    else:
        # Elements outside `where` keep their value: a select between the new and the old.
        dst[...] = np.where(where, src, dst)
    return None


# ----------------------------------------------------------------------------------------------
# x[key] and x[key] = value: views, gathers and scatters


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


@definplace(operator.getitem)
def getitem(x, key):
    """``x[key]``: a view for basic indexing (no record), else a gather."""
    tape = active(x.tape)
    key = plain(key)
    y = x.value[key]
    if views(y, x.value):
        return view_of(x, y, tape)
    yt = fresh(y, tape)
    buffer = yt.buffer
    source = locate(x, tape)
    may_repeat = _has_integer_array(key)
    freeze(tape, key)

    def back(shadows):
        dy = shadows.pop(buffer)
        if dy is None:
            return
        if may_repeat or overlapping(source):
            shadows.add_at(source, key, dy)  # repeated indices each add their share
        else:
            region = shadows.of(source, like=dy)
            region[key] += dy

    tape.record(back)
    return yt


@definplace(operator.setitem)
def setitem(x, key, value):
    """``x[key] = value``: the core's in-place path on the view ``x[key]``, or a scatter; NumPy's
    own assignment where the value overlaps its target or an index repeats."""
    tape = active(x.tape)
    _require_traced_target("x[key] = value", x, value)
    check_destination(x, "x[key] = value")
    key = plain(key)
    region = x.value[key]
    if views(region, x.value) or getattr(region, "ndim", 0) == 0:
        element = not views(region, x.value)
        if element:  # x[i] = v with a scalar element: a 0-d view
            region = x.value[(key if type(key) is tuple else (key,)) + (Ellipsis,)]
        else:
            value = _without_leading_ones(value, region.ndim)
        if type(value) is Traced and value.tape is tape and same_region(value.value, region):
            return  # `x[k] += v` ends by assigning the updated view onto itself: nothing to do
        if not _overlaps(x, value, region):
            apply_ufunc(np.positive, (value,), out=view_of(x, region, tape))
        elif element:  # NumPy's own rules for assigning one element
            _copying_write(x, value, lambda t, v: operator.setitem(t, key, v))
        else:  # x[key] = v is view[...] = v: only the view's memory is asked about
            _copying_write(view_of(x, region, tape), value,
                           lambda t, v: operator.setitem(t, Ellipsis, v))
    elif _overlaps(x, value) or _repeats(x.value, key):
        _copying_write(x, value, lambda t, v: operator.setitem(t, key, v))
    else:
        _scatter(tape, x, key, value, saved=region)


def _without_leading_ones(value, ndim):
    """``value`` without the leading length-1 axes that NumPy's assignment drops to fit a
    target of ``ndim`` axes (``x[0, ...] = v[1:2]``), which a ufunc's ``out=`` would refuse."""
    shape = value.shape if hasattr(value, "shape") else np.shape(value)
    drop = 0
    while len(shape) - drop > ndim and shape[drop] == 1:
        drop += 1
    return np.reshape(value, shape[drop:]) if drop else value


def _scatter(tape, x, key, value, saved):
    """``x[key] = value`` with an advanced index naming each element once, its value apart from
    ``x``: checkpoint the region, write, record."""
    here = type(value) is Traced and value.tape is tape
    tape.before_write(x.buffer.key)
    target = x.value
    target[key] = value.value if here else value
    freeze(tape, key)
    target_place, value_place = locate(x, tape), locate(value, tape)

    def back(shadows):
        dy = _taken(shadows, target_place, key)
        target[key] = saved
        if dy is not None and value_place is not None:
            shadows.add(value_place, unbroadcast(dy, value_place.shape), owned=True)

    tape.record(back)
