"""Creation functions (rules/creation.py): buffers made from traced values, filled from traced
fills and written afterwards, in both modes; np.sinc's forward rule (np.nan_to_num, a composition, in test_tracing)."""

import enum
import warnings

import numpy as np
import pytest

import mutad
from cases import case_id, check_complex, replays_as_traced
from mutad.core.registry import RULES
from rule_checks import V, V4, X, X3, XF, Const, check_forward_rule, normal_array, rule_case


@pytest.fixture
def x(rng):
    return rng.uniform(0.5, 1.5, 6)


def test_array_creation_from_traced_without_like_is_a_copy(x):
    def f(a):
        b = np.array(a)
        b *= 2.0                      # a copy: a is unchanged
        return (b * a).sum()

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)


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
    "require":           lambda a: np.require(a[::-1], requirements=["C", "W"]),
    "require-like=":     lambda a: np.require(a, None, "A", like=a),
    "asarray_chkfinite": lambda a: np.asarray_chkfinite(a[::-1]),
    "astype":            lambda a: a.astype(np.float64),
    "linspace":          lambda a: np.linspace(a[0], a[1] * a[2], 6),
    "linspace-retstep":  lambda a: (lambda ys: ys[0] * ys[1])(np.linspace(a[0], a[1] * a[2], 6, retstep=True)),
    "linspace-axis":     lambda a: np.linspace(a[:2], a[2:4] ** 2, 3, axis=1).reshape(-1),
}
# fmt: on


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("make", CREATIONS.values(), ids=CREATIONS.keys())
def test_creation_functions_second_derivatives(make, policy, x):
    # Nested reverse mode: the creation rules run on arrays the outer gradient traces (like=
    # them), and their pullbacks on traced cotangents.
    mutad.check_grads(_filled_then_updated(make), x, policy=policy, order=2)


REAL_BUFFERS = {"empty-like=", "zeros-like=", "ones-like=", "eye-like=", "identity-like=",
                "astype"}  # float64 whatever a's dtype: complex versions below
COMPLEX_CREATIONS = {  # the same on complex values, and complex buffers made from real ones
    **{name: CREATIONS[name] for name in CREATIONS if name not in REAL_BUFFERS},
    "astype": lambda a: a.astype(np.complex128),
    "empty-like=": lambda a: (lambda e: (e.fill(0.5j), e)[1])(np.empty(a.shape, complex, like=a)),
    "zeros-like=": lambda a: np.zeros(a.shape, complex, like=a),
    "ones-like=": lambda a: np.ones(a.shape, np.complex128, like=a),
    "eye-like=": lambda a: np.eye(1, a.size, dtype=complex, like=a)[0],
    "identity-like=": lambda a: np.identity(a.size, complex, like=a)[0],
    "zeros-complex-filled": lambda a: (lambda z: (z.__setitem__(Ellipsis, a * a), z)[1])(
        np.zeros(a.shape, complex, like=a)),
    "full-complex-fill": lambda a: np.full(a.shape, (1.0 - 2.0j) * a[3], like=a),
    "linspace-complex": lambda a: np.linspace(a[0] + 1j * a[1], a[2], 6),
}


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("make", COMPLEX_CREATIONS.values(), ids=COMPLEX_CREATIONS.keys())
def test_creation_functions_of_complex_values(make, order, policy, x, rng):
    z = x + 1j * rng.uniform(-1.0, 1.0, x.shape)
    check_complex(_filled_then_updated(make), (z,), policy, order=order)


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


REQUIRED = {
    "fits": (lambda a: np.require(a, requirements=["C", "W"]), True),
    "reversed, C": (lambda a: np.require(a[::-1], requirements="C"), False),
    "F of a matrix": (lambda a: np.require(np.outer(a, a), requirements="F"), False),
    "dtype": (lambda a: np.require(a, np.float32), False),
    "list of items": (lambda a: np.require([a[0], a[1] * a[2]]), False),
    "checked finite": (lambda a: np.asarray_chkfinite(a), True),
    "checked finite, F": (lambda a: np.asarray_chkfinite(np.outer(a, a), order="F"), False),
    "checked items": (lambda a: np.asarray_chkfinite([a[0], a[1] * a[2]]), False),
}


