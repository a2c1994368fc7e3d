"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import warnings

import numpy as np
import pytest

import mutad
from mutad import errors
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])
M = np.array([[0.3, -0.7], [1.1, 0.4]])
B = np.matrix([[1.0, 0.5], [2.0, -1.0]])
WEIGHTS = np.arange(4.0).reshape(2, 2)

# ----------------------------------------------------------------------------------------------
# np.frompyfunc's ufuncs: NumPy's object array of what the Python function returns, converted
# back to floats by astype or np.asarray(..., dtype=float), or summed by NumPy's object loops

AFFINE = np.frompyfunc(lambda a, b: a * b + 1.0, 2, 1)
BRANCHED = np.frompyfunc(lambda a: np.sin(a) if a > 0 else a * 2, 1, 1)
PAIR = np.frompyfunc(lambda a: (a * 2, a * a), 1, 2)

FROMPYFUNC = [
    lambda x: AFFINE(x, x[::-1]).astype(float).sum(),
    lambda x: np.exp(BRANCHED(x).astype(np.float64)).sum(),
    lambda x: np.asarray(AFFINE(x, 2.0), dtype=float) @ x,
    lambda x: np.array(AFFINE(x, x), dtype=complex).real.sum(),
    lambda x: (AFFINE(x, [1.0, 2.0, 3.0, 4.0]) * 3).astype(float).sum(),
    lambda x: AFFINE(x, x).sum() * x[0],  # NumPy's object sum: Python's additions in order
    lambda x: AFFINE(x, x)[2] * 2.0 + sum(AFFINE(x, 1.5).tolist()),
    lambda x: AFFINE(x[0], x[1]) * x[2],  # of numbers: the Python object itself
    lambda x: sum(p.astype(float).sum() * q.astype(float).sum() for p, q in [PAIR(x)]),
    lambda x: AFFINE([x[0], x[1]], 2.0).astype(float).prod(),
]


OBJECT_ARRAYS = [  # np.array(..., dtype=object) of traced numbers: the same array of objects
    lambda x: np.asarray(np.array(list(x), dtype=object) * 2, dtype=float) @ x,
    lambda x: np.array([[x[0], 1.5], [x[1] * x[2], 2]], dtype=object).astype(float).prod(),
    lambda x: np.asarray([x[3], x[0]], dtype=object).sum() * x[1],
]


def _filled(x):
    o = np.zeros((2, 2), dtype=object)
    o[0] = x[:2]
    o[1, :] = [x[2], 1.5]
    return (np.array(o, dtype=float) @ x[:2]).sum()


def _stored(x):
    o = np.empty(2, dtype=object)
    o[0] = x  # (one element: the array itself)
    o[1] = x * 2
    return (o[0] * o[1]).sum()


def _scattered(x):
    o = np.empty_like(x, dtype=object)
    o[::2] = x[0]
    o[1::2] = (x[1], x[3])
    return o.astype(float) @ x


def _masked(x):
    o = np.empty(4, dtype=object)
    o[np.array([True, False, True, True])] = x[1:] * 3
    o[1] = 2.0
    return np.asarray(o, dtype=np.float64).prod()


OBJECT_WRITES = [  # traced values written into an array of objects the function made
    lambda x: (lambda o: (o.__setitem__(slice(None), list(x * 2)), o.astype(float) @ x)[1])(
        np.empty(4, dtype=object)),
    _filled, _stored, _scattered, _masked,
    lambda x: (lambda o: (o.__setitem__(slice(1, None), x[1:3] ** 2), o.__setitem__(0, x[0]),
                          o.sum() * x[3])[2])(np.full(3, None)),
]


@pytest.mark.parametrize("f", OBJECT_WRITES)
def test_traced_values_written_into_an_array_of_objects(f):
    check(f, X)


def test_an_array_of_objects_made_in_the_function_keeps_numpys_values():
    def f(x):
        o = np.empty(3, dtype=object)
        o[:] = ["a", 2, None]
        assert o.tolist() == ["a", 2, None] and o.shape == (3,) and isinstance(o, np.ndarray)
        o[1:] = [x[0], x[1]]
        assert o[0] == "a"
        return o[1] * o[2]
    check(f, X)


