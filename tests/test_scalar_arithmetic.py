"""A scalar loop's float64 arithmetic in Python's floats (``elementwise.arithmetic_in_python``,
``exact_in_python``: an element's ``+ - * /`` in the forward pass, a product of a partial and
the sum into an array's shadow in the reverse pass) and its element writes by assignment
(``inplace.record_element_write``) give NumPy's results bit for bit: over
random scalar-loop programs (element reads and writes, values kept in lists, dicts, tuples and
attributes and read back later, branches on comparisons, ``float()`` and ``int()``, a row
viewed and written through), with ordinary values and with zeros, subnormals, huge values,
infinities and NaNs, mutad's value and every element the program leaves (a NaN's sign and
payload included) are plain NumPy's, its gradient is the one the ufuncs alone
give (the same engine with the Python path turned off), the caller's arrays come back, and
where the program is smooth the gradient matches finite differences."""

import warnings

import numpy as np
import pytest

import mutad
from mutad.core import registry
from mutad.engines import elementwise

N = 4

_SPECIAL = [0.0, -0.0, 5e-324, 1e-310, 1e-160, 1e160, 1e300, np.inf, -np.inf, np.nan]
"""Values at which Python's float arithmetic and NumPy's may part (signed zeros, tininess,
overflow, NaN payloads): the Python path must hand them to the ufunc."""


def _index(rng):
    return int(rng.integers(N))


def _operator(rng):
    return str(rng.choice(["+", "-", "*", "/"]))


def _operand(rng):
    """An expression of one value: an element of ``A`` or ``x``, a kept value, or a number."""
    kind = rng.integers(5)
    if kind == 0:
        return f"A[{_index(rng)}, {_index(rng)}]"
    if kind == 1:
        return f"x[{_index(rng)}]"
    if kind == 2:
        return "kept[-1]"
    if kind == 3:
        return "d['v']"
    return repr(float(rng.choice([0.5, 1.5, -2.0, 3.0, 1e-3])))


def _statement(rng, smooth):
    """One statement of the loop body (four spaces in); ``smooth``: no branch, no conversion."""
    i, j, k, m = (_index(rng) for _ in range(4))
    a, b, op = _operand(rng), _operand(rng), _operator(rng)
    kinds = 9 if smooth else 12
    kind = rng.integers(kinds)
    if kind == 0:
        return [f"A[{i}, {j}] = {a} {op} {b}"]
    if kind == 1:
        return [f"A[{i}, {j}] {op}= {a}"]
    if kind == 2:
        return [f"x[{i}] = ({a} {op} {b}) {_operator(rng)} A[{k}, {m}]"]
    if kind == 3:
        return [f"kept.append({a} {op} {b})"]
    if kind == 4:
        return [f"d['v'] = {a} {op} A[{k}, {m}]"]
    if kind == 5:
        return [f"box.pair = ({a}, A[{k}, {m}] {op} {b})",
                f"x[{i}] = box.pair[1] {_operator(rng)} box.pair[0]"]
    if kind == 6:
        return [f"row = A[{i}]", f"row[{j}] = row[{k}] {op} {a}"]
    if kind == 7:
        return [f"x[{i}] {op}= x[{j}] * A[{k}, {m}]"]
    if kind == 8:
        return [f"A[{i}, {j}] = kept[-2] {op} kept[-1]"]
    if kind == 9:
        return [f"if {a} > {b}:", f"    A[{i}, {j}] *= 2.0", "else:",
                f"    x[{k}] -= A[{m}, {i}]"]
    if kind == 10:
        return [f"x[{i}] = float(A[{j}, {k}]) * x[{m}]"]
    return [f"x[int(abs(float(A[{i}, {j}]))) % {N}] += A[{k}, {m}] {op} 1.25"]


