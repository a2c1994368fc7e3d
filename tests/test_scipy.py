"""mutad.scipy: special functions, lfilter and the pure scipy.linalg counterparts.

Every function is proven with mutad.testing.check_rule (finite differences, accumulation,
restoration, aliased arguments, both policies); functions of a symmetric matrix, which read one
triangle, with check_grads along symmetric directions. Plain calls must be SciPy's own.
"""

import math

import numpy as np
import pytest
import scipy.fft
import scipy.fftpack
import scipy.linalg
import scipy.signal
import scipy.stats
import scipy.special

import mutad
from cases import Case, arguments, replays_as_traced, case_id, check_complex, complexified, constant
from rule_checks import (WHERE, P, V4, X3, Const, X, align_columns, check_forward_rule,
                         check_reverse_over_forward, check_transposed_by_reverse_mode, dominant,
                         forward_case, normal_array, positive_array, rule_case, spd)
from cases import normal as normal_sampler
from mutad.scipy import linalg, signal, special
from mutad.testing import check_rule

POLICIES = ("restore", "checkpoint")


# ----------------------------------------------------------------------------------------------
# Input domains


def normal(*shape, scale=1.0):
    return lambda rng: scale * rng.standard_normal(shape)


def uniform(low, high, *shape):
    return lambda rng: rng.uniform(low, high, shape)


def well_conditioned(n, batch=()):
    return lambda rng: rng.standard_normal(batch + (n, n)) + n * np.eye(n)


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


STABLE_IIR = constant(np.array([1.0, -0.6, 0.2]))
UNNORMALISED_IIR = constant(np.array([2.0, -0.5, 0.3, -0.1]))  # a[0] != 1: SciPy divides by it
FIR = constant(np.array([1.0]))

# fmt: off
SPECIAL_CASES = [
    # The ufuncs of scipy.special are rows of tests/cases.py's UFUNC_CASES; these are the
    # functions SciPy writes in Python.
    Case.named("polygamma",            special.polygamma, arguments(constant(1), uniform(0.5, 3.0, 5))),
    Case.named("polygamma_orders",     special.polygamma, arguments(constant(np.array([0, 1, 2])),
                                                              uniform(0.5, 3.0, 3))),
    Case.named("multigammaln",         special.multigammaln, arguments(uniform(2.0, 5.0, 4), constant(3))),
    Case.named("multigammaln_scalar",  special.multigammaln, arguments(uniform(1.0, 3.0), constant(2))),
    Case.named("softmax",              special.softmax,   arguments(normal(3, 4))),
    Case.named("softmax_axis",         special.softmax,   arguments(normal(3, 4), constant(1))),
    Case.named("softmax_axes",         special.softmax,   arguments(normal(2, 3, 4), constant((0, 2)))),
    Case.named("log_softmax",          special.log_softmax, arguments(normal(5))),
    Case.named("log_softmax_axis",     special.log_softmax, arguments(normal(3, 4), constant(0))),
    Case.named("logsumexp",            special.logsumexp, arguments(normal(3, 4))),
    Case.named("logsumexp_axis",       special.logsumexp, arguments(normal(3, 4), constant(1))),
    Case.named("logsumexp_axes_kept",  special.logsumexp, arguments(normal(2, 3, 4), constant((0, 2)),
                                                              constant(None), constant(True))),
    Case.named("logsumexp_weights",    special.logsumexp, arguments(uniform(0.1, 2.0, 3, 4), constant(0),
                                                              uniform(0.1, 2.0, 3, 4))),
    Case.named("logsumexp_broadcast_weights", special.logsumexp,
         arguments(normal(3, 4), constant(-1), uniform(0.1, 2.0, 4))),
    Case.named("logsumexp_signed",     special.logsumexp, arguments(normal(3, 4), constant(1),
                                                              normal(4), constant(False),
                                                              constant(True))),
]

SIGNAL_CASES = [
    Case.named("lfilter_fir",          signal.lfilter, arguments(normal(3), FIR, normal(9))),
    Case.named("lfilter_iir",          signal.lfilter, arguments(normal(2), STABLE_IIR, normal(9))),
    Case.named("lfilter_unnormalised", signal.lfilter, arguments(normal(3), UNNORMALISED_IIR, normal(9))),
    Case.named("lfilter_long_b",       signal.lfilter, arguments(normal(5), STABLE_IIR, normal(4))),
    Case.named("lfilter_fir_axis_last", signal.lfilter, arguments(normal(3), FIR, normal(3, 8))),
    Case.named("lfilter_fir_axis_0",   signal.lfilter, arguments(normal(3), FIR, normal(8, 3),
                                                           constant(0))),
    Case.named("lfilter_iir_axis_last", signal.lfilter, arguments(normal(3), STABLE_IIR, normal(3, 8),
                                                            constant(-1))),
    Case.named("lfilter_iir_axis_0",   signal.lfilter, arguments(normal(2), UNNORMALISED_IIR,
                                                           normal(8, 3), constant(0))),
    # zi: the initial state, K = max(len(a), len(b)) - 1 values along the axis
    Case.named("lfilter_fir_zi",       signal.lfilter, arguments(normal(3), FIR, normal(8), constant(-1),
                                                           normal(2))),
    Case.named("lfilter_iir_zi",       signal.lfilter, arguments(normal(2), UNNORMALISED_IIR, normal(3, 8),
                                                           constant(-1), normal(3, 3))),
    Case.named("lfilter_iir_zi_axis_0", signal.lfilter, arguments(normal(4), STABLE_IIR, normal(8, 2),
                                                            constant(0), normal(3, 2))),
    Case.named("lfilter_zi_short_x",   signal.lfilter, arguments(normal(2), UNNORMALISED_IIR, normal(2),
                                                           constant(-1), normal(3))),
    Case.named("convolve",             signal.convolve, arguments(normal(5), normal(3))),
    Case.named("convolve_same",        signal.convolve, arguments(normal(4), normal(6), constant("same"))),
    Case.named("convolve_valid",       signal.convolve, arguments(normal(3), normal(5), constant("valid"))),
    Case.named("convolve_2d_same",     signal.convolve, arguments(normal(4, 3), normal(2, 2),
                                                            constant("same"))),
    Case.named("convolve_2d_valid_fft", signal.convolve, arguments(normal(5, 4), normal(3, 1),
                                                             constant("valid"), constant("fft"))),
    Case.named("convolve_scalars",     signal.convolve, arguments(normal(), normal())),
]

