"""scipy.ndimage's filters, by SciPy's names and by mutad.scipy.ndimage's: values bit for bit
SciPy's, gradients against finite differences under both policies, forward mode, second order
for the linear filters, every boundary mode, output= in every form, and the rank filters'
decisions kept."""

import collections

import numpy as np
import pytest
import scipy.ndimage
from scipy.ndimage import gaussian_filter, sobel

import mutad
from decisions import check_decision_kept, then_disturbed
from mutad.errors import UnsupportedOperationError, UntracedWriteError
from mutad.scipy import ndimage

from cases import followed_as_scipy, replays_as_traced

MODES = ["reflect", "mirror", "nearest", "wrap", "constant", "grid-wrap", "grid-mirror",
         "grid-constant"]

def _second_difference(input, axis, output, mode, cval, w=(1.0, -2.0, 1.0)):
    """A ``derivative2`` for generic_laplace, as SciPy's documentation writes one."""
    return scipy.ndimage.correlate1d(input, w, axis, output, mode, cval)


# Each case: a call of the module ``f`` (SciPy's or mutad's) on the image x.
LINEAR = {
    # (generic_laplace stopped: SciPy's np.asarray of the traced image)
    "generic_laplace": lambda f, x: f.generic_laplace(
        x, _second_difference, mode=("nearest", "wrap"), extra_keywords={"w": (0.5, -1.0, 0.5)}),
    "generic_laplace-output-axes": lambda f, x: f.generic_laplace(
        x, _second_difference, output=np.zeros_like(x), axes=(1,)),
    "gaussian_filter": lambda f, x: f.gaussian_filter(x, 1.2, mode="mirror"),
    "gaussian_filter-axes-radius": lambda f, x: f.gaussian_filter(
        x, [1.0], order=[1], axes=(1,), radius=2, mode="wrap"),
    "gaussian_filter-orders-modes": lambda f, x: f.gaussian_filter(
        x, (0.8, 1.5), order=(0, 2), mode=("constant", "nearest"), cval=0.3),
    "gaussian_filter-tiny-sigma": lambda f, x: f.gaussian_filter(x, 0.0),
    "gaussian_filter1d": lambda f, x: f.gaussian_filter1d(x, 0.7, axis=0, order=1, truncate=2.0),
    "uniform_filter": lambda f, x: f.uniform_filter(x, (3, 4), mode="constant", cval=0.5,
                                                    origin=(1, -1)),
    "uniform_filter1d": lambda f, x: f.uniform_filter1d(x, 4, axis=0, mode="grid-wrap"),
    "uniform_filter-axes": lambda f, x: f.uniform_filter(x, 3, axes=(0,)),
    "correlate-axes-origin": lambda f, x: f.correlate(x, np.array([1.0, 2.0, 3.0]), axes=1,
                                                      origin=1),
    "sobel": lambda f, x: f.sobel(x, 0, mode="nearest"),
    "prewitt": lambda f, x: f.prewitt(x, axis=1, mode=["wrap", "mirror"]),
    "laplace": lambda f, x: f.laplace(x, mode="grid-constant", cval=0.2),
    "gaussian_laplace": lambda f, x: f.gaussian_laplace(x, 1.0, truncate=3.0),
    "gaussian_laplace-axes": lambda f, x: f.gaussian_laplace(x, [0.9], axes=[0]),
    "correlate": lambda f, x: f.correlate(x, np.array([[1.0, -2.0], [0.5, 3.0]]), mode="wrap"),
    "convolve-origin": lambda f, x: f.convolve(x, np.array([[1.0, 2.0, -1.0]]), origin=(0, 1),
                                               mode="mirror"),
    "convolve-axes": lambda f, x: f.convolve(x, np.array([1.0, 2.0, 4.0, -1.0]), axes=(0,)),
    "correlate1d": lambda f, x: f.correlate1d(x, [1.0, 2.0, -3.0, 0.5], 0, None, "constant",
                                              -0.4, 1),
    "convolve1d": lambda f, x: f.convolve1d(x, [1.0, 2.0, -3.0, 0.5], mode="nearest", origin=-1),
}
SMOOTH = {  # not linear, smooth where the gradient is non-zero
    "gaussian_gradient_magnitude": lambda f, x: f.gaussian_gradient_magnitude(x, 1.0),
    # (generic_gradient_magnitude stopped: SciPy's np.asarray of the traced image)
    "generic_gradient_magnitude": lambda f, x: f.generic_gradient_magnitude(
        x, scipy.ndimage.sobel, mode=("nearest", "reflect")),
    "generic_gradient_magnitude-output": lambda f, x: f.generic_gradient_magnitude(
        x, scipy.ndimage.prewitt, output=np.zeros_like(x)),
}
RANK = {
    "maximum_filter": lambda f, x: f.maximum_filter(x, 3, mode="mirror"),
    "minimum_filter-footprint": lambda f, x: f.minimum_filter(
        x, footprint=np.array([[1, 0, 1], [0, 1, 1]], bool), mode="constant", cval=-0.1),
    "median_filter": lambda f, x: f.median_filter(x, size=(3, 2)),
    "median_filter-1d-even": lambda f, x: f.median_filter(x[0], 4),
    "rank_filter": lambda f, x: f.rank_filter(x, 2, size=3, mode="wrap"),
    "percentile_filter": lambda f, x: f.percentile_filter(x, 30, size=(2, 3), mode="nearest"),
    "maximum_filter1d": lambda f, x: f.maximum_filter1d(x, 3, axis=0),
    "minimum_filter1d": lambda f, x: f.minimum_filter1d(x, 2, mode="constant", cval=0.1),
    "maximum_filter-origin": lambda f, x: f.maximum_filter(x, 3, origin=1, mode="wrap"),
    "maximum_filter-modes": lambda f, x: f.maximum_filter(x, (2, 3), mode=["nearest", "wrap"]),
    "median_filter-footprint-origin": lambda f, x: f.median_filter(
        x, footprint=np.ones((3, 2), bool), origin=(-1, 0), mode="mirror"),
    "rank_filter-axes": lambda f, x: f.rank_filter(x, -2, size=3, axes=(1,)),
    "percentile_filter-axes": lambda f, x: f.percentile_filter(x, 80, size=[4], axes=[0],
                                                               mode="constant", cval=0.5),
}
CASES = {**LINEAR, **SMOOTH, **RANK}


@pytest.fixture
def image(rng):
    return rng.normal(size=(7, 6))


def weighted(y):
    """A loss giving each output element its own cotangent."""
    return (y * np.sqrt(np.arange(1.0, y.size + 1)).reshape(np.shape(y))).sum() + (y * y).sum()


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("module", ["scipy", "mutad"])
def test_values_are_scipys_own(name, module, image):
    call, f = CASES[name], scipy.ndimage if module == "scipy" else ndimage
    before = image.tobytes()
    y, _ = mutad.jvp(lambda x: call(f, x), (image,), (np.ones_like(image),))
    expected = call(scipy.ndimage, image)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()
    assert image.tobytes() == before


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_gradients(name, policy, image):
    call = CASES[name]
    mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x)), image, policy=policy)


@pytest.mark.parametrize("name", CASES)
def test_forward_mode(name, image):
    call = CASES[name]
    mutad.check_jvp(lambda x: weighted(call(ndimage, x)), image)


@pytest.mark.parametrize("name", CASES)
def test_second_order(name, image):
    call = CASES[name]
    mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x)), image[:5, :4], order=2)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_with_traced_weights_and_cval(mode, rng):
    # Filters longer than the image too: SciPy extends the lines more than once.
    x, w1, w2 = rng.normal(size=(4, 3)), rng.normal(size=6), rng.normal(size=(3, 2))

    def f(x, w1, w2, c):
        return (weighted(scipy.ndimage.correlate1d(x, w1, 0, mode=mode, cval=c, origin=-2))
                + weighted(scipy.ndimage.convolve1d(x, w1, 1, mode=mode, cval=c))
                + weighted(scipy.ndimage.correlate(x, w2, mode=mode, cval=c, origin=(1, 0)))
                + weighted(scipy.ndimage.convolve(x, w2, mode=mode, cval=c)))

    args = (x, w1, w2, 0.3)
    mutad.check_grads(f, *args)
    mutad.check_grads(f, *args, policy="checkpoint")
    mutad.check_grads(f, *args, order=2)


