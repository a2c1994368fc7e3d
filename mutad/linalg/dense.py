"""Dense linear algebra: solve, inv, det, slogdet, lstsq, pinv and matrix_power, NumPy's and
SciPy's beside each other.

Giles, "An extended collection of matrix derivative results for forward and reverse mode
algorithmic differentiation" (2008) for inv, solve and det; Golub & Pereyra, "The
differentiation of pseudo-inverses and nonlinear least squares problems" (SIAM J. Numer. Anal.,
1973, Thm. 4.3) for pinv and lstsq (which assume the rank does not change nearby).

Complex matrices: inv, solve, matrix_power and det are complex-differentiable, so their real
rules hold (``holomorphic``); slogdet, pinv and lstsq are written in mutad's convention
(``complex_aware``), a transpose becoming a conjugate transpose. SciPy's variants take real
values.
"""

import inspect
import warnings

import numpy as np
import scipy.linalg as _linalg

from ..core.errors import UnsupportedOperationError
from ..core.registry import (RULES, complex_aware, defjvp, defrule, holomorphic,
                             zero_derivative)
from ..rules._helpers import (one_triangle, require_symmetric, symmetric_part, transpose,
                              unbroadcast)
from ..scipy._adjoints import scipy_adjoint
from ..core.views import memory, wrapped
from ..engines.products import product_times
from .spectral import REPEATED_ULPS, singular_values_pullback, singular_values_tangent
from ._common import (adjoint, as_matrices, one_column_of_a_batch, conjugate, hermitian_part, of_finite_matrices,
                      require_matrix, times_transpose)

solve, inv, det, pinv, lstsq = map(scipy_adjoint, (
    _linalg.solve, _linalg.inv, _linalg.det, _linalg.pinv, _linalg.lstsq))


# ----------------------------------------------------------------------------------------------
# Determinants: Jacobi's formula, the cofactors where the matrix is singular


def cofactor(a):
    """d det(A) / dA = adj(A)ᵀ, finite even where A is singular.

    With A = U S Vᵀ, adj(A)ᵀ = det(U) det(V) U adj(S) Vᵀ, adj(S)_ii = Π_{j≠i} s_j. For complex
    A = U S Vᴴ (the holomorphic derivative, det(A) A⁻ᵀ where A is invertible):
    adj(A)ᵀ = det(U) det(Vᴴ) conj(U) adj(S) conj(Vᴴ).
    """
    if wrapped(a):
        # differentiated itself (a Hessian of det): the SVD's singular values are not
        # differentiable where det's singular matrices put them (at zero, often repeated), but
        # the cofactors are polynomials of A's entries, exactly differentiable as determinants
        return _minors_cofactor(a)
    return of_finite_matrices(a, _cofactor)


def _minors_cofactor(a):
    """adj(A)ᵀ as (-1)^(i+j) det(A without row i and column j), each a determinant whose own
    rule differentiates it."""
    n = np.shape(a)[-1]
    if n == 1:
        return np.ones(np.shape(a), dtype=np.result_type(a))
    others = np.array([[j for j in range(n) if j != i] for i in range(n)])
    minors = a[..., others[:, None, :, None], others[None, :, None, :]]
    signs = 1 - 2 * (np.add.outer(np.arange(n), np.arange(n)) % 2)
    return signs * np.linalg.det(minors)


def _cofactor(a):
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * ((conjugate(u) * others[..., None, :]) @ conjugate(vt))


def _beyond_the_floats(a, y):
    """Where a finite matrix's det(A) is not finite and normal (0 or subnormal by underflow,
    inf by overflow; None if nowhere): det(A) A⁻ᵀ is then 0 · A⁻ᵀ or inf · A⁻ᵀ, where the
    cofactors themselves may be numbers (diag(1e-200, 1e-200) has det 0 and cofactors 1e-200),
    as the SVD's products of the other singular values give them."""
    size = np.abs(y)
    inexact = np.logical_and(np.isfinite(a).all(axis=(-2, -1)), np.logical_not(
        np.logical_and(size >= np.finfo(size.dtype).tiny, size < np.inf)))
    return inexact if np.any(inexact) else None


