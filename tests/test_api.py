"""The public API's conventions (docs/guide.md, "The API"): argnums, structure, dtypes, restoration."""

import collections
import json
import math
import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.interpolate
import scipy.optimize

import mutad
import mutad.api
from mutad.testing import directional_fd
from test_replay_budget import replays

ROOT = Path(__file__).resolve().parent.parent


def weighted_sum(a, b):
    return (a * b).sum()


def test_argnums_none_int_tuple_negative():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    da, db = mutad.gradient(weighted_sum, a, b)
    assert np.array_equal(da, b) and np.array_equal(db, a)
    assert np.array_equal(mutad.gradient(weighted_sum, a, b, argnums=1), a)
    assert np.array_equal(mutad.gradient(weighted_sum, a, b, argnums=-2), b)
    only_b = mutad.gradient(weighted_sum, a, b, argnums=(1,))
    assert isinstance(only_b, tuple) and np.array_equal(only_b[0], a)


@pytest.mark.parametrize("argnums", [2, -3, (0, 5), 1.0, "0", [0], True])
def test_bad_argnums_raise(argnums):
    a = np.ones(2)
    with pytest.raises(mutad.MutadError, match="argnums"):
        mutad.gradient(weighted_sum, a, a.copy(), argnums=argnums)


def test_gradients_mirror_containers_and_kinds():
    def f(params, scale, count, flag, name, index, nothing):
        w, (b, c) = params["w"], params["bc"]
        return scale * (w.sum() + b * c[0][index].sum()) + count

    params = {"w": np.ones(3), "bc": (2.0, [np.arange(4.0)])}
    grads = mutad.gradient(f, params, 1.5, 7, True, "x", np.array([0, 2]), None)
    g_params, g_scale, g_count, g_flag, g_name, g_index, g_nothing = grads
    assert set(g_params) == {"w", "bc"}
    assert np.array_equal(g_params["w"], np.full(3, 1.5))
    g_b, (g_c,) = g_params["bc"]
    assert isinstance(g_params["bc"], tuple) and isinstance(g_params["bc"][1], list)
    assert type(g_b) is float and g_b == 1.5 * 2.0
    assert np.array_equal(g_c, [3.0, 0.0, 3.0, 0.0])
    assert type(g_scale) is float and g_scale == 3.0 + 2.0 * 2.0
    assert g_count is g_flag is g_name is g_index is g_nothing is None


def test_unused_float_arguments_get_zeros_of_their_shape_and_dtype():
    unused = np.ones((2, 3), np.float32)
    grads = mutad.gradient(lambda x, u: (x * x).sum(), np.ones(2), unused)
    assert grads[1].dtype == np.float32 and grads[1].shape == (2, 3) and not grads[1].any()


def test_constant_output_gives_zero_gradients():
    assert np.array_equal(mutad.gradient(lambda x: 3.0, np.ones(2))[0], np.zeros(2))


def test_float32_stays_float32():
    x = np.linspace(0.1, 1.0, 5, dtype=np.float32)
    (g,) = mutad.gradient(lambda x: np.sin(x).sum(), x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)


def test_value_and_gradient():
    value, (g,) = mutad.value_and_gradient(lambda x: (x ** 3).sum(), np.array([1.0, 2.0]))
    assert value == 9.0 and np.array_equal(g, [3.0, 12.0])


def test_same_array_twice_is_one_buffer():
    # Enzyme's memory semantics: each place receives the gradient with respect to the buffer.
    x = np.array([1.0, 2.0])
    da, db = mutad.gradient(weighted_sum, x, x)
    assert np.array_equal(da, 2 * x) and np.array_equal(db, 2 * x)


def test_overlapping_views_share_one_shadow():
    base = np.arange(1.0, 6.0)

    def f(a, b):
        a += b  # a = base[:3], b = base[2:]: a[2] is b[0]
        return (a * a).sum()

    mutad.check_grads(f, base[:3], base[2:])
    assert np.array_equal(base, np.arange(1.0, 6.0))


def test_caller_arrays_come_back_bit_for_bit_including_int_arrays():
    x = np.linspace(0.3, 1.7, 7)
    counts = np.arange(3)
    nested = {"y": [x[::2]]}

    def f(x, counts, nested):
        x *= 3.0
        x[1:] = np.exp(x[:-1])
        counts += 1
        nested["y"][0][0] = 5.0
        return x.sum()

    before = (x.tobytes(), counts.tobytes())
    mutad.gradient(f, x, counts, nested)
    assert (x.tobytes(), counts.tobytes()) == before


def test_caller_arrays_come_back_after_an_exception_midway():
    x = np.linspace(0.0, 1.0, 4)
    before = x.tobytes()

    def f(x):
        x += 1.0
        x *= x
        raise ValueError("midway")

    with pytest.raises(ValueError, match="midway"):
        mutad.gradient(f, x)
    assert x.tobytes() == before


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_zygote_120_helper_returning_nothing(policy):
    def add_vecs(a, b):
        a += b

    def add_sum(a, b):
        add_vecs(a, b)
        return a.sum()

    a, b = np.zeros(3), np.ones(3)
    da, db = mutad.gradient(add_sum, a, b, policy=policy)
    assert np.array_equal(da, np.ones(3)) and np.array_equal(db, np.ones(3))
    assert np.array_equal(a, np.zeros(3))


def test_zygote_120_rebinding():
    def add_vecs(a, b):
        a += b
        return a

    def add_sum(a, b):
        a = add_vecs(a, b)
        return a.sum()

    assert all(np.array_equal(g, np.ones(3)) for g in mutad.gradient(add_sum, np.zeros(3), np.ones(3)))


def leapfrog(q, p, steps=50, dt=0.05):
    for _ in range(steps):
        p -= 0.5 * dt * np.sin(q)
        q += dt * p
        p -= 0.5 * dt * np.sin(q)
    return (q * q).sum() + (p * p).sum()


def test_policies_agree_to_1e10_on_a_well_conditioned_program(rng):
    q, p = rng.standard_normal(20), rng.standard_normal(20)
    restored = mutad.gradient(leapfrog, q, p)
    checkpointed = mutad.gradient(leapfrog, q, p, policy="checkpoint")
    for r, c in zip(restored, checkpointed, strict=True):
        assert np.max(np.abs(r - c)) <= 1e-10 * np.max(np.abs(c))
    mutad.check_grads(leapfrog, q, p)


def test_pullback_leaves_f_state_until_back_and_is_one_shot():
    x = np.array([1.0, 2.0, 3.0])

    def f(x):
        x *= 2.0
        return x

    y, back = mutad.pullback(f, x)
    assert np.array_equal(x, [2.0, 4.0, 6.0])  # as f left it
    assert not np.shares_memory(y, x)
    (g,) = back(np.array([1.0, 1.0, 1.0]))
    assert np.array_equal(g, [2.0, 2.0, 2.0])
    assert np.array_equal(x, [1.0, 2.0, 3.0])  # as before f
    assert np.array_equal(y, [2.0, 4.0, 6.0])  # y is not rewound by the replay
    with pytest.raises(mutad.MutadError, match="second time"):
        back(np.ones(3))


@pytest.mark.parametrize("n", [3, 20_000])  # undone by inversion, and recomputed
def test_writing_an_argument_between_pullback_and_back_is_refused(n):
    """back() reverses f's writes from the values f left: a write by the caller in between
    gave a wrong cotangent (large arrays), then was overwritten by the first values."""
    def f(x):
        t = np.exp(x)
        x *= 1.5
        return t * x

    x = np.linspace(0.0, 1.0, n)
    y, back = mutad.vjp(f, x)
    x[:] = 7.0
    with pytest.raises(mutad.errors.ConstantModifiedError, match="before back"):
        back(np.ones(n))
    assert np.all(x == 7.0)  # the caller's values stay


