"""Answers that were silently wrong: each test fails without its fix."""

import warnings

import numpy as np
import pytest

import mutad


# ----------------------------------------------------------------------------------------------
# jvp rounded a float tangent wider than its primal to the primal's precision before the pass (a
# float64 direction of a float32 argument: a derivative along another direction than the one
# given, 1 + 1e-10 read as 1). It refuses it, as JAX does; a narrower tangent is widened exactly,
# and a Python number is weak, as in NumPy's promotion.


@pytest.mark.parametrize("primal", [np.array([1.0, 2.0], np.float32), np.float32(3.0),
                                    np.array([1.0, 2.0], np.float16),
                                    np.array([1.0 + 1j], np.complex64)])
def test_jvp_refuses_a_tangent_wider_than_its_primal(primal):
    tangent = np.ones(np.shape(primal), np.complex128 if np.iscomplexobj(primal) else np.float64)
    with pytest.raises(mutad.MutadError, match="tangent was given for a .* primal"):
        mutad.jvp(lambda x: x * x, (primal,), (tangent,))
    with pytest.raises(mutad.MutadError, match="tangent was given for a .* primal"):
        mutad.hvp(lambda x: (x * x * x).sum(), (primal,), (tangent,))


def test_jvp_takes_narrower_and_weak_tangents():
    x = np.array([1.0, 2.0])
    y, dy = mutad.jvp(lambda x: x * x, (x,), (np.array([1.0, 0.5], np.float32),))
    assert dy.dtype == np.float64 and dy.tolist() == [2.0, 2.0]
    y, dy = mutad.jvp(lambda x: x * x, (np.float32(3.0),), (1.0,))
    assert dy == np.float32(6.0) and type(dy) is np.float32
    y, dy = mutad.jvp(lambda x: x * x, (np.array([3.0], np.float32),), (np.array([1]),))
    assert dy.dtype == np.float32 and dy.tolist() == [6.0]


def test_check_grads_of_single_precision_in_forward_mode():
    mutad.check_grads(lambda x: np.sin(x) * x, np.array([0.5, 1.5], np.float32))


def test_back_refuses_a_cotangent_wider_than_its_output():
    y, back = mutad.pullback(lambda x: x * x, np.array([1.0, 2.0], np.float32))
    with pytest.raises(mutad.MutadError, match="float64 cotangent was given for a float32"):
        back(np.array([1.0 + 1e-10, 1.0]))
    y, back = mutad.pullback(lambda x: x * x, np.array([1.0, 2.0], np.float32))
    assert back(np.array([1.0, 0.5], np.float32))[0].tolist() == [2.0, 2.0]
    y, back = mutad.pullback(lambda x: x * x, np.array([1.0, 2.0]))
    assert back(np.array([1.0, 0.5], np.float32))[0].tolist() == [2.0, 2.0]


# ----------------------------------------------------------------------------------------------
# A rule that silences the warnings of what its reverse pass computes (np.var's and np.std's
# centring, under warnings.catch_warnings) was silenced on the traced call only: a replay issues
# its reverse pass's warnings once the pass is over, outside the rule's filters, and so warned
# "invalid value encountered in subtract, in the gradient of np.std" where tracing did not.


def _warnings_of(function, x):
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        function(np.array(x))
    return [str(w.message) for w in shown]


@pytest.mark.parametrize("reduction", [np.std, np.var, lambda x: np.std(x, ddof=1)])
@pytest.mark.parametrize("first", [[-np.inf, 1.0], [3.0, 2.0]])
def test_a_replay_warns_as_tracing_where_a_rule_silenced_its_gradient(reduction, first):
    def f(x):
        return reduction(x)

    replaying = mutad.value_and_grad(f, replay=True)
    for x in [first, [-np.inf, 1.0], [-np.inf, 1.0], [3.0, 2.0], [np.inf, 1.0], [np.inf, 1.0]]:
        with np.errstate(all="warn"):
            assert _warnings_of(replaying, x) == _warnings_of(mutad.value_and_grad(f), x)


