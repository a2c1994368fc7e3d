"""Functions NumPy writes in Python, differentiated as compositions (mutad/rules/composites.py),
and the forward rules of np.convolve and np.linalg.qr: every case against finite differences
under both policies, to second order, and in forward mode; values are NumPy's."""

import numpy as np
import pytest

import mutad
from cases import (Case, arguments, case_id, check_complex, complexified, fixed, normal,
                   numpys_bits_in_every_mode, replays_as_traced, under_alternating_policies)
from mutad.core.registry import table

POLICIES = ("restore", "checkpoint")

# all-NaN slices and degrees of freedom <= 0 give NumPy's warnings, as they do without mutad
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def positive(*shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def increasing(n):
    return lambda rng: np.cumsum(rng.uniform(0.3, 1.0, n))


def on_nans(function):
    """``function`` of ``x`` with every third element replaced by NaN inside the program (a NaN
    argument would make the finite differences NaN too)."""

    def program(x):
        holes = np.arange(x.size).reshape(x.shape) % 3 == 0
        return function(np.where(holes, np.nan, x))

    return program


# fmt: off
CASES = [
    Case.named("gradient",             np.gradient,  arguments(normal(6))),
    Case.named("gradient-2d",          np.gradient,  arguments(normal(4, 5))),
    Case.named("gradient-step",        lambda f: np.gradient(f, 0.3, edge_order=2), arguments(normal(6))),
    Case.named("gradient-axis",        lambda f: np.gradient(f, axis=1), arguments(normal(3, 5))),
    Case.named("gradient-coordinates", np.gradient,  arguments(normal(6), increasing(6))),
    Case.named("gradient-coordinates-edge-2", lambda f, x: np.gradient(f, x, edge_order=2),
                                        arguments(normal(6), increasing(6))),
    Case.named("gradient-per-axis",    lambda f, x: np.gradient(f, 0.5, x), arguments(normal(3, 4), increasing(4))),
    Case.named("trapezoid",            np.trapezoid, arguments(normal(6))),
    Case.named("trapezoid-x",          lambda y, x: np.trapezoid(y, x), arguments(normal(3, 6), increasing(6))),
    Case.named("trapezoid-axis",       lambda y: np.trapezoid(y, dx=0.2, axis=0), arguments(normal(4, 3))),
    Case.named("ediff1d",              lambda a, b: np.ediff1d(a, to_begin=b), arguments(normal(2, 3), normal(2))),
    Case.named("cumulative_sum",       lambda x: np.cumulative_sum(x, axis=1, include_initial=True),
                                        arguments(normal(2, 4))),
    Case.named("cumulative_prod",      np.cumulative_prod, arguments(positive(5))),
    Case.named("nancumsum",            on_nans(np.nancumsum), arguments(normal(6))),
    Case.named("nancumprod",           on_nans(lambda x: np.nancumprod(x, axis=0)), arguments(normal(4, 2))),
    Case.named("average",              np.average,   arguments(normal(3, 4))),
    Case.named("average-weights",      lambda a, w: np.average(a, axis=1, weights=w), arguments(normal(3, 4), positive(4))),
    Case.named("average-returned",     lambda a, w: np.average(a, 0, w, returned=True), arguments(normal(3, 2), positive(3, 2))),
    Case.named("nanvar",               on_nans(lambda x: np.nanvar(x, axis=0, ddof=1)), arguments(normal(5, 4))),
    Case.named("nanstd",               on_nans(np.nanstd), arguments(normal(7))),
    Case.named("nanvar-correction",    on_nans(lambda x: np.nanvar(x, axis=1, correction=1.5)), arguments(normal(3, 6))),
    Case.named("nanstd-correction",    on_nans(lambda x: np.nanstd(x, correction=1)), arguments(normal(7))),
    Case.named("cov",                  np.cov,       arguments(normal(3, 6))),
    Case.named("cov-columns-weights",  lambda m, w: np.cov(m, rowvar=False, aweights=w), arguments(normal(6, 2), positive(6))),
    Case.named("cov-two",              lambda x, y: np.cov(x, y, bias=True), arguments(normal(5), normal(5))),
    Case.named("corrcoef",             np.corrcoef,  arguments(normal(3, 6))),
    Case.named("polyval",              np.polyval,   arguments(normal(4), normal(5))),
    Case.named("polyval-list",         lambda p, x: np.polyval([p[0], 2.0, p[1]], x), arguments(normal(2), normal(3))),
    Case.named("polyder",              lambda p: np.polyder(p, 2), arguments(normal(5))),
    Case.named("polyint",              lambda p: np.polyint(p, 2, k=[1.0, 2.0]), arguments(normal(3))),
    Case.named("polyadd",              np.polyadd,   arguments(normal(2), normal(4))),
    Case.named("polysub",              np.polysub,   arguments(normal(4), normal(3))),
    Case.named("polymul",              np.polymul,   arguments(normal(3), normal(2))),
    Case.named("polyfit",              lambda x, y: np.polyfit(x, y, 2), arguments(increasing(6), normal(6))),
    Case.named("polyfit-weights",      lambda y, w: np.polyfit(np.arange(5.0), y, 1, w=w), arguments(normal(5, 2), positive(5))),
    Case.named("vander",               np.vander,    arguments(normal(4))),
    Case.named("vander-increasing",    lambda x: np.vander(x, 3, increasing=True), arguments(normal(4))),
    Case.named("vander-at-zero",       np.vander,    arguments(fixed([0.0, 1.5, -0.5]))),
    Case.named("correlate",            np.correlate, arguments(normal(6), normal(3))),
    Case.named("correlate-full",       lambda a, v: np.correlate(a, v, "full"), arguments(normal(3), normal(5))),
    Case.named("correlate-same",       lambda a, v: np.correlate(a, v, "same"), arguments(normal(2), normal(6))),
    Case.named("convolve",             np.convolve,  arguments(normal(5), normal(3))),
    Case.named("multi_dot",            lambda a, b, c: np.linalg.multi_dot([a, b, c]), arguments(normal(3), normal(3, 4), normal(4))),
    Case.named("meshgrid",             np.meshgrid,  arguments(normal(3), normal(4))),
    Case.named("meshgrid-ij-sparse",   lambda x, y: np.meshgrid(x, y, indexing="ij", sparse=True), arguments(normal(3), normal(2))),
    Case.named("diagflat",             lambda v: np.diagflat(v, 1), arguments(normal(2, 2))),
    Case.named("resize",               lambda a: np.resize(a, (3, 5)), arguments(normal(2, 3))),
    Case.named("real_if_close",        np.real_if_close, arguments(normal(3))),
    Case.named("svdvals",              np.linalg.svdvals, arguments(normal(4, 3))),
    Case.named("cond",                 np.linalg.cond, arguments(normal(3, 3))),
    Case.named("cond-fro",             lambda a: np.linalg.cond(a, "fro"), arguments(normal(3, 3))),
    Case.named("qr",                   lambda a: tuple(np.linalg.qr(a)), arguments(normal(5, 3))),
    Case.named("qr-r",                 lambda a: np.linalg.qr(a, mode="r"), arguments(normal(3, 3))),
    Case.named("insert",               lambda a, v: np.insert(a, 2, v), arguments(normal(5), normal(1))),
    Case.named("insert-many",          lambda a, v: np.insert(a, [1, 3, 3], v), arguments(normal(4), normal(3))),
    Case.named("insert-axis",          lambda a, v: np.insert(a, 1, v, axis=1), arguments(normal(3, 2), normal(3))),
    Case.named("insert-broadcast",     lambda a, v: np.insert(a, [0, 2], v, axis=0), arguments(normal(3, 2), normal(2))),
    Case.named("insert-into-constant", lambda v: np.insert(np.arange(4.0), slice(0, 3), v), arguments(normal(3))),
    Case.named("insert-list",          lambda a, v: np.insert(a, 1, [v[0], 2.0 * v[1]]), arguments(normal(3), normal(2))),
    Case.named("block",                lambda a, b, c: np.block([[a, b], [b, c]]), arguments(normal(2, 2), normal(2, 3), normal(2, 2))),
    Case.named("block-vectors",        lambda a, b: np.block([a, 1.0, b]), arguments(normal(2), normal(3))),
    Case.named("block-deep",           lambda a, b: np.block([[[a]], [[b]]]), arguments(normal(2, 2), normal(2, 2))),
    Case.named("block-one",            lambda a: np.block(a), arguments(normal(3))),
    Case.named("apply_along_axis",     lambda a: np.apply_along_axis(lambda r: (r ** 2).sum(), 0, a), arguments(normal(3, 4))),
    Case.named("apply_along_axis-vector", lambda a, w: np.apply_along_axis(lambda r, w: np.cumsum(r * w), 1, a, w),
                                        arguments(normal(2, 3, 4), normal(3))),
    Case.named("apply_along_axis-matrix", lambda a: np.apply_along_axis(np.outer, -1, a, np.arange(2.0)),
                                        arguments(normal(3, 2))),
    Case.named("vectorize",            lambda a: np.vectorize(lambda v: v * v + 1.0 if v > 0 else -v)(a), arguments(normal(2, 3))),
    Case.named("vectorize-broadcast",  lambda a, b: np.vectorize(lambda u, v, k: (u * v + k, u - v), excluded={2})(a, b, 2.0),
                                        arguments(normal(2, 3), normal(3))),
    Case.named("vectorize-keyword",    lambda a, b: np.vectorize(lambda u, v=1.0: u / v, otypes=[float])(a, v=b),
                                        arguments(normal(4), positive(4))),
    Case.named("vectorize-closure",    lambda a: np.vectorize(lambda v: v * v * a[1] + a[0] if v > 0.5 else -v * a[0])(np.linspace(0, 1, 5)),
                                        arguments(normal(2))),  # the differentiated values only in f's closure
    Case.named("vectorize-decorator",  lambda a: np.vectorize(otypes=[np.float64])(lambda v: v * v * a[1] - v)(a),
                                        arguments(normal(3))),  # @np.vectorize(otypes=...): NumPy's two calls
    Case.named("vectorize-signature",  lambda a: np.vectorize(lambda r: np.array([r.sum(), (r * r).sum()]),
                                                              signature="(n)->(2)")(a), arguments(normal(4, 3))),
    Case.named("vectorize-signature-broadcast", lambda a, b: np.vectorize(lambda u, v: u @ v, signature="(n),(n)->()")(a, b),
                                        arguments(normal(2, 3, 4), normal(4))),
    Case.named("vectorize-signature-outputs", lambda a, w: np.vectorize(lambda m, k: (np.linalg.det(m), m @ m * k),
                                                                        signature="(m,m)->(),(m,m)", excluded={"k"})(a, k=w),
                                        arguments(normal(3, 2, 2), normal())),
    Case.named("piecewise",            lambda x: np.piecewise(x, [x < 0, x > 1], [lambda v: v ** 2, np.sin, lambda v: 3.0 * v]),
                                        arguments(normal(8))),
    Case.named("piecewise-constants",  lambda x: np.piecewise(x, [x < 0], [-1.0, lambda v, a: a * v * v], 2.0), arguments(normal(2, 3))),
    Case.named("piecewise-single",     lambda x: np.piecewise(x, x < 0, [lambda v: -v, lambda v: v ** 3]), arguments(normal(5))),
    Case.named("logspace",             lambda a, b: np.logspace(a, b, 6), arguments(normal(), normal())),
    Case.named("logspace-base",        lambda a, b, base: np.logspace(a, b, 5, endpoint=False, base=base, axis=1),
                                        arguments(normal(2), normal(2), positive())),
    Case.named("geomspace",            lambda a, b: np.geomspace(a, b, 6), arguments(positive(), positive())),
    Case.named("geomspace-negative",   lambda a, b: np.geomspace(-a, -b, 5, endpoint=False, axis=-1), arguments(positive(2), positive(2))),
    Case.named("apply_over_axes",      lambda a: np.apply_over_axes(np.sum, a, [0, 2]), arguments(normal(2, 3, 4))),
    Case.named("apply_over_axes-scan", lambda a: np.apply_over_axes(np.cumsum, a, -1), arguments(normal(3, 4))),
    Case.named("unwrap",               lambda p: np.unwrap(3.0 * p), arguments(normal(8))),
    Case.named("unwrap-axis-period",   lambda p: np.unwrap(2.0 * p, axis=0, period=3.0), arguments(normal(4, 3))),
    Case.named("tensorsolve",          lambda a, b: np.linalg.tensorsolve(a + 3.0 * np.eye(6).reshape(6, 2, 3), b),
                                        arguments(normal(6, 2, 3), normal(6))),
    Case.named("tensorinv",            lambda a: np.linalg.tensorinv(a + 3.0 * np.eye(6).reshape(2, 3, 6), ind=2),
                                        arguments(normal(2, 3, 6))),
    Case.named("indices-from",         lambda a: a[np.diag_indices_from(a)] + a[np.triu_indices_from(a)][:3]
                                        + np.imag(a)[0] + np.angle(a)[1], arguments(normal(3, 3))),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradient(case, policy, rng):
    mutad.check_grads(case.function, *case.sample(rng), policy=policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_second_derivatives(case, rng):
    mutad.check_grads(case.function, *case.sample(rng), order=2)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_jvp(case, rng):
    mutad.check_jvp(case.function, *case.sample(rng))


# Complex arrays: the composites declared complex-capable (facet complex) with an imaginary
# part on every float argument; the others refuse complex values rather than differentiate
# them as if they were real.

COMPLEX_REFUSED = {"nanvar", "nanstd", "nanvar-correction", "nanstd-correction", "cov",
                   "cov-columns-weights", "cov-two", "corrcoef",
                   "polyfit", "polyfit-weights", "correlate", "correlate-full", "correlate-same",
                   "logspace", "logspace-base", "geomspace", "geomspace-negative"}
COMPLEX_ELSEWHERE = {"svdvals", "cond", "cond-fro", "qr", "qr-r",  # factorizations
                     "tensorsolve", "tensorinv"}  # solves
# NumPy's own raises on complex values: a comparison, a float output type
COMPLEX_BRANCHING = {"vectorize", "vectorize-keyword", "vectorize-signature-outputs", "piecewise", "piecewise-constants",
                     "piecewise-single", "unwrap", "unwrap-axis-period"}
COMPLEX_CASES = [complexified(c) for c in CASES
                 if c.name not in COMPLEX_REFUSED | COMPLEX_ELSEWHERE | COMPLEX_BRANCHING]


@pytest.mark.parametrize("case", CASES + COMPLEX_CASES, ids=case_id)
def test_values_are_numpys(case, rng):
    args = case.sample(rng)
    y, _ = mutad.pullback(case.function, *args)
    expected = case.function(*args)
    for mine, numpys in zip(y if isinstance(y, tuple) else [y],
                            expected if isinstance(expected, tuple) else [expected], strict=True):
        np.testing.assert_allclose(mine, numpys, rtol=1e-12, atol=1e-14, equal_nan=True)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=case_id)
def test_complex_gradient(case, policy, rng):
    check_complex(case, case.sample(rng), policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(COMPLEX_CASES, POLICIES))
def test_complex_second_derivatives(case, policy, rng):
    check_complex(case, case.sample(rng), policy, order=2)


@pytest.mark.parametrize("case", [complexified(c) for c in CASES if c.name in COMPLEX_REFUSED],
                         ids=case_id)
def test_complex_values_without_a_complex_rule_are_refused(case, rng):
    with pytest.raises(mutad.errors.ComplexInputError):
        mutad.gradient(lambda *args: np.sum(np.abs(case.function(*args))), *case.sample(rng))


def test_the_composites_take_numpys_names():
    assert {f.__name__ for f in table("composite") if callable(f)} >= {
        "gradient", "trapezoid", "polyval", "cumulative_sum", "cumulative_prod", "correlate"}


@pytest.mark.parametrize("f", [
    lambda x: np.block([[x], x]),                     # depths differ
    lambda x: np.block((x, x)),                        # a tuple
    lambda x: np.block([[x, x[:2]], [x, x]]),          # rows of different widths
    lambda x: np.apply_along_axis(np.sum, 0, x[None, :0] * np.ones((2, 1))),  # no slices
    lambda x: np.insert(x, 9, x[0]),                   # out of bounds
    lambda x: np.vectorize(np.sin)(x[:0]),             # no otypes for no elements
    lambda x: np.vectorize(np.add, signature="(n),(n)->(n)")(x, x[:2]),  # core sizes differ
    lambda x: np.vectorize(np.sum, signature="(n)->(n)")(x),  # an output without its core axis
    lambda x: np.vectorize(np.sum, signature="(n)->()")(x[:0, None]),  # no otypes for no slices
], ids=["block-depths", "block-tuple", "block-widths", "apply-empty", "insert-bounds",
        "vectorize-empty", "vectorize-core-sizes", "vectorize-core-output", "vectorize-no-slices"])
def test_the_composites_raise_numpys_errors(f):
    x = np.arange(3.0)
    with pytest.raises((ValueError, TypeError, IndexError)) as numpys:
        f(x)
    with pytest.raises(type(numpys.value), match=None):
        mutad.gradient(lambda x: np.sum(f(x)), x)


BIT_FOR_BIT = ["vectorize-closure", "vectorize-signature", "vectorize-signature-broadcast", "piecewise", "piecewise-constants", "piecewise-single", "logspace",
               "logspace-base", "geomspace", "geomspace-negative", "apply_over_axes",
               "apply_over_axes-scan"]


@pytest.mark.parametrize("case", [c for c in CASES if c.name in BIT_FOR_BIT], ids=case_id)
def test_values_bit_for_bit(case, rng):
    """NumPy's steps on the traced arrays: NumPy's values, bit for bit, and the caller's
    arrays untouched."""
    args = case.sample(rng)
    copies = [np.copy(a) for a in args]
    y, _ = mutad.pullback(case.function, *copies)
    expected = case.function(*args)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()
    for a, original in zip(copies, args, strict=True):
        assert np.array_equal(a, original)


def test_piecewise_logspace_geomspace_apply_over_axes_replay():
    def f(x, a):
        y = np.piecewise(x, [x < 0, x > 1], [lambda v: v * v, lambda v: np.exp(-v), 0.5])
        z = np.geomspace(a, 2.0 * a, 5) + np.logspace(a, x[0], 5, base=2.0)
        return np.sum(np.apply_over_axes(np.sum, np.outer(y, z), [0])) + np.sum(z * z)

    replayed = mutad.grad(f, argnums=(0, 1), replay=True)
    rng = np.random.default_rng(1)
    for _ in range(5):  # the conditions flip between calls
        x, a = rng.standard_normal(6), rng.uniform(0.5, 2.0)
        traced = mutad.gradient(f, x.copy(), a)
        for ours, expected in zip(replayed(x.copy(), a), traced, strict=True):
            assert np.asarray(ours).tobytes() == np.asarray(expected).tobytes()


def test_vectorize_with_a_signature_replays():
    """np.vectorize(f, signature=...) was refused; its slices' calls, branching on their
    values, replay as traced."""
    frame = np.vectorize(lambda r: np.array([r.max(), np.sum(r[r > 0] ** 2)]), signature="(n)->(2)")

    def f(x):
        return np.sum(frame(x) ** 2)

    rng = np.random.default_rng(2)
    calls = [(rng.standard_normal((3, 4)),) for _ in range(4)]
    replays_as_traced(f, calls)
    for (x,) in calls:
        before = x.tobytes()
        mutad.check_grads(f, x, modes=("rev", "fwd"))
        assert x.tobytes() == before


@pytest.mark.parametrize("f", [lambda x, y: np.cov(x, y, bias=True), lambda x, y: np.cov(x),
                               lambda x, y: np.corrcoef(x, y)], ids=["cov-two", "cov", "corrcoef"])
def test_covariances_are_numpys_bit_for_bit(f, rng):
    """Regression: the covariance was divided by its normalisation, where NumPy multiplies by
    the reciprocal (a last bit apart, which scipy.stats.linregress showed)."""
    for _ in range(5):
        x, y = rng.normal(size=7), rng.normal(size=7)
        value, _ = mutad.pullback(f, x, y)
        assert np.asarray(value).tobytes() == np.asarray(f(x, y)).tobytes()


_W32 = np.array([0.7, 1.3, 0.9, 1.1, 0.6, 1.4, 1.0, 0.8, 1.2], np.float32)
_FW = np.array([1, 2, 1, 3, 1, 1, 2, 1, 1])


@pytest.mark.parametrize("f", [
    lambda x: np.cov(x),
    lambda x: np.cov(x, dtype=np.float32),
    lambda x: np.cov(x, rowvar=False, bias=True),
    lambda x: np.cov(x, x[:2] * 2, aweights=_W32),
    lambda x: np.cov(x, fweights=_FW, aweights=_W32, ddof=2, dtype=np.float32),
    lambda x: np.corrcoef(x),
    lambda x: np.corrcoef(x, dtype=np.float32),
    lambda x: np.average(x, axis=1, weights=_W32.astype(np.float64)),
    lambda x: np.average(x.astype(np.float64), axis=1, weights=_W32),
    lambda x: np.average(x, axis=1, returned=True)[1] * x[:, 0],
    lambda x: np.average(x, axis=(1, 0), weights=x.T * x.T),
], ids=["cov", "cov-dtype", "cov-columns", "cov-two-weighted", "cov-weights-dtype", "corrcoef",
        "corrcoef-dtype", "average-weights64", "average-weights32", "average-returned",
        "average-axes"])
def test_covariances_of_float32_data_are_numpys(f):
    """Regression: np.cov converts the data to float64 (or its dtype=) before the mean is
    taken, and centres and scales in place, in that dtype; np.average sums the weights and
    the weighted data in the promotion of their dtypes. mutad computed at float32 precision,
    returned float64 for cov(..., dtype=np.float32), and summed float32 weights in float32."""
    x = (np.random.default_rng(11).random((4, 9)) + 0.25).astype(np.float32)
    numpys_bits_in_every_mode(f, x)
    mutad.check_grads(f, x, modes=("rev", "fwd"))


@pytest.mark.parametrize("f", [
    lambda x: np.nanvar(x),
    lambda x: np.nanvar(x, axis=1, ddof=1),
    lambda x: np.nanvar(x, axis=0, keepdims=True),
    lambda x: np.nanvar(x, axis=1, dtype=np.float64),
    lambda x: np.nanstd(x, axis=1),
    lambda x: np.nanstd(x),
    lambda x: np.vander(x[0]),
    lambda x: np.vander(x[1], 3, increasing=True),
], ids=["nanvar", "nanvar-ddof", "nanvar-keepdims", "nanvar-dtype", "nanstd", "nanstd-all",
        "vander", "vander-increasing"])
@pytest.mark.parametrize("nans", [False, True], ids=["", "nans"])
def test_float32_results_have_numpys_dtype(f, nans):
    """Regression: np.nanvar and np.nanstd of float32 data are float32 (NumPy divides each
    sum by its integer count into the sum's array), and np.vander of float32 data is float64
    (NumPy's dtype is the promotion of x's with int); mutad returned float64 and float32."""
    x = (np.random.default_rng(12).random((4, 9)) + 0.1).astype(np.float32)
    if nans:
        x[1, 3] = x[2, 0] = np.nan
    numpys_bits_in_every_mode(f, x)
    if not nans:  # (finite differences of NaN data are NaN)
        mutad.check_grads(f, x, modes=("rev", "fwd"))


_C64 = np.cumsum(np.linspace(0.5, 1.5, 16))


@pytest.mark.parametrize("f", [
    lambda x: np.polyval([0.1, 0.3, 0.7], x),
    lambda x: np.polyval(x[:3], 0.5),
    lambda x: np.ediff1d(x, to_begin=0.5, to_end=[1e-9, 2.0]),
    lambda x: np.roots(x[:4]),
    lambda x: np.gradient(x, _C64),
    lambda x: np.gradient(x, _C64, edge_order=2),
    lambda x: np.gradient(x, np.float64(0.1)),
    lambda x: np.gradient(x, np.float64(0.1), edge_order=2),
    lambda x: np.gradient(x, 0.1, edge_order=2),
    lambda x: np.gradient(x, np.arange(16) * 0.5),
    lambda x: np.polyfit(x, x ** 2, 1),
    lambda x: np.polyfit(x, x ** 3, 2, w=x[::-1].astype(np.float64)),
], ids=["polyval-list", "polyval-scalar-x", "ediff1d", "roots", "gradient-coordinates",
        "gradient-coordinates-edge2", "gradient-float64-step", "gradient-float64-step-edge2",
        "gradient-step-edge2", "gradient-uniform-coordinates", "polyfit", "polyfit-weights"])
def test_float32_operands_promote_as_numpys(f):
    """Regression: NumPy's type promotion with float32 operands. np.polyval makes a list of
    coefficients a float64 array (float64 values) and a Python x a 0-d float64 array;
    np.ediff1d casts to_begin/to_end into the data's dtype; np.roots builds the companion
    matrix in float32; np.gradient assigns float64-spaced differences (and NumPy's edge
    expressions) into a float32 array; np.polyfit fits in float64 with float32's rcond. mutad
    returned other dtypes, or values computed at another precision."""
    x = (np.random.default_rng(13).random(16) + 0.5).astype(np.float32)
    expected = f(x.copy())
    y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert np.asarray(y).dtype == np.asarray(expected).dtype
    assert np.asarray(y).tobytes() == np.asarray(expected).tobytes()

    def loss(v):
        return np.sum(np.abs(f(v)))

    for differentiate in (mutad.value_and_grad(loss), mutad.value_and_grad(loss, replay=True)):
        for _ in range(2):
            value, _ = differentiate(x)
            assert np.asarray(value).tobytes() == np.asarray(loss(x.copy())).tobytes()
    mutad.check_grads(loss, x, modes=("rev", "fwd"))


def test_multi_dot_multiplies_in_numpys_order():
    """Regression: multi_dot multiplied left to right; NumPy chooses the cheapest order (its
    matrix-chain order), so the values differed in the last bits (147 of 200 random chains)."""
    rng = np.random.default_rng(5)
    chains = [[rng.standard_normal((8, 8)), rng.standard_normal((8, 8)), rng.standard_normal((8, 1))],
              [rng.standard_normal((2, 9)), rng.standard_normal((9, 3)), rng.standard_normal((3, 7)),
               rng.standard_normal((7, 1)), rng.standard_normal((1, 5))],
              [rng.standard_normal(6), rng.standard_normal((6, 6)), rng.standard_normal((6, 2)),
               rng.standard_normal(2)],
              [rng.standard_normal((4, 6)), rng.standard_normal((6, 6)), rng.standard_normal(6)],
              [rng.standard_normal((3, 4)), rng.standard_normal((4, 5))]]
    for arrays in chains:
        value, grads = mutad.value_and_grad(lambda *a: np.linalg.multi_dot(a).sum(),
                                            argnums=tuple(range(len(arrays))))(*arrays)
        assert value.tobytes() == np.linalg.multi_dot(arrays).sum().tobytes()
        mutad.check_grads(lambda *a: np.linalg.multi_dot(a), *arrays)
    x, b, c = chains[0]
    y, _ = mutad.pullback(lambda x: np.linalg.multi_dot([x, b, c], out=np.zeros((8, 1))), x)
    assert y.tobytes() == np.linalg.multi_dot([x, b, c]).tobytes()


def test_roots_are_numpys_bit_for_bit(rng):
    """np.roots of traced coefficients: NumPy's values (real when every root is, complex
    otherwise), in both modes, over many draws, and the caller's arrays untouched."""
    for i in range(200):
        p = rng.standard_normal(rng.integers(1, 7))
        if i % 4 == 0:
            p = p + 1j * rng.standard_normal(p.size)
        before = p.tobytes()
        expected = np.roots(p)
        y, _ = mutad.pullback(np.roots, p)
        y_forward, _ = mutad.jvp(np.roots, (p,), (np.ones_like(p),))
        for got in (y, y_forward):
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert got.tobytes() == expected.tobytes()
        assert p.tobytes() == before


@pytest.mark.parametrize("p", [[1.0, -3.0, 2.5, 0.5], [2.0, -3.0, 1.0], [0.5, 1.0, 2.0, -1.0, 3.0],
                               [1.5, 0.2]], ids=["complex-roots", "real-roots", "quartic", "linear"])
def test_roots_derivatives(p):
    p = np.array(p)
    mutad.check_grads(lambda p: np.abs(np.roots(p)), p)
    mutad.check_grads(np.roots, p + 0.25j)
    mutad.check_jvp(np.roots, p)


@pytest.mark.slow
def test_roots_second_derivatives():
    mutad.check_grads(lambda p: np.real(np.roots(p)), np.array([1.0, -3.0, 2.5, 0.5]), order=2)


def test_roots_replayed_like_traced(rng):
    from test_replay import replayed_like_traced
    calls = [(np.array([1.0, -3.0, 2.5, 0.5]) + 0.1 * rng.standard_normal(4),) for _ in range(3)]
    replayed_like_traced(lambda p: np.sum(np.abs(np.roots(p)) ** 2), calls)


@pytest.mark.parametrize("p", [[1.0, -3.0, 2.0, 0.0], [0.0, 1.0, -3.0, 2.0]],
                         ids=["trailing-zero", "leading-zero"])
def test_roots_of_stripped_zeros_are_refused(p):
    """NumPy strips exact zeros at either end; the roots still move with those coefficients,
    so a derivative of the stripped polynomial would be wrong: refused, saying how to strip
    a constant zero."""
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="strip it yourself"):
        mutad.gradient(lambda p: np.sum(np.abs(np.roots(p))), np.array(p))


def test_roots_of_a_list_of_traced_values():
    """np.roots([1.0, -y[0] - 3, y[1]]) raised a ConversionError: the list is the array NumPy
    makes of it."""
    def f(y):
        return np.sum(np.abs(np.roots([1.0, -y[0] - 3.0, y[1]])) ** 2)

    y = np.array([0.3, 1.7])
    assert mutad.value_and_gradient(f, y)[0] == f(y)
    mutad.check_grads(f, y)
    mutad.check_jvp(f, y)



def test_weights_and_data_given_as_lists_are_numpys_arrays():
    """np.average(x, weights=[1, 2, 3]) and np.cov(x, [1.0, 2.0, 4.0]) raised a TypeError in
    the dtype promotion of the list."""
    def f(x):
        return (np.average(x, weights=[1, 2, 3]) + np.cov(x, [1.0, 2.0, 4.0]).sum()
                + np.corrcoef(x, (1.0, 2.0, 4.0)).sum())

    x = np.array([0.5, 1.7, -0.3])
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)


