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
