"""Spectral decompositions: eigh, eigvalsh, eig, eigvals and svd (np.linalg's and scipy.linalg's,
with svdvals and polar), on one pullback scaffold.

Each rule computes the eigen- or singular pairs now and its pullback reads them
(``eigenpairs_pullback``, ``eigenvalues_pullback``, ``singular_values_pullback``,
``svd_factors_cotangent``): NumPy's and SciPy's variants differ in their settings and LAPACK
drivers only, and differentiate their own factors by the same formulas. Giles, "An extended
collection of matrix derivative results for forward and reverse mode algorithmic
differentiation" (2008, §3.1) for the eigenproblems; Townsend, "Differentiating the singular
value decomposition" (2016) for the SVD. Inputs of eigh are symmetric by contract, so they get
the symmetric gradient, as in PyTorch and JAX; a matrix that is not symmetric (beyond rounding)
is refused. Repeated eigenvalues and singular values, and zero singular values, are decided in
one place (``repeated_pairs``), and each rule asks of them what its outputs allow (see "Repeated
eigenvalues and singular values" below).

Complex matrices: each rule is written in mutad's convention (a cotangent is dL/dx + i dL/dy,
the pullback the adjoint for the real inner product Re<a, b>), its transposes conjugate
transposes (``adjoint``: for real arrays the transpose itself, so real values take the same
operations). The eigenvectors and singular vectors of complex matrices are each determined only
up to a phase, which NumPy fixes by LAPACK's conventions: they are left out of every gradient,
and a loss that reads them is refused (``require_phase_free``).
"""

import numpy as np
import scipy.linalg as _linalg

from ..engines.arraylike import carries_derivative, settled
from ..api import stop_gradient
from ..custom import adjoint as with_rule
from ..core.errors import UnsupportedOperationError
from ..core.registry import CONVENTION, RULES, complex_aware, defjvp, defrule
from ..rules._helpers import one_triangle, require_symmetric, symmetric_part, transpose
from ..scipy._adjoints import StandIn, Value, scipy_adjoint, scipys_value
from ..core.views import memory, wrapped
from ._common import adjoint, conjugate, hermitian_part, real_diagonal, require_matrix

eigh, eigvalsh, eig, eigvals, svd, svdvals, polar = map(scipy_adjoint, (
    _linalg.eigh, _linalg.eigvalsh, _linalg.eig, _linalg.eigvals, _linalg.svd, _linalg.svdvals,
    _linalg.polar))
eig.complex_values = eigvals.complex_values = CONVENTION  # complex outputs of a real matrix


# ----------------------------------------------------------------------------------------------
# The derivatives: eigenpairs, their phases and couplings, the SVD


INVARIANCE_TOLERANCE = 1e-6
"""How large a loss's change along a free choice (Im diag(Vᴴ V̄) for the phases, a rotation
within a repeated value's space), relative to the norm of the cotangent's columns, may be
before the loss counts as depending on that choice: rounding leaves it near 1e-16 (1e-13 at
values repeated within rounding, ``REPEATED_ULPS``), a loss that reads the choice near 1."""


def squared_column_norms(x):
    """Per column, its squared norm: a scale the checks below compare against, of the plain
    values (never differentiated: under a Hessian, sqrt of a zero column would take an
    infinite slope, and warn, for a number no result depends on)."""
    x = memory(x)
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
    if np.any(phases * phases > INVARIANCE_TOLERANCE ** 2 * squared_scale):
        raise UnsupportedOperationError(
            f"{name} of a complex matrix: the loss depends on the phases of the "
            "eigenvectors (or singular vectors), which are arbitrary (each column may be "
            "multiplied by e^{iφ}; NumPy's choice is LAPACK's convention, not a differentiable "
            "function of the matrix), so it has no gradient. Differentiate quantities that do "
            "not depend on the phases, such as np.abs(V) ** 2, V @ np.diag(c) @ V.conj().T, "
            "or vectors whose phase your own code fixes, V * (V[k].conj() / np.abs(V[k])).")


def eigh_couplings(w, repeated=None):
    """F_ij = 1 / (w_j - w_i) off the diagonal. Repeated eigenvalues make the eigenvectors'
    derivative undefined; their pairs get F = 0 (no coupling), the loss having been checked
    not to ask for it (``require_rotation_free``). ``repeated`` (None: compare now) says which
    pairs are repeated, as ``repeated_pairs`` found them when w was computed. (Complex
    eigenvalues, for eig, too.)"""
    gaps = w[..., None, :] - w[..., :, None]
    if repeated is None:
        repeated = repeated_pairs(memory(w))
    repeated = repeated | np.eye(w.shape[-1], dtype=bool, like=memory(w))
    return np.where(repeated, 0.0, 1.0 / np.where(repeated, 1.0, gaps))


# ----------------------------------------------------------------------------------------------
# Repeated eigenvalues and singular values: which pairs, and what a loss may ask of them
#
# A repeated eigenvalue of a symmetric matrix has an eigenspace of several dimensions, in which
# LAPACK picks a basis by its own steps: any rotation of those eigenvectors is as valid, and
# the one NumPy returns is not a differentiable function of the matrix. Along a perturbation
# the eigenvalues split, each moving by an eigenvalue of the perturbation's block (a choice
# that is not linear in the perturbation), and the eigenvectors turn to that block's own.
#
# The eigenvalues alone (eigvalsh, eigvals_only, svdvals, or a loss no gradient of which
# reaches the vectors: ``unreached_as_none``): a loss symmetric in the repeated
# ones (their cotangents equal, as those of Σ f(w)) has a derivative, the usual formula's, and
# one that tells them apart has none (``require_shared_cotangent``).
#
# With the vectors, the cotangent cannot tell: a loss's derivative there depends on how it
# couples the split to the turn of the basis, which no cotangent at NumPy's basis shows. At
# A = I the loss sum(C * (V diag(w) Vᵀ)) = sum(C * A) and np.sum(w) * c give the same
# cotangent (w̄ = diag(C) = c, V̄ = 0) and different gradients (C, c I), and a skew-free
# V̄ (the invariance PyTorch's phase check tests) does not decide it either. So a loss that
# reads repeated values or their vectors through a decomposition with vectors is refused
# (``require_untouched``), and the rest is the usual formula with the repeated pairs'
# couplings dropped: the derivative of the simple pairs, which reads the repeated values'
# space only (its projector). Forward mode differentiates tangents that move the repeated
# values together (the tangent's block a multiple of the identity: they stay repeated to
# first order), the vectors taking no rotation within their space (the rules' convention, as
# for the phases), and refuses the others. A second derivative there needs the couplings of
# the split values, which no first-order rule keeps: it is refused (``require_first_order``).


REPEATED_ULPS = 100
"""Eigenvalues (singular values) count as repeated when they differ by at most
REPEATED_ULPS · n · ε · max|w|. LAPACK's symmetric eigensolvers and SVDs are backward stable:
each computed value lies within a small multiple of n ε ‖A‖₂ (‖A‖₂ = max|w|) of an exact value
of A (LAPACK Users' Guide, §4.7 and §4.9), so values closer than that cannot be told from equal
ones. Q diag(1, 1, 2) Qᵀ computed in floating point has its repeated eigenvalue a few ε apart,
and the coupling 1 / (w_j - w_i) would multiply rounding by 1e16. orth's rank decision uses
the same bound."""


def repeated_pairs(values, size=None):
    """Which pairs (i ≠ j, along the last axis) of eigenvalues or singular values (real or
    complex, a plain array) are equal within rounding (``REPEATED_ULPS``; ``size``: the
    matrix's larger dimension, n = the number of values by default)."""
    n = values.shape[-1]
    with np.errstate(all="ignore"):  # (a decision: its events, inf - inf, are not f's)
        scale = np.max(np.abs(values), axis=-1, initial=0.0)[..., None, None]
        limit = REPEATED_ULPS * (size or n) * np.finfo(values.dtype).eps * scale
        # (none where a value is infinite or NaN: the bound is then no bound, and that
        # matrix's derivative is not finite anyway, which must not refuse the other matrices
        # of a stack)
        close = np.abs(values[..., None, :] - values[..., :, None]) <= np.where(
            np.isfinite(scale), limit, -1.0)
    return close & ~np.eye(n, dtype=bool, like=values)


def _repeated_values(values, which):
    """The repeated values, for a message: ``which`` marks them, or their pairs."""
    which, plain = memory(which), memory(values)
    if which.ndim > plain.ndim:
        which = np.any(which, axis=-1)
    shown = np.broadcast_to(plain, which.shape)[which][:8].tolist()  # (on the host)
    return np.array2string(np.array(shown), precision=17, separator=", ")


def require_first_order(name, a, values, pairs):
    """Refuse a second derivative at repeated values (``a`` depending on what an enclosing
    differentiation differentiates): the first-order rules drop the repeated pairs'
    couplings, and the derivative of what they compute misses them (at A = I the Hessian of
    Σ w³ would lose its off-diagonal terms). A constant matrix (made in the function from
    arrays outside argnums, which nested differentiation traces too) has none to miss."""
    if carries_derivative(a) and np.any(pairs):
        raise UnsupportedOperationError(
            f"{name}: a second derivative at repeated values {_repeated_values(values, pairs)} "
            "(equal within rounding): mutad differentiates the decomposition there once, not "
            "twice (the split of the repeated values, which the second derivative needs, has "
            "no derivative). Take second derivatives where the values are distinct, or write "
            "the quantity as a matrix function (np.trace(a @ a @ a) for Σ w³).")


def require_shared_cotangent(name, values, pairs, cotangent, what="eigenvalues"):
    """Refuse a loss that tells repeated values apart (their cotangents differ beyond
    ``INVARIANCE_TOLERANCE`` of the largest): only symmetric functions of them have a
    derivative."""
    if not np.any(pairs):
        return
    c = memory(cotangent)
    scale = np.max(np.abs(c), initial=0.0)
    if np.any(pairs & (np.abs(c[..., None, :] - c[..., :, None])
                       > INVARIANCE_TOLERANCE * scale)):
        raise UnsupportedOperationError(
            f"{name} of a matrix with repeated {what} {_repeated_values(values, pairs)} (equal "
            f"within rounding): the loss tells them apart, but a repeated value splits under a "
            "perturbation into values none of which has a derivative; only functions "
            f"symmetric in them do (np.sum(f(w)), the largest {what[:-1]} of a simple one). "
            f"Differentiate a symmetric function of the {what}, or move them apart.")


def require_untouched(name, values, repeated, parts, what="eigenvalues"):
    """Refuse a loss that reads, through a decomposition with vectors, its ``repeated``
    values (a mask of them: repeated, or zero singular values) or their vectors: ``parts``
    (per value: |w̄_i|, the norms of V̄'s columns) must vanish there, up to
    ``INVARIANCE_TOLERANCE`` of their largest."""
    if not np.any(repeated):
        return
    touched = sum(np.abs(memory(part)) for part in parts)
    if np.any(repeated & (touched > INVARIANCE_TOLERANCE * np.max(touched, initial=0.0))):
        zeros = ", or zero" if what == "singular values" else ""
        raise UnsupportedOperationError(
            f"{name} of a matrix with repeated {what} {_repeated_values(values, repeated)} "
            f"(equal within rounding{zeros}): the loss reads "
            "them or their vectors, which NumPy picks as an arbitrary basis of their space, "
            "and whether it has a derivative there depends on how it couples their split "
            "under a perturbation to that basis, which mutad cannot see (V diag(f(w)) Vᵀ has "
            "one, V[:, 0] none). Differentiate the values alone (np.linalg.eigvalsh, "
            "svd(compute_uv=False): their symmetric functions have a derivative), a matrix "
            "function by scipy.linalg's (expm, logm, sqrtm, fractional_matrix_power), or "
            "vectors of distinct values only.")


def require_rigid_tangent(name, values, pairs, middle, what="eigenvalues"):
    """Refuse, in forward mode, a tangent that splits repeated values: ``middle``'s block of
    each repeated value (eigh: Vᴴ dA V) must be a multiple of the identity up to
    ``INVARIANCE_TOLERANCE`` of its largest entry; the values then move together."""
    if not np.any(pairs):
        return
    m = memory(middle)
    diagonal = np.diagonal(m, 0, -2, -1)
    splits = (np.abs(m) + np.abs(diagonal[..., None, :] - diagonal[..., :, None])
              > INVARIANCE_TOLERANCE * np.max(np.abs(m), initial=0.0))
    if np.any(pairs & splits):
        raise UnsupportedOperationError(
            f"{name} at repeated {what} {_repeated_values(values, pairs)} (equal within "
            "rounding), along a tangent that splits them: each then moves by an eigenvalue of "
            "the tangent's block, so neither they nor their vectors have a derivative along "
            "it. Forward mode differentiates tangents that move them together; reverse mode "
            "(mutad.gradient) differentiates symmetric functions of them.")


def eigh_cotangent(name, w, v, dw, dv, pairs):
    """Ā for A = V diag(w) Vᵀ (Giles 2008, §3.1): V (diag(w̄) + F ∘ Vᵀ V̄) Vᵀ, symmetrised.
    Complex Hermitian A = V diag(w) Vᴴ: the same with ᴴ for ᵀ, its Hermitian part (see
    ``numpy_eigh``). Repeated eigenvalues (``pairs``): a loss of the eigenvalues alone (V̄
    None: no gradient reached the vectors) must not tell them apart; one that reads the
    vectors must not read them at all; their couplings are dropped."""
    if dv is not None:
        require_untouched(name, w, np.any(pairs, axis=-1), [
            dw, np.sqrt(squared_column_norms(dv))])
    else:
        require_shared_cotangent(name, w, pairs, dw)
    middle = np.zeros(w.shape + w.shape[-1:], np.result_type(w, dw), like=memory(w))
    if dv is not None and np.any(dv):
        vh_dv = adjoint(v) @ dv
        if np.iscomplexobj(vh_dv):
            require_phase_free(name, np.imag(np.diagonal(vh_dv, 0, -2, -1)),
                               squared_column_norms(dv))
        middle = eigh_couplings(w, pairs) * vh_dv
    middle = middle + dw[..., None, :] * np.eye(w.shape[-1], like=memory(w))
    return hermitian_part(v @ middle @ adjoint(v))


