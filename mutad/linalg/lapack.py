"""SciPy's LAPACK and BLAS wrappers, as in-place code calls them: ``scipy.linalg.lapack.dgesv``,
``dgetrf``/``dgetrs``, ``dpotrf``/``dpotrs``/``dposv``, ``dtrtrs``, ``dsyev``/``dsyevd``, the
banded and tridiagonal solvers ``dgbsv``/``dgbtrf``/``dgbtrs``, ``dgtsv``/``dgttrf``/``dgttrs``,
``dpbsv``/``dpbtrf``/``dpbtrs``, ``dptsv``/``dpttrf``/``dpttrs``, the inverses ``dgetri``,
``dpotri``, ``dtrtri``,
``scipy.linalg.blas.dgemm``/``dgemv``/``daxpy``/``dscal``/``ddot``/``dnrm2``, the triangular
``dtrsm``/``dtrmm`` (their float32
``s`` twins too), and the same routines as ``get_lapack_funcs`` and ``get_blas_funcs`` return
them.

A routine's outputs are its own call on the plain values, bit for bit (its pivots and ``info``
too), and their derivatives those of the scipy.linalg functions mutad differentiates that
compute the same numbers (``scipys_value``): ``gesv``, ``getrf`` and ``getrs`` are
``lu_factor`` and ``lu_solve`` (``gesv``'s pivots must be ``lu_factor``'s, which they are but at
exact ties: otherwise refused), ``potrf``, ``potrs`` and ``posv`` ``cholesky`` and ``cho_solve``
of the symmetric matrix of the triangle they read, ``trtrs`` and BLAS's ``trsm``
``solve_triangular`` (``trmm`` a product with the triangle read), ``syev`` ``eigh`` with SciPy's driver ``"ev"`` (``syevd``: ``"evd"``; the same routine, whose
eigenvectors' signs the derivative follows), the BLAS routines products and sums. The band LU
routines (``gbtrf``, ``gttrf``, ``gbsv``, ``gtsv``) are ``lu_factor`` of the dense matrix,
whose pivots theirs are (refused at an exact tie), their factors gathered from its (each
multiplier from the row where getrf's later interchanges moved it), and ``gbtrs``/``gttrs``
``lu_solve`` of the dense factors scattered back; ``pbtrf``/``pbtrs``/``pbsv``
``cholesky_banded``, ``cho_solve_banded`` and ``solveh_banded``; ``pttrf``'s ``L D Lᵀ`` the
squared diagonal and scaled subdiagonal of ``cholesky``'s factor, ``pttrs`` ``solve`` of
``L D Lᵀ``. (Dense compositions: an ``n × n`` matrix for a band's derivative.) ``getri``,
``potri`` and ``trtri`` are ``lu_solve``, ``cho_solve`` and ``solve_triangular`` of the identity,
in the triangle the routine writes (the other, and ``trtri``'s unit diagonal, the input's). The routine's flags are SciPy's:
where ``overwrite_a=1`` (or ``axpy``'s ``y`` and ``scal``'s ``x``, which the routine always
writes) would have it write into a traced argument and its output is that memory, the result is
written into the argument, which stands for it, as in NumPy (a recorded write, undone by the
reverse pass); where it leaves its workspace there, the call is refused.

A routine mutad has no composition for, or a complex one (``zgesv``), is refused by name with
what to call instead.
"""

import functools
import inspect

import numpy as np
import scipy.linalg as _linalg
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from ..core.errors import UnsupportedFunctionError, UnsupportedOperationError
from ..core.levels import innermost
from ..core.registry import defroute
from ..rules._helpers import transpose
from ..scipy._adjoints import (Value, _overwritten, _plain, _written_as_scipy_writes,
                               reproduces, scipys_value)
from .factorizations import _cholesky_banded as cholesky_banded
from .factorizations import cho_solve, cholesky, lu_factor, lu_solve, solve_triangular
from .structured import cho_solve_banded, solveh_banded
from .spectral import eigh, eigvalsh


