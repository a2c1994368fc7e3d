"""The in-place routines of ``mutad.linalg`` (its public names; see there for what each does):
LAPACK-style factorisations and solves that overwrite their arguments, each an
``inplace_adjoint`` whose reverse pass restores its inputs by inversion instead of copying them,
with forward rules that update tangents in place beside the primals, and under nested reverse
mode an equivalent written with calls that dispatch (``factorizations``' wrappers).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from scipy.linalg import get_blas_funcs, get_lapack_funcs

from ..core.devices import device_of
from ..custom import inplace_adjoint
from ..core.errors import (ComplexInputError, InvalidArgumentError, NotPositiveDefiniteError,
                          UnsupportedArrayError)
from ..engines.reverse import Traced
from ..core.views import may_overlap, memory, wrapped
from ._common import times_transpose
from . import factorizations as dispatching
from .factorizations import (cholesky_tangent, lu_tangent, lu_tangent_times, permutation,
                             solve_lower)

# In the order of the module (and of its documentation).
__all__ = ["Cholesky", "cholesky_", "solve_triangular_", "LU", "lu_factor_", "ldiv_"]

BLOCK = 64
"""Rows per block when a factor is multiplied back into the matrix it came from."""


# ----------------------------------------------------------------------------------------------
# Memory layout and triangular products, in place


def _refuse_complex(call, *arrays):
    """These routines are real only (their LAPACK calls, in-place restorations and rules are
    written for real matrices): refuse complex values, plain or traced, before anything is
    overwritten, rather than drop imaginary parts or give a wrong gradient."""
    if any(device_of(x) is not None for x in arrays):
        raise UnsupportedArrayError(
            f"{call} was given a device array (CuPy's): mutad.linalg's in-place routines call "
            "the host's LAPACK on NumPy arrays. On a device use the out-of-place functions, "
            "which mutad differentiates there: np.linalg.cholesky, np.linalg.solve, "
            "np.linalg.inv (cupy.linalg), or cupyx.scipy.linalg.solve_triangular.")
    if any(getattr(getattr(x, "dtype", None), "kind", None) == "c" for x in arrays):
        raise ComplexInputError(
            f"{call} was given complex values: mutad.linalg's in-place routines work on real "
            "matrices only. For complex matrices use NumPy's out-of-place functions, which "
            "mutad differentiates for complex values: np.linalg.cholesky (Hermitian positive "
            "definite), np.linalg.solve (for ldiv_ and solve_triangular_ too), np.linalg.inv; "
            "or work with the real and imaginary parts as real arrays.")


def _refuse_integer(call, b):
    """Under a differentiation, refuse a right-hand side of integers or booleans: the solution,
    cast into it, is truncated, so the reverse pass cannot restore ``b`` from it (nor give it a
    cotangent). Outside one, ``b`` takes the cast solution as NumPy's ``b[...] = x`` would."""
    if b.dtype.kind not in "fc":
        raise UnsupportedArrayError(
            f"{call} was given a right-hand side b of dtype {b.dtype} beside differentiated "
            "values: the solution cast into it is truncated, so the reverse pass cannot restore "
            "b. Pass a float b (b.astype(float)) and cast the solution afterwards.")


def _factor_array(F):
    """The array behind a factor ``ldiv_`` takes (or the matrix itself)."""
    if isinstance(F, Cholesky):
        return F.L
    if isinstance(F, LU):
        return F.packed
    return F


def _square(name, A):
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.dtype.kind != "f":
        raise InvalidArgumentError(f"{name} needs a square float matrix, not {A.dtype} of shape {A.shape}.")
    if not (A.flags.c_contiguous or A.flags.f_contiguous) or not A.flags.writeable:
        raise InvalidArgumentError(f"{name} works in place on a contiguous, writable matrix; pass "
                                   "np.ascontiguousarray(A) (and keep the result) instead.")


def _fortran(M):
    """A Fortran-ordered view of square ``M``, and whether it is ``M`` itself (else ``M.T``)."""
    if M.flags.f_contiguous:
        return M, True
    if M.flags.c_contiguous:
        return M.T, False
    M = np.asfortranarray(M)  # a strided matrix that is only read: a contiguous copy serves
    return M, True