def test_an_array_of_objects_holding_plain_numbers_computes_with_traced_arrays_as_before():
    def f(x):
        o = np.zeros(4, dtype=object)
        o[1:] = [2, 3.5, 1]
        return (x * o).astype(float).sum() + x[0]
    check(f, X)


def test_an_array_of_objects_holding_traced_numbers_with_a_traced_array_is_numpys_loop():
    def f(x):  # (NumPy's object loop: the float array's elements as Python's floats)
        o = np.empty(4, dtype=object)
        o[:] = list(x)
        return (o * x).astype(float).sum()
    check(f, X)


@pytest.mark.parametrize("f", OBJECT_ARRAYS)
def test_object_arrays_of_traced_numbers_convert_back_to_floats(f):
    check(f, X)


@pytest.mark.parametrize("f", FROMPYFUNC)
def test_frompyfunc_of_traced_values(f):
    check(f, X)


PYFUNC_METHODS = [  # NumPy's loop on arrays of the traced elements: its order of calls
    lambda x: AFFINE.reduce(x) * x[1],
    lambda x: AFFINE.accumulate(x).astype(float) @ x,
    lambda x: (AFFINE.outer(x, x[::-1]).astype(float) ** 2).sum(),
    lambda x: AFFINE.outer(x[:2], [1.0, 2.5, -1.0]).astype(float).sum(axis=0) @ x[1:],
    lambda x: AFFINE.reduce(x.reshape(2, 2).T, axis=1).astype(float) @ x[:2],
    lambda x: AFFINE.accumulate(x.reshape(2, 2), axis=0).astype(float).sum(axis=1) @ x[2:],
    lambda x: AFFINE.reduceat(x, [0, 2]).astype(float) @ x[1:3],
    lambda x: AFFINE.reduce(x, initial=2.0) + AFFINE.outer(x[0], x[1]),
]


@pytest.mark.parametrize("f", PYFUNC_METHODS)
def test_frompyfunc_methods_of_traced_values(f):
    check(f, X)


OBJECT_MEANS = [  # NumPy's mean of objects: their sum (Python's additions) over their count
    lambda x: AFFINE(x, 0.5).mean() * x[0],
    lambda x: np.mean(AFFINE(x, x)) + x[1],
    lambda x: AFFINE(x.reshape(2, 2), 1.5).mean(axis=0).astype(float) @ x[:2],
    lambda x: AFFINE(x.reshape(2, 2).T, x[:2]).mean(axis=1, keepdims=True).astype(float).sum(),
]


@pytest.mark.parametrize("f", OBJECT_MEANS)
def test_mean_of_objects_of_traced_values(f):
    check(f, X)


OBJECTS_JOINED = [  # NumPy's functions of arrays of objects holding traced numbers: the same
    lambda x: np.concatenate([AFFINE(x, x), AFFINE(x, 1.0)]).astype(float) @ np.arange(8.0),
    lambda x: np.stack([AFFINE(x, 2.0), AFFINE(x[::-1], x)], axis=1).astype(float).sum(axis=0)
    @ x[:2],
    lambda x: np.hstack((AFFINE(x[:2], 3.0), [2.0, 1.0])).astype(float).prod(),
    lambda x: np.array(AFFINE(x, x)).astype(float) @ x,
    lambda x: np.copy(AFFINE(x, 0.5)).astype(np.float64).sum() * x[2],
    lambda x: np.where(X > 0, AFFINE(x, x), 1.0).astype(float) @ x,
    lambda x: np.fromiter(AFFINE(x, x), float) @ x,
    lambda x: np.fromiter(AFFINE(x, 2.0), np.float64, count=3).sum() * x[3],
]


@pytest.mark.parametrize("f", OBJECTS_JOINED)
def test_functions_of_objects_holding_traced_values(f):
    check(f, X)


