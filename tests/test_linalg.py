"""Linear algebra rules: products, einsum and np.linalg, out of place and written in place."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.linalg

import mutad
from cases import (Case, arguments, case_id, check_complex, complexified, constant, normal,
                   under_alternating_policies)
from mutad.core.registry import RULES, table
from mutad.testing import directional_fd
from test_scipy_stops import central
from rule_checks import (align_eigh, align_svd, assert_tangent, check_forward_rule, check_reverse_over_forward,
                         check_transposed_by_reverse_mode, dominant, forward_case, spd)

POLICIES = ("restore", "checkpoint")

# np.cross of 2-vectors is deprecated in NumPy 2 but still supported, so still differentiated.
pytestmark = pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")


def well_conditioned(*shape):
    """A (stack of) square matrices near n·I: far from singular."""
    n = shape[-1]
    return lambda rng: rng.standard_normal(shape) + n * np.eye(n)


def symmetric_positive_definite(n):
    def sample(rng):
        m = rng.standard_normal((n, n))
        return m @ m.T + n * np.eye(n)

    return sample


def symmetrised(function):
    """``function`` of the symmetric part of its argument: cholesky and eigh read one triangle,
    so finite differences must move along symmetric directions to see their symmetric gradient."""
    return lambda a: function(0.5 * (a + a.T))


def sign_free_eigh(a):
    """Outputs of eigh that do not depend on the arbitrary sign of each eigenvector."""
    w, v = np.linalg.eigh(a)
    return w, v * v, v[0] * v


def sign_free_svd(a):
    """Outputs of the SVD that do not depend on the arbitrary sign of each singular pair."""
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return u * u, s, vt * vt, (u * s[..., None, :]) @ vt, u[..., :, :1] * vt[..., :1, :]


def eigh_upper(a):
    w, v = np.linalg.eigh(a, "U")
    return w, v[1] * v


# fmt: off
PRODUCTS = [
    Case.named("dot-2d",              np.dot,        arguments(normal(2, 3), normal(3, 4))),
    Case.named("dot-nd",              np.dot,        arguments(normal(2, 2, 3), normal(4, 3, 2))),
    Case.named("dot-1d-2d",           np.dot,        arguments(normal(3), normal(3, 2))),
    Case.named("dot-2d-1d",           np.dot,        arguments(normal(2, 3), normal(3))),
    Case.named("dot-vectors",         np.dot,        arguments(normal(3), normal(3))),
    Case.named("dot-scalar",          np.dot,        arguments(normal(), normal(3))),
    Case.named("method-dot",          lambda a, b: a.dot(b), arguments(normal(2, 3), normal(3))),
    Case.named("matmul",              np.matmul,     arguments(normal(2, 3), normal(3, 4))),
    Case.named("matmul-batched",      np.matmul,     arguments(normal(2, 1, 2, 3), normal(4, 3, 2))),
    Case.named("matmul-1d-left",      np.matmul,     arguments(normal(3), normal(2, 3, 4))),
    Case.named("matmul-1d-right",     np.matmul,     arguments(normal(2, 2, 3), normal(3))),
    Case.named("matmul-vectors",      np.matmul,     arguments(normal(3), normal(3))),
    Case.named("matmul-operator",     lambda a, b: a @ b, arguments(normal(2, 3), normal(3, 4))),
    Case.named("matmul-reflected",    lambda a: np.ones((2, 3)) @ a, arguments(normal(3, 2))),
    Case.named("linalg.matmul",       np.linalg.matmul, arguments(normal(2, 3), normal(3, 4))),
    Case.named("vecdot",              np.vecdot,     arguments(normal(2, 3), normal(3))),
    Case.named("vecdot-axis",         lambda a, b: np.vecdot(a, b, axis=0), arguments(normal(3, 2), normal(3, 1))),
    Case.named("matvec",              np.matvec,     arguments(normal(2, 3, 4), normal(4))),
    Case.named("vecmat",              np.vecmat,     arguments(normal(3), normal(2, 3, 4))),
    Case.named("inner",               np.inner,      arguments(normal(2, 3), normal(4, 3))),
    Case.named("inner-scalar",        np.inner,      arguments(normal(2), normal())),
    Case.named("outer",               np.outer,      arguments(normal(2, 2), normal(3))),
    Case.named("vdot",                np.vdot,       arguments(normal(2, 2), normal(4))),
    Case.named("tensordot-int",       lambda a, b: np.tensordot(a, b, 1), arguments(normal(3, 2), normal(2, 5))),
    Case.named("tensordot-default",   np.tensordot,  arguments(normal(2, 3, 4), normal(3, 4, 2))),
    Case.named("tensordot-pairs",     lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 2])),
                                       arguments(normal(3, 2, 4), normal(2, 5, 3))),
    Case.named("kron",                np.kron,       arguments(normal(2, 3), normal(3, 2))),
    Case.named("kron-mixed-ndim",     np.kron,       arguments(normal(3), normal(2, 2))),
    Case.named("trace",               np.trace,      arguments(normal(3, 4))),
    Case.named("trace-offset-axes",   lambda a: np.trace(a, 1, 0, 2), arguments(normal(3, 2, 4))),
    Case.named("trace-below",         lambda a: np.trace(a, -1), arguments(normal(3, 4))),
    Case.named("method-trace",        lambda a: a.trace(), arguments(normal(3, 3))),
    Case.named("linalg.trace",        np.linalg.trace, arguments(normal(2, 3, 3))),
    Case.named("cross",               np.cross,      arguments(normal(4, 3), normal(3))),
    Case.named("cross-2d",            np.cross,      arguments(normal(4, 2), normal(2))),
    Case.named("cross-2d-3d",         np.cross,      arguments(normal(4, 2), normal(3))),
    Case.named("cross-axes",          lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0),
                                       arguments(normal(3, 4), normal(4, 3))),
    Case.named("convolve",            np.convolve,   arguments(normal(5), normal(3))),
    Case.named("convolve-longer-second", np.convolve, arguments(normal(2), normal(5))),
    Case.named("convolve-same",       lambda a, v: np.convolve(a, v, "same"), arguments(normal(6), normal(4))),
    Case.named("convolve-valid",      lambda a, v: np.convolve(a, v, mode="valid"), arguments(normal(3), normal(6))),
    Case.named("convolve-0d",         np.convolve,   arguments(normal(), normal(4))),
]

EINSUMS = [
    Case.named("einsum-matmul",       lambda a, b: np.einsum("ij,jk->ik", a, b), arguments(normal(2, 3), normal(3, 4))),
    Case.named("einsum-implicit",     lambda a, b: np.einsum("ij,jk", a, b), arguments(normal(2, 3), normal(3, 4))),
    Case.named("einsum-implicit-order", lambda a: np.einsum("ba", a), arguments(normal(2, 3))),
    Case.named("einsum-trace",        lambda a: np.einsum("ii", a), arguments(normal(3, 3))),
    Case.named("einsum-diagonal",     lambda a: np.einsum("ii->i", a), arguments(normal(3, 3))),
    Case.named("einsum-repeat-and-sum", lambda a, b: np.einsum("iij,j->i", a, b), arguments(normal(3, 3, 2), normal(2))),
    Case.named("einsum-summed-alone", lambda a, b: np.einsum("ij,k->i", a, b), arguments(normal(2, 3), normal(4))),
    Case.named("einsum-outer",        lambda a, b: np.einsum("i,j", a, b), arguments(normal(2), normal(3))),
    Case.named("einsum-scalar",       lambda a, b: np.einsum(",i->i", a, b), arguments(normal(), normal(3))),
    Case.named("einsum-three",        lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c),
                                       arguments(normal(2, 3), normal(3, 4), normal(4, 2))),
    Case.named("einsum-ellipsis",     lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
                                       arguments(normal(2, 1, 2, 3), normal(4, 3, 2))),
    Case.named("einsum-ellipsis-implicit", lambda a: np.einsum("...ii", a), arguments(normal(2, 3, 3))),
    Case.named("einsum-ellipsis-middle", lambda a, b: np.einsum("i...j,j->...i", a, b),
                                       arguments(normal(2, 4, 3), normal(3))),
    Case.named("einsum-same-operand", lambda a: np.einsum("ij,ij->", a, a), arguments(normal(2, 3))),
    Case.named("einsum-optimize",     lambda a, b, c: np.einsum("ij,jk,k->i", a, b, c, optimize=True),
                                       arguments(normal(2, 3), normal(3, 4), normal(4))),
]

# np.einsum(op0, sublist0, op1, sublist1, ..., [sublist_out]): integer labels, Ellipsis for ...
EINSUM_SUBLISTS = [
    Case.named("einsum-sublist-matmul", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]),
                                       arguments(normal(2, 3), normal(3, 4))),
    Case.named("einsum-sublist-implicit", lambda a, b: np.einsum(a, [30, 1], b, [1, 2]),
                                       arguments(normal(2, 3), normal(3, 4))),
    Case.named("einsum-sublist-diagonal", lambda a: np.einsum(a, [0, 0], [0]), arguments(normal(3, 3))),
    Case.named("einsum-sublist-ellipsis", lambda a, b: np.einsum(a, [Ellipsis, 0, 1], b, [1], [Ellipsis, 0]),
                                       arguments(normal(2, 2, 3), normal(3))),
]

MATRIX_FUNCTIONS = [
    Case.named("inv",                 np.linalg.inv, arguments(well_conditioned(3, 3))),
    Case.named("inv-batched",         np.linalg.inv, arguments(well_conditioned(2, 3, 3))),
    Case.named("solve-vector",        np.linalg.solve, arguments(well_conditioned(3, 3), normal(3))),
    Case.named("solve-matrix",        np.linalg.solve, arguments(well_conditioned(3, 3), normal(3, 2))),
    Case.named("solve-batched-vector", np.linalg.solve, arguments(well_conditioned(2, 3, 3), normal(3))),
    Case.named("solve-batched-matrix", np.linalg.solve, arguments(well_conditioned(2, 3, 3), normal(2, 3, 2))),
    Case.named("solve-broadcast-matrix", np.linalg.solve, arguments(well_conditioned(3, 3), normal(2, 3, 2))),
    Case.named("det",                 np.linalg.det, arguments(normal(3, 3))),
    Case.named("det-batched",         np.linalg.det, arguments(normal(2, 3, 3))),
    Case.named("slogdet",             np.linalg.slogdet, arguments(normal(3, 3))),
    Case.named("slogdet-field",       lambda a: np.linalg.slogdet(a).logabsdet, arguments(normal(2, 3, 3))),
    Case.named("pinv-tall",           np.linalg.pinv, arguments(normal(4, 3))),
    Case.named("pinv-wide",           np.linalg.pinv, arguments(normal(2, 4))),
    Case.named("matrix_power",        lambda a: np.linalg.matrix_power(a, 3), arguments(normal(3, 3))),
    Case.named("matrix_power-zero",   lambda a: np.linalg.matrix_power(a, 0), arguments(normal(3, 3))),
    Case.named("matrix_power-inverse", lambda a: np.linalg.matrix_power(a, -2), arguments(well_conditioned(3, 3))),
    Case.named("lstsq-vector",        lambda a, b: np.linalg.lstsq(a, b)[0], arguments(normal(5, 3), normal(5))),
    Case.named("lstsq-all",           lambda a, b: np.linalg.lstsq(a, b)[:2] + np.linalg.lstsq(a, b)[3:],
                                       arguments(normal(5, 3), normal(5, 2))),
    Case.named("cholesky",            symmetrised(np.linalg.cholesky), arguments(symmetric_positive_definite(3))),
    Case.named("cholesky-upper",      symmetrised(lambda a: np.linalg.cholesky(a, upper=True)),
                                       arguments(symmetric_positive_definite(3))),
    Case.named("eigh",                symmetrised(sign_free_eigh), arguments(normal(3, 3))),
    Case.named("eigh-upper",          symmetrised(eigh_upper), arguments(normal(3, 3))),
    Case.named("eigh-values-field",   symmetrised(lambda a: np.linalg.eigh(a).eigenvalues), arguments(normal(4, 4))),
    Case.named("eigvalsh",            symmetrised(np.linalg.eigvalsh), arguments(normal(3, 3))),
    Case.named("svd-square",          sign_free_svd, arguments(normal(4, 4))),
    Case.named("svd-tall",            sign_free_svd, arguments(normal(5, 3))),
    Case.named("svd-wide",            sign_free_svd, arguments(normal(3, 5))),
    Case.named("svd-batched",         sign_free_svd, arguments(normal(2, 4, 3))),
    Case.named("svd-values",          lambda a: np.linalg.svd(a, compute_uv=False), arguments(normal(3, 5))),
    Case.named("svd-full-square",     lambda a: np.linalg.svd(a)[1], arguments(normal(3, 3))),
    Case.named("qr-tall",             np.linalg.qr,  arguments(normal(5, 3))),
    Case.named("qr-square",           np.linalg.qr,  arguments(well_conditioned(3, 3))),
    Case.named("qr-batched",          np.linalg.qr,  arguments(normal(2, 4, 3))),
    Case.named("qr-r",                lambda a: np.linalg.qr(a, "r"), arguments(normal(4, 2))),
]

NORMS = [
    Case.named("norm",                np.linalg.norm, arguments(normal(3, 4))),
    Case.named("norm-3d",             np.linalg.norm, arguments(normal(2, 3, 2))),
    Case.named("norm-1",              lambda x: np.linalg.norm(x, 1), arguments(normal(4))),
    Case.named("norm-inf",            lambda x: np.linalg.norm(x, np.inf), arguments(normal(4))),
    Case.named("norm-minus-inf",      lambda x: np.linalg.norm(x, -np.inf), arguments(normal(4))),
    Case.named("norm-3",              lambda x: np.linalg.norm(x, 3), arguments(normal(4))),
    Case.named("norm-axis-keepdims",  lambda x: np.linalg.norm(x, axis=1, keepdims=True), arguments(normal(3, 4))),
    Case.named("norm-positional",     lambda x: np.linalg.norm(x, 2, 0), arguments(normal(3, 4))),
    Case.named("norm-fro-axes",       lambda x: np.linalg.norm(x, "fro", axis=(0, 2)), arguments(normal(3, 2, 4))),
    Case.named("norm-nuc",            lambda x: np.linalg.norm(x, "nuc"), arguments(normal(3, 4))),
    Case.named("norm-2-matrix",       lambda x: np.linalg.norm(x, 2), arguments(normal(3, 4))),
    Case.named("norm-minus-2-matrix", lambda x: np.linalg.norm(x, -2), arguments(normal(3, 4))),
    Case.named("norm-1-matrix",       lambda x: np.linalg.norm(x, 1), arguments(normal(3, 4))),
    Case.named("norm-inf-matrix-axes", lambda x: np.linalg.norm(x, np.inf, axis=(2, 0), keepdims=True),
                                       arguments(normal(3, 2, 4))),
    Case.named("vector_norm-axes",    lambda x: np.linalg.vector_norm(x, axis=(0, 1)), arguments(normal(3, 2, 4))),
    Case.named("vector_norm-ord",     lambda x: np.linalg.vector_norm(x, ord=1.5), arguments(normal(2, 3))),
    Case.named("matrix_norm",         lambda x: np.linalg.matrix_norm(x, ord=-1), arguments(normal(2, 3, 4))),
]


def dot_into_new_buffer(a, b):
    c = np.zeros_like(a)
    np.dot(a, b, out=c)
    return c


def dot_into_argument(a, b, c):
    np.dot(a, b, out=c)
    return np.sin(c)


def dot_into_own_operand(a, b):
    np.dot(a, b, out=a)  # NumPy computes into a temporary when out overlaps an operand
    return a


def matmul_in_place(a, b):
    a @= b
    return a * a


def solve_into_slice(x, a, b):
    x[1:] = np.linalg.solve(a, b)[1:]
    return x * x


def inverse_into_own_column(m):
    m[:, 0] = np.linalg.inv(m)[:, 1]  # reads all of m, then overwrites part of it
    return np.linalg.det(m) + m


def einsum_into_out(a, b):
    c = np.empty_like(a[:, :2])
    np.einsum("ij,jk->ik", a, b, out=c)
    c *= 2.0
    return c


def factor_after_update(a, v):
    a += np.outer(v, v)
    a[...] = 0.5 * (a + a.T)
    return np.linalg.cholesky(a)


def norms_of_updated_rows(x):
    x[0] -= x[1]
    x[2] *= np.linalg.norm(x[0])
    return np.linalg.norm(x, axis=1)


IN_PLACE = [
    Case.named("dot-out-new-buffer",  dot_into_new_buffer, arguments(normal(3, 3), normal(3, 3))),
    Case.named("dot-out-argument",    dot_into_argument, arguments(normal(2, 3), normal(3, 2), normal(2, 2))),
    Case.named("dot-out-own-operand", dot_into_own_operand, arguments(normal(3, 3), normal(3, 3))),
    Case.named("matmul-augmented",    matmul_in_place, arguments(normal(3, 3), normal(3, 3))),
    Case.named("solve-into-slice",    solve_into_slice,
                                       arguments(normal(3), well_conditioned(3, 3), normal(3))),
    Case.named("inv-into-own-column", inverse_into_own_column, arguments(well_conditioned(3, 3))),
    Case.named("einsum-out",          einsum_into_out, arguments(normal(2, 3), normal(3, 2))),
    Case.named("cholesky-after-update", factor_after_update,
                                       arguments(symmetric_positive_definite(3), normal(3))),
    Case.named("norm-of-updated-rows", norms_of_updated_rows, arguments(normal(3, 4))),
]
# fmt: on

ALL_CASES = PRODUCTS + EINSUMS + MATRIX_FUNCTIONS + NORMS + IN_PLACE


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", ALL_CASES + EINSUM_SUBLISTS, ids=case_id)
def test_linalg_gradient(case, policy, rng):
    mutad.check_grads(case.function, *case.sample(rng), policy=policy)


def curved(function):
    """``function`` with np.sin applied to each float output. Under nested differentiation the
    cotangents that reach a rule are then arrays the outer differentiation traces too (they
    depend on the point), as in any program where the rule is not the last operation."""

    def composed(*args):
        y = function(*args)
        if isinstance(y, tuple):
            return tuple(np.sin(v) if getattr(v, "dtype", None) == float else v for v in y)
        return np.sin(y)

    return composed


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "policy"),
                         under_alternating_policies(ALL_CASES + EINSUM_SUBLISTS, POLICIES))
def test_linalg_second_derivatives(case, policy, rng):
    """Hessian-vector products, reverse over forward and nested reverse, against finite
    differences of the gradient: every rule's forward computation and pullback run on arrays
    the outer differentiation traces (under one policy each, alternating: the first-order
    test runs every case under both)."""
    args = case.sample(rng)
    mutad.check_grads(case.function, *args, order=2, policy=policy)
    mutad.check_grads(curved(case.function), *args, order=2)


# Complex matrices: every product, einsum, and the matrix functions declared complex-capable
# (inv, solve, det, matrix_power; the factorizations are tested elsewhere), out of place and
# written in place, with an imaginary part on every argument, and mixed with real operands.

COMPLEX_MATRIX_FUNCTIONS = {"inv", "inv-batched", "solve-vector", "solve-matrix",
                            "solve-batched-vector", "solve-batched-matrix",
                            "solve-broadcast-matrix", "det", "det-batched", "matrix_power",
                            "matrix_power-zero", "matrix_power-inverse"}
COMPLEX_IN_PLACE = {"dot-out-new-buffer", "dot-out-argument", "dot-out-own-operand",
                    "matmul-augmented", "solve-into-slice", "inv-into-own-column", "einsum-out"}


def half_complex(case):
    """``case`` with an imaginary part on its first argument only: complex and real operands."""
    def sampler(rng):
        first, *rest = case.sample(rng)
        return (first + 1j * rng.standard_normal(np.shape(first)), *rest)

    return Case.named(f"{case.name}-complex-real", case.function, sampler)


def complex_updates_of_a_matrix(a, b):
    a.imag[0] += b.real[:, 0]
    a @= b
    a[1:] = np.linalg.solve(a + 3.0 * np.eye(3), b.conj())[1:]
    return np.linalg.det(a), np.einsum("ij,ji->i", a, b)


# fmt: off
COMPLEX_CASES = (
    [complexified(c) for c in PRODUCTS + EINSUMS + EINSUM_SUBLISTS]
    + [complexified(c) for c in MATRIX_FUNCTIONS if c.name in COMPLEX_MATRIX_FUNCTIONS]
    + [complexified(c) for c in IN_PLACE if c.name in COMPLEX_IN_PLACE]
    + [half_complex(c) for c in PRODUCTS if c.name in {
        "dot-2d", "matmul-batched", "vdot", "vecdot", "inner", "outer", "tensordot-pairs", "kron",
        "cross", "convolve"}]
    + [half_complex(c) for c in MATRIX_FUNCTIONS
       if c.name in {"solve-matrix", "solve-batched-vector"}]
    + [complexified(Case.named("updates-of-a-matrix", complex_updates_of_a_matrix,
                               arguments(well_conditioned(3, 3), normal(3, 3))))]
)
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=case_id)
def test_complex_linalg_gradient(case, policy, rng):
    check_complex(case, case.sample(rng), policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(COMPLEX_CASES, POLICIES))
def test_complex_linalg_second_derivatives(case, policy, rng):
    check_complex(case, case.sample(rng), policy, order=2)


def test_float32_product_gradient_keeps_dtype(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    da, db = mutad.gradient(lambda a, b: np.trace(a @ b), a, b)
    assert da.dtype == db.dtype == np.float32
    np.testing.assert_allclose(da, b.T, rtol=1e-6)


@pytest.mark.parametrize("shape, mode", [((5, 3), "complete"), ((4, 3), "raw")])
def test_qr_factors_that_are_not_unique_are_refused(shape, mode, rng):
    a = rng.standard_normal(shape)
    with pytest.raises(mutad.MutadError, match="reduced QR"):
        mutad.gradient(lambda a: np.linalg.qr(a, mode)[0].sum(), a)


def test_det_gradient_of_a_singular_matrix_is_the_cofactor_matrix():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    (grad,) = mutad.gradient(np.linalg.det, singular)
    np.testing.assert_allclose(grad, [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def _det_second_derivatives(a):
    """d² det / dA_ij dA_kl: the signed determinant of A without rows i, k and columns j, l."""
    n = a.shape[0]
    h = np.zeros((n, n, n, n), dtype=a.dtype)
    for i, j, k, l in itertools.product(range(n), repeat=4):
        if i != k and j != l:
            rows = [r for r in range(n) if r not in (i, k)]
            columns = [c for c in range(n) if c not in (j, l)]
            sign = (-1) ** (i + j + k + l) * (1 if (k > i) == (l > j) else -1)
            h[i, j, k, l] = sign * (np.linalg.det(a[np.ix_(rows, columns)]) if rows else 1)
    return h


@pytest.mark.parametrize("a", [np.diag([1.0, 2.0, 0.0]), np.diag([1.0, 0.0, 0.0]), np.zeros((3, 3)),
                               np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]), np.arange(16.0).reshape(4, 4)],
                         ids=["rank 2", "rank 1", "zero", "outer", "rank 2 of 4"])
def test_det_hessian_of_a_singular_matrix_is_exact(a):
    # det is a polynomial: its Hessian exists at singular matrices, where the SVD that gives
    # the cofactors has zero (often repeated) singular values and no derivative
    expected = _det_second_derivatives(a)
    given = a.copy()
    np.testing.assert_allclose(mutad.hessian(np.linalg.det, given), expected, rtol=0, atol=1e-12)
    direction = np.arange(a.size, dtype=float).reshape(a.shape)
    np.testing.assert_allclose(mutad.hvp(np.linalg.det, (given,), (direction,)),
                               np.einsum("ijkl,kl->ij", expected, direction), rtol=0, atol=1e-11)
    stack = np.stack([a, 2 * a])
    hessian = mutad.jacfwd(lambda s: mutad.gradient(lambda s: np.linalg.det(s).sum(), s)[0])(stack)
    np.testing.assert_allclose(hessian[0, :, :, 0], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hessian[1, :, :, 1], 2 ** (a.shape[0] - 2) * expected, rtol=0, atol=1e-11)
    assert np.array_equal(given, a)


@pytest.mark.parametrize("ord", [None, 1, 2, 3, np.inf, -np.inf])
def test_vector_norm_subgradient_is_zero_at_zero(ord):
    (grad,) = mutad.gradient(lambda x: np.linalg.norm(x, ord), np.zeros(3))
    assert np.array_equal(grad, np.zeros(3))


def test_inf_norm_ties_share_the_gradient():
    (grad,) = mutad.gradient(lambda x: np.linalg.norm(x, np.inf), np.array([2.0, -2.0, 1.0]))
    assert np.array_equal(grad, [0.5, -0.5, 0.0])


def test_cholesky_gradient_is_symmetric(rng):
    a = symmetric_positive_definite(4)(rng)
    weights = rng.standard_normal((4, 4))
    (grad,) = mutad.gradient(lambda a: (np.linalg.cholesky(a) * weights).sum(), a)
    np.testing.assert_allclose(grad, grad.T, rtol=0, atol=1e-13)


def test_eigh_gradient_matches_trace_identity(rng):
    a = symmetric_positive_definite(4)(rng)
    (grad,) = mutad.gradient(lambda a: np.linalg.eigvalsh(a).sum(), a)
    np.testing.assert_allclose(grad, np.eye(4), atol=1e-12)


def test_einsum_sublist_form_nests_as_the_subscripts_form(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    va, vb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)

    def second_derivative(einsum):
        def directional(a, b):  # <gradient, v>, differentiated again by nested reverse mode
            da, db = mutad.gradient(lambda a, b: np.sin(einsum(a, b)).sum(), a, b)
            return (da * va).sum() + (db * vb).sum()

        return mutad.gradient(directional, a, b)

    sublists = second_derivative(lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]))
    subscripts = second_derivative(lambda a, b: np.einsum("ij,jk->ik", a, b))
    for x, y in zip(sublists, subscripts, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13)



@pytest.mark.parametrize("shapes", [((2, 30), (30, 3), (3, 20)), ((20, 3), (3, 30), (30, 2))])
def test_einsum_of_three_operands_pulls_back_in_numpys_greedy_order(rng, shapes):
    """Each operand's cotangent is the einsum of the others with the output's cotangent, in the
    order np.einsum(optimize=True) takes (searched once per subscripts and shapes): the same
    numbers bit for bit, traced and replayed, at shapes whose best orders differ."""
    a, b, c = (rng.standard_normal(shape) for shape in shapes)
    w = rng.standard_normal((shapes[0][0], shapes[2][1]))
    before = [x.tobytes() for x in (a, b, c)]

    def loss(a, b, c):
        return np.sum(np.einsum("ij,jk,kl->il", a, b, c) * w)

    expected = [np.einsum("il,jk,kl->ij", w, b, c, optimize=True),
                np.einsum("il,ij,kl->jk", w, a, c, optimize=True),
                np.einsum("il,ij,jk->kl", w, a, b, optimize=True)]
    replayed = mutad.value_and_grad(loss, argnums=(0, 1, 2), replay=True)
    for grads in (mutad.gradient(loss, a, b, c), *(replayed(a, b, c)[1] for _ in range(3))):
        for grad, want in zip(grads, expected, strict=True):
            assert grad.tobytes() == want.tobytes()
    assert [x.tobytes() for x in (a, b, c)] == before


def test_einsum_of_three_operands_searches_its_order_once(rng, monkeypatch):
    """The greedy search for a contraction order is most of an einsum pullback's time on small
    arrays (a replayed n-body step): a pullback of the same subscripts and shapes reuses it."""
    # NumPy's own search, a private function: the test counts its calls where NumPy has it
    einsumfunc = pytest.importorskip("numpy._core.einsumfunc")
    search = getattr(einsumfunc, "_greedy_path", None)
    if search is None:
        pytest.skip("this NumPy has no numpy._core.einsumfunc._greedy_path to count")
    searches = []
    monkeypatch.setattr(einsumfunc, "_greedy_path", lambda *a: searches.append(1) or search(*a))
    x, m = rng.standard_normal((5, 5, 3)), rng.standard_normal(5)

    def loss(x, m):
        return np.sum(np.einsum("ij,ijk,j->ik", x[..., 0], x, m) ** 2)

    mutad.gradient(loss, x, m)
    searches.clear()
    first = mutad.gradient(loss, x, m)
    assert not searches
    assert all(np.array_equal(g, h) for g, h in zip(first, mutad.gradient(loss, x, m)))


def test_svd_of_repeated_singular_values_when_only_the_values_are_used():
    (grad,) = mutad.gradient(lambda a: np.linalg.svd(a, compute_uv=False).sum(), 2.0 * np.eye(3))
    assert np.allclose(grad, np.eye(3))
    # Through the factors, no gradient reaching U or Vᵀ: the values alone.
    (grad,) = mutad.gradient(lambda a: np.linalg.svd(a)[1].sum(), 2.0 * np.eye(3))
    assert np.allclose(grad, np.eye(3))
    # A loss reading the vectors too may couple the values to their arbitrary basis, which
    # the cotangent cannot show (see test_spectral_degenerate.py): refused.
    with pytest.raises(mutad.MutadError, match="compute_uv=False"):
        mutad.gradient(lambda a: (lambda u, s, vt: s.sum() + 0.0 * u[0, 0])(*np.linalg.svd(a)),
                       2.0 * np.eye(3))


def test_svd_full_matrices_of_a_non_square_matrix_is_refused():
    with pytest.raises(mutad.MutadError, match="full_matrices=False"):
        mutad.gradient(lambda a: np.linalg.svd(a)[0].sum(), np.ones((3, 2)))


# Decisions: a norm's signs, ties and zeros are decided when it is computed -------------------

from decisions import check_decision_kept, then_disturbed  # noqa: E402

TIED_MAGNITUDES = np.array([0.7, -0.7, 0.2, 0.0, -0.3, 0.4])


@pytest.mark.parametrize(("operation", "x", "differentiable"), [
    (lambda x: np.linalg.norm(x, np.inf), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(x, -np.inf), TIED_MAGNITUDES[[0, 1, 2, 4, 5]], False),
    (lambda x: np.linalg.norm(x, 1), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(x, 3), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(x), TIED_MAGNITUDES, True),
    (lambda x: np.linalg.norm(x * 0.0 + np.where(x == 0, x, 0.0)), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.vector_norm(x, ord=np.inf), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(np.reshape(x, (2, 3)), 1), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(np.reshape(x, (2, 3)), np.inf), TIED_MAGNITUDES, False),
    (lambda x: np.linalg.norm(np.reshape(x, (2, 3)), axis=1, ord=np.inf), TIED_MAGNITUDES,
     False),
], ids=["inf", "-inf", "1", "3", "2", "2-at-0", "vector_norm-inf", "matrix-1", "matrix-inf",
        "rows-inf"])
def test_norm_decisions_survive_restoration_by_inversion(operation, x, differentiable):
    check_decision_kept(then_disturbed(operation), x, differentiable=differentiable)



SYMMETRIC_CONTRACT = {  # (as np.linalg.eigh and eigvalsh: the derivative of the triangle read)
    "np.linalg.cholesky": np.linalg.cholesky,
    "scipy.linalg.cholesky": lambda a: scipy.linalg.cholesky(a),
    "scipy.linalg.cho_factor": lambda a: scipy.linalg.cho_factor(a)[0],
}


@pytest.mark.parametrize("function", SYMMETRIC_CONTRACT.values(), ids=SYMMETRIC_CONTRACT.keys())
def test_a_matrix_that_is_not_symmetric_gets_the_derivative_of_the_triangle_read(function, rng):
    # These functions read one triangle: a real matrix that is not symmetric gets the
    # derivative of the call (0 on the other triangle), a symmetric one the symmetric gradient,
    # a complex one that is not Hermitian is refused (SciPy's: any complex one).
    m = rng.standard_normal((4, 4))
    a = m @ m.T + 4 * np.eye(4)
    a[0, 1] += 0.5
    before = a.tobytes()
    mutad.check_grads(lambda a: function(a) ** 2, a)
    assert a.tobytes() == before
    with pytest.raises((mutad.errors.UnsupportedOperationError, mutad.errors.ComplexInputError),
                       match="not Hermitian|complex values"):
        mutad.gradient(lambda a: np.abs(function(a) ** 2).sum(), a + 0.1j * m)
    b = m @ m.T + 4 * np.eye(4)
    c = b @ m @ m.T @ b  # symmetric but for rounding, as computed symmetric matrices are
    mutad.check_grads(symmetrised(lambda a: function(a) ** 2), c / np.abs(c).max() + np.eye(4))
    mutad.check_grads(lambda a: function(a) ** 2, c, symmetric=(0,), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, the transpose of
# mutad's reverse mode, and reverse mode over them (rule_checks)

# fmt: off
FORWARD_PRODUCTS = [
    forward_case("dot",                np.dot,             (normal(2, 3), normal(3, 4))),
    forward_case("dot-nd",             np.dot,             (normal(2, 2, 3), normal(4, 3, 2))),
    forward_case("dot-scalar",         np.dot,             (normal(), normal(3))),
    forward_case("inner",              np.inner,           (normal(2, 3), normal(4, 3))),
    forward_case("tensordot",          np.tensordot,       (normal(2, 3, 4), normal(3, 4, 2))),
    forward_case("linalg.tensordot",   np.linalg.tensordot, (normal(3, 2), normal(2, 5)), {"axes": 1}),
    forward_case("kron",               np.kron,            (normal(2, 3), normal(3, 2))),
    forward_case("outer",              np.outer,           (normal(2, 2), normal(3))),
    forward_case("linalg.outer",       np.linalg.outer,    (normal(2), normal(3))),
    forward_case("vdot",               np.vdot,            (normal(2, 2), normal(4))),
    forward_case("matmul",             np.matmul,          (normal(2, 1, 2, 3), normal(4, 3, 2))),
    forward_case("matmul-1d",          np.matmul,          (normal(3), normal(2, 3, 4))),
    forward_case("linalg.matmul",      np.linalg.matmul,   (normal(2, 3), normal(3, 4))),
    forward_case("vecdot",             np.vecdot,          (normal(2, 3), normal(3))),
    forward_case("linalg.vecdot",      np.linalg.vecdot,   (normal(3, 2), normal(3, 1)), {"axis": 0}),
    forward_case("matvec",             np.matvec,          (normal(2, 3, 4), normal(4))),
    forward_case("vecmat",             np.vecmat,          (normal(3), normal(2, 3, 4))),
    forward_case("trace",              np.trace,           (normal(3, 2, 4), constant(1), constant(0), constant(2))),
    forward_case("linalg.trace",       np.linalg.trace,    (normal(2, 3, 3),), {"offset": -1}),
    forward_case("cross",              np.cross,           (normal(4, 3), normal(3))),
    forward_case("cross-2d",           np.cross,           (normal(4, 2), normal(2))),
    forward_case("linalg.cross",       np.linalg.cross,    (normal(4, 3), normal(4, 3))),
    forward_case("einsum",             np.einsum,          (constant("ij,jk,k->i"), normal(2, 3), normal(3, 4), normal(4))),
    forward_case("einsum-ellipsis",    np.einsum,          (constant("...ii,...i"), normal(2, 3, 3), normal(3))),
    forward_case("einsum-sublists",    np.einsum,          (normal(2, 3), constant([0, 1]), normal(3), constant([1]))),
]

FORWARD_MATRIX_FUNCTIONS = [
    forward_case("inv",                np.linalg.inv,      (dominant(2, 3, 3),)),
    forward_case("solve-vector",       np.linalg.solve,    (dominant(3, 3), normal(3))),
    forward_case("solve-batched-vector", np.linalg.solve,  (dominant(2, 3, 3), normal(3))),
    forward_case("solve-broadcast",    np.linalg.solve,    (dominant(3, 3), normal(2, 3, 2))),
    forward_case("pinv-tall",          np.linalg.pinv,     (normal(4, 3),)),
    forward_case("pinv-wide-batched",  np.linalg.pinv,     (normal(2, 2, 4),)),
    forward_case("matrix_power",       np.linalg.matrix_power, (normal(2, 3, 3), constant(3))),
    forward_case("matrix_power-zero",  np.linalg.matrix_power, (normal(3, 3), constant(0))),
    forward_case("matrix_power-inverse", np.linalg.matrix_power, (dominant(3, 3), constant(-2))),
    forward_case("lstsq-vector",       np.linalg.lstsq,    (normal(5, 3), normal(5))),
    forward_case("lstsq-matrix",       np.linalg.lstsq,    (normal(5, 3), normal(5, 2))),
    forward_case("lstsq-wide",         np.linalg.lstsq,    (normal(2, 4), normal(2))),
    forward_case("det",                np.linalg.det,      (normal(2, 3, 3),)),
    forward_case("slogdet",            np.linalg.slogdet,  (normal(2, 3, 3),)),
    forward_case("cholesky",           np.linalg.cholesky, (spd(2, 3, 3),), symmetric=(0,)),
    forward_case("cholesky-upper",     np.linalg.cholesky, (spd(4, 4),), {"upper": True}, symmetric=(0,)),
    forward_case("eigh",               np.linalg.eigh,     (spd(2, 4, 4),), symmetric=(0,), align=align_eigh),
    forward_case("eigh-upper",         np.linalg.eigh,     (spd(4, 4), constant("U")), symmetric=(0,), align=align_eigh),
    forward_case("eigvalsh",           np.linalg.eigvalsh, (spd(2, 4, 4),), symmetric=(0,)),
    forward_case("svd-square",         np.linalg.svd,      (normal(2, 3, 3),), align=align_svd),
    forward_case("svd-tall",           np.linalg.svd,      (normal(5, 3),), {"full_matrices": False}, align=align_svd),
    forward_case("svd-wide",           np.linalg.svd,      (normal(2, 3, 5),), {"full_matrices": False}, align=align_svd),
    forward_case("svd-values",         np.linalg.svd,      (normal(4, 3),), {"compute_uv": False}),
    forward_case("svd-hermitian",      np.linalg.svd,      (spd(4, 4),), {"hermitian": True}, symmetric=(0,),
         align=align_svd),
]

FORWARD_NORMS = [
    forward_case("norm",               np.linalg.norm,     (normal(2, 3),)),
    forward_case("norm-axis",          np.linalg.norm,     (normal(2, 3), constant(3), constant(1), constant(True))),
    forward_case("norm-inf",           np.linalg.norm,     (normal(4),), {"ord": np.inf}),
    forward_case("norm-fro",           np.linalg.norm,     (normal(2, 3, 4),), {"ord": "fro", "axis": (0, 2)}),
    forward_case("norm-nuc",           np.linalg.norm,     (normal(3, 4),), {"ord": "nuc"}),
    forward_case("norm-2",             np.linalg.norm,     (normal(3, 4),), {"ord": 2}),
    forward_case("norm-minus-2",       np.linalg.norm,     (normal(4, 3),), {"ord": -2}),
    forward_case("norm-1",             np.linalg.norm,     (normal(3, 4),), {"ord": 1}),
    forward_case("norm-inf-matrix",    np.linalg.norm,     (normal(3, 4),), {"ord": np.inf, "keepdims": True}),
    forward_case("vector_norm",        np.linalg.vector_norm, (normal(2, 3),), {"axis": 0, "ord": 3}),
    forward_case("matrix_norm",        np.linalg.matrix_norm, (normal(2, 3, 4),), {"ord": "nuc"}),
    forward_case("matrix_norm-fro",    np.linalg.matrix_norm, (normal(3, 4),), {"keepdims": True}),
]
# fmt: on

FORWARD_CASES = FORWARD_PRODUCTS + FORWARD_MATRIX_FUNCTIONS + FORWARD_NORMS
TRANSPOSED = {"tensordot", "einsum", "inv", "solve-broadcast", "pinv-tall", "matrix_power-inverse",
              "lstsq-matrix", "slogdet", "cholesky", "eigh", "svd-tall", "norm-2", "matrix_norm"}


@pytest.mark.parametrize("case", FORWARD_CASES, ids=case_id)
def test_forward_rule_matches_finite_differences(case, rng):
    check_forward_rule(case, rng, step=1e-3, atol=None, transpose=False)


@pytest.mark.parametrize("case", [c for c in FORWARD_CASES if c.id in TRANSPOSED], ids=case_id)
def test_forward_and_reverse_rules_are_transposes(case, rng):
    check_transposed_by_reverse_mode(case, rng)


# reverse mode takes einsum's subscripts-string form only
@pytest.mark.parametrize("case", [c for c in FORWARD_CASES if c.id != "einsum-sublists"],
                         ids=case_id)
def test_reverse_over_forward(case, rng):
    check_reverse_over_forward(case, rng)


LINALG_INDEXING = {np.take, np.take_along_axis, np.compress, np.extract, np.sort, np.partition,
                   np.choose, np.select, np.diff, np.interp}


def test_every_linear_algebra_rule_has_a_forward_rule():
    mine = {f for f, rule in table("reverse").items()
            if rule.__module__ == "mutad.rules.contractions"
            or rule.__module__.startswith("mutad.linalg.")}
    assert not mine - LINALG_INDEXING - set(table("forward"))


def test_forward_rules_without_a_tangent_on_one_operand(rng):
    a, b = dominant(3, 3)(rng), rng.standard_normal((3, 2))
    da, db = rng.standard_normal((3, 3)), rng.standard_normal((3, 2))
    for tangents in ([da, None], [None, db]):
        _, dx = RULES[np.linalg.solve].forward(tangents, a, b)
        expected = directional_fd(np.linalg.solve, (a, b), tangents, step=1e-3)
        assert_tangent(dx, expected)
    _, dy = RULES[np.matmul].forward([None, db], a, b)
    np.testing.assert_allclose(dy, a @ db)


def test_forward_rule_of_det_of_a_singular_matrix_uses_the_cofactor(rng):
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    da = rng.standard_normal((3, 3))
    _, dy = RULES[np.linalg.det].forward([da], a)
    np.testing.assert_allclose(dy, directional_fd(np.linalg.det, (a,), (da,), step=1e-3), atol=1e-8)


def test_the_cotangent_of_a_matrix_broadcast_over_a_stack_makes_no_stack_of_products():
    """``A @ C`` of a stack of 500 rows and one 30 x 30 matrix (a doitgen kernel): C's cotangent
    is one product of the stacked rows, not 500 products summed (3.6 MB here, 27x the inputs)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    stack, matrix = rng.random((25, 20, 1, 30)), rng.random((30, 30))

    def kernel(a, c):
        return ((a @ c) ** 2).sum()

    tracemalloc.start()
    try:
        mutad.gradient(kernel, stack, matrix)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * (stack.nbytes + matrix.nbytes)
    mutad.check_grads(kernel, stack[:2, :3], matrix[:, :5], order=2)


