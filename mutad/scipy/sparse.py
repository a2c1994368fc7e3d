"""``scipy.sparse`` and the solvers of ``scipy.sparse.linalg`` that mutad differentiates.

>>> import numpy as np, scipy.sparse, scipy.sparse.linalg, mutad
>>> def steady(k, f):
...     A = scipy.sparse.diags([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], [-1, 0, 1], format="csc")
...     return scipy.sparse.linalg.spsolve(A, f).sum()
>>> k, f = np.array([1.0, 2.0, 1.0, 2.0]), np.array([1.0, 0.0, 1.0])
>>> [float(g) for g in mutad.gradient(steady, k, f)[1].round(4)]
[1.3333, 1.5, 0.8333]

The user's code is SciPy's: ``scipy.sparse.diags``, ``csr_matrix((data, indices, indptr))``,
``A @ u``, ``A.multiply(B)``, ``spsolve(A, b)``, ``splu(A).solve(b)``, ``cg(A, b)`` by SciPy's
names, inside the differentiated function; the same names are importable from here.

**A sparse matrix with traced values.** Where a constructor (``diags``, ``diags_array``,
``spdiags``, ``csr_matrix``/``csr_array``, ``csc_*``, ``coo_*``, ``dia_*``; ``hstack``,
``vstack``, ``bmat``, ``block_array`` and ``block_diag`` of such matrices) receives traced values, it gives
a ``TracedSparse``: SciPy's own matrix of the same format holding those values (its
*pattern*, a constant decision taken when it is built, as the shape of an array is) and the
traced array of its stored values, ``A.data``. The pattern is SciPy's, except that a value
SciPy would leave out for being zero (an entry of a dense matrix, ``csr_matrix(D)``, an entry
of ``A - A``) stays stored: its derivative is there whatever its value (such a zero entry, of
a dense matrix, a sum or a product, is left out of the matrices SciPy computes with and of
``A.nnz``, as SciPy leaves it out, so values are SciPy's; the user's code reading ``A.data``
of such a matrix while an entry is zero is refused where that zero carries a derivative, and
its indices are SciPy's, leaving it out, a decision a replay guards; either, of a constant's
zero (``csr_matrix(np.eye(n))``), makes the matrix SciPy's, without it). The zeros SciPy does
store
are stored: a bsr result (``kron`` of a B at least half full, SciPy's product of dense blocks;
a sum, difference or product of bsr matrices) stays bsr, each block holding its zeros, and
leaves out only a block that is all zero, as SciPy's; a dia matrix stores its zeros, and its
conversions (``tocsr()``, ``diags(..., format="csr")``, ``kron``'s, ``bmat``'s) leave them
out, as SciPy's. Where SciPy sorts a
matrix's indices and adds its repeated entries in place (``spsolve``, ``splu`` of csc,
``A.sum()``, ``abs``, ``power``, ``norm``, a write at a repeated entry, ``sum_duplicates()``,
``sort_indices()``), the traced matrix does too: its stored values move and add as SciPy's
(its sums, bit for bit), written into the array that holds them, which may be the array it was
built from, as in SciPy. Its operations keep it
sparse: ``A.T``, ``A.transpose()``, ``A.tocsr()``/``tocsc()``/``tocoo()``/``asformat()``,
``A * c``, ``c * A``, ``A / c``, ``-A``, ``abs(A)``, ``A.power(n)``, ``A ** n``, the ufuncs
SciPy maps over the stored values (``A.sqrt()``, ``A.expm1()``, ``A.log1p()``, ``A.sin()``,
``A.tanh()``, ...: 0 at 0; dia's slots outside the matrix too), a matrix's
``A.getrow(i)`` and ``A.getcol(j)`` (SciPy's selector products, in SciPy's formats), ``A + B``,
``A - B``, ``A @ B`` (sparse operands), ``A.multiply(B)``, indexing (``A[1:-1, 1:-1]``,
``A[free][:, free]``, a mask), ``tril``, ``triu`` and ``kron`` give traced sparse matrices
whose pattern is SciPy's result's (SciPy's operation applied to the numbers of the stored
values tells where each goes); ``A @ x``, ``A.dot(x)``, ``x @ A`` of dense ``x`` (1-d or
2-d), ``A[i, j]``, ``A.sum(axis)``, ``A.mean(axis)``, ``A.diagonal(k)``, ``A.trace(k)``,
``A.max()`` and ``A.min()`` (of every entry, the unstored zeros too unless ``explicit=True``;
ties split the gradient evenly, np.max's rule; of an spmatrix's lines, ``A.max(axis)``, SciPy's
coo matrix of them), ``A.nonzero()`` and ``A.count_nonzero(axis)`` (decisions on the
values), ``A.conj()``, ``scipy.sparse.linalg.norm(A)`` (Frobenius, 1,
inf; and ``axis=0`` or ``1`` of a positive finite ``ord``, the lines' norms, an empty line's 0
with subgradient 0), ``A.toarray()`` and the values of ``scipy.sparse.find(A)`` give traced arrays. An spmatrix's ``A.sum(axis)``,
``A.mean(axis)``, and ``A + B``, ``A - B`` of an array ``B``, an ``np.matrix`` in SciPy, give a
``TracedMatrix``: its ``*`` is the matrix product as ``np.matrix``'s, ``np.asarray(m)``, ``m.A``
and ``m.A1`` are traced arrays, and ``+``, ``-``, ``/``, ``m.sum(axis)``, ``m.T``, ``m.I``,
``m ** k``, ``m[i, j]``, ``A.multiply(m)`` and the methods that compute an array's values
(``item``, ``cumsum``, ...) are followed (other indexing and powers, which differ from an
array's, are refused), and so are assignments ``m[key] = v``; ``todense()`` of a matrix of
constants made in the function is one too, of constants, which traced values written into it
make traced. ``A.setdiag(v, k)`` writes the diagonal as SciPy's does (entry by entry, the
pattern growing where it is not
stored; a coo matrix's drops the diagonal's entries and appends the new ones), into a lil
matrix too. ``scipy.sparse.csgraph.laplacian`` of a traced graph takes SciPy's steps on it;
its shortest paths (``shortest_path``, ``dijkstra``, ``bellman_ford``, ``johnson``,
``floyd_warshall``, of a traced sparse matrix or dense array) give SciPy's distances,
differentiated as the sum of the weights on the path SciPy's predecessors describe; its
``minimum_spanning_tree`` is SciPy's tree of the plain weights holding the traced weights of
the edges it chose.
Every value is SciPy's own, computed by SciPy on the stored values (``A @ x`` is SciPy's
product of the matrix SciPy builds from them).
A SciPy matrix with constant values times a traced array (``A @ u``, ``u @ A``, ``A * c``,
``A.multiply(u)``, ``A + B``) is routed the same way. A ``lil`` or ``dok`` matrix made in the
differentiated function takes traced entries one at a time (``A[i, j] += k[e]``, finite element
assembly) and plain rows and regions over them (``A[0, :] = 0``, a boundary condition); its
conversions, products and solves are those of the traced matrix of all its entries. A traced
matrix takes writes as SciPy's does (``A[0, :] = 0; A[0, 0] = 1``, a boundary condition; the
zeros SciPy stores, it stores), and ``A.tolil()`` (``A.todok()``) gives such a ``lil`` (``dok``)
matrix, as does the user's ``tolil()`` or ``todok()`` of a constant one (``A = L.tolil(); A[0,
0] = k[0]``), and a constant one SciPy made (``eye(n, format='lil')``, a copy) becomes one in
place where traced values are written into it, and so do a constructor asked for a ``lil`` or ``dok`` result of traced values
(``diags``, ``bmat``, ``kron`` with ``format='lil'``; ``lil_matrix`` or ``dok_matrix`` of a
traced array or matrix), made in csr and assembled entry by entry. What is not
listed (``argmax``, a region of traced values written into a ``lil`` matrix) is
refused with an error that says what to write instead.

**1-d sparse arrays.** A sparse array's row or column (``A[i]``, ``A[:, j]``, ``A[i, [j,
k]]``), its lines' extremes (``A.max(axis)``, ``A.min(axis)``: SciPy's coo array of them,
its zeros left out), ``A.reshape(n)``, ``A.resize(n)`` and ``coo_array(x)`` of a vector
are SciPy's 1-d coo (csr) arrays, traced as the row ``(1, n)`` they are: their products
(``v @ x``, ``X @ v``, ``v @ B``, ``B @ v``, ``v @ w``), arithmetic, sums, extremes,
indexing, writes and conversions are those above, SciPy's values; so are a 1-d ``dok``
array (its entries written one at a time, or converted), ``kron`` with one (SciPy's coo
product of the row it stands for) and ``norm(v, ord)`` of one (of positive order). A matrix
SciPy built of constants (``scipy.sparse.eye``, ``diags`` of numbers, a ``kron`` or sum of such, one made before the call) whose stored values
the user's code reads (``A.data[:] = k``, ``A.data *= k[0]``) becomes a traced matrix of its
pattern in place, its values a constant the differentiation follows, as ``np.zeros``'s are
(SciPy's matrix again, as it was, when the differentiation ends). The values of ``C = A @ B``
are SciPy's product's; its derivative adds, for each pair
of stored values ``A[i, k]`` and ``B[k, j]``, the cotangent of ``C[i, j]`` times the other
factor.

**As arguments and results.** A SciPy matrix of format csr, csc, coo or dia passed to a
differentiated function is differentiated in its stored values: inside the function it is a
``TracedSparse``, and its gradient is SciPy's matrix of the same class and pattern
holding the cotangents of the stored values (of ``A.data``). A function may return one, too.
A ``bsr_matrix`` or ``bsr_array`` built of traced blocks ``(data, indices, indptr)`` or of a
traced dense array (``blocksize=``) is followed, its blocks stored whole. Other formats
(``lil``, ``dok``) are passed as constants: convert them first.

**Derivatives.** Products are linear in the stored values and in ``x``: the cotangent of a stored
value ``A[i, j]`` of ``y = A x`` is ``ȳ_i x_j`` (summed over the columns of a 2-d ``x``), that of
``x`` is ``Aᵀ ȳ``, computed by the same sparse product. A relayout (a transpose, a conversion,
a sum) is a gather or a constant sparse matrix times the stored values. Every rule computes with
these differentiable products and NumPy, so forward mode and second derivatives follow.

**Solves.** ``x = A⁻¹ b`` by ``spsolve`` (a sparse ``b`` too, and ``inv(A)``, SciPy's
``spsolve(A, I)``: the dense solve of ``b.toarray()`` at the entries SciPy's sparse solution
stores, its values SciPy's own), ``splu(A).solve``, ``factorized(A)``,
``spsolve_triangular`` (of a matrix whose pattern lies in its triangle, which is all SciPy
solves; with ``unit_diagonal=True`` the diagonal's stored values, which it does not read, get
no derivative) and the iterative ``cg``,
``gmres``, ``bicgstab``, ``minres``, ``bicg``, ``cgs``, ``qmr``, ``lgmres``, ``gcrotmk`` and
``tfqmr`` (which return ``(x, info)``): the value is SciPy's own
call, and the derivative that of the exact solution, never of the solver's steps: ``b̄ = λ`` and,
on the pattern of ``A`` alone, ``Ā = -λ xᵀ``, where ``λ = A⁻ᵀ x̄`` is one more solve with the
same method on the transposed matrix (``splu``'s factorization is the one SciPy computed, solved
with ``trans="T"``; ``spsolve`` factorizes ``A`` once, with SuperLU, when the reverse pass first
needs it, and again if the values it reads differ, as in a replayed program). No dense matrix
is formed. Forward mode solves ``A ẋ = ḃ - Ȧ x`` with the same method. ``splu(A).L`` and
``.U`` (a log-determinant, ``np.log(abs(lu.U.diagonal())).sum()``) are SciPy's factors, traced
matrices of their patterns differentiated with SciPy's pivots (``_LUFactors``: dense, to the
first order; a replay, which would keep the pivots, is refused).

The iterative solvers' derivative holds to their tolerance: the value ``x`` meets SciPy's own
``rtol``/``atol`` (the gradient is that of the exact solution evaluated at this ``x``, so its
relative error is about ``rtol`` times the condition number of ``A``), and each adjoint or
tangent solve is run to ``rtol = ADJOINT_RTOL`` (1e-10, or the caller's ``rtol`` if tighter),
``atol = 0``, with the caller's preconditioner (transposed; without it where it has no
``rmatvec``, as ``spilu``'s solve in a ``LinearOperator``: a preconditioner changes how fast a
solve converges, not its solution) and ``maxiter``. A solve that does
not converge (``info != 0``) while a differentiation follows it raises
``UnsupportedOperationError``: there is no derivative of a solution that was not found. ``cg``
and ``minres`` assume a symmetric ``A``, as SciPy's methods do; ``A`` may be a constant
``LinearOperator`` (its ``rmatvec`` then serves the other methods' adjoints; without
one, a real operator's ``Aᵀ y`` is the pullback of its ``matvec`` at ``y``), or one
of the user's functions that read traced values from their closures, or of a subclass of
the user's whose products (``_matvec``, ...) read them from its attributes (``_OperatorSolve``:
the solve is differentiated in them too, to the first order), and ``x0`` a traced array (a warm
start, which has no derivative). ``LinearOperator``'s products (``matvec``, ``A @ x``, ...)
pass traced vectors to the user's functions and their traced results back, as SciPy's
methods would if they did not convert them to plain arrays. ``aslinearoperator`` of a traced
dense or sparse matrix is such an operator of functions that compute as SciPy's
``MatrixLinearOperator`` does.

**Eigenpairs.** ``eigsh(A, k, ...)`` of a symmetric ``A`` with traced values is ARPACK's call
(``sigma`` and ``which`` as given; ``return_eigenvectors=False`` gives SciPy's eigenvalues,
and a second call with the same settings, matched eigenvalue by eigenvalue to 1e-8, the
eigenvectors of their derivative). ``dλᵢ = vᵢᵀ dA vᵢ``, so ``Ā = Σᵢ λ̄ᵢ vᵢ vᵢᵀ`` on ``A``'s
pattern; ``dvᵢ = -(A - λᵢ I)⁺ Pᵢ dA vᵢ`` with ``Pᵢ = I - vᵢ vᵢᵀ`` (the derivative of the unit
eigenvector with ``vᵢᵀ dvᵢ = 0``), the pseudo-inverse applied by MINRES on ``Pᵢ (A - λᵢ I) Pᵢ``
to ``ADJOINT_RTOL``; where a differentiation follows them (a hessian), the same formulas by
NumPy's calls, the pseudo-inverse by a dense bordered solve, to every order. The generalized
problem ``A v = λ M v`` of a constant ``M`` (dense or sparse; ARPACK's eigenvectors are
M-orthonormal, checked): ``dλᵢ = vᵢᵀ dA vᵢ`` again, and ``dvᵢ`` solves ``(A - λᵢ M) dvᵢ =
-(dA - dλᵢ M) vᵢ`` with ``vᵢᵀ M dvᵢ = 0``, by a bordered sparse solve. Of a traced ``M``:
SciPy's pairs, with the derivatives of the same pairs of the dense problem
(``scipy.linalg.eigh(A, M)`` of the dense matrices, each eigenvalue matched to within ``1e-8``
relative and simple, each eigenvector's sign to SciPy's), to every order; a dense cost,
``O(n³)``. Repeated eigenvalues among the returned ones (within ``1e-8`` relative), ``Minv``
and ``M`` as a ``LinearOperator`` are refused, and so is, with ``eigs``,
a ``LinearOperator`` whose functions read differentiated values from their closure (pass the
matrix).

``eigs(A, k, ...)`` of a real general ``A`` is ARPACK's call too: ``dλᵢ = lᵢ dA vᵢ`` with the
left eigenvector ``lᵢ`` (``lᵢ vᵢ = 1``, inverse iteration with SuperLU on ``Aᵀ - λᵢ I``); the
unit eigenvector's derivative solves ``(A - λᵢ I) dvᵢ = -(I - vᵢ lᵢ) dA vᵢ`` with ``vᵢᴴ dvᵢ =
0`` (the bordered system ``[[A - λᵢ I, vᵢ], [vᵢᴴ, 0]]``, SuperLU), and a loss that reads a
complex eigenvector's phase is refused. ``svds``: ``dσᵢ = uᵢᵀ dA vᵢ``, the vectors as the
eigenvector ``[uᵢ; vᵢ]/√2`` of ``[[0, A], [Aᵀ, 0]]`` (``uᵢᵀ duᵢ = vᵢᵀ dvᵢ = 0``). First order;
values that are not simple (repeated, returned or not; defective) and zero singular values
refused. Of a dense array with traced values (SciPy takes one), each entry is a stored value.

**Exponentials.** ``expm_multiply(A, B)`` is SciPy's value. ``B̄ = e^{Aᵀ} Ȳ`` by
``expm_multiply(A.T, Ȳ)``; in ``A``, through ``exp([[A, E], [0, A]]) = [[e^A, L(A, E)],
[0, e^A]]`` with ``expm_multiply`` (to its own tolerance, double precision): the tangent is
the top half of ``exp([[A, Ȧ], [0, A]]) [Ḃ; B]``, and ``Ā`` the entries on ``A``'s pattern of
``L(Aᵀ, Ȳ Bᵀ)``, the top half of ``exp([[Aᵀ, Ȳ Bᵀ], [0, Aᵀ]]) [0; I]`` (``n`` right-hand
sides: a dense ``n × n`` result). On SciPy's grid of times (``start``, ``stop``, ``num``,
``endpoint``: SciPy's values) the same for ``e^{tA} B`` at each ``t``, ``tA`` in place of
``A``. Times that depend on the differentiated values (a traced ``start`` or ``stop``): SciPy's
grid's values, with the derivatives of ``e^{(t_k A)} B`` computed one time ``t_k`` at a time
(``num`` products, each differentiated as above, to every order). Where a differentiation
follows the derivatives (a hessian), the same formulas by NumPy's calls and ``expm_multiply``
of the dense matrices, which it follows in turn, to every order. Of a dense
``A`` (an array), SciPy's value of the array, the derivatives those of its sparse form.
``expm(A)`` is SciPy's matrix, differentiated as the dense exponential at the entries it
stores (refused where it leaves out entries the traced values reach); ``matrix_power`` SciPy's
squarings of the traced products.

**Least squares.** ``lsqr`` and ``lsmr`` return SciPy's solution; its derivative is that of
the exact solution of ``(AᵀA + damp² I) x = Aᵀ b`` at it (``_LeastSquares``): ``λ = (AᵀA +
damp² I)⁻¹ x̄``, ``b̄ = A λ``, ``Ā = r λᵀ - (A λ) xᵀ`` on ``A``'s pattern, the normal solve by
the same method to ``ADJOINT_RTOL``. The norms and estimates they report are not
differentiated: inside a differentiation they are placeholders whose use raises. A traced
``damp`` is differentiated by ``d̄ = -2 damp ⟨λ, x⟩`` (forward: ``-2 damp ḋ x`` added to the
normal solve's right-hand side), with an operator of the user's functions too.
"""

from __future__ import annotations

import abc
import contextlib
import dis
import functools
import gc
import inspect
import math
import operator
import sys
import threading
import warnings
import weakref
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as _sparse
import scipy.sparse.linalg as _splinalg
import scipy.sparse.csgraph as _csgraph
from scipy.sparse.linalg import _interface

from ..core.allocation import (COMPILED_OBJECTS, HANDED_SUBCLASSES, PASSING,
                               SUBCLASS_CALLS, allocate, holds_derivative, internal,
                               lists_as_arrays, reissued, shown_class)
from ..engines.arraylike import carries_derivative, settled
from ..api import pullback, stop_gradient
from ..custom import Adjoint
from ..core.errors import UnsupportedAttributeError, UnsupportedOperationError
from ..core.levels import ACTIVE, WRAPPERS, Tracer, handled, innermost
from ..core.registry import (HOLOMORPHIC, NO_RULE, RULES, defmethod, defroute,
                             zero_derivative)
from ..rules._helpers import transpose
from ..core.trees import register_pytree
from ..core.views import address, memory, stands_for_scalar, wrapped
from . import integrate as _integrate
from ._adjoints import (ScipysCode, StandInClass, Value, found_again, not_replayed,
                        reproduces, scipys_value)

__all__ = ["aslinearoperator", "bicg", "bicgstab", "block_array", "block_diag", "bmat", "bsr_array", "bsr_matrix", "cg", "cgs", "coo_array", "coo_matrix",
           "csc_array", "csc_matrix", "csr_array", "csr_matrix", "dia_array", "dia_matrix",
           "diags", "diags_array", "dok_array", "dok_matrix", "eigs", "eigsh", "expm", "expm_multiply",
           "factorized", "find", "gcrotmk", "gmres", "bellman_ford", "dijkstra", "floyd_warshall", "johnson",
           "shortest_path",
           "hstack", "IncompleteFactors", "inv", "kron", "kronsum", "laplacian", "lgmres", "lil_array", "lil_matrix", "lobpcg", "lsmr", "lsqr", "matrix_power", "minimum_spanning_tree", "minres",
           "norm", "onenormest", "qmr", "spdiags", "spilu", "splu", "spsolve", "spsolve_triangular", "SuperLU", "svds", "TracedMatrix",
           "TracedSparse", "tfqmr", "tril", "triu", "vstack"]

SCIPY = {**{name: getattr(_splinalg, name) for name in (
    "spsolve", "spsolve_triangular", "splu", "factorized", "cg", "gmres", "bicgstab", "minres",
    "bicg", "cgs", "qmr", "lgmres", "gcrotmk", "tfqmr",
    "norm", "eigs", "eigsh", "svds", "expm", "expm_multiply", "matrix_power", "lsqr", "lsmr",
    "inv", "aslinearoperator", "spilu", "onenormest")},
    **{name: getattr(_sparse, name) for name in (
        "diags", "diags_array", "spdiags", "hstack", "vstack", "bmat", "block_array",
        "block_diag", "kron",
        "kronsum", "tril", "triu", "find", "csr_matrix", "csr_array", "csc_matrix", "csc_array", "coo_matrix", "coo_array",
        "dia_matrix", "dia_array", "bsr_matrix", "bsr_array")},
    "laplacian": _csgraph.laplacian, "minimum_spanning_tree": _csgraph.minimum_spanning_tree}
"""SciPy's own functions and classes, by name. While a differentiation runs the names that
user code and SciPy's public modules bind to them are this module's stand-ins (and so would be
a name of this module, or a closure's cell, bound to one), so they are looked up here."""

ADJOINT_RTOL = 1e-10
"""The relative residual to which the adjoint and tangent solves of the iterative solvers run."""

FORMATS = ("csr", "csc", "coo", "dia", "bsr")
"""The formats whose stored values a :class:`TracedSparse` holds as SciPy lays them out."""


def _followed(*items):
    """Whether a differentiation follows one of ``items`` (a traced array, a dual, a traced
    sparse matrix, a ``lil`` or ``dok`` matrix holding traced entries)."""
    return any(isinstance(x, TracedSparse) or innermost((x,)) is not None
               or (isinstance(x, _Assembled) and x.entries)
               or (type(x) in (list, tuple) and _followed(*x)) for x in items)


def _leaves(items):
    for x in items:
        if type(x) in (list, tuple):
            yield from _leaves(x)
        else:
            yield x


def _decision(x, what, decide):
    """``decide(v)`` of the plain values ``v`` of ``x``, a decision SciPy takes on them (the
    blocks of a bsr matrix, the entries it leaves out for being zero, a count of them): a
    replay guards it, and replays while it decides the same, where ``x`` is one traced array;
    where it is a list of them, ``settled``'s (a replay recording the call is refused, saying
    ``what``). Arrays it gives (alone or in a tuple) are compared by their bytes."""
    if type(x) not in WRAPPERS:
        return decide(settled(x, what))
    return _uncompared(x._decided(lambda v: _compared(decide(memory(v)))))


class _Taken:
    """An array a decision gave, equal to another of the same dtype, shape and bytes (what a
    replay's guard asks of it)."""

    __slots__ = ("array",)
    __hash__ = None  # type: ignore[assignment]  # unhashable: compared by its bytes

    def __init__(self, array):
        self.array = array

    def __eq__(self, other):
        return type(other) is _Taken and (self.array.dtype, self.array.shape) == (
            other.array.dtype, other.array.shape) and self.array.tobytes() == other.array.tobytes()

    def __ne__(self, other):
        return not self == other


def _compared(found):
    if type(found) is tuple:
        return tuple(_compared(x) for x in found)
    return _Taken(found) if isinstance(found, np.ndarray) else found


def _uncompared(taken):
    if type(taken) is tuple:
        return tuple(_uncompared(x) for x in taken)
    return taken.array if type(taken) is _Taken else taken


def _refuse(what, instead):
    raise UnsupportedOperationError(f"{what}: {instead}")


# ----------------------------------------------------------------------------------------------
# The pattern: a constant SciPy matrix, and where each of its stored values sits


class _Layout:
    """The constant part of a sparse matrix: SciPy's ``template`` (format, shape, indices), and
    for each stored value (a *slot*, in the order of ``template.data``) its row and column;
    ``valid`` is False for the slots of a ``dia`` matrix that fall outside it."""

    def __init__(self, template):
        if template.ndim not in (1, 2):
            _refuse(f"a scipy.sparse array of traced values of {template.ndim} dimensions "
                    f"(shape {template.shape})",
                    "mutad follows those of one and two: reshape it to two, "
                    "A.reshape((-1, A.shape[-1])).")
        if template.format not in FORMATS:
            template = template.tocsr()
        # A copy of its own: SciPy sorts the indices of a matrix and sums its duplicates in
        # place (spsolve, sum(), abs ...), which must not move the pattern under the slots
        canonical = template.has_canonical_format if template.format == "coo" else None
        template = template.copy()
        if canonical is not None:
            template.has_canonical_format = canonical
        self.template = template
        self.kind = type(template)
        self.format = template.format
        self.shape = template.shape
        # a 1-d array's slots are those of the row (1, n) it is: row 0 throughout
        self.grid = (1,) * (2 - template.ndim) + template.shape
        self.data_shape = template.data.shape
        m, n = self.grid
        self.droppable = None  # the slots SciPy stores only where their value is not zero
        self.groups = None  # the droppable slots SciPy keeps or leaves out together (dropping)
        # a dia matrix's slots that SciPy leaves out with their whole diagonal where each
        # such slot of it is zero (its dia matrix of a dense one, or a conversion of one that
        # leaves out zeros), or None
        self.diagonals = None
        if self.format in ("csr", "csc"):
            major = np.repeat(np.arange(len(template.indptr) - 1), np.diff(template.indptr))
            self.major = major
            minor = template.indices[:len(major)]
            rows, cols = (major, minor) if self.format == "csr" else (minor, major)
        elif self.format == "coo":
            rows, cols = (np.zeros_like(template.coords[0]),) * (2 - template.ndim) + \
                template.coords
        elif self.format == "bsr":  # data[s, r, c] is A[R·(block row) + r, C·(block col) + c]
            r, c = template.blocksize
            major = np.repeat(np.arange(len(template.indptr) - 1), np.diff(template.indptr))
            self.major = major
            minor = template.indices[:len(major)]
            rows = np.broadcast_to((major * r)[:, None, None] + np.arange(r)[:, None],
                                   (len(major), r, c)).reshape(-1)
            cols = np.broadcast_to((minor * c)[:, None, None] + np.arange(c),
                                   (len(major), r, c)).reshape(-1)
        else:  # dia: data[d, j] is A[j - offsets[d], j]
            width = self.data_shape[1]
            cols = np.tile(np.arange(width), len(template.offsets))
            rows = cols - np.repeat(template.offsets, width)
        rows, cols = np.asarray(rows, np.intp), np.asarray(cols, np.intp)
        valid = (rows >= 0) & (rows < m) & (cols >= 0) & (cols < n)
        self.padded = not valid.all()
        self.valid = valid
        self.rows, self.cols = np.where(valid, rows, 0), np.where(valid, cols, 0)
        if self.format == "dia" and valid.any():
            # a dia matrix stores its zero values, but SciPy's conversions of it (tocoo,
            # tocsr, tocsc; kron's, bmat's, a sum's) leave them out
            self.droppable = valid

    @property
    def drops(self):
        """Whether SciPy's matrix of this layout leaves out some slots by their values."""
        return (self.droppable is not None and self.format != "dia") or \
            self.diagonals is not None

    def stored(self, data):
        """The sparse matrix of this pattern holding ``data``: :meth:`build`'s, also where
        SciPy is handed a dense array (``_DenseLayout``), for mutad's own solves."""
        return _Layout.build(self, data)

    def build(self, data, dropping=True):
        """SciPy's matrix of this pattern holding the plain values ``data``: copies of them
        and of the pattern's indices, which SciPy may sort in place. A zero in a ``droppable``
        slot (an entry of a dense matrix) is left out, as SciPy leaves it out."""
        t = self.template
        data = np.array(data)
        if dropping and self.drops:
            keep = ~self.left_out(data)
            if not keep.all():
                if self.format == "dia":  # whole diagonals
                    keep = keep.reshape(self.data_shape).any(axis=1)
                    return self.kind((data[keep], t.offsets[keep]), shape=self.shape)
                if self.format == "bsr":  # whole blocks
                    keep = keep.reshape(len(data), -1).any(axis=1)
                    counts = np.bincount(self.major[keep], minlength=len(t.indptr) - 1)
                    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(t.indptr.dtype)
                    return self.kind((data[keep], t.indices[keep], indptr), shape=self.shape,
                                     blocksize=t.blocksize)
                data = np.reshape(data, (-1,))[keep]
                if self.format == "coo":
                    built = self.kind((data, tuple(c[keep] for c in t.coords)), shape=self.shape)
                    built.has_canonical_format = t.has_canonical_format
                    return built
                counts = np.bincount(self.major[keep], minlength=len(t.indptr) - 1)
                indptr = np.concatenate([[0], np.cumsum(counts)]).astype(t.indptr.dtype)
                return self.kind((data, t.indices[keep], indptr), shape=self.shape)
        if self.format in ("csr", "csc"):
            return self.kind((data, t.indices.copy(), t.indptr.copy()), shape=self.shape)
        if self.format == "bsr":
            return self.kind((data, t.indices.copy(), t.indptr.copy()), shape=self.shape,
                             blocksize=t.blocksize)
        if self.format == "coo":
            built = self.kind((data, tuple(c.copy() for c in t.coords)), shape=self.shape)
            # (as SciPy's: a conversion's coo, canonical, sums its values in their order)
            built.has_canonical_format = t.has_canonical_format
            return built
        return self.kind((data, t.offsets), shape=self.shape)

    def probe(self, values=1.0):
        """The matrix holding ``values`` (a number: the same in every slot) in its valid slots."""
        data = np.zeros(self.data_shape)
        data.reshape(-1)[self.valid] = np.broadcast_to(values, self.valid.shape)[self.valid]
        return self.build(data)

    def every(self, numbered=False):
        """The matrix holding, in every slot (those outside a dia matrix too), 1, or
        (``numbered``) the slot's number counted from 1."""
        values = np.arange(1.0, self.valid.size + 1) if numbered else np.ones(self.valid.size)
        return self.build(values.reshape(self.data_shape), dropping=False)

    def slots(self, u, v):
        """``u[i] v[j]`` in the slot of each ``A[i, j]`` (``u[i] · v[j]`` for 2-d ``u`` and
        ``v``, rows against rows), zero in the slots outside the matrix: the cotangent of the
        stored values of ``A`` in ``u`` and ``v``'s bilinear form ``uᵀ A v`` (a 1-d array's,
        a row: ``u`` of its one row)."""
        if len(self.shape) == 1:
            u = np.reshape(u, (1,) + np.shape(u))
        g = u[self.rows] * v[self.cols]
        if np.ndim(g) == 2:
            g = g.sum(axis=-1)
        if self.padded:
            g = np.where(self.valid, g, 0.0)
        return np.reshape(g, self.data_shape)

    def keys(self):
        return self.rows[self.valid] * self.grid[1] + self.cols[self.valid]

    def at(self, dense):
        """The entries of ``dense`` (an array of this shape) at the slots' positions."""
        return dense[self.cols] if len(self.shape) == 1 else dense[self.rows, self.cols]

    def dropping(self, droppable, groups=None):
        """This layout with ``droppable`` slots (None: none); ``groups``: for each slot, the
        group (a block of a bsr matrix) SciPy leaves out only where all of it is droppable and
        zero (None: each slot alone)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.droppable = None if droppable is None or not np.any(droppable) else droppable
        twin.groups = None if twin.droppable is None else groups
        return twin

    def leaving_out_diagonals(self, diagonals):
        """This dia layout with ``diagonals`` (None: none; see ``__init__``)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.diagonals = None if diagonals is None or not np.any(diagonals) else diagonals
        return twin

    def grouping(self):
        """The groups of the droppable slots, a bsr matrix's blocks where none are given (None:
        each slot alone), for the slots an operation moves elsewhere."""
        if self.groups is None and self.format == "bsr":
            return np.arange(self.valid.size) // np.prod(self.data_shape[1:])
        return self.groups

    def left_out(self, values):
        """Which slots SciPy leaves out of its matrix holding the plain ``values`` (a bsr
        matrix's, whole blocks; a dia matrix's, whole diagonals)."""
        if self.diagonals is not None:  # (the slots outside the matrix hold no value)
            out = ~self.valid | (self.diagonals & (np.reshape(values, (-1,)) == 0))
            return np.repeat(out.reshape(self.data_shape).all(axis=1), self.data_shape[1])
        out = self.droppable & (np.reshape(values, (-1,)) == 0)
        if self.groups is not None:
            kept = np.bincount(self.groups, weights=~out, minlength=self.groups.max() + 1)
            out = kept[self.groups] == 0
        if self.format == "bsr":
            each = int(np.prod(self.data_shape[1:]))
            out = np.repeat(out.reshape(self.data_shape[0], each).all(axis=1), each)
        return out


# ----------------------------------------------------------------------------------------------
# The two primitives: a sparse product, and a solve


def _product_value(data, x, layout, right=False, followed=None):
    matrix = layout.build(data)
    return x @ matrix if right else matrix @ x


_product = Adjoint(_product_value)
_product.complex_values = HOLOMORPHIC  # (bilinear: its rule's transposes hold for complex values)


def _t(x):
    """The transpose of a matrix; a vector as it is."""
    return x if np.ndim(x) < 2 else transpose(x)


def _times(data, x, layout, right=False):
    """``A @ x`` (``x @ A`` where ``right``), ``A`` the matrix of ``layout`` holding ``data``."""
    return _product(data, x, layout=layout, right=right,
                   followed=(innermost((data,)) is not None, innermost((x,)) is not None))


def _times_transposed(data, x, layout, transposed):
    """``op(A) @ x``, ``op`` the transpose where ``transposed``, for 1-d and 2-d ``x``."""
    if not transposed:
        return _times(data, x, layout)
    if np.ndim(x) == 1:
        return _times(data, x, layout, right=True)
    return transpose(_times(data, transpose(x), layout, right=True))


@_product.rule
def _product_rule(data, x, layout, right=False, followed=(True, True)):
    y = _product(data, x, layout=layout, right=right, followed=followed)

    def back(dy):
        dx = ddata = None
        vector = len(layout.shape) == 1  # a 1-d A: a row on the left, a column on the right
        if followed[1] and vector:  # y = a · x: x̄ = a ⊗ ȳ (right: ȳ ⊗ a)
            a = _dense(layout, data)
            dx = a * dy if np.ndim(x) == 1 else (
                dy[:, None] * a[None, :] if right else a[:, None] * dy[None, :])
        elif followed[1]:  # x̄ = Aᵀ ȳ (right: x̄ = ȳ Aᵀ = (A ȳᵀ)ᵀ)
            dx = (_t(_times(data, _t(dy), layout)) if right
                  else _times_transposed(data, dy, layout, True))
        if followed[0]:  # y = A x: Ā_ij = ȳ_i · x_j; y = x A: Ā_ij = x_i · ȳ_j (by columns)
            ddata = layout.slots(dy, x) if not right else layout.slots(dy, _t(x)) if vector \
                else layout.slots(_t(x), _t(dy))
        return ddata, dx

    return y, back


@_product.jvp_rule
def _product_jvp(tangents, data, x, layout, right=False, followed=(True, True)):
    y = _product(data, x, layout=layout, right=right, followed=followed)
    terms = [_times(tangents[0], x, layout, right) if tangents[0] is not None else None,
             _times(data, tangents[1], layout, right) if tangents[1] is not None else None]
    terms = [t for t in terms if t is not None]
    return y, (None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1])


def _adder(slots, size):
    """The constant matrix (its layout) that adds term ``t`` into slot ``slots[t]`` of ``size``
    slots: a sum of stored values by the differentiable sparse product."""
    return _Layout(SCIPY["csr_array"]((np.ones(len(slots)), (slots, np.arange(len(slots)))),
                                      shape=(size, len(slots))))


def _add_into(adder, terms, shape):
    """``terms`` added into their slots by ``adder``, shaped as stored values (``shape``)."""
    return np.reshape(_times(adder.template.data, terms, adder), shape)


class _Pairs:
    """The constant plan of a sparse product ``C = A B``: the layout of ``C`` (SciPy's pattern of
    the product of ``A``'s and ``B``'s, every product of stored values kept), and each pair of a
    stored value of ``A`` at ``(i, k)`` and one of ``B`` at ``(k, j)``: their slots (``a``,
    ``b``) and the slot of ``C[i, j]`` their product is added into (``c``), with the constant
    matrices that add one term per pair into the slots of each (``into_*``)."""

    def __init__(self, left, right):
        self.left, self.right = left, right
        self.out = _Layout(left.probe() @ right.probe())
        a_slots, b_slots = np.flatnonzero(left.valid), np.flatnonzero(right.valid)
        # a 1-d right operand is a column: its slots' rows are their places, in column 0
        right_rows, right_cols, columns = (right.cols, np.zeros_like(right.cols), 1) if len(
            right.shape) == 1 else (right.rows, right.cols, right.shape[1])
        b_slots = b_slots[np.argsort(right_rows[b_slots], kind="stable")]
        inner = right.shape[0]
        counts = np.bincount(right_rows[b_slots], minlength=inner)
        starts = np.cumsum(counts) - counts
        each = counts[left.cols[a_slots]]
        self.a = np.repeat(a_slots, each)
        within = np.arange(len(self.a)) - np.repeat(np.cumsum(each) - each, each)
        self.b = b_slots[np.repeat(starts[left.cols[a_slots]], each) + within]
        keys = left.rows[self.a] * columns + right_cols[self.b]
        out_keys = self.out.keys()
        order = np.argsort(out_keys)
        where = np.flatnonzero(self.out.valid)[order[np.searchsorted(out_keys, keys,
                                                                     sorter=order)]]
        self.c = where
        self.into_c = _adder(where, self.out.valid.size)
        self.into_a = _adder(self.a, left.valid.size)
        self.into_b = _adder(self.b, right.valid.size)

    def value(self, a, b):
        """SciPy's product of the plain values, in the slots of ``out`` (SciPy leaves out a
        sum that is exactly zero; its slot holds 0)."""
        product = (self.left.build(a) @ self.right.build(b)).tocoo()
        data = np.zeros(self.out.valid.size)
        keys = self.out.rows * self.out.grid[1] + self.out.cols
        keys = np.where(self.out.valid, keys, -1)
        order = np.argsort(keys)
        found = order[np.searchsorted(keys, np.ravel_multi_index(product.coords, product.shape),
                                      sorter=order)]
        data[found] = product.data
        return data.reshape(self.out.data_shape)

