"""``scipy.stats``' descriptive statistics and tests of location, as the compositions SciPy
computes them with.

SciPy converts its arguments with ``np.asarray`` (``scipy._lib._array_api``), which would cut
the gradient. Each function here stands in for SciPy's (``registry.defroute``: user code calling
``scipy.stats.skew`` by SciPy's name reaches it while a differentiation runs) and, given traced
arrays, takes SciPy's own steps on them, in SciPy's order, so that its values are SciPy's bit
for bit and reverse mode, forward mode and every order follow from the rules of those steps.
SciPy's decorator of its reductions (``_axis_nan_policy``: ``axis`` moved last or ``None``
ravelled, ``keepdims``, too-small samples) is :func:`_reduction`.

``nan_policy``: ``'propagate'`` and ``'raise'`` are followed; ``'omit'`` is followed by the
reductions (SciPy's decorator: each sample, or slice, without its NaNs) and by ``zmap`` and
``zscore`` (NaNs weighted zero): which values are NaN is a decision, the NaNs carry no
derivative; and by the Kolmogorov-Smirnov tests (each sample without its NaNs, as SciPy's
decorator). Elsewhere (``describe``, ``winsorize``) it is refused
(``UnsupportedOperationError``) and says to drop the NaNs first. Ranks carry no derivative
(``rankdata``, and ``spearmanr``, a function of ranks alone: its derivative is zero wherever it
is defined, which is everywhere but at ties); the mode is refused. The p-values are
differentiated where SciPy computes them with functions mutad differentiates (``stdtr``,
``betaincc``); a resampling ``method=`` is refused. ``kendalltau`` is a function of ranks too.
The Kolmogorov-Smirnov tests (``ks_1samp``, ``kstest``, ``ks_2samp``) of one 1-d sample: the
one-sample statistic is the largest distance between the sorted sample's empirical
distribution and the differentiated cdf at it, its p-value SciPy's, differentiated by the
density of SciPy's distribution of the statistic (to the first order); the two-sample ones
depend on the samples' order alone. ``scoreatpercentile`` takes SciPy's steps (its
``limit``, sort and interpolation).

``binned_statistic`` (``'mean'``, ``'sum'``, ``'count'``, ``'std'``, ``'median'``, ``'min'``,
``'max'``) gives SciPy's result bit for bit: which bin each sample falls in, and which samples
a median, minimum or maximum takes, are SciPy's decisions on the plain values (``binnumber``
carries no derivative); the statistic is differentiated in the values as the same statistic
of the samples of each bin (an empty bin's NaN has none, a one-sample bin's standard deviation
the derivative 0), and the bin edges in ``x`` (through its minimum and maximum), ``range`` or
``bins``. A Python function as ``statistic`` is refused.
"""

from __future__ import annotations

import builtins
import inspect
import math
import warnings

import numpy as np
import scipy.special as _special
import scipy.stats as _stats
from scipy.stats._axis_nan_policy import (SmallSampleWarning, _broadcast_shapes,
                                          too_small_1d_not_omit, too_small_1d_omit,
                                          too_small_nd_omit)
from scipy.stats._stats_py import (DescribeResult, KstestResult, LinregressResult,
                                   PearsonRResult, SignificanceResult, TtestResult,
                                   _scale_conversions)

from scipy.stats._binned_statistic import BinnedStatisticResult

from ..core.allocation import lists_as_arrays
from ..core.debug import from_callers_line, from_user_line
from ..core.errors import UnsupportedOperationError
from ..engines.arraylike import carries_derivative
from ..core.registry import NoClosedForm
from ._adjoints import Elementwise, ScipysCode, StandIn, Value, scipys_value, stands_in_for
from ..core.views import memory, wrapped

__all__ = ["binned_statistic", "circmean", "circstd", "circvar", "describe", "entropy", "gmean", "hmean", "iqr",
           "kendalltau", "ks_1samp", "ks_2samp", "kstest", "kurtosis", "linregress", "median_abs_deviation", "mode", "moment", "pearsonr",
           "pmean", "rankdata", "sem", "skew", "spearmanr", "tmax", "tmean", "tmin", "tsem", "tstd",
           "trim_mean",
           "scoreatpercentile", "trimmed_mean", "ttest_1samp", "ttest_ind", "tvar", "variation",
           "winsorize", "zmap", "zscore"]
__all__ += ["boxcox_llf", "chi2_contingency", "chisquare", "differential_entropy", "expectile",
            "expected_freq", "f_oneway", "gstd", "kstat", "kstatvar", "levene", "lmoment",
            "obrientransform", "pointbiserialr", "power_divergence", "ranksums", "sigmaclip",
            "theilslopes", "trim1", "trimboth", "yeojohnson_llf", "ttest_rel", "jarque_bera",
            "normaltest", "mannwhitneyu", "bartlett", "cramervonmises",
            "quantile"]  # (SciPy's own code: FOLLOWED)

_ALTERNATIVES = {"less": -1, "two-sided": 0, "greater": 1}


def _check_nan_policy(name, nan_policy, samples, omits=False):
    """SciPy's ``nan_policy``, where mutad follows it (``'omit'`` where ``omits``)."""
    if nan_policy == "propagate" or (nan_policy == "omit" and omits):
        return
    if nan_policy == "raise":
        if any(np.any(np.isnan(s)) for s in samples):
            raise ValueError("The input contains nan values")
        return
    if nan_policy == "omit":
        raise UnsupportedOperationError(
            f"scipy.stats.{name} with nan_policy='omit' of differentiated arrays: mutad follows "
            "nan_policy='propagate' and 'raise' only. Drop the NaNs first (x[~np.isnan(x)]) "
            "and call it with the default nan_policy.")
    raise ValueError("nan_policy must be one of {'propagate', 'omit', 'raise'}")


def _reduction(original, *, samples=("a",), too_small=0, outputs=1, pack=None, paired=False,
               propagates=True):
    """Stand in for ``original``, one of SciPy's functions decorated by
    ``_axis_nan_policy_factory``, with the body decorated (``fn(**samples, **settings)``), as
    SciPy's decorator does: the axes reduced are moved last and joined (or every axis, for
    ``axis=None``), the body called with ``axis=-1`` (a 1-d sample: without ``axis``, as
    SciPy calls it), a 1-d sample of at most ``too_small`` elements gives NaNs with SciPy's
    warning, ``keepdims`` puts the reduced axes back. ``samples`` are the parameters that are
    samples (the first ones positional, the others keywords that may be ``None``); ``paired``
    samples are broadcast along the axis too; ``propagates``: a slice holding a NaN gives NaN
    outputs whatever the body computes (SciPy's ``nan_propagation``). ``pack`` makes SciPy's
    result object of the ``outputs`` outputs."""
    signature = inspect.signature(original)
    name = original.__name__

    def decorate(body):
        def stand_in(*args, _no_deco=False, **kwargs):
            if _no_deco:  # SciPy's own calls of its undecorated function (skew in jarque_bera)
                results = body(*args, **kwargs)
                return pack(*results) if pack is not None and type(results) is tuple else results
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            settings = dict(bound.arguments)
            axis = settings.pop("axis")
            nan_policy = settings.pop("nan_policy", "propagate")
            keepdims = settings.pop("keepdims", False)
            given = [s for s in samples if settings.get(s) is not None]
            if given[:1] != list(samples[:1]):
                raise TypeError(f"{name}() missing its sample {samples[0]!r}")
            values = [np.atleast_1d(settings.pop(s)) for s in given]
            _check_nan_policy(name, nan_policy, values, omits=True)
            count = outputs(settings) if callable(outputs) else outputs
            if axis is None:
                reduced = tuple(range(max(np.ndim(v) for v in values)))
                values = [np.ravel(v) for v in values]
            else:
                reduced = axis
                shapes = _broadcast_shapes([np.shape(v) for v in values],
                                           None if paired else axis)
                if paired:
                    shapes = [shapes] * len(values)
                values = [np.broadcast_to(v, s) if np.shape(v) != tuple(s) else v
                          for v, s in zip(values, shapes, strict=True)]
                axes = (axis,) if np.isscalar(axis) else tuple(axis)
                values = [np.moveaxis(v, axes, tuple(range(-len(axes), 0))) for v in values]
                values = [np.reshape(v, np.shape(v)[:-len(axes)]
                                     + (math.prod(np.shape(v)[-len(axes):]),)) for v in values]
            one_d = all(np.ndim(v) <= 1 for v in values)
            omit = nan_policy == "omit" and any(np.any(np.isnan(v)) for v in values)
            if one_d and omit:
                results = _on_present(body, given, values, settings, paired, too_small, count,
                                      too_small_1d_omit)
            elif one_d and any(np.shape(v)[-1] <= too_small for v in values):
                warnings.warn(too_small_1d_not_omit, SmallSampleWarning, stacklevel=2)
                results = (np.float64(np.nan),) * count
            elif not one_d and any(np.size(v) == 0 for v in values):
                shape = np.broadcast_shapes(*(np.shape(v)[:-1] for v in values))
                results = tuple(np.full(shape, np.nan) for _ in range(count))
            elif omit:  # SciPy's slice by slice, each of its present values
                shape = np.broadcast_shapes(*(np.shape(v)[:-1] for v in values))
                values = [np.broadcast_to(v, shape + np.shape(v)[-1:]) for v in values]
                slices = [_on_present(body, given, [v[i] for v in values], settings, paired,
                                      too_small, count, too_small_nd_omit)
                          for i in np.ndindex(shape)]
                results = tuple(np.reshape(np.stack([s[k] for s in slices]), shape)
                                for k in range(count))
            else:
                named = dict(zip(given, values, strict=True))
                results = body(**named, **settings) if one_d else body(
                    **named, axis=-1, **settings)
                results = (results,) if count == 1 else tuple(results)
                if propagates and nan_policy == "propagate":
                    nan = False
                    for v in values:
                        nan = nan | np.any(np.isnan(v), axis=-1)
                    if np.any(nan):  # (NaN as SciPy's number where it gives one)
                        results = tuple(_as_numpys(np.where(nan, np.nan, r)) for r in results)
            if keepdims:
                results = tuple(np.expand_dims(r, reduced) for r in results)
            return pack(*results) if pack is not None else results[0]

        return StandIn(original, stand_in)

    return decorate