def _triangular_(T, lower, x, transpose=False, solve=True, unit=False):
    """``x ← op(T)⁻¹ x`` (``solve``) or ``x ← op(T) x``, in place; ``op(T)`` is ``Tᵀ`` when
    ``transpose``. Only the triangle of ``T`` named by ``lower`` is read; ``unit`` takes its
    diagonal as ones. ``x`` is a vector or a matrix of right-hand sides."""
    F, same = _fortran(T)
    # In the Fortran view, T's triangle and op(T) both flip when the view is Tᵀ.
    lower = lower if same else not lower
    transpose = transpose if same else not transpose
    if x.ndim == 1:
        routine = get_blas_funcs("trsv" if solve else "trmv", (F, x))
        result = routine(F, x, overwrite_x=1, lower=lower, trans=int(transpose), diag=int(unit))
    else:
        routine = get_blas_funcs("trsm" if solve else "trmm", (F, x))
        if x.flags.f_contiguous:
            result = routine(1.0, F, x, overwrite_b=1, side=0, lower=lower,
                             trans_a=int(transpose), diag=int(unit))
        else:
            # op(T)⁻¹ X = Y  ⟺  Yᵀ = Xᵀ op(T)⁻ᵀ: a right-side product on Xᵀ, Fortran-ordered.
            target = x.T if x.flags.c_contiguous else np.asfortranarray(x.T)
            result = routine(1.0, F, target, overwrite_b=1, side=1, lower=lower,
                             trans_a=int(not transpose), diag=int(unit)).T
    if not np.shares_memory(result, x):
        x[...] = result  # the wrapper copied (dtype or layout): keep the call in place anyway


def _triangular_condition(T, lower, unit=False):
    """An estimate of cond(T) in the 1- and ∞-norms multiplied (LAPACK's trcon, O(n²)):
    for ``T = L`` of a Cholesky factor it bounds cond(L Lᵀ) ≤ cond₁(L) cond∞(L)."""
    F, same = _fortran(T)
    trcon = get_lapack_funcs("trcon", (F,))
    uplo = "L" if lower == same else "U"
    growth = 1.0
    for norm in ("1", "I"):
        rcond, _ = trcon(F, norm=norm, uplo=uplo, diag="U" if unit else "N")
        growth /= max(rcond, 1e-300)
    return growth


@functools.lru_cache(maxsize=8)
def _triangle_mask(n, lower, diagonal):
    """Where a triangular matrix's free entries are: a boolean n × n mask (cached)."""
    mask = np.tri(n, dtype=bool) if lower else ~np.tri(n, k=-1, dtype=bool)
    if not diagonal:
        mask[np.diag_indices(n)] = False
    return mask


def _subtract_product(M, left, right, lower=None, diagonal=True):
    """``M -= left @ rightᵀ`` where ``left`` and ``right`` are vectors (an outer product) or
    stacks of columns; only on one triangle of ``M`` when ``lower`` is given. One matrix
    product and one masked subtraction: two passes over ``M``'s size."""
    if left.ndim == 1:
        left, right = left[:, None], right[:, None]
    product = left @ right.T
    where = True if lower is None else _triangle_mask(M.shape[0], lower, diagonal)
    np.subtract(M, product, out=M, where=where)


def _zero_strict_upper(A):
    for i in range(A.shape[0] - 1):
        A[i, i + 1:] = 0.0


def _mirror_strict_lower(A):
    """Copy the strict upper triangle onto the strict lower one."""
    for i in range(1, A.shape[0]):
        A[i, :i] = A[:i, i]


def _times_own_transpose_(A):
    """``A ← L Lᵀ`` in place, ``L`` the lower triangle of ``A`` (its upper triangle zero).

    Block rows are computed from the bottom up: the rows of ``L Lᵀ`` up to the diagonal need
    only rows of ``L`` at or above them, which are not overwritten yet. The strict upper
    triangle is mirrored at the end. Extra memory: one block of rows.
    """
    n = A.shape[0]
    for stop in range(n, 0, -BLOCK):
        start = max(stop - BLOCK, 0)
        A[start:stop, :stop] = A[start:stop, :stop] @ A[:stop, :stop].T
    for stop in range(n, 0, -BLOCK):
        start = max(stop - BLOCK, 0)
        A[start:stop, stop:] = A[stop:, start:stop].T


