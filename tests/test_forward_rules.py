"""Forward rules of reductions, shape functions, gathers, creation functions, np.sinc and
np.nan_to_num, called directly: each tangent is compared with a fourth-order central difference
along the tangent, and with the reverse rule through the transpose identity
``<J t, w> = <t, Jᵀ w>``, which also pins down the conventions at ties and kinks."""

import numpy as np
import pytest

import mutad
from mutad.custom import Adjoint
from mutad.registry import FUNCTIONS, JVPS
from mutad.scipy import signal, special
from mutad.testing import check_jvp

# All-NaN slices and NaN arguments are cases here, not accidents.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG = np.random.default_rng(7)
STEP = 1e-4


class Const:
    """An argument that carries no tangent."""

    def __init__(self, value):
        self.value = value


def normal(*shape):
    return RNG.standard_normal(shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def with_nans(x, every=3):
    x = x.copy()
    x.reshape(-1)[::every] = np.nan
    return x


# ----------------------------------------------------------------------------------------------
# The checker


def callable_of(key):
    if isinstance(key, Adjoint):
        return key.fn
    return getattr(*key) if type(key) is tuple else key


def split_tangents(args):
    """Plain arguments and tangents: one for each float array not marked ``Const``."""
    def split(x):
        if type(x) is Const:
            return x.value, None
        if type(x) in (list, tuple):
            pairs = [split(item) for item in x]
            tangents = [t for _, t in pairs]
            if all(t is None for t in tangents):
                tangents = None
            return type(x)(p for p, _ in pairs), tangents
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            t = np.empty_like(x)  # laid out as its primal, as the core lays tangents out
            t[...] = RNG.standard_normal(x.shape)
            return x, t
        return x, None

    pairs = [split(x) for x in args]
    return [p for p, _ in pairs], tuple(t for _, t in pairs)


def moved(x, t, step):
    if t is None:
        return x
    if type(x) in (list, tuple):
        return type(x)(moved(a, b, step) for a, b in zip(x, t, strict=True))
    return x + step * t


def finite_difference(call, args, tangents, kwargs):
    def at(step):
        y = call(*(moved(x, t, step) for x, t in zip(args, tangents, strict=True)), **kwargs)
        return [np.asarray(item, float) for item in outputs(y)] if type(y) in (list, tuple) \
            else np.asarray(y, float)

    ys = [at(k * STEP) for k in (-2, -1, 1, 2)]
    weights = (1 / 12, -8 / 12, 8 / 12, -1 / 12)
    if type(ys[0]) is list:
        return [sum(w * y[i] for w, y in zip(weights, ys)) / STEP for i in range(len(ys[0]))]
    return sum(w * y for w, y in zip(weights, ys)) / STEP


def pairs_of(xs, ts):
    """Matching leaves of two trees (lists of arrays, ``None`` where one has nothing)."""
    if type(xs) in (list, tuple) or type(ts) in (list, tuple):
        for x, t in zip(xs, ts, strict=True):
            yield from pairs_of(x, t)
    elif xs is not None and ts is not None:
        yield xs, ts


def inner(pairs):
    return sum(float(np.sum(np.where(np.isfinite(a), a, 0) * b)) for a, b in pairs)


def outputs(y):
    return list(y) if type(y) in (list, tuple) else [y]


def check(key, *args, fd=True, **kwargs):
    """Run ``JVPS[key]``; check ``y``, ``dy`` against finite differences (``fd``) and against the
    reverse rule. Returns ``(y, dy, tangents)``."""
    call = callable_of(key)
    if hasattr(key, "signature"):  # a SciPy wrapper's rules see every parameter in its place
        bound = key.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    args, tangents = split_tangents(args)
    forward_rule, reverse_rule = ((key.forward_rule, key.pure_rule) if isinstance(key, Adjoint)
                                  else (JVPS[key], FUNCTIONS.get(key)))
    y, dy = forward_rule(tangents, *args, **kwargs)
    expected_y = call(*args, **kwargs)
    for a, b in zip(outputs(y), outputs(expected_y), strict=True):
        np.testing.assert_array_equal(a, b)
    dys = outputs(dy) if dy is not None else [None] * len(outputs(y))
    for yi, di in zip(outputs(y), dys, strict=True):
        if di is not None:
            assert np.shape(di) == np.shape(yi)
        elif any(t is not None for t in tangents):
            assert np.result_type(yi).kind != "f" or type(y) in (list, tuple)
    if fd and any(t is not None for t in tangents):
        expected = finite_difference(call, args, tangents, kwargs)
        for di, ei in zip(dys, outputs(expected), strict=True):
            di = np.zeros_like(ei) if di is None else di
            finite = np.isfinite(ei)
            np.testing.assert_allclose(np.asarray(di)[finite], ei[finite], rtol=1e-6, atol=1e-8)
    if reverse_rule is not None and any(t is not None for t in tangents):
        _, back = reverse_rule(*args, **kwargs)
        ws = [np.where(np.isfinite(yi), RNG.standard_normal(np.shape(yi)), 0.0)
              for yi in outputs(y)]
        cotangents = back(tuple(ws) if type(y) in (list, tuple) else ws[0])
        forward = inner((w, d) for w, d in zip(ws, dys, strict=True) if d is not None)
        reverse = inner(pairs_of(list(tangents), list(cotangents)))
        single = any(np.result_type(yi) == np.float32 for yi in outputs(y))
        np.testing.assert_allclose(forward, reverse, rtol=1e-5 if single else 1e-9, atol=1e-9)
    return y, dy, tangents


def case(key, *args, fd=True, **kwargs):
    name = key if type(key) is str else (f"{key[0].__name__}.{key[1]}" if type(key) is tuple
                                         else key.__name__)
    if any(type(a) is np.ndarray for a in args[:2]):
        name += "".join(f"[{'x'.join(map(str, a.shape))}]" for a in args if type(a) is np.ndarray)
    settings = ",".join(f"{k}={v!r}"[:20] for k, v in kwargs.items())
    return pytest.param(key, args, fd, kwargs, id=f"{name}({settings})")


# ----------------------------------------------------------------------------------------------
# Reductions

X = normal(3, 4)
X3 = normal(2, 3, 4)
P = positive(3, 4)
MASK = RNG.uniform(size=(3, 4)) < 0.7
ZEROS = P.copy()
ZEROS[0, 1] = 0.0                   # one zero in row 0
ZEROS[1, 0] = ZEROS[1, 3] = 0.0     # two zeros in row 1
TIED = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, -1.0, 2.0, 0.0], [0.0, 0.1, -0.2, 0.3]])
CONSTANT_ROW = np.vstack([X[:2], np.full((1, 4), 0.7)])

