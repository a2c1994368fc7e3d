"""Random programs of in-place operations over slices, transposes and aliases, checked whole.

Hypothesis writes each program as Python source, one statement per step, over 1-3 arguments
(some of them views of one shared buffer), and ``mutad.check_grads`` checks it under a random
policy. A failing example prints as a program one can paste into a bug report.

Values stay where finite differences are reliable: arguments lie in [-1, 1], updates add
squashed values (sin, tanh), multiply by bounded factors and divide by ``1.5 + sin(...)`` only.
Where a program compares values (np.maximum, np.minimum, np.where) it is only kept if no
compared pair is within ``KINK_MARGIN`` of a tie, measured on a plain NumPy run.
"""

import math
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import mutad
import random_programs as rp
from mutad.engines import recompute, reverse
from strategies import axis_slices, slice_text

# The slow kind (random programs by the thousand, each differentiated several ways):
# not in the fast subset, python -m pytest -m "not slow".
pytestmark = pytest.mark.slow

POLICIES = ("restore", "checkpoint")
KINK_MARGIN = 0.02


@pytest.fixture(autouse=True)
def recompute_everything(monkeypatch):
    """The programs' arrays are small, which mutad keeps rather than recomputes: here every
    temporary that can be recomputed is, so the programs check recomputation too."""
    monkeypatch.setattr(recompute, "SMALL", 0)


# ----------------------------------------------------------------------------------------------
# Arguments


@dataclass(frozen=True)
class Layout:
    """How the arguments are made: ``("own", order)`` a (side, side) array of its own, C- or
    F-ordered or the transpose of a buffer not passed; ``("shared", row, column, transposed,
    reversed)`` a (side, side) window of one shared (side + 1, side + 1) buffer, itself a
    reshape of a 1-d array; ``("again", i)`` the same object as argument ``i``."""

    side: int
    arguments: tuple
    seed: int

    def build(self):
        rng = np.random.default_rng(self.seed)
        n = self.side
        shared = rng.uniform(-1, 1, (n + 1) ** 2).reshape(n + 1, n + 1)
        built = []
        for spec in self.arguments:
            if spec[0] == "own":
                values = rng.uniform(-1, 1, (n, n))
                built.append({"C": values, "F": np.asfortranarray(values), "T": values.T}[spec[1]])
            elif spec[0] == "shared":
                _, row, column, transposed, reversed_rows = spec
                window = (shared.T if transposed else shared)[row:row + n, column:column + n]
                built.append(window[::-1] if reversed_rows else window)
            else:
                built.append(built[spec[1]])
        return built

    def __repr__(self):
        n = self.side
        lines = [f"rng = np.random.default_rng({self.seed})",
                 f"shared = rng.uniform(-1, 1, {(n + 1) ** 2}).reshape({n + 1}, {n + 1})"]
        for i, spec in enumerate(self.arguments):
            if spec[0] == "own":
                values = f"rng.uniform(-1, 1, ({n}, {n}))"
                lines.append(f"a{i} = " + {"C": values, "F": f"np.asfortranarray({values})",
                                            "T": f"{values}.T"}[spec[1]])
            elif spec[0] == "shared":
                _, row, column, transposed, reversed_rows = spec
                lines.append(f"a{i} = shared{'.T' if transposed else ''}"
                             f"[{row}:{row + n}, {column}:{column + n}]"
                             f"{'[::-1]' if reversed_rows else ''}")
            else:
                lines.append(f"a{i} = a{spec[1]}")
        return "\n".join(lines)


@st.composite
def layouts(draw, shared_only=False):
    count = draw(st.integers(1, 3))
    arguments = []
    for index in range(count):
        kinds = ["shared"] if shared_only else ["own", "shared"]
        kinds += ["again"] if index else []
        kind = draw(st.sampled_from(kinds))
        if kind == "own":
            arguments.append(("own", draw(st.sampled_from("CFT"))))
        elif kind == "shared":
            arguments.append(("shared", draw(st.integers(0, 1)), draw(st.integers(0, 1)),
                              draw(st.booleans()), draw(st.booleans())))
        else:
            arguments.append(("again", draw(st.integers(0, index - 1))))
    return Layout(draw(st.integers(2, 3)), tuple(arguments), draw(st.integers(0, 2**32 - 1)))


