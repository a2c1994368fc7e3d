"""Elementwise ufuncs: every rule, in every way a program can apply it, under both policies."""

import importlib
import threading
import warnings

import numpy as np
import pytest
import scipy.special

import mutad
from cases import (
    _lambertw,
    COMPLEX_UFUNC_CASES,
    UFUNC_CASES,
    case_id,
    curved,
    runs_on_numpy,
    sample_arguments,
    scenarios_for,
)
from mutad.core.registry import RULE_MODULES, NoClosedForm, table

POLICIES = ("restore", "checkpoint")


def _case_scenario_pairs():
    for case in UFUNC_CASES:
        for scenario in scenarios_for(case):
            yield pytest.param(case, scenario, id=f"{case.id}-{scenario.name}")


COMPLEX_VALUED = {scipy.special.wofz: ((), ()), _lambertw: ((), (0, 1e-8)),
                  scipy.special.hankel1: ((1.5,), ()), scipy.special.hankel2: ((0.5,), ())}
"""Ufuncs whose values are complex for real arguments too, with the settings before and after
the argument: their cases are complex ones, and real arguments are checked on their own
(test_a_complex_valued_ufunc_of_real_arguments)."""


def differentiable_ufuncs():
    """The elementwise rows with a partial derivative: a ufunc with none (zeta(x)'s) is
    declared only to refuse its argument. Every rule module imported first: a differentiation
    imports them as it starts, and this test may run before any has."""
    for module in set(RULE_MODULES.values()):
        importlib.import_module(module)
    return {ufunc for ufunc, rule in table("elementwise").items()
            if not all(type(partial) is NoClosedForm for partial in rule.partials)}


def test_every_differentiable_ufunc_has_a_case():
    assert ({case.function for case in UFUNC_CASES} | set(COMPLEX_VALUED)
            == differentiable_ufuncs())
    assert set(COMPLEX_VALUED) <= {case.function for case in COMPLEX_UFUNC_CASES}


def test_a_complex_valued_ufunc_of_real_arguments():
    x = np.array([0.3, -1.2, 2.5])
    for function, (before, after) in COMPLEX_VALUED.items():
        def f(x, function=function, before=before, after=after):
            w = function(*before, x, *after)
            return (w.real * w.imag).sum() + (np.abs(w) ** 2).sum()

        assert mutad.value_and_grad(f)(x)[0] == f(x)
        mutad.check_grads(f, x, order=2)


@pytest.mark.parametrize("policy", POLICIES)
def test_lambertw_of_real_arguments(policy):
    # SciPy's function (its k as an integer array) on both real branches: W_0 on (-1/e, inf),
    # through 0 (where W' = 1), and W_-1 on (-1/e, 0)
    def principal(x):
        w = scipy.special.lambertw(x)
        w *= x[0]
        return np.sum(w.real ** 2)

    def lower(x):
        return np.sum(scipy.special.lambertw(-np.exp(-1.5 - x * x), k=-1).real)

    x = np.array([0.3, -0.2, 0.0, 5.0])
    copy = x.copy()
    for f in (principal, lower):
        value, gradient = mutad.value_and_grad(f, policy=policy)(copy)
        assert value == f(x.copy())
        mutad.check_grads(f, copy, policy=policy, order=2)
        mutad.check_jvp(f, copy)
    assert np.array_equal(copy, x)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("case", "scenario"), list(_case_scenario_pairs()))
def test_ufunc_gradient(case, scenario, policy, rng):
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_grads(scenario.make(case.program), *arguments, policy=policy)


OWN_OPERAND_WRITES = {"in_place", "in_place_first", "in_place_second", "self_in_place"}
"""The scenarios that write a row's result over its own operand: where the two policies differ
for the row itself (restore undoes the write by the row's inverse, checkpoint copies it back)."""


def _second_order_runs(pairs):
    """The second-order runs of ``pairs`` (each a case in a scenario): a covering design rather
    than every pair under every policy, which the first-order runs check. A pair whose scenario
    writes the row's result over its own operand runs under both policies; any other pair under
    one, alternating along a case's scenarios and along a scenario's cases, so that every row
    meets both policies at second order, and each policy meets about half the rows in every
    scenario (the policy there changes only how the core saves the program's other writes).
    A row that refuses its second derivative (``second=False``) meets only its first scenario
    and those that write over its operand: the refusal is the row's, whatever the scenario, and
    what it leaves of the caller's arrays the core's, which every scenario checks in the rows
    that differentiate."""
    index = {}
    for param in pairs:
        case, scenario = param.values
        row = index.setdefault(id(case), len(index))
        column = scenarios_for(case).index(scenario)
        if not case.second and column and scenario.name not in OWN_OPERAND_WRITES:
            continue
        policies = (POLICIES if scenario.name in OWN_OPERAND_WRITES
                    else (POLICIES[(row + column) % 2],))
        for policy in policies:
            yield pytest.param(case, scenario, policy, id=f"{param.id}-{policy}")


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "scenario", "policy"),
                         list(_second_order_runs(_case_scenario_pairs())))
def test_ufunc_second_derivatives(case, scenario, policy, rng):
    # Every row's partials, inverses and checkpoints run on arrays an outer gradient traces.
    arguments = sample_arguments(case, scenario, rng)
    f = curved(scenario.make(case.program))
    if case.second:
        mutad.check_grads(f, *arguments, policy=policy, order=2)
        return
    before = [np.copy(a).tobytes() for a in arguments]
    with pytest.raises(mutad.MutadError, match="second derivative"):
        mutad.check_grads(f, *arguments, policy=policy, order=2)
    assert [np.copy(a).tobytes() for a in arguments] == before


@pytest.mark.parametrize(("case", "scenario"), list(_case_scenario_pairs()))
def test_ufunc_jvp(case, scenario, rng):
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_jvp(scenario.make(case.program), *arguments)


# Complex rows (cases.COMPLEX_UFUNC_CASES) in the same scenarios: complex directions and
# cotangents, both modes at order 1, and at order 2, under both policies.


def _complex_case_scenario_pairs():
    for case in COMPLEX_UFUNC_CASES:
        for scenario in scenarios_for(case):
            if runs_on_numpy(case, scenario, np.random.default_rng(0)):
                yield pytest.param(case, scenario, id=f"{case.id}-{scenario.name}")


COMPLEX_PAIRS = list(_complex_case_scenario_pairs())

COMPLEX_UFUNCS_LEFT_OUT = {
    # NumPy/SciPy compute them for complex values; mutad refuses them there (see
    # cases.COMPLEX_UFUNC_CASES): a row declared for complex values goes in that table instead
    scipy.special.ive, scipy.special.jve, scipy.special.yve, scipy.special.rgamma, scipy.special.psi, scipy.special.gamma,
    scipy.special.loggamma, scipy.special.erfcx, scipy.special.exp1, scipy.special.expi,
    # SciPy computes these for complex values too; their rows are for real ones
    scipy.special.spence, scipy.special.hyp2f1, scipy.special.eval_legendre,
    scipy.special.eval_chebyt, scipy.special.eval_chebyu, scipy.special.eval_chebyc,
    scipy.special.eval_chebys, scipy.special.eval_sh_legendre, scipy.special.eval_sh_chebyt,
    scipy.special.eval_sh_chebyu, scipy.special.eval_laguerre, scipy.special.eval_gegenbauer,
    scipy.special.eval_genlaguerre, scipy.special.eval_jacobi, scipy.special._ufuncs._zeta,
    scipy.special.hyp1f1, scipy.special._ufuncs._riemann_zeta, scipy.special.hyp0f1,
}


def test_every_complex_ufunc_has_a_complex_case():
    import mutad.scipy.special  # noqa: F401 - registers the rows of scipy.special

    takes_complex = {u for u in differentiable_ufuncs() if isinstance(u, np.ufunc)
                     and any("D" in t.split("->")[0] for t in u.types)}
    covered = {case.function for case in COMPLEX_UFUNC_CASES}
    assert takes_complex - covered == COMPLEX_UFUNCS_LEFT_OUT
    assert len({case.function for case, _ in (p.values for p in COMPLEX_PAIRS)}) == len(covered)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("case", "scenario"), COMPLEX_PAIRS)
def test_complex_ufunc_gradient(case, scenario, policy, rng):
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_grads(scenario.make(case.program), *arguments, policy=policy,
                      modes=("rev", "fwd"))


PUBLIC_NAMES = {scipy.special._ufuncs._riemann_zeta: "scipy.special.zeta"}


# scipy.special.zeta takes complex exponents only, which it does not differentiate at all
@pytest.mark.parametrize("ufunc", sorted(COMPLEX_UFUNCS_LEFT_OUT - {scipy.special._ufuncs._zeta},
                                         key=lambda u: u.__name__),
                         ids=lambda u: u.__name__)
def test_a_row_not_declared_for_complex_values_refuses_them(ufunc):
    """Regression: scipy.special.ive's row (not complex-differentiable) gave a wrong gradient
    for complex arguments, and rgamma's and psi's crashed: rows take complex values only where
    declared."""
    z = np.array([1.2 + 0.5j, 0.8 - 0.3j])
    f = (lambda z: ufunc(*[1.3] * (ufunc.nin - 1), z))
    before = z.tobytes()
    name = PUBLIC_NAMES.get(ufunc, ufunc.__name__)  # the refusal names the public function
    with pytest.raises(mutad.errors.ComplexInputError, match=name):
        mutad.gradient(lambda z: np.abs(f(z)).sum(), z)
    with pytest.raises(mutad.errors.ComplexInputError, match=name):
        mutad.jvp(f, (z,), (np.ones_like(z),))
    assert z.tobytes() == before


