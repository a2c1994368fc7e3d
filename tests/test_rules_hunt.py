"""Derivative formulas that lost their digits at extreme arguments, against mpmath.

Each point is one where the textbook formula of a rule cancels or overflows while the
function's value and its derivative are finite and representable: arcsin's, arccos's and
arctanh's 1 - x² near ±1, arcsinh's 1 + x² beyond 1.34e154, Ei's e^x / x beyond e^x's overflow.
"""

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sc

import mutad

RELATIVE = 1e-13


def mp_derivative(fm, x, order=1):
    with mp.workdps(60):
        x = mp.mpf(x)
        return float(mp.diff(fm, x, order, h=mp.mpf(10) ** -25 * abs(x)))


def assert_close(got, want):
    assert np.isfinite(got) and abs(got - want) <= RELATIVE * abs(want), (got, want)


CASES = [(f, fm, x) for f, fm in ((np.arcsin, mp.asin), (np.arccos, mp.acos),
                                   (np.arctanh, mp.atanh))
          for x in (1 - 1e-8, 0.9999999, -(1 - 1e-12))]
CASES += [(np.arcsinh, mp.asinh, x) for x in (1.4e154, -1e200, 1e300, 3.0)]
CASES += [(sc.expi, mp.ei, x) for x in (709.0, 710.0, 716.0)]


@pytest.mark.parametrize("f, fm, x", CASES, ids=lambda c: getattr(c, "__name__", repr(c)))
def test_first_derivative_keeps_its_digits(f, fm, x):
    x = np.array([x])
    reverse, = mutad.gradient(lambda t: f(t).sum(), x)
    _, forward = mutad.jvp(lambda t: f(t), (x,), (np.ones(1),))
    want = mp_derivative(fm, x[0])
    assert_close(float(reverse[0]), want)
    assert_close(float(forward[0]), want)


# Partials read from a rounded output: tanh's 1 - tanh² is 0 beyond |x| = 19.1 (4.6e-17 at
# 19.5) and 4% off at 18; the logistic sigmoid's σ(x) σ(-x), log_expit's σ(-x) and
# np.logaddexp's shares 1 / (1 + e^d) flush to 0 where the true one is a subnormal number
# (e^d overflows). Against the derivatives in closed form, at 60 digits.

def sigmoid(t):
    return 1 / (1 + mp.exp(-t))


ANALYTIC = [(np.tanh, lambda t: mp.sech(t) ** 2, x) for x in (18.0, 19.5, -25.0, 300.0, -10.0)]
ANALYTIC += [(sc.expit, lambda t: sigmoid(t) * sigmoid(-t), x) for x in (40.0, -710.0, 720.0)]
ANALYTIC += [(sc.log_expit, lambda t: sigmoid(-t), x) for x in (710.0, 730.0)]
ANALYTIC += [(lambda v: np.logaddexp(v, 0.5), lambda t: sigmoid(t - 0.5), -715.0),
             (lambda v: np.logaddexp(0.5, v), lambda t: sigmoid(t - 0.5), -715.0),
             (lambda v: np.logaddexp2(v, 0.5), lambda t: 1 / (1 + mp.mpf(2) ** (0.5 - t)),
              -1025.0)]
SECOND = [(np.tanh, lambda t: -2 * mp.tanh(t) * mp.sech(t) ** 2, x) for x in (19.5, -25.0)]
SECOND += [(sc.expit, lambda t: sigmoid(t) * sigmoid(-t) * (1 - 2 * sigmoid(t)), x)
           for x in (40.0, -300.0)]


def assert_near(got, want):
    """Within RELATIVE, or two of the smallest subnormal's steps of a subnormal ``want``."""
    assert abs(got - want) <= RELATIVE * abs(want) + 1e-323, (got, want)


def analytic(fm, x):
    with mp.workdps(60):
        return float(fm(mp.mpf(x)))


