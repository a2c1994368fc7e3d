"""Linear algebra: products (dot, matmul, einsum, tensordot, …) and ``np.linalg``.

Every product is a contraction, so all of them share one pullback: the cotangent of an einsum
operand is the einsum of the output's cotangent with the other operands (``einsum_cotangent``).
Products with a faster or simpler form (matmul, outer, vdot) spell it out.

The matrix functions follow the standard results, cited beside each rule:
Giles, "An extended collection of matrix derivative results for forward and reverse mode
algorithmic differentiation" (2008) for inv, solve, det and the eigenproblem; Murray,
"Differentiation of the Cholesky decomposition" (arXiv:1602.07527, 2016) for cholesky; Golub &
Pereyra, "The differentiation of pseudo-inverses and nonlinear least squares problems" (SIAM J.
Numer. Anal., 1973, Thm. 4.3) for pinv and lstsq (which assume the rank does not change nearby).
Inputs of cholesky and eigh are symmetric by contract, so they get the symmetric gradient (the
derivative along symmetric perturbations), as in PyTorch and JAX; a matrix that is not symmetric
(beyond rounding) is refused, since that gradient is not the derivative of NumPy's function of it.

Complex matrices (facet ``complex``): the products, inv, solve, matrix_power and det are
complex-differentiable, so their real rules hold (``holomorphic``). The factorisations (cholesky,
eigh, eigvalsh, svd, qr, eig, eigvals), slogdet, the norms, pinv and lstsq have rules written in
mutad's convention (``complex_aware``): a transpose becomes a conjugate transpose, Hermitian
matrices take the place of symmetric ones (the Hermitian gradient), and the phases of complex
eigenvectors and singular vectors, which NumPy fixes by LAPACK's conventions, are left out of
every gradient: a loss that reads them is refused (``require_phase_free``).

Nested reverse mode: a pullback's inputs and cotangents may be arrays an outer differentiation
traces (the inner one's values are), so rules compute with NumPy calls that dispatch: never
``np.asarray``, and a buffer a cotangent is written into is created ``like=`` it.

Forward mode: each rule has a tangent rule (``defjvp``) beside it, from the same sources, that
agrees with it exactly, <ẏ, w> = <ẋ, vjp(w)>: the symmetric inputs take the symmetric part of
their tangent, and the subgradients chosen at kinks (norms) and at repeated eigenvalues are the
reverse rules' own. Products are linear in each operand, so ``defmultilinear`` covers them.
"""

import functools
import math
import string

import numpy as np

from ..errors import UnsupportedOperationError
from ..debug import caller, warn_at
from ..registry import complex_aware, defjvp, deflinear, defmultilinear, defrule, holomorphic
from ..tape import source_line
from ..views import memory
from ._helpers import require_symmetric, symmetric_part, transpose, unbroadcast
from .factorizations import (adjoint, as_matrices, cholesky_cotangent, cholesky_tangent, conjugate,
                             det_cotangent, det_tangent, eig_cotangent, eig_tangent,
                             eigh_cotangent, eigh_couplings,
                             eigh_tangent, equal_pairs, hermitian_part, norm_axes, norm_pullback,
                             norm_tangent, qr_cotangent, qr_tangent, real_diagonal, reduced_axes,
                             require_phase_free, svd_cotangent, svd_tangent)


# ----------------------------------------------------------------------------------------------
# Contractions: einsum and every product written as one