# ----------------------------------------------------------------------------------------------
# Programs


@dataclass(frozen=True)
class Step:
    """One statement; ``margin`` an expression, evaluated just before it on a plain run, whose
    minimum is the distance of the statement's comparisons from a tie."""

    code: str
    margin: str = None


@dataclass(frozen=True)
class Program:
    layout: Layout
    steps: tuple
    names: tuple

    def run(self, arguments, margins=None):
        scope = {"np": np}
        scope.update((f"a{i}", x) for i, x in enumerate(arguments))
        for step in self.steps:
            if margins is not None and step.margin is not None:
                margins.append(float(np.min(eval(step.margin, scope))))
            exec(step.code, scope)
        return tuple(scope[name] for name in self.names)

    def kink_margin(self):
        margins = []
        self.run(self.layout.build(), margins)
        return min(margins, default=np.inf)

    def check(self, policy):
        mutad.check_grads(lambda *arguments: self.run(arguments), *self.layout.build(),
                          policy=policy)

    def check_jvp(self):
        mutad.check_jvp(lambda *arguments: self.run(arguments), *self.layout.build())

    def check_second(self, policy):
        mutad.check_grads(lambda *arguments: self.run(arguments), *self.layout.build(),
                          policy=policy, order=2)

    def __repr__(self):
        body = "\n".join(f"    {line}" for step in self.steps for line in step.code.split("\n"))
        return (f"\n{self.layout!r}\ndef f({', '.join(f'a{i}' for i in range(len(self.layout.arguments)))}):"
                f"\n{body}\n    return {', '.join(self.names)}\n")


class Arrays:
    """The arrays a program has made so far: names and shapes, to draw views of."""

    def __init__(self, side, count):
        self.names = [f"a{i}" for i in range(count)]
        self.shapes = [(side, side)] * count
        self.temporaries = 0

    def add_temporary(self, shape):
        name = f"t{self.temporaries}"
        self.temporaries += 1
        self.names.append(name)
        self.shapes.append(shape)
        return name


@st.composite
def views(draw, arrays, shape, array=None):
    """Source text of a 2-d view with ``shape`` of one of ``arrays`` (of ``array`` if given):
    a slice with steps of either sign, transposed or not."""
    rows, columns = shape
    candidates = [(i, t) for i, (r, c) in enumerate(arrays.shapes)
                  for t in (False, True) if (array is None or i == array)
                  and ((rows <= r and columns <= c) if not t else (columns <= r and rows <= c))]
    i, transposed = draw(st.sampled_from(candidates))
    extent = arrays.shapes[i]
    lengths = (columns, rows) if transposed else (rows, columns)
    key = [draw(axis_slices(e, n)) for e, n in zip(extent, lengths, strict=True)]
    return f"{arrays.names[i]}[{', '.join(slice_text(k) for k in key)}]" + (".T" if transposed else "")


@st.composite
def targets(draw, arrays, array=None):
    """``(text, shape)`` of a view some step writes into (of array number ``array`` if given)."""
    i = draw(st.integers(0, len(arrays.names) - 1)) if array is None else array
    rows, columns = arrays.shapes[i]
    shape = (draw(st.integers(1, rows)), draw(st.integers(1, columns)))
    if draw(st.booleans()):
        shape = shape[::-1]  # a transposed view of array i
        if shape[0] > rows or shape[1] > columns:
            shape = shape[::-1]
    view = draw(views(arrays, shape, array=i))
    # A transpose is not itself assignable (a.T = ..., a.T += ...): write through its [...].
    return (f"{view}[...]" if view.endswith(".T") else view), shape


@st.composite
def sources(draw, arrays, shape):
    """A view that broadcasts to ``shape``: the same shape, or one row or one column of it."""
    rows, columns = shape
    return draw(views(arrays, draw(st.sampled_from([shape, shape, (1, columns), (rows, 1)]))))