def _unreplayed(factor):
    """A factor's growth is a number read from its values' memory, where no operation a replay
    redoes computes it, and it decides how each solve's write is undone: a call recorded for
    ``replay=True`` is traced instead (a replay would take the recorded call's number, and
    undo by inversion a solve tracing saves, its gradient far off for an ill-conditioned
    factor)."""
    if type(factor) is Traced and factor.tape.recorder is not None:
        factor.tape.recorder.refuse("the growth of a factor of mutad.linalg (ldiv_), a number "
                                    "read from its values")


# ----------------------------------------------------------------------------------------------
# Cholesky


class Cholesky:
    """The Cholesky factor made by ``cholesky_``: ``L`` is the lower triangle of the matrix it
    overwrote (upper triangle zero), and shares its memory."""

    __slots__ = ("L", "_growth")

    L: NDArray[np.floating[Any]]

    def __init__(self, L: NDArray[np.floating[Any]]) -> None:
        self.L = L
        self._growth: float | None = None

    def __repr__(self) -> str:
        return f"Cholesky(L={self.L!r})"

    @property
    def growth(self) -> float:
        """How much undoing a solve with this factor can amplify rounding errors: an estimate
        of the condition number of ``L Lᵀ`` (computed once)."""
        if self._growth is None:
            _unreplayed(self.L)
            self._growth = _triangular_condition(memory(self.L), lower=True)
        return self._growth


@inplace_adjoint(writes=("A",))
def _cholesky_(A):
    _square("cholesky_", A)
    F, same = _fortran(A)
    potrf = get_lapack_funcs("potrf", (F,))
    diagonal = np.diagonal(A).copy()  # LAPACK overwrites it before it can fail
    factor, info = potrf(F, lower=int(same), overwrite_a=1, clean=0)
    if info > 0:
        # The strict upper triangle was not touched: for a symmetric A it is the lower one.
        _mirror_strict_lower(A)
        np.fill_diagonal(A, diagonal)
        raise NotPositiveDefiniteError(
            f"cholesky_: the matrix is not positive definite (leading minor of order {info}); "
            "it was left as it was.")
    if not np.shares_memory(factor, A):
        A[...] = factor if same else factor.T
    _zero_strict_upper(A)
    return A


@_cholesky_.rule
def _cholesky_rule(A):
    _cholesky_(A)

    def back(dA):
        # dA holds the cotangent of L (A's lower triangle; the zeroed upper one is a constant).
        # Murray 2016, "Differentiation of the Cholesky decomposition" (arXiv:1602.07527),
        # eq. (10), symmetrised as PyTorch and JAX do: P = Φ(Lᵀ L̄), S = L⁻ᵀ P L⁻¹,
        # Ā = (S + Sᵀ)/2, Φ taking the lower triangle with its diagonal halved.
        P = np.tril(A.T @ np.tril(dA))
        P[np.diag_indices_from(P)] *= 0.5
        _triangular_(A, True, P, transpose=True)     # P ← L⁻ᵀ P
        _triangular_(A, True, P.T, transpose=True)   # P ← P L⁻¹, through Pᵀ ← L⁻ᵀ Pᵀ
        np.add(P, P.T, out=dA)
        dA *= 0.5
        _times_own_transpose_(A)                    # restore A = L Lᵀ: no n × n copy kept

    return back


@_cholesky_.jvp_rule
def _cholesky_jvp(tangents, A):
    # A's tangent becomes L's, dL = L Φ(L⁻¹ dA L⁻ᵀ) with dA symmetrised (Murray 2016): lower
    # triangular, as the zeroed upper triangle is a constant.
    dA = tangents[0]
    _cholesky_(A)
    dA[...] = cholesky_tangent(A, dA, solve_lower)
    return A