def test_the_transpose_is_the_adjoint(rng):
    # <y', A x> = <Aᵀ y', x> for the filter as a matrix, built column by column from SciPy.
    x = rng.normal(size=(5, 4))
    for mode in MODES:
        call = lambda x: scipy.ndimage.correlate(x, np.array([[1.0, 2, 3], [4, 5, 6]]), mode=mode)
        matrix = np.stack([call(e.reshape(x.shape)).ravel() for e in np.eye(x.size)], axis=1)
        cotangent = rng.normal(size=x.shape)
        (g,) = mutad.gradient(lambda x: (call(x) * cotangent).sum(), x)
        np.testing.assert_allclose(g.ravel(), matrix.T @ cotangent.ravel(), rtol=1e-12,
                                   atol=1e-12)


# output= ---------------------------------------------------------------------------------------


def harris(img):
    """A Harris corner response, written as in a textbook, its sums in preallocated arrays."""
    Ix = sobel(img, 0)
    Iy = scipy.ndimage.sobel(img, axis=1)
    Sxx, Syy, Sxy = np.empty_like(img), np.empty_like(img), np.empty_like(img)
    gaussian_filter(Ix * Ix, 1.0, 0, Sxx)                # output positionally
    gaussian_filter(Iy * Iy, 1.0, output=Syy)            # by name
    scipy.ndimage.gaussian_filter(Ix * Iy, 1.0, output=Sxy)
    R = Sxx * Syy - Sxy ** 2 - 0.05 * (Sxx + Syy) ** 2
    return (R * R).sum()


def test_harris_corner_detector(rng):
    img = rng.normal(size=(8, 9))
    value, _ = mutad.value_and_gradient(harris, img)
    assert value == harris(img)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(harris, img, policy=policy)
    mutad.check_jvp(harris, img)
    mutad.check_grads(harris, img[:5, :5], order=2)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_output_written_in_place_is_restored(policy, rng):
    def f(x):
        y = x * 1.0
        gaussian_filter(y, 1.0, output=y)                     # its own input
        out = np.zeros_like(x)
        scipy.ndimage.maximum_filter(y, 2, output=out)
        scipy.ndimage.uniform_filter(out, 3, out)
        scipy.ndimage.median_filter(out, 3, output=out[...])
        return (y * out).sum()

    mutad.check_grads(f, rng.normal(size=(6, 5)), policy=policy)
    mutad.check_jvp(f, rng.normal(size=(6, 5)))


@pytest.mark.parametrize("name", ["white_tophat", "black_tophat"])
def test_a_tophat_into_its_own_input_reads_the_input_after_the_write(name, rng):
    """SciPy writes the opening (closing) into output= and then takes its difference with the
    input there: with output= the input, the input it reads is the opening itself."""
    def f(x):
        y = x * 1.0
        getattr(scipy.ndimage, name)(y, 3, output=y)
        return (y * y).sum() + (x * y).sum()

    x = rng.normal(size=(6, 5))
    before = x.tobytes()
    value, grads = mutad.value_and_gradient(f, x)
    assert value == f(x.copy()) == (x * 0.0).sum()
    assert not grads[0].any()
    assert x.tobytes() == before
    mutad.check_jvp(f, x)


STREAMED = {
    "correlate1d": lambda x, out: scipy.ndimage.correlate1d(x, [1.0, 2.0, 1.0], 0, out),
    "convolve1d": lambda x, out: scipy.ndimage.convolve1d(x, [1.0, 2.0], 1, out),
    "uniform_filter1d": lambda x, out: scipy.ndimage.uniform_filter1d(x, 3, 0, out),
    "uniform_filter": lambda x, out: scipy.ndimage.uniform_filter(x, 3, out),
    "gaussian_filter1d": lambda x, out: scipy.ndimage.gaussian_filter1d(x, 1.0, 0, output=out),
    "gaussian_filter": lambda x, out: scipy.ndimage.gaussian_filter(x, 1.0, output=out),
    "sobel": lambda x, out: scipy.ndimage.sobel(x, 0, out),
    "laplace": lambda x, out: scipy.ndimage.laplace(x, out),
    "gaussian_laplace": lambda x, out: scipy.ndimage.gaussian_laplace(x, 1.0, out),
    "gaussian_gradient_magnitude": lambda x, out: scipy.ndimage.gaussian_gradient_magnitude(
        x, 1.0, out),
    "maximum_filter1d": lambda x, out: scipy.ndimage.maximum_filter1d(x, 3, 0, out),
    "fourier_gaussian": lambda x, out: scipy.ndimage.fourier_gaussian(x, 1.0, output=out),
    "spline_filter1d": lambda x, out: scipy.ndimage.spline_filter1d(x, 3, 0, out),
    "spline_filter": lambda x, out: scipy.ndimage.spline_filter(x, 3, out),
}


@pytest.mark.parametrize("name", STREAMED)
def test_a_line_filter_into_its_input_in_another_layout_is_refused(name, rng):
    """SciPy filters these from the input straight into the output, a buffer of lines at a
    time: into the input transposed, later lines are read after earlier ones were written
    (an image of more lines than the buffer holds gives other values than a separate
    output's). Into the input itself, each line is read before it is written: followed."""
    x = rng.normal(size=(300, 300))
    before = x.tobytes()

    def into(view):
        def f(x):
            y = x * 1.0
            STREAMED[name](y, view(y))
            return (y * y).sum()
        return f

    with pytest.raises(UnsupportedOperationError, match="another layout"):
        mutad.gradient(into(np.transpose), x)
    assert x.tobytes() == before
    value, _ = mutad.value_and_gradient(into(lambda y: y), x[:6, :5])
    assert value == into(lambda y: y)(x[:6, :5])


@pytest.mark.parametrize("name", ["uniform_filter1d", "gaussian_filter", "laplace",
                                  "maximum_filter1d", "spline_filter1d", "fourier_gaussian"])
def test_a_filter_of_a_1d_input_into_it_shifted(name, rng):
    """A 1-d input is one line, which SciPy reads whole before it writes: followed; the
    Fourier filters' writes are not line by line: refused."""
    def f(x):
        y = x * 1.0
        STREAMED[name](y[1:] if name != "fourier_gaussian" else y[::-1],
                       y[:-1] if name != "fourier_gaussian" else y)
        return (y * y * np.arange(9)).sum()

    x = rng.normal(size=9)
    if name == "fourier_gaussian":
        with pytest.raises(UnsupportedOperationError, match="another layout"):
            mutad.gradient(f, x)
        return
    value, _ = mutad.value_and_gradient(f, x)
    assert value == f(x.copy())
    mutad.check_grads(f, x)


def test_output_dtype_rounds_as_scipy_does(rng):
    x = rng.normal(size=(6, 5))
    for output in (np.float32, "float32", np.dtype(np.float32)):
        y, _ = mutad.jvp(lambda x: gaussian_filter(x, (0.8, 1.5), output=output), (x,), (x,))
        assert y.dtype == np.float32
        assert y.tobytes() == scipy.ndimage.gaussian_filter(x, (0.8, 1.5), output=output).tobytes()
    mutad.check_grads(lambda x: scipy.ndimage.sobel(x, output=np.float32).astype(float).sum()
                      + (x * x).sum(), x, rtol=1e-3, atol=1e-3, step=1e-2)


def test_an_output_made_outside_the_function_is_followed_and_left_as_numpy_leaves_it(rng):
    """An output made before the call, reached by a closure: the filter's write adopts it, and
    it holds the filtered values afterwards, NumPy's plain ones (docs/sharp-bits.md, 'What
    the function leaves in your state')."""
    x, out = rng.normal(size=(5, 4)), np.zeros((5, 4))
    before = x.tobytes()
    expected = mutad.gradient(lambda x: (gaussian_filter(x, 1.0) ** 2).sum(), x)[0]
    got = mutad.gradient(lambda x: (gaussian_filter(x, 1.0, output=out) ** 2).sum(), x)[0]
    assert got.tobytes() == expected.tobytes()
    assert type(out) is np.ndarray and out.tobytes() == gaussian_filter(x, 1.0).tobytes()
    assert x.tobytes() == before
    out[...] = 0.0
    held = collections.deque([out])  # reached only through a deque: not followed
    with pytest.raises(UntracedWriteError, match="allocate the output"):
        mutad.gradient(lambda x: gaussian_filter(x, 1.0, output=held[0]).sum(), x)
    assert not out.any()


def test_integer_outputs_are_refused(rng):
    x = rng.normal(size=(5, 4))
    with pytest.raises(UnsupportedOperationError, match="float outputs"):
        mutad.gradient(lambda x: gaussian_filter(x, 1.0, output=np.int32).sum(), x)


