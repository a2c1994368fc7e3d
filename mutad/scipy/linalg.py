"""``scipy.linalg`` functions mutad differentiates: import them from here instead of SciPy, as
with ``jax.scipy.linalg`` and ``autograd.scipy.linalg``.

>>> import numpy as np, mutad
>>> from mutad.scipy import linalg
>>> def energy(a, b):
...     x = linalg.cho_solve(linalg.cho_factor(a), b)
...     return b @ x
>>> a, b = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, -1.0])
>>> mutad.gradient(energy, a, b)[1].round(4)
array([ 1.7143, -2.8571])

Called with plain arrays each function is SciPy's own, flags and all. Called with traced arrays
it runs its rule, and then ``overwrite_a`` / ``overwrite_b`` are ignored: SciPy is never allowed
to overwrite a traced buffer, whose value the rest of the program (and the reverse pass) still
reads. For memory-saving work in place use mutad.linalg's in-place routines (``cholesky_``,
``ldiv_``), which restore what they overwrite.

Symmetric-matrix inputs (``cholesky``, ``cho_factor``, ``solve`` and ``inv`` with
``assume_a="sym"``/``"her"``/``"pos"``) get the symmetric gradient, the derivative along
symmetric perturbations, as in PyTorch and JAX; to check one with finite differences wrap it as
``lambda m: cholesky((m + m.T) / 2)`` (or pass ``symmetric=`` to mutad.testing's checks).
``cholesky`` and ``cho_factor`` refuse a matrix that is not symmetric beyond rounding.

The rules follow Giles, "An extended collection of matrix derivative results for forward and
reverse mode algorithmic differentiation" (2008) for solves and inverses, Murray,
"Differentiation of the Cholesky decomposition" (arXiv:1602.07527, 2016) for Cholesky, and
Al-Mohy & Higham, "Computing the Fréchet derivative of the matrix exponential" (SIAM J. Matrix
Anal. Appl., 2009) for expm, and Higham, "Functions of Matrices" (2008), §3.2, for expm's and
logm's Fréchet derivatives as corners of block triangular matrices.

``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``det``, ``norm`` and ``qr`` are NumPy's
decompositions and functions by SciPy's names, with SciPy's defaults and settings (eigh's
``lower=``,
``eigvals_only=``, ``driver=``; svd's ``full_matrices``, ``compute_uv``, ``lapack_driver``; qr's
``mode=`` and ``pivoting=``; norm's ``ord``, ``axis``, ``keepdims``): their values are SciPy's
own, their derivatives np.linalg's rules applied to SciPy's factors. What has no derivative is
refused by name: the generalized eigenproblem (``b=``), a subset of eigenpairs, the extra
singular vectors of ``full_matrices=True`` and Q's extra columns in ``mode='full'`` for a
non-square matrix, ``mode='raw'``, and complex values.

``lu`` (``permute_l=``, ``p_indices=``) differentiates the factors of ``lu_factor``, unpacked.
``pinv`` and ``lstsq`` have np.linalg's rules (Golub & Pereyra 1973, for a rank that does not
change nearby) at SciPy's cutoff of the singular values; ``lstsq`` refuses a matrix whose rank
at its ``cond`` is not pinv's. ``eig`` and ``eigvals`` (the standard problem, of a real or a
complex matrix) have np.linalg's formulas on SciPy's eigenpairs, whose eigenvalues are complex
even where they are real.

``polar`` (``side="right"`` of a square or tall matrix, ``"left"`` of a square or wide one, of
full rank) has a rule of its own on SciPy's thin SVD, whose only divisors are the sums of two
singular values and the singular values themselves: repeated singular values (an orthogonal
matrix) are differentiated too, at first order; its second derivatives go through the SVD's rule.
The other side of a non-square matrix, whose unitary factor is not determined, is refused.

``solve_banded``, ``solveh_banded`` and ``solve_toeplitz`` differentiate their compact storage:
each stored band entry, or entry of Toeplitz's ``c`` and ``r``, gets the sum of the gradients
of the matrix entries it stands for (``solveh_banded``'s off-diagonal entries stand for two;
``r[0]``, which SciPy does not read, gets none; a lone ``c`` is ``r`` too). The banded rules
compute in band storage; the Toeplitz rule forms the n × n outer product b̄ xᵀ.

The structured matrices ``toeplitz``, ``hankel``, ``circulant``, ``block_diag``, ``companion``,
``fiedler``, ``fiedler_companion``, ``leslie`` and ``convolution_matrix`` are SciPy's steps on the
differentiated functions: each entry is a copy of an input's, or of a value SciPy computes from
them (companion's first row), gathered by index, so their values are SciPy's bit for bit and
every mode and order follows. ``fiedler``'s ``|a_i - a_j|`` takes the derivative 0 where two
entries are equal (its diagonal). ``hankel`` of an array of two or more dimensions, which SciPy
ravels with a warning that it will change, is refused.

Each function also has a forward rule (``@f.jvp_rule``) from the same results, agreeing with its
reverse rule (<ẏ, w> = <ẋ, vjp(w)>: symmetric inputs take the symmetric part of their tangent,
structured ones the part on the entries SciPy reads). A tuple argument such as ``cho_solve``'s
``(c, lower)`` has a list of tangents, one per item.

Both kinds of rule compute with these wrappers and NumPy, never with SciPy's own functions:
under nested differentiation (``mutad.hvp``, a gradient of a gradient) their arguments and
cotangents are arrays an outer differentiation traces, and the wrappers hand those to the
outer level's rules, while plain arrays go straight to SciPy.
"""

import functools
import math

import numpy as np
import scipy.linalg as _linalg

from ..allocation import lists_as_arrays
from ..arraylike import carries_derivative
from ..errors import UnsupportedOperationError
from ..registry import CONVENTION, RULES
from ..rules._helpers import require_symmetric, symmetric_part, transpose
from ..rules.factorizations import (cholesky_cotangent, cholesky_tangent, det_cotangent,
                                    det_tangent, eig_cotangent, eig_tangent, eigh_cotangent,
                                    eigh_couplings, eigh_tangent,
                                    equal_pairs, lu_tangent, lu_tangent_times, norm_axes,
                                    norm_pullback, norm_tangent, permutation, qr_cotangent,
                                    qr_tangent, real_diagonal, svd_cotangent, svd_tangent,
                                    unit_lower_and_upper)
from ..views import wrapped
from ._adjoints import StandIn, scipy_adjoint, stands_in_for

cholesky, cho_factor, cho_solve, solve_triangular, lu_factor, lu_solve, solve, inv, expm = map(
    scipy_adjoint, (_linalg.cholesky, _linalg.cho_factor, _linalg.cho_solve,
                    _linalg.solve_triangular, _linalg.lu_factor, _linalg.lu_solve,
                    _linalg.solve, _linalg.inv, _linalg.expm))
solve_sylvester, sqrtm = map(scipy_adjoint, (_linalg.solve_sylvester, _linalg.sqrtm))
(solve_continuous_lyapunov, solve_discrete_lyapunov, solve_continuous_are,
 solve_discrete_are) = map(scipy_adjoint, (
    _linalg.solve_continuous_lyapunov, _linalg.solve_discrete_lyapunov,
    _linalg.solve_continuous_are, _linalg.solve_discrete_are))
