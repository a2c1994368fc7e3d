"""SciPy programs that stopped with an error instead of being differentiated, found among
programs written as scientists use SciPy inside a differentiated function: each checked with
``mutad.testing``'s finite differences (reverse and forward mode, and second order where the
steps allow), its value SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.fftpack
import scipy.signal

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.testing import check_grads


def check(f, *args, order=1, **tolerances):
    """``f``'s value SciPy's bit for bit and the caller's arrays unchanged, then
    ``check_grads`` (which checks the arguments come back too) in both modes."""
    copies = [np.array(a, copy=True) for a in args]
    before = [a.tobytes() for a in args]
    value, _ = mutad.value_and_gradient(f, *args)
    assert [a.tobytes() for a in args] == before
    assert np.asarray(value).tobytes() == np.asarray(f(*copies)).tobytes()
    check_grads(f, *args, order=order, modes=("rev", "fwd"), **tolerances)


# ----------------------------------------------------------------------------------------------
# scipy.fftpack's pseudo-differential operators: Python around fftpack.convolve's compiled
# routines (a kernel per frequency between a real transform and its inverse), which have
# rules now; the kernel they build from Python numbers is a constant

X15 = np.cos(np.arange(15.0) * 0.7) + 0.1 * np.arange(15.0)
X16 = np.sin(np.arange(16.0) * 0.9) - 0.05 * np.arange(16.0)
WEIGHTS = {15: np.cos(np.arange(15.0)), 16: np.cos(np.arange(16.0))}

PSEUDO_DIFFS = {
    "diff": lambda x: scipy.fftpack.diff(x),
    "diff_second_period": lambda x: scipy.fftpack.diff(x, 2, period=3.0),
    "diff_third": lambda x: scipy.fftpack.diff(x, 3),
    "integral": lambda x: scipy.fftpack.diff(x - x.mean(), -1),
    "hilbert": lambda x: scipy.fftpack.hilbert(x),
    "ihilbert": lambda x: scipy.fftpack.ihilbert(x),
    "tilbert": lambda x: scipy.fftpack.tilbert(x, 0.5),
    "itilbert": lambda x: scipy.fftpack.itilbert(x, 0.4),
    "cs_diff": lambda x: scipy.fftpack.cs_diff(x, 0.3, 0.4),
    "sc_diff": lambda x: scipy.fftpack.sc_diff(x, 0.3, 0.4),
    "ss_diff": lambda x: scipy.fftpack.ss_diff(x, 0.3, 0.4),
    "cc_diff": lambda x: scipy.fftpack.cc_diff(x, 0.3, 0.4),
    "shift": lambda x: scipy.fftpack.shift(x, 0.7),  # convolve_z
}


@pytest.mark.parametrize("x", [X15, X16], ids=["odd", "even"])
@pytest.mark.parametrize("name", PSEUDO_DIFFS)
def test_fftpack_pseudo_differential_operators(name, x):
    transform = PSEUDO_DIFFS[name]
    check(lambda x: np.sum(transform(x) * WEIGHTS[len(x)]) + np.sum(transform(x) ** 2),
          x.copy(), order=2)


def test_fftpack_operator_of_a_list_overwrites_its_own_copy():
    # fftpack converts a list to a new array and lets the routine transform it in place
    check(lambda x: np.sum(scipy.fftpack.diff([x[0], 2.0 * x[1], x[2], x[3] ** 2]) ** 2),
          X16[:4].copy())


def test_fftpack_convolve_in_place_and_a_differentiated_kernel():
    from scipy.fftpack import convolve
    omega = convolve.init_convolution_kernel(8, lambda k: float(k), d=1)

    def in_place(x):
        y = 1.0 * x
        z = convolve.convolve(y, omega, swap_real_imag=1, overwrite_x=True)
        return np.sum(y * np.arange(8.0)) + np.sum(z ** 2)

    check(in_place, X16[:8].copy())
    with pytest.raises(UnsupportedOperationError, match="differentiated kernel.*constant"):
        mutad.gradient(lambda w: convolve.convolve(X16[:8], w).sum(), omega.copy())


# ----------------------------------------------------------------------------------------------
# scipy.signal.cspline1d and qspline1d: SciPy's Python code, followed, joins its pieces with
# ``np.r_`` read from the numpy module (not a name bound at import), which converted them


@pytest.mark.parametrize("spline", [scipy.signal.cspline1d, scipy.signal.qspline1d])
@pytest.mark.parametrize("size", [1, 2, 9])
def test_spline_coefficients(spline, size):
    x = X16[:size].copy()
    check(lambda x: np.sum(spline(x) * np.arange(1.0, size + 1)) + np.sum(spline(x ** 2) ** 2), x)


def test_smoothing_spline_coefficients():
    check(lambda x: np.sum(scipy.signal.cspline1d(x, 0.5) ** 2), X16[:9].copy())


@pytest.mark.parametrize("fit, evaluate", [
    (scipy.signal.cspline1d, scipy.signal.cspline1d_eval),
    (scipy.signal.qspline1d, scipy.signal.qspline1d_eval)])
def test_spline_fit_then_evaluation(fit, evaluate):
    # SciPy's documented use: the coefficients, then their spline at new points (some outside,
    # mirrored), in the coefficients; the points' derivative is refused
    points = np.array([-0.7, 0.5, 1.25, 3.9, 8.6, 9.4])
    check(lambda x: np.sum(evaluate(fit(x), points, dx=1.1, x0=0.2) ** 2), X16[:9].copy())
    with pytest.raises(UnsupportedOperationError, match="differentiated points.*constants"):
        mutad.gradient(lambda p: evaluate(X16[:9], p).sum(), points.copy())
