"""Reductions and scans: one table of cases, each checked against finite differences in both
policies, out of place and writing into traced buffers; ties and zeros checked exactly."""

import numpy as np
import pytest

import mutad
from cases import (COMPLEX, Case, case_id, check_complex, curved, standard_complex,
                   under_alternating_policies)
from mutad.core.registry import RULES
from rule_checks import WHERE, P, TIES, X, X3, check_forward_rule, rule_case, with_nans

POLICIES = ("restore", "checkpoint")


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def with_zeros(rng, shape):
    """About a third of the elements exactly zero, so some slices hold one zero, some several."""
    x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.where(rng.uniform(size=shape) < 0.35, 0.0, x)


def on_nans(reduction):
    """``reduction`` of ``x`` with every third element replaced by NaN inside the program (a NaN
    argument would make the finite differences NaN too)."""

    def program(x, *args, **kwargs):
        holes = np.arange(x.size).reshape(x.shape) % 3 == 0
        return reduction(np.where(holes, np.nan, x), *args, **kwargs)

    program.__name__ = f"{reduction.__name__}_on_nans"
    return program


# Programs that write reductions into traced buffers ------------------------------------------


def into_traced_out(reduction):
    """``reduction(x, out=z)`` into a traced ``z`` that held values depending on ``x``: the
    overwritten values must pass no gradient, the new ones must."""

    def program(x, *args, **kwargs):
        shape = np.shape(reduction(np.zeros(x.shape), *args, **kwargs))
        z = np.zeros_like(x, shape=shape)
        z += np.sum(x * x)
        reduction(x, *args, out=z, **kwargs)
        return np.sin(z)

    program.__name__ = f"{reduction.__name__}_into_out"
    return program


def over_own_input(scan):
    """``scan(x, out=x)``: the result overwrites the array it was computed from."""

    def program(x, *args, **kwargs):
        scan(x, *args, out=x, **kwargs)
        return x * x

    program.__name__ = f"{scan.__name__}_over_input"
    return program


def sum_into_first_row(x):
    np.sum(x, axis=0, out=x[0])
    return np.cos(x)


def cumsum_into_slice(x):
    x[1:] = np.cumsum(x[:-1], axis=0)
    return x * x


def prod_after_mutating_reshaped_view(x):
    flat = x.reshape(-1)
    flat[::2] *= 3.0
    return np.prod(x, axis=1)


def max_after_mutating_transposed_view(x):
    columns = x.T
    columns[0] += 1.0
    return np.max(x * x, axis=0)


def var_of_a_row_updated_in_place(x):
    x[0] -= np.mean(x, axis=0)
    return np.var(x, axis=0, ddof=1) + np.std(x[0])


def running_product_of_updated_rows(x):
    x[1:] *= x[:-1]
    return np.cumprod(x, axis=1)


