"""``scipy.special`` by its own names.

SciPy's special functions are ufuncs, and mutad differentiates them as it does NumPy's: each is
one row of partial derivatives here, so ``scipy.special.expit(x)`` works on traced arrays as
written, in place (``out=``) too, in reverse and forward mode and to any order.

>>> import numpy as np, mutad, scipy.special
>>> mutad.gradient(lambda x: scipy.special.gammaln(x).sum(), np.array([1.0, 2.0]))[0].round(4)
array([-0.5772,  0.4228])

The functions SciPy writes in Python (``polygamma``, ``multigammaln``, ``logsumexp``,
``softmax``, ``log_softmax``, the spherical Bessel functions ``spherical_jn``, ``spherical_yn``,
``spherical_in``, ``spherical_kn``, and the multiufunc ``sph_harm_y``) convert their arguments with ``np.asarray``; import them from here
instead (``from mutad.scipy.special import logsumexp``). Called with plain arrays each is SciPy's
own; called with traced arrays it runs its rule; while a differentiation runs, SciPy's own names
reach them (``registry.defroute``).

Every partial derivative computes with ufuncs that have rows and with these wrappers, never
with SciPy's Python functions directly, so that an enclosing differentiation can differentiate
it again (``mutad.hvp``, a gradient of a gradient). Where a derivative has no closed form
(hyperu's parameters, Struve's order) the row says so (``NoClosedForm``): differentiating
with respect to that argument raises a ``MutadError``; where a sum or an
integral computes it to rounding, that is its partial (K_v's in the order v by the trapezoidal
rule of its integral; J_v's, Y_v's and I_v's, a first derivative, by their power series or
Schläfli's integrals; hyp1f1's and hyp2f1's in their parameters, a first derivative, by
their series; the Hurwitz zeta function's in its exponent by the Euler-Maclaurin formula,
``_numerics``).

The values are SciPy's own, with its asymptotic branches, log-space tails and reflections;
the partials are written to hold at the same points (``_numerics``): log_ndtr's as
√(2/π)/erfcx(-x/√2) in the left tail, rgamma's by reflection through the poles of Γ, the
digamma differences of beta and betaln without cancellation, the densities of the incomplete
gamma and beta functions in log-space forms (Temme's, Boost's), the scaled Bessel functions by
their expansions for large arguments, stdtr's in df by quadrature, and the incomplete gamma
and beta functions' in their parameters by SciPy's own series and continued fractions,
differentiated term by term (the distribution functions of the gamma, chi-squared, beta, F,
negative binomial distributions in their shapes and degrees of freedom, and their inverses).
"""

import math

import numpy as np
import scipy.special as _special
# The ufuncs are SciPy's own objects: importing them from here or from SciPy is the same.
from scipy.special import (
    beta, betainc, betaincc, betaln, digamma, entr, erf, erfc, erfcinv, erfcx, erfinv, expit,
    gamma, gammainc, gammaincc, gammaln, i0, i0e, i1, i1e, iv, ive, j0, j1, jv, jve, k0, k0e, k1,
    k1e, kv, kve, log_expit, log_ndtr, loggamma, logit, ndtr, ndtri, psi, rel_entr, rgamma, stdtr,
    xlog1py, xlogy, y0, y1, yn, yv, yve, zetac,
    binom, boxcox, boxcox1p, cbrt, cosdg, exp1, exp10, exp2, expi, expn, exprel, huber,
    inv_boxcox, inv_boxcox1p, kl_div, poch, pseudo_huber, sindg,
    dawsn, ellipe, ellipk, ellipkm1, eval_chebyc, eval_chebys, eval_chebyt, eval_chebyu, eval_gegenbauer,
    eval_genlaguerre, eval_hermite, eval_hermitenorm, eval_jacobi, eval_laguerre, eval_legendre,
    eval_sh_chebyt, eval_sh_chebyu, eval_sh_legendre, expm1, hyp2f1, log1p, owens_t, radian,
    spence, struve,
    chdtr, chdtrc, ellipeinc, ellipkinc, erfi, gammainccinv, gammaincinv, gdtr, gdtrc, hyp1f1,
    ndtri_exp, powm1, voigt_profile, wofz, lpmv, hyperu,
    cosm1, cotdg, fdtr, fdtrc, fdtri, kn, pdtr, pdtrc, tandg, bdtr, bdtrc, nbdtr, nbdtrc,
    betainccinv, betaincinv, stdtrit,
    chdtri, chndtr, chndtrix, nctdtr, nctdtrit, ncfdtr, ncfdtri,
    modstruve, hyp0f1, agm, wright_bessel, log_wright_bessel,
)
from scipy.special import kolmogi, kolmogorov, smirnov, smirnovi
from scipy.special._ufuncs import (_kolmogc, _kolmogci, _kolmogp, _smirnovc, _smirnovci,
                                   _smirnovp)
from scipy.special._ufuncs import (_beta_ppf, _invgauss_isf, _invgauss_ppf, _lambertw,
                                   _ncf_isf, _ncf_pdf, _ncf_sf, _nct_isf, _nct_pdf, _nct_sf,
                                   _ncx2_isf, _ncx2_pdf, _ncx2_sf,
                                   _riemann_zeta, _scaled_exp1, _skewnorm_isf, _skewnorm_ppf,
                                   _zeta)

from ..core.errors import UnsupportedOperationError
from ..core.levels import ACTIVE
from ..core.registry import (HOLOMORPHIC, Constant, NoClosedForm, defjvp, defrule, elementwise,
                             holomorphic, nondifferentiable)
from ..engines.arraylike import settled
from ..engines.products import product_times, times
from ..rules._helpers import as_float, logistic, logistic_density, sign_of, unbroadcast
from . import _numerics
from ._adjoints import Elementwise, StandIn, Value, _plain, scipy_adjoint, scipys_value

polygamma, multigammaln = map(scipy_adjoint, (_special.polygamma, _special.multigammaln))
logsumexp = scipy_adjoint(_special.logsumexp, arrays=("a", "b"))
softmax, log_softmax = (scipy_adjoint(fn, arrays=("x",))
                        for fn in (_special.softmax, _special.log_softmax))

# The sign of the gamma function and rounding to the nearest integer: piecewise constant, no
# gradient.
nondifferentiable(_special.gammasgn, _special.round)

__all__ = ["agm", "bdtr", "bdtrc", "beta", "betainc", "betaincc", "betainccinv",
           "betaincinv", "betaln",
           "binom", "boxcox", "boxcox1p", "cbrt",
           "chdtr", "chdtrc", "chdtri", "chndtr", "chndtrix", "cosdg", "cosm1", "cotdg", "fdtr", "fdtrc", "fdtri", "kn", "nbdtr", "nbdtrc",
           "pdtr", "pdtrc",
           "tandg", "dawsn", "digamma", "ellipe", "ellipeinc", "ellipk",
           "ellipkinc", "ellipkm1", "entr", "erf", "erfc", "erfcinv", "erfcx", "erfi", "erfinv",
           "eval_chebyc", "eval_chebys", "eval_chebyt", "eval_chebyu", "eval_gegenbauer",
           "eval_genlaguerre", "eval_hermite", "eval_hermitenorm", "eval_jacobi", "eval_laguerre",
           "eval_legendre", "eval_sh_chebyt", "eval_sh_chebyu", "eval_sh_legendre", "exp1",
           "exp10", "exp2", "expi", "expit", "expm1", "expn", "exprel", "gamma", "gammainc",
           "gammaincc", "gammainccinv", "gammaincinv", "gammaln", "gdtr", "gdtrc", "huber",
           "hyp0f1", "hyp1f1", "hyp2f1", "hyperu", "i0", "i0e", "i1", "i1e", "inv_boxcox",
           "inv_boxcox1p", "iv", "ive", "j0", "j1", "jv", "jve", "k0", "k0e", "k1", "k1e",
           "kl_div", "kolmogi", "kolmogorov", "kv",
           "kve", "log1p", "log_expit", "log_wright_bessel", "lpmv", "log_ndtr", "log_softmax",
           "loggamma", "logit",
           "logsumexp", "modstruve", "multigammaln", "nctdtr", "nctdtrit", "ndtr", "ndtri",
           "ndtri_exp",
           "owens_t", "poch",
           "polygamma", "powm1",
           "pseudo_huber", "psi", "radian", "rel_entr", "rgamma", "sindg", "smirnov", "smirnovi",
           "softmax", "spence",
           "stdtr", "stdtrit", "struve", "voigt_profile", "wofz", "wright_bessel", "xlog1py",
           "xlogy", "y0", "y1", "yn", "yv", "yve"]


_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _trigamma(x):
    return polygamma(1, x)


# Where x log w and x log(1 + w) are SciPy's 0 (x = 0), and where w is at the log's pole as
# well: decided when the ufunc runs, one byte per element (0: neither, 1: x = 0, 2: both).
def _xlogy_zeros(x, w):
    return np.add(x == 0, (x == 0) & (w == 0), dtype=np.uint8)


def _xlog1py_zeros(x, w):
    return np.add(x == 0, (x == 0) & (w == -1), dtype=np.uint8)


def _xlogy_dx(y, x, w, zeros):
    """d/dx x log w. SciPy's x log w is 0 wherever x = 0, even at w = 0; there, where x log w
    is -inf for every other x, the derivative is taken as 0 so a zero entry gives no nan. The
    masked entries read safe values, so that differentiating this again gives no nan either."""
    both_zero = zeros == 2
    return np.where(both_zero, 0.0, np.log(np.where(both_zero, 1.0, w)))


def _xlogy_dw(y, x, w, zeros):
    """d/dw x log w = x / w, taken as its limit 0 where w = 0 too (SciPy's x log w is 0 where
    x = 0). Where x = 0 alone it is x / w itself, 0 (+ 0.0: never -0.0), so that its own
    derivative in x, 1 / w, is there for second derivatives."""
    both_zero = zeros == 2
    return np.where(both_zero, 0.0, x / np.where(both_zero, 1.0, w) + 0.0)


def _xlog1py_dx(y, x, w, zeros):
    both_zero = zeros == 2
    return np.where(both_zero, 0.0, np.log1p(np.where(both_zero, 0.0, w)))


def _xlog1py_dw(y, x, w, zeros):
    both_zero = zeros == 2  # as _xlogy_dw's
    return np.where(both_zero, 0.0, x / (1.0 + np.where(both_zero, 0.0, w)) + 0.0)


def _rel_entr_dx(y, x, w, zeros):
    """d/dx x log(x / w) = log(x / w) + 1: -inf as x reaches 0 (decided, not re-derived from a
    restored x, which may come back as a tiny number), and 0 where w is 0 too (as xlogy)."""
    x_zero = zeros > 0
    safe = np.log(np.where(x_zero, 1.0, x) / np.where(x_zero, 1.0, w)) + 1.0
    return np.where(zeros == 2, 0.0, np.where(x_zero, -np.inf, safe))


def _rel_entr_dw(y, x, w, zeros):
    return -_xlogy_dw(y, x, w, zeros)


def _huber_parts(delta, r):
    """Where huber's quadratic branch holds (|r| <= delta), decided with the value."""
    return np.abs(r) <= delta


def _huber_ddelta(y, delta, r, quadratic):
    return np.where(quadratic, 0.0, np.abs(r) - delta)


def _huber_dr(y, delta, r, quadratic):
    return np.where(quadratic, r, delta * np.sign(r))


def _expn_dx(y, n, x):
    """E_n' = -E_(n-1), n truncated to an integer as SciPy's expn does; SciPy has no E_-1 (NaN),
    so E_0 = e^-x / x takes its own derivative, -e^-x (1 + x) / x², written in ufuncs so that
    its derivative, the second of E_1, follows (the other branch reads x = 1, where it is
    finite, so that its derivatives are too)."""
    first = np.trunc(n) == 0
    x0 = np.where(first, x, 1.0)
    return np.where(first, -np.exp(-x0) * (1.0 + x0) / (x0 * x0), -expn(n - 1, x))


def _expi_derivative(y, x):
    """Ei'(x) = e^x / x, as (e^(x/2) / x) e^(x/2): e^x alone overflows beyond x = 709.78, where
    Ei and its derivative are finite up to 716."""
    half = np.exp(0.5 * x)
    return half / x * half


def _pseudo_huber_root(delta, r):
    """t = r / δ and s = √(1 + t²) (by hypot: t² may pass the floats where s does not)."""
    t = np.divide(r, delta)  # (not Python's /, which raises of floats at δ = 0)
    return t, np.hypot(1.0, t)


def _pseudo_huber_ddelta(y, delta, r):
    """d/dδ δ² (s - 1) = 2δ (s - 1) - r² / (δ s), which cancels where |r| ≪ δ (at δ = 1000,
    r = 2, a relative error of 6e-5), written as the product r (t / s) (t / (s + 1))²."""
    t, s = _pseudo_huber_root(delta, r)
    return r * (t / s) * (t / (s + 1.0)) ** 2


def _pseudo_huber_dr(y, delta, r):
    return r / _pseudo_huber_root(delta, r)[1]


