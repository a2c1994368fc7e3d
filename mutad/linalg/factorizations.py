"""Factorisations and the solves with their factors: Cholesky (np.linalg.cholesky,
scipy.linalg.cholesky, cho_factor, cho_solve), triangular solves, LU (lu_factor, lu_solve, lu)
and QR (np.linalg.qr, scipy.linalg.qr), NumPy's and SciPy's beside each other on one set of
derivatives.

Murray, "Differentiation of the Cholesky decomposition" (arXiv:1602.07527, 2016) for Cholesky;
de Hoog, Anderssen & Lukas (2011) and Giles (2008) for LU; Walter & Lehmann (2018) for QR (the
forward rule as JAX's). Inputs of cholesky are symmetric by contract, so they get the symmetric
gradient (the derivative along symmetric perturbations), as in PyTorch and JAX; a matrix that is
not symmetric (beyond rounding) is refused.

Each derivative takes the triangular solver it computes with, so that each caller passes one
that dispatches (a reverse pass over a forward rule, or an outer differentiation, records it).
The Cholesky and QR rules hold for complex matrices too (A = L Lᴴ, Hermitian), in mutad's
convention (a cotangent is dL/dx + i dL/dy): every transpose is then the conjugate transpose
(``adjoint``), which is the transpose itself for real arrays, so real values take the same
operations.
"""

import numpy as np
import scipy.linalg as _linalg

from ..core.allocation import allocate
from ..core.devices import device_of
from ..core.errors import UnsupportedOperationError
from ..core.registry import complex_aware, defjvp, defrule
from ..rules._helpers import one_triangle, symmetric_part, transpose, unbroadcast
from ..api import stop_gradient
from ..engines.arraylike import carries_derivative
from ..engines.products import product_times
from ..scipy._adjoints import StandIn, Value, scipy_adjoint, scipys_value
from ..core.views import memory
from .spectral import REPEATED_ULPS
from ._common import (adjoint, hermitian_part, is_transposed, one_column_of_a_batch,
                      require_matrix, times_transpose)

cholesky, cho_factor, cho_solve, solve_triangular, lu_factor, lu_solve, lu, qr = map(
    scipy_adjoint, (_linalg.cholesky, _linalg.cho_factor, _linalg.cho_solve,
                    _linalg.solve_triangular, _linalg.lu_factor, _linalg.lu_solve, _linalg.lu,
                    _linalg.qr))


# ----------------------------------------------------------------------------------------------
# The derivatives: Cholesky, LU, QR


def lower_with_half_diagonal(x):
    """Φ of Murray (2016): the lower triangle with the diagonal halved."""
    return np.tril(x) - 0.5 * (np.eye(x.shape[-1], like=memory(x)) * x)


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


def permutation(piv, rows=None):
    """The row order of LAPACK's getrf: row i was swapped with row piv[i], in turn, so that
    a[order] = L U; ``rows``: a's (piv's length where None: a square a). On a device, the same
    swaps there: reading piv would copy it to the host (and wait for the device)."""
    rows = len(piv) if rows is None else rows
    xp = device_of(piv)
    if xp is not None:
        order = xp.arange(rows)
        for i in range(len(piv)):
            j = piv[i:i + 1]  # (an index array: its row is gathered and scattered there)
            row = order[i:i + 1].copy()
            order[i:i + 1] = order[j]
            order[j] = row
        return order
    order = np.arange(rows)
    for i, j in enumerate(piv):
        order[i], order[j] = order[j], order[i]
    return order


def unit_lower_and_upper(lu):
    """L and U of the packed factors ``lu`` of an m × n matrix, each square as JAX's LU rules
    pad them (k = min(m, n)): L (m × m) unit lower triangular, its first k columns L's and the
    others the identity's; U (n × n) upper triangular, its first k rows U's and the others the
    identity's. The formulas of a square matrix's factors then hold for a rectangular one."""
    m, n = lu.shape[-2:]
    if m == n:
        return np.tril(lu, -1) + np.eye(n, like=memory(lu)), np.triu(lu)
    k = min(m, n)
    lower = np.tril(lu[:, :k], -1)
    if m > k:
        lower = np.concatenate([lower, np.zeros((m, m - k), like=memory(lu))], axis=1)
    upper = np.triu(lu[:k])
    if n > k:
        upper = np.concatenate([upper, np.eye(n, like=memory(lu))[k:]])
    return lower + np.eye(m, like=memory(lu)), upper


def _packed(lower, upper):
    """L (m × k) and U (k × n) packed into one m × n array as getrf packs them: L strictly
    below the diagonal, U on and above it."""
    m, n = lower.shape[0], upper.shape[1]
    k = min(m, n)
    if m == n:
        return np.tril(lower, -1) + np.triu(upper)
    return (np.pad(np.tril(lower, -1), ((0, 0), (0, n - k)))
            + np.pad(np.triu(upper), ((0, m - k), (0, 0))))


def through_zero_diagonal(solve_triangular):
    """``solve_triangular`` (SciPy's signature) that also solves with a triangle holding a zero
    on its diagonal (the U of a singular matrix), as the formulas give it in IEEE arithmetic
    (infinities and NaN where the value has them, as JAX has them): LAPACK's trtrs refuses such
    a triangle before solving; BLAS's trsm, which trtrs solves with, does not. Other triangles
    take ``solve_triangular`` itself, bit for bit."""
    def solve(a, b, trans=0, lower=False, unit_diagonal=False, check_finite=False):
        try:
            return solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal,
                                    check_finite=check_finite)
        except np.linalg.LinAlgError:
            if not (type(a) is type(b) is np.ndarray and a.ndim == b.ndim == 2):
                raise  # (arrays carrying derivatives, stacks: the solver's own error)
        trsm, = _linalg.get_blas_funcs(("trsm",), (a, b))
        return trsm(1, a, b, lower=lower, trans_a=trans, diag=unit_diagonal)
    return solve


