"""SciPy's 1-d sparse arrays of differentiated values: a row or column of a csr, csc or coo
array (``A[i]``, ``A[:, j]``), its lines' extremes (``A.max(axis)``), a reshape to one
dimension, and what is computed with them (products with dense arrays and sparse matrices,
arithmetic, sums, indexing, conversions). Each result's structure is SciPy's own (type,
shape, pattern, stored values' bits), its gradient that of central differences in reverse
and forward mode, replays at other points (where the pattern its values choose changes too)
the traced call's, and the caller's array unchanged."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg

import mutad
from cases import replays_as_traced
from test_scipy_sparse_stops import described
from test_scipy_stops import check

KINDS = [sp.csr_array, sp.csc_array, sp.coo_array]
W = np.array([0.5, -1.5, 2.0])


def matrix(x, kind):
    """A 2 x 3 sparse array of ``x``'s first four values, one stored twice at (0, 0), the
    entry (1, 0) empty."""
    m = sp.coo_array((x[:4], ([0, 1, 1, 0], [0, 1, 2, 0])), shape=(2, 3))
    return kind(m)


def written(m, key, value):
    m[key] = value
    return m


def weighed(y):
    y = y.toarray() if sp.issparse(y) else np.asarray(y)
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


OPERATIONS = {
    "A[i]": lambda A, x: A[0],
    "A[:, j]": lambda A, x: A[:, 2],
    "A[i, list]": lambda A, x: A[1, [0, 2]],
    "max(axis=0)": lambda A, x: A.max(axis=0),
    "min(axis=1)": lambda A, x: A.min(axis=1),
    "max(axis=1, explicit)": lambda A, x: A.max(axis=1, explicit=True),
    "reshape(6)": lambda A, x: A.reshape(6),
}
# what is computed with a 1-d array, whose format matters less: each of one format, in turn
WITH_VECTORS = {
    "row @ dense": lambda A, x: A[1] @ W,
    "row.dot(dense)": lambda A, x: A[1].dot(W * x[4]),
    "row @ 2-d dense": lambda A, x: A[:, 1] @ np.outer([1.0, -2.0], x[2:5]),
    "dense @ row": lambda A, x: np.outer(x[3:5], W) @ A[1],
    "row @ sparse": lambda A, x: A[0] @ A.T,
    "sparse @ column": lambda A, x: A @ A[1],
    "row * c, c * row, / c": lambda A, x: (A[1] * x[4] + 2.0 * A[1]) / 3.0,
    "-row, abs": lambda A, x: abs(-A[1]),
    "row + dense, dense - row": lambda A, x: (A[0] + W * x[4]) + (W - A[1]),
    "row * dense": lambda A, x: A[1] * (W + x[4]),
    "row + row": lambda A, x: A[0] + A[1],
    "row @ row, row.dot(row)": lambda A, x: (A[0] @ A[1]) * A[1].dot(A[1] * x[4]),
    "row.sqrt(), power(2)": lambda A, x: abs(A[1]).sqrt() + A[0].power(2),
    "row[k] = v": lambda A, x: written(written(A[1], 0, x[4]), 2, 0.5),
    "row.multiply(row)": lambda A, x: A[0].multiply(A[1]),
    "row.sum(), mean(), max()": lambda A, x: A[1].sum() + A[1].mean() * A[0].max(),
    "row[k], row[1:]": lambda A, x: A[1][2] * A[1][1:],
    "row.tocsr()": lambda A, x: A[1].tocsr() * x[4],
    "row.T, todense()": lambda A, x: A[1].T.todense(),
    "coo_array of a vector": lambda A, x: sp.coo_array(x[2:5] * x[0]) - A[1],
}


@pytest.mark.parametrize("kind, name", [(kind, name) for name in OPERATIONS for kind in KINDS] + [
    (KINDS[i % len(KINDS)], name) for i, name in enumerate(WITH_VECTORS)],
    ids=lambda p: getattr(p, "__name__", p))
def test_one_dimensional_sparse_results(kind, name):
    operation = OPERATIONS.get(name) or WITH_VECTORS[name]
    x = np.array([0.3, -0.5, 0.9, 1.4, 0.6])

    def f(x):
        return weighed(operation(matrix(x, kind), x))

    check(f, x, rtol=1e-6, atol=1e-8)
    plain = operation(matrix(x.copy(), kind), x.copy())
    seen = []  # (read while the differentiation runs)
    mutad.gradient(lambda x: seen.append(described(operation(matrix(x, kind), x))) or f(x), x)
    assert seen == [described(plain)]
    assert type(plain).__name__ in ("coo_array", "csr_array", "ndarray", "float64")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_replays_of_one_dimensional_patterns_the_values_choose(kind):
    """The maxima SciPy stores leave out those that are zero (a pattern its values choose);
    a 1-d array made of a dense vector leaves out its zeros: a replay guards them, and
    calls whose zeros move trace again, their values and gradients the traced call's."""
    def f(x):
        A = matrix(x, kind)
        m = A.max(axis=0)
        v = sp.coo_array(x[2:5] * x[4])
        return (m * v).sum() + m.nnz + v.nnz + weighed(m + A[1])

    calls = [np.array([0.3, -0.5, 0.9, 1.4, 0.6]), np.array([0.4, -0.6, 1.1, 1.2, 0.7]),
             np.array([0.0, 0.5, 0.0, 1.4, 0.6]), np.array([0.3, -0.5, 0.9, 1.4, 0.6])]
    before = [c.tobytes() for c in calls]
    replays_as_traced(f, [(c,) for c in calls], replayed=2)
    assert [c.tobytes() for c in calls] == before


