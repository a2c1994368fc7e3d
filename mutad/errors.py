"""Every error mutad raises (defined in the core, ``mutad.core.errors``), each documented with
when it happens and how to fix it.

All of them derive from :class:`MutadError`, so ``except mutad.MutadError`` catches any of them,
and each also derives from the built-in exception a Python user would expect (``TypeError`` for
conversions and unsupported types, ``ValueError`` for bad arguments, ``NotImplementedError`` for
what has no rule), as JAX's errors do, so existing ``except TypeError`` code keeps working.
A refusal of what NumPy or SciPy would have computed (a conversion, an operation or function
mutad does not differentiate) that the differentiated function itself catches and goes past
(``try: float(v) except TypeError: ...``, ``try: special.zeta(s) except Exception: ...``) would
send it down another path than NumPy's, where the computation succeeds: the differentiation
then ends with an error of the same class that quotes it, rather than a value and a gradient of
that other path.
Whenever one is raised from inside a differentiation, the caller's arrays have already been put
back bit-for-bit, and its traceback shows the line of the differentiated function that caused it.
"""

from .core.errors import *  # noqa: F403
from .core.errors import __all__  # noqa: F401
