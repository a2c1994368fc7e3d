"""Replays that answered otherwise than tracing: each replaying function's calls are compared
with traced ones bit for bit."""

import numpy as np
import pytest

import mutad
from test_replay_budget import replays


# ----------------------------------------------------------------------------------------------
# A custom rule's back that starts a differentiation of its own (``mutad.pullback``, ``jvp``)
# ran it inside the replayed reverse pass while the replay's tape was still running: that
# differentiation nested in the replay's, and handed back cotangents of it (traced arrays),
# so that from the second call on the gradients of the program's other operations came back
# zero, or the call raised EscapedTracerError. The replay reverses its program as tracing
# does, its tape no longer running: such programs replay, bit for bit the traced calls.

@mutad.adjoint
def _guarded_sqrt(v):
    return np.sqrt(v)


@_guarded_sqrt.rule
def _guarded_sqrt_rule(v):
    def back(dy):
        moved = dy != 0.0
        at = np.where(moved, v, 0.5)
        pulled = mutad.pullback(np.sqrt, at)[1](np.where(moved, dy, 0.0))[0]
        return (np.where(moved, pulled, 0.0),)
    return np.sqrt(v), back


@mutad.adjoint
def _sine(v):
    return np.sin(v)


@_sine.rule
def _sine_rule(v):
    return np.sin(v), lambda dy: (mutad.pullback(np.sin, v)[1](dy)[0],)


@mutad.adjoint
def _cosine(v):
    return np.cos(v)


@_cosine.rule
def _cosine_rule(v):
    return np.cos(v), lambda dy: (dy * mutad.jvp(np.cos, (v,), (np.ones_like(v),))[1],)


@mutad.inplace_adjoint(writes=("x",))
def _doubled(x):
    x *= 2.0


@_doubled.rule
def _doubled_rule(x):
    before = x.copy()
    _doubled(x)

    def back(dx):
        x[...] = before
        dx[...] = mutad.pullback(lambda a: 2.0 * a, before)[1](dx.copy())[0]
    return back


@mutad.adjoint
def _sine_by_grad(v):
    return np.sin(v)


@_sine_by_grad.rule
def _sine_by_grad_rule(v):
    return np.sin(v), lambda dy: (dy * mutad.grad(lambda a: np.sin(a).sum())(v),)


def _written_then_sine(x):
    u = x.copy()
    u[1:] += 0.5 * u[:-1]
    return (_sine_by_grad(u) * np.cos(x)).sum() + (u ** 2).sum()


def _sines_in_a_loop(x):
    s = 0.0
    for i in range(4):
        s = s + _sine(x[i:i + 1]).sum() * x[i]
    return s


def _inplace(x):
    y = np.sqrt(x)
    _doubled(y)
    return (np.cos(y) * np.arange(1.0, 5.0)).sum()


@pytest.mark.parametrize("f", [
    lambda x: (np.where(np.arange(4) < 3, np.sqrt(x), _guarded_sqrt(x)) * np.arange(1.0, 5.0)).sum(),
    lambda x: (np.where(np.arange(4) < 3, np.cos(x), _sine(x)) * np.arange(1.0, 5.0)).sum(),
    lambda x: (np.where(np.arange(4) < 3, np.sin(x), _cosine(x)) * np.arange(1.0, 5.0)).sum(),
    _inplace,
    _written_then_sine,
    _sines_in_a_loop,
], ids=["pullback-in-back", "pullback-alone", "jvp-in-back", "inplace-rule", "grad-in-back",
        "in-a-loop"])
def test_a_custom_back_that_differentiates_replays(f):
    x = np.array([0.1, 0.2, 0.3, 0.4])
    replaying = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.1, 1.0, 1.0):
        given = x * scale
        before = given.tobytes()
        value, grad = replaying(given)
        assert given.tobytes() == before
        expected_value, expected_grad = mutad.value_and_grad(f)(x * scale)
        assert value == expected_value and grad.tobytes() == expected_grad.tobytes()
    assert replays(replaying) == 3, replaying.reasons
