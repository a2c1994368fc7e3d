"""Wrong answers found in traced and forward differentiation at special values, each checked
against NumPy's values and the exact derivative (or its limit); every one failed before its
fix."""

import warnings

import numpy as np
import pytest
import scipy.stats

import mutad

# ----------------------------------------------------------------------------------------------
# np.logaddexp(a, b) = log(e^a + e^b): its partials were e^(a - y), NaN where y is infinite
# (inf - inf), where the limits are the shares 1 and 0 (1/2 each at a tie, as at every tie).

A = np.array([np.inf, 1.0, -np.inf, 3.0, np.inf, -np.inf, 0.5])
B = np.array([2.0, np.inf, 5.0, -np.inf, np.inf, -np.inf, 0.5])
DA = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5])  # the limits


@pytest.mark.parametrize("ufunc", [np.logaddexp, np.logaddexp2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logaddexp_at_infinities_takes_its_limits(ufunc, dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    before = a.tobytes(), b.tobytes()

    def f(a, b):
        y = ufunc(a, b)
        y *= 1.0  # in place
        return np.sum(y)

    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        expected_value = f(a.copy(), b.copy())  # NumPy's run: inf + -inf in the sum, no more
        expected = len(heard)
        value, (ga, gb) = mutad.value_and_gradient(f, a, b, argnums=(0, 1))
        y, t = mutad.jvp(lambda a: ufunc(a, b), (a,), (np.ones_like(a),))
    assert [str(w.message) for w in heard] == ["invalid value encountered in reduce"] * 2
    assert expected == 1
    assert (a.tobytes(), b.tobytes()) == before
    assert np.asarray(value).tobytes() == np.asarray(expected_value).tobytes()
    assert y.tobytes() == ufunc(a, b).tobytes()
    np.testing.assert_array_equal(ga, DA.astype(dtype))
    np.testing.assert_array_equal(gb, (1.0 - DA).astype(dtype))
    np.testing.assert_array_equal(t, DA.astype(dtype))
    assert ga.dtype == gb.dtype == t.dtype == dtype


def test_logaddexp_finite_partials_unchanged():
    a, b = np.array([0.3, -1.2, 5.0, -700.0]), np.array([0.1, 2.0, -3.0, 700.0])
    g = mutad.gradient(lambda a: np.sum(np.logaddexp(a, b)), a)[0]
    np.testing.assert_allclose(g, np.exp(a - np.logaddexp(a, b)), rtol=1e-15, atol=0)
    g = mutad.gradient(lambda a: np.logaddexp.reduce(a), a)[0]  # fold by fold
    np.testing.assert_allclose(g, np.exp(a - np.logaddexp.reduce(a)), rtol=1e-14, atol=0)


# ----------------------------------------------------------------------------------------------
# The spectral norms of a stack holding a matrix with an infinity: that matrix's derivative was
# computed at a zero matrix, whose zero singular values refused the whole stack's second
# derivative; at a constant NaN, whose derivative an enclosing differentiation took as 0.

FINITE = np.array([[[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.0, 1.0, 4.0]],
                   [[1.0, -2.0, 0.5], [0.3, 1.0, 2.0], [1.5, 0.0, -1.0]]])


@pytest.mark.parametrize("order", [2, -2, "nuc"])
def test_second_derivative_of_a_stack_with_an_infinite_matrix(order):
    def f(a):
        return np.sum(np.linalg.norm(a, order, axis=(-2, -1)))

    stack = np.stack([FINITE[0], FINITE[1]])
    stack[1, 0, 0] = np.inf
    before = stack.tobytes()
    alone = mutad.hessian(f, FINITE[:1].copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = mutad.hessian(f, stack)
        hv = mutad.hvp(f, (stack,), (np.ones_like(stack),))
    assert stack.tobytes() == before
    h = h.reshape(2, 9, 2, 9)
    np.testing.assert_allclose(h[0, :, 0], alone.reshape(9, 9), rtol=1e-10, atol=1e-12)
    assert np.all(h[0, :, 1] == 0) and np.all(h[1, :, 0] == 0)  # no coupling between them
    assert np.all(np.isnan(h[1, :, 1]))  # the infinite matrix's: not finite
    np.testing.assert_allclose(hv[0], np.sum(h[0, :, 0], axis=1).reshape(3, 3), rtol=1e-10)
    assert np.all(np.isnan(hv[1]))


# ----------------------------------------------------------------------------------------------
# Warnings: the user sees those of NumPy's own run, once, and the derivative's labelled as such.
# A composite computing NumPy's value step by step (np.divide.accumulate) warned again for each
# step; forward mode warned again where it ran a NumPy function on the tangents (np.mean of an
# empty slice) or ran NumPy's call again to sort its floating-point events from the tangent's.


def _heard(call):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in heard]


def _own(messages):
    return [m for m in messages if not m.endswith(("in a tangent",)) and "in the gradient" not in m]


WARNING_CASES = [
    (lambda x: np.sum(np.divide.accumulate(x)), [1.0, 0.0, 2.0]),
    (lambda x: np.sum(np.divide.accumulate(x)), [0.0, 0.0, 2.0]),
    (lambda x: np.divide.reduce(x), [1.0, 0.0, 2.0]),
    (lambda x: np.sum(np.multiply.accumulate(x)), [1e300, 1e300, 2.0]),
    (lambda x: np.sum(x) + np.mean(x[:0]), [1.0]),
    (lambda x: np.sum(x) + np.var(x[:0]), [1.0]),
    (lambda x: np.std(x, ddof=1), [1.0]),
    (lambda x: np.sum(np.log(x)), [1.0, 0.0, 2.0]),
]


def _heard_differentiating(f, x, mode):
    """The warnings heard while ``f`` is differentiated at ``x``, in reverse or forward mode."""
    if mode == "gradient":
        return _heard(lambda: mutad.value_and_gradient(f, x))
    return _heard(lambda: mutad.jvp(f, (x,), (np.ones_like(x),)))


@pytest.mark.parametrize("mode", ["gradient", "jvp"])
@pytest.mark.parametrize("case", range(len(WARNING_CASES)))
def test_warnings_are_numpys_once(case, mode):
    f, values = WARNING_CASES[case]
    x = np.array(values)
    before = x.tobytes()
    expected = _heard(lambda: f(x.copy()))
    assert expected  # each case warns in NumPy's own run
    heard = _heard_differentiating(f, x, mode)
    assert x.tobytes() == before
    assert _own(heard) == expected


def test_a_tangents_warning_is_labelled():
    x = np.array([1.0, 0.0, 2.0])
    heard = _heard(lambda: mutad.jvp(lambda x: np.sum(np.log(x)), (x,), (np.ones(3),)))
    assert heard == ["divide by zero encountered in log",
                     "divide by zero encountered in divide, in a tangent"]


# SciPy's moments warn of catastrophic cancellation (nearly equal data); mutad's stand-ins for
# them computed the same values without the warning.

STATISTICS = [
    lambda x: scipy.stats.zscore(x), lambda x: scipy.stats.zmap(x, x * 2.0),
    lambda x: scipy.stats.tvar(x), lambda x: scipy.stats.moment(x, 2),
    lambda x: scipy.stats.skew(x), lambda x: scipy.stats.describe(x)[3],
]


@pytest.mark.parametrize("mode", ["gradient", "jvp"])
@pytest.mark.parametrize("statistic", range(len(STATISTICS)))
@pytest.mark.parametrize("values", [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 5.0]])
def test_scipys_precision_warning_is_given(values, statistic, mode):
    def f(x):
        return np.nansum(STATISTICS[statistic](x))

    x = np.array(values)
    before = x.tobytes()
    expected = _heard(lambda: f(x.copy()))
    heard = _heard_differentiating(f, x, mode)
    assert x.tobytes() == before
    assert _own(heard) == expected


# A Jacobian or a Hessian runs f once per direction (or batch of them): each run showed NumPy's
# warnings again (a Hessian of four elements: the log's warning five times, where NumPy's one
# run gives it once).


def _logs(x):
    y = np.log(x)
    for _ in range(2):  # twice in one run: NumPy shows it twice
        z = np.log(x)
    return np.sum(np.where(np.isfinite(y), y, 0.0) ** 2) + np.sum(x ** 3) + 0.0 * np.sum(
        np.where(np.isfinite(z), z, 0.0))


@pytest.mark.parametrize("derivative", [
    lambda x: mutad.hessian(_logs, x), lambda x: mutad.hessian(_logs, x, policy="checkpoint"),
    lambda x: mutad.jacfwd(_logs)(x), lambda x: mutad.jacrev(_logs)(x),
    lambda x: mutad.jacobian(_logs, x)])
def test_jacobians_and_hessians_show_one_runs_warnings(derivative):
    x = np.array([1.0, 0.0, 2.0, 3.0])
    before = x.tobytes()
    heard = _heard(lambda: derivative(x))
    assert x.tobytes() == before
    expected = _heard(lambda: _logs(x.copy()))
    assert expected == ["divide by zero encountered in log"] * 3
    assert _own(heard) == expected


def test_a_warning_turned_into_an_error_still_raises_in_each_run():
    def f(x):
        try:
            y = np.log(x)
        except RuntimeWarning:
            y = x * 0.0
        return np.sum(y ** 2 + x ** 3)

    x = np.array([1.0, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = mutad.hessian(f, x)
    np.testing.assert_array_equal(h, np.diag(6.0 * x))  # the except branch, in every run


# Forward mode's product rule for contractions: a constant made in f (np.ones, np.arange) is a
# dual with a zero tangent, and its term, NumPy's product of the other operand with zeros, was
# NaN wherever that operand held a NaN or an infinity, whatever the direction: jvp and jacfwd
# gave NaN for every column where the gradient is finite.

CONTRACTIONS = [
    lambda x: x @ np.ones(4), lambda x: np.dot(np.ones(4), x), lambda x: np.sort(x) @ np.arange(4.0),
    lambda x: np.einsum("i,i->", x, np.arange(4.0)), lambda x: np.sum(np.outer(x, np.ones(2))),
    lambda x: np.tensordot(x, np.ones(4), 1), lambda x: np.inner(np.ones(4), x),
    lambda x: np.sum(np.kron(x, np.ones(2))), lambda x: np.sum(np.ones((2, 4)) @ x),
]


@pytest.mark.parametrize("special", [np.nan, np.inf])
@pytest.mark.parametrize("contraction", range(len(CONTRACTIONS)))
def test_a_constants_zero_tangent_contributes_zero(contraction, special):
    f = CONTRACTIONS[contraction]
    x = np.array([special, 1.0, 2.0, 0.5])
    before = x.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = mutad.gradient(f, x)[0]
        columns = mutad.jacfwd(f)(x)
        direction = np.array([0.0, 1.0, -2.0, 3.0])
        _, t = mutad.jvp(f, (x,), (direction,))
    assert x.tobytes() == before
    assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(columns, g)
    assert t == g @ direction


# Forward rules of reductions summed derivative * tangent: an infinite or NaN derivative of
# one element times that element's zero tangent made every direction's tangent NaN (jacfwd all
# NaN), where the gradient, whose zero cotangents contribute zero, is finite in those entries.

REDUCTIONS = [
    (lambda x: np.prod(x), [np.inf, 1.0, 2.0, 0.5]),
    (lambda x: np.nanprod(x), [np.inf, np.nan, 2.0, 0.5]),
    (lambda x: np.prod(x, where=x < 3.0), [1e308, 1e308, 2.0, 0.5]),
    (lambda x: np.linalg.norm(x, 0.5), [np.inf, 1.0, 2.0, 0.5]),
    (lambda x: np.linalg.norm(x, 3), [np.inf, 1.0, 2.0, 0.5]),
    (lambda x: np.linalg.norm(x, 1), [np.nan, 1.0, -2.0, 0.5]),
    (lambda x: np.linalg.vector_norm(x, ord=4), [np.inf, 1.0, 2.0, 0.5]),
    (lambda x: np.std(x, where=x > 0), [np.inf, 1.0, -2.0, 0.5]),
    (lambda x: np.var(x, where=x > 0), [np.inf, 1.0, -2.0, 0.5]),
    (lambda x: np.sum(np.sinc(x)), [np.nan, 1.0, 2.0, 0.5]),  # NumPy's Python functions
    (lambda x: np.sum(np.i0(x)), [np.nan, 1.0, 2.0, 0.5]),
]


@pytest.mark.parametrize("reduction", range(len(REDUCTIONS)))
def test_a_zero_tangent_beside_an_infinite_derivative(reduction):
    f, values = REDUCTIONS[reduction]
    x = np.array(values)
    before = x.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = mutad.gradient(f, x)[0]
        columns = mutad.jacfwd(f)(x)
    assert x.tobytes() == before
    assert not np.isnan(g).all()  # entries that are not NaN: so must the columns' be
    np.testing.assert_allclose(columns, g, rtol=1e-15, atol=0, equal_nan=True)
