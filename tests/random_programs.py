"""Random in-place programs by feature class, the oracles that judge them, and reproducers.

A program is Python source over arguments that are views of a few 1-d buffers (one shared by
several arguments, so they alias), plus constants the program reads but does not receive. The
generator (:func:`programs`, a hypothesis strategy) runs each statement on plain NumPy as it
draws it, so it knows every array's shape, dtype and flags, and measures how close each discrete
decision (a max, a sort, a clip, a mask) came to a tie: a *kink*.

Statements come in feature classes (:data:`FEATURES`), each switchable, so a class whose bugs are
still open can be kept out of CI while its regression tests say why (``FAILING_ON_MAIN``).

:func:`check` judges a program with oracles that never excuse a wrong answer:

* ``value``: mutad's outputs, and the arguments as ``f`` left them, equal plain NumPy's on fresh
  copies bit-for-bit (or mutad raises a ``MutadError``: a refusal, counted, not a failure);
  where NumPy raises, mutad raises too;
* ``bytes``: after the reverse pass the caller's buffers are bit-for-bit as before;
* ``aliasing``: arguments viewing one element get one gradient there;
* ``policies``: the restore policy's gradient equals the checkpoint policy's (relative 1e-8),
  kinks or not: both must take the same decisions;
* ``budget``: under a memory budget (``memory=0``: every write that would be saved is rebuilt
  from snapshots instead), each policy's value and gradient are those without one, bit for
  bit, and the caller's bytes come back;
* ``finite differences``: where no decision came within ``KINK_MARGIN`` of a tie and no value
  went extreme, ``<gradient, v>`` matches a fourth-order central difference;
* ``modes``: forward mode's value is NumPy's, and ``<gradient, v> == <w, jvp(v)>`` (relative
  1e-9) wherever the program is differentiable (no kink, no extreme magnitude);
* ``second order`` (on request): ``check_grads(order=2)``: hvp, forward over reverse and nested
  reverse against finite differences of the gradient.

Complex outputs get complex cotangents ``w`` (the loss is ``Re <w, y>``: a cotangent is
dL/dRe y + i dL/dIm y), complex buffers complex directions, and ``<gradient, v>`` is
``Re <gradient, v>``; each part of a complex gradient is compared on its own.

A failure raises :class:`ProgramFailure` carrying its oracle; ``Program.reproducer`` prints the
program as standalone Python that anyone can paste. Statements that show mutad bugs still open
(:data:`KNOWN_BUGS`) are left out of a program on request (``programs(avoid=...)``).
"""

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import mutad
from mutad.engines import recompute
from strategies import axis_slices, slice_text

SMALL = recompute.SMALL
"""The library's own threshold below which temporaries are kept rather than recomputed."""

FEATURES = ("classic", "decisions", "empty_writes", "sorts", "views", "readonly_views", "overlap",
            "overlap_assign", "repeated", "magnitudes", "ties", "constants", "complex")
"""classic: augmented assignment, ``out=`` ufuncs, slice assignment, temporaries;
decisions: max/min/argmax/clip/where/abs/sign/maximum/minimum/median/percentile, then writes
into their inputs; empty_writes: writes through a mask computed from values (with decisions)
or through a view (with views) that may select no element;
sorts: sort/argsort/partition, then writes into their inputs;
views: every function that returns a writeable view, writes through views and into bases;
readonly_views: those that return a read-only view (diagonal, broadcast_to, imag,
sliding_window_view), through which NumPy refuses writes;
overlap: ufuncs and augmented assignment whose operands overlap at different strides and
offsets; overlap_assign: the same for assignment and ``np.copyto``, where NumPy's own copy
order decides the value;
repeated: repeated indices in fancy assignment and ``ufunc.at``;
magnitudes: underflow, overflow, subnormals;
ties: values that compare equal;
constants: arrays ``f`` reads but does not receive, overwritten through views;
complex: complex128 buffers (some arguments complex, some real views ``.real``/``.imag`` of
them) and complex statements: in-place complex updates (``z *= w``, ``z /= ...``,
``np.exp(z, out=z)``, slice targets), writes through ``z.real``/``z.imag``, complex values made
from real ones and real values from complex ones, complex reductions and decisions in NumPy's
complex order; with it the views, overlap, repeated, ties and magnitudes classes work on
complex arrays too. Without it every array is real, as before the class existed: the same
draws give the same programs."""

REAL_FEATURES = tuple(f for f in FEATURES if f != "complex")
"""Every class but ``complex``: real programs only."""

FAILING_ON_MAIN = {
    # class: the issue 9 item whose fix lets CI run it (delete the line when the fix lands)
}
CI_FEATURES = tuple(f for f in FEATURES if f not in FAILING_ON_MAIN)
"""The classes CI's random programs use: those whose bugs are fixed on this branch."""

KNOWN_BUGS: dict[str, str] = {
    # statements CI's programs leave out (``programs(avoid=...)``) until mutad's fix lands;
    # the soak draws them unless told not to (delete the line when the fix lands), e.g.
    # "element_overflow": "an element overflowed to inf (x[0] *= 1e300 twice), ...",
}

KINK_MARGIN = 0.02
POLICY_RTOL = 1e-8
MODE_RTOL = 1e-9
ZERO_RTOL = 1e-13


class ProgramFailure(AssertionError):
    """A program mutad got wrong; ``oracle`` names the check that failed."""

    def __init__(self, oracle, message):
        super().__init__(f"[{oracle}] {message}")
        self.oracle = oracle


# ----------------------------------------------------------------------------------------------
# Programs


@dataclass
class Program:
    buffers: dict            # name -> list of float values (the 1-d buffers the arguments view)
    constants: dict          # name -> list of float values (read by f, not passed to it)
    arguments: list          # source text of each argument, a view of one buffer
    statements: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    features: set = field(default_factory=set)
    margin: float = math.inf  # distance of the closest decision from a tie
    extreme: bool = False     # a value went below 1e-100 or above 1e100 in magnitude (or inf)
    numpy_raises: bool = False

    # -- running --------------------------------------------------------------------------------

    def source(self):
        names = ", ".join(f"a{i}" for i in range(len(self.arguments)))
        body = "\n".join("        " + line for s in self.statements for line in s.split("\n"))
        returns = ", ".join(self.outputs) + ("," if len(self.outputs) == 1 else "")
        shifts = ", ".join(f"d{name}=0.0" for name in self.buffers)
        lines = [f"def make({shifts}):"]
        lines += [f"    {name} = np.array({values!r}) + d{name}"
                  for name, values in self.buffers.items()]
        lines += [f"    {name} = np.array({values!r})" for name, values in self.constants.items()]
        arguments = ", ".join(self.arguments) + ("," if len(self.arguments) == 1 else "")
        lines += [f"    def f({names}):", body or "        pass",
                  f"        return ({returns})" if self.outputs else "        return ()",
                  f"    return f, ({arguments})"]
        return "\n".join(lines)

    def make(self, shifts=None):
        """Fresh ``(f, arguments)``; ``shifts`` moves the buffers (finite differences)."""
        scope = {"np": np}
        exec(self.source(), scope)
        shifts = shifts or {}
        return scope["make"](**{f"d{name}": shifts.get(name, 0.0) for name in self.buffers})

    def argument_views(self, buffers):
        """The arguments as views of the given arrays in place of the buffers."""
        scope = {"np": np, **buffers}
        return [eval(text, scope) for text in self.arguments]

    def reproducer(self, failure=None):
        return reproducer(self, failure)


def _plain(f, args):
    with np.errstate(all="ignore"):
        return f(*args)


# ----------------------------------------------------------------------------------------------
# The generator