@pytest.mark.parametrize("form", REQUIRED)
def test_require_and_asarray_chkfinite(form, x):
    # NumPy's array, layout and dtype; where it returns the argument itself, writes through the
    # result are writes into the argument (the caller's array coming back bit for bit).
    make, itself = REQUIRED[form]
    copy = x.copy()
    expected = make(x.copy())
    y, _ = mutad.pullback(make, copy)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()

    def f(a):
        b = make(a)
        b[..., :2] *= 3.0
        return np.sum(np.sin(b) * a[0]) + np.sum(a ** 2)

    assert (make(copy) is copy) == itself
    for policy in ("restore", "checkpoint"):
        if y.dtype == np.float64:
            mutad.check_grads(f, copy, policy=policy)
            mutad.check_jvp(f, copy)
    assert np.array_equal(copy, x)


def test_require_of_owned_data_is_refused(x):
    for requirements in ("O", ["C", "OWNDATA"]):
        with pytest.raises(mutad.MutadError, match="requirements='O'"):
            mutad.gradient(lambda a: np.require(a, requirements=requirements).sum(), x)
        with pytest.raises(mutad.MutadError, match="requirements='O'"):
            mutad.jvp(lambda a: np.require(a, None, requirements).sum(), (x,), (x,))


def test_asarray_chkfinite_keeps_numpys_error(x):
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="infs or NaNs"):
        mutad.gradient(lambda a: np.asarray_chkfinite(np.log(a - 1.0)).sum(), x)


@pytest.mark.parametrize("form", ["array", "items", "float32"])
def test_a_replayed_asarray_chkfinite_checks_each_calls_values(form):
    """NumPy's check is a decision on the values: a replay on values it fails raises NumPy's
    error, or takes the program's path for it, and one on values it passes after such a call
    passes (the replay returned the infinite values' results, without NumPy's error)."""
    check = {"array": lambda a: np.asarray_chkfinite(a * 2.0),
             "items": lambda a: np.asarray_chkfinite([a[0] * 2.0, a[1]]),
             "float32": lambda a: np.asarray_chkfinite(a * 2.0, dtype=np.float32)}[form]

    def f(a):
        return np.sum(check(a) ** 2)

    def guarded(a):
        try:
            return f(a)
        except ValueError:
            return np.sum(a) * 0.0

    finite = [np.array([1.0, 2.0, 0.5]), np.array([0.5, -1.0, 3.0]), np.array([2.0, 1.0, 0.0])]
    infinite = np.array([1e300, np.inf, 1.0]) if form == "float32" else np.array(
        [1.0, np.inf, 2.0])
    replaying = mutad.value_and_grad(f, replay=True)
    for a in finite:
        replaying(a)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="infs or NaNs"):
        replaying(infinite)
    with np.errstate(all="ignore"):
        replays_as_traced(guarded, [(a,) for a in finite] + [(infinite,)] + [(finite[0],)] * 3)


def test_arange_with_traced_bounds_names_the_rewrite():
    with pytest.raises(mutad.MutadError, match="np.arange"):
        mutad.gradient(lambda a, x: (np.arange(a, 3.0, like=x) * x[0]).sum(), 0.5, np.ones(2))


# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, and the transpose of
# the reverse rule (rule_checks.check_forward_rule)

LIST = [np.array(1.5), 2.0, np.array(-0.5)]
FILL = np.array(0.25)
STARTS, STOPS = normal_array(3), normal_array(3)