REDUCTIONS = [
    case(np.sum, X),
    case(np.sum, X, axis=1),
    case(np.sum, X3, axis=(0, 2), keepdims=True),
    case(np.sum, X, axis=0, where=MASK),
    case(np.sum, X, initial=5.0),
    case((np.add, "reduce"), X),
    case((np.add, "reduce"), X, axis=1, keepdims=True),
    case(np.nansum, with_nans(X)),
    case(np.nansum, with_nans(X3), axis=1, keepdims=True),
    case(np.nansum, with_nans(X), axis=0, initial=2.0),
    case(np.mean, X),
    case(np.mean, X3, axis=(1, 2)),
    case(np.mean, X, axis=0, keepdims=True, where=MASK),
    case(np.nanmean, with_nans(X)),
    case(np.nanmean, with_nans(X3, 2), axis=2, keepdims=True),
    case(np.prod, P),
    case(np.prod, P, axis=1),
    case(np.prod, ZEROS, axis=1, keepdims=True),
    case(np.prod, ZEROS, axis=0),
    case(np.prod, P, axis=1, where=MASK, initial=2.0),
    case((np.multiply, "reduce"), ZEROS),
    case((np.multiply, "reduce"), P, axis=1),
    case(np.nanprod, with_nans(P)),
    case(np.nanprod, with_nans(ZEROS), axis=1),
    case(np.var, X),
    case(np.var, X3, axis=1, ddof=1),
    case(np.var, X, axis=0, keepdims=True, where=MASK),
    case(np.std, X),
    case(np.std, X3, axis=(0, 2), keepdims=True, ddof=1),
    case(np.std, CONSTANT_ROW, axis=1),
    case(np.cumsum, X),
    case(np.cumsum, X3, axis=1),
    case((np.add, "accumulate"), X),
    case((np.add, "accumulate"), X3, axis=2),
    case(np.cumprod, P),
    case(np.cumprod, ZEROS, axis=1),
    case(np.cumprod, ZEROS.T, axis=0),
    case(np.cumprod, ZEROS),
    case((np.multiply, "accumulate"), ZEROS.T),
    case((np.multiply, "accumulate"), P, axis=1),
    case(np.ptp, X),
    case(np.ptp, X3, axis=1, keepdims=True),
    case(np.ptp, TIED, axis=1, fd=False),
]
for _extreme in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin):
    REDUCTIONS += [
        case(_extreme, X),
        case(_extreme, X3, axis=1),
        case(_extreme, X3, axis=(0, 2), keepdims=True),
        case(_extreme, TIED, axis=1),            # two-way ties: the mean of two tangents
        case(_extreme, np.vstack([TIED, TIED[:1]]), axis=0, fd=False),  # ties of three
    ]
