"""Where new traced buffers are born: ``zeros_like``, ``empty(like=)``, ``copy``, ``astype``.

A buffer created from a traced value is traced, so later writes into it are recorded and
gradients written through it reach their sources.
"""

import numpy as np

from ..registry import FUNCTIONS, defrule


def _no_gradient(func):
    def rule(*args, **kwargs):
        y = func(*args, **kwargs)
        return y, lambda dy: (None,) * len(args)

    return rule


for _func in (np.zeros_like, np.ones_like, np.empty_like,
              np.empty, np.zeros, np.ones, np.full, np.arange, np.linspace, np.eye, np.identity):
    FUNCTIONS[_func] = _no_gradient(_func)


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
