"""Products: einsum and every product written as one (dot, matmul, inner, tensordot, kron,
outer, vdot, vecdot, matvec, vecmat), trace, cross and convolve.

Every product is a contraction, so all of them share one pullback: the cotangent of an einsum
operand is the einsum of the output's cotangent with the other operands (``einsum_cotangent``).
Products with a faster or simpler form (matmul, outer, vdot) spell it out.

``np.linalg``'s matrix functions (inverses, solves, determinants, factorisations, norms) are
rules of ``mutad.linalg``'s families, beside SciPy's variants of them (see that package).

Complex matrices (facet ``complex``): the products are complex-differentiable, so their real
rules hold (``holomorphic``); vdot, vecdot and vecmat conjugate their first operand, and their
rules say so (``complex_aware``).

Nested reverse mode: a pullback's inputs and cotangents may be arrays an outer differentiation
traces (the inner one's values are), so rules compute with NumPy calls that dispatch: never
``np.asarray``, and a buffer a cotangent is written into is created ``like=`` it.

Forward mode: products are linear in each operand, so ``defmultilinear`` covers them.
"""

import functools
import math
import string

import numpy as np

from ..core.errors import UnsupportedOperationError
from ..core.debug import caller, warn_at
from ..core import registry
from ..core.registry import (complex_aware, defbatched, defjvp, deflinear, defrule,
                             holomorphic, vanishes)
from ..core.tape import source_line
from ..core.views import memory
from ..engines.products import product_times, times
from ._helpers import transpose, unbroadcast

# A term of two operands is a sum of products of a tangent's elements and the other operand's,
# each a ``times``: a zero tangent beside a NaN or an infinity contributes zero
defmultilinear = functools.partial(registry.defmultilinear, product=product_times)


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
    subscripts = ",".join([output, *others]) + "->" + target
    # three operands or more: the order NumPy's greedy search picks, searched once per
    # subscripts and shapes (the search is most of the pullback's time on small arrays)
    order = (_greedy_order(subscripts, (np.shape(dy), *map(np.shape, other_operands)))
             if len(others) > 1 else False)
    # a zero cotangent beside a NaN contributes zero
    g = product_times(functools.partial(np.einsum, subscripts, optimize=order),
                      dy, *other_operands)
    g = np.broadcast_to(np.reshape(g, [sizes[c] if c in target else 1 for c in unique]),
                        [sizes[c] for c in unique])
    if len(unique) < len(term):
        # like=g: a cotangent traced by an outer differentiation stays traced in its diagonal
        diagonal = np.zeros([sizes[c] for c in term], g.dtype, like=g)
        grids = dict(zip(unique, np.ogrid[tuple(slice(sizes[c]) for c in unique)], strict=True))
        diagonal[tuple(grids[c] for c in term)] = g
        g = diagonal
    return g


@functools.lru_cache(maxsize=1024)
def _greedy_order(subscripts, shapes):
    """The contraction order ``np.einsum(subscripts, ..., optimize=True)`` takes for operands
    of ``shapes``: it depends on nothing else, so the same order gives the same numbers."""
    return np.einsum_path(subscripts, *(np.broadcast_to(0.0, shape) for shape in shapes),
                          optimize="greedy")[0]


def _inner_product_back(a, b):
    """The pullback of the inner product of two vectors of one shape: each cotangent is dy
    times the other, as the einsum of ``einsum_cotangent`` would give it. An operand NumPy
    took as a list or tuple (``np.inner(v, [1.0, 2.0])``: one holding traced numbers arrives
    an array) is multiplied as its array."""
    a, b = (np.asarray(x) if type(x) in (list, tuple) else x for x in (a, b))
    return lambda dy: (times(dy, b), times(dy, a))


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
    unbatched = _UNBATCHED.get((np.ndim(a), np.ndim(b)))
    if unbatched is not None:  # vectors and matrices: the product matmul takes, its cotangents
        # (an operand NumPy took as a list or tuple is multiplied as its array)
        a, b = (np.asarray(x) if type(x) in (list, tuple) else x for x in (a, b))
        return y, lambda dy: unbatched(dy, a, b)
    # dot(a, b)[i..., j..., k] = Σ_m a[i..., m] b[j..., m, k]: m is b's second-to-last axis
    # (its only axis when b is a vector)
    terms, output = _product_subscripts(a, b, b_axis=max(np.ndim(b) - 2, 0))
    return y, contraction_back(terms, output, (a, b))


