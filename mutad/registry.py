"""The rule tables, and the helpers that fill them.

The core (``tracing``) looks rules up here by the NumPy object it intercepted and knows nothing
else about them. Rules live in ``mutad/rules/``, one module per family.

* ``UFUNCS[ufunc]``: an :class:`ElementwiseRule`; out-of-place calls, ``out=``, augmented
  assignment and slice targets all use it through the core's one in-place path.
* ``FUNCTIONS[func]``: a pure rule ``rule(*args, **kwargs) -> (y, back)`` for a function reached
  through ``__array_function__`` (or a ufunc method, keyed ``(ufunc, method)``). It receives plain
  arrays; ``back(dy)`` returns one cotangent per positional argument (a list of them for a
  sequence argument such as ``concatenate``'s), ``None`` where there is none. For several outputs
  ``dy`` is a tuple with zeros for outputs no gradient reached.
* ``INPLACE[func]``: a handler ``handler(*args, **kwargs)`` for a function that writes into one of
  its arguments (``np.add.at``, ``np.copyto``, ``np.put``); it receives traced arguments and
  records itself with the core's in-place helpers.
* ``NONDIFF``: functions and ufuncs whose outputs carry no gradient; they run on plain values.
* ``COMPOSITES[func]``: for a function NumPy writes in Python out of functions mutad
  differentiates (``np.trapezoid``, ``np.cov``), a composition ``composite(*args, **kwargs)``
  called with the traced arrays (or duals) themselves: every step it takes is recorded by its
  own rule, so reverse and forward mode and every order follow with no rule of its own.
* ``JVPS[func]``: forward mode's rule ``rule(tangents, *args, **kwargs) -> (y, dy)`` for a
  function in ``FUNCTIONS`` or ``INPLACE``. ``tangents`` has one entry per positional argument:
  its tangent (an array of the argument's shape; a list of them for a sequence argument), or
  ``None`` where the argument carries none. ``dy`` is the tangent of ``y`` (a tuple for several
  outputs, ``None`` for an output without one). A rule computes with NumPy calls that dispatch
  (``np.*``, operators, methods, ``mutad.scipy``), never ``np.asarray`` or raw LAPACK, because
  its arguments may be traced by an enclosing reverse pass (``hvp``, ``hessian``). Elementwise
  ufuncs need no entry: their ``partials`` serve both modes.
* ``METHODS[(cls, name)]``: a rule ``rule(self, *args, **kwargs)`` that replaces method ``name``
  of class ``cls`` (looked up on its instances and those of its subclasses) while a
  differentiation runs, when a traced array is among the call's arguments; otherwise the
  method runs as it is. For methods of library objects user code calls by their own names
  (``scipy.stats.norm.logpdf(x, mu, sigma)``), which NumPy's protocols never reach. The rule
  computes with calls that dispatch, as a ``JVPS`` rule does. See ``allocation``.
* ``ROUTES[function] = stand_in``: a library function user code calls by its own name
  (``scipy.linalg.solve``, however it was imported), and the function that stands in for it
  while a differentiation runs: an ``adjoint`` of it, which runs the original on plain arrays
  and its rule on traced ones. See ``allocation``.
* ``RECOMPUTABLE``: the ``FUNCTIONS`` rules whose outputs the reverse pass may compute again
  rather than keep (``recomputable``): cheap, and the same bytes each time.
* ``COMPLEX[rule]``: how a rule of ``UFUNCS``, ``FUNCTIONS`` or ``JVPS`` takes complex values,
  which it is given only if declared here (else the core refuses them): ``HOLOMORPHIC``
  (``holomorphic``; an elementwise row's partials are then complex derivatives),
  a rule written for real values whose formulas hold for complex ones, the function being
  complex-differentiable or linear with real coefficients; the core conjugates the
  cotangents around such a ``back``, whose formulas give the transpose, not the adjoint.
  ``CONVENTION`` (``complex_aware``): a rule written for complex values in mutad's convention
  (docs/guide.md, "Complex numbers and the FFT": a cotangent is dL/dx + i dL/dy), given them as
  they are.
* ``USER_RULES``: the rules attached with ``mutad.adjoint`` and ``mutad.inplace_adjoint``
  (``custom``; the SciPy wrappers are such adjoints too). What a pure rule's ``back``
  returns (a cotangent) and what its forward rule returns (a tangent) may be an array the
  rule keeps elsewhere (a global, an argument); the core copies it, never adopts it as a
  shadow or a tangent that later writes would change.
* ``COMPLEX_UFUNCS[ufunc] = (rule, jvp)``: for an elementwise ufunc that is not
  complex-differentiable (``np.conjugate``, ``np.absolute``), the ``CONVENTION`` rules that
  serve it when an operand is complex, in place of its partials.
* ``RULE_MODULES[library] = module``: the rule module to import when a differentiation starts
  and ``library`` has been imported, so that its rows are registered when a user uses it
  (``{"scipy.special": "mutad.scipy.special"}``).

Rules are declared with one helper per shape of rule (CONTRIBUTING.md shows each):
``elementwise`` (a ufunc, both modes), ``defrule`` (a pure rule with a pullback, ``leading=``
padding the settings' cotangents) and ``defjvp`` (its forward rule, declared beside it),
``deflinear`` and ``defmultilinear`` (the forward rule of a function linear in some arguments
jointly, or in each separately), ``definplace`` (a function that writes into an argument),
``defcomposite`` (a function NumPy writes in Python), ``recomputable`` and
``nondifferentiable``.
"""