eigh, eigvalsh, svd, svdvals, det, norm, qr, logm = map(scipy_adjoint, (
    _linalg.eigh, _linalg.eigvalsh, _linalg.svd, _linalg.svdvals, _linalg.det, _linalg.norm,
    _linalg.qr, _linalg.logm))
lu, pinv, lstsq, eig, eigvals = map(scipy_adjoint, (
    _linalg.lu, _linalg.pinv, _linalg.lstsq, _linalg.eig, _linalg.eigvals))
eig.complex_values = eigvals.complex_values = CONVENTION  # complex outputs of a real matrix
solve_banded, solveh_banded, solve_toeplitz = map(scipy_adjoint, (
    _linalg.solve_banded, _linalg.solveh_banded, _linalg.solve_toeplitz))

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "det", "eig", "eigh", "eigvals", "eigvalsh", "expm", "fiedler",
           "fiedler_companion", "hankel", "inv", "leslie", "logm", "lstsq", "lu", "lu_factor",
           "lu_solve", "norm", "pinv", "polar", "qr", "solve", "solve_banded",
           "solve_continuous_are", "solve_continuous_lyapunov", "solve_discrete_are",
           "solve_discrete_lyapunov",
           "solve_sylvester", "solve_toeplitz", "solve_triangular", "solveh_banded", "sqrtm",
           "svd", "svdvals", "toeplitz"]


def _times_transpose(u, v):
    """``u vᵀ``, a 1-d ``u`` and ``v`` being columns (their outer product)."""
    if np.ndim(u) == 1:
        return np.outer(u, v)
    return u @ transpose(v)


def _is_transposed(trans):
    """SciPy's ``trans``: 0/"N" solves a x = b, 1/"T" and 2/"C" (the same for real a) aᵀ x = b."""
    return trans in (1, 2, "T", "C")


def _require_matrix(name, a):
    if np.ndim(a) != 2:
        raise UnsupportedOperationError(
            f"mutad.scipy.linalg.{name} differentiates one matrix, not a stack of shape "
            f"{np.shape(a)}: loop over the stack.")


# ----------------------------------------------------------------------------------------------
# Cholesky


def _cholesky_back(lower, dlower):
    """Ā from the lower factor and its cotangent, by triangular solves that dispatch."""
    return cholesky_cotangent(lower, dlower, lambda factor, x: solve_triangular(
        factor, x, trans=1, lower=True, check_finite=False))


@cholesky.rule
def _cholesky_rule(a, lower=False, overwrite_a=False, check_finite=True):
    require_symmetric(a, "scipy.linalg.cholesky")
    factor = cholesky(a, lower, False, check_finite)

    def back(dfactor):
        if lower:
            return (symmetric_part(_cholesky_back(factor, dfactor)),)
        return (symmetric_part(_cholesky_back(transpose(factor), transpose(dfactor))),)

    return factor, back


def _solve_lower(lower, x):
    """L⁻¹ x for lower triangular L, by a triangular solve that dispatches."""
    return solve_triangular(lower, x, lower=True, check_finite=False)


@cholesky.jvp_rule
def _cholesky_jvp(tangents, a, lower=False, overwrite_a=False, check_finite=True):
    require_symmetric(a, "scipy.linalg.cholesky")
    factor = cholesky(a, lower, False, check_finite)
    if lower:
        return factor, cholesky_tangent(factor, tangents[0], _solve_lower)
    return factor, transpose(cholesky_tangent(transpose(factor), tangents[0], _solve_lower))


@cho_factor.rule
def _cho_factor_rule(a, lower=False, overwrite_a=False, check_finite=True):
    require_symmetric(a, "scipy.linalg.cho_factor")
    c, lower = cho_factor(a, lower, False, check_finite)

    def back(dresult):
        dc = dresult[0]
        # c holds the factor in one triangle and a's own entries, copied, in the other.
        if lower:
            g = _cholesky_back(np.tril(c), np.tril(dc)) + np.triu(dc, 1)
        else:
            g = _cholesky_back(transpose(np.triu(c)), transpose(np.triu(dc))) + np.tril(dc, -1)
        return (symmetric_part(g),)

    return (c, lower), back


@cho_factor.jvp_rule
def _cho_factor_jvp(tangents, a, lower=False, overwrite_a=False, check_finite=True):
    require_symmetric(a, "scipy.linalg.cho_factor")
    c, lower = cho_factor(a, lower, False, check_finite)
    # The factor's triangle moves as the Cholesky factor, the other one as the copy of a it is.
    da = symmetric_part(tangents[0])
    if lower:
        dc = cholesky_tangent(np.tril(c), da, _solve_lower) + np.triu(da, 1)
    else:
        dc = transpose(cholesky_tangent(transpose(np.triu(c)), da, _solve_lower)) + np.tril(da, -1)
    return (c, lower), (dc, None)


def _cholesky_solve_factor_cotangent(c, lower, db, x):
    """The cotangent of the factor in ``c``'s triangle from a solve x = A⁻¹ b with A = L Lᵀ
    (A = Uᵀ U for an upper factor), given b̄ = A⁻¹ x̄: Ā = -b̄ xᵀ, and dA = dL Lᵀ + L dLᵀ
    gives L̄ = (Ā + Āᵀ) L on L's triangle (Ū = U (Ā + Āᵀ)); the other triangle gets none."""
    da = -_times_transpose(db, x)
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
    transposed = _is_transposed(trans)

    def back(dx):
        # x = M⁻¹ b with M = T or Tᵀ, T the triangle of a: b̄ = M⁻ᵀ x̄, M̄ = -b̄ xᵀ, and a
        # gets T̄ on the entries solve_triangular reads (not the diagonal when it is unit).
        db = solve_triangular(a, dx, 0 if transposed else 1, lower, unit_diagonal,
                              check_finite=False)
        dm = -_times_transpose(db, x)
        return _read_triangle(transpose(dm) if transposed else dm, lower, unit_diagonal), db

    return x, back


@solve_triangular.jvp_rule
def _solve_triangular_jvp(tangents, a, b, trans=0, lower=False, unit_diagonal=False,
                          overwrite_b=False, check_finite=True):
    x = solve_triangular(a, b, trans, lower, unit_diagonal, False, check_finite)
    da, db = tangents[:2]
    rhs = db
    if da is not None:
        # dx = M⁻¹ (db - dM x), dM the tangent of the triangle solve_triangular reads.
        dt = _read_triangle(da, lower, unit_diagonal)
        dm_x = (transpose(dt) if _is_transposed(trans) else dt) @ x
        rhs = -dm_x if rhs is None else rhs - dm_x
    return x, solve_triangular(a, rhs, trans, lower, unit_diagonal, check_finite=False)


