"""Where new traced buffers are born: ``zeros_like``, ``empty(like=)``, ``copy``, ``astype``.

A buffer created from a traced value is one the differentiation follows: a constant of it
(``reverse.constant``) when its values do not depend on the arguments, until a traced value is
written into it, so later writes into it are recorded and gradients written through it reach
their sources. (Buffers the differentiated code allocates without ``like=`` reach the same
place through the allocation mode, ``allocation.py``.) In forward mode a float buffer created from a
dual (``like=`` one, too) gets a tangent, zero where its values do not depend on the arguments,
so later writes of tangents into it have a place to go.
"""

import numpy as np

from ..core.allocation import as_objects, follows_floats
from ..core.debug import caller, warn_at
from ..core.errors import UnsupportedOperationError
from ..core.registry import (ZERO_TANGENT, defbatched, defjvp, deflinear, defrule,
                             holomorphic, recomputable, shaped, zero_derivative)
from ..core.tape import source_line
from ..core.views import memory, stands_for_scalar
from ._helpers import traced_among, unbroadcast


def _no_gradient(func):
    def rule(*args, **kwargs):
        return func(*args, **kwargs), lambda dy: ()

    return rule


def created(y):
    """``y`` with a zero tangent: a float buffer (or records of floats) created by a call
    forward mode handles."""
    return y, np.zeros_like(y) if follows_floats(y.dtype) else None


def _zero_tangent(func):
    def jvp(tangents, *args, **kwargs):
        return _new_buffer(func(*args, **kwargs))

    jvp.__name__ = jvp.__qualname__ = f"{func.__name__}_jvp"
    return jvp


# Their values are read from no argument (their array arguments give a shape, a dtype, a
# layout, a device), or from the fill value alone: made of traced arrays, they are constants,
# as np.zeros(n)'s are (a traced value written into one makes it traced).
for _func in (np.zeros_like, np.ones_like, np.empty_like,
              np.empty, np.zeros, np.ones, np.eye, np.identity):
    defrule(_func, leading=0)(_no_gradient(_func))
    defjvp(_func)(_zero_tangent(_func))
    shaped(_func)
shaped(np.full, np.full_like, values=[(1, "fill_value")])


@defrule(np.full, leading=2)
def full(shape, fill_value, *args, **kwargs):
    # NumPy dispatches np.full on like= alone; a fill value an outer differentiation traces
    # (nested reverse mode) must be written into an array that differentiation traces.
    like = traced_among(fill_value)
    if like is not None:
        kwargs["like"] = like
    y = np.full(shape, fill_value, *args, **kwargs)
    fill_shape = np.shape(fill_value)

    return y, lambda dy: (None, unbroadcast(dy, fill_shape))


def _new_buffer(y):
    """``y``, made of no argument's values, with a zero tangent (``created``); of objects
    (``np.empty_like(x, dtype=object)``), one that takes traced values (``as_objects``)."""
    return (as_objects(y), None) if y.dtype.kind == "O" else created(y)


def filled(y, dfill):
    """The tangent of ``y`` filled with a value whose tangent is ``dfill``."""
    if dfill is None:
        return _new_buffer(y)
    if not np.issubdtype(y.dtype, np.inexact):
        return created(y)
    return y, np.broadcast_to(dfill, y.shape).astype(y.dtype)


@defjvp(np.full)
def full_jvp(tangents, shape, fill_value, *args, **kwargs):
    like = traced_among(fill_value)  # a reverse pass over this rule (hvp) traces fill_value
    if like is not None:
        kwargs["like"] = like
    return filled(np.full(shape, fill_value, *args, **kwargs), tangents[1])


def _linspace_settings(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
                       **kwargs):
    return num, endpoint, retstep, axis


