"""NumPy programs that stopped with an error of mutad's, or another error than NumPy's, where
NumPy gives a value or raises its own."""

import numpy as np
import pytest
import scipy.stats

import mutad
from numpy.lib import recfunctions as rfn
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])


# ----------------------------------------------------------------------------------------------
# np.errstate inside f: a category set to "call" with no callback raises NumPy's NameError


def _called_without_a_callback(x):
    with np.errstate(divide="call", invalid="ignore"):
        return (x / np.zeros(4)).sum() + np.log(x - 1.0).sum()


@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x),
    lambda f, x: mutad.grad(f, replay=True)(x),
    lambda f, x: mutad.jvp(f, (x,), (x,)),
], ids=["reverse", "replay", "forward"])
def test_a_category_set_to_call_with_no_callback_raises_numpys_name_error(differentiate):
    with pytest.raises(NameError) as numpys:
        _called_without_a_callback(X)
    with pytest.raises(NameError) as ours:
        differentiate(_called_without_a_callback, X)
    assert str(ours.value) == str(numpys.value)


def _warned_beside_a_call_with_no_callback(x):
    with np.errstate(divide="call", invalid="warn"):
        modes = np.geterr()
        y = np.sqrt(x)  # (invalid at the negative x)
    assert modes["divide"] == "call" and modes["invalid"] == "warn"
    return np.nansum(y)


@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x),
    lambda f, x: mutad.grad(f, replay=True)(x),
    lambda f, x: mutad.jvp(f, (x,), (x,)),
], ids=["reverse", "replay", "forward"])
def test_warnings_beside_a_category_set_to_call_with_no_callback_name_the_users_line(
        differentiate):
    with pytest.warns(RuntimeWarning, match="invalid value") as numpys:
        _warned_beside_a_call_with_no_callback(X)
    with pytest.warns(RuntimeWarning, match="invalid value") as ours:
        differentiate(_warned_beside_a_call_with_no_callback, X)
    assert [(w.filename, w.lineno) for w in ours] == [(w.filename, w.lineno) for w in numpys]


# ----------------------------------------------------------------------------------------------
# np.lib.recfunctions' merge_arrays and stack_arrays of differentiated values: NumPy's records,
# each field that carries a derivative written into them

RECORD = np.dtype([("a", float), ("b", float)])


def _records(x, dtype=RECORD):
    r = np.zeros(2, dtype=dtype)
    r["a"] = x[:2]
    r["b"] = x[2:] ** 2
    return r


def _weighted(r):
    """The fields of ``r`` (records in records too), each summed and weighted by its place."""
    return sum((_weighted(r[name]) if r.dtype.fields[name][0].names is not None
                else r[name].sum()) * (i + 1.5) for i, name in enumerate(r.dtype.names))


RECFUNCTIONS = [
    lambda x: _weighted(rfn.merge_arrays((x[:2], x[2:]), flatten=True)),
    lambda x: _weighted(rfn.merge_arrays((_records(x), x[2:]))),  # records in records
    lambda x: _weighted(rfn.merge_arrays((_records(x), x[2:], np.arange(2.0)), flatten=True)),
    lambda x: _weighted(rfn.merge_arrays(x)),  # one array: NumPy's view of it
    lambda x: _weighted(rfn.merge_arrays((x.reshape(2, 2), x[1:3] * 3))),
    lambda x: rfn.merge_arrays((x[:2], x[2:]), asrecarray=True).f1 @ x[:2],
    lambda x: _weighted(rfn.stack_arrays((_records(x), _records(x[::-1])), usemask=False)),
    lambda x: rfn.stack_arrays((x[:2], x[2:] * 3), usemask=False) @ x,
    lambda x: _weighted(rfn.stack_arrays(
        (_records(x), np.zeros(2, [("a", float), ("c", float)])), usemask=False,
        defaults={"b": 0.5, "c": 2.5})),  # NumPy's defaults where an array lacks the field
]


def _renamed_and_written(x):
    r = _records(x)
    renamed = rfn.rename_fields(r, {"a": "c"})  # (NumPy's view of the records)
    renamed["c"][1] = x[3] * 2
    return _weighted(r) + _weighted(renamed)