def _symmetric_of_triangle(a, lower):
    """The symmetric matrix of the triangle of ``a`` a routine reads (the other is not read,
    and gets no derivative)."""
    if lower:
        return np.tril(a) + transpose(np.tril(a, -1))
    return np.triu(a) + transpose(np.triu(a, 1))


def _same_pivots(name, piv, composed):
    if not np.array_equal(piv, _plain(composed)):
        raise UnsupportedOperationError(
            f"scipy.linalg.lapack {name} chose other pivots than lu_factor on these values (a "
            "tie between candidate pivots), so mutad has no derivative of its factors. Call "
            "scipy.linalg.lu_factor and lu_solve instead.")


def _gesv(values, a, b, overwrite_a=0, overwrite_b=0):
    lu, piv = lu_factor(a, check_finite=False)
    _same_pivots("gesv", values[1], piv)
    return lu, None, lu_solve((lu, piv), b, check_finite=False), None


def _getrf(values, a, overwrite_a=0):
    lu, piv = lu_factor(a, check_finite=False)
    _same_pivots("getrf", values[1], piv)
    return lu, None, None


def _getrs(values, lu, piv, b, trans=0, overwrite_b=0):
    return lu_solve((lu, _plain(piv)), b, trans, check_finite=False), None


def _potrf(values, a, lower=0, clean=1, overwrite_a=0):
    c = cholesky(_symmetric_of_triangle(a, lower), lower=bool(lower), check_finite=False)
    if not clean:  # (the triangle it does not read left as it was)
        c = c + (np.triu(a, 1) if lower else np.tril(a, -1))
    return c, None


def _potrs(values, c, b, lower=0, overwrite_b=0):
    factor = np.tril(c) if lower else np.triu(c)
    return cho_solve((factor, bool(lower)), b, check_finite=False), None


def _posv(values, a, b, lower=0, overwrite_a=0, overwrite_b=0):
    c, _ = _potrf(values, a, lower, 0)
    return c, _potrs(values, c, b, lower)[0], None


def _trtrs(values, a, b, lower=0, trans=0, unitdiag=0, lda=None, overwrite_b=0):
    return solve_triangular(a, b, trans, bool(lower), bool(unitdiag), check_finite=False), None


def _syev(values, a, compute_v=1, lower=0, lwork=None, overwrite_a=0):
    symmetric = _symmetric_of_triangle(a, lower)
    if not compute_v:
        return eigvalsh(symmetric, lower=bool(lower), driver="ev", check_finite=False), \
            None, None
    w, v = eigh(symmetric, lower=bool(lower), driver="ev", check_finite=False)
    if not np.array_equal(np.sign(_plain(v)), np.sign(values[1])):
        raise UnsupportedOperationError(
            "scipy.linalg.lapack syev's eigenvectors have other signs than eigh(driver='ev') "
            "on these values. Call scipy.linalg.eigh instead.")
    return w, v, None


def _reproduced(name, value, composition, instead):
    """``composition``, which must reproduce SciPy's ``value`` (a guard: never the derivative
    of other numbers than the routine's)."""
    if not reproduces(value, composition):
        raise UnsupportedOperationError(
            f"scipy.linalg.lapack {name}: the composition that gives mutad's derivative did not "
            f"reproduce the routine's value on these values. Call {instead} instead.")
    return composition


def _getri(values, lu, piv, lwork=None, overwrite_lu=0):
    n = np.shape(lu)[0]
    return _reproduced("getri", values[0], lu_solve((lu, _plain(piv)), np.eye(n),
                                                     check_finite=False), "scipy.linalg.inv"), None


def _potri(values, c, lower=0, overwrite_c=0):
    """The triangle of ``(C Cᵀ)⁻¹`` (``(Cᵀ C)⁻¹``) that potri writes; the other is ``c``'s."""
    factor = np.tril(c) if lower else np.triu(c)
    inverse = cho_solve((factor, bool(lower)), np.eye(np.shape(c)[0]), check_finite=False)
    kept = (np.tril(inverse) + np.triu(c, 1)) if lower else (np.triu(inverse) + np.tril(c, -1))
    return _reproduced("potri", values[0], kept, "scipy.linalg.cho_solve"), None