def _lu_factor_cotangent(lu, order, dlu):
    """The cotangent of ``a`` from that of its packed factors ``lu`` (L strictly below the
    diagonal, U on and above it), a[order] = L U: with F = L⁻¹ d(a[order]) U⁻¹,
    dL = L tril(F, -1) and dU = triu(F) U, so the cotangent of a[order] is
    L⁻ᵀ (tril(Lᵀ L̄, -1) + triu(Ū Uᵀ)) U⁻ᵀ (as in JAX's lu pullback; Giles 2008 for the
    product rule)."""
    lower, upper = unit_lower_and_upper(lu)
    middle = np.tril(transpose(lower) @ np.tril(dlu, -1), -1) \
        + np.triu(np.triu(dlu) @ transpose(upper))
    left = solve_triangular(lower, middle, trans=1, lower=True, unit_diagonal=True,
                            check_finite=False)
    dpermuted = transpose(solve_triangular(upper, transpose(left), lower=False,
                                           check_finite=False))
    return dpermuted[np.argsort(order)]


def _lu_cotangent(lu, order, dm):
    """The cotangent of the packed factors ``lu`` of M, M[order] = L U, from M̄:
    d(M[order]) = dL U + L dU gives L̄ = tril(M̄[order] Uᵀ, -1) and Ū = triu(Lᵀ M̄[order]),
    which share lu's memory layout."""
    lower, upper = unit_lower_and_upper(lu)
    dpermuted = dm[order]
    return np.tril(dpermuted @ transpose(upper), -1) + np.triu(transpose(lower) @ dpermuted)


def _require_square_or_empty(a, name="lu_factor"):
    """The factors of a rectangular matrix are differentiated only when empty (no entry)."""
    _require_matrix(name, a)
    if a.shape[0] != a.shape[1] and a.size:
        raise UnsupportedOperationError(
            f"mutad.scipy.linalg.{name} of a {a.shape[0]}x{a.shape[1]} matrix: mutad "
            "differentiates the LU factors of square matrices. Wrap the rectangular factorisation with "
            "mutad.adjoint and give it a rule.")
    return a.size == 0


@lu_factor.rule
def _lu_factor_rule(a, overwrite_a=False, check_finite=True):
    empty = _require_square_or_empty(a)
    lu, piv = lu_factor(a, False, check_finite)
    order = permutation(piv)

    def back(dresult):
        if empty:
            return (np.zeros_like(a),)
        return (_lu_factor_cotangent(lu, order, dresult[0]),)

    return (lu, piv), back


@lu_factor.jvp_rule
def _lu_factor_jvp(tangents, a, overwrite_a=False, check_finite=True):
    empty = _require_square_or_empty(a)
    lu, piv = lu_factor(a, False, check_finite)
    if empty:
        return (lu, piv), (np.zeros_like(lu), None)
    return (lu, piv), (lu_tangent(lu, tangents[0][permutation(piv)], solve_triangular), None)


