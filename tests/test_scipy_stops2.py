"""SciPy programs that stopped with an error instead of being differentiated, found among
programs written as scientists use SciPy inside a differentiated function: each checked with
``mutad.testing``'s finite differences (reverse and forward mode, and second order where the
steps allow), its value SciPy's bit for bit and the caller's arrays unchanged."""

import numpy as np
import pytest
import scipy.fftpack
import scipy.signal

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.testing import check_grads


def check(f, *args, order=1, **tolerances):
    """``f``'s value SciPy's bit for bit and the caller's arrays unchanged, then
    ``check_grads`` (which checks the arguments come back too) in both modes."""
    copies = [np.array(a, copy=True) for a in args]
    before = [a.tobytes() for a in args]
    value, _ = mutad.value_and_gradient(f, *args)
    assert [a.tobytes() for a in args] == before
    assert np.asarray(value).tobytes() == np.asarray(f(*copies)).tobytes()
    check_grads(f, *args, order=order, modes=("rev", "fwd"), **tolerances)


# ----------------------------------------------------------------------------------------------
# scipy.fftpack's pseudo-differential operators: Python around fftpack.convolve's compiled
# routines (a kernel per frequency between a real transform and its inverse), which have
# rules now; the kernel they build from Python numbers is a constant

X15 = np.cos(np.arange(15.0) * 0.7) + 0.1 * np.arange(15.0)
X16 = np.sin(np.arange(16.0) * 0.9) - 0.05 * np.arange(16.0)
WEIGHTS = {15: np.cos(np.arange(15.0)), 16: np.cos(np.arange(16.0))}

PSEUDO_DIFFS = {
    "diff": lambda x: scipy.fftpack.diff(x),
    "diff_second_period": lambda x: scipy.fftpack.diff(x, 2, period=3.0),
    "diff_third": lambda x: scipy.fftpack.diff(x, 3),
    "integral": lambda x: scipy.fftpack.diff(x - x.mean(), -1),
    "hilbert": lambda x: scipy.fftpack.hilbert(x),
    "ihilbert": lambda x: scipy.fftpack.ihilbert(x),
    "tilbert": lambda x: scipy.fftpack.tilbert(x, 0.5),
    "itilbert": lambda x: scipy.fftpack.itilbert(x, 0.4),
    "cs_diff": lambda x: scipy.fftpack.cs_diff(x, 0.3, 0.4),
    "sc_diff": lambda x: scipy.fftpack.sc_diff(x, 0.3, 0.4),
    "ss_diff": lambda x: scipy.fftpack.ss_diff(x, 0.3, 0.4),
    "cc_diff": lambda x: scipy.fftpack.cc_diff(x, 0.3, 0.4),
    "shift": lambda x: scipy.fftpack.shift(x, 0.7),  # convolve_z
}


@pytest.mark.parametrize("x", [X15, X16], ids=["odd", "even"])
@pytest.mark.parametrize("name", PSEUDO_DIFFS)
def test_fftpack_pseudo_differential_operators(name, x):
    transform = PSEUDO_DIFFS[name]
    check(lambda x: np.sum(transform(x) * WEIGHTS[len(x)]) + np.sum(transform(x) ** 2),
          x.copy(), order=2)


def test_fftpack_operator_of_a_list_overwrites_its_own_copy():
    # fftpack converts a list to a new array and lets the routine transform it in place
    check(lambda x: np.sum(scipy.fftpack.diff([x[0], 2.0 * x[1], x[2], x[3] ** 2]) ** 2),
          X16[:4].copy())


def test_fftpack_convolve_in_place_and_a_differentiated_kernel():
    from scipy.fftpack import convolve
    omega = convolve.init_convolution_kernel(8, lambda k: float(k), d=1)

    def in_place(x):
        y = 1.0 * x
        z = convolve.convolve(y, omega, swap_real_imag=1, overwrite_x=True)
        return np.sum(y * np.arange(8.0)) + np.sum(z ** 2)

    check(in_place, X16[:8].copy())
    with pytest.raises(UnsupportedOperationError, match="differentiated kernel.*constant"):
        mutad.gradient(lambda w: convolve.convolve(X16[:8], w).sum(), omega.copy())


# ----------------------------------------------------------------------------------------------
# scipy.signal.cspline1d and qspline1d: SciPy's Python code, followed, joins its pieces with
# ``np.r_`` read from the numpy module (not a name bound at import), which converted them