def _program(seed, smooth):
    rng = np.random.default_rng(seed)
    body = ["kept = [A[0, 0] * 1.0, x[1] + 0.0]", "d = {'v': A[1, 1] - x[0]}",
            "box = Box()"]
    for _ in range(int(rng.integers(6, 20))):
        body += _statement(rng, smooth)
    # (each element's bits as the program leaves them, its NaNs' payloads too: ``seen``)
    ending = ["seen.append([float(A[i, j]) for i in range(N) for j in range(N)])",
              "seen.append([float(x[j]) for j in range(N)])",
              "return (A * A).sum() + (x * x).sum() + kept[-1] * d['v']"]
    source = "def f(A, x):\n" + "".join(f"    {line}\n" for line in body + ending)
    seen = []
    namespace = {"Box": type("Box", (), {}), "np": np, "seen": seen, "N": N}
    exec(compile(source, f"<program {seed}>", "exec"), namespace)
    return namespace["f"], source, seen


def _arguments(seed, special):
    rng = np.random.default_rng(10_000 + seed)
    A = rng.uniform(0.5, 2.0, (N, N)) * rng.choice([-1.0, 1.0], (N, N))
    x = rng.uniform(0.5, 2.0, N)
    if special:
        for _ in range(3):
            A[_index(rng), _index(rng)] = rng.choice(_SPECIAL)
        x[_index(rng)] = rng.choice(_SPECIAL)
    return A, x


def _bits(arrays):
    return [np.asarray(a, np.float64).tobytes() for a in arrays]


def _numpy(f, A, x):
    """What plain NumPy computes: the loss, and the arguments as ``f`` leaves them."""
    A, x = A.copy(), x.copy()
    with np.errstate(all="ignore"):
        loss = f(A, x)
    return loss, A, x


def _mutad(f, A, x):
    with np.errstate(all="ignore"):
        return mutad.value_and_gradient(f, A, x)


def _ufuncs_only(monkeypatch):
    """The engine with no arithmetic in Python's floats: every result is a ufunc's."""
    monkeypatch.setattr(elementwise, "exact_in_python", lambda result: False)


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_random_scalar_loops(seed, special, monkeypatch):
    f, source, seen = _program(seed, smooth=False)
    A, x = _arguments(seed, special)
    before = _bits([A, x])
    try:
        loss, (gA, gx) = _mutad(f, A, x)
    except (IndexError, ZeroDivisionError, OverflowError, ValueError) as error:
        with pytest.raises(type(error)):  # (NumPy's own: int() of a NaN or an infinity)
            _numpy(f, A, x)
        return
    assert _bits([A, x]) == before, source  # the caller's arrays, as they were
    written = _bits(seen)
    seen.clear()
    expected, _, _ = _numpy(f, A, x)
    assert _bits([loss]) == _bits([expected]), source
    assert written == _bits(seen), source  # every element as NumPy leaves it
    _ufuncs_only(monkeypatch)
    loss_ufuncs, (gA_ufuncs, gx_ufuncs) = _mutad(f, A, x)
    assert _bits([loss]) == _bits([loss_ufuncs]), source
    assert _bits([gA, gx]) == _bits([gA_ufuncs, gx_ufuncs]), source


@pytest.mark.parametrize("seed", range(12))
def test_random_scalar_loops_match_finite_differences(seed):
    f, source, _ = _program(100 + seed, smooth=True)
    A, x = _arguments(seed, special=False)
    loss, (gA, gx) = _mutad(f, A, x)
    if not np.isfinite(loss) or abs(loss) > 1e8:
        return  # (a division by a value near zero: no meaningful difference)
    rng = np.random.default_rng(seed)
    vA, vx = rng.standard_normal(A.shape), rng.standard_normal(x.shape)
    h = 1e-6

    def at(t):
        return _numpy(f, A + t * vA, x + t * vx)[0]

    fd = (at(h) - at(-h)) / (2 * h)
    directional = np.sum(gA * vA) + np.sum(gx * vx)
    assert directional == pytest.approx(fd, rel=1e-4, abs=1e-6 * max(1.0, abs(loss))), source