def test_a_replay_still_warns_under_the_callers_filters_as_they_change():
    f = lambda x: (np.log(x) * x).sum()  # noqa: E731  (the gradient warns: log(0) * 0)
    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replaying(x)
    for _ in range(3):
        with np.errstate(all="warn"):
            assert _warnings_of(replaying, x) == _warnings_of(mutad.value_and_grad(f), x)


# ----------------------------------------------------------------------------------------------
# SciPy's expm and sqrtm of a matrix holding an infinity or a NaN give NaNs; their gradients
# raised "array must not contain infs or NaNs" (expm_frechet's and solve_sylvester's check of
# their input) where the derivative of those NaNs is NaNs.


@pytest.mark.parametrize("function", ["expm", "sqrtm"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_matrix_functions_of_non_finite_matrices_have_nan_gradients(function, bad):
    import scipy.linalg

    def f(x):
        m = np.array([[x[0], 0.5], [0.25, x[1]]])
        return getattr(scipy.linalg, function)(m).real.sum()

    replaying = mutad.value_and_grad(f, replay=True)
    for v in [[3.0, 2.0], [bad, 2.0], [bad, 2.0], [3.0, 2.0]]:
        x = np.array(v)
        expected = f(x.copy())
        for value, grad in [mutad.value_and_grad(f)(x), replaying(x)]:
            assert np.array_equal(value, expected, equal_nan=True)
            assert np.isnan(grad).all() == np.isnan(expected)
        y, dy = mutad.jvp(f, (x,), (np.ones(2),))
        assert np.isnan(dy) == np.isnan(expected)


# ----------------------------------------------------------------------------------------------
# scipy.stats' reductions of a sample holding a NaN (nan_policy="propagate") return NumPy's
# np.float64(nan); mutad's returned a 0-d array (np.where's), another type than SciPy's.


@pytest.mark.parametrize("name", ["skew", "kurtosis", "sem", "variation", "gmean", "tvar",
                                  "entropy"])
def test_scipy_stats_of_a_nan_sample_is_numpys_number(name):
    import scipy.stats

    def f(x):
        return getattr(scipy.stats, name)(np.abs(x))

    replaying = mutad.value_and_grad(f, replay=True)
    for v in [[np.nan, 1.0, 2.0], [3.0, 1.0, 2.0], [np.nan, 1.0, 2.0], [np.nan, 1.0, 2.0]]:
        expected = f(np.array(v))
        for value, _ in [mutad.value_and_grad(f)(np.array(v)), replaying(np.array(v))]:
            assert type(value) is type(expected)
            assert np.array_equal(value, expected, equal_nan=True)


# ----------------------------------------------------------------------------------------------
# NumPy words the floating-point event of an operator on two NumPy scalars as its scalar math
# does ("invalid value encountered in scalar divide"), also where NumPy's own code runs it
# (np.average's sum / scale); mutad said "in divide" there, which a filter on NumPy's message
# does not match.


def _forward_warnings(function, x):
    return [m for m in _warnings_of(function, x) if ", in the gradient of " not in m]


def test_an_operator_on_numbers_inside_numpy_warns_as_numpy():
    def f(x):
        return np.average(x, weights=np.abs(x))

    replaying = mutad.value_and_grad(f, replay=True)
    for v in [[1.0, 2.0], [-np.inf, 1.0], [-np.inf, 1.0], [np.inf, 1.0], [1.0, 2.0]]:
        with np.errstate(all="warn"):
            expected = _warnings_of(f, v)
            assert _forward_warnings(mutad.value_and_grad(f), v) == expected
            assert _forward_warnings(replaying, v) == expected
    assert expected == [] and _warnings_of(f, [np.inf, 1.0]) == [
        "invalid value encountered in scalar divide"]


# ----------------------------------------------------------------------------------------------
# scipy.stats.skew and kurtosis call a sample constant where its second moment is below the
# rounding of its mean squared, in the moments' precision, under np.errstate(all="ignore").
# mutad's took float64's rounding for a float32 sample (a number where SciPy gives NaN) and
# warned of the overflow of a huge mean's square, which SciPy does not.


@pytest.mark.parametrize("name", ["skew", "kurtosis"])
def test_skew_and_kurtosis_of_a_nearly_constant_float32_sample(name):
    import scipy.stats

    f = getattr(scipy.stats, name)
    x = np.array([1.0, 1.0, 1.0 + 2.0**-23], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (SciPy's precision loss warning)
        expected = f(x)
        for value, _ in [mutad.value_and_grad(f)(x), mutad.value_and_grad(f, replay=True)(x)]:
            assert type(value) is type(expected)
            assert np.array_equal(value, expected, equal_nan=True)


@pytest.mark.parametrize("name", ["skew", "kurtosis"])
def test_skew_and_kurtosis_of_a_huge_mean_warn_as_scipy(name):
    import scipy.stats

    f = getattr(scipy.stats, name)
    x = [-1.0, 0.0, 1e308]
    with np.errstate(all="warn"):
        expected = _warnings_of(f, x)
        assert _forward_warnings(mutad.value_and_grad(f), x) == expected
        assert [m for m in _warnings_of(lambda x: mutad.jvp(f, (x,), (np.ones(3),)), x)
                if ", in a tangent" not in m] == expected


# ----------------------------------------------------------------------------------------------
# SciPy's default tolerances scale with the precision its LAPACK computes in: float32's eps for
# a float32 input. scipy.stats.zscore and zmap took float64's (a number where SciPy gives NaN
# for a nearly constant sample), and scipy.linalg.pinv's derivative took float64's cutoff, so
# a singular value SciPy's value drops was kept by its gradient (-1e14 where it is 0).


@pytest.mark.parametrize("f", [lambda x: __import__("scipy.stats").stats.zscore(x).sum(),
                               lambda x: __import__("scipy.stats").stats.zmap(x, x).sum()])
def test_zscore_of_a_nearly_constant_float32_sample(f):
    x = np.array([1.0, 1.0, 1.0 + 2.0**-23], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = f(x)
        for value, _ in [mutad.value_and_grad(f)(x), mutad.value_and_grad(f, replay=True)(x)]:
            assert np.array_equal(value, expected, equal_nan=True)


def test_scipy_pinv_of_float32_differentiates_the_rank_scipy_keeps():
    import scipy.linalg

    a = np.diag(np.array([1.0, 1e-7], np.float32))
    value, grad = mutad.value_and_grad(lambda a: scipy.linalg.pinv(a).sum())(a)
    assert value == scipy.linalg.pinv(a).sum() == 1.0
    # the derivative at the matrix of rank 1 SciPy's float32 cutoff leaves
    reference = mutad.gradient(lambda a: np.linalg.pinv(a).sum(), np.diag([1.0, 0.0]))[0]
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, reference, rtol=1e-6, atol=1e-6)
    y, dy = mutad.jvp(lambda a: scipy.linalg.pinv(a).sum(), (a,), (np.eye(2, dtype=np.float32),))
    assert dy == np.float32(np.sum(reference * np.eye(2)))


# ----------------------------------------------------------------------------------------------
# scipy.stats.pearsonr computes in its samples' common float type: mutad's centred a float32
# sample in float32 beside a float64 one (0.77 where SciPy gives 0.94). np.nanvar of float32 or
# float16 values returned a 0-d array where NumPy returns its number.


@pytest.mark.parametrize("x, y", [
    (np.array([1.0, 1.0, 1.0000001], np.float32), np.array([1.0, 2.0, 4.0])),
    (np.array([3.0, 2.0, 1.0], np.float16), np.array([1.0, 2.0, 4.0], np.float32)),
    (np.array([3.0, 2.0, 1.5], np.float32), np.array([1, 2, 4]))])
def test_pearsonr_in_the_common_float_type(x, y):
    import scipy.stats

    for k in (0, 1):
        def f(x):
            return scipy.stats.pearsonr(x, y)[k]

        expected = f(x)
        for value, _ in [mutad.value_and_grad(f)(x), mutad.value_and_grad(f, replay=True)(x)]:
            assert type(value) is type(expected) and value == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("f", [np.nanvar, lambda x: np.nanvar(x, ddof=1)])
def test_nanvar_of_single_precision_is_numpys_number(dtype, f):
    x = np.array([3.0, np.nan, 1.0, 2.0], dtype)
    expected = f(x)
    for value, _ in [mutad.value_and_grad(f)(x), mutad.value_and_grad(f, replay=True)(x)]:
        assert type(value) is type(expected) and value == expected


# ----------------------------------------------------------------------------------------------
# The QR factors of a matrix holding an inf were refused as "rank-deficient": R's diagonal was
# scaled by its largest entry, an inf, which made every finite entry zero within rounding. Its
# factors hold NaNs, and so do their derivatives.


@pytest.mark.parametrize("factor", [lambda a: np.linalg.qr(a),
                                    lambda a: __import__("scipy.linalg").linalg.qr(
                                        a, check_finite=False)])
@pytest.mark.parametrize("where", [(0, 0), (2, 2)])
def test_qr_of_a_matrix_holding_an_inf_has_nan_derivatives(factor, where):
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    a[where] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for output in (0, 1):
            f = lambda a: factor(a)[output].sum()  # noqa: E731
            assert np.all(np.isnan(mutad.grad(f)(a)))
            assert np.isnan(mutad.jvp(f, (a,), (np.ones((3, 3)),))[1])


def test_qr_of_a_rank_deficient_matrix_holding_an_inf_is_still_refused():
    a = np.array([[np.inf, 2.0, 2.0], [4.0, 5.0, 5.0], [7.0, 8.0, 8.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(mutad.MutadError, match="rank-deficient"):
            mutad.grad(lambda a: np.linalg.qr(a)[1].sum())(a)


# ----------------------------------------------------------------------------------------------
# A pseudo-inverse whose cutoff drops a singular value that is not zero within rounding
# (np.linalg.pinv(a, rcond=0.1), scipy.linalg.pinv(a, atol=...), np.linalg.lstsq(a, b, rcond=0.1))
# was differentiated as the pseudo-inverse of a matrix of the rank kept, whose derivative
# differs from a truncated one's (3% here, silently). It is refused, with the truncated SVD
# (which mutad differentiates) as the way to write it.
# np.linalg.lstsq's rule took pinv's default cutoff whatever its rcond, and scipy.linalg.lstsq
# of float32 was refused where SciPy's float32 cutoff and float64's found different ranks: both
# differentiate at the rank the solution was computed at.

_U = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 5)))[0]
_V = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3)))[0]
TRUNCATED = _U[:, :3] @ np.diag([3.0, 1.0, 0.05]) @ _V.T
WEIGHTS = np.random.default_rng(2).standard_normal((3, 5))


@pytest.mark.parametrize("f", [
    lambda a: (np.linalg.pinv(a, rcond=0.1) * WEIGHTS).sum(),
    lambda a: (np.linalg.pinv(a, rtol=0.1) * WEIGHTS).sum(),
    lambda a: (__import__("scipy.linalg").linalg.pinv(a, atol=0.1) * WEIGHTS).sum(),
    lambda a: np.linalg.lstsq(a, WEIGHTS[0, :], rcond=0.1)[0].sum(),
    lambda a: __import__("scipy.linalg").linalg.lstsq(a, WEIGHTS[0, :], cond=0.1)[0].sum()])
def test_a_pseudo_inverse_truncating_a_nonzero_singular_value_is_refused(f):
    a = TRUNCATED.copy()
    for differentiate in (lambda: mutad.grad(f)(a), lambda: mutad.jvp(f, (a,), (WEIGHTS.T,))):
        with pytest.raises(mutad.MutadError, match="drops singular values .*0.05"):
            differentiate()
    assert np.array_equal(a, TRUNCATED)


def test_the_truncated_svd_the_refusal_suggests_is_differentiated():
    def f(a):
        u, s, vt = np.linalg.svd(a, full_matrices=False)
        return ((vt[:2].T / s[:2]) @ u[:, :2].T * WEIGHTS).sum()

    mutad.check_grads(f, TRUNCATED)


@pytest.mark.parametrize("driver", [None, "gelsd", "gelsy", "gelss"])
def test_scipy_lstsq_of_float32_differentiates_at_scipys_rank(driver):
    import scipy.linalg

    a = np.array([[1.0, 0.0], [0.0, 1e-7], [0.0, 0.0]], np.float32)  # rank 1 at SciPy's cutoff
    b = np.array([1.0, 2.0, 3.0], np.float32)
    f = lambda a, b: scipy.linalg.lstsq(a, b, lapack_driver=driver)[0].sum()  # noqa: E731
    assert scipy.linalg.lstsq(a, b, lapack_driver=driver)[2] == 1
    value, (da, db) = mutad.value_and_gradient(f, a, b)
    assert value == f(a, b) and da.dtype == db.dtype == np.float32
    reference = mutad.gradient(lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0].sum(),
                               np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), b.astype(float))
    np.testing.assert_allclose(da, reference[0], atol=1e-6)
    np.testing.assert_allclose(db, reference[1], atol=1e-6)
    along = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 0.0]], np.float32)  # keeps the rank
    assert mutad.jvp(f, (a, b), (along, b))[1] == pytest.approx(
        np.sum(reference[0] * along) + np.sum(reference[1] * b), abs=1e-6)