def _trtri(values, c, lower=0, unitdiag=0, overwrite_c=0):
    """The inverse's triangle; the other (and a unit diagonal, not read) is ``c``'s."""
    inverse = solve_triangular(c, np.eye(np.shape(c)[0]), lower=bool(lower),
                               unit_diagonal=bool(unitdiag), check_finite=False)
    strict = np.tril(inverse, -1) if lower else np.triu(inverse, 1)
    other = np.triu(c, 1) if lower else np.tril(c, -1)
    diagonal = np.diag(np.diagonal(c if unitdiag else inverse))
    return _reproduced("trtri", values[0], strict + other + diagonal,
                       "scipy.linalg.solve_triangular"), None


def _syevd(values, a, compute_v=1, lower=0, lwork=None, liwork=None, overwrite_a=0):
    return _syev(values, a, compute_v, lower)


# Banded and tridiagonal LU (gbtrf, gttrf): the factors of the dense matrix's lu_factor, whose
# pivots a band's partial pivoting chooses as well (a column's candidates are the same rows)
# but for exact ties (refused). getrf's L holds each step's multipliers in the rows where the
# later interchanges move them; the band routines keep them where the step made them.


def _band_matrix(band, kl, ku, n):
    """The n x n matrix of LAPACK's band storage ``band`` (``A[i, j] = band[ku + i - j, j]``)."""
    return sum(np.diag(band[ku - k, max(k, 0):n + min(k, 0)], k)
               for k in range(-min(kl, n - 1), min(ku, n - 1) + 1))


def _multiplier_rows(piv, kl):
    """``rows[k, j]``: the row of getrf's L where step j's multiplier of row ``j + 1 + k``
    ends up (0-based pivots ``piv``); rows past the matrix are the last."""
    n = len(piv)
    final = np.arange(n)  # where a row after the current step ends up after the later ones
    rows = np.zeros((kl, n), dtype=np.intp)
    for j in range(n - 1, -1, -1):
        rows[:, j] = final[np.minimum(j + 1 + np.arange(kl), n - 1)]
        final[[j, piv[j]]] = final[[piv[j], j]]
    return rows


def _band_lu(name, a, piv, kl):
    """``lu_factor`` of the dense matrix ``a`` as the band routines keep it: U's diagonals
    (0 to kl + ku) and the multipliers ``m[k, j]`` of step j for row j + 1 + k (0 past the
    matrix), its pivots ``piv`` (0-based) those of the routine."""
    lu, composed = lu_factor(a, check_finite=False)
    _same_pivots(name, piv, composed)
    n = len(piv)
    rows = _multiplier_rows(np.asarray(piv), kl)
    valid = (np.arange(n) + 1 + np.arange(kl)[:, None]) < n
    return lu, np.where(valid, lu[rows, np.arange(n)], 0.0)


def _lu_of_band_factors(diagonals, multipliers, piv):
    """The dense ``lu`` of getrf of U's ``diagonals`` (0, 1, ...) and the band routines'
    ``multipliers``, pivots ``piv`` (0-based): what ``lu_solve`` takes."""
    n = len(piv)
    kl = len(multipliers)
    rows = _multiplier_rows(np.asarray(piv), kl)
    columns = np.broadcast_to(np.arange(n), rows.shape)
    valid = columns + 1 + np.arange(kl)[:, None] < n
    where = np.zeros(n * n, dtype=np.intp)  # (a gather: an entry 0, or its multiplier's index)
    where[rows[valid] * n + columns[valid]] = np.arange(1, np.count_nonzero(valid) + 1)
    lower = np.concatenate([np.zeros(1), multipliers[valid]])[where].reshape(n, n)
    return lower + sum(np.diag(d, k) for k, d in enumerate(diagonals) if len(d))


