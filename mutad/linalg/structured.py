"""Structured matrices: scipy.linalg's constructors (toeplitz, hankel, circulant, block_diag,
companion, fiedler, fiedler_companion, leslie, convolution_matrix) and the solves with matrices
held in compact storage (solve_banded, solveh_banded, cho_solve_banded, solve_toeplitz), whose
stored entries alone get gradient.
"""

import functools
import math

import numpy as np
import scipy.linalg as _linalg

from ..core.allocation import lists_as_arrays
from ..core.errors import UnsupportedOperationError
from ..core.registry import HOLOMORPHIC
from ..scipy._adjoints import ScipysCode, scipy_adjoint, stands_in_for
from ..engines.products import product_times
from ._common import times_transpose

solve_banded, solveh_banded, cho_solve_banded, solve_toeplitz = map(scipy_adjoint, (
    _linalg.solve_banded, _linalg.solveh_banded, _linalg.cho_solve_banded,
    _linalg.solve_toeplitz))
# x = A⁻¹ b is complex-differentiable in A's stored entries and in b, and the banded rules
# (transposes, never conjugates) hold as written for complex values. Not solveh_banded (A is
# Hermitian: its other triangle is the stored one conjugated) nor solve_toeplitz (whose lone
# ``c`` stands for ``r = conj(c)``)
solve_banded.complex_values = HOLOMORPHIC

# SciPy's own code on traced matrices: its column-wise Kronecker product is NumPy's steps
khatri_rao = ScipysCode(_linalg.khatri_rao)


# ----------------------------------------------------------------------------------------------
# Banded and Toeplitz solves: x = A⁻¹ b with A held in SciPy's compact storage, whose entries
# alone get gradient: b̄ = A⁻ᵀ x̄ and Ā = -b̄ xᵀ read at the stored entries (Giles 2008, §3.1),
# computed in the storage (no n × n matrix for the banded ones).


def _shifted(v, d):
    """``w[j] = v[j + d]`` where ``j + d`` indexes ``v``'s first axis, else 0."""
    n = np.shape(v)[0]
    if d == 0:
        return v
    zeros = np.zeros((min(abs(d), n),) + np.shape(v)[1:])
    if abs(d) >= n:
        return zeros + 0.0 * v
    if d > 0:
        return np.concatenate([v[d:], zeros])
    return np.concatenate([zeros, v[:n + d]])


def _as_columns(row, x):
    """A band's row, aligned with the rows of ``x`` (a vector, or a matrix of columns)."""
    return row if np.ndim(x) == 1 else row[:, None]


def _band_times(ab, l, u, x):
    """A x for A in band storage, ab[u + i - j, j] = A[i, j]: row r holds the diagonal
    i - j = r - u, whose products ab[r, j] x[j] land in row j + r - u."""
    return functools.reduce(np.add, [_shifted(_as_columns(ab[r], x) * x, u - r)
                                     for r in range(l + u + 1)])


def _band_transpose(ab, l, u):
    """Aᵀ in band storage (u lower and l upper diagonals): row r of it is row l + u - r of
    ab, moved by r - l."""
    return np.stack([_shifted(ab[l + u - r], r - l) for r in range(l + u + 1)])


def _band_outer(db, x, l, u):
    """-(b̄ xᵀ) read at the entries band storage holds: its entry [r, j] is
    -Σ_k b̄[j + r - u, k] x[j, k]."""
    rows = [_shifted(db, r - u) * x for r in range(l + u + 1)]
    if np.ndim(x) > 1:
        rows = [np.sum(row, axis=-1) for row in rows]
    return -np.stack(rows)


def _band_setting(name, l_and_u, ab):
    l, u = l_and_u
    if np.ndim(ab) != 2 or np.shape(ab)[0] != l + u + 1:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}: ab of shape {np.shape(ab)} does not hold {l} lower and {u} "
            "upper diagonals; mutad differentiates one banded matrix (l + u + 1, n).")
    return int(l), int(u)


@solve_banded.rule
def _solve_banded_rule(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False,
                       check_finite=True):
    l, u = _band_setting("solve_banded", l_and_u, ab)
    x = solve_banded((l, u), ab, b, False, False, check_finite)

    def back(dx):
        db = solve_banded((u, l), _band_transpose(ab, l, u), dx, check_finite=False)
        return None, _band_outer(db, x, l, u), db

    return x, back


