"""mutad.scipy: special functions, lfilter and the pure scipy.linalg counterparts.

Every function is proven with mutad.testing.check_rule (finite differences, accumulation,
restoration, aliased arguments, both policies); functions of a symmetric matrix, which read one
triangle, with check_grads along symmetric directions. Plain calls must be SciPy's own.
"""

from typing import Callable, NamedTuple

import numpy as np
import pytest
import scipy.linalg
import scipy.signal
import scipy.special

import mutad
from mutad.scipy import linalg, signal, special
from mutad.testing import check_rule

POLICIES = ("restore", "checkpoint")


class Case(NamedTuple):
    name: str
    function: Callable  # a mutad.scipy function
    sample: Callable  # rng -> tuple of positional arguments
    symmetric: bool = False  # the first argument is a symmetric matrix read in one triangle


# ----------------------------------------------------------------------------------------------
# Input domains


def normal(*shape, scale=1.0):
    return lambda rng: scale * rng.standard_normal(shape)


def uniform(low, high, *shape):
    return lambda rng: rng.uniform(low, high, shape)


def well_conditioned(n):
    return lambda rng: rng.standard_normal((n, n)) + n * np.eye(n)


def needs_pivoting(n):
    """A well-conditioned matrix with its rows rolled: LU's partial pivoting undoes the roll,
    a cyclic permutation (one that is not its own inverse)."""
    return lambda rng: np.roll(well_conditioned(n)(rng), 1, axis=0)


def symmetric_positive_definite(n):
    def sample(rng):
        m = rng.standard_normal((n, n))
        return m @ m.T + n * np.eye(n)

    return sample


def cholesky_factor(n, lower):
    return lambda rng: scipy.linalg.cho_factor(symmetric_positive_definite(n)(rng), lower=lower)


def lu_factors(n, matrix=well_conditioned):
    return lambda rng: scipy.linalg.lu_factor(matrix(n)(rng))


def constant(value):
    return lambda rng: value


def arguments(*samplers):
    return lambda rng: tuple(sample(rng) for sample in samplers)


STABLE_IIR = constant(np.array([1.0, -0.6, 0.2]))
UNNORMALISED_IIR = constant(np.array([2.0, -0.5, 0.3, -0.1]))  # a[0] != 1: SciPy divides by it
FIR = constant(np.array([1.0]))

# fmt: off
SPECIAL_CASES = [
    # The ufuncs of scipy.special are rows of tests/cases.py's UFUNC_CASES; these are the
    # functions SciPy writes in Python.
    Case("polygamma",            special.polygamma, arguments(constant(1), uniform(0.5, 3.0, 5))),
    Case("polygamma_orders",     special.polygamma, arguments(constant(np.array([0, 1, 2])),
                                                              uniform(0.5, 3.0, 3))),
    Case("multigammaln",         special.multigammaln, arguments(uniform(2.0, 5.0, 4), constant(3))),
    Case("multigammaln_scalar",  special.multigammaln, arguments(uniform(1.0, 3.0), constant(2))),
    Case("softmax",              special.softmax,   arguments(normal(3, 4))),
    Case("softmax_axis",         special.softmax,   arguments(normal(3, 4), constant(1))),
    Case("softmax_axes",         special.softmax,   arguments(normal(2, 3, 4), constant((0, 2)))),
    Case("log_softmax",          special.log_softmax, arguments(normal(5))),
    Case("log_softmax_axis",     special.log_softmax, arguments(normal(3, 4), constant(0))),
    Case("logsumexp",            special.logsumexp, arguments(normal(3, 4))),
    Case("logsumexp_axis",       special.logsumexp, arguments(normal(3, 4), constant(1))),
    Case("logsumexp_axes_kept",  special.logsumexp, arguments(normal(2, 3, 4), constant((0, 2)),
                                                              constant(None), constant(True))),
    Case("logsumexp_weights",    special.logsumexp, arguments(uniform(0.1, 2.0, 3, 4), constant(0),
                                                              uniform(0.1, 2.0, 3, 4))),
    Case("logsumexp_broadcast_weights", special.logsumexp,
         arguments(normal(3, 4), constant(-1), uniform(0.1, 2.0, 4))),
    Case("logsumexp_signed",     special.logsumexp, arguments(normal(3, 4), constant(1),
                                                              normal(4), constant(False),
                                                              constant(True))),
]

