"""Functions with rules of their own (``mutad.adjoint``, ``mutad.inplace_adjoint``; docs/guide.md,
"Custom rules").

A decorated function is called like any other; :func:`dispatch` decides, from the innermost of
its arguments' levels, whether the call runs plainly, under the forward-mode level of a dual
(its ``jvp_rule``), or recorded by the tape of a traced array (its ``rule``). It is the one
place that knows both engines.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from .engines import forward, operations
from .core.allocation import running_rule, writing_into
from .core.errors import InvalidArgumentError, UnsupportedFunctionError
from .core.levels import innermost, rule_running
from .core.registry import CONVENTION, user_rule

Rule = TypeVar("Rule", bound=Callable[..., Any])
"""A rule given to a decorated function: the decorators that attach it return it unchanged."""


def dispatch(adjoint, args, kwargs):
    """Call decorated ``adjoint`` on ``args``: plainly when no differentiation follows them,
    else in the mode of the innermost one among them (values of outer ones are its constants)."""
    inner = innermost((*args, *kwargs.values()))
    with running_rule():
        if inner is None:
            return adjoint.fn(*args, **kwargs)
        with rule_running(inner.level):  # (a gradient its rule takes: of none of inner's)
            if type(inner) is forward.Dual:
                return forward.apply_adjoint(adjoint, inner.level, args, kwargs)
            return adjoint.record(args, dict(kwargs))


class _Rules(threading.local):
    """The in-place rules running in this thread, innermost last: ``(adjoint, returned)``,
    ``returned`` collecting what the calls of ``adjoint`` made by that rule returned."""

    def __init__(self):
        self.running = []


RULES = _Rules()


def _positions(fn, names, what):
    parameters = list(inspect.signature(fn).parameters)
    unknown = [n for n in names if n not in parameters]
    if unknown:
        raise InvalidArgumentError(f"{what}={tuple(names)!r}: {fn.__qualname__} has no parameter "
                                   f"{', '.join(map(repr, unknown))}; its parameters are {parameters}.")
    return tuple(parameters.index(n) for n in names)


class Adjoint:
    """A function with a pure rule. Called with traced arguments it runs its rule; called with
    plain arrays it just runs. See :func:`mutad.adjoint`."""

    __name__: str  # and the wrapped function's other attributes: functools.update_wrapper

    complex_values: str | None = CONVENTION
    """How the rules attached take complex values (the facet ``complex`` of this function's
    ``registry.RULES`` entry, set as each rule is attached): a user's rules are given them as
    they are, in mutad's convention (docs/guide.md, "Complex numbers and the FFT"); None refuses
    them."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.pure_rule: Callable[..., Any] | None = None
        self.forward_rule: Callable[..., Any] | None = None

    def jvp_rule(self, rule: Rule) -> Rule:
        """Attach forward mode's rule ``rule(tangents, *args, **kwargs) -> (y, dy)``:
        ``tangents`` has one entry per positional argument (``None`` for one without a
        tangent), ``dy`` is the tangent of ``y``. It computes with NumPy calls that dispatch, as
        mutad's own forward rules do, so that a reverse pass can differentiate it again
        (``hvp``)."""
        self.forward_rule = rule
        self._declare(rule)
        return rule

    def rule(self, rule: Rule) -> Rule:
        """Attach ``rule(*args, **kwargs) -> (y, back)``; ``back(dy)`` returns one cotangent per
        positional argument (``None`` for one without a gradient: a None for an argument a
        differentiation follows is refused, not taken for a zero)."""
        self.pure_rule = rule
        self._declare(rule)
        return rule

    def _declare(self, rule):
        """What the core needs to know of an attached rule: whether it takes complex values,
        and that what it returns may be an array it keeps: the facets ``user`` and ``complex``
        of this function's Rule (``registry.user_rule``)."""
        user_rule(self, rule, self.complex_values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs and innermost(kwargs.values()) is not None:
            args, kwargs = self._positional(args, kwargs)
        return dispatch(self, args, kwargs)

    def _positional(self, args, kwargs):
        """``args`` and ``kwargs`` with the arguments given by keyword to parameters that take
        them by position too moved to the positions they name (``cube(x=x)`` is ``cube(x)``):
        the rule's ``back`` returns one cotangent per positional argument, so a traced one
        given by keyword gets its own. As they were where ``fn``'s signature does not bind them
        (the call's own error to come) or has none."""
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except (TypeError, ValueError):
            return args, kwargs
        return bound.args, bound.kwargs

    def record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call on arrays a reverse pass traces: recorded with its rule's pullback."""
        return operations.apply_function(self._name(), self._checked_rule(), args, kwargs)

    def _name(self):
        # A ufunc (scipy.special.dawsn) has a __name__ but no __qualname__.
        return (getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None)
                or repr(self.fn))

    def _checked_rule(self):
        if self.pure_rule is None:
            raise UnsupportedFunctionError(
                f"{self._name()} was given traced arrays but has no rule yet: attach one with "
                f"@{getattr(self.fn, '__name__', 'f')}.rule.")
        return self.pure_rule


