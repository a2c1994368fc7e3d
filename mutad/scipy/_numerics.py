"""Accurate building blocks for the derivatives of SciPy's special functions and distributions.

SciPy computes many of its values with algorithms of their own where the textbook formula
loses them: asymptotic expansions for large arguments, log-space tails, reflection near poles.
A derivative written as the textbook formula loses its value at the same points (a difference
of two digammas of large, nearly equal arguments, ``exp`` of a difference of large logarithms).
The functions here compute such derivatives in forms accurate there, and are compositions of
calls that dispatch (ufunc rows, :class:`~mutad.scipy._adjoints.Elementwise` functions), so that
an enclosing differentiation differentiates them again and second derivatives keep the
accuracy of the first. Each is checked against mpmath at the edges in ``tests/test_scipy_edges.py``.

Branches: where a function switches between two forms (an asymptotic series above a threshold,
a direct formula below), both forms are the same function, accurate on their side; the branch
is chosen from the arguments' values and, if the arguments are restored within rounding, the
other side gives the same number within rounding.
"""

import decimal
import functools
import math

import numpy as np
import scipy.special as _special
from numpy.polynomial.legendre import leggauss
from scipy.special import (betaln, erfcx, gamma, gammaln, k0, k0e, k1, k1e, kve, poch, psi,
                           rgamma, xlog1py, xlogy)
from scipy.special._ufuncs import _zeta

from ..core.errors import UnsupportedOperationError
from ..core.registry import NoClosedForm
from ..core.views import memory
from ._adjoints import Elementwise

_SQRT_PI = math.sqrt(math.pi)
_LOG_PI = math.log(math.pi)
_LOG_2PI = math.log(2.0 * math.pi)

BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
"""The Bernoulli numbers B_2, B_4, ..., B_16 of the asymptotic series of ψ and log Γ."""

ASYMPTOTIC = 10.0
"""Above this argument the asymptotic series of ψ and log Γ, to B_16, are exact to rounding."""


def both(*conditions):
    """Their elementwise conjunction, by ``np.logical_and``: the conditions may be constants
    of a recording replay, which take ufuncs (not Python's ``&``)."""
    return functools.reduce(np.logical_and, conditions)


def _errstate():
    return np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore")


# ----------------------------------------------------------------------------------------------
# log(1 + w) - w


def _log1pmx_value(w):
    w = np.asarray(w, dtype=float)
    small = np.abs(w) < 0.1
    ws = np.where(small, w, 0.0)
    series = np.zeros_like(ws)
    for k in range(20, 1, -1):  # Σ_{k≥2} (-1)^(k+1) w^k / k, by Horner's scheme
        series = series * ws + (-1.0) ** (k + 1) / k
    with _errstate():
        direct = np.log1p(w) - w
    result = np.where(small, series * ws * ws, direct)
    return result[()] if result.ndim == 0 else result


log1pmx = Elementwise(_log1pmx_value, lambda y, w: -w / (1.0 + w), name="log1pmx")
"""``log(1 + w) - w``, accurate for small ``w`` (a series) where the difference cancels."""


# ----------------------------------------------------------------------------------------------
# The digamma function: near its negative poles, and differences of it at large arguments


def digamma(x):
    """ψ(x), by reflection for negative x: ψ(x) = ψ(1 - x) - π cot(π r), r = x - round(x),
    which keeps its accuracy next to the poles at x = -n (SciPy's psi loses it there, as
    tan(π x) does)."""
    negative = x < 0
    xn = np.where(negative, x, -0.5)
    r = xn - np.rint(xn)  # exact
    with _errstate():
        reflected = psi(1.0 - xn) - np.pi / np.tan(np.pi * r)
    return np.where(negative, reflected, psi(np.where(negative, 1.0, x)))


def psi_difference(x, h):
    """ψ(x + h) - ψ(x) without cancellation, for x > 0 and h ≥ 0 (elsewhere the difference).

    Below :data:`ASYMPTOTIC` the recurrence ψ(x) = ψ(x + 1) - 1/x shifts x up, each step adding
    h / ((x + j)(x + h + j)) > 0; above it, ψ's asymptotic series gives the difference as
    log1p(h/x) + h / (2x(x + h)) - Σ B_2k / (2k) x^-2k expm1(-2k log1p(h/x)), every term
    computed without subtracting nearly equal numbers."""
    good = both(x > 0, h >= 0, np.isfinite(x), np.isfinite(h))
    xs = np.where(good, x, 1.0)
    hs = np.where(good, h, 1.0)
    shift = np.where(good, np.maximum(np.ceil(ASYMPTOTIC - xs), 0.0), 0.0)
    total = 0.0
    for j in range(int(ASYMPTOTIC)):
        xj = xs + float(j)
        total = total + np.where(shift > j, hs / (xj * (xj + hs)), 0.0)
    z = xs + shift
    log_ratio = np.log1p(hs / z)
    series = log_ratio + hs / (2.0 * z * (z + hs))
    for k, b in enumerate(BERNOULLI, start=1):
        series = series - (b / (2 * k)) * z ** (-2.0 * k) * np.expm1(-2.0 * k * log_ratio)
    with _errstate():
        direct = psi(x + h) - psi(x)
    return np.where(good, series + total, direct)


def psi_gap(x, h):
    """ψ(x + h) - ψ(x) for h of either sign, without cancellation where x and x + h are
    positive (:func:`psi_difference` from the smaller of the two)."""
    up = h >= 0
    low = np.where(up, x, x + h)
    return np.where(up, 1.0, -1.0) * psi_difference(low, np.abs(h))


def reciprocal_pole(x):
    """Where x is a pole of Γ (0, -1, -2, ...), so that 1/Γ(x) is 0."""
    return both(x <= 0, np.rint(x) == x)


def binom_partials(y, n, k):
    """d/dn and d/dk of binom(n, k) = Γ(n + 1) A B, A = 1/Γ(k + 1), B = 1/Γ(n - k + 1):
    y (ψ(n + 1) - ψ(n - k + 1)) and y (ψ(n - k + 1) - ψ(k + 1)), the differences without
    cancellation (at n = 1e30 they were 0). Where A or B is at a pole of Γ, y is 0 and those
    forms 0 · inf: there the product rule, with the derivatives of A and B
    (:func:`rgamma_derivative`, (-1)^j j! at -j), every term kept so that it holds to second
    order."""
    top = n - k + 1.0
    poles = np.logical_or(reciprocal_pole(top), reciprocal_pole(k + 1.0))
    with _errstate():
        dn = y * psi_gap(top, k)
        dk = y * psi_gap(k + 1.0, n - 2.0 * k)
        g = gamma(n + 1.0)
        a, b = rgamma(k + 1.0), rgamma(top)
        da, db = rgamma_derivative(a, k + 1.0), rgamma_derivative(b, top)
        dn_poles = g * (psi(n + 1.0) * a * b + a * db)
        dk_poles = g * (da * b - a * db)
    return np.where(poles, dn_poles, dn), np.where(poles, dk_poles, dk)


def poch_dz(y, z, m):
    """d/dz poch(z, m) = d/dz Γ(z + m) / Γ(z): y (ψ(z + m) - ψ(z)), the difference without
    cancellation (at z = 1e30 it was 0). Where z is a pole of Γ, y is 0 and that form 0 · inf:
    there the product rule, Γ(z + m) (ψ(z + m) / Γ(z) + (1/Γ)'(z)), every term kept so that it
    holds to second order. Where z + m is a pole too, y is the ratio of the two poles' residues
    (poch(-2, 1) = -2), and both forms are NaN: ψ(z + m) - ψ(z) is there the limit of the
    difference of its regular parts, ψ(1 - z - m) - ψ(1 - z) (by reflection; its derivative
    that of ψ's difference too)."""
    pole = reciprocal_pole(z)
    double = both(pole, reciprocal_pole(z + m))
    with _errstate():
        regular = y * psi_gap(z, m)
        r = rgamma(z)
        at_pole = gamma(z + m) * (psi(z + m) * r + rgamma_derivative(r, z))
        at_double_pole = y * psi_gap(np.where(double, 1.0 - z, 1.0), -m)
    return np.where(double, at_double_pole, np.where(pole, at_pole, regular))


def poch_dm(y, z, m):
    """d/dm poch(z, m) = y ψ(z + m); NaN where z and z + m are poles of Γ: poch(z, ·) is 0 on
    either side of such an m (poch(-2, 1 ± h) = 0, poch(-2, 1) = -2), where it has no
    derivative (ψ(0) alone is -inf, of ψ's limit from the right)."""
    with _errstate():
        return np.where(both(reciprocal_pole(z), reciprocal_pole(z + m)), np.nan, y * psi(z + m))


def stirling(a):
    """log Γ(a) - ((a - 1/2) log a - a + log(2π)/2), for a ≥ :data:`ASYMPTOTIC` (the series)."""
    result = 0.0
    for k, b in enumerate(BERNOULLI, start=1):
        result = result + (b / (2 * k * (2 * k - 1))) * a ** (1.0 - 2 * k)
    return result


# ----------------------------------------------------------------------------------------------
# The reciprocal gamma function


def rgamma_derivative(y, x):
    """d/dx 1/Γ(x). Below 1/2 by reflection, 1/Γ(x) = Γ(1 - x) sin(π x) / π, whose derivative
    Γ(1 - x) (cos(π x) - ψ(1 - x) sin(π x) / π) is regular at the poles of Γ, so it holds at
    them (where it is (-1)^n n!) and its own derivative too; above, -ψ(x) / Γ(x)."""
    reflect = x < 0.5
    xr = np.where(reflect, x, 0.0)
    n = np.rint(xr)
    r = xr - n  # exact; sin(π x) = (-1)^n sin(π r), cos(π x) = (-1)^n cos(π r)
    sign = np.where(n % 2 == 0, 1.0, -1.0)
    reflected = sign * gamma(1.0 - xr) * (np.cos(np.pi * r)
                                          - psi(1.0 - xr) * np.sin(np.pi * r) / np.pi)
    regular = -y * psi(np.where(reflect, 1.0, x))
    return np.where(reflect, reflected, regular)


# ----------------------------------------------------------------------------------------------
# Densities: the derivatives of the incomplete gamma and beta functions in x