def det_cotangent(a, y, dy):
    """Ā for y = det(A): d det = det(A) tr(A⁻¹ dA) (Jacobi's formula; Giles 2008, §3.1), so
    Ā = ȳ det(A) A⁻ᵀ, the cofactor matrix adj(A)ᵀ where A is singular or det(A) is beyond the
    floats."""
    try:
        inverse = transpose(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        return as_matrices(dy) * cofactor(a)
    inexact = _beyond_the_floats(a, y)
    if inexact is None:
        return as_matrices(dy) * (as_matrices(y) * inverse)
    with np.errstate(over="ignore", invalid="ignore"):  # replaced by the cofactors there
        adjugate = as_matrices(y) * inverse
    return as_matrices(dy) * np.where(as_matrices(inexact), cofactor(a), adjugate)


def det_tangent(a, y, da):
    """The tangent of y = det(A) along dA: det(A) tr(A⁻¹ dA), <adj(A)ᵀ, dA> for singular A
    and where det(A) is beyond the floats."""
    try:
        solved = np.linalg.solve(a, da)
    except np.linalg.LinAlgError:
        return np.sum(cofactor(a) * da, axis=(-2, -1))
    inexact = _beyond_the_floats(a, y)
    if inexact is None:
        return y * np.trace(solved, axis1=-2, axis2=-1)
    with np.errstate(over="ignore", invalid="ignore"):  # replaced by the cofactors there
        jacobi = y * np.trace(solved, axis1=-2, axis2=-1)
    return np.where(inexact, np.sum(cofactor(a) * da, axis=(-2, -1)), jacobi)


# ----------------------------------------------------------------------------------------------
# np.linalg: inverses and solves


def _chained(u, v, w):
    return u @ v @ w


def sandwich(u, v, w):
    """``u @ v @ w``, each of its terms a ``product_times`` one: a zero of the middle factor (a
    cotangent or a tangent) contributes zero beside a NaN of the outer ones."""
    return product_times(_chained, u, v, w)


@defrule(np.linalg.inv, leading=1)
def numpy_inv(a):
    y = np.linalg.inv(a)

    def back(dy):
        # dY = -Y dA Y  (Giles 2008, §3.1), so Ā = -Yᵀ Ȳ Yᵀ.
        y_t = transpose(y)
        return (-sandwich(y_t, dy, y_t),)

    return y, back


@defjvp(np.linalg.inv)
def numpy_inv_jvp(tangents, a):
    y = np.linalg.inv(a)
    return y, -sandwich(y, tangents[0], y)  # Giles 2008, §3.1


@defrule(np.linalg.solve, leading=2)
def numpy_solve(a, b):
    x = np.linalg.solve(a, b)
    is_vector = np.ndim(b) == 1  # NumPy 2: b is a vector only when it is 1-d

    def back(dx):
        # x = A⁻¹ b: b̄ = A⁻ᵀ x̄ and Ā = -b̄ xᵀ (Giles 2008, §3.1), a zero column of b̄ (of
        # x̄) contributing zero beside a NaN of x
        if is_vector:
            db = np.linalg.solve(transpose(a), dx[..., None])[..., 0]
            da = -product_times(np.multiply, db[..., :, None], x[..., None, :])
        else:
            db = np.linalg.solve(transpose(a), dx)
            da = -product_times(np.matmul, db, transpose(x))
        return unbroadcast(da, np.shape(a)), unbroadcast(db, np.shape(b))

    return x, back


@defjvp(np.linalg.solve)
def numpy_solve_jvp(tangents, a, b):
    da, db = tangents
    x = np.linalg.solve(a, b)
    # dx = A⁻¹ (db - dA x)  (Giles 2008, §3.1), a 1-d b made a column for the products
    is_vector = np.ndim(b) == 1
    rhs = None if db is None else db[..., None] if is_vector else db
    if da is not None:  # a zero tangent of A contributes zero beside a NaN of x (times)
        da_x = product_times(np.matmul, da, x[..., None] if is_vector else x)
        rhs = -da_x if rhs is None else rhs - da_x
    dx = np.linalg.solve(a, rhs)
    return x, dx[..., 0] if is_vector else dx


def _hermitian(a, args, kwargs):
    """Whether ``np.linalg.pinv`` is told ``a`` is Hermitian: it then reads one triangle (its
    ``eigh``), so a matrix that is not symmetric is refused, as ``eigh`` refuses it, and the
    derivative is along symmetric perturbations (``svd(hermitian=True)``'s)."""
    hermitian = kwargs.get("hermitian", args[1] if len(args) > 1 else False)
    if hermitian:
        require_symmetric(a, "np.linalg.pinv(..., hermitian=True)")
    return hermitian


def _require_dropped_zero(a, args, kwargs):
    """Refuse a pinv whose cutoff drops a singular value that is not zero within rounding
    (as the SVD's zero ones: ``REPEATED_ULPS`` · max(m, n) · ε · σ_max). The rule differentiates
    the pseudo-inverse of a matrix of the rank kept; a truncated one's derivative differs from
    it by the dropped values over the kept ones (its kept vectors turn towards the dropped)."""
    rcond = kwargs.get("rcond", args[0] if args else None)
    rtol = kwargs.get("rtol", _NO_VALUE)
    a = memory(a)
    s = np.linalg.svd(a, compute_uv=False)
    if rcond is None:  # np.linalg.pinv's defaults
        rcond = (1e-15 if rtol is _NO_VALUE else
                 max(np.shape(a)[-2:]) * np.finfo(a.dtype).eps if rtol is None else rtol)
    largest = np.max(s, axis=-1, keepdims=True, initial=0.0)
    with np.errstate(all="ignore"):  # (a decision, not a value: no warnings of its own)
        dropped = s <= np.asarray(memory(rcond))[..., None] * largest
        limit = REPEATED_ULPS * max(np.shape(a)[-2:]) * _lapack_eps(a) * largest
    if np.any(dropped & (s > limit)):
        raise UnsupportedOperationError(
            f"a pseudo-inverse (pinv, lstsq) whose cutoff drops singular values "
            f"{np.unique(s[dropped & (s > limit)])[:8]} that are not zero within rounding (of "
            f"{np.unique(largest)[:4]} the largest): mutad differentiates the pseudo-inverse of "
            "a matrix of the rank kept, and a truncated one's derivative differs from it. "
            "Truncate explicitly, as (vt[:k].T / s[:k]) @ u[:, :k].T of "
            "np.linalg.svd(a, full_matrices=False), which mutad differentiates.")


_NO_VALUE = inspect.signature(np.linalg.pinv).parameters["rtol"].default


@defrule(np.linalg.pinv, leading=1)
@zero_derivative("args")  # (the cutoff: a decision, locally constant where it drops zeros alone)
def numpy_pinv(a, *args, **kwargs):
    hermitian = _hermitian(a, args, kwargs)
    _require_dropped_zero(a, args, kwargs)
    p = np.linalg.pinv(a, *args, **kwargs)

    def back(dp):
        # Golub & Pereyra (1973), Thm. 4.3, for A of locally constant rank:
        # dP = -P dA P + P Pᵀ dAᵀ (I - A P) + (I - P A) dAᵀ Pᵀ P, so
        # Ā = -Pᵀ P̄ Pᵀ + (I - A P) P̄ᵀ P Pᵀ + Pᵀ P P̄ᵀ (I - P A). Complex A: ᴴ for ᵀ in both
        # (dP is real-linear in dA, not holomorphic; the pullback is its adjoint for Re<a, b>).
        p_t, dp_t = adjoint(p), adjoint(dp)
        left_residual = dp_t - a @ (p @ dp_t)      # (I - A P) P̄ᵀ
        right_residual = dp_t - (dp_t @ p) @ a     # P̄ᵀ (I - P A)
        da = -(p_t @ dp @ p_t) + left_residual @ (p @ p_t) + (p_t @ p) @ right_residual
        return (hermitian_part(da) if hermitian else da,)

    return p, back


def _pinv_tangent(a, p, da):
    """dP = -P dA P + P Pᵀ dAᵀ (I - A P) + (I - P A) dAᵀ Pᵀ P (Golub & Pereyra 1973, Thm. 4.3;
    ᴴ for ᵀ for complex A)."""
    da_t = adjoint(da)
    return (-(p @ da @ p) + (p @ adjoint(p)) @ (da_t - (da_t @ a) @ p)
            + (da_t - p @ (a @ da_t)) @ (adjoint(p) @ p))


@defjvp(np.linalg.pinv)
def numpy_pinv_jvp(tangents, a, *args, **kwargs):
    da = hermitian_part(tangents[0]) if _hermitian(a, args, kwargs) else tangents[0]
    _require_dropped_zero(a, args, kwargs)
    p = np.linalg.pinv(a, *args, **kwargs)
    return p, _pinv_tangent(a, p, da)


@defrule(np.linalg.matrix_power, leading=1)
def numpy_matrix_power(a, n):
    y = np.linalg.matrix_power(a, n)
    base = np.linalg.inv(a) if n < 0 else a
    count = abs(n)

    def back(dy):
        # Y = B^m: dY = Σ_k B^k dB B^(m-1-k), so B̄ = Σ_k (Bᵀ)^k Ȳ (Bᵀ)^(m-1-k).
        base_t = transpose(base)
        # (Bᵀ)^k as sums of terms, each a product_times one: NumPy's products would spread a
        # NaN of B through the zeros beside it, into terms whose derivative is finite
        powers = [np.broadcast_to(np.eye(base.shape[-1], like=memory(base)), base.shape)]
        for k in range(count - 1):
            powers.append(product_times(np.matmul, powers[-1], base_t) if k else base_t)
        db = sum((sandwich(powers[k], dy, powers[count - 1 - k]) for k in range(count)),
                 start=np.zeros_like(dy))
        if n < 0:  # B = A⁻¹: Ā = -Bᵀ B̄ Bᵀ
            db = -sandwich(base_t, db, base_t)
        return (db,)

    return y, back


@defjvp(np.linalg.matrix_power)
def numpy_matrix_power_jvp(tangents, a, n):
    y = np.linalg.matrix_power(a, n)
    if n == 0:
        return y, np.zeros_like(y)
    base, dbase = a, tangents[0]
    if n < 0:  # B = A⁻¹, dB = -B dA B
        base = np.linalg.inv(a)
        dbase = -sandwich(base, dbase, base)
    # d(B^k B) = d(B^k) B + B^k dB, from B^1 up to B^|n|
    power, dpower = base, dbase
    for _ in range(abs(n) - 1):
        power, dpower = (product_times(np.matmul, power, base),
                         product_times(np.matmul, dpower, base)
                         + product_times(np.matmul, power, dbase))
    return y, dpower


def cutoff_keeping(a, rank):
    """pinv's ``rcond`` that keeps the ``rank`` largest singular values of ``a``: halfway (a
    geometric mean) between the last kept and the first dropped, relative to the largest.
    lstsq's solution is pinv(A) b at the rank its own cutoff found (NumPy's and SciPy's differ
    from pinv's default, and from each other), so its derivative is pinv's at that rank."""
    s = np.asarray(np.linalg.svd(memory(a), compute_uv=False), dtype=float)
    rank = int(memory(rank))
    with np.errstate(all="ignore"):  # (a decision, not a value: no warnings of its own)
        if not s.size or not s[0]:
            cutoff = 0.0
        elif rank >= s.size:
            cutoff = 0.5 * float(s[-1] / s[0])
        elif rank <= 0:
            cutoff = 2.0
        else:
            cutoff = float(np.sqrt(s[rank - 1] / s[0]) * np.sqrt(s[rank] / s[0]))
    _require_dropped_zero(a, (cutoff,), {})
    return cutoff


@defrule(np.linalg.lstsq, leading=2)
def numpy_lstsq(a, b, rcond=None):
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
    is_vector = np.ndim(b) == 1
    cutoff = cutoff_keeping(a, rank)

    def back(dys):
        dx, dresiduals, _, ds = dys
        p, pinv_back = numpy_pinv(a, cutoff)  # (here: its events are the gradient's, not NumPy's)
        dx2 = dx[:, None] if is_vector else dx
        x2 = x[:, None] if is_vector else x
        b2 = b[:, None] if is_vector else b
        # x = P b with P = pinv(A) (full rank): b̄ = Pᵀ x̄, and Ā from P̄ = x̄ bᵀ (see pinv);
        # ᴴ for ᵀ for complex values, here and below.
        db = adjoint(p) @ dx2  # (a zero column of x̄ contributes zero beside a NaN of b)
        da = pinv_back(product_times(np.matmul, dx2, adjoint(b2)))[0]
        if np.size(residuals):
            # r_k = |b_k - A x_k|²; x is optimal, so only the explicit A, b dependence counts
            # (envelope theorem): r̄ gives Ā = -2 r̄ (b - A x) xᵀ, b̄ = 2 r̄ (b - A x).
            weighted = product_times(np.multiply, 2.0 * (b2 - a @ x2), dresiduals)
            da = da - product_times(np.matmul, weighted, adjoint(x2))
            db = db + weighted
        if np.any(ds):
            # Singular values: σ̄ gives Ā = U diag(σ̄) Vᵀ (Giles 2008, §3.2; vt is Vᴴ), as the
            # singular values' own rule has it (repeated and zero ones checked there).
            da = da + singular_values_pullback(
                "np.linalg.lstsq", a, *np.linalg.svd(a, full_matrices=False))(ds)[0]
        return da, np.reshape(db, np.shape(b))

    return (x, residuals, rank, s), back


@defjvp(np.linalg.lstsq)
def numpy_lstsq_jvp(tangents, a, b, rcond=None):
    da, db = tangents[:2]
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
    is_vector = np.ndim(b) == 1
    x2 = x[:, None] if is_vector else x
    b2 = b[:, None] if is_vector else b
    db2 = None if db is None else db[:, None] if is_vector else db
    # The reverse rule's assumptions: x = P b with P = pinv(A) of locally constant rank, and
    # the residuals |b - A x|² at an optimal x (envelope theorem): dr = 2 (b - A x)·(db - dA x).
    p = np.linalg.pinv(a, cutoff_keeping(a, rank))
    dx2 = 0.0 if db2 is None else p @ db2
    moved = 0.0 if db2 is None else db2
    if da is not None:
        dx2 = dx2 + product_times(np.matmul, _pinv_tangent(a, p, da), b2)
        moved = moved - product_times(np.matmul, da, x2)
    if not np.size(residuals):
        dresiduals = np.zeros_like(residuals)
    elif np.iscomplexobj(x2) or np.iscomplexobj(moved):  # dr = 2 Re <b - A x, db - dA x>
        dresiduals = 2.0 * np.sum(np.real(conjugate(b2 - a @ x2) * moved), axis=0)
    else:
        dresiduals = 2.0 * np.sum((b2 - a @ x2) * moved, axis=0)
    if da is None:
        ds = np.zeros_like(s)
    else:  # dσ_i = u_iᵀ dA v_i, the singular values' own rule (repeated ones checked). A
        # tangent that moves zero ones off zero gives them NaN, as they have no derivative
        # along it (reverse mode refuses a loss that reads them): the solution, of the rank
        # lstsq kept, has one, as in reverse mode, and forward mode computes every tangent.
        ds = singular_values_tangent("np.linalg.lstsq", a, *np.linalg.svd(a, full_matrices=False),
                                     da, off_zero="nan")
    return (x, residuals, rank, s), (dx2[:, 0] if is_vector else dx2, dresiduals, None, ds)


# ----------------------------------------------------------------------------------------------
# np.linalg: determinants


@defrule(np.linalg.det, leading=1)
def numpy_det(a):
    y = np.linalg.det(a)
    return y, lambda dy: (det_cotangent(a, y, dy),)


@defjvp(np.linalg.det)
def numpy_det_jvp(tangents, a):
    y = np.linalg.det(a)
    return y, det_tangent(a, y, tangents[0])


def _singular(sign):
    """Where ``slogdet``'s matrices are exactly singular: NumPy gives them sign 0 and
    log|det| -inf, without raising."""
    return sign == 0


def _nonsingular(a, singular):
    """``a`` with each exactly singular matrix (``singular``) the identity, so that its
    inverse exists; the rules then give those matrices no derivative of log|det|."""
    if not np.any(singular):
        return a
    return np.where(as_matrices(singular), np.eye(a.shape[-1], dtype=a.dtype), a)


def _slogdet_singular_refused():
    return UnsupportedOperationError(
        "np.linalg.slogdet's log|det| of a singular matrix (NumPy's value -inf) differentiated: "
        "log|det A| has no derivative there (it tends to -inf from every side, its slope to "
        "+inf on one side and -inf on the other). Differentiate the sign alone, or keep the "
        "matrix away from singular ones (regularise it, A + eps I)")


@defrule(np.linalg.slogdet, leading=1)
def numpy_slogdet(a):
    """Real A: d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant.

    Complex A: with t = d log det A = tr(A⁻¹ dA) (complex), d log|det A| = Re t and the sign
    det/|det| = e^{iθ} moves by d sign = i sign Im t. A loss's change is then
    l̄ Re t + Re(conj(s̄) i sign Im t) = Re(conj(g) t) with g = l̄ + i Im(conj(sign) s̄), and
    t = <A⁻ᴴ, dA>, so Ā = g A⁻ᴴ.

    A singular matrix (sign 0, log|det| -inf, as NumPy gives them): its sign is constant
    near it (no gradient), its log|det| has no derivative: refused where a gradient reaches it.
    """
    result = np.linalg.slogdet(a)
    singular = _singular(result[0])

    def back(dys):
        dsign, dlog = dys
        if dlog is None:
            dlog = np.zeros(np.shape(result[1]), np.result_type(result[1]))
        if np.any(singular & (dlog != 0)):
            raise _slogdet_singular_refused()
        inverse = np.linalg.inv(_nonsingular(a, singular))
        if np.iscomplexobj(a):
            if dsign is not None:
                dlog = dlog + 1j * np.imag(np.conjugate(result[0]) * dsign)
            return (as_matrices(dlog) * adjoint(inverse),)
        # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant.
        return (as_matrices(dlog) * transpose(inverse),)

    back.unreached_as_none = True  # a loss of the sign alone reads no log|det|
    return result, back


@defjvp(np.linalg.slogdet)
def numpy_slogdet_jvp(tangents, a):
    result = np.linalg.slogdet(a)
    singular = _singular(result[0])
    # d log det A, NaN (undefined) at a singular matrix moved: read only through log|det|
    t = np.trace(np.linalg.solve(_nonsingular(a, singular), tangents[0]), axis1=-2, axis2=-1)
    if np.any(singular):
        moved = np.any(tangents[0] != 0, axis=(-2, -1))
        t = np.where(singular & moved, np.nan, np.where(singular, 0.0, t))
    if np.iscomplexobj(a):  # d log|det| = Re t, d sign = i sign Im t (see slogdet)
        return result, type(result)(1j * result[0] * np.imag(t), np.real(t))
    # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant and has no tangent.
    return result, type(result)(None, t)


# ----------------------------------------------------------------------------------------------
# General solves and inverses, with SciPy's assume_a structures

_SYMMETRIC = {"sym", "symmetric", "her", "hermitian", "pos", "positive definite"}
_READS_EVERY_ENTRY = {None, "gen", "general", "banded"}


def _on_read_entries(g, assume_a):
    """The gradient of a matrix argument from the gradient ``g`` of the matrix SciPy solved with.

    Without a structure (or "banded") SciPy detects the structure from a's zeros, and a small
    change to any entry gives the general solve of a continuously changed matrix, so every entry
    gets its share. Symmetric structures read one triangle: the symmetric gradient. The others
    read only their band, which alone gets gradient.
    """
    if assume_a in _READS_EVERY_ENTRY:
        return g
    if assume_a in _SYMMETRIC:
        return symmetric_part(g)
    if assume_a == "lower triangular":
        return np.tril(g)
    if assume_a == "upper triangular":
        return np.triu(g)
    if assume_a == "diagonal":
        return np.tril(np.triu(g))
    if assume_a == "tridiagonal":
        return np.tril(np.triu(g, -1), 1)
    raise UnsupportedOperationError(f"assume_a={assume_a!r}: a structure mutad does not know.")


def _triangle_read(a, assume_a, lower, name):
    """A symmetric structure reads one triangle (the ``lower`` one, else the upper), and its
    gradient is the symmetric one (the derivative along symmetric perturbations). A real
    matrix that is not symmetric: the :class:`OneTriangle` read, the call being that of the
    symmetric matrix the triangle stands for, as cholesky's and eigh's are (``one_triangle``);
    None for any other. A complex one that is not symmetric (Hermitian for "her" and "pos")
    is refused."""
    if assume_a not in _SYMMETRIC:
        return None
    name = f"scipy.linalg.{name}(a, assume_a={assume_a!r})"
    if not np.iscomplexobj(a):
        return one_triangle(a, lower, name)
    if np.iscomplexobj(a) and assume_a in ("sym", "symmetric"):  # complex symmetric: a = aᵀ
        if np.max(np.abs(a - transpose(a)), initial=0.0) > 1e-8 * np.max(np.abs(a), initial=0.0):
            raise UnsupportedOperationError(
                f"{name} of a matrix that is not symmetric: SciPy reads one triangle, and "
                "mutad gives the symmetric gradient, which is not the derivative of this call. "
                "Pass a symmetric matrix, (A + A.T) / 2, or solve without assume_a.")
        return None
    require_symmetric(a, name)
    return None


def _solve_again(a, b, lower, assume_a, transposed):
    """``solve`` with the matrix of a call already made, for its derivative: SciPy's
    ``LinAlgWarning`` of an ill-conditioned matrix is that call's, issued once, as SciPy's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _linalg.LinAlgWarning)
        return solve(a, b, lower, check_finite=False, assume_a=assume_a, transposed=transposed)


@solve.rule
def _solve_rule(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
                assume_a=None, transposed=False):
    read = _triangle_read(a, assume_a, lower, "solve")
    x = solve(a, b, lower, False, False, check_finite, assume_a, transposed)

    column = one_column_of_a_batch(a, b)

    def back(dx):
        # x = M⁻¹ b, M = a or aᵀ: b̄ = M⁻ᵀ x̄ and M̄ = -b̄ xᵀ (Giles 2008, §3.1).
        # (a matrix broadcast against a batch of right-hand sides, or a right-hand side
        # against a batch of matrices, gets the sum over the batch)
        xs = x[..., None] if column else x
        db = _solve_again(a, dx[..., None] if column else dx, lower, assume_a, not transposed)
        dm = unbroadcast(-times_transpose(db, xs), np.shape(a))
        da = _on_read_entries(transpose(dm) if transposed else dm, assume_a)
        db = unbroadcast(db, np.shape(b) + ((1,) if column else ()))
        return da if read is None else read.cotangent(da), db[..., 0] if column else db

    return x, back


@solve.jvp_rule
def _solve_jvp(tangents, a, b, lower=False, overwrite_a=False, overwrite_b=False,
               check_finite=True, assume_a=None, transposed=False):
    read = _triangle_read(a, assume_a, lower, "solve")
    x = solve(a, b, lower, False, False, check_finite, assume_a, transposed)
    da, db = tangents[:2]
    column = one_column_of_a_batch(a, b)
    rhs = db[:, None] if column and db is not None else db
    if da is not None:
        # dx = M⁻¹ (db - dM x), M = a or aᵀ, dM the tangent of the entries SciPy reads.
        da = _on_read_entries(da if read is None else read.tangent(da), assume_a)
        dm_x = product_times(np.matmul, transpose(da) if transposed else da,
                             x[..., None] if column else x)
        rhs = -dm_x if rhs is None else rhs - dm_x
    dx = _solve_again(a, rhs, lower, assume_a, transposed)
    return x, dx[..., 0] if column else dx


def _diagonal_inverse_keeps_off_diagonal():
    """Whether ``scipy.linalg.inv(a, assume_a="diagonal")`` returns a's off-diagonal entries
    unchanged beside the inverted diagonal, as SciPy 1.17 does, rather than zeros."""
    return _linalg.inv(np.array([[1.0, 1.0], [0.0, 1.0]]), assume_a="diagonal")[0, 1] != 0.0


@inv.rule
def _inv_rule(a, overwrite_a=False, check_finite=True, **structure):
    # structure: assume_a and lower, keywords of SciPy 1.17's inv, passed on only when given.
    assume_a = structure.get("assume_a")
    read = _triangle_read(a, assume_a, structure.get("lower", False), "inv")
    y = inv(a, False, check_finite, **structure)

    def back(dy):
        if assume_a == "diagonal":
            # y_ii = 1 / a_ii; the off-diagonal entries are a's own or zeros, whichever this
            # SciPy returns, so the gradient is of the function SciPy computed.
            identity = np.eye(np.shape(y)[-1])
            off_diagonal = (1.0 - identity) if _diagonal_inverse_keeps_off_diagonal() else 0.0
            return (dy * off_diagonal - identity * (dy * y * y),)
        # dY = -Y dA Y (Giles 2008, §3.1), so Ā = -Yᵀ Ȳ Yᵀ.
        y_transposed = transpose(y)
        da = _on_read_entries(-(y_transposed @ dy @ y_transposed), assume_a)
        return (da if read is None else read.cotangent(da),)

    return y, back


@inv.jvp_rule
def _inv_jvp(tangents, a, overwrite_a=False, check_finite=True, **structure):
    read = _triangle_read(a, structure.get("assume_a"), structure.get("lower", False), "inv")
    y = inv(a, False, check_finite, **structure)
    da = tangents[0] if read is None else read.tangent(tangents[0])
    if structure.get("assume_a") == "diagonal":  # y_ii = 1 / a_ii, as the reverse rule
        identity = np.eye(np.shape(y)[-1])
        off_diagonal = (1.0 - identity) if _diagonal_inverse_keeps_off_diagonal() else 0.0
        return y, da * off_diagonal - identity * (da * y * y)
    return y, -(y @ _on_read_entries(da, structure.get("assume_a")) @ y)  # Giles 2008, §3.1


# ----------------------------------------------------------------------------------------------
# scipy.linalg.det: np.linalg.det's rule on SciPy's value


@det.rule
def _det_rule(a, overwrite_a=False, check_finite=True):
    """d det = det(A) tr(A⁻¹ dA) (Jacobi's formula; Giles 2008, §3.1), the cofactors where A
    is singular: np.linalg.det's rule."""
    y = det(a, False, check_finite)
    return y, lambda dy: (det_cotangent(a, y, dy),)


@det.jvp_rule
def _det_jvp(tangents, a, overwrite_a=False, check_finite=True):
    y = det(a, False, check_finite)
    return y, det_tangent(a, y, tangents[0])


# ----------------------------------------------------------------------------------------------
# pinv and lstsq: SciPy's values, np.linalg's rules (Golub & Pereyra 1973, Thm. 4.3, for A of
# locally constant rank) at NumPy's factors of the same matrix, with SciPy's cutoff of the
# singular values. Those rules compute with calls that dispatch, so they differentiate again.


def _singular_values(a):
    return np.linalg.svd(a, compute_uv=False)


def _lapack_eps(a):
    """The machine epsilon of the precision SciPy's LAPACK routines compute ``a`` in, which
    pinv's default rtol scales: single for float16 and float32."""
    return np.finfo(np.result_type(a, np.float32)).eps


def _pinv_relative_cutoff(a, atol, rtol):
    """SciPy's cutoff atol + rtol σ_max of the singular values pinv keeps, relative to σ_max:
    np.linalg.pinv's rcond for the same rank."""
    m, n = np.shape(a)[-2:]
    s = _singular_values(a)
    largest = np.max(s, initial=0.0)
    rtol = max(m, n) * _lapack_eps(a) if rtol is None else rtol
    if not largest:
        return rtol
    return ((0.0 if atol is None else atol) + largest * rtol) / largest


def _real_matrix(name, a):
    require_matrix(name, a)
    if np.iscomplexobj(a):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of a complex matrix: mutad differentiates real ones here; "
            f"np.linalg.{name} differentiates complex ones.")


@pinv.rule
def _pinv_rule(a, *, atol=None, rtol=None, return_rank=False, check_finite=True):
    _real_matrix("pinv", a)
    result = pinv(a, atol=atol, rtol=rtol, return_rank=return_rank, check_finite=check_finite)
    _, back = RULES[np.linalg.pinv].reverse(a, _pinv_relative_cutoff(a, atol, rtol))
    if return_rank:  # (pinv, rank): the rank has no derivative
        return result, lambda dys: back(dys[0])
    return result, back


@pinv.jvp_rule
def _pinv_jvp(tangents, a, *, atol=None, rtol=None, return_rank=False, check_finite=True):
    _real_matrix("pinv", a)
    result = pinv(a, atol=atol, rtol=rtol, return_rank=return_rank, check_finite=check_finite)
    _, tangent = RULES[np.linalg.pinv].forward(tangents, a,
                                               _pinv_relative_cutoff(a, atol, rtol))
    return result, ((tangent, None) if return_rank else tangent)


def _scipy_lstsq(a, b, cond, check_finite, lapack_driver):
    """SciPy's lstsq of real values."""
    _real_matrix("lstsq", a)
    if np.iscomplexobj(b):
        raise UnsupportedOperationError("scipy.linalg.lstsq of complex values: mutad "
                                        "differentiates real ones here; np.linalg.lstsq "
                                        "differentiates complex ones.")
    # differentiated as np.linalg.lstsq at SciPy's rank (a cutoff that keeps it)
    return lstsq(a, b, cond, False, False, check_finite, lapack_driver)


@lstsq.rule
def _lstsq_rule(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
                lapack_driver=None):
    result = _scipy_lstsq(a, b, cond, check_finite, lapack_driver)
    numpy_result, numpy_back = RULES[np.linalg.lstsq].reverse(a, b, cutoff_keeping(a, result[2]))

    def back(dys):
        dx, dresidues, _, ds = dys
        # SciPy gives a 1-d b's residue as a number, NumPy as an array of one; gelsy gives
        # none (an empty array), and no singular values (None)
        if np.size(result[1]) == 0:
            dresidues = np.zeros(np.shape(numpy_result[1]))
        dresidues = np.reshape(dresidues, np.shape(numpy_result[1]))
        if result[3] is None:
            ds = np.zeros(np.shape(numpy_result[3]))
        return numpy_back((dx, dresidues, None, ds))

    return result, back


@lstsq.jvp_rule
def _lstsq_jvp(tangents, a, b, cond=None, overwrite_a=False, overwrite_b=False,
               check_finite=True, lapack_driver=None):
    result = _scipy_lstsq(a, b, cond, check_finite, lapack_driver)
    _, (dx, dresidues, _, ds) = RULES[np.linalg.lstsq].forward(tangents[:2], a, b,
                                                               cutoff_keeping(a, result[2]))
    if dresidues is not None:
        dresidues = (np.zeros(np.shape(result[1])) if np.size(result[1]) == 0 else
                     np.reshape(dresidues, np.shape(result[1])))
    return result, (dx, dresidues, None, None if result[3] is None else ds)


# Complex values (facet complex): inv, solve, matrix_power and det are complex-differentiable,
# so their real rules hold; slogdet, pinv and lstsq read conjugates, in mutad's convention.
holomorphic(np.linalg.inv, np.linalg.solve, np.linalg.matrix_power, np.linalg.det)
complex_aware(np.linalg.slogdet, np.linalg.pinv, np.linalg.lstsq)