def _dot_for(dims, kwargs):
    """``(forward, back)`` of np.dot as plain functions (as :func:`_matmul_for`): ``np.dot``
    itself, and matmul's back, what the rule's back computes, for vectors and matrices."""
    unbatched = _UNBATCHED.get(dims)
    return None if kwargs or unbatched is None else (np.dot, unbatched)


dot.specialized = _dot_for


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
        return _outer_back(dy, a, b)

    return y, back


def _outer_back(dy, a, b):
    da = np.reshape(product_times(np.matmul, dy, np.ravel(b)), np.shape(a))
    db = np.reshape(product_times(np.matmul, np.ravel(a), dy), np.shape(b))
    return da, db


setattr(_outer_back, "parts", (
    lambda dy, a, b: np.reshape(product_times(np.matmul, dy, np.ravel(b)), np.shape(a)),
    lambda dy, a, b: np.reshape(product_times(np.matmul, np.ravel(a), dy), np.shape(b))))


def _outer_for(dims, kwargs):
    """``(forward, back)`` of np.outer as plain functions, for a compiled replay (as
    :func:`_matmul_for`): ``np.outer`` and ``_outer_back(dy, a, b)``, what ``back`` returns."""
    return None if kwargs else (np.outer, _outer_back)


outer.specialized = _outer_for


defmultilinear(np.outer, np.linalg.outer, operands=(0, 1))


@defrule(np.vdot, leading=2)
def vdot(a, b):
    y = np.vdot(a, b)

    def back(dy):  # a is conjugated: its cotangent is conj(dy) b (and holds for complex ones)
        return (np.reshape(times(np.conjugate(dy), np.ravel(b)), np.shape(a)),
                np.reshape(times(dy, np.ravel(a)), np.shape(b)))

    return y, back


defmultilinear(np.vdot, operands=(0, 1))


# Without a batch, matmul's cotangents are the products directly (a loop of them is a triangular
# solve, factorization or multiplication, where Python's overhead is the cost), by the
# dimensions of the operands:
# (each product a ``times``: a zero cotangent of an output contributes zero beside a NaN or an
# infinity of an operand, as the elementwise rules' do)
def _dot_back(dy, a, b):  # a dot product: one product per element
    if type(dy) is np.ndarray and dy.dtype is _FLOAT64 and math.isfinite(dy) and dy:
        # (a finite, non-zero float64 cotangent: no term is 0 * inf or 0 * NaN, so each
        # ``product_times`` is NumPy's product, as the compiled replay's lines below say)
        return np.multiply(dy, b), np.multiply(a, dy)
    return product_times(np.multiply, dy, b), product_times(np.multiply, a, dy)


_FLOAT64 = np.dtype(np.float64)


def _vector_matrix_back(dy, a, b):
    return product_times(np.matmul, b, dy), product_times(np.multiply, a[:, None], dy)


def _matrix_vector_back(dy, a, b):
    return product_times(np.multiply, dy[:, None], b), product_times(np.matmul, dy, a)


# The same products as Python expressions of ``dy``, the operands ``{0}``, ``{1}``, and
# ``{product_times}``, ``{multiply}``, ``{matmul}``, ``{isfinite}`` and ``{vdot}`` (NumPy's, which
# warns of no overflow: ``products._finite``), which a compiled replay
# writes as lines of its own (in a loop of dot products, the call is a fifth). Where a scalar
# cotangent is finite and not zero, no term is 0 * inf or 0 * NaN, and where the product is
# finite no term was either: then the product is ``product_times``', which is called only
# past these checks (no pass over the product, no call: a sixth of a loop of dot products).
# Each calls it on the factors in the order the back's own call does: of two NaN factors,
# NumPy's product is the first one's NaN
_FINITE_DY = ("({dy} * {%d} if {isfinite}({dy}) and {dy} else"
              " {product_times}({multiply}, %s))")


def _finite_product(function, factors):
    """The expression of ``product_times({function}, factors)``: the product itself where the
    dot product of it with itself is finite (then no term was 0 * inf or 0 * NaN)."""
    return (f"(pm if {{isfinite}}({{vdot}}(pm := {{{function}}}({factors}), pm))"
            f" else {{product_times}}({{{function}}}, {factors}))")


