"""mutad.scipy.sparse: a traced sparse matrix has SciPy's exact structure.

SciPy keeps some zeros and leaves out others: ``kron`` multiplies dense blocks (bsr) where B
is at least half full, so its blocks hold B's zeros, and a bsr sum keeps every block that is
not all zero; a dia matrix stores its zeros, which its conversions (``tocsr``, ``diags(...,
format="csr")``, ``kron``'s, ``bmat``'s) leave out. SuperLU factorizes the pattern it is
given, so a solve is SciPy's bit for bit only where the pattern is SciPy's, explicit zeros,
index order and canonical-format flags included.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg

import mutad
from cases import replays_as_traced

N = 5
LAPLACIAN = sp.diags([-np.ones(N - 1), 2.0 * np.ones(N), -np.ones(N - 1)], [-1, 0, 1])
EYE = sp.eye(N)
RHS = np.linspace(1.0, 2.0, N * N)


def anisotropic(k):
    """The 2-D diffusion solve whose kron is SciPy's dense-block (bsr) product."""
    A = (sp.kron(sp.diags(k), LAPLACIAN) + sp.kron(LAPLACIAN, EYE)).tocsr()
    return scipy.sparse.linalg.spsolve(A, RHS)


def test_kron_sum_solve_is_scipys_bit_for_bit():
    k = np.linspace(0.5, 1.5, N)
    before = k.tobytes()
    expected = anisotropic(k.copy())

    def loss(k):
        return np.sum(anisotropic(k) ** 2)

    value, _ = mutad.value_and_grad(loss)(k)
    assert np.asarray(value).tobytes() == np.sum(expected ** 2).tobytes()
    y, _ = mutad.jvp(anisotropic, (k,), (np.ones_like(k),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    mutad.check_grads(loss, k, order=2)
    replaying = replays_as_traced(loss, [(k,), (k[::-1].copy(),)])
    value, _ = replaying(k * 1.25)
    assert np.asarray(value).tobytes() == np.sum(anisotropic(k * 1.25) ** 2).tobytes()
    assert k.tobytes() == before


# ----------------------------------------------------------------------------------------------
# The structure of traced results against SciPy's own, on values with zeros in them

L4 = sp.diags([-np.ones(3), 2.0 * np.ones(4), -np.ones(3)], [-1, 0, 1], format="csr")
L4.data[1] = 0.0  # an explicit zero SciPy keeps
I4 = sp.eye(4)
L8 = sp.diags([-np.ones(7), 2.0 * np.ones(8), -np.ones(7)], [-1, 0, 1])
Z = np.array([1.0, 0.0, 1.0, 0.0])


def tridiagonal(k):
    return sp.diags([k[1:], k, k[:-1]], [-1, 0, 1])


def blocks(k):
    return sp.kron(sp.diags(k), L4)


def block_sum(k):
    return blocks(k) + sp.kron(L4, I4)


STRUCTURES = {
    "kron, dense blocks (bsr)": blocks,
    "kron, coo": lambda k: sp.kron(sp.diags(k), L8),
    "kron, csr": lambda k: sp.kron(sp.diags(k), L4, format="csr"),
    "kron(L, diags(k))": lambda k: sp.kron(L4, sp.diags(k)),
    "kron, a zero of k": lambda k: sp.kron(sp.diags(k * Z), L4),
    "kron, a zero in B's blocks": lambda k: sp.kron(sp.diags(k), sp.diags(k * Z) + sp.eye(4, k=1)
                                                    + sp.eye(4, k=-1)),
    "kron, B's zeros choose coo": lambda k: sp.kron(L4, tridiagonal(k * Z)),
    "kron, B's values choose bsr": lambda k: sp.kron(L4, tridiagonal(k)),
    "kron, zeros in both": lambda k: sp.kron(sp.diags(k * Z), sp.diags(k)),
    "kron of a bsr sum": lambda k: sp.kron(block_sum(k), sp.eye(2)),
    "kronsum": lambda k: sp.kronsum(sp.diags(k), L4),
    "bsr + coo": block_sum,
    "(bsr + coo).tocsr()": lambda k: block_sum(k).tocsr(),
    "(bsr - coo).tocsc()": lambda k: (blocks(k) - sp.kron(L4, I4)).tocsc(),
    "(bsr - coo).tocoo()": lambda k: (blocks(k) - sp.kron(L4, I4)).tocoo(),
    "bsr - bsr, all zero": lambda k: blocks(k) - blocks(k),
    "bsr with a zero k, + coo, tocsr": lambda k: (sp.kron(sp.diags(k * Z), L4)
                                                  + sp.kron(L4, I4)).tocsr(),
    "bsr.T": lambda k: blocks(k).T,
    "bsr.multiply": lambda k: blocks(k).multiply(sp.kron(L4, I4)),
    "bsr @ coo": lambda k: blocks(k) @ sp.kron(L4, I4),
    "c * bsr": lambda k: 2.0 * blocks(k),
    "bsr sum @ bsr sum": lambda k: block_sum(k) @ block_sum(k),
    "abs(bsr sum), power": lambda k: abs(block_sum(k)) + block_sum(k).power(2),
    "bsr sum.maximum(0)": lambda k: block_sum(k).maximum(0.0),
    "csr.minimum(0)": lambda k: sp.csr_matrix((k - 1.0, np.arange(4), np.arange(5)),
                                              shape=(4, 4)).minimum(0.0),
    "csr.maximum(0)": lambda k: sp.csr_matrix((1.0 - k, np.arange(4), np.arange(5)),
                                              shape=(4, 4)).maximum(0.0),
    "bsr sum.tobsr((2, 2))": lambda k: block_sum(k).tobsr(blocksize=(2, 2)),
    "tril(bsr sum)": lambda k: sp.tril(block_sum(k)),
    "hstack(bsr sum, coo)": lambda k: sp.hstack([block_sum(k), sp.kron(L4, I4)], format="csr"),
    "bmat([[bsr sum]])": lambda k: sp.bmat([[block_sum(k)]]),
    "diags, a zero": lambda k: sp.diags(k * Z),
    "diags csr, zero diagonal": lambda k: sp.diags([k[1:] * 0.0, k], [-1, 0], format="csr"),
    "diags_array csc, zeros": lambda k: sp.diags_array(k * Z, format="csc"),
    "spdiags, zeros, tocoo": lambda k: sp.spdiags(k * Z, 0, 4, 4).tocoo(),
    "dia.tocsc(), zeros": lambda k: sp.diags(k * Z).tocsc(),
    "dia.T": lambda k: sp.diags([k[1:] * Z[1:], k], [1, 0]).T,
    "dia + dia": lambda k: sp.diags(k * Z) + sp.diags(k),
    "dia @ csr": lambda k: sp.diags(k * Z) @ L4,
    "dia.multiply": lambda k: sp.diags(k * Z).multiply(L4),
    "csr.tobsr()": lambda k: sp.diags(k * Z, format="csr").tobsr(blocksize=(2, 2)),
    "csr.asformat('bsr')": lambda k: sp.diags(k * Z, format="csr").asformat("bsr"),
    "csr + csr": lambda k: sp.diags(k, format="csr") + L4,
    "csr - csr, all zero": lambda k: sp.diags(k, format="csr") - sp.diags(k, format="csr"),
    "csr.multiply": lambda k: sp.diags(k, format="csr").multiply(L4),
    "csr @ csr": lambda k: sp.diags(k, format="csr") @ L4,
    "eye + csr": lambda k: sp.eye(4, format="csr") + sp.diags(k * Z, format="csr"),
    "(0 eye + csr).T": lambda k: (sp.eye(4, format="csr") * 0.0
                                  + sp.diags(k * Z, format="csr")).T,
    "bmat with a zero block": lambda k: sp.bmat([[sp.diags(k), L4], [None, sp.diags(k * 0.0)]]),
    "hstack": lambda k: sp.hstack([sp.diags(k), L4, I4]),
    "vstack csr": lambda k: sp.vstack([sp.diags(k), L4], format="csr"),
    "(csr + csr).tocoo()": lambda k: (sp.diags(k, format="csr") + L4).tocoo(),
}


def structure(m):
    """Everything of SciPy's matrix but its class's methods: format, pattern, stored values
    (their bits), canonical-format flags."""
    parts = [type(m).__name__, m.format, m.shape, m.nnz]
    for name in ("indptr", "indices", "offsets", "blocksize", "coords"):
        if hasattr(m, name):
            found = getattr(m, name)
            parts.append((name, [np.asarray(c).tolist() for c in found] if name == "coords"
                          else np.asarray(found).tolist()))
    parts.append(("data", np.asarray(m.data).tobytes()))
    if m.format in ("csr", "csc", "bsr", "coo"):
        parts.append(bool(m.has_canonical_format))
    if m.format in ("csr", "csc", "bsr"):
        parts.append(bool(m.has_sorted_indices))
    return parts


@pytest.mark.parametrize("name", STRUCTURES)
def test_structure_is_scipys(name):
    build = STRUCTURES[name]
    k = np.array([0.5, 0.7, 1.1, 1.3])
    before = k.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        expected = structure(build(k.copy()))
        traced = []

        def f(k):
            m = build(k)
            return np.sum((m @ np.ones(m.shape[1])) ** 2)

        def kept(k):
            m = build(k)
            traced.append((m.value, m.nnz))
            return f(k)

        mutad.grad(kept)(k)
        mutad.check_grads(f, k)
    (matrix, nnz), = traced
    assert structure(matrix) == expected
    assert nnz == expected[3]
    assert k.tobytes() == before


def test_kron_whose_way_depends_on_b_s_zeros_is_scipys_in_a_replay():
    """SciPy multiplies dense blocks where B stores at least half its entries, counting those
    it stores: of a dia B, its values that are not zero. A replayed program, which would keep
    one call's choice, is not recorded: each call is SciPy's way for its values."""
    def loss(k):
        return np.sum(sp.kron(L4, tridiagonal(k)) @ np.linspace(1.0, 2.0, 16)) ** 2

    k = np.array([0.5, 0.7, 1.1, 1.3])
    before = k.tobytes()
    mutad.check_grads(loss, k, order=2)
    mutad.check_grads(loss, k * Z, order=2)
    replaying = replays_as_traced(loss, [(k,), (k * Z,), (k,)])
    for x in (k, k * Z):
        assert np.asarray(replaying(x)[0]).tobytes() == np.asarray(loss(x)).tobytes()
    assert k.tobytes() == before


def _scaled_in_place(A):
    A *= 0.0
    return A


B3 = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [1e-200, 1.0, 1.0]])
ENTRYWISE = {  # each keeps A's stored entries, zero or not (tiny values: products underflow)
    "A.multiply(B)": lambda A: A.multiply(B3),
    "A.multiply(row)": lambda A: A.multiply(B3[1]),
    "A.multiply(column)": lambda A: A.multiply(B3[:, 1:2]),
    "A.multiply(0)": lambda A: A.multiply(0.0),
    "A * tiny": lambda A: A * 1e-200,
    "tiny * A": lambda A: 1e-200 * A,
    "A / huge": lambda A: A / 1e300,
    "A *= 0": _scaled_in_place,
    "A.power(2)": lambda A: A.power(2),
    "A.rint()": lambda A: A.rint(),
}