def eigh_tangent(name, w, v, da, pairs):
    """V's coordinates of the symmetric (Hermitian) part of ``da``, Vᴴ dA V, and their
    diagonal dw, real; a tangent that splits repeated eigenvalues (``pairs``) is refused."""
    middle = adjoint(v) @ hermitian_part(da) @ v
    require_rigid_tangent(name, w, pairs, middle)
    return middle, real_diagonal(middle)


def singular_spectrum(name, a, s):
    """``(pairs, zero)`` of the singular values ``s`` of ``a``: the pairs repeated within
    rounding (``repeated_pairs``) and the values zero within rounding (at most REPEATED_ULPS ·
    max(m, n) · ε · max(s), the bound of ``REPEATED_ULPS``), decided now; a second derivative
    where either is refused."""
    plain = memory(s)
    size = max(np.shape(a)[-2:])
    pairs = repeated_pairs(plain, size)
    limit = REPEATED_ULPS * size * np.finfo(plain.dtype).eps
    largest = np.max(plain, axis=-1, initial=0.0)[..., None]
    zero = plain <= np.where(np.isfinite(largest), limit * largest, -1.0)  # (as for pairs)
    require_first_order(name, a, s, pairs | (zero[..., :, None] & zero[..., None, :]))
    return pairs, zero


def svd_couplings(s, pairs, zero):
    """E⁻_ij = 1/(s_j - s_i) and E⁺_ij = 1/(s_j + s_i) off the diagonal: Townsend's (2016)
    F_ij = 1/(s_j² - s_i²) split, F (J s_j + s_i K) = ½ (J + K) E⁻ + ½ (J - K) E⁺, so that
    repeated values (``pairs``: the joint rotation of their u's and v's, free, with E⁻ = 0)
    lose only the term their invariance makes zero; E⁺ = 0 on pairs of zero values. The
    inverses of ``s``, 0 at zero values, beside."""
    diagonal = np.eye(s.shape[-1], dtype=bool, like=memory(s))
    both_zero = zero[..., :, None] & zero[..., None, :]

    def inverse(x, skip):
        return np.where(skip, 0.0, 1.0 / np.where(skip, 1.0, x))

    return (inverse(s[..., None, :] - s[..., :, None], diagonal | pairs),
            inverse(s[..., None, :] + s[..., :, None], diagonal | both_zero),
            inverse(s, zero))


def require_rank_kept(name, s, zero, pieces, scale, refuse=True):
    """Refuse, at zero singular values, a tangent that moves them off zero: ``pieces`` (the
    tangent's parts there: their block of Uᴴ dA V, and dA's parts outside U's and V's column
    spaces along their vectors) must vanish up to ``INVARIANCE_TOLERANCE`` of ``scale``.
    σ = |·| has no derivative at 0, and the vectors of a zero value are any unit vectors of
    the null spaces. Without ``refuse``, whether it moves them (True) instead."""
    if not np.any(zero):
        return False
    moved = any(np.any(np.abs(memory(piece)) > INVARIANCE_TOLERANCE * scale) for piece in pieces)
    if moved and refuse:
        raise UnsupportedOperationError(
            f"{name} of a rank-deficient matrix (singular values {_repeated_values(s, zero)} "
            "zero within rounding), along a tangent that moves them off zero: σ = |·| has a "
            "kink at 0, so neither they nor their vectors have a derivative along it. Forward "
            "mode differentiates tangents that keep the rank; reverse mode differentiates "
            "losses of the nonzero singular values and their vectors.")
    return moved


def svd_cotangent(name, u, s, vt, du, ds, dvt, spectrum, vectors=True):
    """The pullback of the thin SVD ``a = u diag(s) vt`` (Townsend 2016, "Differentiating the
    singular value decomposition", eq. 30). Repeated and zero singular values (``spectrum``,
    ``singular_spectrum``'s): a loss of the values alone (not ``vectors``) must not tell
    repeated ones apart nor read zero ones (σ = |·| has a kink at 0); through the
    decomposition with vectors it must read neither them nor their vectors, as eigh's
    (``require_untouched``). Their couplings are then dropped (``svd_couplings``).

    Complex A = U S Vᴴ (``vt`` = Vᴴ): ᴴ for ᵀ, and one more term. With dP = Uᴴ dA V,
    Ω_U = Uᴴ dU and Ω_V = Vᴴ dV skew-Hermitian, Im dP_ii = s_i Im(Ω_U - Ω_V)_ii: only the
    difference of the phases of u_i and v_i is determined, the pair's common phase being free
    (see ``require_phase_free``). The rules split it evenly, dU gaining
    U diag(i Im dP_ii / 2s_i) and dV its opposite, so P̄ gains i diag((Im J_ii - Im K_ii) / 2s_i),
    J = Uᴴ Ū, K = Vᴴ V̄; for a phase-free loss Im J_ii = -Im K_ii."""
    pairs, zero = spectrum
    v = adjoint(vt)
    m, n, k = u.shape[-2], v.shape[-2], s.shape[-1]
    dv = adjoint(dvt) if dvt is not None else None
    if vectors:
        require_untouched(name, s, np.any(pairs, axis=-1) | zero, [ds] + [
            np.sqrt(squared_column_norms(x)) for x in (du, dv) if x is not None],
            "singular values")
    else:
        require_shared_cotangent(name, s, pairs, ds, "singular values")
        require_untouched(name, s, zero, [ds], "singular values")
    a_bar = u @ (ds[..., :, None] * vt)
    if du is None and dvt is None:
        return a_bar
    j, kk = (adjoint(x) @ d if d is not None else np.zeros_like(a_bar, shape=s.shape + (k,))
             for x, d in ((u, du), (v, dv)))
    j_skew, k_skew = j - adjoint(j), kk - adjoint(kk)
    minus, plus, inverse = svd_couplings(s, pairs, zero)
    middle = 0.5 * ((j_skew + k_skew) * minus + (j_skew - k_skew) * plus)
    if np.iscomplexobj(u) and np.iscomplexobj(v):
        phase_j, phase_k = (np.imag(np.diagonal(x, 0, -2, -1)) for x in (j, kk))
        require_phase_free(name, phase_j + phase_k, sum(
            squared_column_norms(x) for x in (du, dv) if x is not None))
        middle = middle + (0.5j * (phase_j - phase_k) * inverse)[..., None, :] * np.eye(
            k, like=memory(s))
    a_bar = a_bar + u @ middle @ vt
    if du is not None and m > k:  # the part of du outside u's column space
        a_bar = a_bar + (du - u @ j) @ (vt * inverse[..., :, None])
    if dv is not None and n > k:
        a_bar = a_bar + (u * inverse[..., None, :]) @ adjoint(dv - v @ kk)
    return a_bar


def svd_tangent(name, u, s, vt, da, spectrum, off_zero="refuse"):
    """(dU, ds, dVᵀ) of the thin SVD A = U diag(s) Vᵀ along dA (Townsend 2016; see
    ``numpy_svd``); a tangent that splits repeated values is refused, and the repeated values'
    vectors take no joint rotation (the reverse rule's dropped term). A tangent that moves zero
    values off zero is refused, or with ``off_zero="nan"``, for a caller of the values alone,
    gives them, which have no derivative along it, a NaN tangent (their vectors have none
    either: their tangents are not to be read then)."""
    pairs, zero = spectrum
    v = adjoint(vt)
    m, n, k = u.shape[-2], v.shape[-2], s.shape[-1]
    dp = adjoint(u) @ da @ v                                     # Uᵀ dA V
    ds = real_diagonal(dp)
    require_rigid_tangent(name, s, pairs, hermitian_part(dp), "singular values")
    outside_u = da @ v - u @ dp if m > k else None
    outside_v = adjoint(da) @ u - v @ adjoint(dp) if n > k else None
    if np.any(zero):
        block = zero[..., :, None] & zero[..., None, :]
        pieces = [np.where(block, dp, 0.0)] + [
            np.where(zero[..., None, :], x, 0.0) for x in (outside_u, outside_v)
            if x is not None]
        scale = max(np.max(np.abs(memory(x)), initial=0.0)
                    for x in (dp, outside_u, outside_v) if x is not None)
        moved = require_rank_kept(name, s, zero, pieces, scale, off_zero == "refuse")
    else:
        moved = False
    # Townsend 2016: dU = U (F ∘ (dP S + S dPᵀ)) + (I - U Uᵀ) dA V S⁻¹,
    #                dV = V (F ∘ (S dP + dPᵀ S)) + (I - V Vᵀ) dAᵀ U S⁻¹  (ᴴ for complex A),
    # F's terms split as ``svd_couplings``'s.
    minus, plus, inverse = svd_couplings(s, pairs, zero)
    symmetric, skew = (dp + adjoint(dp)) * minus, (dp - adjoint(dp)) * plus
    du = u @ (0.5 * (symmetric + skew))
    dv = v @ (0.5 * (symmetric - skew))
    if np.iscomplexobj(dp):  # the phases, split evenly between u_i and v_i (see svd_cotangent)
        phase = 0.5j * np.imag(np.diagonal(dp, 0, -2, -1)) * inverse
        du = du + u * phase[..., None, :]
        dv = dv - v * phase[..., None, :]
    if m > k:
        du = du + outside_u * inverse[..., None, :]
    if n > k:
        dv = dv + outside_v * inverse[..., None, :]
    if moved:
        ds = np.where(zero, np.nan, ds)
    return du, ds, adjoint(dv)


def eig_cotangent(name, w, v, dw, dv, pairs):
    """Ā for A V = V diag(w), V's columns of unit 2-norm (see eig):
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ. Repeated eigenvalues
    (``pairs``, of a matrix that is not defective: ``require_diagonalizable``): as eigh's."""
    if dv is None:  # no gradient reached the eigenvectors: the eigenvalues alone, as eigvals
        require_shared_cotangent(name, w, pairs, dw)
    else:
        require_untouched(name, w, np.any(pairs, axis=-1), [
            dw, np.sqrt(squared_column_norms(dv))])
    vh = adjoint(v)
    middle = dw[..., None, :] * np.eye(w.shape[-1], like=memory(w))
    if dv is not None and np.any(dv):
        vh_dv = vh @ dv
        diagonal = np.diagonal(vh_dv, 0, -2, -1)
        if np.iscomplexobj(vh_dv):
            require_phase_free(name, np.imag(diagonal), squared_column_norms(dv))
            diagonal = np.real(diagonal)
        normalised = vh_dv - (vh @ v) * diagonal[..., None, :]
        middle = middle + conjugate(eigh_couplings(w, pairs)) * normalised
    return np.linalg.solve(vh, middle @ vh)


def require_diagonalizable(name, w, v, pairs):
    """Refuse a repeated eigenvalue of a defective matrix (its eigenvectors, nearly parallel,
    do not span its space: V is singular up to rounding): the eigenvalues there move as
    roots of the perturbation (√t), and have no derivative, nor does their sum's formula
    V⁻ᴴ diag(w̄) Vᴴ survive V's rounding. A defective eigenvalue's computed eigenvectors are
    √ε apart (``general_repeated_pairs``), so cond(V) ≥ 0.1 / √ε in V's precision calls it
    defective: a diagonalizable matrix's V (the identity of 2·I in float32) stays far below,
    as ε · 1e8, the bound of float64 alone, would not (it exceeds 1 in float32)."""
    if not np.any(pairs):
        return
    s = np.linalg.svd(memory(v), compute_uv=False)
    if np.any(s[..., -1] <= s[..., 0] * 10 * np.sqrt(np.finfo(s.dtype).eps)):
        raise UnsupportedOperationError(
            f"{name} of a defective matrix (repeated eigenvalues "
            f"{_repeated_values(w, pairs)} without a full set of eigenvectors): its eigenvalues "
            "move as roots of a perturbation there, and have no derivative. Differentiate "
            "np.trace(a) for their sum, or a matrix whose eigenvalues are distinct.")


def eig_tangent(name, w, v, da, pairs):
    """dw = diag(M) and dV = V (F ∘ M) - V diag(Re diag(Vᴴ V (F ∘ M))), M = V⁻¹ dA V; a
    tangent that splits repeated eigenvalues (``pairs``) is refused."""
    middle = np.linalg.solve(v, da @ v)
    require_rigid_tangent(name, w, pairs, middle)
    dv = v @ (eigh_couplings(w, pairs) * middle)
    dv = dv - v * np.real(np.sum(conjugate(v) * dv, axis=-2, keepdims=True))
    return np.diagonal(middle, 0, -2, -1).copy(), dv


# ----------------------------------------------------------------------------------------------
# The pullback scaffold: the pairs computed now, read by back


def spectrum_pairs(name, a, w, eigenvectors=None):
    """The repeated pairs of ``a``'s eigenvalues ``w``, decided now (back may see w restored
    up to rounding), and a second derivative there refused; for a general matrix (eig's,
    with its ``eigenvectors``: ``general_repeated_pairs``) a defective one too."""
    if eigenvectors is None:
        pairs = repeated_pairs(memory(w))
    else:
        pairs = general_repeated_pairs(memory(a), memory(w), memory(eigenvectors))
    require_first_order(name, a, w, pairs)
    if eigenvectors is not None:
        require_diagonalizable(name, w, eigenvectors, pairs)
    return pairs