@pytest.mark.parametrize("f", [
    lambda z: np.divmod(z, 2.0)[1], lambda z: np.divmod(2.0, z)[0], lambda z: divmod(z, 2.0)[1],
    lambda z: divmod(2.0, z)[0], lambda z: np.modf(z)[0], lambda z: np.frexp(z)[0],
], ids=["divmod", "divmod-right", "builtin-divmod", "builtin-divmod-right", "modf", "frexp"])
def test_a_ufunc_of_two_outputs_with_no_complex_loop_raises_numpys_type_error(f):
    """Regression: np.divmod, np.modf and np.frexp of complex values raised ComplexInputError
    (mutad has no complex rule), and divmod(z, 2.0) np.floor_divide's TypeError, where NumPy
    has no loop for them at all and raises its own TypeError ("ufunc 'divmod' not
    supported ..."): NumPy's error, in every mode."""
    z = np.array([1.2 + 0.5j, 0.8 - 0.3j])
    before = z.tobytes()
    with pytest.raises(TypeError) as expected:
        f(z)
    for run in (lambda: mutad.gradient(lambda z: np.abs(f(z)).sum(), z),
                lambda: mutad.value_and_grad(lambda z: np.abs(f(z)).sum(), replay=True)(z),
                lambda: mutad.jvp(f, (z,), (np.ones_like(z),))):
        with pytest.raises(TypeError) as raised:
            run()
        assert type(raised.value) is type(expected.value)
        assert str(raised.value) == str(expected.value)
    assert z.tobytes() == before


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "scenario", "policy"), list(_second_order_runs(COMPLEX_PAIRS)))
def test_complex_ufunc_second_derivatives(case, scenario, policy, rng):
    arguments = sample_arguments(case, scenario, rng)
    mutad.check_grads(curved(scenario.make(case.program), complex_outputs=True), *arguments,
                      policy=policy, order=2)


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
    lambda x: np.i0(x) * x,
], ids=["sinc", "sinc-product", "nan_to_num", "nan_to_num-nan", "i0"])
def test_elementwise_functions_that_are_not_ufuncs_second_derivatives(program, policy):
    # 1e-4 and 0 sit where sinc's derivative switches to its Taylor series.
    x = np.array([-1.3, 0.4, 2.2, 1e-4, 0.0, -2.6, 1.5])
    mutad.check_grads(curved(program), x, policy=policy, order=2)


def test_i0_and_sort_complex_are_numpys_in_both_modes():
    """Regression: np.i0 and np.sort_complex (NumPy's Python functions, not ufuncs) were
    refused as functions without a rule. Values NumPy's bit for bit, float32 included (i0
    keeps it; sort_complex casts real values to complex128 as NumPy does)."""
    x = np.array([-1.3, 0.4, 2.2, 0.9, 0.1, -2.6, 1.5])  # apart: no order changes within a step
    programs = [lambda x: np.i0(x) * x,
                lambda x: np.abs(np.sort_complex(x[:3] + 1j * x[4:]) * np.array([1, 3j, 2])) ** 2,
                lambda x: np.sort_complex(x).real * np.arange(7.0),
                lambda x: np.sort_complex(x[::-1] * (1 + 2j)).imag]
    for program in programs:
        mutad.check_grads(lambda x: program(x).sum(), x)
        mutad.check_jvp(program, x)
        for dtype in (np.float64, np.float32):
            value = mutad.value_and_grad(lambda x: program(x.astype(dtype)).sum())(x)[0]
            assert value == program(x.astype(dtype)).sum()


@pytest.mark.parametrize("policy", POLICIES)
def test_second_derivatives_at_zeros_of_sinc(policy):
    # At 1 and -2 one element of a sum the reverse pass restores is absorbed by the others'
    # magnitude while they are not: that element is saved, not restored.
    x = np.array([-1.3, 0.4, 1.0, -2.0, 1.5])
    mutad.check_grads(curved(lambda x: np.sinc(x) * x), x, policy=policy, order=2)



@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("power", [np.power, np.float_power])
def test_a_zero_power_of_a_zero_base_has_slope_zero(power, policy):
    """0**0 is 1, a constant in the base: its derivative is 0, not 0 * inf = NaN, and so is the
    second derivative of x**1 at 0 (its first derivative is x**0)."""
    exponents = np.array([0.0, 1.0, 2.0, 3.0])

    def f(x):
        return (power(x, exponents) * np.array([1.0, 2.0, 3.0, 4.0])).sum()

    def f_in_place(x):
        z = x * np.ones(4)
        power(z, exponents, out=z)
        return (z * np.array([1.0, 2.0, 3.0, 4.0])).sum()

    for program in (f, f_in_place):
        with np.errstate(all="ignore"):
            assert mutad.gradient(program, 0.0, policy=policy) == (2.0,)
            assert mutad.hessian(program, 0.0, policy=policy) == 6.0
            first = mutad.grad(program, policy=policy)
            assert mutad.gradient(first, 0.0, policy=policy) == (6.0,)
            assert mutad.jvp(first, (0.0,), (1.0,))[1] == 6.0
    mutad.check_grads(lambda x: power(x, exponents), np.array([0.5, 1.5, 0.8, 2.0]),
                      policy=policy, order=2)

def test_restoring_an_addition_that_absorbed_the_target():
    """1.0 + 1e-17 x is 1.0: subtracting 1.0 back cannot give t, so those elements are saved."""
    def f(x, c):
        t = x * 1.0
        t *= c
        t += 1.0  # absorbs t: 1.0 + 1e-17 x == 1.0
        return (t * x).sum()

    x = np.array([0.7, -1.3])
    restored = mutad.gradient(f, x, 1e-17)
    checkpointed = mutad.gradient(f, x, 1e-17, policy="checkpoint")
    np.testing.assert_allclose(restored[1], checkpointed[1], rtol=1e-10)


def test_a_scaling_then_an_absorbed_term_is_not_undone_past_its_accuracy():
    """Regression: undoing ``u *= decay`` counted as no growth of the error already in u, and
    undoing ``u -= o`` as growth 1 + max|o| / max|u|, norm-wise. The elements the decay made
    small absorb the other term's rounding, and undoing the decay scales it back up: after 300
    steps the restored state was garbage and the gradient NaN. Scaling by an array now grows
    the error by max|decay| / min|decay|, and the chain is checkpointed in time."""
    rng = np.random.default_rng(3)
    n = 64
    mixing = rng.standard_normal((n, n)) / n
    decay = np.exp(-np.linspace(0.0, 4.0, n))
    weights = np.exp(np.linspace(0.0, 8.0, n))

    def f(u0, scale):
        u = u0.copy()
        for _ in range(300):
            u -= 1e-2 * scale * (mixing @ (u * u * u))
            u *= decay
        return np.sum(u * u * weights)

    u0 = rng.standard_normal(n)
    restored = mutad.gradient(f, u0, 1.0)
    checkpointed = mutad.gradient(f, u0, 1.0, policy="checkpoint")
    for a, b in zip(restored, checkpointed, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9)


@pytest.mark.parametrize("scale", [np.arange(2), np.arange(1, 3) + 1j, np.array([2.0, 0.0])],
                         ids=["integers", "complex", "a zero"])
def test_the_growth_of_a_scaling_by_integers_complex_numbers_and_zeros(scale):
    """Regression: the growth of ``y *= s`` took its minimum with a float initial value, which
    an integer ``s`` refused (OverflowError)."""
    def f(x):
        y = x * 1.0
        y *= scale
        y *= scale
        return np.sum(np.abs(y))

    mutad.check_grads(f, np.array([1.0 + 0.5j, 2.0]) if np.iscomplexobj(scale)
                      else np.array([1.0, 2.0]), order=2)


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
    gradients = mutad.gradient(program(case.program), *arguments)
    for argument, grad in zip(arguments, gradients, strict=True):
        assert grad.dtype == np.float32
        assert grad.shape == argument.shape
    mutad.check_grads(program(case.program), *arguments)


@pytest.mark.parametrize("case", UFUNC_CASES, ids=case_id)
def test_python_float_arguments_give_float_gradients(case, rng):
    arguments = [float(domain.sample(rng, ())) for domain in case.domains]
    gradients = mutad.gradient(lambda *xs: case.program(*xs), *arguments)
    assert [type(grad) for grad in gradients] == [float] * case.arity


# Decisions: which operand won, a sign at 0, a quotient, are decided when the ufunc runs ------

from decisions import check_decision_kept, then_disturbed  # noqa: E402

VALUES = np.array([0.7, 0.2, 0.4, -0.7, -0.3, 0.8])
"""None of these is restored bit for bit by inverting ``decisions.disturb``."""
AT_ZERO = np.array([0.0, 0.7, -0.3, 0.0, 0.2])
SAME = VALUES.copy()  # a constant equal to VALUES: ties between operands
SHIFTED = np.array([0.2, 0.7, -0.3, -0.7, 0.4, 0.2])


def _in_place(ufunc, other):
    """``z = ufunc(z, other, out=z)`` on a copy of x: the decision is taken from the inputs as
    they were before the write."""
    def operation(x):
        z = x * 1.0
        z = ufunc(z, other(x), out=z)
        return z
    operation.__name__ = f"{ufunc.__name__}_in_place"
    return operation


def _augmented(ufunc, other):
    """``z[...] = ufunc(z, other)`` and an out= view: the slice and assignment forms."""
    def operation(x):
        z = x * 1.0
        z[1:] = ufunc(z[1:], other(x)[1:])
        ufunc(z[:2], other(x)[:2], out=z[:2])
        return z
    operation.__name__ = f"{ufunc.__name__}_into_slices"
    return operation


