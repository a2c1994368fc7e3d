"""In-place linear algebra whose reverse pass restores its inputs instead of copying them.

``cholesky_(A)`` overwrites A with its Cholesky factor, ``ldiv_(F, b)`` overwrites b with
F⁻¹ b, ``solve_triangular_`` and ``lu_factor_`` likewise. Each is an ``inplace_adjoint`` whose
``back`` recomputes what the forward call overwrote from what it still holds (A = L Lᵀ,
b = A x, A = P L U) rather than saving a copy, so a loop of T in-place solves needs no memory
that grows with T. Each also works on plain arrays outside any differentiation.

In forward mode (``mutad.jvp``) each updates its argument's tangent in place beside the primal:
``cholesky_(A)`` overwrites A's tangent by L's, ``ldiv_(F, b)`` overwrites b's tangent by that
of F⁻¹ b. A factor shares A's memory, so its tangent is A's tangent: L's for a Cholesky factor,
the packed L and U's for an LU one. The forward rules (``jvp_rule``) receive the arrays behind
the factor (``F.L``; ``F.packed`` and ``F.pivots``) as primal values with their tangents
alongside, call the routine on the primals, and compute tangents with NumPy and
mutad.scipy.linalg calls that dispatch, so a reverse pass can differentiate them (``hvp``).

Under nested reverse mode (a gradient of a function that itself calls ``mutad.gradient``) the
inner differentiation's arrays hold arrays the outer one traces, which LAPACK cannot take and
whose every change the outer one must record. There each routine runs an equivalent written
with calls that dispatch instead: the factor or solution from np.linalg / mutad.scipy.linalg,
whose rules nest, written into the argument with ``A[...] = ...``, which the inner level undoes
from a copy as after any assignment. The outer level records every value anyway, so restoring
by inversion would save it no memory. Plain arrays and single-level differentiation take the
LAPACK path.

The work happens in the caller's memory, through SciPy's BLAS and LAPACK wrappers called on
Fortran-ordered views (a C-ordered matrix is the Fortran-ordered view of its transpose), so
the wrappers never copy; where one still returns a new array (an unusual dtype, a strided
right-hand side), the result is copied back, so the call stays in place either way.

>>> import numpy as np, mutad
>>> from mutad.linalg import cholesky_, ldiv_
>>> def energy(A, b):
...     F = cholesky_(A)     # A now holds L
...     ldiv_(F, b)          # b now holds A⁻¹ b
...     return (b * b).sum()
>>> A, b = np.array([[4.0, 1.0], [1.0, 3.0]]), np.array([1.0, 2.0])
>>> dA, db = mutad.gradient(energy, A, b)
>>> np.allclose(dA, dA.T), A.tolist()     # a symmetric gradient; A is as it was
(True, [[4.0, 1.0], [1.0, 3.0]])
"""

# The rules of linear algebra live in this package by family (``_common`` lists them): NumPy's
# and SciPy's variants of a function beside each other, and this module and mutad.scipy.linalg
# the public names. mutad.scipy comes first: its linalg module imports the families, which
# import its wrappers (scipy._adjoints), so the families load inside it.
from .. import scipy as _scipy  # noqa: F401
from . import (dense, equations, factorizations, functions, lapack, norms,  # noqa: F401
               spectral, structured)
from .inplace import LU, Cholesky, cholesky_, ldiv_, lu_factor_, solve_triangular_

# In the order of the module (and of its documentation).
__all__ = ["Cholesky", "cholesky_", "solve_triangular_", "LU", "lu_factor_", "ldiv_"]