def general_repeated_pairs(a, w, v):
    """``repeated_pairs`` of a general matrix's eigenvalues: an eigenvalue of a nonsymmetric
    matrix is computed only to ε ‖A‖ κ_i, κ_i = ‖y_i‖ ‖x_i‖ / |y_iᴴ x_i| its condition number
    (x_i = V's unit column, y_iᴴ = V⁻¹'s row), so the bound is REPEATED_ULPS · n · ε · ‖A‖_F ·
    max(κ_i, κ_j). A defective eigenvalue comes out split by √ε (a similar Jordan block's
    1 ± 1e-8, with κ near 1e8): the bound joins it, which ``require_diagonalizable`` then
    refuses; and ‖A‖, not max|w|, so that a nilpotent matrix's zeros count."""
    n = w.shape[-1]
    with np.errstate(all="ignore"):  # (a decision: its events are not f's)
        try:
            kappa = np.linalg.norm(np.linalg.inv(v), axis=-1)
        except np.linalg.LinAlgError:  # V singular: every eigenvalue ill-determined
            kappa = np.full(w.shape, np.inf)
        # ‖A‖_F scaled by the largest |a_ij|, whose squares would overflow past 1e154
        magnitude = np.abs(a)
        largest = np.max(magnitude, axis=(-2, -1), keepdims=True)
        scale = largest * np.sqrt(np.sum((magnitude / np.where(largest > 0, largest, 1.0)) ** 2,
                                         axis=(-2, -1), keepdims=True))
        limit = (REPEATED_ULPS * n * np.finfo(w.dtype).eps * scale
                 * np.maximum(kappa[..., :, None], kappa[..., None, :]))
        close = np.abs(w[..., None, :] - w[..., :, None]) <= limit
    return close & ~np.eye(n, dtype=bool, like=w)


def eigenpairs_pullback(name, cotangent, w, v, pairs):
    """The pullback of the eigenpairs ``(w, v)``, repeated where ``pairs`` says, by
    ``cotangent(name, w, v, w̄, V̄, pairs)`` (eigh's or eig's). V̄ is None where no gradient
    reached the eigenvectors (``unreached_as_none``): a loss of the eigenvalues alone, which
    may read repeated ones symmetrically, as the eigenvalues' own rules do."""

    def back(dys):
        dw, dv = dys
        if dw is None:
            dw = np.zeros(w.shape, np.result_type(w.real), like=memory(w))
        return (cotangent(name, w, v, dw, dv, pairs),)

    return unreached_as_none(back)


def eigenvalues_pullback(name, a, w, v):
    """The pullback of a symmetric matrix's eigenvalues alone, through its eigenvectors ``v``."""
    pairs = spectrum_pairs(name, a, w)
    return lambda dw: (eigh_cotangent(name, w, v, dw, None, pairs),)


def singular_values_pullback(name, a, u, s, vt):
    """The pullback of ``a``'s singular values alone, through the thin SVD's factors."""
    spectrum = singular_spectrum(name, a, s)
    return lambda ds: (svd_cotangent(name, u, s, vt, None, ds, None, spectrum, False),)


def unreached_as_none(back):
    """``back``, a pullback of several outputs, marked to receive None for an output no
    gradient reached, not zeros (``operations.function_pullback``): a loss that does not
    read a decomposition's vectors is one of its values alone, which may read repeated
    values symmetrically; one that reads them, even with a zero cotangent, may not."""
    back.unreached_as_none = True
    return back


def svd_factors_cotangent(name, u, s, vt, dys, spectrum):
    """Ā from the cotangents ``dys`` of the thin SVD's factors (U, s, Vᵀ), None for those no
    gradient reached (``unreached_as_none``): without U's and Vᵀ's, a loss of the singular
    values alone. Zero cotangents' terms are skipped, which would ask the checks of repeated
    and zero singular values about vectors the loss does not read."""
    vectors = dys[0] is not None or dys[2] is not None
    du, ds, dvt = (d if d is not None and d.any() else None for d in dys)
    return svd_cotangent(name, u, s, vt, du, np.zeros_like(s) if ds is None else ds, dvt,
                         spectrum, vectors)


def eigenpairs_tangent(name, a, w, v, da):
    """(dw, dV) of a symmetric matrix's eigenpairs along ``da``: dw = diag(Vᵀ dA V),
    dV = V (F ∘ Vᵀ dA V) (Giles 2008, §3.1; ᴴ for complex A)."""
    pairs = spectrum_pairs(name, a, w)
    middle, dw = eigh_tangent(name, w, v, da, pairs)
    return dw, v @ (eigh_couplings(w, pairs) * middle)


def eigenvalues_tangent(name, a, w, v, da):
    """dw = diag(Vᵀ dA V) of a symmetric matrix's eigenvalues along ``da``."""
    return eigh_tangent(name, w, v, da, spectrum_pairs(name, a, w))[1]


def singular_values_tangent(name, a, u, s, vt, da, off_zero="refuse"):
    """dσ_i = u_iᵀ dA v_i (Giles 2008, §3.2; Re(u_iᴴ dA v_i) for complex A), ``vt`` being Vᴴ,
    checked as the factors' tangent is (repeated values moved together, zero ones kept, or
    with ``off_zero="nan"`` NaN where they are not: ``svd_tangent``)."""
    return svd_tangent(name, u, s, vt, da, singular_spectrum(name, a, s), off_zero)[1]


def require_thin_svd(name, a, full_matrices, compute_uv):
    m, n = np.shape(a)[-2:]
    if compute_uv and full_matrices and m != n:
        raise UnsupportedOperationError(
            f"{name}(a, full_matrices=True) of a non-square matrix: the extra singular "
            "vectors are not determined by a, so they have no gradient. Pass "
            "full_matrices=False.")


# ----------------------------------------------------------------------------------------------
# np.linalg: the eigendecomposition of symmetric (complex: Hermitian) matrices, and the SVD


@defrule(np.linalg.eigh, leading=1)
def numpy_eigh(a, UPLO="L"):
    """A = V diag(w) Vᵀ, symmetric A, with the symmetric gradient (Giles 2008, §3.1).

    Complex Hermitian A = V diag(w) Vᴴ, w real: the gradient is the Hermitian one (the
    derivative along Hermitian perturbations; a matrix that is not Hermitian is refused). With
    M = Vᴴ dA V: dw = diag(M), dV = V (F ∘ M) + V diag(iφ), F_ij = 1/(w_j - w_i). The real φ
    is the eigenvectors' phase freedom (V → V diag(e^{iφ})): NumPy's phases follow LAPACK's
    convention, which mutad does not differentiate, and the rules take φ = 0 (forward mode's
    tangent of V has Im diag(Vᴴ dV) = 0). The gradient of a loss invariant under the phases
    is therefore right; one that reads them has none, and reverse mode refuses it
    (``require_phase_free``), as PyTorch does. The pullback is
    Ā = herm(V (diag(w̄) + F ∘ Vᴴ V̄) Vᴴ). Repeated eigenvalues: see ``require_untouched``."""
    result = np.linalg.eigh(a, UPLO)
    read = one_triangle(a, UPLO == "L", "np.linalg.eigh")  # (a real matrix not symmetric:
    s = a if read is None else read.matrix  # the derivative of its triangle's)
    back = eigenpairs_pullback("np.linalg.eigh", eigh_cotangent, *result,
                               spectrum_pairs("np.linalg.eigh", s, result[0]))
    return result, back if read is None else read.pulled(back)


@defjvp(np.linalg.eigh)
def numpy_eigh_jvp(tangents, a, UPLO="L"):
    result = np.linalg.eigh(a, UPLO)
    read = one_triangle(a, UPLO == "L", "np.linalg.eigh")
    s, da = (a, tangents[0]) if read is None else (read.matrix, read.tangent(tangents[0]))
    return result, type(result)(*eigenpairs_tangent("np.linalg.eigh", s, *result, da))


@defrule(np.linalg.eigvalsh, leading=1)
def numpy_eigvalsh(a, UPLO="L"):
    y = np.linalg.eigvalsh(a, UPLO)
    read = one_triangle(a, UPLO == "L", "np.linalg.eigvalsh")
    s = a if read is None else read.matrix
    w, v = np.linalg.eigh(a, UPLO)  # (LAPACK's values without vectors may differ in last bits)
    back = eigenvalues_pullback("np.linalg.eigvalsh", s, w, v)
    return y, back if read is None else read.pulled(back)


@defjvp(np.linalg.eigvalsh)
def numpy_eigvalsh_jvp(tangents, a, UPLO="L"):
    y = np.linalg.eigvalsh(a, UPLO)
    read = one_triangle(a, UPLO == "L", "np.linalg.eigvalsh")
    s, da = (a, tangents[0]) if read is None else (read.matrix, read.tangent(tangents[0]))
    return y, eigenvalues_tangent("np.linalg.eigvalsh", s, *np.linalg.eigh(a, UPLO), da)


def _thin_factors(a, s, hermitian):
    """The thin SVD's factors whose singular values ``s`` NumPy computed alone: where ``a``
    holds an infinity or a NaN, NaN vectors with NumPy's values (LAPACK's SVD with vectors may
    never return on such a matrix, where the singular values alone do; the derivative there is
    not finite)."""
    finite = np.isfinite(a).all(axis=(-2, -1))
    if finite.all():
        return np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    u, s_finite, vt = np.linalg.svd(np.where(finite[..., None, None], a, 0),
                                    full_matrices=False, hermitian=hermitian)
    return (np.where(finite[..., None, None], u, np.nan),
            np.where(finite[..., None], s_finite, s),
            np.where(finite[..., None, None], vt, np.nan))


@defrule(np.linalg.svd, leading=1)
def numpy_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """NumPy's factors (its singular values alone, without vectors, are another LAPACK
    computation, whose bits may differ), differentiated through the thin SVD's factors that
    back reads (Giles 2008). ``hermitian=True`` reads one triangle, as ``eigh`` does: a
    matrix that is not symmetric (Hermitian) is refused, and the gradient is the symmetric one.

    For complex matrices, the factors are both the output and what back reads: the phases of
    the singular vectors are then one choice, which a phase-free loss's cotangent cancels
    (with two calls, an outer differentiation would see each call's phases cancelled only by
    the other's; see require_phase_free)."""
    require_thin_svd("np.linalg.svd", a, full_matrices, compute_uv)
    if hermitian:
        require_symmetric(a, "np.linalg.svd(..., hermitian=True)")
    result = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                           hermitian=hermitian)
    # the thin factors: those returned (a non-square full SVD is refused above)
    u, s, vt = result if compute_uv else _thin_factors(a, result, hermitian)
    spectrum = singular_spectrum("np.linalg.svd", a, s)

    def back(dys):
        g = (svd_factors_cotangent("np.linalg.svd", u, s, vt, dys, spectrum) if compute_uv
             else svd_cotangent("np.linalg.svd", u, s, vt, None, dys, None, spectrum, False))
        return (hermitian_part(g) if hermitian else g,)

    return result, unreached_as_none(back)


@defjvp(np.linalg.svd)
def numpy_svd_jvp(tangents, a, full_matrices=True, compute_uv=True, hermitian=False):
    require_thin_svd("np.linalg.svd", a, full_matrices, compute_uv)
    da = tangents[0]
    if hermitian:  # along the Hermitian part, as the reverse rule's gradient
        require_symmetric(a, "np.linalg.svd(..., hermitian=True)")
        da = hermitian_part(da)
    result = np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    # The tangent is of the factors NumPy returned, so the singular vectors' signs are theirs.
    u, s, vt = result if compute_uv else _thin_factors(a, result, hermitian)
    spectrum = singular_spectrum("np.linalg.svd", a, s)
    tangent = svd_tangent("np.linalg.svd", u, s, vt, da, spectrum)
    return result, (type(result)(*tangent) if compute_uv else tangent[1])


# ----------------------------------------------------------------------------------------------
# np.linalg: eigendecomposition of general matrices


@defrule(np.linalg.eig, leading=1)
def numpy_eig(a):
    """A V = V diag(w) for a general square A, real or complex; NumPy returns complex w and V
    for a real A whose eigenvalues are not all real, and the gradient of a real A is then the
    real part of the complex one (the core takes it). Repeated eigenvalues are treated as eigh's
    (a loss must not tell them apart nor read the basis of their eigenspace, and their couplings
    are dropped), those of a defective matrix refused.

    With M = V⁻¹ dA V (rows of V⁻¹ the left eigenvectors): dw = diag(M), holomorphic in A, and
    dV = V (F ∘ M) + V diag(c), F_ij = 1/(w_j - w_i) off the diagonal (Giles 2008, §3.1).
    NumPy scales each eigenvector to unit 2-norm, so Re(v_iᴴ dv_i) = 0 fixes Re c_i; Im c_i is
    the eigenvector's phase freedom (v_i → v_i e^{iφ}), which the rules set to 0 (a real
    eigenvector's sign is only a discrete choice: there the rules are exact). As for eigh,
    the gradient of a loss invariant under the phases (|V|², V diag(f(w)) V⁻¹, a real A's
    real eigenvectors) is right, and reverse mode refuses a loss that reads them
    (``require_phase_free``). The pullback, the adjoint for Re<a, b>:
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ."""
    result = np.linalg.eig(a)
    return result, eigenpairs_pullback("np.linalg.eig", eig_cotangent, *result,
                                       spectrum_pairs("np.linalg.eig", a, *result))


@defjvp(np.linalg.eig)
def numpy_eig_jvp(tangents, a):
    result = np.linalg.eig(a)
    w, v = result
    pairs = spectrum_pairs("np.linalg.eig", a, w, v)
    return result, type(result)(*eig_tangent("np.linalg.eig", w, v, tangents[0], pairs))


def _eigenvectors_in_order(a, w):
    """The eigenvectors of ``a`` for its eigenvalues ``w`` as np.linalg.eigvals orders them.
    np.linalg.eig computes the same eigenvalues in the same order (LAPACK's geev either way);
    should they ever differ, each is matched with the nearest. The eigenvalues' rules read
    them in expressions no column's phase changes (``phase_free``)."""
    w_eig, v = np.linalg.eig(a)
    if not np.all(w_eig == w):
        order = np.argmin(np.abs(w[..., :, None] - w_eig[..., None, :]), axis=-1)
        v = np.take_along_axis(v, order[..., None, :], axis=-1)
    return phase_free(v)


@with_rule
def phase_free(v):
    """The eigenvectors ``v``, read by a rule's own expression that no column's phase changes
    (the eigenvalues' V⁻¹ Ȧ V and V⁻ᴴ diag(w̄) Vᴴ). Differentiated again (a Hessian), the
    cotangent such an expression gives V has no part along the phases but rounding, which
    ``require_phase_free`` would read as a loss of the phases where the cotangent itself
    cancels to rounding (Σ Re(w)² of a 2 × 2 matrix's conjugate pair, whose tangent is
    Re tr(Ȧ)): the pullback leaves that part out, V̄ - V diag(i Im diag(Vᴴ V̄) / |vⱼ|²)."""
    return v


