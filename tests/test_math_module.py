"""Python's ``math`` functions of traced scalars (``math.sqrt(a[k, k] - s)`` in a textbook
Cholesky) are followed through their ufuncs, with ``math``'s own values: NumPy's loops round
``exp``, ``tanh``, ``log1p`` otherwise than ``math`` on a good share of inputs, and the value
must be what the user's code computes."""

import math
from math import sqrt as imported_sqrt

import numpy as np
import pytest

import mutad
from test_replay import replayed_like_traced

# Inputs where NumPy's loops and math round differently (found by search), and plain ones.
DIFFERING = {"exp": 1.980020015883229, "log": 0.9943506260861206, "tanh": 1.828687377544729,
             "log1p": 3.3458470992506837, "atan": 0.37959068352453507}

UNARY = ["sqrt", "exp", "expm1", "log1p", "log10", "log2", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "tanh", "asinh", "atanh", "fabs", "degrees", "radians", "erf",
         "erfc", "gamma", "lgamma", "log", "cbrt", "exp2"]


@pytest.mark.parametrize("name", [n for n in UNARY if hasattr(math, n)])
def test_a_math_function_of_a_traced_scalar_is_followed(name):
    function = getattr(math, name)
    point = DIFFERING.get(name, 0.3)
    f = lambda x: function(x[0]) * x[1]  # noqa: E731
    x = np.array([point, 1.5])
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert value == function(point) * 1.5  # math's value, bit for bit
    mutad.check_grads(f, x)
    assert mutad.jvp(f, (x,), (np.ones(2),))[0] == value
    assert x.tolist() == [point, 1.5]


@pytest.mark.parametrize("f", [
    lambda x: math.atan2(x[0], x[1]), lambda x: math.hypot(x[0], x[1]),
    lambda x: math.hypot(x[0], x[1], x[0]), lambda x: math.pow(x[0], x[1]),
    lambda x: math.log(x[0], x[1]), lambda x: math.copysign(x[0], -1.0),
    lambda x: imported_sqrt(x[0] - 0.5 * x[1]),
], ids=("atan2", "hypot", "hypot of three", "pow", "log with a base", "copysign",
        "from math import sqrt"))
def test_math_functions_of_two_traced_scalars(f):
    x = np.array([2.0, 1.5])
    assert mutad.value_and_gradient(f, x)[0] == f(x)
    mutad.check_grads(f, x)


def test_math_imported_in_the_body_is_followed():
    def f(x):
        import math as m
        return m.tanh(x[0]) * x[1]

    x = np.array([DIFFERING["tanh"], 2.0])
    assert mutad.value_and_gradient(f, x)[0] == f(x)


def test_a_replay_gives_maths_values():
    def f(x):
        s = 0.0
        for name in ("exp", "tanh", "log1p"):
            s = s + getattr(math, name)(x[0]) * x[1]
        return s

    replaying = replayed_like_traced(f, [(np.array([DIFFERING["exp"], 1.0]),),
                                         (np.array([DIFFERING["tanh"], 2.0]),),
                                         (np.array([DIFFERING["log1p"], 3.0]),)])
    assert not replaying.reasons and len(replaying.programs) == 1


def test_a_replay_puts_maths_value_in_without_recording_again():
    """Regression: where math's value differs from the ufunc's, the replay's step (which
    holds NumPy's scalar where tracing held a 0-d array) could not be written into, so every
    such call failed its guards and recorded again, and after a few was traced for good (as
    a Jacobi eigenvalue sweep with ``math.atan2`` and ``math.cos`` was). The step that makes
    the value now gives math's, before its record (exp's partial reads it) keeps it."""
    def f(x):
        s = 0.0
        for name in ("exp", "tanh", "log1p", "atan"):
            s = s + getattr(math, name)(x[0]) * x[1]
        return s + math.exp(x[1] * 0.5)

    calls = [(np.array([DIFFERING[name], k + 1.0]),)
             for k, name in enumerate(("exp", "tanh", "log1p", "atan", "exp"))]
    replaying = replayed_like_traced(f, calls, traced_once=True)
    assert not replaying.reasons


