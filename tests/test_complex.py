"""Complex values: the convention, every ufunc, views of the real and imaginary parts, in-place
updates and their inverses, mixed real and complex operands, products, linear algebra and the
FFT, each checked against finite differences along complex directions, in both modes (and at
order 2 where marked), with the caller's arrays checked bit for bit by the checker."""

import warnings

import numpy as np
import pytest

import mutad
from cases import replays_as_traced
from mutad import errors

RNG = np.random.default_rng(7)


def complex_array(*shape, scale=1.0, shift=0.0):
    return scale * (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)) + shift


Z = complex_array(5)
W = complex_array(5)
X = RNG.standard_normal(5)
POSITIVE_Z = complex_array(5, scale=0.3, shift=1.5)  # away from branch cuts and poles
SMALL_Z = complex_array(5, scale=0.3)                # inside |z| < 1


def check(f, *args, order=1, policies=("restore", "checkpoint")):
    for policy in policies:
        mutad.check_grads(f, *args, policy=policy, order=order, modes=("rev", "fwd"))


# ----------------------------------------------------------------------------------------------
# The convention: a complex gradient is dL/dx + i dL/dy


def test_the_gradient_is_that_of_the_real_and_imaginary_parts():
    def loss(z):
        return np.sum(np.abs(np.exp(z) * W - 1.0) ** 2) + np.sum(np.imag(z) ** 3)

    def split(x, y):
        return loss(x + 1j * y)

    (g,) = mutad.gradient(loss, Z)
    gx, gy = mutad.gradient(split, Z.real.copy(), Z.imag.copy())
    np.testing.assert_allclose(g, gx + 1j * gy, rtol=1e-12)


def test_a_step_against_the_gradient_descends():
    def loss(z):
        return np.sum(np.abs(z * W - 1.0) ** 2)

    z = Z.copy()
    before = loss(z)
    z -= 0.01 * mutad.gradient(loss, z)[0]
    assert loss(z) < before


def test_the_gradient_of_a_squared_magnitude():
    (g,) = mutad.gradient(lambda z: np.sum(z * np.conj(z)).real, Z)
    np.testing.assert_allclose(g, 2 * Z, rtol=1e-14)


def test_a_complex_scalar_argument():
    g = mutad.gradient(lambda c, x: np.sum(np.abs(c * x) ** 2), 1.0 + 2.0j, X)[0]
    assert type(g) is complex
    np.testing.assert_allclose(g, 2 * (1.0 + 2.0j) * np.sum(X * X), rtol=1e-12)


@pytest.mark.parametrize("f, expected", [
    # a complex value computed from real arguments (once refused: np.abs's rule then computed
    # in float16, and complex intermediates lost their imaginary parts)
    (lambda x: np.abs(x + 1j).sum(), lambda x: x / np.sqrt(x * x + 1)),
    (lambda x: np.real(np.exp(1j * x)).sum(), lambda x: -np.sin(x)),
    (lambda x: ((x + 2j) * np.conj(x + 2j)).real.sum(), lambda x: 2 * x),
])
@pytest.mark.parametrize("how", ["reverse", "forward", "replay"])
def test_complex_intermediates_of_real_arguments(f, expected, how):
    x = np.linspace(0.1, 1.0, 4)
    before = x.tobytes()
    if how == "reverse":
        (g,) = mutad.gradient(f, x)
    elif how == "forward":
        g = np.array([mutad.jvp(f, (x,), (e,))[1] for e in np.eye(4)])
    else:
        replayed = mutad.grad(f, replay=True)
        g = [replayed(x) for _ in range(3)][-1]
    np.testing.assert_allclose(g, expected(x), rtol=1e-12)
    assert x.tobytes() == before


def test_complex_programs_are_replayed_as_they_trace():
    def f(z, x):
        z = z * x
        z += 1j
        z[1] = z[0] * z[2]  # NumPy's complex scalar math rounds otherwise than its loops
        return np.sum(np.abs(z) ** 2)

    replayed = mutad.grad(f, argnums=(0, 1), replay=True)
    expected = mutad.gradient(f, Z, X)
    for _ in range(4):
        z, x = Z.copy(), X.copy()
        got = replayed(z, x)
        assert z.tobytes() == Z.tobytes() and x.tobytes() == X.tobytes()
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    assert not replayed.reasons


@pytest.mark.parametrize("f", [
    lambda z: np.real(np.sum(np.cumprod(z) * np.conj(z))),  # a rule conjugated around
    lambda z: np.real(z[3] * np.conj(z[3])),  # complex scalars' product: their scalar math
    lambda z: np.real(np.multiply(z[3], np.conj(z[3]))),  # np.multiply of them: its loop
    lambda z: np.abs(z[0] * z[1] * 1j) + np.abs((z[0] * np.conj(z[2])) * z[1] / z[2]),
])
def test_replayed_complex_programs_are_their_traced_selves_bit_for_bit(f):
    """Regressions from the random programs: a replay took np.cumprod's pullback without the
    conjugations the engine puts around a holomorphic rule, and computed products of complex
    scalars otherwise than the engine (which takes them from NumPy's scalar math, which
    rounds otherwise than its loops)."""
    # z[3] times its conjugate: 0.009216 in NumPy's scalar math, 0.009216000000000002 -
    # 5.2e-20j in its loop
    z = np.array([0.3 + 0.7j, -0.2 + 0.11j, 0.05 - 0.9j, 0.096 * np.exp(-0.2335j)])
    replayed = mutad.value_and_grad(f, replay=True)
    replayed(z + 0.1)
    for _ in range(3):
        got, expected = replayed(z.copy()), mutad.value_and_grad(f)(z.copy())
        assert got[0] == expected[0] and got[1].tobytes() == expected[1].tobytes()
    assert not replayed.reasons