def _explicit_einsum(subscripts, shapes):
    """One string of letters per operand and one for the output, with ``...`` spelled out in
    letters the subscripts do not use and implicit output made explicit (NumPy's rule: the
    broadcast axes, then the letters seen once, in ASCII order)."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise UnsupportedOperationError(
            f"np.einsum({subscripts!r}, ...): {len(terms)} operand subscripts for "
            f"{len(shapes)} operands.")
    spare = (c for c in string.ascii_letters if c not in subscripts)
    ranks = [len(shape) - (len(term) - 3) for term, shape in zip(terms, shapes, strict=True)
             if "..." in term]
    broadcast = "".join(next(spare) for _ in range(max(ranks, default=0)))
    expanded = []
    for term, shape in zip(terms, shapes, strict=True):
        if "..." in term:
            rank = len(shape) - (len(term) - 3)
            term = term.replace("...", broadcast[len(broadcast) - rank:])
        expanded.append(term)
    if arrow:
        output = output.replace("...", broadcast)
    else:
        letters = inputs.replace("...", "").replace(",", "")
        output = broadcast + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return expanded, output


def _squeeze_broadcast(terms, operands):
    """Drop the axes of length 1 that broadcast against a longer axis of the same letter.

    A broadcast axis contributes the same entry for every index, which is the same as the
    operand not carrying that letter at all; afterwards every letter has one length.
    """
    sizes = {}
    for term, x in zip(terms, operands, strict=True):
        for letter, n in zip(term, np.shape(x), strict=True):
            if sizes.get(letter, 1) == 1:  # length 1 broadcasts to any length, 0 included
                sizes[letter] = n
    squeezed_terms, squeezed = [], []
    for term, x in zip(terms, operands, strict=True):
        keep = [i for i, (letter, n) in enumerate(zip(term, np.shape(x), strict=True))
                if n == sizes[letter]]
        squeezed_terms.append("".join(term[i] for i in keep))
        squeezed.append(np.reshape(x, [np.shape(x)[i] for i in keep]))
    return squeezed_terms, squeezed, sizes


def einsum_cotangent(k, terms, output, operands, dy, sizes):
    """Cotangent of operand ``k`` of ``einsum(terms -> output)``, in ``terms[k]``'s shape.

    y[out] = Σ Π_j x_j[term_j] is linear in x_k, so its cotangent is the same sum with x_k
    replaced by dy: einsum(out, other terms -> term_k). Two letters einsum cannot output are
    handled around it: letters only x_k carries (summed over in the forward pass, so the
    cotangent is constant along them: broadcast) and letters x_k repeats (x_k was read on a
    diagonal only: the cotangent goes onto that diagonal, zero elsewhere).
    """
    term = terms[k]
    others = [t for j, t in enumerate(terms) if j != k]
    other_operands = [x for j, x in enumerate(operands) if j != k]
    unique = "".join(dict.fromkeys(term))
    reached = set(output).union(*others)
    target = "".join(c for c in unique if c in reached)
    g = np.einsum(",".join([output, *others]) + "->" + target, dy, *other_operands,
                  optimize=bool(others))
    g = np.broadcast_to(np.reshape(g, [sizes[c] if c in target else 1 for c in unique]),
                        [sizes[c] for c in unique])
    if len(unique) < len(term):
        # like=g: a cotangent traced by an outer differentiation stays traced in its diagonal
        diagonal = np.zeros([sizes[c] for c in term], g.dtype, like=g)
        grids = dict(zip(unique, np.ogrid[tuple(slice(sizes[c]) for c in unique)], strict=True))
        diagonal[tuple(grids[c] for c in term)] = g
        g = diagonal
    return g


def _inner_product_back(a, b):
    """The pullback of the inner product of two vectors of one shape: each cotangent is dy
    times the other, as the einsum of ``einsum_cotangent`` would give it."""
    return lambda dy: (dy * b, dy * a)


def contraction_back(terms, output, operands):
    """The pullback of ``einsum(terms -> output)(*operands)``: one cotangent per operand."""
    terms, squeezed, sizes = _squeeze_broadcast(terms, operands)
    if (not output and len(operands) == 2 and terms[0] == terms[1]
            and len(set(terms[0])) == len(terms[0])
            and np.shape(operands[0]) == np.shape(operands[1])):
        return _inner_product_back(*operands)

    def back(dy):
        dy = np.reshape(dy, [sizes[c] for c in output])
        return tuple(
            np.reshape(einsum_cotangent(k, terms, output, squeezed, dy, sizes), np.shape(x))
            for k, x in enumerate(operands))

    return back


def _sublist_subscripts(args):
    """The subscripts string and the operands of einsum's sublist form
    ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])``. Labels become letters as
    NumPy makes them (0-25 'A'-'Z', 26-51 'a'-'z'), so an implicit output keeps NumPy's order;
    ``Ellipsis`` is ``...``."""
    def term(sublist):
        return "".join("..." if label is Ellipsis else SUBLIST_LETTERS[int(label)]
                       for label in sublist)

    count = len(args) // 2
    operands, sublists = args[0:2 * count:2], args[1:2 * count:2]
    output = "->" + term(args[-1]) if len(args) % 2 else ""
    return ",".join(term(s) for s in sublists) + output, operands


SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase


@defrule(np.einsum)
def einsum(*args, **kwargs):
    y = np.einsum(*args, **kwargs)
    if isinstance(args[0], str):  # einsum("ij,jk->ik", a, b)
        subscripts, operands = args[0], args[1:]
    else:  # einsum(a, [0, 1], b, [1, 2], [0, 2])
        subscripts, operands = _sublist_subscripts(args)
    terms, output = _explicit_einsum(subscripts, [np.shape(x) for x in operands])
    contract = contraction_back(terms, output, operands)

    def back(dy):
        cotangents = contract(dy)
        if isinstance(args[0], str):
            return (None, *cotangents)
        # one cotangent per operand, None for each sublist (and for the output's sublist)
        interleaved = [None] * len(args)
        interleaved[0:2 * len(cotangents):2] = cotangents
        return tuple(interleaved)

    return y, back


# einsum is linear in each operand: the product rule (its subscripts and sublists carry no
# tangent). So is every product below.
defmultilinear(np.einsum)


@functools.lru_cache(maxsize=256)
def _letters(count, skip=""):
    return "".join(c for c in string.ascii_letters if c not in skip)[:count]


def _product_subscripts(a, b, b_axis):
    """The einsum terms and output of a product that sums ``a``'s last axis against axis
    ``b_axis`` of ``b`` (non-negative), the free axes of ``a`` first, then those of ``b``; a
    scalar operand multiplies the other instead."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        terms = (_letters(np.ndim(a)), _letters(np.ndim(b)))
        return terms, max(terms, key=len)
    a_free = _letters(np.ndim(a) - 1, skip="z")
    b_free = _letters(np.ndim(a) + np.ndim(b), skip="z")[np.ndim(a):][:np.ndim(b) - 1]
    terms = (a_free + "z", b_free[:b_axis] + "z" + b_free[b_axis:])
    return terms, a_free + b_free


@defrule(np.dot, leading=2)
def dot(a, b):
    y = np.dot(a, b)
    if np.ndim(a) == 1 and np.ndim(b) == 1:  # without the subscripts' scaffolding
        return y, _inner_product_back(a, b)
    # dot(a, b)[i..., j..., k] = Σ_m a[i..., m] b[j..., m, k]: m is b's second-to-last axis
    # (its only axis when b is a vector)
    terms, output = _product_subscripts(a, b, b_axis=max(np.ndim(b) - 2, 0))
    return y, contraction_back(terms, output, (a, b))


defmultilinear(np.dot, operands=(0, 1))


@defrule(np.inner, leading=2)
def inner(a, b):
    y = np.inner(a, b)
    # inner(a, b)[i..., j...] = Σ_m a[i..., m] b[j..., m]
    terms, output = _product_subscripts(a, b, b_axis=np.ndim(b) - 1)
    return y, contraction_back(terms, output, (a, b))


defmultilinear(np.inner, operands=(0, 1))


@defrule(np.tensordot, np.linalg.tensordot, leading=2)
def tensordot(a, b, axes=2):
    y = np.tensordot(a, b, axes)
    if np.ndim(axes) == 0:
        a_axes = list(range(np.ndim(a) - axes, np.ndim(a)))
        b_axes = list(range(axes))
    else:
        a_axes, b_axes = (list(np.atleast_1d(side)) for side in axes)
    a_axes = [i % np.ndim(a) for i in a_axes]
    b_axes = [i % np.ndim(b) for i in b_axes]
    letters = _letters(np.ndim(a) + np.ndim(b))
    a_term = list(letters[:np.ndim(a)])
    b_term = list(letters[np.ndim(a):])
    for i, j in zip(a_axes, b_axes, strict=True):
        b_term[j] = a_term[i]
    output = ("".join(c for i, c in enumerate(a_term) if i not in a_axes)
              + "".join(c for j, c in enumerate(b_term) if j not in b_axes))
    return y, contraction_back(("".join(a_term), "".join(b_term)), output, (a, b))


defmultilinear(np.tensordot, np.linalg.tensordot, operands=(0, 1))


