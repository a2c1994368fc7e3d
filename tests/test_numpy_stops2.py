"""NumPy programs that stopped with an error, or worded NumPy's warnings otherwise, where NumPy
gives a value: each checked as ``test_scipy_stops.check`` does (NumPy's value bit for bit,
reverse mode, forward mode and a replay against central differences, the caller's arrays
unchanged)."""

import warnings

import numpy as np
import pytest
from numpy.lib import recfunctions
from scipy.special import gammaln

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])


# ----------------------------------------------------------------------------------------------
# a library's ufunc bound by a module-level name (``from scipy.special import gammaln``), called
# on a list: the array np.array of the list gives, which traced values may be written into

def _gammaln_of_a_list_written(x):
    g = gammaln([1.5, 2.5, 3.5, 4.5])
    g[0] = x[0] * 2.0
    g[2:] += x[2:] ** 2
    return np.sum(g * x)


def test_module_level_library_ufunc_of_a_list():
    check(_gammaln_of_a_list_written, X)


# ----------------------------------------------------------------------------------------------
# the float arrays np.polynomial makes of plain values written in place: legvander2d's is a
# reshape of a product whose axes NumPy laid out as its operands' (not in order); chebvander of
# an array f made from a list, into which a traced value was written, follows it

def _legvander2d_written(x):
    V = np.polynomial.legendre.legvander2d(np.array([0.1, 0.2, 0.3]),
                                           np.array([0.3, 0.1, 0.5]), [2, 2])
    V[0, :] *= x[0]
    V[:, 1] += x[1] ** 2
    V[1:, 2:4] = x[2:] * x[3]
    return (V ** 2).sum() + V[2] @ V[1]


def _chebvander_of_an_array_made_from_a_list(x):
    a = np.array([0.1, 0.5, 0.9, -0.2])
    a[1] = x[0]
    a[2:] *= x[2:]
    V = np.polynomial.chebyshev.chebvander(a, 3)
    W = np.polynomial.chebyshev.chebvander(np.array([0.2, 0.4]), 2)
    W[1] = x[1:]
    return (V @ x).sum() + (W ** 2).sum()


@pytest.mark.parametrize("f", [_legvander2d_written, _chebvander_of_an_array_made_from_a_list])
def test_np_polynomial_arrays_written(f):
    check(f, X)


# ----------------------------------------------------------------------------------------------
# NumPy's warnings, worded as NumPy words them: an operator of NumPy's scalar on the left of a
# value that stands for a scalar (NumPy's scalar math: "in scalar divide"; np.divide's own call
# says "in divide"), and an assignment that narrows its values (float64 into float32: "in cast")

def _scalar_left_divide(x):
    return np.float64(1.0) / (x[1] - x[1]) * 0.0 + x.sum()


def _scalar_left_float32(x):
    v = x.astype(np.float32)
    return np.float32(1.0) / (v[1] - v[1]) * np.float32(0.0) + v.sum()


def _scalar_left_subtract(x):
    return (np.float64(1e308) - (x[0] * 0.0 - 1e308)) * 0.0 + x.sum()