setattr(_dot_back, "lines", (_FINITE_DY % (1, "{dy}, {1}"), _FINITE_DY % (0, "{0}, {dy}")))
setattr(_vector_matrix_back, "lines", (_finite_product("matmul", "{1}, {dy}"),
                                       _finite_product("multiply", "{0}[:, None], {dy}")))
setattr(_matrix_vector_back, "lines", (_finite_product("multiply", "{dy}[:, None], {1}"),
                                       _finite_product("matmul", "{dy}, {0}")))


def _matrix_matrix_back(dy, a, b):
    return (product_times(np.matmul, dy, transpose(b)),
            product_times(np.matmul, transpose(a), dy))


# (of a matrix, ``transpose``'s view is its ``.T``)
setattr(_matrix_matrix_back, "lines", (_finite_product("matmul", "{dy}, {1}.T"),
                                       _finite_product("matmul", "{0}.T, {dy}")))


# Each back's cotangents one at a time, ``(dy, a, b) -> cotangent``, the same expressions: the
# record of a product with a constant operand computes only the other's (``operations``:
# ``_traced_back``)
setattr(_dot_back, "parts", (lambda dy, a, b: product_times(np.multiply, dy, b),
                            lambda dy, a, b: product_times(np.multiply, a, dy)))
setattr(_vector_matrix_back, "parts", (
    lambda dy, a, b: product_times(np.matmul, b, dy),
    lambda dy, a, b: product_times(np.multiply, a[:, None], dy)))
setattr(_matrix_vector_back, "parts", (
    lambda dy, a, b: product_times(np.multiply, dy[:, None], b),
    lambda dy, a, b: product_times(np.matmul, dy, a)))
setattr(_matrix_matrix_back, "parts", (
    lambda dy, a, b: product_times(np.matmul, dy, transpose(b)),
    lambda dy, a, b: product_times(np.matmul, transpose(a), dy)))

_UNBATCHED = {
    (1, 1): _dot_back,
    (1, 2): _vector_matrix_back,  # a vector times a matrix
    (2, 1): _matrix_vector_back,
    (2, 2): _matrix_matrix_back,
}


def with_settings(func, cores):
    """Decorate the rule ``rule(a, b)`` of ``func``, a generalized ufunc whose operands and
    result have ``cores(a, b)`` core dimensions, to take NumPy's settings: the value is
    NumPy's with them (``dtype=``, ``casting=``, ``order=``), and ``axes=``, which places the
    core dimensions, has the cotangents taken with them last and put back there."""

    def decorate(rule):
        @functools.wraps(rule)
        def with_them(a, b, **kwargs):
            if not kwargs:
                return rule(a, b)
            axes = kwargs.get("axes")
            if axes is None:
                return func(a, b, **kwargs), rule(a, b)[1]
            # (a single core dimension's place may be an integer; a result without core
            # dimensions may have no entry)
            places = [tuple(place) if isinstance(place, (tuple, list)) else (place,)
                      for place in (*axes, ())[:3]]
            lasts = [tuple(range(-count, 0)) for count in cores(a, b)]
            _, back = rule(np.moveaxis(a, places[0], lasts[0]),
                           np.moveaxis(b, places[1], lasts[1]))

            def moved_back(dy):
                da, db = back(np.moveaxis(dy, places[2], lasts[2]))
                return np.moveaxis(da, lasts[0], places[0]), np.moveaxis(db, lasts[1], places[1])

            return func(a, b, **kwargs), moved_back

        return with_them

    return decorate


def _matmul_cores(a, b):
    """The core dimensions of matmul's operands and result: a 1-d operand has one."""
    first, second = min(np.ndim(a), 2), min(np.ndim(b), 2)
    return first, second, first + second - 2


@defrule(np.matmul, np.linalg.matmul, leading=2)
def matmul(a, b, **kwargs):
    if "axes" in kwargs or "axis" in kwargs:
        return with_settings(np.matmul, _matmul_cores)(matmul)(a, b, **kwargs)
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
        return unbroadcast(product_times(np.matmul, left, right), shape)
    left = np.broadcast_to(left, batch + np.shape(left)[-2:])
    right = np.broadcast_to(right, batch + np.shape(right)[-2:])
    inner = math.prod(batch) * np.shape(right)[-2]  # explicit: -1 is no size for empty arrays
    rows = np.reshape(np.moveaxis(left, -2, 0), (np.shape(left)[-2], inner))
    return product_times(np.matmul, rows, np.reshape(right, (inner, np.shape(right)[-1])))


