"""Steps a replay's block runs as they are, their records reversed in their place
(``blocks.Opaque``): the operations the engine records again on each call (``np.add.at``, a
scatter, ``np.copyto``: as many records as it makes on the call), elementwise steps on
complex values and on arrays too large for lines of the block's own, and complex gathers.
Before, each ended its block's run. Replayed calls against traced ones, bit for bit (values,
gradients, warnings, floating-point events) with the caller's arrays unchanged, on inputs
that flip the products' decisions from call to call."""

import collections

import numpy as np
from numpy.lib import _shape_base_impl
import pytest

import mutad
from mutad.engines import blocks, replay
from test_replay_broadcasts import flipped
from test_replay_stretches import MODES, replayed_like_traced

IDX = np.array([0, 2, 2, 4])


def scatters(x, w):
    """``ufunc.at`` with a repeated index, a scatter, ``copyto`` and an augmented scatter,
    between small elementwise steps."""
    u = x * 1.0
    np.add.at(u, IDX, w[:4] * 2.0)
    v = u * u + 1.0
    v[IDX] = w[1:5] * v[:4]
    np.copyto(u, v * 0.5)
    z = np.zeros(5)
    z[[1, 3]] += u[:2]
    c = np.sin(u) * z + v
    return np.sum(c * c) + np.sum(v)


def complex_values(x, w):
    """Elementwise steps and a gather on complex values, between real ones."""
    u = x * 1.5
    c = u + 1j * w[:5]
    c = c * c - np.exp(1j * u)
    r = np.abs(c[[0, 2, 4]]) * w[:3]
    return np.sum(r * r) + np.sum(u)


def large(x, w):
    """An elementwise step on arrays too large for the block's lines, between small ones."""
    u = x * 1.0
    big = np.outer(u, w)  # (larger than a short array)
    big = np.tanh(big) * 2.0
    s = np.sum(big, axis=0) * w
    return np.sum(s * u[:len(w)])


PROGRAMS = {scatters: (5, 6), complex_values: (5, 6), large: (600, 40)}