ALIGNED = np.dtype([("a", np.float64), ("b", np.float64)], align=True)
NESTED = np.dtype([("a", float), ("inner", [("p", float), ("q", float)])])


def _nested(x):
    r = np.zeros(2, NESTED)
    r["a"] = x[:2]
    r["inner"]["p"] = x[2:] * 3
    r["inner"]["q"] = x[:2] ** 2
    return r


RECFUNCTIONS += [
    lambda x: _weighted(rfn.drop_fields(_records(x), "a")),
    lambda x: _weighted(rfn.drop_fields(_nested(x), ["p", "zz"])),
    _renamed_and_written,
    lambda x: _weighted(rfn.repack_fields(_records(x))),  # (packed already: the records)
    lambda x: _weighted(rfn.repack_fields(_records(x[::-1], ALIGNED)[::-1], align=False)),
    lambda x: _weighted(rfn.require_fields(_records(x), [("b", float), ("z", float),
                                                         ("a", np.float64)])),
    lambda x: _weighted(rfn.require_fields(_nested(x), NESTED)),
]


@pytest.mark.parametrize("f", RECFUNCTIONS)
def test_merge_and_stack_arrays_of_differentiated_values(f):
    check(f, X)


def test_stack_arrays_converting_fields_keeps_numpys_values():
    def stacked(x, dtype):  # (float32 values: their derivative the float64 ones')
        return _weighted(rfn.stack_arrays((_records(x), _records(x[::-1], dtype)),
                                          usemask=False, autoconvert=True))

    converted = [("a", np.float32), ("b", float)]
    value, g = mutad.value_and_gradient(stacked, X, converted, argnums=0)
    assert np.asarray(value).tobytes() == np.asarray(stacked(X, converted)).tobytes()
    np.testing.assert_array_equal(g, mutad.gradient(stacked, X, RECORD, argnums=0))


@pytest.mark.parametrize("f", [
    lambda x: rfn.stack_arrays((_records(x), _records(x))),
    lambda x: rfn.merge_arrays((x[:2], x[2:]), usemask=True),
])
def test_recfunctions_masked_results_are_refused_naming_usemask(f):
    with pytest.raises(mutad.MutadError, match="usemask=False"):
        mutad.gradient(lambda x: _weighted(f(x).filled()), X)


# ----------------------------------------------------------------------------------------------
# NumPy's functions of text (np.strings, np.char) of differentiated values: text holds no
# derivative, so numbers parsed back from it are constants, as from str(x[0]) or x.astype(str)

TEXT = [  # (f, its gradient: the text's numbers, constants)
    (lambda x: (np.char.mod("%.17g", x).astype(float) * x).sum(), lambda x: x),
    (lambda x: (np.strings.mod("%.6e", x).astype(float) * x).sum(),
     lambda x: np.array([float(f"{v:.6e}") for v in x])),
    (lambda x: (np.char.str_len(np.char.mod("%.3f", x)) * x).sum(),
     lambda x: np.array([len(f"{v:.3f}") for v in x], float)),
    (lambda x: (x.astype("U25").astype(float) + np.char.mod("%.17g", x).astype(float)) @ x,
     lambda x: 2 * x),
]


@pytest.mark.parametrize("f, gradient", TEXT)
def test_text_of_differentiated_values_is_a_constant(f, gradient):
    replayed = mutad.grad(f, replay=True)
    for x in (X, X * 1.05):
        value, (g,) = mutad.value_and_gradient(f, x)
        assert np.asarray(value).tobytes() == np.asarray(f(x)).tobytes()
        np.testing.assert_array_equal(g, gradient(x))
        _, tangent = mutad.jvp(f, (x,), (np.ones(4),))
        np.testing.assert_allclose(tangent, g.sum(), rtol=1e-12)
        np.testing.assert_array_equal(replayed(x), g)


# ----------------------------------------------------------------------------------------------
# np.frombuffer of an array the function computes with: NumPy's view of its memory, followed
# as that view


def _written_through_frombuffer(x):
    y = np.zeros(4)
    np.frombuffer(y)[1:] = x[1:] * 2  # (writes y)
    return (y * x).sum()


