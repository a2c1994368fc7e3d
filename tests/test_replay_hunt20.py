"""Replays that answered otherwise than tracing: each replaying function's calls are compared
with fresh traced ones bit for bit, the caller's arrays too, and asserted replayed."""

import numpy as np
import pytest
import scipy.stats

import mutad
from test_replay_budget import replays


def _same(a, b):
    """Bit for bit, types and dtypes included, through tuples."""
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype \
        and np.shape(a) == np.shape(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _replayed_as_traced(f, calls, argnums=0, least=1):
    """``f`` on each of ``calls`` (tuples of arguments) through one replaying function, each
    call's value and gradient against a fresh traced call's and the caller's arrays left as
    they were; at least ``least`` calls replayed."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for args in calls:
        given = tuple(a.copy() for a in args)
        got = replaying(*given)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(given, args))
        expected = mutad.value_and_grad(f, argnums=argnums)(*(a.copy() for a in args))
        assert _same(got, expected), (args, got, expected)
    assert replays(replaying) >= least


# ----------------------------------------------------------------------------------------------
# scipy.stats.siegelslopes: the derivatives' repeated medians took, for each point, the other
# points of another abscissa from the plain values of x, which a recording does not see: a
# replay kept the recorded call's pairs, so a later call whose abscissae tie otherwise (or no
# longer tie) got another gradient than tracing's. They are found in the traced differences.

_Y = np.array([0.3, 1.2, 2.0, 0.7, 1.9])
_X = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
_TIED = np.array([0.0, 0.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("method", ["hierarchical", "separate"])
@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_siegelslopes_pairs_are_the_calls_own(method, argnums):
    def fit(y, x):
        result = scipy.stats.siegelslopes(y, x, method=method)
        return 2.0 * result.slope + result.intercept

    calls = [(_Y, _X), (_Y, _X), (_Y, _TIED), (_Y, _X + 0.5), (_Y, _TIED), (_Y, _X)]
    _replayed_as_traced(fit, calls, argnums, least=2)


# ----------------------------------------------------------------------------------------------
# scipy.stats.weightedtau: SciPy's compiled tau was computed of the plain values inside the
# stand-in, which a recording does not see, so a replay kept the recorded call's tau: every
# later call whose orderings differ got the recorded value (and the gradient it scales). It is
# a step of its own, without derivative, that a replay computes again.

@pytest.mark.parametrize("rank", [True, None, False])
def test_weightedtau_is_the_calls_own(rank):
    def scaled(y, x):
        return scipy.stats.weightedtau(x, y, rank=rank).statistic * np.sum(y)

    calls = [(_Y, _X), (_Y, _X), (_Y, _TIED), (_Y[::-1], _X), (_Y, _X[::-1]), (_Y, _X)]
    _replayed_as_traced(scaled, calls, (0, 1), least=2)
