"""Batched Hessians (``api._batched_hessian_columns``): ``hessian`` carries many directions per
forward pass over the gradient, whose reverse differentiation runs nested inside the batched
pass (``forward.NESTED``), and must give what one direction per pass gives (``api.BATCHED =
False``): bit for bit where each direction's arithmetic is the same, to rounding where a sum or
product of a batch adds in another order. Whatever the batch does not handle falls back to one
direction per pass, with the same result or the same error."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from hypothesis import HealthCheck, given, settings

import mutad
from mutad import api
from mutad.engines import forward, session
from mutad.testing import directional_fd
from random_programs import REAL_FEATURES, _plain, _weights, programs


def _hessian(f, args, argnums, batched, monkeypatch, policy="restore"):
    """``hessian(f, *args)`` (or its error) with batches on or off, and the outcome of each
    batched pass ("batched", or the name of what stopped it)."""
    outcomes = []
    real = session.jvp_batched

    def spy(*a, **k):
        try:
            result = real(*a, **k)
        except Exception as error:
            outcomes.append(type(error).__name__)
            raise
        outcomes.append("batched")
        return result

    monkeypatch.setattr(session, "jvp_batched", spy)
    monkeypatch.setattr(api, "BATCHED", batched)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = mutad.hessian(f, *args, argnums=argnums, policy=policy)
    except Exception as error:  # noqa: BLE001 - compared below
        result = error
    return result, outcomes


def _same(a, b, exact):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, exact) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if exact:
        return a.tobytes() == b.tobytes()
    scale = max(1.0, np.abs(b[np.isfinite(b)]).max(initial=0.0))
    return (np.array_equal(np.isfinite(a), np.isfinite(b))
            and np.array_equal(a[~np.isfinite(a)], b[~np.isfinite(b)], equal_nan=True)
            and np.allclose(a, b, rtol=1e-12, atol=1e-13 * scale, equal_nan=True))


def compare(f, make_args, monkeypatch, argnums=0, exact=True, policy="restore"):
    """The Hessian batched and one direction per pass, on fresh arguments each, the caller's
    bytes unchanged by either; returns (result, whether every batched pass ran to the end).
    ``f`` may be None, ``make_args`` then making ``(f, args)`` afresh."""
    made = make_args() if f is None else (f, make_args())
    args = made[1]
    before = [a.tobytes() for a in args if isinstance(a, np.ndarray)]
    batched, outcomes = _hessian(*made, argnums, True, monkeypatch, policy)
    assert [a.tobytes() for a in args if isinstance(a, np.ndarray)] == before
    made = make_args() if f is None else (f, make_args())
    single, _ = _hessian(*made, argnums, False, monkeypatch, policy)
    assert _same(batched, single, exact), (batched, single)
    return batched, bool(outcomes) and all(o == "batched" for o in outcomes)


# ----------------------------------------------------------------------------------------------
# Programs the batch handles


def _elementwise(x):
    return (np.sin(x) * x + np.exp(-x * x)).sum()


def _in_place(x):
    y = x.copy()
    y *= x
    y[1:] += y[:-1]
    x *= 2.0
    x[::2] += np.exp(x[1::2])
    np.tanh(y, out=y)
    y -= x
    return (y * y).sum() * x[0]


def _views(x):
    m = x.reshape(2, 3)
    m.T[1] *= m[:, 0]  # through a transpose
    row = m[1]
    row[::-1] = np.cos(row) + m[0]  # reversed
    x[np.array([True, False, True, False, False, True])] /= 3.0  # a mask
    e = x[4]
    x[4] = 7.0
    return (x * x * e).sum() + (m ** 3).sum()


def _decisions(x):
    x[x > 0.5] *= 3.0  # a mask decided on the values: the same for every direction
    y = np.zeros_like(x)
    y[1:] = x[:-1] * x[1:]
    y[0] = np.sin(x[0])
    return np.sum(y ** 3) + x[np.argmax(x)] ** 2


def _products(x):
    m = x.reshape(2, 3)
    p = m @ m.T
    p @= np.ones((2, 2)) + p
    return p.sum() + np.dot(x[:3], x[3:]) ** 2 + np.mean(x * x, axis=0)


def _overwrites(x):
    a = x.copy()
    for _ in range(3):
        a[1:] = a[:-1] * 0.5 + np.sin(a[1:])  # an overlapping assignment, undone in reverse
        a *= a[0]
    np.copyto(a[:2], x[4:])
    return (a * x).sum()


def _accumulated(x):
    y = x.copy()
    np.add.at(y, [0, 2, 2], x[:3] ** 2)  # repeated indices: added in order
    np.subtract.at(y, np.array([5, 5]), y[1])
    return (y * y * x).sum()


def _selected(x):
    y = np.where(x > 0.5, np.sin(x), x[::-1] * 2.0)
    z = np.where(x[:3] < 0.3, 1.5, x[3:] ** 2)  # a constant branch
    w = np.where(np.array([[True], [False]]), x[:3], np.cos(x[3:]))  # broadcast to (2, 3)
    return (y * y).sum() + (z * x[:3]).sum() + (w ** 3).sum()


EXACT = [_elementwise, _in_place, _views, _decisions, _overwrites, _accumulated, _selected]
ROUNDED = [_products]


def _arguments():
    return (np.linspace(0.1, 1.2, 6),)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("f", EXACT + ROUNDED, ids=lambda f: f.__name__)
def test_batched_hessian_is_the_one_direction_hessian(f, policy, monkeypatch):
    H, batched = compare(f, _arguments, monkeypatch, exact=f in EXACT, policy=policy)
    assert batched, "the batch should handle every operation of this program"
    assert not isinstance(H, Exception)
    # and it is the second derivative: H v is the finite difference of the gradient along v
    x = _arguments()[0]
    v = np.linspace(-1.0, 1.0, x.size)
    expected = directional_fd(lambda z: mutad.gradient(f, z, argnums=0), (x,), (v,))
    assert np.allclose(H @ v, expected, rtol=1e-6, atol=1e-7)
    assert np.allclose(H, H.T, rtol=1e-10, atol=1e-10)


def test_hessian_in_chunks(monkeypatch):
    monkeypatch.setattr(api, "HESSIAN_BATCH", 4)
    calls = []
    real = session.jvp_batched
    monkeypatch.setattr(session, "jvp_batched", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    x = np.linspace(-1.0, 1.0, 10)
    H = mutad.hessian(_in_place, x.copy())
    assert calls == [4, 4, 2]
    monkeypatch.setattr(api, "BATCHED", False)
    assert H.tobytes() == mutad.hessian(_in_place, x.copy()).tobytes()


def test_blocks_of_two_arguments(monkeypatch):
    def f(a, b):
        a *= b[:2]
        b[1:] += a[0] * b[:-1]
        return (np.sin(a) * b[0]).sum() + (b ** 3).sum()

    def make():
        return np.array([0.3, 0.7]), np.array([0.5, 1.5, -0.25])

    H, batched = compare(f, make, monkeypatch, argnums=(0, 1))
    assert batched


def test_arguments_that_view_one_buffer(monkeypatch):
    def f(a, b):
        a *= b[0]
        b[1:4] += a[1]
        return (np.concatenate([a.ravel(), b]) ** 3).sum()

    def make():
        s = np.linspace(0.2, 2.0, 10)
        return s[1:7].reshape(3, 2).T, s[5:]  # overlapping views of one buffer

    for argnums in (0, 1, (0, 1)):
        _, batched = compare(f, make, monkeypatch, argnums=argnums)
        assert batched


# ----------------------------------------------------------------------------------------------
# What falls back: one direction per pass, the same result or error


@mutad.adjoint
def _doubled(x):
    return 2.0 * x


@_doubled.rule
def _doubled_rule(x):
    return _doubled(x), lambda g: (2.0 * g,)


@_doubled.jvp_rule
def _doubled_jvp(tangents, x):
    return _doubled(x), 2.0 * tangents[0]


def _nested(x):
    return (mutad.gradient(lambda z: (z ** 3).sum(), x) * x).sum()


FALLBACK = {
    "cumsum": lambda x: np.cumsum(x * x).sum() * x[0],
    "max": lambda x: np.max(x * x) * x.sum(),
    "user rule": lambda x: (_doubled(x) * x).sum(),
    "scipy": lambda x: scipy.linalg.solve(np.eye(3) + np.outer(x[:3], x[3:]), x[:3]).sum(),
    "sort": lambda x: (np.sort(x * x) * x).sum(),
    "add.at of a tuple key": lambda x: (lambda y: (np.add.at(y, ([0, 1, 1], [2, 0, 0]), x[:3]),
                                                   (y ** 3).sum())[1])(x.reshape(2, 3) * 1.0),
    "complex": lambda x: (np.abs(np.exp(1j * x)) * x * x).sum(),
    "nested": _nested,
    "conversion": lambda x: (x * complex(x[0] * 1j).real).sum(),
}


@pytest.mark.parametrize("name", FALLBACK)
def test_what_falls_back_agrees(name, monkeypatch):
    result, batched = compare(FALLBACK[name], _arguments, monkeypatch)
    assert not batched  # it stopped, and one direction per pass gave the result
    if name == "conversion":
        assert isinstance(result, mutad.MutadError)


def test_a_hessian_inside_a_differentiation_takes_one_direction_per_pass(monkeypatch):
    calls = []
    monkeypatch.setattr(session, "jvp_batched", lambda *a, **k: calls.append(1))
    y, dy = mutad.jvp(lambda z: mutad.hessian(lambda u: (u ** 3).sum(), z),
                      (np.linspace(0.1, 1.0, 4),), (np.ones(4),))
    assert calls == [] and np.allclose(dy, 6.0 * np.eye(4))


def test_the_nesting_a_batch_allows_is_the_hessian_s_only(monkeypatch):
    # a batched jvp of a gradient without nested=True stops at once, as before
    def g(x):
        return mutad.gradient(lambda z: (z ** 3).sum(), x)

    with pytest.raises(forward.BatchUnsupported):
        session.jvp_batched(g, (np.linspace(0.1, 1.0, 4),), (np.eye(4),), 4)
    # and inside the one reverse differentiation a batch allows, a further one stops it
    def h(x):
        return mutad.gradient(lambda z: (mutad.gradient(lambda u: (u ** 3).sum(), z)
                                          * z).sum(), x)

    with pytest.raises(forward.BatchUnsupported):
        session.jvp_batched(h, (np.linspace(0.1, 1.0, 4),), (np.eye(4),), 4, nested=True)
    assert not forward.NESTED and not forward.BATCH and not forward.FAILED


# ----------------------------------------------------------------------------------------------
# Random in-place programs (tests/random_programs.py), made scalar by a weighted sum of squares


def _scalar(program):
    def make():
        f, args = program.make()
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            weights = _weights(_plain(*program.make()))

        def loss(*xs):
            # f may write the constants it reads: each call starts from them afresh, as
            # random_programs.check does (one call per column would see another function)
            ys = (program.make()[0] if program.constants else f)(*xs)
            return sum((w * y * y).sum() for w, y in zip(weights, ys)) if ys else 0.0 * xs[0].sum()

        return loss, args

    return make


@settings(max_examples=60, suppress_health_check=list(HealthCheck), deadline=None)
@given(programs(REAL_FEATURES))
def test_random_programs_batched_and_one_direction_hessians_agree(monkeypatch, program):
    make = _scalar(program)
    try:
        _, args = make()
    except Exception:  # noqa: BLE001 - NumPy refuses the program itself
        return
    for argnums in range(len(args)):
        _, batched = compare(None, make, monkeypatch, argnums=argnums, exact=False)
        RANDOM_OUTCOMES.append(batched)


RANDOM_OUTCOMES = []  # whether each random program's batched passes ran to the end