def gamma_log_density(x, a):
    """log(x^(a-1) e^-x / Γ(a)). For a ≥ :data:`ASYMPTOTIC` in Temme's form,
    a (log r - (r - 1)) - log r - log(2π a)/2 - stirling(a) with r = x/a, whose terms are small
    where the textbook form's (a log x, log Γ(a)) are large and nearly cancel."""
    temme = both(a >= ASYMPTOTIC, x > 0, np.isfinite(a), np.isfinite(x))
    at = np.where(temme, a, ASYMPTOTIC)
    r = np.where(temme, x, ASYMPTOTIC) / at
    near = np.abs(r - 1.0) < 0.5
    log_r = np.log(r)
    deviation = np.where(near, log1pmx(np.where(near, r - 1.0, 0.0)), log_r - (r - 1.0))
    stable = at * deviation - log_r - 0.5 * np.log(2.0 * np.pi * at) - stirling(at)
    with _errstate():
        direct = xlogy(a - 1.0, x) - x - gammaln(a)
    return np.where(temme, stable, direct)


def incomplete_gamma_density(y, a, x):
    """d/dx P(a, x) = x^(a-1) e^-x / Γ(a)."""
    return np.exp(gamma_log_density(x, a))


def _beta_density_value(a, b, x):
    boost = getattr(_special._ufuncs, "_beta_pdf", None)  # SciPy's beta.pdf: Boost's
    with _errstate():
        if boost is not None:
            return boost(x, a, b)
        return np.exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b))


def _beta_density_da(y, a, b, x):
    """y (log x + ψ(a + b) - ψ(a))."""
    inside = both(x > 0, y != 0)
    return np.where(inside, y * (np.log(np.where(inside, x, 1.0)) + psi_difference(a, b)), 0.0)


def _beta_density_db(y, a, b, x):
    """y (log(1 - x) + ψ(a + b) - ψ(b))."""
    inside = both(x < 1, y != 0)
    return np.where(inside, y * (np.log1p(-np.where(inside, x, 0.0)) + psi_difference(b, a)),
                    0.0)


def _beta_density_dx(y, a, b, x):
    inside = both(x > 0, x < 1)
    xs = np.where(inside, x, 0.5)
    return np.where(inside, y * ((a - 1.0) / xs - (b - 1.0) / (1.0 - xs)), 0.0)


beta_density = Elementwise(_beta_density_value, _beta_density_da, _beta_density_db,
                           _beta_density_dx, name="beta_density")
"""d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b), SciPy's own value (``beta.pdf``)."""


# ----------------------------------------------------------------------------------------------
# The scaled complementary error function, and the normal distribution's log-tail


def _double_factorial_series(q, sign):
    """Σ_k sign^k (2k+1)!! q^k, k < 40, by Horner's rule: the asymptotic series of erfcx'
    and dawsn' in q = 1/(2u²), exact to rounding from |u| = 6.4 on (the smallest term is at
    k ≈ u²)."""
    coefficient = 1.0  # sign^k (2k+1)!!, built up
    terms = []
    for k in range(40):
        coefficient = coefficient * (2 * k + 1) * (sign if k else 1)
        terms.append(coefficient)
    total = 0.0
    for c in reversed(terms):
        total = total * q + c
    return total


_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 into two halves of 26 bits


def exp_of_square(x, scale):
    """exp(scale x²) for scale -1, -1/2 or 1 (erf's, Φ's and erfi's derivatives), the rounding
    of x² carried: the exponential of the rounded square is off by |scale| x² ε relative (224
    ulps at x = 26). Here exp(scale hi) (1 + scale lo), hi + lo = x² exactly (Dekker's
    product), lo from x's plain values: a constant to an enclosing differentiation, for which
    the square moves as hi does. Other dtypes than float64 take exp(scale x²)."""
    square = x * x
    plain = memory(x)
    if getattr(plain, "dtype", None) != np.float64:
        return np.exp(scale * square)
    with np.errstate(over="ignore", invalid="ignore"):  # |x| > 1e299: lo is not needed
        c = _SPLIT * plain
        high = c - (c - plain)
        low = plain - high
        lo = ((high * high - memory(square)) + 2.0 * high * low) + low * low
    lo = np.where(np.isfinite(lo), lo, 0.0)
    return np.exp(scale * square) * (1.0 + scale * lo)


_PI_DIGITS = "3.141592653589793238462643383279502884197169399375105820974944592"

_TAYLOR_TERMS = 18
"""Terms of the Taylor series of erfcx' and dawsn' about the nodes 1/2 + (j + 1/2)/4: their
last, for |t| ≤ 1/8, is below 1e-18 of the first."""

# erfcx(a) and D(a) (Dawson's integral) at the nodes a = 1/2 + (j + 1/2)/4, j = 0, ..., 29, to
# 40 digits (by mpmath at 60 digits: exp(a²) erfc(a), and √π/2 exp(-a²) erfi(a)).
_ERFCX_AT_NODES = (
    "0.556813880873362504935662046320616156502", "0.4643115832026690018785527364749163204273",
    "0.3956980795529959014044473809177806757356", "0.3432958898621253798874683250621344607623",
    "0.3022612093634859174056627734063464140348", "0.2694299851646704517460504372285952672543",
    "0.2426703646126545465876558043367091426293", "0.2205056922049066646387441603234577446564",
    "0.2018875545460170095198750062170101411134", "0.1860549346844711038291307870514318922078",
    "0.1724443521021736078607390211832440071379", "0.1606310681265444042165054303841877600656",
    "0.1502897224742693603488198078545592398714", "0.1411674197630517920811777840161514224886",
    "0.1330649712412082561132981168969197891424", "0.125823588194988069187996861179162836554",
    "0.1193152886271333278601411664791958046352", "0.1134358772147404908392434066042043590628",
    "0.1080997372465474664702412277443700803039", "0.1032359174781569275937449225431115835535",
    "0.09878515717340754008093498323887323829857", "0.09469759959536302459820342521089399939211",
    "0.09093101671883685175724649577831904439291", "0.08744941778462249680297119260224873353352",
    "0.08422194904914017811303325041684174351159", "0.08122201659188800436512274559980561311802",
    "0.07842658154261601448794647202420831744124", "0.07581558972469767677657784979320584096135",
    "0.07337150692917299834798414209441168202438", "0.07107893782589437885809158875314129147833")
_DAWSN_AT_NODES = (
    "0.4850624642080813978383048154011944653373", "0.5396989828965289080131434546334200571308",
    "0.5220504950180077130499359098685507412152", "0.4634169401539564156975299224492729745848",
    "0.3929766153972906516503245570218368616968", "0.3287247031462869636921177501684790747777",
    "0.2773518558940046797364455024861410205697", "0.2385983453344650041699287347171296111014",
    "0.2096184044329277918326198808004674772364", "0.1874832020359482915442473486118359725321",
    "0.1700187100915766753560416686549074268358", "0.1558045551308537852741017090461253497987",
    "0.1439432002236586544341772301344805525468", "0.1338548657059378644515457313033326585537",
    "0.1251474680755086699788285806807532113867", "0.1175431634373978411593063064635874857083",
    "0.1108373952067854342940928126936227438858", "0.1048750883222575523356639441162157473359",
    "0.09953597324946795241559529343240254288533", "0.09472504382758852273238604135655567826521",
    "0.09036608895026993045953833483423111700251", "0.08639716487021182404885520263650018727199",
    "0.08276734381929029930479573610537449606409", "0.07943432919452531668330693374794418728671",
    "0.07636267448842898075217470844870882069489", "0.07352243207385584014735203706930370581716",
    "0.07088811380761200370878346454068654417986", "0.06843788156270939177197803431305688295376",
    "0.06615290978683171033385786963719354899646", "0.06401687845328806184522180250243055927428")


def _taylor_table(values, sign):
    """The Taylor coefficients of y' about each node a, for y' = c + 2 sign x y (erfcx: sign 1,
    c = -2/√π; Dawson's integral: sign -1, c = 1), row j for the node of ``values[j]`` = y(a):
    with y's coefficients c_n, (n + 1) c_(n+1) = 2 sign (a c_n + c_(n-1)). The recurrence
    multiplies the error of y(a) by about (2a)^n / n!, and its terms cancel (by 2a² each
    step), so it runs in 80-digit decimals; the coefficients are those of the exact y'."""
    rows = []
    with decimal.localcontext() as context:
        context.prec = 80
        pi = decimal.Decimal(_PI_DIGITS)
        constant = -2 / pi.sqrt() if sign > 0 else decimal.Decimal(1)
        for j, value in enumerate(values):
            a = (1 + (decimal.Decimal(j) + decimal.Decimal("0.5")) / 2) / 2
            c = [decimal.Decimal(value)]
            c.append(constant + 2 * sign * a * c[0])
            for n in range(1, _TAYLOR_TERMS):
                c.append(2 * sign * (a * c[n] + c[n - 1]) / (n + 1))
            rows.append([float((n + 1) * c[n + 1]) for n in range(_TAYLOR_TERMS)])
    return np.array(rows)


_ERFCX_TAYLOR = _taylor_table(_ERFCX_AT_NODES, 1)
_DAWSN_TAYLOR = _taylor_table(_DAWSN_AT_NODES, -1)

_TAYLOR_RANGE = (0.5, 8.0)
"""Where 2x erfcx(x) - 2/√π and 1 - 2x D(x) cancel (by 2x² for large x; D' is 0 at 0.92)
and their Taylor series about the nodes take over: up to where the asymptotic series do."""


def _taylor_derivative(table, x):
    """y'(x) for 1/2 ≤ x < 8, the Taylor series of ``table`` about the node next to x, in
    t = x - a. The node is chosen from x's plain values, a constant to an enclosing
    differentiation, which differentiates the series in t."""
    plain = np.asarray(memory(x), dtype=float)
    node = np.clip(np.nan_to_num(np.floor((plain - 0.5) * 4.0)), 0, len(table) - 1)
    node = node.astype(np.intp)
    t = x - (0.5 + (node + 0.5) / 4.0)
    coefficients = table[node]
    total = 0.0
    for n in range(_TAYLOR_TERMS - 1, -1, -1):  # by Horner's scheme
        total = total * t + coefficients[..., n]
    return total