class Drawing:
    """A program being drawn, with the plain NumPy state after its statements so far."""

    def __init__(self, draw, program, enabled, avoid=()):
        self.draw = draw
        self.program = program
        self.enabled = enabled
        self.avoid = avoid  # names of KNOWN_BUGS whose statements are not drawn
        f, args = program.make()
        self.scope = {"np": np}
        self.scope.update((f"a{i}", a) for i, a in enumerate(args))
        self.scope.update((name, np.array(v)) for name, v in program.constants.items())
        self.temporaries = 0
        self.finished = False

    # -- names --------------------------------------------------------------------------------

    @property
    def kinds(self):
        """The dtype kinds of the arrays the generic classes work on: real ones, and complex
        ones too with the complex class."""
        return "fc" if "complex" in self.enabled else "f"

    def arrays(self, writeable=False, min_ndim=1, min_size=1, kinds="f"):
        names = [n for n, v in self.scope.items()
                 if n[0] in "atv" and isinstance(v, np.ndarray) and v.dtype.kind in kinds
                 and v.ndim >= min_ndim and v.size >= min_size
                 and (v.flags.writeable or not writeable)]
        return sorted(names)

    def pick(self, **kwargs):
        names = self.arrays(**kwargs)
        assume(names)
        return self.draw(st.sampled_from(names))

    def new_name(self, prefix="t"):
        name = f"{prefix}{self.temporaries}"
        self.temporaries += 1
        return name

    def value(self, text):
        with np.errstate(all="ignore"):
            return eval(text, dict(self.scope))

    # -- views of the arrays drawn so far -----------------------------------------------------

    def slices(self, name, whole=False):
        """A basic-indexing view of array ``name``: slices with steps of either sign."""
        x = self.scope[name]
        if whole or self.draw(st.integers(0, 3)) == 0:
            return name
        key = []
        for extent in x.shape:
            length = self.draw(st.integers(1, extent))
            key.append(slice_text(self.draw(axis_slices(extent, length))))
        text = f"{name}[{', '.join(key)}]"
        if x.ndim == 2 and self.draw(st.integers(0, 3)) == 0:
            text += ".T"
        return text

    def target(self, kinds="f"):
        """``(text, shape)``: a writeable view some statement writes into."""
        name = self.pick(writeable=True, kinds=kinds)
        text = self.slices(name)
        shape = self.value(text).shape
        # a bare name or a transpose is not assignable as such (a0 = ... rebinds a0)
        return (f"{text}[...]" if text.endswith(".T") or text == name else text), shape

    def source(self, shape, kinds="f"):
        """Source text of a value that broadcasts to ``shape``."""
        options = []
        for name in self.arrays(kinds=kinds):
            x = self.scope[name]
            if x.ndim == len(shape) and all(e >= n for e, n in zip(x.shape, shape)):
                options.append((name, False))
            if (x.ndim == 2 and len(shape) == 2 and x.shape[1] >= shape[0]
                    and x.shape[0] >= shape[1]):
                options.append((name, True))
            if len(shape) == 1 and x.ndim == 2 and x.shape[1] >= shape[0]:
                options.append((name, "row"))
        kind = self.draw(st.integers(0, 5))
        if not options or kind == 0:
            name = self.pick(kinds=kinds)
            x = self.scope[name]
            index = ", ".join(str(self.draw(st.integers(-e, e - 1))) for e in x.shape)
            return f"{name}[{index}]"  # one element: broadcasts to anything
        name, how = self.draw(st.sampled_from(options))
        x = self.scope[name]
        if how == "row":
            row = self.draw(st.integers(-x.shape[0], x.shape[0] - 1))
            return f"{name}[{row}, {slice_text(self.draw(axis_slices(x.shape[1], shape[0])))}]"
        lengths = shape[::-1] if how else shape
        key = [slice_text(self.draw(axis_slices(e, n))) for e, n in zip(x.shape, lengths)]
        return f"{name}[{', '.join(key)}]" + (".T" if how else "")

    # -- running a statement ------------------------------------------------------------------

    def run(self, code, feature, margin=None, may_raise=False):
        """Run ``code`` on the plain state and keep it; ``margin`` a function of the state
        before it giving the distance of its decisions from a tie."""
        if margin is not None:
            try:
                with np.errstate(all="ignore"):
                    self.program.margin = min(self.program.margin, float(margin()))
            except ValueError:  # no elements to decide on, or operands NumPy refuses below
                pass
        try:
            with np.errstate(all="ignore"):
                exec(code, self.scope)
        except (ValueError, IndexError, TypeError) as error:
            if not may_raise:
                assume(False)
            self.program.numpy_raises = True
            self.finished = True
            note = f"  # NumPy raises {type(error).__name__}"
            self.program.statements.append(code + note)
            self.program.features.add(feature)
            return
        self.program.statements.append(code)
        self.program.features.add(feature)
        for name in self.arrays(min_size=0, min_ndim=0, kinds="fc"):
            x = self.scope[name]
            with np.errstate(all="ignore"):
                big = np.abs(x[np.isfinite(x)]) if x.size else x
                if (x.size and not np.all(np.isfinite(x))) or (big.size and (
                        big.max() > 1e100 or np.min(np.where(big == 0, 1.0, big)) < 1e-100)):
                    self.program.extreme = True


# fmt: off
SQUASHES = {
    "+=": ("np.sin({})", "np.tanh({})", "0.5 * {}", "{}"),
    "-=": ("np.sin({})", "{}"),
    "*=": ("np.cos({})", "np.tanh({})", "{}"),
    "/=": ("(1.5 + np.sin({}))",),
}
# fmt: on


# -- classic ------------------------------------------------------------------------------------


def classic(d):
    kind = d.draw(st.sampled_from(["augmented", "augmented", "out", "assign", "temporary",
                                   "unary", "twin", "twins"]))
    if kind == "twin":  # computed twice from the same bytes (value numbering), then one written
        name = d.new_name()
        source = d.source(d.value(d.slices(d.pick())).shape)
        d.run(f"{name} = np.sin({source})\n{name} *= np.sin({source})", "classic")
        return
    if kind == "twins":  # two copies of the same bytes, each written once, then read alike
        first, second, both = d.new_name(), d.new_name(), d.new_name()
        source = d.source(d.value(d.slices(d.pick())).shape)
        d.run(f"{first} = {source}.copy()\n{second} = {source}.copy()\n{first} *= 1.5\n"
              f"{second} += 0.25\n{both} = np.sin({first}) + 2.0 * np.sin({second})", "classic")
        return
    if kind == "temporary":
        name = d.new_name()
        source = d.source(d.value(d.slices(d.pick())).shape)
        expressions = ["{}.copy()", "np.sin({})", "{} * {}", "{} + 1.0", "np.cos({}).sum()",
                       "np.tanh({}).sum(axis=0)"]
        expression = d.draw(st.sampled_from(expressions))
        d.run(f"{name} = {expression.format(source, source)}", "classic")
        return
    target, shape = d.target()
    if kind == "augmented":
        operator = d.draw(st.sampled_from(sorted(SQUASHES)))
        value = d.draw(st.sampled_from(SQUASHES[operator])).format(d.source(shape))
        d.run(f"{target} {operator} {value}", "classic")
    elif kind == "out":
        if d.draw(st.booleans()):
            function = d.draw(st.sampled_from(["np.sin", "np.tanh", "np.arctan"]))
            d.run(f"{function}({d.source(shape)}, out={target})", "classic")
        else:
            function = d.draw(st.sampled_from(["np.add", "np.subtract", "np.multiply"]))
            first = target if d.draw(st.booleans()) else d.source(shape)
            d.run(f"{function}({first}, np.sin({d.source(shape)}), out={target})", "classic")
    elif kind == "assign":
        value = d.draw(st.sampled_from(["0.25", "np.sin({})", "0.5 * {}", "{}"]))
        d.run(f"{target} = {value.format(d.source(shape))}", "classic")
    else:
        d.run(d.draw(st.sampled_from([f"{target} *= 0.5", f"np.tanh({target}, out={target})",
                                      f"np.sin({target}, out={target})"])), "classic")


# -- decisions ----------------------------------------------------------------------------------


def _gap_to_runner_up(x, axis=None):
    """How far the largest value along ``axis`` is from the next: 0 at a tie."""
    x = np.asarray(x, float)
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    if x.shape[axis] < 2:
        return np.inf
    top = -np.sort(-x, axis=axis)
    return float(np.min(np.take(top, 0, axis) - np.take(top, 1, axis)))


def _smallest_gap(x, axis=None):
    x = np.asarray(x, float)
    x = x.reshape(-1) if axis is None else np.moveaxis(x, axis, -1)
    if x.shape[-1] < 2:
        return np.inf
    return float(np.min(np.diff(np.sort(x, axis=-1), axis=-1)))


def _base_name(text):
    return text.split("[")[0].split(".")[0]


def _write_into(d, name, feature):
    """An in-place write into array ``name`` (all of it), after a statement read it."""
    if not d.scope[name].flags.writeable or d.finished:
        return
    target = f"{name}[...]"
    code = d.draw(st.sampled_from([f"{target} *= 3.0", f"{target} += 0.5", f"{target} -= 0.25",
                                   f"np.sin({name}, out={name})", f"{target} *= -1.0",
                                   f"{target} = np.tanh({name})", f"{target} /= 1.5"]))
    d.run(code, feature)