def lu_tangent(lu, dm, solve_triangular):
    """The tangent of the packed factors ``lu`` of M = L U along dM: with X = L⁻¹ dM U⁻¹,
    dL = L tril(X, -1) and dU = triu(X) U, packed as ``lu`` is (de Hoog, Anderssen & Lukas
    2011; the transpose of the reverse rule). ``solve_triangular`` has SciPy's signature."""
    solve_triangular = through_zero_diagonal(solve_triangular)
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


def times_inverse_adjoint(y, r):
    """``y R⁻ᵀ`` (``y R⁻ᴴ`` for complex ones), through a solve."""
    return adjoint(np.linalg.solve(r, adjoint(y)))


def require_full_rank_qr(name, q, r, last_column_free=False):
    """Refuse the QR factors of a rank-deficient matrix (a diagonal entry of R zero within
    rounding: at most REPEATED_ULPS · max(m, n) · ε · max|R_kk|, Householder QR's backward
    error, as for the SVD's zero singular values). R_kk is then the norm of a column's part
    outside the previous ones', which has a kink at 0 (as σ = |·|), Q's column k any unit
    vector outside them, and every derivative divides by R_kk.

    But for the last column of a real square matrix (``last_column_free``: then whether only
    that entry is zero, each matrix's other columns independent): LAPACK's last reflector is
    the identity there, so Q's last column is the unit vector outside the others (their
    reflectors'), and R's last entry its signed product with the last column, without a kink
    (``dependent_last_column_qr_cotangent``)."""
    diagonal = np.abs(np.diagonal(memory(r), 0, -2, -1))
    if not diagonal.size:
        return False
    limit = REPEATED_ULPS * max(np.shape(q)[-2:]) * np.finfo(diagonal.dtype).eps
    # scaled by the finite entries: an inf or a NaN (of a matrix holding one) is no scale, and
    # its derivatives are NaN, as the factors are
    finite = np.where(np.isfinite(diagonal), diagonal, 0)
    zero = diagonal <= limit * np.max(finite, axis=-1, keepdims=True)
    if last_column_free and not np.any(zero[..., :-1]) and diagonal.shape[-1] > 1 \
            and np.shape(q)[-2] == np.shape(q)[-1] and not np.iscomplexobj(memory(r)) \
            and np.all(np.isfinite(diagonal)):  # (an inf's factors: NaN, no column to keep)
        return bool(np.any(zero))
    if np.any(zero):
        places = np.argwhere(zero)[:8]  # (of a stack: the matrix and its entry, not a place
        where = (f"entries {places[:, 0]}" if zero.ndim == 1 else ", ".join(  # in the stack)
            f"entry {k[-1]} of matrix {k[0] if len(k) == 2 else tuple(map(int, k[:-1]))}"
            for k in places))
        raise UnsupportedOperationError(
            f"{name} of a rank-deficient matrix (R's diagonal {where} "
            "zero within rounding): a column there lies in the span of the previous ones, so "
            "its column of Q is any unit vector outside them and its R entry has a kink at 0; "
            "neither has a derivative. Differentiate the QR of the independent columns, or a "
            "quantity of the column space such as a projector from scipy.linalg.orth.")
    return False


def dependent_last_column_qr_cotangent(name, q, r, dq, dr):
    """Ā for a real square A = [A₁  a] = [Q₁  q] R whose columns but the last are independent
    (``require_full_rank_qr``): A₁ = Q₁ R₁ is the reduced QR of A₁, q the unit vector
    outside Q₁'s columns (dq = -Q₁ dQ₁ᵀ q), and R's last column Qᵀ a: ā = Q R̄ₙ, Q̄ += a R̄ₙᵀ,
    then Q̄₁ -= q q̄ᵀ Q₁ and Ā₁ the reduced QR's."""
    column = q @ r[..., -1:]  # a (within rounding: the factors' product)
    dr_column = dr[..., :, -1:]
    dq = column @ transpose(dr_column) + (0.0 if dq is None else dq)
    q1, qn = q[..., :-1], q[..., -1:]
    dq1 = dq[..., :-1] - qn @ (transpose(dq[..., -1:]) @ q1)
    da1 = qr_cotangent(name, q1, r[..., :-1, :-1], dq1, dr[..., :-1, :-1])
    return np.concatenate([da1, q @ dr_column], axis=-1)


def dependent_last_column_qr_tangent(name, q, r, da):
    """(dQ, dR) of a real square A = [A₁  a] = [Q₁  q] R whose columns but the last are
    independent along dA: the reduced QR's of A₁, dq = -Q₁ dQ₁ᵀ q and R's last column's
    d(Qᵀ a) = dQᵀ a + Qᵀ da (``dependent_last_column_qr_cotangent``)."""
    q1, qn = q[..., :-1], q[..., -1:]
    dq1, dr1 = qr_tangent(name, q1, r[..., :-1, :-1], da[..., :-1])
    dq = np.concatenate([dq1, -q1 @ (transpose(dq1) @ qn)], axis=-1)
    dr_column = transpose(dq) @ (q @ r[..., -1:]) + transpose(q) @ da[..., -1:]
    dr1 = np.concatenate([dr1, np.zeros_like(dr1[..., :1, :])], axis=-2)
    return dq, np.concatenate([dr1, dr_column], axis=-1)


def qr_cotangent(name, q, r, dq, dr):
    """Ā for the reduced A = Q R of a tall or square A, from Q̄ (None: none) and R̄ (see ``numpy_qr``):
    (Q̄ + Q copyltu(M)) R⁻ᵀ, M = R R̄ᵀ - Q̄ᵀ Q (ᴴ for ᵀ, and Re on M's diagonal, for complex A);
    a rank-deficient A is refused (``require_full_rank_qr``), but for a real square one whose
    last column alone depends on the others."""
    if require_full_rank_qr(name, q, r, last_column_free=True):
        return dependent_last_column_qr_cotangent(name, q, r, dq, dr)
    m = r @ adjoint(dr) - (0.0 if dq is None else adjoint(dq) @ q)
    lower = np.tril(m, -1)
    diagonal = np.real(m) if np.iscomplexobj(m) else m
    mirrored = lower + adjoint(lower) + diagonal * np.eye(m.shape[-1], like=memory(m))
    return times_inverse_adjoint((0.0 if dq is None else dq) + q @ mirrored, r)


