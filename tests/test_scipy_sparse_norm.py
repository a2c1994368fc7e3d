"""``scipy.sparse.linalg.norm`` of a sparse matrix of differentiated values: the whole
matrix's norms and the vector norms of its rows or columns (``axis``), SciPy's values bit for
bit, gradients against central differences (reverse, forward, replayed at another point), the
caller's array unchanged; the norms mutad does not follow refused by name."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import mutad
from test_scipy_stops import check

DENSE = np.array([[1.5, 0.0, 2.0, -0.5], [0.0, 0.0, -3.0, 1.0], [4.0, 0.0, 5.0, 0.25]])
KINDS = [sp.csr_array, sp.csr_matrix, sp.csc_array, sp.csc_matrix, sp.coo_array,
         sp.coo_matrix]


def matrix(x, kind):
    """A 3 x 4 matrix of ``x``'s nonzero values (column 1 empty), (0, 0) stored twice."""
    rows, cols = np.nonzero(DENSE)
    values = x[rows, cols]
    m = sp.coo_array((np.concatenate([values[:1] / 2, values[:1] / 2, values[1:]]),
                      (np.concatenate([rows[:1], rows]), np.concatenate([cols[:1], cols]))),
                     shape=DENSE.shape)
    return kind(m) if kind in (sp.coo_array, sp.coo_matrix) else kind(m.asformat(
        "csr" if kind in (sp.csr_array, sp.csr_matrix) else "csc"))


def weighed(y):
    y = np.asarray(y, dtype=float)
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("ord, axis", [(None, None), ("fro", None), (1, None), (np.inf, None),
                                       (None, 0), (1, 1), (2, 0), (2, -1), (3, 0), (0.5, 1)])
def test_norm(kind, ord, axis):
    def f(x):
        return weighed(sla.norm(matrix(x, kind), ord=ord, axis=axis))

    check(f, DENSE.copy())


@pytest.mark.parametrize("kind", [sp.csr_array, sp.coo_matrix], ids=lambda k: k.__name__)
@pytest.mark.parametrize("ord, axis, line", [(None, 0, 0), (None, 0, 1), (3, 1, 2), (2, 0, 3)])
def test_line_norm_bit_for_bit(kind, ord, axis, line):
    """Each line's norm SciPy's bit for bit (its sums of powers, then the root), an empty
    column's (1) too, without warnings."""
    def f(x):
        return sla.norm(matrix(x, kind), ord=ord, axis=axis)[line]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(f, DENSE.copy())


@pytest.mark.parametrize("ord, axis", [(np.inf, 0), (-np.inf, 1), (0, 0), (-1, 1),
                                       (2, None)])
def test_refused_norms(ord, axis):
    with pytest.raises(mutad.MutadError, match="norm"):
        mutad.gradient(lambda x: weighed(sla.norm(sp.csr_array(x), ord=ord, axis=axis)),
                       DENSE.copy())


BLOCKS = np.arange(1.0, 9.0) - 3.5
BLOCKS_DENSE = np.arange(16.0).reshape(4, 4) - 5.5


@pytest.mark.parametrize("kind", [sp.bsr_matrix, sp.bsr_array], ids=lambda k: k.__name__)
@pytest.mark.parametrize("dense", [False, True], ids=["blocks", "dense"])
def test_bsr_of_traced_values(kind, dense):
    """A bsr matrix built of traced blocks (data, indices, indptr) or of a traced dense array
    with a blocksize: SciPy's class and format, its products, sums, transpose and dense
    array."""
    def build(x):
        if dense:
            return kind(x, blocksize=(2, 2))
        return kind((x.reshape(2, 2, 2), [0, 1], [0, 1, 2]), shape=(4, 4))

    def f(x):
        A = build(x)
        assert A.format == "bsr" and sp.isspmatrix_bsr(A) == (kind is sp.bsr_matrix)
        total = weighed(A @ np.arange(1.0, 5.0)) + weighed(A.T.toarray())
        return total + 2.0 * A.sum() if kind is sp.bsr_array else total

    check(f, (BLOCKS_DENSE if dense else BLOCKS).copy())


def test_bsr_matrix_sum_is_scipys_error():
    """SciPy's bsr_matrix.sum() fails (an np.matrix of its 3-d blocks): so does mutad's."""
    def f(x):
        return sp.bsr_matrix(x, blocksize=(2, 2)).sum()

    with pytest.raises(ValueError):
        f(BLOCKS_DENSE.copy())
    with pytest.raises(ValueError):
        mutad.gradient(f, BLOCKS_DENSE.copy())
