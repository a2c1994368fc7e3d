"""Arrays of records (a structured dtype) that the differentiated function allocates
(``np.zeros(n, dtype=[('x', float, 2), ('m', float)])``): their fields are views of their
memory, which mutad follows as any view, in both modes, under both policies; whole-record
operations of records holding differentiated values are refused by name; records that hold
none are NumPy's."""

import numpy as np
import pytest

import mutad
from cases import replays_as_traced

PARTICLE = np.dtype([("x", float, 2), ("v", float, 2), ("m", float), ("id", np.int64)])


def particles(m):
    """A particle system kept as records: fields (a subarray field too), records by a basic
    index, one record by an integer, written and read."""
    p = np.zeros(m.size, dtype=PARTICLE)
    p["x"] = np.arange(2.0 * m.size).reshape(-1, 2)
    p["m"] = m
    p["id"] = np.arange(m.size)
    for _ in range(3):
        p["v"] += 0.1 * p["x"] / p["m"][:, None]
        p[1:]["x"] += 0.1 * p[1:]["v"]
        p[0]["x"] *= 0.5  # one record (NumPy's np.void, a view of it)
        p["x"][p["id"] == 2] -= p["m"][0]
    return (p["x"] ** 2).sum() + p[2]["v"][1] * p["m"].sum()


def nested(w):
    """Fields within fields and records made by np.array of tuples."""
    s = np.zeros(w.size, dtype=[("pos", [("a", float), ("b", float)]), ("q", float)])
    s["pos"]["a"] = w
    s["pos"]["b"] = np.sin(s["pos"]["a"]) * w[::-1]
    s["q"] = w ** 2
    table = np.array([(1.0, 2.0), (3.0, 4.0), (5.0, 6.0), (7.0, 8.0)],
                     dtype=[("lo", float), ("hi", float)])
    table["hi"] *= w
    return s["pos"]["b"].sum() + s["q"].sum() + table["hi"] @ table["lo"]


PROGRAMS = {"particles": particles, "nested fields": nested}


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_fields_of_records_are_followed(name, policy):
    """They were refused (a traced value written into a plain array, the records): NumPy's
    values bit for bit, gradients in both modes, replayed as traced (a replay traces them),
    the caller's array unchanged."""
    f = PROGRAMS[name]
    m = np.array([1.0, 2.0, 1.5, 0.7])
    before = m.tobytes()
    value, _ = mutad.value_and_grad(f, policy=policy)(m)
    assert np.asarray(value).tobytes() == np.asarray(f(m.copy())).tobytes()
    assert mutad.jvp(f, (m,), (np.ones(4),))[0] == f(m.copy())
    mutad.check_grads(f, m, policy=policy, modes=("rev", "fwd"))
    replaying = replays_as_traced(f, [(m,), (m + 0.5,)])
    assert any("records" in reason for reason in replaying.reasons.values())
    assert m.tobytes() == before


def test_records_without_derivatives_are_numpys():
    """Records the function made and wrote no derivative into: NumPy's functions of whole
    records (a sort by a field, comparisons, concatenation, a copy) as NumPy computes them."""
    def f(x):
        table = np.zeros(3, dtype=[("key", float), ("value", float)])
        table["key"] = [3.0, 1.0, 2.0]
        table["value"] = [10.0, 20.0, 30.0]
        ordered = np.sort(table, order="key")
        same = (table == table.copy()).sum() + (np.concatenate([table, table]) != table[0]).sum()
        return (ordered["value"] * x).sum() + same * x[0]

    x = np.array([1.0, 2.0, 3.0])
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value == f(x)
    np.testing.assert_array_equal(g, [20.0 + 7.0, 30.0, 10.0])


def _table(x):
    r = np.zeros(3, dtype=[("m", float), ("v", float)])
    r["m"] = x
    return r