@defrule(np.kron, leading=2)
def kron(a, b):
    y = np.kron(a, b)
    ndim = max(np.ndim(a), np.ndim(b))
    a_shape = (1,) * (ndim - np.ndim(a)) + np.shape(a)
    b_shape = (1,) * (ndim - np.ndim(b)) + np.shape(b)
    # kron(a, b)[i*m + k] = a[i] b[k] along each axis: with y split into (i, k) pairs of axes
    # it is the outer product a[i0, i1, …] b[k0, k1, …] with the axes interleaved.
    letters = _letters(2 * ndim)
    a_term, b_term = letters[:ndim], letters[ndim:]
    output = "".join(i + k for i, k in zip(a_term, b_term, strict=True))
    contract = contraction_back((a_term, b_term), output,
                                (np.reshape(a, a_shape), np.reshape(b, b_shape)))
    split = [n for pair in zip(a_shape, b_shape, strict=True) for n in pair]

    def back(dy):
        da, db = contract(np.reshape(dy, split))
        return np.reshape(da, np.shape(a)), np.reshape(db, np.shape(b))

    return y, back


defmultilinear(np.kron, operands=(0, 1))


@defrule(np.outer, np.linalg.outer, leading=2)
def outer(a, b):
    y = np.outer(a, b)

    def back(dy):
        da = np.reshape(dy @ np.ravel(b), np.shape(a))
        db = np.reshape(np.ravel(a) @ dy, np.shape(b))
        return da, db

    return y, back


defmultilinear(np.outer, np.linalg.outer, operands=(0, 1))


@defrule(np.vdot, leading=2)
def vdot(a, b):
    y = np.vdot(a, b)

    def back(dy):  # a is conjugated: its cotangent is conj(dy) b (and holds for complex ones)
        return (np.reshape(np.conjugate(dy) * np.ravel(b), np.shape(a)),
                np.reshape(dy * np.ravel(a), np.shape(b)))

    return y, back


defmultilinear(np.vdot, operands=(0, 1))


# Without a batch, matmul's cotangents are the products directly (a loop of them is a triangular
# solve, factorization or multiplication, where Python's overhead is the cost), by the
# dimensions of the operands:
_UNBATCHED = {
    (1, 1): lambda dy, a, b: (dy * b, a * dy),  # a dot product: one product per element
    (1, 2): lambda dy, a, b: (b @ dy, a[:, None] * dy),  # a vector times a matrix
    (2, 1): lambda dy, a, b: (dy[:, None] * b, dy @ a),
    (2, 2): lambda dy, a, b: (dy @ transpose(b), transpose(a) @ dy),
}


@defrule(np.matmul, np.linalg.matmul, leading=2)
def matmul(a, b, **kwargs):
    if "axes" in kwargs or "axis" in kwargs:
        raise UnsupportedOperationError("np.matmul(..., axes=...): move the axes first.")
    y = np.matmul(a, b, **kwargs)
    dims = (np.ndim(a), np.ndim(b))
    unbatched = _UNBATCHED.get(dims)

    def back(dy):
        if unbatched is not None:
            return unbatched(dy, a, b)
        # The 1-d operands are promoted to matrices, as matmul does, and demoted again after.
        a2 = a[None, :] if dims[0] == 1 else a
        b2 = b[:, None] if dims[1] == 1 else b
        dy2 = dy
        if dims[0] == 1:
            dy2 = np.expand_dims(dy2, -2 if dims[1] > 1 else 0)
        if dims[1] == 1:
            dy2 = np.expand_dims(dy2, -1)
        da = _summed_product(dy2, transpose(b2), np.shape(a2))
        db = _summed_product(transpose(a2), dy2, np.shape(b2))
        return np.reshape(da, np.shape(a)), np.reshape(db, np.shape(b))

    return y, back


def _matmul_for(dims, kwargs):
    """``(forward, back)`` of matmul for operands of ``dims`` dimensions without a batch and
    no settings: what the rule computes, as two plain functions, ``forward(a, b)`` and
    ``back(dy, a, b)`` (a compiled replay calls them, rather than the rule and the closure it
    makes, in a loop of dot products); None otherwise."""
    unbatched = _UNBATCHED.get(dims)
    return None if kwargs or unbatched is None else (np.matmul, unbatched)


matmul.specialized = _matmul_for


def _summed_product(left, right, shape):
    """``left @ right`` summed to ``shape``, that of an operand matmul broadcast over the
    others' batch: for a matrix (``A @ C`` of a stack ``A`` and one ``C``), the sum over the batch
    of ``L_b R_b`` is one product ``[L_1 ... L_B] @ [R_1; ...; R_B]``, which makes no batch of
    products (a stack of 3,600 matrices' cotangents, where the sum is one matrix)."""
    batch = np.broadcast_shapes(np.shape(left)[:-2], np.shape(right)[:-2])
    if len(shape) != 2 or not batch:
        return unbroadcast(left @ right, shape)
    left = np.broadcast_to(left, batch + np.shape(left)[-2:])
    right = np.broadcast_to(right, batch + np.shape(right)[-2:])
    inner = math.prod(batch) * np.shape(right)[-2]  # explicit: -1 is no size for empty arrays
    rows = np.reshape(np.moveaxis(left, -2, 0), (np.shape(left)[-2], inner))
    return rows @ np.reshape(right, (inner, np.shape(right)[-1]))


defmultilinear(np.matmul, np.linalg.matmul, operands=(0, 1))


@defrule(np.vecdot, np.linalg.vecdot, leading=2)
def vecdot(a, b, axis=-1, **kwargs):
    y = np.vecdot(a, b, axis=axis, **kwargs)

    def back(dy):  # a is conjugated, as in vdot
        dy = np.expand_dims(dy, axis)
        return unbroadcast(np.conjugate(dy) * b, np.shape(a)), unbroadcast(dy * a, np.shape(b))

    return y, back


defmultilinear(np.vecdot, np.linalg.vecdot, operands=(0, 1))


def product_as_einsum(func, subscripts):
    """Register ``func(a, b)``, which is the einsum ``subscripts`` of its two operands."""

    def rule(a, b):
        terms, output = _explicit_einsum(subscripts, [np.shape(a), np.shape(b)])
        return func(a, b), contraction_back(terms, output, (a, b))

    rule.__name__ = func.__name__
    defrule(func, leading=2)(rule)
    defmultilinear(func, operands=(0, 1))


