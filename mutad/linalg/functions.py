"""Matrix functions: scipy.linalg's expm, logm, sqrtm, signm and fractional_matrix_power, and
the trigonometric and hyperbolic ones SciPy writes with expm (cosm, sinm, tanm, coshm, sinhm,
tanhm).

Al-Mohy & Higham, "Computing the Fréchet derivative of the matrix exponential" (SIAM J. Matrix
Anal. Appl., 2009) for expm, and Higham, "Functions of Matrices" (2008), §3.2, for expm's and
logm's Fréchet derivatives as corners of block triangular matrices; sqrtm's and signm's
derivatives solve Sylvester equations. expm takes complex matrices too (its power series has
real coefficients, so its rule, written with transposes, is the transpose of the complex
derivative: it is declared holomorphic); cosm, sinm, tanm, coshm, sinhm and tanhm are SciPy's
own steps on expm and solve, so their values are SciPy's bit for bit and every mode and order
follows. fractional_matrix_power has logm's rule: its Fréchet derivative is the corner of the
function of a block triangular matrix (real or complex matrices; a non-integer power of a matrix
with an eigenvalue on the branch cut, the closed negative real axis, is refused).
"""

import numpy as np
import scipy.linalg as _linalg

from ..api import stop_gradient
from ..core.errors import UnsupportedOperationError
from ..core.registry import CONVENTION, HOLOMORPHIC
from ..engines.arraylike import carries_derivative
from ..rules._helpers import transpose
from ..scipy._adjoints import (ScipyAdjoint, StandIn, Value, reproduces, scipy_adjoint,
                               scipys_value)
from ..core.views import memory, wrapped
from ._common import require_matrix
from .dense import solve
from .equations import solve_sylvester

expm, logm, sqrtm = map(scipy_adjoint, (_linalg.expm, _linalg.logm, _linalg.sqrtm))
# e^A has a power series with real coefficients: its Fréchet derivative L(A, E) is complex
# linear in E and holomorphic in A, and its rule (Ā = L(Aᵀ, Ȳ), transposes) holds for complex A
expm.complex_values = HOLOMORPHIC


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
        if wrapped(a) or wrapped(dy) or not (np.isfinite(a).all() and np.isfinite(dy).all()):
            # traced by an outer differentiation: by expm itself, which it differentiates;
            # of infinities or NaNs too, which expm_frechet refuses (expm's are NaNs)
            return (_frechet(transpose(a), dy),)
        # plain arrays: SciPy's expm_frechet, a matrix at a time, at a quarter of the cost
        # (in double precision: SciPy's expm of float16 computes in float32, its Fréchet
        # derivative in the matrix's own dtype, where it overflows)
        da = np.empty(np.shape(a), np.result_type(a, dy, float))
        for index in np.ndindex(np.shape(a)[:-2]):
            da[index] = _linalg.expm_frechet(transpose(a[index]).astype(da.dtype),
                                             dy[index].astype(da.dtype), compute_expm=False)
        return (da,)

    return y, back


@expm.jvp_rule
def _expm_jvp(tangents, a):
    return expm(a), _frechet(a, tangents[0])


# ----------------------------------------------------------------------------------------------
# The matrix square root, whose derivative solves a Sylvester equation


def _real_square_root(a):
    root = sqrtm(a)
    if np.iscomplexobj(root):
        raise UnsupportedOperationError(
            "scipy.linalg.sqrtm of a matrix whose square root is complex (a negative real "
            "eigenvalue): mutad differentiates real arrays only.")
    return root


def _sylvester_derivative(a, b, q):
    """``solve_sylvester(a, b, q)``, the derivative of a matrix function at a matrix whose value
    SciPy gives: NaNs where the value or ``q`` holds an infinity or a NaN (SciPy's square root
    of such a matrix is NaNs, where ``solve_sylvester`` refuses them)."""
    if not any(wrapped(x) for x in (a, b, q)) and not (
            np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(q).all()):
        return np.full(np.shape(q), np.nan, np.result_type(a, b, q))
    return solve_sylvester(a, b, q)