def test_numpy_lstsq_differentiates_at_the_rank_of_its_rcond():
    a = np.array([[1.0, 0.0], [0.0, 1e-14], [0.0, 0.0]])  # rank 1 at rcond=1e-13, 2 at pinv's
    b = np.array([1.0, 2.0, 3.0])
    f = lambda a, b: np.linalg.lstsq(a, b, rcond=1e-13)[0].sum()  # noqa: E731
    assert np.linalg.lstsq(a, b, rcond=1e-13)[2] == 1
    da, db = mutad.gradient(f, a, b)
    reference = mutad.gradient(f, np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), b)
    np.testing.assert_allclose(da, reference[0], atol=1e-12)
    np.testing.assert_allclose(db, reference[1], atol=1e-12)


# ----------------------------------------------------------------------------------------------
# Inside f, np.geterr() showed mutad's own handling ({'divide': 'log', ...}) and np.geterrcall()
# its writer, so a program deciding on them differed from NumPy. f sees and sets NumPy's handling
# as it would without mutad (np.geterr, np.geterrcall, np.seterr's and np.seterrcall's old
# settings, np.errstate), traced, forward and replayed (keyed on the caller's callback too).
def reads(x):
    scale = 2.0 if np.geterr()["divide"] == "warn" else 1.0
    return x.sum() * scale * (7.0 if np.geterrcall() is not None else 1.0)