REDUCTIONS += [
    case(np.nanmax, with_nans(X), axis=1),
    case(np.nanmin, with_nans(X3), axis=0),
    case(np.max, X, axis=1, where=MASK, initial=-5.0),
    case((np.maximum, "reduce"), X),
    case((np.maximum, "reduce"), TIED, axis=1),
    case((np.minimum, "reduce"), X3, axis=2),
]


@pytest.mark.parametrize("key, args, fd, kwargs", REDUCTIONS)
def test_reduction(key, args, fd, kwargs):
    check(key, *args, fd=fd, **kwargs)


def test_extreme_ties_take_the_mean_tangent():
    a = np.array([2.0, 5.0, 5.0, 5.0, 1.0])
    t = np.array([1.0, 2.0, 4.0, 9.0, 7.0])
    assert JVPS[np.max]((t,), a)[1] == 5.0
    assert JVPS[np.ptp]((t,), a)[1] == 5.0 - 7.0


def test_all_nan_slice_passes_no_tangent():
    a = np.array([[np.nan, np.nan], [1.0, np.nan]])
    t = np.ones_like(a)
    for key in (np.nanmean, np.nansum, np.nanmax):
        _, dy = JVPS[key]((t,), a, axis=1)
        np.testing.assert_array_equal(dy, [0.0, 1.0])


# ----------------------------------------------------------------------------------------------
# Shape functions

V = normal(5)
V4 = normal(4)
XF = np.asfortranarray(X)
COLUMN = normal(3, 1, 4)
X4 = normal(4, 4)
BELOW, ABOVE = -0.5 + 0.1 * normal(3, 4), 0.5 + 0.1 * normal(3, 4)
CROSSED = np.where(MASK, ABOVE, -ABOVE)
# Values kept 0.01 away from the bounds, so the finite differences see no kink.
CLIPPED = np.where(np.abs(np.abs(X) - 0.5) < 0.01, 0.3, X)