@defrule(np.linspace, leading=2)
def linspace(start, stop, *rest, **kwargs):
    y = np.linspace(start, stop, *rest, **kwargs)
    num, endpoint, retstep, axis = _linspace_settings(start, stop, *rest, **kwargs)
    start_shape, stop_shape = np.shape(start), np.shape(stop)
    intervals = num - 1 if endpoint else num

    def back(dy):
        dy, d_step = dy if retstep else (dy, None)
        # y = start + t (stop - start), t = linspace(0, 1, num) along ``axis``.
        t = np.linspace(0.0, 1.0, num, endpoint, dtype=dy.dtype)
        t = np.moveaxis(t.reshape((num,) + (1,) * (dy.ndim - 1)), 0, axis)
        d_stop = (dy * t).sum(axis=axis)
        d_start = dy.sum(axis=axis) - d_stop
        if d_step is not None and intervals > 0:  # step = (stop - start) / intervals
            d_stop = d_stop + d_step / intervals
            d_start = d_start - d_step / intervals
        return unbroadcast(d_start, start_shape), unbroadcast(d_stop, stop_shape)

    return y, back


# linspace is linear in (start, stop) jointly; retstep's step too.
deflinear(np.linspace, operands=(0, 1))


def _arange_error():
    return UnsupportedOperationError(
        "np.arange with traced bounds: its length depends on them, so write "
        "start + step * np.arange(n) (or np.linspace) instead.")


@defrule(np.arange)
def arange(*args, **kwargs):
    raise _arange_error()


@defjvp(np.arange)
def arange_jvp(tangents, *args, **kwargs):
    if any(t is not None for t in tangents):
        raise _arange_error()
    return created(np.arange(*args, **kwargs))  # np.arange(n, like=x)


@defrule(np.full_like, leading=2)
@zero_derivative("a")  # (its shape and dtype alone)
def full_like(a, fill_value, *args, **kwargs):
    y = np.full_like(a, fill_value, *args, **kwargs)
    fill_shape = np.shape(fill_value)
    return y, lambda dy: (None, unbroadcast(dy, fill_shape))


@defjvp(np.full_like)
def full_like_jvp(tangents, a, fill_value, *args, **kwargs):
    return filled(np.full_like(a, fill_value, *args, **kwargs), tangents[1])


def _identity_back(dy):
    return (dy,)


# Each always makes a new buffer: a traced argument may be the caller's, never to be aliased.
@defrule(np.copy, leading=1)
def copy(a, order="K", **kwargs):
    return np.array(a, order=order, copy=True, like=a), _identity_back  # like: a may be traced


deflinear(np.copy)
recomputable(np.copy)


def array_rule(func):
    """``np.array(a)`` and its variants, which reach mutad with ``like=`` a traced array, as
    NumPy runs them: ``np.array`` copies, the others return ``a`` itself when it already fits
    (the result then shares ``a``'s memory, so writes into it are writes into ``a``). Under
    nested reverse mode ``a`` (or an item of it) is traced by the outer differentiation, and
    the call dispatches to it with ``like=``."""

    def rule(a, *rest, **kwargs):
        like = dispatcher(a)
        if like is not None and type(like) is not np.ndarray:
            kwargs["like"] = like
        y = func(a, *rest, **kwargs)
        if hasattr(a, "dtype") and memory(y) is memory(a):
            # the argument itself: the same place, not a new buffer; but of NumPy's scalar
            # (``x[0]``) NumPy makes an array, writeable, of its own
            y = np.copy(y) if stands_for_scalar(a) else a
        shapes = [np.shape(item) for item in a] if isinstance(a, (list, tuple)) else None
        shape = None if shapes is not None else np.shape(a)

        def back(dy):
            if shapes is not None:  # np.array([x, y], like=x) stacks its items
                return ([np.reshape(dy[i], item) for i, item in enumerate(shapes)],)
            return (np.reshape(dy, shape),)

        return y, back

    rule.__name__ = rule.__qualname__ = func.__name__
    return rule


def _arrays(tree):
    if type(tree) in (list, tuple):
        for x in tree:
            yield from _arrays(x)
    elif hasattr(tree, "__array_function__"):
        yield tree