@pytest.mark.parametrize("f, fm, x", ANALYTIC, ids=lambda c: getattr(c, "__name__", repr(c)))
def test_first_derivative_read_from_the_input_keeps_its_digits(f, fm, x):
    x = np.array([x])
    want = analytic(fm, x[0])
    reverse, = mutad.gradient(lambda t: f(t).sum(), x)
    _, forward = mutad.jvp(lambda t: f(t), (x,), (np.ones(1),))
    assert_near(float(reverse[0]), want)
    assert_near(float(forward[0]), want)

    def in_place(t):  # written over its argument: the partial reads the input put back
        t = t * 1.0
        np.copyto(t, f(t))
        return t.sum()

    caller = x.copy()
    assert_near(float(mutad.gradient(in_place, caller)[0][0]), want)
    assert caller.tobytes() == x.tobytes()


@pytest.mark.parametrize("f, fm, x", SECOND, ids=lambda c: getattr(c, "__name__", repr(c)))
def test_second_derivative_read_from_the_input_keeps_its_digits(f, fm, x):
    h = mutad.hessian(lambda t: f(t).sum(), np.array([x]))
    assert_near(float(np.asarray(h).reshape(-1)[0]), analytic(fm, x))


def test_tanh_written_in_place_gives_the_derivative_of_its_input():
    """``np.tanh(u, out=u)`` overwrites the input its partial now reads: the reverse pass puts
    it back (tanh has no inverse) before the pullback reads it."""
    x = np.array([0.3, 18.0, 19.5, -25.0, 2.0])

    def f(x):
        u = x * 1.0
        np.tanh(u, out=u)
        u *= 3.0
        return u.sum()

    caller = x.copy()
    g, = mutad.gradient(f, caller)
    assert caller.tobytes() == x.tobytes()
    with mp.workdps(60):
        want = [float(3 * mp.sech(t) ** 2) for t in map(mp.mpf, x)]
    for got, w in zip(g, want):
        assert_near(float(got), w)


# poch(z, m) where z and z + m are both poles of Γ is the ratio of their residues (poch(-2, 1) =
# -2, a polynomial in z for an integer m); its z-derivative took Γ(z + m) (ψ(z + m)/Γ(z) +
# (1/Γ)'(z)) there, inf · 0: NaN, and so its second derivative.

DOUBLE_POLES = [(-2.0, 1.0), (-3.0, 2.0), (-1.0, -1.0), (-5.0, -3.0), (-4.0, 4.0), (0.0, 0.0)]


@pytest.mark.parametrize("z, m", DOUBLE_POLES)
def test_poch_at_a_double_pole(z, m):
    zs, ms = np.array([z]), np.array([m])
    with mp.workdps(40):
        first = float(mp.diff(lambda t: mp.rf(t, m), z))
        second = float(mp.diff(lambda t: mp.rf(t, m), z, 2))
    reverse, dm = mutad.gradient(lambda a, b: sc.poch(a, b).sum(), zs, ms)
    _, forward = mutad.jvp(lambda a: sc.poch(a, ms), (zs,), (np.ones(1),))
    h = mutad.hessian(lambda a: sc.poch(a, ms).sum(), zs)
    for got, want in ((reverse[0], first), (forward[0], first), (np.ravel(h)[0], second)):
        assert abs(float(got) - want) <= 1e-14 * max(abs(want), abs(first), 1.0), (got, want)
    assert np.isnan(dm[0])  # poch(z, ·) is 0 on either side of m: no derivative


# voigt_profile's partials from w'(z) = -2z w(z) + 2i/√π, which cancels for large |z|: in the
# wings (x = 1e5 σ: the σ-partial 2e3 times too large, of the wrong sign), for a narrow
# Gaussian (σ = 1e-8: every partial wrong, the γ-partial 0), and beside the real axis, where
# the series for large |z| leaves out e^(-z²). Against 120 digits.

