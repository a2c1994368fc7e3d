"""``scipy.integrate`` functions mutad differentiates, by SciPy's names too: the quadratures of
samples (``trapezoid``, ``simpson``, ``cumulative_trapezoid``, ``cumulative_simpson``,
``romb``), initial value problems (``solve_ivp`` with every method, ``odeint``), ``quad``,
``quad_vec``, ``nquad`` and boundary value problems (``solve_bvp``, by the implicit function
theorem at SciPy's collocation solution).

>>> import numpy as np, mutad
>>> from mutad.scipy import integrate
>>> def final(y0, k):
...     sol = integrate.solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), y0, args=(k,),
...                               rtol=1e-10, atol=1e-12)
...     return sol.y[0, -1]
>>> dy0, dk = mutad.gradient(final, np.array([2.0]), 0.5)
>>> print(np.round(dy0, 8), round(float(dk), 8))   # e^{-k}, -y0 e^{-k}
[0.60653066] -1.21306132

How each gradient is computed:

* ``trapezoid``, ``simpson``, ``cumulative_trapezoid``, ``cumulative_simpson`` and ``romb`` are
  SciPy's own steps written with NumPy calls mutad differentiates: the exact derivative of
  SciPy's values, in reverse and forward mode and to every order, with respect to the samples,
  the abscissae ``x`` or spacing ``dx``, and ``cumulative_simpson``'s ``initial``.
* ``solve_ivp`` (RK23, RK45, DOP853, Radau, BDF, LSODA) and ``odeint``: the values are SciPy's,
  computed on plain arrays. With **RK23 and RK45** the reverse pass goes back through SciPy's
  own steps (the *discrete adjoint*, as diffrax's default): each step is recomputed from the
  state it started from, the outputs are SciPy's dense output of the step that reached them,
  and each stage takes one vector-Jacobian product of the right-hand side. The gradient is
  then the exact derivative of SciPy's outputs at the step sizes SciPy chose (held fixed, as
  the derivative of its step size control is not taken), so it agrees with finite
  differences of the loss at any tolerance, to within the step-size control's own
  sensitivity; it costs about one vector-Jacobian product per evaluation of the forward solve.
  Forward mode goes forward through the same steps, one Jacobian-vector product per stage.
  (Where a step is not reproduced bit for bit, a right-hand side that reads more than t, y
  and the parameters, the continuous adjoint and sensitivities below are taken.) With the
  other methods, and
  ``odeint``, the gradient is the *continuous adjoint*: from the output times backwards,
  ``λ' = -(∂f/∂y)ᵀ λ`` and ``μ' = -(∂f/∂θ)ᵀ λ`` are integrated with ``solve_ivp`` (the same
  method and tolerances as the forward solve; LSODA for ``odeint``), ``λ`` jumping by the
  cotangent of each output; ``λ(t0)`` is the gradient of ``y0`` and ``μ(t0)`` that of the
  parameters θ: the arrays of ``args=`` and the differentiated arrays the right-hand side
  closes over. Each ``(∂f/∂·)ᵀ λ`` (in either adjoint) is mutad's gradient of
  ``λ · f(t, y, θ)``, the user's right-hand side's program recorded at the first evaluation
  and replayed at the others. Their forward mode integrates the forward sensitivities ``s' =
  (∂f/∂y) s + (∂f/∂θ) θ̇`` beside the state, with the same method, each product a
  ``mutad.jvp``. The continuous adjoint and the sensitivities are derivatives of the exact
  solution of the ODE, not of SciPy's discrete steps: they agree with it to about the
  tolerances of the solves (pass a tight ``rtol``/``atol``, such as 1e-10/1e-12, for
  gradients to match finite differences closely). Memory: RK23 and RK45 without
  ``dense_output`` or events keep each step's times and a fingerprint of its stages, and its
  starting state every ``stride`` steps, at most ``KEPT_STATES`` of them (the stride doubles
  as the steps grow); the reverse pass takes the steps between two kept states again, so a
  solve of N steps of n unknowns keeps about ``(KEPT_STATES + N / KEPT_STATES) n`` numbers
  (3,018 steps of 5,000 unknowns: 34 MiB at the peak of its gradient, against 606 MiB with
  SciPy's dense output kept). With ``dense_output``, events or the other methods,
  ``solve_ivp`` keeps the forward solve's dense output (a few vectors per step) for the
  reverse pass; ``odeint`` keeps its outputs and solves each interval between them again in
  the reverse pass.
  ``dense_output=True`` gives ``sol.sol(t)`` differentiable in ``y0`` and the parameters.
  A ``jac=`` given as a matrix (dense or sparse) of differentiated values steers the implicit
  methods' Newton iterations on its numbers: the derivatives come from ``fun``.
* The solver classes stepped by the program (``s = RK45(fun, t0, y0, t_bound)``, then
  ``s.step()`` in a loop, reading ``s.t``, ``s.y``, ``s.dense_output()``): for **RK23, RK45
  and DOP853**, SciPy's own steps run on the differentiated values, their step size control
  too, so the derivative is that of every value SciPy computes, the step sizes' dependence on
  the inputs included.
  Radau, BDF and LSODA refuse differentiated values with an error naming ``solve_ivp``,
  which differentiates all of them.
* ``scipy.integrate.ode`` (``set_integrator('dopri5')``, ``'dop853'``, ``'vode'``,
  ``'lsoda'``; ``integrate(t)`` in a loop): SciPy's compiled integrator on the plain values
  (its values bit for bit, its state carried from call to call), each integration
  differentiated in the state it starts from and the values the right-hand side reads (its
  closure, ``set_f_params``) as ``odeint``'s between its two times. ``complex_ode`` refuses.
* ``quad`` and ``quad_vec``: SciPy's value; the derivative in the parameters is the integral
  of the integrand's pullback (or, in forward mode, of its tangent), to the integral's
  tolerances and break points (of ``quad``: QUADPACK's ``quad`` of each of its entries, with
  the value's settings, the pullback computed once at each point they share; of
  ``quad_vec``: ``quad_vec``), and in the limits ``f(b)`` and ``-f(a)``. With ``quad``'s
  ``weight``, the derivative's integral takes the same weight, and in the
  limits (``cos`` and ``sin`` only) ``f(b) w(b)``; in a traced ``wvar`` ω (``cos`` and ``sin``)
  to first order, ``∂/∂ω ∫ f(x) cos(ωx) dx = ∫ -x f(x) sin(ωx) dx``, a weighted ``quad`` too.
  ``quad(complex_func=True)``: SciPy's ``quad`` of the real part and of the imaginary part,
  each so. ``nquad``: SciPy's nesting of
  ``quad`` calls (the innermost over the first variable, each range and option function
  called as SciPy calls it), each ``quad`` differentiated so, and the limits given by range
  functions of the parameters with them.

The times (``t_span``, ``t_eval``, ``odeint``'s ``t``, ``sol.sol``'s ``t``) are differentiated
too: an output at time ``t`` moves with it as ``f(t, y(t))``, a later start moves ``y0`` back
by ``f(t0, y0)``. So are events: an event time ``t_e``, a root of ``g(t, y(t))``, has the
derivative ``-dg / ġ`` (the implicit function theorem, ``ġ = ∂g/∂t + ∂g/∂y · f``), and
``sol.t_events``, ``sol.y_events`` and the end of a solve a terminal event stopped move with
it. Second derivatives (``mutad.hvp``, ``mutad.hessian``, a gradient of a gradient) in every
order of the modes: under another differentiation, forward mode solves the state and its
tangent together, and reverse mode the state and its sensitivity matrix ∂y/∂(y0, θ), each
by a ``solve_ivp`` that the enclosing differentiation differentiates in its turn; through
``quad`` and ``quad_vec``, the derivative's integral is itself a differentiated ``quad_vec``.
Refused, with an error that says so: second derivatives with respect to times and event times
(differentiated to first order), outputs at the step times SciPy's step size control chose
(no ``t_eval``; the ends of the interval excepted), and a derivative of what a function given
to ``solve_ivp``, ``odeint``, ``ode``, ``quad`` or ``quad_vec`` wrote into an array the
program reads after the solve (a work buffer in its closure, a module-level array): the array
holds what SciPy's last call of the function left, as NumPy's run leaves it, but those values
depend on the differentiated ones through the solver's iterations (forward mode gives them a
NaN tangent).
"""

import contextlib
import functools
import hashlib
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as _sparse

# SciPy's functions from the modules that define them: the allocation mode swaps the public
# module's names for the stand-ins below while a differentiation runs.
from scipy.integrate import _bvp, _odepack_py, _quad_vec, _quadpack_py, _quadrature
from scipy.integrate._ivp import ivp as _ivp
from scipy.integrate import _ode
from scipy.integrate._ivp import bdf as _bdf
from scipy.integrate._ivp import lsoda as _lsoda
from scipy.integrate._ivp import radau as _radau
from scipy.integrate._ivp import rk as _rk

from ..core.allocation import (STATE, _in_mode, allocate, by_user_code, plain_allocation,
                               user_object)
from ..api import grad, jacobian, jvp, pullback, stop_gradient
from ..custom import Adjoint
from ..core.errors import (ConversionError, InvalidArgumentError, UnsupportedOperationError,
                           UntracedWriteError)
from ..engines.arraylike import carries_derivative, settled
from ..engines import products
from ..engines.session import kept_state_writable
from ..core.levels import ACTIVE, Tracer, handled, innermost
from ..core.registry import defroute
from ..core.trees import REGISTERED, flatten
from ..core.debug import Warnings
from ..core.views import memory, weaken
from ._adjoints import (BuffersWritten, Value, array_argument, events_at_user_lines,
                        derivative_runs, found_again, outside_differentiations,
                        refused_attribute, scipy_ran, scipys_value)
from .optimize import (_as_array, _not_replayed, _root_linearization, _solution, _written_back,
                       _with_derivatives)
from .optimize import _constant as _allocated
from .optimize import _plain_call as _plain_arguments
from .optimize import _result as _bvp_result

__all__ = ["BDF", "DOP853", "LSODA", "RK23", "RK45", "Radau", "complex_ode", "cumulative_simpson",
           "cumulative_trapezoid", "dblquad", "nquad", "ode", "odeint", "quad", "quad_vec", "romb",
           "simpson", "solve_ivp", "tplquad", "trapezoid"]


def _routed(original):
    """Register the decorated function as ``original``'s stand-in (``registry.defroute``): user
    code calling SciPy's name reaches it while a differentiation runs."""
    def register(stand_in):
        # SciPy's name; the module, signature and documentation stay mutad's.
        functools.update_wrapper(stand_in, original, ("__name__", "__qualname__"))
        del stand_in.__wrapped__
        defroute(original, stand_in)
        return stand_in
    return register


def _followed(*items):
    return innermost(items) is not None


# ----------------------------------------------------------------------------------------------
# Quadratures of samples: SciPy's steps, in calls mutad differentiates


def _array(a):
    """``a`` as SciPy's ``np.asarray(a)`` reads it: a list holding traced numbers as one traced
    array (``_as_array``), a traced array as itself."""
    return _as_array(a) if _followed(a) else np.asarray(a)


def _along(ndim, axis, key):
    index = [slice(None)] * ndim
    index[axis] = key
    return tuple(index)


@_routed(_quadrature.trapezoid)
def trapezoid(y: Any, x: Any = None, dx: float = 1.0,
              axis: int = -1) -> Any:
    """SciPy's ``trapezoid``, differentiated in ``y`` and ``x``: SciPy's formula, summed in y's
    floating dtype as SciPy sums it (NumPy's ``trapezoid`` promotes with ``x``: a float32 y
    over float64 x is float32 in SciPy, a complex x's imaginary part is dropped)."""
    if not _followed(y, x, dx):
        return _quadrature.trapezoid(y, x, dx, axis)
    y = _array(y)
    dtype = y.dtype if y.dtype.kind in "fc" else np.dtype(np.float64)
    later, earlier = [slice(None)] * y.ndim, [slice(None)] * y.ndim
    later[axis], earlier[axis] = slice(1, None), slice(None, -1)
    later, earlier = tuple(later), tuple(earlier)
    if x is None:
        d = dx
    else:
        x = _array(x)
        if x.ndim == 1:
            along: list[slice | None] = [None] * y.ndim
            along[axis] = slice(None)
            d = (x[1:] - x[:-1])[tuple(along)]
        else:  # (an n-d x broadcast to y)
            x = np.broadcast_to(x, y.shape)
            d = x[later] - x[earlier]
    return np.sum(d * (y[later] + y[earlier]) / 2.0, axis=axis, dtype=dtype)


def _ratio(num, den):
    """``num / den`` where ``den`` is not zero, else 0 (SciPy's ``true_divide(..., where=)``)."""
    nonzero = den != 0
    return np.where(nonzero, num / np.where(nonzero, den, 1.0), 0.0)


def _basic_simpson(y, start, stop, x, dx, axis):
    nd = np.ndim(y)
    slice0 = _along(nd, axis, slice(start, stop, 2))
    slice1 = _along(nd, axis, slice(start + 1, stop + 1, 2))
    slice2 = _along(nd, axis, slice(start + 2, stop + 2, 2))
    if x is None:  # even spacing
        result = np.sum(y[slice0] + 4.0 * y[slice1] + y[slice2], axis=axis)
        return result * (dx / 3.0)
    h = np.diff(x, axis=axis)
    # (SciPy's astype(float): a float32 x's spacings widened, a complex one's real part)
    h0, h1 = _as_float64(h[slice0]), _as_float64(h[slice1])
    hsum, hprod = h0 + h1, h0 * h1
    h0divh1 = _ratio(h0, h1)
    tmp = hsum / 6.0 * (y[slice0] * (2.0 - _ratio(1.0, h0divh1))
                        + y[slice1] * (hsum * _ratio(hsum, hprod))
                        + y[slice2] * (2.0 - h0divh1))
    return np.sum(tmp, axis=axis)


@_routed(_quadrature.simpson)
def simpson(y: Any, x: Any = None, *, dx: float = 1.0,
            axis: int = -1) -> Any:
    """SciPy's ``simpson``, differentiated in ``y`` and ``x``: its steps, Cartwright's
    correction for an even number of samples included."""
    if not _followed(y, x, dx):
        return _quadrature.simpson(y, x=x, dx=dx, axis=axis)
    y = _array(y)
    nd, n = np.ndim(y), np.shape(y)[axis]
    if x is not None:
        x = _array(x)
        if np.ndim(x) == 1:
            shape = [1] * nd
            shape[axis] = np.shape(x)[0]
            x = np.reshape(x, tuple(shape))
        elif np.ndim(x) != nd:
            raise ValueError("If given, shape of x must be 1-D or the same as y.")
        if np.shape(x)[axis] != n:
            raise ValueError("If given, length of x along axis must be the same as y.")
    if n % 2:
        return _basic_simpson(y, 0, n - 2, x, dx, axis)
    last, before, third = (_along(nd, axis, i) for i in (-1, -2, -3))
    if n == 2:
        width = dx if x is None else x[last] - x[before]
        return 0.0 + 0.5 * width * (y[last] + y[before])
    result = _basic_simpson(y, 0, n - 3, x, dx, axis)
    if x is None:
        h = [np.float64(dx), np.float64(dx)]
    else:  # the last two spacings
        diffs = np.diff(x, axis=axis)
        h = [np.squeeze(diffs[_along(nd, axis, slice(-2, -1))], axis=axis),
             np.squeeze(diffs[_along(nd, axis, slice(-1, None))], axis=axis)]
    # Cartwright's correction for the last interval, as SciPy computes it.
    alpha = _ratio(2 * h[1] ** 2 + 3 * h[0] * h[1], 6 * (h[1] + h[0]))
    beta = _ratio(h[1] ** 2 + 3.0 * h[0] * h[1], 6 * h[0])
    eta = _ratio(1 * h[1] ** 3, 6 * h[0] * (h[0] + h[1]))
    return result + (alpha * y[last] + beta * y[before] - eta * y[third]) + 0.0


