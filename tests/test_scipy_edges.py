"""SciPy's special functions and distributions at the edges: values and derivatives against
mpmath.

Every rule of ``mutad/scipy/special.py`` and ``mutad/scipy/stats.py`` is evaluated where SciPy
switches to an algorithm of its own (asymptotic branches, log-space tails, reflection near
poles): large and tiny arguments, far tails, poles, support boundaries, large shape
parameters. At each point:

* the value mutad gives while differentiating is SciPy's own, bit for bit;
* the first derivative, in reverse mode (``mutad.gradient``) and forward mode (``mutad.jvp``),
  matches mpmath's to ``FIRST`` (relative), and the second derivative, forward over reverse
  (``mutad.hessian``) and reverse over forward (``mutad.hvp``), to ``SECOND``, with an
  absolute floor of 1e-14 times the size of the neighbouring terms (a derivative that is
  exactly 0, at a symmetry point, is compared against the scale of the function instead).

The references are mpmath's, at 60 digits, its derivatives by its own high-precision finite
differences with a step relative to the argument (or by quadrature, for Student's t
distribution function in df). Where SciPy's own value is inexact (a Bessel function near a
zero, beta(1e6, 2.5)) a derivative that multiplies it inherits that error, and its point is
not among these.
"""

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sc
import scipy.stats

import mutad
from mutad.scipy import special
from scipy.special._ufuncs import _scaled_exp1

# The slow kind (high-precision references from mpmath, at the special functions' edges):
# not in the fast subset, python -m pytest -m "not slow".
pytestmark = pytest.mark.slow

FIRST = 1e-11
SECOND = 1e-9
DIGITS = 60


def mp_derivatives(fm, x, step=None):
    """(value, first, second derivative) of mpmath's ``fm`` at ``x``."""
    with mp.workdps(DIGITS):
        x = mp.mpf(x)
        h = step if step is not None else mp.mpf(10) ** -20 * (abs(x) if x else 1)
        return tuple(float(mp.diff(fm, x, n, h=h)) for n in range(3))


def mutad_derivatives(f, x):
    """mutad's value while differentiating, first derivatives (reverse, forward) and second
    derivatives (forward over reverse, reverse over forward) of scalar ``f`` at ``x``."""
    value, _ = mutad.pullback(f, x)
    reverse, = mutad.gradient(f, x)
    _, forward = mutad.jvp(f, (x,), (1.0,))
    hessian = mutad.hessian(f, x)
    hvp = mutad.hvp(f, (x,), (1.0,))
    return float(value), (float(reverse), float(forward)), (float(hessian), float(hvp))


def relative_error(ours, reference, floor):
    if ours == reference:
        return 0.0
    return abs(ours - reference) / max(abs(reference), floor, 1e-300)


def check_edge(f, fm, x, first=FIRST, second=SECOND):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # SciPy's own, at the edges
        value, firsts, seconds = mutad_derivatives(f, x)
        plain = float(f(x))
    assert value == plain or (math.isnan(value) and math.isnan(plain)), (value, plain)
    v, d1, d2 = mp_derivatives(fm, x)
    scale = abs(x) if x else 1.0
    floor1 = 1e-14 * (abs(v) / scale + abs(d2) * scale)
    floor2 = 1e-14 * (abs(d1) / scale + abs(v) / scale / scale)
    for d in firsts:
        assert relative_error(d, d1, floor1) <= first, (d, d1)
    for d in seconds:
        assert relative_error(d, d2, floor2) <= second, (d, d2)


def mp_t_cdf(nu, t):
    """Student's t distribution function, through the incomplete beta function."""
    x = nu / (nu + t * t)
    tail = mp.betainc(nu / 2, mp.mpf(1) / 2, 0, x, regularized=True) / 2
    return tail if t <= 0 else 1 - tail


def mp_t_logpdf(nu, z):
    return (mp.loggamma((nu + 1) / 2) - mp.loggamma(nu / 2) - mp.log(nu * mp.pi) / 2
            - (nu + 1) / 2 * mp.log1p(z * z / nu))


def bessel(kind, v, scaled=False):
    function = {"j": mp.besselj, "y": mp.bessely, "i": mp.besseli, "k": mp.besselk}[kind]
    if not scaled:
        return lambda x: function(v, x)
    if kind == "i":
        return lambda x: function(v, x) * mp.exp(-abs(x))
    return lambda x: function(v, x) * mp.exp(x)