def test_the_deprecation_of_cross_of_2_vectors_is_the_users_not_mutads(rng):
    # NumPy 2 deprecates np.cross of 2-vectors; the warning names the user's line, as NumPy's
    # own does, in both modes, and mutad computes NumPy's value without calling that path.
    a, b = rng.standard_normal((4, 2)), rng.standard_normal(2)

    def f(a, b):
        return np.cross(a, b)

    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        expected = np.cross(a, b)
        y, back = mutad.pullback(f, a, b)
        mutad.jvp(f, (a, b), (a, b))
        back(np.ones_like(y))
    assert y.tobytes() == expected.tobytes()
    places = {(w.category, w.filename) for w in heard}
    assert places == {(DeprecationWarning, __file__)}, places


def test_pinv_of_a_hermitian_matrix_reads_one_triangle_as_eigh(rng):
    """pinv(hermitian=True) reads one triangle (NumPy's eigh): its gradient is symmetric, as
    eigh's, and a matrix that is not symmetric is refused as eigh refuses it (its gradient had
    a nonzero upper triangle NumPy never reads)."""
    a = rng.standard_normal((4, 4))
    s = a + a.T + np.eye(4)

    def f(m):
        return (np.linalg.pinv(m, hermitian=True) * np.arange(16.0).reshape(4, 4)).sum()

    assert mutad.value_and_grad(f)(s)[0] == f(s)
    g, = mutad.gradient(f, s)
    assert g.tobytes() == g.T.tobytes()
    mutad.check_grads(f, s, symmetric=(0,), order=2)
    for differentiate in (lambda f: mutad.gradient(f, a),
                          lambda f: mutad.jvp(f, (a,), (np.eye(4),))):
        with pytest.raises(mutad.MutadError, match="hermitian=True"):
            differentiate(f)


