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
Anal. Appl., 2009) for expm.

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

import numpy as np
import scipy.linalg as _linalg

from ..errors import UnsupportedOperationError
from ..rules._helpers import require_symmetric, symmetric_part, transpose
from ..rules.factorizations import (cholesky_cotangent, cholesky_tangent, lu_tangent,
                                    lu_tangent_times, permutation, unit_lower_and_upper)
from ..views import wrapped
from ._adjoints import scipy_adjoint

cholesky, cho_factor, cho_solve, solve_triangular, lu_factor, lu_solve, solve, inv, expm = map(
    scipy_adjoint, (_linalg.cholesky, _linalg.cho_factor, _linalg.cho_solve,
                    _linalg.solve_triangular, _linalg.lu_factor, _linalg.lu_solve,
                    _linalg.solve, _linalg.inv, _linalg.expm))
solve_sylvester, sqrtm = map(scipy_adjoint, (_linalg.solve_sylvester, _linalg.sqrtm))

__all__ = ["cho_factor", "cho_solve", "cholesky", "expm", "inv", "lu_factor", "lu_solve",
           "solve", "solve_sylvester", "solve_triangular", "sqrtm"]


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


def _require_square_or_empty(a):
    """The factors of a rectangular matrix are differentiated only when empty (no entry)."""
    _require_matrix("lu_factor", a)
    if a.shape[0] != a.shape[1] and a.size:
        raise UnsupportedOperationError(
            f"mutad.scipy.linalg.lu_factor of a {a.shape[0]}x{a.shape[1]} matrix: mutad "
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