def erfcx_derivative(y, u):
    """d/du erfcx(u) = 2u erfcx(u) - 2/√π, which cancels for large u (erfcx(u) ≈ 1/(u√π)):
    by 2u², 198 ulps at 6.2 from SciPy's erfcx rounded. From 1/2 to 8 its Taylor series
    about nodes 1/4 apart (``_taylor_derivative``), from 8 on its asymptotic series
    -(1/√π) Σ_k (-1)^k (2k+1)!! / (2^k u^(2k+2)), below 1/2 the closed form."""
    low, high = _TAYLOR_RANGE
    large = u >= high
    middle = both(u >= low, u < high)
    far = np.where(large, u, np.float64(high))  # in doubles: the series overflows float32
    q = 1.0 / (2.0 * far * far)
    series = -_double_factorial_series(q, -1) * (2.0 * q) / _SQRT_PI
    taylor = _taylor_derivative(_ERFCX_TAYLOR, np.where(middle, u, low))
    return np.where(large, series, np.where(middle, taylor, 2.0 * u * y - 2.0 / _SQRT_PI))


def dawsn_derivative(y, x):
    """d/dx D(x) = 1 - 2x D(x), which cancels for large |x| (D(x) ≈ 1/(2x)): by 2x², 220 ulps
    at 6.3 from SciPy's D rounded. From |x| = 1/2 to 8 its Taylor series about nodes
    1/4 apart (``_taylor_derivative``; D' is even), from 8 on its asymptotic series
    -Σ_k (2k+1)!! / (2x²)^(k+1), below 1/2 the closed form; for complex x (holomorphic) the
    closed form."""
    if np.iscomplexobj(x) or np.iscomplexobj(y):
        return 1.0 - 2.0 * x * y
    low, high = _TAYLOR_RANGE
    size = np.abs(x)
    large = size >= high
    middle = both(size >= low, size < high)
    far = np.where(large, x, np.float64(high))  # in doubles: the series overflows float32
    with np.errstate(over="ignore"):  # x² beyond the floats: the series is -0 there
        q = 1.0 / (2.0 * far * far)
    taylor = _taylor_derivative(_DAWSN_TAYLOR, np.where(middle, size, low))
    return np.where(large, -q * _double_factorial_series(q, 1),
                    np.where(middle, taylor, 1.0 - 2.0 * x * y))


def inverse_slope(y, tail, scale):
    """``scale / density`` of an inverse of erfc at its output ``y`` (or of ndtr, at y / √2),
    where ``tail``, an exact input, is the probability beyond y (of the same sign's tail):
    e^(y²) = erfcx(|y|) / tail, whose relative error is that of y over |y|, not y² times it,
    as exp(y * y) of the rounded y (49 ulps for erfinv at 1 - 1e-15; 126 for ndtri_exp at
    -100, of exp(x + y²/2), which cancels). Infinite where the tail is 0 (at ±1 of erfinv)."""
    with _errstate():
        slope = scale * erfcx(np.where(y < 0, -y, y)) / np.where(tail == 0, 1.0, tail)
    return np.where(tail == 0, np.inf * scale, slope)


def log_ndtr_derivative(y, x):
    """d/dx log Φ(x) = φ(x)/Φ(x) = √(2/π) / erfcx(-x/√2): exact in the left tail, where
    exp(-x²/2 - log Φ(x)) subtracts two large numbers. In the right tail erfcx(-x/√2) ≈
    2 exp(x²/2) takes the rounding of x/√2 x² times over (415 ulps at x = 26.1; infinite
    from 37.7 on, where φ is still a float): there φ(x) / e^(log Φ(x)), φ with its square's
    rounding carried (``exp_of_square``) and Φ(x) ≥ 1/2 exact to its ulps."""
    if np.iscomplexobj(x) or np.iscomplexobj(y):  # erfcx has no complex rule
        return np.exp(-0.5 * x * x - y) / math.sqrt(2.0 * math.pi)
    right = x > 1.0
    left = np.where(right, 0.0, x)
    far, log_cdf = np.where(right, x, 1.0), np.where(right, y, 0.0)
    return np.where(right, exp_of_square(far, -0.5) / math.sqrt(2.0 * math.pi) / np.exp(log_cdf),
                    math.sqrt(2.0 / math.pi) / erfcx(-left / math.sqrt(2.0)))


# ----------------------------------------------------------------------------------------------
# Bessel functions of large argument, exponentially scaled


BESSEL_TERMS = 30


def _bessel_coefficients(v):
    """a_k(v) = Π_{j≤k} (4v² - (2j-1)²) / (k! 8^k), k < BESSEL_TERMS, of the expansions
    I_v(x) e^-x ~ Σ (-1)^k a_k / x^k / √(2πx) and K_v(x) e^x ~ Σ a_k / x^k √(π/(2x))."""
    mu = 4.0 * v * v
    coefficients = [1.0]
    for k in range(1, BESSEL_TERMS):
        coefficients.append(coefficients[-1] * (mu - (2 * k - 1) ** 2) / (8.0 * k))
    return coefficients


def bessel_large(v):
    """Where the expansions serve: x ≥ max(50, 4v²)."""
    return np.maximum(50.0, 4.0 * v * v)


def ive_derivative_large(v, x):
    """d/dx (I_v(x) e^-x) for x ≥ bessel_large(v), from its expansion (the difference
    (I_{v-1} + I_{v+1})/2 - I_v of the recurrence loses its digits to cancellation there)."""
    total = 0.0
    for k, a in enumerate(_bessel_coefficients(v)):
        total = total + (-1.0) ** k * a * (k + 0.5) * x ** (-k - 1.0)
    return -total / np.sqrt(2.0 * np.pi * x)


_CIRCLE = 128
"""Points of the trapezoidal rule over the circle in ``ive_derivative_integral``: it is exact
for the Fourier modes of e^(x cos θ) below 128, and those beyond are below 1e-30 of the first
for x ≤ 50 (I_k(x) / I_0(x) ≈ e^(-k²/2x))."""