@sqrtm.rule
def _sqrtm_rule(a, *settings):
    root = _real_square_root(a)

    def back(droot):
        # X X = A gives X dX + dX X = dA, a Sylvester equation; its adjoint is Xᵀ Y + Y Xᵀ.
        return (_sylvester_derivative(transpose(root), transpose(root), droot),)

    return root, back


@sqrtm.jvp_rule
def _sqrtm_jvp(tangents, a, *settings):
    root = _real_square_root(a)
    return root, _sylvester_derivative(root, root, tangents[0])


# ----------------------------------------------------------------------------------------------
# The matrix sign, whose derivative solves a Sylvester equation too

signm = scipy_adjoint(_linalg.signm)


def _real_sign(a):
    sign = signm(a)
    if np.iscomplexobj(sign) and not np.iscomplexobj(a):
        raise UnsupportedOperationError(
            "scipy.linalg.signm of a real matrix whose sign SciPy gives complex: mutad "
            "differentiates real arrays only.")
    return sign


def _sign_frechet(sign, a, e):
    """The Fréchet derivative L(A, E) of the sign S: with N = S A = (A²)^½, N L + L N =
    E - S E S (Higham, Functions of Matrices, 2008, §5.1: S² = I and S A = A S differentiated);
    its adjoint is L(Aᵀ, ·), sign's power series having real coefficients."""
    root = sign @ a
    return solve_sylvester(root, root, e - sign @ e @ sign)


@signm.rule
def _signm_rule(a, *settings):
    sign = _real_sign(a)
    return sign, lambda dsign: (_sign_frechet(transpose(sign), transpose(a), dsign),)


@signm.jvp_rule
def _signm_jvp(tangents, a, *settings):
    sign = _real_sign(a)
    return sign, _sign_frechet(sign, a, tangents[0])


# ----------------------------------------------------------------------------------------------
# The matrix logarithm


def _real_logarithm(a):
    require_matrix("logm", a)
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
    return _frechet_corner(a, e, _real_logarithm)


def _frechet_corner(a, e, function, real_part=False):
    """The corner L(A, E) of ``function([[A, tE], [0, A]])`` / t, E scaled to A's norm by t
    (``_logm_frechet``), or 0 where E is; its real part where ``real_part`` (a real block's
    value that ``function`` gives complex by rounding: ``_power_frechet``)."""
    n = np.shape(a)[-1]
    size = np.linalg.norm(e, 1)
    if not size:  # (a decision on the cotangent: 0 gives 0)
        return np.zeros_like(e) + 0.0 * a
    scale = np.linalg.norm(a, 1) / size
    block = np.concatenate([np.concatenate([a, scale * e], axis=-1),
                            np.concatenate([np.zeros_like(a), a], axis=-1)], axis=-2)
    value = function(block)
    if real_part and np.iscomplexobj(value):
        value = np.real(value)
    return value[..., :n, n:] / scale


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
    require_matrix("logm", A)  # (a stack refused as the reverse rule refuses it)
    result = logm(A, *settings)
    tangent = _logm_frechet(A, tangents[0])
    if type(result) is tuple:
        return result, (tangent, None)
    return result, tangent


# ----------------------------------------------------------------------------------------------
# The fractional power, whose Fréchet derivative is logm's construction with A^t


_fractional_power = ScipyAdjoint(_linalg.fractional_matrix_power)
# z^t is holomorphic off its branch cut (refused), with real coefficients: its rule, written
# with transposes, holds for complex values as expm's does
_fractional_power.complex_values = HOLOMORPHIC


def _fractional_matrix_power(A, t):
    """SciPy's ``fractional_matrix_power(A, t)``, differentiated in A; ``t`` is a setting."""
    if carries_derivative(t):
        raise UnsupportedOperationError(
            "scipy.linalg.fractional_matrix_power(A, t): mutad differentiates A, not the power "
            "t, which depends on the differentiated arguments here. Pass t as a constant, or "
            "write A^t = expm(t * logm(A)), which mutad differentiates in both.")
    return _fractional_power(A, t)


fractional_matrix_power = StandIn(_linalg.fractional_matrix_power, _fractional_matrix_power)


