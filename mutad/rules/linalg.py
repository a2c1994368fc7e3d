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

Complex matrices (``registry.COMPLEX``): the products, inv, solve, matrix_power and det are
complex-differentiable, so their real rules hold (``holomorphic``). The factorisations (cholesky,
eigh, eigvalsh, svd, qr, eig, eigvals), slogdet, the norms, pinv and lstsq have rules written in
mutad's convention (``complex_aware``): a transpose becomes a conjugate transpose, Hermitian
matrices take the place of symmetric ones (the Hermitian gradient), and the phases of complex
eigenvectors and singular vectors, which NumPy fixes by LAPACK's conventions, are left out of
every gradient: a loss that reads them is refused (``_require_phase_free``).

Nested reverse mode: a pullback's inputs and cotangents may be arrays an outer differentiation
traces (the inner one's values are), so rules compute with NumPy calls that dispatch: never
``np.asarray``, and a buffer a cotangent is written into is created ``like=`` it.

Forward mode: each rule has a tangent rule (``defjvp``) beside it, from the same sources, that
agrees with it exactly, <ẏ, w> = <ẋ, vjp(w)>: the symmetric inputs take the symmetric part of
their tangent, and the subgradients chosen at kinks (norms) and at repeated eigenvalues are the
reverse rules' own. Products are linear in each operand, so ``defmultilinear`` covers them.
"""

import string

import numpy as np

from ..errors import UnsupportedOperationError
from ..registry import complex_aware, defjvp, deflinear, defmultilinear, defrule, holomorphic
from ._helpers import require_symmetric, symmetric_part, transpose, unbroadcast
from .factorizations import adjoint, cholesky_cotangent, cholesky_tangent, hermitian_part


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


def contraction_back(terms, output, operands):
    """The pullback of ``einsum(terms -> output)(*operands)``: one cotangent per operand."""
    terms, squeezed, sizes = _squeeze_broadcast(terms, operands)

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


@defrule(np.matmul, np.linalg.matmul, leading=2)
def matmul(a, b, **kwargs):
    if "axes" in kwargs or "axis" in kwargs:
        raise UnsupportedOperationError("np.matmul(..., axes=...): move the axes first.")
    y = np.matmul(a, b, **kwargs)

    def back(dy):
        # The 1-d operands are promoted to matrices, as matmul does, and demoted again after.
        a2 = a[None, :] if np.ndim(a) == 1 else a
        b2 = b[:, None] if np.ndim(b) == 1 else b
        dy2 = dy
        if np.ndim(a) == 1:
            dy2 = np.expand_dims(dy2, -2 if np.ndim(b) > 1 else 0)
        if np.ndim(b) == 1:
            dy2 = np.expand_dims(dy2, -1)
        da = unbroadcast(dy2 @ transpose(b2), np.shape(a2))
        db = unbroadcast(transpose(a2) @ dy2, np.shape(b2))
        return np.reshape(da, np.shape(a)), np.reshape(db, np.shape(b))

    return y, back


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


@defrule(np.cross, np.linalg.cross, leading=2)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    y = np.cross(a, b, axisa, axisb, axisc)
    a_last = np.moveaxis(a, axisa, -1)
    b_last = np.moveaxis(b, axisb, -1)

    def to3(v):
        """A 2-vector is a 3-vector with z = 0 (NumPy's own convention for cross)."""
        if v.shape[-1] == 3:
            return v
        return np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], axis=-1)

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


defmultilinear(np.cross, np.linalg.cross, operands=(0, 1))


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


def _conjugate(x):
    """The complex conjugate; a real ``x`` itself (no operation recorded)."""
    return np.conjugate(x) if np.iscomplexobj(x) else x


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
        powers = [np.broadcast_to(np.eye(base.shape[-1]), base.shape)]
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
        dresiduals = 2.0 * np.sum(np.real(_conjugate(b2 - a @ x2) * moved), axis=0)
    else:
        dresiduals = 2.0 * np.sum((b2 - a @ x2) * moved, axis=0)
    if da is None:
        ds = np.zeros_like(s)
    else:  # dσ_i = u_iᵀ dA v_i (Giles 2008, §3.2; Re(u_iᴴ dA v_i) for complex A)
        u, _, vt = np.linalg.svd(a, full_matrices=False)
        ds = np.sum(_conjugate(u) * (da @ adjoint(vt)), axis=0)
        if np.iscomplexobj(ds):
            ds = np.real(ds)
    return (x, residuals, rank, s), (dx2[:, 0] if is_vector else dx2, dresiduals, None, ds)


