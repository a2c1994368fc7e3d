"""SciPy programs that stopped or gave other bits than SciPy's, found among programs written as
scientists use SciPy inside a differentiated function: each checked with central differences
(``tests.test_scipy_stops.check``: reverse and forward mode, a replay), its value SciPy's bit
for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.optimize
import scipy.signal
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


# ----------------------------------------------------------------------------------------------
# Comparisons of a traced sparse matrix (A > c, A != B, A <= dense): SciPy's boolean matrices,
# without a derivative, used as masks (A.multiply(A > c), A[A > c]); getnnz of a matrix


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_matrix],
                         ids=lambda k: k.__name__)
def test_comparisons_of_a_traced_sparse_matrix_as_masks(kind):
    dense_threshold = np.full((5, 5), 0.6)

    def f(k):
        A = kind(np.outer(k, k[::-1]))
        B = kind(np.diag(k))
        total = A.multiply(A > 0.5).sum() + A.multiply(A <= 1.0).sum() + (B != 0).sum()
        total = total + B.multiply(B >= B.T).sum() + (A < 1.2).nnz + A.multiply(A == A.T).sum()
        total = total + A.multiply(A > dense_threshold).sum()
        if kind is not sp.coo_matrix:  # (SciPy indexes no coo matrix)
            total = total + A.tocsr()[A > 1.0].sum()
        return total

    check(f, X.copy())


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_getnnz_of_a_traced_matrix(axis):
    def f(k):
        A = sp.csr_matrix(k[:, None] * np.array([[1.0, 0.0, 2.0]]))
        B = sp.csr_matrix((k[:3], [0, 2, 1], [0, 1, 3]), shape=(2, 3))
        return np.sum(A.getnnz(axis) * A.sum()) + np.sum(B.getnnz(axis) * B.sum())

    check(f, X.copy())
    with pytest.raises(AttributeError):
        mutad.gradient(lambda k: sp.csr_array(k[None, :]).getnnz(), X.copy())


# ----------------------------------------------------------------------------------------------
# The antiderivative of a B-spline of traced coefficients or data: SciPy's BSpline.derivative
# (-nu) is its antiderivative(nu), linear in the data; the periodic one (whose antiderivative
# SciPy makes not periodic) stays refused


KNOTS = np.r_[0, 0, 0, 0, 0.5, 1, 1, 1, 1]


def test_antiderivative_of_a_traced_b_spline():
    def f(k):
        b = scipy.interpolate.BSpline(KNOTS, np.r_[k, 0.2], 3)
        F, G = b.antiderivative(), b.antiderivative(2)
        s = scipy.interpolate.make_interp_spline(np.linspace(0, 1, 5), k ** 2).antiderivative()
        return F(1.0) + F(np.array([0.2, 0.7])).sum() + F(1.3) + G(0.6) + s(0.8) + np.sum(F.c)

    check(f, X.copy())


def test_antiderivative_of_a_traced_periodic_b_spline_is_refused():
    def f(k):
        return scipy.interpolate.BSpline(KNOTS, np.r_[k, 0.2], 3,
                                         extrapolate="periodic").antiderivative()(0.3)

    with pytest.raises(mutad.MutadError, match="antiderivative"):
        mutad.gradient(f, X.copy())


# ----------------------------------------------------------------------------------------------
# SciPy's own functions given an array made before the differentiation (a module's signal):
# SciPy receives the plain array, so that its tests of identity hold (csd's y is x after
# np.asarray(x), where it computes |X|² rather than X·conj(Y), which rounds otherwise)


SIGNAL = np.sin(np.linspace(0.0, 6.0, 32)) + 0.3 * np.cos(np.arange(32.0) ** 1.5)


@pytest.mark.parametrize("spectrum", [
    lambda k: np.sum(scipy.signal.welch(SIGNAL, nperseg=8)[1]) * k[0],
    lambda k: np.sum(scipy.signal.csd(SIGNAL, SIGNAL, nperseg=8)[1].real) * k[0],
    lambda k: np.sum(scipy.signal.coherence(SIGNAL * k[0] + 0.1 * SIGNAL ** 2, SIGNAL,
                                            nperseg=8)[1]),
], ids=["welch", "csd", "coherence"])
def test_spectra_of_an_array_made_before(spectrum):
    check(spectrum, X.copy())


# ----------------------------------------------------------------------------------------------
# linprog of coefficients written as lists of numbers, traced among them (rows of A_ub too)


def test_linprog_of_lists_holding_traced_numbers():
    def f(k):
        res = scipy.optimize.linprog(c=[-1.0 - k[0], -2.0], A_ub=[[1.0, 1.0], [1.0, 3.0 + k[1]]],
                                     b_ub=[4, 6.0 + k[2]], A_eq=[[1.0, -k[3]]], b_eq=[0.5],
                                     bounds=[(0, None)] * 2)
        return res.fun + res.x @ [1.0, 2.0]

    check(f, X.copy())


# ----------------------------------------------------------------------------------------------
# Windows of a traced shape parameter: SciPy's own code followed, its xp.asarray(beta) the
# traced array itself (kaiser stopped there); dpss, which takes float(NW), is refused by name


@pytest.mark.parametrize("window", [
    lambda k: scipy.signal.windows.kaiser(9, beta=2.0 + k[1]),
    lambda k: scipy.signal.get_window(("kaiser", 2.0 + k[1]), 9),
    lambda k: scipy.signal.windows.gaussian(9, std=1.0 + k[0]),
    lambda k: scipy.signal.windows.general_gaussian(9, p=1.0 + k[0], sig=2.0 + k[1]),
    lambda k: scipy.signal.windows.tukey(9, alpha=0.3 + 0.2 * k[2]),
], ids=["kaiser", "get_window-kaiser", "gaussian", "general_gaussian", "tukey"])
def test_window_of_a_traced_shape_parameter(window):
    check(lambda k: np.sum(window(k) * np.sin(np.arange(9.0))), X.copy())


def test_dpss_of_a_traced_bandwidth():
    """Refused once (SciPy's float() of NW in its followed code): that float() is the value
    standing for the Python float now, as in the user's code, and the taper SciPy's, bit for
    bit, differentiated in NW (its eigenvector, sign fixed as SciPy fixes it)."""
    check(lambda k: np.sum(scipy.signal.windows.dpss(9, NW=2.0 + k[0]) * np.sin(np.arange(9.0))),
          X[:1].copy())


# NumPy's functions dispatched on such an array that return their argument itself
# (np.atleast_1d): the caller receives the array it passed, so that its tests of identity hold
# as in NumPy (the plain view of its memory, a new object, took the other branch)


def test_numpys_result_that_is_its_argument_is_the_array_passed():
    def f(k):
        same = np.atleast_1d(SIGNAL) is SIGNAL and np.atleast_2d(PLANE) is PLANE
        return np.sum(SIGNAL * k[0]) if same else np.sum(SIGNAL * k[0]) * 2.0

    before = SIGNAL.tobytes(), PLANE.tobytes()
    k = np.array([0.5, 1.0])
    assert f(k) == mutad.value_and_grad(f)(k)[0]
    np.testing.assert_array_equal(mutad.gradient(f, k)[0], [np.sum(SIGNAL), 0.0])
    assert (SIGNAL.tobytes(), PLANE.tobytes()) == before


PLANE = SIGNAL.reshape(4, 8)
