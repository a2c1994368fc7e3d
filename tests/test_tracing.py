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
    assert type(ds) is float and type(dt) is float
    assert isinstance(dz, np.ndarray) and dz.shape == ()
    check(f, x, s, t, z)


def test_float32_arguments_are_differentiated_in_float32(x):
    x32 = x.astype(np.float32)
    (g,) = mutad.gradient(lambda a: (a * a).sum(), x32)
    assert g.dtype == np.float32
    check(lambda a: np.exp(a) * a, x32)


def test_basic_indexing_reads_are_views_that_see_later_writes(x):
    def f(a):
        view = a[1:4]
        a[2] = 10.0 * a[0]  # visible through the view, as in NumPy
        return view * 1.0

    check(f, x)
    y, _ = mutad.pullback(f, x.copy())
    assert y[1] == 10.0 * x[0]


def test_scalar_element_reads_are_copies(x):
    def f(a):
        first = a[0]
        a[0] = 5.0  # NumPy's a[0] is a copy: `first` keeps the old value
        return first * a

    check(f, x)


@pytest.mark.parametrize("index", [
    np.array([0, 2, 2, 5]), np.array([True, False, True, False, False, True]),
    ([0, 3],), (slice(None, None, -2),), (Ellipsis,), (np.array([[1], [4]]),),
], ids=repr)
def test_advanced_and_boolean_indexing_reads_and_writes(x, index):
    def read(a):
        return a[index] * a[index]

    check(read, x)


@pytest.mark.parametrize("index", [np.array([0, 2, 5]), np.array([True, False, True, False, False, True]),
                                   [4, 1]], ids=repr)
def test_advanced_and_boolean_indexing_writes(x, index):
    def write(a, b):
        a[index] = b[: np.size(a[index])] ** 2
        a[index] *= 2.0
        return a

    check(write, x, x[::-1] + 0.5)


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


def test_array_creation_from_traced_without_like_is_a_copy(x):
    def f(a):
        b = np.array(a)
        b *= 2.0                      # a copy: a is unchanged
        return (b * a).sum()

    check(f, x)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_partials_evaluated_piecewise_give_the_same_gradient(monkeypatch, rng, policy):
    # Large arrays evaluate partial derivatives a piece at a time; make small ones do it too,
    # with pieces that do not divide the size, through every kind of operand.
    import mutad.products

    monkeypatch.setattr(mutad.products, "CHUNK", 3)
    x, w = rng.uniform(0.2, 1.2, (5, 7)), rng.uniform(0.2, 1.2, (5, 7))

    def f(x, w, s):
        a = np.sin(x) * np.tanh(w)           # partials reading x, y and the other operand
        a *= x                               # in place, partial read after the undo
        b = np.exp(a) / (w + s)              # scalar operand and a partial reading both inputs
        b[:, ::2] = np.cos(b[:, ::2].T).T    # non-contiguous: evaluated whole
        return b * x[0]                      # broadcasting: evaluated whole

    mutad.check_grads(f, x, w, 0.5, policy=policy)


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
def test_creation_functions_whose_values_depend_on_traced_arguments(policy):
    mutad.check_grads(lambda a, b: np.sin(np.linspace(a, b, 7)), 0.2, 1.3, policy=policy)
    mutad.check_grads(lambda a, b: np.sin(np.linspace(a, b, 4, endpoint=False, axis=1)),
                      np.array([0.1, 0.3]), 2.0, policy=policy)
    mutad.check_grads(lambda s, x: np.full((2, 3), s, like=x) * x, np.array([0.5, 1.5, 2.0]),
                      np.ones((2, 3)), policy=policy)


def _filled_then_updated(make):
    """A program that creates a buffer with ``make``, writes into it and reads it nonlinearly."""
    def f(a):
        b = make(a)
        b[1:] = b[1:] + a[:-1] * a[1:]
        return np.sin(b) * a

    return f