def ive_derivative_integral(n, x):
    """d/dx (I_n(x) e^-x) for n = 0 or 1 and 0 ≤ x ≤ 50, by the trapezoidal rule over the
    circle (exact to rounding: the integrand is periodic and entire) of
    -(1/π) ∫_0^π e^(-x s) s cos(nθ) dθ, s = 1 - cos θ = 2 sin²(θ/2): for n = 0 its terms have
    one sign, for n = 1 those of θ > π/2 are below e^-x of the others. The recurrence's
    (I_(n-1) + I_(n+1))/2 - I_n cancels instead, by about 2x (257 ulps for i1e at 35)."""
    total = 0.0
    for k in range(_CIRCLE // 2, -1, -1):  # the smallest terms first
        theta = 2.0 * math.pi * k / _CIRCLE
        s = 2.0 * math.sin(0.5 * theta) ** 2
        weight = (1.0 if k in (0, _CIRCLE // 2) else 2.0) / _CIRCLE
        total = total + (-weight * s * math.cos(n * theta)) * np.exp(-s * x)
    return total


def kve_derivative_large(v, x):
    """d/dx (K_v(x) e^x) for x ≥ bessel_large(v), from its expansion."""
    total = 0.0
    for k, a in enumerate(_bessel_coefficients(v)):
        total = total + a * (k + 0.5) * x ** (-k - 1.0)
    return -total * np.sqrt(np.pi / (2.0 * x))


_LINE_STEP, _LINE_END = 1.0 / 16.0, 6.0
"""The step and the end of the trapezoidal rule in ``kve_derivative_integral``: for
1/2 ≤ x ≤ 50 and |v| ≤ 8 the terms beyond 6 are below 1e-22 of the integral, and the
rule's error (of an integrand analytic in a strip) below 1e-19."""

QUADRATURE_ORDERS = 8.0
"""The largest |v| for which ``kve_derivative_integral`` serves."""


def kve_derivative_integral(v, x):
    """d/dx (K_v(x) e^x) = -∫_0^∞ e^(-x s) s cosh(vt) dt, s = cosh t - 1 = 2 sinh²(t/2), for
    1/2 ≤ x ≤ 50 and |v| ≤ ``QUADRATURE_ORDERS``, by the trapezoidal rule (exact to rounding:
    the integrand is even and falls double exponentially). Its terms have one sign, where
    the recurrence's K_v - (K_(v-1) + K_(v+1))/2, scaled, cancels by about 2x (127 ulps for
    k1e at 35)."""
    total = 0.0
    steps = int(_LINE_END / _LINE_STEP)
    for k in range(steps, -1, -1):  # the smallest terms first
        t = k * _LINE_STEP
        s = 2.0 * math.sinh(0.5 * t) ** 2
        weight = _LINE_STEP if k else 0.5 * _LINE_STEP
        total = total + (-weight * s) * np.cosh(v * t) * np.exp(-s * x)
    return total


def quadrature_k(v, x):
    """Where ``kve_derivative_integral`` serves: real x (complex x keeps the recurrence)."""
    if np.iscomplexobj(x):
        return False
    return both(x >= 0.5, x < 50.0, np.abs(v) <= QUADRATURE_ORDERS)


def kv_derivative(y, v, x):
    """K_v' = -(K_{v-1} + K_{v+1})/2, from the scaled functions: SciPy's kv is 0 beyond
    x ≈ 700 where K_v(x) still has a value."""
    with _errstate():
        return -0.5 * (kve(v - 1.0, x) + kve(v + 1.0, x)) * np.exp(-x)


def k1_derivative(y, x):
    """K_1' = -K_0 - K_1/x (no cancellation: both terms have one sign)."""
    return -k0(x) - k1(x) / x


def scaled_k_derivative(order):
    """The partial of k0e (order 0) or k1e (order 1): y - (K_(v-1) + K_(v+1))/2 scaled below
    1/2, the trapezoidal rule of ``kve_derivative_integral`` to 50 and the expansion beyond,
    where that difference cancels."""
    def partial(y, x):
        large = x >= 50.0
        middle = quadrature_k(order, x)
        xs = np.where(large, x, 50.0)
        if order == 0:
            direct = y - k1e(x)
        else:
            direct = y - 0.5 * (k0e(x) + kve(2.0, x))
        integral = kve_derivative_integral(float(order), np.where(middle, x, np.float64(1.0)))
        return np.where(large, kve_derivative_large(float(order), xs),
                        np.where(middle, integral, direct))
    return partial


# ----------------------------------------------------------------------------------------------
# Student's t distribution: its log-density, and its distribution function's derivative in df


def _t_norming_derivative(nu):
    """c'(ν) for c(ν) = log Γ(a + 1/2) - log Γ(a) - log(a)/2, a = ν/2: its derivative in ν,
    (ψ(a + 1/2) - ψ(a) - 1/(2a)) / 2, which is O(1/ν²) while its terms are O(1/ν). For
    a ≥ :data:`ASYMPTOTIC` from the series of ψ: with e = 1/(2a),
    (log1pmx(e) + e²/(1+e) - Σ B_2k/(2k) a^-2k expm1(-2k log1p(e))) / 2."""
    a = 0.5 * nu
    large = a >= ASYMPTOTIC
    al = np.where(large, a, ASYMPTOTIC)
    e = 0.5 / al
    log_ratio = np.log1p(e)
    series = log1pmx(e) + e * e / (1.0 + e)
    for k, b in enumerate(BERNOULLI, start=1):
        series = series - (b / (2 * k)) * al ** (-2.0 * k) * np.expm1(-2.0 * k * log_ratio)
    small = np.where(large, 1.0, a)
    direct = psi(small + 0.5) - psi(small) - 0.5 / small
    return 0.5 * np.where(large, series, direct)


def _t_norming_second_derivative(nu):
    """c''(ν) = (ψ'(a + 1/2) - ψ'(a) + 1/(2a²)) / 4, O(1/ν³), by the series for large a:
    (-e/(2a²(1+e)²) + Σ B_2k a^-(2k+1) expm1(-(2k+1) log1p(e))) / 4."""
    a = 0.5 * nu
    large = a >= ASYMPTOTIC
    al = np.where(large, a, ASYMPTOTIC)
    e = 0.5 / al
    log_ratio = np.log1p(e)
    series = -e / (2.0 * al * al * (1.0 + e) ** 2)
    for k, b in enumerate(BERNOULLI, start=1):
        series = series + b * al ** (-2.0 * k - 1.0) * np.expm1(-(2.0 * k + 1.0) * log_ratio)
    small = np.where(large, 1.0, a)
    direct = (_special.polygamma(1, small + 0.5) - _special.polygamma(1, small)
              + 0.5 / (small * small))
    return 0.25 * np.where(large, series, direct)


def _t_shape(z, nu):
    """w = z²/ν and its reciprocal, each where it is at most 1 (1 elsewhere), without
    overflow, with which of the two it is."""
    near = z * z <= nu  # w ≤ 1
    w = np.where(near, (z / np.sqrt(nu)) ** 2, 1.0)
    zf = np.where(near, 1.0, z)
    reciprocal = np.where(near, 1.0, (np.sqrt(nu) / zf) ** 2)
    return near, w, reciprocal


def _t_log_density_value(z, nu):
    with _errstate():
        finite = np.isfinite(nu)
        nf = np.where(finite, nu, 1.0)
        t = (np.log(poch(0.5 * nf, 0.5)) - 0.5 * (np.log(nf) + _LOG_PI)
             - 0.5 * (nf + 1.0) * np.log1p(z * z / nf))  # SciPy's t.logpdf
        result = np.where(finite, t, -0.5 * z * z - 0.5 * _LOG_2PI)
    return result[()] if np.ndim(result) == 0 else result


def _finite_df(nu):
    finite = both(np.isfinite(nu), nu > 0)
    return finite, np.where(finite, nu, 1.0)


def _t_log_density_dz(y, z, nu):
    """-z (ν + 1) / (ν + z²), written without overflow for large |z|."""
    finite, nf = _finite_df(nu)
    near, w, reciprocal = _t_shape(z, nf)
    zf = np.where(near, 1.0, z)
    inner = -z * (1.0 + 1.0 / nf) / (1.0 + w)
    outer = -(nf + 1.0) / (zf * (1.0 + reciprocal))
    return np.where(finite, np.where(near, inner, outer), -z)


def t_log_density_dnu(y, z, nu):
    """g = d/dν of the log-density: c'(ν) + d/dν of -(ν+1)/2 log1p(w), w = z²/ν, which is
    -log1pmx(w)/2 - wρ/2 + ρ/(2ν) with ρ = w/(1+w) (for w ≤ 1: each term O(1/ν²) where the
    plain form's are O(1/ν)), and -log1p(w)/2 + (ν+1)ρ/(2ν) beyond. 0 for infinite ν."""
    finite, nf = _finite_df(nu)
    near, w, reciprocal = _t_shape(z, nf)
    rho_near = w / (1.0 + w)
    inner = -0.5 * log1pmx(w) - 0.5 * w * rho_near + rho_near / (2.0 * nf)
    zf = np.where(near, 1.0, np.abs(z))
    log1p_w = 2.0 * np.log(zf) - np.log(nf) + np.log1p(reciprocal)
    outer = -0.5 * log1p_w + (nf + 1.0) / (2.0 * nf * (1.0 + reciprocal))
    g = _t_norming_derivative(nf) + np.where(near, inner, outer)
    return np.where(finite, g, 0.0)


t_log_density = Elementwise(_t_log_density_value, _t_log_density_dz, t_log_density_dnu,
                            name="t_log_density")
"""log of Student's t density at z with ν degrees of freedom (the normal's for ν = ∞): SciPy's
value, its derivatives in forms accurate for large ν and large |z|."""


def _t_log_density_dnu2(rho, nu):
    """d²/dν² of -(ν+1)/2 log1p(w) in terms of ρ = w/(1+w): ρ (ρ(ν-1) - 2(1-ρ)) / (2ν²)."""
    return rho * (rho * (nu - 1.0) - 2.0 * (1.0 - rho)) / (2.0 * nu * nu)


# Gauss-Legendre on [-1, 1] (the body) and tanh-sinh nodes on (0, 1) (the tail), in log v.
_LEGENDRE_X, _LEGENDRE_W = leggauss(48)
_STEP = 1.0 / 12.0
_TAU = np.arange(-3.4, 3.4 + _STEP / 2, _STEP)
_S = 0.5 * np.pi * np.sinh(_TAU)
_TAIL_LOG_V = -np.log1p(np.exp(-2.0 * _S))
_TAIL_W = _STEP * 0.5 * np.pi * np.cosh(_TAU) / (2.0 * np.cosh(_S) ** 2)


def _t_integrand(order, w, log1p_w, rho, nu):
    """g (order 1) or g² + dg/dν (order 2), in terms of w, log1p(w) and ρ = w/(1+w)."""
    near = w <= 1.0
    ws = np.where(near, w, 0.0)
    inner = -0.5 * _log1pmx_value(ws) - 0.5 * ws * rho + rho / (2.0 * nu)
    outer = -0.5 * log1p_w + (nu + 1.0) * rho / (2.0 * nu)
    g = _t_norming_derivative(nu) + np.where(near, inner, outer)
    if order == 1:
        return g
    return g * g + _t_norming_second_derivative(nu) + _t_log_density_dnu2(rho, nu)


def _stdtr_dnu_value(order, nu, t):
    """∂^order/∂ν^order of stdtr(ν, t), by quadrature.

    With f the density and g = ∂ log f/∂ν, ∂F/∂ν (t) = ∫_{-∞}^t f g du (and ∂²F/∂ν² the same
    with g² + ∂g/∂ν), odd in t, 0 at t = 0 (F(0) = 1/2 for every ν). For T = -|t|:

    * |T| ≤ 1: -∫_T^0 f g du, with u = √ν sinh ξ (in ξ the integrand is analytic within π/2 of
      the real axis for every ν), by 48-point Gauss-Legendre;
    * |T| > 1: the tail itself, in the beta variable x = ν/(ν+u²) ∈ (0, x_T], x = x_T v^(1/a),
      a = ν/2, which takes out the density's x^(a-1): x_T^a / (2aB(a, 1/2)) times
      ∫_0^1 (1-x)^(-1/2) g dv, by tanh-sinh quadrature (83 points) in log v.

    Against mpmath, on ν from 0.05 to 1e12 and |t| to 1e6, the relative error is below 1e-11
    for either order."""
    nu, t = np.broadcast_arrays(np.asarray(nu, dtype=float), np.asarray(t, dtype=float))
    valid = both(nu > 0, np.isfinite(nu), np.isfinite(t), t != 0)
    nv = np.where(valid, nu, 1.0)[..., None]
    tv = np.where(valid, t, 1.0)[..., None]
    big = np.abs(tv) > 1.0
    with _errstate():
        # the body, |T| ≤ 1
        tb = np.where(big, -1.0, -np.abs(tv))
        end = np.arcsinh(tb / np.sqrt(nv))
        xi = 0.5 * end * (_LEGENDRE_X + 1.0)
        sh = np.sinh(xi)
        w = sh * sh
        log1p_w = 2.0 * np.log(np.cosh(xi))
        density = np.exp(_t_log_density_value(np.sqrt(nv) * sh, nv)) * np.sqrt(nv) * np.cosh(xi)
        body = 0.5 * end[..., 0] * np.sum(_LEGENDRE_W * density
                                  * _t_integrand(order, w, log1p_w, w / (1.0 + w), nv),
                                  axis=-1)
        # the tail, |T| > 1
        a = 0.5 * nv
        w_end = np.where(big, tv * tv / nv, 1.0)
        q = _TAIL_LOG_V / a
        log1p_w = np.log1p(w_end) - q
        rho = -np.expm1(q - np.log1p(w_end))
        w = np.where(rho <= 0.5, rho / (1.0 - np.minimum(rho, 0.5)), 2.0)
        integral = np.sum(_TAIL_W * rho ** -0.5 * _t_integrand(order, w, log1p_w, rho, nv),
                          axis=-1)
        log_scale = -a * np.log1p(w_end) - np.log(2.0 * a) - betaln(a, 0.5)
        tail = np.exp(log_scale[..., 0]) * integral
    derivative = np.where(big[..., 0], tail, body) * np.where(t > 0, -1.0, 1.0)
    result = np.where(valid, derivative, np.where(np.isnan(nu) | np.isnan(t) | (nu <= 0),
                                                  np.nan, 0.0))
    return result[()] if result.ndim == 0 else result


def _t_density(z, nu):
    return np.exp(t_log_density(z, nu))


def _stdtr_dnu_dt(y, nu, t):
    """∂²F/∂ν∂t = f(t) g(t)."""
    finite = np.isfinite(t)
    ts = np.where(finite, t, 0.0)
    return np.where(finite, _t_density(ts, nu) * t_log_density_dnu(None, ts, nu), 0.0)


def _stdtr_dnu2_dt(y, nu, t):
    """∂³F/∂ν²∂t = f(t) (g² + ∂g/∂ν)(t)."""
    finite = both(np.isfinite(t), np.isfinite(nu), nu > 0)
    ts = np.where(finite, t, 0.0)
    ns = np.where(finite, nu, 1.0)
    near, w, reciprocal = _t_shape(ts, ns)
    rho = np.where(near, w / (1.0 + w), 1.0 / (1.0 + reciprocal))
    g = t_log_density_dnu(None, ts, ns)
    second = g * g + _t_norming_second_derivative(ns) + _t_log_density_dnu2(rho, ns)
    return np.where(finite, _t_density(ts, ns) * second, 0.0)


stdtr_dnu2 = Elementwise(lambda nu, t: _stdtr_dnu_value(2, nu, t),
                         NoClosedForm("the degrees of freedom df (a third derivative in df)"),
                         _stdtr_dnu2_dt, name="stdtr_ddf2")
"""∂²/∂ν² of Student's t distribution function, by quadrature."""

stdtr_dnu = Elementwise(lambda nu, t: _stdtr_dnu_value(1, nu, t),
                        lambda y, nu, t: stdtr_dnu2(nu, t), _stdtr_dnu_dt, name="stdtr_ddf")
"""∂/∂ν of Student's t distribution function ``stdtr(ν, t)``, by quadrature."""


def student_t_density(y, nu, t):
    """d/dt stdtr(ν, t): the density."""
    finite = np.isfinite(t)
    return np.where(finite, _t_density(np.where(finite, t, 0.0), nu), 0.0)


# ----------------------------------------------------------------------------------------------
# The incomplete gamma and beta functions' derivatives in their parameters: the series and
# continued fractions SciPy evaluates them with (Cephes'), differentiated term by term alongside
# their values, as forward mode would (the way Eigen and TensorFlow differentiate igamma).

_EPSILON = 2.0 * np.finfo(float).eps
"""Where a term changes a sum or convergent by less, it has converged. A derivative's by less
relative to the derivative and the value together: where the derivative vanishes (I_x(a, 1) = x^a
has a fraction constant in a) its terms are rounding errors of the value's size."""
_MOST_TERMS = 1_000_000


def _iterate(step, converged, *state):
    """Applies ``step`` to the state (1-d float arrays; the first ones constants ``step``
    returns unchanged) of each element until ``converged(old, new)`` holds for it: each
    element takes its own number of terms, and only those not converged are computed."""
    state = [np.array(s, dtype=float) for s in state]
    active = np.arange(state[0].size)
    for _ in range(_MOST_TERMS):
        if active.size == 0:
            return state
        old = [s[active] for s in state]
        new = step(*old)
        for s, n in zip(state, new, strict=True):
            s[active] = n
        active = active[~converged(old, new)]
    raise UnsupportedOperationError(
        "scipy.special: the derivative of an incomplete gamma or beta function in its "
        f"parameters did not converge in {_MOST_TERMS} terms (parameters beyond 1e10?); pass "
        "them as constants.")


def _gammainc_series_da(a, x):
    """∂P/∂a where x ≤ max(a, 1), from P = x^a e^-x / Γ(a+1) Σ_n c_n,
    c_n = x^n / ((a+1)...(a+n)): Σ c_n (log x - ψ(a+1)) + Σ ∂c_n/∂a, times the front."""
    def step(a, x, r, c, total, dc, dtotal):
        r = r + 1.0
        term = x / r
        dc = term * (dc - c / r)
        c = c * term
        return a, x, r, c, total + c, dc, dtotal + dc

    def converged(old, new):
        c, total, dc, dtotal = new[3:]
        return (c <= _EPSILON * total) & (np.abs(dc) <= _EPSILON * (np.abs(dtotal) + total))

    ones = np.ones_like(a)
    _, _, _, _, total, _, dtotal = _iterate(step, converged, a, x, a, ones, ones, 0 * a, 0 * a)
    front = np.exp(gamma_log_density(x, a) + np.log(x) - np.log(a))  # x^a e^-x / Γ(a+1)
    return front * (total * (np.log(x) - psi(a + 1.0)) + dtotal)


def _gammainc_fraction_da(a, x):
    """∂P/∂a = -∂Q/∂a where x > max(a, 1), from Q = x^a e^-x / Γ(a) K with Cephes' continued
    fraction K = p_n / q_n (p_n = z p_(n-1) - y c p_(n-2), the same for q; y = n - a,
    z = x + 2n + 1 - a), its convergents differentiated in a alongside."""
    def step(a, x, c, p2, q2, p1, q1, dp2, dq2, dp1, dq1, k, dk):
        c = c + 1.0
        y = c + 1.0 - a
        z = x + 2.0 * c + 2.0 - a
        yc = y * c
        p = p1 * z - p2 * yc
        q = q1 * z - q2 * yc
        dp = dp1 * z - p1 - dp2 * yc + p2 * c
        dq = dq1 * z - q1 - dq2 * yc + q2 * c
        # the convergents grow, their ratio does not: rescale them
        scale = np.where(np.maximum(np.abs(p), np.abs(q)) > 1e100, 1e-100, 1.0)
        k = np.where(q != 0, p / np.where(q != 0, q, 1.0), k)
        dk = np.where(q != 0, (dp - k * dq) / np.where(q != 0, q, 1.0), dk)
        return (a, x, c, p1 * scale, q1 * scale, p * scale, q * scale, dp1 * scale, dq1 * scale,
                dp * scale, dq * scale, k, dk)

    def converged(old, new):
        k, dk = new[11], new[12]
        return (np.abs(k - old[11]) <= _EPSILON * np.abs(k)) & (
            np.abs(dk - old[12]) <= _EPSILON * (np.abs(dk) + np.abs(k)))

    zeros = 0 * a
    z = x + 2.0 - a
    k0 = (x + 1.0) / (z * x)
    dk0 = (x + 1.0) / (z * z * x)  # ∂/∂a of (x + 1) / (z x), z = x + 2 - a
    state = _iterate(step, converged, a, x, zeros, 1.0 + zeros, x, x + 1.0, z * x, zeros, zeros,
                     zeros, -x, k0, dk0)
    k, dk = state[11], state[12]
    front = np.exp(gamma_log_density(x, a) + np.log(x))  # x^a e^-x / Γ(a)
    return -front * (k * (np.log(x) - psi(a)) + dk)


def _gammainc_da_value(a, x):
    """∂/∂a P(a, x) (SciPy's gammainc): 0 where P is constant in a (x = 0, x = ∞), NaN
    outside P's domain."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(x, dtype=float))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    result = np.where(np.isnan(a) | np.isnan(x) | (a <= 0) | (x < 0), np.nan, 0.0)
    inside = both(a > 0, np.isfinite(a), x > 0, np.isfinite(x))
    fraction = both(inside, x > 1.0, x > a)
    series = inside & ~fraction
    with _errstate():
        if series.any():
            result[series] = _gammainc_series_da(a[series], x[series])
        if fraction.any():
            result[fraction] = _gammainc_fraction_da(a[fraction], x[fraction])
    result = result.reshape(shape)
    return result[()] if result.ndim == 0 else result


def _gammainc_da_dx(y, a, x):
    """∂²P/∂a∂x: the density x^(a-1) e^-x / Γ(a) times log x - ψ(a)."""
    inside = x > 0
    xs = np.where(inside, x, 1.0)
    return np.where(inside, incomplete_gamma_density(None, a, xs) * (np.log(xs) - digamma(a)),
                    0.0)


gammainc_da = Elementwise(_gammainc_da_value,
                          NoClosedForm("the parameter a (a second derivative in a)"),
                          _gammainc_da_dx, name="gammainc_da")
"""∂/∂a of the regularized lower incomplete gamma function P(a, x)."""


def _betainc_fraction(a, b, x):
    """I_x(a, b) = x^a (1-x)^b / (a B(a, b)) K with the continued fraction
    K = 1/(1 + d_1/(1 + d_2/(1 + ...))), d_(2m+1) = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)),
    d_(2m) = m (b-m) x / ((a+2m-1)(a+2m)), which converges fast for x < (a+1)/(a+b+2): returns
    ∂I/∂a and ∂I/∂b, from K's convergents A_n/B_n (A_n = A_(n-1) + d_n A_(n-2), the same
    for B) differentiated in a and b alongside."""
    def step(a, b, x, n, A2, A1, B2, B1, Aa2, Aa1, Ba2, Ba1, Ab2, Ab1, Bb2, Bb1, k, ka, kb):
        n = n + 1.0
        m = np.floor(0.5 * n)
        odd = n - 2.0 * m == 1.0  # d_1, d_3, ...: n = 2m + 1
        lo = np.where(odd, a + 2.0 * m, a + 2.0 * m - 1.0)
        hi = lo + 1.0
        denominator = lo * hi
        top_odd = -(a + m) * (a + b + m) * x
        top_even = m * (b - m) * x
        d = np.where(odd, top_odd, top_even) / denominator
        d_a = np.where(odd, -(2.0 * a + b + 2.0 * m) * x, 0.0) / denominator - d * (
            1.0 / lo + 1.0 / hi)
        d_b = np.where(odd, -(a + m) * x, m * x) / denominator
        A = A1 + d * A2
        B = B1 + d * B2
        Aa = Aa1 + d_a * A2 + d * Aa2
        Ba = Ba1 + d_a * B2 + d * Ba2
        Ab = Ab1 + d_b * A2 + d * Ab2
        Bb = Bb1 + d_b * B2 + d * Bb2
        scale = 1.0 / np.maximum(np.abs(A), np.abs(B))  # the recurrence is linear: rescale
        k = A / B
        ka = (Aa - k * Ba) / B
        kb = (Ab - k * Bb) / B
        return (a, b, x, n, A1 * scale, A * scale, B1 * scale, B * scale, Aa1 * scale,
                Aa * scale, Ba1 * scale, Ba * scale, Ab1 * scale, Ab * scale, Bb1 * scale,
                Bb * scale, k, ka, kb)

    def converged(old, new):
        k = np.abs(new[16])
        return both(np.abs(new[16] - old[16]) <= _EPSILON * k,
                    *(np.abs(new[i] - old[i]) <= _EPSILON * (np.abs(new[i]) + k) for i in (17, 18)),
                    new[3] >= 2.0)

    zeros = 0 * a
    ones = 1.0 + zeros
    # A_0 = 0, B_0 = 1 (the fraction's b_0 = 0) and A_1 = B_1 = 1: K_1 = 1; step n adds d_n
    state = _iterate(step, converged, a, b, x, zeros, zeros, ones, ones, ones, zeros, zeros,
                     zeros, zeros, zeros, zeros, zeros, zeros, ones, zeros, zeros)
    k, ka, kb = state[16:19]
    log_front = xlogy(a, x) + xlog1py(b, -x) - np.log(a) - betaln(a, b)
    front = np.exp(log_front)
    da = front * (k * (np.log(x) - 1.0 / a + psi_difference(a, b)) + ka)
    db = front * (k * (np.log1p(-x) + psi_difference(b, a)) + kb)
    return da, db


def _betainc_dab_value(which, a, b, x):
    """∂/∂a (``which`` 0) or ∂/∂b (1) of I_x(a, b) (SciPy's betainc): 0 at x = 0 and x = 1
    (where I is constant in a and b), NaN outside its domain (a, b > 0, 0 ≤ x ≤ 1).
    Above x = (a+1)/(a+b+2) from the complement, I_x(a, b) = 1 - I_(1-x)(b, a)."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    shape = a.shape
    a, b, x = a.ravel(), b.ravel(), x.ravel()
    valid = both(a > 0, b > 0, x >= 0, x <= 1)
    result = np.where(valid, 0.0, np.nan)
    inside = both(valid, np.isfinite(a), np.isfinite(b), x > 0, x < 1)
    swapped = both(inside, x * (a + b + 2.0) > a + 1.0)
    direct = inside & ~swapped
    with _errstate():
        if direct.any():
            result[direct] = _betainc_fraction(a[direct], b[direct], x[direct])[which]
        if swapped.any():
            # ∂/∂a I_x(a, b) = -∂/∂a I_(1-x)(b, a): the complement's derivative in its second
            result[swapped] = -_betainc_fraction(b[swapped], a[swapped],
                                                 1.0 - x[swapped])[1 - which]
    result = result.reshape(shape)
    return result[()] if result.ndim == 0 else result


def _betainc_dab_dx(which):
    """∂²I/∂a∂x or ∂²I/∂b∂x: the density's derivative in a or b."""
    partial = (_beta_density_da, _beta_density_db)[which]

    def dx(y, a, b, x):
        return partial(beta_density(a, b, x), a, b, x)
    return dx


_SECOND_IN_A = NoClosedForm("the parameter a (a second derivative in a or b)")
_SECOND_IN_B = NoClosedForm("the parameter b (a second derivative in a or b)")
betainc_da = Elementwise(lambda a, b, x: _betainc_dab_value(0, a, b, x), _SECOND_IN_A,
                         _SECOND_IN_B, _betainc_dab_dx(0), name="betainc_da")
"""∂/∂a of the regularized incomplete beta function I_x(a, b)."""
betainc_db = Elementwise(lambda a, b, x: _betainc_dab_value(1, a, b, x), _SECOND_IN_A,
                         _SECOND_IN_B, _betainc_dab_dx(1), name="betainc_db")
"""∂/∂b of the regularized incomplete beta function I_x(a, b)."""


# The Hurwitz zeta function ζ(x, q) = Σ_k (k + q)^-x (SciPy's zeta(x, q), x > 1, q > 0) and its
# derivatives in x, D_m = ∂^m ζ / ∂x^m = Σ_k (-log(k + q))^m (k + q)^-x, by the Euler-Maclaurin
# formula: the first n terms summed, then with a = n + q the tail a^-x G(x),
# G(x) = a / (x - 1) + 1/2 + Σ_j B_2j / (2j)! P_j(x) a^(1-2j), P_j(x) = x (x + 1) ... (x + 2j - 2),
# whose m-th derivative is a^-x Σ_i binom(m, i) (-log a)^(m-i) G^(i)(x) (each term of one sign
# but the Bernoulli corrections). n makes the first term left out (j = 9) below 1e-18 of the
# tail's leading a^(1-x) / (x - 1), the remainder being below that term.
_B18_OVER_FACTORIAL = (43867 / 798) / math.factorial(18)
_ZETA_TOLERANCE = 1e-18
_ZETA_MOST_TERMS = 100_000
_RISING = [np.polynomial.polynomial.polyfromroots(-np.arange(2.0 * j - 1.0))
           for j in range(1, len(BERNOULLI) + 1)]
_ZETA_BERNOULLI = [b / math.factorial(2 * j) for j, b in enumerate(BERNOULLI, start=1)]


def _zeta_terms(x, q):
    """How many terms to sum before the Euler-Maclaurin tail: a = n + q with
    B_18 / 18! (x - 1) P_9(x) / a^18 ≤ ``_ZETA_TOLERANCE`` for every element."""
    log_bound = (math.log(_B18_OVER_FACTORIAL / _ZETA_TOLERANCE) + np.log(x - 1.0)
                 + sum(np.log(x + i) for i in range(17))) / 18.0
    n = int(np.max(np.ceil(np.exp(log_bound) - q), initial=0.0))
    if n > _ZETA_MOST_TERMS:
        raise UnsupportedOperationError(
            "scipy.special.zeta: mutad sums its derivative in the exponent x by the "
            f"Euler-Maclaurin formula, which needs more than {_ZETA_MOST_TERMS} terms here "
            "(x beyond about 40000); pass x as a constant.")
    return max(n, 0)


def _zeta_derivative_value(m, x, q):
    x, q = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(q, dtype=float))
    inside = both(x > 1.0, np.isfinite(x), q > 0.0, np.isfinite(q))
    xs, qs = np.where(inside, x, 2.0), np.where(inside, q, 1.0)
    n = _zeta_terms(xs, qs)
    total = np.zeros_like(xs)
    for k in range(n - 1, -1, -1):  # the smallest terms first
        log_t = np.log(qs + k)
        total = total + (-log_t) ** m * np.exp(-xs * log_t)
    a = qs + n
    log_a = np.log(a)
    tail = 0.0
    for i in range(m + 1):
        g = a * ((-1.0) ** i * math.factorial(i)) / (xs - 1.0) ** (i + 1) + (0.5 if i == 0 else 0.0)
        for c, rising in zip(_ZETA_BERNOULLI, _RISING, strict=True):
            g = g + c * np.polynomial.polynomial.polyval(
                xs, np.polynomial.polynomial.polyder(rising, i)) * a ** (1.0 - len(rising))
        tail = tail + math.comb(m, i) * (-log_a) ** (m - i) * g
    result = np.where(inside, total + np.exp(-xs * log_a) * tail, np.nan)
    return result[()] if result.ndim == 0 else result


