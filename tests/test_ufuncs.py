"""Elementwise ufuncs: every rule, in every way a program can apply it, under both policies."""

import numpy as np
import pytest

import mutad
from cases import BINARY_SCENARIOS, UFUNC_CASES, UNARY_SCENARIOS, case_id, curved, sample_arguments
from mutad.registry import UFUNCS

POLICIES = ("restore", "checkpoint")

KNOWN_CORE_BUGS = {}
"""(ufunc name, scenario name) -> the xfail mark of a core bug recorded in /tmp/core_bugs.md."""


def _case_scenario_pairs():
    for case in UFUNC_CASES:
        scenarios = UNARY_SCENARIOS if case.arity == 1 else BINARY_SCENARIOS
        for scenario in scenarios:
            bug = KNOWN_CORE_BUGS.get((case.name, scenario.name))
            yield pytest.param(case, scenario, id=f"{case.name}-{scenario.name}",
                               marks=() if bug is None else bug)


def _cases_for(scenario_name):
    for case in UFUNC_CASES:
        bug = KNOWN_CORE_BUGS.get((case.name, scenario_name))
        yield pytest.param(case, id=case.name, marks=() if bug is None else bug)


def test_every_differentiable_ufunc_has_a_case():
    assert {case.ufunc for case in UFUNC_CASES} == set(UFUNCS)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("case", "scenario"), list(_case_scenario_pairs()))
def test_ufunc_gradient(case, scenario, policy, rng):
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_grads(scenario.make(case.ufunc), *arguments, policy=policy)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("case", "scenario"), list(_case_scenario_pairs()))
def test_ufunc_second_derivatives(case, scenario, policy, rng):
    # Every row's partials, inverses and checkpoints run on arrays an outer gradient traces.
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_grads(curved(scenario.make(case.ufunc)), *arguments, policy=policy, order=2)


def _with_non_finite_values(x):
    """``x * x`` with +inf above 1 and NaN below -1, for np.nan_to_num to replace."""
    y = np.where(x > 1.0, np.inf, x * x)
    return np.where(x < -1.0, np.nan, y)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("program", [
    lambda x: np.sinc(x) * x,
    lambda x: np.sinc(x[1:]) * np.sinc(x[:-1]),
    lambda x: np.nan_to_num(_with_non_finite_values(x), posinf=5.0) * x,
    lambda x: np.nan_to_num(_with_non_finite_values(x), nan=-2.0, posinf=3.0) + np.sinc(x),
], ids=["sinc", "sinc-product", "nan_to_num", "nan_to_num-nan"])
def test_elementwise_functions_that_are_not_ufuncs_second_derivatives(program, policy):
    # 1e-4 and 0 sit where sinc's derivative switches to its Taylor series. Not at a zero of
    # sinc: there one element of a restored sum is absorbed while the others are not, which the
    # restore policy's norm-wise guard (rules/ufuncs.py, absorption) does not see.
    x = np.array([-1.3, 0.4, 2.2, 1e-4, 0.0, -2.6, 1.5])
    mutad.check_grads(curved(program), x, policy=policy, order=2)


def test_restoring_an_addition_that_absorbed_the_target():
    """1.0 + 1e-17 x is 1.0: subtracting 1.0 back cannot give t, so the write is checkpointed
    (the inverse's growth, 1 + max|o| / max|t|, is far past the tape's limit)."""
    def f(x, c):
        t = x * 1.0
        t *= c
        t += 1.0  # absorbs t: 1.0 + 1e-17 x == 1.0
        return (t * x).sum()

    x = np.array([0.7, -1.3])
    restored = mutad.gradient(f, x, 1e-17)
    checkpointed = mutad.gradient(f, x, 1e-17, policy="checkpoint")
    np.testing.assert_allclose(restored[1], checkpointed[1], rtol=1e-10)


def _leapfrog(q, p, inverse_mass):
    """A well-conditioned in-place program whose every update has an exact inverse, so the
    default policy restores by inversion wherever it judges that safe."""
    step = 0.05
    for _ in range(25):
        p -= 0.5 * step * np.sin(q)
        q += step * inverse_mass * p
        p -= 0.5 * step * np.sin(q)
        q *= 1.01
        p /= 1.01
        np.negative(p, out=p)
        np.subtract(0.1, p, out=p)
    return (q * q).sum() + (p * p * inverse_mass).sum()


def test_default_policy_agrees_with_checkpoint_to_1e_10(rng):
    arguments = (rng.uniform(-1, 1, 8), rng.uniform(-1, 1, 8), rng.uniform(0.5, 2, 8))
    restored = mutad.gradient(_leapfrog, *arguments)
    checkpointed = mutad.gradient(_leapfrog, *arguments, policy="checkpoint")
    for by_restore, by_checkpoint in zip(restored, checkpointed, strict=True):
        np.testing.assert_allclose(by_restore, by_checkpoint, rtol=1e-10, atol=0)


def _out_of_place_sum(ufunc):
    return lambda *xs: ufunc(*xs).sum()


def _in_place_sum(ufunc):
    def f(*xs):
        ufunc(*xs, out=xs[0])
        return xs[0].sum()
    return f


@pytest.mark.parametrize("program", [_out_of_place_sum, _in_place_sum])
@pytest.mark.parametrize("case", UFUNC_CASES, ids=case_id)
def test_float32_arguments_give_float32_gradients(case, program, rng):
    arguments = [domain.sample(rng, (3, 4)).astype(np.float32) for domain in case.domains]
    gradients = mutad.gradient(program(case.ufunc), *arguments)
    for argument, grad in zip(arguments, gradients, strict=True):
        assert grad.dtype == np.float32
        assert grad.shape == argument.shape
    mutad.check_grads(program(case.ufunc), *arguments)


@pytest.mark.parametrize("case", list(_cases_for("python_float")))
def test_python_float_arguments_give_float_gradients(case, rng):
    arguments = [float(domain.sample(rng, ())) for domain in case.domains]
    gradients = mutad.gradient(lambda *xs: case.ufunc(*xs), *arguments)
    assert [type(grad) for grad in gradients] == [float] * case.arity
