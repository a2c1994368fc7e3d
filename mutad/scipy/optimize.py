"""``scipy.optimize`` solvers called inside a differentiated function, differentiated by the
implicit function theorem, by SciPy's names too (``scipy.optimize.minimize``, ``from
scipy.optimize import brentq``).

>>> import numpy as np, mutad
>>> from mutad.scipy import optimize
>>> def f(theta):     # x*(θ) = argmin Σ (x - θ)² + Σ x⁴ / 4
...     fun = lambda x: ((x - theta) ** 2).sum() + (x ** 4).sum() / 4
...     return optimize.minimize(fun, np.zeros(2), method="BFGS",
...                              options={"gtol": 1e-10}).x.sum()
>>> mutad.gradient(f, np.array([1.0, 2.0]))[0].round(4).tolist()    # 2 / (2 + 3 x*²)
[0.5287, 0.324]

The solver runs as SciPy's own, on plain numbers: the functions it is given are called with
plain arrays, and with the current values of what the differentiation follows, whether that
reaches them through ``args=`` (``kwargs=`` of ``least_squares``, ``xdata``, ``ydata`` and
``sigma`` of ``curve_fit``) or through their closures (a ``lambda`` over a traced ``theta``, a
``functools.partial``, a bound method's function). Its result is SciPy's, bit for bit. What
carries a derivative is the condition that holds at the solution, ``F(x*, θ) = 0``: mutad
differentiates ``F`` itself at ``x*`` (nested differentiation of the user's functions, so that
``θ`` is found wherever the functions reach it), and the implicit function theorem gives

    dx*/dθ = -(∂F/∂x)⁻¹ ∂F/∂θ,

which reverse mode applies as ``θ̄ = -(∂F/∂θ)ᵀ λ`` with ``(∂F/∂x)ᵀ λ = x̄``, and forward mode as
``ẋ = -(∂F/∂x)⁻¹ Ḟ``. ``F`` for each solver:

* ``minimize`` (every method: BFGS, L-BFGS-B, CG, Newton-CG, the trust methods, Nelder-Mead,
  Powell, TNC, SLSQP, COBYLA, ...) and ``minimize_scalar`` (and the legacy ``golden``,
  ``brent`` and ``fminbound``, whose arithmetic alone would give a derivative of 0; and the
  global minimizers ``brute``, ``differential_evolution``, ``shgo``, ``dual_annealing``,
  ``direct`` and ``basinhopping``,
  at the minimum they return, where it is stationary):
  ``F = ∇ₓL``, and ``∂F/∂x`` the Hessian of ``L``, applied by mutad's Hessian-vector products
  (``mutad.hvp``). ``res.fun`` is differentiated by the envelope theorem, ``dL*/dθ = ∂L/∂θ``
  at ``x*``; ``res.jac`` (``∇ₓL`` at ``x*``, zero along the solutions) keeps SciPy's values,
  whose derivative is zero (refused when a bound holds the minimum). With ``constraints=``
  (SLSQP, trust-constr, COBYLA, ...: dicts ``{'type': 'eq' or 'ineq', 'fun', 'args'}``, whose
  functions may read differentiated values, as may ``NonlinearConstraint`` and
  ``LinearConstraint`` objects' functions and bounds): ``F`` is the KKT conditions in ``(x, λ)``,
  ``[∇ₓ(L - λ·g); g] = 0`` over the active constraints ``g`` (the equalities, the
  inequalities meeting their bound within 1e-6 of ``x*``'s size, and the bounds ``x*`` lies
  on), ``λ`` the least-squares multipliers at ``x*`` (refused when ``∇L`` is not a combination
  of the active gradients, and when an active inequality's multiplier is not above zero: not
  strictly active, one-sided); ``∂F/∂(x, λ)`` by forward and reverse products, and
  ``res.fun`` by the envelope theorem, ``∂(L - λ·g)/∂θ``. First order.
* ``least_squares`` and ``curve_fit``: ``F = ∇ₓ ½‖r‖²``, with the exact Hessian of ``½‖r‖²``
  (not Gauss-Newton's ``JᵀJ``, which drops the residuals' curvature); ``curve_fit``'s
  residuals are ``(f(xdata, *p) - ydata) / sigma``, and ``least_squares``' robust losses
  (``soft_l1``, ``huber``, ``cauchy``, ``arctan``) make the cost ``½ C² Σ ρ((r / C)²)``,
  ``C = f_scale``, differentiated as it is. ``least_squares``' ``res.cost`` by the envelope
  theorem, ``res.fun`` as ``r(x*, θ)``.
* ``root``, ``fsolve``: ``F = fun``, ``∂F/∂x`` its Jacobian (``mutad.jvp`` and reverse mode).
* ``fixed_point``: ``F = func(x) - x``.
* ``brentq``, ``brenth``, ``ridder``, ``bisect``, ``toms748``, ``root_scalar``, ``newton`` (of a
  scalar): ``dx*/dθ = -(∂f/∂θ) / f'(x*)``.
* ``linprog``: SciPy's (HiGHS's) solution, ``x`` and ``fun`` differentiated at a nondegenerate
  vertex as ``x = K⁻¹ r`` of the ``n`` constraints active there (each with a nonzero
  marginal); degenerate and non-unique solutions are refused. ``approx_fprime``: SciPy's
  forward differences step by step; ``check_grad``: SciPy's own code, its differences those.
  ``lsq_linear`` of a dense ``A``: ``x``, ``fun`` and ``cost`` through SciPy's active set
  (coordinates at a bound, each with a nonzero multiplier, held there; the free ones the
  least-squares solution of their columns).
* ``nnls(A, b)``, which calls no function of the user's, has a rule of its own on its
  arguments: the coordinates SciPy's solution holds at 0 stay there (its active set, a
  decision), the free ones are the least-squares solution of their columns, and ``rnorm`` is
  ``‖b - A x‖`` (Golub & Pereyra 1973); every order follows, and a replay runs it again.
* ``linear_sum_assignment(C)``: SciPy's assignment, a decision without a derivative (a replay
  assigns again); the costs it selects, ``C[rows, cols]``, are differentiated where the
  program indexes them.

Solving with ``∂F/∂x``: up to 32 unknowns the matrix is formed (one product per column) and
decomposed: a minimum's Hessian must be positive definite, a Jacobian nonsingular, with a
condition number below 1e12, else the call is refused. Beyond that the matrix is never formed:
conjugate gradients for a Hessian (refused at a direction of zero or negative curvature), GMRES
for a Jacobian, to a relative residual of 1e-10 (refused when the true residual is not below
1e-8). The derivative is that of the exact solution of ``F = 0``, at SciPy's ``x*``: its
error is the solver's, about ``‖(∂F/∂x)⁻¹ F(x*)‖`` relative to ``x*``'s scale, so tight solver
tolerances (``gtol=1e-10``, ``xtol=1e-12``) give accurate derivatives. mutad checks that this
Newton step is below 1e-3 (relative to ``1 + ‖x*‖``), or below 1e-6 when SciPy reports that it
did not converge (BFGS's "precision loss" at a solution found to rounding), and refuses
otherwise.

Bounds (``minimize``'s L-BFGS-B, TNC, Powell, ...; ``least_squares``'): a coordinate of the
minimum on a bound (within 1e-12 of it, relative; for ``least_squares``, those its
``active_mask`` names) is held there when the bound is strictly active: the objective's slope
pushes it outwards, enough that the minimum along it, were the bound lifted, lies beyond 1e-6
of ``x*``'s size. Small changes of the differentiated values then leave it on the bound (its
derivative is zero), and the free coordinates are differentiated as the minimum of the
objective with it fixed (the free block of the Hessian). A bound the slope does not push
against (the unconstrained minimum on it) leaves a one-sided derivative: refused.

Derivatives of higher order (``mutad.hessian``, ``mutad.hvp``, a gradient of a gradient, a
solver inside a nested differentiation whose functions reach the values of both): the solution
is written as chord steps from SciPy's ``x*``, held constant, ``x_{k+1} = x_k - (∂F/∂x)⁻¹
F(x_k, θ)`` with ``∂F/∂x`` taken at ``x*`` and ``θ``'s plain values, one step per order asked,
which every differentiation follows; k steps leave an error of order ``|δθ|^(k+1)``, so the
derivatives up to order k are those of the exact solution of ``F = 0`` (the value stays
SciPy's). ``res.fun`` and ``least_squares``' ``res.cost`` are then the objective at that
solution.

Refused, with a ``MutadError`` that says so: constraints not strictly active, or given as
objects that depend on the differentiated values (pass dicts), a callable
``loss`` of ``least_squares``, a 2-D ``sigma`` or ``nan_policy`` of ``curve_fit`` when what they
touch is differentiated, and functions that reach a differentiated value other than through
their arguments, closures and the attributes of the user's objects those hold (a global, an
object reached otherwise): pass it through
``args=``. The start ``x0`` and a bracket carry no derivative (the solution does not
depend on them). A replay (``mutad.grad(f, replay=True)``) traces a function that calls a
solver on every call, since the solver must run again. The fields of a result that carry no
derivative and depend on the differentiated values (``hess_inv``, ``final_simplex``,
``root``'s ``fjac``, ``least_squares``' ``jac``) raise when used. ``curve_fit``'s ``pcov`` is
SciPy's, differentiated as ``(JᵀJ)⁻¹ s²`` with the exact Jacobian J of the residuals at
``popt`` (SciPy estimates J by differences: the derivative is that of the covariance to the
estimate's accuracy); refused where SciPy's is infinite or J is rank-deficient. With nothing
differentiated reaching the solver, it is SciPy's own call.
"""

import copy
import functools
import inspect
import sys
import types
from typing import Any

import numpy as np
import scipy.optimize as _optimize
from scipy.optimize import _pava_pybind
import scipy.sparse as _sparse
import scipy.sparse.linalg as _sparse_linalg

from ..core.allocation import allocate, by_user_code, lists_as_arrays, user_object
from .. import api as _api
from ..api import stop_gradient
from ..custom import Adjoint
from ..core.errors import UnsupportedOperationError
from ..core.levels import ACTIVE, WRAPPERS, Tracer
from ..core.registry import defroute
from ..core.trees import REGISTERED
from ..core.views import may_overlap, memory, weaken
from ..engines.arraylike import carries_derivative
from ._adjoints import (BuffersWritten, ScipysCode, StandIn, StandInClass, Value, not_replayed,
                        outside_differentiations, reproduces, scipy_ran, scipys_value)
from ._adjoints import scipy_adjoint as _scipy_adjoint
from ._adjoints import solvers_last as _solvers_last

__all__ = ["anderson", "approx_fprime", "basinhopping", "bisect", "brenth", "brentq",
           "broyden1", "broyden2", "brute", "check_grad", "curve_fit", "diagbroyden",
           "differential_evolution", "direct",
           "dual_annealing", "excitingmixing", "fixed_point", "fmin", "fmin_bfgs",
           "fmin_cg", "fmin_l_bfgs_b", "fmin_ncg", "fmin_powell", "fmin_tnc", "fminbound",
           "fsolve", "golden", "brent",
           "least_squares", "leastsq", "linear_sum_assignment", "linearmixing", "linprog",
           "lsq_linear", "minimize", "Bounds", "LinearConstraint",
           "minimize_scalar", "newton",
           "newton_krylov", "nnls", "ridder", "root", "root_scalar", "shgo", "toms748"]

DENSE = 32
"""Up to this many unknowns, ``∂F/∂x`` is formed and decomposed; beyond, solved iteratively."""

RCOND = 1e-12
"""The smallest ratio of ``∂F/∂x``'s smallest to largest singular value (eigenvalue, for a
minimum) accepted: below it the solution is refused as singular."""

ITERATIVE_RTOL = 1e-10
"""The relative residual the iterative solves aim at; one above 1e-8 is refused."""

STEP = 1e-3
"""The largest Newton step ``‖(∂F/∂x)⁻¹ F(x*)‖ / (1 + ‖x*‖)`` accepted at a solution SciPy
reports converged; ``STEP_FAILED`` at one it reports not converged."""

STEP_FAILED = 1e-6

ON_BOUND = 1e-12
"""A coordinate of a minimum this close to a bound, relative to ``1 + |bound|``, is on it."""


# ----------------------------------------------------------------------------------------------
# The plain problem: the user's functions and arguments with the differentiated values' numbers


def _plain(x, memo):
    """``(x with every traced or dual value replaced by its plain numbers, whether one was,
    whether one of them depends on what a differentiation follows)``, looking into tuples,
    lists, dicts, the closures and defaults of functions, ``functools.partial`` objects,
    bound methods and the attributes of the user's objects (copied). (Arrays the differentiated code allocated are traced constants until a
    traced value is written into them: replaced, but not followed.) The original objects are
    left as they are; a function is copied with new cells only where a cell held such a
    value."""
    key = id(x)
    if key in memo:
        return memo[key][1]
    # A function reaching itself (recursion) reaches the original; x is kept alive with its
    # entry, so that no temporary made meanwhile takes its id.
    memo[key] = x, (x, False, False)
    result = x, False, False
    if isinstance(x, Tracer):
        value = memory(x).copy()
        result = (value[()] if value.ndim == 0 else value), True, _followed(x)
    elif type(x) in (tuple, list) or (isinstance(x, tuple) and hasattr(x, "_fields")):
        items = [_plain(item, memo) for item in x]
        if any(replaced for _, replaced, _ in items):
            values = [v for v, _, _ in items]
            result = ((type(x)(*values) if hasattr(x, "_fields") else type(x)(values)), True,
                      any(followed for _, _, followed in items))
    elif type(x) is dict:
        items = {k: _plain(v, memo) for k, v in x.items()}
        if any(replaced for _, replaced, _ in items.values()):
            result = ({k: v for k, (v, _, _) in items.items()}, True,
                      any(followed for _, _, followed in items.values()))
    elif type(x) is types.FunctionType:
        result = _plain_function(x, memo)
    elif type(x) is functools.partial:
        (func, args, keywords), replaced, followed = _plain((x.func, x.args, x.keywords), memo)
        if replaced:
            result = functools.partial(func, *args, **keywords), True, followed
    elif type(x) is types.MethodType:
        (func, owner), replaced, followed = _plain((x.__func__, x.__self__), memo)
        if replaced:
            result = types.MethodType(func, owner), True, followed
    elif isinstance(x, (_optimize.NonlinearConstraint, _optimize.LinearConstraint,
                        _optimize.Bounds)):
        # SciPy's plain records of a constraint (which its solvers convert, calling their
        # functions and products): a copy holding the plain values
        items = {k: _plain(v, memo) for k, v in vars(x).items()}
        if any(replaced for _, replaced, _ in items.values()):
            twin = copy.copy(x)
            twin.__dict__.update({k: v for k, (v, _, _) in items.items()})
            result = twin, True, any(followed for _, _, followed in items.values())
    elif type(x) in WRAPPERS:
        # a traced sparse matrix (or np.matrix): SciPy's object of its plain numbers, which
        # it stands for; followed where the arrays it holds (its pytree's children) are
        value = x
        while type(value) in WRAPPERS:
            value = value.value
        if isinstance(value, np.ndarray):  # (np.matrix: a view of the traced memory)
            value = value.copy()
        children, _ = REGISTERED[type(x)][0](x)
        result = value, True, any(isinstance(c, Tracer) and _followed(c) for c in children)
    elif user_object(x) and type(x).__new__ is object.__new__:
        # a dataclass of parameters: a twin holding their numbers, made without calling the
        # class's code (its __init__, __copy__ or __getattr__), the object itself untouched
        items = {k: _plain(v, memo) for k, v in vars(x).items()}
        if any(replaced for _, replaced, _ in items.values()):
            twin = object.__new__(type(x))
            twin.__dict__.update({k: v for k, (v, _, _) in items.items()})
            result = twin, True, any(followed for _, _, followed in items.values())
    memo[key] = x, result
    return result


