"""Whole programs as a scientist writes them, each of which once gave a wrong value or
gradient: the value is NumPy's bit for bit, traced, replayed and in forward mode; the
replayed gradient is the traced one bit for bit; the caller's arrays come back bit for bit."""

from collections import deque

import numpy as np
import pytest
import scipy.linalg

import mutad
from test_replay import replayed_like_traced


def _like_numpy_in_every_mode(f, calls):
    replaying = replayed_like_traced(f, calls)
    for args in calls:
        copies = [np.copy(a) for a in args]
        before = [a.tobytes() for a in args]
        expected = np.asarray(f(*copies)).tobytes()
        assert np.asarray(replaying(*args)[0]).tobytes() == expected
        assert np.asarray(mutad.value_and_gradient(f, *args, argnums=0)[0]).tobytes() == expected
        tangents = (np.ones_like(args[0]),) + (None,) * (len(args) - 1)
        assert np.asarray(mutad.jvp(f, args, tangents)[0]).tobytes() == expected
        assert [a.tobytes() for a in args] == before


def _weighted_polynomial_fit(coef, t, w):
    A = np.vander(t, 3)  # decreasing powers: NumPy's array is C-contiguous
    r = A @ coef - np.cos(t)
    return np.sum(w @ A) + np.sum(A.T @ np.sin(r))


def test_vander_is_laid_out_as_numpys():
    """np.vander's decreasing powers were a reversed view of the increasing ones (strides
    (24, -8) where NumPy's are (24, 8)): a product with them rounded in another order, a value
    NumPy's in all but the last bits, and a replay (where ``t``, an argument, is followed)
    whose gradient was not the traced one (where ``t``, a constant, took NumPy's own call)."""
    rng = np.random.default_rng(0)
    calls = [(rng.standard_normal(3), rng.standard_normal(40), rng.standard_normal(40))
             for _ in range(3)]
    _like_numpy_in_every_mode(_weighted_polynomial_fit, calls)


def _matched_filter(template, signal, weights):
    response = np.correlate(template, signal, "full")  # the longer one second: reversed
    return np.sum(response @ weights)


def test_correlate_with_the_longer_operand_second_is_contiguous_as_numpys():
    """np.correlate(a, v) with v the longer was correlate(v, a) reversed, a view of negative
    stride where NumPy's array is contiguous: a later product rounded in another order."""
    rng = np.random.default_rng(1)
    calls = [(rng.standard_normal(5), rng.standard_normal(40), rng.standard_normal((44, 30)))
             for _ in range(3)]
    _like_numpy_in_every_mode(_matched_filter, calls)


def test_a_factorization_cached_by_an_earlier_differentiation_is_refused_not_a_crash():
    """A module-level cache filled during a traced call holds that call's arrays; a recording
    replay given one (lu_solve of the cached factors) refused it as an array of another
    differentiation while building the step, then indexed the slots it had just emptied: a
    KeyError. It now refuses the recording, and the call is traced, as NumPy's values."""
    cache = {}

    def cached_solve(b, A):
        if A.shape not in cache:
            cache[A.shape] = scipy.linalg.lu_factor(A)
        return np.sum(scipy.linalg.lu_solve(cache[A.shape], b) ** 2)

    rng = np.random.default_rng(2)
    A = 3 * np.eye(4) + rng.random((4, 4))
    calls = [(rng.random(4), A) for _ in range(3)]
    mutad.gradient(cached_solve, *calls[0], argnums=0)
    replayed_like_traced(cached_solve, calls)
    for b, A in calls:
        assert mutad.value_and_grad(cached_solve, replay=True)(b, A)[0] == \
            np.sum(scipy.linalg.lu_solve(scipy.linalg.lu_factor(A), b) ** 2)


def _cached_factor_solve(factor, solve):
    """A program that factors its matrix once, into a module-level cache, and solves with the
    cached factor on every later call."""
    cache = {}

    def f(b, A):
        if A.shape not in cache:
            cache[A.shape] = factor(A)
        return np.sum(solve(cache[A.shape], b) ** 2)

    return f


_FACTOR_SOLVES = {
    "lu": (scipy.linalg.lu_factor, scipy.linalg.lu_solve),
    "cho": (lambda A: scipy.linalg.cho_factor(A @ A.T), scipy.linalg.cho_solve),
    "triangular": (lambda A: np.triu(A) + 0.0, scipy.linalg.solve_triangular),
    "matmul": (lambda A: A * 2.0, np.matmul),
}


@pytest.mark.parametrize("name", sorted(_FACTOR_SOLVES))
def test_a_factor_cached_by_an_earlier_gradient_is_a_constant_in_forward_mode(name):
    """The cache filled by a gradient holds that tape's arrays: a later jvp passed them, as
    values of another level, to the factorization's forward rule, whose solve then recorded on
    the ended tape (lu_solve: an EscapedTracerError). Forward mode now takes such an ended
    constant as the plain array it holds, as reverse mode does."""
    f = _cached_factor_solve(*_FACTOR_SOLVES[name])
    rng = np.random.default_rng(3)
    b, A = rng.random(4), 3 * np.eye(4) + rng.random((4, 4))
    before = (b.tobytes(), A.tobytes())
    gradient = mutad.gradient(f, b, A, argnums=0)
    v = rng.standard_normal(4)
    y, dy = mutad.jvp(f, (b, A), (v, None))
    assert (b.tobytes(), A.tobytes()) == before
    factor, solve = _FACTOR_SOLVES[name]
    assert np.asarray(y).tobytes() == np.sum(solve(factor(A), b) ** 2).tobytes()
    h = 1e-6
    assert dy == pytest.approx((f(b + h * v, A) - f(b - h * v, A)) / (2 * h), rel=1e-6)
    assert dy == pytest.approx(gradient @ v, rel=1e-12)
    assert mutad.jvp(f, (b, A), (v, None))[1] == dy