FROMBUFFER = [
    lambda x: (np.frombuffer(np.arange(4.0)) * x).sum(),
    lambda x: (np.frombuffer(x) ** 2).sum(),
    lambda x: (np.frombuffer(x.reshape(2, 2) * x[0], count=2, offset=8) ** 3).sum(),
    _written_through_frombuffer,
]


@pytest.mark.parametrize("f", FROMBUFFER)
def test_frombuffer_of_a_followed_array_is_a_view_of_it(f):
    check(f, X)


def test_frombuffer_of_a_followed_array_in_another_dtype_is_refused():
    with pytest.raises(mutad.MutadError, match="reinterpreted"):
        mutad.gradient(lambda x: np.frombuffer(x, np.int64).sum() * x[0], X)


# ----------------------------------------------------------------------------------------------
# np.ma's prod, ptp, round, clip, diagonal, trace, take, sort, concatenate, tolist and
# set_fill_value of masked arrays of differentiated values: NumPy's code path, written on the
# data and the mask

X6 = np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2])
STEPS = np.arange(6.0)


def _masked(x):
    return np.ma.masked_less(x, 0)


def _sorted_in_place(x):
    m = _masked(x).reshape(2, 3)
    m.sort(axis=0, endwith=False)
    return m


def _filled_with_its_fill_value(m):
    m.set_fill_value(2.5)
    return m.filled()


MASKED_RESULTS = [  # (masked arrays: their data, mask and fill value compared with NumPy's)
    lambda x: np.ma.sort(_masked(x)),
    _sorted_in_place,
    lambda x: np.ma.sort(_masked(x).reshape(2, 3), axis=None),
    lambda x: _masked(x).reshape(3, 2).prod(axis=1),
    lambda x: np.ma.ptp(_masked(x).reshape(3, 2), axis=1),
    lambda x: np.round(_masked(x) * 3, 1),
    lambda x: np.clip(_masked(x), 0.35, x[4]),
    lambda x: _masked(x).take([0, 1, 5]),
    lambda x: _masked(x[:4].reshape(2, 2)).diagonal(),
    lambda x: np.ma.concatenate([_masked(x), x * 2]),
    lambda x: np.ma.concatenate([np.ma.masked_array(x), x]),
    lambda x: np.ma.maximum(_masked(x), x[::-1]),  # (np.ma.where of np.ma.greater)
    lambda x: np.ma.minimum(x[::-1] - 0.5, _masked(x)),
    lambda x: np.ma.where(np.ma.less_equal(_masked(x), 0.5), x * 2, _masked(x)),
    lambda x: np.ma.minimum.reduce(_masked(x).reshape(2, 3), axis=1),
    lambda x: np.ma.maximum.reduce(np.ma.masked_less(x, 0.35).reshape(3, 2), axis=1),
    lambda x: np.ma.stack([_masked(x), x[::-1]], axis=1),
    lambda x: np.ma.vstack([_masked(x), np.ma.masked_array(x, mask=np.ma.nomask)]),
    lambda x: np.ma.atleast_2d(_masked(x)),
    lambda x: np.ma.diagflat(_masked(x[:3])),
    lambda x: np.ma.diff(_masked(x).reshape(2, 3), n=2),
    lambda x: np.diff(_masked(x).reshape(3, 2), axis=0),
    lambda x: np.ma.diff(_masked(x), prepend=x[0], append=_masked(x)[:2]),
    lambda x: np.ma.dot(_masked(x).reshape(2, 3), x.reshape(3, 2), strict=True),
    lambda x: np.ma.dot(x[:3], np.ma.masked_greater(x, 1.0).reshape(3, 2), strict=True),
    lambda x: np.ma.inner(_masked(x).reshape(3, 2), x.reshape(3, 2)),
    lambda x: np.ma.choose([0, 1, 2, 1, 0, 2], [_masked(x), x * 2, np.ma.masked]),
    lambda x: np.ma.choose(np.ma.masked_equal([0, 1, 1, 0, 1, 0], 0), [x, _masked(x) * 2]),
    lambda x: np.ma.median(_masked(x).reshape(2, 3), axis=0),
    lambda x: np.ma.median(np.ma.masked_less(x, 0.35).reshape(3, 2), axis=-1),
    lambda x: np.ma.median(x.reshape(2, 3), axis=1),
    lambda x: np.ma.cov(_masked(x).reshape(2, 3)),
    lambda x: np.ma.cov(_masked(x).reshape(3, 2), rowvar=False, ddof=0),
    lambda x: np.ma.corrcoef(np.ma.masked_greater(x, 1.0).reshape(2, 3)),
    lambda x: np.ma.multiply.outer(_masked(x[:3]), x[3:]),
    lambda x: np.ma.array(_masked(x), ndmin=2).conj().squeeze(),
]


