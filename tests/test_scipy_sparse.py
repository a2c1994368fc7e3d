"""mutad.scipy.sparse: sparse matrices with traced values, their products and solves.

Each calling form is written as a user writes it (SciPy's names inside the differentiated
function) and checked with ``mutad.check_grads`` against finite differences: reverse mode
under both policies, forward mode, and second order (reverse over reverse, forward over
reverse, reverse over forward, forward over forward), the caller's arrays bit-for-bit after
each. Values while differentiating are SciPy's own, bit for bit; closed forms where there are.
"""

import collections
import functools
import warnings

import numpy as np
import pytest
import scipy.sparse
import scipy.linalg
import scipy.sparse.linalg
from scipy.sparse import csr_matrix, diags
from scipy.sparse.linalg import spsolve

import mutad
from cases import followed_as_scipy, replays_as_traced
from mutad.errors import MutadError, UnsupportedOperationError
from mutad.scipy import sparse as msparse

N = 6
B = np.linspace(1.0, 2.0, N)
RNG = np.random.default_rng(7)
K = 1.0 + RNG.random(N + 1)
U = RNG.standard_normal(N)
X2 = RNG.standard_normal((N, 2))
M = (scipy.sparse.random(N, N, density=0.4, random_state=3, format="csr")
     + scipy.sparse.eye(N, format="csr") * 4.0)


def stiffness(k, fmt=None):
    """The 1-D diffusion matrix with traced conductivities: SciPy's own ``diags``."""
    return scipy.sparse.diags([-k[1:-1], 2.0 + k[:-1] + k[1:], -k[1:-1]], [-1, 0, 1],
                              format=fmt)


def nonsymmetric(k, fmt="csr"):
    return stiffness(k, fmt) + scipy.sparse.diags([0.3 * k[1:-1]], [1], format=fmt)


def check(f, *args, order=2):
    """Every mode and policy at once: check_grads to second order (both modes), and reverse
    mode again under the checkpoint policy."""
    mutad.check_grads(f, *args, order=order)
    mutad.check_grads(f, *args, policy="checkpoint")


# ----------------------------------------------------------------------------------------------
# Products


PRODUCTS = {
    "A @ x, A constant": (lambda u: np.sum((M @ u) ** 2), U),
    "A.dot(x), A constant": (lambda u: np.sum(M.dot(u) * u), U),
    "x @ A, A constant": (lambda u: np.sum((u @ M) ** 2), U),
    "A * x (spmatrix), A constant": (lambda u: np.sum((M * u) ** 2), U),
    "A @ X (2-d), A constant": (lambda x: np.sum(np.sin(M @ x)), X2),
    "X.T @ A (2-d), A constant": (lambda x: np.sum(np.sin(x.T @ M)), X2),
    "csr_array @ x": (lambda u: np.sum((scipy.sparse.csr_array(M) @ u) ** 2), U),
    "diags(k) @ b": (lambda k: np.sum((stiffness(k) @ B) ** 2), K),
    "b @ diags(k)": (lambda k: np.sum((B @ stiffness(k)) ** 2), K),
    "diags(k).dot(X)": (lambda k: np.sum(np.cos(stiffness(k, "csr").dot(X2))), K),
    "A.T @ b": (lambda k: np.sum((stiffness(k, "csr").T @ B) ** 3), K),
    "A.transpose() @ b": (lambda k: np.sum((nonsymmetric(k).transpose() @ B) ** 3), K),
    "coo A @ b": (lambda k: np.sum((stiffness(k, "coo") @ B) ** 3), K),
    "csc A @ b": (lambda k: np.sum((stiffness(k, "csc") @ B) ** 3), K),
    "A * c": (lambda k: np.sum(((M * k[0]) @ B) ** 2), K),
    "c * A": (lambda k: np.sum(((k[0] * M) @ B) ** 2), K),
    "c * A traced": (lambda k: np.sum(((k[0] * stiffness(k)) @ B) ** 2), K),
    "A / c traced": (lambda k: np.sum(((stiffness(k, "csr") / k[2]) @ B) ** 2), K),
    "A + B": (lambda k: np.sum(((stiffness(k) + M) @ B) ** 2), K),
    "B - A": (lambda k: np.sum(((M - 2.0 * stiffness(k, "csc")) @ B) ** 2), K),
    "A.multiply(B)": (lambda k: np.sum((stiffness(k).multiply(M) @ B) ** 2), K),
    "B.multiply(A)": (lambda k: np.sum((M.multiply(stiffness(k, "csr")) @ B) ** 2), K),
    "A.multiply(dense)": (lambda k: np.sum((scipy.sparse.csr_array(stiffness(k))
                                            .multiply(k[:N]) @ B) ** 2), K),
    "A both traced, x traced": (lambda k: np.sum((stiffness(k) @ k[:N]) ** 2), K),
    "A.toarray()": (lambda k: np.sum(stiffness(k).toarray() ** 3), K),
    "-A": (lambda k: np.sum((-stiffness(k, "csr")) @ B * B), K),
    "A.sum()": (lambda k: stiffness(k, "csr").sum() ** 2, K),
    "A.sum(axis) (sparray)": (lambda k: np.sum(scipy.sparse.csr_array(stiffness(k)).sum(axis=0)
                                               ** 2 * B + scipy.sparse.dia_array(
                                                   stiffness(k)).sum(axis=1) ** 3), K),
    "A.diagonal(k)": (lambda k: np.sum(stiffness(k, "csc").diagonal() ** 2)
                      + np.sum(stiffness(k).diagonal(-1) ** 3), K),
    "A @ B, B constant": (lambda k: np.sum((stiffness(k) @ M) @ B), K),
    "Mᵀ A M (Galerkin)": (lambda k: np.sum(((M.T @ stiffness(k, "csc") @ M) @ B) ** 2), K),
    "Aᵀ A (both traced, dia)": (lambda k: np.sum(((stiffness(k).T @ stiffness(k, "dia"))
                                                  @ B) ** 2), K),
    "A * B (spmatrix product)": (lambda k: np.sum((stiffness(k, "csr") * M) @ B), K),
    # indexing: SciPy's selection of the stored values
    "A[1:-1, 1:-1]": (lambda k: np.sum((stiffness(k, "csr")[1:-1, 1:-1] @ B[1:-1]) ** 2), K),
    "A[free][:, free]": (lambda k: np.sum((stiffness(k, "csc")[FREE][:, FREE] @ B[FREE]) ** 3),
                         K),
    "A[mask]": (lambda k: np.sum((stiffness(k, "csr")[FREE_MASK] @ B) ** 2), K),
    "A[i, j]": (lambda k: stiffness(k, "csr")[1, 1] * stiffness(k, "csc")[1, 2]
                + stiffness(k, "csr")[0, N - 1], K),
    # the functions that move or multiply stored values
    "tril(A)": (lambda k: np.sum((scipy.sparse.tril(nonsymmetric(k)) @ B) ** 2), K),
    "triu(A, 1, csr)": (lambda k: np.sum((scipy.sparse.triu(nonsymmetric(k), 1, "csr") @ B)
                                         ** 2), K),
    "kron(I, A)": (lambda k: np.sum((scipy.sparse.kron(scipy.sparse.eye(2), stiffness(k))
                                     @ np.tile(B, 2)) ** 2), K),
    "kron(A, A²) csr": (lambda k: np.sum(scipy.sparse.kron(
        stiffness(k), stiffness(k * k), format="csr") @ np.ones(N * N)) ** 2, K),
    "kron(dense, A)": (lambda k: np.sum((scipy.sparse.kron(np.array([[1.0, 2.0], [0.0, 3.0]]),
                                                           stiffness(k)) @ np.tile(B, 2)) ** 2),
                       K),
    # a dense traced operand: SciPy's coo of it, its zeros (here one at k[2] = k[2]) left out
    "kron(I, dense traced)": (lambda k: np.sum((scipy.sparse.kron(scipy.sparse.eye(3), np.array(
        [[k[0], k[1]], [k[2] - K[2], 1.0]]), format="csr") @ np.arange(6.0)) ** 2), K),
    "kron(dense traced, A)": (lambda k: np.sum((scipy.sparse.kron(np.array(
        [[k[0], 0.0], [k[1], k[2]]]), stiffness(k)) @ np.tile(B, 2)) ** 2), K),
    # kronsum calls SciPy's own kron, which converted the traced values
    "kronsum(A, T), T of allocated ones": (lambda k: np.sum(scipy.sparse.kronsum(
        stiffness(k), scipy.sparse.diags([np.ones(2), -2.0 * np.ones(3), np.ones(2)],
                                         [-1, 0, 1]), format="csr") @ np.ones(3 * N)) ** 2, K),
    "kronsum(A, A) of arrays, csc": (lambda k: np.sum(scipy.sparse.kronsum(
        scipy.sparse.csr_array(stiffness(k[:4])), scipy.sparse.csr_array(nonsymmetric(k[:4])),
        format="csc") @ np.arange(9.0)) ** 2, K),
    "abs(A), A.power(3)": (lambda k: np.sum((abs(nonsymmetric(k)) @ B) ** 2)
                           + np.sum(nonsymmetric(k).power(3) @ B), K),
    "A ** 2 (matrix and array)": (lambda k: np.sum((stiffness(k, "csr") ** 2) @ B)
                                  + np.sum((scipy.sparse.csr_array(stiffness(k)) ** 2) @ B), K),
    "A.mean(), A.trace()": (lambda k: stiffness(k).mean() ** 2 + nonsymmetric(k).trace(1) ** 2,
                            K),
    "norm(A)": (lambda k: scipy.sparse.linalg.norm(nonsymmetric(k)) ** 2
                + scipy.sparse.linalg.norm(nonsymmetric(k), 1)
                + scipy.sparse.linalg.norm(stiffness(k, "dia"), np.inf), K),
}


FREE = [0, 2, 3]
FREE_MASK = np.array([True, False, True, True, False, True])


@pytest.mark.parametrize("name", PRODUCTS)
def test_products(name):
    f, x = PRODUCTS[name]
    check(f, x.copy())


CONSTRUCTORS = {
    "csr_matrix((data, indices, indptr))": lambda d: csr_matrix(
        (d, M.indices, M.indptr), shape=M.shape),
    "csr_array((data, indices, indptr))": lambda d: scipy.sparse.csr_array(
        (d, M.indices, M.indptr), shape=M.shape),
    "csc_matrix((data, indices, indptr))": lambda d: scipy.sparse.csc_matrix(
        (d, M.indices, M.indptr), shape=M.shape),
    "coo_matrix((data, (row, col)))": lambda d: scipy.sparse.coo_matrix(
        (d, M.nonzero()), shape=M.shape),
    "coo_array repeated positions, tocsr()": lambda d: scipy.sparse.coo_array(
        (np.concatenate([d, d[:3]]), (np.r_[M.nonzero()[0], M.nonzero()[0][:3]],
                                      np.r_[M.nonzero()[1], M.nonzero()[1][:3]])),
        shape=M.shape).tocsr(),
    "csr_matrix((data, (row, col))) repeated": lambda d: csr_matrix(
        (np.concatenate([d, d[:3]]), (np.r_[M.nonzero()[0], M.nonzero()[0][:3]],
                                      np.r_[M.nonzero()[1], M.nonzero()[1][:3]])),
        shape=M.shape),
    "csr_matrix(dense)": lambda d: csr_matrix(np.diag(d[:N]) + np.diag(d[1:N], 1)),
    "mutad.scipy.sparse.csr_array": lambda d: msparse.csr_array(
        (d, M.indices, M.indptr), shape=M.shape),
    "mutad.scipy.sparse.diags": lambda d: msparse.diags([d[:N], d[:N - 1]], [0, -1]),
    "spdiags": lambda d: scipy.sparse.spdiags(np.stack([d[:N], d[1:N + 1]]), [0, 1], N, N),
    "diags_array, csc": lambda d: scipy.sparse.diags_array([d[:N], 1.0], offsets=[0, 2],
                                                            format="csc"),
    "tocsc().tocoo().tocsr()": lambda d: stiffness(d[:N + 1]).tocsc().tocoo().tocsr(),
    "bmat of traced and constant blocks": lambda d: scipy.sparse.bmat(
        [[stiffness(d[:4], "csr"), scipy.sparse.eye(3)], [None, stiffness(d[3:7])]],
        format="csr"),
    "block_array of traced and constant blocks": lambda d: scipy.sparse.block_array(
        [[stiffness(d[:4], "csr"), scipy.sparse.eye_array(3)], [None, stiffness(d[3:7])]],
        format="csr"),
    "hstack, vstack, block_diag": lambda d: scipy.sparse.vstack([
        scipy.sparse.hstack([stiffness(d[:4]), scipy.sparse.csr_matrix((3, 3))]),
        scipy.sparse.block_diag([stiffness(d[4:8]), 2.0 * d[8] * scipy.sparse.eye(3)])]),
    # dense blocks, traced or not, and numbers, as SciPy converts them (a crash: no matrix
    # was found among the blocks)
    "block_diag of dense blocks and a number": lambda d: scipy.sparse.block_diag(
        [d[:4].reshape(2, 2), np.eye(N - 3), 2.0]),
    "bmat of dense blocks": lambda d: scipy.sparse.bmat(
        [[d[:4].reshape(2, 2), None], [None, np.eye(N - 2)]], format="csr"),
}


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_constructors(name):
    build = CONSTRUCTORS[name]
    data = 1.0 + RNG.random(M.nnz)

    def f(d):
        return np.sum((build(d) @ B) ** 2)

    check(f, data)


def test_values_are_scipys_own_while_differentiating():
    def f(k):
        a = stiffness(k)
        seen.append((a @ B, B @ a, a.T @ B, (a + M) @ B, spsolve(a.tocsc(), B)))
        return np.sum(seen[-1][0])

    seen = []
    mutad.gradient(f, K.copy())
    plain = stiffness(K)
    expected = (plain @ B, B @ plain, plain.T @ B, (plain + M) @ B, spsolve(plain.tocsc(), B))
    for ours, theirs in zip(seen[0], expected):
        assert np.asarray(ours.value if hasattr(ours, "value") else ours).tobytes() \
            == theirs.tobytes()


@pytest.mark.parametrize("stack", ["bmat", "block_array", "hstack", "vstack", "block_diag",
                                   "kron"])
def test_a_dense_matrix_s_zeros_stay_out_of_a_stacked_matrix(stack):
    """csr_matrix(np.diag(d)) stores no zero; stacked (bmat, hstack, ..., kron's products) its
    zeros were entries of the result's SciPy values: K.sum() summed them in (another rounding
    than SciPy's, 1 ulp), K.nnz counted them."""
    def stacked(d):
        blocks = [csr_matrix(np.diag(d[:9])), csr_matrix(np.ones((9, 9)) * d[9] + np.eye(9))]
        if stack == "kron":
            return scipy.sparse.kron(blocks[0][:3, :3], blocks[1], format="csr")
        if stack in ("bmat", "block_array"):
            return getattr(scipy.sparse, stack)([[blocks[0], None], [None, blocks[1]]])
        return getattr(scipy.sparse, stack)(blocks)

    def f(d):
        K = stacked(d)
        return K.sum() + K.nnz * d[0] + scipy.sparse.linalg.norm(K)

    rng = np.random.default_rng(10)
    for _ in range(5):
        d = rng.standard_normal(10)
        value, _ = mutad.value_and_gradient(f, d)
        assert value == f(d)
    check(f, d, order=1)


def test_closed_form_of_a_quadratic_form():
    # f(x) = xᵀ A x has gradient (A + Aᵀ) x; f(A's data) its cotangent x_i x_j on the pattern.
    g, = mutad.gradient(lambda u: u @ (M @ u), U.copy())
    assert np.allclose(g, (M + M.T) @ U, rtol=1e-13)
    gd, = mutad.gradient(lambda d: U @ (csr_matrix((d, M.indices, M.indptr), shape=M.shape)
                                        @ U), M.data.copy())
    rows = np.repeat(np.arange(N), np.diff(M.indptr))
    assert np.allclose(gd, U[rows] * U[M.indices], rtol=1e-13)


def test_traced_sparse_stays_sparse():
    def f(k):
        a = stiffness(k, "csr")
        for result in (a.T, a * 2.0, k[0] * a, a + M, a.multiply(M), a.tocoo()):
            assert isinstance(result, msparse.TracedSparse)
        assert (a + M).format == (stiffness(K, "csr") + M).format
        assert a.T.format == "csc" and a.nnz == stiffness(K, "csr").nnz
        return np.sum(a @ B)

    mutad.gradient(f, K.copy())


# ----------------------------------------------------------------------------------------------
# Solves


SOLVES = {
    "spsolve(A, b) in b": (lambda u: np.sum(spsolve(M.tocsc(), u) ** 2), U),
    "spsolve(A, X) 2-d": (lambda x: np.sum(np.sin(spsolve(M.tocsc(), x))), X2),
    "spsolve in A": (lambda k: np.sum(spsolve(stiffness(k, "csc"), B) ** 2), K),
    "spsolve csr, both": (lambda k: np.sum(spsolve(nonsymmetric(k), k[:N]) ** 2), K),
    "mutad.scipy.sparse.spsolve": (lambda k: np.sum(msparse.spsolve(
        nonsymmetric(k, "csc"), B) ** 2), K),
    "splu(A).solve(b)": (lambda k: np.sum(scipy.sparse.linalg.splu(
        nonsymmetric(k, "csc")).solve(B * k[0]) ** 2), K),
    "splu(A).solve(b, trans='T')": (lambda k: np.sum(scipy.sparse.linalg.splu(
        nonsymmetric(k, "csc")).solve(B, trans="T") ** 2), K),
    "spsolve(dense constant, b)": (lambda u: np.sum(spsolve(M.toarray(), u) ** 2), U),
    "factorized(constant)(b)": (lambda u: np.sum(scipy.sparse.linalg.factorized(
        M.tocsc())(u) ** 2), U),
    "splu(constant).solve(b)": (lambda u: np.sum(scipy.sparse.linalg.splu(
        M.tocsc()).solve(u) ** 2), U),
    "factorized(A)(b)": (lambda k: np.sum(scipy.sparse.linalg.factorized(
        nonsymmetric(k, "csc"))(B) ** 2), K),
    "spsolve_triangular lower": (lambda k: np.sum(scipy.sparse.linalg.spsolve_triangular(
        diags([-k[1:-1], 2.0 + k[1:]], [-1, 0], format="csr"), B * k[0], lower=True) ** 2), K),
    "spsolve_triangular upper unit": (lambda k: np.sum(scipy.sparse.linalg.spsolve_triangular(
        diags([2.0 + k[1:], -k[1:-1]], [0, 1], format="csc"), B, lower=False,
        unit_diagonal=True) ** 2), K),
}


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")  # SciPy's, of dense A
@pytest.mark.parametrize("name", SOLVES)
def test_direct_solves(name):
    f, x = SOLVES[name]
    check(f, x.copy())


def test_solve_closed_form():
    # d/db sum(A⁻¹ b) = A⁻ᵀ 1; d/dA = -(A⁻ᵀ 1) xᵀ on the pattern.
    a = nonsymmetric(K, "csc")
    g, = mutad.gradient(lambda d: np.sum(spsolve(scipy.sparse.csc_matrix(
        (d, a.indices, a.indptr), shape=a.shape), B)), a.data.copy())
    dense = a.toarray()
    lam = np.linalg.solve(dense.T, np.ones(N))
    x = np.linalg.solve(dense, B)
    cols = np.repeat(np.arange(N), np.diff(a.indptr))
    assert np.allclose(g, -lam[a.indices] * x[cols], rtol=1e-12)


ITERATIVE = ("cg", "gmres", "bicgstab", "minres", "bicg", "cgs", "qmr", "lgmres", "gcrotmk",
             "tfqmr")


@pytest.mark.parametrize("method", ITERATIVE)
def test_iterative_solves(method):
    solver = getattr(scipy.sparse.linalg, method)
    matrix = stiffness if method in ("cg", "minres") else nonsymmetric

    def f(k):
        x, info = solver(matrix(k, "csr"), B * k[0], rtol=1e-13)
        return np.sum(x ** 2)

    # The value meets rtol 1e-13, the derivative solves 1e-10: finite differences see both.
    mutad.check_grads(f, K.copy(), order=2, rtol=1e-6)
    mutad.check_grads(f, K.copy(), policy="checkpoint", rtol=1e-6)


def test_iterative_against_the_direct_gradient():
    def direct(k):
        return np.sum(spsolve(nonsymmetric(k, "csc"), B) ** 2)

    def iterative(k):
        x, _ = scipy.sparse.linalg.gmres(nonsymmetric(k, "csr"), B, rtol=1e-13)
        return np.sum(x ** 2)

    assert np.allclose(mutad.gradient(iterative, K.copy())[0],
                       mutad.gradient(direct, K.copy())[0], rtol=1e-8)


def test_iterative_with_a_linear_operator_and_a_warm_start():
    dense = nonsymmetric(K).toarray()
    operator = scipy.sparse.linalg.LinearOperator(
        (N, N), matvec=lambda v: dense @ v, rmatvec=lambda v: dense.T @ v)

    def f(u):
        x, _ = scipy.sparse.linalg.bicgstab(operator, u, x0=0.5 * u, rtol=1e-13)
        return np.sum(x ** 2)

    g, = mutad.gradient(f, U.copy())
    x = np.linalg.solve(dense, U)
    assert np.allclose(g, np.linalg.solve(dense.T, 2 * x), rtol=1e-8)