@phase_free.rule
def _phase_free_rule(v):
    def back(dv):
        if not np.iscomplexobj(dv):
            return (dv,)
        along = np.imag(np.sum(conjugate(v) * dv, axis=-2, keepdims=True))
        return (dv - v * (1j * along / np.sum(np.real(conjugate(v) * v), axis=-2, keepdims=True)),)

    return np.copy(v), back


@phase_free.jvp_rule
def _phase_free_jvp(tangents, v):
    return np.copy(v), tangents[0]


@defrule(np.linalg.eigvals, leading=1)
def numpy_eigvals(a):
    """The eigenvalues of eig (see there): dw = diag(V⁻¹ dA V), Ā = V⁻ᴴ diag(w̄) Vᴴ."""
    w = np.linalg.eigvals(a)
    v = _eigenvectors_in_order(a, w)
    pairs = spectrum_pairs("np.linalg.eigvals", a, w, v)

    def back(dw):
        require_shared_cotangent("np.linalg.eigvals", w, pairs, dw)
        vh = adjoint(v)
        return (np.linalg.solve(vh, dw[..., :, None] * vh),)

    return w, back


@defjvp(np.linalg.eigvals)
def numpy_eigvals_jvp(tangents, a):
    w = np.linalg.eigvals(a)
    v = _eigenvectors_in_order(a, w)
    pairs = spectrum_pairs("np.linalg.eigvals", a, w, v)
    middle = np.linalg.solve(v, tangents[0] @ v)
    require_rigid_tangent("np.linalg.eigvals", w, pairs, middle)
    return w, np.diagonal(middle, 0, -2, -1).copy()


# ----------------------------------------------------------------------------------------------
# scipy.linalg's eigh, eigvalsh, svd and svdvals. Their values are SciPy's own calls (its LAPACK
# drivers, its signs of eigenvectors and singular vectors), their derivatives np.linalg's rules'
# formulas applied to those factors.


def _standard_eigenproblem(name, b, type):
    if b is not None or type != 1:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(a, b, type={type}): mutad differentiates the standard "
            "symmetric eigenproblem and the generalized one of type 1 (A v = λ B v).")


def _subset(name, w, v, values, vectors, subset_by_index, subset_by_value):
    """SciPy's eigenpairs of a subset (``subset_by_index=``, ``subset_by_value=``: ``values``,
    and ``vectors`` unless None) as a selection from all of them, ``(w, v)``, which their
    derivatives need (an eigenvector's derivative couples it with every other one): the
    indices of the selected ones in ``w``, and the signs that make ``v``'s columns SciPy's
    ``vectors`` (LAPACK picks each eigenvector's sign in each call), None without vectors.
    None without a subset."""
    if subset_by_index is None and subset_by_value is None:
        return None
    full = f"scipy.linalg.{name}(..., subset_by_index=/subset_by_value=)"
    plain = memory(w)
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        index = np.arange(lo, hi + 1)
    else:  # SciPy's half-open interval (lo, hi]
        lo, hi = subset_by_value
        inside = np.reshape((plain > lo) & (plain <= hi), (-1, plain.shape[-1]))
        if np.any(inside != inside[:1]):
            raise UnsupportedOperationError(
                f"{full} of a stack of matrices by value, selecting eigenvalues of other "
                "ranks in each: select by index, or compute them all and select.")
        index = np.flatnonzero(inside[0])
    if index.size != np.shape(values)[-1]:
        raise UnsupportedOperationError(
            f"{full}: an eigenvalue lies on a bound of subset_by_value={subset_by_value!r} "
            "up to rounding, where the subset, and its derivative, change. Move the bounds "
            "away from the eigenvalues, or select by index.")
    if vectors is None:
        return index, None
    chosen, given = memory(v)[..., index], memory(vectors)
    cosines = (np.sum(chosen * given, axis=-2) / np.linalg.norm(chosen, axis=-2)
               / np.linalg.norm(given, axis=-2))
    if not np.all(np.abs(np.abs(cosines) - 1.0) <= 1e-6):
        raise UnsupportedOperationError(
            f"{full}: a selected eigenvalue is repeated, and its eigenvectors are not "
            "determined; differentiate the eigenvalues alone (eigvals_only=True).")
    return index, np.sign(cosines)[..., None, :]


def _subset_pullback(back, n, selection):
    """``back``, the pullback of all the eigenpairs (or eigenvalues), as that of the subset
    ``selection`` (``_subset``): the others' cotangents zero."""
    if selection is None:
        return back
    index, signs = selection

    def spread(d, signs=None):
        if d is None:
            return None
        whole = np.zeros(np.shape(d)[:-1] + (n,), np.result_type(d, float))
        whole[..., index] = d if signs is None else d * signs
        return whole

    if signs is None:  # the eigenvalues alone
        return lambda dw: back(spread(dw))
    return unreached_as_none(lambda dys: back((spread(dys[0]), spread(dys[1], signs))))


def _subset_tangent(tangent, selection):
    """All the eigenpairs' (or eigenvalues') tangent as that of the subset ``selection``."""
    if selection is None:
        return tangent
    index, signs = selection
    if signs is None:
        return tangent[..., index]
    return tangent[0][..., index], tangent[1][..., index] * signs


def _eigenpairs(name, a, lower, check_finite, driver):
    """All the eigenpairs of the standard problem: of the symmetric matrix the triangle of
    ``a`` SciPy reads stands for, where ``a`` is real and not symmetric (``one_triangle``)."""
    return eigh(a, lower=lower, check_finite=check_finite, driver=driver)


def _generalized(name, a, b, type):
    """Whether ``eigh(a, b)`` is the generalized problem A v = λ B v that mutad follows (b
    given, type 1, real), refusing the other settings; False for the standard one."""
    if b is None:
        _standard_eigenproblem(name, b, type)
        return False
    if type != 1 or np.iscomplexobj(a) or np.iscomplexobj(b):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(a, b, type={type}) of complex or type 2, 3 problems: mutad "
            "differentiates the real generalized problem A v = λ B v (type=1).")
    require_symmetric(a, f"scipy.linalg.{name}")
    require_symmetric(b, f"scipy.linalg.{name}")
    return True


def _generalized_cotangents(w, v, dw, dv, pairs):
    """Ā and B̄ for A V = B V diag(w), Vᵀ B V = I: with G = Vᵀ V̄ and F the couplings
    1 / (w_j - w_i), Ā = V (diag(w̄) + F ∘ G) Vᵀ and B̄ = -V (diag(w̄ w + diag(G) / 2) +
    F ∘ G w_j) Vᵀ (dV = V C, C_ij = vᵢᵀ (dA - w_j dB) v_j / (w_j - w_i), C_jj = -v_jᵀ dB v_j
    / 2), symmetrised as the standard problem's; repeated eigenvalues (``pairs``) as its."""
    n = w.shape[-1]
    name = "scipy.linalg.eigh(a, b)"
    if dv is not None:
        require_untouched(name, w, np.any(pairs, axis=-1), [
            0.0 if dw is None else dw, np.sqrt(squared_column_norms(dv))])
    else:  # the eigenvalues alone
        require_shared_cotangent(name, w, pairs, dw)
    if dv is not None and np.any(dv):
        vt_dv = transpose(v) @ dv
        coupled = eigh_couplings(w, pairs) * vt_dv
        diagonal = real_diagonal(vt_dv)
    else:
        coupled = np.zeros(w.shape + (n,))
        diagonal = np.zeros(w.shape)
    dw = np.zeros(w.shape) if dw is None else dw
    for_a = coupled + dw[..., None, :] * np.eye(n)
    for_b = coupled * w[..., None, :] + (dw * w + 0.5 * diagonal)[..., None, :] * np.eye(n)
    return (symmetric_part(v @ for_a @ transpose(v)),
            -symmetric_part(v @ for_b @ transpose(v)))


def _generalized_tangents(w, v, da, db, pairs):
    """dw and dV of A V = B V diag(w) along dA, dB (their symmetric parts); a tangent that
    splits repeated eigenvalues (``pairs``) is refused."""
    n = w.shape[-1]
    pa = transpose(v) @ symmetric_part(da) @ v if da is not None else np.zeros(w.shape + (n,))
    pb = transpose(v) @ symmetric_part(db) @ v if db is not None else np.zeros(w.shape + (n,))
    middle = pa - pb * w[..., None, :]  # vᵢᵀ (dA - w_j dB) v_j
    require_rigid_tangent("scipy.linalg.eigh(a, b)", w, pairs, middle)
    dw = real_diagonal(middle)
    coupling = (eigh_couplings(w, pairs) * middle
                - 0.5 * real_diagonal(pb)[..., None, :] * np.eye(n))
    return dw, v @ coupling


def _pencil_pairs(a, b, w):
    """The repeated pairs of the generalized eigenvalues ``w`` of (a, b), a second derivative
    there refused (either matrix followed by an enclosing differentiation)."""
    name = "scipy.linalg.eigh(a, b)"
    require_first_order(name, b, w, repeated_pairs(memory(w)))
    return spectrum_pairs(name, a, w)


def _eigenproblem(name, a, b, type, lower, check_finite, driver):
    """All the eigenpairs of ``a`` (of the pencil ``(a, b)``), which the derivatives read, the
    repeated pairs of the pencil's, and whether the problem is the generalized one."""
    generalized = _generalized(name, a, b, type)
    if generalized:
        w, v = eigh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        return w, v, _pencil_pairs(a, b, w), True
    w, v = _eigenpairs(name, a, lower, check_finite, driver)
    return w, v, None, False


def _eigh_solution(name, a, b, lower, eigvals_only, type, check_finite, subset_by_index,
                   subset_by_value, driver):
    """SciPy's ``eigh`` (``eigvals_only=``: ``eigvalsh``'s, which is that call) and what its
    derivatives read: all the eigenpairs, the pencil's repeated pairs (``_eigenproblem``),
    whether the problem is the generalized one, and the subset selected (``_subset``)."""
    w, v, pairs, generalized = _eigenproblem(name, a, b, type, lower, check_finite, driver)
    result = eigh(a, b, lower=lower, eigvals_only=eigvals_only, check_finite=check_finite,
                  subset_by_index=subset_by_index, subset_by_value=subset_by_value,
                  driver=driver)
    values, vectors = (result, None) if eigvals_only else result
    selection = _subset(name, w, v, values, vectors, subset_by_index, subset_by_value)
    return result, w, v, pairs, generalized, selection


def _eigh_pullback(name, a, b, *settings):
    """A = V diag(w) Vᵀ from the one triangle SciPy reads, with the symmetric gradient:
    np.linalg.eigh's rule (Giles 2008, §3.1) on SciPy's own eigenvectors, for a real A that is
    not symmetric that of the matrix its triangle stands for, carried onto the triangle
    (``one_triangle``); the generalized problem A V = B V diag(w) by its own
    (``_generalized_cotangents``, symmetric A and B required); a subset of them by those of
    all (``_subset``). ``settings``: ``_eigh_solution``'s after ``b``."""
    result, w, v, pairs, generalized, selection = _eigh_solution(name, a, b, *settings)
    eigvals_only, full = settings[1], f"scipy.linalg.{name}"
    read = None if generalized else one_triangle(a, settings[0], full)
    if read is not None:
        back = _eigh_pullback_of(full, read.matrix, w, v, eigvals_only)
        return result, _subset_pullback(read.pulled(back), w.shape[-1], selection)
    if generalized:
        if eigvals_only:
            back = lambda dw: _generalized_cotangents(w, v, dw, None, pairs)  # noqa: E731
        else:
            back = unreached_as_none(
                lambda dys: _generalized_cotangents(w, v, dys[0], dys[1], pairs))
    else:
        back = _eigh_pullback_of(full, a, w, v, eigvals_only)
    return result, _subset_pullback(back, w.shape[-1], selection)


def _eigh_pullback_of(full, a, w, v, eigvals_only):
    """The standard problem's pullback of the symmetric ``a``'s eigenpairs ``w, v``."""
    if eigvals_only:
        return eigenvalues_pullback(full, a, w, v)
    return eigenpairs_pullback(full, eigh_cotangent, w, v, spectrum_pairs(full, a, w))


def _eigh_tangent(name, tangents, a, b, *settings):
    """``_eigh_pullback``'s forward counterpart."""
    result, w, v, pairs, generalized, selection = _eigh_solution(name, a, b, *settings)
    eigvals_only, full = settings[1], f"scipy.linalg.{name}"
    if generalized:
        da, db = (tuple(tangents) + (None,) * 2)[:2]
        dw, dv = _generalized_tangents(w, v, da, db, pairs)
        tangent = dw if eigvals_only else (dw, dv)
    else:
        read = one_triangle(a, settings[0], full)
        s, da = (a, tangents[0]) if read is None else (read.matrix, read.tangent(tangents[0]))
        if eigvals_only:
            tangent = eigenvalues_tangent(full, s, w, v, da)
        else:
            tangent = eigenpairs_tangent(full, s, w, v, da)
    return result, _subset_tangent(tangent, selection)


@eigh.rule
def _eigh_rule(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False,
               overwrite_b=False, type=1, check_finite=True, subset_by_index=None,
               subset_by_value=None, driver=None):
    return _eigh_pullback("eigh", a, b, lower, eigvals_only, type, check_finite,
                          subset_by_index, subset_by_value, driver)


@eigh.jvp_rule
def _eigh_jvp(tangents, a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False,
              overwrite_b=False, type=1, check_finite=True, subset_by_index=None,
              subset_by_value=None, driver=None):
    return _eigh_tangent("eigh", tangents, a, b, lower, eigvals_only, type, check_finite,
                         subset_by_index, subset_by_value, driver)