if hasattr(np, "matvec"):  # NumPy 2.2 and later
    product_as_einsum(np.matvec, "...ij,...j->...i")

    @defrule(np.vecmat, leading=2)
    def vecmat(x, a):
        """y = conj(x) A (the vector is conjugated, as in vdot): x̄ = A conj(ȳ), Ā = x ȳᵀ."""
        y = np.vecmat(x, a)

        def back(dy):
            return (unbroadcast(np.matvec(a, np.conjugate(dy)), np.shape(x)),
                    unbroadcast(x[..., :, None] * dy[..., None, :], np.shape(a)))

        return y, back

    defmultilinear(np.vecmat, operands=(0, 1))


def _trace_back(a, offset, axis1, axis2):
    def back(dy):
        g = np.zeros(np.shape(a), np.result_type(dy, a), like=dy)  # traced like dy, if it is
        g_moved = np.moveaxis(g, (axis1, axis2), (-2, -1))  # a view: writes land in g
        length = max(0, min(g_moved.shape[-2] + min(offset, 0), g_moved.shape[-1] - max(offset, 0)))
        rows = np.arange(length) - min(offset, 0)
        columns = np.arange(length) + max(offset, 0)
        g_moved[..., rows, columns] = np.expand_dims(dy, -1)
        return (g,)

    return back


@defrule(np.trace, leading=1)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    return np.trace(a, offset, axis1, axis2, dtype), _trace_back(a, offset, axis1, axis2)


deflinear(np.trace)


@defrule(np.linalg.trace, leading=1)
def trace_of_matrices(x, offset=0, dtype=None):
    return np.linalg.trace(x, offset=offset, dtype=dtype), _trace_back(x, offset, -2, -1)


deflinear(np.linalg.trace)


_CROSS_OF_2_VECTORS = ("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                       "3-dimensional vectors instead. (deprecated in NumPy 2.0)")


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``np.cross(a, b, ...)``, NumPy's value bit for bit, without NumPy 2's deprecated path
    for 2-vectors. That path warns from the line that called it, which would be this module's;
    the warning is the user's (their code calls ``np.cross`` of 2-vectors), so it is issued at
    the user's line instead. The 2-vector formulas are NumPy's own (a missing z is 0)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = np.moveaxis(a, axisa, -1)
    b = np.moveaxis(b, axisb, -1)
    if a.shape[-1] == 3 and b.shape[-1] == 3 or a.shape[-1] not in (2, 3) or (
            b.shape[-1] not in (2, 3)):
        return np.cross(a, b, axisc=axisc)  # 3-vectors, or NumPy's own error
    where = source_line(caller(1))
    if where is not None:
        warn_at(_CROSS_OF_2_VECTORS, DeprecationWarning, *where)
    z = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z  # the z component alone, as NumPy gives it
    if a.shape[-1] == 2:
        x, y = a[..., 1] * b[..., 2], -(a[..., 0] * b[..., 2])
    else:
        x, y = -(a[..., 2] * b[..., 1]), a[..., 2] * b[..., 0]
    return np.moveaxis(np.stack([x, y, z], axis=-1), -1, axisc)


@defrule(np.cross, np.linalg.cross, leading=2)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    y = _cross(a, b, axisa, axisb, axisc)
    a_last = np.moveaxis(a, axisa, -1)
    b_last = np.moveaxis(b, axisb, -1)

    def to3(v):
        """A 2-vector is a 3-vector with z = 0 (NumPy's own convention for cross)."""
        if v.shape[-1] == 3:
            return v
        return np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype, like=memory(v))],
                              axis=-1)

    def back(dy):
        if a_last.shape[-1] == 2 and b_last.shape[-1] == 2:
            dy3 = np.zeros(np.shape(dy) + (3,), np.result_type(dy), like=dy)
            dy3[..., 2] = dy  # both 2-vectors: y is the z component alone
        else:
            dy3 = np.moveaxis(dy, axisc, -1)
        # <dy, a × b> = <a, b × dy> = <b, dy × a>
        da = np.cross(to3(b_last), dy3)[..., :a_last.shape[-1]]
        db = np.cross(dy3, to3(a_last))[..., :b_last.shape[-1]]
        da = np.moveaxis(unbroadcast(da, a_last.shape), -1, axisa)
        db = np.moveaxis(unbroadcast(db, b_last.shape), -1, axisb)
        return da, db

    return y, back


@defjvp(np.cross, np.linalg.cross, leading=2)
def cross_jvp(tangents, a, b, *args, **kwargs):
    """The product rule, each term a cross product computed as ``_cross`` computes it."""
    da, db = tangents[:2]
    y = _cross(a, b, *args, **kwargs)
    terms = ([] if da is None else [_cross(da, b, *args, **kwargs)]) + (
        [] if db is None else [_cross(a, db, *args, **kwargs)])
    return y, terms[0] if len(terms) == 1 else terms[0] + terms[1]


# ----------------------------------------------------------------------------------------------
# np.linalg: inverses and solves


@defrule(np.linalg.inv, leading=1)
def inv(a):
    y = np.linalg.inv(a)

    def back(dy):
        # dY = -Y dA Y  (Giles 2008, §3.1), so Ā = -Yᵀ Ȳ Yᵀ.
        y_t = transpose(y)
        return (-(y_t @ dy @ y_t),)

    return y, back


@defjvp(np.linalg.inv)
def inv_jvp(tangents, a):
    y = np.linalg.inv(a)
    return y, -(y @ tangents[0] @ y)  # Giles 2008, §3.1


@defrule(np.linalg.solve, leading=2)
def solve(a, b):
    x = np.linalg.solve(a, b)
    is_vector = np.ndim(b) == 1  # NumPy 2: b is a vector only when it is 1-d

    def back(dx):
        # x = A⁻¹ b: b̄ = A⁻ᵀ x̄ and Ā = -b̄ xᵀ (Giles 2008, §3.1).
        if is_vector:
            db = np.linalg.solve(transpose(a), dx[..., None])[..., 0]
            da = -db[..., :, None] * x[..., None, :]
        else:
            db = np.linalg.solve(transpose(a), dx)
            da = -(db @ transpose(x))
        return unbroadcast(da, np.shape(a)), unbroadcast(db, np.shape(b))

    return x, back


@defjvp(np.linalg.solve)
def solve_jvp(tangents, a, b):
    da, db = tangents
    x = np.linalg.solve(a, b)
    # dx = A⁻¹ (db - dA x)  (Giles 2008, §3.1), a 1-d b made a column for the products
    is_vector = np.ndim(b) == 1
    rhs = None if db is None else db[..., None] if is_vector else db
    if da is not None:
        da_x = da @ (x[..., None] if is_vector else x)
        rhs = -da_x if rhs is None else rhs - da_x
    dx = np.linalg.solve(a, rhs)
    return x, dx[..., 0] if is_vector else dx


