"""Shape functions: rearranging, joining, splitting, padding, selecting.

Most are linear maps of their first argument whose transpose is one line, so they sit in a
table. When NumPy returns a view (reshape, transpose, flip, split, ...) the core records nothing
and the gradient flows through the shared shadow; the rule's ``back`` serves the calls where
NumPy has to copy. Functions with several differentiable arguments (joins, ``where``, ``clip``)
are named rules below the table.

Forward rules: a function linear in its first argument has the function of the tangent as its
tangent; joins and selections are linear in all their array operands jointly, constants
contributing zero tangents (``deflinear`` for both).
"""

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_index
from numpy.lib.stride_tricks import sliding_window_view

from ..core.allocation import allocate, lists_as_arrays
from ..core import devices
from ..core.devices import is_device, ufunc_at
from ..core.errors import UnsupportedOperationError, UntracedWriteError
from ..core.levels import ACTIVE
from ..core.registry import (ZERO_TANGENT, complex_aware, defbatched, defcomposite, definplace, defjoin,
                             defjvp, deflinear, defroute, defrule, holomorphic, recomputable)
from ..core.views import address, memory, owner, owner_view, wrapped, writeable
from ._helpers import (Template, along, batch_aligned, batch_axes, batch_or_zeros, batch_size, gather_cotangent,
                       unbroadcast)


def linear_map(func, transpose):
    """Declare ``func``, linear in its first argument ``a``, whose transpose is
    ``transpose(dy, a, *rest, **kwargs)``, called with ``func``'s own arguments except that
    ``a`` is a :class:`Template` (a linear map's transpose needs no values of ``a``). A
    function that hands ``a`` back unchanged (``np.real`` of a real array, ``np.squeeze`` of
    one without axes of length 1) gives the traced argument itself, as NumPy gives ``a``
    (``np.real(a) is a``): nothing is recorded (``operations.apply_function``)."""

    def rule(a, *rest, **kwargs):
        template = Template(a)
        y = func(a, *rest, **kwargs)
        return y, lambda dy: (transpose(dy, template, *rest, **kwargs),)

    rule.__name__ = rule.__qualname__ = func.__name__
    rule.plain = func  # its value is func's: a replay that needs no back calls func alone
    defrule(func, leading=1)(rule)
    deflinear(func)
    recomputable(func)
    defjoin(func)


def index_order(order, a):
    """The index order (C or F) that ``order`` means for ``a`` in reshape and ravel."""
    if order == "A":
        return "F" if a.fortran else "C"
    return order


def inverse_permutation(axes, ndim):
    if axes is None:
        return None  # reversing the axes is its own inverse
    return np.argsort([axis % ndim for axis in axes])


def place_diagonal(dy, shape, offset=0, axis1=0, axis2=1):
    """The transpose of ``np.diagonal``: ``dy`` on that diagonal of zeros of ``shape`` (zeros
    traced like ``dy`` under nested reverse mode, so that the write is recorded)."""
    g = np.zeros_like(dy, shape=shape)
    length = dy.shape[-1]
    rows = np.arange(length) + max(-offset, 0)
    columns = np.arange(length) + max(offset, 0)
    np.moveaxis(g, (axis1, axis2), (-2, -1))[..., rows, columns] = dy
    return g