SIGNAL_CASES = [
    Case("lfilter_fir",          signal.lfilter, arguments(normal(3), FIR, normal(9))),
    Case("lfilter_iir",          signal.lfilter, arguments(normal(2), STABLE_IIR, normal(9))),
    Case("lfilter_unnormalised", signal.lfilter, arguments(normal(3), UNNORMALISED_IIR, normal(9))),
    Case("lfilter_long_b",       signal.lfilter, arguments(normal(5), STABLE_IIR, normal(4))),
    Case("lfilter_fir_axis_last", signal.lfilter, arguments(normal(3), FIR, normal(3, 8))),
    Case("lfilter_fir_axis_0",   signal.lfilter, arguments(normal(3), FIR, normal(8, 3),
                                                           constant(0))),
    Case("lfilter_iir_axis_last", signal.lfilter, arguments(normal(3), STABLE_IIR, normal(3, 8),
                                                            constant(-1))),
    Case("lfilter_iir_axis_0",   signal.lfilter, arguments(normal(2), UNNORMALISED_IIR,
                                                           normal(8, 3), constant(0))),
    # zi: the initial state, K = max(len(a), len(b)) - 1 values along the axis
    Case("lfilter_fir_zi",       signal.lfilter, arguments(normal(3), FIR, normal(8), constant(-1),
                                                           normal(2))),
    Case("lfilter_iir_zi",       signal.lfilter, arguments(normal(2), UNNORMALISED_IIR, normal(3, 8),
                                                           constant(-1), normal(3, 3))),
    Case("lfilter_iir_zi_axis_0", signal.lfilter, arguments(normal(4), STABLE_IIR, normal(8, 2),
                                                            constant(0), normal(3, 2))),
    Case("lfilter_zi_short_x",   signal.lfilter, arguments(normal(2), UNNORMALISED_IIR, normal(2),
                                                           constant(-1), normal(3))),
    Case("convolve",             signal.convolve, arguments(normal(5), normal(3))),
    Case("convolve_same",        signal.convolve, arguments(normal(4), normal(6), constant("same"))),
    Case("convolve_valid",       signal.convolve, arguments(normal(3), normal(5), constant("valid"))),
    Case("convolve_2d_same",     signal.convolve, arguments(normal(4, 3), normal(2, 2),
                                                            constant("same"))),
    Case("convolve_2d_valid_fft", signal.convolve, arguments(normal(5, 4), normal(3, 1),
                                                             constant("valid"), constant("fft"))),
    Case("convolve_scalars",     signal.convolve, arguments(normal(), normal())),
]

LINALG_CASES = [
    Case("cholesky",             linalg.cholesky,   arguments(symmetric_positive_definite(4)),
         symmetric=True),
    Case("cholesky_lower",       linalg.cholesky,   arguments(symmetric_positive_definite(4),
                                                              constant(True)), symmetric=True),
    Case("cho_factor",           linalg.cho_factor, arguments(symmetric_positive_definite(4)),
         symmetric=True),
    Case("cho_factor_lower",     linalg.cho_factor, arguments(symmetric_positive_definite(4),
                                                              constant(True)), symmetric=True),
    Case("cho_solve",            linalg.cho_solve,  arguments(cholesky_factor(4, False), normal(4, 2))),
    Case("cho_solve_lower",      linalg.cho_solve,  arguments(cholesky_factor(4, True), normal(4))),
    Case("solve_triangular",     linalg.solve_triangular, arguments(well_conditioned(4), normal(4, 2))),
    Case("solve_triangular_lower_transposed", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4), constant("T"), constant(True))),
    Case("solve_triangular_unit", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4, 3), constant(0), constant(True), constant(True))),
    Case("solve_triangular_conjugate_unit", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4), constant(2), constant(False), constant(True))),
    Case("lu_factor",            linalg.lu_factor,  arguments(well_conditioned(5))),
    Case("lu_factor_pivoted",    linalg.lu_factor,  arguments(needs_pivoting(5))),
    Case("lu_solve",             linalg.lu_solve,   arguments(lu_factors(4), normal(4, 2))),
    Case("lu_solve_pivoted",     linalg.lu_solve,   arguments(lu_factors(4, needs_pivoting),
                                                              normal(4))),
    Case("lu_solve_transposed",  linalg.lu_solve,   arguments(lu_factors(4), normal(4), constant(1))),
    Case("solve",                linalg.solve,      arguments(well_conditioned(4), normal(4, 2))),
    Case("solve_vector",         linalg.solve,      arguments(well_conditioned(4), normal(4))),
    Case("inv",                  linalg.inv,        arguments(well_conditioned(4))),
    Case("expm",                 linalg.expm,       arguments(normal(4, 4, scale=0.5))),
    Case("expm_stack",           linalg.expm,       arguments(normal(2, 3, 3, scale=0.5))),
    Case("solve_sylvester",      linalg.solve_sylvester, arguments(well_conditioned(3),
                                                                   well_conditioned(3), normal(3, 3))),
    Case("solve_sylvester_rectangular", linalg.solve_sylvester,
         arguments(well_conditioned(2), well_conditioned(4), normal(2, 4))),
    Case("sqrtm",                linalg.sqrtm,      arguments(symmetric_positive_definite(3))),
    Case("sqrtm_nonsymmetric",   linalg.sqrtm,      arguments(well_conditioned(3))),
]
# fmt: on

# solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a, transposed)
LINALG_CASES += [
    Case(f"solve_{(assume_a or 'detected').replace(' ', '_')}"
         f"{'_transposed' if transposed else ''}", linalg.solve,
         arguments(well_conditioned(4), normal(4, 2), constant(False), constant(False),
                   constant(False), constant(True), constant(assume_a), constant(transposed)))
    for assume_a in ("gen", "banded", "lower triangular", "upper triangular", "diagonal",
                     "tridiagonal")
    for transposed in (False, True)
] + [
    Case(f"solve_{assume_a}{'_lower' if lower else ''}", linalg.solve,
         arguments(symmetric_positive_definite(4), normal(4, 2), constant(lower),
                   constant(False), constant(False), constant(True), constant(assume_a)),
         symmetric=True)
    for assume_a in ("sym", "her", "pos")
    for lower in (False, True)
]

CASES = SPECIAL_CASES + SIGNAL_CASES + LINALG_CASES


def case_id(case):
    return case.name


def symmetrised(function):
    """``function`` of the symmetric part of its first argument, so finite differences move
    along the symmetric directions whose derivative a one-triangle function's gradient gives."""
    return lambda a, *rest: function(0.5 * (a + a.T), *rest)


def as_tuple(result):
    return tuple(result) if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case, rng):
    args = case.sample(rng)
    if case.symmetric:
        for policy in POLICIES:
            mutad.check_grads(symmetrised(case.function), *args, policy=policy)
    else:
        assert check_rule(case.function, *args) == 0.0


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_plain_call_is_scipys_own(case, rng):
    args = case.sample(rng)
    ours, theirs = as_tuple(case.function(*args)), as_tuple(case.function.fn(*args))
    assert len(ours) == len(theirs)
    for mine, scipys in zip(ours, theirs, strict=True):
        assert type(mine) is type(scipys)
        assert np.array_equal(mine, scipys)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_traced_call_gives_the_plain_result(case, rng):
    args = case.sample(rng)
    y, _ = mutad.pullback(case.function, *args)
    for traced, plain in zip(as_tuple(y), as_tuple(case.function.fn(*args)), strict=True):
        assert np.array_equal(traced, plain)


def curved(function):
    """``function`` with np.sin applied to each float output, so that under nested
    differentiation the cotangents reaching its rule are traced by the outer one too."""

    def composed(*args):
        return tuple(np.sin(y) if getattr(y, "dtype", None) == float else y
                     for y in as_tuple(function(*args)))

    return composed


def with_read_only_pivots(args):
    """``args`` with the pivots of a ``(lu, piv)`` argument made read-only: jvp writes a
    writable integer argument back after it runs, which fails under hvp once the outer tape
    froze it (a core bug, see test_hvp_with_writable_pivots)."""
    for arg in args:
        if isinstance(arg, tuple) and isinstance(arg[-1], np.ndarray):  # (lu, piv)
            arg[-1].flags.writeable = False
    return args


@pytest.mark.parametrize("case", LINALG_CASES, ids=case_id)
def test_linalg_second_derivatives(case, rng):
    """Hessian-vector products, reverse over forward and nested reverse, against finite
    differences of the gradient: the rules compute with the wrappers, which nest."""
    args = with_read_only_pivots(case.sample(rng))
    function = symmetrised(case.function) if case.symmetric else case.function
    for policy in POLICIES:
        mutad.check_grads(function, *args, order=2, policy=policy)
    mutad.check_grads(curved(function), *args, order=2)