@lu_solve.rule
def _lu_solve_rule(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    _require_matrix("lu_solve", lu)
    x = lu_solve((lu, piv), b, trans, False, check_finite)
    transposed = _is_transposed(trans)

    def back(dx):
        # x = M⁻¹ b, M = A or Aᵀ: b̄ = M⁻ᵀ x̄, M̄ = -b̄ xᵀ (Giles 2008, §3.1).
        db = lu_solve((lu, piv), dx, 0 if transposed else 1, check_finite=False)
        dm = -_times_transpose(db, x)
        return (_lu_cotangent(lu, permutation(piv), transpose(dm) if transposed else dm),
                None), db

    return x, back


@lu_solve.jvp_rule
def _lu_solve_jvp(tangents, lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    lu, piv = lu_and_piv
    _require_matrix("lu_solve", lu)
    x = lu_solve((lu, piv), b, trans, False, check_finite)
    dfactor, db = tangents[:2]
    rhs = db
    if dfactor is not None and dfactor[0] is not None:
        # dx = M⁻¹ (db - dM x), M = A or Aᵀ (Giles 2008, §3.1)
        dm_x = lu_tangent_times(lu, dfactor[0], permutation(piv), x, _is_transposed(trans))
        rhs = -dm_x if rhs is None else rhs - dm_x
    return x, lu_solve((lu, piv), rhs, trans, check_finite=False)


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


@solve.rule
def _solve_rule(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
                assume_a=None, transposed=False):
    x = solve(a, b, lower, False, False, check_finite, assume_a, transposed)

    def back(dx):
        # x = M⁻¹ b, M = a or aᵀ: b̄ = M⁻ᵀ x̄ and M̄ = -b̄ xᵀ (Giles 2008, §3.1).
        db = solve(a, dx, lower, check_finite=False, assume_a=assume_a,
                   transposed=not transposed)
        dm = -_times_transpose(db, x)
        return _on_read_entries(transpose(dm) if transposed else dm, assume_a), db

    return x, back


@solve.jvp_rule
def _solve_jvp(tangents, a, b, lower=False, overwrite_a=False, overwrite_b=False,
               check_finite=True, assume_a=None, transposed=False):
    x = solve(a, b, lower, False, False, check_finite, assume_a, transposed)
    da, db = tangents[:2]
    rhs = db
    if da is not None:
        # dx = M⁻¹ (db - dM x), M = a or aᵀ, dM the tangent of the entries SciPy reads.
        da = _on_read_entries(da, assume_a)
        dm_x = (transpose(da) if transposed else da) @ x
        rhs = -dm_x if rhs is None else rhs - dm_x
    return x, solve(a, rhs, lower, check_finite=False, assume_a=assume_a, transposed=transposed)


def _diagonal_inverse_keeps_off_diagonal():
    """Whether ``scipy.linalg.inv(a, assume_a="diagonal")`` returns a's off-diagonal entries
    unchanged beside the inverted diagonal, as SciPy 1.17 does, rather than zeros."""
    return _linalg.inv(np.array([[1.0, 1.0], [0.0, 1.0]]), assume_a="diagonal")[0, 1] != 0.0


@inv.rule
def _inv_rule(a, overwrite_a=False, check_finite=True, **structure):
    # structure: assume_a and lower, keywords of SciPy 1.17's inv, passed on only when given.
    y = inv(a, False, check_finite, **structure)
    assume_a = structure.get("assume_a")

    def back(dy):
        if assume_a == "diagonal":
            # y_ii = 1 / a_ii; the off-diagonal entries are a's own or zeros, whichever this
            # SciPy returns, so the gradient is of the function SciPy computed.
            identity = np.eye(np.shape(y)[-1])
            off_diagonal = (1.0 - identity) if _diagonal_inverse_keeps_off_diagonal() else 0.0
            return (dy * off_diagonal - identity * (dy * y * y),)
        # dY = -Y dA Y (Giles 2008, §3.1), so Ā = -Yᵀ Ȳ Yᵀ.
        y_transposed = transpose(y)
        return (_on_read_entries(-(y_transposed @ dy @ y_transposed), assume_a),)

    return y, back


@inv.jvp_rule
def _inv_jvp(tangents, a, overwrite_a=False, check_finite=True, **structure):
    y = inv(a, False, check_finite, **structure)
    da = tangents[0]
    if structure.get("assume_a") == "diagonal":  # y_ii = 1 / a_ii, as the reverse rule
        identity = np.eye(np.shape(y)[-1])
        off_diagonal = (1.0 - identity) if _diagonal_inverse_keeps_off_diagonal() else 0.0
        return y, da * off_diagonal - identity * (da * y * y)
    return y, -(y @ _on_read_entries(da, structure.get("assume_a")) @ y)  # Giles 2008, §3.1


# ----------------------------------------------------------------------------------------------
# The matrix exponential


def _frechet(a, e):
    """The Fréchet derivative L(A, E) of expm, as the corner of expm([[A, E], [0, A]]), which
    is [[e^A, L(A, E)], [0, e^A]] (Mathias 1996; Higham, Functions of Matrices, 2008, §3.2).
    Computed with expm itself it dispatches (scipy.linalg.expm_frechet does not), so a reverse
    pass differentiates it again through expm's own rule, and stacks work as in expm."""
    n = np.shape(a)[-1]
    block = np.concatenate([np.concatenate([a, e], axis=-1),
                            np.concatenate([np.zeros_like(a), a], axis=-1)], axis=-2)
    return expm(block)[..., :n, n:]


@expm.rule
def _expm_rule(a):
    y = expm(a)

    def back(dy):
        # The Fréchet derivative L(A, E) of expm is linear in E, with adjoint L(Aᵀ, ·):
        # <Ȳ, L(A, E)> = <L(Aᵀ, Ȳ), E> (Al-Mohy & Higham 2009, §2; Higham, Functions of
        # Matrices, 2008, §3.2), so Ā = L(Aᵀ, Ȳ).
        if wrapped(a) or wrapped(dy):
            # traced by an outer differentiation: by expm itself, which it differentiates
            return (_frechet(transpose(a), dy),)
        # plain arrays: SciPy's expm_frechet, a matrix at a time, at a quarter of the cost
        da = np.empty(np.shape(a), np.result_type(a, dy, float))
        for index in np.ndindex(np.shape(a)[:-2]):
            da[index] = _linalg.expm_frechet(transpose(a[index]), dy[index], compute_expm=False)
        return (da,)

    return y, back


@expm.jvp_rule
def _expm_jvp(tangents, a):
    return expm(a), _frechet(a, tangents[0])


# ----------------------------------------------------------------------------------------------
# Sylvester equations, and the matrix square root whose derivative solves one


@solve_sylvester.rule
def _solve_sylvester_rule(a, b, q):
    x = solve_sylvester(a, b, q)

    def back(dx):
        if np.size(x) == 0:  # nothing depends on the inputs (SciPy accepts some odd empties)
            return tuple(np.zeros_like(dx, shape=np.shape(m)) for m in (a, b, q))
        # A X + X B = Q. With S(Y) = A Y + Y B, dX = S⁻¹(dQ - dA X - X dB), and S's adjoint is
        # Y ↦ Aᵀ Y + Y Bᵀ: Q̄ solves Aᵀ Q̄ + Q̄ Bᵀ = X̄, Ā = -Q̄ Xᵀ, B̄ = -Xᵀ Q̄.
        dq = solve_sylvester(transpose(a), transpose(b), dx)
        return -(dq @ transpose(x)), -(transpose(x) @ dq), dq

    return x, back


@solve_sylvester.jvp_rule
def _solve_sylvester_jvp(tangents, a, b, q):
    x = solve_sylvester(a, b, q)
    da, db, dq = (tuple(tangents) + (None,) * 3)[:3]
    if np.size(x) == 0:
        return x, np.zeros(np.shape(x))
    terms = [t for t in (dq, None if da is None else -(da @ x), None if db is None else -(x @ db))
             if t is not None]
    if not terms:
        return x, None
    return x, solve_sylvester(a, b, functools.reduce(np.add, terms))


# The Lyapunov and Riccati equations, by the implicit function theorem: each derivative is
# one more solve of a Lyapunov equation (its adjoint, the transposed one), on SciPy's solution.


def _real_only(name, *arrays):
    if any(np.iscomplexobj(x) for x in arrays):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} of complex matrices: mutad differentiates real ones only.")


@solve_continuous_lyapunov.rule
def _continuous_lyapunov_rule(a, q):
    """A X + X Aᵀ = Q: dX = L(dQ - dA X - X dAᵀ), L the solve; L's adjoint is the solve with
    Aᵀ: Λ = L*(X̄), Q̄ = Λ, Ā = -(Λ Xᵀ + Λᵀ X)."""
    _real_only("solve_continuous_lyapunov", a, q)
    x = solve_continuous_lyapunov(a, q)

    def back(dx):
        lam = solve_continuous_lyapunov(transpose(a), dx)
        return -(lam @ transpose(x) + transpose(lam) @ x), lam

    return x, back


@solve_continuous_lyapunov.jvp_rule
def _continuous_lyapunov_jvp(tangents, a, q):
    _real_only("solve_continuous_lyapunov", a, q)
    x = solve_continuous_lyapunov(a, q)
    da, dq = (tuple(tangents) + (None,) * 2)[:2]
    terms = [t for t in (dq, None if da is None else -(da @ x + x @ transpose(da)))
             if t is not None]
    if not terms:
        return x, None
    return x, solve_continuous_lyapunov(a, functools.reduce(np.add, terms))


@solve_discrete_lyapunov.rule
def _discrete_lyapunov_rule(a, q, method=None):
    """A X Aᵀ - X + Q = 0: dX = D(dA X Aᵀ + A X dAᵀ + dQ), D the solve; its adjoint is the
    solve with Aᵀ: Λ = D*(X̄), Q̄ = Λ, Ā = Λ A Xᵀ + Λᵀ A X."""
    _real_only("solve_discrete_lyapunov", a, q)
    x = solve_discrete_lyapunov(a, q, method)

    def back(dx):
        lam = solve_discrete_lyapunov(transpose(a), dx, method)
        return lam @ a @ transpose(x) + transpose(lam) @ a @ x, lam

    return x, back


@solve_discrete_lyapunov.jvp_rule
def _discrete_lyapunov_jvp(tangents, a, q, method=None):
    _real_only("solve_discrete_lyapunov", a, q)
    x = solve_discrete_lyapunov(a, q, method)
    da, dq = (tuple(tangents) + (None,) * 2)[:2]
    terms = [t for t in (dq, None if da is None else da @ x @ transpose(a)
                         + a @ x @ transpose(da)) if t is not None]
    if not terms:
        return x, None
    return x, solve_discrete_lyapunov(a, functools.reduce(np.add, terms), method)


def _riccati_closed_loop(a, b, r, x):
    """The gain K = R⁻¹ Bᵀ X and the closed loop A - B K of the continuous Riccati equation."""
    gain = solve(r, transpose(b) @ x)
    return gain, a - b @ gain


def _riccati_refused(e, s, name="solve_continuous_are"):
    if e is not None or s is not None:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name} with e= or s= of differentiated matrices: mutad "
            "differentiates the standard Riccati equations only.")