LINALG_CASES = [
    Case.named("cholesky",             linalg.cholesky,   arguments(symmetric_positive_definite(4)),
         symmetric=(0,)),
    Case.named("cholesky_lower",       linalg.cholesky,   arguments(symmetric_positive_definite(4),
                                                              constant(True)), symmetric=(0,)),
    Case.named("cho_factor",           linalg.cho_factor, arguments(symmetric_positive_definite(4)),
         symmetric=(0,)),
    Case.named("cho_factor_lower",     linalg.cho_factor, arguments(symmetric_positive_definite(4),
                                                              constant(True)), symmetric=(0,)),
    Case.named("cho_solve",            linalg.cho_solve,  arguments(cholesky_factor(4, False), normal(4, 2))),
    Case.named("cho_solve_lower",      linalg.cho_solve,  arguments(cholesky_factor(4, True), normal(4))),
    Case.named("solve_triangular",     linalg.solve_triangular, arguments(well_conditioned(4), normal(4, 2))),
    # broadcast against a batch (a vector against a batch of matrices, solved as columns)
    Case.named("solve_triangular_broadcast_matrix", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(2, 4, 2), constant(1))),
    Case.named("solve_triangular_batched_vector", linalg.solve_triangular,
         arguments(well_conditioned(4, (2,)), normal(4), constant(0), constant(True))),
    Case.named("solve_triangular_lower_transposed", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4), constant("T"), constant(True))),
    Case.named("solve_triangular_unit", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4, 3), constant(0), constant(True), constant(True))),
    Case.named("solve_triangular_conjugate_unit", linalg.solve_triangular,
         arguments(well_conditioned(4), normal(4), constant(2), constant(False), constant(True))),
    Case.named("lu_factor",            linalg.lu_factor,  arguments(well_conditioned(5))),
    Case.named("lu_factor_pivoted",    linalg.lu_factor,  arguments(needs_pivoting(5))),
    Case.named("lu_solve",             linalg.lu_solve,   arguments(lu_factors(4), normal(4, 2))),
    Case.named("lu_solve_pivoted",     linalg.lu_solve,   arguments(lu_factors(4, needs_pivoting),
                                                              normal(4))),
    Case.named("lu_solve_transposed",  linalg.lu_solve,   arguments(lu_factors(4), normal(4), constant(1))),
    Case.named("solve",                linalg.solve,      arguments(well_conditioned(4), normal(4, 2))),
    Case.named("solve_vector",         linalg.solve,      arguments(well_conditioned(4), normal(4))),
    # a matrix broadcast against a batch of right-hand sides, a vector against a batch of
    # matrices (each solved as one column): the reverse pass raised NumPy's errors
    Case.named("solve_broadcast_matrix", linalg.solve,    arguments(well_conditioned(4), normal(2, 4, 2))),
    Case.named("solve_batched_vector", linalg.solve,      arguments(well_conditioned(4, (2,)), normal(4))),
    Case.named("solve_batched_matrix_broadcast_b", linalg.solve, arguments(well_conditioned(4, (2,)),
                                                                           normal(4, 3))),
    Case.named("inv",                  linalg.inv,        arguments(well_conditioned(4))),
    Case.named("expm",                 linalg.expm,       arguments(normal(4, 4, scale=0.5))),
    Case.named("expm_stack",           linalg.expm,       arguments(normal(2, 3, 3, scale=0.5))),
    Case.named("solve_sylvester",      linalg.solve_sylvester, arguments(well_conditioned(3),
                                                                   well_conditioned(3), normal(3, 3))),
    Case.named("solve_sylvester_rectangular", linalg.solve_sylvester,
         arguments(well_conditioned(2), well_conditioned(4), normal(2, 4))),
    Case.named("sqrtm",                linalg.sqrtm,      arguments(symmetric_positive_definite(3))),
    Case.named("sqrtm_nonsymmetric",   linalg.sqrtm,      arguments(well_conditioned(3))),
    # NumPy's decompositions by SciPy's names: SciPy's values, np.linalg's derivatives (eigh's
    # and svd's vectors, whose signs LAPACK may flip between nearby matrices, have sign-free
    # tests of their own below)
    Case.named("eigvalsh",             linalg.eigvalsh,   arguments(symmetric_positive_definite(4)),
         symmetric=(0,)),
    Case.named("svd_values",           linalg.svd,        arguments(normal(3, 5), constant(True),
                                                              constant(False))),
    Case.named("det",                  linalg.det,        arguments(normal(4, 4))),
    Case.named("det_stack",            linalg.det,        arguments(normal(2, 3, 3))),
    Case.named("norm",                 linalg.norm,       arguments(normal(3, 4))),
    Case.named("norm_nuclear",         linalg.norm,       arguments(normal(3, 4), constant("nuc"))),
    # SciPy's BLAS and LAPACK norms, which return Python floats
    Case.named("norm_vector",          linalg.norm,       arguments(normal(5))),
    Case.named("norm_one",             linalg.norm,       arguments(normal(3, 4), constant(1))),
    Case.named("norm_axis",            linalg.norm,       arguments(normal(3, 4), constant(3),
                                                              constant(1))),
    Case.named("qr",                   linalg.qr,         arguments(well_conditioned(4))),
    Case.named("qr_economic",          linalg.qr,         arguments(normal(5, 3), constant(False),
                                                              constant(None), constant("economic"))),
    Case.named("qr_r",                 linalg.qr,         arguments(normal(5, 3), constant(False),
                                                              constant(None), constant("r"))),
    Case.named("qr_pivoting",          linalg.qr,         arguments(normal(5, 3), constant(False),
                                                              constant(None), constant("economic"),
                                                              constant(True))),
    Case.named("logm",                 linalg.logm,       arguments(symmetric_positive_definite(3))),
    Case.named("logm_nonsymmetric",    linalg.logm,       arguments(well_conditioned(3))),
    # columns of the SVD by SciPy's rank decision (rank-deficient ones: sign-free tests in
    # tests/test_scipy_linalg_functions.py), and the pseudo-inverse through eigh
    Case.named("orth",                 linalg.orth,       arguments(normal(5, 3))),
    Case.named("orth_wide",            linalg.orth,       arguments(normal(3, 5))),
    Case.named("null_space",           linalg.null_space, arguments(normal(3, 4))),
    Case.named("pinvh",                linalg.pinvh,      arguments(symmetric_positive_definite(4)),
         symmetric=(0,)),
]
# fmt: on

# solve(a, b, lower, overwrite_a, overwrite_b, check_finite, assume_a, transposed)
LINALG_CASES += [
    Case.named(f"solve_{(assume_a or 'detected').replace(' ', '_')}"
         f"{'_transposed' if transposed else ''}", linalg.solve,
         arguments(well_conditioned(4), normal(4, 2), constant(False), constant(False),
                   constant(False), constant(True), constant(assume_a), constant(transposed)))
    for assume_a in ("gen", "banded", "lower triangular", "upper triangular", "diagonal",
                     "tridiagonal")
    for transposed in (False, True)
] + [
    Case.named(f"solve_{assume_a}{'_lower' if lower else ''}", linalg.solve,
         arguments(symmetric_positive_definite(4), normal(4, 2), constant(lower),
                   constant(False), constant(False), constant(True), constant(assume_a)),
         symmetric=(0,))
    for assume_a in ("sym", "her", "pos")
    for lower in (False, True)
]

CASES = SPECIAL_CASES + SIGNAL_CASES + LINALG_CASES


def symmetrised(function):
    """``function`` of the symmetric part of its first argument, so finite differences move
    along the symmetric directions whose derivative a one-triangle function's gradient gives."""
    return lambda a, *rest: function(0.5 * (a + a.T), *rest)


def as_tuple(result):
    return tuple(result) if isinstance(result, tuple) else (result,)


# Complex values: scipy.signal.convolve and scipy.linalg.expm take them (their rules are
# complex-capable), to order 2;
# the functions without a complex rule refuse them. scipy.special's ufuncs have complex rows
# in tests/cases.py's COMPLEX_UFUNC_CASES; the factorizations are tested elsewhere.
COMPLEX_CASES = [complexified(c) for c in SIGNAL_CASES if c.name.startswith("convolve")] + [
    complexified(c) for c in LINALG_CASES if c.name in ("expm", "expm_stack")] + [
    complexified(c) for c in SPECIAL_CASES if c.name == "logsumexp_weights"]  # (log(s): holomorphic)
COMPLEX_REFUSED = [complexified(c) for c in SPECIAL_CASES + SIGNAL_CASES
                   if c.name in ("softmax", "log_softmax_axis", "lfilter_iir",
                                 "lfilter_fir_zi")]


@pytest.mark.parametrize("policy", ("restore", "checkpoint"))
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=case_id)
def test_complex_rule(case, order, policy, rng):
    check_complex(case, case.sample(rng), policy, order=order)


@pytest.mark.parametrize("case", COMPLEX_REFUSED, ids=case_id)
def test_complex_values_without_a_complex_rule_are_refused(case, rng):
    with pytest.raises(mutad.errors.ComplexInputError):
        mutad.gradient(lambda *args: np.sum(np.abs(case.function(*args))), *case.sample(rng))


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
        return tuple(np.sin(y) if isinstance(y, float) or getattr(y, "dtype", None) == float
                     else y
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


@pytest.mark.slow  # second order: the first-order cases stay fast
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


# A coefficient list holding a traced number beside constants (``[b0, 0.5]``): forward mode
# gives its tangent item by item, None for the constants, which the rules take as one array.
LISTS = {
    "lfilter b": lambda x, c: scipy.signal.lfilter([c, 0.5], [1.0, -0.3], x),
    "lfilter a": lambda x, c: scipy.signal.lfilter([0.7, 0.5], [1.0, c], x),
    "lfilter a[0]": lambda x, c: scipy.signal.lfilter((0.7, 0.5), (c, -0.3), x),
    "lfilter zi": lambda x, c: scipy.signal.lfilter([c, 0.5], [1.0, -0.3], x, zi=[c])[0],
    "lfilter x": lambda x, c: scipy.signal.lfilter([0.7, 0.5], [1.0, -0.3], [c, 1.0, x[0]]),
    "convolve": lambda x, c: scipy.signal.convolve(x, [c, 0.5]),
    "fftconvolve": lambda x, c: scipy.signal.fftconvolve([0.5, c], x),
    "correlate": lambda x, c: scipy.signal.correlate(x, [c, 0.5]),
}


@pytest.mark.parametrize("name", LISTS)
def test_a_list_of_coefficients_holding_a_traced_number(name):
    def f(x, c):
        return (LISTS[name](x, c) ** 2).sum()

    x, c = np.linspace(0.1, 1.0, 5), 0.7
    before = x.tobytes()
    expected = f(x.copy(), c)
    for value in (mutad.jvp(f, (x, c), (np.ones(5), 1.0))[0],
                  mutad.value_and_gradient(f, x, c)[0]):
        assert value.tobytes() == expected.tobytes() and x.tobytes() == before
    mutad.check_jvp(f, x, c)
    for policy in POLICIES:
        mutad.check_grads(f, x, c, policy=policy)
    mutad.check_grads(f, x, c, order=2)  # the rules' arrays traced by the outer one


def test_sections_holding_a_traced_number_forward_mode():
    def f(x, c):
        return (scipy.signal.sosfilt([[c, 0.5, 0.0, 1.0, -0.3, 0.0]], x) ** 2).sum()

    x, c = np.linspace(0.1, 1.0, 5), 0.7
    value, _ = mutad.jvp(f, (x, c), (np.ones(5), 1.0))
    assert value.tobytes() == f(x, c).tobytes()
    mutad.check_jvp(f, x, c)


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
    ("qr",               lambda a, flag: linalg.qr(a, overwrite_a=flag)[1],             SQUARE),
    ("svd",              lambda a, flag: linalg.svd(a, overwrite_a=flag)[1],            SQUARE),
    ("hessenberg",       lambda a, flag: linalg.hessenberg(a, overwrite_a=flag),        SQUARE),
]
# fmt: on
OVERWRITING_IDS = [name for name, _, _ in OVERWRITING_CALLS]


