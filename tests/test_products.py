"""The products of a (co)tangent and a partial derivative (``mutad/engines/products.py``): a zero factor
gives zero whatever the other one is. A zero cotangent times an infinite partial (``sqrt`` at
0) is zero, and so is a zero partial (a factor that is an exact zero, an operand ``minimum``
did not take) times an infinite or NaN cotangent or tangent: the function is differentiable
there, and NumPy's ``0 * inf`` would make its derivative NaN. Every path that forms such a
product is checked: out of place, in place, broadcast, NumPy's scalars, arrays taken a piece at
a time, replayed and compiled, in reverse and in forward mode."""

import warnings

import numpy as np
import pytest

import mutad
import mutad.engines.products
from rule_checks import central_differences

POLICIES = ("restore", "checkpoint")
X = np.array([0.3, 1.2, 0.7, 2.0, 0.1, 0.9])
MASK = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])  # sqrt(x * 0) = sqrt(0): an infinite slope


def no_invalid_warning(call):
    """``call()``, failing on NumPy's warning of an invalid operation (the 0 * inf)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "divide by zero", RuntimeWarning)  # sqrt's slope at 0
        warnings.filterwarnings("error", "invalid value", RuntimeWarning)
        return call()


def gradient_of(f, x, policy="restore"):
    before = x.tobytes()
    grad, = no_invalid_warning(lambda: mutad.gradient(f, x, policy=policy))
    assert x.tobytes() == before
    return grad


@pytest.mark.parametrize("policy", POLICIES)
def test_a_pca_style_program_has_its_finite_gradient(policy):
    """The off-diagonal zeros of sqrt have an infinite cotangent, and eye's exact zeros, which
    multiply it, carry no dependence on ``v``: the derivative is finite."""
    def f(v):
        return np.sqrt(np.diag(v) - 0.5 * v.min() * np.eye(2)).sum()

    v = np.array([0.3, 0.5])
    grad = gradient_of(f, v, policy)
    np.testing.assert_allclose(grad, central_differences(f, v, 1e-6), rtol=1e-6)
    _, slope = no_invalid_warning(lambda: mutad.jvp(f, (v,), (np.array([1.0, -2.0]),)))
    assert slope == pytest.approx(grad @ [1.0, -2.0], rel=1e-12)


def masked(x):
    return np.sqrt(x * MASK).sum()


def masked_in_place(x):
    y = x.copy()
    y *= MASK
    np.sqrt(y, out=y)
    return y.sum()


def masked_broadcast(x):
    return np.sqrt(x[None, :] * np.stack([MASK, MASK[::-1]])).sum()


def masked_by_a_zero_scalar(x):
    return (np.sqrt(x * 0.0) + np.sqrt(x * np.float64(0.0)) + x).sum()


def masked_elements(x):
    total = 0.0
    for i in range(x.size):
        total = total + np.sqrt(x[i] * MASK[i])
    return total


def masked_large(x):  # taken a piece at a time (products.CHUNK) into an existing shadow
    big = np.tile(x, 30_000)
    return np.sqrt(big * np.tile(MASK, 30_000)).sum() + big.sum()


PROGRAMS = [masked, masked_in_place, masked_broadcast, masked_by_a_zero_scalar,
            masked_elements, masked_large]


def expected(f, x):
    """The derivative, where each masked element is the constant sqrt(0) = 0."""
    def slope(mask):
        return np.where(mask == 0, 0.0, 0.5 / np.sqrt(x))

    return {masked_broadcast: slope(MASK) + slope(MASK[::-1]),
            masked_by_a_zero_scalar: np.ones_like(x),
            masked_large: 30_000 * (slope(MASK) + 1.0)}.get(f, slope(MASK))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_a_zero_partial_times_an_infinite_cotangent_is_zero(f, policy):
    grad = gradient_of(f, X.copy(), policy)
    np.testing.assert_allclose(grad, expected(f, X), rtol=1e-12)
    assert np.isfinite(grad).all()


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_replayed_and_compiled_gradients_are_the_traced_ones(f):
    traced = gradient_of(f, X.copy())
    replaying = mutad.grad(f, replay=True)
    for _ in range(4):  # records, replays, then runs the compiled blocks
        x = X.copy()
        grad = no_invalid_warning(lambda x=x: replaying(x))
        assert x.tobytes() == X.tobytes()
        assert grad.tobytes() == traced.tobytes()


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_forward_mode_agrees(f):
    direction = np.linspace(-1.0, 1.0, X.size)
    x = X.copy()
    _, slope = no_invalid_warning(lambda: mutad.jvp(f, (x,), (direction,)))
    assert x.tobytes() == X.tobytes()
    assert slope == pytest.approx(expected(f, X) @ direction, rel=1e-12)


def test_a_zero_partial_times_an_infinite_tangent_is_zero():
    """sqrt's slope at 0 is infinite, so the tangent of sqrt(x) is where x = 0; a mask's zeros
    multiply it, and the masked elements do not move."""
    def f(x):
        return np.sqrt(x) * MASK + x

    x = np.where(MASK == 0, 0.0, X)
    y, dy = no_invalid_warning(lambda: mutad.jvp(f, (x,), (np.ones_like(x),)))
    np.testing.assert_allclose(dy, np.where(MASK == 0, 1.0, 0.5 / np.sqrt(X) + 1.0), rtol=1e-15)
    hvp = mutad.hvp(lambda x: (f(x) * MASK).sum(), (X.copy(),), (np.ones_like(X),))
    np.testing.assert_allclose(hvp, np.where(MASK == 0, 0.0, -0.25 * X ** -1.5), rtol=1e-12)


@pytest.mark.parametrize("select", [np.minimum, np.maximum, np.fmin, np.fmax],
                         ids=lambda u: u.__name__)
def test_the_extremes_select_a_tangent_never_multiply_an_infinite_one_by_zero(select):
    """exp(a) overflows; the extreme takes b where s exp(a) (s = -1 for a maximum) is not the
    one taken, and its derivative is b's, 1, in both modes; also where s exp(a) - s exp(a) is
    NaN, with a NaN tangent, which fmin and fmax pass over."""
    s = 1.0 if select in (np.minimum, np.fmin) else -1.0
    a, b = np.array([1000.0, 0.5, 1000.0]), np.array([2.0, 3.0 * s, -1.0])
    take = np.array([False, True, False])  # where s exp(a) is taken

    def f(a, b):
        e = s * np.exp(a)
        if select in (np.fmin, np.fmax):
            with np.errstate(invalid="ignore"):  # the program's own inf - inf
                e = np.where(take, e, e - e)
        return select(e, b)

    before = a.tobytes(), b.tobytes()
    for ta, tb in [(np.ones(3), np.ones(3)), (np.ones(3), np.zeros(3)), (np.zeros(3), np.ones(3))]:
        _, dy = no_invalid_warning(lambda: mutad.jvp(f, (a, b), (ta, tb)))
        np.testing.assert_array_equal(dy, np.where(take, s * np.exp(a) * ta, tb))
    assert (a.tobytes(), b.tobytes()) == before
    weights = np.array([1.0, -2.0, 3.0])
    ga, gb = no_invalid_warning(lambda: mutad.gradient(lambda a, b: (f(a, b) * weights).sum(),
                                                       a, b))
    assert (a.tobytes(), b.tobytes()) == before
    np.testing.assert_array_equal(ga, np.where(take, s * np.exp(a) * weights, 0.0))
    np.testing.assert_array_equal(gb, np.where(take, 0.0, weights))


def test_times_directly():
    inf, nan = np.inf, np.nan
    times = mutad.engines.products.times
    d = np.array([0.0, inf, 1.0, nan, -inf, 2.0])
    p = np.array([inf, 0.0, 2.0, 0.0, 3.0, nan])
    np.testing.assert_array_equal(times(d, p), [0.0, 0.0, 2.0, 0.0, -inf, nan])
    out = d.copy()
    assert times(out, p, out=out) is out
    np.testing.assert_array_equal(out, [0.0, 0.0, 2.0, 0.0, -inf, nan])
    out = p.copy()
    times(d, out, out=out)
    np.testing.assert_array_equal(out, [0.0, 0.0, 2.0, 0.0, -inf, nan])
    np.testing.assert_array_equal(times(np.array([[inf, 1.0], [2.0, nan]]), np.eye(2)),
                                  [[inf, 0.0], [0.0, nan]])
    np.testing.assert_array_equal(times(d, 0.0), np.zeros(6))
    np.testing.assert_array_equal(times(0.0, p), np.zeros(6))
    assert times(np.array(inf), np.float64(0.0)) == 0.0
    np.testing.assert_array_equal(times(d[:, None], np.zeros((1, 2))), np.zeros((6, 2)))
    z = times(np.array([inf + 1j, 1j]), np.array([0j, 2.0]))
    np.testing.assert_array_equal(z, [0.0, 2j])
    assert mutad.engines.products.times_scalar(np.float64(inf), 0.0) == 0.0
    assert mutad.engines.products.times_scalar(np.float64(0.0), nan) == 0.0
    assert mutad.engines.products.times_scalar(np.float64(2.0), inf) == inf


def _spelled_out(d, p):
    """``times(d, p)`` spelled out: the plain product, but a plain +0.0 where a zero factor
    meets a non-finite one (whatever ``unmasked`` says: a zero of either sign is the
    product's own)."""
    with np.errstate(invalid="ignore", over="ignore"):
        product = d * p
        return np.where(((d == 0) | (p == 0)) & np.isnan(product), 0.0,
                        product).astype(product.dtype)


_N = mutad.engines.products.UNTHREADED + 37  # long enough for the product formed first


def _factors(rng, kind, dtype):
    d = rng.uniform(-2.0, 2.0, _N)
    p = rng.uniform(-2.0, 2.0, _N)
    d[::7] = 0.0
    p[::11] = -0.0  # zero products of either sign, which the mask leaves as they are
    if kind == "zero-meets-inf":
        d[5], p[5] = 0.0, np.inf
    elif kind == "zero-meets-nan":
        d[_N - 1], p[_N - 1] = np.nan, 0.0
    elif kind == "inf-alone":
        d[3] = -np.inf
    elif kind == "nan-alone":  # a NaN the mask keeps: no zero factor made it
        p[_N - 2] = np.nan
    elif kind == "overflows-to-inf":  # finite factors, an infinite product, no NaN
        d[4], p[4] = np.finfo(dtype).max, -2.0
    elif kind == "sum-overflows":  # every product finite, their sum not
        d[:] = np.finfo(dtype).max / 2
        p[:] = 1.5
        p[::11] = -0.0
    elif kind == "near-the-bound":  # products large enough that the sum is asked
        d[:] = np.finfo(dtype).max / (4 * _N)
        p[:] = 1.0
        p[::11] = -0.0
    elif kind == "subnormal":
        d[::3] = np.finfo(dtype).smallest_subnormal
    with np.errstate(over="ignore"):
        return d.astype(dtype), p.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["finite", "zero-meets-inf", "zero-meets-nan", "inf-alone",
                                  "nan-alone", "overflows-to-inf", "sum-overflows",
                                  "near-the-bound", "subnormal"])
