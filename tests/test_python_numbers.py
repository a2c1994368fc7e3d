"""Python's numbers as arguments: weakly typed in NumPy's promotion (NEP 50), in every mode.

float32 * 0.3 is float32 in NumPy, where float32 * np.float64(0.3) is float64. A float argument
is traced as a value that stands for a Python number, and so is Python's arithmetic on such
values (``k * k``, ``-k``, ``2 ** k``), so a program computes, differentiated, exactly what it
computes with NumPy: the same dtype and the same bits. A NumPy function of one
(``np.sin(k)``) is NumPy's scalar, strong, as NumPy makes it. The gradient of a float argument
is a float.
"""

import math
import operator
import warnings

import numpy as np
import pytest
import scipy.linalg

import mutad

U = (np.arange(6) - 2.5) / 3
MASK = np.array([True, False, True, True, False, False])


def product(u, k):
    return ((u * k) ** 2).sum()


def arithmetic_on_k(u, k):
    scale = k * k - 0.5 * k + 2 ** k + abs(-k) - k / 3 + divmod(k, 0.2)[1] + k // 0.07
    scale -= k ** 0.5
    return ((u * scale) ** 2).sum() + (-k) * k


def element_loop(u, k):
    total = 0.0
    for i in range(len(u)):
        total = total + (u[i] * k) ** 2 - k * u[i]
    return total


def in_place(u, k):
    v = u.copy()
    v *= k
    v += k / 3
    v[1:] -= k * v[:-1]
    np.multiply(v, 1.0 + k, out=v)
    return (v * v).sum()


def functions(u, k):
    return ((np.where(MASK, k, u) + np.clip(u, -k, k) + np.maximum(u, 0.5 * k)) ** 2).sum()


def strong_numpy_scalar(u, k):
    return (u * np.sin(k)).sum() + (u * k).sum()  # np.sin(k) is a float64 NumPy scalar


def python_float_of_scipy(u, k):
    # scipy.linalg.norm of a vector is BLAS's nrm2, a Python float: weak as k is (a float32 u
    # times it stays float32; mutad's was a float64 NumPy scalar, which widened the product)
    n = scipy.linalg.norm(u * k)
    return ((u * n) ** 2).sum() + n * k


PROGRAMS = [product, arithmetic_on_k, element_loop, in_place, functions, strong_numpy_scalar,
            python_float_of_scipy]