def test_singular_values_and_eigenvalues_alone_are_numpys_own(rng):
    """Regression: eigvalsh took its values from eigh, svd(compute_uv=False) from an SVD with
    vectors, and svd(hermitian=True) ignored hermitian: values off NumPy's in the last bits
    (LAPACK computes values alone another way)."""
    a = rng.standard_normal((6, 6))
    s = a @ a.T
    s -= 3.0 * np.eye(6)  # negative eigenvalues too: hermitian's singular values are |w|
    cases = [(np.linalg.eigvalsh, s, {}), (np.linalg.svd, a, {"compute_uv": False}),
             (np.linalg.svd, s, {"hermitian": True}),
             (np.linalg.svd, s, {"hermitian": True, "compute_uv": False}),
             (np.linalg.svdvals, a, {}), (np.linalg.cond, a, {})]
    for function, m, kwargs in cases:
        y, _ = mutad.pullback(lambda m: function(m, **kwargs), m)
        expected = function(m, **kwargs)
        pairs = zip(y, expected, strict=True) if isinstance(y, tuple) else [(y, expected)]
        for mine, numpys in pairs:
            assert np.asarray(mine).tobytes() == np.asarray(numpys).tobytes(), function
    for kwargs in ({"hermitian": True}, {"hermitian": True, "compute_uv": False}):
        def loss(m):
            factors = np.linalg.svd(m, **kwargs)
            if not kwargs.get("compute_uv", True):
                return (factors ** 3).sum()
            u, singular, vt = factors
            return (singular ** 3).sum() + (u[:, :2] * vt.T[:, :2]).sum()
        mutad.check_grads(loss, s, symmetric=(0,), rtol=1e-5)
    with pytest.raises(mutad.MutadError, match="hermitian=True"):
        mutad.gradient(lambda m: np.linalg.svd(m, hermitian=True, compute_uv=False).sum(), a)


