"""Reductions: each re-expands the reduced cotangent to the input's shape with one helper."""

import numpy as np

from ..registry import defrule


def expand(dy, shape, axis, keepdims):
    """Broadcast a cotangent reduced over ``axis`` back to ``shape``."""
    if axis is not None and not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        dy = np.expand_dims(dy, tuple(a % len(shape) for a in axes))
    return np.broadcast_to(dy, shape)


@defrule(np.sum)
def sum_(a, axis=None, dtype=None, keepdims=False, **kwargs):
    y = np.sum(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)

    def back(dy):
        return (expand(dy, a.shape, axis, keepdims),)

    return y, back


@defrule(np.mean)
def mean(a, axis=None, dtype=None, keepdims=False, **kwargs):
    y = np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)
    count = a.size // max(np.size(y), 1) if a.size else 1

    def back(dy):
        return (expand(dy / count, a.shape, axis, keepdims),)

    return y, back