# name, f (SciPy's names, one differentiated argument), mpmath's f, edge points
SPECIAL = [
    ("gamma", sc.gamma, mp.gamma, [1e-8, 0.5, 150.0, -2.5, -1 + 1e-8, 1.4616321449683622]),
    ("rgamma", sc.rgamma, mp.rgamma,
     [0.0, -1.0, -2.0, -7.0, -1 + 1e-8, 1e-9, 0.5, -10.5, 30.0, 150.0]),
    ("gammaln", sc.gammaln, lambda x: mp.log(abs(mp.gamma(x))),
     [1e-8, 1.0, 2.0, 1e6, 1e15, -2.5, -1 + 1e-8]),
    ("loggamma", sc.loggamma, mp.loggamma, [1e-8, 1.0, 1e6, 1e15]),
    ("psi", sc.psi, mp.digamma, [1e-8, 1.4616321449683622, 1e6, 1e15, -0.5, -2.5]),
    ("polygamma1", lambda x: special.polygamma(1, x), lambda x: mp.psi(1, x), [1e-6, 1e8, -2.5]),
    ("multigammaln", lambda a: special.multigammaln(a, 3), lambda a: (
        3 * mp.log(mp.pi) / 2 + sum(mp.loggamma(a - mp.mpf(j) / 2) for j in range(3))),
     [1.0 + 1e-8, 1e8]),
    ("beta_a", lambda a: sc.beta(a, 2.5), lambda a: mp.beta(a, 2.5), [1e-8, 0.5, 30.0, 1e10]),
    ("betaln_a", lambda a: sc.betaln(a, 2.5), lambda a: mp.log(mp.beta(a, 2.5)),
     [1e-8, 30.0, 1e6, 1e10, 1e15]),
    ("betaln_b", lambda b: sc.betaln(1e8, b), lambda b: mp.log(mp.beta(1e8, b)),
     [1e-6, 0.5, 1e8]),
    ("betaln_tiny_b", lambda a: sc.betaln(a, 1e-9), lambda a: mp.log(mp.beta(a, 1e-9)),
     [0.5, 50.0]),
    ("betainc_x", lambda x: sc.betainc(2.5, 1.5, x),
     lambda x: mp.betainc(2.5, 1.5, 0, x, regularized=True), [1e-10, 0.3, 1 - 1e-10]),
    ("betainc_x_large", lambda x: sc.betainc(0.5, 1e6, x),
     lambda x: mp.betainc(0.5, 1e6, 0, x, regularized=True), [1e-10, 4.99999750000125e-07]),
    ("betaincc_x", lambda x: sc.betaincc(1e-3, 1e-3, x),
     lambda x: mp.betainc(1e-3, 1e-3, x, 1, regularized=True), [1e-10, 0.5, 1 - 1e-10]),
    ("gammainc_x", lambda x: sc.gammainc(0.5, x),
     lambda x: mp.gammainc(0.5, 0, x, regularized=True), [1e-10, 0.5, 30.0]),
    ("gammainc_x_large", lambda x: sc.gammainc(1e6, x),
     lambda x: mp.gammainc(1e6, 0, x, regularized=True), [1e6, 1e6 - 3e3]),
    ("gammaincc_x_large", lambda x: sc.gammaincc(1e6, x),
     lambda x: mp.gammainc(1e6, x, mp.inf, regularized=True), [1e6, 1e6 + 3e3]),
    ("stdtr_t", lambda t: sc.stdtr(3.0, t), lambda t: mp_t_cdf(mp.mpf(3), t),
     [-1e5, -3.0, 0.5, 1e3]),
    ("stdtr_t_small_df", lambda t: sc.stdtr(0.5, t), lambda t: mp_t_cdf(mp.mpf(0.5), t),
     [-1e5, 0.0, 2.0]),
    ("stdtr_t_large_df", lambda t: sc.stdtr(1e10, t),
     lambda t: mp_t_cdf_large(mp.mpf(1e10), t), [-3.0, 0.5]),
    ("erf", sc.erf, mp.erf, [1e-10, 0.5, 6.0, -5.0]),
    ("erfc", sc.erfc, mp.erfc, [1e-10, 3.0, 26.0, -5.0]),
    ("erfcx", sc.erfcx, lambda x: mp.exp(x * x) * mp.erfc(x),
     [-20.0, -1.0, 1e-10, 5.0, 9.999, 10.0, 30.0, 1e5, 1e8]),
    ("erfinv", sc.erfinv, mp.erfinv, [1e-10, 0.5, 0.999999, 1 - 1e-15, -0.9]),
    ("erfcinv", sc.erfcinv, lambda x: mp.erfinv(1 - x), [1e-10, 0.5, 1.5, 2 - 1e-12]),
    ("ndtr", sc.ndtr, mp.ncdf, [-37.5, -10.0, 0.0, 5.0, 8.0]),
    ("ndtri", sc.ndtri, lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1), [1e-10, 0.3, 1 - 1e-12]),
    ("log_ndtr", sc.log_ndtr, lambda x: mp.log(mp.ncdf(x)),
     [-1e5, -3000.0, -40.0, -5.0, 0.0, 5.0, 10.0]),
    ("expit", sc.expit, lambda x: 1 / (1 + mp.exp(-x)), [-700.0, -40.0, 0.0, 20.0, 40.0]),
    ("log_expit", sc.log_expit, lambda x: -mp.log1p(mp.exp(-x)), [-700.0, -40.0, 0.0, 40.0]),
    ("logit", sc.logit, lambda p: mp.log(p / (1 - p)), [1e-10, 0.5, 1 - 1e-10]),
    ("xlogy_y", lambda y: sc.xlogy(2.0, y), lambda y: 2 * mp.log(y), [1e-300, 1.0, 1e300]),
    ("xlog1py_y", lambda y: sc.xlog1py(2.0, y), lambda y: 2 * mp.log1p(y),
     [-1 + 1e-10, 1e-20, 1e300]),
    ("entr", sc.entr, lambda x: -x * mp.log(x), [1e-300, 0.5, 1e10]),
    ("rel_entr_x", lambda x: sc.rel_entr(x, 2.0), lambda x: x * mp.log(x / 2), [1e-300, 1.0]),
    ("j0", sc.j0, mp.j0, [1e-10, 1e3]),
    ("j1", sc.j1, mp.j1, [1e-10, 1.0]),
    ("jv", lambda x: sc.jv(2.5, x), bessel("j", 2.5), [1e-5, 1.0, 1e3]),
    ("y0", sc.y0, bessel("y", 0), [1e-10, 3.0]),
    ("y1", sc.y1, bessel("y", 1), [1e-10, 3.0]),
    ("yn", lambda x: sc.yn(3, x), bessel("y", 3), [1e-5, 1.0, 1e3]),
    ("yv", lambda x: sc.yv(2.5, x), bessel("y", 2.5), [1e-5, 1.0, 1e3]),
    ("i0", sc.i0, bessel("i", 0), [1e-10, 1.0, 700.0]),
    ("i1", sc.i1, bessel("i", 1), [1e-10, 1.0, 700.0]),
    ("iv", lambda x: sc.iv(2.5, x), bessel("i", 2.5), [1e-5, 1.0, 500.0]),
    ("i0e", sc.i0e, bessel("i", 0, True), [1e-10, 1.0, 49.0, 50.0, 1e3, 1e8, -5.0, -1e8]),
    ("i1e", sc.i1e, bessel("i", 1, True), [1e-10, 1.0, 50.0, 1e3, 1e8, -5.0, -1e8]),
    ("ive", lambda x: sc.ive(2.5, x), bessel("i", 2.5, True), [1e-5, 1.0, 49.0, 1e3, 1e8]),
    ("ive_integer", lambda x: sc.ive(3.0, x), bessel("i", 3, True), [-1e8, -5.0, 1e8]),
    ("ive_high_order", lambda x: sc.ive(20.0, x), bessel("i", 20, True), [30.0, 1599.0, 1e6]),
    ("k0", sc.k0, bessel("k", 0), [1e-10, 1.0, 700.0]),
    ("k1", sc.k1, bessel("k", 1), [1e-10, 1.0, 700.0]),
    ("kv", lambda x: sc.kv(2.5, x), bessel("k", 2.5), [1e-5, 1.0, 500.0, 705.0]),
    ("k0e", sc.k0e, bessel("k", 0, True), [1e-10, 1.0, 50.0, 1e3, 1e8]),
    ("k1e", sc.k1e, bessel("k", 1, True), [1e-10, 1.0, 50.0, 1e3, 1e8]),
    ("kve", lambda x: sc.kve(2.5, x), bessel("k", 2.5, True), [1e-5, 1.0, 1e3, 1e8]),
    # K_v in its order (the trapezoidal rule of its integral): tiny and large x, large order
    ("kv_order", lambda v: sc.kv(v, 1e-3), lambda v: mp.besselk(v, 1e-3), [0.5, 35.5]),
    ("kve_order", lambda v: sc.kve(v, 1e4), lambda v: mp.besselk(v, 1e4) * mp.exp(1e4),
     [1e-6, 120.0]),
    # the Hurwitz zeta function in its exponent (Euler-Maclaurin): near its pole at 1, large
    # exponents, a small and a large offset
    ("zeta_x", lambda x: sc.zeta(x, 0.3), lambda x: mp.zeta(x, 0.3), [1 + 1e-6, 40.0]),
    ("zeta_x_large_q", lambda x: sc.zeta(x, 250.0), lambda x: mp.zeta(x, 250.0), [31.7]),
    # x e^x E_1(x), scipy.stats.invgauss.entropy's: its closed form's cancellation, its series
    ("scaled_exp1", _scaled_exp1, lambda x: x * mp.exp(x) * mp.e1(x), [1e-300, 49.9, 1e8]),
]


