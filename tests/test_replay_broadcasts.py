"""Elementwise steps with broadcast operands (``x[None, :, :] - x[:, None, :]``,
``m[:, None] * v**2``, ``A - c`` of a row ``c``) compiled into a replay's blocks: each operand's
cotangent is the product summed over the axes NumPy stretched it along, as the traced
engine's pullback sums it (``elementwise.unbroadcast``), so replayed gradients keep the
traced bits. Replayed calls against traced ones, bit for bit (values, gradients, warnings,
floating-point events) with the caller's arrays unchanged, on inputs that flip the products'
decisions from call to call (zeros meeting infinities, NaNs of either sign, signed zeros),
in float64, float32 and complex128, through the compiled and the interpreted pullback."""

import collections

import numpy as np
import pytest

import mutad
from mutad.engines import blocks, replay
from test_replay_complex import replayed_as_traced
from test_replay_stretches import MODES, replayed_like_traced


def pairwise(x, m):
    """An n-body energy: pairwise differences of positions, masses broadcast both ways."""
    d = x[None, :, :] - x[:, None, :]
    r2 = np.sum(d * d, axis=-1) + 0.25
    e = m[:, None] * m[None, :] / r2
    v = x * 2.0
    k = m[:, None] * v ** 2
    return np.sum(e) + np.sum(k)


def rows_and_columns(a, c):
    """A row made in ``f`` (its cotangent a block's local), a row and a column of the
    arguments (regions), broadcast against a matrix; a sum whose partials are one (no
    product) with the broadcast operand first, then last."""
    s = c * 1.5
    b = a - s
    b = b * c[None, :]
    b = s + b
    b = np.tanh(b) + a[:, 1:2]
    return np.sum(b * b)


def leading_axes(t, w):
    """An operand broadcast along leading axes it lacks and along an axis of length one."""
    y = t * w
    y = y + w[:, :1]
    y = np.exp(y * 0.5) * t[:1]
    return np.sum(y)


def scaled_columns(a, c):
    """A traced scalar (a product of an element) times a column, added into the leading
    elements of a vector in a loop (syrk's ``C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]``):
    the scalar's cotangent is the product summed, its product's check told in the lines."""
    u = c * 2.0
    for k in range(a.shape[1]):
        u[:k + 2] += 0.5 * a[k, 0] * a[:k + 2, k]
    return np.sum(u * u)


PROGRAMS = {pairwise: ((4, 3), (4,)), rows_and_columns: ((3, 4), (4,)),
            leading_axes: ((2, 3, 4), (3, 4)), scaled_columns: ((4, 3), (4,))}


def _with(a, index, value):
    a = a.copy()
    a.flat[index] = value
    return a


def _nan(bits):
    return np.array([bits], np.uint64).view(np.float64)[0]


def flipped(a, b, more=()):
    """Calls on ``(a, b)``: recorded, replayed, then compiled; then each flip of a product's
    decision (signed zeros, infinities, NaNs of either sign and payload, zeros; then
    ``more``), each twice, with ``(a, b)`` after each."""
    flips = [(_with(a, 1, -0.0), _with(b, 0, 0.0)), (_with(a, 2, np.inf), b),
             (a, _with(b, 1, -np.inf)), (_with(a, 0, np.nan), b),
             (np.zeros_like(a), -np.zeros_like(b)), (a, np.zeros_like(b))]
    if a.dtype == np.float64:
        flips += [(_with(a, 3, _nan(0xFFF8000000000002)), _with(b, 2, _nan(0x7FF8000000000001)))]
    calls = [(a, b)] * 3
    for flip in [*flips, *more]:
        calls += [flip, (a, b), flip, (a, b)]
    return calls


def _calls(f, dtype):
    rng = np.random.default_rng(len(f.__name__))
    return flipped(*(rng.standard_normal(shape).astype(dtype) for shape in PROGRAMS[f]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("mode", ["default", "all-ignore"])
@pytest.mark.parametrize("f", list(PROGRAMS), ids=lambda f: f.__name__)
def test_a_broadcast_operand_is_replayed_with_the_traced_bits(f, dtype, mode, capfd,
                                                              monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(f, _calls(f, dtype), MODES[mode], capfd)


def _steps(g):
    """The steps of ``g``'s one program, those of its blocks as the blocks hold them."""
    (program,) = g.programs.values()
    for step in program.steps:
        yield from step.steps if type(step) is blocks.Block else [step]


@pytest.mark.parametrize("f", list(PROGRAMS), ids=lambda f: f.__name__)
def test_the_broadcasting_steps_write_their_own_lines_in_a_block(f):
    """Not a test that passes trivially: every elementwise step with a broadcast operand
    runs in a compiled block as lines of its own (before, each ended its block's run and was
    interpreted)."""
    args = _calls(f, np.float64)[0]
    g = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        g(*args)
    (program,) = g.programs.values()
    broadcast = [step for step in _steps(g) if type(step) is replay.Pure
                 and any(place.shape != step.buffer.shape for place in step.inputs
                         if place is not None)]
    assert broadcast
    assert all(step.lean is not None for step in broadcast)
    inside = {id(step) for step in program.steps if type(step) is blocks.Block
              for step in step.steps}
    assert all(id(step) in inside for step in broadcast)


def test_a_scalar_times_a_column_is_replayed_not_traced_on_each_flip(capfd, monkeypatch):
    """The flips of ``scaled_columns``' products (an infinite or NaN column meeting a zero
    cotangent, zero scalars) are replayed, not traced, with the traced bits: the product
    of the scalar's cotangent asks its questions in the block's lines, and calls
    ``blocks._product`` (``products.times``) only where they say no."""
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    taken = []
    monkeypatch.setitem(blocks.HELPERS, "product",
                        lambda *args: (taken.append(1), blocks._product(*args))[1])
    calls = _calls(scaled_columns, np.float64)
    replaying = replayed_like_traced(scaled_columns, calls[:3], MODES["all-ignore"], capfd)
    assert not taken  # finite and nonzero: every product told in the lines
    replaying = replayed_like_traced(scaled_columns, calls, MODES["all-ignore"], capfd)
    assert taken  # an infinite column, zeros: products.times
    assert len(replaying.traced) == 1  # the recording alone
    (program,) = replaying.programs.values()
    assert program.replays == len(calls) - 1


# The cotangent of a sum over every axis, spread over the operand's shape, was a broadcast in
# the rule's pullback (the general path, which the recording call takes) and an array of its
# own in tracing's fast path and a compiled replay: NumPy's loops add a broadcast operand to a
# shadow with other NaNs, so the recording call's gradient had NaNs of other signs than
# ``replay=False``'s (``S /= S.sum()`` of ``inf - inf``). Each is now the array of its own.

def normalized_outer(x, y):
    with np.errstate(all="ignore"):
        s = np.outer(x, y)
        s /= s.sum()
        return (s * np.arange(1.0, 10.0).reshape(3, 3)).sum()


def test_the_recording_call_spreads_a_sums_cotangent_as_tracing():
    calls = [(np.array([np.inf, 0.5, 2.0]), np.array([-1.0, 0.5, -1.0])),
             (np.array([1.0, 0.5, 2.0]), np.array([-1.0, 0.5, -1.0])),
             (np.array([np.inf, 0.5, 2.0]), np.array([-1.0, 0.5, -1.0]))]
    replayed_as_traced(normalized_outer, calls, (0, 1))