def test_a_complex_number_argument_is_traced_on_every_call():
    def f(x, c):
        return np.sum(np.abs(c * x) ** 2)

    replayed = mutad.grad(f, replay=True)
    for _ in range(3):
        np.testing.assert_array_equal(replayed(X, 1.5j), mutad.gradient(f, X, 1.5j)[0])
    (reason,) = replayed.reasons.values()
    assert "complex" in reason


# ----------------------------------------------------------------------------------------------
# Elementwise


HOLOMORPHIC = [
    (np.negative, Z), (np.positive, Z), (np.exp, Z), (np.expm1, Z), (np.exp2, Z),
    (np.log, POSITIVE_Z), (np.log1p, POSITIVE_Z), (np.log2, POSITIVE_Z), (np.log10, POSITIVE_Z),
    (np.sqrt, POSITIVE_Z), (np.square, Z), (np.reciprocal, POSITIVE_Z),
    (np.sin, Z), (np.cos, Z), (np.tan, SMALL_Z), (np.arcsin, SMALL_Z), (np.arccos, SMALL_Z),
    (np.arctan, SMALL_Z), (np.sinh, Z), (np.cosh, Z), (np.tanh, SMALL_Z),
    (np.arcsinh, SMALL_Z), (np.arccosh, POSITIVE_Z), (np.arctanh, SMALL_Z), (np.sinc, Z),
]


@pytest.mark.parametrize("ufunc, z", HOLOMORPHIC, ids=lambda u: getattr(u, "__name__", ""))
def test_complex_differentiable_ufuncs(ufunc, z):
    weights = complex_array(z.size)
    check(lambda z: np.sum(np.abs(ufunc(z) * weights) ** 2), z, order=2)
    check(lambda z: ufunc(z), z)  # a complex output: complex cotangents


def test_arccosh_on_both_sides_of_the_imaginary_axis():
    """Regression: the partial 1/sqrt(z^2 - 1) has the wrong sign where Re z < 0."""
    z = complex_array(6, scale=0.5, shift=-1.5)
    check(lambda z: np.arccosh(z), z)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.divide, np.power,
                                   np.float_power, np.maximum, np.minimum],
                         ids=lambda u: u.__name__)
def test_binary_ufuncs_of_complex_and_mixed_operands(ufunc):
    a, b = POSITIVE_Z, complex_array(5, scale=0.3, shift=1.0)
    check(lambda a, b: ufunc(a, b), a, b, order=2)
    check(lambda a, x: ufunc(a, x), a, np.abs(X) + 0.5)  # complex and real
    check(lambda x, b: ufunc(x, b), np.abs(X) + 0.5, b)


@pytest.mark.parametrize("f", [
    np.abs, np.conj, np.conjugate, np.real, np.imag, np.angle, np.sign,
    lambda z: np.angle(z, deg=True), lambda z: z.conj(), lambda z: abs(z),
], ids=["abs", "conj", "conjugate", "real", "imag", "angle", "sign", "degrees", "method",
        "builtin"])
def test_functions_that_are_not_complex_differentiable(f):
    weights = complex_array(5)
    check(lambda z: f(z) * weights, Z, order=2)


def test_clip_of_complex_values_selects_in_numpys_order():
    """Regression: np.clip of complex values was refused. NumPy orders complex values by real
    part, then imaginary part; each element is a's or a bound's, and its cotangent goes there,
    whichever operands are traced (z.clip too), with NumPy's values at ties of real parts."""
    lower, upper = -0.3 + 0.2j, 0.4 - 0.1j
    z = complex_array(12)
    check(lambda z: np.clip(z, lower, upper), z, order=2)
    check(lambda z, lo, hi: z.clip(lo, hi) * W[0], z, np.full(12, lower), complex_array(12),
          order=2)
    check(lambda z, b: np.clip(z, None, b) + np.clip(z, min=b[::-1]), z, 0.5 * z[::-1])
    check(lambda x, b: np.clip(x, b, None), RNG.standard_normal(12), complex_array(12))
    ties = np.array([-0.3 + 0.5j, -0.3 + 0.1j, 0.4 - 0.2j, 0.4 + 0.0j, 0.1 + 0.0j])
    y, _ = mutad.jvp(lambda z: np.clip(z, lower, upper), (ties,), (ties,))
    assert y.tobytes() == np.clip(ties, lower, upper).tobytes()
    (g,) = mutad.gradient(lambda z: np.sum(np.abs(np.clip(z, lower, upper)) ** 2), ties.copy())
    kept = np.array([True, False, True, False, True])  # a's own (its real part a bound's)
    np.testing.assert_allclose(g, np.where(kept, 2 * ties, 0), rtol=1e-15, atol=0)