@pytest.mark.parametrize("name, call, sample", OVERWRITING_CALLS, ids=OVERWRITING_IDS)
def test_overwrite_flags_pass_through_on_plain_arrays(name, call, sample, rng):
    value = fortran(sample(rng))
    argument = value.copy(order="F")
    call(argument, True)
    assert not np.array_equal(argument, value), "SciPy did not overwrite: the test proves nothing"


# SciPy's own result is the memory it overwrote (lu_factor's lu, a solve's x): mutad writes the
# result there too, and the two are one array, as in NumPy; where SciPy leaves its workspace
# there instead, mutad writes SciPy's bytes there, without a derivative: a gradient that reads
# them is refused
WORKSPACE = {"solve_a", "qr", "svd", "hessenberg"}


@pytest.mark.parametrize("name, call, sample", OVERWRITING_CALLS, ids=OVERWRITING_IDS)
def test_overwrite_flags_overwrite_a_traced_input_as_scipy_does(name, call, sample, rng):
    value = fortran(sample(rng))

    def reads_its_argument_after(x, flag=True):
        return call(x, flag) * np.sin(x)  # the overwritten x changes value and gradient

    expected = reads_its_argument_after(value.copy(order="F"))  # NumPy's, x overwritten
    if name in WORKSPACE:
        argument = value.copy(order="F")
        y, back = mutad.pullback(reads_its_argument_after, argument)
        assert y.tobytes() == expected.tobytes()  # (it was refused)
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="overwrite_a=False"):
            back(np.ones_like(y))  # np.sin(x) of the workspace would need its derivative
        assert argument.tobytes(order="A") == value.tobytes(order="A")
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="forward mode"):
            mutad.jvp(reads_its_argument_after, (value.copy(order="F"),), (np.ones((4, 4)),))
        # not read after the call: the gradient of the result, as without the flag
        argument = value.copy(order="F")
        overwriting = mutad.gradient(lambda x: np.sum(call(x, True) ** 2), argument)
        assert argument.tobytes(order="A") == value.tobytes(order="A")
        kept = mutad.gradient(lambda x: np.sum(call(x, False) ** 2), argument)
        assert overwriting[0].tobytes() == kept[0].tobytes()
        return
    assert not np.array_equal(expected, reads_its_argument_after(value.copy(order="F"), False))
    argument = value.copy(order="F")
    y, back = mutad.pullback(reads_its_argument_after, argument)
    assert y.tobytes() == expected.tobytes()
    back(np.ones_like(y))
    assert argument.tobytes(order="A") == value.tobytes(order="A")  # back puts it back
    for policy in POLICIES:  # the derivative of what SciPy computed, overwrite included
        mutad.check_grads(reads_its_argument_after, value.copy(order="F"), policy=policy,
                          symmetric=(0,) if name in ("cholesky", "cho_factor") else ())


# SciPy raises LinAlgError after overwriting: an indefinite or singular matrix (F-ordered, which
# SciPy overwrites; a C-ordered one it copies first and leaves as it was)
INDEFINITE = np.array([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 2.0]])
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
# fmt: off
RAISING_CALLS = [
    ("cholesky",   lambda a: linalg.cholesky(a, overwrite_a=True),                  INDEFINITE),
    ("cho_factor", lambda a: linalg.cho_factor(a, overwrite_a=True),                INDEFINITE),
    ("inv",        lambda a: linalg.inv(a, overwrite_a=True),                       SINGULAR),
    ("solve",      lambda a: linalg.solve(a, np.ones(3), overwrite_a=True),         SINGULAR),
    ("solve_pos",  lambda a: linalg.solve(a, np.ones(3), overwrite_a=True, assume_a="pos"),
     INDEFINITE),
]
# fmt: on


@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("name, call, matrix", RAISING_CALLS, ids=[c[0] for c in RAISING_CALLS])
def test_a_linalg_error_raised_after_scipy_overwrote_a_traced_input_is_refused(
        name, call, matrix, order):
    """Regression: SciPy overwrote an F-ordered ``a`` with part of its factorization before
    raising LinAlgError, but mutad left the traced ``a`` as it was, so f catching the error and
    reading ``a`` got a value that was not NumPy's (72.0 for 66.0 after ``cho_factor``) and
    its gradient. What SciPy leaves has no rule: refused. A C-ordered ``a``, which SciPy copies
    and leaves as it was, raises SciPy's error for f to catch, and is differentiated."""
    weights = np.arange(9.0).reshape(3, 3)

    def catches_and_reads(x):
        a = np.array(x * 1.0, order=order)
        try:
            call(a)
        except np.linalg.LinAlgError:
            pass
        return np.sum(a * weights)

    x = matrix.copy()
    before = x.tobytes()
    expected = catches_and_reads(x)
    if order == "F":
        assert expected != np.sum(matrix * weights), "SciPy did not overwrite: proves nothing"
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="after overwriting"):
            mutad.value_and_grad(catches_and_reads)(x)
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="after overwriting"):
            mutad.jvp(catches_and_reads, (x,), (np.ones_like(x),))
    else:
        value, grad = mutad.value_and_grad(catches_and_reads)(x)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert grad.tobytes() == weights.tobytes()
    assert x.tobytes() == before


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
    lambda a, x: scipy.special.hyperu(a, 1.3, x),
    lambda b, x: scipy.special.hyperu(0.7, b + 1.0, x),
    lambda v, x: scipy.special.struve(v, x),
    lambda a, x: scipy.special.hyp2f1(a, 1.3, 2.1, 0.1 * x + 0.92),  # (|z| <= 0.9 is)
    lambda c, x: scipy.special.hyp2f1(0.7, 1.3, c, -x - 0.95),
    lambda n, x: scipy.special.eval_legendre(n, x),
    lambda a, x: scipy.special.eval_jacobi(2, 0.5, a, x),
], ids=["hyperu_a", "hyperu_b", "struve", "hyp2f1_a_beyond_its_series",
        "hyp2f1_c_beyond_its_series", "eval_legendre", "eval_jacobi"])
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


def test_zeta_by_scipys_name_differentiates_its_offset(rng):
    q = rng.uniform(0.5, 3.0, 4)
    grad, = mutad.gradient(lambda q: scipy.special.zeta(3.0, q).sum(), q)
    np.testing.assert_allclose(grad, -3.0 * scipy.special.zeta(4.0, q), rtol=1e-14)
    mutad.check_grads(lambda q: scipy.special.zeta(2.5, q, out=q), q)


@pytest.mark.parametrize("name, program", [
    ("ellip_harm", lambda x: scipy.special.ellip_harm(2.0, 3.0, 1, 1, x)),  # _ellip_harm
])
def test_refusals_name_the_public_function_that_wraps_a_private_ufunc(name, program):
    x = np.array([2.5, 3.0])
    message = rf"^scipy\.special\.{name}\b"
    with pytest.raises(mutad.MutadError, match=message):
        mutad.gradient(lambda x: program(x).sum(), x)
    with pytest.raises(mutad.MutadError, match=message):
        mutad.jvp(program, (x,), (np.ones(2),))


@pytest.mark.parametrize("function", [scipy.special.zeta, scipy.special.zetac])
def test_riemann_zeta_in_its_exponent(function):
    """zeta(x) and zetac(x) of a traced x (they were refused: "no derivative with respect to
    the exponent x"): ζ'(x), the Hurwitz function's at q = 1, to rounding against mpmath, 0 at
    x = inf; x <= 1 (the pole, the continuation) refused in the forward pass, where the values
    are known, before any pullback is asked for."""
    mpmath = pytest.importorskip("mpmath")
    x = np.array([1.001, 1.5, 3.7, 40.0, np.inf])
    grad, = mutad.gradient(lambda x: function(x).sum(), x)
    expected = [float(mpmath.zeta(v, 1, 1)) for v in x[:-1]]
    np.testing.assert_allclose(grad[:-1], expected, rtol=1e-14)
    assert grad[-1] == 0.0
    name = function.__name__
    for below in (np.array([0.5, 2.0]), np.array([1.0])):
        with pytest.raises(mutad.errors.UnsupportedOperationError,
                           match=rf"^scipy\.special\.{name}\(x\) of a differentiated x <= 1"):
            mutad.pullback(lambda x: function(x), below)  # (the forward pass alone)
    assert mutad.gradient(lambda q: function(3.0) * q, 2.0)[0] == function(3.0)


