"""Replays of stand-ins that read the plain values of traced ones: each decision a stand-in
takes of a traced value must be one a replay takes again (a traced step, a guard), else the
replay keeps the recorded call's. Each replaying function's calls are compared with fresh
traced ones bit for bit, the caller's arrays too, and asserted replayed."""

import numpy as np
import pytest
import scipy.sparse

from test_replay_hunt20 import _replayed_as_traced

# ----------------------------------------------------------------------------------------------
# A.maximum(c) (A.minimum(c)) of a scipy.sparse matrix: whether the zeros SciPy does not store
# stay zeros was decided on c's plain value, outside any step: a replay recorded at c < 0 kept
# the sparse result at c > 0, where SciPy's is dense (and the other way round).

_ROWS, _COLS = np.array([0, 1, 2]), np.array([0, 2, 1])
_DATA = np.array([1.0, -2.0, 3.0])


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")  # (SciPy's: dense)
@pytest.mark.parametrize("name, form, argnums", [
    ("maximum", "csr", 0), ("maximum", "csr", (0, 1)), ("minimum", "csr", (0, 1)),
    ("maximum", "coo", 0)])
def test_sparse_extremum_zeros_by_the_calls_number(name, form, argnums):
    def f(data, c):
        A = scipy.sparse.coo_array((data, (_ROWS, _COLS)), shape=(3, 3)).asformat(form)
        return np.sum(getattr(A, name)(c[0]).toarray() ** 2) + c[0]

    # recorded where the zeros stay (c <= 0 for maximum, c >= 0 for minimum), replayed where
    # they do not, and back
    kept, filled = np.array([-0.5]), np.array([0.5])
    if name == "minimum":
        kept, filled = -kept, -filled
    calls = [(_DATA, kept), (_DATA, kept), (_DATA, filled), (_DATA, filled), (_DATA, kept)]
    _replayed_as_traced(f, calls, argnums, least=2)