# fmt: off
SQUASHES = {
    # operator   what a view may be wrapped in before it is combined (keeps values bounded)
    "+=": ("np.sin({})", "np.tanh({})", "0.5 * {}", "{}"),
    "-=": ("np.sin({})", "np.tanh({})", "{}"),
    "*=": ("np.cos({})", "np.tanh({})", "{}"),
    "/=": ("(1.5 + np.sin({}))",),      # in [0.5, 2.5]: never near zero
}
UNARY_IN_PLACE = ("np.sin", "np.tanh", "np.arctan", "np.cos")  # not np.negative: see below
BINARY_OUT = ("np.add", "np.subtract", "np.multiply")
# fmt: on


@st.composite
def augmented_assignment(draw, arrays, target=None):
    target, shape = draw(targets(arrays, target))
    operator = draw(st.sampled_from(sorted(SQUASHES)))
    if operator in ("+=", "*=") and draw(st.integers(0, 3)) == 0:
        value = f"{draw(sources(arrays, shape))} * np.tanh({draw(sources(arrays, shape))})"
        if operator == "*=":
            value = f"np.cos({value})"
    else:
        value = draw(st.sampled_from(SQUASHES[operator])).format(draw(sources(arrays, shape)))
    return Step(f"{target} {operator} {value}")


@st.composite
def element_update(draw, arrays):
    """``a[i, j] op= f(b[k, l])``: 0-d targets and sources."""
    def element():
        i = draw(st.integers(0, len(arrays.names) - 1))
        rows, columns = arrays.shapes[i]
        return (f"{arrays.names[i]}[{draw(st.integers(-rows, rows - 1))}, "
                f"{draw(st.integers(-columns, columns - 1))}]")
    operator = draw(st.sampled_from(sorted(SQUASHES)))
    value = draw(st.sampled_from(SQUASHES[operator])).format(element())
    return Step(f"{element()} {operator} {value}")


@st.composite
def out_into_view(draw, arrays, target=None):
    target, shape = draw(targets(arrays, target))
    if draw(st.booleans()):
        function = draw(st.sampled_from(UNARY_IN_PLACE))
        return Step(f"{function}({draw(sources(arrays, shape))}, out={target})")
    function = draw(st.sampled_from(BINARY_OUT))
    second = draw(sources(arrays, shape))
    # Half the time the target is also the first operand: an in-place update the core may
    # restore by inversion rather than checkpoint.
    first = target if draw(st.booleans()) else draw(sources(arrays, shape))
    return Step(f"{function}({first}, {second}, out={target})")


@st.composite
def slice_assignment(draw, arrays):
    target, shape = draw(targets(arrays))
    if draw(st.integers(0, 4)) == 0:
        return Step(f"{target} = {draw(st.sampled_from(['0.0', '0.25']))}")
    value = draw(st.sampled_from(["np.sin({})", "0.5 * {}", "{}"])).format(
        draw(sources(arrays, shape)))
    return Step(f"{target} = {value}")


@st.composite
def unary_in_place(draw, arrays, target=None):
    target, _ = draw(targets(arrays, target))
    if draw(st.integers(0, 3)) == 0:
        return Step(f"{target} *= 0.5")
    return Step(f"{draw(st.sampled_from(UNARY_IN_PLACE))}({target}, out={target})")


@st.composite
def temporary(draw, arrays):
    """Read a view into a temporary (a copy, or the view itself) and mutate the temporary."""
    source, shape = draw(targets(arrays))
    copy = draw(st.booleans())
    name = arrays.add_temporary(shape)
    mutation = draw(st.sampled_from([augmented_assignment, unary_in_place, out_into_view]))
    follow = draw(mutation(arrays, target=len(arrays.names) - 1))
    return Step(f"{name} = {source}{'.copy()' if copy else ''}\n{follow.code}")