SEVERAL_OUTPUTS = {
    "sici": lambda x: scipy.special.sici(x)[0] * scipy.special.sici(x)[1],
    "sici_ci": lambda x: scipy.special.sici(x)[1],
    "shichi": lambda x: scipy.special.shichi(x)[0] + scipy.special.shichi(x)[1] ** 2,
    "fresnel": lambda x: 3.0 * scipy.special.fresnel(x)[0] + scipy.special.fresnel(x)[1],
    "airy": lambda x: (lambda ai, aip, bi, bip: ai + 2.0 * aip + bi * bip)(*scipy.special.airy(x)),
    "airye": lambda x: (lambda a, ap, b, bp: a + 2.0 * ap + b * bp)(*scipy.special.airye(x)),
    "airye_negative": lambda x: (lambda a, ap, b, bp: b + 2.0 * bp)(*scipy.special.airye(-x)),
    "itj0y0": lambda x: scipy.special.itj0y0(x)[0] * scipy.special.itj0y0(x)[1],
    "iti0k0": lambda x: scipy.special.iti0k0(x)[0] + 2.0 * scipy.special.iti0k0(x)[1],
    "it2j0y0": lambda x: scipy.special.it2j0y0(x)[0] ** 2 + scipy.special.it2j0y0(x)[1],
    "it2i0k0": lambda x: scipy.special.it2i0k0(x)[0] + 3.0 * scipy.special.it2i0k0(x)[1],
    # ellipj in u and m (had no rule: an elliptic filter's design of a traced ripple stopped)
    "ellipj": lambda x: (lambda sn, cn, dn, ph: sn + 2.0 * cn + dn * ph)(
        *scipy.special.ellipj(x, x / 3.0)),
    "ellipj_m": lambda x: (lambda sn, cn, dn, ph: sn * dn + cn - ph)(
        *scipy.special.ellipj(1.3, x[:, None] / 3.0)).sum(axis=1),
    # the parabolic cylinder functions in x (had no rule): their derivative, and Weber's
    # equation for the derivative's
    "pbdv": lambda x: (lambda d, dp: d + 2.0 * dp)(*scipy.special.pbdv(1.3, x)),
    "pbvv": lambda x: scipy.special.pbvv(0.7, x)[0] * scipy.special.pbvv(0.7, x)[1],
    "pbwa": lambda x: (lambda w, wp: w ** 2 + wp)(*scipy.special.pbwa(0.4, x)),
}


def test_a_parabolic_cylinder_functions_order_is_refused():
    for mode in (lambda f: mutad.gradient(f, 1.3), lambda f: mutad.jvp(f, (1.3,), (1.0,))):
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="order"):
            mode(lambda v: scipy.special.pbdv(v, 1.0)[0])


@pytest.mark.parametrize("name", SEVERAL_OUTPUTS)
def test_special_ufuncs_with_several_outputs(name, rng):
    x = rng.uniform(0.2, 2.5, 4)
    program = SEVERAL_OUTPUTS[name]
    assert np.array_equal(mutad.jvp(program, (x,), (x,))[0], program(x))
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(program, x, policy=policy, order=2)
    mutad.check_jvp(program, x)


def test_several_outputs_at_a_pole_of_the_output_not_used():
    """Si'(0) = 1 though Ci' = cos x / x is infinite there: an unused output adds nothing."""
    x = np.array([0.0, 1.0])
    grad, = mutad.gradient(lambda x: scipy.special.sici(x)[0].sum(), x)
    np.testing.assert_allclose(grad, [1.0, np.sin(1.0)])
    grad, = mutad.gradient(lambda x: scipy.special.shichi(x)[0].sum(), x)
    np.testing.assert_allclose(grad, [1.0, np.sinh(1.0)])
    # into several out= arrays, the argument itself among them: SciPy's values written there
    x = x + 0.5
    before = x.tobytes()
    grad, = mutad.gradient(lambda x: scipy.special.sici(x, out=(x, x * 1.0))[0].sum(), x)
    np.testing.assert_allclose(grad, np.sin(x) / x, rtol=1e-12)
    assert x.tobytes() == before


def test_second_derivatives_where_a_cotangent_is_zero():
    """The pullback masked the partial wherever the cotangent was exactly 0, which cut the
    derivative the cotangent carries itself: the Hessian of an exact fit came out 0."""
    h = mutad.hessian(lambda x: (scipy.special.sici(x)[0] ** 2).sum(), np.array([0.0]))
    assert h.tolist() == [[2.0]]
    a = scipy.special.airy(0.7)[0]
    h = mutad.hessian(lambda x: ((scipy.special.airy(x)[0] - a) ** 2).sum(), np.array([0.7]))
    np.testing.assert_allclose(h, [[2.0 * scipy.special.airy(0.7)[1] ** 2]], rtol=1e-12)
    for name in ("sici", "fresnel"):
        mutad.check_grads(lambda x: (getattr(scipy.special, name)(x)[0] ** 2).sum(),
                          np.array([1e-4, 0.0]), order=2)


def test_derivatives_at_the_special_points_of_their_formulas():
    # ellipk' = π/8 and ellipe' = -π/8 at m = 0, spence' = -1 at z = 1, the limits of the
    # closed forms there; a polynomial of degree 0 is constant
    grads = [mutad.grad(f)(x) for f, x in [
        (scipy.special.ellipk, 0.0), (scipy.special.ellipe, 0.0), (scipy.special.spence, 1.0),
        (lambda x: scipy.special.eval_legendre(0, x), 0.3),
        (lambda x: scipy.special.eval_hermite(0, x), 0.3)]]
    np.testing.assert_allclose(grads, [np.pi / 8, -np.pi / 8, -1.0, 0.0, 0.0], rtol=1e-15)
    # T(h, a) = (1/2π) ∫_0^a exp(-h²(1 + t²)/2) / (1 + t²) dt
    h, a = 0.7, -1.3
    dh, da = mutad.gradient(scipy.special.owens_t, h, a)
    np.testing.assert_allclose(da, np.exp(-h * h * (1 + a * a) / 2) / (2 * np.pi * (1 + a * a)))
    np.testing.assert_allclose(dh, -scipy.stats.norm.pdf(h) * scipy.special.erf(a * h / np.sqrt(2)) / 2)


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


# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, and the transpose of
# the reverse rule (rule_checks.check_forward_rule)

SIGNS = np.where(WHERE, 1.0, -1.0)
REAL_SPECTRUM = np.diag([1.0, 2.0, 3.5, 5.0]) + 0.3 * np.cos(np.arange(16.0) ** 1.5).reshape(4, 4)
SIGNAL = normal_array(8)
B, A = np.array([0.5, -0.2, 0.1]), np.array([1.5, -0.4])