def sets(x):
    old = np.seterr(divide="ignore")
    (x / 0.0).sum()
    back = np.seterr(**old)
    previous = np.seterrcall(None)
    np.seterrcall(previous)
    same = back["divide"] == "ignore" and old["divide"] == "warn" and previous is None
    return x.sum() * (3.0 if same else 1.0)


def in_blocks(x):
    with np.errstate(divide="warn"):
        x / np.zeros(2)
    with np.errstate(divide="raise"):
        try:
            x / np.zeros(2)
            r = 1.0
        except FloatingPointError:
            r = 5.0
    seen = []
    with np.errstate(divide="call", call=lambda kind, flag: seen.append(kind)):
        x / np.zeros(2)
        called = np.geterrcall() is not None
    return x.sum() * r * len(seen) * called


@pytest.mark.parametrize("f, scale", [(reads, 2.0), (sets, 3.0), (in_blocks, 5.0)])
def test_f_sees_and_sets_numpys_handling(f, scale):
    x = np.ones(2)
    before = x.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = f(np.ones(2))
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        value, grad = mutad.value_and_grad(f)(x)
    assert value == expected == 2 * scale
    np.testing.assert_array_equal(grad, [scale, scale])
    assert x.tobytes() == before.tobytes()
    assert np.geterr()["divide"] == "warn" and np.geterrcall() is None
    if f is in_blocks:  # the warning f's errstate asked for, at f's line
        assert [str(w.message) for w in heard] == ["divide by zero encountered in divide"]
        assert heard[0].filename == __file__