# ----------------------------------------------------------------------------------------------
# np.linalg.slogdet of an exactly singular matrix: NumPy's (0, -inf), without raising. The sign
# is piecewise constant (no derivative); log|det| has none there, refused where a gradient
# reaches it.

SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
REGULAR = np.array([[2.0, 0.5], [0.3, 1.5]])


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_slogdet_sign_of_a_singular_matrix(dtype):
    a = SINGULAR.astype(dtype)

    def f(a):
        sign, _ = np.linalg.slogdet(a)
        return np.abs(sign) + a.real.sum()

    before = a.tobytes()
    value, (g,) = mutad.value_and_gradient(f, a)
    assert a.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(f(a.copy())).tobytes()
    np.testing.assert_array_equal(g, np.ones((2, 2)))
    _, tangent = mutad.jvp(f, (a,), (np.ones_like(a),))
    assert tangent == 4.0
    replayed = mutad.grad(f, replay=True)
    np.testing.assert_array_equal(replayed(a), g)
    np.testing.assert_array_equal(replayed(REGULAR.astype(dtype)), g)
    assert a.tobytes() == before


def test_slogdet_of_a_stack_with_a_singular_matrix():
    """The regular matrix's log|det| differentiated beside the singular one's sign and value."""
    a = np.stack([REGULAR, SINGULAR])

    def f(a):
        sign, logdet = np.linalg.slogdet(a)
        return logdet[0] * sign[0] + np.abs(sign[1])

    before = a.tobytes()
    value, (g,) = mutad.value_and_gradient(f, a)
    assert a.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(f(a.copy())).tobytes()
    expected = np.zeros_like(a)
    expected[0] = np.linalg.inv(REGULAR).T
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    np.testing.assert_allclose(g[0], central(lambda m: f(np.stack([m, SINGULAR])), REGULAR),
                               rtol=1e-6)
    direction = np.stack([np.ones((2, 2)), np.eye(2)])
    _, tangent = mutad.jvp(f, (a,), (direction,))
    np.testing.assert_allclose(tangent, np.sum(expected * direction), rtol=1e-12)
    replayed = mutad.grad(f, replay=True)
    np.testing.assert_array_equal(replayed(a), g)
    assert a.tobytes() == before