def tile_cotangent(dy, A, reps):
    """Sum the tiles: ``dy`` has shape ``reps * shape``, each tile a copy of ``A``."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    ndim = max(len(reps), A.ndim)
    shape = (1,) * (ndim - A.ndim) + A.shape
    reps = (1,) * (ndim - len(reps)) + reps
    tiles_then_elements = [n for pair in zip(reps, shape, strict=True) for n in pair]
    return dy.reshape(tiles_then_elements).sum(axis=tuple(range(0, 2 * ndim, 2))).reshape(A.shape)


def repeat_cotangent(dy, a, repeats, axis=None):
    """Add the cotangents of the copies of each element back into it."""
    length = a.size if axis is None else a.shape[axis]
    axis = 0 if axis is None else axis
    copied_from = np.repeat(np.arange(length), repeats)
    along_axis = np.moveaxis(dy, axis, 0)
    g = np.zeros_like(dy, shape=(length,) + along_axis.shape[1:])  # traced like dy, if it is
    ufunc_at(np.add, g, copied_from, along_axis)
    return np.moveaxis(g, 0, axis).reshape(a.shape)


# fmt: off
# function                  its transpose: the cotangent of the first argument, from dy and the function's own arguments
linear_map(np.reshape,      lambda dy, a, shape=None, order="C", **kw: np.reshape(dy, a.shape, order=index_order(order, a)))
linear_map(np.squeeze,      lambda dy, a, axis=None: np.reshape(dy, a.shape))
linear_map(np.expand_dims,  lambda dy, a, axis: np.reshape(dy, a.shape))
linear_map(np.transpose,    lambda dy, a, axes=None: np.transpose(dy, inverse_permutation(axes, a.ndim)))
linear_map(np.matrix_transpose, lambda dy, x: np.swapaxes(dy, -1, -2))
linear_map(np.linalg.matrix_transpose, lambda dy, x: np.swapaxes(dy, -1, -2))
linear_map(np.swapaxes,     lambda dy, a, axis1, axis2: np.swapaxes(dy, axis1, axis2))
linear_map(np.moveaxis,     lambda dy, a, source, destination: np.moveaxis(dy, destination, source))
linear_map(np.rollaxis,     lambda dy, a, axis, start=0: gather_cotangent(dy, a, lambda s: np.rollaxis(s, axis, start)))
linear_map(np.flip,         lambda dy, m, axis=None: np.flip(dy, axis))
linear_map(np.fliplr,       lambda dy, m: np.fliplr(dy))
linear_map(np.flipud,       lambda dy, m: np.flipud(dy))
linear_map(np.rot90,        lambda dy, m, k=1, axes=(0, 1): np.rot90(dy, -k, axes))
linear_map(np.roll,         lambda dy, a, shift, axis=None: np.roll(dy, np.negative(shift), axis))
linear_map(np.broadcast_to, lambda dy, array, shape, subok=False: unbroadcast(dy, array.shape))
linear_map(np.tile,         tile_cotangent)
linear_map(np.repeat,       repeat_cotangent)
linear_map(np.resize,       lambda dy, a, new_shape: np.zeros(a.shape, a.dtype) if a.size == 0  # y: 0s
           else gather_cotangent(dy, a, lambda s: np.resize(s, new_shape)))
linear_map(np.delete,       lambda dy, arr, obj, axis=None: gather_cotangent(dy, arr, lambda s: np.delete(s, obj, axis)))
linear_map(np.triu,         lambda dy, m, k=0: np.triu(dy, k))
linear_map(np.tril,         lambda dy, m, k=0: np.tril(dy, k))
linear_map(np.diagonal,     lambda dy, a, offset=0, axis1=0, axis2=1: place_diagonal(dy, a.shape, offset, axis1, axis2))
linear_map(np.linalg.diagonal, lambda dy, x, offset=0: place_diagonal(dy, x.shape, offset, -2, -1))
linear_map(np.diag,         lambda dy, v, k=0: np.diagonal(dy, k) if v.ndim == 1 else place_diagonal(dy, v.shape, k))
linear_map(np.real,         lambda dy, val: dy)
linear_map(np.imag,         lambda dy, val: val.zeros())  # of real ones: 0s
linear_map(sliding_window_view, lambda dy, x, window_shape, axis=None, **kw: gather_cotangent(dy, x, lambda s: sliding_window_view(s, window_shape, axis)))
# fmt: on


@defrule(np.ravel, leading=1)
def ravel(a, order="C"):
    y = np.ravel(a, order)
    if order == "K":  # memory order: where each element lands depends on a's strides
        return y, lambda dy: (gather_cotangent(dy, a, lambda s: np.ravel(s, order="K"), layout=a),)
    template = Template(a)
    return y, lambda dy: (np.reshape(dy, template.shape, order=index_order(order, template)),)


# Order "K" (memory order) and "A" read the tangent as the argument is laid out: the same.
deflinear(np.ravel)


@definplace(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    """NumPy's own code, which writes through ``a.flat``: a traced array's flat writes."""
    if not wrapped(a):
        raise UntracedWriteError(
            "np.fill_diagonal: a traced value was written into an array mutad is not tracing, "
            "so its gradient would be lost. Create the destination from a traced value: "
            "np.zeros_like(x) or np.empty(n, like=x).")
    np.fill_diagonal.__wrapped__(a, val, wrap)

GATHER_PAD_MODES = ("constant", "empty", "edge", "reflect", "symmetric", "wrap")


def check_pad_mode(mode, kwargs):
    """The rules below serve the modes that copy elements; the others are ``padded_by_steps``."""
    if mode not in GATHER_PAD_MODES or kwargs.get("reflect_type", "even") != "even":
        raise UnsupportedOperationError(
            f"np.pad(..., mode={mode!r}, {kwargs}) on traced arrays: only modes that copy "
            f"elements are differentiated ({', '.join(GATHER_PAD_MODES)}, with even reflection). "
            "Build the padding from slices and np.concatenate instead.")


PAD_STATISTICS = {"maximum": np.amax, "minimum": np.amin, "mean": np.mean, "median": np.median}


def _pairs(x, ndim, as_index=False):
    """NumPy's broadcasting of a pad setting to a (before, after) pair per axis, its values
    NumPy's scalars as NumPy keeps them (np.linspace rounds differently from a Python 0);
    ``None`` (no stat_length) stays None."""
    if x is None:
        return ((None, None),) * ndim
    x = lists_as_arrays([x])[0]  # (end_values=(a, b) of traced numbers: the array of them)
    if wrapped(x):  # traced end values (linear_ramp): a traced pair per axis
        return np.broadcast_to(np.ravel(x) if np.size(x) == 2 and np.shape(x) != (2, 1) else x,
                               (ndim, 2))
    x = np.array(x)
    if as_index:
        x = np.round(x).astype(np.intp, copy=False)
        if x.size and x.min() < 0:
            raise ValueError("index can't contain negative values")
    if x.size == 1:
        return ((x.ravel()[0],) * 2,) * ndim
    if x.size == 2 and x.shape != (2, 1):  # one value per side, for every axis
        return (tuple(x.ravel()),) * ndim
    return np.broadcast_to(x, (ndim, 2)).tolist()


@defcomposite(np.pad)
def padded_by_steps(array, pad_width, mode="constant", **kwargs):
    """np.pad's modes that compute the padding (``linear_ramp``, the statistics, odd
    reflection) as NumPy computes them, axis after axis, each axis's padding read from the area
    already padded along the earlier ones: ramps by ``np.linspace``, statistics by
    ``np.mean``/``np.amax``/..., reflections by slices, written into a padded array by slice
    assignment, every step on the traced arrays themselves. The modes that copy elements are
    left to the rule above (``NotImplemented``)."""
    if mode in GATHER_PAD_MODES and kwargs.get("reflect_type", "even") == "even":
        return NotImplemented
    if not callable(mode) and mode not in ("linear_ramp", "reflect", "symmetric",
                                           *PAD_STATISTICS):
        raise ValueError(f"mode '{mode}' is not supported by np.pad on traced arrays")
    ndim = np.ndim(array)
    if isinstance(pad_width, dict):  # NumPy's {axis: width or (before, after)}
        pad_width = [pad_width.get(axis, pad_width.get(axis - ndim, 0)) for axis in range(ndim)]
        pad_width = [(w, w) if isinstance(w, (int, np.integer)) else w for w in pad_width]
    widths = _pairs(pad_width, ndim, as_index=True)
    padded = np.pad(array, widths)  # zeros around the array, then overwritten
    if callable(mode):  # NumPy's steps: the function writes each line along each axis in place
        for axis in range(padded.ndim):
            view = np.moveaxis(padded, axis, -1)
            for index in np.ndindex(view.shape[:-1]):
                mode(view[index + (Ellipsis,)], widths[axis], axis, kwargs)
        return padded
    if np.size(array) == 0:  # nothing to compute from: NumPy pads only axes of some length
        for axis, width_pair in enumerate(widths):
            if np.shape(array)[axis] == 0 and any(width_pair):
                raise ValueError(f"can't extend empty axis {axis} using modes other than "
                                 "'constant' or 'empty'")
        return padded
    inner = tuple(slice(before, before + n) for n, (before, _) in zip(np.shape(array), widths))
    if mode == "linear_ramp":
        ends = _pairs(kwargs.get("end_values", 0), ndim)
        for axis, width_pair in enumerate(widths):
            roi = padded[(slice(None),) * (axis + 1) + inner[axis + 1:]]
            left, right = (np.linspace(end, edge.squeeze(axis), num=width, endpoint=False,
                                       dtype=padded.dtype, axis=axis)
                           for end, edge, width in zip(ends[axis], _edges(roi, axis, width_pair),
                                                       width_pair))
            reversed_right = right[along(ndim, axis, slice(None, None, -1))]
            _set_pad_area(roi, axis, width_pair, (left, reversed_right))
    elif mode in PAD_STATISTICS:
        lengths = _pairs(kwargs.get("stat_length"), ndim, as_index=True)
        for axis, width_pair in enumerate(widths):
            roi = padded[(slice(None),) * (axis + 1) + inner[axis + 1:]]
            stats = _statistics(roi, axis, width_pair, lengths[axis], PAD_STATISTICS[mode])
            _set_pad_area(roi, axis, width_pair, stats)
    else:
        for axis, (before, after) in enumerate(widths):
            if np.shape(array)[axis] == 1 and (before or after):  # NumPy's legacy: edge values
                _set_pad_area(padded, axis, (before, after), _edges(padded, axis, (before, after)))
                continue
            roi = padded[(slice(None),) * (axis + 1) + inner[axis + 1:]]
            while before > 0 or after > 0:  # the original values reflected again and again
                before, after = _reflect_odd(roi, axis, (before, after), np.shape(array)[axis],
                                             mode == "symmetric")
    return padded


def _edges(padded, axis, width_pair):
    """The first and last original values along ``axis``, that axis kept with length 1."""
    end = padded.shape[axis] - width_pair[1]
    return (padded[along(padded.ndim, axis, slice(width_pair[0], width_pair[0] + 1))],
            padded[along(padded.ndim, axis, slice(end - 1, end))])


def _set_pad_area(padded, axis, width_pair, value_pair):
    end = padded.shape[axis] - width_pair[1]
    padded[along(padded.ndim, axis, slice(None, width_pair[0]))] = value_pair[0]
    padded[along(padded.ndim, axis, slice(end, None))] = value_pair[1]


def _statistics(padded, axis, width_pair, length_pair, statistic):
    """NumPy's statistic of the first and last ``stat_length`` original values along ``axis``
    (all of them where None or longer), rounded for an integer array."""
    start, end = width_pair[0], padded.shape[axis] - width_pair[1]
    lengths = [end - start if n is None or n > end - start else n for n in length_pair]
    if 0 in lengths and statistic in (np.amax, np.amin):
        raise ValueError("stat_length of 0 yields no value for padding")

    def stat(key):
        value = statistic(padded[along(padded.ndim, axis, key)], axis=axis, keepdims=True)
        return np.round(value) if np.issubdtype(padded.dtype, np.integer) else value

    left = stat(slice(start, start + lengths[0]))
    if lengths[0] == lengths[1] == end - start:
        return left, left
    return left, stat(slice(end - lengths[1], end))


def _reflect_odd(padded, axis, width_pair, period, include_edge):
    """One round of NumPy's odd reflection (``2 edge - mirrored values``) along ``axis``: the
    widths still to pad after it."""
    left_pad, right_pad = width_pair
    old_length = padded.shape[axis] - right_pad - left_pad
    if include_edge:
        old_length, edge_offset = old_length // period * period, 1
    else:
        old_length, edge_offset = (old_length - 1) // (period - 1) * (period - 1), 0

    def at(key):
        return along(padded.ndim, axis, key)

    if left_pad > 0:
        chunk_length = min(old_length, left_pad)
        stop = left_pad - edge_offset
        chunk = 2 * padded[at(slice(left_pad, left_pad + 1))] - padded[
            at(slice(stop + chunk_length, stop, -1))]
        padded[at(slice(left_pad - chunk_length, left_pad))] = chunk
        left_pad -= chunk_length
    if right_pad > 0:
        chunk_length = min(old_length, right_pad)
        start = -right_pad + edge_offset - 2
        chunk = 2 * padded[at(slice(-right_pad - 1, -right_pad))] - padded[
            at(slice(start, start - chunk_length, -1))]
        start = padded.shape[axis] - right_pad
        padded[at(slice(start, start + chunk_length))] = chunk
        right_pad -= chunk_length
    return left_pad, right_pad


PAD_VALUES = {"constant_values": (3, 0)}
"""np.pad's constant values, differentiated where they carry a derivative: at position 3 of
its rules."""


@defrule(np.pad, leading=4, keywords=PAD_VALUES)
def pad(array, pad_width, mode="constant", *values, **kwargs):
    """Each padded element copies an element of ``array`` or one of the constant values (a
    pair per axis, as NumPy broadcasts them): padding the indices the same way tells which."""
    check_pad_mode(mode, kwargs)
    if values:
        kwargs["constant_values"] = values[0]
    y = np.pad(array, pad_width, mode, **kwargs)
    template = Template(array)
    if mode in ("constant", "empty"):
        def pad_indices(s):
            return np.pad(s, pad_width, constant_values=-1)
    else:
        def pad_indices(s):
            return np.pad(s, pad_width, mode, **kwargs)
    if not values or mode != "constant":
        return y, lambda dy: (gather_cotangent(dy, template, pad_indices), None, None, None)
    size, value_shape, pairs = template.size, np.shape(values[0]), (array.ndim, 2)

    def pad_both(s):  # s: the indices of the array's elements, then of a pair per axis
        return np.pad(s[:size].reshape(template.shape), pad_width,
                      constant_values=s[size:].reshape(pairs))

    def back(dy):
        g = gather_cotangent(dy, Template(np.empty(size + 2 * array.ndim, dy.dtype)), pad_both)
        dvalues = g[size:].reshape(pairs)
        dvalues = (np.sum(dvalues).reshape(value_shape) if math.prod(value_shape) == 1
                   else unbroadcast(dvalues, value_shape))
        return (g[:size].reshape(template.shape), None, None, dvalues)

    return y, back


@defjvp(np.pad, leading=4)
def pad_jvp(tangents, array, pad_width, mode="constant", *values, **kwargs):
    darray = tangents[0]
    check_pad_mode(mode, kwargs)
    if values:
        kwargs["constant_values"] = values[0]
    y = np.pad(array, pad_width, mode, **kwargs)
    dvalues = tangents[3] if len(tangents) > 3 else None
    if darray is None:
        darray = np.zeros(np.shape(array), y.dtype)
    if mode in ("constant", "empty"):  # the padding: the constant values' tangents, or zeros
        if mode == "constant" and dvalues is not None:
            return y, np.pad(darray, pad_width, constant_values=np.broadcast_to(
                dvalues, (np.ndim(array), 2)))
        return y, np.pad(darray, pad_width)
    return y, np.pad(darray, pad_width, mode, **kwargs)


########################################################################################
# Joining: concatenate, stack, hstack, vstack, dstack, column_stack, append


class _Split:
    """The pullback of a join (:func:`join_rule`): ``dy`` cut where each array was joined
    (``joined_shapes`` along ``axis``), each piece reshaped to its array's ``shape``. An
    object of three fields, not a closure: a long program's records hold one each until the
    reverse pass."""

    __slots__ = ("joined_shapes", "axis", "shapes")

    def __init__(self, joined_shapes, axis, shapes):
        self.joined_shapes = joined_shapes
        self.axis = axis
        self.shapes = shapes

    def __call__(self, dy):
        # (each piece a slice of dy along the axis, as np.split cuts it, without its
        # swapping of axes: a small join's pullback, np.array of a few numbers, runs often)
        before = (slice(None),) * self.axis
        cotangents, start = [], 0
        for joined, shape in zip(self.joined_shapes, self.shapes, strict=True):
            end = start + joined[self.axis]
            cotangents.append(np.reshape(dy[before + (slice(start, end),)], shape))
            start = end
        return (cotangents,)


def join_rule(func, layout, of_scalars=None):
    """A rule for ``func(arrays, *rest, **kwargs)``, which concatenates its arrays along one
    axis after reshaping each (``stack`` adds an axis, ``vstack`` makes rows of vectors).

    ``layout(arrays, *rest, **kwargs)`` gives the shape each array has when it is
    concatenated, and the axis; the pullback cuts ``dy`` there and reshapes each piece back.
    ``of_scalars``: a plain function that makes what ``func`` makes of a tuple of float64
    values of one shape (0-d arrays or NumPy's scalars, or arrays) and real constants beside
    them, without settings, offered to a compiled replay, which calls it where a step joins
    those (``np.array([a, 1.0, b])`` of traced numbers is a stack of them, and
    ``np.array([[a, b], [c, d]])`` a stack of two such), and takes the cotangent of each as
    its element of the output's, as the pullback does.
    """

    def rule(arrays, *rest, **kwargs):
        y = func(arrays, *rest, **kwargs)
        joined_shapes, axis = layout(arrays, *rest, **kwargs)
        shapes = [np.shape(x) for x in arrays]
        if shapes == joined_shapes:  # (concatenate's: ``back`` holds one list, not two)
            joined_shapes = shapes
        return y, _Split(joined_shapes, axis, shapes)

    rule.__name__ = rule.__qualname__ = func.__name__
    rule.of_scalars = of_scalars
    defrule(func, leading=1)(rule)
    deflinear(func)
    recomputable(func)
    defjoin(func)


def concatenate_layout(arrays, axis=0, *rest, **kwargs):
    if axis is None:
        return [(np.size(x),) for x in arrays], 0
    return [np.shape(x) for x in arrays], axis % np.ndim(arrays[0])


def stack_layout(arrays, axis=0, *rest, **kwargs):
    axis %= np.ndim(arrays[0]) + 1
    return [np.shape(x)[:axis] + (1,) + np.shape(x)[axis:] for x in arrays], axis


def hstack_layout(tup, **kwargs):
    shapes = [np.shape(np.atleast_1d(x)) for x in tup]
    return shapes, 0 if len(shapes[0]) == 1 else 1


def column_stack_layout(tup):
    return [np.shape(x) if np.ndim(x) >= 2 else (np.size(x), 1) for x in tup], 1


# fmt: off
join_rule(np.concatenate, concatenate_layout)
join_rule(np.stack,        stack_layout, of_scalars=np.array)  # (np.array of a tuple)
join_rule(np.hstack,       hstack_layout)
join_rule(np.vstack,       lambda tup, **kw: ([np.shape(np.atleast_2d(x)) for x in tup], 0))
join_rule(np.dstack,       lambda tup: ([np.shape(np.atleast_3d(x)) for x in tup], 2))
join_rule(np.column_stack, column_stack_layout)
# fmt: on


@defrule(np.append, leading=2)
def append(arr, values, *rest, **kwargs):
    axis = rest[0] if rest else kwargs.get("axis")
    y = np.append(arr, values, *rest, **kwargs)
    head_shape, tail_shape = np.shape(arr), np.shape(values)

    def back(dy):
        if axis is None:
            head, tail = np.split(dy, [math.prod(head_shape)])
        else:
            head, tail = np.split(dy, [head_shape[axis]], axis=axis)
        return np.reshape(head, head_shape), np.reshape(tail, tail_shape)

    return y, back


deflinear(np.append, operands=(0, 1))


########################################################################################
# Splitting: split, array_split, hsplit, vsplit, dsplit, unstack


def split_rule(func, join):
    """A rule for ``func(ary, *rest, **kwargs)`` returning pieces of ``ary`` that
    ``join(pieces, ary, *rest, **kwargs)`` puts back together (``ary`` as a :class:`Template`).

    The pieces are usually views, so nothing is recorded; when they are copies, outputs no
    gradient reached arrive as ``None`` and count as zeros.
    """

    def rule(ary, *rest, **kwargs):
        pieces = func(ary, *rest, **kwargs)
        shapes = [(piece.shape, piece.dtype) for piece in pieces]
        template = Template(ary)

        def back(dys):
            dys = [np.zeros(*shape) if dy is None else dy
                   for dy, shape in zip(dys, shapes, strict=True)]
            return (join(dys, template, *rest, **kwargs),)

        return pieces, back

    rule.__name__ = rule.__qualname__ = func.__name__
    defrule(func, leading=1)(rule)
    deflinear(func)
    recomputable(func)
    defjoin(func)


# fmt: off
split_rule(np.split,       lambda dys, ary, indices_or_sections, axis=0: np.concatenate(dys, axis))
split_rule(np.array_split, lambda dys, ary, indices_or_sections, axis=0: np.concatenate(dys, axis))
split_rule(np.hsplit,      lambda dys, ary, indices_or_sections: np.concatenate(dys, 1 if ary.ndim > 1 else 0))
split_rule(np.vsplit,      lambda dys, ary, indices_or_sections: np.concatenate(dys, 0))
split_rule(np.dsplit,      lambda dys, ary, indices_or_sections: np.concatenate(dys, 2))
# fmt: on
if hasattr(np, "unstack"):  # NumPy 2.1 and later
    split_rule(np.unstack, lambda dys, x, axis=0: np.stack(dys, axis))


########################################################################################
# atleast_1d/2d/3d, broadcast_arrays


def atleast_rule(func):
    """``atleast_nd(*arys)`` reshapes each argument; one argument gives one array, several a
    tuple. An argument that already has enough dimensions comes back itself, as NumPy gives it
    (the engines hand back the traced argument: ``np.atleast_1d(y) is y``)."""

    def rule(*arys):
        ys = func(*arys)
        shapes = [np.shape(x) for x in arys]
        if len(arys) == 1:
            return ys, lambda dy: (np.reshape(dy, shapes[0]),)

        def back(dys):
            return tuple(None if dy is None else np.reshape(dy, shape)
                         for dy, shape in zip(dys, shapes, strict=True))

        return ys, back

    def jvp(tangents, *arys):
        dys = tuple(None if t is None else func(t) for t in tangents)
        return func(*arys), dys[0] if len(arys) == 1 else dys

    rule.__name__ = rule.__qualname__ = func.__name__
    jvp.__name__ = jvp.__qualname__ = f"{func.__name__}_jvp"
    defrule(func)(rule)
    defjvp(func)(jvp)


for _func in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    atleast_rule(_func)


def _as_protected(x):
    """``x``, a view made before a record protected its owner (``reverse.freeze``: the memory of
    an array made before the differentiation, which a write adopted), read-only as its owner
    now is: NumPy's broadcast would make a view of it writeable, which its owner refuses."""
    if type(x) is np.ndarray and writeable(x) and not writeable(owner(x)):
        x = x.view()
        x.flags.writeable = False
    return x


@defrule(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """NumPy's views: an argument it returns as itself comes back itself (the engines hand
    back the traced argument); the others are broadcasts, writeable as NumPy makes them, whose
    shadows the core accumulates element by element of memory."""
    shapes = [np.shape(x) for x in args]
    shape = np.broadcast_shapes(*shapes)
    ys = tuple(x if (isinstance(x, np.ndarray) or wrapped(x) or is_device(x))
               and x.shape == shape else y for x, y in zip(
                   args, np.broadcast_arrays(*map(_as_protected, args), subok=subok), strict=True))

    def back(dys):
        # (no cotangent for an argument returned as itself: its derivative is its own; 0 here)
        return tuple(np.zeros(shape) if dy is None else unbroadcast(dy, shape)
                     for dy, shape in zip(dys, shapes, strict=True))

    return ys, back


@defcomposite(np.broadcast_arrays)
def broadcast_arrays_of_numbers(*args, subok=False):
    """The float numbers among the arguments made arrays first, as NumPy makes them
    (constants of the differentiations, as the user's ``np.array(3.0)``), so that their
    broadcasts are views of constants the rule is given, constants too beside the traced
    arguments' (NumPy's array made inside the rule would be a new result, traced)."""
    if not any(isinstance(x, _NUMBERS) for x in args):
        return NotImplemented
    return np.broadcast_arrays(*(allocate(np.array(x), (np.array, (x,), {}))
                                 if isinstance(x, _NUMBERS) else x for x in args), subok=subok)


_NUMBERS = (float, complex, np.inexact)  # (an integer's broadcast is no derivative's)


@defjvp(np.broadcast_arrays)
def broadcast_arrays_jvp(tangents, *args, subok=False):
    # Broadcasting the tangents (zeros for constants) together makes NumPy take the same
    # decisions, so each tangent is the same view of its argument's tangent as the output is of
    # the argument (or the tangent itself, when NumPy hands the arguments back).
    filled = [np.zeros(np.shape(x)) if t is None else t for x, t in zip(args, tangents, strict=True)]
    dys = np.broadcast_arrays(*map(_as_protected, filled), subok=subok)
    return (np.broadcast_arrays(*map(_as_protected, args), subok=subok),
            tuple(None if t is None else dy for t, dy in zip(tangents, dys, strict=True)))


########################################################################################
# where, clip


@defrule(np.where)
def where(condition, *branches):
    if not branches:  # np.where(condition): indices, no gradient
        return np.where(condition), lambda dy: (None,)
    x, y = branches
    x_shape, y_shape = np.shape(x), np.shape(y)

    def back(dy):
        return (None,
                unbroadcast(np.where(condition, dy, 0), x_shape),
                unbroadcast(np.where(condition, 0, dy), y_shape))

    return np.where(condition, x, y), back


deflinear(np.where, operands=(1, 2))


@defbatched(np.where)
def where_batched(tangents, condition, *branches):
    """Each direction's tangent taken from the branch the condition takes the value from."""
    if len(branches) != 2:
        return NotImplemented
    y = np.where(condition, *branches)
    size = batch_size(tangents[1:])
    if size is None:
        return y, None
    x, z = (batch_aligned(batch_or_zeros(b, t, size), y.ndim)
            for b, t in zip(branches, tangents[1:], strict=True))
    return y, np.where(condition, x, z)


def clip_bounds(bounds, kwargs):
    # Bounds given by keyword are constants (those that are differentiated come by position:
    # CLIP_BOUNDS).
    lower = bounds[0] if len(bounds) > 0 else kwargs.get("a_min", kwargs.get("min"))
    upper = bounds[1] if len(bounds) > 1 else kwargs.get("a_max", kwargs.get("max"))
    return lower, upper


def clipped(a, y, lower, upper):
    """Where ``y = clip(a, lower, upper)`` took the lower bound and where the upper one (the
    upper wins when the bounds cross, as in NumPy); where ``a`` equals a bound, neither."""
    nowhere = np.zeros(np.shape(y), bool)
    raised = a if lower is None else np.maximum(a, lower)
    above = nowhere if upper is None else np.broadcast_to(raised > upper, np.shape(y))
    below = nowhere if lower is None else (a < lower) & ~above
    return below, above


CLIP_BOUNDS = {"min": (1, None), "max": (2, None)}
"""np.clip's keyword-only bounds, differentiated at the positions of ``a_min`` and ``a_max``
(None: no bound)."""


@defrule(np.clip, leading=3, keywords=CLIP_BOUNDS)
def clip(a, *bounds, **kwargs):
    """``clip(a, lower, upper) = minimum(maximum(a, lower), upper)``: each element's cotangent
    goes to the operand it came from; where ``a`` equals a bound, to ``a``."""
    y = np.clip(a, *bounds, **kwargs)
    lower, upper = clip_bounds(bounds, kwargs)
    below, above = clipped(a, y, lower, upper)  # now: back may see a restored up to rounding

    def back(dy):
        da = unbroadcast(np.where(below | above, 0, dy), np.shape(a))
        dlower = None if lower is None else unbroadcast(np.where(below, dy, 0), np.shape(lower))
        dupper = None if upper is None else unbroadcast(np.where(above, dy, 0), np.shape(upper))
        return (da, dlower, dupper)

    return y, back


@defcomposite(np.clip)
def clip_into_where(a, *bounds, out=None, **kwargs):
    """``np.clip(a, lower, upper, out=out, where=mask)``: NumPy's clip ufunc writes its values
    into ``out`` only where ``mask`` is true, ``out`` keeping its own elsewhere, where the rule
    (whose result the core writes into ``out`` whole) would overwrite them: the clipped values,
    copied into ``out`` under the mask as the ufunc casts them. Other calls are the rule's."""
    if len(bounds) > 2:  # out by position
        bounds, out = bounds[:2], bounds[2]
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    where = kwargs.pop("where", True)
    if out is None or where is True:
        return NotImplemented
    np.copyto(out, np.clip(a, *bounds, **kwargs), casting=kwargs.get("casting", "same_kind"),
              where=where)
    return out


@defjvp(np.clip)
def clip_jvp(tangents, a, *bounds, **kwargs):
    y = np.clip(a, *bounds, **kwargs)
    if all(t is None for t in tangents):
        return y, None
    da, dlower, dupper = (tuple(tangents) + (None, None))[:3]
    below, above = clipped(a, y, *clip_bounds(bounds, kwargs))
    dy = np.where(above, 0.0 if dupper is None else dupper,
                  np.where(below, 0.0 if dlower is None else dlower, 0.0 if da is None else da))
    return y, dy


# Complex values (facet complex): every function above is linear with real coefficients
# (np.real and np.imag of complex arrays are views: nothing is recorded, the shadow of the
# view is the real or imaginary part of the array's, as in memory); clip's pieces too: it
# selects each element from a or a bound, in NumPy's order of complex values (by real part,
# then imaginary part), which its masks compare with as NumPy's loop does.
holomorphic(np.clip, np.reshape, np.squeeze, np.expand_dims, np.transpose, np.matrix_transpose,
            np.linalg.matrix_transpose, np.linalg.diagonal,
            np.swapaxes, np.moveaxis, np.rollaxis, np.flip, np.fliplr, np.flipud, np.rot90,
            np.roll, np.broadcast_to, np.tile, np.repeat, np.resize, np.delete, np.triu, np.tril,
            np.diagonal, np.diag, np.real, np.imag, sliding_window_view, np.ravel, np.pad,
            np.concatenate, np.stack, np.hstack, np.vstack, np.dstack, np.column_stack,
            np.append, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.unstack,
            np.atleast_1d, np.atleast_2d, np.atleast_3d, np.broadcast_arrays, np.where)
complex_aware(np.fill_diagonal)


def outer_of(ufunc):
    """``ufunc.outer(a, b)``: ``ufunc`` of ``a`` with ``b.ndim`` axes of one appended, against
    ``b``."""

    def outer(a, b, /, **kwargs):
        return ufunc(np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b, **kwargs)

    return outer


# Ufuncs whose value is the exact result correctly rounded (IEEE 754's operations, selections):
# every loop NumPy may choose gives the same bits.
_ROUNDED_ONCE = frozenset((np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum,
                           np.fmax, np.fmin, np.copysign))


def accumulate_of(ufunc):
    """``ufunc.accumulate(a, axis)``: ``out[i] = ufunc(out[i - 1], a[i])`` along ``axis``, step
    by step as NumPy's loop computes it (each step's derivative the ufunc's, ties shared as they
    are); one operation per step. NumPy's loop over overlapping operands may round otherwise
    than the same ufunc applied step by step (``np.power``'s and ``np.arctan2``'s), so the
    steps' values are compared with NumPy's accumulation of the plain values, and refused
    unless they are the same bits; the result is laid out as NumPy's (the input's order), on
    which a later reduction's rounding depends. A replay, which would not compare, traces such
    a call unless the ufunc is correctly rounded (``_ROUNDED_ONCE``: any loop gives its bits).
    ``dtype=`` is the steps' type (``out``'s by default, as NumPy's); ``out=`` is written with
    the result, computed from all of ``a`` first (NumPy's result where they overlap)."""
    name = f"np.{ufunc.__name__}.accumulate"

    def accumulate(a, axis=0, dtype=None, out=None):
        if type(out) is tuple:
            out, = out
        if dtype is None and out is not None:
            dtype = out.dtype
        a = lists_as_arrays([a])[0]
        # NumPy's values, and its errors (a cast it refuses, an out of another shape) and
        # floating-point events: the steps' are the same ones again
        expected = ufunc.accumulate(memory(a), axis=axis, dtype=dtype, out=None if out is None
                                    else np.empty(np.shape(out), dtype=out.dtype))
        moved = np.moveaxis(a if dtype is None else a.astype(dtype, copy=False), axis, 0)
        steps = [moved[0]]
        with np.errstate(all="ignore"):
            for i in range(1, moved.shape[0]):
                steps.append(ufunc(steps[-1], moved[i]))
        y = (np.moveaxis(np.stack(steps), 0, axis) if steps
             else np.moveaxis(moved * 1.0, 0, axis))
        y = _laid_out_as(y, expected)
        if not _same_bits(memory(y), expected):
            raise UnsupportedOperationError(
                f"{name} of a differentiated array, whose NumPy loop rounds otherwise than the "
                "ufunc applied step by step: mutad differentiates the steps, which would not "
                "give NumPy's values. Write the accumulation as a loop: "
                "out[i] = f(out[i - 1], x[i]).")
        if ufunc not in _ROUNDED_ONCE:
            _traced_in_replays(f"{name}, whose agreement with NumPy's loop a replay would not "
                               "check")
        if out is None:
            return y
        out[...] = y
        return out

    return accumulate


def reduce_of(ufunc):
    """``ufunc.reduce(a, axis)`` of a binary ufunc with no rule of its own (``np.logaddexp``,
    ``np.hypot``, ``np.subtract``): NumPy's loop folding each output element's operands in
    order, ``s = ufunc(s, a[i])`` (from ``initial`` if given), over the reduced axes in C
    order, the derivative of each step the ufunc's. NumPy may take another order (several axes
    of an array it iterates in memory order) or a loop whose rounding depends on the layout;
    so the fold's value is compared with NumPy's reduction of the plain values, and refused
    unless it is the same bits. A replay, which would not compare, traces such a call."""
    name = f"np.{ufunc.__name__}.reduce"

    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=np._NoValue,
               where=True):
        if dtype is not None or out is not None or where is not True:
            raise UnsupportedOperationError(
                f"{name}(..., dtype=, out=, where=) of a differentiated array: call it without "
                "them and convert, copy or mask the result.")
        a = lists_as_arrays([a])[0]
        ndim = np.ndim(a)
        axes = tuple(range(ndim)) if axis is None else tuple(sorted(
            normalize_axis_index(ax, ndim) for ax in (axis if type(axis) is tuple else (axis,))))
        kept = tuple(ax for ax in range(ndim) if ax not in axes)
        count = math.prod(np.shape(a)[ax] for ax in axes)
        folded = np.reshape(np.transpose(a, axes + kept),
                            (count,) + tuple(np.shape(a)[ax] for ax in kept))
        given = {} if initial is np._NoValue else {"initial": initial}
        if count == 0 and not given and ufunc.identity is None:
            raise ValueError(f"zero-size array to reduction operation {ufunc.__name__} which "
                             "has no identity")
        # NumPy's values, and its floating-point events: the fold's are the same ones again
        expected = ufunc.reduce(memory(a), axis=axis, keepdims=keepdims, **given)
        if count == 0:  # the identity or initial everywhere: a constant
            y = np.full(folded.shape[1:], ufunc.identity if not given else initial,
                        dtype=np.result_type(a))
        else:
            with np.errstate(all="ignore"):
                y = folded[0] if not given else ufunc(initial, folded[0])
                for i in range(1, count):
                    y = ufunc(y, folded[i])
        if keepdims:
            y = np.expand_dims(y, axes)
        if not _same_bits(memory(y), expected):
            raise _unlike_the_fold(name, ufunc, memory(a), axes, memory(y), expected)
        _traced_in_replays(f"{name}, whose agreement with NumPy's order of reduction a "
                           "replay would not check")
        return y

    return reduce


def _unlike_the_fold(name, ufunc, a, axes, y, expected):
    """The refusal of a reduction whose NumPy values are not the fold's ``y``: NumPy took
    another order (several axes of an array not in C order), or its own loop does not compute
    the fold (NumPy 2.4's float ``np.power.reduce`` of three or more values gives another
    number than ``(x[0] ** x[1]) ** x[2]``)."""
    y, expected = np.broadcast_arrays(y, expected)
    differing = np.flatnonzero(~((y == expected) | (np.isnan(y) & np.isnan(expected))))
    at = differing[0] if differing.size else 0
    numbers = (f"NumPy gives {expected.flat[at].item()!r} where the fold "
               f"s = np.{ufunc.__name__}(s, x[i]) gives {y.flat[at].item()!r}")
    if len(axes) > 1 and not np.asarray(a).flags.c_contiguous:
        return UnsupportedOperationError(
            f"{name} of a differentiated array over several axes of an array not in C order: "
            f"NumPy reduces it in another order ({numbers}), and mutad differentiates the fold "
            "in order, which would not give NumPy's values. Reduce a C-ordered copy "
            "(np.ascontiguousarray(x)), or write the fold as a loop: s = f(s, x[i]).")
    return UnsupportedOperationError(
        f"{name} of a differentiated array, whose values NumPy's own loop does not compute as "
        f"the fold in order ({numbers}): mutad differentiates the fold, which would not give "
        "NumPy's values. Write the fold as a loop if it is the fold you mean: s = f(s, x[i]).")


def _traced_in_replays(reason):
    """Make every replay recording now trace its calls instead, for ``reason``."""
    for differentiation in ACTIVE.running:
        recorder = getattr(differentiation, "recorder", None)
        if recorder is not None:
            recorder.refuse(reason)


def _laid_out_as(y, expected):
    """``y``, or a copy of it in the memory order of NumPy's result ``expected`` (its axes by
    stride), on which the rounding of a later reduction of it depends."""
    if np.ndim(y) < 2 or np.shape(y) != np.shape(expected) or (
            memory(y).strides == expected.strides):
        return y
    order = sorted(range(expected.ndim), key=lambda ax: -abs(expected.strides[ax]))
    return np.transpose(np.copy(np.transpose(y, order), order="C"), np.argsort(order))


def _same_bits(a, b):
    """Whether arrays ``a`` and ``b`` (a NumPy scalar too) hold the same bits, compared where
    they live (a device library's arrays on the device, as unsigned integers)."""
    if np.result_type(a) != np.result_type(b) or np.shape(a) != np.shape(b):
        return False
    if is_device(a):
        parts = a.real.dtype  # (a complex number's: its two parts')
        bits = np.dtype(f"u{parts.itemsize}")
        return bool(devices.namespace(a).array_equal(a.view(parts).view(bits),
                                                     b.view(parts).view(bits)))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.type in (np.longdouble, np.clongdouble):  # bytes beside the 80 bits: not values
        return all(np.array_equal(p, q, equal_nan=True)
                   and np.array_equal(np.signbit(p), np.signbit(q))
                   for p, q in ((a.real, b.real), (a.imag, b.imag)))
    return a.tobytes() == b.tobytes()


def reduceat_of(ufunc):
    """``ufunc.reduceat(a, indices, axis)`` of a ufunc that selects one of its operands
    (``np.maximum``): ``ufunc.reduce`` over each segment ``a[indices[j]:indices[j + 1]]``, or
    the one element ``a[indices[j]]`` where the indices do not go up, as NumPy defines it. A
    selection has the same value in any order of reduction (NumPy's own loop's), and its
    derivative is ``ufunc.reduce``'s: ties shared as they are; laid out as NumPy's result."""

    def reduceat(a, indices, axis=0, dtype=None, out=None):
        if dtype is not None:
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__}.reduceat(..., dtype=) of a differentiated array: "
                "call it without it and convert the result.")
        given = lists_as_arrays([a])[0]
        a = np.moveaxis(given, axis, 0)
        indices = np.asarray(indices).tolist()  # an index has no derivative
        ends = [*indices[1:], a.shape[0]]
        parts = [ufunc.reduce(a[start:end], axis=0) if start < end else a[start]
                 for start, end in zip(indices, ends)]
        if out is not None:  # the result written into it (after reading a, which it may
            # overlap, as NumPy buffers), with NumPy's checks of its shape and casting
            target = out[0] if type(out) is tuple and len(out) == 1 else out
            ufunc.reduceat(memory(given), indices, axis=axis, out=np.empty_like(memory(target)))
            np.copyto(target, np.moveaxis(np.stack(parts), 0, axis), casting="same_kind")
            return target
        return _laid_out_as(np.moveaxis(np.stack(parts), 0, axis),
                            ufunc.reduceat(memory(given), indices, axis=axis))

    return reduceat