def same(a, b):
    """The same type, dtype and bits (a Python float as a Python float)."""
    if type(a) is not type(b):
        return False
    return np.asarray(a).dtype == np.asarray(b).dtype and \
        np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_values_and_gradients_are_numpys(f, dtype):
    u, k = U.astype(dtype), 0.3
    before = u.tobytes()
    expected = f(u.copy(), k)
    for policy in ("restore", "checkpoint"):
        value, (du, dk) = mutad.value_and_gradient(f, u, k, policy=policy)
        assert same(value, expected), (value, expected)
        assert du.dtype == dtype and type(dk) is float
        assert u.tobytes() == before
        assert same(mutad.value_and_gradient(f, u, k, argnums=0)[0], expected)
        du0 = mutad.gradient(f, u, k, argnums=0)
        assert du0.dtype == dtype and du0.tobytes() == du.tobytes()
        assert u.tobytes() == before
    # the derivative, against the float64 program's
    du64, dk64 = mutad.gradient(f, U.copy(), k)
    rtol = {np.float16: 3e-2, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(du, du64, rtol=rtol, atol=rtol)
    assert dk == pytest.approx(dk64, rel=rtol, abs=rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_forward_mode_values_are_numpys(f, dtype):
    u, k = U.astype(dtype), 0.3
    before = u.tobytes()
    expected = f(u.copy(), k)
    value, tangent = mutad.jvp(f, (u, k), (np.ones_like(u), 1.0))
    assert same(value, expected), (value, expected)
    assert np.asarray(tangent).dtype == np.asarray(expected).dtype
    assert u.tobytes() == before
    du, dk = mutad.gradient(f, U.copy(), k)
    rtol = {np.float16: 3e-2, np.float32: 1e-4}[dtype]
    assert float(tangent) == pytest.approx(du.sum() + dk, rel=rtol, abs=rtol)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_replayed_and_compiled_calls_are_the_traced_ones(f):
    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    u = U.astype(np.float32)
    for k in (0.3, 0.4, 0.3, 0.7, 0.3):  # records, replays, then runs compiled blocks
        before = u.tobytes()
        value, (du, dk) = replaying(u, k)
        assert u.tobytes() == before
        expected = mutad.value_and_gradient(f, u.copy(), k)
        assert same(value, expected[0]) and same(value, f(u.copy(), k))
        assert du.tobytes() == expected[1][0].tobytes() and dk == expected[1][1]


def test_a_result_of_python_arithmetic_only_is_a_python_float():
    assert mutad.value_and_gradient(lambda k: k * k, 0.3) == (0.09, (0.6,))
    value, slope = mutad.jvp(lambda k: 3.0 * k - k, (0.3,), (1.0,))
    assert type(value) is float and value == 3.0 * 0.3 - 0.3 and slope == 2.0


def test_complex_python_numbers_are_weak_too():
    u = U.astype(np.float32)

    def f(u, z):
        return np.abs(u * z).sum()

    expected = f(u, 0.3 + 0.4j)
    value, (du, dz) = mutad.value_and_gradient(f, u, 0.3 + 0.4j)
    assert same(value, expected) and du.dtype == np.float32 and type(dz) is complex
    assert same(mutad.jvp(f, (u, 0.3 + 0.4j), (np.ones_like(u), 1j))[0], expected)


@pytest.mark.parametrize("memory", [None, 0])
def test_recomputed_and_rebuilt_values_read_the_number(memory):
    """Large arrays: temporaries the reverse pass recomputes, and (under a budget) writes it
    redoes from snapshots, read a float argument as the Python number it is."""
    u = np.linspace(-1, 1, 5000, dtype=np.float32)

    def f(u, k):
        t = u * k                      # recomputed, not kept
        w = np.sin(t)
        v = u.copy()
        for _ in range(3):
            v[1:] = v[:-1] * k + w[1:]  # an assignment: rebuilt under a budget
        return (v * t).sum()

    before = u.tobytes()
    value, (du, dk) = mutad.value_and_gradient(f, u, 0.3, memory=memory)
    assert u.tobytes() == before
    assert same(value, f(u.copy(), 0.3))
    exact = mutad.value_and_gradient(f, u, 0.3, policy="checkpoint")
    assert du.dtype == np.float32 and du.tobytes() == exact[1][0].tobytes()
    assert type(dk) is float and dk == exact[1][1]


def test_nested_levels_keep_the_number_weak():
    """A float argument of an outer level, passed to an inner one, is still a Python number."""
    u = U.astype(np.float32)

    def inner_gradient(k):
        du, = mutad.gradient(lambda u: product(u, k), u)
        assert du.dtype == np.float32
        return (du * u).sum()

    value, slope = mutad.jvp(inner_gradient, (0.3,), (1.0,))
    assert np.asarray(value).dtype == np.float32 and np.asarray(slope).dtype == np.float32
    assert same(mutad.value_and_gradient(inner_gradient, 0.3)[0], inner_gradient(0.3))
    np.testing.assert_allclose(slope, 4 * 0.3 * (u.astype(float) ** 2).sum(), rtol=1e-5)
    assert mutad.hessian(lambda k: product(u, k), 0.3) == pytest.approx(
        2 * (u.astype(float) ** 2).sum(), rel=1e-5)


# ----------------------------------------------------------------------------------------------
# Numbers outside argnums: passed as they are


def gmm_like(x, gamma, shift=0.0):
    """Python's own functions of the numbers no gradient is asked of."""
    return math.log(gamma) * (x * x).sum() + float(gamma) * x[0] + math.copysign(1.0, shift)


def test_numbers_outside_argnums_are_passed_as_they_are():
    x = np.array([1.0, 2.0, 3.0])
    before = x.copy()
    g = mutad.grad(gmm_like)(x, 2.0)
    np.testing.assert_allclose(g, 2 * math.log(2.0) * x + np.array([2.0, 0.0, 0.0]))
    assert np.array_equal(x, before)
    value, g = mutad.value_and_grad(gmm_like)(x, np.float64(3.0), shift=-0.0)
    assert value == gmm_like(x, 3.0, -0.0)
    # Selected, a number is differentiated, so Python's float() of it is refused.
    with pytest.raises(mutad.errors.ConversionError):
        mutad.grad(gmm_like, argnums=1)(x, 2.0)
    # argnums=None asks for every gradient: all traced, as before.
    with pytest.raises(mutad.errors.ConversionError):
        mutad.gradient(gmm_like, x, 2.0)


def test_replay_keys_a_plain_number_by_its_bits():
    x = np.array([1.0, 2.0, 3.0])
    replayed = mutad.value_and_grad(gmm_like, replay=True)
    traced = mutad.value_and_grad(gmm_like)
    for gamma, shift in [(2.0, 0.0), (2.0, 0.0), (5.0, 0.0), (2.0, -0.0), (2.0, -0.0),
                         (2.0, 0.0), (5.0, 0.0)]:
        (v1, g1), (v2, g2) = replayed(x, gamma, shift), traced(x, gamma, shift)
        assert v1 == v2 and np.array_equal(g1, g2)


def test_a_replay_traces_once_numbers_outside_argnums_change_on_every_call():
    def heat(u, r):
        u = u.copy()
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        return (u * u).sum()
    u = np.linspace(0.0, 1.0, 7) ** 2
    replayed = mutad.grad(heat, replay=True)
    for i in range(8):
        assert np.array_equal(replayed(u, 0.1 + i / 100), mutad.grad(heat)(u, 0.1 + i / 100))
    assert "numbers outside argnums" in replayed.reasons
    followed = mutad.grad(heat, argnums=(0, 1), replay=True)
    for i in range(8):
        followed(u, 0.1 + i / 100)
    assert not followed.reasons


def test_a_broadcast_of_a_python_number_is_an_array():
    # np.broadcast_to(k, shape) shares k's memory but is an array, strong in NumPy's promotion.
    u = U.astype(np.float32)

    def f(k):
        return (np.broadcast_to(k, (3, 1)) * u).sum() ** 2

    expected = f(0.4)
    value, (dk,) = mutad.value_and_gradient(f, 0.4)
    assert same(value, expected)
    assert same(mutad.jvp(f, (0.4,), (1.0,))[0], expected)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, 0.4, policy=policy)
    mutad.check_jvp(f, 0.4)
    mutad.check_grads(f, 0.4, order=2)


@pytest.mark.parametrize("f", [
    lambda x: x[0] ** x[1],
    lambda x: 2.0 ** x[0] + x[1] ** 3.7,
    lambda x: x[0] ** -1.5 + x[1] ** 2,
    lambda x: (x.astype(np.float32)[0] ** x[1]).astype(float),
    lambda x: abs(x[0] * 1j + x[1]) ** x[1],
    lambda x: abs((x[0] + 1j * x[1]) ** (0.3 + 0.1j)),
    lambda x: ((x[0] + 1j * x[1]) ** 2 + (x[1] + 1j * x[0]) ** 0.5).real
    + ((x[0] - 1j * x[1]) ** -1).imag,
    lambda x: (x.astype(np.float32)[0] ** 2.0 + x.astype(np.float32)[1] ** 0.5).astype(float),
], ids=["power", "powers-of-numbers", "fast-powers", "float32", "abs-complex", "complex-power",
        "complex-fast-powers", "float32-fast-powers"])
def test_powers_and_magnitudes_of_numpys_scalars_are_its_scalar_math(f):
    """NumPy's scalars compute ** and abs() in their own math, which rounds otherwise than
    the ufunc loops in about one case in twenty: the values are the scalars' (the partials the
    loops'), and a replay gives the traced bits."""
    rng = np.random.default_rng(3)
    replayed = mutad.value_and_grad(f, replay=True)
    for _ in range(60):
        x = rng.random(2) + 0.1
        value, g = mutad.value_and_grad(f)(x)
        assert value == f(x) and mutad.jvp(f, (x,), (np.ones(2),))[0] == f(x)
        again, h = replayed(x)
        assert again == value and np.array_equal(h, g)
    if "float32" not in f.__code__.co_names:  # float32's rounding: finite differences fail
        mutad.check_grads(f, x)


def test_a_number_computed_from_constants_is_immutable_as_numpys_scalars_are():
    """x[0] - x[1] of an array the function allocated is NumPy's scalar: ``a += 1`` rebinds
    ``a`` and leaves ``b``, another name for the old value, as it was. The traced constant was
    a writable 0-d array, written in place: ``b`` changed too (a wrong value)."""
    def f(w):
        x = np.array([0.0, 1.0, 2.0])
        a = x[0] - x[1]
        b = a
        a += 1.0
        return (w * b).sum() + a

    w = np.array([1.0, 2.0, 3.0])
    value, (g,) = mutad.value_and_gradient(f, w)
    assert value == f(w) and np.array_equal(g, [-1.0, -1.0, -1.0])


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_number_standing_for_numpys_scalar_fills_and_puts_into_a_copy(mode):
    """NumPy's scalars fill and put into a copy of themselves (no effect) and refuse item
    assignment with a TypeError: a traced number computed from constants was written in
    place (a wrong value), then, read-only, raised NumPy's ValueError."""
    def f(x):
        z = np.array([3.0, 1.0])
        a, b = z[0] - z[1], x[0] * 2.0
        a.fill(1.0)
        b.put(0, 9.0)
        with pytest.raises(TypeError, match="does not support item assignment"):
            a[...] = 1.0
        return x.sum() * a + b

    x = np.array([1.5, 2.0, 3.0])
    if mode == "reverse":
        value, (g,) = mutad.value_and_gradient(f, x)
        assert value == f(x.copy()) and np.array_equal(g, [4.0, 2.0, 2.0])
    else:
        value, tangent = mutad.jvp(f, (x,), (np.ones(3),))
        assert value == f(x.copy()) and tangent == 8.0


def indexes_numpys_scalars(x):
    y = x[0][...]        # NumPy: a new, writable 0-d array
    y += 1.0
    z = x.sum()[None]    # and a new 1-d one
    z *= 2.0
    w = x[1][()]         # the scalar itself
    return (x * x).sum() + y * 3.0 + z[0] + w


def test_indexing_a_value_that_stands_for_numpys_scalar_gives_a_new_array():
    """x[0][...] is a new writable array in NumPy: under mutad it was a read-only view, and
    `y += 1` raised."""
    x = np.arange(1.0, 4.0)
    assert mutad.value_and_grad(indexes_numpys_scalars)(x)[0] == indexes_numpys_scalars(x)
    mutad.check_grads(indexes_numpys_scalars, x, order=2)


PYTHON_COMPLEX = {
    "1j * np.sin(d) / n": lambda x: (1j * np.sin(x[0]) / 1.38).imag,
    "abs of it": lambda x: abs(1j * np.sin(x[0]) / 1.38),
    "1j * d / n": lambda x: (1j * x[0] / 1.38).imag,
    "a power and a quotient": lambda x: ((2 + 1j) ** np.cos(x[0]) / (1.5 - x[0] * 1j)).real,
    "a float over a complex": lambda x: (3.0 / (1j + np.sin(x[0]))).imag,
    "augmented": lambda x: _augmented(x),
}


def _augmented(x):
    z = 1j * x[0]
    z /= 0.7
    z **= 2.5
    z *= x[0]
    return z.real + z.imag


@pytest.mark.parametrize("name", PYTHON_COMPLEX)
def test_a_python_complex_and_numpys_float64_compute_with_pythons_arithmetic(name):
    """1j * np.float64(d) is Python's complex (NumPy's float64 is a Python float), so its
    quotients and powers are Python's, which round otherwise than NumPy's loops: mutad's
    values were one ulp off for about half the inputs (thin-film transfer matrices)."""
    f = PYTHON_COMPLEX[name]
    for t in np.random.default_rng(1).random(40) * 3 + 0.1:
        x = np.array([t])
        assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, np.array([0.7]), order=2)