@eigvalsh.rule
def _eigvalsh_rule(a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False, type=1,
                   check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    return _eigh_pullback("eigvalsh", a, b, lower, True, type, check_finite,
                          subset_by_index, subset_by_value, driver)


@eigvalsh.jvp_rule
def _eigvalsh_jvp(tangents, a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False,
                  type=1, check_finite=True, subset_by_index=None, subset_by_value=None,
                  driver=None):
    return _eigh_tangent("eigvalsh", tangents, a, b, lower, True, type, check_finite,
                         subset_by_index, subset_by_value, driver)


def _thin_svd(a, check_finite, lapack_driver):
    return svd(a, full_matrices=False, check_finite=check_finite, lapack_driver=lapack_driver)


@svd.rule
def _svd_rule(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
              lapack_driver="gesdd"):
    """A = U diag(s) Vᵀ (Townsend 2016), np.linalg.svd's rule on SciPy's own factors, repeated
    and zero singular values as there."""
    name = "scipy.linalg.svd"
    require_thin_svd(name, a, full_matrices, compute_uv)
    result = svd(a, full_matrices, compute_uv, False, check_finite, lapack_driver)
    if not compute_uv:
        return result, singular_values_pullback(name, a,
                                                *_thin_svd(a, check_finite, lapack_driver))
    spectrum = singular_spectrum(name, a, result[1])
    return result, unreached_as_none(
        lambda dys: (svd_factors_cotangent(name, *result, dys, spectrum),))


@svd.jvp_rule
def _svd_jvp(tangents, a, full_matrices=True, compute_uv=True, overwrite_a=False,
             check_finite=True, lapack_driver="gesdd"):
    require_thin_svd("scipy.linalg.svd", a, full_matrices, compute_uv)
    result = svd(a, full_matrices, compute_uv, False, check_finite, lapack_driver)
    if not compute_uv:
        return result, singular_values_tangent("scipy.linalg.svd", a, *_thin_svd(
            a, check_finite, lapack_driver), tangents[0])
    return result, svd_tangent("scipy.linalg.svd", *result, tangents[0],
                               singular_spectrum("scipy.linalg.svd", a, result[1]))


@svdvals.rule
def _svdvals_rule(a, overwrite_a=False, check_finite=True):
    """SciPy's singular values, differentiated as ``svd``'s (the thin SVD's factors)."""
    result = svdvals(a, overwrite_a, check_finite)
    return result, singular_values_pullback("scipy.linalg.svdvals", a,
                                            *_thin_svd(a, check_finite, "gesdd"))


@svdvals.jvp_rule
def _svdvals_jvp(tangents, a, overwrite_a=False, check_finite=True):
    return svdvals(a, overwrite_a, check_finite), singular_values_tangent(
        "scipy.linalg.svdvals", a, *_thin_svd(a, check_finite, "gesdd"), tangents[0])


# ----------------------------------------------------------------------------------------------
# eig and eigvals: SciPy's values (complex eigenvalues always, real eigenvectors where every
# eigenvalue is real), np.linalg.eig's formulas (Giles 2008, §3.1) on SciPy's own eigenpairs
# (its phases of complex eigenvectors: LAPACK's geev, as NumPy's), and np.linalg.eigvals's rule
# at NumPy's eigenvalues of the same matrix, matched to SciPy's.

def _standard_eig(name, a, b, homogeneous_eigvals, left=False, vectors=True):
    require_matrix(name, a)
    generalized = b is not None and (vectors or np.iscomplexobj(a) or np.iscomplexobj(b))
    if generalized or homogeneous_eigvals or left and np.iscomplexobj(a):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}: mutad differentiates the standard eigenproblem's eigenvalues "
            "and right eigenvectors (b=None, homogeneous_eigvals=False), the left ones "
            "(left=True) of a real matrix, and the eigenvalues alone of a real generalized "
            "one (eigvals(a, b)). For a generalized one's eigenvectors, with b invertible, "
            "take the eigenpairs of solve(b, a); for a complex matrix's left eigenvectors, the "
            "right ones of a.conj().T.")


def _pencil(a, b, w):
    """``M = b⁻¹ a``, whose eigenvalues are those of the pencil (a, b), and ``order``: the
    index among NumPy's eigenvalues of ``M`` of each of SciPy's ``w`` (QZ's, of the pencil),
    matched where each is unambiguously the nearest (refused elsewhere)."""
    plain_w, m, order = memory(w), None, None
    if np.all(np.isfinite(plain_w)):  # (an infinite one: b singular)
        m = np.linalg.solve(b, a)
        distance = np.abs(plain_w[:, None] - np.linalg.eigvals(memory(m))[None, :])
        order = np.argmin(distance, axis=1)
        tolerance = 1e-8 * (1.0 + np.max(np.abs(plain_w)))
        matched = distance[np.arange(len(order)), order]
        runner_up = np.partition(distance, 1, axis=1)[:, 1] if len(order) > 1 else np.inf
        if len(set(order.tolist())) < len(order) or np.any(matched > tolerance) or np.any(
                runner_up <= tolerance):
            order = None
    if order is None:
        raise UnsupportedOperationError(
            "scipy.linalg.eigvals(a, b): the pencil's eigenvalues are not those of "
            "solve(b, a) to rounding here, distinct (b singular or ill-conditioned: infinite "
            "eigenvalues; or repeated ones), so mutad cannot differentiate them. Differentiate "
            "the eigenvalues of solve(b, a), or eigh(a, b) for a symmetric pencil.")
    return m, order


def _generalized_eigvals_rule(a, b, w):
    m, order = _pencil(a, b, w)
    numpy_w, back = RULES[np.linalg.eigvals].reverse(m)
    inverse = np.argsort(order)

    def pullback(dw):
        # M = b⁻¹ a: ā = b⁻ᵀ M̄, b̄ = -b⁻ᵀ M̄ Mᵀ
        dm, = back(_as_numpy_cotangent(dw[inverse], numpy_w))
        da = np.linalg.solve(transpose(b), np.real(dm))
        return da, -da @ transpose(m)

    return w, pullback


def _generalized_eigvals_jvp(da, db, a, b, w):
    m, order = _pencil(a, b, w)
    change = (0.0 if da is None else da) - (0.0 if db is None else db @ m)
    _, dw = RULES[np.linalg.eigvals].forward((np.linalg.solve(b, change),), m)
    return w, _as_scipy_tangent(dw[order], w)


def _as_scipy_tangent(t, like):
    """A tangent of SciPy's eigenvalues, complex as they are (the real ones too)."""
    return t + 0j if np.iscomplexobj(like) and not np.iscomplexobj(t) else t


def _eig_factors(a, check_finite, result, left, right):
    """``(w, vr, vl)``: the eigenvalues SciPy returned, its right eigenvectors (computed for
    the formulas where SciPy was not asked for them), and its left ones (None unless asked
    for). LAPACK's geev computes the eigenvalues alike whichever eigenvectors it is asked for
    (the Schur form's), which the one computed here is checked to be."""
    w = result[0]
    vr = result[-1] if right else None
    vl = result[1] if left else None
    if vr is None:
        w_right, vr = eig(a, check_finite=check_finite)
        if memory(w_right).tobytes() != memory(w).tobytes():
            raise UnsupportedOperationError(
                "scipy.linalg.eig(a, left=True, right=False): LAPACK's eigenvalues differ from "
                "those it computes with the right eigenvectors, so mutad cannot match the two. "
                "Pass right=True (the default).")
    return w, vr, vl


def _left_pairs(a, w, vl):
    """The repeated pairs of ``a``ᵀ's eigenvalues conj(w), whose right eigenvectors are ``a``'s
    left ones (a real matrix's)."""
    return spectrum_pairs("scipy.linalg.eig", transpose(a), conjugate(w), vl)