def decisions(d, sorts=False):
    feature = "sorts" if sorts else "decisions"
    name = d.pick()
    x = d.scope[name]
    source = d.slices(name)
    s = d.value(source)
    axis = d.draw(st.sampled_from([None] + list(range(s.ndim))))
    result = d.new_name()
    other = d.source(s.shape)
    o = d.value(other)
    low, high = sorted(d.draw(st.sampled_from([(-0.5, 0.5), (-0.2, 0.7), (0.0, 0.3), (-1.0, 0.0)])))
    kind = d.draw(st.sampled_from(["sort", "argsort", "partition"] if sorts else [
        "max", "min", "amax", "argmax", "argmin", "clip", "abs", "maximum", "minimum", "fmax",
        "where", "median", "sign", "percentile"]
        + (["mask"] if "empty_writes" in d.enabled else [])))
    a = "" if axis is None else f", axis={axis}"
    if kind in ("max", "min", "amax"):
        function = {"max": "np.max", "min": "np.min", "amax": "np.amax"}[kind]
        sign = -1.0 if kind == "min" else 1.0
        code = d.draw(st.sampled_from([f"{result} = {function}({source}{a})",
                                       f"{result} = {source}.{kind[-3:]}({a[2:]})"]))
        margin = lambda: _gap_to_runner_up(sign * s, axis)  # noqa: E731
    elif kind in ("argmax", "argmin"):
        sign = -1.0 if kind == "argmin" else 1.0
        code = f"{result} = {source}.reshape(-1)[np.{kind}({source})] * 2.0"
        margin = lambda: _gap_to_runner_up(sign * s)  # noqa: E731
    elif kind == "sort":
        code = f"{result} = np.sort({source}{'' if axis is None else f', axis={axis}'})"
        if axis is None:
            code = f"{result} = np.sort({source}.reshape(-1))"
        margin = lambda: _smallest_gap(s, axis)  # noqa: E731
    elif kind == "argsort":
        code = f"{result} = {source}.reshape(-1)[np.argsort({source}.reshape(-1))]"
        margin = lambda: _smallest_gap(s)  # noqa: E731
    elif kind == "partition":
        k = d.draw(st.integers(0, s.size - 1))
        code = f"{result} = np.partition({source}.reshape(-1), {k})"
        margin = lambda: _smallest_gap(s)  # noqa: E731
    elif kind == "clip":
        code = d.draw(st.sampled_from([f"{result} = np.clip({source}, {low}, {high})",
                                       f"{result} = {source}.clip({low}, {high})"]))
        margin = lambda: np.min(np.minimum(np.abs(s - low), np.abs(s - high)))  # noqa: E731
    elif kind == "abs":
        code = d.draw(st.sampled_from([f"{result} = np.abs({source})",
                                       f"{result} = abs({source})"]))
        margin = lambda: np.min(np.abs(s))  # noqa: E731
    elif kind == "sign":
        code = f"{result} = np.sign({source}) * {other}"
        margin = lambda: np.min(np.abs(s))  # noqa: E731
    elif kind in ("maximum", "minimum", "fmax"):
        code = f"{result} = np.{kind}({source}, {other})"
        margin = lambda: np.min(np.abs(s - o))  # noqa: E731
    elif kind == "where":
        code = f"{result} = np.where({source} > {other}, {source}, 2.0 * {other})"
        margin = lambda: np.min(np.abs(s - o))  # noqa: E731
    elif kind == "median":
        code = f"{result} = np.median({source}{a})"
        margin = lambda: _smallest_gap(s, axis)  # noqa: E731
    elif kind == "percentile":
        code = f"{result} = np.percentile({source}, 30.0{a})"
        margin = lambda: _smallest_gap(s, axis)  # noqa: E731
    else:  # a mask computed from values, written through
        if not x.flags.writeable:
            return
        code = d.draw(st.sampled_from([f"{name}[{name} > {low}] *= 2.0",
                                       f"{name}[{name} < {high}] = 0.5"]))
        xv = x.copy()
        d.run(code, "empty_writes",
              margin=lambda: np.min(np.abs(xv - (low if ">" in code else high))))
        return
    d.run(code, feature, margin=margin)
    if d.draw(st.integers(0, 3)):  # mostly: then write into what the decision read
        _write_into(d, _base_name(d.draw(st.sampled_from([source, other]))), feature)


def sorts(d):
    decisions(d, sorts=True)


# -- views --------------------------------------------------------------------------------------


def views(d):
    name = d.pick(kinds=d.kinds)
    x = d.scope[name]
    view = d.new_name("v")
    options = [f"np.ravel({name})", f"{name}.ravel()", f"{name}.reshape(-1)",
               f"np.reshape({name}, (1, {x.size}))", f"np.expand_dims({name}, 0)",
               f"np.squeeze(np.expand_dims({name}, 0))",
               f"np.flip({name})", f"np.atleast_1d({name})", f"np.atleast_2d({name})",
               f"np.atleast_3d({name})", f"np.real({name})", f"{name}.real", f"{name}[..., None]",
               f"{name}[None]", f"{name}.view()", f"{name}[::-1]", f"{name}.T",
               f"np.transpose({name})", f"np.broadcast_arrays({name}, {name}[:1])[0]",
               f"np.array_split({name}, 2)[{d.draw(st.integers(0, 1))}]", f"{name}.squeeze()"]
    if x.ndim == 2:
        options += [f"np.swapaxes({name}, 0, 1)", f"np.moveaxis({name}, 0, -1)",
                    f"np.rot90({name})", f"np.fliplr({name})", f"np.flipud({name})",
                    f"{name}[1:, ::-2]", f"{name}.reshape({x.shape[1]}, {x.shape[0]})",
                    f"np.hsplit({name}, {x.shape[1]})[0]", f"np.vsplit({name}, {x.shape[0]})[-1]"]
    if x.shape[0] % 2 == 0:
        options.append(f"np.split({name}, 2)[{d.draw(st.integers(0, 1))}]")
    _view_and_writes(d, name, view, options, "views")


def readonly_views(d):
    """Functions whose result NumPy makes a read-only view: writes through it must raise,
    writes into its base must show through it."""
    name = d.pick(kinds=d.kinds)
    x = d.scope[name]
    view = d.new_name("v")
    options = [f"np.broadcast_to({name}, (2,) + {name}.shape)", f"np.imag({name})",
               f"{name}.imag", f"np.lib.stride_tricks.sliding_window_view({name}, 1, axis=0)"]
    if x.ndim == 2:
        options += [f"np.diagonal({name})", f"{name}.diagonal()", f"np.diagonal({name}, 1)"]
    _view_and_writes(d, name, view, options, "readonly_views")


def _view_and_writes(d, name, view, options, feature):
    code = f"{view} = {d.draw(st.sampled_from(options))}"
    d.run(code, feature)
    v = d.scope.get(view)
    if v is None or d.finished:
        return
    for _ in range(d.draw(st.integers(1, 2))):
        what = d.draw(st.sampled_from(["base", "through", "read"]))
        if what == "base":
            _write_into(d, name, feature)
        elif what == "through":
            if v.size == 0 and "empty_writes" not in d.enabled:
                continue
            target = f"{view}[...]"
            code = d.draw(st.sampled_from([f"{target} += 1.0", f"{target} *= 0.5",
                                           f"{target} = np.sin({view})",
                                           f"np.multiply({view}, 2.0, out={view})"]))
            # NumPy refuses to write through a read-only view; mutad must refuse too
            d.run(code, "empty_writes" if v.size == 0 else feature,
                  may_raise=not v.flags.writeable)
        else:
            d.run(f"{d.new_name()} = {view} * 1.5", feature)
        if d.finished:
            return


# -- overlap ------------------------------------------------------------------------------------