def scalars_on_the_left(x):
    """NumPy's scalars on the left of elements and of the Python numbers ``.item()`` reads."""
    import operator as op
    c = x.dtype.type(1.3 + 0.2j) if x.dtype.kind == "c" else x.dtype.type(1.3)
    t, e = x[0].item(), x[1]
    s = c
    s **= t
    values = [c ** t, t ** c, c ** e, e ** c, c * t, c * e, op.pow(c, t), pow(c, e),
              op.mul(c, t), s, np.power(c, t), np.multiply(c, e)]
    return sum(np.real(v) for v in values[1:]) + np.real(values[0])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
def test_numpys_scalars_on_the_left_of_numbers_are_its_scalar_math(dtype):
    """Regression: ``np.float32(1.3) ** x[0].item()`` reaches the ufunc, not the operand's
    ``__rpow__`` (NumPy's scalar calls ``np.power``), and the engine took the loop's value,
    1.482228 where NumPy's scalar math gives 1.4822279; the Python number beside float32's
    scalar was then taken as the float64 scalar the engine holds, widening the math."""
    rng = np.random.default_rng(7)
    replayed = mutad.value_and_grad(scalars_on_the_left, replay=True)
    for _ in range(40):
        x = rng.uniform(0.2, 2.0, 2).astype(dtype)
        if x.dtype.kind == "c":
            x += (1j * rng.uniform(-1, 1, 2)).astype(dtype)
        before = x.tobytes()
        expected = scalars_on_the_left(x)
        value, g = mutad.value_and_grad(scalars_on_the_left)(x)
        assert same(value, expected)
        assert same(mutad.jvp(scalars_on_the_left, (x,), (x,))[0], expected)
        again, h = replayed(x)
        assert same(again, expected) and np.array_equal(h, g)
        assert x.tobytes() == before


