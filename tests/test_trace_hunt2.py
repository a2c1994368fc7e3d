"""Wrong answers found by writing programs as scientists write them, each checked against NumPy's
values and JAX's or the exact derivative; every one failed before its fix."""

import numpy as np
import pytest

import mutad

# ----------------------------------------------------------------------------------------------
# where= reductions: an element the mask leaves out is never read, so its derivative is 0 even
# where the reduction's own derivative is NaN or infinite (a slice with too few elements for
# ddof, an overflowing product) or the tangent flowing into it is (sqrt's at 0).

A = np.array([[-0.6, -1.3, -0.1, 0.9],
              [-0.02, 0.49, -1.9, 0.14],
              [-0.9, 1.7, 0.88, 0.94]])


def finite_or_zero(y):
    return np.sum(np.where(np.isfinite(y), y, 0.0))


@pytest.mark.parametrize("reduction", [np.std, np.var])
def test_where_reduction_with_a_nan_slice_gives_left_out_elements_zero(reduction):
    def f(a):  # column 0 keeps one element, ddof=1: a NaN the program then drops
        return finite_or_zero(reduction(a, axis=0, where=a > -0.5, ddof=1))

    a = A.copy()
    g = mutad.gradient(f, a)[0]
    assert np.array_equal(a, A)
    left_out = ~(A > -0.5)
    assert np.all(g[left_out] == 0.0)
    # the element kept alone in column 0 is where the 0 * NaN of the chain rule stays
    assert np.isnan(g[1, 0]) and np.all(np.isfinite(g[:, 1:]))


def test_where_product_with_a_nan_cotangent_gives_left_out_elements_zero():
    def f(a):  # sqrt of a negative product: NaN, dropped, whose cotangent is NaN
        return finite_or_zero(np.sqrt(np.prod(a, axis=0, where=a > 0) - 1.0))

    g = mutad.gradient(f, A.copy())[0]
    assert np.all(g[~(A > 0)] == 0.0)


@pytest.mark.parametrize("reduction", [
    lambda y, m: np.std(y, where=m), lambda y, m: np.var(y, axis=0, where=m),
    lambda y, m: np.prod(y + 1.0, where=m)])