SCIPY = [
    rule_case(special.polygamma, 1, positive_array(5)),
    rule_case(special.polygamma, np.array([0, 1, 2]), positive_array(3)),
    rule_case(special.multigammaln, positive_array(4) + 2.0, 3),
    rule_case(special.softmax, X),
    rule_case(special.softmax, X3, (0, 2)),
    rule_case(special.log_softmax, X, 1),
    rule_case(special.logsumexp, X),
    rule_case(special.logsumexp, X3, 1, None, True),
    rule_case(special.logsumexp, X, None, P),
    rule_case(special.logsumexp, X, 0, X * SIGNS, False, True),
    rule_case(special.logsumexp, V4, (0, 1), Const(P)),
    rule_case(signal.lfilter, B, A, SIGNAL),
    rule_case(signal.lfilter, B, A, X, 0),
    rule_case(signal.lfilter, B, A, SIGNAL, -1, normal_array(2)),
    rule_case(signal.lfilter, B[:2], np.array([2.0, 0.3, -0.1]), X, 1, normal_array(3, 2)),
    rule_case(signal.lfilter, Const(B), A, X3, 1, normal_array(2, 2, 4)),
    rule_case(signal.lfilter, B, Const(A), SIGNAL, -1, Const(normal_array(2))),
    rule_case(signal.lfilter, B, np.array([2.0]), SIGNAL),
    # eig's left eigenvectors, and its eigenvalues alone (a matrix of real, distinct ones)
    rule_case(linalg.eig, REAL_SPECTRUM, left=True),
    rule_case(linalg.eig, REAL_SPECTRUM, left=True, right=False),
    rule_case(linalg.eig, REAL_SPECTRUM, right=False),
    # a generalized problem's eigenvalues, in both matrices
    rule_case(linalg.eigvals, REAL_SPECTRUM, np.eye(4) + 0.2 * REAL_SPECTRUM.T),
    rule_case(linalg.eig, REAL_SPECTRUM, Const(np.eye(4) + 0.1 * REAL_SPECTRUM), right=False),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arguments are cases here
@pytest.mark.parametrize("case", SCIPY, ids=case_id)
def test_forward_rule_scipy(case, rng):
    check_forward_rule(case, rng)

# ----------------------------------------------------------------------------------------------
# Forward rules of mutad.scipy.linalg, called directly: the tangent against finite differences,
# the transpose of mutad's reverse mode, and reverse mode over them (rule_checks)

def with_factor(wrapper, **kwargs):
    """A Case function and rule for ``wrapper((c, flag), b)``, the factor ``c`` passed alone so
    that it carries the tuple's first tangent."""

    def function(c, flag, b):
        return wrapper((c, flag), b, **kwargs)

    def rule(tangents, c, flag, b):
        return wrapper.forward_rule([[tangents[0], None], tangents[2]], (c, flag), b, **kwargs)

    return function, rule


def align_pairs(result, reference):
    """SciPy's eigh result (a tuple) with each eigenvector's sign as in ``reference``."""
    return result[0], align_columns(result[1], reference[1])


def align_singular_pairs(result, reference):
    signs = np.sign(np.sum(result[0] * reference[0], axis=-2, keepdims=True))
    return result[0] * signs, result[1], result[2] * np.swapaxes(signs, -1, -2)


def forward_linalg_cases():
    sl = linalg

    def case(name, wrapper, samplers, kwargs=None, **options):
        return forward_case(f"scipy.{name}", wrapper, samplers, kwargs, rule=wrapper.forward_rule,
                            **options)

    cases = [
        case("cholesky", sl.cholesky, (spd(4, 4),), symmetric=(0,)),
        case("cholesky-lower", sl.cholesky, (spd(4, 4), constant(True)), symmetric=(0,)),
        case("cho_factor", sl.cho_factor, (spd(4, 4),), symmetric=(0,)),
        case("cho_factor-lower", sl.cho_factor, (spd(4, 4), constant(True)), symmetric=(0,)),
        case("solve_triangular", sl.solve_triangular, (dominant(4, 4), normal_sampler(4))),
        case("solve_triangular-lower-trans-unit", sl.solve_triangular,
             (dominant(4, 4), normal_sampler(4, 2)), {"trans": 1, "lower": True, "unit_diagonal": True}),
        case("lu_factor", sl.lu_factor, (dominant(4, 4),)),
        case("solve", sl.solve, (dominant(4, 4), normal_sampler(4, 2))),
        case("solve-pos-transposed", sl.solve, (spd(4, 4), normal_sampler(4)),
             {"assume_a": "pos", "transposed": True}, symmetric=(0,)),
        case("solve-upper-triangular", sl.solve, (dominant(4, 4), normal_sampler(4)),
             {"assume_a": "upper triangular"}),
        case("inv", sl.inv, (dominant(4, 4),)),
        case("inv-sym", sl.inv, (spd(4, 4),), {"assume_a": "sym"}, symmetric=(0,)),
        case("inv-diagonal", sl.inv, (dominant(4, 4),), {"assume_a": "diagonal"}),
        case("expm", sl.expm, (lambda rng: 0.5 * rng.standard_normal((4, 4)),)),
        case("expm-batched", sl.expm, (lambda rng: 0.5 * rng.standard_normal((2, 3, 3)),)),
        case("eigh", sl.eigh, (spd(4, 4),), symmetric=(0,), align=align_pairs),
        case("eigh-upper-values", sl.eigh, (spd(4, 4),), {"lower": False, "eigvals_only": True},
             symmetric=(0,)),
        case("eigvalsh", sl.eigvalsh, (spd(4, 4),), symmetric=(0,)),
        case("svd", sl.svd, (normal_sampler(4, 4),), align=align_singular_pairs),
        case("svd-thin", sl.svd, (normal_sampler(3, 5),), {"full_matrices": False},
             align=align_singular_pairs),
        case("svd-values", sl.svd, (normal_sampler(5, 3),), {"compute_uv": False}),
        case("det", sl.det, (dominant(4, 4),)),
        case("norm-2", sl.norm, (normal_sampler(3, 4),), {"ord": 2}),
        case("norm-axis", sl.norm, (normal_sampler(3, 4),), {"axis": 0, "keepdims": True}),
        case("qr", sl.qr, (dominant(4, 4),)),
        case("qr-r", sl.qr, (normal_sampler(5, 3),), {"mode": "r"}),
        case("qr-pivoting", sl.qr, (normal_sampler(5, 3),), {"mode": "economic", "pivoting": True}),
        case("logm", sl.logm, (spd(3, 3),)),
        case("orth", sl.orth, (normal_sampler(5, 3),), align=align_columns),
        case("null_space", sl.null_space, (normal_sampler(3, 4),), align=align_columns),
        case("pinvh", sl.pinvh, (spd(4, 4),), symmetric=(0,)),
        case("pinvh-upper", sl.pinvh, (spd(4, 4),), {"lower": False}, symmetric=(0,)),
    ]
    for lower in (False, True):
        function, rule = with_factor(sl.cho_solve)
        cases.append(forward_case(f"scipy.cho_solve-lower={lower}", function, lambda rng, lower=lower: (
            *sl.cho_factor(spd(4, 4)(rng), lower), rng.standard_normal((4, 2))), rule=rule))
    for trans in (0, 1):
        function, rule = with_factor(sl.lu_solve, trans=trans)
        # a standard normal matrix, so that LAPACK pivots
        cases.append(forward_case(f"scipy.lu_solve-trans={trans}", function, lambda rng: (
            *sl.lu_factor(rng.standard_normal((4, 4))), rng.standard_normal(4)), rule=rule))
    return cases


FORWARD_LINALG = forward_linalg_cases()
TRANSPOSED = {"scipy.cho_factor-lower", "scipy.cho_solve-lower=True", "scipy.lu_factor",
              "scipy.lu_solve-trans=1", "scipy.solve-pos-transposed", "scipy.inv-diagonal",
              "scipy.expm", "scipy.eigh", "scipy.svd-thin", "scipy.det", "scipy.qr-pivoting",
              "scipy.logm", "scipy.orth", "scipy.null_space", "scipy.pinvh"}


@pytest.mark.parametrize("case", FORWARD_LINALG, ids=case_id)
def test_scipy_forward_rule_matches_finite_differences(case, rng):
    check_forward_rule(case, rng, step=1e-3, atol=None, transpose=False)


@pytest.mark.parametrize("case", [c for c in FORWARD_LINALG if c.id in TRANSPOSED], ids=case_id)
def test_forward_and_reverse_rules_are_transposes(case, rng):
    check_transposed_by_reverse_mode(case, rng)


@pytest.mark.parametrize("case", FORWARD_LINALG, ids=case_id)
def test_reverse_over_forward(case, rng):
    check_reverse_over_forward(case, rng)


# ----------------------------------------------------------------------------------------------
# scipy.linalg's eigh, eigvalsh, svd, det, norm, qr and logm called by SciPy's names


def sign_free_eigh(a, **options):
    """Outputs of SciPy's eigh that do not depend on the sign of each eigenvector."""
    w, v = scipy.linalg.eigh(0.5 * (a + a.T), **options)
    return w, v * v, v[0] * v


def sign_free_svd(a, **options):
    u, s, vt = scipy.linalg.svd(a, **options)
    return u * u, s, vt * vt, (u * s[..., None, :]) @ vt


SCIPY_NAMES = [
    ("eigh", sign_free_eigh, symmetric_positive_definite(4), {}),
    ("eigh-upper", sign_free_eigh, symmetric_positive_definite(4), {"lower": False}),
    ("eigh-driver", sign_free_eigh, symmetric_positive_definite(4), {"driver": "evd"}),
    ("eigh-values", lambda a, **o: scipy.linalg.eigh(0.5 * (a + a.T), **o),
     symmetric_positive_definite(4), {"eigvals_only": True, "lower": False}),
    ("eigvalsh", lambda a, **o: scipy.linalg.eigvalsh(0.5 * (a + a.T), **o),
     symmetric_positive_definite(3), {"lower": False}),
    ("svd", sign_free_svd, normal(4, 4), {}),
    ("svd-thin", sign_free_svd, normal(5, 3), {"full_matrices": False}),
    ("svd-values", lambda a, **o: scipy.linalg.svd(a, **o), normal(3, 5), {"compute_uv": False}),
    ("det", lambda a, **o: scipy.linalg.det(a, **o), normal(4, 4), {}),
    ("det-stack", lambda a, **o: scipy.linalg.det(a, **o), normal(2, 3, 3), {}),
    ("norm", lambda a, **o: scipy.linalg.norm(a, **o), normal(3, 4), {}),
    ("norm-ord", lambda a, **o: scipy.linalg.norm(a, **o), normal(3, 4), {"ord": 2}),
    ("norm-inf-axis", lambda a, **o: scipy.linalg.norm(a, **o), normal(3, 4),
     {"ord": np.inf, "axis": 1, "keepdims": True}),
    ("norm-fro-axes", lambda a, **o: scipy.linalg.norm(a, **o), normal(2, 3, 4),
     {"ord": "fro", "axis": (1, 2)}),
    ("qr", lambda a, **o: scipy.linalg.qr(a, **o), well_conditioned(4), {}),
    ("qr-economic", lambda a, **o: scipy.linalg.qr(a, **o), normal(5, 3), {"mode": "economic"}),
    ("qr-r", lambda a, **o: scipy.linalg.qr(a, **o), normal(5, 3), {"mode": "r"}),
    ("qr-pivoting", lambda a, **o: scipy.linalg.qr(a, **o)[:2], normal(5, 3),
     {"mode": "economic", "pivoting": True}),
    ("logm", lambda a, **o: scipy.linalg.logm(a, **o), symmetric_positive_definite(3), {}),
]


@pytest.mark.parametrize("name, function, sample, options", SCIPY_NAMES,
                         ids=[c[0] for c in SCIPY_NAMES])
def test_scipy_linalg_by_its_own_names(name, function, sample, options, rng):
    """``scipy.linalg.eigh(A)`` (and the others) inside the differentiated function, with
    SciPy's keywords: the value is SciPy's own call's, bit for bit, and the derivatives hold in
    reverse and forward mode to second order."""
    a = sample(rng)

    def f(a):
        return function(a, **options)

    traced, _ = mutad.pullback(f, a)
    for mine, scipys in zip(as_tuple(traced), as_tuple(f(a)), strict=True):
        assert np.array_equal(mine, scipys)
    for policy in POLICIES:
        mutad.check_grads(f, a, policy=policy, order=2)
    mutad.check_jvp(f, a)


def test_scipy_linalg_function_as_the_differentiated_function(rng):
    """SciPy's routed functions and methods, given to mutad as the function itself."""
    a = well_conditioned(3)(rng)
    grad, = mutad.gradient(scipy.linalg.det, a)
    np.testing.assert_allclose(grad, scipy.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-12)
    grad, = mutad.gradient(scipy.stats.norm.logpdf, 0.3)
    assert grad == -0.3
    assert mutad.hessian(scipy.special.logsumexp, np.zeros(2)).tolist() == [[0.25, -0.25],
                                                                           [-0.25, 0.25]]
    _, tangent = mutad.jvp(scipy.stats.cauchy.logcdf, (-1e16,), (1.0,))
    assert tangent == 1e-16


@pytest.mark.parametrize("call, match", [
    (lambda a: scipy.linalg.eigh(a, np.eye(3), type=2), "type=1"),
    (lambda a: scipy.linalg.eigvalsh(a, type=2), "type 1"),
    (lambda a: scipy.linalg.svd(a[:, :2]), "full_matrices"),
    (lambda a: scipy.linalg.qr(a[:, :2]), "mode='full'"),
    (lambda a: scipy.linalg.qr(a, mode="raw"), "raw"),
    (lambda a: scipy.linalg.qr(a[:2]), "wide"),
    (lambda a: scipy.linalg.logm(-a), "complex"),
], ids=["eigh-b", "eigvalsh-type", "svd-full", "qr-full-tall", "qr-raw",
        "qr-wide", "logm-negative"])
def test_scipy_linalg_refuses_what_has_no_derivative(call, match, rng):
    a = symmetric_positive_definite(3)(rng)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=match):
        mutad.gradient(lambda a: np.sum(call(a)[0]), a)


