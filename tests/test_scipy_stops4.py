"""SciPy programs that stopped, found among programs written as scientists use SciPy inside a
differentiated function: each checked with ``mutad.testing``'s finite differences, its value
SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.signal
import scipy.stats

from tests.test_scipy_stops import check

X = np.array([0.3, 0.5, 0.9, 1.4, 0.7, 1.1])


# ----------------------------------------------------------------------------------------------
# NumPy's readers reached through the numpy module by SciPy code mutad follows: qmc.scale's
# _validate_bounds broadcasts a list of traced bounds (np.broadcast_to([...], d))


def test_qmc_scale_of_traced_bounds_in_a_list():
    sample = np.array([[0.1, 0.2], [0.5, 0.9]])

    def f(x):
        return np.sum(scipy.stats.qmc.scale(sample, [0, 0], [x[0] + 1, x[1] + 1]))

    check(f, X.copy())


def test_qmc_scale_back_of_traced_bounds_in_a_list():
    sample = np.array([[1.1, 1.2], [1.5, 1.9]])

    def f(x):
        scaled = scipy.stats.qmc.scale(sample, [x[2], 1.0], [3.0, x[3] + 2], reverse=True)
        return np.sum(scaled ** 2)

    check(f, X.copy())


def test_sweep_poly_of_a_poly1d_of_traced_coefficients():
    # (its np.polyint of the poly1d, reached through the numpy module)
    def f(x):
        return scipy.signal.sweep_poly(x, np.poly1d([1.0, x[0]])).sum()

    check(f, X.copy())


# ----------------------------------------------------------------------------------------------
# interp1d's piecewise constant kinds of traced knots (ecdf's evaluate): the data point each
# query picks is a step function of the knots, of derivative zero in them; the data keep theirs,
# and a replay picks the points again (at 1.05 x the queries pick other points)

QUERIES = np.array([0.52, 0.71, 0.2, 1.0])


@pytest.mark.parametrize("kind", ["previous", "next", "nearest", "nearest-up", "zero"])
def test_interp1d_piecewise_constant_of_traced_knots(kind):
    def f(x):
        interpolant = scipy.interpolate.interp1d(x[:3], x[3:] * [1.0, 2.0, 3.0], kind=kind,
                                                 bounds_error=False, fill_value=(-1.0, 5.0))
        return np.sum(interpolant(QUERIES) * [1.0, 2.0, 3.0, 4.0])

    check(f, X.copy())


@pytest.mark.parametrize("kind", ["previous", "nearest"])
def test_interp1d_piecewise_constant_of_unsorted_knots_and_traced_queries(kind):
    def f(x):
        knots = np.array([x[2], x[0], x[1]])
        data = np.stack([x[3:], x[3:] ** 2], axis=1)  # (axis 0: the points)
        interpolant = scipy.interpolate.interp1d(knots, data, kind=kind, axis=0,
                                                 fill_value="extrapolate")
        return np.sum(interpolant(np.array([0.52 * x[5], 0.71, 1.2])) ** 2)

    check(f, X.copy())


def test_ecdf_evaluate():
    check(lambda x: scipy.stats.ecdf(x).cdf.evaluate(0.8), X.copy())
    check(lambda x: np.sum(scipy.stats.ecdf(x).sf.evaluate(QUERIES) * x[:4]), X.copy())