def test_pullback_of_several_outputs():
    y, back = mutad.pullback(lambda a: (a * 2.0, a.sum()), np.array([1.0, 2.0]))
    (g,) = back((np.array([1.0, 0.0]), 3.0))
    assert np.array_equal(g, [5.0, 3.0])


@pytest.mark.slow
def test_a_long_tape_of_small_operations(rng):
    x = rng.standard_normal(3)

    def f(x):
        for _ in range(20000):
            x *= 0.9999
            x += 1e-4
        return x.sum()

    (g,) = mutad.gradient(f, x)
    np.testing.assert_allclose(g, np.full(3, 0.9999 ** 20000), rtol=1e-9)


def test_threads_differentiate_independently(rng):
    from concurrent.futures import ThreadPoolExecutor

    xs = [rng.standard_normal(50) for _ in range(8)]
    expected = [mutad.gradient(leapfrog, x, x[::-1].copy())[0] for x in xs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda x: mutad.gradient(leapfrog, x, x[::-1].copy())[0], xs))
    for r, e in zip(results, expected, strict=True):
        assert np.array_equal(r, e)


# ----------------------------------------------------------------------------------------------
# Argument structures: gradients in the argument's structure, every reachable array restored


P = collections.namedtuple("P", "w b")


def snapshot(tree):
    """The bytes of every array in ``tree``, to check that they come back bit-for-bit."""
    return [leaf.tobytes() for leaf in mutad.core.trees.flatten(tree)[0] if isinstance(leaf, np.ndarray)]


def test_namedtuple_from_the_issue():
    def h(p):
        p.w[:] *= 2
        return (p.w ** 2).sum() + p.b.sum()

    p = P(np.ones(3), np.ones(2))
    before = snapshot(p)
    (g,) = mutad.gradient(h, p)
    assert type(g) is P
    assert np.array_equal(g.w, np.full(3, 8.0)) and np.array_equal(g.b, np.ones(2))
    assert snapshot(p) == before
    mutad.check_grads(h, p)


@dataclasses.dataclass(frozen=True)
class Params:
    w: np.ndarray
    scale: float
    n: int = 2
    total: np.ndarray = dataclasses.field(init=False)

    def __post_init__(self):
        if self.scale <= 0:
            raise ValueError("scale must be positive")
        object.__setattr__(self, "total", np.zeros(1))  # derived: restored too


def loss_of_params(p):
    p.w[1:] *= p.w[:-1]
    p.total[0] = 7.0
    return (p.w * p.scale).sum() * p.n


def test_frozen_dataclass_gradient_is_a_dataclass_built_without_init():
    p = Params(np.array([1.0, 2.0, 3.0]), 2.0)
    before = snapshot(p)
    (g,) = mutad.gradient(loss_of_params, p)
    assert snapshot(p) == before
    assert type(g) is Params and g.n is None
    assert np.array_equal(g.w, [12.0, 16.0, 8.0]) and g.scale == 18.0
    assert np.array_equal(g.total, [0.0])
    (g,) = mutad.gradient(lambda p: -p.scale * p.w.sum(), p)
    assert g.scale == -6.0  # a negative 'scale': __post_init__ did not run on the gradient
    mutad.check_grads(loss_of_params, p)


class Model:
    """A plain object: arrays in __dict__, a derived property."""

    def __init__(self, W, bias):
        self.W, self.bias, self.name = W, bias, "model"

    @property
    def shape(self):
        return self.W.shape

    def __call__(self, x):
        return np.tanh(self.W @ x + self.bias)


class Slotted:
    __slots__ = ("a", "__hidden")

    def __init__(self, a, hidden):
        self.a = a
        self.__hidden = hidden

    def total(self):
        self.__hidden *= 3.0
        return (self.a * self.__hidden).sum()


def test_plain_objects_with_dict_and_slots():
    rng = np.random.default_rng(1)
    model = Model(rng.standard_normal((2, 3)), rng.standard_normal(2))
    x = rng.standard_normal(3)

    def f(model, x):
        model.W *= 0.5  # in place through the attribute
        assert model.shape == (2, 3)
        return (model(x) ** 2).sum()

    before = snapshot([model, x])
    gm, gx = mutad.gradient(f, model, x)
    assert snapshot([model, x]) == before
    assert type(gm) is Model and gm.name is None and gm.W.shape == (2, 3)
    mutad.check_grads(f, model, x)

    s = Slotted(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    before = snapshot([s.a, s._Slotted__hidden])
    (g,) = mutad.gradient(Slotted.total, s)
    assert snapshot([s.a, s._Slotted__hidden]) == before
    assert type(g) is Slotted
    assert np.array_equal(g.a, [9.0, 12.0]) and np.array_equal(g._Slotted__hidden, [3.0, 6.0])


def test_nested_containers_ordered_and_default_dicts_and_none():
    x = np.linspace(0.5, 1.5, 3)
    tree = {"layers": [P(x, 2.0), P(x[::2], None)],
            "ordered": collections.OrderedDict([("b", np.ones(2)), ("a", 3.0)]),
            "default": collections.defaultdict(list, {"k": np.full(2, 2.0)})}

    def f(tree):
        first, second = tree["layers"]
        first.w[...] *= first.b  # second.w views the same memory
        return ((second.w * tree["ordered"]["a"]).sum() + tree["ordered"]["b"].sum()
                + (tree["default"]["k"] ** 2).sum())

    before = snapshot(tree)
    (g,) = mutad.gradient(f, tree)
    assert snapshot(tree) == before
    assert type(g["ordered"]) is collections.OrderedDict and list(g["ordered"]) == ["b", "a"]
    assert type(g["default"]) is collections.defaultdict and g["default"].default_factory is list
    assert g["layers"][1].b is None and type(g["layers"][0]) is P
    assert np.array_equal(g["default"]["k"], [4.0, 4.0])
    mutad.check_grads(f, tree)


def test_objects_of_numpy_and_scipy_classes_are_leaves_whose_arrays_come_back():
    spline = scipy.interpolate.CubicSpline([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])

    def f(x, spline):
        spline.c[...] *= 2.0  # not differentiated, but written back
        return (x * spline(1.5)).sum()

    before = snapshot([spline.c, spline.x])
    x = np.ones(2)
    gx, gs = mutad.gradient(f, x, spline)
    assert gs is None and snapshot([spline.c, spline.x]) == before
    mutad.check_grads(f, x, spline)
    mutad.check_jvp(f, x, spline)
    assert snapshot([spline.c, spline.x]) == before
    np.testing.assert_allclose(gx, 2 * np.full(2, float(
        scipy.interpolate.CubicSpline([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])(1.5))))


class Holder:
    def __init__(self, w):
        self.w = w


class Pair(tuple):
    """A tuple subclass whose constructor takes its items one by one: mutad cannot rebuild it
    without being told how."""

    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))


def cyclic():
    h = Holder(np.ones(2))
    h.me = h
    return h


@pytest.mark.parametrize("make, words", [
    (lambda: {Holder(np.ones(2))}, ["set", "tuple"]),
    (lambda: (np.ones(2) * k for k in range(2)), ["iterator", "generator", "tuple(it)"]),
    (lambda: iter([np.ones(2)]), ["iterator", "list_iterator"]),
    (cyclic, ["refers back", "Holder"]),
    (lambda: Pair(np.ones(2), 1.0), ["rebuild", "Pair", "register_pytree"]),
], ids=["set", "generator", "iterator", "cycle", "tuple-subclass"])
def test_what_cannot_be_followed_is_refused_before_f_runs(make, words):
    ran = []

    def f(x, extra):
        ran.append(True)
        return x.sum()

    for differentiate in (lambda: mutad.gradient(f, np.ones(2), make()),
                          lambda: mutad.jvp(f, (np.ones(2), make()), (None, None))):
        with pytest.raises(mutad.errors.UnsupportedArgumentError) as caught:
            differentiate()
        assert isinstance(caught.value, TypeError)
        for word in words:
            assert word in str(caught.value)
    assert not ran