def _sparse_product_value(a, b, pairs):
    return pairs.value(a, b)


_sparse_product = Adjoint(_sparse_product_value)
_sparse_product.complex_values = None


@_sparse_product.rule
def _sparse_product_rule(a, b, pairs):
    c = _sparse_product(a, b, pairs=pairs)

    def back(dc):
        # C_ij = Σ_k A_ik B_kj: each pair's product gets C̄_ij, times the other factor
        flat_dc = np.reshape(dc, (-1,))[pairs.c]
        da = _add_into(pairs.into_a, flat_dc * np.reshape(b, (-1,))[pairs.b],
                       pairs.left.data_shape)
        db = _add_into(pairs.into_b, flat_dc * np.reshape(a, (-1,))[pairs.a],
                       pairs.right.data_shape)
        return da, db

    return c, back


@_sparse_product.jvp_rule
def _sparse_product_jvp(tangents, a, b, pairs):
    c = _sparse_product(a, b, pairs=pairs)
    flat_a, flat_b = np.reshape(a, (-1,)), np.reshape(b, (-1,))
    terms = [np.reshape(t, (-1,))[pairs.a] * flat_b[pairs.b] if i == 0
             else flat_a[pairs.a] * np.reshape(t, (-1,))[pairs.b]
             for i, t in enumerate(tangents) if t is not None]
    if not terms:
        return c, None
    return c, _add_into(pairs.into_c, terms[0] if len(terms) == 1 else terms[0] + terms[1],
                        pairs.out.data_shape)


def _inner_value(a, b, left, right):
    return left.build(a) @ right.build(b)


_inner = Adjoint(_inner_value)
_inner.complex_values = None
"""``v @ w`` of 1-d sparse arrays: SciPy's own (a 0-d array), bilinear in their stored values."""


def _at_slots(layout, dense):
    """The entries of ``dense`` at ``layout``'s slots, shaped as its stored values."""
    return np.reshape(layout.at(dense), layout.data_shape)


@_inner.rule
def _inner_rule(a, b, left, right):
    y = _inner(a, b, left=left, right=right)

    def back(dy):  # each stored value's cotangent: ȳ times the other's entry at its place
        return (_at_slots(left, _dense(right, b)) * dy,
                _at_slots(right, _dense(left, a)) * dy)

    return y, back


@_inner.jvp_rule
def _inner_jvp(tangents, a, b, left, right):
    terms = [_inner(t, b, left=left, right=right) if i == 0 else
             _inner(a, t, left=left, right=right)
             for i, t in enumerate(tangents) if t is not None]
    return (_inner(a, b, left=left, right=right),
            None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1])


def _reduction_value(data, layout, method, setting):
    if method.startswith("matrix "):  # an spmatrix's sum along an axis: its np.matrix's array
        return np.asarray(getattr(layout.build(data), method.removeprefix("matrix "))(setting))
    return getattr(layout.build(data), method)(setting)


_reduction = Adjoint(_reduction_value)
_reduction.complex_values = None
"""``A.sum(axis)``, ``A.mean(axis)`` or ``A.diagonal(k)``: SciPy's own values, linear in the
stored values."""


@_reduction.rule
def _reduction_rule(data, layout, method, setting):
    y = _reduction(data, layout, method, setting)

    def back(dy):
        # each stored value's cotangent is that of the total, row, column or diagonal entry it
        # is added into
        if method == "diagonal":
            offset = layout.cols - layout.rows
            on = layout.valid & (offset == setting)
            g = np.where(on, dy[np.where(on, np.minimum(layout.rows, layout.cols), 0)], 0.0)
        elif setting is None or len(layout.shape) == 1:  # (a 1-d array's axis 0: all of it)
            g = np.where(layout.valid, dy, 0.0) if layout.padded else np.broadcast_to(
                dy, layout.valid.shape) + 0.0
        else:
            dy = np.reshape(dy, (-1,))  # a matrix sum's (1, n) or (m, 1)
            g = dy[layout.rows if setting in (1, -1) else layout.cols]
            g = np.where(layout.valid, g, 0.0) if layout.padded else g
        if method.endswith("mean"):  # (the sum of the matrix times 1 / n, as SciPy's)
            g = g * (1.0 / (math.prod(layout.shape) if setting is None
                            else layout.shape[setting]))
        return np.reshape(g, layout.data_shape), None, None, None

    return y, back


@_reduction.jvp_rule
def _reduction_jvp(tangents, data, layout, method, setting):
    return (_reduction(data, layout, method, setting),
            _reduction(tangents[0], layout, method, setting))


def _padding_map_value(values, ufunc, *constants):
    return ufunc(values, *constants)


_padding_map = Adjoint(_padding_map_value)
_padding_map.complex_values = None
"""``ufunc(values, *constants)`` (sqrt, sin, ..., a power) of the values in a dia matrix's
slots outside it: its derivative taken only where the cotangent (tangent) is not zero, so that
a slot nothing reads, a padding zero under sqrt's infinite partial say, gives no ``0 * inf``
nor its warning."""


def _where_moved(d, values, ufunc, constants):
    """``d`` times the partial of ``ufunc`` (its elementwise rule's; none: 0, a step's) at
    ``values`` where ``d`` is not zero, else 0 (the partial taken at a safe 0.5 there, in the
    domain of every map SciPy has)."""
    elementwise = RULES.get(ufunc, NO_RULE).elementwise
    moved = d != 0.0
    if elementwise is None:
        return np.zeros(np.shape(d))
    at = np.where(moved, values, 0.5)
    xs = (at, *constants)
    decision = () if elementwise.decide is None else (elementwise.decide(*xs),)
    partial = elementwise.partials[0](ufunc(*xs), *xs, *decision)
    return np.where(moved, d * partial, 0.0)


@_padding_map.rule
def _padding_map_rule(values, ufunc, *constants):
    def back(dy):
        return (_where_moved(dy, values, ufunc, constants), None) + (None,) * len(constants)

    return ufunc(values, *constants), back


@_padding_map.jvp_rule
def _padding_map_jvp(tangents, values, ufunc, *constants):
    return ufunc(values, *constants), _where_moved(tangents[0], values, ufunc, constants)


def _frobenius_value(data, layout):
    return np.linalg.norm(layout.build(data).data)


_frobenius = Adjoint(_frobenius_value)
_frobenius.complex_values = None
"""The Frobenius norm of the stored values: SciPy's (NumPy's norm of the values SciPy stores,
without a dense matrix's zero entries), differentiated in all of them (those zeros too)."""


@_frobenius.rule
def _frobenius_rule(data, layout):
    y = _frobenius(data, layout)

    def back(dy):
        return dy * data / y, None

    return y, back


@_frobenius.jvp_rule
def _frobenius_jvp(tangents, data, layout):
    return _frobenius(data, layout), np.sum(tangents[0] * data) / _frobenius(data, layout)


def _solve_value(data, b, guess, solver):
    return solver.value(data, b, guess)


_solve = Adjoint(_solve_value)
_solve.complex_values = HOLOMORPHIC  # x = op(A)⁻¹ b: its rule's solves with op(A)ᵀ hold as written


@_solve.rule
@zero_derivative("guess")  # (the solution, converged, is A⁻¹ b whatever the start)
def _solve_rule(data, b, guess, solver):
    x = _solve(data, b, guess, solver=solver)
    shape = np.shape(b)  # not b itself: the pullback keeps no right-hand side

    def back(dx):
        # x = op(A)⁻¹ b: λ = op(A)⁻ᵀ x̄, b̄ = λ, and op(A)'s cotangent -λ xᵀ, A's its transpose
        lam = _solve(data, np.reshape(dx, shape), None, solver=solver.adjoint())
        if data is None:  # a constant matrix (_Factored)
            return None, lam, None
        xb = np.reshape(x, shape)
        ddata = -(solver.layout.slots(xb, lam) if solver.trans
                  else solver.layout.slots(lam, xb))
        if solver.mask is not None:
            ddata = ddata * solver.mask
        return ddata, lam, None

    return x, back


@_solve.jvp_rule
def _solve_jvp(tangents, data, b, guess, solver):
    x = _solve(data, b, guess, solver=solver)
    ddata, db = tangents[0], tangents[1]
    rhs = db
    if ddata is not None:
        if solver.mask is not None:
            ddata = ddata * solver.mask
        change = _times_transposed(ddata, np.reshape(x, np.shape(b)), solver.layout, solver.trans)
        rhs = -change if rhs is None else rhs - change
    if rhs is None:
        return x, None
    return x, np.reshape(_solve(data, rhs, None, solver=solver.tangent()), np.shape(x))


class _Solver:
    """How a solve computes ``op(A)⁻¹ b`` from the plain stored values of ``A`` (``op`` the
    transpose where ``trans``): SciPy's call that the user made, and the solves its derivatives
    need (``adjoint``: with ``op(A)ᵀ``; ``tangent``: with ``op(A)`` again), which share what
    was factorized. A constant passed to the primitive as a setting."""

    mask = None

    def __init__(self, layout, trans=False, shared=None):
        self.layout = layout
        self.trans = trans
        self.shared = {} if shared is None else shared

    def twin(self, trans):
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.trans = trans
        return twin

    def adjoint(self):
        return self.twin(not self.trans)

    def tangent(self):
        return self.twin(self.trans)


class _Direct(_Solver):
    """``spsolve``'s value (``options``: its settings), or solves with SuperLU's factors (the
    derivatives' solves, ``trans="T"`` for the transpose; ``splu``'s own solves). The factors
    are ``factorize``'s of the stored values at hand: computed when first needed, and again
    whenever the values differ from those they were computed from (a replayed program, whose
    factorization is not a step of its own)."""

    def __init__(self, layout, options=None, factorize=None, factor=None, values=None):
        super().__init__(layout)
        self.options = options
        if factorize is None:
            permc_spec = (options or {}).get("permc_spec")
            factorize = lambda matrix: SCIPY["splu"](  # noqa: E731
                SCIPY["csc_array"](matrix), permc_spec=permc_spec)
        self.shared.update(factorize=factorize, factor=factor,
                           key=None if values is None else np.ascontiguousarray(values).tobytes())
        self.first = True  # the user's call itself

    def twin(self, trans):
        twin = super().twin(trans)
        twin.first = False
        return twin

    def factor(self, data):
        key = np.ascontiguousarray(data).tobytes()
        if self.shared["key"] != key:
            try:
                factor = self.shared["factorize"](self.layout.build(data))
            except RuntimeError as error:  # SuperLU's "Factor is exactly singular"
                raise UnsupportedOperationError(
                    f"scipy.sparse.linalg solve of a matrix SuperLU finds singular ({error}): "
                    "spsolve gives NaN for it, with a MatrixRankWarning, whose derivative is not "
                    "defined. Solve a nonsingular system (or a least-squares problem, "
                    "np.linalg.lstsq of A.toarray()).") from None
            self.shared.update(factor=factor, key=key)
        return self.shared["factor"]

    def value(self, data, b, guess):
        if self.first and self.options is not None:
            return SCIPY["spsolve"](self.layout.build(data), b, **self.options)
        factor = self.factor(data)
        # SuperLU solves in its own dtype: the user's b as SciPy's solve takes it (a float32
        # factor, a float32 b), a derivative's cast to it
        dtype = getattr(getattr(factor, "L", None), "dtype", np.dtype(float))
        trans = "T" if self.trans else "N"
        if self.first:
            return factor.solve(np.asarray(b), trans)
        if np.iscomplexobj(b) and dtype.kind != "c":  # a real matrix's complex derivative
            return (factor.solve(np.asarray(b.real, dtype), trans)
                    + 1j * factor.solve(np.asarray(b.imag, dtype), trans))
        return factor.solve(np.asarray(b, dtype), trans)


class _Triangular(_Solver):
    """``spsolve_triangular``, of a matrix whose pattern lies in its triangle (SciPy's result
    for another is not a solve of it), but for the zeros of a dense matrix there (``outside``),
    which SciPy leaves out while they are zero: the solve reads none of them, nor, with
    ``unit_diagonal=True``, a diagonal value, so those have no derivative (``mask``)."""

    def __init__(self, layout, lower, unit_diagonal):
        super().__init__(layout)
        self.lower, self.unit_diagonal = lower, unit_diagonal
        rows, cols = layout.rows, layout.cols
        outside = layout.valid & (rows < cols if lower else rows > cols)
        dropped = np.zeros(outside.shape, bool) if layout.droppable is None else \
            np.reshape(layout.droppable, outside.shape)
        if np.any(outside & ~dropped):
            self.refuse()
        self.outside = np.reshape(outside, layout.data_shape)
        if unit_diagonal or np.any(outside):
            self.mask = np.reshape(((rows != cols) | ~unit_diagonal) & ~outside,
                                   layout.data_shape).astype(float)

    def refuse(self):
        _refuse(f"scipy.sparse.linalg.spsolve_triangular(A, b, lower={self.lower}) of a matrix "
                "with stored entries outside its triangle", "SciPy solves with a triangular "
                "matrix only: pass scipy.sparse.tril(A) (triu(A) for lower=False), whose "
                "pattern is the triangle.")

    def value(self, data, b, guess):
        if np.any(np.where(self.outside, data, 0.0) != 0.0):  # a dense matrix's, not zero
            self.refuse()
        matrix, lower = self.layout.build(data), self.lower
        if self.trans:
            matrix, lower = SCIPY["csc_array"](matrix.T), not lower
        return SCIPY["spsolve_triangular"](matrix, b, lower=lower,
                                            unit_diagonal=self.unit_diagonal)


class _Iterative(_Solver):
    """An iterative method of ``scipy.sparse.linalg``, ``A`` a traced sparse matrix (``layout``)
    or a constant operator (``operator``): the user's call, then its adjoint and tangent solves
    with the same method to ``ADJOINT_RTOL``."""

    SYMMETRIC = ("cg", "minres")

    def __init__(self, method, layout, operator, options):
        super().__init__(layout)
        self.method, self.operator, self.options = method, operator, options
        self.tight = False

    def twin(self, trans):
        twin = super().twin(trans)
        twin.tight = True
        return twin

    def value(self, data, b, guess):
        matrix = self.layout.build(data) if self.operator is None else self.operator
        options = _derivative_options(self.options, self.tight)
        dropped = False
        if self.trans:
            matrix = self._transposed(matrix)
            if self.method not in self.SYMMETRIC:
                dropped = _transpose_preconditioners(options)
        # cg and minres take A Hermitian: Aᵀ = conj(A), so Aᵀ x = b is A conj(x) = conj(b)
        conjugated = self.trans and self.method in self.SYMMETRIC and (
            np.iscomplexobj(b) or np.dtype(matrix.dtype).kind == "c")
        with _preconditioning():
            x, info = SCIPY[self.method](matrix, np.conj(b) if conjugated else b, guess,
                                         **options)
        if info != 0:
            _not_converged(f"scipy.sparse.linalg.{self.method}", self.tight, info, dropped)
        return np.conj(x) if conjugated else x

    def _transposed(self, matrix):
        if self.method in self.SYMMETRIC:
            return matrix  # the method assumes a symmetric A
        if isinstance(matrix, _splinalg.LinearOperator):
            try:
                matrix.rmatvec(np.zeros(matrix.shape[0], matrix.dtype))
            except NotImplementedError as error:  # (SciPy's, or a refusal of mutad's)
                handled(error)
                return _transposed_by_pullback(matrix, f"scipy.sparse.linalg.{self.method}")
            return matrix.T
        return matrix.T


_PRECONDITIONING = threading.local()
"""How deep this thread is in the iterative solves of this module (``_preconditioning``)."""


@contextlib.contextmanager
def _preconditioning():
    """An iterative solve of this module runs in the block: a preconditioner made by
    ``spilu`` of traced values (``IncompleteFactors``) may solve there."""
    _PRECONDITIONING.depth = getattr(_PRECONDITIONING, "depth", 0) + 1
    try:
        yield
    finally:
        _PRECONDITIONING.depth -= 1


class IncompleteFactors:
    """``scipy.sparse.linalg.spilu`` of a matrix with traced values: SciPy's incomplete LU of
    its values, for one use, preconditioning this module's iterative solves (``cg``,
    ``gmres``, ``bicgstab``, ``minres`` with ``M=LinearOperator(A.shape, matvec=ilu.solve)``),
    where it changes how fast a solve converges, never the solution or its derivative. A
    solve anywhere else (``ilu.solve(b)`` taken as a solution) would depend on the matrix's
    values without their derivative: refused, as are the factors themselves."""

    # It keeps the factors of the values of the call that made it: a replay would precondition
    # with them, converging to other bits than the program's own call (engines.replay)
    replays_on_its_operands = False

    def __init__(self, factors: Any) -> None:
        self._factors = factors
        self.shape, self.nnz = factors.shape, factors.nnz

    def solve(self, rhs: Any, trans: str = "N") -> Any:
        # (zeros solve to zeros whatever the factors: LinearOperator's probe of its dtype)
        if not getattr(_PRECONDITIONING, "depth", 0) and not (
                type(rhs) is np.ndarray and not rhs.any()):
            _refuse("ilu.solve of scipy.sparse.linalg.spilu of a matrix with traced values, "
                    "outside a preconditioner", "its values depend on the matrix's through an "
                    "incomplete factorization mutad does not differentiate. Solve with "
                    "splu(A).solve(b), or pass M=LinearOperator(A.shape, matvec=ilu.solve) to "
                    "cg, gmres, bicgstab or minres, which mutad differentiates.")
        return self._factors.solve(rhs, trans)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise UnsupportedAttributeError(
            f"{name} of scipy.sparse.linalg.spilu of a matrix with traced values: its factors "
            "depend on the matrix's values through an incomplete factorization mutad does not "
            "differentiate. Use it as a preconditioner (M=LinearOperator(A.shape, "
            "matvec=ilu.solve)), or factorize with splu.")


def _spilu(A: Any, *args: Any, **kwargs: Any) -> Any:
    if not _followed(A, *args, *kwargs.values()):
        # SciPy's factors of constant values, whose solve is a linear map of the right-hand
        # side, its transpose the solve with trans="T": as splu's (SuperLU), with its solves
        # differentiated in b
        return _factorization(A, lambda m: SCIPY["spilu"](m, *args, **kwargs))
    if _followed(*args, *kwargs.values()) or not isinstance(A, TracedSparse):
        _refuse("scipy.sparse.linalg.spilu of traced settings or of a dense traced matrix",
                "pass a scipy.sparse matrix of the values, and constant settings.")
    return IncompleteFactors(SCIPY["spilu"](A.value, *args, **kwargs))


def _derivative_options(options, tight):
    """The settings of a solve: the user's, or, ``tight``, those of a derivative's solve: to
    ``ADJOINT_RTOL``, without the user's callback, and without what ``lgmres`` and ``gcrotmk``
    carry from solve to solve with ``A`` (``outer_v``, ``CU``: the caller's lists, which they
    extend, of another system than ``Aᵀ``'s), which changes how fast they converge."""
    options = dict(options)
    if tight:
        options["rtol"] = min(options.get("rtol", 1e-5), ADJOINT_RTOL)
        for name in ("callback", "outer_v", "CU", "show"):
            options.pop(name, None)
        if "atol" in options:
            options["atol"] = 0.0
    return options


def _transpose_preconditioners(options):
    """The preconditioners of ``options`` (a dict of settings) made those of the solve with
    ``Aᵀ``: ``Mᵀ``, and for ``qmr``'s left and right ones ``M1 = M2ᵀ`` and ``M2 = M1ᵀ``
    (``A ≈ M1 M2`` gives ``Aᵀ ≈ M2ᵀ M1ᵀ``). Whether one was dropped (no ``rmatvec``)."""
    given = {name: options[name] for name in ("M", "M1", "M2")
             if options.get(name) is not None}
    transposed = {name: _transposed_preconditioner(M) for name, M in given.items()}
    if "M1" in given or "M2" in given:
        options["M1"], options["M2"] = transposed.get("M2"), transposed.get("M1")
    if "M" in given:
        options["M"] = transposed["M"]
    return any(M is None for M in transposed.values())


def _transposed_preconditioner(M):
    """``Mᵀ``, the preconditioner of a solve with ``Aᵀ``; None (no preconditioner) where ``M``
    has no ``rmatvec``, as ``LinearOperator(shape, matvec=ilu.solve)`` of ``spilu``: a
    preconditioner changes how fast a solve converges, never the solution it converges to,
    so the derivative is the same without it."""
    M = _splinalg.aslinearoperator(M)
    try:
        M.rmatvec(np.zeros(M.shape[0], M.dtype))
    except NotImplementedError as error:  # (SciPy's, or a refusal of mutad's)
        handled(error)
        return None
    return M.T


def _not_converged(name, tight, info, dropped):
    """Refuse the result of a solve ``name`` that did not converge; ``tight``: a derivative's
    solve, ``dropped``: run without the caller's preconditioner, which has no ``rmatvec``."""
    what = "its adjoint or tangent solve" if tight else "the solve"
    fix = ("give the preconditioner M rmatvec, which the transposed solve of the derivative "
           "needs (for spilu's ilu: LinearOperator(shape, matvec=ilu.solve, "
           "rmatvec=lambda v: ilu.solve(v, 'T')))" if dropped else
           "pass a preconditioner M")
    raise UnsupportedOperationError(
        f"{name}: {what} did not converge (info={info}), so the solution it returned has no "
        "derivative. Raise maxiter, loosen or tighten rtol/atol as the system allows, or "
        f"{fix}.")


# ----------------------------------------------------------------------------------------------
# Sparse matrices with traced values


def _gather(data, index):
    """``data``'s values at ``index`` (flat positions, 1-based; 0 gives 0)."""
    flat = np.concatenate([np.zeros(1), np.reshape(data, (-1,))])
    return flat[index]


def _relayout(data, layout, operation, shares=False):
    """The layout and stored values of ``operation(A)`` (a SciPy operation that moves stored
    values: a transpose, a conversion) given ``A``'s: the operation applied to the slot
    numbers tells where each value goes; where it sums some (duplicates merged in a
    conversion), a constant matrix adds them. ``shares``: SciPy's result keeps ``A``'s
    stored values where they stay in place (a transpose's), else it copies them."""
    # (a dia matrix's slots outside it numbered too: SciPy moves the values they hold)
    numbered = operation(layout.build(np.arange(1.0, layout.valid.size + 1).reshape(
        layout.data_shape)) if layout.padded else layout.probe(
        np.arange(1.0, layout.valid.size + 1)))
    ones = operation(layout.probe())
    out = _Layout(ones)
    if np.all(np.isin(ones.data, (0.0, 1.0))) and numbered.data.shape == ones.data.shape:
        index = np.rint(numbered.data).astype(np.intp)  # each slot holds one value, or none
        if layout.droppable is not None and out.format == "dia":
            # a diagonal holding only zeros that SciPy leaves out, it leaves out (those of a
            # dense matrix, a dia matrix's own that it left out; the new slots' zeros)
            marks = layout.diagonals if layout.format == "dia" else layout.droppable
            if marks is not None:
                source = np.reshape(index, (-1,)) - 1
                out = out.leaving_out_diagonals(np.where(source >= 0,
                                                         marks[np.maximum(source, 0)], True))
        elif layout.droppable is not None:  # an entry of a dense matrix stays one
            source = np.reshape(index, (-1,)) - 1
            at = np.maximum(source, 0)
            grouping = layout.grouping()
            groups = None if grouping is None else np.where(  # (a new slot: alone)
                source >= 0, grouping[at], grouping.max() + 1 + np.arange(len(at)))
            out = out.dropping(np.where(source >= 0, layout.droppable[at], False), groups)
        if shares and index.shape == np.shape(data) and np.array_equal(
                index.reshape(-1), np.arange(1, index.size + 1)):
            return out, data  # the same values in the same order: shared, as SciPy's A.T
        return out, np.reshape(_gather(data, index), out.data_shape)
    return out, _converted_sum(data, layout, out, operation)


def _summing_slots(layout, out):
    """For each of ``layout``'s valid slots whose position ``out`` (without repeated
    positions) stores, that slot (``slots_in``) and ``out``'s slot at its position
    (``slots_out``)."""
    keys, inputs = out.keys(), layout.keys()
    if len(np.unique(keys)) != len(keys):
        _refuse("a sparse operation whose result has repeated entries",
                "call sum_duplicates() on the matrix first.")
    order = np.argsort(keys)
    where = np.searchsorted(keys, inputs, sorter=order)
    found = where < len(keys)
    where = order[np.where(found, where, 0)] if len(keys) else where
    found &= keys[where] == inputs if len(keys) else found
    return np.flatnonzero(layout.valid)[found], np.flatnonzero(out.valid)[where[found]]


def _summed(data, layout, out):
    """The stored values of ``out`` (a layout without repeated positions) from ``layout``'s:
    each the sum of ``layout``'s slots at its position, by a constant sparse matrix."""
    slots_in, slots_out = _summing_slots(layout, out)
    return _add_into(_adder(slots_out, out.valid.size), np.reshape(data, (-1,))[slots_in],
                     out.data_shape)


def _converted_sum_value(data, layout, out, operation):
    """SciPy's own ``operation`` (a conversion that sums repeated entries) of the stored
    values ``data``, its values in ``out``'s slots: SciPy's order of adding them."""
    converted = operation(layout.build(data, dropping=False))
    if converted.format not in FORMATS or converted.ndim != 2:
        converted = converted.tocsr()
    return np.reshape(converted.data, out.data_shape)


_converted_sum = Adjoint(_converted_sum_value)
_converted_sum.complex_values = None
"""``_summed`` of a conversion, its values SciPy's sums (it adds repeated entries in an order
of its own): each stored value's cotangent is that of the slot it is added into."""


@_converted_sum.rule
def _converted_sum_rule(data, layout, out, operation):
    y = _converted_sum(data, layout, out, operation)
    slots_in, slots_out = _summing_slots(layout, out)
    source = np.full(layout.valid.size, out.valid.size, np.intp)
    source[slots_in] = slots_out

    def back(dy):
        flat = np.concatenate([np.reshape(dy, (-1,)), np.zeros_like(dy, shape=(1,))])
        return np.reshape(flat[source], layout.data_shape), None, None, None

    return y, back


@_converted_sum.jvp_rule
def _converted_sum_jvp(tangents, data, layout, out, operation):
    return (_converted_sum(data, layout, out, operation),
            _converted_sum(tangents[0], layout, out, operation))


def _dropping(layout):
    """``layout`` with every slot droppable: the result of a SciPy operation that stores only
    the entries that are not zero (a sum, an elementwise or matrix product)."""
    if layout.format not in ("csr", "csc", "coo", "bsr"):
        return layout
    return layout.dropping(np.ones(layout.valid.size, bool))


def _left_out_as(layout, out):
    """``layout`` leaving out by their values the slots ``out`` (a dia matrix's: whole
    diagonals) and no others."""
    if layout.format == "dia":
        return layout.leaving_out_diagonals(out & layout.valid)
    return layout.dropping(out)


def _finite_where_left_out(factor, layout, instead=0.0):
    """``factor`` (a number, or an array of the values' shape), with which SciPy computes
    each value it stores of a matrix of ``layout`` (``_keeping_stored``'s: a product, a
    power), where it is inf or nan ``instead`` in the slots ``layout`` leaves out by their
    value: those, zeros, stay zeros (0·inf would make them nan, stored, where SciPy computes
    nothing of them), their derivative the factor's where it is finite, none where it is not
    (an entry leaving zero makes its product infinite, or nan). A factor known finite is
    given as it is."""
    if not layout.drops or (type(factor) not in WRAPPERS and np.isfinite(factor).all()):
        return factor
    left = np.reshape(layout.left_out(np.zeros(layout.data_shape)) & layout.valid,
                      layout.data_shape)
    return np.where(left, np.where(np.isfinite(factor), factor, instead), factor)


class _Stale:
    """The layout of a matrix whose pattern SciPy left inconsistent: its use is refused."""

    def __init__(self, what, instead):
        self.what, self.instead = what, instead

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        _refuse(self.what, self.instead)


def _lift(a):
    """A SciPy sparse matrix as a :class:`TracedSparse` with constant values (a ``lil`` or
    ``dok`` matrix assembled with traced entries: with them, ``_Assembled``)."""
    if isinstance(a, TracedSparse):
        return a
    if isinstance(a, _Assembled):
        return a.traced()
    layout = _Layout(a)
    return TracedSparse(layout, layout.template.data)


def _is_scalar(c):
    return np.ndim(c) == 0 and not isinstance(c, (TracedSparse, _sparse.sparray,
                                                  _sparse.spmatrix))


def _dense_operand(x):
    return (wrapped(x) or isinstance(x, (np.ndarray, list, tuple))) and \
        not isinstance(x, (TracedSparse, np.matrix))


def _matrix_operand(x):
    """An operand of a :class:`TracedMatrix`'s arithmetic as an array: its own array, a
    plain np.matrix's array (two-dimensional, whose arithmetic with the traced array is the
    matrices'), or the operand itself."""
    if isinstance(x, TracedMatrix):
        return x.array
    return x.view(np.ndarray) if isinstance(x, np.matrix) else x


def _as_matrix_rows(x):
    """``x`` as ``np.asmatrix`` makes it two-dimensional: a number or a 1-d array one row."""
    x = _matrix_operand(x)
    return np.reshape(x, (1, -1)) if np.ndim(x) < 2 else x


_MATRIX_REDUCTIONS = {np.sum: "sum", np.mean: "mean", np.max: "max", np.amax: "max",
                      np.min: "min", np.amin: "min", np.prod: "prod", np.std: "std",
                      np.var: "var"}
"""NumPy's functions that reduce an ``np.matrix`` by its method of the same meaning."""


def _as_matrix_computes(func, args, kwargs):
    """NumPy's ``func`` of arguments among which are np.matrix of traced values: computed on
    their traced arrays, its results given the types and shapes NumPy's on the plain
    matrices has (a matrix stays one, ``np.linalg.det`` gives a number). NumPy's own call on
    the plain matrices decides them, and must give the same values: a function whose values
    change with np.matrix's semantics (its ``*``, its indexing that keeps two dimensions) is
    refused."""
    def replaced(a, by_matrix, by_traced):
        # (inside sequences too: np.concatenate([m, m]), np.bmat's rows, which else come back)
        if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
            return type(a)(replaced(b, by_matrix, by_traced) for b in a)
        if isinstance(a, TracedMatrix):
            return by_matrix(a)
        return by_traced(a) if wrapped(a) or isinstance(a, np.matrix) else a

    plain = func(*[replaced(a, lambda m: m.value, memory) for a in args], **kwargs)
    traced = func(*[replaced(a, _matrix_operand, _matrix_operand) for a in args], **kwargs)
    return _matrix_results(traced, plain, f"np.{func.__name__}")


def _matrix_results(traced, plain, what):
    """The results ``traced`` of a computation on traced arrays given the types and shapes of
    ``plain``, the same computation's on the plain np.matrix; refused where the values
    differ."""

    def matched(y, expected):
        if isinstance(expected, tuple) and isinstance(y, tuple) and len(y) == len(expected):
            items = [matched(a, b) for a, b in zip(y, expected)]
            return type(expected)(*items) if hasattr(expected, "_fields") else tuple(items)
        if np.size(y) == np.size(expected) and np.array_equal(
                np.ravel(memory(y)), np.ravel(np.asarray(expected)), equal_nan=True):
            if isinstance(expected, np.matrix):
                return TracedMatrix(np.reshape(y, expected.shape))
            return np.reshape(y, np.shape(expected)) if np.shape(y) != np.shape(expected) else y
        _refuse(f"{what} of an np.matrix of traced values (a scipy.sparse matrix's "
                "sum(axis) or todense()), whose values differ from those of its array",
                "take its array first: np.asarray(m), m.A or m.A1.")

    return matched(traced, plain)


_MATRIX_AS_ARRAY_METHODS = frozenset({
    "reshape", "squeeze", "cumsum", "cumprod", "argmax", "argmin", "argsort", "any", "all",
    "round", "clip", "conj", "conjugate", "astype", "swapaxes", "repeat", "take", "dot",
    "nonzero"})
"""np.matrix's methods that change nothing in place and compute the values ndarray's method of
the same name computes (the types and shapes differ: np.matrix keeps two dimensions): followed
as the traced array's method, the results given np.matrix's shapes."""


