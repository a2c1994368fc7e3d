"""Reductions and scans: each re-expands the reduced cotangent to the input's shape with one
helper (``expand``), so a rule only says how the cotangent spreads over the reduced elements.
Each forward rule (``*_jvp``) follows its reverse rule and is its transpose: it reduces the
input's tangent the way the reverse rule spreads the cotangent.

Ties and zeros follow JAX and HIPS autograd: a maximum shared by several elements splits its
gradient equally among them, and ``prod``/``cumprod`` are exact when elements are zero,
infinite or NaN or the products leave the floats (the product of the other elements, never a
division by a factor), to second order too.

Which elements tie, are zero or are NaN is decided when the rule runs and kept for ``back``:
the reverse pass may hand ``back`` inputs restored by inversion, equal to the originals up to
rounding but not always bit for bit, and a tie or a zero would not survive that.

Nested reverse mode runs the pullbacks on arrays an outer differentiation traces, so they are
written with NumPy calls that dispatch; branches that only matter for second derivatives (the
vanishing terms of ``cumprod`` at zeros) run only when the input is traced (``wrapped``).
"""

import functools
import math
import warnings

import numpy as np

from ..core.debug import from_user_line
from ..core.devices import is_device, namespace, ufunc_at
from ..core.errors import UnsupportedOperationError
from ..core.levels import carries_derivative
from ..core.registry import (complex_aware, defbatched, defcomposite, defjvp, deflinear,
                             defrule, holomorphic, lookup)
from ..core.views import memory, wrapped
from ..engines.arraylike import settled
from ..engines.elementwise import unbroadcast
from ..engines.products import times
from ._helpers import Template, batch_axes, expand


def masked(g, where):
    """Zero the cotangent of the elements a ``where=`` mask left out of the reduction."""
    return g if where is True else np.where(where, g, 0)


def count(a, axis, where):
    """How many elements each output of a reduction of ``a`` over ``axis`` combined: a scalar,
    or with a ``where=`` mask an array shaped as the output with ``keepdims=True``."""
    if where is True:
        axes = range(a.ndim) if axis is None else np.atleast_1d(axis) % max(a.ndim, 1)
        return a.dtype.type(math.prod(a.shape[i] for i in axes))
    return np.sum(np.broadcast_to(where, a.shape), axis=axis, keepdims=True).astype(a.dtype)


def as_reduced(a, dtype):
    """The values a reduction given ``dtype=`` combines: NumPy casts its operand to that dtype,
    so a complex operand reduced in a real dtype is its real part (NumPy's own call discards
    the imaginary part, with its ComplexWarning), and the derivatives are the real part's."""
    if dtype is not None and np.iscomplexobj(a) and np.dtype(dtype).kind != "c":
        return np.real(a)
    return a


def reverse_cumsum(g, axis):
    """``out[k] = sum(g[k:])`` along ``axis``: the transpose of a cumulative sum."""
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


########################################################################################
# sum, mean, nansum, nanmean


