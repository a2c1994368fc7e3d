"""Forward mode's linear algebra: the tangent rules of products, np.linalg, mutad.linalg's
in-place routines and mutad.scipy.linalg, against finite differences and the reverse rules."""

from typing import Callable, NamedTuple

import numpy as np
import pytest

import mutad
from mutad.registry import FUNCTIONS, JVPS

# np.cross of 2-vectors is deprecated in NumPy 2 but still supported, so still differentiated.
pytestmark = pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")


# ----------------------------------------------------------------------------------------------
# Finite differences along a tangent


def _combine(points, weights, scale):
    """Σ w_k points[k] / scale, output by output; None for outputs that are not float."""
    first = points[0]
    if isinstance(first, tuple):
        return tuple(_combine(p, weights, scale) for p in zip(*points, strict=True))
    if np.asarray(first).dtype.kind != "f":
        return None
    return sum(w * np.asarray(p) for w, p in zip(weights, points, strict=True)) / scale


def directional(f, args, tangents, h=1e-3):
    """The derivative of ``f`` at ``args`` along ``tangents`` (None: held fixed), by the
    fourth-order central difference."""

    def at(t):
        return f(*(a if d is None else a + t * d for a, d in zip(args, tangents, strict=True)))

    return _combine([at(2 * h), at(h), at(-h), at(-2 * h)], (-1, 8, -8, 1), 12 * h)


def assert_same(y, expected):
    """``y`` is what the function returns: same type, same values."""
    assert type(y) is type(expected)
    if isinstance(y, tuple):
        for a, b in zip(y, expected, strict=True):
            assert_same(a, b)
    else:
        np.testing.assert_array_equal(y, expected)


def assert_tangent(dy, expected, rtol=1e-6):
    if isinstance(expected, tuple):
        assert isinstance(dy, tuple) and len(dy) == len(expected)
        for a, b in zip(dy, expected, strict=True):
            assert_tangent(a, b, rtol)
    elif dy is None:  # an output without a tangent: an integer, or a piecewise constant
        assert expected is None or not np.any(expected)
    else:
        assert np.shape(dy) == np.shape(expected)
        scale = np.max(np.abs(expected), initial=1.0)
        np.testing.assert_allclose(dy, expected, rtol=rtol, atol=rtol * scale)


def sample_tangents(rng, args, symmetric=()):
    """A random tangent for each float array argument (symmetric at the positions given)."""
    tangents = []
    for i, a in enumerate(args):
        if not (isinstance(a, np.ndarray) and a.dtype.kind == "f"):
            tangents.append(None)
            continue
        t = rng.standard_normal(a.shape)
        tangents.append(0.5 * (t + np.swapaxes(t, -1, -2)) if i in symmetric else t)
    return tangents


# ----------------------------------------------------------------------------------------------
# Samplers


def normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def well_conditioned(*shape):
    n = shape[-1]
    return lambda rng: rng.standard_normal(shape) + 2 * n * np.eye(n)


def spd(*shape):
    def sample(rng):
        m = rng.standard_normal(shape)
        return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])

    return sample


def fixed(value):
    return lambda rng: value


def align_columns(v, reference):
    """``v`` with each column's sign chosen to point as ``reference``'s does: LAPACK may flip
    an eigenvector or singular pair between nearby matrices."""
    return v * np.sign(np.sum(v * reference, axis=-2, keepdims=True))


def align_eigh(result, reference):
    return type(result)(result[0], align_columns(result[1], reference[1]))


def align_svd(result, reference):
    signs = np.sign(np.sum(result[0] * reference[0], axis=-2, keepdims=True))
    return type(result)(result[0] * signs, result[1], result[2] * np.swapaxes(signs, -1, -2))


class Case(NamedTuple):
    id: str
    function: Callable
    samplers: object  # one sampler per argument, or one of the whole argument tuple
    kwargs: dict = {}
    symmetric: tuple = ()  # positions of symmetric matrices, with symmetric tangents
    align: Callable = None  # align(output, reference) fixes sign choices for differences
    rule: Callable = None  # the forward rule, if not JVPS[function]

    def sample(self, rng):
        if callable(self.samplers):
            args = self.samplers(rng)
        else:
            args = tuple(s(rng) for s in self.samplers)
        return args, sample_tangents(rng, args, self.symmetric)