# J_v, Y_v, I_v in their order, a first derivative (the second is refused): where the power
# series serves (J_v, I_v tiny, v beyond x), where Schläfli's integrals do (x beyond v, large x,
# I_v's at v = 0, which is -K_0(x)), an order in (-1, 0), a tiny argument
FIRST_ONLY = [
    ("jv_order", lambda v: sc.jv(v, 2.0), lambda v: mp.besselj(v, 2.0), [-0.5, 0.3, 20.0]),
    ("jv_order_evanescent", lambda v: sc.jv(v, 50.0), lambda v: mp.besselj(v, 50.0), [100.0]),
    ("jv_order_large_x", lambda v: sc.jv(v, 300.0), lambda v: mp.besselj(v, 300.0), [1.0]),
    ("yv_order", lambda v: sc.yv(v, 1e-3), lambda v: mp.bessely(v, 1e-3), [-0.9, 0.0, 2.5]),
    ("yv_order_large_x", lambda v: sc.yv(v, 90.0), lambda v: mp.bessely(v, 90.0), [0.3, 30.0]),
    ("iv_order", lambda v: sc.iv(v, 3.0), lambda v: mp.besseli(v, 3.0), [-0.5, 0.0, 40.0]),
    ("ive_order", lambda v: sc.ive(v, 200.0), lambda v: mp.besseli(v, 200.0) * mp.exp(-200),
     [0.0, 2.5, 100.0]),
    # Kummer's function in its parameters (the series; for z < 0 Kummer's transformation): a
    # term of the series in a passing through 0 (a = -2.5, the sixth), a polynomial (a = -2),
    # z large, negative z, M(0, b, z) = 1 in b
    ("hyp1f1_a", lambda a: sc.hyp1f1(a, 0.3, 0.7), lambda a: mp.hyp1f1(a, 0.3, 0.7),
     [-2.5, -2.0, 0.5]),
    ("hyp1f1_a_large_z", lambda a: sc.hyp1f1(a, 1.5, 60.0), lambda a: mp.hyp1f1(a, 1.5, 60.0),
     [0.5, 3.0]),
    ("hyp1f1_a_negative_z", lambda a: sc.hyp1f1(a, 10.0, -50.0),
     lambda a: mp.hyp1f1(a, 10.0, -50.0), [0.5, 3.0]),
    ("hyp1f1_b", lambda b: sc.hyp1f1(0.5, b, 5.0), lambda b: mp.hyp1f1(0.5, b, 5.0), [0.3, 10.0]),
    ("hyp1f1_b_negative_z", lambda b: sc.hyp1f1(-2.5, b, -5.0),
     lambda b: mp.hyp1f1(-2.5, b, -5.0), [1.5]),
    ("hyp1f1_b_of_zero_a", lambda b: sc.hyp1f1(0.0, b, -5.0) * (1 + b), lambda b: 1 + b, [1.5]),
    # Gauss's function in its parameters (the series, |z| <= 0.9): a polynomial (a = -2), z at
    # either end
    ("hyp2f1_a", lambda a: sc.hyp2f1(a, 1.5, 2.5, 0.9), lambda a: mp.hyp2f1(a, 1.5, 2.5, 0.9),
     [-2.0, 0.5, 3.0]),
    ("hyp2f1_b", lambda b: sc.hyp2f1(0.5, b, 0.7, -0.9), lambda b: mp.hyp2f1(0.5, b, 0.7, -0.9),
     [0.3, 1.5]),
    ("hyp2f1_c", lambda c: sc.hyp2f1(-2.5, 0.3, c, 0.5), lambda c: mp.hyp2f1(-2.5, 0.3, c, 0.5),
     [0.7, 10.0]),
]


@pytest.mark.parametrize("f, fm, x", [pytest.param(f, fm, x, id=f"{name}({x!r})")
                                      for name, f, fm, points in FIRST_ONLY for x in points])
