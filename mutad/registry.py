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
"""

UFUNCS = {}
FUNCTIONS = {}
INPLACE = {}
NONDIFF = set()


class ONE:
    """Marks a partial derivative that is exactly 1, so the cotangent passes through untouched."""


def always(*values):
    return True


class ElementwiseRule:
    """Everything about one elementwise ufunc.

    ``partials[i](y, *xs)`` is the derivative of the output with respect to input ``i``
    (``ONE`` for 1, ``None`` for an input with no gradient). ``uses`` says what the partials
    read: ``"x"`` (inputs only), ``"y"`` (output only: computed before an in-place write is
    undone) or ``"xy"``. ``inverse[position](t, others)`` undoes ``t = ufunc(...)`` in place when
    ``t`` was input ``position`` (``None`` where that cannot be undone); ``is_safe(others)`` says
    whether the inverse is exact enough for these other operands.
    """

    __slots__ = ("partials", "uses", "inverse", "is_safe")

    def __init__(self, partials, uses="x", inverse=(), is_safe=always):
        self.partials = partials
        self.uses = uses
        self.inverse = inverse
        self.is_safe = is_safe


def elementwise(ufunc, *partials, uses="x", inverse=(), is_safe=always):
    UFUNCS[ufunc] = ElementwiseRule(partials, uses, inverse, is_safe)


def defrule(*funcs):
    """Register the decorated ``rule(*args, **kwargs) -> (y, back)`` for each of ``funcs``."""

    def register(rule):
        for func in funcs:
            FUNCTIONS[func] = rule
        return rule

    return register


def definplace(*funcs):
    """Register the decorated in-place handler for each of ``funcs``."""

    def register(handler):
        for func in funcs:
            INPLACE[func] = handler
        return handler

    return register


def nondifferentiable(*funcs):
    NONDIFF.update(funcs)