def check_case(case, rng):
    args, tangents = case.sample(rng)
    rule = case.rule or JVPS[case.function]
    y, dy = rule(tangents, *args, **case.kwargs)
    reference = case.function(*args, **case.kwargs)
    assert_same(y, reference)

    def f(*xs):
        out = case.function(*xs, **case.kwargs)
        return out if case.align is None else case.align(out, reference)

    assert_tangent(dy, directional(f, args, tangents))


# fmt: off
PRODUCTS = [
    Case("dot",                np.dot,             (normal(2, 3), normal(3, 4))),
    Case("dot-nd",             np.dot,             (normal(2, 2, 3), normal(4, 3, 2))),
    Case("dot-scalar",         np.dot,             (normal(), normal(3))),
    Case("inner",              np.inner,           (normal(2, 3), normal(4, 3))),
    Case("tensordot",          np.tensordot,       (normal(2, 3, 4), normal(3, 4, 2))),
    Case("linalg.tensordot",   np.linalg.tensordot, (normal(3, 2), normal(2, 5)), {"axes": 1}),
    Case("kron",               np.kron,            (normal(2, 3), normal(3, 2))),
    Case("outer",              np.outer,           (normal(2, 2), normal(3))),
    Case("linalg.outer",       np.linalg.outer,    (normal(2), normal(3))),
    Case("vdot",               np.vdot,            (normal(2, 2), normal(4))),
    Case("matmul",             np.matmul,          (normal(2, 1, 2, 3), normal(4, 3, 2))),
    Case("matmul-1d",          np.matmul,          (normal(3), normal(2, 3, 4))),
    Case("linalg.matmul",      np.linalg.matmul,   (normal(2, 3), normal(3, 4))),
    Case("vecdot",             np.vecdot,          (normal(2, 3), normal(3))),
    Case("linalg.vecdot",      np.linalg.vecdot,   (normal(3, 2), normal(3, 1)), {"axis": 0}),
    Case("matvec",             np.matvec,          (normal(2, 3, 4), normal(4))),
    Case("vecmat",             np.vecmat,          (normal(3), normal(2, 3, 4))),
    Case("trace",              np.trace,           (normal(3, 2, 4), fixed(1), fixed(0), fixed(2))),
    Case("linalg.trace",       np.linalg.trace,    (normal(2, 3, 3),), {"offset": -1}),
    Case("cross",              np.cross,           (normal(4, 3), normal(3))),
    Case("cross-2d",           np.cross,           (normal(4, 2), normal(2))),
    Case("linalg.cross",       np.linalg.cross,    (normal(4, 3), normal(4, 3))),
    Case("einsum",             np.einsum,          (fixed("ij,jk,k->i"), normal(2, 3), normal(3, 4), normal(4))),
    Case("einsum-ellipsis",    np.einsum,          (fixed("...ii,...i"), normal(2, 3, 3), normal(3))),
    Case("einsum-sublists",    np.einsum,          (normal(2, 3), fixed([0, 1]), normal(3), fixed([1]))),
]