CREATION = [
    rule_case(np.copy, X),
    rule_case(np.copy, XF, order="C"),
    rule_case(np.array, X),
    rule_case(np.array, X, ndmin=3),
    rule_case(np.array, LIST),
    rule_case(np.array, [X, Const(X)]),
    rule_case(np.asarray, X),
    rule_case(np.asarray, X, dtype=np.float32, fd=False),  # differences in single precision
    rule_case(np.asanyarray, LIST),
    rule_case(np.ascontiguousarray, XF),
    rule_case(np.asfortranarray, X),
    rule_case(np.require, XF, None, "C"),
    rule_case(np.require, X, np.float64, ["F", "A"]),
    rule_case(np.ndarray.astype, X, np.float32, fd=False),
    rule_case(np.ndarray.astype, X, np.float64, copy=False),
    rule_case(np.full, (2, 3), FILL),
    rule_case(np.full, (2, 3), V[:3]),
    rule_case(np.full_like, X, FILL),
    rule_case(np.full_like, X3, V4),
    rule_case(np.linspace, FILL, np.array(3.0), 7),
    rule_case(np.linspace, STARTS, STOPS, 4, axis=1),
    rule_case(np.linspace, Const(STARTS), STOPS, 5, endpoint=False),
    rule_case(np.linspace, FILL, 2.0, 5, retstep=True),
    rule_case(np.sinc, np.append(X, 0.0)),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arguments are cases here
@pytest.mark.parametrize("case", CREATION, ids=case_id)
def test_forward_rule_creation(case, rng):
    check_forward_rule(case, rng)


@pytest.mark.parametrize("key, args, kwargs", [
    (np.zeros_like, (X,), {}), (np.ones_like, (X3,), {"dtype": np.float32}),
    (np.empty_like, (X,), {"shape": (2, 2)}), (np.zeros, ((2, 3),), {}), (np.ones, (4,), {}),
    (np.empty, ((3,),), {}), (np.eye, (3, 4), {"k": 1}), (np.identity, (3,), {}),
    (np.arange, (0.0, 1.0, 0.25), {}), (np.full, ((2,), 1.5), {}), (np.array, ([1.0, 2.0],), {}),
])
def test_created_float_buffers_get_zero_tangents(key, args, kwargs):
    """Created from a dual (``like=`` one too), a float buffer gets a writable zero tangent."""
    y, dy = RULES[key].forward((None,) * len(args), *args, **kwargs)
    assert dy.shape == y.shape and dy.dtype == y.dtype and not dy.any() and dy.flags.writeable
    assert not np.shares_memory(y, dy)


@pytest.mark.parametrize("key, args", [
    (np.zeros_like, (np.arange(3),)), (np.arange, (5,)), (np.ndarray.astype, (X, int)),
    (np.array, (X, int)),
])
def test_integer_results_have_no_tangent(key, args):
    tangents = tuple(np.ones_like(x) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else None
                     for x in args)
    assert RULES[key].forward(tangents, *args)[1] is None


def test_arange_with_a_tangent_is_refused():
    from mutad.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError, match="np.linspace"):
        RULES[np.arange].forward((np.array(1.0),), np.array(3.0))


def test_asarray_of_an_array_is_the_array_and_its_tangent_the_tangent():
    t = np.ones_like(X)
    y, dy = RULES[np.asarray].forward((t,), X)
    assert y is X and dy is t


FROMITER = {
    "generator": lambda a: np.fromiter((v * v for v in a), dtype=float),
    "count": lambda a: np.fromiter((np.sin(v) for v in a), float, 4),
    "complex": lambda a: np.fromiter((v * 1j + 1.0 for v in a), dtype=complex).real,
    "plain items among traced": lambda a: np.fromiter(iter([a[0], 2.0, 3, a[1] * a[2]]), float),
    "then written": lambda a: _written(np.fromiter(map(np.exp, a), float), a),
}


def _written(b, a):
    b[1:] *= a[:-1]
    return b


@pytest.mark.parametrize("form", FROMITER)
def test_fromiter_of_traced_numbers(form, x):
    f = FROMITER[form]
    copy = x.copy()
    y, _ = mutad.pullback(f, copy)
    expected = f(x)
    assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()  # NumPy's values
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, copy, policy=policy, order=2)
    assert np.array_equal(copy, x)  # the caller's array, bit for bit


