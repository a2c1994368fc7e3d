"""Wrong answers found in traced, forward and second-order differentiation at special values,
each checked against NumPy's (SciPy's) own run bit for bit; every one failed before its fix."""

import mpmath
import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import mutad


def bits(v):
    return np.asarray(v).tobytes()


def derivatives(f, x):
    """f's value, gradient and forward-mode derivative along ones, of an f that works on its
    argument in place; checks the value is NumPy's and the caller's array is left as it was."""
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    y, t = mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
    assert bits(y) == bits(value)
    return g, t


# ----------------------------------------------------------------------------------------------
# scipy.special.logsumexp's partials were sign · b_i e^(a_i - y): y = m + log|s'| rounds
# log|s'| away where the largest term m is large, so two equal terms at 1e17 had shares of 1
# each (at 1e15, 0.47 each), where they are 1/2. They are now the softmax's shares,
# b_i e^(a_i - m) / s', whatever y rounded to.

LARGE = [  # (a, b, return_sign, the partials dy/da)
    (np.array([1e300, 1e300, -1e300]), None, False, [0.5, 0.5, 0.0]),
    (np.array([1e17, 1e17]), None, False, [0.5, 0.5]),
    (np.array([1e15, 1e15]), None, False, [0.5, 0.5]),
    (np.array([-1e20, -1e20, -1e20, -1e20]), None, False, [0.25] * 4),
    (np.array([1e20, 1e20, -1e20]), np.array([1.0, 3.0, 1.0]), False, [0.25, 0.75, 0.0]),
    (np.array([1e17, 1e17]), np.array([1.0, -3.0]), True, [-0.5, 1.5]),
]


@pytest.mark.parametrize("a, b, return_sign, expected", LARGE, ids=str)
def test_logsumexp_shares_of_terms_far_from_zero(a, b, return_sign, expected):
    def f(a):
        a *= 1.0  # in place
        y = scipy.special.logsumexp(a, b=b, return_sign=return_sign)
        return y[0] if return_sign else y

    g, t = derivatives(f, a)
    np.testing.assert_allclose(g, expected, rtol=1e-15)
    np.testing.assert_allclose(t, np.sum(expected), rtol=1e-15)