@st.composite
def selection(draw, arrays):
    """np.maximum / np.minimum / np.where of views, into a view."""
    target, shape = draw(targets(arrays))
    first, second = draw(sources(arrays, shape)), draw(sources(arrays, shape))
    kind = draw(st.sampled_from(["np.maximum", "np.minimum", "np.where"]))
    if kind == "np.where":
        condition = draw(sources(arrays, shape))
        return Step(f"{target} = np.where({condition} > 0, {first}, {second})",
                    margin=f"np.abs({condition})")
    if draw(st.booleans()):
        return Step(f"{kind}({first}, {second}, out={target})", margin=f"np.abs({first} - {second})")
    return Step(f"{target} = {kind}({first}, {second})", margin=f"np.abs({first} - {second})")


STEP_KINDS = (augmented_assignment, augmented_assignment, augmented_assignment, out_into_view,
              out_into_view, slice_assignment, unary_in_place, temporary, selection,
              element_update)
"""Augmented assignment, the commonest in-place update in real programs, is drawn most."""


@st.composite
def programs(draw, layout_strategy=None, step_kinds=STEP_KINDS, max_steps=6):
    layout = draw(layout_strategy if layout_strategy is not None else layouts())
    arrays = Arrays(layout.side, len(layout.arguments))
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        steps.append(draw(draw(st.sampled_from(step_kinds))(arrays)))
    return Program(layout, tuple(steps), tuple(arrays.names))


# ----------------------------------------------------------------------------------------------
# Tests: 3 x 100 programs per run.


def check_drawn(program, policy):
    """Check a program hypothesis drew, unless it compares values too close to a tie."""
    note(repr(program))
    assume(program.kink_margin() > KINK_MARGIN)
    program.check(policy)


@settings(max_examples=100)
@given(programs(max_steps=8), st.sampled_from(POLICIES))
def test_random_in_place_programs(program, policy):
    check_drawn(program, policy)


@settings(max_examples=100)
@given(programs(max_steps=8), st.sampled_from(POLICIES))
def test_random_in_place_programs_under_a_memory_budget(program, policy):
    """Every write that would be checkpointed is rebuilt from snapshots (a budget of 0 keeps
    the fewest the schedule allows)."""
    with mock.patch.object(reverse, "Recomputation", lambda budget: recompute.Recomputation(0)):
        check_drawn(program, policy)


@settings(max_examples=100)
@given(programs(layouts(shared_only=True)), st.sampled_from(POLICIES))
def test_random_programs_over_arguments_sharing_one_buffer(program, policy):
    check_drawn(program, policy)


@settings(max_examples=100)
@given(programs(step_kinds=(temporary, selection, augmented_assignment), max_steps=8),
       st.sampled_from(POLICIES))
def test_random_programs_with_temporaries_and_selections(program, policy):
    check_drawn(program, policy)