@pytest.mark.parametrize("call", [
    lambda x, c: scipy.ndimage.maximum_filter(x, 3, mode="constant", cval=c),
    lambda x, c: scipy.ndimage.median_filter(x, (3, 2), mode="constant", cval=c),
    lambda x, c: scipy.ndimage.percentile_filter(x, 30, 3, mode="constant", cval=c),
    lambda x, c: scipy.ndimage.minimum_filter1d(x, 4, axis=0, mode="constant", cval=c)])
def test_a_differentiated_cval_of_a_rank_filter(call, rng):
    """Rank filters with a differentiated cval (was refused): the outputs that took the
    constant from their window's extension are cval, the others the elements they took;
    SciPy's values bit for bit, of a differentiated image or of a constant one."""
    x = rng.normal(size=(5, 4))
    before = x.tobytes()

    def f(x, c):
        return weighted(call(x, c))

    y, _ = mutad.jvp(call, (x, 0.4), (np.ones_like(x), 1.0))
    assert y.tobytes() == call(x, 0.4).tobytes()
    assert (call(x, 0.4) == 0.4).any()  # (some outputs do take cval)
    mutad.check_grads(f, x, 0.4)
    mutad.check_jvp(f, x, 0.4)
    mutad.check_grads(lambda c: f(x, c), 0.4, order=2)
    replays_as_traced(f, [(x, 0.4), (x * 1.1, 0.45), (x, -0.3)], argnums=(0, 1), replayed=2)
    assert x.tobytes() == before


IMAGE = np.random.default_rng(7).random((8, 7))


@pytest.mark.parametrize("f", [
    lambda s: np.sum(gaussian_filter(IMAGE, s[0]) ** 2),
    lambda s: np.sum(gaussian_filter(IMAGE * s[1], s, mode="nearest") ** 2),
    lambda s: np.sum(scipy.ndimage.gaussian_filter1d(IMAGE, s[1], order=1, axis=0) ** 2),
    lambda s: np.sum(gaussian_filter(IMAGE, s, order=(0, 2)) ** 2),
    lambda s: np.sum(scipy.ndimage.gaussian_laplace(IMAGE, s[0]) ** 2)
    + scipy.ndimage.gaussian_gradient_magnitude(IMAGE, s[1]).sum(),
], ids=["scalar", "per_axis", "derivative_1d", "second_derivative", "laplace_magnitude"])
def test_gaussian_filters_in_sigma(f):
    """A differentiated sigma: SciPy's kernel's steps on it (its radius decided from its value,
    a whole number, so that a replay where it changes is traced again)."""
    s = np.array([1.3, 0.8])
    before = s.tobytes()
    value, _ = mutad.value_and_grad(f)(s)
    assert value == f(s.copy())
    mutad.check_grads(f, s)
    mutad.check_jvp(f, s)
    replays_as_traced(f, [(s,), (s * 1.05,), (s * 1.5,)])  # (a longer kernel at 1.5)
    assert s.tobytes() == before


def test_plain_calls_are_scipys_own(rng):
    x = rng.normal(size=(5, 4))
    for call in CASES.values():
        assert call(ndimage, x).tobytes() == call(scipy.ndimage, x).tobytes()


# Rank filters: the selection is a decision kept ----------------------------------------------


def test_ties_send_the_cotangent_to_one_element():
    x = np.array([1.0, 3.0, 3.0, 0.0, 3.0])
    (g,) = mutad.gradient(lambda x: scipy.ndimage.maximum_filter1d(x, 3).sum(), x)
    (h,) = mutad.gradient(lambda x: scipy.ndimage.maximum_filter1d(x, 3).sum(), x,
                          policy="checkpoint")
    assert g.sum() == 5.0 and np.array_equal(g, h)


@pytest.mark.parametrize("name", ["maximum_filter", "median_filter", "rank_filter"])
def test_rank_decisions_survive_restoration_by_inversion(name):
    x = np.array([[0.0, 0.7, 0.2, 0.0], [0.4, 0.7, 0.0, 0.2], [0.1, 0.1, 0.5, 0.3]])
    check_decision_kept(then_disturbed(lambda x: RANK[name](scipy.ndimage, x)), x,
                        differentiable=False)


# Interpolation ---------------------------------------------------------------------------------

COORDINATES = np.stack([np.linspace(-1.5, 6.5, 12).reshape(3, 4),
                        np.linspace(5.4, -1.3, 12).reshape(3, 4)])
INTERPOLATION = {
    "shift": lambda f, x, order, mode: f.shift(x, (0.3, -1.7), order=order, mode=mode, cval=0.4),
    "zoom": lambda f, x, order, mode: f.zoom(x, (1.5, 0.7), None, order, mode, 0.4),
    "zoom-grid-mode": lambda f, x, order, mode: f.zoom(x, 1.3, order=order, mode=mode,
                                                       grid_mode=True),
    "affine_transform-diagonal": lambda f, x, order, mode: f.affine_transform(
        x, [0.8, 1.1], offset=(0.5, -0.2), order=order, mode=mode),
    "affine_transform": lambda f, x, order, mode: f.affine_transform(
        x, [[0.9, 0.2], [-0.1, 1.05]], (0.5, -0.2), (5, 6), order=order, mode=mode, cval=0.2),
    "rotate": lambda f, x, order, mode: f.rotate(x, 23.0, order=order, mode=mode, cval=0.1),
    "map_coordinates": lambda f, x, order, mode: f.map_coordinates(
        x, COORDINATES, order=order, mode=mode, cval=0.1),
}


@pytest.mark.filterwarnings("ignore:It is recommended to use mode")  # zoom's, at grid_mode
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [0, 1, 3, 5])
@pytest.mark.parametrize("name", INTERPOLATION)
def test_interpolation_of_the_image(name, order, mode, image):
    if order == 0 and name in ("affine_transform", "rotate"):
        pytest.skip("refused: see test_nearest_interpolation_of_a_rotation_is_refused")
    call = lambda f, x: INTERPOLATION[name](f, x, order, mode)  # noqa: E731
    y, _ = mutad.jvp(lambda x: call(scipy.ndimage, x), (image,), (image,))
    assert y.tobytes() == call(scipy.ndimage, image).tobytes()
    mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x)), image, step=1e-3)
    mutad.check_jvp(lambda x: weighted(call(ndimage, x)), image, step=1e-3)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [2, 3, 5])
def test_spline_filters(order, mode, image):
    def f(x):
        coefficients = scipy.ndimage.spline_filter(x, order, mode=mode)
        along = scipy.ndimage.spline_filter1d(x, order, 0, np.float32, mode)
        out = np.zeros_like(x)
        scipy.ndimage.spline_filter1d(x, order, axis=1, output=out, mode=mode)
        shifted = scipy.ndimage.shift(coefficients, (0.3, 0.6), order=order, mode=mode,
                                      prefilter=False)
        return weighted(shifted) + weighted(along.astype(float)) + weighted(out)

    for call in (lambda x: scipy.ndimage.spline_filter(x, order, mode=mode),
                 lambda x: scipy.ndimage.spline_filter1d(x, order, 0, np.float32, mode)):
        y, _ = mutad.jvp(call, (image,), (image,))
        assert y.tobytes() == call(image).tobytes()
    mutad.check_grads(f, image, rtol=1e-4, atol=1e-4, step=1e-2)
    mutad.check_jvp(f, image, rtol=1e-4, atol=1e-4, step=1e-2)


@pytest.mark.parametrize("name", ["zoom", "rotate", "map_coordinates"])
def test_interpolation_second_order(name, image):
    call = INTERPOLATION[name]
    mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x, 3, "mirror")), image, order=2,
                      policy="checkpoint")


def test_rotating_a_volume_rotates_each_plane(rng):
    x = rng.normal(size=(4, 5, 3))
    call = lambda x: scipy.ndimage.rotate(x, 40, axes=(0, 2), order=1)  # noqa: E731
    y, _ = mutad.jvp(call, (x,), (x,))
    assert y.tobytes() == call(x).tobytes()
    mutad.check_grads(lambda x: weighted(call(x)), x)


@pytest.mark.parametrize("mode", ["reflect", "mirror", "nearest", "grid-wrap", "grid-mirror"])
def test_linear_interpolation_in_its_coordinates(mode, image):
    def f(x, c, s):
        return (weighted(scipy.ndimage.map_coordinates(x, c, order=1, mode=mode))
                + weighted(scipy.ndimage.shift(x, s, order=1, mode=mode)))

    args = (image, COORDINATES, np.array([0.3, -1.7]))
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *args, policy=policy)
    mutad.check_jvp(f, *args)
    mutad.check_grads(f, *args, order=2)
    mutad.check_grads(lambda s: weighted(ndimage.shift(image, s, order=1, mode=mode)), 0.4)