def _power(a, t):
    """SciPy's A^t, refusing a non-integer power of a matrix with an eigenvalue on the closed
    negative real axis, the branch cut of the principal power (its derivative does not exist
    there: nearby matrices' powers jump between the cut's sides)."""
    require_matrix("fractional_matrix_power", a)
    result = _fractional_power(a, t)
    if float(t) != int(t):
        eigenvalues = np.linalg.eigvals(memory(a))  # a decision: of the plain values
        size = np.max(np.abs(eigenvalues), initial=0.0)
        on_cut = (np.real(eigenvalues) <= 0) & (np.abs(np.imag(eigenvalues)) <= 1e-12 * size)
        if np.any(on_cut):  # (a decision)
            raise UnsupportedOperationError(
                "scipy.linalg.fractional_matrix_power(A, t) of a non-integer power t of a "
                "matrix with an eigenvalue on the negative real axis or at 0: the principal "
                "power has no derivative there (its branch cut). Shift or rotate the spectrum "
                "away from it, or use an integer power.")
    return result


def _power_frechet(a, t, e, real):
    """The Fréchet derivative L(A, E) of A^t, the corner of ([[A, E], [0, A]])^t (Higham,
    Functions of Matrices, 2008, §3.2), E scaled to A's norm first, as in ``_logm_frechet``.
    Where A, A^t and E are ``real``, the block's power is real too; SciPy computes it through
    a complex Schur form where rounding splits the block's repeated eigenvalues into complex
    pairs, and its imaginary part, rounding, is dropped."""
    return _frechet_corner(a, e, lambda block: _fractional_power(block, t),
                           real_part=real and not np.iscomplexobj(e))


def _is_real(a, result):
    return not np.iscomplexobj(a) and not np.iscomplexobj(result)


@_fractional_power.rule
def _fractional_power_rule(A, t):
    """A^t, a primary matrix function of a power series with real coefficients: Ā = L(Aᵀ, Ȳ),
    as logm's (the transpose of the complex derivative, for complex values)."""
    result = _power(A, t)
    real = _is_real(A, result)
    return result, lambda dy: (_power_frechet(transpose(A), t, dy, real),)


@_fractional_power.jvp_rule
def _fractional_power_jvp(tangents, A, t):
    result = _power(A, t)
    return result, _power_frechet(A, t, tangents[0], _is_real(A, result))


# ----------------------------------------------------------------------------------------------
# cosm, sinm, tanm, coshm, sinhm, tanhm: SciPy's own steps on expm (of complex matrices for
# cosm and sinm) and solve, so their values are SciPy's and every derivative follows from expm's


def _cosm(A):
    if np.iscomplexobj(A):
        return 0.5 * (expm(1j * A) + expm(-1j * A))
    return expm(1j * A).real


def _sinm(A):
    if np.iscomplexobj(A):
        return -0.5j * (expm(1j * A) - expm(-1j * A))
    return expm(1j * A).imag


def _coshm(A):
    return 0.5 * (expm(A) + expm(-A))


def _sinhm(A):
    return 0.5 * (expm(A) - expm(-A))


def _quotient(original, numerator, denominator):
    """SciPy's ``solve(denominator(A), numerator(A))`` (tanm, tanhm). Real A: SciPy's solve
    on the steps above, SciPy's values. Complex A, which scipy.linalg.solve's rule does not
    take: SciPy's own value with the derivatives of np.linalg.solve (holomorphic)."""

    def quotient(A):
        if not np.iscomplexobj(A):
            return solve(denominator(A), numerator(A))
        return scipys_value(_complex_value(original)(A),
                            np.linalg.solve(denominator(A), numerator(A)))

    return quotient


class _ComplexValue(Value):
    """SciPy's value of tanm or tanhm of a complex matrix, without a derivative."""

    complex_values = CONVENTION  # no cotangent at all: the same in every convention


_COMPLEX_VALUES = {}


def _complex_value(original):
    value = _COMPLEX_VALUES.get(original)
    if value is None:
        value = _COMPLEX_VALUES[original] = _ComplexValue(
            original, f"scipy.linalg.{original.__name__}")
    return value


cosm = StandIn(_linalg.cosm, _cosm)
sinm = StandIn(_linalg.sinm, _sinm)
coshm = StandIn(_linalg.coshm, _coshm)
sinhm = StandIn(_linalg.sinhm, _sinhm)
tanm = StandIn(_linalg.tanm, _quotient(_linalg.tanm, _sinm, _cosm))
tanhm = StandIn(_linalg.tanhm, _quotient(_linalg.tanhm, _sinhm, _coshm))


