"""SciPy programs that stopped or gave other bits than SciPy's, found among programs written as
scientists use SciPy inside a differentiated function: each checked with central differences
(``tests.test_scipy_stops.check``: reverse and forward mode, a replay), its value SciPy's bit
for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.sparse as sp

import mutad
from tests.test_scipy_stops import check

X = np.array([0.7, 1.3, 0.4, 0.9, 1.1])


# ----------------------------------------------------------------------------------------------
# A.getrow(i) and A.getcol(j) of a csr or csc matrix: SciPy copies the line's stored values in
# their order (a submatrix), which a product by a selector does not keep, so that the sums of
# a product with the line (A.getrow(i) @ x) rounded otherwise


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csc_matrix], ids=lambda k: k.__name__)
@pytest.mark.parametrize("line", ["getrow", "getcol"])
def test_line_of_a_compressed_matrix_is_scipys_copy(kind, line):
    def f(k):
        A = kind(np.outer(k, k))
        lines = [getattr(A, line)(i) for i in range(5)]
        assert {m.format for m in lines} == {getattr(kind(np.eye(5)), line)(0).format}
        products = [(m @ k)[0] if line == "getrow" else (k @ m)[0] for m in lines]
        return sum(products) + sum(m.toarray().sum() for m in lines)

    check(f, X.copy())