AFFINE = {
    "square": lambda x, a: scipy.ndimage.affine_transform(x, a[:4].reshape(2, 2), order=1,
                                                         mode="nearest"),
    "offset": lambda x, a: scipy.ndimage.affine_transform(x, a[:4].reshape(2, 2), offset=a[4:],
                                                         order=1, mode="reflect"),
    "a number as offset": lambda x, a: scipy.ndimage.affine_transform(
        x, np.eye(2), offset=a[4], order=1, mode="grid-mirror"),
    "diagonal, another shape": lambda x, a: scipy.ndimage.affine_transform(
        x, a[[0, 3]], offset=0.13, output_shape=(5, 4), order=1, mode="nearest"),
    "homogeneous": lambda x, a: scipy.ndimage.affine_transform(
        x, np.vstack([np.hstack([a[:4].reshape(2, 2), a[4:, None]]), [0.0, 0.0, 1.0]]),
        order=1, mode="mirror"),
    "constant beyond the edges": lambda x, a: scipy.ndimage.affine_transform(
        x, a[:4].reshape(2, 2), offset=a[4:], order=1, mode="constant", cval=0.3),
}


@pytest.mark.parametrize("name", AFFINE)
def test_affine_transform_in_its_matrix_and_offset(name, image):
    """Registration by an affine map: the matrix and offset were refused as constants; order
    1 is differentiated in them (map_coordinates' derivative at linear @ index + offset),
    SciPy's values bit for bit, in both modes, under both policies, replayed."""
    call = AFFINE[name]
    a = np.array([1.02, 0.053, -0.047, 0.97, 0.31, -0.22])

    def f(x, a):
        return weighted(call(x, a))

    y, _ = mutad.jvp(lambda a: call(image, a), (a,), (a,))
    assert y.tobytes() == call(image, a).tobytes()
    assert mutad.value_and_grad(f, argnums=(0, 1))(image, a)[0] == f(image, a)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, image, a, policy=policy)
    mutad.check_jvp(f, image, a)
    replays_as_traced(f, [(image, a), (image, a[::-1] * 0.9)], argnums=(0, 1))


def test_a_second_derivative_in_the_matrix_or_angle_is_refused_by_name(image):
    """The rules of a traced matrix (and of rotate's traced angle) are of the first order:
    a Hessian-vector product in it is refused, naming map_coordinates, rather than failing
    as a conversion of the enclosing differentiation's matrix."""
    def affine(x, t):
        c, s = np.cos(t), np.sin(t)
        return weighted(scipy.ndimage.affine_transform(x, np.array([[c, -s], [s, c]]), order=1))

    def rotate(x, t):
        return weighted(scipy.ndimage.rotate(x, t, reshape=False, order=1))

    for f in (affine, rotate):
        mutad.check_grads(f, image, 0.1)
        with pytest.raises(UnsupportedOperationError, match="map_coordinates"):
            mutad.hvp(f, (image, 0.1), (None, 1.0))


@pytest.mark.parametrize("matrix_traced, order, mode", [
    (False, 1, "constant"), (False, 3, "constant"), (False, 1, "wrap"), (False, 3, "wrap"),
    (True, 1, "constant"), (True, 3, "constant")])  # (a traced matrix is refused with "wrap")
def test_affine_transform_at_an_edge_it_rounds_to(matrix_traced, order, mode, rng):
    """The output at index (10, 0) reads the image at (10.4, 11.0) by the matrix product, and
    at 11.000000000000002 in SciPy's own arithmetic (the offset first, then each entry times
    its index): beyond the last row, where 'constant' gives cval and 'wrap' jumps across its
    seam. The weights of the derivative were taken at the product's coordinates, so the
    image's gradient had a term SciPy's value has not."""
    x = rng.uniform(0.5, 1.5, (12, 12))
    matrix = np.array([[1.1, 0.1], [-0.1, 1.1]])

    def f(x):
        m = matrix + 0.0 * x[0, 0] if matrix_traced else matrix  # the same values
        return weighted(scipy.ndimage.affine_transform(x, m, offset=(0.5, -0.3), order=order,
                                                       mode=mode))

    followed_as_scipy(f, x, x * 0.9)


def test_interpolation_refusals(image):
    with pytest.raises(UnsupportedOperationError, match="mode='wrap'"):
        mutad.gradient(lambda c: scipy.ndimage.map_coordinates(image, c, mode="wrap").sum(),
                       COORDINATES)
    with pytest.raises(UnsupportedOperationError, match="mode='wrap'"):
        mutad.gradient(lambda s: scipy.ndimage.shift(image, s, order=1, mode="wrap").sum(), 0.5)
    with pytest.raises(UnsupportedOperationError, match="mode='grid-constant'"):
        mutad.gradient(lambda m: scipy.ndimage.affine_transform(
            image, m, mode="grid-constant", cval=1.0).sum(), np.eye(2))
    with pytest.raises(UnsupportedOperationError, match="order=0"):  # SciPy's coordinates pick
        mutad.gradient(lambda m: scipy.ndimage.affine_transform(image, m, order=0).sum(),
                       np.eye(2))


@pytest.mark.parametrize("order, mode", [(3, "constant"), (3, "nearest"), (3, "mirror"),
                                         (0, "constant"), (2, "reflect"), (2, "grid-mirror"),
                                         (4, "grid-wrap"), (5, "grid-constant")])
def test_spline_interpolation_in_its_coordinates(order, mode, rng):
    """Registration with SciPy's default cubic splines (order=3, mode='constant'): only order
    1 was differentiated in the coordinates. Between knots each weight is a polynomial in the
    coordinate, differentiated through SciPy's own weights; points near and beyond the edges,
    the shift and an affine map's matrix, to second order."""
    image = rng.normal(size=(5, 6))
    coordinates = np.stack([rng.uniform(-1.5, 5.5, 8), rng.uniform(-1.5, 6.5, 8)])

    def f(c, x, s):
        return (weighted(scipy.ndimage.map_coordinates(x, c, order=order, mode=mode))
                + weighted(scipy.ndimage.shift(x, s, order=order, mode=mode)))

    def rotated(t, x):
        rotation = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        return weighted(scipy.ndimage.affine_transform(x, rotation, offset=(0.3, -0.2),
                                                       order=order, mode=mode))

    args = (coordinates, image, np.array([0.3, -1.7]))
    assert mutad.value_and_grad(f, argnums=(0, 1, 2))(*args)[0] == f(*args)
    mutad.check_grads(f, *args, order=2 if order == 3 else 1)
    mutad.check_jvp(f, *args)
    replays_as_traced(f, [args, (coordinates * 0.9, image, args[2] + 0.4)], argnums=(0, 1, 2))
    if order:  # (at order 0 SciPy's own coordinates pick the elements: refused)
        assert mutad.value_and_grad(rotated, argnums=(0, 1))(0.2, image)[0] == rotated(0.2,
                                                                                     image)
        mutad.check_grads(rotated, 0.2, image)
        mutad.check_jvp(rotated, 0.2, image)


def test_the_zoom_enters_through_the_output_shape_alone(image):
    """SciPy reads the zoom only through round(n * zoom): the output is piecewise constant in
    it, its derivative 0 (it was refused), in both modes; the image's gradient as before."""
    def f(z, x):
        return weighted(scipy.ndimage.zoom(x, z, order=1)) + weighted(scipy.ndimage.zoom(
            x, [z[0], 1.0], order=3, grid_mode=True, mode="grid-constant"))

    z = np.array([1.3, 0.8])  # (n * z away from a half: the shape stays within a step)
    value, (dz, dx) = mutad.value_and_gradient(f, z, image)
    assert value == f(z, image) and not dz.any()
    assert mutad.jvp(lambda z: f(z, image), (z,), (np.ones(2),))[1] == 0.0
    mutad.check_grads(f, z, image)


@pytest.mark.parametrize("order, mode, reshape", [(1, "nearest", False), (3, "constant", True),
                                                  (3, "reflect", False)])
def test_a_rotation_in_its_angle(order, mode, reshape, rng):
    """Registration by a rotation: the angle was refused as a constant. An image's rotation is
    SciPy's affine_transform by its matrix and the offset that keeps the centre: SciPy's
    values bit for bit, differentiated through them."""
    image = rng.normal(size=(5, 6))

    def f(angle, x):
        return weighted(scipy.ndimage.rotate(x, angle, reshape=reshape, order=order, mode=mode))

    assert mutad.value_and_grad(f, argnums=(0, 1))(23.0, image)[0] == f(23.0, image)
    mutad.check_grads(f, 23.0, image)
    mutad.check_jvp(f, 23.0, image)
    replays_as_traced(f, [(23.0, image), (31.0, image)], argnums=(0, 1))