VOIGT = [(1e5, 1.0, 0.1), (1e8, 1.0, 1.0), (1.0, 1e-8, 1.0), (5.0, 1.0, 1e4), (1e3, 1.0, 1.0),
         (12.0, 1.0, 1e-20), (12.0, 1.0, 0.0), (-12.0, 1.0, 1e-15), (11.3, 1.0, 1.4)]


def mp_voigt(x, sigma, gamma):
    z = (x + 1j * gamma) / (sigma * mp.sqrt(2))
    return mp.re(mp.exp(-z * z) * mp.erfc(-1j * z)) / (sigma * mp.sqrt(2 * mp.pi))


@pytest.mark.parametrize("point", VOIGT, ids=str)
def test_voigt_profile_partials_far_from_the_centre(point):
    args = [np.array([v]) for v in point]
    got = mutad.gradient(lambda x, s, g: sc.voigt_profile(x, s, g).sum(), *args)
    with mp.workdps(120):
        p = [mp.mpf(v) for v in point]
        for k in range(3):
            def along(t, k=k):
                q = list(p)
                q[k] = t
                return mp_voigt(*q)
            assert_near(float(got[k][0]), float(mp.diff(along, p[k])))


# The inverses of erf, erfc, Φ and log Φ took their derivatives as exp(y²) of the rounded
# output y (ndtri_exp's as exp(x + y²/2), which cancels): the relative error of y, y² times over
# (1.4e-14 for ndtri_exp at -100, 1e-13 in the far tails). Now erfcx(|y|) over the input's tail:
# within a few ulps. References: the roots at 60 digits (400 for log Φ near 0).

def root(g, start, digits=60):
    with mp.workdps(digits):
        return mp.findroot(g, mp.mpf(start), tol=mp.mpf(10) ** (10 - digits))


def mp_ndtri_exp(x):
    with mp.workdps(400):
        return root(lambda z: mp.log(mp.ncdf(z)) - x, sc.ndtri_exp(float(x)), 400)


INVERSES = [(sc.ndtri, lambda p: 1 / mp.npdf(root(lambda z: mp.ncdf(z) - p, sc.ndtri(float(p)))), p)
            for p in (1e-300, 1e-20, 1 - 1e-15)]
INVERSES += [(sc.ndtri_exp, lambda x: mp.exp(x) / mp.npdf(mp_ndtri_exp(x)), x)
             for x in (-700.0, -100.0, -1e-20)]
INVERSES += [(sc.erfinv, lambda x: mp.sqrt(mp.pi) / 2 * mp.exp(mp.erfinv(x) ** 2), x)
             for x in (1 - 1e-15, -(1 - 1e-10))]
INVERSES += [(sc.erfcinv, lambda x: -mp.sqrt(mp.pi) / 2 * mp.exp(
    root(lambda z: mp.erfc(z) - x, sc.erfcinv(float(x))) ** 2), x) for x in (1e-300, 2 - 1e-12)]


@pytest.mark.parametrize("f, fm, x", INVERSES, ids=lambda c: getattr(c, "__name__", repr(c)))
def test_inverse_function_derivative_within_a_few_ulps(f, fm, x):
    with mp.workdps(60):
        want = float(fm(mp.mpf(x)))
    xs = np.array([x])
    reverse, = mutad.gradient(lambda t: f(t).sum(), xs)
    _, forward = mutad.jvp(f, (xs,), (np.ones(1),))
    for got in (reverse[0], forward[0]):
        assert abs(float(got) - want) <= 8 * np.spacing(abs(want)), (got, want)


# erf's, erfc's, ndtr's and erfi's derivatives took exp(∓x²) of the rounded square x * x: off by
# x² ε relative (224 ulps for erf at 26.1, 12 at 5.3). Against the closed forms at 60 digits.

