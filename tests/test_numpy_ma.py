"""numpy.ma of differentiated values (``rules.masked``): masked arrays made inside the
differentiated function from traced data. Each program's result is compared with NumPy's own
masked array bit for bit, the data under the mask and the mask too; its gradient is checked
against finite differences in both modes and under both policies (the caller's arrays bit for
bit by the checker); replays give the traced values on inputs whose masks differ; what is not
followed is refused with what to write instead.
"""

import warnings

import numpy as np
import pytest
import scipy.stats

import mutad
from cases import replays_as_traced
from mutad import errors

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 5))
X[0, 0], X[2, 3] = 2.5, 1.7  # above the thresholds below, by a margin finite differences keep
M = np.zeros((4, 5), bool)
M[1, 2] = M[3, 0] = True
M[:, 4] = True  # a column masked whole
WEIGHTS = RNG.standard_normal(20)


def masked(x):
    return np.ma.masked_array(x, mask=M)


PROGRAMS = {
    "mean": lambda x: masked(x).mean(),
    "sum": lambda x: masked(x).sum(),
    "sum(axis=0)": lambda x: masked(x).sum(axis=0),
    "mean(axis=0), a column masked whole": lambda x: masked(x).mean(axis=0),
    "mean(axis=1, keepdims)": lambda x: masked(x).mean(axis=1, keepdims=True),
    "var": lambda x: masked(x).var(),
    "var(axis=1)": lambda x: masked(x).var(axis=1),
    "std(axis=0, ddof=1)": lambda x: masked(x).std(axis=0, ddof=1),
    "no mask: mean(axis=0)": lambda x: np.ma.masked_array(x).mean(axis=0),
    "no mask: var": lambda x: np.ma.array(x).var(),
    "masked_where ** 2": lambda x: np.ma.masked_where(x > 1, x) ** 2,
    "masked_where ** 0.5": lambda x: np.ma.masked_where(x > 1.5, x) ** 0.5,
    "standardized": lambda x: (lambda m: (m - m.mean()) / m.std())(np.ma.masked_where(x > 1, x)),
    "masked_invalid of log": lambda x: np.ma.masked_invalid(np.log(np.abs(x) - 0.3)),
    "division by zero": lambda x: masked(x) / (x - x[0, 1]),
    "1 / m": lambda x: 1.0 / np.ma.masked_where(x > 1, x),
    "np.exp(m)": lambda x: np.exp(masked(x)),
    "np.log(m), its domain": lambda x: np.log(masked(x)),
    "np.ma.log": lambda x: np.ma.log(masked(x)),
    "np.ma.sqrt": lambda x: np.ma.sqrt(np.ma.masked_where(x > 2, x)),
    "filled(0.5)": lambda x: masked(x).filled(0.5),
    "filled()": lambda x: masked(x).filled(),
    "compressed": lambda x: masked(x).compressed(),
    "np.ma.sum": lambda x: np.ma.sum(masked(x), axis=0),
    "np.sum": lambda x: np.sum(masked(x), axis=1),
    "np.mean": lambda x: np.mean(masked(x)),
    "abs(-m)": lambda x: abs(-masked(x)),
    "2 - 3 m": lambda x: 2.0 - masked(x) * 3.0,
    "m * x": lambda x: masked(x) * x,
    "x * m": lambda x: x * masked(x),
    "x[0] + m": lambda x: x[0] + masked(x),
    "masked_less": lambda x: np.ma.masked_less(x, -0.5) * 2,
    "masked_outside": lambda x: np.ma.masked_outside(x, -1, 1) + 1,
    "masked_greater_equal": lambda x: np.ma.masked_greater_equal(x, 0.3).sum(axis=1),
    "np.ma.mean of masked_invalid": lambda x: np.ma.mean(np.ma.masked_invalid(np.sqrt(x)),
                                                         axis=0),
    "plain masked array + m": lambda x: np.ma.masked_array(np.ones((4, 5)), mask=M[::-1])
    + masked(x),
    "np.ma.hypot": lambda x: np.ma.hypot(masked(x), x),
    "fill_value": lambda x: np.ma.array(x, mask=M, fill_value=-7.0).filled(),
    "mask=False": lambda x: np.ma.masked_array(x, mask=False).sum(axis=0),
    "a flat mask": lambda x: np.ma.masked_array(x, mask=M.ravel()).mean(axis=0),
    "copy=True": lambda x: np.ma.masked_array(x, mask=M, copy=True).std(),
    "np.ma.power": lambda x: np.ma.power(masked(x), 3),
    "np.ma.divide": lambda x: np.ma.divide(x, np.ma.masked_array(x - x[0, 1], mask=M)),
    "np.ma.median, an even count": lambda x: np.ma.median(masked(x)),
    "np.ma.median, an odd count": lambda x: np.ma.median(np.ma.masked_where(x > 1.5, x)),
    "np.ma.median, no mask": lambda x: np.ma.median(np.ma.masked_array(x)) * x,
    "np.ma.median of an array, overwrite_input": lambda x: _median_sorting(x * 1.0),
}