@functools.cache
def zeta_derivative(m):
    """∂^m ζ(x, q) / ∂x^m (m ≥ 1), NaN outside x > 1, q > 0. Its partial in x is the next one;
    in q, -m D_(m-1)(x + 1, q) - x D_m(x + 1, q) (of ∂ (k + q)^-x / ∂q = -x (k + q)^(-x-1))."""
    def lower(x, q):
        return _zeta(x, q) if m == 1 else zeta_derivative(m - 1)(x, q)

    return Elementwise(
        functools.partial(_zeta_derivative_value, m),
        lambda y, x, q: zeta_derivative(m + 1)(x, q),
        lambda y, x, q: -m * lower(x + 1.0, q) - x * zeta_derivative(m)(x + 1.0, q),
        name=f"zeta_derivative_{m}")


# K_v(x) e^x = ∫_0^∞ cosh(vt) e^(-x s) dt, s = cosh t - 1 (DLMF 10.32.9), and its derivatives in
# the order and in x: I_(p,r)(v, x) = ∫_0^∞ t^p s^r w_p(vt) e^(-x s) dt, w_p = cosh for even p,
# sinh for odd p, with ∂I_(p,r)/∂v = I_(p+1,r) and ∂I_(p,r)/∂x = -I_(p,r+1). The integrand has
# one sign (sinh(vt) that of v) and falls double exponentially, so the trapezoidal rule is exact
# to rounding (Trefethen and Weideman, SIAM Review 56, 2014): its end T is where the exponent
# x s - |v| t has fallen by ``_K_ORDER_DECAY`` (with the factors t^p s^r), its step where the
# error of a rule on the strip |Im t| < d, e^(√(x² + v²) d²/2 - 2πd/h), is below e^-45.
_K_ORDER_DECAY = 60.0
_K_ORDER_MOST_STEPS = 20_000