SQUARES = [(sc.erf, lambda t: 2 / mp.sqrt(mp.pi) * mp.exp(-t * t), x) for x in (5.3, -26.1)]
SQUARES += [(sc.erfc, lambda t: -2 / mp.sqrt(mp.pi) * mp.exp(-t * t), 19.9),
            (sc.ndtr, mp.npdf, 37.3), (sc.ndtr, mp.npdf, -26.1),
            (sc.erfi, lambda t: 2 / mp.sqrt(mp.pi) * mp.exp(t * t), 25.9)]


# Derivatives that took the rounding of an intermediate value many times over: log Φ's right
# tail as √(2/π) / erfcx(-x/√2), erfcx of the rounded x/√2 (415 ulps at 26.1, 0 from 37.7 on),
# arctan's 1 / (1 + x * x), 0 where x * x overflows (from 1.34e154 on), logaddexp's small
# share e^(a - b) / (1 + e^(a - b)) of the rounded difference (407 ulps at a - b = -534.42),
# dawsn's 1 - 2x D(x) and erfcx's 2x erfcx(x) - 2/√π, which cancel (87 ulps at 7.7, 159 at 7).
# Against the closed forms at 60 digits.

TAILS = [(sc.log_ndtr, lambda t: mp.npdf(t) / mp.ncdf(t), x) for x in (26.1, 5.0, 37.9)]
TAILS += [(np.arctan, lambda t: 1 / (1 + t * t), x) for x in (1.4e154, -3e153, 1e160)]
TAILS += [(sc.dawsn, lambda t: 1 - 2 * t * mp.sqrt(mp.pi) / 2 * mp.exp(-t * t) * mp.erfi(t), x)
          for x in (7.7, -6.5, 9.0)]
TAILS += [(sc.erfcx, lambda t: 2 * t * mp.exp(t * t) * mp.erfc(t) - 2 / mp.sqrt(mp.pi), x)
          for x in (6.5, 7.0, 9.0)]


@pytest.mark.parametrize("f, fm, x", SQUARES + TAILS,
                         ids=lambda c: getattr(c, "__name__", repr(c)))
def test_derivative_of_a_gaussian_within_a_few_ulps(f, fm, x):
    want = analytic(fm, x)
    xs = np.array([x])
    reverse, = mutad.gradient(lambda t: f(t).sum(), xs)
    _, forward = mutad.jvp(f, (xs,), (np.ones(1),))
    for got in (reverse[0], forward[0]):
        assert abs(float(got) - want) <= 4 * np.spacing(abs(want)), (got, want)


@pytest.mark.parametrize("f, base", [(np.logaddexp, mp.e), (np.logaddexp2, 2)])
@pytest.mark.parametrize("a, b", [(-534.1234567, 0.3), (0.3, -534.1234567), (2.5, -40.1)])
def test_small_share_of_a_log_sum_within_a_few_ulps(f, base, a, b):
    with mp.workdps(60):
        want = [float(1 / (1 + mp.power(base, mp.mpf(q) - mp.mpf(p)))) for p, q in ((a, b), (b, a))]
    xs = (np.array([a]), np.array([b]))
    reverse = mutad.gradient(lambda s, t: f(s, t).sum(), *xs, argnums=(0, 1))
    forward = [mutad.jvp(f, xs, (np.ones(1) * (k == 0), np.ones(1) * (k == 1)))[1] for k in (0, 1)]
    for got, w in zip([*reverse, *forward], want * 2):
        assert abs(float(got[0]) - w) <= 2 * np.spacing(w), (got, w)
    with mp.workdps(60):
        curvature = float(mp.log(base) / (2 + mp.power(base, mp.mpf(b) - mp.mpf(a))
                                          + mp.power(base, mp.mpf(a) - mp.mpf(b))))
    hessian = mutad.hessian(lambda v: f(v[0], v[1]), np.array([a, b]))
    assert abs(hessian[0, 0] - curvature) <= 4 * np.spacing(curvature), (hessian, curvature)
    assert hessian[0, 1] == -hessian[0, 0] and hessian[1, 1] == hessian[0, 0], hessian