MATRIX_FUNCTIONS = [
    Case("inv",                np.linalg.inv,      (well_conditioned(2, 3, 3),)),
    Case("solve-vector",       np.linalg.solve,    (well_conditioned(3, 3), normal(3))),
    Case("solve-batched-vector", np.linalg.solve,  (well_conditioned(2, 3, 3), normal(3))),
    Case("solve-broadcast",    np.linalg.solve,    (well_conditioned(3, 3), normal(2, 3, 2))),
    Case("pinv-tall",          np.linalg.pinv,     (normal(4, 3),)),
    Case("pinv-wide-batched",  np.linalg.pinv,     (normal(2, 2, 4),)),
    Case("matrix_power",       np.linalg.matrix_power, (normal(2, 3, 3), fixed(3))),
    Case("matrix_power-zero",  np.linalg.matrix_power, (normal(3, 3), fixed(0))),
    Case("matrix_power-inverse", np.linalg.matrix_power, (well_conditioned(3, 3), fixed(-2))),
    Case("lstsq-vector",       np.linalg.lstsq,    (normal(5, 3), normal(5))),
    Case("lstsq-matrix",       np.linalg.lstsq,    (normal(5, 3), normal(5, 2))),
    Case("lstsq-wide",         np.linalg.lstsq,    (normal(2, 4), normal(2))),
    Case("det",                np.linalg.det,      (normal(2, 3, 3),)),
    Case("slogdet",            np.linalg.slogdet,  (normal(2, 3, 3),)),
    Case("cholesky",           np.linalg.cholesky, (spd(2, 3, 3),), symmetric=(0,)),
    Case("cholesky-upper",     np.linalg.cholesky, (spd(4, 4),), {"upper": True}, symmetric=(0,)),
    Case("eigh",               np.linalg.eigh,     (spd(2, 4, 4),), symmetric=(0,), align=align_eigh),
    Case("eigh-upper",         np.linalg.eigh,     (spd(4, 4), fixed("U")), symmetric=(0,), align=align_eigh),
    Case("eigvalsh",           np.linalg.eigvalsh, (spd(2, 4, 4),), symmetric=(0,)),
    Case("svd-square",         np.linalg.svd,      (normal(2, 3, 3),), align=align_svd),
    Case("svd-tall",           np.linalg.svd,      (normal(5, 3),), {"full_matrices": False}, align=align_svd),
    Case("svd-wide",           np.linalg.svd,      (normal(2, 3, 5),), {"full_matrices": False}, align=align_svd),
    Case("svd-values",         np.linalg.svd,      (normal(4, 3),), {"compute_uv": False}),
    Case("svd-hermitian",      np.linalg.svd,      (spd(4, 4),), {"hermitian": True}, symmetric=(0,),
         align=align_svd),
]

NORMS = [
    Case("norm",               np.linalg.norm,     (normal(2, 3),)),
    Case("norm-axis",          np.linalg.norm,     (normal(2, 3), fixed(3), fixed(1), fixed(True))),
    Case("norm-inf",           np.linalg.norm,     (normal(4),), {"ord": np.inf}),
    Case("norm-fro",           np.linalg.norm,     (normal(2, 3, 4),), {"ord": "fro", "axis": (0, 2)}),
    Case("norm-nuc",           np.linalg.norm,     (normal(3, 4),), {"ord": "nuc"}),
    Case("norm-2",             np.linalg.norm,     (normal(3, 4),), {"ord": 2}),
    Case("norm-minus-2",       np.linalg.norm,     (normal(4, 3),), {"ord": -2}),
    Case("norm-1",             np.linalg.norm,     (normal(3, 4),), {"ord": 1}),
    Case("norm-inf-matrix",    np.linalg.norm,     (normal(3, 4),), {"ord": np.inf, "keepdims": True}),
    Case("vector_norm",        np.linalg.vector_norm, (normal(2, 3),), {"axis": 0, "ord": 3}),
    Case("matrix_norm",        np.linalg.matrix_norm, (normal(2, 3, 4),), {"ord": "nuc"}),
    Case("matrix_norm-fro",    np.linalg.matrix_norm, (normal(3, 4),), {"keepdims": True}),
]
# fmt: on


@pytest.mark.parametrize("case", PRODUCTS + MATRIX_FUNCTIONS + NORMS, ids=lambda c: c.id)
def test_forward_rule_matches_finite_differences(case, rng):
    check_case(case, rng)


LINALG_INDEXING = {np.take, np.take_along_axis, np.compress, np.extract, np.sort, np.partition,
                   np.choose, np.select, np.diff, np.interp}


def test_every_linear_algebra_rule_has_a_forward_rule():
    mine = {f for f, rule in FUNCTIONS.items() if rule.__module__ == "mutad.rules.linalg"}
    assert not mine - LINALG_INDEXING - set(JVPS)