SHAPE = [
    case(np.reshape, X, (4, 3)),
    case(np.reshape, X, (2, 6), order="F"),
    case(np.reshape, XF, (12,), order="A"),
    case(np.squeeze, COLUMN),
    case(np.squeeze, COLUMN, axis=1),
    case(np.expand_dims, X, 1),
    case(np.transpose, X3),
    case(np.transpose, X3, (1, 0, 2)),
    case(np.matrix_transpose, X3),
    case(np.swapaxes, X3, 0, 2),
    case(np.moveaxis, X3, 0, -1),
    case(np.rollaxis, X3, 2),
    case(np.flip, X),
    case(np.flip, X3, 1),
    case(np.fliplr, X),
    case(np.flipud, X),
    case(np.rot90, X),
    case(np.rot90, X3, 3, (1, 2)),
    case(np.roll, X, 2),
    case(np.roll, X, -1, 1),
    case(np.broadcast_to, V4, (3, 4)),
    case(np.tile, V, (2, 2)),
    case(np.repeat, X, 2),
    case(np.repeat, X, [1, 2, 0], axis=0),
    case(np.delete, X, 1, 1),
    case(np.delete, X, [0, 2]),
    case(np.triu, X),
    case(np.tril, X3, -1),
    case(np.diagonal, X3, 1, 1, 2),
    case(np.diag, V),
    case(np.diag, X, 1),
    case(np.real, X),
    case(np.ravel, X),
    case(np.ravel, X, "F"),
    case(np.ravel, XF, order="K"),
    case(np.ravel, XF, order="A"),
    case(np.ravel, X3.transpose(2, 0, 1), order="K"),
    case(np.pad, X, 2),
    case(np.pad, X, ((1, 0), (2, 1)), constant_values=2.5),
    case(np.pad, X, 1, "edge"),
    case(np.pad, X, (2, 1), "reflect"),
    case(np.pad, X, 2, "symmetric"),
    case(np.pad, V, 3, "wrap"),
    case(np.concatenate, [X, normal(2, 4)]),
    case(np.concatenate, [X, Const(normal(3, 2))], 1),
    case(np.concatenate, (X, V4), axis=None),
    case(np.stack, [V4, V4 + 1]),
    case(np.stack, [X, Const(X)], axis=2),
    case(np.hstack, [X, Const(normal(3, 1))]),
    case(np.hstack, [V, V4]),
    case(np.vstack, [X, V4]),
    case(np.dstack, [X, X]),
    case(np.column_stack, [V4, X.T]),
    case(np.append, X, V4),
    case(np.append, X, X, axis=0),
    case(np.append, X, 5.0),
    case(np.append, Const(X), V4),
    case(np.split, X, 2, 1),
    case(np.split, V, [1, 4]),
    case(np.array_split, V, 3),
    case(np.hsplit, X, 2),
    case(np.vsplit, X4, [1]),
    case(np.dsplit, X3, 2),
    case(np.atleast_1d, np.array(1.5)),
    case(np.atleast_1d, np.array(1.5), V, Const(X)),
    case(np.atleast_2d, V),
    case(np.atleast_3d, X),
    case(np.atleast_3d, X3, V),
    case(np.broadcast_arrays, V4, X),
    case(np.broadcast_arrays, X, X.copy()),
    case(np.broadcast_arrays, Const(V4), X3),
    case(np.where, MASK, X, normal(3, 4)),
    case(np.where, MASK, X, 2.0),
    case(np.where, MASK, Const(normal(3, 4)), V4),
    case(np.clip, CLIPPED, -0.5, 0.5),
    case(np.clip, CLIPPED, -0.5, None),
    case(np.clip, CLIPPED, None, 0.5),
    case(np.clip, X, BELOW, ABOVE),
    case(np.clip, X, Const(BELOW), ABOVE),
    case(np.clip, X, CROSSED, BELOW),
    case(np.clip, CLIPPED, min=-0.5, max=0.5),
    case(np.clip, np.array([-1.0, -0.5, 0.0, 0.5, 1.0]), -0.5, 0.5, fd=False),  # at the bounds
]
if hasattr(np, "unstack"):
    SHAPE.append(case(np.unstack, X3, axis=1))


