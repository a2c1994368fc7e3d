"""Where new traced buffers are born: ``zeros_like``, ``empty(like=)``, ``copy``, ``astype``.

A buffer created from a traced value is traced, so later writes into it are recorded and
gradients written through it reach their sources.
"""

import numpy as np

from ..errors import UnsupportedOperationError
from ..registry import FUNCTIONS, defrule
from ..tracing import unbroadcast


def _no_gradient(func):
    def rule(*args, **kwargs):
        y = func(*args, **kwargs)
        return y, lambda dy: (None,) * len(args)

    return rule


# Their values do not depend on the values of their array arguments (only on shapes).
for _func in (np.zeros_like, np.ones_like, np.empty_like,
              np.empty, np.zeros, np.ones, np.eye, np.identity):
    FUNCTIONS[_func] = _no_gradient(_func)


@defrule(np.full)
def full(shape, fill_value, *args, **kwargs):
    y = np.full(shape, fill_value, *args, **kwargs)
    fill_shape = np.shape(fill_value)

    def back(dy):
        return (None, unbroadcast(np.asarray(dy), fill_shape)) + (None,) * len(args)

    return y, back


@defrule(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    if retstep:
        raise UnsupportedOperationError(
            "np.linspace(..., retstep=True) with traced endpoints: compute the step as "
            "(stop - start) / (num - 1) instead.")
    y = np.linspace(start, stop, num, endpoint, dtype=dtype, axis=axis)
    start_shape, stop_shape = np.shape(start), np.shape(stop)

    def back(dy):
        # y = start + t (stop - start), t = linspace(0, 1, num) along ``axis``.
        t = np.linspace(0.0, 1.0, num, endpoint, dtype=dy.dtype)
        t = np.moveaxis(t.reshape((num,) + (1,) * (dy.ndim - 1)), 0, axis)
        d_stop = (dy * t).sum(axis=axis)
        d_start = dy.sum(axis=axis) - d_stop
        return unbroadcast(d_start, start_shape), unbroadcast(d_stop, stop_shape), None

    return y, back


@defrule(np.arange)
def arange(*args, **kwargs):
    raise UnsupportedOperationError(
        "np.arange with traced bounds: its length depends on them, so write "
        "start + step * np.arange(n) (or np.linspace) instead.")


@defrule(np.full_like)
def full_like(a, fill_value, *args, **kwargs):
    y = np.full_like(a, fill_value, *args, **kwargs)

    def back(dy):
        return (None, np.sum(dy)) + (None,) * len(args)

    return y, back


def _identity_back(dy):
    return (dy,)


# Each always makes a new buffer: a traced argument may be the caller's, never to be aliased.
@defrule(np.copy)
def copy(a, order="K", **kwargs):
    return np.array(a, order=order, copy=True), _identity_back


@defrule(np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray)
def array(a, dtype=None, **kwargs):
    order = kwargs.get("order", "K")
    y = np.array(a, dtype=dtype, order=order, copy=True, ndmin=kwargs.get("ndmin", 0))

    def back(dy):
        if isinstance(a, (list, tuple)):  # np.array([x, y], like=x) stacks its items
            return ([np.reshape(dy[i], np.shape(item)) for i, item in enumerate(a)],)
        return (np.reshape(dy, np.shape(a)),)

    return y, back


@defrule("astype")
def astype(a, dtype, **kwargs):
    y = a.astype(dtype, **kwargs)

    def back(dy):
        return dy.astype(a.dtype, copy=False), None

    return y, back