def test_sets_iterators_and_objects_without_arrays_are_leaves():
    config = Holder(3)  # no float, no array: passed as it is
    (gx, gs, gc, gf) = mutad.gradient(lambda x, s, c, file: x.sum() * c.w, np.ones(2), {1, 2},
                                      config, sys.stdout)
    assert gs is None and gc is None and gf is None and np.array_equal(gx, [3.0, 3.0])


class Opaque:
    """Keeps its arrays where mutad cannot see them: registered to be followed."""

    __slots__ = ()
    store = {}

    def __new__(cls, w):
        self = super().__new__(cls)
        Opaque.store[id(self)] = w
        return self

    @property
    def w(self):
        return Opaque.store[id(self)]


def test_register_pytree():
    with pytest.raises(mutad.errors.InvalidArgumentError):
        mutad.register_pytree("Opaque", len, len)
    mutad.register_pytree(Opaque, lambda o: ((o.w,), None), lambda aux, children: Opaque(*children))
    try:
        o = Opaque(np.array([1.0, 2.0]))
        before = snapshot(o.w)

        def f(o):
            o.w[:] *= 3.0
            return (o.w ** 2).sum()

        (g,) = mutad.gradient(f, o)
        assert type(g) is Opaque and np.array_equal(g.w, [18.0, 36.0])
        assert snapshot(o.w) == before
    finally:
        del mutad.core.trees.REGISTERED[Opaque]


def test_structures_in_every_differentiating_function():
    p = P(np.array([1.0, 2.0]), 3.0)
    before = snapshot(p)
    v = P(np.array([1.0, -1.0]), 0.5)

    def h(p):
        p.w[:] *= p.b
        return (p.w ** 2).sum() * p.b

    def vector(p):
        p.w[:] *= p.b
        return p.w * p.w

    y, back = mutad.pullback(vector, p)
    (g,) = back(np.ones(2))
    assert type(g) is P and np.array_equal(g.w, 2 * 9.0 * p.w)
    y, dy = mutad.jvp(h, (p,), (v,))
    np.testing.assert_allclose(dy, 54.0 * 1 + 108.0 * -1 + 135.0 * 0.5)
    J = mutad.jacobian(vector, p)
    assert type(J) is P and np.array_equal(J.w, np.diag(2 * 9.0 * p.w))
    np.testing.assert_allclose(J.b, 2 * 3.0 * p.w ** 2)
    H = mutad.hessian(h, p)
    assert type(H) is P and type(H.w) is P
    np.testing.assert_allclose(H.w.w, 54.0 * np.eye(2))
    np.testing.assert_allclose(H.w.b, [54.0, 108.0])
    assert H.b.b == 90.0
    Hv = mutad.hvp(h, (p,), (v,))
    np.testing.assert_allclose(Hv.w, H.w.w @ v.w + H.w.b * v.b)
    mutad.check_grads(h, p)
    mutad.check_grads(h, p, order=2)
    mutad.check_jvp(vector, p)
    assert snapshot(p) == before


# ----------------------------------------------------------------------------------------------
# Keyword arguments, has_aux, grad and value_and_grad, stop_gradient


def scaled(x, scale, offset=None):
    x *= scale
    if offset is not None:
        x += offset
    return (x * x).sum()


def test_grad_passes_keyword_arguments_undifferentiated_and_restores_them():
    x, offset = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    before = snapshot([x, offset])
    g = mutad.grad(scaled)(x, scale=3.0, offset=offset)
    np.testing.assert_allclose(g, 2 * 3.0 * (3.0 * x + offset))
    value, g2 = mutad.value_and_grad(scaled)(x, 3.0, offset=offset)
    assert value == ((3.0 * x + offset) ** 2).sum() and np.array_equal(g, g2)
    assert snapshot([x, offset]) == before
    assert mutad.grad(scaled).__name__ == "scaled"

    def write_into_keyword(x, out):
        out[...] = x * 2.0  # a keyword argument is traced: writes into it carry gradients
        out *= x
        return out.sum()

    out = np.zeros(2)
    np.testing.assert_allclose(mutad.grad(write_into_keyword)(x, out=out), 4.0 * x)
    assert not out.any()
    # A keyword argument that views a positional one is the same memory.
    base = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(mutad.grad(lambda a, b: (a * b).sum())(base[:2], b=base[1:]),
                               [2.0, 4.0])


def test_grad_argnums():
    assert mutad.grad(scaled, argnums=1)(np.array([1.0, 2.0]), 3.0) == 2 * 3.0 * 5.0
    gx, gs = mutad.grad(scaled, argnums=(0, 1))(np.array([1.0]), 2.0)
    assert gx.tolist() == [8.0] and gs == 4.0


def loss_with_aux(x):
    x[1:] += x[:-1]
    aux = {"state": x, "mean": x.mean(), "label": "run", "count": 2}
    x *= 2.0  # aux must hold the values at return: x after this line
    return (x * x).sum(), aux


def test_has_aux_conventions_and_detached_aux():
    x = np.array([1.0, 2.0, 3.0])
    before = x.tobytes()
    after_f = np.array([2.0, 6.0, 10.0])
    g, aux = mutad.gradient(loss_with_aux, x, has_aux=True)
    (value, aux2), (g2,) = mutad.value_and_gradient(loss_with_aux, x, has_aux=True)
    g3, aux3 = mutad.grad(loss_with_aux, has_aux=True)(x)
    (value4, aux4), g4 = mutad.value_and_grad(loss_with_aux, has_aux=True)(x)
    assert x.tobytes() == before
    assert value == value4 == (after_f ** 2).sum()
    for a in (aux, aux2, aux3, aux4):
        assert type(a["state"]) is np.ndarray and np.array_equal(a["state"], after_f)
        assert type(a["mean"]) is np.float64 and a["mean"] == 3.0
        assert a["label"] == "run" and a["count"] == 2
    for gradient in (g[0], g2, g3, g4):
        np.testing.assert_allclose(gradient, mutad.gradient(lambda x: loss_with_aux(x)[0], x)[0])


def test_a_python_number_in_aux_comes_back_a_python_number():
    """``s.item()`` in aux is a Python float, as NumPy gives it (it came back a float64 NumPy
    scalar, which promotes a float32 array it multiplies to float64)."""
    def f(x):
        x *= 2.0
        return (x * x).sum(), (x.sum().item(), x[0].item() * 1j, x.sum())

    x = np.array([1.0, 2.0, 3.0])
    expected = f(x.copy())[1]
    for replay in (False, True):
        (value, aux), grad = mutad.value_and_grad(f, has_aux=True, replay=replay)(x)
        assert [type(a) for a in aux] == [float, complex, np.float64] and aux == expected
    # and vjp's outputs: x[0] is NumPy's scalar there (it came back a 0-d array)
    y, back = mutad.vjp(lambda x: (x.sum().item(), x[0], x * 2.0), x)
    assert [type(a) for a in y] == [float, np.float64, np.ndarray]


def test_a_pair_without_has_aux_and_has_aux_without_a_pair():
    x = np.ones(2)
    with pytest.raises(mutad.errors.NonScalarOutputError, match="has_aux=True"):
        mutad.gradient(loss_with_aux, x)
    with pytest.raises(mutad.errors.NonScalarOutputError, match="pair"):
        mutad.gradient(lambda x: x.sum(), x, has_aux=True)
    with pytest.raises(mutad.errors.NonScalarOutputError, match="pair"):
        mutad.gradient(lambda x: (x.sum(), 1, 2), x, has_aux=True)
    assert x.tobytes() == np.ones(2).tobytes()


def test_has_aux_nested_keeps_the_outer_derivative():
    def inner(y, x):
        return (x * y * y).sum(), x * y  # aux depends on the outer argument

    def outer(x):
        g, aux = mutad.gradient(inner, x.copy(), x, argnums=0, has_aux=True)
        return (g + aux).sum()

    x = np.array([1.0, 2.0])
    # g = 2 x y and aux = x y with y a copy of x: the outer loss is 3 x^2 summed.
    np.testing.assert_allclose(mutad.gradient(outer, x)[0], 6 * x)