@defrule(np.sum, leading=1)
def sum_(a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.sum(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    where = kwargs.get("where", True)
    shape = a.shape
    if axis is None and dtype is None and not keepdims and not kwargs:
        # a plain cotangent spread as ``_sum_for``'s (tracing's fast path, a compiled
        # replay): an array of its own, not a broadcast, which NumPy's loops add to a shadow
        # with other NaNs (a traced one, of a nested differentiation: broadcast)
        layout = shape, a.dtype
        return y, lambda dy: _spread(dy, layout) if isinstance(dy, (np.ndarray, np.generic)) \
            else (expand(dy, shape, None, False),)
    return y, lambda dy: (masked(expand(dy, shape, axis, keepdims), where),)


def _sum_for(dims, kwargs):
    """``(forward, back, held)`` of ``np.sum`` over every axis with no settings, as plain
    functions (a compiled replay calls them rather than the rule and the closure it makes):
    ``np.add.reduce``, which ``np.sum`` calls, and the cotangent spread over the operand's
    shape, an array of its own (the values of ``back``'s broadcast, which the shadows copy),
    from what ``held`` keeps of the operand, its shape and dtype (as the rule's closure keeps
    its shape, not the operand); None otherwise."""
    return None if kwargs else (_sum_all, _spread, _layout)


def _sum_all(a):
    return np.add.reduce(a, axis=None)


def _layout(a):
    return np.shape(a), a.dtype


def _spread(dy, layout):
    shape, dtype = layout
    return (np.full(shape, dy, dtype),)


sum_.specialized = _sum_for


@defrule((np.add, "reduce"), leading=1)
def add_reduce(a, axis=0, **kwargs):
    return sum_(a, axis, **kwargs)


# An additive starting value (initial=) is a constant: it stays out of the tangent.
deflinear(np.sum, (np.add, "reduce"), offsets=("initial",))


@defrule(np.mean, leading=1)
def mean(a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    where = kwargs.get("where", True)
    template = Template(a)

    def back(dy):
        share = expand(dy, template.shape, axis, keepdims) / count(template, axis, where)
        return (masked(share, where),)

    return y, back


deflinear(np.mean)


def present_of(a, where):
    """The elements a NaN-skipping reduction combines: not NaN, and in ``where``."""
    present = ~np.isnan(a)
    return present if where is True else present & where


def nan_skipping_rules(func, average):
    """The rule and forward rule of ``func``, np.nansum or (``average``) np.nanmean: a sum or
    mean of the elements ``present_of`` finds, so the cotangent spreads over those alone
    (equally, for a mean) and the tangent sums (averages) theirs alone, even a NaN one. An
    all-NaN slice of a mean (y is NaN) passes nothing. ``initial=`` is a constant."""

    def rule(a, axis=None, dtype=None, *, keepdims=False, **kwargs):
        y = from_user_line(func, a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
        present = present_of(a, kwargs.get("where", True))
        # (at least 1: an all-NaN slice's share, 0/0, is not taken, nor warned about)
        combined = np.maximum(count(a, axis, present), 1) if average else None
        shape = a.shape

        def back(dy):
            share = expand(dy, shape, axis, keepdims)
            return (np.where(present, share if combined is None else share / combined, 0),)

        return y, back

    def jvp(tangents, a, axis=None, dtype=None, *, keepdims=False, **kwargs):
        y = from_user_line(func, a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
        present = present_of(a, kwargs.get("where", True))
        dy = np.sum(np.where(present, tangents[0], 0.0), axis=axis, dtype=dtype,
                    keepdims=keepdims)
        if average:
            dy = dy / np.maximum(np.sum(present, axis=axis, keepdims=keepdims), 1)
        return y, dy

    return rule, jvp


for _func, _average in ((np.nansum, False), (np.nanmean, True)):
    _rule, _jvp = nan_skipping_rules(_func, _average)
    defrule(_func, leading=1)(_rule)
    defjvp(_func, leading=1)(_jvp)


########################################################################################
# prod


def divides_inexactly(a, axis, factors_kwargs):
    """Whether some product of ``a`` over ``axis`` is not finite and normal, so that ``prod / a``
    is not the product of the other elements: a zero factor (0 / 0), an infinite or NaN one
    (inf / inf, NaN at the elements beside it), or a product that overflows or underflows
    (inf / a, 0 / a where the others' product is finite). Which formula ``product_of_others``
    takes, decided when the product is computed."""
    where = factors_kwargs.get("where", True)
    factors = a if where is True else np.where(where, a, 1)
    if np.result_type(factors).kind not in "fc":
        return bool(np.any(factors == 0))
    with np.errstate(all="ignore"):
        size = np.abs(np.prod(factors, axis=axis, **factors_kwargs))
    return not bool(np.all(size >= np.finfo(size.dtype).tiny)) or not bool(
        np.all(np.isfinite(size)))


def product_of_others(a, axis, factors_kwargs, inexact):
    """For each element, the product of the other elements reduced with it, exact with zeros,
    infinities, NaNs and products beyond the floats.

    Where every product is finite and normal that is ``prod / a``. Else (``inexact``:
    ``divides_inexactly``) it is the product of the elements before times that of the elements
    after (exclusive cumulative products): no division, so with one zero it is the product of
    the non-zero elements at the zero and 0 elsewhere, with two or more 0 everywhere (as HIPS
    autograd's and JAX's gradients of ``prod``), beside an infinity or a NaN the product of the
    others, and its own derivatives are exact there too, so second derivatives of ``prod`` are
    right at zeros.
    """
    where = factors_kwargs.get("where", True)
    factors = a if where is True else np.where(where, a, 1)  # left-out elements count as 1
    if inexact:
        others = _exclusive_products(factors, axis)
        initial = factors_kwargs.get("initial", np._NoValue)
        if initial is not np._NoValue:
            others = others * initial
        return masked(others, where)
    product = np.prod(factors, axis=axis, keepdims=True, **factors_kwargs)
    return masked(product / factors, where)


def _exclusive_products(a, axis):
    """``prod(a[others])`` over the elements reduced with each, as the product of the elements
    before it times that of the elements after it, the reduced axes flattened in C order."""
    axes = tuple(range(a.ndim)) if axis is None or a.ndim == 0 else tuple(
        i % a.ndim for i in ((axis,) if np.ndim(axis) == 0 else axis))
    last = tuple(range(a.ndim - len(axes), a.ndim))
    moved = np.moveaxis(a, axes, last)
    flat = np.reshape(moved, moved.shape[:a.ndim - len(axes)] + (-1,))
    one = np.ones_like(flat[..., :1])
    before = np.cumprod(np.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    after = np.flip(np.cumprod(np.concatenate([one, np.flip(flat, -1)[..., :-1]], axis=-1),
                               axis=-1), -1)
    return np.moveaxis(np.reshape(before * after, moved.shape), last, axes)


@defrule(np.prod, leading=1)
def prod(a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.prod(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    a = as_reduced(a, dtype)
    inexact = divides_inexactly(a, axis, kwargs)
    # a zero cotangent gives zero beside an infinite or NaN product of the others (times):
    # an element of another output's column has no derivative there
    return y, lambda dy: (masked(times(expand(dy, a.shape, axis, keepdims),
                                       product_of_others(a, axis, kwargs, inexact)),
                                 kwargs.get("where", True)),)


@defjvp(np.prod, leading=1)
def prod_jvp(tangents, a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.prod(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    da, a = as_reduced(tangents[0], dtype), as_reduced(a, dtype)
    others = product_of_others(a, axis, kwargs, divides_inexactly(a, axis, kwargs))
    # a left-out element is not read: its tangent, even infinite, does not count; a zero
    # tangent contributes zero, beside an infinite or NaN product of the others too (times)
    return y, np.sum(masked(times(da, others), kwargs.get("where", True)), axis=axis,
                     keepdims=keepdims)


@defrule((np.multiply, "reduce"), leading=1)
def multiply_reduce(a, axis=0, **kwargs):
    return prod(a, axis, **kwargs)


@defjvp((np.multiply, "reduce"), leading=1)
def multiply_reduce_jvp(tangents, a, axis=0, **kwargs):
    return prod_jvp(tangents, a, axis, **kwargs)


@defrule(np.nanprod, leading=1)
def nanprod(a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.nanprod(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    a = as_reduced(a, dtype)
    present = ~np.isnan(a)
    inexact = divides_inexactly(np.where(present, a, 1), axis, kwargs)

    def back(dy):
        others = product_of_others(np.where(present, a, 1), axis, kwargs, inexact)
        return (np.where(present, expand(dy, a.shape, axis, keepdims) * others, 0),)

    return y, back


@defjvp(np.nanprod, leading=1)
def nanprod_jvp(tangents, a, axis=None, dtype=None, *, keepdims=False, **kwargs):
    y = np.nanprod(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    da, a = as_reduced(tangents[0], dtype), as_reduced(a, dtype)
    present = ~np.isnan(a)
    factors = np.where(present, a, 1)
    others = product_of_others(factors, axis, kwargs, divides_inexactly(factors, axis, kwargs))
    return y, np.sum(np.where(present, times(da, others), 0), axis=axis, keepdims=keepdims)


########################################################################################
# max, min, ptp


def extremes(a, y, axis, keepdims, where):
    """Which elements of ``a`` equal the extreme value ``y`` they were reduced to. NaNs equal
    nothing, so a NaN result passes no derivative at all."""
    hit = a == expand(y, a.shape, axis, keepdims)
    return hit if where is True else hit & where


def ties_of(a, y, axis, keepdims, where=True):
    """The elements of ``a`` equal to the extreme ``y`` they were reduced to, and how many share
    each extreme (at least 1): taken when the reduction runs, for ``share_among_extremes``."""
    hit = extremes(a, y, axis, keepdims, where)
    return hit, np.maximum(np.sum(hit, axis=axis, keepdims=True), 1)


def share_among_extremes(dy, ties, axis, keepdims):
    """The cotangent of an extreme value, split equally among the elements equal to it (JAX's
    convention for ties), as ``ties_of`` found them."""
    hit, count = ties
    return np.where(hit, expand(dy, hit.shape, axis, keepdims) / count, 0)


def mean_over_extremes(da, a, y, axis, keepdims, where=True):
    """The tangent of an extreme value: the mean of the tangents of the elements equal to it,
    the transpose of ``share_among_extremes``."""
    hit = extremes(a, y, axis, keepdims, where)
    ties = np.maximum(np.sum(hit, axis=axis, keepdims=keepdims), 1)
    return np.sum(np.where(hit, da, 0.0), axis=axis, keepdims=keepdims) / ties


def as_compared(a, y, dtype):
    """The elements as a maximum or minimum reduction given ``dtype=`` (a ufunc's ``reduce``)
    compared them, cast into it: which of them equal the extreme ``y``."""
    a = as_reduced(a, dtype)
    return a if dtype is None else a.astype(np.result_type(y), copy=False)


def extreme_rule(forward):
    """The rule of ``forward``, one of NumPy's maximum or minimum reductions."""

    def rule(a, axis=None, *, keepdims=False, **kwargs):
        y = from_user_line(forward, a, axis=axis, keepdims=keepdims, **kwargs)
        ties = ties_of(as_compared(a, y, kwargs.get("dtype")), y, axis, keepdims,
                       kwargs.get("where", True))
        return y, lambda dy: (share_among_extremes(dy, ties, axis, keepdims),)

    rule.__name__ = rule.__qualname__ = forward.__name__
    return rule


def extreme_jvp(forward):
    """The forward rule of ``forward``, one of NumPy's maximum or minimum reductions."""

    def jvp(tangents, a, axis=None, *, keepdims=False, **kwargs):
        y = from_user_line(forward, a, axis=axis, keepdims=keepdims, **kwargs)
        dtype = kwargs.get("dtype")
        return y, mean_over_extremes(as_reduced(tangents[0], dtype), as_compared(a, y, dtype), y,
                                     axis, keepdims, kwargs.get("where", True))

    jvp.__name__ = jvp.__qualname__ = f"{forward.__name__}_jvp"
    return jvp


for _forward in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin):
    defrule(_forward, leading=1)(extreme_rule(_forward))
    defjvp(_forward, leading=1)(extreme_jvp(_forward))

for _ufunc in (np.maximum, np.minimum):
    defrule((_ufunc, "reduce"), leading=1)(functools.partial(extreme_rule(_ufunc.reduce), axis=0))
    defjvp((_ufunc, "reduce"), leading=1)(functools.partial(extreme_jvp(_ufunc.reduce), axis=0))


@defrule(np.ptp, leading=1)
def ptp(a, axis=None, *, keepdims=False):
    top = np.max(a, axis=axis, keepdims=keepdims)
    bottom = np.min(a, axis=axis, keepdims=keepdims)
    top_ties, bottom_ties = ties_of(a, top, axis, keepdims), ties_of(a, bottom, axis, keepdims)

    def back(dy):
        return (share_among_extremes(dy, top_ties, axis, keepdims)
                - share_among_extremes(dy, bottom_ties, axis, keepdims),)

    return np.subtract(top, bottom), back  # (NumPy's ufunc: "overflow encountered in subtract")


@defjvp(np.ptp, leading=1)
def ptp_jvp(tangents, a, axis=None, *, keepdims=False):
    da = tangents[0]
    top = np.max(a, axis=axis, keepdims=keepdims)
    bottom = np.min(a, axis=axis, keepdims=keepdims)
    return np.subtract(top, bottom), (mean_over_extremes(da, a, top, axis, keepdims)
                          - mean_over_extremes(da, a, bottom, axis, keepdims))


########################################################################################
# var, std


def variance_gradient(a, axis, ddof, where, mean=None, dtype=None):
    """d var / d a = 2 (a - mean) / (n - ddof) over the elements a ``where=`` mask keeps; the
    callers mask its products, as the left-out elements are not read (0 even where the
    derivative or the cotangent is NaN or infinite: a slice of no more than ddof elements).
    ``mean``: the constant mean NumPy was given (``mean=``), which it centres on instead.
    Otherwise the mean is NumPy's, taken in ``dtype``: of complex values in a real dtype, the
    mean of their real parts (the real part of the centred values then sums to zero, so the
    mean's own change drops out of the derivative, as for the mean of the values)."""
    n = count(a, axis, where)
    if mean is not None:
        return (2 / (n - ddof)) * (a - mean)
    with warnings.catch_warnings():  # of an empty slice: NumPy's np.var has warned
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        centred = a - np.mean(a, axis=axis, keepdims=True, where=where, dtype=dtype)
    return (2 / (n - ddof)) * centred


def variance_cotangent(dy, a, axis, keepdims, ddof, where, mean=None, dtype=None):
    """The variance is real even in a complex dtype: the imaginary part of a cotangent of one
    has nothing to act on."""
    return masked(expand(np.real(dy), a.shape, axis, keepdims)
                  * variance_gradient(a, axis, ddof, where, mean, dtype), where)


def variance_tangent(da, a, axis, keepdims, ddof, where, mean=None, dtype=None):
    """The gradient's inner product with ``da``: for complex ``a``, Re(conj(gradient) da), the
    real variance's change (NumPy's variance of complex values is that of |a - mean|)."""
    g = variance_gradient(a, axis, ddof, where, mean, dtype)
    product = np.real(np.conjugate(g) * da) if np.iscomplexobj(g) else times(da, g)
    return np.sum(masked(product, where), axis=axis, keepdims=keepdims)


VARIANCE_MEAN = {"mean": (3, None)}
"""np.var's and np.std's keyword-only ``mean=``, differentiated at position 3 of their rules,
the place of ``out``, which rules take apart (None: no mean given)."""


def mean_cotangent(da, mean):
    """The cotangent of the ``mean=`` a variance centred on, of the cotangent ``da`` of its
    ``a``: the variance reads ``a - mean``."""
    return None if mean is None else -unbroadcast(da, np.shape(mean))


def centred_tangent(da, dmean, a):
    """The change of ``a - mean`` of the changes of ``a`` and of ``mean=``."""
    if dmean is None:
        return da
    return np.broadcast_to(-dmean, np.shape(a)) if da is None else da - dmean


def _variance(func, a, axis, dtype, mean, ddof, keepdims, kwargs):
    if mean is not None:
        kwargs = {**kwargs, "mean": mean}
    return func(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, **kwargs)


@defrule(np.var, leading=4, keywords=VARIANCE_MEAN)
def var(a, axis=None, dtype=None, mean=None, *, ddof=0, keepdims=False, **kwargs):
    y = _variance(np.var, a, axis, dtype, mean, ddof, keepdims, kwargs)
    ddof = kwargs.get("correction", ddof)
    where = kwargs.get("where", True)

    def back(dy):
        da = variance_cotangent(dy, a, axis, keepdims, ddof, where, mean, dtype)
        return (da, None, None, mean_cotangent(da, mean))

    return y, back


@defjvp(np.var)
def var_jvp(tangents, a, axis=None, dtype=None, mean=None, *, ddof=0, keepdims=False,
            **kwargs):
    da, dmean = (tuple(tangents) + (None,) * 4)[0:4:3]
    y = _variance(np.var, a, axis, dtype, mean, ddof, keepdims, kwargs)
    if da is None and dmean is None:
        return y, None
    ddof = kwargs.get("correction", ddof)
    return y, variance_tangent(centred_tangent(da, dmean, a), a, axis, keepdims, ddof,
                               kwargs.get("where", True), mean, dtype)


@defrule(np.std, leading=4, keywords=VARIANCE_MEAN)
def std(a, axis=None, dtype=None, mean=None, *, ddof=0, keepdims=False, **kwargs):
    y = _variance(np.std, a, axis, dtype, mean, ddof, keepdims, kwargs)
    ddof = kwargs.get("correction", ddof)
    where = kwargs.get("where", True)
    # d std = d var / (2 std); a constant slice (std 0) gets 0, its one-sided limit.
    safe = np.where(y == 0, np.inf, 2 * y)

    def back(dy):
        da = variance_cotangent(dy / safe, a, axis, keepdims, ddof, where, mean, dtype)
        return (da, None, None, mean_cotangent(da, mean))

    return y, back


@defjvp(np.std)
def std_jvp(tangents, a, axis=None, dtype=None, mean=None, *, ddof=0, keepdims=False,
            **kwargs):
    da, dmean = (tuple(tangents) + (None,) * 4)[0:4:3]
    y = _variance(np.std, a, axis, dtype, mean, ddof, keepdims, kwargs)
    if da is None and dmean is None:
        return y, None
    ddof = kwargs.get("correction", ddof)
    d_variance = variance_tangent(centred_tangent(da, dmean, a), a, axis, keepdims, ddof,
                                  kwargs.get("where", True), mean, dtype)
    # as the reverse rule: 0 at std 0; a zero change of the variance (a direction along
    # elements where= leaves out) is zero beside a NaN or infinite std too
    return y, np.where(d_variance == 0, d_variance, d_variance / np.where(y == 0, np.inf, 2 * y))


########################################################################################
# cumsum, cumprod


@defrule(np.cumsum, leading=1)
def cumsum(a, axis=None, dtype=None):
    y = np.cumsum(a, axis=axis, dtype=dtype)
    if axis is None or a.ndim == 0:  # both flatten: a 0-d input's axis 0 gives shape (1,)
        shape = a.shape
        return y, lambda dy: (reverse_cumsum(dy, 0).reshape(shape),)
    return y, lambda dy: (reverse_cumsum(dy, axis),)


@defrule((np.add, "accumulate"), leading=1)
def add_accumulate(a, axis=0, dtype=None):
    return cumsum(a, axis, dtype)


deflinear(np.cumsum, (np.add, "accumulate"))


def _bounds(indices, n):
    """The segment ``(start, end)`` along the axis of each output of ``ufunc.reduceat``, as
    NumPy defines them: up to the next index, or the one element ``start`` where the indices do
    not go up, the last segment up to ``n``."""
    indices = np.asarray(indices).tolist()  # an index has no derivative
    return [(start, end if start < end else start + 1)
            for start, end in zip(indices, [*indices[1:], n])]


def _segments(indices, n):
    """The elements each output of ``ufunc.reduceat`` reduces: pairs ``(k, j)`` of an element
    ``k`` (along the axis) and an output ``j``."""
    bounds = _bounds(indices, n)
    ks = [k for start, end in bounds for k in range(start, end)]
    js = [j for j, (start, end) in enumerate(bounds) for _ in range(start, end)]
    return np.array(ks, dtype=np.intp), np.array(js, dtype=np.intp)


@defrule((np.add, "reduceat"), leading=1)
def add_reduceat(a, indices, axis=0, dtype=None):
    """Segment sums, NumPy's own; each element's cotangent is the sum of those of the outputs
    whose segments hold it (segments overlap where the indices go down)."""
    y = np.add.reduceat(a, indices, axis=axis, dtype=dtype)
    axis = axis % a.ndim
    ks, js = _segments(indices, a.shape[axis])

    def back(dy):
        g = np.zeros_like(dy, shape=np.moveaxis(np.empty(a.shape), axis, 0).shape)
        ufunc_at(np.add, g, ks, np.take(np.moveaxis(dy, axis, 0), js, axis=0))
        return (np.moveaxis(g, 0, axis),)

    return y, back


def _segment_others(a, indices, axis):
    """``(ks, js, others)``: the pairs of ``_segments`` along ``axis`` (moved first) and, for
    each, the product of the other elements of output ``j``'s segment (``product_of_others``:
    exact with zeros)."""
    moved = np.moveaxis(a, axis, 0)
    bounds = _bounds(indices, moved.shape[0])
    ks, js = _segments(indices, moved.shape[0])
    others = [product_of_others(segment, 0, {}, divides_inexactly(segment, 0, {}))
              for segment in (moved[start:end] for start, end in bounds)]
    return ks, js, np.concatenate(others) if others else moved[:0]


@defrule((np.multiply, "reduceat"), leading=1)
def multiply_reduceat(a, indices, axis=0, dtype=None):
    """Segment products, NumPy's own; each element's cotangent sums, over the outputs whose
    segments hold it, that output's cotangent times the product of the segment's other
    elements."""
    y = np.multiply.reduceat(a, indices, axis=axis, dtype=dtype)
    axis = axis % a.ndim
    ks, js, others = _segment_others(a, indices, axis)

    def back(dy):
        terms = np.take(np.moveaxis(dy, axis, 0), js, axis=0) * others
        # (made like the terms, which carry the derivative of ``others`` under an enclosing
        # differentiation where dy carries none)
        g = np.zeros_like(terms, shape=np.moveaxis(np.empty(a.shape), axis, 0).shape)
        ufunc_at(np.add, g, ks, terms)
        return (np.moveaxis(g, 0, axis),)

    return y, back


@defjvp((np.multiply, "reduceat"), leading=1)
def multiply_reduceat_jvp(tangents, a, indices, axis=0, dtype=None):
    y = np.multiply.reduceat(a, indices, axis=axis, dtype=dtype)
    axis = axis % a.ndim
    ks, js, others = _segment_others(a, indices, axis)
    terms = np.take(np.moveaxis(tangents[0], axis, 0), ks, axis=0) * others
    dy = np.zeros_like(terms, shape=(len(np.atleast_1d(indices)), *terms.shape[1:]))
    ufunc_at(np.add, dy, js, terms)
    return y, np.moveaxis(dy, 0, axis)


deflinear((np.add, "reduceat"))


def divides_inexactly_along(y, zero, axis):
    """Whether ``y = cumprod(x, axis)`` is not finite and normal up to ``x``'s first zero (as
    ``divides_inexactly`` for ``prod``), so that ``y / x`` is not the product of the other
    factors: the derivatives are then taken step by step (``_cumprod_cotangent_in_order``)."""
    if y.dtype.kind not in "fc" or y.size == 0:
        return False
    with np.errstate(all="ignore"):
        size = np.abs(y)
    before_first_zero = np.cumsum(zero, axis=axis) == 0
    return not bool(np.all(np.isfinite(size))) or bool(
        np.any((size < np.finfo(size.dtype).tiny) & before_first_zero))


def _cumprod_cotangent_in_order(dy, x, y, axis):
    """The cotangent of ``x`` for ``y = cumprod(x, axis)`` by the chain rule through NumPy's
    steps ``y[i] = y[i - 1] x[i]``, from the last: exact whatever the factors (zeros,
    infinities, NaNs) and the products (beyond the floats), where ``cumprod_cotangent``'s
    division by ``x`` is not. A zero cotangent contributes zero beside an infinite factor
    (``times``)."""
    dy, x, y = (np.moveaxis(v, axis, 0) for v in (dy, x, y))
    n = x.shape[0]
    g = [dy[n - 1]] * n
    for i in range(n - 1, 0, -1):
        carried = g[i]
        g[i] = times(carried, y[i - 1])
        g[i - 1] = dy[i - 1] + times(carried, x[i])
    return np.moveaxis(np.stack(g), 0, axis)


def _cumprod_tangent_in_order(dx, x, y, axis):
    """The tangent of ``y = cumprod(x, axis)`` step by step, ``dy[i] = dy[i - 1] x[i] +
    y[i - 1] dx[i]``: the transpose of ``_cumprod_cotangent_in_order``."""
    dx, x, y = (np.moveaxis(v, axis, 0) for v in (dx, x, y))
    dy = [dx[0]]
    for i in range(1, x.shape[0]):
        dy.append(times(dy[i - 1], x[i]) + times(y[i - 1], dx[i]))
    return np.moveaxis(np.stack(dy), 0, axis)


def cumprod_cotangent(dy, x, y, axis, zero, stepwise=False):
    """The cotangent of ``x`` for ``y = cumprod(x, axis)``, without dividing by zero.

    ``dx[k] = sum_{i >= k} dy[i] prod_{j <= i, j != k} x[j]``. Before the first zero ``z``
    along the axis the terms with ``i >= z`` vanish and ``x[k] != 0``, so
    ``dx[k] = sum_{i >= k} dy[i] y[i] / x[k]``. At ``z`` it is the same sum over the cumulative
    product with ``x[z]`` replaced by 1; after ``z`` every term holds ``x[z]`` and is 0.

    Under nested reverse mode (``x`` traced by an outer differentiation) those zeros after
    ``z`` are written as ``x[z]`` times their cofactor, which is 0 but has the right
    derivative, so second derivatives are exact at zeros too: between ``z`` and the second
    zero ``z2`` the cofactor is the sum above with ``x[z]`` replaced by 1, at ``z2`` the sum with
    both replaced by 1; past ``z2`` every term holds ``x[z] x[z2]``, whose derivatives vanish.
    ``zero`` is where ``x`` was 0 when the product was computed; ``stepwise``
    (``divides_inexactly_along``) where ``y`` was not finite and normal before it.
    """
    if stepwise:
        return _cumprod_cotangent_in_order(dy, x, y, axis)
    zeros_so_far = np.cumsum(zero, axis=axis)
    before_first_zero = zeros_so_far == 0
    g = np.where(before_first_zero,
                 reverse_cumsum(dy * y, axis) / np.where(before_first_zero, x, 1), 0)
    first_zero = zero & (zeros_so_far == 1)
    if first_zero.any():
        y_without_first_zero = np.cumprod(np.where(first_zero, 1, x), axis=axis)
        from_first_zero = reverse_cumsum(dy * y_without_first_zero, axis)
        g = g + np.where(first_zero, from_first_zero, 0)
        if wrapped(x):
            x_first_zero = np.sum(np.where(first_zero, x, 0), axis=axis, keepdims=True)
            between = (zeros_so_far == 1) & ~zero
            g = g + x_first_zero * np.where(between, from_first_zero / np.where(between, x, 1), 0)
            second_zero = zero & (zeros_so_far == 2)
            if second_zero.any():
                y_without_two = np.cumprod(np.where(first_zero | second_zero, 1, x), axis=axis)
                g = g + x_first_zero * np.where(
                    second_zero, reverse_cumsum(dy * y_without_two, axis), 0)
    return g


def cumprod_tangent(dx, x, y, axis):
    """The tangent of ``y = cumprod(x, axis)``, without dividing by zero.

    ``dy[i] = sum_{k <= i} dx[k] prod_{j <= i, j != k} x[j]``. Before the first zero ``z``
    along the axis that is ``y[i] sum_{k <= i} dx[k] / x[k]``. From ``z`` on every term but
    ``k = z`` holds ``x[z] = 0``: ``dy[i] = dx[z]`` times the cumulative product with ``x[z]``
    replaced by 1, which is 0 past a second zero.

    When ``x`` is traced by a reverse pass over this rule (``hvp``), the vanishing terms are
    kept as ``x[z]`` times their cofactor, as in ``cumprod_cotangent``, so that the reverse
    pass differentiates them right: from ``z`` to the second zero ``z2``,
    ``x[z] y'[i] sum_{k <= i, k != z} dx[k] / x[k]`` (``y'`` the cumulative product with ``x[z]``
    replaced by 1), and from ``z2`` on ``x[z] dx[z2] y''[i]`` (both zeros replaced by 1).
    """
    zero = x == 0
    if divides_inexactly_along(y, zero, axis):
        return _cumprod_tangent_in_order(dx, x, y, axis)
    zeros_so_far = np.cumsum(zero, axis=axis)
    before_first_zero = zeros_so_far == 0
    ratios = np.where(before_first_zero, dx / np.where(before_first_zero, x, 1), 0)
    dy = np.where(before_first_zero, y * np.cumsum(ratios, axis=axis), 0)
    first_zero = zero & (zeros_so_far == 1)
    if first_zero.any():
        at_zero = np.sum(np.where(first_zero, dx, 0), axis=axis, keepdims=True)
        y_without_first_zero = np.cumprod(np.where(first_zero, 1, x), axis=axis)
        dy = dy + np.where(before_first_zero, 0, at_zero * y_without_first_zero)
        if wrapped(x):
            x_first_zero = np.sum(np.where(first_zero, x, 0), axis=axis, keepdims=True)
            others = np.cumsum(np.where(zero, 0, dx / np.where(zero, 1, x)), axis=axis)
            dy = dy + np.where(zeros_so_far == 1,
                               x_first_zero * y_without_first_zero * others, 0)
            second_zero = zero & (zeros_so_far == 2)
            if second_zero.any():
                at_second = np.sum(np.where(second_zero, dx, 0), axis=axis, keepdims=True)
                y_without_two = np.cumprod(np.where(first_zero | second_zero, 1, x), axis=axis)
                dy = dy + np.where(zeros_so_far >= 2,
                                   x_first_zero * at_second * y_without_two, 0)
    return dy


@defrule(np.cumprod, leading=1)
def cumprod(a, axis=None, dtype=None):
    y = np.cumprod(a, axis=axis, dtype=dtype)
    a = as_reduced(a, dtype)
    if axis is None or a.ndim == 0:  # both flatten: a 0-d input's axis 0 gives shape (1,)
        x, zero = a.reshape(-1), np.ravel(a) == 0
        stepwise = divides_inexactly_along(y, zero, 0)
        return y, lambda dy: (cumprod_cotangent(dy, x, y, 0, zero, stepwise).reshape(a.shape),)
    zero = a == 0
    stepwise = divides_inexactly_along(y, zero, axis)
    return y, lambda dy: (cumprod_cotangent(dy, a, y, axis, zero, stepwise),)


@defjvp(np.cumprod, leading=1)
def cumprod_jvp(tangents, a, axis=None, dtype=None):
    y = np.cumprod(a, axis=axis, dtype=dtype)
    da, a = as_reduced(tangents[0], dtype), as_reduced(a, dtype)
    if axis is None or a.ndim == 0:  # both flatten: a 0-d input's axis 0 gives shape (1,)
        return y, cumprod_tangent(np.ravel(da), np.ravel(a), y, 0)
    return y, cumprod_tangent(da, a, y, axis)


@defrule((np.multiply, "accumulate"), leading=1)
def multiply_accumulate(a, axis=0, dtype=None):
    return cumprod(a, axis, dtype)


@defjvp((np.multiply, "accumulate"), leading=1)
def multiply_accumulate_jvp(tangents, a, axis=0, dtype=None):
    return cumprod_jvp(tangents, a, axis, dtype)


########################################################################################
# median, quantile, percentile and their NaN-skipping variants
#
# Each is (1 - g) s[lo] + g s[hi], s the sorted elements of a slice (NaNs last). Which
# elements those are (the permutation, lo and hi) is decided when the rule runs, and back
# spreads the cotangent over them. Tied elements: the gradient goes to those the sort put at lo
# and hi (equal values, so either choice is a valid one-sided derivative, as for np.sort). A
# NaN result passes no derivative, as for max.

def _continuous(alpha, beta):
    """NumPy's virtual index of Hyndman and Fan's continuous methods (_compute_virtual_index)."""
    return lambda n, q: n * q + (alpha + q * (1 - alpha - beta)) - 1


def _discrete(offset, keeps_previous):
    """NumPy's integer index of a discrete method: the element below ``n q - 1 - offset`` where
    ``keeps_previous(gamma, index)``, else the one above, clipped at 0
    (_discrete_interpolation_to_boundaries)."""

    def index(n, q):
        v = n * q - 1 - offset
        below = np.floor(v)
        chosen = np.where(keeps_previous(v - below, v), below, below + 1).astype(np.intp)
        return np.maximum(chosen, 0)

    return index


# NumPy's quantile methods (its _QuantileMethods): the virtual index of a quantile q among n
# sorted elements, the weight of the element above it from the index's fractional part (None
# for the methods whose index is an integer), and d index / d q where the quantile is smooth
# in q (None where it is piecewise constant).
QUANTILE_METHODS = {
    "inverted_cdf": (_discrete(0, lambda g, v: g == 0), None, None),
    "averaged_inverted_cdf": (lambda n, q: n * q - 1,
                              lambda g, v: np.where(g == 0, 0.5, 1.0), None),
    "closest_observation": (_discrete(0.5, lambda g, v: (g == 0) & (np.floor(v) % 2 == 1)),
                            None, None),
    "interpolated_inverted_cdf": (_continuous(0, 1), lambda g, v: g, lambda n: n + 0.0),
    "hazen": (_continuous(0.5, 0.5), lambda g, v: g, lambda n: n + 0.0),
    "weibull": (_continuous(0, 0), lambda g, v: g, lambda n: n + 1.0),
    "linear": (lambda n, q: (n - 1) * q, lambda g, v: g, lambda n: n - 1.0),
    "median_unbiased": (_continuous(1 / 3.0, 1 / 3.0), lambda g, v: g,
                        lambda n: n + 1 / 3.0),
    "normal_unbiased": (_continuous(3 / 8.0, 3 / 8.0), lambda g, v: g,
                        lambda n: n + 1 / 4.0),
    "lower": (lambda n, q: np.floor((n - 1) * q).astype(np.intp), None, None),
    "higher": (lambda n, q: np.ceil((n - 1) * q).astype(np.intp), None, None),
    "midpoint": (lambda n, q: 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q)),
                 lambda g, v: np.where(v % 1 == 0, 0.0, 0.5), None),
    "nearest": (lambda n, q: np.around((n - 1) * q).astype(np.intp), None, None),
}


class OrderStatistics:
    """The decisions of the quantiles ``q`` of ``a`` over ``axis``: the reduced axes moved last
    and flattened (length n), the sort of each slice, and the sorted positions ``lo``, ``hi``
    and weight ``g`` of each quantile (shape ``q.shape + kept``), as NumPy's _quantile takes
    them for ``method``."""

    def __init__(self, a, q, axis, method, skip_nan, taken=None):
        if method not in QUANTILE_METHODS:
            raise UnsupportedOperationError(
                f"a quantile with method={method!r} on traced arrays: mutad differentiates the "
                f"methods {', '.join(QUANTILE_METHODS)}.")
        virtual_index, fix_gamma, index_slope = QUANTILE_METHODS[method]
        xp = self.xp = namespace(memory(a))
        if xp is not np and not is_device(memory(q)):  # q given on the host, for a device's a
            q = xp.asarray(q)
        ndim = np.ndim(a)
        reduced = tuple(range(ndim)) if axis is None else tuple(
            int(i) % ndim for i in np.atleast_1d(axis))
        kept = tuple(i for i in range(ndim) if i not in reduced)
        self.order = kept + reduced
        self.kept_shape = tuple(np.shape(a)[i] for i in kept)
        self.moved_shape = tuple(np.shape(a)[i] for i in self.order)
        self.length = math.prod(np.shape(a)[i] for i in reduced)
        self.q_shape = np.shape(q)
        moved = self.along_last(a)
        self.permutation = np.argsort(moved, axis=-1)  # NaNs last
        self.inverse = np.argsort(self.permutation, axis=-1)
        nan = np.isnan(moved)
        count = np.sum(~nan, axis=-1) if skip_nan else self.length
        # An all-NaN slice (skipping NaNs) or one with a NaN (not skipping them) gives NaN.
        self.nothing = count == 0 if skip_nan else np.any(nan, axis=-1)
        last = np.maximum(count - 1, 0)
        v = virtual_index(count, np.reshape(q, self.q_shape + (1,) * len(kept)))
        if taken is not None:  # weighted: NumPy's element, found by its value among the sorted
            self.lo = self.hi = self.position_of(moved, taken)
            self.g = np.zeros(np.shape(self.lo))
        elif fix_gamma is None:  # an integer index: NumPy takes that element
            self.lo = self.hi = np.minimum(v, last)
            self.g = np.zeros(np.shape(v))
        else:  # NumPy's _get_indexes and _get_gamma: beyond either end, the end element
            below = np.floor(v)
            self.g = fix_gamma(v - below, v)
            beyond = (v >= count - 1) | (v < 0)
            end = np.where(v < 0, 0, last)
            self.lo = np.where(beyond, end, below).astype(np.intp)
            self.hi = np.where(beyond, end, below + 1).astype(np.intp)
        self.smooth_in_q = index_slope is not None
        self.index_slope = index_slope(count) if self.smooth_in_q else None  # d v / d q

    def position_of(self, moved, taken):
        """The sorted position of the first element equal to each quantile ``taken`` (NumPy's
        value, one of the elements: a weighted quantile is, inverted_cdf being the only method
        NumPy weights), 0 where it is NaN (no derivative)."""
        ranked = np.take_along_axis(moved, self.permutation, -1)
        taken = np.reshape(taken, self.q_shape + self.kept_shape)
        equal = ranked == taken[..., None]
        if not np.all(np.any(equal, axis=-1) | self.nothing | np.isnan(taken)):
            raise UnsupportedOperationError(
                "a weighted quantile that is none of the elements: mutad finds NumPy's element "
                "by its value. Compute it without weights= (np.repeat the elements).")
        return np.argmax(equal, axis=-1)

    def along_last(self, x):
        return np.reshape(np.transpose(x, self.order), self.kept_shape + (self.length,))

    def weights(self):
        """The weight of each sorted position in each quantile: ``q.shape + kept + (n,)``."""
        positions = self.xp.arange(self.length)
        lo, hi, g = self.lo[..., None], self.hi[..., None], self.g[..., None]
        w = np.where(positions == lo, 1.0 - g, 0.0) + np.where(positions == hi, g, 0.0)
        return np.where(self.nothing[..., None], 0.0, w)

    def cotangent(self, dy):
        """The cotangent of ``a`` from that of the quantiles, in ``a``'s shape."""
        dy = np.reshape(dy, self.q_shape + self.kept_shape)[..., None] * self.weights()
        by_rank = np.sum(dy, axis=tuple(range(len(self.q_shape))))
        moved = np.reshape(np.take_along_axis(by_rank, self.inverse, -1), self.moved_shape)
        return np.transpose(moved, np.argsort(self.order).tolist())

    def tangent(self, da, shape):
        """The tangent of the quantiles (in ``shape``) from that of ``a``."""
        by_rank = np.take_along_axis(self.along_last(da), self.permutation, -1)
        return np.reshape(np.sum(self.weights() * by_rank, axis=-1), shape)

    def slope(self, a):
        """d quantile / d q: (s[hi] - s[lo]) d v / d q, ``q.shape + kept``."""
        ranked = np.take_along_axis(self.along_last(a), self.permutation, -1)
        shape = self.q_shape + self.kept_shape + (self.length,)
        ranked = np.broadcast_to(ranked, shape)
        gap = np.take_along_axis(ranked, np.broadcast_to(self.hi[..., None], shape[:-1] + (1,)),
                                 -1) - np.take_along_axis(
            ranked, np.broadcast_to(self.lo[..., None], shape[:-1] + (1,)), -1)
        return np.where(self.nothing, 0.0, gap[..., 0] * self.index_slope)


def quantile_rules(func, skip_nan, scale):
    """The rule and forward rule of ``func`` (np.quantile and its kin), whose ``q`` is
    ``scale`` times a quantile. ``overwrite_input``: the composites below then leave ``a`` as
    NumPy does."""

    def rule(a, q, axis=None, overwrite_input=False, method="linear", keepdims=False,
             weights=None):
        y = func(a, q, axis=axis, method=method, keepdims=keepdims, weights=weights)
        statistics = OrderStatistics(a, np.divide(q, scale), axis, method, skip_nan,
                                     None if weights is None else y)
        q_shape = np.shape(q)

        def back(dy):
            dq = None
            if statistics.smooth_in_q:
                per_quantile = np.reshape(dy, q_shape + statistics.kept_shape)
                per_quantile = per_quantile * statistics.slope(a) / scale
                dq = np.sum(per_quantile, axis=tuple(range(len(q_shape), per_quantile.ndim)))
            return statistics.cotangent(dy), dq

        return y, back

    def jvp(tangents, a, q, axis=None, overwrite_input=False, method="linear", keepdims=False,
            weights=None):
        y = func(a, q, axis=axis, method=method, keepdims=keepdims, weights=weights)
        statistics = OrderStatistics(a, np.divide(q, scale), axis, method, skip_nan,
                                     None if weights is None else y)
        da, dq = (tuple(tangents) + (None, None))[:2]
        dy = None if da is None else statistics.tangent(da, np.shape(y))
        if dq is not None and statistics.smooth_in_q:
            dq = np.reshape(dq, np.shape(q) + (1,) * len(statistics.kept_shape))
            from_q = np.reshape(statistics.slope(a) * dq / scale, np.shape(y))
            dy = from_q if dy is None else dy + from_q
        return y, dy

    return rule, jvp


def median_rules(func, skip_nan):
    """The rule and forward rule of ``func`` (np.median or np.nanmedian): a 0.5 quantile."""

    def rule(a, axis=None, overwrite_input=False, keepdims=False):
        y = from_user_line(func, a, axis=axis, keepdims=keepdims)
        statistics = OrderStatistics(a, 0.5, axis, "linear", skip_nan)
        return y, lambda dy: (statistics.cotangent(dy),)

    def jvp(tangents, a, axis=None, overwrite_input=False, keepdims=False):
        y = from_user_line(func, a, axis=axis, keepdims=keepdims)
        statistics = OrderStatistics(a, 0.5, axis, "linear", skip_nan)
        return y, statistics.tangent(tangents[0], np.shape(y))

    return rule, jvp


for _func, _skip_nan, _scale in ((np.quantile, False, 1.0), (np.percentile, False, 100.0),
                                 (np.nanquantile, True, 1.0), (np.nanpercentile, True, 100.0)):
    _rule, _jvp = quantile_rules(_func, _skip_nan, _scale)
    defrule(_func, leading=2)(_rule)
    defjvp(_func)(_jvp)

for _func, _skip_nan in ((np.median, False), (np.nanmedian, True)):
    _rule, _jvp = median_rules(_func, _skip_nan)
    defrule(_func, leading=1)(_rule)
    defjvp(_func, leading=1)(_jvp)


# With overwrite_input=True NumPy's median, quantile and percentile (and their NaN-skipping
# forms) partition their input in place (np.nanmedian writes values over its NaNs), and a
# later read of it sees what NumPy left there: the rule takes the statistic, then the same
# elements are written into the input.

def _reduced_by_numpy(a, axis):
    """The array NumPy's reduction runs on and the axis along which it partitions it: ``a``, or
    ``a.ravel()`` for axis None, or (_ureduce) for several axes the kept axes first and the
    reduced ones merged last: each a view of ``a`` or a copy, as NumPy makes it."""
    if axis is None:
        return a.ravel(), 0
    ndim = np.ndim(a)
    axes = np.lib.array_utils.normalize_axis_tuple(axis, ndim)
    if len(axes) == 1:
        return a, axes[0]
    for i, kept in enumerate(sorted(set(range(ndim)) - set(axes))):
        a = a.swapaxes(i, kept)
    return a.reshape(np.shape(a)[:ndim - len(axes)] + (-1,)), -1


def _sources(before, after):
    """For each element of ``after`` (a 1-d array of NumPy's), the index of the element of
    ``before`` whose bytes it holds: equal ones paired in order (so that a reordering is a
    permutation), an extra copy (np.nanmedian writes the values after a NaN over it) taken
    from the last of them."""
    size = before.dtype.itemsize
    keys = (lambda v: v.view(f"u{size}")) if size in (1, 2, 4, 8) else (lambda v: v)
    kb, ka = keys(before), keys(after)
    ob, oa = np.argsort(kb, kind="stable"), np.argsort(ka, kind="stable")
    sb, sa = kb[ob], ka[oa]
    left, right = np.searchsorted(sb, sa, "left"), np.searchsorted(sb, sa, "right")
    if np.any(left == right):
        return None
    rank = np.arange(len(sa)) - np.searchsorted(sa, sa, "left")  # among its equals
    sources = np.empty(len(sa), np.intp)
    sources[oa] = ob[left + np.minimum(rank, right - left - 1)]
    return sources


def _left_by_numpy(func, a, axis, settings):
    """What ``func(a, axis=axis, overwrite_input=True, **settings)`` leaves in ``a``: the
    elements NumPy's own call leaves in a copy of the values, found by their bytes along the
    axis (tied elements: either, the same bytes). Returns the array NumPy reduces, the axis,
    the index of each element's source along it, and whether that is a reordering; None for
    an empty array."""
    part, along = _reduced_by_numpy(a, axis)
    # the elements found from this call's values: a replay recording it traces it each time
    before = np.array(settled(part, f"np.{func.__name__}(..., overwrite_input=True), whose "
                                    "reordering of its input depends on its values"))
    if before.size == 0:
        return None
    after = before.copy()
    with warnings.catch_warnings():  # NumPy's warnings were the rule's call's to give
        warnings.simplefilter("ignore")
        func(after, axis=along, overwrite_input=True, **settings)
    rows_before = np.moveaxis(before, along, -1).reshape(-1, before.shape[along])
    rows_after = np.moveaxis(after, along, -1).reshape(rows_before.shape)
    sources = np.empty(rows_before.shape, np.intp)
    for i, (row_before, row_after) in enumerate(zip(rows_before, rows_after)):
        found = _sources(row_before, row_after)
        if found is None:
            raise UnsupportedOperationError(
                f"np.{func.__name__}(..., overwrite_input=True) of a differentiated array: "
                "NumPy left values in it that were not there. Pass overwrite_input=False.")
        sources[i] = found
    reorders = bool(np.all(np.sort(sources, axis=-1) == np.arange(sources.shape[-1])))
    moved = np.moveaxis(before, along, -1).shape
    return part, along, np.moveaxis(sources.reshape(moved), -1, along), reorders


def _overwriting(a, overwrite_input):
    """Whether NumPy's call writes into ``a`` (not a list, of which it makes an array of its
    own, nor a 0-d array, of one element)."""
    return overwrite_input and np.ndim(a) > 0 and hasattr(a, "partition")


def _overwritten(func, a, axis, settings, statistic):
    """``statistic()``, the rule's value, with ``a`` left as NumPy's call leaves it: reordered
    first (the same values: an array the rule reads as a constant is then not written after),
    or, where NumPy writes values over others (np.nanmedian over its NaNs), after it."""
    left = _left_by_numpy(func, a, axis, settings)
    if left is None:
        return statistic()
    part, along, sources, reorders = left
    if reorders:
        part[...] = np.take_along_axis(part, sources, axis=along)
        return statistic()
    y = statistic()
    part[...] = np.take_along_axis(part, sources, axis=along)
    return y


def _median_overwriting(func):
    def composite(a, axis=None, out=None, overwrite_input=False, keepdims=False):
        if not _overwriting(a, overwrite_input):
            return NotImplemented
        return _overwritten(func, a, axis, {},
                            lambda: func(a, axis=axis, out=out, keepdims=keepdims))
    return composite


for _func in (np.median, np.nanmedian):
    defcomposite(_func)(_median_overwriting(_func))


def _quantile_overwriting(func):
    def composite(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
        if not _overwriting(a, overwrite_input) or interpolation is not None:
            return NotImplemented
        settings = {"q": np.array(memory(q)), "method": method,
                    "weights": None if weights is None else np.array(memory(weights))}
        return _overwritten(func, a, axis, settings, lambda: func(
            a, q, axis=axis, out=out, method=method, keepdims=keepdims, weights=weights))
    return composite


for _func in (np.quantile, np.percentile, np.nanquantile, np.nanpercentile):
    defcomposite(_func)(_quantile_overwriting(_func))


# Complex values (facet complex): sums, products and their running forms are
# complex-differentiable; extremes select elements (in NumPy's order of complex numbers). The
# variance's gradient above, 2 (a - mean) / (n - ddof), is the gradient of |a - mean|^2 in
# mutad's convention, and its tangent takes the real part. Quantiles are refused by NumPy.
holomorphic(np.sum, (np.add, "reduce"), np.mean, np.nansum, np.nanmean, np.prod,
            (np.multiply, "reduce"), np.nanprod, np.cumsum, (np.add, "accumulate"), np.cumprod,
            (np.multiply, "accumulate"), np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin,
            np.ptp, (np.maximum, "reduce"), (np.minimum, "reduce"))
complex_aware(np.var, np.std)


# ----------------------------------------------------------------------------------------------
# A batch of directions (facet batched): the same reduction of each direction's tangent, over
# the same axes shifted past the batch axis. NumPy sums each direction's elements in the same
# pairwise order where the reduced axes are the innermost in memory, as for a whole array's
# sum; otherwise its loop over the batch may sum them in another order: the same numbers to
# rounding.


def _reduction_batched(func):
    def rule(tangents, a, axis=None, dtype=None, *, keepdims=False, **kwargs):
        if dtype is not None or set(kwargs) - {"initial"}:
            return NotImplemented  # where=, a dtype
        y = func(a, axis=axis, keepdims=keepdims, **kwargs)
        t = tangents[0]
        if t is None:
            return y, None
        return y, func(t, axis=batch_axes(axis, np.ndim(a)), keepdims=keepdims)

    rule.__name__ = rule.__qualname__ = f"{func.__name__}_batched"
    defbatched(func)(rule)


_reduction_batched(np.sum)
_reduction_batched(np.mean)


# ----------------------------------------------------------------------------------------------
# A starting value with a derivative (``np.sum(c, initial=c[0])``): NumPy takes ``initial=`` as a
# keyword, which the rules above read as a constant, so the call goes to one function of both,
# whose rule keeps NumPy's value and the rules above for ``a``, and differentiates the starting
# value as one more element of every output: added to each sum, a factor of each product, and
# for an extreme the value it is, sharing ties with the elements equal to it.


def _with_initial(key, kind):
    func = getattr(*key) if type(key) is tuple else key  # np.add.reduce

    def composite(a, *args, initial=np._NoValue, **kwargs):
        if not carries_derivative(initial) or kwargs.get("out") is not None:
            return NotImplemented  # (into out=, the engines' refusal)
        if type(key) is tuple and not args:
            kwargs.setdefault("axis", 0)  # (a ufunc's reduce: the first axis)
        return _reduced_from()(a, initial, func=func, key=key, kind=kind, args=args, **kwargs)

    composite.keywords_only = True  # (without ``initial=`` it declines: ``apply_array_function``)
    return composite


@functools.cache
def _reduced_from():
    from ..custom import adjoint  # (the custom rules' module imports the engines)

    @adjoint
    def reduced_from(a, initial, *, func, key, kind, args, **kwargs):
        return func(a, *args, initial=initial, **kwargs)

    def weights(a, initial, func, kind, args, kwargs):
        """NumPy's value; how much each output changes per unit of ``initial``'s change; and
        the part of the change of the elements of ``a`` the rule without it finds that stays
        (an extreme tied with ``initial`` shares it with one more)."""
        y = func(a, *args, initial=initial, **kwargs)
        if kind == "sum":
            return y, np.ones_like(y), 1
        if kind == "prod":
            return y, func(a, *args, **kwargs), 1
        axis = args[0] if args else kwargs.get("axis")
        keepdims = kwargs.get("keepdims", False)
        tied = np.sum(extremes(a, y, axis, keepdims, kwargs.get("where", True)), axis=axis,
                      keepdims=keepdims)
        mine = y == initial  # (a NaN extreme: neither it nor any element passes a derivative)
        share = (mine / np.maximum(tied + mine, 1)).astype(np.real(y).dtype)
        return y, share, 1 - share

    @reduced_from.rule
    def rule(a, initial, *, func, key, kind, args, **kwargs):
        y, share, rest = weights(a, initial, func, kind, args, kwargs)
        _, back = lookup(key).reverse(a, *args, initial=initial, **kwargs)

        def pullback(dy):
            di = np.sum(dy * share)
            return back(dy * rest)[0], np.asarray(di, np.result_type(initial)).reshape(
                np.shape(initial))

        return y, pullback

    @reduced_from.jvp_rule
    def jvp(tangents, a, initial, *, func, key, kind, args, **kwargs):
        y, share, rest = weights(memory(a), memory(initial), func, kind, args, kwargs)
        da, di = tangents
        dy = 0.0 if da is None else lookup(key).forward(
            (da,), a, *args, initial=memory(initial), **kwargs)[1] * rest
        return y, dy if di is None else dy + di * share

    return reduced_from


for _key, _kind in ((np.sum, "sum"), ((np.add, "reduce"), "sum"), (np.prod, "prod"),
                   ((np.multiply, "reduce"), "prod"), (np.max, "extreme"), (np.min, "extreme"),
                   (np.amax, "extreme"), (np.amin, "extreme"), ((np.maximum, "reduce"), "extreme"),
                   ((np.minimum, "reduce"), "extreme"), (np.nansum, "sum"), (np.nanprod, "prod"),
                   (np.nanmax, "extreme"), (np.nanmin, "extreme")):
    defcomposite(_key)(_with_initial(_key, _kind))