def test_python_arithmetic_is_taken_and_left(monkeypatch):
    """The programs above reach both sides: results Python's floats give, and results left to
    the ufunc (so the comparison with the ufuncs alone tests something)."""
    taken, left = [], []
    exact = elementwise.exact_in_python

    def noting(result):
        (taken if exact(result) else left).append(result)
        return exact(result)

    monkeypatch.setattr(elementwise, "exact_in_python", noting)
    for seed in range(8):
        f, _, _ = _program(seed, smooth=False)
        try:
            _mutad(f, *_arguments(seed, special=True))
        except (IndexError, ZeroDivisionError, OverflowError, ValueError):
            pass
    assert len(taken) > 100 and left


@pytest.mark.parametrize("a, b", [(1e-160, 1e-160), (1e300, 1e10), (0.0, 1.0), (-0.0, 2.0),
                                  (np.inf, 1.0), (np.nan, 1.0), (1.0, 0.0), (3.0, 7.0),
                                  (2.2250738585072014e-308, 0.5), (5e-324, 1.0)])
@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.divide])
def test_arithmetic_in_python_is_numpys_or_none(ufunc, a, b):
    values = [np.array(a), np.array(b)]
    with np.errstate(all="ignore"):
        expected = ufunc(*values)
    result = elementwise.arithmetic_in_python(ufunc, values)
    if result is not None:
        assert np.float64(result).tobytes() == expected.tobytes()
        assert elementwise.exact_in_python(result)
    else:
        assert not np.isfinite(expected) or not elementwise.exact_in_python(float(expected)) \
            or not b


def _events(f, A, x):
    """The value, gradient and caller's arrays after ``mutad.value_and_gradient``, and every
    floating-point warning NumPy issued, forward and reverse, with its message and line."""
    A, x = A.copy(), x.copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all="warn"):
            try:
                loss, grads = mutad.value_and_gradient(f, A, x)
            except (IndexError, ZeroDivisionError, OverflowError, ValueError) as error:
                loss, grads = type(error), ()
    heard = [(w.category, str(w.message), w.filename, w.lineno) for w in caught]
    return _bits([loss, *grads, A, x]) if grads else loss, heard


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_the_reverse_pass_in_pythons_floats_is_the_ufuncs(seed, special, monkeypatch):
    """A scalar loop's pullbacks of one float64 element computed with Python's floats
    (``elementwise._scalar_back``: partials 1, operands, constants and the expressions a
    partial offers for NumPy's scalars, products and sums into shadows' elements) against
    the ufuncs' own path: the same value, gradient (NaNs' signs, signed zeros, infinities) and
    caller's arrays, bit for bit, and the same warnings with their messages and lines."""
    f, source, seen = _program(seed, smooth=False)
    A, x = _arguments(seed, special)
    python = _events(f, A, x)
    monkeypatch.setattr(elementwise, "_scalar_back", lambda *arguments: False)
    assert _events(f, A, x) == python, source


def test_the_reverse_pass_in_pythons_floats_is_taken_and_left(monkeypatch):
    """The programs above reach both sides of ``_scalar_back``, and of the partials it computes
    (``_scalar_partial``): taken, and left to the ufuncs (so the comparison above tests
    something)."""
    backs, partials = [], []
    back, partial = elementwise._scalar_back, elementwise._scalar_partial

    def noting_back(*arguments):
        backs.append(back(*arguments))
        return backs[-1]

    def noting_partial(*arguments):
        partials.append(partial(*arguments))
        return partials[-1]

    monkeypatch.setattr(elementwise, "_scalar_back", noting_back)
    monkeypatch.setattr(elementwise, "_scalar_partial", noting_partial)
    for seed in range(8):
        _events(*_program(seed, smooth=False)[:1], *_arguments(seed, special=True))
    assert backs.count(True) > 100 and False in backs
    assert sum(p is not None for p in partials) > 10 and None in partials


