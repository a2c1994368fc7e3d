"""Programs written as scientists write them, each of which once gave a wrong value or
gradient, traced or replayed: the value is NumPy's, the replayed gradient the traced one bit
for bit, and the caller's arrays come back bit for bit."""

import numpy as np

import mutad
from test_replay import replayed_like_traced


def _checked_like_numpy(f, calls, argnums=0):
    """``replayed_like_traced``, and each value NumPy's bit for bit."""
    replaying = replayed_like_traced(f, calls, argnums=argnums)
    for args in calls:
        copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
        assert np.asarray(replaying(*args)[0]).tobytes() == np.asarray(f(*copies)).tobytes()


def _flat_at_argmax(x):
    y = x.copy()
    y.flat[np.argmax(x)] = -1.0
    y.flat[[np.argmin(x)]] = 2.0
    return (y ** 2 * x).sum() + y.flat[np.argmax(y)]


def test_a_flat_position_computed_from_the_values_is_guarded():
    rng = np.random.default_rng(0)
    _checked_like_numpy(_flat_at_argmax, [(rng.standard_normal((2, 3)),) for _ in range(6)])