_TRANS = {"N": 0, "T": 1, "C": 2, b"N": 0, b"T": 1, b"C": 2, 0: 0, 1: 1, 2: 2}


def _tridiagonal(dl, d, du):
    return np.diag(d) + np.diag(dl, -1) + np.diag(du, 1)


def _gttrf(values, dl, d, du, overwrite_dl=0, overwrite_d=0, overwrite_du=0):
    piv = values[4] - 1  # (gttrf's pivots are 1-based)
    lu, m = _band_lu("gttrf", _tridiagonal(dl, d, du), piv, 1)
    return m[0, :-1], np.diagonal(lu), np.diagonal(lu, 1), np.diagonal(lu, 2), None, None


def _gttrs(values, dl, d, du, du2, ipiv, b, trans="N", overwrite_b=0):
    piv = np.asarray(_plain(ipiv)) - 1
    lu = _lu_of_band_factors((d, du, du2), np.concatenate([dl, np.zeros(1)])[None], piv)
    return lu_solve((lu, piv), b, _TRANS[trans], check_finite=False), None


def _gtsv(values, dl, d, du, b, overwrite_dl=0, overwrite_d=0, overwrite_du=0, overwrite_b=0):
    n = len(d)
    lu, piv = lu_factor(_tridiagonal(dl, d, du), check_finite=False)
    du2 = np.concatenate([np.diagonal(lu, 2), dl[n - 2:]])  # (its last entry left as it was)
    composed = du2, np.diagonal(lu), np.diagonal(lu, 1)
    if not all(reproduces(v, c) for v, c in zip(values, composed)):
        raise UnsupportedOperationError(
            "scipy.linalg.lapack gtsv chose other pivots than lu_factor on these values (a tie "
            "between candidate pivots), so mutad has no derivative of its factors. Call "
            "scipy.linalg.solve_banded instead.")
    return (*composed, lu_solve((lu, piv), b, check_finite=False), None)


def _refuse_band_shape(name, *settings):
    if any(s is not None for s in settings):
        raise UnsupportedOperationError(
            f"scipy.linalg.lapack {name} with m=, n=, ldab= or ldb= on traced arrays: mutad "
            "follows a square matrix in the whole band storage. Pass the arrays themselves.")


def _gbtrf(values, ab, kl, ku, m=None, n=None, ldab=None, overwrite_ab=0):
    _refuse_band_shape("gbtrf", m, n, ldab)
    size = np.shape(ab)[1]
    lu, multipliers = _band_lu("gbtrf", _band_matrix(ab[kl:], kl, ku, size), values[1], kl)
    return _band_lu_storage(values[0], lu, multipliers, kl, ku), None, None


def _band_lu_storage(value, lu, multipliers, kl, ku):
    """The band routines' storage of getrf's ``lu`` (U in the rows 0 to kl + ku) and of their
    ``multipliers`` (the kl rows after), its unused corners ``value``'s (SciPy's) bytes."""
    n = np.shape(value)[1]
    rows = []
    for r in range(kl + ku + 1):
        k = kl + ku - r  # the k-th superdiagonal of U
        rows.append(np.concatenate([value[r, :k], np.diagonal(lu, k)]) if k < n
                    else value[r] * 1.0)
    return np.concatenate([np.stack(rows), multipliers])


def _gbtrs(values, ab, kl, ku, b, ipiv, trans=0, n=None, ldab=None, ldb=None, overwrite_b=0):
    _refuse_band_shape("gbtrs", n, ldab, ldb)
    size = np.shape(ab)[1]
    diagonals = [ab[kl + ku - k, k:] for k in range(min(kl + ku, size - 1) + 1)]
    piv = np.asarray(_plain(ipiv))
    lu = _lu_of_band_factors(diagonals, ab[kl + ku + 1:], piv)
    return lu_solve((lu, piv), b, _TRANS[trans], check_finite=False), None