@pytest.mark.parametrize("axes, reshape, output", [((1, 2), True, None), ((2, 0), False, None),
                                                   ((0, 1), True, np.float64),
                                                   ((0, 2), False, "array")])
def test_a_volume_rotation_in_its_angle(axes, reshape, output, rng):
    """A volume turned by a differentiated angle (was refused): SciPy rotates each plane
    parallel to ``axes`` as an image; so does mutad, the same values bit for bit, into the
    caller's output array too."""
    volume = rng.normal(size=(3, 5, 4))
    before = volume.tobytes()

    def f(angle, x):
        into = np.zeros_like(x) if output == "array" else output
        y = scipy.ndimage.rotate(x, angle, axes=axes, reshape=reshape, output=into, order=1)
        return weighted(into if output == "array" else y)

    assert mutad.value_and_grad(f, argnums=(0, 1))(23.0, volume)[0] == f(23.0, volume)
    mutad.check_grads(f, 23.0, volume)
    mutad.check_jvp(f, 23.0, volume)
    assert volume.tobytes() == before


def test_nearest_interpolation_of_a_rotation_is_refused(image):
    with pytest.raises(UnsupportedOperationError, match="order=0"):
        mutad.gradient(lambda x: scipy.ndimage.rotate(x, 30, order=0).sum(), image)


def shear(point, a, b=0.0):
    """A mapping of output coordinates to input ones, plain Python as SciPy's users write it."""
    return (point[0] * 0.9 + a * point[1] - 0.3, point[1] * 1.1 + b)


@pytest.mark.parametrize("mode", ["constant", "nearest", "mirror", "grid-wrap"])
@pytest.mark.parametrize("order", [0, 1, 3])
def test_geometric_transform_of_the_image(order, mode, image):
    def call(f, x):
        return f.geometric_transform(x, shear, (6, 5), order=order, mode=mode, cval=0.2,
                                     extra_arguments=(0.25,), extra_keywords={"b": -0.4})

    before = image.tobytes()
    y, _ = mutad.jvp(lambda x: call(scipy.ndimage, x), (image,), (image,))
    assert y.tobytes() == call(scipy.ndimage, image).tobytes()
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x)), image, policy=policy)
    mutad.check_jvp(lambda x: weighted(call(ndimage, x)), image)
    mutad.check_grads(lambda x: weighted(call(scipy.ndimage, x)), image, order=2)
    assert image.tobytes() == before


def test_geometric_transform_into_an_output_and_refusals(image):
    def f(x):
        out = np.zeros((4, 4))
        scipy.ndimage.geometric_transform(x, lambda p: (p[0] + 0.5, p[1] * 1.2), (4, 4),
                                          output=out, order=1)
        return weighted(out)

    mutad.check_grads(f, image)


@pytest.mark.parametrize("passed", ["closure", "extra_arguments", "extra_keywords"])
@pytest.mark.parametrize("order", [1, 3])
def test_geometric_transform_of_a_differentiated_mapping(passed, order, image):
    """A mapping of differentiated parameters (was refused; one passed by extra_arguments
    was taken as a constant: a silent zero): map_coordinates' at the coordinates it gives,
    SciPy's values bit for bit, differentiated in the parameters and the image."""
    before = image.tobytes()

    def f(s, x):
        kwargs = {"closure": {}, "extra_arguments": dict(extra_arguments=(s[0], s[1])),
                  "extra_keywords": dict(extra_keywords={"a": s[0], "b": s[1]})}[passed]
        mapping = (lambda p: shear(p, s[0], s[1])) if passed == "closure" else shear
        return weighted(scipy.ndimage.geometric_transform(x, mapping, (6, 5), order=order,
                                                          mode="nearest", **kwargs))

    s = np.array([0.23, -0.37])
    assert mutad.value_and_grad(f, argnums=(0, 1))(s, image)[0] == f(s, image)
    mutad.check_grads(f, s, image, modes=("rev", "fwd"))
    assert image.tobytes() == before


# Fourier filters ------------------------------------------------------------------------------

FOURIER = {
    "fourier_gaussian": lambda f, x: f.fourier_gaussian(x, 0.8),
    "fourier_gaussian-rfft": lambda f, x: f.fourier_gaussian(x, [0.8, 1.1], n=10, axis=1),
    "fourier_uniform-rfft": lambda f, x: f.fourier_uniform(x, 2.5, n=13, axis=0),
    "fourier_ellipsoid": lambda f, x: f.fourier_ellipsoid(x, [2.0, 3.0]),
    "fourier_shift": lambda f, x: f.fourier_shift(x, [0.3, -1.2]),
    "fourier_shift-rfft": lambda f, x: f.fourier_shift(x, 0.4, n=11, axis=-1),
}


def power(y):
    """A real loss of a real or complex y, each element weighted."""
    y = np.abs(y) ** 2 if np.iscomplexobj(y) else y * y
    return (y * np.arange(1.0, y.size + 1).reshape(np.shape(y))).sum()


@pytest.mark.parametrize("name", FOURIER)
def test_fourier_filters_of_real_inputs(name, image):
    call = FOURIER[name]
    before = image.tobytes()
    y, _ = mutad.jvp(lambda x: call(scipy.ndimage, x), (image,), (image,))
    expected = call(scipy.ndimage, image)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()
    assert call(ndimage, image).tobytes() == expected.tobytes()
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(lambda x: power(call(scipy.ndimage, x)), image, policy=policy)
    mutad.check_jvp(lambda x: power(call(ndimage, x)), image)
    mutad.check_grads(lambda x: power(call(scipy.ndimage, x)), image[:4, :5], order=2)
    assert image.tobytes() == before


@pytest.mark.parametrize("name", FOURIER)
def test_fourier_filters_of_complex_inputs(name, rng):
    call = FOURIER[name]
    re, im = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    z = re + 1j * im
    y, _ = mutad.jvp(lambda z: call(scipy.ndimage, z), (z,), (z,))
    assert y.dtype == np.complex128 and y.tobytes() == call(scipy.ndimage, z).tobytes()

    def f(re, im):
        z = np.empty(re.shape, dtype=complex)
        z.real, z.imag = re, im
        return power(call(scipy.ndimage, z))

    before = re.tobytes() + im.tobytes()
    mutad.check_grads(f, re, im)
    mutad.check_jvp(f, re, im)
    mutad.check_grads(f, re[:3], im[:3], order=2)
    assert re.tobytes() + im.tobytes() == before


def test_fourier_sigma_and_shift_are_differentiated(rng):
    z = rng.normal(size=(5, 6)) + 1j * rng.normal(size=(5, 6))
    x = rng.normal(size=(4, 7))
    sigmas, shifts = np.array([0.8, 1.3]), np.array([0.3, -0.8])
    gaussian = lambda s: power(scipy.ndimage.fourier_gaussian(z, s))  # noqa: E731
    rfft_gaussian = lambda s: power(scipy.ndimage.fourier_gaussian(z, s, n=9))  # noqa: E731
    shift = lambda s: power(scipy.ndimage.fourier_shift(z, s))  # noqa: E731
    rfft_shift = lambda s: power(scipy.ndimage.fourier_shift(x, s, n=12, axis=1))  # noqa: E731
    for f, p in ((gaussian, sigmas), (rfft_gaussian, 0.7), (shift, shifts), (rfft_shift, 0.4)):
        mutad.check_grads(f, p)
        mutad.check_jvp(f, p)
        mutad.check_grads(f, p, order=2)
    both = lambda x, s: power(scipy.ndimage.fourier_gaussian(x, s, n=12))  # noqa: E731
    mutad.check_grads(both, x, sigmas, order=2)