def test_forward_rules_without_a_tangent_on_one_operand(rng):
    a, b = well_conditioned(3, 3)(rng), normal(3, 2)(rng)
    da, db = rng.standard_normal((3, 3)), rng.standard_normal((3, 2))
    for tangents in ([da, None], [None, db]):
        _, dx = JVPS[np.linalg.solve](tangents, a, b)
        expected = directional(np.linalg.solve, (a, b), tangents)
        assert_tangent(dx, expected)
    _, dy = JVPS[np.matmul]([None, db], a, b)
    np.testing.assert_allclose(dy, a @ db)


def test_det_of_a_singular_matrix_uses_the_cofactor(rng):
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    da = rng.standard_normal((3, 3))
    _, dy = JVPS[np.linalg.det]([da], a)
    np.testing.assert_allclose(dy, directional(np.linalg.det, (a,), (da,)), atol=1e-8)


# ----------------------------------------------------------------------------------------------
# mutad.scipy.linalg


def with_factor(wrapper, **kwargs):
    """A Case function and rule for ``wrapper((c, flag), b)``, the factor ``c`` passed alone so
    that it carries the tuple's first tangent."""

    def function(c, flag, b):
        return wrapper((c, flag), b, **kwargs)

    def rule(tangents, c, flag, b):
        return wrapper.forward_rule([[tangents[0], None], tangents[2]], (c, flag), b, **kwargs)

    return function, rule


def scipy_cases():
    from mutad.scipy import linalg as sl

    def case(name, wrapper, samplers, kwargs=None, **options):
        return Case(f"scipy.{name}", wrapper, samplers, kwargs or {}, rule=wrapper.forward_rule,
                    **options)

    cases = [
        case("cholesky", sl.cholesky, (spd(4, 4),), symmetric=(0,)),
        case("cholesky-lower", sl.cholesky, (spd(4, 4), fixed(True)), symmetric=(0,)),
        case("cho_factor", sl.cho_factor, (spd(4, 4),), symmetric=(0,)),
        case("cho_factor-lower", sl.cho_factor, (spd(4, 4), fixed(True)), symmetric=(0,)),
        case("solve_triangular", sl.solve_triangular, (well_conditioned(4, 4), normal(4))),
        case("solve_triangular-lower-trans-unit", sl.solve_triangular,
             (well_conditioned(4, 4), normal(4, 2)), {"trans": 1, "lower": True, "unit_diagonal": True}),
        case("lu_factor", sl.lu_factor, (well_conditioned(4, 4),)),
        case("solve", sl.solve, (well_conditioned(4, 4), normal(4, 2))),
        case("solve-pos-transposed", sl.solve, (spd(4, 4), normal(4)),
             {"assume_a": "pos", "transposed": True}, symmetric=(0,)),
        case("solve-upper-triangular", sl.solve, (well_conditioned(4, 4), normal(4)),
             {"assume_a": "upper triangular"}),
        case("inv", sl.inv, (well_conditioned(4, 4),)),
        case("inv-sym", sl.inv, (spd(4, 4),), {"assume_a": "sym"}, symmetric=(0,)),
        case("inv-diagonal", sl.inv, (well_conditioned(4, 4),), {"assume_a": "diagonal"}),
        case("expm", sl.expm, (lambda rng: 0.5 * rng.standard_normal((4, 4)),)),
        case("expm-batched", sl.expm, (lambda rng: 0.5 * rng.standard_normal((2, 3, 3)),)),
    ]
    for lower in (False, True):
        function, rule = with_factor(sl.cho_solve)
        cases.append(Case(f"scipy.cho_solve-lower={lower}", function, lambda rng, lower=lower: (
            *sl.cho_factor(spd(4, 4)(rng), lower), rng.standard_normal((4, 2))), rule=rule))
    for trans in (0, 1):
        function, rule = with_factor(sl.lu_solve, trans=trans)
        # a standard normal matrix, so that LAPACK pivots
        cases.append(Case(f"scipy.lu_solve-trans={trans}", function, lambda rng: (
            *sl.lu_factor(rng.standard_normal((4, 4))), rng.standard_normal(4)), rule=rule))
    return cases