def test_minimize_takes_value_and_grad_with_jac_true():
    target = np.array([1.0, -2.0, 0.5])

    def f(x):
        x -= target  # in place on minimize's own array
        x **= 2
        return x.sum() + 0.1 * x[0]

    x0 = np.zeros(3)
    before = x0.tobytes()
    fun = mutad.value_and_grad(f)
    value, g = fun(x0)
    assert isinstance(value, float) and type(g) is np.ndarray and g.dtype == np.float64
    result = scipy.optimize.minimize(fun, x0, jac=True, method="BFGS")
    assert result.success
    np.testing.assert_allclose(result.x, target, atol=1e-5)
    assert x0.tobytes() == before


def test_stop_gradient_everywhere():
    x = np.array([1.0, 2.0])
    for value in (x, 3.0, np.float32(2.0), {"a": (x, 1)}):
        stopped = mutad.stop_gradient(value)
        assert snapshot(stopped) == snapshot(value)
    assert not np.shares_memory(mutad.stop_gradient(x), x)

    def f(x):
        s = mutad.stop_gradient(x)
        s[0] = x[1] * 3.0  # a new array: x is not written, and traced values go into it
        return (s * x).sum()

    before = x.tobytes()
    np.testing.assert_allclose(mutad.gradient(f, x)[0], [3.0 * 2.0, 3.0 * 1.0 + 2.0])
    assert x.tobytes() == before
    y, dy = mutad.jvp(lambda x: mutad.stop_gradient(x) * x, (x,), (np.ones(2),))
    assert np.array_equal(dy, x)

    def outer(x):
        g = mutad.gradient(lambda y: (mutad.stop_gradient(x) * y * y).sum(), x)[0]
        return (x * g).sum()  # x * 2 x_stopped x: 4 x^2 summed, not 6 x^2

    np.testing.assert_allclose(mutad.gradient(outer, x)[0], 4 * x ** 2)
    np.testing.assert_allclose(mutad.hvp(lambda x: (mutad.stop_gradient(x) * x * x).sum(),
                                         (x,), (np.ones(2),)), 2 * x)


def test_stop_gradient_gives_a_constant_that_converts_in_every_mode():
    """Regression: ``stop_gradient`` of a traced array was a traced array itself, so
    ``float()`` of it and SciPy routines without rules raised ConversionError, although
    mutad's own messages advise exactly that."""
    import scipy.ndimage

    def f(x):
        s = mutad.stop_gradient(x)
        scale = float(s[0])                                   # a plain number
        smooth = scipy.ndimage.generic_filter(s, np.mean, 3)  # no rule: converts its input
        assert isinstance(scale, float) and type(smooth) is np.ndarray
        s[1] = x[0] * 2.0                                     # traced from here on
        return scale * (x * x).sum() + (smooth * x).sum() + (s * x).sum()

    x = np.array([1.5, 2.0, -1.0])
    before = x.tobytes()
    smooth = scipy.ndimage.uniform_filter1d(x, 3)
    # (s * x).sum() with s = [x0, 2 x0, x2] stopped but for s[1]: [s0 + 2 x1, s1, s2]
    expected = 2 * 1.5 * x + smooth + np.array([1.5 + 2 * 2.0, 2 * 1.5, -1.0])
    np.testing.assert_allclose(mutad.gradient(f, x)[0], expected)
    assert x.tobytes() == before
    y, dy = mutad.jvp(f, (x,), (np.ones(3),))                 # forward mode
    np.testing.assert_allclose(dy, expected.sum())
    np.testing.assert_allclose(mutad.hvp(f, (x,), (np.ones(3),)),  # reverse over forward
                               2 * 1.5 + np.array([2.0, 2.0, 0.0]))
    outer = mutad.gradient(lambda x: mutad.gradient(f, x)[0].sum(), x)[0]  # nested reverse
    np.testing.assert_allclose(outer, 2 * 1.5 + np.array([2.0, 2.0, 0.0]))
    assert x.tobytes() == before


@pytest.mark.parametrize("call", [
    lambda: mutad.grad(lambda x: x * 2.0)(2),
    lambda: mutad.grad(lambda x: (x * 2.0).sum())(np.array([1, 2])),
    lambda: mutad.value_and_grad(lambda x: x * 1.0)(True),
    lambda: mutad.gradient(lambda x, n: x * n, 2.0, 3, argnums=1),
    lambda: mutad.grad(lambda x: x * 1.0, replay=True)(2),
], ids=("int", "integer array", "bool", "by argnums", "replayed"))
def test_an_integer_chosen_by_argnums_is_an_error(call):
    with pytest.raises(mutad.errors.ArgnumsError, match="2.0 rather than 2"):
        call()


@pytest.mark.parametrize("argnums", [0, -2, np.int64(0), (0,), True, 2, -3])
def test_argnums_positions_as_the_general_check_takes_them(argnums):
    """A plain int position is answered by a short path: the others, a bool and positions out
    of range go through the general check, as before."""
    def f(x, y):
        return (x * y).sum()
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    if type(argnums) is bool or argnums in (2, -3):
        with pytest.raises(mutad.errors.ArgnumsError):
            mutad.gradient(f, x, y, argnums=argnums)
        return
    g = mutad.gradient(f, x, y, argnums=argnums)
    np.testing.assert_array_equal(g[0] if type(argnums) is tuple else g, y)


def test_integers_among_all_arguments_have_gradient_none():
    assert mutad.gradient(lambda x, n: x * n, 2.0, 3) == (3.0, None)


# JAX's names: vjp, jacfwd, jacrev, checked against finite differences along random directions.


def _in_place(x, w):
    x *= w                    # in place, through the argument
    x[1:] += np.sin(x[:-1])   # and through views of it
    return np.stack([x.sum(), (x * x).sum(), x[0] * w[-1]])


def test_vjp_is_pullback_under_jaxs_name_and_signature(rng):
    x, w, dy = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(3)
    v = (rng.standard_normal(4), rng.standard_normal(4))
    before = (x.tobytes(), w.tobytes())
    y, vjp_fn = mutad.vjp(_in_place, x, w)
    cotangents = vjp_fn(dy)
    assert (x.tobytes(), w.tobytes()) == before  # put back when vjp_fn ran
    assert np.array_equal(y, _in_place(x.copy(), w.copy()))
    # <dy, J v> = <dyᵀ J, v>
    Jv = directional_fd(_in_place, (x, w), v)
    assert np.isclose(dy @ Jv, sum(g @ d for g, d in zip(cotangents, v, strict=True)),
                      rtol=1e-7)
    with pytest.raises(mutad.errors.PullbackReusedError):
        vjp_fn(dy)


@pytest.mark.parametrize("transform", [mutad.jacfwd, mutad.jacrev], ids=["jacfwd", "jacrev"])
def test_jacfwd_and_jacrev_return_jacobian_functions(transform, rng):
    x, w = rng.standard_normal(4), rng.standard_normal(4)
    v = rng.standard_normal(4)
    J = transform(_in_place)(x, w)
    assert J.shape == (3, 4)
    assert np.allclose(J @ v, directional_fd(_in_place, (x, w), (v, None)), rtol=1e-7)
    assert np.allclose(J, mutad.jacobian(_in_place, x, w), rtol=1e-12, atol=0)
    Jx, Jw = transform(_in_place, argnums=(0, 1))(x, w)
    assert np.allclose(Jx, J, rtol=1e-12, atol=0)
    assert np.allclose(Jw @ v, directional_fd(_in_place, (x, w), (None, v)), rtol=1e-7)


def _keyword_buffer(x, w, *, buf, scale):
    """Writes into a caller's buffer given by keyword; its Hessian is not constant."""
    buf[:] = x * w
    buf *= scale
    return buf[0] * x[0] + buf.sum()


