"""The rules: one :class:`Rule` per function, and the helpers that declare them.

The core (``tracing``, ``forward``) looks a function's rules up here by the object it
intercepted and knows nothing else about them. Rules live in ``mutad/rules/``, one module per
family, and in ``mutad/scipy/``.

``RULES[key]`` is everything mutad knows about differentiating one function: its
:class:`Rule`. ``key`` is what the core intercepts or a user calls: a NumPy function, a ufunc,
a ufunc method ``(ufunc, method)`` (``(np.add, "at")``), a SciPy function, a method of a
library's class ``(cls, name)``, or a function decorated with ``mutad.adjoint``. A Rule is a
small object whose facets are all optional (None, or False for the flags); a function has the
ones that apply to it:

* ``elementwise``: an :class:`ElementwiseRule` (``elementwise``), for a ufunc; out-of-place
  calls, ``out=``, augmented assignment and slice targets all use it through the core's one
  in-place path, in both modes. The common case: one row per ufunc.
* ``reverse``: a pure rule ``rule(*args, **kwargs) -> (y, back)`` (``defrule``) for a function
  reached through ``__array_function__``, a ufunc method or a generalized ufunc (``matmul``).
  It receives plain arrays; ``back(dy)`` returns one cotangent per positional argument (a list
  of them for a sequence argument such as ``concatenate``'s), ``None`` where there is none. For
  several outputs ``dy`` is a tuple with zeros for outputs no gradient reached.
* ``forward``: forward mode's rule ``rule(tangents, *args, **kwargs) -> (y, dy)`` (``defjvp``,
  ``deflinear``, ``defmultilinear``) of a function with a ``reverse`` or ``inplace`` facet.
  ``tangents`` has one entry per positional argument: its tangent (an array of the argument's
  shape; a list of them for a sequence argument), or ``None`` where the argument carries none.
  ``dy`` is the tangent of ``y`` (a tuple for several outputs, ``None`` for an output without
  one). A rule computes with NumPy calls that dispatch (``np.*``, operators, methods,
  ``mutad.scipy``), never ``np.asarray`` or raw LAPACK, because its arguments may be traced by
  an enclosing reverse pass (``hvp``, ``hessian``). An elementwise row needs none: its
  ``partials`` serve both modes.
* ``inplace``: a handler ``handler(*args, **kwargs)`` (``definplace``) for a function that
  writes into one of its arguments (``np.add.at``, ``np.copyto``, ``np.put``); it receives
  traced arguments and records itself with the core's in-place helpers.
* ``composite``: for a function NumPy writes in Python out of functions mutad differentiates
  (``np.trapezoid``, ``np.cov``), a composition ``composite(*args, **kwargs)``
  (``defcomposite``) called with the traced arrays (or duals) themselves: every step it takes
  is recorded by its own rule, so reverse and forward mode and every order follow with no rule
  of its own. Beside a ``reverse`` and ``forward`` rule it serves the calls it takes and returns
  ``NotImplemented`` for those it leaves to them (np.pad's modes that compute the padding,
  its copying ones).
* ``nondifferentiable``: its outputs carry no gradient (``nondifferentiable``); it runs on
  plain values.
* ``shaped``: for a function that makes a new array of values read from none of its array
  arguments but those named (``np.zeros_like(a)`` and ``np.ones(n, like=a)`` read ``a``'s shape,
  dtype, layout or device alone; ``np.full_like(a, v)`` reads the values of ``v``), the
  ``(position, keyword)`` of each argument named, ``()`` for none (``shaped``). Where none of
  those carries a derivative, the engines run it as a function of constants, its result a
  constant (which a traced value written into it makes traced), not a value that depends on
  ``a`` (which a spectral or rank check would treat as differentiated).
* ``recomputable``: the reverse pass may compute the output of its ``reverse`` rule again
  rather than keep it (``recomputable``): cheap, and the same bytes each time.
* ``joins``: its first argument is a sequence of arrays (``concatenate``), in which a list or
  tuple holding traced values stands for the array NumPy makes of it
  (``np.concatenate([x, [1.0, a]])``): both engines stack it first (``defjoin``,
  ``allocation.joined_operands``).
* ``complex``: how its rules (every facet above that holds one) take complex values, which
  they are given only if declared (else the core refuses them): ``HOLOMORPHIC``
  (``holomorphic``; an elementwise row's partials are then complex derivatives), a rule written
  for real values whose formulas hold for complex ones, the function being
  complex-differentiable or linear with real coefficients; the core conjugates the cotangents
  around such a ``back``, whose formulas give the transpose, not the adjoint. ``CONVENTION``
  (``complex_aware``): rules written for complex values in mutad's convention (docs/guide.md,
  "Complex numbers and the FFT": a cotangent is dL/dx + i dL/dy), given them as they are.
* ``complex_rules``: ``(rule, jvp)``, for an elementwise ufunc that is not
  complex-differentiable (``np.conjugate``, ``np.absolute``): the ``CONVENTION`` rules that
  serve it when an operand is complex, in place of its partials (``complex_ufunc``).
* ``user``: its rules were attached by a user with ``mutad.adjoint`` or
  ``mutad.inplace_adjoint`` (``custom``; the SciPy wrappers are such adjoints too), which holds
  them (``pure_rule``, ``forward_rule``). What such a rule's ``back`` returns (a cotangent) and
  what its forward rule returns (a tangent) may be an array the rule keeps elsewhere (a global,
  an argument); the core copies it, never adopts it as a shadow or a tangent that later writes
  would change.
* ``route``: for a library function user code calls by its own name (``scipy.linalg.solve``,
  however it was imported), the function that stands in for it while a differentiation runs
  (``defroute``): an ``adjoint`` of it, which runs the original on plain arrays and its rule on
  traced ones. See ``allocation``.
* ``method``: for a key ``(cls, name)``, a rule ``rule(self, *args, **kwargs)`` that replaces
  method ``name`` of class ``cls`` (looked up on its instances and those of its subclasses)
  while a differentiation runs, when a traced array is among the call's arguments; otherwise
  the method runs as it is (``defmethod``). For methods of library objects user code calls by
  their own names (``scipy.stats.norm.logpdf(x, mu, sigma)``), which NumPy's protocols never
  reach. The rule computes with calls that dispatch, as a ``forward`` rule does. See
  ``allocation``.
* ``batched``: forward mode's rule for a batch of tangent directions, ``rule(tangents, *args,
  **kwargs) -> (y, dy)`` (``defbatched``), of a function with a ``forward`` facet: each
  tangent (and ``dy``) has a leading axis of length B, one direction per entry, and entry
  ``b`` of ``dy`` must be exactly what the ``forward`` rule gives for entry ``b`` of the
  tangents (up to the rounding of a product or sum computed in another order, which the rule
  says). ``dy`` may be ``ZERO_TANGENT`` (a new float buffer that depends on no argument). A
  rule returns ``NotImplemented`` for a call it does not cover (a setting, a shape), and the
  batched forward pass then stops and ``jacobian`` takes one direction per pass: a function
  without the facet never sees a batch (``forward.BATCH``; elementwise rows and indexing are
  the core's, and batch without one).

The core reads a facet with one dictionary lookup and one attribute read:
``RULES.get(np.sin, NO_RULE).elementwise``, ``NO_RULE`` being the Rule with no facet (what
``lookup(key)`` returns for a key without a Rule). ``rule_for(key)`` makes a key's Rule on first
use, which is how every helper below declares a facet.

The engines hold a rule object, not its function, when they ask how it takes complex values
(``check_complex``), whether it is a user's (``is_user_rule``) or recomputable
(``is_recomputable``): ``OWNER[rule object]`` is the Rule whose facet holds it, filled as the
facet is set. It is an index of another kind (by the callables the engines hold, not by the
functions they intercept), and holds no fact of its own: each answer is read from the Rule, so
the two cannot disagree. A rule object serves one function (declaring it for a second raises;
``defrule`` and ``defjvp`` with ``leading=`` wrap theirs per function), so it has one Rule.
The core's own rows, which no function has (``operations.CONSTANT``, ``elementwise.ASSIGNMENT``),
get a Rule without a key, in ``OWNER`` alone.

``RULE_MODULES[library] = module``, an index of libraries, not functions: the rule module to
import when a differentiation starts and ``library`` has been imported, so that its Rules are
declared when a user uses it (``{"scipy.special": "mutad.scipy.special"}``).

Rules are declared with one helper per shape of rule (CONTRIBUTING.md shows each), each filling
facets of ``RULES[func]``: ``elementwise`` (a ufunc, both modes), ``defrule`` (a pure rule with
a pullback, ``leading=`` padding the settings' cotangents) and ``defjvp`` (its forward rule,
declared beside it), ``deflinear`` and ``defmultilinear`` (the forward rule of a function
linear in some arguments jointly, or in each separately), ``definplace`` (a function that
writes into an argument), ``defcomposite`` (a function NumPy writes in Python),
``recomputable``, ``nondifferentiable``, ``holomorphic``, ``complex_aware`` and
``complex_ufunc``; ``defjoin``, ``defroute`` and ``defmethod`` for the allocation mode's
facets; ``user_rule`` for ``custom``. ``table(facet)`` lists the functions with a facet, and
``explain(fn)`` reads one Rule back: everything mutad knows of one function, in words.
"""