@pytest.mark.parametrize("case", scipy_cases(), ids=lambda c: c.id)
def test_scipy_forward_rule_matches_finite_differences(case, rng):
    check_case(case, rng)


# ----------------------------------------------------------------------------------------------
# Forward and reverse agree: <J v, w> = <v, Jᵀ w>


def _tangent_leaves(dy, like):
    if isinstance(like, tuple):
        return [leaf for d, y in zip(dy, like, strict=True) for leaf in _tangent_leaves(d, y)]
    return [] if dy is None else [(dy, like)]


TRANSPOSED = {"tensordot", "einsum", "inv", "solve-broadcast", "pinv-tall", "matrix_power-inverse",
              "lstsq-matrix", "slogdet", "cholesky", "eigh", "svd-tall", "norm-2", "matrix_norm",
              "scipy.cho_factor-lower", "scipy.cho_solve-lower=True", "scipy.lu_factor",
              "scipy.lu_solve-trans=1", "scipy.solve-pos-transposed", "scipy.inv-diagonal",
              "scipy.expm"}


def transposed_cases():
    cases = [c for c in PRODUCTS + MATRIX_FUNCTIONS + NORMS + scipy_cases() if c.id in TRANSPOSED]
    assert len(cases) == len(TRANSPOSED)
    return cases


def weighted(case, args, tangents, rng):
    """The rule's ``(y, dy)``, and ``<w, f>`` as a function of the arguments with tangents, for
    random weights ``w`` on the outputs that have tangents (sign choices aligned to ``y``)."""
    y, dy = (case.rule or JVPS[case.function])(tangents, *args, **case.kwargs)
    weights = [rng.standard_normal(np.shape(d)) for d, _ in _tangent_leaves(dy, y)]
    positions = [i for i, t in enumerate(tangents) if t is not None]

    def objective(*xs):
        full = list(args)
        for i, x in zip(positions, xs, strict=True):
            full[i] = x
        out = case.function(*full, **case.kwargs)
        out = out if case.align is None else case.align(out, y)
        leaves = _tangent_leaves(dy, out)
        return sum(np.sum(w * o) for w, (_, o) in zip(weights, leaves, strict=True))

    return y, dy, weights, positions, objective


@pytest.mark.parametrize("case", transposed_cases(), ids=lambda c: c.id)
def test_forward_and_reverse_rules_are_transposes(case, rng):
    args, tangents = case.sample(rng)
    y, dy, weights, positions, objective = weighted(case, args, tangents, rng)
    grads = mutad.gradient(objective, *(args[i] for i in positions))
    forward = sum(np.sum(w * d) for w, (d, _) in zip(weights, _tangent_leaves(dy, y), strict=True))
    reverse = sum(np.sum(g * tangents[i]) for g, i in zip(grads, positions, strict=True))
    np.testing.assert_allclose(forward, reverse, rtol=1e-9)


# reverse mode takes einsum's subscripts-string form only
@pytest.mark.parametrize("case", [c for c in PRODUCTS + MATRIX_FUNCTIONS + NORMS + scipy_cases()
                                  if c.id != "einsum-sublists"], ids=lambda c: c.id)