@solve_continuous_are.rule
def _continuous_are_rule(a, b, q, r, e=None, s=None, balanced=True):
    """Aᵀ X + X A - X B R⁻¹ Bᵀ X + Q = 0, with K = R⁻¹ Bᵀ X and the closed loop F = A - B K:
    Fᵀ dX + dX F = -(dQ + dAᵀ X + X dA - X dB K - Kᵀ dBᵀ X + Kᵀ dR K); its adjoint solve
    F Λ + Λ Fᵀ = X̄ gives Q̄ = -Λ, Ā = -X (Λ + Λᵀ), B̄ = X (Λ + Λᵀ) Kᵀ, R̄ = -K Λ Kᵀ."""
    _riccati_refused(e, s)
    _real_only("solve_continuous_are", a, b, q, r)
    x = solve_continuous_are(a, b, q, r, balanced=balanced)
    gain, closed = _riccati_closed_loop(a, b, r, x)

    def back(dx):
        lam = solve_continuous_lyapunov(closed, dx)
        both = lam + transpose(lam)
        return -(x @ both), x @ both @ transpose(gain), -lam, -(gain @ lam @ transpose(gain))

    return x, back


@solve_continuous_are.jvp_rule
def _continuous_are_jvp(tangents, a, b, q, r, e=None, s=None, balanced=True):
    _riccati_refused(e, s)
    _real_only("solve_continuous_are", a, b, q, r)
    x = solve_continuous_are(a, b, q, r, balanced=balanced)
    gain, closed = _riccati_closed_loop(a, b, r, x)
    da, db, dq, dr = (tuple(tangents) + (None,) * 4)[:4]
    terms = [t for t in (
        dq, None if da is None else transpose(da) @ x + x @ da,
        None if db is None else -(x @ db @ gain + transpose(gain) @ transpose(db) @ x),
        None if dr is None else transpose(gain) @ dr @ gain) if t is not None]
    if not terms:
        return x, None
    return x, solve_continuous_lyapunov(transpose(closed), -functools.reduce(np.add, terms))


def _discrete_closed_loop(a, b, r, x):
    """The gain K = (R + Bᵀ X B)⁻¹ Bᵀ X A and the closed loop A - B K of the discrete Riccati
    equation."""
    gain = solve(r + transpose(b) @ x @ b, transpose(b) @ x @ a)
    return gain, a - b @ gain


@solve_discrete_are.rule
def _discrete_are_rule(a, b, q, r, e=None, s=None, balanced=True):
    """X = Aᵀ X A - Aᵀ X B (R + Bᵀ X B)⁻¹ Bᵀ X A + Q, with K and the closed loop F = A - B K:
    dX = Fᵀ dX F + dQ + Kᵀ dR K + Fᵀ X E + Eᵀ X F, E = dA - dB K; its adjoint Stein equation
    Λ = F Λ Fᵀ + X̄ gives Q̄ = Λ, R̄ = K Λ Kᵀ, Ā = X F (Λ + Λᵀ), B̄ = -Ā Kᵀ."""
    _riccati_refused(e, s, "solve_discrete_are")
    _real_only("solve_discrete_are", a, b, q, r)
    x = solve_discrete_are(a, b, q, r, balanced=balanced)
    gain, closed = _discrete_closed_loop(a, b, r, x)

    def back(dx):
        lam = solve_discrete_lyapunov(closed, dx)
        da = x @ closed @ (lam + transpose(lam))
        return da, -(da @ transpose(gain)), lam, gain @ lam @ transpose(gain)

    return x, back


@solve_discrete_are.jvp_rule
def _discrete_are_jvp(tangents, a, b, q, r, e=None, s=None, balanced=True):
    _riccati_refused(e, s, "solve_discrete_are")
    _real_only("solve_discrete_are", a, b, q, r)
    x = solve_discrete_are(a, b, q, r, balanced=balanced)
    gain, closed = _discrete_closed_loop(a, b, r, x)
    da, db, dq, dr = (tuple(tangents) + (None,) * 4)[:4]
    moved = [t for t in (da, None if db is None else -(db @ gain)) if t is not None]
    terms = [t for t in (dq, None if dr is None else transpose(gain) @ dr @ gain) if t is not None]
    if moved:
        e_ = functools.reduce(np.add, moved)
        terms.append(transpose(closed) @ x @ e_ + transpose(e_) @ x @ closed)
    if not terms:
        return x, None
    return x, solve_discrete_lyapunov(transpose(closed), functools.reduce(np.add, terms))


def _real_square_root(a):
    root = sqrtm(a)
    if np.iscomplexobj(root):
        raise UnsupportedOperationError(
            "scipy.linalg.sqrtm of a matrix whose square root is complex (a negative real "
            "eigenvalue): mutad differentiates real arrays only.")
    return root


@sqrtm.rule
def _sqrtm_rule(a, *settings):
    root = _real_square_root(a)

    def back(droot):
        # X X = A gives X dX + dX X = dA, a Sylvester equation; its adjoint is Xᵀ Y + Y Xᵀ.
        return (solve_sylvester(transpose(root), transpose(root), droot),)

    return root, back


@sqrtm.jvp_rule
def _sqrtm_jvp(tangents, a, *settings):
    root = _real_square_root(a)
    return root, solve_sylvester(root, root, tangents[0])


# ----------------------------------------------------------------------------------------------
# The decompositions and functions NumPy has too: eigh, eigvalsh, svd, det, norm, qr. Their
# values are SciPy's own calls (its LAPACK drivers, its signs of eigenvectors and singular
# vectors), their derivatives np.linalg's rules' formulas applied to those factors.


def _standard_eigenproblem(name, b, type, subset_by_index, subset_by_value):
    if b is not None or type != 1:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(a, b, type={type}): mutad differentiates the standard "
            "symmetric eigenproblem and the generalized one of type 1 (A v = λ B v).")
    if subset_by_index is not None or subset_by_value is not None:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(..., subset_by_index=/subset_by_value=): the derivative of "
            "some eigenpairs needs all of them; compute them all and select (w[lo:hi]).")


def _eigenpairs(name, a, lower, check_finite, driver):
    require_symmetric(a, f"scipy.linalg.{name}")
    return eigh(a, lower=lower, check_finite=check_finite, driver=driver)


def _generalized(name, a, b, type, subset_by_index, subset_by_value):
    """Whether ``eigh(a, b)`` is the generalized problem A v = λ B v that mutad follows (b
    given, type 1, real), refusing the other settings; False for the standard one."""
    if b is None:
        _standard_eigenproblem(name, b, type, subset_by_index, subset_by_value)
        return False
    _standard_eigenproblem(name, None, 1, subset_by_index, subset_by_value)
    if type != 1 or np.iscomplexobj(a) or np.iscomplexobj(b):
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}(a, b, type={type}) of complex or type 2, 3 problems: mutad "
            "differentiates the real generalized problem A v = λ B v (type=1).")
    require_symmetric(a, f"scipy.linalg.{name}")
    require_symmetric(b, f"scipy.linalg.{name}")
    return True


