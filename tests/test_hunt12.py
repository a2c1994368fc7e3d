"""Wrong answers found by a hunt over traced, replayed and forward-mode programs: each test
fails without its fix."""

import cmath
import math
import warnings

import numpy as np
import pytest
import scipy.special

import mutad
from mutad.errors import UnsupportedOperationError


def _run(compute):
    """``compute()``'s value (or the type of its error), as its repr, and the messages of the warnings it
    issued, those of mutad's derivatives (labelled so) left out."""
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            value = compute()
        except Exception as error:  # noqa: BLE001 (compared with NumPy's)
            value = type(error)
    return repr(value), [str(w.message) for w in issued
                   if ", in the gradient of " not in str(w.message)
                   and ", in a tangent" not in str(w.message)]


PYTHON_FLOATS = [
    (lambda a, b: a + b, [np.inf, -np.inf]),
    (lambda a, b: a - b, [np.inf, np.inf]),
    (lambda a, b: a * b, [np.inf, 0.0]),
    (lambda a, b: a * b, [1e200, 1e200]),
    (lambda a, b: a % b, [np.inf, 1.0]),
    (lambda a, b: math.sqrt(a), [-1.0, 0.0]),
    (lambda a, b: math.log(a), [0.0, 0.0]),
    (lambda a, b: math.exp(a) * b, [1000.0, 1.0]),
    (lambda a, b: math.exp(a) * b, [-1000.0, 1.0]),
    (lambda a, b: math.dist([a], [b]), [np.inf, np.inf]),
    (lambda a, b: cmath.sin(complex(a, b)).imag, [np.nan, 1e308]),
    (lambda a, b: cmath.exp(complex(a, b)).real, [np.nan, np.inf]),
    (lambda a, b: cmath.tanh(complex(a, b)).real, [np.nan, np.inf]),
]


@pytest.mark.parametrize("operation, values", PYTHON_FLOATS)
def test_arithmetic_of_python_floats_raises_no_numpy_event(operation, values):
    # float(x[0]) is a Python float: its arithmetic and math's functions of it warn of
    # nothing, under any np.errstate (inf - inf is nan, silently; math.sqrt(-1.0) raises
    # ValueError alone), where the NumPy loop computing it warned
    def f(x):
        return operation(float(x[0]), x[1].item())

    def raising(x):
        with np.errstate(all="raise"):
            return f(x)

    x = np.array(values)
    kept = x.copy()
    for g in (f, raising):
        expected = _run(lambda: g(x.copy()))
        assert _run(lambda: mutad.value_and_gradient(g, x)[0]) == expected
        assert _run(lambda: mutad.jvp(g, (x,), (np.ones(2),))[0]) == expected
        replayed = mutad.value_and_grad(g, replay=True)
        for y in (np.array([0.5, 0.25]), x, x, np.array([0.5, 0.25]), x):
            assert _run(lambda: replayed(y)[0]) == _run(lambda: g(y.copy()))
    np.testing.assert_array_equal(x, kept)


def _replayed_as_numpy(f, inputs):
    """``f`` traced, in forward mode and replayed on each of ``inputs`` (in that order): its
    value and warnings NumPy's, the replay's gradient the traced one, bit for bit."""
    replayed = mutad.value_and_grad(f, replay=True)
    for x in inputs:
        kept = x.copy()
        expected = _run(lambda: f(x.copy()))
        assert _run(lambda: mutad.value_and_gradient(f, x)[0]) == expected
        assert _run(lambda: mutad.jvp(f, (x,), (np.ones_like(x),))[0]) == expected
        assert _run(lambda: replayed(x)[0]) == expected
        if not expected[0].startswith("<class"):
            traced, again = mutad.grad(f)(x), replayed(x)[1]
            assert traced.tobytes() == again.tobytes()
        np.testing.assert_array_equal(x, kept)


AT_INPUTS = [np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
             np.array([-1.0, np.nan, 0.0, 4.0, -5.0, 1e300]),
             np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
             np.array([np.nan, -2.0, -np.inf, 0.0, 5.0, 6.0])]


def _sqrt_at(x):
    y = x.copy()
    np.sqrt.at(y, [0, 0, 2])
    return y.sum()


def _log_at_columns(x):
    y = x.reshape(2, 3).copy()
    np.log.at(y, (slice(None), [0, 0]))
    return (y * y).sum()


def _maximum_at(x):
    y = x.copy()
    np.maximum.at(y, [1, 1, 4], x[3:] * 2.0)
    return y.sum()


def _minimum_at_a_number(x):
    y = x.copy()
    np.minimum.at(y, [1, 1], 0.5)
    return y.sum()


def _power_at(x):
    y = x.copy()
    np.power.at(y, [0, 5, 5], x[:3] * 300.0)
    return y.sum()


