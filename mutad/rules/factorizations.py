"""The derivatives of the matrix factorisations (Cholesky, LU, the symmetric eigendecomposition,
the SVD, QR), of determinants and of norms, shared by ``np.linalg``'s rules, the
``scipy.linalg`` wrappers and the in-place routines of ``mutad.linalg``.

Each takes the triangular solver it computes with, so that each caller passes one that
dispatches (a reverse pass over a forward rule, or an outer differentiation, records it).

The Cholesky rules hold for complex Hermitian matrices too, A = L Lᴴ, in mutad's convention (a
cotangent is dL/dx + i dL/dy): every transpose is then the conjugate transpose (``adjoint``),
which is the transpose itself for real arrays, so real values take the same operations.
"""

import numpy as np

from ..errors import UnsupportedOperationError
from ..views import memory
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


def permutation(piv):
    """The row order of LAPACK's getrf: row i was swapped with row piv[i], in turn, so that
    a[order] = L U."""
    order = np.arange(len(piv))
    for i, j in enumerate(piv):
        order[i], order[j] = order[j], order[i]
    return order


def unit_lower_and_upper(lu):
    lower = np.tril(lu, -1) + np.eye(lu.shape[-1], like=memory(lu))
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


# ----------------------------------------------------------------------------------------------
# Determinants, norms, the symmetric eigendecomposition, the SVD and QR (np.linalg's rules, and
# scipy.linalg's on SciPy's own factors)


def conjugate(x):
    """The complex conjugate; a real ``x`` itself (no operation recorded)."""
    return np.conjugate(x) if np.iscomplexobj(x) else x


def cofactor(a):
    """d det(A) / dA = adj(A)ᵀ, finite even where A is singular.

    With A = U S Vᵀ, adj(A)ᵀ = det(U) det(V) U adj(S) Vᵀ, adj(S)_ii = Π_{j≠i} s_j. For complex
    A = U S Vᴴ (the holomorphic derivative, det(A) A⁻ᵀ where A is invertible):
    adj(A)ᵀ = det(U) det(Vᴴ) conj(U) adj(S) conj(Vᴴ).
    """
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * ((conjugate(u) * others[..., None, :]) @ conjugate(vt))


def as_matrices(y):
    """A (stack of) scalars ``y`` as 1 × 1 matrices, to scale a stack of matrices. ``y`` may be
    a Python or NumPy scalar, or an array an outer differentiation traces: np.reshape
    dispatches where np.asarray would cut the outer gradient."""
    return np.reshape(y, np.shape(y) + (1, 1))