def overlap(d, assignment=False):
    name = d.pick(writeable=True, kinds=d.kinds)
    x = d.scope[name]
    axis = int(np.argmax(x.shape))  # the longest axis leaves most room for overlap
    flat = x.ndim == 2 and x.flags.c_contiguous and d.draw(st.booleans())
    n = x.size if flat else x.shape[axis]
    assume(n >= 2)
    length = d.draw(st.integers(1, n - 1))
    t = slice_text(d.draw(axis_slices(n, length)))
    s = slice_text(d.draw(axis_slices(n, length)))
    s2 = slice_text(d.draw(axis_slices(n, length)))
    assume(t != s)
    prefix = "" if flat or axis == 0 else ":, "
    array = f"{name}.reshape(-1)" if flat else name
    T, S, S2 = (f"{array}[{prefix}{k}]" for k in (t, s, s2))
    if assignment:  # NumPy's own order of element copies decides the value here
        options = [f"{T} = {S}", f"{T} = {S}[::-1]", f"np.copyto({T}, {S})"]
        if x.ndim == 2 and x.shape[0] == x.shape[1]:
            options.append(f"{name}[...] = {name}.T")
    else:  # ufuncs: NumPy buffers overlapping operands
        options = [f"{T} += {S}", f"{T} -= {S}", f"{T} *= {S}", f"np.add({S}, {S2}, out={T})",
                   f"np.multiply({S}, {S2}, out={T})", f"np.sin({S}, out={T})",
                   f"np.subtract({T}, {S}, out={T})", f"np.maximum({S}, {S2}, out={T})"]
        if x.ndim == 2 and x.shape[0] == x.shape[1]:
            options += [f"{name} += {name}.T", f"np.add({name}, {name}[::-1], out={name})",
                        f"{name} -= {name}[:, ::-1]"]
    code = d.draw(st.sampled_from(options))
    margin = None
    if "maximum" in code:  # NumPy's complex order compares the real parts first
        a, b = d.value(S).real.copy(), d.value(S2).real.copy()
        margin = lambda: np.min(np.abs(a - b))  # noqa: E731
    d.run(code, "overlap_assign" if assignment else "overlap", margin=margin)


def overlap_assign(d):
    overlap(d, assignment=True)


# -- repeated indices ---------------------------------------------------------------------------


def repeated(d):
    name = d.pick(writeable=True, kinds=d.kinds)
    x = d.scope[name]
    kinds = d.kinds if x.dtype.kind == "c" else "f"  # a complex value into a real array: no
    n = x.shape[0]
    count = d.draw(st.integers(2, 4))
    index = d.draw(st.lists(st.integers(-n, n - 1), min_size=count, max_size=count))
    if len(set(i % n for i in index)) == len(index):
        index[-1] = index[0]  # at least one repeat
    rest = x.shape[1:]
    value_shape = (count,) + rest
    source = (d.source(value_shape, kinds) if d.draw(st.booleans())
              else d.source(rest, kinds) if rest else "0.75")
    i = repr(index)
    kind = d.draw(st.sampled_from(["assign", "add", "mul", "at", "at_mul", "sub_at", "2d"]))
    if kind == "assign":
        code = f"{name}[{i}] = {source}"
    elif kind == "add":
        code = f"{name}[{i}] += np.sin({source})"
    elif kind == "mul":
        code = f"{name}[{i}] *= np.cos({source})"
    elif kind == "at":
        code = f"np.add.at({name}, {i}, {source})"
    elif kind == "at_mul":
        code = f"np.multiply.at({name}, {i}, np.cos({source}))"
    elif kind == "sub_at":
        code = f"np.subtract.at({name}, {i}, {source})"
    else:
        if x.ndim != 2:
            return
        j = repr(d.draw(st.lists(st.integers(0, x.shape[1] - 1), min_size=count, max_size=count)))
        code = d.draw(st.sampled_from([f"{name}[{i}, {j}] = {d.source((count,), kinds)}",
                                       f"{name}[{i}, {j}] += {d.source((count,), kinds)}"]))
    d.run(code, "repeated")


# -- magnitudes ---------------------------------------------------------------------------------


def magnitudes(d):
    name = d.pick(writeable=True, kinds=d.kinds)
    if d.draw(st.booleans()):  # a record reads the values first: its pullback needs them back
        d.run(f"{d.new_name()} = {name} * {name}", "magnitudes")
    target = name if name[0] == "a" else f"{name}[...]"
    element = f"{name}[{', '.join('0' for _ in d.scope[name].shape)}]"
    # Values are left tiny, infinite, or back near 1: a finite value near 1e300 fed to sin or
    # cos would make the program so ill-conditioned that the restore policy's guarantee (each
    # element within a few ulps) could not bound its gradient.
    code = d.draw(st.sampled_from([
        f"{target} *= 1e-300", f"{target} *= 1e300\n{target} *= 1e300", f"{target} *= 5e-324",
        f"{target} /= 1e300", f"{target} *= 1e-170", f"{element} *= 1e-300",
        *([] if "element_overflow" in d.avoid else [f"{element} *= 1e300\n{element} *= 1e300"]),
        f"for _ in range(60):\n    {target} *= 1e-6",
        f"{target} *= 1e-17\n{target} += 1.0", f"{target} += 1e20\n{target} -= 1e20",
        f"{element} += 1e17\n{element} -= 1e17", f"{target} *= 1e-200"]))
    d.run(code, "magnitudes")
    # Finite differences see the rounding (x + 1e20 - 1e20 is 0 whatever x), not the derivative
    # of the formula, which is what differentiation gives: they are excused, the policies not.
    d.program.extreme = True


# -- ties ---------------------------------------------------------------------------------------


def ties(d):
    name = d.pick(writeable=True, kinds=d.kinds)
    x = d.scope[name]
    flat = x.size
    i, j = d.draw(st.integers(0, flat - 1)), d.draw(st.integers(0, flat - 1))
    index = lambda k: ", ".join(str(v) for v in np.unravel_index(k, x.shape))  # noqa: E731
    code = d.draw(st.sampled_from([f"{name}[{index(i)}] = {name}[{index(j)}]",
                                   f"{name}[...] = 0.5" if name[0] != "a" else f"{name}[...] = 0.5",
                                   f"{name}[{index(i)}] = 0.0"]))
    d.run(code, "ties")


# -- constants ----------------------------------------------------------------------------------


def constants(d):
    if not d.program.constants:
        return
    c = d.draw(st.sampled_from(sorted(d.program.constants)))
    size = d.scope[c].size
    if d.draw(st.booleans()):  # a record reads a view of the constant
        name = d.pick()
        s = d.slices(name)
        shape = d.value(s).shape
        last = shape[-1] if shape else 1
        if last > size:
            view = f"{c}[{d.draw(st.integers(0, size - 1))}]"
        else:
            step = d.draw(st.sampled_from([1, 2])) if 2 * last - 1 <= size else 1
            start = d.draw(st.integers(0, size - step * (last - 1) - 1))
            view = f"{c}[{start}:{start + step * (last - 1) + 1}{':2' if step == 2 else ''}]"
        result = d.new_name()
        code = d.draw(st.sampled_from([f"{result} = {s} * {view}",
                                       f"{result} = np.sin({s}) + {view}",
                                       f"{result} = {s} / (2.0 + {view})"]))
        d.run(code, "constants")
        if d.draw(st.booleans()):
            _write_into(d, _base_name(s), "constants")
    else:  # then the constant is overwritten through a view
        code = d.draw(st.sampled_from([f"{c}[:] = 0.0", f"{c}[::2] *= 2.0",
                                       f"{c}.reshape(2, -1)[0] = 1.5", f"np.copyto({c}[1:3], 0.0)",
                                       f"{c} += 1.0", f"{c}[::-1][:2] = 7.0"]))
        d.run(code, "constants")


# -- complex ------------------------------------------------------------------------------------


def _cut_distance(z):
    """How far ``z`` comes to the branch cut of sqrt, log and angle (the real axis left of 0,
    0 included): finite differences across it see a jump, not the derivative."""
    z = np.asarray(z, complex).reshape(-1)
    if z.size == 0:
        return np.inf
    return float(np.min(np.where(z.real >= 0, np.abs(z), np.abs(z.imag))))


def _smallest(x):
    x = np.asarray(x)
    return float(np.min(x)) if x.size else np.inf


# fmt: off
COMPLEX_SQUASHES = {  # bounded updates of a complex target by a real or complex source
    "+=": ("np.sin({})", "0.5j * {}", "{}", "np.conj({})", "(0.25 - 0.5j)"),
    "-=": ("np.sin({})", "1j * {}", "{}"),
    "*=": ("np.exp(0.5j * {})", "np.cos(0.5 * {})", "{}", "(0.6 - 0.8j)", "1j"),
    "/=": ("(2.0 + np.sin(0.3 * {}))", "(1.5 + 1j * np.cos({}))", "(0.8 + 0.6j)"),
}
# fmt: on


