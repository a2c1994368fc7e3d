"""Behaviours where a differentiated program once differed from NumPy's and SciPy's own, each
compared with the same program run on plain NumPy/SciPy objects: a masked result's fill value,
the types users see of reductions and elements, values standing for Python floats, the
warnings of scalar powers, SciPy's sparse formats, and the warnings of composite statistics.
"""

import json
import numbers
import operator
import warnings

import numpy as np
import pytest
import scipy.sparse

import mutad

# ----------------------------------------------------------------------------------------------
# A masked result's fill value and hardness: the first masked operand's (``_update_from``),
# whether that operand is NumPy's masked array or one mutad follows.

MASKED_OPERATIONS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "**": operator.pow, "<": operator.lt, "==": operator.eq, "np.add": np.add,
    "np.divide": np.divide, "np.arctan2": np.arctan2, "np.ma.multiply": np.ma.multiply,
    "np.ma.divide": np.ma.divide, "np.ma.power": np.ma.power,
}


def _masked(data, fill):
    return np.ma.masked_array(data, mask=[0, 1, 0], fill_value=fill, hard_mask=fill == 7.0)


@pytest.mark.parametrize("name", MASKED_OPERATIONS)
@pytest.mark.parametrize("fills", [(None, 5.0), (7.0, None), (7.0, 5.0), (7.0, 0.0), (0.0, 5.0)])
@pytest.mark.parametrize("followed_first", [False, True])
def test_masked_result_takes_first_masked_operands_fill_value(name, fills, followed_first):
    op = MASKED_OPERATIONS[name]
    y = np.array([2.0, 0.5, 4.0])

    def apply(plain, followed):
        return op(followed, plain) if followed_first else op(plain, followed)

    plain = _masked(np.array([1.0, 2.0, 3.0]), fills[0])
    with np.errstate(all="ignore"):
        want = apply(plain, _masked(y.copy(), fills[1]))
    plain = _masked(np.array([1.0, 2.0, 3.0]), fills[0])
    seen = []

    def f(y):
        with np.errstate(all="ignore"):
            r = apply(plain, _masked(y, fills[1]))
        seen.append((r._fill_value is None, r.fill_value, type(r.fill_value), r.hardmask))
        return np.sum(r.filled(0.0)) if r.dtype.kind == "f" else np.sum(y)

    mutad.gradient(f, y.copy())
    assert plain._fill_value is None or fills[0] is not None  # (read without being set)
    assert seen == [(want._fill_value is None, want.fill_value, type(want.fill_value),
                     want.hardmask)]



# ----------------------------------------------------------------------------------------------
# What the program sees of a reduction or an element (NumPy's scalar) or of x.item() (Python's
# float): all NumPy's, but for type() itself, which a traced value cannot change (isinstance
# answers as NumPy's, since its __class__ is NumPy's class).

