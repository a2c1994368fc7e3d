"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import cmath
import ctypes
import hashlib
import math
import statistics
from statistics import fmean, pstdev

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])
P = np.array([0.5, 1.2, 0.8, 2.0])


# ----------------------------------------------------------------------------------------------
# Python's statistics of traced numbers: each function's formula in NumPy's functions, its value
# statistics' own (which sums exactly), of its type (NumPy's float64 where statistics gives the
# data's type back, a Python float otherwise)

STATISTICS = [
    lambda x: statistics.mean(x) * x[0],
    lambda x: statistics.mean(list(x * x)),
    lambda x: statistics.fmean(x * x),
    lambda x: fmean(x, weights=[1, 2, 3, 4]),
    lambda x: statistics.fmean(x, [0.5, x[1] ** 2, 1.0, 2.0]),
    lambda x: statistics.median(x * 2),
    lambda x: statistics.median(x[:3]),
    lambda x: statistics.median_low(list(x)) + statistics.median_high(list(x)),
    lambda x: statistics.pvariance(x),
    lambda x: statistics.pvariance(x, mu=x[0]),
    lambda x: statistics.variance(list(x)),
    lambda x: statistics.variance(x, 0.25),
    lambda x: pstdev(x),
    lambda x: statistics.stdev(x) * x[2],
    lambda x: statistics.geometric_mean(x * x + 1),
    lambda x: statistics.harmonic_mean(list(x * x + 1)),
    lambda x: statistics.harmonic_mean(x * x + 1, weights=[1.0, 2.0, 1.0, 3.0]),
    lambda x: statistics.covariance(list(x), [1.0, 3.0, 2.0, 5.0]),
    lambda x: statistics.correlation(x, x ** 3),
    lambda x: sum(statistics.linear_regression([1.0, 2.0, 3.0, 4.0], list(x))),
    lambda x: statistics.linear_regression(x, [1.0, 3.0, 2.0, 5.0], proportional=True).slope,
]


@pytest.mark.parametrize("f", STATISTICS)
def test_statistics_of_traced_numbers(f):
    check(f, X)


@pytest.mark.slow
def test_statistics_give_the_types_of_pythons_functions():
    """``statistics.mean`` of NumPy's float64 scalars is one (a strong float64 in NumPy's
    promotion); ``fmean``'s and ``pstdev``'s a Python float (weak)."""
    def f(x):
        a = statistics.mean(x) * np.float32(2)
        b = statistics.fmean(x) * np.ones(2, np.float32)
        assert np.result_type(a) == np.float64 and b.dtype == np.float32
        assert isinstance(statistics.median(x), np.float64)
        return a + statistics.fmean(x) * x[1]
    check(f, X)


def test_statistics_imported_inside_the_function():
    def f(x):
        import statistics as st
        from statistics import pvariance
        return st.fmean(x) * pvariance(x)
    check(f, X)


def test_statistics_errors_are_pythons():
    def f(x):
        return statistics.variance(x[:1])
    with pytest.raises(statistics.StatisticsError):
        mutad.gradient(f, X)


def test_statistics_of_plain_numbers_in_a_differentiation():
    def f(x):
        return x[0] * statistics.mean([1.0, 2.0, 4.0]) + statistics.median([3, 1, 2])
    check(f, X)


# ----------------------------------------------------------------------------------------------
# Python's cmath of traced numbers: NumPy's complex functions, cmath's value

CMATH = [
    lambda x: cmath.exp(complex(x[0], x[1])).real,
    lambda x: abs(cmath.sqrt(x[0] - 1.0)) + cmath.phase(complex(x[1], x[2])),
    lambda x: cmath.log(x[3] + 1j * x[1]).imag + cmath.log(x[3] + 2.0, 10.0).real,
    lambda x: cmath.sin(x[0] + 1j * x[2]).imag * cmath.cosh(x[1] * 1j).real,
    lambda x: cmath.atan(x[2] * (1 + 1j)).real + cmath.asinh(x[1] + 0.5j).imag,
    lambda x: cmath.polar(complex(x[0], x[1]))[0] * cmath.polar(complex(x[2], x[3]))[1],
    lambda x: cmath.rect(x[0], x[1]).imag + cmath.rect(2.0, x[3]).real,
]


@pytest.mark.parametrize("f", CMATH)
def test_cmath_of_traced_numbers(f):
    check(f, X)


def test_cmath_gives_pythons_numbers():
    def f(x):
        z = cmath.exp(x[0] * 1j)
        assert (z * np.ones(2, np.complex64)).dtype == np.complex64
        assert cmath.isfinite(z) and not cmath.isnan(z)
        return z.real
    check(f, X)