def test_hvp_with_writable_pivots(rng):
    factors, b = lu_factors(4)(rng), rng.standard_normal(4)
    mutad.check_grads(linalg.lu_solve, factors, b, order=2)


def test_the_wrappers_are_scipys_functions():
    assert special.gammaln is scipy.special.gammaln  # a ufunc with a row: SciPy's own
    assert special.logsumexp.fn is scipy.special.logsumexp
    assert signal.lfilter.fn is scipy.signal.lfilter
    assert linalg.expm.fn is scipy.linalg.expm
    assert special.logsumexp.__doc__ == scipy.special.logsumexp.__doc__


# ----------------------------------------------------------------------------------------------
# Special functions at the edges of their domains


def test_xlogy_is_zero_with_a_zero_gradient_where_x_is_zero():
    x, y = np.array([0.0, 0.0, 1.0]), np.array([0.0, 2.0, 2.0])
    dx, dy = mutad.gradient(lambda x, y: special.xlogy(x, y).sum(), x, y)
    assert np.array_equal(dx, [0.0, np.log(2.0), np.log(2.0)])
    assert np.array_equal(dy, [0.0, 0.0, 0.5])


def test_logsumexp_gradient_is_stable_for_large_and_vanishing_terms():
    grad, = mutad.gradient(special.logsumexp, np.array([1000.0, 1000.0, -np.inf]))
    assert np.allclose(grad, [0.5, 0.5, 0.0], rtol=1e-12, atol=0.0)
    with np.errstate(divide="ignore"):
        grad, = mutad.gradient(special.logsumexp, np.full(3, -np.inf))
    assert np.array_equal(grad, np.zeros(3))


def test_logsumexp_weights_given_by_keyword_are_differentiated(rng):
    a, weights = rng.standard_normal((3, 4)), rng.uniform(0.1, 2.0, (3, 4))
    for policy in POLICIES:
        mutad.check_grads(lambda a, w: special.logsumexp(a, axis=1, b=w), a, weights,
                          policy=policy)


# ----------------------------------------------------------------------------------------------
# lfilter


def test_lfilter_axis_given_by_keyword(rng):
    b, a, x = rng.standard_normal(3), np.array([1.5, -0.3]), rng.standard_normal((7, 2))
    for policy in POLICIES:
        mutad.check_grads(lambda b, a, x: signal.lfilter(b, a, x, axis=0), b, a, x, policy=policy)


def test_lfilter_initial_conditions_given_by_keyword(rng):
    b, a, x = rng.standard_normal(3), np.array([1.5, -0.3]), rng.standard_normal((7, 2))
    zi = rng.standard_normal((2, 1))  # broadcast across x's other axis, as SciPy allows

    def final_state_and_energy(b, a, x, zi):
        y, zf = signal.lfilter(b, a, x, axis=0, zi=zi)
        return zf, (y * y).sum()

    for policy in POLICIES:
        mutad.check_grads(final_state_and_energy, b, a, x, zi, policy=policy)


# ----------------------------------------------------------------------------------------------
# scipy.linalg compositions and overwrite flags


def test_cholesky_factor_then_solve(rng):
    a, b = symmetric_positive_definite(4)(rng), rng.standard_normal(4)

    def energy(a, b):
        x = linalg.cho_solve(linalg.cho_factor(a, lower=True), b)
        return b @ x

    for policy in POLICIES:
        for order in (1, 2):
            mutad.check_grads(symmetrised(energy), a, b, policy=policy, order=order)
    da, _ = mutad.gradient(energy, a, b)
    x = np.linalg.solve(a, b)
    assert np.allclose(da, -np.outer(x, x), rtol=1e-10, atol=0.0)  # symmetric gradient


def test_lu_factor_then_solve(rng):
    a, b = well_conditioned(4)(rng), rng.standard_normal((4, 2))

    def f(a, b):
        factors = linalg.lu_factor(a)
        return linalg.lu_solve(factors, b) + linalg.lu_solve(factors, b, trans=1)

    for policy in POLICIES:
        for order in (1, 2):
            mutad.check_grads(f, a, b, policy=policy, order=order)


