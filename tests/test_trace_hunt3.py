"""Wrong answers found by writing programs as scientists write them, each checked against NumPy's
and SciPy's values and exact derivatives (mpmath); every one failed before its fix."""

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import mutad

# ----------------------------------------------------------------------------------------------
# scipy.special.expn: E_n' = -E_(n-1), but SciPy has no E_-1 (its expn(-1, x) is NaN), so the
# derivative of E_0 = e^-x / x, and the second derivative of E_1, were NaN.

X = np.array([0.2, 0.7, 1.3, 2.0, 5.5])


def _exact(n, x, order):
    return np.array([float(mpmath.diff(lambda t: mpmath.expint(n, t), float(v), order))
                     for v in x])


@pytest.mark.filterwarnings("ignore:floating point number truncated")  # SciPy's, for n = 0.6
@pytest.mark.parametrize("n", [0, 0.6, 1, 2])
def test_expn_first_and_second_derivatives_at_every_order_n(n):
    x = X.copy()
    g = mutad.gradient(lambda x: np.sum(sp.expn(n, x)), x)[0]
    h = mutad.hessian(lambda x: np.sum(sp.expn(n, x)), x)
    _, t = mutad.jvp(lambda x: sp.expn(n, x), (x,), (np.ones_like(x),))
    assert np.array_equal(x, X)
    m = int(n)  # SciPy truncates the order to an integer
    assert np.allclose(g, _exact(m, X, 1), rtol=1e-12)
    assert np.allclose(t, g, rtol=1e-14)
    assert np.allclose(np.diag(h), _exact(m, X, 2), rtol=1e-9)
    assert np.all(h[~np.eye(len(X), dtype=bool)] == 0.0)


# ----------------------------------------------------------------------------------------------
# A memory budget (memory=0: the writes that would save what they overwrite are rebuilt from
# snapshots instead) changes no bit of the gradient. A write the rebuilding could not take (it
# read an F-ordered temporary: np.tanh of a transposed array) made the buffer's chain of writes
# anyway, numbered from before it, so the replay redid each later write in place of the one
# before it.

def _budget_program(a):
    a[...] = np.tanh(a.T).T  # np.tanh keeps the transpose's F order
    a[1:, :1] = a[1:, 1:2]
    a[:1] *= a[:1]
    np.maximum(a[:1], a[1:], out=a[:1])
    a *= -1.0
    return a


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_memory_budget_after_a_write_it_cannot_rebuild_changes_no_bit(policy):
    x = np.array([[0.5, -1.0], [0.5, -0.25]])
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    expected = mutad.pullback(_budget_program, x.copy(), policy=policy)[1](w)[0]
    a = x.copy()
    value, back = mutad.pullback(_budget_program, a, policy=policy, memory=0)
    got = back(w)[0]
    assert np.array_equal(a, x)
    assert np.array_equal(value, _budget_program(x.copy()))
    assert np.array_equal(got, expected)
    eps = 1e-6
    fd = [np.sum(w * (_budget_program(x + eps * e) - _budget_program(x - eps * e))) / (2 * eps)
          for e in np.eye(4).reshape(4, 2, 2)]
    assert np.allclose(got.ravel(), fd, rtol=1e-7)


# ----------------------------------------------------------------------------------------------
# np.median, np.quantile and np.percentile with overwrite_input=True partition ``a`` in place
# (NumPy's _median and _quantile): a program that reads ``a`` afterwards reads NumPy's order,
# which mutad left as it was.

WEIGHTS = np.arange(24.0).reshape(2, 3, 4)
STATISTICS = {
    "median": lambda a, axis: np.median(a, axis=axis, overwrite_input=True),
    "quantile": lambda a, axis: np.quantile(a, [0.2, 0.5], axis=axis, overwrite_input=True),
    "percentile_lower": lambda a, axis: np.percentile(a, 37, axis=axis, overwrite_input=True,
                                                      method="lower"),
    # np.nanmedian writes the values after a NaN over it
    "nanmedian": lambda a, axis: np.nanmedian(_with_nan(a), axis=axis, overwrite_input=True),
    "nanpercentile": lambda a, axis: np.nanpercentile(_with_nan(a), [30, 70], axis=axis,
                                                      overwrite_input=True),
}


def _with_nan(a):
    a[0, 1, 2] = np.nan
    return a


@pytest.mark.parametrize("statistic", STATISTICS)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("layout", ["C", "transposed"])
def test_statistics_overwriting_their_input_leave_numpys_order(statistic, axis, layout):
    def f(t):
        a = t * 1.0 if layout == "C" else (t.T * 1.0).T  # an F-ordered a: ravel copies it
        m = STATISTICS[statistic](a, axis)
        return np.nansum(m * m) + np.nansum(a * WEIGHTS)

    t0 = np.random.default_rng(3).standard_normal((2, 3, 4))
    t = t0.copy()
    value, (g,) = mutad.value_and_gradient(f, t)
    assert np.array_equal(t, t0)
    assert value.tobytes() == f(t0.copy()).tobytes()
    y, dy = mutad.jvp(f, (t0.copy(),), (WEIGHTS - 11.5,))
    assert y.tobytes() == value.tobytes()
    assert np.isclose(dy, np.sum(g * (WEIGHTS - 11.5)), rtol=1e-12)
    eps = 1e-6
    fd = [(f(t0 + eps * e) - f(t0 - eps * e)) / (2 * eps) for e in np.eye(24).reshape(24, 2, 3, 4)]
    assert np.allclose(g.ravel(), fd, rtol=1e-6, atol=1e-8)


def test_a_replay_of_a_median_overwriting_its_input_reorders_each_call_as_numpy():
    def f(x):
        y = x * 1.0
        return np.median(y, overwrite_input=True) + np.sum(y * np.arange(5.0))

    replayed = mutad.grad(f, replay=True)
    for x in ([3.0, 1, 2, 5, 4], [1.0, 5, 4, 3, 2], [5.0, 4, 3, 2, 1], [2.0, 3, 1, 5, 4]):
        x = np.array(x)
        assert np.array_equal(replayed(x.copy()), mutad.gradient(f, x.copy())[0])


def test_a_constant_overwritten_by_a_quantile_of_a_traced_q_is_left_as_numpy_leaves_it():
    values = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 0.5, -1.0])
    expected = values.copy()
    np.quantile(expected, 0.37, overwrite_input=True)
    constant = values.copy()

    def f(q):  # constant, made before the differentiation, is read as a constant
        return np.quantile(constant, q, overwrite_input=True)

    g = mutad.gradient(f, np.array(0.37))[0]
    assert np.array_equal(constant, expected)
    assert np.isclose(g, 6 * (2.0 - 1.0))  # (n - 1) times the gap the quantile falls in
