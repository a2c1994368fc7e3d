"""scipy.signal's correlate, convolve2d, correlate2d, sosfilt, filtfilt, lfilter_zi and
savgol_filter, by SciPy's names and mutad.scipy.signal's: values bit for bit SciPy's, gradients
against finite differences under both policies, forward mode and second order, every mode and
boundary.
(lfilter, convolve and fftconvolve are tested in test_scipy.py.)"""

import numpy as np
import pytest
import scipy.signal
from scipy.signal import convolve2d

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import signal

SOS = scipy.signal.butter(4, 0.2, output="sos")
B, A = scipy.signal.butter(3, 0.3)


def weighted(y):
    """A loss giving each output element its own cotangent."""
    return (y * np.sqrt(np.arange(1.0, y.size + 1)).reshape(np.shape(y))).sum() + (y * y).sum()


def sections(p):
    """Second-order sections from their free coefficients (SciPy requires each a[0] to be 1)."""
    return np.concatenate([p[:, :3], np.ones((len(p), 1)), p[:, 3:]], axis=1)


FREE = np.delete(SOS, 3, axis=1)

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


def test_refusals(rng):
    x = rng.normal(size=30)
    with pytest.raises(UnsupportedOperationError, match="gust"):
        mutad.gradient(lambda x: scipy.signal.filtfilt(B, A, x, method="gust").sum(), x)
    with pytest.raises(UnsupportedOperationError, match="even window_length"):
        mutad.gradient(lambda x: scipy.signal.savgol_filter(x, 6, 2).sum(), x)


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