def qr_tangent(name, q, r, da):
    """(dQ, dR) of the reduced A = Q R along dA (see ``numpy_qr``): with C = Qᴴ dA R⁻¹ and Ω its
    skew-Hermitian part of the strict lower triangle (i Im diag(C) on the diagonal for complex
    A), dQ = Q (Ω - C) + dA R⁻¹, dR = (C - Ω) R; a rank-deficient A is refused, but for a real
    square one whose last column alone depends on the others."""
    if require_full_rank_qr(name, q, r, last_column_free=True):
        return dependent_last_column_qr_tangent(name, q, r, da)
    da_r_inverse = transpose(np.linalg.solve(transpose(r), transpose(da)))  # dA R⁻¹
    c = adjoint(q) @ da_r_inverse
    lower = np.tril(c, -1)
    omega = lower - adjoint(lower)                                 # skew-symmetric (Hermitian)
    if np.iscomplexobj(c):  # R's diagonal stays real: Ω's diagonal is i Im diag(C) (see numpy_qr)
        omega = omega + 1j * np.imag(c) * np.eye(c.shape[-1], like=memory(c))
    return q @ (omega - c) + da_r_inverse, (c - omega) @ r


# ----------------------------------------------------------------------------------------------
# np.linalg.cholesky


@defrule(np.linalg.cholesky, leading=1)
def numpy_cholesky(a, upper=False):
    """A = L Lᵀ (complex: A = L Lᴴ, Hermitian positive definite), with the symmetric
    (Hermitian) gradient; the upper factor is Lᵀ (Lᴴ). Murray 2016; see
    ``cholesky_cotangent``. A real matrix that is not symmetric: the factor of the symmetric
    matrix its triangle read (the upper one with ``upper``) stands for (``one_triangle``)."""
    read = one_triangle(a, not upper, "np.linalg.cholesky")
    factor = np.linalg.cholesky(a, upper=upper)
    lower = adjoint(factor) if upper else factor

    def back(dfactor):
        dlower = adjoint(dfactor) if upper else dfactor
        return (hermitian_part(cholesky_cotangent(lower, dlower)),)  # Murray 2016

    return factor, back if read is None else read.pulled(back)


@defjvp(np.linalg.cholesky)
def numpy_cholesky_jvp(tangents, a, upper=False):
    read = one_triangle(a, not upper, "np.linalg.cholesky")
    factor = np.linalg.cholesky(a, upper=upper)
    da = tangents[0] if read is None else read.tangent(tangents[0])
    if upper:
        return factor, adjoint(cholesky_tangent(adjoint(factor), da))
    return factor, cholesky_tangent(factor, da)


# ----------------------------------------------------------------------------------------------
# Cholesky


def _cholesky_back(lower, dlower):
    """Ā from the lower factor and its cotangent, by triangular solves that dispatch."""
    return cholesky_cotangent(lower, dlower, lambda factor, x: solve_triangular(
        factor, x, trans=1, lower=True, check_finite=False))


@cholesky.rule
def _cholesky_rule(a, lower=False, overwrite_a=False, check_finite=True):
    read = one_triangle(a, lower, "scipy.linalg.cholesky")  # (the upper one by default)
    factor = cholesky(a, lower, False, check_finite)

    def back(dfactor):
        if lower:
            return (symmetric_part(_cholesky_back(factor, dfactor)),)
        return (symmetric_part(_cholesky_back(transpose(factor), transpose(dfactor))),)

    return factor, back if read is None else read.pulled(back)


def solve_lower(lower, x):
    """L⁻¹ x for lower triangular L, by a triangular solve that dispatches."""
    return solve_triangular(lower, x, lower=True, check_finite=False)


@cholesky.jvp_rule
def _cholesky_jvp(tangents, a, lower=False, overwrite_a=False, check_finite=True):
    read = one_triangle(a, lower, "scipy.linalg.cholesky")
    factor = cholesky(a, lower, False, check_finite)
    da = tangents[0] if read is None else read.tangent(tangents[0])
    if lower:
        return factor, cholesky_tangent(factor, da, solve_lower)
    return factor, transpose(cholesky_tangent(transpose(factor), da, solve_lower))


@cho_factor.rule
def _cho_factor_rule(a, lower=False, overwrite_a=False, check_finite=True):
    read = one_triangle(a, lower, "scipy.linalg.cho_factor")
    c, lower = cho_factor(a, lower, False, check_finite)

    def back(dresult):
        dc = dresult[0]
        # c holds the factor in one triangle and a's own entries, copied, in the other.
        if lower:
            factor, copy = _cholesky_back(np.tril(c), np.tril(dc)), np.triu(dc, 1)
        else:
            factor = _cholesky_back(transpose(np.triu(c)), transpose(np.triu(dc)))
            copy = np.tril(dc, -1)
        if read is None:
            return (symmetric_part(factor + copy),)
        # (not symmetric: the factor is that of the triangle read, the copy a's other one)
        return (read.cotangent(symmetric_part(factor)) + copy,)

    return (c, lower), back


