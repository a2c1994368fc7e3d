"""Second derivatives through mutad.scipy.special and mutad.scipy.signal: nested reverse mode
(a gradient of a function that calls mutad.gradient) and reverse over forward (hvp), against
finite differences of the gradient, for every case of tests/test_scipy.py's tables."""

import numpy as np
import pytest

import mutad
from cases import curved
from mutad.scipy import signal, special
from test_scipy import SIGNAL_CASES, SPECIAL_CASES, case_id

POLICIES = ("restore", "checkpoint")


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", SPECIAL_CASES + SIGNAL_CASES, ids=case_id)
def test_second_derivatives(case, policy, rng):
    # The rules and their pullbacks call the mutad.scipy wrappers, never SciPy directly, so an
    # outer gradient differentiates them again.
    mutad.check_grads(curved(case.function), *case.sample(rng), policy=policy, order=2)


def test_polygamma_second_derivatives(rng):
    x = rng.uniform(0.5, 3.0, 4)
    for n in (0, 1, 2):
        mutad.check_grads(curved(lambda x: special.polygamma(n, x)), x, order=2)


def test_filter_inside_an_inner_gradient_with_in_place_updates(rng):
    # The inner gradient filters a signal updated in place; the outer one differentiates the
    # inner gradient through lfilter's pullback, with the final state returned too.
    def inner(b, x, zi):
        x[1:] += 0.5 * x[:-1]
        y, zf = signal.lfilter(b, [1.0, -0.4, 0.1], x, -1, zi)
        return (np.sin(y) * y).sum() + (zf * zf).sum() + special.logsumexp(y)

    def outer(b, x, zi):
        db, dx, dzi = mutad.gradient(inner, b, x, zi)
        return (db * db).sum() + np.sin(dx).sum() + dzi.sum()

    b, x, zi = rng.standard_normal(3), rng.standard_normal(7), rng.standard_normal(2)
    before = [a.tobytes() for a in (b, x, zi)]
    for policy in POLICIES:
        mutad.check_grads(outer, b, x, zi, policy=policy)
    mutad.check_grads(inner, b, x, zi, order=2)
    assert [a.tobytes() for a in (b, x, zi)] == before