def _plain_function(f, memo):
    cells, replaced, followed = [], False, False
    for cell in f.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            cells.append(cell)
            continue
        value, changed, depends = _plain(contents, memo)
        # Cells without such values are shared with the original: a counter the function
        # keeps in one (nonlocal) counts the solver's calls as it would.
        cells.append(types.CellType(value) if changed else cell)
        replaced, followed = replaced or changed, followed or depends
    defaults, changed, depends = _plain(f.__defaults__, memo)
    replaced, followed = replaced or changed, followed or depends
    kwdefaults, changed, depends = _plain(f.__kwdefaults__, memo)
    replaced, followed = replaced or changed, followed or depends
    if not replaced:
        return f, False, False
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, defaults, tuple(cells))
    g.__kwdefaults__ = kwdefaults
    g.__qualname__ = f.__qualname__
    g.__dict__.update(f.__dict__)
    return g, True, followed


def _plain_call(original, args, kwargs, copies=None, inputs=None):
    """SciPy's ``original`` called with ``args`` and ``kwargs``: every argument by name
    (defaults filled in), the same with plain numbers, the plain twin of what the call gave
    (for SciPy's own call), and whether a value replaced depends on what a differentiation
    follows; ``copies`` (a list) gets the arrays copied for it (``_written_back``), ``inputs``
    (a list) the values replaced that a differentiation follows (``BuffersWritten``)."""
    bound = inspect.signature(original).bind(*args, **kwargs)
    given = dict(bound.arguments)
    bound.apply_defaults()
    memo, call, followed = {}, {}, False
    for name, value in given.items():
        call[name], _, depends = _plain(value, memo)
        followed |= depends
    if copies is not None:
        # the copies SciPy's run gets of the function's arrays (a buffer its closure holds),
        # with their numbers now: what the run writes into them is told after it
        copies += [(x, value, value.copy()) for x, (value, _, _) in memo.values()
                   if isinstance(x, Tracer) and isinstance(value, np.ndarray)]
    if inputs is not None:
        for x, (_, _, depends) in memo.values():
            if depends and isinstance(x, Tracer):
                inputs.append(x)
            elif depends and type(x) in WRAPPERS:  # (a traced sparse matrix: its arrays)
                inputs += [c for c in REGISTERED[type(x)][0](x)[0] if isinstance(c, Tracer)]
    return bound.arguments, {**bound.arguments, **call}, call, followed


def _called_at_solution(original, a, result):
    """Call the user's function that SciPy's solver ``original`` evaluates at its solution
    (``a``: the call's arguments by name) at the differentiated solution in ``result``, as
    SciPy calls it: what it writes into the buffers of its closure then has the derivatives of
    the solution. False for the solvers this does not know."""
    name = original.__name__
    full = bool(a.get("full_output", False))
    if name == "curve_fit":
        a["f"](a["xdata"], *result[0])
        return True
    if name in ("minimize", "root", "least_squares"):
        functions, x = [a["fun"], a["jac"]], result.x
    elif name == "fsolve":
        functions, x = [a["func"], a["fprime"]], result[0] if full else result
    elif name in ("brentq", "brenth", "ridder", "bisect", "toms748"):
        functions, x = [a["f"]], result[0] if full else result
    else:
        return False
    for function in functions:  # (SciPy's order: the function, then its derivative)
        if callable(function):
            function(x, *_tuple(a["args"]), **(a.get("kwargs") or {}))
    return True


def _written_back(name, copies, followed, inputs=None, at_solution=None):
    """What SciPy's run wrote into the copies of the function's arrays (``_plain_call``),
    written into those arrays: they then hold what NumPy leaves there, the values of SciPy's
    last call. Where no value in the call depends on what the differentiation follows, those
    are plain numbers. Where the call is followed, they depend on the differentiated values:
    where SciPy's last call was at its solution, the user's function called there
    (``at_solution``, which says whether it knows how) writes them, with the derivatives of
    the solution; elsewhere (a finite-difference step, a trial point) they depend on them
    through the solver's iterations, which mutad does not differentiate: they are written by
    the recorded step ``_solvers_last`` of the call's differentiated ``inputs``, as a
    module-level array's (``BuffersWritten``), whose derivative is refused where one reaches
    them (refused at once without ``inputs``: a solver whose rule's derivative runs of the
    functions cannot take the buffers)."""
    changed = [(array, copy_) for array, copy_, before in copies
               if copy_.tobytes() != before.tobytes()]
    if followed and changed and at_solution is not None and at_solution():
        if all(memory(array).tobytes() == copy_.tobytes() for array, copy_ in changed):
            # SciPy's last call was at its solution (or wrote the same numbers): the user's
            # function called at the differentiated solution wrote SciPy's last numbers into
            # the buffers, with their derivatives
            return
        if any(memory(array).tobytes() != before.tobytes() for array, copy_, before in copies
               if copy_.tobytes() == before.tobytes()):
            # (the call at the solution wrote into an array SciPy's run left as it was)
            raise UnsupportedOperationError(_WRITTEN_ELSEWHERE.format(name=name))
    inputs = None if inputs is None else [v for v in inputs if carries_derivative(v)]
    for array, copy_ in changed:
        if followed and inputs is not None:
            # (a copy: the step keeps its input, and the run's copy may be written again)
            array[...] = _solvers_last(copy_.copy(), *inputs)
        elif not followed and _constant_at(array):
            array[...] = copy_
        else:
            raise UnsupportedOperationError(_WRITTEN_ELSEWHERE.format(name=name))


_WRITTEN_ELSEWHERE = (
    "{name}: a function given to it writes into an array the differentiated function holds (a "
    "buffer in its closure), which after the solve holds what SciPy's last call of it wrote: "
    "values at a point other than the solution (a finite-difference step, a trial point of "
    "the solver's iterations), which mutad does not differentiate. Give the solver the "
    "derivative (jac=), so that its last call is at the solution, or let the function return "
    "new arrays (r = ...; return r, or a buffer allocated inside it), and compute what the "
    "buffer held from the solution.")


_BUFFERS: list = []
"""For each solver running (innermost last), the innermost differentiation it was called in
and the closure cells of the user's functions given to it that hold arrays a differentiation
follows (``_buffer_cells``)."""


def _buffer_cells(items):
    """The closure cells of the Python functions among ``items`` (in lists, tuples, dicts,
    ``functools.partial``, objects, and the functions their closures hold) that hold traced
    arrays (a buffer the function writes into, ``r[:] = ...``); none where one of those arrays
    may share memory with another of them, or with a traced array reached otherwise (a view of
    it in the closure, an argument, an object's attribute), which a copy would part."""
    cells, others = [], []
    _closure_arrays(items, set(), cells, others)
    arrays = list({id(cell.cell_contents): cell.cell_contents for cell in cells}.values())
    for i, a in enumerate(arrays):
        if any(may_overlap(a, b) for b in [*arrays[i + 1:], *others]):
            return []
    return cells


def _closure_arrays(items, seen, cells, others):
    for x in items:
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Tracer):
            if hasattr(x, "shape"):
                others.append(x)
        elif type(x) in (list, tuple):
            _closure_arrays(x, seen, cells, others)
        elif type(x) is dict:
            _closure_arrays(x.values(), seen, cells, others)
        elif isinstance(x, functools.partial):
            _closure_arrays((x.func, x.args, x.keywords), seen, cells, others)
        elif isinstance(x, types.FunctionType):
            for cell in x.__closure__ or ():
                try:
                    contents = cell.cell_contents
                except ValueError:  # a cell not filled yet
                    continue
                if isinstance(contents, Tracer) and hasattr(contents, "shape"):
                    seen.add(id(contents))
                    cells.append(cell)
                else:
                    _closure_arrays((contents,), seen, cells, others)
        elif user_object(x) and hasattr(x, "__dict__"):
            _closure_arrays(vars(x).values(), seen, cells, others)


def _privately(f, all_levels=False):
    """``f`` for a differentiation nested in a solver's rule (``all_levels``: for the rule
    itself): while it runs, the closure cells of the user's functions that hold an enclosing
    differentiation's array (a buffer they write into) hold a copy of it made at the nested
    level, which that differentiation follows. The evaluations the derivatives need (at SciPy's
    solution held constant, or inside a nested differentiation, whose values an enclosing
    level's array cannot take) leave the buffer as it was; ``_written_back`` tells what it
    holds after the solve."""
    if not any(cells for _, cells in _BUFFERS):
        return f

    def privately(*args, **kwargs):
        # (the cells of the solvers whose differentiation this one runs inside, not of those
        # whose plain twins' evaluations run outside every differentiation)
        running = ACTIVE.running if all_levels else ACTIVE.running[:-1]
        saved = [(cell, cell.cell_contents) for caller, cells in _BUFFERS
                 if any(caller is d for d in running) for cell in cells]
        copies = {}  # (one copy of an array two cells hold)
        try:
            for cell, contents in saved:
                if id(contents) not in copies:
                    copies[id(contents)] = allocate(np.zeros(np.shape(contents),
                                                             np.result_type(contents)))
                    copies[id(contents)][...] = contents
                cell.cell_contents = copies[id(contents)]
            return f(*args, **kwargs)
        finally:
            for cell, contents in saved:
                cell.cell_contents = contents

    return privately


def _nested(transform):
    """The differentiation ``transform`` (``mutad.grad``, ``jvp``, ...) of ``_privately(f)``."""
    @functools.wraps(transform)
    def nested(f, *args, **kwargs):
        return transform(_privately(f), *args, **kwargs)
    return nested


grad, hvp, jacfwd, jacobian, jvp = map(_nested, (_api.grad, _api.hvp, _api.jacfwd,
                                                 _api.jacobian, _api.jvp))


def _run(original, call, **settings):
    """SciPy's own call with the arguments ``call`` (by name) and ``settings``, on plain
    numbers."""
    arguments = {**call, **settings}
    positional, keywords = [], {}
    for name, parameter in inspect.signature(original).parameters.items():
        if name not in arguments:
            continue
        if parameter.kind is parameter.POSITIONAL_ONLY:
            positional.append(arguments[name])
        elif parameter.kind is parameter.VAR_POSITIONAL:
            positional.extend(arguments[name])
        elif parameter.kind is parameter.VAR_KEYWORD:
            keywords.update(arguments[name])
        else:
            keywords[name] = arguments[name]
    with outside_differentiations(f"scipy.optimize.{original.__name__}"):
        result = original(*positional, **keywords)
    scipy_ran()
    if _RUNS:
        # what SciPy's run left in the copies of the buffers, before the rule's evaluations of
        # the plain twins (a Hessian's at the solution) write into them too
        _RUNS[-1][:] = [(x, value.copy(), before) for x, value, before in _RUNS[-1]]
    return result


_RUNS: list = []
"""The copies of the buffers (``_plain_call``'s) of each solver running (innermost last)."""


def _tuple(args):
    return args if isinstance(args, tuple) else (args,)


def _constant_at(y):
    """Whether traced or dual ``y`` is a constant of its own level."""
    buffer = getattr(y, "buffer", None)
    return buffer.constant if buffer is not None else y.constant()


def _followed(y):
    """Whether ``y`` (a result of the user's functions) depends on values a differentiation
    follows: a traced or dual array that is not a constant, at its level or at one of the
    levels its value belongs to (an enclosing differentiation's array, constant here)."""
    return isinstance(_innermost_followed(y), Tracer)


def _innermost_followed(y):
    """``y`` at the innermost level that follows it: a constant of a level is, for that level,
    its value (the enclosing levels' array), so a solution depending on an enclosing level
    alone is that level's, however deep the call."""
    while isinstance(y, Tracer) and _constant_at(y):
        y = y.value
    return y


def _as_array(y):
    """What a user's function returned, as SciPy reads it: a list or tuple of numbers as one
    array, stacked so that the items a differentiation follows keep their derivatives."""
    if type(y) in (list, tuple):
        return lists_as_arrays([y])[0]
    return y


def _gradient(objective, x):
    """The gradient of ``objective`` at plain ``x``, by nested differentiation: a function of
    the values the running differentiations follow, wherever ``objective`` reaches them (its
    closure holds the user's arguments, which are its constants)."""
    return grad(objective)(np.array(x, dtype=float))


def _constant(x):
    """A copy of plain ``x`` as an array the running differentiations follow (a constant of
    theirs), for the user's functions to compute with, in place too, on the differentiated
    values: as an array they allocated."""
    return allocate(np.array(x, dtype=float))


def _numbers(y):
    """The plain float64 numbers of ``y``, flat."""
    if isinstance(y, Tracer):
        y = memory(y)
    return np.array(y, dtype=float).ravel()


def _order(y):
    """How many running differentiations follow ``y``: the order of the derivatives asked of
    it (1 for a gradient, 2 for a Hessian, ...), 0 for a plain value."""
    order = 0
    while isinstance(y, Tracer):
        order += not _constant_at(y)
        y = y.value
    return order


def _first_order(name, y):
    """Refuse ``y`` followed by an enclosing differentiation in a first-order rule: those
    cases take the chord steps (``_solution``), so this is never reached by the solvers'
    own paths, only guards the rules against a new one."""
    if _order(y):
        raise UnsupportedOperationError(
            f"{name}: a derivative of higher order through the solution reached a rule that "
            "differentiates it once (the implicit function theorem at the solution's "
            "numbers). Differentiate it once, or write the solver's iterations in NumPy.")