def cholesky_(A: NDArray[np.floating[Any]]) -> Cholesky:
    """Overwrite symmetric positive definite ``A`` with its Cholesky factor, in place.

    ``A``'s lower triangle becomes ``L`` (with ``A = L Lᵀ``) and its upper triangle zero; the
    returned :class:`Cholesky` shares ``A``'s memory. The gradient with respect to ``A`` is the
    symmetric one (the derivative along symmetric perturbations), as in PyTorch and JAX. The
    reverse pass recomputes ``A = L Lᵀ`` instead of keeping a copy. A matrix that is not
    positive definite raises ``NotPositiveDefiniteError`` and is left as it was.

    >>> import numpy as np
    >>> A = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> cholesky_(A).L.tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    _refuse_complex("cholesky_", A)
    if _nested(A):
        return Cholesky(_cholesky_nested(A))
    return Cholesky(_cholesky_(A))


@inplace_adjoint(writes=("b",))
def _cholesky_solve_(L, b, growth=1.0):
    _triangular_(L, True, b)                  # L y = b
    _triangular_(L, True, b, transpose=True)  # Lᵀ x = y
    return b


@_cholesky_solve_.rule(growth=lambda L, b, growth=1.0: growth)
def _cholesky_solve_rule(L, b, growth=1.0):
    _refuse_integer("ldiv_(F, b)", b)
    if np.may_share_memory(L, b):
        raise InvalidArgumentError("ldiv_(F, b): b shares memory with the factor; pass a separate b.")
    _cholesky_solve_(L, b)

    def back(dL, db, *_):
        x = b  # the solution, until b is restored below
        _cholesky_solve_(L, db)  # b̄ = A⁻¹ x̄ (A symmetric), in db's own memory
        if dL is not None:
            # Ā = -b̄ xᵀ and A = L Lᵀ, so L̄ = (Ā + Āᵀ) L = -(b̄ (Lᵀ x)ᵀ + x (Lᵀ b̄)ᵀ), lower part.
            u, w = x.copy(), db.copy()
            _triangular_(L, True, u, transpose=True, solve=False)
            _triangular_(L, True, w, transpose=True, solve=False)
            _subtract_product(dL, np.column_stack([db, x]), np.column_stack([u, w]), lower=True)
        _triangular_(L, True, b, transpose=True, solve=False)  # restore b = L (Lᵀ x)
        _triangular_(L, True, b, solve=False)

    return back


@_cholesky_solve_.jvp_rule
def _cholesky_solve_jvp(tangents, L, b, growth=1.0):
    """b ← x = A⁻¹ b and its tangent db ← A⁻¹ (db - dA x), both in place. ``L`` is the factor's
    matrix ``F.L`` and ``tangents[0]`` its tangent: that of the memory ``cholesky_`` overwrote,
    dL, or None for a constant factor."""
    _refuse_integer("ldiv_(F, b)", b)
    dL, db = tangents[:2]
    _cholesky_solve_(L, b, growth)
    if dL is not None:
        # dx = A⁻¹ (db - dA x) (Giles 2008, §3.1), A = L Lᵀ: dA x = dL (Lᵀ x) + L (dLᵀ x). The
        # solve reads the lower triangles only, so only theirs count.
        L, dL = np.tril(L), np.tril(dL)
        db -= dL @ (L.T @ b) + L @ (dL.T @ b)
    _cholesky_solve_(L, db, growth)  # in db's own memory, as b's solve is in b's
    return b


# ----------------------------------------------------------------------------------------------
# Triangular solves


def _transposes(trans):
    if trans in (0, "N", "n"):
        return False
    if trans in (1, 2, "T", "t", "C", "c"):
        return True
    raise InvalidArgumentError(f"trans={trans!r}: use 0/'N' or 1/'T' (2/'C' is the same for real matrices).")


@inplace_adjoint(writes=("b",))
def _solve_triangular_(T, b, lower, transpose, unit):
    _triangular_(T, lower, b, transpose=transpose, unit=unit)
    return b


@_solve_triangular_.rule(growth=lambda T, b, lower, transpose, unit:
                         _triangular_condition(T, lower, unit) ** 0.5)
def _solve_triangular_rule(T, b, lower, transpose, unit):
    _refuse_integer("solve_triangular_(T, b)", b)
    if np.may_share_memory(T, b):
        raise InvalidArgumentError("solve_triangular_(T, b): b shares memory with T; pass a separate b.")
    _solve_triangular_(T, b, lower, transpose, unit)

    def back(dT, db, *_):
        x = b
        _triangular_(T, lower, db, transpose=not transpose, unit=unit)  # b̄ = op(T)⁻ᵀ x̄
        if dT is not None:
            # op(T) x = b: op(T)‾ = -b̄ xᵀ, read back through op onto the stored triangle only.
            left, right = (x, db) if transpose else (db, x)
            _subtract_product(dT, left, right, lower=lower, diagonal=not unit)
        _triangular_(T, lower, b, transpose=transpose, solve=False, unit=unit)  # b = op(T) x

    return back


@_solve_triangular_.jvp_rule
def _solve_triangular_jvp(tangents, T, b, lower, transpose, unit):
    _refuse_integer("solve_triangular_(T, b)", b)
    dT, db = tangents[:2]
    _solve_triangular_(T, b, lower, transpose, unit)
    if dT is not None:
        # dx = op(T)⁻¹ (db - op(dT) x), dT on the entries the solve reads (Giles 2008, §3.1).
        offset = 1 if unit else 0
        dT = np.tril(dT, -offset) if lower else np.triu(dT, offset)
        db -= (dT.T if transpose else dT) @ b
    _solve_triangular_(T, db, lower, transpose, unit)
    return b


def solve_triangular_(T: NDArray[np.floating[Any]], b: NDArray[np.floating[Any]],
                      lower: bool = False, trans: Literal[0, 1, 2, "N", "T", "C"] = 0,
                      unit_diagonal: bool = False) -> NDArray[np.floating[Any]]:
    """Overwrite ``b`` with ``op(T)⁻¹ b`` in place (``op(T) = Tᵀ`` for ``trans=1``), as
    ``scipy.linalg.solve_triangular`` computes it. Only the triangle named by ``lower`` is read.
    The reverse pass restores ``b = op(T) x`` by a triangular product.

    >>> import numpy as np
    >>> b = np.array([2.0, 5.0])
    >>> solve_triangular_(np.array([[2.0, 0.0], [1.0, 2.0]]), b, lower=True).tolist()
    [1.0, 2.0]
    """
    _refuse_complex("solve_triangular_", T, b)
    if _nested(b):
        return _solve_triangular_nested(T, b, lower, _transposes(trans), unit_diagonal)
    return _solve_triangular_(T, b, lower, _transposes(trans), unit_diagonal)


# ----------------------------------------------------------------------------------------------
# General matrices: LU


def _swap_rows(x, pivots, reverse):
    """Apply LAPACK's row interchanges (row i with row pivots[i], in order) to ``x``."""
    order = range(len(pivots) - 1, -1, -1) if reverse else range(len(pivots))
    for i in order:
        j = pivots[i]
        if j != i:
            x[[i, j]] = x[[j, i]]