defmultilinear(np.matmul, np.linalg.matmul, operands=(0, 1))


@defrule(np.vecdot, np.linalg.vecdot, leading=2)
def vecdot(a, b, **kwargs):
    """``axis`` (or ``axes``: one for each operand and, with ``keepdims``, the result) places
    the summed axis; the cotangents are taken with it last, and put back there."""
    y = np.vecdot(a, b, **kwargs)
    axes = kwargs.get("axes")
    if axes is None:
        at_a = at_b = at_y = kwargs.get("axis", -1)
    else:
        (at_a,), (at_b,) = axes[0], axes[1]
        at_y = axes[2][0] if len(axes) > 2 and len(axes[2]) else -1
    kept = kwargs.get("keepdims", False)

    def back(dy):  # a is conjugated, as in vdot; a zero dy contributes zero (``times``)
        dy = np.moveaxis(dy, at_y, -1) if kept else np.expand_dims(dy, -1)
        last_a, last_b = np.moveaxis(a, at_a, -1), np.moveaxis(b, at_b, -1)
        da = unbroadcast(times(np.conjugate(dy), last_b), np.shape(last_a))
        db = unbroadcast(times(dy, last_a), np.shape(last_b))
        return np.moveaxis(da, -1, at_a), np.moveaxis(db, -1, at_b)

    return y, back


defmultilinear(np.vecdot, np.linalg.vecdot, operands=(0, 1))


def product_as_einsum(func, subscripts):
    """Register ``func(a, b)``, which is the einsum ``subscripts`` of its two operands."""

    inputs, output = subscripts.replace("...", "").split("->")
    counts = (*(len(letters) for letters in inputs.split(",")), len(output))

    @with_settings(func, lambda a, b: counts)
    def rule(a, b):
        terms, output = _explicit_einsum(subscripts, [np.shape(a), np.shape(b)])
        return func(a, b), contraction_back(terms, output, (a, b))

    rule.__name__ = func.__name__
    defrule(func, leading=2)(rule)
    defmultilinear(func, operands=(0, 1))


if hasattr(np, "matvec"):  # NumPy 2.2 and later
    product_as_einsum(np.matvec, "...ij,...j->...i")

    @defrule(np.vecmat, leading=2)
    @with_settings(np.vecmat, lambda x, a: (1, 2, 1))
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


def _to3(v):
    """A 2-vector is a 3-vector with z = 0 (NumPy's own convention for cross)."""
    if v.shape[-1] == 3:
        return v
    return np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype, like=memory(v))], axis=-1)


def _cross_times(u, v):
    """``np.cross(u, v)`` of 3-vectors along the last axis, each product a ``times``: a zero
    component of a cotangent contributes zero beside a NaN or an infinity of the other
    operand (the gradient of a component that reads none was NaN)."""
    return np.stack([times(u[..., i], v[..., j]) - times(u[..., j], v[..., i])
                     for i, j in ((1, 2), (2, 0), (0, 1))], axis=-1)


@defrule(np.cross, np.linalg.cross, leading=2)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    y = _cross(a, b, axisa, axisb, axisc)
    a_last = np.moveaxis(a, axisa, -1)
    b_last = np.moveaxis(b, axisb, -1)

    def back(dy):
        if a_last.shape[-1] == 2 and b_last.shape[-1] == 2:
            dy3 = np.zeros(np.shape(dy) + (3,), np.result_type(dy), like=dy)
            dy3[..., 2] = dy  # both 2-vectors: y is the z component alone
        else:
            dy3 = np.moveaxis(dy, axisc, -1)
        # <dy, a × b> = <a, b × dy> = <b, dy × a>
        da = _cross_times(_to3(b_last), dy3)[..., :a_last.shape[-1]]
        db = _cross_times(dy3, _to3(a_last))[..., :b_last.shape[-1]]
        da = np.moveaxis(unbroadcast(da, a_last.shape), -1, axisa)
        db = np.moveaxis(unbroadcast(db, b_last.shape), -1, axisb)
        return da, db

    return y, back


