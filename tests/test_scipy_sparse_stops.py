"""scipy.sparse methods of a matrix holding differentiated values that stopped with an error:
``A.maximum(B)``, ``A.minimum(B)`` and ``A.multiply(B)`` of a dense ``B`` (an spmatrix's
np.matrix results included), ``reshape``, ``resize``, and the in-place canonicalizations.
Each checked against central differences in reverse and forward mode and in replays at other
points, its value SciPy's bit for bit and the caller's array unchanged; the structure of a
sparse result SciPy's own."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import mutad
from test_scipy_sparse_structure import structure
from test_scipy_stops import central, check

DENSE = np.arange(6.0).reshape(2, 3) - 2.5
KINDS = [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_matrix, sp.coo_array,
         sp.dia_matrix]


def matrix(x, kind):
    """A 2 x 3 sparse matrix of ``x``'s values, one of them a stored duplicate, two entries
    empty."""
    m = sp.coo_array((x, ([0, 1, 1, 0], [0, 1, 2, 0])), shape=(2, 3))  # (0, 0) stored twice
    return kind(m) if kind in (sp.coo_matrix, sp.coo_array) else kind(m.asformat(
        "csr" if kind in (sp.csr_matrix, sp.csr_array) else "csc" if kind is sp.csc_matrix
        else "dia"))


def weighed(y):
    y = y.toarray() if sp.issparse(y) else np.asarray(y)
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


def _resized(m, shape):
    m.resize(shape)
    return m


def _canonical(m, how):
    getattr(m, how)()
    return m


OPERATIONS = {
    "multiply(dense)": lambda m, x: m.multiply(DENSE * x[3]),
    "maximum(dense)": lambda m, x: m.maximum(DENSE * x[1]),
    "minimum(dense)": lambda m, x: m.minimum(DENSE + x[2]),
    "maximum(row)": lambda m, x: m.maximum(DENSE[:1] * x[0]),
    "reshape": lambda m, x: m.reshape((3, 2)) * x[0],
    "reshape(6, 1)": lambda m, x: m.reshape(6, 1),
    "resize larger": lambda m, x: _resized(m, (3, 4)),
    "resize smaller": lambda m, x: _resized(m, (2, 2)),
    "sum_duplicates": lambda m, x: _canonical(m, "sum_duplicates"),
    "eliminate_zeros": lambda m, x: _canonical(m * 1.0, "eliminate_zeros"),
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("name", OPERATIONS)
def test_sparse_method_of_differentiated_values(kind, name):
    if kind is sp.dia_matrix and name in ("sum_duplicates", "eliminate_zeros"):
        pytest.skip("dia has neither")
    operation = OPERATIONS[name]
    x = np.array([0.3, -0.5, 0.9, 1.4])

    def f(x):
        return weighed(operation(matrix(x, kind), x))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.SparseEfficiencyWarning)
        check(f, x, rtol=1e-6, atol=1e-8)
        replayed = mutad.grad(f, replay=True)
        for other in (x * 0.5, x[::-1].copy(), x + [0.2, 0.4, -0.1, 0.0]):
            before = other.tobytes()
            np.testing.assert_allclose(replayed(other), central(f, other), rtol=1e-6,
                                       atol=1e-8)
            assert other.tobytes() == before
        plain = operation(matrix(x.copy(), kind), x.copy())
        seen = []  # (read while the differentiation runs)
        mutad.gradient(lambda x: seen.append(described(operation(matrix(x, kind), x))) or f(x),
                       x)
    assert seen == [described(plain)]


def described(y):
    """A sparse result's structure (format, pattern, stored values' bits; a dia matrix's as
    csr, with its offsets: its slots outside the matrix, which hold no entry, may hold a zero
    of either sign); an array's, or an spmatrix's np.matrix's, type, shape and bits."""
    if sp.issparse(y):
        # (a traced matrix, which the user's type() shows as SciPy's class, holds SciPy's)
        value = getattr(y, "value", None)
        m = value if isinstance(value, (sp.spmatrix, sp.sparray)) else y
        return structure(m.tocsr()) + [m.offsets.tolist()] if m.format == "dia" else \
            structure(m)
    return [isinstance(y, np.matrix), np.shape(y),
            np.asarray(mutad.stop_gradient(np.asarray(y))).tobytes()]