def test_where_reduction_forward_mode_ignores_the_tangents_of_left_out_elements(reduction):
    x = np.array([0.0, 1.0, 4.0, 0.0, 2.25])

    def f(x):  # sqrt's tangent at 0 is infinite, and the mask leaves those elements out
        return reduction(np.sqrt(x), x > 0)

    t = np.array([1.0, 0.5, -1.0, 2.0, 0.25])
    y, dy = mutad.jvp(f, (x,), (t,))
    kept = x > 0
    yk, dk = mutad.jvp(lambda z: reduction(np.sqrt(z), np.ones(z.shape, bool)), (x[kept],),
                       (t[kept],))
    assert y == yk and np.isfinite(dy) and np.isclose(dy, dk, rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# Python numbers (x[0].item()) and what NumPy and Python make of them


def _bitwise(a, b):
    return type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype \
        and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _check_values(f, x):
    """f returns (loss, values): the values as NumPy gives them, type, dtype and bits, under
    gradient and jvp; the loss's gradient against the float64 derivative ``expected``."""
    expected = f(x.copy())[1]
    (_, got), _ = mutad.value_and_gradient(f, x.copy(), has_aux=True)
    (_, got_forward), _ = mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
    for values in (got, got_forward):
        assert len(values) == len(expected)
        for a, b in zip(values, expected):
            assert _bitwise(a, b), (a, b)


def test_numpy_scalar_type_of_a_python_number_is_numpys_scalar():
    def f(x):
        v = x[0].item()  # a Python float
        a = np.float32(v) * 0.1  # NumPy's float32 scalar times a Python float: float32
        b = x.astype(np.float32) * np.float64(v)  # NumPy's float64 scalar: a float64 array
        c = np.float16(v) + 1.0
        d = np.complex64(v) * 0.1
        return a + b.sum() + c + np.real(d), (a, b, c, d)

    x = np.array([2.69571, 3.0, 0.3])
    _check_values(f, x)
    g = mutad.gradient(lambda x: f(x)[0], x.copy())[0]
    v = float(np.float32(x[0]))  # the factor b's elements were multiplied by
    assert np.allclose(g, [0.1 + x.sum() + v + 1.0 + 0.1, v, v], rtol=1e-6)


def test_comparisons_and_round_of_python_numbers_are_pythons():
    def f(x):
        v, w = x[0].item(), x[1].item()
        return v * w, (v > w, v == v, v != 1.0, v <= 3, w >= v, round(v, 2), round(v, 1) * 1.0,
                       (v > w) * v, x[0] > w, round(x[0], 2))

    _check_values(f, np.array([2.69571, 3.0]))


@pytest.mark.parametrize("f", [
    lambda x: np.array(x.sum()), lambda x: np.asarray(x[0]), lambda x: np.array(x[0].item()),
    lambda x: x.sum(keepdims=True).reshape(()), lambda x: np.where(True, x[0], x[1]),
    lambda x: x.sum(), lambda x: x[0], lambda x: x[0].item(), lambda x: np.float32(x[0]),
    lambda x: (np.asarray(x[1]) * 2, x.reshape(2, 1)[0].reshape(()) * 1)])
def test_jvp_gives_a_0d_array_where_numpy_does(f):
    """jvp's outputs are NumPy's: a 0-d array stays one (it was NumPy's scalar), a scalar a
    scalar; each tangent of its primal's type."""
    x = np.array([1.0, 2.0])
    expected = f(x.copy())
    y, t = mutad.jvp(f, (x,), (np.array([1.0, -1.0]),))
    ys, ts, es = (y, t, expected) if isinstance(y, tuple) else ((y,), (t,), (expected,))
    for yi, ti, ei in zip(ys, ts, es):
        assert _bitwise(yi, ei) and type(ti) is type(ei)


# ----------------------------------------------------------------------------------------------
# Second derivatives of SciPy's x log y at x = 0: d/dy (x log y) = x / y is 0 there, but its
# derivative in x, 1 / y, is not.


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_hessian_of_x_log_y_at_x_zero_keeps_the_cross_term(name):
    import scipy.special as sp
    xlog = getattr(sp, name)

    def f(v):  # x log y (x log(1 + y)) at x = v[0], y = v[1]
        return xlog(v[0], v[1])

    for x in (0.0, 0.5):
        v = np.array([x, 2.0])
        H = mutad.hessian(f, v)
        cross = 1.0 / v[1] if name == "xlogy" else 1.0 / (1.0 + v[1])
        dyy = -x / v[1] ** 2 if name == "xlogy" else -x / (1.0 + v[1]) ** 2
        assert np.allclose(H, [[0.0, cross], [cross, dyy]], rtol=1e-14, atol=0), (x, H)
    g = mutad.gradient(f, np.array([0.0, -3.0 if name == "xlogy" else -0.5]))[0]
    assert np.signbit(g[1]) == np.False_ and g[1] == 0.0  # the limit 0, as before: not -0.0


@pytest.mark.parametrize("expression", [
    "v / z", "v // z", "v % z", "divmod(v, z)", "w / 0.0", "1.0 / z", "z ** -1.0", "v ** 0.5",
    "pow(v, 0.5)", "v ** (1 / 3)", "v ** -1.5", "(-8.0) ** (w / 9)", "10.0 ** (w * 200)",
    "(v ** 0.5).imag", "w ** 0.5", "w % -2.0", "v // 1.5"])
def test_arithmetic_of_python_numbers_is_pythons(expression):
    """Python numbers (x[0].item()) divide and raise to powers as Python's: ZeroDivisionError
    and OverflowError where NumPy gives inf or nan, a negative number to a fractional power a
    complex number, where NumPy's is nan (both were NumPy's, silently)."""
    def f(x):
        names = {"v": x[0].item(), "z": x[1].item(), "w": x[2].item()}
        return eval(expression, {"np": np}, names)

    x = np.array([-2.0, 0.0, 3.0])

    def outcome(run):
        try:
            y = run()
        except (ZeroDivisionError, OverflowError) as error:
            return type(error)
        return type(y), repr(y)

    expected = outcome(lambda: f(x.copy()))
    assert outcome(lambda: mutad.vjp(f, x.copy())[0]) == expected
    assert outcome(lambda: mutad.jvp(f, (x.copy(),), (np.ones(3),))[0]) == expected
    assert np.array_equal(x, [-2.0, 0.0, 3.0])


def test_derivative_of_a_python_power_with_a_complex_value():
    def f(x):  # sqrt(-2) = 1.414...j: its imaginary part is sqrt(-x0)
        return (x[0].item() ** 0.5).imag + (x[1].item() ** 0.5).real

    x = np.array([-2.0, 3.0])
    expected = [-0.5 / np.sqrt(2.0), 0.5 / np.sqrt(3.0)]
    assert np.allclose(mutad.gradient(f, x)[0], expected, rtol=1e-14)
    for i in range(2):
        _, t = mutad.jvp(f, (x,), (np.eye(2)[i],))
        assert np.isclose(t, expected[i], rtol=1e-14)


@pytest.mark.parametrize("expression", ["np.log(z)", "np.divide(w, z)", "np.log1p(z - 1.0)",
                                        "np.arctanh(z + 1.0)"])
def test_forward_mode_of_numpy_at_a_python_zero_is_numpys(expression):
    """A partial of a Python number (1.0 / x at x = 0.0) is computed as NumPy computes it,
    infinite, in forward mode as in reverse: Python's float division raised ZeroDivisionError."""
    def f(x):
        return eval(expression, {"np": np}, {"z": x[0].item(), "w": x[1].item()})

    x = np.array([0.0, 3.0])
    with np.errstate(all="ignore"):
        y, t = mutad.jvp(f, (x,), (np.array([1.0, 0.0]),))
        assert y == f(x) and np.isinf(t)


def test_replay_of_a_python_power_with_a_complex_value_traces_that_call():
    def f(x):
        y = x[0].item() ** 0.5
        return (y * np.conj(y)).real * 3.0 if isinstance(y, complex) else y * (x ** 2).sum()

    g = mutad.grad(f, replay=True)
    for x in ([-2.0, 1.0], [3.0, 1.0], [-3.0, 2.0], [4.0, 1.0]):
        x = np.array(x)
        assert np.array_equal(g(x), mutad.gradient(f, x)[0])


@pytest.mark.parametrize("f", [
    lambda x: np.array(x.sum()), lambda x: np.asarray(x[0]), lambda x: np.array(3.0),
    lambda x: x.sum(), lambda x: x[0].item() * 2, lambda x: np.float32(x[0]), lambda x: 3])
def test_value_and_gradient_gives_the_value_as_numpy_does(f):
    """The value is what f returned: a 0-d array stays one (it was made NumPy's scalar), a
    Python number a Python number."""
    x = np.array([1.0, 2.0])
    expected = f(x.copy())
    for value, _ in (mutad.value_and_gradient(f, x), mutad.value_and_grad(f)(x)):
        assert _bitwise(value, expected)


def test_parts_and_conjugate_of_python_numbers_are_python_numbers():
    """v.imag of a Python float and c.conjugate() of a Python complex are Python's numbers,
    promoted weakly: they were NumPy's scalars, so float32 * v.imag was a float64 array."""
    def f(x):
        v = x[0].item()
        c = v * 1j
        return v * v, (v.imag, v.conjugate(), c.conjugate(), c.imag, c.real,
                       x.astype(np.float32) * v.imag, x.astype(np.complex64) * c.conjugate())

    _check_values(f, np.array([2.5, -1.0]))