def _k_order_rule(v, x, p, r):
    """The trapezoidal rule's end T and step h, per element (plain arrays)."""
    end = np.ones_like(x)
    for _ in range(30):  # T = acosh(1 + (decay + |v| T + log of the factors) / x), a contraction
        end = np.arccosh(1.0 + (_K_ORDER_DECAY + np.abs(v) * end
                                + (p + r) * np.log1p(end) + r * end) / x)
    step = np.minimum(0.1, 0.6 / np.sqrt(np.hypot(x, v)))
    return end, step


def _k_order_integral_value(p, r, v, x):
    v, x = np.broadcast_arrays(np.asarray(v, dtype=float), np.asarray(x, dtype=float))
    inside = both(x > 0.0, np.isfinite(x), np.isfinite(v))
    vs, xs = np.where(inside, v, 0.0), np.where(inside, x, 1.0)
    end, step = _k_order_rule(vs, xs, p, r)
    steps = int(np.max(np.ceil(end / step), initial=1.0))
    if steps > _K_ORDER_MOST_STEPS:
        raise UnsupportedOperationError(
            "scipy.special.kv: mutad integrates its derivative in the order v by the "
            f"trapezoidal rule, which needs more than {_K_ORDER_MOST_STEPS} steps here (an "
            "order beyond about 1e5); pass the order as a constant.")
    size = np.abs(vs)
    total = np.zeros_like(xs)
    with _errstate():
        for k in range(steps, 0, -1):  # the smallest terms first
            t = k * step
            s = 2.0 * np.sinh(0.5 * t) ** 2
            # cosh(vt) e^(-xs) = e^(|v|t - xs) (1 + e^(-2|v|t)) / 2, sinh's with -expm1 and v's
            # sign: neither overflows where their product does not, nor cancels for small vt
            other = 1.0 + np.exp(-2.0 * size * t) if p % 2 == 0 else -np.expm1(-2.0 * size * t)
            total = total + 0.5 * t ** p * s ** r * np.exp(size * t - xs * s) * other
        if p == 0 and r == 0:  # the term at t = 0, halved
            total = total + 0.5
        if p % 2 == 1:
            total = np.sign(vs) * total
        result = np.where(inside, total * step, np.nan)
    return result[()] if result.ndim == 0 else result