import functools

from .errors import ComplexInputError, UnsupportedOperationError, function_name

UFUNCS = {}
FUNCTIONS = {}
INPLACE = {}
NONDIFF = set()
JVPS = {}
COMPOSITES = {}
METHODS = {}
ROUTES = {}
RECOMPUTABLE = set()
COMPLEX = {}
USER_RULES = set()
COMPLEX_UFUNCS = {}
HOLOMORPHIC = "holomorphic"
CONVENTION = "convention"
RULE_MODULES = {
    "scipy.special": "mutad.scipy.special",
    "scipy.linalg": "mutad.scipy.linalg",
    "scipy.signal": "mutad.scipy.signal",
    "scipy.ndimage": "mutad.scipy.ndimage",
    "scipy.fft": "mutad.scipy.fft",
    "scipy.stats": "mutad.scipy.stats",
    "scipy.optimize": "mutad.scipy.optimize",
    "scipy.interpolate": "mutad.scipy.interpolate",
    "scipy.sparse": "mutad.scipy.sparse",
    "scipy.integrate": "mutad.scipy.integrate",
}


class ONE:
    """Marks a partial derivative that is exactly 1, so the cotangent passes through untouched."""


class NoClosedForm:
    """The partial derivative of an elementwise ufunc with respect to an input for which mutad
    has no formula (the order of a Bessel function, the parameters of an incomplete gamma or
    beta function). Differentiating with respect to that input raises, in the forward pass,
    rather than giving a wrong number; with the input held constant the other partials work."""

    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what

    def error(self, ufunc):
        name = "this function" if ufunc is None else function_name(ufunc)
        return UnsupportedOperationError(
            f"{name}: mutad has no derivative with respect to {self.what}, and that argument "
            "depends on the differentiated arguments. Pass it as a constant (a number, or an "
            "array not computed from the arguments).")

    def __call__(self, y, *xs):
        raise self.error(None)


def always(*values):
    return True


class ElementwiseRule:
    """Everything about one elementwise ufunc.

    ``partials[i](y, *xs)`` is the derivative of the output with respect to input ``i``
    (``ONE`` for 1, ``None`` for an input with no gradient). ``uses`` says what the partials
    read: ``"x"`` (inputs only), ``"y"`` (output only: computed before an in-place write is
    undone) or ``"xy"``; ``reads[i]`` lists the inputs partial ``i`` reads (default: all of them
    if ``"x"`` in uses), so a record keeps only those alive. ``inverse[position](t, others)`` undoes ``t = ufunc(...)`` in place when
    ``t`` was input ``position`` (``None`` where that cannot be undone); ``is_safe(others)`` says
    whether the inverse is exact enough for these other operands, and ``growth(t, others)``
    (None: 1) bounds how much it can amplify the relative error already in ``t``, evaluated
    before the write (``Tape.undo_for``).

    ``decide(*xs)`` (None: no decision) computes, when the operation runs and only if a gradient
    can flow, whatever discrete choice the partials depend on (which operand won, a sign, a
    quotient), as a small array; the partials then take it as one more argument,
    ``partial(y, *xs, decision)``. A pullback may read inputs restored by inversion, which are
    the original values up to rounding, not the same bytes: a tie or a zero would not survive.
    """

    __slots__ = ("partials", "uses", "reads", "inverse", "is_safe", "growth", "decide", "plans")

    def __init__(self, partials, uses="x", reads=None, inverse=(), is_safe=always, growth=None,
                 decide=None):
        self.partials = partials
        self.uses = uses
        everything = tuple(range(len(partials))) if "x" in uses else ()
        self.reads = reads if reads is not None else (everything,) * len(partials)
        self.inverse = inverse
        self.is_safe = is_safe
        self.growth = growth
        self.decide = decide
        # which inputs are traced -> (differentiated inputs, values read, their records' state)
        self.plans = {}