def _stored_as_scipys(operation, dense, x, seen=lambda m: m):
    """``operation`` of each kind of matrix made from ``dense(x)`` stores SciPy's entries and
    values (``seen`` of them), its nnz and its sum SciPy's, bit for bit."""
    for kind in (sp.csr_array, sp.csc_matrix, sp.coo_array, sp.bsr_array, sp.dia_matrix):
        expected = operation(kind(dense(x)))
        found = []

        def f(x):
            m = operation(kind(dense(x)))  # noqa: B023 (called at once)
            found.append((m.value, m.nnz))  # noqa: B023
            return m.sum()

        value, _ = mutad.value_and_gradient(f, x)
        (matrix, nnz), = found
        assert structure(seen(matrix)) == structure(seen(expected)), kind
        assert nnz == expected.nnz
        assert np.asarray(value).tobytes() == np.asarray(expected.sum()).tobytes()


@pytest.mark.parametrize("name", ENTRYWISE)
def test_entrywise_result_of_a_dense_matrix_stores_scipys_entries(name):
    """SciPy's A.multiply(B), A * c, A.power(n), A.rint() ... store each entry A stores,
    whatever its new value (B's zeros, an underflow, rint(0.3)), and none of the zeros of the
    dense array A was made from: the entries A leaves out decide the result's, not its new
    values (which once stored all nine entries of A.multiply(B), or left out A * 0's)."""
    operation = ENTRYWISE[name]

    def dense(x):
        return np.array([[x[0], 0.0, x[1]], [0.0, x[2], 0.0], [x[3], 0.0, 2.0 * x[0]]])

    x = np.array([0.3, 0.0, 1.1, 1e-200])
    _stored_as_scipys(operation, dense, x)
    mutad.check_grads(lambda x: operation(sp.csr_array(dense(x))).sum(), x)