PYTHONS_EVENTS = {
    # Python's complex arithmetic (beside NumPy's float64, a Python float) raises no
    # floating-point event: nan+infj, silently
    "1j * (d + inf)": (np.array([1.0]), lambda x: 1j * (x[0] + np.inf)),
    "(inf+0j) * d": (np.array([0.0]), lambda x: complex(np.inf, 0.0) * x[0]),
    "d * (inf+0j)": (np.array([-0.0]), lambda x: x[0] * complex(np.inf, 0.0)),
    # ZeroDivisionError, as Python's, and no warning before it
    "1j / d": (np.array([0.0]), lambda x: 1j / x[0]),
    "z.item() ** -1": (np.array([complex(np.inf, 0.0)]), lambda z: z[0].item() ** -1),
    "2.0 ** z.item()": (np.array([complex(-np.inf, 1.0)]), lambda z: 2.0 ** z[0].item()),
    # NumPy's complex scalar product warns (inf * 0) where its loop is silent
    "z * nan": (np.array([complex(np.inf, 0.0)]), lambda z: z[0] * np.nan),
    "inf * z": (np.array([complex(np.nan, 0.0)]), lambda z: np.inf * z[0]),
    # and of an overflow otherwise (the loop warns of one only, or of one where it is silent)
    "z * z": (np.array([1e200 + 1e200j]), lambda z: z[0] * z[0]),
    "z * 0j": (np.array([-1e308 + 1e308j]), lambda z: z[0] * 0j),
}