@functools.cache
def k_order_integral(p, r):
    """I_(p,r)(v, x): ∂^p/∂v^p (-∂/∂x)^r of K_v(x) e^x (x > 0; NaN elsewhere)."""
    return Elementwise(
        functools.partial(_k_order_integral_value, p, r),
        lambda y, v, x: k_order_integral(p + 1, r)(v, x),
        lambda y, v, x: -k_order_integral(p, r + 1)(v, x),
        name=f"k_order_integral_{p}_{r}")


def kve_dv(y, v, x):
    """∂/∂v of K_v(x) e^x."""
    return k_order_integral(1, 0)(v, x)


def kv_dv(y, v, x):
    """∂/∂v of K_v(x): the scaled one's times e^-x."""
    return k_order_integral(1, 0)(v, x) * np.exp(-x)


# ----------------------------------------------------------------------------------------------
# J_v, Y_v and I_v in their order v (x > 0). Two forms, each accurate where the other is not:
#
# * the power series Σ_k s^k (x/2)^(2k+v) / (k! Γ(k+v+1)) (s = -1 for J, +1 for I), whose
#   derivative in v is the same sum with each term times log(x/2) - ψ(k+v+1). For v > -1 its
#   terms' absolute values sum to I_v(x), so its error is ε I_v(x): the form where J_v (I_v
#   e^-x) is small, v beyond x, where the integrals below cancel to a tiny value;
# * Schläfli's integrals (DLMF 10.9.6, 10.9.7, 10.32.4), differentiated under the integral:
#   J_v = (1/π)∫_0^π cos(x sin θ - vθ) dθ - (sin vπ/π) ∫_0^∞ e^(-x sinh t - vt) dt,
#   Y_v = (1/π)∫_0^π sin(x sin θ - vθ) dθ - (1/π)∫_0^∞ (e^(vt) + e^(-vt) cos vπ) e^(-x sinh t) dt,
#   I_v e^-x = (1/π)∫_0^π e^(x (cos θ - 1)) cos vθ dθ - (sin vπ/π) ∫_0^∞ e^(-x (cosh t + 1) - vt) dt,
#   by Gauss-Legendre, on [0, π] with more nodes than the phase x sin θ - vθ turns, on [0, T]
#   with T where the exponent has fallen by ``_BESSEL_ORDER_DECAY``: their error is ε times
#   the integrands' size, 1 (e^0 for I), the form where the function oscillates or grows.
# Their second derivatives (in v again, or in x) are refused: ``NoClosedForm``.
_BESSEL_ORDER_DECAY = 60.0
_BESSEL_ORDER_MOST_NODES = 20_000
_BESSEL_ORDER_TAIL_NODES = 160


@functools.cache
def _legendre_on(n, end):
    """Gauss-Legendre nodes and weights of n points on [0, end]."""
    nodes, weights = leggauss(n)
    return 0.5 * end * (nodes + 1.0), 0.5 * end * weights


def _bessel_order_series(sign, v, x, scaled):
    """∂/∂v of Σ_k sign^k (x/2)^(2k+v) / (k! Γ(k+v+1)) (times e^-x where ``scaled``), v > -1.
    The terms are their common factor, the first, times the products of the ratios of the
    consecutive terms: the common factor's rounding is not amplified where the sum cancels."""
    log_half = np.log(0.5 * x)
    common = np.exp(v * log_half - gammaln(v + 1.0) - (x if scaled else 0.0))
    total = np.zeros_like(x)
    bound = np.zeros_like(x)
    log_ratio = np.zeros_like(x)
    digamma = psi(v + 1.0)
    k = 0
    while True:
        size = np.exp(log_ratio)
        term = size * (log_half - digamma)
        total = total + (sign ** k) * term
        bound = bound + np.abs(term)
        k += 1
        # (past the largest term, the terms fall faster than geometrically; their sizes, not
        # the terms, which pass through 0 where log(x/2) - ψ changes sign)
        if k > 0.5 * np.max(x, initial=0.0) + 2 and np.all(
                size * (np.abs(log_half) + np.abs(digamma)) <= 1e-17 * bound):
            return common * total
        if k > _BESSEL_ORDER_MOST_NODES:
            raise UnsupportedOperationError(
                "scipy.special: mutad's series of a Bessel function's derivative in its order "
                f"needs more than {_BESSEL_ORDER_MOST_NODES} terms here; pass the order as a "
                "constant.")
        log_ratio = log_ratio + (2.0 * log_half - math.log(k) - np.log(k + v))
        digamma = digamma + 1.0 / (k + v)


def _bessel_order_tail(x, rate, m, phi, shift=0.0):
    """∫_0^∞ t^m e^(-x (phi(t) + shift) - rate t) dt (x > 0), by Gauss-Legendre on [0, T]."""
    end = np.ones_like(x)
    grow = np.maximum(-rate, 0.0)
    inverse = np.arcsinh if phi is np.sinh else (lambda u: np.arccosh(1.0 + u))
    for _ in range(40):  # x (phi(T) - phi(0)) - |rate| T = decay + m log(1 + T), a contraction
        end = inverse((_BESSEL_ORDER_DECAY + grow * end + m * np.log1p(end)) / x)
    nodes, weights = _legendre_on(_BESSEL_ORDER_TAIL_NODES, 1.0)
    t = end[..., None] * nodes  # each element on its own [0, T]
    with _errstate():
        integrand = t ** m * np.exp(-x[..., None] * (phi(t) + shift) - rate[..., None] * t)
    return end * (integrand @ weights)


def _bessel_order_integrals(kind, v, x):
    """∂/∂v of J_v (``kind`` "j"), Y_v ("y") or I_v e^-x ("i") by Schläfli's integrals."""
    count = int(np.max(np.ceil(x + np.abs(v)), initial=0.0)) + 40
    if count > _BESSEL_ORDER_MOST_NODES:
        raise UnsupportedOperationError(
            "scipy.special: mutad integrates a Bessel function's derivative in its order by "
            f"Gauss-Legendre, which needs more than {_BESSEL_ORDER_MOST_NODES} nodes here (an "
            "argument or order beyond about 2e4); pass the order as a constant.")
    theta, weights = _legendre_on(count, math.pi)
    vs, xs = v[..., None], x[..., None]
    s, c = np.sin(math.pi * v), np.cos(math.pi * v)
    with _errstate():
        if kind == "i":
            body = -((theta * np.exp(xs * (np.cos(theta) - 1.0)) * np.sin(vs * theta)) @ weights)
            return (body / math.pi - c * _bessel_order_tail(x, v, 0, np.cosh, 1.0)
                    + (s / math.pi) * _bessel_order_tail(x, v, 1, np.cosh, 1.0))
        phase = xs * np.sin(theta) - vs * theta
        if kind == "j":
            body = (theta * np.sin(phase)) @ weights
            return (body / math.pi - c * _bessel_order_tail(x, v, 0, np.sinh)
                    + (s / math.pi) * _bessel_order_tail(x, v, 1, np.sinh))
        body = -((theta * np.cos(phase)) @ weights)
        return ((body - _bessel_order_tail(x, -v, 1, np.sinh)
                 + c * _bessel_order_tail(x, v, 1, np.sinh)) / math.pi
                + s * _bessel_order_tail(x, v, 0, np.sinh))


def _bessel_order_value(kind, name, v, x):
    v, x = np.broadcast_arrays(np.asarray(v, dtype=float), np.asarray(x, dtype=float))
    if kind != "y" and np.any(np.logical_and(v <= -1.0, x > 0.0)):
        raise UnsupportedOperationError(
            f"scipy.special.{name}: mutad differentiates it in its order v for v > -1; pass "
            "an order v <= -1 as a constant (mutad.stop_gradient).")
    inside = both(x > 0.0, np.isfinite(x), np.isfinite(v))
    vs, xs = np.where(inside, v, 1.0), np.where(inside, x, 1.0)
    with _errstate():
        if kind == "y":
            series = np.zeros(vs.shape, dtype=bool)
        elif kind == "j":  # the series' error ε I_v(x) at most the integrals' ε
            series = _special.ive(vs, xs) * np.exp(xs) <= 10.0
        else:  # I_v e^-x small: v beyond x
            series = _special.ive(vs, xs) < 1e-2
        result = np.empty(vs.shape)
        if np.any(series):
            result[series] = _bessel_order_series(-1.0 if kind == "j" else 1.0, vs[series],
                                                  xs[series], kind == "i")
        if not np.all(series):
            result[~series] = _bessel_order_integrals(kind, vs[~series], xs[~series])
        # at x = 0, J_v and I_v are 0 for every v > 0 (elsewhere on x <= 0 no derivative)
        edge = np.where(both(x == 0.0, v > 0.0, kind != "y"), 0.0, np.nan)
        result = np.where(inside, result, edge)
    return result[()] if result.ndim == 0 else result


@functools.cache
def bessel_order_derivative(kind, name):
    """∂/∂v of J_v(x) (``kind`` "j"), Y_v(x) ("y"), I_v(x) e^-|x| ("i"): SciPy's ``name``'s."""
    second = NoClosedForm(f"the order v of scipy.special.{name} twice (a second derivative)")
    return Elementwise(functools.partial(_bessel_order_value, kind, name),
                       second, NoClosedForm(f"x and the order v of scipy.special.{name} (a "
                                            "second derivative)"),
                       name=f"{name}_order_derivative")