def dispatcher(*trees):
    """The array in ``trees`` (items of lists and tuples too) to pass as ``like=``: NumPy's array
    constructors dispatch on nothing else, so a traced item would be converted. A traced array
    comes before a plain one."""
    arrays = list(_arrays(trees))
    return next((x for x in arrays if type(x) is not np.ndarray), arrays[0] if arrays else None)


def zero_filled(tree, tangents):
    """``tangents`` of the items of ``tree``, zeros where an item has none."""
    if type(tree) in (list, tuple):
        tangents = [None] * len(tree) if tangents is None else tangents
        return [zero_filled(x, t) for x, t in zip(tree, tangents, strict=True)]
    return np.zeros(np.shape(tree)) if tangents is None else tangents


def array_jvp(func):
    """``np.array(a)`` and its variants, called as NumPy does (``np.asarray`` of an array is
    that array, whose tangent is then the argument's), dispatching on the arrays inside ``a``."""

    def jvp(tangents, a, *rest, like=None, **kwargs):
        y = func(a, *rest, like=dispatcher(a, like), **kwargs)
        scalar = hasattr(a, "dtype") and memory(y) is memory(a) and stands_for_scalar(a)
        if scalar:  # NumPy's scalar: a new array (``array_rule``)
            y = np.copy(y)
        if tangents[0] is None:
            return created(y)
        if not np.issubdtype(y.dtype, np.inexact):
            return y, None
        da = zero_filled(a, tangents[0])
        dy = func(da, *rest, like=dispatcher(da), **kwargs)
        return y, np.copy(dy) if scalar else dy

    jvp.__name__ = jvp.__qualname__ = f"{func.__name__}_jvp"
    return jvp


for _func in (np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray):
    defrule(_func, leading=1)(array_rule(_func))
    defjvp(_func)(array_jvp(_func))


def _owning_refused(func, first=0):
    """``func`` (np.require), which copies where ``a`` fails a requirement (its layout, dtype,
    writeability), as NumPy's; refused for ``"O"`` (``"OWNDATA"``): whether NumPy copies then
    depends on whether the caller's array owns its memory, which a traced array does not
    tell (it is always a view of the memory mutad follows). ``np.require``'s arguments start
    at ``first`` (after a forward rule's tangents)."""

    def checked(*args, **kwargs):
        requirements = kwargs.get("requirements", (args[first + 2:first + 3] or (None,))[0])
        flags = [requirements] if isinstance(requirements, str) else requirements or ()
        if any(str(flag).upper() in ("O", "OWNDATA") for flag in flags):
            raise UnsupportedOperationError(
                "np.require(a, requirements='O') of a traced array: whether NumPy copies "
                "depends on whether the caller's array owns its memory, which mutad does not "
                "follow. Call np.array(a) for a copy, or leave out 'O'.")
        return func(*args, **kwargs)

    checked.__name__ = checked.__qualname__ = func.__name__
    return checked


defrule(np.require, leading=1)(_owning_refused(array_rule(np.require)))
defjvp(np.require)(_owning_refused(array_jvp(np.require), first=1))


def _astype(a, dtype, kwargs):
    """``a.astype(dtype, **kwargs)``. A cast of complex values to real ones warns, as NumPy's
    does, but at the user's line: NumPy's own warning would name this module's. The value is
    NumPy's, the real part cast (a copy, as NumPy's cast makes one)."""
    if (a.dtype.kind != "c" or np.dtype(dtype).kind not in "iuf"
            or kwargs.get("casting", "unsafe") != "unsafe"):
        return a.astype(dtype, **kwargs)
    where = source_line(caller(1))
    if where is not None:
        warn_at("Casting complex values to real discards the imaginary part",
                np.exceptions.ComplexWarning, *where)
    return np.real(a).astype(dtype, **{**kwargs, "copy": True})


def _cast_back(a):
    """The pullback of a cast of ``a``: the cotangent cast back to ``a``'s dtype (to a real
    dtype from a complex one, the core takes the real part, facet complex)."""
    return lambda dy: (dy if dy.dtype.kind == "c" and a.dtype.kind == "f"
                       else dy.astype(a.dtype, copy=False),)