# ----------------------------------------------------------------------------------------------
# numpy.polynomial's series of plain coefficients made in the function: their coefficients are
# constants the function may write traced values into, as np.zeros' are

P_ = np.polynomial


@pytest.mark.parametrize("f", [
    lambda x: P_.polynomial.polyval(x[1], _written(P_.Polynomial([1.0, 2.0, 3.0]).coef.copy(), x)),
    lambda x: _series_written(P_.Polynomial([1.0, 2.0, 3.0]), x)(x[1]),
    lambda x: _series_written(P_.Chebyshev([1, 2, 3], domain=[-2, 2]), x)(x[2]),
    lambda x: np.sum(_series_written(P_.Legendre((0.5, 1.5, -1.0)), x).deriv()(x)),
    lambda x: (_series_written(P_.Polynomial([1.0, 2.0, 3.0]), x) ** 2)(x[3]),
    lambda x: np.sum(P_.Hermite([1.0, 2.0]).coef * x[:2]) + P_.Polynomial([1.0, 2.0])(x[0]),
])
def test_series_of_plain_coefficients_take_traced_values(f):
    check(f, X)


def _written(c, x):
    c[0] = x[0] * x[3]
    return c


def _series_written(p, x):
    p.coef[1:] += x[1:3] ** 2
    return p


def test_series_of_plain_coefficients_outside_a_differentiation_are_numpys():
    p = P_.Polynomial([1.0, 2.0, 3.0])
    assert type(p.coef) is np.ndarray and p(2.0) == 17.0


# ----------------------------------------------------------------------------------------------
# Arrays made in the function over memory that is no array's (a ctypes array, by
# np.ctypeslib.as_array) and that nothing else holds: they stand in for themselves as
# np.frombuffer's do, so traced values written into them are followed. Over memory something
# else holds (a name, another object's buffer), which the function may read by another route,
# such a write, as into np.frombuffer's view, is refused (the gradients were x where they are 2x)