def test_first_derivatives_at_their_edges(f, fm, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, (reverse,) = mutad.value_and_gradient(f, x)
        _, forward = mutad.jvp(f, (x,), (1.0,))
    assert value == f(x)
    with mp.workdps(DIGITS):
        point = mp.mpf(x)
        v, d1 = (float(mp.diff(fm, point, n, h=mp.mpf(10) ** -20 * (abs(point) or 1)))
                 for n in range(2))
    floor = 1e-14 * abs(v) / (abs(x) or 1.0)
    for d in (reverse, forward):
        assert relative_error(float(d), d1, floor) <= FIRST, (d, d1)


def mp_t_cdf_large(nu, t):
    """Student's t distribution function for large ν, by its hypergeometric series."""
    return mp.mpf(1) / 2 + t * mp.exp(mp.loggamma((nu + 1) / 2) - mp.loggamma(nu / 2)) / (
        mp.sqrt(mp.pi * nu)) * mp.hyp2f1(mp.mpf(1) / 2, (nu + 1) / 2, mp.mpf(3) / 2, -t * t / nu)


def special_cases():
    for name, f, fm, points in SPECIAL:
        for x in points:
            yield pytest.param(f, fm, x, id=f"{name}({x!r})")


@pytest.mark.parametrize("f, fm, x", list(special_cases()))
def test_special_function_at_its_edges(f, fm, x):
    check_edge(lambda v: f(v), fm, x)


# ----------------------------------------------------------------------------------------------
# scipy.stats by SciPy's names (routed to mutad's rules while a differentiation runs)


def mp_norm_logcdf(z):
    return mp.log(mp.ncdf(z))


def mp_laplace_cdf(z):
    return mp.exp(z) / 2 if z < 0 else 1 - mp.exp(-z) / 2


def mp_cauchy_cdf(z):
    return mp.atan2(1, -z) / mp.pi


def mp_gamma_logpdf(a, z):
    return (a - 1) * mp.log(z) - z - mp.loggamma(a)


# name, f of one differentiated argument (by SciPy's names), mpmath's f, edge points
STATS = [
    ("norm.logpdf", lambda x: scipy.stats.norm.logpdf(x, 0.5, 2.0),
     lambda x: -((x - 0.5) / 2) ** 2 / 2 - mp.log(2 * mp.pi) / 2 - mp.log(2), [-1e5, 0.5, 30.0]),
    ("norm.cdf", lambda x: scipy.stats.norm.cdf(x), mp.ncdf, [-37.5, -5.0, 0.0, 8.0]),
    ("norm.logcdf", lambda x: scipy.stats.norm.logcdf(x), mp_norm_logcdf,
     [-1e5, -3000.0, -40.0, 0.0, 10.0]),
    ("norm.logcdf_small_scale", lambda x: scipy.stats.norm.logcdf(x, 0.0, 1e-3),
     lambda x: mp_norm_logcdf(x * 1000), [-100.0, -3.0, 0.001]),
    ("norm.logcdf_scale", lambda s: scipy.stats.norm.logcdf(-100.0, 0.0, s),
     lambda s: mp_norm_logcdf(-100 / s), [1e-3, 2.0]),
    ("norm.sf", lambda x: scipy.stats.norm.sf(x), lambda x: mp.ncdf(-x), [-8.0, 0.0, 37.5]),
    ("norm.logsf", lambda x: scipy.stats.norm.logsf(x), lambda x: mp_norm_logcdf(-x),
     [-10.0, 0.0, 40.0, 1e5]),
    ("t.logpdf_x", lambda x: scipy.stats.t.logpdf(x, 3.5),
     lambda x: mp_t_logpdf(mp.mpf(3.5), x), [-1e150, -1e5, 0.0, 1.0, 1e10]),
    ("t.logpdf_df", lambda df: scipy.stats.t.logpdf(1.0, df),
     lambda df: mp_t_logpdf(df, 1), [0.05, 3.5, 19.9, 20.0, 1e4, 1e10, 1e15]),
    ("t.logpdf_df_tail", lambda df: scipy.stats.t.logpdf(1e3, df),
     lambda df: mp_t_logpdf(df, 1000), [0.5, 1e6, 1e12]),
    ("t.logpdf_x_large_df", lambda x: scipy.stats.t.logpdf(x, 1e10),
     lambda x: mp_t_logpdf(mp.mpf(1e10), x), [0.0, 1.0, 300.0, 1e6]),
    ("t.pdf_df", lambda df: scipy.stats.t.pdf(2.0, df),
     lambda df: mp.exp(mp_t_logpdf(df, 2)), [0.3, 1e8]),
    ("t.cdf_x", lambda x: scipy.stats.t.cdf(x, 2.5), lambda x: mp_t_cdf(mp.mpf(2.5), x),
     [-1e6, -3.0, 0.0, 1e3]),
    ("t.logcdf_x", lambda x: scipy.stats.t.logcdf(x, 2.5),
     lambda x: mp.log(mp_t_cdf(mp.mpf(2.5), x)), [-1e6, -3.0, 4.0]),
    ("t.sf_x_large_df", lambda x: scipy.stats.t.sf(x, 1e10),
     lambda x: 1 - mp_t_cdf_large(mp.mpf(1e10), x), [-2.0, 0.5]),
    ("gamma.logpdf_x", lambda x: scipy.stats.gamma.logpdf(x, 2.5),
     lambda x: mp_gamma_logpdf(mp.mpf(2.5), x), [1e-300, 1.5, 1e5]),
    ("gamma.logpdf_a", lambda a: scipy.stats.gamma.logpdf(1e10, a),
     lambda a: mp_gamma_logpdf(a, mp.mpf(1e10)), [1e10, 1e10 + 1e5]),
    ("gamma.logpdf_a_small", lambda a: scipy.stats.gamma.logpdf(3.0, a),
     lambda a: mp_gamma_logpdf(a, 3), [1e-8, 9.99, 10.0, 30.0]),
    ("gamma.logpdf_x_large_a", lambda x: scipy.stats.gamma.logpdf(x, 1e10),
     lambda x: mp_gamma_logpdf(mp.mpf(1e10), x), [1e10, 1e10 - 3e5, 1e-3]),
    ("gamma.cdf_x", lambda x: scipy.stats.gamma.cdf(x, 1e6),
     lambda x: mp.gammainc(1e6, 0, x, regularized=True), [1e6, 1e6 - 3e3]),
    ("gamma.sf_x", lambda x: scipy.stats.gamma.sf(x, 0.5),
     lambda x: mp.gammainc(0.5, x, mp.inf, regularized=True), [1e-10, 30.0]),
    ("chi2.logpdf_df", lambda df: scipy.stats.chi2.logpdf(2e8, df),
     lambda df: mp_gamma_logpdf(df / 2, mp.mpf(1e8)) - mp.log(2), [2e8, 2e8 + 1e4]),
    ("chi2.cdf_x", lambda x: scipy.stats.chi2.cdf(x, 3.0),
     lambda x: mp.gammainc(1.5, 0, x / 2, regularized=True), [1e-10, 3.0, 60.0]),
    # At the mode, d/da = log x + ψ(a + b) - ψ(a) is 2.5e-9 from terms of size log 2: a
    # point off the mode, where its digits are the formula's to compute.
    ("beta.logpdf_a", lambda a: scipy.stats.beta.logpdf(0.5, a, 1e8),
     lambda a: (a - 1) * mp.log(0.5) + (1e8 - 1) * mp.log(0.5) - mp.log(mp.beta(a, 1e8)),
     [0.5, 1.002e8]),
    ("beta.logpdf_x", lambda x: scipy.stats.beta.logpdf(x, 0.5, 3.0),
     lambda x: -mp.log(x) / 2 + 2 * mp.log1p(-x) - mp.log(mp.beta(0.5, 3)),
     [1e-300, 0.5, 1 - 1e-12]),
    ("beta.cdf_x", lambda x: scipy.stats.beta.cdf(x, 2.5, 1.5),
     lambda x: mp.betainc(2.5, 1.5, 0, x, regularized=True), [1e-10, 0.3, 1 - 1e-10]),
    ("expon.logsf", lambda x: scipy.stats.expon.logsf(x), lambda x: -x, [1e-300, 1e5]),
    ("expon.cdf", lambda x: scipy.stats.expon.cdf(x), lambda x: -mp.expm1(-x),
     [1e-300, 1.0, 40.0]),
    ("laplace.logcdf", lambda x: scipy.stats.laplace.logcdf(x),
     lambda x: mp.log(mp_laplace_cdf(x)), [-1e5, -1.0, 1.0, 40.0]),
    ("laplace.logsf", lambda x: scipy.stats.laplace.logsf(x),
     lambda x: mp.log(1 - mp_laplace_cdf(x)) if x < 0 else -x - mp.log(2), [-40.0, 1.0, 1e5]),
    ("logistic.logpdf", lambda x: scipy.stats.logistic.logpdf(x),
     lambda x: -x - 2 * mp.log1p(mp.exp(-x)), [-1e5, -40.0, 0.0, 1e-8, 40.0]),
    ("logistic.cdf", lambda x: scipy.stats.logistic.cdf(x),
     lambda x: 1 / (1 + mp.exp(-x)), [-700.0, 0.0, 40.0]),
    ("logistic.logcdf", lambda x: scipy.stats.logistic.logcdf(x),
     lambda x: -mp.log1p(mp.exp(-x)), [-1e5, 0.0, 40.0]),
    ("logistic.sf", lambda x: scipy.stats.logistic.sf(x),
     lambda x: 1 / (1 + mp.exp(x)), [-40.0, 700.0]),
    ("cauchy.logpdf", lambda x: scipy.stats.cauchy.logpdf(x),
     lambda x: -mp.log(mp.pi) - mp.log1p(x * x), [-1e200, -1e5, 0.5, 1e160]),
    ("cauchy.cdf", lambda x: scipy.stats.cauchy.cdf(x), mp_cauchy_cdf,
     [-1e16, -1e8, 0.0, 1e3]),
    ("cauchy.logcdf", lambda x: scipy.stats.cauchy.logcdf(x),
     lambda x: mp.log(mp_cauchy_cdf(x)), [-1e200, -1e16, -1e8, -1.0, 0.0, 1e3]),
    ("cauchy.sf", lambda x: scipy.stats.cauchy.sf(x), lambda x: mp_cauchy_cdf(-x),
     [-1e3, 1e8]),
    ("cauchy.logsf", lambda x: scipy.stats.cauchy.logsf(x),
     lambda x: mp.log(mp_cauchy_cdf(-x)), [-1e3, 1.0, 1e16, 1e200]),
    ("dirichlet.logpdf_alpha", lambda a: scipy.stats.dirichlet.logpdf(
        np.array([0.3, 0.5, 0.2]), np.stack([a, 1e8 + 0.0 * a, 3.0 + 0.0 * a])),
     lambda a: ((a - 1) * mp.log(0.3) + (1e8 - 1) * mp.log(0.5) + 2 * mp.log(0.2)
                - mp.loggamma(a) - mp.loggamma(1e8) - mp.loggamma(3) + mp.loggamma(a + 1e8 + 3)),
     [0.5, 1e8, 1e8 + 3e4]),
    ("poisson.logpmf_mu", lambda mu: scipy.stats.poisson.logpmf(3e10, mu),
     lambda mu: 3e10 * mp.log(mu) - mu - mp.loggamma(3e10 + 1), [3e10, 3e10 + 2e5]),
    ("poisson.logpmf_mu_small", lambda mu: scipy.stats.poisson.logpmf(0.0, mu),
     lambda mu: -mu, [1e-300, 2.0]),
    ("poisson.cdf_mu", lambda mu: scipy.stats.poisson.cdf(1e6, mu),
     lambda mu: mp.gammainc(1e6 + 1, mu, mp.inf, regularized=True), [1e6 - 10, 1e6 + 3e3]),
    ("poisson.logsf_mu", lambda mu: scipy.stats.poisson.logsf(3.0, mu),
     lambda mu: mp.log(mp.gammainc(4, 0, mu, regularized=True)), [1e-3, 5.0]),
]


def stats_cases():
    for name, f, fm, points in STATS:
        for x in points:
            yield pytest.param(f, fm, x, id=f"{name}({x!r})")


@pytest.mark.parametrize("f, fm, x", list(stats_cases()))
def test_distribution_at_its_edges(f, fm, x):
    check_edge(f, fm, x)


# ----------------------------------------------------------------------------------------------
# Student's t distribution function in its degrees of freedom


def mp_stdtr_dnu(nu, t, order):
    """∂^order/∂ν^order of Student's t distribution function at (ν, t), from
    ∫_{-∞}^t ∂^order f/∂ν^order du: by mpmath's quadrature over [t, 0] for |t| ≤ 1 (the
    integral over (-∞, 0] is 0 for either order, F(0) = 1/2 for every ν), and for |t| > 1 over
    the tail in v, x = ν/(ν + u²) = x_t v^(2/ν), where the density is x_t^(ν/2) / (ν B(ν/2, 1/2))
    (1 - x)^(-1/2) dv."""
    with mp.workdps(50):  # g is O(1/ν²) from terms O(1/ν): 20 digits go
        nu, t = mp.mpf(nu), mp.mpf(t)
        a = nu / 2
        c1 = (mp.digamma(a + mp.mpf(1) / 2) - mp.digamma(a)) / 2 - 1 / (2 * nu)
        c2 = (mp.psi(1, a + mp.mpf(1) / 2) - mp.psi(1, a)) / 4 + 1 / (2 * nu * nu)

        def h(w):  # ∂^order f/∂ν^order / f, as a function of w = u²/ν
            g = c1 - mp.log1p(w) / 2 + (nu + 1) * w / (2 * nu * (1 + w))
            if order == 1:
                return g
            return g * g + c2 + w * (nu * w - w - 2) / (2 * nu * nu * (1 + w) ** 2)

        big_t = -abs(t)
        if abs(t) <= 1:
            def body(u):
                return mp.exp(mp_t_logpdf(nu, u)) * h(u * u / nu)
            result = -mp.quad(body, [big_t, 0])
        else:
            x_t = nu / (nu + t * t)

            def tail(v):
                x = x_t * v ** (1 / a)
                return (1 - x) ** (-mp.mpf(1) / 2) * h((1 - x) / x)
            result = x_t ** a / (2 * a * mp.beta(a, mp.mpf(1) / 2)) * mp.quad(tail, [0, 1])
        return float(result if t <= 0 else -result)


STDTR_DF = [(nu, t) for nu in (0.05, 1.0, 3.5, 25.0, 1e4, 1e10)
            for t in (-1e6, -30.0, -1.5, -1.0, -0.3, 2.0)]


@pytest.mark.parametrize("nu, t", STDTR_DF, ids=[f"df={nu!r},t={t!r}" for nu, t in STDTR_DF])
def test_student_t_distribution_function_in_its_degrees_of_freedom(nu, t):
    """∂/∂df and ∂²/∂df² of stdtr, by quadrature, against mpmath: reverse and forward mode,
    and the second derivatives forward over reverse and reverse over forward."""
    first, second = mp_stdtr_dnu(nu, t, 1), mp_stdtr_dnu(nu, t, 2)

    def f(df):
        return sc.stdtr(df, t)

    (reverse,), (_, forward) = mutad.gradient(f, nu), mutad.jvp(f, (nu,), (1.0,))
    for d in (reverse, forward):
        assert relative_error(float(d), first, 1e-300) <= FIRST
    for d in (mutad.hessian(f, nu), mutad.hvp(f, (nu,), (1.0,))):
        assert relative_error(float(d), second, 1e-300) <= FIRST
    assert mutad.pullback(f, nu)[0] == sc.stdtr(nu, t)


def test_student_t_distribution_function_mixed_second_derivative():
    """∂²F/∂df∂t = f(t) ∂ log f/∂df (closed form), and the full Hessian of t.cdf in (x, df,
    loc, scale) against finite differences of SciPy's own values, in both modes."""
    with mp.workdps(40):
        nu, t = mp.mpf(4.5), mp.mpf(-2)
        reference = float(mp.diff(lambda n, u: mp_t_cdf(n, u), (nu, t), (1, 1)))
    hessian = mutad.hessian(lambda df, x: sc.stdtr(df, x), 4.5, -2.0, argnums=(0, 1))
    assert relative_error(hessian[0][1], reference, 1e-300) <= FIRST
    assert relative_error(hessian[1][0], reference, 1e-300) <= FIRST

    def f(x, df, loc, scale):
        return scipy.stats.t.cdf(x, df, loc, scale)

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, 0.3, 4.5, -0.2, 1.3, policy=policy, order=2)
    mutad.check_jvp(f, 0.3, 4.5, -0.2, 1.3)


