"""A replay's recording takes the traced engine's fast path for a ufunc
(``operations.observed_ufunc``: ``fast_ufunc``'s elementwise plans) and writes down what it did;
and a program's blocks are compiled as its first replay reaches them (``blocks.Block``).

Replayed calls against traced ones, bit for bit (values, gradients, NumPy's warnings and
floating-point events, exceptions) with the caller's arrays unchanged, on inputs that flip the
fast path's decisions between the recorded call and the replayed ones: a scalar loop's
arithmetic computed with Python's floats where the result is a normal number, by the ufunc
where it is zero, subnormal, infinite or NaN (``elementwise.exact_in_python``); the operands'
values read or not by the partials, constants kept; complex results."""

import collections

import numpy as np
import pytest

import mutad
from mutad.engines import blocks, operations
from test_replay_stretches import MODES, replayed_like_traced


def scalar_loop(x, c):
    """Arithmetic on 0-d values of a loop (Python's floats where exact), a constant ``c`` as
    an operand, and ufuncs whose partials read their operands or their output."""
    total = 0.0
    for i in range(3):
        a, b = x[i], x[i + 1]
        p = a * b
        q = p / (b - c[i])
        r = q + a * c[i]
        s = np.exp(r) - np.sqrt(np.abs(p))
        total = total + s * s - r / 3.0
    return total


def array_chain(x, c):
    """The same on arrays, a constant array an operand (kept for the partials)."""
    y = x * c
    z = np.tanh(y) + y / (c + 2.0)
    return np.sum(z * z - np.log1p(np.abs(x)) * c)


TINY = np.finfo(np.float64).tiny
HUGE = np.finfo(np.float64).max


def _scalar_calls():
    normal = np.array([0.5, -1.25, 2.0, 0.75])
    return [
        (normal, np.array([0.25, -0.5, 1.5])),  # recorded: every result normal (Python's)
        (np.array([0.0, -1.25, 2.0, 0.75]), np.array([0.25, -0.5, 1.5])),  # zeros
        (np.array([TINY, TINY / 4, 2.0, 0.75]), np.array([0.25, -0.5, 1.5])),  # subnormals
        (np.array([1e200, 1e200, 2.0, 0.75]), np.array([0.25, -0.5, 1.5])),  # overflow
        (np.array([np.inf, -1.25, 2.0, np.nan]), np.array([0.25, -0.5, 1.5])),  # inf, NaN
        (np.array([0.5, 0.5, 2.0, 0.75]), np.array([0.5, -0.5, 2.0])),  # division by zero
        (np.array([HUGE, 2.0, -HUGE, 0.75]), np.array([-HUGE, 0.0, HUGE])),
        (normal, np.array([0.25, -0.5, 1.5])),  # back to the recorded call's
    ]