def _as_numpys(result):
    """A 0-d ``result`` as NumPy's number, as SciPy returns it (``np.where`` makes arrays)."""
    return result[()] if np.ndim(result) == 0 else result


def _on_present(body, names, values, settings, paired, too_small, count, message):
    """``body`` of the 1-d samples ``values`` without their NaNs (SciPy's ``_remove_nans``:
    a pair goes where either of its values is NaN), or NaNs with SciPy's warning where too few
    are left. Which values are present is a decision: the others carry no derivative."""
    if paired:
        present = ~np.isnan(values[0])
        for v in values[1:]:
            present = present & ~np.isnan(v)
        values = [v[present] for v in values]
    else:
        values = [v[~np.isnan(v)] for v in values]
    if any(np.shape(v)[-1] <= too_small for v in values):
        warnings.warn(message, SmallSampleWarning, stacklevel=4)
        return (np.float64(np.nan),) * count
    results = body(**dict(zip(names, values, strict=True)), **settings)
    return (results,) if count == 1 else tuple(results)


# ----------------------------------------------------------------------------------------------
# Moments


def _warn_of_cancellation(x, mean, deviation, axis):
    """SciPy's warning of ``_demean``, which ``_xp_var`` and ``_moment`` give: where the
    deviations from a slice's mean of more than one element are all below 10 ε of it (nearly
    equal values). Issued by a step of its own (``_cancellation``), which a replay runs again
    on its values, as it issues NumPy's warnings, at the user's line."""
    n = np.size(x) if axis is None else _count(x, axis)
    if n > 1:
        _cancellation(mean, deviation, axis)


def _warned_of_cancellation(mean, deviation, axis):
    deviation, mean = np.asarray(deviation), np.asarray(mean)
    if deviation.size == 0:
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.max(np.abs(deviation), axis=axis, keepdims=True) / np.abs(mean)
        lost = np.any(relative < np.finfo(mean.dtype).eps * 10)
    if lost:
        from_user_line(warnings.warn, "Precision loss occurred in moment calculation due to "
                       "catastrophic cancellation. This occurs when the data are nearly "
                       "identical. Results may be unreliable.", RuntimeWarning, stacklevel=1)


_cancellation = Value(_warned_of_cancellation, "scipy.stats's test of a cancellation")


def _moment(a, order, axis, mean=None):
    """SciPy's ``_moment``: the central moment by exponentiation by squares."""
    if np.size(a) == 0:
        return np.mean(a, axis=axis)
    dtype = np.result_type(a)  # (SciPy's moments, and the center it is given, in a's dtype)
    if order == 0 or (order == 1 and mean is None):
        shape = list(np.shape(a))
        del shape[axis]
        constant = np.ones(shape, dtype) if order == 0 else np.zeros(shape, dtype)
        return constant[()] if constant.ndim == 0 else constant
    powers = [order]
    current = order
    while current > 2:
        current = (current - 1) / 2 if current % 2 else current / 2
        powers.append(current)
    if mean is None:
        mean = np.mean(a, axis=axis, keepdims=True)
    elif np.result_type(mean) != dtype:
        mean = mean.astype(dtype) if wrapped(mean) else np.asarray(mean, dtype)
    deviation = a - mean
    _warn_of_cancellation(a, mean, deviation, axis)
    s = deviation * 1.0 if powers[-1] == 1 else deviation**2
    for n in powers[-2::-1]:
        s = s**2
        if n % 2:
            s = s * deviation
    return np.mean(s, axis=axis)


def _count(a, axis):
    """The elements of ``a`` along ``axis``, an axis or a tuple of them (SciPy's
    ``_length_nonmasked`` of an array)."""
    axes = (axis,) if np.ndim(axis) == 0 else axis
    return math.prod(np.shape(a)[i] for i in axes)


def _var(a, axis, ddof=0, mean=None):
    var = _moment(a, 2, axis, mean=mean)
    if ddof != 0:  # (SciPy's count in the sample's dtype: a float32 variance stays float32)
        n = np.asarray(_count(a, axis), dtype=np.result_type(a))
        factor = n / (n - ddof)
        if np.ndim(var) != 0:
            return var * factor
        # SciPy's variance of a 1-d sample is NumPy's scalar: its floating-point warnings
        # name the scalar loop ("scalar multiply"), which NumPy's scalars give here
        np.asarray(memory(var))[()] * factor[()]
        with np.errstate(all="ignore"):
            var = var * factor
    return var


def _moment_outputs(settings):
    order = settings.get("order", 1)
    return 1 if np.ndim(order) == 0 else len(order)


def _moment_pack(*moments):
    return moments[0] if len(moments) == 1 else np.stack(moments)


@_reduction(_stats.moment, outputs=_moment_outputs, pack=_moment_pack)
def moment(a, order=1, axis=0, *, center=None):
    orders = np.asarray(order, dtype=float)
    if np.size(orders) == 0:
        raise ValueError("`order` must be a scalar or a non-empty 1D array.")
    if np.any(orders != np.round(orders)):
        raise ValueError("All elements of `order` must be integral.")
    if orders.ndim == 0:
        return _moment(a, orders[()], axis, mean=center)
    mean = (np.mean(a, axis=axis, keepdims=True)
            if center is None and np.any(orders > 1) else None)
    return [_moment(a, o, axis, mean=mean if center is None and o > 1 else center)
            for o in orders]


def _standardized(a, axis, order):
    """The mean, the second moment and the moment of ``order``, and where the second is
    zero (SciPy's test: below the rounding of the mean squared, in the moments' precision)."""
    mean = np.mean(a, axis=axis, keepdims=True)
    m2 = _moment(a, 2, axis, mean=mean)
    m = _moment(a, order, axis, mean=mean)
    with np.errstate(all="ignore"):  # (SciPy's test raises nothing: a huge mean's square)
        zero = m2 <= (np.finfo(m2.dtype).eps * np.squeeze(mean, axis=axis))**2
    return m2, m, zero


@_reduction(_stats.skew)
def skew(a, axis=0, bias=True):
    n = np.shape(a)[axis]
    m2, m3, zero = _standardized(a, axis, 3)
    with np.errstate(all="ignore"):
        vals = np.where(zero, np.nan, m3 / m2**1.5)
        if not bias:
            can_correct = ~zero & (n > 2)
            if np.any(can_correct):
                nval = ((n - 1.0) * n)**0.5 / (n - 2.0) * m3 / m2**1.5
                vals = np.where(can_correct, nval, vals)
    return vals[()] if np.ndim(vals) == 0 else vals


@_reduction(_stats.kurtosis)
def kurtosis(a, axis=0, fisher=True, bias=True):
    n = np.shape(a)[axis]
    m2, m4, zero = _standardized(a, axis, 4)
    with np.errstate(all="ignore"):
        vals = np.where(zero, np.nan, m4 / m2**2.0)
        if not bias:
            can_correct = ~zero & (n > 3)
            if np.any(can_correct):
                nval = 1.0 / (n - 2) / (n - 3) * ((n**2 - 1.0) * m4 / m2**2.0 - 3 * (n - 1)**2.0)
                vals = np.where(can_correct, nval + 3.0, vals)
    vals = vals - 3 if fisher else vals
    return vals[()] if np.ndim(vals) == 0 else vals


def _chk_asarray(a, axis):
    return (np.ravel(a), 0) if axis is None else (np.atleast_1d(a), axis)


def _describe(a, axis=0, ddof=1, bias=True, nan_policy="propagate"):
    a, axis = _chk_asarray(a, axis)
    _check_nan_policy("describe", nan_policy, [a])
    if np.size(a) == 0:
        raise ValueError("The input must not be empty.")
    n = np.int64(_count(a, axis))
    minmax = (np.min(a, axis=axis), np.max(a, axis=axis))
    return DescribeResult(n, minmax, np.mean(a, axis=axis), _var(a, axis, ddof=ddof),
                          skew(a, axis, bias=bias), kurtosis(a, axis, bias=bias))


describe = StandIn(_stats.describe, _describe)


@_reduction(_stats.sem, too_small=1)
def sem(a, axis=0, ddof=1):
    return np.std(a, axis=axis, ddof=ddof) / np.shape(a)[axis]**0.5


@_reduction(_stats.variation)
def variation(a, axis=0, ddof=0):
    n = float(np.shape(a)[axis])
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean = np.mean(a, axis=axis)
        std = np.std(a, axis=axis)
        result = std * (n / (n - ddof))**0.5 / mean
        if ddof == n:  # SciPy's special case: no degrees of freedom left
            result = np.where(std > 0, np.copysign(np.inf, mean), np.nan)
    return result[()] if np.ndim(result) == 0 else result


# ----------------------------------------------------------------------------------------------
# Means and standardisation (SciPy's _xp_mean and _xp_var)