UFUNC_DECISIONS = [
    # (name, operation of x, x, differentiable at x)
    ("absolute-at-0", np.absolute, AT_ZERO, False),
    ("absolute", np.absolute, VALUES, True),
    ("fabs-at-0", np.fabs, AT_ZERO, False),
    ("abs-operator-at-0", abs, AT_ZERO, False),
    ("absolute-out", lambda x: np.absolute(x, out=np.zeros_like(x)), AT_ZERO, False),
    ("absolute-in-place", lambda x: np.absolute(x * 1.0, out=x), AT_ZERO, False),
    ("sign-times-x-at-0", lambda x: np.sign(x) * x, AT_ZERO, False),
    ("hypot-at-origin", lambda x: np.hypot(x, np.where(AT_ZERO == 0, 0.0, 0.3)), AT_ZERO, False),
    ("hypot", lambda x: np.hypot(x, SHIFTED[:5]), AT_ZERO + 0.1, True),
    ("power-zero-base", lambda x: np.power(x[:2], x[2:]), np.array([0.0, 0.7, 2.0, 1.3]), False),
    ("remainder-whole", lambda x: np.remainder(np.array([0.2, 0.4, 0.8]), x[:3]), VALUES, False),
    ("remainder", lambda x: np.remainder(x, 0.25), VALUES, True),
    ("fmod-whole", lambda x: np.fmod(np.array([0.2, 0.4, 0.8]), x[:3]), VALUES, False),
    ("remainder-operator", lambda x: np.array([0.2, 0.4, 0.8]) % x[:3], VALUES, False),
    ("float_power-zero-base", lambda x: np.float_power(x[:2], x[2:]), np.array([0.0, 0.7, 2.0, 1.3]),
     False),
    ("copysign-at-0", lambda x: np.copysign(x, x[::-1]), AT_ZERO, False),
    ("rgamma-at-a-pole", lambda x: scipy.special.rgamma(x - np.where(AT_ZERO == 0, 0.0, 0.5)),
     AT_ZERO, False),
    ("xlogy-at-0", lambda x: scipy.special.xlogy(x, np.where(AT_ZERO == 0, 0.0, 0.5)), AT_ZERO,
     False),
    ("xlog1py-at-0", lambda x: scipy.special.xlog1py(x, np.where(AT_ZERO == 0, -1.0, 0.5)),
     AT_ZERO, False),
    ("rel_entr-at-0", lambda x: scipy.special.rel_entr(x * x, np.where(AT_ZERO == 0, 0.0, 0.5)),
     AT_ZERO, False),
    ("kl_div-at-0", lambda x: scipy.special.kl_div(x * x, np.where(AT_ZERO == 0, 0.0, 0.5)),
     AT_ZERO, False),
    ("huber-at-the-joint", lambda x: scipy.special.huber(0.5, x + 0.5), AT_ZERO, False),
    ("i0e-at-0", lambda x: scipy.special.i0e(x), AT_ZERO, False),
    ("i1e-at-0", lambda x: scipy.special.i1e(x), AT_ZERO, False),
    ("ive-at-0", lambda x: scipy.special.ive(0.0, x), AT_ZERO, False),
    # ζ(x) and ζ(x) - 1 decide where x = +inf (slope 0): above the pole elsewhere
    ("_riemann_zeta-at-infinity",
     lambda x: scipy.special.zeta(x + np.where(AT_ZERO == 0, np.inf, 1.5)), AT_ZERO, False),
    ("zetac-at-infinity",
     lambda x: scipy.special.zetac(x + np.where(AT_ZERO == 0, np.inf, 1.5)), AT_ZERO, False),
]
for _ufunc in (np.maximum, np.minimum, np.fmax, np.fmin):
    _name = _ufunc.__name__
    UFUNC_DECISIONS += [
        (f"{_name}-ties-with-a-constant", lambda x, u=_ufunc: u(x, SAME), VALUES, False),
        (f"{_name}-ties-reversed", lambda x, u=_ufunc: u(SAME, x), VALUES, False),
        (f"{_name}-of-itself", lambda x, u=_ufunc: u(x, x), VALUES, False),
        (f"{_name}-ties-across-elements", lambda x, u=_ufunc: u(x[:-1], x[1:]),
         np.array([0.7, 0.7, 0.2, 0.2, -0.3]), False),
        (f"{_name}", lambda x, u=_ufunc: u(x, SHIFTED), VALUES, False),
        (f"{_name}-distinct", lambda x, u=_ufunc: u(x, VALUES[::-1] + 0.05), VALUES, True),
        (f"{_name}-in-place", _in_place(_ufunc, lambda x: SAME), VALUES, False),
        (f"{_name}-in-place-distinct", _in_place(_ufunc, lambda x: SHIFTED + 0.05), VALUES, True),
        (f"{_name}-in-place-traced", _in_place(_ufunc, lambda x: x[::-1]),
         np.array([0.7, 0.2, -0.3, 0.2, 0.7]), False),
        (f"{_name}-into-slices", _augmented(_ufunc, lambda x: SAME), VALUES, False),
        (f"{_name}-with-nan", lambda x, u=_ufunc: u(x, np.where(VALUES > 0.5, np.nan, SAME)),
         VALUES, False),
    ]


@pytest.mark.parametrize(("operation", "x", "differentiable"),
                         [pytest.param(*row[1:], id=row[0]) for row in UFUNC_DECISIONS])
def test_ufunc_decisions_survive_restoration_by_inversion(operation, x, differentiable):
    check_decision_kept(then_disturbed(operation), x, differentiable=differentiable)


def test_every_decision_row_is_in_the_table():
    # A row whose partials read a decision has a test above.
    deciding = {u.__name__ for u, rule in table("elementwise").items() if rule.decide is not None}
    tested = {row[0].split("-")[0] for row in UFUNC_DECISIONS}
    assert deciding <= tested