def _scaled_in_place_by_inf(A):
    A *= np.inf
    return A


def _inside(m):
    """``m``, a dia matrix's slots outside it zero (SciPy's A.multiply(B) fills them with
    products of B's entries elsewhere, which mutad follows only where A is not made from a
    dense array: ``test_dia_product_holds_scipys_values_outside_the_matrix``)."""
    if m.format != "dia":
        return m
    m = m.copy()
    m.data[(np.arange(m.data.shape[1]) - m.offsets[:, None] >= m.shape[0])
           | (np.arange(m.data.shape[1]) < m.offsets[:, None])] = 0.0
    return m


INF, NAN = np.inf, np.nan
NON_FINITE = {  # SciPy computes nothing of the entries A leaves out: 0·inf is no nan there
    "A.multiply(inf)": lambda A: A.multiply(np.full((3, 3), INF)),
    "A.multiply(B of inf, nan, 0)": lambda A: A.multiply(np.array([[INF, 0.0, NAN]] * 3)),
    "A.multiply(row of nan)": lambda A: A.multiply(np.full(3, NAN)),
    "A * inf": lambda A: A * INF,
    "nan * A": lambda A: NAN * A,
    "A / 0": lambda A: A / np.float64(0.0),
    "A *= inf": _scaled_in_place_by_inf,
    "A.power(nan)": lambda A: A.power(NAN),
}