class LU:
    """The LU factor made by ``lu_factor_``: ``packed`` (the matrix it overwrote, sharing its
    memory) holds ``L`` below the diagonal (unit diagonal implied) and ``U`` on and above it,
    with ``M = P L U`` for ``M`` the Fortran-ordered view of the matrix LAPACK factored: the
    matrix itself, or for a C-ordered one its transpose."""

    __slots__ = ("packed", "pivots", "norm", "_growth")

    packed: NDArray[np.floating[Any]]
    pivots: NDArray[np.integer[Any]]
    norm: float

    def __init__(self, packed: NDArray[np.floating[Any]], pivots: NDArray[np.integer[Any]],
                 norm: float) -> None:
        self.packed = packed
        self.pivots = pivots
        self.norm = norm  # the 1-norm of the factored matrix, for its condition number
        self._growth: float | None = None

    @property
    def growth(self) -> float:
        """How much undoing a solve with this factor can amplify rounding errors: LAPACK's
        estimate of the condition number (gecon, computed once)."""
        if self._growth is None:
            _unreplayed(self.packed)
            F, _ = _fortran(memory(self.packed))
            rcond, _ = get_lapack_funcs("gecon", (F,))(F, self.norm, norm="1")
            self._growth = 1.0 / max(rcond, 1e-300)
        return self._growth