# ----------------------------------------------------------------------------------------------
# ∂F/∂x at the solution, and its solves


class _Linearization:
    """``∂F/∂x`` at the solution, given by its products with vectors (plain, flat), for the
    solves of the implicit derivative. ``minimum``: it is a Hessian at a minimum (symmetric,
    positive definite); otherwise a Jacobian, with ``transposed`` its transpose's products.
    ``free``: where the solution is free (a mask; the other coordinates are held by bounds,
    and the solves are those of the block of the free ones). Refuses, when made, a matrix that
    is singular (or not positive definite, at a minimum). ``matrix``: ``∂F/∂x`` itself, where
    the caller computed it at once, taken as the dense matrix whatever its size, or, a SciPy
    sparse matrix, factored sparsely (a large banded system, whose dense decomposition would
    take the cube of its size)."""

    def __init__(self, name, n, apply, transposed=None, minimum=False, free=None, matrix=None):
        self.name, self.minimum = name, minimum
        self.full, self.n = n, n if free is None else int(np.count_nonzero(free))
        self.free = free
        self.whole = apply
        self.apply = self._block(apply)
        self.transposed = self._block(transposed) if transposed is not None else self.apply
        self.dense = self.factors = None
        if _sparse.issparse(matrix):
            A = _sparse.csc_matrix(matrix, dtype=float)
            self._factor(A if free is None else A[np.flatnonzero(free)][:, np.flatnonzero(free)])
        elif self.n <= DENSE or matrix is not None:
            n = self.n
            if matrix is not None:
                A = np.array(matrix, dtype=float).reshape(self.full, self.full)
                A = A if free is None else A[np.ix_(free, free)]
            else:
                with outside_differentiations(name):
                    columns = [self.apply(e) for e in np.eye(n)]
                A = np.array(columns, dtype=float).reshape(n, n).T
            if not np.all(np.isfinite(A)):
                raise self._singular("is not finite")
            if minimum:
                w, V = np.linalg.eigh((A + A.T) / 2)
                top = np.abs(w).max() if n else 0.0
                if n and w.min() < -RCOND * top:
                    raise self._singular(
                        f"has a negative eigenvalue ({w.min():.3g}): the point is not a minimum "
                        "(a saddle point)")
                if n and not w.min() > RCOND * top:
                    raise self._singular(f"is singular (eigenvalues from {w.min():.3g} to "
                                         f"{w.max():.3g})")
                self.dense = (V, w, V.T)
            else:
                U, s, Vt = np.linalg.svd(A)
                if n and not s.min() > RCOND * s.max():
                    raise self._singular(f"is singular (singular values from {s.min():.3g} "
                                         f"to {s.max():.3g})")
                self.dense = (Vt.T, s, U.T)

    def _factor(self, A):
        """The sparse LU factors of ``A`` (SciPy's ``splu``), refused where ``A`` is singular:
        exactly (no factors), or to working accuracy (its 1-norm condition number, estimated
        by a few solves, beyond ``1 / RCOND``)."""
        if not np.all(np.isfinite(A.data)):
            raise self._singular("is not finite")
        if not self.n:
            return
        try:
            self.factors = _sparse_linalg.splu(A)
        except RuntimeError:
            raise self._singular("is exactly singular") from None
        inverse = _sparse_linalg.LinearOperator(
            A.shape, matvec=self.factors.solve, dtype=float,
            rmatvec=lambda v: self.factors.solve(v, trans="T"))
        condition = _sparse_linalg.norm(A, 1) * _sparse_linalg.onenormest(inverse)
        if not condition < 1.0 / RCOND:
            raise self._singular(f"is singular (a condition number of {condition:.3g})")

    def _block(self, apply):
        """``apply`` on the free coordinates' block: flat vectors of ``n`` numbers."""
        if self.free is None:
            return lambda v: np.array(apply(v), dtype=float).ravel()

        def block(v):
            whole = np.zeros(self.full)
            whole[self.free] = v
            return np.array(apply(whole), dtype=float).ravel()[self.free]

        return block

    def _singular(self, what):
        matrix = "the Hessian" if self.minimum else "the Jacobian ∂F/∂x"
        return UnsupportedOperationError(
            f"{self.name}: at the solution, {matrix} {what}, so the solution does not depend "
            "smoothly on the differentiated values (it is not unique, or not isolated) and "
            "mutad cannot differentiate it. Make the problem well posed (a regularisation "
            "term, fewer unknowns).")

    def solve(self, b, transpose=False):
        """``(∂F/∂x)⁻¹ b``, or ``(∂F/∂x)⁻ᵀ b``; ``b`` flat plain numbers (zeros where the
        solution is held by a bound)."""
        b = np.array(b, dtype=float).ravel()
        if self.free is None:
            return self._solve_block(b, transpose)
        whole = np.zeros(self.full)
        whole[self.free] = self._solve_block(b[self.free], transpose)
        return whole

    def _solve_block(self, b, transpose):
        if not np.any(b):
            return np.zeros(self.n)
        if self.dense is not None:
            left, s, right = self.dense
            if transpose and not self.minimum:  # A = U S Vᵀ: A⁻ᵀ = U S⁻¹ Vᵀ
                return right.T @ ((left.T @ b) / s)
            return left @ ((right @ b) / s)
        if self.factors is not None:
            return self.factors.solve(b, trans="T" if transpose else "N")
        with outside_differentiations(self.name):
            if self.minimum:
                return self._conjugate_gradients(b)
            return self._gmres(b, self.transposed if transpose else self.apply)

    def _conjugate_gradients(self, b):
        """Conjugate gradients for the Hessian, stopping at a direction of non-positive
        curvature, which a minimum's Hessian has not."""
        x, r = np.zeros_like(b), b.copy()
        p, rr, size = r.copy(), r @ r, np.linalg.norm(b)
        for _ in range(10 * self.n + 100):
            Ap = np.array(self.apply(p), dtype=float).ravel()
            curvature = p @ Ap
            if not curvature > 0:
                raise self._singular("has a direction of zero or negative curvature")
            alpha = rr / curvature
            x += alpha * p
            r -= alpha * Ap
            rr, previous = r @ r, rr
            if np.sqrt(rr) <= ITERATIVE_RTOL * size:
                break
            p = r + (rr / previous) * p
        return self._checked(x, b, self.apply)

    def _gmres(self, b, apply):
        operator = _sparse_linalg.LinearOperator(
            (self.n, self.n), matvec=lambda v: np.array(apply(v), dtype=float).ravel(),
            dtype=float)
        x, _ = _sparse_linalg.gmres(operator, b, rtol=ITERATIVE_RTOL, atol=0.0,
                                    restart=min(self.n, 100), maxiter=10 * self.n + 100)
        return self._checked(x, b, apply)

    def _checked(self, x, b, apply):
        residual = np.linalg.norm(np.array(apply(x), dtype=float).ravel() - b)
        if not residual <= 1e-8 * np.linalg.norm(b):
            raise self._singular(f"could not be solved with (an iterative solve left a "
                                 f"relative residual of {residual / np.linalg.norm(b):.3g}): "
                                 "it is singular or badly conditioned")
        return x


def _implicit_value(x, residual, *, linear):
    return np.array(x, dtype=float)


_implicit = Adjoint(_implicit_value)


@_implicit.rule
def _implicit_rule(x, residual, *, linear):
    """``x``, SciPy's solution of ``F = 0``, whose derivative is ``-(∂F/∂x)⁻¹`` times that of
    the residual ``F(x*, θ)``."""
    _first_order(linear.name, residual)

    def back(dx):  # a cotangent an enclosing differentiation follows: by _inverse, which it
        return None, -_inverse(np.reshape(dx, np.shape(residual)), linear=linear,  # follows
                               transpose=True)

    return np.array(x, dtype=float), back


@_implicit.jvp_rule
def _implicit_jvp(tangents, x, residual, *, linear):
    _first_order(linear.name, residual)
    dresidual = tangents[1]
    dx = None if dresidual is None else -np.reshape(
        _inverse(dresidual, linear=linear, transpose=False), np.shape(x))
    return np.array(x, dtype=float), dx


def _inverse_value(b, *, linear, transpose):
    return np.reshape(linear.solve(_numbers(b), transpose=transpose), np.shape(b))


_inverse = Adjoint(_inverse_value)


@_inverse.rule
def _inverse_rule(b, *, linear, transpose):
    """``(∂F/∂x)⁻¹ b`` (``⁻ᵀ`` with ``transpose``) at the solution, a constant linear map:
    its derivatives are the map itself and its transpose, written with ``_inverse`` so that
    an enclosing differentiation follows them (to every order)."""
    def back(dy):
        return (_inverse(np.reshape(dy, np.shape(b)), linear=linear, transpose=not transpose),)

    return _inverse(b, linear=linear, transpose=transpose), back  # b may be an enclosing


@_inverse.jvp_rule                                                  # differentiation's
def _inverse_jvp(tangents, b, *, linear, transpose):
    db = tangents[0]
    return (_inverse(b, linear=linear, transpose=transpose),
            None if db is None else _inverse(db, linear=linear, transpose=transpose))


def _valued_value(value, traced):
    return np.array(value, dtype=float)


_valued = Adjoint(_valued_value)


@_valued.rule
def _valued_rule(value, traced):
    """SciPy's ``value``, whose derivative is ``traced``'s (the same quantity, computed again
    by the differentiated functions)."""
    _first_order("scipy.optimize", traced)

    def back(dy):
        return None, dy

    return np.array(value, dtype=float), back


@_valued.jvp_rule
def _valued_jvp(tangents, value, traced):
    _first_order("scipy.optimize", traced)
    return np.array(value, dtype=float), tangents[1]


def _held_at(x, solution, residual):
    """Where to evaluate a value at the solution (the envelope theorem, ``res.fun``): at
    SciPy's ``x*`` held constant for a first derivative, which is the partial one there; at
    the differentiated ``solution`` for higher ones, whose derivatives also move ``x*``."""
    return _constant(x) if _order(residual) <= 1 else solution.copy()


def _with_derivatives(value, traced):
    """SciPy's ``value``, with the derivatives of ``traced`` (the same quantity computed again
    by the differentiated functions): to first order by ``_valued``; to higher orders
    (``traced`` followed by several differentiations) as ``value + (traced - traced₀)``, zero
    but for its derivatives, which every level follows."""
    traced = _innermost_followed(traced)
    if _order(traced) > 1:
        return value + (traced - stop_gradient(traced))
    return _valued(value, traced)


def _solution(name, x, residual, linearization, converged, message="", bounds=None,
              held=None, at=None, hint=""):
    """SciPy's solution ``x`` of ``F = 0``, differentiable through ``residual``, ``F(x, θ)``
    computed by the user's functions on what the differentiation follows; plain when the
    residual does not depend on it. ``linearization(free)`` makes ``∂F/∂x``. Refused when the
    solution is not one (the Newton step from it is not small). A minimum on a bound
    (``bounds``, ``F`` the gradient) keeps the coordinates held there fixed, where that is its
    derivative (``_held``): those on a bound, or ``held`` where the solver says which.

    Under several differentiations (a Hessian, a gradient of a gradient), ``at(x)``, ``F`` at
    an ``x`` they follow, gives the solution as chord steps from SciPy's ``x*`` held constant,
    ``x_{k+1} = x_k - (∂F/∂x)⁻¹ F(x_k, θ)`` with ``∂F/∂x`` at ``x*`` (``_inverse``), one per
    order asked: each step makes the error O(|δθ|) times smaller, so after k steps it is
    O(|δθ|^(k+1)) and the derivatives up to order k are those of the exact solution. The value
    stays SciPy's (the steps enter as ``x_k - x_k₀``, zero but for its derivatives).
    ``hint``: what else to do, where the solver's way of stopping is known, ending the refusal."""
    if isinstance(residual, (tuple, list, dict)):  # never read as zero: that would be silent
        raise UnsupportedOperationError(
            f"{name}: a function given to it returned a {type(residual).__name__} where mutad "
            "expected an array of numbers.")
    residual = _innermost_followed(residual)
    if not _followed(residual):
        return x
    x_numbers = _numbers(x)
    free = None
    if bounds is not None:
        if held is None:
            held = _on_bounds(x_numbers, bounds)
        if held.any():
            free = ~held
    linear = linearization(free)
    if free is not None:
        _held(name, linear, x_numbers, _numbers(residual), bounds)
    step = np.linalg.norm(linear.solve(_numbers(residual))) / (1.0 + np.linalg.norm(x_numbers))
    limit = STEP if converged else STEP_FAILED
    if not step <= limit:
        status = ("SciPy reports it converged" if converged
                  else f"SciPy reports it did not converge ({message})")
        near = "" if bounds is None else _near_a_bound(x_numbers, bounds)
        raise UnsupportedOperationError(
            f"{name}: the result is not a solution to the accuracy its derivative needs: a "
            f"Newton step from it is {step:.3g} of its size ({status}){near}. The implicit "
            "function theorem differentiates the exact solution; tighten the solver's "
            f"tolerances (gtol, xtol, ftol, xatol, fatol) or raise maxiter{hint}.")
    order = _order(residual)
    if order > 1 and at is not None:
        shape = np.shape(x)
        z = _constant(np.reshape(x_numbers, shape))
        for _ in range(order):
            step = _inverse(np.reshape(_as_array(at(z)), shape), linear=linear,
                            transpose=False)
            z = z - step
        return x + (z - stop_gradient(z))
    return _implicit(x, residual, linear=linear)


def _on(x, bound):
    """Whether ``x`` lies on ``bound``, to within ``ON_BOUND`` of the bound's size (a solver
    may stop rounding errors away from it, Powell's method does)."""
    return np.isfinite(bound) & (np.abs(x - bound) <= ON_BOUND * (1.0 + np.abs(bound)))


def _near_a_bound(x, bounds):
    """Why a minimum ``x`` (flat numbers) with ``bounds`` may not be one: a coordinate near a
    bound it is not on (``ON_BOUND``), as an interior point method leaves it."""
    with np.errstate(invalid="ignore"):  # (an infinite bound: no distance, nan)
        distance = np.fmin(*(np.abs(x - bound) / (1.0 + np.abs(bound)) for bound in bounds))
    near = np.flatnonzero(~_on_bounds(x, bounds) & (distance <= NEAR_BOUND))
    if not len(near):
        return " (or it is held near a bound it is not on)"
    return (f" (coordinate {near[0]} is {distance[near[0]]:.3g} of its size from a bound, not "
            f"on it to {ON_BOUND:g}: trust-constr, an interior point method, stops inside an "
            "active bound, as far as its barrier parameter leaves it, which lowering its "
            "options barrier_tol and gtol brings closer but rarely onto it; L-BFGS-B, TNC and "
            "SLSQP stop on the bound)")