@settings(max_examples=150, deadline=None)
@given(programs(max_steps=8), st.data(), st.sampled_from(POLICIES))
def test_random_programs_differentiated_in_some_arguments(program, data, policy):
    """The arguments outside argnums are constants (views of one buffer with a chosen one
    excepted): the gradients of the others are those of the all-arguments gradient, traced and
    replayed, and every argument comes back bit for bit."""
    note(repr(program))
    assume(program.kink_margin() > KINK_MARGIN)
    count = len(program.layout.arguments)
    argnums = tuple(sorted(data.draw(st.sets(st.integers(0, count - 1), min_size=1,
                                            max_size=count - 1 or 1))))
    note(f"argnums={argnums}")

    def loss(*arguments):
        return sum((np.sin(y) * 0.5).sum() for y in program.run(arguments))

    arguments = program.layout.build()
    before = [x.tobytes() for x in arguments]
    with np.errstate(all="ignore"):
        try:
            every = mutad.gradient(loss, *arguments, policy=policy)
        except mutad.MutadError:
            return
        some = mutad.gradient(loss, *arguments, argnums=argnums, policy=policy)
        replayed = mutad.grad(loss, argnums=argnums, policy=policy, replay=True)
        again = [replayed(*arguments) for _ in range(3)]
    assert [x.tobytes() for x in arguments] == before
    for position, g in zip(argnums, some, strict=True):
        np.testing.assert_allclose(g, every[position], rtol=1e-9, atol=1e-12)
    for g in again:
        for a, b in zip(g, some, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@settings(max_examples=60)
@given(programs(max_steps=6))
def test_forward_mode_of_random_in_place_programs(program):
    note(repr(program))
    assume(program.kink_margin() > KINK_MARGIN)
    program.check_jvp()


@settings(max_examples=40, deadline=None)
@given(programs(max_steps=5), st.sampled_from(POLICIES))
def test_second_derivatives_of_random_in_place_programs(program, policy):
    """Hessian-vector products: reverse over forward, forward over reverse, nested reverse."""
    note(repr(program))
    assume(program.kink_margin() > KINK_MARGIN)
    program.check_second(policy)


@settings(max_examples=30, deadline=None)
@given(programs(max_steps=4), st.data(), st.sampled_from(POLICIES))
def test_gradients_of_programs_that_mutate_an_inner_gradient(inner, data, policy):
    """The outer function takes the gradient of one random in-place program and runs another
    over that gradient, in place: nested reverse mode through mutation at both levels."""
    # no comparisons in the outer program: its ties would sit at values the gradient takes
    outer = data.draw(programs(st.just(inner.layout), max_steps=4, step_kinds=tuple(
        kind for kind in STEP_KINDS if kind is not selection)))
    note(repr(inner))
    note(repr(outer))
    assume(inner.kink_margin() > KINK_MARGIN)

    def scalar(*arguments):
        return sum((np.sin(y) * 0.5).sum() for y in inner.run(arguments))

    def f(*arguments):
        return outer.run(mutad.gradient(scalar, *arguments, policy=policy))

    mutad.check_grads(f, *inner.layout.build(), policy=policy)


def test_outputs_that_share_memory_are_seeded_once_each():
    base = np.arange(12.0).reshape(3, 4) / 10
    mutad.check_grads(lambda a, b: (a, b), base[:2], base[1:])
    mutad.check_grads(lambda a: (a, a), np.ones(3))


@pytest.mark.xfail(strict=True, reason="NumPy 2.4.6 bug: np.negative with a strided (n, 1) out= "
                   "writes to the wrong elements, outside the region mutad records")
@pytest.mark.parametrize("policy", POLICIES)
def test_negative_into_a_strided_column_view(policy):
    """Hypothesis's minimal failing program; np.negative is kept out
    of the random programs until this passes."""
    program = Program(Layout(3, (("shared", 0, 0, False, False),), 0),
                      (Step("np.negative(a0[0:3:2, 0:1], out=a0[0:3:2, 0:1])"),), ("a0",))
    program.check(policy)


# ----------------------------------------------------------------------------------------------
# Programs by feature class (tests/random_programs.py): discrete decisions, every view-returning
# function, overlapping operands, repeated indices, extreme magnitudes, ties, constants written
# through views. Each program is judged by every oracle of random_programs.check: NumPy's value
# bit-for-bit, the caller's bytes, restore against checkpoint, finite differences where no
# decision came near a tie, forward against reverse mode. Classes whose bugs are still open
# (random_programs.FAILING_ON_MAIN) stay out until their fix lands; their regression tests are
# below. 1,000 reverse-mode programs (each also run in forward mode) and 40 second-order ones.
# With the complex class, some buffers are complex (and some arguments real views of them);
# statements of mutad's open complex bugs (random_programs.KNOWN_BUGS) are left out.

AVOID = tuple(rp.KNOWN_BUGS)


def judge(program, **kwargs):
    note(program.reproducer())
    return rp.check(program, **kwargs)


@settings(max_examples=500)
@given(rp.programs(rp.CI_FEATURES, avoid=AVOID))
def test_random_programs_of_every_enabled_class(program):
    judge(program)


@pytest.mark.parametrize("feature", [
    pytest.param(f, marks=pytest.mark.skip(reason=f"issue 9, {rp.FAILING_ON_MAIN[f]}"))
    if f in rp.FAILING_ON_MAIN else f for f in rp.FEATURES if f != "classic"])
def test_random_programs_of_one_class(feature):
    """Each class mixed with the classic statements only, so a failure names its class."""

    @settings(max_examples=150)
    @given(rp.programs(("classic", feature), max_steps=5, avoid=AVOID))
    def programs_of_the_class(program):
        judge(program)

    programs_of_the_class()


@settings(max_examples=200)
@given(rp.programs(rp.CI_FEATURES, max_steps=8, avoid=AVOID))
def test_long_random_programs(program):
    judge(program)


@settings(max_examples=40)
@given(rp.programs(rp.CI_FEATURES, max_steps=4, avoid=AVOID))
def test_second_derivatives_of_random_programs(program):
    judge(program, second_order=True)


def test_the_oracles_catch_a_wrong_value():
    """The value oracle is not vacuous: a program whose plain run differs from itself (a
    constant drawn afresh by NumPy's global generator) is reported."""
    program = rp.Program({"s": [0.1, 0.2, 0.3]}, {}, ["s"], ["a0 += np.random.random()"], ["a0"])
    with pytest.raises(rp.ProgramFailure, match=r"\[value\]"):
        rp.check(program)


def test_reproducers_are_standalone_python():
    program = rp.Program({"s": [0.3, 0.7, 0.5]}, {"C0": [1.0, 2.0]}, ["s"],
                         ["t0 = a0.max()", "a0 *= C0[1]"], ["a0", "t0"])
    scope = {}
    with np.errstate():  # the script sets NumPy's error handling, as a script may
        exec(program.reproducer(), scope)  # runs: prints both gradients and finite differences
    assert set(scope) >= {"make", "gradient", "numeric", "W"}


def test_an_overflowed_element_under_a_budget():
    """Regression: an element overflowed to inf, then products read the array: under
    memory=0 the gradient there was NaN where without a budget it is -inf. The chain of the
    array counted its rebuilt writes from the write before its first (one that read a
    temporary in Fortran order, which it refused), and redid each write's successor."""
    program = shrunk([0.274, -0.46, -0.918, -0.967, 0.627, 0.826],
                     ["a0[0, 0] *= 1e300\na0[0, 0] *= 1e300", "a0[...] *= np.tanh(a0[0:2, 0:3])",
                      "a0 *= 1e-300", "a0 *= 1e-300", "a0[...] *= np.tanh(a0[0, 1])"], ["a0"],
                     argument="s.reshape(2, 3, order='F')")
    program.extreme = True
    rp.check(program)


# Regression tests: hypothesis's shrunk failures of each class (issue 9), strict xfails while
# their class is in random_programs.FAILING_ON_MAIN.

def regression(program, name):
    """A shrunk failure of the class ``name`` starts with: expected to fail while that class
    is in random_programs.FAILING_ON_MAIN, an ordinary test once its fix has landed."""
    feature = name.split("-")[0]
    if feature not in rp.FAILING_ON_MAIN:
        return pytest.param(program, id=name)
    return pytest.param(program, id=name, marks=pytest.mark.xfail(
        strict=True, raises=rp.ProgramFailure,
        reason=f"issue 9, {rp.FAILING_ON_MAIN[feature]}"))


def shrunk(values, statements, outputs, argument="s", constants=None, at_a_kink=False):
    """A program written by hand; ``at_a_kink`` where a decision sits at a tie (finite
    differences are then excused, as for a drawn program whose margin is 0)."""
    return rp.Program({"s": values}, constants or {}, [argument], statements, outputs,
                      margin=0.0 if at_a_kink else math.inf)


REGRESSIONS = [
    regression(shrunk([0.3, 0.7, 0.5], ["t0 = np.max(a0)", "a0 *= 3.0"], ["a0", "t0"]),
               "decisions-max-then-scaled"),
    regression(shrunk([0.274, -0.46], ["t0 = np.max(a0)", "a0[...] += np.sin(a0[0])"],
                      ["a0", "t0"]), "decisions-max-then-shifted"),
    regression(shrunk([0.1, -0.6, 0.9], ["t0 = np.clip(a0, -0.5, 0.1)", "a0 *= 3.0"],
                      ["a0", "t0"], at_a_kink=True), "decisions-clip-at-its-bound-then-scaled"),
    regression(shrunk([0.1, 0.7, 0.1], ["t0 = np.maximum(a0, 0.1)", "a0 *= 3.0"], ["a0", "t0"],
                      at_a_kink=True), "decisions-maximum-tied-then-scaled"),
    regression(shrunk([0.1, 0.7, 0.5, 0.3], ["t0 = np.min(a0)", "a0 -= 0.4"], ["a0", "t0"]),
               "decisions-min-then-shifted"),
    regression(shrunk([0.3, 0.2], ["a0[a0 > 0.5] *= 2.0"], ["a0"]),
               "empty_writes-through-a-mask-of-no-element"),
    regression(shrunk([0.3, 0.2], ["v0 = np.array_split(a0[None], 2)[1]", "v0[...] *= 0.5"],
                      ["a0", "v0"]), "empty_writes-through-an-empty-view"),
    regression(shrunk([0.274, -0.46, -0.918, -0.967],
                      ["t0 = np.sort(a0, axis=0)", "v1 = np.ravel(t0)", "t0[...] *= 3.0"],
                      ["t0", "v1"], argument="s.reshape(2, 2, order='F')"),
               "sorts-ravel-of-the-sort-of-an-F-ordered-array"),
    regression(shrunk([2.0, 0.0, 0.0, 2.0], ["v0 = np.diagonal(a0)", "a0 *= 2.0"], ["a0", "v0"],
                      argument="s.reshape(2, 2)"), "readonly_views-diagonal-then-base-written"),
    regression(shrunk([0.1, 0.2, 0.3], ["v0 = np.broadcast_to(a0, (2, 3))",
                                        "v0[...] += 1.0  # NumPy raises ValueError"],
                      ["a0", "v0"]), "readonly_views-write-through-broadcast_to"),
    regression(shrunk([0.274, -0.46], ["v0 = np.broadcast_to(a0, (2, 2))", "a0 *= 3.0"],
                      ["a0", "v0"]), "readonly_views-broadcast_to-then-base-written"),
    regression(shrunk([0.1, 0.2, 0.3], ["v0 = a0.imag", "a0 *= 2.0"], ["a0", "v0"]),
               "readonly_views-imag-attribute"),
    regression(shrunk([1.0, 2.0, 3.0, 4.0, 5.0], ["a0[::2] = a0[0:3]"], ["a0"]),
               "overlap_assign-different-strides"),
    regression(shrunk([1.0, 2.0, 3.0, 4.0, 5.0], ["np.copyto(a0[::2], a0[0:3])"], ["a0"]),
               "overlap_assign-copyto"),
    regression(shrunk([0.3, 0.2, 0.5], ["t0 = a0 * a0", "a0 *= 1e-300", "a0 *= 1e-300"],
                      ["t0"]), "fixed_magnitudes-underflow"),
    regression(shrunk([0.3, 0.2, 0.5], ["t0 = a0 * a0", "for _ in range(60):\n    a0 *= 1e-6"],
                      ["t0"]), "fixed_magnitudes-sixty-small-factors"),
    regression(shrunk([0.3, 0.2, 0.5], ["t0 = a0 * a0", "a0 *= 1e300", "a0 *= 1e300"], ["t0"]),
               "fixed_magnitudes-overflow"),
    regression(shrunk([-1.0, -1.0], ["a0[...] *= a0[0]", "t0 = np.max(a0)", "a0 *= 5e-324",
                                     "a0[...] *= 0.5"], ["a0", "t0"], at_a_kink=True),
               "magnitudes-subnormal-factor-after-a-max"),
    regression(shrunk([1.0, 1.0, 1.0, 1.0], ["t0 = a0[:2] * C0[::2]", "C0[:] = 0.0"], ["t0"],
                      constants={"C0": [1.0, 2.0, 3.0, 4.0]}),
               "constants-overwritten-through-a-view"),
]


@pytest.mark.parametrize("program", REGRESSIONS)
def test_shrunk_failures_of_issue_9(program):
    rp.check(program)


# False alarms of the oracles themselves, each once a soak failure: both must pass.
ORACLE_FALSE_ALARMS = [
    # Every output is 0 after a cancellation; the gradient is 3e-15 of rounding from terms of
    # the order of the weights, forward mode's tangent exactly 0.
    pytest.param(rp.Program({"s": [0.274, -0.46, -0.918, -0.967, 0.627, 0.826]}, {},
                            ["s[0:5]", "s[0:5]", "s[0:5]"],
                            ["np.sin(a0[0], out=a0[...])", "a0[...] -= a0[0]"],
                            ["a0", "a1", "a2"]), id="a-cancellation-to-zero"),
    # cos(27 x)^3-like: a step of 1e-4 truncates the stencil beyond its tolerance.
    pytest.param(rp.Program({"s": [0.274, -0.46, -0.918, -0.967, 0.627, 0.826]}, {},
                            ["s[0:3]", "s[0:2]"],
                            ["v0 = np.ravel(a0)", "a0[...] *= 3.0", "v1 = np.ravel(a0)",
                             "a0[...] *= 3.0", "a0[...] *= 3.0", "a0[...] *= np.cos(a0[0])",
                             "a0[...] *= np.cos(a0[0])", "a0[...] *= np.cos(a0[0])"],
                            ["a0", "a1", "v0", "v1"]), id="a-steep-function"),
]


@pytest.mark.parametrize("program", ORACLE_FALSE_ALARMS)
def test_the_oracles_raise_no_false_alarm(program):
    rp.check(program)


@pytest.mark.parametrize("statement", ["a0[[0, 0, 1]] = a0[1:4]", "a0[[0, 0]] += 0.5"])
def test_repeated_indices_run_as_in_numpy(statement):
    assert rp.check(shrunk([0.1, 0.2, 0.3, 0.4, 0.5], [statement], ["a0"])).refused == []


def test_sum_over_axis_0_of_a_0d_array():
    """NumPy allows axis 0 of a 0-d array; mutad's pullback divided by zero."""
    rp.check(shrunk([0.1, 0.2], ["t0 = np.tanh(a0[0]).sum(axis=0)"], ["a0", "t0"]))


def test_forward_over_reverse_through_a_written_atleast_1d_view():
    """Found by the soak (second order, views): np.atleast_1d of a 1-d array returns it
    itself, which under forward over reverse is a new dual of the same memory; the core took
    it for a fresh buffer and the write through it was lost."""
    def f(a):
        t = np.sin(a) + 0.5
        v = np.atleast_1d(t)
        v *= 2.0
        return (t * np.array([1.0, 2.0])).sum()

    x, direction = np.array([0.3, 0.2]), np.array([1.0, 0.0])
    before = x.tobytes()
    over_forward = mutad.hvp(f, (x,), (direction,))
    over_reverse = mutad.jvp(lambda a: mutad.gradient(f, a)[0], (x,), (direction,))[1]
    assert x.tobytes() == before
    np.testing.assert_allclose(over_reverse, over_forward, rtol=1e-12)


def test_second_derivatives_of_a_program_that_writes_its_constants():
    """check_grads(order=2) calls f many times: a program that doubles a constant it reads
    must start each call from the constant as it was (the finite differences of the gradient
    otherwise saw a constant doubled once more at every step)."""
    values = [0.274, -0.46, -0.918, -0.967, 0.627, 0.826]
    program = rp.Program({"s": values}, {"C0": values + [0.213, 0.459]}, ["s[0:5]"],
                         ["a0[...] *= np.cos(a0[0])", "C0[::2] *= 2.0", "t0 = a0 * C0[0:5]"],
                         ["a0", "t0"])
    rp.check(program, second_order=True)
