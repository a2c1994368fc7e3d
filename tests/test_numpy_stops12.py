"""NumPy programs that stopped with an error of mutad's, or gave another result than NumPy's
(another type, a value where NumPy raises)."""

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1])


# ----------------------------------------------------------------------------------------------
# NumPy's functions of record arrays: a record array exactly where NumPy's is one (np.concatenate,
# np.copy, np.where and np.asarray give plain structured arrays, whose fields are no attributes)

_OF_RECORDS = {
    "concatenate": lambda r: np.concatenate([r, r]),
    "stack": lambda r: np.stack([r, r]),
    "where": lambda r: np.where(np.array([True, False, True]), r, r[::-1]),
    "copy": lambda r: np.copy(r),
    "asarray": lambda r: np.asarray(r),
    "array": lambda r: np.array(r),
    "array_subok": lambda r: np.array(r, subok=True),
    "asanyarray": lambda r: np.asanyarray(r),
    "ascontiguousarray": lambda r: np.ascontiguousarray(r),
    "view_ndarray": lambda r: r.view(np.ndarray),
    "reshape": lambda r: np.reshape(r, (3, 1)),
    "take": lambda r: np.take(r, [2, 0]),
    "flip": lambda r: np.flip(r),
    "method_copy": lambda r: r.copy(),
    "astype": lambda r: r.astype(r.dtype),
}


def _records(x, as_records):
    if as_records:
        return np.rec.fromarrays([x, x ** 2], names="a,b")
    r = np.zeros(len(x), dtype=[("a", float), ("b", float)])
    r["a"], r["b"] = x, x ** 2
    return r


@pytest.mark.parametrize("as_records", [True, False], ids=["recarray", "structured"])
@pytest.mark.parametrize("name", list(_OF_RECORDS))
def test_functions_of_record_arrays_give_numpys_types(name, as_records):
    def f(x, seen):
        y = _OF_RECORDS[name](_records(x, as_records))
        seen.append((isinstance(y, np.recarray), hasattr(y, "a"), y is not None))
        return np.sum(np.sin(y["b"]) * np.arange(1, y.size + 1).reshape(y.shape))

    numpys = []
    f(X, numpys)
    seen = []
    check(lambda x: f(x, seen), X, replay=False)
    assert set(seen) == set(numpys)


# ----------------------------------------------------------------------------------------------
# np.ma.apply_along_axis: np.ma's object array of the results, as a masked array of them

_MASK = [[0, 1, 0], [0, 0, 0]]
_ALONG = {
    "number": (lambda v: v.sum(), 1, _MASK),
    "line": (lambda v: v * 2, 1, _MASK),
    "line_along_0": (lambda v: v ** 2, 0, _MASK),
    "masked_results": (lambda v: v.sum(), 0, [[0, 1, 0], [0, 1, 0]]),
    "no_mask": (lambda v: np.sin(v).mean(), 1, np.ma.nomask),
}


@pytest.mark.parametrize("name", list(_ALONG))
def test_masked_apply_along_axis_gives_numpys_masked_array(name):
    func1d, axis, mask = _ALONG[name]

    def f(x, seen):
        y = np.ma.apply_along_axis(func1d, axis, np.ma.masked_array(x.reshape(2, 3), mask=mask))
        seen.append((y.__class__, y.dtype, y.shape, np.ma.getmask(y) is np.ma.nomask,
                     y.fill_value))
        return np.sum(y.filled(-7.0) * np.arange(1, y.size + 1).reshape(y.shape) ** 2)

    numpys, seen = [], []
    f(np.arange(6.0), numpys)
    check(lambda x: f(x, seen), np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2]))
    assert set(seen) == set(numpys)


def test_masked_apply_over_axes_and_expand_dims():
    mask = np.array([[0, 1, 0], [0, 0, 0]])
    check(lambda x: np.sum(np.ma.apply_over_axes(
        np.ma.sum, np.ma.masked_array(x.reshape(2, 3), mask=mask), [1]).filled(0.5) ** 2),
        np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2]))


def test_masked_compress_rows_reads_the_data():
    mask = np.array([[0, 1, 0], [0, 0, 0]])
    check(lambda x: np.sum(np.ma.compress_rows(np.ma.masked_array(x.reshape(2, 3), mask=mask))
                           ** 2), np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2]))


def test_library_code_applying_along_an_axis_of_masked_arrays():
    import scipy.stats  # (np.ma.apply_along_axis of each row's Harrell-Davis quantiles)
    check(lambda x: np.sum(scipy.stats.mstats.hdquantiles(x.reshape(2, 3), axis=1) ** 2),
          np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2]))


