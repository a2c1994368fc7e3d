"""NumPy programs that stopped with an error of mutad's, or gave another result than NumPy's
(another type, another error)."""

import numpy as np
import pytest
import scipy.stats

import mutad
from test_numpy_stops12 import X, _records
from test_scipy_stops import check


def _error(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001  (the error itself is what is compared)
        return type(e), str(e)
    return None


# ----------------------------------------------------------------------------------------------
# One record of a record array (np.record) or of a structured array (np.void), as NumPy's: a
# scalar, no array; its fields NumPy's scalars (by name, attribute, position, iteration); written
# through, as NumPy's record is a view

def _one_record(r, i):
    e = r[i]
    fields = [e["a"], e[1], *e] + ([e.a] if isinstance(r, np.recarray) else [])
    seen = (e.__class__, isinstance(e, np.ndarray), len(e), e.shape, e.dtype,
            type(e.tolist()), type(e.item()), tuple(v.__class__ for v in fields),
            tuple(v.__class__ for v in r), _error(lambda: e.mask))
    return e, fields, seen


@pytest.mark.parametrize("as_records", [True, False], ids=["recarray", "structured"])
def test_one_record_is_numpys_record(as_records):
    def f(x, seen):
        r = _records(x, as_records)
        e, fields, observed = _one_record(r, 1)
        seen.append(observed)
        r[0]["a"] = x[2] * 3.0  # (through the record)
        return sum(v * k for k, v in enumerate(fields, 1)) * np.sum(r["a"] * r["b"])

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X)
    assert set(seen) == set(numpys)


# ----------------------------------------------------------------------------------------------
# Arrays of objects holding traced numbers: NumPy's ndarray to the program (its class, its
# repr), and its object loop with a float array or number reading their elements as Python's
# numbers, followed

_PRODUCT = np.frompyfunc(lambda a, b: a * b, 2, 1)
_OBJECT_ARRAYS = {
    "frompyfunc": lambda x: _PRODUCT(x, x),
    "frompyfunc_times_element": lambda x: _PRODUCT(x, 2.0) * x[0],
    "frompyfunc_plus_array": lambda x: _PRODUCT(x, x) + x,
    "array_times_element": lambda x: np.array(x, dtype=object) * x[0],
    "element_minus_array": lambda x: x[1] - np.array(x, dtype=object),
    "array_times_array": lambda x: np.multiply(x[::-1], np.array(x, dtype=object)),
}


@pytest.mark.parametrize("name", list(_OBJECT_ARRAYS))
def test_arrays_of_objects_are_numpys_to_the_program(name):
    def f(x, seen):
        o = _OBJECT_ARRAYS[name](x)
        seen.append((o.__class__, isinstance(o, np.ndarray), repr(o).partition("(")[0],
                     o.dtype, tuple(v.__class__ for v in o)))
        total = o.sum()
        seen.append(total.__class__)
        return total * 2.0

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X)
    assert set(seen) == set(numpys)


# ----------------------------------------------------------------------------------------------
# np.broadcast of traced arrays, iterated as NumPy's; a plain np.matrix meeting traced values,
# computed as np.matrix (its * the matrix product, its results matrices)

_A = np.array([[2.0, 0.3, -0.1], [0.3, 1.5, 0.2], [-0.1, 0.2, 1.8]])


def _broadcast(x, seen):
    b = np.broadcast(x[:, None], x[None, ::-1], 2.0)
    seen.append((b.__class__, isinstance(b, np.broadcast), b.shape, b.nd, b.size, b.numiter))
    out = np.empty(b.shape)
    out.flat = [u * v * w for u, v, w in b]
    seen.append((b.index, tuple(v.__class__ for v in next(iter(np.broadcast(x, 1.0))))))
    return out


_MEETINGS = {
    "broadcast": _broadcast,
    "matrix_plus_diagonal": lambda x, seen: np.matrix(_A) + np.diag(x),
    "solve": lambda x, seen: np.linalg.solve(np.matrix(_A) + np.diag(x), np.matrix(x).T),
    "matrix_times_column": lambda x, seen: np.matrix(_A) * x.reshape(3, 1),
    "row_times_matrix": lambda x, seen: x * np.matrix(_A),
    "row_minus_matrix": lambda x, seen: x - np.matrix(_A),
    "matrix_at_row": lambda x, seen: np.matrix(_A) @ x,
}


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("name", list(_MEETINGS))
def test_broadcast_objects_and_matrices_meeting_traced_values(name):
    def f(x, seen):
        y = _MEETINGS[name](x, seen)
        seen.append((y.__class__, y.shape))
        return np.sum(np.asarray(y) ** 2)

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X)
    assert set(seen) == set(numpys)