@defjvp(np.cross, np.linalg.cross, leading=2)
def cross_jvp(tangents, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The product rule, each term a cross product of ``_cross_times``: a zero component of a
    tangent contributes zero beside an infinite component of the other operand, as in the
    pullback (NumPy's ``0 * inf`` would make the tangent of every component NaN)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    da, db = tangents[:2]
    y = _cross(a, b, axisa, axisb, axisc)

    def term(u, v):
        u, v = np.moveaxis(u, axisa, -1), np.moveaxis(v, axisb, -1)
        product = _cross_times(_to3(u), _to3(v))
        if u.shape[-1] == 2 and v.shape[-1] == 2:
            return product[..., 2]  # the z component alone, as NumPy gives it
        return np.moveaxis(product, -1, axisc)

    terms = ([] if da is None else [term(da, b)]) + ([] if db is None else [term(a, db)])
    return y, terms[0] if len(terms) == 1 else terms[0] + terms[1]


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
    shapes = np.shape(a), np.shape(v)
    a, v = _one_dimensional(a), _one_dimensional(v)
    n, m = np.shape(a)[0], np.shape(v)[0]

    def back(dy):
        start, length = _convolution_window(n, m, mode)
        full = np.pad(dy, (start, n + m - 1 - start - length))
        # y[k] = Σ_i a[i] v[k - i]: da[i] = Σ_j dy[i + j] v[j], dv[j] = Σ_i dy[i + j] a[i].
        # (each product a ``times``: a zero of the cotangent beside an infinite operand
        # contributes zero, not NumPy's NaN)
        return (np.reshape(product_times(_correlate_valid, full, v), shapes[0]),
                np.reshape(product_times(_correlate_valid, full, a), shapes[1]))

    return y, back


def _one_dimensional(x):
    """A 0-d operand of ``np.convolve`` as the 1-element vector NumPy takes it for."""
    return np.reshape(x, (1,)) if np.ndim(x) == 0 else x


def _correlate_valid(x, w):
    """``out[i] = Σ_j x[i + j] w[j]`` for every ``i`` where ``w`` fits inside ``x``, through
    ``np.convolve`` so that it is differentiated again under nesting."""
    return np.convolve(x, w[::-1], "valid")


defmultilinear(np.convolve)


# Complex values (facet complex): the products are complex-differentiable, so their real rules
# hold; vdot, vecdot and vecmat conjugate their first operand, and their rules above say so.
holomorphic(np.einsum, np.dot, np.inner, np.tensordot, np.linalg.tensordot, np.kron, np.outer,
            np.linalg.outer, np.matmul, np.linalg.matmul, np.matvec, np.trace,
            np.linalg.trace, np.cross, np.linalg.cross, np.convolve)
complex_aware(np.vdot, np.vecdot, np.linalg.vecdot, np.vecmat)


# ----------------------------------------------------------------------------------------------
# A batch of directions (facet batched) for products of vectors and matrices: the product rule
# with each operand's batch of tangents as a stack of operands (matmul broadcasts over the
# batch axis). The products are the same; BLAS may sum them in another order for a stack than
# for one vector or matrix (a matrix product where one direction has a matrix-vector
# product): the same numbers to rounding.


def _product_batched(func):
    def rule(tangents, a, b, **kwargs):
        if kwargs or np.ndim(a) not in (1, 2) or np.ndim(b) not in (1, 2):
            return NotImplemented
        y = func(a, b)
        ta, tb = (None if t is None or vanishes(t) else t for t in tangents[:2])
        dy = None
        if ta is not None:  # (B, [n,] k) @ b: the batch axis a stack's
            dy = product_times(np.matmul, ta, b)
        if tb is not None:
            if np.ndim(b) == 1:  # a @ tb_b for each b: rows of tb @ a.T
                term = product_times(np.matmul, tb, np.swapaxes(a, -1, -2)) if np.ndim(a) == 2 \
                    else product_times(np.matmul, tb, a)
            else:  # (n, k) @ (B, k, m), or (k,) @ (B, k, m)
                term = product_times(np.matmul, a, tb)
            dy = term if dy is None else dy + term
        return y, dy

    rule.__name__ = rule.__qualname__ = f"{getattr(func, '__name__', 'product')}_batched"
    return rule


defbatched(np.matmul)(_product_batched(np.matmul))
defbatched(np.linalg.matmul)(_product_batched(np.linalg.matmul))
defbatched(np.dot)(_product_batched(np.dot))
