"""Code written with plain ``import numpy as np`` runs unchanged on traced arrays."""

import numpy as np
import pytest

import mutad


def check(f, *args):
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, *args, policy=policy)


@pytest.fixture
def x(rng):
    return rng.uniform(0.5, 1.5, 6)


def test_operators_and_reflected_operators(x):
    check(lambda a: (2.0 - a) * (a / 3.0) + 1.0 / a - a ** 2 + 2.0 ** a + (-a) + abs(a - 1.0), x)


def test_augmented_assignment_every_differentiable_operator(x):
    def f(a, b):
        a += b
        a -= 0.5 * b
        a *= b
        a /= b + 1.0
        a **= 1.5
        a %= 0.7
        return a

    check(f, x, x[::-1].copy())


def test_floor_divide_in_place_writes_a_constant(x):
    def f(a):
        a *= 3.0
        a //= 1.0
        return a * 2.0

    y, back = mutad.pullback(f, x.copy())
    assert np.array_equal(back(np.ones_like(y))[0], np.zeros_like(x))
    check(lambda a: (a // 0.5) * a, x)


def test_comparisons_return_plain_arrays(x):
    def f(a):
        mask = a > 1.0
        assert type(mask) is np.ndarray and mask.dtype == bool
        assert type(np.argmax(a)) is not type(a)
        return np.where(mask, a * 2.0, a) if hasattr(np, "where") else a

    mutad.gradient(lambda a: (a > 1.0).sum() + a.sum(), x)


@pytest.mark.parametrize("make", [
    lambda a: np.zeros_like(a),
    lambda a: np.empty(a.shape, like=a),
    lambda a: np.ones_like(a),
    lambda a: a.copy(),
    lambda a: np.array(a, like=a),
    lambda a: np.copy(a),
    lambda a: a.astype(np.float64),
], ids=["zeros_like", "empty-like=", "ones_like", "copy-method", "array-like=", "np.copy", "astype"])
def test_buffers_born_from_traced_values_are_traced(x, make):
    def f(a):
        buffer = make(a)
        buffer[...] = 0.0
        buffer[1:] = a[:-1] * a[1:]
        buffer[0] += np.sin(a[0])
        return buffer

    check(f, x)


def test_fill_and_scalar_assignment(x):
    def f(a, s):
        b = np.empty_like(a)
        b.fill(s)
        b[2] = a[3] * s
        b[-1] *= a[0]
        return b

    check(f, x, 0.7)


def test_python_numpy_and_zero_d_scalars(x):
    def f(a, s, t, z):
        return (a * s + t) * z + s * t * z

    s, t, z = 1.3, np.float64(0.4), np.array(2.5)
    ds_a, ds, dt, dz = mutad.gradient(lambda a, s, t, z: f(a, s, t, z).sum(), x, s, t, z)
    assert type(ds) is float and type(dt) is np.float64  # each as its argument
    assert isinstance(dz, np.ndarray) and dz.shape == ()
    check(f, x, s, t, z)


def test_float32_arguments_are_differentiated_in_float32(x):
    x32 = x.astype(np.float32)
    (g,) = mutad.gradient(lambda a: (a * a).sum(), x32)
    assert g.dtype == np.float32
    check(lambda a: np.exp(a) * a, x32)


def test_out_argument_into_views(x):
    def f(a, b):
        np.multiply(a[:3], b[3:], out=a[3:])
        np.sin(a, out=a)
        np.add(a[::2], 1.0, out=b[::2])
        return a * b

    check(f, x, x + 1.0)


def test_self_aliasing_is_exact(x):
    def f(a):
        a += a
        a[1:] += a[:-1]
        a[:-1] *= a[1:]
        a[::-1] -= a
        return a

    check(f, x)


def test_len_iter_shape_attributes(x):
    def f(a):
        assert len(a) == 6 and a.shape == (6,) and a.ndim == 1 and a.size == 6
        assert a.dtype == np.float64
        total = 0.0
        for element in a:
            total = total + element * element
        return total

    check(f, x)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_partials_evaluated_piecewise_give_the_same_gradient(monkeypatch, rng, policy):
    # Large arrays evaluate partial derivatives a piece at a time; make small ones do it too,
    # with pieces that do not divide the size, through every kind of operand.
    import mutad.engines.products
    import mutad.engines.recompute

    monkeypatch.setattr(mutad.engines.products, "CHUNK", 3)
    monkeypatch.setattr(mutad.engines.products, "PIECE", 1)
    x, w = rng.uniform(0.2, 1.2, (5, 7)), rng.uniform(0.2, 1.2, (5, 7))

    def f(x, w, s):
        a = np.sin(x) * np.tanh(w)           # partials reading x, y and the other operand
        a *= x                               # in place, partial read after the undo
        b = np.exp(a) / (w + s)              # scalar operand and a partial reading both inputs
        b[:, ::2] = np.cos(b[:, ::2].T).T    # non-contiguous: evaluated whole
        return b * x[0]                      # broadcasting: evaluated whole

    mutad.check_grads(f, x, w, 0.5, policy=policy)


@pytest.mark.parametrize("piece", [1, 4])
@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_products_added_into_existing_shadows_piecewise(monkeypatch, rng, chunk, piece):
    # A partial's product is added into an input's shadow a piece at a time where that shadow
    # exists already; the gradient is the one the whole products give, bit for bit, whatever
    # the pieces' length.
    import mutad.engines.products
    import mutad.engines.recompute

    monkeypatch.setattr(mutad.engines.products, "CHUNK", chunk)
    monkeypatch.setattr(mutad.engines.products, "PIECE", piece)
    monkeypatch.setattr(mutad.engines.recompute, "SMALL", 0)  # small cotangents take a simpler path
    x, w = rng.uniform(0.2, 1.2, (5, 7)), rng.uniform(0.2, 1.2, (5, 7))

    def f(x, w):
        a = np.sin(x)
        a *= x                     # x's shadow exists when this is reversed
        b = np.tanh(a)
        b += x
        b *= w                     # neither shadow exists: one takes the cotangent's memory
        c = x * x                  # one buffer twice
        return (np.exp(b) * a).sum() + (c * w).sum() + x.sum()

    # A zero cotangent times an infinite partial (sqrt at 0) adds zero to an existing shadow.
    z = np.tile([0.0, 0.0, 1.0, 4.0, 0.0, 9.0, 0.25], 2)
    mask = (z != 0).astype(float)
    grad = mutad.gradient(lambda z: (np.sqrt(z) * mask).sum() + z.sum(), z)[0]
    assert np.array_equal(grad, 1.0 + mask * np.where(z == 0, 0.0, 0.5 / np.sqrt(z + (z == 0))))

    x0 = x.tobytes()
    grads = mutad.gradient(f, x, w)
    assert x.tobytes() == x0
    mutad.check_grads(f, x, w)
    monkeypatch.setattr(mutad.engines.products, "CHUNK", 1 << 20)
    assert all(np.array_equal(g, e) for g, e in zip(grads, mutad.gradient(f, x, w)))


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_equal_cotangents_share_memory_unseen(monkeypatch, rng, chunk):
    # The cotangents of a + b are one array for both until one of them is written; a pullback
    # reading one while writing the other reads what it held (here x's shadow is b's when
    # b = x * w is reversed).
    import mutad.engines.products
    import mutad.engines.recompute

    monkeypatch.setattr(mutad.engines.products, "CHUNK", chunk)
    monkeypatch.setattr(mutad.engines.products, "PIECE", 1)
    monkeypatch.setattr(mutad.engines.recompute, "SMALL", 0)  # small cotangents take a simpler path
    x, w = rng.uniform(0.2, 1.2, 14), rng.uniform(0.2, 1.2, 14)

    def f(x, w):
        b = x * w
        b += x
        c = np.sin(b) + w
        return (c * c).sum()

    gx, gw = mutad.gradient(f, x, w)
    db = 2 * (np.sin(x * w + x) + w) * np.cos(x * w + x)
    np.testing.assert_allclose(gx, db * (w + 1), rtol=1e-13)
    np.testing.assert_allclose(gw, db * x + 2 * (np.sin(x * w + x) + w), rtol=1e-13)
    mutad.check_grads(f, x, w)

    # Arguments' gradients that were one shared array come back as arrays of their own.
    gx, gy = mutad.gradient(lambda x, y: (x + y).sum(), x, w)
    assert not np.shares_memory(gx, gy)
    gx += 1.0
    np.testing.assert_array_equal(gy, np.ones(14))


def test_out_passed_positionally(rng):
    def f(a, b):
        c = np.zeros_like(a)
        np.dot(a, b, c)               # c is dot's out
        np.cumsum(c, 0, None, c)      # and cumsum's
        return c

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, rng.standard_normal((3, 3)), rng.standard_normal((3, 3)),
                          policy=policy)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_elementwise_functions_that_are_not_ufuncs(policy):
    mutad.check_grads(lambda x: np.sinc(x) * x, np.array([-1.3, 0.4, 2.2]), policy=policy)
    assert mutad.gradient(lambda x: np.sinc(x).sum(), np.zeros(1))[0][0] == 0.0
    x = np.array([1.0, np.inf, -2.0, np.nan])
    grad = mutad.gradient(lambda x: (np.nan_to_num(x, posinf=5.0) * 2.0).sum(), x,
                          policy=policy)[0]
    assert np.array_equal(grad, [2.0, 0.0, 2.0, 0.0])


def nan_to_num_programs():
    """Realistic uses of np.nan_to_num: out of place, in place (copy=False) on a buffer the
    function computed, on the real and imaginary parts of a complex array, with its options."""
    def in_place(x, y):
        r = np.log(x) * y                   # NaN where x < 0, -inf where x == 0
        np.nan_to_num(r, copy=False, nan=-1.0)
        return r * y

    def in_place_view(x):
        r = 1.0 / x
        out = np.nan_to_num(r[1:], copy=False)
        return out is not None and r * 2.0

    def complex_parts(x, y):
        z = (np.log(x) + 1j * np.sqrt(y)) * (x + 0.5j)
        return np.abs(np.nan_to_num(z, posinf=7.0)) ** 2

    def scalar(x):
        return np.nan_to_num(np.log(x[0]) * x[1], neginf=-3.0) * x

    return [in_place, in_place_view, complex_parts, scalar]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_to_num_values_bit_for_bit(rng):
    """NumPy's values, in place too, in both modes; the caller's arrays untouched."""
    for f in nan_to_num_programs():
        nargs = f.__code__.co_argcount
        for _ in range(40):
            args = [np.where(rng.random(5) < 0.3, 0.0, rng.standard_normal(5))
                    for _ in range(nargs)]
            if f.__name__ == "in_place_view":
                args[0][rng.random(5) < 0.3] = 0.0
            before = [a.tobytes() for a in args]
            expected = f(*[a.copy() for a in args])
            y, _ = mutad.pullback(f, *args)
            y_forward, _ = mutad.jvp(f, tuple(args), tuple(np.ones_like(a) for a in args))
            for got in (y, y_forward):
                assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
            assert [a.tobytes() for a in args] == before


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_nan_to_num_in_place_derivatives(policy):
    """np.nan_to_num(x, copy=False) writes into x: the replaced elements carry no derivative,
    the others theirs, in reverse and forward mode, and replayed on other inputs."""
    x, y = np.array([0.5, -1.0, 0.0, 2.0]), np.array([1.5, 0.3, -0.7, 1.1])
    in_place, in_place_view, complex_parts, scalar = nan_to_num_programs()
    # NaNs replaced (infinities replaced by the largest float are not differenced)
    for f, args in ((in_place, (x + 0.5, y)), (in_place_view, (x + 3.0,)),
                    (complex_parts, (x + 0.5, np.abs(y) + 0.1)),
                    (scalar, (np.array([1.3, 0.7]),)), (scalar, (np.array([-1.3, 0.7]),))):
        mutad.check_grads(f, *args, policy=policy)
        mutad.check_jvp(f, *args)
    grad = mutad.gradient(lambda x, y: in_place(x, y).sum(), x, y, policy=policy)[0]
    assert np.array_equal(grad, [y[0] ** 2 / x[0], 0.0, 0.0, y[3] ** 2 / x[3]])
    from test_replay import replayed_like_traced
    # (only the second call overflows in r * y, the largest float times 1.1: a replay whose
    # floating-point events are not the recorded ones is traced, which warns as NumPy does)
    replayed_like_traced(lambda x, y: np.sum(in_place(x, y)),
                         [(x, y), (np.array([-0.5, 1.0, 2.0, 0.0]), y), (x[::-1].copy(), y)],
                         policy=policy, replayed=False)


def test_methods_take_their_ndarray_signatures():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    for method in (lambda a: a.transpose(1, 0), lambda a: a.transpose((1, 0)),
                   lambda a: a.transpose(), lambda a: a.reshape(3, 2), lambda a: a.reshape((6,)),
                   lambda a: a.swapaxes(0, 1), lambda a: a.cumsum(1), lambda a: a.std(ddof=1),
                   lambda a: a.repeat(2, axis=0), lambda a: a.take([0, 2], axis=1),
                   lambda a: a.clip(2.5, 4.5), lambda a: a.max(axis=0), lambda a: a.flatten()):
        mutad.check_grads(method, x)