@pytest.mark.parametrize("key, args, fd, kwargs", SHAPE)
def test_shape(key, args, fd, kwargs):
    check(key, *args, fd=fd, **kwargs)


def test_views_have_views_of_the_tangent_as_tangents():
    """Where NumPy returns a view of the argument, the tangent is the same view of its tangent."""
    t = np.empty_like(XF)
    for key, settings in [(np.reshape, ((12,), "A")), (np.ravel, ("K",)), (np.transpose, ()),
                          (np.real, ()), (np.squeeze, ())]:
        y, dy = JVPS[key]((t,), XF, *settings)
        assert np.shares_memory(y, XF) and np.shares_memory(dy, t)
        assert dy.strides == y.strides
    y, dy = JVPS[np.split]((t,), XF, 2, 1)
    assert all(np.shares_memory(d, t) for d in dy)
    ys, dys = JVPS[np.broadcast_arrays]((t, t), XF, XF)
    assert ys[0] is XF and dys[0] is t


def test_clip_at_a_bound_passes_the_argument_tangent():
    a = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    t, lower, upper = np.ones(5), np.full(5, 10.0), np.full(5, 100.0)
    _, dy = JVPS[np.clip]((t, lower, upper), a, -0.5, 0.5)
    np.testing.assert_array_equal(dy, [10.0, 1.0, 1.0, 1.0, 100.0])


def test_constant_padding_and_constant_operands_have_zero_tangents():
    t = np.ones(2)
    _, dy = JVPS[np.pad]((t, None), np.zeros(2), 1, constant_values=7.0)
    np.testing.assert_array_equal(dy, [0.0, 1.0, 1.0, 0.0])
    _, dy = JVPS[np.concatenate](([t, None],), [np.zeros(2), np.full(2, 3.0)])
    np.testing.assert_array_equal(dy, [1.0, 1.0, 0.0, 0.0])


def test_pad_modes_that_compute_values_are_refused():
    from mutad.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError, match="mean"):
        JVPS[np.pad]((np.ones(3), None), np.ones(3), 1, "mean")


# ----------------------------------------------------------------------------------------------
# Gathers: take, sort, choose, select, diff, interp

Y = normal(3, 4)
PICK = RNG.integers(0, 2, (3, 4))
XP = np.sort(normal(6))
SAMPLES = np.concatenate([XP[0] - [1.0, 0.3], XP[:-1] + 0.4 * np.diff(XP), XP[-1] + [0.2, 2.0]])

GATHERS = [
    case(np.take, X, [0, 2, 2], axis=1),
    case(np.take, X, [3, 11, 0, 3]),
    case(np.take, X, [5, -1, 20], mode="clip"),
    case(np.take, X, 7),
    case(np.take_along_axis, X, np.argsort(X, 1), 1),
    case(np.take_along_axis, X, np.array([[0, 0, 2, 1]]), 0),
    case(np.compress, [True, False, True], X, axis=0),
    case(np.compress, [False, True], V),
    case(np.extract, MASK, X),
    case(np.sort, X),
    case(np.sort, X3, 0),
    case(np.sort, X, None),
    case(np.sort, TIED, fd=False),
    case(np.partition, V, 2),
    case(np.partition, X, 1, axis=0),
    case(np.partition, X, [0, 5], axis=None),
    case(np.choose, PICK, [X, Y]),
    case(np.choose, PICK, np.stack([X, Y])),
    case(np.choose, PICK, [Const(X), Y]),
    case(np.choose, PICK + 1, [X, Y, V4], mode="wrap"),
    case(np.select, [MASK, X > 0], [X, Y], default=1.5),
    case(np.select, [MASK, X > 0], [Const(X), Y], V4),
    case(np.select, [MASK], [X]),
    case(np.diff, X),
    case(np.diff, X, 2, 0),
    case(np.diff, X, 1, -1, prepend=2.5, append=V[:3, None]),
    case(np.diff, X, 1, 1, normal(3, 2), np.array(0.5)),
    case(np.diff, X, 2, 1, Const(normal(3, 1))),
    case(np.diff, X, 0),
    case(np.interp, SAMPLES, XP, normal(6)),
    case(np.interp, SAMPLES, Const(XP), normal(6), np.array(-3.0), np.array(4.0)),
    case(np.interp, SAMPLES, XP, Const(normal(6)), -3.0),
    case(np.interp, np.array(0.1), np.array([0.1]), np.array([2.0])),
    case(np.interp, SAMPLES[2], XP, normal(6)),
]