# ----------------------------------------------------------------------------------------------
# np.linalg: determinants and norms


def _cofactor(a):
    """d det(A) / dA = adj(A)ᵀ, finite even where A is singular.

    With A = U S Vᵀ, adj(A)ᵀ = det(U) det(V) U adj(S) Vᵀ, adj(S)_ii = Π_{j≠i} s_j. For complex
    A = U S Vᴴ (the holomorphic derivative, det(A) A⁻ᵀ where A is invertible):
    adj(A)ᵀ = det(U) det(Vᴴ) conj(U) adj(S) conj(Vᴴ).
    """
    u, s, vt = np.linalg.svd(a)
    n = s.shape[-1]
    others = np.stack([np.prod(np.delete(s, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * ((_conjugate(u) * others[..., None, :]) @ _conjugate(vt))


def _as_matrices(y):
    """A (stack of) scalars ``y`` as 1 × 1 matrices, to scale a stack of matrices. ``y`` may be
    a Python or NumPy scalar, or an array an outer differentiation traces: np.reshape
    dispatches where np.asarray would cut the outer gradient."""
    return np.reshape(y, np.shape(y) + (1, 1))


@defrule(np.linalg.det, leading=1)
def det(a):
    y = np.linalg.det(a)

    def back(dy):
        # d det = det(A) tr(A⁻¹ dA)  (Jacobi's formula; Giles 2008, §3.1)
        try:
            cofactor = _as_matrices(y) * transpose(np.linalg.inv(a))
        except np.linalg.LinAlgError:
            cofactor = _cofactor(a)
        return (_as_matrices(dy) * cofactor,)

    return y, back


@defjvp(np.linalg.det)
def det_jvp(tangents, a):
    y = np.linalg.det(a)
    da = tangents[0]
    try:  # d det = det(A) tr(A⁻¹ dA)  (Jacobi's formula; Giles 2008, §3.1)
        return y, y * np.trace(np.linalg.solve(a, da), axis1=-2, axis2=-1)
    except np.linalg.LinAlgError:  # singular A: <adj(A)ᵀ, dA>, as the reverse rule
        return y, np.sum(_cofactor(a) * da, axis=(-2, -1))


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
            return (_as_matrices(g) * adjoint(np.linalg.inv(a)),)

        return result, back

    def back(dys):
        # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant.
        return (_as_matrices(dys[1]) * transpose(np.linalg.inv(a)),)

    return result, back


@defjvp(np.linalg.slogdet)
def slogdet_jvp(tangents, a):
    result = np.linalg.slogdet(a)
    t = np.trace(np.linalg.solve(a, tangents[0]), axis1=-2, axis2=-1)  # d log det A
    if np.iscomplexobj(a):  # d log|det| = Re t, d sign = i sign Im t (see slogdet)
        return result, type(result)(1j * result[0] * np.imag(t), np.real(t))
    # d log|det A| = tr(A⁻¹ dA); the sign is piecewise constant and has no tangent.
    return result, type(result)(None, t)


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
        u, _, vt = np.linalg.svd(x, full_matrices=False)
        if ord == "nuc":
            return u @ vt  # d Σσ_i = tr(Uᵀ dA V) (Re tr(Uᴴ dA V) for complex A)
        pick = 0 if ord == 2 else -1  # d σ_i = u_iᵀ dA v_i
        return u[..., :, pick, None] * vt[..., pick, None, :]
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x|; inf: the largest row sum; negative: the smallest.
        summed, across = (-2, -1) if ord in (1, -1) else (-1, -2)
        sums = np.sum(np.abs(x), axis=summed, keepdims=True)
        pick = np.max if ord > 0 else np.min
        return np.sign(x) * _split_ties(sums == pick(sums, axis=across, keepdims=True), across)
    raise UnsupportedOperationError(f"np.linalg.norm(..., ord={ord!r}) of a matrix.")


def _norm_derivative(x, y, ord, axes, keepdims, matrix):
    """d y / d x for y a norm of ``x`` over ``axes`` (a matrix norm when ``matrix``), in x's
    shape."""
    y_kept = y if keepdims else np.expand_dims(y, axes)
    if not matrix:
        return _vector_norm_derivative(x, y_kept, ord, axes)
    moved = (-2, -1)
    derivative = _matrix_norm_derivative(np.moveaxis(x, axes, moved),
                                         np.moveaxis(y_kept, axes, moved), ord)
    return np.moveaxis(derivative, moved, axes)


def _norm_back(x, y, ord, axes, keepdims, matrix):
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
            return (dy_kept * np.where(zero, 0.0, x / np.where(zero, 1.0, y_kept)),)

        return back
    derivative = _norm_derivative(x, y, ord, axes, keepdims, matrix)

    def back(dy):
        dy_kept = dy if keepdims else np.expand_dims(dy, axes)
        return (dy_kept * derivative,)

    return back


def _norm_tangent(x, dx, y, ord, axes, keepdims, matrix):
    """The tangent of a norm: the reverse rule's (sub)gradient applied to ``dx``, for complex
    ``x`` as the real inner product Re(conj(gradient) dx)."""
    derivative = _norm_derivative(x, y, ord, axes, keepdims, matrix)
    if np.iscomplexobj(derivative):
        return np.sum(np.real(np.conjugate(derivative) * dx), axis=axes, keepdims=keepdims)
    return np.sum(derivative * dx, axis=axes, keepdims=keepdims)


def _axes(x, axis):
    return tuple(int(i) % np.ndim(x) for i in np.atleast_1d(axis))


def _norm_axes(x, ord, axis):
    """The axes ``np.linalg.norm`` reduces, and whether it takes a matrix norm over them."""
    if axis is None and ord is None:  # the 2-norm of all entries, whatever the shape
        return tuple(range(np.ndim(x))), False
    axes = _axes(x, tuple(range(np.ndim(x))) if axis is None else axis)
    return axes, len(axes) == 2


@defrule(np.linalg.norm, leading=1)
def norm(x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = _norm_axes(x, ord, axis)
    return y, _norm_back(x, y, ord, axes, keepdims, matrix)


@defjvp(np.linalg.norm)
def norm_jvp(tangents, x, ord=None, axis=None, keepdims=False):
    y = np.linalg.norm(x, ord, axis, keepdims)
    axes, matrix = _norm_axes(x, ord, axis)
    return y, _norm_tangent(x, tangents[0], y, ord, axes, keepdims, matrix)


def _vector_norm_axes(x, axis):
    return _axes(x, tuple(range(np.ndim(x))) if axis is None else axis)


@defrule(np.linalg.vector_norm, leading=1)
def vector_norm(x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, _norm_back(x, y, ord, _vector_norm_axes(x, axis), keepdims, matrix=False)


@defjvp(np.linalg.vector_norm)
def vector_norm_jvp(tangents, x, axis=None, keepdims=False, ord=2):
    y = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    return y, _norm_tangent(x, tangents[0], y, ord, _vector_norm_axes(x, axis), keepdims, False)


@defrule(np.linalg.matrix_norm, leading=1)
def matrix_norm(x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, _norm_back(x, y, ord, _axes(x, (-2, -1)), keepdims, matrix=True)


@defjvp(np.linalg.matrix_norm)
def matrix_norm_jvp(tangents, x, keepdims=False, ord="fro"):
    y = np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return y, _norm_tangent(x, tangents[0], y, ord, _axes(x, (-2, -1)), keepdims, True)


# ----------------------------------------------------------------------------------------------
# np.linalg: factorisations of symmetric (complex: Hermitian) matrices, and the SVD
#
# Complex matrices: each rule is written in mutad's convention (a cotangent is dL/dx + i dL/dy,
# the pullback the adjoint for the real inner product Re<a, b>), its transposes conjugate
# transposes (``adjoint``: for real arrays the transpose itself, so real values take the same
# operations as before). The eigenvectors and singular vectors of complex matrices are each
# determined only up to a phase: see ``_require_phase_free``.


PHASE_TOLERANCE = 1e-6
"""How large Im diag(Vᴴ V̄) may be, relative to the norm of V̄'s column, before a loss counts
as reading an eigenvector's (or singular vector's) phase: rounding leaves it near 1e-16."""


def _squared_column_norms(x):
    return np.sum(np.real(np.conjugate(x) * x), axis=-2)


def _require_phase_free(name, phases, squared_scale):
    """Refuse a loss that depends on the phases of complex eigenvectors or singular vectors.

    Each column of V (eigh, eig; for the SVD the pairs of columns of U and V together) is
    determined only up to a factor e^{iφ}, which NumPy (LAPACK) fixes by a convention that
    mutad does not differentiate: the rules take their own phase convention, so the gradient
    of a loss invariant under those phases (|V|², V diag(c) Vᴴ, a projector v vᴴ, eig's
    V diag(f(w)) V⁻¹) is right, and that of a loss that reads a phase would be arbitrary. Such
    a loss is told by its cotangent: the change of the loss along V → V diag(e^{iφ}) is
    Σ φ_j Im (Vᴴ V̄)_jj, so invariance means ``phases`` = Im diag(Vᴴ V̄) = 0 (for the SVD,
    Im diag(Uᴴ Ū) + Im diag(Vᴴ V̄)). As in PyTorch, a loss that is not invariant is refused,
    in reverse mode (forward mode cannot tell: its tangents are in the rules' convention).
    The test is per call: a program that calls the factorisation twice on one matrix and
    cancels one call's phases by the other's (``V1.conj().T @ V2``) is refused too, although
    its gradient would be right; each rule therefore reads the same call's factors that it
    returns.
    ``squared_scale`` is the squared norm of the cotangent's columns (|phases|² is at most
    that); squares, so that no square root of 0 is recorded under nested differentiation."""
    if np.any(phases * phases > PHASE_TOLERANCE ** 2 * squared_scale):
        raise UnsupportedOperationError(
            f"{name} of a complex matrix: the loss depends on the phases of the "
            "eigenvectors (or singular vectors), which are arbitrary (each column may be "
            "multiplied by e^{iφ}; NumPy's choice is LAPACK's convention, not a differentiable "
            "function of the matrix), so it has no gradient. Differentiate quantities that do "
            "not depend on the phases, such as np.abs(V) ** 2, V @ np.diag(c) @ V.conj().T, "
            "or vectors whose phase your own code fixes, V * (V[k].conj() / np.abs(V[k])).")


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


def _eigh_couplings(w, equal=None):
    """F_ij = 1 / (w_j - w_i) off the diagonal. Equal eigenvalues make the eigenvectors'
    derivative undefined; their pairs get F = 0 (no coupling). ``equal`` (None: compare now)
    says which pairs are equal, as ``_equal_pairs`` found them when w was computed. (Complex
    eigenvalues, for eig, too.)"""
    gaps = w[..., None, :] - w[..., :, None]
    if equal is None:
        equal = gaps == 0
    return np.where(equal, 0.0, 1.0 / np.where(equal, 1.0, gaps))


def _equal_pairs(w):
    return w[..., None, :] == w[..., :, None]


def _eigh_back(w, v, dw, dv, equal):
    """Ā for A = V diag(w) Vᵀ (Giles 2008, §3.1): V (diag(w̄) + F ∘ Vᵀ V̄) Vᵀ, symmetrised.
    Complex Hermitian A = V diag(w) Vᴴ: the same with ᴴ for ᵀ, its Hermitian part (see eigh)."""
    middle = np.zeros(w.shape + w.shape[-1:], np.result_type(w, dw))
    if dv is not None and np.any(dv):
        vh_dv = adjoint(v) @ dv
        if np.iscomplexobj(vh_dv):
            _require_phase_free("np.linalg.eigh", np.imag(np.diagonal(vh_dv, 0, -2, -1)),
                                _squared_column_norms(dv))
        middle = _eigh_couplings(w, equal) * vh_dv
    middle = middle + dw[..., None, :] * np.eye(w.shape[-1])
    return hermitian_part(v @ middle @ adjoint(v))


def _real_diagonal(m):
    """The diagonal of a stack of matrices, its real part for complex ones, as a new array."""
    diagonal = np.diagonal(m, 0, -2, -1)
    return (np.real(diagonal) if np.iscomplexobj(diagonal) else diagonal).copy()


def _eigh_tangent(v, da):
    """V's coordinates of the symmetric (Hermitian) part of ``da``, Vᴴ dA V, and their
    diagonal dw, real."""
    middle = adjoint(v) @ hermitian_part(da) @ v
    return middle, _real_diagonal(middle)


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
    (``_require_phase_free``), as PyTorch does. The pullback is
    Ā = herm(V (diag(w̄) + F ∘ Vᴴ V̄) Vᴴ). Equal eigenvalues: F = 0 on their pairs, as for
    real matrices."""
    require_symmetric(a, "np.linalg.eigh")
    result = np.linalg.eigh(a, UPLO)
    w, v = result
    equal = _equal_pairs(w)  # now: back may see w restored up to rounding

    def back(dys):
        dw, dv = dys
        return (_eigh_back(w, v, dw, dv, equal),)

    return result, back


@defjvp(np.linalg.eigh)
def eigh_jvp(tangents, a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigh")
    result = np.linalg.eigh(a, UPLO)
    w, v = result
    # dw = diag(Vᵀ dA V), dV = V (F ∘ Vᵀ dA V)  (Giles 2008, §3.1; ᴴ for complex A)
    middle, dw = _eigh_tangent(v, tangents[0])
    return result, type(result)(dw, v @ (_eigh_couplings(w) * middle))


@defrule(np.linalg.eigvalsh, leading=1)
def eigvalsh(a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigvalsh")
    w, v = np.linalg.eigh(a, UPLO)

    def back(dw):
        return (_eigh_back(w, v, dw, None, None),)

    return w, back


@defjvp(np.linalg.eigvalsh)
def eigvalsh_jvp(tangents, a, UPLO="L"):
    require_symmetric(a, "np.linalg.eigvalsh")
    return np.linalg.eigvalsh(a, UPLO), _eigh_tangent(np.linalg.eigh(a, UPLO)[1], tangents[0])[1]


def _svd_couplings(s):
    """F_ij = 1/(s_j² - s_i²) off the diagonal (Townsend 2016)."""
    s_sq = s * s
    difference = s_sq[..., None, :] - s_sq[..., :, None]
    diagonal = np.eye(s.shape[-1], dtype=bool)
    return np.where(diagonal, 0.0, 1.0 / np.where(diagonal, 1.0, difference))


def _svd_back(u, s, vt, du, ds, dvt):
    """The pullback of the thin SVD ``a = u diag(s) vt`` (Townsend 2016, "Differentiating the
    singular value decomposition", eq. 30). Distinct singular values are assumed: the
    singular vectors of repeated ones are not determined, and neither is their gradient.

    Complex A = U S Vᴴ (``vt`` = Vᴴ): ᴴ for ᵀ, and one more term. With dP = Uᴴ dA V,
    Ω_U = Uᴴ dU and Ω_V = Vᴴ dV skew-Hermitian, Im dP_ii = s_i Im(Ω_U - Ω_V)_ii: only the
    difference of the phases of u_i and v_i is determined, the pair's common phase being free
    (see ``_require_phase_free``). The rules split it evenly, dU gaining
    U diag(i Im dP_ii / 2s_i) and dV its opposite, so P̄ gains i diag((Im J_ii - Im K_ii) / 2s_i),
    J = Uᴴ Ū, K = Vᴴ V̄; for a phase-free loss Im J_ii = -Im K_ii."""
    v = adjoint(vt)
    a_bar = u @ (ds[..., :, None] * vt)
    if du is None and dvt is None:
        return a_bar
    f = _svd_couplings(s)
    m, n = u.shape[-2], v.shape[-2]
    phases = np.iscomplexobj(u) and np.iscomplexobj(v)
    ut_du = vt_dv = dv = None
    if du is not None:
        ut_du = adjoint(u) @ du
        a_bar = a_bar + u @ ((f * (ut_du - adjoint(ut_du))) * s[..., None, :]) @ vt
        if m > s.shape[-1]:  # the part of du outside u's column space
            a_bar = a_bar + (du - u @ ut_du) @ (vt / s[..., :, None])
    if dvt is not None:
        dv = adjoint(dvt)
        vt_dv = vt @ dv
        a_bar = a_bar + u @ (s[..., :, None] * (f * (vt_dv - adjoint(vt_dv)))) @ vt
        if n > s.shape[-1]:
            a_bar = a_bar + (u / s[..., None, :]) @ adjoint(dv - v @ vt_dv)
    if phases:
        j, k = (0.0 if x is None else np.imag(np.diagonal(x, 0, -2, -1))
                for x in (ut_du, vt_dv))
        norms = sum(0.0 if x is None else _squared_column_norms(x) for x in (du, dv))
        _require_phase_free("np.linalg.svd", j + k, norms)
        a_bar = a_bar + u @ ((1j * (j - k) / (2 * s))[..., :, None] * vt)
    return a_bar


def _require_thin_svd(a, full_matrices, compute_uv):
    m, n = a.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise UnsupportedOperationError(
            "np.linalg.svd(a, full_matrices=True) of a non-square matrix: the extra singular "
            "vectors are not determined by a, so they have no gradient. Pass "
            "full_matrices=False.")


@defrule(np.linalg.svd, leading=1)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    _require_thin_svd(a, full_matrices, compute_uv)
    if compute_uv and np.iscomplexobj(a):
        # One call, whose factors are both the output and what back reads: the phases of the
        # singular vectors are then one choice, which a phase-free loss's cotangent cancels
        # (with two calls, an outer differentiation would see each call's phases cancelled
        # only by the other's; see _require_phase_free).
        result = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
        u, s, vt = result

        def back_complex(dys):
            du, ds, dvt = (d if d.any() else None for d in dys)
            return (_svd_back(u, s, vt, du, np.zeros_like(s) if ds is None else ds, dvt),)

        return result, back_complex
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    if not compute_uv:
        return s, lambda ds: (_svd_back(u, s, vt, None, ds, None),)

    def back(dys):
        # Outputs no gradient reached arrive as zeros: skip their terms, which would turn the
        # undetermined F of repeated singular values into NaN for nothing.
        du, ds, dvt = (d if d.any() else None for d in dys)
        return (_svd_back(u, s, vt, du, np.zeros_like(s) if ds is None else ds, dvt),)

    return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=True), back


@defjvp(np.linalg.svd)
def svd_jvp(tangents, a, full_matrices=True, compute_uv=True, hermitian=False):
    _require_thin_svd(a, full_matrices, compute_uv)
    result = np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    # The tangent is of the factors NumPy returned, so the singular vectors' signs are theirs.
    u, s, vt = result if compute_uv else np.linalg.svd(a, full_matrices=False)
    v, da = adjoint(vt), tangents[0]
    dp = adjoint(u) @ da @ v                                     # Uᵀ dA V
    ds = _real_diagonal(dp)
    if not compute_uv:
        return result, ds
    # Townsend 2016: dU = U (F ∘ (dP S + S dPᵀ)) + (I - U Uᵀ) dA V S⁻¹,
    #                dV = V (F ∘ (S dP + dPᵀ S)) + (I - V Vᵀ) dAᵀ U S⁻¹  (ᴴ for complex A).
    f = _svd_couplings(s)
    dp_s, s_dp = dp * s[..., None, :], s[..., :, None] * dp
    du = u @ (f * (dp_s + adjoint(dp_s)))
    dv = v @ (f * (s_dp + adjoint(s_dp)))
    if np.iscomplexobj(dp):  # the phases, split evenly between u_i and v_i (see _svd_back)
        phase = 1j * np.imag(np.diagonal(dp, 0, -2, -1)) / (2 * s)
        du = du + u * phase[..., None, :]
        dv = dv - v * phase[..., None, :]
    m, n, k = u.shape[-2], v.shape[-2], s.shape[-1]
    if m > k:
        du = du + (da @ v - u @ dp) / s[..., None, :]
    if n > k:
        dv = dv + (adjoint(da) @ u - v @ adjoint(dp)) / s[..., None, :]
    return result, type(result)(du, ds, adjoint(dv))


# ----------------------------------------------------------------------------------------------
# np.linalg: eigendecomposition of general matrices


def _eig_back(w, v, dw, dv, equal):
    """Ā for A V = V diag(w), V's columns of unit 2-norm (see eig):
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ."""
    vh = adjoint(v)
    middle = dw[..., None, :] * np.eye(w.shape[-1])
    if dv is not None and np.any(dv):
        vh_dv = vh @ dv
        diagonal = np.diagonal(vh_dv, 0, -2, -1)
        if np.iscomplexobj(vh_dv):
            _require_phase_free("np.linalg.eig", np.imag(diagonal), _squared_column_norms(dv))
            diagonal = np.real(diagonal)
        normalised = vh_dv - (vh @ v) * diagonal[..., None, :]
        middle = middle + _conjugate(_eigh_couplings(w, equal)) * normalised
    return np.linalg.solve(vh, middle @ vh)


def _eig_tangent(w, v, da):
    """dw = diag(M) and dV = V (F ∘ M) - V diag(Re diag(Vᴴ V (F ∘ M))), M = V⁻¹ dA V."""
    middle = np.linalg.solve(v, da @ v)
    dv = v @ (_eigh_couplings(w) * middle)
    dv = dv - v * np.real(np.sum(_conjugate(v) * dv, axis=-2, keepdims=True))
    return np.diagonal(middle, 0, -2, -1).copy(), dv


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
    (``_require_phase_free``). The pullback, the adjoint for Re<a, b>:
    Ā = V⁻ᴴ (diag(w̄) + conj(F) ∘ (Vᴴ V̄ - Vᴴ V diag(Re diag(Vᴴ V̄)))) Vᴴ."""
    result = np.linalg.eig(a)
    w, v = result
    equal = _equal_pairs(w)  # now: back may see w restored up to rounding

    def back(dys):
        dw, dv = dys
        return (_eig_back(w, v, dw, dv, equal),)

    return result, back


@defjvp(np.linalg.eig)
def eig_jvp(tangents, a):
    result = np.linalg.eig(a)
    w, v = result
    return result, type(result)(*_eig_tangent(w, v, tangents[0]))


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


def _times_inverse_adjoint(y, r):
    """``y R⁻ᵀ`` (``y R⁻ᴴ`` for complex ones), through a solve."""
    return adjoint(np.linalg.solve(r, adjoint(y)))


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
        m = r @ adjoint(dr) - (0.0 if dq is None else adjoint(dq) @ q)
        lower = np.tril(m, -1)
        diagonal = np.real(m) if np.iscomplexobj(m) else m
        mirrored = lower + adjoint(lower) + diagonal * np.eye(m.shape[-1])
        da = _times_inverse_adjoint((0.0 if dq is None else dq) + q @ mirrored, r)
        return (da,)

    return (r if mode == "r" else np.linalg.qr(a)), back


@defjvp(np.linalg.qr)
def qr_jvp(tangents, a, mode="reduced"):
    _require_reduced_qr(a, mode)
    q, r = np.linalg.qr(a)
    if 0 in a.shape[-2:]:  # empty factors: nothing depends on the input
        result = np.linalg.qr(a, mode)
        return result, (np.zeros_like(r) if mode == "r" else
                        type(result)(np.zeros_like(q), np.zeros_like(r)))
    da = tangents[0]
    da_r_inverse = transpose(np.linalg.solve(transpose(r), transpose(da)))  # dA R⁻¹
    c = adjoint(q) @ da_r_inverse
    lower = np.tril(c, -1)
    omega = lower - adjoint(lower)                                 # skew-symmetric (Hermitian)
    if np.iscomplexobj(c):  # R's diagonal stays real: Ω's diagonal is i Im diag(C) (see qr)
        omega = omega + 1j * np.imag(c) * np.eye(c.shape[-1])
    dq = q @ (omega - c) + da_r_inverse
    dr = (c - omega) @ r
    if mode == "r":
        return r, dr
    result = np.linalg.qr(a)
    return result, type(result)(dq, dr)


# Complex values (registry.COMPLEX): the products, inverse, solve and determinant are
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