def _array_calls(dtype):
    x = np.linspace(-1.0, 1.0, 6).astype(dtype)
    c = np.linspace(0.5, 2.0, 6).astype(dtype)
    return [
        (x, c),
        (x * 0, c),
        (x, c * 0 - 2),  # c + 2 zero: a division by zero
        (np.full(6, np.inf, dtype), c),
        (np.full(6, np.nan, dtype), c),
        (x * np.finfo(dtype).tiny, c),
        (x, c),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_scalar_loop_recorded_on_the_fast_path_replays_as_traced(mode, capfd):
    replayed_like_traced(scalar_loop, _scalar_calls(), MODES[mode], capfd)


@pytest.mark.parametrize("mode", ["default", "all-ignore", "over-raise"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_array_operations_recorded_on_the_fast_path_replay_as_traced(dtype, mode, capfd):
    replayed_like_traced(array_chain, _array_calls(dtype), MODES[mode], capfd)


def _recorded_by(monkeypatch, name):
    """The ufuncs ``operations.<name>`` runs while a replay records, as a list it fills."""
    recorded = []
    through = getattr(operations, name)

    def counted(ufunc, inputs, tape, *rest):
        if tape.recorder is not None:
            recorded.append(ufunc)
        return through(ufunc, inputs, tape, *rest)
    monkeypatch.setattr(operations, name, counted)
    return recorded


@pytest.mark.parametrize("mode", ["default", "all-ignore"])
def test_the_recording_takes_the_fast_path_and_each_call_replays(mode, capfd, monkeypatch):
    """The recorded call runs ``fast_ufunc`` for the loop's operations, and every later call
    replays (not traced), matching tracing bit for bit."""
    fast = _recorded_by(monkeypatch, "fast_ufunc")
    x, c = _scalar_calls()[0]
    calls = [(x, c), (x * 1.5, c), (x, c * 0.75), (x, c)]
    replaying = replayed_like_traced(scalar_loop, calls, MODES[mode], capfd)
    assert fast, "the recording took the general path for every ufunc"
    assert len(replaying.traced) == 1


def test_recorded_on_the_general_path_alone_the_replay_is_the_same(capfd, monkeypatch):
    """With no fast plan at all, the recording writes down the general path's records:
    the replays agree with tracing as they do with the fast path."""
    monkeypatch.setattr(operations, "_FAST", {})
    monkeypatch.setattr(operations, "_fast_plan", lambda ufunc, pattern, count: False)
    replayed_like_traced(scalar_loop, _scalar_calls(), MODES["default"], capfd)


def branching(x):
    """A decision of Python's first, then a long run of small elementwise steps (blocks of
    ``replay.BLOCK_STEPS`` steps)."""
    y = x * 2.0 if x[0] > 0 else x * 3.0
    for _ in range(80):
        y = np.sin(y) * 0.5 + y * 0.25
    return np.sum(y)


def test_a_block_is_compiled_as_the_first_replay_reaches_it(monkeypatch):
    """Where the first replay's guard fails in its first block, the later blocks are not
    compiled; where it replays, each block is compiled once, and the later calls run them,
    as traced."""
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
    factories = []
    made = blocks.Code.factory

    def counted(code):
        factories.append(code)
        return made(code)
    monkeypatch.setattr(blocks.Code, "factory", counted)
    replaying = mutad.value_and_grad(branching, replay=True)
    tracing = mutad.value_and_grad(branching)
    x, flipped = np.linspace(0.5, 1.5, 5), np.linspace(-1.5, -0.5, 5)
    compiled = []
    for args in [x, flipped, flipped, flipped]:
        mine = np.copy(args)
        value, grad = replaying(mine)
        assert np.array_equal(mine, args)
        expected, expected_grad = tracing(np.copy(args))
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert grad.tobytes() == expected_grad.tobytes()
        compiled.append(len(factories))
        factories.clear()
    recorded, failed, replayed, again = compiled
    assert (recorded, again) == (0, 0)
    assert replayed > 1 and failed == 1, compiled


def elements_of_views(x, c):
    """A scalar loop reading elements of whole arrays and of views (a place of its own, whose
    elements may overlap), real and complex."""
    v = x[1:]
    w = x[::-1]
    total = 0.0
    for i in range(3):
        total = total + v[i] * w[i] - c[i] * x[i] / (1.0 + c[i + 1] * c[i + 1])
    return np.real(total * np.conj(total)) if np.iscomplexobj(total) else total * total


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_elements_read_on_the_fast_path_replay_as_traced(dtype, capfd):
    x = np.linspace(-1.0, 1.5, 5).astype(dtype)
    c = np.linspace(0.5, 2.0, 5).astype(dtype)
    calls = [(x, c), (x * 2, c), (x * 0, c), (np.full(5, np.inf, dtype), c), (x, c * 0), (x, c)]
    replayed_like_traced(elements_of_views, calls, MODES["default"], capfd)


def test_a_complex_element_of_an_array_outside_argnums_is_replayed_as_traced():
    """An element of a complex array outside argnums, which the recording follows as an input
    and tracing holds a constant: replayed, bit for bit as traced (its cotangents round alike
    whichever inputs are traced: ``elementwise._small_cotangents``)."""
    replaying = mutad.value_and_grad(elements_of_views, argnums=0, replay=True)
    tracing = mutad.value_and_grad(elements_of_views, argnums=0)
    x = np.linspace(-1.0, 1.5, 5)
    c = np.linspace(0.5, 2.0, 5) * (1 + 0.5j)
    for scale, d in ((1.0, c), (2.0, c), (3.0, c * (1 - 0.25j)), (1.0, c)):
        got, expected = replaying(x * scale, d), tracing(x * scale, d)
        assert np.asarray(got[0]).tobytes() == np.asarray(expected[0]).tobytes()
        assert got[1].tobytes() == expected[1].tobytes()
    assert replaying.reasons == {}


def test_the_recording_of_complex_values_gives_the_traced_gradient():
    """The call that records, following the arrays outside argnums (complex values), gives the
    traced call's value and gradient bit for bit: a complex product of one element rounds
    otherwise written over its operand than into memory of its own, and which input's
    cotangent would go into the operand's memory depends on which inputs are traced
    (``elementwise._small_cotangents``)."""
    tracing = mutad.value_and_grad(elements_of_views, argnums=0)
    c = np.linspace(0.5, 2.0, 5) * (1 + 0.5j)
    for x in (np.linspace(-1.0, 1.5, 5), np.linspace(-2.0, 3.1, 5), np.linspace(0.3, 1.7, 5)):
        x0, c0 = x.copy(), c.copy()
        replaying = mutad.value_and_grad(elements_of_views, argnums=0, replay=True)
        got, expected = replaying(x, c), tracing(x, c)  # (a recording each: its first call)
        assert np.asarray(got[0]).tobytes() == np.asarray(expected[0]).tobytes()
        assert got[1].tobytes() == expected[1].tobytes()
        assert x.tobytes() == x0.tobytes() and c.tobytes() == c0.tobytes()
        assert replaying.reasons == {}


@pytest.mark.parametrize("shape", [(), (1,)])
def test_a_complex_cotangent_is_the_same_whichever_other_inputs_are_traced(shape):
    """x's cotangent through complex products and quotients of one element, with ``c``
    differentiated or held constant: the same bits (what a recording, which follows arrays
    outside argnums, relies on)."""
    def f(x, c):
        t = 0.0
        for i in range(4):
            a, b = x[i:i + 1].reshape(shape), c[i:i + 1].reshape(shape)
            t = t + (a / b - b * a) * (t if i % 2 else 1.0)
        return np.sum(np.real(t * np.conj(t)))

    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.normal(size=5)
        c = rng.normal(size=5) + 1j * rng.normal(size=5)
        alone = mutad.grad(f, argnums=0)(x, c)
        both = mutad.grad(f, argnums=(0, 1))(x, c)[0]
        assert alone.tobytes() == both.tobytes()


def products(a, b, c):
    """Products of traced operands of every shape the rule offers plain functions for (vector,
    matrix), a batch of matrices (it offers none), a constant operand (``np.eye``) and a
    product whose result is an operand of the next."""
    v = a @ b  # matrix @ vector
    w = b @ a  # vector @ matrix
    s = v @ w  # vector @ vector: a NumPy scalar
    m = (a @ a.T) @ c  # matrices, then a batch broadcast against one
    e = np.eye(a.shape[0]) @ b  # a constant operand: the general path
    return s * np.sum(m) + np.sum(e * v)


def _product_calls(dtype):
    a = np.linspace(-1.0, 1.5, 9).reshape(3, 3).astype(dtype)
    b = np.linspace(0.5, 2.0, 3).astype(dtype)
    c = np.linspace(-0.5, 0.5, 18).reshape(2, 3, 3).astype(dtype)
    huge = np.finfo(dtype).max
    return [
        (a, b, c),
        (a * 0, b, c),  # zero factors: the products' 0 * inf check has nothing to replace
        (a, np.array([np.nan, 1.0, 2.0], dtype), c),
        (a * huge, b, c),  # sums past the largest float
        (a, b, c * 0),
        (a, b, c),
    ]


@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_recorded_on_the_fast_path_replay_as_traced(dtype, mode, capfd,
                                                             monkeypatch):
    """The recording runs the products of traced operands as the traced engine does
    (``_fast_function``, observed by ``observed_ufunc``: a ``Product`` record that
    ``replay.Function`` takes), that of a constant operand on the general path; every call
    is replayed as traced, bit for bit."""
    recorded = _recorded_by(monkeypatch, "_fast_function")
    replaying = replayed_like_traced(products, _product_calls(dtype), MODES[mode], capfd)
    # five per recording (the constant's product not: the general path's)
    assert recorded and recorded.count(np.matmul) % 5 == 0, recorded
    if mode == "all-ignore":
        assert len(replaying.traced) == 1
