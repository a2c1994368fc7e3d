"""NumPy programs that stopped with an error where NumPy
gives a value: each checked as ``test_scipy_stops.check`` does (NumPy's value bit for bit,
reverse mode, forward mode and a replay against central differences, the caller's arrays
unchanged)."""

import numpy as np
import pytest
from scipy.special import gammaln

from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])


# ----------------------------------------------------------------------------------------------
# a library's ufunc bound by a module-level name (``from scipy.special import gammaln``), called
# on a list: the array np.array of the list gives, which traced values may be written into

def _gammaln_of_a_list_written(x):
    g = gammaln([1.5, 2.5, 3.5, 4.5])
    g[0] = x[0] * 2.0
    g[2:] += x[2:] ** 2
    return np.sum(g * x)


def test_module_level_library_ufunc_of_a_list():
    check(_gammaln_of_a_list_written, X)


# ----------------------------------------------------------------------------------------------
# the float arrays np.polynomial makes of plain values written in place: legvander2d's is a
# reshape of a product whose axes NumPy laid out as its operands' (not in order); chebvander of
# an array f made from a list, into which a traced value was written, follows it

def _legvander2d_written(x):
    V = np.polynomial.legendre.legvander2d(np.array([0.1, 0.2, 0.3]),
                                           np.array([0.3, 0.1, 0.5]), [2, 2])
    V[0, :] *= x[0]
    V[:, 1] += x[1] ** 2
    V[1:, 2:4] = x[2:] * x[3]
    return (V ** 2).sum() + V[2] @ V[1]


def _chebvander_of_an_array_made_from_a_list(x):
    a = np.array([0.1, 0.5, 0.9, -0.2])
    a[1] = x[0]
    a[2:] *= x[2:]
    V = np.polynomial.chebyshev.chebvander(a, 3)
    W = np.polynomial.chebyshev.chebvander(np.array([0.2, 0.4]), 2)
    W[1] = x[1:]
    return (V @ x).sum() + (W ** 2).sum()


@pytest.mark.parametrize("f", [_legvander2d_written, _chebvander_of_an_array_made_from_a_list])
def test_np_polynomial_arrays_written(f):
    check(f, X)