@pytest.mark.parametrize("method", (*ITERATIVE, "lsqr", "lsmr"))
@pytest.mark.parametrize("order", "CF")
def test_iterative_solves_of_a_dense_matrix_with_traced_values(method, order):
    """A dense matrix with traced values handed to an iterative method (cg(A, b) of a NumPy
    array, as SciPy takes it) was refused: it is differentiated entry by entry as a sparse
    matrix's stored values, its value SciPy's on the same dense array bit for bit, in both
    modes and replayed; a strided view is refused (SciPy's products may round otherwise)."""
    solver = getattr(scipy.sparse.linalg, method)
    m = np.random.default_rng(0).normal(size=(5, 5))
    a = np.array(m @ m.T + 5 * np.eye(5), order=order)
    b = np.random.default_rng(1).normal(size=5)
    symmetric = method in ("cg", "minres")

    def f(a, b):
        if symmetric:
            a = (a + a.T) / 2  # directions the method's assumption holds along
        if method in ("lsqr", "lsmr"):
            x = solver(a, b, atol=1e-14, btol=1e-14)[0]
        else:
            x, _ = solver(a, b, rtol=1e-13)
        return (x * np.arange(1.0, 6.0)).sum()

    before = a.tobytes(), b.tobytes()
    value, _ = mutad.value_and_grad(f, argnums=(0, 1))(a, b)
    assert np.asarray(value).tobytes() == np.asarray(f(a.copy(order=order), b.copy())).tobytes()
    mutad.check_grads(f, a, b, modes=("rev", "fwd"), rtol=1e-5)
    replays_as_traced(f, [(a, b), (a * 1.5, b[::-1].copy())], argnums=(0, 1))
    assert (a.tobytes(), b.tobytes()) == before
    with pytest.raises(UnsupportedOperationError, match="strided view"):
        mutad.gradient(lambda a: solver(a[::2, ::2], b[:3])[0].sum(),
                       np.array(np.kron(a, np.ones((2, 2)))[::1], order="C") + 10 * np.eye(10))


def test_the_krylov_solvers_settings_of_their_own():
    """qmr's left and right preconditioners M1, M2 (transposed and swapped for the adjoint
    solve), lgmres's outer_v and gcrotmk's CU (the caller's lists, which SciPy extends with
    the solve's subspace: the derivative's solves, of another system, leave them to the
    user's call), x0 and a callback: SciPy's values bit for bit, the caller's arrays and lists
    as SciPy leaves them, the gradient the direct solve's."""
    spla = scipy.sparse.linalg
    jacobi = 1.0 / nonsymmetric(K).diagonal()
    left = spla.LinearOperator((N, N), matvec=lambda v: v * np.sqrt(jacobi),
                               rmatvec=lambda v: v * np.sqrt(jacobi))
    right = spla.LinearOperator((N, N), matvec=lambda v: v * np.sqrt(jacobi) * 1.0001,
                                rmatvec=lambda v: v * np.sqrt(jacobi) * 1.0001)

    def solve(method, A, b, lists):
        common = dict(x0=0.5 * b, rtol=1e-13, atol=0.0, callback=lambda xk: lists[0].append(1))
        if method == "qmr":
            return spla.qmr(A, b, M1=left, M2=right, **common)[0]
        if method == "lgmres":
            return spla.lgmres(A, b, outer_v=lists[1], inner_m=4, **common)[0]
        return spla.gcrotmk(A, b, CU=lists[1], m=4, k=2, **common)[0]

    for method in ("qmr", "lgmres", "gcrotmk"):
        def f(k, lists):
            A = nonsymmetric(k, "csr")
            return np.sum(solve(method, A, B * k[0], lists) ** 2) \
                + np.sum(solve(method, A, B + k[1], lists))

        plain_lists, traced_lists = ([], []), ([], [])
        k = K.copy()
        value, (g,) = mutad.value_and_gradient(lambda k: f(k, traced_lists), k)
        assert value == f(K.copy(), plain_lists)
        assert k.tobytes() == K.tobytes()
        assert [len(v) for v in traced_lists] == [len(v) for v in plain_lists]
        direct, = mutad.gradient(lambda k: np.sum(spsolve(nonsymmetric(k, "csc"), B * k[0])
                                                  ** 2) + np.sum(spsolve(
                                                      nonsymmetric(k, "csc"), B + k[1])), k)
        assert np.allclose(g, direct, rtol=1e-8), method


def test_iterative_not_converged_is_an_error():
    def f(k):
        x, info = scipy.sparse.linalg.cg(stiffness(k, "csr"), B, maxiter=1)
        return np.sum(x)

    k = K.copy()
    with pytest.raises(UnsupportedOperationError, match="did not converge"):
        mutad.gradient(f, k)
    assert k.tobytes() == K.tobytes()
    # plain, SciPy's own answer: info > 0
    assert scipy.sparse.linalg.cg(stiffness(K, "csr"), B, maxiter=1)[1] > 0


def test_a_callback_reading_the_iterate_with_the_traced_matrix():
    """SciPy hands a callback its working iterate, which it goes on updating in place: a
    callback computing residuals with the traced matrix reads it for the derivative, which
    stopped SciPy's next update. The callback reads a copy: SciPy's values and residuals,
    the direct solve's gradient; a kept iterate holds SciPy's last numbers, as SciPy's array
    would; one kept and read with the traced matrix, or written into, is refused."""
    spla = scipy.sparse.linalg

    def f(k, residuals, kept=None, read=True):
        A = stiffness(k, "csr")

        def callback(xk):
            if kept is not None:
                kept.append(xk)
            if read:
                residuals.append(np.linalg.norm(A @ xk - B))
        x, _ = spla.cg(A, B, rtol=1e-13, atol=0.0, callback=callback)
        return np.sum(x ** 2) + (0.0 if kept is None else np.sum(kept[0]))

    plain, traced = [], []
    k = K.copy()
    value, (g,) = mutad.value_and_gradient(lambda k: f(k, traced), k)
    assert value == f(K.copy(), plain) and traced == plain and len(plain) > 2
    assert k.tobytes() == K.tobytes()
    direct, = mutad.gradient(lambda k: np.sum(spsolve(stiffness(k, "csc"), B) ** 2), k)
    np.testing.assert_allclose(g, direct, rtol=1e-8)
    value, _ = mutad.value_and_gradient(lambda k: f(k, [], [], read=False), k)
    assert value == f(K.copy(), [], [], read=False)  # the kept iterate: the solution's numbers
    with pytest.raises(UnsupportedOperationError, match="keeps the iterate"):
        mutad.gradient(lambda k: f(k, [], []), k)

    def writes(xk):
        xk[0] = 0.0
    with pytest.raises(UnsupportedOperationError, match="writes into the iterate"):
        mutad.gradient(lambda k: spla.cg(stiffness(k, "csr"), B, callback=writes)[0].sum(), k)
    assert k.tobytes() == K.tobytes()


# ----------------------------------------------------------------------------------------------
# eigsh: eigenpairs of a symmetric sparse matrix

NE = 14
KE = 1.0 + np.random.default_rng(11).random(NE + 1)
V0 = np.linspace(1.0, 2.0, NE)  # ARPACK's start: SciPy's own pairs, the same on every call


def chain(k, fmt="csr"):
    """A symmetric matrix with traced values and distinct eigenvalues."""
    return scipy.sparse.diags([-k[1:-1], 2.0 + k[:-1] + k[1:] + np.arange(NE), -k[1:-1]],
                              [-1, 0, 1], format=fmt)


def mass():
    """A constant positive definite mass matrix (built where it is called: inside a
    differentiated function, of followed constants)."""
    return scipy.sparse.diags([np.full(NE - 1, 1 / 6), np.full(NE, 2 / 3) + 0.05 * np.arange(NE),
                               np.full(NE - 1, 1 / 6)], [-1, 0, 1], format="csc")


def signed(v):
    """Eigenvectors of a fixed sign (ARPACK's signs are its own): the first entry positive."""
    return v * np.sign(v[0])


EIGSH = {
    "lowest eigenvalues, with eigenvectors": (
        lambda k: np.sum(scipy.sparse.linalg.eigsh(chain(k), 3, which="SA", v0=V0)[0]
                         * np.array([1.0, 2.0, 3.0]))),
    "largest eigenvalues alone": (
        lambda k: np.sum(scipy.sparse.linalg.eigsh(chain(k, "csc"), 2, v0=V0,
                                                   return_eigenvectors=False) ** 2)),
    "largest eigenvalues alone, of diags' DIA format": (
        lambda k: np.sum(scipy.sparse.linalg.eigsh(chain(k, "dia"), 2, v0=V0,
                                                   return_eigenvectors=False) ** 2)),
    "eigenvectors": (
        lambda k: np.sum(signed(scipy.sparse.linalg.eigsh(chain(k), 2, which="SA", v0=V0)[1])
                         ** 3)),
    "shift-invert, eigenpairs": (
        lambda k: np.sum(np.cos(scipy.sparse.linalg.eigsh(chain(k), 2, sigma=4.5, v0=V0)[0]))
        + np.sum(signed(scipy.sparse.linalg.eigsh(chain(k), 2, sigma=4.5, v0=V0)[1])[:5])),
    # the generalized problem A v = λ M v of a constant M (it was refused)
    "generalized, shift-invert, eigenpairs": (
        lambda k: (lambda w, v: np.sum(w ** 2) + np.sum(signed(v)[:6] ** 3))(
            *scipy.sparse.linalg.eigsh(chain(k), 2, M=mass(), sigma=4.5, v0=V0))),
    "generalized, lowest eigenvalues alone": (
        lambda k: np.sum(np.sqrt(scipy.sparse.linalg.eigsh(
            chain(k, "csc"), 3, M=mass().toarray(), which="SA", v0=V0,
            return_eigenvectors=False)))),
    # a mass matrix with traced values (it was refused: "traced settings (M)")
    "generalized, a traced M, shift-invert, eigenpairs": (
        lambda k: (lambda w, v: np.sum(w ** 2) + np.sum(signed(v)[:6] ** 3))(
            *scipy.sparse.linalg.eigsh(chain(k), 2, M=traced_mass(k), sigma=4.5, v0=V0))),
    "generalized, a traced dense M of a constant A, eigenvalues alone": (
        lambda k: np.sum(np.sqrt(scipy.sparse.linalg.eigsh(
            chain(KE, "csc"), 3, M=traced_mass(k).toarray(), which="SA", v0=V0,
            return_eigenvectors=False)))),
}


def traced_mass(k):
    """A positive definite mass matrix whose diagonal depends on the differentiated values."""
    return scipy.sparse.diags([np.full(NE - 1, 1 / 6), 2 / 3 + 0.1 * k[:NE] ** 2,
                               np.full(NE - 1, 1 / 6)], [-1, 0, 1], format="csr")


def _traced_mass_sparse(k):
    w, v = scipy.sparse.linalg.eigsh(chain(k), 2, M=traced_mass(k), sigma=4.5, v0=V0)
    return np.sum(w ** 2) + np.sum(signed(v)[:6] ** 3)


def _traced_mass_dense(k):
    w, v = scipy.linalg.eigh(chain(k).toarray(), traced_mass(k).toarray())
    order = np.sort(np.argsort(np.abs(w - 4.5))[:2])
    return np.sum(w[order] ** 2) + np.sum(signed(v[:, order])[:6] ** 3)


def test_eigsh_of_a_traced_mass_matrix_is_the_dense_problems():
    """SciPy's pairs, bit for bit, with the derivatives of scipy.linalg.eigh(A, M) of the
    dense matrices."""
    k = KE.copy()
    value, g = mutad.value_and_grad(_traced_mass_sparse)(k)
    assert value == _traced_mass_sparse(KE.copy())
    assert np.allclose(g, mutad.grad(_traced_mass_dense)(k), rtol=1e-8, atol=1e-12)
    assert k.tobytes() == KE.tobytes()


@pytest.mark.slow
def test_eigsh_of_a_traced_mass_matrix_has_the_dense_problems_hessian():
    k = KE.copy()
    assert np.allclose(mutad.hessian(_traced_mass_sparse, k),
                       mutad.hessian(_traced_mass_dense, k), rtol=1e-6, atol=1e-9)
    assert k.tobytes() == KE.tobytes()


def test_eigsh_from_arpacks_random_start():
    """Without v0 each call starts elsewhere: the eigenvalues are the same to rounding."""
    def f(k):
        return np.sum(scipy.sparse.linalg.eigsh(chain(k), 2, which="SA")[0] ** 2)

    mutad.check_grads(f, KE.copy(), modes=["rev", "fwd"], rtol=1e-5)


@pytest.mark.parametrize("name", EIGSH)
def test_eigsh(name):
    f = EIGSH[name]
    k = KE.copy()
    mutad.check_grads(f, k, modes=["rev", "fwd"], rtol=1e-5)
    mutad.check_grads(f, k, policy="checkpoint", rtol=1e-5)
    replays_as_traced(f, [(k,), (k * 1.1,)])
    assert k.tobytes() == KE.tobytes()


def test_eigsh_values_are_scipys_and_the_gradient_the_closed_form():
    a = chain(KE)
    w, v = scipy.sparse.linalg.eigsh(a, 3, which="SA", v0=V0)

    def f(data):
        m = scipy.sparse.csr_array((data, a.indices, a.indptr), shape=a.shape)
        return scipy.sparse.linalg.eigsh(m, 3, which="SA", v0=V0)[0][0]

    g, = mutad.gradient(f, a.data.copy())
    rows = np.repeat(np.arange(NE), np.diff(a.indptr))
    assert np.allclose(g, v[rows, 0] * v[a.indices, 0], rtol=1e-10, atol=1e-14)
    # the value while differentiating is SciPy's own, bit for bit
    assert mutad.value_and_grad(lambda d: scipy.sparse.linalg.eigsh(
        scipy.sparse.csr_array((d, a.indices, a.indptr), shape=a.shape), 3, which="SA",
        v0=V0)[0][1])(a.data.copy())[0].tobytes() == w[1].tobytes()


def test_eigsh_is_refused_where_it_has_no_derivative():
    # (Repeated eigenvalues are refused too, where ARPACK returns both copies; whether it does
    # depends on its rounding, which the order of the tests before changed: not tested here.)
    eigsh = scipy.sparse.linalg.eigsh
    with pytest.raises(UnsupportedOperationError, match="traced settings"):
        mutad.gradient(lambda k: np.sum(eigsh(chain(k), 2, v0=V0 * k[0])[0]), KE.copy())
    with pytest.raises(UnsupportedOperationError, match="Minv"):
        mutad.gradient(lambda k: np.sum(eigsh(chain(k), 2, M=scipy.sparse.eye(NE), sigma=1.0,
                                              Minv=scipy.sparse.eye(NE), v0=V0)[0]), KE.copy())
    with pytest.raises(UnsupportedOperationError, match="M-orthonormal"):
        mutad.gradient(lambda k: np.sum(eigsh(chain(k), 2, M=mass(), sigma=-1.0, v0=V0,
                                              mode="buckling")[0]), KE.copy())
    with pytest.raises(UnsupportedOperationError, match="not symmetric"):
        mutad.gradient(lambda k: np.sum(eigsh(chain(k) + scipy.sparse.diags(
            [k[1:-1]], [1], format="csr"), 2, v0=V0)[0]), KE.copy())



@pytest.mark.parametrize("name", EIGSH)
def test_eigsh_has_second_derivatives(name):
    # regression: a hessian of eigsh's pairs was refused (a rule of the first order); its
    # derivatives are written with followed calls, so every order differentiates them
    f = EIGSH[name]
    k = KE.copy()
    mutad.check_grads(f, k, order=2, rtol=1e-5)
    assert k.tobytes() == KE.tobytes()


def test_eigsh_hessian_is_that_of_the_dense_eigh():
    def sparse(k):
        w, v = scipy.sparse.linalg.eigsh(chain(k), 3, which="SA", v0=V0)
        return np.sum(w * np.array([1.0, 2.0, 3.0])) + np.sum(signed(v) ** 3)

    def dense(k):
        w, v = scipy.linalg.eigh(chain(k).toarray())
        return np.sum(w[:3] * np.array([1.0, 2.0, 3.0])) + np.sum(signed(v[:, :3]) ** 3)

    assert np.allclose(mutad.hessian(sparse, KE.copy()), mutad.hessian(dense, KE.copy()),
                       rtol=1e-6, atol=1e-8)


def test_eigsh_refuses_a_value_repeated_among_those_not_returned():
    # ARPACK returns one copy of the doubled 5 with k=1: its derivative is not defined (the
    # gradient of the largest eigenvalue would be one copy's outer product, chosen by rounding)
    d = np.array([1.0, 2.0, 5.0, 5.0, 3.0, 0.5, 0.2, 0.1])

    def top(x):
        a = scipy.sparse.diags(d * x)
        return np.sum(scipy.sparse.linalg.eigsh(a.tocsr(), 1, v0=np.ones(8))[0])

    for vectors in (True, False):
        def top_values(x, vectors=vectors):
            a = scipy.sparse.diags(d * x).tocsr()
            w = scipy.sparse.linalg.eigsh(a, 1, v0=np.ones(8), return_eigenvectors=vectors)
            return np.sum(w[0] if vectors else w)

        before = np.ones(8)
        with pytest.raises(UnsupportedOperationError, match="not simple"):
            mutad.gradient(top_values, before)
        assert np.array_equal(before, np.ones(8))
    x = np.linspace(1, 1.5, 8)  # distinct: the closed form, d[3] x[3] the largest
    g, = mutad.gradient(top, x)
    assert np.allclose(g, np.eye(8)[3] * 5.0)


# ----------------------------------------------------------------------------------------------
# eigs and svds: general eigenpairs, singular triplets

NG = 12
AG = np.random.default_rng(0).standard_normal((NG, NG))
MASKG = np.abs(AG) > 0.8
VG = np.ones(NG)


def general(a, fmt="csr"):
    """A nonsymmetric sparse matrix with traced values, a complex pair among its largest."""
    return scipy.sparse.csr_matrix(a * MASKG).asformat(fmt) + scipy.sparse.diags(np.arange(
        float(NG)))


WEIGHTS = np.cos(np.arange(NG * NG)).reshape(NG, NG)
EIGS_SVDS = {
    "eigs, eigenvalues (a complex pair)": (
        lambda a: np.sum(np.abs(scipy.sparse.linalg.eigs(general(a), 4, v0=VG)[0]))),
    "eigs, eigenvalues alone, csc": (
        lambda a: np.sum(scipy.sparse.linalg.eigs(general(a, "csc"), 3, v0=VG,
                                                  return_eigenvectors=False).imag ** 2)),
    "eigs, eigenvectors (phase-free)": (
        lambda a: np.sum(np.abs(scipy.sparse.linalg.eigs(general(a), 4, v0=VG)[1]) ** 2
                         * np.arange(NG)[:, None])),
    "svds, singular values alone": (
        lambda a: np.sum(scipy.sparse.linalg.svds(general(a), 3, v0=VG,
                                                  return_singular_vectors=False) ** 2)),
    "svds, low-rank product": (
        lambda a: (lambda u, s, vt: np.sum((u * s) @ vt * WEIGHTS))(
            *scipy.sparse.linalg.svds(general(a), 3, v0=VG))),
    "svds, signed singular vectors": (
        lambda a: (lambda u, s, vt: np.sum(u[:, 0] * np.sign(u[0, 0]) * np.arange(NG))
                   + np.sum(vt[1] * np.sign(vt[1, 0]) * np.arange(NG) ** 2))(
            *scipy.sparse.linalg.svds(general(a), 3, v0=VG))),
}


@pytest.mark.parametrize("name", EIGS_SVDS)
def test_eigs_svds(name):
    f = EIGS_SVDS[name]
    a = AG.copy()
    mutad.check_grads(f, a, modes=["rev", "fwd"], rtol=1e-5)
    mutad.check_grads(f, a, policy="checkpoint", rtol=1e-5)
    replays_as_traced(f, [(a,), (a * 1.1,), (a * 0.9,)])
    assert a.tobytes() == AG.tobytes()
    # the value is SciPy's, bit for bit (a sum over each output: in SciPy's memory order)
    assert mutad.value_and_grad(f)(a)[0].tobytes() == f(AG.copy()).tobytes()


def test_eigs_svds_values_are_scipys():
    def eigs_parts(a):
        w, v = scipy.sparse.linalg.eigs(general(a), 4, v0=VG)
        return np.sum(w.real) + np.sum(np.abs(v)) + np.sum(w.imag ** 2)

    def svds_parts(a):
        u, s, vt = scipy.sparse.linalg.svds(general(a), 3, v0=VG)
        return np.sum(u) + np.sum(s) + np.sum(vt)

    for f in (eigs_parts, svds_parts):
        assert mutad.value_and_grad(f)(AG.copy())[0].tobytes() == f(AG.copy()).tobytes()


def test_eigs_eigenvalue_gradient_is_the_closed_form():
    a = general(AG)
    w, v = scipy.sparse.linalg.eigs(a, 4, v0=VG)
    wl, vl = np.linalg.eig(a.toarray().T)
    i = int(np.argmax(w.imag))
    left = vl[:, np.argmin(np.abs(wl - w[i]))]
    left = left / (left @ v[:, i])

    def f(data):
        m = scipy.sparse.csr_array((data, a.indices, a.indptr), shape=a.shape)
        return scipy.sparse.linalg.eigs(m, 4, v0=VG)[0][i].imag

    g, = mutad.gradient(f, a.data.copy())
    rows = np.repeat(np.arange(NG), np.diff(a.indptr))
    assert np.allclose(g, np.imag(left[rows] * v[a.indices, i]), rtol=1e-8, atol=1e-12)


def test_eigs_svds_refuse_a_value_repeated_among_those_not_returned():
    d = np.array([1.0, 2.0, 5.0, 5.0, 3.0, 0.5, 0.2, 0.1])

    def eigs_top(x):
        a = scipy.sparse.diags(d * x[0]) + scipy.sparse.diags([1e-3 * x[1:]], [1])
        return np.sum(scipy.sparse.linalg.eigs(a.tocsr(), 1, v0=np.ones(8))[0].real)

    def svds_top(x):
        a = scipy.sparse.diags(d * x)
        return np.sum(scipy.sparse.linalg.svds(a.tocsr(), 1, v0=np.ones(8),
                                               return_singular_vectors=False))

    with pytest.raises(UnsupportedOperationError, match="not simple"):
        mutad.gradient(eigs_top, np.r_[1.0, np.zeros(7)])
    with pytest.raises(UnsupportedOperationError, match="not simple"):
        mutad.gradient(svds_top, np.ones(8))
    x = np.linspace(1, 1.5, 8)  # distinct: the closed form
    g, = mutad.gradient(svds_top, x)
    assert np.allclose(g, np.eye(8)[3] * 5.0)