def test_a_math_function_of_a_complex_traced_scalar_takes_its_real_part_as_numpy():
    """Regression: math.sin(z[1]) of a complex element raised float()'s TypeError on the
    0-d array; NumPy's complex scalar gives math its real part (with a ComplexWarning), and
    the derivative is that of the real part."""
    def f(x):
        z = x.astype(np.complex128) * (1 + 2j)
        return math.sin(z[1]) * (z * z).real.sum() + math.hypot(z[0], x[1])

    x = np.array([0.3, 0.7])
    with pytest.warns(np.exceptions.ComplexWarning):
        expected = f(x.copy())
    with pytest.warns(np.exceptions.ComplexWarning):
        value, grad = mutad.value_and_gradient(f, x)
    assert value == expected
    h = 1e-6
    with pytest.warns(np.exceptions.ComplexWarning):
        fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(grad[0], fd, rtol=1e-7)
    with pytest.warns(np.exceptions.ComplexWarning):
        _, d = mutad.jvp(f, (x,), (np.ones(2),))
    assert d == pytest.approx(sum(fd), rel=1e-7)
    with pytest.warns(np.exceptions.ComplexWarning):
        replayed_like_traced(f, [(x * s,) for s in (1.0, 2.0, 3.0)])


def test_math_of_an_array_is_refused_as_math_refuses_it():
    with pytest.raises(TypeError):
        mutad.gradient(lambda x: math.exp(x), np.ones(2))


def test_math_predicates_of_a_traced_scalar_are_decisions():
    """math.isfinite, isnan and isinf of a traced scalar (a sanity check in a solver) raised a
    ConversionError; they answer as np.isfinite does, a decision a replay checks again."""
    from math import isnan

    def f(x):
        s = (x * x).sum()
        if not math.isfinite(s) or isnan(s) or math.isinf(s):
            return s
        return 2.0 * s if math.isfinite(math.log(x[0])) else -s

    x = np.array([0.5, 2.0])
    assert mutad.value_and_gradient(f, x)[0] == f(x)
    mutad.check_grads(f, x)
    assert mutad.jvp(f, (x,), (np.ones(2),))[0] == f(x)
    replayed_like_traced(f, [(x,), (x * 2.0,), (x,)])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_a_math_function_gives_a_python_float_whatever_the_precision(dtype):
    """math computes in double precision and gives a Python float, which NumPy promotes weakly:
    math.exp of a float32 element was a float32 (rounded to single precision), and
    x32 * math.exp(a) of a float64 element a float64."""

    def f(x, a):
        s = 0.0
        for i in range(x.size):
            s += math.exp(x[i]) * math.sin(x[i])
        y = x * math.exp(a[0]) + math.cos(x[1])  # NumPy: x's dtype
        return s + y.sum()

    x, a = np.linspace(0.1, 2.0, 7).astype(dtype), np.array([0.3])
    before = x.tobytes(), a.tobytes()
    expected = f(x, a)
    value, grads = mutad.value_and_gradient(f, x, a)
    assert type(value) is type(expected) and value == expected  # the dtype and the bits
    assert grads[0].dtype == dtype
    tangents = (np.ones_like(x), np.ones(1))
    assert mutad.jvp(f, (x, a), tangents)[0] == expected
    if dtype is np.float64:
        mutad.check_grads(f, x, a)
    replayed_like_traced(f, [(x, a), (x * dtype(1.5), a + 0.25), (x, a)])
    assert (x.tobytes(), a.tobytes()) == before


def test_math_isclose_of_traced_scalars_is_a_decision(rng):
    """math.isclose of traced scalars (a convergence test) raised a ConversionError; it
    answers as math.isclose does on the same doubles (ties, NaN, infinities, float32 elements,
    the tolerances), a decision a replay checks again."""
    specials = [0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0 + 2e-9, np.inf, -np.inf, np.nan, 1e-300, 3.0]
    pairs = [(a, b) for a in specials for b in specials]
    pairs += [tuple(rng.standard_normal(2) * 10.0 ** rng.integers(-3, 3)) for _ in range(50)]
    pairs += [(a, a * (1 + rng.choice([1e-10, 1e-9, 2e-9]))) for a in rng.standard_normal(30)]
    tolerances = [{}, {"rel_tol": 1e-3}, {"abs_tol": 1e-9}, {"rel_tol": 0.0, "abs_tol": 0.5}]
    # (all the pairs, as the rows of one array, in one differentiation per mode, dtype and
    # tolerances: each comparison is still of traced elements, and of one with a float)
    for dtype in (np.float64, np.float32):
        rows = np.array(pairs, dtype=dtype)
        for kw in tolerances:
            expected = [math.isclose(float(a), float(b), **kw) for a, b in rows]
            answers = []

            def f(x):
                for i in range(len(rows)):
                    answers.append((math.isclose(x[i, 0], x[i, 1], **kw),
                                    math.isclose(x[i, 0], float(rows[i, 1]), **kw)))
                return x.sum() * 2.0
            mutad.gradient(f, rows)
            mutad.jvp(f, (rows,), (np.ones_like(rows),))
            for i, (a, b) in enumerate(pairs):
                for answer in (answers[i], answers[len(rows) + i]):
                    assert answer == (expected[i],) * 2, (a, b, kw, dtype)

    def converged(x):
        s = (x * x).sum()
        return 3.0 * s if math.isclose(s, 1.0, rel_tol=1e-6) else s

    x = np.array([0.6, 0.8])
    assert mutad.value_and_gradient(converged, x)[0] == converged(x)
    mutad.check_grads(converged, x * 1.1)
    replayed_like_traced(converged, [(x,), (x * 2.0,), (x,), (x * 0.5,)], replayed=False)
    with pytest.raises(ValueError):
        mutad.gradient(lambda x: x[0] if math.isclose(x[0], x[1], rel_tol=-1.0) else x[1], x)