def det_cotangent(a, y, dy):
    """Ā for y = det(A): d det = det(A) tr(A⁻¹ dA) (Jacobi's formula; Giles 2008, §3.1), so
    Ā = ȳ det(A) A⁻ᵀ, the cofactor matrix adj(A)ᵀ where A is singular."""
    try:
        adjugate = as_matrices(y) * transpose(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        adjugate = cofactor(a)
    return as_matrices(dy) * adjugate


def det_tangent(a, y, da):
    """The tangent of y = det(A) along dA: det(A) tr(A⁻¹ dA), <adj(A)ᵀ, dA> for singular A."""
    try:
        return y * np.trace(np.linalg.solve(a, da), axis1=-2, axis2=-1)
    except np.linalg.LinAlgError:
        return np.sum(cofactor(a) * da, axis=(-2, -1))


def _split_ties(mask, axis):
    """An equal share of the subgradient for each entry attaining an extremum."""
    return mask / np.sum(mask, axis=axis, keepdims=True)


def _vector_norm_derivative(x, y, ord, axes):
    """d y / d x for y = ‖x‖_ord over ``axes`` (``y`` with those axes kept).

    Where the norm is not differentiable the subgradient 0 is taken at 0, and ties of the
    max/min norms share the gradient equally. For complex ``x`` the same formulas give the
    gradient in mutad's convention (dy/d Re x + i dy/d Im x): ``np.sign(x)`` is then x / |x|,
    the direction in which |x| grows, and x / y that of the 2-norm.
    """
    magnitude = np.abs(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ord in (None, 2):
            return np.where(y == 0, 0.0, x / y)
        if ord in (np.inf, -np.inf):
            return np.sign(x) * _split_ties(magnitude == y, axes)
        if ord == 0:
            return np.zeros_like(x)
        if ord == 1:
            return np.sign(x)
        # ‖x‖_p = (Σ|x_i|^p)^(1/p): d/dx_i = sign(x_i) (|x_i| / ‖x‖_p)^(p-1)
        return np.where((x == 0) | (y == 0), 0.0, np.sign(x) * (magnitude / y) ** (ord - 1))


def _matrix_norm_derivative(x, y, ord):
    """d y / d x for a matrix norm of the last two axes of ``x`` (``y`` with them kept); for
    complex ``x`` the gradient in mutad's convention: dσ_i = Re(u_iᴴ dA v_i), so the
    singular-value norms' gradients are U Vᴴ and u_i v_iᴴ (``vt`` being Vᴴ)."""
    if ord in (None, "fro"):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(y == 0, 0.0, x / y)
    if ord in ("nuc", 2, -2):
        if 0 in np.shape(x)[-2:]:  # no singular value: the norm of an empty matrix is 0
            return np.zeros_like(x)
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        if ord == "nuc":
            return u @ vt  # d Σσ_i = tr(Uᵀ dA V) (Re tr(Uᴴ dA V) for complex A)
        pick = 0 if ord == 2 else -1  # d σ_i = u_iᵀ dA v_i
        return u[..., :, pick, None] * vt[..., pick, None, :]
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x|; inf: the largest row sum; negative: the smallest.
        summed, across = (-2, -1) if ord in (1, -1) else (-1, -2)
        sums = np.sum(np.abs(x), axis=summed, keepdims=True)
        pick = np.max if ord > 0 else np.min
        return np.sign(x) * _split_ties(sums == pick(sums, axis=across, keepdims=True), across)
    raise UnsupportedOperationError(f"np.linalg.norm(..., ord={ord!r}) of a matrix.")


def norm_derivative(x, y, ord, axes, keepdims, matrix):
    """d y / d x for y a norm of ``x`` over ``axes`` (a matrix norm when ``matrix``), in x's
    shape."""
    y_kept = y if keepdims else np.expand_dims(y, axes)
    if not matrix:
        return _vector_norm_derivative(x, y_kept, ord, axes)
    moved = (-2, -1)
    derivative = _matrix_norm_derivative(np.moveaxis(x, axes, moved),
                                         np.moveaxis(y_kept, axes, moved), ord)
    return np.moveaxis(derivative, moved, axes)


def norm_pullback(x, y, ord, axes, keepdims, matrix):
    """The pullback of a norm of ``x`` over ``axes`` (a matrix norm when ``matrix``).

    Where the derivative branches on ``x`` (signs, ties, zeros) the branch is taken now: back
    may see ``x`` restored by inversion, equal up to rounding, where a tie or a zero would not
    survive. The Euclidean norms keep only where they are 0 and divide by them in back; the
    others keep their derivative, computed now."""
    if ord in (None, "fro") or (ord == 2 and not matrix):
        y_kept = y if keepdims else np.expand_dims(y, axes)
        zero = y_kept == 0

        def back(dy):
            dy_kept = dy if keepdims else np.expand_dims(dy, axes)
            return (dy_kept * np.where(zero, 0.0, x / np.where(zero, 1.0, y_kept)),)

        return back
    derivative = norm_derivative(x, y, ord, axes, keepdims, matrix)

    def back(dy):
        dy_kept = dy if keepdims else np.expand_dims(dy, axes)
        return (dy_kept * derivative,)

    return back


def norm_tangent(x, dx, y, ord, axes, keepdims, matrix):
    """The tangent of a norm: the reverse rule's (sub)gradient applied to ``dx``, for complex
    ``x`` as the real inner product Re(conj(gradient) dx)."""
    derivative = norm_derivative(x, y, ord, axes, keepdims, matrix)
    if np.iscomplexobj(derivative):
        return np.sum(np.real(np.conjugate(derivative) * dx), axis=axes, keepdims=keepdims)
    return np.sum(derivative * dx, axis=axes, keepdims=keepdims)


def reduced_axes(x, axis):
    return tuple(int(i) % np.ndim(x) for i in np.atleast_1d(axis))


def norm_axes(x, ord, axis):
    """The axes ``np.linalg.norm`` reduces, and whether it takes a matrix norm over them."""
    if axis is None and ord is None:  # the 2-norm of all entries, whatever the shape
        return tuple(range(np.ndim(x))), False
    axes = reduced_axes(x, tuple(range(np.ndim(x))) if axis is None else axis)
    return axes, len(axes) == 2


PHASE_TOLERANCE = 1e-6
"""How large Im diag(Vᴴ V̄) may be, relative to the norm of V̄'s column, before a loss counts
as reading an eigenvector's (or singular vector's) phase: rounding leaves it near 1e-16."""


def squared_column_norms(x):
    return np.sum(np.real(np.conjugate(x) * x), axis=-2)


def require_phase_free(name, phases, squared_scale):
    """Refuse a loss that depends on the phases of complex eigenvectors or singular vectors.

    Each column of V (eigh, eig; for the SVD the pairs of columns of U and V together) is
    determined only up to a factor e^{iφ}, which NumPy (LAPACK) fixes by a convention that
    mutad does not differentiate: the rules take their own phase convention, so the gradient
    of a loss invariant under those phases (|V|², V diag(c) Vᴴ, a projector v vᴴ, eig's
    V diag(f(w)) V⁻¹) is right, and that of a loss that reads a phase would be arbitrary. Such
    a loss is told by its cotangent: the change of the loss along V → V diag(e^{iφ}) is
    Σ φ_j Im (Vᴴ V̄)_jj, so invariance means ``phases`` = Im diag(Vᴴ V̄) = 0 (for the SVD,
    Im diag(Uᴴ Ū) + Im diag(Vᴴ V̄)). As in PyTorch, a loss that is not invariant is refused,
    in reverse mode (forward mode cannot tell: its tangents are in the rules' convention).
    The test is per call: a program that calls the factorisation twice on one matrix and
    cancels one call's phases by the other's (``V1.conj().T @ V2``) is refused too, although
    its gradient would be right; each rule therefore reads the same call's factors that it
    returns.
    ``squared_scale`` is the squared norm of the cotangent's columns (|phases|² is at most
    that); squares, so that no square root of 0 is recorded under nested differentiation."""
    if np.any(phases * phases > PHASE_TOLERANCE ** 2 * squared_scale):
        raise UnsupportedOperationError(
            f"{name} of a complex matrix: the loss depends on the phases of the "
            "eigenvectors (or singular vectors), which are arbitrary (each column may be "
            "multiplied by e^{iφ}; NumPy's choice is LAPACK's convention, not a differentiable "
            "function of the matrix), so it has no gradient. Differentiate quantities that do "
            "not depend on the phases, such as np.abs(V) ** 2, V @ np.diag(c) @ V.conj().T, "
            "or vectors whose phase your own code fixes, V * (V[k].conj() / np.abs(V[k])).")


def eigh_couplings(w, equal=None):
    """F_ij = 1 / (w_j - w_i) off the diagonal. Equal eigenvalues make the eigenvectors'
    derivative undefined; their pairs get F = 0 (no coupling). ``equal`` (None: compare now)
    says which pairs are equal, as ``equal_pairs`` found them when w was computed. (Complex
    eigenvalues, for eig, too.)"""
    gaps = w[..., None, :] - w[..., :, None]
    if equal is None:
        equal = gaps == 0
    return np.where(equal, 0.0, 1.0 / np.where(equal, 1.0, gaps))


def equal_pairs(w):
    return w[..., None, :] == w[..., :, None]


def eigh_cotangent(w, v, dw, dv, equal):
    """Ā for A = V diag(w) Vᵀ (Giles 2008, §3.1): V (diag(w̄) + F ∘ Vᵀ V̄) Vᵀ, symmetrised.
    Complex Hermitian A = V diag(w) Vᴴ: the same with ᴴ for ᵀ, its Hermitian part (see ``rules.linalg.eigh``)."""
    middle = np.zeros(w.shape + w.shape[-1:], np.result_type(w, dw), like=memory(w))
    if dv is not None and np.any(dv):
        vh_dv = adjoint(v) @ dv
        if np.iscomplexobj(vh_dv):
            require_phase_free("np.linalg.eigh", np.imag(np.diagonal(vh_dv, 0, -2, -1)),
                                squared_column_norms(dv))
        middle = eigh_couplings(w, equal) * vh_dv
    middle = middle + dw[..., None, :] * np.eye(w.shape[-1], like=memory(w))
    return hermitian_part(v @ middle @ adjoint(v))


def real_diagonal(m):
    """The diagonal of a stack of matrices, its real part for complex ones, as a new array."""
    diagonal = np.diagonal(m, 0, -2, -1)
    return (np.real(diagonal) if np.iscomplexobj(diagonal) else diagonal).copy()


def eigh_tangent(v, da):
    """V's coordinates of the symmetric (Hermitian) part of ``da``, Vᴴ dA V, and their
    diagonal dw, real."""
    middle = adjoint(v) @ hermitian_part(da) @ v
    return middle, real_diagonal(middle)


def svd_couplings(s):
    """F_ij = 1/(s_j² - s_i²) off the diagonal (Townsend 2016)."""
    s_sq = s * s
    difference = s_sq[..., None, :] - s_sq[..., :, None]
    diagonal = np.eye(s.shape[-1], dtype=bool, like=memory(s))
    return np.where(diagonal, 0.0, 1.0 / np.where(diagonal, 1.0, difference))


def svd_cotangent(u, s, vt, du, ds, dvt):
    """The pullback of the thin SVD ``a = u diag(s) vt`` (Townsend 2016, "Differentiating the
    singular value decomposition", eq. 30). Distinct singular values are assumed: the
    singular vectors of repeated ones are not determined, and neither is their gradient.

    Complex A = U S Vᴴ (``vt`` = Vᴴ): ᴴ for ᵀ, and one more term. With dP = Uᴴ dA V,
    Ω_U = Uᴴ dU and Ω_V = Vᴴ dV skew-Hermitian, Im dP_ii = s_i Im(Ω_U - Ω_V)_ii: only the
    difference of the phases of u_i and v_i is determined, the pair's common phase being free
    (see ``require_phase_free``). The rules split it evenly, dU gaining
    U diag(i Im dP_ii / 2s_i) and dV its opposite, so P̄ gains i diag((Im J_ii - Im K_ii) / 2s_i),
    J = Uᴴ Ū, K = Vᴴ V̄; for a phase-free loss Im J_ii = -Im K_ii."""
    v = adjoint(vt)
    a_bar = u @ (ds[..., :, None] * vt)
    if du is None and dvt is None:
        return a_bar
    f = svd_couplings(s)
    m, n = u.shape[-2], v.shape[-2]
    phases = np.iscomplexobj(u) and np.iscomplexobj(v)
    ut_du = vt_dv = dv = None
    if du is not None:
        ut_du = adjoint(u) @ du
        a_bar = a_bar + u @ ((f * (ut_du - adjoint(ut_du))) * s[..., None, :]) @ vt
        if m > s.shape[-1]:  # the part of du outside u's column space
            a_bar = a_bar + (du - u @ ut_du) @ (vt / s[..., :, None])
    if dvt is not None:
        dv = adjoint(dvt)
        vt_dv = vt @ dv
        a_bar = a_bar + u @ (s[..., :, None] * (f * (vt_dv - adjoint(vt_dv)))) @ vt
        if n > s.shape[-1]:
            a_bar = a_bar + (u / s[..., None, :]) @ adjoint(dv - v @ vt_dv)
    if phases:
        j, k = (0.0 if x is None else np.imag(np.diagonal(x, 0, -2, -1))
                for x in (ut_du, vt_dv))
        norms = sum(0.0 if x is None else squared_column_norms(x) for x in (du, dv))
        require_phase_free("np.linalg.svd", j + k, norms)
        a_bar = a_bar + u @ ((1j * (j - k) / (2 * s))[..., :, None] * vt)
    return a_bar


def svd_tangent(u, s, vt, da):
    """(dU, ds, dVᵀ) of the thin SVD A = U diag(s) Vᵀ along dA (Townsend 2016; see ``rules.linalg.svd``)."""
    v = adjoint(vt)
    dp = adjoint(u) @ da @ v                                     # Uᵀ dA V
    ds = real_diagonal(dp)
    # Townsend 2016: dU = U (F ∘ (dP S + S dPᵀ)) + (I - U Uᵀ) dA V S⁻¹,
    #                dV = V (F ∘ (S dP + dPᵀ S)) + (I - V Vᵀ) dAᵀ U S⁻¹  (ᴴ for complex A).
    f = svd_couplings(s)
    dp_s, s_dp = dp * s[..., None, :], s[..., :, None] * dp
    du = u @ (f * (dp_s + adjoint(dp_s)))
    dv = v @ (f * (s_dp + adjoint(s_dp)))
    if np.iscomplexobj(dp):  # the phases, split evenly between u_i and v_i (see svd_cotangent)
        phase = 1j * np.imag(np.diagonal(dp, 0, -2, -1)) / (2 * s)
        du = du + u * phase[..., None, :]
        dv = dv - v * phase[..., None, :]
    m, n, k = u.shape[-2], v.shape[-2], s.shape[-1]
    if m > k:
        du = du + (da @ v - u @ dp) / s[..., None, :]
    if n > k:
        dv = dv + (adjoint(da) @ u - v @ adjoint(dp)) / s[..., None, :]
    return du, ds, adjoint(dv)


def times_inverse_adjoint(y, r):
    """``y R⁻ᵀ`` (``y R⁻ᴴ`` for complex ones), through a solve."""
    return adjoint(np.linalg.solve(r, adjoint(y)))


def qr_cotangent(q, r, dq, dr):
    """Ā for the reduced A = Q R of a tall or square A, from Q̄ (None: none) and R̄ (see ``rules.linalg.qr``):
    (Q̄ + Q copyltu(M)) R⁻ᵀ, M = R R̄ᵀ - Q̄ᵀ Q (ᴴ for ᵀ, and Re on M's diagonal, for complex A)."""
    m = r @ adjoint(dr) - (0.0 if dq is None else adjoint(dq) @ q)
    lower = np.tril(m, -1)
    diagonal = np.real(m) if np.iscomplexobj(m) else m
    mirrored = lower + adjoint(lower) + diagonal * np.eye(m.shape[-1], like=memory(m))
    return times_inverse_adjoint((0.0 if dq is None else dq) + q @ mirrored, r)


def qr_tangent(q, r, da):
    """(dQ, dR) of the reduced A = Q R along dA (see ``rules.linalg.qr``): with C = Qᴴ dA R⁻¹ and Ω its
    skew-Hermitian part of the strict lower triangle (i Im diag(C) on the diagonal for complex
    A), dQ = Q (Ω - C) + dA R⁻¹, dR = (C - Ω) R."""
    da_r_inverse = transpose(np.linalg.solve(transpose(r), transpose(da)))  # dA R⁻¹
    c = adjoint(q) @ da_r_inverse
    lower = np.tril(c, -1)
    omega = lower - adjoint(lower)                                 # skew-symmetric (Hermitian)
    if np.iscomplexobj(c):  # R's diagonal stays real: Ω's diagonal is i Im diag(C) (see rules.linalg.qr)
        omega = omega + 1j * np.imag(c) * np.eye(c.shape[-1], like=memory(c))
    return q @ (omega - c) + da_r_inverse, (c - omega) @ r


def eig_cotangent(w, v, dw, dv, equal):
    """Ā for A V = V diag(w), V's columns of unit 2-norm (see eig):
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ."""
    vh = adjoint(v)
    middle = dw[..., None, :] * np.eye(w.shape[-1], like=memory(w))
    if dv is not None and np.any(dv):
        vh_dv = vh @ dv
        diagonal = np.diagonal(vh_dv, 0, -2, -1)
        if np.iscomplexobj(vh_dv):
            require_phase_free("np.linalg.eig", np.imag(diagonal), squared_column_norms(dv))
            diagonal = np.real(diagonal)
        normalised = vh_dv - (vh @ v) * diagonal[..., None, :]
        middle = middle + conjugate(eigh_couplings(w, equal)) * normalised
    return np.linalg.solve(vh, middle @ vh)


def eig_tangent(w, v, da):
    """dw = diag(M) and dV = V (F ∘ M) - V diag(Re diag(Vᴴ V (F ∘ M))), M = V⁻¹ dA V."""
    middle = np.linalg.solve(v, da @ v)
    dv = v @ (eigh_couplings(w) * middle)
    dv = dv - v * np.real(np.sum(conjugate(v) * dv, axis=-2, keepdims=True))
    return np.diagonal(middle, 0, -2, -1).copy(), dv