# fmt: off
CREATIONS = {
    "zeros_like":        lambda a: np.zeros_like(a),
    "ones_like":         lambda a: np.ones_like(a),
    "empty_like":        lambda a: (lambda e: (e.fill(0.5), e)[1])(np.empty_like(a)),
    "empty-like=":       lambda a: (lambda e: (e.fill(0.5), e)[1])(np.empty(a.shape, like=a)),
    "zeros-like=":       lambda a: np.zeros(a.shape, like=a),
    "ones-like=":        lambda a: np.ones(a.shape, like=a),
    "eye-like=":         lambda a: np.eye(1, a.size, like=a)[0],
    "identity-like=":    lambda a: np.identity(a.size, like=a)[0],
    "full-traced-fill":  lambda a: np.full(a.shape, a[0] * a[1], like=a),
    "full_like":         lambda a: np.full_like(a, 2.0),
    "full_like-traced-fill": lambda a: np.full_like(a, a[2] ** 2),
    "full_like-row-fill": lambda a: np.full_like(np.stack([a, a]), np.sin(a))[1],
    "copy":              lambda a: np.copy(a),
    "copy-method":       lambda a: a.copy(),
    "array-like=":       lambda a: np.array(a, like=a),
    "array-of-items":    lambda a: np.array([a[0], a[1] * a[2], a[3], a[4], a[5], a[0] * a[0]], like=a),
    "asarray-like=":     lambda a: np.asarray(a, like=a),
    "asanyarray-like=":  lambda a: np.asanyarray(a[::-1], like=a),
    "ascontiguousarray": lambda a: np.ascontiguousarray(a[::-1], like=a),
    "asfortranarray":    lambda a: np.asfortranarray(a, like=a),
    "astype":            lambda a: a.astype(np.float64),
    "linspace":          lambda a: np.linspace(a[0], a[1] * a[2], 6),
    "linspace-retstep":  lambda a: (lambda ys: ys[0] * ys[1])(np.linspace(a[0], a[1] * a[2], 6, retstep=True)),
    "linspace-axis":     lambda a: np.linspace(a[:2], a[2:4] ** 2, 3, axis=1).reshape(-1),
}
# fmt: on


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("make", CREATIONS.values(), ids=CREATIONS.keys())
def test_creation_functions_second_derivatives(make, policy, x):
    # Nested reverse mode: the creation rules run on arrays the outer gradient traces (like=
    # them), and their pullbacks on traced cotangents.
    f = _filled_then_updated(make)
    mutad.check_grads(f, x, policy=policy)
    mutad.check_grads(f, x, policy=policy, order=2)


def test_asarray_of_a_traced_array_is_that_array(x):
    # As in NumPy, np.asarray (and the other variants) of an array that already fits is that
    # array: writes through it are writes into the argument.
    def f(a):
        b = np.asfortranarray(a, like=a)
        b[1:] *= a[:-1]
        return a * 1.0

    mutad.check_grads(f, x)
    expected = x[1:] * x[:-1]
    assert np.allclose(f(x.copy())[1:], expected)


def test_arange_with_traced_bounds_names_the_rewrite():
    with pytest.raises(mutad.MutadError, match="np.arange"):
        mutad.gradient(lambda a, x: (np.arange(a, 3.0, like=x) * x[0]).sum(), 0.5, np.ones(2))


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_elementwise_functions_that_are_not_ufuncs(policy):
    mutad.check_grads(lambda x: np.sinc(x) * x, np.array([-1.3, 0.4, 2.2]), policy=policy)
    assert mutad.gradient(lambda x: np.sinc(x).sum(), np.zeros(1))[0][0] == 0.0
    x = np.array([1.0, np.inf, -2.0, np.nan])
    grad = mutad.gradient(lambda x: (np.nan_to_num(x, posinf=5.0) * 2.0).sum(), x,
                          policy=policy)[0]
    assert np.array_equal(grad, [2.0, 0.0, 2.0, 0.0])
    with pytest.raises(mutad.MutadError, match="x\\[...\\] = np.nan_to_num"):
        mutad.gradient(lambda x: np.nan_to_num(x, copy=False).sum(), np.ones(2))


def test_methods_take_their_ndarray_signatures():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    for method in (lambda a: a.transpose(1, 0), lambda a: a.transpose((1, 0)),
                   lambda a: a.transpose(), lambda a: a.reshape(3, 2), lambda a: a.reshape((6,)),
                   lambda a: a.swapaxes(0, 1), lambda a: a.cumsum(1), lambda a: a.std(ddof=1),
                   lambda a: a.repeat(2, axis=0), lambda a: a.take([0, 2], axis=1),
                   lambda a: a.clip(2.5, 4.5), lambda a: a.max(axis=0), lambda a: a.flatten()):
        mutad.check_grads(method, x)