def _cast_tangent(tangents, y, dtype, **kwargs):
    """The tangent of a cast to ``dtype`` whose value is ``y``."""
    if tangents[0] is None or not np.issubdtype(y.dtype, np.inexact):
        return None
    t = tangents[0]
    if t.dtype.kind == "c" and y.dtype.kind == "f":  # NumPy drops the imaginary part, and warns
        t = np.real(t)
    return t.astype(dtype, **kwargs)  # copy=False: a itself, then the tangent itself


@defrule(np.ndarray.astype, leading=1)
def astype(a, dtype, **kwargs):
    return _astype(a, dtype, kwargs), _cast_back(a)


@defjvp(np.ndarray.astype)
def astype_jvp(tangents, a, dtype, **kwargs):
    y = _astype(a, dtype, kwargs)
    return y, _cast_tangent(tangents, y, dtype, **kwargs)


# np.astype: NumPy's own call (its checks of x and device=, its ComplexWarning, which names
# NumPy's line), the derivative a cast's
@defrule(np.astype, leading=1)
def numpy_astype(x, dtype, /, *, copy=True, device=None):
    return np.astype(x, dtype, copy=copy, device=device), _cast_back(x)


@defjvp(np.astype)
def numpy_astype_jvp(tangents, x, dtype, /, *, copy=True, device=None):
    y = np.astype(x, dtype, copy=copy, device=device)
    return y, _cast_tangent(tangents, y, dtype, copy=copy)


# Complex values (facet complex): copies and fills are linear with real coefficients.
holomorphic(np.zeros_like, np.ones_like, np.empty_like, np.empty, np.zeros, np.ones, np.eye,
            np.identity, np.full, np.full_like, np.linspace, np.copy, np.array, np.asarray,
            np.asanyarray, np.ascontiguousarray, np.asfortranarray, np.require,
            np.ndarray.astype, np.astype)


# ----------------------------------------------------------------------------------------------
# A batch of directions (facet batched): a new buffer's zero tangents, a copy's and a cast's
# tangents copied or cast direction by direction (the same bits).


def _created_batched(func):
    def rule(tangents, *args, **kwargs):
        y = func(*args, **kwargs)
        return y, ZERO_TANGENT if np.issubdtype(y.dtype, np.inexact) else None

    rule.__name__ = rule.__qualname__ = f"{func.__name__}_batched"
    defbatched(func)(rule)


for _func in (np.zeros_like, np.ones_like, np.empty_like, np.empty, np.zeros, np.ones, np.eye,
              np.identity):
    _created_batched(_func)


@defbatched(np.copy)
def copy_batched(tangents, a, order="K", **kwargs):
    if kwargs:
        return NotImplemented
    y = np.copy(a, order=order)
    t = tangents[0]
    return y, None if t is None else np.copy(t)  # the core lays it out as y


@defbatched(np.array)
def array_batched(tangents, a, dtype=None, *, copy=True, order="K", **kwargs):
    """``np.array`` of one float array, copied (``like=`` the dual it came with, as the
    engines copy a traced or dual array: ``copy``'s reverse rule, a shadow made of a
    cotangent): the value copied or cast, each direction's tangent alike (the same bits; the
    core lays it out as the value). Lists, other settings and other dtypes: not covered."""
    if (set(kwargs) - {"like"} or copy is not True or type(a) is not np.ndarray
            or a.dtype.kind != "f" or (dtype is not None and np.dtype(dtype).kind != "f")):
        return NotImplemented
    y = np.array(a, dtype, copy=True, order=order, **kwargs)
    t = tangents[0]
    if t is None:
        return y, ZERO_TANGENT
    return y, t.astype(y.dtype, copy=True)


@defbatched(np.ndarray.astype)
def astype_batched(tangents, a, dtype, **kwargs):
    if set(kwargs) - {"copy"} or a.dtype.kind != "f" or np.dtype(dtype).kind != "f":
        return NotImplemented
    y = a.astype(dtype, **kwargs)
    t = tangents[0]
    return y, None if t is None else t.astype(dtype, **kwargs)