_NUMPY_AS_STRIDED = (np.lib.stride_tricks.as_strided,)  # NumPy's, held where the mode's swap
# of routed names in public modules does not reach it (and bound to no name of this module's
# own: the mode would switch its class on every entry to route that name, ``_RoutingModule``)


def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
    """``np.lib.stride_tricks.as_strided`` (facet ``route``) of a differentiated ``x``: the
    same view of its memory, writeable when NumPy's is, built from steps mutad follows as views
    (``sliding_window_view`` along one axis of the flat memory, once per axis of the view,
    sliced to each axis's step; ``broadcast_to`` for a step of zero). A view, so that later
    writes into ``x`` show through it, as through NumPy's; its shadow is the same view of the
    shadow, so that elements read several times add up. A write through a view whose elements
    share memory is refused when it is made (it has no derivative mutad can follow); a view
    reaching outside the memory of ``x``'s array (which NumPy does not check) is refused."""
    if not wrapped(x):
        return _NUMPY_AS_STRIDED[0](x, shape, strides, subok, writeable)
    value = memory(x)
    shape = value.shape if shape is None else tuple(int(n) for n in shape)
    strides = value.strides if strides is None else tuple(int(s) for s in strides)
    base = owner(value)
    itemsize = value.itemsize
    start, misaligned = divmod(address(value) - address(base), itemsize)
    if (len(strides) != len(shape) or misaligned or not base.flags.c_contiguous
            or any(s % itemsize for s in strides)):
        raise UnsupportedOperationError(
            "np.lib.stride_tricks.as_strided of a differentiated array: its memory is not one "
            "contiguous array read element by element (or the shape and strides differ in "
            "length). Use sliding_window_view, or indexing.")
    steps = [s // itemsize for s in strides]
    spans = [(n - 1) * step for n, step in zip(shape, steps)]
    low = start + sum(min(span, 0) for span in spans)
    high = start + sum(max(span, 0) for span in spans)
    if 0 not in shape and (low < 0 or high >= base.size):
        raise UnsupportedOperationError(
            "np.lib.stride_tricks.as_strided of a differentiated array: the view reaches "
            f"outside its array's memory (elements {low} to {high} of {base.size}), whose "
            "values NumPy leaves undefined. Give a shape and strides within the array.")
    flat = np.ravel(owner_view(x))
    if 0 in shape:
        return sliding_window_view(flat[:0], 0, writeable=writeable).reshape(shape)
    walked = [axis for axis, (n, step) in enumerate(zip(shape, steps)) if n > 1 and step]
    windows = tuple(abs(spans[axis]) + 1 for axis in walked) or (1,)
    view = sliding_window_view(flat[low:], windows, axis=(0,) * len(windows),
                               writeable=writeable)[0]
    view = view[tuple(slice(None, None, steps[axis]) for axis in walked)]  # (from the far
    # end for a negative step)
    # each walked axis now has its n elements; the others are of one element or repeat one
    view = view.reshape(tuple(shape[axis] if axis in walked else 1
                              for axis in range(len(shape))))
    if view.shape == shape:
        return view
    if not writeable:
        return np.broadcast_to(view, shape)
    # a step of zero in a writeable view: NumPy's is writeable, as np.broadcast_arrays' views
    # are once their flag is set (a write of several elements through it is refused where it
    # is made: they share memory)
    view = np.broadcast_arrays(view, _NUMPY_AS_STRIDED[0](
        np.empty(1, np.bool_), shape, (0,) * len(shape)))[0]
    view.setflags(write=True)
    return view


defroute(_NUMPY_AS_STRIDED[0], as_strided)



# ----------------------------------------------------------------------------------------------
# A batch of directions (facet batched): the same view or copy of each direction's tangent,
# the batch axis first. A view of the value is then a view of the batch; where the two differ
# (a copy of one, a view of the other), the core's own checks copy or refuse (forward._wrap).
# Each direction's tangent is moved, not computed: the same bits as one direction per pass.


def _same_shape_batched(func):
    """``func``'s batched rule for a function that keeps its operand's elements in order and
    changes only the shape (every view it makes is one reshape of the batch)."""

    def rule(tangents, a, *args, **kwargs):
        y = func(a, *args, **kwargs)
        t = tangents[0]
        return y, None if t is None else np.reshape(t, t.shape[:1] + np.shape(y))

    rule.__name__ = rule.__qualname__ = f"{func.__name__}_batched"
    defbatched(func)(rule)


_same_shape_batched(np.squeeze)
_same_shape_batched(np.expand_dims)


def _atleast_batched(func):
    """``np.atleast_1d`` (2d, 3d) of one array: a reshape, of the value and of each
    direction's tangent; of several arrays (a list): not covered."""

    def rule(tangents, *arys):
        if len(arys) != 1:
            return NotImplemented
        y = func(arys[0])
        t = tangents[0]
        return y, None if t is None else np.reshape(t, t.shape[:1] + np.shape(y))

    rule.__name__ = rule.__qualname__ = f"{func.__name__}_batched"
    defbatched(func)(rule)


for _func in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    _atleast_batched(_func)


@defbatched(np.real)
def real_batched(tangents, val):
    """Of a real array: the array itself (a view), and each direction's tangent alike."""
    if np.iscomplexobj(val):
        return NotImplemented
    t = tangents[0]
    return np.real(val), None if t is None else np.real(t)


@defbatched(np.imag)
def imag_batched(tangents, val):
    """Of a real array: new zeros, whose tangents are zeros."""
    if np.iscomplexobj(val):
        return NotImplemented
    return np.imag(val), ZERO_TANGENT


@defbatched(np.reshape)
def reshape_batched(tangents, a, shape=None, order="C", **kwargs):
    if kwargs or order not in ("C", "F"):
        return NotImplemented
    y = np.reshape(a, shape, order=order)
    t = tangents[0]
    return y, None if t is None else np.reshape(t, t.shape[:1] + y.shape, order=order)


@defbatched(np.ravel)
def ravel_batched(tangents, a, order="C"):
    if order not in ("C", "F"):
        return NotImplemented
    y = np.ravel(a, order)
    t = tangents[0]
    return y, None if t is None else np.reshape(t, t.shape[:1] + y.shape, order=order)


@defbatched(np.transpose)
def transpose_batched(tangents, a, axes=None):
    y = np.transpose(a, axes)
    t = tangents[0]
    if t is None:
        return y, None
    moved = batch_axes(range(np.ndim(a))[::-1] if axes is None else axes, np.ndim(a))
    return y, np.transpose(t, (0, *moved))


@defbatched(np.swapaxes)
def swapaxes_batched(tangents, a, axis1, axis2):
    y = np.swapaxes(a, axis1, axis2)
    t = tangents[0]
    if t is None:
        return y, None
    (first,), (second,) = batch_axes(axis1, np.ndim(a)), batch_axes(axis2, np.ndim(a))
    return y, np.swapaxes(t, first, second)


@defbatched(np.matrix_transpose)
def matrix_transpose_batched(tangents, x):
    y = np.matrix_transpose(x)
    t = tangents[0]
    return y, None if t is None else np.swapaxes(t, -1, -2)


@defbatched(np.moveaxis)
def moveaxis_batched(tangents, a, source, destination):
    y = np.moveaxis(a, source, destination)
    t = tangents[0]
    if t is None:
        return y, None
    return y, np.moveaxis(t, batch_axes(source, np.ndim(a)), batch_axes(destination, np.ndim(a)))


@defbatched(np.broadcast_to)
def broadcast_to_batched(tangents, array, shape, subok=False):
    """The same broadcast of each direction's tangent (a read-only view, as the value's)."""
    if subok or type(array) is not np.ndarray:
        return NotImplemented
    y = np.broadcast_to(array, shape)
    t = tangents[0]
    if t is None:
        return y, None
    return y, np.broadcast_to(batch_aligned(t, y.ndim), t.shape[:1] + y.shape)


def _split_batched(func):
    """The same pieces of each direction's tangent, along the same axis after the batch's
    (views, as the value's pieces)."""
    def rule(tangents, ary, indices_or_sections, axis=0):
        pieces = func(ary, indices_or_sections, axis)
        t = tangents[0]
        if t is None:
            return pieces, None
        (moved,) = batch_axes(axis, np.ndim(ary))
        return pieces, func(t, indices_or_sections, moved)

    rule.__name__ = rule.__qualname__ = f"{func.__name__}_batched"
    defbatched(func)(rule)


_split_batched(np.split)
_split_batched(np.array_split)


@defbatched(np.concatenate)
def concatenate_batched(tangents, arrays, axis=0, **kwargs):
    if kwargs:
        return NotImplemented  # dtype=, casting=
    y = np.concatenate(arrays, axis=axis)
    size = batch_size(tangents[:1])
    if size is None:
        return y, None
    parts = [batch_or_zeros(a, t, size)
             for a, t in zip(arrays, tangents[0] or [None] * len(arrays), strict=True)]
    if axis is None:  # each flattened in C order, then joined
        return y, np.concatenate([np.reshape(p, (size, -1)) for p in parts], axis=1)
    return y, np.concatenate(parts, axis=batch_axes(axis, np.ndim(arrays[0]))[0])


@defbatched(np.stack)
def stack_batched(tangents, arrays, axis=0, **kwargs):
    if kwargs:
        return NotImplemented  # dtype=, casting=
    y = np.stack(arrays, axis=axis)
    size = batch_size(tangents[:1])
    if size is None:
        return y, None
    parts = [batch_or_zeros(a, t, size)
             for a, t in zip(arrays, tangents[0] or [None] * len(arrays), strict=True)]
    return y, np.stack(parts, axis=batch_axes(axis, y.ndim)[0])
