"""SciPy programs that stopped: Bessel functions differentiated in their order (jv, yv, iv,
ive; scipy.stats.ncx2 in its degrees of freedom, whose density is SciPy's ive of order
df/2 - 1), Kummer's and Gauss's hypergeometric functions
(hyp1f1, hyp2f1) in their parameters, scipy.stats.ncx2 in its degrees of freedom. Each checked with central differences (``tests.test_scipy_stops.check``: reverse
and forward mode, a replay), its value SciPy's bit for bit and the caller's arrays unchanged,
and replayed a third time."""

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats

import mutad

from tests.test_scipy_stops8 import check_replayed

X = np.array([0.7, 1.3, 0.4, 2.9])
W = np.cos(np.arange(4.0))


# ----------------------------------------------------------------------------------------------
# Bessel functions in their order: a first derivative, by their series or Schläfli's integrals


_IN_ORDER = {
    "jv": lambda p: (sc.jv(p, 2.0) * W).sum() + sc.jv(2.0 * p, 15.0) @ W,
    "yv": lambda p: (sc.yv(p, 2.5) * W).sum() + sc.yve(p - 0.5, 0.3) @ W,
    "iv": lambda p: (sc.iv(p, 1.5) * W).sum() + np.log(sc.ive(p, 40.0)).sum(),
    "besselian_mixture": lambda p: (sc.jv(p[:2], p[2:]) ** 2).sum() + sc.iv(p[0], p[3]),
    "ncx2_df": lambda p: scipy.stats.ncx2.logpdf(3.0, p + 1.0, 0.5 * p[::-1]).sum(),
    "ncx2_fit": lambda p: scipy.stats.ncx2.logpdf(W ** 2 + 0.5, p[0] + 0.5, p[1]).sum()
    + scipy.stats.ncx2.pdf(1.2, p[2], p[3]),
    "rice_like": lambda p: np.log(sc.ive(p[0] - 1.0, p[1] * p[2])).sum() - p[3] * p[0],
}


@pytest.mark.parametrize("name", list(_IN_ORDER))
def test_bessel_functions_in_their_order(name):
    """Regression: jv, yv, iv and ive were refused in their order ("no derivative with
    respect to the order v"), and so was ncx2 in its degrees of freedom."""
    check_replayed(_IN_ORDER[name], X.copy(), rtol=1e-6, atol=1e-7)


def test_an_order_of_at_most_minus_one_is_refused():
    """The series serves orders v > -1: an order below is refused, not given a wrong number."""
    with pytest.raises(mutad.MutadError, match=r"order v for v > -1"):
        mutad.gradient(lambda v: sc.jv(v, 2.0), -1.5)
    np.testing.assert_allclose(mutad.gradient(lambda v: sc.yv(v, 2.0), -1.5)[0],
                               (sc.yv(-1.5 + 1e-6, 2.0) - sc.yv(-1.5 - 1e-6, 2.0)) / 2e-6,
                               rtol=1e-7)


@pytest.mark.parametrize("function", [sc.jv, sc.iv, sc.ive, sc.yv])
def test_a_second_derivative_in_the_order_is_refused(function):
    with pytest.raises(mutad.MutadError, match="second derivative"):
        mutad.hessian(lambda v: function(v, 2.0), 0.7)
    with pytest.raises(mutad.MutadError, match="second derivative"):
        mutad.hessian(lambda vx: function(vx[0], vx[1]), np.array([0.7, 2.0]))


# ----------------------------------------------------------------------------------------------
# Kummer's function in its parameters a and b (its series; Kummer's transformation for z < 0)


def _kummer(p):
    a, b = p[:2], p[2:] + 1.0
    return (sc.hyp1f1(a, b, 0.7 * W[:2]) * W[:2]).sum() + np.log(sc.hyp1f1(b, b + a, -3.0)).sum()


def test_kummers_function_in_its_parameters():
    """Regression: hyp1f1 was refused in a and b ("no derivative with respect to the
    parameter a")."""
    check_replayed(_kummer, X.copy())


def _gauss(p):
    return (sc.hyp2f1(p[:2], p[2:], p[0] + 2.0, 0.6 * W[:2]) * W[:2]).sum() + sc.hyp2f1(
        0.5, 1.0, p[3] + 1.0, -0.8)


def test_gauss_hypergeometric_function_in_its_parameters():
    """Regression: hyp2f1 was refused in a, b and c."""
    check_replayed(_gauss, X.copy())


def test_gauss_hypergeometric_function_beyond_its_series_is_refused():
    """Its series serves |z| <= 0.9 and c > 0: elsewhere the parameters are refused."""
    with pytest.raises(mutad.MutadError, match=r"\|z\| <= 0.9"):
        mutad.gradient(lambda a: sc.hyp2f1(a, 1.5, 2.5, 0.95), 0.5)
    with pytest.raises(mutad.MutadError, match="c > 0"):
        mutad.gradient(lambda c: sc.hyp2f1(0.5, 1.5, c, 0.5), -0.5)
    assert mutad.gradient(lambda z: sc.hyp2f1(0.5, 1.5, 2.5, z), 0.95)[0] > 0  # (z, as before)


def test_kummers_function_where_its_series_cancels_is_refused():
    """a > b with z < 0 (and a < 0 with z > 0): the series' terms of both signs cancel; the
    derivative is refused rather than given with the digits lost."""
    with pytest.raises(mutad.MutadError, match="cancels"):
        mutad.gradient(lambda a: sc.hyp1f1(a, 1.5, -50.0), 20.0)
    with pytest.raises(mutad.MutadError, match="second derivative"):
        mutad.hessian(lambda a: sc.hyp1f1(a, 1.5, 2.0), 0.5)


# ----------------------------------------------------------------------------------------------
# scipy.stats.ncx2 in its degrees of freedom: its Poisson mixture of central distributions,
# differentiated term by term


_NCX2 = {
    "cdf": lambda p: scipy.stats.ncx2.cdf(W ** 2 + 0.5, p + 0.5, p[::-1]).sum(),
    "sf": lambda p: scipy.stats.ncx2.logsf(3.0, p + 1.0, 0.7).sum(),
    "pdf": lambda p: scipy.stats.ncx2.pdf(2.0, p[0] + 1.0, p[1] * 5.0),
    "ppf": lambda p: scipy.stats.ncx2.ppf(0.3, p[:2] + 1.0, p[2:]).sum(),
    "isf": lambda p: scipy.stats.ncx2.isf(0.3, p + 1.0, 2.0) @ W,
    "power": lambda p: scipy.stats.ncx2.sf(scipy.stats.chi2.isf(0.05, p[0] + 2.0),
                                           p[0] + 2.0, 10.0 * p[1] ** 2),
}


@pytest.mark.parametrize("name", list(_NCX2))
def test_the_noncentral_chi_squared_distribution_in_its_degrees_of_freedom(name):
    """Regression: ncx2's cdf, sf, pdf, ppf, isf were refused in df ("no derivative with
    respect to the degrees of freedom df")."""
    check_replayed(_NCX2[name], X.copy(), rtol=1e-6, atol=1e-7)