def test_slogdet_log_of_a_singular_matrix_refused():
    def f(a):
        return np.linalg.slogdet(a)[1]

    before = SINGULAR.tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="singular matrix"):
        mutad.gradient(f, SINGULAR)
    assert SINGULAR.tobytes() == before
    # forward mode cannot know whether log|det| is read: its tangent there is undefined (NaN)
    value, tangent = mutad.jvp(f, (SINGULAR,), (np.ones((2, 2)),))
    assert value == -np.inf and np.isnan(tangent)
    # not moved, it does not change
    value, tangent = mutad.jvp(f, (SINGULAR,), (np.zeros((2, 2)),))
    assert value == -np.inf and tangent == 0.0


@pytest.mark.parametrize("decomposition", ["eigh", "svd"])
def test_hessian_of_one_eigenvector_is_silent(decomposition):
    """A loss of one eigenvector (singular vector) leaves the other columns' cotangents zero;
    the check that no repeated value is read took their norms' square roots, and the Hessian,
    which differentiates the reverse pass, then warned of a division by zero (an error under
    ``-W error``) for a scale no result depends on."""
    def f(a):
        if decomposition == "eigh":
            w, v = np.linalg.eigh(a + a.T)
            return w[-1] + np.sum(v[:, 0] ** 4)
        u, s, vt = np.linalg.svd(a)
        return s[0] + np.sum(u[:, 0] ** 4)

    a = np.random.default_rng(0).standard_normal((3, 3))
    before = a.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = mutad.hessian(f, a)
    assert a.tobytes() == before
    direction = np.random.default_rng(1).standard_normal((3, 3))
    along = central(lambda t: np.sum(mutad.gradient(f, a + t * direction)[0] * direction),
                    np.zeros(()), h=1e-5)
    np.testing.assert_allclose(np.einsum("ijkl,ij,kl->", h, direction, direction), along,
                               rtol=1e-5)