def test_maximum_convention_kept():
    # Ties split the cotangent in halves; NaN passes none (maximum), or passes over to the
    # other operand (fmax).
    a = np.array([1.0, 2.0, 3.0, np.nan])
    b = np.array([1.0, 3.0, 2.0, 1.0])
    for policy in POLICIES:
        ga, gb = mutad.gradient(lambda a, b: np.nansum(np.maximum(a, b)), a, b, policy=policy)
        np.testing.assert_array_equal(ga, [0.5, 0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gb, [0.5, 1.0, 0.0, 0.0])
        ga, gb = mutad.gradient(lambda a, b: np.sum(np.fmax(a, b)), a, b, policy=policy)
        np.testing.assert_array_equal(ga, [0.5, 0.0, 1.0, 0.0])
        np.testing.assert_array_equal(gb, [0.5, 1.0, 0.0, 1.0])

# ----------------------------------------------------------------------------------------------
# The restore policy gives every element back (within writes.ULPS), or saves it


def _square_then(*writes):
    """``sum(x * x)``, computed before ``writes`` change ``x`` in place: the gradient, 2 x,
    is right only if the reverse pass gives ``x`` back."""
    def f(x):
        y = x * x
        for write in writes:
            write(x)
        return y.sum()

    return f


def _scale(s):
    def write(x):
        x *= s
    return write


def _shift(o):
    def write(x):
        x += o
    return write


def _divide(s):
    def write(x):
        x /= s
    return write


# fmt: off
LOSSY_WRITES = {
    "underflow-twice":    [_scale(1e-300), _scale(1e-300)],
    "sixty-small-steps":  [_scale(1e-6)] * 60,
    "subnormal-factor":   [_scale(5e-324)],
    "subnormal-then-zero": [_scale(2.0**-1073), _scale(0.5)],  # 0.5 comes back as 0, 1 ulp off
    "partial-underflow":  [_scale(np.array([1.0, 1e-310, 1.0, 1e-320]))],
    "overflow-to-inf":    [_scale(1e300), _scale(1e300)],
    "zero-factor":        [_scale(np.array([1.0, 0.0, 2.0, -0.0]))],
    "divide-by-zero":     [_divide(np.array([3.0, 0.0, 1.0, 7.0]))],
    "divide-to-inf":      [_divide(1e-300), _divide(1e-300)],
    "absorbed-element":   [_scale(np.array([1.0, 1e-17, 1.0, 1.0])), _shift(np.array([0.0, 1.0, 0.0, 0.0]))],
    "absorbed-all":       [_scale(1e-17), _shift(1.0)],
    "cancelled-by-inf":   [_shift(np.array([0.0, np.inf, 0.0, 0.0]))],
    "sign-crossing":      [_shift(np.array([-0.3, -0.2 + 1e-17, 0.5, 1e-300]))],
}
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("writes", LOSSY_WRITES.values(), ids=LOSSY_WRITES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_write_whose_inverse_loses_elements_gives_them_back(writes, policy, dtype):
    x = np.array([0.3, 0.2, 0.5, 0.7], dtype=dtype)
    before = x.tobytes()
    with np.errstate(all="ignore"):  # the program's own overflows and divisions by zero
        (g,) = mutad.gradient(_square_then(*writes), x, policy=policy)
    assert x.tobytes() == before
    assert g.dtype == dtype
    np.testing.assert_allclose(g, 2 * x, rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("policy", POLICIES)
def test_lost_elements_are_given_back_piece_by_piece_and_in_views(monkeypatch, rng, policy):
    # Large contiguous writes are checked a piece at a time; make small ones do it too, with
    # pieces that do not divide the size, and check views (evaluated whole) as well.
    import mutad.engines.writes

    monkeypatch.setattr(mutad.engines.writes, "CHUNK", 3)
    monkeypatch.setattr(mutad.engines.writes, "PIECE", 1)
    x = rng.uniform(0.5, 1.5, (4, 5))
    factors = np.ones((4, 5))
    factors[1, 3] = factors[3, 0] = 1e-310  # underflow in two pieces only

    def f(x):
        y = x * x
        x *= factors
        x *= 1e-10
        x[:, ::2] *= 1e-300
        x[::-1, 1] += 1e300
        return (y * np.sin(x[0])).sum()

    before = x.tobytes()
    g = mutad.gradient(f, x, policy=policy)[0]
    assert x.tobytes() == before
    expected = mutad.gradient(f, x, policy="checkpoint")[0]
    np.testing.assert_allclose(g, expected, rtol=1e-15, atol=0)


# Values that decide how a write is undone, scattered over the pieces a long write is checked
# in: zeros of either sign, subnormals, infinities, NaN, huge and tiny magnitudes
_DECIDING = np.array([0.0, -0.0, 5e-324, -1e-310, 2.2e-308, np.inf, -np.inf, np.nan, 1e308,
                      -1e300, 1e-300, 3.0, -0.5, 0.1])


def _operand(rng, kind, n=45):
    """An operand of a write checked a piece at a time: ``kind`` says which values it holds."""
    x = rng.uniform(-2.0, 2.0, n)
    if kind == "finite":
        return x
    if kind == "zeros":
        return np.zeros(n)
    if kind == "nan":
        return np.full(n, np.nan)
    if kind == "integers":
        return rng.integers(-3, 4, n)
    if kind == "complex":
        return x + 1j * rng.uniform(-2.0, 2.0, n)
    places = rng.choice(n, len(_DECIDING), replace=False)
    x[places] = _DECIDING if kind == "deciding" else _DECIDING[np.isfinite(_DECIDING)][
        rng.integers(0, np.isfinite(_DECIDING).sum(), len(_DECIDING))]
    return x


def _absorption(t, o):
    """The growth of undoing ``t += o``, spelled out: 1 + max|o| / max|t| (1 where t is 0)."""
    size_t = np.max(np.abs(t), initial=0.0)
    if size_t == 0:
        return 1.0
    with np.errstate(over="ignore"):
        return float(1.0 + np.max(np.abs(o), initial=0.0) / size_t)


def _scaling(t, o):
    """The growth of undoing ``t *= o``, spelled out: max|o| / min|o| over its elements not 0
    (1 where there are none, or only infinite ones, or ``o`` is a number)."""
    if np.ndim(o) == 0:
        return 1.0
    magnitude = np.abs(o).astype(np.float64)
    nonzero = magnitude[magnitude > 0]  # (NaN is not > 0)
    if not nonzero.size or not np.isfinite(nonzero.min()):
        return 1.0
    with np.errstate(over="ignore"):
        return float(np.max(magnitude) / nonzero.min())


def lost_mask(lost, size):
    """Where the entries ``lost`` of ``writes._verify`` mark elements of a target of ``size``
    elements."""
    found = np.zeros(size, bool)
    for where, positions, _ in lost:
        region = found if where is None else found[where]
        region[positions] = True
    return found


@pytest.mark.parametrize("ufunc, reference", [(np.add, _absorption), (np.multiply, _scaling),
                                              (np.divide, _scaling)])
@pytest.mark.parametrize("target", ["finite", "deciding", "zeros", "nan", "complex"])
@pytest.mark.parametrize("other", ["finite", "deciding", "extremes", "zeros", "nan", "integers",
                                   "complex", "number"])
def test_a_write_is_checked_and_measured_alike_whole_and_a_piece_at_a_time(
        monkeypatch, rng, ufunc, reference, target, other):
    """A long contiguous write is checked a piece at a time, in one pass that finds the elements
    its inverse would not give back and measures its growth (``writes._verify``): what it finds
    and measures is what the whole arrays give at once, and the growth the formula's, on
    operands that decide both (zeros, subnormals, infinities, NaN, extremes)."""
    from mutad.core.registry import rule_for
    from mutad.engines import writes

    rule = rule_for(ufunc).elementwise
    t = _operand(rng, target)
    o = 0.7 if other == "number" else _operand(rng, other)
    if target == "complex" or other == "complex":
        t = t.astype(complex)
    values = [t, o]

    def verify():
        return writes._verify(ufunc, rule.inverse[0], t, values, 0, {}, rule.growth)

    whole_lost, whole = verify()
    monkeypatch.setattr(writes, "CHUNK", 4)  # 12 pieces, the last one short
    monkeypatch.setattr(writes, "PIECE", 1)
    lost, measures = verify()
    assert measures == rule.growth.measure(t, [o]) or np.array_equal(
        measures, whole, equal_nan=True)
    np.testing.assert_array_equal(rule.growth.bound(measures), reference(t, o))

    # the elements the inverse would not give back, whole or a piece at a time, are those it
    # does not give back within 2 ulps (a product's inverse: wherever the product is normal)
    with np.errstate(all="ignore"):
        back = ufunc(t, o)
        rule.inverse[0](back, [o])
    far = writes._far(back, t, np.empty(t.shape, bool))
    np.testing.assert_array_equal(lost_mask(whole_lost, t.size), far)
    if t.dtype.kind != "c":  # (NumPy's complex loops may round the elements of a short array
        np.testing.assert_array_equal(lost_mask(lost, t.size), far)  # otherwise than a long one's)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_long_chain_of_inversions_on_one_buffer(rng, policy):
    x = rng.uniform(-1.0, 1.0, 50)

    def f(x):
        y = np.sin(x)
        for k in range(200):
            x *= 1.0 + 1e-3 * (k % 3)
            x += 1e-3 * np.cos(y)
            x /= 1.0 + 1e-3 * (k % 3)
        return (x * y).sum()

    before = x.tobytes()
    g = mutad.gradient(f, x, policy=policy)[0]
    assert x.tobytes() == before
    expected = mutad.gradient(f, x, policy="checkpoint")[0]
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=0)


# ----------------------------------------------------------------------------------------------
# A zero (co)tangent times an infinite (or undefined) partial derivative is zero


# fmt: off
SINGULAR_POINTS = {  # a ufunc, inputs where a partial is infinite or NaN, and regular inputs
    "sqrt":        (np.sqrt, (0.0,), (0.6,)),
    "cbrt":        (np.cbrt, (0.0,), (0.6,)),
    "log":         (np.log, (0.0,), (0.6,)),
    "log2":        (np.log2, (0.0,), (0.6,)),
    "log10":       (np.log10, (0.0,), (0.6,)),
    "log1p":       (np.log1p, (-1.0,), (0.6,)),
    "reciprocal":  (np.reciprocal, (0.0,), (0.6,)),
    "arcsin":      (np.arcsin, (1.0,), (0.6,)),
    "arccos":      (np.arccos, (-1.0,), (0.6,)),
    "arccosh":     (np.arccosh, (1.0,), (1.6,)),
    "arctanh":     (np.arctanh, (1.0,), (0.6,)),
    "power-base":  (np.power, (0.0, 0.5), (0.6, 0.7)),
    "power-zero":  (np.power, (0.0, 0.0), (0.6, 0.7)),
    "divide":      (np.divide, (1.0, 0.0), (0.6, 0.7)),
    "arctan2":     (np.arctan2, (0.0, 0.0), (0.6, 0.7)),
    "hypot":       (np.hypot, (0.0, 0.0), (0.6, 0.7)),
}
# fmt: on


def _singular_and_regular(ufunc, point, regular):
    """Each input as an array holding the singular point and a regular one, and a function
    that uses only the regular element of the result: its cotangent at the singular one is 0."""
    args = [np.array([s, r]) for s, r in zip(point, regular, strict=True)]

    def f(*xs):
        return ufunc(*xs)[1] * 3.0

    def f_in_place(*xs):
        z = xs[0] * 1.0
        ufunc(z, *xs[1:], out=z)
        return z[1] * 3.0

    return args, f, f_in_place


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("ufunc", "point", "regular"), SINGULAR_POINTS.values(),
                         ids=SINGULAR_POINTS)
def test_zero_cotangent_times_an_infinite_partial_is_zero(ufunc, point, regular, policy):
    args, f, f_in_place = _singular_and_regular(ufunc, point, regular)
    before = [a.tobytes() for a in args]
    with np.errstate(all="ignore"):
        for program in (f, f_in_place):
            grads = mutad.gradient(program, *args, policy=policy)
            for g in grads:
                assert g[0] == 0.0 and np.isfinite(g[1])
            assert [a.tobytes() for a in args] == before


@pytest.mark.parametrize(("ufunc", "point", "regular"), SINGULAR_POINTS.values(),
                         ids=SINGULAR_POINTS)
def test_zero_tangent_times_an_infinite_partial_is_zero(ufunc, point, regular):
    args, _, _ = _singular_and_regular(ufunc, point, regular)
    with np.errstate(all="ignore"):
        for i in range(len(args)):
            tangents = [None] * len(args)
            tangents[i] = np.array([0.0, 1.0])
            _, dy = mutad.jvp(lambda *xs: ufunc(*xs), tuple(args), tuple(tangents))
            assert dy[0] == 0.0 and np.isfinite(dy[1])

            def in_place(*xs):
                z = xs[0] * 1.0
                ufunc(z, *xs[1:], out=z)
                return z

            _, dz = mutad.jvp(in_place, tuple(args), tuple(tangents))
            assert dz[0] == 0.0 and np.isfinite(dz[1])


@pytest.mark.parametrize("policy", POLICIES)
def test_pairwise_inverse_distances_with_zeros_on_the_diagonal(policy):
    def f(x):
        r = np.sqrt((x[:, None] - x[None, :]) ** 2)   # zero on the diagonal
        r[r > 0] = 1 / r[r > 0]
        return np.triu(r, 1).sum()

    x = np.array([0.0, 1.0, 3.0])
    before = x.tobytes()
    with np.errstate(divide="ignore"):
        (g,) = mutad.gradient(f, x, policy=policy)
        _, dy = mutad.jvp(f, (x,), (np.array([1.0, -0.5, 2.0]),))
    assert x.tobytes() == before
    # d/dx_i of the sum over i < j of 1 / |x_i - x_j|
    expected = np.array([1 + 1 / 9, -1 + 1 / 4, -1 / 9 - 1 / 4])
    np.testing.assert_allclose(g, expected, rtol=1e-14)
    np.testing.assert_allclose(dy, expected @ np.array([1.0, -0.5, 2.0]), rtol=1e-14)




def test_dividing_by_a_python_zero_gives_numpys_infinite_gradient():
    # The partial 1 / b was computed with Python's float division, which raises for b = 0.0.
    x = np.array([1.0, -2.0])
    with np.errstate(divide="ignore"):
        grad, = mutad.gradient(lambda x: (x / 0.0).sum(), x)
    assert grad.tolist() == [np.inf, np.inf]


def test_partials_of_large_operands_do_not_overflow():
    """Regression: np.divide's partial in b was -a / (b * b), which overflows for |b| > 1e154
    (a gradient of -0.0 for -1e-10); np.arctan2's divided by a * a + b * b."""
    grads = mutad.gradient(lambda a, b: (a / b).sum(), np.array([1e300]), np.array([1e155]))
    assert np.allclose(grads[1], -1e-10, rtol=1e-15)
    assert mutad.jvp(lambda b: (1e300 / b).sum(), (np.array([1e155]),), (np.ones(1),))[1] \
        == pytest.approx(-1e-10, rel=1e-15)
    grads = mutad.gradient(lambda a, b: np.arctan2(a, b).sum(), np.array([1e200]),
                           np.array([1e200]))
    assert np.allclose(grads, [[5e-201], [-5e-201]], rtol=1e-15)


@pytest.mark.parametrize("name", ["modf", "divmod", "frexp"])
def test_ufuncs_with_two_outputs(name, rng):
    """np.modf, np.divmod and np.frexp had no rule (a stop): NumPy's values bit for bit, the
    derivatives of the fraction, the remainder and the mantissa (the other outputs are piecewise
    constant), both modes, second order."""
    x = rng.uniform(-3.0, 3.0, 5)
    y = rng.uniform(0.5, 2.0, 5) * np.sign(rng.standard_normal(5))
    programs = {
        "modf": (lambda x: (np.modf(x)[0] ** 2).sum() + np.modf(x)[1].sum(), (x,)),
        "divmod": (lambda x, y: (np.divmod(x, y)[1] ** 2).sum() + np.divmod(x, y)[0].sum(),
                   (x, y)),
        "frexp": (lambda x: (np.frexp(x)[0] ** 3).sum() + np.frexp(x)[1].sum(), (x,)),
    }
    f, args = programs[name]
    value, _ = mutad.value_and_gradient(f, *args)
    assert value == f(*args)
    mutad.check_grads(f, *args, order=2)
    mutad.check_jvp(f, *args)


# ----------------------------------------------------------------------------------------------
# where=: the elements where the mask holds


def masked_updates(x):
    """The safe division of NumPy users, and in-place updates under a mask (broadcast too)."""
    y = np.divide(1.0, x, out=np.zeros_like(x), where=x > 0.3)
    z = x.copy()
    np.negative(z, out=z, where=z > 0.5)
    np.log(x, out=z, where=x > 0.6)  # (0.0 and negative elements are never taken)
    w = np.ones((3, x.size))
    np.multiply(w, x, out=w, where=np.array([True, False, True])[:, None])
    np.add(w[0], y, out=w[0], where=[True, False, True, False, True])
    return np.sum(y * y) + np.sum(z ** 3) + np.sum(w * x)


MASKED_POINTS = [np.array([0.1, 0.4, 0.55, 0.7, 0.0]), np.array([0.9, -0.4, 0.35, 0.2, 1.5])]


@pytest.mark.parametrize("x", MASKED_POINTS, ids=["zero-excluded", "others-selected"])
def test_a_ufunc_with_where_and_out_is_differentiated_where_the_mask_holds(x):
    """Regression: ``np.divide(1.0, x, out=np.zeros_like(x), where=x > 0.3)`` was refused."""
    kept = x.copy()
    with np.errstate(divide="raise", invalid="raise"):  # NumPy computes no excluded element:
        mutad.check_grads(masked_updates, x, order=2)  # neither does mutad
    assert x.tobytes() == kept.tobytes()
    assert np.asarray(mutad.value_and_gradient(masked_updates, x)[0]).tobytes() \
        == np.asarray(masked_updates(x.copy())).tobytes()


def test_a_replayed_ufunc_with_where_follows_the_mask():
    replayed = mutad.value_and_grad(masked_updates, replay=True)
    for x in [*MASKED_POINTS, MASKED_POINTS[0] + 0.25, MASKED_POINTS[1][::-1].copy()]:
        value, gradient = replayed(x)
        traced, (expected,) = mutad.value_and_gradient(masked_updates, x)
        assert np.asarray(value).tobytes() == np.asarray(masked_updates(x.copy())).tobytes()
        assert gradient.tobytes() == expected.tobytes()


def test_a_ufunc_with_where_and_no_out_is_refused():
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="without out="):
        mutad.gradient(lambda x: np.divide(1.0, x, where=x > 0).sum(), np.ones(3))