@pytest.mark.parametrize("kind", [sp.coo_array, sp.csr_array], ids=lambda k: k.__name__)
@pytest.mark.parametrize("operation", [lambda m: m.reshape((6,)), lambda m: _resized(m, (4,))],
                         ids=["reshape", "resize"])
def test_reshape_to_one_dimension(kind, operation):
    """SciPy's 1-d sparse array (they were refused): its structure, and the gradient."""
    x = np.array([0.3, -0.5, 0.9, 1.4])
    check(lambda x: weighed(operation(matrix(x, kind))), x, rtol=1e-6, atol=1e-8)
    seen = []
    mutad.gradient(lambda x: seen.append(described(operation(matrix(x, kind)))) or x.sum(), x)
    assert seen == [described(operation(matrix(x.copy(), kind)))]


def test_multiply_by_a_sparse_row_is_refused():
    """SciPy broadcasts a sparse row (column) in A.multiply(B); its stored values were once
    matched to A's by their positions as in a matrix of A's shape: a sum of 0.0 for 2.3."""
    x = np.array([0.3, 0.7, 1.1])
    row = sp.csr_array(np.array([[0.0, 1.0, 2.0]]))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=r"different shapes"):
        mutad.gradient(lambda x: sp.csr_array(np.diag(x)).multiply(row).sum(), x)


@pytest.mark.parametrize("make", [
    sp.coo_array, sp.csr_array, lambda x: sp.coo_array((x, (np.array([0, 2, 4]),)), shape=(5,)),
], ids=["coo_array", "csr_array", "coo_array_coordinates"])
def test_one_dimensional_sparse_arrays(make):
    """SciPy's 1-d sparse arrays of traced values (where an unpacking error escaped, then a
    refusal): their sums, weighed entries and structure SciPy's."""
    x = np.array([0.7, 1.3, 0.4])
    check(lambda x: weighed(make(x)) + make(x).sum(), x, rtol=1e-6, atol=1e-8)
    seen = []
    mutad.gradient(lambda x: seen.append(described(make(x))) or x.sum(), x)
    assert seen == [described(make(x.copy()))]


def test_sparse_arrays_of_more_than_two_dimensions_are_refused():
    """SciPy's n-d coo arrays of traced values: a MutadError naming the dimensions and the
    two-dimensional form."""
    x = np.array([0.7, 1.3, 0.4])
    with pytest.raises(mutad.errors.UnsupportedOperationError,
                       match=r"of traced values of 3 dimensions.*reshape it to two"):
        mutad.gradient(lambda x: sp.coo_array(np.stack([np.outer(x, x)] * 2)).sum(), x)


def test_resize_of_a_matrix_sharing_its_values_is_refused():
    x = np.array([0.3, -0.5, 0.9, 1.4])

    def f(x):
        m = matrix(x, sp.csr_array)
        t = m.T
        m.resize((1, 3))
        return weighed(t)

    with pytest.raises(mutad.errors.UnsupportedOperationError, match=r"B.resize"):
        mutad.gradient(f, x)


def _unsorted(x, kind):
    """A 3 x 3 matrix of ``x``'s values whose first row (column) stores its indices out of
    order; made of copies (SciPy would otherwise keep the arrays it is given, and sort them in
    place: refused, tests/test_scipy_hunt.py)."""
    return kind((x, np.array([2, 0, 1, 0]), np.array([0, 2, 3, 4])), shape=(3, 3), copy=True)


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.csc_array],
                         ids=lambda k: k.__name__)
