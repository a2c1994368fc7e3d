"""Jacobians beside infinities and NaNs: reverse (jacrev) and forward (jacfwd) mode agree with
each other and with the exact Jacobian of what SciPy computes, a zero tangent or cotangent
contributing zero beside an infinite operand (``mutad.engines.products.times``); the caller's
data bit for bit unchanged."""

import numpy as np
import pytest
import scipy.signal
import scipy.special

import mutad


def _jacobians(f, x):
    """jacrev and jacfwd of ``f`` at ``x``, after checking neither changed ``x``."""
    before = x.copy()
    with np.errstate(all="ignore"):
        reverse, forward = mutad.jacrev(f)(x), mutad.jacfwd(f)(x)
    assert x.tobytes() == before.tobytes()
    return reverse, forward


def _toeplitz(c, n):
    """The Jacobian of the full convolution of an ``n``-vector with the constant ``c``:
    J[i, j] = c[i - j] where 0 <= i - j < len(c), else 0."""
    J = np.zeros((n + len(c) - 1, n))
    for j in range(n):
        J[j:j + len(c), j] = c
    return J


C = np.array([1.0, np.inf, 3.0, 0.5])
X = np.array([1.0, np.inf, 0.5, 0.0])
WINDOWS = {"full": slice(0, 7), "same": slice(1, 5), "valid": slice(3, 4)}


@pytest.mark.parametrize("mode", sorted(WINDOWS))
@pytest.mark.parametrize("method", ["direct", "auto"])
def test_convolve_with_an_infinite_kernel_is_its_toeplitz_matrix(mode, method):
    # (auto chooses the direct method for these sizes)
    reverse, forward = _jacobians(lambda x: scipy.signal.convolve(x, C, mode, method), X)
    exact = _toeplitz(C, 4)[WINDOWS[mode]]
    np.testing.assert_array_equal(reverse, exact)
    np.testing.assert_array_equal(forward, exact)


@pytest.mark.parametrize("mode", sorted(WINDOWS))
def test_correlate_with_an_infinite_kernel_is_its_reversed_toeplitz_matrix(mode):
    reverse, forward = _jacobians(lambda x: scipy.signal.correlate(x, C, mode, "direct"), X)
    exact = _toeplitz(C[::-1], 4)[WINDOWS[mode]]
    np.testing.assert_array_equal(reverse, exact)
    np.testing.assert_array_equal(forward, exact)


@pytest.mark.parametrize("function", [scipy.signal.convolve, scipy.signal.correlate])
@pytest.mark.parametrize("mode", sorted(WINDOWS))
def test_convolution_in_the_kernel_beside_an_infinite_signal(function, mode):
    # d/dc of x * c: the Toeplitz matrix of x, its infinity in its own entries only
    reverse, forward = _jacobians(lambda c: function(X, c, mode, "direct"), C[:3].copy())
    np.testing.assert_array_equal(reverse, forward)
    assert not np.isnan(reverse).any()
    if function is scipy.signal.convolve and mode == "full":
        np.testing.assert_array_equal(reverse, _toeplitz(X, 3))


@pytest.mark.parametrize("function", [scipy.signal.convolve, scipy.signal.correlate])
@pytest.mark.parametrize("mode", sorted(WINDOWS))
def test_convolution_with_a_traced_kernel_agrees_between_modes(function, mode):
    reverse, forward = _jacobians(lambda x: function(x, x[::-1] * 2.0, mode, "direct"), X)
    np.testing.assert_array_equal(reverse, forward)


@pytest.mark.parametrize("function", [
    lambda x, c, mode: scipy.signal.convolve(x, c, mode, "fft"),
    lambda x, c, mode: scipy.signal.correlate(x, c, mode, "fft"),
    lambda x, c, mode: scipy.signal.fftconvolve(x, c, mode),
    lambda x, c, mode: scipy.signal.oaconvolve(x, c, mode)])
@pytest.mark.parametrize("mode", sorted(WINDOWS))
@pytest.mark.filterwarnings("ignore:Use of fft convolution:RuntimeWarning")
def test_fft_convolution_of_an_infinite_kernel_is_nan_in_both_modes(function, mode):
    # SciPy's FFT spreads the kernel's infinity over every output (its value NaN there): the
    # derivative of that is NaN, the same in both modes
    reverse, forward = _jacobians(lambda x: function(x, C, mode), X)
    assert np.isnan(reverse).all() and np.isnan(forward).all()


def test_fft_convolution_along_an_axis_is_nan_in_the_infinite_rows_only():
    c = np.array([[1.0, 2.0, 3.0, 0.5], [1.0, np.inf, 3.0, 0.5]])
    x = np.array([[1.0, 2.0, 0.5, 0.0], [1.0, 2.0, 0.5, 0.0]])
    reverse, forward = _jacobians(
        lambda x: scipy.signal.fftconvolve(x, c, axes=1).ravel(), x)
    reverse, forward = reverse.reshape(2, 7, 2, 4), forward.reshape(2, 7, 2, 4)
    for J in (reverse, forward):
        np.testing.assert_allclose(J[0, :, 0], _toeplitz(c[0], 4), atol=1e-15)
        assert (J[0, :, 1] == 0).all() and (J[1, :, 0] == 0).all()
        assert np.isnan(J[1, :, 1]).all()


def test_log_softmax_beside_infinities_agrees_between_modes():
    # SciPy's value is x - log Σ e^x, with the max left out where infinite: [nan, -inf, -inf,
    # -inf]; its Jacobian δ_ij - w_j, the weights w = e^x / Σ e^x = [nan, 0, 0, 0]
    x = np.array([np.inf, -np.inf, 1.0, 0.0])
    reverse, forward = _jacobians(scipy.special.log_softmax, x)
    exact = np.eye(4)
    exact[:, 0] = np.nan
    np.testing.assert_array_equal(reverse, exact)
    np.testing.assert_array_equal(forward, exact)


def test_log_softmax_along_an_axis_beside_infinities():
    x = np.array([[np.inf, -np.inf, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    reverse, forward = _jacobians(
        lambda x: scipy.special.log_softmax(x, axis=1).ravel(), x)
    np.testing.assert_array_equal(reverse, forward)
    J = reverse.reshape(2, 4, 2, 4)
    assert np.isnan(J[0, :, 0, 0]).all() and (J[0, :, 1] == 0).all() and (J[1, :, 0] == 0).all()
    w = scipy.special.softmax(x[1])
    np.testing.assert_allclose(J[1, :, 1], np.eye(4) - w, rtol=1e-15, atol=1e-16)
