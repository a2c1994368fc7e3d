"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import cmath
import statistics
from statistics import fmean, pstdev

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])
P = np.array([0.5, 1.2, 0.8, 2.0])


# ----------------------------------------------------------------------------------------------
# Python's statistics of traced numbers: each function's formula in NumPy's functions, its value
# statistics' own (which sums exactly), of its type (NumPy's float64 where statistics gives the
# data's type back, a Python float otherwise)

STATISTICS = [
    lambda x: statistics.mean(x) * x[0],
    lambda x: statistics.mean(list(x * x)),
    lambda x: statistics.fmean(x * x),
    lambda x: fmean(x, weights=[1, 2, 3, 4]),
    lambda x: statistics.fmean(x, [0.5, x[1] ** 2, 1.0, 2.0]),
    lambda x: statistics.median(x * 2),
    lambda x: statistics.median(x[:3]),
    lambda x: statistics.median_low(list(x)) + statistics.median_high(list(x)),
    lambda x: statistics.pvariance(x),
    lambda x: statistics.pvariance(x, mu=x[0]),
    lambda x: statistics.variance(list(x)),
    lambda x: statistics.variance(x, 0.25),
    lambda x: pstdev(x),
    lambda x: statistics.stdev(x) * x[2],
    lambda x: statistics.geometric_mean(x * x + 1),
    lambda x: statistics.harmonic_mean(list(x * x + 1)),
    lambda x: statistics.harmonic_mean(x * x + 1, weights=[1.0, 2.0, 1.0, 3.0]),
    lambda x: statistics.covariance(list(x), [1.0, 3.0, 2.0, 5.0]),
    lambda x: statistics.correlation(x, x ** 3),
    lambda x: sum(statistics.linear_regression([1.0, 2.0, 3.0, 4.0], list(x))),
    lambda x: statistics.linear_regression(x, [1.0, 3.0, 2.0, 5.0], proportional=True).slope,
]


@pytest.mark.parametrize("f", STATISTICS)
def test_statistics_of_traced_numbers(f):
    check(f, X)


def test_statistics_give_the_types_of_pythons_functions():
    """``statistics.mean`` of NumPy's float64 scalars is one (a strong float64 in NumPy's
    promotion); ``fmean``'s and ``pstdev``'s a Python float (weak)."""
    def f(x):
        a = statistics.mean(x) * np.float32(2)
        b = statistics.fmean(x) * np.ones(2, np.float32)
        assert np.result_type(a) == np.float64 and b.dtype == np.float32
        assert isinstance(statistics.median(x), np.float64)
        return a + statistics.fmean(x) * x[1]
    check(f, X)


def test_statistics_imported_inside_the_function():
    def f(x):
        import statistics as st
        from statistics import pvariance
        return st.fmean(x) * pvariance(x)
    check(f, X)


def test_statistics_errors_are_pythons():
    def f(x):
        return statistics.variance(x[:1])
    with pytest.raises(statistics.StatisticsError):
        mutad.gradient(f, X)


def test_statistics_of_plain_numbers_in_a_differentiation():
    def f(x):
        return x[0] * statistics.mean([1.0, 2.0, 4.0]) + statistics.median([3, 1, 2])
    check(f, X)


# ----------------------------------------------------------------------------------------------
# Python's cmath of traced numbers: NumPy's complex functions, cmath's value

CMATH = [
    lambda x: cmath.exp(complex(x[0], x[1])).real,
    lambda x: abs(cmath.sqrt(x[0] - 1.0)) + cmath.phase(complex(x[1], x[2])),
    lambda x: cmath.log(x[3] + 1j * x[1]).imag + cmath.log(x[3] + 2.0, 10.0).real,
    lambda x: cmath.sin(x[0] + 1j * x[2]).imag * cmath.cosh(x[1] * 1j).real,
    lambda x: cmath.atan(x[2] * (1 + 1j)).real + cmath.asinh(x[1] + 0.5j).imag,
    lambda x: cmath.polar(complex(x[0], x[1]))[0] * cmath.polar(complex(x[2], x[3]))[1],
    lambda x: cmath.rect(x[0], x[1]).imag + cmath.rect(2.0, x[3]).real,
]


@pytest.mark.parametrize("f", CMATH)
def test_cmath_of_traced_numbers(f):
    check(f, X)


def test_cmath_gives_pythons_numbers():
    def f(x):
        z = cmath.exp(x[0] * 1j)
        assert (z * np.ones(2, np.complex64)).dtype == np.complex64
        assert cmath.isfinite(z) and not cmath.isnan(z)
        return z.real
    check(f, X)


# ----------------------------------------------------------------------------------------------
# numpy.polynomial's series of plain coefficients made in the function: their coefficients are
# constants the function may write traced values into, as np.zeros' are

P_ = np.polynomial


@pytest.mark.parametrize("f", [
    lambda x: P_.polynomial.polyval(x[1], _written(P_.Polynomial([1.0, 2.0, 3.0]).coef.copy(), x)),
    lambda x: _series_written(P_.Polynomial([1.0, 2.0, 3.0]), x)(x[1]),
    lambda x: _series_written(P_.Chebyshev([1, 2, 3], domain=[-2, 2]), x)(x[2]),
    lambda x: np.sum(_series_written(P_.Legendre((0.5, 1.5, -1.0)), x).deriv()(x)),
    lambda x: (_series_written(P_.Polynomial([1.0, 2.0, 3.0]), x) ** 2)(x[3]),
    lambda x: np.sum(P_.Hermite([1.0, 2.0]).coef * x[:2]) + P_.Polynomial([1.0, 2.0])(x[0]),
])
def test_series_of_plain_coefficients_take_traced_values(f):
    check(f, X)


def _written(c, x):
    c[0] = x[0] * x[3]
    return c


def _series_written(p, x):
    p.coef[1:] += x[1:3] ** 2
    return p


def test_series_of_plain_coefficients_outside_a_differentiation_are_numpys():
    p = P_.Polynomial([1.0, 2.0, 3.0])
    assert type(p.coef) is np.ndarray and p(2.0) == 17.0