def _generalized_cotangents(w, v, dw, dv, equal):
    """Ā and B̄ for A V = B V diag(w), Vᵀ B V = I: with G = Vᵀ V̄ and F the couplings
    1 / (w_j - w_i), Ā = V (diag(w̄) + F ∘ G) Vᵀ and B̄ = -V (diag(w̄ w + diag(G) / 2) +
    F ∘ G w_j) Vᵀ (dV = V C, C_ij = vᵢᵀ (dA - w_j dB) v_j / (w_j - w_i), C_jj = -v_jᵀ dB v_j
    / 2), symmetrised as the standard problem's."""
    n = w.shape[-1]
    if dv is not None and np.any(dv):
        coupled = eigh_couplings(w, equal) * (transpose(v) @ dv)
        diagonal = real_diagonal(transpose(v) @ dv)
    else:
        coupled = np.zeros(w.shape + (n,))
        diagonal = np.zeros(w.shape)
    dw = np.zeros(w.shape) if dw is None else dw
    for_a = coupled + dw[..., None, :] * np.eye(n)
    for_b = coupled * w[..., None, :] + (dw * w + 0.5 * diagonal)[..., None, :] * np.eye(n)
    return (symmetric_part(v @ for_a @ transpose(v)),
            -symmetric_part(v @ for_b @ transpose(v)))


def _generalized_tangents(w, v, da, db):
    """dw and dV of A V = B V diag(w) along dA, dB (their symmetric parts)."""
    n = w.shape[-1]
    pa = transpose(v) @ symmetric_part(da) @ v if da is not None else np.zeros(w.shape + (n,))
    pb = transpose(v) @ symmetric_part(db) @ v if db is not None else np.zeros(w.shape + (n,))
    middle = pa - pb * w[..., None, :]  # vᵢᵀ (dA - w_j dB) v_j
    dw = real_diagonal(middle)
    coupling = eigh_couplings(w) * middle - 0.5 * real_diagonal(pb)[..., None, :] * np.eye(n)
    return dw, v @ coupling


@eigh.rule
def _eigh_rule(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False,
               overwrite_b=False, type=1, check_finite=True, subset_by_index=None,
               subset_by_value=None, driver=None):
    """A = V diag(w) Vᵀ from the one triangle SciPy reads (a symmetric A is required, as
    cholesky's), with the symmetric gradient: np.linalg.eigh's rule (Giles 2008, §3.1) on
    SciPy's own eigenvectors; the generalized problem A V = B V diag(w) by its own
    (``_generalized_cotangents``)."""
    if _generalized("eigh", a, b, type, subset_by_index, subset_by_value):
        w, v = eigh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        equal = equal_pairs(w)
        if eigvals_only:
            values = eigh(a, b, lower=lower, eigvals_only=True, check_finite=check_finite,
                          driver=driver)
            return values, lambda dw: _generalized_cotangents(w, v, dw, None, equal)
        return (w, v), lambda dys: _generalized_cotangents(w, v, dys[0], dys[1], equal)
    w, v = _eigenpairs("eigh", a, lower, check_finite, driver)
    equal = equal_pairs(w)  # now: back may see w restored up to rounding
    if eigvals_only:
        values = eigh(a, lower=lower, eigvals_only=True, check_finite=check_finite,
                      driver=driver)
        return values, lambda dw: (eigh_cotangent(w, v, dw, None, None),)

    def back(dys):
        dw, dv = dys
        return (eigh_cotangent(w, v, dw, dv, equal),)

    return (w, v), back


@eigh.jvp_rule
def _eigh_jvp(tangents, a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False,
              overwrite_b=False, type=1, check_finite=True, subset_by_index=None,
              subset_by_value=None, driver=None):
    if _generalized("eigh", a, b, type, subset_by_index, subset_by_value):
        w, v = eigh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        da, db = (tuple(tangents) + (None,) * 2)[:2]
        dw, dv = _generalized_tangents(w, v, da, db)
        if eigvals_only:
            return eigh(a, b, lower=lower, eigvals_only=True, check_finite=check_finite,
                        driver=driver), dw
        return (w, v), (dw, dv)
    w, v = _eigenpairs("eigh", a, lower, check_finite, driver)
    middle, dw = eigh_tangent(v, tangents[0])  # dw = diag(Vᵀ dA V), dV = V (F ∘ Vᵀ dA V)
    if eigvals_only:
        return eigh(a, lower=lower, eigvals_only=True, check_finite=check_finite,
                    driver=driver), dw
    return (w, v), (dw, v @ (eigh_couplings(w) * middle))


