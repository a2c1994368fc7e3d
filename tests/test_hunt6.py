"""Wrong answers found by a differential hunt over NumPy's writing and dtype-mixing functions
(``np.put``, ``place``, ``putmask``, ``copyto(where=)``, ``ufunc.at``, ``reduceat``,
``accumulate(out=)``, in-place sorts, repeated fancy writes, ``flat``, ``real``/``imag``
views, ``nditer``, strided views, ``dtype=`` and ``out=`` casts, generators, ``errstate``),
in traced, forward, second-order and replayed differentiation; each failed before its fix.
The hunt itself runs at the end, on a fixed seed."""

import warnings

import numpy as np

import mutad

from test_replay_budget import replays
from test_replay_warnings import outcome


# ----------------------------------------------------------------------------------------------
# NumPy's operations on plain values before f's first step (integers f made, NumPy's scalars)
# warn in the traced call; a recording heard only the events after its first step, so a
# replay issued none of the earlier ones (``divide by zero encountered in floor_divide`` of
# ``np.arange(3) // np.zeros(3, int)`` on the first call only). A recording hears them from
# the start, and a replay issues them as the traced call did, at the same lines


def _integers_divided_by_zero_first(x):
    k = np.arange(3) // np.zeros(3, int)
    return (x * k).sum()


def _scalar_overflow_first(x):
    big = np.float64(1e308) * 10
    return (x * 2.0).sum() + 0.0 * float(big > 0)


def test_warnings_of_plain_operations_before_the_first_step_are_issued_again():
    for f in (_integers_divided_by_zero_first, _scalar_overflow_first):
        replaying = mutad.value_and_grad(f, replay=True)
        for k in range(4):
            x = np.arange(3.0) + k
            caller = x.copy()
            assert outcome(replaying, x) == outcome(f, x.copy())
            assert x.tobytes() == caller.tobytes()
        assert replays(replaying) == 3 and not replaying.reasons