@solve_banded.jvp_rule
def _solve_banded_jvp(tangents, l_and_u, ab, b, overwrite_ab=False, overwrite_b=False,
                      check_finite=True):
    l, u = _band_setting("solve_banded", l_and_u, ab)
    x = solve_banded((l, u), ab, b, False, False, check_finite)
    dab, db = tangents[1:3]
    rhs = db
    if dab is not None:  # dx = A⁻¹ (db - dA x)
        dab_x = _band_times(dab, l, u, x)
        rhs = -dab_x if rhs is None else rhs - dab_x
    if rhs is None:
        return x, None
    return x, solve_banded((l, u), ab, rhs, check_finite=False)


def _symmetric_band(ab, lower):
    """The symmetric matrix solveh_banded reads, in general band storage (p lower and p upper
    diagonals), from its one triangle ``ab`` (upper: ab[p + i - j, j] = A[i, j], i ≤ j; lower:
    ab[i - j, j] = A[i, j], i ≥ j): the other triangle's diagonals are the stored ones moved."""
    p = np.shape(ab)[0] - 1
    if lower:
        return np.stack([_shifted(ab[p - r], r - p) for r in range(p)]
                        + [ab[r - p] for r in range(p, 2 * p + 1)])
    return np.stack([ab[r] for r in range(p + 1)]
                    + [_shifted(ab[2 * p - r], r - p) for r in range(p + 1, 2 * p + 1)])


def _symmetric_band_cotangent(g, lower):
    """The cotangent of ``ab`` from that of its general band storage ``g`` (the adjoint of
    _symmetric_band): each stored off-diagonal entry is both A[i, j] and A[j, i]."""
    p = (np.shape(g)[0] - 1) // 2
    if lower:
        return np.stack([g[p]] + [g[p + s] + _shifted(g[p - s], s) for s in range(1, p + 1)])
    return np.stack([g[r] + _shifted(g[2 * p - r], r - p) for r in range(p)] + [g[p]])


@solveh_banded.rule
def _solveh_banded_rule(ab, b, overwrite_ab=False, overwrite_b=False, lower=False,
                        check_finite=True):
    """A symmetric positive definite (Cholesky), stored once: the cotangent of each stored
    entry sums those of its two places in A (ab has no entry twice, so this is the plain
    derivative of the function of ab)."""
    p = _band_setting("solveh_banded", (np.shape(ab)[0] - 1, 0), ab)[0]
    x = solveh_banded(ab, b, False, False, lower, check_finite)

    def back(dx):
        db = solveh_banded(ab, dx, lower=lower, check_finite=False)  # Aᵀ = A
        return _symmetric_band_cotangent(_band_outer(db, x, p, p), lower), db

    return x, back


@solveh_banded.jvp_rule
def _solveh_banded_jvp(tangents, ab, b, overwrite_ab=False, overwrite_b=False, lower=False,
                       check_finite=True):
    p = _band_setting("solveh_banded", (np.shape(ab)[0] - 1, 0), ab)[0]
    x = solveh_banded(ab, b, False, False, lower, check_finite)
    dab, db = tangents[:2]
    rhs = db
    if dab is not None:
        dab_x = _band_times(_symmetric_band(dab, lower), p, p, x)
        rhs = -dab_x if rhs is None else rhs - dab_x
    if rhs is None:
        return x, None
    return x, solveh_banded(ab, rhs, lower=lower, check_finite=False)


def _factor_times(cb, lower, v, transposed=False):
    """F v, or Fᵀ v, for the triangular factor F that cho_solve_banded reads from ``cb`` (U in
    upper storage, cb[p + i - j, j] = U[i, j]; L in lower storage, cb[i - j, j] = L[i, j])."""
    p = np.shape(cb)[0] - 1
    l, u = (p, 0) if lower else (0, p)
    if transposed:
        return _band_times(_band_transpose(cb, l, u), u, l, v)
    return _band_times(cb, l, u, v)