@pytest.mark.parametrize("f", [_sqrt_at, _log_at_columns, _maximum_at, _minimum_at_a_number,
                               _power_at])
@pytest.mark.parametrize("raising", [False, True])
def test_ufunc_at_warns_and_raises_as_numpys_own_call(f, raising):
    # NumPy's ufunc.at words its events "in at" (np.sqrt.at of -1.0: "invalid value
    # encountered in at", not "in sqrt"), and its maximum and minimum warn of a NaN where
    # np.maximum is silent: tracing and replay warned as the ufunc's call, or not at all
    def g(x):
        if not raising:
            return f(x)
        with np.errstate(all="raise"):
            return f(x)

    _replayed_as_numpy(g, AT_INPUTS)


# Random programs of writes through views, reversed and strided views of views, ufunc.at,
# reduceat and accumulate, where= and out= aliasing an operand, sliding windows and
# as_strided views read after writes, sorts and partitions, float32 round trips, and a loss
# of Python floats; each run traced, in forward mode and replayed, on inputs that change the
# recorded decisions (signs, ties, a NaN, an infinity, -0.0).

N = 8
STATEMENTS = [
    "y[{s}] {op}= {e}",
    "y[::-1][{s}] {op}= {e}",
    "v = y[{s}]; v[::2] {op}= {e2}",
    "np.{uf}(y[{s1}], y[{s2}], out=y[{s3}])",
    "np.{uf}(y[{s1}], {c}, out=y[{s1}], where=y[{s1}] > {c})",
    "np.{uat}.at(y, {idx}, {atv})",
    "np.{unary}.at(y, {idx})",
    "y[{idx}] = {atv}",
    "y[{idx}] += {atv}",
    "np.put(y, {idx}, {atv})",
    "np.putmask(y, y > {c}, {e})",
    "np.copyto(y, {e}, where=y < {c})",
    "y[:] = np.{acc}.accumulate(y)",
    "y[:4] = np.{red}.reduceat(y, [0, 2, 2, 5])",
    "w = sliding_window_view(y, 3); y[1:-1] = w.{wred}(axis=1)",
    "w = as_strided(y, shape=(N - 2, 3), strides=(y.strides[0], y.strides[0]));"
    " y[:N - 2] = w @ np.array([0.5, -0.25, 0.125])",
    "y.sort()",
    "y[:] = np.partition(y, 3)",
    "y = np.clip(y, -{c2}, {c2})",
    "y = np.where(y > {c}, y * x, {e})",
    "y[y > {c}] {op}= {e}",
    "y[1:] = y[:-1] * {c3}",
    "y = y.astype(np.float32).astype(np.float64)",
    "z = y.reshape(2, 4); z.T[1:] {op}= z.T[:-1]",
    "y = np.einsum('i,i,j->j', y, y, x, optimize={opt})",
    "y[:] = np.cumsum(y[::-1])",
    "y = y + np.max(y, initial={c}, where=y < {c2})",
    "y = np.maximum(y, y[::-1])",
    "y[np.argmax(y)] = {e}",
    "y = np.sin(y) * np.exp(-y * y) + x",
    "y = y / (1.0 + y * y)",
    "s = float(y[0]) - float(y[-1]); y *= s",
]


def _program(seed, statements=5):
    import random

    draw = random.Random(seed)
    lines = ["y = x.copy()"]
    for _ in range(statements):
        k = draw.randint(2, 4)
        start1, start2 = draw.randint(0, 2), draw.randint(2, 4)
        s1, s2 = f"{start1}:{start1 + k}", f"{start2}:{start2 + k}"
        a, b, step = draw.randint(0, 2), draw.randint(N - 3, N - 1), draw.choice([1, 2, -1])
        s = f"{a}:{b}:{step}" if step > 0 else f"{b}:{a - 1 if a else ''}:-1"
        idx = draw.choice(["[0, 0, 3]", "[1, 5, 1, 1]", "[7, 2]", "[-1, 0, -1]"])
        m = len(eval(idx))
        lines.append(draw.choice(STATEMENTS).format(
            s=s, s1=s1, s2=s2, s3=draw.choice([s1, s2, f"{N - k}:{N}", f"{k - 1}::-1"]),
            op=draw.choice("+-*"), e=draw.choice(["x", "2.0", "x[::-1]", "y * 0.5", "x * y", "3"]),
            e2=draw.choice(["2.0", "x[0]", "y[1]"]),
            uf=draw.choice(["add", "subtract", "multiply", "maximum", "minimum", "hypot"]),
            uat=draw.choice(["add", "subtract", "multiply", "maximum", "minimum", "divide"]),
            unary=draw.choice(["sqrt", "log", "exp", "negative"]), idx=idx,
            atv=draw.choice([f"x[:{m}]", f"x[{N - m}:][::-1] * 2.0", "1.5", f"y[:{m}] * x[:{m}]"]),
            c=draw.choice(["0.0", "0.3", "-0.2"]), c2=draw.choice(["0.5", "1.0"]),
            c3=draw.choice(["0.5", "x[1]", "y[0]"]),
            acc=draw.choice(["add", "multiply", "maximum", "minimum"]),
            red=draw.choice(["add", "multiply", "maximum", "minimum"]),
            wred=draw.choice(["sum", "max", "prod", "mean"]),
            opt=draw.choice(["True", "False", "'greedy'"])))
    lines.append("return float(np.sum(y * np.arange(1, N + 1) * 0.1)) "
                 "+ float(np.sum(y * y) * 0.05)")
    source = "def f(x):\n" + "\n".join("    " + line for line in lines)
    from numpy.lib.stride_tricks import as_strided, sliding_window_view
    namespace = {"np": np, "N": N, "as_strided": as_strided,
                 "sliding_window_view": sliding_window_view}
    exec(source, namespace)
    return source, namespace["f"]