class _ComparedByValue:
    """The comparison operators of a traced matrix, each its ``_compared`` with the operator:
    matrices of booleans without a derivative."""

    def __eq__(self, other):
        return self._compared(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compared(other, lambda a, b: a != b)

    def __lt__(self, other):
        return self._compared(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._compared(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compared(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._compared(other, lambda a, b: a >= b)


def _as_matrix(value):
    """A traced matrix's value as ``f`` returned it: NumPy's ``np.matrix``."""
    return np.asarray(value).view(np.matrix)  # (no warning: np.matrix() issues one)


def _numpys_matrix_warning():
    """The warning NumPy's np.matrix methods issue where they make a matrix (``asmatrix`` in
    ``M.I``, ``M * B``): NumPy's own, from its line, its filters and registry (of a plain
    matrix NumPy makes for it)."""
    np.asmatrix(_ONE)


_ONE = np.ones((1, 1))


class TracedMatrix(_ComparedByValue):
    """SciPy's ``np.matrix`` result (an spmatrix's ``sum(axis)``, ``todense()``) of traced values: a traced
    2-d array (``array``) that computes as ``np.matrix`` does where it differs from an array
    (``*`` is the matrix product, ``.sum(axis)`` keeps two dimensions, ``.A``, ``.A1``), and
    refuses what it does not follow. ``np.asarray(m)`` and ``m.A`` are the traced array; NumPy's
    ufuncs refuse it (its operators must not become elementwise ufunc calls): apply them to
    ``m.A``."""

    __array_ufunc__ = None  # NumPy's operators give way to ours
    ndim = 2
    # isinstance(m, np.matrix) in the user's code, as of SciPy's
    __class__ = property(lambda self: shown_class(self, lambda _: np.matrix))

    def __init__(self, array: Any) -> None:
        self.array = array

    @property
    def value(self) -> Any:
        """The plain ``np.matrix`` of its values."""
        return memory(self.array).view(np.matrix)

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.array)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def getA(self) -> Any:
        return self.array

    def __mutad_output__(self):
        """As ``f``'s output: the traced array, its value returned as the matrix."""
        return self.array, _as_matrix

    A = property(getA)

    def getA1(self) -> Any:
        return np.reshape(self.array, (-1,))

    A1 = property(getA1)

    def getT(self) -> TracedMatrix:
        return TracedMatrix(np.transpose(self.array))

    T = property(getT)

    def transpose(self) -> TracedMatrix:
        return self.T

    def ravel(self) -> TracedMatrix:
        return TracedMatrix(np.reshape(self.array, (1, -1)))

    flatten = ravel

    def copy(self) -> TracedMatrix:
        return TracedMatrix(self.array.copy())

    def _reduced(self, reduction, axis, **settings):
        """``np.matrix``'s reductions: a number over every entry, a matrix (two dimensions
        kept) along an axis."""
        if axis is None:
            return reduction(self.array, **settings)
        return TracedMatrix(reduction(self.array, axis=axis, keepdims=True, **settings))

    def sum(self, axis: int | None = None) -> Any:
        return self._reduced(np.sum, axis)

    def mean(self, axis: int | None = None) -> Any:
        return self._reduced(np.mean, axis)

    def max(self, axis: int | None = None) -> Any:
        return self._reduced(np.max, axis)

    def min(self, axis: int | None = None) -> Any:
        return self._reduced(np.min, axis)

    def prod(self, axis: int | None = None) -> Any:
        return self._reduced(np.prod, axis)

    def std(self, axis: int | None = None, ddof: int = 0) -> Any:
        return self._reduced(np.std, axis, ddof=ddof)

    def var(self, axis: int | None = None, ddof: int = 0) -> Any:
        return self._reduced(np.var, axis, ddof=ddof)

    def trace(self) -> TracedMatrix:  # (np.matrix's: a 1 x 1 matrix)
        return TracedMatrix(np.reshape(np.trace(self.array), (1, 1)))

    def diagonal(self) -> TracedMatrix:
        return TracedMatrix(np.reshape(np.diagonal(self.array), (1, -1)))

    def __abs__(self) -> TracedMatrix:
        return TracedMatrix(np.abs(self.array))

    def __getitem__(self, key):
        """``np.matrix``'s indexing: an entry, or a matrix (a row where one index is left,
        a column ``m[:, j]``), for integers, slices and integer lists."""
        keys = key if type(key) is tuple else (key,)
        if len(keys) > 2 or not all(isinstance(k, (int, np.integer, slice)) or (
                isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype.kind in "iu"
                and np.ndim(k) == 1) for k in keys):
            _refuse("indexing an np.matrix of traced values (a scipy.sparse matrix's sum(axis) "
                    "or todense()) other than by integers, slices and integer lists",
                    "take its array first: m.A[...] or m.A1[...].")
        out = self.array[key]
        if np.ndim(out) == 0:
            return out
        if np.ndim(out) == 1:  # as np.matrix: a column where the second index is a number
            column = len(keys) > 1 and isinstance(keys[1], (int, np.integer))
            return TracedMatrix(np.reshape(out, (-1, 1) if column else (1, -1)))
        return TracedMatrix(out)

    def __setitem__(self, key, value):
        """``np.matrix``'s assignment (ndarray's, given a matrix: ``m[:, j]`` takes a column
        ``m[:, [k]]``): which entry of ``value`` each written entry takes is NumPy's own
        answer, the same assignment of the entries' numbers into an np.matrix of integers
        (its errors too), written into the traced array."""
        value, = lists_as_arrays([_matrix_operand(value)])
        taken = np.full(self.shape, -1, dtype=np.intp).view(np.matrix)
        taken[key] = np.arange(np.size(value)).reshape(np.shape(value))
        taken = taken.view(np.ndarray)
        written = taken >= 0
        self.array[written] = np.reshape(value, (-1,))[taken[written]]

    def _elementwise(self, other, operation):
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            return NotImplemented
        return TracedMatrix(operation(self.array, _matrix_operand(other)))

    def __add__(self, other):
        return self._elementwise(other, lambda a, b: a + b)

    def __radd__(self, other):
        return self._elementwise(other, lambda a, b: b + a)

    def __sub__(self, other):
        return self._elementwise(other, lambda a, b: a - b)

    def __rsub__(self, other):
        return self._elementwise(other, lambda a, b: b - a)

    def __truediv__(self, other):
        return self._elementwise(other, lambda a, b: a / b)

    def __rtruediv__(self, other):
        return self._elementwise(other, lambda a, b: b / a)

    def __neg__(self):
        return TracedMatrix(-self.array)

    def __mul__(self, other):
        if isinstance(other, (np.ndarray, list, tuple, TracedMatrix)) or (
                wrapped(other) and not stands_for_scalar(other)):
            _numpys_matrix_warning()  # np.matrix's: asmatrix(other)
        if _is_scalar(other):
            return TracedMatrix(self.array * other)
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            return NotImplemented
        return TracedMatrix(self.array @ _as_matrix_rows(other))  # np.matrix's: the product

    def __rmul__(self, other):
        if _is_scalar(other):
            return TracedMatrix(other * self.array)
        return TracedMatrix(_as_matrix_rows(other) @ self.array)

    def __matmul__(self, other):
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            return NotImplemented
        return TracedMatrix(_as_matrix_rows(self.array @ _matrix_operand(other)))

    def __rmatmul__(self, other):  # (np.matmul's operands as they are, a matrix of the result)
        return TracedMatrix(_as_matrix_rows(_matrix_operand(other) @ self.array))

    def item(self, *args: Any) -> Any:
        return self.array.item(*args)

    def tolist(self) -> Any:
        return self.array.tolist()

    def getI(self) -> TracedMatrix:  # np.matrix's: the inverse, or the pseudo-inverse
        square = self.shape[0] == self.shape[1]
        inverse = (np.linalg.inv if square else np.linalg.pinv)(self.array)
        _numpys_matrix_warning()  # np.matrix's: asmatrix(inverse)
        return TracedMatrix(inverse)

    I = property(getI)  # noqa: E741 (np.matrix's name)

    def getH(self) -> TracedMatrix:
        return TracedMatrix(np.conj(np.transpose(self.array)))

    H = property(getH)

    def __getattr__(self, name):
        if name in _MATRIX_AS_ARRAY_METHODS:
            def method(*args, **kwargs):
                operands = [_matrix_operand(a) for a in args]
                plain = [memory(a) if wrapped(a) else a for a in operands]
                return _matrix_results(getattr(self.array, name)(*operands, **kwargs),
                                       getattr(self.value, name)(*plain, **kwargs), f"m.{name}")
            return method
        if name.startswith("__"):
            raise AttributeError(name)
        _refuse(f"m.{name} of an np.matrix of traced values (a scipy.sparse matrix's "
                "sum(axis) or todense())", "mutad follows its sum, mean, max, min, prod, std, "
                "var, trace, diagonal, T, A, A1, H, I, copy, ravel, item, tolist, "
                f"{', '.join(sorted(_MATRIX_AS_ARRAY_METHODS))}, indexing, abs, "
                "powers and arithmetic: take its array first, np.asarray(m), m.A or m.A1.")

    def __pow__(self, other):
        if not isinstance(other, (int, np.integer)):
            _refuse("a power of an np.matrix of traced values (a scipy.sparse matrix's "
                    "sum(axis) or todense()) other than by an integer", "take its array first "
                    "(m.A ** p, elementwise).")
        return TracedMatrix(np.linalg.matrix_power(self.array, other))

    def __array__(self, dtype=None, copy=None):
        if not carries_derivative(self.array):  # (a constant: sp.eye(n).todense(), unwritten)
            return np.asarray(settled(self.array, "an np.matrix converted to a NumPy array"),
                              dtype=dtype).view(np.matrix)
        _refuse("an np.matrix of traced values (a scipy.sparse matrix's sum(axis) or "
                "todense()) converted to a NumPy array", "use np.asarray(m) inside the differentiated function, or "
                "m.A, m.A1 (traced arrays).")

    def _compared(self, other, comparison):
        """np.matrix's comparison, a matrix of booleans without a derivative (a decision on
        the values, which a replay does not take again)."""
        what = "a comparison of an np.matrix"
        return comparison(settled(self.array, what).view(np.matrix),
                          settled(_matrix_operand(other), what))

    __hash__ = None  # type: ignore[assignment]  # (np.matrix's: unhashable)

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.ndim, np.shape, np.size) and len(args) == 1 and not kwargs:
            return {np.ndim: 2, np.shape: self.shape, np.size: self.size}[func]
        if func in (np.asarray, np.array) and args and args[0] is self:
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            if dtype is not None and np.dtype(dtype) != self.dtype:
                _refuse(f"np.{func.__name__}(m, dtype={dtype!r}) of an np.matrix of traced "
                        "values", "leave the dtype out (the values are float64).")
            return self.array.copy() if func is np.array else self.array
        method = _MATRIX_REDUCTIONS.get(func)
        if method is not None and args and args[0] is self and len(args) <= 2 and \
                set(kwargs) <= {"axis"}:
            return getattr(self, method)(kwargs.get("axis", args[1] if len(args) > 1 else None))
        return _as_matrix_computes(func, args, kwargs)

    def __repr__(self):
        return f"<traced matrix of shape {self.shape}>"


_REFLECTED = {np.add: "__radd__", np.subtract: "__rsub__", np.multiply: "__rmul__",
              np.matmul: "__rmatmul__", np.true_divide: "__rtruediv__",
              np.floor_divide: "__rfloordiv__", np.remainder: "__rmod__",
              np.power: "__rpow__", np.less: "__gt__", np.less_equal: "__ge__",
              np.greater: "__lt__", np.greater_equal: "__le__", np.equal: "__eq__",
              np.not_equal: "__ne__", np.bitwise_and: "__rand__", np.bitwise_or: "__ror__",
              np.bitwise_xor: "__rxor__"}
"""The ufunc an ndarray's operator calls, and the method of the right operand that Python
calls when the ndarray's gives way."""


def _operator_instruction(frame):
    """Whether ``frame``, or the first frame below it that is not mutad's (a stand-in's
    ``__array_ufunc__`` calling the ufunc again), runs an operator (``x + A``, ``x *= A``,
    ``x < A``) rather than a call (``np.add(x, A)``, which SciPy's matrix meets as an
    object)."""
    while frame is not None and frame.f_globals.get("__name__", "").startswith("mutad."):
        frame = frame.f_back
    if frame is None:
        return False
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            name = instruction.opname
            return name.startswith(("BINARY_", "INPLACE_", "COMPARE_OP")) \
                and name != "BINARY_SUBSCR"
    return False


def _in_place_operator(frame):
    """Whether ``frame``, the user's (not mutad's), runs an augmented assignment (``x *= A``):
    an ndarray's in-place operator calling the ufunc with ``out=``."""
    if frame.f_globals.get("__name__", "").startswith("mutad."):
        return False
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            return instruction.opname.startswith("INPLACE_") or (
                instruction.opname == "BINARY_OP" and instruction.argrepr.endswith("="))
    return False


class TracedSparse(_ComparedByValue):
    """A SciPy sparse matrix whose stored values a differentiation follows: SciPy's pattern
    (``layout``, constant) and the traced array of its stored values (``data``). Made by the
    constructors of this module (and SciPy's, in a differentiated function) from traced
    values; see the module's documentation for what it does."""

    # a traced array's operators give way to ours: x @ A is A.__rmatmul__(x); its in-place
    # ones too, as an ndarray's to SciPy's matrix (x *= A rebinds x to A.__rmul__(x))
    takes_over_operations = takes_over_in_place_operations = True
    # isinstance(A, scipy.sparse.csr_matrix), isinstance(A, sparray) in the user's code
    __class__ = property(lambda self: shown_class(self, lambda a: a.layout.kind))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs as of SciPy's matrix, which defines no ``__array_ufunc__``: NumPy
        takes it for an object, and its object loop calls the matrix's own method
        (``np.sqrt(A)`` is ``A.sqrt()``, ``np.abs(A)`` ``abs(A)``), which mutad follows; an
        ndarray's operator gives way to the matrix's reflected one (SciPy's
        ``__array_priority__``: ``x @ A`` is ``A.__rmatmul__(x)``), its in-place one too
        (``x *= A`` rebinds ``x`` to ``A.__rmul__(x)``, ``x`` unchanged) where the user's
        line runs it (a call with ``out=`` from mutad's own code expects ``x`` written).
        Refused: a ufunc's other methods, and a ufunc called with the matrix among other
        operands."""
        frame = sys._getframe(1)
        out = kwargs.get("out")
        in_place = type(out) is tuple and len(out) == 1 and out[0] is inputs[0] \
            and type(inputs[0]) is np.ndarray and set(kwargs) <= {"out", "axes"}
        if method == "__call__" and ufunc.nin == 2 and len(inputs) == 2 and inputs[1] is self \
                and not isinstance(inputs[0], TracedSparse) and ufunc in _REFLECTED \
                and (_in_place_operator(frame) if in_place
                     else not kwargs and _operator_instruction(frame)):
            result = getattr(self, _REFLECTED[ufunc])(inputs[0])
            if result is NotImplemented:
                raise TypeError(f"unsupported operand type(s) for {ufunc.__name__}: "
                                f"'{type(inputs[0]).__name__}' and '{self.format}_matrix'")
            return result
        if method == "__call__" and ufunc.nin == 1 and inputs == (self,) and not kwargs:
            held = np.empty((), dtype=object)
            held[()] = self
            try:
                return ufunc(held)
            except Exception as error:
                handled(error)
                # where SciPy's matrix fails too (np.exp(A): it has no method exp), SciPy's
                # error, which names its class
                held[()] = self.layout.probe()
                ufunc(held)
                raise
        _refuse(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method} of a "
                "scipy.sparse matrix with traced values among other operands or with out= "
                "(NumPy's object loop of SciPy's matrix)", "call the matrix's own method, "
                "which mutad follows: A.sqrt(), A.sin(), abs(A), -A, A.power(k), A.multiply(B), "
                "A + B, A @ x.")

    def __init__(self, layout: Any, data: Any) -> None:
        self.layout = layout
        self.data = data
        self._peers = None  # the matrices sharing its stored values' array (A.T), weakly
        # SciPy's matrix keeps the caller's arrays: of its index arrays (indices, indptr) and
        # of its stored values; SciPy's in-place changes of its pattern change those too
        self._callers_indices = self._callers_values = False

    @property
    def data(self) -> Any:
        """The traced array of its stored values. Those of a matrix made from a dense array
        include its zero entries, which SciPy leaves out: the user's code reading them while
        some are zero makes the matrix SciPy's, or is refused (``_as_scipy_stores``)."""
        if isinstance(self.layout, _Layout) and not internal(sys._getframe(1)):
            self._as_scipy_stores("A.data")
        return self._values

    @data.setter
    def data(self, values: Any) -> None:
        self._values = values

    def _as_scipy_stores(self, what, pattern=False):
        """Before the user's code reads ``what``, the stored values or (``pattern``) the
        pattern: where the matrix keeps zero entries that SciPy leaves out (of a dense array,
        a sum, a product), the matrix SciPy stores, in place, if those zeros are constants
        (``np.eye``'s, a dense matrix of constants): their derivative is zero, and SciPy's
        matrix, which has no such entries, is its own from then on. Zeros that carry a
        derivative stay: the pattern read is SciPy's matrix's, which leaves them out (a
        decision on the values, as ``np.nonzero``'s), and the stored values are refused: what
        the user's code does to them, those zeros would not receive. Once read, the pattern
        is SciPy's, which stores a zero written into its values (``A.data[0] = 0``): no slot
        is left out by its value any more. Returns SciPy's matrix whose pattern is read. The
        pattern is a decision on the values, which a replay guards."""
        layout, values = self.layout, self._values
        if not layout.drops:
            return layout.template
        out = _decision(values, f"{what} of a scipy.sparse matrix made from a dense array",
                        layout.left_out)
        if not np.any(out):
            if self._peers is None:
                self.layout = layout.leaving_out_diagonals(None) if layout.format == "dia" \
                    else layout.dropping(None)
            return layout.template
        if carries_derivative(values) or self._peers is not None or layout.format == "bsr":
            if pattern:
                return layout.build(memory(values))
            _refuse(f"{what} of a scipy.sparse matrix with zero entries that SciPy leaves out "
                    "(of a dense array, a sum, a product)", "mutad keeps those entries (for "
                    "their derivative), SciPy leaves them out: read A.toarray(), or build the "
                    "matrix from (data, indices, indptr) or (data, (row, col)).")
        self.layout = _Layout(layout.build(memory(values)))
        self._values = np.reshape(np.reshape(values, (-1,))[np.flatnonzero(~out)],
                                  self.layout.data_shape)
        return self.layout.template

    def _share(self, other):
        """``other`` holds this matrix's stored values' array in the same order (SciPy's
        ``A.T``, which shares ``A``'s arrays): an in-place sort of either moves both."""
        peers = self._peers if self._peers is not None else [weakref.ref(self)]
        peers.append(weakref.ref(other))
        self._peers = other._peers = peers
        return other

    # SciPy's in-place canonicalization ---------------------------------------------------

    def sum_duplicates(self) -> None:
        """SciPy's: sorts the indices and adds the values stored at one position, in place.
        SciPy does it to the matrix itself in ``spsolve``, ``sum()``, ``abs``, ``power``,
        ``norm`` and writes, so mutad does it there too: the stored values move and add as
        SciPy's do (its sums, bit for bit), written into the array that holds them (a csr or
        csc matrix's, which may be the array it was built from; a coo matrix's are new)."""
        self._canonicalize(True)

    def sort_indices(self) -> None:
        """SciPy's: sorts a csr or csc matrix's indices in place, its stored values with
        them."""
        if self.format not in ("csr", "csc"):
            raise AttributeError(f"{self.layout.kind.__name__} has no sort_indices")
        self._canonicalize(False)

    def sorted_indices(self) -> TracedSparse:
        """SciPy's: a copy, its indices sorted (``sort_indices``)."""
        if self.format not in ("csr", "csc"):
            raise AttributeError(f"{self.layout.kind.__name__} has no sorted_indices")
        result = self.copy()
        result.sort_indices()
        return result

    def _canonicalize(self, summing):
        layout = self.layout
        template = layout.template
        if layout.format == "dia" or (template.has_canonical_format if summing or
                                      layout.format == "coo" else template.has_sorted_indices):
            return

        self._refuse_moving_callers_arrays("sum_duplicates()" if summing else "sort_indices()",
                                           values=False)
        if summing and layout.format != "coo" and not template.has_sorted_indices:
            # SciPy sorts the whole array first, then adds into its front: the rest of it
            # keeps the sorted values
            self._canonicalize(False)
            layout = self.layout
            if layout.template.has_canonical_format:
                return

        def canonical(m):
            m.sum_duplicates() if summing else m.sort_indices()
            return m

        out, values = _relayout(self.data, layout, canonical)
        old = self.data
        if layout.format == "coo":  # SciPy's coo makes new arrays: nothing else moves
            self.layout, self.data = out, values
            return
        # csr, csc: SciPy sorts and sums in the array of stored values, then keeps its first
        # nnz (a copy where that is less than half of it: _prune_array)
        count = out.data_shape[0]
        if count == np.shape(old)[0]:
            old[...] = values
            data = old
        else:
            old[:count] = values
            data = old[:count]
            if count < np.shape(old)[0] // 2:
                data = data.copy()
        for peer in [r() for r in self._peers] if self._peers is not None else [self]:
            if peer is None or peer.data is not old:
                continue
            if peer is not self and data is not old:
                # SciPy leaves the transpose holding the whole array of stored values, with
                # the pattern's pointers shortened under it: its values are the array's, and
                # what it computes is refused
                peer.layout = _Stale(
                    "a scipy.sparse matrix sharing its arrays with one whose repeated entries "
                    "SciPy added in place (its transpose, taken before a spsolve, sum(), abs, "
                    "power, norm or sum_duplicates() of a matrix with repeated entries)",
                    "call A.sum_duplicates() before taking A.T, or take A.T.copy().")
                continue
            shaped = out.template
            if peer.layout.format != out.format:
                shaped = shaped.transpose()
            if type(shaped) is not peer.layout.kind:
                shaped = peer.layout.kind(shaped)
            peer.layout = out if shaped is out.template else _Layout(shaped)
            peer.data = data

    # what SciPy's matrices tell ----------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.layout.shape)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def format(self) -> str:
        return self.layout.format

    @property
    def nnz(self) -> int:
        """SciPy's: the stored entries, less those of a dense matrix that are zero (which
        SciPy leaves out; a decision on the values, which a replay guards)."""
        layout = self.layout
        if not layout.drops:
            return layout.template.nnz
        return _decision(self.data, "the nnz of a scipy.sparse matrix made from a dense array, "
                                    "which counts its nonzero values",
                         lambda v: int(layout.template.nnz - np.count_nonzero(
                             layout.left_out(v) & layout.valid)))

    def getnnz(self, axis: int | None = None) -> Any:
        """SciPy's (a matrix's): the stored entries, along ``axis`` (whether SciPy stores an
        entry of a dense matrix is a decision on its value, as :attr:`nnz`'s)."""
        if not hasattr(self.layout.template, "getnnz"):  # sparse arrays have none: SciPy's error
            raise AttributeError(f"{type(self.layout.template).__name__} has no attribute "
                                 "'getnnz'")
        if axis is None or not self.layout.drops:
            return self.nnz if axis is None else self.layout.template.getnnz(axis)
        return _decision(self.data, "A.getnnz(axis) of a scipy.sparse matrix made from a dense "
                                    "array", lambda v: self.layout.build(v).getnnz(axis))

    def count_nonzero(self, axis: int | None = None) -> Any:
        """SciPy's: the entries whose value is not zero, after SciPy adds the repeated ones
        in place (as it does); a decision on the values, which a replay guards."""
        if self.format in ("csr", "csc", "coo"):
            self.sum_duplicates()
        layout = self.layout
        return _decision(self.data, "A.count_nonzero() of a scipy.sparse matrix",
                         lambda v: layout.build(v).count_nonzero(axis))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.data.dtype)

    @property
    def value(self) -> Any:
        """SciPy's matrix holding the plain stored values."""
        return self.layout.build(memory(self.data))

    def __getattr__(self, name):
        if name.startswith("_") or name in ("weak", "tape", "buffer", "level"):
            raise AttributeError(name)
        template = self.__dict__.get("layout")
        if template is not None and name in ("indices", "indptr", "offsets", "coords", "row",
                                             "col", "blocksize", "has_canonical_format",
                                             "has_sorted_indices"):
            template = self.layout.template
            if name == "offsets" and self.layout.diagonals is not None:
                # SciPy's diagonals, those holding a value that is not zero (its pattern is
                # the one its values choose; no slot moves)
                template = self.layout.build(settled(
                    self.data, "A.offsets of a scipy.sparse dia matrix whose diagonals its "
                               "nonzero values choose"))
            elif name not in ("has_canonical_format", "has_sorted_indices", "blocksize"):
                # (a bsr matrix's blocks are SciPy's)
                template = self._as_scipy_stores(f"A.{name}", pattern=True)
            found = getattr(template, name)
            if isinstance(found, np.ndarray):  # the pattern's: read-only
                found = found.view()
                found.flags.writeable = False
            return found
        if template is not None and isinstance(vars(TracedSparse).get(name), _OfSomeKinds):
            # (the method's __get__ found SciPy's matrix of this kind without it)
            raise AttributeError(f"'{template.kind.__name__}' object has no attribute '{name}'")
        raise UnsupportedAttributeError(
            f"{name} of a scipy.sparse matrix with traced values: mutad follows its products "
            "(A @ x, x @ A, A @ B, A.dot), solves, A.T, conversions, indexing, A.multiply, "
            "A.maximum, A.minimum, reshape, resize, sorted_indices, +, "
            "-, scalar * and /, abs, power, the ufuncs SciPy maps over the stored values "
            "(sqrt, expm1, log1p, sin, tanh, ...), sum(axis), mean, diagonal(k), trace, max(axis), "
            "min(axis), getrow, getcol, setdiag, conj, getH, nonzero, getnnz, comparisons (A > c), "
            "toarray() and .data. Compute with A.data, or with A.toarray() for a small matrix.")

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.ndim, np.shape) and len(args) == 1 and not kwargs:
            return self.ndim if func is np.ndim else self.shape
        if func in (np.real, np.imag) and len(args) == 1 and not kwargs:
            return self.real if func is np.real else self.imag  # (NumPy's: val.real)
        _refuse(f"np.{func.__name__} of a scipy.sparse matrix with traced values",
                "NumPy's functions read dense arrays: call A.toarray() first (a traced dense "
                "array), or compute with A.data.")

    def __getitem__(self, key):
        """SciPy's indexing of the slot numbers tells which stored value each entry of the
        result holds: a sparse result holds them (``A[1:-1, 1:-1]``, ``A[free][:, free]``),
        an entry is one (``A[i, j]``; 0 where none is stored)."""
        if _followed(key):
            if any(carries_derivative(x) for x in _leaves([key])):
                _refuse("indexing a scipy.sparse matrix with traced indices",
                        "indices are integers: pass them plain.")
            key = settled(key, "indexing a scipy.sparse matrix with indices the program "
                               "computes")
        numbered = self.layout.probe(np.arange(1.0, self.layout.valid.size + 1))[key]
        if not _sparse.issparse(numbered):
            if self.format != "dia" and not self.layout.template.has_canonical_format and \
                    len(np.unique(self.layout.keys())) != self.layout.valid.sum():
                # an entry stored more than once is their sum (SciPy adds them, leaving the
                # matrix as it is)
                summed = self.copy()
                summed.sum_duplicates()
                return summed[key]
            return _gather(self.data, np.rint(np.asarray(numbered)).astype(np.intp))
        return self._with(_relayout(self.data, self.layout, lambda m: m[key]))

    def __setitem__(self, key, value, warns=True):
        """SciPy's write of the entries ``key`` selects (``A[0, :] = 0``, ``A[0, 0] = 1``: a
        boundary condition), applied to the numbers of the stored values tells the pattern
        after it (SciPy stores the zeros it writes) and which entry holds which value: an old
        stored value, or one of those written. Where the pattern stays, the values are written
        in place (into the array SciPy would write into)."""
        if _followed(key):
            _refuse("indexing a scipy.sparse matrix with traced indices",
                    "indices are integers: pass them plain.")
        numbered = self.layout.probe(np.arange(1.0, self.layout.valid.size + 1))
        region = numbered[key]
        shape = np.shape(region) if _sparse.issparse(region) else ()
        count = math.prod(shape)
        labels = -1.0 - np.arange(count).reshape(shape)
        summed = []  # SciPy sums the duplicates of the matrix first where it writes one
        if self.format in ("csr", "csc"):
            numbered.sum_duplicates = lambda: summed.append(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _sparse.SparseEfficiencyWarning)
            try:
                numbered[key] = labels if shape else labels[()]
            except Exception as error:
                if not summed:
                    raise
                handled(error)
        if summed:
            self.sum_duplicates()  # as SciPy's does, in place; then its write
            return self.__setitem__(key, value, warns)
        # SciPy's own warnings (a write that adds an entry to a csr matrix), of its own matrix,
        # which leaves out the zeros of a dense one that the numbered pattern stores (decided
        # by the key and the pattern, which a replay holds: it warns again)
        if warns:  # (not setdiag's writes: SciPy's setdiag does not warn)
            reissued(operator.setitem, self.value, key, labels if shape else labels[()])
        written = np.reshape(np.broadcast_to(value, shape), (-1,))
        if not self.layout.padded and numbered.data.shape == self.layout.data_shape and \
                np.all(numbered.data[numbered.data > 0] == np.flatnonzero(
                    numbered.data > 0) + 1):  # the same pattern: in place
            where = numbered.data < 0
            np.put(self.data, np.flatnonzero(where), written[np.rint(
                -1.0 - numbered.data[where]).astype(np.intp)])
            if self.layout.droppable is not None:  # SciPy stores the zeros it writes
                self.layout = self.layout.dropping(self.layout.droppable & ~where)
            return
        self._relabelled(numbered, written)

    def _relabelled(self, numbered, written):
        """The pattern of ``numbered`` (SciPy's write applied to the numbers ``1, 2, ...`` of
        the stored values, the written values numbered ``-1, -2, ...``), each slot holding the
        stored value or the entry of ``written`` its number names."""
        ones = numbered.copy()
        ones.data[:] = 1.0
        layout = _Layout(ones)
        label = np.rint(np.reshape(numbered.asformat(layout.format).data, (-1,))).astype(np.intp)
        if self.format in ("csr", "csc"):
            # SciPy writes the entries it stores already into its array of stored values
            # (which may be the array it was built from), then inserts the others in new ones
            gone = np.setdiff1d(np.flatnonzero(self.layout.valid), label[label > 0] - 1)
            if len(gone):
                keys = layout.keys()
                order = np.argsort(keys)
                old_keys = self.layout.rows[gone] * self.layout.grid[1] + self.layout.cols[gone]
                at = np.flatnonzero(layout.valid)[order[np.searchsorted(keys, old_keys,
                                                                        sorter=order)]]
                np.put(self.data, gone, written[-1 - label[at]])
        old = np.concatenate([np.reshape(self.data, (-1,)), written * np.ones(written.shape)])
        source = np.where(label > 0, label - 1, self.layout.valid.size - 1 - label)
        if self.layout.droppable is not None:
            # an entry of a dense matrix that stays SciPy leaves out while it is zero; one
            # written is stored, zero or not
            at = np.maximum(label - 1, 0)
            grouping = self.layout.grouping()
            layout = layout.dropping(np.where(label > 0, self.layout.droppable[at], False),
                                     None if grouping is None else np.where(
                                         label > 0, grouping[at],
                                         grouping.max() + 1 + np.arange(len(at))))
        self.layout, self.data = layout, np.reshape(old[source], layout.data_shape)

    def tolil(self, copy: bool = False) -> Any:
        """A ``lil`` matrix of its entries, each a traced value (``_Assembled``)."""
        if self.format == "csr":
            self.sum_duplicates()  # as SciPy's tolil of a csr matrix does
        return self._assembled(lil_array, lil_matrix)

    def todok(self, copy: bool = False) -> Any:
        """A ``dok`` matrix of its entries, each a traced value (``_Assembled``)."""
        return self._assembled(dok_array, dok_matrix)

    def _assembled(self, array_kind: Any, matrix_kind: Any) -> Any:
        """A matrix of ``array_kind`` (``matrix_kind`` for a matrix) holding its entries, the
        duplicates of a position summed."""
        if self.ndim == 1 and array_kind is not dok_array:  # (SciPy's lil is 2-d only)
            _refuse(f"a 1-d {array_kind.__name__} of traced values",
                    "keep the 1-d array in coo or csr format (coo_array(x)), which mutad "
                    "follows, or give it two dimensions (x[None, :]).")
        kind = array_kind if isinstance(self.layout.template, _sparse.sparray) else matrix_kind
        lil = kind.assembled(self.shape)
        valid = self.layout.valid
        values = np.reshape(self.data, (-1,))[valid]
        for k, (i, j) in enumerate(zip(self.layout.rows[valid].tolist(),
                                        self.layout.cols[valid].tolist())):
            point = (j,) if self.ndim == 1 else (i, j)  # (a 1-d array: the row (1, n))
            key = _key_of(point)
            lil[key] = lil[key] + values[k] if point in lil.entries else values[k]
        return lil

    def eliminate_zeros(self) -> None:
        """SciPy's leaves its stored zeros out, in place; a traced matrix keeps them (their
        derivatives are there), left out of what SciPy's matrix tells (``nnz``, ``data``), as
        a dense matrix's zeros are: every stored entry that is zero is droppable."""
        if np.any(memory(self.data)[self.layout.valid] == 0):
            self._refuse_moving_callers_arrays("eliminate_zeros()", values=True)
        self.layout = self.layout.dropping(self.layout.valid.copy())

    def _refuse_moving_callers_arrays(self, what, values):
        """Refuse an in-place change of the pattern that SciPy makes in the caller's arrays
        its matrix keeps (the index arrays it was built from; with ``values``, the array of
        stored values too, which SciPy compacts): a traced matrix's pattern is its own."""
        if self.format in ("csr", "csc", "bsr") and (  # (coo's makes new arrays)
                self._callers_indices or (values and self._callers_values)):
            _refuse(f"{what} of a scipy.sparse matrix with traced values that keeps the arrays "
                    "it was built from, which SciPy changes in place",
                    "build it from copies (csr_matrix((data.copy(), indices.copy(), "
                    "indptr.copy()))) or pass copy=True.")

    def __array__(self, dtype=None, copy=None):
        _refuse("a scipy.sparse matrix with traced values converted to a NumPy array",
                "call A.toarray() (a traced dense array).")

    def __repr__(self):
        return (f"<traced {self.layout.kind.__name__} of shape {self.shape}, "
                f"{self.layout.template.nnz} stored>")

    def _with(self, layout_and_data):
        return TracedSparse(*layout_and_data)

    # relayouts ---------------------------------------------------------------------------

    def transpose(self, axes: Any = None, copy: bool = False) -> TracedSparse:
        if axes is not None:
            self.layout.template.transpose(axes)  # SciPy's error
        result = self._with(_relayout(self.data, self.layout, lambda m: m.transpose(),
                                      shares=True))
        return self._share(result) if result.data is self.data else result

    T = property(transpose)

    def reshape(self, *args: Any, **kwargs: Any) -> TracedSparse:
        """SciPy's ``A.reshape(shape)``, applied to the slot numbers, tells where each stored
        value goes (``_relayout``); the matrix itself where SciPy's is (the same shape)."""
        probe = self.layout.probe()
        reshaped = probe.reshape(*args, **kwargs)  # (SciPy's errors too)
        if reshaped is probe:
            return self
        return self._with(_relayout(self.data, self.layout,
                                    lambda m: m.reshape(*args, **kwargs)))

    def resize(self, *shape: Any) -> None:
        """SciPy's ``A.resize(shape)``, in place: the entries outside the new shape dropped,
        the new ones empty (``_relayout`` of it). Refused where another matrix shares the
        stored values (``A.T``), which SciPy's slices of its arrays would go on sharing."""
        if self._peers is not None and any(
                peer() is not None and peer() is not self for peer in self._peers):
            _refuse("A.resize() of a scipy.sparse matrix with traced values that shares its "
                    "stored values with another (A.T)", "resize a copy: B = A.copy(), then "
                    "B.resize(...).")
        probe = self.layout.probe()
        probe.resize(*shape)  # (SciPy's errors)
        self.layout, self.data = _relayout(self.data, self.layout,
                                           lambda m: (m.resize(*shape), m)[1])

    def asformat(self, format: str | None, copy: bool = False) -> TracedSparse:
        if format is None or format == self.format:
            return self.copy() if copy else self
        if format in ("lil", "dok"):  # (SciPy's asformat calls tolil, todok)
            return self.tolil(copy=copy) if format == "lil" else self.todok(copy=copy)
        if format not in FORMATS:
            self.layout.probe().asformat(format)  # SciPy's error for a format it does not know
            _refuse(f"asformat({format!r}) of a scipy.sparse matrix with traced values",
                    f"mutad follows the formats {', '.join(FORMATS)}.")
        if self.format == "coo" and format == "dia":
            self.sum_duplicates()  # as SciPy's does
        if format == "bsr":
            return self.tobsr(copy=copy)
        return self._with(_relayout(self.data, self.layout, lambda m: m.asformat(format)))

    def tocsr(self, copy: bool = False) -> TracedSparse:
        return self.asformat("csr", copy)

    def tocsc(self, copy: bool = False) -> TracedSparse:
        return self.asformat("csc", copy)

    def tocoo(self, copy: bool = False) -> TracedSparse:
        return self.asformat("coo", copy)

    def todia(self, copy: bool = False) -> TracedSparse:
        return self.asformat("dia", copy)

    def tobsr(self, blocksize: tuple[int, int] | None = None,
              copy: bool = False) -> TracedSparse:
        if self.format == "bsr" and blocksize in (None, self.layout.template.blocksize):
            return self.copy() if copy else self
        if blocksize is None and self.layout.droppable is not None:
            # SciPy chooses the blocks by the entries it stores, which leave out zeros
            blocksize = _decision(
                self.data, "tobsr() of a scipy.sparse matrix that leaves out its zero values, "
                           "whose blocks its nonzero values choose",
                lambda v: self.layout.build(v).tobsr().blocksize)
        return self._with(_relayout(self.data, self.layout, lambda m: m.tobsr(blocksize)))

    def copy(self) -> TracedSparse:
        return TracedSparse(self.layout, self.data.copy())

    def toarray(self, order: str | None = None, out: Any = None) -> Any:
        if out is not None:
            # SciPy zeroes out and fills it: the dense array written into it, after SciPy's
            # checks of it (order, shape, dtype, contiguity) on a plain array laid out alike
            buffer = memory(out) if isinstance(out, Tracer) else out
            if not isinstance(buffer, np.ndarray):
                raise TypeError(f"out must be an array, not {type(out).__name__}")
            like = np.empty(buffer.shape, buffer.dtype, order="F" if buffer.flags.f_contiguous
                            and not buffer.flags.c_contiguous else "C")
            if not (buffer.flags.c_contiguous or buffer.flags.f_contiguous):
                like = np.empty(buffer.shape[:-1] + (2 * buffer.shape[-1],),
                                buffer.dtype)[..., ::2] if buffer.ndim else like
            self.layout.template.toarray(order, like)
            out[...] = _dense(self.layout, self.data, None)
            return out
        dense = _dense(self.layout, self.data, order)
        if type(dense) is np.ndarray and ACTIVE.running:
            # of constant values: a constant the differentiation follows, as np.zeros's is
            # (a traced value written into it is followed), which a replay makes again
            dense = allocate(dense, (_dense, (self.layout, self.data, order), {}))
        return dense

    def todense(self, order: str | None = None, out: None = None) -> Any:
        if isinstance(self.layout.template, _sparse.spmatrix):  # SciPy's np.matrix
            if out is not None:
                _refuse("todense(out=...) of a scipy.sparse matrix with traced values",
                        "use the matrix it returns.")
            return TracedMatrix(self.toarray(order))
        return self.toarray(order, out)

    # reductions --------------------------------------------------------------------------

    def sum(self, axis: int | None = None, dtype: None = None, out: None = None) -> Any:
        if dtype is not None or out is not None:
            _refuse("sum(dtype=..., out=...) of a scipy.sparse matrix with traced values",
                    "leave them out (the values are float64) and use the array it returns.")
        if axis is None:
            self.sum_duplicates()  # SciPy's sum of all entries does it first
        elif isinstance(self.layout.template, _sparse.spmatrix):
            # SciPy's np.matrix of the sums: a traced matrix of its values
            self.layout.template.sum(axis)  # SciPy's error for another axis
            return TracedMatrix(_reduction(self.data, self.layout, "matrix sum", axis))
        return _reduction(self.data, self.layout, "sum", axis)

    def mean(self, axis: int | None = None, dtype: None = None, out: None = None) -> Any:
        """SciPy's mean: the matrix times ``1 / n`` (``n`` the shape's elements along
        ``axis``, the zeros too), summed in SciPy's intermediate dtype (which some of its
        sums along an axis add otherwise than ``sum()`` does): SciPy's values."""
        if dtype is not None or out is not None:
            _refuse("mean(dtype=..., out=...) of a scipy.sparse matrix with traced values",
                    "leave them out (the values are float64) and use the array it returns.")
        if axis is not None and isinstance(self.layout.template, _sparse.spmatrix):
            self.layout.template.mean(axis)  # SciPy's error for another axis
            return TracedMatrix(_reduction(self.data, self.layout, "matrix mean", axis))
        return _reduction(self.data, self.layout, "mean", axis)

    def diagonal(self, k: int = 0) -> Any:
        return _reduction(self.data, self.layout, "diagonal", k)

    def max(self, axis: int | None = None, out: None = None, *, explicit: bool = False) -> Any:
        """SciPy's largest entry: of the stored values (repeated ones added first, as SciPy's
        does) and, unless ``explicit``, the zeros the matrix does not store; its gradient goes
        to the entries that attain it, split evenly between ties (np.max's rule: a decision
        taken in the forward pass), an unstored zero being a constant."""
        return self._extreme("max", axis, out, explicit)

    def min(self, axis: int | None = None, out: None = None, *, explicit: bool = False) -> Any:
        """SciPy's smallest entry, as ``max``."""
        return self._extreme("min", axis, out, explicit)

    def _extreme(self, name, axis, out, explicit):
        if out is not None:
            _refuse(f"{name}(out=...) of a scipy.sparse matrix with traced values",
                    "leave it out and use the sparse matrix it returns.")
        # SciPy's errors (no entry, another axis), and its kind of result
        getattr(self.layout.probe(), name)(axis=axis, explicit=explicit)
        if self.ndim == 1:
            axis = None  # (a 1-d array's only axis: its extreme)
        # SciPy's coo sums in place for the whole matrix's extreme, a copy for its lines'
        summed = self if self.format == "coo" and axis is None else self.copy()
        summed.sum_duplicates()
        if axis is not None:
            # SciPy's coo matrix (a row or a column; an array's: 1-d) of each line's extreme,
            # the zeros not stored among its entries unless ``explicit`` (a line storing none:
            # 0), those that are zero left out: the dense array's (no repeated entries left to
            # add), made sparse as SciPy makes a dense array sparse
            dense = summed.toarray()
            if explicit:
                numbered = np.arange(1.0, self.layout.valid.size + 1)
                stored = self.layout.probe(numbered).toarray() != 0
                dense = np.where(stored, dense, -np.inf if name == "max" else np.inf)
            keep = self._is_matrix()
            lines = getattr(np, name)(dense, axis=axis, keepdims=keep)
            if explicit:
                lines = np.where(np.any(stored, axis=axis, keepdims=keep), lines, 0.0)
            made = RULES[SCIPY["coo_matrix" if keep else "coo_array"]].route(lines)
            # (SciPy's, made of its lines' coordinates, is not marked canonical)
            layout = made.layout.dropping(made.layout.droppable, made.layout.groups)
            layout.template = layout.template.copy()
            layout.template.has_canonical_format = False
            made.layout = layout
            return made
        layout = summed.layout
        values = np.reshape(summed.data, (-1,))[layout.valid]
        if not explicit and int(np.count_nonzero(layout.valid)) < math.prod(self.shape):
            values = np.concatenate([values, np.zeros(1)])  # the zeros it does not store
        return getattr(np, name)(values)

    def setdiag(self, values: Any, k: int = 0) -> None:
        """SciPy's ``setdiag``: the entries of diagonal ``k`` written with ``values`` (a number
        for all; an array's first entries, as many as both have), one entry at a time as
        ``A[i, i + k] = v`` writes it (the pattern grows where the diagonal is not stored)."""
        if self.format == "dia":
            _refuse("setdiag of a scipy.sparse dia matrix with traced values",
                    "convert it first (A.tocsr()), which mutad follows.")
        if self.format == "bsr":
            self.layout.probe().setdiag(0.0, k)  # SciPy's error: its bsr takes no setdiag
            _refuse("setdiag of a scipy.sparse bsr matrix with traced values",
                    "convert it first (A.tocsr()), which mutad follows.")
        rows, cols = _diagonal_positions(self.shape, k)
        values = lists_as_arrays([values])[0]  # a list of traced numbers: NumPy's array of it
        if self.format == "coo":
            # SciPy's coo setdiag drops the entries of the diagonal and appends the new ones
            # (coo takes no A[i, j] = v): SciPy's, on the numbers of the stored values
            count = len(rows) if np.ndim(values) == 0 else min(len(rows), len(values))
            numbered = self.layout.probe(np.arange(1.0, self.layout.valid.size + 1))
            numbered.setdiag(-1.0 - np.arange(count), k)
            written = values * np.ones(count) if np.ndim(values) == 0 else values[:count]
            self._relabelled(numbered, written)
            return
        if np.ndim(values) == 0:
            values = [values] * len(rows)
        for i, j, value in zip(rows.tolist(), cols.tolist(), values):  # one entry at a time
            self.__setitem__((i, j), value, False)  # (warns=False)

    # products ----------------------------------------------------------------------------

    def __matmul__(self, other):
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            other = _lift(other)
            if self.ndim == other.ndim == 1:
                self.layout.probe() @ other.layout.probe()  # (SciPy's error for other sizes)
                return _inner(self.data, other.data, left=self.layout, right=other.layout)
            pairs = _Pairs(self.layout, other.layout)
            out = _dropping(pairs.out)
            if out.format == "bsr":
                out = self._blocks_of_product(other, pairs.out)
            return TracedSparse(out, _sparse_product(self.data, other.data, pairs=pairs))
        if not _dense_operand(other):
            return NotImplemented
        if np.ndim(other) == 0:
            raise ValueError("Scalar operands are not allowed, use '*' instead")
        return _times(self.data, other, self.layout)

    def _blocks_of_product(self, other, out):
        """SciPy's bsr product keeps every block of the products of its operands' blocks,
        zero or not: of the blocks they store, which, where one leaves out blocks that are
        zero, the values at hand tell (a replay, which would keep them, is not recorded)."""
        if not (self.layout.drops or other.layout.drops):
            return out
        what = "a bsr product of a matrix that leaves out its blocks that are zero"
        product = self.layout.build(settled(self.data, what)) @ other.layout.build(
            settled(other.data, what))
        rows = np.repeat(np.arange(len(product.indptr) - 1), np.diff(product.indptr))
        columns = out.shape[1]  # (more than any block column's index)
        stored = np.isin(out.major * columns + out.template.indices[:len(out.major)],
                         rows * columns + product.indices[:len(rows)])
        return out.dropping(np.repeat(~stored, np.prod(out.data_shape[1:])))

    def __rmatmul__(self, other):
        if not _dense_operand(other):
            return NotImplemented
        if np.ndim(other) == 0:
            raise ValueError("Scalar operands are not allowed, use '*' instead")
        return _times(self.data, other, self.layout, right=True)

    def dot(self, other: Any) -> Any:
        if _is_scalar(other):
            return self * other
        return self @ other

    def _is_matrix(self):
        return isinstance(self.layout.template, _sparse.spmatrix)

    def _keeping_stored(self, fresh=True):
        """The layout of a result SciPy computes from this matrix's stored entries one by one
        (a product with a number or a dense array, a power, a map of the stored values): it
        stores each entry this matrix stores, whatever its new value (a zero among them), and
        none of those this matrix leaves out by their value (the zeros of a dense array, of a
        sum), whose new values are zeros too. Which entries those are is a decision on the
        values, which a replay guards; their slots stay (for their derivative), left out by
        their new value, the only ones that are. ``fresh``: the result is a new matrix
        (SciPy's ``_with_data``), a coo one not known to be canonical."""
        layout = self._fresh_layout() if fresh else self.layout
        if not layout.drops:
            return layout
        out = _decision(self._values, "the entries a scipy.sparse matrix made from a dense "
                                      "array stores", layout.left_out)
        return _left_out_as(layout, out)

    def _fresh_layout(self):
        """The layout of SciPy's new matrix of this one's pattern (``_with_data``): a coo one
        not known to be canonical."""
        layout = self.layout
        if layout.format == "coo" and layout.template.has_canonical_format:
            layout = layout.dropping(layout.droppable, layout.groups)  # (a twin)
            layout.template = layout.template.copy()  # (SciPy's copy: not canonical)
        return layout

    def __mul__(self, other):
        if _is_scalar(other):
            kept = self._keeping_stored()
            return TracedSparse(kept, self.data * _finite_where_left_out(other, kept))
        if self._is_matrix():  # spmatrix: * is the matrix product
            return self @ other
        return self.multiply(other)

    def __rmul__(self, other):
        if _is_scalar(other):
            kept = self._keeping_stored()
            return TracedSparse(kept, _finite_where_left_out(other, kept) * self.data)
        if self._is_matrix():
            return other @ self
        return self.multiply(other)

    def __truediv__(self, other):
        if not _is_scalar(other) and _dense_operand(other):
            return self.multiply(np.divide(1, other))  # SciPy's: the product with the reciprocal
        if not _is_scalar(other):
            _refuse("a scipy.sparse matrix with traced values divided by a sparse matrix",
                    "multiply by the reciprocal of its dense array, A.multiply(1 / B.toarray()).")
        kept = self._keeping_stored()  # SciPy's: times 1/c
        return TracedSparse(kept, self.data * _finite_where_left_out(1 / other, kept))

    # A *= c, A /= c: SciPy scales the stored values in place, so that every name for the
    # matrix (and A.T, which shares them) sees it; with an array, Python rebinds the name.

    def __imul__(self, other):
        if not _is_scalar(other):
            return NotImplemented
        self.layout = self._keeping_stored(fresh=False)
        values = self._values
        values *= _finite_where_left_out(other, self.layout)
        return self

    def __itruediv__(self, other):
        if not _is_scalar(other):
            return NotImplemented
        self.layout = self._keeping_stored(fresh=False)
        values = self._values
        values *= _finite_where_left_out(1.0 / other, self.layout)  # the reciprocal, as SciPy's
        return self

    def __neg__(self):
        return TracedSparse(self._fresh_layout(), -self.data)

    def conjugate(self, copy: bool = True) -> TracedSparse:
        """SciPy's: of real values (the only ones mutad follows here) a copy, or the matrix
        itself."""
        return self.copy() if copy else self

    conj = conjugate

    @property
    def real(self) -> TracedSparse:
        """SciPy's: of real values, a matrix of the same pattern whose stored values are this
        one's (SciPy's ``_with_data(A.data.real)``, which shares them)."""
        return self._share(TracedSparse(self.layout, self._values))

    @property
    def imag(self) -> Any:
        """SciPy's: of real values, a matrix of the pattern SciPy stores holding zeros,
        constants (SciPy's ``_with_data(A.data.imag)``: read-only). Of a matrix made from a
        dense array, that pattern leaves out its zero values: a decision on them, which a
        replay recording the call is refused."""
        layout = self.layout
        if layout.drops:
            layout = _Layout(layout.build(settled(self.data, "A.imag of a scipy.sparse matrix "
                                                  "made from a dense array")))
        zeros = np.zeros(layout.data_shape)
        zeros.flags.writeable = False
        return TracedSparse(layout, zeros)

    def getH(self) -> TracedSparse:
        """SciPy's (a matrix's): ``A.conjugate().transpose()``."""
        if not hasattr(self.layout.template, "getH"):  # sparse arrays have none: SciPy's error
            raise AttributeError(f"{type(self.layout.template).__name__} has no attribute "
                                 "'getH'")
        return self.conjugate().transpose()

    def nonzero(self) -> tuple[Any, Any]:
        """SciPy's rows and columns of the stored entries that are not zero: a decision
        taken on the values, which a replay guards."""
        layout = self.layout
        return _decision(self.data, "A.nonzero() of a scipy.sparse matrix, which leaves out the "
                                    "zero entries", lambda v: layout.build(v).nonzero())

    def _compared(self, other, comparison):
        """SciPy's comparison (``A > 0.5``, ``A != B``): a matrix of booleans without a
        derivative, a decision on the values, which a replay does not take again."""
        what = "a comparison of a scipy.sparse matrix"
        if isinstance(other, TracedSparse):
            other = other.layout.build(settled(other.data, what))
        return comparison(self.layout.build(settled(self.data, what)), settled(other, what))

    __hash__ = object.__hash__  # (mutad keys its own tables by the traced matrix)

    def __pos__(self):
        +self.layout.probe()  # SciPy's error: its matrices have no unary +
        return self

    def __abs__(self):
        self.sum_duplicates()  # as SciPy's does
        return TracedSparse(self._fresh_layout(), np.abs(self.data))

    def getrow(self, i: int) -> TracedSparse:
        """SciPy's ``A.getrow(i)`` (a matrix's, 1 x n): csr and csc copy the row's stored
        values in their order (a submatrix); the other formats take their base's product of a
        selector by ``A``, each entry 1.0 times a stored value, in the format SciPy returns."""
        return self._line(i, 0, "getrow")

    def getcol(self, j: int) -> TracedSparse:
        """SciPy's ``A.getcol(j)`` (a matrix's, m x 1): a submatrix, or ``A`` times a
        selector, as :meth:`getrow`."""
        return self._line(j, 1, "getcol")

    def _line(self, k, axis, name):
        template = self.layout.template
        if not hasattr(template, name):  # sparse arrays have none: SciPy's error
            raise AttributeError(f"{type(template).__name__} has no attribute {name!r}")
        size = self.shape[axis]
        k = int(k)
        if k < 0:
            k += size
        if not 0 <= k < size:
            raise IndexError("index out of bounds")
        if self.format in ("csr", "csc"):
            # SciPy's own selection moves the stored values, in an order that a product would
            # not keep (and its sums, A.getrow(i) @ x, would round otherwise)
            return self._with(_relayout(self.data, self.layout,
                                        lambda m: getattr(m, name)(k)))
        if axis == 0:
            selector = _sparse.csr_matrix(([1.0], ([0], [k])), shape=(1, size))
            line = selector @ self
        else:
            selector = _sparse.csc_matrix(([1.0], ([k], [0])), shape=(size, 1))
            line = self @ selector
        form = getattr(self.layout.probe(), name)(k).format  # the format SciPy's gives
        return line if line.format == form else line.asformat(form)

    def _stored_values_map(self, ufunc):
        """SciPy's ``A.sqrt()``, ``A.sin()``, ... (``_data._ufuncs_with_fixed_point_at_zero``):
        the ufunc of each stored value (0 at 0, so the zeros not stored stay zeros), after the
        duplicates are summed as SciPy's ``_deduped_data`` sums them, in the same pattern."""
        if not hasattr(self.layout.template, ufunc.__name__):  # SciPy's error (lil, dok)
            raise AttributeError(f"{type(self.layout.template).__name__} has no attribute "
                                 f"{ufunc.__name__!r}")
        if hasattr(self.layout.template, "sum_duplicates"):
            self.sum_duplicates()
        valid = np.reshape(self.layout.valid, np.shape(self.data))
        if ufunc is np.sqrt and self.layout.drops:
            # the zeros of a dense matrix that SciPy leaves out: it takes no root of them, and
            # the root's partial there is infinite (an entry moving through zero leaves sqrt's
            # domain: no derivative), so they stay SciPy's unstored zeros, constants (the
            # branch SciPy takes, as a replay's recomputed mask takes it at each call), where
            # the other maps' finite partials at zero are their derivatives (of this call's
            # values: a replay takes them again, where the plain ones would be the recorded
            # call's, also where the zeros it leaves out moved)
            out = np.reshape(self.layout.left_out(self.data), np.shape(self.data))
            kept = valid & ~out
            root = ufunc(np.where(kept, self.data, 0.5))
            return TracedSparse(self._fresh_layout(),
                                np.where(kept, root, stop_gradient(self.data)))
        kept = self._keeping_stored()  # (rint(0.3), floor(0.3): stored zeros)
        return TracedSparse(kept, self._mapped(ufunc))

    def power(self, n: Any, dtype: None = None) -> TracedSparse:
        """Each stored value to the power ``n`` (a number: the zeros it does not store stay
        zeros, as in SciPy, which refuses a power that would not keep them)."""
        if dtype is not None or not np.isscalar(n):
            _refuse("power(n, dtype=...) of a scipy.sparse matrix with traced values, or a "
                    "traced or array exponent", "pass a number n and no dtype.")
        self.layout.probe().power(n)  # SciPy's error for n <= 0
        self.sum_duplicates()  # as SciPy's does
        kept = self._keeping_stored()  # (0 ** nan is nan: those SciPy leaves out, 0 ** 2)
        return TracedSparse(kept, self._mapped(np.power, _finite_where_left_out(n, kept, 2.0)))

    def _mapped(self, ufunc, *constants):
        """``ufunc(self.data, *constants)``, a dia matrix's slots outside it too (SciPy maps
        them, and the user's code may read them in ``.data``), whose padding zeros, sqrt's
        infinite partial there, get a derivative only where something reads them
        (``_padding_map``); the slots inside at a safe 0.5 there."""
        valid = np.reshape(self.layout.valid, np.shape(self.data))
        if valid.all():
            return ufunc(self.data, *constants)
        inside = ufunc(np.where(valid, self.data, 0.5), *constants)
        return np.where(valid, inside, _padding_map(self.data, ufunc, *constants))

    def __pow__(self, n: Any) -> TracedSparse:
        if isinstance(self.layout.template, _sparse.sparray):  # sparse arrays: elementwise
            return self.power(n)
        if not (isinstance(n, (int, np.integer)) and n >= 1) or self.shape[0] != self.shape[1]:
            self.layout.probe() ** n  # SciPy's error
            _refuse(f"A ** {n!r} of a scipy.sparse matrix with traced values",
                    "a power n >= 1 of a square matrix is followed: write A @ A ...")
        result = self
        for _ in range(n - 1):
            result = result @ self
        return result

    def astype(self, dtype: Any, casting: str = "unsafe", copy: bool = True) -> TracedSparse:
        if np.dtype(dtype) != np.float64:
            _refuse(f"astype({dtype!r}) of a scipy.sparse matrix with traced values",
                    "mutad follows float64 values.")
        return self.copy() if copy else self

    def trace(self, offset: int = 0) -> Any:
        return self.diagonal(offset).sum()

    def multiply(self, other: Any) -> TracedSparse | Any:
        other = _matrix_operand(other)  # an np.matrix of traced values: its array
        if type(other) is np.matrix:  # SciPy multiplies by its array (A > D of a dense D's)
            other = other.view(np.ndarray)
        if _is_scalar(other):
            return self * other
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            other = _lift(other)
            result = self.layout.probe().multiply(other.layout.probe())
            if not _sparse.issparse(result) or other.shape != self.shape:
                _refuse("A.multiply(B) of sparse matrices of different shapes (with traced "
                        "values)", "broadcast B: B of A's shape, or a dense B.")
            out = _Layout(result)
            if out.padded and not self.layout.drops and not other.layout.drops:
                return TracedSparse(out, self._padded_product(
                    other.data, lambda mine: mine.multiply(other.layout.every()),
                    lambda ones: ones.multiply(other.layout.every(numbered=True))))
            return TracedSparse(_dropping(out), _summed(self.data, self.layout, out)
                                * _summed(other.data, other.layout, out))
        if not _dense_operand(other) or np.broadcast_shapes(np.shape(other),
                                                             self.shape) != self.shape:
            _refuse("A.multiply(B) of a scipy.sparse matrix with traced values and an array of "
                    f"shape {np.shape(other)}", f"pass B of a shape that broadcasts to "
                    f"{self.shape}.")
        result = self.layout.probe().multiply(np.ones(np.shape(other)))
        if not _sparse.issparse(result):
            return self.toarray() * other
        # SciPy's: this matrix's stored entries (tocoo's), each times B's, zero or not
        out = _Layout(result)
        kept = self._keeping_stored()
        if out.padded and not kept.drops:
            shape = np.shape(other)
            return TracedSparse(out, self._padded_product(
                other, lambda mine: mine.multiply(np.ones(shape)),
                lambda ones: ones.multiply(np.arange(1.0, np.prod(shape) + 1).reshape(shape))))
        if kept.drops:
            slots_in, slots_out = _summing_slots(kept, out)
            left = np.zeros(out.valid.size, bool)
            left[slots_out] = kept.left_out(np.zeros(kept.data_shape))[slots_in]
            out = _left_out_as(out, left)
        dense = np.broadcast_to(other, self.shape)
        values = out.at(dense)
        if out.padded:
            values = np.where(out.valid, values, 0.0)
        values = _finite_where_left_out(np.reshape(values, out.data_shape), out)
        return TracedSparse(out, _summed(self.data, self.layout, out) * values)

    def _padded_product(self, other, by_ones, by_numbers):
        """SciPy's stored values of this dia matrix's product with ``other`` (the stored
        values of another dia matrix, or a dense array) where its result is a dia matrix with
        slots outside the matrix: SciPy multiplies whole diagonals, so those slots hold the
        product of values outside both matrices (the user's code may read them in ``.data``),
        and so do mutad's. Which slot of each operand a result's slot multiplies, SciPy's
        product of slot numbers with ones tells: ``by_ones(numbered)``, this matrix's numbers
        times ``other``'s ones, ``by_numbers(ones)``, its ones times ``other``'s numbers."""
        mine = np.rint(by_ones(self.layout.every(numbered=True)).data).astype(np.intp) - 1
        theirs = np.rint(by_numbers(self.layout.every()).data).astype(np.intp) - 1
        return np.reshape(self.data, (-1,))[mine] * np.reshape(other, (-1,))[theirs]

    def maximum(self, other: Any) -> TracedSparse | Any:
        """SciPy's ``A.maximum(B)``: see :meth:`_extremum`."""
        return self._extremum(other, np.maximum, "maximum")

    def minimum(self, other: Any) -> TracedSparse | Any:
        """SciPy's ``A.minimum(B)``: see :meth:`_extremum`."""
        return self._extremum(other, np.minimum, "minimum")

    def _extremum(self, other, ufunc, name):
        """SciPy's ``A.maximum(B)`` (``minimum``), as SciPy computes it: of two sparse
        matrices, the ufunc of their summed values at each entry either stores (0 where one
        stores none), the zeros it gives dropped as SciPy drops them; of a number that keeps
        the zeros SciPy does not store (``maximum`` with c <= 0, ``minimum`` with c >= 0), the
        ufunc of each stored value of the summed matrix (the zeros it gives left out, as
        SciPy's); of another number, of every entry (SciPy stores them all, with its warning);
        of an array, of the dense matrix. Ties are the ufunc's (the gradient to both values)."""
        other = _matrix_operand(other)
        probe = self.layout.probe()
        if not hasattr(probe, name):  # SciPy's error
            raise AttributeError(f"{type(probe).__name__} has no attribute {name!r}")
        if self.format not in ("csr", "csc"):  # SciPy's of the csr matrix, in its format
            plain = memory(other) if not isinstance(other, TracedSparse) else \
                other.layout.probe()
            result = getattr(self.tocsr(), name)(other)
            form = getattr(getattr(probe, name)(plain), "format", None)
            return result.asformat(form) if form and result.format != form else result
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            other = _lift(other)
            union = probe + other.layout.probe()  # (ones: no entry cancels)
            out = _Layout(union.asformat(getattr(probe, name)(other.layout.probe()).format))
            return TracedSparse(_dropping(out), ufunc(_summed(self.data, self.layout, out),
                                                      _summed(other.data, other.layout, out)))
        if _is_scalar(other):
            # (a decision on a traced number's value, which a replay guards: compared by
            # NumPy's traced comparison, not on its plain value, which a recording does not see)
            keeps_zeros = bool(other <= 0 if name == "maximum" else other >= 0)
            if keeps_zeros:
                self.sum_duplicates()  # as SciPy's does; then it leaves out the zeros
                return TracedSparse(_dropping(self.layout), ufunc(self.data, other))
            out = _Layout(getattr(probe, name)(memory(other)))  # (SciPy's warning)
            dense = self.toarray()
            return TracedSparse(out, np.reshape(ufunc(out.at(dense), other),
                                                out.data_shape))
        if not _dense_operand(other):
            _refuse(f"A.{name}(B) of a scipy.sparse matrix with traced values and "
                    f"{type(other).__name__}", "pass a number, an array or a sparse matrix.")
        y = ufunc(self.toarray(), other)
        if not self._is_matrix():
            return y
        # an spmatrix's with an array is SciPy's np.matrix: SciPy's own of the values decides
        # its shape, and must equal the array's
        plain = getattr(self.value, name)(memory(other) if wrapped(other) else other)
        return _matrix_results(y, plain, f"A.{name}(B) of an spmatrix and a dense array")

    def _plus(self, other, sign, reflected=False):
        if reflected and sign > 0 and isinstance(other, (_sparse.sparray, _sparse.spmatrix)) \
                and other.format == "dok":  # SciPy's dok + sparse: a dok matrix
            return _dok_plus(other, self)
        if isinstance(other, (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            other = _lift(other)
            result = self.layout.probe() + other.layout.probe()
            out = _Layout(result)
            mine, theirs = (_summed(self.data, self.layout, out),
                            _summed(other.data, other.layout, out))
            if reflected:
                return TracedSparse(_dropping(out), theirs - mine if sign < 0 else theirs + mine)
            return TracedSparse(_dropping(out), mine - theirs if sign < 0 else mine + theirs)
        if _is_scalar(other) and not wrapped(other) and other == 0:
            return self.copy() if sign > 0 or not reflected else -self
        if _dense_operand(other) and np.ndim(other) >= 1:
            dense = self.toarray()
            if reflected:
                y = other - dense if sign < 0 else other + dense
            else:
                y = dense - other if sign < 0 else dense + other
            if not self._is_matrix():
                return y
            # an spmatrix's sum with an array is SciPy's np.matrix: SciPy's own sum of the
            # values decides its shape, and must equal the array's
            plain = memory(other) if wrapped(other) else other
            plain = (plain - self.value if sign < 0 else plain + self.value) if reflected else (
                self.value - plain if sign < 0 else self.value + plain)
            return _matrix_results(y, plain, "an spmatrix plus a dense array")
        _refuse("a scipy.sparse matrix with traced values plus a number",
                "SciPy refuses it too: add it to A.data, or to A.toarray().")

    def __add__(self, other):
        return self._plus(other, 1)

    def __radd__(self, other):
        return self._plus(other, 1, reflected=True)

    def __sub__(self, other):
        return self._plus(other, -1)

    def __rsub__(self, other):
        return self._plus(other, -1, reflected=True)


WRAPPERS.update((TracedMatrix, TracedSparse))  # (their values: the plain matrices they stand for)


def _stored_values_method(ufunc):
    def method(self) -> TracedSparse:
        return self._stored_values_map(ufunc)

    method.__name__ = method.__qualname__ = ufunc.__name__
    method.__doc__ = f"SciPy's ``A.{ufunc.__name__}()``: np.{ufunc.__name__} of each stored value."
    return method


for _ufunc in _sparse._data._ufuncs_with_fixed_point_at_zero:
    setattr(TracedSparse, _ufunc.__name__, _stored_values_method(_ufunc))


class _OfSomeKinds:
    """A method of :class:`TracedSparse` that SciPy's matrices of some formats and kinds lack
    (a lil matrix's ``max``, a dia matrix's ``eliminate_zeros``, a csr_array's ``getrow``):
    the user's code gets SciPy's AttributeError there (``hasattr`` answers as of SciPy's
    matrix), mutad's own code the method."""

    def __init__(self, name, method):
        self.name, self.method = name, method

    def __get__(self, instance, owner=None):
        if instance is not None and not internal(sys._getframe(1)):
            kind = getattr(instance.__dict__.get("layout"), "kind", None)
            if isinstance(kind, type) and not hasattr(kind, self.name):
                raise AttributeError(f"'{kind.__name__}' object has no attribute '{self.name}'")
        return self.method.__get__(instance, owner)


for _name, _method in list(vars(TracedSparse).items()):
    if not _name.startswith("_") and inspect.isfunction(_method) and not all(
            hasattr(getattr(_sparse, f"{f}_{k}"), _name)
            for f in FORMATS for k in ("matrix", "array")):
        setattr(TracedSparse, _name, _OfSomeKinds(_name, _method))


# ----------------------------------------------------------------------------------------------
# Constructors: SciPy's own, applied to numbers that say where each traced value goes


def _pieces(data, dense):
    """The values of a constructor's data argument (a list of diagonals is one piece per
    diagonal), each as an array: traced, or a constant."""
    pieces = list(data) if type(data) in (list, tuple) and not dense else [data]
    return [p if innermost((p,)) is not None else np.asarray(p, float) for p in pieces]


def _numbers(pieces):
    """The pieces with each element replaced by its number, counted from 1 over all of them.
    SciPy stores every number (it leaves out zeros only, a dense matrix's too): so every
    element is stored, whatever its value, as each has a derivative."""
    numbered, start = [], 1.0
    for piece in pieces:
        numbered.append(np.arange(start, start + np.size(piece)).reshape(np.shape(piece)))
        start += np.size(piece)
    return numbered


def _constructed(fn, name, data, build, dense=False, dtype=None, indices=()):
    """``build(fn, data)`` (a SciPy constructor applied to the data argument ``data``) of
    traced values, as a :class:`TracedSparse`: the constructor is applied to the number of
    each element, and each stored value of its result is the element whose number it holds."""
    if dtype is not None and np.dtype(dtype) != np.float64:
        _refuse(f"{name}(..., dtype={dtype!r}) of traced values",
                "mutad follows float64 values: drop dtype=.")
    if type(data) in (list, tuple):  # lists of traced numbers: the arrays NumPy makes of them
        data = lists_as_arrays([data])[0] if dense else type(data)(lists_as_arrays(data))
    pieces = _pieces(data, dense)
    single = type(data) not in (list, tuple) or dense
    arrange = (lambda xs: xs[0]) if single else (lambda xs: type(data)(xs))
    # SciPy keeps the array it was given as its stored values where it need not copy it:
    # writes into either show in the other, so the traced matrix stores that array itself
    shared, kept_indices = None, False
    if single and not dense and np.ndim(data) >= 1:
        plain = memory(data)
        scipys = build(fn, plain)
        stored = getattr(scipys, "data", None)  # (a dok matrix keeps a dict)
        kept_indices = any(np.shares_memory(getattr(scipys, part), x)
                           for part in ("indices", "indptr") if hasattr(scipys, part)
                           for x in indices if isinstance(x, np.ndarray))
        if stored is not None and np.shares_memory(stored, plain):
            shared = data
            if np.ndim(stored) == np.ndim(plain) == 1 and stored.size < plain.size and \
                    address(stored) == address(plain) and stored.strides == plain.strides:
                # csr and csc keep the first nnz of longer arrays, a view (_prune_array)
                shared = data[:stored.size]
    made = _from_numbers(name, pieces, build(fn, arrange(_numbers(pieces))),
                         build(fn, arrange([np.ones(np.shape(p)) for p in pieces])), shared)
    if dense and made.format in ("csr", "csc", "coo", "bsr", "dia"):
        # SciPy stores the entries that are not zero (a bsr matrix's blocks, a dia matrix's
        # diagonals, holding one): the others are kept (their derivative is there), but left
        # out of every matrix SciPy computes with
        everywhere = np.ones(made.layout.valid.size, bool)
        made.layout = made.layout.leaving_out_diagonals(everywhere) if made.format == "dia" \
            else made.layout.dropping(everywhere)
    if isinstance(made, TracedSparse):  # (a lil or dok result is assembled: none kept)
        made._callers_indices, made._callers_values = kept_indices, made.data is shared
    return made


def _from_numbers(name, pieces, numbered, ones, shared=None, droppable=None, groups=None):
    """The :class:`TracedSparse` a constructor made of the values of ``pieces``, given what it
    made of their numbers (``numbered``) and of ones (``ones``, its pattern); ``shared``: the
    traced array SciPy would store as it is (None: a copy), stored so where it holds the
    values in the order the matrix stores them; ``droppable``: for each piece, which of its
    values SciPy stores only where they are not zero (a dense matrix's entries), or None;
    ``groups``: for each piece, the groups of its droppable values (``_Layout.dropping``), or
    None."""
    kinds = {str(p.dtype) for p in pieces if _followed(p)} - {"float64", "complex128"}
    if kinds:
        _refuse(f"{name} of traced {', '.join(sorted(kinds))} values",
                "mutad follows sparse matrices of float64 (or complex128) values, "
                "where SciPy would compute in the values' own precision: convert them first "
                "(x.astype(np.float64)).")
    if _sparse.issparse(ones) and ones.format in ("lil", "dok"):
        # SciPy's lil or dok result: the same entries made in csr, then assembled one by one
        # (those formats hold each entry alone), as tolil and todok assemble them
        made = _from_numbers(name, pieces, numbered.tocsr(), ones.tocsr(), None, droppable,
                             groups)
        return made.tolil() if ones.format == "lil" else made.todok()
    if not _sparse.issparse(ones) or ones.format not in FORMATS:
        _refuse(f"{name} of traced values giving a {getattr(ones, 'format', type(ones))} "
                "result", f"mutad follows the formats {', '.join(FORMATS)}: pass format='csr'.")
    if not np.all(np.isin(ones.data, (0.0, 1.0))) or numbered.data.shape != ones.data.shape:
        _refuse(f"{name} of traced values at repeated positions (SciPy sums them)",
                "build a coo matrix first (coo_matrix((data, (row, col)))), which keeps them, "
                "and convert it (.tocsr()): mutad follows the sum.")
    flat = [np.reshape(p, (-1,)) for p in pieces]
    flat = flat[0] if len(flat) == 1 else np.concatenate(flat)
    out = _Layout(ones)
    index = np.rint(numbered.data).astype(np.intp)
    if droppable is not None and any(np.any(d) for d in droppable):
        # an entry of a dense matrix stays one where the constructor moves it
        source = np.reshape(index, (-1,)) - 1
        at = np.maximum(source, 0)
        grouped = None
        if groups is not None and any(g is not None for g in groups):
            # each piece's groups, apart from the others'; a value of no group alone
            start, each = 0, []
            for d, g in zip(droppable, groups):
                each.append(start + (np.arange(len(d)) if g is None else g))
                start = each[-1].max() + 1 if len(d) else start
            grouped = np.where(source >= 0, np.concatenate(each)[at], start + np.arange(len(at)))
        out = out.dropping(np.where(source >= 0, np.concatenate(droppable)[at], False), grouped)
    if shared is not None and np.shape(shared) == out.data_shape \
            and np.array_equal(index.reshape(-1), np.arange(1, index.size + 1)):
        return TracedSparse(out, shared)
    return TracedSparse(out, np.reshape(_gather(flat, index), out.data_shape))


def _route(fn, stand_in):
    """``stand_in`` of SciPy's ``fn`` while a differentiation runs (``registry.defroute``)."""
    stand_in.__name__ = stand_in.__qualname__ = fn.__name__
    stand_in.__doc__ = (f"SciPy's ``{fn.__module__.split('._')[0]}.{fn.__name__}``: SciPy's own "
                        "with plain values, differentiated with traced ones.")
    defroute(fn, stand_in)
    return stand_in


class _KindCheck:
    """``scipy.sparse.issparse`` (and ``isspmatrix``, ``isspmatrix_csr``, ...) in the user's
    code: of a :class:`TracedSparse`, SciPy's answer for the matrix it stands for (its
    template, of the same class and format), so that ``if issparse(A)`` takes the sparse
    branch; NumPy's and SciPy's own code keeps its own bindings. An attribute holds SciPy's
    function: the allocation mode swaps routed functions in closures."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        defroute(fn, self)

    def __call__(self, x):
        return self.fn(x.layout.template if isinstance(x, TracedSparse) else x)


for _name in ("issparse", "isspmatrix", "isspmatrix_csr", "isspmatrix_csc", "isspmatrix_coo",
              "isspmatrix_bsr", "isspmatrix_dia", "isspmatrix_lil", "isspmatrix_dok"):
    _KindCheck(getattr(_sparse, _name))
del _name


def _constructor_function(name):
    """``diags``, ``diags_array``, ``spdiags``: their first argument holds the values."""

    def construct(data: Any, *args: Any, **kwargs: Any) -> Any:
        if not _followed(data, *args, *kwargs.values()):
            return SCIPY[name](data, *args, **kwargs)
        if _followed(*args, *kwargs.values()):
            _refuse(f"scipy.sparse.{name} with traced offsets or settings",
                    "pass them as constants.")
        given = inspect.signature(SCIPY[name]).bind(data, *args, **kwargs)
        if given.arguments.get("format") == "bsr":  # SciPy's dia matrix, then its tobsr()
            given.arguments["format"] = "dia"
            return construct(*given.args, **given.kwargs).tobsr()
        made = _constructed(SCIPY[name], f"scipy.sparse.{name}", data,
                            lambda fn, d: fn(d, *args, **kwargs), dtype=kwargs.get("dtype"))
        # SciPy builds a dia matrix, whose conversion to another format leaves out its zeros
        # (a lil or dok one holds them as its traced entries, left out of SciPy's storage)
        if isinstance(made, TracedSparse):
            made.layout = _dropping(made.layout)
        return made

    return _route(SCIPY[name], construct)


diags, diags_array, spdiags = map(_constructor_function, ("diags", "diags_array", "spdiags"))


def _blocks(tree, replace, dense=None):
    """``tree`` (a list of sparse matrices, or of lists of them) with each matrix replaced;
    given ``dense``, each array or number there (traced or not) replaced by ``dense(it)``."""
    if type(tree) in (list, tuple):
        return type(tree)(_blocks(x, replace, dense) for x in tree)
    if isinstance(tree, TracedSparse) or _sparse.issparse(tree):
        return replace(tree)
    if dense is not None and tree is not None:
        return dense(np.atleast_2d(tree))
    return tree


def _stacking_function(name):
    """``hstack``, ``vstack``, ``bmat``, ``block_array``, ``block_diag``: their first argument
    holds sparse matrices, whose stored values they place in the result."""

    def stack(blocks: Any, *args: Any, **kwargs: Any) -> Any:
        if not _followed(blocks):
            return SCIPY[name](blocks, *args, **kwargs)
        # a dense block (block_diag takes arrays), as SciPy converts it: a coo matrix
        blocks = _blocks(blocks, lambda m: m, dense=coo_matrix)
        matrices = []
        _blocks(blocks, lambda m: matrices.append(_lift(m)))
        pieces = [np.reshape(m.data, (-1,))[m.layout.valid] if m.layout.padded
                  else np.reshape(m.data, (-1,)) for m in matrices]
        droppable = [np.zeros(np.count_nonzero(m.layout.valid), bool)
                     if m.layout.droppable is None else m.layout.droppable[m.layout.valid]
                     for m in matrices]
        groups = [None if m.layout.grouping() is None else m.layout.grouping()[m.layout.valid]
                  for m in matrices]
        numbers = iter(_numbers(pieces))

        def numbered(m):
            values = np.zeros(m.layout.valid.size)
            values[m.layout.valid] = next(numbers)
            return m.layout.probe(values)

        order = iter(matrices)
        numbered_blocks = _blocks(blocks, lambda _: numbered(next(order)))
        order = iter(matrices)
        ones_blocks = _blocks(blocks, lambda _: next(order).layout.probe())
        return _from_numbers(f"scipy.sparse.{name}", pieces,
                             SCIPY[name](numbered_blocks, *args, **kwargs),
                             SCIPY[name](ones_blocks, *args, **kwargs), droppable=droppable,
                             groups=groups)

    return _route(SCIPY[name], stack)


hstack, vstack, bmat, block_array, block_diag = map(
    _stacking_function, ("hstack", "vstack", "bmat", "block_array", "block_diag"))


def _triangle_function(name):
    """``tril``, ``triu``: the stored values of a triangle, where SciPy puts them."""

    def triangle(A: Any, k: int = 0, format: str | None = None) -> Any:
        if not isinstance(A, TracedSparse):
            return SCIPY[name](A, k=k, format=format)
        return A._with(_relayout(A.data, A.layout,
                                 lambda m: SCIPY[name](m, k=k, format=format)))

    return _route(SCIPY[name], triangle)


tril, triu = map(_triangle_function, ("tril", "triu"))


def _kron(A: Any, B: Any, format: str | None = None) -> Any:
    """Each stored value of ``kron(A, B)`` is the product of one of ``A``'s and one of
    ``B``'s: SciPy's kron of each one's slot numbers with the other's pattern tells which."""
    if not _followed(A, B):
        return SCIPY["kron"](A, B, format=format)
    if 1 in (np.ndim(A), np.ndim(B)) and all(np.ndim(x) in (1, 2) for x in (A, B)):
        # SciPy's coo product, a 1-d operand the row (1, n) it stands for (its entries in the
        # same order); of two 1-d sparse arrays a 1-d one
        vectors = np.ndim(A) == np.ndim(B) == 1 and any(
            isinstance(x, _sparse.sparray) or isinstance(x, TracedSparse)
            and isinstance(x.layout.template, _sparse.sparray) for x in (A, B))
        rows = [x.reshape((1, -1)) if np.ndim(x) == 1 else x for x in (A, B)]
        made = _kron(rows[0], rows[1], "coo")
        made = made.reshape(-1) if vectors else made
        return made if format in (None, "coo") else made.asformat(format)
    if format in ("lil", "dok"):  # the entries in csr, assembled one by one
        made = _kron(A, B, "csr")
        return made.tolil() if format == "lil" else made.todok()
    sparse = _sparse.coo_array if any(isinstance(x, _sparse.sparray) or (
        isinstance(x, TracedSparse) and isinstance(x.layout.template, _sparse.sparray))
        for x in (A, B)) else _sparse.coo_matrix
    # SciPy makes a dense operand a coo matrix, leaving its zeros out, as a traced one is made
    A, B = (_constructed(sparse, "scipy.sparse.kron", x, lambda fn, d: fn(d), dense=True)
            if wrapped(x) and not isinstance(x, TracedSparse) and carries_derivative(x) else x
            for x in (A, B))
    A, B = (_lift(x if isinstance(x, TracedSparse) or _sparse.issparse(x) else sparse(
        memory(x))) for x in (A, B))

    def slots(m):
        return m.layout.probe(np.arange(1.0, m.layout.valid.size + 1))

    # SciPy multiplies dense blocks (bsr) where B stores at least half its entries, counting
    # those it stores (not a dense matrix's or a dia matrix's zeros): where that count decides,
    # so does B's values
    size, most = np.prod(B.shape), np.count_nonzero(B.layout.valid)
    blocks = format in (None, "bsr") and 2 * most >= size
    if blocks and B.layout.droppable is not None and \
            2 * (most - np.count_nonzero(B.layout.droppable)) < size:
        values = settled(B.data, "scipy.sparse.kron, whose way of computing depends on how "
                                 "many of B's values are zero")
        zeros = B.layout.left_out(values) if B.format != "dia" else \
            B.layout.droppable & (np.reshape(values, (-1,)) == 0)  # (its coo's: each entry)
        blocks = 2 * (most - np.count_nonzero(zeros)) >= size
        if not blocks and format == "bsr":
            _refuse("scipy.sparse.kron(A, B, format='bsr') of a B whose zero values SciPy "
                    "leaves out", "pass format='csr' (or B without zero values).")
    setting = format if blocks or format is not None else "coo"
    ones = SCIPY["kron"](A.layout.probe(), B.layout.probe(), format=setting)
    # (in dense blocks, A's value is in every entry of its block: its product with B's zeros)
    in_a = SCIPY["kron"](slots(A), sparse(np.ones(B.shape)) if blocks else B.layout.probe(),
                         format=setting)
    in_b = SCIPY["kron"](A.layout.probe(), slots(B), format=setting)
    if not np.all(np.isin(ones.data, (0.0, 1.0))):
        _refuse("scipy.sparse.kron of a matrix with repeated entries (SciPy sums them)",
                "call sum_duplicates() on it first.")
    out = _Layout(ones)
    if out.format != ones.format:  # lil, dok: the slots as the conversion lays them out
        in_a, in_b = in_a.asformat(out.format), in_b.asformat(out.format)
    index_a, index_b = (np.rint(m.data).astype(np.intp).reshape(-1) for m in (in_a, in_b))
    # SciPy leaves out the zero values A's (or B's) conversion leaves out, so every product
    # of one: the products of one value are grouped, left out where all of them are zero;
    # a product of two such values, where it is zero (a B in dense blocks keeps its zeros)
    by_a, by_b = (np.zeros(index_a.size, bool) if m.layout.droppable is None or index is None
                  else np.where(index > 0, m.layout.droppable[np.maximum(index - 1, 0)], False)
                  for m, index in ((A, index_a), (B, None if blocks else index_b)))
    if (by_a | by_b).any():
        alone = np.arange(index_a.size)
        group_a, group_b = (index if m.layout.grouping() is None else np.where(
            index > 0, m.layout.grouping()[np.maximum(index - 1, 0)] + 1, 0)
            for m, index in ((A, index_a), (B, index_b)))
        groups = np.where(by_a & by_b, alone, np.where(
            by_a, alone.size + group_a, np.where(by_b, alone.size + group_a.max() + 1 + group_b,
                                                 alone)))
        out = out.dropping(by_a | by_b, groups)
    return TracedSparse(out, np.reshape(_gather(A.data, index_a) * _gather(B.data, index_b),
                                        out.data_shape))


kron = _route(SCIPY["kron"], _kron)


def _kronsum(A: Any, B: Any, format: str | None = None) -> Any:
    """SciPy's ``kronsum``, ``kron(I_m, A) + kron(B, I_n)``, as SciPy writes it, with
    :func:`_kron` (SciPy's calls its own kron, which would convert traced values)."""
    if not _followed(A, B):
        return SCIPY["kronsum"](A, B, format=format)
    array = any(isinstance(x, _sparse.sparray) or (isinstance(x, TracedSparse) and isinstance(
        x.layout.template, _sparse.sparray)) for x in (A, B))
    eye = _sparse.eye_array if array else _sparse.identity
    shapes = [np.shape(x) for x in (A, B)]
    for name, shape in zip("AB", shapes):
        if len(shape) != 2:
            raise ValueError(f"kronsum requires 2D inputs. `{name}` is {len(shape)}D.")
        if shape[0] != shape[1]:
            raise ValueError(f"{name} is not square")
    left = _kron(eye(shapes[1][0]), A, format="coo")
    right = _kron(B, eye(shapes[0][0]), format="coo")
    return (left + right).asformat(format)


kronsum = _route(SCIPY["kronsum"], _kronsum)


def _norm(x: Any, ord: Any = None, axis: Any = None) -> Any:
    """SciPy's Frobenius norm of the stored values (``_sparse_frobenius_norm``: NumPy's norm
    of them, all of a ``dia`` matrix's too); for ``ord`` 1 and inf, its sums of absolute
    values (a traced sparse array's reductions); for an integer ``axis``, its vector norms of
    the lines, by its steps."""
    if not isinstance(x, TracedSparse):
        return SCIPY["norm"](x, ord, axis)
    if x.ndim == 1 and not (axis is None and ord in (None, "fro", "f")):
        # a vector's norm, SciPy's of its one axis (a one-element array)
        if axis not in (None, 0, -1) or not (ord in (np.inf, None) or isinstance(
                ord, (int, float, np.integer, np.floating)) and 0 < ord < np.inf):
            _refuse(f"scipy.sparse.linalg.norm(ord={ord!r}, axis={axis!r}) of a 1-d sparse "
                    "array of traced values", "take a norm of positive order, or the dense "
                    "vector's: np.linalg.norm(v.toarray(), ord).")
        if ord == np.inf:  # (SciPy's largest absolute value)
            return np.reshape(abs(x.tocsr()).max(axis=0), (1,))
        axis = 0
    if axis is None and ord in (None, "fro", "f"):
        x.sum_duplicates()  # as SciPy's does, in place
        if x.layout.drops:  # SciPy's value: without a dense matrix's zeros
            return _frobenius(x.data, x.layout)
        return np.linalg.norm(np.reshape(x.data, (-1,)))
    if axis is None and ord in (1, np.inf, -1, -np.inf):
        if x.format == "csr":
            x.sum_duplicates()  # as SciPy's does, in place
        x = abs(x.tocsr())  # SciPy's steps; its sums as a sparse array's (an np.matrix's)
        layout = _Layout(_sparse.csr_array(x.layout.template))
        sums = _reduction(x.data, layout, "sum", 0 if ord in (1, -1) else 1)
        return sums.max() if ord in (1, np.inf) else sums.min()
    if (isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) and -2 <= axis < 2
            and (ord is None or isinstance(ord, (int, float, np.integer, np.floating)) and 0 < ord < np.inf)):
        # SciPy's vector norms of the lines, its steps (its sums as a sparse array's or an
        # np.matrix's, then the root) so that the bits agree
        x = abs(x.tocsr())
        sums = x.sum(axis=axis) if ord == 1 else x.power(2 if ord is None else ord).sum(axis=axis)
        sums = (sums.A if isinstance(sums, TracedMatrix) else sums).ravel()
        if ord == 1:
            return sums
        # the root (elementwise: an np.matrix's bits are its array's) of the lines that are
        # not zero; an empty line's norm, 0, has np.linalg.norm's subgradient 0
        nonzero = sums > 0
        part = np.where(nonzero, sums, 1.0)
        return np.where(nonzero, np.sqrt(part) if ord in (2, None) else np.power(part, 1 / ord),
                        sums)
    _refuse(f"scipy.sparse.linalg.norm(ord={ord!r}, axis={axis!r}) of a traced matrix",
            "mutad follows the Frobenius norm and ord=1, inf (-1, -inf) of the whole matrix and "
            "the vector norms (ord other than 0, inf, -inf) of its rows or columns (an integer "
            "axis); for the others take the dense array's, np.linalg.norm(A.toarray(), ord, "
            "axis).")


norm = _route(SCIPY["norm"], _norm)


def _onenormest(A: Any, t: int = 2, itmax: int = 5, compute_v: bool = False,
                compute_w: bool = False) -> Any:
    """SciPy's estimate of the 1-norm, ``‖A v‖₁`` for the unit vector ``v = e_j`` its search
    chose (it returns ``v`` and ``w = A v``): SciPy's value, with the derivative of
    ``‖A e_j‖₁`` (which column is a decision, as ``np.max``'s). Where SciPy's estimate is not
    the norm of the column it returns (it kept a product with its random starting block), the
    vector behind it is not known: refused."""
    if not _followed(A):
        return SCIPY["onenormest"](A, t, itmax, compute_v, compute_w)
    plain: Any
    if isinstance(A, (TracedSparse, _Assembled)) or _sparse.issparse(A):
        A = _lift(A)
        plain = A.layout.build(stop_gradient(A.data))
    elif _dense_operand(A):
        plain = np.asarray(stop_gradient(A))
    else:
        _refuse("scipy.sparse.linalg.onenormest of an operator with traced values that is "
                "neither a scipy.sparse matrix nor an array", "pass the matrix itself.")
    est, v, w = SCIPY["onenormest"](plain, t, itmax, compute_v=True, compute_w=True)
    j = int(np.argmax(v))
    column = np.ravel(plain[:, [j]].toarray() if _sparse.issparse(plain) else plain[:, j])
    total = np.sum(np.abs(column))
    if not (np.array_equal(w, column) and abs(est - total) <= 8 * np.finfo(float).eps * total):
        _refuse("scipy.sparse.linalg.onenormest whose estimate is not the norm of the column it "
                "returns (SciPy kept the product with its random starting block)",
                "take the exact norm, scipy.sparse.linalg.norm(A, 1), or pass t >= A.shape[0].")
    product = A @ v
    result = (scipys_value(est, np.sum(np.abs(product))),)
    if compute_v:
        result += (v,)
    if compute_w:
        result += (scipys_value(w, product),)
    return result if len(result) > 1 else result[0]


onenormest = _route(SCIPY["onenormest"], _onenormest)


def _find(A: Any) -> Any:
    """SciPy's ``find``: the rows, columns and values of the nonzero entries of a coo copy of
    ``A`` whose repeated entries are added (in SciPy's order, SciPy's sums); the zeros mutad
    stores that SciPy leaves out are among the zeros it leaves out. Which are zero is a
    decision taken on the values."""
    if isinstance(A, _Assembled) and object.__getattribute__(A, "entries"):
        A = A.traced()
    if not isinstance(A, TracedSparse):
        return SCIPY["find"](A)
    B = A.tocoo(copy=True)
    B.sum_duplicates()
    values = np.reshape(B._values, (-1,))
    nonzero = _decision(values, "scipy.sparse.find, which leaves out the zero entries",
                        lambda v: v != 0)
    pattern = B.layout.template
    return pattern.row[nonzero], pattern.col[nonzero], values[nonzero]


find = _route(SCIPY["find"], _find)


class _SparseClass(StandInClass):
    """A SciPy sparse class (``scipy.sparse.csr_matrix``) standing in for itself while a
    differentiation runs: called with traced values it makes a :class:`TracedSparse`, else it
    is the class (``isinstance`` and ``issubclass`` ask it, its attributes are its)."""

    def __init__(self, cls):
        super().__init__(cls, f"SciPy's ``scipy.sparse.{cls.__name__}``, following traced "
                              "values.")
        self.format = cls.__name__[:3]

    def __call__(self, arg1, shape=None, dtype=None, copy=False, **kwargs):
        if not _followed(arg1):
            return self.cls(arg1, shape=shape, dtype=dtype, copy=copy, **kwargs)
        name = f"scipy.sparse.{self.cls.__name__}"
        if isinstance(arg1, TracedSparse):
            if dtype is not None and np.dtype(dtype) != np.float64:
                _refuse(f"{name}(..., dtype={dtype!r}) of traced values",
                        "mutad follows float64 values: drop dtype=.")
            result = arg1.asformat(self.format)
            if result.layout.kind is not self.cls:  # spmatrix <-> sparray: the same slots
                result = arg1._share(TracedSparse(_Layout(self.cls(result.layout.template)),
                                                  result.data)) if result is arg1 else \
                    TracedSparse(_Layout(self.cls(result.layout.template)), result.data)
            return result.copy() if copy else result
        if type(arg1) is tuple and _followed(*arg1[1:]):
            if any(carries_derivative(x) for x in _leaves(arg1[1:])):
                _refuse(f"{name} with traced indices", "indices are integers: pass them plain.")
            arg1 = (arg1[0], *settled(arg1[1:], f"{name} with indices the program computes"))
        if type(arg1) is not tuple:  # a dense matrix: each entry stored, zeros too
            if self.format == "bsr" and kwargs.get("blocksize") is None:
                # SciPy chooses the blocks by the entries that are not zero
                kwargs = {**kwargs, "blocksize": _decision(
                    arg1, f"{name} of a dense array, whose blocks its nonzero values choose",
                    lambda v: self.cls(v, shape=shape).blocksize)}
            return _constructed(self.cls, name, arg1,
                                lambda fn, d: fn(d, shape=shape, copy=copy, **kwargs), dense=True,
                                dtype=dtype)
        if len(arg1) == 2 and type(arg1[1]) is tuple and self.format != "coo":
            # (data, (row, col)) sums repeated positions: coo keeps them, and its conversion
            # is followed through the sum
            coo = SCIPY["coo_array" if self.cls.__name__.endswith("array") else "coo_matrix"]
            return _SparseClass.__call__(RULES[coo].route, arg1, shape, dtype,
                                         copy).asformat(self.format)
        return _constructed(self.cls, name, arg1[0],
                            lambda fn, d: fn((d, *arg1[1:]), shape=shape, copy=copy, **kwargs),
                            dtype=dtype, indices=arg1[1:])


(csr_matrix, csr_array, csc_matrix, csc_array, coo_matrix, coo_array, dia_matrix, dia_array,
 bsr_matrix, bsr_array) = (_SparseClass(SCIPY[name]) for name in (
     "csr_matrix", "csr_array", "csc_matrix", "csc_array", "coo_matrix", "coo_array",
     "dia_matrix", "dia_array", "bsr_matrix", "bsr_array"))
_SOLUTION_CLASSES = {stand_in.cls: stand_in for stand_in in (
    csr_matrix, csr_array, csc_matrix, csc_array, coo_matrix, coo_array)}
"""The stand-ins that build a sparse solution of A's class from its (values, (rows, cols)),
as SciPy's ``spsolve`` builds it (``A.__class__``)."""


# ----------------------------------------------------------------------------------------------
# lil and dok matrices assembled entry by entry: A[i, j] = v, A[i, j] += v with traced values


_ASSEMBLED_READS = frozenset(("shape", "ndim", "dtype", "format", "nnz", "entries", "traced",
                              "copy", "getformat", "setdiag", "conjugate", "conj"))
"""What a ``lil`` or ``dok`` matrix holding traced entries answers as it is; the methods in
``_ASSEMBLED_CONVERTED`` it answers as the traced matrix it stands for, and it refuses any
other (SciPy's would read the placeholders it stores for the traced entries)."""

_ASSEMBLED_CONVERTED = frozenset((
    "tocsr", "tocsc", "tocoo", "todia", "asformat", "toarray", "todense", "T", "transpose",
    "dot", "multiply", "sum", "mean", "diagonal", "trace", "power", "max", "min",
    "count_nonzero", "getnnz", "real", "imag"))
_OF_CSR = frozenset(("real", "imag"))  # (SciPy's: those of A.tocsr())


def _diagonal_positions(shape, k):
    """The rows and columns of diagonal ``k`` of a matrix of ``shape`` (SciPy's setdiag's);
    SciPy's error for a diagonal outside it."""
    m, n = shape
    if k <= -m or k >= n:
        raise ValueError("k exceeds array dimensions")
    if k < 0:
        count = min(m + k, n)
        return np.arange(count) - k, np.arange(count)
    count = min(m, n - k)
    return np.arange(count), np.arange(count) + k


def _past_numpy(frame):
    """The first frame from ``frame`` on that is neither NumPy's nor a wrapper of the mode
    passing NumPy's call on (``PASSING``): the code whose call of NumPy's function
    (``np.sum(A)``, ``np.real(A)``, which read ``A.sum``, ``A.real``) reads an attribute."""
    while frame is not None and (str(frame.f_globals.get("__name__")).startswith("numpy.")
                                 or frame.f_code in PASSING):
        frame = frame.f_back
    return frame


def _key_of(point):
    """SciPy's key of an entry: ``(i, j)``, a 1-d array's ``i``."""
    return point if len(point) > 1 else point[0]


class _Assembled:
    """A ``lil`` or ``dok`` matrix made in a differentiated function (the mixin of
    ``scipy.sparse.lil_matrix``'s stand-ins): it is SciPy's own, but for the entries written
    one at a time with traced values (``A[i, j] = k[i] + k[i + 1]``), which it keeps by position
    (``entries``), SciPy's storage holding a placeholder there. Converted (``tocsr()``, ``A @ x``,
    a solve), it is the :class:`TracedSparse` of all its entries."""

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "entries", {})
        super().__init__(*args, **kwargs)

    def __getattribute__(self, name):
        if name[0] == "_" or name in _ASSEMBLED_READS or not object.__getattribute__(
                self, "entries") or internal(_past_numpy(sys._getframe(1))) \
                or not (hasattr(type(self), name) or name in object.__getattribute__(
                    self, "__dict__")):  # (SciPy's AttributeError: np.exp(A) looks for A.exp)
            return super().__getattribute__(name)
        if name in _ASSEMBLED_CONVERTED:
            traced = self.traced()
            converted = getattr(traced.tocsr() if name in _OF_CSR else traced, name)
            if name in _SCALINGS:  # (by a number: in SciPy's format, its own)
                return lambda other: _in_format_of(self, name, converted(other), (other,))
            return converted
        _refuse(f"{name} of a scipy.sparse {self.format} matrix holding traced entries",
                "convert it first (A.tocsr()), which mutad follows.")

    def _point(self, key):
        """``key`` as one entry ``(i, j)`` (non-negative; ``(i,)`` of a 1-d array), or None."""
        if len(self.shape) == 1 and isinstance(key, (int, np.integer)):
            key = (key,)
        if type(key) is not tuple or len(key) != len(self.shape) or not all(
                isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key):
            return None
        if not all(-m <= i < m for i, m in zip(key, self.shape)):
            return None  # SciPy's own error follows
        return tuple(int(i) % m for i, m in zip(key, self.shape))

    def __setitem__(self, key, value):
        point = self._point(key)
        if point is None:
            if _followed(value):
                # A[i, i - 1:i + 2] = [-k, 2 * k, -k]: entry by entry, as NumPy's assignment
                # broadcasts the values over the region and writes its positions in order
                region = self._selection(key)
                if region is None and len(self.shape) == 1:
                    _refuse("writing traced values into a region of a 1-d scipy.sparse dok "
                            "array", "write its entries one at a time (v[i] = x).")
                if region is None:
                    _refuse(f"writing traced values into a scipy.sparse {self.format} matrix "
                            "with this index", "index rows and columns with integers, slices, "
                            "lists or masks, or write entries one at a time (A[i, j] = v).")
                rows, cols = region
                if isinstance(value, TracedSparse):  # (A[i, :] = A[i, :] * k: its entries)
                    value = value.toarray()
                (value,) = lists_as_arrays((value,))
                while np.ndim(value) > rows.ndim and np.shape(value)[0] == 1:
                    value = value[0]  # (NumPy's assignment drops leading ones)
                if np.squeeze(value).shape != rows.squeeze().shape:
                    value = np.broadcast_to(value, rows.shape)
                # (a column into a row, A[:, 0] = w[:, None]: SciPy matches the values to the
                # region as they are but for their lengths of one)
                values = np.reshape(value, (-1,))
                for k, (i, j) in enumerate(zip(rows.ravel().tolist(), cols.ravel().tolist())):
                    self[i, j] = values[k]
                return None
            if self.entries:  # (a boundary condition: A[0, :] = 0)
                overwritten = self._region(key)
                if overwritten is None:
                    _refuse(f"writing a region of a scipy.sparse {self.format} matrix holding "
                            "traced entries with this index", "index rows and columns with "
                            "integers, slices, lists or masks, or write entries one at a time.")
                for point in overwritten:
                    del self.entries[point]
            return super().__setitem__(key, value)
        if _followed(value):
            if np.ndim(value) != 0:
                _refuse("an entry of a scipy.sparse matrix set to an array", "set a number.")
            self.entries[point] = value
            super().__setitem__(_key_of(point), 1.0)  # a placeholder: stored, whatever v is
        else:
            self.entries.pop(point, None)
            super().__setitem__(_key_of(point), value)

    def _selection(self, key):
        """The positions the region ``key`` selects, as NumPy's indexing shapes them: row and
        column numbers (non-negative) of the region's shape (rows and columns each an integer,
        a slice, a list or a mask; two lists pair up, as NumPy's indices), or None for another
        kind of index."""
        if len(self.shape) == 1:  # (a 1-d dok array's: entries one at a time)
            return None
        if type(key) is not tuple:
            key = (key, slice(None))
        if len(key) != 2:
            return None
        selected = []
        for k, size in zip(key, self.shape):
            if isinstance(k, (int, np.integer)):
                if not -size <= k < size:
                    return None  # SciPy's own error follows
                selected.append(np.array(int(k) % size))
            elif isinstance(k, slice):
                selected.append(np.arange(size)[k])
            elif isinstance(k, (list, np.ndarray)) and np.asarray(k).ndim == 1 \
                    and np.asarray(k).dtype.kind in "iub":
                selected.append(np.arange(size)[np.asarray(k)])
            else:
                return None
        rows, cols = selected
        if not all(isinstance(k, (list, np.ndarray)) for k in key) and rows.ndim and cols.ndim:
            rows, cols = rows[:, None], cols[None, :]  # an outer product, unless they pair up
        return tuple(np.broadcast_arrays(rows, cols))

    def _region(self, key):
        """The traced entries inside the region ``key`` selects (:meth:`_selection`), or None
        for another kind of index."""
        selection = self._selection(key)
        if selection is None:
            return None
        region = set(zip(selection[0].ravel().tolist(), selection[1].ravel().tolist()))
        return [p for p in self.entries if p in region]

    def __getitem__(self, key):
        point = self._point(key)
        if point is not None and point in self.entries:
            return self.entries[point]
        if self.entries and point is None:
            if self._selection(key) is None:
                _refuse(f"reading a region of a scipy.sparse {self.format} matrix holding "
                        "traced entries with this index", "index rows and columns with "
                        "integers, slices, lists or masks, or convert it first (A.tocsr()).")
            # the region of the traced matrix it stands for: its values, as a csr matrix (of
            # SciPy's shape) where SciPy's would be of the matrix's own format
            return self.traced().tocsr()[key]
        return super().__getitem__(key)

    def copy(self):
        twin = super().copy()
        if type(twin) is not type(self):  # (SciPy's copy is of SciPy's own class)
            twin = type(self)(twin)
        object.__setattr__(twin, "entries", dict(self.entries))
        return twin

    def setdiag(self, values, k=0):
        """SciPy's ``setdiag``: with traced values, entry by entry (``A[i, i + k] = v``)."""
        rows, cols = _diagonal_positions(self.shape, k)
        values = lists_as_arrays([values])[0]  # a list of traced numbers: NumPy's array of it
        if not _followed(values):  # SciPy's, over the traced entries it overwrites
            count = len(rows) if np.ndim(values) == 0 else min(len(rows), len(values))
            for point in zip(rows[:count].tolist(), cols[:count].tolist()):
                self.entries.pop(point, None)
            return super().setdiag(values, k)
        if np.ndim(values) == 0:
            values = [values] * len(rows)
        for i, j, value in zip(rows.tolist(), cols.tolist(), values):
            self[i, j] = value

    def traced(self):
        """The :class:`TracedSparse` (coo) of every entry: SciPy's own storage for the plain
        ones, the traced values where they were written."""
        entries = object.__getattribute__(self, "entries")
        object.__setattr__(self, "entries", {})  # SciPy's own conversion, of the plain storage
        try:
            coo = self.tocoo()
        finally:
            object.__setattr__(self, "entries", entries)
        coords = tuple(np.asarray(c, np.intp) for c in coo.coords)  # (one of a 1-d array)
        where = {tuple(map(int, point)): k for k, point in enumerate(zip(*coords))}
        points = list(entries)
        if not points:  # (none written: lil * x of a traced x, SciPy's product)
            return _lift(coo)
        source = np.arange(coo.nnz)
        source[[where[p] for p in points]] = coo.nnz + np.arange(len(points))
        values = np.concatenate([coo.data.astype(np.float64),
                                 np.stack([entries[p] for p in points])])
        kind = coo_array if isinstance(self, _sparse.sparray) else coo_matrix
        assembled = kind((values[source], coords), shape=self.shape)
        assembled.layout.template.has_canonical_format = coo.has_canonical_format  # SciPy's
        # SciPy's lil and dok store no entry written a zero: a traced one that is zero is left
        # out of SciPy's values (A.nnz), as a dense matrix's zeros are (kept for its derivative)
        assembled.layout = assembled.layout.dropping(source >= coo.nnz)
        return assembled

    @property
    def nnz(self) -> int:
        """SciPy's: its stored entries, less the traced ones written a zero (SciPy stores no
        zero written into a lil or dok matrix, where mutad holds a placeholder)."""
        if not object.__getattribute__(self, "entries"):
            return super().nnz  # type: ignore[misc]  # (SciPy's lil or dok class, mixed in)
        return self.traced().nnz

    def __len__(self) -> int:
        """A dok matrix's length, SciPy's ``nnz`` (a lil matrix's: SciPy's TypeError)."""
        if self.format == "dok" and object.__getattribute__(self, "entries"):
            return self.nnz
        return super().__len__()  # type: ignore[misc]


def _binary_assembled(name):
    def method(self, *args):
        if name == "__add__" and self.format == "dok" and isinstance(
                args[0], (TracedSparse, _sparse.sparray, _sparse.spmatrix)) and (
                object.__getattribute__(self, "entries") or _followed(args[0])):
            return _dok_plus(self, args[0])
        if object.__getattribute__(self, "entries"):
            traced = self.traced()
            if name not in _SCALINGS:  # (SciPy's lil and dok compute them as csr: -A, A ** 2)
                traced = traced.tocsr()
            return _in_format_of(self, name, getattr(traced, name)(*args), args)
        return getattr(super(_Assembled, self), name)(*args)
    method.__name__ = name
    return method


def _dok_plus(a, b):
    """SciPy's ``a + b`` of a dok matrix ``a`` and a sparse matrix ``b`` (``_dok_base.__add__``):
    a dok matrix holding ``a``'s entries and, for each entry ``b`` stores, in its coo order,
    ``a[i, j] + v`` (traced where either is)."""
    if a.shape != b.shape:
        raise ValueError("Matrix dimensions are not equal.")
    plain = b.value if isinstance(b, TracedSparse) else b.traced().value \
        if isinstance(b, _Assembled) and b.entries else b
    if np.result_type(a.dtype, plain.dtype) != a.dtype:
        _refuse(f"a scipy.sparse dok matrix of {a.dtype} plus one of {plain.dtype} with traced "
                "values", "convert them to one dtype first.")
    stored = plain.tocoo()
    rows, cols = (np.asarray(c).tolist() for c in stored.coords)
    if len(set(zip(rows, cols))) != len(rows):
        _refuse("a scipy.sparse dok matrix plus one holding duplicate entries, with traced "
                "values", "sum the duplicates first (B.sum_duplicates()).")
    values = _lift(b).toarray() if _followed(b) else None
    # (a constant dok matrix, made before the differentiation: SciPy's own class, copied
    # into the one that holds traced entries)
    new = a.copy() if isinstance(a, _Assembled) else (
        dok_array if isinstance(a, _sparse.sparray) else dok_matrix).assembled(a, copy=True)
    for i, j, v in zip(rows, cols, stored.data if values is None else rows):
        value = new[i, j] + (v if values is None else values[i, j])
        if _followed(value):
            new[i, j] = value
        else:  # (SciPy writes its dict: a sum of zero stays stored)
            new.entries.pop((i, j), None)
            dict.__setitem__(new._dict, (i, j), value)
    return new


for _name in ("__matmul__", "__rmatmul__", "__mul__", "__rmul__", "__add__", "__radd__",
              "__sub__", "__rsub__", "__truediv__", "__neg__", "__abs__", "__pow__"):
    setattr(_Assembled, _name, _binary_assembled(_name))


class _Attributes(abc.ABC):
    """The base that holds the attributes of SciPy's sparse arrays (``SparseABC``'s): a class
    Python lets an instance of ``csr_array`` become, as ``TracedSparse`` for ``csr_matrix``."""


class _AssemblyClass(_SparseClass):
    """``scipy.sparse.lil_matrix`` (``lil_array``, ``dok_matrix``, ``dok_array``) while a
    differentiation runs: SciPy's class, whose matrices take traced entries (``_Assembled``)."""

    def __init__(self, cls):
        super().__init__(cls)
        # (a sparse array's with _Attributes first: one of SciPy's may become one in place)
        bases = (_Attributes, _Assembled, cls) if issubclass(cls, _sparse.sparray) else (
            _Assembled, cls)
        self.assembled = type(cls.__name__, bases, {
            "__module__": __name__, "__doc__": _Assembled.__doc__})

    def __call__(self, arg1, shape=None, dtype=None, copy=False, **kwargs):
        if holds_derivative(arg1):  # (constants, arrays the function allocated: as plain)
            # a dense array or a sparse matrix of traced values: its entries in csr (the
            # nonzeros a dense one stores), assembled one by one as tolil and todok do
            if isinstance(arg1, _Assembled):
                arg1 = arg1.traced()
            array = issubclass(self.cls, _sparse.sparray)
            made = (csr_array if array else csr_matrix)(arg1, shape=shape, dtype=dtype)
            return made.tolil() if self.cls.__name__.startswith("lil") else made.todok()
        return self.assembled(arg1, shape=shape, dtype=dtype, copy=copy, **kwargs)


lil_matrix, lil_array, dok_matrix, dok_array = (
    _AssemblyClass(getattr(_sparse, name)) for name in (
        "lil_matrix", "lil_array", "dok_matrix", "dok_array"))


# ----------------------------------------------------------------------------------------------
# SciPy's matrices with constant values, met by traced operands: their methods are routed


def _lifted(name):
    def method(self, *args, **kwargs):
        if name == "__add__" and self.format == "dok" and not kwargs and isinstance(
                args[0], (TracedSparse, _sparse.sparray, _sparse.spmatrix)):
            return _dok_plus(self, args[0])  # (SciPy's own: a dok matrix)
        return _in_format_of(self, name, getattr(_lift(self), name)(*args, **kwargs), args)
    method.__name__ = name
    return method


_SCALINGS = frozenset(("__mul__", "__rmul__", "__truediv__", "multiply", "dot"))
"""The operations of a matrix with a number whose result SciPy gives in the matrix's format."""


def _in_format_of(a, name, y, args):
    """``y``, the result of ``a.name(*args)``, in SciPy's format: a lil or dok matrix times or
    over a number is one of its own format (``_Assembled``, holding the traced values), as
    SciPy's is, and so is -A of a dok matrix; its other operations give SciPy's csr (-A of a
    lil matrix, A ** 2), as ``y`` is."""
    kept = (name in _SCALINGS and len(args) == 1 and _is_scalar(args[0])) or (
        name == "__neg__" and a.format == "dok")
    if kept and isinstance(y, TracedSparse) and a.format in ("lil", "dok"):
        return y.tolil() if a.format == "lil" else y.todok()
    return y


def _dense(layout, data, order=None):
    """The dense array of the matrix of ``layout`` holding ``data`` (``toarray``)."""
    dense = np.zeros_like(data, shape=layout.shape)
    valid = layout.valid
    at = (layout.rows[valid], layout.cols[valid])[2 - len(layout.shape):]
    np.add.at(dense, at, np.reshape(data, (-1,))[valid])
    return np.asfortranarray(dense) if order == "F" else dense


def _constant_toarray(original):
    """SciPy's ``toarray`` of a matrix of constants (one the function built of plain numbers:
    ``scipy.sparse.eye(n)``, a ``kron``, a random matrix) called by the user's code while a
    differentiation runs: the dense array as a constant the differentiation follows, as
    ``np.zeros``'s is, so that a traced value written into it is followed (``K =
    A.toarray(); K += np.diag(v)``); SciPy's own code, and an ``out=``, get SciPy's array."""
    def toarray(self, order=None, out=None):
        y = original(self, order, out)
        if out is None and isinstance(y, np.ndarray) and y.dtype.kind in "fc" \
                and not internal(sys._getframe(2)):
            return allocate(y, (original, (self, order), {}))
        return y

    toarray.always = True  # (a routed method: of every call, the caller told apart above)
    return toarray


for _cls in {base for cls in (_sparse.csr_matrix, _sparse.csc_matrix, _sparse.coo_matrix,
                              _sparse.dia_matrix, _sparse.bsr_matrix, _sparse.lil_matrix,
                              _sparse.dok_matrix, _sparse.csr_array, _sparse.dia_array)
             for base in cls.__mro__ if "toarray" in vars(base)}:
    defmethod(_cls, "toarray", _constant_toarray(vars(_cls)["toarray"]))

def _constant_assembly(original, fmt):
    """SciPy's ``tolil`` or ``todok`` of a matrix of constants called by the user's code while
    a differentiation runs: the same matrix as one that takes traced entries (``_Assembled``),
    as a ``lil`` matrix the function builds does, so that a boundary condition written into a
    constant operator (``A = L.tolil(); A[0, 0] = k[0]``, ``A.setdiag(v)``) is followed; SciPy's
    own code gets SciPy's."""
    def convert(self, copy=False):
        y = original(self, copy)
        if internal(sys._getframe(2)) or isinstance(y, _Assembled) or y is self:
            return y  # (a lil's own tolil is the matrix itself, which its caller holds)
        kind = {"lil": (lil_matrix, lil_array), "dok": (dok_matrix, dok_array)}[fmt]
        return kind[isinstance(y, _sparse.sparray)].assembled(y)

    convert.always = True  # (a routed method: of every call, the caller told apart above)
    return convert


for _name, _fmt in (("tolil", "lil"), ("todok", "dok")):
    for _cls in {base for cls in (_sparse.csr_matrix, _sparse.csc_matrix, _sparse.coo_matrix,
                                  _sparse.dia_matrix, _sparse.bsr_matrix, _sparse.lil_matrix,
                                  _sparse.dok_matrix, _sparse.csr_array, _sparse.csc_array,
                                  _sparse.coo_array, _sparse.dia_array, _sparse.lil_array,
                                  _sparse.dok_array)
                 for base in cls.__mro__ if _name in vars(base)}:
        defmethod(_cls, _name, _constant_assembly(vars(_cls)[_name], _fmt))

def _follows_in_place(A):
    """Whether the SciPy matrix of constants ``A`` (csr, csc, coo, dia, bsr) becomes one with
    traced values in place (:func:`_followed_in_place`) while a differentiation runs: a 2-d
    float or complex one."""
    return bool(ACTIVE.running) and A.__dict__["data"].dtype.kind in "fc" and len(A.shape) == 2


def _followed_in_place(A):
    """The SciPy matrix of constants ``A`` (``scipy.sparse.eye``, ``diags`` of plain numbers, a
    ``kron`` or sum of such, one made before the call) made, in place, a :class:`TracedSparse`
    of SciPy's pattern whose stored values are a constant the differentiation follows, as
    ``np.zeros``'s is, where the user's code reads its stored values (``A.data[:] = k``,
    ``A.data *= k[0]``) or writes traced values into it (``A.setdiag(v)``, ``A[i, j] = k[0]``,
    ``A *= c``): what it writes is followed, and so are the matrix's products and solves from
    then on. The matrix is SciPy's again, as it was, when the differentiation ends (the
    caller's, made before it, unchanged), as an array made before is."""
    layout = _Layout(A)
    values = np.array(layout.template.data)
    ACTIVE.running[-1].originals.keep_object(A)
    object.__setattr__(A, "__class__", _TracedSparseArray if isinstance(
        A, _sparse.sparray) else TracedSparse)
    A.__dict__.clear()
    TracedSparse.__init__(A, layout, allocate(values, (np.array, (values,), {})))
    return A


def _stored_values(self):
    """``A.data`` of a SciPy matrix (csr, csc, coo, dia, bsr): read by the user's code while a
    differentiation runs, the traced values of the matrix made traced in place
    (:func:`_followed_in_place`); SciPy's and mutad's own reads, and those outside a
    differentiation, get SciPy's array."""
    if "data" not in self.__dict__:
        raise AttributeError("data")
    if ACTIVE.running and not internal(sys._getframe(1)) and _follows_in_place(self):
        return _followed_in_place(self).data
    return self.__dict__["data"]


_TracedSparseArray = type("TracedSparse", (_Attributes, TracedSparse), {
    "__module__": __name__, "__doc__": TracedSparse.__doc__})


def _store_values(self, data):
    """``A.data = values`` of a SciPy matrix: traced values of the shape of its stored ones,
    written by the user's code while a differentiation runs, make it traced in place
    (:func:`_followed_in_place`) holding them, as a write into ``A.data[:]`` does."""
    stored = self.__dict__.get("data")
    if ACTIVE.running and not internal(sys._getframe(1)) and holds_derivative(data) and (
            stored is not None and np.shape(data) == stored.shape and _follows_in_place(self)):
        _followed_in_place(self).data = data
        return
    self.__dict__["data"] = data


_sparse._data._data_matrix.data = property(_stored_values, _store_values)


def _written_in_place(name, operator=None):
    """Method ``name`` of a SciPy matrix of constants that writes traced values into it
    (``setdiag``, ``__setitem__``, ``*=``, ``/=``): the matrix's, made traced in place."""
    def write(self, *args, **kwargs):
        if operator is not None and not _is_scalar(args[0]):
            return NotImplemented  # SciPy's own: Python then computes A = A op other
        if isinstance(self, _sparse._data._data_matrix) and _follows_in_place(self):
            return getattr(_followed_in_place(self), name)(*args, **kwargs)
        _refuse(f"A {operator}= c of a scipy.sparse {self.format} matrix of constants by a "
                "traced c" if operator else f"A.{name} of traced values into a "
                f"scipy.sparse {self.format} matrix of constants of {self.dtype}",
                "build the matrix from the values, or convert it to csr first.")
    return write


for _name, _operator in (("__imul__", "*"), ("__itruediv__", "/"), ("setdiag", None),
                         ("__setitem__", None)):
    for _cls in {base for cls in (_sparse.csr_matrix, _sparse.csc_matrix, _sparse.coo_matrix,
                                  _sparse.dia_matrix, _sparse.bsr_matrix, _sparse.csr_array,
                                  _sparse.csc_array, _sparse.coo_array, _sparse.dia_array,
                                  _sparse.bsr_array)
                 for base in cls.__mro__ if _name in vars(base)} | (
            {_sparse._lil._lil_base, _sparse._dok._dok_base} if _operator else set()):
        defmethod(_cls, _name, _written_in_place(_name, _operator))

def _assembled_in_place(A):
    """The lil or dok matrix of constants ``A`` (``eye(n, format="lil")``, ``diags(...,
    format="lil")``, a copy: SciPy's own conversions make it) made, in place, one that takes
    traced entries (``_Assembled``), as one the function builds does, where the user's code
    writes traced values into it. It is SciPy's again, as it was, when the differentiation
    ends; its rows (or dict) are copied first, so that a matrix made before it is unchanged."""
    ACTIVE.running[-1].originals.keep_object(A)
    if A.format == "lil":
        for name in ("rows", "data"):
            lists = np.empty(len(getattr(A, name)), dtype=object)
            for i, held in enumerate(getattr(A, name)):
                lists[i] = list(held)
            setattr(A, name, lists)
    else:
        A._dict = dict(A._dict)
    kinds = {"lil": (lil_matrix, lil_array), "dok": (dok_matrix, dok_array)}[A.format]
    object.__setattr__(A, "__class__", kinds[isinstance(A, _sparse.sparray)].assembled)
    object.__setattr__(A, "entries", {})
    return A


def _assembled_write(name):
    """Method ``name`` (``__setitem__``, ``setdiag``) of a lil or dok matrix of constants,
    writing traced values: the matrix's, made one that takes them in place."""
    def write(self, *args, **kwargs):
        if isinstance(self, _Assembled) or self.dtype.kind not in "fc":
            _refuse(f"A.{name} of traced values into a scipy.sparse {self.format} matrix of "
                    f"{self.dtype}", "build the matrix from the values, of a float dtype.")
        return getattr(_assembled_in_place(self), name)(*args, **kwargs)
    return write


for _name in ("__setitem__", "setdiag"):
    for _cls in (_sparse._lil._lil_base, _sparse._dok._dok_base):
        defmethod(_cls, _name, _assembled_write(_name))

for _cls, _names in (
        (_sparse._base._spbase, ("__matmul__", "__rmatmul__", "dot", "multiply", "__add__",
                                 "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                                 "__truediv__")),
        (_sparse._matrix.spmatrix, ("__mul__", "__rmul__")),
        (_sparse._coo._coo_base, ("dot",)),
        (_sparse._dia._dia_base, ("multiply",)),
        (_sparse._lil._lil_base, ("__truediv__",)),  # (SciPy's own take x for no number)
        (_sparse._dok._dok_base, ("__truediv__",))):
    for _name in _names:
        defmethod(_cls, _name, _lifted(_name))
del _cls, _names, _name, _fmt


# ----------------------------------------------------------------------------------------------
# scipy.sparse.linalg


class _DenseLayout(_Layout):
    """A dense matrix with traced values handed to an iterative method: a slot per entry, in C
    order (the derivative of entry ``(i, j)`` is that of a sparse matrix's slot there), while
    SciPy's matrix is a dense array in the memory order of the user's, whose products SciPy's
    call computes as on the user's array."""

    def __init__(self, shape, order):
        super().__init__(SCIPY["csr_array"](np.ones(shape)))
        self.order = order

    def build(self, data, dropping=True):
        return np.array(np.reshape(data, self.shape), order=self.order)


def _dense_matrix_of(a, name):
    """The layout and values (C order) of the dense matrix ``a`` with traced values, for the
    iterative method ``name``."""
    value = memory(a)
    if value.ndim != 2 or value.dtype.kind not in "fc":
        _refuse(f"scipy.sparse.linalg.{name} of a dense {value.ndim}-d {value.dtype} matrix "
                "with traced values", "pass a 2-d float or complex matrix.")
    if value.flags.c_contiguous:
        order = "C"
    elif value.flags.f_contiguous:
        order = "F"
    else:  # SciPy's products of a strided view may round otherwise than of any copy of it
        _refuse(f"scipy.sparse.linalg.{name} of a strided view of a dense matrix with traced "
                "values", "pass np.ascontiguousarray(A), or a scipy.sparse matrix.")
    return _DenseLayout(value.shape, order), np.reshape(a, (-1,))


def _matrix_of(a, name):
    """The layout and stored values of ``a``, a sparse matrix (traced or not), or a constant
    dense one (which SciPy converts to csc too)."""
    if type(a) is np.ndarray or wrapped(a) and not holds_derivative(a):
        a = SCIPY["csc_array"](memory(a))  # (an array the function allocated: its values)
    if isinstance(a, TracedSparse) or _sparse.issparse(a):
        a = _lift(a)
        return a.layout, a.data
    _refuse(f"scipy.sparse.linalg.{name} of a dense matrix inside a differentiated function",
            "pass a scipy.sparse matrix, or use scipy.linalg.solve for a dense one.")


def _dense_rhs(b, name):
    if isinstance(b, TracedSparse) or _sparse.issparse(b):
        _refuse(f"scipy.sparse.linalg.{name} of a sparse right-hand side with traced values",
                "pass b as a dense array (b.toarray()).")


def _spsolve(A: Any, b: Any, permc_spec: str | None = None, use_umfpack: bool = True) -> Any:
    if not _followed(A, b):
        return SCIPY["spsolve"](A, b, permc_spec, use_umfpack)
    if getattr(A, "format", None) in ("csr", "csc") and not isinstance(A, _Assembled):
        A.sum_duplicates()  # as SciPy's does, in place (a constant matrix's too)
    if isinstance(b, (TracedSparse, _Assembled)) or _sparse.issparse(b):
        return _sparse_rhs_solve(A, _lift(b), permc_spec, use_umfpack)
    layout, data = _matrix_of(A, "spsolve")
    options = {"permc_spec": permc_spec, "use_umfpack": use_umfpack}
    return _solve(data, b, None, solver=_Direct(layout, options))


def _solution_entries(x):
    """SciPy's sparse solution ``x`` as (values, rows, columns), in the order of its coo form."""
    coo = x.tocoo()
    return coo.data, np.asarray(coo.row, np.intp), np.asarray(coo.col, np.intp)


_sparse_rhs_value = Value(
    lambda a_data, b_data, a_layout, b_layout, permc_spec, use_umfpack: _solution_entries(
        SCIPY["spsolve"](a_layout.build(a_data), b_layout.build(b_data), permc_spec,
                         use_umfpack)), "scipy.sparse.linalg.spsolve")


def _sparse_rhs_solve(A, b, permc_spec, use_umfpack):
    """``spsolve(A, B)`` of a sparse ``B`` (and ``inv(A)``, SciPy's ``spsolve(A, I)``). A
    column ``B`` SciPy solves as a dense one, and returns the vector. Otherwise it solves each
    column with one factorization and keeps the entries of each solution that are not zero, in
    a matrix of A's class: the same, the values the dense solve of ``B.toarray()`` (spsolve's
    rule: its derivative in A and B) at the entries SciPy's result stores (a decision on the
    values, taken again by a replay), their bits SciPy's own (its column solves round apart
    from the dense one)."""
    if b.shape[1] == 1:  # SciPy's vector b: solved dense, raveled
        return np.ravel(_spsolve(A, b.toarray(), permc_spec, use_umfpack))
    layout, data = _matrix_of(A, "spsolve")
    options = {"permc_spec": permc_spec, "use_umfpack": use_umfpack}
    dense = _solve(data, b.toarray(), None, solver=_Direct(layout, options))
    values, rows, cols = _sparse_rhs_value(data, b.data, layout, b.layout, permc_spec,
                                           use_umfpack)
    entries = scipys_value(values, dense[rows, cols])
    kind = _SOLUTION_CLASSES.get(layout.kind)
    if kind is None:
        _refuse(f"scipy.sparse.linalg.spsolve of a {layout.kind.__name__} with a sparse "
                "right-hand side", "convert A to csc first (A.tocsc()).")
    return kind((entries, (rows, cols)), shape=b.shape)


spsolve = _route(SCIPY["spsolve"], _spsolve)


def _inv(A: Any) -> Any:
    """SciPy's ``inv``: ``spsolve(A, I)``, I the identity of A's class."""
    if not _followed(A):
        return SCIPY["inv"](A)
    from scipy.sparse.linalg._matfuncs import _ident_like
    return _spsolve(A, _ident_like(_lift(A).value))


inv = _route(SCIPY["inv"], _inv)


def _spsolve_triangular(A: Any, b: Any, lower: bool = True, overwrite_A: bool = False,
                        overwrite_b: bool = False, unit_diagonal: bool = False) -> Any:
    if not _followed(A, b):
        return SCIPY["spsolve_triangular"](A, b, lower, overwrite_A, overwrite_b,
                                            unit_diagonal)
    _dense_rhs(b, "spsolve_triangular")
    layout, data = _matrix_of(A, "spsolve_triangular")
    with warnings.catch_warnings():  # its own conversion of a format it does not solve in
        warnings.simplefilter("ignore", _sparse.SparseEfficiencyWarning)
        return _solve(data, b, None, solver=_Triangular(layout, lower, unit_diagonal))


spsolve_triangular = _route(SCIPY["spsolve_triangular"], _spsolve_triangular)


class SuperLU:
    """SciPy's ``SuperLU`` factorization of a matrix a differentiation may follow, whose
    ``solve(b, trans)`` is differentiated in ``b`` and in the matrix's stored values; the
    factors and permutations (``L``, ``U``, ``perm_r``, ``perm_c``) are SciPy's, refused where
    the differentiation follows the values (they would be constants, a replay's the recorded
    call's)."""

    def __init__(self, factor: Any, factorize: Any, layout: Any, data: Any) -> None:
        self.factor, self.factorize, self.layout, self.data = factor, factorize, layout, data
        self.factorized = np.ascontiguousarray(memory(data)).tobytes()
        # One solver for every solve: they share the factors and the key of the values they
        # are of, rather than a copy of those values each.
        self.solver = _Direct(layout, factorize=factorize, factor=factor, values=memory(data))

    def solve(self, rhs: Any, trans: str = "N") -> Any:
        if not _followed(self.data, rhs):
            return self.factor.solve(rhs, trans)
        _dense_rhs(rhs, "SuperLU.solve")
        if np.ascontiguousarray(memory(self.data)).tobytes() != self.factorized:
            _refuse("SuperLU.solve after the matrix's stored values were written into",
                    "the factors are those of its values at splu(A): factorize it again after "
                    "changing it.")
        return _solve(self.data, rhs, None, solver=self.solver.twin(trans in ("T", "H")))

    def __getattr__(self, name):
        data = self.__dict__["data"]
        if name in ("L", "U", "perm_r", "perm_c") and _followed(data):
            # SciPy's pivoting and pattern, decisions on the values at hand, which a replay
            # would keep: it is refused
            settled(data, f"splu(A).{name} of a matrix with traced values")
            if name in ("L", "U"):
                factors = _LUFactors(self.__dict__["factor"], self.layout)
                layout = factors.layouts[name == "U"]
                return TracedSparse(layout, _lu_factor(data, factors, name == "U"))
        return getattr(self.__dict__["factor"], name)


class _LUFactors:
    """SuperLU's factors of ``A`` (``Pr A Pc = L U``, ``Pr``/``Pc`` of ``perm_r``/``perm_c``)
    as constants of their derivative with SciPy's pivoting and patterns: with ``B = Pr A Pc``
    and ``X = L⁻¹ dB U⁻¹``, ``dL = L tril(X, -1)`` and ``dU = triu(X) U`` (the factors of
    ``B + dB`` with the same pivots, ``L`` unit lower triangular), read on ``L``'s and ``U``'s
    stored entries; their transpose gives ``B̄ = L⁻ᵀ (tril(Lᵀ L̄, -1) + triu(Ū Uᵀ)) U⁻ᵀ``, read
    on ``A``'s. Dense, of the matrix's size."""

    def __init__(self, factor, layout):
        self.factor, self.layout = factor, layout
        self.layouts = (_Layout(factor.L), _Layout(factor.U))
        self.L, self.U = factor.L.toarray(), factor.U.toarray()
        # the position in B of each of A's stored values
        self.at = (factor.perm_r[layout.rows], factor.perm_c[layout.cols])

    def tangent(self, dA):
        dB = np.zeros(self.L.shape, np.result_type(dA, self.L))
        np.add.at(dB, self.at, np.where(self.layout.valid, np.reshape(dA, (-1,)), 0.0))
        X = scipy.linalg.solve_triangular(self.L, dB, lower=True, unit_diagonal=True)
        X = scipy.linalg.solve_triangular(self.U, X.T, trans="T", lower=False).T
        return np.tril(X, -1), np.triu(X)

    def cotangent(self, G):
        Y = scipy.linalg.solve_triangular(self.L, G, trans="T", lower=True, unit_diagonal=True)
        dB = scipy.linalg.solve_triangular(self.U, Y.T, lower=False).T
        g = np.where(self.layout.valid, dB[self.at], 0.0)
        return np.reshape(g, self.layout.data_shape)


def _lu_factor_value(data, factors, upper):
    return np.array((factors.factor.U if upper else factors.factor.L).data)


_lu_factor = Adjoint(_lu_factor_value)
_lu_factor.complex_values = None


def _first_order(routine, dense):
    """The check of a rule of the first order only: it refuses ``routine`` where one of its
    items is followed by an outer differentiation, naming ``dense``, which every order
    differentiates."""
    def check(*items):
        if _followed(*items):
            _refuse(f"{routine} under a differentiation of a differentiation (a hessian, a "
                    "gradient of a gradient)", "its rule is of the first order; make the "
                    f"matrix dense and use {dense}, which every order differentiates.")
    return check


_lu_first_order = _first_order("splu(A).L or .U", "scipy.linalg.lu")


def _on_slots(dense, layout):
    return np.reshape(np.where(layout.valid, dense[layout.rows, layout.cols], 0.0),
                      layout.data_shape)


@_lu_factor.rule
def _lu_factor_rule(data, factors, upper):
    _lu_first_order(data)
    layout = factors.layouts[upper]

    def back(g):
        _lu_first_order(g)
        bar = np.zeros(factors.L.shape, np.result_type(g, factors.L))
        valid = layout.valid
        np.add.at(bar, (layout.rows[valid], layout.cols[valid]), np.reshape(g, (-1,))[valid])
        G = np.triu(bar @ factors.U.T) if upper else np.tril(factors.L.T @ bar, -1)
        return factors.cotangent(G), None, None

    return _lu_factor_value(data, factors, upper), back


@_lu_factor.jvp_rule
def _lu_factor_jvp(tangents, data, factors, upper):
    _lu_first_order(data, tangents[0])
    value = _lu_factor_value(data, factors, upper)
    if tangents[0] is None:
        return value, None
    lower_part, upper_part = factors.tangent(np.asarray(tangents[0]))
    dense = upper_part @ factors.U if upper else factors.L @ lower_part
    return value, _on_slots(dense, factors.layouts[upper])


class _Factored(_Solver):
    """Solves with a SuperLU factorization SciPy made before the differentiation (``lu =
    splu(A)`` at module level, ``factorized(A)``): of a constant matrix (``data`` None), the
    derivatives' solves with the same factors, ``trans="T"`` for the transpose."""

    def __init__(self, factor, trans):
        super().__init__(None, trans)
        self.factor, self.first = factor, True

    def twin(self, trans):
        twin = super().twin(trans)
        twin.first = False
        return twin

    def value(self, data, b, guess):
        # SuperLU solves in its own dtype: the user's b as SciPy's solve takes it, a
        # derivative's cast to it
        rhs = np.asarray(b) if self.first else np.asarray(b, self.factor.L.dtype)
        return self.factor.solve(rhs, "T" if self.trans else "N")


class _PlainSuperLU:
    """What stands in, in a differentiated function, for a SuperLU factorization SciPy made
    before it (whose compiled ``solve`` takes plain arrays only): ``solve(b)`` of a traced
    ``b`` is differentiated in ``b``, the matrix a constant; the rest is SciPy's."""

    def __init__(self, factor: Any) -> None:
        self.factor = factor

    def solve(self, rhs: Any, trans: str = "N") -> Any:
        if not _followed(rhs):
            return self.factor.solve(rhs, trans)
        _dense_rhs(rhs, "SuperLU.solve")
        if trans not in ("N", "T", "H"):
            return self.factor.solve(np.zeros(self.factor.shape[0]), trans)  # SciPy's error
        # (a complex factorization's solves, 'H' among them, are refused by _solve's complex
        # check; of a real one 'H' is 'T')
        return _solve(None, rhs, None, solver=_Factored(self.factor, trans != "N"))

    def __getattr__(self, name):
        return getattr(self.__dict__["factor"], name)


COMPILED_OBJECTS[type(SCIPY["splu"](_sparse.eye(1, format="csc")))] = _PlainSuperLU
HANDED_SUBCLASSES[np.matrix] = TracedMatrix  # (sp.eye(n).todense(), then m[0, 0] = x)
SUBCLASS_CALLS[np.matrix] = _as_matrix_computes  # (np.matrix(A) + np.diag(x))


def _factorization(A, factorize):
    """SciPy's factorization of the plain values of ``A`` (``factorize``'s), as a
    :class:`SuperLU` while a differentiation runs; another solver's (UMFPACK's, a function)
    as it is, for constant values."""
    if isinstance(A, TracedSparse) and A.format == "csc":
        A.sum_duplicates()  # as SciPy's does, in place
    factor = factorize(A.value if isinstance(A, TracedSparse) else A)
    if callable(factor):
        if _followed(A):
            _refuse("scipy.sparse.linalg.factorized with UMFPACK, of traced values",
                    "call scipy.sparse.linalg.use_solver(useUmfpack=False) first: mutad "
                    "differentiates SuperLU's solves.")
        return factor
    if isinstance(A, TracedSparse):
        return SuperLU(factor, factorize, A.layout, A.data)
    if not ACTIVE.running or not _sparse.issparse(A):
        return factor
    lifted = _lift(SCIPY["csc_array"](A) if A.format not in FORMATS else A)
    return SuperLU(factor, factorize, lifted.layout, lifted.data)


def _splu(A: Any, permc_spec: str | None = None, diag_pivot_thresh: float | None = None,
          relax: int | None = None, panel_size: int | None = None,
          options: dict | None = None) -> Any:
    return _factorization(A, lambda m: SCIPY["splu"](
        m, permc_spec, diag_pivot_thresh, relax, panel_size, options))


splu = _route(SCIPY["splu"], _splu)


def _factorized(A: Any) -> Any:
    def factorize(m):
        solver = SCIPY["factorized"](m)
        factor = getattr(solver, "__self__", None)  # SuperLU's, of a bound solve
        return factor if hasattr(factor, "perm_c") else solver

    factor = _factorization(A, factorize)
    return factor if callable(factor) else factor.solve


factorized = _route(SCIPY["factorized"], _factorized)
spilu = _route(SCIPY["spilu"], _spilu)


_EXTENDED = ("outer_v", "CU")
"""The settings of ``lgmres`` and ``gcrotmk`` that are the caller's lists, which SciPy extends
with what a solve found (to speed up the next): passed as they are."""


def _settings(method, options):
    """The settings of an iterative solve, each constant a traced one holds as its plain value,
    and the preconditioners (``M``; ``qmr``'s ``M1``, ``M2``) as their numbers
    (:func:`_plain_preconditioner`), which a replay cannot keep; another setting that carries
    a derivative is refused."""
    what = f"scipy.sparse.linalg.{method}'s settings computed in the function"
    settled_options = {name: _plain_preconditioner(value, method, what)
                       if name in ("M", "M1", "M2")
                       else value if carries_derivative(value) or name in _EXTENDED
                       else settled(value, what)
                       for name, value in options.items()}
    for name in _EXTENDED:
        if settled_options.get(name) is not None:
            not_replayed(f"scipy.sparse.linalg.{method} with {name}=, a list SciPy extends: a "
                         "replay would extend the list of the recording")
    traced = [name for name, value in settled_options.items() if _followed(value)]
    if traced:
        _refuse(f"scipy.sparse.linalg.{method} with traced settings ({', '.join(traced)})",
                "pass them as constants: the solution's derivative is in A and b.")
    return settled_options


def _plain_preconditioner(M, method, what):
    """A preconditioner made of traced values (``diags(1 / A.diagonal())``, a
    ``LinearOperator`` whose functions read them from their closures, ``v / d``) on those
    values' numbers: it changes how fast the solve converges, not its solution nor the
    solution's derivative."""
    if isinstance(M, TracedSparse):
        return M.layout.build(settled(M.data, what))
    parameters = _operator_parameters(M, method)
    if parameters is None:
        return settled(M, what)
    values = [settled(v, what) for v in parameters.values()]

    def applied(name):
        def apply(v):
            with _integrate.outside_differentiations(f"the preconditioner's {name}"), \
                    _integrate.plain_allocation(), parameters.bound(values):
                return getattr(M, name)(v)
        return apply

    return _splinalg.LinearOperator(M.shape, matvec=applied("matvec"),
                                    rmatvec=applied("rmatvec"), dtype=M.dtype)


class _IteratesSeen:
    """A callback of an iterative solve handed copies of SciPy's iterates. SciPy hands it its
    own working array, which it goes on updating in place; a callback that reads it with
    traced values (``norm(A @ xk - b)`` of a traced ``A``) has mutad keep what it read
    read-only for the derivative, and SciPy's next update would then fail. A copy the
    callback keeps (``path.append(xk)``) is given SciPy's array's numbers when the solve
    ends, as the kept array itself would hold; a callback that writes into the iterate, which
    steers SciPy's solve, is refused."""

    def __init__(self, callback, method):
        self.callback, self.method, self.kept = callback, method, []

    def __call__(self, iterate):
        if type(iterate) is not np.ndarray:  # (gmres's residual norms: numbers)
            return self.callback(iterate)
        seen = iterate.copy()
        result = self.callback(seen)
        if seen.tobytes() != iterate.tobytes():
            _refuse(f"scipy.sparse.linalg.{self.method} with a callback that writes into the "
                    "iterate it is handed", "SciPy's solve would go on from the written "
                    "numbers; mutad hands the callback a copy. Keep the solve's own steps, "
                    "or write the iterations yourself.")
        if sys.getrefcount(seen) > 2:  # (this frame's name, and getrefcount's argument)
            self.kept.append((seen, iterate))
        return result

    def settle(self):
        """Each kept copy given its SciPy array's numbers at the solve's end. One that an
        operation mutad recorded read (read-only now, for the derivative) keeps the numbers
        it read: refused where the program holds it too (in a list, a set, a dict, or a
        tuple one of those holds), whose later reads would see them, not SciPy's last."""
        for seen, iterate in self.kept:
            if seen.flags.writeable:
                seen[...] = iterate
            elif _held_by_the_program(seen):
                _refuse(f"scipy.sparse.linalg.{self.method} with a callback that keeps the "
                        "iterate it is handed and reads it with differentiated values",
                        "SciPy hands it its working array, which it goes on updating, so the "
                        "kept array would hold the solve's last numbers. Keep a copy "
                        "(path.append(xk.copy())).")


def _held_by_the_program(array):
    """Whether a list, set or dict holds ``array``, or a tuple one of those holds, other than
    a recording's own: its tables of what it froze (keyed by the array's id) and summed
    (tuples that start with the array), and its records (tuples with mutad's objects)."""
    for holder in gc.get_referrers(array):
        if type(holder) in (list, set) or (
                type(holder) is dict and holder.get(id(array)) is not array):
            return True
        if type(holder) is tuple and not (holder and holder[0] is array) and not any(
                type(item).__module__.startswith("mutad.") for item in holder) and any(
                type(outer) in (list, set, dict) for outer in gc.get_referrers(holder)):
            return True
    return False


def _iterative(method):
    def iterate(A: Any, b: Any, x0: Any = None, **options: Any) -> tuple[Any, int]:
        if options.get("callback") is None:
            return iterate_seen(A, b, x0, **options)
        # (counting the iterations into a list)
        not_replayed(f"scipy.sparse.linalg.{method} with a callback, which SciPy calls "
                     "on each iteration: a replay would not call it")
        seen = options["callback"] = _IteratesSeen(options["callback"], method)
        try:
            return iterate_seen(A, b, x0, **options)
        finally:
            seen.settle()

    def iterate_seen(A: Any, b: Any, x0: Any = None, **options: Any) -> tuple[Any, int]:
        parameters = _operator_parameters(A, method)
        if parameters is not None:
            _dense_rhs(b, method)
            options = _settings(method, options)
            problem = _OperatorSolve(method, A, parameters, options)
            # (x0, a warm start, has no derivative)
            return _operator_solve(b, x0, *parameters.values(), problem=problem), 0
        if not _followed(A, b, x0):
            return SCIPY[method](A, b, x0, **options)
        _dense_rhs(b, method)
        options = _settings(method, options)
        if isinstance(A, TracedSparse) or _sparse.issparse(A):
            layout, data = _matrix_of(A, method)
            solver = _Iterative(method, layout, None, options)
        elif innermost((A,)) is not None:  # a dense matrix with traced values
            layout, data = _dense_matrix_of(A, method)
            solver = _Iterative(method, layout, None, options)
        else:  # a constant operator: no stored values to differentiate
            empty = _Layout(SCIPY["csr_array"](tuple(np.shape(A))))
            solver = _Iterative(method, empty, A, options)
            data = np.zeros(0)
        return _solve(data, b, x0, solver=solver), 0  # x0, a warm start, has no derivative

    return _route(SCIPY[method], iterate)


cg, gmres, bicgstab, minres, bicg, cgs, qmr, lgmres, gcrotmk, tfqmr = map(_iterative, (
    "cg", "gmres", "bicgstab", "minres", "bicg", "cgs", "qmr", "lgmres", "gcrotmk", "tfqmr"))



# ----------------------------------------------------------------------------------------------
# eigenproblems: what eigsh, eigs and svds check of the values ARPACK returns


def _distinct(name, values, what):
    scale = max(float(np.max(np.abs(values))), np.finfo(float).tiny) if len(values) else 1.0
    gaps = np.where(np.eye(len(values), dtype=bool), np.inf,
                    np.abs(values[:, None] - values[None, :]))
    if len(values) > 1 and np.min(gaps) <= 1e-8 * scale:
        _refuse(f"scipy.sparse.linalg.{name} with repeated {what} (equal within rounding) "
                "among those it returns", f"their vectors, and the derivatives of each of the "
                f"{what}, are not defined.")
    return scale


def _matched(name, values, paired, vectors, what):
    """The columns of ``vectors`` (of a second call's ``paired`` values) of the first call's
    ``values``, matched value by value to 1e-8; a mismatch is refused."""
    order = [int(np.argmin(np.abs(paired - x))) for x in values]
    scale = max(float(np.max(np.abs(paired))), np.finfo(float).tiny)
    if len(set(order)) != len(values) or np.max(np.abs(paired[order] - values)) > 1e-8 * scale:
        _refuse(f"scipy.sparse.linalg.{name}: the vectors of its derivative, from a second call "
                f"with vectors, are not of the same {what}", "pass v0 (the same start for both "
                "calls), or ask for the vectors too.")
    return [v[:, order] for v in vectors]


def _bordered_solve(name, shifted, x, rhs, values=False):
    """The top of ``[[S, x], [xᴴ, 0]]⁻¹ [rhs; 0]`` (``S = A - λ I``, singular along ``x``):
    the solution of ``S y = rhs`` with ``xᴴ y = 0``, by SuperLU; a solve whose residual is not
    small (another eigenvalue, not returned, equal to ``λ``) is refused."""
    n = shifted.shape[0]
    column = x.reshape(n, 1)
    border = SCIPY["bmat"]([[shifted, SCIPY["csc_matrix"](column)],
                            [SCIPY["csc_matrix"](column.conj().T), None]], format="csc")
    full = np.concatenate([np.asarray(rhs), np.zeros((1,) + np.shape(rhs)[1:])])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", _splinalg.MatrixRankWarning)
            y = SCIPY["splu"](border).solve(full.astype(border.dtype))
    except (RuntimeError, _splinalg.MatrixRankWarning):
        y = None
    size = max(float(_splinalg.norm(border, 1)), np.finfo(float).tiny)
    if y is None or not np.all(np.isfinite(y)) or (
            np.linalg.norm(border @ y - full) > 1e-8 * max(np.linalg.norm(full), 1e-300)
            * max(1.0, size * np.linalg.norm(y) / max(np.linalg.norm(full), 1e-300))) or (
            # nearly singular: an eigenvalue not returned within 1e-8 (relative) of this one
            np.linalg.norm(y) * size > 1e8 * np.linalg.norm(full)):
        if values:
            raise UnsupportedOperationError(
                f"scipy.sparse.linalg.{name}: a value it returns is not simple (another "
                "eigenvalue or singular value of the matrix, returned or not, or a defective "
                "one, equals it within 1e-8 relative), and it has no derivative there.")
        raise UnsupportedOperationError(
            f"scipy.sparse.linalg.{name}: the solve its vectors' derivative needs is singular: "
            "another eigenvalue (or singular value) of the matrix, not among those returned, "
            "equals one returned, and its vectors have no derivative. Differentiate the values "
            "alone.")
    return y[:n]


def _require_simple(name, matrix, w, v, mass=None):
    """Each returned eigenvalue simple among all of A's (returned or not, which ARPACK does
    not tell): the bordered matrix ``[[A - λ I, v], [vᴴ, 0]]`` is nonsingular exactly then
    (of a generalized problem, ``[[A - λ M, M v], [(M v)ᴴ, 0]]``)."""
    n = matrix.shape[0]
    probe = np.cos(np.arange(n) + 0.5)
    mass = _sparse.eye(n) if mass is None else mass
    for i in range(len(w)):
        shifted = (matrix.astype(np.result_type(matrix.dtype, w.dtype))
                   - w[i] * mass).tocsc()
        border = mass @ v[:, i]
        rhs = probe - border * (np.conj(v[:, i]) @ probe)
        _bordered_solve(name, shifted, border, rhs, values=True)



# ----------------------------------------------------------------------------------------------
# eigsh: eigenpairs of a symmetric sparse matrix


class _Eigenproblem:
    """One ``eigsh`` call of a traced symmetric matrix (``layout``): SciPy's (ARPACK's) pairs of
    the plain stored values, computed once per distinct set of values (the eigenvalues and the
    eigenvectors are two primitives of the one call: ARPACK starts from a random vector unless
    given ``v0``, so a second call would be another result), and the solves in the complement
    of an eigenvector its derivatives need. Of a generalized problem ``A v = λ M v`` (``M`` a
    constant, its ``mass``), ARPACK's eigenvectors are M-orthonormal (``vᵀ M v = 1``, checked),
    and the derivatives are those of that normalization: ``dλ = vᵀ dA v``, and ``dv`` the
    solution of ``(A - λ M) dv = -(dA - dλ M) v`` with ``vᵀ M dv = 0``."""

    def __init__(self, layout, k, options, vectors):
        self.layout, self.k, self.options, self.vectors = layout, k, options, vectors
        self.key, self.pairs = None, None
        mass = options.get("M")
        self.mass = None if mass is None else _sparse.csc_array(mass, dtype=float)

    def value(self, data):
        key = np.ascontiguousarray(data).tobytes()
        if self.key != key:
            matrix = self.layout.build(data)
            # in CSR: the DIA format of scipy.sparse.diags has no max()
            csr = self.layout.stored(data).tocsr()
            if abs(csr - csr.T).max() > 1e-12 * max(abs(csr).max(), 1e-300):
                _refuse("scipy.sparse.linalg.eigsh of a matrix that is not symmetric", "ARPACK's "
                        "symmetric method assumes A = Aᵀ; pass a symmetric matrix.")
            if self.vectors:
                w, v = SCIPY["eigsh"](matrix, self.k, **self.options)
            else:  # SciPy's eigenvalues alone, and the vectors of the derivative beside them
                w = SCIPY["eigsh"](matrix, self.k, return_eigenvectors=False, **self.options)
                _distinct("eigsh", w, "eigenvalues")
                pw, pv = SCIPY["eigsh"](matrix, self.k, **self.options)
                v, = _matched("eigsh", w, pw, [pv], "eigenvalues")
            _distinct("eigsh", w, "eigenvalues")
            if self.mass is not None and not np.allclose(
                    np.einsum("ij,ij->j", v, self.mass @ v), 1.0, rtol=0.0, atol=1e-8):
                _refuse("scipy.sparse.linalg.eigsh of a generalized problem whose eigenvectors "
                        "are not M-orthonormal (a mode other than 'normal', or an M that is "
                        "not positive definite)", "mutad differentiates the problem "
                        "A v = λ M v of a positive definite M in mode='normal'.")
            _require_simple("eigsh", csr, w, v, self.mass)
            self.key, self.pairs = key, (w, v)
        return self.pairs

    def complement_solve(self, data, i, rhs):
        """``-(A - λᵢ I)⁺ (I - vᵢ vᵢᵀ) rhs``, by MINRES in the complement of ``vᵢ`` to
        ``ADJOINT_RTOL``."""
        w, v = self.value(data)
        matrix = self.layout.build(data)
        vi, lam = v[:, i], w[i]
        if self.mass is not None:  # the bordered system, whose border keeps vᵀ M z = 0
            shifted = (self.layout.stored(data) - lam * self.mass).tocsc()
            return -_bordered_solve("eigsh", shifted, self.mass @ vi, np.asarray(rhs, float))
        project = lambda x: x - vi * (vi @ x)  # noqa: E731
        operator = _splinalg.LinearOperator(
            matrix.shape, matvec=lambda x: project(matrix @ project(np.ravel(x))
                                                   - lam * project(np.ravel(x))), dtype=float)
        b = project(np.asarray(rhs, float))
        if not np.any(b):
            return np.zeros_like(b)
        z, info = SCIPY["minres"](operator, b, rtol=ADJOINT_RTOL, maxiter=20 * len(b))
        if info != 0:
            raise UnsupportedOperationError(
                "scipy.sparse.linalg.eigsh: the solve in the complement of an eigenvector that "
                f"its derivative needs did not converge (info={info}): an eigenvalue of the "
                "matrix lies too close to one it returned. Differentiate the eigenvalues alone, "
                "or make the matrix dense and use scipy.linalg.eigh.")
        return -project(z)


def _eigenvalues_value(data, problem):
    return problem.value(data)[0].copy()


def _eigenvectors_value(data, problem):
    return problem.value(data)[1].copy()


_eigenvalues = Adjoint(_eigenvalues_value)
_eigenvalues.complex_values = None
_eigenvectors = Adjoint(_eigenvectors_value)
_eigenvectors.complex_values = None


def _followed_pairs(data, problem):
    """The pairs ``(w, v)`` of ``problem``: the plain ones, or, where a differentiation follows
    ``data`` (a hessian), the pairs it follows (its own ``_eigenvalues`` and ``_eigenvectors``
    of the same call), of which the rules below compute their derivatives by NumPy's calls."""
    if not _followed(data):
        return problem.value(data)
    return _eigenvalues(data, problem=problem), _eigenvectors(data, problem=problem)


def _complement_solve(data, problem, w, v, i, rhs):
    """``problem.complement_solve``; where a differentiation follows it, by NumPy's calls on
    the dense matrix (which it follows, to every order): ``z`` of the bordered system
    ``[[A - λᵢ I, vᵢ], [vᵢᵀ, 0]] [z; μ] = [Pᵢ rhs; 0]`` (``μ = 0`` as ``vᵢᵀ (A - λᵢ I) = 0``:
    ``z = (A - λᵢ I)⁺ Pᵢ rhs``), then ``-z``."""
    if not _followed(data, w, v, rhs):
        return problem.complement_solve(data, i, rhs)
    a = _followed_dense(problem.layout, data)
    n = a.shape[0]
    mass = np.eye(n) if problem.mass is None else problem.mass.toarray()
    vi = v[:, i]
    border = mass @ vi
    bordered = np.block([[a - w[i] * mass, border[:, None]],
                         [border[None, :], np.zeros((1, 1))]])
    return -np.linalg.solve(bordered, np.concatenate([rhs - border * (vi @ rhs), np.zeros(1)]))[:n]


def _followed_product(problem, data, direction, v):
    """``Ȧ v`` for the stored values ``direction`` of ``Ȧ`` (plain, or followed: densely)."""
    if not _followed(data, direction, v):
        return problem.layout.build(np.asarray(direction, float)) @ v
    return _followed_dense(problem.layout, direction) @ v


@_eigenvalues.rule
def _eigenvalues_rule(data, problem):
    w, v = _followed_pairs(data, problem)

    def back(dw):
        # dλᵢ = vᵢᵀ dA vᵢ: the cotangent of A's stored values is Σᵢ λ̄ᵢ vᵢ[r] vᵢ[c]
        return (problem.layout.slots(v * (dw if _followed(dw) else np.asarray(dw)), v),)

    return w.copy(), back


@_eigenvalues.jvp_rule
def _eigenvalues_jvp(tangents, data, problem):
    w, v = _followed_pairs(data, problem)
    if tangents[0] is None:
        return w.copy(), None
    change = _followed_product(problem, data, tangents[0], v)
    return w.copy(), np.sum(v * change, axis=0)


@_eigenvectors.rule
def _eigenvectors_rule(data, problem):
    w, v = _followed_pairs(data, problem)

    def back(dv):
        # dvᵢ = -(A - λᵢ)⁺ Pᵢ dA vᵢ (Pᵢ = I - vᵢ vᵢᵀ): Ā = Σᵢ zᵢ vᵢᵀ, zᵢ = -Pᵢ (A - λᵢ)⁺ Pᵢ v̄ᵢ
        dv = dv if _followed(dv) else np.asarray(dv, float)
        z = np.stack([_complement_solve(data, problem, w, v, i, dv[:, i])
                      for i in range(len(w))], axis=1)
        return (problem.layout.slots(z, v),)

    return v.copy(), back


@_eigenvectors.jvp_rule
def _eigenvectors_jvp(tangents, data, problem):
    w, v = _followed_pairs(data, problem)
    if tangents[0] is None:
        return v.copy(), None
    change = _followed_product(problem, data, tangents[0], v)
    return v.copy(), np.stack([_complement_solve(data, problem, w, v, i, change[:, i])
                               for i in range(len(w))], axis=1)


def _closed_over(name, A):
    """``A``, or of a ``LinearOperator``, one whose products refuse the values a
    differentiation follows (read from the closure of its functions): ARPACK writes them into
    its own work array, and mutad differentiates the eigenpairs of a matrix only."""
    if not isinstance(A, _splinalg.LinearOperator):
        return A

    def checked(product):
        def call(v):
            y = product(v)
            if _followed(y):
                _refuse(f"scipy.sparse.linalg.{name} of a LinearOperator whose products depend "
                        "on differentiated values (its functions read them from their "
                        "closure)", "mutad differentiates the eigenpairs of a matrix: pass the "
                        "matrix itself (a dense array or a sparse matrix of the traced "
                        "values).")
            return y
        return call

    return _splinalg.LinearOperator(A.shape, matvec=checked(A.matvec),
                                    rmatvec=checked(A.rmatvec), matmat=checked(A.matmat),
                                    dtype=A.dtype)


def _settled_matrix(x, what):
    """``settled(x)``, of a sparse matrix holding constants too: SciPy's matrix of their
    values."""
    if isinstance(x, TracedSparse):
        return x.layout.build(settled(x.data, what))
    return settled(x, what)


def _eigsh(A: Any, k: int = 6, M: Any = None, sigma: Any = None, which: str = "LM",
           v0: Any = None, ncv: int | None = None, maxiter: int | None = None, tol: float = 0,
           return_eigenvectors: bool = True, Minv: Any = None, OPinv: Any = None,
           mode: str = "normal", rng: Any = None) -> Any:
    settings = dict(M=M, sigma=sigma, which=which, v0=v0, ncv=ncv, maxiter=maxiter, tol=tol,
                    Minv=Minv, OPinv=OPinv, mode=mode, rng=rng)
    if not _followed(A, *settings.values()):
        return SCIPY["eigsh"](_closed_over("eigsh", A), k,
                              return_eigenvectors=return_eigenvectors, **settings)
    traced = [n for n, x in settings.items() if any(carries_derivative(y) for y in _leaves([x]))
              or isinstance(x, TracedSparse) and carries_derivative(x.data)]
    if Minv is not None or isinstance(M, _splinalg.LinearOperator):
        _refuse("scipy.sparse.linalg.eigsh of a generalized problem with Minv, or with M a "
                "LinearOperator, of traced values", "pass M as a matrix (dense or sparse), "
                "and leave Minv out.")
    if traced == ["M"]:
        return _eigsh_traced_mass(A, k, settings, return_eigenvectors)
    if traced:
        _refuse(f"scipy.sparse.linalg.eigsh with traced settings ({', '.join(traced)})",
                "pass them as constants; the eigenpairs' derivative is in the stored values "
                "of A and M.")
    # (a constant the function computed, a start v0 or a mass matrix, as its plain value)
    settings = {n: _settled_matrix(x, f"scipy.sparse.linalg.eigsh's {n} computed in the "
                                      "function") for n, x in settings.items()}
    layout, data = _spectral_matrix_of(A, "eigsh")
    problem = _Eigenproblem(layout, k, settings, return_eigenvectors)
    w = _eigenvalues(data, problem=problem)
    if not return_eigenvectors:
        return w
    return w, _eigenvectors(data, problem=problem)


eigsh = _route(SCIPY["eigsh"], _eigsh)


def _eigsh_operand(X):
    """The plain matrix SciPy's ``eigsh`` takes for ``X`` (a sparse matrix, traced or not, or
    a dense array), and its dense matrix as mutad follows it."""
    if isinstance(X, np.ndarray) and not wrapped(X):
        return X, X
    layout, data = _spectral_matrix_of(X, "eigsh")
    return layout.build(stop_gradient(data)), _followed_dense(layout, data)


def _eigsh_traced_mass(A, k, settings, vectors):
    """``eigsh(A, k, M=M)`` of a mass matrix ``M`` with traced values: SciPy's pairs of the
    plain matrices, with the derivatives of the same pairs of the dense generalized problem
    (``scipy.linalg.eigh(A, M)``, differentiated in both, to every order): each of SciPy's
    eigenvalues matched to the dense one it is (a simple one, else refused), each eigenvector
    (M-orthonormal in both) to the dense one of the same sign."""
    matrix, dense = _eigsh_operand(A)
    mass, dense_mass = _eigsh_operand(settings["M"])
    plain = {**{n: _settled_matrix(x, f"scipy.sparse.linalg.eigsh's {n} computed in the "
                                      "function") for n, x in settings.items()}, "M": mass}
    found = SCIPY["eigsh"](matrix, k, return_eigenvectors=vectors, **plain)
    w = found[0] if vectors else found
    all_w, all_v = scipy.linalg.eigh(dense, dense_mass)
    plain_w, plain_v = np.asarray(stop_gradient(all_w)), np.asarray(stop_gradient(all_v))
    scale = max(np.abs(plain_w).max(), np.finfo(float).tiny)
    picked = []
    for value in w:
        j = int(np.argmin(np.abs(plain_w - value)))
        others = np.delete(plain_w, j)
        if abs(plain_w[j] - value) > 1e-8 * scale or (
                others.size and np.abs(others - plain_w[j]).min() <= 1e-8 * scale):
            _refuse("scipy.sparse.linalg.eigsh with a traced M of an eigenvalue that is "
                    "repeated, or that the dense problem does not reproduce", "mutad "
                    "differentiates simple eigenvalues of A v = λ M v, M positive definite.")
        picked.append(j)
    values = scipys_value(w, all_w[picked])
    if not vectors:
        return values
    v = found[1]
    # SciPy's vectors, M-orthonormal (mode 'normal'), are the dense ones up to their sign
    overlaps = np.einsum("ij,ij->j", v, np.asarray(mass @ plain_v[:, picked]))
    if not np.allclose(np.abs(overlaps), 1.0, rtol=0.0, atol=1e-6):
        _refuse("scipy.sparse.linalg.eigsh with a traced M whose eigenvectors are not "
                "M-orthonormal (a mode other than 'normal', or an M that is not positive "
                "definite)", "mutad differentiates A v = λ M v of a positive definite M in "
                "mode='normal'.")
    return values, scipys_value(v, all_v[:, picked] * np.sign(overlaps))



# ----------------------------------------------------------------------------------------------
# eigs and svds: eigenpairs of a general sparse matrix, singular triplets


class _GeneralEigenproblem:
    """One ``eigs`` call of a traced real matrix (``layout``): SciPy's (ARPACK's) eigenvalues
    ``w`` and unit eigenvectors ``v`` of the plain values, computed once per distinct set of
    values, and for each returned eigenvalue its left eigenvector ``l`` (a row: ``l A = λ l``,
    scaled so that ``l v = 1``), by inverse iteration with SuperLU on ``Aᵀ - λ I``."""

    def __init__(self, layout, k, options, vectors):
        self.layout, self.k, self.options, self.vectors = layout, k, options, vectors
        self.key, self.pairs = None, None

    def value(self, data):
        key = np.ascontiguousarray(data).tobytes()
        if self.key != key:
            matrix = self.layout.build(data)
            if self.vectors:
                w, v = SCIPY["eigs"](matrix, self.k, **self.options)
            else:
                w = SCIPY["eigs"](matrix, self.k, return_eigenvectors=False, **self.options)
                _distinct("eigs", w, "eigenvalues")
                pw, pv = SCIPY["eigs"](matrix, self.k, **self.options)
                v, = _matched("eigs", w, pw, [pv], "eigenvalues")
            scale = _distinct("eigs", w, "eigenvalues")
            stored = self.layout.stored(data)
            _require_simple("eigs", stored, w, v)
            left = np.stack([self._left(stored, w[i], v[:, i], scale) for i in range(len(w))],
                            axis=1)
            self.key, self.pairs = key, (w, v, left)
        return self.pairs

    @staticmethod
    def _left(matrix, lam, vi, scale):
        n = matrix.shape[0]
        shifted = (matrix.T.astype(complex) - lam * SCIPY["csc_matrix"](_sparse.eye(n))).tocsc()
        x = None
        for nudge in (0.0, 1e-13, 1e-11):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lu = SCIPY["splu"]((shifted - nudge * scale * _sparse.eye(n)).tocsc())
                x = np.conj(vi) + 1e-3
                for _ in range(3):
                    x = lu.solve(x)
                    x = x / np.linalg.norm(x)
                if np.all(np.isfinite(x)):
                    break
            except RuntimeError:
                x = None
        size = max(float(_splinalg.norm(matrix, 1)), np.finfo(float).tiny)
        if x is None or not np.all(np.isfinite(x)) or (
                np.linalg.norm(matrix.T @ x - lam * x) > 1e-8 * size):
            raise UnsupportedOperationError(
                "scipy.sparse.linalg.eigs: the left eigenvector its derivative needs was not "
                "found (the eigenvalue is not simple, or the matrix too ill-conditioned). "
                "Make the matrix dense and use scipy.linalg.eig.")
        d = x @ vi
        if abs(d) <= 1e-8:
            _refuse("scipy.sparse.linalg.eigs of an eigenvalue whose left and right "
                    "eigenvectors are nearly orthogonal (a defective or nearly defective "
                    "eigenvalue)", "it has no derivative (or one beyond double precision).")
        return x / d

    def vector_solve(self, data, i, rhs, adjoint=False):
        """The solution ``y`` of ``(A - λᵢ I) y = rhs`` with ``vᵢᴴ y = 0`` (``adjoint``: of
        ``(Aᵀ - conj(λᵢ) I) y = rhs``)."""
        w, v, _ = self.value(data)
        matrix = self.layout.stored(data)
        n = matrix.shape[0]
        if adjoint:
            shifted = matrix.T.astype(complex) - np.conj(w[i]) * _sparse.eye(n)
        else:
            shifted = matrix.astype(complex) - w[i] * _sparse.eye(n)
        return _bordered_solve("eigs", shifted.tocsc(), v[:, i], rhs)


def _phase_free(name, v, dv):
    """Refuse a loss that reads the phases of complex eigenvectors or singular vectors: the
    change of the loss along vᵢ → vᵢ e^{iφ} is φ Im(vᵢᴴ v̄ᵢ)."""
    phases = np.imag(np.sum(np.conj(v) * dv, axis=0))
    squared = np.sum(np.abs(dv) ** 2, axis=0)
    if np.any(phases * phases > 1e-12 * np.maximum(squared, np.finfo(float).tiny)):
        raise UnsupportedOperationError(
            f"scipy.sparse.linalg.{name}: the loss depends on the phases of complex "
            "eigenvectors, which are arbitrary (ARPACK's choice, not a differentiable function "
            "of the matrix), so it has no gradient. Differentiate quantities that do not "
            "depend on them, such as np.abs(v) ** 2, or fix the phase in your own code "
            "(v * (v[k].conj() / np.abs(v[k]))).")


def _general_first_order(*items):
    if _followed(*items):
        _refuse("scipy.sparse.linalg.eigs and svds under a differentiation of a "
                "differentiation (a hessian, a gradient of a gradient)", "their rules are of "
                "the first order; make the matrix dense and use scipy.linalg.eig or svd.")


def _general_values_value(data, problem):
    return problem.value(data)[0].copy(order="K")


def _general_vectors_value(data, problem):
    return problem.value(data)[1].copy(order="K")


_general_values = Adjoint(_general_values_value)
_general_vectors = Adjoint(_general_vectors_value)


@_general_values.rule
def _general_values_rule(data, problem):
    _general_first_order(data)
    w, v, left = problem.value(data)

    def back(dw):
        # dλᵢ = lᵢ dA vᵢ: Ā = Re Σᵢ λ̄ᵢ conj(lᵢ)ᵀ conj(vᵢ)ᵀ (the adjoint for Re<a, b>)
        _general_first_order(dw)
        dw = np.asarray(dw)
        return (np.real(problem.layout.slots(np.conj(left) * dw, np.conj(v))),)

    return _general_values_value(data, problem), back


@_general_values.jvp_rule
def _general_values_jvp(tangents, data, problem):
    _general_first_order(data, tangents[0])
    w, v, left = problem.value(data)
    if tangents[0] is None:
        return _general_values_value(data, problem), None
    change = problem.layout.build(np.asarray(tangents[0], float)) @ v
    return _general_values_value(data, problem), np.sum(left * change, axis=0)


@_general_vectors.rule
def _general_vectors_rule(data, problem):
    _general_first_order(data)
    w, v, left = problem.value(data)

    def back(dv):
        # dvᵢ = y, (A - λᵢ) y = -(I - vᵢ lᵢ) dA vᵢ, vᵢᴴ y = 0: with aᵢ the adjoint solve of
        # v̄ᵢ and qᵢ = (I - vᵢ lᵢ)ᴴ aᵢ, Ā = -Re Σᵢ qᵢ conj(vᵢ)ᵀ
        _general_first_order(dv)
        dv = np.asarray(dv)
        _phase_free("eigs", v, dv)
        q = np.zeros_like(v)
        for i in range(len(w)):
            if np.any(dv[:, i]):
                a = problem.vector_solve(data, i, dv[:, i], adjoint=True)
                q[:, i] = a - np.conj(left[:, i]) * (np.conj(v[:, i]) @ a)
        return (-np.real(problem.layout.slots(q, np.conj(v))),)

    return _general_vectors_value(data, problem), back


@_general_vectors.jvp_rule
def _general_vectors_jvp(tangents, data, problem):
    _general_first_order(data, tangents[0])
    w, v, left = problem.value(data)
    if tangents[0] is None:
        return _general_vectors_value(data, problem), None
    change = problem.layout.build(np.asarray(tangents[0], float)) @ v
    dw = np.sum(left * change, axis=0)
    return _general_vectors_value(data, problem), np.stack([problem.vector_solve(data, i, -(change[:, i] - dw[i] * v[:, i]))
                               for i in range(len(w))], axis=1)


def _spectral_settings(name, settings, A):
    traced = [n for n, x in settings.items() if any(carries_derivative(y) for y in _leaves([x]))
              or isinstance(x, TracedSparse)]
    if traced:
        _refuse(f"scipy.sparse.linalg.{name} with traced settings ({', '.join(traced)})",
                "pass them as constants; the derivative is in A's stored values.")
    return {n: settled(x, f"scipy.sparse.linalg.{name}'s {n} computed in the function")
            for n, x in settings.items()}


def _spectral_matrix_of(A, name):
    """The layout and stored values of the matrix of eigsh, eigs or svds: a sparse matrix's,
    or a dense one's with traced values (SciPy takes one too: each entry a stored value, and
    SciPy given the dense array in the user's memory order, ``_dense_matrix_of``)."""
    if isinstance(A, TracedSparse) or _sparse.issparse(A):
        return _matrix_of(A, name)
    if innermost((A,)) is not None and isinstance(memory(A), np.ndarray):
        return _dense_matrix_of(A, name)
    _refuse(f"scipy.sparse.linalg.{name} of a matrix that is neither a scipy.sparse matrix nor "
            "a NumPy array inside a differentiated function (a LinearOperator, say)",
            "pass a scipy.sparse matrix or a dense array.")


def _eigs(A: Any, k: int = 6, M: Any = None, sigma: Any = None, which: str = "LM",
          v0: Any = None, ncv: int | None = None, maxiter: int | None = None, tol: float = 0,
          return_eigenvectors: bool = True, Minv: Any = None, OPinv: Any = None,
          OPpart: Any = None, rng: Any = None) -> Any:
    settings = dict(M=M, sigma=sigma, which=which, v0=v0, ncv=ncv, maxiter=maxiter, tol=tol,
                    Minv=Minv, OPinv=OPinv, OPpart=OPpart, rng=rng)
    if not _followed(A, *settings.values()):
        return SCIPY["eigs"](_closed_over("eigs", A), k,
                             return_eigenvectors=return_eigenvectors, **settings)
    settings = _spectral_settings("eigs", settings, A)
    if M is not None or Minv is not None:
        _refuse("scipy.sparse.linalg.eigs of a generalized problem (M) of traced values",
                "mutad differentiates the standard problem A v = λ v only.")
    layout, data = _spectral_matrix_of(A, "eigs")
    if np.iscomplexobj(data):
        _refuse("scipy.sparse.linalg.eigs of a complex matrix of traced values",
                "mutad differentiates eigs of real matrices; make it dense and use "
                "scipy.linalg.eig.")
    problem = _GeneralEigenproblem(layout, k, settings, return_eigenvectors)
    w = _general_values(data, problem=problem)
    if not return_eigenvectors:
        return w
    return w, _general_vectors(data, problem=problem)


eigs = _route(SCIPY["eigs"], _eigs)


class _SingularProblem:
    """One ``svds`` call of a traced real matrix: SciPy's ``u, s, vh`` of the plain values,
    once per distinct set of values. The singular vectors' derivatives are the eigenvectors'
    of ``B = [[0, A], [Aᵀ, 0]]``, whose unit eigenvector of ``σᵢ`` is ``xᵢ = [uᵢ; vᵢ] / √2``."""

    def __init__(self, layout, k, options, vectors):
        self.layout, self.k, self.options, self.vectors = layout, k, options, vectors
        self.key, self.triplets = None, None

    def value(self, data):
        key = np.ascontiguousarray(data).tobytes()
        if self.key != key:
            matrix = self.layout.build(data)
            if self.vectors:
                u, s, vh = SCIPY["svds"](matrix, self.k, **self.options)
            else:
                s = SCIPY["svds"](matrix, self.k, return_singular_vectors=False,
                                  **self.options)
                _distinct("svds", s, "singular values")
                pu, ps, pvh = SCIPY["svds"](matrix, self.k, **self.options)
                u, v = _matched("svds", s, ps, [pu, pvh.T], "singular values")
                vh = v.T
            _distinct("svds", s, "singular values")
            self.key, self.triplets = key, (u, s, vh)
            scale = max(float(np.max(s)), np.finfo(float).tiny)
            if np.min(s) <= 1e-8 * scale:
                _refuse("scipy.sparse.linalg.svds of a matrix with a zero singular value among "
                        "those returned", "σ = |·| has no derivative at 0; ask for larger ones.")
            for i in range(len(s)):  # each singular value simple among all of A's
                x = np.concatenate([u[:, i], vh[i]]) / np.sqrt(2.0)
                probe = np.cos(np.arange(x.size) + 0.5)
                self.vector_solve(data, i, probe - x * (x @ probe), values=True)
        return self.triplets

    def vector_solve(self, data, i, rhs, values=False):
        """The solution ``y`` of ``(B - σᵢ I) y = rhs`` with ``xᵢᵀ y = 0``."""
        u, s, vh = self.value(data)
        m, n = self.layout.shape
        scale = max(float(np.max(s)), np.finfo(float).tiny)
        if s[i] <= 1e-8 * scale:
            _refuse("scipy.sparse.linalg.svds: the singular vectors of a zero singular value",
                    "they are not defined; differentiate the singular values alone.")
        matrix = SCIPY["csc_matrix"](self.layout.stored(data))
        b = SCIPY["bmat"]([[None, matrix], [matrix.T, None]], format="csc")
        x = np.concatenate([u[:, i], vh[i]]) / np.sqrt(2.0)
        return _bordered_solve("svds", (b - s[i] * _sparse.eye(m + n)).tocsc(), x, rhs, values)


def _like(x):
    """A copy of ``x`` laid out in memory as ``x`` is (SciPy's ``svds`` returns reversed views,
    and a later reduction sums in memory order)."""
    flips = tuple(i for i, stride in enumerate(x.strides) if stride < 0)
    return np.flip(np.flip(x, flips).copy(order="K"), flips) if flips else x.copy(order="K")


def _singular_values_value(data, problem):
    return _like(problem.value(data)[1])


def _singular_vectors_value(data, problem, side):
    u, _, vh = problem.value(data)
    return _like(u if side == "u" else vh)


_singular_values = Adjoint(_singular_values_value)
_singular_values.complex_values = None
_singular_vectors = Adjoint(_singular_vectors_value)
_singular_vectors.complex_values = None


@_singular_values.rule
def _singular_values_rule(data, problem):
    _general_first_order(data)
    u, s, vh = problem.value(data)

    def back(ds):
        # dσᵢ = uᵢᵀ dA vᵢ
        _general_first_order(ds)
        return (problem.layout.slots(u * np.asarray(ds), vh.T),)

    return _singular_values_value(data, problem), back


@_singular_values.jvp_rule
def _singular_values_jvp(tangents, data, problem):
    _general_first_order(data, tangents[0])
    u, s, vh = problem.value(data)
    value = _singular_values_value(data, problem)
    if tangents[0] is None:
        return value, None
    return value, np.sum(u * (problem.layout.build(np.asarray(tangents[0], float)) @ vh.T),
                         axis=0)


@_singular_vectors.rule
def _singular_vectors_rule(data, problem, side):
    _general_first_order(data)
    u, s, vh = problem.value(data)
    m = u.shape[0]
    root = np.sqrt(2.0)

    def back(dy):
        # [duᵢ; dvᵢ] = √2 y, (B - σᵢ) y = -(I - xᵢ xᵢᵀ) dB xᵢ, xᵢᵀ y = 0: with aᵢ the solve
        # of √2 [ūᵢ; v̄ᵢ] and qᵢ = aᵢ - xᵢ (xᵢᵀ aᵢ), Ā = -(q_top x_botᵀ + x_top q_botᵀ)
        _general_first_order(dy)
        dy = np.asarray(dy, float)
        x = np.concatenate([u, vh.T]) / root
        dx = np.zeros_like(x)
        if side == "u":
            dx[:m] = dy
        else:
            dx[m:] = dy.T
        q = np.zeros_like(x)
        for i in range(len(s)):
            if np.any(dx[:, i]):
                a = problem.vector_solve(data, i, root * dx[:, i])
                q[:, i] = a - x[:, i] * (x[:, i] @ a)
        return (-(problem.layout.slots(q[:m], x[m:]) + problem.layout.slots(x[:m], q[m:])),)

    return _singular_vectors_value(data, problem, side), back


@_singular_vectors.jvp_rule
def _singular_vectors_jvp(tangents, data, problem, side):
    _general_first_order(data, tangents[0])
    u, s, vh = problem.value(data)
    value = _singular_vectors_value(data, problem, side)
    if tangents[0] is None:
        return value, None
    m = u.shape[0]
    da = problem.layout.build(np.asarray(tangents[0], float))
    x = np.concatenate([u, vh.T]) / np.sqrt(2.0)
    change = np.concatenate([da @ x[m:], da.T @ x[:m]])  # dB x
    ds = np.sum(x * change, axis=0)
    dx = np.sqrt(2.0) * np.stack(
        [problem.vector_solve(data, i, -(change[:, i] - ds[i] * x[:, i]))
         for i in range(len(s))], axis=1)
    return value, (dx[:m] if side == "u" else dx[m:].T.copy())


def _svds(A: Any, k: int = 6, ncv: int | None = None, tol: float = 0, which: str = "LM",
          v0: Any = None, maxiter: int | None = None, return_singular_vectors: Any = True,
          solver: str = "arpack", rng: Any = None, options: Any = None, **kwargs: Any) -> Any:
    settings = dict(ncv=ncv, tol=tol, which=which, v0=v0, maxiter=maxiter, solver=solver,
                    options=options, **kwargs)
    if rng is not None:  # (passed on only when given: SciPy refuses it beside random_state=)
        settings["rng"] = rng
    if not _followed(A, *settings.values()):
        return SCIPY["svds"](A, k, return_singular_vectors=return_singular_vectors, **settings)
    settings = _spectral_settings("svds", settings, A)
    if return_singular_vectors not in (True, False):
        _refuse(f"scipy.sparse.linalg.svds(return_singular_vectors={return_singular_vectors!r})"
                " of traced values", "pass True or False.")
    layout, data = _spectral_matrix_of(A, "svds")
    if np.iscomplexobj(data):
        _refuse("scipy.sparse.linalg.svds of a complex matrix of traced values",
                "make it dense and use scipy.linalg.svd.")
    problem = _SingularProblem(layout, k, settings, return_singular_vectors)
    s = _singular_values(data, problem=problem)
    if not return_singular_vectors:
        return s
    return (_singular_vectors(data, problem=problem, side="u"), s,
            _singular_vectors(data, problem=problem, side="vh"))


svds = _route(SCIPY["svds"], _svds)



# ----------------------------------------------------------------------------------------------
# csgraph's shortest paths of a traced graph: SciPy's distances and predecessors, each distance
# differentiated as the sum of the weights of the edges on SciPy's path (the derivative of the
# minimum over paths where one path is shortest; at a tie, that of the path SciPy chose)


def _graph_weights(csgraph, directed):
    """SciPy's plain graph for ``csgraph`` (a traced sparse matrix or dense array), and the
    traced dense weights ``W[u, v]`` of the edges a path takes from ``u`` to ``v``: of an
    undirected graph, the lighter of ``csgraph[u, v]`` and ``csgraph[v, u]`` where both are
    edges, as SciPy's search relaxes both."""
    if isinstance(csgraph, (TracedSparse, _Assembled)):
        graph = _lift(csgraph)
        plain, W = graph.value, graph.toarray()
        # stored entries are edges, explicit zeros too, but not the zeros of a dense array
        # (or a sum, a product) SciPy's matrix leaves out, which mutad keeps for their derivative
        stored = graph.layout.valid
        if graph.layout.drops:
            stored = stored & ~graph.layout.left_out(memory(graph.data))
        edge = np.zeros(graph.shape, bool)
        edge[graph.layout.rows[stored], graph.layout.cols[stored]] = True
    else:
        W = csgraph
        plain = np.array(memory(csgraph), dtype=float)
        edge = (plain != 0) & np.isfinite(plain)  # SciPy's dense graph: 0, inf, nan no edge
    if directed:
        return plain, W
    numbers = np.where(edge, memory(W), np.inf)
    return plain, np.where(edge & (numbers <= numbers.T), W, np.transpose(W))


def _along_paths(W, predecessors):
    """The traced lengths of the paths the ``predecessors`` (SciPy's, one row per source, -9999
    at a source and an unreached node) describe: ``D[r, j] = D[r, p] + W[p, j]``, ``p =
    predecessors[r, j]``, level by level from the sources."""
    P = np.reshape(predecessors, (-1, np.shape(predecessors)[-1]))
    rows, cols = np.arange(P.shape[0])[:, None], np.arange(P.shape[1])[None, :]
    has = P >= 0
    parent = np.where(has, P, 0)
    depth = np.where(has, -1, 0)
    while True:
        ready = (depth < 0) & (depth[rows, parent] >= 0)
        if not ready.any():
            break
        depth[ready] = depth[rows, parent][ready] + 1
    D = np.zeros(P.shape)
    for level in range(1, depth.max(initial=0) + 1):
        D = np.where(depth == level, D[rows, parent] + W[parent, cols], D)
    return np.reshape(D, np.shape(predecessors))


def _shortest_paths(name):
    signature = inspect.signature(getattr(_csgraph, name))

    def stand_in(*args, **kwargs):
        # (an attribute holds SciPy's function: the allocation mode swaps routed functions in
        # closures, where a program's `from scipy.sparse.csgraph import dijkstra` reaches it)
        scipy_function = stand_in.scipy
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        if not _followed(given["csgraph"]):
            return scipy_function(*args, **kwargs)
        for argument, value in given.items():
            if argument != "csgraph" and _followed(value):
                _refuse(f"scipy.sparse.csgraph.{name} of a traced {argument}",
                        f"pass {argument} as a constant.")
        plain, W = _graph_weights(given["csgraph"], given["directed"])
        # SciPy's search of the plain weights (its paths; with unweighted=True, its counts of
        # edges, returned as they are): a replay would keep this call's
        not_replayed(f"scipy.sparse.csgraph.{name} of a traced graph, whose paths SciPy finds "
                     "on its plain weights outside a recorded step")
        settings = dict(given, csgraph=plain, return_predecessors=True)
        if "overwrite" in settings:
            settings["overwrite"] = False
        dist, predecessors, *sources = scipy_function(**settings)
        if not given["unweighted"]:  # (a count of edges: no derivative)
            lengths = _along_paths(W, predecessors)
            if not reproduces(dist, lengths):
                _refuse(f"scipy.sparse.csgraph.{name}: the distances are not the lengths of "
                        "the paths of its predecessors (a negative cycle?)",
                        "differentiate a graph whose shortest paths SciPy finds.")
            dist = scipys_value(dist, lengths)
        if given["return_predecessors"]:
            return (dist, predecessors, *sources)
        return dist

    stand_in.__signature__ = signature.replace(  # (SciPy's, annotated)
        parameters=[p.replace(annotation=Any) for p in signature.parameters.values()],
        return_annotation=Any)
    stand_in.scipy = getattr(_csgraph, name)
    return _route(stand_in.scipy, stand_in)


shortest_path, dijkstra, bellman_ford, johnson, floyd_warshall = (
    _shortest_paths(name)
    for name in ("shortest_path", "dijkstra", "bellman_ford", "johnson", "floyd_warshall"))


def _minimum_spanning_tree(csgraph: Any, overwrite: bool = False) -> Any:
    """``scipy.sparse.csgraph.minimum_spanning_tree`` of a traced graph: SciPy's tree of the
    plain weights (a choice among the edges), of SciPy's class, its stored values the traced
    weights of the edges it chose (SciPy copies them from the graph), so that a derivative of
    the tree's values is that of the chosen edges' weights (at a tie, of the tree SciPy
    chose)."""
    if not _followed(csgraph):
        return SCIPY["minimum_spanning_tree"](csgraph, overwrite)
    plain, W = _graph_weights(csgraph, directed=True)
    tree = SCIPY["minimum_spanning_tree"](plain)
    rows = np.repeat(np.arange(tree.shape[0]), np.diff(tree.indptr))
    data = W[rows, tree.indices]
    if not reproduces(tree.data, data):
        _refuse("scipy.sparse.csgraph.minimum_spanning_tree: the tree's values are not the "
                "graph's weights at its edges (a sparse graph with duplicate entries?)",
                "pass the graph as a dense array or a canonical sparse matrix.")
    return _SOLUTION_CLASSES[type(tree)]((scipys_value(tree.data, data), tree.indices,
                                          tree.indptr), shape=tree.shape)


minimum_spanning_tree = _route(SCIPY["minimum_spanning_tree"], _minimum_spanning_tree)


# ----------------------------------------------------------------------------------------------
# csgraph.laplacian: SciPy's steps, on a traced graph


def _laplacian(csgraph: Any, normed: bool = False, return_diag: bool = False,
               use_out_degree: bool = False, *, copy: bool = True, form: str = "array",
               dtype: Any = None, symmetrized: bool = False) -> Any:
    """``scipy.sparse.csgraph.laplacian`` of a traced graph: SciPy's ``_laplacian_sparse`` or
    ``_laplacian_dense``, step by step on the traced matrix or array (SciPy's own code would
    take a traced sparse matrix for a dense array and convert it), so its values are SciPy's
    and each step is differentiated by its own rule. ``form='function'`` and ``'lo'`` (a
    LinearOperator of the stored values) are refused by name."""
    if not _followed(csgraph):
        return SCIPY["laplacian"](csgraph, normed, return_diag, use_out_degree, copy=copy,
                                  form=form, dtype=dtype, symmetrized=symmetrized)
    if form != "array":
        _refuse(f"scipy.sparse.csgraph.laplacian(form={form!r}) of a traced graph",
                "pass form='array' (the default) and multiply by the matrix it returns.")
    if len(np.shape(csgraph)) != 2 or np.shape(csgraph)[0] != np.shape(csgraph)[1]:
        raise ValueError("csgraph must be a square matrix or array")
    if normed and np.dtype(csgraph.dtype).kind in "iu":  # (a traced graph is a float one)
        csgraph = csgraph.astype(np.float64)
    axis = 1 if use_out_degree else 0
    if isinstance(csgraph, TracedSparse) or _sparse.issparse(csgraph):
        lap, w = _laplacian_sparse(csgraph, normed, axis, copy, dtype, symmetrized)
    else:
        lap, w = _laplacian_dense(csgraph, normed, axis, copy, dtype, symmetrized)
    return (lap, w) if return_diag else lap


def _laplacian_sparse(graph, normed, axis, copy, dtype, symmetrized):
    """SciPy's ``_laplacian_sparse``: the same conversions (sharing the graph's stored values
    where ``copy=False``, so that the scalings write into them, as SciPy's), in-place scalings
    and ``setdiag``."""
    if dtype is None:
        dtype = graph.dtype
    needs_copy = False
    if graph.format in ("lil", "dok"):
        m = graph.tocoo()
    else:
        m = graph
        needs_copy = bool(copy)
    if symmetrized:
        m = m + m.T  # SciPy's m += m.T.conj(): a new matrix (sparse += is not in place)
    degree = m.sum(axis=axis)
    degree = degree.array if isinstance(degree, TracedMatrix) else degree
    w = np.ravel(degree) - m.diagonal()
    if normed:
        m = m.tocoo(copy=needs_copy)
        isolated = w == 0  # a decision: isolated nodes keep 1 on the diagonal, as SciPy's
        w = np.where(isolated, 1, np.sqrt(w))
        m.data /= w[m.row]
        m.data /= w[m.col]
        m.data *= -1
        m.setdiag(1 - isolated)
    else:
        m = m.copy() if m.format == "dia" else m.tocoo(copy=needs_copy)
        m.data *= -1
        m.setdiag(w)
    return m.astype(dtype, copy=False), w.astype(dtype)


def _laplacian_dense(graph, normed, axis, copy, dtype, symmetrized):
    """SciPy's ``_laplacian_dense``, its writes into the copy (with ``copy=False``, into the
    graph itself, as SciPy's) followed."""
    if dtype is None:
        dtype = graph.dtype
    m = np.copy(graph) if copy else graph
    if symmetrized:
        m += m.T
    np.fill_diagonal(m, 0)
    w = m.sum(axis=axis)
    diagonal = slice(None, None, len(w) + 1)
    if normed:
        isolated = w == 0
        w = np.where(isolated, 1, np.sqrt(w))
        m /= w
        m /= w[:, np.newaxis]
        m *= -1
        m.flat[diagonal] = 1 - isolated
    else:
        m *= -1
        m.flat[diagonal] = w
    return m.astype(dtype, copy=False), w.astype(dtype, copy=False)


laplacian = _route(SCIPY["laplacian"], _laplacian)


# ----------------------------------------------------------------------------------------------
# expm_multiply: e^A B


def _expm_apply_value(data, b, layout, traceA, grid):
    return SCIPY["expm_multiply"](layout.build(data), b, traceA=traceA, **dict(grid))


def _expm_apply_dense_value(a, b, traceA, grid):
    return SCIPY["expm_multiply"](a, b, traceA=traceA, **dict(grid))


def _grid_times(grid):
    """The times of SciPy's grid (``start``, ``stop``, ``num``, ``endpoint``, as
    ``np.linspace`` takes them, SciPy's defaults), or None for the single product e^A B."""
    if not grid:
        return None
    grid = dict(grid)
    return np.linspace(grid.pop("start"), grid.pop("stop"),
                       **{k: v for k, v in grid.items() if v is not None})


_expm_apply = Adjoint(_expm_apply_value)
_expm_apply.complex_values = None
_expm_apply_dense = Adjoint(_expm_apply_dense_value)
_expm_apply_dense.complex_values = None


def _expm_block(matrix, direction):
    """``[[A, E], [0, A]]``, whose exponential is ``[[e^A, L(A, E)], [0, e^A]]`` (``L`` the
    Fréchet derivative of the exponential)."""
    return SCIPY["bmat"]([[matrix, direction], [None, matrix]], format="csr")


def _expm_cotangents(matrix, b, grid, dy):
    """``(Ā, b̄)`` of e^A B (or of SciPy's grid of e^{tA} B) for the cotangent ``dy``, ``A``
    a sparse matrix of the values (Ā dense)."""
    # b̄ = e^{Aᵀ} ȳ; Ā = L(Aᵀ, ȳ bᵀ): ⟨ȳ, L(A, E) b⟩ = ⟨L(Aᵀ, ȳ bᵀ), E⟩, its columns the top
    # half of exp([[Aᵀ, ȳ bᵀ], [0, Aᵀ]]) [0; I]. On a grid, the sum over the times t of those
    # of e^{tA} B: e^{tAᵀ} ȳ_t and t L(tAᵀ, ȳ_t bᵀ).
    dy = np.asarray(dy, float)
    times = _grid_times(grid)
    transposed = SCIPY["csr_array"](matrix.T)
    n = matrix.shape[0]
    stacked = np.concatenate([np.zeros((n, n)), np.eye(n)])
    db, frechet = np.zeros_like(b), np.zeros((n, n))
    for t, dy_t in ([(1.0, dy)] if times is None else zip(times, dy)):
        dy_t = np.reshape(dy_t, np.shape(b))
        db += SCIPY["expm_multiply"](transposed * t, dy_t)
        outer = np.outer(dy_t, b) if np.ndim(dy_t) == 1 else dy_t @ b.T
        frechet += t * SCIPY["expm_multiply"](
            _expm_block(transposed * t, SCIPY["csr_array"](outer)), stacked)[:n]
    return frechet, db


def _expm_followed_cotangents(a, b, grid, dy):
    """``_expm_cotangents`` where a differentiation follows them (a hessian): the same
    formulas of the dense ``a``, by NumPy's calls and ``expm_multiply`` itself, which the
    enclosing differentiation follows (to every order, densely)."""
    times = _grid_times(grid)
    n = a.shape[0]
    stacked = np.concatenate([np.zeros((n, n)), np.eye(n)])
    db, frechet = 0.0, 0.0
    for t, dy_t in ([(1.0, dy)] if times is None else zip(times, dy)):
        dy_t = np.reshape(dy_t, np.shape(b))
        at = a.T * t
        db = db + expm_multiply(at, dy_t)
        outer = np.outer(dy_t, b) if np.ndim(dy_t) == 1 else dy_t @ b.T
        frechet = frechet + t * expm_multiply(
            np.block([[at, outer], [np.zeros((n, n)), at]]), stacked)[:n]
    return frechet, db


def _expm_followed_tangent(a, da, b, db, grid):
    """``_expm_tangent`` where a differentiation follows it: of the dense ``a`` and ``da``
    (or None), by followed calls as ``_expm_followed_cotangents``."""
    n = a.shape[0]
    top = np.zeros(np.shape(b)) if db is None else db

    def at(t):
        if da is None:
            return expm_multiply(a * t, top)
        return expm_multiply(np.block([[a * t, da * t], [np.zeros((n, n)), a * t]]),
                             np.concatenate([top, b]))[:n]

    times = _grid_times(grid)
    return at(1.0) if times is None else np.stack([at(t) for t in times])


def _followed_dense(layout, data):
    """The dense matrix of ``layout`` holding ``data``, by NumPy's calls (followed)."""
    m, n = layout.shape
    return np.reshape(np.bincount(layout.rows * n + layout.cols, minlength=m * n,
                                  weights=np.where(layout.valid, np.reshape(data, -1), 0.0)),
                      (m, n))


def _expm_tangent(matrix, direction, b, db, grid):
    """The tangent of e^A B (or of SciPy's grid of e^{tA} B) along ``direction`` (Ȧ, a sparse
    matrix, or None) and ``db`` (ḃ, or None), ``A`` a sparse matrix of the values."""
    n = matrix.shape[0]
    top = np.zeros_like(b) if db is None else np.asarray(db, float)

    def at(t):
        if direction is None:
            return SCIPY["expm_multiply"](matrix * t, top)
        # exp([[tA, tȦ], [0, tA]]) [ḃ; b] = [e^{tA} ḃ + L(tA, tȦ) b; e^{tA} b]
        return SCIPY["expm_multiply"](_expm_block(matrix * t, direction * t),
                                      np.concatenate([top, b]))[:n]

    times = _grid_times(grid)
    return at(1.0) if times is None else np.stack([at(t) for t in times])


@_expm_apply.rule
def _expm_apply_rule(data, b, layout, traceA, grid):
    y = _expm_apply(data, b, layout=layout, traceA=traceA, grid=grid)

    def back(dy):
        if _followed(data, b, dy):
            frechet, db = _expm_followed_cotangents(_followed_dense(layout, data), b, grid, dy)
        else:
            frechet, db = _expm_cotangents(layout.build(data), np.asarray(b, float), grid, dy)
        ddata = frechet[layout.rows, layout.cols]
        if layout.padded:
            ddata = np.where(layout.valid, ddata, 0.0)
        return np.reshape(ddata, layout.data_shape), db

    return y, back


@_expm_apply.jvp_rule
def _expm_apply_jvp(tangents, data, b, layout, traceA, grid):
    y = _expm_apply(data, b, layout=layout, traceA=traceA, grid=grid)
    ddata, db = tangents
    if ddata is None and db is None:
        return y, None
    if _followed(data, b, *tangents):
        return y, _expm_followed_tangent(
            _followed_dense(layout, data),
            None if ddata is None else _followed_dense(layout, ddata), b, db, grid)
    direction = None if ddata is None else layout.build(np.asarray(ddata, float),
                                                         dropping=False)
    return y, _expm_tangent(layout.build(data), direction, np.asarray(b, float), db, grid)


# A dense A: SciPy's value of the dense array, the derivatives those of its sparse form.

@_expm_apply_dense.rule
def _expm_apply_dense_rule(a, b, traceA, grid):
    y = _expm_apply_dense(a, b, traceA=traceA, grid=grid)

    def back(dy):
        if _followed(a, b, dy):
            return _expm_followed_cotangents(a, b, grid, dy)
        return _expm_cotangents(SCIPY["csr_array"](np.asarray(a, float)),
                                np.asarray(b, float), grid, dy)

    return y, back


@_expm_apply_dense.jvp_rule
def _expm_apply_dense_jvp(tangents, a, b, traceA, grid):
    y = _expm_apply_dense(a, b, traceA=traceA, grid=grid)
    da, db = tangents
    if da is None and db is None:
        return y, None
    if _followed(a, b, *tangents):
        return y, _expm_followed_tangent(a, da, b, db, grid)
    direction = None if da is None else SCIPY["csr_array"](np.asarray(da, float))
    return y, _expm_tangent(SCIPY["csr_array"](np.asarray(a, float)), direction,
                            np.asarray(b, float), db, grid)


def _expm_multiply(A: Any, B: Any, start: Any = None, stop: Any = None, num: Any = None,
                   endpoint: Any = None, traceA: Any = None) -> Any:
    if not _followed(A, B, start, stop, num, endpoint, traceA):
        return SCIPY["expm_multiply"](A, B, start=start, stop=stop, num=num, endpoint=endpoint,
                                      traceA=traceA)
    grid = () if all(x is None for x in (start, stop, num, endpoint)) else (
        ("start", start), ("stop", stop), ("num", num), ("endpoint", endpoint))
    if _followed(start, stop):
        return _expm_multiply_traced_times(A, B, start, stop, num, endpoint, traceA)
    if _followed(traceA):
        _refuse("scipy.sparse.linalg.expm_multiply with a traced traceA", "pass it as a "
                "constant (or leave it out).")
    _dense_rhs(B, "expm_multiply")
    sparse = isinstance(A, TracedSparse) or _sparse.issparse(A)
    if not sparse and not _dense_operand(A):
        _refuse("scipy.sparse.linalg.expm_multiply of a matrix that is neither a scipy.sparse "
                "matrix nor an array inside a differentiated function", "pass a scipy.sparse "
                "matrix or a NumPy array (a LinearOperator has no entries to differentiate).")
    if np.iscomplexobj(getattr(A, "data", 0.0) if sparse else A) or np.iscomplexobj(B):
        _refuse("scipy.sparse.linalg.expm_multiply of complex values", "mutad differentiates "
                "it for real A and B.")
    if not sparse:
        return _expm_apply_dense(A, B, traceA=traceA, grid=grid)
    layout, data = _matrix_of(A, "expm_multiply")
    return _expm_apply(data, B, layout=layout, traceA=traceA, grid=grid)


expm_multiply = _route(SCIPY["expm_multiply"], _expm_multiply)


def _expm_multiply_traced_times(A, B, start, stop, num, endpoint, traceA):
    """SciPy's grid of e^{t_k A} B at times ``np.linspace(start, stop, num, endpoint)`` that
    depend on the differentiated values: SciPy's grid's values, with the derivatives of the
    products e^{(t_k A)} B one time at a time (each differentiated as expm_multiply is, in
    ``t_k A`` and ``B``, to every order)."""
    grid = _expm_multiply(A, B, start=_number(start), stop=_number(stop), num=num,
                          endpoint=endpoint, traceA=traceA)
    times = _grid_times((("start", start), ("stop", stop), ("num", num),
                         ("endpoint", endpoint)))
    composition = np.stack([_expm_multiply(A * t, B) for t in times])
    return scipys_value(stop_gradient(grid), composition)


def _number(x):
    """The plain number a traced scalar holds (None stays None)."""
    return None if x is None else float(stop_gradient(x))



# ----------------------------------------------------------------------------------------------
# lsqr and lsmr: least squares


class _LeastSquares:
    """One ``lsqr`` or ``lsmr`` call: SciPy's solution of ``min ‖A x - b‖² + damp² ‖x‖²`` for the
    plain stored values of ``A`` (``layout``; or the constant ``operator`` the user passed), and
    the solves with the normal matrix ``Bᵀ B = Aᵀ A + damp² I`` its derivatives need, by the same
    method on ``B = [A; damp I]``: ``y``, the least-norm solution of ``Bᵀ y = c``, then
    ``z = argmin ‖B z - y‖``, so ``Bᵀ B z = c``; to ``ADJOINT_RTOL``."""

    def __init__(self, method, layout, operator, damp, options):
        self.method, self.layout, self.operator = method, layout, operator
        self.damp, self.options = damp, options

    def matrix(self, data):
        return self.operator if self.operator is not None else self.layout.build(data)

    def value(self, data, b, guess):
        result = SCIPY[self.method](self.matrix(data), b, damp=self.damp, x0=guess,
                                    **self.options)
        if result[1] in (3, 6, 7):
            raise UnsupportedOperationError(
                f"scipy.sparse.linalg.{self.method}: the solve stopped before it converged "
                f"(istop={result[1]}: the condition limit or the iteration limit), so the "
                "solution it returned has no derivative. Raise conlim or the iteration limit, "
                "or pass damp > 0.")
        self.result = result
        return result[0]

    def normal_solve(self, data, c):
        """``(Aᵀ A + damp² I)⁻¹ c``."""
        a = _splinalg.aslinearoperator(self.matrix(data))
        m, n = a.shape
        if self.damp:
            d = float(self.damp)
            stacked = _splinalg.LinearOperator(
                (m + n, n), matvec=lambda z: np.concatenate([a.matvec(z), d * np.ravel(z)]),
                rmatvec=lambda y: a.rmatvec(y[:m]) + d * np.ravel(y[m:]), dtype=float)
        else:
            stacked = a
        limit = "iter_lim" if self.method == "lsqr" else "maxiter"
        settings = {"atol": ADJOINT_RTOL, "btol": ADJOINT_RTOL, "conlim": 1e12,
                    limit: 20 * (m + n)}
        y = self._checked(SCIPY[self.method](stacked.T, np.asarray(c, float), **settings))
        return self._checked(SCIPY[self.method](stacked, y, **settings))

    def _checked(self, result):
        if result[1] not in (0, 1, 2, 4, 5):  # 0: x = 0; 1, 4: A x = b; 2, 5: least squares
            raise UnsupportedOperationError(
                f"scipy.sparse.linalg.{self.method}: a solve with the normal matrix that its "
                f"derivative needs did not converge (istop={result[1]}): A is rank-deficient "
                "or too ill-conditioned. Pass damp > 0, or a matrix of full column rank.")
        return result[0]


def _least_squares_value(data, b, guess, damp, problem):
    problem.damp = float(damp)
    return problem.value(data, b, guess)


_least_squares = Adjoint(_least_squares_value)
_least_squares.complex_values = None


def _least_squares_first_order(problem, *items):
    if _followed(*items):
        _refuse(f"scipy.sparse.linalg.{problem.method} under a differentiation of a "
                "differentiation (a hessian, a gradient of a gradient)", "its rule is of the "
                "first order; use spsolve of the normal equations, which every order "
                "differentiates.")


@_least_squares.rule
def _least_squares_rule(data, b, guess, damp, problem):
    _least_squares_first_order(problem, data, b, damp)
    x = _least_squares_value(data, b, guess, damp, problem)
    plain_b = np.asarray(b, float)

    def back(dx):
        # (AᵀA + d²I) x = Aᵀ b: λ = (AᵀA + d²I)⁻¹ x̄, b̄ = A λ, Ā = r λᵀ - (A λ) xᵀ (r = b - A x),
        # d̄ = -2 d ⟨λ, x⟩
        _least_squares_first_order(problem, dx)
        lam = problem.normal_solve(data, np.asarray(dx, float))
        a = _splinalg.aslinearoperator(problem.matrix(data))
        a_lam = a.matvec(lam)
        ddata = None
        if problem.layout is not None:
            layout = problem.layout
            ddata = layout.slots(plain_b - a.matvec(x), lam) - layout.slots(a_lam, x)
        return ddata, a_lam, None, -2 * problem.damp * np.dot(lam, x)

    return x, back


@_least_squares.jvp_rule
def _least_squares_jvp(tangents, data, b, guess, damp, problem):
    _least_squares_first_order(problem, data, b, damp, *tangents)
    x = _least_squares_value(data, b, guess, damp, problem)
    ddata, db = tangents[0], tangents[1]
    a = _splinalg.aslinearoperator(problem.matrix(data))
    change = np.zeros(len(np.ravel(b))) if db is None else np.asarray(db, float).copy()
    c = np.zeros(len(x))
    if ddata is not None and problem.layout is not None:
        direction = problem.layout.build(np.asarray(ddata, float), dropping=False)
        c = c + direction.T @ (np.asarray(b, float) - a.matvec(x))
        change = change - direction @ x
    # (AᵀA + d²I) ẋ = Ȧᵀ r + Aᵀ (ḃ - Ȧ x) - 2 d ḋ x
    c = c + a.rmatvec(change)
    if tangents[3] is not None:
        c = c - 2 * problem.damp * float(tangents[3]) * x
    return x, problem.normal_solve(data, c)


def _least_squares_method(method):
    from .optimize import _Refused

    names = {"lsqr": ("r1norm", "r2norm", "anorm", "acond", "arnorm", "xnorm", "var"),
             "lsmr": ("normr", "normar", "norma", "conda", "normx")}[method]

    def solve(A: Any, b: Any, damp: float = 0.0, *args: Any, x0: Any = None,
              **options: Any) -> tuple[Any, ...]:
        parameters = _operator_parameters(A, method)
        if parameters is None and not _followed(A, b, damp, *args, x0, *options.values()):
            return SCIPY[method](A, b, damp, *args, x0=x0, **options)
        if args:
            _refuse(f"scipy.sparse.linalg.{method} with its settings passed by position",
                    "pass atol, btol, ... by name.")
        _dense_rhs(b, method)
        if _followed(*options.values()):
            _refuse(f"scipy.sparse.linalg.{method} with traced settings", "pass them as "
                    "constants; the solution's derivative is in A, b and damp.")
        if options.get("calc_var"):
            _refuse("scipy.sparse.linalg.lsqr(calc_var=True) of traced values", "mutad does "
                    "not differentiate var: leave calc_var out.")
        guess = None if x0 is None else settled(x0, f"{method}'s x0")
        if parameters is not None:
            problem = _OperatorLeastSquares(method, A, parameters, None, options)
            x = _operator_least_squares(b, guess, damp, *parameters.values(), problem=problem)
            return (x, *found_again(x, _stop_and_iterations, problem),
                    *(_Refused(f"scipy.sparse.linalg.{method}(...)'s {name}") for name in names))
        if isinstance(A, TracedSparse) or (isinstance(A, _Assembled) and A.entries):
            layout, data = _matrix_of(A, method)
            problem = _LeastSquares(method, layout, None, None, options)
        elif innermost((A,)) is not None:  # a dense matrix with traced values
            layout, data = _dense_matrix_of(A, method)
            problem = _LeastSquares(method, layout, None, None, options)
        else:  # a constant matrix or operator: the derivative in b alone
            problem = _LeastSquares(method, None, A, None, options)
            data = np.zeros(0)
        x = _least_squares(data, b, guess, damp, problem=problem)
        return (x, *found_again(x, _stop_and_iterations, problem),
                *(_Refused(f"scipy.sparse.linalg.{method}(...)'s {name}") for name in names))

    return _route(SCIPY[method], solve)


def _stop_and_iterations(x, problem):
    """Why SciPy's least-squares solver stopped (istop), and after how many iterations."""
    return problem.result[1], problem.result[2]


class _OperatorLeastSquares(_LeastSquares):
    """``lsqr`` or ``lsmr`` of an operator whose functions read the differentiated values
    ``parameters`` follows: ``_LeastSquares`` of the operator, its functions bound to plain
    values, and the products with ``A(p)`` its derivatives need. With ``r = b - A x`` and
    ``λ = (AᵀA + damp² I)⁻¹ x̄``: ``b̄ = A λ``, ``p̄ = ∂ₚ(⟨r, A(p) λ⟩ - ⟨A λ, A(p) x⟩)`` and
    ``damp̄ = -2 damp ⟨λ, x⟩``; forward mode ``ẋ = (AᵀA + damp² I)⁻¹ (Ȧᵀ r + Aᵀ (ḃ - Ȧ x)
    - 2 damp ḋamp x)``, ``Ȧᵀ r`` by the operator's ``rmatvec`` (which SciPy's solvers take to
    be ``matvec``'s transpose)."""

    replays_on_its_operands = False  # (as _OperatorSolve: traced every time)

    def __init__(self, method, operator, parameters, damp, options):
        super().__init__(method, None, operator, damp, options)
        self.parameters = parameters
        self.name = f"scipy.sparse.linalg.{method}"

    @contextlib.contextmanager
    def plain(self, values):
        """The operator's functions bound to the plain ``values``, outside differentiations."""
        with _integrate.outside_differentiations(self.name), _integrate.plain_allocation(), \
                self.parameters.bound(values):
            yield

    def value_at(self, b, guess, damp, values):
        self.damp = float(damp)
        with self.plain(values):
            x = self.value(None, b, guess)
        self.parameters.freeze()
        return x

    def product(self, x, values, transposed=False):
        """``A(p) x`` (``A(p)ᵀ x``: ``transposed``) with the values ``p`` (traced ones: their
        derivative is followed), by the user's function itself."""
        with self.parameters.bound(values):
            if transposed:
                return np.reshape(self.operator._rmatvec(x), (self.operator.shape[1],))
            return np.reshape(self.operator._matvec(x), (self.operator.shape[0],))


def _operator_least_squares_value(b, guess, damp, *values, problem):
    return problem.value_at(b, guess, damp, values)


_operator_least_squares = Adjoint(_operator_least_squares_value)
_operator_least_squares.complex_values = None


@_operator_least_squares.rule
def _operator_least_squares_rule(b, guess, damp, *values, problem):
    _first_order_only(problem, b, damp, *values)
    x = problem.value_at(b, guess, damp, values)
    plain_b = np.asarray(b, float)

    def back(dx):
        _first_order_only(problem, dx)
        with problem.plain(values):
            lam = problem.normal_solve(None, np.asarray(dx, float))
            a_lam = problem.operator.matvec(lam)
            r = plain_b - problem.operator.matvec(x)
        _, pull = _integrate.pullback(
            lambda *p: problem.product(lam, p) @ r - problem.product(x, p) @ a_lam, *values)
        return (a_lam, None, -2 * problem.damp * np.dot(lam, x), *pull(1.0))

    return x, back


@_operator_least_squares.jvp_rule
def _operator_least_squares_jvp(tangents, b, guess, damp, *values, problem):
    _first_order_only(problem, b, damp, *values, *tangents)
    x = problem.value_at(b, guess, damp, values)
    with problem.plain(values):
        r = np.asarray(b, float) - problem.operator.matvec(x)
    change = np.zeros(len(r)) if tangents[0] is None else np.asarray(tangents[0], float)
    c = np.zeros(len(x))
    if tangents[2] is not None:  # -2 damp ḋamp x
        c = c - 2 * problem.damp * float(tangents[2]) * x
    if any(t is not None for t in tangents[3:]):
        directions = tuple(np.zeros(np.shape(v)) if t is None else t
                           for v, t in zip(values, tangents[3:], strict=True))
        change = change - _integrate.jvp(lambda *p: problem.product(x, p), values,
                                         directions)[1]
        c = c + _integrate.jvp(lambda *p: problem.product(r, p, transposed=True), values,
                               directions)[1]
    with problem.plain(values):  # (the tangents' numbers: a jvp's results may be duals)
        c, change = np.asarray(c, float), np.asarray(change, float)
        return x, problem.normal_solve(None, c + problem.operator.rmatvec(change))


lsqr, lsmr = map(_least_squares_method, ("lsqr", "lsmr"))


# ----------------------------------------------------------------------------------------------
# Operators of the user's functions (LinearOperator(matvec=...)) that read differentiated values


def _operator_parameters(A, method):
    """The differentiated values a ``LinearOperator`` of the user's functions reads from their
    closures (``integrate._Parameters``), or None for an operator that reads none; of SciPy's
    operators of operators (``op.T @ op + D``), those all their operands of the user's
    functions read. An operator of another kind that holds differentiated values is refused."""
    if not isinstance(A, _splinalg.LinearOperator) or ACTIVE.running == []:
        return None
    functions = _operator_functions(A, method, set())
    if not functions:
        return None
    parameters = _integrate._Parameters(f"scipy.sparse.linalg.{method}", functions, ())
    return parameters if parameters.followed else None


# SciPy's operators made of others (A + B, A @ B, 2.0 * A, A ** 3, A.H, A.T): their pieces
# are in ``args``.
_COMPOSITES = (_interface._SumLinearOperator, _interface._ProductLinearOperator,
               _interface._ScaledLinearOperator, _interface._PowerLinearOperator,
               _interface._AdjointLinearOperator, _interface._TransposedLinearOperator)


_PRODUCTS = ("_matvec", "_rmatvec", "_matmat", "_rmatmat", "_adjoint", "_transpose")


def _user_operator(A):
    """Whether ``A`` is of the user's own subclass of ``LinearOperator`` (not SciPy's)."""
    return not type(A).__module__.startswith("scipy.")


def _operator_functions(A, method, seen):
    """The user's functions the operator ``A`` applies: those of an operator of functions
    (``LinearOperator(matvec=...)``), and of the operators their closures hold (a scaled
    operator's, ``alpha * A``), the products a subclass of the user's defines (``_matvec``,
    ...), and those of the pieces of SciPy's sums, products, powers and transposes of
    operators. An operator of another of SciPy's kinds that holds differentiated values is
    refused."""
    if id(A) in seen:
        return []
    seen.add(id(A))
    if type(A) is _interface._CustomLinearOperator:
        functions = [getattr(A, f"_CustomLinearOperator__{name}_impl")
                     for name in ("matvec", "rmatvec", "matmat", "rmatmat")]
        held = [cell.cell_contents for f in functions
                for cell in getattr(f, "__closure__", None) or ()]
        return functions + [g for B in held if isinstance(B, _splinalg.LinearOperator)
                            for g in _operator_functions(B, method, seen)]
    if _user_operator(A):
        # the user's subclass: its own products, methods reading its attributes as a
        # closure's cells are read, and those of the operators it holds
        functions = [getattr(A, name) for name in _PRODUCTS
                     if getattr(type(A), name) is not getattr(_splinalg.LinearOperator, name)]
        return functions + [g for B in vars(A).values()
                            if isinstance(B, _splinalg.LinearOperator)
                            for g in _operator_functions(B, method, seen)]
    if type(A) in _COMPOSITES:
        operands = [B for B in A.args if isinstance(B, _splinalg.LinearOperator)]
        held = [c for c in A.args if not isinstance(c, _splinalg.LinearOperator)]
    else:
        operands, held = [], list(vars(A).values())
    if _followed(*held):
        _refuse(f"scipy.sparse.linalg.{method} of a {type(A).__name__} holding traced "
                "values", "make it with LinearOperator(shape, matvec=..., rmatvec=...), "
                "whose functions may read them from their closures, or pass a sparse "
                "matrix.")
    return [g for B in operands for g in _operator_functions(B, method, seen)]


def _scaled_operator(A, alpha):
    """``alpha * A`` of a traced number ``alpha``: SciPy's scaled operator (whose ``alpha`` must
    be a plain number) as an operator of functions that read ``alpha`` from their closures, so
    that the solvers differentiate through it; each product is SciPy's ``alpha * A.matvec(x)``
    (the adjoint's with ``conj(alpha)``), its dtype SciPy's."""
    dtype = _interface._get_dtype([A], [alpha.dtype])
    return _splinalg.LinearOperator(
        A.shape, dtype=dtype,
        matvec=lambda x: alpha * A.matvec(x), rmatvec=lambda x: np.conj(alpha) * A.rmatvec(x),
        matmat=lambda X: alpha * A.matmat(X), rmatmat=lambda X: np.conj(alpha) * A.rmatmat(X))


class _OperatorSolve:
    """One ``scipy.sparse.linalg`` iterative solve with an operator whose functions read the
    differentiated values ``parameters`` follows: SciPy's solve with them bound to plain
    values, and the solves and products its derivatives need. ``x = A(p)⁻¹ b`` gives
    ``b̄ = λ`` and ``p̄ = -∂ₚ⟨λ, A(p) x⟩`` with ``λ = A(p)⁻ᵀ x̄`` (``cg`` and ``minres`` take
    ``A`` symmetric, as SciPy's methods do; the others solve with ``A.T``, which needs the
    operator's ``rmatvec``), and forward mode ``ẋ = A⁻¹ (ḃ - ∂ₚ(A(p) x) ṗ)``."""

    # The operator's functions are bound to the values its rule is given for each call
    # (``parameters.bound``), but a replay of a program holding it returned gradients of the
    # recording's traced arrays: such a call is traced every time, with the reason.
    replays_on_its_operands = False

    def __init__(self, method, operator, parameters, options):
        self.method, self.operator, self.parameters = method, operator, parameters
        self.options = options
        self.name = f"scipy.sparse.linalg.{method}"

    def solve(self, b, values, guess=None, transposed=False, tight=False):
        """``A⁻¹ b`` (``A⁻ᵀ b``: ``transposed``) by the user's method from ``guess``, at plain
        ``values``; to ``ADJOINT_RTOL`` where ``tight`` (a derivative's solve)."""
        options = _derivative_options(self.options, tight)
        operator, dropped = self.operator, False
        with _integrate.outside_differentiations(self.name), _integrate.plain_allocation(), \
                self.parameters.bound(values):
            if transposed and self.method not in _Iterative.SYMMETRIC:
                try:
                    operator.rmatvec(np.zeros(operator.shape[0], operator.dtype))
                except NotImplementedError as error:  # (SciPy's, or a refusal of mutad's)
                    handled(error)
                    operator = _transposed_by_pullback(operator, self.name)
                else:
                    operator = operator.T
                dropped = _transpose_preconditioners(options)
            # (the user's solve in b's own dtype, as SciPy's: a float32 system solved in
            # float32; a derivative's in float64)
            rhs = np.asarray(b, float) if tight else np.asarray(b)
            with _preconditioning():
                x, info = SCIPY[self.method](operator, rhs, guess, **options)
        if info != 0:
            _not_converged(self.name, tight, info, dropped)
        return x

    def value(self, b, guess, values):
        x = self.solve(b, values, guess)
        self.parameters.freeze()
        return x

    def product(self, x, values):
        """``A(p) x`` with the values ``p`` (traced ones: their derivative is followed), by the
        user's function itself: SciPy's ``matvec`` would convert what it returns."""
        with self.parameters.bound(values):
            return np.reshape(self.operator._matvec(x), (self.operator.shape[0],))


def _transposed_by_pullback(operator, name):
    """``Aᵀ`` of a real operator without ``rmatvec``: each product ``Aᵀ y`` the pullback of
    its matvec (linear, as a LinearOperator's is) at ``y``, by a differentiation of its own."""
    if np.dtype(operator.dtype).kind == "c":
        _refuse(f"{name} with a complex LinearOperator without rmatvec",
                "its derivative solves with Aᵀ. Give the operator rmatvec.")
    m, n = operator.shape

    def rmatvec(y):
        with _integrate.outside_differentiations(name), \
                _integrate._allocation_followed():  # (the matvec's own arrays, followed)
            _, pull = pullback(lambda v: np.reshape(operator._matvec(v), (m,)), np.zeros(n))
            return pull(np.asarray(y, float).reshape(m))[0]

    return _splinalg.LinearOperator((n, m), matvec=rmatvec, dtype=operator.dtype)


def _operator_solve_value(b, guess, *values, problem):
    return problem.value(b, guess, values)


_operator_solve = Adjoint(_operator_solve_value)
_operator_solve.complex_values = None


def _first_order_only(problem, *items):
    if _followed(*items):
        _refuse(f"{problem.name} of an operator whose functions read differentiated values, "
                "under a differentiation of a differentiation (a hessian, a gradient of a "
                "gradient)", "its rule is of the first order; pass a sparse matrix of the "
                "values, which every order differentiates.")


@_operator_solve.rule
@zero_derivative("guess")  # (the solution, converged, is A⁻¹ b whatever the start)
def _operator_solve_rule(b, guess, *values, problem):
    _first_order_only(problem, b, *values)
    x = problem.value(b, guess, values)

    def back(dx):
        _first_order_only(problem, dx)
        lam = problem.solve(np.reshape(dx, np.shape(x)), values, transposed=True, tight=True)
        _, pull = _integrate.pullback(lambda *p: problem.product(x, p), *values)
        return (lam, None, *(None if g is None else -g for g in pull(lam)))

    return x, back


@_operator_solve.jvp_rule
def _operator_solve_jvp(tangents, b, guess, *values, problem):
    _first_order_only(problem, b, *values, *tangents)
    x = problem.value(b, guess, values)
    rhs = np.zeros(np.shape(x)) if tangents[0] is None else np.asarray(tangents[0], float)
    if any(t is not None for t in tangents[2:]):
        directions = tuple(np.zeros(np.shape(v)) if t is None else t
                           for v, t in zip(values, tangents[2:], strict=True))
        rhs = rhs - _integrate.jvp(lambda *p: problem.product(x, p), values, directions)[1]
    return x, problem.solve(rhs, values, tight=True)


# SciPy's LinearOperator methods as SciPy writes them (1.17), but a traced vector passes to the
# user's function as it is, and the traced result of one that reads differentiated values
# comes back reshaped as SciPy's does, not converted (``np.asarray``) to a plain array.


def _vector_method(name, rows, implementation):
    def method(self, x):
        x = x if _followed(x) else np.asanyarray(x)
        M, N = self.shape
        length = N if rows == 0 else M
        if x.shape != (length,) and x.shape != (length, 1):
            raise ValueError('dimension mismatch')
        y = getattr(self, implementation)(x)
        out = self.shape[rows]
        if carries_derivative(y) or _followed(x):
            if isinstance(x, np.matrix):
                _refuse(f"LinearOperator.{name} of an np.matrix with traced values",
                        "pass an ndarray.")
            return np.reshape(y, (out,) if x.ndim == 1 else (out, 1))
        y = np.asmatrix(y) if isinstance(x, np.matrix) else np.asarray(y)
        return y.reshape(out) if x.ndim == 1 else y.reshape(out, 1)

    setattr(method, "always", True)
    return method


def _matrix_method(name, rows, implementation):
    def method(self, X):
        if not (_sparse.issparse(X) or _followed(X)):
            X = np.asanyarray(X)
        if X.ndim != 2:
            raise ValueError(f'expected 2-d ndarray or matrix, not {X.ndim}-d')
        if X.shape[0] != self.shape[1 - rows]:
            raise ValueError(f'dimension mismatch: {self.shape}, {X.shape}')
        try:
            Y = getattr(self, implementation)(X)
        except Exception as e:
            if _sparse.issparse(X):
                raise TypeError("Unable to multiply a LinearOperator with a sparse matrix. "
                                "Wrap the matrix in aslinearoperator first.") from e
            raise
        return np.asmatrix(Y) if isinstance(Y, np.matrix) else Y

    setattr(method, "always", True)
    return method


def _product_method(right):
    """SciPy's ``LinearOperator.dot`` (``A @ x``, ``A * x``, ``A(x)``), or its ``_rdot``
    (``x @ A``) where ``right``."""
    def method(self, x):
        if isinstance(x, _splinalg.LinearOperator):
            return (_interface._ProductLinearOperator(x, self) if right
                    else _interface._ProductLinearOperator(self, x))
        if _followed(x) and stands_for_scalar(x):
            return _scaled_operator(self, x)
        if np.isscalar(x):
            return _interface._ScaledLinearOperator(self, x)
        if not _sparse.issparse(x) and not _followed(x):
            x = np.asarray(x)
        if right:
            if x.ndim == 1 or x.ndim == 2 and x.shape[0] == 1:
                return self.T.matvec(x.T).T
            if x.ndim == 2:
                return self.T.matmat(x.T).T
        else:
            if x.ndim == 1 or x.ndim == 2 and x.shape[1] == 1:
                return self.matvec(x)
            if x.ndim == 2:
                return self.matmat(x)
        raise ValueError(f'expected 1-d or 2-d array or matrix, got {x!r}')

    setattr(method, "always", True)
    return method


def _init_dtype(self):
    """SciPy's ``LinearOperator._init_dtype``: the dtype of the operator applied to an int8
    vector, read from a traced result too."""
    if self.dtype is None:
        v = np.zeros(self.shape[-1], dtype=np.int8)
        try:
            matvec_v = self.matvec(v)
        except OverflowError:
            self.dtype = np.dtype(int)
        else:
            self.dtype = (matvec_v.dtype if carries_derivative(matvec_v)
                          else np.asarray(matvec_v).dtype)


setattr(_init_dtype, "always", True)


def _divided(self, other):
    """SciPy's ``A / alpha``, of a traced number ``alpha`` too."""
    if _followed(other) and stands_for_scalar(other):
        return _scaled_operator(self, 1.0 / other)
    if not np.isscalar(other):
        raise ValueError("Can only divide a linear operator by a scalar.")
    return _interface._ScaledLinearOperator(self, 1.0 / other)


setattr(_divided, "always", True)
for _name, _method in (("matvec", _vector_method("matvec", 0, "_matvec")),
                       ("rmatvec", _vector_method("rmatvec", 1, "_rmatvec")),
                       ("matmat", _matrix_method("matmat", 0, "_matmat")),
                       ("rmatmat", _matrix_method("rmatmat", 1, "_rmatmat")),
                       ("dot", _product_method(right=False)),
                       ("_rdot", _product_method(right=True)),
                       ("_init_dtype", _init_dtype), ("__truediv__", _divided)):
    defmethod(_splinalg.LinearOperator, _name, _method)



def _aslinearoperator(A: Any) -> Any:
    """SciPy's ``aslinearoperator``; of a traced matrix (dense, or a traced sparse one), an
    operator of functions that read it (``LinearOperator(matvec=...)``, which the iterative
    solvers differentiate through its closures), each computing as SciPy's
    ``MatrixLinearOperator`` does: ``A.dot`` of the vector as one column, and the adjoint's with
    ``A.T.conj()``. Its ``A`` and ``args`` are SciPy's attributes of the matrix."""
    if isinstance(A, _splinalg.LinearOperator) or not _followed(A):
        return SCIPY["aslinearoperator"](A)
    if isinstance(A, TracedMatrix) or not (wrapped(A) or isinstance(A, TracedSparse)):
        _refuse("scipy.sparse.linalg.aslinearoperator of an np.matrix or an object holding "
                "traced values", "pass the traced ndarray or scipy.sparse matrix itself.")
    if not isinstance(A, TracedSparse):
        if np.ndim(A) > 2:
            raise ValueError('array must have ndim <= 2')
        A = np.atleast_2d(A)

    # The matrix held in a list: the solvers bind the values its closures hold, leaf by leaf
    # (a traced sparse matrix's its stored values), to plain ones while SciPy's solve runs.
    held = [A]

    def matmat(X):
        return held[0].dot(X)

    def rmatmat(X):
        adjoint = held[0].T
        return (adjoint.conj() if adjoint.dtype.kind == "c" else adjoint).dot(X)  # (the same)

    operator = _splinalg.LinearOperator(
        A.shape, matvec=lambda x: matmat(x.reshape(-1, 1)),
        rmatvec=lambda x: rmatmat(x.reshape(-1, 1)), matmat=matmat, rmatmat=rmatmat,
        dtype=A.dtype)
    operator.A, operator.args = A, (A,)
    return operator


aslinearoperator = _route(SCIPY["aslinearoperator"], _aslinearoperator)

# matrix_power: SciPy's squarings, of mutad's products (SciPy's values). expm: SciPy's sparse
# Padé approximant; its derivative the dense exponential's (scipy.linalg.expm, which mutad
# differentiates, its Fréchet derivative) at the entries SciPy's result stores. An entry it does
# not store is one no product of A's pattern reaches (its derivative 0), unless SciPy dropped
# one that rounds to zero: then refused, as is a matrix too large to differentiate densely.

EXPM_DENSE_LIMIT = 1000
"""The largest order of a matrix whose expm mutad differentiates (through dense n x n
exponentials)."""


def _matrix_power(A: Any, power: Any) -> Any:
    if not _followed(A):
        return SCIPY["matrix_power"](A, power)
    M, N = A.shape
    if M != N:
        raise TypeError("sparse matrix is not square")
    if not isinstance(power, (int, np.integer)):
        raise ValueError("exponent must be an integer")
    power = int(power)
    if power < 0:
        raise ValueError("exponent must be >= 0")
    if power == 0:
        return _sparse.eye_array(M, dtype=A.dtype)
    if power == 1:
        return A.copy()
    half = _matrix_power(A, power // 2)
    return A @ half @ half if power % 2 else half @ half


matrix_power = _route(SCIPY["matrix_power"], _matrix_power)

_expm_value = Value(lambda data, layout: _solution_entries(SCIPY["expm"](layout.build(data))),
                    "scipy.sparse.linalg.expm")


def _expm(A: Any) -> Any:
    if not _followed(A):
        return SCIPY["expm"](A)
    layout, data = _matrix_of(A, "expm")
    n = layout.shape[0]
    if layout.shape[0] != layout.shape[1] or n > EXPM_DENSE_LIMIT:
        _refuse(f"scipy.sparse.linalg.expm of a traced {layout.shape} matrix", "mutad "
                f"differentiates it for square matrices of order up to {EXPM_DENSE_LIMIT} "
                "(through dense exponentials); use expm_multiply(A, v) for expm(A) @ v.")
    values, rows, cols = _expm_value(data, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _sparse.SparseEfficiencyWarning)
        structure = SCIPY["expm"](layout.probe(1.0))  # (all values 1: none cancel)
    reached = structure.toarray() != 0
    stored = np.zeros((n, n), bool)
    stored[rows, cols] = True
    dense = _dense(layout, data, None)
    composition = scipy.linalg.expm(dense)[rows, cols]  # (mutad's rule, as it is routed)
    if np.any(reached & ~stored) or not reproduces(values, composition):
        _refuse("scipy.sparse.linalg.expm of traced values where SciPy's result leaves out "
                "entries that the differentiated entries reach (a dense matrix's zeros, which "
                "csr_matrix(D) drops while they are zero, or an entry that rounded to zero), or "
                "where the dense exponential does not reproduce SciPy's", "build the matrix "
                "from its pattern ((data, (row, col)), diags), or make it dense (A.toarray()) "
                "and use scipy.linalg.expm.")
    kind = _SOLUTION_CLASSES[type(structure)]
    return kind((scipys_value(values, composition), (rows, cols)), shape=layout.shape)


expm = _route(SCIPY["expm"], _expm)

# SciPy's own code on a traced matrix (ScipysCode): lobpcg's iterations are NumPy's and
# scipy.linalg's steps (eigh of the Rayleigh-Ritz projections), its decisions on the values
lobpcg = ScipysCode(_splinalg.lobpcg)

# ----------------------------------------------------------------------------------------------
# SciPy's sparse matrices as arguments: their stored values are what is differentiated


def _flatten_matrix(matrix):
    if isinstance(matrix, TracedSparse):  # a result of the function, or a tangent's
        return [matrix.data], matrix.layout
    layout = _Layout(matrix)
    return [matrix.data], layout


def _unflatten_matrix(layout, children):
    """The matrix of ``layout`` holding ``children[0]``: traced values make a
    :class:`TracedSparse`, a gradient SciPy's matrix of the argument's pattern."""
    data = children[0]
    if data is None:
        return None
    if wrapped(data):
        return TracedSparse(layout, data)
    return layout.build(data)


for _cls in (_sparse.csr_matrix, _sparse.csr_array, _sparse.csc_matrix, _sparse.csc_array,
             _sparse.coo_matrix, _sparse.coo_array, _sparse.dia_matrix, _sparse.dia_array,
             TracedSparse):
    register_pytree(_cls, _flatten_matrix, _unflatten_matrix)


def _flatten_converted(matrix):
    """A matrix of a format whose stored values have no fixed order (lil, dok) or come in
    blocks (bsr), followed as its CSR form: the function receives that, and the gradient is a
    CSR matrix of its pattern."""
    return _flatten_matrix(matrix.tocsr())


def _unflatten_traced_matrix(_: Any, children: list[Any]) -> Any:
    """A traced matrix of traced values; a gradient or tangent, SciPy's ``np.matrix``."""
    array = children[0]
    if array is None or wrapped(array):
        return array if array is None else TracedMatrix(array)
    return np.asarray(array).view(np.matrix)


register_pytree(TracedMatrix, lambda m: ((m.array,), None), _unflatten_traced_matrix)


for _cls in (_sparse.lil_matrix, _sparse.lil_array, _sparse.dok_matrix, _sparse.dok_array,
             _sparse.bsr_matrix, _sparse.bsr_array):
    register_pytree(_cls, _flatten_converted, _unflatten_matrix)
del _cls
