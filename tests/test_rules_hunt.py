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
