"""scipy.signal's correlate, convolve2d, correlate2d, sosfilt, filtfilt, lfilter_zi,
savgol_filter, the spectral functions (welch, periodogram, csd, coherence, stft, istft,
spectrogram, ShortTimeFFT's methods), detrend, hilbert, sosfiltfilt, resampling (resample,
resample_poly, upfirdn, decimate), medfilt, order_filter, oaconvolve, freqz and firwin, by SciPy's names and
mutad.scipy.signal's: values bit for bit SciPy's, gradients against finite differences under
both policies, forward mode and second order, every mode and boundary.
(lfilter, convolve and fftconvolve are tested in test_scipy.py.)"""

import numpy as np
import pytest
import scipy.signal
from scipy.signal import convolve2d

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import signal

from cases import replays_as_traced

SOS = scipy.signal.butter(4, 0.2, output="sos")
B, A = scipy.signal.butter(3, 0.3)
WAVE = np.sin(np.arange(14.0))  # a signal made before the differentiation: a constant


def weighted(y):
    """A loss giving each output element its own cotangent."""
    return (y * np.sqrt(np.arange(1.0, y.size + 1)).reshape(np.shape(y))).sum() + (y * y).sum()


def _scipys_values_differentiated(run, p):
    """``run(p)`` (four parameters) SciPy's values bit for bit under forward mode, and the
    weighted loss of it differentiated in both modes and replayed as traced."""
    expected = run(p)
    y, _ = mutad.jvp(run, (p,), (np.ones(4),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda p: weighted(run(p))  # noqa: E731
    assert mutad.value_and_grad(f)(p)[0] == f(p)
    mutad.check_grads(f, p)
    mutad.check_jvp(f, p)
    replays_as_traced(f, [(p * scale,) for scale in (1.0, 1.1, 0.9)])


def sections(p):
    """Second-order sections from their free coefficients (SciPy requires each a[0] to be 1)."""
    return np.concatenate([p[:, :3], np.ones((len(p), 1)), p[:, 3:]], axis=1)


FREE = np.delete(SOS, 3, axis=1)


def parts(z):
    """A complex result as its real and imaginary parts, stacked (a real value for the loss)."""
    return np.stack([np.real(z), np.imag(z)])


def frequency_response(w_h):
    """freqz's frequencies and its response's parts, in one real array."""
    w, h = w_h
    return np.concatenate([w, parts(h).ravel()])


def demeaned(d):
    """A detrend function of the user's: the segment less its mean."""
    return d - d.mean(axis=-1, keepdims=True)

# name: (call of the module f on the arguments, the arguments)
CASES = {
    **{f"correlate-{mode}-{method}": (
        lambda f, a, k, mode=mode, method=method: f.correlate(a, k, mode=mode, method=method),
        ((5, 4), (3, 2))) for mode in ("full", "same", "valid")
       for method in ("direct", "fft", "auto")},
    "correlate-1d-longer-second": (lambda f, a, k: f.correlate(a, k, "valid"), ((5,), (7,))),
    "correlate-same-1d": (lambda f, a, k: f.correlate(a, k, "same"), ((6,), (3,))),
    **{f"{name}-{mode}-{boundary}": (
        lambda f, a, k, c, name=name, mode=mode, boundary=boundary: getattr(f, name)(
            a, k, mode=mode, boundary=boundary, fillvalue=c), ((5, 4), (3, 2), ()))
       for name in ("convolve2d", "correlate2d") for mode in ("full", "same", "valid")
       for boundary in ("fill", "wrap", "symm")},
    "convolve2d-valid-larger-kernel": (lambda f, a, k: f.convolve2d(a, k, "valid"),
                                       ((2, 2), (4, 3))),
    "correlate2d-valid-larger-kernel": (lambda f, a, k: f.correlate2d(a, k, "valid"),
                                        ((2, 2), (4, 3))),
    "sosfilt": (lambda f, p, x: f.sosfilt(sections(p), x), (FREE, (12,))),
    "sosfilt-zi-axis0": (lambda f, p, x, zi: weighted(f.sosfilt(sections(p), x, 0, zi)[0])
                         + weighted(f.sosfilt(sections(p), x, axis=0, zi=zi)[1]),
                         (FREE[:2], (9, 3), (2, 2, 3))),
    # one section as a 1-d array of six (SciPy's atleast_2d; symiirorder2 passes one)
    "sosfilt-1d-section-zi": (lambda f, p, x, zi: weighted(f.sosfilt(sections(p)[0], x, zi=zi)[0])
                              + weighted(f.sosfilt(sections(p)[0], x, zi=zi)[1]),
                              (FREE[:1], (12,), (1, 2))),
    "filtfilt": (lambda f, x: f.filtfilt(B, A, x), ((30,),)),
    "filtfilt-coefficients": (lambda f, b, a, x: f.filtfilt(b, a, x, padtype="even", padlen=5),
                              (B, A * 2.0, (30,))),
    "filtfilt-axis0-constant": (lambda f, x: f.filtfilt(B, A, x, axis=0, padtype="constant"),
                                ((15, 2),)),
    "filtfilt-no-padding": (lambda f, x: f.filtfilt(B, A, x, padtype=None), ((12,),)),
    "lfilter_zi": (lambda f, b, a: f.lfilter_zi(b, a), (B, A * 2.0)),
    "lfilter_zi-longer-b": (lambda f, b: f.lfilter_zi(b, A), ((5,),)),
    **{f"savgol-{mode}": (lambda f, x, mode=mode: f.savgol_filter(x, 5, 2, mode=mode, cval=0.3),
                          ((11,),))
       for mode in ("interp", "mirror", "constant", "nearest", "wrap")},
    "savgol-interp-axis0-deriv": (lambda f, x: f.savgol_filter(x, 7, 3, deriv=1, delta=0.5,
                                                               axis=0), ((9, 3),)),
    # a differentiated spacing, of a differentiated signal and of a constant one
    "savgol-interp-spacing-axis0": (lambda f, x, d: f.savgol_filter(x, 7, 3, deriv=2,
                                                                   delta=0.5 + d, axis=0),
                                    ((9, 3), ())),
    "savgol-interp-spacing-of-constant": (
        lambda f, d: f.savgol_filter(np.sin(np.arange(11.0)), 5, 2, deriv=1, delta=d), ((),)),
    # spectral analysis
    "welch": (lambda f, x: f.welch(x, nperseg=16)[1], ((64,),)),
    "welch-linear-spectrum-median": (
        lambda f, x: f.welch(x, nperseg=8, detrend="linear", scaling="spectrum",
                             average="median")[1], ((40,),)),
    "welch-callable-twosided-axis0": (
        lambda f, x: f.welch(x, nperseg=8, noverlap=2, detrend=demeaned, return_onesided=False,
                             axis=0)[1], ((30, 2),)),
    "welch-no-detrend-nfft-window": (
        lambda f, x: f.welch(x, window=np.hanning(12), nfft=15, detrend=False)[1], ((50,),)),
    "periodogram": (lambda f, x: f.periodogram(x)[1], ((32,),)),
    "periodogram-short-nfft-spectrum": (
        lambda f, x: f.periodogram(x, window="hann", nfft=20, scaling="spectrum",
                                   axis=0)[1], ((25, 2),)),
    "csd": (lambda f, x, y: parts(f.csd(x, y, nperseg=16)[1]), ((48,), (48,))),
    "csd-shorter-y-linear": (lambda f, x, y: parts(f.csd(x, y, nperseg=8, detrend="linear")[1]),
                             ((30,), (24,))),
    "coherence": (lambda f, x, y: f.coherence(x, y, nperseg=16)[1], ((64,), (64,))),
    "stft": (lambda f, x: parts(f.stft(x, nperseg=16)[2]), ((50,),)),
    "stft-linear-psd-axis0-even": (
        lambda f, x: parts(f.stft(x, nperseg=8, noverlap=5, detrend="linear", scaling="psd",
                                  boundary="even", axis=0)[2]), ((27, 2),)),
    "stft-twosided-unpadded": (
        lambda f, x: parts(f.stft(x, nperseg=10, nfft=12, return_onesided=False, padded=False,
                                  boundary=None)[2]), ((33,),)),
    "spectrogram": (lambda f, x: f.spectrogram(x, nperseg=16)[2], ((60,),)),
    "spectrogram-complex-spectrum": (
        lambda f, x: parts(f.spectrogram(x, nperseg=12, scaling="spectrum", mode="complex",
                                         detrend=False)[2]), ((40,),)),
    "spectrogram-magnitude": (lambda f, x: f.spectrogram(x, nperseg=12, mode="magnitude")[2],
                              ((40,),)),
    "spectrogram-angle-axis0": (lambda f, x: f.spectrogram(x, nperseg=12, mode="angle",
                                                           axis=0)[2], ((40, 2),)),
    "istft": (lambda f, z: f.istft(z[0] + 1j * z[1], nperseg=16)[1], ((2, 9, 6),)),
    "istft-axes-twosided-psd": (
        lambda f, z: parts(f.istft(z[0] + 1j * z[1], nperseg=8, input_onesided=False,
                                   time_axis=0, freq_axis=1, scaling="psd")[1]), ((2, 7, 8),)),
    "stft-istft": (lambda f, x: f.istft(f.stft(x, nperseg=16)[2], nperseg=16)[1], ((40,),)),
    # filters and resampling
    "detrend": (lambda f, x: f.detrend(x), ((20,),)),
    "detrend-breakpoints-axis0": (lambda f, x: f.detrend(x, axis=0, bp=[4, 11]), ((16, 3),)),
    "detrend-constant": (lambda f, x: f.detrend(x, type="constant"), ((4, 9),)),
    "hilbert": (lambda f, x: parts(f.hilbert(x)), ((16,),)),
    "hilbert-odd-N-axis0": (lambda f, x: parts(f.hilbert(x, N=9, axis=0)), ((8, 2),)),
    "sosfiltfilt": (lambda f, x: f.sosfiltfilt(SOS, x), ((40,),)),
    "sosfiltfilt-sections-even-axis0": (
        lambda f, p, x: f.sosfiltfilt(sections(p), x, axis=0, padtype="even", padlen=6),
        (FREE, (20, 2))),
    "sosfilt_zi": (lambda f, p: f.sosfilt_zi(sections(p)), (FREE,)),
    "resample": (lambda f, x: f.resample(x, 25), ((16,),)),
    "resample-down-window-axis1": (lambda f, x: f.resample(x, 7, axis=1, window="hann"),
                                   ((2, 12),)),
    "resample-freq-domain": (lambda f, x: parts(f.resample(x, 12, domain="freq")), ((8,),)),
    "resample-time": (lambda f, x, t: f.resample(x, 11, t=t)[1], ((7,), (3,))),
    # settings differentiated where the signal or coefficients are constants: SciPy's in-place
    # steps write them into arrays made of constants
    "spectrogram-differentiated-fs": (lambda f, fs: f.spectrogram(WAVE, fs=2.0 + fs,
                                                                  nperseg=8)[2], ((),)),
    "firwin-differentiated-window": (lambda f, c: f.firwin(9, 0.3, window=("kaiser", 3.0 + c)),
                                     ((),)),
    "firwin-differentiated-width": (lambda f, c: f.firwin(11, 0.3, width=0.2 + c), ((),)),
    "freqz-differentiated-gain": (lambda f, c: parts(f.freqz(B, [2.0 + c], worN=6)[1]), ((),)),
    "resample-window-of-a-differentiated-beta": (
        lambda f, c: f.resample(WAVE, 9, window=("kaiser", 3.0 + c)), ((),)),
    "resample_poly": (lambda f, x: f.resample_poly(x, 3, 2), ((20,),)),
    "resample_poly-mean-axis1": (lambda f, x: f.resample_poly(x, 2, 5, axis=1, padtype="mean"),
                                 ((2, 23),)),
    "upfirdn": (lambda f, h, x: f.upfirdn(h, x, 2, 3), ((5,), (13,))),
    "upfirdn-axis0": (lambda f, h, x: f.upfirdn(h, x, 3, 1, axis=0), ((4,), (6, 2))),
    # every extension mode: SciPy's extension of the signal, then the zero extension's filter
    **{f"upfirdn-{mode}": (lambda f, h, x, mode=mode: f.upfirdn(h, x, 2, 3, mode=mode),
                           ((5,), (9,)))
       for mode in ("wrap", "edge", "smooth", "symmetric", "reflect", "antisymmetric",
                    "antireflect", "line")},
    "upfirdn-wrap-short-axis0": (lambda f, h, x: f.upfirdn(h, x, 1, 2, axis=0, mode="wrap"),
                                 ((9,), (3, 2))),
    "upfirdn-cval": (lambda f, h, x, c: f.upfirdn(h, x, 3, 2, mode="constant", cval=c),
                     ((4,), (7,), ())),
    "resample_poly-line-axis1": (lambda f, x: f.resample_poly(x, 3, 2, axis=1, padtype="line"),
                                 ((2, 12),)),
    # a differentiated cval that is 0 (c is 0.3): still differentiated
    "resample_poly-cval-zero": (lambda f, x, c: f.resample_poly(x, 2, 3, padtype="constant",
                                                                cval=c - 0.3), ((14,), ())),
    "decimate": (lambda f, x: f.decimate(x, 3), ((60,),)),
    "decimate-fir": (lambda f, x: f.decimate(x, 2, ftype="fir"), ((50,),)),
    "decimate-fir-causal-axis0": (lambda f, x: f.decimate(x, 2, n=6, ftype="fir",
                                                          zero_phase=False, axis=0), ((15, 2),)),
    "decimate-iir-causal": (lambda f, x: f.decimate(x, 2, zero_phase=False), ((30,),)),
    "medfilt": (lambda f, x: f.medfilt(x, 5), ((17,),)),
    "medfilt-2d": (lambda f, x: f.medfilt(x, [3, 1]), ((6, 5),)),
    "medfilt2d": (lambda f, x: f.medfilt2d(x), ((6, 5),)),
    "medfilt2d-5x3": (lambda f, x: f.medfilt2d(x, [5, 3]), ((7, 6),)),
    "order_filter": (lambda f, x: f.order_filter(x, np.ones(3), 0), ((17,),)),
    "order_filter-cross": (lambda f, x: f.order_filter(
        x, np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]]), 3), ((6, 5),)),
    "wiener": (lambda f, x: f.wiener(x), ((6, 5),)),
    "wiener-1d-noise": (lambda f, x: f.wiener(x, 5, noise=0.1), ((17,),)),
    "oaconvolve": (lambda f, a, k: f.oaconvolve(a, k), ((60,), (5,))),
    "oaconvolve-same-axes": (lambda f, a, k: f.oaconvolve(a, k, "same", axes=0),
                             ((50, 2), (4, 2))),
    "firwin": (lambda f, c: f.firwin(11, 0.2 + 0.05 * np.tanh(c)), ((),)),
    "firwin-bandpass-kaiser": (
        lambda f, c: f.firwin(12, np.array([0.1, 0.3]) * (1.0 + 0.1 * np.tanh(c)), width=0.2,
                              pass_zero="bandpass", fs=1.0), ((2,),)),
    "firwin-highpass-unscaled": (
        lambda f, c: f.firwin(9, 0.3 + 0.05 * np.tanh(c), pass_zero=False, scale=False),
        ((),)),
    "freqz": (lambda f, b, a: parts(f.freqz(b, a, worN=12)[1]), (B, A)),
    "freqz-fir-whole": (lambda f, b: parts(f.freqz(b, worN=10, whole=True)[1]), ((5,),)),
    "freqz-frequencies": (lambda f, b, a: parts(f.freqz(b, a, worN=np.linspace(0, 3, 7),
                                                        fs=6.0)[1]), (B, A)),
    # differentiated frequencies and sampling frequency
    "freqz-frequencies-and-fs": (lambda f, b, w, fs: frequency_response(
        f.freqz(b, A, worN=w + np.arange(4.0), fs=6.0 + fs)), (B, (4,), ())),
    "freqz-fs-of-a-grid": (lambda f, b, fs: frequency_response(f.freqz(b, A, worN=6,
                                                                       fs=6.0 + fs)),
                           (B, ())),
}