def _gbsv(values, kl, ku, ab, b, overwrite_ab=0, overwrite_b=0):
    size = np.shape(ab)[1]
    lu, multipliers = _band_lu("gbsv", _band_matrix(ab[kl:], kl, ku, size), values[1], kl)
    return (_band_lu_storage(values[0], lu, multipliers, kl, ku), None,
            lu_solve((lu, values[1]), b, check_finite=False), None)


# Symmetric positive definite tridiagonal (pttrf: A = L D Lᵀ, L unit lower bidiagonal) and band
# (pbtrf: SciPy's cholesky_banded) matrices.


def _pttrf(values, d, e, overwrite_d=0, overwrite_e=0):
    c = cholesky(_tridiagonal(e, d, e), lower=True, check_finite=False)
    pivots = np.diagonal(c)
    return pivots * pivots, np.diagonal(c, -1) / pivots[:-1], None


def _ldl_matrix(d, e):
    """L D Lᵀ of pttrf's factors."""
    off = e * d[:-1]
    return np.diag(d + np.concatenate([np.zeros(1), e * off])) + np.diag(off, -1) \
        + np.diag(off, 1)


def _pttrs(values, d, e, b, overwrite_b=0):
    return np.linalg.solve(_ldl_matrix(d, e), b), None


def _ptsv(values, d, e, b, overwrite_d=0, overwrite_e=0, overwrite_b=0):
    factor, off, _ = _pttrf(values, d, e)
    return factor, off, np.linalg.solve(_tridiagonal(e, d, e), b), None


def _pbtrf(values, ab, lower=0, ldab=None, overwrite_ab=0):
    _refuse_band_shape("pbtrf", ldab)
    return cholesky_banded(ab, lower=bool(lower), check_finite=False), None


def _pbtrs(values, ab, b, lower=0, ldab=None, overwrite_b=0):
    _refuse_band_shape("pbtrs", ldab)
    return cho_solve_banded((ab, bool(lower)), b, check_finite=False), None


def _pbsv(values, ab, b, lower=0, ldab=None, overwrite_ab=0, overwrite_b=0):
    _refuse_band_shape("pbsv", ldab)
    return (cholesky_banded(ab, lower=bool(lower), check_finite=False),
            solveh_banded(ab, b, lower=bool(lower), check_finite=False), None)


def _op(x, trans):
    return transpose(np.conjugate(x) if trans == 2 else x) if trans else x


def _gemm(values, alpha, a, b, beta=0.0, c=None, trans_a=0, trans_b=0, overwrite_c=0):
    y = alpha * (_op(a, trans_a) @ _op(b, trans_b))
    return y if c is None else y + beta * c


def _triangle(a, k, lower, diag):
    """The triangular matrix BLAS's ``trsm`` and ``trmm`` read: the leading ``k × k`` block of
    ``a``, its triangle (the other is not read, and gets no derivative), ones on its diagonal
    where ``diag`` says it is a unit one."""
    a = a[:k, :k]
    t = np.tril(a, -1 if diag else 0) if lower else np.triu(a, 1 if diag else 0)
    return t + np.eye(k) if diag else t


def _trsm(values, alpha, a, b, side=0, lower=0, trans_a=0, diag=0, overwrite_b=0):
    # op(A) X = alpha B (side 0), X op(A) = alpha B (side 1): op(A)ᵀ Xᵀ = alpha Bᵀ
    k = np.shape(b)[1 if side else 0]
    t = _triangle(a, k, lower, diag)
    if side:
        return alpha * transpose(solve_triangular(t, transpose(b), 0 if trans_a else 1,
                                                  bool(lower), check_finite=False))
    return alpha * solve_triangular(t, b, 1 if trans_a else 0, bool(lower), check_finite=False)


def _trmm(values, alpha, a, b, side=0, lower=0, trans_a=0, diag=0, overwrite_b=0):
    # alpha op(A) B (side 0), alpha B op(A) (side 1)
    t = _op(_triangle(a, np.shape(b)[1 if side else 0], lower, diag), trans_a)
    return alpha * (b @ t if side else t @ b)