def test_inv_with_declared_structures(rng):
    a = well_conditioned(4)(rng)
    for order in (1, 2):
        for assume_a in ("gen", "lower triangular", "upper triangular", "diagonal"):
            for policy in POLICIES:
                mutad.check_grads(lambda a: linalg.inv(a, assume_a=assume_a), a, policy=policy,
                                  order=order)
        spd = symmetric_positive_definite(4)(rng)
        for assume_a in ("sym", "pos"):
            for lower in (False, True):
                mutad.check_grads(
                    symmetrised(lambda a: linalg.inv(a, assume_a=assume_a, lower=lower)), spd,
                    order=order)


def fortran(x):
    return np.asfortranarray(x.copy())


# Each call with its overwrite flag given, on a Fortran-ordered float64 array, which SciPy really
# does overwrite when it is plain and the flag is set.
SQUARE, SPD, RIGHT_HAND_SIDES = well_conditioned(4), symmetric_positive_definite(4), normal(4, 2)
TRIANGLE = np.triu(np.ones((4, 4)))
# fmt: off
OVERWRITING_CALLS = [
    ("inv",              lambda a, flag: linalg.inv(a, overwrite_a=flag),               SQUARE),
    ("cholesky",         lambda a, flag: linalg.cholesky(a, overwrite_a=flag),          SPD),
    ("cho_factor",       lambda a, flag: linalg.cho_factor(a, overwrite_a=flag)[0],     SPD),
    ("lu_factor",        lambda a, flag: linalg.lu_factor(a, overwrite_a=flag)[0],      SQUARE),
    ("solve_a",          lambda a, flag: linalg.solve(a, np.ones(4), overwrite_a=flag), SQUARE),
    ("solve_b",          lambda b, flag: linalg.solve(TRIANGLE + TRIANGLE.T, b, overwrite_b=flag),
     RIGHT_HAND_SIDES),
    ("solve_triangular", lambda b, flag: linalg.solve_triangular(TRIANGLE, b, overwrite_b=flag),
     RIGHT_HAND_SIDES),
    ("cho_solve",        lambda b, flag: linalg.cho_solve((TRIANGLE, False), b, overwrite_b=flag),
     RIGHT_HAND_SIDES),
    ("lu_solve",         lambda b, flag: linalg.lu_solve(scipy.linalg.lu_factor(TRIANGLE), b,
                                                         overwrite_b=flag),
     RIGHT_HAND_SIDES),
]
# fmt: on
OVERWRITING_IDS = [name for name, _, _ in OVERWRITING_CALLS]


@pytest.mark.parametrize("name, call, sample", OVERWRITING_CALLS, ids=OVERWRITING_IDS)
def test_overwrite_flags_pass_through_on_plain_arrays(name, call, sample, rng):
    value = fortran(sample(rng))
    argument = value.copy(order="F")
    call(argument, True)
    assert not np.array_equal(argument, value), "SciPy did not overwrite: the test proves nothing"


@pytest.mark.parametrize("name, call, sample", OVERWRITING_CALLS, ids=OVERWRITING_IDS)
def test_overwrite_flags_never_overwrite_a_traced_input(name, call, sample, rng):
    value = fortran(sample(rng))
    argument = value.copy(order="F")

    def reads_its_argument_after(x, flag=True):
        return call(x, flag) * np.sin(x)  # an overwritten x would change value and gradient

    y, _ = mutad.pullback(reads_its_argument_after, argument)
    assert np.array_equal(argument, value)  # the call left its traced argument as it was
    assert np.array_equal(y, call(value.copy(), False) * np.sin(value))

    # The flag changes nothing: the gradient is that of the call without it, itself checked
    # against finite differences (which run plain, where SciPy would overwrite).
    without_flag = (lambda x: reads_its_argument_after(x, False))
    if name in ("cholesky", "cho_factor"):
        without_flag = symmetrised(without_flag)
    mutad.check_grads(without_flag, argument)
    for policy in POLICIES:
        gradient = mutad.gradient(lambda x: reads_its_argument_after(x).sum(), argument,
                                  policy=policy)
        expected = mutad.gradient(lambda x: reads_its_argument_after(x, False).sum(), argument,
                                  policy=policy)
        assert np.array_equal(gradient[0], expected[0])


# Decisions: xlogy's zeros are decided when it is computed ------------------------------------

from decisions import check_decision_kept, then_disturbed  # noqa: E402