# fmt: off
CASES = [
    # sum, mean, nansum, nanmean
    Case(np.sum),
    Case(np.sum, args=(0,)),
    Case(np.sum, kwargs=dict(axis=-1, keepdims=True)),
    Case(np.sum, shapes=((2, 3, 4),), kwargs=dict(axis=(0, -1))),
    Case(np.sum, kwargs=dict(axis=None, keepdims=True)),
    Case(np.sum, kwargs=dict(axis=1, where=np.array([True, False, True, True]))),
    Case(np.sum, kwargs=dict(axis=0), dtype=np.float32),
    Case(np.mean),
    Case(np.mean, args=(1,)),
    Case(np.mean, shapes=((2, 3, 4),), kwargs=dict(axis=(1, 2), keepdims=True)),
    Case(np.mean, kwargs=dict(axis=1, where=np.array([True, False, True, True]))),
    Case(np.mean, kwargs=dict(axis=-2), dtype=np.float32),
    Case(on_nans(np.nansum), kwargs=dict(axis=1)),
    Case(on_nans(np.nansum)),
    Case(on_nans(np.nanmean), kwargs=dict(axis=0)),
    Case(on_nans(np.nanmean), kwargs=dict(axis=None)),
    # prod, nanprod, with one zero and several zeros per slice
    Case(np.prod),
    Case(np.prod, kwargs=dict(axis=1)),
    Case(np.prod, kwargs=dict(axis=0, keepdims=True), domains=(with_zeros,)),
    Case(np.prod, shapes=((4, 5),), kwargs=dict(axis=-1), domains=(with_zeros,)),
    Case(np.prod, shapes=((2, 3, 4),), kwargs=dict(axis=(0, 2)), domains=(with_zeros,)),
    Case(np.prod, shapes=((6,),), domains=(with_zeros,)),
    Case(np.prod, kwargs=dict(axis=1), dtype=np.float32, domains=(positive,)),
    Case(on_nans(np.nanprod), kwargs=dict(axis=1)),
    # max, min and friends
    Case(np.max),
    Case(np.max, args=(0,)),
    Case(np.min, kwargs=dict(axis=-1, keepdims=True)),
    Case(np.amax, shapes=((2, 3, 4),), kwargs=dict(axis=(0, 2))),
    Case(np.amin, kwargs=dict(axis=None)),
    Case(np.max, kwargs=dict(axis=1, initial=0.0)),
    Case(np.max, kwargs=dict(axis=1), dtype=np.float32),
    Case(on_nans(np.nanmax), kwargs=dict(axis=0)),
    Case(on_nans(np.nanmin), kwargs=dict(axis=1)),
    Case(np.ptp),
    Case(np.ptp, kwargs=dict(axis=0, keepdims=True)),
    # var, std
    Case(np.var),
    Case(np.var, kwargs=dict(axis=0, ddof=1)),
    Case(np.var, shapes=((2, 3, 4),), kwargs=dict(axis=(0, -1), keepdims=True)),
    Case(np.var, kwargs=dict(axis=1, correction=1)),
    Case(np.std),
    Case(np.std, kwargs=dict(axis=-1, ddof=1, keepdims=True)),
    Case(np.std, kwargs=dict(axis=0), dtype=np.float32),
    # cumsum, cumprod
    Case(np.cumsum),
    Case(np.cumsum, args=(1,)),
    Case(np.cumsum, shapes=((2, 3, 4),), kwargs=dict(axis=-2)),
    Case(np.cumsum, kwargs=dict(axis=0), dtype=np.float32),
    Case(np.cumprod),
    Case(np.cumprod, kwargs=dict(axis=1)),
    Case(np.cumprod, shapes=((4, 6),), kwargs=dict(axis=1), domains=(with_zeros,)),
    Case(np.cumprod, shapes=((6, 4),), kwargs=dict(axis=0), domains=(with_zeros,)),
    Case(np.cumprod, shapes=((8,),), domains=(with_zeros,)),
    Case(np.cumprod, kwargs=dict(axis=-1), dtype=np.float32, domains=(positive,)),
    # ufunc methods
    Case(np.add.reduce),
    Case(np.add.reduce, args=(1,)),
    Case(np.add.reduce, kwargs=dict(axis=None, keepdims=True)),
    Case(np.multiply.reduce, domains=(with_zeros,), shapes=((5, 3),)),
    Case(np.multiply.reduce, kwargs=dict(axis=(0, 1))),
    Case(np.maximum.reduce),
    Case(np.maximum.reduce, kwargs=dict(axis=1, keepdims=True)),
    Case(np.minimum.reduce, kwargs=dict(axis=None)),
    Case(np.add.accumulate),
    Case(np.add.accumulate, kwargs=dict(axis=1)),
    Case(np.multiply.accumulate, kwargs=dict(axis=1), domains=(with_zeros,)),
    Case(np.multiply.accumulate, dtype=np.float32, domains=(positive,)),
    # methods of traced arrays
    Case(lambda x: x.sum(1) + x.mean(axis=0).sum() + x.max() * x.min(0)[0]),
    Case(lambda x: x.prod(axis=0) + x.var(1).sum() + x.std() + x.cumsum(0)[-1] + x.cumprod(1)[:, -1].sum()),
    # written into traced buffers: out=, over the input, into a slice, after mutating views
    Case(into_traced_out(np.sum), kwargs=dict(axis=0)),
    Case(into_traced_out(np.mean), kwargs=dict(axis=1, keepdims=True)),
    Case(into_traced_out(np.prod), kwargs=dict(axis=1), domains=(with_zeros,)),
    Case(into_traced_out(np.max), kwargs=dict(axis=0)),
    Case(into_traced_out(np.var), kwargs=dict(axis=0)),
    Case(into_traced_out(np.std), kwargs=dict(axis=1)),
    Case(into_traced_out(np.ptp), kwargs=dict(axis=1)),
    Case(into_traced_out(np.cumsum), kwargs=dict(axis=1)),
    Case(into_traced_out(np.add.reduce), kwargs=dict(axis=1)),
    Case(into_traced_out(np.sum), kwargs=dict(axis=0), dtype=np.float32),
    Case(over_own_input(np.cumsum), kwargs=dict(axis=0)),
    Case(over_own_input(np.cumprod), kwargs=dict(axis=1), domains=(with_zeros,)),
    Case(over_own_input(np.add.accumulate), kwargs=dict(axis=1)),
    Case(over_own_input(np.multiply.accumulate), kwargs=dict(axis=0)),
    Case(over_own_input(np.cumsum), kwargs=dict(axis=1), dtype=np.float32),
    Case(sum_into_first_row),
    Case(cumsum_into_slice),
    Case(prod_after_mutating_reshaped_view, domains=(with_zeros,)),
    Case(max_after_mutating_transposed_view),
    Case(var_of_a_row_updated_in_place),
    Case(running_product_of_updated_rows, domains=(with_zeros,)),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_reduction_gradient(case, policy, rng):
    mutad.check_grads(case, *case.sample(rng), policy=policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(CASES, POLICIES))
def test_reduction_second_derivatives(case, policy, rng):
    # Nested reverse mode runs each pullback on values and cotangents the outer gradient
    # traces; prod and cumprod at zeros included.
    mutad.check_grads(curved(case), *case.sample(rng), policy=policy, order=2)


# Complex arrays: every reduction and scan declared complex-capable, out of place and into
# traced buffers; max, min and ptp in NumPy's complex order (real parts first) -------------------


def complex_with_zeros(rng, shape):
    """About a third of the elements exactly 0 + 0j."""
    z = standard_complex(rng, shape)
    return np.where(rng.uniform(size=shape) < 0.35, 0.0, z)


def complex_off_centre(rng, shape):
    """Complex values not along check_grads' random direction: at the ``rng`` fixture's seed,
    a standard complex sample is that direction, along which a wrong derivative of a
    homogeneous function (a product's, a variance's) can agree with the right one."""
    return (0.6 - 0.8j) * standard_complex(rng, shape) + (0.5 - 0.25j)


def complex_var_of_a_row_updated_in_place(x):
    x[0] -= np.mean(x, axis=0)
    x[1] *= np.conj(x[2])
    return np.var(x, axis=0, ddof=1) + np.std(x[0]) + np.real(x).sum(axis=0)


def parts_updated_then_reduced(x):
    x.imag[0] *= x.real[1]
    np.real(x)[:, 1] += np.sum(x.imag, axis=0)[:3]
    return np.cumprod(x, axis=0), np.max(x, axis=1)


# fmt: off
COMPLEX_CASES = [
    Case(np.sum, **COMPLEX),
    Case(np.sum, kwargs=dict(axis=-1, keepdims=True), **COMPLEX),
    Case(np.sum, kwargs=dict(axis=1, where=np.array([True, False, True, True])), **COMPLEX),
    Case(np.mean, args=(1,), **COMPLEX),
    Case(np.mean, shapes=((2, 3, 4),), kwargs=dict(axis=(1, 2), keepdims=True), **COMPLEX),
    Case(on_nans(np.nansum), kwargs=dict(axis=1), **COMPLEX),
    Case(on_nans(np.nanmean), kwargs=dict(axis=0), **COMPLEX),
    Case(np.prod, kwargs=dict(axis=1), **COMPLEX),
    Case(np.prod, shapes=((4, 5),), kwargs=dict(axis=-1), dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(on_nans(np.nanprod), kwargs=dict(axis=1), **COMPLEX),
    Case(np.max, **COMPLEX),
    Case(np.max, args=(0,), **COMPLEX),
    Case(np.min, kwargs=dict(axis=-1, keepdims=True), **COMPLEX),
    Case(np.amax, shapes=((2, 3, 4),), kwargs=dict(axis=(0, 2)), **COMPLEX),
    Case(np.amin, kwargs=dict(axis=None), **COMPLEX),
    Case(on_nans(np.nanmax), kwargs=dict(axis=0), **COMPLEX),
    Case(on_nans(np.nanmin), kwargs=dict(axis=1), **COMPLEX),
    Case(np.ptp, **COMPLEX),
    Case(np.ptp, kwargs=dict(axis=0, keepdims=True), **COMPLEX),
    Case(np.var, **COMPLEX),
    Case(np.var, kwargs=dict(axis=0, ddof=1), **COMPLEX),
    Case(np.std, **COMPLEX),
    Case(np.std, kwargs=dict(axis=-1, ddof=1, keepdims=True), **COMPLEX),
    Case(np.cumsum, args=(1,), **COMPLEX),
    Case(np.cumprod, kwargs=dict(axis=1), **COMPLEX),
    Case(np.cumprod, shapes=((6, 4),), kwargs=dict(axis=0), dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(np.add.reduce, args=(1,), **COMPLEX),
    Case(np.multiply.reduce, kwargs=dict(axis=(0, 1)), shapes=((2, 3),), **COMPLEX),
    Case(np.maximum.reduce, kwargs=dict(axis=1, keepdims=True), **COMPLEX),
    Case(np.minimum.reduce, kwargs=dict(axis=None), **COMPLEX),
    Case(np.add.accumulate, kwargs=dict(axis=1), **COMPLEX),
    Case(np.multiply.accumulate, kwargs=dict(axis=1), dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(lambda x: x.sum(1) + x.mean(axis=0).sum() + x.max() * x.min(0)[0], name="methods", **COMPLEX),
    Case(lambda x: x.prod(axis=0) + x.var(1).sum() + x.std() + x.cumsum(0)[-1] + x.cumprod(1)[:, -1].sum(),
         name="methods", **COMPLEX),
    Case(into_traced_out(np.sum), kwargs=dict(axis=0), **COMPLEX),
    Case(into_traced_out(np.mean), kwargs=dict(axis=1, keepdims=True), **COMPLEX),
    Case(into_traced_out(np.prod), kwargs=dict(axis=1), dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(into_traced_out(np.max), kwargs=dict(axis=0), **COMPLEX),
    Case(into_traced_out(np.ptp), kwargs=dict(axis=1), **COMPLEX),
    Case(into_traced_out(np.cumsum), kwargs=dict(axis=1), **COMPLEX),
    Case(into_traced_out(np.add.reduce), kwargs=dict(axis=1), **COMPLEX),
    Case(over_own_input(np.cumsum), kwargs=dict(axis=0), **COMPLEX),
    Case(over_own_input(np.cumprod), kwargs=dict(axis=1), dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(over_own_input(np.multiply.accumulate), kwargs=dict(axis=0), **COMPLEX),
    Case(sum_into_first_row, **COMPLEX),
    Case(cumsum_into_slice, **COMPLEX),
    Case(prod_after_mutating_reshaped_view, dtype=np.complex128, domains=(complex_with_zeros,)),
    Case(max_after_mutating_transposed_view, **COMPLEX),
    Case(complex_var_of_a_row_updated_in_place, **COMPLEX),
    Case(running_product_of_updated_rows, **COMPLEX),
    Case(parts_updated_then_reduced, **COMPLEX),
    # real reductions of complex values, complex reductions of real ones
    Case(lambda x, y: np.sum(x * np.exp(1j * y), axis=0), shapes=((3, 4), (3, 4)), name="sum_of_phasors"),
    Case(lambda z: np.max(np.abs(z), axis=1) + np.var(z.imag), name="max_of_magnitudes", **COMPLEX),
    # a real dtype= reduces the real parts (NumPy casts, discarding the imaginary parts); a
    # complex one makes the real variance a complex array with no imaginary part
    *(Case(function, kwargs=kwargs, dtype=np.complex128, domains=(complex_off_centre,))
      for function, kwargs in [
          (np.prod, dict(axis=1, dtype=np.float64)),
          (on_nans(np.nanprod), dict(axis=0, dtype=np.float64)),
          (np.cumprod, dict(axis=1, dtype=np.float64)),
          (np.multiply.accumulate, dict(dtype=np.float64)),
          (np.var, dict(axis=1, dtype=np.float64)),
          (np.std, dict(axis=0, ddof=1, dtype=np.float64)),
          (np.var, dict(axis=1, dtype=np.complex128)),
          (np.std, dict(axis=0, dtype=np.complex128)),
          (np.maximum.reduce, dict(axis=1, dtype=np.float64)),
          (np.minimum.reduce, dict(axis=0, dtype=np.float64, keepdims=True))]),
]
# fmt: on


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # (a real dtype=)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=case_id)
def test_complex_reduction_gradient(case, policy, rng):
    check_complex(case, case.sample(rng), policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(COMPLEX_CASES, POLICIES))
def test_complex_reduction_second_derivatives(case, policy, rng):
    check_complex(case, case.sample(rng), policy, order=2)


# Exact values where finite differences cannot decide: ties and zeros --------------------------


def gradient(f, x):
    return mutad.gradient(f, x)[0]


TIED = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])


@pytest.mark.parametrize("reduction", [np.max, np.amax, np.maximum.reduce, np.nanmax],
                         ids=["max", "amax", "maximum.reduce", "nanmax"])
def test_tied_maxima_share_the_gradient_equally(reduction):
    expected = np.array([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(gradient(lambda x: reduction(x, axis=1).sum(), TIED), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("reduction", [np.maximum.reduce, np.minimum.reduce],
                         ids=["maximum.reduce", "minimum.reduce"])
def test_extremes_reduced_in_a_narrower_dtype_pass_the_gradient_to_them(reduction, dtype):
    """Regression: the elements equal to the extreme were found by comparing the operand with
    the extreme rounded into dtype=, which none of them equals: the gradient was zero."""
    x = np.array([[0.1, 0.7, 0.3], [0.9, 0.2, 0.4]]).astype(np.result_type(dtype, float))
    expected = np.zeros(x.shape)
    expected[np.arange(2), (np.argmax if reduction.__self__ is np.maximum else np.argmin)(
        x.real, axis=1)] = 1.0
    g = gradient(lambda x: reduction(x, axis=1, dtype=dtype).real.sum(), x)
    np.testing.assert_array_equal(g, expected)
    _, t = mutad.jvp(lambda x: reduction(x, axis=1, dtype=dtype), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t, np.ones(2))


@pytest.mark.parametrize("reduction", [np.min, np.amin, np.minimum.reduce, np.nanmin],
                         ids=["min", "amin", "minimum.reduce", "nanmin"])
def test_tied_minima_share_the_gradient_equally(reduction):
    x = np.array([[1.0, 2.0, 5.0], [1.0, 3.0, 4.0]])
    expected = np.array([[0.5, 1.0, 0.0], [0.5, 0.0, 1.0]])
    np.testing.assert_allclose(gradient(lambda x: reduction(x, axis=0).sum(), x), expected)


def test_tied_maximum_of_everything():
    np.testing.assert_allclose(gradient(np.max, TIED), [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])


def test_ptp_of_a_constant_slice_is_flat():
    np.testing.assert_allclose(gradient(lambda x: np.ptp(x, axis=1).sum(), TIED),
                               [[-1.0, 0.5, 0.5], [0.0, 0.0, 0.0]])


def test_prod_with_no_one_and_two_zeros():
    x = np.array([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0]])
    expected = np.array([[12.0, 8.0, 6.0], [0.0, 8.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(gradient(lambda x: np.prod(x, axis=1).sum(), x), expected)


def test_cumprod_with_zeros_matches_the_product_of_the_others():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    # d/dx_k sum_i prod_{j<=i} x_j: only products that skip every zero but x_k survive.
    expected = np.array([1.0, 2.0 + 2 * 3.0, 0.0, 0.0, 0.0])
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(gradient(lambda x: np.cumprod(x).sum(), x), expected)


def test_std_of_a_constant_slice_has_zero_gradient():
    x = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]])
    g = gradient(lambda x: np.std(x, axis=1).sum(), x)
    np.testing.assert_array_equal(g[0], 0.0)
    assert np.all(np.isfinite(g))


def test_gradient_keeps_float32():
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    g = gradient(lambda x: np.prod(x, axis=0).sum() + np.cumsum(x, axis=1).sum(), x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [[4 + 3, 5 + 2, 6 + 1], [1 + 3, 2 + 2, 3 + 1]])


def nested_hessian(f, x):
    """The Hessian of scalar ``f`` at ``x``, one row per nested gradient (reverse over reverse)."""
    return np.array([mutad.gradient(lambda x: mutad.gradient(f, x)[0][k], x)[0]
                     for k in range(x.size)])


def test_second_derivatives_of_prod_and_cumprod_at_zeros_are_exact():
    # d²/dx_k dx_m of prod(x) is the product of the elements other than x_k and x_m, and of
    # sum(cumprod(x)) the sum over i >= max(k, m) of that product over x_0..x_i: exact, with
    # one, two and three zeros.
    for x in (np.array([2.0, 0.0, 3.0, -1.5, 0.5]), np.array([2.0, 0.0, 3.0, 0.0, 5.0, 1.5]),
              np.array([0.0, 1.5, 0.0, 2.0, 0.0, 3.0])):
        n = x.size
        others = lambda keep, k, m: np.prod([x[j] for j in keep if j not in (k, m)])  # noqa: E731
        prod = np.array([[0.0 if k == m else others(range(n), k, m) for m in range(n)]
                         for k in range(n)])
        cumprod = np.array([[0.0 if k == m else sum(others(range(i + 1), k, m)
                                                    for i in range(max(k, m), n))
                             for m in range(n)] for k in range(n)])
        with np.errstate(all="raise"):
            np.testing.assert_array_equal(nested_hessian(np.prod, x), prod)
            np.testing.assert_array_equal(nested_hessian(lambda x: np.cumprod(x).sum(), x),
                                          cumprod)
            np.testing.assert_array_equal(mutad.hessian(lambda x: np.cumprod(x).sum(), x),
                                          cumprod)


# Decisions: ties, zeros and NaNs are decided when the reduction runs --------------------------

from decisions import check_decision_kept, then_disturbed  # noqa: E402

RESTORED_TIED = np.array([0.3, 0.7, 0.7, -0.3, -0.3, 0.2])
"""Ties at the maximum and at the minimum, of values inversion does not restore bit for bit."""
RESTORED_DISTINCT = np.array([0.3, 0.7, 0.2, -0.3, 0.4, -0.7])
RESTORED_TIED_ROWS = np.array([[0.7, 0.7, 0.2], [0.4, -0.3, 0.8], [-0.3, 0.2, -0.3]])
RESTORED_WITH_ZEROS = np.array([[0.7, 0.0, 0.2], [0.4, -0.3, 0.8], [0.0, 0.2, 0.0]])
HOLES = np.array([[False, True, False], [False, False, True], [True, False, False]])

DECISIONS = [
    # (operation, argument, differentiable there)
    (np.max, RESTORED_TIED, False),
    (np.max, RESTORED_DISTINCT, True),
    (np.min, RESTORED_TIED, False),
    (np.amax, RESTORED_TIED, False),
    (np.amin, RESTORED_DISTINCT, True),
    (np.nanmax, RESTORED_TIED, False),
    (np.nanmin, RESTORED_TIED, False),
    (np.ptp, RESTORED_TIED, False),
    (np.ptp, RESTORED_DISTINCT, True),
    (lambda x: np.max(x, axis=1), RESTORED_TIED_ROWS, False),
    (lambda x: np.min(x, axis=0, keepdims=True), RESTORED_TIED_ROWS, False),
    (lambda x: np.ptp(x, axis=1), RESTORED_TIED_ROWS, False),
    (lambda x: np.maximum.reduce(x, axis=1), RESTORED_TIED_ROWS, False),
    (lambda x: np.minimum.reduce(x), RESTORED_TIED_ROWS, False),
    (lambda x: x.max(axis=1), RESTORED_TIED_ROWS, False),
    (lambda x: np.max(x, axis=1, where=x < 0.75, initial=-1.0), RESTORED_TIED_ROWS, False),
    (np.prod, RESTORED_WITH_ZEROS, True),
    (lambda x: np.prod(x, axis=1), RESTORED_WITH_ZEROS, True),
    (lambda x: np.cumprod(x, axis=1), RESTORED_WITH_ZEROS, True),
    (np.cumprod, RESTORED_WITH_ZEROS, True),
    (lambda x: np.nanprod(x, axis=0), RESTORED_WITH_ZEROS, True),
    (lambda x: np.nansum(np.where(HOLES, np.nan, x), axis=1), RESTORED_WITH_ZEROS, True),
    (lambda x: np.nanmean(np.where(HOLES, np.nan, x), axis=0), RESTORED_WITH_ZEROS, True),
    (lambda x: np.nanmax(np.where(HOLES, np.nan, x), axis=0), RESTORED_TIED_ROWS, False),
    (lambda x: np.std(x[:, :1] * np.ones(3), axis=1), RESTORED_WITH_ZEROS, False),
]


@pytest.mark.parametrize(("operation", "x", "differentiable"), DECISIONS,
                         ids=[f"{i}" for i in range(len(DECISIONS))])
def test_reduction_decisions_survive_restoration_by_inversion(operation, x, differentiable):
    check_decision_kept(then_disturbed(operation), x, differentiable=differentiable)


def test_max_then_scaling_its_input_in_place():
    """The reproducer: ``x /= 3`` restores x within an ulp, and the maximum's gradient must
    still reach the element that was the maximum."""
    def f(x):
        m = x.max()
        x *= 3.0
        return m + x.sum()

    x = np.array([0.3, 0.7, 0.5])
    before = x.tobytes()
    (restored,) = mutad.gradient(f, x)
    (checkpointed,) = mutad.gradient(f, x, policy="checkpoint")
    assert x.tobytes() == before
    np.testing.assert_array_equal(restored, [3.0, 4.0, 3.0])
    np.testing.assert_array_equal(checkpointed, [3.0, 4.0, 3.0])


def test_tied_maxima_share_the_gradient_after_restoration():
    # The convention (equal shares among tied maxima) holds under both policies.
    def f(x):
        m = np.max(x)
        x *= 3.0
        x += 0.1
        return m

    for policy in POLICIES:
        (g,) = mutad.gradient(f, np.array([0.7, 0.2, 0.7]), policy=policy)
        np.testing.assert_array_equal(g, [0.5, 0.0, 0.5])


# median, quantile, percentile: the sort is decided when they run ------------------------------

HOLES_2D = np.array([[False, True, False], [False, False, False], [True, False, True]])
QUANTILE_CASES = [
    lambda x: np.median(x),
    lambda x: np.median(x, axis=1),
    lambda x: np.median(x, axis=0, keepdims=True),
    lambda x: np.quantile(x, [0.2, 0.7], axis=0),
    lambda x: np.quantile(x, 0.3, axis=(0, 1), method="midpoint"),
    lambda x: np.percentile(x, 30, axis=1, keepdims=True),
    lambda x: np.quantile(x, 0.3, method="nearest"),
    lambda x: np.quantile(x, 0.4, axis=-1, method="higher"),
    lambda x: np.quantile(x, [0.1, 0.9], axis=1, method="lower"),
    lambda x: np.nanmedian(np.where(HOLES_2D, np.nan, x), axis=1),
    lambda x: np.nanquantile(np.where(HOLES_2D, np.nan, x), [0.25, 0.5], axis=0),
    lambda x: np.nanpercentile(np.where(HOLES_2D, np.nan, x), 60.0),
    lambda x: x.max(axis=0) - np.median(x, axis=0),
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("operation", QUANTILE_CASES,
                         ids=[str(i) for i in range(len(QUANTILE_CASES))])
def test_quantiles(operation, policy, rng):
    x = rng.standard_normal((3, 3))
    mutad.check_grads(lambda x: np.sum(np.sin(operation(x))), x, policy=policy, order=2)
    mutad.check_jvp(lambda x: np.sum(np.sin(operation(x))), x)


@pytest.mark.parametrize("operation", QUANTILE_CASES,
                         ids=[str(i) for i in range(len(QUANTILE_CASES))])
def test_quantile_decisions_survive_restoration_by_inversion(operation):
    # Ties, and distinct values whose order inversion could swap were the sort taken again.
    check_decision_kept(then_disturbed(operation), RESTORED_TIED_ROWS, differentiable=False)
    check_decision_kept(then_disturbed(operation), RESTORED_DISTINCT[:6].reshape(2, 3)[[0, 1, 0]]
                        + np.array([[0.0], [0.0], [0.05]]), differentiable=False)


@pytest.mark.parametrize("policy", POLICIES)
def test_quantile_gradient_with_respect_to_q(policy, rng):
    x = rng.standard_normal((4, 5))
    q = np.array([0.2, 0.65])
    mutad.check_grads(lambda x, q: np.sum(np.sin(np.quantile(x, q, axis=0))), x, q,
                      policy=policy, order=2)
    mutad.check_grads(lambda x, q: np.sum(np.sin(np.percentile(x, 100 * q, axis=1))), x, q,
                      policy=policy)
    mutad.check_jvp(lambda x, q: np.sum(np.sin(np.nanquantile(x, q, axis=0))), x, q)


def test_quantile_conventions():
    # A median of an even count averages the middle two; a NaN result passes no derivative;
    # an all-NaN slice of nanmedian none either.
    np.testing.assert_array_equal(
        mutad.gradient(np.median, np.array([4.0, 1.0, 3.0, 2.0]))[0], [0.0, 0.0, 0.5, 0.5])
    np.testing.assert_array_equal(
        mutad.gradient(lambda x: np.quantile(x, 0.5), np.array([1.0, np.nan, 2.0]))[0],
        [0.0, 0.0, 0.0])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        (g,) = mutad.gradient(lambda x: np.nansum(np.nanmedian(x, axis=1)),
                              np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan]]))
    np.testing.assert_array_equal(g, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


ALL_QUANTILE_METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
                        "interpolated_inverted_cdf", "hazen", "weibull", "linear",
                        "median_unbiased", "normal_unbiased", "lower", "higher", "nearest",
                        "midpoint"]


@pytest.mark.parametrize("method", ALL_QUANTILE_METHODS)
def test_quantile_methods_take_numpys_elements(method, rng):
    # The gradient's weights on the elements, applied to them, give NumPy's quantile: the same
    # elements and weights at every q, among them those on the boundaries of each method's
    # cases (q n - 1 whole, below the first element, beyond the last).
    for n in range(1, 8):
        x = rng.permutation(np.sort(rng.standard_normal(n)) + 3.0 * np.arange(n))
        for q in np.unique(np.concatenate([np.linspace(0, 1, 29), np.arange(n + 1) / n,
                                           np.arange(n) / max(n - 1, 1)])):
            value, g = mutad.value_and_grad(
                lambda x: np.quantile(x, q, method=method))(x)
            assert value == np.quantile(x, q, method=method)
            np.testing.assert_allclose(g @ x, value, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("method", ALL_QUANTILE_METHODS)
def test_quantile_methods(method, policy, rng):
    x = rng.standard_normal((4, 5))
    x[1, 2] = np.nan
    value, _ = mutad.value_and_grad(
        lambda x: np.sum(np.nanquantile(x, [0.1, 0.5, 0.97], axis=0, method=method)))(x)
    assert value == np.sum(np.nanquantile(x, [0.1, 0.5, 0.97], axis=0, method=method))
    x[1, 2] = 0.3
    for f in (lambda x: np.sum(np.sin(np.quantile(x, [0.05, 0.3, 0.9], axis=1, method=method))),
              lambda x: np.percentile(x, 37.5, method=method),
              lambda x: np.sum(np.nanpercentile(np.where(x > 1.2, np.nan, x), [20, 80], axis=0,
                                                method=method))):
        mutad.check_grads(f, x, policy=policy)
        mutad.check_jvp(f, x)


@pytest.mark.parametrize("method", ["interpolated_inverted_cdf", "hazen", "weibull",
                                    "median_unbiased", "normal_unbiased"])
def test_continuous_quantile_methods_in_q(method, rng):
    x = rng.standard_normal((4, 5))
    q = np.array([0.33, 0.65])  # away from each method's knots for 4 and 5 elements
    mutad.check_grads(lambda x, q: np.sum(np.sin(np.quantile(x, q, axis=0, method=method))),
                      x, q)
    mutad.check_jvp(lambda x, q: np.sum(np.sin(np.nanquantile(x, q, axis=1, method=method))),
                    x, q)


WEIGHTED = {
    "one": lambda x, w: np.quantile(x[0], 0.3, method="inverted_cdf", weights=w[0]),
    "several-axis": lambda x, w: np.quantile(x, [0.1, 0.5, 0.95], axis=1,
                                             method="inverted_cdf", weights=w),
    "percentile-keepdims": lambda x, w: np.percentile(x, 40.0, axis=0, keepdims=True,
                                                      method="inverted_cdf", weights=w),
    "nan-skipping": lambda x, w: np.nanquantile(np.where(x > 1.0, np.nan, x), [0.2, 0.7],
                                                axis=1, method="inverted_cdf", weights=w),
}


@pytest.mark.parametrize("name", WEIGHTED)
def test_weighted_quantiles(name, rng):
    # NumPy weights inverted_cdf alone, whose quantile is one of the elements: NumPy's value,
    # its derivative that element's (the weights, constants here, decide which)
    f = WEIGHTED[name]
    x, w = rng.standard_normal((3, 7)), rng.uniform(0.1, 2.0, (3, 7))
    copy = x.copy()
    value, _ = mutad.value_and_grad(lambda x: np.sum(f(x, w)))(copy)
    assert value == np.sum(f(x, w))
    mutad.check_grads(lambda x: np.sum(np.sin(f(x, w))), copy)
    mutad.check_jvp(lambda x: np.sum(np.sin(f(x, w))), copy)
    assert copy.tobytes() == x.tobytes()


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_cumprod_after_writes_whose_undo_would_round_a_factor_to_zero(policy):
    # x[0] becomes 5.55e-17 and undoing the second pair of writes by inversion would give 0,
    # which cumprod's pullback divides by: the per-element check saves that element instead.
    def g(x):
        x -= 0.7
        x += 0.2
        y = np.cumprod(x)
        x -= 0.7
        x += 0.2
        return np.sum(y)

    x = np.array([0.5, 0.4])
    before = x.tobytes()
    (grad,) = mutad.gradient(g, x, policy=policy)
    np.testing.assert_allclose(grad, [0.9, 5.551115123125783e-17], rtol=1e-12)
    assert x.tobytes() == before


# NumPy lets these reduce a 0-d array over axis 0 or -1 (a tuple of axes, or mean, var, std,
# median, only over no axis); their pullbacks expand the cotangent by the axis they removed.
# (nanstd is left out: the std of one element sits at the kink of the square root.)
ZERO_D_REDUCTIONS = [np.sum, np.prod, np.max, np.min, np.amax, np.ptp, np.nansum, np.nanprod,
                     np.nanmax, np.nanmin, np.nanmean, np.nanvar, np.cumsum,
                     np.cumprod, np.nancumsum, np.nancumprod]


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("reduction", ZERO_D_REDUCTIONS, ids=lambda f: f.__name__)
def test_reductions_over_axis_0_of_a_0d_array(reduction, axis):
    def f(x):
        return np.sum(np.sin(reduction(x * 2.0, axis=axis)))

    x = np.array(0.3)
    value, _ = mutad.value_and_grad(f)(x)
    assert value == f(x)
    mutad.check_grads(f, x)

# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, and the transpose of
# the reverse rule (rule_checks.check_forward_rule)

ZEROS = P.copy()
ZEROS[0, 1] = 0.0                   # one zero in row 0
ZEROS[1, 0] = ZEROS[1, 3] = 0.0     # two zeros in row 1
CONSTANT_ROW = np.vstack([X[:2], np.full((1, 4), 0.7)])

REDUCTIONS = [
    rule_case(np.sum, X),
    rule_case(np.sum, X, axis=1),
    rule_case(np.sum, X3, axis=(0, 2), keepdims=True),
    rule_case(np.sum, X, axis=0, where=WHERE),
    rule_case(np.sum, X, initial=5.0),
    rule_case((np.add, "reduce"), X),
    rule_case((np.add, "reduce"), X, axis=1, keepdims=True),
    rule_case(np.nansum, with_nans(X)),
    rule_case(np.nansum, with_nans(X3), axis=1, keepdims=True),
    rule_case(np.nansum, with_nans(X), axis=0, initial=2.0),
    rule_case(np.mean, X),
    rule_case(np.mean, X3, axis=(1, 2)),
    rule_case(np.mean, X, axis=0, keepdims=True, where=WHERE),
    rule_case(np.nanmean, with_nans(X)),
    rule_case(np.nanmean, with_nans(X3, 2), axis=2, keepdims=True),
    rule_case(np.prod, P),
    rule_case(np.prod, P, axis=1),
    rule_case(np.prod, ZEROS, axis=1, keepdims=True),
    rule_case(np.prod, ZEROS, axis=0),
    rule_case(np.prod, P, axis=1, where=WHERE, initial=2.0),
    rule_case((np.multiply, "reduce"), ZEROS),
    rule_case((np.multiply, "reduce"), P, axis=1),
    rule_case(np.nanprod, with_nans(P)),
    rule_case(np.nanprod, with_nans(ZEROS), axis=1),
    rule_case(np.var, X),
    rule_case(np.var, X3, axis=1, ddof=1),
    rule_case(np.var, X, axis=0, keepdims=True, where=WHERE),
    rule_case(np.std, X),
    rule_case(np.std, X3, axis=(0, 2), keepdims=True, ddof=1),
    rule_case(np.std, CONSTANT_ROW, axis=1),
    rule_case(np.cumsum, X),
    rule_case(np.cumsum, X3, axis=1),
    rule_case((np.add, "accumulate"), X),
    rule_case((np.add, "accumulate"), X3, axis=2),
    rule_case(np.cumprod, P),
    rule_case(np.cumprod, ZEROS, axis=1),
    rule_case(np.cumprod, ZEROS.T, axis=0),
    rule_case(np.cumprod, ZEROS),
    rule_case((np.multiply, "accumulate"), ZEROS.T),
    rule_case((np.multiply, "accumulate"), P, axis=1),
    rule_case(np.ptp, X),
    rule_case(np.ptp, X3, axis=1, keepdims=True),
    rule_case(np.ptp, TIES, axis=1, fd=False),
]
for _extreme in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin):
    REDUCTIONS += [
        rule_case(_extreme, X),
        rule_case(_extreme, X3, axis=1),
        rule_case(_extreme, X3, axis=(0, 2), keepdims=True),
        rule_case(_extreme, TIES, axis=1),            # two-way ties: the mean of two tangents
        rule_case(_extreme, np.vstack([TIES, TIES[:1]]), axis=0, fd=False),  # ties of three
    ]
REDUCTIONS += [
    rule_case(np.nanmax, with_nans(X), axis=1),
    rule_case(np.nanmin, with_nans(X3), axis=0),
    rule_case(np.max, X, axis=1, where=WHERE, initial=-5.0),
    rule_case((np.maximum, "reduce"), X),
    rule_case((np.maximum, "reduce"), TIES, axis=1),
    rule_case((np.minimum, "reduce"), X3, axis=2),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arguments are cases here
@pytest.mark.parametrize("case", REDUCTIONS, ids=case_id)
def test_forward_rule_reduction(case, rng):
    check_forward_rule(case, rng)


def test_extreme_ties_take_the_mean_tangent():
    a = np.array([2.0, 5.0, 5.0, 5.0, 1.0])
    t = np.array([1.0, 2.0, 4.0, 9.0, 7.0])
    assert RULES[np.max].forward((t,), a)[1] == 5.0
    assert RULES[np.ptp].forward((t,), a)[1] == 5.0 - 7.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_all_nan_slice_passes_no_tangent():
    a = np.array([[np.nan, np.nan], [1.0, np.nan]])
    t = np.ones_like(a)
    for key in (np.nanmean, np.nansum, np.nanmax):
        _, dy = RULES[key].forward((t,), a, axis=1)
        np.testing.assert_array_equal(dy, [0.0, 1.0])


@pytest.mark.parametrize("f", [
    lambda x: (np.maximum.accumulate(x) ** 2).sum(),
    lambda x: (np.minimum.accumulate(x[::-1]) * x).sum(),
    lambda x: np.fmax.accumulate(x.reshape(5, 1) * x[:2], axis=1).sum(),
    lambda x: np.logaddexp.accumulate(x).sum(),
], ids=("maximum", "minimum", "fmax along an axis", "logaddexp"))
def test_accumulate_of_an_elementwise_row_is_followed_step_by_step(f):
    """ufunc.accumulate without a rule of its own (a running maximum): the ufunc applied step
    by step as NumPy's loop applies it, the same values, in both modes."""
    x = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)


ACCUMULATE_LAYOUTS = {
    "C": lambda x: x,
    "Fortran": np.asfortranarray,
    "reversed": lambda x: x[::-1, ::-1],
    "strided": lambda x: np.repeat(x, 2, axis=1)[:, ::2],
    "transposed": lambda x: np.ascontiguousarray(x.T).T,
}


@pytest.mark.parametrize("layout", ACCUMULATE_LAYOUTS)
@pytest.mark.parametrize("ufunc", (np.subtract, np.divide, np.power, np.arctan2, np.hypot,
                                   np.minimum, np.logaddexp), ids=lambda u: u.__name__)
@pytest.mark.parametrize("axis", (0, 1))
def test_accumulate_step_by_step_gives_numpys_bits_or_is_refused(layout, ufunc, axis):
    """ufunc.accumulate step by step: its result was laid out along the accumulated axis (so a
    later sum rounded otherwise than NumPy's, in the last bit), and np.power's and np.arctan2's
    rows, through vectorized loops, rounded otherwise than NumPy's loop over overlapping
    operands; now NumPy's layout, and NumPy's bits or refused; a replay traces it."""
    base = np.random.default_rng(3).uniform(0.5, 1.5, (33, 17))
    x = ACCUMULATE_LAYOUTS[layout](base)
    before = x.copy()
    f = lambda x: ufunc.accumulate(x, axis=axis).sum()  # noqa: E731
    try:
        value, grad = mutad.value_and_grad(f)(x)
    except mutad.errors.UnsupportedOperationError as error:
        assert "rounds otherwise" in str(error)
        return
    assert np.asarray(value).tobytes() == f(x).tobytes()
    assert np.array_equal(x, before)
    try:
        y = mutad.jvp(lambda x: ufunc.accumulate(x, axis=axis), (x,), (np.ones_like(x),))[0]
    except mutad.errors.UnsupportedOperationError as error:
        assert "rounds otherwise" in str(error)
    else:
        assert y.tobytes() == ufunc.accumulate(x, axis=axis).tobytes()
        assert y.strides == ufunc.accumulate(x, axis=axis).strides
    replaying = mutad.value_and_grad(f, replay=True)
    for scale in (1.0, 0.9, 1.1):
        z = ACCUMULATE_LAYOUTS[layout](base * scale)
        assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                   for a, b in zip(replaying(z), mutad.value_and_grad(f)(z), strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_power_accumulate_of_a_row_is_numpys_or_refused(seed):
    """Even along one row NumPy's np.power.accumulate may round a step otherwise than
    np.power of the two scalars (one of nine here): its bits, or refused."""
    x = np.random.default_rng(seed).uniform(0.5, 1.5, 9)
    f = lambda x: np.power.accumulate(x) @ np.arange(9.0)  # noqa: E731
    try:
        value = mutad.value_and_grad(f)(x)[0]
    except mutad.errors.UnsupportedOperationError as error:
        assert "rounds otherwise" in str(error)
    else:
        assert np.asarray(value).tobytes() == f(x).tobytes()


def test_accumulate_step_by_step_differentiates_numpys_layouts():
    x = np.random.default_rng(4).uniform(0.5, 1.5, (4, 5, 6))
    for a in (np.asfortranarray(x), x.transpose(2, 0, 1), x[:, ::-1]):
        for axis in range(3):
            f = lambda a: (np.subtract.accumulate(a, axis=axis)  # noqa: E731
                           * np.arange(a.shape[-1])).sum()  # noqa: B023
            mutad.check_grads(f, a, modes=("rev", "fwd"))


def test_accumulate_with_out_and_dtype():
    """np.maximum.accumulate(x, out=w), into x itself, and with dtype=: NumPy's values, the
    gradient of them, the same replayed, the caller's array unchanged."""

    def f(x):
        w = np.empty_like(x)
        np.maximum.accumulate(x, out=w)
        np.minimum.accumulate(x, out=x)
        return (w * x).sum() + np.maximum.accumulate(x, dtype=np.float32).sum()

    def g(x):
        w = np.empty_like(x)
        np.maximum.accumulate(x, out=w)
        np.minimum.accumulate(x, out=x)
        return (w * x).sum()

    x = np.array([0.3, 2.0, -1.0, 5.0, 4.0, 7.0])
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(g, x + 0.01 * np.arange(6), modes=("rev", "fwd"))
    replaying = mutad.grad(f, replay=True)
    for y in (x, x[::-1].copy(), x * 2):
        assert replaying(y).tobytes() == mutad.grad(f)(y).tobytes()
    assert x.tobytes() == before


def _running_max_in_place(x):
    y = x * 2.0
    np.maximum.accumulate(y, out=y)
    return (y * np.arange(5.0)).sum()


def _shifted_out(x):
    y = x * 1.0
    np.minimum.accumulate(y[:4], out=y[1:])  # overlapping: NumPy reads the values before
    return (y ** 2).sum()


@pytest.mark.parametrize("f", [
    lambda x: (np.maximum.accumulate(x, out=np.empty(5)) ** 2).sum(),
    lambda x: np.fmax.accumulate(x.reshape(5, 1) * x[:2], axis=1, out=(np.zeros((5, 2)),)).sum(),
    _running_max_in_place,
    _shifted_out,
    lambda x: np.maximum.accumulate(x, out=x) @ np.arange(5.0),  # the caller's array itself
], ids=("new", "tuple along an axis", "in place", "overlapping views", "into the argument"))
def test_accumulate_into_out(f):
    x = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    assert mutad.value_and_grad(f)(x.copy())[0] == f(x.copy())
    mutad.check_grads(f, x)


def test_accumulate_into_out_of_another_dtype_or_shape_is_numpys():
    """An out= of another dtype makes NumPy accumulate in that dtype, as dtype= does: the same
    values; an out= of another shape is NumPy's error."""
    x = np.array([1.0, 3.0, 2.0])
    for f in (lambda x: np.subtract.accumulate(x, out=np.empty(3, np.float32)).sum(),
              lambda x: np.maximum.accumulate(x * 1.1, dtype=np.float32).sum()):
        value, _ = mutad.value_and_grad(f)(x)
        assert np.asarray(value).tobytes() == np.asarray(f(x)).tobytes()
    with pytest.raises(ValueError):
        mutad.gradient(lambda x: np.maximum.accumulate(x, out=np.empty((1, 3))).sum(), x)


REDUCTIONS = {
    "logaddexp": lambda x: np.logaddexp.reduce(x),
    "logaddexp along an axis, keepdims": lambda x: (np.logaddexp.reduce(
        x.reshape(2, 3), axis=1, keepdims=True) ** 2).sum(),
    "logaddexp2 of all axes": lambda x: np.logaddexp2.reduce(x.reshape(3, 2), axis=None),
    "hypot of a reversed view": lambda x: np.hypot.reduce(x[::-1].reshape(3, 2), axis=0).prod(),
    "subtract with initial": lambda x: np.subtract.reduce(x, initial=2.0),
    "divide of a column": lambda x: np.divide.reduce(x.reshape(2, 3).T, axis=-1).sum(),
    "fmax of a list": lambda x: np.fmax.reduce([x[0], x[2] * x[1], x[4]]),
    "complex subtract": lambda x: np.abs(np.subtract.reduce(x * (1 + 0.5j) - x[::-1] * 0.25j)),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduce_of_an_elementwise_row_is_a_fold(name):
    """ufunc.reduce without a rule of its own (np.logaddexp.reduce, a log-likelihood's
    normaliser) was refused as a function without a rule; it is NumPy's fold, its values bit
    for bit, in both modes, to second order; a replay traces it."""
    f = REDUCTIONS[name]
    x = np.array([0.5, 1.5, 1.25, 3.0, 2.0, 0.75])
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"), order=2)
    replaying = mutad.value_and_grad(f, replay=True)
    for y in (x, x[::-1].copy()):
        assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                   for a, b in zip(replaying(y), mutad.value_and_grad(f)(y), strict=True))
    assert x.tobytes() == before


def test_reduce_in_another_order_than_numpys_is_refused():
    """Over all axes of an array in Fortran order NumPy's iterator reduces in memory order,
    not the fold's C order: refused rather than a value a last bit apart; NumPy's errors are
    NumPy's."""
    x = np.asfortranarray(np.random.default_rng(0).random((3, 4)) + 0.5)
    fold = np.logaddexp.accumulate(np.ravel(x))[-1]  # C order: not NumPy's bits here
    assert fold.tobytes() != np.logaddexp.reduce(x, axis=None).tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="another order"):
        mutad.gradient(lambda x: np.logaddexp.reduce(x, axis=None), x)
    with pytest.raises(ValueError, match="not reorderable"):
        mutad.gradient(lambda x: np.subtract.reduce(x, axis=None), x)
    with pytest.raises(ValueError, match="no identity"):
        mutad.gradient(lambda x: np.subtract.reduce(x[:0], axis=0).sum(), x)
    assert mutad.gradient(lambda x: np.logaddexp.reduce(x[:0], axis=0).sum(), x)[0].sum() == 0


def test_reduce_whose_numpy_loop_is_not_the_fold_says_so():
    """NumPy 2.4's float np.power.reduce of three values is not (x0 ** x1) ** x2; the refusal
    said the array was laid out so that NumPy reduced it in another order, of a 1-d array,
    and told the user to reduce a C-ordered copy, which gives the same value again."""
    x = np.array([1.03, 0.81, 1.37])
    f = lambda x: np.power.reduce(x)  # noqa: E731
    fold = (x[0] ** x[1]) ** x[2]
    if np.power.reduce(x) == fold:  # a NumPy whose loop is the fold
        assert mutad.value_and_grad(f)(x)[0] == fold
        return
    with pytest.raises(mutad.errors.UnsupportedOperationError) as refused:
        mutad.gradient(f, x)
    message = str(refused.value)
    assert "NumPy's own loop does not compute" in message and repr(float(fold)) in message
    assert "C order" not in message and "ascontiguousarray" not in message


@pytest.mark.parametrize("indices", ([0, 2, 3], [0, 4, 1, 5], [3], [0, 0, 2]))
def test_add_reduceat_sums_segments_as_numpy_does(indices):
    """np.add.reduceat: NumPy's segment sums; where the indices go down an output is the single
    element, so segments overlap and an element's cotangent adds those of every segment."""
    x = np.arange(1.0, 7.0)
    f = lambda x: (np.add.reduceat(x * x, indices) ** 2).sum()  # noqa: E731
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x, order=2)
    g = lambda x: np.add.reduceat(x.reshape(2, 3), [0, 2], axis=1).prod()  # noqa: E731
    mutad.check_grads(g, x)


@pytest.mark.parametrize("zeros", ((), (1,), (1, 2)))
@pytest.mark.parametrize("indices", ([0, 2, 3], [0, 4, 1, 5], [3], [0, 0, 2]))
def test_multiply_reduceat_multiplies_segments_as_numpy_does(indices, zeros):
    """np.multiply.reduceat: NumPy's segment products; an element's cotangent adds, for every
    segment that holds it, the product of the segment's other elements (exact at zeros), in
    both modes and to second order."""
    x = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9])
    x[list(zeros)] = 0.0
    f = lambda x: (np.multiply.reduceat(x * x, indices) ** 2).sum()  # noqa: E731
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x, order=2)
    g = lambda x: np.multiply.reduceat(x.reshape(3, 2), [1, 0, 2], axis=0).sum()  # noqa: E731
    mutad.check_grads(g, x, modes=("rev", "fwd"))