def _refuse_strided(name, *settings):
    if any(s is not None for s in settings):
        raise UnsupportedOperationError(
            f"scipy.linalg.blas {name} with n=, offx=, incx=, offy= or incy= on traced arrays: "
            "mutad follows the whole vectors. Pass the slices themselves (x[off::inc]).")


def _gemv(values, alpha, a, x, beta=0.0, y=None, offx=None, incx=None, offy=None, incy=None,
          trans=0, overwrite_y=0):
    _refuse_strided("gemv", offx, incx, offy, incy)
    z = alpha * (_op(a, trans) @ x)
    return z if y is None else z + beta * y


def _axpy(values, x, y, n=None, a=1.0, offx=None, incx=None, offy=None, incy=None):
    _refuse_strided("axpy", n, offx, incx, offy, incy)
    return a * x + y


def _scal(values, a, x, n=None, offx=None, incx=None):
    _refuse_strided("scal", n, offx, incx)
    return a * x


def _dot(values, x, y, n=None, offx=None, incx=None, offy=None, incy=None):
    _refuse_strided("dot", n, offx, incx, offy, incy)
    return np.dot(x, y)


def _nrm2(values, x, n=None, offx=None, incx=None):
    _refuse_strided("nrm2", n, offx, incx)
    return np.sqrt(np.dot(x, x))


ROUTINES = {  # name: (library, composition, the arguments it always writes where it can)
    "gesv": (_lapack, _gesv, ()), "getrf": (_lapack, _getrf, ()),
    "getrs": (_lapack, _getrs, ()), "potrf": (_lapack, _potrf, ()),
    "potrs": (_lapack, _potrs, ()), "posv": (_lapack, _posv, ()),
    "trtrs": (_lapack, _trtrs, ()), "syev": (_lapack, _syev, ()),
    "syevd": (_lapack, _syevd, ()), "gttrf": (_lapack, _gttrf, ()),
    "gttrs": (_lapack, _gttrs, ()), "gtsv": (_lapack, _gtsv, ()),
    "gbtrf": (_lapack, _gbtrf, ()), "gbtrs": (_lapack, _gbtrs, ()), "gbsv": (_lapack, _gbsv, ()),
    "pttrf": (_lapack, _pttrf, ()), "pttrs": (_lapack, _pttrs, ()), "ptsv": (_lapack, _ptsv, ()),
    "pbtrf": (_lapack, _pbtrf, ()), "pbtrs": (_lapack, _pbtrs, ()), "pbsv": (_lapack, _pbsv, ()),
    "getri": (_lapack, _getri, ()), "potri": (_lapack, _potri, ()), "trtri": (_lapack, _trtri, ()),
    "gemm": (_blas, _gemm, ()), "gemv": (_blas, _gemv, ()), "trsm": (_blas, _trsm, ()),
    "trmm": (_blas, _trmm, ()), "axpy": (_blas, _axpy, ("y",)),
    "scal": (_blas, _scal, ("x",)), "dot": (_blas, _dot, ()), "nrm2": (_blas, _nrm2, ()),
}
"""The routines followed, by their name without the type's letter."""


def _call(routine, always, names, *values):
    """The routine's call on plain ``values`` that writes into none of them: the traced
    arrays' memory is theirs (a write the routine would make is made by ``Routine``)."""
    return routine(**{name: False if name.startswith("overwrite_") else
                      np.copy(value, order="K") if name in always else value
                      for name, value in zip(names, values)})