@inplace_adjoint(writes=("A",))
def _lu_factor_(A):
    _square("lu_factor_", A)
    F, same = _fortran(A)
    norm = float(np.abs(F).sum(axis=0).max())
    getrf = get_lapack_funcs("getrf", (F,))
    packed, piv, info = getrf(F, overwrite_a=1)
    if info < 0:
        raise InvalidArgumentError(f"lu_factor_: LAPACK rejected argument {-info}.")
    if not np.shares_memory(packed, A):
        A[...] = packed if same else packed.T
    return A, piv, norm


def _lu_parts(M):
    return np.tril(M, -1) + np.eye(M.shape[0], dtype=M.dtype), np.triu(M)


def _multiply_packed_lu_(M):
    """``M ← L U`` in place, ``L`` (unit lower) and ``U`` packed in ``M``.

    Entry (i, j) of ``L U`` needs only entries whose smaller index is below min(i, j), so the
    rows and columns are rebuilt from the last one back to the first.
    """
    for m in range(M.shape[0] - 1, -1, -1):
        M[m + 1:, m] = M[m + 1:, :m] @ M[:m, m] + M[m + 1:, m] * M[m, m]
        M[m, m:] += M[m, :m] @ M[:m, m:]


@_lu_factor_.rule
def _lu_factor_rule(A):
    _, pivots, _ = _lu_factor_(A)
    F, same = _fortran(A)

    def back(dA):
        dF = dA if same else dA.T
        # M = P L U. With L̄ (strictly lower) and Ū (upper) read from the packed cotangent:
        # M̄ = P L⁻ᵀ [tril(Lᵀ L̄, -1) + triu(Ū Uᵀ)] U⁻ᵀ (the transpose of the LU
        # differential dM = P (dL U + L dU); e.g. de Hoog, Anderssen & Lukas 2011).
        L, U = _lu_parts(F)
        X = np.tril(L.T @ np.tril(dF, -1), -1) + np.triu(np.triu(dF) @ U.T)
        X = scipy.linalg.solve_triangular(L, X, lower=True, trans=1, unit_diagonal=True)
        X = scipy.linalg.solve_triangular(U, X.T, lower=False, trans=0).T  # X ← X U⁻ᵀ
        _swap_rows(X, pivots, reverse=True)
        dF[...] = X
        _multiply_packed_lu_(F)                    # restore M = P L U in place
        _swap_rows(F, pivots, reverse=True)

    return back


@_lu_factor_.jvp_rule
def _lu_factor_jvp(tangents, A):
    # A's tangent becomes that of the packed L and U, laid out as they are: the factored M is
    # the Fortran-ordered view F of A, with M[order] = L U.
    dA = tangents[0]
    result = _lu_factor_(A)
    F, same = _fortran(A)
    dF = dA if same else dA.T
    dF[...] = lu_tangent(F, dF[permutation(result[1])], dispatching.solve_triangular)
    return result


def lu_factor_(A: NDArray[np.floating[Any]]) -> LU:
    """Overwrite square ``A`` with its LU factorisation, in place; returns an :class:`LU`
    sharing ``A``'s memory, for ``ldiv_``. The reverse pass restores ``A = P L U`` by
    multiplying the factors back in place.

    >>> import numpy as np
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> F = lu_factor_(A)
    >>> ldiv_(F, np.array([5.0, 6.0])).tolist()
    [-4.0, 4.5]
    """
    _refuse_complex("lu_factor_", A)
    if _nested(A):
        return LU(*_lu_factor_nested(A))
    return LU(*_lu_factor_(A))