def test_eigs_svds_are_refused_where_they_have_no_derivative():
    eigs, svds = scipy.sparse.linalg.eigs, scipy.sparse.linalg.svds
    with pytest.raises(UnsupportedOperationError, match="phases"):
        mutad.gradient(lambda a: np.sum(eigs(general(a), 4, v0=VG)[1].real), AG.copy())
    with pytest.raises(UnsupportedOperationError, match="generalized"):
        mutad.gradient(lambda a: np.sum(eigs(general(a), 2, M=scipy.sparse.eye(NG),
                                             v0=VG)[0].real), AG.copy())
    with pytest.raises(UnsupportedOperationError, match="repeated"):
        mutad.gradient(lambda a: np.sum(svds(scipy.sparse.diags(a[0, :4] * 0 + 2.0) * a[0, 0],
                                             2, v0=np.ones(4), return_singular_vectors=False)),
                       AG.copy())
    with pytest.raises(UnsupportedOperationError, match="return_singular_vectors"):
        mutad.gradient(lambda a: np.sum(svds(general(a), 2, v0=VG,
                                             return_singular_vectors="u")[0]), AG.copy())
    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hessian(lambda x: np.sum(svds(general(AG + x[0]), 2, v0=VG)[1]), np.array([0.1]))


@pytest.mark.parametrize("name", ("eigsh", "eigs", "svds", "svds of vectors"))
@pytest.mark.parametrize("order", "CF")
def test_eigenproblems_of_a_dense_matrix_with_traced_values(name, order):
    """eigsh, eigs and svds of a dense matrix with traced values (SciPy takes a NumPy array)
    were refused: each entry is a stored value, the value SciPy's on the same dense array
    bit for bit, the derivative checked in both modes and replayed, the caller's bytes kept."""
    m = np.random.default_rng(0).normal(size=(6, 6))
    v0 = np.ones(6)
    if name == "eigsh":
        a = np.array(m + m.T + 8 * np.eye(6), order=order)
        f = lambda a: np.sum(scipy.sparse.linalg.eigsh((a + a.T) / 2, 2, which="LA", v0=v0)[0])
    elif name == "eigs":
        a = np.array(m + 5 * np.eye(6), order=order)
        f = lambda a: np.sum(scipy.sparse.linalg.eigs(a, 2, v0=v0)[0].real)
    else:
        a = np.array(m[:, :5], order=order)
        f = (lambda a: np.sum(scipy.sparse.linalg.svds(a, 2, v0=v0[:5])[0][:, 0] ** 4)) \
            if name == "svds of vectors" else \
            (lambda a: np.sum(scipy.sparse.linalg.svds(a, 2, v0=v0[:5],
                                                       return_singular_vectors=False)))
    before = a.tobytes()
    value, _ = mutad.value_and_grad(f)(a)
    assert np.asarray(value).tobytes() == np.asarray(f(a.copy(order=order))).tobytes()
    mutad.check_grads(f, a, modes=("rev", "fwd"), rtol=1e-5)
    replays_as_traced(f, [(a,), (a * 1.25,)])
    assert a.tobytes() == before


# ----------------------------------------------------------------------------------------------
# expm_multiply: e^A B

KX = 0.5 + np.random.default_rng(5).random(N + 1)


def generator(k, fmt="csr", scale=1.0):
    """A nonsymmetric sparse generator with traced rates."""
    return scipy.sparse.diags([0.5 * k[1:-1] * scale, -(1.0 + k[:-1] + k[1:]) * scale,
                               0.3 * k[1:-1] * scale], [-1, 0, 1], format=fmt)


EXPM_MULTIPLY = {
    "in A and b": (lambda k: np.sum(scipy.sparse.linalg.expm_multiply(generator(k), B * k[0])
                                    ** 2), KX),
    "in A, a block of vectors, csc": (
        lambda k: np.sum(np.sin(scipy.sparse.linalg.expm_multiply(generator(k, "csc"), X2))),
        KX),
    "in A, a larger norm": (
        lambda k: np.sum(scipy.sparse.linalg.expm_multiply(generator(k, scale=8.0), B) ** 2
                         * np.arange(N)), KX),
    "in b alone": (lambda u: np.sum(scipy.sparse.linalg.expm_multiply(M, u) ** 3), U),
    # on SciPy's grid of times: e^{tA} B at each t, in A and B
    "on a grid of times": (lambda k: np.sum(scipy.sparse.linalg.expm_multiply(
        generator(k), B * k[0], start=0.0, stop=1.5, num=4) ** 2 * np.arange(N)), KX),
    "on a grid without its end, a block of vectors": (
        lambda k: np.sum(np.sin(scipy.sparse.linalg.expm_multiply(
            generator(k, "csc"), X2 * k[1], start=0.5, stop=1.0, num=3, endpoint=False))), KX),
    "on a grid, in b alone": (lambda u: np.sum(scipy.sparse.linalg.expm_multiply(
        M, u, start=-0.5, stop=0.5, num=5)[[0, 2, 4]] ** 3), U),
    # a dense A, an array (it was refused: "pass a scipy.sparse matrix")
    "a dense A, in A and b": (lambda k: np.sum(scipy.sparse.linalg.expm_multiply(
        generator(k).toarray(), B * k[0]) ** 2), KX),
    "a dense A, on a grid of times": (lambda k: np.sum(np.sin(scipy.sparse.linalg.expm_multiply(
        generator(k).toarray(), X2 * k[1], start=0.0, stop=1.0, num=3))), KX),
    "a dense constant A, in b": (lambda u: np.sum(scipy.sparse.linalg.expm_multiply(
        M.toarray(), u) ** 3), U),
    # times that depend on the differentiated values (were refused): e^{t A} B moves with t
    "on a grid of traced times, in A and b": (lambda k: np.sum(scipy.sparse.linalg.expm_multiply(
        generator(k), B * k[0], start=k[2] - 0.5, stop=1.5 * k[1], num=3) ** 2 * np.arange(N)),
        KX),
    "a dense A, on a grid of a traced end, without it": (
        lambda k: np.sum(np.sin(scipy.sparse.linalg.expm_multiply(
            generator(KX).toarray(), X2 * k[1], start=0.0, stop=k[0], num=3, endpoint=False))),
        KX),
}


@pytest.mark.parametrize("name", EXPM_MULTIPLY)
def test_expm_multiply(name):
    f, x = EXPM_MULTIPLY[name]
    x0 = x.copy()
    mutad.check_grads(f, x0, modes=["rev", "fwd"], rtol=1e-6)
    mutad.check_grads(f, x0, policy="checkpoint", rtol=1e-6)
    replays_as_traced(f, [(x0,), (x0 * 1.1,)])
    assert x0.tobytes() == x.tobytes()


def test_expm_multiply_is_scipys_and_the_gradient_the_dense_one():
    import scipy.linalg

    def sparse(k):
        return scipy.sparse.linalg.expm_multiply(generator(k), B)

    def dense(k):
        return scipy.linalg.expm(generator(k).toarray()) @ B

    def dense_array(k):  # SciPy's expm_multiply of the dense array: its own values
        return scipy.sparse.linalg.expm_multiply(generator(k).toarray(), B)

    value, g = mutad.value_and_grad(lambda k: sparse(k)[2])(KX.copy())
    assert value.tobytes() == scipy.sparse.linalg.expm_multiply(generator(KX), B)[2].tobytes()
    value, g_array = mutad.value_and_grad(lambda k: dense_array(k)[2])(KX.copy())
    assert value.tobytes() == dense_array(KX)[2].tobytes()
    assert np.allclose(g_array, g, rtol=1e-10)
    assert np.allclose(g, mutad.grad(lambda k: dense(k)[2])(KX.copy()), rtol=1e-10)
    _, t = mutad.jvp(lambda k: sparse(k), (KX.copy(),), (U[:1].repeat(N + 1),))
    _, t_dense = mutad.jvp(lambda k: dense(k), (KX.copy(),), (U[:1].repeat(N + 1),))
    assert np.allclose(t, t_dense, rtol=1e-10)


def test_expm_multiply_on_traced_times_is_scipys_grid():
    def grid(k):
        return scipy.sparse.linalg.expm_multiply(generator(k), B, start=0.0, stop=k[0], num=4)

    value, _ = mutad.pullback(grid, KX.copy())
    assert value.tobytes() == grid(KX).tobytes()
    # d/dt e^{tA} B = A e^{tA} B, at t = k[0] * j / 3
    _, tangent = mutad.jvp(lambda s: scipy.sparse.linalg.expm_multiply(
        generator(KX), B, start=0.0, stop=s, num=4), (KX[0],), (1.0,))
    dense = generator(KX).toarray()
    expected = [j / 3 * dense @ scipy.linalg.expm(KX[0] * j / 3 * dense) @ B for j in range(4)]
    assert np.allclose(tangent, expected, rtol=1e-8, atol=1e-12)


def test_expm_multiply_has_derivatives_of_every_order():
    # regression: its second derivatives were refused (a rule of the first order); they are
    # those of the dense exponential
    expm_multiply = scipy.sparse.linalg.expm_multiply

    def weighted(y):
        return np.sum(np.sin(y) * np.arange(y.size).reshape(y.shape))

    exact = mutad.hessian(lambda k: weighted(scipy.linalg.expm(generator(k).toarray()) @ B),
                          KX.copy())
    for matrix in (generator, lambda k: generator(k).toarray()):
        kept = KX.copy()
        h = mutad.hessian(lambda k: weighted(expm_multiply(matrix(k), B)), kept)
        assert np.allclose(h, exact, rtol=1e-8, atol=1e-10)
        assert kept.tobytes() == KX.tobytes()


@pytest.mark.slow
def test_expm_multiply_has_third_derivatives():
    expm_multiply = scipy.sparse.linalg.expm_multiply

    def weighted(y):
        return np.sum(np.sin(y) * np.arange(y.size).reshape(y.shape))

    third = mutad.jacfwd(lambda k: mutad.hessian(
        lambda k: weighted(expm_multiply(generator(k), B)), k))
    exact3 = mutad.jacfwd(lambda k: mutad.hessian(
        lambda k: weighted(scipy.linalg.expm(generator(k).toarray()) @ B), k))
    assert np.allclose(third(KX.copy()), exact3(KX.copy()), rtol=1e-7, atol=1e-9)


def test_expm_multiply_is_refused_where_it_has_no_rule():
    expm_multiply = scipy.sparse.linalg.expm_multiply
    operator = scipy.sparse.linalg.aslinearoperator(generator(KX))
    with pytest.raises(UnsupportedOperationError, match="LinearOperator"):
        mutad.gradient(lambda u: np.sum(expm_multiply(operator, u)), U.copy())


# ----------------------------------------------------------------------------------------------
# lsqr and lsmr: least squares

TALL = (scipy.sparse.random(9, N, density=0.4, random_state=5, format="csr")
        + scipy.sparse.eye(9, N, format="csr") * 2.0)
B9 = np.random.default_rng(9).standard_normal(9)


def tall(data):
    return scipy.sparse.csr_array((data, TALL.indices, TALL.indptr), shape=TALL.shape)


LEAST_SQUARES = {
    "lsqr": lambda data, b: np.sum(scipy.sparse.linalg.lsqr(
        tall(data), b, atol=1e-14, btol=1e-14)[0] ** 2 * np.arange(N)),
    "lsmr, damped": lambda data, b: np.sum(np.sin(scipy.sparse.linalg.lsmr(
        tall(data), b, damp=0.3, atol=1e-14, btol=1e-14)[0])),
    "lsqr, damped, a warm start": lambda data, b: np.sum(scipy.sparse.linalg.lsqr(
        tall(data), b, damp=0.2, atol=1e-14, btol=1e-14, x0=np.ones(N))[0] ** 3),
    "lsmr of a constant matrix": lambda data, b: np.sum(scipy.sparse.linalg.lsmr(
        TALL, b * data[0], atol=1e-14, btol=1e-14)[0] ** 2),
}


@pytest.mark.parametrize("name", LEAST_SQUARES)
def test_least_squares(name):
    f = LEAST_SQUARES[name]
    data, b = TALL.data.copy(), B9.copy()
    mutad.check_grads(f, data, b, modes=["rev", "fwd"], rtol=1e-6)
    mutad.check_grads(f, data, b, policy="checkpoint", rtol=1e-6)
    replays_as_traced(f, [(data, b), (data * 1.1, b - 0.5)], argnums=(0, 1))
    assert data.tobytes() == TALL.data.tobytes() and b.tobytes() == B9.tobytes()


@pytest.mark.parametrize("method", ["lsqr", "lsmr"])
def test_least_squares_is_scipys_and_the_gradient_the_normal_equations(method):
    solve = getattr(scipy.sparse.linalg, method)

    def f(data, b):
        return solve(tall(data), b, atol=1e-14, btol=1e-14)[0]

    def dense(a, b):
        return np.linalg.solve(a.T @ a, a.T @ b)

    value, (g, gb) = mutad.value_and_grad(lambda d, b: f(d, b)[1], argnums=(0, 1))(
        TALL.data.copy(), B9.copy())
    assert value.tobytes() == solve(TALL, B9, atol=1e-14, btol=1e-14)[0][1].tobytes()
    gd, gbd = mutad.gradient(lambda a, b: dense(a, b)[1], TALL.toarray(), B9.copy())
    rows = np.repeat(np.arange(9), np.diff(TALL.indptr))
    assert np.allclose(g, gd[rows, TALL.indices], rtol=1e-8, atol=1e-12)
    assert np.allclose(gb, gbd, rtol=1e-8, atol=1e-12)


def test_least_squares_is_refused_where_it_has_no_derivative():
    lsqr, lsmr = scipy.sparse.linalg.lsqr, scipy.sparse.linalg.lsmr
    with pytest.raises(UnsupportedOperationError, match="r1norm"):
        mutad.gradient(lambda d: lsqr(tall(d), B9)[3] * 1.0, TALL.data.copy())
    with pytest.raises(UnsupportedOperationError, match="normr"):
        mutad.gradient(lambda d: np.sum(lsmr(tall(d), B9)[3] + lsmr(tall(d), B9)[0]),
                       TALL.data.copy())
    with pytest.raises(UnsupportedOperationError, match="before it converged"):
        mutad.gradient(lambda d: np.sum(lsqr(tall(d), B9, iter_lim=1)[0]), TALL.data.copy())
    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hessian(lambda d: np.sum(lsmr(tall(d), B9)[0]), TALL.data.copy())


# ----------------------------------------------------------------------------------------------
# Programs: implicit heat solvers


def heat_matrices(k, dt=0.1):
    stiff = stiffness(k, "csc")
    eye = scipy.sparse.identity(N, format="csc")
    return eye + dt * stiff, eye - 0.5 * dt * stiff, eye + 0.5 * dt * stiff


def implicit_euler(k, u0):
    a, _, _ = heat_matrices(k)
    u = u0.copy()
    for _ in range(4):
        u = spsolve(a, u)
    return np.sum(u ** 2)


def crank_nicolson(k, u0):
    _, explicit, implicit = heat_matrices(k)
    u = u0.copy()
    for _ in range(4):
        u = spsolve(implicit, explicit @ u)
    return np.sum(u ** 2)


def factor_once(k, u0):
    _, explicit, implicit = heat_matrices(k)
    lu = scipy.sparse.linalg.splu(implicit)
    u = u0.copy()
    for _ in range(4):
        u = lu.solve(explicit @ u)
    return np.sum(u ** 2)


def in_place_interior(k, u0):
    # Dirichlet ends kept; the interior solved in place each step.
    a = scipy.sparse.identity(N - 2, format="csc") + 0.1 * stiffness(k[1:-1], "csc")
    u = u0.copy()
    for _ in range(3):
        rhs = u + 0.0
        rhs[1] += 0.1 * k[1] * u[0]
        rhs[-2] += 0.1 * k[-2] * u[-1]
        u[1:-1] = spsolve(a, rhs[1:-1])
    return np.sum(u ** 2)


@pytest.mark.parametrize("program", [implicit_euler, crank_nicolson, factor_once,
                                     in_place_interior], ids=lambda f: f.__name__)
def test_heat_programs(program):
    check(program, K.copy(), U.copy())


def test_matrix_built_outside_the_function():
    a = stiffness(K, "csc")

    def f(u0):
        u = u0.copy()
        for _ in range(3):
            u = spsolve(a, u) + a @ u
        return np.sum(u ** 2)

    check(f, U.copy())


# ----------------------------------------------------------------------------------------------
# Refusals


def refuses(f, *args, match):
    copies = [a.copy() for a in args]
    with pytest.raises(MutadError, match=match):
        mutad.gradient(f, *args)
    assert all(a.tobytes() == c.tobytes() for a, c in zip(args, copies))


def test_refusals():
    refuses(lambda k: np.sum(stiffness(k, "csr").sum(axis=0)[None]), K.copy(),
            match="np.matrix")
    with pytest.raises(np.linalg.LinAlgError, match="square"):  # NumPy's: a matrix power
        mutad.gradient(lambda k: np.sum(stiffness(k, "csr").sum(axis=0) ** 2), K.copy())
    refuses(lambda k: np.sum(stiffness(k, "dia").setdiag(k[:2]) or 0.0), K.copy(),
            match="dia")
    refuses(lambda k: np.sum(scipy.sparse.linalg.spsolve_triangular(
        stiffness(k, "csr"), B)), K.copy(), match="outside its triangle")
    refuses(lambda k: np.sum(np.asarray(stiffness(k, "csr"))), K.copy(), match="toarray")
    refuses(lambda k: np.sum(spsolve(np.diag(k[:N]), B)), K.copy(), match="dense matrix")

    def changed_after_splu(k):
        a = stiffness(k, "csc")
        lu = scipy.sparse.linalg.splu(a)
        a.data *= 2.0
        return np.sum(lu.solve(B))

    refuses(changed_after_splu, K.copy(), match="factorize it again")


def test_plain_calls_are_scipys():
    assert type(msparse.csr_matrix(M)) is scipy.sparse.csr_matrix
    assert isinstance(M, msparse.csr_matrix) and not isinstance(M, msparse.csc_matrix)
    assert msparse.spsolve(M.tocsc(), B).tobytes() == spsolve(M.tocsc(), B).tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert msparse.cg(M, B)[1] == scipy.sparse.linalg.cg(M, B)[1]


def test_a_zero_of_a_dense_matrix_has_its_derivative():
    # SciPy leaves zeros out of csr_matrix(dense); their derivative is still there.
    d = np.array([1.0, 0.0, 2.0, 3.0, 0.0, 1.0])
    g, = mutad.gradient(lambda d: np.sum(csr_matrix(np.diag(d)) @ B), d.copy())
    assert np.array_equal(g, B)


@pytest.mark.parametrize("program", [implicit_euler, factor_once], ids=lambda f: f.__name__)
def test_replayed_programs_refactorize(program):
    # A replay runs the solves again, not splu(A): the factors follow the values at hand.
    grad = mutad.grad(program, argnums=(0, 1), replay=True)
    other = K[::-1].copy()
    grad(K.copy(), U.copy())
    for k in (other, K):
        replayed = grad(k.copy(), U.copy())
        traced = mutad.gradient(program, k.copy(), U.copy())
        for ours, expected in zip(replayed, traced):
            assert np.allclose(ours, expected, rtol=1e-12)


def test_forward_mode_of_a_solve_in_the_matrix():
    def f(k):
        return spsolve(nonsymmetric(k, "csc"), B)

    tangent = RNG.standard_normal(N + 1)
    y, dy = mutad.jvp(f, (K.copy(),), (tangent,))
    a = nonsymmetric(K, "csc").toarray()
    da = nonsymmetric(tangent, "csc").toarray() - np.diag(2.0 * np.ones(N))  # linear part
    assert y.tobytes() == spsolve(nonsymmetric(K, "csc"), B).tobytes()
    assert np.allclose(dy, -np.linalg.solve(a, da @ np.linalg.solve(a, B)), rtol=1e-12)


def laplacian_operator(k, dtype=None):
    """A matrix-free operator whose matvec reads traced values from its closure: the 1-D
    Laplacian plus k[0], and k[1] times a nonsymmetric coupling, with its rmatvec."""
    coupling = nonsymmetric(K).toarray() * 0.1

    def apply(v, transposed=False):
        out = 2.0 * v
        out[1:] -= v[:-1]
        out[:-1] -= v[1:]
        out = out + k[0] * v
        return out + k[1] * ((coupling.T if transposed else coupling) @ v)

    return scipy.sparse.linalg.LinearOperator(
        (N, N), matvec=apply, rmatvec=lambda v: apply(v, True), dtype=dtype)


OPERATOR_SOLVES = {
    "cg": lambda k, b: scipy.sparse.linalg.cg(laplacian_operator(k * [1.0, 0.0]), b,
                                              rtol=1e-13, atol=0.0)[0],
    "minres": lambda k, b: scipy.sparse.linalg.minres(laplacian_operator(k * [1.0, 0.0]), b,
                                                      rtol=1e-13)[0],
    "gmres": lambda k, b: scipy.sparse.linalg.gmres(laplacian_operator(k), b, rtol=1e-13,
                                                    atol=0.0, restart=N)[0],
    "bicgstab": lambda k, b: scipy.sparse.linalg.bicgstab(laplacian_operator(k, float), b,
                                                          x0=0.5 * b, rtol=1e-13, atol=0.0)[0],
    **{method: functools.partial(lambda method, k, b: getattr(scipy.sparse.linalg, method)(
        laplacian_operator(k), b, rtol=1e-13, atol=0.0)[0], method)
       for method in ("bicg", "cgs", "qmr", "lgmres", "gcrotmk", "tfqmr")},
}


