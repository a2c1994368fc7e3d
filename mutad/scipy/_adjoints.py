"""What the SciPy wrappers share: a ``mutad.adjoint`` whose rule sees every argument in place."""

import inspect

from ..custom import Adjoint
from ..levels import innermost
from ..registry import ROUTES, padded


class ScipyAdjoint(Adjoint):
    """``mutad.adjoint`` of a SciPy function written in Python, whose rule receives every
    positional-or-keyword parameter positionally, defaults filled in.

    The core differentiates traced arrays and duals only in positional places (it refuses them
    as keyword arguments), yet users write ``logsumexp(a, b=weights)`` and
    ``cho_solve((c, lower), b=y)``. Binding the call to SciPy's signature first puts each
    argument in its place, so a rule has one fixed argument list; its ``back`` returns
    cotangents for the leading parameters only, and the settings after them (``axis``,
    ``lower``, ``check_finite``) get ``None``. Plain calls go to SciPy untouched.
    """

    complex_values = None  # SciPy's functions take complex values only where a module says so

    def __init__(self, fn):
        super().__init__(fn)
        self.signature = inspect.signature(fn)

    def __call__(self, *args, **kwargs):
        # Traced arrays (reverse mode) and duals (forward mode) both need the binding.
        if innermost((*args, *kwargs.values())) is None:
            return self.fn(*args, **kwargs)
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return super().__call__(*bound.args, **bound.kwargs)

    def rule(self, rule):
        super().rule(padded(rule))
        return rule


def scipy_adjoint(fn):
    """Wrap the SciPy function ``fn`` for a rule attached with ``@wrapped.rule``; the wrapper
    stands in for ``fn`` while a differentiation runs (``registry.ROUTES``), so that user code
    calling ``scipy.linalg.solve`` by SciPy's name is differentiated."""
    wrapper = ROUTES[fn] = ScipyAdjoint(fn)
    return wrapper