@pytest.mark.parametrize("how", ["sorted_indices", "sort_indices", "sum_duplicates"])
def test_canonical_forms_of_unsorted_differentiated_values(kind, how):
    """sorted_indices was refused (UnsupportedAttributeError); sort_indices and sum_duplicates
    move the stored values in place as SciPy's do: the order of A.data read after them, of
    the copy and of the matrix itself, is SciPy's."""
    weights = np.arange(1.0, 10.0).reshape(3, 3)

    def canonical(x):
        a = _unsorted(x, kind)
        b = a.sorted_indices() if how == "sorted_indices" else a
        if how != "sorted_indices":
            getattr(b, how)()
        return a, b

    def f(x):
        a, b = canonical(x)
        order = np.arange(1.0, 1 + b.data.size)
        return (b.data * order).sum() + (b.toarray() * weights).sum() + a.data[0] * 3.0

    x = np.array([0.3, -0.5, 0.9, 1.4])
    check(f, x)
    replayed = mutad.grad(f, replay=True)
    for other in (x * 0.5, x[::-1].copy(), x + 0.2):
        np.testing.assert_allclose(replayed(other), central(f, other), rtol=1e-6, atol=1e-8)
    seen = []  # (read while the differentiation runs: its reverse pass restores the values
    # the in-place sorts overwrote)
    mutad.gradient(lambda x: seen.append([structure(m.value) for m in canonical(x)]) or f(x), x)
    assert seen == [[structure(m) for m in canonical(x.copy())]]


def _built_from_lists(p):
    """Matrices built from, and diagonals written with, Python lists of differentiated numbers,
    as SciPy reads them: the arrays NumPy makes of the lists."""
    dense = sp.csr_matrix([[p[0] + 2, 0.0], [0.0, p[1]]])
    banded = sp.diags([[p[0], p[1], 1.0], [0.5, p[2]]], [0, 1], format="csc")
    A = sp.eye(3, format="csr")
    A.setdiag([p[0], 1.0, p[1]])
    L = sp.lil_matrix((3, 3))
    L.setdiag((p[2], p[3]), 1)
    return weighed(dense @ banded[:2, :2]) + weighed(A @ banded) + weighed(L) * p[0]


def test_lists_of_differentiated_numbers_build_and_fill_matrices():
    check(_built_from_lists, np.array([0.7, 1.3, 0.4, 0.9]))


@pytest.mark.parametrize("kind", ["csr_matrix", "coo_matrix", "dia_array", "lil_matrix"])
def test_toarray_into_an_array_the_function_allocated(kind):
    """``A.toarray(out=out)``: SciPy zeroes ``out`` and fills it (was refused); the array
    written into is followed, then written into again; SciPy's errors for a wrong ``out``."""
    def f(v):
        A = getattr(sp, kind)(np.diag(v) + np.diag(v[:2] * v[1:], 1))
        out = np.ones((3, 3))
        A.toarray(out=out)
        out[0, 2] = v[1]
        return np.sum(out ** 2 * np.arange(1.0, 10.0).reshape(3, 3))

    check(f, np.array([0.7, 1.3, 0.4]))
    for bad in ({"out": np.ones((2, 3))}, {"out": np.ones((3, 3)), "order": "C"},
                {"out": np.ones((3, 6))[:, ::2]}):
        def g(v):
            return sp.csr_matrix(np.diag(v)).toarray(**bad).sum()

        with pytest.raises(ValueError) as plain:
            g(np.ones(3))
        with pytest.raises(ValueError, match=str(plain.value)):
            mutad.gradient(g, np.ones(3))


@pytest.mark.parametrize("kind", [sp.csr_array, sp.csr_matrix])
def test_a_traced_matrix_divided_by_an_array(kind):
    """A / d[:, None] of a traced matrix and an array (was refused): SciPy's steps,
    A.multiply(1 / d), its values and kind of result."""
    rows, cols = np.array([0, 0, 1, 2, 2]), np.array([0, 2, 1, 0, 2])

    def f(w):
        A = kind((w[:5], (rows, cols)), shape=(3, 3))
        B = A / w[5:, None]
        return (B @ np.array([1.0, 2.0, 3.0])).sum() + (A / np.array([1.0, 2.0, 4.0])).sum()

    w = np.linspace(1.0, 2.0, 8)
    A = kind((w[:5], (rows, cols)), shape=(3, 3))
    y, _ = mutad.pullback(lambda w: kind((w[:5], (rows, cols)), shape=(3, 3)) / w[5:, None],
                          w.copy())
    expected = A / w[5:, None]
    assert isinstance(y, type(expected))
    assert np.asarray(y.toarray()).tobytes() == np.asarray(expected.toarray()).tobytes()
    mutad.check_grads(f, w)
    assert w.tolist() == np.linspace(1.0, 2.0, 8).tolist()