@pytest.mark.parametrize("method", OPERATOR_SOLVES)
def test_an_operator_whose_functions_read_traced_values(method):
    """A matrix-free operator with parameters in its closure: the solve differentiated in
    them and in b (reverse and forward mode), SciPy's values bit for bit, and replayed."""
    solve = OPERATOR_SOLVES[method]
    k = np.array([0.5, 0.3])

    def f(k, b):
        return np.sum(np.sin(solve(k, b)))

    mutad.check_grads(f, k, B.copy(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy's own, if any)
        assert mutad.value_and_grad(f, argnums=(0, 1))(k, B)[0] == f(k, B)
    replays_as_traced(f, [(k, B), (k * 1.5, B), (k, B * 2.0)], argnums=(0, 1))


@pytest.mark.parametrize("method", ["cg", "gmres"])
def test_an_operator_of_operators_whose_functions_read_traced_values(method):
    """Regression: SciPy's operators of operators (sums, products, adjoints, transposes,
    powers, scalings) of operators whose functions read traced values were taken for constant
    operators, and the solve stopped writing traced values into SciPy's plain work arrays."""
    spla = scipy.sparse.linalg

    def f(k, b):
        A = spla.aslinearoperator(nonsymmetric(K).toarray() * k[1] + 2.0 * np.eye(N))
        S = laplacian_operator(k * [1.0, 0.0])
        if method == "cg":
            system = A.T @ A + S
        else:
            system = S + A * 0.1 + (A.H @ A) ** 2 * 0.01
        return np.sum(np.sin(getattr(spla, method)(system, b, rtol=1e-13, atol=0.0)[0]))

    k = np.array([0.5, 0.3])
    mutad.check_grads(f, k, B.copy(), rtol=1e-6)
    mutad.check_jvp(f, k, B.copy())
    assert mutad.value_and_grad(f, argnums=(0, 1))(k, B)[0] == f(k, B)
    replays_as_traced(f, [(k, B), (k * 1.5, B), (k, B * 2.0)], argnums=(0, 1))


@pytest.mark.parametrize("method", ["gmres", "cg"])
def test_a_replayed_operator_solve_gives_plain_gradients(method):
    """Regression: an operator whose functions close over an argument and a constant matrix
    the function allocated, solved under replay=True, returned from the second call on a
    gradient that was a traced array of the recording (each such call is now traced)."""
    def f(k, b):
        coupling = np.eye(N, k=1) * 0.1

        def apply(v):
            return 2.0 * v + k[0] * v + k[1] * ((coupling + coupling.T) @ v)

        A = scipy.sparse.linalg.LinearOperator((N, N), matvec=apply, rmatvec=apply)
        solve = getattr(scipy.sparse.linalg, method)
        return np.sum(np.sin(solve(A, b, rtol=1e-13, atol=0.0)[0]))

    k = np.array([0.5, 0.3])
    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    for args in [(k, B), (k * 1.5, B), (k, B * 2.0), (k * 0.7, B)]:
        value, grads = replaying(*args)
        expected = mutad.value_and_grad(f, argnums=(0, 1))(*args)
        assert all(type(g) is np.ndarray for g in grads)
        assert value == expected[0] and all(np.array_equal(g, e)
                                            for g, e in zip(grads, expected[1]))


class _Convection(scipy.sparse.linalg.LinearOperator):
    """A user's subclass: its products read the traced values it holds (a speed, and an
    operator of them), as a closure's functions read theirs."""

    def __init__(self, k, inner=None):
        self.k, self.inner = k, inner
        super().__init__(dtype=float, shape=(N, N))

    def _matvec(self, x):
        y = (2.0 + self.k[0]) * x
        y[1:] -= (1.0 + self.k[1]) * x[:-1]
        y[:-1] -= x[1:]
        return y if self.inner is None else y + 0.1 * self.inner.matvec(x)

    def _rmatvec(self, x):
        y = (2.0 + self.k[0]) * x
        y[:-1] -= (1.0 + self.k[1]) * x[1:]
        y[1:] -= x[:-1]
        return y if self.inner is None else y + 0.1 * self.inner.rmatvec(x)


@pytest.mark.parametrize("method", ["gmres", "bicgstab", "cg"])
def test_an_operator_of_a_users_subclass_holding_traced_values_is_solved(method):
    """Regression: a LinearOperator subclass defining _matvec and _rmatvec on traced values it
    holds (and one holding such an operator) was refused."""
    def f(k, b):
        if method == "cg":  # symmetric (no convection): its transposed products its own
            A = _Convection(k * np.array([1.0, 0.0]))
        else:
            A = _Convection(k, inner=_Convection(0.5 * k) if method == "gmres" else None)
        x, info = getattr(scipy.sparse.linalg, method)(A, b, rtol=1e-13, atol=0.0)
        return np.sum(np.sin(x)) + info

    k = np.array([0.5, 0.3])
    mutad.check_grads(f, k, B.copy(), modes=["rev", "fwd"], rtol=1e-5)
    replays_as_traced(f, [(k, B), (k * 1.5, B), (k, B * 2.0)], argnums=(0, 1))


def test_linear_operator_products_of_traced_values_are_scipys():
    """matvec, rmatvec, matmat, @, * and x @ A of traced vectors, and of an operator whose
    functions read traced values (its dtype found by SciPy's probe of an int8 vector)."""
    def f(k, u):
        A = laplacian_operator(k)
        x = np.stack([u, 2.0 * u], axis=1)
        return (np.sum(A.matvec(u) ** 2) + np.sum(A.rmatvec(u) * u) + np.sum(A.matmat(x))
                + np.sum(np.cos(A @ u)) + np.sum(A * u) + np.sum(u @ A) + np.sum(A(u) * u))

    k = np.array([0.5, 0.3])
    mutad.check_grads(f, k, U.copy(), order=2)
    assert mutad.value_and_grad(f, argnums=(0, 1))(k, U)[0] == f(k, U)
    replays_as_traced(f, [(k, U), (k * 2.0, U), (k, U + 1.0)], argnums=(0, 1))


def test_an_operator_solve_with_traced_values_is_of_the_first_order():
    def f(k):
        return np.sum(OPERATOR_SOLVES["gmres"](k, B) ** 2)

    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hessian(f, np.array([0.5, 0.3]))


RECTANGULAR = np.vstack([np.eye(N), np.ones((1, N))]) + 0.1


# Operators scaled by traced numbers (SciPy's scaled operator takes plain ones), and SciPy's
# sums and products of operators whose pieces read traced values.
SCALED_OPERATORS = {
    "k * A, cg": lambda k: scipy.sparse.linalg.cg(
        k[0] * laplacian_operator(np.array([1.0, 0.0])), B, rtol=1e-13, atol=0.0)[0],
    "A * k + A, gmres": lambda k: scipy.sparse.linalg.gmres(
        laplacian_operator(np.array([1.0, 0.2])) * k[0] + laplacian_operator(k), B,
        rtol=1e-13, atol=0.0, restart=N)[0],
    "A / k @ A, bicgstab": lambda k: scipy.sparse.linalg.bicgstab(
        laplacian_operator(k) / k[1] @ scipy.sparse.linalg.aslinearoperator(np.eye(N) * 2.0),
        B, rtol=1e-13, atol=0.0)[0],
    "k * A, lsqr": lambda k: scipy.sparse.linalg.lsqr(
        k[0] * scipy.sparse.linalg.aslinearoperator(RECTANGULAR), np.arange(N + 1.0),
        atol=1e-14, btol=1e-14)[0],
}


@pytest.mark.parametrize("program", SCALED_OPERATORS)
def test_operators_scaled_by_traced_numbers(program):
    """``alpha * A``, ``A * alpha``, ``A / alpha`` of a traced alpha, and sums and products
    of pieces that read traced values, solved: SciPy's values bit for bit, gradients against
    finite differences."""
    solve = SCALED_OPERATORS[program]

    def f(k):
        return np.sum(np.sin(solve(k)))

    k = np.array([0.5, 0.3])
    mutad.check_grads(f, k, rtol=1e-6)
    assert mutad.value_and_grad(f)(k)[0] == f(k)


AS_OPERATORS = {
    "dense": lambda k: nonsymmetric(K).toarray() * k[1] + (2.0 + k[0]) * np.eye(N),
    "1-d": lambda k: k[:1] * 2.0,
    "sparse": lambda k: scipy.sparse.diags([np.full(N, 2.0 + k[0]), np.full(N - 1, k[1]),
                                            np.full(N - 1, -0.5)], [0, 1, -1], format="csr"),
}


@pytest.mark.parametrize("form", AS_OPERATORS)
def test_aslinearoperator_of_traced_matrices(form):
    """aslinearoperator of a traced dense or sparse matrix: its products and the solves of
    each method with it differentiated in the matrix's values and in b, SciPy's values (those
    of SciPy's MatrixLinearOperator of the plain matrix) bit for bit."""
    spla = scipy.sparse.linalg
    make = AS_OPERATORS[form]

    def f(k, u):
        matrix = make(k)
        A = spla.aslinearoperator(matrix)
        if form == "1-d":
            return np.sum(A.matvec(u[:1]) ** 2) + np.sum(A.rmatvec(u[:1]))
        x = np.stack([u, 2.0 * u], axis=1)
        total = (np.sum(A.matvec(u) ** 2) + np.sum(A.rmatvec(u) * u) + np.sum(A.matmat(x))
                 + np.sum(np.cos(A @ u)) + np.sum(A.H @ u) + np.sum(A.rmatmat(x)))
        for method in ("gmres", "bicgstab"):
            total = total + np.sum(np.sin(getattr(spla, method)(A, u, rtol=1e-13, atol=0.0)[0]))
        symmetric = spla.aslinearoperator(matrix.T @ matrix)
        return total + np.sum(spla.cg(symmetric, u, rtol=1e-13, atol=0.0)[0])

    k = np.array([0.5, 0.3])
    copies = k.copy(), U.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy's own, if any)
        assert mutad.value_and_grad(f, argnums=(0, 1))(*copies)[0] == f(k, U)
    mutad.check_grads(f, *copies, rtol=1e-6)
    mutad.check_jvp(f, *copies)
    assert copies[0].tobytes() == k.tobytes() and copies[1].tobytes() == U.tobytes()
    plain = scipy.sparse.linalg.aslinearoperator(make(k))
    assert type(plain).__name__ == "MatrixLinearOperator"  # outside: SciPy's own


@pytest.mark.parametrize("method", ["cg", "gmres", "bicgstab", "minres"])
def test_an_operator_solve_of_float32_values_is_scipys(method):
    """A float32 system through an operator of traced values: SciPy's solution in its dtype,
    bit for bit (cg, gmres and bicgstab solve in float32, minres in float64 from the float32
    b), where the solve was of b made float64 (another dtype, other numbers)."""
    spla = scipy.sparse.linalg
    dense = (nonsymmetric(K).toarray() + 4.0 * np.eye(N)).astype(np.float32)
    matrix = dense.T @ dense if method in ("cg", "minres") else dense
    b = B.astype(np.float32)

    def solve(A, b):
        return getattr(spla, method)(spla.aslinearoperator(A), b, rtol=1e-5)[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy's own, if any)
        expected = solve(matrix, b)
        value, _ = mutad.vjp(solve, matrix.copy(), b.copy())
        closure = mutad.vjp(lambda A, b: getattr(spla, method)(spla.LinearOperator(
            (N, N), matvec=lambda v: A @ v, rmatvec=lambda v: A.T @ v, dtype=A.dtype), b,
            rtol=1e-5)[0], matrix.copy(), b.copy())[0]
    for got in (value, closure):
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_a_float32_factorization_solves_a_traced_float32_right_hand_side():
    """splu and factorized of a constant float32 matrix, solving a traced float32 b: SciPy's
    float32 solution bit for bit and a float32 gradient (A⁻ᵀ ḡ to float32's rounding); the
    solve was given b made float64, which SuperLU refuses to cast (a TypeError)."""
    dense = nonsymmetric(K).toarray() + 4.0 * np.eye(N)
    matrix = scipy.sparse.csc_matrix(dense.astype(np.float32))
    b = B.astype(np.float32)
    for solve in (lambda b: scipy.sparse.linalg.splu(matrix).solve(b),
                  lambda b: scipy.sparse.linalg.splu(matrix).solve(b, "T"),
                  lambda b: scipy.sparse.linalg.factorized(matrix)(b)):
        expected = solve(b.copy())
        got, back = mutad.vjp(solve, b.copy())
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
        (g,) = back(np.ones(N, np.float32))
        assert g.dtype == np.float32
    (g,) = mutad.gradient(lambda b: np.sum(scipy.sparse.linalg.splu(matrix).solve(b)), b.copy())
    assert np.allclose(g, np.linalg.solve(dense.T, np.ones(N)), rtol=1e-5)


@pytest.mark.parametrize("method", ["lsqr", "lsmr"])
def test_least_squares_of_an_operator_whose_functions_read_traced_values(method):
    """lsqr and lsmr of aslinearoperator of a traced matrix, and of a LinearOperator whose
    functions read it: the gradient of the same solve of the sparse matrix itself."""
    solve = getattr(scipy.sparse.linalg, method)
    options = {"atol": 1e-14, "btol": 1e-14}

    def of(make):
        return lambda d: np.sum(solve(make(d), B9, **options)[0] ** 2)

    expected = mutad.gradient(of(tall), TALL.data.copy())[0]
    operator = of(lambda d: scipy.sparse.linalg.LinearOperator(
        TALL.shape, matvec=lambda v: tall(d) @ v, rmatvec=lambda v: tall(d).T @ v))
    np.testing.assert_allclose(mutad.gradient(operator, TALL.data.copy())[0], expected,
                               rtol=1e-7, atol=1e-9)
    wrapped = of(lambda d: scipy.sparse.linalg.aslinearoperator(tall(d).toarray()))
    np.testing.assert_allclose(mutad.gradient(wrapped, TALL.data.copy())[0], expected,
                               rtol=1e-7, atol=1e-9)


def test_a_linear_operator_without_rmatvec_transposes_by_the_pullback_of_its_matvec():
    dense = nonsymmetric(K).toarray()
    operator = scipy.sparse.linalg.LinearOperator((N, N), matvec=lambda v: dense @ v)
    transposable = scipy.sparse.linalg.LinearOperator((N, N), matvec=lambda v: dense @ v,
                                                      rmatvec=lambda v: dense.T @ v)

    def f(u, A=operator):
        return np.sum(scipy.sparse.linalg.gmres(A, u, rtol=1e-12)[0] ** 2)

    np.testing.assert_allclose(mutad.gradient(f, U.copy())[0],
                               mutad.gradient(lambda u: f(u, transposable), U.copy())[0],
                               rtol=1e-8)


def ilu_preconditioner(k, rmatvec=False):
    """spilu's incomplete factors of the nonsymmetric matrix (of plain ``k``: made before the
    differentiation) as a LinearOperator, as a user writes it: ``matvec=ilu.solve``, without
    rmatvec unless asked."""
    ilu = scipy.sparse.linalg.spilu(nonsymmetric(k, "csc"), drop_tol=1e-3)
    return scipy.sparse.linalg.LinearOperator(
        (N, N), matvec=ilu.solve, rmatvec=(lambda v: ilu.solve(v, "T")) if rmatvec else None)


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_a_preconditioner_without_rmatvec_leaves_the_adjoint_solve_unpreconditioned(method):
    """Regression: M = LinearOperator(matvec=ilu.solve) was refused for its missing rmatvec;
    the transposed solve of the derivative now runs without it (a preconditioner changes the
    speed of a solve, not its solution), and gives the preconditioned gradient."""
    solver = getattr(scipy.sparse.linalg, method)
    M_plain, M_transposable = ilu_preconditioner(K), ilu_preconditioner(K, rmatvec=True)

    def f(k, M=M_plain):
        x, info = solver(nonsymmetric(k, "csr"), B * k[0], M=M, rtol=1e-13)
        return np.sum(x ** 2)

    k = K.copy()
    mutad.check_grads(f, k, order=1, rtol=1e-6)
    assert k.tobytes() == K.tobytes()
    with_rmatvec = mutad.gradient(lambda k: f(k, M_transposable), K.copy())
    assert np.allclose(mutad.gradient(f, K.copy())[0], with_rmatvec[0], rtol=1e-8)
    value, _ = mutad.value_and_gradient(f, K.copy())
    assert value == f(K.copy())  # SciPy's own preconditioned solve, bit for bit


def test_a_preconditioner_without_rmatvec_in_an_operator_solve():
    """The same for A a LinearOperator whose functions read traced values."""
    dense, M = nonsymmetric(K).toarray(), ilu_preconditioner(K)

    def f(k):
        A = scipy.sparse.linalg.LinearOperator(
            (N, N), matvec=lambda v: dense @ v * k[0], rmatvec=lambda v: dense.T @ v * k[0])
        x, _ = scipy.sparse.linalg.gmres(A, B, M=M, rtol=1e-13)
        return np.sum(x ** 2)

    g, = mutad.gradient(f, K.copy())
    x = np.linalg.solve(dense * K[0], B)
    assert np.allclose(g[0], -2 * x @ x / K[0], rtol=1e-7) and not g[1:].any()


def test_an_unpreconditioned_adjoint_solve_that_fails_names_rmatvec():
    """Where the solve converges only with its preconditioner, the adjoint solve without it
    fails, and the error says to give M rmatvec."""
    exact = scipy.sparse.linalg.splu(nonsymmetric(K, "csc"))
    M = scipy.sparse.linalg.LinearOperator((N, N), matvec=exact.solve)

    def f(k):
        x, _ = scipy.sparse.linalg.gmres(nonsymmetric(k, "csr"), B, M=M, restart=1, maxiter=1)
        return np.sum(x ** 2)

    refuses(f, K.copy(), match="give the preconditioner M rmatvec")


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_spilu_of_traced_values_preconditions_the_iterative_solves(method):
    """Regression: spilu of a matrix with traced values was refused. Its incomplete factors
    of the values precondition the solve (and, by rmatvec, its transposed solve); the
    derivative is the solution's, which they do not change."""
    solver = getattr(scipy.sparse.linalg, method)

    def f(k, transposable=False):
        A = nonsymmetric(k, "csc")
        ilu = scipy.sparse.linalg.spilu(A, drop_tol=1e-2)
        M = scipy.sparse.linalg.LinearOperator(
            A.shape, matvec=ilu.solve,
            rmatvec=(lambda v: ilu.solve(v, "T")) if transposable else None)
        x, info = solver(A, B * k[0], M=M, rtol=1e-13)
        return np.sum(x ** 2)

    for transposable in (False, True):
        k = K.copy()
        value, g = mutad.value_and_gradient(lambda k: f(k, transposable), k)
        assert value == f(K.copy(), transposable)  # SciPy's own preconditioned solve
        assert k.tobytes() == K.tobytes()
        direct, = mutad.gradient(lambda k: np.sum(spsolve(nonsymmetric(k, "csc"), B * k[0])
                                                  ** 2), K.copy())
        assert np.allclose(g, direct, rtol=1e-8)
    mutad.check_grads(f, K.copy(), order=1, rtol=1e-6)
    replayed = mutad.value_and_grad(f, replay=True)  # factors of the recorded values: traced
    for scale in (1.0, 1.2):
        assert replayed(K * scale)[0] == f(K * scale)
    assert replayed.reasons


def test_splu_factors_of_traced_values_are_differentiated():
    """Regression: splu(A).L and .U of traced values were refused. They are SciPy's factors
    with the derivative of the factors of Pr A Pc with SciPy's pivots (their log-determinant,
    a product with them); perm_r and perm_c SciPy's; a replay, which would keep this call's
    pivoting, is refused; a second derivative too (the rule is of the first order)."""
    def f(k):
        lu = scipy.sparse.linalg.splu(nonsymmetric(k, "csc"))
        return (np.sum(np.log(np.abs(lu.U.diagonal()))) + (lu.L @ np.arange(1.0, N + 1)) @ B
                + lu.U.multiply(lu.U).sum() + lu.perm_r @ k[:N] + lu.solve(B).sum())

    before = K.tobytes()
    value, _ = mutad.value_and_gradient(f, K)
    assert value == f(K.copy()) and K.tobytes() == before
    mutad.check_grads(f, K.copy(), order=1)
    replayed = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.2):
        assert replayed(K * scale)[0] == f(K * scale)
    assert replayed.reasons
    with pytest.raises(UnsupportedOperationError, match="of the first order"):
        mutad.hessian(f, K.copy())
    lu = scipy.sparse.linalg.splu(nonsymmetric(K, "csc"))
    assert mutad.gradient(lambda b: np.sum(lu.U.diagonal()) * b.sum()
                          + lu.solve(b).sum(), B)[0].shape == B.shape


PLAIN_LU = scipy.sparse.linalg.splu(nonsymmetric(K, "csc"))
PLAIN_SOLVE = scipy.sparse.linalg.factorized(nonsymmetric(K, "csc"))


def implicit_steps(u0, k):
    """An implicit time stepper with its matrix factorized once, before (a module's lu): its
    compiled solve took plain arrays only (TypeError: argument 1 must be numpy.ndarray)."""
    u = u0.copy()
    for _ in range(3):
        u = PLAIN_LU.solve(u + k * np.sin(u))
        u = PLAIN_SOLVE(u)
    return (u ** 2).sum() + PLAIN_LU.solve(u, trans="T") @ u0 + PLAIN_LU.solve(X2).sum() * k


def test_a_factorization_made_before_the_differentiation_solves_traced_right_hand_sides():
    u0 = U.copy()
    before = u0.tobytes()
    value, _ = mutad.value_and_gradient(implicit_steps, u0, 0.3)
    assert value == implicit_steps(u0.copy(), 0.3)
    assert u0.tobytes() == before
    mutad.check_grads(implicit_steps, u0, 0.3, order=2)
    mutad.check_grads(implicit_steps, u0, 0.3, policy="checkpoint")
    replays_as_traced(implicit_steps, [(u0 * s, 0.3) for s in (1.0, 1.3, 0.6)], argnums=(0, 1))

    def closed_over():
        lu = scipy.sparse.linalg.splu(nonsymmetric(K, "csc"))
        return lambda b: lu.solve(b).sum()

    (g,) = mutad.gradient(closed_over(), B.copy())
    assert np.array_equal(g, PLAIN_LU.solve(np.ones(N), trans="T"))

    class Stepper:  # reached through another object's attribute: refused, saying what to do
        lu = PLAIN_LU

    stepper = Stepper()
    refuses(lambda b: stepper.lu.solve(b).sum(), B.copy(), match="compiled code .* not Traced")


PRECONDITIONED = {
    "M a sparse matrix of the values": lambda A, k: scipy.sparse.diags(1.0 / A.diagonal()),
    "M's matvec closing over the traced matrix": lambda A, k:
        scipy.sparse.linalg.LinearOperator(A.shape, matvec=lambda v: v / A.diagonal()),
    "M's matvec closing over a traced array": lambda A, k:
        scipy.sparse.linalg.LinearOperator(A.shape, matvec=lambda v, d=None: v / (2.0 + k[0])),
    "M a dense array of the values": lambda A, k: np.diag(1.0 / A.diagonal()),
}


@pytest.mark.parametrize("method", ["cg", "gmres", "bicgstab"])
@pytest.mark.parametrize("name", PRECONDITIONED)
def test_a_preconditioner_made_of_traced_values(method, name):
    """A Jacobi preconditioner of the matrix being differentiated (refused as a traced
    setting, or its matvec's traced result written into SciPy's work array): its numbers
    precondition the solve, which they do not change, nor its derivative; replays trace."""
    solver = getattr(scipy.sparse.linalg, method)

    def f(k):
        A = stiffness(k, "csr")
        x, info = solver(A, B * k[1], M=PRECONDITIONED[name](A, k), rtol=1e-13, atol=0.0)
        return np.sum(x ** 2)

    k = K.copy()
    value, g = mutad.value_and_gradient(f, k)
    assert value == f(K.copy())  # SciPy's own preconditioned solve
    assert k.tobytes() == K.tobytes()
    direct, = mutad.gradient(lambda k: np.sum(spsolve(stiffness(k, "csc"), B * k[1]) ** 2), k)
    assert np.allclose(g, direct, rtol=1e-8)
    mutad.check_grads(f, k, order=1, rtol=1e-6)
    replayed = replays_as_traced(f, [(K * s,) for s in (1.0, 1.2, 0.9)])
    assert replayed.reasons


def test_spilu_of_traced_values_is_refused_outside_a_preconditioner():
    def solved(k):
        return np.sum(scipy.sparse.linalg.spilu(nonsymmetric(k, "csc")).solve(B))

    def factor(k):
        return np.sum(scipy.sparse.linalg.spilu(nonsymmetric(k, "csc")).U.toarray())

    refuses(solved, K.copy(), match="outside a preconditioner")
    refuses(factor, K.copy(), match="incomplete factorization")


# ----------------------------------------------------------------------------------------------
# Sparse matrices as arguments and results


@pytest.mark.parametrize("kind", [scipy.sparse.csr_matrix, scipy.sparse.csc_array,
                                  scipy.sparse.coo_matrix, scipy.sparse.dia_array],
                         ids=lambda c: c.__name__)
def test_a_sparse_argument_has_a_sparse_gradient(kind):
    a = kind(nonsymmetric(K, "csr"))

    def f(a, b):
        return np.sum(spsolve(a.tocsc(), b) ** 2) + np.sum((a @ b) ** 2)

    check(f, a, B.copy())
    ga, gb = mutad.gradient(f, a, B.copy())
    assert type(ga) is kind and ga.shape == a.shape
    dense = a.toarray()
    x = np.linalg.solve(dense, B)
    lam = np.linalg.solve(dense.T, 2 * x)
    expected = -np.outer(lam, x) + 2 * np.outer(dense @ B, B)
    assert np.allclose(ga.toarray(), np.where(dense != 0, expected, 0.0), rtol=1e-10)


@pytest.mark.parametrize("kind", [scipy.sparse.lil_matrix, scipy.sparse.dok_array,
                                  scipy.sparse.bsr_matrix], ids=lambda c: c.__name__)
def test_a_sparse_argument_of_another_format_is_followed_as_csr(kind):
    """lil, dok and bsr: the function receives the CSR form, the gradient is a CSR matrix of its
    pattern (never a None a user could read as zero); integer ones get None, as integers do."""
    a = kind(nonsymmetric(K, "csr"))
    before = a.toarray().copy()

    def f(a, b):
        return np.sum((a @ b) ** 2)

    ga, gb = mutad.gradient(f, a, B.copy())
    dense = a.toarray()
    assert scipy.sparse.issparse(ga) and ga.format == "csr"
    assert np.allclose(ga.toarray(), np.where(dense != 0, 2 * np.outer(dense @ B, B), 0.0))
    assert np.array_equal(a.toarray(), before)
    assert mutad.gradient(f, kind(np.eye(N, dtype=int)), B.copy())[0] is None


def test_in_place_writes_into_a_sparse_arguments_values_are_undone():
    a = csr_matrix(M)
    before = a.data.tobytes()

    def f(a, u):
        a.data *= u[0]  # the argument's stored values, written in place
        return np.sum((a @ u) ** 2)

    check(f, a, U.copy())
    mutad.gradient(f, a, U.copy())
    assert a.data.tobytes() == before


def test_a_sparse_result():
    def f(k):
        return stiffness(k, "csr").T * 2.0

    y, back = mutad.pullback(f, K.copy())
    assert type(y) is scipy.sparse.csc_matrix
    assert np.array_equal(y.toarray(), (stiffness(K, "csr").T * 2.0).toarray())
    mutad.check_grads(f, K.copy(), order=2)


def test_a_transpose_shares_the_stored_values_as_scipys():
    def f(k):
        a = stiffness(k, "csr")
        t = a.T
        a.data *= 2.0  # seen through a.T, as in SciPy, whose csr transpose shares a.data
        return np.sum(t @ B)

    check(f, K.copy())
    plain = stiffness(K, "csr")
    t = plain.T
    plain.data *= 2.0
    assert mutad.value_and_gradient(f, K.copy())[0] == np.sum(t @ B)


def test_the_solves_of_one_splu_share_their_solver_and_keep_no_right_hand_side():
    """Each solve of one factorization once kept a copy of the matrix's values (its own
    solver's key of them) and its pullback the right-hand side: five state vectors a step in
    an implicit time stepper, where the derivative needs one, the solution."""
    def stepper(k, u0):
        lu = scipy.sparse.linalg.splu(
            scipy.sparse.diags([-k[1:], 2 + k, -k[1:]], [-1, 0, 1], format="csc"))
        u = u0.copy()
        for _ in range(3):
            u[:] = lu.solve(u)
        return (u * u).sum()

    solves = [r for r in mutad.make_tape(stepper, np.full(600, 0.5), np.ones(600)).records
              if "solve" in str(r.primitive)]
    assert len(solves) == 3
    assert len({id(r.settings["solver"].shared) for r in solves}) == 1
    for record in solves:  # the pullback holds the matrix's values and the solution alone
        held = [c.cell_contents for c in record.state[0].__closure__]
        assert sum(type(v) is np.ndarray for v in held) == 2


def test_a_matrix_stores_the_array_it_was_built_from_as_scipys_does():
    """SciPy keeps the values array it need not copy: writes into it show in the matrix, and
    writes through A.data in the array (a solve in a loop that refills the values)."""
    n = 5

    def refilled(k):
        values = np.zeros(n)
        A = scipy.sparse.csr_matrix((values, np.arange(n), np.arange(n + 1)), shape=(n, n))
        u = np.ones(n)
        for _ in range(3):
            values[:] = k + u ** 2
            u = scipy.sparse.linalg.spsolve(A.tocsc(), np.ones(n))
        return u.sum()

    def through_data(k):
        kk = k * 1.0
        A = scipy.sparse.dia_matrix((kk[None, :], [0]), shape=(n, n))
        A.data *= 2.0
        return (A @ np.ones(n)).sum() + (kk * kk).sum()

    k = np.linspace(1.0, 2.0, n)
    for f in (refilled, through_data):
        before = k.tobytes()
        assert mutad.value_and_grad(f)(k)[0] == f(k)
        mutad.check_grads(f, k)
        assert k.tobytes() == before


def _assembled(k, kind):
    """A 1-d finite element stiffness matrix assembled entry by entry, a Dirichlet condition
    set on its first row, and a solve."""
    n = k.size - 1
    A = kind((n, n))
    for e in range(n):
        for a in range(2):
            for b in range(2):
                i, j = e + a - 1, e + b - 1
                if i >= 0 and j >= 0:
                    A[i, j] += k[e] * (1.0 if a == b else -1.0)
    A[0, :] = 0.0
    A[0, 0] = 1.0
    A[[1, 2], [1, 2]] = [2.0, 6.0]
    A[1, 2] = A[1, 1] * 2.0
    b = np.ones(n)
    b[0] = 0.0
    return (scipy.sparse.linalg.spsolve(A.tocsr(), b).sum() + (A @ b).sum()
            + A.tocoo().sum())


@pytest.mark.parametrize("kind", [scipy.sparse.lil_matrix, scipy.sparse.lil_array,
                                  scipy.sparse.dok_matrix, scipy.sparse.dok_array],
                         ids=lambda c: c.__name__)
def test_a_matrix_assembled_entry_by_entry_with_traced_values(kind):
    """lil and dok matrices take traced entries one at a time (A[i, j] += ...), a plain row
    written over them, and convert to the traced matrix of all their entries."""
    k = np.linspace(1.0, 2.0, 6)
    before = k.tobytes()
    def f(k):  # (the class in a closure cell: the stand-in while a differentiation runs)
        return _assembled(k, kind)

    assert mutad.value_and_grad(f)(k)[0] == f(k)
    check(f, k, order=1)
    mutad.check_jvp(f, k)
    replays_as_traced(f, [(k * scale,) for scale in (1.0, 1.3, 0.7)])
    assert k.tobytes() == before


@pytest.mark.parametrize("kind", [scipy.sparse.lil_matrix, scipy.sparse.lil_array,
                                  scipy.sparse.dok_matrix, scipy.sparse.dok_array],
                         ids=lambda c: c.__name__)
def test_an_assembled_matrix_counts_no_traced_entry_written_a_zero(kind):
    """SciPy's lil and dok matrices store no entry written a zero: their nnz, a dok matrix's
    len and their conversions' nnz leave out a traced entry that is zero (mutad keeps it, for
    its derivative); they counted it, a wrong number; count_nonzero is SciPy's too."""
    def assemble(k):
        A = kind((3, 3))
        A[0, 1] = k[0]
        A[1, 2] = k[1]
        A[2, 0] = k[2] * 2.0
        A[0, 0] = 3.0
        return A

    counts = [lambda A: A.nnz, lambda A: A.tocsr().nnz, lambda A: A.tocoo().nnz]
    if assemble(np.ones(3)).format == "dok":
        counts.append(len)
    k = np.array([0.0, 1.5, -0.0])
    seen = []

    def f(k):
        A = assemble(k)
        seen.append([count(A) for count in counts])
        return np.sum(A @ np.arange(1.0, 4.0)) + np.sum(A.tocsr() @ k)

    (g,) = mutad.gradient(f, k.copy())
    assert seen == [[count(assemble(k.copy())) for count in counts]] == [[2] * len(counts)]
    assert np.array_equal(g, [2.0 + 3.0 + 1.5, 3.0 + 0.0, 2.0 + 1.5])  # the zeros' too
    (g,) = mutad.gradient(lambda k: assemble(k).count_nonzero() * k[1], k.copy())
    assert np.array_equal(g, [0.0, assemble(k.copy()).count_nonzero(), 0.0])  # SciPy's count, 2


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_eliminate_zeros_leaves_the_zeros_out_of_what_scipy_tells(fmt):
    """A.eliminate_zeros() of a matrix storing a traced zero: SciPy's nnz and find leave it out
    (it did nothing: nnz counted it, a wrong number), while its derivative stays; a zero
    written afterwards is stored, as SciPy stores it."""
    def build(k):
        return scipy.sparse.coo_matrix((k - 1.0, ([0, 1, 2, 0], [0, 1, 2, 2])),
                                       shape=(3, 3)).asformat(fmt)

    def counts(k):
        A = build(k)
        A.eliminate_zeros()
        found = scipy.sparse.find(A)[2].shape[0]
        if fmt != "coo":
            A[1, 1] = 0.0
        return A.nnz, found

    def f(k):
        A = build(k)
        A.eliminate_zeros()
        return np.sum(A @ k[:3]) + A.sum()

    k = np.array([1.0, 2.0, -1.0, 0.5])
    seen = []
    mutad.gradient(lambda k: (seen.append(counts(k)), k.sum())[1], k.copy())
    assert seen == [counts(k.copy())] == [(3, 3)]
    check(f, k.copy(), order=1)


@pytest.mark.parametrize("kind", ["lil_matrix", "dok_matrix", "lil_array"])
def test_regions_of_an_assembled_matrix_written_with_traced_values(kind):
    """A[i, i - 1:i + 2] = [-k, 2 * k, -k], a row, a column, paired lists, a block, a number
    broadcast: NumPy's assignment, entry by entry (a traced zero not stored, as SciPy's)."""
    def assemble(k):
        n = len(k)
        A = getattr(scipy.sparse, kind)((n, n))
        for i in range(n):
            lo, hi = max(0, i - 1), min(n, i + 2)
            A[i, lo:hi] = [-k[i], 2.0 + k[i] ** 2, -k[i]][lo - i + 1:hi - i + 1]
        A[0, :] = k * 0.5                              # a whole row
        A[1:3, 2] = k[:2] * 3.0                        # a column, an integer one
        A[[3, 4], [0, 1]] = k[2:4]                     # paired lists
        A[3:5, 3:5] = np.outer(k[:2], k[:2]) + 4.0 * np.eye(2)  # a block
        A[2, :2] = k[0]                                # a number broadcast
        A[4, 4] = 0.0 * k[0]                           # a zero SciPy does not store
        return A

    def f(k):
        A = assemble(k).tocsc()
        return spsolve(A, np.arange(1.0, len(k) + 1)).sum() + A.nnz * k[1]

    k = K[:5].copy()
    before = k.tobytes()
    value, _ = mutad.value_and_gradient(f, k)
    assert value == f(k.copy())
    assert k.tobytes() == before
    check(f, k, order=1)
    replays_as_traced(f, [(k * s,) for s in (1.0, 1.5, 0.7)])


@pytest.mark.parametrize("kind", ["lil_matrix", "dok_matrix"])
def test_regions_of_an_assembled_matrix_with_traced_entries_are_read(kind):
    """A[1, :], A[:, [0, 2]], A[1:3, 1:] of a matrix holding traced entries: the region's
    values (they were refused), written back scaled (A[1, :] = A[1, :] * k, a sparse value)."""
    def f(k):
        A = getattr(scipy.sparse, kind)(np.eye(4) * 3.0)
        A[0, 1:3] = k[:2]
        A[1, 0] = k[2]
        row = A[1, :]
        A[1, :] = row * (1.0 + k[0])
        A[2, :] = A[0, :].toarray() * k[3] + A[2, :].toarray()
        block = A[0:2, 1:]
        return (spsolve(A.tocsc(), np.arange(1.0, 5.0)).sum() + block.sum()
                + (A[:, [0, 2]] @ np.ones(2)).sum())

    _checked_in_every_mode(f, K[:4].copy())


def test_a_row_of_an_assembled_sparse_array_is_one_dimensional():
    """SciPy's row of a lil array is a 1-d sparse array (it was refused)."""
    def f(k):
        A = scipy.sparse.lil_array(np.eye(3))
        A[0, 1] = k[0]
        return (A[0, :] * k[1]).sum() + A[0, :] @ k[:3]

    _checked_in_every_mode(f, K[:4].copy())


def test_an_assembled_matrix_refuses_what_would_read_its_placeholders():
    def setdiag_after(k):  # setdiag overwrites the traced entry on the diagonal, not the other
        A = scipy.sparse.lil_matrix((3, 3))
        A[0, 0] = k[0]
        A[2, 0] = k[1]
        A.setdiag([1.0, 2.0])
        return A.tocsr().sum()

    value, (g,) = mutad.value_and_gradient(setdiag_after, K.copy())
    assert value == 3.0 + K[1] and np.array_equal(g, np.eye(1, N + 1, 1)[0])

    def region_of_traced(k):
        A = scipy.sparse.lil_matrix((3, 3))
        A[0, :] = k[:3]
        return A.tocsr().sum()

    assert mutad.value_and_gradient(region_of_traced, K.copy())[0] == region_of_traced(K)

    def read_as_array(k):
        A = scipy.sparse.lil_matrix((3, 3))
        A[0, np.array([[0, 1]])] = k[:2]  # an index of another kind
        return A.tocsr().sum()

    refuses(read_as_array, K.copy(), match="this index")

    def plain(x):  # without traced entries: SciPy's own matrix
        A = scipy.sparse.lil_matrix((3, 3))
        A[1, :] = 3.0
        A.setdiag([1.0, 2.0, 3.0])
        assert isinstance(A, scipy.sparse.lil_matrix)
        return (A.tocsr() @ x).sum() + A[1, 2]

    assert mutad.value_and_grad(plain)(np.ones(3))[0] == plain(np.ones(3))


def _first_sum(A):
    return (A @ np.ones(3)).sum()


def _refilled(make):
    """f(d): a matrix made of v = d * 1, then v[0] written: SciPy's matrix sees the write
    where it shares v."""
    def f(d):
        v = d * 1.0
        A = make(v)
        v[0] = 100.0
        return _first_sum(A)
    return f


def _converted_then_zeroed(convert):
    """f(d): B = convert(A), B's stored values zeroed: A sees it where SciPy shares them."""
    def f(d):
        A = scipy.sparse.diags(d, format="csr")
        B = convert(A)
        B.data[:] = 0.0
        return _first_sum(A)
    return f


@pytest.mark.parametrize("f", [
    _refilled(lambda v: csr_matrix((v, (np.arange(3), np.arange(3))))),          # via coo
    _refilled(lambda v: csr_matrix((v, np.arange(3), np.arange(4)), copy=True)),
    _refilled(lambda v: csr_matrix((v, np.arange(3), np.arange(4)))),             # shared
    _converted_then_zeroed(lambda A: A.tocsc()),
    _converted_then_zeroed(lambda A: A.tocoo().tocsr()),
    _converted_then_zeroed(lambda A: csr_matrix(A, copy=True)),
    _converted_then_zeroed(lambda A: A.T),                                         # shared
    _converted_then_zeroed(lambda A: A[:, :]),
], ids=["coo-built", "copy", "shared", "tocsc", "through-coo", "copied", "transpose",
        "indexed"])
def test_what_scipy_shares_and_what_it_copies(f):
    d = np.array([1.0, 2.0, 3.0])
    value, (g,) = mutad.value_and_grad(f, argnums=(0,))(d)
    assert value == f(d)
    mutad.check_grads(f, d)


def _dirichlet(k, fmt, through_lil):
    """A stiffness matrix of traced values with a boundary condition on its first row (SciPy
    stores the zeros it writes: the pattern changes), then a solve and a product."""
    A = scipy.sparse.diags([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], [-1, 0, 1], format=fmt)
    if through_lil:
        A = A.tolil()
    A[0, :] = 0.0
    A[0, 0] = 1.0
    A[-1, -1] = A[-1, -1] * 2.0
    if through_lil:
        A = A.tocsr()
    b = np.ones(A.shape[0])
    b[0] = 0.0
    return scipy.sparse.linalg.spsolve(A, b).sum() + (A @ np.arange(A.shape[0])).sum()


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("fmt, through_lil", [("csr", False), ("csc", False), ("csr", True)])
def test_a_boundary_condition_written_into_a_traced_matrix(fmt, through_lil):
    k = np.linspace(1.0, 2.0, 6)
    before = k.tobytes()

    def f(k):
        return _dirichlet(k, fmt, through_lil)

    assert mutad.value_and_grad(f)(k)[0] == f(k)
    check(f, k, order=1)
    mutad.check_jvp(f, k)
    replays_as_traced(f, [(k * scale,) for scale in (1.0, 1.2, 0.9)])
    assert k.tobytes() == before


def _entry_outside_the_pattern(k):
    A = stiffness(k, "csr")
    A[0, 3] = k[2] ** 2  # a new entry: SciPy warns (SparseEfficiencyWarning)
    return np.sum((A @ k[1:]) ** 2)


def test_a_write_that_warns_replays_with_its_warning():
    """Regression: a write into a csr matrix outside its pattern, of which SciPy warns, was
    traced on every call. The warning is decided by the key and the pattern, which the
    program holds: a replay warns again, at SciPy's line, once per call as the traced call."""
    k = np.linspace(1.0, 2.0, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replays_as_traced(_entry_outside_the_pattern, [(k * s,) for s in (1.0, 1.2, 0.9, 1.1)],
                          replayed=3)  # (the first call records)
    assert len(caught) == 8  # (each call replayed or recorded, and traced beside it)
    assert {(w.category, w.filename, w.lineno) for w in caught} == {
        (scipy.sparse.SparseEfficiencyWarning, caught[0].filename, caught[0].lineno)}


LAPLACIAN = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(6, 6), format="csr")


def _robin(k, fmt):
    """A constant operator converted to lil (or dok) and given traced boundary rows and a
    traced diagonal, then solved: SciPy's own conversion, its entries then written."""
    A = LAPLACIAN.tolil() if fmt == "lil" else LAPLACIAN.todok()
    A[0, 0] = 1.0 + k[0]
    A[5, 5] = 1.0 + k[5] ** 2
    A[5, 4] = -k[4]
    lil = LAPLACIAN.tocsc().tolil()
    lil.setdiag(2.0 + k)
    return (scipy.sparse.linalg.spsolve(A.tocsr(), np.ones(6)).sum()
            + (lil.tocsr() @ np.arange(6.0)).sum())


@pytest.mark.parametrize("fmt", ["lil", "dok"])
def test_traced_entries_written_into_a_constant_matrix_converted(fmt):
    """``L.tolil()`` of a constant matrix made a plain lil matrix, which refused traced entries
    (a ConversionError in SciPy's __setitem__); it takes them as one the function builds."""
    k = np.linspace(1.0, 2.0, 6)
    before, constant = k.tobytes(), LAPLACIAN.toarray().tobytes()
    f = functools.partial(_robin, fmt=fmt)
    assert mutad.value_and_grad(f)(k)[0] == f(k)
    mutad.check_grads(f, k)
    mutad.check_jvp(f, k)
    replays_as_traced(f, [(k * scale,) for scale in (1.0, 1.2, 0.9)])
    assert k.tobytes() == before and LAPLACIAN.toarray().tobytes() == constant
    plain = LAPLACIAN.tolil()  # outside a differentiation: SciPy's own
    assert type(plain) is scipy.sparse.lil_matrix


def test_repeated_entries_are_summed_in_scipys_order():
    """A coo matrix with repeated entries converted to csr: SciPy's own sums (mutad added
    them in another order: a last bit apart)."""
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 5, 400), rng.integers(0, 5, 400)
    v = rng.standard_normal(400)

    def f(v):
        A = scipy.sparse.coo_matrix((v, (rows, cols)), shape=(5, 5)).tocsr()
        return A.data @ np.arange(1.0, 26.0) + (csr_matrix((v, (rows, cols)), shape=(5, 5))
                                                 @ np.arange(5.0)).sum()

    assert mutad.value_and_grad(f)(v)[0] == f(v)
    mutad.check_grads(f, v)
    mutad.check_jvp(f, v)


# ----------------------------------------------------------------------------------------------
# SciPy sorts a matrix's indices and sums its repeated entries in place (spsolve, sum(), abs,
# power, norm, a write): the traced values move as SciPy's do, and the pattern stays SciPy's


W2, W3 = np.array([1.0, 10.0]), np.array([1.0, 10.0, 100.0])


def _unsorted_solve(d):
    # row 0: d[0] at column 1, then d[1] at column 0 (valid csr, unsorted)
    A = csr_matrix((np.array([d[0], d[1], 1.0]), np.array([1, 0, 1]), np.array([0, 2, 3])),
                   shape=(2, 2))
    x = spsolve(A, W2)
    return x.sum() + A.data @ np.array([1.0, 3.0, 7.0])  # A.data as SciPy left it: sorted


def _shares_its_argument(d):
    B = csr_matrix((d, np.array([1, 0]), np.array([0, 2, 2])), shape=(2, 2))
    B.sum()  # SciPy sorts B's indices, and so d, in place
    return (B @ W2).sum() + 100.0 * d[0]


def _a_write_changes_the_pattern(d):
    A = csr_matrix((d, np.array([0, 2, 1, 2]), np.array([0, 2, 3, 4])), shape=(3, 3))
    A[0, :] = 0.0  # SciPy writes zeros into d[0], d[1], then inserts (0, 1) in new arrays
    return (A @ W3).sum() + (d * np.arange(4.0)).sum()


def _duplicates_read(d):
    B = csr_matrix((d, np.array([0, 0, 1, 2]), np.array([0, 2, 3, 4])), shape=(3, 3))
    return B[0, 0] + 10.0 * B[2, 2] + (B @ W3).sum()


def _duplicates_read_small(d):
    return csr_matrix((d, np.array([0, 0]), np.array([0, 2])), shape=(1, 2))[0, 0]


def _duplicates_summed_in_place(d):
    B = scipy.sparse.csc_matrix((d * 1.0, np.array([2, 0, 2, 1]), np.array([0, 3, 4, 4])),
                                shape=(3, 3))
    total = abs(B).sum() + B.power(2) @ W3 + scipy.sparse.linalg.norm(B)
    return total.sum() + B.data @ np.arange(1.0, B.nnz + 1)


def _transpose_follows(d):
    A = csr_matrix((d, np.array([1, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
    At = A.T
    x = spsolve(A, W2)  # sorts A, and At with it: they share their arrays
    return x.sum() + At.data @ np.array([1.0, 3.0, 7.0]) + (At @ W2).sum()


def _duplicates_written(d):
    A = csr_matrix((d * 1.0, np.array([0, 0, 1, 2]), np.array([0, 2, 3, 4])), shape=(3, 3))
    A[0, 0] = 2.0 * d[3]  # SciPy sums (0, 0)'s two values, then writes
    return (A @ W3).sum() + A.data @ np.arange(1.0, A.nnz + 1)


def _duplicates_shared(d):
    A = csr_matrix((d, np.array([0, 0, 1, 2, 1]), np.array([0, 2, 3, 5])), shape=(3, 3))
    At = A.T
    x = spsolve(A, W3)  # SciPy sorts d, then adds (0, 0)'s values into its front
    return x.sum() + d @ np.arange(1.0, 6.0) + A.data @ np.arange(1.0, A.nnz + 1) + \
        At.data @ np.arange(1.0, 6.0)  # the transpose keeps the whole array


def _dok_out_of_order(k):
    A = scipy.sparse.dok_matrix((2, 2))
    A[0, 0] = 1.0
    A[1, 1] = k[0]  # before (1, 0), which comes first in csr order
    A[1, 0] = k[1]
    B = A.tocsr()
    return spsolve(B, W2).sum() + (B @ W2).sum() + B.sum() + B.data @ np.arange(1.0, 4.0)


def _dok_to_csc(k):
    K = scipy.sparse.dok_matrix((2, 2))
    K[0, 0] = k[0]
    K[1, 1] = k[1]
    K[0, 1] = -k[0]
    return spsolve(K.tocsc(), np.ones(2)).sum()


IN_PLACE = {
    "unsorted csr, spsolve": (_unsorted_solve, np.array([2.0, 3.0]), np.array([5.0, 1.0])),
    "csr sharing its argument, sum()": (_shares_its_argument, np.array([1.0, 2.0]),
                                        np.array([3.0, -2.0])),
    "a write that changes the pattern": (_a_write_changes_the_pattern,
                                         np.array([1.0, 2.0, 3.0, 4.0]),
                                         np.array([2.0, -1.0, 0.5, 3.0])),
    "a repeated entry read": (_duplicates_read, np.array([1.0, 2.0, 3.0, 4.0]),
                              np.array([0.5, 2.5, -3.0, 1.5])),
    "a repeated entry read, 1x2": (_duplicates_read_small, np.array([1.0, 2.0]),
                                   np.array([-1.0, 0.25])),
    "repeated entries summed by abs, power, norm": (
        _duplicates_summed_in_place, np.array([1.0, -2.0, 3.0, 4.0]),
        np.array([0.5, 2.0, -1.0, 3.0])),
    "a transpose sorted with its matrix": (_transpose_follows, np.array([2.0, 3.0, 4.0]),
                                           np.array([5.0, 1.0, 2.0])),
    "a repeated entry written": (_duplicates_written, np.array([1.0, 2.0, 3.0, 4.0]),
                                 np.array([0.5, -2.0, 1.0, 3.0])),
    "repeated entries summed in the array they were built from": (
        _duplicates_shared, np.array([2.0, 1.0, 3.0, 4.0, 0.5]),
        np.array([1.0, 3.0, 2.0, 5.0, -1.0])),
    "dok filled out of order": (_dok_out_of_order, np.array([2.0, 3.0]), np.array([5.0, 7.0])),
    "dok to csc": (_dok_to_csc, np.array([1.0, 3.0]), np.array([2.0, 0.5])),
}


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_sorts_and_sums_are_followed(name):
    f, x, other = IN_PLACE[name]
    before = x.tobytes()
    for point in (x, other):
        assert mutad.value_and_grad(f)(point)[0] == f(point.copy())  # SciPy's, bit for bit
        assert mutad.jvp(f, (point,), (np.ones_like(point),))[0] == f(point.copy())
    assert x.tobytes() == before
    check(f, x)
    mutad.check_jvp(f, x)
    replays_as_traced(f, [(x,), (other,), (x * 1.5,)])
    assert x.tobytes() == before


def test_an_unsorted_sparse_argument():
    """A csr argument whose indices are not sorted: its gradient is on its own pattern, and the
    caller's matrix comes back as it was (SciPy sorts it in place inside the function)."""
    def make():
        return csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([1, 0, 1]), np.array([0, 2, 3])),
                          shape=(2, 2))

    def f(A):
        A.sum()
        return (A @ W2).sum() + spsolve(A, W2).sum()

    A = make()
    g = mutad.gradient(f, A)[0]
    assert A.indices.tolist() == [1, 0, 1] and A.data.tolist() == [1.0, 2.0, 3.0]
    assert g.indices.tolist() == [1, 0, 1]
    step = 1e-6
    for i in range(3):
        up, down = make(), make()
        up.data[i] += step
        down.data[i] -= step
        assert g.data[i] == pytest.approx((f(up) - f(down)) / (2 * step), rel=1e-6)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_mean_is_scipys_bit_for_bit(axis):
    """SciPy's mean multiplies by 1/n, then sums (mutad divided the sum by n: a last bit
    apart)."""
    d = np.array([0.03, 0.89, 0.29])

    def f(d):
        return scipy.sparse.diags_array(d, format="csr").mean(axis) * np.ones(1)

    assert mutad.value_and_grad(lambda d: f(d).sum())(d)[0] == f(d).sum()
    assert np.asarray(mutad.jvp(f, (d,), (np.ones(3),))[0]).tobytes() == f(d).tobytes()
    mutad.check_grads(lambda d: f(d).sum(), d)
    replays_as_traced(lambda d: f(d).sum(), [(d,), (d * 1.7,)])


@pytest.mark.parametrize("kind", ["csc_matrix", "csr_array", "coo_matrix"])
def test_the_zeros_of_a_dense_matrix_are_left_out_as_scipy_leaves_them(kind):
    """A sparse matrix made from a dense one keeps its zero entries for their derivative, but
    SciPy's solve and nnz see SciPy's matrix, without them (the solve differed in the last
    bit, nnz counted them), in a replay too, whose zeros may be elsewhere."""
    M = np.array([[3.3, 0.9, 0.0], [-0.1, 3.9, 0.0], [0.0, 0.2, 2.9]])
    other = np.array([[3.1, 0.0, 0.4], [0.0, 3.7, 0.0], [0.3, 0.2, 2.5]])
    before = M.tobytes()

    def f(m):
        A = getattr(scipy.sparse, kind)(m)
        return spsolve(A.tocsc(), np.ones(len(m))).sum() + scipy.sparse.linalg.norm(A)

    for m in (M, other):
        assert mutad.value_and_grad(f)(m)[0] == f(m.copy())
        assert mutad.jvp(f, (m,), (np.ones_like(m),))[0] == f(m.copy())
    check(f, M)  # the derivative in the zero entries too
    mutad.check_jvp(f, M)
    replays_as_traced(f, [(M,), (other,), (M * 1.5,)])
    assert M.tobytes() == before

    def count(k, m):
        return getattr(scipy.sparse, kind)(m * k).nnz * k

    for m in (M, other, np.eye(3)):
        assert mutad.value_and_grad(count)(1.0, m)[0] == count(1.0, m)
    # a norm of the values with the zeros among them is a last bit apart from SciPy's
    wide = np.array([[4.0, 1.0868307847683634, 0.0, 0.0],
                     [1.643251614242697, 3.717350755926102, -0.5856577998413593,
                      -0.47258767675848407],
                     [0.5863372815313004, 0.0, 4.0, 0.0],
                     [0.7293494040178566, 0.8061393585150219, -0.476376747401162, 4.0]])
    assert mutad.value_and_grad(f)(wide)[0] == f(wide.copy())
    mutad.check_grads(f, wide, order=2)
    with pytest.raises(UnsupportedOperationError, match="leaves them out"):
        mutad.gradient(lambda m: getattr(scipy.sparse, kind)(m).data.sum(), M)

    def data(m):  # no zero: SciPy's stored values
        return getattr(scipy.sparse, kind)(m).data @ np.arange(1.0, 10.0)

    full = M + 1.0
    assert mutad.value_and_grad(data)(full)[0] == data(full.copy())
    mutad.check_grads(data, full)

    def pattern(m):  # of zeros that carry a derivative: SciPy's, those zeros left out
        return np.asarray(getattr(getattr(scipy.sparse, kind)(m), "coords" if
                                  kind.startswith("coo") else "indices"))

    np.testing.assert_array_equal(mutad.jvp(pattern, (M,), (np.ones_like(M),))[0],
                                  pattern(M.copy()))


def test_a_transpose_left_inconsistent_by_scipys_in_place_sum_is_refused():
    """SciPy adds a matrix's repeated entries in place, leaving its transpose (which shares
    its arrays) with the whole array of values under the shortened pointers: reading its data
    is SciPy's; computing with it is refused."""
    def f(d, use):
        A = csr_matrix((d, np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2))
        At = A.T
        A.sum()
        return (At @ W2).sum() if use else At.data @ np.arange(1.0, 4.0)

    d = np.array([1.0, 2.0, 3.0])
    assert mutad.value_and_grad(f)(d, False)[0] == f(d.copy(), False)
    mutad.check_grads(lambda d: f(d, False), d)
    with pytest.raises(UnsupportedOperationError, match="A.T.copy()"):
        mutad.gradient(f, d, True)


def test_the_zeros_of_a_sum_or_product_are_left_out_as_scipy_leaves_them():
    """SciPy stores the entries of A + B, A - B, A.multiply(B) and A @ B that are not zero:
    their nnz and what SciPy computes with them are SciPy's (nnz counted the zeros mutad keeps
    for their derivative), and reading the data of such a result with zero entries is
    refused."""
    C = scipy.sparse.random(6, 6, density=0.5, random_state=2, format="csr")
    b = np.ones(6)

    def f(k):
        A = stiffness(k, "csr")
        B = (A + C) - C
        return (spsolve(B, b).sum() + B.nnz + (A @ A - A @ A).nnz
                + (A.multiply(C) - C.multiply(A)).nnz)

    k = K.copy()
    before = k.tobytes()
    assert mutad.value_and_grad(f)(k)[0] == f(k.copy())
    check(f, k)
    mutad.check_jvp(f, k)
    replays_as_traced(f, [(k,), (k * 1.3,)])
    assert k.tobytes() == before
    with pytest.raises(UnsupportedOperationError, match="leaves out"):
        mutad.gradient(lambda k: (stiffness(k, "csr") - stiffness(k, "csr")).data.sum(), k)


ONENORMEST = {  # (were refused: no rule)
    "its search (n > t)": lambda x: scipy.sparse.linalg.onenormest(
        scipy.sparse.diags([x, 0.1 * x[:-1], -0.7 * x[1:] ** 2], [0, 1, -1], format="csc")),
    "every column (n <= t)": lambda x: scipy.sparse.linalg.onenormest(
        scipy.sparse.diags([x, -x[1:] ** 2], [0, 1], format="csr"), t=4),
    "a dense array, v and w": lambda x: np.sum(np.stack(scipy.sparse.linalg.onenormest(
        np.outer(x, np.sin(x)), compute_v=True, compute_w=True)[1:]) ** 2),
}


@pytest.mark.parametrize("name", ONENORMEST)
def test_onenormest(name):
    def f(x):
        np.random.seed(3)  # SciPy's search draws its starting block from NumPy's generator
        return ONENORMEST[name](x)

    x = np.array([2.0, -3.0, 4.0, 5.0])
    value, _ = mutad.pullback(f, x)
    assert value.tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=["rev", "fwd"])
    assert x.tolist() == [2.0, -3.0, 4.0, 5.0]


def _lobpcg_smallest(x):
    A = scipy.sparse.diags([x, 0.3 * x[:-1], 0.3 * x[:-1]], [0, 1, -1], format="csr")
    X = np.cos(np.arange(24.0)).reshape(12, 2)
    return scipy.sparse.linalg.lobpcg(A, X, largest=False, tol=1e-9, maxiter=100)[0].sum()


@pytest.mark.parametrize("f", [
    _lobpcg_smallest,
    lambda x: scipy.sparse.linalg.lobpcg(np.diag(x[:4]) + 0.2, np.ones((4, 1)))[0].sum()],
    ids=["iterations", "dense eigensolver"])
@pytest.mark.filterwarnings("ignore:The problem size")
def test_lobpcg_runs_as_scipys_own_code(f):
    """lobpcg of a traced matrix was refused by name; SciPy's code is NumPy's and
    scipy.linalg's steps, followed as they are (value SciPy's, derivative of its steps)."""
    from cases import followed_as_scipy

    x = np.linspace(2.0, 9.0, 12)
    followed_as_scipy(f, x, x[::-1] * 1.1, rtol=1e-5)


def test_a_sparse_matrix_of_float32_values_is_refused():
    """SciPy keeps float32 and computes in it; the traced matrix was float64 (another value)."""
    x = np.linspace(0.1, 1.0, 8, dtype=np.float32)
    for f in (lambda x: (scipy.sparse.diags([x], [0], format="csr") @ x).sum(),
              lambda x: scipy.sparse.csr_matrix((x, (np.arange(8), np.arange(8))),
                                                shape=(8, 8)).dot(x)[3],
              lambda x: scipy.sparse.coo_array((x, (np.arange(8), np.arange(8)))).sum()):
        with pytest.raises(mutad.MutadError, match="float32"):
            mutad.gradient(f, x)
    assert x.dtype == np.float32 and x[0] == np.float32(0.1)


@pytest.mark.filterwarnings("ignore::scipy.sparse.linalg.MatrixRankWarning")  # SciPy's own
def test_a_singular_matrix_is_refused_with_a_mutad_error():
    """spsolve of an exactly singular matrix: SciPy warns and gives NaN; the factorization
    mutad takes for the derivative raised SuperLU's RuntimeError."""
    singular = scipy.sparse.csc_matrix(np.array([[1.0, 0, 2], [0, 2, 1], [1, 0, 2]]))
    with pytest.raises(mutad.MutadError, match="singular"):
        mutad.value_and_gradient(lambda x: scipy.sparse.linalg.spsolve(singular, x).sum(),
                                 np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dia"])
def test_scaling_a_traced_matrix_in_place_is_seen_through_every_name(fmt):
    """``A *= c`` and ``A /= c`` scale the values SciPy's matrix stores, in place (``A /= c`` by
    the reciprocal): another name for the matrix, and its ``A.T``, see it. They rebound the
    name instead, so a helper scaling its argument left the caller's matrix unscaled."""

    def scale(A, c):
        A *= c
        A /= 3.0

    def f(k, c):
        A = stiffness(k, fmt)
        B, T = A, A.T
        scale(A, c)
        return np.sum((B @ U) ** 2) + np.sum(T @ U)

    k, c = K.copy(), 0.7
    value, grads = mutad.value_and_gradient(f, k, c)
    assert value == f(K, 0.7) and np.array_equal(k, K)  # SciPy's value, bit for bit
    check(f, k, c)


def test_scaling_a_matrix_of_constants_in_place_by_a_traced_number_is_followed():
    """Regression: A *= c and A /= c of a matrix of constants by a traced c were refused. The
    matrix becomes one with traced values in place, so every name for it (the caller's, here)
    sees the scaled values, as SciPy's."""

    def scale(A, c):
        A *= c

    def f(u, c):
        A = scipy.sparse.diags([1.0, 2.0, 3.0], format="csr")
        scale(A, c)
        A /= c * c + 1.0
        return (A @ u) @ u

    u = np.array([1.0, -2.0, 0.5])
    value, _ = mutad.value_and_gradient(f, u, 0.5)
    assert value == f(u, 0.5)
    check(f, u, 0.5)


def test_scaling_a_matrix_of_constants_by_an_array_rebinds_the_name():
    # by an array, SciPy scales nothing in place: Python computes A = A * x, as before
    def by_array(x):
        A = M.copy()
        A *= x
        return np.sum(A * x)

    value, (g,) = mutad.value_and_gradient(by_array, U)
    assert value == by_array(U) and np.allclose(g, (M + M.T) @ U)


# An spmatrix's sum along an axis (SciPy's np.matrix, a traced matrix here), max and min,
# setdiag.


def test_a_traced_matrix_times_a_vector_and_its_other_attributes():
    """m @ u of SciPy's np.matrix (a sum along an axis) with a 1-d u is np.matmul's, a matrix
    of the result; np.matrix's methods mutad does not follow are refused by name (they were
    Python's AttributeError)."""
    u = np.linspace(0.5, 1.5, N + 1)
    value = lambda k: (stiffness(k, "csr").sum(axis=0) @ u[:N]).sum()  # noqa: E731
    assert mutad.value_and_grad(value)(K)[0] == value(K)
    mutad.check_grads(value, K.copy())
    refuses(lambda k: stiffness(k, "csr").sum(axis=0).sort(), K.copy(), match="m.sort")
    refuses(lambda k: stiffness(k, "csr").todense() ** 0.5, K.copy(), match="an integer")

MATRIX_SUMS = {
    "sum(axis=0).A1": lambda k: stiffness(k, "csr").sum(axis=0).A1,
    "np.asarray(sum(axis=1)).ravel()": lambda k: np.asarray(
        stiffness(k, "csc").sum(axis=1)).ravel(),
    "sum(axis=0).sum()": lambda k: stiffness(k, "csr").sum(axis=0).sum(),
    "np.sum(sum(axis=1), axis=0)": lambda k: np.sum(stiffness(k, "csr").sum(axis=1), axis=0).A,
    "row sums times a column (a matrix product)": lambda k: (
        stiffness(k, "csr").sum(axis=0) * B[:, None]).A1,
    "a vector times the column of row sums": lambda k: (
        B * stiffness(k, "csr").sum(axis=1)).A1,
    "rows normalised": lambda k: (lambda a: a.multiply(1.0 / a.sum(axis=1)).toarray())(
        stiffness(k, "csr")),
    "sum(axis=-1) + 1": lambda k: (stiffness(k, "coo").sum(axis=-1) + 1.0).A,
    "mean(axis=0)": lambda k: stiffness(k, "csr").mean(axis=0).A1,
    "an entry": lambda k: stiffness(k, "csr").sum(axis=0)[0, 2],
    "a row, np.sum of it": lambda k: np.sum(stiffness(k, "csr").sum(axis=0)[0]),
    # todense() of an spmatrix, SciPy's np.matrix (it was refused: "call toarray()")
    "todense().A1": lambda k: nonsymmetric(k).todense().A1,
    "np.asarray(todense())": lambda k: np.asarray(stiffness(k, "csc").todense()),
    "todense() @ b (a row matrix)": lambda k: (nonsymmetric(k).todense() @ B).A1,
    "todense()[1] (a row)": lambda k: nonsymmetric(k).todense()[1].A,
    "todense()[:, 2] (a column)": lambda k: nonsymmetric(k).todense()[:, 2].A,
    "todense()[1:3, [0, 2]]": lambda k: nonsymmetric(k).todense()[1:3, [0, 2]].A,
    "todense().T * b[:, None] (a product)": lambda k: (nonsymmetric(k).todense().T
                                                      * B[:, None]).A1,
    "lil": lambda k: (lambda a: (a.__setitem__((0, 1), k[0]), a.sum(axis=0).A1)[1])(
        scipy.sparse.lil_matrix((3, 3))),
    # np.matrix's other methods (they were refused: "take its array first")
    "sum(axis=0).item(1)": lambda k: stiffness(k, "csr").sum(axis=0).item(1),
    "sum(axis=1).tolist()": lambda k: stiffness(k, "csr").sum(axis=1).tolist()[2][0]
    * stiffness(k, "csr").sum(axis=0).tolist()[0][1],
    "todense().I (the inverse)": lambda k: nonsymmetric(k).todense().I.A1,
    "todense()[:2].I (the pseudo-inverse)": lambda k: nonsymmetric(k).todense()[:2].I.A1,
    "todense().H": lambda k: (nonsymmetric(k).todense().H * B[:, None]).A1,
    "todense() ** 3 (a matrix power)": lambda k: (nonsymmetric(k).todense() ** 3).A1,
    "todense().dot(b)": lambda k: nonsymmetric(k).todense().dot(B).A1,
    "todense().dot(k), dot(itself)": lambda k: (lambda m: m.dot(k[:N]).A1 + m.dot(m).A1[:N])(
        nonsymmetric(k).todense()),
    "sum(axis=1).squeeze() (a row)": lambda k: stiffness(k, "csr").sum(axis=1).squeeze().A,
    "sum(axis=0).cumsum()": lambda k: stiffness(k, "csr").sum(axis=0).cumsum().A1,
    "todense().reshape(1, -1)": lambda k: nonsymmetric(k).todense().reshape(1, -1).A1,
    "todense().clip(0.5, 2)": lambda k: nonsymmetric(k).todense().clip(0.5, 2.0).A1,
    # assignments into np.matrix (they raised TypeError: no item assignment)
    "todense()[0, 1] = k[0]": lambda k: _written(nonsymmetric(k).todense(), (0, 1), k[0]).A1,
    "todense()[:, 2] = a column": lambda k: _written(
        nonsymmetric(k).todense(), (slice(None), 2), k[:N, None] * 2.0).A1,
    "todense()[1] = a row of itself": lambda k: (lambda m: _written(m, 1, m[3] * k[2]).A1)(
        nonsymmetric(k).todense()),
    "todense()[[0, 0], [2, 2]] = [k0, k1] (the last wins)": lambda k: _written(
        stiffness(k, "csr").todense(), ([0, 0], [2, 2]), [k[0], k[1]]).A1,
    "sum(axis=0)[0, 1:3] = 0.5": lambda k: _written(stiffness(k, "csr").sum(axis=0),
                                                   (0, slice(1, 3)), 0.5).A1,
}


def _written(m, key, value):
    m[key] = value
    return m


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's, of np.matrix * x
@pytest.mark.parametrize("name", MATRIX_SUMS)
def test_a_sum_along_an_axis_of_an_spmatrix(name):
    f = MATRIX_SUMS[name]
    y, _ = mutad.pullback(f, K.copy())
    assert np.asarray(y).tobytes() == np.asarray(f(K)).tobytes()  # SciPy's values
    check(f, K.copy())


def _stored(d):
    return csr_matrix((d, M.indices, M.indptr), shape=M.shape)


EXTREMES = {
    "max": lambda d: _stored(d).max(),
    "min": lambda d: _stored(d).min(),
    "min explicit": lambda d: _stored(d).min(explicit=True),
    "max of a csr_array": lambda d: scipy.sparse.csr_array(_stored(d)).max(),
    "max of a coo matrix": lambda d: _stored(d).tocoo().max(),
    "max of a full matrix": lambda d: csr_matrix(np.reshape(d[:4], (2, 2))).max(),
    # an spmatrix's extremes along an axis: SciPy's coo matrix of them (they were refused)
    "max(axis=0)": lambda d: _stored(d).max(axis=0).toarray(),
    "min(axis=1) of a coo matrix": lambda d: _stored(d).tocoo().min(axis=1).toarray(),
    "max(axis=-1) of a full matrix": lambda d: csr_matrix(np.reshape(d[:4], (2, 2))).max(
        axis=-1).toarray(),
    # of the stored entries alone, a line storing none 0 (they were refused)
    "max(axis=1, explicit=True)": lambda d: _stored(d).max(axis=1, explicit=True).toarray(),
    "min(axis=0, explicit=True), an empty line": lambda d: csr_matrix(
        (d[:3] + 3.0, [0, 2, 2], [0, 2, 2, 3]), shape=(3, 3)).min(axis=0, explicit=True).toarray(),
    # A.conj() of real values, a copy (it was refused)
    "conj()": lambda d: (_stored(d).conj() @ B).sum() + _stored(d).conjugate(False).max(),
}


@pytest.mark.parametrize("name", EXTREMES)
def test_max_and_min(name):
    f = EXTREMES[name]
    d = M.data - 2.0 + 0.01 * np.arange(M.nnz)  # distinct, and negative: min is stored
    y, _ = mutad.pullback(f, d.copy())
    assert np.asarray(y).tobytes() == np.asarray(f(d)).tobytes()
    check(f, d)


def test_max_along_an_axis_is_scipys_coo_matrix_and_leaves_the_caller_coo_unsummed():
    """A coo matrix with a repeated entry: SciPy sums a copy, the matrix keeps its entries."""
    d = M.data - 2.0 + 0.01 * np.arange(M.nnz)
    rows, cols = np.r_[M.tocoo().row, 0], np.r_[M.tocoo().col, 0]
    seen = []

    def f(d):
        a = scipy.sparse.coo_matrix((np.r_[d, 1.0], (rows, cols)), shape=M.shape)
        m = a.max(axis=0)
        seen.append((isinstance(m, scipy.sparse.coo_matrix), m.shape, m.nnz, a.nnz))
        return m.toarray()

    y, _ = mutad.pullback(f, d.copy())
    assert y.tobytes() == f(d).tobytes()
    assert seen[0] == seen[1]
    mutad.check_grads(lambda d: np.sum(f(d) ** 2), d)


def test_nonzero_of_traced_values_is_scipys_and_a_decision():
    def f(d):
        a = csr_matrix((d, M.indices, M.indptr), shape=M.shape)
        rows, cols = a.nonzero()
        return np.sum(a.toarray()[rows, cols] * (rows + 2 * cols))

    d = M.data.copy()
    d[::3] = 0.0
    rows, cols = csr_matrix((d, M.indices, M.indptr), shape=M.shape).nonzero()
    expected = np.zeros(M.nnz)
    positions = {(r, c): i for i, (r, c) in enumerate(zip(*M.nonzero()))}
    for r, c in zip(rows, cols):
        expected[positions[r, c]] = r + 2 * c
    assert np.array_equal(mutad.gradient(f, d)[0], expected)
    mutad.check_grads(f, M.data.copy())
    replays_as_traced(f, [(d,), (M.data.copy(),), (d,)])


def test_max_splits_its_gradient_between_ties_and_leaves_an_unstored_zero_none():
    data = np.array([3.0, 1.0, 3.0])

    def matrix(d):
        return csr_matrix((d, [0, 2, 1], [0, 2, 3]), shape=(2, 3))

    assert np.array_equal(mutad.gradient(lambda d: matrix(d).max(), data)[0], [0.5, 0.0, 0.5])
    assert np.array_equal(mutad.gradient(lambda d: matrix(d).min(), data)[0], [0.0, 0.0, 0.0])
    assert np.array_equal(mutad.gradient(lambda d: matrix(d).min(explicit=True), data)[0],
                          [0.0, 1.0, 0.0])


SETDIAG = {
    "csr, stored diagonal": lambda k: (
        lambda a: (a.setdiag(k[:N]), a @ B)[1])(stiffness(K, "csr")),
    "csr, new entries": lambda k: (
        lambda a: (a.setdiag(k[:N - 2], 2), a.toarray())[1])(stiffness(k, "csr")),
    "csr, a number": lambda k: (
        lambda a: (a.setdiag(k[0] * 2.0, -1), a.toarray())[1])(stiffness(k, "csr")),
    "csc, longer values": lambda k: (
        lambda a: (a.setdiag(k), a.toarray())[1])(stiffness(k, "csc")),
    "lil": lambda k: (lambda a: (a.setdiag(k[:3]), a.tocsr() @ B[:3])[1])(
        scipy.sparse.lil_matrix((3, 3))),
    "lil, below": lambda k: (lambda a: (a.setdiag(k[:2], -1), a.toarray())[1])(
        scipy.sparse.lil_array((3, 4))),
}


def test_errors_of_scipy_itself():
    """Where SciPy raises, mutad raises SciPy's error, type and message, for traced values:
    a bsr matrix's setdiag (SciPy's bsr takes none), asformat of a format SciPy does not know
    (of a format mutad follows, and of lil, assembled entry by entry)."""
    def bsr(k):
        return stiffness(k, "bsr")

    def lil(k):
        a = scipy.sparse.lil_matrix((N, N))
        a[0, 0] = k[0]
        return a

    for call, makes in ((lambda a: a.setdiag(np.ones(N)), [bsr]),
                        (lambda a: a.asformat("bogus"), [bsr, lil])):
        with pytest.raises(Exception) as scipys:
            call(stiffness(K, "bsr"))
        for make in makes:
            with pytest.raises(type(scipys.value)) as ours:
                mutad.gradient(lambda k: call(make(k)) or np.sum(k), K.copy())
            assert str(ours.value) == str(scipys.value)


@pytest.mark.parametrize("name", SETDIAG)
def test_setdiag(name):
    f = SETDIAG[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.sparse.SparseEfficiencyWarning)
        y, _ = mutad.pullback(f, K.copy())
        assert np.asarray(y).tobytes() == np.asarray(f(K)).tobytes()  # SciPy's values
        check(f, K.copy())


def test_sparse_additions_replay():
    def f(k):
        a = stiffness(k, "csr")
        a.setdiag(k[:N] * 3.0)
        return np.sum(a.sum(axis=0).A1 ** 2) + a.max() - a.min()

    replays_as_traced(f, [(K,), (K * 1.5,), (K[::-1].copy(),)])


# ----------------------------------------------------------------------------------------------
# The ufuncs SciPy maps over the stored values (A.sqrt(), A.expm1(), ...), and a matrix's
# getrow and getcol


def _stored_value_maps(k, fmt):
    A = abs(nonsymmetric(k, fmt)) * 0.1  # values in (0, 1): every map is defined
    total = A.sqrt() @ B + A.expm1() @ B + A.log1p() @ B + A.sin() @ B + A.tanh() @ B
    total = total + A.arcsin() @ B + A.arctan() @ B + A.sinh() @ B + A.arcsinh() @ B
    total = total + A.arctanh() @ B + A.tan() @ B + A.deg2rad() @ B + A.rad2deg() @ B
    return np.sum(total ** 2) + np.sum(A.rint() @ B + A.floor() @ B + A.sign() @ B)


def _duplicates_mapped(d):
    # coo with a repeated entry: SciPy sums (0, 0)'s two values before the map
    A = scipy.sparse.coo_matrix((d * 0.2, (np.array([0, 0, 1]), np.array([0, 0, 1]))),
                                shape=(2, 2))
    return np.sum(A.sqrt().toarray() ** 2 * np.array([[1.0, 2.0], [3.0, 4.0]]))


def _lines(k, fmt):
    A = nonsymmetric(k, fmt)
    rows = [A.getrow(i) for i in (0, 2, -1)]
    cols = [A.getcol(j) for j in (1, -2)]
    formats = tuple(m.format for m in rows + cols)
    total = sum(np.sum(r.toarray() * np.arange(1.0, N + 1)) ** 2 for r in rows)
    return total + sum(np.sum(np.sin(c.toarray())) for c in cols), formats


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dia"])
def test_stored_value_maps_and_lines(fmt):
    k = K.copy()
    for f in (lambda k: _stored_value_maps(k, fmt), lambda k: _lines(k, fmt)[0]):
        assert mutad.value_and_grad(f)(k)[0] == f(K)  # SciPy's values, bit for bit
        check(f, k)
    assert np.array_equal(k, K)  # the caller's array, bit for bit

    def formats(k):
        found.append(_lines(k, fmt)[1])
        return _lines(k, fmt)[0]

    found = []
    mutad.gradient(formats, k)
    assert found[0] == _lines(K, fmt)[1]  # the formats SciPy's getrow and getcol return


def test_stored_value_maps_sum_duplicates_first():
    d = np.array([0.5, 1.5, 2.0])
    assert mutad.value_and_grad(_duplicates_mapped)(d)[0] == _duplicates_mapped(d)
    check(_duplicates_mapped, d)
    assert np.array_equal(d, [0.5, 1.5, 2.0])


def test_stored_value_maps_and_lines_of_what_scipy_lacks_are_scipys_errors():
    with pytest.raises(AttributeError, match="getrow"):
        mutad.gradient(lambda k: scipy.sparse.csr_array(stiffness(k)).getrow(0).sum(), K.copy())
    with pytest.raises(IndexError):
        mutad.gradient(lambda k: stiffness(k, "csr").getcol(N).sum(), K.copy())


# ----------------------------------------------------------------------------------------------
# spsolve with a sparse right-hand side, and inv (SciPy's spsolve(A, I)): a sparse solution of
# A's class, its entries where SciPy's solution is not zero, SciPy's values there


RHS = scipy.sparse.csc_matrix(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0],
                                        [0.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))

SPARSE_RHS = {
    "spsolve(A, B) of a constant B": lambda k: scipy.sparse.linalg.spsolve(
        nonsymmetric(k, "csc"), RHS),
    "spsolve(A, B) of a traced B": lambda k: scipy.sparse.linalg.spsolve(
        nonsymmetric(k, "csc"), scipy.sparse.csc_matrix(RHS.multiply(k[:N, None]))),
    "spsolve(A, B) of a constant A": lambda k: scipy.sparse.linalg.spsolve(
        M.tocsc(), scipy.sparse.csc_matrix(RHS.multiply(k[:N, None]))),
    "spsolve(A, b) of one sparse column": lambda k: scipy.sparse.linalg.spsolve(
        nonsymmetric(k, "csc"), RHS[:, :1]),
    "inv(A)": lambda k: scipy.sparse.linalg.inv(stiffness(k, "csc")),
    "inv(A) of a sparse array": lambda k: scipy.sparse.linalg.inv(
        scipy.sparse.csc_array(stiffness(k, "csc"))),
}


def _dense(x):
    return x.toarray() if hasattr(x, "toarray") else x


@pytest.mark.parametrize("name", SPARSE_RHS)
def test_sparse_right_hand_sides_and_inv(name):
    solve = SPARSE_RHS[name]
    k = K.copy()
    x, _ = mutad.pullback(lambda k: _dense(solve(k)), k)
    expected = solve(K)
    assert x.tobytes() == _dense(expected).tobytes()  # SciPy's values, bit for bit

    def kinds(k):
        x = solve(k)
        found.append((getattr(x, "format", None), getattr(x, "nnz", None), np.shape(x)))
        return np.sum(_dense(solve(k)))

    found = []
    mutad.gradient(kinds, k)
    assert found[0] == (getattr(expected, "format", None), getattr(expected, "nnz", None),
                        np.shape(expected))  # SciPy's format and stored entries
    check(lambda k: np.sum(np.sin(_dense(solve(k)) * np.arange(1.0, 1.0 + np.size(
        _dense(expected))).reshape(np.shape(_dense(expected))))), k)
    assert np.array_equal(k, K)  # the caller's array, bit for bit


def test_sparse_right_hand_side_replays_as_traced():
    from test_replay import replayed_like_traced

    def f(k):
        return np.sum(scipy.sparse.linalg.inv(stiffness(k, "csc")).toarray() ** 2)

    replayed_like_traced(f, [(K,), (K * 1.5,), (K[::-1] + 0.5,)])


def _computed_pattern(k):
    rows = np.nonzero(k > 1.5)[0]  # indices the program computes from the values
    A = scipy.sparse.csc_matrix((k[rows] ** 2, (rows, rows[::-1])), shape=(k.size, k.size))
    return np.sum(A.toarray() @ k)


def test_sparse_indices_the_program_computes_are_guarded():
    """Regression: a sparse matrix built from indices computed in the function (SciPy reads
    them as plain values) was traced on every call. A replay holds them as recorded and checks
    they are the same again: calls with another pattern record again, and a pattern changing on
    every call is traced, ``reasons`` naming the indices."""
    from test_replay import replayed_like_traced

    k = np.array([1.0, 2.0, 1.2, 1.7, 0.5])
    calls = [(k,), (k * 1.01,), (k[::-1].copy(),), (k[::-1] * 0.99,)]
    replaying = replayed_like_traced(_computed_pattern, calls)  # (the 2nd and 4th replay)
    for i in range(5):
        replaying(np.roll(k, i) * (1.0 + i / 10.0))
    assert "with indices the program computes, which took other values" in str(
        replaying.reasons)


# ----------------------------------------------------------------------------------------------
# scipy.sparse.csgraph.laplacian of a traced graph

_GRAPH = scipy.sparse.random(12, 12, density=0.3, random_state=3, format="csr")
_GRAPH = _GRAPH + _GRAPH.T
_EDGES = _GRAPH.nonzero()
_NODES = np.linspace(0.0, 1.0, 12)
LAPLACIAN_OPTIONS = [{}, {"normed": True}, {"use_out_degree": True}, {"symmetrized": True},
                     {"normed": True, "symmetrized": True}, {"copy": False},
                     {"normed": True, "copy": False}]


def _laplacian_loss(fmt, options):
    def loss(w):
        if fmt == "dense":
            W = np.zeros((12, 12))
            W[_EDGES] = w
        else:
            W = scipy.sparse.coo_matrix((w, _EDGES), shape=(12, 12)).asformat(fmt)
        L, d = scipy.sparse.csgraph.laplacian(W, return_diag=True, **options)
        dense = L if fmt == "dense" else L.toarray()
        return _NODES @ (L @ _NODES) + np.sum(d * _NODES) + np.sum(dense * dense)
    return loss


def _edge_weights(rng):
    w = np.abs(rng.standard_normal(len(_EDGES[0]))) + 0.5
    w[:4] = 0.0  # zero weights: nodes whose degree is 0 are isolated (normed keeps them at 1)
    return w


@pytest.mark.parametrize("options", LAPLACIAN_OPTIONS, ids=str)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dense"])
def test_csgraph_laplacian(fmt, options, rng):
    """SciPy's steps on the traced graph: its Laplacian and degrees bit for bit (copy=False
    writes them into the graph, as SciPy's), derivatives in both modes, the caller's weights
    back."""
    loss = _laplacian_loss(fmt, options)
    for _ in range(3):
        w = _edge_weights(rng)
        before = w.tobytes()
        assert mutad.value_and_grad(loss)(w)[0] == loss(w.copy())
        assert w.tobytes() == before
    mutad.check_grads(loss, w)
    mutad.check_jvp(loss, w)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csr", "dense"])
def test_csgraph_laplacian_second_order(fmt, rng):
    mutad.check_grads(_laplacian_loss(fmt, {"normed": True}), _edge_weights(rng), order=2)


def test_csgraph_laplacian_replayed_like_traced(rng):
    from test_replay import replayed_like_traced
    loss = _laplacian_loss("csr", {"normed": True})
    replayed_like_traced(loss, [(_edge_weights(rng),) for _ in range(3)])


def test_csgraph_laplacian_of_a_constant_graph_and_other_forms():
    """A constant graph: SciPy's own; form='lo' or 'function' of a traced graph: refused by
    name."""
    def constant(x):
        return x @ (scipy.sparse.csgraph.laplacian(_GRAPH) @ x)
    x = np.linspace(0, 1, 12)
    mutad.check_grads(constant, x)
    with pytest.raises(UnsupportedOperationError, match="form='array'"):
        mutad.gradient(lambda w: np.sum(scipy.sparse.csgraph.laplacian(
            scipy.sparse.coo_matrix((w, _EDGES), shape=(12, 12)), form="lo") @ x), np.ones(
                len(_EDGES[0])))


def test_coo_setdiag_appends_as_scipys(rng):
    """A coo matrix's setdiag (which takes no A[i, j] = v) drops the diagonal's entries and
    appends the new ones, as SciPy's: the same coordinates and values."""
    rows, cols = np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1])

    def f(v, d):
        A = scipy.sparse.coo_matrix((v, (rows, cols)), shape=(3, 4))
        A.setdiag(d[:2])
        A.setdiag(d[2], k=1)
        return A.row * 1.0 + A.col * 10.0 + A.data * A.data

    v, d = rng.standard_normal(4), rng.standard_normal(3)
    y = mutad.value_and_grad(lambda v, d: np.sum(f(v, d) * np.linspace(1.0, 2.0, 7)),
                             argnums=(0, 1))(v, d)[0]
    assert y == np.sum(f(v, d) * np.linspace(1.0, 2.0, 7))
    mutad.check_grads(lambda v, d: f(v, d), v, d)
    mutad.check_jvp(lambda v, d: f(v, d), v, d)