def _complex_write_into(d, name):
    """An in-place complex write into array ``name`` (all of it), after a statement read it."""
    if not d.scope[name].flags.writeable or d.finished:
        return
    target = f"{name}[...]"
    d.run(d.draw(st.sampled_from([
        f"{target} *= (0.5 - 1j)", f"{target} += 0.5j", f"np.exp(0.5 * {name}, out={name})",
        f"{target} /= (1.5 + 0.5j)", f"{name}.imag[...] *= -2.0",
        f"np.conjugate({name}, out={name})", f"{target} = np.sin({name})"])), "complex")


def complex_numbers(d):
    """The complex class's statements (see ``FEATURES``)."""
    kind = d.draw(st.sampled_from(["make", "make", "augmented", "augmented", "out", "in_place",
                                   "parts", "parts", "real_target", "view", "reduce",
                                   "decision"]))
    if not d.arrays(kinds="c"):
        kind = "make"
    if kind == "make":  # a complex temporary, from real arrays, complex ones or both
        name = d.new_name()
        shape = d.value(d.slices(d.pick(kinds="fc"))).shape
        r, r2 = d.source(shape), d.source(shape)
        z = d.source(shape, kinds="fc")
        options = [f"{name} = {r} * np.exp(1j * {r2})", f"{name} = {r} + 1j * {r2}",
                   f"{name} = np.zeros({shape}, complex)\n{name}[...] = {r}\n"
                   f"{name} *= np.exp(0.5j * {z})",
                   f"{name} = {z} * {r}", f"{name} = np.conj({z})", f"{name} = {z}.copy()",
                   f"{name} = 1j * {z} - {r}", f"{name} = {r}.astype(complex)",
                   f"{name} = {z} * {d.source(shape, kinds='fc')}"]
        d.run(d.draw(st.sampled_from(options)), "complex")
        return
    if kind == "augmented":  # z op= w, w real or complex, into the whole or a slice
        target, shape = d.target(kinds="c")
        operator = d.draw(st.sampled_from(sorted(COMPLEX_SQUASHES)))
        value = d.draw(st.sampled_from(COMPLEX_SQUASHES[operator]))
        d.run(f"{target} {operator} {value.format(d.source(shape, kinds='fc'))}", "complex")
        return
    if kind == "out":  # ufunc(..., out=z)
        target, shape = d.target(kinds="c")
        source = d.source(shape, kinds="fc")
        first = target if d.draw(st.booleans()) else d.source(shape, kinds="fc")
        code = d.draw(st.sampled_from([
            f"np.exp(0.5 * {source}, out={target})", f"np.sin({source}, out={target})",
            f"np.conjugate({source}, out={target})", f"np.sqrt(1.5 + {source}, out={target})",
            f"np.log(1.5 + {source}, out={target})",
            f"np.multiply({first}, np.exp(0.5j * {source}), out={target})",
            f"np.add({first}, {source}, out={target})",
            f"np.subtract({first}, 1j * {source}, out={target})",
            f"np.divide({first}, 2.0 + np.sin(0.3 * {source}), out={target})"]))
        shifted = d.value(f"1.5 + {source}")
        d.run(code, "complex",
              margin=(lambda: _cut_distance(shifted)) if "1.5 +" in code else None)
        return
    if kind == "in_place":  # a unary ufunc over its own input
        target, _ = d.target(kinds="c")
        code = d.draw(st.sampled_from([
            f"np.exp({target}, out={target})", f"np.sin({target}, out={target})",
            f"np.conjugate({target}, out={target})", f"{target} *= 1j",
            f"np.square({target}, out={target})", f"np.sqrt({target}, out={target})",
            f"np.multiply({target}, 0.5 - 0.5j, out={target})", f"{target} **= 2",
            f"np.tanh(0.5 * {target}, out={target})"]))
        before = d.value(target).copy()
        d.run(code, "complex", margin=(lambda: _cut_distance(before)) if "sqrt" in code else None)
        return
    if kind == "parts":  # writes through z.real and z.imag
        z = d.pick(writeable=True, kinds="c")
        which = d.draw(st.sampled_from(["real", "imag"]))
        other = "imag" if which == "real" else "real"
        spelled = d.draw(st.sampled_from([f"{z}.{which}", f"np.{which}({z})"]))
        key = ", ".join(slice_text(d.draw(axis_slices(e, d.draw(st.integers(1, e)))))
                        for e in d.scope[z].shape)
        target, mirror = f"{spelled}[{key}]", f"{z}.{other}[{key}]"
        shape = d.value(target).shape
        code = d.draw(st.sampled_from([
            f"{target} = np.sin({d.source(shape)})", f"{target} *= 0.5",
            f"{target} += {d.source(shape)}", f"{target} = {mirror}",
            f"{target} = {mirror}[::-1]", f"{target} *= {mirror}",
            f"np.sin({target}, out={target})", f"{target} -= np.abs({mirror})",
            f"{target} -= 0.5 * {d.source(shape, kinds='c')}.real"]))
        margin = None
        if "np.abs" in code:
            m = d.value(mirror).copy()
            margin = lambda: _smallest(np.abs(m))  # noqa: E731
        d.run(code, "complex", margin=margin)
        return
    if kind == "real_target":  # real values from complex ones, into a real array
        target, shape = d.target()
        z, w = d.source(shape, kinds="c"), d.source(shape, kinds="fc")
        zv = d.value(z).copy()
        code, margin = d.draw(st.sampled_from([
            (f"{target} = np.abs({z})", lambda: _smallest(np.abs(zv))),
            (f"{target} *= np.abs(np.cos({z}))", lambda: _smallest(np.abs(np.cos(zv)))),
            (f"{target} = np.real({z} * np.conj({w}))", None),
            (f"{target} += np.imag({z})", None),
            (f"{target} = np.angle({z})", lambda: _cut_distance(zv)),
            (f"{target} -= {z}.real * {z}.imag", None),
            (f"{target} = np.abs({z}) ** 2", None)]))
        d.run(code, "complex", margin=margin)
        return
    z = d.pick(kinds="c")
    if kind == "view":  # real views of a complex array, written through
        options = [f"{z}.real", f"{z}.imag", f"np.real({z})", f"np.imag({z})",
                   f"{z}.real[::-1]", f"{z}.imag.T", f"{z}[..., None].imag"]
        _view_and_writes(d, z, d.new_name("v"), options, "complex")
        return
    source = d.slices(z)
    s = d.value(source)
    axis = d.draw(st.sampled_from([None] + list(range(s.ndim))))
    a = "" if axis is None else f", axis={axis}"
    result = d.new_name()
    margin = None
    if kind == "reduce":
        other = d.source(s.shape, kinds="fc")
        code = d.draw(st.sampled_from([
            f"{result} = np.sum({source}{a})", f"{result} = np.mean({source}{a})",
            f"{result} = np.prod(0.8 * {source}{a})", f"{result} = np.cumsum({source}{a})",
            f"{result} = np.cumprod({source}{a})", f"{result} = {source}.sum({a[2:]})",
            f"{result} = np.var({source}{a})", f"{result} = np.vdot({source}, {other})",
            f"{result} = np.dot({source}.reshape(-1), {other}.reshape(-1))",
            f"{result} = np.std({source}{a})"]))
        if "np.std" in code:
            margin = lambda: _smallest(np.var(s, axis=axis))  # noqa: E731
    else:  # decisions in NumPy's complex order (real parts first), and at |z| = 0
        other = d.source(s.shape, kinds="fc")
        o = d.value(other)
        real = d.source(s.shape)
        rv = d.value(real)
        code, margin = d.draw(st.sampled_from([
            (f"{result} = np.maximum({source}, {other})",
             lambda: _smallest(np.abs(s.real - o.real))),
            (f"{result} = np.minimum({source}, {other})",
             lambda: _smallest(np.abs(s.real - o.real))),
            (f"{result} = np.max({source}{a})", lambda: _gap_to_runner_up(s.real, axis)),
            (f"{result} = np.min({source}{a})", lambda: _gap_to_runner_up(-s.real, axis)),
            (f"{result} = np.sort({source}.reshape(-1))", lambda: _smallest_gap(s.real)),
            (f"{result} = np.abs({source}) * {other}", lambda: _smallest(np.abs(s))),
            (f"{result} = np.sign({source}) * {other}", lambda: _smallest(np.abs(s))),
            (f"{result} = np.where({source}.real > {real}, {source}, 2.0 * {source})",
             lambda: _smallest(np.abs(s.real - rv))),
            (f"{result} = np.angle({source}) * {other}", lambda: _cut_distance(s))]))
    d.run(code, "complex", margin=margin)
    if d.draw(st.integers(0, 2)):  # mostly: then write into what it read
        _complex_write_into(d, z)


