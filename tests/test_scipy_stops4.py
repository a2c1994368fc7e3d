"""SciPy programs that stopped, found among programs written as scientists use SciPy inside a
differentiated function: each checked with ``mutad.testing``'s finite differences, its value
SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
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