# ----------------------------------------------------------------------------------------------
# The hypergeometric functions M(a, b, z) = 1F1(a; b; z) (Kummer's) and 2F1(a, b; c; z) in their
# parameters: the series Σ_k t_k, t_(k) = t_(k-1) r_k, r_k = Π_i (n_i+k-1) z / ((d+k-1) k)
# (numerators n_i, denominator d), differentiated term by term, each term's partial by the
# recurrence of the terms, which holds where a numerator is 0, -1, ... too (a polynomial). For
# 1F1 and z < 0 Kummer's transformation M(a, b, z) = e^z M(b-a, b, -z) makes the terms of one
# sign for b > a; 2F1's series serves |z| <= 0.9. Where the sum still cancels (its terms'
# absolute values beyond 1e5 times the sum) the derivative is refused rather than given
# inaccurate. Parameters a denominator d > 0.
_HYPERGEOMETRIC_MOST_TERMS = 5000
_HYP2F1_LARGEST_Z = 0.9


def _hypergeometric_series_partial(numerators, denominator, z, moved, with_denominator, name):
    """The derivative of Σ_k t_k along numerator ``moved`` (None: none), and with the
    denominator too where ``with_denominator``, by the series at z, and the sum of its terms'
    absolute values. Along a numerator n and the denominator d together the ratio's derivative
    is Π_(j≠i) (n_j+k-1) z (d - n) / ((d+k-1)² k): 0 where n = d, as M(b, b, z) = e^z is."""
    term = np.ones_like(z)
    derivative, total, bound = np.zeros_like(z), np.zeros_like(z), np.zeros_like(z)
    for k in range(1, _HYPERGEOMETRIC_MOST_TERMS + 1):
        others = functools.reduce(np.multiply, [n + (k - 1.0) for i, n in enumerate(numerators)
                                                if i != moved], np.ones_like(z))
        step = others * z / ((denominator + k - 1.0) * k)
        if moved is None:
            ratio = step
            slope = -ratio / (denominator + k - 1.0)
        else:
            ratio = step * (numerators[moved] + k - 1.0)
            slope = (step * (denominator - numerators[moved]) / (denominator + k - 1.0)
                     if with_denominator else step)
        previous = derivative
        derivative = derivative * ratio + term * slope
        term = term * ratio
        total = total + derivative
        bound = bound + np.abs(derivative)
        # (two terms in a row: one passes through 0 where its sign changes)
        if k > np.max(np.abs(z), initial=0.0) and np.all(
                np.maximum(np.abs(derivative), np.abs(previous)) <= 1e-17 * bound):
            return total, bound
    raise UnsupportedOperationError(
        f"scipy.special.{name}: its series in the parameters needs more than "
        f"{_HYPERGEOMETRIC_MOST_TERMS} terms here; pass the parameters as constants.")


def _refuse_cancelling(name, parameter, bound, partial, inside, where):
    if np.any(np.logical_and(inside, bound > 1e5 * np.abs(partial))):
        raise UnsupportedOperationError(
            f"scipy.special.{name}: its series in the parameter {parameter} cancels here "
            f"({where}), which would lose its digits; pass the parameters as constants.")


def _refuse_outside(name, inside, where):
    if not np.all(inside):
        raise UnsupportedOperationError(
            f"scipy.special.{name}: mutad differentiates it in its parameters {where}; pass "
            "the parameters as constants elsewhere (mutad.stop_gradient).")


def _kummer_parameter_value(which, a, b, z):
    a, b, z = np.broadcast_arrays(*(np.asarray(u, dtype=float) for u in (a, b, z)))
    _refuse_outside("hyp1f1", np.logical_or(b > 0.0, np.isnan(a + b + z)), "for b > 0")
    inside = both(np.isfinite(a), np.isfinite(b), np.isfinite(z))
    a, b, z = (np.where(inside, u, fill) for u, fill in ((a, 0.5), (b, 1.0), (z, 0.0)))
    negative = z < 0.0
    partial, bound = np.zeros_like(z), np.zeros_like(z)
    with _errstate():
        for side in (False, True):
            chosen = negative == side
            if not np.any(chosen):
                continue
            ac, bc, zc = a[chosen], b[chosen], np.abs(z[chosen])
            if side:  # M(a, b, z) = e^z M(b - a, b, -z): along a, minus along its first
                # parameter; along b, along both of them
                total, size = _hypergeometric_series_partial([bc - ac], bc, zc, 0, which == 1,
                                                             "hyp1f1")
                scale = np.exp(-zc)
                total = -total if which == 0 else total
            else:
                total, size = _hypergeometric_series_partial([ac], bc, zc,
                                                             0 if which == 0 else None, False,
                                                             "hyp1f1")
                scale = 1.0
            partial[chosen], bound[chosen] = total * scale, size * scale
        _refuse_cancelling("hyp1f1", "ab"[which], bound, partial, inside,
                           "terms of both signs: a < 0, or a > b with z < 0")
        result = np.where(inside, partial, np.nan)
    return result[()] if result.ndim == 0 else result


def _gauss_parameter_value(which, a, b, c, z):
    a, b, c, z = np.broadcast_arrays(*(np.asarray(u, dtype=float) for u in (a, b, c, z)))
    _refuse_outside("hyp2f1", np.logical_or(
        both(c > 0.0, np.abs(z) <= _HYP2F1_LARGEST_Z), np.isnan(a + b + c + z)),
        f"for c > 0 and |z| <= {_HYP2F1_LARGEST_Z}, by its series")
    inside = both(np.isfinite(a), np.isfinite(b), np.isfinite(c), np.isfinite(z))
    a, b, c, z = (np.where(inside, u, fill)
                  for u, fill in ((a, 0.5), (b, 0.5), (c, 1.0), (z, 0.0)))
    with _errstate():
        partial, bound = _hypergeometric_series_partial([a, b], c, z, which if which < 2
                                                        else None, False, "hyp2f1")
        _refuse_cancelling("hyp2f1", "abc"[which], bound, partial, inside,
                           "terms of both signs")
        result = np.where(inside, partial, np.nan)
    return result[()] if result.ndim == 0 else result


@functools.cache
def gauss_parameter_derivative(which):
    """∂/∂a (``which`` 0), ∂/∂b (1) or ∂/∂c (2) of scipy.special.hyp2f1(a, b, c, z), c > 0,
    |z| <= 0.9 (refused elsewhere)."""
    second = NoClosedForm("the parameters of scipy.special.hyp2f1 and another argument (a "
                          "second derivative)")
    return Elementwise(functools.partial(_gauss_parameter_value, which), second, second,
                       second, second, name=f"hyp2f1_d{'abc'[which]}")


@functools.cache
def kummer_parameter_derivative(which):
    """∂/∂a (``which`` 0) or ∂/∂b (1) of scipy.special.hyp1f1(a, b, z), b > 0 (refused
    elsewhere)."""
    second = NoClosedForm("the parameters of scipy.special.hyp1f1 and another argument (a "
                          "second derivative)")
    return Elementwise(functools.partial(_kummer_parameter_value, which), second, second, second,
                       name=f"hyp1f1_d{'ab'[which]}")


# ----------------------------------------------------------------------------------------------
# The noncentral chi-squared distribution in its degrees of freedom k: a Poisson mixture of
# central ones, F(x; k, λ) = Σ_j w_j P(k/2 + j, x/2), w_j = e^(-λ/2) (λ/2)^j / j!, and its
# density Σ_j w_j f_(k+2j)(x), differentiated term by term: ½ ∂P/∂a (``gammainc_da``) and
# f_ν(x) ½ (log(x/2) - ψ(ν/2)). The sum runs to where the weights beyond are below 1e-17 of
# the largest (past λ/2 by 12 of its standard deviations and 40 terms).
_NCX2_MOST_TERMS = 20_000


def _ncx2_dk_value(density, x, k, lam):
    x, k, lam = np.broadcast_arrays(*(np.asarray(u, dtype=float) for u in (x, k, lam)))
    inside = both(x > 0.0, np.isfinite(x), k > 0.0, np.isfinite(k), lam >= 0.0,
                  np.isfinite(lam))
    xs, ks, ls = np.where(inside, x, 1.0), np.where(inside, k, 1.0), np.where(inside, lam, 0.0)
    half = 0.5 * ls
    terms = int(np.max(np.ceil(half + 12.0 * np.sqrt(half) + 40.0), initial=40.0))
    if terms > _NCX2_MOST_TERMS:
        raise UnsupportedOperationError(
            "scipy.stats.ncx2 (scipy.special.chndtr): its derivative in the degrees of freedom "
            f"sums more than {_NCX2_MOST_TERMS} terms of its Poisson mixture here (a "
            "noncentrality beyond about 3e4); pass the degrees of freedom as a constant.")
    total = np.zeros_like(xs)
    with _errstate():
        log_half = np.log(np.where(half > 0, half, 1.0))
        log_x = np.log(0.5 * xs)
        for j in range(terms):
            weight = np.exp(-half + j * log_half - gammaln(j + 1.0)) if j else np.exp(-half)
            weight = np.where(half > 0, weight, 1.0 if j == 0 else 0.0)
            a = 0.5 * ks + j
            if density:  # f_ν(x) = (x/2)^(a-1) e^(-x/2) / (2 Γ(a)), a = ν/2
                term = np.exp((a - 1.0) * log_x - 0.5 * xs - gammaln(a)) * 0.5 * (log_x - psi(a))
                term = 0.5 * term
            else:
                term = 0.5 * _gammainc_da_value(a, 0.5 * xs)
            total = total + weight * term
        result = np.where(inside, total, np.nan)
    return result[()] if result.ndim == 0 else result


@functools.cache
def ncx2_dk(density):
    """∂/∂k of the noncentral chi-squared distribution function F(x; k, λ) (SciPy's chndtr),
    or with ``density`` of its density (SciPy's _ncx2_pdf), x > 0 (NaN elsewhere)."""
    second = NoClosedForm("the degrees of freedom of scipy.stats.ncx2 and another argument (a "
                          "second derivative)")
    return Elementwise(functools.partial(_ncx2_dk_value, density), second, second, second,
                       name=f"ncx2_{'pdf' if density else 'cdf'}_dk")