@pytest.mark.parametrize("transform", [mutad.jacfwd, mutad.jacrev, mutad.jacobian,
                                       mutad.hessian],
                         ids=["jacfwd", "jacrev", "jacobian", "hessian"])
def test_jacobian_functions_take_keyword_arguments(transform):
    # As JAX's: jacfwd(f)(x, k=...), jacrev(f)(...), and jacobian(f) / hessian(f) given no
    # arguments return the function, whose keyword arguments are f's, not differentiated, and
    # each run f makes gets them as NumPy's one run does: the caller's buffer is left as it was.
    x, w = np.array([0.5, -1.0, 2.0]), np.array([2.0, 3.0, -1.0])
    buf = np.full(3, 7.0)
    scale = 3.0
    got = transform(_keyword_buffer, argnums=(0, 1))(x, w, buf=buf, scale=scale)
    assert np.array_equal(buf, np.full(3, 7.0))
    e0 = np.eye(3)[0]  # f = scale * (w[0] x[0]**2 + x @ w)
    grads = (scale * w + 2 * scale * w[0] * x[0] * e0, scale * x + scale * x[0] ** 2 * e0)
    if transform is mutad.hessian:
        expected = ((2 * scale * w[0] * np.outer(e0, e0), scale * np.eye(3) + 2 * scale * x[0]
                     * np.outer(e0, e0)),
                    (scale * np.eye(3) + 2 * scale * x[0] * np.outer(e0, e0), np.zeros((3, 3))))
        for row, expected_row in zip(got, expected, strict=True):
            for block, expected_block in zip(row, expected_row, strict=True):
                assert np.allclose(block, expected_block, rtol=1e-12, atol=1e-12)
    else:
        for block, expected_block in zip(got, grads, strict=True):
            assert np.allclose(block, expected_block, rtol=1e-12, atol=0)


def _shifted_square(x, shift):
    x -= shift  # in place: the caller's array must come back as it was
    return (x * x).sum()


def test_gradient_given_no_arguments_is_grads_function():
    # gradient(f) / value_and_gradient(f) with no arguments called f with none (a TypeError
    # from f): as JAX's grad(f), they are the function of the first argument, what an
    # optimizer's jac= takes (its extra arguments by args=).
    x0, shift = np.zeros(2), np.array([1.0, -2.0])
    result = scipy.optimize.minimize(_shifted_square, x0, args=(shift,),
                                     jac=mutad.gradient(_shifted_square), method="BFGS")
    assert np.allclose(result.x, shift, atol=1e-8) and result.nit <= 3
    x = np.array([0.5, 3.0])
    g = mutad.gradient(_shifted_square)(x, shift)
    assert type(g) is np.ndarray and np.array_equal(g, 2 * (x - shift))
    value, (gx, gs) = mutad.value_and_gradient(_shifted_square, argnums=(0, 1))(x, shift)
    assert value == ((x - shift) ** 2).sum() and np.array_equal(gs, -gx)
    assert np.array_equal(x, [0.5, 3.0]) and np.array_equal(shift, [1.0, -2.0])


def test_argnums_without_positional_arguments_says_to_pass_by_position():
    with pytest.raises(mutad.errors.ArgnumsError, match="by position"):
        mutad.grad(lambda x: (x * x).sum())(x=np.ones(2))


def test_jacfwd_and_jacrev_use_the_mode_they_name(monkeypatch, rng):
    # A wide Jacobian (3 x 4) takes jacobian's reverse passes; jacfwd takes jvps all the same,
    # and jacrev gradients on a tall one.
    calls = []
    monkeypatch.setattr(mutad.api.session, "jvp", _counting(mutad.api.session.jvp, calls, "jvp"))
    monkeypatch.setattr(mutad.api.session, "jvp_batched",
                        _counting(mutad.api.session.jvp_batched, calls, "batch"))
    x, w = rng.standard_normal(4), rng.standard_normal(4)
    mutad.jacfwd(_in_place)(x, w)
    assert calls == ["batch"]  # every column and the value in one batched pass
    calls.clear()
    monkeypatch.setattr(mutad.api, "BATCHED", False)
    mutad.jacfwd(_in_place)(x, w)
    assert calls.count("jvp") == 1 + x.size  # the value, then one per column
    calls.clear()
    mutad.jacrev(lambda x: np.concatenate([x, x * x]))(x)
    assert calls.count("jvp") == 1  # the value only: the rows are gradients


def _counting(function, calls, name):
    def counted(*args, **kwargs):
        calls.append(name)
        return function(*args, **kwargs)

    return counted


# Arrays outside argnums: constants of the differentiation ---------------------------------------


def _weighted(x, data):
    """Python's own functions of an array no gradient is asked of, a constant written into it
    and then a traced value."""
    scale = math.log(float(data[0])) + sum(data.tolist())
    data[1] = 7.0
    data[2] = x[0]
    return (x * data).sum() * scale


def test_arrays_outside_argnums_are_constants_and_come_back_as_they_were(rng):
    x, data = rng.standard_normal(3), np.array([2.0, 3.0, 4.0])
    before = data.copy()
    g = mutad.gradient(_weighted, x, data, argnums=0)
    assert np.array_equal(data, before)
    scale = math.log(2.0) + 9.0
    expected = scale * np.array([2.0 + x[2], 7.0, x[0]])  # of (2 x0 + 7 x1 + x0 x2) scale
    np.testing.assert_allclose(g, expected, rtol=1e-14)
    # Selected, the same array is traced, and Python's float() of it refused.
    with pytest.raises(mutad.errors.ConversionError):
        mutad.gradient(_weighted, x, data, argnums=(0, 1))
    assert np.array_equal(data, before)


def test_a_constant_argument_handed_to_code_as_a_plain_array_is_read_only():
    # (a conversion not written as data.__array__() in f's code; written so, it is data
    # itself, as NumPy's, whose np.frombuffer is a view of it: its write is followed, and the
    # caller's bytes are written back)
    def f(x, data):
        np.copyto(np.frombuffer(np.asarray(getattr(data, "__array__")()), dtype=float), 0.0)
        return x.sum()

    def g(x, data):
        np.copyto(np.frombuffer(np.asarray(data.__array__()), dtype=float), 0.0)
        return x.sum()

    x, data = np.ones(2), np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="read-only"):
        mutad.gradient(f, x, data, argnums=0)
    assert np.array_equal(data, [1.0, 2.0])
    assert np.array_equal(mutad.gradient(g, x, data, argnums=0), [1.0, 1.0])
    assert np.array_equal(data, [1.0, 2.0])


def test_a_replay_guards_decisions_taken_on_arrays_outside_argnums():
    def f(x, data):
        w = np.exp(data) * 2.0
        y = x * w if data.sum() > 0 else x / w
        d = data.copy()
        d[0] = 5.0
        return (y * d).sum() + np.sin(data[1]) * x[0]

    x = np.array([1.0, 2.0, 3.0])
    replayed, traced = mutad.grad(f, replay=True), mutad.grad(f)
    counts = []
    for data in ([0.1, 0.2, 0.3], [0.5, 0.1, 0.9], [-1.0, -2.0, 0.3], [0.4, 0.4, 0.4]):
        data = np.array(data)
        assert np.array_equal(replayed(x, data), traced(x, data))
        assert np.array_equal(data, np.array(data))
        counts.append(replays(replayed))
    assert counts[1] == 1 and not replayed.reasons  # (the second call replayed the first's)


def test_second_order_with_arrays_outside_argnums(rng):
    x, data = rng.standard_normal(3), rng.standard_normal(3)

    def f(x, data):
        data *= 2.0  # a constant write, undone
        return (np.sin(x) * data).sum()

    before = data.copy()
    H = mutad.hessian(f, x, data)
    np.testing.assert_allclose(H, np.diag(-np.sin(x) * 2 * before), rtol=1e-14)
    assert np.array_equal(data, before)