def test_scipy_linalg_refuses_complex_matrices(rng):
    a = well_conditioned(3)(rng) + 1j * np.eye(3)
    with pytest.raises(mutad.errors.ComplexInputError):
        mutad.gradient(lambda a: np.abs(scipy.linalg.det(a)), a)


def test_logm_gradient_against_mpmath(rng):
    """Ā = L(Aᵀ, W) for the loss <W, log A>: the block triangular logarithm, evaluated by
    mpmath at 40 digits, against mutad's (SciPy's logm of the block matrix in doubles)."""
    import mpmath

    a = well_conditioned(3)(rng)
    weights = rng.standard_normal((3, 3))
    def frechet(m, e):
        """The Fréchet derivative of logm at ``m`` along ``e``: the corner of logm([[m, e],
        [0, m]]), at 40 digits."""
        with mpmath.workdps(40):
            block = mpmath.matrix(6, 6)
            for i in range(3):
                for j in range(3):
                    block[i, j] = block[i + 3, j + 3] = m[i, j]
                    block[i, j + 3] = e[i, j]
            corner = mpmath.logm(block)
            return np.array([[float(corner[i, j + 3]) for j in range(3)] for i in range(3)])

    grad, = mutad.gradient(lambda a: np.sum(scipy.linalg.logm(a) * weights), a)
    np.testing.assert_allclose(grad, frechet(a.T, weights), rtol=1e-12, atol=1e-14)
    # forward mode, the same Fréchet derivative in the other order
    _, tangent = mutad.jvp(scipy.linalg.logm, (a,), (weights,))
    np.testing.assert_allclose(tangent, frechet(a, weights), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("ord", [None, 1, np.inf, -np.inf])
def test_scipys_norms_that_return_python_floats_are_differentiated(ord, rng):
    """SciPy's BLAS and LAPACK norms return Python floats: the result carries its derivative
    as NumPy's scalar would (it was a constant: a zero gradient)."""
    a = rng.normal(size=(3, 4)) if ord is not None else rng.normal(size=5)
    for f in (lambda a: scipy.linalg.norm(a, ord), lambda a: linalg.norm(a, ord)):
        mutad.check_grads(lambda a: f(a) ** 2, a)
        mutad.check_jvp(f, a)
        assert mutad.value_and_grad(f)(a)[0] == scipy.linalg.norm(a, ord)


@pytest.mark.parametrize("name", ["boxcox", "boxcox1p", "inv_boxcox", "inv_boxcox1p"])
def test_box_cox_derivatives_in_lambda_hold_next_to_zero(name):
    """Their closed forms in λ cancel next to λ = 0 (-6e8 for -105 at λ = 1e-12): series
    there, continuous with the limit at 0 and the closed form beyond."""
    function = getattr(scipy.special, name)
    x = np.array([0.5, 2.0, 3.0])
    limit = mutad.gradient(lambda lmbda: function(x, lmbda).sum(), 0.0)[0]
    for lmbda in (1e-12, 1e-9, 1e-6):
        g = mutad.gradient(lambda lmbda: function(x, lmbda).sum(), lmbda)[0]
        np.testing.assert_allclose(g, limit, rtol=1e-5)
    for lmbda in (0.004, 0.02, 0.3):  # both sides of the series' bound
        mutad.check_grads(lambda lmbda: function(x, lmbda).sum(), lmbda)


def test_the_generalized_symmetric_eigenproblem(rng):
    """A V = B V diag(w), Vᵀ B V = I (finite element modes: stiffness and mass): SciPy's pairs,
    with the symmetric gradients of A and B, both modes, second order, replayed."""
    k, m = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    k, m = k + k.T + 6.0 * np.eye(4), m @ m.T + 4.0 * np.eye(4)
    weights = rng.normal(size=(4, 4))

    def symmetric(x):
        return 0.5 * (x + x.T)

    def f(k, m):  # (the squares of the vectors' entries: free of their signs)
        w, v = scipy.linalg.eigh(symmetric(k), symmetric(m))
        return (w ** 2).sum() + (v ** 2 * weights).sum() \
            + scipy.linalg.eigvalsh(symmetric(k), symmetric(m)).prod()

    assert mutad.value_and_grad(f, argnums=(0, 1))(k, m)[0] == f(k, m)
    mutad.check_grads(f, k, m)
    mutad.check_jvp(f, k, m)
    mutad.check_grads(f, k, m, order=2)
    replayed = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    for scale in (1.0, 1.1, 0.9):
        a, b = replayed(k * scale, m), mutad.value_and_grad(f, argnums=(0, 1))(k * scale, m)
        assert a[0] == b[0] and all(np.array_equal(u, v) for u, v in zip(a[1], b[1]))


def test_new_special_rows_at_the_edges_of_their_formulas():
    """powm1(x, 0) is 0 for every x: its derivative in x is 0 at x = 0 too (p x^(p-1) was
    0 * inf); ellipkinc and ellipeinc are NaN outside SciPy's domain (m > 1), and so are
    their derivatives (they were finite)."""
    (g,) = mutad.gradient(lambda x: scipy.special.powm1(x, 0.0).sum(), np.zeros(2))
    assert np.array_equal(g, [0.0, 0.0])
    for f in (scipy.special.ellipkinc, scipy.special.ellipeinc):
        value, (g,) = mutad.value_and_gradient(lambda phi: f(phi, 2.0).sum(), np.array([0.3]))
        assert np.isnan(value) and np.isnan(g).all()


# ----------------------------------------------------------------------------------------------
# The spherical Bessel functions, in z (real or complex), their derivatives (derivative=True)
# too; SciPy's values bit for bit; the order n has no derivative.

SPHERICAL = ["spherical_jn", "spherical_yn", "spherical_in", "spherical_kn"]
SPHERICAL_Z = {"spherical_jn": np.array([0.3, 1.2, 2.5, -0.7, 6.0]),
               "spherical_in": np.array([0.3, 1.2, 2.5, -0.7, 3.0]),
               "spherical_yn": np.array([0.4, 1.2, 2.5, 6.0]),
               "spherical_kn": np.array([0.4, 1.2, 2.5, 4.0])}


@pytest.mark.parametrize("derivative", [False, True])
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("name", SPHERICAL)
def test_spherical_bessel_functions(name, kind, derivative):
    z = SPHERICAL_Z[name] + (0.4j if kind == "complex" else 0.0)
    n = np.array([0, 1, 2, 3, 5])[:z.size] if name != "spherical_jn" else np.arange(5)
    for function in (getattr(scipy.special, name), getattr(special, name)):
        def f(z):
            return function(n, z, derivative)

        y, _ = mutad.pullback(f, z.copy())
        assert y.tobytes() == f(z).tobytes()  # SciPy's values, bit for bit
        for policy in POLICIES:
            mutad.check_grads(f, z.copy(), policy=policy, order=2)
        mutad.check_jvp(f, z.copy())
    assert getattr(special, name)(n, z, derivative).tobytes() == f(z).tobytes()


@pytest.mark.parametrize("name", ["spherical_jn", "spherical_in"])
def test_spherical_bessel_derivatives_at_zero(name):
    """At z = 0 the differential equation divides by z: j_n's and i_n's derivatives there come
    from their power series, to order 4 checked here by finite differences of SciPy's own
    derivative."""
    function = getattr(scipy.special, name)
    for n in range(6):
        def derivative(z, n=n):
            return function(n, z, True)

        second = mutad.gradient(derivative, np.array(0.0))[0]
        third = mutad.hessian(derivative, np.array(0.0))
        h = 1e-3
        assert abs(second - (derivative(h) - derivative(-h)) / (2 * h)) < 1e-6
        assert abs(third - (derivative(h) - 2 * derivative(0.0) + derivative(-h)) / h**2) < 1e-5


def _jn_derivative_at_zero(n, k):
    """The k-th derivative of j_n at 0: k! times its power series' coefficient of z^k."""
    j = (k - n) // 2  # z^k is the term 2j + n = k of the series, if k - n is even
    if (k - n) % 2 or k < n:
        return 0.0
    return ((-1) ** j * math.factorial(k)
            / (2 ** j * math.factorial(j) * math.prod(range(2 * n + 2 * j + 1, 0, -2))))


def _nested_derivative(n, k):
    f = lambda z: scipy.special.spherical_jn(n, z)  # noqa: E731
    for _ in range(k):
        f = mutad.grad(f)
    return f(0.0)


def test_spherical_bessel_derivatives_at_zero_of_higher_orders():
    for n in range(4):
        for k in range(1, 6):
            assert _nested_derivative(n, k) == pytest.approx(
                _jn_derivative_at_zero(n, k), rel=1e-12, abs=1e-15), (n, k)


@pytest.mark.slow
def test_spherical_bessel_derivatives_at_zero_past_the_eighth_order():
    """The series at z = 0 is taken to the degree the running differentiations need (a fixed
    degree gave 0 for the 9th derivative of j_1 at 0)."""
    assert _nested_derivative(1, 9) == pytest.approx(_jn_derivative_at_zero(1, 9), rel=1e-12)


def test_spherical_bessel_replay_and_order():
    def loss(z):
        return np.sum(scipy.special.spherical_jn(2, z) ** 2 + scipy.special.spherical_kn(1, z, True))

    replayed = mutad.grad(loss, replay=True)
    for k in range(3):
        z = SPHERICAL_Z["spherical_kn"] * (1.0 + 0.1 * k)
        assert replayed(z.copy()).tobytes() == mutad.gradient(loss, z.copy())[0].tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="order n"):
        mutad.gradient(lambda n: scipy.special.spherical_jn(n, 1.5), 2.0)


