"""Norms: np.linalg.norm, vector_norm and matrix_norm, and scipy.linalg.norm, on one derivative.

Where a norm is not differentiable (at 0, at ties of the max/min norms) the subgradient is
chosen, and the forward rules take the reverse rules' own. Complex values are in mutad's
convention (``complex_aware``): the gradient is dy/d Re x + i dy/d Im x.
"""

import numpy as np
import scipy.linalg as _linalg

from ..core.errors import UnsupportedOperationError
from ..core.registry import complex_aware, defjvp, defrule
from ..engines.products import times
from ..scipy._adjoints import scipy_adjoint
from ._common import of_finite_matrices
from .spectral import singular_spectrum

norm = scipy_adjoint(_linalg.norm)


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


def _spectral_norm_derivative(x, ord):
    """``_matrix_norm_derivative`` of the norms of the singular values, of finite ``x``."""
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    # Repeated singular values and zero ones are decided as the SVD's rule decides them:
    # only the weights' sum over a repeated block, U_b (c I) V_bᵀ, is free of the basis
    # NumPy picked for it, and a zero value's vectors are any of the null spaces'.
    repeated, zero = singular_spectrum(f"np.linalg.norm(..., ord={ord!r})", x, s)
    if ord == "nuc":  # d Σσ_i = tr(Uᵀ dA V) (Re tr(Uᴴ dA V) for complex A); at a zero
        weights = ~zero  # value (a kink) the subgradient U_r V_rᵀ of the nonzero ones
    else:  # d σ_i = u_iᵀ dA v_i; a σ_max (σ_min) repeated: its block shares it (ties)
        pick = 0 if ord == 2 else -1
        tied = repeated[..., pick, :] | (np.arange(s.shape[-1]) == (pick % s.shape[-1]))
        tied = tied & ~zero[..., pick, None]  # at σ = 0, the subgradient 0
        weights = tied / np.maximum(np.sum(tied, axis=-1, keepdims=True), 1)
    return (u * weights[..., None, :]) @ vt


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
        return of_finite_matrices(x, lambda x: _spectral_norm_derivative(x, ord))
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
            return (times(dy_kept, np.where(zero, 0.0, x / np.where(zero, 1.0, y_kept))),)

        return back
    derivative = norm_derivative(x, y, ord, axes, keepdims, matrix)

    def back(dy):
        dy_kept = dy if keepdims else np.expand_dims(dy, axes)
        return (times(dy_kept, derivative),)

    return back


def norm_tangent(x, dx, y, ord, axes, keepdims, matrix):
    """The tangent of a norm: the reverse rule's (sub)gradient applied to ``dx``, for complex
    ``x`` as the real inner product Re(conj(gradient) dx); a zero element of ``dx`` contributes
    zero, beside an infinite or NaN derivative too (``times``), as in the gradient."""
    derivative = norm_derivative(x, y, ord, axes, keepdims, matrix)
    if np.iscomplexobj(derivative):
        return np.sum(np.real(np.conjugate(derivative) * dx), axis=axes, keepdims=keepdims)
    return np.sum(times(dx, derivative), axis=axes, keepdims=keepdims)


def reduced_axes(x, axis):
    return tuple(int(i) % np.ndim(x) for i in np.atleast_1d(axis))


def norm_axes(x, ord, axis):
    """The axes ``np.linalg.norm`` reduces, and whether it takes a matrix norm over them."""
    if axis is None and ord is None:  # the 2-norm of all entries, whatever the shape
        return tuple(range(np.ndim(x))), False
    axes = reduced_axes(x, tuple(range(np.ndim(x))) if axis is None else axis)
    return axes, len(axes) == 2


# ----------------------------------------------------------------------------------------------
# np.linalg


@defrule(np.linalg.norm, leading=1)
def numpy_norm(x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = norm_axes(x, ord, axis)
    return y, norm_pullback(x, y, ord, axes, keepdims, matrix)


@defjvp(np.linalg.norm)
def numpy_norm_jvp(tangents, x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = norm_axes(x, ord, axis)
    return y, norm_tangent(x, tangents[0], y, ord, axes, keepdims, matrix)


def _vector_norm_axes(x, axis):
    return reduced_axes(x, tuple(range(np.ndim(x))) if axis is None else axis)


@defrule(np.linalg.vector_norm, leading=1)
def numpy_vector_norm(x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, norm_pullback(x, y, ord, _vector_norm_axes(x, axis), keepdims, matrix=False)


@defjvp(np.linalg.vector_norm)
def numpy_vector_norm_jvp(tangents, x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, norm_tangent(x, tangents[0], y, ord, _vector_norm_axes(x, axis), keepdims, False)


@defrule(np.linalg.matrix_norm, leading=1)
def numpy_matrix_norm(x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, norm_pullback(x, y, ord, reduced_axes(x, (-2, -1)), keepdims, matrix=True)


@defjvp(np.linalg.matrix_norm)
def numpy_matrix_norm_jvp(tangents, x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, norm_tangent(x, tangents[0], y, ord, reduced_axes(x, (-2, -1)), keepdims, True)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.norm


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


complex_aware(np.linalg.norm, np.linalg.vector_norm, np.linalg.matrix_norm)