def test_the_magnitude_at_zero_takes_the_subgradient_zero():
    z = np.array([0.0 + 0.0j, 1.0 + 1.0j])
    np.testing.assert_allclose(mutad.gradient(lambda z: np.abs(z).sum(), z)[0],
                               [0.0, (1 + 1j) / np.sqrt(2)])


def test_angle_of_real_arrays_is_a_constant():
    x = np.array([-1.0, -0.0, 0.0, 2.0])
    np.testing.assert_array_equal(mutad.gradient(lambda x: (np.angle(x) * x).sum(), x)[0],
                                  np.angle(x))


# ----------------------------------------------------------------------------------------------
# In place, views of the parts, mixed buffers


def test_writable_views_of_the_real_and_imaginary_parts():
    def f(z, x):
        z.real[:] = z.imag * x
        z.imag[1:] *= 3.0
        np.real(z)[0] += 2.0
        np.imag(z)[...] = np.exp(np.imag(z))
        return np.abs(z)

    check(f, Z, X, order=2)


def test_a_complex_array_viewed_as_the_floats_of_its_parts():
    """Regression: z.view(np.float64) and x.view(np.complex128) were refused as
    reinterpretations. They are views like z.real: reads, writes through either view reach
    the other, in both modes, and the values are NumPy's."""
    def parts(z, x):
        v = z.view(np.float64)  # re0, im0, re1, im1, ...
        v[::2] *= x
        v[1::2] += v[::2] ** 2
        return np.abs(z) + np.sum(v[:4] ** 3)

    def packed(x):
        z = x.view(np.complex128)  # x holds re, im pairs
        z *= 1.0 + 2.0j
        w = np.exp(z) + x[::2]
        return np.abs(w) ** 2 + x[1::2]

    def grid(x):
        z = x.view(np.complex64 if x.dtype == np.float32 else np.complex128)  # (3, 2)
        return np.abs(np.fft.fft(z, axis=0)) ** 2 + np.sum(z.view(x.dtype) ** 2)

    check(parts, Z, X, order=2)
    check(packed, RNG.standard_normal(6), order=2)
    check(grid, RNG.standard_normal((3, 4)))
    for f, args in ((parts, (Z, X)), (packed, (RNG.standard_normal(6),)),
                    (grid, (RNG.standard_normal((3, 4)),))):
        expected = f(*(a.copy() for a in args))
        value, _ = mutad.jvp(f, tuple(a.copy() for a in args), tuple(args))
        assert value.tobytes() == expected.tobytes()
        loss = lambda *a: np.sum(f(*a))  # noqa: E731
        assert mutad.value_and_gradient(loss, *(a.copy() for a in args))[0] == \
            loss(*(a.copy() for a in args))


def test_views_as_the_floats_of_complex_parts_replay_as_they_trace():
    def f(x):
        z = x.view(np.complex128)
        z *= z[::-1]
        return np.sum(np.abs(z.view(np.float64) - x[0]))

    replays_as_traced(f, [(RNG.standard_normal(8),) for _ in range(3)])


def test_other_views_of_complex_memory_are_refused_or_numpys_error():
    with pytest.raises(errors.UnsupportedOperationError, match="has no derivative"):
        mutad.gradient(lambda z: np.sum(np.abs(z.view(np.int64))), Z.copy())
    with pytest.raises(errors.UnsupportedOperationError, match="has no derivative"):
        mutad.gradient(lambda x: np.sum(np.abs(x.view(np.complex64))), X[:4].copy())
    with pytest.raises(ValueError, match="contiguous"):  # NumPy's own error, as NumPy's
        mutad.gradient(lambda x: np.sum(np.abs(x.reshape(2, 4)[:, ::2].view(np.complex128))),
                       RNG.standard_normal(8))


def test_in_place_complex_updates():
    def f(z, w, x):
        z *= w
        z += x
        z /= w + 2.0
        z -= 1j * x
        np.exp(z, out=z)
        np.multiply(z, z, out=z)
        return z

    check(f, SMALL_Z, W * 0.3, X, order=2)


def test_a_complex_update_is_undone_by_its_inverse(inverting):
    def f(z, w):
        z *= w
        z += w
        return np.sum(np.abs(z))

    undos = [r.undo_kind for r in mutad.make_tape(f, Z, W).records if r.undo_kind]
    assert undos and all(kind in ("inverse", "partial") for kind in undos), undos


def test_an_inverse_that_is_not_exact_saves_those_elements(inverting):
    """Complex products are not correctly rounded part by part: each element is checked, and
    the ones z * w / w would not give back are saved."""
    z = np.array([1e-20 + 1.0j, 1.0 + 2.0j])  # z * w / w loses 1e-20: saved, put back
    w = np.array([1.0 + 1.0j, 2.0 - 1.0j])

    def f(z, w):
        z *= w
        return np.sum(np.abs(z) ** 2 * np.arange(1, 3))

    kinds = [r.undo_kind for r in mutad.make_tape(f, z, w).records if r.undo_kind]
    assert kinds == ["partial"], kinds
    check(f, z, w, policies=("restore",))