@defrule(np.linalg.pinv, leading=1)
def pinv(a, *args, **kwargs):
    p = np.linalg.pinv(a, *args, **kwargs)

    def back(dp):
        # Golub & Pereyra (1973), Thm. 4.3, for A of locally constant rank:
        # dP = -P dA P + P Pᵀ dAᵀ (I - A P) + (I - P A) dAᵀ Pᵀ P, so
        # Ā = -Pᵀ P̄ Pᵀ + (I - A P) P̄ᵀ P Pᵀ + Pᵀ P P̄ᵀ (I - P A). Complex A: ᴴ for ᵀ in both
        # (dP is real-linear in dA, not holomorphic; the pullback is its adjoint for Re<a, b>).
        p_t, dp_t = adjoint(p), adjoint(dp)
        left_residual = dp_t - a @ (p @ dp_t)      # (I - A P) P̄ᵀ
        right_residual = dp_t - (dp_t @ p) @ a     # P̄ᵀ (I - P A)
        da = -(p_t @ dp @ p_t) + left_residual @ (p @ p_t) + (p_t @ p) @ right_residual
        return (da,)

    return p, back


def _pinv_tangent(a, p, da):
    """dP = -P dA P + P Pᵀ dAᵀ (I - A P) + (I - P A) dAᵀ Pᵀ P (Golub & Pereyra 1973, Thm. 4.3;
    ᴴ for ᵀ for complex A)."""
    da_t = adjoint(da)
    return (-(p @ da @ p) + (p @ adjoint(p)) @ (da_t - (da_t @ a) @ p)
            + (da_t - p @ (a @ da_t)) @ (adjoint(p) @ p))


@defjvp(np.linalg.pinv)
def pinv_jvp(tangents, a, *args, **kwargs):
    p = np.linalg.pinv(a, *args, **kwargs)
    return p, _pinv_tangent(a, p, tangents[0])


@defrule(np.linalg.matrix_power, leading=1)
def matrix_power(a, n):
    y = np.linalg.matrix_power(a, n)
    base = np.linalg.inv(a) if n < 0 else a
    count = abs(n)

    def back(dy):
        # Y = B^m: dY = Σ_k B^k dB B^(m-1-k), so B̄ = Σ_k (Bᵀ)^k Ȳ (Bᵀ)^(m-1-k).
        base_t = transpose(base)
        powers = [np.broadcast_to(np.eye(base.shape[-1], like=memory(base)), base.shape)]
        for _ in range(count - 1):
            powers.append(powers[-1] @ base_t)
        db = sum((powers[k] @ dy @ powers[count - 1 - k] for k in range(count)),
                 start=np.zeros_like(dy))
        if n < 0:  # B = A⁻¹: Ā = -Bᵀ B̄ Bᵀ
            db = -(base_t @ db @ base_t)
        return (db,)

    return y, back


@defjvp(np.linalg.matrix_power)
def matrix_power_jvp(tangents, a, n):
    y = np.linalg.matrix_power(a, n)
    if n == 0:
        return y, np.zeros_like(y)
    base, dbase = a, tangents[0]
    if n < 0:  # B = A⁻¹, dB = -B dA B
        base = np.linalg.inv(a)
        dbase = -(base @ dbase @ base)
    # d(B^k B) = d(B^k) B + B^k dB, from B^1 up to B^|n|
    power, dpower = base, dbase
    for _ in range(abs(n) - 1):
        power, dpower = power @ base, dpower @ base + power @ dbase
    return y, dpower


@defrule(np.linalg.lstsq, leading=2)
def lstsq(a, b, rcond=None):
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
    p, pinv_back = pinv(a)
    is_vector = np.ndim(b) == 1

    def back(dys):
        dx, dresiduals, _, ds = dys
        dx2 = dx[:, None] if is_vector else dx
        x2 = x[:, None] if is_vector else x
        b2 = b[:, None] if is_vector else b
        # x = P b with P = pinv(A) (full rank): b̄ = Pᵀ x̄, and Ā from P̄ = x̄ bᵀ (see pinv);
        # ᴴ for ᵀ for complex values, here and below.
        db = adjoint(p) @ dx2
        da = pinv_back(dx2 @ adjoint(b2))[0]
        if np.size(residuals):
            # r_k = |b_k - A x_k|²; x is optimal, so only the explicit A, b dependence counts
            # (envelope theorem): r̄ gives Ā = -2 r̄ (b - A x) xᵀ, b̄ = 2 r̄ (b - A x).
            weighted = 2.0 * (b2 - a @ x2) * dresiduals
            da = da - weighted @ adjoint(x2)
            db = db + weighted
        if np.any(ds):
            # Singular values: σ̄ gives Ā = U diag(σ̄) Vᵀ (Giles 2008, §3.2; vt is Vᴴ).
            u, _, vt = np.linalg.svd(a, full_matrices=False)
            da = da + (u * ds) @ vt
        return da, np.reshape(db, np.shape(b))

    return (x, residuals, rank, s), back


@defjvp(np.linalg.lstsq)
def lstsq_jvp(tangents, a, b, rcond=None):
    da, db = tangents[:2]
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=rcond)
    is_vector = np.ndim(b) == 1
    x2 = x[:, None] if is_vector else x
    b2 = b[:, None] if is_vector else b
    db2 = None if db is None else db[:, None] if is_vector else db
    # The reverse rule's assumptions: x = P b with P = pinv(A) of locally constant rank, and
    # the residuals |b - A x|² at an optimal x (envelope theorem): dr = 2 (b - A x)·(db - dA x).
    p = np.linalg.pinv(a)
    dx2 = 0.0 if db2 is None else p @ db2
    moved = 0.0 if db2 is None else db2
    if da is not None:
        dx2 = dx2 + _pinv_tangent(a, p, da) @ b2
        moved = moved - da @ x2
    if not np.size(residuals):
        dresiduals = np.zeros_like(residuals)
    elif np.iscomplexobj(x2) or np.iscomplexobj(moved):  # dr = 2 Re <b - A x, db - dA x>
        dresiduals = 2.0 * np.sum(np.real(conjugate(b2 - a @ x2) * moved), axis=0)
    else:
        dresiduals = 2.0 * np.sum((b2 - a @ x2) * moved, axis=0)
    if da is None:
        ds = np.zeros_like(s)
    else:  # dσ_i = u_iᵀ dA v_i (Giles 2008, §3.2; Re(u_iᴴ dA v_i) for complex A)
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        ds = np.sum(conjugate(u) * (da @ adjoint(vt)), axis=0)
        if np.iscomplexobj(ds):
            ds = np.real(ds)
    return (x, residuals, rank, s), (dx2[:, 0] if is_vector else dx2, dresiduals, None, ds)