# ----------------------------------------------------------------------------------------------
# Masked arrays of traced values: m.flat (np.ma.ediff1d reads it), np.unique, NumPy's functions
# that read a masked array as its data (np.vander, np.interp, np.polyfit under np.ma.polyfit,
# np.may_share_memory under scipy's mstats.rankdata); NumPy's error naming NumPy's class


def _masked(x):
    return np.ma.masked_array(np.concatenate([x, x[::-1] * 0.5]), mask=[0, 1, 0, 0, 0, 1])


def _flat_written(x):
    m = _masked(x)
    m.flat[2:4] = np.ma.masked_array(x[:2] * 2.0, mask=[1, 0])
    m.flat[0] = x[2]
    kept = np.stack([v for v in m.flat if v is not np.ma.masked])
    return np.ma.masked_array(kept[:3]) + m.flat[1:4]


_MASKED = {
    "ediff1d": lambda x: np.ma.ediff1d(_masked(x), to_end=x[0]),
    "flat_written": _flat_written,
    "unique": lambda x: np.unique(_masked(x)),
    "unique_index": lambda x: np.unique(_masked(x), return_index=True)[0],
    "vander": lambda x: np.vander(_masked(x)[:3]),
    "interp": lambda x: np.interp([0.1, 0.5], np.linspace(0.0, 1.5, 6), _masked(x)),
    "ma_polyfit": lambda x: np.ma.polyfit(np.arange(6.0), _masked(x), 2),
    "rankdata": lambda x: scipy.stats.mstats.rankdata(x) * x,
}


@pytest.mark.parametrize("name", list(_MASKED))
def test_masked_arrays_in_numpys_functions(name):
    def f(x, seen):
        y = _MASKED[name](x)
        seen.append((y.__class__, np.ma.getmask(y).tobytes()))
        return np.sum(np.ma.getdata(y) ** 2)

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X)
    assert set(seen) == set(numpys)


def test_a_missing_attribute_is_numpys_error():
    f = lambda x: scipy.stats.mstats.tvar(x)  # noqa: E731  (asks x.mask of a plain array)
    numpys = _error(lambda: f(X))
    assert numpys[0] is AttributeError and "numpy.ndarray" in numpys[1]
    assert _error(lambda: mutad.gradient(f, X)) == numpys


# ----------------------------------------------------------------------------------------------
# NumPy's functions of whole records holding traced values: np.diagonal (a read-only view),
# np.unique (NumPy's choice of records, gathered), np.full_like (a new array followed)

def _square_records(x, as_records):
    a = np.concatenate([x, x[:1] * 0.5]).reshape(2, 2)
    if as_records:
        return np.rec.fromarrays([a, a ** 2], names="a,b")
    r = np.zeros((2, 2), dtype=[("a", float), ("b", float)])
    r["a"], r["b"] = a, a ** 2
    return r


def _full_like_written(r):
    y = np.full_like(r, (1.0, 2.0))
    y["a"][0] = r["b"][1, 1]
    return y


_WHOLE_RECORDS = {
    "diagonal": np.diagonal,
    "diagonal_method": lambda r: r.diagonal(),
    "unique": np.unique,
    "unique_repeated": lambda r: np.unique(np.concatenate([r.ravel(), r[0]]),
                                           return_counts=True)[0],
    "full_like": lambda r: np.full_like(r, 0),
    "full_like_written": _full_like_written,
}


@pytest.mark.parametrize("as_records", [True, False], ids=["recarray", "structured"])
@pytest.mark.parametrize("name", list(_WHOLE_RECORDS))
def test_functions_of_whole_records(name, as_records):
    def f(x, seen):
        y = _WHOLE_RECORDS[name](_square_records(x, as_records))
        seen.append((y.__class__, y.dtype, y.shape, y.flags.writeable))
        return np.sum(y["a"] * 3.0 + y["b"] ** 2)

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X)
    assert set(seen) == set(numpys)
