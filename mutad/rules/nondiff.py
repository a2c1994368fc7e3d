"""Functions and ufuncs whose outputs carry no gradient: they run on plain values.

Piecewise-constant functions (``sign``, ``floor``) have derivative zero wherever it exists, so
their outputs are plain arrays, as in HIPS autograd's ``nograd_functions``.
"""

import functools

import numpy as np

from ..core.registry import defroute, nondifferentiable
from ..core.views import wrapped

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
    np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.min_scalar_type, np.common_type,
    # the order np.einsum contracts its operands in, planned from their shapes alone
    np.einsum_path,
    # memory queries, and indices of an array's diagonal and triangles
    np.shares_memory, np.may_share_memory, np.diag_indices_from, np.tril_indices_from,
    np.triu_indices_from,
    # text: what a program prints or logs of its values
    np.array2string, np.array_repr, np.array_str,
)


def _text_functions():
    """NumPy's functions of text (``np.strings``, ``np.char``) other than NumPy's own ufuncs
    (``np.strings.add`` is ``np.add``) and its types: text holds no derivative, and text made
    of traced numbers (``np.char.mod("%.17g", x)``) is a constant, as ``str(x[0])`` is."""
    numpys = {id(value) for value in vars(np).values()}
    return {func for module in (np.strings, np.char) for name, func in vars(module).items()
            if not name.startswith("_") and callable(func) and not isinstance(func, type)
            and id(func) not in numpys}


nondifferentiable(*_text_functions())

# writing a program's values to a file: nothing computed from them comes back (a read of
# what a save of traced values wrote is refused: ``core.written``)
nondifferentiable(np.save, np.savez, np.savez_compressed, np.savetxt)


def _dispatched(original):
    """``original``, a NumPy function written in Python without NumPy's dispatch that reads
    its arguments' values and gives none of them back as numbers (an assertion of
    ``np.testing``), dispatched as NumPy dispatches its own: the arrays mutad follows among
    its arguments (one level into lists and tuples) run it as a function without a
    derivative, on their values, and a replay runs it again on the values of its call.
    Without it, NumPy's own code converts them, which mutad refuses as cutting a gradient."""

    def dispatching(*args, **kwargs):
        found = [a for x in (*args, *kwargs.values())
                 for a in (x if type(x) in (list, tuple) else (x,)) if wrapped(a)]
        kinds = tuple(dict.fromkeys(type(a) for a in found))
        for a in found:
            # (the engine calls this again on its values: those of an inner differentiation
            # are dispatched in their turn, a Hessian's too)
            y = type(a).__array_function__(a, dispatched, kinds, args, kwargs)
            if y is not NotImplemented:
                return y
        return original(*args, **kwargs)

    dispatched = functools.wraps(original)(dispatching)
    nondifferentiable(dispatched)
    return dispatched


for _function in (np.testing.assert_allclose, np.testing.assert_almost_equal,
                  np.testing.assert_approx_equal, np.testing.assert_array_almost_equal,
                  np.testing.assert_array_almost_equal_nulp, np.testing.assert_array_equal,
                  np.testing.assert_array_less, np.testing.assert_array_max_ulp,
                  np.testing.assert_equal):
    nondifferentiable(_function)
    defroute(_function, _dispatched(_function))
del _function  # (a name of this module's left bound to a routed function would make the
# mode switch the module's class on every entry to route it: ``_RoutingModule``)