def _expm_frechet(A, E, method=None, compute_expm=True, check_finite=True):
    """SciPy's ``expm_frechet``: its values (its own call on the plain matrices, which checks
    them), with the derivatives of the corners of ``expm([[A, E], [0, A]]) = [[e^A, L(A, E)],
    [0, e^A]]`` (Higham 2008, §3.2), expm's rule: every mode and order follows."""
    value = _expm_frechet_stand_in.original(stop_gradient(A), stop_gradient(E), method=method,
                                            compute_expm=True, check_finite=check_finite)
    n = np.shape(A)[0]
    zeros = np.zeros(np.shape(A), np.result_type(stop_gradient(A), stop_gradient(E)))
    big = np.concatenate([np.concatenate([A, E], axis=1),
                          np.concatenate([zeros, A], axis=1)], axis=0)
    block = expm(big)
    frechet = scipys_value(value[1], block[:n, n:])
    if not compute_expm:
        return frechet
    return scipys_value(value[0], block[:n, :n]), frechet


_expm_frechet_stand_in = StandIn(_linalg.expm_frechet, _expm_frechet)
expm_frechet = _expm_frechet_stand_in


def _funm(A, func, disp=True):
    """SciPy's ``funm(A, func)``: its values (its Schur-Parlett recurrence, with ``func`` of the
    plain eigenvalues), with the derivatives of ``V func(Λ) V⁻¹`` (``np.linalg.eig``, and
    ``func`` of the traced eigenvalues, the user's code followed): the same matrix function
    of a diagonalizable ``A``, guarded to reproduce SciPy's values. Repeated eigenvalues (whose
    vectors ``eig`` picks arbitrarily) are refused, as ``eig``'s rule refuses them."""
    if not carries_derivative(A):  # a constant (mutad.stop_gradient): SciPy's own
        return _funm_stand_in.original(A, func, disp)
    value, error = _funm_stand_in.original(np.array(memory(A)), func, False)  # (of a copy)
    eigenvalues = np.linalg.eigvals(memory(A))  # a decision: of the plain values
    gaps = np.abs(eigenvalues[:, None] - eigenvalues)[~np.eye(len(eigenvalues), dtype=bool)]
    if np.min(gaps, initial=np.inf) <= np.sqrt(np.finfo(float).eps) * max(
            1.0, np.max(np.abs(eigenvalues), initial=0.0)):
        raise UnsupportedOperationError(
            "scipy.linalg.funm(A, func) of a differentiated matrix with repeated (or nearly "
            "repeated) eigenvalues: mutad differentiates it through A's eigenvectors, which "
            "are not determined there. Call the function's own routine, which mutad "
            "differentiates (expm, cosm, sinm, ..., sqrtm, fractional_matrix_power), or pass A "
            "through mutad.stop_gradient.")
    w, V = np.linalg.eig(A)
    composition = V @ (np.reshape(func(w), (-1, 1)) * np.linalg.inv(V))
    if np.isrealobj(value):  # (SciPy's value of a real A, its negligible imaginary part dropped)
        composition = np.real(composition)
    if not reproduces(value, composition):
        raise UnsupportedOperationError(
            "scipy.linalg.funm(A, func) of a differentiated matrix: mutad differentiates it as "
            "V @ diag(func(w)) @ inv(V) of A's eigenvalues w and vectors V, which did not "
            "reproduce SciPy's values here (a matrix far from diagonalizable, or a func that "
            "is not elementwise). Call the function's own routine, which mutad differentiates "
            "(expm, cosm, sinm, tanm, coshm, sinhm, tanhm, logm, sqrtm, "
            "fractional_matrix_power), or pass A through mutad.stop_gradient.")
    if disp and error > 1000 * np.finfo(np.result_type(value)).eps:
        print("funm result may be inaccurate, approximate err =", error)  # (SciPy's notice)
    result = scipys_value(value, composition)
    return result if disp else (result, error)


_funm_stand_in = StandIn(_linalg.funm, _funm)