@pytest.mark.parametrize("ufunc", (np.maximum, np.minimum))
@pytest.mark.parametrize("indices", ([0, 2, 3], [0, 4, 1, 5], [3], [0, 0, 2]))
def test_selection_reduceat_reduces_each_segment(ufunc, indices):
    """np.maximum.reduceat (a segment maximum): ufunc.reduce over each segment, NumPy's values
    (a selection's is the same in any order), in both modes."""
    x = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9])
    f = lambda x: (ufunc.reduceat(x * x, indices) ** 2).sum()  # noqa: E731
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x, order=2)
    g = lambda x: ufunc.reduceat(x.reshape(2, 3), [0, 2], axis=1).sum()  # noqa: E731
    mutad.check_grads(g, x)
    mutad.check_jvp(g, x)


def test_accumulate_and_reduce_of_long_doubles_compare_values_not_padding():
    """The comparison with NumPy's bits read a long double's bytes, six of which are padding
    that NumPy leaves as they were: the same values refused, by chance of memory."""
    rng = np.random.default_rng(6)
    for shape in ((1,), (5,), (4, 1), (1, 4), (3, 2)):
        x = rng.uniform(0.5, 1.5, shape).astype(np.longdouble)
        for f in (lambda x: np.subtract.accumulate(x, axis=0).sum(),
                  lambda x: np.logaddexp.reduce(x, axis=0).sum()):
            for _ in range(5):
                value, grad = mutad.value_and_grad(f)(x)
                assert value == f(x) and grad.dtype == np.longdouble