def test_a_buffer_allocated_complex_and_filled_with_real_values():
    def f(x):
        u = np.zeros(x.size, complex)
        u[:] = x
        u *= np.exp(1j * x)
        v = np.empty(x.size)
        v[:] = np.abs(u) ** 2  # a real value into a real buffer
        return v.sum() + np.real(u).sum()

    check(f, X, order=2)


def test_astype_between_real_and_complex():
    check(lambda z: z.astype(float) * 2.0, Z)
    check(lambda x: np.abs(x.astype(complex) * W), X)


def test_a_cast_that_drops_imaginary_parts_warns_at_the_users_line():
    # NumPy's ComplexWarning, as a plain cast gives it, at the line that casts, in both modes
    def f(z):
        return z.astype(float)

    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        y, back = mutad.pullback(f, Z)
        back(np.ones_like(y))
        mutad.jvp(f, (Z,), (Z,))
    assert y.tobytes() == np.real(Z).astype(float).tobytes()
    assert {(w.category, w.filename) for w in heard} == {(np.exceptions.ComplexWarning, __file__)}


# ----------------------------------------------------------------------------------------------
# Reductions, products, linear algebra


@pytest.mark.parametrize("f", [
    np.sum, np.mean, np.prod, np.cumsum, np.cumprod, np.max, np.min, np.ptp, np.trapezoid,
    lambda z: np.diff(z, 2), lambda z: np.sort(z), lambda z: np.var(z), lambda z: np.std(z),
    lambda z: np.where(np.real(z) > 0, z, 2 * z), lambda z: np.concatenate([z, z[::-1]]),
    lambda z: np.reshape(np.outer(z, z), -1)[::3], lambda z: np.polyval(z, 0.5 + 0.5j),
], ids=lambda f: getattr(f, "__name__", ""))
def test_reductions_and_rearrangements(f):
    check(f, Z, order=2)


@pytest.mark.parametrize("f", [
    np.dot, np.vdot, np.inner, np.outer, np.kron, np.matmul, np.vecdot,
    lambda a, b: np.einsum("i,j->ij", a, b), lambda a, b: np.tensordot(a, b, 1),
    lambda a, b: np.convolve(a, b), lambda a, b: np.cross(a[:3], b[:3]),
], ids=lambda f: getattr(f, "__name__", ""))
def test_products(f):
    check(f, Z, W, order=2)
    check(f, Z, X)  # complex and real


def test_matrix_products_and_linear_algebra():
    A = complex_array(3, 3) + 3 * np.eye(3)
    B = complex_array(3, 2)
    check(lambda A, B: A @ B, A, B, order=2)
    check(lambda A, B: np.linalg.solve(A, B), A, B, order=2)
    check(lambda A: np.linalg.inv(A), A, order=2)
    check(lambda A: np.linalg.det(A), A, order=2)
    check(lambda A: np.trace(A @ A.conj().T).real, A)


# ----------------------------------------------------------------------------------------------
# The FFT


NORMS = [None, "backward", "ortho", "forward"]
X8, X7 = RNG.standard_normal(8), RNG.standard_normal(7)
Z5, Z8 = complex_array(5), complex_array(8)
M = RNG.standard_normal((4, 6))
ZM = complex_array(4, 6)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 6, 11])
def test_one_dimensional_transforms(norm, n):
    fft = np.fft
    check(lambda z: fft.fft(z, n, norm=norm), Z8)
    check(lambda x: fft.fft(x, n, norm=norm), X7)
    check(lambda z: fft.ifft(z, n, norm=norm), Z8)
    check(lambda x: fft.rfft(x, n, norm=norm), X8)
    check(lambda x: fft.rfft(x, n, norm=norm), X7)
    check(lambda z: fft.irfft(z, n, norm=norm), Z5)
    check(lambda z: fft.hfft(z, n, norm=norm), Z5)
    check(lambda x: fft.ihfft(x, n, norm=norm), X7)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("s, axes", [(None, None), ((3, 8), (0, 1)), ((5,), (0,)),
                                     ((8, 3), (1, 0))])
def test_transforms_over_several_axes(norm, s, axes):
    fft = np.fft
    check(lambda z: fft.fftn(z, s, axes, norm), ZM)
    check(lambda z: fft.ifftn(z, s, axes, norm), ZM)
    check(lambda x: fft.rfftn(x, s, axes, norm), M)
    check(lambda z: fft.irfftn(z, s, axes, norm), ZM)
    if s is None or len(s) == 2:
        two = (-2, -1) if axes is None else axes
        check(lambda z: fft.fft2(z, s, two, norm), ZM)
        check(lambda z: fft.ifft2(z, s, two, norm), ZM)
        check(lambda x: fft.rfft2(x, s, two, norm), M)
        check(lambda z: fft.irfft2(z, s, two, norm), ZM)


