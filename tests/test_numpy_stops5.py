"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])
P = np.array([0.5, 1.2, 0.8, 2.0])


def check_hessian(f, x, h=1e-5, rtol=1e-5, atol=1e-6):
    """``mutad.hessian(f, x)`` against central differences of the gradient; ``x`` unchanged."""
    before = x.tobytes()
    hessian = mutad.hessian(f, x)
    assert x.tobytes() == before
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        e = e.reshape(x.shape)
        column = (mutad.gradient(f, x + e)[0] - mutad.gradient(f, x - e)[0]) / (2 * h)
        np.testing.assert_allclose(hessian.reshape(x.size, x.size)[:, k], column.ravel(),
                                   rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# Draws of np.random's generators with traced parameters: the continuous ones NumPy's C code
# computes from standard numbers by a formula (Laplace, logistic, Gumbel, Rayleigh, Weibull,
# Pareto, power, gamma's scale, triangular) are that formula of the same standard numbers; the draws
# of integers (Poisson, binomial, ...) are NumPy's, of the parameters' values, without a
# derivative

def _generator():
    return np.random.default_rng(7)


def _legacy():
    return np.random.RandomState(7)


CONTINUOUS = [
    lambda g, x: g.laplace(loc=x, scale=x),
    lambda g, x: g.laplace(x[0], 2.0, size=5),
    lambda g, x: g.logistic(x, 1.0 + x),
    lambda g, x: g.gumbel(x, x),
    lambda g, x: g.gumbel(scale=x[1]),
    lambda g, x: g.rayleigh(scale=x),
    lambda g, x: g.weibull(x),
    lambda g, x: g.weibull(x + 1.0),
    lambda g, x: g.pareto(x + 1.0),
    lambda g, x: g.power(x),  # (1 - exp(-e)) ** (1 / a), the ulps of expm1 in a Generator's
    lambda g, x: g.power(x[1] + 0.5, size=3),
    lambda g, x: g.gamma(2.0, scale=x),
    lambda g, x: g.gamma(np.array([0.5, 1.0, 2.0, 3.0]), x),
    lambda g, x: g.gamma(3.0, x[0], size=(2, 3)),
    lambda g, x: g.triangular(0.0, x, x + 1.0),
    lambda g, x: g.triangular(x[0], x[1], 3.0),
]


@pytest.mark.parametrize("make", [_generator, _legacy], ids=["Generator", "RandomState"])
@pytest.mark.parametrize("draw", CONTINUOUS)
def test_continuous_draws_of_traced_parameters(draw, make):
    check(lambda x: np.sum(draw(make(), x) ** 2), P)


def test_a_draw_of_scalar_parameters():
    def f(x):
        y = np.random.default_rng(1).laplace(x[0], x[1])
        assert np.ndim(y) == 0
        return y * x[2]
    check(f, P)


def test_draws_of_module_functions_with_traced_parameters():
    def f(x):
        np.random.seed(3)
        return np.sum(np.random.laplace(x, 0.5)) + np.sum(np.random.gumbel(scale=x)) \
            + np.random.weibull(x[0])
    check(f, P)


@pytest.mark.parametrize("draw", [
    lambda g, x: g.poisson(x * 3),
    lambda g, x: g.poisson(lam=x, size=(3, 4)),
    lambda g, x: g.binomial(10, x / 3),
    lambda g, x: g.negative_binomial(5, x / 3),
    lambda g, x: g.geometric(p=x / 3),
    lambda g, x: g.multinomial(20, x / np.sum(x)),
])
def test_draws_of_integers_by_traced_parameters(draw):
    def f(x):
        k = draw(np.random.default_rng(2), x)
        assert k.dtype.kind == "i"
        return np.sum(k * x[:k.shape[-1]] ** 2)
    check(f, P)


def test_draws_of_integers_by_traced_parameters_in_a_replay():
    """The integers a replay recorded are those of the values it recorded with: it traces a
    call whose draw depends on them."""
    def f(x):
        return np.sum(np.random.default_rng(0).poisson(x * 40) * x)
    replayed = mutad.grad(f, replay=True)
    for x in (P, P * 1.5, P * 0.25):
        k = np.random.default_rng(0).poisson(x * 40)
        np.testing.assert_array_equal(replayed(x), k)


@pytest.mark.parametrize("draw", [
    lambda g, x: g.gamma(x),
    lambda g, x: g.gamma(shape=x, scale=2.0),
    lambda g, x: g.standard_gamma(x),
    lambda g, x: g.dirichlet(x),
    lambda g, x: g.beta(x, 2.0),
    lambda g, x: g.vonmises(x, 2.0),
    lambda g, x: g.standard_t(df=x),
    lambda g, x: g.chisquare(x),
    lambda g, x: g.wald(x, 1.0),
])
def test_draws_by_rejection_of_traced_parameters_are_refused(draw):
    with pytest.raises(mutad.MutadError, match="by rejection"):
        mutad.gradient(lambda x: np.sum(draw(np.random.default_rng(0), x)), P)


def test_a_draw_by_a_shape_without_derivative():
    """The derivative by the scale alone: the standard draw."""
    (g,) = mutad.gradient(
        lambda x: np.sum(np.random.default_rng(0).gamma(mutad.stop_gradient(x), x)), P)
    np.testing.assert_array_equal(g, np.random.default_rng(0).standard_gamma(P))


def test_second_derivatives_of_draws():
    check_hessian(lambda x: np.sum(np.random.default_rng(0).gumbel(x, x ** 2)), P)
    check_hessian(lambda x: np.sum(np.random.default_rng(0).weibull(x) * x), P)


# ----------------------------------------------------------------------------------------------
# np.ma.fix_invalid of traced values: its elements that are not finite masked, their data
# replaced by the fill value

def _fix_invalid(x):
    with np.errstate(invalid="ignore"):
        m = np.ma.fix_invalid(np.sqrt(x), fill_value=0.0)
    return float(m.sum() + m.filled(0.5).sum()) + m.data[1] * x[0]


def _fix_invalid_of_a_mask(x):
    with np.errstate(invalid="ignore"):
        m = np.ma.fix_invalid(np.log(x) * x, mask=[0, 0, 1, 0], fill_value=-1.0)
    return float(m.data @ x + m.sum())


def _fix_invalid_of_finite_values(x):
    m = np.ma.fix_invalid(x ** 2, copy=False)
    return float(m.sum() + m.count())


@pytest.mark.parametrize("f", [_fix_invalid, _fix_invalid_of_a_mask,
                               _fix_invalid_of_finite_values])
def test_fix_invalid(f):
    check(f, X)


# ----------------------------------------------------------------------------------------------
# The series classes' fromroots of traced roots

@pytest.mark.parametrize("f", [
    lambda x: np.polynomial.Polynomial.fromroots(x)(0.5),
    lambda x: np.polynomial.Chebyshev.fromroots(x[:3], domain=[-2, 2]).coef @ [1.0, 2, 3, 4],
    lambda x: (np.polynomial.Legendre.fromroots([x[0], 0.5, x[1]]) ** 2)(0.2),
    lambda x: np.polynomial.Hermite.fromroots(x, window=[-2, 2], domain=[-1, 1])(0.3),
])
def test_fromroots_of_traced_roots(f):
    check(f, X)


def test_fromroots_with_the_roots_domain_is_refused():
    with pytest.raises(mutad.MutadError, match="plain domain"):
        mutad.gradient(lambda x: np.polynomial.Polynomial.fromroots(x, domain=None)(0.5), X)


# ----------------------------------------------------------------------------------------------
# np.testing's assertions inside a function differentiated twice: each level's values passed on

def _asserting(x):
    y = x * 1.0
    np.testing.assert_allclose(y, x)
    np.testing.assert_array_less(-10, x)
    np.testing.assert_array_equal(y[:2], x[:2])
    return np.sum(y ** 3)


def test_assertions_under_second_derivatives():
    check_hessian(_asserting, X)
    hvp = mutad.hvp(_asserting, (X,), (np.ones(4),))
    np.testing.assert_allclose(hvp, 6 * X)


# ----------------------------------------------------------------------------------------------
# Text, date and time-span arrays made in the function stand in for themselves, as integer
# ones do: the float arrays made from them (parsed numbers, elapsed days) take traced values

def _parsed_numbers_written(x):
    w = np.array(["1.5", "2", "-3", "4e-1"]).astype(float)
    w[2] = x[2]
    w[:2] *= x[:2]
    return w @ x


def _formatted_then_parsed(x):
    w = np.char.mod("%d", np.arange(4)).astype(float)
    w[0] = x[0] ** 2
    return w @ x


def _elapsed_days_written(x):
    t = np.array(["2024-01-01", "2024-01-03", "2024-01-04", "2024-01-08"],
                 dtype="datetime64[D]")
    w = (t - t[0]).astype(float)
    w[0] = x[0]
    return w @ x


def _elapsed_days_divided(x):
    t = np.arange("2024-01-01", "2024-01-09", 2, dtype="datetime64[D]")
    w = (t - t[0]) / np.timedelta64(1, "h")
    w[1:] += x[1:]
    return np.sum(np.diff(w) * x[1:])


def _strings_with_numbers(x):
    names = np.array(["a", "bb", "ccc", "d"])
    n = np.strings.str_len(names).astype(float)
    n[np.char.startswith(names, "c")] = x[2]
    return n @ x


@pytest.mark.parametrize("f", [_parsed_numbers_written, _formatted_then_parsed,
                               _elapsed_days_written, _elapsed_days_divided,
                               _strings_with_numbers])
def test_floats_of_text_and_dates_written(f):
    check(f, X)


def test_text_and_dates_made_in_the_function_are_numpys():
    """What the function sees of them is NumPy's: their types, values and flags."""
    def f(x):
        s = np.array(["1.5", "2"])
        t = np.arange("2024-01-01", "2024-01-03", dtype="datetime64[D]")
        assert isinstance(s, np.ndarray) and s.dtype == np.dtype("<U3") and s.flags.owndata
        assert str(s[0]) == "1.5" and s.tolist() == ["1.5", "2"]
        assert t.dtype == np.dtype("datetime64[D]") and str(t[1]) == "2024-01-02"
        assert (t - t[0]).dtype == np.dtype("timedelta64[D]")
        s[1] = "7"
        return x[0] * s.astype(float).sum()
    (g,) = mutad.gradient(f, X)
    assert g.tolist() == [8.5, 0.0, 0.0, 0.0]


# ----------------------------------------------------------------------------------------------
# np.ma.dot of masked arrays of traced values, and float() of a masked array of one element

def _masked_matrix_product(x):
    m = np.ma.array(x.reshape(2, 2), mask=[[0, 1], [0, 0]])
    return float(np.ma.dot(m, m).sum())


def _masked_product_with_a_vector(x):
    m = np.ma.array(np.outer(x, x), mask=np.eye(4, dtype=bool))
    r = np.ma.dot(m, x)
    return float(r.sum() + r.filled(0.0) @ x)


def _masked_product_with_masked_rows(x):
    mask = np.array([[1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0]], bool)
    r = np.ma.dot(np.ma.array(np.outer(x, x), mask=mask), np.ma.masked_less(x, 0))
    return float(r.sum()) + float(r.count()) + float(r.data @ x)


def _masked_inner_product(x):
    return float(np.ma.dot(np.ma.masked_less(x, 0), x))


def _float_of_masked_elements(x):
    m = np.ma.masked_less(x, 0)
    return float(m[0]) + float(m.sum()) + float(m[2:3])


@pytest.mark.parametrize("f", [_masked_matrix_product, _masked_product_with_a_vector,
                               _masked_product_with_masked_rows, _masked_inner_product,
                               _float_of_masked_elements])
def test_masked_products_and_floats(f):
    check(f, X)


def test_float_of_a_masked_element_is_nan_with_numpys_warning():
    def f(x):
        return x[0] + 0.0 * float(np.ma.masked_less(x, 0)[1])
    with pytest.warns(UserWarning, match="converting a masked element to nan"):
        plain = f(X)
    with pytest.warns(UserWarning, match="converting a masked element to nan"):
        value, (g,) = mutad.value_and_gradient(f, X)
    assert np.isnan(plain) and np.isnan(value)


def test_masked_dot_with_out_is_refused():
    def f(x):
        m = np.ma.masked_less(x, 0).reshape(2, 2)
        return float(np.ma.dot(m, m, out=np.ma.zeros((2, 2))).sum())
    with pytest.raises(mutad.MutadError, match="out="):
        mutad.gradient(f, X)


# ----------------------------------------------------------------------------------------------
# np.fromiter of a traced vector: the copy of the elements it reads

@pytest.mark.parametrize("f", [
    lambda x: np.sum(np.fromiter(x, dtype=float) ** 2),
    lambda x: np.fromiter(x, float, count=2) @ x[:2],
    lambda x: np.sum(np.abs(np.fromiter(x, complex, 3)) ** 2),
    lambda x: np.sum(np.fromiter(x[::-1], np.float64, -1) * np.arange(4)),
])
def test_fromiter_of_a_traced_vector(f):
    check(f, X)


def test_fromiter_of_a_traced_vector_is_a_copy():
    def f(x):
        y = np.fromiter(x, float)
        y[0] = 5.0
        return np.sum(y) + x[0]
    (g,) = mutad.gradient(f, X)
    assert g.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_fromiter_of_too_few_elements_raises_numpys_error():
    with pytest.raises(ValueError, match="iterator too short"):
        mutad.gradient(lambda x: np.sum(np.fromiter(x, float, count=7)), X)


# ----------------------------------------------------------------------------------------------
# np.array(items, dtype=object) of traced numbers: an array of those objects, as NumPy keeps
# NumPy's scalars in an array of objects

@pytest.mark.parametrize("f", [
    lambda x: np.array([x[0], x[1]], dtype=object).sum() * 1.0,
    lambda x: float(np.array([[x[0], 2.0], [x[1] ** 2, x[2]]], dtype=object).prod()),
    lambda x: np.asarray([x[0], x[1], 3], dtype=object)[2] * x[0] + np.asarray((x[2],), object)[0],
    lambda x: sum(v * v for v in np.array([x[3], x[0]], object)),
])
def test_arrays_of_traced_objects(f):
    check(f, X)
    check_hessian(f, X)


def test_an_array_of_traced_objects_has_numpys_shape_and_errors():
    def f(x):
        a = np.array([[x[0], x[1]], [x[2], 1.0]], dtype=object, order="F")
        assert a.shape == (2, 2) and a.dtype == object and a.flags.f_contiguous
        return a[1, 0] * a[0, 1]
    (g,) = mutad.gradient(f, X)
    np.testing.assert_array_equal(g, [0.0, X[2], X[1], 0.0])