@cho_factor.jvp_rule
def _cho_factor_jvp(tangents, a, lower=False, overwrite_a=False, check_finite=True):
    read = one_triangle(a, lower, "scipy.linalg.cho_factor")
    c, lower = cho_factor(a, lower, False, check_finite)
    # The factor's triangle moves as the Cholesky factor, the other one as the copy of a it is
    # (of a symmetric a, as the symmetric tangent; else as a's own entries).
    if read is None:
        dm = dcopy = symmetric_part(tangents[0])
    else:
        dm, dcopy = read.tangent(tangents[0]), tangents[0]
    if lower:
        dc = cholesky_tangent(np.tril(c), dm, solve_lower) + np.triu(dcopy, 1)
    else:
        dc = (transpose(cholesky_tangent(transpose(np.triu(c)), dm, solve_lower))
              + np.tril(dcopy, -1))
    return (c, lower), (dc, None)


def _cholesky_solve_factor_cotangent(c, lower, db, x):
    """The cotangent of the factor in ``c``'s triangle from a solve x = A⁻¹ b with A = L Lᵀ
    (A = Uᵀ U for an upper factor), given b̄ = A⁻¹ x̄: Ā = -b̄ xᵀ, and dA = dL Lᵀ + L dLᵀ
    gives L̄ = (Ā + Āᵀ) L on L's triangle (Ū = U (Ā + Āᵀ)); the other triangle gets none."""
    da = -times_transpose(db, x)
    da_twice_symmetric = da + transpose(da)
    if lower:
        return np.tril(da_twice_symmetric @ np.tril(c))
    return np.triu(np.triu(c) @ da_twice_symmetric)