def _median_sorting(w):
    """np.ma.median of an array without a mask is np.median's, which overwrite_input lets
    sort the array in place: the array read after is the sorted one, as NumPy's is."""
    return np.ma.median(w, overwrite_input=True) * w


def numpys(result):
    """What NumPy's masked result holds: the data's bytes and the mask's, or the masked
    constant."""
    if result is np.ma.masked:
        return "masked"
    if isinstance(result, np.ma.MaskedArray):
        return (np.ma.getdata(result).tobytes(), np.ma.getmaskarray(result).tobytes(),
                result.shape)
    return np.asarray(result).tobytes()


def loss_of(program, seen=None):
    """A weighted sum of the program's data, the masked elements' too; ``seen`` gets what the
    differentiated call held (``numpys``)."""
    def loss(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = program(x)
        if type(result).__name__ == "Masked":
            if seen is not None:
                seen["result"] = (np.asarray(mutad.stop_gradient(result.data)).tobytes(),
                                  np.broadcast_to(result.mask, result.shape).tobytes(),
                                  result.shape)
            data = result.data
        elif isinstance(result, np.ma.MaskedArray):  # NumPy's own, at finite differences
            data = result.data
        else:
            if seen is not None:
                seen["result"] = numpys(mutad.stop_gradient(result))
            data = result
        return np.sum(np.ravel(data) * WEIGHTS[:np.size(data)])
    return loss


@pytest.mark.parametrize("name", PROGRAMS)
def test_masked_arrays_give_numpys_values_and_their_derivative(name):
    """Regression: np.ma of a traced array converted it (ConversionError)."""
    program = PROGRAMS[name]
    warnings.simplefilter("ignore", RuntimeWarning)  # np.ma's divisions by 0, in the gradient too
    expected = numpys(program(X.copy()))
    seen = {}
    x = X.copy()
    value, _ = mutad.value_and_gradient(loss_of(program, seen), x)
    assert seen["result"] == expected
    assert x.tobytes() == X.tobytes()
    assert np.asarray(value).tobytes() == np.asarray(loss_of(program)(X.copy())).tobytes()
    if "invalid" not in name and "log" not in name:  # (NaN under the mask: no differences)
        for policy in ("restore", "checkpoint"):
            mutad.check_grads(loss_of(program), X.copy(), policy=policy, modes=("rev", "fwd"))


def test_masked_statistics_to_the_second_order():
    def f(x):
        m = np.ma.masked_where(x > 1.0, x)
        return np.sum(((m - m.mean()) / m.std()).filled(0.0) ** 2) + m.var(axis=0).sum()

    mutad.check_grads(f, X.copy(), order=2, modes=("rev", "fwd"))


def test_masked_programs_replay_as_they_trace_whatever_their_masks():
    def f(x):
        m = np.ma.masked_where(x > 1.0, x)
        z = (m - m.mean()) / m.std()
        return np.sum(z.filled(0.0) ** 2) + m.var(axis=0).sum() + x[0, 0] * m.count()

    def g(x):
        m = np.ma.masked_invalid(np.log(x))
        return m.sum() + x[0, 0] * np.ma.mean(m)

    calls = [(RNG.standard_normal((4, 5)),) for _ in range(4)]  # each masks other elements
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        replays_as_traced(f, calls)
        replays_as_traced(g, calls)


def test_the_attributes_numpy_gives():
    def f(x):
        m = np.ma.masked_array(x, mask=M, fill_value=3.0)
        assert m.shape == (4, 5) and m.ndim == 2 and m.size == 20 and m.dtype == np.float64
        assert m.fill_value == 3.0 and np.array_equal(m.mask, M) and m.count() == 14
        assert np.array_equal(m.count(axis=0), [3, 4, 3, 4, 0])
        assert np.ma.masked_array(x).mask is np.False_  # nomask, as NumPy's
        assert np.ma.getmask(np.ma.masked_array(x)) is np.ma.nomask
        assert np.array_equal(np.ma.getmaskarray(np.ma.masked_array(x)), np.zeros((4, 5), bool))
        assert m.data is x  # np.ma's data of an array is that array's memory
        assert isinstance(m, np.ma.MaskedArray) and np.ma.isMaskedArray(m)  # code branches on it
        m.fill_value = -1.0
        assert m.filled()[1, 2] == -1.0
        return m.sum()

    mutad.gradient(f, X.copy())


def test_a_scalar_that_is_masked_is_the_masked_constant():
    def f(x):
        assert np.ma.masked_array(x, mask=True).sum() is np.ma.masked
        assert np.ma.masked_array(x, mask=True).mean() is np.ma.masked
        return x.sum()

    mutad.gradient(f, X.copy())


def scaled_in_place(x):
    m = np.ma.masked_less(x, 0.0)  # a copy: its data is the masked array's own
    m *= 2.0
    m += x
    m -= np.ma.masked_less(x, -0.5) * 0.5  # masked within m's mask: no new element masked
    m /= x * x + 0.5
    return (m ** 2).sum() + m.filled(0.0).ravel() @ x.ravel()


def updated_over_its_array(x):
    y = x * 1.0
    m = np.ma.masked_array(y)  # over y, without a mask: NumPy updates y's memory
    m *= 3.0
    m += np.ma.masked_greater(x, 1.0)  # a new mask
    m /= np.arange(1.0, 21.0).reshape(4, 5)
    return (y ** 2).sum() + m.sum()


def divided_without_a_mask(x):
    m = np.ma.masked_array(x * 1.0)
    m /= 2.0  # no divisor masked: still no mask, as NumPy's
    assert m.mask is np.ma.nomask
    return m.sum()


@pytest.mark.parametrize("program", [scaled_in_place, updated_over_its_array,
                                     divided_without_a_mask])
def test_in_place_arithmetic_of_a_masked_array(program):
    """m += v, -=, *=, /= of masked arrays of differentiated values were refused: they update
    the data in place as MaskedArray's do (the array the masked array was made over too),
    NumPy's values bit for bit, in both modes and replayed."""
    x = X.copy()
    value, _ = mutad.value_and_gradient(program, x)
    assert np.asarray(value).tobytes() == np.asarray(program(X.copy())).tobytes()
    assert x.tobytes() == X.tobytes()
    mutad.check_grads(program, X.copy(), modes=("rev", "fwd"))
    replays_as_traced(program, [(X * s,) for s in (1.0, -0.7, 1.3)])


@pytest.mark.parametrize("action, words", [
    (lambda m: m.dot(m), ["MaskedArray.dot", "m.filled("]),
    (lambda m: m.cumsum(out=np.ma.zeros(20)), ["MaskedArray.cumsum(out=...)"]),
    (lambda m: np.median(m), ["np.median"]),
    (lambda m: np.ma.median(m, axis=(0, 1)), ["np.ma.median", "several axes", "m.filled("]),
    (lambda m: np.ma.median(m, overwrite_input=True), ["overwrite_input", "in place"]),
    (lambda m: np.asarray(m).sum(), ["conversion"]),
    (lambda m: m.__iadd__(np.ma.masked_array(np.ones((4, 5)), mask=~M)), ["masks more"]),
    (lambda m: m.__ipow__(2.0), ["in-place power"]),
    (lambda m: np.add.reduce(m), ["np.add.reduce"]),
    (lambda m: m.torecords(), ["MaskedArray.torecords"]),
    (lambda m: setattr(m, "mask", [True, False]), ["Setting the mask"]),
])
def test_what_is_not_followed_is_refused(action, words):
    x = X.copy()
    with pytest.raises(errors.UnsupportedOperationError) as caught:
        mutad.gradient(lambda x: action(np.ma.masked_array(x, mask=M)), x)
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert x.tobytes() == X.tobytes()


def test_masked_arrays_outside_a_differentiation_are_numpys():
    """The stand-ins route only calls with differentiated values: plain masked arrays, and
    their subclasses, are NumPy's own (also after a differentiation ran)."""
    mutad.gradient(lambda x: masked(x).sum(), X.copy())
    m = np.ma.masked_array(X, mask=M)
    assert type(m) is np.ma.MaskedArray and np.ma.masked_less(X, 0).count() == np.sum(X >= 0)

    class Sub(np.ma.MaskedArray):
        pass

    assert type(Sub(X)) is Sub
    with pytest.raises(errors.UnsupportedOperationError, match="subclass"):
        mutad.gradient(lambda x: Sub(x).sum(), X.copy())


# np.ma's functions compute under np.errstate(divide="ignore", invalid="ignore") of their own
# (a masked log at the masked zeros and negatives): each derivative is computed under the
# handling its operation ran under, so the caller's np.errstate(all="raise") raises where
# NumPy raises, not in the gradient of what NumPy computed without a word
UNDER_ITS_OWN_HANDLING = {
    "log, masked zero and negative": lambda x: np.ma.log(
        np.ma.masked_array(x, mask=[0, 1, 0, 1])).sum(),
    "log, masked by the domain": lambda x: np.ma.log(x).sum(),
    "log10": lambda x: np.ma.log10(x).sum(),
    "divide by a masked zero": lambda x: (1.0 / np.ma.masked_equal(x, 0.0)).sum(),
    "ma.divide": lambda x: np.ma.divide(x, x - 1.0).sum(),
    "std of one element": lambda x: np.ma.masked_array(x, mask=[0, 1, 1, 1]).std(),
    "a user's np.errstate block": lambda x: _ignored_log(x),
}


def _ignored_log(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x)
    return np.where(x > 0, y, 0.0).sum()


@pytest.mark.parametrize("name", UNDER_ITS_OWN_HANDLING)
def test_a_derivative_is_computed_under_its_operations_error_handling(name):
    f = UNDER_ITS_OWN_HANDLING[name]
    x = np.array([1.0, 0.0, 3.0, -0.5])
    caller = x.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor a warning where NumPy computed without one
        value, (grad,) = mutad.value_and_gradient(f, x)
    with np.errstate(all="raise"):
        assert f(x.copy()) == value  # NumPy computes
        raised_value, (raised_grad,) = mutad.value_and_gradient(f, x)
        _, tangent = mutad.jvp(f, (x,), (np.ones(4),))
    assert raised_value == value and np.array_equal(raised_grad, grad, equal_nan=True)
    assert x.tobytes() == caller.tobytes()
    assert np.isclose(tangent, grad.sum(), rtol=1e-14, atol=0)


# ----------------------------------------------------------------------------------------------
# Indexing, writes, comparisons and np.ma.average of masked arrays of differentiated values:
# NumPy's values bit for bit, masks shared where NumPy's are (a view's, masked_where's with
# copy=False), checked as test_scipy_stops.check does

def _indexed_and_written(x):
    m = np.ma.masked_array(x * 2.0, mask=[0, 1, 0, 0, 1, 0])
    m[m > 0] = m[m > 0] ** 2          # a masked index and a masked value
    m[0] = 3.0 * m[2]                 # an element, unmasking it
    m[5] = np.ma.masked
    total = m.sum()
    v = m[1:4]                        # a view: the data and the mask shared
    v[0] = x[3]
    v[2] = np.ma.masked
    return total + m.sum() * 2 + v.filled(0.5).sum() + m.data.sum()


def _mask_rewritten(x):
    m = np.ma.masked_invalid(np.log(x + 0.5))
    s = m.filled(0.0).sum()
    m[m.mask] = 0.0                   # the mask as the index: unmasked by the write
    m.mask[1] = True
    return s + (m ** 2).sum() + m.count()


def _compared(x):
    m = np.ma.masked_greater(x, 1.0)
    big = (m > 0.2) & ~(m == x[0])
    return m[big].sum() + np.sum(m.filled(0.0)[big.filled(False)]) + (m != 0.3).count()


def _averages(x):
    m = np.ma.masked_array(x, mask=[0, 0, 1, 0, 0, 1])
    r = np.ma.asarray(m)
    return (np.ma.average(m) + np.ma.average(m, weights=np.arange(1.0, 7.0))
            + np.ma.average(r, weights=x ** 2) * 0.5)


def _masked_where_shares(x):
    m = np.ma.masked_array(x, mask=[0, 1, 0, 0, 0, 0])
    w = np.ma.masked_where(x > 0.5, m, copy=False)   # writes m's mask too, as NumPy does
    n = np.ma.masked_array(x * 3.0)
    u = np.ma.masked_where(n < 0, n, copy=False)     # gives n its mask
    return m.filled(0.0).sum() + 10 * w.filled(0.0).sum() + n.sum() + u.sum()


@pytest.mark.parametrize("program", [_indexed_and_written, _mask_rewritten, _compared,
                                     _averages, _masked_where_shares])
def test_masked_arrays_indexed_written_compared(program):
    from test_scipy_stops import check
    check(program, np.array([0.3, -0.7, 1.1, 0.45, 0.9, -0.2]))


def _mask_set(x):
    m = np.ma.masked_array(x, mask=[0, 1, 0, 0, 0, 0])
    v = m[2:]
    s = m.sum()
    m.mask = x < 0            # into the mask v shares
    t = m.sum() + v.sum()
    m.mask |= x > 1.0
    n = np.ma.masked_array(x * 2.0)
    n.mask = False
    n.mask = np.ma.masked
    return s + t + m.sum() * 3 + v.filled(0.25).sum() + n.filled(0.5).sum()


def test_a_masked_arrays_mask_set():
    from test_scipy_stops import check
    check(_mask_set, np.array([0.3, -0.7, 1.1, 0.45, 0.9, -0.2]))


# SciPy's masked statistics, which np.ma's indexing, writes, ravel, reshape and argsort reach
# (trimr's a[idx[:k]] = masked)

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("program", [
    lambda x: scipy.stats.mstats.trimmed_std(x, (0.1, 0.1)),
    lambda x: scipy.stats.mstats.trimmed_mean(x, (0.2, 0.1)),
    lambda x: (scipy.stats.mstats.trimboth(x, 0.1) ** 2).sum(),
    lambda x: scipy.stats.mstats.trimtail(x, 0.2).sum(),
])
def test_masked_statistics(program):
    from test_scipy_stops import check
    check(program, np.array([0.3, -0.7, 1.1, 0.45, 0.9, -0.2, 0.05, 1.7, -1.2, 0.6]))


def _copied(x):
    m = np.ma.masked_array(x, mask=[0, 1, 0, 0, 0, 0])
    c = m.copy()
    c[0] = np.ma.masked      # neither m's mask
    c[2] = 5.0 * x[3]        # nor m's data
    return m.sum() * 2 + c.sum() + scipy.stats.mstats.variation(np.ma.masked_less(x, 0.0))


def test_a_masked_arrays_copy():
    from test_scipy_stops import check
    check(_copied, np.array([0.3, -0.7, 1.1, 0.45, 0.9, -0.2]))