def elementwise(ufunc, *partials, uses="x", reads=None, inverse=(), is_safe=always, growth=None,
                decide=None):
    """Declare an elementwise ufunc (see :class:`ElementwiseRule`): one row serves both modes,
    every calling form (``out=``, augmented assignment, slice targets) and every order."""
    UFUNCS[ufunc] = ElementwiseRule(partials, uses, reads, inverse, is_safe, growth, decide)


def _enter(table, funcs, entry):
    """Enter ``entry(func)`` into ``table`` under each of ``funcs``."""
    for func in funcs:
        table[func] = entry(func)


def _entering(table, funcs, wrap=None):
    """The decorator that enters the function it decorates (``wrap(function, func)`` instead,
    if given) into ``table`` under each of ``funcs``, and returns it unchanged."""

    def register(function):
        _enter(table, funcs, lambda func: function if wrap is None else wrap(function, func))
        return function

    return register


def _callable(func):
    """The function a table key names: the key itself, or ``getattr(ufunc, method)`` for a
    ufunc method keyed ``(ufunc, method)``."""
    return getattr(*func) if type(func) is tuple else func


def padded(rule, leading=None):
    """``rule`` whose ``back`` returns cotangents for its leading positional arguments only
    (``leading`` of them, if given): the arguments a caller passes positionally after them
    (an axis, a shape, ``ord``) get ``None``, so the rule need not count them."""

    @functools.wraps(rule)
    def rule_of_all_arguments(*args, **kwargs):
        y, back = rule(*args, **kwargs)
        count = len(args)  # not the arguments: the pullback must not keep them alive

        def back_of_all_arguments(dy):
            cotangents = tuple(back(dy))
            if leading is not None and len(cotangents) != leading:
                name = getattr(rule, "__qualname__", repr(rule))
                raise TypeError(f"the rule {name} declares leading={leading} but "
                                f"its back returned {len(cotangents)} cotangents")
            return cotangents[:count] + (None,) * (count - len(cotangents))

        return y, back_of_all_arguments

    return rule_of_all_arguments


def defrule(*funcs, leading=None):
    """Declare the decorated pure rule ``rule(*args, **kwargs) -> (y, back)`` of ``funcs``.

    ``back(dy)`` returns one cotangent per positional argument (see ``FUNCTIONS``); with
    ``leading=n``, one for each of the first ``n`` only, the settings after them getting
    ``None`` however many the caller passed. Returns the rule undecorated, for reuse.
    """
    return _entering(FUNCTIONS, funcs, None if leading is None
                     else lambda rule, func: padded(rule, leading))


def defjvp(*funcs, leading=None):
    """Declare the decorated forward rule ``rule(tangents, *args, **kwargs) -> (y, dy)`` of
    ``funcs`` (see ``JVPS``). With ``leading=n`` only the first ``n`` positional arguments are
    differentiable: when none of them carries a tangent the function runs and its output carries
    none, without calling the rule. Returns the rule undecorated."""
    if leading is None:
        return _entering(JVPS, funcs)

    def of_leading(rule, func):
        call = _callable(func)

        @functools.wraps(rule)
        def jvp(tangents, *args, **kwargs):
            if all(t is None for t in tangents[:leading]):  # reached through a setting
                return call(*args, **kwargs), None
            return rule(tangents, *args, **kwargs)

        return jvp

    return _entering(JVPS, funcs, of_leading)


def definplace(*funcs):
    """Declare the decorated in-place handler of ``funcs``, which write into an argument (see
    ``INPLACE``)."""
    return _entering(INPLACE, funcs)


def recomputable(*funcs):
    """Declare that the pure rules of ``funcs`` compute their outputs at about the cost of
    writing them, the same bytes each time: the reverse pass may compute such an output again
    rather than keep it (see ``recompute``)."""
    RECOMPUTABLE.update(FUNCTIONS[func] for func in funcs)


def defcomposite(*funcs):
    """Declare the decorated composition of ``funcs`` (see ``COMPOSITES``)."""
    return _entering(COMPOSITES, funcs)