def test_third_derivative_in_the_degrees_of_freedom_is_refused():
    """The quadrature gives two derivatives in df; a third is refused, never a wrong number."""
    def second(df):
        return mutad.hessian(lambda d: sc.stdtr(d, 0.5), df)

    with pytest.raises(mutad.MutadError, match="df"):
        mutad.gradient(second, 3.0)


# ----------------------------------------------------------------------------------------------
# Regressions: each wrong number found, as it was found (the tables above hold the same points
# against mpmath)

EULER = 0.5772156649015329


def _first(f, x):
    return float(mutad.gradient(f, x)[0])


def _second(f, x):
    return float(mutad.hessian(f, x))


def _second_hvp(f, x):
    return float(mutad.hvp(f, (x,), (1.0,)))


REGRESSIONS = [
    # Student's t log-density at large df lost its value and its df-derivative to cancellation
    ("t.logpdf value at df=1e10", lambda: mutad.pullback(
        lambda df: scipy.stats.t.logpdf(1.0, df), 1e10)[0], scipy.stats.t.logpdf(1.0, 1e10), 0),
    ("t.logpdf d/ddf at df=1e10",
     lambda: _first(lambda df: scipy.stats.t.logpdf(1.0, df), 1e10), 4.9999999998333333e-21,
     1e-12),
    # Cauchy's log-cdf underflowed to -inf in the tail, its cdf cancelled
    ("cauchy.logcdf(-1e16)", lambda: mutad.pullback(lambda x: scipy.stats.cauchy.logcdf(x), -1e16)[0],
     -37.98609137375413, 1e-15),
    ("cauchy.cdf(-1e8)", lambda: mutad.pullback(lambda x: scipy.stats.cauchy.cdf(x), -1e8)[0],
     3.183098861837907e-09, 1e-15),
    ("cauchy.logcdf'(-1e16)", lambda: _first(lambda x: scipy.stats.cauchy.logcdf(x), -1e16), 1e-16, 1e-14),
    ("cauchy.logcdf'' (hvp) at -1e200 was nan",
     lambda: _second_hvp(lambda x: scipy.stats.cauchy.logcdf(x), -1e200), 0.0, 0),
    ("cauchy.logpdf' at 1e160 (z² overflowed)",
     lambda: _first(lambda x: scipy.stats.cauchy.logpdf(x), 1e160), -2e-160, 1e-14),
    # log_ndtr's second derivative in the far left tail
    ("log_ndtr'' at -1e5", lambda: _second(sc.log_ndtr, -1e5), -0.9999999999, 1e-12),
    ("log_ndtr'' at -3000", lambda: _second(sc.log_ndtr, -3000.0), -0.99999988888896296, 1e-12),
    ("log_ndtr' at -1e5", lambda: _first(sc.log_ndtr, -1e5), 100000.00001, 1e-12),
    ("norm.logcdf'' with scale 1e-3", lambda: _second(
        lambda x: scipy.stats.norm.logcdf(x, 0.0, 1e-3), -100.0), -999999.9999, 1e-12),
    # rgamma's second derivative at the poles of Γ was 0
    ("rgamma'' at 0", lambda: _second(sc.rgamma, 0.0), 2 * EULER, 1e-15),
    ("rgamma'' at -1", lambda: _second(sc.rgamma, -1.0), 2 * (1 - EULER), 1e-15),
    ("rgamma'' at -1+1e-8", lambda: _second(sc.rgamma, -1 + 1e-8), 0.8455687441825581, 1e-12),
    # found by the audit
    ("expit' at 40 was 0", lambda: _first(sc.expit, 40.0), 4.248354255291589e-18, 1e-14),
    ("log_expit'' at -40 was 0", lambda: _second(sc.log_expit, -40.0),
     -4.248354255291589e-18, 1e-14),
    ("expm1' at -40 was 0 (expon.cdf)", lambda: _first(lambda x: scipy.stats.expon.cdf(x), 40.0),
     4.248354255291589e-18, 1e-14),
    ("k1' at 700 took SciPy's kv(2, 700) = 0", lambda: _first(sc.k1, 700.0),
     -4.6764523042521025e-306, 1e-13),
    ("kv' at 705 (SciPy's kv underflows)", lambda: _first(lambda x: sc.kv(2.5, x), 705.0),
     -3.151468031906279e-308, 1e-12),
    ("i0e'' at 1e8 (a cancelling difference)", lambda: _second(sc.i0e, 1e8),
     2.9920671217111647e-21, 1e-12),
    ("k0e'' at 1e8 was 0", lambda: _second(sc.k0e, 1e8), 9.3998559711171525e-21, 1e-12),
    ("betaln d/da at 1e15 (ψ(a) - ψ(a+b) cancelled)",
     lambda: _first(lambda a: sc.betaln(a, 2.5), 1e15), -2.4999999999999981e-15, 1e-13),
    ("gamma' next to the pole at -1 (SciPy's psi there)",
     lambda: _first(sc.gamma, -1 + 1e-8), 9999999899504813.8, 1e-12),
    ("stdtr d/dt at df=1e10 (gammaln difference)",
     lambda: _first(lambda t: sc.stdtr(1e10, t), 0.5), 0.35206532675164713, 1e-13),
    ("gammainc d/dx at a=1e6 (log density cancelled)",
     lambda: _first(lambda x: sc.gammainc(1e6, x), 1e6), 0.00039894224715624403, 1e-12),
    ("gamma.logpdf d/da at a=x=1e10",
     lambda: _first(lambda a: scipy.stats.gamma.logpdf(1e10, a), 1e10), 5.0000000000833333e-11,
     1e-12),
    ("logistic.logpdf' at 1e-8", lambda: _first(lambda x: scipy.stats.logistic.logpdf(x), 1e-8), -5e-9,
     1e-14),
]


