"""SciPy programs that stopped or gave other bits than SciPy's, found among programs written as
scientists use SciPy's solvers, sparse matrices and filters inside a differentiated function:
each checked with central differences (``tests.test_scipy_stops.check``: reverse and forward
mode, a replay), its value SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.sparse as sp

import mutad
from tests.test_scipy_stops import check

X = np.array([0.7, 1.3, 0.4, 0.9, 1.1, 0.2, 0.8, 1.5])
W = np.cos(np.arange(8.0))


# ----------------------------------------------------------------------------------------------
# filtfilt(method="gust"): SciPy adds its correction into y_fb, a reversed view, and returns
# that view; a result laid out otherwise holds the same numbers, but a sum of it (y @ w) rounds
# otherwise


@pytest.mark.parametrize("irlen", [None, 5])
def test_gustafsson_filtfilt_is_scipys_reversed_view(irlen):
    b, a = scipy.signal.butter(3, 0.3)
    x = 0.5 + np.sin(np.arange(24) * 0.7) + 0.1 * np.arange(24) ** 0.5
    weights = np.cos(np.arange(24.0) * 0.3)

    def f(x):
        return scipy.signal.filtfilt(b, a, x, method="gust", irlen=irlen) @ weights

    check(f, x)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.lstsq with lapack_driver="gelsy": SciPy returns no residues (an empty array)
# and no singular values (None), which the rule took for NumPy's


@pytest.mark.parametrize("driver", ["gelsy", "gelss", "gelsd"])
def test_lstsq_of_every_driver(driver):
    def f(p):
        a = np.column_stack([np.ones(8), p, p ** 2])
        x, residues, _, s = scipy.linalg.lstsq(a, W, lapack_driver=driver)
        return x @ x + np.sum(residues) + (0.0 if s is None else s.sum())

    check(f, X.copy())


# ----------------------------------------------------------------------------------------------
# A.getH() of a traced sparse matrix: SciPy's conjugate transpose


def test_get_h_of_a_traced_sparse_matrix():
    def f(p):
        A = sp.identity(8, format="csr") * p[0] + sp.diags(p[1:], 1)
        return (A.getH() @ W).sum() + (A.conj() @ W) @ W

    check(f, X.copy())
    with pytest.raises(AttributeError):
        mutad.gradient(lambda p: sp.csr_array(np.diag(p)).getH().sum(), X.copy())


# ----------------------------------------------------------------------------------------------
# A traced sparse matrix passed to a solver through args= (minimize, root): handed to SciPy's
# run as SciPy's matrix of its numbers, as a traced array is handed as its numbers


def test_traced_sparse_matrix_in_the_args_of_minimize():
    def f(p):
        A = sp.diags([2 + p[:4]], [0], format="csr")
        res = scipy.optimize.minimize(
            lambda z, A, b: 0.5 * z @ (A @ z) - b @ z, np.zeros(4), args=(A, p[4:]),
            jac=lambda z, A, b: A @ z - b, method="BFGS", tol=1e-12)
        return res.x @ np.arange(1.0, 5.0)

    # the minimum is b / (2 + p): its derivatives, exactly
    p = X.copy()
    expected = np.concatenate([-p[4:] / (2 + p[:4]) ** 2, 1 / (2 + p[:4])]) * np.tile(
        np.arange(1.0, 5.0), 2)
    before = p.tobytes()
    (gradient,) = mutad.gradient(f, p)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6)
    assert p.tobytes() == before


def test_traced_sparse_matrix_in_the_args_of_root():
    def f(p):
        A = sp.diags([-np.ones(3), 3 + p[:4], -np.ones(3)], [-1, 0, 1], format="csc")
        sol = scipy.optimize.root(lambda u, A, b: A @ u + 0.1 * u ** 3 - b, np.zeros(4),
                                  args=(A, p[4:]), tol=1e-13)
        return sol.x @ np.arange(1.0, 5.0)

    check(f, X.copy(), rtol=1e-5, atol=1e-7, replay=False)


# ----------------------------------------------------------------------------------------------
# CubicSpline with traced end derivatives (bc_type's (order, value)): the spline is linear in
# its values and those derivatives jointly, which are further rows of its datum


T = np.linspace(0.0, 1.0, 8)
QUERIES = np.array([0.05, 0.33, 0.5, 0.71, 0.97, 1.2])


def test_cubic_spline_of_a_traced_end_slope():
    def f(p):
        cs = scipy.interpolate.CubicSpline(T, p, bc_type=((1, p[0]), (2, 0.0)))
        return (cs(QUERIES).sum() + cs(QUERIES, 1) @ QUERIES + cs.integrate(0.0, 1.0)
                + cs.derivative()(0.4) + cs.c.sum())

    check(f, X.copy())


def test_cubic_spline_of_plain_values_and_a_traced_end():
    def f(p):
        cs = scipy.interpolate.CubicSpline(T, np.sin(T), bc_type=("not-a-knot", (1, p[1] * p[2])))
        return cs(QUERIES) @ QUERIES + cs.antiderivative()(0.5)

    check(f, X.copy())


def test_cubic_spline_along_an_axis_with_vector_end_values():
    def f(p):
        y = np.outer(p[:3], p)
        cs = scipy.interpolate.CubicSpline(T, y, axis=1,
                                           bc_type=((1, p[:3]), (1, [p[3], 0.0, p[4]])))
        return cs(QUERIES).sum() + np.sum(cs.antiderivative()(QUERIES) ** 2)

    check(f, X.copy())
