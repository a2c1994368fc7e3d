"""SciPy programs that stopped, found among programs written as scientists use SciPy inside a
differentiated function: each checked with ``mutad.testing``'s finite differences, its value
SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.integrate
import scipy.interpolate
import scipy.optimize
import scipy.sparse
import scipy.sparse.linalg
import scipy.special
import scipy.stats

from scipy.sparse.csgraph import dijkstra, floyd_warshall, shortest_path

import mutad
from mutad.errors import UnsupportedOperationError
from tests.test_scipy_stops import check

X = np.array([0.3, 0.5, 0.9, 1.4, 0.7, 1.1])


# ----------------------------------------------------------------------------------------------
# A region of a lil matrix written with traced values whose lengths of one differ from the
# region's (a column into a column, A[:, 0] = w[:, None]; a column into a row): SciPy matches
# them to the region but for those lengths


@pytest.mark.parametrize("key, shaped", [
    ((slice(None), 0), lambda w: w[:, None]),
    ((0, slice(None)), lambda w: w[:, None]),
    ((slice(None), 0), lambda w: w[None, :]),
    ((slice(None), slice(2, 3)), lambda w: w),
    ((slice(0, 2), slice(None)), lambda w: w[:2, None]),
    ((1, slice(None)), lambda w: w[:1].reshape(1, 1)),
], ids=["column", "column-into-row", "row-into-column", "row-into-column-slice",
        "column-over-rows", "one-by-one"])
def test_lil_region_of_traced_values_with_lengths_of_one(key, shaped):
    weights = np.arange(16.0).reshape(4, 4)

    def f(x):
        A = scipy.sparse.lil_matrix((4, 4))
        A.setdiag(3.0)
        A[key] = shaped(x[:4])
        return np.sum(A.toarray() * weights) + np.sum(
            scipy.sparse.linalg.spsolve(A.tocsc() + 9.0 * scipy.sparse.eye(4), np.ones(4)))

    check(f, X.copy())


def test_lil_region_of_a_mismatched_shape_is_scipys_error():
    def f(x):
        A = scipy.sparse.lil_matrix((4, 4))
        A[:, 0] = np.outer(x[:4], x[:4])
        return A.sum()

    with pytest.raises(ValueError):
        f(X.copy())
    with pytest.raises(ValueError):
        mutad.gradient(f, X.copy())


# ----------------------------------------------------------------------------------------------
# linear_sum_assignment of a traced cost matrix: the assignment, a decision, has no derivative;
# the cost it selects is differentiated where the program indexes it


def test_linear_sum_assignment_of_traced_costs():
    def f(x, maximize=False):
        C = np.outer([1.0, 2.0, 3.0], x[:3]) + np.diag(x[3:])
        rows, cols = scipy.optimize.linear_sum_assignment(C, maximize=maximize)
        assert rows.dtype == np.intp and type(rows) is np.ndarray
        return C[rows, cols].sum() + np.sum(C[rows, cols] ** 2)

    check(f, X.copy())
    check(lambda x: f(x, maximize=True), X.copy())


def test_linear_sum_assignment_replayed_where_the_assignment_changes():
    def f(x):
        C = np.array([[x[0], 1.0], [1.0, x[1]]])
        rows, cols = scipy.optimize.linear_sum_assignment(C)
        return np.sum(C[rows, cols] * [1.0, 2.0])

    g = mutad.grad(f, replay=True)
    for x in ([0.2, 0.3], [2.0, 3.0], [0.2, 0.3]):
        expected = mutad.gradient(f, np.array(x))[0]
        assert np.array_equal(g(np.array(x)), expected)


# ----------------------------------------------------------------------------------------------
# PPoly.from_spline of a spline (t, c, k) of traced coefficients (splrep's)

KNOTS = np.linspace(0.0, 1.0, 9)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_ppoly_from_spline_of_traced_coefficients(k):
    def f(x):
        tck = scipy.interpolate.splrep(KNOTS, np.exp(-x[0] * KNOTS) * x[1] + KNOTS * x[2], k=k)
        pp = scipy.interpolate.PPoly.from_spline(tck)
        return np.sum(pp(np.array([0.13, 0.4, 0.77])) ** 2) + pp.integrate(0.0, 1.0)

    check(f, X.copy())


def test_ppoly_from_spline_of_a_traced_bspline_is_refused():
    def f(x):
        spline = scipy.interpolate.make_interp_spline(KNOTS, np.sin(x[0] * KNOTS))
        return scipy.interpolate.PPoly.from_spline(spline)(0.3)

    with pytest.raises(UnsupportedOperationError, match="tuple"):
        mutad.gradient(f, X.copy())


# ----------------------------------------------------------------------------------------------
# solve_ivp's jac= given as a matrix (dense or sparse) of traced values: it steers the implicit
# methods' Newton iterations, not the solution


@pytest.mark.parametrize("method, sparse", [
    ("BDF", True),
    pytest.param("BDF", False, marks=pytest.mark.slow),
    pytest.param("Radau", True, marks=pytest.mark.slow),
    pytest.param("Radau", False, marks=pytest.mark.slow)])
def test_solve_ivp_with_a_traced_jacobian_matrix(method, sparse):
    n = 3

    def f(x):
        L = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(n, n), format="csr") \
            * (10.0 * x[0])
        jacobian = L if sparse else L.toarray()
        sol = scipy.integrate.solve_ivp(lambda t, u: L @ u - x[1] * u, (0.0, 0.3),
                                        np.sin(np.linspace(0.0, np.pi, n)), method=method,
                                        jac=jacobian, rtol=1e-9, atol=1e-11)
        return np.sum(sol.y[:, -1] * np.arange(1.0, n + 1))

    check(f, X[:2].copy(), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# gaussian_kde's integrate_box_1d: SciPy's sum of the kernels' normal distribution functions


@pytest.mark.parametrize("f", [
    lambda x: scipy.stats.gaussian_kde(x).integrate_box_1d(0.0, 1.0),
    lambda x: scipy.stats.gaussian_kde(x, bw_method=0.5, weights=np.arange(1.0, 7.0))
    .integrate_box_1d(x[0], x[1] + 1.0),
    lambda x: scipy.stats.gaussian_kde(x * 2.0, bw_method="silverman")
    .integrate_box_1d(-1.0, np.inf),
    lambda x: scipy.stats.gaussian_kde(X).integrate_box_1d(-np.inf, x[2]),
    lambda x: scipy.stats.gaussian_kde(x, bw_method=x[5] * 0.5).integrate_box_1d(0.4, 0.8),
], ids=["data", "weights-and-limits", "silverman-infinite", "plain-estimate", "bandwidth"])
def test_kde_integrate_box_1d(f):
    check(f, X.copy())


def test_kde_integrate_box_1d_of_two_dimensions_is_scipys_error():
    data = X.reshape(2, 3) + np.eye(2, 3)
    with pytest.raises(ValueError, match="1D"):
        mutad.gradient(lambda x: scipy.stats.gaussian_kde(x).integrate_box_1d(0, 1), data)


# ----------------------------------------------------------------------------------------------
# Shortest paths of a traced graph: named by a program's `from scipy.sparse.csgraph import
# dijkstra` (its stand-in held SciPy's function in a closure, which the mode swapped for the
# stand-in itself), and of a graph made from a dense array (whose zeros, which SciPy leaves
# out, were taken for edges of weight 0)


@pytest.mark.parametrize("paths", [
    lambda G: dijkstra(G, indices=0, directed=False),
    lambda G: dijkstra(G, directed=True, indices=[0, 2]),
    lambda G: shortest_path(G, directed=False),
    lambda G: floyd_warshall(G, directed=False),
], ids=["dijkstra-undirected", "dijkstra-directed", "shortest_path", "floyd_warshall"])
@pytest.mark.parametrize("sparse", [True, False], ids=["csr-of-dense", "dense"])
def test_shortest_paths_imported_by_name_of_a_graph_made_from_a_dense_array(paths, sparse):
    def f(x):
        weights = np.triu(np.outer(x, x) + 0.1, 1)
        graph = scipy.sparse.csr_matrix(weights) if sparse else weights
        d = paths(graph)
        return np.sum(np.where(np.isfinite(d), d, 0.0) * np.cos(np.arange(np.size(d))).reshape(
            np.shape(d)))

    check(f, X.copy())


# ----------------------------------------------------------------------------------------------
# A.mean(axis) of a traced sparse matrix: SciPy's values (its sum in its intermediate dtype adds
# a csr matrix's rows otherwise than sum() does: a last bit apart)

MEAN_WEIGHTS = np.cos(np.arange(36.0)).reshape(6, 6)


@pytest.mark.parametrize("kind", [scipy.sparse.csr_matrix, scipy.sparse.csc_matrix,
                                  scipy.sparse.coo_matrix, scipy.sparse.csr_array,
                                  scipy.sparse.coo_array])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_sparse_mean_is_scipys(kind, axis):
    def f(x):
        A = kind(np.outer(x, x) * (MEAN_WEIGHTS > 0))
        m = np.asarray(A.mean(axis=axis))
        return np.sum(m * (np.arange(m.size).reshape(m.shape) + 1.0))

    check(f, X.copy())


def test_sparse_mean_of_a_matrix_is_a_matrix():
    def f(x):
        m = scipy.sparse.csr_matrix(np.diag(x)).mean(axis=1)
        assert isinstance(m, np.matrix) and m.shape == (6, 1)
        return m[2, 0]

    check(f, X.copy())


# ----------------------------------------------------------------------------------------------
# lil and dok matrices SciPy's own conversions make (eye(n, format="lil"), diags(...,
# format="lil"), a copy) written with traced values: made, in place, ones that take them


@pytest.mark.parametrize("make", [
    lambda: scipy.sparse.eye(6, format="lil"),
    lambda: scipy.sparse.eye(6, format="lil") * 3.0,
    lambda: scipy.sparse.identity(6, format="lil"),
    lambda: scipy.sparse.diags([1.0, 3.0], [1, 0], shape=(6, 6), format="lil"),
    lambda: scipy.sparse.lil_matrix((6, 6)).copy(),
    lambda: scipy.sparse.eye(6, format="dok"),
    lambda: scipy.sparse.eye_array(6, format="lil"),
], ids=["eye-lil", "eye-lil-scaled", "identity-lil", "diags-lil", "copy", "eye-dok",
        "eye-array-lil"])
def test_lil_and_dok_of_constants_written_with_traced_values(make):
    def f(x):
        A = make()
        for i in range(5):
            A[i, i + 1] = x[i]
        A[5, 5] = 2.0 + x[5]
        A.setdiag(x[:5] * 0.1, -1)
        return np.sum(scipy.sparse.linalg.spsolve((A + 3.0 * scipy.sparse.eye(6)).tocsc(),
                                                  np.arange(1.0, 7.0)) ** 2)

    check(f, X.copy())


def test_lil_made_before_the_call_is_left_as_it_was():
    L = scipy.sparse.eye(4, format="lil")
    rows, data = L.rows.tolist(), L.data.tolist()

    def f(x):
        L[0, 1] = x[0]
        return np.sum(scipy.sparse.linalg.spsolve(L.tocsc(), np.ones(4)))

    assert np.array_equal(mutad.gradient(f, X.copy())[0], [-1.0, 0, 0, 0, 0, 0])
    assert type(L) is scipy.sparse.lil_matrix
    assert L.rows.tolist() == rows and L.data.tolist() == data


def test_lil_of_integers_written_with_traced_values_is_refused():
    def f(x):
        A = scipy.sparse.eye(4, format="lil", dtype=int)
        A[0, 1] = x[0]
        return A.sum()

    with pytest.raises(UnsupportedOperationError, match="int64"):
        mutad.gradient(f, X.copy())


# ----------------------------------------------------------------------------------------------
# A.data = traced values of a SciPy matrix of constants (a pattern filled with new values): the
# matrix made traced in place, as a write into A.data[:] makes it


@pytest.mark.parametrize("f", [
    lambda x: np.sum(scipy.sparse.linalg.spsolve(
        _with_data(scipy.sparse.diags([1.0, 2.0], [0, 1], shape=(6, 6), format="csr"),
                   lambda A: np.concatenate([x, x[:5]])) + 3.0 * scipy.sparse.eye(6),
        np.ones(6))),
    lambda x: np.sum(_with_data(scipy.sparse.eye(6, format="coo"), lambda A: x ** 2) @ x),
    lambda x: np.sum(_with_data(scipy.sparse.csc_array(np.eye(6)),
                                lambda A: np.exp(A.data * x)) @ x),
    lambda x: _with_data(scipy.sparse.diags([1.0, 2.0], [0, 1], shape=(6, 6), format="csc"),
                         lambda A: A.data * x[0] + x[:5].sum()).sum(),
], ids=["csr", "coo", "csc-array", "read-then-replaced"])
def test_data_of_a_matrix_of_constants_replaced_by_traced_values(f):
    check(f, X.copy())


def _with_data(A, values):
    A.data = values(A)
    return A


# ----------------------------------------------------------------------------------------------
# quad(weight='cos' or 'sin') of a traced frequency wvar: its derivative a weighted quad too

P = np.array([0.8, 1.3, 0.4])


@pytest.mark.parametrize("f", [
    lambda p: scipy.integrate.quad(lambda t: np.exp(-p[0] * t), 0.0, 2.0, weight="cos",
                                   wvar=p[1])[0],
    lambda p: scipy.integrate.quad(lambda t, a: np.exp(-a * t), 0.0, p[2] + 1.0, args=(p[0],),
                                   weight="sin", wvar=p[1] * 2.0)[0],
    lambda p: scipy.integrate.quad(lambda t: np.exp(-t * t), 0.0, np.inf, weight="cos",
                                   wvar=p[1])[0] * p[2],
    lambda p: scipy.integrate.quad(lambda t: 1.0 / (1.0 + t * t), 1.0, np.inf, weight="sin",
                                   wvar=p[0] + 1.0, full_output=1)[0],
], ids=["cos", "sin-and-limit", "cos-fourier", "sin-fourier-full-output"])
def test_quad_weighted_in_a_traced_frequency(f):
    value, _ = mutad.value_and_gradient(f, P.copy())
    assert type(value) is type(f(P.copy()))
    check(f, P.copy(), rtol=1e-5)


def test_quad_in_a_traced_frequency_refused_at_second_order():
    with pytest.raises(UnsupportedOperationError, match="first order"):
        mutad.hessian(lambda p: scipy.integrate.quad(lambda t: np.exp(-t), 0.0, 1.0,
                                                     weight="cos", wvar=p[0])[0], P.copy())


# ----------------------------------------------------------------------------------------------
# quad(complex_func=True): SciPy's quad of the real part and of the imaginary part, each
# differentiated (over the limits in increasing order, as SciPy takes them)


@pytest.mark.parametrize("f", [
    lambda p: scipy.integrate.quad(lambda t: np.exp(1j * p[0] * t), 0.0, 1.0,
                                   complex_func=True)[0].real,
    lambda p: np.abs(scipy.integrate.quad(lambda t: np.exp((1j * p[0] - p[1]) * t), 0.0,
                                          p[2] + 1.0, complex_func=True)[0]) ** 2,
    lambda p: scipy.integrate.quad(lambda t, a: np.exp(1j * a * t) * t, 1.0, 0.0, args=(p[1],),
                                   complex_func=True)[0].imag,
    lambda p: scipy.integrate.quad(lambda t: np.exp(-t * t + 1j * p[0] * t), 0.0, np.inf,
                                   complex_func=True, full_output=1)[0].real,
], ids=["real-part", "modulus-and-limit", "reversed-limits", "infinite-full-output"])
def test_quad_of_a_complex_function(f):
    check(f, P.copy(), rtol=1e-5)


def test_quad_of_a_complex_function_returns_scipys_structure():
    def f(p):
        value, error, info = scipy.integrate.quad(lambda t: np.exp(1j * p[0] * t), 0.0, 1.0,
                                                  complex_func=True, full_output=1)
        assert type(mutad.stop_gradient(error)) is complex and set(info) == {"real", "imag"}
        return value.real + value.imag

    check(f, P.copy())


# ----------------------------------------------------------------------------------------------
# quad's break points computed from differentiated values (the integrand's kink): they steer
# the subdivision, not the integral


@pytest.mark.parametrize("f", [
    lambda p: scipy.integrate.quad(lambda t: np.abs(t - p[0] * 0.5) * p[1], 0.0, 1.0,
                                   points=[p[0] * 0.5])[0],
    lambda p: scipy.integrate.quad(lambda t: np.abs(t - p[2]) ** 1.5, 0.0, 1.0,
                                   points=(p[2],))[0],
    lambda p: np.sum(scipy.integrate.quad_vec(
        lambda t: np.array([np.abs(t - p[0] * 0.5), p[1] * t]), 0.0, 1.0,
        points=np.array([p[0] * 0.5]))[0]),
], ids=["kink", "cusp", "quad_vec"])
def test_quad_break_points_of_differentiated_values(f):
    check(f, P.copy(), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# scipy.special.nbdtr and nbdtrc (nbinom.cdf's) in the probability: the beta(n, k + 1) density


@pytest.mark.parametrize("f", [
    lambda x: np.sum(scipy.special.nbdtr(2, 5, x) * np.arange(6.0)),
    lambda x: np.sum(scipy.special.nbdtrc([0, 1, 2, 3, 4, 7], 3, x) ** 2),
    lambda x: np.sum(scipy.stats.nbinom.cdf(3, 5, x) + scipy.stats.nbinom.sf(2, 4, x)),
], ids=["nbdtr", "nbdtrc", "nbinom"])
def test_negative_binomial_distribution_functions(f):
    check(f, np.array([0.3, 0.5, 0.9, 0.4, 0.7, 0.1]))


def test_negative_binomial_in_the_number_of_successes_is_refused():
    with pytest.raises(UnsupportedOperationError, match="number of successes"):
        mutad.gradient(lambda x: scipy.special.nbdtr(2, x[0] * 10, 0.3), X.copy())