EMATH = {
    "sqrt": lambda x: np.emath.sqrt(x),
    "log": lambda x: np.emath.log(x),
    "log10": lambda x: np.emath.log10(x),
    "log2": lambda x: np.emath.log2(x),
    "logn": lambda x: np.emath.logn(3.0, x) + np.emath.logn(x * x + 2.0, 2.0),
    "power": lambda x: np.emath.power(x, 1.5) + np.emath.power(2.0, x) + np.emath.power(x, -2),
    "arcsin": lambda x: np.emath.arcsin(2.0 * x),
    "arccos": lambda x: np.emath.arccos(0.7 * x),
    "arctanh": lambda x: np.emath.arctanh(1.5 * x),
}


@pytest.mark.parametrize("name", sorted(EMATH))
def test_emath_gives_numpys_values_and_is_differentiated(name):
    # np.emath's functions had no rule; a real argument outside the real domain turns complex
    # (a decision on its values, which the replay guards: the calls below change it)
    function = EMATH[name]

    def f(x):
        w = function(x)
        return (np.real(w) * np.arange(1.0, 5.0)).sum() + np.abs(w).sum()

    x = np.array([0.9, -0.4, 0.3, 1.6])
    before = x.tobytes()
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(
        f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    replays_as_traced(f, [(x,), (np.abs(x) + 0.1,), (-x,)])
    assert x.tobytes() == before


@pytest.mark.parametrize("axis", [2, (0, 2), (-1, 1), (1, 1)])
def test_an_average_over_axes_the_data_lacks_raises_numpys_error(axis):
    """Regression: np.average over an axis out of bounds, or repeated, said np.mean's words
    ("axis 2 is out of bounds ...", "duplicate value in 'axis'"), not NumPy's average's
    ("axis: axis 2 is out of bounds ...", "repeated axis in `axis` argument")."""
    x = np.arange(1.0, 7.0).reshape(2, 3)
    with pytest.raises(ValueError) as expected:
        np.average(x, axis=axis)
    for run in (lambda: mutad.gradient(lambda x: np.average(x, axis=axis).sum(), x),
                lambda: mutad.jvp(lambda x: np.average(x, axis=axis), (x,), (x,))):
        with pytest.raises(ValueError) as raised:
            run()
        assert (type(raised.value), str(raised.value)) == (type(expected.value),
                                                           str(expected.value))
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
