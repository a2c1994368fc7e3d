"""How calls of decorated functions (``mutad/custom.py``) are dispatched: plain, reverse or
forward by the innermost level among the arguments, each call's state its own."""

import threading

import numpy as np
import pytest

import mutad
from mutad.custom import dispatch
from test_replay_budget import replays


def test_a_plain_call_in_another_thread_does_not_reach_a_running_rule():
    # The rule notes what its own call of the function returned; a plain call of the same
    # function in another thread, while the rule runs, must not be taken for it (it was, when
    # the note lived on the shared decorated object: the gradient then failed).
    inside, proceed = threading.Event(), threading.Event()

    @mutad.inplace_adjoint(writes=("a",))
    def scale_(a, s):
        a *= s
        return a

    @scale_.rule
    def _scale_rule(a, s):
        scale_(a, s)
        if threading.current_thread() is main:
            inside.set()
            assert proceed.wait(10)

        def back(da, ds):
            a[...] /= s
            da *= s

        return back

    main = threading.current_thread()

    def elsewhere():
        assert inside.wait(10)
        scale_(np.ones(2), 3.0)
        proceed.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()

    def f(x):
        y = scale_(x, 2.0)
        return (y * y).sum()

    x = np.array([1.0, 2.0])
    before = x.tobytes()
    try:
        (g,) = mutad.gradient(f, x)
    finally:
        proceed.set()
        thread.join(10)
    np.testing.assert_allclose(g, 8.0 * np.array([1.0, 2.0]))
    assert x.tobytes() == before


def test_dispatch_follows_the_innermost_level():
    calls = []

    @mutad.adjoint
    def double(x):
        calls.append("plain")
        return 2.0 * x

    @double.rule
    def _double_rule(x):
        calls.append("reverse")
        return double(x), lambda dy: (2.0 * dy,)

    @double.jvp_rule
    def _double_jvp(tangents, x):
        calls.append("forward")
        return double(x), 2.0 * tangents[0]

    x = np.array([1.0, 3.0])
    assert dispatch(double, (x,), {}).tolist() == [2.0, 6.0] and calls == ["plain"]
    calls.clear()
    mutad.gradient(lambda x: double(x).sum(), x)
    assert calls == ["reverse", "plain"]
    calls.clear()
    mutad.jvp(lambda x: double(x), (x,), (np.ones(2),))
    assert calls == ["forward", "plain"]
    calls.clear()
    # A jvp inside a gradient: the dual is innermost, so forward mode takes the call (its
    # values are traced by the gradient, which records the plain function's operations).
    g = mutad.gradient(lambda x: mutad.jvp(double, (x,), (np.ones(2),))[1].sum(), x)[0]
    assert calls[0] == "forward" and g.tolist() == [0.0, 0.0]
    calls.clear()
    # A gradient inside a jvp: the traced array is innermost, so reverse mode takes it.
    mutad.jvp(lambda x: mutad.gradient(lambda z: (double(z) * z).sum(), x)[0],
              (x,), (np.ones(2),))
    assert calls[0] == "reverse"


def _raising_scale(checkpoint):
    """``scale_(x, limit)``: x[0] *= 2, then ValueError if it passed ``limit``, else
    x[1:] *= 2: with ``limit`` below the doubled x[0] it writes and then raises; with
    ``limit`` negative it raises before writing. An in-place rule with a ``back``."""
    @mutad.inplace_adjoint(writes=("x",))
    def scale_(x, limit):
        if limit < 0:
            raise ValueError("a negative limit")
        x[:1] *= 2.0
        if x[0] > limit:
            raise ValueError("past the limit")
        x[1:] *= 2.0

    @scale_.rule(checkpoint=("x",) if checkpoint else ())
    def _scale_rule(x, limit):
        scale_(x, limit)

        def back(dx, dlimit):
            if not checkpoint:
                x[...] /= 2.0
            dx *= 2.0
        return back

    def f(x, limit):
        u = x * 1.0
        try:
            scale_(u, limit)
        except ValueError:
            pass
        return np.sum(u * u * np.arange(1.0, u.size + 1))

    def uncaught(x):
        u = x * 1.0
        scale_(u, 1.0)
        return np.sum(u)

    return f, uncaught