def test_the_collector_walks_only_new_objects_while_a_gradient_runs_and_gets_them_back():
    """``arguments.no_full_collections``: while a differentiation runs (its function and its
    reverse pass) the process's objects are out of the cyclic collector's view (each full
    collection would walk them again) and its youngest generation is collected less often
    (``paced``); the outermost differentiation's end gives the objects and the program's
    thresholds back, exactly, nested ones (a hessian, another thread's), failing ones and a
    pullback's two halves included. Thresholds the program sets inside are its own: kept."""
    import gc
    from mutad.core.arguments import paced

    program, inside = (500, 7, 9), (2003, 0, 9)  # (the middle collected after 4,008 objects)
    assert paced(program) == inside
    assert paced((0, 10, 10)) == (0, 10, 10) and paced((700, 0, 10)) == (700, 0, 10)
    seen = []

    def f(x):
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return (x * x * x).sum()

    def threaded(x):  # another thread's differentiation ends while this one runs
        other = threading.Thread(target=lambda: mutad.gradient(f, np.arange(3.0)))
        other.start()
        other.join()
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        return f(x)

    def sets_its_own(x):
        gc.set_threshold(600, 5, 5)
        return f(x)

    before = gc.get_threshold()
    gc.set_threshold(*program)
    try:
        mutad.gradient(f, np.arange(3.0))
        assert seen[-1] == (inside, True)
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        mutad.hessian(lambda x: f(x), np.arange(3.0))
        assert seen[-1] == (inside, True)
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        mutad.gradient(threaded, np.arange(3.0))
        assert seen[-3:] == [(inside, True)] * 3
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        with pytest.raises(ZeroDivisionError):
            mutad.gradient(lambda x: (x * (1 / 0)).sum(), np.arange(3.0))
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        y, back = mutad.pullback(f, np.arange(3.0))
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        back(np.float64(1.0))
        assert gc.get_threshold() == program and gc.get_freeze_count() == 0
        mutad.gradient(sets_its_own, np.arange(3.0))
        assert seen[-1] == ((600, 5, 5), True)
        assert gc.get_threshold() == (600, 5, 5) and gc.get_freeze_count() == 0
        gc.set_threshold(0, 7, 9)  # (the program collects nothing by itself: kept)
        mutad.gradient(f, np.arange(3.0))
        assert seen[-1] == ((0, 7, 9), True) and gc.get_threshold() == (0, 7, 9)
    finally:
        gc.set_threshold(*before)