@pytest.mark.slow  # (about 2 s)
def test_fourier_box_and_ellipsoid_sizes_are_differentiated(rng):
    """The box's and the ellipsoid's sizes (were refused): their kernels' derivatives, in 1,
    2 and 3 dimensions, near a zero size (their series) too; SciPy's values bit for bit."""
    z = rng.normal(size=(5, 6)) + 1j * rng.normal(size=(5, 6))
    x, v = rng.normal(size=(4, 7)), rng.normal(size=(3, 4, 5))
    uniform = lambda s: power(scipy.ndimage.fourier_uniform(z, s))  # noqa: E731
    rfft_uniform = lambda s: power(scipy.ndimage.fourier_uniform(x, s, n=12, axis=1))  # noqa: E731
    ellipsoid = lambda s: power(scipy.ndimage.fourier_ellipsoid(z, s))  # noqa: E731
    line = lambda s: power(scipy.ndimage.fourier_ellipsoid(z[0], s))  # noqa: E731
    volume = lambda s: power(scipy.ndimage.fourier_ellipsoid(v, s, n=9))  # noqa: E731
    for f, p in ((uniform, np.array([2.0, 1.3])), (rfft_uniform, 1.7), (ellipsoid, 2.5),
                 (ellipsoid, np.array([0.01, 1e-3])), (line, 2.5), (volume, np.array(
                     [1.5, 2.0, 2.5]))):
        assert mutad.value_and_grad(f)(p)[0] == f(p)
        mutad.check_grads(f, p, modes=("rev", "fwd"))
    mutad.check_grads(uniform, np.array([2.0, 1.3]), order=2)
    both = lambda x, s: power(scipy.ndimage.fourier_ellipsoid(x, s))  # noqa: E731
    mutad.check_grads(both, x, np.array([1.2, 2.1]))


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_fourier_output_written_in_place_is_restored(policy, rng):
    def f(x, s):
        out = np.zeros(x.shape, dtype=complex)
        scipy.ndimage.fourier_shift(x, s, output=out)
        y = x * 1.0
        scipy.ndimage.fourier_gaussian(y, 0.7, output=y)        # its own input
        scipy.ndimage.fourier_uniform(out, 2.0, output=out)
        return power(out) + power(y)

    x, s = rng.normal(size=(5, 4)), np.array([0.2, 0.9])
    before = x.tobytes()
    mutad.check_grads(f, x, s, policy=policy)
    mutad.check_jvp(f, x, s)
    assert x.tobytes() == before


def test_fourier_output_types_are_scipys(rng):
    x = rng.normal(size=(5, 4))
    for output in (np.float32, np.complex64, np.complex128):
        call = lambda x: scipy.ndimage.fourier_gaussian(x, 0.9, output=output)  # noqa: E731
        y, _ = mutad.jvp(call, (x,), (x,))
        assert y.dtype == np.dtype(output) and y.tobytes() == call(x).tobytes()
    y, _ = mutad.jvp(lambda x: scipy.ndimage.fourier_uniform(x, 2.0), (x.astype(np.float32),),
                     (x.astype(np.float32),))
    assert y.dtype == np.float32


def test_fourier_refusals(rng):
    x = rng.normal(size=(5, 4))
    z = x + 1j
    with pytest.raises(UnsupportedOperationError, match="imaginary part"):
        mutad.gradient(lambda x: power(scipy.ndimage.fourier_gaussian(x + z, 1.0,
                                                                      output=np.float64)), x)
    held = collections.deque([np.zeros((5, 4))])  # through a deque: not followed
    with pytest.raises(UntracedWriteError, match="allocate the output"):
        mutad.gradient(lambda x: power(scipy.ndimage.fourier_gaussian(x, 1.0,
                                                                      output=held[0])), x)
    assert not held[0].any()


GENERIC_FILTERS = {
    "median": lambda x: scipy.ndimage.generic_filter(x, np.median, size=3),
    "range-constant-origin": lambda x: scipy.ndimage.generic_filter(
        x, lambda w: w.max() - w.min(), size=(2, 3), mode="constant", cval=0.5, origin=(0, 1)),
    "footprint-wrap-extra": lambda x: scipy.ndimage.generic_filter(
        x, lambda w, p, scale=1.0: scale * (w ** p).sum(), mode="wrap", extra_arguments=(2,),
        extra_keywords={"scale": 0.5}, footprint=np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]])),
    "float32-mirror": lambda x: scipy.ndimage.generic_filter(x.astype(np.float32), np.std, 3,
                                                             mode="mirror"),
    "ends-nearest-axes": lambda x: scipy.ndimage.generic_filter(x, lambda w: w[0] * w[-1], 4,
                                                                mode="nearest", axes=(1,)),
    "into-output": lambda x: scipy.ndimage.generic_filter(x, np.mean, 2, output=np.float32),
    # SciPy reads each window from the memory it writes into: later windows see earlier results
    "into-itself": lambda x: _into_itself(x * 1.0, np.mean, 3),
    "into-itself-float32-constant": lambda x: _into_itself(
        x.astype(np.float32), lambda w: w[0] - w.sum() / 7, (2, 3), mode="constant", cval=0.3),
}


def _into_itself(y, function, size, **settings):
    scipy.ndimage.generic_filter(y, function, size, output=y, **settings)
    return y


def test_generic_filter_into_its_input_in_another_layout_is_refused(rng):
    x = rng.normal(size=(5, 6))
    before = x.tobytes()
    for view in (lambda y: y[::-1], lambda y: y[1:], lambda y: y[:, ::-1]):
        with pytest.raises(UnsupportedOperationError, match="another layout"):
            mutad.gradient(lambda x: _into_itself_at(x * 1.0, view), x)
    assert x.tobytes() == before


def _into_itself_at(y, view):
    scipy.ndimage.generic_filter(y[:4, :5], np.mean, 3, output=view(y)[:4, :5])
    return (y * y).sum()


@pytest.mark.parametrize("name", GENERIC_FILTERS)
def test_generic_filter_calls_the_function_on_each_traced_window(name, rng):
    """SciPy's windows, boundaries and order: the values bit for bit SciPy's; the gradient
    through what the function computes of each window."""
    call = GENERIC_FILTERS[name]
    x = rng.normal(size=(5, 6))
    before = x.tobytes()
    y, _ = mutad.pullback(call, x)
    expected = call(x)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()
    if y.dtype == np.float64:
        mutad.check_grads(lambda x: (call(x) ** 2).sum(), x)
    assert x.tobytes() == before


def _smoothing_line(line, out, weight, power=1.0):
    """A generic_filter1d function as SciPy's documentation writes one: it fills ``out``."""
    out[...] = weight * line[:-2] ** power + line[1:-1] - line[2:] * line[1:-1]


@pytest.mark.parametrize("settings", [
    dict(axis=-1, mode="reflect"), dict(axis=0, mode="constant", cval=0.3),
    dict(axis=1, mode="wrap", origin=1), dict(axis=0, mode="nearest", origin=-1),
    dict(axis=1, mode="mirror", output=np.float64), dict(axis=0, mode="grid-wrap"),
    dict(axis=1, mode="reflect", output="array"), dict(axis=1, mode="reflect", output="input")],
    ids=lambda settings: "-".join(f"{k}={v}" for k, v in settings.items()))
def test_generic_filter1d_of_a_traced_image(settings, rng):
    """generic_filter1d of a differentiated image was refused: its function fills plain line
    buffers. Each line extended as SciPy extends it, the function called on it and on a new
    output line the differentiation follows: SciPy's values bit for bit, differentiated in
    the image and in an extra argument, replayed (each output line is a new array a replay
    makes again: the second call was traced)."""
    settings = dict(settings)
    into = settings.pop("output", None)

    def f(x, w):
        x = x * 1.0  # (the function's own copy, for output="input")
        output = {"array": np.zeros_like(x), "input": x}.get(into, into)
        y = scipy.ndimage.generic_filter1d(x, _smoothing_line, 3, output=output,
                                           extra_arguments=(w[0],),
                                           extra_keywords={"power": 2.0}, **settings)
        return weighted(x if into == "input" else output if into == "array" else y)

    x, w = rng.uniform(0.5, 1.5, (5, 4)), np.array([0.7])
    plain = f(x.copy(), w)
    assert mutad.value_and_grad(f, argnums=(0, 1))(x, w)[0] == plain
    mutad.check_grads(f, x, w)
    mutad.check_jvp(f, x, w)
    replays_as_traced(f, [(x, w), (x[::-1] * 0.9, w * 1.1)], argnums=(0, 1), replayed=1)


@pytest.mark.parametrize("name, f", [
    ("generic_filter", lambda c, x: scipy.ndimage.generic_filter(
        x, lambda w: w.max() - w.mean(), size=3, mode="constant", cval=c[0])),
    ("generic_filter-into-itself", lambda c, x: _into_itself(x * c[1], np.mean, (2, 3),
                                                             mode="constant", cval=c[0] ** 2)),
    ("generic_filter1d", lambda c, x: scipy.ndimage.generic_filter1d(
        x, _smoothing_line, 3, mode="constant", cval=c[0], extra_arguments=(0.5,)))])
def test_generic_filters_of_a_differentiated_cval(name, f, rng):
    """A differentiated cval (refused; a constant image's went to SciPy's compiled filter as a
    conversion): the extension's constant, gathered into the windows as the image's elements
    are, so it takes the derivatives of the windows it fills."""
    x = rng.normal(size=(5, 6))
    before = x.tobytes()

    def g(c):
        return weighted(f(c, x))

    c = np.array([0.3, 1.2])
    assert mutad.value_and_grad(g)(c)[0] == g(c)
    mutad.check_grads(g, c, modes=("rev", "fwd"))
    replays_as_traced(g, [(c,), (c * 1.1,), (c,)])
    assert x.tobytes() == before