def _mean(x, axis=None, weights=None, keepdims=False, omit=False):
    """SciPy's ``_xp_mean``; ``omit``: NaNs get zero weight (what ``tvar`` asks for the values
    outside its limits)."""
    if weights is not None:
        x, weights = np.broadcast_arrays(x, weights)
    if omit and np.any(np.isnan(x)):
        nan = np.isnan(x)
        if np.any(np.all(nan, axis=axis)):
            warnings.warn(too_small_1d_omit if np.ndim(x) == 1 or axis is None
                          else too_small_nd_omit, SmallSampleWarning, stacklevel=3)
        weights = np.ones_like(x) if weights is None else weights
        x = np.where(nan, 0.0, x)
        weights = np.where(nan, 0.0, weights)
    if weights is None:
        return np.mean(x, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.sum(x * weights, axis=axis) / np.sum(weights, axis=axis)
    if keepdims:
        shape = [1 if axis is None or i == axis % np.ndim(x) else d
                 for i, d in enumerate(np.shape(x))]
        result = np.reshape(result, tuple(shape))
    return result[()] if np.ndim(result) == 0 else result


def _variance(x, axis=None, correction=0, keepdims=False, omit=False):
    """SciPy's ``_xp_var``."""
    mean = _mean(x, axis=axis, keepdims=True, omit=omit)
    deviation = x - mean
    _warn_of_cancellation(x, mean, deviation, axis)
    var = _mean(deviation * deviation, axis=axis, keepdims=keepdims, omit=omit)
    if correction != 0:  # SciPy's counts are in the variance's dtype (float32 for float32 x)
        dtype = np.result_type(var)
        n = np.asarray(np.size(x) if axis is None else np.shape(x)[axis], dtype=dtype)
        if omit:
            n = n - np.sum(np.isnan(x).astype(dtype), axis=axis, keepdims=keepdims)
        nc = n - correction
        with np.errstate(divide="ignore", invalid="ignore"):
            var = var * np.where(nc > 0, n / nc, np.nan)
    return var[()] if np.ndim(var) == 0 else var


def _zmap(scores, compare, axis=0, ddof=0, nan_policy="propagate"):
    like_zscore = scores is compare
    _check_nan_policy("zmap", nan_policy, [compare], omits=True)
    omit = nan_policy == "omit"
    with warnings.catch_warnings():
        if like_zscore:  # (SciPy's zscore gives no SmallSampleWarning)
            warnings.simplefilter("ignore", SmallSampleWarning)
        mean = _mean(compare, axis=axis, keepdims=True, omit=omit)
        std = _variance(compare, axis=axis, correction=ddof, keepdims=True, omit=omit)**0.5
    missing = np.isnan(scores)
    if np.any(missing):  # their NaN scores, with no derivative (NaN times 0 would be NaN)
        scores = np.where(missing, 0.0, scores)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (scores - mean) / std
    if np.any(missing):
        z = np.where(missing, np.nan, z)
    if like_zscore:  # constant slices: NaN, as SciPy says (in the scores' precision)
        zero = std <= np.abs(np.finfo(z.dtype).eps * mean)
        z = np.where(np.broadcast_to(zero, np.shape(z)), np.nan, z)
    return z


zmap = StandIn(_stats.zmap, _zmap)
zscore = StandIn(_stats.zscore, lambda a, axis=0, ddof=0, nan_policy="propagate": _zmap(
    a, a, axis=axis, ddof=ddof, nan_policy=nan_policy))


def _cast(a, dtype):
    return a if dtype is None or np.dtype(dtype) == np.float64 else a.astype(dtype)


@_reduction(_stats.gmean, samples=("a", "weights"), paired=True)
def gmean(a, axis=0, dtype=None, weights=None):
    with np.errstate(divide="ignore"):
        log_a = np.log(_cast(a, dtype))
    return np.exp(_mean(log_a, axis=axis, weights=weights))


def _negative_is_nan(a, what):
    negative = a < 0
    if np.any(negative):
        warnings.warn(f"The {what} mean is only defined if all elements are non-negative; "
                      "otherwise, the result is NaN.", RuntimeWarning, stacklevel=4)
        return np.where(negative, np.nan, a)
    return a


@_reduction(_stats.hmean, samples=("a", "weights"), paired=True)
def hmean(a, axis=0, dtype=None, *, weights=None):
    a = _negative_is_nan(_cast(a, dtype), "harmonic")
    with np.errstate(divide="ignore"):
        return 1.0 / _mean(1.0 / a, axis=axis, weights=weights)


@_reduction(_stats.pmean, samples=("a", "weights"), paired=True)
def pmean(a, p, *, axis=0, dtype=None, weights=None):
    if not isinstance(p, int | float):
        raise ValueError("Power mean only defined for exponent of type int or float.")
    if p == 0:
        with np.errstate(divide="ignore"):
            return np.exp(_mean(np.log(_cast(a, dtype)), axis=axis, weights=weights))
    if math.isinf(p):
        raise NotImplementedError("Power mean only implemented for finite `p`")
    a = _negative_is_nan(_cast(a, dtype), "power")
    with np.errstate(divide="ignore", invalid="ignore"):
        return _mean(a**float(p), axis=axis, weights=weights)**(1 / p)


# ----------------------------------------------------------------------------------------------
# Trimmed statistics


def _outside_limits(a, limits, inclusive):
    """SciPy's ``_put_val_to_limits``' mask: the elements outside ``limits`` (a decision, no
    derivative)."""
    mask = np.zeros(np.shape(a), dtype=bool)
    if limits is None:
        return mask
    (lower, upper), (lower_included, upper_included) = limits, inclusive
    if lower is not None:
        mask = mask | ((a < lower) if lower_included else (a <= lower))
    if upper is not None:
        mask = mask | ((a > upper) if upper_included else (a >= upper))
    if np.all(mask):
        raise ValueError("No array values within given limits")
    return mask


@_reduction(_stats.tmean)
def tmean(a, limits=None, inclusive=(True, True), axis=None):
    mask = _outside_limits(a, limits, inclusive)
    if np.any(mask):
        a = np.where(mask, 0.0, a)
    dtype = np.result_type(a)  # SciPy sums the values and counts them in a's dtype
    total = np.sum(a, axis=axis, dtype=dtype)
    n = np.sum((~mask).astype(dtype), axis=axis, dtype=dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(n != 0, total / np.where(n != 0, n, 1), np.nan)
    return mean[()] if np.ndim(mean) == 0 else mean


def _tvar(a, limits=None, inclusive=(True, True), axis=0, ddof=1):
    mask = _outside_limits(a, limits, inclusive)
    if np.any(mask):
        a = np.where(mask, np.nan, a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)
        return _variance(a, axis=axis, correction=ddof, omit=True)


tvar = _reduction(_stats.tvar)(_tvar)
tstd = _reduction(_stats.tstd)(lambda a, limits=None, inclusive=(True, True), axis=0, ddof=1:
                               _tvar(a, limits, inclusive, axis, ddof)**0.5)


@_reduction(_stats.tsem)
def tsem(a, limits=None, inclusive=(True, True), axis=0, ddof=1):
    sd = _tvar(a, limits, inclusive, axis, ddof)**0.5
    present = ~(_outside_limits(a, limits, inclusive) | np.isnan(a))
    n = np.sum(present.astype(np.result_type(a)), axis=axis, dtype=np.result_type(sd))
    return sd / n**0.5


def _trimmed_extreme(reduce, passed_over, a, limits, inclusive, axis):
    """SciPy's ``tmin`` and ``tmax`` (of floating-point data, as traced data is): the values
    outside ``limits`` replaced by the infinity that ``reduce`` passes over, a slice with none
    left NaN."""
    mask = _outside_limits(a, limits, inclusive)
    if np.any(mask):
        a = np.where(mask, passed_over, a)
    res = reduce(a, axis=axis)
    invalid = np.all(mask, axis=axis)
    if np.any(invalid):
        res = np.where(invalid, np.nan, res)
    return res[()] if np.ndim(res) == 0 else res


tmin = _reduction(_stats.tmin)(
    lambda a, lowerlimit=None, axis=0, inclusive=True:
    _trimmed_extreme(np.min, np.inf, a, (lowerlimit, None), (inclusive, None), axis))
tmax = _reduction(_stats.tmax)(
    lambda a, upperlimit=None, axis=0, inclusive=True:
    _trimmed_extreme(np.max, -np.inf, a, (None, upperlimit), (None, inclusive), axis))


@_reduction(_stats.trim_mean)
def trim_mean(a, proportiontocut, axis=0):
    if np.size(a) == 0:
        return np.float64(np.nan)
    if axis is None:
        a, axis = np.ravel(a), 0
    nobs = np.shape(a)[axis]
    lowercut = int(proportiontocut * nobs)
    uppercut = nobs - lowercut
    if lowercut > uppercut:
        raise ValueError("Proportion too big.")
    # the gradient reaches the elements kept, as np.partition's does
    kept = np.partition(a, (lowercut, uppercut - 1), axis)
    key = [slice(None)] * np.ndim(kept)
    key[axis] = slice(lowercut, uppercut)
    return np.mean(kept[tuple(key)], axis=axis)


# ----------------------------------------------------------------------------------------------
# Trimming and winsorizing (scipy.stats.mstats): of an array without a mask, which elements go
# is SciPy's decision on the plain values (its argsort), the values kept or copied are
# differentiated


def _cut_positions(name, a, limits, inclusive, axis):
    """The ravelled ``a``, SciPy's order of its elements (``argsort``) and the number of
    them cut from each end (``None``: that end is not cut), as ``mstats.trimr`` and
    ``winsorize`` compute them; what mutad does not follow is refused."""
    if np.ma.isMaskedArray(a) or axis is not None:
        raise UnsupportedOperationError(
            f"scipy.stats.mstats.{name} of a masked array or along an axis, of differentiated "
            "values: mutad follows axis=None on an array without a mask. Ravel the array, or "
            "loop over the slices along the axis.")
    if not isinstance(limits, tuple) and isinstance(limits, float):
        limits = (limits, limits)
    for limit, end in zip(limits, ("beginning", "end")):
        if limit is not None and (limit > 1. or limit < 0):
            raise ValueError(f"The proportion to cut from the {end} should be between 0. and "
                             f"1.(got {limit})")
    flat = np.ravel(a)
    n = np.size(flat)
    order = np.argsort(flat)
    (low, up), (low_inclusive, up_inclusive) = limits, inclusive
    low_cut = (int(low * n) if low_inclusive else int(np.round(low * n))) if low else None
    up_cut = (int(n * up) if up_inclusive else int(np.round(n * up))) if up is not None else None
    return flat, n, order, low_cut, up_cut


@stands_in_for(_stats.mstats.trimmed_mean)
def trimmed_mean(a, limits=(0.1, 0.1), inclusive=(1, 1), relative=True, axis=None):
    """np.ma's mean of the elements ``trimr`` keeps: their sum with the others as zeros, in
    ``a``'s shape, times 1. over their count (np.ma's steps where a mask was set, NumPy's mean
    where none was)."""
    if not relative:
        raise UnsupportedOperationError(
            "scipy.stats.mstats.trimmed_mean(relative=False) of differentiated values: mutad "
            "follows the relative limits. Compute the mean of x[(x > low) & (x < high)].")
    if limits is None:
        return np.mean(a)
    flat, n, order, low_cut, up_cut = _cut_positions("trimmed_mean", a, limits, inclusive, axis)
    if low_cut is None and up_cut is None:  # no element was masked: np.ma's mean is NumPy's
        return np.mean(a)
    kept = np.ones(n, bool)
    for cut in ((order[:low_cut],) if low_cut is not None else ()) + (
            (order[n - up_cut:],) if up_cut is not None else ()):
        kept[cut] = False
    count = np.count_nonzero(kept)
    if count == 0:
        return np.ma.masked
    dtype = "f8" if np.issubdtype(np.result_type(a), np.integer) else None
    return np.sum(np.where(kept, flat, 0).reshape(np.shape(a)), dtype=dtype) * 1. / count


@stands_in_for(_stats.mstats.winsorize)
def winsorize(a, limits=None, inclusive=(True, True), inplace=False, axis=None,
              nan_policy="propagate"):
    """SciPy's winsorized copy, a masked array without a mask: the ``low_cut`` smallest
    elements set to the next one, then the ``up_cut`` largest to the one below them, each
    written as SciPy writes it."""
    if inplace:
        raise UnsupportedOperationError(
            "scipy.stats.mstats.winsorize(inplace=True) of differentiated values: mutad follows "
            "the winsorized copy. Assign it: x[...] = winsorize(x, limits).")
    _check_nan_policy("mstats.winsorize", nan_policy, [a])
    if limits is None:
        return np.ma.array(a, copy=True)
    flat, n, order, low_cut, up_cut = _cut_positions("winsorize", a, limits, inclusive, axis)
    flat = np.copy(flat)
    if low_cut is not None:
        flat[order[:low_cut]] = flat[order[low_cut]]
    if up_cut is not None:
        flat[order[n - up_cut:]] = flat[order[n - up_cut - 1]]
    return np.ma.array(np.reshape(flat, np.shape(a)))


def _mstats_moment(a, mean, order, axis):
    """``mstats._moment`` of order 2, 3 or 4 about ``mean``: np.ma's exponentiation by squares
    ((a - mean) ** 2, times a - mean; or squared again), whose values on data without a mask
    are NumPy's, as long as every power is finite (np.ma masks the others): else refused."""
    deviations = a - mean
    two = np.asarray(2)  # np.ma.power's exponent is an int64 array: float64 powers of float32
    s = np.power(deviations, two)
    s = s * deviations if order == 3 else np.power(s, two) if order == 4 else s
    if not np.all(np.isfinite(s)):
        raise UnsupportedOperationError(
            "scipy.stats.mstats.skew or kurtosis of differentiated values whose powers are not "
            "finite (NaN, infinite or overflowing): np.ma masks them. Pass the finite elements "
            "(x[np.isfinite(x)]), or use scipy.stats.skew or kurtosis.")
    return np.mean(s, axis=axis)


def _mstats_shape(a, axis, bias, order, correction):
    """``mstats.skew`` (``order`` 3) and ``kurtosis`` (4) of an array without a mask, SciPy's
    steps: the moments about the mean, their ratio where the variance is not zero within
    rounding (there 0, the ratio taken at a variance of 1 so that no derivative is NaN), and
    where ``bias`` is False and the sample large enough, ``correction(n, m2, mk)`` written over
    it as ``np.place`` writes it."""
    if axis is None:  # (a masked array of traced values is np.ma's, refused there)
        a, axis = np.ravel(a), 0
    mean = np.mean(a, axis, keepdims=True)
    m2 = _mstats_moment(a, mean, 2, axis)
    mk = _mstats_moment(a, mean, order, axis)
    zero = np.asarray(m2 <= (np.finfo(np.result_type(m2)).resolution
                             * np.squeeze(mean, axis)) ** 2)
    # np.ma.where's zero is an int64 array: float64 values of a float32 sample, as SciPy's
    if zero.ndim:
        vals = np.where(zero, np.asarray(0), mk / np.where(zero, 1.0, m2) ** (order / 2))
    else:  # NumPy's scalars, whose power is not the ufunc's loop to the last bit
        vals = np.where(zero, np.asarray(0), 0.0 if zero else mk / m2 ** (order / 2))
    if not bias:
        n = np.intp(np.shape(a)[axis])  # np.ma's count: NumPy's integers, not Python's
        can_correct = ~zero & (n > order - 1)
        if can_correct.any():
            shape = np.shape(vals)
            vals = np.reshape(np.copy(vals), -1)
            kept = np.reshape(can_correct, -1)
            vals[kept] = correction(n, np.reshape(m2, -1)[kept], np.reshape(mk, -1)[kept])
            vals = np.reshape(vals, shape)
    return np.ma.array(vals, mask=np.zeros(np.shape(vals), bool))


@stands_in_for(_stats.mstats.skew)
def mstats_skew(a, axis=0, bias=True):
    """``scipy.stats.mstats.skew`` of an array without a mask: SciPy's steps
    (:func:`_mstats_shape`), a masked array without masked elements, as ``np.ma.where`` gives."""
    return _mstats_shape(a, axis, bias, 3,
                         lambda n, m2, m3: np.sqrt((n - 1.0) * n) / (n - 2.0) * m3 / m2 ** 1.5)


@stands_in_for(_stats.mstats.kurtosis)
def mstats_kurtosis(a, axis=0, fisher=True, bias=True):
    """``scipy.stats.mstats.kurtosis`` of an array without a mask: SciPy's steps
    (:func:`_mstats_shape`), less 3 for Fisher's definition (np.ma's subtraction: a NumPy
    scalar of a 0-d result, as SciPy's)."""
    vals = _mstats_shape(
        a, axis, bias, 4,
        lambda n, m2, m4: 1.0 / (n - 2) / (n - 3) * ((n * n - 1.0) * m4 / m2 ** 2.0
                                                     - 3 * (n - 1) ** 2.0) + 3.0)
    return vals - 3 if fisher else vals


# ----------------------------------------------------------------------------------------------
# Quantiles


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantiles(x, p, method):
    """``scipy.stats.quantile(x, p, axis=-1, keepdims=True)``, as SciPy computes it: the
    sorted sample (np.sort's gradient goes to the elements it moved) at positions that are
    constants, so the gradient goes to the elements the quantiles interpolate between, a
    subgradient at ties as np.percentile's."""
    y = np.sort(x, axis=-1)
    n = float(np.shape(y)[-1])
    p = np.broadcast_to(p, np.shape(y)[:-1] + np.shape(p))
    nan = np.any(np.isnan(y), axis=-1)
    if np.any(nan):
        y = np.where(nan[..., np.newaxis], np.nan, y)

    def at(k):
        return np.take_along_axis(y, k.astype(np.int64), axis=-1)

    if method == "linear":  # SciPy's _quantile_hf
        jg = p * n + (1 - p)
        jp1 = jg // 1
        j = jp1 - 1
        g = np.where(j < 0, 0, jg % 1)
        j, jp1 = np.clip(j, 0., n - 1), np.clip(jp1, 0., n - 1)
        return (1 - g) * at(j) + g * at(jp1)
    ij = p * (n - 1)  # SciPy's _quantile_bc
    if method == "midpoint":
        return (at(np.floor(ij)) + at(np.ceil(ij))) / 2
    return at({"lower": np.floor, "higher": np.ceil, "nearest": np.round}[method](ij))


def _qth_percentile(sorted_, per, interpolation_method, axis):
    """SciPy's ``_compute_qth_percentile``: the sorted values at the index, or its two
    neighbours weighted by the fraction."""
    if not np.isscalar(per):
        return np.stack([_qth_percentile(sorted_, p, interpolation_method, axis) for p in per])
    if not (0 <= per <= 100):
        raise ValueError("percentile must be in the range [0, 100]")
    indexer = [slice(None)] * np.ndim(sorted_)
    idx = per / 100. * (np.shape(sorted_)[axis] - 1)
    if int(idx) != idx:
        if interpolation_method == "lower":
            idx = int(np.floor(idx))
        elif interpolation_method == "higher":
            idx = int(np.ceil(idx))
        elif interpolation_method != "fraction":
            raise ValueError("interpolation_method can only be 'fraction', 'lower' or 'higher'")
    i = int(idx)
    if i == idx:
        indexer[axis] = slice(i, i + 1)
        weights = np.array(1)
        sumval = 1.0
    else:
        indexer[axis] = slice(i, i + 2)
        j = i + 1
        wshape = [1] * np.ndim(sorted_)
        wshape[axis] = 2
        weights = np.array([(j - idx), (idx - i)], float).reshape(wshape)
        sumval = weights.sum()
    return np.add.reduce(sorted_[tuple(indexer)] * weights, axis=axis) / sumval


@stands_in_for(_stats.scoreatpercentile)
def scoreatpercentile(a, per, limit=(), interpolation_method="fraction", axis=None):
    """SciPy's steps: the values within ``limit`` (a decision on them), sorted, then the
    score at each percentile (constants: ``per`` has no derivative here)."""
    if carries_derivative(per):
        raise UnsupportedOperationError(
            "scipy.stats.scoreatpercentile of a differentiated percentile: mutad follows the "
            "scores in the data; use np.percentile(a, per), which differentiates per too.")
    if np.size(a) == 0:
        return np.nan if np.isscalar(per) else np.full(np.shape(per), np.nan)
    if limit:
        a = a[(limit[0] <= a) & (a <= limit[1])]
    sorted_ = np.sort(a, axis=axis)
    return _qth_percentile(sorted_, per, interpolation_method, 0 if axis is None else axis)


@_reduction(_stats.iqr, samples=("x",), propagates=False)
def iqr(x, axis=None, rng=(25, 75), scale=1.0, interpolation="linear"):
    _float64_only("iqr", x)
    if isinstance(scale, str):
        if scale.lower() not in _scale_conversions:
            raise ValueError(f"{scale} not a valid scale for `iqr`")
        scale = _scale_conversions[scale.lower()]
    if len(rng) != 2:
        raise TypeError("`rng` must be a two element sequence.")
    if np.isnan(rng).any():
        raise ValueError("`rng` must not contain NaNs.")
    rng = (rng[0] / 100, rng[1] / 100) if rng[0] < rng[1] else (rng[1] / 100, rng[0] / 100)
    if rng[0] < 0 or rng[1] > 1:
        raise ValueError("Elements of `rng` must be in the range [0, 100].")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"interpolation {interpolation!r} is not one of {_INTERPOLATIONS}")
    pct = _quantiles(x, np.array(rng), interpolation)
    out = np.squeeze(pct[..., 1:2] - pct[..., 0:1], axis=-1)
    if scale != 1.0:
        out = out / scale
    return out[()] if np.ndim(out) == 0 else out


@_reduction(_stats.median_abs_deviation, samples=("x",))
def median_abs_deviation(x, axis=0, center=None, scale=1.0):
    center = np.median if center is None else center
    if not callable(center):
        raise TypeError("The argument 'center' must be callable. The given value "
                        f"{center!r} is not callable.")
    if isinstance(scale, str):
        if scale.lower() != "normal":
            raise ValueError(f"{scale} is not a valid scale value.")
        scale = 0.6744897501960817  # special.ndtri(0.75), as SciPy writes it
    med = np.expand_dims(center(x, axis=axis), axis=axis)
    return np.median(np.abs(x - med), axis=axis) / scale


# ----------------------------------------------------------------------------------------------
# Entropy and circular statistics


@_reduction(_stats.entropy, samples=("pk", "qk"), paired=True, too_small=-1)
def entropy(pk, qk=None, base=None, axis=0):
    if base is not None and base <= 0:
        raise ValueError("`base` must be a positive number or `None`.")
    with np.errstate(invalid="ignore"):
        if qk is not None:
            qk = qk / np.sum(qk, axis=axis, keepdims=True)
        pk = pk / np.sum(pk, axis=axis, keepdims=True)
    vec = _special.entr(pk) if qk is None else _special.rel_entr(pk, qk)
    total = np.sum(vec, axis=axis)
    return total / math.log(base) if base is not None else total


def _circular(samples, period):
    scaled = samples * ((2.0 * math.pi) / period)
    return np.sin(scaled), np.cos(scaled)


@_reduction(_stats.circmean, samples=("samples",))
def circmean(samples, high=2 * math.pi, low=0, axis=None):
    if np.size(samples) == 0:
        return np.mean(samples, axis=axis)
    period = high - low
    sin, cos = _circular(samples, period)
    res = np.arctan2(np.sum(sin, axis=axis), np.sum(cos, axis=axis))
    return (res * (period / (2.0 * math.pi)) - low) % period + low


def _resultant(samples, high, low, axis):
    """R, the length of the mean resultant vector, clipped at 1 as SciPy clips it."""
    sin, cos = _circular(samples, high - low)
    hypotenuse = (np.mean(sin, axis=axis)**2. + np.mean(cos, axis=axis)**2.)**0.5
    return np.clip(hypotenuse, None, 1.)


@_reduction(_stats.circvar, samples=("samples",))
def circvar(samples, high=2 * math.pi, low=0, axis=None):
    return 1. - _resultant(samples, high, low, axis)


@_reduction(_stats.circstd, samples=("samples",))
def circstd(samples, high=2 * math.pi, low=0, axis=None, *, normalize=False):
    res = (-2 * np.log(_resultant(samples, high, low, axis)))**0.5 + 0.0
    return res if normalize else res * ((high - low) / (2. * math.pi))


# ----------------------------------------------------------------------------------------------
# Ranks and the mode: no derivative


# Ranks are piecewise constant in the data: SciPy's own, with no derivative.
_rankdata = Value(lambda a, method, axis, nan_policy: _stats.rankdata(
    a, method, axis=axis, nan_policy=nan_policy), "scipy.stats.rankdata")
rankdata = StandIn(_stats.rankdata, lambda a, method="average", *, axis=None,
                   nan_policy="propagate": _rankdata(a, method, axis, nan_policy))


def _mode(a, axis=0, nan_policy="propagate", keepdims=False):
    raise UnsupportedOperationError(
        "scipy.stats.mode of differentiated arrays: the most frequent value jumps from one "
        "value to another as the data change, and moves with every copy of it at once, which "
        "no derivative describes. Take it of mutad.stop_gradient(a) if it is a constant.")


mode = StandIn(_stats.mode, _mode)


# ----------------------------------------------------------------------------------------------
# Correlation, regression and t-tests


def _pvalue(statistic, cdf, sf, alternative):
    """SciPy's ``_get_pvalue`` of a distribution symmetric about 0."""
    if alternative == "less":
        return cdf(statistic)
    if alternative == "greater":
        return sf(statistic)
    if alternative == "two-sided":
        return 2 * sf(np.abs(statistic))
    raise ValueError("`alternative` must be 'less', 'greater', or 'two-sided'.")


def _student_pvalue(t, df, alternative):
    """The p-value of Student's t statistic ``t`` with ``df`` degrees of freedom
    (``scipy.special.stdtr``, differentiated in ``t`` and in ``df``)."""
    return _pvalue(t, lambda t: _special.stdtr(df, t), lambda t: _special.stdtr(df, -t),
                   alternative)


def _warning_if_constant(const_xy):
    """``const_xy``, SciPy's ConstantInputWarning issued at the caller's line where one is
    true: an operation of its own, which a replay runs (and so warns) on each call."""
    if np.any(const_xy):
        from_callers_line(warnings.warn, (_stats.ConstantInputWarning(
            "An input array is constant; the correlation coefficient is not defined."),),
            {"stacklevel": 1})
    return np.array(const_xy)


_warned_if_constant = Value(_warning_if_constant, "scipy.stats.pearsonr")


def _pearsonr(x, y, *, alternative="two-sided", method=None, axis=0):
    if method is not None:
        raise UnsupportedOperationError(
            "scipy.stats.pearsonr with a resampling method= of differentiated arrays: its "
            "p-value is a count over random resamples, which has no derivative. Leave method "
            "at None (the exact beta distribution), or compute the p-value of "
            "mutad.stop_gradient(x).")
    if axis is None:
        x, y, axis = np.reshape(x, (-1,)), np.reshape(y, (-1,)), -1
    if int(axis) != axis:
        raise ValueError("`axis` must be an integer.")
    axis = int(axis)
    try:
        np.broadcast_shapes(np.shape(x), np.shape(y))
    except ValueError as error:
        raise ValueError("`x` and `y` must be broadcastable.") from error
    ndim = max(np.ndim(x), np.ndim(y))
    x = np.reshape(x, (1,) * (ndim - np.ndim(x)) + np.shape(x))
    y = np.reshape(y, (1,) * (ndim - np.ndim(y)) + np.shape(y))
    if np.shape(x)[axis] != np.shape(y)[axis]:
        raise ValueError("`x` and `y` must have the same length along `axis`.")
    if np.shape(x)[axis] < 2:
        raise ValueError("`x` and `y` must have length at least 2.")
    n = float(np.shape(x)[axis])
    x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
    # in the two samples' common float type, as SciPy computes (float32 and float64: float64)
    dtype = np.result_type(x, y)
    dtype = dtype if dtype.kind in "fc" else np.dtype(np.float64)
    x, y = (v if v.dtype == dtype else v.astype(dtype) for v in (x, y))
    const_x = np.all(x == x[..., 0:1], axis=-1)
    const_y = np.all(y == y[..., 0:1], axis=-1)
    const_xy = _warned_if_constant(const_x | const_y)
    x = np.where(const_x[..., np.newaxis], np.nan, x)
    y = np.where(const_y[..., np.newaxis], np.nan, y)
    xm = x - np.mean(x, axis=-1, keepdims=True)
    ym = y - np.mean(y, axis=-1, keepdims=True)
    # SciPy scales by the largest deviation before the norm, against a premature overflow
    xmax = np.max(np.abs(xm), axis=-1, keepdims=True)
    ymax = np.max(np.abs(ym), axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        normxm = xmax * np.linalg.norm(xm / xmax, axis=-1, keepdims=True)
        normym = ymax * np.linalg.norm(ym / ymax, axis=-1, keepdims=True)
        r = np.vecdot(xm / normxm, ym / normym, axis=-1)
    r = np.where(const_xy, np.nan, np.clip(r, -1., 1.))
    # Under the null hypothesis r follows the beta distribution on (-1, 1), a = b = n/2 - 1.
    ab = n / 2 - 1
    pvalue = _pvalue(r, lambda r: _special.betainc(ab, ab, (r + 1) / 2),
                     lambda r: _special.betaincc(ab, ab, (r + 1) / 2), alternative)
    if n == 2:  # exactly 1 or -1, and a p-value of 1, as SciPy promises
        r = np.round(r)
        pvalue = np.where(np.isnan(r), np.nan, np.ones_like(r))
    r = r[()] if np.ndim(r) == 0 else r
    pvalue = pvalue[()] if np.ndim(pvalue) == 0 else pvalue
    return PearsonRResult(statistic=r, pvalue=pvalue, n=n, alternative=alternative, x=x, y=y,
                          axis=-1)


pearsonr = StandIn(_stats.pearsonr, _pearsonr)


def _spearman_fields(a, b, axis, nan_policy, alternative):
    result = _stats.spearmanr(a, b, axis=axis, nan_policy=nan_policy, alternative=alternative)
    return np.stack([np.asarray(result.statistic, dtype=float),
                     np.asarray(result.pvalue, dtype=float)])


_spearman_fields_value = Value(_spearman_fields, "scipy.stats.spearmanr")


def _spearmanr(a, b=None, axis=0, nan_policy="propagate", alternative="two-sided"):
    """Pearson's correlation of the ranks: SciPy's own, with no derivative. The ranks, and
    so the statistic and its p-value, are piecewise constant in the data: the derivative is
    zero wherever it exists (everywhere but where two values tie, where there is none)."""
    statistic, pvalue = _spearman_fields_value(a, b, axis, nan_policy, alternative)
    statistic = statistic[()] if np.ndim(statistic) == 0 else statistic
    pvalue = pvalue[()] if np.ndim(pvalue) == 0 else pvalue
    result = SignificanceResult(statistic, pvalue)
    result.correlation = statistic
    return result


spearmanr = StandIn(_stats.spearmanr, _spearmanr)


def _kendall_fields(x, y, nan_policy, method, variant, alternative, axis, keepdims):
    result = _stats.kendalltau(x, y, nan_policy=nan_policy, method=method, variant=variant,
                               alternative=alternative, axis=axis, keepdims=keepdims)
    return np.stack([np.asarray(result.statistic, dtype=float),
                     np.asarray(result.pvalue, dtype=float)])


_kendall_fields_value = Value(_kendall_fields, "scipy.stats.kendalltau")


def _kendalltau(x, y, *, nan_policy="propagate", method="auto", variant="b",
                alternative="two-sided", axis=None, keepdims=False):
    """Kendall's tau, a function of the pairs' orders alone: SciPy's own, with no derivative
    (zero wherever it is defined, as spearmanr's)."""
    statistic, pvalue = _kendall_fields_value(x, y, nan_policy, method, variant, alternative,
                                              axis, keepdims)
    statistic = statistic[()] if np.ndim(statistic) == 0 else statistic
    pvalue = pvalue[()] if np.ndim(pvalue) == 0 else pvalue
    result = SignificanceResult(statistic, pvalue)
    result.correlation = statistic
    return result


kendalltau = StandIn(_stats.kendalltau, _kendalltau)


# Kolmogorov-Smirnov: the one-sample statistic is SciPy's largest distance between the
# empirical distribution of the sorted sample and the differentiated cdf at it, its p-value
# SciPy's distribution of it, differentiated by its density (first order: mutad has no
# derivative of that density); the two-sample statistic and p-value are functions of the
# samples' order alone (derivative zero wherever it is defined), the location a sample.


def _ks_alternative(alternative):
    alternative = {"t": "two-sided", "g": "greater", "l": "less"}.get(
        alternative.lower()[0], alternative)
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"Unexpected value {alternative=}")
    return alternative


def _ks_settings(name, x, axis, nan_policy, keepdims):
    if np.ndim(x) != 1 or axis not in (0, -1, None) or keepdims:
        raise UnsupportedOperationError(
            f"scipy.stats.{name} of a differentiated sample that is not one 1-d array (axis=, "
            "keepdims=): mutad follows the test of one sample; loop over the samples.")
    _check_nan_policy(name, nan_policy, [x], omits=True)
    if nan_policy == "omit":  # (SciPy's decorator: the sample without its NaNs)
        x = x[~np.isnan(x)]
    if np.any(np.isnan(x)) or np.size(x) == 0:
        raise UnsupportedOperationError(
            f"scipy.stats.{name} of a differentiated sample holding NaN, or none left: drop "
            "the NaNs first (x[~np.isnan(x)], or nan_policy='omit'), and keep a value.")
    return x


def _distance(cdfvals, x, sign):
    """SciPy's ``_compute_d``: D+ (``sign`` 1) or D-, and the sample where it is largest."""
    n = np.shape(cdfvals)[-1]
    dtype = np.result_type(x)  # (SciPy's ranks i / n in the sample's dtype)
    D = (np.arange(1.0, n + 1, dtype=dtype) / n - cdfvals if sign == +1
         else cdfvals - np.arange(0.0, n, dtype=dtype) / n)
    i = int(np.argmax(D))
    return D[i], x[i]


def _survival(distribution, scale=1.0):
    """``distribution.sf(d * scale, n)``, differentiated in d by its density."""
    density = Elementwise(lambda d, n: distribution.pdf(d * scale, n) * scale,
                          NoClosedForm("the statistic (a second derivative of the "
                                       "Kolmogorov-Smirnov p-value)"), None,
                          name=f"scipy.stats.{distribution.name}.pdf")
    return Elementwise(lambda d, n: distribution.sf(d * scale, n),
                       lambda y, d, n: -density(d, n), None,
                       name=f"scipy.stats.{distribution.name}.sf")


_KSONE_SF = _survival(_stats.ksone)
_KSTWO_SF = _survival(_stats.kstwo)
_KSTWOBIGN_DENSITY = Elementwise(lambda z: _stats.kstwobign.pdf(z), NoClosedForm(
    "the statistic (a second derivative of the Kolmogorov-Smirnov p-value)"),
    name="scipy.stats.kstwobign.pdf")
_KSTWOBIGN_SF = Elementwise(lambda z: _stats.kstwobign.sf(z),
                            lambda y, z: -_KSTWOBIGN_DENSITY(z), name="scipy.stats.kstwobign.sf")


def _ks_1samp(x, cdf, args=(), alternative="two-sided", method="auto", *, axis=0,
              nan_policy="propagate", keepdims=False):
    x = _ks_settings("ks_1samp", x, axis, nan_policy, keepdims)
    alternative = _ks_alternative(alternative)
    N = np.shape(x)[-1]
    x = np.sort(x)
    dtype = np.result_type(x)  # (SciPy's p-value is in the sample's dtype)
    cdfvals = cdf(x, *args)
    if alternative in ("greater", "less"):
        sign = 1 if alternative == "greater" else -1
        D, location = _distance(cdfvals, x, sign)
        return KstestResult(D, _KSONE_SF(D, N).astype(dtype), statistic_location=location,
                            statistic_sign=np.int8(sign))
    Dplus, plus_location = _distance(cdfvals, x, +1)
    Dminus, minus_location = _distance(cdfvals, x, -1)
    i_plus = bool(Dplus > Dminus)
    D = Dplus if i_plus else Dminus
    location = plus_location if i_plus else minus_location
    if method == "auto":
        method = "exact"
    if method == "exact":
        prob = _KSTWO_SF(D, N)
    elif method == "asymp":
        prob = _KSTWOBIGN_SF(D * math.sqrt(N))
    else:
        prob = 2 * _KSONE_SF(D, N)
    return KstestResult(D, np.clip(prob.astype(dtype), 0., 1.), statistic_location=location,
                        statistic_sign=np.int8(1 if i_plus else -1))


ks_1samp = StandIn(_stats.ks_1samp, _ks_1samp)


def _ks_2samp_fields(data1, data2, alternative, method):
    result = _stats.ks_2samp(data1, data2, alternative=alternative, method=method)
    return np.array([result.statistic, result.pvalue, result.statistic_location,
                     result.statistic_sign], dtype=float)


_ks_2samp_value = Value(_ks_2samp_fields, "scipy.stats.ks_2samp")


def _ks_2samp(data1, data2, alternative="two-sided", method="auto", *, axis=0,
              nan_policy="propagate", keepdims=False):
    data1, data2 = (_ks_settings("ks_2samp", data, axis, nan_policy, keepdims)
                    for data in (data1, data2))
    statistic, pvalue, location, sign = _ks_2samp_value(data1, data2, alternative, method)
    # the location is one of the samples: that sample, differentiated
    both = np.concatenate([data1, data2])
    where = np.flatnonzero(np.asarray(both == location))
    return KstestResult(statistic[()], pvalue[()], statistic_location=both[int(where[0])],
                        statistic_sign=np.int8(sign))


ks_2samp = StandIn(_stats.ks_2samp, _ks_2samp)


def _kstest(rvs, cdf, args=(), N=20, alternative="two-sided", method="auto", *, axis=0,
            nan_policy="propagate", keepdims=False):
    """SciPy's ``kstest``: ``ks_1samp`` against a cdf (a function, or a distribution's name),
    ``ks_2samp`` of two samples."""
    if alternative == "two_sided":
        alternative = "two-sided"
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"Unexpected alternative: {alternative}")
    if isinstance(rvs, str) or callable(rvs):
        raise UnsupportedOperationError(
            "scipy.stats.kstest of random variates it draws, with differentiated settings: "
            "draw them first and pass the sample.")
    settings = {"alternative": alternative, "method": method, "axis": axis,
                "nan_policy": nan_policy, "keepdims": keepdims}
    if isinstance(cdf, str):
        cdf = getattr(_stats, cdf).cdf
    if callable(cdf):
        return _ks_1samp(rvs, cdf, args, **settings)
    return _ks_2samp(rvs, cdf, **settings)