def _boxcox_dlambda(base):
    """d/dλ of boxcox (``base`` log) or boxcox1p (``base`` log1p), y = (e^(λL) - 1) / λ with
    L = base(x): L² exprel'(λL), whose series near λL = 0 holds where the closed form
    (x^λ L - y) / λ cancels (λ = 0 included: L² / 2). Where L = -∞ (x = 0, boxcox1p's x = -1)
    and λ > 0, y = -1/λ: its derivative 1/λ², where the form's ∞² e^-∞ is NaN."""
    def partial(y, x, lmbda):
        logs = base(x)
        at_zero = np.isneginf(logs) & (lmbda > 0)
        finite_logs = np.where(at_zero, 0.0, logs)
        inverse = 1.0 / np.where(at_zero, lmbda, 1.0)
        return np.where(at_zero, inverse * inverse,
                        finite_logs * finite_logs * _exprel_derivative(None, lmbda * finite_logs))
    return partial


def _inv_boxcox_dy(x, y, lmbda):  # x = (λy + 1)^(1/λ): x / (λy + 1), or x at λ = 0
    return x / (lmbda * y + 1.0)


def _inv_boxcox_dlambda(x, y, lmbda):
    """d/dλ of x = exp(log1p(λy) / λ): x y² g(λy), g(u) = (u / (1 + u) - log1p(u)) / u², by
    its series -1/2 + 2u/3 - 3u²/4 + 4u³/5 - 5u⁴/6 + 6u⁵/7 near u = 0, where it cancels."""
    u = lmbda * y
    near = np.abs(u) < 1e-2
    safe = np.where(near, 1.0, u)
    series = -0.5 + u * (2.0 / 3.0 + u * (-0.75 + u * (0.8 + u * (-5.0 / 6.0 + u * 6.0 / 7.0))))
    g = np.where(near, series, (safe / (1.0 + safe) - np.log1p(safe)) / (safe * safe))
    return x * y * y * g


def _inv_boxcox1p_dlambda(x, y, lmbda):  # of (λy + 1)^(1/λ) - 1: as inv_boxcox's, for x + 1
    return _inv_boxcox_dlambda(x + 1.0, y, lmbda)


def _exprel_derivative(y, x):
    """exprel'(x) = (x e^x - (e^x - 1)) / x²; near 0 its series 1/2 + x/3 + x²/8 + x³/30 +
    x⁴/144, where the closed form cancels."""
    near = np.abs(x) < 1e-2
    safe = np.where(near, 1.0, x)
    series = 0.5 + x * (1.0 / 3.0 + x * (0.125 + x * (1.0 / 30.0 + x / 144.0)))
    return np.where(near, series, (safe * np.exp(safe) - np.expm1(safe)) / (safe * safe))


def _incomplete_beta_density(y, a, b, x):
    """d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b), SciPy's own value (``beta.pdf``)."""
    return _numerics.beta_density(a, b, x)


def _scaled_i(order):
    """The partial of i0e (order 0) or i1e (order 1), ``I_v(x) e^-|x|``, from that at |x|: below
    50 by the trapezoidal rule of ``_numerics.ive_derivative_integral``, beyond by the
    expansion (the recurrence's difference (I_(v-1) + I_(v+1))/2 - I_v cancels for large x).
    i0e is even, its partial sign(x) times that at |x| (the sign decided when the function
    runs; at 0 it is 0); i1e odd, its partial even."""
    def partial(y, x, sign):
        size = np.abs(x)
        large = size >= 50.0
        expansion = _numerics.ive_derivative_large(float(order), np.where(large, size, 50.0))
        below = np.where(large, np.float64(0.0), size)  # in doubles, for float32 too
        integral = _numerics.ive_derivative_integral(order, below)
        at_size = np.where(large, expansion, integral)
        return as_float(sign) * at_size if order == 0 else at_size

    return partial


def _ive_derivative(y, v, x, sign):
    """d/dx ive(v, x): the recurrence's (I_{v-1} + I_{v+1})/2, scaled, minus sign(x) y, and
    beyond ``bessel_large(v)`` the expansion (for x < 0 only integer orders have values, and
    ive(v, -x) = (-1)^v ive(v, x))."""
    bound = _numerics.bessel_large(v)
    large = np.abs(x) >= bound
    expansion = _numerics.ive_derivative_large(v, np.where(large, np.abs(x), bound))
    parity = np.where(np.rint(v) % 2 == 0, -1.0, 1.0)  # (-1)^(v+1), for x < 0
    expansion = np.where(x > 0, expansion, parity * expansion)
    recurrence = 0.5 * (ive(v - 1.0, x) + ive(v + 1.0, x)) - as_float(sign) * y
    return np.where(large, expansion, recurrence)


def _kve_derivative(y, v, x):
    """d/dx kve(v, x) = kve - (K_{v-1} + K_{v+1})/2 scaled, and where that difference cancels
    the trapezoidal rule of ``kve_derivative_integral`` (below 50, for orders up to 8) and the
    expansion beyond ``bessel_large(v)``."""
    bound = _numerics.bessel_large(v)
    large = x >= bound
    middle = _numerics.quadrature_k(v, x)
    expansion = _numerics.kve_derivative_large(v, np.where(large, x, bound))
    integral = _numerics.kve_derivative_integral(np.where(middle, v, 0.0),
                                                 np.where(middle, x, np.float64(1.0)))
    recurrence = y - 0.5 * (kve(v - 1.0, x) + kve(v + 1.0, x))
    return np.where(large, expansion, np.where(middle, integral, recurrence))


def _negated(partial):
    return lambda *args: -partial(*args)


def _sign_of_x(v, x):
    return sign_of(x)


def _of_degree(partial):
    """The partial in x of an orthogonal polynomial of degree n, from one of degree n - 1: 0 at
    n = 0 (a constant), where the polynomial of degree -1 it would read may be nan. It reads
    degree 1 there instead, so that differentiating it again gives no nan either."""
    def of_degree(y, n, *rest):
        zero = np.equal(n, 0)
        return np.where(zero, 0.0, partial(y, np.where(zero, 1, n), *rest))
    return of_degree


def _series(coefficients, m):
    """Σ coefficients[i] m^i, by Horner's rule."""
    total = coefficients[-1]
    for c in coefficients[-2::-1]:
        total = total * m + c
    return total


# K(m) = π/2 Σ c_n m^n and E(m) = π/2 Σ c_n m^n / (1 - 2n), c_n = (binom(2n, n) / 4^n)²: the
# derivatives' series, for |m| below _ELLIPTIC_SERIES, where the closed forms cancel.
_ELLIPTIC_C = [(math.comb(2 * n, n) / 4.0**n) ** 2 for n in range(8)]
_ELLIPK_SERIES = [0.5 * math.pi * n * _ELLIPTIC_C[n] for n in range(1, 8)]
_ELLIPE_SERIES = [0.5 * math.pi * n * _ELLIPTIC_C[n] / (1 - 2 * n) for n in range(1, 8)]
_ELLIPTIC_SERIES = 1e-3


def _elliptic_derivative(closed_form, series):
    def partial(y, m):
        small = np.abs(m) < _ELLIPTIC_SERIES
        near = _series(series, np.where(small, m, 0.0))
        far = closed_form(np.where(small, 0.5, m))
        return np.where(small, near, far)
    return partial


_ellipk_derivative = _elliptic_derivative(
    lambda m: (ellipe(m) - (1.0 - m) * ellipk(m)) / (2.0 * m * (1.0 - m)), _ELLIPK_SERIES)
_ellipe_derivative = _elliptic_derivative(
    lambda m: (ellipe(m) - ellipk(m)) / (2.0 * m), _ELLIPE_SERIES)


def _ellipkm1_derivative(y, p):
    """ellipkm1(p) = K(1 - p): -K'(1 - p), written in p (1 - m, exact) up to p = 1/2, where
    1 - p would lose p's digits; beyond, K' of m = 1 - p (its series near m = 0)."""
    small = p <= 0.5
    near = (ellipe(1.0 - p) - p * y) / (2.0 * p * (1.0 - p))
    return -np.where(small, near, _ellipk_derivative(None, np.where(small, 0.5, 1.0 - p)))


# -log(1 + w) / w = Σ (-w)^k / (k + 1), negated, for |w| below _SPENCE_SERIES
_SPENCE_SERIES_TERMS = [-((-1.0) ** k) / (k + 1) for k in range(7)]
_SPENCE_SERIES = 1e-3


def _spence_derivative(y, z):
    """SciPy's spence(z) = ∫_1^z log t / (1 - t) dt: log z / (1 - z), as -log1p(w) / w with
    w = z - 1 where that difference is exact (1/2 <= z <= 2), by its series near z = 1 (-1
    there), so that its own derivative holds there. Below 1/2, z - 1 would round z away (to -1
    for z under 1e-16, whose log1p is -inf), so log z itself is taken there and above 2."""
    w = z - 1.0
    small = np.abs(w) < _SPENCE_SERIES
    exact = np.logical_and(z >= 0.5, z <= 2.0)
    near = np.where(np.logical_or(small, np.logical_not(exact)), 1.0, w)
    far = np.where(exact, 2.0, z)
    return np.where(small, _series(_SPENCE_SERIES_TERMS, np.where(small, w, 0.0)),
                    np.where(exact, -np.log1p(near) / near, np.log(far) / (1.0 - far)))


def _owens_t_dh(y, h, a):  # -φ(h) erf(a h / √2) / 2
    return (-0.5 / _SQRT_2PI) * np.exp(-0.5 * h * h) * erf(a * h * math.sqrt(0.5))


def _owens_t_da(y, h, a):  # the integrand at a
    s = 1.0 + a * a
    return np.exp(-0.5 * h * h * s) / ((2.0 * math.pi) * s)


def _struve_dx(y, v, x):
    """H_v' = (H_{v-1} - H_{v+1}) / 2 + (x/2)^v / (2 √π Γ(v + 3/2)), with no division by x
    (1/Γ by rgamma: zero at Γ's poles, v + 3/2 = 0, -1, ..., where Γ(v + 3/2) is NaN)."""
    return (0.5 * (struve(v - 1.0, x) - struve(v + 1.0, x))
            + np.power(0.5 * x, v) * rgamma(v + 1.5) / (2.0 * _SQRT_PI))


def _modstruve_dx(y, v, x):
    """L_v' = (L_{v-1} + L_{v+1}) / 2 + (x/2)^v / (2 √π Γ(v + 3/2)) (DLMF 11.4.26)."""
    return (0.5 * (modstruve(v - 1.0, x) + modstruve(v + 1.0, x))
            + np.power(0.5 * x, v) / ((2.0 * _SQRT_PI) * gamma(v + 1.5)))


_ORDER = NoClosedForm("the order v")


def _agm_db(a, b):
    """∂M/∂b of the arithmetic-geometric mean M(a, b) = a M(1, r), r = b/a: M(1, r) = π / 2K(m),
    m = 1 - r² (K of parameter m), so ∂M/∂b = dM(1, r)/dr = (4/π) r M(1, r)² K'(m). At a zero
    argument M is 0 along the other one (partial 0) and grows as π / 2 log(4/|t|) along it
    (partial +inf); NaN where the signs differ (SciPy's value is NaN) and at (0, 0)."""
    zero = (np.equal(a, 0.0) | np.equal(b, 0.0)) & ~np.isnan(b)
    r = np.where(zero, 1.0, b) / np.where(zero, 1.0, a)
    m = 1.0 - r * r
    general = (4.0 / math.pi) * r * agm(1.0, r) ** 2 * _ellipk_derivative(None, m)
    at_zero = np.where(np.equal(b, 0.0), np.where(np.equal(a, 0.0), np.nan, np.inf), 0.0)
    return np.where(zero, at_zero, general)


def _agm_da(y, a, b):  # M(a, b) = M(b, a): ∂M/∂a is ∂M/∂b with the arguments swapped
    return _agm_db(b, a)


def _in_order(kind, name, scaled=False):
    """The partial of SciPy's ``name`` in its order v (``_numerics.bessel_order_derivative``):
    J_v's and Y_v's (also jve's and yve's, which scale by 1 for real x), I_v e^-|x|'s, and I_v's
    as that times e^x."""
    def partial(y, v, x, *decision):
        derivative = _numerics.bessel_order_derivative(kind, name)(v, x)
        return derivative * np.exp(x) if kind == "i" and not scaled else derivative
    return partial
_DEGREE = NoClosedForm("the degree n")
_ALPHA = NoClosedForm("the parameter alpha")
_BETA = NoClosedForm("the parameter beta")
_PARAMETER_A = NoClosedForm("the parameter a")
_PARAMETER_B = NoClosedForm("the parameter b")


def _genlaguerre_dalpha(y, n, alpha, x):
    """∂/∂α L_n^(α)(x) = Σ_(k<n) L_k^(α)(x) / (n - k), of the polynomial of an integer degree n
    (0 for n <= 0: a constant, SciPy's 0 below 0); NaN for a degree that is not an integer,
    whose hypergeometric function has no such sum."""
    whole = np.equal(np.floor(n), n)
    top = int(np.max(np.where(whole, n, 0), initial=0))
    total = np.zeros(np.shape(y), np.result_type(y, np.float64))
    for k in range(top):
        below = np.less(k, n)
        total = total + np.where(below, eval_genlaguerre(k, alpha, x)
                                 / np.where(below, n - k, 1), 0.0)
    return np.where(whole, total, np.nan)


def _in_parameter(which):
    def partial(y, a, b, c, z):
        return _numerics.gauss_parameter_derivative(which)(a, b, c, z)
    return partial


def _f_density(a, b, x):
    """d/dx of F's distribution function I_w(a/2, b/2), w = a x / (b + a x)."""
    denominator = b + a * x
    return _numerics.beta_density(0.5 * a, 0.5 * b, a * x / denominator) * (
        a * b / (denominator * denominator))