def test_transforms_at_order_two():
    check(lambda x: np.abs(np.fft.rfft(x)) ** 3, X7, order=2)
    check(lambda z: np.fft.irfft(np.fft.fft(z) * z, 8), Z8, order=2)
    check(lambda z: np.fft.fftn(z * z, norm="ortho"), ZM, order=2)


def test_shifts_and_frequencies():
    check(lambda z: np.fft.fftshift(z), ZM)
    check(lambda z: np.fft.ifftshift(z, axes=1), ZM)
    check(lambda z: np.fft.fftshift(z, axes=(0,)) * np.fft.fftfreq(6, 0.1), ZM)
    check(lambda x: np.fft.rfft(x) * np.fft.rfftfreq(7), X7)


def test_transforms_give_numpys_bits():
    def f(z):
        return np.fft.ifftn(np.fft.rfft2(np.real(z)) * 2.0, axes=(0,))

    y, _ = mutad.pullback(f, ZM)
    np.testing.assert_array_equal(y, f(ZM))


def spectral_heat(u, diffusivity, steps=20):
    """A pseudo-spectral heat step, in place in Fourier space."""
    k = 2 * np.pi * np.fft.rfftfreq(u.size, 1.0 / u.size)
    u_hat = np.fft.rfft(u)
    for _ in range(steps):
        u_hat *= np.exp(-diffusivity * k ** 2 * 1e-3)
        u_hat[0] += 0.1j * np.sum(u)
    u[:] = np.fft.irfft(u_hat, u.size)
    return np.sum(u ** 2)


def test_a_spectral_step_in_place():
    u = np.sin(np.linspace(0, 2 * np.pi, 16, endpoint=False)) + 0.3 * RNG.standard_normal(16)
    check(spectral_heat, u, 0.7, order=2)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_scipy_transforms_by_scipys_names(name, norm):
    import scipy.fft

    def transform(*args, **kwargs):  # looked up at the call, as a user's module would
        return getattr(scipy.fft, name)(*args, **kwargs)

    arg = X7 if name in ("rfft", "ihfft") else Z5
    check(lambda a: transform(a, 9, -1, norm, workers=2), arg, order=2)
    y, _ = mutad.pullback(lambda a: transform(a, 9, norm=norm), arg)
    np.testing.assert_array_equal(y, transform(arg, 9, norm=norm))  # SciPy's bits


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2",
                                  "irfft2", "hfftn", "ihfftn", "hfft2", "ihfft2"])
def test_scipy_transforms_over_several_axes(name):
    import scipy.fft

    def transform(*args, **kwargs):
        return getattr(scipy.fft, name)(*args, **kwargs)

    arg = M if name in ("rfftn", "rfft2", "ihfftn", "ihfft2") else ZM
    check(lambda a: transform(a, norm="ortho"), arg)
    check(lambda a: transform(a, (5, 4), (1, 0)), arg)
    check(lambda a: transform(a, 5, 1), arg)  # SciPy's single integers for s and axes


@pytest.mark.parametrize("name", ["dct", "idct", "dst", "idst"])
@pytest.mark.parametrize("kind_type", [1, 2, 3, 4])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_scipy_real_to_real_transforms_pull_back_by_their_transposes(name, kind_type, norm):
    import scipy.fft

    def transform(*args, **kwargs):
        return getattr(scipy.fft, name)(*args, **kwargs)

    for n in (None, 5, 9):  # as it is, truncated, zero-padded
        x = RNG.standard_normal((2, 7))
        w = RNG.standard_normal(transform(x, kind_type, n, norm=norm).shape)
        gradient = mutad.gradient(lambda a: (transform(a, kind_type, n, norm=norm) * w).sum(),
                                  x)[0]
        matrix = np.array([transform(e, kind_type, n, norm=norm) for e in np.eye(7)])
        np.testing.assert_allclose(gradient, w @ matrix.T, rtol=1e-12, atol=1e-12)
    check(lambda a: transform(a, kind_type, 6, 0, norm), M, order=2)
    check(lambda z: transform(z, kind_type, norm=norm), Z5)  # complex: each part's transform
    y, _ = mutad.pullback(lambda a: transform(a, kind_type, norm=norm), X7)
    np.testing.assert_array_equal(y, transform(X7, kind_type, norm=norm))  # SciPy's bits


@pytest.mark.parametrize("name", ["dctn", "idctn", "dstn", "idstn"])
def test_scipy_real_to_real_transforms_over_several_axes(name):
    import scipy.fft

    def transform(*args, **kwargs):
        return getattr(scipy.fft, name)(*args, **kwargs)

    check(lambda a: transform(a, 2, norm="ortho"), M)
    check(lambda a: transform(a, 1, (5, 7), (1, 0)), M)
    check(lambda a: transform(a, 3, axes=1, norm="forward"), M)
    with pytest.raises(mutad.MutadError, match="orthogonalize"):
        mutad.gradient(lambda a: transform(a, 2, norm="ortho", orthogonalize=False).sum(), M)


