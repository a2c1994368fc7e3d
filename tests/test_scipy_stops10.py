"""SciPy programs that stopped: an ndarray's augmented assignment with a traced sparse matrix
(``x *= A``, which rebinds ``x`` as NumPy's deferral to SciPy's matrix does), the real and
imaginary parts of a traced sparse matrix. Each checked with central differences
(``tests.test_scipy_stops.check``: reverse and forward mode, a replay), its value SciPy's bit
for bit and the caller's arrays unchanged, and replayed a third time."""

import numpy as np
import pytest
import scipy.sparse as sp

from tests.test_scipy_stops8 import check_replayed

X = np.array([0.7, 1.3, 0.4, 0.9, 1.1, 0.2, 0.8, 1.5])
W = np.cos(np.arange(8.0))


def _tridiagonal(kind, p):
    return kind(sp.diags([-0.5 * p[1:], 2.0 + p, -np.ones(7)], [-1, 0, 1], format="csr"))


# ----------------------------------------------------------------------------------------------
# x op= A with an ndarray x and a traced sparse matrix A: NumPy's in-place operator gives way to
# SciPy's matrix (its __array_priority__, no __array_ufunc__), and Python rebinds x to
# A.__rmul__(x) (x @ A of an spmatrix, x.multiply(A) of a sparse array): the array x named
# before is unchanged


def _augmented(kind, traced_x):
    def f(p):
        A = _tridiagonal(kind, p)
        x = (0.5 * p + W) if traced_x else W.copy()
        before = x
        x *= A
        y = x if not sp.issparse(x) else x.toarray()
        x2 = np.outer(W, W) if not traced_x else np.outer(p, W)
        x2 += A
        x2 -= 2.0 * A
        return (np.asarray(y) * W).sum() + np.asarray(x2).sum() + before @ W
    return f


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_array])
@pytest.mark.parametrize("traced_x", [False, True], ids=["plain_x", "traced_x"])
def test_an_ndarrays_augmented_assignment_with_a_traced_sparse_matrix_rebinds_it(kind,
                                                                                  traced_x):
    """Regression: ``x *= A`` (and ``+=``, ``-=``) was refused ("np.multiply of a
    scipy.sparse matrix with traced values ... with out="), for a plain x and a traced one."""
    check_replayed(_augmented(kind, traced_x), X.copy())


def test_an_augmented_assignment_rebinds_to_the_class_scipy_gives():
    seen = []

    def f(p):
        x = W.copy()
        x *= sp.csr_array(np.diag(p))
        seen.append(x.__class__)
        return x.toarray().sum()

    f(X.copy())
    check_replayed(f, X.copy())
    assert set(seen) == {sp.coo_array}