@pytest.mark.parametrize("f, words", [
    (lambda r: np.unique(r, axis=0)["m"].sum(), "np.unique of an array of records"),
    (lambda r: (r.__setitem__(0, 1.0), r["m"].sum())[1], "Write each field"),
], ids=["unique along an axis", "record write"])
def test_whole_records_holding_derivatives_are_refused(f, words):
    """Whole-record operations would need cotangents of records: refused by name, where they
    gave values whose gradient was lost (np.copy's, np.sort's) or NumPy's errors."""
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=words):
        mutad.gradient(lambda x: f(_table(x)), np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("f", [
    lambda r: r.astype([("m", np.float64), ("v", float)])["m"] @ np.arange(3.0),
    lambda r: np.concatenate([r, r])["m"] @ np.arange(6.0),
    lambda r: r[[0, 2]]["m"] @ np.arange(2.0),
    lambda r: r[r["m"] > 1.5]["m"].sum(),
], ids=["astype", "concatenate", "gather", "mask"])
def test_whole_records_moved_or_cast_are_followed(f):
    """They were refused: each field is moved (cast) as NumPy moves the records."""
    mutad.check_grads(lambda x: f(_table(x)), np.array([1.0, 2.0, 3.0]), modes=("rev", "fwd"))


def _tuples_of_constants(x):
    c = np.zeros(3)
    c += 2.0  # traced values of no derivative
    r = _table(x)
    r[0] = (c[0], c[1])
    r[1:] = [(c[2], 5.0)]
    return (r["m"] * r["v"]).sum() + x @ x


def _lists_of_tuples(x):
    r = np.zeros(4, dtype=[("m", float), ("v", float)])
    r[1:] = [(x[0], 5.0), (x[1] * 2, x[0]), (1.0, x[2])]
    r[0] = (x[2], x[1])
    return (r["m"] * x.sum()).sum() + (r["v"] ** 2).sum()


@pytest.mark.parametrize("f", [_tuples_of_constants, _lists_of_tuples],
                         ids=["tuples of constants", "lists of tuples"])
def test_records_written_as_tuples(f):
    """A record written as a tuple of traced values without derivative (a constant the
    function made; every value in the run of f by which a Jacobian learns its outputs) raised
    NumPy's ValueError "setting an array element with a sequence", as did a list of tuples,
    with or without derivatives: each is written record by record, field by field."""
    x = np.array([0.5, 2.0, -1.25])
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(f, x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    np.testing.assert_allclose(mutad.jacfwd(f)(x), g, rtol=1e-14)
    np.testing.assert_allclose(mutad.jacrev(f)(x), g, rtol=1e-14)
    assert x.tobytes() == before


def _labelled(x):
    """Records with an integer field beside the floats, written whole by field and in place."""
    r = np.zeros(3, dtype=[("a", float), ("b", float), ("k", np.int32)])
    r["a"] = x[:3]
    r["b"] = x[3:]
    r["k"] = [1, 2, 3]
    r["a"] *= r["b"]
    return (r["a"] * r["b"] * r["k"]).sum() + (np.sin(r["b"]) ** 2).sum()


def _record_arrays(x):
    r = np.rec.fromarrays([x[:3], x[3:]], names="p,q")
    return (r.p ** 2 * r.q).sum()


_SIX = np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87])


@pytest.mark.parametrize("f, x", [(particles, np.array([1.0, 2.0, 1.5, 0.7])),
                                  (nested, np.array([1.0, 2.0, 1.5, 0.7])),
                                  (_labelled, _SIX), (_record_arrays, _SIX)],
                         ids=["particles", "nested", "integer field", "np.rec"])