SQUARED_OBJECTS = np.vectorize(lambda a: a * a, otypes=[object])
SPLIT_OBJECTS = np.vectorize(lambda a, b: (a * b, a - b), otypes=[object, float])

VECTORIZED_OBJECTS = [  # np.vectorize(f, otypes=[object]): NumPy's array of what f returned
    lambda x: SQUARED_OBJECTS(x).astype(float) @ x,
    lambda x: SQUARED_OBJECTS(x.reshape(2, 2).T).astype(float).sum(axis=0) @ x[1:3],
    lambda x: SQUARED_OBJECTS(x).sum() * x[0],
    lambda x: (lambda p, q: p.astype(float) @ q)(*SPLIT_OBJECTS(x, x[::-1])),
]


@pytest.mark.parametrize("f", VECTORIZED_OBJECTS)
def test_vectorize_with_object_otypes_of_traced_values(f):
    check(f, X)


def test_vectorize_with_object_otypes_lays_out_its_result_as_numpys():
    assert SQUARED_OBJECTS(M.T).flags.f_contiguous

    def f(m):
        y = SQUARED_OBJECTS(m.T)
        assert y.flags.f_contiguous and y.dtype == object
        return (y.astype(float) * WEIGHTS).sum()
    check(f, M)


def test_frompyfunc_method_with_out_is_refused():
    x = X.copy()
    with pytest.raises(errors.UnsupportedOperationError, match="reduce.*out="):
        mutad.gradient(lambda x: AFFINE.reduce(x, out=np.empty((), object)), x)
    assert x.tobytes() == X.tobytes()


def test_frompyfunc_lays_out_its_result_as_numpys_and_astype_keeps_that_order():
    """Of a transposed operand the ufunc's output is in Fortran order, and astype (order 'K')
    keeps it: a sum then adds in that memory order, as NumPy's."""
    assert AFFINE(M.T, 2.0).astype(float).flags.f_contiguous
    def f(m):
        y = AFFINE(m.T, 2.0).astype(float)
        assert y.flags.f_contiguous
        return (y * WEIGHTS).sum() + y.sum(axis=0) @ y[:, 1]
    check(f, M)


def test_frompyfunc_of_traced_values_to_second_order():
    cubic = np.frompyfunc(lambda a, b: a * b * a + 1.0, 2, 1)
    x = X.copy()
    expected = mutad.hessian(lambda x: (x * x * x[::-1]).sum(), x)
    np.testing.assert_allclose(
        mutad.hessian(lambda x: cubic(x, x[::-1]).astype(float).sum(), x), expected,
        rtol=1e-13, atol=1e-13)
    assert x.tobytes() == X.tobytes()


def test_frompyfunc_objects_with_a_traced_array_are_numpys_loop():
    check(lambda x: (AFFINE(x, 1.0) * x).astype(float).sum(), X)


# ----------------------------------------------------------------------------------------------
# np.matrix of traced values with a plain np.matrix, and np.bmat of them

MATRICES = [
    lambda x: float((np.matrix(x.reshape(2, 2) + np.eye(2) * 2).I * B[:, :1]).sum()),
    lambda x: float((B * np.matrix(x.reshape(2, 2))).sum()),
    lambda x: float((np.asmatrix(x.reshape(2, 2)) * B * np.matrix(x.reshape(2, 2))).sum()),
    lambda x: float((B - np.asmatrix(x.reshape(2, 2))).A[0, 1] + (np.matrix(x.reshape(2, 2)) + B).sum()),
    lambda x: float(np.bmat([[np.asmatrix(x.reshape(2, 2)), B],
                             [x.reshape(2, 2), np.asmatrix(x.reshape(2, 2)) ** 2]]).sum()),
    lambda x: float((np.bmat([x, x]) * np.ones((8, 1))).sum()),
    lambda x: float(np.concatenate([np.asmatrix(x.reshape(2, 2)), B]).sum()),
]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("f", MATRICES)
def test_matrices_of_traced_values_with_plain_ones(f):
    check(f, X)