def arguments(shapes, rng):
    return tuple(s if isinstance(s, np.ndarray) else rng.normal(size=s) if s else 0.3
                 for s in shapes)


@pytest.mark.parametrize("name", CASES)
def test_values_are_scipys_own(name, rng):
    call, shapes = CASES[name]
    args = arguments(shapes, rng)
    for f in (scipy.signal, signal):
        y, _ = mutad.jvp(lambda *args: call(f, *args), args,
                         tuple(np.ones_like(a) for a in args))
        expected = call(scipy.signal, *args)
        assert np.asarray(y).tobytes() == np.asarray(expected).tobytes()


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_gradients(name, policy, rng):
    call, shapes = CASES[name]
    mutad.check_grads(lambda *args: weighted(call(scipy.signal, *args)),
                      *arguments(shapes, rng), policy=policy)


@pytest.mark.parametrize("name", CASES)
def test_forward_mode_and_second_order(name, rng):
    call, shapes = CASES[name]
    args = arguments(shapes, rng)
    mutad.check_jvp(lambda *args: weighted(call(signal, *args)), *args)
    mutad.check_grads(lambda *args: weighted(call(signal, *args)), *args, order=2)


def gray_scott(U, V, steps=3, dt=0.5, F=0.04, k=0.06):
    """Gray–Scott reaction–diffusion: a periodic 5-point Laplacian, in-place updates."""
    lap = np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])
    U, V = U.copy(), V.copy()
    for _ in range(steps):
        LU = convolve2d(U, lap, mode="same", boundary="wrap")
        LV = scipy.signal.convolve2d(V, lap, mode="same", boundary="wrap")
        UVV = U * V * V
        U += dt * (0.16 * LU - UVV + F * (1.0 - U))
        V += dt * (0.08 * LV + UVV - (F + k) * V)
    return (V * V).sum() + U.sum()


