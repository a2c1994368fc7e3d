"""A compiled block takes a stretch of its reverse pass that reads and writes local cotangents
alone with its products unchecked, and checks the stretch once, at its end; where the check
fails, or a line raises, it finishes from there one step at a time, each product checked, and
its later calls check each product (``blocks.Stretch``).
Replayed calls against traced ones, bit for bit (values, gradients, NumPy's warnings and
floating-point events, exceptions) with the caller's arrays unchanged, on inputs that flip
that decision from call to call: infinities and NaNs among the inputs, zero cotangents times
infinite partials, products that overflow inside a stretch and then meet a zero, underflow,
float32 and complex data, under error handling the caller chose and ``f`` chose."""

import collections
import contextlib
import warnings

import numpy as np
import pytest

import mutad
from mutad.engines import blocks

GROUPS = 8
"""Groups of small operations around the steps under test: enough products for a stretch."""


def chain(x):
    for j in range(GROUPS):
        s = np.sin(x) if j % 2 == 0 else np.tanh(x)
        x = s * 0.1 + x * 0.999
    return x


def overflowing(x, a, b):
    """Where ``b`` is huge, the cotangent overflows (b times b) and then meets ``a``'s zero.
    (``a`` and ``b`` made in ``f``, so that their cotangents too are local: ``Stretch``.)"""
    a, b = a * 1.0, b * 1.0
    y = chain(x) * a
    y = y * b
    y = y * b
    return chain(y).sum()


def infinite_slopes(x, w, m):
    """Where ``w`` is zero, sqrt's slope is infinite: times a nonzero cotangent (an infinite
    one, which then meets ``w``'s zero), and, where ``m`` is zero too, times a zero one."""
    w, m = w * 1.0, m * 1.0
    s = np.sqrt(np.abs(chain(x)) * w)
    return chain(s * m + x * 0.5).sum()


def tiny(x, a):
    """Products that underflow inside the stretch where ``a`` is tiny."""
    a = a * 1.0
    y = chain(x) * a
    y = y * a
    return chain(y * 1e-300).sum()


def scaled(x, s):
    """A partial that is a Python number (``s``, a number of the program: outside argnums),
    zero or not finite on some calls: a product that ``times`` masks, whose check of a
    cotangent this large (a dot product of it with itself) NumPy warns overflows, is not
    taken unchecked."""
    return chain(chain(x) * s).sum() * 1e200


def float32_chain(x, a):
    y = chain(x.astype(np.float32)) * a.astype(np.float32)
    return chain(y).sum(dtype=np.float64)


def complex_chain(x, a):
    a = a * 1.0
    z = chain(x * (1.0 + 0.5j)) * a
    z = chain(z)
    return (z * z.conj()).real.sum()


N = 5
ONES = np.ones(N)
X = np.linspace(0.2, 1.0, N)


def _with(index, value, base=ONES):
    a = base.copy()
    a[index] = value
    return a


FINITE = {
    overflowing: (X, ONES, ONES * 2.0),
    infinite_slopes: (X, ONES, ONES),
    tiny: (X, ONES * 0.5),
    scaled: (X, 0.5),
    float32_chain: (X, ONES * 0.5),
    complex_chain: (X, ONES * 0.5),
}
FLIPS = {
    overflowing: [(X, _with(1, 0.0), _with(1, 1e300)), (X, _with(2, 0.0), _with(2, 1e200)),
                  (X, _with(0, 0.0), ONES), (X, ONES, _with(3, 1e300))],
    infinite_slopes: [(X, _with(1, 0.0), ONES), (X, _with(1, 0.0), _with(1, 0.0)),
                      (X, _with(4, 0.0), _with(0, 0.0))],
    tiny: [(X, _with(2, 1e-200)), (X, _with(2, 0.0)), (X, _with(0, 5e-324))],
    scaled: [(X, 0.0), (X, np.inf), (_with(1, np.inf, X), 0.0), (X, np.nan), (X, -0.0)],
    float32_chain: [(X, _with(1, 3e38)), (X, _with(1, np.inf)), (_with(0, np.nan, X), ONES)],
    complex_chain: [(X, _with(1, 1e300)), (X, _with(1, np.inf)), (_with(2, np.inf, X), ONES)],
}
INPUTS = [_with(0, np.inf, X), _with(3, np.nan, X), _with(1, -np.inf, X), _with(2, 0.0, X)]
"""Infinities, NaNs and a zero among the values of ``x``."""


def _sequences(f):
    """Sequences of calls of ``f``: finite calls alternating with each flip (each a call
    that, with its events, a program recorded on finite ones may not replay; no four in a
    row, after which the program would give up), and each flip alone, recorded on it."""
    finite = FINITE[f]
    flips = FLIPS[f] + [(x, *finite[1:]) for x in INPUTS]
    alternating = [finite, finite, finite]  # recorded, replayed, then compiled
    for flip in flips:
        alternating += [flip, finite, flip, finite]
    return [alternating] + [[flip] * 4 for flip in flips]