# ----------------------------------------------------------------------------------------------
# scipy.sparse.find


def _lil_of(x):
    A = scipy.sparse.lil_matrix((3, 4))
    for e, (i, j) in enumerate([(0, 0), (1, 2), (2, 3), (0, 3)]):
        A[i, j] += x[e]
    A[1, 2] += x[5]
    return A


FOUND = {
    "of a dense array with zeros": lambda x: csr_matrix(np.where(x > 0.2, x, 0.0).reshape(3, 4)),
    "coo with repeated entries": lambda x: scipy.sparse.coo_array(
        (np.concatenate([x[:4], x[:2] - x[:2]]), ([0, 1, 2, 2, 0, 1], [0, 1, 3, 0, 0, 1])),
        shape=(3, 4)),
    "csc difference": lambda x: (scipy.sparse.csc_matrix(x.reshape(3, 4)) * 2.0
                                 - scipy.sparse.csc_matrix(np.eye(3, 4) * x[:4])),
    "lil assembled": _lil_of,
}


@pytest.mark.parametrize("form", FOUND)
def test_find_of_traced_matrices(form):
    """SciPy's rows, columns and values of the nonzero entries (the zeros mutad stores that
    SciPy leaves out among those left out), the values differentiated (an entry whose value
    is 0 is left out, as a masked element: no entry here is)."""
    make = FOUND[form]
    x = np.array([0.5, -0.3, 1.2, 0.25, 0.9, 0.4, 1.5, -0.7, 0.3, 0.8, -1.1, 0.6])

    def found(x):
        return scipy.sparse.find(make(x))

    def f(x):
        i, j, v = scipy.sparse.find(make(x))
        return np.sum(np.sin(v) * (i + 1.0) * (j + 2.0))

    copy = x.copy()
    (i, j, v), _ = mutad.pullback(found, copy)
    expected = found(x)
    assert np.array_equal(i, expected[0]) and i.dtype == expected[0].dtype
    assert np.array_equal(j, expected[1]) and v.tobytes() == expected[2].tobytes()
    assert mutad.value_and_grad(f)(copy)[0] == f(x)
    mutad.check_grads(f, copy)
    mutad.check_jvp(f, copy)
    assert copy.tobytes() == x.tobytes()
    replays_as_traced(f, [(x,), (x * 1.3,), (x - 0.5,)])