def _outcome(compute, x):
    """The bits of ``compute(x)`` (its parts), or its error, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        try:
            result = np.complex128(mutad.stop_gradient(compute(x))).tobytes()
        except (ArithmeticError, ValueError) as error:
            result = (type(error), str(error))
    return result, [str(w.message) for w in heard]


@pytest.mark.parametrize("raising", [False, True])
@pytest.mark.parametrize("name", PYTHONS_EVENTS)
def test_pythons_arithmetic_and_numpys_scalar_math_raise_their_own_events(name, raising):
    """Regression: ``1j * (x[0] + np.inf)`` warned of an invalid value (raised under
    ``np.errstate(all="raise")``) where Python's complex product, which computes it, is
    silent; NumPy's complex scalar product ``z[0] * nan``, which warns, was silent."""
    x, compute = PYTHONS_EVENTS[name]
    errors = "raise" if raising else "warn"
    with np.errstate(all=errors):
        expected = _outcome(compute, x)
    heard = []

    def f(x):
        with np.errstate(all=errors):
            heard.append(_outcome(compute, x))
        return x.real.sum()

    mutad.gradient(f, x.copy())
    with warnings.catch_warnings(record=True) as tangents:  # (issued once f has returned)
        warnings.simplefilter("always")
        mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
    assert heard == [expected, expected]
    if type(expected[0]) is tuple:  # Python raised: no tangent of a value it did not compute
        # (regression: 1j / x[0] at 0.0 warned "divide by zero ..., in a tangent", and
        # under np.errstate(all="raise") raised it once f had returned)
        assert [str(w.message) for w in tangents] == []