@_routed(_quadrature.cumulative_trapezoid)
def cumulative_trapezoid(y: Any, x: Any = None, dx: float = 1.0,
                         axis: int = -1, initial: float | None = None) -> Any:
    """SciPy's ``cumulative_trapezoid``, differentiated in ``y`` and ``x``."""
    if not _followed(y, x, dx):
        return _quadrature.cumulative_trapezoid(y, x, dx, axis, initial)
    y = _array(y)
    nd = np.ndim(y)
    if np.shape(y)[axis] == 0:
        raise ValueError("At least one point is required along `axis`.")
    if x is None:
        d = dx
    elif np.ndim(x) == 1:
        d = np.reshape(np.diff(x), tuple(-1 if i == axis % nd else 1 for i in range(nd)))
    elif np.ndim(x) != nd:
        raise ValueError("If given, shape of x must be 1-D or the same as y.")
    else:
        d = np.diff(x, axis=axis)
    if x is not None and np.shape(d)[axis] != np.shape(y)[axis] - 1:
        raise ValueError("If given, length of x along axis must be the same as y.")
    res = np.cumsum(d * (y[_along(nd, axis, slice(1, None))]
                         + y[_along(nd, axis, slice(None, -1))]) / 2.0, axis=axis)
    if initial is not None:
        if initial != 0:
            raise ValueError("`initial` must be `None` or `0`.")
        if not np.isscalar(initial):
            raise ValueError("`initial` parameter should be a scalar.")
        shape = list(np.shape(res))
        shape[axis] = 1
        res = np.concatenate([np.zeros_like(res, shape=tuple(shape)), res], axis=axis)
    return res


def _as_float64(dx):
    """A traced ``dx`` as ``np.asarray(dx, dtype=np.float64)`` reads it."""
    if np.iscomplexobj(dx):
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
        dx = np.real(dx)
    return dx.astype(np.float64)


@_routed(_quadrature.romb)
def romb(y: Any, dx: float = 1.0, axis: int = -1, show: Any = False) -> Any:
    """SciPy's ``romb``, differentiated in ``y`` and ``dx``: its trapezoids and Richardson
    extrapolations, in SciPy's order. ``show`` prints SciPy's own table."""
    if not _followed(y, dx):
        return _quadrature.romb(y, dx, axis, show)
    y = _array(y)
    nd = np.ndim(y)
    intervals = np.shape(y)[axis] - 1
    n, k = 1, 0
    while n < intervals:
        n <<= 1
        k += 1
    if n != intervals:
        raise ValueError("Number of samples must be one plus a non-negative power of 2.")
    if show:  # SciPy prints the table of the same values
        _quadrature.romb(stop_gradient(y), stop_gradient(dx), axis, show)
    # (SciPy reads dx as a float64: a float32 one widens, a complex one loses its imaginary
    # part, with NumPy's warning)
    h = intervals * (np.asarray(dx, dtype=np.float64) if not _followed(dx)
                     else _as_float64(dx))
    R = {(0, 0): (y[_along(nd, axis, 0)] + y[_along(nd, axis, -1)]) / 2.0 * h}
    start = stop = step = intervals
    for i in range(1, k + 1):
        start >>= 1
        samples = y[_along(nd, axis, slice(start, stop, step))]
        step >>= 1
        R[i, 0] = 0.5 * (R[i - 1, 0] + h * np.sum(samples, axis=axis))
        for j in range(1, i + 1):
            prev = R[i, j - 1]
            R[i, j] = prev + (prev - R[i - 1, j - 1]) / ((1 << (2 * j)) - 1)
        h = h / 2.0
    return R[k, k]


def _simpson_pieces(y, dx, unequal):
    """The integral over each interval but the last from the parabola through it and the next
    two samples (SciPy's equations; ``dx`` the spacings), along the last axis."""
    f1, f2, f3 = y[..., :-2], y[..., 1:-1], y[..., 2:]
    if not unequal:
        d = dx[..., :-1]
        return d / 3 * (5 * f1 / 4 + 2 * f2 - f3 / 4)
    x21, x32 = dx[..., :-1], dx[..., 1:]
    x31 = x21 + x32
    x21_x31 = x21 / x31
    x21_x32 = x21 / x32
    x21x21_x31x32 = x21_x31 * x21_x32
    coeff1 = 3 - x21_x31
    coeff2 = 3 + x21x21_x31x32 + x21_x31
    coeff3 = -x21x21_x31x32
    return x21 / 6 * (coeff1 * f1 + coeff2 * f2 + coeff3 * f3)


def _cumulative_simpson_sum(y, dx, unequal):
    """SciPy's ``_cumulatively_sum_simpson_integrals``: each interval's integral from the
    parabola forwards (even intervals) or backwards (odd ones and the last), summed."""
    forwards = _simpson_pieces(y, dx, unequal)
    backwards = np.flip(_simpson_pieces(np.flip(y, axis=-1), np.flip(dx, axis=-1), unequal),
                        axis=-1)
    m = np.shape(forwards)[-1]  # intervals less one
    # SciPy writes forwards[::2] at the even intervals, backwards[::2] at the odd ones and
    # backwards[-1] at the last: one gather from both, which mutad differentiates.
    source = np.array([m + m - 1 if p == m else (p if p % 2 == 0 else m + p - 1)
                       for p in range(m + 1)], dtype=np.intp)
    pieces = np.take(np.concatenate([forwards, backwards], axis=-1), source, axis=-1)
    return np.cumsum(pieces, axis=-1)


def _floating(a):
    """SciPy's ``xp_promote(a, force_floating=True)``: integers as float64."""
    return a * 1.0 if np.result_type(a).kind in "biu" else a


@_routed(_quadrature.cumulative_simpson)
def cumulative_simpson(y: Any, *, x: Any = None, dx: Any = 1.0, axis: int = -1,
                       initial: Any = None) -> Any:
    """SciPy's ``cumulative_simpson``, differentiated in ``y``, ``x``, ``dx`` and ``initial``:
    its steps, in calls mutad differentiates."""
    if not _followed(y, x, dx, initial):
        return _quadrature.cumulative_simpson(y, x=x, dx=dx, axis=axis, initial=initial)
    y = _floating(_array(y))
    shape = np.shape(y)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"`axis={axis}` is not valid for `y` with `y.ndim={len(shape)}`.")
    axis = axis % len(shape)
    swapped = np.swapaxes(y, axis, -1)
    if shape[axis] < 3:
        res = np.swapaxes(cumulative_trapezoid(y, x, dx=dx, axis=axis), axis, -1)
    elif x is not None:
        x = _floating(x)
        if not (np.shape(x) == shape or (np.ndim(x) == 1 and np.shape(x)[0] == shape[axis])):
            raise ValueError("If given, shape of `x` must be the same as `y` or 1-D with the "
                             "same length as `y` along `axis`.")
        x = np.broadcast_to(x, np.shape(swapped)) if np.ndim(x) == 1 else np.swapaxes(
            x, axis, -1)
        spacings = np.diff(x, axis=-1)
        if np.any(spacings <= 0):  # (a decision on the traced values: a replay's guard)
            raise ValueError("Input x must be strictly increasing.")
        res = _cumulative_simpson_sum(swapped, spacings, True)
    else:
        dx = _floating(dx)
        one_point = shape[:axis] + (1,) + shape[axis + 1:]
        if not (np.ndim(dx) == 0 or np.shape(dx) == one_point):
            raise ValueError("If provided, `dx` must either be a scalar or have the same "
                             "shape as `y` but with only 1 point along `axis`.")
        spacings = np.swapaxes(np.broadcast_to(
            dx, shape[:axis] + (shape[axis] - 1,) + shape[axis + 1:]), axis, -1)
        res = _cumulative_simpson_sum(swapped, spacings, False)
    if initial is not None:
        initial = _floating(initial)
        one_point = shape[:axis] + (1,) + shape[axis + 1:]
        if not (np.ndim(initial) == 0 or np.shape(initial) == one_point):
            raise ValueError("If provided, `initial` must either be a scalar or have the same "
                             "shape as `y` but with only 1 point along `axis`.")
        initial = np.swapaxes(np.broadcast_to(initial, one_point), axis, -1)
        res = res + initial
        res = np.concatenate((initial, res), axis=-1)
    return np.swapaxes(res, -1, axis)


# ----------------------------------------------------------------------------------------------
# User functions with differentiated parameters: in args=, or closed over


class _Parameters:
    """The differentiated values a user function ``fun(*leading, *args)`` reads: the arrays of
    ``args``, those its closure cells hold (and those of the functions it closes over), and
    those the attributes of the user's objects in its cells hold (a dataclass of parameters:
    ``-p.k * y``), each attribute taken as a cell is (``_Attribute``), and those a
    ``functools.partial`` binds, taken as one cell (``_PartialBinding``).

    The solvers run the function on plain values and its pullback on values of their own, so
    the cells are set to those values while it runs and put back after (``bound``). The
    function's other cells (a loop's variable, a number the caller rebinds later) hold, once
    the forward solve is done (``freeze``), what they held then whenever it runs again: a
    derivative is taken of the function the solve called.
    """

    def __init__(self, name, functions, args):
        self.name = name
        self.args_leaves, self.args_rebuild = flatten(tuple(args))
        self.cells = []  # (cell, what it holds, its leaves, rebuild)
        self.others = []  # the other cells, and (once frozen) what they held
        self.frozen = None
        self.objects = set()  # the objects whose attributes are followed
        seen = set()  # functions and cells met (functions often share a cell: fun and jac)
        stack = [f for f in functions if f is not None]
        while stack:
            f = stack.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            if isinstance(f, functools.partial):
                # what it binds is read as a closure's cells are (functools.partial(rhs, k=k))
                bound = (f.args, f.keywords)
                if _holds_traced(bound):
                    leaves, rebuild = flatten(bound)
                    self.cells.append((_PartialBinding(f), bound, leaves, rebuild))
                stack.extend(v for v in (*f.args, *f.keywords.values())
                             if isinstance(v, (types.FunctionType, functools.partial,
                                               types.MethodType)))
                stack.append(f.func)
                continue
            if isinstance(f, types.MethodType):
                self._attributes(f.__self__)
                f = f.__func__
            elif not isinstance(f, types.FunctionType):
                # a callable object (an interpolant, the user's class with __call__): what
                # its attributes hold, as an object's its closure holds, and its __call__'s
                self._attributes(f)
                f = getattr(type(f), "__call__", None)
            for cell in getattr(f, "__closure__", None) or ():
                if id(cell) in seen:
                    continue
                seen.add(id(cell))
                try:
                    held = cell.cell_contents
                except ValueError:  # a cell not yet filled
                    continue
                # (a registered structure too: a traced sparse matrix, A @ y)
                if isinstance(held, Tracer) or (type(held) in (list, tuple, dict, *REGISTERED)
                                                and any(isinstance(v, Tracer)
                                                        for v in flatten(held)[0])):
                    leaves, rebuild = flatten(held)
                    self.cells.append((cell, held, leaves, rebuild))
                    continue
                self.others.append(cell)
                if isinstance(held, (types.FunctionType, functools.partial, types.MethodType)):
                    stack.append(held)
                self._attributes(held)
        # Positions among the leaves (args' first, then the cells') of the differentiated ones.
        leaves = self.leaves()
        self.followed = [i for i, v in enumerate(leaves) if isinstance(v, Tracer)]
        # One array met in several places (args=(k, k), a closure cell beside an object
        # holding it) is one value: each of its places is bound to it, and its derivative,
        # the sum of theirs, is taken once (two values would each receive the sum: the
        # differentiation of the bound function sees one array)
        distinct = {}
        self.slots = [distinct.setdefault(id(leaves[i]), len(distinct)) for i in self.followed]
        self.distinct = [self.followed[self.slots.index(k)] for k in range(len(distinct))]
        # The leaves carrying derivatives: the user's function gets their numbers read-only
        # (``_read_only``); a constant (a work buffer the function allocated, written and
        # returned by the right-hand side) stays writable.
        self.guarded = {i for i in self.followed if carries_derivative(leaves[i])}

    def _attributes(self, held):
        """Follow the differentiated values the attributes of ``held`` hold (an object a
        function closes over, is bound to or is), once however often it is met."""
        if id(held) in self.objects:
            return
        self.objects.add(id(held))
        if isinstance(held, dict) and type(held) is not dict:
            # SciPy's result (solve_ivp's OdeResult, OptimizeResult), a dict read by attribute
            # (s.y, s.sol): its items as attributes, and what the objects among them hold
            followed = {key: value for key, value in held.items() if _holds_traced(value)}
            for key, value in followed.items():
                leaves, rebuild = flatten(value)
                self.cells.append((_Item(held, key), value, leaves, rebuild))
            self.others.extend(_Item(held, key) for key in held if key not in followed)
            for key, value in held.items():
                if key not in followed:
                    self._attributes(value)
        followed = dict(_followed_attributes(held))
        for name, value in followed.items():
            leaves, rebuild = flatten(value)
            self.cells.append((_Attribute(held, name), value, leaves, rebuild))
        if followed:  # its other attributes, as the other cells: what they hold
            self.others.extend(_Attribute(held, name)  # when the solve is done
                               for name in vars(held) if name not in followed)

    def leaves(self):
        return [*self.args_leaves, *(v for _, _, leaves, _ in self.cells for v in leaves)]

    def values(self):
        """The differentiated leaves, in order, each array once; one that shares memory with
        an earlier one (x beside its view x[1:]) as a copy of its own: the differentiations of
        the function, which take arrays sharing memory for one buffer, would give each the
        derivative of both (the copies' derivatives are summed back into the memory)."""
        leaves = [self.leaves()[i] for i in self.distinct]
        return [v.copy() if any(np.may_share_memory(memory(v), memory(u)) for u in leaves[:k])
                else v for k, v in enumerate(leaves)]

    def _filled(self, values):
        leaves = self.leaves()
        for i, k in zip(self.followed, self.slots, strict=True):
            leaves[i] = _read_only(values[k]) if i in self.guarded else values[k]
        return leaves

    def args(self, values):
        """``args`` with the differentiated leaves replaced by ``values``."""
        return self.args_rebuild(self._filled(values)[:len(self.args_leaves)])

    def bound(self, values):
        """A context in which the closure cells hold ``values`` for their differentiated
        leaves (and ``args(values)`` is what to pass), and the others what they held when the
        forward solve was done (``freeze``)."""
        return _Bound(self, self._filled(values)[len(self.args_leaves):])

    def freeze(self):
        """The forward solve is done: from now on the function runs with its other cells
        holding what they hold now (the caller's loop may go on and rebind them)."""
        if self.frozen is None:
            self.frozen = [cell.cell_contents for cell in self.others]


def _followed_attributes(held):
    """``(name, value)`` of the attributes of ``held``, an object of the user's (not NumPy's,
    SciPy's, mutad's), holding differentiated values (in lists, tuples and dicts too); of one
    of mutad's that reads its traced values from attributes when called (an interpolant of a
    traced table: ``read_when_called``), those attributes."""
    names = getattr(type(held), "read_when_called", None)
    if names is not None:
        return [(name, vars(held)[name]) for name in names
                if any(isinstance(v, Tracer) for v in flatten(vars(held)[name])[0])]
    if not user_object(held):
        return []
    return [(name, value) for name, value in vars(held).items() if _holds_traced(value)]


def _holds_traced(value):
    """Whether ``value`` is a differentiated value, or a list, tuple or dict holding some."""
    return isinstance(value, Tracer) or (type(value) in (list, tuple, dict) and any(
        isinstance(v, Tracer) for v in flatten(value)[0]))