# The loop of the test below, run in a fresh interpreter: ``sys.argv[1]`` differentiates ``f``,
# whose steps (``sys.argv[2]``) each drop a cycle that lived ``sys.argv[3]`` steps.
CYCLES_DROPPED = """
import collections, gc, json, sys, weakref
import numpy as np
import mutad

gc.set_threshold(700, 10, 10)  # (the collector's pacing, whatever the version's default)
gc.collect()
others = [[] for _ in range(160_000 - len(gc.get_objects()))]  # (the process's other objects)


class Node:
    def __init__(self, a):
        self.a, self.me = a, self


alive, most = [0], [0]
steps, lives = int(sys.argv[2]), int(sys.argv[3])
junk_lists = 1_000 if lives > 1 else 10


def gone():
    alive[0] -= 1


def f(x):
    u = x.copy()
    recent = collections.deque(maxlen=lives)  # (each node lives that many steps)
    for _ in range(steps):
        node = Node(np.ones(4))
        alive[0] += 1
        weakref.finalize(node, gone)
        recent.append(node)
        junk = [[] for _ in range(junk_lists)]  # (collections run while nodes live)
        junk.append(junk)
        u = u * 1.0001 + node.a[:3].sum() * 0.0
        del node, junk
        most[0] = max(most[0], alive[0])
    recent.clear()
    return u.sum()


x = np.ones(3)
f(x.copy())
gc.collect()
alone, most[0] = most[0], 0
eval(sys.argv[1])
gc.collect()
print(json.dumps({"alone": alone, "most": most[0], "alive": alive[0],
                  "x": x.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("differentiate, steps, lives", [
    ("mutad.gradient(f, x)", 5_000, 30),
    ("mutad.value_and_grad(f, replay=True)(x)", 5_000, 30),  # (the call that records)
    # cycles that die young, each the step after its own, among few other objects: they wait
    # for the youngest generation's collections, paced anew while a differentiation runs
    ("mutad.gradient(f, x)", 20_000, 1),
], ids=["traced", "recorded", "traced-young"])
def test_cyclic_garbage_the_function_drops_is_freed_while_the_gradient_runs(differentiate, steps,
                                                                            lives):
    """A loop inside the differentiated function that drops a cycle at each step, some after
    the collector moved them to its oldest generation or after a full collection's freeze
    (``arguments.no_full_collections``) while they lived, keeps no more of them alive at
    once than the same loop run by NumPy alone: the memory stays flat in the number of
    steps, also while a replay records the program.

    The collector paces its full collections by how many objects live in the process, and
    the freeze walks the frozen objects again by how many it froze: the counts depend on the
    process's population, so the loop runs in a fresh interpreter with a population fixed
    at 160,000 objects and the collector's thresholds set, where they are the same at every
    run, whatever this process holds or ran before. There, NumPy alone keeps at most about
    350 nodes alive, and mutad 1.1 to 1.5 times as many; without full collections it keeps
    every one of the 5,000 (14 times), and where a full collection's freeze is never walked
    again, the 30 nodes alive at each full collection stay until the end (4 to 5 times,
    growing with the steps). Cycles that die young wait at most for the middle generation's
    collection, paced in objects made as without a differentiation (``arguments.paced``):
    mutad keeps 1.6 times as many as NumPy alone, where it kept half as many with the
    process's thresholds, and 2.8 times with the middle generation collected half as often."""
    run = subprocess.run([sys.executable, "-c", CYCLES_DROPPED, differentiate, str(steps),
                          str(lives)],
                         capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(
                             filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert run.returncode == 0, run.stderr
    counts = json.loads(run.stdout)
    assert counts["alive"] == 0 and counts["x"] == [1.0, 1.0, 1.0]
    assert counts["most"] < 2 * counts["alone"], counts


def test_jacrev_replays_its_rows_bit_for_bit(monkeypatch):
    """jacrev's rows are gradients of one recorded program replayed with another cotangent:
    each row is the traced gradient's bits, and the caller's array comes back."""
    from mutad.engines.replay import Program

    replayed, run = [], Program.run
    monkeypatch.setattr(Program, "run", lambda self, *args: (run(self, *args),
                                                             replayed.append(self))[0])
    def stencil(x):
        u = x.copy()
        for _ in range(20):
            u[1:-1] += 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
            u *= 0.99
        return u[::3], np.sin(u[:3]).sum()

    x = np.linspace(0.0, 1.0, 12)
    before = x.tobytes()
    J, j = mutad.jacrev(stencil)(x)
    assert x.tobytes() == before
    assert len(replayed) == J.shape[0] - 1  # (each row of J after the first; j has one)
    for k in range(J.shape[0]):
        e = np.zeros(J.shape[0])
        e[k] = 1.0
        row = mutad.gradient(lambda x: (stencil(x)[0] * e).sum(), x)[0]
        assert row.tobytes() == J[k].tobytes()
    assert mutad.gradient(lambda x: stencil(x)[1], x)[0].tobytes() == j.tobytes()


def _column_vector_kalman(q, ys):
    """A column-vector filter as ported from MATLAB: its log-likelihood is a (1, 1) array."""
    A = np.array([[1.0, 0.1], [0.0, 1.0]])
    H = np.array([[1.0, 0.0]])
    x, P, ll = np.zeros((2, 1)), np.eye(2), np.zeros((1, 1))
    for y in ys:
        x = A @ x
        P = A @ P @ A.T + q * np.eye(2)
        S = H @ P @ H.T + 0.1
        e = y - H @ x
        K = P @ H.T / S
        x += K @ e
        P -= K @ H @ P
        ll -= 0.5 * (e.T @ e / S + np.log(S))
    return ll


def test_an_output_of_one_element_is_a_scalar_traced_and_replayed():
    ys = np.sin(np.arange(12) * 0.3)
    kept = ys.copy()
    replayed = mutad.value_and_grad(_column_vector_kalman, replay=True)
    for q in (0.05, 0.06, 0.07, 0.08):  # recorded, then replayed
        value, g = mutad.value_and_gradient(_column_vector_kalman, np.array(q), ys, argnums=0)
        expected = _column_vector_kalman(np.array(q), ys)
        assert value.shape == (1, 1) and value == expected
        fd = directional_fd(lambda q: _column_vector_kalman(q, ys)[0, 0], (np.array(q),),
                            (np.array(1.0),))
        np.testing.assert_allclose(g, fd, rtol=1e-6)
        value_r, g_r = replayed(np.array(q), ys)
        assert value_r.shape == (1, 1) and value_r == expected  # not the rewound buffer
        np.testing.assert_allclose(g_r, g, rtol=1e-12)
    assert np.array_equal(ys, kept) and replays(replayed) == 3
    x = np.array([1.0, 2.0, 3.0])
    assert mutad.gradient(lambda x: x[1:2] * x[0], x)[0].tolist() == [2.0, 1.0, 0.0]
    with pytest.raises(mutad.errors.NonScalarOutputError, match=r"one element.*\(2,\)"):
        mutad.gradient(lambda x: x[1:] * 2.0, x)
    assert x.tolist() == [1.0, 2.0, 3.0]


def _logging(x, log, state):
    log.append(x.sum().item())
    log.append(x.sum())
    state.last = x * 2.0
    return (x * x).sum()


@pytest.mark.parametrize("how", ["gradient", "grad", "replay", "jvp", "nested"])
def test_a_container_the_function_mutates_is_the_callers_with_plain_values(how):
    # f appends to a list and sets an attribute of an object it is given, outside argnums:
    # as in NumPy's run, those are the caller's own objects, holding NumPy's values after.
    class State:
        pass

    x, log, state = np.arange(3.0), [], State()
    caller = x.copy()
    if how == "gradient":
        g = mutad.gradient(_logging, x, log, state, argnums=0)
    elif how == "grad":
        g = mutad.grad(_logging)(x, log, state)
    elif how == "replay":
        replaying = mutad.grad(_logging, replay=True)
        for _ in range(3):
            g = replaying(x, log, state)
    elif how == "jvp":
        _, g = mutad.jvp(_logging, (x, log, state), (np.ones(3), None, None))
    else:
        g = mutad.grad(lambda x, log, state: mutad.grad(_logging)(x, log, state).sum()
                       + (x ** 3).sum())(x, log, state)
    runs = 3 if how == "replay" else 1
    assert log == [3.0, 3.0] * runs
    assert all(isinstance(v, float) for v in log)  # NumPy's values, never traced ones
    assert type(state.last) is np.ndarray and state.last.tolist() == [0.0, 2.0, 4.0]
    assert x.tobytes() == caller.tobytes()
    expected = {"jvp": 6.0, "nested": 3 * x ** 2 + 2.0}.get(how, 2 * x)
    assert np.array_equal(g, expected)


class _Model:
    pass


@dataclasses.dataclass
class _Params:
    w: np.ndarray
    extra: dict


class _Slotted:
    __slots__ = ("w", "cache")


def _caching(x, st, d, items, params, slotted):
    # a model caching what it computed on the containers it is given, as plain code does
    st.y = x * st.w
    st.calls = getattr(st, "calls", 0) + 1
    st.pair = (st.w, [x.sum()])
    del st.old
    d["y"] = (x * d["w"]).sum()
    d["w2"] = d["w"]
    d.pop("old")
    items.append(x[0] * items[0])
    items.pop(1)
    params.extra["seen"] = True
    params.w = params.w * 2.0
    slotted.cache = x.max()
    return (x * st.w * d["w"] * items[0] * params.w * slotted.w).sum()


def _containers():
    st = _Model()
    st.w, st.old = np.array([1.0, 2.0, 3.0]), "old"
    d = {"w": np.array([0.5, 1.5, 2.5]), "old": np.ones(3)}
    items = [np.array([2.0, 3.0, 4.0]), np.arange(3.0)]
    params = _Params(np.array([1.0, -1.0, 0.5]), {})
    slotted = _Slotted()
    slotted.w = np.array([3.0, 1.0, 2.0])
    return st, d, items, params, slotted


@pytest.mark.parametrize("how", ["gradient", "outside", "jvp", "nested", "replay"])
def test_what_f_stores_in_a_rebuilt_container_reaches_the_caller(how):
    # Containers holding arrays are rebuilt around the traced arrays: what f stores in them
    # (attributes, dict entries, list items) reaches the caller's own containers as in
    # NumPy's run, as plain values; the caller's arrays come back bit for bit.
    x = np.array([0.5, -1.0, 2.0])
    replaying = mutad.grad(_caching, replay=True)
    for call in range(3 if how == "replay" else 1):  # fresh containers, the same structure
        args = _containers()
        st, d, items, params, slotted = args
        arrays = [x, st.w, d["w"], d["old"], *items, params.w, slotted.w]
        before = [a.copy() for a in arrays]
        expected = _containers()
        _caching(x, *expected)
        if how == "gradient":
            mutad.gradient(_caching, x, *args)
        elif how == "outside":
            mutad.gradient(_caching, x, *args, argnums=0)
        elif how == "jvp":
            mutad.jvp(_caching, (x, *args), (np.ones(3), None, None, None, None, None))
        elif how == "nested":
            mutad.gradient(lambda x: mutad.gradient(_caching, x, *args)[0].sum() * x.sum(), x)
        else:  # each call traced: a replay would change no container
            calls = replays(replaying)
            replaying(x, *args)
            assert replays(replaying) == calls
        assert all(a.tobytes() == b.tobytes() for a, b in zip(arrays, before, strict=True))
        st0, d0, items0, params0, slotted0 = expected
        assert type(st.y) is np.ndarray and st.y.tobytes() == st0.y.tobytes()
        assert st.calls == 1 and not hasattr(st, "old")
        assert st.pair[0] is arrays[1] and type(st.pair[1][0]) is np.float64
        assert st.pair[1][0] == st0.pair[1][0]
        assert list(d) == ["w", "y", "w2"] and d["w2"] is arrays[2] and d["y"] == d0["y"]
        assert len(items) == 2 and items[0] is arrays[4] and type(items[1]) is np.ndarray
        assert items[1].tobytes() == items0[1].tobytes()
        assert params.extra == {"seen": True} and params.w is not arrays[6]
        assert type(params.w) is np.ndarray and params.w.tobytes() == params0.w.tobytes()
        assert slotted.w is arrays[7] and slotted.cache == slotted0.cache == 2.0
        assert type(slotted.cache) is np.float64
    if how == "replay":
        assert any("changed a container" in r for r in replaying.reasons.values())


def test_a_replay_of_f_changing_a_container_given_as_it_is_traces():
    # a dict holding no array is f's own as it is the caller's: a replay, which runs no line
    # of f, would leave out what f stores in it, so such a call records no program
    def f(x, opts):
        opts["calls"] = opts.get("calls", 0) + 1
        return (x * opts["scale"]).sum()

    x = np.array([1.0, 2.0])
    replaying = mutad.grad(f, replay=True)
    for _ in range(3):
        opts = {"scale": 2}
        calls = replays(replaying)
        assert replaying(x, opts).tolist() == [2.0, 2.0] and replays(replaying) == calls
        assert opts == {"scale": 2, "calls": 1}
    assert any("changed a container" in r for r in replaying.reasons.values())


def test_a_jacobian_of_f_changing_its_containers_is_refused():
    # a Jacobian or a Hessian runs f once per direction: which run's changes the caller
    # should see is NumPy's one run's, which mutad cannot tell apart: refused, not dropped
    def f(x, st):
        st["y"] = x * 2.0
        return x * st["w"]

    st = {"w": np.array([1.0, 2.0])}
    x = np.array([3.0, 4.0])
    for differentiate in (mutad.jacobian, lambda f, x, st: mutad.hessian(
            lambda x, st: f(x, st).sum(), x, st)):
        with pytest.raises(mutad.MutadError, match="changed a container it was given"):
            differentiate(f, x, st)
        assert list(st) == ["w"] and st["w"].tolist() == [1.0, 2.0] and x.tolist() == [3.0, 4.0]


class _Registered:
    """Rebuilt by its own unflatten (``register_pytree``): a model caching what it computed."""

    def __init__(self, w, scale, log):
        self.w, self.scale, self.log, self.calls = w, scale, log, 0


class _RegisteredSlotted:
    __slots__ = ("w", "best")

    def __init__(self, w):
        self.w = w


class _RegisteredCopying(_Registered):
    """Its unflatten copies the log list: f's appends to it would not reach the caller's."""


class _RegisteredDict(dict):
    pass


class _RegisteredOpaque:
    """Keeps its array outside its attributes, where only its flatten finds it."""

    __slots__ = ()
    store = {}

    def __init__(self, w):
        _RegisteredOpaque.store[id(self)] = w


@pytest.fixture
def registered():
    kinds = {
        _Registered: (lambda m: ((m.w,), (m.scale, m.log, m.calls)),
                      lambda aux, ch: _with_calls(_Registered(ch[0], *aux[:2]), aux[2])),
        _RegisteredSlotted: (lambda m: ((m.w,), None), lambda aux, ch: _RegisteredSlotted(*ch)),
        _RegisteredCopying: (lambda m: ((m.w,), (m.scale, m.log)),
                             lambda aux, ch: _RegisteredCopying(ch[0], aux[0], list(aux[1]))),
        _RegisteredDict: (lambda d: (list(d.values()), list(d)),
                          lambda keys, ch: _RegisteredDict(zip(keys, ch))),
        _RegisteredOpaque: (lambda o: ((_RegisteredOpaque.store[id(o)],), None),
                            lambda aux, ch: _RegisteredOpaque(*ch)),
    }
    for kind, (flatten, unflatten) in kinds.items():
        mutad.register_pytree(kind, flatten, unflatten)
    yield
    for kind in kinds:
        del mutad.core.trees.REGISTERED[kind]


def _with_calls(m, calls):
    m.calls = calls
    return m


def _caching_registered(x, m, slotted):
    m.calls += 1
    m.y = x * m.w
    m.w2 = m.w
    m.cache = {"total": (x * m.w).sum()}
    del m.scale
    m.log.append(x[0] * m.w[0])  # (the caller's own list, which unflatten passes on)
    slotted.best = x.max()
    return (x * m.w * slotted.w).sum()


@pytest.mark.parametrize("how", ["gradient", "outside", "jvp", "nested", "replay"])
def test_what_f_stores_in_a_registered_container_reaches_the_caller(how, registered):
    # an object rebuilt by its registered unflatten: the attributes f adds, removes or rebinds
    # in it reach the caller's object as in NumPy's run, as plain values (a given array: the
    # caller's own); the caller's arrays come back bit for bit
    x = np.array([0.5, -1.0, 2.0])
    replaying = mutad.grad(_caching_registered, replay=True)
    for call in range(3 if how == "replay" else 1):  # fresh objects, the same structure
        m = _Registered(np.array([1.0, 2.0, 3.0]), 2.0, [])
        m.calls = 4
        slotted = _RegisteredSlotted(np.array([3.0, 1.0, 2.0]))
        arrays = [x, m.w, slotted.w]
        before = [a.copy() for a in arrays]
        expected = (_with_calls(_Registered(m.w.copy(), 2.0, []), 4),
                    _RegisteredSlotted(slotted.w.copy()))
        _caching_registered(x, *expected)
        if how == "gradient":
            mutad.gradient(_caching_registered, x, m, slotted)
        elif how == "outside":
            mutad.gradient(_caching_registered, x, m, slotted, argnums=0)
        elif how == "jvp":
            mutad.jvp(_caching_registered, (x, m, slotted), (np.ones(3), None, None))
        elif how == "nested":
            mutad.gradient(lambda x: mutad.gradient(
                _caching_registered, x, m, slotted)[0].sum() * x.sum(), x)
        else:  # each call traced: a replay would change no object
            calls = replays(replaying)
            replaying(x, m, slotted)
            assert replays(replaying) == calls
        assert all(a.tobytes() == b.tobytes() for a, b in zip(arrays, before, strict=True))
        m0, slotted0 = expected
        assert m.calls == 5 and not hasattr(m, "scale") and m.log == m0.log == [0.5]
        assert type(m.log[0]) is np.float64
        assert type(m.y) is np.ndarray and m.y.tobytes() == m0.y.tobytes()
        assert m.w is arrays[1] and m.w2 is arrays[1]
        assert type(m.cache["total"]) is np.float64 and m.cache["total"] == m0.cache["total"]
        assert type(slotted.best) is np.float64 and slotted.best == slotted0.best == 2.0
    if how == "replay":  # (refused before f runs, as registered types are; else after)
        assert any("registered pytree" in r or "changed a container" in r
                   for r in replaying.reasons.values())


def test_a_registered_container_whose_change_cannot_reach_the_caller_is_refused(registered):
    # what f changes where the caller's object does not share it (a list unflatten copied,
    # the items of a dict subclass, a store only flatten reaches) is refused, never dropped;
    # the caller's arrays come back bit for bit; f changing nothing is not refused
    def appends(x, m):
        m.log.append(x.sum())
        return (x * m.w).sum()

    def sets(x, d):
        d["y"] = x * 2.0
        return (x * d["w"]).sum()

    def stores(x, o):
        _RegisteredOpaque.store[id(o)] = x * 2.0
        return x.sum()

    def reads(x, m, d, o):
        return (x * m.w * d["w"] * _RegisteredOpaque.store[id(o)]).sum()

    x = np.array([1.0, 2.0])
    m = _RegisteredCopying(np.array([3.0, 4.0]), 1.0, [])
    d = _RegisteredDict(w=np.array([5.0, 6.0]))
    o = _RegisteredOpaque(np.array([7.0, 8.0]))
    arrays = [x, m.w, d["w"], _RegisteredOpaque.store[id(o)]]
    before = [a.copy() for a in arrays]
    for f, arg, words in ((appends, m, "attribute 'log'"), (sets, d, "its items"),
                          (stores, o, "flatten")):
        for differentiate in (mutad.gradient, lambda f, x, a: mutad.jvp(f, (x, a), (x, None))):
            with pytest.raises(mutad.errors.UnsupportedOperationError) as caught:
                differentiate(f, x, arg)
            assert type(arg).__qualname__ in str(caught.value) and words in str(caught.value)
        with pytest.raises(mutad.MutadError, match="changed a container it was given"):
            mutad.jacobian(lambda x, a: f(x, a) * x, x, arg)
    assert m.log == [] and list(d) == ["w"] and _RegisteredOpaque.store[id(o)] is arrays[3]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(arrays, before, strict=True))
    g = mutad.gradient(reads, x, m, d, o)
    assert g[0].tolist() == [105.0, 192.0] and g[1].w.tolist() == [35.0, 96.0]


def test_a_list_inside_a_rebuilt_container_is_the_callers():
    # {"w": w, "log": log}: the dict is rebuilt around the traced w, its log is the caller's
    def f(p):
        p["log"].append(p["w"].sum().item())
        return (p["w"] ** 2).sum()

    log = []
    g = mutad.gradient(f, {"w": np.ones(2), "log": log}, argnums=0)
    assert log == [2.0] and g["w"].tolist() == [2.0, 2.0]
