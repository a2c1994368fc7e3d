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