_EXTREMA_A = scipy.sparse.random(5, 6, density=0.4, random_state=1, format="csr")
_EXTREMA_A.data -= 0.5
_EXTREMA_B = scipy.sparse.random(5, 6, density=0.4, random_state=2, format="csr")
_EXTREMA_B.data -= 0.5
EXTREMA = {
    "of sparse matrices": lambda a: a.maximum(_EXTREMA_B),
    "of another format": lambda a: a.minimum(_EXTREMA_B.tocsc()),
    "of traced matrices": lambda a: a.minimum(a * 0.5),
    "of a number keeping the zeros": lambda a: a.maximum(-0.1),
    "of a number keeping them (minimum)": lambda a: a.minimum(0.2),
    "of a number storing every entry": lambda a: a.maximum(0.1),
    "of a number storing every entry (minimum)": lambda a: a.minimum(-0.2),
    "of an array": lambda a: scipy.sparse.csr_array(a).maximum(np.full(a.shape, 0.05)),
}


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("name", EXTREMA)
def test_maximum_and_minimum(name, fmt):
    """A.maximum(B) and A.minimum(B) of traced values: they were refused. SciPy's values,
    format and stored entries (the zeros it drops), in both modes, replayed."""
    extremum = EXTREMA[name]

    def f(v):
        a = csr_matrix((v, _EXTREMA_A.indices, _EXTREMA_A.indptr), shape=_EXTREMA_A.shape)
        return extremum(a.asformat(fmt))

    def dense(v):
        r = f(v)
        return r.toarray() if hasattr(r, "toarray") else r

    v = _EXTREMA_A.data.copy()
    traced, _ = mutad.pullback(dense, v)
    assert traced.tobytes() == dense(v.copy()).tobytes()
    expected = f(v.copy())
    if scipy.sparse.issparse(expected):
        seen = []
        mutad.gradient(lambda v: (seen.append((f(v).format, f(v).nnz)), v.sum())[1], v)
        assert seen[0] == (expected.format, expected.nnz)
    weights = np.arange(30.0).reshape(5, 6)

    def loss(v):
        return np.sum(np.sin(dense(v)) * weights)

    mutad.check_grads(loss, v, modes=("rev", "fwd"))
    replays_as_traced(loss, [(v,), (v[::-1].copy(),)])