@pytest.mark.parametrize("compute, expected, rtol", [r[1:] for r in REGRESSIONS],
                         ids=[r[0] for r in REGRESSIONS])
def test_regressions_at_the_edges(compute, expected, rtol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(compute())
    if rtol == 0:
        assert value == expected
    else:
        assert abs(value - expected) <= rtol * abs(expected), (value, expected)


def test_student_t_cdf_differentiates_a_traced_df():
    """scipy.stats.t.cdf with df traced was refused: its derivative in df is stdtr's."""
    grad, = mutad.gradient(lambda df: scipy.stats.t.cdf(0.5, df), 3.0)
    assert relative_error(float(grad), mp_stdtr_dnu(3.0, 0.5, 1), 1e-300) <= FIRST


def mp_invgauss_quantile_dmu(x, mu):
    """-(∂F/∂μ)/(∂F/∂x) of invgauss' distribution function F at x, by mpmath: the derivative of
    the quantile whose value is x (at SciPy's x, Boost's root, within 1e-6 of mpmath's in the
    far upper tail)."""
    with mp.workdps(DIGITS):
        def cdf(x, mu):
            a = mp.sqrt(1 / x)
            return mp.ncdf(a * (x / mu - 1)) + mp.exp(2 / mu) * mp.ncdf(-a * (x / mu + 1))
        x = mp.mpf(x)
        return float(-mp.diff(lambda m: cdf(x, m), mu) / mp.diff(lambda t: cdf(t, mu), x))


@pytest.mark.parametrize("q, mu", [(1e-9, 0.05), (0.3, 0.7), (0.9, 20.0), (1e-12, 3.0)])
def test_invgauss_quantiles_in_the_mean(q, mu):
    """scipy.stats.invgauss.ppf and isf (Boost's quantiles; SciPy's ppf takes the isf of
    1 - q above 1/2) were refused: their partial in μ is of one sign, erfcx's."""
    for method in (scipy.stats.invgauss.ppf, scipy.stats.invgauss.isf):
        grad, = mutad.gradient(lambda mu: method(q, mu), mu)
        expected = mp_invgauss_quantile_dmu(method(q, mu), mu)
        assert relative_error(float(grad), expected, 1e-300) <= FIRST


def test_order_and_exponent_sums_too_long_are_refused():
    """K_v's derivative in an order of 1e7 would take more than 20000 steps of its rule, the
    Hurwitz zeta function's in an exponent of 1e5 more than 1e5 terms: refused, saying so."""
    with pytest.raises(mutad.MutadError, match="order as a constant"):
        mutad.gradient(lambda v: sc.kve(v, 1e3), 1e7)
    with pytest.raises(mutad.MutadError, match="pass x as a constant"):
        mutad.gradient(lambda x: sc.zeta(x, 2.0), 1e5)


# ----------------------------------------------------------------------------------------------
# The incomplete gamma and beta functions in their parameters (series and continued fractions
# differentiated term by term), on both sides of their switches and in their tails. The
# references differentiate mpmath's smaller tail (the upper tail of the beta function as the
# lower one of its complement, I_(1-x)(b, a)), which keeps its digits where the other is 1 - ε.

def mp_gammainc_da(a, x):
    with mp.workdps(DIGITS):
        if x < a:
            return float(mp.diff(lambda s: mp.gammainc(s, 0, x, regularized=True), a))
        return float(mp.diff(lambda s: -mp.gammainc(s, x, mp.inf, regularized=True), a))


def mp_betainc_dab(a, b, x, which):
    with mp.workdps(DIGITS):
        upper = x >= a / (a + b)  # one side for every step of the differences

        def lower(a, b):
            if upper:
                return -mp.betainc(b, a, 0, 1 - mp.mpf(x), regularized=True)
            return mp.betainc(a, b, 0, x, regularized=True)
        if which == 0:
            return float(mp.diff(lambda s: lower(s, b), a))
        return float(mp.diff(lambda s: lower(a, s), b))


@pytest.mark.parametrize("a, x", [
    (0.01, 1e-5), (0.3, 0.9), (2.5, 1.5), (2.5, 10.0), (7.0, 0.1), (30.0, 31.0), (30.0, 100.0),
    (200.0, 210.0), (5000.0, 4900.0), (5000.0, 5100.0), (0.5, 100.0), (1e4, 1e4)])
def test_gammainc_in_its_parameter(a, x):
    f = lambda a: sc.gammainc(a, x)  # noqa: E731
    value, (grad,) = mutad.value_and_gradient(f, a)
    assert value == sc.gammainc(a, x)
    expected = mp_gammainc_da(a, x)
    assert relative_error(float(grad), expected, 1e-300) <= FIRST
    assert relative_error(float(mutad.jvp(f, (a,), (1.0,))[1]), expected, 1e-300) <= FIRST
    complement, = mutad.gradient(lambda a: sc.gammaincc(a, x), a)
    assert complement == -grad


@pytest.mark.parametrize("a, b, x", [
    (0.05, 0.1, 1e-4), (0.5, 2.5, 0.1), (3.0, 2.5, 0.5), (3.0, 2.5, 0.9), (20.0, 50.0, 0.1),
    (300.0, 1000.0, 0.24), (1.0, 1.0, 0.3), (0.05, 1.0, 0.1), (1.8, 508.7, 0.2336),
    (1000.0, 1000.0, 0.5), (2.0, 0.1, 0.999)])
def test_betainc_in_its_parameters(a, b, x):
    f = lambda a, b: sc.betainc(a, b, x)  # noqa: E731
    value, (da, db) = mutad.value_and_gradient(f, a, b)
    assert value == sc.betainc(a, b, x)
    for ours, which in ((da, 0), (db, 1)):
        assert relative_error(float(ours), mp_betainc_dab(a, b, x, which), 1e-300) <= FIRST
    _, tangent = mutad.jvp(f, (a, b), (1.0, 0.0))
    assert tangent == da


@pytest.mark.parametrize("function", [sc.bdtr, sc.bdtrc])
def test_binomial_distribution_function_of_a_float_number_of_trials(function):
    """SciPy truncates a float n (bdtr(2, 5.5, p) is bdtr(2, 5, p)): the derivative in p is
    that of the truncated n's, not the beta density of n = 5.5's."""
    p = np.array([0.3, 0.5, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (SciPy's, of a float n)
        grad, = mutad.gradient(lambda q: np.sum(function(2, 5.5, q)), p)
        expected, = mutad.gradient(lambda q: np.sum(function(2, 5, q)), p)
        h = 1e-6
        central = (function(2, 5.5, p + h) - function(2, 5.5, p - h)) / (2 * h)
    assert grad.tobytes() == expected.tobytes()
    np.testing.assert_allclose(grad, central, rtol=1e-7)


def test_scipys_value_keeps_scipys_double_beside_float32_derivatives():
    """SciPy's Python float (a double) given the derivatives of a float32 composition keeps
    its bits in both modes (reverse mode rounded it to float32, the composition's dtype), and
    stays a Python number, which NumPy promotes weakly (forward mode made it NumPy's
    float64)."""
    from mutad.scipy._adjoints import Value, scipys_value
    total = Value(lambda x: float(np.sum(x.astype(np.float64) ** 2)), "a double sum")
    promoted = []

    def f(x):
        x32 = x.astype(np.float32)
        y = scipys_value(total(x32), np.sum(x32 * x32))
        promoted.append((y * x32).dtype)
        return y

    x = np.cos(np.arange(5.0) ** 1.3)
    x32 = x.astype(np.float32)
    expected = np.float64(np.sum(x32.astype(np.float64) ** 2))
    assert expected != np.float32(expected)  # (its float32 rounding is another number)
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert np.asarray(value).tobytes() == expected.tobytes()
    assert promoted == [np.float32]  # (reverse mode)
    np.testing.assert_allclose(grad, 2 * x32, rtol=1e-6)
    value, tangent = mutad.jvp(f, (x,), (np.ones(5),))
    assert np.asarray(value).tobytes() == expected.tobytes()
    np.testing.assert_allclose(tangent, np.sum(2 * x32), rtol=1e-6)
    assert promoted == [np.float32, np.float32]  # (forward mode)