def _inputs(seed):
    draw = np.random.default_rng(seed)
    special = draw.standard_normal(N)
    special[draw.integers(N)] = draw.choice([np.nan, np.inf, -0.0, 0.0])
    return [draw.standard_normal(N), draw.standard_normal(N), np.round(draw.standard_normal(N)),
            special, 3 * draw.standard_normal(N), -np.abs(draw.standard_normal(N))]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("seed", range(30))
def test_random_programs_of_views_scatters_and_windows(seed):
    source, f = _program(seed)
    replayed = mutad.value_and_grad(f, replay=True)
    for k, x in enumerate(_inputs(seed)):
        kept = x.copy()
        expected = _run(lambda: f(x.copy()))
        if expected[0].startswith("<class"):
            continue  # NumPy's error (shapes that do not broadcast): not a program
        assert _run(lambda: mutad.value_and_gradient(f, x)[0]) == expected, source
        value, gradient = mutad.value_and_gradient(f, x, argnums=0)
        np.testing.assert_array_equal(x, kept)
        assert _run(lambda: replayed(x)[0]) == expected, source
        again = replayed(x)[1]
        assert again.tobytes() == gradient.tobytes(), source
        np.testing.assert_array_equal(x, kept)
        if k < 2 and "float32" not in source and np.all(np.isfinite(gradient)):
            tangent = np.random.default_rng(k).standard_normal(N)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y, dy = mutad.jvp(f, (x,), (tangent,))
            assert repr(y) == repr(value) and dy == pytest.approx(gradient @ tangent,
                                                                  rel=1e-8, abs=1e-9), source