@pytest.mark.parametrize("key, args, fd, kwargs", GATHERS)
def test_gather(key, args, fd, kwargs):
    check(key, *args, fd=fd, **kwargs)


# ----------------------------------------------------------------------------------------------
# Creation functions and np.sinc, np.nan_to_num

LIST = [np.array(1.5), 2.0, np.array(-0.5)]
FILL = np.array(0.25)
STARTS, STOPS = normal(3), normal(3)
SPECIAL = np.array([[np.nan, np.inf, -np.inf, 1.0], [0.0, -2.0, 0.5, 3.0]])

CREATION = [
    case(np.copy, X),
    case(np.copy, XF, order="C"),
    case(np.array, X),
    case(np.array, X, ndmin=3),
    case(np.array, LIST),
    case(np.array, [X, Const(X)]),
    case(np.asarray, X),
    case(np.asarray, X, dtype=np.float32, fd=False),  # differences in single precision
    case(np.asanyarray, LIST),
    case(np.ascontiguousarray, XF),
    case(np.asfortranarray, X),
    case(np.ndarray.astype, X, np.float32, fd=False),
    case(np.ndarray.astype, X, np.float64, copy=False),
    case(np.full, (2, 3), FILL),
    case(np.full, (2, 3), V[:3]),
    case(np.full_like, X, FILL),
    case(np.full_like, X3, V4),
    case(np.linspace, FILL, np.array(3.0), 7),
    case(np.linspace, STARTS, STOPS, 4, axis=1),
    case(np.linspace, Const(STARTS), STOPS, 5, endpoint=False),
    case(np.linspace, FILL, 2.0, 5, retstep=True),
    case(np.sinc, np.append(X, 0.0)),
    case(np.nan_to_num, SPECIAL, fd=False),  # the largest float, differenced, is not 0
    case(np.nan_to_num, SPECIAL, nan=1.0, posinf=5.0, neginf=-5.0),
]


@pytest.mark.parametrize("key, args, fd, kwargs", CREATION)
def test_creation(key, args, fd, kwargs):
    check(key, *args, fd=fd, **kwargs)


@pytest.mark.parametrize("key, args, kwargs", [
    (np.zeros_like, (X,), {}), (np.ones_like, (X3,), {"dtype": np.float32}),
    (np.empty_like, (X,), {"shape": (2, 2)}), (np.zeros, ((2, 3),), {}), (np.ones, (4,), {}),
    (np.empty, ((3,),), {}), (np.eye, (3, 4), {"k": 1}), (np.identity, (3,), {}),
    (np.arange, (0.0, 1.0, 0.25), {}), (np.full, ((2,), 1.5), {}), (np.array, ([1.0, 2.0],), {}),
])
def test_created_float_buffers_get_zero_tangents(key, args, kwargs):
    """Created from a dual (``like=`` one too), a float buffer gets a writable zero tangent."""
    y, dy = JVPS[key]((None,) * len(args), *args, **kwargs)
    assert dy.shape == y.shape and dy.dtype == y.dtype and not dy.any() and dy.flags.writeable
    assert not np.shares_memory(y, dy)


@pytest.mark.parametrize("key, args", [
    (np.zeros_like, (np.arange(3),)), (np.arange, (5,)), (np.ndarray.astype, (X, int)),
    (np.array, (X, int)),
])
def test_integer_results_have_no_tangent(key, args):
    tangents = tuple(np.ones_like(x) if isinstance(x, np.ndarray) and x.dtype.kind == "f" else None
                     for x in args)
    assert JVPS[key](tangents, *args)[1] is None