def test_generic_filters_of_plain_images_in_a_differentiation(rng):
    """A plain image inside a differentiation is SciPy's own."""
    x = rng.normal(size=(5, 4))
    (g,) = mutad.gradient(lambda s: s * scipy.ndimage.generic_filter(x, np.mean, 3).sum(), 2.0)
    assert g == scipy.ndimage.generic_filter(x, np.mean, 3).sum()
    (h,) = mutad.gradient(lambda x: scipy.ndimage.generic_filter(mutad.stop_gradient(x), np.mean,
                                                                 3).sum() + x.sum(), x)
    assert np.array_equal(h, np.ones_like(x))


@pytest.mark.parametrize("name", ["laplace", "gaussian_laplace", "gaussian_gradient_magnitude"])
def test_a_filter_into_its_own_input_reads_what_it_wrote_as_scipys(name, rng):
    """SciPy writes the first axis's term into the output, then reads the input for the
    others: an output that is the input makes them read the written values."""
    filt = getattr(scipy.ndimage, name)
    settings = () if name == "laplace" else (1.0,)

    def f(x):
        x = x * 1.0
        y = filt(x, *settings, output=x)
        return (x * x).sum() + (y * y).sum()

    x = rng.random((5, 6))
    before = x.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)
    assert x.tobytes() == before


def test_an_interpolation_into_its_own_input_is_refused_where_scipy_reads_its_writes(rng):
    x = rng.random((5, 6))
    for order in (0, 1):
        def into_itself(x, order=order):
            y = x * 1.0
            return scipy.ndimage.shift(y, 0.4, output=y, order=order).sum()

        with pytest.raises(UnsupportedOperationError, match="output=np.empty_like"):
            mutad.gradient(into_itself, x)

    def f(x):  # a prefiltered copy lies between: SciPy reads none of its writes
        x = x * 1.0
        scipy.ndimage.shift(x, 0.4, output=x)
        return (x * x).sum()

    assert mutad.value_and_grad(f)(x)[0] == f(x)


def test_coordinates_given_as_a_list_of_traced_arrays(rng):
    image = rng.random((5, 6))
    yy, xx = np.meshgrid(np.arange(5.0), np.arange(6.0), indexing="ij")

    def f(s):
        return (scipy.ndimage.map_coordinates(image, [yy + s[0], xx + s[1]], order=1,
                                              mode="nearest") ** 2).sum()

    s = np.array([0.3, 0.2])
    assert mutad.value_and_grad(f)(s)[0] == f(s)
    mutad.check_grads(f, s)


def test_a_shift_given_as_a_tuple_of_traced_numbers(rng):
    """(t[1], -t[0]) is the array NumPy makes of it (it raised ConversionError)."""
    image = rng.random((6, 7))

    def f(t):
        moved = scipy.ndimage.shift(image, (t[1], -t[0]), order=1, mode="nearest")
        spectrum = scipy.ndimage.fourier_shift(np.fft.fft2(image), [t[0], 0.5])
        return (moved ** 2).sum() + np.real(spectrum).sum()

    t = np.array([0.3, 0.2])
    assert mutad.value_and_grad(f)(t)[0] == f(t)
    mutad.check_grads(f, t)


@pytest.mark.parametrize("mode, cval", [("constant", 0.0), ("constant", 0.7),
                                        ("grid-constant", 0.0)])
def test_coordinates_near_and_beyond_the_edges_with_a_constant(mode, cval, rng):
    """SciPy's 'constant' mode gives the constant beyond the edges, not interpolated (flat
    there); 'grid-constant' interpolates toward it. Registration by shifting an image."""
    image = rng.random((6, 7))
    yy, xx = np.meshgrid(np.arange(6.0), np.arange(7.0), indexing="ij")

    def f(s):
        moved = scipy.ndimage.map_coordinates(image, [yy + s[0], xx + s[1]], order=1,
                                              mode=mode, cval=cval)
        return (moved ** 2).sum() + (scipy.ndimage.shift(image, s, order=1, mode=mode,
                                                         cval=cval) ** 2).sum()

    for s in (np.array([0.3, 0.2]), np.array([-0.4, 0.7]), np.array([1.3, -2.2])):
        assert mutad.value_and_grad(f)(s)[0] == f(s)
        mutad.check_grads(f, s)
        mutad.check_jvp(f, s)


# Grey morphology -------------------------------------------------------------------------------

CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)
STRUCTURE = np.array([[0.0, 0.3, 0.1], [0.2, 0.0, 0.4]])
GREY_SETTINGS = {
    "size": dict(size=3),
    "size-even-origin": dict(size=(2, 3), origin=(0, -1)),
    "footprint-constant": dict(footprint=CROSS, mode="constant", cval=0.45),
    "structure": dict(structure=STRUCTURE, mode="nearest"),
    "structure-footprint": dict(structure=STRUCTURE, footprint=[[1, 0, 1], [1, 1, 0]]),
    "axes": dict(size=3, axes=(1,), mode="wrap"),
}
GREY = ["grey_erosion", "grey_dilation", "grey_opening", "grey_closing",
        "morphological_gradient", "white_tophat", "black_tophat"]


@pytest.mark.parametrize("settings", GREY_SETTINGS)
@pytest.mark.parametrize("name", GREY)
def test_grey_morphology(name, settings, rng):
    """SciPy's values bit for bit; each output's cotangent to the element it selected, in
    both modes, under both policies, replayed."""
    x = rng.random((5, 6))
    call = lambda x: getattr(scipy.ndimage, name)(x, **GREY_SETTINGS[settings])  # noqa: E731
    expected = call(x)
    y, _ = mutad.jvp(call, (x,), (np.ones_like(x),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda x: (np.sin(call(x)) * np.arange(1.0, 31.0).reshape(5, 6)).sum()  # noqa: E731
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)
    replays_as_traced(f, [(rng.random((5, 6)),) for _ in range(3)])


@pytest.mark.parametrize("name, settings", [
    ("grey_erosion", dict(mode="nearest")), ("grey_dilation", dict(mode="constant", cval=0.3)),
    ("grey_dilation", dict(footprint=[[1, 0, 1], [1, 1, 0]])), ("grey_opening", {}),
    ("morphological_gradient", dict(mode="wrap"))])
def test_grey_morphology_of_a_differentiated_structure(name, settings, rng):
    """Each output the element it took plus (a dilation) or less (an erosion) the structure's
    value there: differentiated in the structure and the input, SciPy's values bit for bit."""
    x = rng.random((5, 6))
    weights = np.arange(1.0, 31.0).reshape(5, 6)

    def f(p):
        y = getattr(scipy.ndimage, name)(x * p[0], structure=p[1:].reshape(2, 3), **settings)
        return (np.sin(y) * weights).sum()

    # (values whose differences differ: an opening's candidates x[j] - s[b] + s[a] tie where
    # two differences are equal, a kink in the structure)
    structure = [0.031, 0.297, 0.113, 0.188, 0.0, 0.412]
    p = np.array([1.2, *structure])
    value, _ = mutad.value_and_gradient(f, p.copy())
    assert value == f(p.copy())
    mutad.check_grads(f, p, modes=("rev", "fwd"))
    assert p.tobytes() == np.array([1.2, *structure]).tobytes()


def test_grey_morphology_refusals(rng):
    x = rng.random((4, 4))
    with pytest.raises(UnsupportedOperationError, match="float"):
        mutad.gradient(lambda s: scipy.ndimage.grey_erosion(
            x, structure=s, output=np.int32).sum(), np.zeros((3, 3)))
    with pytest.raises(UnsupportedOperationError, match="float"):
        mutad.gradient(lambda x: scipy.ndimage.grey_dilation(x, 3, output=np.int32).sum(), x)


# Measurements over labelled regions ------------------------------------------------------------

LABELS = np.array([[1, 1, 0, 2, 2, 2], [1, 3, 0, 2, 0, 2], [3, 3, 3, 0, 5, 5],
                   [0, 3, 1, 1, 5, 5], [4, 4, 0, 1, 0, 5]])
REGIONS = {
    "whole": dict(),
    "labels": dict(labels=LABELS),
    "scalar-index": dict(labels=LABELS, index=3),
    "index": dict(labels=LABELS, index=[1, 2, 3, 4, 5]),
    "index-missing-repeated-2d": dict(labels=LABELS, index=np.array([[5, 7], [2, 5]])),
    "boolean-mask": dict(labels=LABELS > 2, index=[True]),
}
MEASURES = ["sum", "sum_labels", "mean", "variance", "standard_deviation", "minimum",
            "maximum", "median", "center_of_mass", "extrema"]


def _flat_measure(name, x, regions):
    result = getattr(scipy.ndimage, name)(x, **regions)
    if name == "extrema":
        result = result[:2]
    return np.ravel(np.array(result, dtype=float))


@pytest.mark.filterwarnings("ignore:invalid value")  # a mean of a missing label is 0 / 0
@pytest.mark.parametrize("regions", REGIONS)
@pytest.mark.parametrize("name", MEASURES)
def test_measurements_of_a_differentiated_image(name, regions, rng):
    """SciPy's values bit for bit, gradients of each region's value in both modes and
    policies (second order for the smooth ones), replays."""
    x = rng.permutation(30).reshape(5, 6) * 0.1 + 0.5  # no two values near: no ties
    expected = _flat_measure(name, x, REGIONS[regions])
    y, _ = mutad.jvp(lambda x: _flat_measure(name, x, REGIONS[regions]), (x,),
                     (np.ones_like(x),))
    assert np.asarray(y).tobytes() == expected.tobytes()

    def f(x):
        values = _flat_measure(name, x, REGIONS[regions])
        values = np.where(np.isnan(values), 0.0, values)
        return (values * np.arange(1.0, values.size + 1)).sum() + (values * values).sum()

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)
    if name not in ("minimum", "maximum", "median", "extrema"):
        mutad.check_grads(f, x, order=2)
    replays_as_traced(f, [(rng.random((5, 6)) + 0.5,) for _ in range(3)])


