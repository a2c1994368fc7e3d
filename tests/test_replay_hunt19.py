"""Replays that answered otherwise than tracing: each replaying function's calls are compared
with traced ones bit for bit."""

import numpy as np
import pytest

import mutad


# ----------------------------------------------------------------------------------------------
# A custom rule's back that starts a differentiation of its own (``mutad.pullback``, ``jvp``)
# ran it inside the replayed reverse pass: from the second call on, the gradients of the
# program's other operations came back zero. Such a recording is not replayed: every call
# traces, and ``reasons`` says why.

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


def _inplace(x):
    y = np.sqrt(x)
    _doubled(y)
    return (np.cos(y) * np.arange(1.0, 5.0)).sum()


@pytest.mark.parametrize("f", [
    lambda x: (np.where(np.arange(4) < 3, np.sqrt(x), _guarded_sqrt(x)) * np.arange(1.0, 5.0)).sum(),
    lambda x: (np.where(np.arange(4) < 3, np.cos(x), _sine(x)) * np.arange(1.0, 5.0)).sum(),
    lambda x: (np.where(np.arange(4) < 3, np.sin(x), _cosine(x)) * np.arange(1.0, 5.0)).sum(),
    _inplace,
], ids=["pullback-in-back", "pullback-alone", "jvp-in-back", "inplace-rule"])
def test_a_custom_back_that_differentiates_is_traced_on_every_call(f):
    x = np.array([0.1, 0.2, 0.3, 0.4])
    replaying = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 1.1, 1.0, 1.0):
        given = x * scale
        before = given.tobytes()
        value, grad = replaying(given)
        assert given.tobytes() == before
        expected_value, expected_grad = mutad.value_and_grad(f)(x * scale)
        assert value == expected_value and grad.tobytes() == expected_grad.tobytes()
    assert list(replaying.reasons.values()) == ["a custom rule's back starts a differentiation"]