def test_gray_scott_reaction_diffusion(rng):
    U, V = 1.0 - 0.1 * rng.random((6, 7)), 0.25 * rng.random((6, 7))
    value, _ = mutad.value_and_gradient(gray_scott, U, V)
    assert value == gray_scott(U, V)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(gray_scott, U, V, policy=policy)
    mutad.check_jvp(gray_scott, U, V)
    mutad.check_grads(lambda U, V: gray_scott(U, V, steps=1), U[:4, :4], V[:4, :4], order=2)


B3, A3 = scipy.signal.cheby1(3, 1, 0.25)
SIGNAL = np.sin(np.linspace(0, 6, 40)) + 0.3 * np.random.default_rng(3).standard_normal(40)


@pytest.mark.parametrize("f, x", [
    (lambda x: scipy.signal.filtfilt(B, A, x, method="gust"), SIGNAL),
    (lambda x: scipy.signal.filtfilt(B, A, x, method="gust", irlen=8), SIGNAL),
    (lambda x: scipy.signal.filtfilt(B3, A3, x.reshape(4, 10), method="gust", axis=0), SIGNAL),
    (lambda x: scipy.signal.filtfilt(B3, A3, x.reshape(4, 10), method="gust", irlen=3),
     SIGNAL),
    (lambda c: scipy.signal.filtfilt(B * c[0], A + np.r_[0.0, c[1] * 0.01, 0.0, 0.0], SIGNAL,
                                     method="gust"), np.array([1.0, 0.5])),
    (lambda x: scipy.signal.filtfilt([0.5], [2.0], x, method="gust"), SIGNAL),
], ids=["signal", "irlen", "axis_0", "rows_irlen", "coefficients", "order_0"])
def test_filtfilt_gust(f, x):
    """Gustafsson's initial conditions (method='gust'): SciPy's values bit for bit, in the
    signal and the coefficients, whole (m = n) and with irlen's blocks."""
    before = x.tobytes()
    y, _ = mutad.pullback(f, x)
    assert y.tobytes() == f(x.copy()).tobytes()

    def loss(x):
        y = f(x)
        return np.sum(y ** 2 * np.arange(y.size).reshape(y.shape))

    mutad.check_grads(loss, x)
    mutad.check_jvp(loss, x)
    replays_as_traced(loss, [(x,), (x * 1.1,)])
    assert x.tobytes() == before


def test_refusals(rng):
    x = rng.normal(size=30)
    with pytest.raises(UnsupportedOperationError, match="even window_length"):
        mutad.gradient(lambda x: scipy.signal.savgol_filter(x, 6, 2).sum(), x)


def test_a_zero_order_filter_has_no_steady_state_as_in_scipy(rng):
    # SciPy's lfilter_zi of a one-coefficient filter raises (its companion matrix has no
    # rows); an empty steady state would let filtfilt of it compute where SciPy's raises.
    x = rng.normal(size=10)
    for loss in (lambda x: (scipy.signal.lfilter_zi(np.array([2.0]), [1.0]) * x[0]).sum(),
                 lambda x: scipy.signal.lfilter_zi(x[:1], [1.0]).sum(),
                 lambda x: scipy.signal.filtfilt(x[:1], [1.0], x).sum()):
        with pytest.raises(ValueError, match="at least 2"):
            loss(x)
        with pytest.raises(ValueError, match="at least 2"):
            mutad.gradient(loss, x)


def test_plain_calls_are_scipys_own(rng):
    for call, shapes in CASES.values():
        args = arguments(shapes, rng)
        assert (np.asarray(call(signal, *args)).tobytes()
                == np.asarray(call(scipy.signal, *args)).tobytes())


def test_a_filter_designed_in_the_function_applies_twice():
    """The sections SciPy designs are a plain array a record reads (kept read-only while the
    differentiation runs); SciPy's compiled sosfilt takes a writable buffer, even to read."""
    def f(x):
        sos = scipy.signal.butter(2, 0.3, output="sos")
        return ((scipy.signal.sosfilt(sos, x) ** 2).sum()
                + (scipy.signal.sosfilt(sos, x[::-1]) ** 2).sum())

    x = np.linspace(0.0, 1.0, 8)
    before = x.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)
    assert x.tobytes() == before


def test_short_time_fft_methods(rng):
    """ShortTimeFFT's stft, spectrogram and istft with traced arrays: SciPy's values, and their
    derivatives under both policies, in forward mode and to second order."""
    SFT = scipy.signal.ShortTimeFFT(scipy.signal.windows.hann(16, sym=False), 4, fs=2.0)
    cross = scipy.signal.ShortTimeFFT(np.hanning(8), 3, fs=1.0, fft_mode="centered",
                                      scale_to="psd")
    x, y = rng.normal(size=40), rng.normal(size=40)
    calls = [lambda x: parts(SFT.stft(x)),
             lambda x: SFT.spectrogram(x, detr="linear"),
             lambda x: SFT.istft(SFT.stft(x), k1=40),
             lambda x: parts(cross.spectrogram(x, y, p0=1, p1=8, padding="even")),
             lambda x: parts(cross.istft(cross.stft_detrend(x, "constant"), k1=40))]
    for call in calls:
        values = []

        def loss(x, call=call):
            y = call(x)
            values.append(mutad.stop_gradient(y).copy())
            return weighted(y)

        mutad.value_and_gradient(loss, x)
        assert values[0].tobytes() == np.asarray(call(x)).tobytes()
        for policy in ("restore", "checkpoint"):
            mutad.check_grads(lambda x: weighted(call(x)), x, policy=policy)
        mutad.check_jvp(lambda x: weighted(call(x)), x)
        mutad.check_grads(lambda x: weighted(call(x)), x, order=2)


