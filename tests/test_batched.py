"""Batched forward mode (``forward.BATCH``): ``jacobian`` and ``jacfwd`` carry many tangent
directions per pass, and must give what one direction per pass gives (``api.BATCHED =
False``): bit for bit where each direction's arithmetic is the same (elementwise rows,
indexing, assignment, shapes), to rounding where NumPy or BLAS sums a batch in another order
(reductions, matrix products). Whatever the batch does not handle falls back to one direction
per pass, with the same result or the same error."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from scipy import special
from hypothesis import HealthCheck, given, settings

import mutad
from mutad import api
from mutad.engines import forward, session
from mutad.testing import directional_fd
from random_programs import REAL_FEATURES, programs


def _jacobians(transform, f, args, argnums, batched, monkeypatch):
    """``transform(f, argnums)(*args)`` (or its error) with batches on or off, and whether
    every batched pass ran to the end."""
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
            result = transform(f, argnums)(*args)
    except Exception as error:  # noqa: BLE001 - compared below
        result = error
    return result, outcomes


def _jacfwd(f, argnums):
    return mutad.jacfwd(f, argnums=argnums)


def _jacobian(f, argnums):
    return lambda *args: mutad.jacobian(f, *args, argnums=argnums)


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
    return np.allclose(a, b, rtol=1e-12, atol=1e-14 * max(1.0, np.abs(b).max(initial=0.0)),
                       equal_nan=True)


def compare(f, make_args, monkeypatch, argnums=0, exact=True, transform=_jacfwd):
    """The Jacobian batched and one direction per pass, on fresh arguments each, the caller's
    bytes unchanged by either; returns (result, whether the batch ran to the end). ``f`` may
    be None, ``make_args`` then making ``(f, args)`` afresh (a program that changes the
    arrays it closes over is another function at each call)."""
    made = make_args() if f is None else (f, make_args())
    args = made[1]
    before = [a.tobytes() for a in args if isinstance(a, np.ndarray)]
    batched, outcomes = _jacobians(transform, *made, argnums, True, monkeypatch)
    assert [a.tobytes() for a in args if isinstance(a, np.ndarray)] == before
    made = make_args() if f is None else (f, make_args())
    single, _ = _jacobians(transform, *made, argnums, False, monkeypatch)
    assert _same(batched, single, exact), (batched, single)
    return batched, bool(outcomes) and all(o == "batched" for o in outcomes)


# ----------------------------------------------------------------------------------------------
# Programs the batch handles: elementwise (exact) and with sums or products (to rounding)


def _in_place(x):
    y = np.zeros_like(x)
    y[1:] = x[:-1] * x[1:]
    y[0] = np.sin(x[0])
    x *= 2.0
    x[::2] += np.exp(x[1::2])
    np.tanh(y, out=y)
    y[[0, 2, 2]] = x[[1, 3, 5]] ** 2  # repeated index: the last write wins
    y -= x
    return y


def _views(x):
    m = x.reshape(2, 3)
    m.T[1] *= m[:, 0]  # through a transpose
    row = m[1]
    row[::-1] = np.cos(row) + m[0]  # reversed
    x[np.array([True, False, True, False, False, True])] /= 3.0  # a mask
    e = x[4]  # an element: not a view of x
    x[4] = 7.0
    return x * e, m.swapaxes(0, 1)[..., None]


def _shapes(x):
    a = np.stack([x, x[::-1] * 2.0], axis=1)
    b = np.concatenate([x[:2], a.ravel(), np.moveaxis(a, 0, 1).reshape(-1)])
    c = np.expand_dims(b, 0).squeeze().copy()
    c[c > 0.5] = 0.25 * c[c > 0.5]
    return c.astype(np.float64), np.transpose(a)


def _scalars(x):
    s = x[0] * x[1] + 3.0
    x[2] = s
    x[-1] **= 2
    return np.sqrt(np.abs(x) + 1.0), s


def _sums(x):
    m = np.outer(x, x) if False else x[:, None] * x[None, :]
    m[np.diag_indices(len(x))] = 1.0
    return m.sum(axis=0), np.mean(m, axis=1, keepdims=True), m.sum(), np.sum(m * m, axis=(0, 1))


def _products(x):
    a = x.reshape(2, 3)
    b = np.arange(6.0).reshape(3, 2) + 1.0
    c = a @ b
    c @= np.ones((2, 2)) + c  # an in-place product of the value's own result
    v = np.dot(x[:3], x[3:])
    return c, a.T @ x[:2], x[:3] @ a.T, np.dot(a, x[:3]), v * x


def _masked(x):
    # where=: out[mask] = ufunc(*(np.broadcast_to(x, shape)[mask] ...)), views and a gather
    return np.add(x, x * x, where=x > 0.5, out=np.zeros_like(x))


EXACT = [_in_place, _views, _shapes, _scalars, _masked]
ROUNDED = [_sums, _products]


def _arguments():
    return (np.linspace(0.1, 1.2, 6),)


@pytest.mark.parametrize("transform", [_jacfwd, _jacobian], ids=["jacfwd", "jacobian"])
@pytest.mark.parametrize("f", EXACT + ROUNDED, ids=lambda f: f.__name__)
def test_batched_jacobian_is_the_one_direction_jacobian(f, transform, monkeypatch):
    # bit for bit where each direction's arithmetic is the same; to rounding where a sum or
    # a BLAS product of a batch adds in another order
    J, batched = compare(f, _arguments, monkeypatch, exact=f in EXACT, transform=transform)
    assert batched, "the batch should handle every operation of this program"
    assert not isinstance(J, Exception)
    # and it is the derivative: the Jacobian times a direction is the finite difference
    x = _arguments()[0]
    v = np.linspace(-1.0, 1.0, x.size)
    expected = directional_fd(f, (x,), (v,))
    got = J @ v if not isinstance(J, tuple) else tuple(np.asarray(j) @ v for j in J)
    for g, e in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,)):
        assert np.allclose(g, e, rtol=1e-6, atol=1e-8)


def test_batches_in_chunks(monkeypatch):
    # a small budget: several chunks, the same Jacobian
    monkeypatch.setattr(api, "BATCH_BYTES", 3 * 8 * 40)
    x = np.linspace(-1.0, 1.0, 40)
    calls = []
    real = session.jvp_batched
    monkeypatch.setattr(session, "jvp_batched", lambda *a: calls.append(a[3]) or real(*a))
    J = mutad.jacfwd(_in_place)(x.copy())
    assert calls == [3] * 13 + [1]
    monkeypatch.setattr(api, "BATCHED", False)
    assert J.tobytes() == mutad.jacfwd(_in_place)(x.copy()).tobytes()


def test_arguments_that_view_one_buffer(monkeypatch):
    def f(a, b):
        a *= b[0]
        b[1:4] += a[1]
        return np.concatenate([a.ravel(), b]) ** 2

    def make():
        s = np.linspace(0.2, 2.0, 10)
        return s[1:7].reshape(3, 2).T, s[5:]  # overlapping views of one buffer

    for argnums in (0, 1, (0, 1)):
        _, batched = compare(f, make, monkeypatch, argnums=argnums)
        assert batched


def test_float32(monkeypatch):
    _, batched = compare(_in_place, lambda: (np.linspace(0.1, 1.2, 6, dtype=np.float32),),
                         monkeypatch)
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


def _caught(x):
    try:  # a conversion one direction per pass refuses in direction 0 only
        v = complex(x[0] * 1j).real
    except Exception:  # noqa: BLE001
        v = 0.5
    return x * v


def _caught_batch_stop(x):
    try:
        y = np.cumsum(x)  # no batched rule: the pass stops, and the program goes on
    except Exception:  # noqa: BLE001
        y = x * 0.0
    return y + x


def _nested(x):
    return mutad.gradient(lambda z: (z ** 3).sum(), x) * x


FALLBACK = {
    "cumsum": lambda x: np.cumsum(x * x),
    "user rule": lambda x: _doubled(x) * x,
    "scipy": lambda x: scipy.linalg.solve(np.eye(3) + np.outer(x[:3], x[3:]), x[:3]),
    "apart indices": lambda x: x.reshape(1, 2, 3)[[0], :, [1]] * x[0],
    "complex": lambda x: np.abs(np.exp(1j * x)) + x,
    "caught conversion": _caught,
    "caught stop": _caught_batch_stop,
    "nested": _nested,
    "shape set": lambda x: (lambda y: (setattr(y, "shape", (2, 3)), y)[1])(x * 2.0),
    "conversion": lambda x: x * complex(x[0] * 1j).real,
}


@pytest.mark.parametrize("name", FALLBACK)
def test_what_falls_back_agrees(name, monkeypatch):
    f = FALLBACK[name]
    result, batched = compare(f, _arguments, monkeypatch)
    assert not batched  # it stopped, and one direction per pass gave the result
    if name in ("conversion",):
        assert isinstance(result, mutad.MutadError)


def test_nested_jacobian_takes_one_direction_per_pass(monkeypatch):
    # a Jacobian inside a gradient: its values are traced, so it never batches
    def f(x):
        return mutad.jacfwd(lambda z: z * z)(x).sum()

    calls = []
    monkeypatch.setattr(session, "jvp_batched", lambda *a: calls.append(1))
    g = mutad.gradient(f, np.linspace(0.1, 1.0, 4))
    assert calls == [] and np.allclose(g, 2.0)


# ----------------------------------------------------------------------------------------------
# Random in-place programs (tests/random_programs.py): batched and one direction per pass agree


@settings(max_examples=150, suppress_health_check=list(HealthCheck))
@given(programs(REAL_FEATURES))
def test_random_programs_batched_and_one_direction_agree(monkeypatch, program):
    _, args = program.make()
    for argnums in range(len(args)):
        compare(None, program.make, monkeypatch, argnums=argnums, exact=False)


def test_zero_factors_beside_infinite_ones_as_one_direction_per_pass(monkeypatch):
    # sqrt's slope is infinite at 0: one direction per pass masks the zero products there
    # (times), which decides the sign of zeros; the batch takes each direction's own path
    def f(x):
        y = np.sqrt(x) * -1.0
        y[1:] *= -x[:-1]
        return y, np.sqrt(x[::-1]) - x

    def make():
        return (np.array([0.0, 0.5, 0.0, 2.0, 1.5]),)

    J, batched = compare(f, make, monkeypatch)
    assert batched
    assert np.signbit(J[0]).any()


def test_a_direction_along_which_no_operand_moves_gives_numpys_zero(monkeypatch):
    # x0 * x0 along the direction of x1: one pass per direction runs it on constants alone,
    # whose tangent is NumPy's zero, where the sum of the zero products would be -0.0
    def f(x):
        return x[:1] * x[:1], np.sin(x[:1]) * x[1:] * -1.0

    def make():
        return (np.array([-0.5, 1.5]),)

    J, batched = compare(f, make, monkeypatch)
    assert batched
    assert not np.signbit(J[0][0, 1])


def test_an_operand_still_along_some_directions_adds_its_term_as_each_direction(monkeypatch):
    # a (still along x[2]'s direction) times b: its term there is the product of a zero
    # tangent and its partial (+0.0, -0.0, or 0 beside an infinite partial), which decides the
    # sign of the sum with b's term (-0.0): the batch adds it as one direction per pass does,
    # into a new array and in place (the target's own term)
    def f(x):
        a, b = x[:2], x[2:]
        t = a.copy()
        t *= b
        return a * b, t, b / a, np.sqrt(a) * b, np.arctan2(a, b)

    def make():
        return (np.array([-0.0, 0.5, 1.5]),)

    _, batched = compare(f, make, monkeypatch)
    assert batched


def test_a_constant_operands_refused_partial_is_left_out_in_each_direction(monkeypatch):
    # jv's slope in an order v <= -1 is refused, but the order is a constant (made in f): its
    # term is left out in the batch as in each direction alone, into a new array and into
    # out= (the order's memory, and x's)
    def f(x):
        o = np.array([1.5, 2.5]) - 3.0
        t = o.copy()
        special.jv(t, x, out=t)
        u = x.copy()
        special.jv(o, u, out=u)
        return special.jv(o, x) * -1.0, t, u

    x = np.array([0.7, 1.3])
    J, batched = compare(f, lambda: (x.copy(),), monkeypatch)
    assert batched
    v = np.array([-1.5, -0.5])
    slope = np.diag(0.5 * (special.jv(v - 1.0, x) - special.jv(v + 1.0, x)))
    np.testing.assert_allclose(J[0], -slope, rtol=1e-12)
    np.testing.assert_allclose(J[1], slope, rtol=1e-12)
    np.testing.assert_allclose(J[2], slope, rtol=1e-12)


def test_a_partial_that_refuses_where_its_operand_moves_along_some_directions(monkeypatch):
    # jv's slope in an order v <= -1 is refused: along the order's direction one direction per
    # pass refuses it, and so does the batch, whatever the other directions
    def f(x):
        return special.jv(x[:1] - 3.0, x[1:])

    J, _ = compare(f, lambda: (np.array([1.5, 0.7, 1.3]),), monkeypatch)
    assert isinstance(J, mutad.MutadError)