def test_fromiter_casts_as_numpy_does(x):
    # float32 items rounded as NumPy rounds each (finite differences of float32 values are
    # too coarse to check): the gradient of the same cast written with astype
    def f(a):
        return np.sum(np.fromiter((v * 3.0 for v in a), dtype=np.float32) ** 2)

    def g(a):
        return np.sum((a * 3.0).astype(np.float32) ** 2)

    copy = x.copy()
    value, (gradient,) = mutad.value_and_gradient(f, copy)
    assert value == f(x) and value.dtype == np.float32
    assert np.array_equal(gradient, mutad.gradient(g, x.copy())[0])
    assert np.array_equal(copy, x)


def test_fromiter_keeps_numpys_errors_and_plain_calls(x):
    with pytest.raises(ValueError, match="iterator too short"):
        mutad.gradient(lambda a: np.fromiter((v for v in a), float, 9).sum(), x)
    (g,) = mutad.gradient(lambda a: np.fromiter(range(3), float).sum() * a.sum(), x)
    assert np.array_equal(g, np.full(6, 3.0))


def test_fromiter_replays_as_traced(x):
    from cases import replays_as_traced

    def f(a):
        return np.sum(np.fromiter((v * v for v in a if v > 0.8), float) ** 3)

    replays_as_traced(f, [(x * s,) for s in (1.0, 1.3, 0.7)])


class Mode(enum.IntEnum):
    FAST = 2


class Parameter:
    """An object of the user's with a ``value`` of its own, which NumPy converts by
    ``__array__`` (scaled): not a traced array, whatever its attribute's name."""

    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value * self.scale, dtype=dtype)


def test_objects_with_a_value_attribute_are_converted_as_numpy_converts_them(x):
    # An Enum member and a parameter object have a ``value``, as mutad's traced arrays do:
    # they were taken for traced arrays (np.full, np.asarray raised a TypeError of ``like``)
    weights = Parameter(np.linspace(1.0, 2.0, 6), 10.0)

    def f(a):
        filled = np.full(6, Mode.FAST, dtype=float)
        return (a * filled * np.asarray(weights)).sum() + np.interp(a, np.array(weights),
                                                                    a).sum()

    expected = f(x.copy())
    value, gradient = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    mutad.check_grads(f, x)
    replays_as_traced(f, [(x,), (x * 1.25,), (x,)])