@pytest.mark.parametrize("name,call", [
    ("welch", lambda f, z: f.welch(z, nperseg=8)[1]),
    ("csd", lambda f, z: parts(f.csd(z, z[::-1] * 0.5, nperseg=8)[1])),
    ("stft", lambda f, z: parts(f.stft(z, nperseg=8, return_onesided=False)[2])),
    ("istft", lambda f, z: parts(f.istft(f.stft(z, nperseg=8, return_onesided=False)[2],
                                         nperseg=8, input_onesided=False)[1])),
])
def test_complex_signals(name, call, rng):
    """Complex signals, which SciPy transforms two-sided."""
    z = rng.normal(size=24) + 1j * rng.normal(size=24)
    y, _ = mutad.jvp(lambda z: call(scipy.signal, z), (z,), (np.ones_like(z),))
    assert np.asarray(y).tobytes() == np.asarray(call(scipy.signal, z)).tobytes()
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(lambda z: weighted(call(scipy.signal, z)), z, policy=policy)
    mutad.check_jvp(lambda z: weighted(call(signal, z)), z)
    mutad.check_grads(lambda z: weighted(call(signal, z)), z, order=2)


def test_the_callers_arrays_come_back(rng):
    """detrend(overwrite_data=True) writes into x, as SciPy's (what follows reads the detrended
    x), and x comes back; the windows of the spectral functions are read, never written."""
    x, window = rng.normal(size=(32, 2)), np.hanning(8)
    before = x.tobytes(), window.tobytes()

    def f(x):
        return ((scipy.signal.detrend(x, axis=0, overwrite_data=True) ** 2).sum()
                + scipy.signal.welch(x, window=window, axis=0)[1].sum()
                + (scipy.signal.hilbert(x, axis=0).imag ** 2).sum())

    value, _ = mutad.value_and_gradient(f, x)
    assert (x.tobytes(), window.tobytes()) == before
    assert value == f(x.copy())


def test_replayed_gradients_are_the_traced_ones(rng):
    """A recording of spectral analysis and resampling, replayed on other signals, gives the
    traced gradients bit for bit."""
    def f(x):
        _, p = scipy.signal.welch(x, nperseg=16, detrend="linear")
        smooth = scipy.signal.sosfiltfilt(SOS, scipy.signal.resample_poly(x, 2, 3))
        _, _, z = scipy.signal.stft(x, nperseg=16)
        _, back = scipy.signal.istft(z * np.hanning(9)[:, None], nperseg=16)
        return (np.log(p).sum() + (smooth ** 2).sum() + np.abs(scipy.signal.hilbert(x)).sum()
                + (scipy.signal.medfilt(x, 5) ** 2).sum() + (back ** 2).sum()
                + (scipy.signal.decimate(x, 2, ftype="fir") ** 2).sum())

    replayed = mutad.value_and_grad(f, replay=True)
    replayed(rng.normal(size=64))
    for _ in range(3):
        x = rng.normal(size=64)
        got, expected = replayed(x.copy()), mutad.value_and_grad(f)(x.copy())
        assert got[0] == expected[0] and got[1].tobytes() == expected[1].tobytes()
    assert not replayed.reasons  # replayed, not traced again


def test_a_differentiated_spacing_is_traced_again_not_replayed():
    """savgol_filter(mode='interp') of a differentiated delta runs SciPy's fit at delta's
    plain value: a replay would keep the recorded one, so each call is traced (SciPy's bits
    at every spacing), and says why."""
    x = np.sin(np.arange(30.0))

    def f(delta):
        return (scipy.signal.savgol_filter(x, 7, 2, deriv=1, delta=delta) ** 2).sum()

    replaying = replays_as_traced(f, [(0.5,), (0.7,), (1.3,)])
    assert "spacing's plain value" in str(replaying.reasons)


def test_signals_given_as_lists(rng):
    """A list holding traced values is the array NumPy makes of it, as SciPy's np.asarray does."""
    x = rng.normal(size=8)

    def f(x):
        signal_list = [x[0], 2.0 * x[1], 1.0, *x[2:]] * 3
        return ((scipy.signal.detrend(signal_list) ** 2).sum()
                + scipy.signal.periodogram(signal_list)[1].sum()
                + np.abs(scipy.signal.stft(signal_list, nperseg=8)[2]).sum()
                + (scipy.signal.resample(signal_list, 20) ** 2).sum())

    value, _ = mutad.value_and_gradient(f, x)
    assert value == f(x)
    mutad.check_grads(f, x)


def test_more_refusals(rng):
    x = rng.normal(size=30)
    with pytest.raises(ValueError, match="padtype must be one of"):  # SciPy's own
        mutad.gradient(lambda x: scipy.signal.resample_poly(x, 2, 3, padtype="odd").sum(), x)
    with pytest.raises(UnsupportedOperationError, match="dlti"):
        system = scipy.signal.dlti(*scipy.signal.butter(2, 0.3))
        mutad.gradient(lambda x: scipy.signal.decimate(x, 2, ftype=system).sum(), x)


def test_a_short_time_fft_of_a_window_made_in_the_function():
    """SciPy's ShortTimeFFT locks its window (setflags(write=False)): one the function made,
    which nothing has written, may be locked; a write into it then fails as NumPy's does."""
    def f(x):
        transform = scipy.signal.ShortTimeFFT(scipy.signal.windows.hann(16), hop=8, fs=1.0)
        return (np.abs(transform.stft(x)) ** 2).sum()

    x = np.sin(np.arange(64.0) * 0.3) + 0.1 * np.arange(64.0) / 64
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)

    def locked(x):
        w = np.zeros(3)
        w.setflags(write=False)
        with pytest.raises(ValueError, match="read-only"):
            w[0] = x[0]
        return x.sum()

    assert mutad.gradient(locked, np.ones(3))[0].tolist() == [1.0, 1.0, 1.0]


def test_find_peaks_of_a_differentiated_signal():
    """The peaks' positions are decisions on the values (taken again on each replayed call);
    their heights are the signal's values there, differentiated."""
    t = np.linspace(0.0, 6.0, 60)

    def f(a):
        y = np.sin(a[0] * t) * np.exp(-a[1] * t)
        peaks, properties = scipy.signal.find_peaks(y, height=0.1)
        spaced, _ = scipy.signal.find_peaks(y, distance=5)
        return (properties["peak_heights"] ** 2).sum() + y[spaced].sum() + len(peaks)

    a = np.array([2.0, 0.3])
    assert mutad.value_and_grad(f)(a)[0] == f(a)
    mutad.check_grads(f, a)
    mutad.check_jvp(f, a)
    replayed = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.3, 0.8, 1.7):  # the peaks move, and their number changes
        u, v = replayed(a * scale), mutad.value_and_grad(f)(a * scale)
        assert u[0] == v[0] and np.array_equal(u[1], v[1])
    with pytest.raises(UnsupportedOperationError, match="stop_gradient"):
        mutad.gradient(lambda a: scipy.signal.find_peaks(np.sin(a[0] * t), prominence=a[1])[0]
                       .sum() + a.sum(), a)


