"""What the linear algebra families share: conjugate transposes that leave real values' bits
alone, scalars as 1 × 1 matrices, and SciPy's conventions for a matrix argument (``trans``, one
matrix rather than a stack).

The families of ``mutad.linalg``, as ChainRules lays them out, each module holding NumPy's rules
and SciPy's variants of a function beside each other where they share a derivative:

    dense            solve, inv, det, slogdet, lstsq, pinv, matrix_power (np.linalg and
                     scipy.linalg, with SciPy's ``assume_a`` structures)
    factorizations   cholesky, cho_factor, cho_solve, solve_triangular, lu_factor, lu_solve, lu,
                     qr: the factors' derivatives, and the solves with them
    spectral         eigh, eigvalsh, eig, eigvals, svd, svdvals, polar: one pullback scaffold
                     for the eigen- and singular pairs, their phases, their couplings
    norms            np.linalg.norm, vector_norm, matrix_norm, scipy.linalg.norm
    functions        expm, logm, sqrtm (SciPy's matrix functions)
    equations        Sylvester, Lyapunov and Riccati equations (SciPy's)
    structured       SciPy's structured matrices (toeplitz, hankel, ...) and the solves in
                     their compact storage (banded, Toeplitz)
    inplace          mutad.linalg's in-place LAPACK-style routines (cholesky_, ldiv_, ...)
    lapack           SciPy's LAPACK and BLAS wrappers (scipy.linalg.lapack.dgesv, blas.dgemm,
                     get_lapack_funcs), as compositions of the families' functions

They sit in layer 5, beside ``mutad.scipy``, rather than among the rule families of layer 4
(``mutad.rules``): SciPy's rules are declared on wrappers (``scipy._adjoints``) that stand in
for SciPy's functions and need ``api``, and the in-place routines compute their tangents with
those wrappers. ``mutad.linalg`` (the in-place routines) and ``mutad.scipy.linalg`` are thin
façades over these modules; the products (einsum, matmul, ...) stay a rule family of their own,
``rules.contractions``.
"""

import numpy as np

from ..core.errors import UnsupportedOperationError
from ..engines.products import product_times
from ..rules._helpers import symmetric_part, transpose


def adjoint(x):
    """The conjugate transpose of a stack of matrices: the transpose of a real one (the same
    operation, so real values keep their bits)."""
    return transpose(np.conjugate(x)) if np.iscomplexobj(x) else transpose(x)


def hermitian_part(g):
    """(G + Gᴴ) / 2: the symmetric part of a real G."""
    return 0.5 * (g + adjoint(g)) if np.iscomplexobj(g) else symmetric_part(g)


def conjugate(x):
    """The complex conjugate; a real ``x`` itself (no operation recorded)."""
    return np.conjugate(x) if np.iscomplexobj(x) else x


def as_matrices(y):
    """A (stack of) scalars ``y`` as 1 × 1 matrices, to scale a stack of matrices. ``y`` may be
    a Python or NumPy scalar, or an array an outer differentiation traces: np.reshape
    dispatches where np.asarray would cut the outer gradient."""
    return np.reshape(y, np.shape(y) + (1, 1))


def of_finite_matrices(a, derivative):
    """``derivative(a)``, NaN for each matrix of ``a`` that holds an infinity or a NaN: LAPACK's
    SVD with vectors of such a matrix may never return, and a derivative there is not
    finite. It is computed at a stand-in there, diag(1, 2, ...), whose singular values are
    distinct and nonzero, so that no check of repeated or zero values refuses the stack for
    that matrix."""
    finite = np.isfinite(a).all(axis=(-2, -1))[..., None, None]
    if finite.all():
        return derivative(a)
    m, n = np.shape(a)[-2:]
    stand_in = np.eye(m, n, dtype=a.dtype) * np.arange(1, n + 1, dtype=a.dtype)
    # NaN there, of each entry of that matrix (not a constant NaN, whose derivative an
    # enclosing differentiation would take as 0)
    undefined = np.sum(np.where(finite, 0.0, a), axis=(-2, -1), keepdims=True) * np.nan
    return np.where(finite, derivative(np.where(finite, a, stand_in)), undefined)


def real_diagonal(m):
    """The diagonal of a stack of matrices, its real part for complex ones, as a new array."""
    diagonal = np.diagonal(m, 0, -2, -1)
    return (np.real(diagonal) if np.iscomplexobj(diagonal) else diagonal).copy()


def times_transpose(u, v):
    """``u vᵀ``, a 1-d ``u`` and ``v`` being columns (their outer product), each term a
    ``product_times`` one: a zero column of a cotangent ``u`` contributes zero beside a NaN of
    the solution ``v`` (a column of a right-hand side the loss does not read)."""
    if np.ndim(u) == 1:
        return product_times(np.outer, u, v)
    return product_times(np.matmul, u, transpose(v))


def is_transposed(trans):
    """SciPy's ``trans``: 0/"N" solves a x = b, 1/"T" and 2/"C" (the same for real a) aᵀ x = b."""
    return trans in (1, 2, "T", "C")


def require_matrix(name, a):
    if np.ndim(a) != 2:
        raise UnsupportedOperationError(
            f"mutad.scipy.linalg.{name} differentiates one matrix, not a stack of shape "
            f"{np.shape(a)}: loop over the stack.")


def one_column_of_a_batch(a, b):
    """Whether SciPy solves a vector ``b`` as one column of each matrix of a batch ``a`` (its
    result a batch of vectors, which the derivatives solve as columns too)."""
    return np.ndim(b) == 1 and np.ndim(a) > 2
