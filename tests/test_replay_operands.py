"""Compiled blocks hand NumPy a number of the program (``2 * u``'s 2, subtract's -1, a scale
``r``) as a read-only 0-d array of the arrays' dtype where that is the same operand of the same
loop (``replay._as_operand``), and tanh's derivative clips and divides by 0-d arrays of the
dtype (``_helpers.sech_squared``): the same bits as the Python numbers gave. Replayed calls
against traced ones, bit for bit (values, gradients, warnings, floating-point events), on
inputs that change what NumPy computes: NaNs, infinities, zeros, overflow, float32, float16,
and numbers that the dtype does not hold exactly (kept as numbers)."""

import collections
import re

import numpy as np
import pytest

from mutad.engines import blocks
from mutad.rules._helpers import sech_squared
from test_replay_stretches import MODES, replayed_like_traced


def scaled_sums(x, y):
    """Python numbers beside arrays: ints (2, 3, a huge one no float holds), floats (0.25,
    0.1, which float32 does not hold), and subtract's -1."""
    for _ in range(3):
        x = 2 * x - y * 3 + x / 4 - 1 * y
        y = y * 0.25 - x * 0.1 + (2 ** 60 + 1) * y * 1e-18
    return (x * y).sum(dtype=np.float64)


def tanh_chain(x, y):
    for _ in range(3):
        x = np.tanh(x * 1.0) * 3 - y
        y = np.tanh(y * 2) + x
    return (x * y).sum(dtype=np.float64)


N = 6
X = np.linspace(-1.0, 1.5, N)
Y = np.linspace(0.5, 2.0, N)


def _with(a, index, value):
    a = a.copy()
    a[index] = value
    return a


def _calls(dtype):
    x, y = X.astype(dtype), Y.astype(dtype)
    finite = (x, y)
    flips = [(_with(x, 1, np.nan), y), (_with(x, 2, np.inf), y), (x, _with(y, 0, -np.inf)),
             (_with(x, 3, 0.0), _with(y, 3, -0.0)), (_with(x, 4, 800.0), y),
             (x, _with(y, 5, -100.0)), (_with(x, 0, 1e30 if dtype != np.float16 else 6e4), y)]
    calls = [finite, finite, finite]  # recorded, replayed, then compiled
    for flip in flips:
        calls += [flip, finite, flip, finite]
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("f", [scaled_sums, tanh_chain], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
def test_numbers_as_arrays_give_the_traced_bits(f, dtype, mode, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(f, _calls(dtype), MODES[mode], capfd)
    sources = "".join(blocks.TEMPLATES)
    assert sources, "not compiled"
    assert "out=" not in sources.partition("def backward")[2] or f is not scaled_sums


def _bits(y):
    """The bytes of ``y``'s values (an x87 long double's 10 of its 16: the rest is padding)."""
    if y.dtype == np.longdouble and np.finfo(y.dtype).nmant == 63:
        return y.view(np.uint8).reshape(len(y), -1)[:, :10].tobytes()
    return y.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_sech_squared_is_its_formula_on_pythons_numbers(dtype):
    """The 0-d operands give the bits and the floating-point events of the formula written
    with NumPy's scalar bounds and Python's 1.0."""
    rng = np.random.default_rng(3)
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324, 11, 12, 88, 89, 89.5, 710, 711,
               -710.5, 1e4]
    for scale in (1.0, 30.0, 1000.0):
        with np.errstate(over="ignore"):
            x = np.concatenate([rng.normal(size=500) * scale, special]).astype(dtype)
        bound = np.floor(np.arccosh(np.finfo(dtype).max))
        heard = {}
        for name, compute in (("new", sech_squared), ("formula", lambda x: np.multiply(
                *[np.divide(1.0, np.cosh(np.clip(x, -bound, bound)))] * 2))):
            events = []
            with np.errstate(all="call", call=lambda kind, flag: events.append(kind)):
                y = compute(x.copy())
            heard[name] = _bits(y), y.dtype, events
        assert heard["new"] == heard["formula"], (dtype, scale)


def test_a_float32_cotangent_times_numpys_float64_partial_stays_float32(capfd):
    """``x / 4``'s partial in x is NumPy's float64 1 / 4, which promotes a float32 product
    (NEP 50): the engine takes it into an array of the cotangent's dtype, and so does the
    compiled block (it gave a float64 gradient, rounded otherwise, from the third call on)."""
    def f(x, y):
        return ((2 * x + x / 4) * y).sum(dtype=np.float64)

    x, y = X.astype(np.float32), Y.astype(np.float32)
    replaying = replayed_like_traced(f, [(x, y)] * 4, MODES["default"], capfd)
    assert replaying(x, y)[1][0].dtype == np.float32


def _nan(bits):
    return np.array([bits], np.uint64).view(np.float64)[0]


NANS = [_nan(0x7FF8000000000001), _nan(0xFFF8000000000002), _nan(0x7FF0000000000003)]
"""NaNs of other payloads and signs (the last a signaling one), which arithmetic on NumPy's
scalars and the ufuncs may choose between otherwise where two meet."""


def stencil(u, v, steps=2):
    """Element by element, chains of arithmetic on NumPy's scalars: each checked for a NaN
    once, at its end, in a compiled block (``blocks.Code.defer_nan_checks``)."""
    r = 0.25
    n = len(u)
    for _ in range(steps):
        un = u.copy()
        for i in range(1, n - 1):
            u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1]) / v[i] - v[i] * un[i]
    return np.sum(u * v)