FIND_PEAKS_SETTINGS = {
    "prominence": dict(prominence=0.05),
    "width": dict(width=1.0, rel_height=0.7),
    "prominence, width, wlen": dict(prominence=(0.02, None), width=(1.0, 30.0), wlen=15),
    "threshold": dict(threshold=0.001),
    "every property": dict(height=-1.0, threshold=(0.0, None), distance=2, prominence=0.01,
                           width=0.5, plateau_size=1),
}


@pytest.mark.parametrize("name", FIND_PEAKS_SETTINGS)
def test_find_peaks_properties_of_a_differentiated_signal(name):
    """find_peaks' positions, bases and edges are SciPy's decisions on the values; its heights,
    thresholds, prominences and widths are SciPy's arithmetic there, differentiated."""
    settings = FIND_PEAKS_SETTINGS[name]
    t = np.linspace(0.0, 6.0, 60)

    def found(a):
        y = np.sin(a[0] * t) * np.exp(-a[1] * t) + a[2] * np.cos(5.0 * t)
        return scipy.signal.find_peaks(y, **settings)

    def f(a):
        peaks, properties = found(a)
        total = np.sum(np.sin(peaks * 1.0))
        for k, (key, value) in enumerate(sorted(properties.items())):
            total = total + np.sum(np.cos((k + 1.0) * value))
        return total

    a = np.array([2.0, 0.3, 0.2])
    copy = a.copy()
    (peaks, properties), _ = mutad.pullback(lambda a: found(a), copy)
    expected_peaks, expected = found(a)
    assert np.array_equal(peaks, expected_peaks) and properties.keys() == expected.keys()
    for key in expected:
        assert properties[key].dtype == expected[key].dtype
        assert properties[key].tobytes() == expected[key].tobytes(), key  # SciPy's, bitwise
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, copy, policy=policy)
    mutad.check_jvp(f, copy)
    assert np.array_equal(copy, a)  # the caller's array, bit for bit
    replayed = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.2, 0.9):  # the peaks, bases and crossings move
        u, v = replayed(a * scale), mutad.value_and_grad(f)(a * scale)
        assert u[0] == v[0] and np.array_equal(u[1], v[1])


@pytest.mark.parametrize("interp", [True, False])
def test_lsim_of_a_differentiated_state_space_system(interp):
    """SciPy's steps on (A, B, C, D): its values bit for bit, from a start at T[0] > 0 too."""
    times = np.linspace(0.0, 2.0, 21)

    def system(p):
        return (np.array([[0.0, 1.0], [-p[0], -p[1]]]), np.array([[0.0], [1.0]]),
                np.array([[1.0, 0.0]]), np.zeros((1, 1)))

    def f(p):
        _, y, x = scipy.signal.lsim(system(p), np.sin(times) * p[0], times + 0.25,
                                    X0=np.array([1.0, p[1]]), interp=interp)
        _, free, _ = scipy.signal.lsim(system(p), None, times)
        return (y ** 2).sum() + (x ** 2).sum() + (free ** 2).sum()

    p = np.array([2.0, 0.5])
    assert mutad.value_and_grad(f)(p)[0] == f(p)
    mutad.check_grads(f, p)
    mutad.check_jvp(f, p)


# ----------------------------------------------------------------------------------------------
# Linear time-invariant systems of differentiated coefficients

TIMES = np.linspace(0.0, 2.0, 21)


def _matrices(p):
    return (np.array([[0.0, 1.0], [-p[0], -p[1]]]), np.array([[0.0], [p[2]]]),
            np.array([[1.0, p[3]]]), np.array([[p[3] * 0.5]]))


# name: the system built from p = (a1, a0, b, c) by SciPy's classes, as user code builds it
SYSTEMS = {
    "lti-tf": lambda p: scipy.signal.lti([p[2], p[3]], [1.0, p[1], p[0]]),
    "TransferFunction-unnormalized": lambda p: scipy.signal.TransferFunction(
        np.array([p[2], p[3]]) * 2.0, [2.0, 2.0 * p[1], 2.0 * p[0]]),
    "lti-zpk-real": lambda p: scipy.signal.lti([-p[3]], [-p[0], -p[1]], p[2]),
    "ZerosPolesGain-conjugate-poles": lambda p: scipy.signal.ZerosPolesGain(
        [-p[3]], np.array([-p[1] + 1j * p[0], -p[1] - 1j * p[0]]), p[2]),
    "lti-ss": lambda p: scipy.signal.lti(*_matrices(p)),
    "StateSpace": lambda p: scipy.signal.StateSpace(*_matrices(p)),
    "StateSpace-of-tf": lambda p: scipy.signal.StateSpace(
        scipy.signal.lti([p[2], p[3]], [1.0, p[1], p[0]])),
    "TransferFunction-of-ss": lambda p: scipy.signal.TransferFunction(
        scipy.signal.lti(*_matrices(p))),
    "tuple-tf": lambda p: ([p[2], p[3]], [1.0, p[1], p[0]]),
    "tuple-zpk": lambda p: ([-p[3]], [-p[0], -p[1]], p[2]),
}
P = np.array([2.0, 0.7, 1.5, 0.3])


def _responses(system, p):
    """Every simulation of ``system``: lsim (both holds, from a later start and a state),
    step and impulse at given times, and output for the objects."""
    sys = system(p)
    outputs = [scipy.signal.lsim(sys, np.sin(TIMES) * p[0], TIMES)[1],
               scipy.signal.lsim(sys, np.cos(TIMES), TIMES + 0.5, interp=False)[1],
               scipy.signal.step(sys, T=TIMES)[1], scipy.signal.impulse(sys, T=TIMES)[1]]
    if not isinstance(sys, tuple):
        outputs.append(sys.output(np.cos(TIMES), TIMES)[1])
    return np.concatenate(outputs)


@pytest.mark.parametrize("name", SYSTEMS)
def test_lti_systems_of_differentiated_coefficients(name):
    """lsim, step, impulse and output of every kind of system built from differentiated
    coefficients: SciPy's values bit for bit, gradients in both modes, replays."""
    system = SYSTEMS[name]
    p = P.copy()
    expected = _responses(system, p)
    y, _ = mutad.jvp(lambda p: _responses(system, p), (p,), (np.ones(4),))
    assert np.asarray(y).tobytes() == expected.tobytes()

    def f(p):
        return weighted(_responses(system, p))

    assert mutad.value_and_grad(f)(p)[0] == f(p)
    mutad.check_grads(f, p)
    mutad.check_jvp(f, p)
    replays_as_traced(f, [(P * scale,) for scale in (1.0, 1.1, 0.9)])