def test_reverse_over_forward(case, rng):
    """hvp differentiates each forward rule again by reverse mode: its computations dispatch."""
    args, tangents = case.sample(rng)
    _, _, _, positions, objective = weighted(case, args, tangents, rng)
    xs, vs = tuple(args[i] for i in positions), tuple(tangents[i] for i in positions)
    hv = mutad.hvp(objective, xs, vs)
    expected = directional(lambda *xs: mutad.gradient(objective, *xs), xs, vs)
    assert_tangent((hv,) if len(xs) == 1 else hv, expected, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# mutad.linalg: each in-place routine updates its argument's tangent in place beside the primal


def _like(x, original):
    """``x`` laid out as ``original`` (the in-place routines work on the memory as it is)."""
    if not isinstance(original, np.ndarray):
        return x
    out = np.empty_like(original)
    out[...] = x
    return out


def check_inplace(routine, args, tangents, written):
    """``routine.forward_rule`` overwrites argument ``written`` as ``routine`` does and its
    tangent, in place, with the finite differences of the routine along ``tangents``."""
    expected = [_like(a, a) for a in args]
    routine(*expected)

    def f(*xs):
        xs = [_like(x, a) for x, a in zip(xs, args, strict=True)]
        routine(*xs)
        return xs[written]

    expected_tangent = directional(f, args, tangents)
    result = routine.forward_rule(tangents, *args)
    assert (result[0] if isinstance(result, tuple) else result) is args[written]
    np.testing.assert_array_equal(args[written], expected[written])
    assert_tangent(tangents[written], expected_tangent)


ORDERS = ("C", "F")


@pytest.mark.parametrize("order", ORDERS)
def test_cholesky_inplace_overwrites_the_tangent_by_the_factor_tangent(rng, order):
    from mutad.linalg import _cholesky_

    A = np.array(spd(5, 5)(rng), order=order)
    dA = np.array(sample_tangents(rng, [A], symmetric=(0,))[0], order=order)
    check_inplace(_cholesky_, [A], [dA], 0)
    assert not np.any(np.triu(dA, 1))  # L's tangent is lower triangular, as L is


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("columns", [(), (3,)])
def test_cholesky_solve_inplace(rng, order, columns):
    from mutad.linalg import _cholesky_solve_, cholesky_

    L = cholesky_(np.array(spd(5, 5)(rng), order=order)).L
    b = np.array(rng.standard_normal((5, *columns)), order=order)
    dL, db = np.tril(rng.standard_normal((5, 5))), rng.standard_normal(b.shape)
    check_inplace(_cholesky_solve_, [L, b, 10.0], [dL, db, None], 1)
    # b alone carries a tangent (a constant factor)
    b = rng.standard_normal(5)
    check_inplace(_cholesky_solve_, [L, b], [None, rng.standard_normal(5)], 1)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("lower, transpose, unit",
                         [(True, False, False), (False, True, False), (True, True, True),
                          (False, False, True)])
def test_solve_triangular_inplace(rng, order, lower, transpose, unit):
    from mutad.linalg import _solve_triangular_

    T = np.array(rng.standard_normal((5, 5)) + 10 * np.eye(5), order=order)  # both triangles:
    b = np.array(rng.standard_normal((5, 2)), order=order)                    # one is never read
    dT, db = rng.standard_normal((5, 5)), rng.standard_normal((5, 2))
    check_inplace(_solve_triangular_, [T, b, lower, transpose, unit], [dT, db, None, None, None], 1)


@pytest.mark.parametrize("order", ORDERS)
def test_lu_factor_and_solve_inplace(rng, order):
    from mutad.linalg import _general_solve_, _lu_factor_, _lu_solve_, lu_factor_

    A = np.array(rng.standard_normal((5, 5)), order=order)  # LAPACK pivots
    check_inplace(_lu_factor_, [A.copy(order="K")], [rng.standard_normal((5, 5))], 0)
    F = lu_factor_(A.copy(order="K"))
    for b in (rng.standard_normal(5), np.array(rng.standard_normal((5, 2)), order=order)):
        tangents = [rng.standard_normal((5, 5)), None, rng.standard_normal(b.shape), None]
        check_inplace(_lu_solve_, [F.packed, F.pivots, b.copy(order="K"), 1.0], tangents, 2)
        tangents = [rng.standard_normal((5, 5)), rng.standard_normal(b.shape)]
        check_inplace(_general_solve_, [A, b.copy(order="K")], tangents, 1)


# ----------------------------------------------------------------------------------------------
# Through mutad.jvp and mutad.hvp


def chol_solve_twice(A, b):
    from mutad.linalg import cholesky_, ldiv_

    F = cholesky_(A)
    ldiv_(F, b)
    ldiv_(F, b)
    return b, A  # A holds L now


def lu_solve_program(A, b):
    from mutad.linalg import ldiv_, lu_factor_

    ldiv_(lu_factor_(A), b)
    return b


def triangular_then_general(T, b):
    from mutad.linalg import ldiv_, solve_triangular_

    solve_triangular_(T, b, lower=True, trans=1)
    return ldiv_(T, b) * 2.0


def numpy_program(a, b):
    return np.linalg.solve(a, b) @ np.linalg.inv(a) + np.linalg.det(a) * np.linalg.norm(b)


def symmetric_program(s):
    w = np.linalg.eigvalsh(s) * np.linalg.slogdet(s)[1] + np.linalg.svd(s, compute_uv=False)
    return w @ np.linalg.cholesky(s)


def scipy_program(a, b):
    from mutad.scipy import linalg as sl

    x = sl.cho_solve(sl.cho_factor(a), b) + sl.lu_solve(sl.lu_factor(a), b, trans=1)
    return sl.expm(0.1 * a) @ x


# fmt: off
PROGRAMS = [
    Case("cholesky_-ldiv_-C",  chol_solve_twice,   (spd(5, 5), normal(5)), symmetric=(0,)),
    Case("cholesky_-ldiv_-F",  chol_solve_twice,   (lambda rng: np.asfortranarray(spd(5, 5)(rng)),
                                                    lambda rng: np.asfortranarray(rng.standard_normal((5, 2)))),
                                                   symmetric=(0,)),
    Case("lu_factor_-ldiv_",   lu_solve_program,   (normal(5, 5), normal(5, 3))),
    Case("solve_triangular_",  triangular_then_general, (well_conditioned(4, 4), normal(4))),
    Case("numpy",              numpy_program,      (well_conditioned(4, 4), normal(4))),
    Case("numpy-symmetric",    symmetric_program,  (spd(4, 4),), symmetric=(0,)),
    Case("scipy",              scipy_program,      (spd(4, 4), normal(4)), symmetric=(0,)),
]
# fmt: on


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.id)
def test_jvp_of_programs(case, rng):
    args, tangents = case.sample(rng)
    originals = [a.copy() for a in args]

    def program(*xs):  # on copies laid out as the arguments: the routines work in place
        return case.function(*(_like(x, a) for x, a in zip(xs, args, strict=True)))

    y, dy = mutad.jvp(case.function, args, tangents)
    for a, original in zip(args, originals, strict=True):
        np.testing.assert_array_equal(a, original)  # the caller's arrays are as they were
    expected = program(*args)
    assert_tangent(y, expected, rtol=1e-12)
    assert_tangent(dy, directional(program, args, tangents))


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.id)
def test_hvp_of_programs(case, rng):
    args, tangents = case.sample(rng)

    def program(*xs):  # hvp and gradient leave the arguments as they were: no copies needed
        out = case.function(*xs)
        out = out[0] if isinstance(out, tuple) else out
        return np.vdot(out, out)

    hv = mutad.hvp(program, args, tangents)
    hv = (hv,) if len(args) == 1 else hv
    expected = directional(lambda *xs: mutad.gradient(program, *xs), args, tangents)
    assert_tangent(hv, expected, rtol=1e-6)


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: c.id)
def test_programs_pass_check_jvp(case, rng):
    args, _ = case.sample(rng)
    mutad.testing.check_jvp(case.function, *args, symmetric=case.symmetric)


def test_jvp_of_jvp_through_inplace_factorisations(rng):
    """Forward over forward: the inner rules run on the outer level's duals, so every tangent
    they compute is differentiated again (second directional derivatives)."""
    from mutad.linalg import cholesky_, ldiv_, lu_factor_
    from mutad.scipy import linalg as sl

    A, b = spd(4, 4)(rng), rng.standard_normal(4)
    v, w = sample_tangents(rng, [A, A], symmetric=(0, 1))

    def program(A):
        x = np.zeros_like(A[0])
        x[...] = b
        y = np.zeros_like(x)
        y[...] = b
        ldiv_(cholesky_(A.copy()), x)
        ldiv_(lu_factor_(A.copy()), y)
        return sl.expm(0.1 * A) @ (x + y)

    def first(A):
        return mutad.jvp(program, (A,), (v,))[1]

    _, second = mutad.jvp(first, (A,), (w,))
    assert_tangent(second, directional(first, (A,), (w,)))