def _raised(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 (NumPy's own, compared)
        return type(error), str(error)
    return None


SEEN = {
    "class": lambda v: v.__class__,
    "isinstance float": lambda v: isinstance(v, float),
    "isinstance np.floating": lambda v: isinstance(v, np.floating),
    "isinstance np.generic": lambda v: isinstance(v, np.generic),
    "isinstance np.ndarray": lambda v: isinstance(v, np.ndarray),
    "isinstance numbers.Real": lambda v: isinstance(v, numbers.Real),
    "np.isscalar": np.isscalar,
    "np.ndim": np.ndim,
    "np.shape": np.shape,
    "hash": hash,
    "repr": repr,
    "str": str,
    "format": lambda v: f"{v:.4f}|{v}|{v!r}",
    "percent": lambda v: "%g %s %r" % (v, v, v),
    "json": lambda v: _raised(lambda: json.dumps(v)) or json.dumps(v),
    "in a dict": lambda v: {1.5: "found"}.get(v),
    "len": lambda v: _raised(lambda: len(v)),
    "iter": lambda v: _raised(lambda: iter(v)),
    "list()": lambda v: _raised(lambda: list(v)),
}
SCALARS = {
    "x.sum()": lambda x: x.sum(),
    "np.max(x)": lambda x: np.max(x),
    "x[0]": lambda x: x[0],
    "x @ x": lambda x: x @ x,
    "float32 sum": lambda x: x.astype(np.float32).sum(),
    "x[0].item()": lambda x: x[0].item(),
}


@pytest.mark.parametrize("name", SCALARS)
def test_what_the_program_sees_of_a_scalar_is_numpys(name):
    make = SCALARS[name]
    x = np.array([1.5, -2.0, 0.25])
    want = {seen: look(make(x.copy())) for seen, look in SEEN.items()}
    got = []

    def f(x):
        v = make(x)
        got.append({seen: look(v) for seen, look in SEEN.items()})
        return v * 2.0

    mutad.gradient(f, x.copy())
    assert got == [want]


# ----------------------------------------------------------------------------------------------
# The text of a traced number parsed back (``float(str(v))``): the number itself where the text
# writes it in full, so its derivative flows; a rounded text's (``f"{v:.3f}"``) is a constant,
# whose derivative is zero, as the rounding's is.

PARSED_BACK = {  # name: (parse, derivative of the parsed number)
    "float(str(v))": (lambda v: float(str(v)), 1.0),
    "float(repr(v.item()))": (lambda v: float(repr(v.item())), 1.0),
    "float(f'{v}')": (lambda v: float(f"{v}"), 1.0),
    "float(f'{v:.17g}')": (lambda v: float(f"{v:.17g}"), 1.0),
    "np.float64(format(v, '.16e'))": (lambda v: np.float64(format(v, ".16e")), 1.0),
    "np.float32(str(v))": (lambda v: np.float32(str(v)), 1.0),
    "float(f'{v:.3f}')": (lambda v: float(f"{v:.3f}"), 0.0),
    "float(str(v)) and the literal": (lambda v: (str(v), f"{v:.17g}", float("3"))[2], 0.0),
}


@pytest.mark.parametrize("name", PARSED_BACK)
@pytest.mark.parametrize("first", [3.0, 0.1])
def test_the_text_of_a_traced_number_parses_back_to_it(name, first):
    parse, slope = PARSED_BACK[name]

    def f(x):
        return parse(x[0] * 1.0) * x[1] + x[0]

    x = np.array([first, 2.0])
    want = f(x.copy())
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert value == want and type(value) is type(want)
    assert grad[1] == parse(np.float64(first)) and grad[0] == slope * 2.0 + 1.0
    assert x.tobytes() == np.array([first, 2.0]).tobytes()
    _, tangent = mutad.jvp(f, (x,), (np.array([1.0, 0.0]),))
    assert tangent == slope * 2.0 + 1.0


BUILT_FROM_TEXT = {  # what is parsed from anything built of the text is a constant
    "a longer string": lambda x: float(("v=" + str(x[0]))[2:]),
    "split": lambda x: float(f"{x[0]} {x[1]}".split()[0]),
    "printf-style": lambda x: float("%.17g" % x[0]),
    "complex": lambda x: complex(str(x[0] + 1j * x[1])).real,
    "np.array of strings": lambda x: np.array([str(x[0])], dtype=float)[0],
    "astype": lambda x: np.array([str(x[0])]).astype(float)[0],
    "json": lambda x: json.loads(json.dumps(x.tolist()))[0],
    "np.fromstring": lambda x: np.fromstring(np.array2string(x)[1:-1], sep=" ")[0],
}


@pytest.mark.parametrize("name", BUILT_FROM_TEXT)
def test_a_number_parsed_from_what_the_text_built_is_a_constant(name):
    parse = BUILT_FROM_TEXT[name]

    def f(x):
        return parse(x) * x[1]

    x = np.array([0.1, 2.0])
    value, (grad,) = mutad.value_and_gradient(f, x)
    assert value == f(x.copy()) and grad.tolist() == [0.0, parse(x)]


def test_the_text_of_a_traced_number_is_guarded_by_a_replay():
    from test_replay import replayed_like_traced

    def f(x):
        return float(str(x[0])) * x[1] + float(f"{x[1]:.2f}") * x[0]

    replayed_like_traced(f, [(np.array(v),) for v in ([3.0, 2.0], [3.0, 2.0], [0.1, 2.5])])


def test_a_full_text_another_type_parses_to_another_number_is_refused():
    """float() of a float32's text is the shortest decimal's float64, not the float32: no
    derivative of it is exact."""
    def f(x):
        return float(str(x.astype(np.float32)[0])) * x[0]

    with pytest.raises(mutad.errors.ConversionError, match=r"float\(\) of the text"):
        mutad.gradient(f, np.array([0.1]))


# ----------------------------------------------------------------------------------------------
# A Python float among the arguments (``[u, 2.0]``) stands for Python's float: it lacks the
# ndarray methods Python's float lacks, while its derivative flows through NumPy's functions.

from test_trace_hunt11 import Raised, outcome, replayed  # noqa: E402


ARRAY_ONLY = {
    "sum": lambda k: k.sum(),
    "reshape": lambda k: k.reshape(1),
    "item": lambda k: k.item() * 2,
    "astype": lambda k: k.astype(np.float32),
    "copy": lambda k: k.copy(),
    "of_arithmetic": lambda k: (2 * k + 1).mean(),
    "hasattr": lambda k: k * hasattr(k, "sum") + 3 * k * hasattr(k, "reshape") + k,
    "getattr": lambda k: k * (getattr(k, "round", None) is None),
    "sum_of_sums": lambda k: sum((v * v).sum() for v in [np.ones(2), k]),
    # an attribute (a property) Python's float lacks: np.array([k, k]) where NumPy's runs
    "hasattr_shape": lambda k: k if hasattr(k, "shape") else np.array([k, k]),
    "shape": lambda k: k * len(k.shape),
    "dtype": lambda k: k.astype(k.dtype),
    "ndim_size_T": lambda k: k * (k.ndim + k.size) + k.T,
}

NUMPY_OF_NUMBERS = {  # NumPy's functions of a float, which ask it for the methods it lacks
    "round": lambda k: np.round(k, 1),
    "clip": lambda k: np.clip(k, 0.0, 1.0),
    "np_reshape": lambda k: np.reshape(k, (1, 1)),
    "take": lambda k: np.take(k, 0),
    "asarray_sum": lambda k: np.asarray(k).sum(),
    "float64_reshape": lambda k: np.float64(k).reshape(1),
    "np_sum": lambda k: np.sum(k * k),
    "np_copy": lambda k: np.copy(k) * 2.0,
}


@pytest.mark.parametrize("name", list(ARRAY_ONLY) + list(NUMPY_OF_NUMBERS))
def test_a_float_argument_lacks_the_methods_pythons_float_lacks(name):
    """A Python float in the arguments was traced as a value with every method of an array,
    so ``sum(v.sum() for v in xs)`` returned a value where NumPy raises AttributeError
    ('float' object has no attribute 'sum'), and ``hasattr(k, "sum")`` was True; so did its
    properties (``hasattr(k, "shape")``: a branch on it took the array's side, 0.51 for
    NumPy's 1.02)."""
    g = ARRAY_ONLY.get(name) or NUMPY_OF_NUMBERS[name]

    def f(xs):
        return np.sum(g(xs[1])) * xs[0][0]

    args = [np.array([1.5]), 0.6]
    expected = outcome(lambda: f(args))
    numpy_raised = type(expected[0]) is Raised
    traced = outcome(lambda: mutad.value_and_grad(f)(args))
    forward = outcome(lambda: mutad.jvp(lambda k: np.sum(g(k)), (0.6,), (1.0,)))
    for got in [traced, forward, *replayed(f, args)]:
        if numpy_raised:
            assert got == expected
        else:
            assert type(got[0]) is not Raised and got[1] == expected[1]
    if not numpy_raised:
        assert np.array_equal(traced[0][0], expected[0])
        h = 1e-6
        slope = (f([args[0], 0.6 + h]) - f([args[0], 0.6 - h])) / (2 * h)
        assert traced[0][1][1] == pytest.approx(slope, rel=1e-6, abs=1e-9)


def test_a_float_argument_of_a_nested_differentiation_lacks_array_methods():
    """At an inner level too (an outer level's float handed on), the value stands for a
    float; NumPy's functions of it are differentiated through both levels."""
    def inner(k, w):
        assert not hasattr(k, "sum")
        return np.sum(k * k) * w[0]

    def outer(w):
        return mutad.gradient(inner, 1.5, w)[0] * w[0]

    w = np.array([0.7])
    (g,) = mutad.gradient(outer, w)
    assert g[0] == pytest.approx(2 * 2 * 1.5 * 0.7, rel=1e-14)


# ----------------------------------------------------------------------------------------------
# A power of values standing for scalars: NumPy's scalar math's value and events, not those of
# the ufunc loop the engines compute with (``np.float64(-inf) ** 0.5`` is inf, silently, where
# ``np.power`` and ``np.sqrt`` warn of an invalid value and give nan).

SPECIAL = [-np.inf, -2.0, -0.0, 0.0, 3.0, np.nan]
POWERS = {
    "x ** y": lambda x: x[0] ** x[1],
    "y ** x": lambda x: x[1] ** x[0],
    "x ** 0.5": lambda x: x[0] ** 0.5,
    "x ** 2": lambda x: x[0] ** 2,
    "x ** -1": lambda x: x[0] ** -1,
    "2.0 ** x": lambda x: 2.0 ** x[0],
    "np.float64(-inf) ** x": lambda x: np.float64(-np.inf) ** x[0],
    "x.item() ** y": lambda x: x[0].item() ** x[1],
}


def _heard(call):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        value = call()
    return value, sorted(str(w.message) for w in heard if "gradient" not in str(w.message)
                         and "tangent" not in str(w.message))


@pytest.mark.parametrize("name", POWERS)
def test_a_scalar_power_raises_numpys_scalar_events(name):
    power = POWERS[name]
    replay = mutad.value_and_grad(lambda x: power(x) * 1.0, replay=True)
    for a in SPECIAL:
        for b in (0.5, -1.0, -np.inf):
            x = np.array([a, b])
            with np.errstate(all="warn"):
                value, events = _heard(lambda: power(x) * 1.0)
                got = [_heard(lambda: mutad.value_and_gradient(lambda x: power(x) * 1.0, x)),
                       _heard(lambda: replay(x)), _heard(lambda: replay(x)),
                       _heard(lambda: mutad.jvp(lambda x: power(x) * 1.0, (x,),
                                                (np.ones(2),)))]
            for k, ((y, *_), heard) in enumerate(got):
                assert (np.asarray(y).tobytes(), heard) == (np.asarray(value).tobytes(), events), \
                    (a, b, k)
            with np.errstate(invalid="raise", divide="raise"):
                try:
                    power(x)
                except FloatingPointError as error:
                    with pytest.raises(FloatingPointError, match=str(error)):
                        mutad.value_and_gradient(lambda x: power(x) * 1.0, x)
                else:  # (a gradient's own events may raise: its own words say so)
                    with pytest.raises(FloatingPointError, match="in the gradient"):
                        mutad.value_and_gradient(lambda x: power(x) * 1.0, x)
                        raise FloatingPointError("none in the gradient")


# ----------------------------------------------------------------------------------------------
# The warnings of composite statistics: NumPy's, as many and in its words.

NAN_ROW = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 5.0, 1.0]])
STATISTICS = {
    "np.cov of one observation": lambda x: np.cov(x[2, :1]),
    "np.cov, ddof past the observations": lambda x: np.cov(x[[0, 2]], ddof=3),
    "np.corrcoef of one observation": lambda x: np.corrcoef(x[2, :1]),
    "np.nanvar of an all-NaN row": lambda x: np.nanvar(x, axis=1),
    "np.nanstd of an all-NaN row": lambda x: np.nanstd(x, axis=1),
    "np.corrcoef with NaN": lambda x: np.corrcoef(x),
    "np.var, ddof=n": lambda x: np.var(x[2], ddof=3),
}