@pytest.mark.parametrize("spline", [scipy.signal.cspline1d, scipy.signal.qspline1d])
@pytest.mark.parametrize("size", [1, 2, 9])
def test_spline_coefficients(spline, size):
    x = X16[:size].copy()
    check(lambda x: np.sum(spline(x) * np.arange(1.0, size + 1)) + np.sum(spline(x ** 2) ** 2), x)


def test_smoothing_spline_coefficients():
    check(lambda x: np.sum(scipy.signal.cspline1d(x, 0.5) ** 2), X16[:9].copy())


@pytest.mark.parametrize("fit, evaluate", [
    (scipy.signal.cspline1d, scipy.signal.cspline1d_eval),
    (scipy.signal.qspline1d, scipy.signal.qspline1d_eval)])
def test_spline_fit_then_evaluation(fit, evaluate):
    # SciPy's documented use: the coefficients, then their spline at new points (some outside,
    # mirrored), in the coefficients; the points' derivative is refused
    points = np.array([-0.7, 0.5, 1.25, 3.9, 8.6, 9.4])
    check(lambda x: np.sum(evaluate(fit(x), points, dx=1.1, x0=0.2) ** 2), X16[:9].copy())
    with pytest.raises(UnsupportedOperationError, match="differentiated points.*constants"):
        mutad.gradient(lambda p: evaluate(X16[:9], p).sum(), points.copy())


# ----------------------------------------------------------------------------------------------
# scipy.stats: SciPy's Python code followed further. bayes_mvs (mvsdist) takes math.sqrt of
# traced numbers (a followed module's math is the mode's, which follows them) and the moments
# and intervals of distributions without rules of their own (t, gengamma, invgamma: SciPy's
# rv_generic.stats, mean, interval, ..., followed); invgamma's own moments fill a buffer
# apply_where allocates; nnlf and expect are SciPy's steps too (expect's infinite limits do not
# move); anderson fits by nnlf

import scipy.stats  # noqa: E402

SAMPLE = np.cos(np.arange(10.0) * 1.3) + 0.1 * np.arange(10.0)
POSITIVE = np.exp(0.4 * np.sin(np.arange(12.0) * 2.1)) + 0.1 * np.arange(12.0)


def _bayes_mvs(x):
    mean, var, std = scipy.stats.bayes_mvs(x, alpha=0.8)
    return mean.statistic + var.minmax[1] + std.minmax[0] + std.statistic


STATS_PROGRAMS = {
    "bayes_mvs": (_bayes_mvs, SAMPLE),
    "mvsdist": (lambda x: sum(d.mean() + d.std() for d in scipy.stats.mvsdist(x)), SAMPLE),
    "invgamma_std": (lambda x: scipy.stats.invgamma(x[0] + 3.0, scale=x[1]).std()
                     + scipy.stats.invgamma.var(x[2] + 4.0), POSITIVE[:3]),
    "gengamma_interval": (lambda x: scipy.stats.gengamma(x[0] + 1.0, -2, scale=x[1]).interval(
        0.9)[1] + scipy.stats.gengamma.median(x[2] + 1.0, 1.5), POSITIVE[:3]),
    "nnlf": (lambda x: scipy.stats.gamma.nnlf((2.0, 0.0, x[0]), x[1:]) + scipy.stats.norm.nnlf(
        (x[0], 1.5), x), POSITIVE),
    "expect": (lambda x: scipy.stats.norm.expect(lambda t: t ** 2, loc=x[0], scale=x[1]),
               POSITIVE[:2]),
    "anderson": (lambda x: scipy.stats.anderson(x, method="interpolate").statistic, SAMPLE),
    "anderson_expon": (lambda x: scipy.stats.anderson(x, dist="expon",
                                                    method="interpolate").statistic, POSITIVE),
}


@pytest.mark.parametrize("name", STATS_PROGRAMS)
def test_stats_followed_further(name):
    f, x = STATS_PROGRAMS[name]
    modes = ("rev",) if name == "expect" else ("rev", "fwd")  # (loc + (-inf) * scale's tangent
    copy = x.copy()                                            # is NaN in forward mode)
    value, _ = mutad.value_and_gradient(f, copy)
    assert copy.tobytes() == x.tobytes()
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    check_grads(f, x.copy(), modes=modes, rtol=1e-5, atol=1e-8)


# scipy.stats.siegelslopes: SciPy's compiled repeated medians, with the derivatives of the
# same medians (of the slopes, and by method "separate" of the intercepts)