@pytest.mark.parametrize("f", MASKED_RESULTS)
def test_masked_arrays_of_differentiated_values_as_numpys(f):
    expected, seen = f(X6.copy()), {}

    def loss(x):
        y = f(x)
        seen.update(data=np.array(mutad.stop_gradient(y.data)), mask=np.ma.getmask(y),
                    fill=y.fill_value, hard=y.hardmask)
        return (y.filled(0.5) * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()

    mutad.gradient(loss, X6)
    np.testing.assert_array_equal(seen["data"], expected.data)
    assert (seen["mask"] is np.ma.nomask) == (expected.mask is np.ma.nomask)
    np.testing.assert_array_equal(np.asarray(seen["mask"]), np.ma.getmaskarray(expected)
                                  if expected.mask is not np.ma.nomask else False)
    assert (seen["fill"], seen["hard"]) == (expected.fill_value, expected.hardmask)
    check(loss, X6)


MASKED_NUMBERS = [
    lambda x: _masked(x).prod() + np.prod(_masked(x) * 2),
    lambda x: _masked(x).ptp(),
    lambda x: _masked(x[:4].reshape(2, 2)).trace()
    + np.ma.masked_array(x[:4]).reshape(2, 2).trace(),
    lambda x: _masked(x).take(2) * 2 + (_masked(x).take(1) is np.ma.masked),
    lambda x: _filled_with_its_fill_value(_masked(x)) @ STEPS,
    lambda x: sum(v for row in _masked(x).reshape(2, 3).tolist() for v in row if v is not None),
    lambda x: np.ndim(_masked(x)) * np.size(_masked(x)) * x.sum() + np.shape(_masked(x))[0],
    lambda x: (_masked(x).view(np.ma.MaskedArray) * 2).sum() + _masked(x).view(np.ndarray) @ x,
    lambda x: np.sum(scipy.stats.mstats.idealfourths(x)),  # (np.ma.sort, then a view)
    lambda x: x[np.ma.argsort(_masked(x), endwith=False)] @ STEPS + x[np.ma.argmin(_masked(x))]
    + x[np.ma.argmax(_masked(x).reshape(2, 3), axis=1)].sum(),
    lambda x: _masked(x).filled(_masked(x).mean()) @ STEPS
    + np.ma.filled(_masked(x), x[2] * 2) @ STEPS,
    lambda x: sum(m.sum() for m in np.ma.atleast_1d(_masked(x), x[0])),
    lambda x: np.ma.inner(_masked(x), x) * (np.ma.dot(_masked(x), x, strict=True) is np.ma.masked)
    + np.ma.dot(x, np.ma.masked_greater(x, 2.0), strict=True),
    lambda x: np.ma.maximum.reduce(_masked(x)) + np.ma.minimum.reduce(x.reshape(2, 3), None),
    lambda x: np.ma.allclose(_masked(x), x) + 2 * np.ma.allclose(_masked(x), x * 2) + x @ STEPS,
]


@pytest.mark.parametrize("f", MASKED_NUMBERS)
def test_numbers_of_masked_arrays_of_differentiated_values(f):
    check(f, X6)


# ----------------------------------------------------------------------------------------------
# The array API's np.unique_values, unique_counts, unique_inverse and unique_all: NumPy's own
# code, its call of np.unique followed


def _unique_all(x):
    r = np.unique_all(np.concatenate([x, x[1:2]]))  # (x[1] twice: counted twice)
    assert type(r) is type(np.unique_all(np.ones(1)))
    return (r.values * r.counts).sum() + x[r.inverse_indices[:4]] @ x + x[r.indices].prod()


@pytest.mark.parametrize("f", [
    lambda x: np.unique_values(x) @ np.arange(4.0),
    lambda x: np.unique_counts(x).values @ np.arange(4.0),
    lambda x: (np.unique_inverse(x).values ** 2).sum(),
    _unique_all,
    # complex values, which NumPy leaves in a hash table's order, not its index's (refused)
    lambda x: np.sum(np.abs(np.unique_values(x * (1 + 2j)) - 0.3j) ** 3),
    lambda x: np.sum(np.abs(np.unique_counts(np.concatenate([x, x[:2]]) * (1 - 1j)).values) ** 3),
])
def test_array_api_unique_functions_of_differentiated_values(f):
    check(f, X)


# ----------------------------------------------------------------------------------------------
# item(), tolist(), len() and iteration of records holding differentiated values: NumPy's
# tuples of the fields, each number with its derivative (item() gave NumPy's plain floats: a
# zero gradient)

FIELDS = np.dtype([("v", float, (2,)), ("name", "U3"), ("inner", [("p", float)]), ("n", int)])


def _record_items(x):
    a = np.zeros(2, FIELDS)
    a["v"] = x.reshape(2, 2)
    a["inner"]["p"] = x[::-1][:2] ** 2
    a["name"], a["n"] = "ab", 3
    last, rows = a.item(1), a.tolist()
    assert (type(last[1]), last[1], last[3]) == (str, "ab", 3) and isinstance(last[0], np.ndarray)
    return (last[0] ** 2).sum() + last[2][0] * 3 + rows[0][2][0] * rows[0][0][1] \
        + a[0].item()[0][0] + sum(a[["inner", "n"]][0].item()[0])


@pytest.mark.parametrize("f", [
    lambda x: sum(_records(x)[0].item()),
    lambda x: sum(sum(row) for row in _records(x).tolist()) * x[0],
    _record_items,
    lambda x: sum(_records(x)[1]) * len(_records(x)[0]) + tuple(_records(x)[0])[-1],  # np.void's
])
def test_items_of_records_holding_differentiated_values(f):
    check(f, X)


# ----------------------------------------------------------------------------------------------
# NumPy's functions that move whole records (np.concatenate, stack, where, reshape, take,
# indexing by an array) and astype of arrays of records holding differentiated values: each
# field gathered by NumPy's function of the records' positions, a view where NumPy's is one

PAIRS = np.dtype([("a", float), ("v", float, (2,))])  # (a subarray field too)


def _pairs(x):
    r = np.zeros(3, PAIRS)
    r["a"] = x[:3]
    r["v"] = np.stack([x[3:] * 2, x[:3] ** 2], axis=1)
    return r


def _written_through_a_view(x):
    r = _pairs(x)
    column = np.reshape(r, (3, 1))  # (NumPy's view of the records)
    column["a"][1, 0] = x[3] * 3
    column.T["v"][0, 2] = x[:2]
    return _weighted(r) + _weighted(column)


MOVED = [
    lambda x: _weighted(np.concatenate([_pairs(x), _pairs(x[::-1])[:2], np.ones(1, PAIRS)])),
    lambda x: _weighted(np.stack([_pairs(x), _pairs(x[::-1])], axis=1)[1]),
    lambda x: _weighted(np.where([[True], [False]], _pairs(x), _pairs(x)[::-1])),
    lambda x: _weighted(np.take(_pairs(x), [2, 0, 2])) + _weighted(_pairs(x)[[1, 0]]),
    lambda x: _weighted(_pairs(x)[np.array([True, False, True])]),
    lambda x: _weighted(np.flip(np.atleast_2d(_pairs(x)), axis=1)[:, :2]),
    lambda x: _weighted(_pairs(x).astype([("b", float), ("w", float, (2,))])),
    lambda x: _weighted(np.astype(_records(x[:4]), [("a", float), ("c", float)])),
    _written_through_a_view,
]


@pytest.mark.parametrize("f", MOVED)
def test_records_moved_by_numpys_functions(f):
    check(f, X6)