MODES = {
    "default": {},
    "over-raise": {"over": "raise"},
    "under-raise": {"under": "raise"},
    "invalid-raise": {"invalid": "raise"},
    "all-ignore": {"all": "ignore"},
    "all-warn": {"all": "warn"},
    "call": {"all": "call"},
    "print": {"over": "print", "invalid": "print"},
}


def _outcome(call, args, capfd):
    """``(what happened, warnings, events, printed)``: ``("value", result)`` or ``("raised",
    type)``, NumPy's warnings as ``(category, message)``, the events a callback heard, and
    what NumPy printed."""
    heard = []
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(call=lambda kind, flag: heard.append(kind)):
        warnings.simplefilter("always")
        try:
            result = "value", call(*args)
        except Exception as error:  # noqa: BLE001 - compared with what tracing raises
            result = "raised", type(error)
    return result, [(w.category, str(w.message)) for w in caught], heard, \
        capfd.readouterr().out


def _same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def replayed_like_traced(f, calls, modes, capfd, inside=False):
    """Each call of ``f`` on ``calls`` replayed as traced (see the module's docstring), all
    under NumPy's error handling ``modes``, or with ``f`` setting them itself (``inside``).
    Returns the replaying function; its ``traced`` counts the calls it traced."""
    argnums = (0,) if f in (overflowing, scaled) else tuple(range(len(calls[0])))

    def g(*args):
        with np.errstate(**modes) if inside else contextlib.nullcontext():
            return f(*args)

    outer = contextlib.nullcontext() if inside else np.errstate(**modes)
    with outer:
        replaying = mutad.value_and_grad(g, argnums=argnums, replay=True)
        tracing = mutad.value_and_grad(g, argnums=argnums)
        trace = replaying.trace
        replaying.trace = lambda *a, **k: (replaying.traced.append(1), trace(*a, **k))[1]
        replaying.traced = []
        for args in calls:
            mine = [np.copy(a) if type(a) is np.ndarray else a for a in args]
            got = _outcome(replaying, mine, capfd)
            assert all(_same(a, b) for a, b in zip(mine, args)), "the caller's arrays changed"
            expected = _outcome(tracing, [np.copy(a) if type(a) is np.ndarray else a
                                          for a in args], capfd)
            (kind, result), (traced_kind, traced_result) = got[0], expected[0]
            assert kind == traced_kind, (args, got, expected)
            assert _same(result, traced_result) if kind == "value" else \
                result is traced_result, (args, got, expected)
            assert got[1:] == expected[1:], (args, got, expected)
    return replaying


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("f", list(FINITE), ids=lambda f: f.__name__)
def test_a_replayed_stretch_is_the_traced_pullback(f, mode, capfd):
    for k, sequence in enumerate(_sequences(f)):
        replaying = replayed_like_traced(f, sequence, MODES[mode], capfd)
        # not traced every time: where no event is heard, each call after the first replays,
        # and a flip recorded on itself replays, having heard the same events again (not
        # scaled's: each value of a number outside argnums records a program of its own)
        if f is not scaled and (mode == "all-ignore" or mode == "default" and k > 0):
            assert len(replaying.traced) == 1, (mode, sequence[0])


@pytest.mark.parametrize("mode", ["over-raise", "invalid-raise", "all-ignore"])
def test_error_handling_set_inside_f(mode, capfd):
    for sequence in _sequences(overflowing):
        replayed_like_traced(overflowing, sequence, MODES[mode], capfd, inside=True)


def test_the_stretch_is_taken_unchecked_and_compiled_again_checked_where_it_fails(
        monkeypatch, capfd):
    """Not a test that passes trivially: the compiled reverse pass of the chain has a stretch,
    whose products a finite call takes unchecked (a dot product per stretch, not one per
    product); a call whose cotangent overflows and meets a zero finishes the block one step
    at a time, and the block's later calls check each product."""
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    dots = []

    def vdot(a, b):
        dots.append(1)
        return np.vdot(a, b)

    monkeypatch.setitem(blocks.HELPERS, "vdot", vdot)
    # (copies, as replayed_like_traced passes: arrays owning their memory, one signature;
    # X itself is a view, which a replay records a program of its own for)
    finite, flip = ([np.copy(a) for a in args] for args in (FINITE[overflowing],
                                                             FLIPS[overflowing][0]))
    calls = [finite, finite, finite]
    replaying = replayed_like_traced(overflowing, calls, MODES["all-ignore"], capfd)
    assert any("retake = shadows.events" in source for source in blocks.TEMPLATES)
    with np.errstate(all="ignore"):
        dots.clear()
        replaying(*finite)
        unchecked = len(dots)
        retreated = replaying(*flip)
        assert _same(retreated, mutad.value_and_grad(overflowing, argnums=(0,))(*flip))
        dots.clear()
        replaying(*finite)
    assert unchecked + 2 * GROUPS <= len(dots)
    assert len(replaying.traced) == 1
