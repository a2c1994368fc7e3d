"""SciPy programs that stopped or gave other bits than SciPy's, found among programs written as
scientists use SciPy's solvers, sparse matrices and filters inside a differentiated function:
each checked with central differences (``tests.test_scipy_stops.check``: reverse and forward
mode, a replay), its value SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.integrate
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


# ----------------------------------------------------------------------------------------------
# solve_bvp's implicit derivative: the Jacobian of its collocation equations is banded (each
# interval reads its two nodes), formed by one forward product per color of columns sharing no
# row and solved by its sparse LU factors, as SciPy's own Newton solves it, not formed densely
# and decomposed (the cube of the final mesh: a minute at tol=1e-10's 721 nodes)


def _beam(q, tol):
    f = lambda x, y: np.vstack([y[1], y[2], y[3], q * np.ones_like(x)])  # noqa: E731
    bc = lambda ya, yb: np.array([ya[0], ya[1], yb[2], yb[3]])  # noqa: E731
    return scipy.integrate.solve_bvp(f, bc, np.linspace(0, 1, 11), np.zeros((4, 11)),
                                     tol=tol).sol(1.0)[0]


def test_solve_bvp_solves_its_collocation_jacobian_sparsely(monkeypatch):
    def dense(*args, **kwargs):
        raise AssertionError("the collocation Jacobian formed densely")

    monkeypatch.setattr(mutad.scipy.optimize, "jacobian", dense)
    g, = mutad.gradient(lambda q: _beam(q, 1e-10), 1.0)
    assert g == pytest.approx(0.125, rel=1e-9)  # y(1) = q/8 of the cantilever


@pytest.mark.parametrize("coupled", [False, True], ids=["pointwise", "coupled"])
def test_solve_bvp_sparse_jacobian_with_parameters_and_outside_its_pattern(coupled):
    # coupled: fun reads every node (a mean), outside SciPy's pattern: formed densely instead
    def f(q):
        def fun(x, y, p):
            extra = 0.01 * np.mean(y[0]) if coupled else 0.0
            return np.vstack([y[1], -p[0] * y[0] + q[0] + extra + 0 * x])

        bc = lambda ya, yb, p: np.array([ya[0], yb[0], ya[1] - q[1]])  # noqa: E731
        res = scipy.integrate.solve_bvp(fun, bc, np.linspace(0, 1, 11), np.ones((2, 11)),
                                        p=[1.0], tol=1e-8)
        return res.sol(np.array([0.3, 0.5])).sum() + res.p[0]

    q = np.array([0.3, 1.0])
    g, = mutad.gradient(f, q)
    h = 1e-6
    fd = [(f(q + h * e) - f(q - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.sqrt, np.sin, np.abs, np.exp])
def test_a_numpy_ufunc_of_a_traced_np_matrix_is_refused_saying_what_to_call(ufunc):
    # SciPy's np.matrix of a traced sparse matrix gives way to NumPy's operators by
    # __array_ufunc__ = None, so NumPy raised a bare TypeError (a traced sparse matrix's ufuncs
    # are SciPy's: tests/test_scipy_stops8.py)
    k = np.array([1.0, 4.0])
    kept = k.copy()
    with pytest.raises(mutad.MutadError, match=r"A\.sqrt\(\).*m\.A"):
        mutad.gradient(lambda k: ufunc(sp.csr_matrix(np.diag(k)).todense()).sum(), k)
    assert k.tobytes() == kept.tobytes()
    # what the message says to do runs: the ufunc of m.A
    g = mutad.gradient(lambda k: np.exp(sp.csr_matrix(np.diag(k)).todense().A).sum(), k)[0]
    np.testing.assert_allclose(g, np.exp(k))