def test_arange_with_a_tangent_is_refused():
    from mutad.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError, match="np.linspace"):
        JVPS[np.arange]((np.array(1.0),), np.array(3.0))


def test_asarray_of_an_array_is_the_array_and_its_tangent_the_tangent():
    t = np.ones_like(X)
    y, dy = JVPS[np.asarray]((t,), X)
    assert y is X and dy is t


# ----------------------------------------------------------------------------------------------
# mutad.scipy.special and mutad.scipy.signal (rules take SciPy's signature, bound positionally)

SIGNS = np.where(MASK, 1.0, -1.0)
SIGNAL = normal(8)
B, A = np.array([0.5, -0.2, 0.1]), np.array([1.5, -0.4])

SCIPY = [
    case(special.polygamma, 1, positive(5)),
    case(special.polygamma, np.array([0, 1, 2]), positive(3)),
    case(special.multigammaln, positive(4) + 2.0, 3),
    case(special.softmax, X),
    case(special.softmax, X3, (0, 2)),
    case(special.log_softmax, X, 1),
    case(special.logsumexp, X),
    case(special.logsumexp, X3, 1, None, True),
    case(special.logsumexp, X, None, P),
    case(special.logsumexp, X, 0, X * SIGNS, False, True),
    case(special.logsumexp, V4, (0, 1), Const(P)),
    case(signal.lfilter, B, A, SIGNAL),
    case(signal.lfilter, B, A, X, 0),
    case(signal.lfilter, B, A, SIGNAL, -1, normal(2)),
    case(signal.lfilter, B[:2], np.array([2.0, 0.3, -0.1]), X, 1, normal(3, 2)),
    case(signal.lfilter, Const(B), A, X3, 1, normal(2, 2, 4)),
    case(signal.lfilter, B, Const(A), SIGNAL, -1, Const(normal(2))),
    case(signal.lfilter, B, np.array([2.0]), SIGNAL),
]


@pytest.mark.parametrize("key, args, fd, kwargs", SCIPY)
def test_scipy(key, args, fd, kwargs):
    check(key, *args, fd=fd, **kwargs)


# ----------------------------------------------------------------------------------------------
# Every function these families differentiate in reverse mode has a forward rule


FAMILIES = ("reductions", "shape", "creation", "ufuncs")
GATHER_FUNCTIONS = (np.take, np.take_along_axis, np.compress, np.extract, np.sort, np.partition,
                    np.choose, np.select, np.diff, np.interp)


def test_every_rule_of_these_families_has_a_forward_rule():
    keys = [key for key, rule in FUNCTIONS.items()
            if rule.__module__.rsplit(".", 1)[-1] in FAMILIES] + list(GATHER_FUNCTIONS)
    assert not [key for key in keys if key not in JVPS]
    adjoints = [f for module in (special, signal) for f in map(module.__dict__.get, module.__all__)
                if isinstance(f, Adjoint)]
    assert all(f.forward_rule is not None for f in adjoints)


# ----------------------------------------------------------------------------------------------
# End to end: mutad.jvp, and mutad.hvp (reverse mode over these forward rules)

XP_CONSTANT = np.linspace(-2.0, 2.0, 7)
FP_CONSTANT = np.cos(XP_CONSTANT)


def reductions_program(x):
    rows = np.sum(x * x, axis=1) + np.mean(np.sin(x)) * np.max(x, axis=0)[:3]
    return rows * np.var(x, axis=0, ddof=1)[1:] + np.std(x) * np.prod(x[0] + 2.0) - np.ptp(x, 1)


def scans_in_place(x):
    z = np.zeros_like(x)
    z[...] = np.cumsum(x, axis=0)
    z[1:] *= np.cumprod(x[:-1] + 1.5, axis=1)
    return np.min(z, axis=1) + np.amax(np.exp(z), axis=0)[:3]