@pytest.mark.parametrize("name", NON_FINITE)
def test_entrywise_result_with_inf_or_nan_leaves_out_scipys_entries(name):
    """A.multiply(B) of a B holding inf or nan, A * inf, A.power(nan) ... of a matrix made
    from a dense array (which itself holds inf and nan): SciPy's entries and values bit for
    bit, where the entries A leaves out once held 0·inf, nan, and were stored (a sum of nan
    for inf); the gradient of the finite entries is the finite differences'."""
    operation = NON_FINITE[name]

    def dense(x):
        return np.array([[x[0], 0.0, x[1]], [0.0, x[2], 0.0], [x[3], 0.0, INF]])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _stored_as_scipys(operation, dense, np.array([0.3, 0.0, NAN, 1.5]), _inside)
        x = np.array([0.3, 0.7, 1.1, 1.5])
        finite = np.isfinite(operation(sp.csr_array(dense(x))).toarray())
        mutad.check_grads(lambda x: operation(sp.csr_array(dense(x))).toarray()[finite].sum(),
                          x)


def test_a_traced_factor_turning_inf_leaves_out_scipys_entries_in_a_replay():
    """A * c of a traced c: which of A's entries SciPy computes nothing of (its zeros) stays
    decided by A; whether c is finite is decided at each call, replayed as traced."""
    def loss(v):
        return (sp.csr_array(np.diag(v[:3])) * v[3]).sum()

    calls = [(np.array([0.0, 1.0, 2.0, c]),) for c in (2.0, INF, 3.0, NAN)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        replays_as_traced(loss, calls, replayed=3)
        for (v,) in calls:
            expected = (sp.csr_array(np.diag(v[:3])) * v[3]).sum()
            assert np.asarray(mutad.value_and_grad(loss)(v)[0]).tobytes() == \
                np.asarray(expected).tobytes()


def test_an_entry_left_out_keeps_its_derivative_by_a_finite_factor_beside_inf():
    """Of A.multiply(B), an entry of A left out for being zero moves with B's entry where it
    is finite (its product leaves zero), and is a zero, without derivative, where it is inf."""
    B = np.array([[2.0, INF], [INF, 3.0]])
    x = np.array([0.0, 1.0])
    value, grad = mutad.value_and_grad(lambda x: sp.csr_array(np.diag(x)).multiply(B).sum())(x)
    expected = sp.csr_array(np.diag(x)).multiply(B)
    assert expected.nnz == 1 and np.asarray(value).tobytes() == np.float64(3.0).tobytes()
    assert grad.tolist() == [2.0, 3.0]


DIAGONALS = np.array([0, 1, -1])
PADDED_PRODUCTS = {  # a dia matrix whose slots outside it hold values, times ...
    "a dense matrix": lambda A, x: A.multiply(np.outer(x[:4], x[4:8])),
    "a row": lambda A, x: A.multiply(x[4:8]),
    "a column": lambda A, x: A.multiply(x[4:8, None]),
    "a dia matrix": lambda A, x: A.multiply(sp.dia_array((x[4:12].reshape(2, 4), [1, -1]),
                                                          shape=(4, 4))),
    "a constant": lambda A, x: sp.dia_array((np.arange(1.0, 13.0).reshape(3, 4), DIAGONALS),
                                            shape=(4, 4)).multiply(A),
    "rectangular": lambda A, x: sp.dia_array((x[:12].reshape(2, 6), [0, 2]), shape=(4, 6))
    .multiply(np.outer(x[:4], x[4:10])),
}


@pytest.mark.parametrize("name", PADDED_PRODUCTS)
def test_dia_product_holds_scipys_values_outside_the_matrix(name):
    """Regression: SciPy's dia A.multiply(B) multiplies whole diagonals, so the slots of its
    result outside the matrix hold products (of A's slots there and B's entries its indices
    wrap to, or B's slots there), which the user's code reads in ``.data``; mutad's held
    zeros there (a sum of ``.data`` of 690 for SciPy's 577), their derivative none."""
    product = PADDED_PRODUCTS[name]

    def stored(x):
        return product(sp.dia_array((x[:12].reshape(3, 4), DIAGONALS), shape=(4, 4)), x)

    x = np.linspace(0.5, 2.0, 12)
    found = []
    value, _ = mutad.value_and_gradient(lambda x: found.append(stored(x).data) or
                                        (stored(x).data ** 2).sum(), x)
    assert np.asarray(found[0]).tobytes() == stored(x).data.tobytes()
    assert np.asarray(value).tobytes() == np.asarray((stored(x).data ** 2).sum()).tobytes()
    mutad.check_grads(lambda x: (stored(x).data ** 2).sum(), x)
    mutad.check_grads(lambda x: (stored(x).toarray() ** 2).sum(), x)


DIA_MAPS = {  # SciPy's maps of a dia matrix's stored values, its slots outside it too
    "sqrt": lambda A: A.sqrt(),
    "expm1": lambda A: A.expm1(),
    "sin": lambda A: A.sin(),
    "arcsin": lambda A: A.arcsin(),
    "floor": lambda A: A.floor(),
    "power(0.5)": lambda A: A.power(0.5),
    "abs": abs,
}


@pytest.mark.parametrize("name", DIA_MAPS)
def test_dia_map_differentiates_the_slots_outside_the_matrix(name):
    """Regression: a map of a dia matrix's stored values (``A.sqrt()``, ``A.power(n)``, ...)
    took SciPy's values in its slots outside the matrix as constants: the user's code that
    reads them in ``.data`` got a zero derivative there (0 for 0.224). Their padding zeros,
    read by nothing (``toarray()``), still take no 0 * inf, nor its warning."""
    mapped = DIA_MAPS[name]

    def stored(x):
        return mapped(sp.dia_array((x[:12].reshape(3, 4), DIAGONALS), shape=(4, 4))).data

    def padded(x):  # SciPy's zeros in the slots outside the matrix
        return mapped(sp.diags([x[:3], x[3:7], x[7:10]], [-1, 0, 1], format="dia"))

    x, before = np.linspace(0.1, 0.9, 12), np.linspace(0.1, 0.9, 12)
    weights = np.arange(1.0, 13.0).reshape(3, 4)
    found = []
    value, grad = mutad.value_and_gradient(
        lambda x: found.append(stored(x)) or (stored(x) * weights).sum(), x)
    assert np.asarray(found[0]).tobytes() == stored(x).tobytes()
    assert np.asarray(value).tobytes() == np.asarray((stored(x) * weights).sum()).tobytes()
    assert x.tobytes() == before.tobytes()
    mutad.check_grads(lambda x: (stored(x) * weights).sum(), x, modes=("rev", "fwd"))
    replays_as_traced(lambda x: (stored(x) * weights).sum(), [(x,), (x * 1.1,), (x,)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = mutad.value_and_gradient(lambda x: (padded(x).toarray() ** 2).sum(), x)
    assert np.isfinite(grad).all()
    assert np.asarray(value).tobytes() == np.asarray((padded(x).toarray() ** 2).sum()).tobytes()