@pytest.mark.parametrize("a, b", [(3.0, 7.0), (1.0, 1e-310), (1e-310, 3.0), (1e300, 1e-10),
                                  (1e-300, 1e10), (0.0, 2.0), (-0.0, 2.0), (2.0, 0.0),
                                  (2.0, -0.0), (np.inf, 2.0), (2.0, np.inf), (np.nan, 2.0),
                                  (5e-324, 1.0), (-1.5, -2.5)])
def test_the_partials_in_pythons_floats_are_numpys_or_none(a, b):
    """Each partial that offers an expression for float64 scalars, computed with Python's
    floats (``elementwise._scalar_partial``), is the partial's own bits where it gives a
    number, and none where the partial raises a floating-point event."""
    rule = registry.rule_for(np.divide).elementwise
    values = (np.array(a), np.array(b))
    for partial in rule.partials:
        try:
            with np.errstate(all="raise"):
                expected = np.float64(partial(None, *values))
        except FloatingPointError:
            expected = None
        python = elementwise._scalar_partial(partial, values, rule)
        if python is not None:
            assert expected is not None and np.float64(python).tobytes() == expected.tobytes()
        elif expected is not None:
            assert not elementwise.exact_in_python(float(expected)) or not b


@pytest.mark.parametrize("template", ["-{y} * 2.0 + {0} / ({1} - {y})", "{1} * -{0} - 0.5",
                                      "{0} / {1} / {1}", "-({0} + {1})"])
def test_a_partials_expression_in_pythons_floats_is_numpys_or_none(template):
    """The function ``elementwise._python_partial`` writes for an expression a partial offers
    (constants, negations, ``y``, operations in any nesting) gives NumPy's float64 bits of that
    expression where every operation is exact in Python's floats and raises nothing, and None
    where one is not or a value it reads is no float64 (a float32, an array with axes)."""
    function, uses_y = elementwise._python_partial((template, ()))
    assert uses_y == ("{y}" in template)
    numbers = [3.0, -1.5, 0.0, -0.0, 1e-310, 1e300, 7.0, np.inf, np.nan, 2.0]
    given = []
    for a in numbers:
        for b in numbers[::3]:
            for y in numbers[::4]:
                kept = [np.array(a), b, np.float64(y)]
                try:
                    with np.errstate(all="raise"):
                        expected = eval(template.format("a", "b", y="y"), {
                            "a": np.float64(a), "b": np.float64(b), "y": np.float64(y)})
                except FloatingPointError:
                    expected = None
                python = function(kept)
                given.append(python is not None)
                if python is not None:
                    assert type(python) is float and expected is not None
                    assert np.float64(python).tobytes() == np.float64(expected).tobytes()
    assert any(given) and not all(given)  # (both answers reached)
    assert function([np.float32(1.0), 2.0, 3.0]) is None
    assert function([np.array([1.0]), 2.0, 3.0]) is None
    assert function([1.0, 2.0, 3.0]) is not None


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_a_written_values_cotangent_handed_on_as_a_float(seed, special, monkeypatch):
    """The reverse pass hands the cotangent of an element written (``x[i, j] += v``) to the
    folded record that computed the value as Python's float (``ElementWrite.reverse``'s
    ``handing``), not through the stand-in's shadow: the same value, gradient, caller's arrays
    and warnings, bit for bit, as without it (and the programs take it)."""
    f, source, seen = _program(seed, smooth=False)
    A, x = _arguments(seed, special)
    reverse, handed = elementwise.ElementWrite.reverse, []

    def noting(record, shadows, handing=None):
        handed.append(reverse(record, shadows, handing))
        return handed[-1]

    monkeypatch.setattr(elementwise.ElementWrite, "reverse", noting)
    taken = _events(f, A, x)
    monkeypatch.setattr(elementwise.ElementWrite, "reverse",
                        lambda record, shadows, handing=None: reverse(record, shadows))
    assert _events(f, A, x) == taken, source
    if seed == 0 and not special:
        assert any(type(h) is tuple for h in handed)