class _Attribute:
    """An attribute of an object a function closes over, read and set as a closure cell is
    (``cell_contents``), the object's own ``__setattr__`` aside (a frozen dataclass's)."""

    __slots__ = ("owner", "name")

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    @property
    def cell_contents(self):
        return self.owner.__dict__[self.name]

    @cell_contents.setter
    def cell_contents(self, value):
        self.owner.__dict__[self.name] = value


class _Item(_Attribute):
    """An item of a dict SciPy returns (``OdeResult``), read and set as a closure cell is."""

    __slots__ = ()

    @property
    def cell_contents(self):
        return self.owner[self.name]

    @cell_contents.setter
    def cell_contents(self, value):
        self.owner[self.name] = value


class _PartialBinding:
    """The arguments and keywords a ``functools.partial`` binds, read and set as a closure cell
    is (``(args, keywords)``), through the state that pickling sets."""

    __slots__ = ("owner",)

    def __init__(self, owner):
        self.owner = owner

    @property
    def cell_contents(self):
        return self.owner.args, self.owner.keywords

    @cell_contents.setter
    def cell_contents(self, value):
        args, keywords = value
        self.owner.__setstate__((self.owner.func, args, keywords, self.owner.__dict__ or None))


def _read_only(value):
    """``value``, bound for the user's function: a plain array (the numbers of an array
    carrying a derivative) as a read-only view of it. The function runs there on plain
    numbers, which the differentiation does not see: a write into one (a differentiated
    value, a buffer holding some) would leave in it values of the solver's last call whose
    derivative is lost, or change the caller's array (``_Bound`` refuses it)."""
    if type(value) is not np.ndarray or not value.flags.writeable:
        return value
    view = value.view()
    view.flags.writeable = False
    return view


_WRITTEN = ("a function given to it writes into an array holding differentiated values (one "
            "of the differentiated arguments, or a buffer in its closure or in args= holding "
            "values computed from them): the solver runs it on plain numbers, so the array "
            "would hold values of the solver's last call, whose derivative mutad does not "
            "follow. Let the function return new arrays (allocate the buffer inside it: "
            "buf = np.empty(n)), and compute what the buffer held from the solution.")


class _Bound:
    def __init__(self, parameters, cell_leaves):
        self.parameters, self.cell_leaves = parameters, cell_leaves

    def __enter__(self):
        parameters = self.parameters
        self.held = []
        start = 0
        for cell, _, leaves, rebuild in parameters.cells:
            self.held.append(cell.cell_contents)
            cell.cell_contents = rebuild(self.cell_leaves[start:start + len(leaves)])
            start += len(leaves)
        if parameters.frozen is not None:
            for cell, frozen in zip(parameters.others, parameters.frozen, strict=True):
                self.held.append(cell.cell_contents)
                cell.cell_contents = frozen

    def __exit__(self, kind, error, traceback):
        cells = [cell for cell, *_ in self.parameters.cells]
        if self.parameters.frozen is not None:
            cells += self.parameters.others
        for cell, held in zip(reversed(cells), reversed(self.held), strict=True):
            cell.cell_contents = held
        if kind is ValueError and "read-only" in str(error):  # NumPy's, on _read_only's views
            raise UnsupportedOperationError(f"{self.parameters.name}: {_WRITTEN}") from error


def _buffers_written(name, parameters, inputs):
    """The block of a solve whose user functions run on plain numbers (``BuffersWritten``):
    the buffers it watches besides the module-level arrays are the constants among
    ``parameters`` (a work buffer the differentiated function allocated, bound to its numbers
    for SciPy's run)."""
    leaves = parameters.leaves()
    return BuffersWritten(name, [leaves[i] for i in parameters.followed
                                 if i not in parameters.guarded], inputs)


_HIDDEN = ("the function reads a differentiated array that is neither in args= nor in its "
           "closure nor in an attribute of an object its closure holds (a global, say); pass "
           "it with args=.")


def _plain_call(name, fn):
    """``fn`` for SciPy: run on plain values, its outputs plain arrays. An output that
    depends on the differentiated arguments does not convert: ``fn`` read a differentiated
    array mutad did not find."""
    if fn is None or not callable(fn):
        return fn

    def call(*a):
        try:
            y = fn(*a)
            return y if _sparse.issparse(y) else np.asarray(y)  # (a sparse Jacobian: SciPy's)
        except (ConversionError, UntracedWriteError) as error:
            if len(ACTIVE.running) > 1:  # what it read is an enclosing differentiation's
                raise UnsupportedOperationError(f"{name}: {_NESTED}") from error
            raise UnsupportedOperationError(f"{name}: {_HIDDEN}") from error
    return call


_NESTED = ("under a differentiation of a differentiation (a hessian, a gradient of a gradient) "
           "the function reads an array an enclosing one follows from its closure, which "
           "the solver's rule does not reach there; pass it with args=, through which every "
           "order is differentiated.")


@contextlib.contextmanager
def _allocation_followed():
    """The allocation mode back on inside a ``plain_allocation`` block, for a differentiation
    that runs there (a right-hand side that is itself a ``jvp``)."""
    plain, STATE.plain = STATE.plain, 0
    try:
        yield
    finally:
        STATE.plain = plain


def _plain(x):
    return memory(x) if isinstance(x, Tracer) else x