def test_logsumexp_partials_in_b_and_along_an_axis_far_from_zero():
    a = np.array([[1e18, 1e18, 1e18], [1.0, 2.0, 3.0]])
    b = np.array([1.0, 2.0, 1.0])

    def f(b):
        return scipy.special.logsumexp(a, axis=1, b=b) @ np.array([1.0, 2.0])

    g, t = derivatives(f, b)
    small = np.exp(a[1]) / (b @ np.exp(a[1]))  # d y_1 / d b = e^(a_1) / s_1
    np.testing.assert_allclose(g, 1.0 / 4.0 + 2.0 * small, rtol=1e-14)
    np.testing.assert_allclose(t, np.sum(g), rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# scipy.special.spence's derivative, log z / (1 - z), was taken as -log1p(w) / w with
# w = z - 1, which rounds z away below 1/2: -inf at z = 1e-30 (where it is -69.08), and a
# relative error of 4e-9 at z = 1e-10. log z itself is taken where z - 1 is not exact.

@pytest.mark.parametrize("z", [1e-300, 1e-30, 1e-17, 1e-10, 0.1, 0.49, 2.5, 1e10])
def test_spence_derivative_far_from_one(z):
    def f(z):
        z *= 1.0  # in place
        return scipy.special.spence(z).sum()

    x = np.array([z])
    expected = float(mpmath.log(z) / (1 - mpmath.mpf(z)))
    g, t = derivatives(f, x)
    np.testing.assert_allclose(g, [expected], rtol=1e-15)
    np.testing.assert_allclose(t, expected, rtol=1e-15)
    s = mpmath.mpf(z)
    second = float(1 / (s * (1 - s)) + mpmath.log(s) / (1 - s) ** 2)
    np.testing.assert_allclose(mutad.hessian(f, x).ravel(), [second], rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# Derivatives of scipy.special functions whose closed forms cancel, taken as they are: dawsn'
# = 1 - 2x D(x) (D(x) ≈ 1/(2x)) lost x² ε of its relative accuracy, all of it at x = 1e8
# (0 where it is -5e-17); pseudo_huber's d/dδ = 2δ (s - 1) - r² / (δ s) lost as much where
# |r| ≪ δ (at δ = 1000, r = 2, a relative error of 6e-5; -4e-10 where it is 4e-30). Now
# dawsn' by its asymptotic series, as erfcx' is, and d/dδ as a product without a difference.

def dawson(x):
    return mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(-x * x) * mpmath.erfi(x)


@pytest.mark.parametrize("x", [10.0, 300.0, 1e4, -1e4, 1e8])
def test_dawsn_derivative_of_large_arguments(x):
    def f(x):
        x *= 1.0  # in place
        return scipy.special.dawsn(x).sum()

    with mpmath.workdps(60):
        s = mpmath.mpf(x)
        d = dawson(s)
        first = 1 - 2 * s * d
        second = -2 * d - 2 * s * first
    g, t = derivatives(f, np.array([x]))
    np.testing.assert_allclose(g, [float(first)], rtol=1e-15)
    np.testing.assert_allclose(t, float(first), rtol=1e-15)
    np.testing.assert_allclose(mutad.hessian(f, np.array([x])).ravel(), [float(second)],
                               rtol=1e-12)


@pytest.mark.parametrize("delta, r", [(1e3, 2.0), (1e10, 2.0), (1.0, 1e-5), (100.0, -1.0),
                                      (1.0, 1.0), (1e-3, 1.0), (1e-200, 1.0)])
def test_pseudo_huber_derivatives_where_the_closed_form_cancels(delta, r):
    def f(d):
        d *= 1.0  # in place
        return scipy.special.pseudo_huber(d, r).sum()

    with mpmath.workdps(60):
        dm, rm = mpmath.mpf(delta), mpmath.mpf(r)
        s = mpmath.sqrt(1 + (rm / dm) ** 2)
        by_delta = 2 * dm * (s - 1) - rm * rm / (dm * s)
    g, t = derivatives(f, np.array([delta]))
    np.testing.assert_allclose(g, [float(by_delta)], rtol=1e-14)
    np.testing.assert_allclose(t, float(by_delta), rtol=1e-14)
    (g_r,) = mutad.gradient(lambda rr: scipy.special.pseudo_huber(delta, rr), np.array(r))
    np.testing.assert_allclose(g_r, float(rm / s), rtol=1e-15)


# ----------------------------------------------------------------------------------------------
# binom's and poch's partials were y (ψ(·) - ψ(·)): 0 · inf = NaN where a Γ of the denominator
# is at a pole and the value is 0 (binom(2, 3), binom(1.5, 2.5), poch(-12, 2.5)), where the
# derivative is finite (1/3 in n at binom(2, 3)), and 0 where the arguments are large enough for
# the digamma difference to cancel (binom(1e30, 2.5), poch(1e30, 2.5)). Now the product rule
# at the poles and the digamma differences without cancellation.

def mp_binom(n, k):
    return mpmath.gamma(n + 1) * mpmath.rgamma(k + 1) * mpmath.rgamma(n - k + 1)


def mp_poch(z, m):
    return mpmath.gamma(z + m) * mpmath.rgamma(z)


@pytest.mark.parametrize("function, reference, point", [
    (scipy.special.binom, mp_binom, (2.0, 3.0)), (scipy.special.binom, mp_binom, (1.5, 2.5)),
    (scipy.special.binom, mp_binom, (7.5, 10.5)), (scipy.special.binom, mp_binom, (2.5, -12.0)),
    (scipy.special.binom, mp_binom, (1e30, 2.5)), (scipy.special.binom, mp_binom, (5.3, 2.1)),
    (scipy.special.poch, mp_poch, (-12.0, 2.5)), (scipy.special.poch, mp_poch, (0.0, 1.5)),
    (scipy.special.poch, mp_poch, (1e30, 2.5)), (scipy.special.poch, mp_poch, (1e20, -2.5)),
    (scipy.special.poch, mp_poch, (4.0, -1.5))], ids=lambda v: getattr(v, "__name__", str(v)))
def test_binom_and_poch_derivatives_at_poles_and_large_arguments(function, reference, point):
    def f(x):
        x *= 1.0  # in place
        return function(x[0], x[1])

    x = np.array(point)
    with mpmath.workdps(40):
        at = [mpmath.mpf(v) for v in point]
        expected = [float(mpmath.diff(lambda t: reference(t, at[1]), at[0])),
                    float(mpmath.diff(lambda t: reference(at[0], t), at[1]))]
        second = [[float(mpmath.diff(lambda s, t: reference(s, t), at, (2 - i - j, i + j)))
                   for j in range(2)] for i in range(2)] if max(point) < 1e3 else None
    g, t = derivatives(f, x)
    np.testing.assert_allclose(g, expected, rtol=1e-13)
    np.testing.assert_allclose(t, sum(expected), rtol=1e-13)
    if second is not None:
        np.testing.assert_allclose(mutad.hessian(f, x), second, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# scipy.stats.wasserstein_distance (and energy_distance, SciPy's _cdf_distance): the CDFs of the
# intervals of length zero between tied values were SciPy's searchsorted counts, which count
# every value of the tie; the value is the same (the interval has no length), but the gradient
# of a value tied with one of the other sample came out 0 where the distance is smooth: the
# distance of a sample from its own reflection shifted by 1/2 is 1/2 for every sample, and its
# gradient was ±1/4. Those CDFs are now counted by position in the merged order.

SAMPLE = np.array([0.0, 1.0, 1.0, 3.0, -1.0, 3.0, 2.0, 0.0])


@pytest.mark.parametrize("case", ["below", "weighted", "shifted"])
def test_wasserstein_distance_at_values_tied_across_the_samples(case):
    other = np.arange(8.0)  # every value of SAMPLE below its match in other: smooth there
    distance = {
        "below": lambda a: scipy.stats.wasserstein_distance(a, other),
        "weighted": lambda a: scipy.stats.wasserstein_distance(
            a, other, u_weights=np.arange(1.0, 9.0), v_weights=np.ones(8)),
        "shifted": lambda a: scipy.stats.wasserstein_distance(a, a[::-1] + 0.5),  # 1/2
    }[case]
    expected = {"below": np.full(8, -1 / 8), "weighted": -np.arange(1.0, 9.0) / 36,
                "shifted": np.zeros(8)}[case]

    def f(a):
        a *= 1.0  # in place
        return distance(a)

    g, t = derivatives(f, SAMPLE)
    np.testing.assert_allclose(g, expected, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(t, expected.sum(), rtol=1e-14, atol=1e-16)


# ----------------------------------------------------------------------------------------------
# np.linalg.det's derivative was det(A) A⁻ᵀ wherever A is invertible: where det(A) underflows to
# 0 (diag(1e-200, 1e-200)) that is 0 where the cofactors are 1e-200, and where it overflows
# (diag(1e200, 1e200)) inf · A⁻ᵀ where they are 1e200. There the cofactors are taken from the
# SVD, as at singular matrices, in both modes; the other matrices of a stack keep Jacobi's form.

@pytest.mark.parametrize("scale", [1e-200, 1e200, 1e-160])
@pytest.mark.parametrize("det", [np.linalg.det, scipy.linalg.det], ids=["numpy", "scipy"])
def test_det_derivative_where_det_is_beyond_the_floats(scale, det):
    n = 3 if scale == 1e-160 else 2
    a = np.diag(scale * np.arange(1.0, n + 1))

    def f(a):
        a *= 1.0  # in place
        return det(a)

    cofactors = np.diag([np.prod(np.delete(np.diag(a), i)) for i in range(n)])
    assert np.all(cofactors[np.diag_indices(n)] > 0) and np.all(np.isfinite(cofactors))
    with np.errstate(over="ignore"):  # det(A) itself overflows, as NumPy's own does
        g, t = derivatives(f, a)
    np.testing.assert_allclose(g, cofactors, rtol=1e-14)
    np.testing.assert_allclose(t, np.trace(cofactors), rtol=1e-14)


def test_det_derivative_of_a_stack_with_one_matrix_beyond_the_floats():
    a = np.stack([np.diag([1e-200, 2e-200]), np.array([[2.0, 1.0], [1.0, 3.0]])])

    def f(a):
        a *= 1.0  # in place
        return np.linalg.det(a).sum()

    g, _ = derivatives(f, a)
    np.testing.assert_allclose(g[0], np.diag([2e-200, 1e-200]), rtol=1e-14)
    np.testing.assert_allclose(g[1], [[3.0, -1.0], [-1.0, 2.0]], rtol=1e-14)