def _gammainc_da(y, a, x):
    return _numerics.gammainc_da(a, x)


def _betainc_da(y, a, b, x):
    return _numerics.betainc_da(a, b, x)


def _betainc_db(y, a, b, x):
    return _numerics.betainc_db(a, b, x)


def _skewnorm_density(z, a):
    """The standard skew-normal density 2 φ(z) Φ(a z)."""
    return np.exp(-0.5 * z * z) * (2.0 / math.sqrt(2.0 * math.pi)) * ndtr(a * z)


def _skewnorm_owens_da(z, a):
    """2 ∂T(z, a)/∂a, minus the skew-normal distribution function's partial in a."""
    return np.exp(-0.5 * z * z * (1.0 + a * a)) / (math.pi * (1.0 + a * a))


def _skewnorm_quantile_dq(sign):
    def partial(y, q, loc, scale, a):
        return sign * scale / _skewnorm_density((y - loc) / scale, a)
    return partial


def _skewnorm_quantile_dloc(y, q, loc, scale, a):
    return np.ones_like(y)


def _skewnorm_quantile_dscale(y, q, loc, scale, a):
    return (y - loc) / scale


def _skewnorm_quantile_da(y, q, loc, scale, a):
    z = (y - loc) / scale
    return scale * _skewnorm_owens_da(z, a) / _skewnorm_density(z, a)


def _chi2_ddf(y, v, x):
    """∂/∂v of chdtr(v, x) = P(v/2, x/2)."""
    return 0.5 * _numerics.gammainc_da(0.5 * v, 0.5 * x)


def _f_ddf(which):
    """∂/∂a (``which`` 0) or ∂/∂b of fdtr(a, b, x) = I_w(a/2, b/2), w = a x / (b + a x): through
    the parameters and through w (∂w/∂a = b x / (b + a x)², ∂w/∂b = -a x / (b + a x)²)."""
    parameter = (_numerics.betainc_da, _numerics.betainc_db)[which]

    def partial(y, a, b, x):
        denominator = b + a * x
        w = a * x / denominator
        dw = (b * x if which == 0 else -a * x) / (denominator * denominator)
        return 0.5 * parameter(0.5 * a, 0.5 * b, w) + _numerics.beta_density(
            0.5 * a, 0.5 * b, w) * dw
    return partial


_f_ddfn, _f_ddfd = _f_ddf(0), _f_ddf(1)


def _inverse_gamma_da(y, a, p):
    """∂/∂a of gammaincinv(a, p) or gammainccinv(a, q) = y: -(∂P/∂a)(a, y) / (∂P/∂x)(a, y)."""
    return -_numerics.gammainc_da(a, y) * _inverse_density(y, a)


def _inverse_beta_dab(which):
    """∂/∂a (``which`` 0) or ∂/∂b of betaincinv(a, b, p) or betainccinv = y:
    -(∂I/∂a)(a, b, y) / (∂I/∂x)(a, b, y)."""
    parameter = (_numerics.betainc_da, _numerics.betainc_db)[which]

    def partial(y, a, b, p):
        return -parameter(a, b, y) * _beta_inverse_density(y, a, b)
    return partial


def _t_density_at(t, df):
    """Student's t density at t, of df degrees of freedom."""
    return _numerics.student_t_density(None, df, t)


def _density(a, x):
    """d/dx P(a, x), in its log-space form."""
    return np.exp(_numerics.gamma_log_density(x, a))


def _binomial_density(k, n, p):
    """d/dp of I_p(k + 1, n - k), the beta(k + 1, n - k) density at ``p``; 0 where ``k >= n``."""
    inside = k < n
    b = np.where(inside, n - k, 1.0)
    return np.where(inside, np.exp(xlogy(k, p) + xlog1py(b - 1.0, -p) - betaln(k + 1.0, b)), 0.0)


def _negative_binomial_density(k, n, p):
    """d/dp of I_p(n, k + 1), the beta(n, k + 1) density at ``p``."""
    return np.exp(xlogy(n - 1.0, p) + xlog1py(k, -p) - betaln(n, k + 1.0))


def _inverse_density(x, a):
    """1 / (d/dx P(a, x)) at ``x``."""
    return np.exp(-_numerics.gamma_log_density(x, a))


def _beta_inverse_density(x, a, b):
    """1 / (d/dx I_x(a, b)) at ``x``."""
    return np.exp(betaln(a, b) - xlogy(a - 1.0, x) - xlog1py(b - 1.0, -x))


def _delta(phi, m):
    s = np.sin(phi)
    return np.sqrt(1.0 - m * s * s)


def _lpmv_dx(y, m, v, x):
    """d/dx of SciPy's Ferrers function P_v^m(x) (its phase (-1)^m on both sides):
    ((m + v) P_{v-1}^m - v x P_v^m) / (1 - x²) inside (-1, 1) (DLMF 14.10.5); at x = ±1,
    v(v + 1)/2 x^(v+1) for m = 0, NaN for another order (infinite there, or a limit the
    recurrence does not give). Each branch reads safe points, so that its own derivative has
    no NaN where it is not taken."""
    edge = x * x == 1
    inner = np.where(edge, 0.0, x)
    inside = ((m + v) * lpmv(m, v - 1.0, inner) - v * inner * np.where(edge, 0.0, y)) / (
        1.0 - inner * inner)
    end = np.where(edge, x, 1.0)
    at_end = np.where(m == 0, 0.5 * v * (v + 1.0) * end ** (v + 1.0), np.nan)
    return np.where(edge, at_end, inside)


def _ellipeinc_dm(y, phi, m):
    """d/dm E(φ|m) = (E(φ|m) - F(φ|m)) / 2m (DLMF 19.4.2), at m = 0 its limit
    -(2φ - sin 2φ)/8 (of -∫ sin²θ / 2 dθ); the quotient reads a safe m there, so that its own
    derivative has no NaN where it is not taken."""
    zero = m == 0
    ms = np.where(zero, 0.5, m)
    general = (np.where(zero, ellipeinc(phi, ms), y) - ellipkinc(phi, ms)) / (2.0 * ms)
    return np.where(zero, (np.sin(2.0 * phi) - 2.0 * phi) / 8.0, general)


def _ellipkinc_dm(y, phi, m):
    """d/dm F(φ|m) = ∫ sin²θ / 2Δ³ dθ = E/(2m(1-m)) - F/2m - sin 2φ / (4(1-m)Δ) (DLMF 19.4.2,
    Δ = sqrt(1 - m sin²φ)); at m = 0, (2φ - sin 2φ)/8, and at m = 1, where the terms cancel,
    the integral's (sec φ tan φ - log(sec φ + tan φ))/4 (|φ| < π/2; NaN beyond, where F is
    infinite). Each branch reads safe points."""
    zero, one = m == 0, m == 1
    special = zero | one
    ms = np.where(special, 0.5, m)
    f = np.where(special, ellipkinc(phi, ms), y)
    general = (ellipeinc(phi, ms) / (2.0 * ms * (1.0 - ms)) - f / (2.0 * ms)
               - np.sin(2.0 * phi) / (4.0 * (1.0 - ms) * _delta(phi, ms)))
    c = np.cos(phi)
    inside = one & (c > 0)
    cs, sn = np.where(inside, c, 1.0), np.where(inside, np.sin(phi), 0.0)
    at_one = np.where(inside, (sn / (cs * cs) - np.log1p(sn) + np.log(cs)) / 4.0, np.nan)
    return np.where(zero, (2.0 * phi - np.sin(2.0 * phi)) / 8.0,
                    np.where(one, at_one, general))


def _where_defined(y, partial):
    """``partial``, NaN where SciPy's value ``y`` is (outside its domain: m > 1)."""
    return np.where(np.isnan(y), y, partial)

# The noncentral chi-squared distribution of k degrees of freedom and noncentrality λ, a Poisson
# mixture of central ones (weights e^(-λ/2) (λ/2)^j / j! of k + 2j degrees of freedom): in λ
# its density's derivative is (f_(k+2) - f_k) / 2, its distribution function's -f_(k+2) (the
# central P_k - P_(k+2) is 2 p_(k+2)); in x the density's is f_k ((k/2 - 1)/x - 1/2) +
# λ f_(k+2) / 2x (of its Bessel form, I_ν' = I_(ν+1) + ν I_ν / z). Degrees of freedom: none.
_DEGREES_OF_FREEDOM = NoClosedForm("the degrees of freedom df")


def _ncx2_pdf_dx(y, x, k, lam):
    return y * ((0.5 * k - 1.0) / x - 0.5) + lam / (2.0 * x) * _ncx2_pdf(x, k + 2.0, lam)


def _ncx2_next(y, x, k, lam):
    """f_(k+2)(x), the density of two more degrees of freedom: -∂F/∂λ."""
    return _ncx2_pdf(x, k + 2.0, lam)


def _ncx2_cdf_dk(y, x, k, lam):
    return _numerics.ncx2_dk(False)(x, k, lam)


def _ncx2_quantile_dk(y, q, k, lam):
    """∂/∂k of the quantile y (of F or of 1 - F): minus F's partial in k over the density."""
    return -_numerics.ncx2_dk(False)(y, k, lam) / _ncx2_pdf(y, k, lam)


def _ncx2_quantile_dlam(y, q, k, lam):
    """∂x/∂λ of a quantile x (of the distribution function or its complement): f_(k+2)/f_k."""
    return _ncx2_pdf(y, k + 2.0, lam) / _ncx2_pdf(y, k, lam)


# The noncentral t distribution of ν degrees of freedom and noncentrality μ, T = (Z + μ) / S with
# S = √(χ²_ν / ν): its density is f_ν(t) = E[S φ(tS - μ)], and moments of S move to ν + 1 and
# ν + 2 degrees of freedom (E_ν[√V h(V)] = κ_ν E_(ν+1)[h(V)], κ_ν = √2 Γ((ν+1)/2) / Γ(ν/2);
# E_ν[V h(V)] = ν E_(ν+2)[h(V)]), so that its derivatives are its own densities:
# ∂f/∂μ = t E[S² φ] - μ f, ∂f/∂t = μ E[S² φ] - t E[S³ φ], with E[S² φ] = κ_ν √(ν+1)/ν
# f_(ν+1)(t √((ν+1)/ν)) and E[S³ φ] = √((ν+2)/ν) f_(ν+2)(t √((ν+2)/ν)); the distribution
# function's in μ is -E[φ(tS - μ)] = -√(ν-1)/κ_(ν-1) f_(ν-1)(t √((ν-1)/ν)) (ν > 1; NaN below).
def _nct_kappa(nu):
    return math.sqrt(2.0) * np.exp(gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu))


def _nct_square_moment(t, nu, mu):
    """E[S² φ(tS - μ)]."""
    up = nu + 1.0
    return _nct_kappa(nu) * np.sqrt(up) / nu * _nct_pdf(t * np.sqrt(up / nu), up, mu)


def _nct_normal_mean(t, nu, mu):
    """E[φ(tS - μ)], -∂F/∂μ (NaN for ν <= 1)."""
    down = nu - 1.0
    inside = down > 0
    safe = np.where(inside, down, 1.0)
    mean = np.sqrt(safe) / _nct_kappa(safe) * _nct_pdf(t * np.sqrt(safe / nu), safe, mu)
    return np.where(inside, mean, np.nan)


def _nct_pdf_dt(y, t, nu, mu):
    up = nu + 2.0
    return (mu * _nct_square_moment(t, nu, mu)
            - t * np.sqrt(up / nu) * _nct_pdf(t * np.sqrt(up / nu), up, mu))


def _nct_pdf_dmu(y, t, nu, mu):
    return t * _nct_square_moment(t, nu, mu) - mu * y


def _nct_quantile_dmu(y, nu, mu, q):
    """∂t/∂μ of a quantile t (of the distribution function or its complement):
    E[φ(tS - μ)] / f(t)."""
    return _nct_normal_mean(y, nu, mu) / _nct_pdf(y, nu, mu)


# The noncentral F distribution, X = (U/n₁) / (V/n₂) of a noncentral χ²_(n₁)(λ) U: a Poisson
# mixture (weights w_j = e^(-λ/2) (λ/2)^j / j!) of the laws of U of n₁ + 2j degrees of freedom,
# and the component of n₁ + 2(j+1) is that of j of n₁ + 2 degrees of freedom (λ the same),
# scaled by (n₁ + 2)/n₁: with c = n₁/(n₁ + 2), ∂w_j/∂λ = w_j (j/λ - 1/2) gives ∂f/∂λ =
# (c f(cx; n₁+2) - f(x)) / 2 and ∂F/∂λ = (F(cx; n₁+2) - F(x)) / 2 (of the complements where F >
# 1/2: no cancellation in the upper tail). In x, each component's log-density has the slope
# (n₁/2 + j - 1)/x - (n₁/2 + j + n₂/2) n₁/(n₂ + n₁x), and Σ j w_j b_j = (λ/2) c f(cx; n₁+2).
def _ncf_next(x, n1, n2, lam):
    """c f(cx; n₁ + 2, n₂, λ), c = n₁/(n₁ + 2): the density of one more mixture term."""
    c = n1 / (n1 + 2.0)
    return c * _ncf_pdf(c * x, n1 + 2.0, n2, lam)


def _ncf_pdf_dx(y, x, n1, n2, lam):
    slope = (0.5 * n1 - 1.0) / x - 0.5 * (n1 + n2) * n1 / (n2 + n1 * x)
    return y * slope + n2 / (x * (n2 + n1 * x)) * 0.5 * lam * _ncf_next(x, n1, n2, lam)