@pytest.mark.parametrize("method", ["hierarchical", "separate"])
def test_siegelslopes(method):
    y = SAMPLE + np.arange(10.0)
    x = np.arange(10.0) * 0.3 + 0.02 * np.sin(np.arange(10.0))

    def fit(y, x):
        result = scipy.stats.siegelslopes(y, x, method=method)
        return 2.0 * result.slope + result.intercept

    check(lambda y: fit(y, x), y.copy())
    check(lambda x: fit(y, x), x.copy())
    check(lambda y: scipy.stats.siegelslopes(y, method=method).intercept, y.copy())


# ----------------------------------------------------------------------------------------------
# Distributions' fits that SciPy writes in closed form or as root findings of the likelihood
# equations (gamma with floc given, lognorm, invgauss, beta, ...): SciPy's own fit followed, its
# root finding differentiated by its solution; where it falls back on the numerical
# optimisation of rv_continuous.fit (super().fit), refused as before

FITS = {
    "gamma_floc": lambda x: scipy.stats.gamma.fit(x, floc=0),
    "gamma_floc_fa": lambda x: scipy.stats.gamma.fit(x, floc=0, fa=2.0),
    "gamma_floc_fscale": lambda x: scipy.stats.gamma.fit(x, floc=0, fscale=1.5),
    "gamma_mm": lambda x: scipy.stats.gamma.fit(x, method="MM"),
    "lognorm": lambda x: scipy.stats.lognorm.fit(x, floc=0),
    "invgauss": lambda x: scipy.stats.invgauss.fit(x, floc=0),
    "beta": lambda x: scipy.stats.beta.fit(x / 10, floc=0, fscale=1),
    "laplace": lambda x: scipy.stats.laplace.fit(x),
    "logistic": lambda x: scipy.stats.logistic.fit(x),
    "gumbel_r": lambda x: scipy.stats.gumbel_r.fit(x),
    "rayleigh": lambda x: scipy.stats.rayleigh.fit(x, floc=0),
}


# Finite-difference steps other than 1e-4: the method of moments' shape 4 / skewness² is 261
# here, and moves by 4000 per unit of skewness, so that its sine is steep.
FIT_STEPS = {"gamma_mm": 1e-6}


@pytest.mark.parametrize("name", FITS)
def test_fits_by_scipys_formulas(name):
    fit = FITS[name]
    value, _ = mutad.value_and_gradient(lambda x: sum(fit(x)), POSITIVE.copy())
    assert value == sum(fit(POSITIVE.copy()))
    check_grads(lambda x: np.sin(fit(x)[0]) + fit(x)[-1] ** 2, POSITIVE.copy(),
                modes=("rev", "fwd"), rtol=1e-5, atol=1e-8, step=FIT_STEPS.get(name, 1e-4))


@pytest.mark.parametrize("fit", [
    lambda x: scipy.stats.gamma.fit(x),                   # gamma_gen.fit's super().fit
    lambda x: scipy.stats.t.fit(x, fix_df=4.0),           # rv_continuous.fit itself
    lambda x: scipy.stats.weibull_min.fit(x, floc=0),     # an override's super().fit
    lambda x: scipy.stats.f.fit(x)])
def test_fits_by_numerical_optimisation_stay_refused(fit):
    with pytest.raises(UnsupportedOperationError, match="numerical optimisation.*minimize"):
        mutad.gradient(lambda x: sum(fit(x)), POSITIVE.copy())


# ----------------------------------------------------------------------------------------------
# CloughTocher2DInterpolator (and griddata's "cubic") at differentiated queries: in the triangle
# SciPy puts a query in, SciPy's cubic Bezier polynomial of its barycentric weights, whose
# coefficients do not move with the query

import scipy.interpolate  # noqa: E402

_SCATTERED = np.random.default_rng(2).random((12, 2))
_VALUES = np.sin(3 * _SCATTERED[:, 0]) * np.cos(2 * _SCATTERED[:, 1])
_QUERIES = np.array([[0.5, 0.5], [0.45, 0.55], [0.3, 0.6], [0.62, 0.41], [9.0, 9.0]])


@pytest.mark.parametrize("rescale", [False, True])
@pytest.mark.parametrize("columns", [1, 2])
def test_clough_tocher_at_differentiated_queries(rescale, columns):
    stretch = np.array([1.0, 100.0]) if rescale else np.ones(2)
    values = _VALUES if columns == 1 else np.stack([_VALUES, _VALUES ** 2], axis=1)
    interpolant = scipy.interpolate.CloughTocher2DInterpolator(
        _SCATTERED * stretch, values, fill_value=0.5, rescale=rescale)
    check(lambda q: np.sum(interpolant(q * stretch) ** 2), _QUERIES.copy(), order=2)
    check(lambda q: np.sum(interpolant(q[0] * stretch[0], q[1] * stretch[1])), _QUERIES.T.copy())


