"""SciPy's Python functions that no rule routes, called on differentiated values: SciPy's own
code runs, followed step by step as the user's is (the names its module binds to NumPy's
builders and ``r_`` at import included: ``from numpy import asarray, r_``). Each
checked against central differences in reverse mode, forward mode and replays at other points,
its value SciPy's bit for bit and the caller's array unchanged; and what stays refused, with
what to do instead."""

import warnings

import numpy as np
import pytest
import scipy.fftpack
import scipy.interpolate
import scipy.signal
import scipy.special
import scipy.stats
import scipy.stats.qmc

import mutad
from mutad.core.registry import RULES
from mutad.errors import UnsupportedOperationError
from test_scipy_stops import central, check


def _mst(x):
    return scipy.stats.qmc.geometric_discrepancy(np.stack([x, x[::-1]]).T / 4, method="mst")


PROGRAMS = {
    # scipy.stats._qmc: np.asarray of the sample, then routed distances
    "geometric_discrepancy": (scipy.stats.qmc.geometric_discrepancy, lambda x:
                              scipy.stats.qmc.geometric_discrepancy(np.stack([x, x[::-1]]).T / 4)),
    "geometric_discrepancy_mst": (scipy.stats.qmc.geometric_discrepancy, _mst),
    # scipy.interpolate._pade: from numpy import zeros, asarray, eye, hstack, r_
    "pade": (scipy.interpolate.pade, lambda x: sum(
        p(0.3) * k for k, p in enumerate(scipy.interpolate.pade(np.r_[1.0, x], 2), 1))),
    # scipy.special._basic: from numpy import asarray, where, ...
    "diric": (scipy.special.diric, lambda x: (scipy.special.diric(3 * x, 3) * x).sum()),
    # scipy.signal._lti_conversion: from numpy import r_, eye, atleast_2d, ...
    "ss2zpk": (scipy.signal.ss2zpk, lambda x: np.abs(scipy.signal.ss2zpk(
        np.diag(x) + 0.1, np.ones((4, 1)), np.ones((1, 4)), [[1.0]])[0]).sum()),
    "savgol_coeffs": (scipy.signal.savgol_coeffs, lambda x:
                      scipy.signal.savgol_coeffs(5, 2, deriv=1, delta=x[0]) @ np.r_[x, 1.0]),
    "kurtosistest": (scipy.stats.kurtosistest,
                     lambda x: scipy.stats.kurtosistest(np.r_[x, x ** 2, 1.0]).statistic),
    "hilbert2": (scipy.signal.hilbert2, lambda x: np.abs(scipy.signal.hilbert2(
        x.reshape(2, 2) + np.arange(4.0).reshape(2, 2))).sum()),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_scipys_code_without_a_rule_is_followed(name):
    function, f = PROGRAMS[name]
    assert function not in RULES  # (else this tests the rule)
    x = np.array([0.3, 0.5, 0.9, 1.4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        check(f, x, rtol=1e-5, atol=1e-7)
        replayed = mutad.grad(f, replay=True)
        for scale in (0.9, 1.1, 1.2):  # the program recorded once, replayed at other points
            other = x * scale + [0.0, 0.01, 0.0, -0.02]
            before = other.tobytes()
            np.testing.assert_allclose(replayed(other), central(f, other), rtol=1e-5, atol=1e-7)
            assert other.tobytes() == before


def test_scipys_code_without_a_rule_that_converts_is_refused():
    x = np.array([0.3, 0.5, 0.9, 1.4])
    before = x.tobytes()
    # compiled code handed a differentiated array: SciPy's code, followed, stops there
    with pytest.raises(UnsupportedOperationError, match=r"scipy\.stats\.shapiro .*mutad\.adjoint"):
        mutad.gradient(lambda x: scipy.stats.shapiro(x).statistic, x)
    assert x.tobytes() == before


def test_scipys_code_followed_reads_float_as_the_users_code():
    """float() of a traced number in SciPy's code that mutad follows (gammatone's center
    frequency, once refused as a conversion) is the value standing for the Python float, as
    in the user's code: SciPy's values, differentiated."""
    def f(x):
        return scipy.signal.gammatone(100 + x[0], "fir", fs=1000)[0].sum() \
            + scipy.signal.gammatone(100 * x[1], "iir", fs=1000)[1].sum()

    x = np.array([0.3, 0.5])
    assert mutad.value_and_gradient(f, x)[0] == f(x)
    mutad.check_grads(f, x, modes=("rev", "fwd"))