MATRIX_WARNINGS = {
    "np.matrix": lambda a: np.matrix(np.diag(a)).sum(),
    "np.matrix of constants": lambda a: (np.matrix(np.eye(2)) * a[0]).sum(),
    "np.asmatrix": lambda a: np.asmatrix(np.diag(a)).sum(),
    "M.I": lambda a: np.asmatrix(np.diag(a)).I.sum(),
    "M.I, not square": lambda a: np.asmatrix(np.outer(a, [1.0, 2.0, 3.0])).I.sum(),
    "M * M": lambda a: (np.asmatrix(np.diag(a)) * np.matrix(np.diag(a))).sum(),
    "M * 2": lambda a: (np.asmatrix(np.diag(a)) * 2.0).sum(),
    "M @ A": lambda a: (np.asmatrix(np.diag(a)) @ np.ones((2, 2))).sum(),
    "np.bmat": lambda a: np.bmat([[np.asmatrix(np.diag(a)), np.asmatrix(np.diag(a))]]).sum(),
}


@pytest.mark.parametrize("name", MATRIX_WARNINGS)
def test_matrix_warnings_are_numpys(name):
    """NumPy's PendingDeprecationWarning of each matrix it makes: as many, from the same
    lines (np.matrix's at its caller's, asmatrix's and a method's at NumPy's own), where
    mutad's check of the plain values' matrix issued its own from mutad's line, and M.I and
    M * B (asmatrix in NumPy's) none."""
    f = MATRIX_WARNINGS[name]
    issued = []
    for run in (f, lambda a: mutad.gradient(f, a)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(np.array([2.0, 3.0]))
        issued.append([(w.category, str(w.message), w.filename, w.lineno) for w in caught])
    assert issued[0] == issued[1]
    assert issued[0]


def test_vectorize_lays_out_its_result_as_numpys_beside_a_number():
    """A number beside a transposed operand has strides 0 in NumPy's iteration, which then
    follows the operand's (Fortran) order: np.vectorize's output is in that order too."""
    doubled = np.vectorize(lambda a, b: a * b)
    assert doubled(M.T, 2.0).flags.f_contiguous

    def f(m):
        y = doubled(m.T, 2.0)
        assert y.flags.f_contiguous
        return (y * WEIGHTS).sum() + y.sum(axis=1) @ y[0]
    check(f, M)


# ----------------------------------------------------------------------------------------------
# A user's ndarray subclass: refused with what to do instead, naming the subclass


class Field(np.ndarray):
    def __array_finalize__(self, obj):
        self.unit = getattr(obj, "unit", "m")


@pytest.mark.parametrize("f", [lambda x: (x.view(Field) * 2).sum(),
                               lambda x: np.asarray(x * 2).view(Field).sum(),
                               lambda x: np.zeros(4).view(Field).sum() + x.sum()])
def test_a_users_ndarray_subclass_is_refused_naming_it_and_the_fix(f):
    x = X.copy()
    with pytest.raises(errors.UnsupportedOperationError,
                       match="not Field.*compute with the plain array"):
        mutad.gradient(f, x)
    assert x.tobytes() == X.tobytes()


# ----------------------------------------------------------------------------------------------
# np.ma: accumulations and a shrunk mask of masked arrays of traced values

MASKED = [
    lambda x: np.ma.masked_less(x, 0).cumsum().sum(),
    lambda x: (np.ma.array(x.reshape(2, 2), mask=[[0, 1], [0, 0]]).cumsum(axis=0) ** 2).sum(),
    lambda x: np.ma.masked_greater(x, 1.0).cumprod().filled(2.0) @ x,
    lambda x: np.ma.masked_values(x, 0.3).sum() * x[0],
    lambda x: np.ma.masked_values(x, 0.25).sum() + float(np.ma.masked_values(x, 0.25).mask),
]


@pytest.mark.parametrize("f", MASKED)
def test_masked_accumulations_and_shrunk_masks(f):
    check(f, X)
