"""scipy.stats' descriptive statistics, correlations and t-tests of traced arrays, called by
SciPy's names (mutad/scipy/_descriptive.py).

Values are SciPy's bit for bit (the compositions take SciPy's steps); gradients and forward mode
are checked against finite differences; the caller's arrays come back unchanged; what mutad does
not follow is refused with a MutadError.
"""

import warnings

import numpy as np
import pytest
import scipy.stats

import mutad
from cases import numpys_bits_in_every_mode, replays_as_traced
from mutad.scipy import stats

POLICIES = ("restore", "checkpoint")
RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 6)) + 1.0
Y = RNG.normal(size=(4, 6)) + 1.0
POSITIVE = np.abs(RNG.normal(size=(4, 6))) + 0.2
WEIGHTS = RNG.uniform(0.5, 2.0, size=(4, 6))


def fields(result):
    """The numbers of a result: an array, a tuple of them, or one of SciPy's result objects
    (with the fields beyond the tuple: a t-test's df, a regression's intercept_stderr)."""
    if isinstance(result, tuple):
        extra = [getattr(result, name) for name in ("df", "intercept_stderr")
                 if hasattr(result, name) and name not in getattr(result, "_fields", ())]
        return tuple(f for part in (*result, *extra) for f in fields(part))
    return (result,)


def total(function):
    """A scalar of every finite number the function returns, for check_grads."""
    def f(*args):
        values = [np.where(np.isfinite(v), v, 0.0) for v in fields(function(*args))]
        return sum(np.sum(np.sin(v)) for v in values)
    return f


S = scipy.stats
CASES = [
    ("skew", lambda x: S.skew(x, axis=1), (X,)),
    ("skew-unbiased", lambda x: S.skew(x, bias=False), (X,)),
    ("skew-none-keepdims", lambda x: S.skew(x, axis=None, keepdims=True), (X,)),
    ("kurtosis", lambda x: S.kurtosis(x, axis=1, bias=False), (X,)),
    ("kurtosis-pearson", lambda x: S.kurtosis(x[0], fisher=False), (X,)),
    ("moment", lambda x: S.moment(x, 3, axis=1), (X,)),
    ("moment-orders", lambda x: S.moment(x, [1, 2, 5], axis=0), (X,)),
    ("moment-center", lambda x: S.moment(x[0], 4, center=0.5), (X,)),
    ("describe", lambda x: S.describe(x, axis=1), (X,)),
    ("describe-none", lambda x: S.describe(x, axis=None, ddof=0, bias=False), (X,)),
    ("sem", lambda x: S.sem(x, axis=1, ddof=2), (X,)),
    ("zscore", lambda x: S.zscore(x, axis=1, ddof=1), (X,)),
    ("zscore-none", lambda x: S.zscore(x, axis=None), (X,)),
    ("zmap", lambda x, y: S.zmap(x, y, axis=0), (X, Y)),
    ("variation", lambda x: S.variation(x, axis=1, ddof=1), (X,)),
    ("gmean", lambda p: S.gmean(p, axis=1), (POSITIVE,)),
    ("gmean-weights", lambda p, w: S.gmean(p, axis=1, weights=w), (POSITIVE, WEIGHTS)),
    ("hmean", lambda p: S.hmean(p, axis=0, keepdims=True), (POSITIVE,)),
    ("pmean", lambda p: S.pmean(p, 2.5, axis=0), (POSITIVE,)),
    ("pmean-weights", lambda p, w: S.pmean(p, -1.5, weights=w, axis=1), (POSITIVE, WEIGHTS)),
    ("tmean", lambda x: S.tmean(x, (0.5, 2.0)), (X,)),
    ("mstats.trimmed_mean", lambda x: S.mstats.trimmed_mean(x, (0.1, 0.2)), (X,)),
    ("mstats.winsorize", lambda x: np.var(S.mstats.winsorize(x, (0.2, 0.1))), (X,)),
    ("tmean-axis", lambda x: S.tmean(x, (0.0, 2.0), axis=1), (X,)),
    ("tvar", lambda x: S.tvar(x, (0.0, 2.5), axis=1), (X,)),
    ("tvar-all", lambda x: S.tvar(x, axis=None), (X,)),
    ("tstd", lambda x: S.tstd(x, (0.0, None), (False, True), axis=1), (X,)),
    ("tsem", lambda x: S.tsem(x, (0.0, 2.5), axis=1), (X,)),
    ("tsem-all", lambda x: S.tsem(x, axis=None, ddof=2), (X,)),
    ("tmin", lambda x: S.tmin(x, 0.5, axis=1, inclusive=False), (X,)),
    ("tmax", lambda x: S.tmax(x, 1.5, axis=None), (X,)),
    ("trim_mean", lambda x: S.trim_mean(x, 0.2, axis=1), (X,)),
    ("iqr", lambda x: S.iqr(x, axis=1, scale="normal"), (X,)),
    ("iqr-midpoint", lambda x: S.iqr(x, rng=(10, 80), interpolation="midpoint"), (X,)),
    ("iqr-lower-keepdims", lambda x: S.iqr(x, axis=0, interpolation="lower", keepdims=True),
     (X,)),
    ("median_abs_deviation", lambda x: S.median_abs_deviation(x, axis=1, scale="normal"), (X,)),
    ("median_abs_deviation-mean", lambda x: S.median_abs_deviation(x[0], center=np.mean),
     (X,)),
    ("entropy", lambda p: S.entropy(p, axis=1), (POSITIVE,)),
    ("entropy-qk", lambda p, q: S.entropy(p, q, base=2.0), (POSITIVE, WEIGHTS)),
    ("circmean", lambda x: S.circmean(x, axis=1), (X,)),
    ("circmean-range", lambda x: S.circmean(x, high=5.0, low=-1.0), (X,)),
    ("circvar", lambda x: S.circvar(x, axis=0), (X,)),
    ("circstd", lambda x: S.circstd(x, axis=1, normalize=True), (X,)),
    ("circstd-range", lambda x: S.circstd(x, high=4.0, low=-1.0), (X,)),
    ("pearsonr", lambda x, y: S.pearsonr(x, y, axis=1), (X, Y)),
    ("pearsonr-less", lambda x, y: S.pearsonr(x[0], y[0], alternative="less"), (X, Y)),
    ("linregress", lambda x, y: S.linregress(x[0], y[0]), (X, Y)),
    ("linregress-slices", lambda x, y: S.linregress(x, y, axis=1, alternative="greater"),
     (X, Y)),
    ("ttest_1samp", lambda x: S.ttest_1samp(x, 0.8, axis=1), (X,)),
    ("ttest_1samp-greater", lambda x, m: S.ttest_1samp(x[0], m, alternative="greater"),
     (X, 0.8)),
    ("ttest_ind", lambda x, y: S.ttest_ind(x, y, axis=1), (X, Y)),
    ("ttest_ind-welch", lambda x, y: S.ttest_ind(x, y[:, :4], axis=1, equal_var=False), (X, Y)),
    ("wasserstein_distance", lambda x, y: S.wasserstein_distance(x[0], y[1, :4]), (X, Y)),
    ("wasserstein_distance-weights", lambda x, p: S.wasserstein_distance(
        x[0], x[1, :3], p[0], [p[1, 0], 0.5, p[1, 1]]), (X, POSITIVE)),
    ("energy_distance", lambda x, y: S.energy_distance(x[0], y[1]), (X, Y)),
    ("energy_distance-weights", lambda x, p: S.energy_distance(x[2], x[3, ::-1], p[0], p[1]),
     (X, POSITIVE)),
]
IDS = [name for name, _, _ in CASES]