def test_scipy_shifts():
    import scipy.fft

    check(lambda z: scipy.fft.fftshift(scipy.fft.ifftshift(z, axes=0) * np.arange(6)), ZM)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve(mode):
    import scipy.signal

    a, b = complex_array(7), complex_array(3)
    check(lambda a, b: scipy.signal.fftconvolve(a, b, mode), a, b, order=2)
    check(lambda x, b: scipy.signal.fftconvolve(x, b, mode), X7, b)
    check(lambda x, y: scipy.signal.fftconvolve(x, y, mode), M, M[:2, :3] * 2.0)
    check(lambda a, b: scipy.signal.convolve(a, b, mode), a, b)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_along_some_axes(mode):
    import scipy.signal

    a, b = complex_array(4, 6), complex_array(1, 3)  # broadcast along axis 0
    check(lambda a, b: scipy.signal.fftconvolve(a, b, mode, axes=1), a, b, order=2)
    check(lambda a, b: scipy.signal.fftconvolve(a, b, mode, axes=[1]), M, b)
    check(lambda a, b: scipy.signal.fftconvolve(a, b, mode, axes=0), M, M[:2, :] * 2.0)
    check(lambda a, b: scipy.signal.fftconvolve(a, b, mode, axes=(0, 1)), a, b)


CUBE, ZCUBE = RNG.standard_normal((5, 4, 5)) / 10, complex_array(5, 4, 5) / 10


@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2", "rfftn",
                                  "irfftn"])
@pytest.mark.parametrize("s, axes", [((7, 3), (0, 2)), ((4, 6), (0, 0)), (None, (2, 0))],
                         ids=["s-bigger-and-smaller", "repeated-axis", "reordered"])
def test_transforms_of_three_dimensional_arrays(name, s, axes):
    transform = getattr(np.fft, name)
    arg = CUBE if name.startswith("rfft") else ZCUBE
    if name.startswith("irfft") and axes[0] == axes[1]:
        return  # NumPy: an inverse real transform cannot repeat its last axis
    check(lambda a: transform(a, s, axes), arg)


def test_a_subset_of_a_transform():
    check(lambda x: np.fft.rfftn(x)[(0, 1, 0), (3, 3, 2)], CUBE)
    check(lambda z: np.fft.irfftn(z)[(0, 1, 0), (3, 3, 2)], ZCUBE)


@pytest.mark.parametrize("size", [4, 5])
def test_shifts_of_even_and_odd_lengths(size):
    z = complex_array(size, size)
    check(lambda z: np.fft.fftshift(z) * np.arange(size), z)
    check(lambda z: np.fft.ifftshift(z, axes=1) * np.arange(size), z)


@pytest.mark.parametrize("x", [0.7, -0.4, 0.6 + 0.8j, -1.2 - 0.3j])
def test_angle_and_magnitude_of_scalars_to_order_two(x):
    check(lambda x: np.angle(x), x, order=2)
    check(lambda x: np.abs(x), x, order=2)


def test_a_gradient_has_its_arguments_dtype():
    (g,) = mutad.gradient(lambda x: np.sum(np.real(x)), np.array([2.0]))
    assert g.dtype == np.float64
    (g,) = mutad.gradient(lambda z: np.sum(np.real(z)), np.array([1j]))
    assert g.dtype == np.complex128 and g[0] == 1.0
    assert type(mutad.gradient(lambda z: np.real(z * z), 1j)[0]) is complex


def test_real_if_close():
    check(lambda z: np.real_if_close(z * np.conj(z)) * np.arange(5), Z, order=2)  # real
    check(lambda z: np.real_if_close(z) * W, Z)                                    # complex


def test_jacobian_and_hessian_of_complex_values_are_refused():
    before = Z.tobytes()
    with pytest.raises(errors.ComplexInputError, match="pullback"):
        mutad.jacobian(lambda z: z * 2.0, Z)
    with pytest.raises(errors.ComplexInputError, match="pullback"):
        mutad.hessian(lambda z: np.sum(np.abs(z) ** 2), Z)
    with pytest.raises(errors.ComplexInputError, match="jacfwd"):
        mutad.jacrev(lambda x: x * 1j)(X)
    assert Z.tobytes() == before


# The complex outputs of real arguments (a spectrum, the eigenvalues of a real matrix) were
# refused by jacobian: their Jacobian is complex, the derivatives of the real and imaginary
# parts, forward mode's tangents, as JAX's jacfwd gives it.

@pytest.mark.parametrize("jacobian", [lambda f, x: mutad.jacobian(f, x),
                                      lambda f, x: mutad.jacfwd(f)(x)], ids=["jacobian", "jacfwd"])