kstest = StandIn(_stats.kstest, _kstest)


def _linregress_pack(slope, intercept, rvalue, pvalue, stderr, intercept_stderr):
    return LinregressResult(slope=slope, intercept=intercept, rvalue=rvalue, pvalue=pvalue,
                            stderr=stderr, intercept_stderr=intercept_stderr)


@_reduction(_stats.linregress, samples=("x", "y"), paired=True, too_small=1, outputs=6,
            pack=_linregress_pack)
def linregress(x, y, alternative="two-sided", axis=None):
    _float64_only("linregress", x, y)
    if np.ndim(x) == 1:
        return _linregress(x, y, alternative)
    # SciPy regresses each slice by itself (np.apply_along_axis)
    slices = [_linregress(x[i], y[i], alternative) for i in np.ndindex(np.shape(x)[:-1])]
    return tuple(np.reshape(np.stack(field), np.shape(x)[:-1]) for field in zip(*slices))


def _linregress(x, y, alternative):
    tiny = 1.0e-20
    if np.size(x) == 0 or np.size(y) == 0:
        raise ValueError("Inputs must not be empty.")
    if np.amax(x) == np.amin(x) and len(x) > 1:
        raise ValueError("Cannot calculate a linear regression if all x values are identical")
    n = len(x)
    xmean = np.mean(x, None)
    ymean = np.mean(y, None)
    moments = np.ravel(np.cov(x, y, bias=1))  # NumPy's steps (rules/composites.py)
    ssxm, ssxym, ssym = moments[0], moments[1], moments[3]
    if ssxm == 0.0 or ssym == 0.0:
        r = np.float64(np.nan if ssxym == 0 else 0.0)
    else:
        # |r| > 1 only by rounding: clipped, as SciPy sets it to +-1
        r = np.clip(ssxym / np.sqrt(ssxm * ssym), -1.0, 1.0)
    slope = ssxym / ssxm
    intercept = ymean - slope * xmean
    if n == 2:
        prob = np.float64(1.0 if y[0] == y[1] else 0.0)
        slope_stderr = intercept_stderr = np.float64(0.0)
    else:
        df = n - 2
        t = r * np.sqrt(df / ((1.0 - r + tiny) * (1.0 + r + tiny)))
        prob = _student_pvalue(t, df, alternative)
        slope_stderr = np.sqrt((1 - r**2) * ssym / ssxm / df)
        intercept_stderr = slope_stderr * np.sqrt(ssxm + xmean**2)
    return slope, intercept, r, prob, slope_stderr, intercept_stderr