NEAR_BOUND = 1e-3
"""A coordinate of a minimum this close to a bound, relative to ``1 + |bound|``, and not on it,
is named in a refusal as held near it."""


def _on_bounds(x, bounds):
    """Where ``x`` (flat numbers) lies on ``bounds`` (a mask; None without bounds)."""
    if bounds is None:
        return np.zeros(np.size(x), dtype=bool)
    return _on(x, bounds[0]) | _on(x, bounds[1])


def _held(name, linear, x, gradient, bounds):
    """Check that the coordinates of minimum ``x`` on its bounds are held there strictly: the
    gradient pushes each outwards, by enough that the minimum along it, were the bound
    lifted, lies beyond ``STEP_FAILED`` of ``x``'s size (strict complementarity). Then small
    changes of the differentiated values leave them on their bounds (their derivative is
    zero), and the free coordinates are the minimum of the objective with those fixed (the
    block of the Hessian for the free coordinates, positive definite). Otherwise the solution
    depends on the differentiated values one-sidedly: refused."""
    lower, upper = bounds
    scale = 1.0 + np.linalg.norm(x)
    for i in np.flatnonzero(~linear.free):
        at_lower = abs(x[i] - lower[i]) <= abs(x[i] - upper[i])
        outwards = gradient[i] if at_lower else -gradient[i]
        e = np.zeros(linear.full)
        e[i] = 1.0
        with outside_differentiations(name):
            curvature = np.array(linear.whole(e), dtype=float).ravel()[i]
        distance = outwards / curvature if curvature > 0 else np.inf
        if not (outwards > 0 and distance > STEP_FAILED * scale):
            raise UnsupportedOperationError(
                f"{name}: the solution lies on a bound (coordinate {i}) where the objective's "
                f"slope into the bound is {outwards:.3g}: the bound is not strictly active, so "
                "the solution depends on the differentiated values one-sidedly (it may stay "
                "on the bound or leave it) and has no derivative. Widen the bounds, or move "
                "them away from the unconstrained minimum.")


def _minimum_linearization(name, objective, x):
    """The Hessian of plain ``objective`` at ``x``, by Hessian-vector products."""
    shape = np.shape(x)

    def apply(v):
        return hvp(objective, (x,), (np.reshape(v, shape),))

    return lambda free: _Linearization(name, int(np.size(x)), apply, minimum=True, free=free)


def _root_linearization(name, function, x, dense=False, colors=None):
    """The Jacobian of plain ``function`` at ``x``, by forward and reverse products; with
    ``dense``, computed at once (``jacobian``: a batch of directions per pass) and solved
    directly, for a large system an iterative solve would not converge on; with ``colors``
    too, computed sparsely (``_compressed_jacobian``) and solved by its sparse LU factors."""
    shape = np.shape(x)

    def apply(v):
        return np.ravel(jvp(function, (x,), (np.reshape(v, shape),))[1])

    def transposed(u):
        y_shape = np.shape(function(x.copy()))  # a copy: the function may work in place
        return np.ravel(grad(lambda z: (function(z) * np.reshape(u, y_shape)).sum())(x))

    matrix = None
    if dense:
        with outside_differentiations(name):
            if colors is not None:
                matrix = _compressed_jacobian(function, x, *colors)
            if matrix is None:
                matrix = jacobian(function, x.copy())
    return lambda free: _Linearization(name, int(np.size(x)), apply, transposed, free=free,
                                       matrix=matrix)


def _compressed_jacobian(function, x, colors, rows, columns):
    """The sparse Jacobian of plain ``function`` (flat) at flat ``x``, whose entries can be
    nonzero only at (``rows``, ``columns``), and whose columns of one color (``colors``, one
    per column) share no row: one forward product per color, the sum of its columns, gives
    each of them where it can be nonzero. ``None`` where a product in a random direction
    disagrees with it: the function's Jacobian has entries outside the pattern (the caller
    then forms it densely)."""
    n = np.size(x)
    seeds = np.zeros((n, int(colors.max()) + 1 if n else 0))
    seeds[np.arange(n), colors] = 1.0
    products = np.reshape(jacfwd(lambda s: function(x + seeds @ s))(np.zeros(seeds.shape[1])),
                          (-1, seeds.shape[1]))
    matrix = _sparse.csc_matrix((products[rows, colors[columns]], (rows, columns)),
                                shape=(len(products), n))
    direction = np.random.default_rng(0).standard_normal(n)
    exact = np.ravel(jvp(function, (x.copy(),), (direction,))[1])
    compressed = matrix @ direction
    scale = abs(matrix) @ abs(direction)
    if not np.all(np.abs(compressed - exact) <= 1e-8 * (scale + np.max(scale, initial=0.0))):
        return None
    return matrix


_LOSSES = {
    "linear": lambda z: z,
    "soft_l1": lambda z: 2.0 * (np.sqrt(1.0 + z) - 1.0),
    # z beyond 1 only reaches the square root (whose derivative at 0 would be infinite)
    "huber": lambda z: np.where(z <= 1.0, z, 2.0 * np.sqrt(np.maximum(z, 1.0)) - 1.0),
    "cauchy": lambda z: np.log1p(z),
    "arctan": lambda z: np.arctan(z),
}
"""``least_squares``' losses ρ, of ``z = (r / f_scale)²``, as SciPy defines them."""


def _cost(residuals, loss, scale):
    """``x ↦ ½ f_scale² Σ ρ((r(x) / f_scale)²)``, ``least_squares``' cost (``½‖r‖²`` for the
    linear loss)."""
    if loss == "linear":
        return _half_square(residuals)
    rho = _LOSSES[loss]

    def cost(x):
        r = residuals(x) / scale
        return 0.5 * scale ** 2 * rho(r * r).sum()

    return cost


def _half_square(residuals):
    """``x ↦ ½‖residuals(x)‖²``, the objective of a least-squares problem."""
    def objective(x):
        r = residuals(x)
        return 0.5 * (r * r).sum()

    return objective


def _lower_and_upper(bounds, pairs):
    """The lower and the upper bounds, as given, of SciPy's ``bounds`` (``_bounds_arrays``)."""
    if isinstance(bounds, _optimize.Bounds):
        return bounds.lb, bounds.ub
    if pairs:
        return ([-np.inf if lo is None else lo for lo, _ in bounds],
                [np.inf if hi is None else hi for _, hi in bounds])
    lower, upper = bounds
    return lower, upper


def _bounds_arrays(bounds, n, pairs):
    """``(lower, upper)``, flat arrays of ``n`` numbers, of SciPy's ``bounds``: a ``Bounds``,
    ``minimize``'s sequence of ``(min, max)`` pairs (``pairs``; None for no bound) or the
    ``(lb, ub)`` of ``least_squares`` and ``curve_fit``; None when nothing is bounded."""
    if bounds is None:
        return None
    lower, upper = _lower_and_upper(bounds, pairs)
    lower = np.broadcast_to(np.array(lower, dtype=float).ravel(), (n,))
    upper = np.broadcast_to(np.array(upper, dtype=float).ravel(), (n,))
    if np.all(np.isneginf(lower)) and np.all(np.isposinf(upper)):
        return None
    return lower, upper


def _bound_shift(bounds, plain, x, pairs, sides=None):
    """Where SciPy's minimum ``x`` lies on bounds (``bounds``, read as ``_bounds_arrays``
    reads them; ``plain`` their numbers) that depend on the differentiated values: an array
    of zeros shaped as ``x`` carrying the derivatives of the bounds at the coordinates they
    hold, which move with them (``x_i = b_i(θ)``), the free ones with them, as the minimum of
    the objective at ``x + shift`` with the held coordinates fixed; None where no such bound
    holds one. ``sides``: where the solver says it holds them (``least_squares``'
    ``active_mask``, -1 on a lower bound, 1 on an upper one), else where ``x`` lies on one."""
    if bounds is None or not _plain(bounds, {})[2]:
        return None
    flat = np.ravel(x)
    limits = _bounds_arrays(plain, flat.size, pairs)
    if limits is None:
        return None
    if sides is None:
        on_lower = _on(flat, limits[0])
        on_upper = _on(flat, limits[1]) & ~on_lower
    else:
        sides = np.ravel(sides)
        on_lower, on_upper = sides < 0, sides > 0
    if not (on_lower.any() or on_upper.any()):
        return None
    lower, upper = _lower_and_upper(bounds, pairs)

    def at(bound, mask):  # the bound's values where it holds x (zeros elsewhere: no inf)
        bound = lists_as_arrays([bound])[0] if type(bound) in (list, tuple) else bound
        return np.where(mask, np.broadcast_to(np.ravel(bound), flat.shape), 0.0)

    held = at(lower, on_lower) + at(upper, on_upper)
    if not _followed(held):
        return None
    return np.reshape(held - stop_gradient(held), np.shape(x))


def _shifted(function, shift):
    """``function`` of ``z + shift`` (``_bound_shift``), or itself without a shift."""
    if shift is None:
        return function
    return lambda z, *args: function(z + shift, *args)


def _moved_with(x, solution, shift):
    """SciPy's minimum ``x`` with the derivatives of ``solution + shift``: those of the
    minimum over the free coordinates and of the bounds holding the others."""
    if shift is None:
        return solution
    return _with_derivatives(np.asarray(x), solution + shift)


# ----------------------------------------------------------------------------------------------
# Results


class _Refused:
    """A field of a SciPy result that mutad does not differentiate and that depends on the
    differentiated values (``hess_inv``, ``pcov``), in its place: using it raises, rather than
    giving a number whose derivative would silently be missing."""

    def __init__(self, what):
        self._what = what

    def _refuse(self, *args, **kwargs):
        raise UnsupportedOperationError(
            f"{self._what} depends on the differentiated values but mutad does not "
            "differentiate it, so it is not available inside a differentiated function. "
            "Compute it outside (mutad.stop_gradient of the inputs for its value alone), or "
            "from the differentiated solution with mutad's functions.")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()

    def __repr__(self):
        return f"<{self._what}: not differentiated by mutad>"

    __array__ = __array_ufunc__ = __array_function__ = __getitem__ = __iter__ = __len__ = _refuse
    __float__ = __int__ = __bool__ = __neg__ = __pos__ = __abs__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __pow__ = __rpow__ = _refuse


def _result(name, result, values, keep=()):
    """A copy of SciPy's ``result`` (an ``OptimizeResult``) with ``values`` in place of its
    fields, the fields in ``keep`` and those holding no float number as they are, and the
    others (float numbers that depend on the differentiated values) refused."""
    out = copy.copy(result)
    for key, value in result.items():
        if key in values:
            out[key] = values[key]
        elif key not in keep and _holds_floats(value):
            out[key] = _Refused(f"{name}(...).{key}")
    return out