@cho_solve_banded.rule
def _cho_solve_banded_rule(cb_and_lower, b, overwrite_b=False, check_finite=True):
    """x = A⁻¹ b with A = Uᵀ U (A = L Lᵀ), the factor in band storage: b̄ = A⁻¹ x̄ and
    Ā = -b̄ xᵀ (Giles 2008, §3.1), so Ū = U (Ā + Āᵀ) (L̄ = (Ā + Āᵀ) L), cho_solve's rule,
    read at the entries the storage holds and computed in it."""
    cb, lower = cb_and_lower
    p = _band_setting("cho_solve_banded", (np.shape(cb)[0] - 1, 0), cb)[0]
    x = cho_solve_banded((cb, lower), b, False, check_finite)

    def back(dx):
        db = cho_solve_banded((cb, lower), dx, check_finite=False)
        if lower:  # -(b̄ xᵀ + x b̄ᵀ) L = -(b̄ (Lᵀ x)ᵀ + x (Lᵀ b̄)ᵀ)
            dcb = (_band_outer(db, _factor_times(cb, lower, x, True), p, 0)
                   + _band_outer(x, _factor_times(cb, lower, db, True), p, 0))
        else:  # -U (b̄ xᵀ + x b̄ᵀ) = -((U b̄) xᵀ + (U x) b̄ᵀ)
            dcb = (_band_outer(_factor_times(cb, lower, db), x, 0, p)
                   + _band_outer(_factor_times(cb, lower, x), db, 0, p))
        return (dcb, None), db

    return x, back


@cho_solve_banded.jvp_rule
def _cho_solve_banded_jvp(tangents, cb_and_lower, b, overwrite_b=False, check_finite=True):
    cb, lower = cb_and_lower
    _band_setting("cho_solve_banded", (np.shape(cb)[0] - 1, 0), cb)
    x = cho_solve_banded((cb, lower), b, False, check_finite)
    dfactor, db = tangents[:2]
    rhs = db
    if dfactor is not None and dfactor[0] is not None:
        # dx = A⁻¹ (db - dA x): dA x = dUᵀ (U x) + Uᵀ (dU x), or dL (Lᵀ x) + L (dLᵀ x)
        dcb = dfactor[0]
        da_x = (_factor_times(dcb, lower, _factor_times(cb, lower, x, lower), not lower)
                + _factor_times(cb, lower, _factor_times(dcb, lower, x, lower), not lower))
        rhs = -da_x if rhs is None else rhs - da_x
    if rhs is None:
        return x, None
    return x, cho_solve_banded((cb, lower), rhs, check_finite=False)


def _toeplitz_columns(c_or_cr):
    """(c, r, whether r was given) of solve_toeplitz's first argument; r defaults to c."""
    if isinstance(c_or_cr, tuple):
        c, r = c_or_cr
        given = True
    else:
        c, r, given = c_or_cr, c_or_cr, False
    if np.ndim(c) != 1 or np.ndim(r) != 1 or np.iscomplexobj(c) or np.iscomplexobj(r):
        raise UnsupportedOperationError(
            "scipy.linalg.solve_toeplitz: mutad differentiates one real Toeplitz matrix, given "
            "by a vector c (and r); loop over a batch.")
    return c, r, given


def _diagonal_sums(m):
    """Σ_{i - j = k} m[i, j] for k = -(n-1) ... n-1 of a square m: its columns reversed and
    each row moved by its index (a reshape of the padded rows), then summed."""
    n = np.shape(m)[0]
    padded = np.concatenate([m[:, ::-1], np.zeros((n, n))], axis=1)
    return np.sum(np.reshape(np.reshape(padded, (-1,))[:n * (2 * n - 1)], (n, 2 * n - 1)),
                  axis=0)


@solve_toeplitz.rule
def _solve_toeplitz_rule(c_or_cr, b, check_finite=True):
    """T x = b by Levinson's recursion: b̄ = T⁻ᵀ x̄ (Tᵀ the Toeplitz matrix of r and c), and T̄
    = -b̄ xᵀ summed along each diagonal, the one entry of c or r it holds; r[0] is not read."""
    c, r, given = _toeplitz_columns(c_or_cr)
    x = solve_toeplitz((c, r) if given else c, b, check_finite)
    n = np.shape(c)[0]

    def back(dx):
        db = solve_toeplitz((np.concatenate([c[:1], r[1:]]), c), dx, check_finite=False)
        sums = -_diagonal_sums(times_transpose(db, x))
        dc, dr = sums[n - 1:], np.concatenate([np.zeros(1), sums[:n - 1][::-1]])
        return ((dc, dr) if given else dc + dr), db

    return x, back


@solve_toeplitz.jvp_rule
def _solve_toeplitz_jvp(tangents, c_or_cr, b, check_finite=True):
    c, r, given = _toeplitz_columns(c_or_cr)
    x = solve_toeplitz((c, r) if given else c, b, check_finite)
    dcr, db = tangents[:2]
    dc, dr = (dcr if given else (dcr, dcr)) if dcr is not None else (None, None)
    rhs = db
    if dc is not None or dr is not None:
        dt = toeplitz(np.zeros_like(c) if dc is None else dc,
                      np.zeros_like(r) if dr is None else dr)
        dt_x = product_times(np.matmul, dt, x)  # (a zero tangent beside a NaN of x: zero)
        rhs = -dt_x if rhs is None else rhs - dt_x
    if rhs is None:
        return x, None
    return x, solve_toeplitz((c, r) if given else c, rhs, check_finite=False)