def _getrs(packed, pivots, b, transpose):
    """``b ← A⁻¹ b`` (``A⁻ᵀ b`` when ``transpose``) in place, for the matrix ``A`` whose LU
    factorisation ``packed`` holds."""
    F, same = _fortran(packed)
    getrs = get_lapack_funcs("getrs", (F, b))
    x, info = getrs(F, pivots, b, trans=int(transpose == same), overwrite_b=1)
    if not np.shares_memory(x, b):
        b[...] = x


@inplace_adjoint(writes=("b",))
def _lu_solve_(packed, pivots, b, growth=1.0):
    _getrs(packed, pivots, b, transpose=False)
    return b


@_lu_solve_.rule(growth=lambda packed, pivots, b, growth=1.0: growth)
def _lu_solve_rule(packed, pivots, b, growth=1.0):
    _refuse_integer("ldiv_(F, b)", b)
    if np.may_share_memory(packed, b):
        raise InvalidArgumentError("ldiv_(F, b): b shares memory with the factor; pass a separate b.")
    _lu_solve_(packed, pivots, b)
    F, same = _fortran(packed)

    def back(dpacked, _, db, *__):
        x = b
        _getrs(packed, pivots, db, transpose=True)  # b̄ = A⁻ᵀ x̄
        L, U = _lu_parts(F)
        if dpacked is not None:
            # Ā = -b̄ xᵀ; the factored M is A (or Aᵀ), M = P L U with dM = P (dL U + L dU):
            # L̄ = strict lower of Pᵀ M̄ Uᵀ, Ū = upper of Lᵀ Pᵀ M̄.
            M_bar = -times_transpose(db, x)
            if not same:
                M_bar = M_bar.T
            _swap_rows(M_bar, pivots, reverse=False)  # Pᵀ M̄
            dF = dpacked if same else dpacked.T
            dF += np.tril(M_bar @ U.T, -1) + np.triu(L.T @ M_bar)
        # restore b = A x: M x = P L U x, or Mᵀ x = Uᵀ Lᵀ Pᵀ x
        if not same:
            _swap_rows(b, pivots, reverse=False)
            b[...] = U.T @ (L.T @ b)
        else:
            b[...] = L @ (U @ b)
            _swap_rows(b, pivots, reverse=True)

    return back


@_lu_solve_.jvp_rule
def _lu_solve_jvp(tangents, packed, pivots, b, growth=1.0):
    """b ← x = A⁻¹ b and its tangent db ← A⁻¹ (db - dA x), both in place. ``packed`` is the
    factor's ``F.packed`` and ``tangents[0]`` its tangent: that of the memory ``lu_factor_``
    overwrote (dL and dU, packed as L and U are), or None for a constant factor."""
    _refuse_integer("ldiv_(F, b)", b)
    dpacked, _, db = tangents[:3]
    _lu_solve_(packed, pivots, b, growth)
    if dpacked is not None:
        # dx = A⁻¹ (db - dA x) (Giles 2008, §3.1). getrs solved with the factored M = F or,
        # for a C-ordered packed, with Mᵀ; M[order] = L U, with dL and dU packed in F's tangent.
        F, same = _fortran(packed)
        dF = dpacked if same else dpacked.T
        db -= lu_tangent_times(F, dF, permutation(pivots), b, transposed=not same)
    _lu_solve_(packed, pivots, db, growth)
    return b


# ----------------------------------------------------------------------------------------------
# Solving with a factor, or with a matrix


@inplace_adjoint(writes=("b",))
def _general_solve_(A, b):
    # Its reverse pass refactors A, so b is simply checkpointed: n numbers, against n² work.
    factor = scipy.linalg.lu_factor(A, check_finite=False)  # of a copy: A is not mutated
    x = scipy.linalg.lu_solve(factor, b, overwrite_b=True, check_finite=False)
    if not np.shares_memory(x, b):
        b[...] = x
    return b


@_general_solve_.rule(checkpoint=("b",))
def _general_solve_rule(A, b):
    _refuse_integer("ldiv_(A, b)", b)
    if np.may_share_memory(A, b):
        raise InvalidArgumentError("ldiv_(A, b): b shares memory with A; pass a separate b.")
    _general_solve_(A, b)

    def back(dA, db):
        x = b
        # Refactoring here costs time but keeps no n × n copy alive for the whole tape.
        factor = scipy.linalg.lu_factor(A, check_finite=False)
        db[...] = scipy.linalg.lu_solve(factor, db, trans=1, check_finite=False)  # b̄ = A⁻ᵀ x̄
        if dA is not None:
            _subtract_product(dA, db, x)                               # Ā = -b̄ xᵀ

    return back


