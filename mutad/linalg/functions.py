"""Matrix functions: scipy.linalg's expm, logm and sqrtm.

Al-Mohy & Higham, "Computing the Fréchet derivative of the matrix exponential" (SIAM J. Matrix
Anal. Appl., 2009) for expm, and Higham, "Functions of Matrices" (2008), §3.2, for expm's and
logm's Fréchet derivatives as corners of block triangular matrices; sqrtm's derivative solves a
Sylvester equation.
"""

import numpy as np
import scipy.linalg as _linalg

from ..core.errors import UnsupportedOperationError
from ..rules._helpers import transpose
from ..scipy._adjoints import scipy_adjoint
from ..core.views import wrapped
from ._common import require_matrix
from .equations import solve_sylvester

expm, logm, sqrtm = map(scipy_adjoint, (_linalg.expm, _linalg.logm, _linalg.sqrtm))


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
# The matrix square root, whose derivative solves a Sylvester equation


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