class _BatchNorm:
    """A layer as a module of a network: running statistics kept on the object."""

    def __init__(self, n):
        self.running_mean = np.zeros(n)
        self.momentum = 0.1

    def __call__(self, x, gamma):
        mu = x.mean(axis=0)
        self.running_mean *= 1 - self.momentum
        self.running_mean += self.momentum * mu
        return gamma * (x - mu)


def test_jvp_writes_what_an_undifferentiated_argument_gives_into_state_as_numpy():
    """jvp gives an argument without a tangent a zero one; the running mean of such an
    argument, added into an object's state (``+=``, ``out=``) that the jvp does not follow,
    raised UntracedWriteError where value_and_grad writes it as NumPy does. A value whose
    tangent is zero is a constant along the direction: it is written, and the state ends as
    NumPy's."""
    layer = _BatchNorm(3)

    def loss(gamma, X):
        return np.sum(layer(X, gamma) ** 3)

    rng = np.random.default_rng(3)
    gamma, X, v = rng.random(3) + 0.5, rng.standard_normal((6, 3)), rng.standard_normal(3)
    before = [gamma.tobytes(), X.tobytes()]
    expected = loss(gamma, X)
    state = layer.running_mean.copy()
    layer.running_mean[:] = 0.0
    value, tangent = mutad.jvp(loss, (gamma, X), (v, None))
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    assert layer.running_mean.tobytes() == state.tobytes()
    layer.running_mean[:] = 0.0
    assert np.isclose(tangent, mutad.gradient(loss, gamma, X, argnums=0) @ v, rtol=1e-12)
    assert [gamma.tobytes(), X.tobytes()] == before

    held = deque([np.zeros(3)])  # an object mutad does not look into

    def traced_into_state(gamma, X):
        state = held[0]
        state += X[0]  # no derivative flows: written
        state += gamma  # a derivative flows: refused
        return np.sum(X * gamma)

    with pytest.raises(mutad.errors.UntracedWriteError):
        mutad.jvp(traced_into_state, (gamma, X), (v, None))


@mutad.inplace_adjoint(writes=("a",))
def _accumulate_(a, b):
    a += b
    return a


@_accumulate_.jvp_rule
def _accumulate_forward(tangents, a, b):
    da, db = tangents
    _accumulate_(a, b)
    if db is not None:
        da += db
    return a


@pytest.mark.parametrize("write", [
    lambda state, v: np.multiply(v, 2.0, out=state),
    lambda state, v: np.add(state, v, out=state),
    lambda state, v: np.copyto(state, v),
    lambda state, v: np.add.at(state, [0, 0, 2], v),
    lambda state, v: _accumulate_(state, v),
], ids=["ufunc-out", "augmented", "copyto", "ufunc-at", "inplace-rule"])
def test_jvp_writes_constants_into_arrays_it_does_not_follow(write):
    """Each route of a write into an array held where mutad does not look (a deque): values
    made from an argument jvp was given no tangent for are written as NumPy writes them (they
    raised UntracedWriteError), values a derivative flows through are still refused."""
    held = deque([np.zeros(3)])

    def f(w, X):
        write(held[0], X[0] * 2)
        return np.sum(w * X[1])

    X = np.arange(6.0).reshape(2, 3)
    expected = np.zeros(3)
    write(expected, X[0] * 2)
    before = X.tobytes()
    assert mutad.jvp(f, (np.ones(3), X), (np.ones(3), None)) == (12.0, 12.0)
    assert held[0].tobytes() == expected.tobytes() and X.tobytes() == before

    def g(w, X):
        write(held[0], w)
        return np.sum(w * X[1])

    with pytest.raises(mutad.errors.UntracedWriteError):
        mutad.jvp(g, (np.ones(3), X), (np.ones(3), None))


@pytest.mark.parametrize("differentiate", [
    lambda f, w, X: mutad.value_and_grad(f)(w, X),
    lambda f, w, X: mutad.jvp(f, (w, X), (np.ones_like(w), None)),
], ids=["reverse", "forward"])
def test_a_loss_kept_in_a_history_list_is_numpys_value_after_the_call(differentiate):
    """A training loop's habit: the loss appended to a module-level list. It was left there
    as a traced value, refused as escaped when converted after the differentiation; the list
    holds NumPy's value of the loss now, as NumPy's run of f leaves it."""
    history = []

    def f(w, X):
        loss = np.sum((X @ w) ** 2)
        history.append(loss)
        return loss

    w, X = np.ones(2), np.arange(6.0).reshape(3, 2)
    differentiate(f, w, X)
    expected = np.sum((X @ w) ** 2)
    assert len(history) == 1 and type(history[0]) is type(expected)
    assert history[0] == expected and float(history[0]) == float(expected)