@pytest.mark.parametrize("call, error", [
    (lambda x, o: np.sin(x, out=o, where=np.array([1, 0, 1])), "to dtype\\('bool'\\)"),
    (lambda x, o: np.exp(x * 1j, out=o, where=x > 0.5), "complex128"),
    (lambda x, o: np.multiply(x, x, out=o.astype(np.float32), where=x > 0.5, casting="safe"),
     "float32"),
], ids=["integer-mask", "complex-into-float", "safe-casting"])
def test_a_ufunc_with_where_keeps_numpys_errors(call, error):
    """Regression: an integer mask was taken as indices, and an output of a kind out= may not
    hold was cast into it, where NumPy raises."""
    x = np.array([0.3, 0.7, 0.9])
    with pytest.raises(TypeError, match=error):
        call(x.copy(), np.zeros(3))
    for differentiate in (lambda f: mutad.gradient(f, x), lambda f: mutad.jvp(f, (x,), (x,))):
        with pytest.raises(TypeError, match=error):
            differentiate(lambda x: np.sum(call(x, np.zeros_like(x))))


def _marked(positions, shape):
    """The mask of the elements ``writes._lost`` found at ``positions`` (None: none)."""
    mask = np.zeros(shape, bool)
    if positions is not None:
        mask[positions] = True
    return mask


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", [(200,), (8, 25), (4000,)])
@pytest.mark.parametrize("share", [1.0, 0.01])
def test_the_lost_elements_found_are_those_of_the_mask(dtype, seed, shape, share):
    # ``writes._lost`` finds the elements that are not bit for bit those they were, then asks
    # ``writes._far`` about those alone (a few: ``share`` of them 0 to 3 ulps apart) or about
    # all (many): on elements of either sign, zeros of either sign, subnormals, NaNs and
    # infinities among them (or not: each seed draws which kinds appear), it finds the same
    # elements.
    from mutad.engines.writes import _far, _lost
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    info = np.finfo(dtype)
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(dtype)
    specials = [0.0, -0.0, info.smallest_subnormal, -info.smallest_normal / 2, np.nan, np.inf]
    for value in specials:
        if rng.random() < 0.4:
            b[rng.integers(n)] = value
    steps = rng.integers(-3 if seed % 2 else -2, 4 if seed % 2 else 3, n).astype(kind)
    steps[rng.random(n) >= share] = 0
    if seed == 0:
        steps[:] = 0
    elif share < 1:  # where it is a few, one of each kind among them
        special = np.flatnonzero(np.isin(b, specials) | np.isnan(b))
        steps[special] = rng.integers(-3, 4, special.size)
    a = (b.view(kind) + steps).view(dtype).reshape(shape)
    b = b.reshape(shape)
    expected = _far(a.copy(), b, np.empty(shape, bool)).copy()
    got = _lost(a.copy(), b, np.empty(shape, bool))
    if not expected.any():
        assert got is None
    np.testing.assert_array_equal(_marked(got, shape), expected)


def _far_element_by_element(a, b):
    """``writes._far``'s mask, each element asked whether it is tiny (the formula it takes
    where it cannot tell from the extremes that none is)."""
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    d = a.view(kind) - b.view(kind)
    tiny = (np.abs(b) < np.finfo(b.dtype).smallest_normal) & (d != 0)
    return ((d + 2).view(np.dtype(kind).str.replace("i", "u")) > 4) | tiny


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("special", [None, 0.0, -0.0, "subnormal", "smallest normal",
                                     "below smallest normal", np.nan, np.inf, -np.inf, "max",
                                     "other sign"])
