"""Matrix equations: scipy.linalg's Sylvester, Lyapunov and Riccati solvers, differentiated by the
implicit function theorem: each derivative is one more solve of the equation's own kind (its
adjoint, the transposed one), on SciPy's solution. Real matrices only.
"""

import functools

import numpy as np
import scipy.linalg as _linalg

from ..core.errors import UnsupportedOperationError
from ..rules._helpers import transpose
from ..scipy._adjoints import scipy_adjoint
from .dense import solve

(solve_sylvester, solve_continuous_lyapunov, solve_discrete_lyapunov, solve_continuous_are,
 solve_discrete_are) = map(scipy_adjoint, (
    _linalg.solve_sylvester, _linalg.solve_continuous_lyapunov, _linalg.solve_discrete_lyapunov,
    _linalg.solve_continuous_are, _linalg.solve_discrete_are))


# ----------------------------------------------------------------------------------------------
# Sylvester equations


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