def test_forward_sees_numpys_handling():
    x = np.ones(2)
    assert mutad.jvp(reads, (x,), (np.ones(2),)) == (4.0, 4.0)


def test_seterr_left_by_f_is_kept_as_numpy_keeps_it():
    def leaves(x):
        np.seterr(divide="ignore", over="raise")
        return x.sum()
    old = np.geterr()
    try:
        mutad.value_and_grad(leaves)(np.ones(2))
        assert np.geterr() == dict(old, divide="ignore", over="raise")
        assert np.geterrcall() is None
    finally:
        np.seterr(**old)


@pytest.mark.parametrize("f", [reads, sets, in_blocks])
def test_replay_follows_the_callers_handling(f):
    g = mutad.value_and_grad(f, replay=True)
    for modes, callback in [({}, None), ({}, None), ({"divide": "ignore"}, None), ({}, None),
                            ({"all": "raise"}, None), ({}, None), ({}, print), ({}, print),
                            ({}, None), ({}, None)]:
        old, old_callback = np.seterr(**modes), np.seterrcall(callback)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = f(np.ones(2))
                value, grad = g(np.ones(2))
        finally:
            np.seterr(**old)
            np.seterrcall(old_callback)
        assert value == expected
        np.testing.assert_array_equal(grad, [expected / 2] * 2)