@eigvalsh.rule
def _eigvalsh_rule(a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False, type=1,
                   check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    if _generalized("eigvalsh", a, b, type, subset_by_index, subset_by_value):
        w, v = eigh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        values = eigvalsh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        return values, lambda dw: _generalized_cotangents(w, v, dw, None, equal_pairs(w))
    w, v = _eigenpairs("eigvalsh", a, lower, check_finite, driver)
    values = eigvalsh(a, lower=lower, check_finite=check_finite, driver=driver)
    return values, lambda dw: (eigh_cotangent(w, v, dw, None, None),)


@eigvalsh.jvp_rule
def _eigvalsh_jvp(tangents, a, b=None, *, lower=True, overwrite_a=False, overwrite_b=False,
                  type=1, check_finite=True, subset_by_index=None, subset_by_value=None,
                  driver=None):
    if _generalized("eigvalsh", a, b, type, subset_by_index, subset_by_value):
        w, v = eigh(a, b, lower=lower, check_finite=check_finite, driver=driver)
        da, db = (tuple(tangents) + (None,) * 2)[:2]
        return (eigvalsh(a, b, lower=lower, check_finite=check_finite, driver=driver),
                _generalized_tangents(w, v, da, db)[0])
    _standard_eigenproblem("eigvalsh", b, type, subset_by_index, subset_by_value)
    _, v = _eigenpairs("eigvalsh", a, lower, check_finite, driver)
    values = eigvalsh(a, lower=lower, check_finite=check_finite, driver=driver)
    return values, eigh_tangent(v, tangents[0])[1]


def _require_determined_svd(a, full_matrices, compute_uv):
    m, n = np.shape(a)[-2:]
    if compute_uv and full_matrices and m != n:
        raise UnsupportedOperationError(
            "scipy.linalg.svd(a, full_matrices=True) of a non-square matrix: the extra "
            "singular vectors are not determined by a, so they have no gradient. Pass "
            "full_matrices=False.")


def _thin_svd(a, check_finite, lapack_driver):
    return svd(a, full_matrices=False, check_finite=check_finite, lapack_driver=lapack_driver)


@svd.rule
def _svd_rule(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
              lapack_driver="gesdd"):
    """A = U diag(s) Vᵀ (Townsend 2016), np.linalg.svd's rule on SciPy's own factors; distinct
    singular values are assumed, as there."""
    _require_determined_svd(a, full_matrices, compute_uv)
    result = svd(a, full_matrices, compute_uv, False, check_finite, lapack_driver)
    if not compute_uv:
        u, s, vt = _thin_svd(a, check_finite, lapack_driver)
        return result, lambda ds: (svd_cotangent(u, s, vt, None, ds, None),)
    u, s, vt = result

    def back(dys):
        # Outputs no gradient reached arrive as zeros: skip their terms, which would turn the
        # undetermined couplings of repeated singular values into NaN for nothing.
        du, ds, dvt = (d if d.any() else None for d in dys)
        return (svd_cotangent(u, s, vt, du, np.zeros_like(s) if ds is None else ds, dvt),)

    return result, back


@svd.jvp_rule
def _svd_jvp(tangents, a, full_matrices=True, compute_uv=True, overwrite_a=False,
             check_finite=True, lapack_driver="gesdd"):
    _require_determined_svd(a, full_matrices, compute_uv)
    result = svd(a, full_matrices, compute_uv, False, check_finite, lapack_driver)
    if not compute_uv:
        u, _, vt = _thin_svd(a, check_finite, lapack_driver)
        return result, real_diagonal(transpose(u) @ tangents[0] @ transpose(vt))
    return result, svd_tangent(*result, tangents[0])


@svdvals.rule
def _svdvals_rule(a, overwrite_a=False, check_finite=True):
    """SciPy's singular values, differentiated as ``svd``'s (the thin SVD's factors)."""
    result = svdvals(a, overwrite_a, check_finite)
    u, s, vt = _thin_svd(a, check_finite, "gesdd")
    return result, lambda ds: (svd_cotangent(u, s, vt, None, ds, None),)


@svdvals.jvp_rule
def _svdvals_jvp(tangents, a, overwrite_a=False, check_finite=True):
    u, _, vt = _thin_svd(a, check_finite, "gesdd")
    return (svdvals(a, overwrite_a, check_finite),
            real_diagonal(transpose(u) @ tangents[0] @ transpose(vt)))


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


@norm.rule
def _norm_rule(a, ord=None, axis=None, keepdims=False, check_finite=True):
    """np.linalg.norm's rule (its subgradients at kinks and ties), on SciPy's value."""
    y = norm(a, ord, axis, keepdims, check_finite)
    axes, matrix = norm_axes(a, ord, axis)
    return y, norm_pullback(a, y, ord, axes, keepdims, matrix)


@norm.jvp_rule
def _norm_jvp(tangents, a, ord=None, axis=None, keepdims=False, check_finite=True):
    y = norm(a, ord, axis, keepdims, check_finite)
    axes, matrix = norm_axes(a, ord, axis)
    return y, norm_tangent(a, tangents[0], y, ord, axes, keepdims, matrix)


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
        return (_unpermuted(qr_cotangent(q, r, dq, dr), pivoting, order),)

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
        dq, dr = qr_tangent(q, r, _qr_inputs(tangents[0], pivoting, order[0] if order else None))
    if mode == "r":
        rows = np.shape(result[0])[-2] - np.shape(dr)[-2]
        dr = np.concatenate([dr, np.zeros_like(dr, shape=np.shape(dr)[:-2] + (rows,)
                                               + np.shape(dr)[-1:])], axis=-2)
        return result, (dr,) + (None,) * (len(result) - 1)
    return result, (dq, dr) + (None,) * (len(result) - 2)


# ----------------------------------------------------------------------------------------------
# The matrix logarithm


def _real_logarithm(a):
    _require_matrix("logm", a)
    result = logm(a)
    if np.iscomplexobj(result):
        raise UnsupportedOperationError(
            "scipy.linalg.logm of a matrix whose principal logarithm is complex (a negative "
            "real eigenvalue): mutad differentiates real arrays only.")
    return result


def _logm_frechet(a, e):
    """The Fréchet derivative L(A, E) of the principal logarithm, the corner of
    logm([[A, E], [0, A]]) = [[log A, L(A, E)], [0, log A]] (Higham, Functions of Matrices,
    2008, §3.2). L is linear in E, so E is scaled to A's norm first (as Higham advises for
    block evaluations, which lose accuracy when the corner dominates): L(A, tE)/t. Computed
    with logm itself it dispatches, so an outer differentiation differentiates it again."""
    n = np.shape(a)[-1]
    size = np.linalg.norm(e, 1)
    if not size:  # (a decision on the cotangent: 0 gives 0)
        return np.zeros_like(e) + 0.0 * a
    scale = np.linalg.norm(a, 1) / size
    block = np.concatenate([np.concatenate([a, scale * e], axis=-1),
                            np.concatenate([np.zeros_like(a), a], axis=-1)], axis=-2)
    return _real_logarithm(block)[..., :n, n:] / scale


@logm.rule
def _logm_rule(A, *settings):
    """log A, principal, of a real matrix whose logarithm is real. The Fréchet derivative of a
    primary matrix function with a real power series has adjoint L(Aᵀ, ·) (as for expm:
    <Ȳ, L(A, E)> = <L(Aᵀ, Ȳ), E>), so Ā = L(Aᵀ, Ȳ)."""
    result = logm(A, *settings)
    _real_logarithm(A)
    if type(result) is tuple:  # disp=False: (log A, its error estimate, without a derivative)
        return result, lambda dys: (_logm_frechet(transpose(A), dys[0]),)
    return result, lambda dy: (_logm_frechet(transpose(A), dy),)


@logm.jvp_rule
def _logm_jvp(tangents, A, *settings):
    result = logm(A, *settings)
    tangent = _logm_frechet(A, tangents[0])
    if type(result) is tuple:
        return result, (tangent, None)
    return result, tangent


# ----------------------------------------------------------------------------------------------
# lu: the factors of lu_factor, unpacked


def _lu_order(p, p_indices):
    """The rows of A that L U holds, in order: A[order] = L U, from SciPy's P (A = P L U) or
    its row indices (A = L[perm] U, so order = argsort(perm))."""
    return np.argsort(p) if p_indices else np.argmax(p, axis=0)


@lu.rule
def _lu_rule(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """A = P L U of a square A (the row order a decision, kept): lu_factor's rule on the
    packed factors (Giles 2008; as in JAX's lu pullback)."""
    empty = _require_square_or_empty(a, "lu")
    result = lu(a, permute_l, False, check_finite, p_indices)
    if permute_l:  # (P L, U): P from the factorisation SciPy makes of the same matrix
        p, lower, upper = lu(a, False, False, check_finite, False)
        order = _lu_order(p, False)
    else:
        p, lower, upper = result
        order = _lu_order(p, p_indices)
    packed = np.tril(lower, -1) + upper

    def back(dys):
        if empty:
            return (np.zeros_like(a),)
        if permute_l:  # (P L)‾ = P L̄
            dlower, dupper = dys[0][order], dys[1]
        else:
            dlower, dupper = dys[1], dys[2]
        return (_lu_factor_cotangent(packed, order, np.tril(dlower, -1) + np.triu(dupper)),)

    return result, back


@lu.jvp_rule
def _lu_jvp(tangents, a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    empty = _require_square_or_empty(a, "lu")
    result = lu(a, permute_l, False, check_finite, p_indices)
    p, lower, upper = lu(a, False, False, check_finite, False) if permute_l else result
    order = _lu_order(p, p_indices and not permute_l)
    if empty:
        dlu = np.zeros_like(upper)
    else:
        dlu = lu_tangent(np.tril(lower, -1) + upper, tangents[0][order], solve_triangular)
    dlower, dupper = np.tril(dlu, -1), np.triu(dlu)
    if permute_l:
        return result, (dlower[np.argsort(order)], dupper)
    return result, (None, dlower, dupper)


# ----------------------------------------------------------------------------------------------
# pinv and lstsq: SciPy's values, np.linalg's rules (Golub & Pereyra 1973, Thm. 4.3, for A of
# locally constant rank) at NumPy's factors of the same matrix, with SciPy's cutoff of the
# singular values. Those rules compute with calls that dispatch, so they differentiate again.


def _singular_values(a):
    return np.linalg.svd(a, compute_uv=False)


def _pinv_relative_cutoff(a, atol, rtol):
    """SciPy's cutoff atol + rtol σ_max of the singular values pinv keeps, relative to σ_max:
    np.linalg.pinv's rcond for the same rank."""
    m, n = np.shape(a)[-2:]
    s = _singular_values(a)
    largest = np.max(s, initial=0.0)
    rtol = max(m, n) * np.finfo(float).eps if rtol is None else rtol
    if not largest:
        return rtol
    return ((0.0 if atol is None else atol) + largest * rtol) / largest


def _real_matrix(name, a):
    _require_matrix(name, a)
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
    """SciPy's lstsq, refusing a matrix whose rank np.linalg.lstsq's rule does not share."""
    _real_matrix("lstsq", a)
    if np.iscomplexobj(b):
        raise UnsupportedOperationError("scipy.linalg.lstsq of complex values: mutad "
                                        "differentiates real ones here; np.linalg.lstsq "
                                        "differentiates complex ones.")
    result = lstsq(a, b, cond, False, False, check_finite, lapack_driver)
    # The np.linalg rule's solution is pinv(A) b, with pinv's default cutoff: its rank must be
    # SciPy's, else its derivative is another function's.
    s = _singular_values(a)
    rank = np.sum(s > max(np.shape(a)) * np.finfo(float).eps * np.max(s, initial=0.0))
    if rank != result[2]:
        raise UnsupportedOperationError(
            f"scipy.linalg.lstsq: a has rank {result[2]} at SciPy's cutoff (cond={cond!r}) and "
            f"{rank} at pinv's, so its solution's derivative is not determined here. Drop the "
            "directions of a's smallest singular values first (a truncated SVD).")
    return result


@lstsq.rule
def _lstsq_rule(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
                lapack_driver=None):
    result = _scipy_lstsq(a, b, cond, check_finite, lapack_driver)
    numpy_result, numpy_back = RULES[np.linalg.lstsq].reverse(a, b)

    def back(dys):
        dx, dresidues, _, ds = dys
        # SciPy gives a 1-d b's residue as a number, NumPy as an array of one
        dresidues = np.reshape(dresidues, np.shape(numpy_result[1]))
        return numpy_back((dx, dresidues, None, ds))

    return result, back


@lstsq.jvp_rule
def _lstsq_jvp(tangents, a, b, cond=None, overwrite_a=False, overwrite_b=False,
               check_finite=True, lapack_driver=None):
    result = _scipy_lstsq(a, b, cond, check_finite, lapack_driver)
    _, (dx, dresidues, _, ds) = RULES[np.linalg.lstsq].forward(tangents[:2], a, b)
    if dresidues is not None:
        dresidues = np.reshape(dresidues, np.shape(result[1]))
    return result, (dx, dresidues, None, ds)


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
        sums = -_diagonal_sums(_times_transpose(db, x))
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
        rhs = -(dt @ x) if rhs is None else rhs - dt @ x
    if rhs is None:
        return x, None
    return x, solve_toeplitz((c, r) if given else c, rhs, check_finite=False)


# ----------------------------------------------------------------------------------------------
# eig and eigvals: SciPy's values (complex eigenvalues always, real eigenvectors where every
# eigenvalue is real), np.linalg.eig's formulas (Giles 2008, §3.1) on SciPy's own eigenpairs
# (its phases of complex eigenvectors: LAPACK's geev, as NumPy's), and np.linalg.eigvals's rule
# at NumPy's eigenvalues of the same matrix, matched to SciPy's.

def _standard_eig(name, a, b, homogeneous_eigvals, left=False, right=True):
    _require_matrix(name, a)
    if b is not None or homogeneous_eigvals or left or not right:
        raise UnsupportedOperationError(
            f"scipy.linalg.{name}: mutad differentiates the standard eigenproblem's eigenvalues "
            "and right eigenvectors (b=None, left=False, homogeneous_eigvals=False). For a "
            "generalized one with b invertible, take the eigenpairs of solve(b, a).")


def _as_scipy_tangent(t, like):
    """A tangent of SciPy's eigenvalues, complex as they are (the real ones too)."""
    return t + 0j if np.iscomplexobj(like) and not np.iscomplexobj(t) else t


@eig.rule
def _eig_rule(a, b=None, left=False, right=True, overwrite_a=False, overwrite_b=False,
              check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eig", a, b, homogeneous_eigvals, left, right)
    w, v = result = eig(a, check_finite=check_finite)
    equal = equal_pairs(w)  # now: back may see w restored up to rounding

    def back(dys):
        # Real eigenvalues (zero imaginary parts) make np.linalg.eig's formulas' couplings
        # complex with zero imaginary parts; the core takes a real matrix's real part.
        return (eig_cotangent(w, v, dys[0], dys[1], equal),)

    return result, back


@eig.jvp_rule
def _eig_jvp(tangents, a, b=None, left=False, right=True, overwrite_a=False,
             overwrite_b=False, check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eig", a, b, homogeneous_eigvals, left, right)
    w, v = eig(a, check_finite=check_finite)
    dw, dv = eig_tangent(w, v, tangents[0])
    return (w, v), (_as_scipy_tangent(dw, w), dv if np.iscomplexobj(v) else np.real(dv))


def _as_numpy_cotangent(d, like):
    """A cotangent of SciPy's complex eigenvalues for NumPy's, which are real where all are:
    real eigenvalues of a real matrix stay real nearby, so the imaginary part reads nothing."""
    return np.real(d) if not np.iscomplexobj(like) else d


@eigvals.rule
def _eigvals_rule(a, b=None, overwrite_a=False, check_finite=True, homogeneous_eigvals=False):
    _standard_eig("eigvals", a, b, homogeneous_eigvals)
    w = eigvals(a, check_finite=check_finite)
    numpy_w, back = RULES[np.linalg.eigvals].reverse(a)
    return w, lambda dw: back(_as_numpy_cotangent(dw, numpy_w))


@eigvals.jvp_rule
def _eigvals_jvp(tangents, a, b=None, overwrite_a=False, check_finite=True,
                 homogeneous_eigvals=False):
    _standard_eig("eigvals", a, b, homogeneous_eigvals)
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


def _schur_refusal(a, *args, **kwargs):
    if not carries_derivative(a):  # a constant (mutad.stop_gradient): SciPy's own
        return _schur.original(a, *args, **kwargs)
    raise UnsupportedOperationError(
        "scipy.linalg.schur of a differentiated matrix: mutad has no derivative of the Schur "
        "form (its vectors are not unique where eigenvalues are repeated or complex pairs are "
        "ordered). Differentiate what you need of it by eig or eigvals (eigenvalues), eigh (a "
        "symmetric matrix: its Schur form), or pass the matrix through mutad.stop_gradient.")


_schur = StandIn(_linalg.schur, _schur_refusal)


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