@pytest.mark.parametrize("decomposition", ["lstsq", "eigh"])
def test_hvp_through_a_constant_decomposition_at_repeated_values(decomposition):
    """A matrix made in the function from constants (a rank-deficient design matrix, one with
    a repeated eigenvalue) carries no derivative at any level: its decomposition needs no
    second derivative, and hvp (reverse over forward, which traces every array) refused it
    as if it did."""
    design = np.random.default_rng(0).standard_normal((5, 2))

    def f(b):
        if decomposition == "lstsq":
            a = np.column_stack([design, design[:, 0]])  # rank 2 of 3: a zero singular value
            x = np.linalg.lstsq(a, b, rcond=None)[0]
            return x @ x + np.sum(b ** 3)
        w, v = np.linalg.eigh(np.diag([1.0, 1.0, 2.0]) * design[0, 0])
        return np.sum((v.T @ b) ** 2 * w) + np.sum(b ** 3)

    b = np.random.default_rng(1).standard_normal(5 if decomposition == "lstsq" else 3)
    direction = np.ones_like(b)
    before = b.tobytes()
    if decomposition == "lstsq":
        p = np.linalg.pinv(np.column_stack([design, design[:, 0]]))
        expected = 2.0 * p.T @ (p @ direction) + 6.0 * b * direction
    else:
        expected = 2.0 * np.diag([1.0, 1.0, 2.0]) * design[0, 0] @ direction + 6.0 * b * direction
    np.testing.assert_allclose(mutad.hvp(f, (b,), (direction,)), expected, rtol=1e-10)
    assert b.tobytes() == before


def test_hessian_through_a_work_array_made_before_and_filled_with_constants():
    """A work array made before the call, which the function fills with constants (a matrix
    with a repeated eigenvalue), carries no derivative at either level of a Hessian (forward
    over reverse): the inner gradient took it for a traced one, ran eigh's pullback, and
    refused its repeated eigenvalues."""
    work = np.zeros((3, 3))

    def f(b):
        work[...] = np.diag([1.0, 1.0, 2.0])
        w, v = np.linalg.eigh(work)
        return np.sum((v.T @ b) ** 2 * w) + np.sum(b ** 3)

    b = np.array([0.5, -1.0, 2.0])
    before = b.tobytes()
    expected = np.diag([2.0, 2.0, 4.0]) + np.diag(6.0 * b)
    np.testing.assert_allclose(mutad.hessian(f, b), expected, rtol=1e-12)
    np.testing.assert_allclose(mutad.hvp(f, (b,), (np.ones(3),)), expected @ np.ones(3),
                               rtol=1e-12)
    assert b.tobytes() == before
    assert work.tobytes() == np.diag([1.0, 1.0, 2.0]).tobytes()