def kalman_loglikelihood(q):
    """A textbook Kalman filter accumulating its log-likelihood in a Python float through
    ``.item()`` of 1x1 matrices."""
    x, p = np.zeros(2), np.eye(2)
    f, h = np.array([[1.0, 0.1], [0.0, 1.0]]), np.array([[1.0, 0.0]])
    total = 0.0
    for t in range(12):
        x = f @ x
        p = f @ p @ f.T + q[0] * np.eye(2)
        s = h @ p @ h.T + q[1]
        k = p @ h.T / s
        r = np.sin(0.3 * t) - h @ x
        x += (k * r).ravel()
        p -= k @ h @ p
        total += (r ** 2 / s).item() + math.log(s.item())
    return total


def test_item_gives_a_python_number_that_is_followed():
    """``.item()`` of a value depending on the arguments was refused as a conversion cutting
    the gradient: it gives a traced value standing for the Python number (as math's functions
    do), NumPy's value bit for bit, in both modes and replayed."""
    q = np.array([0.3, 0.5])
    before = q.tobytes()
    value, _ = mutad.value_and_grad(kalman_loglikelihood)(q)
    assert value == kalman_loglikelihood(q.copy()) and type(value) is float
    mutad.check_grads(kalman_loglikelihood, q, modes=("rev", "fwd"))
    replayed_like_traced(kalman_loglikelihood, [(q * (1 + 0.3 * i),) for i in range(4)])
    assert q.tobytes() == before


def test_item_and_tolist_as_numpy_gives_them():
    """A float32 element's ``.item()`` is a Python float, which NumPy promotes weakly; an
    index picks the element; ``.tolist()`` nests them; NumPy's errors are NumPy's; an integer
    has no derivative."""

    def f(x):
        s = x.astype(np.float32).sum().item()
        w = x.astype(np.float32) * s
        assert w.dtype == np.float32
        rows = x.tolist()
        assert type(rows) is list and len(rows[1]) == 2
        return (w.sum() + rows[1][0] * x.item(0) + x.item((1, 1)) ** 2
                + x.argmax().item() * x[0, 0] + (x * 1j).sum().item().imag)

    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    before = x.tobytes()
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(lambda x: x.tolist()[0][1] * x.item(3) + sum(map(sum, x.tolist())), x,
                      modes=("rev", "fwd"))
    with pytest.raises(ValueError, match="size 1"):
        mutad.gradient(lambda x: x.item(), x)
    assert x.tobytes() == before


SEQUENCES = {
    "fsum": lambda x: math.fsum(x * x) * x[0],
    "fsum of a generator": lambda x: math.fsum(t ** 3 for t in x) + 1.0,
    # math's one rounding: 1e16 cancels exactly, which NumPy's pairwise sum would not
    "fsum cancelling": lambda x: math.fsum([x[0], 1e16, x[1] * 0.1, -1e16, 0.3]) * x[2],
    "dist": lambda x: math.dist(x[:2], [0.0, 1.0]) + math.dist(x, x[::-1] * 2.0),
}
if hasattr(math, "sumprod"):
    SEQUENCES["sumprod"] = lambda x: math.sumprod(x, [1.0, 2.0, x[0]])


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_math_of_sequences_of_traced_scalars_is_followed_with_maths_value(name, rng):
    # math.fsum and math.dist converted their traced items: a ConversionError
    f = SEQUENCES[name]
    x = rng.standard_normal(3)
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    assert x.tobytes() == before
    mutad.check_grads(f, x)
    replaying = replayed_like_traced(f, [(x,), (rng.standard_normal(3),),
                                         (rng.standard_normal(3),)])
    assert not replaying.reasons and len(replaying.programs) == 1


def test_math_fsum_of_what_math_cannot_take_is_maths_call():
    with pytest.raises(TypeError, match="not iterable"):
        mutad.gradient(lambda x: math.fsum(5.0) * x[0], np.ones(3))
    with pytest.raises(mutad.errors.ConversionError):  # math would take the real part
        mutad.gradient(lambda x: math.fsum(x + 1j), np.ones(3))