@pytest.mark.parametrize("name", STATISTICS)
def test_a_composite_statistic_warns_as_numpy(name):
    statistic = STATISTICS[name]

    def f(x):
        return np.nansum(statistic(x)) * 1.0

    value, events = _heard(lambda: f(NAN_ROW.copy()))
    replay = mutad.value_and_grad(f, replay=True)
    for (y, *_), heard in [_heard(lambda: mutad.value_and_gradient(f, NAN_ROW.copy())),
                           _heard(lambda: replay(NAN_ROW.copy())),
                           _heard(lambda: replay(NAN_ROW.copy())),
                           _heard(lambda: mutad.jvp(f, (NAN_ROW.copy(),),
                                                    (np.ones_like(NAN_ROW),)))]:
        assert (np.asarray(y).tobytes(), heard) == (np.asarray(value).tobytes(), events)


# ----------------------------------------------------------------------------------------------
# scipy.sparse: a lil or dok matrix holding traced entries, copied or added to, in SciPy's
# format, with SciPy's values.

def _entries(x, kind):
    a = kind((3, 3))
    a[0, 0] = x[0]
    a[1, 2] = x[1]
    a[2, 2] = 4.0
    return a


def _copied_and_written(x, kind):
    a = _entries(x, kind)
    b = a.copy()
    b[1, 1] = 3.0 * x[2]
    return b