@pytest.mark.parametrize("checkpoint", [False, True])
def test_an_in_place_function_writing_then_raising_caught_by_f_is_refused(checkpoint):
    """Regression: an in-place function that wrote into its argument and then raised, f
    catching the error and reading the argument: the write went unrecorded, so the gradient
    lacked its derivative ([4, 6] for [8, 6]), and one raising FloatingPointError stopped
    the differentiation with a TypeError. Its rule gave no back for that write: refused, the
    caller's bytes given back."""
    f, uncaught = _raising_scale(checkpoint)
    x = np.array([1.0, 1.5])
    before = x.tobytes()
    assert f(x, 1.0) == 4.0 + 2 * 2.25  # NumPy's: x[0] doubled, x[1] not
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="raised ValueError"):
        mutad.value_and_grad(f)(x, 1.0)
    assert x.tobytes() == before
    # not caught, the function's own error stops f, as without mutad
    with pytest.raises(ValueError, match="past the limit") as raised:
        mutad.gradient(uncaught, x)
    assert not isinstance(raised.value, mutad.MutadError)
    assert x.tobytes() == before


@pytest.mark.parametrize("checkpoint", [False, True])
def test_an_in_place_function_raising_before_writing_caught_by_f(checkpoint):
    """A function that raises before writing leaves its argument as it was: where mutad saved
    it (checkpoint=) it finds it unchanged and differentiates f; where the rule restores, it
    cannot tell, and refuses rather than guess."""
    f, _ = _raising_scale(checkpoint)
    x = np.array([1.0, 1.5])
    before = x.tobytes()
    if checkpoint:
        value, grad = mutad.value_and_grad(f)(x, -1.0)
        assert value == f(x, -1.0)
        np.testing.assert_array_equal(grad, 2 * x * np.arange(1.0, 3.0))
    else:
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="a negative limit"):
            mutad.value_and_grad(f)(x, -1.0)
    assert x.tobytes() == before


def test_an_in_place_function_raising_floating_point_error_caught_by_f_is_refused():
    """Regression: ``np.log(x, out=x)`` inside an in-place function, under
    ``np.errstate(invalid="raise")``, f catching the FloatingPointError: the differentiation
    stopped with a TypeError (a write recorded without its rule's back). Refused, clearly."""
    @mutad.inplace_adjoint(writes=("x",))
    def log_(x):
        np.log(x, out=x)

    @log_.rule
    def _log_rule(x):
        old = x.copy()
        log_(x)

        def back(dx):
            dx /= old
            x[...] = old
        return back

    def f(x):
        u = x * 1.0
        try:
            with np.errstate(invalid="raise"):
                log_(u)
        except FloatingPointError:
            pass
        return np.sum(np.nan_to_num(u, nan=0.25))

    x = np.array([0.5, -1.0, 2.0])
    before = x.tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="FloatingPointError"):
        mutad.value_and_grad(f)(x)
    assert x.tobytes() == before


def test_cholesky_in_place_refusing_an_indefinite_matrix_caught_by_f_is_differentiated():
    """``mutad.linalg.cholesky_`` leaves a matrix that is not positive definite as it was when
    it raises: f adding to the diagonal and factoring again is differentiated (its gradient
    the finite differences'), the caller's bytes given back."""
    def jittered(A):
        A = A * 1.0
        try:
            mutad.linalg.cholesky_(A)
        except np.linalg.LinAlgError:
            A += 3.0 * np.eye(len(A))
            mutad.linalg.cholesky_(A)
        return np.sum(np.tril(A) * np.arange(1.0, 10.0).reshape(3, 3))

    A = np.array([[2.0, 1.0, 3.0], [1.0, 2.0, 1.0], [3.0, 1.0, 2.0]])
    before = A.tobytes()
    mutad.check_grads(jittered, A, symmetric=(0,))
    assert A.tobytes() == before


def _energy_of(x):
    z = np.zeros_like(x)  # (an array the inner differentiation's mode follows)
    z[:] = np.sin(x)
    return np.sum(z ** 2)


_energy = mutad.adjoint(_energy_of)


@_energy.rule
def _energy_rule(x):
    y, (g,) = mutad.value_and_gradient(_energy_of, x)  # of the rule's plain values
    return y, lambda dy: (dy * g,)


@_energy.jvp_rule
def _energy_jvp(tangents, x):
    return mutad.jvp(_energy_of, (x,), (tangents[0],))