@cho_solve.rule
def _cho_solve_rule(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    x = cho_solve((c, lower), b, False, check_finite)

    def back(dx):
        # x = A⁻¹ b with A = L Lᵀ symmetric: b̄ = A⁻¹ x̄, Ā = -b̄ xᵀ (Giles 2008, §3.1).
        db = cho_solve((c, lower), dx, check_finite=False)
        return (_cholesky_solve_factor_cotangent(c, lower, db, x), None), db

    return x, back


@cho_solve.jvp_rule
def _cho_solve_jvp(tangents, c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    x = cho_solve((c, lower), b, False, check_finite)
    dfactor, db = tangents[:2]
    rhs = db
    if dfactor is not None and dfactor[0] is not None:
        # dx = A⁻¹ (db - dA x) (Giles 2008, §3.1), with A = L Lᵀ read from c's triangle (an
        # upper factor U is Lᵀ): dA x = dL (Lᵀ x) + L (dLᵀ x).
        if lower:
            factor, dfactor = np.tril(c), np.tril(dfactor[0])
        else:
            factor, dfactor = transpose(np.triu(c)), transpose(np.triu(dfactor[0]))
        da_x = dfactor @ (transpose(factor) @ x) + factor @ (transpose(dfactor) @ x)
        rhs = -da_x if rhs is None else rhs - da_x
    return x, cho_solve((c, lower), rhs, check_finite=False)


# ----------------------------------------------------------------------------------------------
# Triangular and LU solves


def _read_triangle(m, lower, unit_diagonal):
    """The entries of ``m`` a triangular solve reads: its lower or upper triangle, without the
    diagonal when that is taken as ones."""
    offset = 1 if unit_diagonal else 0
    return np.tril(m, -offset) if lower else np.triu(m, offset)


@solve_triangular.rule
def _solve_triangular_rule(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                           check_finite=True):
    x = solve_triangular(a, b, trans, lower, unit_diagonal, False, check_finite)
    transposed = is_transposed(trans)
    column = one_column_of_a_batch(a, b)

    def back(dx):
        # x = M⁻¹ b with M = T or Tᵀ, T the triangle of a: b̄ = M⁻ᵀ x̄, M̄ = -b̄ xᵀ, and a
        # gets T̄ on the entries solve_triangular reads (not the diagonal when it is unit);
        # summed over a batch that a or b was broadcast against
        db = solve_triangular(a, dx[..., None] if column else dx, 0 if transposed else 1,
                              lower, unit_diagonal, check_finite=False)
        dm = unbroadcast(-times_transpose(db, x[..., None] if column else x), np.shape(a))
        db = unbroadcast(db, np.shape(b) + ((1,) if column else ()))
        return (_read_triangle(transpose(dm) if transposed else dm, lower, unit_diagonal),
                db[..., 0] if column else db)

    return x, back


@solve_triangular.jvp_rule
def _solve_triangular_jvp(tangents, a, b, trans=0, lower=False, unit_diagonal=False,
                          overwrite_b=False, check_finite=True):
    x = solve_triangular(a, b, trans, lower, unit_diagonal, False, check_finite)
    da, db = tangents[:2]
    column = one_column_of_a_batch(a, b)
    rhs = db[:, None] if column and db is not None else db
    if da is not None:
        # dx = M⁻¹ (db - dM x), dM the tangent of the triangle solve_triangular reads.
        dt = _read_triangle(da, lower, unit_diagonal)
        dm_x = product_times(np.matmul, transpose(dt) if is_transposed(trans) else dt,
                             x[..., None] if column else x)
        rhs = -dm_x if rhs is None else rhs - dm_x
    dx = solve_triangular(a, rhs, trans, lower, unit_diagonal, check_finite=False)
    return x, dx[..., 0] if column else dx


def _lu_factor_cotangent(lu, order, dlu):
    """The cotangent of ``a`` from that of its packed factors ``lu`` (L strictly below the
    diagonal, U on and above it), a[order] = L U: with F = L⁻¹ d(a[order]) U⁻¹,
    dL = L tril(F, -1) and dU = triu(F) U, so the cotangent of a[order] is
    L⁻ᵀ (tril(Lᵀ L̄, -1) + triu(Ū Uᵀ)) U⁻ᵀ (as in JAX's lu pullback; Giles 2008 for the
    product rule), L and U of a rectangular a made square (``unit_lower_and_upper``)."""
    solve = through_zero_diagonal(solve_triangular)
    lower, upper = unit_lower_and_upper(lu)
    middle = np.tril(transpose(lower) @ np.tril(dlu, -1), -1) \
        + np.triu(np.triu(dlu) @ transpose(upper))
    left = solve(lower, middle, trans=1, lower=True, unit_diagonal=True)
    dpermuted = transpose(solve(upper, transpose(left), lower=False))
    return dpermuted[np.argsort(order)]


def _lu_cotangent(lu, order, dm):
    """The cotangent of the packed factors ``lu`` of M, M[order] = L U, from M̄:
    d(M[order]) = dL U + L dU gives L̄ = tril(M̄[order] Uᵀ, -1) and Ū = triu(Lᵀ M̄[order]),
    which share lu's memory layout."""
    lower, upper = unit_lower_and_upper(lu)
    dpermuted = dm[order]
    return np.tril(dpermuted @ transpose(upper), -1) + np.triu(transpose(lower) @ dpermuted)


def _matrix_is_empty(a, name="lu_factor"):
    """Whether the matrix ``a`` (square or rectangular) has no entry: its factors then carry
    no derivative."""
    require_matrix(name, a)
    return a.size == 0


@lu_factor.rule
def _lu_factor_rule(a, overwrite_a=False, check_finite=True):
    empty = _matrix_is_empty(a)
    lu, piv = lu_factor(a, False, check_finite)
    order = permutation(piv, a.shape[0])

    def back(dresult):
        if empty:
            return (np.zeros_like(a),)
        return (_lu_factor_cotangent(lu, order, dresult[0]),)

    return (lu, piv), back


@lu_factor.jvp_rule
def _lu_factor_jvp(tangents, a, overwrite_a=False, check_finite=True):
    empty = _matrix_is_empty(a)
    lu, piv = lu_factor(a, False, check_finite)
    if empty:
        return (lu, piv), (np.zeros_like(lu), None)
    return (lu, piv), (lu_tangent(lu, tangents[0][permutation(piv, a.shape[0])],
                                  solve_triangular), None)


@lu_solve.rule
def _lu_solve_rule(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    require_matrix("lu_solve", lu)
    x = lu_solve((lu, piv), b, trans, False, check_finite)
    transposed = is_transposed(trans)

    def back(dx):
        # x = M⁻¹ b, M = A or Aᵀ: b̄ = M⁻ᵀ x̄, M̄ = -b̄ xᵀ (Giles 2008, §3.1).
        db = lu_solve((lu, piv), dx, 0 if transposed else 1, check_finite=False)
        dm = -times_transpose(db, x)
        return (_lu_cotangent(lu, permutation(piv), transpose(dm) if transposed else dm),
                None), db

    return x, back


@lu_solve.jvp_rule
def _lu_solve_jvp(tangents, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    require_matrix("lu_solve", lu)
    x = lu_solve((lu, piv), b, trans, False, check_finite)
    dfactor, db = tangents[:2]
    rhs = db
    if dfactor is not None and dfactor[0] is not None:
        # dx = M⁻¹ (db - dM x), M = A or Aᵀ (Giles 2008, §3.1)
        dm_x = lu_tangent_times(lu, dfactor[0], permutation(piv), x, is_transposed(trans))
        rhs = -dm_x if rhs is None else rhs - dm_x
    return x, lu_solve((lu, piv), rhs, trans, check_finite=False)


# ----------------------------------------------------------------------------------------------
# lu: the factors of lu_factor, unpacked


def _lu_order(p, p_indices):
    """The rows of A that L U holds, in order: A[order] = L U, from SciPy's P (A = P L U) or
    its row indices (A = L[perm] U, so order = argsort(perm))."""
    return np.argsort(p) if p_indices else np.argmax(p, axis=0)


@lu.rule
def _lu_rule(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """A = P L U (the row order a decision, kept): lu_factor's rule on the packed factors
    (Giles 2008; as in JAX's lu pullback)."""
    empty = _matrix_is_empty(a, "lu")
    result = lu(a, permute_l, False, check_finite, p_indices)
    if permute_l:  # (P L, U): P from the factorisation SciPy makes of the same matrix
        p, lower, upper = lu(a, False, False, check_finite, False)
        order = _lu_order(p, False)
    else:
        p, lower, upper = result
        order = _lu_order(p, p_indices)
    packed = _packed(lower, upper)

    def back(dys):
        if empty:
            return (np.zeros_like(a),)
        if permute_l:  # (P L)‾ = P L̄
            dlower, dupper = dys[0][order], dys[1]
        else:
            dlower, dupper = dys[1], dys[2]
        return (_lu_factor_cotangent(packed, order, _packed(dlower, dupper)),)

    return result, back


@lu.jvp_rule
def _lu_jvp(tangents, a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    empty = _matrix_is_empty(a, "lu")
    result = lu(a, permute_l, False, check_finite, p_indices)
    p, lower, upper = lu(a, False, False, check_finite, False) if permute_l else result
    order = _lu_order(p, p_indices and not permute_l)
    if empty:
        dlu = np.zeros(np.shape(a), upper.dtype)
    else:
        dlu = lu_tangent(_packed(lower, upper), tangents[0][order], solve_triangular)
    k = min(np.shape(a))
    dlower, dupper = np.tril(dlu, -1)[:, :k], np.triu(dlu)[:k]
    if permute_l:
        return result, (dlower[np.argsort(order)], dupper)
    return result, (None, dlower, dupper)


# ----------------------------------------------------------------------------------------------
# QR of a tall or square matrix, reduced (Walter & Lehmann 2018; the forward rule as JAX's)


def _require_reduced_qr(a, mode):
    """Refuse the QR forms whose factors ``a`` does not determine: mode='complete' of a tall
    matrix (Q's columns beyond A's are any orthonormal basis of the rest). A wide matrix's
    complete factors are its reduced ones."""
    if mode not in ("reduced", "r", "complete") or (
            mode == "complete" and a.shape[-2] > a.shape[-1] > 0):
        raise UnsupportedOperationError(
            f"np.linalg.qr(a, mode={mode!r}) of a {a.shape[-2]}x{a.shape[-1]} matrix: mutad "
            "differentiates the reduced QR (mode='reduced' or 'r'; 'complete' of a square or "
            "wide matrix, whose factors are the reduced ones), whose factors are unique (the "
            "columns of a tall matrix's complete Q beyond a's are not). Take the reduced "
            "factors.")


def _wide(a):
    """How many rows ``a`` has, where it is wide (its reduced factors: Q of the square block
    X of its first columns, R = [R_X  Qᴴ Y]); else None."""
    m, n = a.shape[-2:]
    return m if 0 < m < n else None


def wide_qr_cotangent(name, a, q, r, dq, dr):
    """Ā for A = [X  Y] = Q [R_X  Qᴴ Y] of a wide A, from Q̄ (None: none) and R̄: Ȳ = Q R̄_Y,
    and X̄ the square QR's with Q̄ + Y R̄_Yᴴ (R_Y = Qᴴ Y reads Q)."""
    m = q.shape[-1]
    y, dr_y = a[..., m:], dr[..., m:]
    from_y = y @ adjoint(dr_y)
    dx = qr_cotangent(name, q, r[..., :m], from_y if dq is None else dq + from_y, dr[..., :m])
    return np.concatenate([dx, q @ dr_y], axis=-1)


def wide_qr_tangent(name, a, q, r, da):
    """(dQ, dR) of a wide A = [X  Y] = Q [R_X  Qᴴ Y] along dA: the square QR's for X, and
    dR_Y = dQᴴ Y + Qᴴ dY."""
    m = q.shape[-1]
    dq, dr_x = qr_tangent(name, q, r[..., :m], da[..., :m])
    dr_y = adjoint(dq) @ a[..., m:] + adjoint(q) @ da[..., m:]
    return dq, np.concatenate([dr_x, dr_y], axis=-1)


@defrule(np.linalg.qr, leading=1)
def numpy_qr(a, *settings, mode="reduced"):
    """A = Q R, reduced, of a tall or square A (Walter & Lehmann 2018); of a wide one, that of
    its leading square block (``wide_qr_cotangent``).

    Complex A: LAPACK's R has a real diagonal, which makes the factors unique (but for the
    diagonal's signs, a discrete choice), so every loss of Q and R has a gradient. With
    C = Qᴴ dA R⁻¹: Qᴴ dQ = Ω is skew-Hermitian and dR R⁻¹ upper triangular with a real
    diagonal, so Ω = tril(C, -1) - tril(C, -1)ᴴ + i Im diag(C), dQ = Q (Ω - C) + dA R⁻¹ and
    dR = (C - Ω) R. The adjoint for Re<a, b>: Ā = (Q̄ + Q G) R⁻ᴴ, G the Hermitian matrix with
    M = R R̄ᴴ - Q̄ᴴ Q's strict lower triangle below the diagonal and Re diag(M) on it
    (the real rule's copyltu, with ᴴ for ᵀ)."""
    mode = settings[0] if settings else mode
    _require_reduced_qr(a, mode)
    q, r = np.linalg.qr(a)

    def back(dys):
        if 0 in a.shape[-2:]:  # empty factors: nothing depends on the input
            return (np.zeros_like(a),)
        dq, dr = (None, dys) if mode == "r" else dys
        if _wide(a) is not None:
            return (wide_qr_cotangent("np.linalg.qr", a, q, r, dq, dr),)
        # dA = (dQ + Q copyltu(M)) R⁻ᵀ, M = R dRᵀ - dQᵀ Q, copyltu(M) = its lower triangle
        # mirrored to the upper one.
        return (qr_cotangent("np.linalg.qr", q, r, dq, dr),)

    return (r if mode == "r" else np.linalg.qr(a, mode)), back


@defjvp(np.linalg.qr)
def numpy_qr_jvp(tangents, a, mode="reduced"):
    _require_reduced_qr(a, mode)
    q, r = np.linalg.qr(a)
    if 0 in a.shape[-2:]:  # empty factors: nothing depends on the input
        result = np.linalg.qr(a, mode)
        return result, (np.zeros_like(r) if mode == "r" else
                        type(result)(np.zeros_like(q), np.zeros_like(r)))
    if _wide(a) is None:
        dq, dr = qr_tangent("np.linalg.qr", q, r, tangents[0])
    else:
        dq, dr = wide_qr_tangent("np.linalg.qr", a, q, r, tangents[0])
    if mode == "r":
        return r, dr
    result = np.linalg.qr(a, mode)
    return result, type(result)(dq, dr)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.qr: np.linalg.qr's rule on SciPy's factors


def _qr_setting(a, mode):
    """The reduced factors' count, refusing the QR forms whose factors are not determined."""
    m, n = np.shape(a)[-2:]
    if mode not in ("full", "economic", "r") or (0 < m < n) or (mode == "full" and m > n > 0):
        raise UnsupportedOperationError(
            f"scipy.linalg.qr(a, mode={mode!r}) of a {m}x{n} matrix: mutad differentiates the "
            "QR factors of tall or square matrices that a determines: mode='economic' (or "
            "'full' of a square matrix) and mode='r'. Transpose a wide matrix.")
    return min(m, n)


def _qr_inputs(a, pivoting, permutation_):
    """The matrix factorised: a, or its columns in pivoting order."""
    return np.take(a, permutation_, axis=-1) if pivoting else a


def _unpermuted(da, pivoting, permutation_):
    """The cotangent of a from that of its permuted columns a[:, P]."""
    if not pivoting:
        return da
    return np.take(da, np.argsort(permutation_, axis=-1), axis=-1)


@qr.rule
def _qr_rule(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """A P = Q R (P the identity without pivoting; its order a decision), reduced, of a tall or
    square A: np.linalg.qr's rule (Walter & Lehmann 2018) on SciPy's own factors. mode='r'
    returns R alone, as a tuple; its rows below the square block are zeros, with no
    gradient."""
    k = _qr_setting(a, mode)
    result = qr(a, False, lwork, mode, pivoting, check_finite)
    q, r, *order = qr(a, mode="economic", pivoting=pivoting, check_finite=check_finite)
    order = order[0] if pivoting else None
    empty = 0 in np.shape(a)[-2:]

    def back(dys):
        if empty:
            return (np.zeros_like(a),)
        if mode == "r":
            dq, dr = None, dys[0][..., :k, :]
        else:
            dq, dr = dys[0], dys[1]
        return (_unpermuted(qr_cotangent("scipy.linalg.qr", q, r, dq, dr), pivoting, order),)

    return result, back


@qr.jvp_rule
def _qr_jvp(tangents, a, overwrite_a=False, lwork=None, mode="full", pivoting=False,
            check_finite=True):
    _qr_setting(a, mode)
    result = qr(a, False, lwork, mode, pivoting, check_finite)
    q, r, *order = qr(a, mode="economic", pivoting=pivoting, check_finite=check_finite)
    if 0 in np.shape(a)[-2:]:
        dq, dr = np.zeros_like(q), np.zeros_like(r)
    else:
        dq, dr = qr_tangent("scipy.linalg.qr", q, r,
                            _qr_inputs(tangents[0], pivoting, order[0] if order else None))
    if mode == "r":
        rows = np.shape(result[0])[-2] - np.shape(dr)[-2]
        dr = np.concatenate([dr, np.zeros_like(dr, shape=np.shape(dr)[:-2] + (rows,)
                                               + np.shape(dr)[-1:])], axis=-2)
        return result, (dr,) + (None,) * (len(result) - 1)
    return result, (dq, dr) + (None,) * (len(result) - 2)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.rq and cholesky_banded: SciPy's values (LAPACK's gerqf/orgrq and pbtrf), with the
# derivatives of np.linalg.qr's and np.linalg.cholesky's rules on what they are of
# (``scipys_value``), so forward mode and every order follow.
#
# RQ is QR reversed: with J the reversal, A = R Q exactly when J Aᵀ J = (J Qᵀ J)(J Rᵀ J), a QR
# factorisation (J Rᵀ J is upper triangular, J Qᵀ J has orthonormal columns). The factors are
# unique up to one sign per row of Q (column of R), which LAPACK chooses: the composition's are
# turned to SciPy's (a constant sign each), and a composition that does not reproduce SciPy's
# factors is refused, never differentiated.


class _FactorValue(Value):
    """SciPy's factors of rq or cholesky_banded, without a derivative (the derivative is the
    composition's)."""


_rq_value = _FactorValue(lambda a, lwork, mode, check_finite: _linalg.rq(
    a, lwork=lwork, mode=mode, check_finite=check_finite), "scipy.linalg.rq")
_cholesky_banded_value = _FactorValue(lambda ab, lower, check_finite: _linalg.cholesky_banded(
    ab, False, lower, check_finite), "scipy.linalg.cholesky_banded")


def _rq_like_scipys(a, mode, check_finite):
    m, n = np.shape(a)[-2:]
    if np.ndim(a) != 2 or np.iscomplexobj(a) or m > n or (mode == "full" and m != n):
        raise UnsupportedOperationError(
            f"scipy.linalg.rq(a, mode={mode!r}) of a {'x'.join(map(str, np.shape(a)))} "
            f"{'complex ' if np.iscomplexobj(a) else ''}array: mutad differentiates the RQ "
            "factors of a real square matrix, and of a wide one (more columns than rows) with "
            "mode='economic' or 'r' (Q's other rows, mode='full', are not determined by A). "
            "Factor the transpose of a tall matrix with qr instead (A = R Q is Aᵀ = Qᵀ Rᵀ).")
    value = _rq_value(a, None, "economic", check_finite)
    q_c, r_c = np.linalg.qr(a[::-1, ::-1].T)  # J Aᵀ J = Q' R', reduced: n x m and m x m
    r, q = r_c.T[::-1, ::-1], q_c.T[::-1, ::-1]  # A = (J R'ᵀ J)(J Q'ᵀ J)
    signs = np.where(np.sum(value[1] * stop_gradient(q), axis=1) < 0, -1.0, 1.0)
    r, q = r * signs, q * signs[:, None]
    scale = 1.0 + np.max(np.abs(value[0]), initial=0.0)
    if not (np.max(np.abs(r - value[0]), initial=0.0) <= 1e-8 * scale * n
            and np.max(np.abs(q - value[1]), initial=0.0) <= 1e-8 * n):
        raise UnsupportedOperationError(  # (a guard: never another factorisation's derivative)
            "scipy.linalg.rq: the QR factorisation that gives mutad's derivative did not "
            "reproduce SciPy's RQ factors of this matrix (a rank-deficient matrix, whose "
            "factors are not determined), so it cannot differentiate it. Pass the matrix "
            "through mutad.stop_gradient where no gradient should flow.")
    return r, q


def _rq(a, overwrite_a=False, lwork=None, mode="full", check_finite=True):
    if not carries_derivative(a):  # a constant (mutad.stop_gradient): SciPy's own
        return _rq_stand_in.original(a, overwrite_a, lwork, mode, check_finite)
    r, q = _rq_like_scipys(a, mode, check_finite)
    value = _rq_value(a, lwork, mode, check_finite)
    if mode == "r":  # SciPy's R of mode 'r' is m x n: n - m zero columns, then the triangle
        m, n = np.shape(a)
        return scipys_value(value, np.concatenate([np.zeros((m, n - m)) * r[:, :1], r], axis=1))
    return scipys_value(value[0], r), scipys_value(value[1], q)


def _cholesky_banded(ab, overwrite_ab=False, lower=False, check_finite=True):
    """SciPy's factor in band storage. Each stored off-diagonal entry of ``ab`` stands for two
    entries of the symmetric matrix, and gets the sum of their gradients (solveh_banded's
    convention); the corner entries band storage does not use are copied through by LAPACK,
    and so by the composition."""
    if not carries_derivative(ab):  # a constant (mutad.stop_gradient): SciPy's own
        return _cholesky_banded_stand_in.original(ab, overwrite_ab, lower, check_finite)
    if np.ndim(ab) != 2 or np.iscomplexobj(ab):
        raise UnsupportedOperationError(
            "scipy.linalg.cholesky_banded of complex (Hermitian) or stacked band storage: "
            "mutad differentiates one real symmetric matrix in band storage. Build the matrix "
            "and call cholesky.")
    value = _cholesky_banded_value(ab, lower, check_finite)
    p, n = np.shape(ab)
    p -= 1
    diagonals = {}
    for k in range(min(p, n - 1) + 1):  # the k-th superdiagonal, A[j, j + k]
        d = ab[k, :n - k] if lower else ab[p - k, k:]
        diagonals[k] = d
        if k:
            diagonals[-k] = d
    dense = sum(np.diag(d, k) for k, d in diagonals.items())
    factor = np.linalg.cholesky(dense)  # L, with A = L Lᵀ (upper storage holds U = Lᵀ)
    rows = []
    for r in range(p + 1):
        k = r if lower else p - r  # row r holds the k-th diagonal below (L) or above (U)
        if k >= n:
            rows.append(ab[r] * 1.0)
        elif lower:
            rows.append(np.concatenate([np.diag(factor, -k), ab[r, n - k:] * 1.0]))
        else:
            rows.append(np.concatenate([ab[r, :k] * 1.0, np.diag(factor, -k)]))
    composition = np.stack(rows)
    scale = 1.0 + np.max(np.abs(value), initial=0.0)
    if not np.max(np.abs(composition - value), initial=0.0) <= 1e-8 * scale * n:
        raise UnsupportedOperationError(  # (a guard)
            "scipy.linalg.cholesky_banded: the dense Cholesky factorisation that gives mutad's "
            "derivative did not reproduce SciPy's factor, so it cannot differentiate this call. "
            "Build the matrix and call cholesky.")
    return scipys_value(value, composition)


_rq_stand_in = StandIn(_linalg.rq, _rq)
_cholesky_banded_stand_in = StandIn(_linalg.cholesky_banded, _cholesky_banded)
rq, cholesky_banded = _rq_stand_in, _cholesky_banded_stand_in


# Complex values (facet complex): written in mutad's convention (conjugate transposes).
complex_aware(np.linalg.cholesky, np.linalg.qr)


def _ldl_with_pivots(A, lower=True, hermitian=True, overwrite_a=False, check_finite=True):
    """SciPy's ``lu, d, perm`` (``A = lu d luᵀ``, ``lu[perm]`` unit triangular, ``d`` block
    diagonal of 1 x 1 and 2 x 2 blocks, of the triangle of ``A`` LAPACK reads), differentiated
    with SciPy's pivoting (the order ``perm`` and the blocks, decisions on the values, as
    ``lu``'s pivots are): the derivative of the block LDLᵀ factorisation without pivoting of
    ``A[perm][:, perm]`` with those blocks, computed by the factorisation itself in calls mutad
    differentiates (to every order), its values SciPy's. ``overwrite_a`` is a permission SciPy
    need not take: ``A`` is left as it was."""
    if not carries_derivative(A):  # a constant (mutad.stop_gradient): SciPy's own
        return _ldl.original(A, lower, hermitian, overwrite_a, check_finite)
    if np.ndim(A) != 2 or np.iscomplexobj(A):
        raise UnsupportedOperationError(
            "scipy.linalg.ldl of a complex or stacked matrix: mutad differentiates the LDLᵀ "
            "factorisation of one real symmetric matrix. Solve with scipy.linalg.solve(a, b, "
            "assume_a='sym'), or use eigh.")
    lu, d, perm = _ldl.original(np.array(memory(A)), lower, hermitian, False, check_finite)
    n = lu.shape[0]
    # the symmetric matrix of the triangle LAPACK reads, in the order of the factor, made
    # lower triangular (an upper factor is one in the reverse order)
    half = np.tril(A) if lower else np.triu(A)
    order = perm if lower else perm[::-1]
    S = (half + transpose(np.tril(half, -1) if lower else np.triu(half, 1)))[order][:, order]
    blocks = np.diag(d if lower else d[::-1, ::-1], -1) != 0
    L, D = allocate(np.eye(n)), allocate(np.zeros((n, n)))  # (arrays the writes follow)
    j = 0
    while j < n:
        size = 2 if j + 1 < n and blocks[j] else 1
        pivot = S[:size, :size]
        D[j:j + size, j:j + size] = pivot
        column = S[size:, :size]
        factor = column / pivot if size == 1 else transpose(
            np.linalg.solve(pivot, transpose(column)))
        L[j + size:, j:j + size] = factor
        S = S[size:, size:] - factor @ transpose(column)
        j += size
    if not lower:
        L, D = L[::-1, ::-1], D[::-1, ::-1]
    factor = allocate(np.empty((n, n)))
    factor[perm] = L
    scale = 1.0 + np.max(np.abs(lu), initial=0.0) * (1.0 + np.max(np.abs(d), initial=0.0))
    if not max(np.max(np.abs(memory(factor) - lu), initial=0.0),
               np.max(np.abs(memory(D) - d), initial=0.0)) <= 1e-8 * scale * n:
        raise UnsupportedOperationError(  # (a guard)
            "scipy.linalg.ldl: the factorisation with SciPy's pivots that gives mutad's "
            "derivative did not reproduce SciPy's factors, so it cannot differentiate this "
            "call. Solve with scipy.linalg.solve(a, b, assume_a='sym'), or use eigh.")
    return scipys_value(lu, factor), scipys_value(d, D), perm


_ldl = StandIn(_linalg.ldl, _ldl_with_pivots)