def test_the_jacobian_of_complex_outputs_of_real_arguments(jacobian):
    x = np.array([0.3, -1.2, 0.7, 0.25, 1.5])
    before = x.tobytes()
    n = np.arange(5)
    dft = np.exp(-2j * np.pi * np.outer(n, n) / 5)

    def f(x):
        y = np.fft.rfft(x)
        y *= np.exp(1j * x[:3])  # in place
        return y, x[0] * np.exp(1j * x[1])

    J, K = jacobian(f, x)
    rotation = np.exp(1j * x[:3])
    expected = dft[:3] * rotation[:, None]
    expected[np.arange(3), np.arange(3)] += 1j * np.fft.rfft(x) * rotation
    np.testing.assert_allclose(J, expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(K, [np.exp(1j * x[1]), 1j * x[0] * np.exp(1j * x[1]), 0, 0, 0],
                               rtol=1e-15, atol=0)
    assert J.dtype == K.dtype == np.complex128 and x.tobytes() == before


def c(*shape):
    return complex_array(*shape)


@pytest.mark.parametrize("f, args", [
    (lambda a, b: np.einsum("ijk,lji->lki", a, b), (c(3, 4, 4), c(4, 4, 3))),
    (lambda a, b: np.einsum("...jk,...lj->...lk", a, b), (c(3, 4, 4), c(3, 4, 4))),
    (lambda a, b, d: np.einsum("ijk,lji,lli->lki", a, b, d), (c(3, 4, 4), c(4, 4, 3), c(4, 4, 3))),
    (lambda a, b: np.tensordot(a, b, [(0, 1), (1, 2)]), (c(2, 3), c(1, 2, 3))),
    (lambda a, b: np.tensordot(a, b, 2), (c(2, 2), c(2, 2, 4))),
    (lambda a, b: np.maximum(a, b), (c(1, 4), c(3, 4))),
    (lambda a, b: np.minimum(a, b), (c(1), c(3, 4))),
    (lambda a: np.sort(a), (c(7),)),
    (lambda a: np.partition(a, 3), (c(7),)),
    (lambda a: np.atleast_3d(a), (c(2, 4),)),
    (lambda a: np.trace(a, offset=1), (c(4, 5),)),
    (lambda a: np.transpose(a, (2, 0, 1)), (c(2, 3, 4),)),
    (lambda a, b: a ** b, (POSITIVE_Z, c(5) * 0.3)),
    (lambda a, b: a / b, (c(3, 4), c(4) + 3.0)),
], ids=["einsum-covsum", "einsum-ellipsis", "einsum-three", "tensordot-axes", "tensordot-2",
        "maximum", "minimum", "sort", "partition", "atleast_3d", "trace", "transpose", "pow",
        "divide"])
def test_systematic_complex_cases(f, args):
    check(f, *args, order=2)


def test_interpolating_complex_values():
    """Regression: np.interp's rule accumulated the cotangent of a complex fp in a float array
    (the imaginary part dropped, with a ComplexWarning)."""
    fp = np.array([1 + 2j, 3 - 1j, 0.5 + 0.5j])
    x = np.array([0.3, 1.2, 1.9, 2.5, -0.2])
    np.testing.assert_allclose(
        mutad.gradient(lambda fp: np.interp([0.5, 1.5], [0.0, 1.0, 2.0], fp).imag.sum(), fp)[0],
        [0.5j, 1j, 0.5j])
    check(lambda x, xp, fp: np.interp(x, xp, fp), x, np.array([0.0, 1.0, 2.0]), fp, order=2)
    check(lambda x, fp: np.interp(x, [0.0], fp, left=1j), x, fp[:1], order=2)
    away_from_knots = np.array([0.3, 1.2, 1.9, 2.2, -0.2, 3.1])  # 2.5 is a knot, period 2.5
    check(lambda x, fp: np.interp(x, [0.0, 1.0, 2.0], fp, period=2.5), away_from_knots, fp)


def test_a_complex_value_assigned_into_a_real_array_keeps_its_real_part():
    """Regression: NumPy's assignment casts, with a ComplexWarning; mutad's raised a casting
    error."""
    def f(a):
        b = np.zeros(3)
        b[1:] = a[1:]
        c = np.zeros(3)
        c[...] = a * a
        return b * np.arange(3) + c

    with np.errstate(all="ignore"), pytest.warns(np.exceptions.ComplexWarning):
        check(f, W[:3], order=2)


def test_a_ufunc_of_complex_values_written_into_a_real_out_differentiates_its_real_part():
    """Regression: np.exp(z, out=real, casting='unsafe') took exp's partial from the real
    part the target holds (of x = linspace(1, 2, 3), z = x + i x[::-1], the derivative of
    Re(exp(z)) @ x in x[0] was -2.2624 in both modes, not -14.6978); a complex constant factor
    raised NumPy's casting error in the backward pass. Values, caller's data, replay=True."""
    def f(x):
        z = x + 1j * x[::-1]
        a = np.exp(z, out=np.zeros(3), casting="unsafe")
        b = np.zeros(3)
        np.multiply(z, 2 + 1j, out=b, casting="unsafe")
        np.sqrt(z[1:] - 1.5j, out=b[1:], casting="unsafe")
        return a @ x + b @ x

    x = np.linspace(1.0, 2.0, 3)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check(f, x, order=2)
        grad, = mutad.gradient(lambda x: np.exp(x + 1j * x[::-1], out=np.zeros(3),
                                                casting="unsafe") @ x, x)
        assert abs(grad[0] + 14.697761392249562) < 1e-12
        before = x.tobytes()
        # (a replay traces these calls, bit for bit: it refuses such writes)
        replays_as_traced(f, [(x,), (x * 1.5,), (x,)])
        assert x.tobytes() == before


def test_a_ufunc_whose_dtype_chooses_a_loop_of_another_kind_differentiates_that_loop():
    """Regression: dtype= or signature= choosing a complex loop for real operands (the square
    root, power and arcsine of values outside their real domains) gave NaN derivatives, the
    rules' partials taken in real arithmetic; a real loop for complex operands
    (casting='unsafe', NumPy's real parts) gave the complex function's derivative. The
    operands are now cast to the loop's kind. Both modes, second order, replay=True."""
    def f(x):
        z = x + 1j * x[::-1]
        a = np.sqrt(x, dtype=np.complex128) * np.power(x, x[::-1] ** 2, dtype=complex)
        b = np.arcsin(2 * x, signature=(None, np.complex128))
        c = np.sin(z, dtype=np.float64, casting="unsafe")
        d = np.hypot(z, x, signature="dd->d", casting="unsafe")
        return np.sum(np.abs(a) ** 2 + b.real * b.imag + c * d * x)

    x = np.array([-0.7, 0.4, 1.3])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check(f, x, order=2)
        before = x.tobytes()
        replays_as_traced(f, [(x,), (x * 1.5,), (x,)])
        assert x.tobytes() == before


def test_powers_take_numpys_fast_paths():
    """Regression: z ** 2, z ** 0.5 and z ** -1 (and **=) are np.square, np.sqrt and
    np.reciprocal in NumPy, which round complex values otherwise than np.power."""
    def f(z):
        w = z.copy()
        w **= 2
        return z ** 2, z ** 0.5, z ** -1, w, z ** 3

    y, _ = mutad.pullback(f, Z)
    for a, b in zip(y, f(Z), strict=True):
        assert a.tobytes() == b.tobytes()
    check(lambda z: f(z)[3] * f(z)[1] + f(z)[2], Z, order=2)


def test_overlapping_views_of_the_parts():
    """Regression: a broadcast or sliding window of z.real or z.imag put its gradient at the
    wrong floats of z's (or raised an IndexError)."""
    from numpy.lib.stride_tricks import sliding_window_view

    s = np.array([1 + 2j, 3 + 4j, 5 + 6j, 7 + 8j, 9 + 1j, 2 + 3j])
    y, back = mutad.pullback(lambda z: np.broadcast_to(z.imag, (2, 3)), s[0:3])
    np.testing.assert_array_equal(back(np.ones((2, 3)))[0], [2j, 2j, 2j])
    check(lambda z: np.broadcast_to(z.imag, (2, 6)) * np.arange(6), s, order=2)
    check(lambda z: sliding_window_view(z.real, 3) * np.arange(3), s, order=2)
    check(lambda z: np.broadcast_to(z[:3], (2, 3)).real * np.arange(3), s, order=2)


def test_real_values_put_into_a_complex_array_warn_nothing():
    """Regression: np.put and np.copyto of real values into a complex array cast the complex
    cotangent into the real source's gradient with a ComplexWarning (the value was right)."""
    def f(z, x):
        np.put(z, [1, 3], x)
        np.copyto(z[:2], x)
        return z * z

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(f, complex_array(4), X[:2], order=2)


def test_products_of_complex_elements_are_numpys_scalar_math():
    """Regression: NumPy multiplies two complex scalars (``z[0] * z[1]``) with its scalar math,
    which rounds otherwise than the ufunc loop mutad ran: 4 in 10 products differed in the last
    bit."""
    z = complex_array(40)

    def f(z):
        out = []
        for i in range(0, z.size - 1, 2):
            p = z[i] * z[i + 1]
            q = z[i] * np.complex128(0.3 - 0.7j)
            r = (0.3 - 0.7j) * z[i]
            s = z[i]
            s *= z[i + 1]
            out += [p, q, r, s]
        return np.array(out)

    expected = f(z)
    assert mutad.pullback(f, z)[0].tobytes() == expected.tobytes()
    assert mutad.jvp(f, (z,), (z,))[0].tobytes() == expected.tobytes()
    check(f, z[:8], order=2)


CUT_POINTS = {  # real values beyond 1 in size, with each sign of a zero part
    "real, +0j": lambda x: x.astype(complex),
    "real, -0j": lambda x: np.conjugate(x.astype(complex)),
    "imaginary, +0": lambda x: x * 1j,
    "imaginary, -0": lambda x: -np.conjugate(-x * 1j),
}


@pytest.mark.parametrize("points", sorted(CUT_POINTS))
@pytest.mark.parametrize("ufunc", [np.arcsin, np.arccos, np.arcsinh, np.arccosh],
                         ids=lambda u: u.__name__)
def test_inverse_functions_on_their_cut_take_numpys_side(ufunc, points):
    # NumPy takes a point of a cut from the side its zero part's sign says (x + 0j from
    # above); the derivative was the other side's where 1 - x*x, x*x + 1 or x + 1 made that
    # zero +0, the imaginary part's gradient negated
    def f(x):
        w = ufunc(CUT_POINTS[points](x))
        return (np.imag(w) * np.arange(1.0, 5.0)).sum() + np.abs(w).sum()

    x = np.array([1.5, -1.7, 0.3, 2.5])
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    replays_as_traced(f, [(x,), (x * 1.1,)])