def test_a_long_product_formed_before_its_check_is_times_own(rng, kind, dtype):
    # ``times`` into memory of its own forms a long product first and reads its smallest
    # element, asking ``unmasked`` of the factors only where that is a NaN: bit for bit the
    # product that asking first gives, the sign of each zero included, and its factors
    # unchanged.
    times = mutad.engines.products.times
    d, p = _factors(rng, kind, dtype)
    expected = _spelled_out(d, p)
    before = d.tobytes(), p.tobytes()
    with np.errstate(over="ignore"):  # the program's own overflow
        out = np.empty_like(d)
        assert times(d, p, out=out) is out
    assert out.tobytes() == expected.tobytes()
    assert (d.tobytes(), p.tobytes()) == before
    # where ``out`` is a factor's memory, or a view that is not laid out as the sum reads it,
    # the factors are read first, as before
    for left, right, into in [(d.copy(), p, "left"), (d, p.copy(), "right")]:
        target = left if into == "left" else right
        with np.errstate(over="ignore"):
            times(left, right, out=target)
        assert target.tobytes() == expected.tobytes()
    d2, p2 = d.reshape(-1, 1)[: (_N // 2) * 2].reshape(2, -1).T, p[: (_N // 2) * 2].reshape(-1, 2)
    with np.errstate(over="ignore"):
        strided = times(d2, p2, out=np.empty(p2.shape, dtype))
    assert strided.tobytes() == _spelled_out(d2, p2).tobytes()


def _bits(a):
    return np.asarray(a).tobytes()


@pytest.mark.parametrize("size", (3, 3 * mutad.engines.products.UNTHREADED))
@pytest.mark.parametrize("into", ("new", "apart", "d"))
def test_a_check_that_overflows_changes_no_bit(size, into):
    """Where no zero factor meets a non-finite one, ``times`` is NumPy's product, its zeros
    signed, even where its check says no for finite factors (their dot product overflows)."""
    d = np.zeros(size)
    d[:2] = 1e308
    p = np.full(size, -1.0)
    p[:2] = 1.0
    expected = d * p
    assert np.signbit(expected[2:]).all()
    out = {"new": None, "apart": np.empty(size), "d": d}[into]
    assert _bits(mutad.engines.products.times(d, p, out)) == _bits(expected)


_LONG = 3 * mutad.engines.products.UNTHREADED + 6  # checked in pieces, the last a short one


@pytest.mark.parametrize("at", (0, mutad.engines.products.UNTHREADED - 1,
                                mutad.engines.products.UNTHREADED, _LONG - 1))
@pytest.mark.parametrize("dtype", (np.float64, np.float32))
@pytest.mark.parametrize("kind", ("inf", "nan", "zero-meets-inf"))
def test_a_long_check_finds_a_non_finite_term_in_any_piece(at, dtype, kind):
    """``unmasked`` of long factors (a sum of products taken in pieces where they are float64):
    a non-finite term in any piece, the first element of one or the last of the short last
    one, says no, without a warning; finite factors say yes."""
    d = np.linspace(-2.0, 2.0, _LONG).astype(dtype)
    p = np.linspace(3.0, -1.0, _LONG).astype(dtype)
    unmasked = mutad.engines.products.unmasked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert unmasked(d, p) and unmasked(d.reshape(-1, 6), p.reshape(-1, 6))
        d[at], p[at] = {"inf": (np.inf, 1.0), "nan": (1.0, np.nan),
                        "zero-meets-inf": (0.0, -np.inf)}[kind]
        assert not unmasked(d, p) and not unmasked(p, d)
        assert not unmasked(d.reshape(-1, 6), p.reshape(-1, 6))
    # every other element of arrays twice as long: vectors that are not contiguous
    wide = np.zeros((2, _LONG), dtype)
    wide[0] = d
    strided = wide.T.reshape(-1)[::2]
    assert not strided.flags.c_contiguous and strided.tobytes() == d.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not unmasked(strided, p) and not unmasked(p, strided)
        strided[at] = 1.0 if kind == "inf" else 0.0
        assert unmasked(strided, np.linspace(3.0, -1.0, _LONG).astype(dtype))


def test_a_long_check_whose_pieces_overflow_together_warns_of_nothing():
    # every piece's sum finite, their sum not: a no, which costs only the mask (that changes
    # no bit: test_a_check_that_overflows_changes_no_bit), and no warning
    d = np.zeros(_LONG)
    d[0] = d[-1] = 1e308
    p = np.ones(_LONG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not mutad.engines.products.unmasked(d, p)
        assert _bits(mutad.engines.products.times(d, p, d.copy())) == _bits(d)


def test_the_mask_replaces_only_the_nans_a_zero_makes():
    d = np.array([0.0, 0.0, -0.0, np.nan, 2.0, np.inf])
    p = np.array([np.inf, -3.0, 5.0, 0.0, np.nan, -2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = mutad.engines.products.times(d, p)
    assert _bits(got[:3]) == _bits([0.0, -0.0, -0.0]) and got[3] == 0.0
    assert np.isnan(got[4]) and got[5] == -np.inf


@pytest.mark.parametrize("replay", (False, True))
def test_a_gradient_keeps_its_signed_zeros_where_a_sum_overflows(replay):
    w = np.array([1.0, 1.0, -1.0])
    a = np.array([1e308, 1e308, 0.0])

    def f(x):
        return (x * w * a).sum()

    x = np.array([1.0, 2.0, 3.0])
    grad = mutad.grad(f, replay=replay)
    for _ in range(3):
        before = x.tobytes()
        assert _bits(grad(x)) == _bits(a * w)
        assert x.tobytes() == before


NAN_AT_1 = np.array([0.3, np.nan, 0.7, 2.0])


NAN_GUARDED = {
    "norm": lambda x, y: np.linalg.norm(x),
    "norm-rows": lambda x, y: np.linalg.norm(np.stack([x, y]), axis=1),  # one NaN, one not
    "vecdot": lambda x, y: np.vecdot(x, y),
    "vecdot-rows": lambda x, y: np.vecdot(np.stack([x, y]), np.stack([y, y])),
}


@pytest.mark.parametrize("name", sorted(NAN_GUARDED))
def test_a_zero_cotangent_beside_a_nan_contributes_zero_in_norms_and_vecdot(name):
    """``np.where(np.isnan(r), 0.0, r)`` gives ``r`` a zero cotangent where it is NaN; the
    pullbacks of the norm and of vecdot multiplied it by their NaN partials (NumPy's ``0 *
    nan``), so the gradient was NaN where the derivative is zero (or finite elsewhere)."""
    def guarded(x, y):
        r = NAN_GUARDED[name](x, y)
        return np.sum(np.where(np.isnan(r), 0.0, r))

    x, y = NAN_AT_1.copy(), np.array([1.5, -0.5, 0.25, 2.0])
    before = (x.tobytes(), y.tobytes())
    gx, gy = no_invalid_warning(lambda: mutad.gradient(guarded, x, y, argnums=(0, 1)))
    assert (x.tobytes(), y.tobytes()) == before
    finite = ~np.isnan(x)
    for grad, at, other in ((gx, lambda v: guarded(v, y), x), (gy, lambda v: guarded(x, v), y)):
        expected = central_differences(at, other, 1e-6)
        keep = finite if other is x else np.ones(4, bool)  # the NaN entry has no neighbours
        np.testing.assert_allclose(grad[keep], expected[keep], rtol=1e-6, atol=1e-9)
        assert np.all(np.isfinite(grad[keep]))



@pytest.mark.parametrize("f, grad", [
    (lambda b: np.dot([b[0], b[1]], [1.0, 2.0]), [1.0, 2.0, 0.0, 0.0]),
    (lambda b: np.dot((1.0, 2.0), b[:2]), [1.0, 2.0, 0.0, 0.0]),
    (lambda b: np.dot([1, 2], b[:2]), [1.0, 2.0, 0.0, 0.0]),
    (lambda b: np.inner([1.0, 2.0], b[::-2]), [0.0, 2.0, 0.0, 1.0]),
])
def test_an_inner_product_with_a_list_of_numbers_has_its_gradient(f, grad):
    """The pullback of an inner product multiplies by the other operand: one NumPy took as a
    list or tuple of numbers is multiplied as its array (it raised TypeError)."""
    b = np.array([0.5, -1.5, 2.0, 3.0])
    kept = b.copy()
    value, (g,) = mutad.value_and_gradient(f, b, argnums=(0,))
    assert np.float64(value).tobytes() == np.float64(f(b.copy())).tobytes()
    assert g.tobytes() == np.array(grad).tobytes()
    assert mutad.jvp(f, (b,), (np.ones(4),))[1] == sum(grad)
    assert b.tobytes() == kept.tobytes()