SPARSE_PROGRAMS = {
    "dok.copy()": lambda x: _copied_and_written(x, scipy.sparse.dok_array),
    "dok_matrix.copy()": lambda x: _copied_and_written(x, scipy.sparse.dok_matrix),
    "lil.copy()": lambda x: _copied_and_written(x, scipy.sparse.lil_array),
    "lil_matrix.copy()": lambda x: _copied_and_written(x, scipy.sparse.lil_matrix),
    "dok + csr": lambda x: _entries(x, scipy.sparse.dok_array)
    + scipy.sparse.csr_array(np.eye(3)),
    "dok + traced csr": lambda x: _entries(x, scipy.sparse.dok_array) + scipy.sparse.csr_array(
        (x, ([0, 1, 2], [0, 1, 2])), shape=(3, 3)),
    "constant dok + traced csr": lambda x: scipy.sparse.dok_array(np.eye(3))
    + scipy.sparse.csr_array((x, ([0, 1, 2], [1, 1, 2])), shape=(3, 3)),
    "dok + dok": lambda x: _entries(x, scipy.sparse.dok_array)
    + _entries(2.0 * x, scipy.sparse.dok_array),
    "dok + coo": lambda x: _entries(x, scipy.sparse.dok_array)
    + scipy.sparse.coo_array(np.ones((3, 3))),
    "dok_matrix + csr_matrix": lambda x: _entries(x, scipy.sparse.dok_matrix)
    + scipy.sparse.csr_matrix(np.eye(3)),
}