# ----------------------------------------------------------------------------------------------
# np.linalg: determinants and norms


@defrule(np.linalg.det, leading=1)
def det(a):
    y = np.linalg.det(a)
    return y, lambda dy: (det_cotangent(a, y, dy),)


@defjvp(np.linalg.det)
def det_jvp(tangents, a):
    y = np.linalg.det(a)
    return y, det_tangent(a, y, tangents[0])


@defrule(np.linalg.slogdet, leading=1)
def slogdet(a):
    """Real A: d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant.

    Complex A: with t = d log det A = tr(A⁻¹ dA) (complex), d log|det A| = Re t and the sign
    det/|det| = e^{iθ} moves by d sign = i sign Im t. A loss's change is then
    l̄ Re t + Re(conj(s̄) i sign Im t) = Re(conj(g) t) with g = l̄ + i Im(conj(sign) s̄), and
    t = <A⁻ᴴ, dA>, so Ā = g A⁻ᴴ."""
    result = np.linalg.slogdet(a)
    if np.iscomplexobj(a):
        def back(dys):
            dsign, dlog = dys
            g = dlog + 1j * np.imag(np.conjugate(result[0]) * dsign)
            return (as_matrices(g) * adjoint(np.linalg.inv(a)),)

        return result, back

    def back(dys):
        # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant.
        return (as_matrices(dys[1]) * transpose(np.linalg.inv(a)),)

    return result, back


@defjvp(np.linalg.slogdet)
def slogdet_jvp(tangents, a):
    result = np.linalg.slogdet(a)
    t = np.trace(np.linalg.solve(a, tangents[0]), axis1=-2, axis2=-1)  # d log det A
    if np.iscomplexobj(a):  # d log|det| = Re t, d sign = i sign Im t (see slogdet)
        return result, type(result)(1j * result[0] * np.imag(t), np.real(t))
    # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant and has no tangent.
    return result, type(result)(None, t)


