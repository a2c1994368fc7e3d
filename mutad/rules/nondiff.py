"""Functions and ufuncs whose outputs carry no gradient: they run on plain values.

Piecewise-constant functions (``sign``, ``floor``) have derivative zero wherever it exists, so
their outputs are plain arrays, as in HIPS autograd's ``nograd_functions``.
"""

import numpy as np

from ..core.registry import nondifferentiable

nondifferentiable(
    # comparisons and predicates
    np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.isfinite, np.isnan, np.isinf, np.isneginf, np.isposinf, np.signbit, np.logical_and,
    np.logical_or, np.logical_xor, np.logical_not, np.isclose, np.allclose, np.array_equal,
    np.array_equiv,
    np.any, np.all, np.iscomplexobj, np.isrealobj, np.iscomplex, np.isreal, np.isscalar,
    # piecewise constant
    np.sign, np.floor, np.ceil, np.trunc, np.rint, np.floor_divide, np.fix, np.round,
    np.around, np.heaviside,
    # integer results and indices
    np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.argsort, np.argpartition, np.nonzero,
    np.flatnonzero, np.argwhere,
    np.count_nonzero, np.searchsorted, np.digitize, np.lexsort,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert, np.left_shift, np.right_shift,
    # shape queries
    np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.min_scalar_type,
    # the order np.einsum contracts its operands in, planned from their shapes alone
    np.einsum_path,
    # memory queries, and indices of an array's diagonal and triangles
    np.shares_memory, np.may_share_memory, np.diag_indices_from, np.tril_indices_from,
    np.triu_indices_from,
    # text: what a program prints or logs of its values
    np.array2string, np.array_repr, np.array_str,
)