def _flat(cotangents, values):
    """The cotangents (None: zero) of ``values``, raveled into one vector."""
    parts = [np.zeros(np.size(v)) if c is None else np.ravel(c)
             for c, v in zip(cotangents, values, strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0)


def _unflat(vector, values):
    out, start = [], 0
    for v in values:
        size = np.size(v)
        out.append(np.reshape(vector[start:start + size], np.shape(v)))
        start += size
    return out


def _constant(name, x, what):
    """``x`` as plain floats (constants convert), refused if it depends on the differentiated
    arguments."""
    if x is None:
        return None
    try:
        return np.asarray(x, dtype=float)
    except ConversionError:
        raise UnsupportedOperationError(
            f"{name}: {what} depends on the differentiated arguments, and mutad does not "
            "differentiate it. Pass it as a constant (mutad.stop_gradient).") from None


def _times(times):
    """``times`` as plain floats, and whether they depend on the differentiated arguments."""
    if times is None:
        return None, False
    try:
        return np.asarray(times, dtype=float), False  # constants convert
    except ConversionError as error:
        handled(error)
        return np.asarray(stop_gradient(times), dtype=float), True


def _refuse_second_order(name, what):
    """Times and event times are differentiated to first order (the solution moved along f):
    refused inside a nested differentiation, whose second derivatives would miss y''."""
    if len(ACTIVE.running) > 1:
        raise UnsupportedOperationError(
            f"{name}: {what} inside a nested differentiation (hvp, hessian): mutad "
            "differentiates them to first order only. Pass the times as constants "
            "(mutad.stop_gradient), or solve without events, for second derivatives.")


def _shift(times):
    """``t - stop_gradient(t)``: zero, with the derivative of ``t``. A value computed at the
    plain time ``t₀`` plus its time derivative times this is the same value, bit for bit, and
    has the derivative in ``t`` too."""
    return times - stop_gradient(times)


def _moved(rhs, Y, times, plain_times):
    """The solution ``Y`` (n, k) at ``plain_times``, moved with ``times`` (traced): each
    column plus ``f(t, y) (t - t₀)``, ``y' = f`` being the derivative in the time."""
    shifts = _shift(np.reshape(times, (-1,)))
    return np.stack([Y[:, i] + rhs(t, Y[:, i]) * shifts[i]
                     for i, t in enumerate(np.ravel(plain_times))], axis=1)


def _settings(name, options, names):
    """``options`` with the numbers among ``names`` (tolerances, step sizes) plain."""
    return {key: _constant(name, value, f"{key}=") if key in names else value
            for key, value in options.items()}


# ----------------------------------------------------------------------------------------------
# Initial value problems: the discrete and continuous adjoints, and forward sensitivities


class _Problem:
    """One differentiated initial value problem: ``rhs(t, y, values)`` in solve_ivp's order,
    its parameters, the solver's settings, and the forward solve (``forward``) with what it
    keeps for the reverse pass."""

    # It keeps what its call's forward solve computed: a replay of the call cannot reuse it
    # (``replay._holds_arrays_of_the_call``).
    replays_on_its_operands = False

    def __init__(self, name, rhs, parameters, t0, t_end, method, rtol, atol, max_step):
        self.name, self.rhs, self.parameters = name, rhs, parameters
        self.t0, self.method = t0, method
        self.direction = -1.0 if t_end < t0 else 1.0
        self.rtol, self.atol = rtol, float(np.min(atol))
        self.max_step = max_step
        self.solved = None  # (y0, values): copies of the inputs the forward solve ran on
        # copies of the values as the solve left them (a buffer the right-hand side writes
        # into holds its last call's values: ``BuffersWritten``)
        self.left: Any = None
        self.solution: Any = None  # solve_ivp's result of that solve
        self.adaptive = False  # whether the outputs are at the solver's own step times
        # Set by the function that made the problem: the forward solve on plain values, and
        # what it keeps (solve_ivp: the dense output; odeint: its output times).
        self.forward: Callable[..., Any] | None = None
        self.dense: Any = None
        self.path: Callable[..., Any] | None = None
        self.times: Any = None
        # An explicit Runge-Kutta solve's steps (a _Record: the reverse and forward passes go
        # through them again), or None.
        self.steps: Any = None

    def solves(self, y0, values):
        """Whether the forward solve is to run for ``y0`` and ``values``: the first time; the
        solve kept serves the rules that run again in the same call."""
        return self.solved is None

    def kept(self):
        """What the forward solve keeps (``keep`` puts it back)."""
        return self.solved, self.solution, self.dense, self.path, self.steps

    def keep(self, solve):
        """Keep ``solve`` (a ``kept()``), or, given None, release what the solve kept: the
        next one solves again."""
        self.solved, self.solution, self.dense, self.path, self.steps = \
            (None,) * 5 if solve is None else solve

    def check_inputs(self, y0, values):
        """The solution kept is of the inputs it was solved for: refuse others (the inputs
        were changed in place after the solve)."""
        y0_then, values_then = self.solved[0], self.left
        same = np.array_equal(y0_then, y0) and all(
            np.array_equal(a, b) for a, b in zip(values_then, values, strict=True))
        if not same:
            raise UnsupportedOperationError(
                f"{self.name}: the inputs of the solve were changed in place after it "
                "returned; evaluate sol.sol before changing them.")

    def _solve_ivp(self, fun, t_span, y0, t_eval=None, dense_output=False, first_step=None,
                   constant_tail=0):
        """``solve_ivp`` with the problem's method and tolerances. The last ``constant_tail``
        components of the state do not enter ``fun`` (the adjoint's μ): the implicit methods
        that take a sparsity are told, so their finite-difference Jacobians skip them."""
        options = {}
        if constant_tail and self.method in ("Radau", "BDF"):
            sparsity = np.zeros((np.size(y0), np.size(y0)))
            sparsity[:, :np.size(y0) - constant_tail] = 1.0
            options["jac_sparsity"] = sparsity
        return _ivp.solve_ivp(fun, t_span, y0, method=self.method, t_eval=t_eval,
                              dense_output=dense_output, rtol=self.rtol, atol=self.atol,
                              max_step=self.max_step, first_step=first_step, **options)

    def _vector_jacobian(self, values):
        """``vjp(t, y, λ)``: ``((∂f/∂y)ᵀ λ, *(∂f/∂θ)ᵀ λ)``, the gradient of λ·f, its program
        recorded once and replayed at each evaluation (re-recorded where a decision of f
        differs). The time is an argument of the replayed program; where f makes it a Python
        number (float(t)), each evaluation is a pullback of f at that number instead."""
        rhs = self.rhs  # (not self: the replay compares what its function reaches, each call)
        replayed = grad(lambda t, y, lam, *p: np.dot(lam, rhs(t, y, p)),
                        argnums=(1, *range(3, 3 + len(values))), replay=True)
        writer = Warnings()

        def vjp(t, y, lam):
            nonlocal replayed
            if replayed is not None:
                try:
                    # Arrays of their own: a program is recorded per layout of its arguments,
                    # and the solvers pass rows of their stage arrays, one offset per stage
                    # (in a replay's reverse pass, its listener's events: events_at_user_lines)
                    with events_at_user_lines(writer):
                        return replayed(np.array(t), np.array(y), np.array(lam), *values)
                except ConversionError as error:
                    handled(error)
                    replayed = None
            _, pull = pullback(lambda y, *p: self.rhs(t, y, p), y, *values)
            return pull(lam)

        return vjp

    def adjoint(self, path, times, dY, y0, values, Y=None):
        """``(dy0, dvalues)`` from the cotangents ``dY[:, i]`` of the solution ``Y[:, i]`` at
        ``times[i]``: through the solver's own steps where they are kept and reproduced
        (``_discrete_adjoint``), else by the continuous adjoint: λ jumps by each cotangent and
        flows back to t0 along ``path(t_from, t_to)`` (a callable y(t))."""
        if self.steps is not None and Y is not None and np.isrealobj(y0):
            found = _discrete_adjoint(self, times, dY, Y, y0, values)
            if found is not None:
                return found
        n = np.size(y0)
        state = np.zeros(n + sum(np.size(v) for v in values))
        t_now, step = None, None
        vjp = self._vector_jacobian(values)

        def back(t_from, t_to, state):
            nonlocal step
            if t_from == t_to:
                return state
            y_at = path(t_from, t_to)

            def rhs(t, s):
                cotangents = vjp(t, y_at(t), s[:n].copy())
                return -np.concatenate([np.ravel(cotangents[0]),
                                        _flat(cotangents[1:], values)])

            # Each interval starts with the step the last one ended with, not a new guess.
            first = None if step is None else min(step, abs(t_to - t_from))
            sol = self._solve_ivp(rhs, (t_from, t_to), state, first_step=first,
                                  constant_tail=state.size - n)
            if not sol.success:
                raise UnsupportedOperationError(f"{self.name}: the adjoint solve failed: "
                                                f"{sol.message}")
            if sol.t.size > 1:
                step = abs(sol.t[-1] - sol.t[-2])
            return sol.y[:, -1]

        for i in sorted(range(times.size), key=lambda i: -self.direction * times[i]):
            if not np.any(dY[:, i]):
                continue
            if t_now is not None:
                state = back(t_now, times[i], state)
            state[:n] += dY[:, i]
            t_now = times[i]
        if t_now is not None:
            state = back(t_now, self.t0, state)
        return np.reshape(state[:n], np.shape(y0)), _unflat(state[n:], values)

    def tangent(self, times, y0, dy0, values, tangents, Y=None):
        """The tangents of the solution ``Y`` at ``times`` (shape ``(n, len(times))``):
        through the solver's own steps where they are kept and reproduced
        (``_discrete_tangent``), else the forward sensitivities, integrated beside the state
        from t0."""
        n = np.size(y0)
        directions = [np.zeros(np.shape(v)) if d is None else d
                      for v, d in zip(values, tangents, strict=True)]
        if self.steps is not None and Y is not None and np.isrealobj(y0):
            found = _discrete_tangent(self, times, Y, y0, dy0, values, directions)
            if found is not None:
                return found

        def rhs(t, z):
            y, s = z[:n], z[n:]
            dy, ds = jvp(lambda y, *p: self.rhs(t, y, p), (y, *values), (s, *directions))
            return np.concatenate([np.ravel(dy), np.ravel(ds)])

        s0 = np.zeros(n) if dy0 is None else np.ravel(dy0)
        out = np.zeros((n, times.size))
        order = np.argsort(self.direction * times, kind="stable")  # in the solve's direction
        t_eval = times[order]
        if not times.size or t_eval[-1] == self.t0:
            out[:] = s0[:, None]
            return out
        sol = self._solve_ivp(rhs, (self.t0, t_eval[-1]), np.concatenate([np.ravel(y0), s0]),
                              t_eval=t_eval)
        if not sol.success:
            raise UnsupportedOperationError(f"{self.name}: the sensitivity solve failed: "
                                            f"{sol.message}")
        out[:, order] = sol.y[n:]
        return out


_RUNGE_KUTTA = {key: solver for solver in (_rk.RK23, _rk.RK45)
                for key in (solver, solver.__name__)}

KEPT_STATES = 32
"""The most states at the start of a step a recorded explicit Runge-Kutta solve keeps (beyond
its first): one every ``stride`` steps, the stride doubling (every other one dropped) when they
would be more. The reverse pass takes the steps between two again, so a solve of N steps of n
unknowns keeps about ``(KEPT_STATES + N / KEPT_STATES) n`` numbers at most."""


def _digest(Q):
    """A fingerprint of a step's stages (``Q = Kᵀ P``, what its dense output reads), to check a
    step taken again is SciPy's, bit for bit, without keeping them."""
    return hashlib.blake2b(np.ascontiguousarray(Q).tobytes(), digest_size=16).digest()


class _Record:
    """What the reverse pass keeps of an explicit Runge-Kutta solve's steps: each step's times
    (``t_old``, ``t``, ``h``) and stages' fingerprint, and its starting state every ``stride``
    steps (``states``)."""

    def __init__(self):
        self.t_old, self.t, self.h, self.digests = [], [], [], []
        self.states, self.stride = {}, 1

    def __len__(self):
        return len(self.t)

    def add(self, t_old, t, y_old, Q):
        k = len(self.t)
        self.t_old.append(t_old)
        self.t.append(t)
        self.h.append(t - t_old)  # as SciPy's step and its dense output take it
        self.digests.append(_digest(Q))
        if k % self.stride == 0:
            self.states[k] = np.array(y_old, dtype=float)
            if len(self.states) > KEPT_STATES + 1:
                self.stride *= 2
                self.states = {i: y for i, y in self.states.items() if i % self.stride == 0}

    @classmethod
    def of_dense_output(cls, interpolants):
        """The record of a solve that kept SciPy's dense output (every state kept)."""
        record = cls()
        record.stride = 0
        for k, d in enumerate(interpolants):
            record.t_old.append(d.t_old)
            record.t.append(d.t)
            record.h.append(d.h)
            record.digests.append(_digest(d.Q))
            record.states[k] = d.y_old
        return record


def _recording(solver_class, record):
    """``solver_class`` (RK23 or RK45) writing each step it takes into ``record``: what
    ``solve_ivp`` is given as its method, so that the solve is SciPy's own, step for step."""
    class Recording(solver_class):
        def step(self):
            y_old = self.y
            message = super().step()
            if self.status != "failed" and self.t != self.t_old:
                record.add(self.t_old, self.t, y_old, self.K.T.dot(self.P))
            return message

    Recording.__name__ = Recording.__qualname__ = solver_class.__name__
    return Recording


class _Steps:
    """An explicit Runge-Kutta solve's own steps (RK23, RK45; ``problem.steps``, a
    ``_Record``), taken again, and where its outputs ``Y`` (at ``times``) lie among them: at
    the start, at the end of step k (no t_eval: the steps' own ends), or inside step k (SciPy's
    dense output there, ``y + h Kᵀ P p(x)``, evaluated for each step's outputs at once, as
    SciPy does). ``again(k)`` takes step k again, from its starting state (kept, or taken
    again from the last one kept before it), and is None where the step or its outputs are not
    SciPy's bit for bit (a right-hand side that reads more than t, y and the parameters): the
    derivatives then come from the continuous adjoint and the forward sensitivities."""

    def __init__(self, problem, times, Y, y0, values):
        self.record, solver = problem.steps, _RUNGE_KUTTA[problem.method]
        self.A, self.B, self.C, self.P, self.s = (solver.A, solver.B, solver.C, solver.P,
                                                  solver.n_stages)
        self.problem, self.values, self.Y, self.times = problem, values, Y, times
        self.n = n = np.size(y0)
        self.count = len(self.record)
        self.start, self.ends, self.inside, self.weights = [], {}, {}, {}
        self.found = self.count > 0 and np.shape(Y) == (n, times.size)
        self.cache = {}  # starting states taken again, of the steps since the last one kept
        if not self.found:
            return
        record, last = self.record, self.count - 1
        ends = problem.direction * np.array(record.t)  # in the solve's direction: ascending
        for j, t in enumerate(times):
            if t == record.t_old[0] and np.array_equal(Y[:, j], np.ravel(y0)):
                self.start.append(j)
            elif problem.adaptive and 1 <= j <= last + 1 and t == record.t[j - 1]:
                self.ends.setdefault(j - 1, []).append(j)  # checked when taken again
            else:
                k = int(np.searchsorted(ends, problem.direction * t, side="left"))
                self.inside.setdefault(min(k, last), []).append(j)
        for k, columns in self.inside.items():
            x = (times[columns] - record.t_old[k]) / record.h[k]
            self.inside[k] = (columns, np.cumprod(np.tile(x, (self.P.shape[1], 1)), axis=0))
            self.weights[k] = record.h[k] * np.dot(self.P, self.inside[k][1])  # ∂Y/∂K

    def f(self, t, y):
        with plain_allocation():
            return np.asarray(self.problem.rhs(t, y, self.values), dtype=float)

    def _state(self, k):
        """The state step k starts from: kept, or taken again from the last one kept."""
        if k in self.record.states:
            return self.record.states[k]
        if k not in self.cache:
            first = max(i for i in self.record.states if i < k)
            self.cache = {first: self.record.states[first]}
            for i in range(first, min(first + self.record.stride, self.count) - 1):
                taken = self._take(i, self.cache[i])
                if taken is None:
                    return None
                self.cache[i + 1] = taken[-1]
        return self.cache.get(k)

    def _take(self, k, y):
        """Step k from ``y``, plain: ``(t, h, Z, y_new)`` with its stages checked against
        SciPy's, ``Z[i]`` the state stage i read (``K[i] = f(t + c_i h, Z[i])``); None where
        it is not SciPy's step."""
        record, A, B, C, P, s = self.record, self.A, self.B, self.C, self.P, self.s
        t, h = record.t_old[k], record.h[k]
        K, Z = np.empty((s + 1, self.n)), [None] * s
        # The first stage is the last step's last, evaluated at that step's end.
        K[0] = self.f(t if k == 0 else record.t_old[k - 1] + record.h[k - 1], y)
        for i in range(1, s):
            Z[i] = y + np.dot(K[:i].T, A[i, :i]) * h
            K[i] = self.f(t + C[i] * h, Z[i])
        y_new = y + h * np.dot(K[:-1].T, B)
        K[-1] = self.f(t + h, y_new)
        Q = K.T.dot(P)
        if _digest(Q) != record.digests[k]:
            return None
        if k in self.inside:  # its outputs, as SciPy's dense output computes them
            columns, p = self.inside[k]
            at = h * np.dot(Q, p)
            at += y[:, None]
            if not np.array_equal(at, self.Y[:, columns]):
                return None
        if any(not np.array_equal(y_new, self.Y[:, j]) for j in self.ends.get(k, ())):
            return None
        return t, h, Z, y_new

    def again(self, k):
        """Step k taken again: ``(t, h, y, Z, y_new)``, or None where it is not SciPy's."""
        y = self._state(k)
        taken = None if y is None else self._take(k, y)
        return None if taken is None else (taken[0], taken[1], y, taken[2], taken[3])


def _discrete_adjoint(problem, times, dY, Y, y0, values):
    """The reverse pass through an explicit Runge-Kutta solve's own steps (``_Steps``): the
    exact derivative of SciPy's outputs ``Y``, the steps' sizes held as they were taken,
    ``(dy0, dvalues)`` from their cotangents ``dY``. Backwards, each step's stages take one
    vector-Jacobian product of f each, its last (``f(t + h, y_new)``, the next step's first)
    carrying the next step's first stage's cotangent too. None where a step or an output is
    not reproduced."""
    steps = _Steps(problem, times, Y, y0, values)
    if not steps.found:
        return None
    A, B, C, s, n = steps.A, steps.B, steps.C, steps.s, steps.n
    vjp = problem._vector_jacobian(values)

    def pull(t, y, cotangent):
        found = vjp(t, y, cotangent)
        dy = np.zeros(n) if found[0] is None else np.ravel(found[0])
        return dy, _flat(found[1:], values)

    dtheta = np.zeros(sum(np.size(v) for v in values))
    dy_end = np.zeros(n)  # the cotangent of the state at the end of the step
    df_end = np.zeros(n)  # and of f there: the next step's first stage
    for k in range(steps.count - 1, -1, -1):
        taken = steps.again(k)
        if taken is None:
            return None
        t, h, _, Z, y_new = taken
        for j in steps.ends.get(k, ()):
            dy_end += dY[:, j]
        dK = np.zeros((s + 1, n))
        dK[s] = df_end
        dy_old = np.zeros(n)
        if k in steps.inside:
            columns = steps.inside[k][0]
            dK += steps.weights[k] @ dY[:, columns].T
            dy_old += dY[:, columns].sum(axis=1)
        if np.any(dK[s]):
            dy, dp = pull(t + h, y_new, dK[s])
            dy_end += dy
            dtheta += dp
        dK[:s] += h * np.outer(B, dy_end)
        dy_old += dy_end
        for i in range(s - 1, 0, -1):
            if np.any(dK[i]):
                dz, dp = pull(t + C[i] * h, Z[i], dK[i])
                dtheta += dp
                dy_old += dz
                dK[:i] += h * np.outer(A[i, :i], dz)
        dy_end, df_end = dy_old, dK[0]
    if np.any(df_end):
        dy, dp = pull(steps.record.t_old[0], np.ravel(y0), df_end)
        dy_end += dy
        dtheta += dp
    for j in steps.start:
        dy_end += dY[:, j]
    return np.reshape(dy_end, np.shape(y0)), _unflat(dtheta, values)


def _discrete_tangent(problem, times, Y, y0, dy0, values, directions):
    """Forward mode through an explicit Runge-Kutta solve's own steps (``_Steps``): the
    tangents of SciPy's outputs ``Y`` (shape ``(n, len(times))``) for the tangents ``dy0``
    and ``directions`` of y0 and the parameters, the steps' sizes held as they were taken;
    each stage takes one Jacobian-vector product of f. None where a step or an output is not
    reproduced."""
    steps = _Steps(problem, times, Y, y0, values)
    if not steps.found:
        return None
    A, B, C, s, n = steps.A, steps.B, steps.C, steps.s, steps.n

    def push(t, y, tangent):
        # (the state an array of its own: y0 may view the memory of a value f reads, x[:2]
        # beside x, whose tangent jvp would add to the state's as one buffer's)
        return np.ravel(jvp(lambda y, *p: problem.rhs(t, y, p), (np.array(y), *values),
                            (tangent, *directions))[1])

    dY = np.zeros((n, times.size))
    dy = np.zeros(n) if dy0 is None else np.ravel(dy0).astype(float)
    dY[:, steps.start] = dy[:, None]
    df = push(steps.record.t_old[0], np.ravel(y0), dy)
    for k in range(steps.count):
        taken = steps.again(k)
        if taken is None:
            return None
        t, h, _, Z, y_new = taken
        dK = np.empty((s + 1, n))
        dK[0] = df
        for i in range(1, s):
            dK[i] = push(t + C[i] * h, Z[i], dy + np.dot(dK[:i].T, A[i, :i]) * h)
        dy_new = dy + h * np.dot(dK[:-1].T, B)
        dK[s] = push(t + h, y_new, dy_new)
        if k in steps.inside:
            dY[:, steps.inside[k][0]] = dy[:, None] + dK.T @ steps.weights[k]
        for j in steps.ends.get(k, ()):
            dY[:, j] = dy_new
        dy, df = dy_new, dK[s]
    return dY


class _Solution(Adjoint):
    """The differentiated outputs of a solve: ``_Solution(kind)(y0, *values, problem=...)``,
    whose rule solves (``problem.forward``) or reads what the solve kept."""

    complex_values = None

    def __init__(self, name, evaluate):
        def outputs(y0, *values, problem, times=None):
            """The outputs alone, where nothing the call receives is differentiated (a
            traced t_span alone: the outputs move with their times outside this call)."""
            return evaluate(problem, y0, values, times)[0]

        super().__init__(outputs)
        self.__name__ = self.__qualname__ = name
        self.evaluate = evaluate
        self.rule(self._rule)
        self.jvp_rule(self._forward)

    def _name(self):
        return self.__qualname__

    def _rule(self, y0, *values, problem, times=None):
        if _followed(y0, *values):
            # Another differentiation follows the arguments (a gradient of a gradient, or
            # forward mode over this reverse pass): a back it can differentiate.
            return self._differentiated_rule(y0, values, problem, times)
        Y, path, times, transpose = self.evaluate(problem, y0, values, times)
        adaptive = self is _IVP and problem.adaptive
        # A problem that solves anew lives in a replayed program between calls: what its
        # solve keeps goes with this call's reverse pass (``back``), not with the problem
        solve = problem.kept() if problem.replays_on_its_operands else None

        def back(dY):
            dY = np.transpose(dY) if transpose else dY
            dY = np.reshape(dY, (np.size(y0), -1))
            if adaptive and np.any(dY[:, 1:-1]):
                raise UnsupportedOperationError(_ADAPTIVE)
            if solve is not None:  # (released by an earlier pass over the same call)
                problem.keep(solve)
            try:
                # The right-hand side runs again, writing its own work buffers
                # (self.dy[:] = ...)
                with kept_state_writable():
                    dy0, dvalues = problem.adjoint(path, times, dY, y0, values,
                                                   np.transpose(Y) if transpose else Y)
            finally:
                if solve is not None:
                    problem.keep(None)
            return (dy0, *dvalues)

        return Y, back

    def _forward(self, tangents, y0, *values, problem, times=None):
        if _followed(y0, *values, *tangents):
            # An enclosing reverse pass (hvp): the sensitivities solved by a differentiated
            # solve of their own.
            return self._differentiated_forward(tangents, y0, values, problem, times)
        Y, _, times, transpose = self.evaluate(problem, y0, values, times)
        dY = problem.tangent(times, y0, tangents[0], values, list(tangents[1:]),
                             np.transpose(Y) if transpose else Y)
        if self is _IVP and problem.adaptive:
            dY[:, 1:-1] = np.nan  # see _ADAPTIVE: no tangent at the solver's own step times
        dY = np.reshape(dY, np.shape(np.transpose(Y) if transpose else Y))
        return Y, (np.transpose(dY) if transpose else dY)

    def _differentiated_rule(self, y0, values, problem, times):
        """Reverse mode whose arguments another differentiation follows: the outputs by this
        solution's own rule (which that differentiation records), and a ``back`` that
        contracts the cotangents with the sensitivity matrices ∂y(t_i)/∂(y0, θ), solved by
        ``solve_ivp`` of the state and its sensitivities together, ``S' = ∂f/∂y S + ∂f/∂θ``
        (``mutad.jacobian`` of f), which that differentiation differentiates in its turn."""
        Y = self(y0, *values, problem=problem, times=times)
        times = problem.times if times is None else np.atleast_1d(times)
        transpose, adaptive = self is _ODEINT, self is _IVP and problem.adaptive
        n, k = np.size(y0), len(values)
        q = n + sum(np.size(v) for v in values)

        def joint(t, z, *p):
            with _allocation_followed():  # the solve runs it in a plain_allocation block
                y, S = z[:n], np.reshape(z[n:], (n, q))
                f = lambda y, *theta: problem.rhs(t, y, theta)  # noqa: E731
                blocks = jacobian(f, y, *p, argnums=tuple(range(k + 1)))
                parts = [np.reshape(b, (n, -1)) for b in blocks[1:]]
                dS = blocks[0] @ S + np.concatenate([np.zeros((n, n)), *parts], axis=1)
                return np.concatenate([np.ravel(f(y, *p)), np.ravel(dS)])

        start = np.concatenate([np.ravel(y0), np.ravel(np.eye(n, q))])
        sensitivities = self._along(joint, start, values, problem, times, n)

        def back(dY):
            dY = np.reshape(np.transpose(dY) if transpose else dY, (n, -1))
            if adaptive and np.any(dY[:, 1:-1]):
                raise UnsupportedOperationError(_ADAPTIVE)
            total = sum(np.reshape(S, (n, q)).T @ dY[:, i] for i, S in enumerate(sensitivities))
            return (np.reshape(total[:n], np.shape(y0)), *_unflat(total[n:], values))

        return Y, back

    @staticmethod
    def _along(joint, start, args, problem, times, n):
        """The components after the first ``n`` of the solution of ``z' = joint(t, z, *args)``
        from ``start`` at t0, at each of ``times`` (in their order): ``solve_ivp`` with the
        problem's method and tolerances, differentiated by whatever follows ``args``."""
        order = np.argsort(problem.direction * times, kind="stable")
        t_eval = times[order]
        if t_eval[-1] == problem.t0:
            return [start[n:]] * times.size
        sol = solve_ivp(joint, (problem.t0, t_eval[-1]), start, method=problem.method,
                        t_eval=t_eval, args=tuple(args), rtol=problem.rtol, atol=problem.atol,
                        max_step=problem.max_step)
        found = [None] * times.size
        for column, i in enumerate(order):
            found[i] = sol.y[n:, column]
        return found

    def _differentiated_forward(self, tangents, y0, values, problem, times):
        """Forward mode under a reverse pass (``hvp``): the outputs by this solution's own
        rule, which the reverse pass records, and their tangents, the forward sensitivities,
        by ``solve_ivp`` of the state and its tangent together, ``z' = (f, ∂f s + ∂f θ̇)``
        (each product a ``jvp``), which the reverse pass differentiates by its adjoint."""
        Y = self(y0, *values, problem=problem, times=times)
        times = problem.times if times is None else np.atleast_1d(times)
        transpose = self is _ODEINT
        n, k = np.size(y0), len(values)
        directions = [np.zeros(np.shape(v)) if d is None else d
                      for v, d in zip(values, tangents[1:], strict=True)]
        start = np.concatenate([np.ravel(y0), np.zeros(n) if tangents[0] is None
                                else np.ravel(tangents[0])])

        def joint(t, z, *p):
            with _allocation_followed():  # the solve runs it in a plain_allocation block
                dy, ds = jvp(lambda y, *theta: problem.rhs(t, y, theta), (z[:n], *p[:k]),
                             (z[n:], *p[k:]))
            return np.concatenate([np.ravel(dy), np.ravel(ds)])

        found = self._along(joint, start, (*values, *directions), problem, times, n)
        if self is _IVP and problem.adaptive:  # see _ADAPTIVE
            found = [s if i in (0, times.size - 1) else np.full(n, np.nan)
                     for i, s in enumerate(found)]
        dY = np.reshape(np.stack(found, axis=1), np.shape(np.transpose(Y) if transpose else Y))
        return Y, (np.transpose(dY) if transpose else dY)


_ADAPTIVE = (
    "solve_ivp: a gradient reached sol.y at the times SciPy's step size control chose (no "
    "t_eval), which move with the differentiated arguments in a way mutad does not "
    "differentiate. Pass t_eval= for the outputs the loss uses (sol.y[:, 0] and sol.y[:, -1], "
    "at t_span's ends, are differentiated either way); in forward mode those outputs' "
    "tangents are NaN.")


def _ivp_values(problem, y0, values, times):
    """solve_ivp's outputs ``sol.y``: the forward solve, on plain values."""
    sol = problem.forward(y0, values)
    return sol.y, problem.path, sol.t, False


def _dense_values(problem, y0, values, times):
    """``sol.sol(times)`` of a solve already made."""
    problem.check_inputs(y0, values)
    return problem.dense(times), problem.path, np.atleast_1d(times), False


def _odeint_values(problem, y0, values, times):
    """odeint's outputs, one row per time: the forward solve, on plain values."""
    Y, path = problem.forward(y0, values)
    return Y, path, problem.times, True


_IVP = _Solution("solve_ivp", _ivp_values)
_ODEINT = _Solution("odeint", _odeint_values)
_ODE = _Solution("scipy.integrate.ode", _odeint_values)
_DENSE = _Solution("solve_ivp(...).sol", _dense_values)


class _DenseSolution:
    """``sol.sol`` of a differentiated solve: SciPy's interpolant, differentiable in ``y0``, the
    parameters and ``t``."""

    read_when_called = ("y0", "values")  # (a function closing over it: _Parameters)

    def __init__(self, problem, y0, values):
        self.problem, self.y0, self.values = problem, y0, values
        self.t_min, self.t_max = problem.dense.t_min, problem.dense.t_max

    def __call__(self, t):
        plain, followed = _times(t)
        if followed:
            _refuse_second_order("solve_ivp(...).sol(t)", "differentiated times")
        if np.any(plain < self.t_min) or np.any(plain > self.t_max):
            raise UnsupportedOperationError(
                "solve_ivp(...).sol(t): t outside the interval of the solve; mutad "
                "differentiates the interpolant inside it only.")
        y = _DENSE(self.y0, *self.values, problem=self.problem, times=plain)
        if not followed:
            return y
        rhs = functools.partial(self.problem.rhs, values=self.values)
        moved = _moved(rhs, np.reshape(y, (np.shape(y)[0], -1)), t, plain)
        return np.reshape(moved, np.shape(y))


def _rhs(name, fun, parameters, vectorized=False, tfirst=True):
    """The right-hand side in solve_ivp's order, ``rhs(t, y, values)``, for the solvers'
    pullbacks and tangents: the parameters set to ``values``."""
    def rhs(t, y, values):
        with parameters.bound(values), derivative_runs(name):
            args = parameters.args(values)
            if vectorized:
                return fun(t, y[:, None], *args)[:, 0]
            dy = fun(t, y, *args) if tfirst else fun(y, t, *args)
            return np.stack(dy) if type(dy) in (list, tuple) else dy
    return rhs


def _constant_solve(fun, t_span, y0, method, t_eval, dense_output, events, vectorized, args,
                    **options):
    """SciPy's ``solve_ivp`` of a problem nothing differentiated reaches, on plain arrays."""
    event_list = [] if events is None else list(events) if isinstance(events, (list, tuple)) \
        else [events]
    with plain_allocation():
        return _ivp.solve_ivp(
            _plain_call("solve_ivp", fun), t_span, y0, method, t_eval, dense_output,
            None if events is None else [_plain_event(e) for e in event_list], vectorized,
            args, **options)


@_routed(_ivp.solve_ivp)
def solve_ivp(fun: Callable[..., Any], t_span: Sequence[float], y0: Any,
              method: Any = "RK45", t_eval: Any = None, dense_output: bool = False,
              events: Any = None, vectorized: bool = False, args: tuple[Any, ...] | None = None,
              **options: Any) -> Any:
    """SciPy's ``solve_ivp``, differentiated in ``y0``, the parameters (``args=`` and the
    arrays ``fun`` and the events close over) and the times (``t_span``, ``t_eval``): in
    reverse and forward mode through SciPy's steps (RK23, RK45), or by the continuous adjoint
    and the forward sensitivities (the other methods).
    ``sol.y``, ``sol.t_events`` and ``sol.y_events`` are SciPy's values, differentiated;
    ``sol.sol(t)`` too with ``dense_output=True``."""
    event_list = [] if events is None else list(events) if isinstance(events, (list, tuple)) \
        else [events]
    if "jac" in options and not callable(options["jac"]):
        options["jac"] = _jacobian_numbers(options["jac"])
    if options.get("jac_sparsity") is not None:  # a pattern, read as numbers
        options["jac_sparsity"] = _jacobian_numbers(options["jac_sparsity"])
    parameters = _Parameters("solve_ivp", (fun, options.get("jac"), *event_list),
                             () if args is None else args)
    method = getattr(method, "scipy", method)  # SciPy's class for its stand-in (RK45)
    if type(y0) in (list, tuple) and _followed(y0):
        y0 = np.stack(y0)
    if not ACTIVE.running:
        return _ivp.solve_ivp(fun, t_span, y0, method, t_eval, dense_output, events,
                              vectorized, args, **options)
    span_given, eval_given = t_span, t_eval
    (t_span, span_followed), (t_eval, eval_followed) = _times(t_span), _times(t_eval)
    options = _settings("solve_ivp", options, ("rtol", "atol", "max_step", "first_step"))
    if not (parameters.followed or _followed(y0) or span_followed or eval_followed):
        # nothing differentiated reaches the solve: SciPy's, its arrays (sol.y) constants the
        # function may write traced values into, as np.zeros' are
        settings = (fun, t_span, y0, method, t_eval, dense_output, events, vectorized, args)
        return by_user_code(_constant_solve(*settings, **options), _constant_solve, settings,
                            options, sys._getframe(1))
    if span_followed or eval_followed:
        _refuse_second_order("solve_ivp", "differentiated times")
    if events is not None:
        _refuse_second_order("solve_ivp", "events")
    if not _followed(y0):
        # SciPy's solvers' state (check_arguments): complex or float, an integer y0 too
        y0 = np.asarray(y0)
        y0 = y0.astype(complex if np.iscomplexobj(y0) else float, copy=False)
    t0 = float(t_span[0])
    # Without events, dense output and differentiated times (which the problem and the result
    # keep as this solve's), a replay solves again, checking that the solver decides as here
    kind = _Problem if events is not None or dense_output or span_followed or eval_followed \
        else _SolvedAnew
    problem = kind("solve_ivp", _rhs("solve_ivp", fun, parameters, vectorized), parameters,
                   t0, float(t_span[1]), method, options.get("rtol", 1e-3),
                   options.get("atol", 1e-6), options.get("max_step", np.inf))

    explicit = _RUNGE_KUTTA.get(method) if not vectorized else None
    # An explicit Runge-Kutta solve without dense output or events keeps, for its reverse pass,
    # its steps' times and a few of their states (_Record), not SciPy's dense output.
    recorded = explicit is not None and events is None and not dense_output

    def solve(y0_plain, values, solver, dense):
        with plain_allocation(), parameters.bound(values):
            plain_options = dict(options)
            if callable(plain_options.get("jac")):
                plain_options["jac"] = _plain_call("solve_ivp", plain_options["jac"])
            sol = _ivp.solve_ivp(
                _plain_call("solve_ivp", fun), t_span, y0_plain, solver, t_eval, dense,
                None if events is None else [_plain_event(e) for e in event_list],
                vectorized, parameters.args(values), **plain_options)
        scipy_ran()
        if sol.status < 0:
            raise UnsupportedOperationError(f"solve_ivp: the solve failed: {sol.message}")
        return sol

    def forward(y0_plain, values):
        if not problem.solves(y0_plain, values):
            return problem.solution
        problem.solved = (np.copy(y0_plain), [np.copy(v) for v in values])
        problem.dense = None  # (an earlier solve's, where a replay solves again)
        if recorded:
            problem.steps = _Record()
            sol = solve(y0_plain, values, _recording(explicit, problem.steps), False)

            def path(t_from, t_to):  # the continuous adjoint's, where the steps are not
                if problem.dense is None:  # reproduced: the same solve, its dense output kept
                    problem.dense = solve(*problem.solved, method, True).sol
                return problem.dense
        else:
            sol = solve(y0_plain, values, method, True)
            problem.dense = sol.sol
            if explicit is not None:
                problem.steps = _Record.of_dense_output(sol.sol.interpolants)

            def path(t_from, t_to):  # the dense output covers the whole span
                return sol.sol
        problem.path, problem.times = path, sol.t
        problem.solution, problem.left = sol, [np.copy(v) for v in values]
        parameters.freeze()
        return sol

    problem.forward, problem.adaptive = forward, t_eval is None
    values = parameters.values()
    rhs = functools.partial(problem.rhs, values=values)
    if span_followed:
        # A later start is the same solve from y0 moved back along f: y0 - f(t0, y0) dt0.
        y0 = y0 - rhs(t0, y0) * _shift(span_given[0])
    terminal = None  # the time of the event that ended the solve, and the state then
    # (the events' derivatives evaluate the functions again: in the block, which leaves in
    # the arrays they write what SciPy's run left)
    with _buffers_written("solve_ivp", parameters, (y0, *values)):
        y = _IVP(y0, *values, problem=problem)
        if isinstance(problem, _SolvedAnew):
            problem.guard(y)
        sol = problem.solution
        out = _ivp.OdeResult(**sol)
        if events is not None:
            out.t_events, out.y_events, terminal = _events(
                problem, event_list, parameters, sol, y0, values, rhs)
    if eval_followed:
        y = _moved(rhs, y, eval_given, t_eval)
    elif t_eval is None and (span_followed or terminal is not None):
        # The outputs at the ends move with their times: t_span's, or the terminal event's.
        first = _moved(rhs, y[:, :1], span_given[0], sol.t[:1]) if span_followed else y[:, :1]
        if terminal is not None:
            last = terminal[1][:, None]
            out.t = np.concatenate([sol.t[:-1], np.reshape(terminal[0], (1,))])
        else:
            last = (_moved(rhs, y[:, -1:], span_given[1], sol.t[-1:]) if span_followed
                    else y[:, -1:])
        y = np.concatenate([first, y[:, 1:-1], last], axis=1) if np.shape(y)[1] > 1 else last
    out.y = y
    if eval_followed:
        out.t = eval_given
    out.sol = _DenseSolution(problem, y0, values) if dense_output else None
    return out


class _SolvedAnew(_Problem):
    """A problem whose solution's rule solves anew, on plain values, for inputs other than
    the last solve's (the parameters bound into ``fun`` for the solve, as ``quad``'s
    integrand); and whose call shows the caller only the differentiated outputs, which the
    rule makes, and plain results of the solve that a replay checks are decided again as
    they were (``guard``): a replay of the call runs the rule again
    (``replay._holds_arrays_of_the_call``)."""

    replays_on_its_operands = True

    def solves(self, y0, values):
        """Also where the inputs are not those of the solve kept (their bytes): a replay's."""
        return self.solved is None or not all(
            _same_bytes(a, b) for a, b in zip((y0, *values), (self.solved[0], *self.solved[1]),
                                              strict=True))

    def decisions(self):
        """What the caller sees of the last solve besides its differentiated outputs, which
        the solver's decisions make: its times (the steps it accepted, or t_eval) and its
        counts and status (``solve_ivp``'s result)."""
        sol = self.solution
        return sol.t.tobytes(), sol.nfev, sol.njev, sol.nlu, sol.status

    def guard(self, y):
        """A replay recording the call (``y`` the solve's output) checks that the solve it
        runs again decides as this one did: else the plain results the caller holds
        (``decisions``) would be this call's, and the call is recorded again."""
        recorder = getattr(getattr(y, "tape", None), "recorder", None)
        if recorder is None or not recorder.ready:
            return
        taken = self.decisions()

        def decided(_):
            found = self.decisions()
            if found != taken:  # (the replay stops here: no reverse pass releases the solve)
                self.keep(None)
            return found

        recorder.guard(y, taken, decided, _DECIDED_ANEW)


_DECIDED_ANEW = (
    "the solve run again took other steps than the recorded one: its accepted times sol.t "
    "and its counts nfev, njev, nlu and status, which the caller holds as plain values, "
    "would be the recorded ones")


def _same_bytes(a, b):
    """Whether ``a`` and ``b`` (a solve's inputs, plain or an enclosing differentiation's)
    hold the same numbers, bit for bit."""
    a, b = np.asarray(_plain(a)), np.asarray(_plain(b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _jacobian_numbers(jac):
    """``jac=`` given as a matrix (dense or sparse) of differentiated values, on its numbers:
    it steers the implicit methods' Newton iterations, not the solution, whose derivative
    comes from ``fun``. A replay recording the call is refused, as it would keep them."""
    leaves, rebuild = flatten(jac)
    if not any(isinstance(v, Tracer) for v in leaves):
        return jac
    return rebuild([settled(v, "solve_ivp with jac= a matrix of differentiated values")
                    for v in leaves])


def _plain_event(event):
    """An event function for SciPy's solve: on plain values, its settings kept."""
    call = _plain_call("solve_ivp", event)
    for setting in ("terminal", "direction"):
        if hasattr(event, setting):
            setattr(call, setting, getattr(event, setting))
    return call


def _events(problem, event_list, parameters, sol, y0, values, rhs):
    """``t_events`` and ``y_events``, differentiated, and the time and state of the terminal
    event that ended the solve (None if none did).

    An event time t_e is a root of g(t, y(t)): by the implicit function theorem its derivative
    is ``-dg / ġ``, dg the derivative of g(t_e, y(t_e)) at the fixed time t_e (y's through the
    dense output, which the adjoint differentiates, and g's own parameters), ġ = ∂g/∂t +
    ∂g/∂y · f the rate at which g crosses zero. ``t_e₀ - (g - stop_gradient(g)) / ġ`` has
    SciPy's value and that derivative; the state then moves with t_e as any output does.
    """
    plain_values = [_plain(v) for v in values]
    args = parameters.args(values)
    t_events, y_events, terminal = [], [], None
    for event, times, states in zip(event_list, sol.t_events, sol.y_events, strict=True):
        if not np.size(times):
            t_events.append(times)
            y_events.append(states)
            continue
        found_t, found_y = [], []
        for t_e, y_e in zip(times, states, strict=True):
            # SciPy's state at the event, with the dense output's derivative.
            at = _DENSE(y0, *values, problem=problem, times=t_e)
            at = y_e + _shift(at)
            with plain_allocation(), parameters.bound(plain_values):
                plain_args = parameters.args(plain_values)
                f_e = np.asarray(problem.rhs(t_e, y_e, plain_values))
                rate = float(jvp(lambda t, y: event(t, y, *plain_args),
                                 (np.float64(t_e), y_e), (np.float64(1.0), f_e))[1])
            if rate == 0.0:
                raise UnsupportedOperationError(
                    f"solve_ivp: the event function touches zero at t = {t_e} without "
                    "crossing it; its time has no derivative there.")
            g = event(t_e, at, *args)
            t_moved = t_e - _shift(g) / rate
            found_t.append(t_moved)
            found_y.append(_moved(rhs, at[:, None], t_moved, np.array([t_e]))[:, 0])
        t_events.append(np.stack(found_t))
        y_events.append(np.stack(found_y))
        if sol.status == 1 and getattr(event, "terminal", False) and times[-1] == sol.t[-1]:
            terminal = (found_t[-1], found_y[-1])
    return t_events, y_events, terminal


@_routed(_odepack_py.odeint)
def odeint(func: Callable[..., Any], y0: Any, t: Any, args: tuple[Any, ...] = (),
           Dfun: Callable[..., Any] | None = None, col_deriv: int = 0, full_output: int = 0,
           ml: int | None = None, mu: int | None = None, rtol: Any = None, atol: Any = None,
           tcrit: Any = None, h0: float = 0.0, hmax: float = 0.0,
           hmin: float = 0.0, ixpr: int = 0, mxstep: int = 0, mxhnil: int = 0,
           mxordn: int = 12, mxords: int = 5, printmessg: int = 0, tfirst: bool = False) -> Any:
    """SciPy's ``odeint``, differentiated in ``y0``, the parameters and the times as
    ``solve_ivp`` is, the adjoint solved with LSODA between the output times."""
    settings = dict(Dfun=Dfun, col_deriv=col_deriv, full_output=full_output, ml=ml, mu=mu,
                    rtol=rtol, atol=atol, tcrit=tcrit, h0=h0, hmax=hmax, hmin=hmin, ixpr=ixpr,
                    mxstep=mxstep, mxhnil=mxhnil, mxordn=mxordn, mxords=mxords,
                    printmessg=printmessg, tfirst=tfirst)
    parameters = _Parameters("odeint", (func, Dfun), args)
    if type(y0) in (list, tuple) and _followed(y0):
        y0 = np.stack(y0)
    if not ACTIVE.running:
        return _odepack_py.odeint(func, y0, t, args, **settings)
    times, times_followed = _times(t)
    settings = _settings("odeint", settings, ("rtol", "atol", "tcrit", "h0", "hmax", "hmin"))
    rtol, atol, hmax = settings["rtol"], settings["atol"], settings["hmax"]
    if not (parameters.followed or _followed(y0) or times_followed):
        with plain_allocation():  # nothing differentiated reaches the solve
            return _odepack_py.odeint(_plain_call("odeint", func), y0, times, args, **settings)
    tolerance = 1.49012e-8  # odeint's default rtol and atol
    # (the info full_output returns, and differentiated times, which the problem keeps as
    # numbers, are the first solve's: a replay could not solve anew)
    kind = _Problem if full_output or times_followed else _SolvedAnew
    problem = kind("odeint", _rhs("odeint", func, parameters, tfirst=tfirst), parameters,
                   float(times[0]), float(times[-1]), "LSODA",
                   tolerance if rtol is None else rtol, tolerance if atol is None else atol,
                   np.inf if not hmax else hmax)
    result: dict[str, Any] = {}

    def forward(y0_plain, values):
        with plain_allocation(), parameters.bound(values):
            found = _odepack_py.odeint(
                _plain_call("odeint", func), y0_plain, times, parameters.args(values),
                **{**settings, "Dfun": _plain_call("odeint", Dfun), "full_output": 1})
        scipy_ran()
        Y, info = found
        parameters.freeze()
        if info["message"] != "Integration successful.":
            raise UnsupportedOperationError(f"odeint: the solve failed: {info['message']}")
        result["info"] = info

        def path(t_from, t_to):
            # The interval between two outputs solved again from the earlier one's value.
            start = t_from if abs(t_from - times[0]) < abs(t_to - times[0]) else t_to
            end = t_to if start == t_from else t_from
            i = int(np.flatnonzero(times == start)[0])
            rhs = _plain_call("odeint", lambda s, y: problem.rhs(s, y, values))
            with plain_allocation():
                sol = problem._solve_ivp(rhs, (start, end), Y[i], dense_output=True)
            return sol.sol

        return Y, path

    problem.forward, problem.times = forward, times
    values = parameters.values()
    if not _followed(y0):
        y0 = np.asarray(y0, dtype=float)
    if times_followed:  # as solve_ivp's times
        _refuse_second_order("odeint", "differentiated times")
        rhs = functools.partial(problem.rhs, values=values)
        y0 = y0 - rhs(times[0], y0) * _shift(t[0])
    with _buffers_written("odeint", parameters, (y0, *values)):
        Y = _ODEINT(y0, *values, problem=problem)
    if times_followed:
        Y = _moved(rhs, np.transpose(Y), t, times).T
    return (Y, result["info"]) if full_output else Y


@_routed(_bvp.solve_bvp)
def _solve_bvp(fun: Callable[..., Any], bc: Callable[..., Any], x: Any, y: Any, p: Any = None,
               S: Any = None, fun_jac: Any = None, bc_jac: Any = None, tol: float = 0.001,
               max_nodes: int = 1000, verbose: int = 0, bc_tol: Any = None) -> Any:
    """SciPy's ``solve_bvp``, differentiated in what its functions read (the arrays and numbers
    ``fun`` and ``bc`` close over, or are given through their defaults, objects or partials)
    by the implicit function theorem: SciPy's solution (y at the nodes of its final mesh, and
    the parameters p) solves the collocation equations F(y, p; θ) = 0 (SciPy's residuals of its
    4th-order Lobatto IIIA scheme, on that mesh, and the boundary conditions), so its
    derivative is -(∂F/∂(y, p))⁻¹ ∂F/∂θ (``optimize._solution``, which checks that the result
    solves them to the accuracy a derivative needs). The mesh is SciPy's decision (its nodes
    do not move with θ); the guesses ``y`` and ``p`` only choose the solution (no derivative).
    ``res.y``, ``res.p``, ``res.yp`` and ``res.sol`` (SciPy's spline: its values with the
    derivatives of the cubic Hermite interpolant of y and yp, which it is) are differentiated;
    ``rms_residuals`` is refused. A differentiated mesh ``x``, ``S``, tolerances, complex
    values and the Jacobians ``fun_jac``/``bc_jac`` closing over differentiated values (SciPy
    would solve with them; mutad differentiates ``fun`` and ``bc``) are refused."""
    options = dict(p=p, S=S, fun_jac=fun_jac, bc_jac=bc_jac, tol=tol, max_nodes=max_nodes,
                   verbose=verbose, bc_tol=bc_tol)
    if not ACTIVE.running:
        return _bvp.solve_bvp(fun, bc, x, y, **options)
    if any(carries_derivative(v) for v in (x, S, tol, bc_tol)) or any(
            carries_derivative(v) for v in _Parameters(
                "solve_bvp", (fun_jac, bc_jac), ()).values()):
        raise UnsupportedOperationError(
            "scipy.integrate.solve_bvp with a differentiated mesh x, S, tolerance or Jacobian "
            "(fun_jac, bc_jac): mutad differentiates the solution in what fun and bc read, on "
            "SciPy's mesh. Map the interval onto a constant one (t = a + (b - a) s, the "
            "lengths a parameter of fun), leave out fun_jac and bc_jac, or pass those inputs "
            "through mutad.stop_gradient.")
    name = "scipy.integrate.solve_bvp"
    _not_replayed(name)
    copies: list = []
    inputs: list = []
    given, _, call, followed = _plain_arguments(_bvp.solve_bvp, (fun, bc, x, y), options,
                                                copies, inputs)
    # (a module-level array fun or bc writes into: what SciPy's run left there)
    with BuffersWritten(name, (), inputs):
        with outside_differentiations(name):
            res = _bvp.solve_bvp(**call)
        scipy_ran()
        _written_back(name, copies, followed)  # (a buffer fun or bc writes into: SciPy's values)
        return _bvp_solved(name, res, given, call, followed)


def _bvp_solved(name, res, given, call, followed):
    """``solve_bvp``'s result ``res`` with the derivatives of its solution (``given``: the
    call's arguments by name, ``call``: the same with plain numbers)."""
    if not followed:
        return res
    if np.iscomplexobj(res.y):
        raise UnsupportedOperationError(
            f"{name} of complex values with differentiated inputs: mutad differentiates real "
            "boundary value problems. Write the real and imaginary parts as real unknowns.")
    mesh, (n, m) = res.x, np.shape(res.y)
    with_parameters = res.p is not None

    def functions(f, b):
        def residual(z):
            """SciPy's collocation residuals on its final mesh, and the boundary conditions."""
            values = z[:n * m].reshape(n, m)
            extra = (z[n * m:],) if with_parameters else ()
            h = np.diff(mesh)
            slopes = _as_array(f(mesh, values, *extra))
            middle = (0.5 * (values[:, 1:] + values[:, :-1])
                      - 0.125 * h * (slopes[:, 1:] - slopes[:, :-1]))
            middle_slopes = _as_array(f(mesh[:-1] + 0.5 * h, middle, *extra))
            collocation = values[:, 1:] - values[:, :-1] - h / 6 * (
                slopes[:, :-1] + slopes[:, 1:] + 4 * middle_slopes)
            boundary = _as_array(b(values[:, 0], values[:, -1], *extra))
            return np.concatenate([np.ravel(collocation), np.ravel(boundary)])
        return residual

    traced, plain = functions(given["fun"], given["bc"]), functions(call["fun"], call["bc"])
    z = np.concatenate([np.ravel(res.y), np.ravel(res.p) if with_parameters else []])
    linearization = _root_linearization(name, plain, z.copy(), dense=True,
                                        colors=_collocation_pattern(n, m, np.size(z) - n * m))
    solution = _solution(name, z, traced(_allocated(z)), linearization, bool(res.success),
                         res.message, at=lambda w: traced(w.copy()))
    if solution is z:  # the residuals do not depend on the differentiated values
        return res
    values = np.reshape(solution[:n * m], (n, m))
    parameters = solution[n * m:] if with_parameters else None
    extra = (parameters,) if with_parameters else ()
    slopes = _with_derivatives(res.yp, _as_array(given["fun"](mesh, values, *extra)))
    return _bvp_result(name, res, {"y": values, "p": parameters, "yp": slopes,
                                   "sol": _BVPSolution(res.sol, mesh, values, slopes)},
                       keep=("x", "niter", "status", "message", "success"))


def _collocation_pattern(n, m, k):
    """Where the Jacobian of ``solve_bvp``'s residuals (``n`` components at ``m`` nodes, C
    order, then ``k`` parameters) can be nonzero, as SciPy's ``construct_global_jac`` has it
    (``fun`` reads each node's values alone): an interval's residuals read its two nodes' and
    the parameters, the boundary conditions the end nodes' and the parameters. Columns of one
    color share no row: a component's inner nodes three apart, its end nodes each alone, each
    parameter alone. Returns (colors, rows, columns)."""
    component, node = np.divmod(np.arange(n * m), m)
    colors = np.where(node == 0, 3 * n + component,
                      np.where(node == m - 1, 4 * n + component, 3 * component + node % 3))
    colors = np.concatenate([colors, 5 * n + np.arange(k)])
    parameters = n * m + np.arange(k)
    rows, columns = [], []
    for i in range(n):  # interval j's residual of component i: row i (m - 1) + j
        interval = np.arange(m - 1)
        for nodes in (interval, interval + 1):
            read = np.arange(n)[:, None] * m + nodes  # (components, intervals)
            rows.append(np.broadcast_to(i * (m - 1) + interval, read.shape).ravel())
            columns.append(read.ravel())
        rows.append(np.repeat(i * (m - 1) + interval, k))
        columns.append(np.tile(parameters, m - 1))
    boundary = n * (m - 1) + np.arange(n + k)
    ends = np.concatenate([np.arange(n) * m, np.arange(n) * m + m - 1, parameters])
    rows.append(np.repeat(boundary, len(ends)))
    columns.append(np.tile(ends, n + k))
    return colors, np.concatenate(rows), np.concatenate(columns)


class _BVPSolution:
    """``res.sol`` of a differentiated ``solve_bvp``: SciPy's spline's values, with the
    derivatives of the cubic Hermite interpolant of the solution and its slopes at the mesh's
    nodes (SciPy's ``create_spline``), at the queries and their derivative order ``nu``."""

    def __init__(self, spline, mesh, values, slopes):
        self._spline, self._values, self._slopes = spline, values, slopes
        self.x = mesh

    def __call__(self, x, nu=0, extrapolate=None):
        from .interpolate import CubicHermiteSpline  # (the differentiated interpolant)

        value = _bvp_spline_value(self._spline, x, nu, extrapolate)
        hermite = CubicHermiteSpline(self.x, self._values, self._slopes, axis=1)
        return scipys_value(value, hermite(x, nu, extrapolate))

    def __getattr__(self, name):
        return refused_attribute(
            name, f"scipy.integrate.solve_bvp(...).sol.{name}: the solution of a "
            "differentiated boundary value problem is followed when called (sol(x), "
            "sol(x, nu)). Call it, or use res.y and res.yp at res.x.")


_bvp_spline_value = Value(lambda spline, x, nu, extrapolate: spline(x, nu, extrapolate),
                          "scipy.integrate.solve_bvp's spline")


# ----------------------------------------------------------------------------------------------
# quad


class _Integral:
    """One differentiated ``quad`` or ``quad_vec`` (``integrate``): the integrand, its
    parameters and SciPy's settings."""

    # The integrand reads the values its rule is given, bound into its closure for each
    # evaluation (``parameters.bound``), not those it was made with: a replay may give it
    # another call's values (``replay._holds_arrays_of_the_call``).
    replays_on_its_operands = True

    def __init__(self, name, integrate, func, parameters, settings):
        self.name, self.integrate, self.func = name, integrate, func
        self.parameters, self.settings = parameters, settings
        self.found = None

    def integrand(self, x, values):
        with self.parameters.bound(values), derivative_runs(self.name):
            return self.func(x, *self.parameters.args(values))

    def vector_jacobian(self, values, dy):
        """``g(x)``: the integrand's pullback of ``dy`` at ``x`` in the parameters, raveled
        into one vector: the gradient of ``dy · f(x, θ)``, its program recorded once and
        replayed at each point (``x`` a number it follows, as Python's float it is; re-recorded
        where a decision of f differs). Where f makes ``x`` a plain number (``float(x)``),
        each point is a pullback at that number instead."""
        func, parameters = self.func, self.parameters  # (not self: what a replay compares)
        name = self.name

        def weighted(x, *p):
            with parameters.bound(p), derivative_runs(name):
                return _dot(dy, func(x, *parameters.args(p)))

        replayed = grad(weighted, argnums=tuple(range(len(values) + 1)), replay=True)

        def gradient_at(x):
            nonlocal replayed
            if replayed is not None:
                try:
                    return _flat(replayed(x, *values)[1:], values)
                except ConversionError as error:
                    handled(error)
                    replayed = None
            _, pull = pullback(lambda *p: self.integrand(x, p), *values)
            return _flat(pull(dy), values)

        return gradient_at

    def at(self, x, values):
        """The integrand's plain value at ``x`` (a limit's derivative)."""
        with plain_allocation(), self.parameters.bound(values):
            return _plain_call(self.name, self.func)(x, *self.parameters.args(values))

    def value(self, a, b, values):
        # Outside the running differentiations: a derivative's integrand (a pullback of the
        # integrand, under a second derivative) is then a differentiation of its own.
        with outside_differentiations(self.name), plain_allocation(), \
                self.parameters.bound(values):
            self.found = self.integrate(_plain_call(self.name, self.func), a, b,
                                        args=self.parameters.args(values), **self.settings)
        scipy_ran()
        self.parameters.freeze()
        return np.asarray(self.found[0], dtype=float)

    def over(self, g, a, b, followed=False):
        """``∫ g(x) dx`` over [a, b], ``g`` vector-valued, at the tolerances and break points
        the integral was given; ``followed``: the one mutad differentiates (g computes with
        values an enclosing differentiation follows, which it then differentiates by this same
        rule). Of ``quad``: QUADPACK's ``quad`` of each of g's entries with the value's
        settings (its ``weight`` too), g computed once at each point the entries share, so that
        a smooth integrand costs the value's 21 points, where ``quad_vec`` takes at least two
        intervals (63); a ``quad`` in the integrand (``dblquad``) then runs a third as often.
        Of ``quad_vec``: ``quad_vec``."""
        weighted = self.settings.get("weight") is not None
        if self.integrate is not _quadpack_py.quad or followed and not weighted:
            settings = {k: self.settings[k] for k in ("epsabs", "epsrel", "points")}
            if followed:
                return quad_vec(g, a, b, **settings)[0]
            with outside_differentiations(self.name), plain_allocation():
                return _quad_vec.quad_vec(g, a, b, **settings)[0]
        settings = {k: self.settings[k] for k in (
            "epsabs", "epsrel", "limit", "points", "weight", "wvar", "wopts", "maxp1", "limlst")}
        a, b = (float(x) if isinstance(x, (int, np.integer)) else x for x in (a, b))
        if followed:  # (weighted: quad of each entry, with the weight)
            inside = next((float(_plain(x)) for x in (a, b) if np.isfinite(_plain(x))), 0.0)
            return np.stack([quad(lambda x, i=i: np.ravel(g(x))[i], a, b, **settings)[0]
                             for i in range(np.size(g(inside)))])
        at = {}  # x -> g(x), raveled: each entry's quad evaluates g at the same points mostly

        def entry(x, i):
            found = at.get(x)
            if found is None:
                found = at[x] = np.ravel(g(x))
            return found[i]

        with outside_differentiations(self.name), plain_allocation():
            first = _quadpack_py.quad(entry, a, b, args=(0,), **settings)[0]
            size = len(next(iter(at.values())))
            return np.array([first, *(_quadpack_py.quad(entry, a, b, args=(i,), **settings)[0]
                                       for i in range(1, size))])

    def limit(self, x, values, followed=False):
        """The integrand at a limit ``x``, times ``quad``'s ``weight`` there (``cos`` or
        ``sin``, the weights that do not depend on the limits; NaN for the others, whose
        limits are not differentiated): plain, or (``followed``) as the enclosing
        differentiation follows it. An integer limit is handed on as the float QUADPACK
        evaluates the integrand at."""
        if isinstance(x, (int, np.integer)):
            x = float(x)
        y = self.integrand(x, values) if followed else self.at(x, values)
        weight, wvar = self.settings.get("weight"), self.settings.get("wvar")
        if weight in ("cos", "sin"):
            return y * (np.cos if weight == "cos" else np.sin)(wvar * x)
        return y if weight is None else y * np.nan


def _integral_value(a, b, *values, integral):
    return integral.value(a, b, values)


class _Quadrature(Adjoint):
    complex_values = None  # real integrands only

    def _name(self):
        return "quad"


_QUAD = _Quadrature(_integral_value)


# Under another differentiation (a Hessian, a gradient of a gradient) the rules below compute
# with the values it follows: the value by _QUAD itself, which it records, and the derivative's
# integral by mutad's quad_vec, which it differentiates by this same rule, one order lower.


@_QUAD.rule
def _quad_rule(a, b, *values, integral):
    followed = _followed(a, b, *values)
    y = _QUAD(a, b, *values, integral=integral) if followed else integral.value(a, b, values)

    def back(dy):
        # d/dθ ∫ f(x, θ) dx = ∫ ∂f/∂θ dx: the integral of the integrand's pullback of dy at x;
        # d/db = f(b), d/da = -f(a).
        nested = followed or _followed(dy)
        dvalues = []
        if values:
            gradient_at = integral.vector_jacobian(values, dy)
            dvalues = _unflat(integral.over(gradient_at, a, b, nested), values)
        return (-_dot(dy, integral.limit(a, values, nested)) if np.isfinite(_plain(a)) else None,
                _dot(dy, integral.limit(b, values, nested)) if np.isfinite(_plain(b)) else None,
                *dvalues)

    return y, back


def _dot(u, v):
    return (np.ravel(u) * np.ravel(v)).sum()


@_QUAD.jvp_rule
def _quad_forward(tangents, a, b, *values, integral):
    nested = _followed(a, b, *values, *tangents)
    y = _QUAD(a, b, *values, integral=integral) if nested else integral.value(a, b, values)
    dy = np.zeros(np.shape(y))
    # d/db = f(b), d/da = -f(a), of a finite limit that moves (an infinite one does not, as
    # in the reverse rule); a zero tangent (a constant limit) contributes zero beside an
    # integrand that is infinite or NaN there
    for sign, limit, d in ((-1.0, a, tangents[0]), (1.0, b, tangents[1])):
        if d is not None and np.isfinite(_plain(limit)):
            at = integral.limit(limit, values, nested)
            dy = dy + sign * (d * at if _followed(d, at) else products.times(d, at))
    if values:
        dvalues = tuple(np.zeros(np.shape(v)) if d is None else d
                        for v, d in zip(values, tangents[2:], strict=True))

        def tangent_at(x):
            tangent = jvp(lambda *p: integral.integrand(x, p), tuple(values), dvalues)[1]
            return tangent if nested else np.asarray(tangent)

        dy = dy + integral.over(tangent_at, a, b, nested)
    return y, dy if nested else np.asarray(dy, dtype=float)


def _integral(name, integrate, func, a, b, args, settings):
    """``integrate(func, a, b, args=args, **settings)`` (``quad`` or ``quad_vec``), its value
    differentiated; the rest of what SciPy returns as it is."""
    settings = _settings(name, settings, ("epsabs", "epsrel"))
    if _followed(settings.get("points")):
        # break points computed from differentiated values (where the integrand has a kink)
        # steer the subdivision, not the integral: their numbers
        settings["points"] = settled(settings["points"],
                                     f"{name} with points= computed from differentiated values")
    parameters = _Parameters(name, (func,), args)
    weight, wvar = settings.get("weight"), settings.get("wvar")
    if name == "quad" and weight in ("cos", "sin") and _followed(wvar):
        return _in_frequency(func, a, b, args, settings)
    if weight is not None and (_followed(wvar) or weight not in ("cos", "sin")
                               and _followed(a, b)):
        raise UnsupportedOperationError(
            f"{name}(weight={weight!r}) of differentiated "
            + ("weight parameters (wvar)" if _followed(wvar) else "limits")
            + ": mutad differentiates a weighted integral in its integrand's parameters, and "
            "in its limits for the weights 'cos' and 'sin' (the others depend on the limits); "
            "pass them as constants, or write the weight into the integrand.")
    # An infinite limit stays so when what it is computed from moves (loc + a * scale of
    # norm.expect): the integral does not move with it
    # (decisions on the traced limits, each a replay's guard: not on their plain values)
    a, b = (stop_gradient(limit) if _followed(limit) and np.isinf(limit) else limit
            for limit in (a, b))
    if not parameters.followed and not _followed(a, b):
        with plain_allocation():  # nothing differentiated reaches the integral
            return integrate(_plain_call(name, func), a, b, args=args, **settings)
    if settings.get("complex_func") and a != b:
        return _real_and_imaginary(func, a, b, args, settings)
    if settings.get("complex_func"):
        raise UnsupportedOperationError(
            f"{name}(complex_func=True) with differentiated inputs: mutad differentiates "
            "integrals of real functions only.")
    for limit in (a, b):
        if _followed(limit) and np.isnan(limit):
            raise InvalidArgumentError(f"{name}: a NaN limit cannot be differentiated.")
    integral = _Integral(name, integrate, func, parameters, settings)
    values = parameters.values()
    with _buffers_written(name, parameters, (a, b, *values)):
        value = _QUAD(a, b, *values, integral=integral)
    if type(integral.found[0]) is float:  # quad's value is a Python float: promoted weakly
        weaken(value)
    return (value, *found_again(value, _besides_the_value, integral))


def _real_and_imaginary(func, a, b, args, settings):
    """``quad(complex_func=True)`` as SciPy computes it: ``quad`` of the integrand's real part
    and of its imaginary part over the limits in increasing order (SciPy's, which it does not
    flip back), each differentiated, joined as ``re + 1j * im``."""
    if b < a:  # (a decision on the limits, traced: a replay's guard)
        a, b = b, a
    real_settings = {**settings, "complex_func": False}
    re, im = (quad(lambda x, *p, part=part: getattr(func(x, *p), part), a, b, args,
                   **real_settings) for part in ("real", "imag"))
    found = (re[0] + 1j * im[0], re[1] + 1j * im[1])
    if settings.get("full_output"):
        found = found + ({"real": re[2:], "imag": im[2:]},)
    return found


def _in_frequency(func, a, b, args, settings):
    """``quad(weight='cos' or 'sin')`` of a differentiated frequency ``wvar`` ω: SciPy's
    integral at ω's number ω₀, plus ``(ω - ω₀)`` (zero, ``_shift``) times its derivative in ω,
    ``∂/∂ω ∫ f(x) cos(ωx) dx = ∫ -x f(x) sin(ωx) dx`` (``∫ x f(x) cos(ωx) dx`` for 'sin'),
    itself a weighted ``quad`` at ω₀: SciPy's value bit for bit, differentiated to first order
    in ω (and in the limits and parameters as ``quad`` is)."""
    if len(ACTIVE.running) > 1:
        raise UnsupportedOperationError(
            "quad: a differentiated wvar inside a nested differentiation (hvp, hessian): mutad "
            "differentiates a weighted integral in its frequency to first order only. Pass "
            "wvar as a constant (mutad.stop_gradient), or write the weight into the integrand.")
    _not_replayed("quad of a differentiated wvar, whose number it is called with")
    wvar = settings["wvar"]
    at = {**settings, "wvar": _plain(wvar)}
    found = quad(func, a, b, args, **at)
    sign, other = (-1.0, "sin") if settings["weight"] == "cos" else (1.0, "cos")
    slope = quad(lambda x, *p: sign * x * func(x, *p), a, b, args,
                 **{**at, "weight": other, "full_output": 0})[0]
    value = found[0] + _shift(wvar) * slope
    weaken(value)  # (quad's value is a Python float: promoted weakly)
    return (value, *found[1:])


def _besides_the_value(value, integral):
    """What ``integral`` found besides its ``value``: the error estimate (full_output's
    counts)."""
    return integral.found[1:]


@_routed(_quadpack_py.quad)
def quad(func: Callable[..., Any], a: float, b: float, args: Any = (), full_output: int = 0,
         epsabs: float = 1.49e-08, epsrel: float = 1.49e-08, limit: int = 50,
         points: Any = None, weight: str | None = None, wvar: Any = None,
         wopts: Any = None, maxp1: int = 50, limlst: int = 50,
         complex_func: bool = False) -> Any:
    """SciPy's ``quad``, differentiated in the limits and the parameters (``args=`` and the
    arrays ``func`` closes over): the parameters' gradient is ``quad`` of each entry of the
    integrand's pullback. Returns ``(value, abserr, ...)`` as SciPy does, only the value
    differentiated."""
    settings = dict(full_output=full_output, epsabs=epsabs, epsrel=epsrel, limit=limit,
                    points=points, weight=weight, wvar=wvar, wopts=wopts, maxp1=maxp1,
                    limlst=limlst, complex_func=complex_func)
    if not ACTIVE.running:
        return _quadpack_py.quad(func, a, b, args, **settings)
    return _integral("quad", _quadpack_py.quad, func, a, b,
                     args if isinstance(args, tuple) else (args,), settings)


@_routed(_quad_vec.quad_vec)
def quad_vec(f: Callable[..., Any], a: float, b: float, epsabs: float = 1e-200,
             epsrel: float = 1e-08, norm: str = "2", cache_size: float = 100e6,
             limit: int = 10000, workers: Any = 1, points: Any = None, quadrature: Any = None,
             full_output: bool = False, *, args: tuple[Any, ...] = ()) -> Any:
    """SciPy's ``quad_vec``, differentiated as ``quad`` is. Returns ``(value, error, ...)`` as
    SciPy does, only the value differentiated."""
    settings = dict(epsabs=epsabs, epsrel=epsrel, norm=norm, cache_size=cache_size,
                    limit=limit, workers=workers, points=points, quadrature=quadrature,
                    full_output=full_output)
    if not ACTIVE.running:
        return _quad_vec.quad_vec(f, a, b, args=args, **settings)
    return _integral("quad_vec", _quad_vec.quad_vec, f, a, b, tuple(args), settings)


def _limit(limit, *outer):
    """A limit of ``dblquad`` or ``tplquad``: a number, or a function of the outer variables."""
    return limit(*outer) if callable(limit) else limit


@_routed(_quadpack_py.dblquad)
def dblquad(func: Callable[..., Any], a: Any, b: Any, gfun: Any, hfun: Any, args: Any = (),
            epsabs: float = 1.49e-8, epsrel: float = 1.49e-8) -> Any:
    """SciPy's ``dblquad``: the ``nquad`` SciPy makes of it (``func(y, x)`` over ``y`` from
    ``gfun(x)`` to ``hfun(x)``, then ``x`` from ``a`` to ``b``), by mutad's :func:`nquad`."""
    def inner_range(x, *args):
        return [_limit(gfun, x), _limit(hfun, x)]

    return nquad(func, [inner_range, [a, b]], args=args,
                 opts={"epsabs": epsabs, "epsrel": epsrel})


@_routed(_quadpack_py.tplquad)
def tplquad(func: Callable[..., Any], a: Any, b: Any, gfun: Any, hfun: Any, qfun: Any,
            rfun: Any, args: Any = (), epsabs: float = 1.49e-8, epsrel: float = 1.49e-8) -> Any:
    """SciPy's ``tplquad``: the ``nquad`` SciPy makes of it (``func(z, y, x)`` over ``z``
    from ``qfun(x, y)`` to ``rfun(x, y)``, ``y`` from ``gfun(x)`` to ``hfun(x)``, then ``x``
    from ``a`` to ``b``), by mutad's :func:`nquad`."""
    def innermost_range(y, x, *args):
        return [_limit(qfun, x, y), _limit(rfun, x, y)]

    def middle_range(x, *args):
        return [_limit(gfun, x), _limit(hfun, x)]

    return nquad(func, [innermost_range, middle_range, [a, b]], args=args,
                 opts={"epsabs": epsabs, "epsrel": epsrel})


def _fixed(limits):
    """A range given as numbers, as the function of the outer variables SciPy makes of it;
    its closure holds them (for ``_Parameters`` to find)."""
    return lambda *outer: limits


@_routed(_quadpack_py.nquad)
def nquad(func: Callable[..., Any], ranges: Sequence[Any], args: Any = None, opts: Any = None,
          full_output: bool = False) -> Any:
    """SciPy's ``nquad``, differentiated in the parameters (``args=``, the arrays ``func``
    closes over, and those the ``ranges`` and ``opts`` functions receive): the integral nested
    as SciPy nests it, the innermost over the first variable, each level a ``quad`` that mutad
    differentiates (so the values are SciPy's, bit for bit, and the derivatives those of
    ``quad``, to second order). Returns ``(value, abserr)`` (and ``{'neval': ...}`` with
    ``full_output``) as SciPy does."""
    args = () if args is None else tuple(args) if isinstance(args, (tuple, list)) else (args,)
    limits = [r for r in ranges if not callable(r)]
    if not ACTIVE.running or not (
            _Parameters("nquad", (func, *(r for r in ranges if callable(r))), args).followed
            or _followed(*flatten(limits)[0])):
        with contextlib.ExitStack() as stack:
            if ACTIVE.running:  # nothing differentiated reaches the integral
                stack.enter_context(plain_allocation())
                func = _plain_call("nquad", func)
            return _quadpack_py.nquad(func, ranges, args, opts, full_output)
    depth = len(ranges)
    ranges = [r if callable(r) else _fixed(r) for r in ranges]
    opts = [{}] * depth if opts is None else opts if isinstance(opts, (list, tuple)) \
        else [opts] * depth
    opts = [o if callable(o) else _quadpack_py._OptFunc(o) for o in opts]
    found = {"abserr": 0.0, "neval": 0}

    def over(level):
        """The integral over variable ``depth - 1 - level`` of the rest, as a function of
        the variables already fixed (outermost last, then ``args``). Each level's function
        holds its range, options and the next level's function in its closure, where the
        quad that calls it finds the differentiated values they reach."""
        range_of, options_of = ranges[-(level + 1)], opts[-(level + 1)]
        inner = func if level + 1 == depth else over(level + 1)

        def integrate(*outer):
            low, high = range_of(*outer)
            settings = dict(options_of(*outer))
            if "points" in settings:
                settings["points"] = [x for x in settings["points"] if low <= x <= high]
            result = quad(inner, low, high, args=outer, full_output=full_output, **settings)
            found["abserr"] = max(found["abserr"], result[1])
            if full_output and inner is func:
                found["neval"] += result[2]["neval"]
            return result[0]

        return integrate

    integrate = over(0)
    value = integrate(*args)
    if full_output:
        return value, found["abserr"], {"neval": found["neval"]}
    return value, found["abserr"]


# ----------------------------------------------------------------------------------------------
# SciPy's step-by-step solvers used directly (RK45(fun, t0, y0, t_bound).step() in a loop):
# SciPy's own steps on the differentiated values


def _solver_class(scipy_class, stepped=True):
    """The stand-in for SciPy's solver class ``scipy_class`` (``registry.defroute``): SciPy's
    class, whose steps run on differentiated values as on plain ones. SciPy's solvers convert
    the right-hand side's value (``check_arguments``: ``np.asarray(fun(t, y), dtype)``),
    which would cut a traced one from its derivative; here it keeps it, as the same array, and
    ``y0`` traced is the state SciPy starts from. Every step (its step size control too) is then
    SciPy's arithmetic, differentiated as written: the derivative of the values SciPy computes.
    Not ``stepped`` (the implicit methods, whose work arrays SciPy's code allocates and fills
    each step, and LSODA's compiled code): a differentiated value reaching the solver is
    refused, solve_ivp with the method named instead."""

    def refuse():
        raise UnsupportedOperationError(
            f"scipy.integrate.{scipy_class.__name__} stepped on differentiated values: mutad "
            "follows the steps of the explicit Runge-Kutta classes (RK23, RK45, DOP853) only. "
            f"Call solve_ivp(fun, t_span, y0, method='{scipy_class.__name__}', t_eval=...) "
            "(dense_output=True for values between steps), which mutad differentiates.")

    class Solver(scipy_class):
        scipy = scipy_class  # (what solve_ivp(method=) given the stand-in runs)

        def __init__(self, fun: Callable[..., Any], t0: float, y0: Any, t_bound: float,
                     *args: Any, **kwargs: Any) -> None:
            self._mutad_fun = fun
            y0 = array_argument(y0)
            self._mutad_y0 = y0 if _followed(y0) else None
            if not stepped and carries_derivative(y0):
                refuse()
            super().__init__(fun, t0, _plain(y0) if self._mutad_y0 is not None else y0, t_bound,
                             *args, **kwargs)
            if stepped and _in_mode():  # the stages' work array, written with traced values
                extended = getattr(self, "K_extended", None)
                if extended is not None:  # (DOP853's: K its first rows)
                    self.K_extended = allocate(extended)
                    self.K = self.K_extended[:self.n_stages + 1]
                else:
                    self.K = allocate(self.K)

        def dense_output(self) -> Any:
            return _SteppedDense(super().dense_output()) if stepped else super().dense_output()

        def _dense_output_impl(self):
            if not (stepped and _in_mode() and getattr(self, "K_extended", None) is not None):
                return super()._dense_output_impl()
            # DOP853's (ivp/rk.py), its interpolant's coefficients F joined rather than written
            # into an array SciPy's code allocates (which would not hold traced values)
            K, h = self.K_extended, self.h_previous
            for s, (a, c) in enumerate(zip(self.A_EXTRA, self.C_EXTRA), start=self.n_stages + 1):
                dy = np.dot(K[:s].T, a[:s]) * h
                K[s] = self.fun(self.t_old + c * h, self.y_old + dy)
            f_old = K[0]
            delta_y = self.y - self.y_old
            F = np.concatenate([delta_y[None], (h * f_old - delta_y)[None],
                                (2 * delta_y - h * (self.f + f_old))[None],
                                h * np.dot(self.D, K)]).astype(self.y_old.dtype, copy=False)
            return _rk.Dop853DenseOutput(self.t_old, self.t, self.y_old, F)

        @property
        def _fun(self):
            fun, dtype = self._mutad_fun, self._mutad_dtype

            def fun_wrapped(t, y):
                f = array_argument(fun(t, y))
                if not _followed(f):
                    return np.asarray(f, dtype)
                if stepped:
                    return f.astype(dtype, copy=False)
                if carries_derivative(f):
                    refuse()
                return np.asarray(_plain(f), dtype)  # (a constant: an array f allocated)
            return fun_wrapped

        @_fun.setter
        def _fun(self, value):
            pass  # SciPy's own conversion (check_arguments): the property's instead

        @property
        def y(self) -> Any:
            return self._mutad_y

        @y.setter
        def y(self, value: Any) -> None:
            if "_mutad_y" not in self.__dict__:  # the state check_arguments made of y0
                self._mutad_dtype = value.dtype
                if self._mutad_y0 is not None:
                    value = self._mutad_y0.astype(value.dtype, copy=False)
            self._mutad_y = value

    Solver.__name__, Solver.__qualname__ = scipy_class.__name__, scipy_class.__qualname__
    Solver.__doc__ = (f"SciPy's ``{scipy_class.__name__}``, "
                      + ("stepped on differentiated values" if stepped else
                         "refusing differentiated values") + " (``integrate._solver_class``).")
    Solver.__module__ = __name__
    return defroute(scipy_class, Solver)


def _ode_class(scipy_class):
    """The stand-in for ``scipy.integrate.ode``: SciPy's class, whose compiled integrators
    (vode, lsoda, dopri5, dop853) take plain numbers. Each ``integrate(t)`` from a state or a
    right-hand side that depends on differentiated values runs SciPy's integrator on their
    plain values (its values SciPy's, bit for bit: the integrator carries its own state from
    call to call) and is differentiated as ``odeint`` is between its two times, the adjoint
    solved with LSODA to the integrator's tolerances. ``complex_ode`` (zvode) refuses
    differentiated values: solve_ivp or odeint instead."""

    def refused(what):
        return UnsupportedOperationError(
            f"scipy.integrate.{scipy_class.__name__} of {what} differentiated values: "
            "mutad differentiates the real ode's integrators (vode, lsoda, dopri5, dop853) from "
            "a constant time, not zvode's complex ones. Call solve_ivp(f, (t0, t1), y0, t_eval=...) (f(t, y, *args); "
            "method='LSODA' or 'BDF' for stiff problems) or odeint, which mutad "
            "differentiates, or read the values from f's closure.")

    complex_values = scipy_class is _ode.complex_ode

    class Ode(scipy_class):
        def __init__(self, f: Callable[..., Any], jac: Any = None) -> None:
            self._mutad_f, self._mutad_jac = f, jac
            self._mutad_state: Any = None  # the differentiated state, or None
            if complex_values:
                def plain(function, what):
                    def called(*args):
                        value = array_argument(function(*args))
                        if carries_derivative(value) or any(carries_derivative(a)
                                                            for a in args):
                            raise refused(what)
                        return value
                    return called
                f = plain(f, "a right-hand side that depends on")
                jac = None if jac is None else plain(jac, "a Jacobian that depends on")
            super().__init__(f, jac)

        @property
        def y(self) -> Any:
            return self._y if self._mutad_state is None else self._mutad_state

        def set_initial_value(self, y: Any, t: Any = 0.0) -> Any:
            if complex_values and any(carries_derivative(array_argument(v)) for v in (y, t)):
                raise refused("an initial value or time holding")  # (SciPy's asarray: a
            if _followed(t):                                        # ConversionError)
                raise refused("an initial time holding")
            y = array_argument(y)
            self._mutad_state = y if _followed(y) and np.ndim(y) else (
                np.reshape(y, (1,)) if _followed(y) else None)
            return super().set_initial_value(_plain(y) if _followed(y) else y, t)

        def integrate(self, t: Any, step: bool = False, relax: bool = False) -> Any:
            if complex_values:
                return super().integrate(t, step, relax)
            # (the Jacobian, which steers the integrator's iterations, not its solution, is
            # called on the plain values: it has no derivative to follow)
            parameters = _Parameters(f"scipy.integrate.{scipy_class.__name__}",
                                     (self._mutad_f, self._mutad_jac), self.f_params)
            if _followed(t, *self.jac_params):
                raise refused("a time or Jacobian parameters (set_jac_params) holding")
            if not parameters.followed and self._mutad_state is None:
                self._plain_functions()
                return super().integrate(t, step, relax)
            return self._differentiated(parameters, t, step, relax)

        def _plain_functions(self):
            name = f"scipy.integrate.{scipy_class.__name__}"
            self.f = _plain_call(name, self._mutad_f)
            self.jac = _plain_call(name, self._mutad_jac)

        def _differentiated(self, parameters, t, step, relax):
            integrator = self._integrator
            tolerance = 1e-6  # vode's, lsoda's and dopri5's default rtol
            problem = _Problem(
                f"scipy.integrate.{scipy_class.__name__}",
                _rhs("ode", self._mutad_f, parameters), parameters, float(self.t), float(t),
                "LSODA", getattr(integrator, "rtol", tolerance) or tolerance,
                getattr(integrator, "atol", 1e-12) or 1e-12, np.inf)
            t0, y0 = float(self.t), self._mutad_state
            if y0 is None:
                y0 = np.array(self._y, dtype=float)
            start = np.array(self._y)  # the integrator's state, which it continues from

            def forward(y0_plain, values):
                if not np.array_equal(y0_plain, start):
                    raise UnsupportedOperationError(
                        f"{problem.name}.integrate: the state was changed in place after "
                        "the integration that made it.")
                given = self.f_params
                self._plain_functions()
                with plain_allocation(), parameters.bound(values):
                    self.f_params = tuple(parameters.args(values))
                    try:
                        y1 = np.array(scipy_class.integrate(self, t, step, relax), dtype=float)
                        scipy_ran()
                    finally:
                        self.f_params = given
                parameters.freeze()
                problem.times = np.array([t0, float(self.t)])

                def path(t_from, t_to):
                    rhs = _plain_call(problem.name, lambda s, y: problem.rhs(s, y, values))
                    with plain_allocation():
                        sol = problem._solve_ivp(rhs, (t0, float(self.t)), start,
                                                 dense_output=True)
                    return sol.sol

                return np.stack([start, y1]), path

            problem.forward = forward
            values = parameters.values()
            with _buffers_written(problem.name, parameters, (y0, *values)):
                self._mutad_state = _ODE(y0, *values, problem=problem)[1]
            return self._mutad_state

    Ode.__name__, Ode.__qualname__ = scipy_class.__name__, scipy_class.__qualname__
    Ode.__doc__ = (f"SciPy's ``{scipy_class.__name__}``, "
                   + ("refusing differentiated values." if complex_values else
                      "its integrations differentiated as odeint's (``integrate._ode_class``)."))
    Ode.__module__ = __name__
    return defroute(scipy_class, Ode)


class _SteppedDense:
    """SciPy's interpolant of one step (``solver.dense_output()``), called at a traced time
    too: SciPy's ``DenseOutput.__call__`` converts the time by ``np.asarray``."""

    def __init__(self, dense):
        self.dense = dense

    def __getattr__(self, name):
        return getattr(self.dense, name)

    def __call__(self, t):
        t = array_argument(t)
        if not _followed(t):
            return self.dense(t)
        if np.ndim(t) > 1:
            raise ValueError("`t` must be a float or a 1-D array.")
        return self.dense._call_impl(t)


RK23, RK45, DOP853 = (_solver_class(c) for c in (_rk.RK23, _rk.RK45, _rk.DOP853))
Radau, BDF, LSODA = (_solver_class(c, stepped=False) for c in (
    _radau.Radau, _bdf.BDF, _lsoda.LSODA))
ode, complex_ode = _ode_class(_ode.ode), _ode_class(_ode.complex_ode)