@defrule(np.linalg.norm, leading=1)
def norm(x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = norm_axes(x, ord, axis)
    return y, norm_pullback(x, y, ord, axes, keepdims, matrix)


@defjvp(np.linalg.norm)
def norm_jvp(tangents, x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = norm_axes(x, ord, axis)
    return y, norm_tangent(x, tangents[0], y, ord, axes, keepdims, matrix)


def _vector_norm_axes(x, axis):
    return reduced_axes(x, tuple(range(np.ndim(x))) if axis is None else axis)


@defrule(np.linalg.vector_norm, leading=1)
def vector_norm(x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, norm_pullback(x, y, ord, _vector_norm_axes(x, axis), keepdims, matrix=False)


@defjvp(np.linalg.vector_norm)
def vector_norm_jvp(tangents, x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, norm_tangent(x, tangents[0], y, ord, _vector_norm_axes(x, axis), keepdims, False)


@defrule(np.linalg.matrix_norm, leading=1)
def matrix_norm(x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, norm_pullback(x, y, ord, reduced_axes(x, (-2, -1)), keepdims, matrix=True)


@defjvp(np.linalg.matrix_norm)
def matrix_norm_jvp(tangents, x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, norm_tangent(x, tangents[0], y, ord, reduced_axes(x, (-2, -1)), keepdims, True)


# ----------------------------------------------------------------------------------------------
# np.linalg: factorisations of symmetric (complex: Hermitian) matrices, and the SVD
#
# Complex matrices: each rule is written in mutad's convention (a cotangent is dL/dx + i dL/dy,
# the pullback the adjoint for the real inner product Re<a, b>), its transposes conjugate
# transposes (``adjoint``: for real arrays the transpose itself, so real values take the same
# operations as before). The eigenvectors and singular vectors of complex matrices are each
# determined only up to a phase: see ``require_phase_free``.


@defrule(np.linalg.cholesky, leading=1)
def cholesky(a, upper=False):
    """A = L Lᵀ (complex: A = L Lᴴ, Hermitian positive definite), with the symmetric
    (Hermitian) gradient; the upper factor is Lᵀ (Lᴴ). Murray 2016; see
    ``factorizations.cholesky_cotangent``."""
    require_symmetric(a, "np.linalg.cholesky")
    factor = np.linalg.cholesky(a, upper=upper)
    lower = adjoint(factor) if upper else factor

    def back(dfactor):
        dlower = adjoint(dfactor) if upper else dfactor
        return (hermitian_part(cholesky_cotangent(lower, dlower)),)  # Murray 2016

    return factor, back


@defjvp(np.linalg.cholesky)
def cholesky_jvp(tangents, a, upper=False):
    require_symmetric(a, "np.linalg.cholesky")
    factor = np.linalg.cholesky(a, upper=upper)
    if upper:
        return factor, adjoint(cholesky_tangent(adjoint(factor), tangents[0]))
    return factor, cholesky_tangent(factor, tangents[0])


@defrule(np.linalg.eigh, leading=1)
def eigh(a, UPLO="L"):
    """A = V diag(w) Vᵀ, symmetric A, with the symmetric gradient (Giles 2008, §3.1).

    Complex Hermitian A = V diag(w) Vᴴ, w real: the gradient is the Hermitian one (the
    derivative along Hermitian perturbations; a matrix that is not Hermitian is refused). With
    M = Vᴴ dA V: dw = diag(M), dV = V (F ∘ M) + V diag(iφ), F_ij = 1/(w_j - w_i). The real φ
    is the eigenvectors' phase freedom (V → V diag(e^{iφ})): NumPy's phases follow LAPACK's
    convention, which mutad does not differentiate, and the rules take φ = 0 (forward mode's
    tangent of V has Im diag(Vᴴ dV) = 0). The gradient of a loss invariant under the phases
    is therefore right; one that reads them has none, and reverse mode refuses it
    (``require_phase_free``), as PyTorch does. The pullback is
    Ā = herm(V (diag(w̄) + F ∘ Vᴴ V̄) Vᴴ). Equal eigenvalues: F = 0 on their pairs, as for
    real matrices."""
    require_symmetric(a, "np.linalg.eigh")
    result = np.linalg.eigh(a, UPLO)
    w, v = result
    equal = equal_pairs(w)  # now: back may see w restored up to rounding

    def back(dys):
        dw, dv = dys
        return (eigh_cotangent(w, v, dw, dv, equal),)

    return result, back


@defjvp(np.linalg.eigh)
def eigh_jvp(tangents, a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigh")
    result = np.linalg.eigh(a, UPLO)
    w, v = result
    # dw = diag(Vᵀ dA V), dV = V (F ∘ Vᵀ dA V)  (Giles 2008, §3.1; ᴴ for complex A)
    middle, dw = eigh_tangent(v, tangents[0])
    return result, type(result)(dw, v @ (eigh_couplings(w) * middle))


@defrule(np.linalg.eigvalsh, leading=1)
def eigvalsh(a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigvalsh")
    w, v = np.linalg.eigh(a, UPLO)  # (LAPACK's values without vectors may differ in last bits)

    def back(dw):
        return (eigh_cotangent(w, v, dw, None, None),)

    return np.linalg.eigvalsh(a, UPLO), back


@defjvp(np.linalg.eigvalsh)
def eigvalsh_jvp(tangents, a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigvalsh")
    return np.linalg.eigvalsh(a, UPLO), eigh_tangent(np.linalg.eigh(a, UPLO)[1], tangents[0])[1]


def _require_thin_svd(a, full_matrices, compute_uv):
    m, n = a.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise UnsupportedOperationError(
            "np.linalg.svd(a, full_matrices=True) of a non-square matrix: the extra singular "
            "vectors are not determined by a, so they have no gradient. Pass "
            "full_matrices=False.")


@defrule(np.linalg.svd, leading=1)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """NumPy's factors (its singular values alone, without vectors, are another LAPACK
    computation, whose bits may differ), differentiated through the thin SVD's factors that
    back reads (Giles 2008). ``hermitian=True`` reads one triangle, as ``eigh`` does: a
    matrix that is not symmetric (Hermitian) is refused, and the gradient is the symmetric one.

    For complex matrices, the factors are both the output and what back reads: the phases of
    the singular vectors are then one choice, which a phase-free loss's cotangent cancels
    (with two calls, an outer differentiation would see each call's phases cancelled only by
    the other's; see require_phase_free)."""
    _require_thin_svd(a, full_matrices, compute_uv)
    if hermitian:
        require_symmetric(a, "np.linalg.svd(..., hermitian=True)")
    result = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                           hermitian=hermitian)
    # the thin factors: those returned (a non-square full SVD is refused above)
    u, s, vt = result if compute_uv else np.linalg.svd(a, full_matrices=False,
                                                       hermitian=hermitian)

    def back(dys):
        if not compute_uv:
            g = svd_cotangent(u, s, vt, None, dys, None)
        else:
            # Outputs no gradient reached arrive as zeros: skip their terms, which would turn
            # the undetermined F of repeated singular values into NaN for nothing.
            du, ds, dvt = (d if d.any() else None for d in dys)
            g = svd_cotangent(u, s, vt, du, np.zeros_like(s) if ds is None else ds, dvt)
        return (hermitian_part(g) if hermitian else g,)

    return result, back


@defjvp(np.linalg.svd)
def svd_jvp(tangents, a, full_matrices=True, compute_uv=True, hermitian=False):
    _require_thin_svd(a, full_matrices, compute_uv)
    da = tangents[0]
    if hermitian:  # along the Hermitian part, as the reverse rule's gradient
        require_symmetric(a, "np.linalg.svd(..., hermitian=True)")
        da = hermitian_part(da)
    result = np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    # The tangent is of the factors NumPy returned, so the singular vectors' signs are theirs.
    u, s, vt = result if compute_uv else np.linalg.svd(a, full_matrices=False,
                                                       hermitian=hermitian)
    if not compute_uv:
        return result, real_diagonal(adjoint(u) @ da @ adjoint(vt))
    return result, type(result)(*svd_tangent(u, s, vt, da))


# ----------------------------------------------------------------------------------------------
# np.linalg: eigendecomposition of general matrices


@defrule(np.linalg.eig, leading=1)
def eig(a):
    """A V = V diag(w) for a general square A, real or complex; NumPy returns complex w and V
    for a real A whose eigenvalues are not all real, and the gradient of a real A is then the
    real part of the complex one (the core takes it). Eigenvalues are taken simple: where two
    are equal neither they nor their eigenvectors are differentiable, and the couplings F of
    such a pair are 0, as for eigh.

    With M = V⁻¹ dA V (rows of V⁻¹ the left eigenvectors): dw = diag(M), holomorphic in A, and
    dV = V (F ∘ M) + V diag(c), F_ij = 1/(w_j - w_i) off the diagonal (Giles 2008, §3.1).
    NumPy scales each eigenvector to unit 2-norm, so Re(v_iᴴ dv_i) = 0 fixes Re c_i; Im c_i is
    the eigenvector's phase freedom (v_i → v_i e^{iφ}), which the rules set to 0 (a real
    eigenvector's sign is only a discrete choice: there the rules are exact). As for eigh,
    the gradient of a loss invariant under the phases (|V|², V diag(f(w)) V⁻¹, a real A's
    real eigenvectors) is right, and reverse mode refuses a loss that reads them
    (``require_phase_free``). The pullback, the adjoint for Re<a, b>:
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ."""
    result = np.linalg.eig(a)
    w, v = result
    equal = equal_pairs(w)  # now: back may see w restored up to rounding

    def back(dys):
        dw, dv = dys
        return (eig_cotangent(w, v, dw, dv, equal),)

    return result, back


@defjvp(np.linalg.eig)
def eig_jvp(tangents, a):
    result = np.linalg.eig(a)
    w, v = result
    return result, type(result)(*eig_tangent(w, v, tangents[0]))


def _eigenvectors_in_order(a, w):
    """The eigenvectors of ``a`` for its eigenvalues ``w`` as np.linalg.eigvals orders them.
    np.linalg.eig computes the same eigenvalues in the same order (LAPACK's geev either way);
    should they ever differ, each is matched with the nearest."""
    w_eig, v = np.linalg.eig(a)
    if not np.all(w_eig == w):
        order = np.argmin(np.abs(w[..., :, None] - w_eig[..., None, :]), axis=-1)
        v = np.take_along_axis(v, order[..., None, :], axis=-1)
    return v


@defrule(np.linalg.eigvals, leading=1)
def eigvals(a):
    """The eigenvalues of eig (see there): dw = diag(V⁻¹ dA V), Ā = V⁻ᴴ diag(w̄) Vᴴ."""
    w = np.linalg.eigvals(a)
    v = _eigenvectors_in_order(a, w)

    def back(dw):
        vh = adjoint(v)
        return (np.linalg.solve(vh, dw[..., :, None] * vh),)

    return w, back


@defjvp(np.linalg.eigvals)
def eigvals_jvp(tangents, a):
    w = np.linalg.eigvals(a)
    v = _eigenvectors_in_order(a, w)
    return w, np.diagonal(np.linalg.solve(v, tangents[0] @ v), 0, -2, -1).copy()


# ----------------------------------------------------------------------------------------------
# Convolution: bilinear, its adjoints correlations with the cotangent padded to the full result


def _convolution_window(n, m, mode):
    """Where the ``mode`` result sits in the full convolution of lengths ``n`` and ``m``."""
    longer, shorter = max(n, m), min(n, m)
    if mode in ("full", 2):
        return 0, longer + shorter - 1
    if mode in ("same", 1):
        return (shorter - 1) // 2, longer
    return shorter - 1, longer - shorter + 1


@defrule(np.convolve, leading=2)
def convolve(a, v, *settings, mode="full"):
    mode = settings[0] if settings else mode
    y = np.convolve(a, v, mode)
    n, m = np.shape(a)[0], np.shape(v)[0]

    def back(dy):
        start, length = _convolution_window(n, m, mode)
        full = np.pad(dy, (start, n + m - 1 - start - length))
        # y[k] = Σ_i a[i] v[k - i]: da[i] = Σ_j dy[i + j] v[j], dv[j] = Σ_i dy[i + j] a[i].
        return _correlate_valid(full, v), _correlate_valid(full, a)

    return y, back


def _correlate_valid(x, w):
    """``out[i] = Σ_j x[i + j] w[j]`` for every ``i`` where ``w`` fits inside ``x``, through
    ``np.convolve`` so that it is differentiated again under nesting."""
    return np.convolve(x, w[::-1], "valid")


defmultilinear(np.convolve)


# ----------------------------------------------------------------------------------------------
# QR of a tall or square matrix, reduced (Walter & Lehmann 2018; the forward rule as JAX's)


def _require_reduced_qr(a, mode):
    if mode not in ("reduced", "r") or 0 < a.shape[-2] < a.shape[-1]:
        raise UnsupportedOperationError(
            f"np.linalg.qr(a, mode={mode!r}) of a {a.shape[-2]}x{a.shape[-1]} matrix: mutad "
            "differentiates the reduced QR of tall or square matrices (mode='reduced' or 'r'), "
            "whose factors are unique. Transpose a wide matrix, or take the reduced factors.")


@defrule(np.linalg.qr, leading=1)
def qr(a, *settings, mode="reduced"):
    """A = Q R, reduced, of a tall or square A (Walter & Lehmann 2018).

    Complex A: LAPACK's R has a real diagonal, which makes the factors unique (but for the
    diagonal's signs, a discrete choice), so every loss of Q and R has a gradient. With
    C = Qᴴ dA R⁻¹: Qᴴ dQ = Ω is skew-Hermitian and dR R⁻¹ upper triangular with a real
    diagonal, so Ω = tril(C, -1) - tril(C, -1)ᴴ + i Im diag(C), dQ = Q (Ω - C) + dA R⁻¹ and
    dR = (C - Ω) R. The adjoint for Re<a, b>: Ā = (Q̄ + Q G) R⁻ᴴ, G the Hermitian matrix with
    M = R R̄ᴴ - Q̄ᴴ Q's strict lower triangle below the diagonal and Re diag(M) on it
    (the real rule's copyltu, with ᴴ for ᵀ)."""
    mode = settings[0] if settings else mode
    _require_reduced_qr(a, mode)
    q, r = np.linalg.qr(a)

    def back(dys):
        if 0 in a.shape[-2:]:  # empty factors: nothing depends on the input
            return (np.zeros_like(a),)
        dq, dr = (None, dys) if mode == "r" else dys
        # dA = (dQ + Q copyltu(M)) R⁻ᵀ, M = R dRᵀ - dQᵀ Q, copyltu(M) = its lower triangle
        # mirrored to the upper one.
        return (qr_cotangent(q, r, dq, dr),)

    return (r if mode == "r" else np.linalg.qr(a)), back


@defjvp(np.linalg.qr)
def qr_jvp(tangents, a, mode="reduced"):
    _require_reduced_qr(a, mode)
    q, r = np.linalg.qr(a)
    if 0 in a.shape[-2:]:  # empty factors: nothing depends on the input
        result = np.linalg.qr(a, mode)
        return result, (np.zeros_like(r) if mode == "r" else
                        type(result)(np.zeros_like(q), np.zeros_like(r)))
    dq, dr = qr_tangent(q, r, tangents[0])
    if mode == "r":
        return r, dr
    result = np.linalg.qr(a)
    return result, type(result)(dq, dr)


# Complex values (facet complex): the products, inverse, solve and determinant are
# complex-differentiable, so their real rules hold; vdot and vecdot conjugate their first
# operand, and their rules above say so. The factorisations, norms, pseudo-inverse and least
# squares read conjugates: their rules above are written in mutad's convention for complex
# values (conjugate transposes, phases), and take real ones as before.
holomorphic(np.einsum, np.dot, np.inner, np.tensordot, np.linalg.tensordot, np.kron, np.outer,
            np.linalg.outer, np.matmul, np.linalg.matmul, np.matvec, np.trace,
            np.linalg.trace, np.cross, np.linalg.cross, np.convolve, np.linalg.inv,
            np.linalg.solve, np.linalg.matrix_power, np.linalg.det)
complex_aware(np.vdot, np.vecdot, np.linalg.vecdot, np.vecmat, np.linalg.slogdet, np.linalg.norm,
              np.linalg.vector_norm, np.linalg.matrix_norm, np.linalg.cholesky, np.linalg.eigh,
              np.linalg.eigvalsh, np.linalg.svd, np.linalg.qr, np.linalg.eig, np.linalg.eigvals,
              np.linalg.pinv, np.linalg.lstsq)