# ----------------------------------------------------------------------------------------------
# The spherical harmonics (a multiufunc SciPy writes in Python), in the angles; SciPy's values
# bit for bit; the degree and order are integers.

THETA = np.array([0.0, 0.05, 0.7, 1.6, 2.9, np.pi])  # the poles included
PHI = np.array([0.3, 6.1, 1.0, 2.2, 4.0, 0.0])


@pytest.mark.parametrize("n, m", [(0, 0), (1, 0), (2, 1), (2, 2), (3, -2), (4, -4), (2, 3)])
def test_spherical_harmonics_in_both_angles(n, m):
    """Regression: sph_harm_y converted its traced angles (np.asarray in SciPy's multiufunc)."""
    for function in (scipy.special.sph_harm_y, special.sph_harm_y):
        def f(theta, phi):
            return function(n, m, theta, phi)

        y, _ = mutad.pullback(f, THETA.copy(), PHI.copy())
        assert y.tobytes() == f(THETA, PHI).tobytes()  # SciPy's values, bit for bit
        inside = THETA[1:-1].copy(), PHI[1:-1].copy()  # finite differences stay in [0, pi]
        for policy in POLICIES:
            mutad.check_grads(f, *inside, policy=policy, order=2)
        mutad.check_jvp(f, *inside)
        # at the poles too, SciPy's own derivatives
        _, dy = scipy.special.sph_harm_y(n, m, THETA, PHI, diff_n=1)
        for i in range(2):
            _, tangent = mutad.jvp(f, (THETA, PHI), (np.ones(6) * (i == 0), np.ones(6) * i))
            np.testing.assert_allclose(tangent, dy[:, i], atol=1e-13)


@pytest.mark.parametrize("n, m", [(2, 1), (3, 2), (3, -1), (1, 0), (4, -3)])
def test_spherical_harmonics_outside_zero_to_pi(n, m):
    """Regression: at angles outside [0, pi] (SciPy's Y is then that of arccos(cos theta),
    even about each pole) the derivative in theta of an odd order had the wrong sign."""
    theta = np.array([-2.5, -0.3, 3.5, 4.4, 7.0, -7.0])
    phi = np.array([0.3, 6.1, 1.0, 2.2, 4.0, 0.5])
    arguments = theta.copy(), phi.copy()

    def f(t, p):
        return scipy.special.sph_harm_y(n, m, t, p)

    mutad.check_grads(f, theta, phi, order=2)  # checks that the caller's arrays come back
    _, dy = scipy.special.sph_harm_y(n, m, theta, phi, diff_n=1)
    _, tangent = mutad.jvp(f, (theta, phi), (np.ones(6), np.zeros(6)))
    np.testing.assert_allclose(tangent, dy[:, 0], atol=1e-13)
    assert theta.tobytes() == arguments[0].tobytes() and phi.tobytes() == arguments[1].tobytes()

    def loss(t, p):
        return np.sum(np.real(f(t, p)) ** 3)

    replays_as_traced(loss, [(theta * s, phi) for s in (1.0, -1.0, 0.5)], argnums=(0, 1))


def test_spherical_harmonics_of_arrays_of_degrees_and_their_hessian():
    n, m = np.arange(4)[:, None], np.array([-1, 0, 1])[:, None, None]
    mutad.check_grads(lambda t, p: np.abs(scipy.special.sph_harm_y(n, m, t, p)) ** 2,
                      THETA[1:-1].copy(), PHI[1:-1].copy(), order=2)
    _, _, hessians = scipy.special.sph_harm_y(3, 1, THETA, PHI, diff_n=2)
    got = mutad.hessian(lambda t: np.real(scipy.special.sph_harm_y(3, 1, t, PHI)).sum(),
                        THETA.copy())
    np.testing.assert_allclose(np.diag(got), hessians[:, 0, 0].real, atol=1e-12)