@pytest.mark.parametrize("size", [0, 1, 300])
def test_far_skips_the_tiny_mask_only_where_no_element_is_tiny(dtype, sign, special, size):
    # ``writes._far`` reads from ``b``'s extremes that no element is zero or subnormal (all of
    # one sign, at least the smallest normal in magnitude) and then asks no element: on values
    # of one sign, with one element that makes the extremes say otherwise (or does not: the
    # smallest normal, an infinity of the same sign, the largest float), its mask is the one
    # asked element by element, bit for bit, for steps of 0 to 3 ulps either way
    from mutad.engines.writes import _all_normal_magnitudes, _far
    rng = np.random.default_rng(size)
    info = np.finfo(dtype)
    b = (sign * rng.uniform(0.5, 2.0, size) * 10.0 ** rng.integers(-3, 3, size)).astype(dtype)
    value = {"subnormal": info.smallest_subnormal, "smallest normal": info.smallest_normal,
             "below smallest normal": np.nextafter(info.smallest_normal, 0, dtype=dtype),
             "max": info.max, "other sign": -3.0}.get(special, special)
    if size and value is not None:
        b[size // 2] = sign * np.asarray(value, dtype)
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    steps = rng.integers(-3, 4, size).astype(kind)
    with np.errstate(all="ignore"):
        a = (b.view(kind) + steps).view(dtype)
    tiny = np.abs(b) < info.smallest_normal
    assert _all_normal_magnitudes(b, info.smallest_normal) == (not tiny.any() and not (
        np.isnan(b).any() or (b > 0).any() and (b < 0).any()))
    got = _far(a.copy(), b, np.empty(size, bool))
    np.testing.assert_array_equal(got, _far_element_by_element(a, b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("value", [1.0, -0.0, 0.0, 5e-324, np.nan, np.inf])
def test_the_lost_element_of_a_0d_array_is_found(dtype, value):
    # a write into a 0-d array: ``writes._lost`` marks its one element (a 0-d mask indexes
    # it), or none
    from mutad.engines.writes import _far, _lost
    b = np.array(value, dtype)
    assert _lost(b.copy(), b, np.empty((), bool)) is None
    for other in [np.nextafter(b.real, 2), np.nextafter(np.nextafter(np.nextafter(
            b.real, 2), 2), 2), -b.real, np.float64(np.nan)]:
        a = np.array(other, dtype)
        expected = _far(a.copy(), b, np.empty((), bool)).copy()
        got = _lost(a.copy(), b, np.empty((), bool))
        assert (got is not None) == bool(expected)
        if got is not None:
            region = b.copy()
            region[got] = 7.0
            assert region == 7.0


def _signed_values(rng, dtype, signs, specials):
    """Values of ``dtype`` of the given ``signs`` ("+", "-" or "mixed") over many magnitudes,
    with ``specials`` (a list of values) put at random places."""
    info = np.finfo(dtype)
    x = rng.uniform(0.5, 2.0, 300) * 10.0 ** rng.integers(-4, 5, 300)
    if signs == "-":
        x = -x
    elif signs == "mixed":
        x *= rng.choice([-1.0, 1.0], x.size)
    x = x.astype(dtype)
    for value in specials:
        x[rng.integers(x.size)] = {"tiny": info.smallest_normal, "subnormal": info.smallest_subnormal,
                                   "huge": info.max, "zero": 0.0, "-zero": -0.0}.get(value, value)
    return x


_SPECIALS = [[], ["tiny"], ["huge"], ["subnormal"], ["zero"], ["-zero"], [np.nan], [np.inf],
             [-np.inf], ["tiny", "huge"]]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("signs", ["+", "-", "mixed"])
@pytest.mark.parametrize("specials", _SPECIALS, ids=str)
def test_whether_a_product_is_normal_is_told_by_its_extremes_as_by_its_magnitudes(
        rng, dtype, signs, specials):
    # ``writes._normal`` reads an array of one sign by its extremes and another by its
    # magnitudes: either way the answer is whether every element is a normal float.
    from mutad.engines.writes import _normal
    info = np.finfo(dtype)
    a = _signed_values(rng, dtype, signs, [-v if signs == "-" and isinstance(v, float) else v
                                           for v in specials])
    if signs == "-":
        a = np.where(np.isnan(a), a, -np.abs(a)).astype(dtype)
    magnitude = np.abs(a)
    with np.errstate(invalid="ignore"):
        expected = bool(np.all((magnitude >= info.smallest_normal) & (magnitude <= info.max)))
    assert _normal(a.copy()) is expected
    assert _normal(a[:0].copy()) is True


@pytest.mark.parametrize("signs", ["+", "-", "mixed"])
@pytest.mark.parametrize("specials", _SPECIALS, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128])
def test_the_measures_of_a_scaling_by_extremes_are_those_of_its_magnitudes(
        rng, signs, specials, dtype):
    # ``ufuncs._scaled`` reads an operand of one sign by its extremes, another by its
    # magnitudes, masked only where one is zero or NaN: the largest |o| and the smallest
    # non-zero one (negated), as the magnitudes spell them out.
    from mutad.rules.ufuncs import _scaled
    o = _signed_values(rng, np.float64, signs, specials)
    if signs == "-":
        o = np.where(np.isnan(o), o, -np.abs(o))
    if dtype is np.int64:
        o = np.clip(np.nan_to_num(o, posinf=7, neginf=-7), -1e6, 1e6).astype(np.int64)
    elif dtype is np.complex128:
        o = o.astype(complex)
        o.imag = o.real[::-1]
    else:
        with np.errstate(over="ignore"):
            o = o.astype(dtype)
    magnitude = np.abs(o).astype(np.float64)
    nonzero = magnitude[magnitude > 0]  # (NaN is not > 0)
    expected = (float(np.max(magnitude)), -float(np.min(nonzero, initial=np.inf)))
    np.testing.assert_array_equal(_scaled(None, [o]), expected)
    assert _scaled(None, [o[:0]]) == (0.0, -np.inf)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_lost_elements_whose_distance_wraps_around_or_is_none(dtype):
    # ``writes._lost`` reads the extremes of the distances in ulps as NumPy's integers hold
    # them: an element of the other sign, an infinity for a NaN, the largest against the
    # smallest float wrap around, and must still be found; all distances zero are no loss,
    # zeros and subnormals among them.
    from mutad.engines.writes import _far, _lost
    info = np.finfo(dtype)
    b = np.array([1.0, -2.0, info.max, -info.max, 0.0, info.smallest_subnormal, 3.0, np.inf],
                 dtype)
    assert _lost(b.copy(), b, np.empty(b.size, bool)) is None
    for i, value in [(0, -1.0), (1, 2.0), (2, -info.max), (3, info.max), (4, -0.0),
                     (5, -info.smallest_subnormal), (7, np.nan), (6, np.nextafter(
                         np.nextafter(np.nextafter(dtype(3.0), dtype(4.0)), dtype(4.0)),
                         dtype(4.0)))]:
        a = b.copy()
        a[i] = value
        expected = _far(a.copy(), b, np.empty(b.size, bool)).copy()
        assert expected[i] and expected.sum() == 1
        np.testing.assert_array_equal(
            _marked(_lost(a.copy(), b, np.empty(b.size, bool)), b.size), expected)


# ----------------------------------------------------------------------------------------------
# A long write done a piece at a time as its inverse is verified (``writes._verify``,
# ``write=True``): each piece written while in cache, from the first piece not clean on the
# rest in one call


def _one_element_off(case, place, dtype, n=30):
    """The operand of a write ``x op= o`` of ``case`` into ``n`` elements in pieces of 4 that
    its inverse gives back exactly but at one element (``place``: in the first, the middle or
    the last piece, or none), where it would not: an underflow, an infinite or NaN operand, a
    zero factor, a division by zero, a term that absorbs the target's."""
    o = np.linspace(0.75, 1.25, n).astype(dtype)
    if case == "add-absorbed":
        o = np.linspace(-0.25, 0.25, n).astype(dtype)
    bad = {"multiply-underflow": np.finfo(dtype).smallest_normal / 64, "multiply-inf": np.inf,
           "multiply-zero": 0.0, "divide-by-zero": 0.0, "add-absorbed": 1e20,
           "add-nan": np.nan, "subtract-inf": -np.inf}[case]
    index = {"first": 1, "middle": n // 2, "last": n - 1, "none": None}[place]
    if index is not None:
        o[index] = bad
    return o


_OPS = {"multiply": np.multiply, "divide": np.divide, "add": np.add, "subtract": np.subtract}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("place", ["first", "middle", "last", "none"])
@pytest.mark.parametrize("case", ["multiply-underflow", "multiply-inf", "multiply-zero",
                                  "divide-by-zero", "add-absorbed", "add-nan", "subtract-inf"])
def test_a_write_done_as_its_inverse_is_verified_finds_every_element_it_loses(
        monkeypatch, inverting, case, place, dtype):
    """One element the inverse would not give back, in the first, a middle or the last piece
    of a write done as it is verified: it is saved, so the restored operand the reverse pass
    reads is the original (the gradient is the checkpoint policy's, and, bit for bit, that of
    the write verified whole before it is done), and the caller's array is unchanged."""
    from mutad.engines import writes

    monkeypatch.setattr(writes, "CHUNK", 4)  # 8 pieces, the last one short
    monkeypatch.setattr(writes, "PIECE", 1)
    ufunc = _OPS[case.split("-")[0]]
    o = _one_element_off(case, place, dtype)

    def f(x):
        y = np.sin(x)  # whose pullback reads x as it was before the write
        ufunc(x, o, out=x)
        return (y * np.where(np.isfinite(x), x, 0.0)).sum()

    x = (np.linspace(0.5, 1.5, o.size) * np.pi / 3).astype(dtype)  # (every bit of each used)
    before = x.tobytes()
    verified = []
    write_verified = writes.ElementwiseInverse.write_verified

    def spy(self, tape, key):
        undo, kind = write_verified(self, tape, key)
        verified.append(kind)
        return undo, kind

    monkeypatch.setattr(writes.ElementwiseInverse, "write_verified", spy)
    with np.errstate(all="ignore"):  # the program's own
        value, (g,) = mutad.value_and_gradient(f, x)
        assert x.tobytes() == before
        assert verified == (["inverse"] if place == "none" else ["partial"])
        monkeypatch.setattr(writes, "WRITTEN_AS_VERIFIED", frozenset())  # verified, then done
        first_value, (first,) = mutad.value_and_gradient(f, x)
        assert len(verified) == 1
        checkpointed = mutad.gradient(f, x, policy="checkpoint")[0]
    assert x.tobytes() == before
    assert np.float64(value).tobytes() == np.float64(first_value).tobytes()
    assert g.tobytes() == first.tobytes()
    np.testing.assert_allclose(g, checkpointed, rtol=8 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("operand", ["float32 into float64", "float64 into float32", "complex",
                                     "broadcast", "strided", "keyword"])
def test_a_write_not_done_as_it_is_verified(monkeypatch, inverting, operand):
    """A write whose pieces could differ from the whole write's, or whose exceptions the
    verification might not see (operands of another type, complex values, operands laid out
    otherwise, keyword arguments), is verified, then done by one call."""
    from mutad.engines import writes

    monkeypatch.setattr(writes, "CHUNK", 4)
    monkeypatch.setattr(writes, "PIECE", 1)
    monkeypatch.setattr(writes.ElementwiseInverse, "write_verified", None)  # never asked
    dtype, o, kwargs = np.float64, np.linspace(0.75, 1.25, 30), {}
    if operand == "float32 into float64":
        o = o.astype(np.float32)
    elif operand == "float64 into float32":
        dtype = np.float32
    elif operand == "complex":
        dtype = complex
    elif operand == "broadcast":
        o = o[:1]
    elif operand == "strided":
        o = np.linspace(0.75, 1.25, 60)[::2]
    else:
        kwargs = {"casting": "same_kind"}

    def f(x):
        y = np.sin(x)
        np.multiply(x, o, out=x, **kwargs)
        return (y * x).real.sum()

    x = np.linspace(0.5, 1.5, 30).astype(dtype)
    before = x.tobytes()
    g = mutad.gradient(f, x)[0]
    assert x.tobytes() == before
    np.testing.assert_allclose(g, mutad.gradient(f, x, policy="checkpoint")[0], rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.multiply, np.add])
@pytest.mark.parametrize("state", ["warn", "raise"])
def test_a_write_done_as_it_is_verified_warns_and_raises_as_numpy_does(monkeypatch, inverting,
                                                                       state, ufunc):
    """An overflow in two pieces of a write done as it is verified: one warning, as NumPy's
    one call gives, or the error it raises, the caller's array left unchanged."""
    import warnings

    from mutad.engines import writes

    monkeypatch.setattr(writes, "CHUNK", 4)
    monkeypatch.setattr(writes, "PIECE", 1)
    o = np.full(30, 2.0)
    o[[5, 29]] = 1e308

    def f(x):
        ufunc(x, o, out=x)
        return x.sum()

    x = np.full(30, 10.0)
    if ufunc is np.add:
        x[[5, 29]] = 1e308
    before = x.tobytes()
    with warnings.catch_warnings(record=True) as caught, np.errstate(over=state):
        warnings.simplefilter("always")
        if state == "raise":
            with pytest.raises(FloatingPointError):
                f(x.copy())
            with pytest.raises(FloatingPointError):
                mutad.gradient(f, x)
        else:
            f(x.copy())
            expected = [str(w.message) for w in caught]
            del caught[:]
            g = mutad.gradient(f, x)[0]
            assert [str(w.message) for w in caught] == expected
            assert len(expected) == 1
            np.testing.assert_array_equal(g, o if ufunc is np.multiply else np.ones(30))
    assert x.tobytes() == before


@pytest.mark.parametrize("largest", [1.0, 1e308, np.inf, np.nan])
def test_a_sum_verified_as_it_is_written_reads_its_result_again_only_where_it_may_raise(
        monkeypatch, largest):
    """A piece of ``t += o`` whose operands' measures of growth (the largest magnitudes)
    are finite and add up to at most half the largest float raises no floating-point
    exception: it is written as it is verified without a pass over its result to find that
    out (``Normwise.quiet``); any other piece is summed, as before. Either way the write and
    the elements found lost are those of the write verified whole."""
    from mutad.core.registry import rule_for
    from mutad.engines import writes
    from mutad.rules.ufuncs import absorption

    rule = rule_for(np.add).elementwise
    o = np.linspace(-1.0, 1.0, 40)
    t = np.linspace(3.0, -2.0, 40)
    t[17] = largest
    summed = []
    monkeypatch.setattr(writes, "_sum", lambda a, axis: summed.append(a.size) or a.sum())
    monkeypatch.setattr(writes, "CHUNK", 4)
    monkeypatch.setattr(writes, "PIECE", 1)
    written = t.copy()
    with np.errstate(all="ignore"):
        lost, measures = writes._verify(np.add, rule.inverse[0], written, [written, o], 0, {},
                                        absorption, write=True)
        expected = t + o
    np.testing.assert_array_equal(written, expected)
    # (of the pieces, that of t[17] alone: where it is not clean, the rest is written by one
    # call after the pass)
    assert summed == ([] if largest == 1.0 else [4])
    whole_lost, whole = writes._verify(np.add, rule.inverse[0], t, [t, o], 0, {}, absorption)
    np.testing.assert_array_equal(measures, whole)
    np.testing.assert_array_equal(lost_mask(lost, t.size), lost_mask(whole_lost, t.size))


def test_a_write_verified_in_long_pieces_keeps_its_lost_elements_alone(monkeypatch):
    """The elements a write's inverse would not give back are kept with their positions, no
    more, however long the pieces it is verified in: a long run of such writes keeps, until
    the reverse pass reaches each, no more than the elements they lost."""
    from mutad.core.registry import rule_for
    from mutad.engines import writes
    from mutad.rules.ufuncs import absorption

    monkeypatch.setattr(writes, "CHUNK", 4)
    monkeypatch.setattr(writes, "PIECE", 4)  # pieces of 16 elements
    rule = rule_for(np.add).elementwise
    t, o = np.ones(40), np.ones(40)
    t[21] = 1e-20  # absorbed by 1 + 1e-20, so 1 - 1 gives back 0
    written = t.copy()
    lost, _ = writes._verify(np.add, rule.inverse[0], written, [written, o], 0, {},
                             absorption, write=True)
    np.testing.assert_array_equal(written, t + o)
    assert len(lost) == 1
    where, positions, original = lost[0]
    assert where == slice(16, 32)
    assert len(positions) == 1
    np.testing.assert_array_equal(positions[0], [5])
    np.testing.assert_array_equal(original, [1e-20])


def logs_of_sines(x, raising):
    u = x.copy()
    for _ in range(3):
        np.sin(u, out=u)
        try:
            with np.errstate(invalid="raise" if raising else "ignore"):
                np.log(u, out=u)  # NumPy writes every element, then raises for the negatives
        except FloatingPointError:
            pass
        np.nan_to_num(u, copy=False, nan=0.25)
        np.cos(u, out=u)
    return np.sum(u * np.arange(1.0, u.size + 1))


@pytest.mark.parametrize("n", [4, 20_000])
@pytest.mark.parametrize("settings", [{}, {"policy": "checkpoint"}, {"memory": 0}])
def test_a_write_that_raises_after_numpy_wrote_it_is_differentiated(n, settings):
    """Regression: ``np.log(u, out=u)`` under ``np.errstate(invalid="raise")``, the error
    caught by f: NumPy has written ``u`` when it raises, but the write went unrecorded, so
    its derivative was missing from the gradient (0.056 for 0.173) while the value was
    NumPy's. It is the gradient of the same program with the error ignored, bit for bit, and
    the caller's bytes come back."""
    x = np.random.default_rng(1).uniform(-1.0, 1.0, n)
    before = x.tobytes()
    value, grad = mutad.value_and_grad(logs_of_sines, **settings)(x, True)
    expected_value, expected = mutad.value_and_grad(logs_of_sines, **settings)(x, False)
    assert np.asarray(value).tobytes() == np.asarray(logs_of_sines(x, True)).tobytes()
    assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
    assert grad.tobytes() == expected.tobytes()
    assert x.tobytes() == before


def overflowing_products(x, raising, overlapping):
    u = x * 1.0
    m = np.array([[1e305, 0.0], [0.0, 2.0]])
    for _ in range(2):
        try:
            with np.errstate(over="raise" if raising else "ignore"):
                # NumPy writes the product, then raises for the inf; into a copy of an out=
                # that overlaps an operand, which it drops, leaving u as it was
                np.matmul(m, u if overlapping else u * 1.0, out=u)
        except FloatingPointError:
            pass
        u[0] = np.nan_to_num(u[0], posinf=7.0, neginf=-7.0) * 1e-300
    return np.sum(u * np.array([[1.0, 2.0], [3.0, 4.0]]))


@pytest.mark.parametrize("overlapping", [False, True])
@pytest.mark.parametrize("settings", [{}, {"policy": "checkpoint"}, {"memory": 0}])
def test_a_product_into_out_that_raises_after_numpy_wrote_it_is_differentiated(settings,
                                                                               overlapping):
    """Regression: ``np.matmul(m, v, out=u)`` under ``np.errstate(over="raise")``, the error
    caught by f: NumPy has written ``u`` when it raises, but mutad, whose rule computed the
    product and raised before writing it, left ``u`` as it was (value 11.7 for 77.0 on such a
    program). Where ``v`` is ``u``, NumPy leaves ``u`` as it was. The value is NumPy's bit for
    bit, and the gradient that of the same program with the error ignored where NumPy wrote
    (the program's own where it did not); the caller's bytes come back."""
    x = np.array([[5e3, 1e-3], [0.5, -1.0]])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(overflowing_products, **settings)(x, True, overlapping)
    assert np.asarray(value).tobytes() == np.asarray(
        overflowing_products(x, True, overlapping)).tobytes()
    if overlapping:  # u as it was after the first product, written by the second
        np.testing.assert_allclose(grad, [[1e-295, 2e-295], [6.0, 8.0]], rtol=1e-14)
    else:
        expected_value, expected = mutad.value_and_grad(overflowing_products, **settings)(
            x, False, overlapping)
        assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
        assert grad.tobytes() == expected.tobytes()
        assert np.any(grad != 0.0)
    tangent = np.array([[0.0, 1e-10], [1.0, -1.0]])  # forward mode: its own fix, the same
    forward = mutad.jvp(lambda x: overflowing_products(x, True, overlapping), (x,), (tangent,))
    assert np.asarray(forward[0]).tobytes() == np.asarray(value).tobytes()
    np.testing.assert_allclose(forward[1], np.sum(grad * tangent), rtol=1e-12)
    assert x.tobytes() == before


def _ipow(u):
    u **= 0.5


_OVERFLOWING_ROW = np.eye(5)
_OVERFLOWING_ROW[0, [1, 3]] = 1e308  # (its product with u: inf - inf, a NaN)

_CAUGHT_WRITES = {  # a write into u that NumPy refuses or raises from, which f catches
    "sqrt": lambda u: np.sqrt(u, out=u),  # (a partial that reads the result alone)
    "power": _ipow,
    "log": lambda u: np.log(u, out=u),
    "masked log": lambda u: np.log(u, out=u, where=u < 3.0),
    "log at": lambda u: np.log.at(u, [0, 1, 3]),
    "divmod": lambda u: np.divmod(u, np.where(u < 3.0, 0.0, 2.0), out=(np.empty_like(u), u)),
    "dot": lambda u: np.dot(_OVERFLOWING_ROW, u.copy(), out=u),
    "casting": lambda u: np.multiply(u, 2.0, out=u, casting="no", dtype=np.float32),
}


class _Stop(Exception):
    """What an error callback of ``np.errstate(...="call")`` raises: of no class NumPy's."""


class _StoppingLog:
    """An error log of ``np.errstate(...="log")`` whose ``write`` raises."""

    def write(self, message):
        raise _Stop(message)


def _stop(kind, flag):
    raise _Stop(kind)


_RAISING = {  # np.errstate's settings for each way a caught write raises
    "raise": {"all": "raise"}, "warning": {"all": "warn"}, None: {"all": "ignore"},
    "call": {"all": "call", "call": _stop},
    "log": {"all": "log", "call": _StoppingLog()},
}


def caught_write(x, case, how):
    """``_CAUGHT_WRITES[case]`` into ``x``, raising as ``how`` says (FloatingPointError under
    ``np.errstate(all="raise")``, NumPy's RuntimeWarning where warnings are made errors, or
    what an error callback (``"call"``) or log (``"log"``) raises: NumPy wrote first;
    TypeError: it refused the call, writing nothing), the error caught; or, for ``how=None``,
    its equivalent that does not raise (the error ignored; no call)."""
    x *= 1.5
    with warnings.catch_warnings():
        if how == "warning":
            warnings.simplefilter("error")
        try:
            with np.errstate(**_RAISING[how]):
                if how is not None or case != "casting":
                    _CAUGHT_WRITES[case](x)
        except (FloatingPointError, RuntimeWarning, TypeError, _Stop):
            pass
    x -= 0.25
    return np.nansum(x * x * np.arange(1.0, x.size + 1))


@pytest.mark.parametrize("how", ["raise", "warning", "call", "log"])
@pytest.mark.parametrize("case", sorted(_CAUGHT_WRITES))
def test_a_caught_error_of_a_write_leaves_value_and_tangent_as_numpy_left_the_array(case, how):
    """Regression: forward mode wrote the tangent of ``np.multiply(u, 2.0, out=u,
    casting="no", dtype=np.float32)`` before NumPy refused the call (TypeError, caught by f):
    the jvp doubled u's tangent and not u. It skipped the tangent of ``np.sqrt(u, out=u)``
    (and ``u **= 0.5``) under ``np.errstate(invalid="raise")``, whose result NumPy writes
    before raising. ``np.log(u, out=u, where=mask)`` raising so was not written at all, in
    both modes: the value was another than NumPy's. Where warnings are made errors
    (``warnings.simplefilter("error")``), NumPy's RuntimeWarning, raised after it wrote, was
    not taken as its FloatingPointError is: the write went unrecorded (``np.log(u, out=u)``:
    another gradient), or was not made (``np.log.at``, a masked write: another value). Nor
    were the results of ``np.divmod(..., out=(q, r))`` raising either way, nor forward
    mode's ``np.dot(m, v, out=u)`` raising NumPy's RuntimeWarning. Nor was an exception of
    any class raised by the error callback of ``np.errstate(...="call")`` (or a log's
    ``write``), which NumPy calls after writing: reverse mode did not record the write of
    ``np.log(u, out=u)`` (another gradient). Now the value is NumPy's bit for bit, and gradient, jvp and the batched Jacobian are those of the
    program that does not raise; the caller's bytes come back."""
    x = np.array([1.0, -2.0, 4.0, 9.0, 0.3])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(caught_write)(x, case, how)
    expected_value, expected = mutad.value_and_grad(caught_write)(x, case, None)
    assert np.asarray(value).tobytes() == np.asarray(caught_write(x.copy(), case, how)).tobytes()
    assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
    np.testing.assert_allclose(grad, expected, rtol=1e-14)
    tangent = np.array([0.5, -1.0, 2.0, 0.25, 1.0])
    y, dy = mutad.jvp(lambda x: caught_write(x, case, how), (x,), (tangent,))
    assert np.asarray(y).tobytes() == np.asarray(value).tobytes()
    np.testing.assert_allclose(dy, np.sum(expected * tangent), rtol=1e-13)
    np.testing.assert_allclose(mutad.jacfwd(caught_write)(x, case, how), expected, rtol=1e-14)
    assert x.tobytes() == before


@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x), lambda f, x: mutad.jvp(f, (x,), (np.ones_like(x),)),
    lambda f, x: mutad.grad(f, replay=True)(x)])