def _ttest_pack(statistic, pvalue, df, alternative, standard_error, estimate):
    alternative = np.atleast_1d(alternative)
    alternative = alternative[np.isfinite(alternative)]
    alternative = alternative[0] if np.size(alternative) != 0 else np.nan
    return TtestResult(statistic, pvalue, df=df, alternative=alternative,
                       standard_error=standard_error, estimate=estimate, xp=np)


def _scalar(x):
    return x[()] if np.ndim(x) == 0 else x


def _float64_only(name, *samples):
    """Refuse samples of another float type (float32): SciPy computes these statistics in
    their precision by steps mutad does not reproduce bit for bit."""
    for x in samples:
        if np.result_type(x).kind == "f" and np.result_type(x) != np.float64:
            raise UnsupportedOperationError(
                f"scipy.stats.{name} of {np.result_type(x)} samples: mutad follows it for "
                "float64 samples only; pass x.astype(np.float64).")


@_reduction(_stats.ttest_1samp, samples=("a", "popmean"), outputs=6, pack=_ttest_pack)
def ttest_1samp(a, popmean, axis=0, alternative="two-sided"):
    _float64_only("ttest_1samp", a)
    n = np.shape(a)[axis]
    mean = np.mean(a, axis=axis)
    popmean = np.squeeze(popmean, axis=axis) if np.ndim(popmean) > 0 else popmean
    denom = np.sqrt(_var(a, axis, ddof=1) / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = _scalar(np.divide(mean - popmean, denom))
    prob = _scalar(_student_pvalue(t, float(n - 1), alternative))
    df = _scalar(np.broadcast_to(np.asarray(n - 1), np.shape(t)))
    return t, prob, df, _ALTERNATIVES[alternative], denom, mean


@_reduction(_stats.ttest_ind, samples=("a", "b"), outputs=6, pack=_ttest_pack)
def ttest_ind(a, b, *, axis=0, equal_var=True, alternative="two-sided", trim=0, method=None):
    _float64_only("ttest_ind", a, b)
    if not (0 <= trim < .5):
        raise ValueError("Trimming percentage should be 0 <= `trim` < .5.")
    if trim != 0 or method is not None:
        raise UnsupportedOperationError(
            "scipy.stats.ttest_ind with trim= or a resampling method= of differentiated "
            "arrays: mutad follows the untrimmed test with Student's t distribution only. "
            "Leave trim=0 and method=None, or test mutad.stop_gradient of the samples.")
    n1, n2 = np.shape(a)[axis], np.shape(b)[axis]
    with np.errstate(divide="ignore", invalid="ignore"):
        v1, v2 = _var(a, axis, ddof=1), _var(b, axis, ddof=1)
    m1, m2 = np.mean(a, axis=axis), np.mean(b, axis=axis)
    if equal_var:  # SciPy's _equal_var_ttest_denom
        v1 = np.where(n1 == 1, 0., v1)
        v2 = np.where(n2 == 1, 0., v2)
        df = n1 + n2 - 2.0
        svar = ((n1 - 1) * v1 + (n2 - 1) * v2) / df
        denom = np.sqrt(svar * (1.0 / n1 + 1.0 / n2))
        df = np.float64(df)
    else:  # SciPy's _unequal_var_ttest_denom: Welch's degrees of freedom, differentiated
        vn1, vn2 = v1 / n1, v2 / n2
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (vn1 + vn2)**2 / (vn1**2 / (n1 - 1) + vn2**2 / (n2 - 1))
        df = np.where(np.isnan(df), 1., df)
        denom = np.sqrt(vn1 + vn2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = _scalar(np.divide(m1 - m2, denom))
    prob = _scalar(_student_pvalue(t, df, alternative))
    df = _scalar(np.broadcast_to(df, np.shape(t)))
    return t, prob, df, _ALTERNATIVES[alternative], denom, m1 - m2


# ----------------------------------------------------------------------------------------------
# Binned statistics: SciPy's bins and selections, decided on the plain values


def _binned_decisions(x, values, statistic, bins, range_):
    """SciPy's ``binned_statistic`` of the plain values, with the decisions the derivatives
    follow: each bin's count, and for a median, minimum or maximum the samples it takes (per
    row of values, per bin; 0 where a bin is empty)."""
    result = _stats.binned_statistic(x, values, statistic, bins, range_)
    binnumber = result.binnumber
    size = len(result.bin_edges) + 1  # with the two outlier bins
    counts = np.bincount(binnumber, minlength=size)
    rows = np.atleast_2d(np.asarray(values))
    first = np.zeros((len(rows), size), dtype=np.intp)
    second = np.zeros((len(rows), size), dtype=np.intp)
    for vv, row in enumerate(rows):
        if statistic == "median":  # SciPy's steps
            i = np.lexsort((row, binnumber))
            _, j, count = np.unique(binnumber[i], return_index=True, return_counts=True)
            mid = j + (count - 1) / 2
            first[vv, binnumber[i][j]] = i[np.floor(mid).astype(int)]
            second[vv, binnumber[i][j]] = i[np.ceil(mid).astype(int)]
        elif statistic in ("min", "max"):  # SciPy's assignment: the last write to a bin wins
            i = np.argsort(row)
            i = i[::-1] if statistic == "min" else i
            first[vv, binnumber[i]] = i
    return (np.asarray(result.statistic, dtype=np.float64), np.asarray(result.bin_edges),
            binnumber, counts, first, second)


_binned = Value(_binned_decisions, "scipy.stats.binned_statistic's bins")


def _binned_sums(rows, binnumber, size):
    sums = np.zeros_like(rows, shape=(np.shape(rows)[0], size))
    for vv in builtins.range(np.shape(rows)[0]):
        np.add.at(sums[vv], binnumber, rows[vv])
    return sums


def _binned_statistic(x, values, statistic="mean", bins=10, range=None):
    if callable(statistic):
        raise UnsupportedOperationError(
            "scipy.stats.binned_statistic with a Python function as statistic, of "
            "differentiated arrays: mutad follows 'mean', 'sum', 'count', 'std', 'median', "
            "'min' and 'max'. Compute the statistic of each bin from binnumber yourself.")
    if statistic not in ("mean", "median", "count", "sum", "std", "min", "max"):
        raise ValueError(f"invalid statistic {statistic!r}")
    if isinstance(values, (list, tuple)) and any(np.ndim(v) > 0 for v in values):
        values = np.stack(values)  # a list of value arrays, as NumPy's array of it
    x = x if hasattr(x, "dtype") else np.asarray(x)
    values = values if hasattr(values, "dtype") else np.asarray(values)
    if values.dtype.kind == "c":
        raise UnsupportedOperationError(
            "scipy.stats.binned_statistic of complex values: mutad follows real values.")
    if np.ndim(x) != 1:
        raise UnsupportedOperationError(
            "scipy.stats.binned_statistic of a differentiated x that is not one array of "
            "samples: mutad follows a one-dimensional x.")
    value, edges, binnumber, counts, first, second = _binned(x, values, statistic, bins, range)
    # the edges: SciPy's, moving with the range they span
    if np.ndim(bins) == 0:
        if range is not None:
            low, high = range[0][0] if np.ndim(range[0]) else range[0], \
                range[0][1] if np.ndim(range[0]) else range[1]
        else:
            low, high = np.min(x), np.max(x)
        n = np.shape(edges)[0] - 1
        t = np.arange(n + 1) / n
        edges = scipys_value(edges, low * (1.0 - t) + high * t)
    else:
        edges = scipys_value(edges, np.reshape(bins, (-1,)) * 1.0)
    if statistic == "count" or not carries_derivative(values):
        return BinnedStatisticResult(value, edges, binnumber)
    rows = values if np.ndim(values) == 2 else np.reshape(values, (1, -1))
    size = np.shape(counts)[0]
    filled = counts > 0
    number = np.where(filled, counts, 1)
    if statistic in ("median", "min", "max"):
        taken = np.take_along_axis(rows, first, axis=1)
        if statistic == "median":
            taken = (taken + np.take_along_axis(rows, second, axis=1)) / 2
        composition = np.where(filled, taken, 0.0)
    else:
        sums = _binned_sums(rows, binnumber, size)
        composition = sums if statistic == "sum" else sums / number
        if statistic == "std":
            delta = rows - composition[:, binnumber]
            variance = _binned_sums(delta * delta, binnumber, size) / number
            zero = variance == 0.0  # one sample (or equal ones): the subgradient 0
            composition = np.where(zero, 0.0, np.sqrt(np.where(zero, 1.0, variance)))
        if statistic != "sum":
            composition = np.where(filled, composition, 0.0)
    composition = composition[:, 1:-1]
    composition = np.reshape(composition, np.shape(value))
    return BinnedStatisticResult(scipys_value(value, composition), edges, binnumber)


binned_statistic = StandIn(_stats.binned_statistic, _binned_statistic)


# ----------------------------------------------------------------------------------------------
# Distances between one-dimensional distributions: SciPy's steps (``_cdf_distance``)


def _floats(a):
    """``np.asarray(a, dtype=float)`` of a traced array, a list of traced numbers or numbers."""
    a = lists_as_arrays([a])[0] if type(a) in (list, tuple) else a
    a = a if wrapped(a) else np.asarray(a)
    return a if a.dtype == np.float64 else a.astype(np.float64)


def _distribution(values, weights):
    """``_validate_distribution``: the values (and weights) as float arrays, SciPy's errors
    decided on their plain values."""
    values, weights = (None if a is None else _floats(a) for a in (values, weights))
    if len(values) == 0:
        raise ValueError("Distribution can't be empty.")
    if weights is None:
        return values, None
    if len(weights) != len(values):
        raise ValueError("Value and weight array-likes for the same empirical distribution "
                         "must be of the same size.")
    if np.any(weights < 0):
        raise ValueError("All weights must be non-negative.")
    if not 0 < np.sum(weights) < np.inf:
        raise ValueError("Weight array-like sum must be positive and finite. Set as None for "
                         "an equal distribution of weight.")
    return values, weights


def _cdf(values, weights, sorter, indices):
    """A distribution's CDF at the positions ``indices`` of its sorted values: their count
    over the number of values, or the weights summed up to them over all the weights."""
    if weights is None:
        return indices / values.size
    cumulative = np.concatenate(([0], np.cumsum(weights[sorter])))
    return cumulative[indices] / cumulative[-1]


def _cdf_at_ties(values, weights, sorter, order, start, tie):
    """A sample's CDF on the intervals of length zero (``tie``) between tied values, by
    position in the merged order: its values (weights) up to the interval's left end alone.
    SciPy's searchsorted counts every value of the tie there, which leaves the value as it is
    (the interval has no length) but not the derivative: moving a tied value moves the ends of
    the interval before it and after it, and those have the same weight then, so an element
    tied with a value of the other sample had a gradient of 0 where the distance is smooth."""
    mine = np.logical_and(order >= start, order < start + values.size)[:-1]
    if weights is None:
        return np.cumsum(mine) / values.size
    own = np.where(mine, weights[np.where(mine, order[:-1] - start, 0)], 0.0)
    return np.where(tie, np.cumsum(own), 0.0) / np.cumsum(weights[sorter])[-1]


def _cdf_distance(p, u_values, v_values, u_weights=None, v_weights=None):
    """SciPy's ``_cdf_distance``: the integral of ``|U - V| ** p`` between the sorted values
    of both samples, to the power ``1 / p``. Which CDF step each interval falls in is SciPy's
    decision (argsort, searchsorted) on the plain values, and at ties the merged order's
    (``_cdf_at_ties``); the intervals (the sorted values' differences: the gradient goes to
    the values the sort moved) and the weights are differentiated."""
    u_values, u_weights = _distribution(u_values, u_weights)
    v_values, v_weights = _distribution(v_values, v_weights)
    u_sorter, v_sorter = np.argsort(u_values), np.argsort(v_values)
    merged = np.concatenate((u_values, v_values))
    order = np.argsort(merged, kind="mergesort")  # np.sort's order, kind="mergesort"
    all_values = merged[order]
    deltas = np.diff(all_values)
    u_cdf = _cdf(u_values, u_weights, u_sorter,
                 np.searchsorted(u_values[u_sorter], all_values[:-1], "right"))
    v_cdf = _cdf(v_values, v_weights, v_sorter,
                 np.searchsorted(v_values[v_sorter], all_values[:-1], "right"))
    tie = deltas == 0
    if np.any(tie):
        u_cdf = np.where(tie, _cdf_at_ties(u_values, u_weights, u_sorter, order, 0, tie), u_cdf)
        v_cdf = np.where(tie, _cdf_at_ties(v_values, v_weights, v_sorter, order,
                                           u_values.size, tie), v_cdf)
    if p == 1:
        return np.vecdot(np.abs(u_cdf - v_cdf), deltas)
    if p == 2:
        return np.sqrt(np.vecdot(np.square(u_cdf - v_cdf), deltas))
    return np.power(np.vecdot(np.power(np.abs(u_cdf - v_cdf), p), deltas), 1 / p)


@stands_in_for(_stats.wasserstein_distance)
def wasserstein_distance(u_values, v_values, u_weights=None, v_weights=None):
    return _cdf_distance(1, u_values, v_values, u_weights, v_weights)


@stands_in_for(_stats.energy_distance)
def energy_distance(u_values, v_values, u_weights=None, v_weights=None):
    return np.sqrt(2) * _cdf_distance(2, u_values, v_values, u_weights, v_weights)


# SciPy's own code on traced samples (ScipysCode): theilslopes's median of the pairwise slopes
# (a decision on their values, as np.median's), chi2_contingency's expected frequencies and
# statistic, the other tests' statistics and the transformations of fixed lambda
FOLLOWED = ("theilslopes", "chi2_contingency", "chisquare", "power_divergence", "f_oneway",
            "levene", "ranksums", "pointbiserialr", "boxcox_llf", "yeojohnson_llf", "gstd",
            "sigmaclip", "trimboth", "trim1", "obrientransform", "differential_entropy", "kstat",
            "kstatvar", "expectile", "lmoment", "ttest_rel", "jarque_bera", "normaltest",
            "mannwhitneyu", "bartlett", "cramervonmises", "quantile")
(theilslopes, chi2_contingency, chisquare, power_divergence, f_oneway, levene, ranksums,
 pointbiserialr, boxcox_llf, yeojohnson_llf, gstd, sigmaclip, trimboth, trim1, obrientransform,
 differential_entropy, kstat, kstatvar, expectile, lmoment, ttest_rel, jarque_bera,
 normaltest, mannwhitneyu, bartlett, cramervonmises, quantile) = (
    ScipysCode(getattr(_stats, name)) for name in FOLLOWED)
expected_freq = ScipysCode(_stats.contingency.expected_freq)


# ----------------------------------------------------------------------------------------------
# scipy.stats.qmc.discrepancy: SciPy's compiled sums over the points and the pairs of points,
# with the derivatives of the same sums written with NumPy (SciPy's formulas)


def _scipys_discrepancy(sample, iterative, method, workers):
    return _stats.qmc.discrepancy(sample, iterative=iterative, method=method, workers=workers)


_discrepancy_value = Value(_scipys_discrepancy, "scipy.stats.qmc.discrepancy")


def _discrepancy_sums(x, iterative, method):
    n, d = np.shape(x)
    n = n + 1 if iterative else n
    centred = np.abs(x - 0.5)
    apart = np.abs(x[:, None, :] - x[None, :, :])
    if method == "CD":
        points = np.sum(np.prod(1 + 0.5 * centred - 0.5 * centred ** 2, axis=1))
        pairs = np.sum(np.prod(1 + 0.5 * centred[:, None, :] + 0.5 * centred[None, :, :]
                               - 0.5 * apart, axis=2))
        return (13 / 12) ** d - 2 / n * points + 1 / n ** 2 * pairs
    if method == "WD":
        return -(4 / 3) ** d + 1 / n ** 2 * np.sum(np.prod(1.5 - apart * (1 - apart), axis=2))
    if method == "MD":
        points = np.sum(np.prod(5 / 3 - 0.25 * centred - 0.25 * centred ** 2, axis=1))
        pairs = np.sum(np.prod(15 / 8 - 0.25 * centred[:, None, :] - 0.25 * centred[None, :, :]
                               - 0.75 * apart + 0.5 * apart ** 2, axis=2))
        return (19 / 12) ** d - 2 / n * points + 1 / n ** 2 * pairs
    points = np.sum(np.prod(1 - x ** 2, axis=1))  # L2-star
    pairs = np.sum(np.prod(1 - np.maximum(x[:, None, :], x[None, :, :]), axis=2))
    return np.sqrt(3.0 ** -d - 1 / n * 2.0 ** (1 - d) * points + 1 / n ** 2 * pairs)


@stands_in_for(_stats.qmc.discrepancy)
def discrepancy(sample, *, iterative=False, method="CD", workers=1):
    sample = lists_as_arrays((sample,))[0]  # (a list of traced points: their array)
    value = _discrepancy_value(sample, iterative, method, workers)  # (SciPy's checks)
    if not carries_derivative(sample):
        return value
    return scipys_value(value, _discrepancy_sums(sample, iterative, method))


__all__ += ["discrepancy"]


# ----------------------------------------------------------------------------------------------
# scipy.stats.siegelslopes: SciPy's Python code (followed) hands the samples to a compiled
# (Pythran) routine, the repeated medians of the pairwise slopes (and, by method "separate",
# of the pairwise intercepts); its values are SciPy's, their derivatives those of the same
# medians written with NumPy's (each a decision on the values, as np.median's)

from scipy.stats import _stats_pythran  # noqa: E402


def _scipys_siegelslopes(y, x, method):
    return np.asarray(_stats_pythran.siegelslopes(y, x, method))


_siegelslopes_value = Value(_scipys_siegelslopes, "scipy.stats.siegelslopes")


def _repeated_medians(y, x, method):
    deltax, deltay = x[:, None] - x, y[:, None] - y
    slopes, intercepts = [], []
    for j in range(len(x)):
        # the points of another abscissa, found in the traced differences (a decision on the
        # values a replay takes again; of the plain ones it kept the recorded call's pairs)
        others = np.nonzero(deltax[j])[0]
        slopes.append(np.median(deltay[j, others] / deltax[j, others]))
        if method == "separate":
            intercepts.append(np.median((y * x[j] - y[j] * x)[others] / deltax[j, others]))
    slope = np.median(np.stack(slopes))
    intercept = np.median(np.stack(intercepts)) if method == "separate" \
        else np.median(y - slope * x)
    return slope, intercept


@stands_in_for(_stats_pythran.siegelslopes)
def _siegelslopes(y, x, method):
    slope, intercept = _siegelslopes_value(y, x, method)
    medians = _repeated_medians(y, x, method)
    return scipys_value(slope, medians[0]), scipys_value(intercept, medians[1])


# scipy.stats.weightedtau: SciPy's compiled weighted tau reads x and y through their orderings
# alone (the weigher weighs ranks): piecewise constant in them, its derivative zero wherever it
# has one. Its value SciPy's of the plain values, without derivative: a step a replay computes
# again (taken from the plain values here, a replay kept the recorded call's tau)

from scipy.stats import _stats as _compiled_stats  # noqa: E402


def _scipys_weightedrankedtau(x, y, rank, weigher, additive):
    return np.asarray(_compiled_stats._weightedrankedtau(x, y, rank, weigher, additive))


_weightedrankedtau_value = Value(_scipys_weightedrankedtau, "scipy.stats.weightedtau")


@stands_in_for(_compiled_stats._weightedrankedtau)
def _weightedrankedtau(x, y, rank, weigher, additive):
    return _weightedrankedtau_value(x, y, rank, weigher, additive)