@pytest.mark.parametrize("layout", ACCUMULATE_LAYOUTS)
@pytest.mark.parametrize("axis", (0, 1))
def test_selection_reduceat_is_laid_out_as_numpys(layout, axis):
    """np.maximum.reduceat along an axis was stacked along it, a layout other than NumPy's, so
    a later sum of it rounded otherwise in the last bit; now NumPy's layout and bits."""
    x = ACCUMULATE_LAYOUTS[layout](np.random.default_rng(5).uniform(0.5, 1.5, (9, 33)))
    f = lambda x: np.maximum.reduceat(x, [0, 2, 5], axis=axis).sum()  # noqa: E731
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == f(x).tobytes()
    y = mutad.jvp(lambda x: np.maximum.reduceat(x, [0, 2, 5], axis=axis), (x,),
                  (np.ones_like(x),))[0]
    assert y.strides == np.maximum.reduceat(x, [0, 2, 5], axis=axis).strides


# out= of a wider dtype than the data: NumPy reduces in out's dtype ---------------------------


def _into_float64(reduction, shape):
    def program(x):
        out = np.zeros(shape, np.float64)
        reduction(x, out)
        return out
    return program


WIDER_OUT = {
    "sum": _into_float64(lambda x, o: np.sum(x, axis=1, out=o), (3,)),
    "sum_all": _into_float64(lambda x, o: np.sum(x, out=o), ()),
    "nansum": _into_float64(lambda x, o: np.nansum(x, axis=0, out=o), (301,)),
    "prod": _into_float64(lambda x, o: np.prod(x[:, :8], axis=1, out=o), (3,)),
    "cumsum": _into_float64(lambda x, o: np.cumsum(x, out=o), (903,)),
    "cumprod": _into_float64(lambda x, o: np.cumprod(x[:, :8], axis=1, out=o), (3, 8)),
    "nancumsum": _into_float64(lambda x, o: np.nancumsum(x, axis=1, out=o), (3, 301)),
    "cumulative_sum": _into_float64(lambda x, o: np.cumulative_sum(x, axis=1, out=o),
                                    (3, 301)),
    "mean": _into_float64(lambda x, o: np.mean(x, axis=1, out=o), (3,)),
    "nanmean": _into_float64(lambda x, o: np.nanmean(x, axis=1, out=o), (3,)),
    "add.reduce": _into_float64(lambda x, o: np.add.reduce(x, axis=1, out=o), (3,)),
    "add.accumulate": _into_float64(lambda x, o: np.add.accumulate(x, axis=1, out=o), (3, 301)),
    "multiply.reduce": _into_float64(lambda x, o: np.multiply.reduce(x[:, :8], 1, None, o),
                                     (3,)),
    "trace": _into_float64(lambda x, o: np.trace(x, out=o), ()),
    "einsum": _into_float64(lambda x, o: np.einsum("ij,kj->ik", x, x, out=o), (3, 3)),
    "einsum_sum": _into_float64(lambda x, o: np.einsum("ij->", x, out=o), ()),
    "sum_positional": _into_float64(lambda x, o: np.sum(x, 1, None, o), (3,)),
    "mean_method_positional": _into_float64(lambda x, o: x.mean(1, None, o), (3,)),
    "cumsum_method": _into_float64(lambda x, o: x.cumsum(axis=1, out=o), (3, 301)),
}