@pytest.mark.parametrize("ufunc, values", [
    (np.log, [0.0, 1.0]),
    (np.log1p, [-1.0, 1.0]),
    (np.arctanh, [1.0, 1.0]),
    (np.divide, [0.0, 0.0]),
    (np.fmod, [0.0, 0.0]),
    (scipy.special.logit, [0.0, 1.0]),
    (scipy.special.log1p, [-1.0, 1.0]),
    (scipy.special.pseudo_huber, [0.0, 1.0]),
])
def test_a_ufunc_of_python_floats_at_a_pole_has_numpys_derivative(ufunc, values):
    # a partial computed of Python's floats (float(x[0]), x[1].item()) divided by zero as
    # Python does: the gradient raised ZeroDivisionError where the derivative, as of NumPy's
    # scalars (x[0], x[1]), is inf or nan
    def of_floats(x):
        operands = (float(x[0]),) if ufunc.nin == 1 else (float(x[0]), x[1].item())
        return ufunc(*operands) * 1.0

    def of_scalars(x):
        return ufunc(*((x[0],) if ufunc.nin == 1 else (x[0], x[1]))) * 1.0

    x = np.array(values)
    tangent = np.array([1.0, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, grad = mutad.value_and_gradient(of_floats, x, argnums=0)
        assert repr(value) == repr(of_floats(x))
        expected = mutad.gradient(of_scalars, x, argnums=0)
        np.testing.assert_array_equal(grad, expected)
        _, dy = mutad.jvp(of_floats, (x,), (tangent,))
        np.testing.assert_array_equal(dy, mutad.jvp(of_scalars, (x,), (tangent,))[1])
        np.testing.assert_array_equal(mutad.hessian(of_floats, x), mutad.hessian(of_scalars, x))


MASKED_DOMAINS = [
    lambda x: np.ma.log(np.ma.array(x, mask=[0, 0, 0, 1])),     # np.ma's unary function
    lambda x: np.log(np.ma.array(x, mask=[0, 0, 0, 1])),        # NumPy's ufunc of a masked array
    lambda x: np.ma.array(x, mask=[0, 0, 0, 1]) / x[::-1],     # np.ma's division
    lambda x: np.ma.sqrt(np.ma.masked_where(x > 3.5, x)),
]


@pytest.mark.parametrize("make", MASKED_DOMAINS)
def test_a_replayed_masked_domain_is_the_calls_own(make):
    # np.ma masks where a function's domain excludes the data (log of x <= 0, a division by
    # zero): the replay kept the mask of the call it recorded (of the plain values), so a
    # call whose data lie elsewhere summed the wrong elements, in value and gradient
    def f(x):
        return make(x).sum()

    replayed = mutad.value_and_grad(f, replay=True)
    for values in ([1.0, 2.0, 3.0, 4.0], [2.0, -1.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0],
                   [-1.0, 2.0, 3.0, 0.5]):
        x = np.array(values)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = f(x.copy())
            value, grad = replayed(x)
            traced_value, traced_grad = mutad.value_and_grad(f)(x)
        assert repr(value) == repr(expected) == repr(traced_value)
        np.testing.assert_array_equal(grad, traced_grad)
        assert x.tolist() == values


@pytest.mark.parametrize("make", [
    lambda m, x: m[m > 1.0] ** 2,          # a selection of nothing, its mask empty
    lambda m, x: np.ma.power(m[m > 1.0], 3.0),
    lambda m, x: m[1:][m[1:] > 1.0] ** 2,
])
def test_mask_or_shrinks_as_numpys(make):
    # np.ma.mask_or (of np.ma.power, comparisons, var) is nomask where nothing is masked,
    # an empty mask too: mutad kept the mask, whose all() masked the sum of an empty power
    # (np.ma.masked where NumPy sums to 0.0; x[0] is masked, the selection of 0.5 and 0.7 empty)
    def f(x):
        return make(np.ma.masked_less(x, 0.0), x).sum()

    for values in ([-1.0, 0.5, 0.7], [-1.0, 0.5, 2.0]):
        x = np.array(values)
        value, grad = mutad.value_and_grad(f)(x)
        assert repr(value) == repr(f(x.copy()))
        replayed = mutad.value_and_grad(f, replay=True)
        assert repr(replayed(x)[0]) == repr(value)
        assert x.tolist() == values


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
def test_repeated_eigenvalues_of_single_precision_are_not_called_defective(dtype):
    """A diagonalizable matrix's repeated eigenvalues (2·I + a, a traced zero; S diag(2, 2, 3)
    S⁻¹): symmetric functions of them have a derivative, the sum's tr(Ā) = I and the squares'
    Σ w² = tr(A²) 2 Aᵀ. The test of a defective matrix, cond(V) ≥ 1e8 ε, called every float32
    matrix's repeated eigenvalues defective, V = I among them (1e8 ε > 1)."""
    s = np.array([[1.0, 0.3, -0.2], [0.1, 1.0, 0.4], [-0.3, 0.2, 1.0]])
    similar = (s @ np.diag([2.0, 2.0, 3.0]) @ np.linalg.inv(s)).astype(dtype)
    tolerance = 1e-3 if np.finfo(dtype).eps > 1e-10 else 1e-10
    for eigenvalues in (np.linalg.eigvals, lambda a: np.linalg.eig(a)[0]):
        zero = np.zeros((2, 2), dtype)
        (grad,) = mutad.gradient(
            lambda p: np.sum(np.real(eigenvalues(2 * np.eye(2, dtype=dtype) + p))), zero)
        np.testing.assert_allclose(grad, np.eye(2), atol=tolerance)
        assert not np.any(zero)
        kept = similar.copy()
        (grad,) = mutad.gradient(lambda a: np.sum(np.real(eigenvalues(a) ** 2)), similar)
        np.testing.assert_allclose(grad, 2 * np.conj(similar.T), rtol=tolerance, atol=tolerance)
        assert np.array_equal(similar, kept)
        with pytest.raises(UnsupportedOperationError, match="the loss tells them apart"):
            mutad.gradient(lambda a: np.real(eigenvalues(a)[np.argmin(np.abs(eigenvalues(a)))]),
                           similar)
    _, tangent = mutad.jvp(lambda a: np.sum(np.real(np.linalg.eigvals(a))), (similar,),
                           (similar,))
    assert abs(tangent - 7.0) < 7 * tolerance
    jordan = np.array([[2.0, 1.0], [0.0, 2.0]], dtype)
    with pytest.raises(UnsupportedOperationError, match="defective"):
        mutad.gradient(lambda a: np.sum(np.real(np.linalg.eigvals(a))), jordan)