def _doubles():
    return (ctypes.c_double * 4)(1.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize("f", [
    lambda x: _scaled(np.ctypeslib.as_array(_doubles()), x),
    lambda x: _scaled(np.ctypeslib.as_array(_doubles())[::2], x[1:3]),
    lambda x: _scaled(np.frombuffer(bytearray(np.ones(4).tobytes())), x),
])
def test_arrays_over_memory_nothing_else_holds_take_traced_values(f):
    check(f, X)


def _scaled(a, x):
    a[:] = a * x
    a += x ** 2
    return np.sum(a ** 2)


def _named_ctypes(x):
    c = _doubles()
    a = np.ctypeslib.as_array(c)
    a *= x
    return np.sum(a * np.array(c[:]))


def _named_bytearray(x):
    b = bytearray(np.ones(4).tobytes())
    y = np.frombuffer(b)
    y *= x
    return (x * np.frombuffer(bytes(b))).sum()


def _ctypes_over_a_bytearray(x):
    b = bytearray(np.ones(4).tobytes())
    y = np.ctypeslib.as_array((ctypes.c_double * 4).from_buffer(b))
    y *= x
    return (x * np.frombuffer(bytes(b))).sum()


def _through_a_pointer(x):
    pointer = ctypes.cast(_doubles(), ctypes.POINTER(ctypes.c_double))
    y = np.ctypeslib.as_array(pointer, shape=(4,))
    y *= x
    return np.sum(y * pointer[0])


@pytest.mark.parametrize("f", [_named_ctypes, _named_bytearray, _ctypes_over_a_bytearray,
                               _through_a_pointer])
def test_writes_into_memory_read_by_another_route_are_refused(f):
    for differentiate in (lambda: mutad.gradient(f, X), lambda: mutad.jvp(f, (X,), (X,))):
        with pytest.raises(mutad.errors.UntracedWriteError, match=r"frombuffer\(b\)\.copy"):
            differentiate()


# ----------------------------------------------------------------------------------------------
# bytes() of an array the function made: NumPy's bytes (as .tobytes() gives them); of a traced
# value, refused as .tobytes() is

def test_bytes_of_a_constant_are_numpys():
    def f(x):
        a = np.frombuffer(bytes(np.ones(4)), dtype=float).copy()
        a[1] = x[0] * x[1]
        key = hashlib.sha1(bytes(np.arange(5.0)[::2])).hexdigest()
        assert key == hashlib.sha1(np.arange(5.0)[::2].tobytes()).hexdigest()
        return np.sum(a * x)
    check(f, X)


def test_bytes_of_a_traced_value_are_refused():
    with pytest.raises(mutad.MutadError, match=r"bytes\(\).*stop_gradient"):
        mutad.gradient(lambda x: float(len(bytes(x * 2))), X)


# ----------------------------------------------------------------------------------------------
# NumPy's digits of a traced number (np.format_float_positional, np.format_float_scientific):
# those of its value, a decision a replay guards

def _digits_decide(x):
    text = np.format_float_positional(x[0], precision=3) + np.format_float_scientific(
        x[1] * x[2], precision=2, unique=False)
    assert text == np.format_float_positional(float(mutad.stop_gradient(x[0])), precision=3) \
        + np.format_float_scientific(float(mutad.stop_gradient(x[1] * x[2])), precision=2,
                                     unique=False)
    return x[3] * len(text) + x[0] ** 2


def test_digits_of_traced_numbers():
    replayed = mutad.grad(_digits_decide, replay=True)
    for x in (X, X * 1.05, X * 10.0, X * 1e-3):  # (other lengths: recorded again)
        expected = np.array([2 * x[0], 0.0, 0.0, 0.0])
        expected[3] = len(np.format_float_positional(x[0], precision=3)
                          + np.format_float_scientific(x[1] * x[2], precision=2, unique=False))
        value, (g,) = mutad.value_and_gradient(_digits_decide, x)
        assert value == _digits_decide(x.copy())
        np.testing.assert_allclose(g, expected)
        np.testing.assert_allclose(replayed(x), expected)


# ----------------------------------------------------------------------------------------------
# NumPy's joins of plain lists (np.concatenate([[0.0, 1.0], [2.0, 3.0]])) and its readers of
# array_like arguments (np.meshgrid, np.polyfit, np.histogram_bin_edges, np.bincount of lists):
# their new float arrays are constants the function may write traced values into, as
# np.array's of the same lists are

MADE_OF_LISTS = [
    lambda: np.concatenate([[0.5, 1.0], [2.0, 3.0]]),
    lambda: np.concatenate(([0.5, 1.0], (2.0, 3.0), [4.0])),
    lambda: np.stack([[0.5, 1.0], [2.0, 3.0]]).ravel(),
    lambda: np.hstack(([0.5, 1.0], [2.0, 3.0])),
    lambda: np.vstack([[0.5, 1.0], [2.0, 3.0]]).ravel(),
    lambda: np.column_stack([[0.5, 1.0], [2.0, 3.0]])[:, ::-1].copy().ravel(),
    lambda: np.histogram_bin_edges([0.0, 1.0, 2.0], bins=3),
    lambda: np.meshgrid([0.5, 1.0, 2.0, 3.0], [1.0])[0].ravel(),
    lambda: np.polyfit([0.0, 1.0, 2.0, 3.0], [1.0, 0.5, 2.0, 1.0], 3),
    lambda: np.real_if_close([1.0 + 0j, 2.0, 3.0, 4.0]),
    lambda: np.bincount([0, 1, 3, 2, 3]).astype(float),
]


@pytest.mark.parametrize("make", MADE_OF_LISTS)
def test_arrays_made_of_lists_take_traced_values(make):
    def f(x):
        a = make()[:4]
        a[0] = x[0] * 2
        a[1:] *= x[1:a.size]
        return np.sum(a * x[:a.size])
    check(f, X)


# ----------------------------------------------------------------------------------------------
# math's functions of several results or an integer operand: modf, frexp, ldexp

@pytest.mark.parametrize("f", [
    lambda x: math.modf(x[2] * 3.3)[0] * x[0] + math.modf(x[1] * 2.5)[1] * x[3],
    lambda x: math.frexp(x[2])[0] * x[0] + math.frexp(x[1] * 5.0)[1] * x[3],
    lambda x: math.ldexp(x[2], 3) + math.ldexp(x[0], -2) * x[1],
])
def test_math_of_pairs_and_exponents(f):
    check(f, X)


def test_math_pairs_are_pythons_numbers():
    def f(x):
        fraction, whole = math.modf(x[2] * 3.3)
        mantissa, exponent = math.frexp(x[2])
        assert type(exponent) is int and exponent == 1
        assert (fraction * np.ones(2, np.float32)).dtype == np.float32
        return fraction + whole + mantissa
    check(f, X)


# ----------------------------------------------------------------------------------------------
# Arrays NumPy makes of plain lists as several views (np.split's pieces) or keeps inside an
# object (np.poly1d's coefficients), and arrays over the memory of one the function made
# (np.from_dlpack): traced values written into them followed

@pytest.mark.parametrize("f", [
    lambda x: _pieces_written(np.array_split([1.0, 2.0, 3.0, 4.0, 5.0], 2), x),
    lambda x: _pieces_written(np.split([1.0, 2.0, 3.0, 4.0], [1, 3]), x),
    lambda x: _pieces_written(np.split((1.0, 2.0, 3.0, 4.0), [2]), x),
    lambda x: _pieces_written(np.array_split([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], 2), x),
    lambda x: sum(p.size * x[k] for k, p in enumerate(  # (NumPy counts the rows: 1, 1, 0)
        np.array_split([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 3, 1))),
    lambda x: _pieces_written(np.array_split([[1.0, 2.0], [4.0, 5.0]], 2, axis=1), x),
])
def test_pieces_of_a_list_take_traced_values(f):
    check(f, X)


def _pieces_written(pieces, x):
    """Writes into the first piece and the last, read back through all of them."""
    pieces[0].flat[0] = x[0] * x[1]
    pieces[-1].flat[-1] += x[2]
    return sum(np.sum(p * x[k]) for k, p in enumerate(pieces))


def test_splits_of_lists_fail_as_numpys():
    """np.split of a list into a number of sections: NumPy's AttributeError (it reads the
    list's shape)."""
    def f(x):
        return np.split([1.0, 2.0, 3.0, 4.0], 2)[0] * x[0]
    with pytest.raises(AttributeError, match="shape"):
        mutad.gradient(f, X)


def test_pieces_of_a_list_share_one_array():
    """A write into one piece of np.array_split's is not seen in the other (their memory does
    not overlap); np.split of the same list twice gives pieces of two arrays."""
    def f(x):
        a, b = np.array_split([1.0, 2.0, 3.0, 4.0], 2)
        c, _ = np.array_split([1.0, 2.0, 3.0, 4.0], 2)
        a[1] = x[0]
        b[0] = x[1]
        return np.sum(a * b) + np.sum(c) * x[2]
    check(f, X)


@pytest.mark.parametrize("f", [
    lambda x: _coefficients_written(np.poly1d([1.0, 2.0, 3.0]).coeffs.copy(), x),
    lambda x: _coefficients_written(np.poly1d([0.5, 2.0], r=True).c.copy(), x),
    lambda x: _coefficients_written(np.poly1d((1, 2, 3)).coeffs.astype(float), x),
    lambda x: _written_in_place(np.poly1d([1.0, 2.0, 3.0]), x),
])
def test_poly1d_coefficients_take_traced_values(f):
    check(f, X)


def _coefficients_written(c, x):
    c[-1] = x[0]
    c[:2] *= x[1:3]
    return np.sum(c * x[1:])


def _written_in_place(p, x):
    p.coeffs[0] = x[3]
    return p(x[1]) + np.polyval(p, x[2]) * p.coeffs[1]


@pytest.mark.parametrize("f", [
    lambda x: _through_dlpack(x, {}),
    lambda x: _through_dlpack(x, {"copy": True}),
    lambda x: _through_dlpack(x, {"copy": False, "device": "cpu"}),
    lambda x: np.sum(np.from_dlpack(x * 2) * x),
])
def test_from_dlpack_of_arrays_the_function_made(f):
    check(f, X)


def _through_dlpack(x, kwargs):
    a = np.zeros(3)
    a[0] = x[0]
    b = np.from_dlpack(a, **kwargs)
    b[1] = x[1] * x[2]
    return np.sum(b * x[1:]) + np.sum(a) * x[3]


def test_from_dlpack_checks_as_numpys():
    def f(x):
        return np.from_dlpack(x * 2, device="gpu")
    with pytest.raises(ValueError) as numpys:
        np.from_dlpack(X, device="gpu")
    with pytest.raises(ValueError, match=str(numpys.value)):
        mutad.gradient(f, X)


class _Sub(np.ndarray):
    pass


def test_view_of_a_constant_as_a_subclass_is_refused_as_a_constants():
    def f(x):
        return np.sum(np.arange(4.0).view(_Sub) * x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="as a constant") as error:
        mutad.gradient(f, X)
    assert "differentiated array" not in str(error.value)


def test_write_into_a_memory_map_made_in_the_function_is_refused_as_one(tmp_path):
    def f(x):
        m = np.memmap(tmp_path / "m.dat", dtype=float, mode="w+", shape=(4,))
        m[:] = x
        return np.sum(m * x)
    with pytest.raises(mutad.MutadError, match="memory map"):
        mutad.gradient(f, X)