@pytest.mark.parametrize("name, function, args", CASES, ids=IDS)
def test_values_are_scipys_bit_for_bit(name, function, args):
    before = [np.asarray(a).tobytes() for a in args]
    traced, _ = mutad.pullback(lambda *a: fields(function(*a)), *args)
    expected = fields(function(*args))
    assert len(traced) == len(expected)
    for mine, scipys in zip(traced, expected, strict=True):
        assert np.shape(mine) == np.shape(scipys)
        assert np.asarray(mine, dtype=float).tobytes() == np.asarray(scipys, dtype=float).tobytes()
    assert [np.asarray(a).tobytes() for a in args] == before


SINGLE_PRECISION = {
    "describe": lambda x: S.describe(x, axis=1),
    "describe-ddof": lambda x: S.describe(x, axis=None, ddof=3),
    "moment-orders": lambda x: S.moment(x, [0, 1, 2, 5], axis=0),
    "moment-center": lambda x: S.moment(x[0], 4, center=np.float64(0.1)),
}


def test_describe_over_a_tuple_of_axes():
    """describe(x, axis=(0, 2)) as SciPy's (its count the product of the axes' lengths),
    values bit for bit and derivatives; it raised a TypeError of indexing a shape by a tuple."""
    x = RNG.normal(size=(3, 4, 2))
    for axis in [(0, 2), (2, 0), (0, 1, 2)]:
        traced, _ = mutad.pullback(lambda x: fields(S.describe(x, axis=axis)), x.copy())
        expected = fields(S.describe(x.copy(), axis=axis))
        for mine, scipys in zip(traced, expected, strict=True):
            assert np.asarray(mine).tobytes() == np.asarray(scipys).tobytes()
        mutad.check_grads(lambda x: S.describe(x, axis=axis).variance, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", SINGLE_PRECISION)
def test_moments_of_single_precision_samples_are_scipys(name, dtype):
    """SciPy's variance counts, moments of order 0 and 1 and centers in the sample's dtype:
    float32 (float16) results, bit for bit; mutad's were float64 numbers."""
    function = SINGLE_PRECISION[name]
    x = X.astype(dtype)
    traced, _ = mutad.pullback(lambda x: fields(function(x)), x.copy())
    expected = fields(function(x.copy()))
    for mine, scipys in zip(traced, expected, strict=True):
        assert np.asarray(mine).dtype == np.asarray(scipys).dtype
        assert np.asarray(mine).tobytes() == np.asarray(scipys).tobytes()


@pytest.mark.parametrize("name, function, args", CASES, ids=IDS)
def test_gradients(name, function, args):
    f = total(function)
    for policy in POLICIES:
        mutad.check_grads(f, *args, policy=policy)
    mutad.check_jvp(f, *args)


@pytest.mark.parametrize("name", ["skew", "zscore", "pearsonr", "ttest_ind-welch", "iqr"])
def test_second_derivatives(name):
    _, function, args = CASES[IDS.index(name)]
    mutad.check_grads(total(function), *args, order=2)


def test_the_mutad_scipy_names_are_the_stand_ins():
    def f(x, y):
        return (stats.skew(x) + stats.pearsonr(x, y).statistic + stats.zscore(x)[0]).sum()

    mutad.check_grads(f, X[0], Y[0])
    assert stats.skew(X[0]) == scipy.stats.skew(X[0])  # plain calls are SciPy's own


def test_nan_propagates_per_slice():
    x = X.copy()
    x[1, 2] = np.nan
    for function in (lambda x: S.skew(x, axis=1), lambda x: S.gmean(np.abs(x), axis=1),
                     lambda x: S.median_abs_deviation(x, axis=1),
                     lambda x: S.iqr(x, axis=1), lambda x: S.ttest_1samp(x, 0.5, axis=1)):
        traced, back = mutad.pullback(lambda x: fields(function(x)), x)
        expected = fields(function(x))
        for mine, scipys in zip(traced, expected, strict=True):
            np.testing.assert_array_equal(mine, scipys)
        gradient, = back(tuple(np.where(np.isnan(t), 0.0, 1.0) for t in traced))
        assert np.isfinite(gradient[[0, 2, 3]]).all()


def test_too_small_samples_are_nan_with_scipys_warning():
    with pytest.warns(scipy.stats._axis_nan_policy.SmallSampleWarning):
        value, = mutad.gradient(lambda x: S.sem(x[:1]), X[0])
    assert not value.any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(S.sem(np.array([1.0])))


def test_nan_policy_raise_is_followed_and_omit_refused_by_describe():
    x = X[0].copy()
    x[0] = np.nan
    with pytest.raises(ValueError, match="nan"):
        mutad.gradient(lambda x: S.skew(x, nan_policy="raise"), x)
    mutad.check_grads(lambda x: S.skew(x, nan_policy="raise"), X[0])
    with pytest.raises(mutad.MutadError, match="nan_policy='omit'"):
        mutad.gradient(lambda x: S.describe(x, nan_policy="omit").mean, x)


WITH_NANS = X.copy()
WITH_NANS[[0, 2, 2], [1, 0, 4]] = np.nan
OMITTING = {
    "zscore": lambda x: S.zscore(x[0], nan_policy="omit"),
    "zscore-axis": lambda x: S.zscore(x, axis=1, ddof=1, nan_policy="omit"),
    "zmap": lambda x: S.zmap(x[::-1], x, axis=1, nan_policy="omit"),
    "sem": lambda x: S.sem(x, axis=1, nan_policy="omit"),
    "sem-none": lambda x: S.sem(x, axis=None, nan_policy="omit"),
    "skew": lambda x: S.skew(x[2], nan_policy="omit"),
    "tmean": lambda x: S.tmean(x, (0.0, 2.5), axis=1, nan_policy="omit"),
    "tvar": lambda x: S.tvar(x, (0.0, 2.5), axis=1, nan_policy="omit"),
    "tstd": lambda x: S.tstd(x[0], nan_policy="omit"),
    "tsem": lambda x: S.tsem(x, axis=0, nan_policy="omit"),
    "tmin": lambda x: S.tmin(x, 0.5, axis=1, nan_policy="omit"),
    "tmax": lambda x: S.tmax(x[2], nan_policy="omit"),
    "gmean-weights": lambda x: S.gmean(np.abs(x), axis=1, weights=np.abs(x[::-1]),
                                       nan_policy="omit"),
}


@pytest.mark.parametrize("name", OMITTING)
def test_nan_policy_omit_is_followed(name):
    """nan_policy='omit' was refused: the statistic of the values that are not NaN (a slice at
    a time), SciPy's bit for bit, its derivative in them (a NaN score stays NaN, with none)."""
    function = OMITTING[name]
    x = WITH_NANS.copy()
    traced, back = mutad.pullback(lambda x: fields(function(x)), x)
    expected = fields(function(WITH_NANS.copy()))
    for mine, scipys in zip(traced, expected, strict=True):
        assert np.asarray(mine).tobytes() == np.asarray(scipys).tobytes()
    gradient, = back(tuple(np.ones(np.shape(t)) for t in traced))
    assert np.isfinite(gradient).all() and not gradient[np.isnan(WITH_NANS)].any()
    assert x.tobytes() == WITH_NANS.tobytes()
    # (finite differences of the values that are not NaN: the NaNs put in where they are)
    mutad.check_grads(lambda x: total(function)(np.where(np.isnan(WITH_NANS), np.nan, x)), X)


def test_omitted_nans_moving_between_calls_replay_as_traced():
    """Which values are NaN changes the samples' lengths: a replay follows the traced call."""
    def f(x):
        return (np.nansum(S.zscore(x, axis=1, nan_policy="omit")[:, 2])
                + np.sum(S.tsem(x, axis=1, nan_policy="omit")) + S.skew(x[0], nan_policy="omit"))

    calls = []
    for rows, columns in (([0, 2], [1, 4]), ([1, 3, 3], [0, 2, 5]), ([], []), ([0], [3])):
        x = X.copy()
        x[rows, columns] = np.nan
        calls.append((x,))
    replays_as_traced(f, calls)


def test_omitting_too_many_gives_scipys_warnings():
    x = WITH_NANS.copy()
    x[1] = np.nan
    for function in (lambda x: S.sem(x, axis=1, nan_policy="omit"),
                     lambda x: S.sem(x[1], nan_policy="omit"),
                     lambda x: S.zmap(x[0], x[1], nan_policy="omit"),
                     lambda x: S.zscore(x, axis=1, nan_policy="omit"),
                     lambda x: S.tvar(x, axis=1, nan_policy="omit")):
        caught = []
        for run in (function, lambda x: mutad.pullback(function, x)[0]):
            with warnings.catch_warnings(record=True) as record:
                warnings.simplefilter("always")
                caught.append(run(x.copy()))
            caught.append([(w.category, str(w.message)) for w in record])
        assert np.asarray(caught[0]).tobytes() == np.asarray(caught[2]).tobytes()
        assert caught[1] == caught[3]


def test_describe_of_one_value_warns_as_scipy():
    """SciPy's variance of one value is its scalar's 0 * inf: NumPy names the scalar loop
    ("scalar multiply"); mutad's said "multiply"."""
    caught = []
    for run in (lambda x: S.describe(x).variance,
                lambda x: mutad.pullback(lambda x: S.describe(x).variance, x)[0]):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            assert np.isnan(run(np.array([2.0])))
        caught.append([(w.category, str(w.message)) for w in record])
    assert caught[0] == caught[1]
    assert "scalar multiply" in str(caught[0])


def test_ranks_carry_no_derivative():
    """spearmanr is a function of the ranks alone, which are piecewise constant in the data:
    its derivative is zero wherever it exists (away from ties), and mutad gives that zero."""
    x, y = X[0], Y[0]
    statistic, pvalue = mutad.value_and_gradient(
        lambda x, y: S.spearmanr(x, y).statistic, x, y)
    assert statistic == S.spearmanr(x, y).statistic
    assert not pvalue[0].any() and not pvalue[1].any()
    result, back = mutad.pullback(lambda x: S.spearmanr(x, y).pvalue, x)
    assert result == S.spearmanr(x, y).pvalue and not back(1.0)[0].any()
    ranks, back = mutad.pullback(lambda x: S.rankdata(x, axis=1), X)
    np.testing.assert_array_equal(ranks, S.rankdata(X, axis=1))
    assert not back(np.ones_like(X))[0].any()
    mutad.check_jvp(lambda x: S.rankdata(x) + S.spearmanr(x, y).statistic, x)


def test_what_has_no_derivative_is_refused():
    with pytest.raises(mutad.MutadError, match="mode"):
        mutad.gradient(lambda x: S.mode(x).mode, X[0])
    with pytest.raises(mutad.MutadError, match="trim"):
        mutad.gradient(lambda x, y: S.ttest_ind(x, y, trim=0.2).statistic, X[0], Y[0])
    with pytest.raises(mutad.MutadError, match="method"):
        mutad.gradient(lambda x, y: S.pearsonr(
            x, y, method=S.PermutationMethod(n_resamples=9)).statistic, X[0], Y[0])


MSTATS_LIMITS = [((0.1, 0.1), (1, 1)), ((0.2, None), (1, 1)), ((0.0, 0.3), (0, 0)), (0.15, (1, 0)),
                 (None, (1, 1)), ((0, 0), (1, 1))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("limits, inclusive", MSTATS_LIMITS, ids=str)
def test_mstats_trimming_and_winsorizing_are_scipys(limits, inclusive, dtype):
    """mstats.trimmed_mean (np.ma's mean of the elements kept: a sum with zeros over a count,
    NumPy's mean where no limit masked anything) and winsorize (a masked array without a mask,
    its ends copied from the elements SciPy's argsort puts next to them): SciPy's values bit
    for bit, both modes, replayed; they converted the traced array (np.ma.asarray) or called
    a method of np.ma mutad does not follow."""
    weights = np.arange(1.0, X.size + 1).reshape(X.shape)
    programs = [lambda x: S.mstats.trimmed_mean(x, limits, inclusive),
                lambda x: np.var(S.mstats.winsorize(x, limits, inclusive)),
                lambda x: (S.mstats.winsorize(x, limits, inclusive) * weights).sum()]
    x = X.astype(dtype)
    before = x.tobytes()
    for f in programs:
        value, _ = mutad.value_and_grad(f)(x)
        assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
        assert x.tobytes() == before
        if dtype == np.float64:
            mutad.check_grads(f, x, modes=("rev", "fwd"))
            replays_as_traced(f, [(x,), (RNG.normal(size=x.shape),)])
    assert isinstance(mutad.pullback(lambda x: S.mstats.winsorize(x, limits), x)[0],
                      np.ma.MaskedArray)


MSTATS_SHAPES = [(name, axis, bias) for name in ("skew", "kurtosis") for axis in (0, 1, None)
                 for bias in (True, False)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name, axis, bias", MSTATS_SHAPES, ids=str)
def test_mstats_skew_and_kurtosis_are_scipys(name, axis, bias, dtype):
    """mstats.skew and kurtosis of an array without a mask (a constant column too, where the
    variance is zero and the result 0): SciPy's steps, its values bit for bit (float64 of a
    float32 sample, as np.ma's int64 exponent makes them) and its types (a masked array, or
    NumPy's scalar for kurtosis's 0-d result less 3), both modes, replayed; they called
    MaskedArray.copy, which mutad does not follow."""
    function = getattr(S.mstats, name)
    x = np.concatenate([X, np.full((4, 1), 0.5)], axis=1).astype(dtype)
    before = x.tobytes()

    def data(x):
        result = function(x, axis=axis, bias=bias)
        return np.ma.filled(result, 0.0) if isinstance(result, np.ma.MaskedArray) else result

    value, _ = mutad.pullback(data, x)
    expected = data(x.copy())
    assert np.asarray(value).dtype == np.asarray(expected).dtype
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    assert x.tobytes() == before
    if dtype == np.float64:  # (not at the constant column, where the result jumps)
        f = lambda x: np.sum(np.sin(data(x)))  # noqa: E731
        mutad.check_grads(f, X, modes=("rev", "fwd"))
        replays_as_traced(f, [(X,), (Y,)])
    for row in (x[0], x[1, :3]):  # a 0-d result; three elements: kurtosis is not corrected
        kind = type(function(row, bias=bias))

        def one(x):
            result = function(x, bias=bias)
            assert isinstance(result, np.ma.MaskedArray) == issubclass(kind, np.ma.MaskedArray)
            return result + 0.0

        assert mutad.value_and_grad(one)(row)[0] == one(row.copy())


def test_mstats_settings_mutad_does_not_follow_are_refused():
    for f in (lambda x: S.mstats.trimmed_mean(x, axis=0),
              lambda x: S.mstats.trimmed_mean(x, (0.1, 2.0), relative=False),
              lambda x: S.mstats.winsorize(x, (0.1, 0.1), inplace=True).sum(),
              lambda x: S.mstats.winsorize(x, (0.1, 0.1), axis=1).sum()):
        with pytest.raises(mutad.MutadError, match="mstats"):
            mutad.gradient(f, X)
    with pytest.raises(mutad.MutadError, match="not finite"):
        mutad.gradient(lambda x: S.mstats.kurtosis(x * 1e100).sum(), X)


def test_scipys_errors_are_scipys():
    with pytest.raises(ValueError, match="Proportion too big"):
        mutad.gradient(lambda x: S.trim_mean(x, 0.7), X[0])
    with pytest.raises(ValueError, match="identical"):
        mutad.gradient(lambda y: S.linregress(np.ones(6), y).slope, Y[0])
    with pytest.raises(ValueError, match="No array values"):
        mutad.gradient(lambda x: S.tmean(x, (10.0, 20.0)), X[0])


def test_replayed_gradients_are_the_traced_ones():
    def f(x, y):
        return (S.skew(x) + S.kurtosis(x, bias=False) + S.pearsonr(x, y).pvalue
                + S.ttest_ind(x, y, equal_var=False).statistic + S.iqr(x)
                + S.linregress(x, y).intercept_stderr + S.zscore(x)[2] + S.tvar(x, (0.0, 2.0))
                + S.median_abs_deviation(y) + S.spearmanr(x, y).statistic)

    replayed = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    for _ in range(4):
        x, y = RNG.normal(size=8) + 1.0, RNG.normal(size=8)
        value, grads = replayed(x, y)
        expected_value, expected = mutad.value_and_gradient(f, x, y)
        assert value == expected_value
        assert all(g.tobytes() == e.tobytes() for g, e in zip(grads, expected, strict=True))
    assert not replayed.reasons  # replayed, not traced again


@pytest.mark.parametrize("f", [
    lambda x: S.tmean(x), lambda x: S.tmean(x, (0.7, 1.3), (False, True)),
    lambda x: S.tvar(x), lambda x: S.tstd(x), lambda x: S.tstd(x, (0.6, 1.4)),
    lambda x: S.tstd(np.reshape(x, (4, 4)), axis=1, ddof=2),
], ids=["tmean", "tmean-limits", "tvar", "tstd", "tstd-limits", "tstd-axis"])
def test_trimmed_statistics_of_float32_data_are_float32(f):
    """Regression: SciPy counts the values (tmean) and the degrees of freedom (tvar) in the
    data's dtype, so float32 data give float32 statistics; mutad counted in float64 and
    returned float64 values."""
    x = (np.random.default_rng(14).random(16) + 0.5).astype(np.float32)
    assert numpys_bits_in_every_mode(f, x).dtype == np.float32
    mutad.check_grads(f, x, modes=("rev", "fwd"))


# ----------------------------------------------------------------------------------------------
# binned_statistic: SciPy's bins (a decision on the plain x), the statistic in the values

BIN_X = np.random.default_rng(11).uniform(size=30)
BIN_V = np.random.default_rng(12).normal(size=30)
BIN_STATISTICS = ("mean", "sum", "count", "std", "median", "min", "max")
BIN_SETTINGS = {"bins": {"bins": 5}, "edges": {"bins": np.array([0.0, 0.2, 0.5, 0.6, 0.9])},
                "range": {"bins": 4, "range": (0.1, 0.8)}}


@pytest.mark.parametrize("settings", BIN_SETTINGS)
@pytest.mark.parametrize("statistic", BIN_STATISTICS)
def test_binned_statistic(statistic, settings):
    """SciPy's statistic, edges and bin numbers bit for bit (rows of values too); derivatives in
    the values and in x (through the edges), both modes and policies; empty bins' NaN."""
    options = BIN_SETTINGS[settings]

    def call(x, v):
        return scipy.stats.binned_statistic(x, v, statistic, **options)

    for v in (BIN_V, np.stack([BIN_V, BIN_V ** 2])):
        expected = call(BIN_X, v)
        got, _ = mutad.pullback(call, BIN_X.copy(), v.copy())
        for mine, theirs in zip(got, expected, strict=True):
            assert np.asarray(mine).tobytes() == np.asarray(theirs).tobytes()

    def loss(x, v):
        result = call(x, v)
        weights = np.arange(1.0, 1.0 + np.shape(result.statistic)[-1])
        return np.nansum(np.sin(result.statistic) * weights) + np.sum(result.bin_edges ** 2)

    assert mutad.value_and_grad(loss, argnums=(0, 1))(BIN_X, BIN_V)[0] == loss(BIN_X, BIN_V)
    for policy in POLICIES:
        mutad.check_grads(loss, BIN_X, BIN_V, policy=policy)
    mutad.check_jvp(loss, BIN_X, BIN_V)


def test_binned_statistic_derivatives_in_the_values():
    """The mean of a bin moves by 1/count with each of its values; a median, minimum and
    maximum with the value they take; a one-sample bin's std has the derivative 0."""
    x = np.array([0.1, 0.15, 0.2, 0.9, 0.55])
    v = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    grad = lambda s: mutad.gradient(  # noqa: E731
        lambda v: np.nansum(scipy.stats.binned_statistic(x, v, s, bins=2).statistic), v)[0]
    assert np.allclose(grad("mean"), [1 / 3, 1 / 3, 1 / 3, 0.5, 0.5])
    assert np.array_equal(grad("median"), [0.0, 0.0, 1.0, 0.5, 0.5])
    assert np.array_equal(grad("min"), [0.0, 1.0, 0.0, 0.0, 1.0])
    assert np.array_equal(grad("max"), [1.0, 0.0, 0.0, 1.0, 0.0])
    assert np.array_equal(mutad.gradient(lambda v: np.nansum(scipy.stats.binned_statistic(
        x, v, "std", bins=[0.0, 0.5, 0.8, 1.0]).statistic), v)[0][3:], [0.0, 0.0])


def test_binned_statistic_replay_and_refusals():
    """A replay bins the replayed x again (the bins change between calls)."""
    from cases import replays_as_traced

    def f(x, v):
        result = scipy.stats.binned_statistic(x, v, "median", bins=4)
        spread = scipy.stats.binned_statistic(x, v, "std", bins=4).statistic
        return (np.nansum(result.statistic * np.arange(1.0, 5.0)) + np.nansum(spread)
                + np.sum(result.bin_edges) + np.sum(v[result.binnumber - 1]))

    rng = np.random.default_rng(13)
    replaying = replays_as_traced(f, [(rng.uniform(size=20), rng.normal(size=20))
                                      for _ in range(4)], argnums=(0, 1))
    assert not replaying.reasons
    with pytest.raises(mutad.MutadError):
        mutad.gradient(lambda v: np.sum(scipy.stats.binned_statistic(
            BIN_X, v, np.mean).statistic), BIN_V)


def test_binned_statistic_of_lists():
    """x and values as lists holding traced numbers, and a list of value arrays."""
    x = [0.1, 0.5, 0.9]
    g = mutad.gradient(lambda v: np.sum(scipy.stats.binned_statistic(
        x, [v[0], 1.0, v[1]], "sum", bins=2).statistic), np.array([1.0, 2.0]))[0]
    assert np.array_equal(g, [1.0, 1.0])
    g = mutad.gradient(lambda v: np.sum(scipy.stats.binned_statistic(
        x, [2.0 * v, v], "mean", bins=2).statistic), np.array([1.0, 2.0, 3.0]))[0]
    assert np.array_equal(g, [3.0, 1.5, 1.5])


KS_SAMPLE = RNG.normal(size=25)
KS_TESTS = {
    "ks_1samp": lambda x: S.ks_1samp(x, S.norm.cdf),
    "ks_1samp-greater": lambda x: S.ks_1samp(x * 1.2, S.norm.cdf, alternative="greater"),
    "ks_1samp-less": lambda x: S.ks_1samp(x, S.logistic.cdf, alternative="l"),
    "ks_1samp-asymp": lambda x: S.ks_1samp(x, S.norm.cdf, args=(0.3, 1.4), method="asymp"),
    "ks_1samp-approx": lambda x: S.ks_1samp(x, S.norm.cdf, method="approx"),
    "kstest-name": lambda x: S.kstest(x, "norm"),
    "kstest-function": lambda x: S.kstest(np.abs(x), S.expon.cdf, args=(0.01,)),
    "ks_2samp": lambda x: S.ks_2samp(x[:10], x[10:] * 1.5),
    "kstest-two-samples": lambda x: S.kstest(x[:10], x[10:] + 0.5, alternative="greater"),
    # nan_policy="omit": each sample without its NaNs (it was refused)
    "ks_1samp-omit": lambda x: S.ks_1samp(np.where(np.abs(x) > 1.5, np.nan, x), S.norm.cdf,
                                          nan_policy="omit"),
    "kstest-name-omit": lambda x: S.kstest(np.append(x, np.nan), "norm", nan_policy="omit"),
    "ks_2samp-omit": lambda x: S.ks_2samp(np.append(x[:10], np.nan), x[10:] * 1.5,
                                          nan_policy="omit"),
}


def _ks_fields(result):
    return (result.statistic, result.pvalue, result.statistic_location,
            1.0 * result.statistic_sign)


@pytest.mark.parametrize("name", KS_TESTS)
def test_kolmogorov_smirnov_tests(name):
    """SciPy's statistic, p-value, location and sign bit for bit; the one-sample statistic and
    p-value differentiated in the sample (through the cdf at the sorted sample), the two-sample
    ones (functions of the samples' order alone) with derivative zero, the location as the
    sample it is."""
    test = KS_TESTS[name]
    x = KS_SAMPLE.copy()
    got, _ = mutad.pullback(lambda x: _ks_fields(test(x)), x)
    expected = _ks_fields(test(KS_SAMPLE.copy()))
    assert all(np.float64(a).tobytes() == np.float64(b).tobytes()
               for a, b in zip(got, expected, strict=True))
    for field in range(3):
        f = lambda x, field=field: _ks_fields(test(x))[field]  # noqa: E731
        mutad.check_grads(f, x)
        mutad.check_jvp(f, x)
    if "2samp" in name or "two-samples" in name:
        (g,) = mutad.gradient(lambda x: test(x).statistic + test(x).pvalue, x)
        assert not g.any()
    assert x.tobytes() == KS_SAMPLE.tobytes()
    replays_as_traced(lambda x: sum(_ks_fields(test(x))[:3]),
                      [(x,), (x * 1.3 + 0.1,), (x[::-1].copy(),)])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", [name for name in KS_TESTS if name.startswith("ks_1samp")]
                         + ["kstest-name"])
def test_a_one_sample_kolmogorov_smirnov_test_of_a_narrow_float_sample(name, dtype):
    """A float32 or float16 sample: SciPy's statistic (its ranks i/n in the sample's dtype,
    against float64 cdf values) and its p-value in the sample's dtype, bit for bit; mutad's
    ranks were float64 numbers and its p-value float64."""
    test = KS_TESTS[name]
    x = KS_SAMPLE.astype(dtype)
    got, _ = mutad.pullback(lambda x: test(x)[:3], x.copy())
    expected = test(x.copy())[:3]
    for a, b in zip(got, expected, strict=True):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_kolmogorov_smirnov_refusals():
    x = KS_SAMPLE.copy()
    with pytest.raises(mutad.MutadError, match="second derivative of the Kolmogorov"):
        mutad.hessian(lambda x: S.ks_1samp(x, S.norm.cdf).pvalue, x)
    with pytest.raises(mutad.MutadError, match="one 1-d array"):
        mutad.gradient(lambda x: np.sum(S.ks_1samp(x.reshape(5, 5), S.norm.cdf, axis=1)
                                        .statistic), x)
    with pytest.raises(mutad.MutadError, match="NaN"):
        mutad.gradient(lambda x: S.ks_1samp(np.where(x > 1, np.nan, x), S.norm.cdf)
                       .statistic, x)
    assert x.tobytes() == KS_SAMPLE.tobytes()


def test_kendalltau_carries_no_derivative():
    x, y = X[0], Y[0]
    value, gradient = mutad.value_and_grad(
        lambda x: S.kendalltau(x, y).statistic + S.kendalltau(x, y).pvalue)(x)
    assert value == S.kendalltau(x, y).statistic + S.kendalltau(x, y).pvalue
    assert not gradient.any()
    assert mutad.pullback(lambda x: S.kendalltau(x, y).correlation, x)[0] == \
        S.kendalltau(x, y).correlation


SCORES = {
    "fraction": lambda x: S.scoreatpercentile(x, 37.5),
    "several": lambda x: S.scoreatpercentile(x, [0, 12.5, 50, 100]),
    "lower-higher": lambda x: (S.scoreatpercentile(x, 30, interpolation_method="lower")
                               + S.scoreatpercentile(x, 30, interpolation_method="higher")),
    "limit": lambda x: S.scoreatpercentile(x, 60, limit=(-0.5, 1.5)),
    "axis": lambda x: S.scoreatpercentile(x.reshape(4, 6), [25, 80], axis=1),
}


@pytest.mark.parametrize("name", SCORES)
def test_scoreatpercentile(name):
    f = SCORES[name]
    x = X.reshape(-1).copy()
    y, _ = mutad.pullback(f, x)
    assert np.asarray(y).tobytes() == np.asarray(f(X.reshape(-1))).tobytes()
    mutad.check_grads(lambda x: np.sum(np.sin(f(x))), x)
    mutad.check_jvp(lambda x: np.sum(np.sin(f(x))), x)
    assert x.tobytes() == X.reshape(-1).tobytes()


def test_distances_between_distributions_replay():
    """wasserstein_distance and energy_distance (they converted the traced arrays): which CDF
    step each interval falls in is SciPy's decision on the plain values, guarded by a replay,
    whose gradients are the traced ones as the order of the samples changes."""
    grid = np.linspace(0.0, 1.0, 5)

    def f(u, w):
        return S.wasserstein_distance(u, grid, w) + S.energy_distance(grid[::-1], u)

    calls = [(RNG.uniform(size=6), RNG.uniform(0.1, 1.0, size=6)) for _ in range(4)]
    replays_as_traced(f, calls, argnums=(0, 1))


def test_mstats_of_a_masked_array_run_np_mas_code():
    """trimmed_mean of a masked array: SciPy's own code on np.ma's indexing and writes, which
    mutad follows (it was refused)."""
    from test_scipy_stops import check
    check(lambda x: S.mstats.trimmed_mean(np.ma.masked_less(x, 0.0)), X)


@pytest.mark.parametrize("field", ["statistic", "pvalue"])
def test_pearsonr_of_data_with_a_nan_guarded_by_where_has_a_zero_gradient(field):
    """With the default nan_policy, a NaN in the data makes pearsonr's statistic NaN; a
    program that replaces it (np.where(np.isnan(r), 0.0, r)) is constant there, and its
    gradient zero: the zero cotangent reached the norms and the vecdot of pearsonr's steps,
    whose pullbacks multiplied it by their NaN partials."""
    x, y = X[0].copy(), Y[0].copy()
    x[2] = np.nan

    def guarded(x, y):
        r = getattr(scipy.stats.pearsonr(x, y), field)
        return np.where(np.isnan(r), 0.0, r)

    before = (x.tobytes(), y.tobytes())
    value, grads = mutad.value_and_grad(guarded, argnums=(0, 1))(x, y)
    assert (x.tobytes(), y.tobytes()) == before
    assert np.asarray(value).tobytes() == np.asarray(guarded(x, y)).tobytes()
    assert [g.tolist() for g in grads] == [[0.0] * 6, [0.0] * 6]
    replayed = mutad.value_and_grad(guarded, argnums=(0, 1), replay=True)
    for _ in range(2):
        assert [g.tolist() for g in replayed(x, y)[1]] == [[0.0] * 6, [0.0] * 6]
    assert mutad.jvp(guarded, (x, y), (np.ones(6), np.ones(6)))[1] == 0.0


# ----------------------------------------------------------------------------------------------
# SciPy's own code on traced samples: theilslopes (the median of the pairwise slopes, a decision
# on their values), chi2_contingency, the tests' statistics, trimming and clipping (a decision
# on the values), the transformations' log-likelihoods of a constant lambda (they stopped with a
# ConversionError)

_SAMPLE = np.sin(np.arange(12.0) ** 1.7) + 0.3 * np.arange(12.0) + 0.05
_TABLE = np.array([10.0, 20.0, 30.0, 6.0, 9.0, 17.0])
_POSITIVE = np.abs(_SAMPLE) + 1.0


@pytest.mark.parametrize("name, f, x, other", [
    ("theilslopes", lambda d: scipy.stats.theilslopes(d)[0], _SAMPLE, _SAMPLE[::-1].copy()),
    ("theilslopes with x", lambda d: sum(scipy.stats.theilslopes(d, np.arange(12.0) ** 1.1)[:3]),
     _SAMPLE, np.cos(_SAMPLE)),
    ("chi2_contingency", lambda t: scipy.stats.chi2_contingency(t.reshape(2, 3))[0], _TABLE,
     _TABLE[::-1].copy()),
    ("chi2_contingency 2x2, Yates", lambda t: scipy.stats.chi2_contingency(t.reshape(2, 2)).pvalue,
     _TABLE[:4], _TABLE[2:]),
    ("chi2_contingency expected", lambda t: np.sum(scipy.stats.chi2_contingency(
        t.reshape(2, 3), correction=False).expected_freq ** 2), _TABLE, _TABLE + 1.0),
    ("chi2_contingency log-likelihood", lambda t: scipy.stats.chi2_contingency(
        t.reshape(2, 3), lambda_="log-likelihood")[0], _TABLE, _TABLE * 1.5),
    ("chisquare", lambda t: scipy.stats.chisquare(t).statistic, _TABLE, _TABLE[::-1].copy()),
    ("chisquare f_exp", lambda t: scipy.stats.chisquare(t, np.full(6, t.sum() / 6)).pvalue,
     _TABLE, _TABLE + 2.0),
    ("power_divergence", lambda t: scipy.stats.power_divergence(t, lambda_="cressie-read")[0],
     _TABLE, _TABLE * 0.7),
    ("expected_freq", lambda t: np.sum(scipy.stats.contingency.expected_freq(
        t.reshape(3, 2)) ** 2), _TABLE, _TABLE[::-1].copy()),
    ("f_oneway", lambda d: scipy.stats.f_oneway(d[:4], d[4:8], d[8:]).pvalue, _SAMPLE,
     np.cos(_SAMPLE)),
    ("levene", lambda d: scipy.stats.levene(d[:6], d[6:])[0], _SAMPLE, np.cos(_SAMPLE)),
    ("ranksums", lambda d: scipy.stats.ranksums(d, _SAMPLE[::-1] * 0.9).statistic + d @ d,
     _SAMPLE, np.cos(_SAMPLE)),
    ("pointbiserialr", lambda d: scipy.stats.pointbiserialr(np.arange(12) % 2, d)[0], _SAMPLE,
     np.cos(_SAMPLE)),
    ("boxcox_llf", lambda d: scipy.stats.boxcox_llf(0.5, d), _POSITIVE, _POSITIVE[::-1].copy()),
    ("yeojohnson_llf", lambda d: scipy.stats.yeojohnson_llf(0.5, d), _SAMPLE, np.cos(_SAMPLE)),
    ("gstd", lambda d: scipy.stats.gstd(d), _POSITIVE, _POSITIVE ** 2),
    ("sigmaclip", lambda d: np.sum(scipy.stats.sigmaclip(d, 1.5, 1.5)[0]), _SAMPLE,
     np.cos(_SAMPLE)),
    ("trimboth, trim1", lambda d: np.sum(scipy.stats.trimboth(d, 0.1) ** 2)
     + np.sum(scipy.stats.trim1(d, 0.2)), _SAMPLE, np.cos(_SAMPLE)),
    ("obrientransform", lambda d: np.sum(scipy.stats.obrientransform(d[:6], d[6:]) ** 2),
     _SAMPLE, np.cos(_SAMPLE)),
    ("differential_entropy", lambda d: scipy.stats.differential_entropy(d), _SAMPLE,
     np.cos(_SAMPLE)),
    ("kstat, kstatvar", lambda d: scipy.stats.kstat(d, 3) + scipy.stats.kstatvar(d), _SAMPLE,
     np.cos(_SAMPLE)),
    ("expectile", lambda d: scipy.stats.expectile(d, 0.3), _SAMPLE, np.cos(_SAMPLE)),
    ("lmoment", lambda d: np.sum(scipy.stats.lmoment(d)), _SAMPLE, np.cos(_SAMPLE)),
    # SciPy's code calling its undecorated skew, kurtosis, skewtest and ttest_1samp (_no_deco)
    ("ttest_rel", lambda d: scipy.stats.ttest_rel(d, _SAMPLE[::-1] * 1.1).pvalue, _SAMPLE,
     np.cos(_SAMPLE)),
    ("jarque_bera", lambda d: scipy.stats.jarque_bera(d).statistic, _SAMPLE, np.cos(_SAMPLE)),
    ("normaltest", lambda d: scipy.stats.normaltest(np.concatenate([d, d ** 2])).statistic,
     _SAMPLE, np.cos(_SAMPLE)),
    # SciPy's code written against array_api_compat's namespace (xp.clip, xp.asarray)
    ("mannwhitneyu", lambda d: scipy.stats.mannwhitneyu(d, _SAMPLE * 0.9 + 0.1).pvalue + d @ d,
     _SAMPLE, np.cos(_SAMPLE)),
    ("bartlett", lambda d: scipy.stats.bartlett(d[:6], d[6:]).statistic, _SAMPLE,
     np.cos(_SAMPLE)),
    ("cramervonmises", lambda d: scipy.stats.cramervonmises(d, "norm").statistic, _SAMPLE,
     np.cos(_SAMPLE)),
    ("quantile", lambda d: scipy.stats.quantile(d, 0.3), _SAMPLE, np.cos(_SAMPLE))])
def test_scipys_own_code_on_traced_samples(name, f, x, other):
    from cases import followed_as_scipy

    followed_as_scipy(f, x, other, rtol=1e-5)


def test_scipys_own_code_follows_math_of_a_traced_number():
    """boxcox_llf of a traced lambda: SciPy's math.log(lmb), followed as the user's is (it
    was a conversion, refused, before SciPy's followed code read the mode's math)."""
    f = lambda lmb: scipy.stats.boxcox_llf(lmb, _POSITIVE)  # noqa: E731
    assert mutad.value_and_gradient(f, 0.5)[0] == f(0.5)
    mutad.check_grads(f, 0.5, modes=("rev", "fwd"))