@eig.rule
def _eig_rule(a, b=None, left=False, right=True, overwrite_a=False, overwrite_b=False,
              check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eig", a, b, homogeneous_eigvals, left, left or right)
    if not left and not right:  # the eigenvalues alone: eigvals's (LAPACK's same call)
        return _eigvals_rule(a, b, check_finite=check_finite)
    result = eig(a, left=left, right=right, check_finite=check_finite)
    if not left:
        # Real eigenvalues (zero imaginary parts) make np.linalg.eig's formulas' couplings
        # complex with zero imaginary parts; the core takes a real matrix's real part.
        return result, eigenpairs_pullback("scipy.linalg.eig", eig_cotangent, *result,
                                           spectrum_pairs("scipy.linalg.eig", a, *result))
    # A real matrix's left eigenvectors are the right ones of aᵀ, for the eigenvalues conj(w):
    # their cotangent in aᵀ, transposed.
    w, vr, vl = _eig_factors(a, check_finite, result, left, right)
    pairs = spectrum_pairs("scipy.linalg.eig", a, w, vr)
    left_pairs = _left_pairs(a, w, vl)

    def back(dys):
        dw, dvl, dvr = dys if right else (*dys, None)
        if dw is None:
            dw = np.zeros(w.shape, np.result_type(w.real), like=memory(w))
        da = eig_cotangent("scipy.linalg.eig", w, vr, dw, dvr, pairs)
        if dvl is not None:
            da = da + transpose(eig_cotangent("scipy.linalg.eig", conjugate(w), vl,
                                              np.zeros_like(dw), dvl, left_pairs))
        return (da,)

    return result, unreached_as_none(back)


@eig.jvp_rule
def _eig_jvp(tangents, a, b=None, left=False, right=True, overwrite_a=False,
             overwrite_b=False, check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eig", a, b, homogeneous_eigvals, left, left or right)
    if not left and not right:
        return _eigvals_jvp(tangents, a, b, check_finite=check_finite)
    result = eig(a, left=left, right=right, check_finite=check_finite)
    w, vr, vl = _eig_factors(a, check_finite, result, left, right)
    dw, dvr = eig_tangent("scipy.linalg.eig", w, vr, tangents[0],
                          spectrum_pairs("scipy.linalg.eig", a, w, vr))
    out = [_as_scipy_tangent(dw, w)]
    if left:
        dvl = eig_tangent("scipy.linalg.eig", conjugate(w), vl, transpose(tangents[0]),
                          _left_pairs(a, w, vl))[1]
        out.append(dvl if np.iscomplexobj(vl) else np.real(dvl))
    if right:
        out.append(dvr if np.iscomplexobj(vr) else np.real(dvr))
    return result, tuple(out)


def _as_numpy_cotangent(d, like):
    """A cotangent of SciPy's complex eigenvalues for NumPy's, which are real where all are:
    real eigenvalues of a real matrix stay real nearby, so the imaginary part reads nothing."""
    return np.real(d) if not np.iscomplexobj(like) else d


@eigvals.rule
def _eigvals_rule(a, b=None, overwrite_a=False, check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eigvals", a, b, homogeneous_eigvals, vectors=False)
    if b is not None:
        return _generalized_eigvals_rule(a, b, eigvals(a, b, check_finite=check_finite))
    w = eigvals(a, check_finite=check_finite)
    numpy_w, back = RULES[np.linalg.eigvals].reverse(a)
    return w, lambda dw: back(_as_numpy_cotangent(dw, numpy_w))


@eigvals.jvp_rule
def _eigvals_jvp(tangents, a, b=None, overwrite_a=False, check_finite=True,
                 homogeneous_eigvals=False):
    _standard_eig("eigvals", a, b, homogeneous_eigvals, vectors=False)
    if b is not None:
        return _generalized_eigvals_jvp(*tangents[:2], a, b,
                                        eigvals(a, b, check_finite=check_finite))
    w = eigvals(a, check_finite=check_finite)
    _, dw = RULES[np.linalg.eigvals].forward(tangents[:1], a)
    return w, _as_scipy_tangent(dw, w)


# ----------------------------------------------------------------------------------------------
# polar: A = U P (side="right") or P U ("left"), by SciPy's thin SVD A = W S Vᵀ
#
# Right: U = W Vᵀ, P = V S Vᵀ. With G = Wᵀ dA V and F_ij = 1/(s_i + s_j), P² = AᵀA gives
# Vᵀ dP V = F ∘ (Gᵀ S + S G), and dU = (dA - U dP) P⁻¹ = W (F ∘ (G - Gᵀ)) Vᵀ + (I - W Wᵀ) dA
# V S⁻¹ Vᵀ: only s_i + s_j and s_j divide, so repeated singular values are no trouble, but a
# zero one is (U is then not determined). The left polar decomposition of A is the right one
# of Aᵀ, transposed.


def _polar_factors(a):
    """``(W, s, Vᵀ, F)`` of a tall (m ≥ n) ``a``, by the wrapper (nested differentiation
    differentiates them again)."""
    w, s, vt = svd(a, full_matrices=False)
    return w, s, vt, 1.0 / (s[:, None] + s[None, :])


def _polar_tangent(a, da):
    w, s, vt, f = _polar_factors(a)
    v = transpose(vt)
    g = transpose(w) @ da @ v
    dp = v @ (f * (transpose(g) * s + s[:, None] * g)) @ vt
    du = w @ (f * (g - transpose(g))) @ vt
    if np.shape(a)[0] > np.shape(a)[1]:
        du = du + (da - w @ (transpose(w) @ da)) @ (v / s) @ vt
    return du, dp


def _polar_cotangent(a, du, dp):
    w, s, vt, f = _polar_factors(a)
    v = transpose(vt)
    g = np.zeros(np.shape(f))
    da = None
    if du is not None:
        m = transpose(w) @ du @ v
        g = g + f * (m - transpose(m))
        if np.shape(a)[0] > np.shape(a)[1]:
            da = (du - w @ (transpose(w) @ du)) @ (v / s) @ vt
    if dp is not None:
        h = f * (vt @ dp @ v)
        g = g + s[:, None] * (h + transpose(h))
    part = w @ g @ vt
    return part if da is None else part + da


def _polar_tall(name, a, side):
    if np.ndim(a) != 2:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of a stack of matrices: mutad differentiates one matrix at a "
            "time; call it on each (np.stack of the results).")
    m, n = np.shape(a)
    if (m < n) if side == "right" else (m > n):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(a, side={side!r}) of a {m}×{n} matrix: its unitary factor "
            "is not determined by a (P is singular), so it has no derivative. Use "
            f"side={'left' if side == 'right' else 'right'!r}, or differentiate the SVD.")


polar = scipy_adjoint(_linalg.polar)


@polar.rule
def _polar_rule(a, side="right"):
    _polar_tall("polar", a, side)
    y = polar(a, side)
    if side == "right":
        return y, lambda dys: (_polar_cotangent(a, *dys),)
    # A = P U: Aᵀ = Uᵀ P, the right decomposition of Aᵀ.
    return y, lambda dys: (transpose(_polar_cotangent(
        transpose(a), None if dys[0] is None else transpose(dys[0]), dys[1])),)


@polar.jvp_rule
def _polar_jvp(tangents, a, side="right"):
    _polar_tall("polar", a, side)
    y = polar(a, side)
    if side == "right":
        return y, _polar_tangent(a, tangents[0])
    du, dp = _polar_tangent(transpose(a), transpose(tangents[0]))
    return y, (transpose(du), dp)


# ----------------------------------------------------------------------------------------------
# orth and null_space: columns of SciPy's SVD, chosen by SciPy's rank decision (the singular
# values above rcond · max(s)), differentiated as Townsend's (2016) formulas for those columns.
# pinvh: SciPy's pseudo-inverse through eigh, differentiated as pinv (Golub & Pereyra 1973) of
# a symmetric matrix of locally constant rank, with the symmetric gradient, as eigh's.

orth, null_space, pinvh = map(scipy_adjoint, (_linalg.orth, _linalg.null_space, _linalg.pinvh))
# orth's and null_space's rules are written with conjugate transposes, in mutad's convention;
# the phases of complex columns are arbitrary (a loss reading them is refused, as svd's)
orth.complex_values = null_space.complex_values = CONVENTION
# pinvh's rules are written for Hermitian matrices (B = Bᴴ: their formulas are their own
# adjoints), in mutad's convention: complex Hermitian matrices get the Hermitian gradient
pinvh.complex_values = CONVENTION


def _svd_rank(s, shape, rcond):
    """SciPy's decision in orth and null_space: how many singular values exceed
    rcond · max(s) (rcond None: eps · max(M, N)), and that threshold."""
    if rcond is None:
        rcond = np.finfo(s.dtype).eps * max(shape)
    tol = np.amax(s, initial=0.0) * rcond
    return int(np.sum(s > tol)), tol


def _require_distinct(name, s, rank, shape):
    """Refuse kept singular values equal within rounding: their singular vectors are not
    determined (any rotation of them serves), so neither is their derivative."""
    if np.any(repeated_pairs(memory(s)[:rank], max(shape))):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of a matrix with repeated singular values (equal within "
            "rounding): the basis vectors it returns are not determined by the matrix (any "
            "rotation of those columns is a basis of the same space), so they have no "
            "derivative. Differentiate a quantity of the subspace instead, such as the "
            "projector Q @ Q.T, computed as A @ scipy.linalg.pinv(A) (range) or "
            "np.eye(n) - scipy.linalg.pinv(A) @ A (null space).")


def _couplings(s):
    """F_ij = 1/(s_j² - s_i²) off the diagonal, of distinct ``s`` (``_require_distinct``)."""
    squares = s * s
    difference = squares[None, :] - squares[:, None]
    diagonal = np.eye(np.shape(s)[-1], dtype=bool)
    return np.where(diagonal, 0.0, 1.0 / np.where(diagonal, 1.0, difference))


def _require_first_order(name, a):
    """Refuse a complex matrix some enclosing differentiation follows: the SVD's factors
    would be differentiated again by scipy.linalg.svd's rule, which takes real matrices."""
    if np.iscomplexobj(a) and wrapped(a):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of a complex matrix under nested differentiation (mutad.hvp, "
            "hessian, a gradient of a gradient): its first derivatives are followed, its "
            "second are not (scipy.linalg.svd's rule takes real matrices). Differentiate it "
            "once, or write it on the real and imaginary parts.")


def _orth_factors(a, rcond):
    """The kept singular triplets (U_r, s_r, V_rᴴ) of the SVD orth computes."""
    require_matrix("orth", a)
    _require_first_order("orth", a)
    u, s, vt = svd(a, full_matrices=False)
    rank, _ = _svd_rank(s, (np.shape(u)[0], np.shape(vt)[1]), rcond)
    _require_distinct("orth", s, rank, np.shape(a))
    return u[:, :rank], s[:rank], vt[:rank]


@orth.rule
def _orth_rule(a, rcond=None):
    """Q = U_r, the left singular vectors of the r singular values SciPy keeps, the others
    being zero by its decision: Townsend's (2016, eq. 30) pullback of U with those zero,
    Ā = U_r (F ∘ (K - Kᵀ)) S_r V_rᵀ + (I - U_r U_rᵀ) Q̄ S_r⁻¹ V_rᵀ, K = U_rᵀ Q̄, which reads
    none of the dropped singular vectors (determined by rounding alone where A is rank
    deficient)."""
    u, s, vt = _orth_factors(a, rcond)
    result = orth(a, rcond)

    def back(dq):
        k = adjoint(u) @ dq
        if np.iscomplexobj(k):  # each column's phase is arbitrary: the loss must not read it
            require_phase_free("scipy.linalg.orth", np.imag(np.diagonal(k)),
                               squared_column_norms(dq))
        da = u @ ((_couplings(s) * (k - adjoint(k))) * s[None, :]) @ vt
        return (da + (dq - u @ k) @ (vt / s[:, None]),)

    return result, back


@orth.jvp_rule
def _orth_jvp(tangents, a, rcond=None):
    """dQ = U_r (F ∘ (dP S_r + S_r dPᵀ)) + (I - U_r U_rᵀ) dA V_r S_r⁻¹, dP = U_rᵀ dA V_r."""
    u, s, vt = _orth_factors(a, rcond)
    da_v = tangents[0] @ adjoint(vt)
    dp = adjoint(u) @ da_v
    dp_s = dp * s[None, :]
    du = u @ (_couplings(s) * (dp_s + adjoint(dp_s))) + (da_v - u @ dp) / s[None, :]
    if np.iscomplexobj(dp):  # the phases, split evenly between u_i and v_i, as svd's
        du = du + u * (1j * np.imag(np.diagonal(dp)) / (2 * s))[None, :]
    return orth(a, rcond), du


def _null_space_factors(a, rcond, check_finite, lapack_driver):
    """The kept singular triplets (U_r, s_r, V_r) of SciPy's decision, and the dimension of
    the null space."""
    require_matrix("null_space", a)
    _require_first_order("null_space", a)
    u, s, vt = svd(a, full_matrices=False, check_finite=check_finite,
                   lapack_driver=lapack_driver)
    rank, _ = _svd_rank(s, np.shape(a), rcond)
    return u[:, :rank], s[:rank], adjoint(vt[:rank]), np.shape(a)[1] - rank


def _require_one_dimension(dimension):
    if dimension > 1:
        raise UnsupportedOperationError(
            f"scipy.linalg.null_space of a matrix whose null space has {dimension} dimensions: "
            "its basis vectors are not determined by the matrix (any rotation of them is a "
            "basis of the same space, their singular values being all zero), so they have no "
            "derivative. mutad differentiates a null space of one dimension; for more, "
            "differentiate its projector, np.eye(n) - scipy.linalg.pinv(A) @ A.")


@null_space.rule
def _null_space_rule(A, rcond=None, *, overwrite_a=False, check_finite=True,
                     lapack_driver="gesdd"):
    """A null space of one dimension, q = its vector: the right singular vector of the
    singular value σ SciPy drops (σ = 0 where it is not computed, a wide matrix). With the
    kept triplets (u_j, s_j, v_j) and w = A q = σ u_q, Townsend's (2016) dV's column is
    dq = Σ_j v_j (s_j u_jᵀ dA q + v_jᵀ dAᵀ w) / (σ² - s_j²), so with c = V_rᵀ q̄ / (σ² - s_r²),
    Ā = U_r (c s_r) qᵀ + w (V_r c)ᵀ. A null space of no dimension is empty; of more, refused
    (its vectors are not determined)."""
    result = null_space(A, rcond, check_finite=check_finite, lapack_driver=lapack_driver)
    u, s, v, dimension = _null_space_factors(A, rcond, check_finite, lapack_driver)

    def back(dq):
        if dimension == 0 or np.size(A) == 0:  # no vector, or no entry of A to move it
            return (np.zeros_like(A),)
        if np.any(dq):  # (a decision on the cotangent: none reached the vectors)
            _require_one_dimension(dimension)
        else:
            return (np.zeros_like(A),)
        q = result[:, 0]
        w = A @ q
        if np.iscomplexobj(q):  # q's phase is arbitrary: the loss must not read it
            require_phase_free("scipy.linalg.null_space",
                               np.imag(np.vdot(q, dq[:, 0]))[None],
                               squared_column_norms(dq))
        c = (adjoint(v) @ dq[:, 0]) / (np.real(np.vdot(w, w)) - s * s)
        return (np.outer(u @ (c * s), np.conjugate(q)) + np.outer(w, np.conjugate(v @ c)),)

    return result, back


@null_space.jvp_rule
def _null_space_jvp(tangents, A, rcond=None, *, overwrite_a=False, check_finite=True,
                    lapack_driver="gesdd"):
    result = null_space(A, rcond, check_finite=check_finite, lapack_driver=lapack_driver)
    u, s, v, dimension = _null_space_factors(A, rcond, check_finite, lapack_driver)
    da = tangents[0]
    if dimension == 0 or np.size(A) == 0:  # no vector, or no entry of A to move it
        return result, np.zeros_like(da, shape=np.shape(result))
    _require_one_dimension(dimension)
    q = result[:, 0]
    w = A @ q
    # (the gauge qᴴ dq = 0: q's phase, arbitrary, does not move)
    dq = v @ ((s * (adjoint(u) @ (da @ q)) + adjoint(v) @ (adjoint(da) @ w))
              / (np.real(np.vdot(w, w)) - s * s))
    return result, dq[:, None]


def _pinvh_setting(a, atol, rtol, lower, check_finite):
    require_matrix("pinvh", a)
    require_symmetric(a, "scipy.linalg.pinvh")
    return pinvh(a, atol, rtol, lower, False, check_finite)


def _pinvh_tangent(a, b, da):
    """dB = -B dA B + B² dA (I - A B) + (I - B A) dA B² (Golub & Pereyra 1973, Thm. 4.3, for
    a symmetric (Hermitian) A and its B = A⁺), dA symmetric (Hermitian). Its adjoint for
    Re<·, ·> is the same map, B being Hermitian."""
    squared = b @ b
    return -(b @ da @ b) + squared @ (da - (da @ a) @ b) + (da - b @ (a @ da)) @ squared


@pinvh.rule
def _pinvh_rule(a, atol=None, rtol=None, lower=True, return_rank=False, check_finite=True):
    """B = A⁺ of a symmetric (Hermitian) A of locally constant rank (SciPy's cutoff of the
    eigenvalues): the adjoint of ``_pinvh_tangent`` is itself with B̄ for dA, made symmetric
    (Hermitian: the symmetric gradient, SciPy reading one triangle)."""
    result = pinvh(a, atol, rtol, lower, return_rank, check_finite)
    b = _pinvh_setting(a, atol, rtol, lower, check_finite)

    symmetric = hermitian_part(a)  # what b depends on, in the symmetric convention

    def back(db):
        db = db[0] if return_rank else db
        return (hermitian_part(_pinvh_tangent(symmetric, b, db)),)

    return result, back


@pinvh.jvp_rule
def _pinvh_jvp(tangents, a, atol=None, rtol=None, lower=True, return_rank=False,
               check_finite=True):
    result = pinvh(a, atol, rtol, lower, return_rank, check_finite)
    b = _pinvh_setting(a, atol, rtol, lower, check_finite)
    tangent = _pinvh_tangent(hermitian_part(a), b, hermitian_part(tangents[0]))
    return result, ((tangent, None) if return_rank else tangent)


# schur: A = Z T Zᴴ, SciPy's (LAPACK's gees) values. With distinct eigenvalues and T triangular
# (real output of real eigenvalues, or complex output) Z is unique up to one sign (real) or
# phase (complex) per column, and the derivative is Zᴴ dA Z = C = dT + Ω T - T Ω, Ω = Zᴴ dZ
# skew-Hermitian: its strictly lower part L solves tril(L T - T L) = tril(C) column by column (T's
# diagonal gaps the divisors), dZ = Z Ω and dT = triu(C + T Ω - Ω T), Ω = L - Lᴴ with no
# diagonal: the phases' convention (a real sign does not move). A loss that reads the phases
# (T's off-diagonal entries turn with them, T_kj → conj(φ_k) T_kj φ_j) is refused. Real output
# with complex eigenvalues (2x2 blocks, which LAPACK standardizes), repeated eigenvalues and
# sort= (LAPACK's reordering jumps with the signs of T's off-diagonal entries) are refused.

schur = scipy_adjoint(_linalg.schur)
schur.complex_values = CONVENTION  # complex output of a real matrix


def _schur_checked(a, output, lwork, sort, check_finite, differentiated=True):
    """SciPy's form, refused where it has no derivative (unless not ``differentiated``: a
    constant's, mutad.stop_gradient's in forward mode, is SciPy's of any kind)."""
    if not differentiated:
        return schur(a, output, lwork, False, sort, check_finite)
    if sort is not None:
        raise UnsupportedOperationError(
            "scipy.linalg.schur(sort=...) of a differentiated matrix: LAPACK's reordering "
            "rotates by the signs of T's off-diagonal entries, which jump where they cross 0 "
            "(at a symmetric matrix, say), so the reordered form has no derivative there. "
            "Take the unsorted form and select its eigenvalues yourself.")
    result = schur(a, output, lwork, False, sort, check_finite)
    t = np.asarray(stop_gradient(result[0]))
    if np.any(np.diagonal(t, -1) != 0):
        raise UnsupportedOperationError(
            "scipy.linalg.schur of a differentiated matrix with complex eigenvalues: mutad "
            "differentiates the real Schur form of real, distinct eigenvalues (T triangular), "
            "not LAPACK's standardized 2x2 blocks. Take the complex Schur form, "
            "schur(a, output='complex'), whose T is triangular, or the eigenvalues by eigvals.")
    d = np.diagonal(t)
    gaps = np.abs(d[:, None] - d[None, :])[~np.eye(len(d), dtype=bool)]
    if gaps.size and np.min(gaps) <= 1e-8 * max(1.0, np.max(np.abs(t))):
        raise UnsupportedOperationError(
            "scipy.linalg.schur of a differentiated matrix with repeated eigenvalues: its "
            "vectors are not unique there, and have no derivative.")
    return result


def _lower_solve(t, c):
    """L strictly lower with tril(L T - T L, -1) = tril(c, -1)."""
    n = np.shape(t)[0]
    lower = np.zeros_like(c)
    for j in range(n):
        for i in range(n - 1, j, -1):
            lower[i, j] = (c[i, j] - lower[i, :j] @ t[:j, j] + t[i, i + 1:] @ lower[i + 1:, j]
                           ) / (t[j, j] - t[i, i])
    return lower


def _lower_solve_transposed(t, h):
    """X strictly lower with tril(X Tᵀ - Tᵀ X, -1) = tril(h, -1): the adjoint of
    ``_lower_solve`` (for Tᴴ, given conj(T))."""
    n = np.shape(t)[0]
    x = np.zeros_like(h)
    for j in range(n - 1, -1, -1):
        for i in range(j + 1, n):
            x[i, j] = (h[i, j] - x[i, j + 1:i] @ t[j, j + 1:i] + t[j + 1:i, i] @ x[j + 1:i, j]
                       ) / (t[j, j] - t[i, i])
    return x


def _require_schur_phase_free(t, z, dt, dz):
    """Refuse a loss that reads the phases of a complex Schur form's vectors: along
    Z → Z diag(e^{iφ}) (T_kj → T_kj e^{i(φ_j - φ_k)}) it changes by Σ_j φ_j p_j, with
    p_j = Im (Zᴴ Z̄)_jj + Σ_k w_kj - Σ_k w_jk and w_kj = -Im(conj(T̄_kj) T_kj)."""
    w = -np.imag(np.conjugate(dt) * t)
    phases = np.imag(np.diagonal(adjoint(z) @ dz)) + np.sum(w, axis=0) - np.sum(w, axis=1)
    scale = squared_column_norms(dz) + np.sum(np.real(np.conjugate(dt) * dt)) * np.sum(
        np.real(np.conjugate(t) * t))
    require_phase_free("scipy.linalg.schur(output='complex')", phases, scale)


@schur.rule
def _schur_rule(a, output="real", lwork=None, overwrite_a=False, sort=None, check_finite=True):
    result = _schur_checked(a, output, lwork, sort, check_finite)
    t, z = result[0], result[1]

    def back(dresult):
        dt, dz = dresult[0], dresult[1]
        dt = np.zeros_like(t) if dt is None else np.triu(dt)
        dz = np.zeros_like(z) if dz is None else dz
        if np.iscomplexobj(t):
            _require_schur_phase_free(t, z, dt, dz)
        g = adjoint(z) @ dz + adjoint(t) @ dt - dt @ adjoint(t)
        x = _lower_solve_transposed(conjugate(t), np.tril(g - adjoint(g), -1))
        da = z @ (dt + x) @ adjoint(z)
        return (da if np.iscomplexobj(a) else np.real(da),)

    return result, back


@schur.jvp_rule
def _schur_jvp(tangents, a, output="real", lwork=None, overwrite_a=False, sort=None,
               check_finite=True):
    # (a constant's tangent, mutad.stop_gradient's, is None or zeros)
    differentiated = tangents[0] is not None and bool(np.any(tangents[0] != 0))
    result = _schur_checked(a, output, lwork, sort, check_finite, differentiated)
    if not differentiated:
        return result, None
    t, z = result[0], result[1]
    c = adjoint(z) @ tangents[0] @ z
    lower = _lower_solve(t, c)
    omega = lower - adjoint(lower)
    dz, dt = z @ omega, np.triu(c + t @ omega - omega @ t)
    return result, (dt, dz, None) if len(result) == 3 else (dt, dz)


def _rsf2csf(T, Z, check_finite=True):
    """SciPy's rsf2csf, its steps on the traced arrays: complex copies of T and Z, then from the
    bottom each 2x2 block whose subdiagonal entry is not negligible (a decision on the values)
    turned triangular by SciPy's Givens rotation (from the block's eigenvalues, by scipy's
    eigvals and norm), T's subdiagonal entries set to zero; values bit for bit, every step
    differentiated (a real Schur form's blocks are themselves refused by schur)."""
    for name, x in (("Z", Z), ("T", T)):
        if np.ndim(x) != 2 or np.shape(x)[0] != np.shape(x)[1]:
            raise ValueError(f"Input '{name}' must be square.")
        if check_finite and not np.all(np.isfinite(x)):
            raise ValueError("array must not contain infs or NaNs")
    if np.shape(T)[0] != np.shape(Z)[0]:
        raise ValueError(f"Input array shapes must match: Z: {np.shape(Z)} vs. T: {np.shape(T)}")
    kind = np.result_type(Z, T, np.complex64)  # SciPy's _commonType with complex64
    kind = np.complex64 if kind == np.complex64 else np.complex128
    Z, T = Z.astype(kind), T.astype(kind)
    eps = np.finfo(float).eps
    for m in range(np.shape(T)[0] - 1, 0, -1):
        if abs(T[m, m - 1]) > eps * (abs(T[m - 1, m - 1]) + abs(T[m, m])):
            mu = eigvals(T[m - 1:m + 1, m - 1:m + 1]) - T[m, m]
            pair = np.stack([mu[0], T[m, m - 1]])  # BLAS's norm, differentiated as a sum
            r = scipys_value(_norm_value(pair), np.sqrt(np.sum(np.real(pair * np.conj(pair)))))
            c, s = mu[0] / r, T[m, m - 1] / r
            G = np.stack([np.stack([np.conj(c), s]), np.stack([-s, c])]).astype(kind)
            T[m - 1:m + 1, m - 1:] = np.dot(G, T[m - 1:m + 1, m - 1:])
            T[:m + 1, m - 1:m + 1] = np.dot(T[:m + 1, m - 1:m + 1], np.conj(G).T)
            Z[:, m - 1:m + 1] = np.dot(Z[:, m - 1:m + 1], np.conj(G).T)
        T[m, m - 1] = 0.0
    return T, Z


class _ComplexNorm(Value):
    """SciPy's norm of a complex vector, without a derivative (``scipys_value`` gives one)."""

    complex_values = CONVENTION  # no cotangent at all: the same in every convention


_norm_value = _ComplexNorm(_linalg.norm, "scipy.linalg.norm")
_rsf2csf_stand_in = StandIn(_linalg.rsf2csf, _rsf2csf)


def _generalized_schur_refusal(name):
    def refuse(A, B, *args, **kwargs):
        if not (carries_derivative(A) or carries_derivative(B)):  # constants: SciPy's own
            return stand_in.original(A, B, *args, **kwargs)
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of a differentiated matrix: mutad has no derivative of the "
            "generalized Schur (QZ) form (its factors are not unique, and their order and "
            "phases are LAPACK's choices). For the generalized eigenvalues of a nonsingular B, "
            "differentiate np.linalg.eigvals(np.linalg.solve(B, A)); or pass the matrices "
            "through mutad.stop_gradient.")

    stand_in = StandIn(getattr(_linalg, name), refuse)
    return stand_in


