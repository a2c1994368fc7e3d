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