COMPLEX_FLOORS = {  # NumPy's scalars and Python's numbers have no floor division of complex
    # numbers: their TypeError, not the ufunc's ("ufunc 'floor_divide' not supported ...")
    "//": operator.floordiv, "%": operator.mod, "divmod": divmod,
    "//=": operator.ifloordiv, "%=": operator.imod,
}


@pytest.mark.parametrize("name, reflected", [(name, reflected) for name in COMPLEX_FLOORS
                                              for reflected in (False, True)])
def test_floor_division_of_complex_numbers_is_numpys_or_pythons_type_error(name, reflected):
    """Regression: ``1j // x[0]`` raised the ufunc's TypeError, where NumPy's scalar's is
    "unsupported operand type(s) for //: 'complex' and 'numpy.complex128'"; and ``n //= x[0]``
    of a number ``n`` (whose ``//=`` is x[0]'s ``__rfloordiv__``) said "//" where Python says
    "//="."""
    operation = COMPLEX_FLOORS[name]
    cases = [(dtype, read, other) for dtype, others in ((np.complex128, (2, 0.5, 1j, np.int64(3),
                                                                         np.complex128(1j))),
                                                        (np.float64, (1j, np.complex64(1j))))
             for read in (lambda x: x[0], lambda x: x[0].item()) for other in others
             if not (reflected and name == "divmod" and isinstance(other, np.generic))]
    # (divmod(np.int64(3), z[0]) is the ufunc np.divmod, which NumPy's complex scalars have no
    # loop of either)
    for dtype, read, other in cases:
        def compute(x):
            s = read(x)
            try:
                operation(other, s) if reflected else operation(s, other)
            except TypeError as error:
                return str(error)
            return None

        x = np.array([1.5 - 2j if dtype is np.complex128 else 1.5], dtype)
        expected = compute(x)
        heard = []

        def f(x):
            heard.append(compute(x))
            return x.real.sum() if dtype is np.complex128 else x.sum()

        mutad.gradient(f, x.copy())
        mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
        assert expected is not None and heard == [expected, expected], (dtype, other, heard)
