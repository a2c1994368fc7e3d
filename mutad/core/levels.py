"""Levels: how differentiations nest, whatever their mode.

Every differentiation (a reverse-mode tape, a forward-mode run) takes the next number of
``LEVELS`` when it starts, so a later one, running inside an earlier one, has a greater level.
Its values (traced arrays, duals) are :class:`Tracer`\\ s and carry its level. An operation
whose operands belong to several differentiations is handled by the innermost one
(:func:`innermost`): values of the outer ones are its constants, which is what keeps a
derivative of one level from being confused with another's. The engines settle who handles a
mixed operation by comparing levels alone, never by asking for each other's types.

``ACTIVE`` holds the differentiations running in this thread, innermost last: threads
differentiate independently, and a value whose differentiation is no longer running has
escaped it (``escaped``).

This module knows nothing about arrays.
"""

import contextlib
import itertools
import threading

from .errors import EscapedTracerError, MutadError

LEVELS = itertools.count()
"""Every differentiation takes the next level: a later, inner one handles the operations that
mix its values with an outer one's."""


class _Active(threading.local):
    """The differentiations running in this thread, innermost last. Each has a ``level``,
    ``lift(y)`` (``y`` as a value it follows) and ``constant(y)`` (``y``, a value of the
    levels outside it, as its constant)."""

    def __init__(self):
        self.running = []
        # The errors refusing what NumPy would compute, made while a differentiation runs
        # (``refused``), until the call they were raised in has ended (``arguments.run``).
        self.refusals = []
        # What saves of traced values wrote to (``written``), until the outermost
        # differentiation of this thread has ended: a read of it is refused.
        self.written = []
        # The levels of the differentiations whose decorated function's rule (``mutad.adjoint``)
        # runs now on plain values, innermost last (``rule_running``).
        self.rules = []
        # The running lists set aside by blocks that run outside every differentiation of
        # this thread (a SciPy solver's run on plain numbers), innermost last.
        self.suspended = []


def refused(error):
    """``error``, made to refuse what NumPy or SciPy would have computed (a conversion, an
    operation or function mutad does not differentiate), noted for the end of the running
    differentiation: a program that catches it (``except Exception``) goes on along another
    path than NumPy's, which ``arguments.run`` does not let pass once it was raised. Every
    such error notes itself as it is made (``MutadError._refusal``)."""
    if ACTIVE.running:
        ACTIVE.refusals.append(error)
    return error


def handled(error):
    """``error``, caught by mutad itself to take another way that gives NumPy's result: not a
    refusal that the program went past."""
    refusals = ACTIVE.refusals
    if error in refusals:
        refusals.remove(error)


ACTIVE = _Active()
MutadError._note_refusal = staticmethod(refused)  # (errors made while one runs: noted)


WRAPPERS = set()
"""The classes whose objects stand for an array a differentiation traces and hold it (or the
next level's) as ``value``: each subclass of :class:`Tracer`, and the traced sparse matrices.
Told by class, not by a ``value`` attribute, which an object of the user's that NumPy converts
may have too (an Enum member, a parameter object with ``__array__``)."""

CARRIERS = set()
"""The classes of objects built of traced values that stand for no array (SciPy's tree of
traced points): a routed method given one takes its rule, which follows it or refuses."""


class Tracer:
    """What the values of every differentiation have in common: a ``level``."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        WRAPPERS.add(cls)


def carries_derivative(x):
    """Whether traced or dual ``x`` (or the value of an enclosing level it holds) depends on
    the differentiated arguments: not a constant (an array allocated in the function, or made
    from arrays made before it, ``allocation.Preexisting``) at every level."""
    while isinstance(x, Tracer):
        if not x.constant_here():
            return True
        x = x.value
    return False


def innermost(items, inner=None):
    """The tracer of the innermost level among ``items`` (inside lists and tuples too), or
    ``inner`` if none is deeper than it; None when there is none."""
    for x in items:
        if isinstance(x, Tracer):
            if inner is None or x.level > inner.level:
                inner = x
        elif type(x) in (list, tuple):
            inner = innermost(x, inner)
    return inner


def deeper(x, than):
    """Whether ``x`` belongs to a differentiation deeper than any ``than`` belongs to (either
    may be a plain value): one of ``x``'s values cannot be written into ``than``."""
    inner = innermost((x,))
    if inner is None:
        return False
    other = innermost((than,))
    return other is None or other.level < inner.level


@contextlib.contextmanager
def rule_running(level):
    """The block in which a decorated function's rule runs on the plain values of the
    differentiation of ``level`` (its forward pass, which may differentiate them itself:
    ``nesting``)."""
    ACTIVE.rules.append(level)
    try:
        yield
    finally:
        ACTIVE.rules.pop()


def nesting():
    """The running differentiations a differentiation starting now is nested in: every one,
    but inside a rule that runs on plain values (a user's rule whose forward pass calls
    ``mutad.gradient`` of them), those outside the one recording the rule alone. That one
    and those inside it are set aside while the new one runs (``set_aside``): the rule is given
    none of their values, and the new one's are plain to them, as its result is to the rule."""
    running = ACTIVE.running
    if not ACTIVE.rules:
        return running
    floor = ACTIVE.rules[-1]
    return [d for d in running if d.level < floor]


def set_aside():
    """Set aside what a differentiation starting now is not nested in (``nesting``): the
    running ones it is not, and the rules running (inside it, a differentiation it starts is
    nested in it). Returns what ``resume`` puts back when it ends."""
    if not ACTIVE.rules:
        return None
    aside = (list(ACTIVE.running), ACTIVE.rules)
    ACTIVE.running[:] = nesting()
    ACTIVE.rules = []
    return aside


def resume(aside):
    """Put back what ``set_aside`` set aside (the running ones as they were)."""
    if aside is not None:
        ACTIVE.running[:], ACTIVE.rules = aside


def running(level):
    """Whether the differentiation of ``level`` is running in this thread."""
    return any(d.level == level for d in ACTIVE.running)


def ended(x):
    """Whether ``x`` is a constant of a differentiation no longer running in this thread (kept
    in a cache by an earlier call): every engine then takes it as the plain array it holds."""
    return isinstance(x, Tracer) and not running(x.level) and x.constant_here()


def escaped(what, differentiation="the differentiation"):
    """The error for ``what`` (a traced array, a dual) used after ``differentiation`` (the
    one that created it) ended."""
    return EscapedTracerError(
        f"{what} was used outside {differentiation} that created it (it escaped through a "
        "global, a closure or an attribute, or a cache such as functools.lru_cache called "
        "with a differentiated value; or f handed it to another thread, a thread pool's "
        "map, where mutad does not follow it). Return values from the differentiated "
        "function instead of storing them, cache only what does not depend on the "
        "arguments, and compute in the thread that called mutad (map(g, parts) for "
        "executor.map(g, parts)).")