def test_a_rule_whose_forward_pass_differentiates_its_values():
    """A custom rule (and a forward rule) whose forward pass calls ``mutad.value_and_gradient``
    (``mutad.jvp``) of its plain values: that differentiation was nested in the one recording
    the rule, and its value came back as a traced array of it, which escaped
    (EscapedTracerError). It is nested in the enclosing differentiations alone: the gradient,
    the replayed one (a replay, asserted), the jvp and the hessian (forward over reverse,
    whose rule is given the forward level's values) are the function's."""
    def f(x):
        return _energy(x * 2.0) * np.sum(x)

    def expected(x):  # d/dx [sum sin(2x)^2 * sum x]
        return 2 * np.sin(4 * x) * np.sum(x) + np.sum(np.sin(2 * x) ** 2)

    x = np.array([0.3, 0.7, 1.1])
    x0 = x.copy()
    np.testing.assert_allclose(mutad.gradient(f, x)[0], expected(x), rtol=1e-13)
    _, tangent = mutad.jvp(f, (x,), (np.ones(3),))
    np.testing.assert_allclose(tangent, np.sum(expected(x)), rtol=1e-13)
    replaying = mutad.grad(f, replay=True)
    replaying(x)
    before = replays(replaying)
    np.testing.assert_allclose(replaying(x * 1.1), expected(x * 1.1), rtol=1e-13)
    assert replays(replaying) == before + 1, replaying.reasons
    h = 1e-6
    numeric = np.array([(expected(x + h * e) - expected(x - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(mutad.hessian(f, x), numeric, rtol=1e-6, atol=1e-8)
    assert x.tobytes() == x0.tobytes()


@mutad.adjoint
def _scaled_by(x, factors):
    return x * np.array(factors())


@_scaled_by.rule
def _scaled_by_rule(x, factors):
    s = np.array(factors())  # a new array of the rule's own
    return x * s, lambda dy: (dy * s, None)


def test_a_rule_that_makes_arrays_of_its_own_returns_them_plain():
    """A rule given a callable that makes the rule's array (``np.array(factors())``): the
    allocation mode made that array a constant of the differentiation recording the rule, so
    the rule's result was a traced array of it, wrapped once more; a replay's next operation
    on it raised KeyError in its recording. Inside a rule, new arrays are constants of the
    enclosing differentiations alone: traced, replayed (asserted) and the Hessian (the rule
    given an outer level's values) are the function's."""
    def f(x, w):
        return np.sum(_scaled_by(x * w, lambda: [2.0] * 3) ** 2)

    x, w = np.array([1.0, 0.5, -2.0]), np.array([2.0, 3.0, 0.25])
    x0, w0 = x.copy(), w.copy()
    expected = (8 * x * w * w, 8 * x * x * w)  # d/d(x, w) of sum (2 x w)^2
    for got, want in zip(mutad.gradient(f, x, w), expected):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    replaying = mutad.grad(f, argnums=(0, 1), replay=True)
    replaying(x, w)
    before = replays(replaying)
    for got, want in zip(replaying(x * 1.5, w), (8 * 1.5 * x * w * w, 8 * 2.25 * x * x * w)):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    assert replays(replaying) == before + 1, replaying.reasons
    np.testing.assert_allclose(mutad.hessian(lambda x: f(x, w), x), np.diag(8 * w * w), rtol=1e-14)
    assert x.tobytes() == x0.tobytes() and w.tobytes() == w0.tobytes()


@mutad.adjoint
def _applied(fn, x):
    return fn(x)


@_applied.rule
def _applied_rule(fn, x):
    h = 1e-6
    return fn(x), lambda dy: (None, (fn(x + h) - fn(x - h)) / (2 * h) * dy)


def test_a_traced_argument_given_by_keyword():
    """``_applied(np.cos, x=x)``, the traced argument given by keyword: the call found no
    differentiation among its positional arguments and raised EscapedTracerError. It is moved
    to the position its parameter names, so the rule's ``back`` gives it its cotangent:
    traced and replayed (asserted) alike, the caller's array unchanged."""
    def f(x):
        return np.sum(_applied(np.cos, x=x * 2.0)) + np.sum(_applied(fn=np.sin, x=x))

    def expected(x):
        return -2.0 * np.sin(2.0 * x) + np.cos(x)

    x = np.array([0.3, 0.7])
    x0 = x.copy()
    np.testing.assert_allclose(mutad.gradient(f, x)[0], expected(x), rtol=1e-8)
    replaying = mutad.grad(f, replay=True)
    replaying(x)
    before = replays(replaying)
    np.testing.assert_allclose(replaying(x * 1.1), expected(x * 1.1), rtol=1e-8)
    assert replays(replaying) == before + 1, replaying.reasons
    assert x.tobytes() == x0.tobytes()
