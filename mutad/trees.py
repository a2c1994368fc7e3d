"""Arguments as trees: flatten tuples, lists and dicts to leaves, and rebuild the same nesting.

Gradients mirror their arguments: the same containers, an ndarray of the argument's shape and
dtype for a float array, a float for a float scalar, ``None`` for what cannot be differentiated.
"""

import numpy as np

from .errors import ComplexInputError, UnsupportedArrayError


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


def check_leaf(x):
    """Refuse a leaf mutad would differentiate wrongly: complex numbers (``check_real``),
    ndarray subclasses, and ``object`` arrays holding numbers."""
    check_real(x)
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        raise UnsupportedArrayError(unsupported_array(x, "an argument"))
    if isinstance(x, np.ndarray) and x.dtype == object and any(
            isinstance(e, (float, complex, np.inexact))
            or (isinstance(e, np.ndarray) and e.dtype.kind in "fc") for e in x.flat):
        raise UnsupportedArrayError(
            "an argument is an array of dtype object holding numbers: mutad differentiates "
            "float arrays only, and would give it no gradient. Convert it: x.astype(float).")


def unsupported_array(x, what):
    """What to say about ``what``, an ndarray subclass ``x``, and what to pass instead."""
    if isinstance(x, np.ma.MaskedArray):
        instead = ("x.filled(0.0) or x.compressed(), applying the mask inside the function "
                   "(np.where(mask, 0.0, x)) if it matters there")
    elif isinstance(x, np.matrix):
        instead = "np.asarray(x), writing matrix products with @"
    else:
        instead = "np.asarray(x)"
    return (f"{what} is a {type(x).__module__}.{type(x).__qualname__}, a subclass of "
            "ndarray, whose operations may mean something else than a plain ndarray's, which "
            f"is what mutad differentiates. Pass {instead} instead.")