def _calls(f, dtype):
    rng = np.random.default_rng(len(f.__name__))
    return flipped(*(rng.standard_normal(n).astype(dtype) for n in PROGRAMS[f]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mode", ["default", "all-ignore"])
@pytest.mark.parametrize("f", list(PROGRAMS), ids=lambda f: f.__name__)
def test_a_step_run_as_it_is_in_a_block_is_replayed_with_the_traced_bits(f, dtype, mode,
                                                                          capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(f, _calls(f, dtype), MODES[mode], capfd)


def _program(f):
    args = _calls(f, np.float64)[0]
    g = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        g(*args)
    (program,) = g.programs.values()
    return program


@pytest.mark.parametrize("f, kinds", [(scatters, (replay.Reenter,)),
                                      (complex_values, (replay.Pure, replay.Gather))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_the_steps_run_inside_a_block(f, kinds):
    """Not a test that passes trivially: the steps of these kinds run inside compiled blocks
    (before, each ended its block's run), none left between blocks."""
    program = _program(f)
    opaque = [step.step for block in program.steps if type(block) is blocks.Block
              for step in block.steps if type(step) is blocks.Opaque]
    assert any(type(step) in kinds for step in opaque)
    assert not any(type(step) in kinds and (type(step) is replay.Reenter or not step.lean)
                   for step in program.steps)


def test_a_large_step_stays_between_blocks():
    """A step on large arrays is not run inside a block, whose lines that read its value
    would hold it until the block's forward pass is over: the replay lets it go after its
    last reader, as the traced call does (``replay.Free``)."""
    program = _program(large)
    big = [step for step in program.steps if type(step) is replay.Pure and not step.lean]
    assert big and any(type(step) is blocks.Block for step in program.steps)


# ----------------------------------------------------------------------------------------------
# An operation run again whose result is an array of its own (np.piecewise's: zeros of x's type,
# then each function's values assigned where its condition holds)

def _pieces(s, w):
    return np.piecewise(s, [s < 0.0, s > 1.0], [lambda t: t * t, np.sin, 0.5]) * w


def piecewise_read(x, w):
    """Its result read by elementwise steps."""
    return np.sum(_pieces(x * 1.5, w) ** 2)


def piecewise_written(x, w):
    """Its result written in place after: an augmented write, a slice of itself, a scatter."""
    p = np.piecewise(x, [x < 0.0], [lambda t: np.exp(t), lambda t: t / 3.0])
    p *= w
    p[1:] += p[:-1] * 0.5
    np.add.at(p, [0, 0, 2], w[:3])
    return np.sum(p * x)


def piecewise_twice(x, w):
    """Its result the next one's argument, an element of it written between."""
    s = x * w
    for _ in range(2):
        s = np.piecewise(s, [s < 0.2], [lambda t: t * 1.5, lambda t: t - 0.1])
        s[0] = w[1] * s[2]
    return np.sum(s * s)


def _made_calls(f, n):
    """Calls whose conditions flip between calls (and values large enough, at ``n``, for the
    reverse pass to recompute what the records read, and for writes undone by inverses)."""
    rng = np.random.default_rng(len(f.__name__))
    x, w = rng.standard_normal(n), rng.uniform(0.5, 2.0, n)
    return [(x, w), (x, w), (-x, w), (x * 0.5 + 0.6, w), (x, w * 1.1), (-x, w), (x, w)]


@pytest.mark.parametrize("policy, memory", [("restore", None), ("checkpoint", None),
                                            ("restore", 0)])
@pytest.mark.parametrize("n", [5, 10_000])
@pytest.mark.parametrize("f", [piecewise_read, piecewise_written, piecewise_twice],
                         ids=lambda f: f.__name__)
def test_an_operation_that_makes_its_result_is_run_again_as_traced(f, n, policy, memory):
    """The operation runs again on each call as one step (:class:`replay.Reenter`), its new
    array taking the recorded one's key, which the later steps' records name: conditions
    that move between calls are taken again. Every call after the first replays, bit for
    bit the traced call, the caller's arrays as they were (before, each was traced: an
    operation that records its own new arrays)."""
    calls = _made_calls(f, n)
    replaying = mutad.value_and_grad(f, argnums=(0, 1), policy=policy, memory=memory,
                                     replay=True)
    tracing = mutad.value_and_grad(f, argnums=(0, 1), policy=policy, memory=memory)
    for x, w in calls:
        mine = (x.copy(), w.copy())
        got = replaying(*mine)
        assert mine[0].tobytes() == x.tobytes() and mine[1].tobytes() == w.tobytes()
        expected = tracing(x.copy(), w.copy())
        assert np.asarray(got[0]).tobytes() == np.asarray(expected[0]).tobytes()
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got[1], expected[1], strict=True))
    (program,) = replaying.programs.values()
    assert program.replays == len(calls) - 1, replaying.reasons
    assert any(type(step) is replay.Reenter and step.made for step in all_steps(program))


def all_steps(program):
    """The steps of a replayed ``program``, those its compiled blocks run as they are
    (``blocks.Opaque``) among them."""
    for step in program.steps:
        if type(step) is blocks.Block:
            yield from (inner.step if type(inner) is blocks.Opaque else inner
                        for inner in step.steps)
        else:
            yield step


def closing_over(x, w):
    """The functions close over values of the call: an element of an argument, a constant
    computed from one (a mask's count), and a number from one."""
    s = x * w
    m = (w > 1.0).astype(float)
    p = np.piecewise(s, [s < 0.0], [lambda t: t * w[0] + m.sum(), lambda t: t * m[1]])
    return np.sum(p * s)


def test_functions_closing_over_the_calls_values_are_recorded_as_steps():
    """Run again, np.piecewise's functions would read what they closed over in the recorded
    call (the mask's count, the recorded one: wrong numbers); their operations are steps of
    the program instead, which read this call's values from their slots. Replayed as
    traced wherever the conditions hold as recorded, each mask of w replayed."""
    rng = np.random.default_rng(7)
    x = np.abs(rng.standard_normal(6)) + 0.1  # (the conditions the same on every call)
    ws = [rng.uniform(0.5, 1.5, 6) for _ in range(3)]
    replaying = mutad.value_and_grad(closing_over, argnums=(0, 1), replay=True)
    for w in [*ws, *ws]:
        got = replaying(x.copy(), w.copy())
        expected = mutad.value_and_grad(closing_over, argnums=(0, 1))(x.copy(), w.copy())
        assert np.asarray(got[0]).tobytes() == np.asarray(expected[0]).tobytes()
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got[1], expected[1], strict=True))
    (program,) = replaying.programs.values()
    assert program.replays == 5, replaying.reasons
    assert not any(type(step) is replay.Reenter and step.made for step in all_steps(program))


@mutad.inplace_adjoint(writes=("x",))
def scaled_by_(x, factors):
    """``x *= factors()``: an in-place function given a function, which gives the factors as
    Python numbers."""
    x *= np.array(factors())


@scaled_by_.rule
def _scaled_by_rule(x, factors):
    s = list(factors())
    for i in range(len(x)):
        x[i] *= s[i]

    def back(dx, dfactors):
        for i in range(len(x)):
            x[i] /= s[i]
            dx[i] *= s[i]
    return back


def factors_of_the_call(x, w):
    """The factors read from w in the rule's function, a closure: taken again on the
    recorded call's w, the decisions ``tolist`` takes there unguarded, a wrong number."""
    u = x * w
    scaled_by_(u, lambda: ((w > 1.0) * 1.0 + 1.0).tolist())
    return np.sum(u * u)


def factors_of_the_rule(x, w):
    """The rule itself closes over the factors."""
    m = (w > 1.0) * 1.0 + 1.0

    @mutad.inplace_adjoint(writes=("x",))
    def scale_(x):
        x *= np.array(m.tolist())

    @scale_.rule
    def _rule(x):
        back = _scaled_by_rule(x, m.tolist)
        return lambda dx: back(dx, None)

    u = x * w
    scale_(u)
    return np.sum(u * u)


def constant_factors(x, w):
    """A function of no free variables: run again, it computes what the call would."""
    u = x * w
    scaled_by_(u, lambda: [1.0, 2.0, 3.0, 1.0, 2.0, 1.5])
    return np.sum(u * u)


def along_rows_of_a_closure(x, w):
    """np.apply_along_axis of constants, its function closing over a mask of w: NumPy's loop
    runs in the differentiated code (the mode's np.apply_along_axis), so each call of the
    function is recorded as the program's own steps, which a replay runs with the new mask."""
    m = (w > 1.0) * 1.0
    k = np.apply_along_axis(lambda r: r * m, 1, np.ones((3, 6)))
    return np.sum(k @ (x * w))


def along_rows_of_a_closure_by_numpys_module(x, w):
    """The same function reached where the mode does not bind it (NumPy's module defining
    it): a call of constants, a step run again on each replay, which would read the recorded
    call's mask."""
    m = (w > 1.0) * 1.0
    k = _shape_base_impl.apply_along_axis(lambda r: r * m, 1, np.ones((3, 6)))
    return np.sum(k @ (x * w))


def along_rows_of_numpy(x, w):
    k = np.apply_along_axis(np.cumsum, 1, np.ones((3, 6)))
    return np.sum(k @ (x * w))


CLOSURES = {  # f: what the reason says (None: replayed)
    factors_of_the_call: "an operation the replay runs as the engine does (an in-place rule) "
                         "given a function that reads values other than its arguments",
    factors_of_the_rule: "an operation the replay runs as the engine does (an in-place rule) "
                         "given a function that reads values other than its arguments",
    constant_factors: None,
    along_rows_of_a_closure: None,
    along_rows_of_a_closure_by_numpys_module: "np.apply_along_axis of constants given a "
                                              "function that reads values other than its "
                                              "arguments",
    along_rows_of_numpy: None,
}


@pytest.mark.parametrize("f", list(CLOSURES))
def test_a_step_run_again_given_a_closure_over_the_call_is_not_replayed(f):
    """An in-place rule (a ``Reenter`` step) and a call of constants (a ``Call`` step) are run
    again on each replay, their function arguments with them: one closing over the call's
    values would read the recorded call's. Such a call is traced, saying why; one whose
    functions read their arguments alone replays. Against tracing and NumPy, bit for bit."""
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal(6)) + 0.1
    ws = [rng.uniform(0.5, 1.5, 6) for _ in range(5)]
    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    for w in ws:
        args = (x.copy(), w.copy())
        got = replaying(*args)
        assert args[0].tobytes() == x.tobytes() and args[1].tobytes() == w.tobytes()
        expected = mutad.value_and_grad(f, argnums=(0, 1))(x.copy(), w.copy())
        assert np.asarray(got[0]).tobytes() == np.asarray(expected[0]).tobytes()
        assert np.asarray(expected[0]).tobytes() == np.asarray(f(x.copy(), w.copy())).tobytes()
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got[1], expected[1], strict=True))
    if CLOSURES[f] is None:
        (program,) = replaying.programs.values()
        assert program.replays == 4, replaying.reasons
    else:
        (reason,) = replaying.reasons.values()
        assert reason.startswith(CLOSURES[f])
