"""What pullbacks need to stay differentiable under nested reverse mode.

Under nested differentiation (a gradient of a function that itself calls ``mutad.gradient``)
the inner differentiation's values, and so the cotangents its pullbacks receive, are arrays the
outer one traces. A pullback then builds its cotangents with NumPy calls that dispatch, so the
outer tape records them: no ``np.asarray``, no ``np.bincount`` with traced weights, and no
traced value written into a buffer made with ``np.zeros(shape)``. The helpers here make
accumulators that are traced when what will be added into them is, and plain (as fast as
before) otherwise.
"""

import numpy as np

from ..views import wrapped


def traced_among(*values):
    """The value among ``values`` that the innermost differentiation traces (to pass as
    ``like=``), or None when all are plain."""
    best = None
    for v in values:
        if wrapped(v):
            level = getattr(getattr(v, "tape", None), "level", -1)
            if best is None or level > best[0]:
                best = (level, v)
    return None if best is None else best[1]


def zeros(shape, dtype, *operands):
    """Zeros to accumulate values computed from ``operands`` into: traced like the innermost
    traced operand, plain when none is."""
    like = traced_among(*operands)
    if like is None:
        return np.zeros(shape, dtype)
    return np.zeros_like(like, dtype=dtype, shape=shape)


def stacked(items):
    """``np.array(items)`` of scalars and 0-d arrays, some of which may be traced."""
    if any(wrapped(item) for item in items):
        return np.stack(items)  # dispatches on the traced items; plain ones are constants
    return np.array(items)
