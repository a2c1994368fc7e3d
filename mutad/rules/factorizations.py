"""The derivatives of the Cholesky and LU factorisations, shared by ``np.linalg``'s rules, the
``scipy.linalg`` wrappers and the in-place routines of ``mutad.linalg``.

Each takes the triangular solver it computes with, so that each caller passes one that
dispatches (a reverse pass over a forward rule, or an outer differentiation, records it).

The Cholesky rules hold for complex Hermitian matrices too, A = L Lᴴ, in mutad's convention (a
cotangent is dL/dx + i dL/dy): every transpose is then the conjugate transpose (``adjoint``),
which is the transpose itself for real arrays, so real values take the same operations.
"""

import numpy as np

from ._helpers import symmetric_part, transpose


def adjoint(x):
    """The conjugate transpose of a stack of matrices: the transpose of a real one (the same
    operation, so real values keep their bits)."""
    return transpose(np.conjugate(x)) if np.iscomplexobj(x) else transpose(x)


def hermitian_part(g):
    """(G + Gᴴ) / 2: the symmetric part of a real G."""
    return 0.5 * (g + adjoint(g)) if np.iscomplexobj(g) else symmetric_part(g)


def lower_with_half_diagonal(x):
    """Φ of Murray (2016): the lower triangle with the diagonal halved."""
    return np.tril(x) - 0.5 * (np.eye(x.shape[-1]) * x)


def _solve_transposed(lower, x):
    return np.linalg.solve(adjoint(lower), x)


def cholesky_cotangent(lower, dlower, solve_transposed=_solve_transposed):
    """Ā for the lower factor ``lower`` = L of A = L Lᵀ and its cotangent L̄: for symmetric dA,
    dL = L Φ(L⁻¹ dA L⁻ᵀ) and Φ is self-adjoint, so Ā = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹) (Murray 2016,
    eq. 10 and §3.1); not yet symmetrised. ``solve_transposed(L, X)`` computes L⁻ᵀ X.

    Complex Hermitian A = L Lᴴ (L's diagonal real, as LAPACK's): the same with ᴴ for ᵀ. L⁻¹ dL
    is lower triangular with a real diagonal, and L⁻¹ dA L⁻ᴴ = L⁻¹ dL + (L⁻¹ dL)ᴴ, so again
    dL = L Φ(L⁻¹ dA L⁻ᴴ); Φ is self-adjoint for the real inner product Re<a, b> too, so
    Ā = herm(L⁻ᴴ Φ(Lᴴ L̄) L⁻¹), and ``solve_transposed(L, X)`` computes L⁻ᴴ X."""
    middle = lower_with_half_diagonal(adjoint(lower) @ dlower)
    left = solve_transposed(lower, middle)                                  # L⁻ᵀ Φ
    return adjoint(solve_transposed(lower, adjoint(left)))                  # (L⁻ᵀ Φ) L⁻¹


def cholesky_tangent(lower, da, solve=np.linalg.solve):
    """The tangent of the lower factor ``lower`` = L of A = L Lᵀ along ``da``:
    dL = L Φ(L⁻¹ dA L⁻ᵀ) (Murray 2016), dA symmetrised to match the symmetric gradient of the
    reverse rules (for complex A = L Lᴴ: ᴴ for ᵀ, dA's Hermitian part). ``solve(L, X)``
    computes L⁻¹ X (a triangular solver where there is one)."""
    left = solve(lower, hermitian_part(da))          # L⁻¹ dA
    middle = solve(lower, adjoint(left))             # L⁻¹ dA L⁻ᵀ, dA being symmetric
    return lower @ lower_with_half_diagonal(middle)


def permutation(piv):
    """The row order of LAPACK's getrf: row i was swapped with row piv[i], in turn, so that
    a[order] = L U."""
    order = np.arange(len(piv))
    for i, j in enumerate(piv):
        order[i], order[j] = order[j], order[i]
    return order


def unit_lower_and_upper(lu):
    lower = np.tril(lu, -1) + np.eye(lu.shape[-1])
    return lower, np.triu(lu)


def lu_tangent(lu, dm, solve_triangular):
    """The tangent of the packed factors ``lu`` of M = L U along dM: with X = L⁻¹ dM U⁻¹,
    dL = L tril(X, -1) and dU = triu(X) U, packed as ``lu`` is (de Hoog, Anderssen & Lukas
    2011; the transpose of the reverse rule). ``solve_triangular`` has SciPy's signature."""
    lower, upper = unit_lower_and_upper(lu)
    x = solve_triangular(lower, dm, lower=True, unit_diagonal=True, check_finite=False)
    x = transpose(solve_triangular(upper, transpose(x), trans=1, check_finite=False))  # X U⁻¹
    return lower @ np.tril(x, -1) + np.triu(x) @ upper


def lu_tangent_times(lu, dlu, order, x, transposed):
    """dA x (dAᵀ x when ``transposed``) for A[order] = L U, L and U packed in ``lu`` and their
    tangents in ``dlu``: dA[order] = dL U + L dU, applied factor by factor (no n × n product)."""
    lower, upper = unit_lower_and_upper(lu)
    dlower, dupper = np.tril(dlu, -1), np.triu(dlu)
    if transposed:
        z = x[order]
        return (transpose(dupper) @ (transpose(lower) @ z)
                + transpose(upper) @ (transpose(dlower) @ z))
    return (dlower @ (upper @ x) + lower @ (dupper @ x))[np.argsort(order)]