def test_a_caught_error_of_a_write_into_an_overlapped_array_is_refused(differentiate):
    """Regression: ``np.sqrt(u[::-1], out=u)`` under ``np.errstate(invalid="raise")``: NumPy
    computes into a copy of ``u``, which it drops as it raises, so ``u`` is as it was; mutad
    recorded the write all the same, and the gradient was another (the jvp's too). Whether
    NumPy writes first depends on its memory layout there (it does for ``out=u[:-1]`` of
    ``u[1:]``), so a write raising into an array an operand overlaps otherwise than as the
    same elements is refused by name; the caller's bytes come back."""
    def f(u):
        try:
            with np.errstate(invalid="raise"):
                np.sqrt(u[::-1], out=u)
        except FloatingPointError:
            pass
        return np.nansum(u * u * np.arange(1.0, u.size + 1))

    x = np.array([1.0, -2.0, 4.0, 9.0])
    before = x.tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="overlaps"):
        differentiate(f, x)
    assert x.tobytes() == before


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_tanhs_derivative_far_out_is_zero_without_a_warning(dtype):
    """tanh's derivative is 1 / cosh², below the smallest float past |x| = 710 (float64): it
    is computed with no overflow on the way, whatever |x| (the partial once warned of one in
    ``multiply`` at |x| = 1e308), and a few ulps from the exact value within."""
    big = np.finfo(dtype).max
    x = np.array([big, -big, 800.0, -30.0, 0.5, 0.0, np.inf], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = mutad.gradient(lambda x: np.tanh(x).sum(), x)
    assert g.dtype == dtype
    with np.errstate(over="ignore"):  # (cosh of the largest float64s: inf, as it should)
        exact = (1 / np.cosh(x.astype(np.longdouble))) ** 2
    assert np.array_equal(g[[0, 1, 2, 6]], np.zeros(4, dtype))
    assert np.all(np.abs(g - exact) <= 8 * np.spacing(exact.astype(dtype)).astype(np.longdouble))


_FEW_OFF = {  # a value of the target the inverse of ``x += o`` would not give back, and o's
    "absorbed": (1e-20, 1.0), "subnormal": (5e-324, 1.0), "-0.0": (-0.0, 0.25),
    "nan": (np.nan, 0.5), "inf": (np.inf, 0.5), "exact": (0.5, 0.25)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("case", sorted(_FEW_OFF))
def test_a_write_losing_a_few_of_many_elements_puts_them_back(inverting, dtype, case):
    """``x += o`` into 4,000 elements whose inverse gives back all but a few (``writes._lost``
    asks about those alone): absorbed, subnormal, -0.0, NaN and infinite elements among
    others given back within 2 ulps are put back bit for bit (the derivative in ``c``, which
    reads them, is there the checkpoint policy's, bit for bit), traced and replayed alike,
    and the caller's arrays are unchanged."""
    rng = np.random.default_rng(3)
    n = 4000
    x = rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)
    o = rng.uniform(-1e-3, 1e-3, n)
    value, step = _FEW_OFF[case]
    off = [7, 1999, n - 1]
    x[off] = value
    o[off] = step
    x, o, c = x.astype(dtype), o.astype(dtype), np.ones(n, dtype)

    def f(x, c):
        y = x * c  # whose pullback for c reads x as it was before the write
        x += o
        return (y * np.where(np.isfinite(x), x, 0.0)).real.sum()

    before = x.tobytes() + c.tobytes()
    with np.errstate(invalid="ignore"):
        traced = mutad.value_and_gradient(f, x, c)
        assert x.tobytes() + c.tobytes() == before
        gradient = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
        replayed = [gradient(x, c) for _ in range(3)]
        assert not gradient.reasons
        assert x.tobytes() + c.tobytes() == before
        checkpointed = mutad.value_and_gradient(f, x, c, policy="checkpoint")
    assert x.tobytes() + c.tobytes() == before
    for value, gs in replayed:
        assert np.float64(value).tobytes() == np.float64(traced[0]).tobytes()
        assert [g.tobytes() for g in gs] == [g.tobytes() for g in traced[1]]
    for g, expected in zip(traced[1], checkpointed[1], strict=True):
        assert g[off].tobytes() == expected[off].tobytes()
        np.testing.assert_allclose(g, expected, rtol=8 * np.finfo(dtype).eps, atol=0)


def test_verifications_share_their_scratch_memory_and_find_the_same(monkeypatch, rng):
    """The scratch memory of a verification (``writes._verify``) is kept for the next one
    (``writes._SPARE``): a later, shorter write verified in memory that an earlier one left
    its values and marks in finds what it finds in new memory; a verification while the kept
    memory is in use gets its own, and memory larger than a piece is not kept."""
    from mutad.core.registry import rule_for
    from mutad.engines import writes

    monkeypatch.setattr(writes, "CHUNK", 4)
    monkeypatch.setattr(writes, "PIECE", 2)
    monkeypatch.setattr(writes, "_SPARE", threading.local())
    rule = rule_for(np.add).elementwise
    big = rng.uniform(-1.0, 1.0, 40)
    big[::3] = 1e300  # a small term absorbed: lost elements in every piece
    small = rng.uniform(-1.0, 1.0, 30)
    small[5] = 1e300

    def verify(t, o):
        return writes._verify(np.add, rule.inverse[0], t, [t, o], 0, {}, rule.growth)

    fresh = [verify(small, 1e-17), verify(small, big[:30])]
    writes._SPARE.scratch = {}
    verify(big, 1e-17)
    kept = writes._SPARE.scratch[(np, big.dtype)]
    assert kept[0].size == 8
    for (lost, measures), (fresh_lost, fresh_measures) in zip(
            [verify(small, 1e-17), verify(small, big[:30])], fresh):
        assert writes._SPARE.scratch[(np, big.dtype)] is kept  # the same memory, again
        assert measures == fresh_measures
        np.testing.assert_array_equal(lost_mask(lost, small.size),
                                      lost_mask(fresh_lost, small.size))
    taken = writes._take_scratch(np, big.dtype, 8)
    assert taken is kept and writes._take_scratch(np, big.dtype, 8) is not kept
    writes._give_back_scratch(taken)
    verify(np.ones((9, 9))[:, :3], 1e-17)  # not a long contiguous target: one piece of 27
    assert writes._SPARE.scratch[(np, big.dtype)] is kept