@_general_solve_.jvp_rule
def _general_solve_jvp(tangents, A, b):
    _refuse_integer("ldiv_(A, b)", b)
    dA, db = tangents
    _general_solve_(A, b)
    if dA is not None:
        db -= dA @ b  # dx = A⁻¹ (db - dA x)  (Giles 2008, §3.1)
    _general_solve_(A, db)
    return b


def ldiv_(F: Cholesky | LU | NDArray[np.floating[Any]],
          b: NDArray[np.floating[Any]]) -> NDArray[np.floating[Any]]:
    """Overwrite ``b`` with ``F⁻¹ b`` in place and return it.

    ``F`` is a :class:`Cholesky` factor from ``cholesky_`` (two triangular solves), an
    :class:`LU` factor from ``lu_factor_``, or a general square matrix (solved through the LU
    factorisation of a copy; the matrix is not changed). ``b`` is a vector or a matrix of
    right-hand sides. The reverse pass restores ``b = F x`` from the solution it holds.

    >>> import numpy as np
    >>> b = np.array([1.0, 2.0])
    >>> ldiv_(np.array([[2.0, 0.0], [0.0, 4.0]]), b).tolist()
    [0.5, 0.5]
    """
    _refuse_complex("ldiv_", _factor_array(F), b)
    if _nested(b):
        return _ldiv_nested(F, b)
    if isinstance(F, Cholesky):
        return _cholesky_solve_(F.L, b, F.growth)
    if isinstance(F, LU):
        return _lu_solve_(F.packed, F.pivots, b, F.growth)
    return _general_solve_(F, b)


# ----------------------------------------------------------------------------------------------
# Under nested reverse mode


def _nested(x):
    """Whether ``x`` is traced by a reverse differentiation inside another one: its values are
    then arrays the outer one traces (see the module's docstring)."""
    return type(x) is Traced and wrapped(x.value)


def _cholesky_nested(A):
    _square("cholesky_", A)
    try:
        L = np.linalg.cholesky(A)  # reads A's lower triangle, as potrf does above; upper is 0
    except np.linalg.LinAlgError as error:
        raise NotPositiveDefiniteError(
            f"cholesky_: the matrix is not positive definite ({error}); it was left as it "
            "was.") from None
    A[...] = L
    return A


def _solve_triangular_nested(T, b, lower, transpose, unit):
    _refuse_overlap("solve_triangular_(T, b)", T, b)
    b[...] = dispatching.solve_triangular(T, b, int(transpose), lower, unit, check_finite=False)
    return b


def _lu_factor_nested(A):
    _square("lu_factor_", A)
    F, same = _fortran(A)  # factor the matrix _lu_factor_ factors, so an LU means one thing
    norm = float(np.abs(memory(F)).sum(axis=0).max())
    packed, pivots = dispatching.lu_factor(F, check_finite=False)
    F[...] = packed  # F views A's memory
    return A, pivots, norm


def _ldiv_nested(F, b):
    if isinstance(F, Cholesky):
        _refuse_overlap("ldiv_(F, b)", F.L, b)
        b[...] = dispatching.cho_solve((F.L, True), b, check_finite=False)
    elif isinstance(F, LU):
        _refuse_overlap("ldiv_(F, b)", F.packed, b)
        M, same = _fortran(F.packed)  # A = M, or Mᵀ for a C-ordered factor (see LU)
        b[...] = dispatching.lu_solve((M, F.pivots), b, 0 if same else 1, check_finite=False)
    else:
        _refuse_overlap("ldiv_(A, b)", F, b)
        b[...] = np.linalg.solve(F, b)
    return b


def _refuse_overlap(call, matrix, b):
    if may_overlap(matrix, b):
        raise InvalidArgumentError(f"{call}: b shares memory with the matrix; pass a separate b.")