# ----------------------------------------------------------------------------------------------
# np.apply_along_axis and np.apply_over_axes of plain arrays, their function computing with
# the differentiated values it closes over (NumPy's loop stored them in its plain buffer)

_ROWS = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [0.0, 1.0, 1.0], [-2.0, 0.5, 0.3]])
_PLAIN_OPERANDS = {
    "along_rows": lambda w: np.apply_along_axis(lambda row: np.tanh(row @ w), 1, _ROWS),
    "along_columns": lambda w: np.apply_along_axis(lambda col: col * w[:1] + col ** 2, 0,
                                                   _ROWS),
    "along_made_array": lambda w: np.apply_along_axis(lambda v: np.sin(v * w), 1,
                                                      np.ones((2, 3))),
    "over_axes": lambda w: np.apply_over_axes(lambda a, axis: np.sum(a * w, axis), _ROWS,
                                              [0, 1]),
    "over_axes_of_made_array": lambda w: np.apply_over_axes(
        lambda a, axis: np.sum(a * w, axis), np.ones((2, 3)), [0]),
}


@pytest.mark.parametrize("name", list(_PLAIN_OPERANDS))
def test_applying_along_axes_of_plain_arrays_a_function_closing_over_traced_values(name):
    before = _ROWS.tobytes()
    check(lambda w: np.sum(_PLAIN_OPERANDS[name](w) ** 2), np.array([0.3, -0.7, 1.1]))
    assert _ROWS.tobytes() == before


# ----------------------------------------------------------------------------------------------
# f returning a masked array of one element: its value NumPy's masked array, its gradient the
# data's

def _masked_output(x):
    return np.ma.masked_array(np.ma.masked_array(x, mask=[0, 1, 0]).sum() * x[1])


def test_a_masked_array_of_one_element_as_the_output():
    x = np.array([0.3, -0.7, 1.1])
    numpys = _masked_output(x)
    value, (g,) = mutad.value_and_gradient(_masked_output, x)
    assert type(value) is np.ma.MaskedArray and repr(value) == repr(numpys)
    assert (np.ma.getmask(value) is np.ma.nomask) == (np.ma.getmask(numpys) is np.ma.nomask)
    np.testing.assert_allclose(g, [x[1], x[0] + x[2], x[1]])
    replayed = mutad.grad(_masked_output, replay=True)
    for _ in range(3):
        np.testing.assert_allclose(replayed(x), g)
    with pytest.raises(mutad.MutadError, match="masked"):
        mutad.gradient(lambda x: np.ma.masked_array(x[:1], mask=[1]), x)


# ----------------------------------------------------------------------------------------------
# A copy-on-write memory map written by a ufunc's out=: the memory map's fix, as an assignment's


def test_a_copy_on_write_memory_map_written_in_place_is_refused_as_one(tmp_path):
    np.arange(3.0).tofile(tmp_path / "m.dat")

    def f(x):
        m = np.memmap(tmp_path / "m.dat", dtype=float, mode="c", shape=(3,))
        m += x
        return np.sum(m * x)
    with pytest.raises(mutad.MutadError, match="mode='c'"):
        mutad.gradient(f, np.array([0.3, -0.7, 1.1]))


# ----------------------------------------------------------------------------------------------
# Arrays of objects made of a float array's numbers: NumPy's Python floats (not NumPy's
# scalars), followed, and so the results of their arithmetic Python floats too (their mean,
# NumPy's float64)

_OBJECTS = {
    "astype": lambda x: (x.astype(object) ** 2).sum(),
    "astype_fortran": lambda x: (lambda o: (o.T @ o).sum())(
        np.asfortranarray(x.reshape(2, 3)).astype(object)),
    "array": lambda x: (np.array(x, dtype=object) * 2.0).sum() ** 2,
    "asarray": lambda x: np.asarray(x, dtype=object).mean(),
    "written": lambda x: (lambda o: (o.__setitem__(slice(None), x * 2), o.sum())[1])(
        np.zeros(6, dtype=object)),
    "frompyfunc_reduce": lambda x: np.frompyfunc(lambda a, b: a + b * b, 2, 1).reduce(x),
}


@pytest.mark.parametrize("name", list(_OBJECTS))
def test_objects_of_a_float_arrays_numbers_are_pythons_floats(name):
    f = _OBJECTS[name]
    x = np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2])
    assert type(mutad.value_and_gradient(f, x)[0]) is type(f(x.copy()))
    check(f, x)