def test_issparse_of_traced_matrices_is_scipys():
    """scipy.sparse.issparse and the isspmatrix checks in the user's code answer for the
    matrix a traced one stands for (they said False, so `if issparse(A)` took the dense
    branch), in both modes, replayed."""
    from scipy.sparse import isspmatrix_csr, issparse

    def f(v):
        a = diags(v).tocsr()
        b = scipy.sparse.csr_array(diags(v))
        assert issparse(a) and scipy.sparse.issparse(b) and isspmatrix_csr(a)
        assert scipy.sparse.isspmatrix(a) and not scipy.sparse.isspmatrix(b)
        assert not scipy.sparse.isspmatrix_csc(a) and not issparse(v)
        dense = a.toarray() if issparse(a) else np.asarray(a)
        return np.sum(dense ** 2)

    v = np.array([1.0, 2.0, 3.0])
    assert mutad.value_and_grad(f)(v)[0] == f(v)
    mutad.check_grads(f, v, modes=("rev", "fwd"))
    replays_as_traced(f, [(v,), (v + 1.0,)])


# A matrix of constants the function builds (SciPy's own, or mutad's of constant values): its
# toarray() is an array the differentiation follows, as np.zeros's is.

CONSTANT_MATRICES = {
    "eye": lambda: scipy.sparse.eye(4),
    "identity": lambda: scipy.sparse.identity(4, format="csr"),
    "diags of numbers": lambda: scipy.sparse.diags([1.0, 2.0], [0, 1], shape=(4, 4)),
    "kron with an allocated array": lambda: scipy.sparse.kron(scipy.sparse.eye(2),
                                                              np.ones((2, 2))),
    "random": lambda: scipy.sparse.random(4, 4, density=0.5, random_state=0),
    "tril": lambda: scipy.sparse.tril(np.ones((4, 4))),
    "lil of an allocated array": lambda: scipy.sparse.lil_matrix(np.eye(4)),
    "bmat of eyes": lambda: scipy.sparse.bmat([[scipy.sparse.eye(2), None],
                                               [None, scipy.sparse.eye(2)]]),
}