def _holds_floats(value):
    if isinstance(value, (float, np.floating)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc"
    if isinstance(value, (tuple, list)):
        return any(_holds_floats(v) for v in value)
    return not isinstance(value, (bool, int, str, np.integer, np.bool_, type(None)))


_KEEP = ("success", "status", "message", "nfev", "njev", "nhev", "nit", "maxcv")


# ----------------------------------------------------------------------------------------------
# The solvers


class _StandIn:
    """What stands in for SciPy's ``original`` while a differentiation runs
    (``registry.defroute``): ``original`` itself outside one, and ``solve(original, a, p, call,
    followed)`` inside, given every argument by name (``a``), the same with plain numbers
    (``p``), the plain arguments the call gave (``call``) and whether a value replaced depends
    on what a differentiation follows (``_plain_call``). An object holds ``original``, not a
    closure: the allocation mode swaps routed functions in the closures it reaches."""

    def __init__(self, original, solve):
        functools.update_wrapper(self, solve)
        self.original, self.solve = original, solve
        self.__signature__ = inspect.signature(original)
        defroute(original, self)

    def __call__(self, *args, **kwargs):
        if not ACTIVE.running:
            return self.original(*args, **kwargs)
        name = f"scipy.optimize.{self.original.__name__}"
        _not_replayed(name)
        copies: list = []
        inputs: list = []
        problem = _plain_call(self.original, args, kwargs, copies, inputs)
        # (a module-level array the functions write into: what SciPy's run left there)
        with BuffersWritten(name, (), inputs):
            _BUFFERS.append((ACTIVE.running[-1], _buffer_cells((args, kwargs))))
            _RUNS.append(copies)
            try:
                # the evaluations the derivatives need write into copies of the buffers
                result = _privately(self.solve, all_levels=True)(self.original, *problem)
            finally:
                _BUFFERS.pop()
                _RUNS.pop()
            _written_back(name, copies, problem[-1], inputs,
                          lambda: _called_at_solution(self.original, problem[0], result))
        # the plain float arrays of the result (a solution of constants, res.x): constants of
        # the differentiation, as np.zeros' are, that the function may write traced values into
        return by_user_code(result, self.original, args, kwargs, sys._getframe(1))


def _not_replayed(name):
    """Tell the running recordings that a replay would not run solver ``name`` again (it
    solves on plain numbers, outside the recorded program): the calls are traced instead."""
    not_replayed(f"{name}, whose solution a replay cannot compute again")


def _stands_in_for(original, doc=None):
    """Decorate ``solve`` as the :class:`_StandIn` for ``original``; given ``doc``, a
    ``solve`` a factory makes for several of SciPy's functions takes ``original``'s name and
    that docstring."""
    def stand_in(solve):
        if doc is not None:
            solve.__name__ = solve.__qualname__ = original.__name__
            solve.__doc__ = doc
        return _StandIn(original, solve)
    return stand_in


def _objective(fun, returns_gradient):
    """The function ``fun`` stands for, when it returns its derivatives after its value
    (``minimize``'s and ``root``'s ``jac=True``, ``root_scalar``'s ``fprime=True``)."""
    if not returns_gradient:
        return fun
    return lambda x, *args: fun(x, *args)[0]


@_stands_in_for(_optimize.minimize)
def minimize(original, a, p, call, followed):
    """``scipy.optimize.minimize``, differentiated by the implicit function theorem at the
    minimum (module docstring): ``res.x`` and ``res.fun``."""
    res = _run(original, call)
    if not followed:
        return res
    return _local_minimum("scipy.optimize.minimize", res, a, p)


@_stands_in_for(_optimize.basinhopping)
def basinhopping(original, a, p, call, followed):
    """``scipy.optimize.basinhopping``: SciPy's hops and local minimizations on plain numbers,
    its lowest minimum ``res.x`` (and ``res.fun``) differentiated as ``minimize``'s, with the
    ``args``, ``jac``, ``bounds`` and ``constraints`` of its ``minimizer_kwargs``."""
    res = _run(original, call)
    if not followed:
        return res

    def local(arguments):
        options = arguments["minimizer_kwargs"] or {}
        return {"fun": arguments["func"], "jac": options.get("jac"),
                "args": options.get("args", ()), "constraints": options.get("constraints", ()),
                "bounds": options.get("bounds")}

    return _local_minimum("scipy.optimize.basinhopping", res, local(a), local(p))


def _local_minimum(name, res, a, p):
    """SciPy's local minimum ``res`` of ``a["fun"]`` (under ``a``'s ``jac``, ``args``,
    ``constraints`` and ``bounds`` as ``minimize`` takes them; ``p`` the same with plain
    numbers): ``res.x`` and ``res.fun`` differentiated."""
    gradient_too = a["jac"] is True
    objective = _objective(a["fun"], gradient_too)
    plain_objective = _objective(p["fun"], gradient_too)
    args, plain_args = _tuple(a["args"]), _tuple(p["args"])
    if a["constraints"] not in ((), [], None):
        return _constrained_minimum(name, res, lambda z: objective(z, *args),
                                    lambda z: plain_objective(z, *plain_args),
                                    _constraint_functions(name, a["constraints"],
                                                          p["constraints"]), p["bounds"],
                                    a["bounds"])
    bounds = _bounds_arrays(p["bounds"], np.size(res.x), pairs=True)
    solution, value = _minimum(name, lambda z: objective(z, *args),
                               lambda z: plain_objective(z, *plain_args), res.x,
                               bool(res.success), res.message, bounds,
                               _bound_shift(a["bounds"], p["bounds"], res.x, pairs=True))
    values = {"x": solution}
    if value is not None:
        values["fun"] = _with_derivatives(res.fun, value)
    # The gradient at the minimum is zero along the solutions, unless a bound holds it.
    held = _on_bounds(np.ravel(res.x), bounds).any()
    return _result(name, res, values, keep=(*_KEEP, "fun", *(() if held else ("jac",))))


def _global_minimizer(original):
    """The stand-in for one of SciPy's global minimizers (``differential_evolution``,
    ``shgo``, ``dual_annealing``, ``direct``): SciPy's search on plain numbers, its minimum
    ``res.x`` (and ``res.fun``) differentiated as ``minimize``'s, where it is a stationary point
    (polished, or on a bound); ``res``'s other numbers (shgo's other local minima) refused."""
    name = f"scipy.optimize.{original.__name__}"

    def solve(original, a, p, call, followed):
        res = _run(original, call)
        if not followed:
            return res
        args, plain_args = _tuple(a["args"]), _tuple(p["args"])
        bounds = _bounds_arrays(p["bounds"], np.size(res.x), pairs=True)
        solution, value = _minimum(name, lambda z: a["func"](z, *args),
                                   lambda z: p["func"](z, *plain_args), res.x,
                                   bool(res.success), res.message, bounds,
                                   _bound_shift(a["bounds"], p["bounds"], res.x, pairs=True))
        values = {"x": solution}
        if value is not None:
            values["fun"] = _with_derivatives(res.fun, value)
        return _result(name, res, values, keep=(*_KEEP, "fun"))

    solve.__doc__ = _global_minimizer.__doc__
    return _stands_in_for(original, doc=solve.__doc__)(solve)


@_stands_in_for(_optimize.brute)
def brute(original, a, p, call, followed):
    """``scipy.optimize.brute``: SciPy's grid search and ``finish`` on plain numbers, its
    minimum differentiated as ``minimize``'s where it is stationary (``finish`` polished it);
    with ``full_output``, the value there too, the grid SciPy's, the values on it refused."""
    result = _run(original, call)
    if not followed:
        return result
    name = "scipy.optimize.brute"
    full = bool(a["full_output"])
    x = result[0] if full else result
    args, plain_args = _tuple(a["args"]), _tuple(p["args"])
    solution, value = _minimum(name, lambda z: a["func"](z, *args),
                               lambda z: p["func"](z, *plain_args), np.atleast_1d(x), True)
    solution = np.reshape(solution, np.shape(x))
    if not full:
        return solution
    fval = _with_derivatives(result[1], value) if value is not None else result[1]
    return solution, fval, result[2], _Refused(f"{name}(...)[3] (Jout, the values on the grid)")


differential_evolution = _global_minimizer(_optimize.differential_evolution)
shgo = _global_minimizer(_optimize.shgo)
dual_annealing = _global_minimizer(_optimize.dual_annealing)
direct = _global_minimizer(_optimize.direct)


def _minimum(name, objective, plain_objective, x, converged, message="", bounds=None,
             shift=None):
    """SciPy's minimum ``x`` of ``objective`` (a function of ``x`` alone, computed by the
    user's functions on what the differentiation follows; ``plain_objective`` its plain twin),
    differentiated by the implicit function theorem (its gradient zero there), and the
    objective there with the derivatives of its value (the envelope theorem), None where it
    does not depend on what the differentiation follows. ``shift``: ``_bound_shift``'s, where
    differentiated bounds hold coordinates of ``x``."""
    if shift is not None:
        solution, value = _minimum(name, _shifted(objective, shift), plain_objective, x,
                                   converged, message, bounds)
        return _moved_with(x, solution, shift), value
    z = np.array(x, dtype=float)
    stationarity = _gradient(objective, z)
    solution = _solution(name, x, stationarity,
                         _minimum_linearization(name, plain_objective, z.copy()), converged,
                         message, bounds, at=lambda w: grad(objective)(w))
    value = objective(_held_at(z, solution, stationarity))
    return solution, (value if _followed(value) else None)


# SciPy's legacy minimizers (fmin, fmin_powell, fmin_bfgs, fmin_cg, fmin_ncg, fmin_l_bfgs_b,
# fmin_tnc), differentiated as minimize: their xopt and fopt; the other outputs holding numbers
# that depend on the differentiated values (gopt, Bopt, direc, allvecs) are refused.


def _legacy_minimizer(original, function, flag_at=None, gradient_switch=None):
    """The stand-in of the legacy minimizer ``original`` whose objective is its parameter
    ``function``; its full output (asked of SciPy always) has xopt first, fopt second and
    the warning flag at ``flag_at`` (None: ``fmin_l_bfgs_b``'s and ``fmin_tnc``'s own
    outputs); ``gradient_switch``: the parameter that, false with no ``fprime``, makes the
    objective return its gradient after its value."""
    name = f"scipy.optimize.{original.__name__}"
    tnc = original.__name__ == "fmin_tnc"  # (its third output is its return code)

    @_stands_in_for(original, f"``{name}``: SciPy's minimum, differentiated as "
                    "``minimize``'s by the implicit function theorem.")
    def solve(original, a, p, call, followed):
        full = flag_at is not None
        result = _run(original, call, **({"full_output": True} if full else {}))
        if not followed:  # (retall=True without full_output: xopt and allvecs)
            if not full or a["full_output"]:
                return result
            return (result[0], result[-1]) if a["retall"] else result[0]
        returns_gradient = gradient_switch is not None and a["fprime"] is None \
            and not a[gradient_switch]
        objective = _objective(a[function], returns_gradient)
        plain_objective = _objective(p[function], returns_gradient)
        args, plain_args = _tuple(a["args"]), _tuple(p["args"])
        x = result[0]
        if full:
            converged = result[flag_at] == 0
        elif tnc:
            converged = result[2] in (0, 1, 2)  # (a local minimum, its f or x converged)
        else:
            converged = result[2]["warnflag"] == 0
        given = a.get("bounds")
        bounds = None if given is None else _bounds_arrays(p["bounds"], np.size(x), pairs=True)
        solution, value = _minimum(name, lambda z: objective(z, *args),
                                   lambda z: plain_objective(z, *plain_args), x, converged,
                                   f"SciPy's flag {result[flag_at] if full else result[2]}",
                                   bounds, _bound_shift(given, p.get("bounds"), x, pairs=True))
        if not full:
            f = result[1] if value is None else _with_derivatives(result[1], value)
            extra = result[2]
            if isinstance(extra, dict):  # fmin_l_bfgs_b's: its grad not differentiated
                extra = {k: (_Refused(f"{name}(...)'s {k}") if k == "grad" else v)
                         for k, v in extra.items()}
            return solution, f, extra
        if not a["full_output"]:
            return (solution, _Refused(f"{name}(...)'s allvecs")) if a["retall"] else solution
        outputs = [solution, result[1] if value is None
                   else _with_derivatives(result[1], value)]
        outputs += [_Refused(f"{name}(...)'s output {i}") if _holds_floats(item) else item
                    for i, item in enumerate(result[2:], start=2)]
        return tuple(outputs)

    return solve


fmin = _legacy_minimizer(_optimize.fmin, "func", 4)
fmin_powell = _legacy_minimizer(_optimize.fmin_powell, "func", 5)
fmin_bfgs = _legacy_minimizer(_optimize.fmin_bfgs, "f", 6)
fmin_cg = _legacy_minimizer(_optimize.fmin_cg, "f", 4)
fmin_ncg = _legacy_minimizer(_optimize.fmin_ncg, "f", 5)
fmin_l_bfgs_b = _legacy_minimizer(_optimize.fmin_l_bfgs_b, "func",
                                  gradient_switch="approx_grad")
fmin_tnc = _legacy_minimizer(_optimize.fmin_tnc, "func", gradient_switch="approx_grad")


# Constraints: at a minimum of f subject to g(x) = 0 (equalities) and g(x) ≥ 0 (inequalities,
# SciPy's sense), the active ones (the equalities, the inequalities with g = 0 and the bounds x
# lies on) hold with multipliers λ, ∇f = Jᵀλ (J the active constraints' Jacobian; λ ≥ 0 for
# an inequality). The implicit function theorem is taken of the KKT conditions in (x, λ),
# F = [∇ₓ(f - λ·g); g_active] = 0; the inactive inequalities play no part. Each active
# inequality must hold strictly (λ above zero): else the minimum moves one-sidedly.


def _constraint_functions(name, given, plain):
    """``(g, g_plain, equality)``: ``minimize``'s ``constraints=`` as one function of ``x``,
    the values of every constraint in a vector (``g = 0`` where ``equality(x)``, ``g ≥ 0``
    elsewhere), computed by the user's functions (``g``) and their plain twins; from dicts
    (``{'type': 'eq' or 'ineq', 'fun', 'args'}``), and ``NonlinearConstraint`` and
    ``LinearConstraint`` objects (``lb ≤ fun(x) ≤ ub``, an equality where ``lb == ub``), any
    of which may depend on the differentiated values."""
    items = list(given) if isinstance(given, (list, tuple)) else [given]
    plain_items = list(plain) if isinstance(plain, (list, tuple)) else [plain]
    # senses[i] tells, from the values of plain_values[i] (a constraint's function, before
    # its bounds make rows of them), which of its rows are equalities
    parts, plain_parts, plain_values, senses = [], [], [], []
    for item, plain_item in zip(items, plain_items, strict=True):
        if isinstance(item, dict):
            kind = plain_item.get("type")
            if kind not in ("eq", "ineq"):
                raise UnsupportedOperationError(f"{name}: a constraint of type {kind!r}.")
            for functions, entry in ((parts, item), (plain_parts, plain_item)):
                functions.append(lambda x, f=entry["fun"], r=_tuple(entry.get("args", ())):
                                 np.ravel(_as_array(f(x, *r))))
            plain_values.append(plain_parts[-1])
            senses.append(lambda rows, eq=kind == "eq": np.full(rows.size, eq))
            continue
        if not isinstance(item, (_optimize.NonlinearConstraint, _optimize.LinearConstraint)):
            raise UnsupportedOperationError(
                f"{name}: a constraint of type {type(item).__name__}: mutad differentiates "
                "dicts ({'type': 'eq' or 'ineq', 'fun': ..., 'args': ...}), "
                "NonlinearConstraint and LinearConstraint.")
        if isinstance(item, _optimize.LinearConstraint):
            fun = lambda x, A=item.A: A @ np.ravel(x)  # noqa: E731
        else:
            fun = item.fun
        # its function, lb and ub may depend on the differentiated values (closing over
        # them, or computed from them): the rows of the user's are differentiated, which of
        # them there are is read from the plain twins'
        (plain_fun, lower, upper), _, _ = _plain((fun, item.lb, item.ub), {})
        lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        given_lower, given_upper = (lists_as_arrays([b])[0] if type(b) in (list, tuple) else b
                                    for b in (item.lb, item.ub))
        for functions, f, lo, hi in ((parts, fun, given_lower, given_upper),
                                     (plain_parts, plain_fun, lower, upper)):
            functions.append(lambda x, f=f, lo=lo, hi=hi, lower=lower, upper=upper:
                             _bounded_rows(np.ravel(_as_array(f(x))), lo, hi, (lower, upper)))
        plain_values.append(lambda x, f=plain_fun: np.ravel(_as_array(f(x))))
        senses.append(lambda values, lower=lower, upper=upper: _bounded_rows(
            values, lower, upper, (lower, upper), sense=True))

    def stacked(functions):
        return lambda x: np.concatenate([g(x) for g in functions])

    def equality(x):
        """Which rows of ``g(x)`` are equalities, at plain ``x``."""
        return np.concatenate([sense(f(x)) for sense, f in zip(senses, plain_values,
                                                                strict=True)])

    return stacked(parts), stacked(plain_parts), equality


def _bounded_rows(y, lower, upper, plain, sense=False):
    """``lower ≤ y ≤ upper`` as the rows ``y - lower`` where the two are equal (equalities),
    then ``y - lower`` and ``upper - y`` where finite, which ``plain``, the bounds' numbers,
    decides; ``sense``: which of those rows are equalities, for the number of ``y``'s rows
    (``y``'s values unread)."""
    lower, upper = np.broadcast_to(lower, np.shape(y)), np.broadcast_to(upper, np.shape(y))
    plain_lower, plain_upper = (np.broadcast_to(bound, np.shape(y)) for bound in plain)
    equal = plain_lower == plain_upper
    below, above = np.isfinite(plain_lower) & ~equal, np.isfinite(plain_upper) & ~equal
    if sense:
        return np.concatenate([np.ones(np.count_nonzero(equal), dtype=bool),
                               np.zeros(np.count_nonzero(below) + np.count_nonzero(above),
                                        dtype=bool)])
    return np.concatenate([y[equal] - lower[equal], y[below] - lower[below],
                           upper[above] - y[above]])


ACTIVE_CONSTRAINT = 1e-6
"""An inequality whose value at the minimum is below this, relative to ``1 + ‖x*‖``, is
active there: SciPy's solvers meet them to their tolerance, an interior point method
(``trust-constr``) from inside. One that is not active but this close is found with a zero
multiplier, and refused."""


def _constrained_minimum(name, res, objective, plain_objective, constraints, bounds,
                         given_bounds=None):
    """``minimize`` with ``constraints=``: ``res.x`` and ``res.fun`` differentiated through the
    KKT conditions at SciPy's minimum (see the section); ``bounds`` plain, ``given_bounds`` as
    the user gave them (a bound holding ``x`` moves it where it depends on the differentiated
    values)."""
    g, plain_g, equality_at = constraints
    x = np.array(res.x, dtype=float)
    shape, n = x.shape, x.size
    scale = 1.0 + np.linalg.norm(x)
    with outside_differentiations(name):
        values = _numbers(plain_g(x.copy()))
        equality = equality_at(x.copy())
    if np.any(~equality & (values < -ACTIVE_CONSTRAINT * scale)) or np.any(
            equality & (np.abs(values) > ACTIVE_CONSTRAINT * scale)):
        raise UnsupportedOperationError(
            f"{name}: SciPy's minimum violates its constraints (beyond "
            f"{ACTIVE_CONSTRAINT:g} of x's size), so it is not the constrained minimum whose "
            "derivative mutad takes. Tighten the solver's tolerances (ftol, tol) or raise "
            "maxiter.")
    active = equality | (values <= ACTIVE_CONSTRAINT * scale)
    # the bounds x lies on: inequalities x - lower ≥ 0, upper - x ≥ 0
    limits = _bounds_arrays(bounds, n, pairs=True)
    on_lower = _on(x.ravel(), limits[0]) if limits is not None else np.zeros(n, dtype=bool)
    on_upper = _on(x.ravel(), limits[1]) & ~on_lower if limits is not None else on_lower
    held = np.concatenate([np.eye(n)[on_lower], -np.eye(n)[on_upper]])
    held_at = np.concatenate([limits[0][on_lower], -limits[1][on_upper]]) if limits is not None \
        else np.zeros(0)
    m = int(np.count_nonzero(active)) + len(held)

    shift = _bound_shift(given_bounds, bounds, x, pairs=True)

    def active_rows(function, z, moved=False):
        """The active constraints' rows at ``z``; ``moved``: the bounds holding ``z`` with
        their derivatives (``_bound_shift``)."""
        rows = function(z)[active]
        if not len(held):
            return rows
        bound_rows = held @ np.ravel(z) - held_at
        if moved and shift is not None:
            bound_rows = bound_rows - held @ np.ravel(shift)
        return np.concatenate([rows, bound_rows])

    with outside_differentiations(name):
        slope = np.ravel(grad(plain_objective)(x.copy()))
        jacobian = np.array([np.ravel(jvp(lambda z: active_rows(plain_g, z), (x.copy(),),
                                          (np.reshape(e, shape),))[1]) for e in np.eye(n)],
                            dtype=float).reshape(n, m).T
    multipliers, *_ = np.linalg.lstsq(jacobian.T, slope, rcond=None)
    if m and np.linalg.norm(jacobian.T @ multipliers - slope) > \
            STEP * (1.0 + np.linalg.norm(slope)):
        raise UnsupportedOperationError(
            f"{name}: at SciPy's minimum the objective's gradient is not a combination of the "
            "active constraints' gradients (the KKT conditions do not hold to the accuracy "
            "the derivative needs). Tighten the solver's tolerances, or raise maxiter.")
    inequality = np.concatenate([~equality[active], np.ones(len(held), dtype=bool)])
    weak = inequality & ~(multipliers > STEP_FAILED * (1.0 + np.linalg.norm(slope)))
    if weak.any():
        raise UnsupportedOperationError(
            f"{name}: an inequality (or bound) is active at the minimum with a multiplier of "
            f"{multipliers[weak].min():.3g}: it is not strictly active, so the minimum depends "
            "on the differentiated values one-sidedly (it may stay on the constraint or leave "
            "it) and has no derivative. Move the constraint away from the unconstrained "
            "minimum, or make it an equality.")
    z = np.concatenate([x.ravel(), multipliers])

    def plain_kkt(z):
        """F at ``z = (x, λ)``, of the plain functions: what ``∂F/∂(x, λ)`` is taken of."""
        lam, at = z[n:], np.reshape(z[:n], shape)
        lagrangian = lambda w: plain_objective(w) - lam @ active_rows(plain_g, w)  # noqa: E731
        stationary = np.ravel(grad(lagrangian)(at))
        return np.concatenate([stationary, active_rows(plain_g, at)])

    x_held = _constant(x)
    residual = np.concatenate([
        np.ravel(_gradient(lambda w: objective(w) - multipliers @ active_rows(g, w), x)),
        active_rows(g, x_held, moved=True)])
    if _order(residual) > 1:
        raise UnsupportedOperationError(
            f"{name}: a derivative of higher order through a constrained minimum: mutad "
            "differentiates it once.")
    barrier = getattr(res, "barrier_parameter", None)  # (trust-constr's interior point)
    solution = _solution(
        name, z, residual,
        _root_linearization(name, plain_kkt, z),
        bool(res.success), res.message, hint="" if barrier is None else (
            f"; trust-constr stopped with its barrier parameter at {barrier:.3g}, which "
            "bounds how close it comes to an active inequality: pass the options "
            "initial_barrier_parameter and initial_barrier_tolerance (1e-10, say)"))
    out = {"x": np.reshape(solution[:n], shape) if _followed(solution) else res.x}
    value = objective(x_held) - multipliers @ active_rows(g, x_held, moved=True)
    if _followed(value):
        out["fun"] = _with_derivatives(res.fun, value)
    return _result(name, res, out, keep=(*_KEEP, "fun"))


@_stands_in_for(_optimize.minimize_scalar)
def minimize_scalar(original, a, p, call, followed):
    """``scipy.optimize.minimize_scalar``, differentiated at the minimum as ``minimize`` is:
    ``dx*/dθ = -(∂²L/∂x∂θ) / (∂²L/∂x²)``; ``res.x`` and ``res.fun``."""
    res = _run(original, call)
    if not followed:
        return res
    name = "scipy.optimize.minimize_scalar"
    shift = _bound_shift(a["bounds"], p["bounds"], res.x, pairs=False)
    solution, value = _scalar_minimum(name, _shifted(a["fun"], shift), p["fun"], a["args"],
                                      p["args"], res.x, bool(res.success), res.message,
                                      p["bounds"])
    values = {"x": _moved_with(res.x, solution, shift)}
    if _followed(value):
        values["fun"] = _with_derivatives(res.fun, value)
    return _result(name, res, values, keep=(*_KEEP, "fun"))


def _scalar_minimum(name, fun, plain_fun, args, plain_args, x, success, message, bounds):
    """The minimizer ``x`` of ``fun(z, *args)`` found by SciPy, differentiated at the minimum:
    ``dx*/dθ = -(∂²L/∂x∂θ) / (∂²L/∂x²)``; and the objective's value there, followed."""
    args, plain_args = _tuple(args), _tuple(plain_args)
    x = np.float64(x)
    stationarity = _gradient(lambda z: fun(z, *args), x)
    solution = _solution(
        name, x, stationarity,
        _minimum_linearization(name, lambda z: plain_fun(z, *plain_args), x), success,
        message, None if bounds is None else _bounds_arrays(bounds, 1, pairs=False),
        at=lambda z: grad(lambda w: fun(w, *args))(z))
    return solution, fun(_held_at(x, solution, stationarity), *args)


def _legacy_scalar_minimizer(original, bounds_of, fields):
    """The stand-in for SciPy's ``golden``, ``brent`` or ``fminbound``: its minimizer
    differentiated as ``minimize_scalar``'s (their iterations compare the values and move by
    fixed ratios, so following their arithmetic would give a derivative of 0); with
    ``full_output``, the value there too, the counts as SciPy's. ``bounds_of(p)``: the
    interval searched (fminbound's), ``fields``: the outputs after x and the value."""
    name = f"scipy.optimize.{original.__name__}"

    def solve(original, a, p, call, followed):
        result = _run(original, call)
        if not followed:
            return result
        bounds = bounds_of(a)
        if any(_followed(bound) for bound in bounds or ()):
            raise UnsupportedOperationError(
                f"{name} of differentiated bounds: mutad differentiates the minimizer in the "
                "objective's parameters; pass the bounds as constants.")
        full = bool(a["full_output"])
        x = result[0] if full else result
        success = not full or original is not _optimize.fminbound or result[2] == 0
        solution, value = _scalar_minimum(name, a["func"], p["func"], a["args"], p["args"], x,
                                          success, f"{name} did not converge", bounds_of(p))
        if not full:
            return solution
        return (solution, _with_derivatives(result[1], value) if _followed(value)
                else result[1], *result[2:2 + fields])

    solve.__doc__ = _legacy_scalar_minimizer.__doc__
    return _stands_in_for(original, doc=solve.__doc__)(solve)


golden = _legacy_scalar_minimizer(_optimize.golden, lambda a: None, 1)
brent = _legacy_scalar_minimizer(_optimize.brent, lambda a: None, 2)
fminbound = _legacy_scalar_minimizer(_optimize.fminbound, lambda a: (a["x1"], a["x2"]), 2)


@_stands_in_for(_optimize.least_squares)
def least_squares(original, a, p, call, followed):
    """``scipy.optimize.least_squares``, differentiated at the minimum of ``½‖r‖²`` with its
    exact Hessian (module docstring): ``res.x``, ``res.cost`` and ``res.fun``."""
    res = _run(original, call)
    if not followed:
        return res
    name = "scipy.optimize.least_squares"
    if a["loss"] not in _LOSSES:
        raise UnsupportedOperationError(
            f"{name}: loss={a['loss']!r} with differentiated values: mutad differentiates "
            f"SciPy's named losses ({', '.join(map(repr, _LOSSES))}), not a callable one.")
    kwargs, plain_kwargs = a["kwargs"] or {}, p["kwargs"] or {}
    args, plain_args = _tuple(a["args"]), _tuple(p["args"])

    x = np.array(res.x, dtype=float)
    shift = _bound_shift(a["bounds"], p["bounds"], x, pairs=False, sides=res.active_mask)

    def residuals(x, *args):
        return _as_array(a["fun"](x if shift is None else x + shift, *args, **kwargs))

    def plain_residuals(x):
        return _as_array(p["fun"](x, *plain_args, **plain_kwargs))

    loss, scale = a["loss"], a["f_scale"]
    cost = _cost(lambda z: residuals(z, *args), loss, scale)
    stationarity = _gradient(cost, x)
    solution = _solution(
        name, res.x, stationarity,
        _minimum_linearization(name, _cost(plain_residuals, loss, p["f_scale"]), x.copy()),
        bool(res.success), res.message, _bounds_arrays(p["bounds"], x.size, pairs=False),
        held=np.asarray(res.active_mask) != 0, at=lambda z: grad(cost)(z))
    values = {"x": _moved_with(res.x, solution, shift)}
    fixed = residuals(_held_at(x, solution, stationarity), *args)
    if _followed(fixed):
        values["cost"] = _with_derivatives(res.cost, _cost(lambda z: fixed, loss, scale)(None))
    moved = residuals(solution.copy(), *args)  # a copy: fun may work in place
    if _followed(moved):
        values["fun"] = _with_derivatives(res.fun, moved)
    held = np.any(np.asarray(res.active_mask) != 0)
    # cost and fun not followed (only x0 was: it picks the minimum, which does not move):
    # SciPy's numbers, constants of the differentiation
    constant = tuple(key for key in ("cost", "fun") if key not in values)
    return _result(name, res, values, keep=(*_KEEP, "optimality", "active_mask", *constant,
                                            *(() if held else ("grad",))))


@_stands_in_for(_optimize.leastsq)
def leastsq(original, a, p, call, followed):
    """``scipy.optimize.leastsq`` (MINPACK's Levenberg-Marquardt), its ``x`` differentiated
    as ``least_squares``' at the minimum of ``½‖r‖²``; with ``full_output``, ``infodict``'s
    ``fvec`` the residuals there, ``cov_x`` and the other arrays refused."""
    x, cov_x, info, message, ier = _run(original, call, full_output=True)
    if not followed:
        return (x, cov_x, info, message, ier) if a["full_output"] else (x, ier)
    name = "scipy.optimize.leastsq"
    args, plain_args = _tuple(a["args"]), _tuple(p["args"])

    def residuals(z):
        return _as_array(a["func"](z, *args))

    solution, _ = _minimum(name, _half_square(residuals),
                           _half_square(lambda z: _as_array(p["func"](z, *plain_args))), x,
                           ier in (1, 2, 3, 4), message)
    if not a["full_output"]:
        return solution, ier
    moved = residuals(solution.copy())  # a copy: func may work in place
    info = {k: (_with_derivatives(v, moved) if k == "fvec" and _followed(moved) else
                _Refused(f"{name}(...)'s infodict['{k}']") if _holds_floats(v) else v)
            for k, v in info.items()}
    return solution, _Refused(f"{name}(...)'s cov_x"), info, message, ier


@_stands_in_for(_optimize.curve_fit)
def curve_fit(original, a, p, call, followed):
    """``scipy.optimize.curve_fit``, ``popt`` differentiated (with respect to ``ydata``,
    ``xdata``, ``sigma`` and what ``f`` closes over) at the minimum of ``½‖(f(xdata, *p) -
    ydata) / sigma‖²``; ``pcov`` SciPy's, differentiated as ``(JᵀJ)⁻¹`` (times ``‖r‖² / (m -
    n)`` unless ``absolute_sigma``), J the residuals' exact Jacobian at ``popt`` (SciPy's is
    its finite-difference estimate: the derivative is that of the covariance SciPy estimates,
    to that estimate's accuracy); ``full_output``'s ``infodict`` is refused."""
    result = _run(original, call)
    if not followed:
        return result
    name = "scipy.optimize.curve_fit"
    popt = result[0]
    for setting in ("nan_policy",):
        if a[setting] is not None and a[setting] != "propagate":
            raise UnsupportedOperationError(f"{name}: {setting}={a[setting]!r} with "
                                            "differentiated values is not supported.")
    if a["sigma"] is not None and np.ndim(a["sigma"]) == 2:
        raise UnsupportedOperationError(
            f"{name}: a 2-D sigma (a covariance) with differentiated values: pass the "
            "standard deviations (1-D sigma), or whiten the data first.")

    def residuals(f, xdata, ydata, sigma):
        def r(q):
            out = _as_array(f(xdata, *q)) - ydata
            return out if sigma is None else out / sigma
        return r

    x = np.array(popt, dtype=float)
    shift = _bound_shift(a["bounds"], p["bounds"], x, pairs=False)
    misfit = _shifted(_half_square(residuals(a["f"], a["xdata"], a["ydata"], a["sigma"])),
                      shift)
    stationarity = _gradient(misfit, x)
    solution = _moved_with(popt, _solution(
        name, popt, stationarity,
        _minimum_linearization(
            name, _half_square(residuals(p["f"], p["xdata"], p["ydata"], p["sigma"])),
            x.copy()),
        True, "", _bounds_arrays(p["bounds"], x.size, pairs=False),
        at=lambda z: grad(misfit)(z)), shift)
    pcov = _covariance(result[1], residuals(a["f"], a["xdata"], a["ydata"], a["sigma"]),
                       solution, a["absolute_sigma"], name)
    if len(result) == 2:
        return solution, pcov
    return (solution, pcov, _Refused(f"{name}(...)'s infodict"), *result[3:])


def _covariance(pcov, residuals, popt, absolute, name):
    """curve_fit's ``pcov`` (SciPy's value) with the derivatives of ``(JᵀJ)⁻¹ s²``, J the
    Jacobian of ``residuals`` at the differentiated ``popt``, s² = ``‖r‖² / (m - n)`` (1 with
    ``absolute``); refused where SciPy's is no such matrix (infinite: an indeterminate
    covariance; a rank-deficient J, whose singular values SciPy drops) or the estimate is
    far from it."""
    refused = _Refused(f"{name}(...)'s pcov")
    if not np.all(np.isfinite(pcov)):
        return refused
    J = jacobian(residuals, popt)
    J = np.reshape(J, (-1, np.size(popt)))
    m, n = J.shape
    if m <= n or np.linalg.matrix_rank(stop_gradient(J)) < n:
        return refused
    composition = np.linalg.inv(J.T @ J)
    if not absolute:
        composition = composition * (np.sum(residuals(popt) ** 2) / (m - n))
    if not reproduces(pcov, composition, rtol=1e-4):
        return refused
    return scipys_value(pcov, composition)


@_stands_in_for(_optimize.root)
def root(original, a, p, call, followed):
    """``scipy.optimize.root``, differentiated by the implicit function theorem: ``res.x``
    (``res.fun``, zero along the solutions, keeps SciPy's values)."""
    res = _run(original, call)
    if not followed:
        return res
    name = "scipy.optimize.root"
    solution = _root_solution(name, a["fun"], p["fun"], a["jac"] is True, res.x,
                              _tuple(a["args"]), _tuple(p["args"]), bool(res.success),
                              res.message)
    return _result(name, res, {"x": solution}, keep=(*_KEEP, "fun"))


def _root_solution(name, fun, plain_fun, jacobian_too, x, args, plain_args, converged,
                   message=""):
    function = _objective(fun, jacobian_too)
    plain_function = _objective(plain_fun, jacobian_too)
    x = np.array(x, dtype=float)
    residual = _as_array(function(_constant(x), *args))
    return _solution(name, x, residual,
                     _root_linearization(
                         name, lambda z: _as_array(plain_function(z, *plain_args)), x.copy()),
                     converged, message, at=lambda z: function(z.copy(), *args))


@_stands_in_for(_optimize.fsolve)
def fsolve(original, a, p, call, followed):
    """``scipy.optimize.fsolve``, differentiated as ``root``: its ``x`` (with ``full_output``,
    the ``infodict`` refused but ``fvec``, zero along the solutions)."""
    x, info, ier, message = _run(original, call, full_output=True)
    if not followed:
        return (x, info, ier, message) if a["full_output"] else x
    name = "scipy.optimize.fsolve"
    solution = _root_solution(name, a["func"], p["func"], False, x, _tuple(a["args"]),
                              _tuple(p["args"]), ier == 1, message)
    if not a["full_output"]:
        return solution
    info = {k: (v if k in ("nfev", "njev", "fvec") else _Refused(f"{name}(...)'s {k}"))
            for k, v in info.items()}
    return solution, info, ier, message


def _nonlinear_solver(original):
    """``scipy.optimize.newton_krylov`` and SciPy's other large-scale nonlinear solvers
    (``anderson``, ``broyden1``, ...): their solution ``x`` of ``F(x) = 0`` (of ``xin``'s
    shape), differentiated as ``root``'s by the implicit function theorem with respect to what
    ``F`` reaches through its closure. SciPy raises ``NoConvergence`` where they fail."""

    @_stands_in_for(original, f"``scipy.optimize.{original.__name__}``: SciPy's solution of "
                    "F(x) = 0, differentiated by the implicit function theorem (as ``root``'s).")
    def solve(original, a, p, call, followed):
        x = _run(original, call)
        if not followed:
            return x
        name = f"scipy.optimize.{original.__name__}"
        return _root_solution(name, a["F"], p["F"], False, x, (), (), True)

    return solve


newton_krylov = _nonlinear_solver(_optimize.newton_krylov)
anderson = _nonlinear_solver(_optimize.anderson)
broyden1 = _nonlinear_solver(_optimize.broyden1)
broyden2 = _nonlinear_solver(_optimize.broyden2)
diagbroyden = _nonlinear_solver(_optimize.diagbroyden)
excitingmixing = _nonlinear_solver(_optimize.excitingmixing)
linearmixing = _nonlinear_solver(_optimize.linearmixing)


@_stands_in_for(_optimize.fixed_point)
def fixed_point(original, a, p, call, followed):
    """``scipy.optimize.fixed_point``, differentiated at ``x = func(x)``: ``F = func(x) - x``."""
    x = _run(original, call)
    if not followed:
        return x
    name = "scipy.optimize.fixed_point"
    args, plain_args = _tuple(a["args"]), _tuple(p["args"])
    z = np.array(x, dtype=float)
    residual = _as_array(a["func"](_constant(z), *args)) - z
    solution = _solution(
        name, z, residual,
        _root_linearization(name, lambda y: _as_array(p["func"](y, *plain_args)) - y,
                            z.copy()), True,
        at=lambda y: _as_array(a["func"](y.copy(), *args)) - y)
    return solution


def _scalar_root(name, f, plain_f, x, args, plain_args, converged, message=""):
    """SciPy's root ``x`` of scalar ``f``, differentiable: ``dx*/dθ = -(∂f/∂θ) / f'(x*)``."""
    z = np.float64(x)
    residual = f(z, *args)
    return _solution(name, z, residual,
                     _root_linearization(name, lambda y: plain_f(y, *plain_args), z),
                     converged, message, at=lambda y: f(y, *args))


def _bracketing(original):
    """A bracketing scalar root finder of SciPy's (``brentq``, ``bisect``, ...), whose
    result is differentiated at the root."""
    @_stands_in_for(original, f"``scipy.optimize.{original.__name__}``, its root "
                    "differentiated at the root: ``dx*/dθ = -(∂f/∂θ) / f'(x*)``.")
    def bracketing(original, a, p, call, followed):
        x, report = _run(original, call, full_output=True)
        if not followed:
            return (x, report) if a["full_output"] else x
        found = _root_found(f"scipy.optimize.{original.__name__}", a, p, "f", x, report)
        if type(x) is float:  # SciPy's root is a Python float: promoted weakly
            weaken(found[0] if a["full_output"] else found)
        return found

    return bracketing


brentq = _bracketing(_optimize.brentq)
brenth = _bracketing(_optimize.brenth)
ridder = _bracketing(_optimize.ridder)
bisect = _bracketing(_optimize.bisect)
toms748 = _bracketing(_optimize.toms748)


@_stands_in_for(_optimize.root_scalar)
def root_scalar(original, a, p, call, followed):
    """``scipy.optimize.root_scalar``, ``.root`` differentiated at the root:
    ``dx*/dθ = -(∂f/∂θ) / f'(x*)``."""
    report = _run(original, call)
    if not followed:
        return report
    name = "scipy.optimize.root_scalar"
    # fprime=True (or fprime2=True): f returns its derivatives after its value.
    values_too = a["fprime"] is True or a["fprime2"] is True
    solution = _scalar_root(name, _objective(a["f"], values_too), _objective(p["f"], values_too),
                            report.root, _tuple(a["args"]), _tuple(p["args"]),
                            bool(report.converged), report.flag)
    report = copy.copy(report)
    report.root = solution
    return report


@_stands_in_for(_optimize.newton)
def newton(original, a, p, call, followed):
    """``scipy.optimize.newton`` of a scalar ``x0``, its root differentiated at the root:
    ``dx*/dθ = -(∂f/∂θ) / f'(x*)``; of an array ``x0`` (SciPy's vectorized form, one scalar
    root per element of ``func``'s elementwise values), its roots differentiated as ``root``'s
    solution of ``func(x) = 0``."""
    name = "scipy.optimize.newton"
    if np.size(p["x0"]) > 1:
        result = _run(original, call, full_output=True)
        if not followed:
            return result if a["full_output"] else result[0]
        solution = _root_solution(name, a["func"], p["func"], False, result.root,
                                  _tuple(a["args"]), _tuple(p["args"]),
                                  bool(np.all(result.converged)))
        return result._replace(root=solution) if a["full_output"] else solution
    if np.ndim(p["x0"]) != 0:
        result = _run(original, call)
        if followed:
            raise UnsupportedOperationError(
                f"{name} of an array x0 of one element with differentiated values: pass "
                "x0 as a number (x0[0]), or use scipy.optimize.root.")
        return result
    x, report = _run(original, call, full_output=True)[:2]
    if not followed:
        return (x, report) if a["full_output"] else x
    return _root_found(name, a, p, "func", x, report)


def _root_found(name, a, p, function, x, report):
    """A scalar root finder's result, its root ``x`` differentiated (``_scalar_root``) with
    respect to what ``a[function]`` and ``a["args"]`` hold, with SciPy's report as SciPy
    returns it (``full_output``), its ``root`` the differentiated one."""
    solution = _scalar_root(name, a[function], p[function], x, _tuple(a["args"]),
                            _tuple(p["args"]), bool(report.converged), report.flag)
    if a["full_output"]:
        report = copy.copy(report)
        report.root = solution
        return solution, report
    return solution


# ----------------------------------------------------------------------------------------------
# linear_sum_assignment: which row goes with which column is piecewise constant in the costs
# (a decision), so SciPy's assignment has no derivative; the cost it selects, C[rows, cols],
# is differentiated where the program indexes it. A replay assigns again on its values.

_assignment = Value(lambda cost, maximize: _optimize.linear_sum_assignment(cost, maximize),
                    "scipy.optimize.linear_sum_assignment")
linear_sum_assignment = StandIn(_optimize.linear_sum_assignment,
                                lambda cost_matrix, maximize=False:
                                _assignment(cost_matrix, maximize))


# ----------------------------------------------------------------------------------------------
# nnls: min ‖A x - b‖ subject to x ≥ 0. SciPy's solution, differentiated through its active set:
# the free coordinates F (x_i > 0, a decision taken at the solution) are the least-squares
# solution x_F = (A_Fᵀ A_F)⁻¹ A_Fᵀ b of the columns A_F, the others held at 0 (a coordinate at
# 0 stays there under small changes where its multiplier is positive, strict complementarity;
# where it is 0 the derivative is one-sided, and this is the side that keeps it at 0).

nnls = _scipy_adjoint(_optimize.nnls)
_NNLS_ATOL = inspect.signature(_optimize.nnls).parameters["atol"].default


def _nnls_parts(A, b, maxiter, atol):
    """SciPy's (x, rnorm), the free coordinates (their indices and the n × |F| matrix that
    places them) and the residual r = b - A x."""
    if np.iscomplexobj(A) or np.iscomplexobj(b):
        raise UnsupportedOperationError("scipy.optimize.nnls of complex values: SciPy takes "
                                        "real ones only.")
    # atol, deprecated by SciPy, is passed on only where the caller gave it
    given = {} if atol is _NNLS_ATOL else {"atol": atol}
    x, rnorm = nnls(A, b, maxiter=maxiter, **given)
    free = np.flatnonzero(x > 0)  # (the decision: the active set)
    if free.size and np.linalg.matrix_rank(stop_gradient(A)[:, free]) < free.size:
        raise UnsupportedOperationError(
            "scipy.optimize.nnls: the columns of A of the coordinates the solution leaves free "
            "are linearly dependent, so the least-squares solution on them, and its "
            "derivative, are not unique. Remove the dependent columns of A.")
    placing = np.eye(np.shape(x)[0])[:, free]
    return x, rnorm, free, placing, b - A @ x


def _nnls_solve(A, free, rhs):
    a_free = A[:, free]
    return np.linalg.solve(np.swapaxes(a_free, -1, -2) @ a_free, rhs)


@nnls.rule
def _nnls_rule(A, b, *, maxiter=None, atol=None):
    """x_F = A_F⁺ b: with z = (A_Fᵀ A_F)⁻¹ x̄_F, b̄ = A_F z and Ā_F = r zᵀ - A_F z x_Fᵀ
    (Golub & Pereyra 1973, for A_F of full column rank, A_Fᵀ r = 0 at the solution); rnorm =
    ‖r‖ adds b̄ = ρ̄ r / ‖r‖, Ā = -ρ̄ r xᵀ / ‖r‖ (0 where r = 0, its subgradient)."""
    x, rnorm, free, placing, r = _nnls_parts(A, b, maxiter, atol)
    direction = r / rnorm if rnorm > 0 else 0.0 * r  # (a decision: r = 0)

    def back(dys):
        dx, drnorm = dys
        db = drnorm * direction
        da = -drnorm * np.outer(direction, x)
        if free.size:
            z = _nnls_solve(A, free, dx[free])
            w = A[:, free] @ z
            db = db + w
            da = da + (np.outer(r, z) - np.outer(w, x[free])) @ np.swapaxes(placing, -1, -2)
        return da, db

    return (x, rnorm), back


@nnls.jvp_rule
def _nnls_jvp(tangents, A, b, *, maxiter=None, atol=None):
    x, rnorm, free, placing, r = _nnls_parts(A, b, maxiter, atol)
    da, db = tangents[0], tangents[1]
    change = 0.0 * r  # d(b - A x) at fixed x: db - dA x
    if db is not None:
        change = change + db
    if da is not None:
        change = change - da @ x
    drnorm = np.dot(r, change) / rnorm if rnorm > 0 else 0.0 * rnorm
    if not free.size:
        return (x, rnorm), (0.0 * x, drnorm)
    rhs = np.swapaxes(A[:, free], -1, -2) @ change
    if da is not None:
        rhs = rhs + np.swapaxes(da[:, free], -1, -2) @ r
    return (x, rnorm), (placing @ _nnls_solve(A, free, rhs), drnorm)


# ----------------------------------------------------------------------------------------------
# lsq_linear: min ½‖A x - b‖² within bounds. SciPy's solution, differentiated through its active
# set (SciPy's active_mask, a decision): the coordinates at a bound stay there (each with a
# nonzero multiplier, the gradient Aᵀ(A x - b) pushing it out of the box: strict
# complementarity), the free ones are the least-squares solution of their columns,
# x_F = (A_Fᵀ A_F)⁻¹ A_Fᵀ (b - A_B x_B); x, fun = A x - b and cost = ½‖fun‖² follow.


@_stands_in_for(_optimize.lsq_linear)
def lsq_linear(original, a, p, call, followed):
    """``scipy.optimize.lsq_linear`` of a dense ``A`` and ``b``: ``res.x``, ``res.fun`` and
    ``res.cost`` differentiated through SciPy's active set (see above)."""
    res = _run(original, call)
    if not followed:
        return res
    name = "scipy.optimize.lsq_linear"
    for setting in ("bounds", "tol", "lsmr_tol", "max_iter"):
        if _depends(a.get(setting)):
            raise UnsupportedOperationError(
                f"{name} with a differentiated {setting}: mutad differentiates the solution in "
                "A and b; pass it as a constant.")
    if not isinstance(a["A"], (Tracer, np.ndarray)) or np.ndim(a["A"]) != 2:
        raise UnsupportedOperationError(
            f"{name} of a sparse matrix or LinearOperator with traced values: pass a dense "
            "A (A.toarray()), which mutad differentiates.")
    if res.status < 1:
        raise UnsupportedOperationError(
            f"{name}: SciPy found no solution (status {res.status}: {res.message}), and there "
            "is no derivative of one not found.")
    A, b = _float_array(a["A"], "A"), _float_array(a["b"], "b")
    x = np.asarray(res.x, float)
    n = x.size
    active = np.asarray(res.active_mask)
    free = np.flatnonzero(active == 0)
    held = np.flatnonzero(active != 0)
    plain_a, plain_b = np.asarray(p["A"], float), np.asarray(p["b"], float)
    gradient = plain_a.T @ (plain_a @ x - plain_b)
    scale = 1e-8 * (1.0 + np.max(np.abs(plain_a.T @ plain_b), initial=0.0))
    if np.any(active[held] * gradient[held] >= -scale):
        raise UnsupportedOperationError(
            f"{name}: a coordinate at its bound has a zero multiplier (the gradient does not "
            "push it against the bound), so the active set may change nearby and the solution "
            "has no derivative there. Differentiate a problem with strict complementarity.")
    if free.size and np.linalg.matrix_rank(plain_a[:, free]) < free.size:
        raise UnsupportedOperationError(
            f"{name}: the columns of A of the free coordinates are linearly dependent, so "
            "the solution and its derivative are not unique.")
    placing = np.eye(n)
    x_held = x[held]  # the bounds they sit on (constants)
    rhs = b - A[:, held] @ x_held if held.size else b
    x_composed = placing[:, held] @ x_held if held.size else np.zeros(n)
    if free.size:
        a_free = A[:, free]
        x_free = np.linalg.solve(np.swapaxes(a_free, -1, -2) @ a_free,
                                 np.swapaxes(a_free, -1, -2) @ rhs)
        x_composed = x_composed + placing[:, free] @ x_free
    fun = A @ x_composed - b
    values = {"x": scipys_value(res.x, x_composed), "fun": scipys_value(res.fun, fun),
              "cost": scipys_value(np.asarray(res.cost), 0.5 * np.dot(fun, fun))}
    return _result(name, res, values, keep=(*_KEEP, "active_mask"))


# ----------------------------------------------------------------------------------------------
# approx_fprime: SciPy's forward differences, step by step (approx_derivative's '2-point' scheme
# without bounds), so that their values are SciPy's and their derivatives those of the same
# differences, in xk and in whatever the function reads (its closures, args)

_APPROX_FPRIME_EPSILON = inspect.signature(_optimize.approx_fprime).parameters["epsilon"].default


def _approx_fprime_steps(xk, f, epsilon=_APPROX_FPRIME_EPSILON, *args):
    xk = xk.astype(float) if isinstance(xk, Tracer) else np.asarray(xk, float)
    f0 = f(xk, *args)
    x0 = np.atleast_1d(xk)
    if x0.dtype.kind != "f":
        x0 = x0.astype(np.float64)
    if x0.ndim > 1:
        raise ValueError("`x0` must have at most 1 dimension.")

    def fun(x):
        f = np.atleast_1d(f_user(x, *args))
        if f.ndim > 1:
            raise RuntimeError("`fun` return value has more than 1 dimension.")
        return f

    f_user = f
    f0 = np.atleast_1d(f0)
    if f0.ndim > 1:
        raise ValueError("`f0` passed has more than 1 dimension.")
    sign_x0 = (x0 >= 0).astype(float) * 2 - 1
    h = epsilon
    dx = ((x0 + h) - x0)
    eps = np.finfo(np.float64).eps ** 0.5
    if np.dtype(f0.dtype).kind == "f" and np.dtype(f0.dtype).itemsize < 8:
        eps = np.finfo(f0.dtype).eps ** 0.5
    h = np.where(dx == 0, eps * sign_x0 * np.maximum(1.0, np.abs(x0)), h)
    n, m = np.size(x0), np.size(f0)
    rows = []
    for i in range(n):
        x1 = np.copy(x0)
        x1[i] = x0[i] + h[i]
        f_eval = fun(x1)
        delx = (x0[i] + h[i]) - x0[i]
        rows.append((f_eval - f0) / delx)
    # (SciPy writes each row into np.empty((n, m)): the same numbers, as float64)
    J_transposed = np.stack(rows) if n else np.empty((n, m))
    if J_transposed.dtype != np.float64:
        J_transposed = J_transposed.astype(np.float64)
    if m == 1:
        J_transposed = np.ravel(J_transposed)
    return J_transposed.T


def approx_fprime(xk: Any, f: Any, epsilon: Any = _APPROX_FPRIME_EPSILON, *args: Any) -> Any:
    """``scipy.optimize.approx_fprime``: SciPy's own outside a differentiation; inside one,
    SciPy's steps on the differentiated functions (its values bit for bit)."""
    if not ACTIVE.running:
        return _approx_fprime_original(xk, f, epsilon, *args)
    return _approx_fprime_steps(xk, f, epsilon, *args)


_approx_fprime_original = _optimize.approx_fprime
defroute(_optimize.approx_fprime, approx_fprime)


class _ConstraintRecord(StandInClass):
    """SciPy's ``Bounds`` or ``LinearConstraint`` standing in for itself while a
    differentiation runs: made of values it follows, SciPy's object made of their numbers
    (its checks and broadcasts), holding in ``fields`` the values themselves, broadcast as
    SciPy's are (SciPy's constructor would convert them: ``np.atleast_1d``); else the class
    (``isinstance`` and ``issubclass`` ask it, its attributes are its)."""

    def __init__(self, cls, fields):
        super().__init__(cls, f"SciPy's ``scipy.optimize.{cls.__name__}``, holding traced "
                              "values.")
        self.fields, self.signature = fields, inspect.signature(cls)

    def __call__(self, *args, **kwargs):
        given = self.signature.bind(*args, **kwargs).arguments
        plain, replaced, _ = _plain(given, {})
        if not replaced:
            return self.cls(*args, **kwargs)
        record = self.cls(**plain)
        for field in self.fields:
            value = given.get(field)
            if type(value) in (list, tuple):
                value = lists_as_arrays([value])[0]
            if isinstance(value, Tracer):
                setattr(record, field, np.broadcast_to(np.reshape(value, np.shape(
                    np.asarray(plain[field]))), np.shape(getattr(record, field))))
        return record


Bounds = _ConstraintRecord(_optimize.Bounds, ("lb", "ub"))
LinearConstraint = _ConstraintRecord(_optimize.LinearConstraint, ("A", "lb", "ub"))
# (SciPy's own code: the norm of grad's difference from approx_fprime, reached by its name)
check_grad = ScipysCode(_optimize.check_grad)


# ----------------------------------------------------------------------------------------------
# linprog: SciPy's (HiGHS's) solution, differentiated at a nondegenerate vertex. There the n
# constraints active at x (the inequalities with no slack, the equalities, the bounds x sits on)
# determine it, K x = r, and stay the active ones nearby when every one of them has a nonzero
# marginal (strict complementarity): x = K⁻¹ r and fun = cᵀ x are differentiated as that solve,
# in c, A_ub, b_ub, A_eq and b_eq, every mode and order; the values stay SciPy's bit for bit.


def _depends(value):
    return value is not None and _plain(value, {})[2]


def _float_array(value, name):
    if value is None:
        return None
    value = lists_as_arrays([value])[0]  # (rows of numbers, traced among them: A_ub=[[1, a]])
    if isinstance(value, Tracer):
        return value if value.dtype == np.float64 else value.astype(np.float64)
    return np.asarray(value, np.float64)


@_stands_in_for(_optimize.linprog)
def linprog(original, a, p, call, followed):
    """``scipy.optimize.linprog``: ``res.x`` and ``res.fun`` at a nondegenerate vertex (see
    above); a degenerate or non-unique solution is refused."""
    res = _run(original, call)
    if not followed:
        return res
    name = "scipy.optimize.linprog"
    for setting in ("bounds", "integrality", "method", "options", "callback"):
        if _depends(a.get(setting)):
            raise UnsupportedOperationError(
                f"{name} with a differentiated {setting}: mutad differentiates the solution in "
                "c, A_ub, b_ub, A_eq and b_eq; pass it as a constant.")
    if p.get("integrality") is not None and np.any(np.asarray(p["integrality"]) != 0):
        raise UnsupportedOperationError(
            f"{name} with integrality: a mixed-integer solution has no derivative.")
    if res.status != 0 or "ineqlin" not in res:
        raise UnsupportedOperationError(
            f"{name}: SciPy found no optimal solution (status {res.status}: {res.message}) or "
            "reported no marginals, and there is no derivative of one not found.")
    from scipy.optimize._linprog_util import _LPProblem, _clean_inputs
    lp = _clean_inputs(_LPProblem(p["c"], p["A_ub"], p["b_ub"], p["A_eq"], p["b_eq"],
                                  p["bounds"], None, None))
    x = np.asarray(res.x, float)
    n = x.size
    scale = 1e-9 * (1.0 + np.max(np.abs(x), initial=0.0))
    lower, upper = lp.bounds[:, 0], lp.bounds[:, 1]
    at_lower = np.flatnonzero(np.isfinite(lower) & (np.abs(x - lower) <= scale))
    at_upper = np.flatnonzero(np.isfinite(upper) & (np.abs(x - upper) <= scale)
                              & ~np.isin(np.arange(n), at_lower))
    slack = np.asarray(res.slack, float)
    tight = np.flatnonzero(np.abs(slack) <= scale * (1.0 + np.abs(lp.b_ub)))
    n_eq = np.shape(lp.b_eq)[0]
    marginals = np.concatenate([np.asarray(res.ineqlin.marginals)[tight],
                                np.asarray(res.lower.marginals)[at_lower],
                                np.asarray(res.upper.marginals)[at_upper]])
    if tight.size + n_eq + at_lower.size + at_upper.size != n or np.any(
            np.abs(marginals) <= 1e-9 * (1.0 + np.max(np.abs(lp.c), initial=0.0))):
        raise UnsupportedOperationError(
            f"{name}: the solution is not a nondegenerate vertex (the constraints active at it "
            "are not exactly n, or one of them has a zero marginal), so the solution may jump "
            "or is not unique nearby, and it has no derivative. Differentiate a problem whose "
            "solution is unique and strictly complementary.")
    A_ub, b_ub = _float_array(a["A_ub"], "A_ub"), _float_array(a["b_ub"], "b_ub")
    A_eq, b_eq = _float_array(a["A_eq"], "A_eq"), _float_array(a["b_eq"], "b_eq")
    rows, rhs = [], []
    if tight.size:
        rows.append(np.reshape(A_ub, (-1, n))[tight])
        rhs.append(np.reshape(b_ub, (-1,))[tight])
    if n_eq:
        rows.append(np.reshape(A_eq, (-1, n)))
        rhs.append(np.reshape(b_eq, (-1,)))
    for where, values in ((at_lower, lower), (at_upper, upper)):
        if where.size:
            rows.append(np.eye(n)[where])
            rhs.append(values[where])
    K = np.concatenate(rows) if len(rows) > 1 else rows[0]
    if np.linalg.cond(stop_gradient(K) if isinstance(K, Tracer) else K) > 1e12:
        raise UnsupportedOperationError(
            f"{name}: the constraints active at the solution are (nearly) dependent: the "
            "vertex is degenerate, and the solution has no derivative.")
    r = np.concatenate(rhs) if len(rhs) > 1 else rhs[0]
    x_composed = np.linalg.solve(K, r)
    c = _float_array(a["c"], "c")
    fun = scipys_value(np.float64(res.fun), np.dot(c, x_composed))
    return _result(name, res, {"x": scipys_value(res.x, x_composed), "fun": fun},
                   keep=(*_KEEP, "crossover_nit"))


# ----------------------------------------------------------------------------------------------
# isotonic_regression: SciPy's Python code (followed) hands copies of y and of the weights to
# its compiled pool-adjacent-violators pass, which writes in place each block's weighted mean
# over the block's entries of x and the blocks' total weights into the first entries of w, and
# the blocks' bounds into r. The blocks are decisions of the values (their derivative zero
# wherever they are fixed); each fitted entry is its block's weighted mean, sum(w y) / sum(w).


def _pava(x: Any, w: Any, r: Any) -> Any:
    plain_x, plain_w = np.array(memory(x)), np.array(memory(w))
    _, _, _, b = _pava_pybind.pava(plain_x, plain_w, r)
    bounds = np.asarray(r[:b + 1])
    starts, lengths = bounds[:-1], np.diff(bounds)
    totals = np.add.reduceat(w[:bounds[-1]], starts)
    means = np.add.reduceat((w * x)[:bounds[-1]], starts) / totals
    x[...] = scipys_value(plain_x, np.repeat(means, lengths))
    w[...] = plain_w
    w[:b] = scipys_value(plain_w[:b], totals)
    return x, w, r, b


StandIn(_pava_pybind.pava, _pava)