@pytest.mark.parametrize("name", SPARSE_PROGRAMS)
def test_an_assembled_sparse_matrix_copied_or_added_to_is_scipys(name):
    """A copy of a lil or dok matrix holding traced entries was SciPy's own matrix of the
    placeholders it stores for them (the values lost, the gradient zero); a dok matrix plus a
    sparse matrix was a csr matrix where SciPy's is a dok matrix."""
    program = SPARSE_PROGRAMS[name]
    x = np.array([1.0, -2.0, 3.0])
    want = program(x.copy())
    seen = []

    def f(x):
        y = program(x)
        seen.append((y.format, isinstance(y, type(want)), y.nnz, y.shape))
        return np.sum(y.toarray() * np.arange(1.0, 10.0).reshape(3, 3))

    value, (grad,) = mutad.value_and_gradient(f, x.copy())
    assert seen == [(want.format, True, want.nnz, want.shape)]
    assert value == np.sum(want.toarray() * np.arange(1.0, 10.0).reshape(3, 3))
    h = 1e-6
    numeric = [(f_plain(program, x + h * e) - f_plain(program, x - h * e)) / (2 * h)
               for e in np.eye(3)]
    assert grad == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def f_plain(program, x):
    return np.sum(program(x).toarray() * np.arange(1.0, 10.0).reshape(3, 3))