import functools
import inspect
import warnings

from .errors import (ComplexInputError, ConversionError, UnsupportedOperationError,
                     function_name, no_rule)

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
    "scipy.spatial": "mutad.scipy.spatial",
    # a device's SciPy (mutad.scipy._devices): its functions routed to the same rules
    "cupyx.scipy.linalg": "mutad.scipy.linalg",
    "cupyx.scipy.special": "mutad.scipy.special",
    "cupyx.scipy.signal": "mutad.scipy.signal",
    "cupyx.scipy.ndimage": "mutad.scipy.ndimage",
}

FACETS = ("elementwise", "reverse", "forward", "inplace", "composite", "nondifferentiable",
          "shaped", "recomputable", "joins", "complex", "complex_rules", "user", "route", "method",
          "batched")
"""A :class:`Rule`'s facets, in the order ``explain`` and ``repr`` name them."""
_FLAGS = ("nondifferentiable", "recomputable", "joins", "user")
_HELD = ("elementwise", "reverse", "forward", "inplace", "composite")
"""The facets holding a rule object the engines call (and ask about: ``OWNER``)."""

RULES = {}
"""``key -> Rule``: every function mutad knows something of (see the module's docstring)."""
OWNER = {}
"""``rule object -> Rule`` whose facet holds it (see the module's docstring)."""
VERSIONS = {"route": 0, "method": 0}
"""How many times a Rule's ``route`` or ``method`` was set: the allocation mode compares them
with the versions it installed, so it looks again only when a rule module declared more."""
SUBCLASS_VIEWS: dict = {}
"""``x.view(cls)`` of a traced or dual array for the ndarray subclasses mutad follows, by
``cls``: what stands for it, made of ``x[...]`` (``np.recarray``: ``rules.records``)."""


class Rule:
    """Everything mutad knows about differentiating one function (``RULES[key]``): its facets,
    each optional (see the module's docstring). Set facets through the declaration helpers, or
    directly (``RULES[f].forward = None``, as a test does); a Rule is never removed."""

    __slots__ = ("key", *FACETS)

    def __init__(self, key=None, **facets):
        set_ = object.__setattr__
        set_(self, "key", key)
        for name in FACETS:
            set_(self, name, False if name in _FLAGS else None)
        for name, value in facets.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if self is NO_RULE:
            raise TypeError("NO_RULE stands for a function without a Rule: give the function a "
                            "Rule of its own (registry.rule_for)")
        if name in _HELD and value is not None:
            _own(value, self)
        elif name == "complex_rules" and value is not None:
            for rule in value:
                _own(rule, self)
        elif name in VERSIONS:
            VERSIONS[name] += 1
        object.__setattr__(self, name, value)

    def facets(self):
        """``{facet: value}`` of the facets this Rule has (not None, not False)."""
        return {name: value for name in FACETS if _has(value := getattr(self, name))}

    def __repr__(self):
        key = "no key" if self.key is None else _key_name(self.key)
        return f"Rule({key}: {', '.join(self.facets()) or 'no facet'})"


NO_RULE = Rule()
"""The Rule of a function mutad knows nothing about: no facet (read only)."""


def _own(rule, entry):
    """Note that the Rule ``entry`` holds the rule object ``rule`` (``OWNER``), which must
    serve no other function: what the engines ask of it is read from one Rule."""
    held = OWNER.get(rule)
    if held is not None and held is not entry:
        raise ValueError(
            f"{getattr(rule, '__qualname__', rule)!r} is already a rule of {held!r}: declare a "
            f"rule object of its own for {entry!r} (defrule and defjvp with leading= wrap "
            "theirs per function; a maker function can return one per function)")
    OWNER[rule] = entry


def lookup(key):
    """The Rule of ``key``; ``NO_RULE`` if it has none."""
    return RULES.get(key, NO_RULE)


def pyfunc_ufunc_rule(ufunc):
    """The Rule that computes a ufunc ``np.frompyfunc`` made (a Python function over
    objects, one ufunc per call): ``np.frompyfunc``'s, whose ``composite(ufunc, *args,
    **kwargs)`` calls that function; ``NO_RULE`` for other ufuncs."""
    if ufunc.types != ["O" * ufunc.nin + "->" + "O" * ufunc.nout]:
        return NO_RULE
    import numpy
    return RULES.get(numpy.frompyfunc, NO_RULE)


def pyfunc_ufunc_method(ufunc, method):
    """The composite that computes ``getattr(ufunc, method)(*args, **kwargs)`` given that
    method and the arguments, for a ufunc ``np.frompyfunc`` made and a method that returns
    its results (``reduce``, ``accumulate``, ``reduceat``, ``outer``); None otherwise."""
    if method not in ("reduce", "accumulate", "reduceat", "outer"):
        return None
    return pyfunc_ufunc_rule(ufunc).composite


def rule_for(key):
    """The Rule of ``key``, made (with no facet) if it has none yet."""
    rule = RULES.get(key)
    if rule is None:
        rule = RULES[key] = Rule(key)
    return rule


def table(facet):
    """``{key: value}`` of the Rules that have ``facet``: what a table of it would hold."""
    return {key: value for key, rule in list(RULES.items())
            if _has(value := getattr(rule, facet))}


def _has(value):
    """Whether a facet's value says something (None and False say nothing)."""
    return value is not None and value is not False


def _key_name(key):
    """How a key of ``RULES`` reads: ``np.cumsum``, ``np.add.at``, ``rv_continuous_frozen.pdf``."""
    if type(key) is tuple:
        owner, name = key
        if isinstance(owner, type):
            return f"{owner.__qualname__}.{name}"
        return f"{function_name(owner)}.{name}"
    return function_name(key)


def is_user_rule(rule):
    """Whether the rule object ``rule`` is a user's (``mutad.adjoint``: facet ``user``)."""
    owner = OWNER.get(rule)
    return owner is not None and owner.user