def _ncf_cdf_dlam(x, n1, n2, lam):
    """∂F/∂λ of the distribution function F(x; n₁, n₂, λ) (negative)."""
    c = n1 / (n1 + 2.0)
    lower = ncfdtr(n1, n2, lam, x) <= 0.5
    return 0.5 * np.where(lower, ncfdtr(n1 + 2.0, n2, lam, c * x) - ncfdtr(n1, n2, lam, x),
                          _ncf_sf(x, n1, n2, lam) - _ncf_sf(c * x, n1 + 2.0, n2, lam))


def _ncf_quantile_dlam(y, n1, n2, lam):
    """∂x/∂λ of a quantile x (of the distribution function or its complement): -(∂F/∂λ)/f."""
    return -_ncf_cdf_dlam(y, n1, n2, lam) / _ncf_pdf(y, n1, n2, lam)


# The inverse Gaussian distribution of mean μ and shape λ (scipy.stats.invgauss's own quantiles,
# Boost's, of λ = 1): F(x) = Φ(u) + e^(2λ/μ) Φ(-v), u = √(λ/x) (x/μ - 1), v = √(λ/x) (x/μ + 1),
# density f(x) = √(λ/x³) φ(u). Since e^(2λ/μ) φ(v) = φ(u), ∂F/∂μ = -(2λ/μ²) e^(2λ/μ) Φ(-v) =
# -(2λ/μ²) φ(u) √(π/2) erfcx(v/√2) and φ(u) cancels from the quantile's partials: ∂x/∂μ =
# -(∂F/∂μ)/f = √(2π) x √(λx) erfcx(v/√2) / μ², of one sign, for the quantile of F and of 1 - F
# alike; and x(q; μ, λ) = λ x(q; μ/λ, 1) gives ∂x/∂λ = (x - μ ∂x/∂μ) / λ.
def _invgauss_quantile_dmu(y, q, mu, lam):
    v = np.sqrt(lam / (2.0 * y)) * (y / mu + 1.0)
    return _SQRT_2PI * y * np.sqrt(lam * y) * erfcx(v) / (mu * mu)


def _invgauss_quantile_dlam(y, q, mu, lam):
    return (y - mu * _invgauss_quantile_dmu(y, q, mu, lam)) / lam


def _invgauss_density(x, mu, lam):
    """f(x) = √(λ / (2π x³)) exp(-λ (x - μ)² / (2 μ² x))."""
    return np.sqrt(lam / (2.0 * math.pi * x ** 3)) * np.exp(
        -lam * (x - mu) ** 2 / (2.0 * mu * mu * x))


# d/dx of SciPy's _scaled_exp1(x) = x e^x E_1(x) (scipy.stats.invgauss.entropy's) is
# y + e^x E_1(x) - 1, which cancels as y tends to 1 (to 1e-12 at x = 50, where it is 1/x²); from 50
# its asymptotic series Σ_(k≥1) (-1)^(k+1) k k! / x^(k+1), whose first term left out, of the 33
# taken (their coefficients float32's too), is below 1e-16 of the sum there. +inf at 0
# (-log x - γ - 1).
_SCALED_EXP1_TERMS = [(-1.0) ** (k + 1) * k * math.factorial(k) for k in range(1, 34)]
_SCALED_EXP1_ASYMPTOTIC = 50.0


def _scaled_exp1_derivative(y, x):
    far = x >= _SCALED_EXP1_ASYMPTOTIC
    u = 1.0 / np.where(far, x, _SCALED_EXP1_ASYMPTOTIC)
    series = _series(_SCALED_EXP1_TERMS, u) * u * u
    zero = x == 0
    near = np.where(far | zero, 1.0, x)  # y / x as e^x E_1(x): its derivative has no y / x²
    closed = np.where(far | zero, 1.0, y) + np.exp(near) * exp1(near) - 1.0
    return np.where(far, series, np.where(zero, np.inf, closed))


