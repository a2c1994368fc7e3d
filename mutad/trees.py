"""Arguments as trees: flatten tuples, lists and dicts to leaves, and rebuild the same nesting.

Gradients mirror their arguments: the same containers, an ndarray of the argument's shape and
dtype for a float array, a float for a float scalar, ``None`` for what cannot be differentiated.
"""

import numpy as np

from .errors import ComplexInputError


def flatten(tree):
    """``(leaves, rebuild)``: the leaves in order, and ``rebuild(new_leaves)`` for the structure."""
    if isinstance(tree, (tuple, list)) and not hasattr(tree, "_fields"):
        parts = [flatten(x) for x in tree]
        kind = type(tree)
    elif type(tree) is dict:
        keys = list(tree)
        parts = [flatten(tree[k]) for k in keys]
        kind = lambda values: dict(zip(keys, values, strict=True))  # noqa: E731
    else:
        return [tree], lambda leaves: leaves[0]
    sizes = [len(p[0]) for p in parts]
    leaves = [leaf for p in parts for leaf in p[0]]

    def rebuild(new):
        out, start = [], 0
        for (_, sub), n in zip(parts, sizes, strict=True):
            out.append(sub(new[start:start + n]))
            start += n
        return kind(out)

    return leaves, rebuild


def is_float_array(x):
    return isinstance(x, np.ndarray) and x.dtype.kind == "f"


def is_float_scalar(x):
    return isinstance(x, (float, np.floating)) and not isinstance(x, bool)


def check_real(x):
    if isinstance(x, (complex, np.complexfloating)) or (
            isinstance(x, np.ndarray) and x.dtype.kind == "c"):
        raise ComplexInputError(
            "complex inputs are not supported yet: pass the real and imaginary parts as two "
            "real arguments.")