def is_recomputable(rule):
    """Whether ``rule`` is the ``reverse`` rule of a function declared ``recomputable``."""
    owner = OWNER.get(rule)
    return owner is not None and owner.recomputable and owner.reverse is rule


def complex_kind(rule):
    """How the rule object ``rule`` takes complex values: ``HOLOMORPHIC``, ``CONVENTION``, or
    None (refused). The ``complex_rules`` of a ufunc are in the convention; every other rule
    of a Rule takes them as its facet ``complex`` says."""
    owner = OWNER.get(rule)
    if owner is None:
        return None
    pair = owner.complex_rules
    if pair is not None and (rule is pair[0] or rule is pair[1]):
        return CONVENTION
    return owner.complex


def user_rule(function, rule, kind):
    """Note the rule object ``rule`` that a user attached to ``function`` (a ``mutad.adjoint``,
    which holds it), taking complex values as ``kind`` says (None: refused)."""
    entry = rule_for(function)
    entry.user = True
    entry.complex = kind
    OWNER[rule] = entry


def defjoin(*funcs):
    """Declare ``funcs`` to join a sequence of arrays given as their first argument (facet
    ``joins``)."""
    for func in funcs:
        rule_for(func).joins = True


def defroute(original, stand_in):
    """Declare ``stand_in`` to stand in for the library function (or class) ``original`` while
    a differentiation runs (facet ``route``); returns ``stand_in``."""
    rule_for(original).route = stand_in
    return stand_in


def defmethod(cls, name, rule):
    """Declare ``rule`` to replace method ``name`` of ``cls`` while a differentiation runs and
    a traced array is among the call's arguments (facet ``method`` of key ``(cls, name)``)."""
    rule_for((cls, name)).method = rule
    return rule


class ONE:
    """Marks a partial derivative that is exactly 1, so the cotangent passes through untouched."""


class Operand:
    """A partial derivative that is input ``position`` itself (a product's: d(a b)/da is b):
    compiled code reads that input rather than calling the partial."""

    __slots__ = ("position",)

    def __init__(self, position):
        self.position = position

    def __call__(self, y, *xs):
        return xs[self.position]