def _ndtri_exp_slope(y, x):
    """d/dx ndtri_exp(x) = e^x / φ(y): below the median Φ(y)/φ(y) = √(π/2) erfcx(-y/√2) (e^x
    is Φ(y)), above e^x times ``_numerics.inverse_slope`` of the tail 1 - e^x = -expm1(x)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(y < 0, 1.0, np.exp(x))
        tail = np.where(y < 0, 1.0, -np.expm1(x))
    return factor * _numerics.inverse_slope(y / math.sqrt(2.0), tail, 0.5 * _SQRT_2PI)


# fmt: off
# One line per ufunc: the partial derivative of each input, from (y, *inputs). Recurrences for
# the Bessel functions: C'_v = (C_{v-1} - C_{v+1}) / 2 for J and Y, (I_{v-1} + I_{v+1}) / 2,
# -(K_{v-1} + K_{v+1}) / 2; the exponentially scaled ones (ive = iv e^-|x|, kve = kv e^x) add
# the derivative of the scaling, and where that difference cancels take their expansions for
# large x and integrals of one sign below 50 (i0e, i1e, k0e, k1e, kve). Integer orders (yn)
# are piecewise constant: no gradient.
elementwise(gamma,     lambda y, x: y * _numerics.digamma(x),                        uses="xy")
elementwise(rgamma,    _numerics.rgamma_derivative,                                  uses="xy")
elementwise(gammaln,   lambda y, x: _numerics.digamma(x))
elementwise(loggamma,  lambda y, x: psi(x))
elementwise(psi,       lambda y, x: _trigamma(x))
elementwise(beta,      lambda y, a, b: -y * _numerics.psi_difference(a, b),
                       lambda y, a, b: -y * _numerics.psi_difference(b, a),          uses="xy")
elementwise(betaln,    lambda y, a, b: -_numerics.psi_difference(a, b),
                       lambda y, a, b: -_numerics.psi_difference(b, a))
elementwise(betainc,   _betainc_da, _betainc_db, _incomplete_beta_density)
elementwise(betaincc,  _negated(_betainc_da), _negated(_betainc_db),
            _negated(_incomplete_beta_density))
elementwise(gammainc,  _gammainc_da, _numerics.incomplete_gamma_density)
elementwise(gammaincc, _negated(_gammainc_da), _negated(_numerics.incomplete_gamma_density))
elementwise(stdtr,     lambda y, df, t: _numerics.stdtr_dnu(df, t), _numerics.student_t_density)
# t = stdtrit(df, p) solves stdtr(df, t) = p: ∂t/∂p = 1/f(t), ∂t/∂df = -(∂stdtr/∂df)(t) / f(t)
elementwise(stdtrit,   lambda y, df, p: -_numerics.stdtr_dnu(df, y) / _t_density_at(y, df),
            lambda y, df, p: 1.0 / _t_density_at(y, df),                             uses="xy")
elementwise(erf,       lambda y, x: (2.0 / _SQRT_PI) * _numerics.exp_of_square(x, -1.0))
elementwise(erfc,      lambda y, x: (-2.0 / _SQRT_PI) * _numerics.exp_of_square(x, -1.0))
elementwise(erfcx,     _numerics.erfcx_derivative,                                   uses="xy")
elementwise(erfinv,    lambda y, x: _numerics.inverse_slope(y, 1.0 - np.where(y < 0, -x, x),
                                                     0.5 * _SQRT_PI),                  uses="xy")
elementwise(erfcinv,   lambda y, x: _numerics.inverse_slope(y, np.where(y < 0, 2.0 - x, x),
                                                     -0.5 * _SQRT_PI),                 uses="xy")
elementwise(ndtr,      lambda y, x: _numerics.exp_of_square(x, -0.5) / _SQRT_2PI)
elementwise(ndtri,     lambda y, x: _numerics.inverse_slope(y / math.sqrt(2.0),
                                                     np.where(y < 0, x, 1.0 - x),
                                                     0.5 * _SQRT_2PI),                  uses="xy")
elementwise(log_ndtr,  _numerics.log_ndtr_derivative,                                uses="xy")
elementwise(expit,     lambda y, x: logistic_density(x))
elementwise(log_expit, lambda y, x: logistic(-x))
elementwise(logit,     lambda y, x: np.divide(1.0, x * (1.0 - x)))
def _riemann_exponent(name):
    """The decision of ``zeta(x)``'s (``zetac(x)``'s) derivative, taken in the forward pass
    where the values are known: x = +inf (ζ = 1, whose slope is 0). Its series sums the
    derivative for x > 1 alone, so a differentiated x ≤ 1 (the pole, the continuation) is
    refused here, not when the gradient is pulled back."""
    def decide(x):
        if np.any(x <= 1.0):  # (x may be traced by an enclosing differentiation)
            raise UnsupportedOperationError(
                f"scipy.special.{name}(x) of a differentiated x <= 1: mutad differentiates the "
                "Riemann zeta function in x for x > 1 (by the Euler-Maclaurin formula), not at "
                "its pole x = 1 or in its continuation below it. Pass x there as a constant "
                "(mutad.stop_gradient).")
        return x == np.inf
    return decide


def _riemann_zeta_dx(y, x, infinite):
    """ζ'(x) = ∂ζ(x, 1)/∂x, the Hurwitz function's at q = 1 (also zetac's, ζ - 1's): its
    terms -log(k) k^-x all have one sign, so it holds to rounding for large x too."""
    return np.where(infinite, 0.0, _numerics.zeta_derivative(1)(np.where(infinite, 2.0, x), 1.0))


elementwise(xlogy,     _xlogy_dx, _xlogy_dw,                                     decide=_xlogy_zeros)
elementwise(xlog1py,   _xlog1py_dx, _xlog1py_dw,                                 decide=_xlog1py_zeros)
elementwise(entr,      lambda y, x: -(np.log(x) + 1.0))
elementwise(rel_entr,  _rel_entr_dx, _rel_entr_dw,                               decide=_xlogy_zeros)
elementwise(j0,        lambda y, x: -j1(x))
elementwise(j1,        lambda y, x: 0.5 * (j0(x) - jv(2.0, x)))
elementwise(jv,        _in_order("j", "jv"), lambda y, v, x: 0.5 * (jv(v - 1.0, x) - jv(v + 1.0, x)))
elementwise(y0,        lambda y, x: -y1(x))
elementwise(y1,        lambda y, x: 0.5 * (y0(x) - yn(2, x)))
# yn truncates its order to an integer n (as kn): Y_n' = (Y_(n-1) - Y_(n+1)) / 2
elementwise(yn,        None, lambda y, n, x: 0.5 * (yn(np.trunc(n) - 1.0, x)
                                                    - yn(np.trunc(n) + 1.0, x)))
elementwise(yv,        _in_order("y", "yv"), lambda y, v, x: 0.5 * (yv(v - 1.0, x) - yv(v + 1.0, x)))
# (jve and yve scale by exp(-|Im x|): 1 for the real arguments differentiated)
elementwise(jve,       _in_order("j", "jve"), lambda y, v, x: 0.5 * (jve(v - 1.0, x) - jve(v + 1.0, x)))
elementwise(yve,       _in_order("y", "yve"), lambda y, v, x: 0.5 * (yve(v - 1.0, x) - yve(v + 1.0, x)))
elementwise(i0,        lambda y, x: i1(x))
elementwise(i1,        lambda y, x: 0.5 * (i0(x) + iv(2.0, x)))
elementwise(iv,        _in_order("i", "iv"), lambda y, v, x: 0.5 * (iv(v - 1.0, x) + iv(v + 1.0, x)))
elementwise(i0e,       _scaled_i(0),                                      uses="xy", decide=sign_of)
elementwise(i1e,       _scaled_i(1),                                      uses="xy", decide=sign_of)
elementwise(ive,       _in_order("i", "ive", scaled=True), _ive_derivative, uses="xy",
            decide=_sign_of_x)
elementwise(k0,        lambda y, x: -k1(x))
elementwise(k1,        _numerics.k1_derivative)
elementwise(kv,        _numerics.kv_dv, _numerics.kv_derivative)
elementwise(k0e,       _numerics.scaled_k_derivative(0),                             uses="xy")
elementwise(k1e,       _numerics.scaled_k_derivative(1),                             uses="xy")
elementwise(kve,       _numerics.kve_dv, _kve_derivative,                            uses="xy")
elementwise(huber,     _huber_ddelta, _huber_dr,                               decide=_huber_parts)
elementwise(pseudo_huber, _pseudo_huber_ddelta, _pseudo_huber_dr)
elementwise(boxcox,    lambda y, x, lmbda: np.power(x, lmbda - 1.0), _boxcox_dlambda(np.log),
            uses="xy")
elementwise(boxcox1p,  lambda y, x, lmbda: np.power(1.0 + x, lmbda - 1.0),
            _boxcox_dlambda(np.log1p),                                                uses="xy")
elementwise(inv_boxcox, _inv_boxcox_dy, _inv_boxcox_dlambda,                          uses="xy")
elementwise(inv_boxcox1p, lambda x, y, lmbda: _inv_boxcox_dy(x + 1.0, y, lmbda),
            _inv_boxcox1p_dlambda,                                                    uses="xy")
elementwise(exprel,    _exprel_derivative)
elementwise(exp1,      lambda y, x: -np.exp(-x) / x)
elementwise(expi,      _expi_derivative)
elementwise(expn,      None, _expn_dx)
elementwise(exp10,     lambda y, x: math.log(10.0) * y,                                uses="y")
elementwise(exp2,      lambda y, x: math.log(2.0) * y,                                 uses="y")
elementwise(cbrt,      lambda y, x: 1.0 / (3.0 * y * y),                               uses="y")
elementwise(sindg,     lambda y, x: (math.pi / 180.0) * cosdg(x))
elementwise(cosdg,     lambda y, x: (-math.pi / 180.0) * sindg(x))
elementwise(binom,     lambda y, n, k: _numerics.binom_partials(y, n, k)[0],
            lambda y, n, k: _numerics.binom_partials(y, n, k)[1],                    uses="xy")
elementwise(poch,      _numerics.poch_dz, _numerics.poch_dm,                          uses="xy")
elementwise(kl_div,    lambda y, x, w, zeros: _rel_entr_dx(y, x, w, zeros) - 1.0,
            lambda y, x, w, zeros: _rel_entr_dw(y, x, w, zeros) + 1.0,           decide=_xlogy_zeros)
elementwise(log1p,     lambda y, x: np.divide(1.0, 1.0 + x))
elementwise(expm1,     lambda y, x: np.exp(x))  # not y + 1, which is 0 where exp(x) < ε
elementwise(dawsn,     _numerics.dawsn_derivative,                                   uses="xy")
elementwise(ellipk,    _ellipk_derivative)
elementwise(ellipe,    _ellipe_derivative)
elementwise(ellipkm1,  _ellipkm1_derivative,                                         uses="xy")
elementwise(spence,    _spence_derivative)
elementwise(owens_t,   _owens_t_dh, _owens_t_da)
elementwise(struve,    _ORDER, _struve_dx)
elementwise(modstruve, _ORDER, _modstruve_dx)
# 0F1(; b; z): d/dz = 0F1(; b + 1; z) / b
elementwise(agm,       _agm_da, lambda y, a, b: _agm_db(a, b))
# Wright's Φ(a, b; x) = Σ x^k / (k! Γ(ak + b)): d/dx Φ(a, b; x) = Φ(a, a + b; x); in a and b
# no closed form
elementwise(wright_bessel, _PARAMETER_A, _PARAMETER_B,
            lambda y, a, b, x: wright_bessel(a, a + b, x))
elementwise(log_wright_bessel, _PARAMETER_A, _PARAMETER_B,
            lambda y, a, b, x: np.exp(log_wright_bessel(a, a + b, x) - y),              uses="xy")
elementwise(hyp0f1,    NoClosedForm("the parameter b"),
            lambda y, b, z: hyp0f1(b + 1.0, z) / b)
# in a, b and c a first derivative for c > 0, |z| <= 0.9, by the series
# (``_numerics.gauss_parameter_derivative``)
elementwise(hyp2f1,    _in_parameter(0), _in_parameter(1), _in_parameter(2),
            lambda y, a, b, c, z: a * b / c * hyp2f1(a + 1.0, b + 1.0, c + 1.0, z))
elementwise(_zeta,     lambda y, x, q: _numerics.zeta_derivative(1)(x, q),
            lambda y, x, q: -x * _zeta(x + 1.0, q))
elementwise(_riemann_zeta, _riemann_zeta_dx, decide=_riemann_exponent("zeta"))
elementwise(zetac,     _riemann_zeta_dx,                                  decide=_riemann_exponent("zetac"))
elementwise(cosm1,     lambda y, x: -np.sin(x))
elementwise(tandg,     lambda y, x: (math.pi / 180.0) * (1.0 + y * y),                 uses="y")
elementwise(cotdg,     lambda y, x: (-math.pi / 180.0) * (1.0 + y * y),                uses="y")
# kn truncates its order to an integer n: K_n' = -(K_(n-1) + K_(n+1)) / 2
elementwise(kn,        None, lambda y, n, x: -0.5 * (kv(np.trunc(n) - 1.0, x)
                                                     + kv(np.trunc(n) + 1.0, x)))
# pdtr(k, m) = Q(floor(k) + 1, m), pdtrc its complement: piecewise constant in k
elementwise(pdtr,      None, lambda y, k, m: -_density(np.floor(k) + 1.0, m))
elementwise(pdtrc,     None, lambda y, k, m: _density(np.floor(k) + 1.0, m))
# bdtr(k, n, p) = I_(1-p)(n - k, k + 1) (k floored, a float n truncated as SciPy does), bdtrc its
# complement: piecewise constant in k, in p minus the beta(k + 1, n - k) density at p (0 where
# k >= n: bdtr is 1 there)
elementwise(bdtr,      None, NoClosedForm("the number of trials n"),
            lambda y, k, n, p: -_binomial_density(np.floor(k), np.trunc(n), p))
elementwise(bdtrc,     None, NoClosedForm("the number of trials n"),
            lambda y, k, n, p: _binomial_density(np.floor(k), np.trunc(n), p))
# nbdtr(k, n, p) = I_p(n, k + 1) (k and n truncated, as SciPy does), nbdtrc its complement:
# piecewise constant in k, in p the beta(n, k + 1) density at p
elementwise(nbdtr,     None, NoClosedForm("the number of successes n"),
            lambda y, k, n, p: _negative_binomial_density(np.trunc(k), np.trunc(n), p))
elementwise(nbdtrc,    None, NoClosedForm("the number of successes n"),
            lambda y, k, n, p: -_negative_binomial_density(np.trunc(k), np.trunc(n), p))
# fdtr(a, b, x) = I_w(a/2, b/2) with w = a x / (b + a x), fdtrc its complement
elementwise(fdtr,      _f_ddfn, _f_ddfd, lambda y, a, b, x: _f_density(a, b, x))
elementwise(fdtrc,     _negated(_f_ddfn), _negated(_f_ddfd),
            lambda y, a, b, x: -_f_density(a, b, x))
# x = fdtri(a, b, p) solves fdtr(a, b, x) = p: one over the density at x in p, and in a and b
# minus fdtr's partial over it
elementwise(fdtri,     lambda y, a, b, p: -_f_ddfn(None, a, b, y) / _f_density(a, b, y),
            lambda y, a, b, p: -_f_ddfd(None, a, b, y) / _f_density(a, b, y),
            lambda y, a, b, p: 1.0 / _f_density(a, b, y),                            uses="xy")
elementwise(erfi,      lambda y, x: (2.0 / _SQRT_PI) * _numerics.exp_of_square(x, 1.0))
elementwise(ndtri_exp, _ndtri_exp_slope,                                              uses="xy")
# The Kolmogorov distribution's complement kolmogorov(x) (scipy.stats.kstwobign.sf), its
# distribution function _kolmogc (kstwobign.cdf) and their inverses, by SciPy's own derivative
# _kolmogp; the one-sided Kolmogorov-Smirnov smirnov(n, d) (scipy.stats.ksone), piecewise
# constant in n, by SciPy's _smirnovp. Their derivatives' own (a second derivative) refused.
elementwise(kolmogorov, lambda y, x: _kolmogp(x))
elementwise(_kolmogc,  lambda y, x: -_kolmogp(x))
elementwise(kolmogi,   lambda y, p: 1.0 / _kolmogp(y),                                uses="xy")
elementwise(_kolmogci, lambda y, p: -1.0 / _kolmogp(y),                               uses="xy")
elementwise(_kolmogp,  NoClosedForm("x (a second derivative of the Kolmogorov distribution)"))
elementwise(smirnov,   None, lambda y, n, d: _smirnovp(n, d))
elementwise(_smirnovc, None, lambda y, n, d: -_smirnovp(n, d))
elementwise(smirnovi,  None, lambda y, n, p: 1.0 / _smirnovp(n, y),                   uses="xy")
elementwise(_smirnovci, None, lambda y, n, p: -1.0 / _smirnovp(n, y),                 uses="xy")
elementwise(_smirnovp, NoClosedForm("the number of samples n"), NoClosedForm(
    "d (a second derivative of the one-sided Kolmogorov-Smirnov distribution)"))
# x^p - 1: p x^(p-1) in x (0 where p = 0: x^0 - 1 is 0 for every x), x^p log x in p (0 where
# x^p is: the limit at x = 0)
elementwise(powm1,     lambda y, x, p: p * np.power(np.where(p == 0.0, 1.0, x), p - 1.0),
            lambda y, x, p: xlogy(y + 1.0, x),                                        uses="xy")
# in a and b a first derivative, by the series (``_numerics.kummer_parameter_derivative``)
elementwise(hyp1f1,    lambda y, a, b, x: _numerics.kummer_parameter_derivative(0)(a, b, x),
            lambda y, a, b, x: _numerics.kummer_parameter_derivative(1)(a, b, x),
            lambda y, a, b, x: a / b * hyp1f1(a + 1.0, b + 1.0, x))
# The inverses of P(a, x) and Q(a, x) in the probability: one over the density at x = y
# and in a, -(∂P/∂a) / (∂P/∂x) at x = y, the same for the complement (both partials change sign)
elementwise(gammaincinv,  _inverse_gamma_da, lambda y, a, p: _inverse_density(y, a),  uses="xy")
elementwise(gammainccinv, _inverse_gamma_da, lambda y, a, q: -_inverse_density(y, a), uses="xy")
# The inverses of I_x(a, b) and its complement in the probability: one over the density at x = y,
# B(a, b) x^(1-a) (1-x)^(1-b)
elementwise(betaincinv,  _inverse_beta_dab(0), _inverse_beta_dab(1),
            lambda y, a, b, p: _beta_inverse_density(y, a, b),                        uses="xy")
elementwise(betainccinv, _inverse_beta_dab(0), _inverse_beta_dab(1),
            lambda y, a, b, q: -_beta_inverse_density(y, a, b),                       uses="xy")
# scipy.stats.beta.ppf's own (Boost's) inverse, _beta_ppf(p, a, b) = betaincinv(a, b, p)
elementwise(_beta_ppf,   lambda y, p, a, b: _beta_inverse_density(y, a, b),
            lambda y, p, a, b: _inverse_beta_dab(0)(y, a, b, p),
            lambda y, p, a, b: _inverse_beta_dab(1)(y, a, b, p),                      uses="xy")
# scipy.stats.skewnorm.ppf's and isf's own (Boost's) inverses, x = _skewnorm_ppf(q, loc, scale, a)
# of the distribution function Φ(z) - 2 T(z, a), z = (x - loc) / scale (Owen's T), and
# _skewnorm_isf of its complement: ± one over the density 2 φ(z) Φ(a z) / scale in q, 1 in loc,
# z in scale, and in a minus the distribution function's partial over the density (the same for
# both), ∂T/∂a = exp(-z² (1 + a²) / 2) / (2π (1 + a²))
elementwise(_skewnorm_ppf, _skewnorm_quantile_dq(1.0), _skewnorm_quantile_dloc,
            _skewnorm_quantile_dscale, _skewnorm_quantile_da,                         uses="xy")
elementwise(_skewnorm_isf, _skewnorm_quantile_dq(-1.0), _skewnorm_quantile_dloc,
            _skewnorm_quantile_dscale, _skewnorm_quantile_da,                         uses="xy")
# chdtr(v, x) = P(v/2, x/2) and gdtr(a, b, x) = P(b, a x), and their complements
elementwise(chdtr,     _chi2_ddf, lambda y, v, x: 0.5 * _density(0.5 * v, 0.5 * x))
elementwise(chdtrc,    _negated(_chi2_ddf), lambda y, v, x: -0.5 * _density(0.5 * v, 0.5 * x))
# x = chdtri(v, q) solves chdtrc(v, x) = q: one over its partial in x, and in v minus the ratio
elementwise(chdtri,    lambda y, v, q: -_chi2_ddf(None, v, y) / (0.5 * _density(0.5 * v, 0.5 * y)),
            lambda y, v, q: -2.0 * _inverse_density(0.5 * y, 0.5 * v),                uses="xy")
elementwise(gdtr,      lambda y, a, b, x: x * _density(b, a * x),
            lambda y, a, b, x: _numerics.gammainc_da(b, a * x),
            lambda y, a, b, x: a * _density(b, a * x))
elementwise(gdtrc,     lambda y, a, b, x: -x * _density(b, a * x),
            lambda y, a, b, x: -_numerics.gammainc_da(b, a * x),
            lambda y, a, b, x: -a * _density(b, a * x))
# Incomplete elliptic integrals F(φ|m) and E(φ|m): in the amplitude φ, 1/Δ and Δ with
# Δ = sqrt(1 - m sin²φ); in the parameter m, _ellipkinc_dm and _ellipeinc_dm
elementwise(ellipkinc, lambda y, phi, m: _where_defined(y, 1.0 / _delta(phi, m)),
            lambda y, phi, m: _where_defined(y, _ellipkinc_dm(y, phi, m)),            uses="xy")
elementwise(ellipeinc, lambda y, phi, m: _where_defined(y, _delta(phi, m)),
            lambda y, phi, m: _where_defined(y, _ellipeinc_dm(y, phi, m)),            uses="xy")
# Tricomi's U(a, b, x): U' = -a U(a + 1, b + 1, x) (DLMF 13.3.22)
elementwise(hyperu,    _PARAMETER_A, _PARAMETER_B,
            lambda y, a, b, x: -a * hyperu(a + 1.0, b + 1.0, x))
elementwise(radian,    Constant(math.pi / 180.0), Constant(math.pi / 10800.0),
            Constant(math.pi / 648000.0),                                reads=((), (), ()))
# Orthogonal polynomials: the derivative in x is one of degree n - 1 (Gegenbauer's
# C_n^(α)' = 2α C_{n-1}^(α+1), Jacobi's P_n^(α,β)' = (n + α + β + 1)/2 P_{n-1}^(α+1,β+1),
# L_n^(α)' = -L_{n-1}^(α+1), T_n' = n U_{n-1}, H_n' = 2n H_{n-1}); they hold for SciPy's
# non-integer degrees (its hypergeometric forms) too. The degree is held constant.
elementwise(eval_legendre,  _DEGREE, _of_degree(lambda y, n, x: eval_gegenbauer(n - 1, 1.5, x)))
elementwise(eval_chebyt,    _DEGREE, _of_degree(lambda y, n, x: n * eval_chebyu(n - 1, x)))
elementwise(eval_chebyu,    _DEGREE, _of_degree(lambda y, n, x: 2.0 * eval_gegenbauer(n - 1, 2.0, x)))
elementwise(eval_chebyc,    _DEGREE, _of_degree(lambda y, n, x: n * eval_chebyu(n - 1, 0.5 * x)))
elementwise(eval_chebys,    _DEGREE,
            _of_degree(lambda y, n, x: eval_gegenbauer(n - 1, 2.0, 0.5 * x)))
elementwise(eval_sh_legendre, _DEGREE,
            _of_degree(lambda y, n, x: 2.0 * eval_gegenbauer(n - 1, 1.5, 2.0 * x - 1.0)))
elementwise(eval_sh_chebyt, _DEGREE,
            _of_degree(lambda y, n, x: 2.0 * n * eval_chebyu(n - 1, 2.0 * x - 1.0)))
elementwise(eval_sh_chebyu, _DEGREE,
            _of_degree(lambda y, n, x: 4.0 * eval_gegenbauer(n - 1, 2.0, 2.0 * x - 1.0)))
elementwise(eval_laguerre,  _DEGREE, _of_degree(lambda y, n, x: -eval_genlaguerre(n - 1, 1.0, x)))
elementwise(eval_hermite,   _DEGREE, _of_degree(lambda y, n, x: 2.0 * n * eval_hermite(n - 1, x)))
elementwise(eval_hermitenorm, _DEGREE,
            _of_degree(lambda y, n, x: n * eval_hermitenorm(n - 1, x)))
elementwise(eval_gegenbauer, _DEGREE, _ALPHA, _of_degree(
    lambda y, n, alpha, x: 2.0 * alpha * eval_gegenbauer(n - 1, alpha + 1.0, x)))
elementwise(eval_genlaguerre, _DEGREE, _genlaguerre_dalpha, _of_degree(
    lambda y, n, alpha, x: -eval_genlaguerre(n - 1, alpha + 1.0, x)))
elementwise(eval_jacobi,    _DEGREE, _ALPHA, _BETA, _of_degree(
    lambda y, n, alpha, beta, x: 0.5 * (n + alpha + beta + 1.0)
    * eval_jacobi(n - 1, alpha + 1.0, beta + 1.0, x)))
elementwise(wofz,      lambda y, z: -2.0 * z * y + 2j / _SQRT_PI,                      uses="xy")
# the Hankel functions H = J ± iY, complex of a real z too: H' = (H_(v-1) - H_(v+1)) / 2
elementwise(_special.hankel1, _ORDER,
            lambda y, v, z: 0.5 * (_special.hankel1(v - 1.0, z) - _special.hankel1(v + 1.0, z)))
elementwise(_special.hankel2, _ORDER,
            lambda y, v, z: 0.5 * (_special.hankel2(v - 1.0, z) - _special.hankel2(v + 1.0, z)))
elementwise(lpmv,      NoClosedForm("the order m"), NoClosedForm("the degree v"), _lpmv_dx,
            uses="xy")
# SciPy's lambertw(z, k, tol) is its ufunc _lambertw on k as an integer array: W' = e^(-W)/(1+W)
# on every branch k (W / (z (1 + W)) but for the 1 at z = 0); the branch and the tolerance
# have none.
elementwise(_lambertw, lambda y, z, k, tol: np.exp(-y) / (1.0 + y), None, None,   uses="y")
# (in k, a first derivative: the Poisson mixture's terms', ``_numerics.ncx2_dk``)
elementwise(chndtr,    lambda y, x, k, lam: _ncx2_pdf(x, k, lam), _ncx2_cdf_dk,
            lambda y, x, k, lam: -_ncx2_next(y, x, k, lam))
elementwise(_ncx2_sf,  lambda y, x, k, lam: -_ncx2_pdf(x, k, lam), _negated(_ncx2_cdf_dk),
            _ncx2_next)
elementwise(_ncx2_pdf, _ncx2_pdf_dx,
            lambda y, x, k, lam: _numerics.ncx2_dk(True)(x, k, lam),
            lambda y, x, k, lam: 0.5 * (_ncx2_pdf(x, k + 2.0, lam) - y),               uses="xy")
elementwise(chndtrix,  lambda y, q, k, lam: 1.0 / _ncx2_pdf(y, k, lam), _ncx2_quantile_dk,
            _ncx2_quantile_dlam,                                                      uses="xy")
elementwise(_ncx2_isf, lambda y, q, k, lam: -1.0 / _ncx2_pdf(y, k, lam), _ncx2_quantile_dk,
            _ncx2_quantile_dlam,                                                      uses="xy")
elementwise(_nct_pdf,  _nct_pdf_dt, _DEGREES_OF_FREEDOM, _nct_pdf_dmu,                uses="xy")
elementwise(nctdtr,    _DEGREES_OF_FREEDOM, lambda y, nu, mu, t: -_nct_normal_mean(t, nu, mu),
            lambda y, nu, mu, t: _nct_pdf(t, nu, mu))
elementwise(_nct_sf,   lambda y, t, nu, mu: -_nct_pdf(t, nu, mu), _DEGREES_OF_FREEDOM,
            lambda y, t, nu, mu: _nct_normal_mean(t, nu, mu))
elementwise(nctdtrit,  _DEGREES_OF_FREEDOM, _nct_quantile_dmu,
            lambda y, nu, mu, q: 1.0 / _nct_pdf(y, nu, mu),                           uses="xy")
elementwise(_nct_isf,  lambda y, q, nu, mu: -1.0 / _nct_pdf(y, nu, mu), _DEGREES_OF_FREEDOM,
            lambda y, q, nu, mu: _nct_quantile_dmu(y, nu, mu, q),                     uses="xy")
elementwise(_ncf_pdf,  _ncf_pdf_dx, _DEGREES_OF_FREEDOM, _DEGREES_OF_FREEDOM,
            lambda y, x, n1, n2, lam: 0.5 * (_ncf_next(x, n1, n2, lam) - y),          uses="xy")
elementwise(ncfdtr,    _DEGREES_OF_FREEDOM, _DEGREES_OF_FREEDOM,
            lambda y, n1, n2, lam, x: _ncf_cdf_dlam(x, n1, n2, lam),
            lambda y, n1, n2, lam, x: _ncf_pdf(x, n1, n2, lam))
elementwise(_ncf_sf,   lambda y, x, n1, n2, lam: -_ncf_pdf(x, n1, n2, lam), _DEGREES_OF_FREEDOM,
            _DEGREES_OF_FREEDOM, lambda y, x, n1, n2, lam: -_ncf_cdf_dlam(x, n1, n2, lam))
elementwise(ncfdtri,   _DEGREES_OF_FREEDOM, _DEGREES_OF_FREEDOM,
            lambda y, n1, n2, lam, q: _ncf_quantile_dlam(y, n1, n2, lam),
            lambda y, n1, n2, lam, q: 1.0 / _ncf_pdf(y, n1, n2, lam),                uses="xy")
elementwise(_ncf_isf,  lambda y, q, n1, n2, lam: -1.0 / _ncf_pdf(y, n1, n2, lam),
            _DEGREES_OF_FREEDOM, _DEGREES_OF_FREEDOM,
            lambda y, q, n1, n2, lam: _ncf_quantile_dlam(y, n1, n2, lam),             uses="xy")
elementwise(_invgauss_ppf, lambda y, q, mu, lam: 1.0 / _invgauss_density(y, mu, lam),
            _invgauss_quantile_dmu, _invgauss_quantile_dlam,                          uses="xy")
elementwise(_invgauss_isf, lambda y, q, mu, lam: -1.0 / _invgauss_density(y, mu, lam),
            _invgauss_quantile_dmu, _invgauss_quantile_dlam,                          uses="xy")
elementwise(_scaled_exp1, _scaled_exp1_derivative,                                uses="xy")
elementwise(voigt_profile, *(lambda y, x, sigma, gamma, k=k: _voigt_partials(x, sigma, gamma)[k]
                             for k in range(3)))
# fmt: on


_FAR = 8.0
"""Where |z| ≥ this, w'(z) = -2z w(z) + 2i/√π cancels (to 2 digits here, all of them at
σ = 1e-8): the Voigt profile's partials take w's asymptotic series there, whose terms fall
below 1e-19 by the 25th."""

_ASYMPTOTIC_TERMS = 25


def _voigt_far(zeta, sigma):
    """``(d_x, d_sigma, d_gamma)`` of the Voigt profile from w(z) ~ (i/√π) Σ c_k / z^(2k+1),
    c_k = (2k-1)!! / 2^k, in ζ = x + iγ and t = 1/z² = 2σ²/ζ² (finite at σ = 0, where they are
    the Lorentzian's): w'(z) = -(i/√π) Σ (2k+1) c_k t^k / z², z w' + w = -(i/√π) Σ 2k c_k t^k / z,
    term by term, as the partials divided by σ² and σ² √2 / ζ. The series leaves out a term
    e^(-z²) S beside the real axis (all of Re w on it), which the caller weighs."""
    t = 2.0 * sigma * sigma / (zeta * zeta)
    slope = radial = 0.0
    for k in range(_ASYMPTOTIC_TERMS - 1, -1, -1):  # by Horner's scheme
        c = math.prod(range(1, 2 * k, 2)) / 2.0 ** k
        slope = slope * t + (2 * k + 1) * c
        if k:
            radial = radial * t + 2 * k * c
    along = -1j * slope / (math.pi * zeta * zeta)
    return (np.real(along), -np.real(-1j * 2.0 * sigma * radial / (math.pi * zeta ** 3)),
            -np.imag(along))


def _voigt_partials(x, sigma, gamma):
    """The partials of SciPy's Voigt profile V = Re w(z) / (σ √(2π)), z = (x + iγ) / (σ √2),
    in x, σ and γ, by the Faddeeva function's derivative w'(z) = -2z w(z) + 2i/√π; where
    |z| ≥ ``_FAR`` (at σ = 0 too: those of the Lorentzian γ / (π (x² + γ²)) it is there, whose
    σ-partial is 0, the profile being even in σ), by ``_voigt_far``. Its series leaves out
    e^(-z²) S, S = 1 on the real axis, falling to 0 away from it, where the real parts (the x-
    and σ-partials) of the series are proportional to γ and may be smaller: within 1 of the
    axis (γ ≤ σ √2) the partials add those of e^(-z²) (the rest, (1 - S) e^(-z²), is below
    1e-25 of theirs); beyond, they take the series where what it leaves out, below
    e^(γ'² - x'²) (x' + iγ' = z), is below 1e-17 of theirs, or z is as far above the axis as
    along it, and w' elsewhere. Each branch reads safe points where another is taken, so that
    its own derivatives are finite there."""
    zeta = x + 1j * gamma
    size = np.abs(zeta) / (math.sqrt(2.0) * sigma)  # |z|, inf at σ = 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        far = size >= _FAR
        near_axis = np.logical_and(far, (sigma > 0) & (gamma <= math.sqrt(2.0) * sigma))
        left_out = np.exp((gamma - x) * (gamma + x) / (2.0 * sigma * sigma)) * size ** 5
        real_far = np.logical_and(far, near_axis | (sigma == 0) | (gamma >= np.abs(x))
                                  | (left_out <= 1e-17 * gamma / (math.sqrt(2.0) * sigma)))
    s = np.where(real_far, 1.0, sigma)
    scale = s * math.sqrt(2.0)
    z = np.where(real_far, 1.0, zeta) / scale
    w = wofz(z)
    slope = -2.0 * z * w + 2j / _SQRT_PI  # w'(z)
    norm = s * math.sqrt(2.0 * math.pi)
    near = (np.real(slope) / (scale * norm), -np.real(slope * z + w) / (s * norm),
            -np.imag(slope) / (scale * norm))
    if not np.any(far):
        return near
    d_x, d_sigma, d_gamma = _voigt_far(np.where(far, zeta, 1.0), np.where(far, sigma, 0.0))
    if np.any(near_axis):  # the partials of e^(-z²) / (σ √(2π))
        s = np.where(near_axis, sigma, 1.0)
        zeta = np.where(near_axis, zeta, 0.0)
        z, square = zeta / (s * math.sqrt(2.0)), zeta * zeta / (2.0 * s * s)  # (exact z²: x²/2)
        e = np.exp(-square)
        slope, radial = -2.0 * z * e, (1.0 - 2.0 * square) * e
        d_x = d_x + np.where(near_axis, np.real(slope) / (2.0 * _SQRT_PI * s * s), 0.0)
        d_sigma = d_sigma - np.where(near_axis, np.real(radial) / (_SQRT_2PI * s * s), 0.0)
        d_gamma = d_gamma - np.where(near_axis, np.imag(slope) / (2.0 * _SQRT_PI * s * s), 0.0)
    return (np.where(real_far, d_x, near[0]), np.where(real_far, d_sigma, near[1]),
            np.where(far, d_gamma, near[2]))


# The rows whose partials are complex derivatives, for complex arguments (facet complex).
# Not ive, jve, yve (their scaling by exp(-|Re z|) or exp(-|Im z|) is not complex-
# differentiable), nor those whose partials call functions SciPy computes for real values only
# (rgamma and psi at order 1; gamma and loggamma at order 2, through polygamma), nor erfcx
# (its partial's asymptotic series is for large real arguments). log_ndtr's partial takes the
# textbook form for complex arguments (numerics.log_ndtr_derivative).
holomorphic(erf, erfc, ndtr, log_ndtr, xlogy, xlog1py, jv, yv, iv, kv, kve, log1p, expm1, dawsn,
            erfi, wofz, _lambertw, _special.hankel1, _special.hankel2)


# The ufuncs with several outputs, each output's derivative in x (from x and the outputs):
# sici's Si' = sin x / x and Ci' = cos x / x, shichi's Shi' = sinh x / x and Chi' = cosh x / x,
# fresnel's S' = sin(πx²/2) and C' = cos(πx²/2), airy's Ai' = Aip, Aip' = x Ai (and Bi's).
def _sinc(x):  # sin x / x, 1 at 0
    return np.sinc(x / math.pi)


def _sinhc(x):  # sinh x / x, 1 at 0
    small = np.abs(x) < 1e-4
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 + x * x / 6.0, np.sinh(safe) / safe)


def _over_x(f):
    """f(x) / x, infinite at x = 0 (Ci and Chi have a logarithmic pole there), read at a safe
    point there so that its own derivative has no nan."""
    def partial(x):
        zero = x == 0
        safe = np.where(zero, 1.0, x)
        return np.where(zero, np.inf, f(safe) / safe)
    return partial


_SEVERAL_OUTPUTS = {
    _special.sici: lambda x, ys: (_sinc(x), _over_x(np.cos)(x)),
    _special.shichi: lambda x, ys: (_sinhc(x), _over_x(np.cosh)(x)),
    _special.fresnel: lambda x, ys: (np.sin((0.5 * math.pi) * x * x),
                                     np.cos((0.5 * math.pi) * x * x)),
    _special.airy: lambda x, ys: (ys[1], x * ys[0], ys[3], x * ys[2]),
    # the integrals of J_0 and Y_0, of I_0 and K_0: their integrands (not itairy's, whose
    # values SciPy computes to about 1e-8, so that its differences are not its integrands)
    _special.itj0y0: lambda x, ys: (j0(x), y0(x)),
    _special.iti0k0: lambda x, ys: (i0(x), k0(x)),
    _special.it2j0y0: lambda x, ys: (_one_minus_j0_over_x(x), -_over_x(y0)(x)),
    _special.it2i0k0: lambda x, ys: (_i0_minus_one_over_x(x), -_over_x(k0)(x)),
    # eAi = Ai e^ζ and eBi = Bi e^-|Re ζ|, ζ = 2/3 x^(3/2): for x > 0 eAi' = eAip + √x eAi,
    # eAip' = x eAi + √x eAip, eBi' = eBip - √x eBi, eBip' = x eBi - √x eBip; for x < 0 Bi's
    # scaling is 1 (eAi is nan there)
    _special.airye: lambda x, ys: _airye_derivatives(x, ys),
}


def _one_minus_j0_over_x(x):  # (1 - J_0(x)) / x, 0 at 0 (x / 4 near it)
    small = np.abs(x) < 1e-4
    safe = np.where(small, 1.0, x)
    return np.where(small, 0.25 * x, (1.0 - j0(safe)) / safe)


def _i0_minus_one_over_x(x):  # (I_0(x) - 1) / x, 0 at 0 (x / 4 near it)
    small = np.abs(x) < 1e-4
    safe = np.where(small, 1.0, x)
    return np.where(small, 0.25 * x, (i0(safe) - 1.0) / safe)


def _airye_derivatives(x, ys):
    eai, eaip, ebi, ebip = ys
    positive = x > 0
    root = np.where(positive, np.sqrt(np.where(positive, x, 1.0)), 0.0)
    return (eaip + root * eai, x * eai + root * eaip, ebip - root * ebi, x * ebi - root * ebip)


def _several_outputs(ufunc):
    derivatives = _SEVERAL_OUTPUTS[ufunc]

    def outputs(x, kwargs):
        if kwargs:
            raise UnsupportedOperationError(
                f"scipy.special.{ufunc.__name__}(..., {', '.join(kwargs)}=...) of a "
                "differentiated argument: call it without them and write the outputs where "
                "they belong.")
        if np.iscomplexobj(x):
            raise UnsupportedOperationError(
                f"scipy.special.{ufunc.__name__} of complex values has no rule in mutad.")
        ys = ufunc(x)
        return ys, derivatives(x, ys)

    def rule(x, **kwargs):
        ys, partials = outputs(x, kwargs)
        # an output not used (a zero cotangent) adds 0, even where its derivative is infinite
        return ys, lambda dys: (sum(times(dy, p) for dy, p in zip(dys, partials, strict=True)),)

    def jvp(tangents, x, **kwargs):
        ys, partials = outputs(x, kwargs)
        dx, = tangents
        return ys, tuple(times(dx, p) for p in partials)

    defrule(ufunc)(rule)
    defjvp(ufunc)(jvp)


for _ufunc in _SEVERAL_OUTPUTS:
    _several_outputs(_ufunc)


# ellipj's sn, cn, dn and φ = am(u|m): in u, sn' = cn dn, cn' = -sn dn, dn' = -m sn cn,
# φ' = dn; in m, φ moves so that F(φ|m) = u holds, ∂φ/∂m = -dn ∂F/∂m (F(φ|m) is u itself),
# and sn, cn, dn follow it (dn² = 1 - m sn²: ∂dn/∂m = -(sn² + 2m sn ∂sn/∂m) / 2dn).
def _ellipj_partials(u, m, ys):
    sn, cn, dn, _ = ys
    moved = -dn * _ellipkinc_dm(u, ys[3], m)
    in_u = (cn * dn, -sn * dn, -m * sn * cn, dn)
    in_m = (cn * moved, -sn * moved, -(sn * sn + 2.0 * m * sn * cn * moved) / (2.0 * dn),
            moved)
    return in_u, in_m


def _ellipj_outputs(u, m, kwargs):
    if kwargs or np.iscomplexobj(u) or np.iscomplexobj(m):
        raise UnsupportedOperationError(
            "scipy.special.ellipj of complex values or with out=/where= has no rule in mutad: "
            "call it on real u and m and write the outputs where they belong.")
    ys = _special.ellipj(u, m)
    return ys, _ellipj_partials(u, m, ys)


@defrule(_special.ellipj)
def _ellipj_rule(u, m, **kwargs):
    ys, (in_u, in_m) = _ellipj_outputs(u, m, kwargs)

    def back(dys):
        # an output not used (a zero cotangent) adds 0, even where its derivative is infinite
        du = sum(times(dy, p) for dy, p in zip(dys, in_u, strict=True))
        dm = sum(times(dy, p) for dy, p in zip(dys, in_m, strict=True))
        return unbroadcast(du, np.shape(u)), unbroadcast(dm, np.shape(m))

    return ys, back


@defjvp(_special.ellipj)
def _ellipj_jvp(tangents, u, m, **kwargs):
    ys, (in_u, in_m) = _ellipj_outputs(u, m, kwargs)
    du, dm = (tuple(tangents) + (None, None))[:2]
    return ys, tuple(sum(times(d, p) for d, p in ((du, pu), (dm, pm)) if d is not None)
                     for pu, pm in zip(in_u, in_m, strict=True))


# The parabolic cylinder functions give their value and its derivative in x, and solve
# Weber's equation y'' = c(order, x) y: pbdv's D_v and pbvv's V_v with c = x²/4 - v - 1/2,
# pbwa's W(a, x) with c = a - x²/4. Their derivative in the order has no closed form: a
# differentiated order is refused (the pullback gives it None).
_WEBER = {_special.pbdv: lambda v, x: 0.25 * x * x - v - 0.5,
          _special.pbvv: lambda v, x: 0.25 * x * x - v - 0.5,
          _special.pbwa: lambda a, x: a - 0.25 * x * x}


def _weber(ufunc):
    curvature = _WEBER[ufunc]

    def outputs(order, x, kwargs):
        if kwargs or np.iscomplexobj(order) or np.iscomplexobj(x):
            raise UnsupportedOperationError(
                f"scipy.special.{ufunc.__name__} of complex values or with out=/where= has no "
                "rule in mutad: call it on real arguments and write the outputs where they "
                "belong.")
        y, dy = ufunc(order, x)
        return (y, dy), (dy, curvature(order, x) * y)

    def rule(order, x, **kwargs):
        ys, partials = outputs(order, x, kwargs)
        return ys, lambda dys: (None, unbroadcast(
            sum(times(d, p) for d, p in zip(dys, partials, strict=True)), np.shape(x)))

    def jvp(tangents, order, x, **kwargs):
        dorder, dx = (tuple(tangents) + (None, None))[:2]
        if dorder is not None:
            raise UnsupportedOperationError(
                f"scipy.special.{ufunc.__name__}: mutad has no derivative with respect to the "
                "order, and it depends on the differentiated arguments. Pass it as a constant.")
        ys, partials = outputs(order, x, kwargs)
        return ys, tuple(None if dx is None else times(dx, p) for p in partials)

    defrule(ufunc)(rule)
    defjvp(ufunc)(jvp)


for _ufunc in _WEBER:
    _weber(_ufunc)


@polygamma.rule
def _polygamma_rule(n, x):
    y = polygamma(n, x)
    return y, lambda dy: (None, unbroadcast(dy * polygamma(n + 1, x), np.shape(x)))


@polygamma.jvp_rule
def _polygamma_jvp(tangents, n, x):
    return polygamma(n, x), tangents[1] * polygamma(n + 1, x)


def _reduced_axes(a, axis, b):
    ndim = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return tuple(range(ndim)) if axis is None else tuple(int(i) % ndim for i in np.atleast_1d(axis))


def _logsumexp_vanished(y_kept):
    """Where y is -inf, every term vanished: decided when y is computed (a pullback may see y
    restored up to rounding). (Of complex values, y's real part.)"""
    return np.isneginf(np.real(y_kept))


def _logsumexp_partials(a, b, vanished, axes):
    """``dy/da`` and ``dy/db`` (None without ``b``) of ``y = logsumexp(a, b=b)`` over ``axes``.

    y = log|s|, s = Σ b_i e^(a_i): with m the largest a_i of a term SciPy keeps (b_i ≠ 0) and
    s' = Σ b_i e^(a_i - m), the softmax's shares dy/da_i = b_i e^(a_i - m) / s' and
    dy/db_i = e^(a_i - m) / s' (s' carries y's sign). Not sign · b_i e^(a_i - y): y = m +
    log|s'| rounds log|s'| away where |m| is large (two equal terms at 1e17 had shares of 1
    each), and is inf - inf beside an infinity. Where m is +inf the terms at m share it as
    b_i / Σ b_j, their limits. Where every term vanished (y = -inf) no entry has any weight;
    a term SciPy leaves out (b_i = 0) has none either, even at a_i = inf.

    Of complex values (SciPy's principal logarithm of the complex sum: holomorphic in a and
    b) the same shares, complex, m the largest real part, as SciPy shifts by.
    """
    kept = a if b is None else np.where(b == 0, -np.inf, a)
    top = np.max(np.real(kept), axis=axes, keepdims=True, initial=-np.inf)  # (-inf: no terms)
    infinite = np.isposinf(top)
    level = np.where(infinite | np.isneginf(top), 0.0, top)  # (a NaN top: NaN partials)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where the top is inf
        shifted = np.where(infinite, np.isposinf(np.real(kept)) * 1.0, np.exp(kept - level))
        weights = shifted if b is None else shifted * b
        total = np.sum(weights, axis=axes, keepdims=True)
        total = np.where(vanished, 1.0, total)
        da = np.where(vanished, 0.0, weights / total)
        db = None
        if b is not None:
            own = np.where(infinite, shifted, np.exp(a - level))
            db = np.where(vanished, 0.0, own / total)
    return da, db


def _logsumexp_sign_of_complex(a, b, return_sign):
    """Refuse ``return_sign=True`` of complex values: then y is log|s|, and the sign s/|s|,
    neither of them holomorphic, as the rule's formulas are for complex values."""
    if return_sign and (np.iscomplexobj(a) or np.iscomplexobj(b)):
        raise UnsupportedOperationError(
            "scipy.special.logsumexp(..., return_sign=True) of complex values: log|s| and the "
            "phase s/|s| of the complex sum s are not complex-differentiable, and mutad "
            "differentiates logsumexp of complex values as the holomorphic log(s). Call it "
            "without return_sign (y = logsumexp(a) is log(s), np.real(y) log|s|).")


logsumexp.complex_values = HOLOMORPHIC  # (the softmax's shares hold for complex values)


@logsumexp.rule
def _logsumexp_rule(a, axis=None, b=None, keepdims=False, return_sign=False):
    _logsumexp_sign_of_complex(a, b, return_sign)
    result = logsumexp(a, axis, b, keepdims, return_sign)
    y = result[0] if return_sign else result
    axes = _reduced_axes(a, axis, b)

    def kept(value):
        return value if keepdims or value is None else np.expand_dims(value, axes)

    vanished = _logsumexp_vanished(kept(y))

    def back(dresult):
        dy = dresult[0] if return_sign else dresult  # the sign is piecewise constant
        partial_a, partial_b = _logsumexp_partials(a, b, vanished, axes)
        da = times(kept(dy), partial_a)
        db = None
        if b is not None:
            db = times(kept(dy), partial_b)
            db = unbroadcast(np.broadcast_to(db, np.broadcast_shapes(db.shape, np.shape(b))),
                             np.shape(b))
        da = unbroadcast(np.broadcast_to(da, np.broadcast_shapes(da.shape, np.shape(a))),
                         np.shape(a))
        return da, None, db

    return result, back


@logsumexp.jvp_rule
def _logsumexp_jvp(tangents, a, axis=None, b=None, keepdims=False, return_sign=False):
    _logsumexp_sign_of_complex(a, b, return_sign)
    result = logsumexp(a, axis, b, keepdims, return_sign)
    y = result[0] if return_sign else result
    axes = _reduced_axes(a, axis, b)

    def kept(value):
        return value if keepdims or value is None else np.expand_dims(value, axes)

    partials = _logsumexp_partials(a, b, _logsumexp_vanished(kept(y)), axes)
    da, db = tangents[0], tangents[2]
    terms = [times(t, partial) for t, partial in zip((da, db), partials) if t is not None]
    dy = np.sum(sum(terms), axis=axes, keepdims=keepdims)
    return result, (dy, None) if return_sign else dy


def _multigammaln_derivative(a, d):
    """d/da log Γ_d(a) = Σ_{j<d} ψ(a - j/2)."""
    return sum(psi(a - 0.5 * j) for j in range(int(d)))


@multigammaln.rule
def _multigammaln_rule(a, d):
    y = multigammaln(a, d)
    return y, lambda dy: (dy * _multigammaln_derivative(a, d), None)


@multigammaln.jvp_rule
def _multigammaln_jvp(tangents, a, d):
    return multigammaln(a, d), tangents[0] * _multigammaln_derivative(a, d)


@softmax.rule
def _softmax_rule(x, axis=None):
    y = softmax(x, axis)

    def back(dy):
        return (y * (dy - np.sum(dy * y, axis=axis, keepdims=True)),)

    return y, back


@softmax.jvp_rule
def _softmax_jvp(tangents, x, axis=None):
    y = softmax(x, axis)
    dx = tangents[0]
    return y, y * (dx - np.sum(dx * y, axis=axis, keepdims=True))


# log_softmax(x)_i = x_i - log Σ_j e^(x_j): its Jacobian is δ_ij - w_j, w = e^y the softmax.
# Each sum of products below is a ``product_times`` one: a zero tangent or cotangent beside a
# NaN of w (SciPy's e^(inf - inf) where x holds +inf) contributes zero, so that both modes
# give the Jacobian with NaN in the columns of the NaN weights only.
@log_softmax.rule
def _log_softmax_rule(x, axis=None):
    y = log_softmax(x, axis)

    def back(dy):
        return (dy - product_times(
            lambda d, w: np.sum(d, axis=axis, keepdims=True) * w, dy, np.exp(y)),)

    return y, back


@log_softmax.jvp_rule
def _log_softmax_jvp(tangents, x, axis=None):
    y = log_softmax(x, axis)
    dx = tangents[0]
    return y, dx - product_times(
        lambda w, d: np.sum(w * d, axis=axis, keepdims=True), np.exp(y), dx)


# ----------------------------------------------------------------------------------------------
# The spherical Bessel functions, which SciPy writes in Python (the reflection of a negative
# argument) on ufuncs of its own: SciPy's values of j_n, y_n, i_n, k_n and of their
# derivatives (``derivative=True``), differentiated in z by SciPy's derivative, and the
# derivative by the functions' differential equation, z² f'' + 2z f' ∓ (z² ∓ n(n+1)) f = 0
# (DLMF 10.47.1, 10.47.2), so every order follows; real or complex z (holomorphic). The order n
# has no derivative.


class _HolomorphicElementwise(Elementwise):
    """An elementwise function of z whose partial in z is its complex derivative."""

    complex_values = HOLOMORPHIC


def _spherical_second_derivative(modified, finite_at_zero):
    """f'' from f and f': the equation z² f'' + 2z f' - (±z² + n(n+1)) f = 0 (+ for
    ``modified``: i_n and k_n) gives f'' = -2f'/z + (±1 + n(n+1)/z²) f. At z = 0, where it
    divides by z, j_n's and i_n's (``finite_at_zero``) f'' is their power series
    Σ_k (±1)^k z^(2k+n) / (2^k k! (2n+2k+1)!!) differentiated twice, to the degree the
    differentiations running can take derivatives of (``_series_second_derivative``); y_n and
    k_n are infinite there."""
    sign = 1.0 if modified else -1.0

    def second(n, z, f, derivative):
        at_zero = z == 0
        safe = np.where(at_zero, 1.0, z)
        value = -2.0 * derivative / safe + (sign + n * (n + 1.0) / (safe * safe)) * f
        if not finite_at_zero or not np.any(at_zero):
            return value
        return np.where(at_zero, _series_second_derivative(n, z, sign), value)

    return second


def _series_second_derivative(n, z, sign):
    """The second derivative of Σ_k sign^k z^(2k+n) / (2^k k! (2n+2k+1)!!) at z = 0, to a
    degree above the number of differentiations running (each may take one more derivative
    of it, which a lower degree would give as 0 there), and at least 6."""
    total = 0.0 * z
    power = 1.0 + 0.0 * z  # z^degree
    for degree in range(max(7, len(ACTIVE.running) + 2)):
        coefficient = np.zeros(np.shape(n))
        for k in range(degree // 2 + 2):
            m = degree + 2 - 2 * k  # the order whose term k has this degree
            if m < 0:
                continue
            term = (sign ** k / (2.0 ** k * math.factorial(k) * _double_factorial(2 * m + 2 * k + 1))
                    * (2 * k + m) * (2 * k + m - 1))
            coefficient = np.where(n == m, term, coefficient)
        total = total + coefficient * power
        power = power * z
    return total


def _double_factorial(m):
    return math.prod(range(m, 0, -2))


def _spherical(original, modified, finite_at_zero):
    name = f"scipy.special.{original.__name__}"
    second = _spherical_second_derivative(modified, finite_at_zero)
    order = NoClosedForm("the order n")
    value = _HolomorphicElementwise(
        lambda n, z: original(n, z), order, lambda y, n, z: slope(n, z), name=name)
    slope = _HolomorphicElementwise(
        lambda n, z: original(n, z, True), order,
        lambda y, n, z: second(n, z, value(n, z), y), name=f"{name}(derivative=True)")

    def stand_in(n, z, derivative=False):  # (SciPy's name, by keyword too)
        return (slope if derivative else value)(n, z)

    return StandIn(original, stand_in)


spherical_jn = _spherical(_special.spherical_jn, False, True)
spherical_yn = _spherical(_special.spherical_yn, False, False)
spherical_in = _spherical(_special.spherical_in, True, True)
spherical_kn = _spherical(_special.spherical_kn, True, False)
__all__ += ["spherical_in", "spherical_jn", "spherical_kn", "spherical_yn"]


# ----------------------------------------------------------------------------------------------
# The spherical harmonics, a multiufunc SciPy calls in Python (it converts its arguments with
# np.asarray): SciPy's values of Y_n^m(θ, φ), differentiated in the angles (real θ and φ,
# complex Y; the degree n and order m are integers) by ∂Y/∂φ = i m Y and the ladder relation
# ∂Y/∂θ = ½ (√((n-m)(n+m+1)) e^(-iφ) Y_n^(m+1) - √((n+m)(n-m+1)) e^(iφ) Y_n^(m-1)), which
# holds at the poles too and is made of Y itself, so every order follows. SciPy's Y is 0 where
# |m| > n, and so is each term whose order leaves the range (its factor is 0 there). Outside
# [0, pi] SciPy's Y is that of arccos(cos θ) (its |sin θ|^|m| is sqrt(1 - cos² θ)^|m|), even
# about each pole: where sin θ < 0 the ladder of SciPy's Y, whose orders m ± 1 have the other
# parity, has the opposite sign of its derivative (at the poles, SciPy's own derivative).


def _ladder(n, m):
    """The factor √((n-m)(n+m+1)) of Y_n^(m+1) in the ladder relation; 0 outside |m| <= n."""
    return np.sqrt(np.where(np.abs(m) <= n, (n - m) * (n + m + 1.0), 0.0))


def _harmonics(original):
    """The stand-in of SciPy's ``sph_harm_y`` (``original``, held in a closure: the mode swaps
    the module-level names bound to routed functions)."""
    def dtheta(y, n, m, theta, phi):
        ladder = 0.5 * (_ladder(n, m) * np.exp(-1j * phi) * value(n, m + 1, theta, phi)
                        - _ladder(n, -m) * np.exp(1j * phi) * value(n, m - 1, theta, phi))
        return np.where(np.sin(theta) < 0, -ladder, ladder)

    value = _HolomorphicElementwise(
        lambda n, m, theta, phi: original(n, m, theta, phi), None, None, dtheta,
        lambda y, n, m, theta, phi: 1j * m * y, name="scipy.special.sph_harm_y")

    def stand_in(n, m, theta, phi, *, diff_n=0):
        if diff_n:
            raise UnsupportedOperationError(
                "scipy.special.sph_harm_y(..., diff_n=...) of differentiated angles: mutad "
                "differentiates Y itself, to any order; take the derivatives you need with "
                "mutad.jvp or mutad.jacobian of sph_harm_y(n, m, theta, phi).")
        if np.iscomplexobj(theta) or np.iscomplexobj(phi):
            raise UnsupportedOperationError(
                "scipy.special.sph_harm_y of complex angles has no rule in mutad: its angles "
                "are real (theta in [0, pi], phi in [0, 2 pi]).")
        return value(n, m, theta, phi)

    return StandIn(original, stand_in)


sph_harm_y = _harmonics(_special.sph_harm_y)
__all__ += ["sph_harm_y"]


# ----------------------------------------------------------------------------------------------
# comb and perm, SciPy's Python over binom and poch (it converts its arguments with np.asarray):
# with exact=False, SciPy's steps on the traced values, 0 (1 for comb(N, 0, repetition=True))
# where SciPy's condition says so; with exact=True, SciPy's integer, which has no derivative


def _exact(original, *values):
    """The plain ``values`` SciPy's exact integer of ``original`` is computed from (it has no
    derivative): a replay recording the call is refused, as its program would keep this
    call's integer."""
    settled(values, f"scipy.special.{original.__name__}(exact=True) of values the program "
            "computes")
    return [_plain(v, True) for v in values]


def _combinations(original):
    def stand_in(N, k, *, exact=False, repetition=False):
        if exact:
            return original(*_exact(original, N, k), exact=True, repetition=repetition)
        if repetition:
            return np.where((k == 0) & (N >= 0), 1.0, binom(N + k - 1, k))
        return np.where((k <= N) & (N >= 0) & (k >= 0), binom(N, k), 0.0)

    return StandIn(original, stand_in)


def _permutations(original):
    def stand_in(N, k, exact=False):
        if exact:
            return original(*_exact(original, N, k), exact=True)
        return np.where((k <= N) & (N >= 0) & (k >= 0), poch(N - k + 1, k), 0.0)

    return StandIn(original, stand_in)


comb = _combinations(_special.comb)
perm = _permutations(_special.perm)
__all__ += ["comb", "perm"]


# ----------------------------------------------------------------------------------------------
# factorial, factorial2 and factorialk, SciPy's Python (it converts its argument with
# np.asarray): with exact=False, SciPy's values, differentiated as Γ(n + 1) (factorial's, where
# n >= 0: 0 below, SciPy's extend="zero"); with exact=True, SciPy's integers, which have no
# derivative. factorial2 and factorialk of non-integers are SciPy's own continuations, which
# mutad does not differentiate.


def _factorials(original, multiple=False):
    def value(n, args, exact, extend):
        if exact:
            return original(*_exact(original, n, *args), exact=True, extend=extend)
        plain = _factorial_value(original, n, extend, *args)  # (a step: replays compute it)
        if original.__name__ != "factorial" or extend != "zero":
            raise UnsupportedOperationError(
                f"scipy.special.{original.__name__} of traced values, exact=False, "
                f"extend={extend!r}: mutad "
                "differentiates factorial(n, exact=False) with extend='zero' (Γ(n + 1)). Write "
                "it with scipy.special.gamma, or pass mutad.stop_gradient(n).")
        # (0 where SciPy's is 0 or its inf beyond 170: a constant, whose difference from
        # itself leaves SciPy's value as it is)
        finite = np.isfinite(plain) & (n >= 0)
        return scipys_value(plain, np.where(finite, gamma(np.where(finite, n, 0.0) + 1.0),
                                            0.0))

    def with_k(n, k, exact=False, extend="zero"):  # (factorialk's k, SciPy's keyword too)
        return value(n, (k,), exact, extend)

    def without_k(n, exact=False, extend="zero"):
        return value(n, (), exact, extend)

    return StandIn(original, with_k if multiple else without_k)


def _scipys_factorial(original, n, extend, *args):
    return original(n, *args, exact=False, extend=extend)


_factorial_value = Value(_scipys_factorial, "scipy.special's factorials")
factorial = _factorials(_special.factorial)
factorial2 = _factorials(_special.factorial2)
factorialk = _factorials(_special.factorialk, multiple=True)
__all__ += ["factorial", "factorial2", "factorialk"]