_qz, _ordqz = _generalized_schur_refusal("qz"), _generalized_schur_refusal("ordqz")


def _cossin_refusal(X, *args, **kwargs):
    blocks = [b for row in (X if isinstance(X, (list, tuple)) else [X])
              for b in (row if isinstance(row, (list, tuple)) else [row])]
    if not any(carries_derivative(b) for b in blocks):  # constants: SciPy's own
        return _cossin.original(X, *args, **kwargs)
    raise UnsupportedOperationError(
        "scipy.linalg.cossin of a differentiated matrix: mutad has no derivative of the CS "
        "decomposition (its factors are not unique: their signs, and where angles repeat "
        "their bases, are LAPACK's choices). The cosines of its angles are singular values "
        "of the block X[:p, :q]: differentiate scipy.linalg.svdvals(X[:p, :q]) (np.arccos of "
        "them, the angles); or pass the matrix through mutad.stop_gradient.")


_cossin = StandIn(_linalg.cossin, _cossin_refusal)


# ----------------------------------------------------------------------------------------------
# hessenberg: H = Qᵀ A Q by Householder reflectors. SciPy's values (LAPACK's gehrd and orghr),
# with the derivatives of the same reflectors computed by steps mutad differentiates (LAPACK's
# larfg: v = [1, x₂:/(α - β)], β = -sign(Re α)‖x‖, τ = (β - α)/β), checked against SciPy's form;
# real or complex; a column already zero below the subdiagonal (no reflector, τ = 0) is refused,
# the reduction being discontinuous there.


class _HessenbergValue(Value):
    """SciPy's Hessenberg form (or its Q), without a derivative, of real or complex matrices."""

    complex_values = CONVENTION  # no cotangent at all: the same in every convention


_hessenberg_value = _HessenbergValue(lambda a: _linalg.hessenberg(a), "scipy.linalg.hessenberg")
_hessenberg_q_value = _HessenbergValue(lambda a: _linalg.hessenberg(a, calc_q=True)[1],
                                       "scipy.linalg.hessenberg")


def _householder_hessenberg(a):
    """(H, Q) of LAPACK's reduction (gehd2, larfg), step by step: H(k) = I - τ v vᴴ with
    H(k)ᴴ x = β e₁, applied as H(k)ᴴ A H(k). A complex matrix gets one more step, which makes
    the last subdiagonal entry real (a reflector of one entry)."""
    n = np.shape(a)[0]
    complex_values = np.iscomplexobj(a)
    h = a * 1.0
    q = np.eye(n) + 0.0 * a
    for k in range(n - 1 if complex_values else n - 2):
        x = h[k + 1:, k]
        alpha, rest = x[0], x[1:]
        norm = np.linalg.norm(rest) if np.shape(rest)[0] else 0.0 * np.real(alpha)
        if not (norm > 0 or (complex_values and np.imag(alpha) != 0)):
            # (a decision) LAPACK's τ = 0 here and τ ≈ 2 nearby: no derivative
            raise UnsupportedOperationError(
                "scipy.linalg.hessenberg of a matrix whose column "
                f"{k} is already zero below its subdiagonal (and that entry real): LAPACK "
                "skips that reflector (τ = 0), while at every nearby matrix it takes one that "
                "flips a row's sign, so the reduction has no derivative there. Differentiate "
                "the matrix itself where it is already in Hessenberg form, or pass it through "
                "mutad.stop_gradient.")
        if complex_values:
            size = np.sqrt(np.real(alpha) ** 2 + np.imag(alpha) ** 2 + norm * norm)
            beta = -np.copysign(size, np.real(alpha))
        else:
            beta = -np.copysign(np.hypot(alpha, norm), alpha)
        v = np.concatenate([np.ones(1), rest / (alpha - beta)])
        tau = (beta - alpha) / beta
        h[k + 1:, :] -= conjugate(tau) * np.outer(v, conjugate(v) @ h[k + 1:, :])
        h[:, k + 1:] -= tau * np.outer(h[:, k + 1:] @ v, conjugate(v))
        q[:, k + 1:] -= tau * np.outer(q[:, k + 1:] @ v, conjugate(v))
    return np.triu(h, -1), q


def _hessenberg(a, calc_q=False, overwrite_a=False, check_finite=True):
    if not carries_derivative(a):  # a constant (mutad.stop_gradient): SciPy's own
        return _hessenberg_stand_in.original(a, calc_q, overwrite_a, check_finite)
    require_matrix("hessenberg", a)
    if np.shape(a)[0] <= 2:  # SciPy's: already Hessenberg, Q = I
        return (a, np.eye(np.shape(a)[0])) if calc_q else a
    h, q = _householder_hessenberg(a)
    h_value = _hessenberg_value(a)
    size = np.max(np.abs(h_value), initial=0.0)
    if not np.max(np.abs(h - h_value), initial=0.0) <= 1e-8 * np.shape(a)[0] * (1.0 + size):
        raise UnsupportedOperationError(  # (a guard: never another reduction's derivative)
            "scipy.linalg.hessenberg: mutad's Householder steps, which give its derivative, "
            "did not reproduce SciPy's Hessenberg form of this matrix (a reflector of another "
            "sign), so it cannot differentiate it. Write the reduction with NumPy's steps, "
            "which mutad differentiates, or pass the matrix through mutad.stop_gradient.")
    h = scipys_value(h_value, h)
    return (h, scipys_value(_hessenberg_q_value(a), q)) if calc_q else h


_hessenberg_stand_in = StandIn(_linalg.hessenberg, _hessenberg)


# matrix_balance: B = T⁻¹ A T, T = P D a permutation of a diagonal of powers of 2 that LAPACK
# (gebal) chooses by the values, a decision. SciPy's B, with the derivative T⁻¹ dA T: each entry
# of B an entry of A scaled by a power of 2.


def _matrix_balance(A, permute=True, scale=True, separate=False, overwrite_a=False):
    if not carries_derivative(A):
        return _matrix_balance_stand_in.original(A, permute, scale, separate, overwrite_a)
    require_matrix("matrix_balance", A)
    plain = settled(A, "scipy.linalg.matrix_balance, whose permutation and scaling LAPACK "
                       "chooses by the values")
    b, t = _matrix_balance_stand_in.original(np.array(plain), permute, scale)
    t_inverse = np.transpose(np.divide(1.0, t, out=np.zeros_like(t), where=t != 0))
    b = scipys_value(b, t_inverse @ A @ t)
    if separate:
        return b, _matrix_balance_stand_in.original(np.array(plain), permute, scale, True)[1]
    return b, t


_matrix_balance_stand_in = StandIn(_linalg.matrix_balance, _matrix_balance)
matrix_balance = _matrix_balance_stand_in
hessenberg = _hessenberg_stand_in


# Complex values (facet complex): written in mutad's convention (conjugate transposes,
# phases).
complex_aware(np.linalg.eigh, np.linalg.eigvalsh, np.linalg.svd, np.linalg.eig,
              np.linalg.eigvals)