def _stencil_calls():
    u, v = np.linspace(0.5, 1.5, 7), np.linspace(1.0, 2.0, 7)
    finite = (u, v)
    flips = [(_with(u, 3, nan), v) for nan in NANS] + [
        (_with(_with(u, 2, NANS[0]), 3, NANS[1]), v),  # two NaNs meet
        (u, _with(v, 3, NANS[1])), (_with(u, 2, NANS[2]), _with(v, 2, NANS[0])),
        (_with(u, 2, np.inf), _with(v, 2, np.inf)),  # inf - inf, inf / inf: NaNs made
        (_with(u, 4, 1e308), v), (u, _with(v, 3, 0.0)), (_with(u, 1, 0.0), _with(v, 1, 0.0))]
    calls = [finite, finite, finite]
    for flip in flips:
        calls += [flip, finite, flip, finite]
    return calls


@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
def test_a_chain_checked_for_a_nan_at_its_end_gives_the_traced_bits(mode, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(stencil, _stencil_calls(), MODES[mode], capfd)
    forward = "".join(source.partition("def backward")[0] for source in blocks.TEMPLATES)
    assert forward, "not compiled"
    # (each update's chain of operations checked once, at its end)
    assert re.search(r"if (v[0-9]+) != \1:\n +if (v[0-9]+) != \2:", forward)


def test_a_number_is_an_operand_array_only_where_the_dtype_holds_it():
    from mutad.engines.replay import _as_operand
    assert _as_operand(2, np.float16).dtype == np.float16
    assert _as_operand(np.float64(0.1), np.float32).dtype == np.float64  # (NEP 50: its own)
    for number, dtype in [(0.1, np.float32), (2 ** 53 + 1, np.float64), (10 ** 400, np.float64),
                          (1e300, np.float32), (np.inf, np.float64), (True, np.float64)]:
        assert _as_operand(number, dtype) is None, (number, dtype)


def negated_products(u, w):
    """Products by a constant that feed a difference (``- 2*w``'s cotangent is the cotangent
    times -1, then times 2): one product by -2 in a compiled block
    (``blocks.Code.fold_negations``); a scale float32 does not hold (0.1), an int, a float."""
    for _ in range(3):
        d = u - 2 * w - 0.1 * (u * w) - 3 * (w - 2.5 * u)
        u = d * w
    return (u * u).sum(dtype=np.float64)


def _negated_calls(dtype):
    u, w = X.astype(dtype), Y.astype(dtype)
    big = 1e300 if dtype == np.float64 else 1e30 if dtype == np.float32 else 6e4
    nans = NANS if dtype == np.float64 else [np.nan, -np.nan]
    finite = (u, w)
    flips = [(u, _with(w, 2, nan)) for nan in nans] + [
        (_with(u, 1, nans[0]), _with(w, 1, nans[-1])), (u, _with(w, 3, np.inf)),
        (_with(u, 4, -np.inf), w), (u, _with(w, 0, big)), (_with(u, 5, big), _with(w, 5, big)),
        (_with(u, 2, 0.0), _with(w, 2, -0.0)), (u, _with(_with(w, 3, -0.0), 4, -0.0)),
        (u, _with(w, 1, 1e-310 if dtype == np.float64
                                                            else 1e-40 if dtype == np.float32
                                                            else 1e-7))]
    calls = [finite, finite, finite]
    for flip in flips:
        calls += [flip, finite, flip, finite]
    return calls


def _reverse_sources(f, calls, mode, capfd, monkeypatch):
    """``f`` on ``calls`` replayed as traced without, then with ``Code.fold_negations``: the
    reverse passes compiled, by whether they folded."""
    sources = {}
    for fold in (False, True):
        templates = collections.OrderedDict()
        monkeypatch.setattr(blocks, "TEMPLATES", templates)
        # (and the finished lines, which would keep the lines finished without folding)
        monkeypatch.setattr(blocks, "FINISHED", collections.OrderedDict())
        if not fold:
            monkeypatch.setattr(blocks.Code, "fold_negations", lambda code: None)
        replayed_like_traced(f, calls, MODES[mode], capfd)
        monkeypatch.undo()
        sources[fold] = "".join(source.partition("def backward")[2] for source in templates)
        assert sources[fold], "not compiled"
    return sources


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
def test_a_product_by_minus_one_folded_into_the_next_gives_the_traced_bits(
        dtype, mode, capfd, monkeypatch):
    sources = _reverse_sources(negated_products, _negated_calls(dtype), mode, capfd, monkeypatch)
    # (the products by -1 taken into the next: fewer products in the reverse pass)
    assert sources[True].count("multiply(") < sources[False].count("multiply(")


def stepped(u, w):
    """A write that adds into a region (``u[1:-1] += ...``): its cotangent is taken out of the
    region, which then gets it back as the cotangent of the values read there; in a compiled
    block, 0.0 added into the region that still holds it (``replay._added_back``), which
    makes each -0.0 a 0.0 as adding the cotangent into zeros does (the argument's own: a
    copy's pullback would add its cotangent into zeros again)."""
    for _ in range(3):
        u[1:-1] += 0.25 * (u[2:] - 2 * u[1:-1] + u[:-2]) * w[1:-1]
        u[0] = 0.0
    return (u * w).sum(dtype=np.float64)


def shifted(u, w):
    """As :func:`stepped`, the region's cotangent its only one (a -0.0 kept nowhere)."""
    for _ in range(3):
        u[1:-1] += 0.5 * w[1:-1]
    return (u * w).sum(dtype=np.float64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
@pytest.mark.parametrize("f", [stepped, shifted], ids=lambda f: f.__name__)
def test_a_cotangent_added_back_into_its_region_gives_the_traced_bits(
        f, dtype, mode, capfd, monkeypatch):
    templates = collections.OrderedDict()
    monkeypatch.setattr(blocks, "TEMPLATES", templates)
    replayed_like_traced(f, _negated_calls(dtype), MODES[mode], capfd)
    assert "dy = view.copy()" in "".join(source.partition("def backward")[2]
                                         for source in templates)


def scalar_negated_products(u, w):
    """Element by element, products by a constant that feed a difference, on NumPy's float64
    scalars: ``- 2 * un[i]``'s cotangent times -1, then times 2, is one product by -2 and one
    NaN check in a compiled block (``blocks.Code.fold_negations``); as are ``- 3 * (...)``'s and
    ``- 0.1 * un[i]``'s (a scale float32 does not hold)."""
    for _ in range(2):
        un = u.copy()
        for i in range(1, len(u) - 1):
            u[i] += 0.25 * (un[i + 1] - 2 * un[i] + un[i - 1]) * w[i] \
                - 3 * (w[i] - 0.1 * un[i])
    return np.sum(u * w)


@pytest.mark.parametrize("mode", ["default", "all-ignore", "all-warn"])
def test_a_scalar_product_by_minus_one_folded_into_the_next_gives_the_traced_bits(
        mode, capfd, monkeypatch):
    sources = _reverse_sources(scalar_negated_products, _negated_calls(np.float64), mode,
                               capfd, monkeypatch)
    # (the products by -1 taken into the next: fewer NaN checks in the reverse pass)
    assert sources[True].count("times_scalar(") < sources[False].count("times_scalar(")