def test_f_logging_to_its_own_object_is_logged_there():
    class Log:
        def __init__(self):
            self.said = []

        def write(self, text):
            self.said.append(text)

    def f(x):
        log = Log()
        with np.errstate(all="log", call=log):
            x / np.zeros(2)
            mine = np.geterrcall() is log and np.geterr()["invalid"] == "log"
        np.seterrcall(log)
        with np.errstate(divide="log"):
            x / np.zeros(2)
        np.seterrcall(None)
        return x.sum() * len(log.said) * mine

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = mutad.value_and_grad(f)(np.ones(2))
        assert value == f(np.ones(2)) == 4.0
    np.testing.assert_array_equal(grad, [2.0, 2.0])


# ----------------------------------------------------------------------------------------------
# The refusal of the QR factors of a stack holding a rank-deficient matrix numbered the zero
# entries of R's diagonal over the flattened stack (entry 4 for the second matrix's entry 1): it
# names the matrix and its entry.


def test_qr_refusal_of_a_stack_names_the_matrix_and_the_entry():
    a = np.stack([np.eye(3), np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])])
    with pytest.raises(mutad.MutadError, match=r"diagonal entry 1 of matrix 1 zero"):
        mutad.grad(lambda a: np.linalg.qr(a)[1].sum())(a)
    with pytest.raises(mutad.MutadError, match=r"diagonal entries \[1\] zero"):
        mutad.grad(lambda a: np.linalg.qr(a)[1].sum())(a[1])


def test_handling_left_by_an_inner_differentiation_is_still_heard_by_the_outer_one():
    def inner(x):
        np.seterr(over="raise")
        return (x * x).sum()

    def outer(x):
        mutad.grad(inner)(x)
        modes = np.geterr()
        np.seterr(over="warn")
        x / np.zeros(2)  # warned at this line, as NumPy's run warns
        return x.sum() * (2.0 if modes["over"] == "raise" and modes["divide"] == "warn" else 1.0)

    old = np.geterr()
    try:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            value, grad = mutad.value_and_grad(outer)(np.ones(2))
    finally:
        np.seterr(**old)
    assert value == 4.0
    np.testing.assert_array_equal(grad, [2.0, 2.0])
    assert [(str(w.message), w.filename) for w in heard] == [
        ("divide by zero encountered in divide", __file__)]