# ----------------------------------------------------------------------------------------------
# Structured matrices: each entry a copy of an input's (or of a value SciPy computes from the
# inputs, such as companion's first row), so each is a gather from the inputs joined along their
# last axis, followed by the indexing rule: SciPy's values bit for bit, both modes, every order.
# SciPy's own builds them with as_strided views and writes into a new array, which would leave
# the traced values.


def _vector(x):
    """``x`` as an array (a list of traced values stacked), at least 1-d, as SciPy's
    ``np.atleast_1d``."""
    (x,) = lists_as_arrays((x,))
    return np.atleast_1d(x if hasattr(x, "dtype") else np.asarray(x))


def _batched(*arrays):
    """``arrays`` broadcast over their leading (batch) dimensions, each keeping its last one,
    as SciPy's batched functions take them (``_apply_over_batch``)."""
    batch = np.broadcast_shapes(*(np.shape(a)[:-1] for a in arrays))
    if batch and math.prod(batch) == 0:
        raise ValueError("a zero-size batch: SciPy's batched functions do not take one.")
    return [np.broadcast_to(a, batch + np.shape(a)[-1:]) for a in arrays]


def _gather(values, index):
    """``values[..., index]``: the matrix whose entry (i, j) is ``values[..., index[i, j]]``."""
    return values[..., np.asarray(index, dtype=np.intp)]


@stands_in_for(_linalg.toeplitz)
def toeplitz(c, r=None):
    c = _vector(c)
    r = np.conjugate(c) if r is None else _vector(r)
    c, r = _batched(c, r)
    n, m = np.shape(c)[-1], np.shape(r)[-1]
    # SciPy's values: c reversed, then r[1:]; entry (i, j) is the (n - 1 - i + j)-th.
    values = np.concatenate((c[..., ::-1], r[..., 1:]), axis=-1)
    return _gather(values, (n - 1) - np.arange(n)[:, None] + np.arange(m)[None, :])


@stands_in_for(_linalg.hankel)
def hankel(c, r=None):
    (c,) = lists_as_arrays((c,))
    c = c if hasattr(c, "dtype") else np.asarray(c)
    r = np.zeros_like(c) if r is None else _vector(r)
    if np.ndim(c) != 1 or np.ndim(r) != 1:
        raise UnsupportedOperationError(
            "scipy.linalg.hankel of a differentiated array of other than one dimension: SciPy "
            "ravels those, with a FutureWarning that it will treat them as a batch; ravel c "
            "and r first.")
    n, m = np.shape(c)[0], np.shape(r)[0]
    values = np.concatenate((c, r[1:]))
    return _gather(values, np.arange(n)[:, None] + np.arange(m)[None, :])


@stands_in_for(_linalg.circulant)
def circulant(c):
    c = _vector(c)
    n = np.shape(c)[-1]
    return _gather(c, (np.arange(n)[:, None] - np.arange(n)[None, :]) % n)


def _operands(arrays):
    return [a if hasattr(a, "dtype") else np.asarray(a) for a in lists_as_arrays(arrays)]


@stands_in_for(_linalg.block_diag)
def block_diag(*arrs):
    arrays = [np.atleast_2d(a) for a in _operands(arrs if arrs else ([],))]
    batch = np.broadcast_shapes(*(np.shape(a)[:-2] for a in arrays))
    arrays = [np.broadcast_to(a, batch + np.shape(a)[-2:]) for a in arrays]
    dtype = np.result_type(*arrays)
    width = sum(np.shape(a)[-1] for a in arrays)
    rows, left = [], 0
    for a in arrays:  # each block's rows: zeros, the block, zeros
        height, columns = np.shape(a)[-2:]
        rows.append(np.concatenate(
            (np.zeros(batch + (height, left), dtype), a,
             np.zeros(batch + (height, width - left - columns), dtype)), axis=-1))
        left += columns
    y = np.concatenate(rows, axis=-2)
    return y if y.dtype == dtype else y.astype(dtype)