class Routine:
    """A LAPACK or BLAS routine of SciPy's (``routine``, of ``library``) while a
    differentiation runs: its own call on plain values; with traced ones, its value (a
    ``Value``: computed again in a replay, pivots and ``info`` included) with the derivatives
    of ``compose``. A LAPACK routine's ``info`` other than 0 (a singular or indefinite matrix,
    whose partial factors have no derivative) is refused."""

    def __init__(self, routine, library, compose, always):
        functools.update_wrapper(self, routine, assigned=("__name__", "__doc__"))
        self.routine, self.library = routine, library
        self.compose, self.always = compose, always
        parameters = list(inspect.signature(compose).parameters.values())[1:]
        self.signature = inspect.Signature(parameters)
        self.value = Value(functools.partial(_call, routine, always),
                           f"scipy.linalg.{routine.__name__}")
        defroute(routine, self)
        STAND_INS[id(routine)] = self

    def __getattr__(self, name):  # (SciPy's typecode, prefix, dtype, module_name)
        return getattr(self.__dict__["routine"], name)

    def __call__(self, *args, **kwargs):
        if innermost((*args, *kwargs.values())) is None:
            return self.routine(*args, **kwargs)
        bound = self.signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            if name.startswith("overwrite_"):
                bound.arguments[name] = bool(value)  # (SciPy's flags are ints: 1 as True)
        overwritten = _overwritten(self.routine, bound, self.always)
        names = tuple(bound.arguments)
        values = self.value(names, *bound.arguments.values())
        single = not isinstance(values, tuple)
        outputs = (values,) if single else values
        if self.library is _lapack and _plain(outputs[-1]) != 0:
            raise UnsupportedOperationError(
                f"scipy.linalg.lapack.{self.__name__} returned info={_plain(outputs[-1])} (a "
                "singular or not positive definite matrix, or a bad argument): what it leaves "
                "has no derivative. Decide on the values before the call (mutad.stop_gradient "
                "of the matrix), or call the scipy.linalg function, which raises LinAlgError.")
        composed = self.compose(tuple(map(_plain, outputs)), *bound.args, **bound.kwargs)
        composed = (composed,) if single else composed
        y = tuple(v if c is None else scipys_value(v, c) for v, c in zip(outputs, composed))
        y = y[0] if single else y
        for name, place in overwritten:
            y = _written_as_scipy_writes(self.routine, bound, name, place, y)
        return y


def _refused(routine, instead):
    def refuse(*args, **kwargs):
        if innermost((*args, *kwargs.values())) is not None:
            raise UnsupportedFunctionError(
                f"scipy.linalg {routine.__name__} of traced values has no rule in mutad. "
                f"{instead}")
        return routine(*args, **kwargs)

    functools.update_wrapper(refuse, routine, assigned=("__name__", "__doc__"))
    defroute(routine, refuse)
    STAND_INS[id(routine)] = refuse


def _follow(library):
    for name in dir(library):
        routine = getattr(library, name)
        if name[:1] not in "sdcz" or type(routine).__name__ != "fortran":
            continue
        followed = ROUTINES.get(name[1:])
        if followed is not None and followed[0] is library and name[0] in "sd":
            Routine(routine, *followed)
        else:
            _refused(routine, "mutad follows the real (s, d) " + ", ".join(ROUTINES) + ". Call "
                     "the scipy.linalg function that computes it (solve, lu_factor, lu_solve, "
                     "cholesky, cho_solve, solve_triangular, solve_banded, solveh_banded, "
                     "eigh), or NumPy's products.")


STAND_INS = {}
"""id(SciPy's routine) -> what stands in for it (a :class:`Routine`, or its refusal)."""

_follow(_lapack)
_follow(_blas)


def _getter(get):
    """``get_lapack_funcs`` or ``get_blas_funcs`` while a differentiation runs: the routines
    SciPy's returns (which the user's code calls as they are, by no module's name), each as
    what stands in for it."""
    def stand_in(names, arrays=(), dtype=None, ilp64=False):
        found = get(names, arrays, dtype, ilp64)
        if isinstance(found, (list, tuple)):
            return type(found)(STAND_INS.get(id(f), f) for f in found)
        return STAND_INS.get(id(found), found)

    functools.update_wrapper(stand_in, get)
    defroute(get, stand_in)


_getter(_linalg.get_lapack_funcs)
_getter(_linalg.get_blas_funcs)