class InplaceAdjoint(Adjoint):
    """A function that writes into its arguments, with an in-place rule. See
    :func:`mutad.inplace_adjoint`."""

    def __init__(self, fn: Callable[..., Any], writes: Sequence[str] | None = None) -> None:
        super().__init__(fn)
        parameters = list(inspect.signature(fn).parameters)
        self.writes = (tuple(range(len(parameters))) if writes is None
                       else _positions(fn, writes, "writes"))
        self.checkpointed: tuple[int, ...] = ()
        self.growth: Callable[..., float] | None = None

    @overload
    def rule(self, rule: Rule) -> Rule: ...

    @overload
    def rule(self, rule: None = None, *, checkpoint: Sequence[str] = (),
             growth: Callable[..., float] | None = None) -> Callable[[Rule], Rule]: ...

    def rule(self, rule: Rule | None = None, *, checkpoint: Sequence[str] = (),
             growth: Callable[..., float] | None = None) -> Rule | Callable[[Rule], Rule]:
        """Attach ``rule(*args) -> back``; usable as ``@f.rule`` or ``@f.rule(checkpoint=...)``.

        The rule runs the function on plain arrays and returns ``back(da, db, ...)``, which
        receives the shadows of the arguments (``None`` for untraced ones), accumulates into
        them in place and restores the arguments it can. Arguments named in ``checkpoint`` are
        saved by mutad before the call and copied back after ``back`` runs. ``growth(*args)``
        bounds the factor by which the restoration can amplify relative rounding errors already
        in the written arguments (a condition number, for a solve); mutad checkpoints instead
        whenever consecutive restorations of one buffer would amplify them too much.
        """
        if rule is None:
            def attach(rule: Rule) -> Rule:
                self.checkpointed = _positions(self.fn, checkpoint, "checkpoint")
                self.growth = growth
                self.pure_rule = rule
                self._declare(rule)
                return rule

            return attach
        self.pure_rule = rule
        self._declare(rule)
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = dispatch(self, writing_into(args, self.writes), kwargs)
        for adjoint, returned in reversed(RULES.running):
            if adjoint is self:  # called by its rule (of a nested differentiation too)
                returned.append(result)
                break
        return result

    def record(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call on arrays a reverse pass traces: recorded with its in-place rule."""
        return operations.apply_inplace_rule(
            self._name(), self._checked_rule(), args, kwargs, self.writes, self.checkpointed,
            self.growth, self._run_rule)

    def jvp_rule(self, rule: Rule) -> Rule:
        """Attach forward mode's rule ``rule(tangents, *args, **kwargs) -> result``. It calls
        the function on the arguments and updates the tangents of the arguments it writes in
        place (they are always arrays); ``tangents`` has ``None`` for read-only arguments
        without one. It returns what the function returned."""
        self.forward_rule = rule
        self._declare(rule)
        return rule

    def _run_rule(self, *values, **kwargs):
        """Run the rule, noting what the function returned when the rule called it. That is
        kept in this call's own list, so concurrent calls (other threads) do not mix."""
        returned = []
        RULES.running.append((self, returned))
        try:
            back = self.pure_rule(*values, **kwargs)
        finally:
            RULES.running.pop()
        return back, returned[-1] if returned else None


def adjoint(fn: Callable[..., Any]) -> Adjoint:
    """Decorate ``fn`` so it can be given a pure rule with ``@fn.rule``.

    The rule receives the plain arrays behind traced arguments and returns ``(y, back)``;
    ``back(dy)`` returns a tuple with one cotangent per positional argument. It also wraps a
    third-party function: ``gammaln = mutad.adjoint(scipy.special.gammaln)``.

    >>> import numpy as np, mutad
    >>> @mutad.adjoint
    ... def cube(x):
    ...     return x * x * x
    >>> @cube.rule
    ... def _cube_rule(x):
    ...     def back(dy):
    ...         return (3.0 * x * x * dy,)
    ...     return cube(x), back
    >>> mutad.gradient(lambda x: cube(x).sum(), np.array([1.0, 2.0]))
    (array([ 3., 12.]),)
    """
    return Adjoint(fn)


@overload
def inplace_adjoint(fn: Callable[..., Any], *,
                    writes: Sequence[str] | None = None) -> InplaceAdjoint: ...


@overload
def inplace_adjoint(fn: None = None, *, writes: Sequence[str] | None = None,
                    ) -> Callable[[Callable[..., Any]], InplaceAdjoint]: ...


def inplace_adjoint(fn: Callable[..., Any] | None = None, *, writes: Sequence[str] | None = None,
                    ) -> InplaceAdjoint | Callable[[Callable[..., Any]], InplaceAdjoint]:
    """Decorate ``fn``, which writes into some of its arguments, so it can be given an in-place
    rule with ``@fn.rule`` (see ``InplaceAdjoint.rule``).

    ``writes`` names the arguments ``fn`` may write into (default: all): mutad keeps the
    caller's original bytes of those, to give them back bit-for-bit.

    >>> import numpy as np, mutad
    >>> @mutad.inplace_adjoint(writes=("x",))
    ... def scale_(x, s):
    ...     x *= s
    >>> @scale_.rule
    ... def _scale_rule(x, s):
    ...     scale_(x, s)
    ...     def back(dx, ds):
    ...         x[...] /= s            # restore x to what it held before the call
    ...         if ds is not None:     # None where s is not differentiated
    ...             ds += np.vdot(dx, x)   # accumulate: d(s x)/ds = x
    ...         dx *= s                # dx is the cotangent of the new x: d(s x)/dx = s
    ...     return back
    >>> mutad.gradient(lambda x, s: (scale_(x, s), x.sum())[1], np.array([1.0, 2.0]), np.array(3.0))
    (array([3., 3.]), array(3.))
    >>> mutad.gradient(lambda x, s: (scale_(x, s), x.sum())[1], np.array([1.0, 2.0]), np.array(3.0),
    ...                argnums=0)
    array([3., 3.])
    """
    if fn is None:
        return lambda fn: InplaceAdjoint(fn, writes)
    return InplaceAdjoint(fn, writes)