def test_records_under_nested_differentiation(f, x):
    """Records the function makes, under a Hessian (forward over reverse): the outer jvp
    follows them as the inner gradient does (they were refused; a record array's constructor
    refused them as a library's)."""
    before = x.tobytes()
    hessian = mutad.hessian(f, x)
    assert x.tobytes() == before
    h = 1e-5
    expected = np.array([(mutad.gradient(f, x + h * e)[0] - mutad.gradient(f, x - h * e)[0])
                         / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(hessian, expected, rtol=1e-6, atol=1e-7)


def test_a_jacobian_of_records():
    """A batched forward pass runs one direction at a time where records are (a decision on
    whether a tangent is zero is taken field by field)."""
    def f(m):
        p = np.zeros(m.size, dtype=[("x", float), ("m", float)])
        p["m"] = m
        p["x"] = np.cumsum(p["m"]) ** 2
        return p["x"]

    m = np.array([1.0, 2.0, 1.5, 0.7])
    np.testing.assert_allclose(mutad.jacobian(f, m), np.tril(2 * np.cumsum(m)[:, None] * np.ones(4)),
                               rtol=1e-15)


def test_record_arrays_of_constants():
    """np.rec's record arrays of constants: NumPy's values, and a record array still (its
    fields attributes), into which the function may write traced values."""
    def f(x):
        r = np.rec.fromarrays([np.ones(3), np.arange(3.0)], names="a,b")
        assert isinstance(r, np.recarray) and r.b.tolist() == [0.0, 1.0, 2.0]
        r.b = r.b * x
        return (r.a * x).sum() + (r.b ** 2).sum()

    x = np.array([1.0, 2.0, 3.0])
    (g,) = mutad.gradient(f, x)
    np.testing.assert_array_equal(g, 1.0 + 2.0 * np.arange(3.0) ** 2 * x)


def _zero_d_view_of_a_record(x):
    s = np.zeros(2, dtype=[("a", float), ("b", float)])
    s["a"] = x
    first = s[0, ...]["a"]  # NumPy's 0-d array viewing s (s[0]["a"] would be a scalar copy)
    s["a"] *= 3.0
    kinds = (isinstance(s[0, ...], np.ndarray), isinstance(first, np.ndarray),
             isinstance(s[0], np.ndarray))
    return first * x[1], kinds


def test_a_0d_view_of_records_is_an_array_not_one_record():
    """Regression: ``s[0, ...]`` of an array of records is NumPy's 0-d array, a view whose
    fields are views too; mutad took it for one record (``s[0]``, NumPy's np.void) and its
    field for a copy, so a later write into ``s`` did not reach it (10.0 for NumPy's 30.0)."""
    x = np.array([2.0, 5.0])
    expected = _zero_d_view_of_a_record(x.copy())
    assert expected == (30.0, (True, True, False))
    assert mutad.value_and_gradient(_zero_d_view_of_a_record, x, has_aux=True)[0] == expected
    assert mutad.jvp(lambda x: _zero_d_view_of_a_record(x)[0], (x,), (np.ones(2),))[0] == 30.0
    mutad.check_grads(lambda x: _zero_d_view_of_a_record(x)[0], x, modes=("rev", "fwd"))
    replays_as_traced(lambda x: _zero_d_view_of_a_record(x)[0], [(x,), (x + 0.5,), (x * 2,)])


ONE_RECORD = np.zeros(3, dtype=[("a", float), ("b", float)])[0]  # NumPy's np.void, a constant
SHOWN_AS_NUMPYS = {  # of s, an array of records holding x
    "np.where of one record of NumPy's": lambda s, x: np.where(x > 1.5, ONE_RECORD, s),
    "np.where of one record of each": lambda s, x: np.where(x > 1.5, s[1], ONE_RECORD),
    "a recarray view": lambda s, x: s.view(np.recarray),
    "one record of a recarray view": lambda s, x: s.view(np.recarray)[0],
    "a 0-d view of a recarray view": lambda s, x: s.view(np.recarray)[0, ...],
}


@pytest.mark.parametrize("name", SHOWN_AS_NUMPYS)
def test_records_results_have_numpys_class_and_dtype(name):
    """Regression: np.where of NumPy's one record (np.void) beside traced records raised
    NumPy's DTypePromotionError (its positions were taken for numbers), and ``s.view(
    np.recarray)`` kept np.void's dtype where NumPy's view has np.record's."""
    operation = SHOWN_AS_NUMPYS[name]

    def f(x, seen):
        s = np.zeros(3, dtype=[("a", float), ("b", float)])
        s["a"] = x
        y = operation(s, x)
        seen.append((y.__class__, repr(y.dtype), np.shape(y), np.asarray(y["a"]).tolist()))
        return (np.asarray(y["a"]) ** 2).sum()

    x = np.array([1.0, 2.0, 3.0])
    expected, found = [], []
    f(x.copy(), expected)
    mutad.value_and_gradient(lambda x: f(x, found), x)
    assert found == expected
    mutad.check_grads(lambda x: f(x, []), x, modes=("rev", "fwd"))


RECORDS = np.dtype([("a", float), ("b", float), ("n", np.int64)])
COPIES = {  # an argument of records, copied in f, then written
    "s.copy()": lambda s: s.copy(),
    "np.copy(s)": np.copy,
    "s[['a', 'b']].copy()": lambda s: s[["a", "b"]].copy(),
    "np.array(s)": np.array,
    "s.astype(s.dtype)": lambda s: s.astype(s.dtype),
    "s itself": lambda s: s,  # (written into: the caller's array comes back as it was)
}


@pytest.mark.parametrize("name", COPIES)
def test_a_copy_of_an_argument_of_records_is_followed(name):
    """Regression: an argument of records outside argnums reached f as a plain array, so its
    copy made by a method (``t = s.copy()``) was plain too, and a traced value written into
    it stopped (ConstantModifiedError, where NumPy gives 12.0). It stands in as records made
    before the call do, reached by a name; a write into the argument itself is followed too,
    and the caller's array comes back bit for bit, in a list or a dict too."""
    copied = COPIES[name]

    def f(x, s):
        t = copied(s)
        t["a"] = t["a"] * x
        return t["a"].sum() * x + t["b"][1]

    def numpys(x):
        return f(x, s.copy())

    s = np.zeros(3, RECORDS)
    s["a"], s["b"], s["n"] = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1, 2, 3]
    before = s.tobytes()
    for g, given in ((f, s), (lambda x, L: f(x, L[0]), [s]),
                     (lambda x, d: f(x, d["s"]), {"s": s})):
        value, grad = mutad.value_and_gradient(g, 2.0, given, argnums=0)
        assert np.asarray(value).tobytes() == np.asarray(numpys(2.0)).tobytes()
        assert grad == 24.0 and s.tobytes() == before
    value, tangent = mutad.jvp(f, (2.0, s), (1.0, None))
    assert tangent == 24.0 and s.tobytes() == before
    replays_as_traced(f, [(2.0, s), (3.0, s), (2.0, s)])
    assert s.tobytes() == before