def _dia(x):
    return scipy.sparse.dia_array((np.vstack([x, 2.0 * x, x - 1.0]), [0, 1, -1]), shape=(3, 3))


DIA_MOVES = {
    "A.T": lambda x: _dia(x).T,
    "A.transpose()": lambda x: _dia(x).transpose(),
    "a rectangular A.T": lambda x: scipy.sparse.dia_array(
        (np.vstack([x, -x]), [0, 2]), shape=(3, 4)).T,
    "A.T.T": lambda x: _dia(x).T.T,
}


@pytest.mark.parametrize("name", DIA_MOVES)
def test_a_dia_matrix_moved_keeps_scipys_values_outside_it(name):
    """SciPy's transpose of a dia matrix moves every stored value, those of the slots outside
    the matrix too; mutad's held zeros there."""
    move = DIA_MOVES[name]
    x = np.array([-1.0, -2.0, -3.0])
    want = move(x.copy())
    seen = []

    def f(x):
        y = move(x)
        seen.append((y.format, np.asarray(y.offsets).tolist(), y.data.shape))
        return np.sum(y.data * np.arange(1.0, y.data.size + 1).reshape(y.data.shape))

    value, (grad,) = mutad.value_and_gradient(f, x.copy())
    assert seen == [(want.format, np.asarray(want.offsets).tolist(), want.data.shape)]
    assert value == np.sum(want.data * np.arange(1.0, want.data.size + 1).reshape(
        want.data.shape))
    h = 1e-6
    weights = np.arange(1.0, want.data.size + 1).reshape(want.data.shape)
    numeric = [np.sum((move(x + h * e).data - move(x - h * e).data) * weights) / (2 * h)
               for e in np.eye(3)]
    assert grad == pytest.approx(numeric, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("kind", [scipy.sparse.dok_array, scipy.sparse.dok_matrix])
def test_a_dok_matrix_made_before_plus_a_traced_one_is_scipys_dok(kind):
    """A dok matrix made before the differentiation plus a sparse matrix of traced values: a
    dok matrix, as SciPy's; the dok matrix itself left as it was."""
    before = kind(2.0 * np.eye(3))
    saved = dict(before.items())
    csr = scipy.sparse.csr_array if kind is scipy.sparse.dok_array else scipy.sparse.csr_matrix

    def program(x):
        return before + csr((x, ([0, 1, 2], [1, 1, 2])), shape=(3, 3))

    x = np.array([1.0, -1.5, 3.0])
    want = program(x)
    seen = []

    def f(x):
        y = program(x)
        seen.append((y.format, isinstance(y, type(want)), y.nnz))
        return np.sum(y.toarray() ** 2)

    value, (grad,) = mutad.value_and_gradient(f, x.copy())
    assert seen == [(want.format, True, want.nnz)]
    assert value == np.sum(want.toarray() ** 2)
    assert grad == pytest.approx(2 * np.array([1.0, 2.0 - 1.5, 2.0 + 3.0]), rel=1e-14)
    assert dict(before.items()) == saved and before.nnz == len(saved)