def test_tf2ss_ss2tf_and_zpk2tf_of_differentiated_coefficients():
    """The conversions: SciPy's values bit for bit (ss2tf's from SciPy's own call), gradients
    in both modes and to second order, a repeated eigenvalue and two outputs included."""
    def conversions(p):
        A, B, C, D = scipy.signal.tf2ss([[p[2], p[3], 1.0], [0.0, 1.0, p[0]]], [1.0, p[1], p[0]])
        num, den = scipy.signal.ss2tf(A * p[3], B, C, D)
        repeated = np.array([[p[0], 1.0], [0.0, p[0]]])
        num2, den2 = scipy.signal.ss2tf(repeated, np.array([[0.0], [1.0]]),
                                        np.array([[1.0, p[1]], [p[2], 0.0]]), np.zeros((2, 1)))
        b, a = scipy.signal.zpk2tf([-p[0], p[1]], np.array([-1.0 + p[2] * 1j, -1.0 - p[2] * 1j]),
                                   p[3])
        ss = scipy.signal.zpk2ss([-p[0]], [-p[1], -p[2]], p[3])
        return np.concatenate([A.ravel(), B.ravel(), C.ravel(), D.ravel(), num.ravel(), den,
                               num2.ravel(), den2, b, a, *(m.ravel() for m in ss)])

    p = P.copy()
    expected = conversions(p)
    y, _ = mutad.jvp(conversions, (p,), (np.ones(4),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda p: weighted(conversions(p))  # noqa: E731
    assert mutad.value_and_grad(f)(p)[0] == f(p)
    mutad.check_grads(f, p, order=2)
    mutad.check_jvp(f, p)
    replays_as_traced(f, [(P * scale,) for scale in (1.0, 1.1, 0.9)])


@pytest.mark.parametrize("form", ["tuple-tf", "tuple-ss", "dlti-tf", "dlti-ss", "dlti-zpk",
                                  "times", "plain-system"])
def test_dlsim_of_differentiated_systems_inputs_and_states(form):
    """dlsim of discrete systems, tuples and dlti objects: SciPy's values bit for bit (the
    states too), gradients in both modes, replays."""
    steps = np.arange(12)
    A = lambda p: np.array([[0.5, p[0] * 0.1], [0.0, 0.3]])  # noqa: E731
    B, C = np.array([[0.0], [1.0]]), np.array([[1.0, 0.5]])

    def run(p):
        u = np.sin(steps * p[1])
        if form == "tuple-tf":
            return scipy.signal.dlsim(([p[2], 0.1], [1.0, -0.5 * p[3]], 0.1), u)[1].ravel()
        if form == "tuple-ss":
            _, y, x = scipy.signal.dlsim((A(p), B * p[2], C, np.zeros((1, 1)), 0.1), u,
                                         x0=np.array([p[3], 0.0]))
            return np.concatenate([y.ravel(), x.ravel()])
        if form == "dlti-tf":
            return scipy.signal.dlti([p[2]], [1.0, -0.4, p[3] * 0.1],
                                     dt=0.5).output(u, None)[1].ravel()
        if form == "dlti-ss":
            sys = scipy.signal.dlti(A(p), B, C, np.array([[p[3]]]), dt=0.1)
            _, y, x = scipy.signal.dlsim(sys, u)
            return np.concatenate([y.ravel(), x.ravel()])
        if form == "dlti-zpk":
            return scipy.signal.dlsim(scipy.signal.dlti([p[2] * 0.1], [0.5, p[3] * 0.3], 1.0,
                                                        dt=0.1), u)[1].ravel()
        if form == "times":
            return scipy.signal.dlsim(([p[2], 0.1], [1.0, -0.5 * p[3]], 0.25), u,
                                      t=steps * 0.3)[1].ravel()
        return scipy.signal.dlsim(scipy.signal.dlti([1.0], [1.0, -0.5], dt=0.1), u * p[0],
                                  x0=None)[1].ravel()

    p = np.array([1.5, 0.4, 1.2, 0.8])
    _scipys_values_differentiated(run, p)


def test_lti_refusals_name_what_to_do():
    """What mutad does not differentiate of a system is refused by name, never wrong."""
    p = P.copy()
    with pytest.raises(UnsupportedOperationError, match="Pass the times as T"):
        mutad.gradient(lambda p: scipy.signal.step(([1.0], [1.0, p[0], p[1]]))[1].sum(), p)
    with pytest.raises(UnsupportedOperationError, match="default frequencies"):  # (bode's w=)
        mutad.gradient(lambda p: scipy.signal.lti([1.0], [1.0, p[0], p[1]]).bode()[1].sum(), p)
    with pytest.raises(UnsupportedOperationError, match="poles"):
        mutad.gradient(lambda p: scipy.signal.lti([1.0], [1.0, p[0], p[1]]).poles.sum(), p)
    with pytest.raises(AttributeError, match="continuous-time"):
        mutad.gradient(lambda p: scipy.signal.lsim(
            scipy.signal.dlti([1.0], [1.0, p[0]], dt=0.1), np.ones(3), np.arange(3.0))[1].sum(),
            p)
    # A system of constants with a differentiated state: its default times are SciPy's.
    sys = scipy.signal.lti([1.0], [1.0, 1.0, 2.0])
    t, y = scipy.signal.step(sys, X0=np.array([0.0, 0.0]) + 0.5)
    f = lambda x0: weighted(scipy.signal.step(sys, X0=x0)[1])  # noqa: E731
    assert mutad.value_and_grad(f)(np.array([0.5, 0.5]))[0] == weighted(y)
    mutad.check_grads(f, np.array([0.5, 0.5]))
    # Differentiated times: SciPy's steps, the time step inside the exponential.
    g = lambda scale: weighted(scipy.signal.impulse(sys, T=TIMES * scale)[1])  # noqa: E731
    assert mutad.value_and_grad(g)(1.5)[0] == g(1.5)
    mutad.check_grads(g, 1.5)
    with pytest.raises(UnsupportedOperationError, match="frequencies"):
        mutad.gradient(lambda w: np.abs(scipy.signal.freqs([1.0], [1.0, 1.0, 2.0], worN=w)[1])
                       .sum(), np.array([0.5, 1.0]))


def test_isinstance_of_differentiated_systems():
    """A system of differentiated coefficients is an instance of SciPy's classes as SciPy's
    own would be."""
    def f(p):
        tf = scipy.signal.lti([1.0], [1.0, p[0]])
        ss = scipy.signal.dlti(np.array([[p[0]]]), [[1.0]], [[1.0]], [[0.0]], dt=0.1)
        assert isinstance(tf, scipy.signal.lti) and isinstance(tf, scipy.signal.TransferFunction)
        assert not isinstance(tf, scipy.signal.dlti) and not isinstance(tf, scipy.signal.StateSpace)
        assert isinstance(ss, scipy.signal.dlti) and isinstance(ss, scipy.signal.StateSpace)
        assert tf.dt is None and ss.dt == 0.1
        return tf.den.sum() + ss.A.sum()

    assert mutad.gradient(f, np.array([0.5]))[0].tolist() == [2.0]


@pytest.mark.parametrize("name", ["dstep", "dimpulse"])
def test_discrete_step_and_impulse_responses(name):
    """dstep and dimpulse of differentiated systems (and states): SciPy's values bit for bit,
    every input's response, gradients in both modes, replays."""
    def run(p):
        two_inputs = scipy.signal.dlti(np.array([[0.5, p[0] * 0.1], [0.0, 0.3]]),
                                       np.array([[0.0, p[1]], [1.0, 0.2]]),
                                       np.array([[1.0, p[2]]]), np.zeros((1, 2)), dt=0.2)
        t, (y0, y1) = getattr(scipy.signal, name)(two_inputs, n=9, x0=np.array([p[3], 0.0]))
        _, (y,) = getattr(scipy.signal, name)(([p[2]], [1.0, -0.5 * p[3]], 0.1), n=7)
        return np.concatenate([y0.ravel(), y1.ravel(), y.ravel()])

    p = np.array([1.5, 0.4, 1.2, 0.8])
    _scipys_values_differentiated(run, p)


def test_frequency_responses_of_differentiated_systems():
    """freqs, freqs_zpk and freqresp (of transfer functions, zeros and poles, and a (num, den)
    tuple) at given frequencies: SciPy's values bit for bit, gradients in both modes and to
    second order."""
    w = np.logspace(-1, 1, 7)

    def responses(p):
        _, h1 = scipy.signal.freqs([p[2], p[3]], [1.0, p[1], p[0]], worN=w)
        _, h2 = scipy.signal.freqs_zpk([-p[3]], np.array([-p[1] + 1j * p[0], -p[1] - 1j * p[0]]),
                                       p[2], worN=w)
        _, h3 = scipy.signal.freqresp(scipy.signal.lti([p[2]], [1.0, p[1], p[0]]), w=w)
        _, h4 = scipy.signal.lti([-p[0]], [-p[1], -p[2]], p[3]).freqresp(w=w)
        # a (num, den) tuple, which SciPy converts to zeros and poles (was refused)
        _, h5 = scipy.signal.freqresp(([p[2], p[3]], [1.0, p[1], p[0]]), w=w)
        h = np.concatenate([h1, h2, h3, h4, h5])
        return np.concatenate([np.real(h), np.imag(h)])

    p = P.copy()
    expected = responses(p)
    y, _ = mutad.jvp(responses, (p,), (np.ones(4),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda p: weighted(responses(p))  # noqa: E731
    assert mutad.value_and_grad(f)(p)[0] == f(p)
    mutad.check_grads(f, p, order=2)
    mutad.check_jvp(f, p)
    replays_as_traced(f, [(P * scale,) for scale in (1.0, 1.1, 0.9)])
    with pytest.raises(UnsupportedOperationError, match="worN"):
        mutad.gradient(lambda p: np.abs(scipy.signal.freqs([1.0], [1.0, p[0], p[1]])[1]).sum(),
                       p)
    zpk = lambda p: np.abs(scipy.signal.freqresp(  # noqa: E731
        ([-p[0]], [-p[1], -p[2]], p[3]), w=w)[1])
    y, _ = mutad.jvp(zpk, (p,), (np.ones(4),))
    assert np.asarray(y).tobytes() == zpk(p).tobytes()
    with pytest.raises(UnsupportedOperationError, match="to_tf"):
        mutad.gradient(lambda p: np.abs(scipy.signal.freqresp(scipy.signal.StateSpace(
            *_matrices(p)), w=w)[1]).sum(), p)


def test_bode_plots_of_differentiated_systems():
    """bode, dbode and dfreqresp (and a system's bode and freqresp) of systems made from
    differentiated coefficients stopped with a TypeError (SciPy's bode called lti on mutad's
    system): SciPy's magnitude and unwrapped phase of the responses, bit for bit,
    differentiated in both modes and replayed."""
    w = np.logspace(-1, 1, 7)
    wd = np.linspace(0.1, 3.0, 6)

    def responses(p):
        tf = scipy.signal.TransferFunction([p[2]], [1.0, p[1], p[0]])
        _, m1, ph1 = scipy.signal.bode(tf, w=w)
        _, m2, ph2 = tf.bode(w=w)
        _, m3, ph3 = scipy.signal.bode(scipy.signal.lti([-p[0]], [-p[1], -p[2]], p[3]), w=w)
        discrete = scipy.signal.dlti([p[2], 0.1], [1.0, -0.5 * p[3]], dt=0.1)
        w4, m4, ph4 = scipy.signal.dbode(discrete, w=wd)
        _, h5 = scipy.signal.dfreqresp(([p[2]], [1.0, -0.4 * p[1]], 0.2), w=wd)
        _, h6 = discrete.freqresp(w=wd)
        _, m7, ph7 = discrete.bode(w=wd)
        h = np.concatenate([h5, h6])
        return np.concatenate([m1, ph1, m2, ph2, m3, ph3, w4, m4, ph4, np.real(h), np.imag(h),
                               m7, ph7])

    _scipys_values_differentiated(responses, P.copy())


@pytest.mark.parametrize("method", ["zoh", "foh", "bilinear", "euler", "backward_diff",
                                    "gbt", "impulse"])
def test_cont2discrete_of_differentiated_systems(method):
    """cont2discrete of state spaces, transfer functions and systems (to_discrete), then
    simulated: SciPy's values bit for bit, gradients in both modes, replays."""
    alpha = 0.3 if method == "gbt" else None

    def run(p):
        A, B, C, D = _matrices(p)
        D = D * 0.0 if method == "impulse" else D
        ad, bd, cd, dd, dt = scipy.signal.cont2discrete((A, B, C, D), 0.1, method, alpha)
        num, den, _ = scipy.signal.cont2discrete(([p[2], p[3]], [1.0, p[1], p[0]]), 0.2,
                                                 method if method != "impulse" else "zoh",
                                                 alpha)
        sys = scipy.signal.lti(A, B, C, D).to_discrete(0.1, method, alpha)
        _, y = scipy.signal.dlsim(sys, np.sin(np.arange(8.0)))[:2]
        return np.concatenate([ad.ravel(), bd.ravel(), cd.ravel(), dd.ravel(), num.ravel(),
                               den.ravel(), y.ravel()])

    p = P.copy()
    _scipys_values_differentiated(run, p)


def test_settings_the_program_computes_are_read_as_scipy_reads_them():
    """Regression: a window array or a sampling frequency computed in the function (constants
    of the differentiation) reached SciPy's type checks as traced values (ValueError); a
    differentiated sampling frequency is refused by name."""
    x = np.arange(8.0)
    for f in (lambda x: scipy.signal.resample_poly(x, 2, 1, window=np.ones(5) / 5),
              lambda x: scipy.signal.firwin(8, 0.3, fs=2.0 * np.ones(1)[0]) * x):
        value, _ = mutad.pullback(f, x)
        assert value.tobytes() == f(x).tobytes()
        mutad.check_grads(f, x)
    with pytest.raises(UnsupportedOperationError, match="fs"):
        mutad.gradient(lambda s: scipy.signal.firwin(5, 0.3, fs=s).sum(), 2.0)


def test_sections_written_as_nested_lists_of_traced_numbers():
    """sosfilt([[1, 0.5, 0, 1, p, 0]], x) recursed without end: the dispatch unwraps a list one
    level deep only, and the rule called the wrapper again on the list it was given."""
    x = np.sin(np.arange(30.0))

    def f(p):
        return np.sum(scipy.signal.sosfilt([[1.0, 0.5, 0.0, 1.0, p[0], 0.0]], x) ** 2)

    p = np.array([-0.6])
    assert mutad.value_and_gradient(f, p)[0] == f(p)
    mutad.check_grads(f, p)
    mutad.check_jvp(f, p)


@pytest.mark.parametrize("f", [
    lambda p, x: np.sum(scipy.signal.filtfilt([1.0, p[0]], [1.0], x) ** 2),
    lambda p, x: np.sum(np.abs(scipy.signal.freqz([1.0, p[0]], [1.0], worN=8)[1]) ** 2),
    lambda p, x: np.sum(scipy.signal.sosfiltfilt([[1.0, p[0], 0.0, 1.0, 0.2, 0.0]], x) ** 2),
], ids=["filtfilt", "freqz", "sosfiltfilt"])
def test_coefficients_written_as_lists_of_traced_numbers(f):
    """They raised a ConversionError (lfilter took such lists already)."""
    x = np.sin(np.arange(30.0))
    p = np.array([0.3])
    assert mutad.value_and_gradient(f, p, x)[0] == f(p, x)
    mutad.check_grads(lambda p: f(p, x), p)



def test_peak_prominences_and_widths_of_a_differentiated_signal():
    """Where the bases and the crossings lie is SciPy's decision on the values; the prominences,
    widths, heights and crossings are its arithmetic on the values there, differentiated."""
    t = np.linspace(0.0, 6.0, 60)

    def peaks_of(a):
        y = np.sin(a[0] * t) * np.exp(-a[1] * t) + a[2] * np.cos(5.0 * t)
        return y, scipy.signal.find_peaks(y)[0]

    def outputs(a):
        y, peaks = peaks_of(a)
        prominences, left, right = scipy.signal.peak_prominences(y, peaks)
        widths = scipy.signal.peak_widths(y, peaks, rel_height=0.6)
        windowed = scipy.signal.peak_widths(y, peaks, 0.3, wlen=9)
        given = scipy.signal.peak_widths(y, peaks, 0.5, (prominences, left, right))
        return (prominences, *widths, *windowed, given[0])

    def f(a):
        return sum(np.sum(np.cos(np.arange(1.0, 1.0 + np.size(v)) * v)) for v in outputs(a))

    a = np.array([2.0, 0.3, 0.2])
    copy = a.copy()
    ys, _ = mutad.pullback(outputs, copy)
    for ours, expected in zip(ys, outputs(a), strict=True):
        assert ours.tobytes() == expected.tobytes()  # SciPy's values, bit for bit
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, copy, policy=policy)
    mutad.check_jvp(f, copy)
    assert np.array_equal(copy, a)
    replayed = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.2, 0.9):  # the peaks, bases and crossings move
        u, v = replayed(a * scale), mutad.value_and_grad(f)(a * scale)
        assert u[0] == v[0] and np.array_equal(u[1], v[1])


def test_peak_widths_refuses_differentiated_positions():
    x = np.sin(np.linspace(0.0, 6.0, 40))
    with pytest.raises(UnsupportedOperationError, match="peaks"):
        mutad.gradient(lambda x: scipy.signal.peak_prominences(x, x[:2] * 0 + 10)[0].sum(), x)


# ----------------------------------------------------------------------------------------------
# lombscargle: SciPy's steps, its values bit for bit

LS_RNG = np.random.default_rng(2)
LS_Y = LS_RNG.standard_normal(40)
LS_T = np.sort(LS_RNG.uniform(0, 10, 40))
LS_F = np.linspace(0.1, 3, 25)
LOMBSCARGLE = {
    "power": lambda y: np.max(scipy.signal.lombscargle(LS_T, y, LS_F))
    + np.sum(scipy.signal.lombscargle(LS_T, y, LS_F)),
    "normalize": lambda y: np.sum(scipy.signal.lombscargle(LS_T, y - y.mean(), LS_F,
                                                           normalize=True)),
    "floating mean, weights": lambda y: np.sum(scipy.signal.lombscargle(
        LS_T, np.sin(y), LS_F, floating_mean=True, weights=1 + y ** 2) ** 2),
    "amplitude": lambda y: np.sum(np.abs(scipy.signal.lombscargle(
        LS_T, y, LS_F, normalize="amplitude")) ** 2),
    "in the times": lambda y: np.sum(scipy.signal.lombscargle(LS_T + 0.01 * y, np.cos(LS_T),
                                                              LS_F)),
    "in the frequencies": lambda y: np.sum(scipy.signal.lombscargle(
        LS_T, np.cos(LS_T), LS_F + 0.01 * y[:25], floating_mean=True)),
}


@pytest.mark.parametrize("name", LOMBSCARGLE)
def test_lombscargle(name):
    f = LOMBSCARGLE[name]
    y = LS_Y.copy()
    mutad.check_grads(f, y, modes=["rev", "fwd"], rtol=1e-5)
    mutad.check_grads(f, y, policy="checkpoint", rtol=1e-5)
    replays_as_traced(f, [(y,), (y * 1.1,), (y * 0.9,)])
    assert mutad.value_and_grad(f)(y)[0].tobytes() == f(LS_Y.copy()).tobytes()
    assert y.tobytes() == LS_Y.tobytes()


def test_lombscargle_values_are_scipys():
    for normalize in (False, True, "amplitude"):
        for floating_mean in (False, True):
            def f(y):
                return scipy.signal.lombscargle(LS_T, y, LS_F, normalize=normalize,
                                                floating_mean=floating_mean)

            value = mutad.jvp(f, (LS_Y.copy(),), (np.ones(40),))[0]
            assert value.tobytes() == f(LS_Y.copy()).tobytes()


CZTS = {
    "czt": (lambda x: scipy.signal.czt(x, m=20), (16,)),
    "czt-w-a": (lambda x: scipy.signal.czt(x, m=8, w=np.exp(-0.3j), a=1.1 * np.exp(0.2j)),
                (16,)),
    "czt-axis": (lambda x: scipy.signal.czt(x, axis=0), (3, 12)),
    "czt-complex": (lambda x: scipy.signal.czt(x + 1j * x[::-1]), (16,)),
    "zoom_fft": (lambda x: scipy.signal.zoom_fft(x, [0.1, 0.4], m=10, fs=1.0), (16,)),
    "CZT": (lambda x: scipy.signal.CZT(12, m=5)(x * 2.0), (3, 12)),
    "ZoomFFT": (lambda x: scipy.signal.ZoomFFT(12, 0.3, endpoint=True)(x, axis=-1), (3, 12)),
}


@pytest.mark.parametrize("name", CZTS)
def test_chirp_z_transforms(name, rng):
    """SciPy's chirp z-transform of a traced signal, as its __call__ computes it: SciPy's
    values bit for bit, differentiated in both modes and to the second order."""
    f, shape = CZTS[name]
    x = rng.standard_normal(shape)
    copy = x.copy()
    y, _ = mutad.pullback(f, copy)
    expected = f(x)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()

    def power(x):
        return np.sum(np.abs(f(x)) ** 2)

    mutad.check_grads(power, copy, order=2)
    mutad.check_jvp(power, copy)
    assert copy.tobytes() == x.tobytes()


_CZT_SIGNAL = np.sin(9 * np.linspace(0, 1, 32, endpoint=False))


@pytest.mark.parametrize("name, f, step", [
    ("zoom_fft range", lambda c: np.sum(np.abs(scipy.signal.zoom_fft(
        _CZT_SIGNAL, [c[0], c[1]], m=12, fs=2.0)) ** 2), 1e-4),
    # the chirps' phases turn by up to 1500 radians per unit of c[0] (fs = 0.4): a finer step
    ("ZoomFFT fs, endpoint", lambda c: np.sum(np.abs(scipy.signal.ZoomFFT(
        32, c[1], m=8, fs=c[0] * 4, endpoint=True)(_CZT_SIGNAL * c[0])) ** 2), 1e-5),
])
def test_a_zoom_fft_of_a_differentiated_range(name, f, step):
    """A ZoomFFT of a differentiated frequency range or fs (SciPy's __init__ calls cmath.exp on
    it: refused as a conversion): SciPy's __init__ followed, its chirps traced arrays, and its
    call on a constant signal differentiated in them."""
    from cases import followed_as_scipy

    followed_as_scipy(f, np.array([0.1, 0.3]), np.array([0.15, 0.35]), step=step)
    assert _CZT_SIGNAL.tobytes() == np.sin(9 * np.linspace(0, 1, 32, endpoint=False)).tobytes()


# ----------------------------------------------------------------------------------------------
# SciPy's own code on traced coefficients: tf2sos, sosfreqz and freqz_sos (they stopped with a
# ConversionError at SciPy's asarray)

_NOISE = np.cos(np.arange(20.0) ** 1.3)


@pytest.mark.parametrize("name, f", [
    ("tf2sos", lambda c: np.sum(scipy.signal.sosfilt(
        scipy.signal.tf2sos([1.0, c[0]], [1.0, -c[1]]), _NOISE) ** 2)),
    ("sosfreqz", lambda c: np.sum(np.abs(scipy.signal.sosfreqz(
        np.array([[c[0], 0.1, 0.0, 1.0, -c[1], 0.0]]), worN=16)[1]) ** 2)),
    ("freqz_sos", lambda c: np.sum(np.abs(scipy.signal.freqz_sos(
        np.array([[c[0], 0.1, 0.0, 1.0, -c[1], 0.0], [1.0, c[1], 0.0, 1.0, 0.2, c[0] / 4]]),
        worN=8)[1]))),
])
def test_scipys_own_code_on_traced_coefficients(name, f):
    from cases import followed_as_scipy

    followed_as_scipy(f, np.array([0.5, 0.3]), np.array([0.45, 0.35]))