@pytest.mark.parametrize(("operation", "differentiable"), [
    (lambda x: special.xlogy(x, np.where(x == 0, 0.0, 0.5)), False),
    (lambda x: special.xlogy(np.where(x == 0, 0.0, 0.5), x), False),
    (lambda x: special.logsumexp(x), True),
    (lambda x: special.xlog1py(x, np.where(x == 0, -1.0, 0.5)), False),
    (lambda x: special.rel_entr(x, np.where(x == 0, 0.0, 0.5)), False),
    (lambda x: special.rgamma(x - np.where(x == 0, 0.0, 0.5)), False),
    (lambda x: special.i0e(x), False),
    (lambda x: special.ive(0.0, x), False),
], ids=["xlogy-x-at-0", "xlogy-y-at-0", "logsumexp", "xlog1py-at-0", "rel_entr-at-0",
        "rgamma-at-a-pole", "i0e-at-0", "ive-at-0"])
def test_special_decisions_survive_restoration_by_inversion(operation, differentiable):
    x = np.array([0.0, 0.7, 0.2, 0.0, 0.4])
    check_decision_kept(then_disturbed(operation), x, differentiable=differentiable)


# ----------------------------------------------------------------------------------------------
# scipy.special ufuncs by SciPy's own names (their rows are cases of tests/cases.py)


@pytest.mark.parametrize("program", [
    lambda v, x: scipy.special.jv(v, x),
    lambda v, x: scipy.special.kve(v, x, out=x),
    lambda a, x: scipy.special.gammainc(a, x),
    lambda a, x: scipy.special.betainc(a, 2.0, x),
], ids=["jv", "kve_in_place", "gammainc", "betainc"])
def test_an_argument_without_a_derivative_is_refused_when_traced(program, rng):
    order, x = rng.uniform(0.5, 2.0, 3), rng.uniform(0.2, 0.8, 3)
    before = (order.tobytes(), x.tobytes())
    with pytest.raises(mutad.MutadError, match="constant"):
        mutad.gradient(lambda v, x: program(v, x).sum(), order, x)
    with pytest.raises(mutad.MutadError, match="constant"):
        mutad.jvp(program, (order, x.copy()), (np.ones(3), np.zeros(3)))
    assert (order.tobytes(), x.tobytes()) == before
    # held constant, the same call differentiates in its other argument
    mutad.check_grads(lambda x: program(order, x), x)
    mutad.check_jvp(lambda x: program(order, x), x)


def test_reciprocal_gamma_has_its_derivative_at_the_poles_of_gamma():
    x = np.array([0.0, -1.0, -2.0, -3.0])
    grad, = mutad.gradient(lambda x: scipy.special.rgamma(x).sum(), x)
    assert np.array_equal(grad, [1.0, -1.0, 2.0, -6.0])  # (-1)^n n!


def test_special_ufuncs_write_in_place_by_their_own_names(rng):
    def f(x, v):
        z = np.zeros_like(x)
        scipy.special.expit(x, out=z)
        z *= scipy.special.gammaln(v)
        scipy.special.log_ndtr(z[1:], out=z[:-1])
        return z

    x, v = rng.standard_normal(5), rng.uniform(0.5, 3.0, 5)
    for policy in POLICIES:
        mutad.check_grads(f, x, v, policy=policy, order=2)
    mutad.check_jvp(f, x, v)


@pytest.mark.parametrize("program", [
    lambda x: scipy.special.softmax(x) * x,
    lambda x: scipy.special.log_softmax(x, axis=0) * x,
    lambda x: scipy.special.logsumexp(x, b=x * x),
    lambda x: scipy.special.polygamma(1, x + 2.0),
    lambda x: scipy.special.multigammaln(x + 3.0, 2),
], ids=["softmax", "log_softmax", "logsumexp", "polygamma", "multigammaln"])
def test_special_functions_written_in_python_by_scipys_names(program):
    x = np.array([0.3, 1.2, -0.4])
    for policy in POLICIES:
        mutad.check_grads(program, x, policy=policy, order=2)
    mutad.check_jvp(program, x)


def test_sqrtm_with_a_complex_root_is_refused():
    a = -np.eye(2) + 0.1 * np.ones((2, 2))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="complex"):
        mutad.gradient(lambda a: scipy.linalg.sqrtm(a).sum(), a)