def rearranging(x):
    y = np.transpose(x).reshape(-1)
    y = np.concatenate([y, np.flip(y)])
    parts = np.split(y, 4)
    return np.stack(parts[::-1]) ** 2 + np.triu(np.diag(y[:6]), 1)[:4]


def selecting(x):
    padded = np.pad(x, 1, "reflect")
    y = np.where(x > 0, padded[1:-1, 2:], np.roll(x, 1, 0)) * np.clip(x, -0.5, 0.5)
    return np.append(y, np.broadcast_to(x[0], (2, 4))) * np.tile(x[1, :2], 10)


def gathering(x):
    order = np.argsort(x, axis=1)
    sorted_rows = np.sort(x, axis=1) * np.take_along_axis(x, order, 1)
    steps = np.diff(x, axis=0, prepend=np.ones((1, 4)))
    return sorted_rows + steps + np.interp(np.sin(x), XP_CONSTANT, FP_CONSTANT)


def creating(x):
    buffer = np.empty_like(x)
    buffer[...] = x.astype(np.float64)
    buffer[0] = np.linspace(x[0, 0], x[0, 1], 4)
    filled = np.full_like(x, x[1, 1])
    return np.copy(buffer) * filled + np.ones_like(x) * np.asarray(x, like=x) ** 3


def skipping_nans(x):
    holes = np.where(np.abs(x) < 0.3, np.nan, x)
    return (np.nansum(holes * holes, axis=0) + np.nanmean(holes) * np.nanmax(holes, axis=0)
            + np.sum(np.nan_to_num(np.log(np.abs(holes))), axis=0) + np.sinc(x[0]))


def special_functions(x):
    z = special.gammaln(x * x + 1.0) + special.digamma(np.exp(x)) * special.erf(x)
    z = z + special.xlogy(special.expit(x), np.exp(x)) + special.logit(special.expit(x) * 0.5)
    return z[0] + special.logsumexp(x, 0, np.exp(x[::-1]))


def filtering(x):
    y, final = signal.lfilter(x[0, :3], x[1, :2] + 2.0, x[2] * x[1], -1, x[0, 2:])
    return np.concatenate([y, final * 3.0]) ** 2


PROGRAMS = [reductions_program, scans_in_place, rearranging, selecting, gathering, creating,
            skipping_nans, special_functions, filtering]
POINT = RNG.uniform(-1.5, 1.5, (3, 4))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_jvp_end_to_end(program):
    check_jvp(program, POINT)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_hvp_end_to_end(program):
    """Reverse mode over the forward rules: <u, H v> against differences of the gradient."""
    u, v = normal(3, 4), normal(3, 4)
    w = normal(*np.shape(program(POINT)))

    def scalar(x):
        return np.sum(program(x) * w)

    analytic = np.sum(u * mutad.hvp(scalar, (POINT,), (v,)))
    at = {k: np.sum(u * mutad.gradient(scalar, POINT + k * STEP * v)[0]) for k in (-2, -1, 1, 2)}
    numeric = (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * STEP)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


def test_buffers_created_like_a_dual_carry_tangents():
    def program(x):
        buffer = np.zeros(x.shape, like=x)
        buffer[1:] = x[:-1] * 2.0
        return buffer * np.array([1.0, 2.0, 3.0, 4.0, 5.0], like=x) + np.eye(5, like=x)[0]

    check_jvp(program, V)


def test_second_derivative_of_sinc_at_zero():
    """-π²/3: the rule's derivative near 0 is a series whose own derivative is right."""
    x = np.array([0.0, 1e-5, 0.3])
    h = mutad.hvp(lambda x: np.sum(np.sinc(x)), (x,), (np.ones(3),))
    exact = [-np.pi ** 2 / 3, -np.pi ** 2 / 3, None]
    np.testing.assert_allclose(h[:2], exact[:2], rtol=1e-8)