def test_spherical_harmonics_of_angles_made_inside_the_function():
    """Regression: angles the function made (constants, the coefficients differentiated)
    sent the stand-in into itself through the module's name of SciPy's function."""
    def fit(c):
        theta, phi = np.linspace(0.2, 2.8, 9), np.linspace(0.1, 6.0, 9)
        y = c[0] * scipy.special.sph_harm_y(1, 0, theta, phi) + c[1] * scipy.special.sph_harm_y(
            2, 1, theta, phi)
        return np.sum(np.abs(y) ** 2)

    mutad.check_grads(fit, np.array([0.7, -0.4]), modes=("rev", "fwd"))


def test_spherical_harmonics_replay_and_refusals():
    def loss(theta, phi):
        return np.sum(np.abs(scipy.special.sph_harm_y(2, 1, theta, phi * theta)) ** 2)

    replays_as_traced(loss, [(THETA * s, PHI) for s in (1.0, 0.9, 0.5)], argnums=(0, 1))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="diff_n"):
        mutad.gradient(lambda t: scipy.special.sph_harm_y(2, 1, t, 0.5, diff_n=1)[0].real, 0.3)


def test_the_voigt_profile_where_it_is_a_lorentzian():
    """At sigma = 0 SciPy's Voigt profile is the Lorentzian gamma / (pi (x^2 + gamma^2)): its
    partials there are the Lorentzian's (the Faddeeva form divides by sigma)."""
    x, gamma = np.array([-1.5, 0.3, 2.0]), np.array([0.2, 0.5, 1.0])
    gx, gs, gg = mutad.gradient(lambda x, s, g: scipy.special.voigt_profile(x, s, g).sum(),
                                x, np.zeros(3), gamma)
    r2 = x * x + gamma * gamma
    np.testing.assert_allclose(gx, -2 * gamma * x / (np.pi * r2 ** 2), rtol=1e-12)
    np.testing.assert_allclose(gg, (x * x - gamma * gamma) / (np.pi * r2 ** 2), rtol=1e-12)
    assert gs.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("f", [
    lambda x: scipy.special.voigt_profile(x, 0.0, 0.5),    # the Lorentzian
    lambda x: scipy.special.hyp2f1(0.5, 1.0, 0.0, x),      # at its pole in c: inf and nan
    lambda x: scipy.special.hyp1f1(1.0, 0.0, x)])
def test_partials_of_python_number_parameters_are_numpys(f):
    """A parameter passed as a Python float reaches the reverse pass's partials as one:
    Python's division by it (1 / sigma at sigma = 0.0) raised ZeroDivisionError where NumPy's,
    and forward mode, give inf or nan: both modes compute the partials as they do for it
    passed as an array."""
    x = np.array([-1.5, 0.0, 0.3, 2.0])
    with np.errstate(all="ignore"):
        (got,) = mutad.gradient(lambda x: f(x).sum(), x)
        _, tangent = mutad.jvp(f, (x,), (np.ones(4),))
    np.testing.assert_array_equal(got, tangent)


@pytest.mark.parametrize("f", [
    lambda x: scipy.special.voigt_profile(x, 0.0, 0.5),
    lambda x: scipy.special.hyp2f1(0.5, 1.0, 0.0, x),
    lambda x: scipy.special.hyp1f1(1.0, 0.0, x)])
def test_replayed_partials_of_python_number_parameters_are_numpys(f):
    """Replayed, the partials of a Python-float parameter are computed as tracing computes them
    (NumPy's scalar where Python's arithmetic on the number raises): the replays raised
    ZeroDivisionError where the traced call gave the gradient."""
    x = np.array([-1.5, 0.0, 0.3, 2.0])
    with np.errstate(all="ignore"):
        replays_as_traced(lambda x: f(x).sum(), [(x * s,) for s in (1.0, 1.1, 0.9)], replayed=2)


def test_spherical_bessel_derivative_by_keyword():
    """derivative=True by keyword, as SciPy's signature names it (it raised a TypeError)."""
    z = np.array([0.5, 1.5])
    for function in (scipy.special.spherical_jn, scipy.special.spherical_yn):
        def f(z, function=function):
            return function(2, z, derivative=True).sum()

        assert mutad.value_and_grad(f)(z)[0] == f(z)
        mutad.check_grads(f, z)


def test_lpmv_in_x_at_the_ends_and_refused_in_its_order_and_degree():
    """lpmv(m, v, x): inside (-1, 1) by the recurrence (the ufunc cases); at x = ±1 the
    Legendre polynomial's slope v(v+1)/2 (±1)^(v+1) for m = 0, NaN for another order (where the
    recurrence gives no limit); the order and degree have no derivative."""
    x = np.array([-1.0, 1.0])
    (g,) = mutad.gradient(lambda x: scipy.special.lpmv(0, 3, x).sum(), x)
    np.testing.assert_allclose(g, [6.0, 6.0], rtol=1e-15)  # P_3' = (15x² - 3) / 2
    (g,) = mutad.gradient(lambda x: scipy.special.lpmv(2, 3, x).sum(), x)
    assert np.isnan(g).all()
    for args in ((np.array([1.0]), 3.0, 0.5), (1.0, np.array([3.0]), 0.5)):
        with pytest.raises(mutad.MutadError, match="the order m|the degree v"):
            mutad.gradient(lambda m, v, x: scipy.special.lpmv(m, v, x).sum(), *args,
                           argnums=(0, 1))


OVERWRITTEN_STRIDES = {
    "ifft-every-other": lambda y: scipy.fft.ifft(y[::2], overwrite_x=True),
    "idct-reversed": lambda y: scipy.fft.idct(y[::-1], overwrite_x=True),
    "dstn-every-other-column": lambda y: scipy.fft.dstn(y.reshape(2, 4)[:, ::2],
                                                        overwrite_x=True),
    "fftpack-dct-every-other": lambda y: scipy.fftpack.dct(y[::2], overwrite_x=True),
}


@pytest.mark.parametrize("name", OVERWRITTEN_STRIDES)
def test_overwrite_x_of_a_strided_view_leaves_the_transform_there_as_scipy_does(name, rng):
    """scipy.fft writes its transform into a strided view too when overwrite_x=True (LAPACK's
    wrappers copy one): the array the view is of holds it afterwards."""
    def f(x):
        y = x.astype(complex) if name.startswith("ifft") else x * 1.0
        z = OVERWRITTEN_STRIDES[name](y)
        return (np.abs(z) ** 2).sum() + (np.abs(y) ** 3 * np.arange(8)).sum()

    x = rng.normal(size=8)
    before = x.tobytes()
    value, _ = mutad.value_and_gradient(f, x)
    assert value == f(x.copy())
    assert x.tobytes() == before
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)


def test_an_overwritten_array_that_another_argument_reads_is_refused(rng):
    """LAPACK reads the factor while it writes the right-hand side over a column of it: the
    values are neither those of separate arrays nor in an order mutad follows. Where SciPy
    copies the other argument first (solve's a), the values are separate arrays': followed."""
    a = rng.normal(size=(4, 4)) + 4 * np.eye(4)
    before = a.tobytes()

    def factor_column(a):
        f = np.asfortranarray(a * 1.0)
        lu = scipy.linalg.lu_factor(f, overwrite_a=True)
        x = scipy.linalg.lu_solve(lu, f[:, 0], overwrite_b=True)
        return (x ** 2).sum() + (f ** 2).sum()

    def triangle_row(a):
        b = a * 1.0
        x = scipy.linalg.solve_triangular(b.T, b[0], overwrite_b=True)
        return (x ** 2).sum() + (b ** 2).sum()

    for f in (factor_column, triangle_row):
        with pytest.raises(mutad.MutadError, match="shares memory with another"):
            mutad.gradient(f, a)
        assert a.tobytes() == before

    def copied_matrix(a):
        f = np.asfortranarray(a * 1.0)
        x = scipy.linalg.solve(f, f[:, 2], overwrite_b=True)
        return (x ** 2).sum() + (f ** 2).sum()

    assert mutad.value_and_gradient(copied_matrix, a)[0] == copied_matrix(a.copy())
    mutad.check_grads(copied_matrix, a)


def test_logm_of_a_stack_is_refused_in_both_modes():
    """Regression: forward mode raised NumPy's norm error for a stack of matrices, which the
    reverse rule refuses with a MutadError (loop over the stack)."""
    stack = np.stack([2.0 * np.eye(3) + 0.1, 3.0 * np.eye(3)])
    with pytest.raises(mutad.MutadError, match="not a stack"):
        mutad.gradient(lambda a: np.sum(scipy.linalg.logm(a)), stack)
    with pytest.raises(mutad.MutadError, match="not a stack"):
        mutad.jvp(scipy.linalg.logm, (stack,), (np.ones_like(stack),))