@pytest.mark.parametrize("name", CONSTANT_MATRICES)
def test_the_dense_array_of_a_matrix_of_constants_takes_traced_values(name):
    """Regression: K = A.toarray() of a matrix of constants made in the function was a plain
    array, so K[0, 0] = x[0] or K += np.diag(v) raised UntracedWriteError (a Schrödinger
    operator's potential added to a constant Laplacian)."""
    make = CONSTANT_MATRICES[name]

    def f(x):
        k = make().toarray()
        k[0, 0] = x[0]
        k += np.diag(x ** 2)
        return np.sum(k * k) + np.linalg.solve(k + 10.0 * np.eye(4), x).sum()

    _checked_in_every_mode(f, np.array([3.0, 1.5, -0.5, 2.0]))


def _checked_in_every_mode(f, x):
    """SciPy's value bit for bit, the gradient checked (reverse, forward, a replay), the
    caller's array unchanged."""
    before = x.tobytes()
    value, _ = mutad.value_and_gradient(f, x)
    assert value == f(x.copy())
    mutad.check_grads(f, x.copy())
    replays_as_traced(f, [(x * s,) for s in (1.0, 0.5, 1.0)])
    assert x.tobytes() == before


# ----------------------------------------------------------------------------------------------
# A traced value written into the stored values of a SciPy matrix of constants


def _constant_eye():
    return scipy.sparse.eye(3, format="csr")


@pytest.mark.parametrize("build", [
    _constant_eye,
    lambda: scipy.sparse.identity(3, format="csr"),
    lambda: scipy.sparse.eye_array(3, format="csr"),
    lambda: scipy.sparse.eye(3, format="csr") + scipy.sparse.identity(3, format="csr"),
    lambda: (scipy.sparse.eye(3) @ scipy.sparse.eye(3)).tocsr(),
    lambda: scipy.sparse.kron(scipy.sparse.eye(1), scipy.sparse.eye(3)).tocsr(),
    lambda: scipy.sparse.eye(3, format="csr").copy(),
    lambda: scipy.sparse.random(3, 3, density=0.5, format="csr", random_state=0),
    lambda: scipy.sparse.eye(3, format="coo"),
    lambda: scipy.sparse.eye_array(3, format="csc"),
    lambda: scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(3, 3)),  # dia
    lambda: scipy.sparse.eye(3, format="bsr"),
])
@pytest.mark.parametrize("write", ["slice", "inplace"])
def test_write_into_constant_sparse_data_is_followed(build, write):
    """Regression: ``A.data[:] = x`` or ``A.data *= x[0]`` of a matrix SciPy built of constants
    (eye, diags of numbers, what is computed of them: SciPy's arrays) raised UntracedWriteError.
    The matrix becomes one with traced stored values: SciPy's value bit for bit, the gradient
    checked (reverse, forward, a replay), the caller's array unchanged."""
    def f(x):
        A = build()
        if write == "slice":
            A.data[...] = np.resize(x, A.data.shape)
        else:
            A.data *= x[0]
        return (A @ np.arange(1.0, 4.0)) @ np.sin(x) + spsolve(A.tocsc() + 4 * scipy.sparse.eye(
            3, format="csc"), x).sum()

    _checked_in_every_mode(f, np.array([1.0, 2.0, 3.0]))


_BEFORE = scipy.sparse.eye(3, format="csr")


class _Model:
    def __init__(self):
        self.A = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(4, 4), format="csr")

    def loss(self, k):
        self.A.data[:] = np.repeat(k, 3)[:self.A.nnz]
        u = spsolve(self.A.tocsc(), np.ones(4))
        return u @ u


def test_write_into_constant_sparse_data_made_before_is_followed_and_put_back():
    """A matrix of constants made before the differentiation (a module's, an object's
    ``self.A``) whose stored values the function writes: followed, and SciPy's matrix as it
    was when the differentiation ends, as an array made before is (its bytes written back)."""
    def f(x):
        _BEFORE.data[:] = x
        return (_BEFORE @ np.ones(3)) @ np.sin(x)

    x = np.array([1.0, 2.0, 3.0])
    mutad.check_grads(f, x)  # (its plain calls write into _BEFORE, as NumPy's would)
    _BEFORE.data[:] = 1.0
    assert mutad.value_and_grad(f)(x)[0] == f(x.copy())
    _BEFORE.data[:] = 1.0
    mutad.grad(f)(x)
    assert type(_BEFORE) is scipy.sparse.csr_matrix
    assert np.array_equal(_BEFORE.toarray(), np.eye(3))
    model, k = _Model(), np.array([3.0, 2.5, 2.0, 4.0])
    mutad.check_grads(_Model().loss, k)
    assert mutad.value_and_grad(model.loss)(k)[0] == _Model().loss(k)
    assert type(model.A) is scipy.sparse.csr_matrix
    assert np.array_equal(model.A.toarray(), _Model().A.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr_array"])
def test_traced_writes_into_a_matrix_of_constants_are_followed(fmt):
    """Regression: A.setdiag(v) and A[i, j] = k[0] of traced values into a matrix SciPy built of
    constants (a 2-d Laplacian of kron, identities) stopped at SciPy's conversion. The matrix
    becomes one with traced values in place, written as SciPy writes."""
    def f(k):
        T = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(3, 3))
        L = scipy.sparse.kron(T, scipy.sparse.identity(2)).asformat(fmt.split("_")[0])
        if fmt == "csr_array":
            L = scipy.sparse.csr_array(L)
        L.setdiag(L.diagonal() + np.repeat(k, 2))
        if fmt in ("csr", "csc", "csr_array"):
            L[0, 1] = k[0] * 0.1  # (a new entry: SciPy's warning of a changed pattern)
        return spsolve(scipy.sparse.csc_matrix(L), np.arange(1.0, 7.0)) @ np.cos(np.arange(6))

    k = np.array([1.0, 1.5, 2.0])
    before = k.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.sparse.SparseEfficiencyWarning)
        value, _ = mutad.value_and_gradient(f, k)
        assert value == f(k.copy()) and k.tobytes() == before
        mutad.check_grads(f, k.copy())


def test_a_matrix_whose_values_were_written_is_returned():
    """The matrix itself returned: SciPy's matrix of the written values, its pullback the
    cotangents of its stored values."""
    def f(x):
        A = scipy.sparse.eye(3, format="csr")
        A.data[:] = x * x
        return A

    x = np.array([1.0, 2.0, 3.0])
    y, back = mutad.pullback(f, x)
    assert type(y) is scipy.sparse.csr_matrix and np.array_equal(y.toarray(), np.diag(x * x))
    np.testing.assert_array_equal(back(scipy.sparse.csr_matrix(np.eye(3)))[0], 2 * x)


def test_write_into_plain_array_keeps_its_message():
    """An array reached through a tuple (no sparse matrix on the line) keeps the general
    message."""
    held = collections.deque([np.zeros(3)])

    def f(x):
        held[0][:] = x
        return held[0].sum()

    with pytest.raises(mutad.errors.UntracedWriteError, match="mutad does not look into"):
        mutad.grad(f)(np.ones(3))


def test_the_constructors_the_refusal_names_are_followed():
    """What the refusal says to write instead: a diagonal of the traced values, and a csr
    matrix of stored values computed in the function, written in place: SciPy's values bit for
    bit, gradients checked, the caller's array unchanged."""
    def diagonal(x):
        A = scipy.sparse.diags(np.ones(3) * x[0], format="csr")
        A.data[:] = x * A.data
        return (A @ np.arange(1.0, 4.0)) @ np.sin(x)

    def assembled(x):
        data = np.ones(3)
        data[:] = x
        A = csr_matrix((data, np.arange(3), np.arange(4)))
        A.data *= x[0]
        return (A @ np.arange(1.0, 4.0)) @ np.cos(x)

    def entries(x):
        A = scipy.sparse.eye(3, format="csr").tolil()
        A.setdiag(x)
        return (A.tocsr() @ np.arange(1.0, 4.0)) @ np.sin(x)

    for f in (diagonal, assembled, entries):
        x = np.array([0.5, 1.5, -2.0])
        expected = f(x.copy())
        value = mutad.value_and_grad(f)(x)[0]
        assert np.array_equal(x, [0.5, 1.5, -2.0])
        assert value == expected
        mutad.check_grads(f, x, modes=("rev",))


# ----------------------------------------------------------------------------------------------
# np.matrix of a constant sparse matrix (todense() of sp.eye, made in the function) takes traced
# writes, as a new array does (it raised UntracedWriteError); read alone, it computes as SciPy's


def _written_identity(p):
    a = scipy.sparse.eye(4).todense()
    a[0, 0] = p[0]
    a *= p[1] + 1.0
    a[:, 1] = a[:, 0] * 2.0
    return np.asarray(a).sum() + (a * a)[0, 0]


MATRICES_OF_CONSTANTS = {
    "written": _written_identity,
    "scipy.linalg.solve": lambda p: scipy.linalg.solve(diags([1.0, 2.0, 3.0]).todense(),
                                                       p).sum(),
    "np.linalg.solve": lambda p: np.linalg.solve(diags([1.0, 2.0, 3.0]).todense(), p).sum(),
    "csr_matrix of it": lambda p: (csr_matrix(scipy.sparse.eye(3).todense()) @ p).sum(),
    "compared": lambda p: p.sum() * (scipy.sparse.eye(3).todense() == 1).sum(),
    "a product": lambda p: (scipy.sparse.eye(3).todense() @ p).sum() + (
        p * scipy.sparse.eye(3).todense()).sum(),
}


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's, of np.matrix
@pytest.mark.parametrize("name", MATRICES_OF_CONSTANTS)
def test_a_matrix_of_constants_from_todense(name):
    f = MATRICES_OF_CONSTANTS[name]
    x = np.array([1.0, 0.5, 2.0])
    _checked_in_every_mode(f, x)


def test_comparisons_of_a_traced_matrix_are_np_matrix_s():
    """m == c of a traced np.matrix (a sum along an axis) was Python's identity: False."""
    seen = []

    def f(k):
        sums = stiffness(k, "csr").sum(axis=0)
        seen.append(((sums > 2.0).sum(), (sums == sums).all(), type(sums <= 0.0).__name__))
        return sums.sum()

    mutad.gradient(f, K.copy())
    f(K.copy())
    assert seen[0] == seen[1]


def test_a_decision_on_a_matrix_comparison_is_taken_again_in_a_replay():
    def f(k):
        sums = stiffness(k, "csr").sum(axis=0)
        return sums.sum() * 2.0 if (sums > 4.0).sum() > 1 else sums.sum()

    replays_as_traced(f, [(K.copy(),), (K * 0.2,), (K * 3.0,), (K.copy(),)])


# lil and dok results of traced values: the entries made in csr, then assembled

ASSEMBLED_RESULTS = {
    "diags(format='lil')": lambda v: scipy.sparse.diags([v, v[1:] * 0.5], [0, 1],
                                                        format="lil"),
    "diags_array(format='dok')": lambda v: scipy.sparse.diags_array([v], offsets=[0],
                                                                    format="dok"),
    "bmat(format='lil')": lambda v: scipy.sparse.bmat(
        [[scipy.sparse.diags([v[:2]], [0]), None], [None, scipy.sparse.eye(3)]], format="lil"),
    "kron(format='lil')": lambda v: scipy.sparse.kron(scipy.sparse.diags([v[:1]], [0]),
                                                      scipy.sparse.diags([v], [0]), format="lil"),
    "kron(format='dok')": lambda v: scipy.sparse.kron(
        scipy.sparse.csr_matrix(v[None, :1]), scipy.sparse.eye(5) + scipy.sparse.eye(5, k=1),
        format="dok"),
    "lil_matrix(dense)": lambda v: scipy.sparse.lil_matrix(np.diag(v) + np.eye(5, k=1) * v[0]),
    "dok_array(dense)": lambda v: scipy.sparse.dok_array(np.diag(v * v)),
    "lil_matrix(csr)": lambda v: scipy.sparse.lil_matrix(scipy.sparse.diags([v], [0],
                                                                            format="csr")),
    "csr.todok()": lambda v: scipy.sparse.diags([v], [0], format="csr").todok(),
    "csr.asformat('lil')": lambda v: scipy.sparse.csr_matrix(np.diag(v)).asformat("lil"),
    "csc.asformat('dok')": lambda v: scipy.sparse.diags([v], [0], format="csc").asformat("dok"),
}


@pytest.mark.parametrize("name", ASSEMBLED_RESULTS)
def test_lil_and_dok_results_of_traced_values(name):
    """A constructor asked for a lil or dok result of traced values (diags, bmat, kron with
    format=, lil_matrix or dok_matrix of a traced array or matrix, a traced csr's todok, its
    asformat('lil')) was
    refused: it is made in csr and assembled entry by entry, as a traced csr's tolil is;
    SciPy's entries and format, differentiated and replayed."""
    make = ASSEMBLED_RESULTS[name]

    def f(v):
        A = make(v)
        assert A.format in ("lil", "dok")
        A[4, 0] = v[2] * 0.25
        solved = spsolve((A + scipy.sparse.eye(5) * 3.0).tocsc(), np.arange(1.0, 6.0))
        return np.sum(solved ** 2) + np.sum(A.toarray() ** 2)

    v = np.array([0.9, 1.3, 0.7, 1.1, 1.6])
    plain = make(v)
    traced = []
    mutad.gradient(lambda v: traced.append(make(v).toarray()) or 0.0 * v.sum(), v)
    assert np.asarray(traced[0]).tobytes() == plain.toarray().tobytes()
    followed_as_scipy(f, v, v * 0.8)


# ----------------------------------------------------------------------------------------------
# A lil or dok matrix times or over a traced number: SciPy's format, its values bit for bit,
# followed in that format (an entry written, a product)

_SCALED = {"*": lambda a, s: a * s, "r*": lambda a, s: s * a, "/": lambda a, s: a / s,
           "multiply": lambda a, s: a.multiply(s), "dot": lambda a, s: a.dot(s),
           "-(a * s)": lambda a, s: -(a * s), "(a * s) ** 2": lambda a, s: (a * s) ** 2}
_PLAIN_LIL = scipy.sparse.lil_matrix(np.arange(16.0).reshape(4, 4) % 5)


@pytest.mark.parametrize("kind", [scipy.sparse.lil_matrix, scipy.sparse.dok_matrix,
                                  scipy.sparse.lil_array, "assembled"])
@pytest.mark.parametrize("op", _SCALED)
def test_lil_and_dok_times_a_number_keep_their_format(kind, op):
    scale = _SCALED[op]

    def made(k):
        if kind == "assembled":  # a lil matrix f made, holding a traced entry
            a = scipy.sparse.lil_matrix(_PLAIN_LIL)
            a[1, 2] = k[3]
            return a
        return kind(_PLAIN_LIL)

    def f(k):
        y = scale(made(k), k[0])
        f.formats.append(y.format)
        y[0, 3] = k[1] * k[2]
        return np.sum((y @ B[:4]) ** 2) + np.sum(y.toarray() * k[4])

    f.formats = []
    expected = scale(made(K), K[0])
    value = f(K.copy())
    got, _ = mutad.pullback(f, K.copy())
    assert np.asarray(got).tobytes() == np.asarray(value).tobytes()
    assert f.formats[-1] == expected.format
    before = K.tobytes()
    check(f, K.copy(), order=1)
    assert K.tobytes() == before


COMPLEX_MATRIX = np.array([[4.0, 1j, 0.0], [1.0, 3.0, 0.5], [0.0, 2.0 - 1j, 5.0]])
HERMITIAN = COMPLEX_MATRIX + COMPLEX_MATRIX.conj().T + 10.0 * np.eye(3)

# Solves of complex systems: a complex matrix of traced values with a real right-hand side, a
# constant complex matrix, a real matrix with a complex right-hand side (its derivative's
# solves complex with real factors), splu's factors, and the iterative methods (cg's A
# Hermitian, its solve with Aᵀ = conj(A)).
COMPLEX_SOLVES = {
    "spsolve, complex A": lambda x: spsolve(
        scipy.sparse.csc_matrix(COMPLEX_MATRIX * x[0] + np.eye(3) * x[1]), np.arange(1.0, 4.0)),
    "spsolve, constant complex A": lambda x: spsolve(
        scipy.sparse.csc_matrix(COMPLEX_MATRIX), x[0] * np.arange(1.0, 4.0) + x[1]),
    "spsolve, complex b": lambda x: spsolve(
        scipy.sparse.csc_matrix(COMPLEX_MATRIX.real * x[0] + np.eye(3)),
        np.array([1.0, 2j, 3.0]) * x[1]),
    "splu": lambda x: scipy.sparse.linalg.splu(
        scipy.sparse.csc_matrix(COMPLEX_MATRIX * x[0] + np.eye(3))).solve(
        np.arange(1.0, 4.0) + x[1]),
    "cg": lambda x: scipy.sparse.linalg.cg(
        scipy.sparse.csr_matrix(HERMITIAN * x[0]), np.arange(1.0, 4.0) * x[1], rtol=1e-13,
        atol=0.0)[0],
    "gmres": lambda x: scipy.sparse.linalg.gmres(
        scipy.sparse.csr_matrix(COMPLEX_MATRIX * x[0] + np.eye(3)), np.arange(1.0, 4.0) * x[1],
        rtol=1e-13, atol=0.0)[0],
}


@pytest.mark.parametrize("program", COMPLEX_SOLVES)
def test_complex_sparse_solves(program):
    """Complex sparse systems solved: SciPy's values bit for bit, the gradient of a real loss
    and the tangent against finite differences."""
    solve = COMPLEX_SOLVES[program]

    def f(x):
        y = solve(x)
        return np.sum(np.abs(y)) + np.sum(y.real ** 2)

    x = np.array([1.3, 0.7])
    mutad.check_grads(f, x, rtol=1e-6)
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    assert mutad.jvp(f, (x,), (np.array([0.3, -0.2]),))[0] == f(x)