STEPS = {"classic": classic, "decisions": decisions, "sorts": sorts, "views": views,
         "readonly_views": readonly_views, "overlap": overlap, "overlap_assign": overlap_assign,
         "repeated": repeated, "magnitudes": magnitudes, "ties": ties, "constants": constants,
         "complex": complex_numbers}


# ----------------------------------------------------------------------------------------------
# Arguments


@st.composite
def _layout(draw, enabled):
    tied = "ties" in enabled and draw(st.booleans())
    complex_buffers = "complex" in enabled  # then each buffer may be complex

    def values(count, is_complex=False):
        if tied:
            parts = [draw(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=count,
                                   max_size=count)) for _ in range(1 + is_complex)]
            return parts[0] if not is_complex else [complex(*v) for v in zip(*parts)]
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if is_complex:
            return [complex(*v) for v in np.round(rng.uniform(-1, 1, (count, 2)), 3).tolist()]
        return [float(v) for v in np.round(rng.uniform(-1, 1, count), 3)]

    def part(window, buffer):
        """A complex buffer's argument may be its real or imaginary part (a real view)."""
        if not any(isinstance(v, complex) for v in buffers[buffer]):
            return window
        return window + draw(st.sampled_from(["", "", "", "", ".real", ".imag"]))

    shared = draw(st.integers(6, 12))
    buffers = {"s": values(shared, complex_buffers and draw(st.integers(0, 2)) == 0)}
    arguments = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["shared", "shared", "own", "again"] if arguments
                                    else ["shared", "own"]))
        if kind == "again":
            arguments.append(draw(st.sampled_from(arguments)))
        elif kind == "own":
            rows, columns = draw(st.integers(1, 3)), draw(st.integers(2, 4))
            name = f"o{len(buffers) - 1}"
            buffers[name] = values(rows * columns, complex_buffers and draw(st.integers(0, 2)) == 0)
            window = draw(st.sampled_from([
                f"{name}.reshape({rows}, {columns})",
                f"{name}.reshape({rows}, {columns}, order='F')",
                f"{name}.reshape({columns}, {rows}).T", name]))
            arguments.append(part(window, name) if complex_buffers else window)
        else:
            length = draw(st.integers(2, shared))
            start = draw(st.integers(0, shared - length))
            window = f"s[{start}:{start + length}]"
            step = draw(st.sampled_from([1, 1, 2, -1]))
            if step == 2 and length >= 4:
                window = f"s[{start}:{start + length}:2]"
                length = (length + 1) // 2
            elif step == -1:
                window = f"s[{start}:{start + length}][::-1]"
            factors = [r for r in (2, 3) if length % r == 0 and length // r >= 2]
            if factors and draw(st.booleans()) and step != 2:
                rows = draw(st.sampled_from(factors))
                window = f"{window}.reshape({rows}, {length // rows})"
                if draw(st.booleans()):
                    window += ".T"
            arguments.append(part(window, "s") if complex_buffers else window)
    constants = {}
    if "constants" in enabled:
        constants["C0"] = values(8)
    return Program(buffers, constants, arguments)


@st.composite
def programs(draw, enabled=FEATURES, max_steps=6, avoid=()):
    """A random program using the feature classes in ``enabled`` (``classic`` always), without
    the statements of the ``KNOWN_BUGS`` named in ``avoid``."""
    enabled = tuple(enabled)
    program = draw(_layout(enabled))
    if any(_is_complex_buffer(v) for v in program.buffers.values()):
        program.features.add("complex")
    d = Drawing(draw, program, enabled, tuple(avoid))
    kinds = [k for k in enabled if k in STEPS]
    for _ in range(draw(st.integers(1, max_steps))):
        draw_step = STEPS[draw(st.sampled_from(kinds))]
        draw_step(d)
        if d.finished:
            break
    assume(program.statements)
    names = [n for n in d.arrays(min_ndim=0, min_size=0, kinds="fc")]
    scalars = [n for n, v in d.scope.items()
               if n[0] == "t" and isinstance(v, (np.floating, np.complexfloating))]
    program.outputs = sorted(set(names + scalars), key=_order)
    return program


def _order(name):
    return ({"a": 0, "t": 1, "v": 2}[name[0]], int(name[1:]))


# ----------------------------------------------------------------------------------------------
# The oracles


def _bytes(buffers):
    return {name: b.tobytes() for name, b in buffers.items()}


def _weights(outputs):
    """The cotangents of the outputs: real, and complex for complex outputs (the loss is then
    ``Re <w, y>``: a cotangent is dL/dRe y + i dL/dIm y)."""
    return tuple(_weight(np.size(y), np.iscomplexobj(y)).reshape(np.shape(y)) for y in outputs)


def _weight(size, is_complex):
    w = np.linspace(1.0, 2.0, size)
    return w + 1j * np.linspace(-1.0, 0.5, size) if is_complex else w


def _is_complex_buffer(values):
    return any(isinstance(v, complex) for v in values)


def _parts(x):
    """The real arrays ``x`` is made of: itself, or views of its real and imaginary parts."""
    x = np.asarray(x)
    return (x.real, x.imag) if x.dtype.kind == "c" else (x,)


def _buffer_zeros(program):
    return {name: np.zeros(len(v), complex if _is_complex_buffer(v) else float)
            for name, v in program.buffers.items()}


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _buffers_of(f_args, program):
    """The buffers behind the arguments: ``make`` builds each argument as a view of one."""
    buffers = {}
    for name in program.buffers:
        for text, a in zip(program.arguments, f_args):
            if _base_name(text) == name:
                base = a
                while base.base is not None:
                    base = base.base
                buffers[name] = base
    return buffers


def _scatter(program, grads):
    """Each argument's gradient written into its buffer's shape (arguments viewing one element
    must agree there: the gradient with respect to the buffer)."""
    total, covered = _buffer_zeros(program), _buffer_zeros(program)  # covered: 1 where seen
    for text, g in zip(program.arguments, grads):
        name = _base_name(text)
        view = eval(text, {"np": np, name: total[name]})
        seen = eval(text, {"np": np, name: covered[name]})
        g = np.asarray(g)
        if g.dtype.kind != view.dtype.kind or g.shape != view.shape:
            raise ProgramFailure("aliasing", f"the gradient of argument {text} is {g!r}: not of "
                                 f"its dtype {view.dtype} and shape {view.shape}")
        for v, s, gp in zip(_parts(view), _parts(seen), _parts(g)):
            s = s != 0
            if np.any(s) and not np.array_equal(v[s], gp[s], equal_nan=True):
                raise ProgramFailure("aliasing", f"arguments viewing one element of buffer "
                                     f"{name} got different gradients there: {v[s]} vs {gp[s]}")
            v[...] = gp
        for s in _parts(seen):
            s[...] = 1
    return total


def _tangents(program, direction):
    """One tangent per argument whose sum over arguments sharing a buffer is ``direction``."""
    covered = _buffer_zeros(program)  # 1 where an earlier argument's tangent holds the direction
    tangents = []
    for text in program.arguments:
        name = _base_name(text)
        seen = eval(text, {"np": np, name: covered[name]})
        tangent = np.array(eval(text, {"np": np, name: direction[name]}), order="C")
        for t, s in zip(_parts(tangent), _parts(seen)):
            t[s != 0] = 0.0
            s[...] = 1
        tangents.append(tangent)
    return tuple(tangents)


def _dot(a, b):
    """``Re <a, b>`` over the buffers: for a gradient ``a`` and a direction ``b``, the
    directional derivative (complex buffers too)."""
    return sum(float(np.vdot(a[k], b[k]).real) for k in a)


class Outcome:
    """What :func:`check` saw: refusals (MutadErrors where NumPy ran) and what it skipped."""

    def __init__(self):
        self.refused = []
        self.kink = False
        self.extreme = False


def check(program, policies=("restore", "checkpoint"), modes=True, second_order=False,
          finite_differences=True, replay=False):
    """Judge ``program`` with every oracle; raise :class:`ProgramFailure` on a wrong answer.
    With ``replay``, also :func:`check_replay` under each policy."""
    outcome = Outcome()
    outcome.kink = program.margin <= KINK_MARGIN
    outcome.extreme = program.extreme
    f, args = program.make()
    try:
        expected = _plain(f, args)
        expected_error = None
    except Exception as error:  # noqa: BLE001 - NumPy's own refusal, mirrored below
        expected, expected_error = None, error
    expected_buffers = None if expected_error else {k: b.copy() for k, b in
                                                    _buffers_of(args, program).items()}
    weights = None if expected_error else _weights(expected)
    gradients = {}
    for policy in policies:
        f, args = program.make()
        buffers = _buffers_of(args, program)
        before = _bytes(buffers)
        try:
            with np.errstate(all="ignore"):
                y, back = mutad.pullback(f, *args, policy=policy)
        except mutad.MutadError as error:
            _check_bytes(buffers, before, f"after a refusal under policy={policy!r}")
            if expected_error is None:
                outcome.refused.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
            continue
        except Exception as error:  # noqa: BLE001
            _check_bytes(buffers, before, f"after an error under policy={policy!r}")
            if expected_error is not None and type(error) is type(expected_error):
                continue
            where = ("" if expected_error is None
                     else f" where NumPy raised {type(expected_error).__name__}")
            raise ProgramFailure("crash", f"policy={policy!r}: mutad raised "
                                 f"{type(error).__name__}: {error}{where}") from error
        if expected_error is not None:
            raise ProgramFailure("value", f"NumPy raises {type(expected_error).__name__} "
                                 f"({expected_error}); mutad ran it (policy={policy!r})")
        _check_value(y, expected, f"policy={policy!r}")
        for name, b in buffers.items():
            if not _same(b, expected_buffers[name]):
                raise ProgramFailure("value", f"policy={policy!r}: buffer {name} after f is "
                                     f"{b!r}, NumPy leaves {expected_buffers[name]!r}")
        try:
            with np.errstate(all="ignore"):
                grads = back(weights)
        except Exception as error:  # noqa: BLE001 - a MutadError after the forward ran, too
            _check_bytes(buffers, before, f"after an error in the reverse pass ({policy!r})")
            raise ProgramFailure("crash", f"policy={policy!r}: the reverse pass raised "
                                 f"{type(error).__name__}: {error}") from error
        _check_bytes(buffers, before, f"after the reverse pass under policy={policy!r}")
        gradients[policy] = _scatter(program, grads)
    # Rounding in a cancellation to zero is relative to the terms that cancelled, of the
    # order of the weights, not to the result: below this, two results are both zero.
    zero = ZERO_RTOL * sum(float(np.sum(np.abs(w))) for w in weights) if weights else 0.0
    if "restore" in gradients and "checkpoint" in gradients:
        _compare_policies(gradients["restore"], gradients["checkpoint"], zero)
    for policy, gradient in gradients.items():
        _check_budget(program, policy, weights, expected, gradient, outcome)
    if not gradients:
        return outcome
    reference = gradients.get("checkpoint", next(iter(gradients.values())))
    finite = all(np.all(np.isfinite(g)) for g in reference.values())
    differentiable = finite and not outcome.kink and not outcome.extreme
    rng = np.random.default_rng(len(program.statements))
    direction = {name: rng.standard_normal(len(v)) for name, v in program.buffers.items()}
    for name, v in program.buffers.items():  # after the real ones: the same for real programs
        if _is_complex_buffer(v):
            direction[name] = direction[name] + 1j * rng.standard_normal(len(v))
    if differentiable and finite_differences:
        numeric = _finite_difference(program, weights, direction)
        finer = None
        for policy, g in gradients.items():
            analytic = _dot(g, direction)
            scale = max(abs(analytic), abs(numeric[0]), numeric[1] * 1e-3)
            if abs(analytic - numeric[0]) <= 1e-9 + 1e-6 * scale:
                continue
            # A steep function: the stencil's truncation error, estimated from a step four
            # times smaller (whose own error is 256 times smaller), may exceed the tolerance.
            finer = finer or _finite_difference(program, weights, direction, step=2.5e-5)
            truncation = abs(numeric[0] - finer[0])
            if not abs(analytic - finer[0]) <= 1e-9 + 1e-6 * scale + 0.1 * truncation:
                raise ProgramFailure("finite differences", f"policy={policy!r}: <gradient, v> = "
                                     f"{analytic!r}, finite differences give {numeric[0]!r} "
                                     f"(step 1e-4) and {finer[0]!r} (step 2.5e-5)")
    if modes:
        # Not at extreme magnitudes: there the two modes multiply the same factors in opposite
        # orders, and one underflows where the other does not (x *= 1e-6 sixty times, then
        # x *= 1e300: forward mode's tangent is 0, reverse mode's gradient 1e-60).
        linear_maps_agree = differentiable
        f, args = program.make()
        buffers = _buffers_of(args, program)
        before = _bytes(buffers)
        try:
            with np.errstate(all="ignore"):
                y, dy = mutad.jvp(f, tuple(args), _tangents(program, direction))
        except mutad.MutadError as error:
            outcome.refused.append(f"jvp {type(error).__name__}: {str(error).splitlines()[0]}")
            _check_bytes(buffers, before, "after a refusal of jvp")
            return outcome
        except Exception as error:  # noqa: BLE001
            raise ProgramFailure("crash", f"jvp raised {type(error).__name__}: {error}") from error
        _check_bytes(buffers, before, "after jvp")
        _check_value(y, expected, "jvp")
        if linear_maps_agree:
            forward = sum(float(np.vdot(w, t).real) for w, t in zip(weights, dy))
            reverse = _dot(reference, direction)
            # Each side's sum of absolute terms scales its rounding: both may be a cancellation
            # to zero, one exactly and the other within an ulp of those terms.
            terms = max(
                sum(float(np.abs(reference[k]) @ np.abs(direction[k])) for k in reference),
                sum(float(np.vdot(np.abs(w), np.abs(t))) for w, t in zip(weights, dy)))
            direction_size = max((float(np.max(np.abs(d), initial=0.0))
                                  for d in direction.values()), default=0.0)
            if not abs(forward - reverse) <= (MODE_RTOL * max(terms, abs(forward))
                                              + zero * direction_size + 1e-300):
                raise ProgramFailure("modes", f"<w, jvp(v)> = {forward!r} but <gradient, v> = "
                                     f"{reverse!r}")
    if replay and "constants" not in program.features:
        for policy in policies:
            check_replay(program, policy, weights, outcome)
    if second_order and differentiable:
        for policy in policies:
            f, args = program.make()
            if program.constants:  # f may write the constants it reads: each call of the
                def f(*xs):        # check starts from them afresh, as every call above does
                    return program.make()[0](*xs)
            try:
                with np.errstate(all="ignore"):
                    mutad.check_grads(f, *args, policy=policy, order=2)
            except mutad.testing.GradientCheckError as error:
                raise ProgramFailure("second order", str(error)) from error
            except mutad.MutadError as error:
                outcome.refused.append(f"order 2 {type(error).__name__}: "
                                       f"{str(error).splitlines()[0]}")
    return outcome


def _check_budget(program, policy, weights, expected, gradient, outcome):
    """The ``budget`` oracle: ``memory=0`` changes no bit of the value or of the gradient."""
    f, args = program.make()
    buffers = _buffers_of(args, program)
    before = _bytes(buffers)
    try:
        with np.errstate(all="ignore"):
            y, back = mutad.pullback(f, *args, policy=policy, memory=0)
            grads = back(weights)
    except mutad.MutadError as error:
        _check_bytes(buffers, before, f"after a refusal under a budget ({policy!r})")
        outcome.refused.append(f"budget {type(error).__name__}: {str(error).splitlines()[0]}")
        return
    except Exception as error:  # noqa: BLE001 - none without a budget
        _check_bytes(buffers, before, f"after an error under a budget ({policy!r})")
        raise ProgramFailure("budget", f"policy={policy!r}, memory=0: mutad raised "
                             f"{type(error).__name__}: {error}") from error
    _check_bytes(buffers, before, f"after the reverse pass under a budget ({policy!r})")
    _check_value(y, expected, f"policy={policy!r}, memory=0")
    for name, g in _scatter(program, grads).items():
        if not _same(g, gradient[name]):
            raise ProgramFailure("budget", f"policy={policy!r}, memory=0: the gradient of "
                                 f"{name} is {g!r}, without a budget {gradient[name]!r}")


def check_replay(program, policy, weights, outcome):
    """The ``replay`` oracle: ``value_and_grad(..., replay=True)`` of the weighted sum of the
    outputs, recorded on arguments shifted by a constant and replayed (twice) on the program's
    own, gives the traced value and gradients bit for bit, and the caller's bytes back.
    (Not for programs that write the arrays they close over: no two calls of those agree.)
    Returns the replaying function where both calls were compared, else None."""
    f = program.make()[0]

    def loss(*xs):
        total = 0.0
        for w, y in zip(weights, f(*xs)):
            total = total + ((np.conj(w) * y).real.sum() if np.iscomplexobj(w) else (w * y).sum())
        return total

    # Every other program leaves its first argument out of argnums: a constant of the traced
    # call, which the replay reads as an input.
    argnums = tuple(range(len(program.statements) % 2 if len(program.arguments) > 1 else 0,
                          len(program.arguments)))
    replaying = mutad.value_and_grad(loss, argnums=argnums, policy=policy, replay=True)
    # Small temporaries are kept, not recomputed, as by default: a replay is refused where the
    # traced call would recompute one, and its bits be those of inputs restored by inverses
    small, recompute.SMALL = recompute.SMALL, SMALL
    try:
        compared = _replay_twice(program, policy, loss, argnums, replaying, outcome)
    finally:
        recompute.SMALL = small
    if replaying.reasons:
        outcome.refused.append("replay traced: " + next(iter(replaying.reasons.values())))
    return replaying if compared else None


def _replay_twice(program, policy, loss, argnums, replaying, outcome):
    """Whether both calls were compared (neither refused nor raised)."""
    with np.errstate(all="ignore"):
        try:
            replaying(*program.make({name: 0.25 for name in program.buffers})[1])
        except (mutad.MutadError, FloatingPointError, ValueError):
            return False
        for _ in range(2):
            args = program.make()[1]
            buffers = _buffers_of(args, program)
            before = _bytes(buffers)
            try:
                got = replaying(*args)
            except mutad.MutadError as error:
                _check_bytes(buffers, before, "after a refusal of a replay")
                outcome.refused.append(f"replay {type(error).__name__}: "
                                       f"{str(error).splitlines()[0]}")
                return False
            except Exception as error:  # noqa: BLE001 - a crash, unless tracing raises it too
                _check_bytes(buffers, before, "after an error in a replay")
                try:
                    mutad.value_and_grad(loss, argnums=argnums, policy=policy)(
                        *program.make()[1])
                except type(error):
                    return False
                raise ProgramFailure("replay", f"policy={policy!r}: the replay raised "
                                     f"{type(error).__name__}: {error}; tracing does not") \
                    from error
            _check_bytes(buffers, before, f"after a replay ({policy!r})")
            expected = mutad.value_and_grad(loss, argnums=argnums, policy=policy)(
                *program.make()[1])
            for what, a, b in (("value", got[0], expected[0]), *(
                    (f"gradient {i}", x, y) for i, (x, y) in enumerate(zip(got[1], expected[1])))):
                if not _same(a, b):
                    raise ProgramFailure("replay", f"policy={policy!r}: the replayed {what} is "
                                         f"{a!r}, traced {b!r}")
    return True


def _check_bytes(buffers, before, when):
    for name, b in buffers.items():
        if b.tobytes() != before[name]:
            raise ProgramFailure("bytes", f"{when}: buffer {name} did not come back bit-for-bit")


def _check_value(y, expected, who):
    if len(y) != len(expected):
        raise ProgramFailure("value", f"{who}: {len(y)} outputs, NumPy gives {len(expected)}")
    for k, (a, b) in enumerate(zip(y, expected)):
        if not _same(a, b):
            raise ProgramFailure("value", f"{who}: output {k} is {np.asarray(a)!r}, NumPy "
                                 f"computes {np.asarray(b)!r}")


def _compare_policies(restore, checkpoint, zero):
    scale = max((float(np.max(np.abs(g[np.isfinite(g)]), initial=0.0))
                 for g in checkpoint.values()), default=0.0)
    for name in checkpoint:
        same_pattern, error = True, 0.0
        for r, c in zip(_parts(restore[name]), _parts(checkpoint[name])):  # complex: each part
            same_pattern &= (np.array_equal(np.isnan(r), np.isnan(c)) and np.array_equal(
                np.where(np.isinf(r), r, 0), np.where(np.isinf(c), c, 0)))
            finite = np.isfinite(r) & np.isfinite(c)
            error = max(error, np.max(np.abs(r[finite] - c[finite]), initial=0.0))
        r, c = restore[name], checkpoint[name]
        if not same_pattern or error > POLICY_RTOL * scale + zero:
            raise ProgramFailure("policies", f"buffer {name}: restore gives {r!r}, checkpoint "
                                 f"gives {c!r}")


def _finite_difference(program, weights, direction, step=1e-4):
    values = {}
    for k in (-2, -1, 1, 2):
        f, args = program.make({name: k * step * v for name, v in direction.items()})
        outputs = _plain(f, args)
        values[k] = sum(float(np.vdot(w, np.asarray(y)).real)
                        for w, y in zip(weights, outputs))
    numeric = (8 * (values[1] - values[-1]) - (values[2] - values[-2])) / (12 * step)
    return numeric, max(abs(v) for v in values.values())


# ----------------------------------------------------------------------------------------------
# Reproducers


def reproducer(program, failure=None):
    """Standalone Python (NumPy and mutad only) that shows ``failure`` on ``program``."""
    oracle = getattr(failure, "oracle", None)
    lines = ["import numpy as np", "import mutad", "", program.source(), "",
             "np.seterr(all='ignore')",
             "f, args = make()",
             "numpy_value = f(*args)                  # plain NumPy on fresh copies",
             "W = [np.linspace(1.0, 2.0, np.size(y)).reshape(np.shape(y)) for y in numpy_value]",
             "W = [w + 1j * np.linspace(-1.0, 0.5, np.size(y)).reshape(np.shape(y))",
             "     if np.iscomplexobj(y) else w for w, y in zip(W, numpy_value)]"
             "  # loss: Re <W, y>",
             "",
             "def gradient(policy, memory=None):",
             "    f, args = make()",
             "    value, back = mutad.pullback(f, *args, policy=policy, memory=memory)",
             "    return value, back(W)",
             ""]
    if oracle == "value" or oracle == "crash" or program.numpy_raises:
        lines += ["value, _ = gradient('restore')",
                  "print('NumPy:', numpy_value)",
                  "print('mutad:', value)               # differs from NumPy"]
    elif oracle == "budget":
        lines += ["from mutad import recompute",
                  "recompute.SMALL = 0  # as the soak has it: saved writes are rebuilt where they can be",
                  "print(gradient('restore')[1])",
                  "print(gradient('restore', memory=0)[1])   # differs"]
    elif oracle == "modes":
        lines += ["f, args = make()",
                  "v = tuple(np.cos(np.arange(np.size(a))).reshape(np.shape(a)) for a in args)",
                  "v = tuple(u * (1 - 0.5j) if np.iscomplexobj(a) else u for u, a in zip(v, args))",
                  "_, dy = mutad.jvp(f, args, v)",
                  "_, g = gradient('checkpoint')",
                  "print(sum(np.vdot(w, t).real for w, t in zip(W, dy)),",
                  "      sum(np.vdot(gi, vi).real for gi, vi in zip(g, v)))   # differ"]
    else:
        lines += ["print('restore:   ', gradient('restore')[1])",
                  "print('checkpoint:', gradient('checkpoint')[1])",
                  "",
                  "def numeric(buffer, size, is_complex, h=1e-6):  # differences of Re <W, f>",
                  "    def at(shift):",
                  "        f, args = make(**{'d' + buffer: shift})",
                  "        return sum(np.vdot(w, np.asarray(y)).real for w, y in zip(W, f(*args)))",
                  "    def along(e):",
                  "        return (at(h * e) - at(-h * e)) / (2 * h)",
                  "    return np.array([along(e) + (1j * along(1j * e) if is_complex else 0)",
                  "                     for e in np.eye(size)])  # d/dRe + i d/dIm for complex",
                  "",
                  *[f"print('numeric d/d{name}:', numeric({name!r}, {len(v)}, "
                    f"{_is_complex_buffer(v)}))" for name, v in program.buffers.items()]]
    if failure is not None:
        lines += ["", f"# {failure}".replace("\n", "\n# ")]
    return "\n".join(lines)