def holomorphic(*funcs):
    """Declare that the rules of ``funcs`` hold as written for complex values (see
    ``COMPLEX``): complex-differentiable functions, and those linear with real coefficients."""
    _declare_complex(funcs, HOLOMORPHIC)


def complex_aware(*funcs):
    """Declare that the rules of ``funcs`` are written for complex values in mutad's
    convention (see ``COMPLEX``)."""
    _declare_complex(funcs, CONVENTION)


def _declare_complex(funcs, kind):
    for func in funcs:
        rules = [table[func] for table in (UFUNCS, FUNCTIONS, JVPS, COMPOSITES, INPLACE)
                 if func in table]
        if not rules:
            raise KeyError(f"{func!r} has no rule to declare complex")
        for rule in rules:
            COMPLEX[rule] = kind


def complex_ufunc(ufunc, rule, jvp):
    """Declare the ``CONVENTION`` rules of ``ufunc`` for complex operands (see
    ``COMPLEX_UFUNCS``)."""
    COMPLEX_UFUNCS[ufunc] = (rule, jvp)
    COMPLEX[rule] = COMPLEX[jvp] = CONVENTION


def complex_among(items):
    """Whether a complex array or number is among ``items`` (one level into sequences)."""
    for x in items:
        if type(x) in (list, tuple):
            if any(_complex(e) for e in x):
                return True
        elif _complex(x):
            return True
    return False


def _complex(x):
    return type(x) is complex or getattr(getattr(x, "dtype", None), "kind", None) == "c"


def check_complex(name, rule):
    """Refuse complex values for a rule not declared to take them (``COMPLEX``); else say how
    it takes them."""
    kind = COMPLEX.get(rule)
    if kind is None:
        raise ComplexInputError(
            f"{name} was given complex values, and mutad has no complex rule for it yet (its "
            "rule is written for real values and would give a wrong gradient). Compute it "
            "from functions mutad differentiates for complex values, work with the real and "
            "imaginary parts (z.real, z.imag) as real arrays, or give it a rule with "
            "mutad.adjoint.")
    return kind


def nondifferentiable(*funcs):
    """Declare ``funcs`` (functions or ufuncs) to have outputs that carry no gradient."""
    NONDIFF.update(funcs)


def _tangent_or_zero(arg, tangent):
    """A linear operand's tangent; zeros where it carries none (a sequence: item by item)."""
    if type(arg) in (list, tuple):
        items = tangent if tangent is not None else [None] * len(arg)
        return type(arg)(_tangent_or_zero(a, t) for a, t in zip(arg, items, strict=True))
    if tangent is not None:
        return tangent
    import numpy as np

    return np.zeros(np.shape(arg), np.result_type(arg, 0.0))


def deflinear(*funcs, operands=(0,), offsets=()):
    """Declare the forward rules of ``funcs``, linear in the positional arguments ``operands``
    jointly (the rest are settings: axes, shapes, indices, conditions): the output's tangent is
    the function of the operands' tangents, zeros standing in for constant operands. Where the
    function returns a view of an operand, that is the same view of its tangent. The keyword
    arguments named in ``offsets`` (``initial=`` of a sum) add a constant, which stays out of
    the tangent."""

    def linear_jvp(func):
        call = _callable(func)

        def jvp(tangents, *args, **kwargs):
            y = call(*args, **kwargs)
            if all(tangents[i] is None for i in operands if i < len(args)):
                return y, None
            moved = [_tangent_or_zero(a, tangents[i]) if i in operands else a
                     for i, a in enumerate(args)]
            return y, call(*moved, **{k: v for k, v in kwargs.items() if k not in offsets})

        return jvp

    _enter(JVPS, funcs, linear_jvp)


def defmultilinear(*funcs, operands=None):
    """Declare the forward rules of ``funcs``, linear in each of the positional arguments
    ``operands`` separately (all of them if None): the product rule, one term per operand that
    carries a tangent."""

    def multilinear_jvp(func):
        call = _callable(func)

        def jvp(tangents, *args, **kwargs):
            y = call(*args, **kwargs)
            dy = None
            for i, t in enumerate(tangents):
                if t is None or (operands is not None and i not in operands):
                    continue
                term = call(*args[:i], t, *args[i + 1:], **kwargs)
                dy = term if dy is None else dy + term
            return y, dy

        return jvp

    _enter(JVPS, funcs, multilinear_jvp)