def _scalar_left_floor_divide_and_remainder(x):
    zero = x[1] - x[1]
    return (np.float64(1.0) // zero) * 0.0 + (np.float64(1.0) % zero) * 0.0 + x.sum()


def _divide_called(x):
    return np.divide(np.float64(1.0), x[1] - x[1]) * 0.0 + x.sum()


def _number_assigned_into_float32(x):
    x32 = x.astype(np.float32)
    x32[...] = 1e300
    return x32.sum() + x.sum()


def _element_assigned_into_float32(x):
    x32 = x.astype(np.float32)
    x32[0] = 1e300
    x32[1] = np.float64(1e300)
    return x32.sum() + x.sum()


def _traced_assigned_into_float32(x):
    x32 = np.zeros(4, np.float32)
    x32[1:] = x[1:] * 1e300
    x32[0] = x[0] * 1e300
    return x32.sum() + x.sum()


def _heard(f, x):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        f(x)
    return [str(w.message) for w in heard if "gradient" not in str(w.message)
            and "tangent" not in str(w.message)]


@pytest.mark.parametrize("f", [_scalar_left_divide, _scalar_left_float32,
                               _scalar_left_subtract, _scalar_left_floor_divide_and_remainder,
                               _divide_called, _number_assigned_into_float32,
                               _element_assigned_into_float32, _traced_assigned_into_float32])
def test_warnings_worded_as_numpys(f):
    expected = _heard(f, X.copy())
    assert expected and all(" in " in m for m in expected)
    assert _heard(lambda x: mutad.gradient(f, x), X.copy()) == expected
    assert _heard(lambda x: mutad.jvp(f, (x,), (np.ones(4),)), X.copy()) == expected
    replayed = mutad.grad(f, replay=True)
    _heard(replayed, X.copy())  # (the recording call)
    assert _heard(replayed, X.copy()) == expected


def _narrowing_assignments(x):
    x32 = x.astype(np.float32) * np.float32(2.0)
    x32[1] = x[0] * 3.0
    x32[:2] = x[2:] ** 2
    x32[2:] = [x[0], 0.5]
    return float((x32.astype(np.float64) ** 2).sum())


def test_narrowing_assignments_differentiated():
    check(_narrowing_assignments, X, rtol=1e-4, atol=1e-4, h=1e-3)


# ----------------------------------------------------------------------------------------------
# numpy.lib.recfunctions.append_fields of records or new fields holding derivatives: NumPy's
# records (dtype, fills), each field that carries a derivative written into them

def _fields_appended_to_traced_records(x):
    r = np.zeros(4, dtype=[("a", float), ("i", int)])
    r["a"] = x
    r["i"] = np.arange(4)
    s = recfunctions.append_fields(r, "b", x ** 2, usemask=False)
    return np.sum(s["a"] * s["b"]) + s["i"].sum()


def _traced_fields_of_other_lengths(x):
    r = np.zeros(4, dtype=[("a", float)])
    r["a"] = np.linspace(0.0, 1.0, 4)
    s = recfunctions.append_fields(r, ["b", "c"], [x[:2] * 3.0, np.sin(x)], usemask=False,
                                   fill_value=2.5)
    return np.sum(s["b"] ** 2 * s["c"] + s["a"])


def _plain_field_appended_as_a_record_array(x):
    r = np.zeros(4, dtype=[("a", float)])
    r["a"] = x * 2.0
    s = recfunctions.append_fields(r, "b", [1.0, 2.0, 3.0, 4.0], dtypes=np.float32,
                                   usemask=False, asrecarray=True)
    return (s.a * s.b).sum()


@pytest.mark.parametrize("f", [_fields_appended_to_traced_records,
                               _traced_fields_of_other_lengths,
                               _plain_field_appended_as_a_record_array])
def test_append_fields_of_derivatives(f):
    check(f, X)


def test_append_fields_as_a_masked_array_refused():
    def f(x):
        r = np.zeros(4, dtype=[("a", float)])
        r["a"] = x
        return recfunctions.append_fields(r, "b", x)["b"].sum()

    with pytest.raises(mutad.MutadError, match="usemask=False"):
        mutad.gradient(f, X)


# ----------------------------------------------------------------------------------------------
# np.asmatrix of traced values: np.matrix(x, copy=False), followed as np.matrix(x) is (a view of
# x's memory, its * the matrix product)

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_asmatrix_of_traced_values():
    def f(x):
        y = x * 1.0
        m = np.asmatrix(y.reshape(2, 2))
        m[0, 1] = 3.0 * x[2]  # writes y[1], as NumPy's view does
        return float((m.I * m.T).sum()) + m.sum() + y.sum()

    check(f, X)