@pytest.mark.parametrize("name, operation", [
    ("a write", lambda x: written(sp.coo_array(np.outer(x[:2], x[2:5])), (0, 1), 3.0)),
    ("-A", lambda x: -sp.csr_array(np.outer(x[:2], x[2:5])).tocoo()),
    ("abs(A)", lambda x: abs(sp.csr_array(np.outer(x[:2], x[2:5])).tocoo())),
    ("A.sqrt()", lambda x: abs(sp.csr_array(np.outer(x[:2], x[2:5])).tocoo()).sqrt()),
])
def test_structure_of_coo_results(name, operation):
    """A write into a coo array of a dense one whose zeros SciPy leaves out (they were
    stored), and -A, abs(A), A.sqrt() of a canonical coo array (SciPy's new array is not
    marked canonical; mutad's was): SciPy's structure."""
    x = np.array([0.3, 0.0, 0.9, 0.0, 0.6])
    seen = []
    mutad.gradient(lambda x: seen.append(described(operation(x))) or weighed(operation(x)), x)
    assert seen == [described(operation(x.copy()))]


def _dok_of(x):
    v = sp.dok_array((5,))
    for i in range(3):
        v[i] = x[i] ** 2
    v[-1] = 3.0 * x[0]
    v[2] = 1.5  # a traced entry overwritten by a number
    v[np.int64(1)] += x[2]
    return v


ONE_DIMENSIONAL = {
    "kron": lambda x: sp.kron(sp.coo_array(x), sp.coo_array(x[:2] ** 2)),
    "kron_csr": lambda x: sp.kron(sp.coo_array(x * W), sp.csr_array(np.outer(x, x))[1],
                                  format="csr"),
    "kron_2d_1d": lambda x: sp.kron(sp.csr_array(np.diag(x)), sp.coo_array(W * x)),
    "kron_1d_2d": lambda x: sp.kron(sp.coo_array(x), sp.csr_array(np.ones((2, 2)))),
    "kron_zeros": lambda x: sp.kron(sp.coo_array(x * np.array([1.0, 0.0, 1.0])),
                                    sp.coo_array(x)),
    "norm_1": lambda x: scipy.sparse.linalg.norm(sp.coo_array(x), 1),
    "norm_2_row": lambda x: scipy.sparse.linalg.norm(sp.csr_array(np.outer(x, W))[1], 2),
    "norm_3": lambda x: scipy.sparse.linalg.norm(sp.coo_array(np.diag(x)).reshape(9), 3),
    "norm_inf": lambda x: scipy.sparse.linalg.norm(sp.coo_array(x * W), np.inf, axis=0),
    "dok_of_dense": lambda x: sp.dok_array(x * np.array([1.0, 0.0, 1.0])),
    "todok": lambda x: sp.csr_array(np.outer(x, x))[1].todok(),
    "dok_written": _dok_of,
}


def _told(y):
    """SciPy's structure of a 1-d result (a dok array's by its coo conversion's pattern)."""
    if sp.issparse(y) and y.format == "dok":
        return [y.format, y.shape, y.nnz, y.tocoo().coords[0].tolist()]
    return described(y)


@pytest.mark.parametrize("name", list(ONE_DIMENSIONAL))
def test_kron_norm_and_dok_of_one_dimensional_arrays(name):
    """Regression: kron of a 1-d sparse array, norm(v, ord) of one, a 1-d dok array of traced
    values (written entry by entry, or converted) were refused (v[i] = x of a dok array raised
    SciPy's unpacking ValueError): SciPy's structure, the gradients of central differences."""
    operation = ONE_DIMENSIONAL[name]
    x = np.array([0.7, 1.3, 0.4])
    seen = []
    mutad.gradient(lambda x: seen.append(_told(operation(x))) or weighed(operation(x)), x)
    assert seen == [_told(operation(x.copy()))]
    check(lambda x: weighed(operation(x)), x)


def test_one_dimensional_refusals():
    """What mutad does not follow of a 1-d sparse array says what to write instead."""
    x = np.array([0.7, 1.3, 0.4])
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="norm.*1-d.*np.linalg"):
        mutad.gradient(lambda x: scipy.sparse.linalg.norm(sp.coo_array(x), -1)[0], x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="1-d scipy.sparse dok.*one at a time"):
        mutad.gradient(lambda x: written(sp.dok_array((3,)), slice(0, 2), x[:2]).sum(), x)
    assert x.tobytes() == np.array([0.7, 1.3, 0.4]).tobytes()