def test_griddata_cubic_at_differentiated_queries():
    check(lambda q: np.nansum(scipy.interpolate.griddata(_SCATTERED, _VALUES, q, method="cubic")
                              * np.arange(1.0, 6.0)), _QUERIES.copy())


def test_clough_tocher_of_complex_values_at_queries_is_refused():
    interpolant = scipy.interpolate.CloughTocher2DInterpolator(_SCATTERED, _VALUES * (1 + 1j))
    with pytest.raises(UnsupportedOperationError, match="complex values.*real and imaginary"):
        mutad.gradient(lambda q: np.nansum(np.abs(interpolant(q))), _QUERIES.copy())


# ----------------------------------------------------------------------------------------------
# scipy.linalg.funm(A, func) with the user's func: SciPy's Schur-Parlett values, with the
# derivatives of V func(Λ) V⁻¹ (eig, and the user's func of the traced eigenvalues); repeated
# eigenvalues (whose vectors are not determined) refused

import scipy.linalg  # noqa: E402

_MATRIX = np.cos(np.arange(16.0).reshape(4, 4)) * 0.4 + np.diag([1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("func", [lambda x: np.exp(0.3 * x), lambda x: np.sqrt(x) + x ** 2,
                                  np.cos], ids=["exp", "sqrt_square", "cos"])
def test_funm_of_a_user_function(func):
    weights = np.arange(16.0).reshape(4, 4)
    check(lambda a: np.sum(scipy.linalg.funm(a, func) * weights), _MATRIX.copy())
    check(lambda a: np.sum(scipy.linalg.funm(a, func, disp=False)[0] ** 2), _MATRIX.copy())


def test_funm_of_complex_eigenvalues_and_refusals():
    rotation = np.array([[0.1, -0.9], [1.1, 0.1]])
    check(lambda a: np.sum(scipy.linalg.funm(a, np.exp) * [[1.0, 2.0], [3.0, 4.0]]),
          rotation.copy())
    for repeated in (np.diag([1.0, 2.0, 2.0]), np.array([[1.0, 1.0], [0.0, 1.0]])):
        with pytest.raises(UnsupportedOperationError, match="funm.*repeated.*expm"):
            mutad.gradient(lambda a: scipy.linalg.funm(a, np.exp).sum(), repeated)


# ----------------------------------------------------------------------------------------------
# SciPy's followed code handing a traced array to compiled code that converts it
# (levy_stable's Nolan integrand object), which raised the conversion's error in some runs and
# a SystemError in others: the conversion's error, naming the compiled function and SciPy's
# function that called it, in every run


def test_compiled_code_failing_on_traced_values_is_refused_by_name():
    import scipy.stats
    beta = np.array([0.3])
    with pytest.raises(mutad.errors.ConversionError,
                       match=r"Nolan\(\) in scipy\.stats\._levy_stable\.\w+, called through"):
        mutad.gradient(lambda b: np.sum(scipy.stats.levy_stable.pdf(0.5, 1.5, b)), beta)
    assert beta.tobytes() == np.array([0.3]).tobytes()


def test_symiirorder1_start_of_traced_values():
    """symiirorder1's compiled start (symiirorder1_ic), a sum of z1ᵏ x[k-1] over as many terms
    as |z1|ᵏ takes to fall within the precision, stopped at traced values: SciPy's values, the
    derivative in the signal (rows of a 2-d one each summed), c0 and z1."""
    t = np.linspace(0.0, 1.0, 40)
    check(lambda p: np.sum(scipy.signal.symiirorder1(p[0] * np.sin(5 * t) + np.cos(3 * t), p[1],
                                                     p[2], precision=1e-6) ** 2),
          np.array([1.0, 0.5, 0.2]))
    check(lambda x: np.sum(scipy.signal.symiirorder1(x.reshape(2, 20), 0.7, -0.2) ** 2),
          np.concatenate([np.sin(5 * t), np.cos(3 * t)])[::2].copy())


# symiirorder2's compiled starts (symiirorder2_ic_fwd, _bwd): sums of the first (last) values
# weighted by the two-pole filter's steady-state responses, SciPy's weights and counts taken in
# its arithmetic; cspline2d and spline_filter (symiirorder2 along each axis) with them

T120 = np.linspace(0.0, 1.0, 120)
IMAGE = np.outer(np.sin(3 * T120[:40]), np.cos(2 * T120[:44])) + 0.01 * np.arange(44)

SYMIIRORDER2 = {
    "signal": (lambda x: np.sum(scipy.signal.symiirorder2(x, 0.6, 1.1) ** 2), np.sin(5 * T120)),
    "rows_precision": (lambda x: np.sum(scipy.signal.symiirorder2(x.reshape(2, -1), 0.6, 1.1,
                                                                  1e-6) ** 2), np.sin(5 * T120)),
    "omega_pi": (lambda x: np.sum(scipy.signal.symiirorder2(x, 0.6, np.pi) ** 2), np.sin(5 * T120)),
    "omega_zero": (lambda x: np.sum(scipy.signal.symiirorder2(x, 0.6, 0.0) ** 2), np.cos(T120)),
    "r_omega": (lambda p: np.sum(scipy.signal.symiirorder2(np.sin(5 * T120[:40]) * p[2], p[0],
                                                           p[1]) ** 2), np.array([-0.4, 2.5, 1.2])),
    "cspline2d": (lambda x: np.sum(scipy.signal.cspline2d(x, 1.0) ** 2), IMAGE),
    "spline_filter": (lambda x: np.sum(scipy.signal.spline_filter(x, 2.0) ** 2), IMAGE),
}


@pytest.mark.parametrize("name", SYMIIRORDER2)
def test_symiirorder2_starts_of_traced_values(name):
    f, x = SYMIIRORDER2[name]
    check(f, x.copy())


def test_symiirorder2_in_float32_and_refused_at_its_limits():
    x = np.sin(5 * T120).astype(np.float32)
    f = lambda x: np.sum(scipy.signal.symiirorder2(x, 0.6, 1.1) ** 2)  # noqa: E731
    value, (gradient,) = mutad.value_and_gradient(f, x)
    assert value.tobytes() == f(x.copy()).tobytes()
    # SciPy's float32 starts stop at other counts than float64's: differences in float32 (f is
    # quadratic in x, so a long step is exact but for the values' rounding)
    v = np.cos(np.arange(120.0)).astype(np.float32)
    difference = (f(x + 0.05 * v) - f(x - 0.05 * v)) / 0.1
    assert np.isclose(np.dot(gradient, v), difference, rtol=1e-3)
    assert np.isclose(mutad.jvp(f, (x,), (v,))[1], difference, rtol=1e-3)
    assert x.tobytes() == np.sin(5 * T120).astype(np.float32).tobytes()
    for r, omega in [(0.6, 0.0), (0.0, 1.1)]:  # the limiting formulas: omega 0 or pi, r 0
        with pytest.raises(UnsupportedOperationError, match="symiirorder2 differentiated in r"):
            mutad.gradient(lambda p: np.sum(scipy.signal.symiirorder2(
                np.sin(5 * T120), p[0], p[1])), np.array([r, omega]))


# scipy.stats.weightedtau: SciPy's compiled weighted tau of the orderings of x and y, a
# constant (piecewise constant in the data: derivative zero), its value SciPy's

@pytest.mark.parametrize("rank", [True, None, False])
def test_weightedtau_of_differentiated_data(rank):
    data = SAMPLE[:8] + 0.01 * np.arange(8.0)
    f = lambda x: scipy.stats.weightedtau(x, x ** 2 - x, rank=rank).statistic + np.sum(x)  # noqa: E731
    value, (gradient,) = mutad.value_and_gradient(f, data.copy())
    assert value == f(data.copy())
    assert np.array_equal(gradient, np.ones(8))
    check_grads(f, data.copy(), modes=("rev", "fwd"))


# scipy.special.jve and yve (scaled by exp(-|Im x|), 1 for real x): the recurrences of jv and yv

import scipy.special  # noqa: E402


def test_scaled_bessel_functions_of_the_first_and_second_kind():
    x = POSITIVE[:6].copy()
    check(lambda x: np.sum(scipy.special.jve(2.5, x) * scipy.special.yve(1.5, x)), x, order=2)
    order = lambda v: scipy.special.jve(v, 1.3).sum()  # noqa: E731
    check_grads(order, x[:3] * 0.5, modes=("rev",))  # (in its order: v > -1)
    with pytest.raises(UnsupportedOperationError, match="jve.*order v"):
        mutad.gradient(order, -x[:3] - 1.0)