class Constant:
    """A partial derivative that is the number ``value`` whatever the inputs (subtract's -1):
    compiled code takes the number rather than calling the partial."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __call__(self, y, *xs):
        return self.value


class Applied:
    """A partial derivative that is ``function`` of one value: input ``position``, or the
    output where ``position`` is None (sine's ``np.cos(x)``, expm1's ``np.exp(x)``): compiled
    code calls ``function`` on that value rather than the partial, one Python call less per
    step (a replay's small steps spend as long calling as computing)."""

    __slots__ = ("function", "position")

    def __init__(self, function, position=0):
        self.function = function
        self.position = position

    def __call__(self, y, *xs):
        return self.function(y if self.position is None else xs[self.position])


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


class Normwise:
    """A rule's ``growth`` (:class:`ElementwiseRule`) bounded from magnitudes of the operands
    reduced over their elements: ``measure(t, others)`` gives a tuple of numbers, each the
    largest of something over the elements (a smallest, negated), so that measures of parts of
    the operands combine by their maximum (a NaN in any part makes a NaN); ``bound(measures)``
    the growth from the measures of the whole. Called on whole operands it is the growth; the
    core measures the parts of a long write in its one pass over them, which also verifies
    the inverse element by element (``writes.ElementwiseInverse``). ``quiet(measures,
    dtype)`` (None: never asked), where the measures of a part say so, answers that the write
    of that part into an array of the float ``dtype`` raises no floating-point exception, which
    the core then need not find out from the values written (``writes._verify``)."""

    __slots__ = ("measure", "bound", "quiet")

    def __init__(self, measure, bound, quiet=None):
        self.measure = measure
        self.bound = bound
        self.quiet = quiet

    def __call__(self, t, others):
        return self.bound(self.measure(t, others))


class ElementwiseRule:
    """Everything about one elementwise ufunc.

    ``partials[i](y, *xs)`` is the derivative of the output with respect to input ``i``
    (``ONE`` for 1, ``None`` for an input with no gradient). ``uses`` says what the partials
    read: ``"x"`` (inputs only), ``"y"`` (output only: computed before an in-place write is
    undone) or ``"xy"``; ``reads[i]`` lists the inputs partial ``i`` reads (default: all of them
    if ``"x"`` in uses), so a record keeps only those alive. ``inverse[position](t, others)`` undoes ``t = ufunc(...)`` in place when
    ``t`` was input ``position`` (``None`` where that cannot be undone); ``is_safe(others)`` says
    whether the inverse is exact enough for these other operands, and ``growth(t, others)``
    (None: 1; a :class:`Normwise` where it can be measured a part at a time) bounds how much
    it can amplify the relative error already in ``t``, evaluated before the write
    (``Tape.undo_for``).

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
    rule_for(ufunc).elementwise = ElementwiseRule(partials, uses, reads, inverse, is_safe,
                                                  growth, decide)


def _enter(facet, funcs, entry):
    """Set ``facet`` of the Rule of each of ``funcs`` to ``entry(func)``."""
    for func in funcs:
        setattr(rule_for(func), facet, entry(func))


def _entering(facet, funcs, wrap=None):
    """The decorator that sets ``facet`` of the Rule of each of ``funcs`` to the function it
    decorates (``wrap(function, func)`` instead, if given), and returns it unchanged."""

    def register(function):
        _enter(facet, funcs, lambda func: function if wrap is None else wrap(function, func))
        return function

    return register


def _callable(func):
    """The function a key of ``RULES`` names: the key itself, or ``getattr(ufunc, method)`` for a
    ufunc method keyed ``(ufunc, method)``."""
    return getattr(*func) if type(func) is tuple else func


class _OfAllArguments:
    """The ``back`` of a :func:`padded` rule: ``back``'s cotangents, then None for each of the
    ``count`` arguments after them. An object of four fields, not a closure: a long program's
    records hold one each until the reverse pass."""

    __slots__ = ("back", "count", "rule", "leading", "unreached_as_none")

    def __init__(self, back, count, rule, leading):
        self.back = back
        self.count = count
        self.rule = rule
        self.leading = leading
        # (a back that takes None for outputs no gradient reached: engines.operations)
        self.unreached_as_none = getattr(back, "unreached_as_none", False)

    def __call__(self, dy):
        cotangents = tuple(self.back(dy))
        leading, count = self.leading, self.count
        if leading is not None and len(cotangents) != leading:
            name = getattr(self.rule, "__qualname__", repr(self.rule))
            raise TypeError(f"the rule {name} declares leading={leading} but "
                            f"its back returned {len(cotangents)} cotangents")
        return cotangents[:count] + (None,) * (count - len(cotangents))


def zero_derivative(*names):
    """Declare that the decorated rule's derivative in the arguments ``names`` (its parameters'
    names) is zero by mathematics (an integer-valued or piecewise-constant setting), so that its
    ``back`` may give them no cotangent (None) where a differentiation follows them; without
    this, such a None is refused (``dropped_derivative``): the default is no silent zero."""

    def declare(rule):
        rule.zero_derivative = frozenset(names)
        return rule

    return declare


@functools.cache
def _declared_zero(rule, skip):
    """The positions of ``rule``'s arguments (its parameters after the first ``skip``) its
    declaration (``zero_derivative``) says have a zero derivative, and the first position of
    its ``*args`` where the declaration names them (None otherwise)."""
    names = getattr(rule, "zero_derivative", None)
    inner = inspect.unwrap(rule)
    names = names or getattr(inner, "zero_derivative", None)
    if not names:
        return frozenset(), None
    parameters = list(inspect.signature(inner).parameters.values())[skip:]
    rest = next((i for i, p in enumerate(parameters)
                 if p.kind is inspect.Parameter.VAR_POSITIONAL and p.name in names), None)
    return frozenset(i for i, p in enumerate(parameters) if p.name in names), rest


def _zero(rule, position, skip):
    positions, rest = _declared_zero(rule, skip)
    return position in positions or rest is not None and position >= rest


def dropped_derivative(name, position, rules):
    """Refuse a rule that gave an argument a differentiation follows no derivative (a ``back``'s
    None cotangent, the None ``padded`` supplies; a forward rule's tangent it never read),
    unless one of ``rules`` declares that argument's derivative zero (``zero_derivative``):
    a setting a rule neither differentiates nor refuses (``savgol_filter``'s ``delta`` once)
    must not give a silent zero. ``rules``: ``(rule, skip)`` pairs, ``skip`` the parameters
    before the arguments (a forward rule's tangents)."""
    rules = [(r, skip) for r, skip in rules if r is not None]
    if any(_zero(r, position, skip) for r, skip in rules):
        return
    raise UnsupportedOperationError(
        f"{name}: mutad has no derivative with respect to its argument "
        f"{_argument_name(*rules[0], position)}, and that argument depends on the "
        "differentiated arguments. Pass it as a constant (a number, or an array not computed "
        "from the differentiated arguments).")


def _argument_name(rule, skip, position):
    """How an error names ``rule``'s argument at ``position``: its parameter's name where the
    rule's signature says, else its position."""
    try:
        parameters = list(inspect.signature(inspect.unwrap(rule)).parameters.values())[skip:]
    except (TypeError, ValueError):
        parameters = []
    if position < len(parameters) and parameters[position].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return repr(parameters[position].name)
    return f"at position {position}"


def padded(rule, leading=None, keywords=None):
    """``rule`` whose ``back`` returns cotangents for its leading positional arguments only
    (``leading`` of them, if given): the arguments a caller passes positionally after them
    (an axis, a shape, ``ord``) get ``None``, so the rule need not count them. ``keywords``:
    the keyword-only arguments the rule differentiates, each at the position the rule takes it
    in and with the value standing for its absence there (``{"min": (1, None)}`` for
    ``np.clip``; see ``arraylike.keywords_in_place``)."""

    @functools.wraps(rule)
    def rule_of_all_arguments(*args, **kwargs):
        y, back = rule(*args, **kwargs)
        # (the count, not the arguments: the pullback must not keep them alive)
        return y, _OfAllArguments(back, len(args), rule, leading)

    rule_of_all_arguments.leading = leading  # (arraylike.keywords_in_place)
    rule_of_all_arguments.keywords = keywords or {}
    return rule_of_all_arguments


def defrule(*funcs, leading=None, keywords=None):
    """Declare the decorated pure rule ``rule(*args, **kwargs) -> (y, back)`` of ``funcs``.

    ``back(dy)`` returns one cotangent per positional argument (facet ``reverse``); with
    ``leading=n``, one for each of the first ``n`` only, the settings after them getting
    ``None`` however many the caller passed. ``keywords``: keyword-only arguments the rule
    takes at a position, to differentiate them (``padded``). Returns the rule undecorated,
    for reuse.
    """
    return _entering("reverse", funcs, None if leading is None
                     else lambda rule, func: padded(rule, leading, keywords))


def defjvp(*funcs, leading=None):
    """Declare the decorated forward rule ``rule(tangents, *args, **kwargs) -> (y, dy)`` of
    ``funcs`` (facet ``forward``). With ``leading=n`` only the first ``n`` positional arguments are
    differentiable: when none of them carries a tangent the function runs and its output carries
    none, without calling the rule. Returns the rule undecorated."""
    if leading is None:
        return _entering("forward", funcs)

    def of_leading(rule, func):
        call = _callable(func)

        @functools.wraps(rule)
        def jvp(tangents, *args, **kwargs):
            for i in range(leading, len(tangents)):  # settings: no tangent read
                if tangents[i] is not None:
                    dropped_derivative(function_name(func), i, ((rule, 1),))
            if all(t is None for t in tangents[:leading]):  # reached through a setting
                return call(*args, **kwargs), None
            return rule(tangents, *args, **kwargs)

        return jvp

    return _entering("forward", funcs, of_leading)


class ZERO_TANGENT:
    """What a ``batched`` rule returns as ``dy`` for a float output that depends on no argument
    (a buffer ``zeros_like`` made): the core gives it a zero batch of tangents."""


def defbatched(*funcs):
    """Declare the decorated batched forward rule of ``funcs`` (facet ``batched``; see the
    module's docstring). Returns the rule undecorated."""

    def register(rule):
        for func in funcs:
            rule_for(func).batched = rule
        return rule

    return register


def definplace(*funcs):
    """Declare the decorated in-place handler of ``funcs``, which write into an argument (facet
    ``inplace``)."""
    return _entering("inplace", funcs)


def recomputable(*funcs):
    """Declare that the pure rules of ``funcs`` compute their outputs at about the cost of
    writing them, the same bytes each time: the reverse pass may compute such an output again
    rather than keep it (see ``recompute``)."""
    for func in funcs:
        rule = lookup(func)
        if rule.reverse is None:
            raise KeyError(f"{func!r} has no reverse rule to declare recomputable")
        rule.recomputable = True


def defcomposite(*funcs):
    """Declare the decorated composition of ``funcs`` (facet ``composite``)."""
    return _entering("composite", funcs)


def holomorphic(*funcs):
    """Declare that the rules of ``funcs`` hold as written for complex values (facet
    ``complex``): complex-differentiable functions, and those linear with real coefficients."""
    _declare_complex(funcs, HOLOMORPHIC)


def complex_aware(*funcs):
    """Declare that the rules of ``funcs`` are written for complex values in mutad's
    convention (facet ``complex``)."""
    _declare_complex(funcs, CONVENTION)


def _declare_complex(funcs, kind):
    for func in funcs:
        rule = lookup(func)
        if all(getattr(rule, facet) is None for facet in _HELD):
            raise KeyError(f"{func!r} has no rule to declare complex")
        rule.complex = kind


def complex_ufunc(ufunc, rule, jvp):
    """Declare the ``CONVENTION`` rules of ``ufunc`` for complex operands (facet
    ``complex_rules``)."""
    rule_for(ufunc).complex_rules = (rule, jvp)


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
    """Refuse complex values for a rule object not declared to take them (``complex_kind``);
    else say how it takes them."""
    kind = complex_kind(rule)
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
    for func in funcs:
        rule_for(func).nondifferentiable = True


def shaped(*funcs, values=()):
    """Declare that ``funcs`` make arrays whose values are read from none of their arguments
    but ``values``, the ``(position, keyword)`` of each (facet ``shaped``)."""
    for func in funcs:
        rule_for(func).shaped = tuple(values)


def value_arguments(entry, args, kwargs):
    """The arguments of a call of the function of the Rule ``entry`` whose values its result
    may depend on: those its facet ``shaped`` names, or all of them."""
    if entry.shaped is None:
        return (*args, *kwargs.values())
    return tuple(args[position] if position < len(args) else kwargs[keyword]
                 for position, keyword in entry.shaped
                 if position < len(args) or keyword in kwargs)


def _tangent_or_zero(arg, tangent, device=None):
    """A linear operand's tangent; zeros where it carries none (a sequence: item by item), on
    ``device`` (a device library's namespace: that of the other operands) if given."""
    if type(arg) in (list, tuple):
        items = tangent if tangent is not None else [None] * len(arg)
        return type(arg)(_tangent_or_zero(a, t, device)
                         for a, t in zip(arg, items, strict=True))
    if tangent is not None:
        return tangent
    import numpy as np

    if not hasattr(arg, "dtype") and not isinstance(arg, (int, float, complex)):
        arg = np.asarray(arg)  # (an object NumPy converts by its __array__)
    return (np if device is None else device).zeros(np.shape(arg), np.result_type(arg, 0.0))


def _device_among(args):
    """The namespace of the device library of the first device array among ``args`` (one level
    into lists and tuples), or None."""
    from .devices import device_of

    for a in args:
        for item in a if type(a) in (list, tuple) else (a,):
            found = device_of(item)
            if found is not None:
                return found
    return None


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
            device = None if all(tangents[i] is not None for i in operands if i < len(args)) \
                else _device_among(args)
            moved = [_tangent_or_zero(a, tangents[i], device) if i in operands else a
                     for i, a in enumerate(args)]
            # the same function of the tangents: its Python warnings (np.mean's "Mean of empty
            # slice") are the value's again, which NumPy's call above has issued once
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return y, call(*moved, **{k: v for k, v in kwargs.items() if k not in offsets})

        return jvp

    _enter("forward", funcs, linear_jvp)


def vanishes(tangent):
    """Whether ``tangent`` is a plain array of zeros (a constant's made in f: ``np.ones``):
    its term of a product rule is then zero, as a zero tangent contributes zero whatever it
    meets, where NumPy's product with an infinity or a NaN of the other operands would make it
    NaN, and every direction's tangent with it. A tangent an enclosing differentiation traces
    is never skipped (its derivative need not be zero). Its cost is below the term's."""
    import numpy as np

    return type(tangent) is np.ndarray and not tangent.any()


def _with_operands(call, args, kwargs, places, *values):
    """``call(*args, **kwargs)`` with the positional arguments at ``places`` replaced by
    ``values``: a product rule's term, as a function of its factors."""
    args = list(args)
    for i, value in zip(places, values, strict=True):
        args[i] = value
    return call(*args, **kwargs)


def defmultilinear(*funcs, operands=None, product=None):
    """Declare the forward rules of ``funcs``, linear in each of the positional arguments
    ``operands`` separately (all of them if None, but for strings and lists: einsum's
    subscripts): the product rule, one term per operand that carries a tangent. ``product``:
    how a term is taken, ``product(term, *factors)`` for ``term`` the function of the linear
    operands (``engines.products.product_times``); else the call with the tangent."""

    def multilinear_jvp(func):
        call = _callable(func)

        def jvp(tangents, *args, **kwargs):
            y = call(*args, **kwargs)
            dy = None
            linear = [i for i, x in enumerate(args) if (operands is None or i in operands)
                      and not isinstance(x, (str, list))]
            for i, t in enumerate(tangents):
                if t is None or i not in linear or vanishes(t):
                    continue
                if product is not None:
                    factors = [t if j == i else args[j] for j in linear]
                    term = product(functools.partial(_with_operands, call, args, kwargs, linear),
                                   *factors)
                else:
                    term = call(*args[:i], t, *args[i + 1:], **kwargs)
                dy = term if dy is None else dy + term
            return y, dy

        return jvp

    _enter("forward", funcs, multilinear_jvp)


# ----------------------------------------------------------------------------------------------
# What a Rule says about one function


def explain(fn, file=None):
    """Everything mutad knows about differentiating ``fn``, as readable text read from its
    one ``Rule`` (``RULES[fn]``): the facets it has, its reverse rule (where it is defined), its
    forward rule, its elementwise row and partial derivatives, how it writes in place and how
    those writes are undone, how it takes complex values, whether its output is recomputable,
    linear or multilinear, or a composite of other rules, the stand-in a SciPy or NumPy name is routed to, the methods of traced arrays
    that reach it, and, for a function mutad does not know, the error a call on traced arrays
    raises and how to give it a rule.

    ``fn`` is what user code calls: a NumPy function or ufunc (``np.cumsum``, ``np.add``), a
    ufunc method (``np.add.at``), an ndarray method (``np.ndarray.sort``), a SciPy function
    (``scipy.linalg.expm``), a method of a library's object (``scipy.stats.norm.logpdf``) or a
    function decorated with ``mutad.adjoint``. The rule modules of the libraries already imported
    are loaded first (``RULE_MODULES``), as a differentiation loads them, so that their Rules
    are declared. Returns the text; with
    ``file`` (``sys.stdout``) it is printed there too.

    >>> import numpy as np
    >>> from mutad.registry import explain
    >>> text = explain(np.cumsum)
    >>> print(text.splitlines()[0])
    np.cumsum: a NumPy function that mutad differentiates
    >>> "deflinear" in text, "holomorphic" in text
    (True, True)
    >>> print(explain(np.busday_count).splitlines()[0])
    np.busday_count: a NumPy function that mutad has no rule for
    """
    load_rule_modules()
    text = "\n".join(_Explanation(fn).lines())
    if file is not None:
        print(text, file=file)
    return text


def load_rule_modules():
    """Import the rule modules of the libraries in use (``RULE_MODULES``), as a differentiation
    does when it starts (``allocation``), so that their Rules are declared."""
    import importlib
    import sys

    for library, rules in RULE_MODULES.items():
        if library in sys.modules and rules not in sys.modules:
            importlib.import_module(rules)


_WIDTH = 100
_COMPLEX_KINDS = {
    HOLOMORPHIC: "holomorphic (registry.holomorphic): the rule's formulas hold for complex "
                 "values as written (complex-differentiable, or linear with real coefficients); "
                 "the core conjugates the cotangents around its back",
    CONVENTION: "written for complex values in mutad's convention (registry.complex_aware: a "
                "cotangent is dL/dx + i dL/dy), given them as they are",
}
_HOW_TO_ADD = (
    "in mutad, declare it in its family's module under mutad/rules/ (or mutad/scipy/ for SciPy) "
    "with one of registry's helpers: elementwise (a ufunc), defrule with defjvp, deflinear or "
    "defmultilinear (a pure function), definplace (one that writes into an argument), "
    "defcomposite (one written with functions mutad differentiates) or nondifferentiable "
    "(CONTRIBUTING.md, 'Adding a rule'); in user code, wrap it with mutad.adjoint and attach "
    "@f.rule and @f.jvp_rule (docs/guide.md, 'Custom rules')")


class _Explanation:
    """The facts of one ``explain``: a title, then one labelled paragraph per fact."""

    def __init__(self, fn):
        import numpy as np

        self.np = np
        self.fn = fn
        self.facts = []  # (label, text)
        self.known = False  # whether a Rule or traced arrays' methods know it
        self.name = "it"  # how the messages quoted name it

    def add(self, label, text):
        self.facts.append((label, text))

    def lines(self, indent=""):
        import textwrap

        title = self.describe()
        out = [indent + title]
        for label, text in self.facts:
            out += textwrap.wrap(f"{label}: {text}", _WIDTH - len(indent),
                                 initial_indent=indent + "  ",
                                 subsequent_indent=indent + "      ",
                                 break_on_hyphens=False, break_long_words=False)
        return out

    # what fn is -------------------------------------------------------------------------------

    def describe(self):
        """Look ``fn`` up, filling ``facts``; returns the title."""
        np, fn = self.np, self.fn
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, np.ufunc):  # np.add.at
            key = (owner, fn.__name__)
            self.name = f"np.{owner.__name__}.{fn.__name__}"
            self.rule_facts(key)
            self.unknown_facts(key, forward=False)
            return self.title(f"np.{owner.__name__}.{fn.__name__}", "a method of a NumPy ufunc")
        method = self.ndarray_method()
        if method is not None:
            self.method_facts(method)
            return self.title(f"np.ndarray.{method}", "a method of NumPy arrays")
        routed = self.routed_method()
        if routed is not None:
            return routed
        name = self.name = _spelling(fn)
        kind = ("a NumPy ufunc" if isinstance(fn, np.ufunc) else "a NumPy function"
                if _dispatched(fn) else "a SciPy function" if name.startswith("scipy.")
                else "a function")
        if isinstance(fn, np.ufunc) and not name.startswith("np."):
            name, kind = self.name, "a ufunc"
        self.rule_facts(fn)
        self.route_facts(fn)
        self.adjoint_facts(fn, "its own rules (mutad.adjoint)")
        self.alias_facts(fn)
        self.unknown_facts(fn, forward=True)
        return self.title(name, kind)

    def title(self, name, kind):
        return f"{name}: {kind} that mutad " + (
            "differentiates" if self.known else "has no rule for")

    def ndarray_method(self):
        """The name of the ndarray method ``fn`` is (``np.ndarray.sort``, ``x.sort``), or None."""
        np, fn = self.np, self.fn
        cls = getattr(fn, "__objclass__", None)
        if isinstance(cls, type) and issubclass(cls, np.ndarray):
            return fn.__name__
        if isinstance(getattr(fn, "__self__", None), np.ndarray) and not isinstance(fn, np.ufunc):
            return fn.__name__
        return None

    def routed_method(self):
        """The facts of a method of a library's object routed to a rule (facet ``method``)."""
        owner = getattr(self.fn, "__self__", None)
        name = getattr(getattr(self.fn, "__func__", None), "__name__", None)
        if owner is None or name is None or isinstance(owner, type):
            return None
        for cls in type(owner).__mro__:
            rule = lookup((cls, name)).method
            if rule is not None:
                self.known = True
                self.facets((cls, name))
                self.add("routed method", f"while a differentiation runs, {cls.__qualname__}."
                         f"{name} of its instances calls the rule {_where(rule)} (facet method, "
                         "registry.defmethod) when "
                         "a traced array is among its arguments, and the method itself "
                         "otherwise; the rule computes with calls that dispatch, so both modes "
                         "and every order follow, step by step, complex values included "
                         "where each step takes them")
                return self.title(f"{type(owner).__qualname__}.{name}",
                                  "a method of a library's object")
        return None

    # the Rule ---------------------------------------------------------------------------------

    def facets(self, key, name=None):
        """The first fact: the facets of ``key``'s Rule (spelled ``name``), if it has one."""
        found = lookup(key).facets()
        if found:
            self.add("facets", f"{', '.join(found)} (registry.RULES[{name or _key_name(key)}])")

    def rule_facts(self, key):
        np = self.np
        entry = lookup(key)
        self.facets(key, self.name)
        row, rule, handler = entry.elementwise, entry.reverse, entry.inplace
        composite, jvp = entry.composite, entry.forward
        rules = []  # (mode, rule) whose complex convention is told
        if row is not None:
            self.known = True
            self.add("elementwise", "an elementwise row (facet elementwise, registry.elementwise) "
                     "serves "
                     "both modes, every calling form and every order: the derivative is each "
                     "input's partial times its tangent or cotangent")
            self.partial_facts(row)
            self.ufunc_inplace_facts(row)
            rules.append(("row", row))
        if rule is not None:
            self.known = True
            self.add("reverse", f"a pure rule {self.pure_rule(rule)}")
            self.add("recomputable", "yes (registry.recomputable): the reverse pass may compute "
                     "its output again rather than keep it" if entry.recomputable else
                     "no: the reverse pass keeps the values its pullback reads")
            rules.append(("reverse", rule))
            if _takes_out(key):
                self.add("in place", "out=: the rule computes the result, which is then "
                         "assigned into out (out[...] = y), a write through the core's in-place "
                         "path that the reverse pass undoes (Tape.undo_for)")
        if handler is not None:
            self.known = True
            self.add("in place", f"writes into an argument: the handler {_where(handler)} "
                     "(facet inplace, registry.definplace) records the write with the core's "
                     "in-place helpers, which put the overwritten values back in the reverse pass"
                     + _doc(handler))
            rules.append(("in place", handler))
        if composite is not None:
            self.known = True
            steps = self.steps(composite)
            self.add("composite", f"differentiated through its steps: {_where(composite)} "
                     "(facet composite, registry.defcomposite) is called with the traced arrays or "
                     "duals themselves, and each step it takes is recorded by its own rule, so "
                     "reverse and forward mode and every order follow"
                     + (f"; it calls {', '.join(steps)}" if steps else ""))
            rules.append(("composite", composite))
        if entry.joins:
            self.add("joins", "its first argument is a sequence of arrays: a list or tuple in "
                     "it holding traced values or duals stands for the array NumPy makes of it, "
                     "which both engines stack first (facet joins, registry.defjoin)")
        if entry.nondifferentiable:
            self.known = True
            self.add("no gradient", "its outputs carry no gradient (facet nondifferentiable, "
                     "registry.nondifferentiable): it runs on plain values in both modes")
        if entry.shaped is not None:
            read = ", ".join(keyword for _, keyword in entry.shaped)
            self.add("shaped", "its array arguments give the result a shape, a dtype, a layout "
                     f"or a device alone{f', its values read from {read} alone' if read else ''}"
                     " (facet shaped, registry.shaped): where those carry no derivative, the "
                     "result is a constant")
        if jvp is not None:
            self.known = True
            self.add("forward", self.forward_rule(jvp))
            rules.append(("forward", jvp))
        elif row is None and (rule is not None or handler is not None):
            if composite is None:
                error = no_rule(key, forward=True, reverse_rule=True)
                self.add("forward", f"none: duals raise {type(error).__name__}: {error}")
        elif composite is not None and rule is None:
            self.add("forward", "through the composite's steps, as reverse mode")
        if entry.batched is not None:
            self.add("batched", f"a batch of tangent directions in one forward pass: the rule "
                     f"{_where(entry.batched)} (facet batched, registry.defbatched), which "
                     "jacobian and jacfwd use for many columns at once")
        if entry.complex_rules is not None:
            back, forward = entry.complex_rules
            self.add("complex operands", f"not complex-differentiable: complex operands take "
                     f"the rules {_where(back)} (reverse) and {_where(forward)} (forward) "
                     "(facet complex_rules, registry.complex_ufunc) in place of the partials")
            rules = [(mode, r) for mode, r in rules if mode != "row"]
            rules += [("complex reverse", back), ("complex forward", forward)]
        self.complex_fact("complex values", rules)

    def partial_facts(self, row):
        for i, partial in enumerate(row.partials):
            self.add(f"partial {i}", _partial(partial))
        self.add("partials read", {"x": "the inputs", "y": "the output (computed before an "
                                   "in-place write is undone)", "xy": "the inputs and the "
                                   "output"}.get(row.uses, row.uses)
                 + (f"; a decision is taken when it runs: {_where(row.decide)}"
                    if row.decide is not None else ""))

    def ufunc_inplace_facts(self, row):
        undo = []
        for i in range(len(row.partials)):
            inverse = row.inverse[i] if i < len(row.inverse) else None
            undo.append(f"into operand {i}, " + (
                "from a saved copy (no inverse)" if inverse is None else
                f"by the inverse {_partial(inverse)}"))
        safe = "" if row.is_safe is always else f" and {_partial(row.is_safe)} allows it"
        self.add("in place", "out=, augmented assignment (x += ...) and slice targets write "
                 "through the core's one in-place path; the reverse pass puts back what a write "
                 f"overwrote: {'; '.join(undo)} (an inverse serves under policy 'restore' where "
                 f"the drift it accumulates stays bounded{safe}, else a saved copy; "
                 "Tape.undo_for)")
        if row.growth is not None:
            self.add("error growth", f"an inversion's growth of relative error is bounded by "
                     f"{_partial(row.growth)}")

    def pure_rule(self, rule):
        import inspect

        inner = inspect.unwrap(rule)
        leading = _closure(rule).get("leading")
        text = (f"{_where(inner)} (facet reverse, registry.defrule): it runs on plain arrays and "
                "returns its value and a pullback")
        if leading is not None and inner is not rule:
            text += (f", whose back gives the cotangents of the first {leading} positional "
                     f"argument{'s' * (leading != 1)} (leading={leading}), the settings after "
                     f"{'them' if leading != 1 else 'it'} getting none")
        return text

    def forward_rule(self, jvp):
        qualname = getattr(jvp, "__qualname__", "")
        found = _closure(jvp)
        if qualname.startswith(deflinear.__name__ + "."):
            offsets = found.get("offsets") or ()
            return (f"linear (facet forward, registry.deflinear) in the positional arguments "
                    f"{tuple(found.get('operands', ()))} jointly: the tangent is the function "
                    "itself of their tangents, zeros standing in for constant ones"
                    + (f"; the keyword arguments {', '.join(offsets)} add a constant, which "
                       "stays out" if offsets else ""))
        if qualname.startswith(defmultilinear.__name__ + "."):
            operands = found.get("operands")
            which = "each positional argument" if operands is None else (
                f"each of the positional arguments {tuple(operands)}")
            return (f"multilinear (facet forward, registry.defmultilinear), linear in {which} "
                    "separately: the product rule, one term per argument with a tangent")
        import inspect

        inner = inspect.unwrap(jvp)
        text = f"the rule {_where(inner)} (facet forward, registry.defjvp)"
        leading = found.get("leading")
        if leading is not None and inner is not jvp:
            text += (f"; only the first {leading} positional argument"
                     f"{'s are' if leading != 1 else ' is'} differentiable (leading={leading})")
        return text

    def complex_fact(self, label, rules):
        if not rules:
            return
        kinds = {mode: complex_kind(rule) for mode, rule in rules}
        if len(set(kinds.values())) == 1:
            self.add(label, self.complex_kind(next(iter(kinds.values()))))
            return
        for mode, kind in kinds.items():
            self.add(f"{label} ({mode})", self.complex_kind(kind))

    def complex_kind(self, kind):
        if kind is not None:
            return _COMPLEX_KINDS.get(kind, str(kind))
        try:
            check_complex(self.name, None)
        except ComplexInputError as error:
            return f"refused: complex values raise {type(error).__name__} ({error})"
        return "refused"

    def steps(self, function):
        """The functions with a Rule that ``function`` calls by name (``np.cumsum``)."""
        np = self.np
        found = []
        for value in _referenced(function, np):
            if _has_rule(value) and value is not self.fn:
                name = function_name(value)
                if name not in found:
                    found.append(name)
        return found

    # routes, custom rules, methods -------------------------------------------------------------

    def route_facts(self, fn):
        stand_in = lookup(fn).route
        if stand_in is None:
            return
        self.known = True
        self.add("routed", f"while a differentiation runs, user code's name for it (however "
                 "imported) is bound to a stand-in (facet route, registry.defroute): "
                 f"{_kind_of(stand_in)}"
                 + ("" if hasattr(stand_in, "pure_rule") else _doc(stand_in)))
        if not self.adjoint_facts(stand_in, "the stand-in's rules"):
            inner = getattr(stand_in, "original", None) is not None and getattr(
                stand_in, "fn", None)
            if inner:
                steps = self.steps(inner)
                self.add("composite", "the stand-in runs SciPy's function on plain arrays and "
                         f"{_where(inner)} on traced ones or duals: steps mutad differentiates, "
                         "so both modes and every order follow"
                         + (f"; it calls {', '.join(steps)}" if steps else ""))
            else:
                self.add("modes", "the stand-in runs the original on plain arrays and handles "
                         "traced arrays and duals itself (read its docstring above)")

    def adjoint_facts(self, obj, whose):
        """The facts of an ``Adjoint`` (``mutad.adjoint``, SciPy's wrappers); whether it is one."""
        if not hasattr(obj, "pure_rule") or not hasattr(obj, "forward_rule"):
            return False
        import inspect

        self.known = True
        pure, forward = obj.pure_rule, obj.forward_rule
        self.add("reverse", f"{whose}: the pure rule {_where(inspect.unwrap(pure))}"
                 if pure is not None else f"{whose}: none attached yet (traced arrays raise "
                 "UnsupportedFunctionError)")
        self.add("forward", f"the rule {_where(inspect.unwrap(forward))}" if forward is not None
                 else "none attached: duals raise UnsupportedFunctionError (attach one with "
                 "@f.jvp_rule)")
        writes = getattr(obj, "writes", None)
        if writes is not None:
            self.add("in place", f"writes into its positional arguments {tuple(writes)} "
                     "(mutad.inplace_adjoint): its rule restores them in its back")
        partials = getattr(obj, "partials", None)
        if partials is not None:
            for i, partial in enumerate(partials):
                self.add(f"partial {i}", _partial(partial))
        self.complex_fact("complex values", [(mode, r) for mode, r in
                                             (("reverse", pure), ("forward", forward))
                                             if r is not None])
        return True

    def alias_facts(self, fn):
        """The methods of traced and dual arrays that call ``fn`` (``x.cumsum()``)."""
        np = self.np
        names = []
        for cls, name, method in _tracer_methods():
            if name.startswith("_"):
                continue
            if any(value is fn for value in _referenced(method, np)):
                names.append(f"x.{name}()")
        if names:
            self.add("methods", f"{', '.join(sorted(set(names)))} of traced and dual arrays "
                     "call it")

    def method_facts(self, name):
        np = self.np
        found = [(cls, method) for cls, n, method in _tracer_methods() if n == name]
        if not found:
            self.add("on traced arrays", f"traced and dual arrays have no method {name}: "
                     f"x.{name}(...) raises AttributeError. Call a NumPy function mutad "
                     "differentiates instead")
            self.add("to add a rule", "give ArrayMethods (mutad/engines/arraylike.py) a method written "
                     "with NumPy functions that dispatch, as its others are")
            return
        self.known = True
        for cls, method in found:
            calls = [value for value in _referenced(method, np)
                     if _has_rule(value) or _route(value) is not None]
            self.add(f"{cls.__qualname__}.{name}", f"{_where(method)}" + _doc(method)
                     + _body(method))
            for value in calls:
                self.add("it calls", function_name(value))
                self.facts += [("  " + label, text) for label, text in
                               _sub_facts(value)]

    def unknown_facts(self, key, forward):
        if self.known:
            return
        np = self.np
        if isinstance(key, np.ufunc) or type(key) is tuple or _dispatched(key):
            error = no_rule(key)
            self.add("on traced arrays", f"NumPy hands the call to mutad, which raises "
                     f"{type(error).__name__}: {error}")
            if forward:
                error = no_rule(key, forward=True)
                self.add("on duals (forward mode)", f"{type(error).__name__}: {error}")
        else:
            self.add("on traced arrays", "NumPy's protocols do not reach it, so mutad does not "
                     "see the call: it runs as Python code on the traced arrays, the NumPy "
                     "calls it makes are differentiated by their own rules, and where it "
                     "converts them to plain arrays (np.asarray, compiled code) the user gets "
                     f"ConversionError ({_first_sentence(ConversionError)})")
        self.add("to add a rule", _HOW_TO_ADD)


def _sub_facts(fn):
    """The facts ``explain`` gives of ``fn``, for a method that calls it."""
    explanation = _Explanation(fn)
    explanation.describe()
    return [(label, text) for label, text in explanation.facts
            if label not in ("methods", "to add a rule")]


def _spelling(fn):
    """How a user spells ``fn``: ``function_name``, or for a function of a library's private
    module (``scipy.linalg._matfuncs.expm``) the shortest public module that holds it
    (``scipy.linalg.expm``)."""
    import sys

    name, short = function_name(fn), getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str) or not isinstance(short, str) or module.startswith("numpy"):
        return name
    if not any(part.startswith("_") for part in module.split(".")):
        return name
    top = module.partition(".")[0]
    holders = sorted((m for m, mod in list(sys.modules.items())
                      if m.partition(".")[0] == top
                      and not any(part.startswith("_") for part in m.split("."))
                      and getattr(mod, "__dict__", {}).get(short) is fn),
                     key=lambda m: (m.count("."), m))
    return f"{holders[0]}.{short}" if holders else name


def _dispatched(fn):
    """Whether NumPy hands a call of ``fn`` to traced arrays (``__array_function__``)."""
    return type(fn).__name__ == "_ArrayFunctionDispatcher" or hasattr(fn, "_implementation")


def _takes_out(fn):
    import inspect

    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _has_rule(value):
    """Whether ``value`` has a Rule with a rule or no gradient (not just a route)."""
    try:
        rule = RULES.get(value)
    except TypeError:  # unhashable
        return False
    return rule is not None and (rule.nondifferentiable or any(
        getattr(rule, facet) is not None for facet in _HELD))


def _route(value):
    try:
        return lookup(value).route
    except TypeError:  # unhashable
        return None


def _closure(function):
    """The names ``function``'s closure binds, and their values."""
    code = getattr(function, "__code__", None)
    cells = getattr(function, "__closure__", None) or ()
    if code is None:
        return {}
    found = {}
    for name, cell in zip(code.co_freevars, cells):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    return found


def _referenced(function, np):
    """The functions ``function`` refers to: its closure's, and ``np.<name>`` and the module's
    names read by its code and that of the functions defined in it."""
    import types

    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    if code is None:
        return []
    found = list(_closure(function).values())
    names = set()
    codes = [code]
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    namespace = getattr(function, "__globals__", {})
    for name in sorted(names):
        if name in namespace:
            found.append(namespace[name])
        # (NumPy's own attributes: ``vars``, not ``getattr``, which warns of names NumPy
        # deprecated, ``np.object``)
        if namespace.get("np") is np and name in vars(np):
            found.append(vars(np)[name])
        if "linalg" in names and name in vars(np.linalg):
            found.append(vars(np.linalg)[name])
    return [value for value in found if callable(value)]


def _tracer_methods():
    """``(class, name, function)`` for the methods the classes of traced and dual arrays
    define (``levels.Tracer``'s subclasses: ``ArrayMethods``, ``Traced``, ``Dual``)."""
    from .levels import Tracer

    found, classes = [], [Tracer]
    while classes:
        cls = classes.pop(0)
        classes.extend(cls.__subclasses__())
        for name, member in vars(cls).items():
            function = getattr(member, "fget", getattr(member, "__func__", member))
            if callable(function) and hasattr(function, "__code__"):
                found.append((cls, name, function))
    return found


def _where(obj):
    """``module.name (path:line)`` of a rule, from ``inspect``; ``path`` relative to the
    package's parent folder where it is mutad's."""
    import inspect
    import os

    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(
        obj).__qualname__
    module = getattr(obj, "__module__", None)
    label = f"{module}.{name}" if module else name
    try:
        path = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return label
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if path is not None and os.path.abspath(path).startswith(root + os.sep):
        path = os.path.relpath(path, root).replace(os.sep, "/")
    else:
        path = os.path.basename(path or "?")
    return f"{label} ({path}:{line})"


def _kind_of(stand_in):
    cls = type(stand_in)
    if cls.__module__.startswith("mutad") and not callable(getattr(stand_in, "__code__", None)) \
            and not hasattr(stand_in, "__code__"):
        return f"a {cls.__qualname__} ({cls.__module__}) wrapping it"
    return _where(stand_in)


def _doc(obj):
    first = _first_sentence(obj)
    return f"; its docstring: \"{first}\"" if first else ""


def _first_sentence(obj):
    import inspect

    doc = inspect.getdoc(obj) if not isinstance(obj, type) else obj.__doc__
    if not doc:
        return ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


def _body(method):
    """The first statements of ``method``'s source, after its docstring (up to three lines)."""
    import inspect

    try:
        lines = inspect.getsourcelines(method)[0]
    except (TypeError, OSError):
        return ""
    body, in_doc = [], False
    for line in lines[1:]:
        stripped = line.strip()
        if not body and not in_doc and stripped.startswith(('"""', "'''")):
            in_doc = not (len(stripped) > 3 and stripped.endswith(('"""', "'''")))
            continue
        if in_doc:
            in_doc = not stripped.endswith(('"""', "'''"))
            continue
        if stripped:
            body.append(stripped)
    if not body or len(body) > 3:
        return ""
    return f"; it runs: {' '.join(body)}"


_TREES = {}  # source file -> its parsed tree, for the formulas of lambdas


def _partial(partial):
    """How an elementwise row's partial derivative (or inverse) reads: 1, none, no closed form,
    the lambda's own source, or where its function is defined."""
    if partial is None:
        return "none (no gradient flows to this input)"
    if partial is ONE:
        return "1 (the cotangent passes through untouched)"
    if type(partial) is NoClosedForm:
        return f"no closed form (with respect to {partial.what}): differentiating it raises"
    if type(partial) is Operand:
        return f"input {partial.position} itself (registry.Operand)"
    if type(partial) is Constant:
        return f"the number {partial.value!r} (registry.Constant)"
    if type(partial) is Applied:
        function, position = partial.function, partial.position
        value = "y" if position is None else "x" if position == 0 else f"x{position}"
        if getattr(function, "__module__", None) == "numpy":  # a ufunc: np.cos
            return f"np.{function.__name__}({value}) (registry.Applied)"
        return f"{function.__name__}({value}) (registry.Applied: {_where(function)})"
    if type(partial) is Normwise:
        return (f"the measures {_where(partial.measure)}, bounded by {_where(partial.bound)} "
                "(registry.Normwise)")
    if getattr(partial, "__name__", None) == "<lambda>":
        source = _lambda_source(partial)
        if source:
            return source
    return _where(partial)


def _lambda_source(function):
    import ast
    import inspect

    code = function.__code__
    try:
        path = inspect.getsourcefile(function)
        if path not in _TREES:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            _TREES[path] = (source, ast.parse(source))
    except (TypeError, OSError, SyntaxError):
        return None
    source, tree = _TREES[path]
    positions = getattr(code, "co_positions", None)  # Python 3.11: columns tell lambdas apart
    columns = [col for line, _, col, _ in positions()
               if line == code.co_firstlineno and col] if positions else []
    lambdas = [node for node in ast.walk(tree)
               if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno]
    if columns:
        lambdas = [node for node in lambdas
                   if node.col_offset <= min(columns) < (node.end_col_offset or 0)
                   and not any(inner is not node and isinstance(inner, ast.Lambda)
                               and inner.col_offset <= min(columns) < (inner.end_col_offset or 0)
                               for inner in ast.walk(node))]
    if len(lambdas) != 1:
        return None
    return " ".join(ast.get_source_segment(source, lambdas[0]).split())