@stands_in_for(_linalg.companion)
def companion(a):
    a = _vector(a)
    n = np.shape(a)[-1]
    if n < 2:
        raise ValueError("The length of `a` along the last axis must be at least 2.")
    if np.any(a[..., 0] == 0):
        raise ValueError("The first coefficient(s) of `a` (i.e. elements of `a[..., 0]`) must "
                         "not be zero.")
    first_row = -a[..., 1:] / (1.0 * a[..., 0:1])  # SciPy's expression, so SciPy's bits
    below = np.broadcast_to(np.eye(n - 2, n - 1, dtype=first_row.dtype),
                            np.shape(a)[:-1] + (n - 2, n - 1))
    return np.concatenate((first_row[..., None, :], below), axis=-2)


@stands_in_for(_linalg.fiedler)
def fiedler(a):
    a = _vector(a)
    if np.size(a) == 0:
        return np.asarray([], dtype=np.float64)
    if np.size(a) == 1:  # SciPy's constant: a one-entry Fiedler matrix is 0 whatever a is
        return np.asarray([[0.0]])
    # |a_i - a_j|: on the diagonal the kink of |x| at 0, whose derivative mutad takes as 0.
    return np.abs(a[..., :, None] - a[..., None, :])


@stands_in_for(_linalg.convolution_matrix)
def convolution_matrix(a, n, mode="full"):
    if n <= 0:
        raise ValueError("n must be a positive integer.")
    (a,) = _operands((a,))
    if np.size(a) == 0:
        raise ValueError("len(a) must be at least 1.")
    if mode not in ("full", "valid", "same"):
        raise ValueError("'mode' argument must be one of ('full', 'valid', 'same')")
    if np.ndim(a) > 1:
        return np.apply_along_axis(lambda v: convolution_matrix(v, n, mode), -1, a)
    # SciPy's steps: the first column and row of a Toeplitz matrix, from a padded with zeros.
    az = np.pad(a, (0, n - 1), "constant")
    raz = np.pad(a[::-1], (0, n - 1), "constant")
    length = np.shape(az)[0]
    if mode == "full":
        return toeplitz(az, raz[-n:])
    tb = min(n, np.shape(a)[0]) - 1
    te = tb if mode == "valid" else tb - tb // 2
    tb = tb if mode == "valid" else tb // 2
    return toeplitz(az[tb:length - te], raz[-n - tb:length - tb])


@stands_in_for(_linalg.leslie)
def leslie(f, s):
    f, s = _vector(f), _vector(s)
    if np.shape(f)[-1] != np.shape(s)[-1] + 1:
        raise ValueError("Incorrect lengths for f and s. The length of s along the last axis "
                         "must be one less than the length of f.")
    if np.shape(s)[-1] == 0:
        raise ValueError("The length of s must be at least 1.")
    f, s = _batched(f, s)
    n = np.shape(f)[-1]
    dtype = np.result_type(f.dtype, s.dtype)
    # values: 0, then f, then s; f fills the first row, s the first subdiagonal.
    values = np.concatenate((np.zeros(np.shape(f)[:-1] + (1,), dtype), f, s), axis=-1)
    index = np.zeros((n, n), np.intp)
    index[0] = 1 + np.arange(n)
    index[np.arange(1, n), np.arange(n - 1)] = 1 + n + np.arange(n - 1)
    return _gather(values, index)


@stands_in_for(_linalg.fiedler_companion)
def fiedler_companion(a):
    a = _vector(a)
    if np.ndim(a) > 1:
        return np.apply_along_axis(fiedler_companion, -1, a)
    if np.size(a) <= 2:
        return np.reshape(-(a / a[0])[-1], (1, 1)) if np.size(a) == 2 else a[:0]
    if a[0] == 0.0:
        raise ValueError("Leading coefficient is zero.")
    a = a / a[0]
    n = np.size(a) - 1
    # values: 0, 1, then -a; the index of -a[k] is 2 + k. SciPy's assignments, in its order.
    values = np.concatenate((np.asarray([0, 1], a.dtype), -a))
    index = np.zeros((n, n), np.intp)
    index[range(3, n, 2), range(1, n - 2, 2)] = 1
    index[range(2, n, 2), range(1, n - 1, 2)] = 2 + np.arange(3, n + 1, 2)
    index[range(0, n - 2, 2), range(2, n, 2)] = 1
    index[range(0, n - 1, 2), range(1, n, 2)] = 2 + np.arange(2, n + 1, 2)
    index[[0, 1], 0] = [2 + 1, 1]
    return _gather(values, index)