def test_an_object_numpy_converts_by_its_array_is_a_ufunc_operand_beside_traced_ones(x):
    # x * weights reached the product's pullback (and tangent) with the object itself, which
    # raised a TypeError where NumPy multiplies by the array it converts the object to
    weights = Parameter(np.linspace(1.0, 2.0, 6), 10.0)

    def f(a):
        return ((a * weights) ** 2).sum() + np.multiply(weights, a).sum() + np.add(a, weights) @ a

    caller = x.copy()
    value, gradient = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    assert x.tobytes() == caller.tobytes()
    w = np.asarray(weights)
    assert np.allclose(gradient, 2 * w * w * x + w + 2 * x + w, rtol=1e-14, atol=0)
    _, tangent = mutad.jvp(f, (x,), (np.ones(6),))
    assert np.isclose(tangent, gradient.sum(), rtol=1e-14, atol=0)
    assert np.allclose(mutad.hvp(f, (x,), (np.ones(6),)), 2 * w * w + 2, rtol=1e-14, atol=0)
    replaying = replays_as_traced(f, [(x,), (x * 1.25,)])
    weights.scale = 20.0  # what the object holds, which a replay follows
    value, _ = replaying(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()


def test_an_object_numpy_converts_by_its_array_is_a_functions_operand_in_forward_mode(x):
    # np.where(a > 0, weights, a): the forward rule made the zero tangent of the object from
    # its dtype, which it has not (np.result_type raised a TypeError); NumPy converts it
    weights = Parameter(np.linspace(1.0, 2.0, 6), 0.1)

    def f(a):
        return (np.where(a > 0, weights, a) * a).sum() + np.clip(a, weights, 1.0).sum()

    value, gradient = mutad.value_and_grad(f)(x)
    y, tangent = mutad.jvp(f, (x,), (np.ones(6),))
    assert np.asarray(y).tobytes() == np.asarray(value).tobytes() \
        == np.asarray(f(x.copy())).tobytes()
    assert np.isclose(tangent, gradient.sum(), rtol=1e-14, atol=0)
    mutad.check_grads(f, x)


class Doubled:
    """An object of the user's made inside the function, whose ``__array__`` computes from
    what it holds: with a traced value, a traced array, which NumPy rejects ("object __array__
    method not producing an array")."""

    def __init__(self, value):
        self.value = value
        self.calls = 0

    def __array__(self, dtype=None, copy=None):
        self.calls += 1
        return np.asarray(self.value * 2.0, dtype=dtype)


def test_an_object_whose_array_computes_from_traced_values_is_built_from_what_it_returns(x):
    def f(a):
        d = Doubled(a + 1.0)
        y = np.asarray(d)
        z = np.array(d, dtype=np.float64)
        z[0] = 0.0  # a copy, as NumPy's: y is not changed
        assert d.calls == 2  # each conversion calls __array__ once, as NumPy does
        return (y * z).sum() + np.asarray(d, dtype=float)[1:].sum()

    caller = x.copy()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    assert x.tobytes() == caller.tobytes()
    mutad.check_grads(f, x)
    replays_as_traced(f, [(x,), (x * 1.25,)])


_OBJECT_ARRAYS = {
    "full": lambda x: np.full(3, x[0], dtype=object).sum() ** 2,
    "ragged": lambda x: np.array([x[:2], x[2:]], dtype=object)[0].sum() ** 2,  # was a ValueError
}


@pytest.mark.parametrize("name", sorted(_OBJECT_ARRAYS))
def test_an_object_array_of_traced_values_is_refused_not_a_zero_gradient(name, x):
    # NumPy fills an object array made by a cast with plain Python numbers: each mode gave a
    # zero derivative through it, without a word, before it was refused (an object array of a
    # list of traced numbers holds those numbers, as NumPy's holds NumPy's scalars: followed;
    # a cast of an array, x.astype(object), holds its numbers as Python's: followed too)
    f = _OBJECT_ARRAYS[name]
    before = x.copy()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="dtype object"):
        mutad.gradient(f, x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="dtype object"):
        mutad.grad(f, replay=True)(x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="dtype object"):
        mutad.jvp(f, (x,), (np.ones_like(x),))
    assert x.tobytes() == before.tobytes()


def test_an_object_array_of_constants_or_filled_by_assignment_is_followed(x):
    def f(a):
        b = np.zeros(2).astype(object)  # constants: no derivative to lose
        b[0] = a[0]                     # each element the traced value itself
        b[1] = a[1] * a[2]
        return b.sum() ** 2

    before = x.copy()
    mutad.check_grads(f, x)
    assert x.tobytes() == before.tobytes()


# fmt: off
SHAPED = {  # a matrix diag(1, 1, 2) made from a traced array's shape alone
    "ones_like":      lambda b: np.diag(np.ones_like(b)),
    "zeros_like":     lambda b: np.diag(np.zeros_like(b) + 1.0),
    "empty_like":     lambda b: np.diag((lambda e: (e.fill(1.0), e)[1])(np.empty_like(b))),
    "empty_like-set": lambda b: np.diag((lambda e: (e.__setitem__(Ellipsis, 1.0), e)[1])(
        np.empty_like(b))),
    "full_like":      lambda b: np.diag(np.full_like(b, 1.0)),
    "ones_like-shape": lambda b: np.ones_like(b, shape=(3, 3)) * np.eye(3),
    "zeros-like=":    lambda b: np.diag(np.zeros(3, like=b) + 1.0),
    "full-like=":     lambda b: np.diag(np.full(3, 1.0, like=b)),
    "eye-like=":      lambda b: np.eye(3, like=b),
    "identity-like=": lambda b: np.identity(3, like=b),
}
# fmt: on