# ----------------------------------------------------------------------------------------------
# eig_banded, eigvals_banded, eigh_tridiagonal, eigvalsh_tridiagonal: the symmetric eigenproblem
# of a matrix held in band storage. Their values are SciPy's own calls (LAPACK's band and
# tridiagonal drivers); their derivatives are np.linalg.eigh's of the dense symmetric matrix the
# storage stands for, built by steps mutad differentiates (``scipys_value``), so forward mode and
# every order follow. Each stored off-diagonal entry stands for two entries of that matrix, so
# it gets the sum of their gradients, as solveh_banded's does. Eigenvectors are SciPy's, whose
# signs the band drivers choose for themselves: the dense composition's are turned to SciPy's
# (a constant sign per column), and a composition that does not reproduce SciPy's values is
# refused, never differentiated.


class _BandedEigenValue(Value):
    """SciPy's eigenvalues or eigenvectors of a banded or tridiagonal matrix, without a
    derivative (the derivative is the dense composition's)."""


_eig_banded_value = _BandedEigenValue(
    lambda ab, lower, eigvals_only, select, select_range, max_ev, check_finite: (
        _linalg.eig_banded(ab, lower, eigvals_only, False, select, select_range, max_ev,
                           check_finite)), "scipy.linalg.eig_banded")
_eigvals_banded_value = _BandedEigenValue(
    lambda ab, lower, select, select_range, check_finite: _linalg.eigvals_banded(
        ab, lower, False, select, select_range, check_finite), "scipy.linalg.eigvals_banded")
_eigh_tridiagonal_value = _BandedEigenValue(
    lambda d, e, eigvals_only, select, select_range, check_finite, tol, driver: (
        _linalg.eigh_tridiagonal(d, e, eigvals_only, select, select_range, check_finite, tol,
                                 driver)), "scipy.linalg.eigh_tridiagonal")
_eigvalsh_tridiagonal_value = _BandedEigenValue(
    lambda d, e, select, select_range, check_finite, tol, driver: (
        _linalg.eigvalsh_tridiagonal(d, e, select, select_range, check_finite, tol, driver)),
    "scipy.linalg.eigvalsh_tridiagonal")


def _dense_from_diagonals(diagonals):
    """The n x n matrix with ``diagonals[k]`` (length n - |k|) on its k-th diagonal."""
    return sum(np.diag(d, k) for k, d in diagonals.items())


def _symmetric_dense_from_band(a_band, lower):
    """The symmetric matrix of SciPy's symmetric band storage (upper: a_band[p + i - j, j] =
    A[i, j] for i ≤ j; lower: a_band[i - j, j] = A[i, j] for i ≥ j), each stored off-diagonal
    entry in both triangles."""
    p = np.shape(a_band)[0] - 1
    n = np.shape(a_band)[1]
    diagonals = {}
    for k in range(min(p, n - 1) + 1):  # the k-th superdiagonal, A[j, j + k]
        d = a_band[k, :n - k] if lower else a_band[p - k, k:]
        diagonals[k] = d
        if k:
            diagonals[-k] = d
    return _dense_from_diagonals(diagonals)


def _require_real(name, values):
    if any(np.iscomplexobj(v) for v in values):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of complex (Hermitian) band storage: mutad differentiates "
            "real symmetric band storage. Build the Hermitian matrix and call eigh.")


def _plain_range(select_range):
    """``select_range`` as numbers (a primitive's settings), None where SciPy ignores it."""
    return None if select_range is None else tuple(
        np.asarray(stop_gradient(bound)).item() for bound in select_range)


def _selection_offset(w, w_value, select, select_range):
    """Where SciPy's selection ``w_value`` (consecutive eigenvalues in ascending order) begins
    in the whole spectrum ``w``: the first index of ``select='i'``; of ``'v'``, the offset
    whose eigenvalues match SciPy's best (a decision on the values, which a replay checks is
    the same again; the comparison after it refuses a selection it does not reproduce)."""
    if select in ("i", "index", 2):
        return int(select_range[0])
    count, values = np.shape(w_value)[0], stop_gradient(w)
    mismatch = np.stack([np.max(np.abs(values[k:k + count] - w_value), initial=0.0)
                         for k in range(np.shape(w)[0] - count + 1)])
    return int(settled(np.argmin(mismatch), "the eigenvalues a selection by value returns"))


def _eigenproblem_like_scipys(name, dense, w_value, v_value=None, select="a",
                              select_range=None):
    """SciPy's eigenvalues ``w_value`` (and eigenvectors ``v_value``) with the derivatives of
    np.linalg.eigh of ``dense``, the matrix SciPy's storage stands for, or of those of its
    eigenpairs SciPy selected (``select``: the derivative of each is the same whether the
    others are returned or not)."""
    if v_value is None:
        w = np.linalg.eigvalsh(dense)
    else:
        w, v = np.linalg.eigh(dense)
    count = np.shape(w_value)[0]
    if count != np.shape(dense)[0]:
        offset = _selection_offset(w, w_value, select, select_range)
        w = w[offset:offset + count]
        if v_value is not None:
            v = v[:, offset:offset + count]
    scale = 1.0 + np.max(np.abs(w_value), initial=0.0)
    if not np.max(np.abs(w - w_value), initial=0.0) <= 1e-8 * scale * max(1, np.shape(dense)[0]):
        raise UnsupportedOperationError(  # (a guard: never another problem's derivative)
            f"scipy.linalg.{name}: the dense eigenproblem that gives mutad's derivative did not "
            "reproduce SciPy's eigenvalues, so it cannot differentiate this call. Build the "
            "matrix and call eigh, or pass the storage through mutad.stop_gradient.")
    w = scipys_value(w_value, w)
    if v_value is None:
        return w
    signs = np.where(np.sum(v_value * stop_gradient(v), axis=0) < 0, -1.0, 1.0)
    v = v * signs
    if not np.max(np.abs(stop_gradient(v) - v_value), initial=0.0) <= 1e-6:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}: SciPy's eigenvectors are not those of the dense eigenproblem "
            "that gives mutad's derivative (repeated or nearly repeated eigenvalues, whose "
            "eigenvectors are not determined). Differentiate the eigenvalues only "
            "(eigvals_only=True), or pass the storage through mutad.stop_gradient.")
    return w, scipys_value(v_value, v)


def _eig_banded(a_band, lower=False, eigvals_only=False, overwrite_a_band=False, select="a",
                select_range=None, max_ev=0, check_finite=True):
    if not carries_derivative(a_band):  # a constant (mutad.stop_gradient): SciPy's own
        return _eig_banded_stand_in.original(a_band, lower, eigvals_only, overwrite_a_band,
                                             select, select_range, max_ev, check_finite)
    _require_real("eig_banded", (a_band,))
    a_band = np.atleast_2d(a_band)
    value = _eig_banded_value(a_band, lower, eigvals_only, select, _plain_range(select_range),
                              max_ev, check_finite)
    dense = _symmetric_dense_from_band(a_band, lower)
    if eigvals_only:
        return _eigenproblem_like_scipys("eig_banded", dense, value, None, select, select_range)
    return _eigenproblem_like_scipys("eig_banded", dense, *value, select, select_range)


def _eigvals_banded(a_band, lower=False, overwrite_a_band=False, select="a",
                    select_range=None, check_finite=True):
    if not carries_derivative(a_band):
        return _eigvals_banded_stand_in.original(a_band, lower, overwrite_a_band, select,
                                                 select_range, check_finite)
    _require_real("eigvals_banded", (a_band,))
    a_band = np.atleast_2d(a_band)
    value = _eigvals_banded_value(a_band, lower, select, _plain_range(select_range),
                                  check_finite)
    return _eigenproblem_like_scipys("eigvals_banded", _symmetric_dense_from_band(a_band, lower),
                                     value, None, select, select_range)


def _tridiagonal(d, e):
    return _dense_from_diagonals({0: d, 1: e, -1: e})


def _eigh_tridiagonal(d, e, eigvals_only=False, select="a", select_range=None,
                      check_finite=True, tol=0.0, lapack_driver="auto"):
    if not (carries_derivative(d) or carries_derivative(e)):
        return _eigh_tridiagonal_stand_in.original(d, e, eigvals_only, select, select_range,
                                                   check_finite, tol, lapack_driver)
    _require_real("eigh_tridiagonal", (d, e))
    value = _eigh_tridiagonal_value(d, e, eigvals_only, select, _plain_range(select_range),
                                    check_finite, tol, lapack_driver)
    dense = _tridiagonal(d, e)
    if eigvals_only:
        return _eigenproblem_like_scipys("eigh_tridiagonal", dense, value, None, select,
                                         select_range)
    return _eigenproblem_like_scipys("eigh_tridiagonal", dense, *value, select, select_range)


def _eigvalsh_tridiagonal(d, e, select="a", select_range=None, check_finite=True, tol=0.0,
                          lapack_driver="auto"):
    if not (carries_derivative(d) or carries_derivative(e)):
        return _eigvalsh_tridiagonal_stand_in.original(d, e, select, select_range,
                                                       check_finite, tol, lapack_driver)
    _require_real("eigvalsh_tridiagonal", (d, e))
    value = _eigvalsh_tridiagonal_value(d, e, select, _plain_range(select_range), check_finite,
                                        tol, lapack_driver)
    return _eigenproblem_like_scipys("eigvalsh_tridiagonal", _tridiagonal(d, e), value, None,
                                     select, select_range)


_eig_banded_stand_in = StandIn(_linalg.eig_banded, _eig_banded)
_eigvals_banded_stand_in = StandIn(_linalg.eigvals_banded, _eigvals_banded)
_eigh_tridiagonal_stand_in = StandIn(_linalg.eigh_tridiagonal, _eigh_tridiagonal)
_eigvalsh_tridiagonal_stand_in = StandIn(_linalg.eigvalsh_tridiagonal, _eigvalsh_tridiagonal)
eig_banded, eigvals_banded = _eig_banded_stand_in, _eigvals_banded_stand_in
eigh_tridiagonal, eigvalsh_tridiagonal = _eigh_tridiagonal_stand_in, _eigvalsh_tridiagonal_stand_in


# ----------------------------------------------------------------------------------------------
# orthogonal_procrustes and subspace_angles: SciPy's steps on svd, orth and svdvals, so their
# values are SciPy's bit for bit and their derivatives those of the steps' rules


def _finite_matrix(x, check_finite=True):
    if check_finite and not np.all(np.isfinite(x)):
        raise ValueError("array must not contain infs or NaNs")


def _orthogonal_procrustes(A, B, check_finite=True):
    """SciPy's ``orthogonal_procrustes``: ``R = U Vᵀ`` of the SVD of ``(Bᵀ conj(A))ᵀ`` and
    ``scale`` the sum of its singular values (svd's rule: repeated ones refused)."""
    _finite_matrix(A, check_finite)
    _finite_matrix(B, check_finite)
    if np.ndim(A) != 2:
        raise ValueError(f'expected ndim to be 2, but observed {np.ndim(A)}')
    if np.shape(A) != np.shape(B):
        raise ValueError(f'the shapes of A and B differ ({np.shape(A)} vs {np.shape(B)})')
    u, w, vt = svd((B.T @ np.conj(A)).T)
    R = u @ vt
    scale = np.sum(w)
    return R, scale


def _orth_of(x):
    """orth of a differentiated matrix by its rule; of a constant (one the function made, such
    as np.eye(5)[:, :2], whose repeated singular values orth's rule would refuse), SciPy's own."""
    return orth(x) if carries_derivative(x) else orth.fn(x)


def _subspace_angles(A, B):
    """SciPy's ``subspace_angles``: orth of each, svdvals of ``QAᴴ QB`` (the cosines) and of the
    residual (the sines, where a cosine² ≥ 1/2: SciPy's decision, taken on the values)."""
    _finite_matrix(A)
    if len(np.shape(A)) != 2:
        raise ValueError(f'expected 2D array, got shape {np.shape(A)}')
    QA = _orth_of(A)
    _finite_matrix(B)
    if len(np.shape(B)) != 2:
        raise ValueError(f'expected 2D array, got shape {np.shape(B)}')
    if len(B) != len(QA):
        raise ValueError('A and B must have the same number of rows, got '
                         f'{np.shape(QA)[0]} and {np.shape(B)[0]}')
    QB = _orth_of(B)
    QA_H_QB = np.dot(QA.T.conj(), QB)
    sigma = svdvals(QA_H_QB)
    if np.shape(QA)[1] >= np.shape(QB)[1]:
        B = QB - np.dot(QA, QA_H_QB)
    else:
        B = QA - np.dot(QB, QA_H_QB.T.conj())
    mask = sigma ** 2 >= 0.5
    if mask.any():
        mu_arcsin = np.arcsin(np.clip(svdvals(B), -1., 1.))  # (SciPy passes overwrite_a=True,
        # which changes no value here: B is a temporary, whose overwrite mutad would refuse)
    else:
        mu_arcsin = 0.
    cosines = np.clip(sigma[::-1], -1., 1.)
    if carries_derivative(cosines) and np.any(~mask & (1.0 - memory(cosines)
                                                       <= 32 * np.finfo(float).eps)):
        # an angle of 0 by arccos, whose partial at 1 is infinite: the subspaces meet, where
        # an angle is |t| along a direction (no derivative), or zero everywhere near (where
        # they must meet: its rounding, arccos(1 - eps), is no derivative's value either)
        raise UnsupportedOperationError(
            "scipy.linalg.subspace_angles of subspaces that meet (an angle of 0, within "
            "rounding): the angle has no derivative there, or one of 0 where the subspaces "
            "meet wherever near, which SciPy's arccos of a cosine rounded to 1 does not give. "
            "Differentiate the angles between subspaces that do not meet (leave the shared "
            "directions out), or the cosines (scipy.linalg.svdvals(orth(A).T @ orth(B))).")
    return np.where(mask, mu_arcsin, np.arccos(cosines))


orthogonal_procrustes = StandIn(_linalg.orthogonal_procrustes, _orthogonal_procrustes)
subspace_angles = StandIn(_linalg.subspace_angles, _subspace_angles)