@pytest.mark.parametrize("name", WIDER_OUT)
def test_reduction_into_a_wider_out_is_numpys(name):
    """float32 data reduced into a float64 ``out``: NumPy reduces in float64 (in the
    promotion of the data's dtype and out's), not in float32 then widened; so does mutad, in
    both modes and replayed."""
    program = WIDER_OUT[name]
    x = (np.random.default_rng(5).random((3, 301)) * 3 + 0.5).astype(np.float32)
    expected = program(x.copy())
    assert np.asarray(expected).dtype == np.float64
    y, _ = mutad.jvp(program, (x,), (np.ones_like(x),))
    assert np.asarray(y).dtype == np.float64 and np.asarray(y).tobytes() == expected.tobytes()

    def loss(x):
        return np.sum(program(x) * 1.0)

    value, _ = mutad.value_and_grad(loss)(x)
    assert np.float64(value).tobytes() == np.float64(loss(x.copy())).tobytes()
    replaying = mutad.value_and_grad(loss, replay=True)
    for _ in range(2):
        value, _ = replaying(x)
        assert np.float64(value).tobytes() == np.float64(loss(x.copy())).tobytes()
    mutad.check_grads(program, x, modes=("rev", "fwd"))


@pytest.mark.parametrize("program", [
    lambda x: np.var(x, axis=1, out=np.zeros(3)),
    lambda x: np.std(x, out=np.zeros((), np.float64)),
    lambda x: np.ptp(x, axis=0, out=np.zeros(301)),
    lambda x: np.mean(x.astype(np.float64), axis=1, out=np.zeros(3, np.float32)),
    lambda x: np.fft.fft(x, out=np.zeros((3, 301), np.complex128)),
], ids=["var", "std", "ptp", "mean_narrower", "fft"])
def test_out_rounded_otherwise_by_numpy_is_refused(program):
    """Where NumPy's ``out=`` of another dtype rounds steps that no setting of the rule
    reproduces (np.var sums float32 squares in out's float64; np.mean rounds a float64 sum
    into a float32 out before dividing), mutad refuses rather than compute another value."""
    x = (np.random.default_rng(5).random((3, 301)) + 0.5).astype(np.float32)

    def loss(x):
        out = program(x)
        return np.sum(np.abs(out))

    with pytest.raises(mutad.MutadError, match="out="):
        mutad.grad(loss)(x)
    with pytest.raises(mutad.MutadError, match="out="):
        mutad.jvp(loss, (x,), (np.ones_like(x),))


def test_quantile_weights_that_carry_a_derivative_are_refused():
    """weights= is keyword-only: the refusal names stop_gradient as the way out too, and that
    way gives the derivative with the weights held constant."""
    x = np.linspace(0.1, 1.0, 7)
    with pytest.raises(mutad.MutadError, match="weights=.*stop_gradient"):
        mutad.gradient(lambda x: np.quantile(x, 0.3, method="inverted_cdf",
                                             weights=np.exp(x)), x)
    with pytest.raises(mutad.MutadError, match="weights=.*stop_gradient"):
        mutad.jvp(lambda x: np.quantile(x, 0.3, method="inverted_cdf", weights=np.exp(x)),
                  (x,), (np.ones_like(x),))
    held = mutad.gradient(lambda x: np.quantile(
        x, 0.3, method="inverted_cdf", weights=mutad.stop_gradient(np.exp(x))), x)
    assert np.array_equal(held[0], mutad.gradient(lambda x: np.quantile(
        x, 0.3, method="inverted_cdf", weights=np.exp(np.linspace(0.1, 1.0, 7))), x)[0])