def _spectral_quadratic(make):
    """``b @ C @ b`` through eigh of ``C = diag(1, 1, 2)``, made by ``make`` from ``b``: its
    repeated eigenvalue is refused only for a matrix that depends on what is differentiated."""
    def f(b):
        C = make(b)
        C[-1, -1] = 2.0
        w, V = np.linalg.eigh(C)
        return np.sum((V.T @ b) ** 2 * w)

    return f


@pytest.mark.parametrize("make", SHAPED.values(), ids=SHAPED.keys())
def test_a_buffer_made_from_a_traced_arrays_shape_is_a_constant(make):
    f = _spectral_quadratic(make)
    b = np.array([1.0, 2.0, 3.0])
    held = b.tobytes()
    expected = np.array([2.0, 4.0, 12.0])  # the gradient of b0² + b1² + 2 b2²
    assert np.allclose(mutad.gradient(f, b)[0], expected, rtol=1e-14)
    assert np.allclose(mutad.grad(f, replay=True)(b), expected, rtol=1e-14)
    replays_as_traced(f, [(b,), (b * 1.5,)])
    assert np.allclose(mutad.jvp(f, (b,), (np.ones(3),))[1], expected.sum(), rtol=1e-14)
    assert np.allclose(mutad.hessian(f, b), np.diag([2.0, 2.0, 4.0]), rtol=1e-14)
    assert b.tobytes() == held


# fmt: off
SHAPED_WRITTEN = {  # made from a traced array's shape, then traced values written into them
    "zeros_like":  lambda b: np.zeros_like(b),
    "empty_like":  lambda b: (lambda e: (e.fill(0.5), e)[1])(np.empty_like(b)),
    "ones-like=":  lambda b: np.ones(b.shape, like=b),
    "full_like":   lambda b: np.full_like(b, 2.0),
}
# fmt: on


@pytest.mark.parametrize("make", SHAPED_WRITTEN.values(), ids=SHAPED_WRITTEN.keys())
def test_a_constant_buffer_made_from_a_traced_arrays_shape_follows_traced_writes(make):
    def f(b):
        w = make(b)
        w[0] = b[1] * 2.0
        w[2:] += np.sin(b[:2])
        return np.sum(w ** 2 * b)

    b = np.array([0.7, 1.3, -0.4, 2.1])
    held = b.tobytes()
    mutad.check_grads(f, b, order=2)
    replays_as_traced(f, [(b,), (b * 0.5,)])
    assert b.tobytes() == held


def test_the_square_root_of_a_buffer_made_from_a_traced_arrays_shape_does_not_warn():
    # its zeros carry no derivative: no infinite partial is multiplied by a zero cotangent
    def f(b):
        return np.sum(np.sqrt(np.zeros_like(b)) + b)

    b = np.array([1.0, 2.0, 3.0])
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(mutad.gradient(f, b)[0], np.ones(3))
        assert np.array_equal(mutad.grad(f, replay=True)(b), np.ones(3))


@pytest.mark.parametrize("decompose", [
    lambda M: (lambda U, s, Vt: (s, U))(*np.linalg.svd(M)),
    lambda M: (lambda w, V: (np.real(w), np.real(V)))(*np.linalg.eig(M)),
], ids=["svd", "eig"])
def test_decompositions_of_a_matrix_made_from_a_traced_arrays_shape(decompose):
    # its repeated singular values and eigenvalues are NumPy's constants, not refused
    def f(b):
        s, U = decompose(np.diag(np.ones_like(b)))
        return np.sum((U.T @ b) ** 2 * s)

    b = np.array([1.0, 2.0, 3.0])
    held = b.tobytes()
    assert np.allclose(mutad.gradient(f, b)[0], 2.0 * b, rtol=1e-14)
    assert np.allclose(mutad.grad(f, replay=True)(b), 2.0 * b, rtol=1e-14)
    assert b.tobytes() == held
