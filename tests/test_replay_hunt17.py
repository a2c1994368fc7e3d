"""Replays that answered otherwise than tracing on realistic programs called on inputs that
change what the first recording saw: each replaying function's calls are compared with traced
ones, bit for bit, warnings and exceptions included, and the caller's data."""

import warnings

import numpy as np
import pytest

import mutad


def _shown(function, x, action="always"):
    """The warnings Python shows the caller of ``function(x)`` under the filter ``action``
    (category, message, line), and the exception it raised (class, message)."""
    globals().pop("__warningregistry__", None)  # ("default" shows once per place: afresh)
    x = x.copy()
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter(action)
        try:
            function(x)
            raised = None
        except ValueError as error:
            raised = type(error), str(error)
    return [(w.category, str(w.message), w.lineno) for w in shown], raised


# ----------------------------------------------------------------------------------------------
# A recording that raises where it holds values NumPy computed from traced ones (a comparison
# f decides on, an index) is traced again: f runs a second time, as tracing runs it, and that
# run's outcome is the call's. The warnings the first run showed the caller were shown a second
# time by the second: a function that checks its state and raises on a NaN (a solver's
# divergence check) warned twice on every replaying call where tracing warns once. The second
# run's warnings that the first showed are shown once (``replay.ShownAgain``)


def _checked_step(x):
    s = x * 0.0
    if s[0] != s[0]:
        raise ValueError("the state is not finite")
    return s.sum()


def _diverging_iteration(x):
    u = x.copy()
    for k in range(4):
        u = u * u - np.log(x)
        if not np.isfinite(u).all():
            raise ValueError(f"diverged at step {k}")
    return u.sum()


def _heard_then_raised(x):
    with warnings.catch_warnings(record=True) as heard:  # f's own: heard on each run
        warnings.simplefilter("always")
        s = x * 0.0
    s = s * np.log(x)
    if s[0] != s[0]:
        raise ValueError(f"heard {len(heard)}")
    return s.sum()


@pytest.mark.parametrize("action", ["always", "default"])
@pytest.mark.parametrize("f, x", [
    (_checked_step, [np.inf, -1.0]),
    (_diverging_iteration, [-1.0, 2.0, 3.0]),
    (_diverging_iteration, [1e200, 2.0, 3.0]),
    (_heard_then_raised, [np.inf, -1.0])])
def test_a_call_traced_again_shows_its_warnings_once(f, x, action):
    replaying = mutad.value_and_grad(f, replay=True)
    calls = [np.array(x)] * 3 + [np.array([0.5, 0.25, 0.125][:len(x)])] * 2 + [np.array(x)]
    for value in calls:
        with np.errstate(all="warn"):
            got = _shown(replaying, value, action)
            expected = _shown(mutad.value_and_grad(f), value, action)
        assert got == expected