@pytest.mark.parametrize("case", ["mean", "max-positions", "scalar", "no-index", "no-labels",
                                  "default", "integer-output"])
def test_labeled_comprehension_calls_the_function_on_traced_regions(case, rng):
    x = rng.random((5, 6))

    def call(x):
        if case == "mean":
            return scipy.ndimage.labeled_comprehension(x, LABELS, [3, 1, 2], np.mean, float, 0.0)
        if case == "max-positions":
            return scipy.ndimage.labeled_comprehension(
                x, LABELS, [1, 5], lambda v, p: v.max() * p.mean(), np.float64, -1.0,
                pass_positions=True)
        if case == "scalar":
            return scipy.ndimage.labeled_comprehension(x, LABELS, 2, lambda v: (v ** 2).sum(),
                                                       float, 0.0)
        if case == "no-index":
            return scipy.ndimage.labeled_comprehension(x, LABELS, None, np.std, float, 0.0)
        if case == "no-labels":
            return scipy.ndimage.labeled_comprehension(x, None, None, np.sum, float, 0.0)
        if case == "default":
            return scipy.ndimage.labeled_comprehension(x, LABELS, [7, 4, 9], np.median, float,
                                                       0.25)
        return scipy.ndimage.labeled_comprehension(x, LABELS, [1, 2], np.argmax, int, -1) * x[0, 0]

    expected = np.asarray(call(x))
    y, _ = mutad.jvp(call, (x,), (np.ones_like(x),))
    assert np.asarray(y).tobytes() == expected.tobytes()
    f = lambda x: (np.sin(call(x)) * np.arange(1.0, np.size(expected) + 1)).sum()  # noqa: E731
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    replays_as_traced(f, [(rng.random((5, 6)),) for _ in range(3)])


def test_measurement_refusals(rng):
    x = rng.random((5, 6))
    with pytest.raises(UnsupportedOperationError, match="labels"):
        mutad.gradient(lambda x: scipy.ndimage.mean(x, x * 0.0 + LABELS, [1, 2]).sum(), x)
    # Labels computed from the image but held constant by the user are regions.
    f = lambda x: scipy.ndimage.mean(  # noqa: E731
        x, mutad.stop_gradient(np.floor(x * 3)), [1, 2]).sum()
    mutad.check_grads(f, x)


def test_settings_the_program_computes_are_constants():
    """Regression: a zoom, angle, matrix or cval computed in the function (a constant of the
    differentiation) reached the stand-in again and recursed without end; a constant shift
    array at order 3 was refused as a differentiated shift."""
    img = np.arange(12.0).reshape(3, 4) ** 1.5
    cases = [lambda x: ndimage.zoom(x, np.array(1.5), order=1),
             lambda x: ndimage.rotate(x, np.degrees(np.arctan2(1.0, np.ones(1)[0] * 2)),
                                      order=1),
             lambda x: ndimage.affine_transform(x, np.eye(2) * 0.9, order=1),
             lambda x: ndimage.shift(x, 1.5, order=1, cval=np.ones(1)[0]),
             lambda x: ndimage.map_coordinates(x, np.array([[0.5, 9.0], [1.0, 1.0]]), order=1,
                                               cval=np.zeros(1)[0]),
             lambda x: ndimage.shift(x, np.array([0.3, 0.2]) * 1.0, order=3)]
    for f in cases:
        before = img.tobytes()
        y, _ = mutad.pullback(f, img)
        assert y.tobytes() == f(img).tobytes()
        mutad.check_grads(f, img)
        assert img.tobytes() == before


def test_filters_and_interpolations_of_empty_images():
    """Regression: an empty image crashed the rules (an IndexError, a ValueError from
    np.stack) where SciPy returns an empty result; nothing reaches anything."""
    for f in (lambda x: scipy.ndimage.gaussian_filter(x, 1.0),
              lambda x: scipy.ndimage.uniform_filter(x, 3),
              lambda x: scipy.ndimage.zoom(x, 2.0)):
        for x in (np.zeros(0), np.zeros((0, 3))):
            y, dy = mutad.jvp(f, (x,), (x,))
            assert y.shape == dy.shape == f(x).shape and y.dtype == f(x).dtype
            g, = mutad.gradient(lambda x: f(x).sum(), x)
            assert g.shape == x.shape


DECIDED = {
    "label": lambda x: scipy.ndimage.label(x)[0],
    "label-structure": lambda x: scipy.ndimage.label(x, np.ones((3, 3)))[0],
    "histogram": lambda x: scipy.ndimage.histogram(x, 0.2, 1.0, 4),
    "histogram-labels": lambda x: scipy.ndimage.histogram(x, 0.0, x.max(), 3,
                                                          labels=(x > 0.5).astype(int), index=1),
    "binary_erosion": lambda x: scipy.ndimage.binary_erosion(x),
    "binary_dilation": lambda x: scipy.ndimage.binary_dilation(x, iterations=2),
    "binary_opening": lambda x: scipy.ndimage.binary_opening(x),
    "binary_closing": lambda x: scipy.ndimage.binary_closing(x, mask=x > 0.7),
    "binary_fill_holes": lambda x: scipy.ndimage.binary_fill_holes(x),
    "binary_hit_or_miss": lambda x: scipy.ndimage.binary_hit_or_miss(x),
    "binary_propagation": lambda x: scipy.ndimage.binary_propagation(x, mask=x > 0.3),
    "distance_transform_cdt": lambda x: scipy.ndimage.distance_transform_cdt(x),
    "distance_transform_bf": lambda x: scipy.ndimage.distance_transform_bf(x, sampling=(1, 2)),
}


@pytest.mark.parametrize("name", DECIDED)
def test_decisions_about_a_differentiated_image(name, rng):
    """Label, histogram, the binary morphology and the chamfer and brute-force distance
    transforms of a differentiated image stopped (SciPy's code converts it): their results
    are decisions about its values (nonzero, in a bin), SciPy's own, with no derivative, and
    the values computed from them are differentiated; a replay takes them again."""
    def f(x):
        x = np.where(x > 0.5, x, 0.0)
        decided = np.asarray(DECIDED[name](x), dtype=float)
        return np.sum(x ** 2 * np.resize(decided, x.shape)) + decided.sum()

    x = rng.uniform(0.0, 1.0, (7, 6))
    followed_as_scipy(f, x, x[::-1] * 0.8)


def test_decisions_refused_where_they_would_be_wrong(image):
    with pytest.raises(UnsupportedOperationError, match="sampling"):
        mutad.gradient(lambda s: scipy.ndimage.distance_transform_bf(image > 0.3, sampling=s)
                       .sum(), np.array([1.0, 2.0]))
    with pytest.raises(UnsupportedOperationError, match="output"):
        def into(x):
            out = np.zeros(x.shape) + x
            scipy.ndimage.binary_erosion(x, output=out)
            return out.sum()
        mutad.gradient(into, image)
