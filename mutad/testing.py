"""Proving derivatives right: every check compares mutad with one finite-difference stencil.

``directional_fd`` is the stencil: the fourth-order central difference of a function along a
direction ``v``, on copies of the arguments (aliasing kept), so its cost does not grow with the
arrays' sizes. A check draws ``v`` and a cotangent ``w`` for the outputs at random: reverse
mode ("rev") must give ``<vjp(w), v>`` and forward mode ("fwd") ``<w, jvp(v)>``, and both equal
the stencil's ``<w, d/dh f(x + h v)>``. Higher orders recurse, as HIPS autograd's checker does:
order 2 checks the derivatives of the pullback ``(x, w) -> vjp(w)`` and of the pushforward
``(x, v) -> jvp(v)`` the same way.

A check differentiates ``f`` as the function that also returns its float arguments as they are
after ``f``, with a random cotangent on them too: the reverse pass then starts with a non-zero
gradient in every argument buffer, and a rule that assigns where it must accumulate drops it.
Checks run on the caller's arrays and verify that each comes back bit-for-bit. They
differentiate through the public API only (``pullback``, ``jvp``, ``inplace_adjoint``).

The random directions and cotangents of a check with ``seed=s`` come from a stream of the
checker's own (``s`` with a spawn key of its own), never the numbers that
``np.random.default_rng(s)`` draws: a caller who draws ``x`` from that generator would
otherwise be checked along ``x`` itself, and along ``x`` a wrong derivative of a function
homogeneous in ``x`` (a product, a norm, a variance, a linear map) agrees with the right one,
both giving ``degree * f(x)``.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from .api import jvp, pullback
from .custom import Adjoint, inplace_adjoint
from .core.debug import user_frames
from .core.levels import handled
from .core.errors import (GradientCheckError, InvalidArgumentError, MutadError,
                          UnsupportedFunctionError)
from .core.trees import arrays_within, flatten, is_inexact_array, is_inexact_scalar
from .core.views import address, owner, wrapped

__all__ = ["directional_fd", "check_grads", "check_jvp", "check_transpose", "check_rule"]

MODES: tuple[Literal["rev", "fwd"], ...] = ("rev", "fwd")


# ----------------------------------------------------------------------------------------------
# The stencil


def directional_fd(f: Callable[..., Any], args: Sequence[Any], directions: Sequence[Any],
                   step: float = 1e-4) -> Any:
    """The derivative of ``f`` at ``args`` along ``directions`` by the fourth-order central
    difference: ``f``'s output structure, each float leaf holding its directional derivative
    (``None`` for the other leaves).

    ``directions`` has one entry per positional argument, of its structure (``None`` leaves, or
    ``None`` for a whole argument, are held fixed). ``f`` runs on float64 copies of the
    arguments that keep their aliasing, so it may write into them; the caller's are untouched.
    """
    points = _points(f, args, _direction_leaves(args, directions), step)
    return points[0][1](_combine([leaves for leaves, _ in points], step))


def _points(f, args, directions, step):
    """``f``'s output leaves and ``rebuild`` at ``args`` moved by ``k * step`` along the
    direction leaves, for k = -2, -1, 1, 2."""
    return [flatten(f(*_moved(args, directions, k * step))) for k in (-2, -1, 1, 2)]


def _combine(points, step):
    """``(8 (y₁ - y₋₁) - (y₂ - y₋₂)) / 12h`` leaf by leaf; ``None`` for leaves not float."""
    out = []
    for ys in zip(*points, strict=True):
        if _is_float(ys[0]):
            y = dict(zip((-2, -1, 1, 2), (np.asarray(y, _wide(y)) for y in ys), strict=True))
            out.append((8 * (y[1] - y[-1]) - (y[2] - y[-2])) / (12 * step))
        else:
            out.append(None)
    return out


def _moved(args, directions, h):
    """Copies of ``args`` (aliasing kept) moved by ``h`` along the direction leaves."""
    copies = _Copies(_leaves(args))
    moved = [x if v is None else x.__iadd__(h * v) if isinstance(x, np.ndarray)
             else _wide(x).type(x) + h * _wide(v).type(v)
             for x, v in zip(copies.leaves, directions, strict=True)]
    return _rebuilt(args, moved)


def _wide(x):
    """The double-precision dtype of a float or complex value (float64 or complex128)."""
    return np.dtype(np.complex128 if np.result_type(x).kind == "c" else np.float64)


class _Copies:
    """Double-precision copies of the arguments that keep their aliasing: views of one buffer
    in the arguments (the real part of a complex one too) are the same views of one copied
    buffer, so the finite differences see the same program mutad differentiated."""

    def __init__(self, leaves):
        buffers = {}
        self.leaves = []
        for x in leaves:
            if is_inexact_array(x):
                base = owner(x)
                if base.flags.c_contiguous or base.flags.f_contiguous:
                    if id(base) not in buffers:
                        buffers[id(base)] = base.reshape(-1, order="A").astype(_wide(base))
                    scale = _wide(base).itemsize // base.dtype.itemsize
                    x = np.ndarray(x.shape, _wide(x), buffers[id(base)],
                                   (address(x) - address(base)) * scale,
                                   tuple(s * scale for s in x.strides))
                else:
                    x = x.astype(_wide(x))
            elif isinstance(x, np.ndarray) or is_inexact_scalar(x) or arrays_within(x):
                x = copy.deepcopy(x)
            self.leaves.append(x)


# ----------------------------------------------------------------------------------------------
# The check, recursive in order


_CHECKER_KEY = int.from_bytes(b"mutad.testing", "big")
"""The spawn key that sets the checker's random numbers apart from a caller's."""


def _checker_rng(seed: int) -> np.random.Generator:
    """The generator of a check's random directions and cotangents for ``seed``: one of the
    checker's own, whose numbers are not those of ``np.random.default_rng(s)`` for any seed
    ``s`` (nor of a generator spawned from one), so they never repeat arguments a caller drew."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_CHECKER_KEY,)))


@user_frames
def check_grads(f: Callable[..., Any], *args: Any,
                policy: Literal["restore", "checkpoint"] = "restore", rtol: float | None = None,
                atol: float | None = None, step: float = 1e-4, seed: int = 0,
                symmetric: Sequence[int] = (), order: int = 1,
                modes: Sequence[Literal["rev", "fwd"]] | None = None) -> None:
    """Check mutad's derivatives of ``f`` at ``args`` against central finite differences.

    ``modes`` lists ``"rev"`` (reverse mode, under ``policy``) and ``"fwd"`` (forward mode).
    By default: reverse mode at ``order=1``; both at ``order=2``, forward mode wherever the
    function has forward rules (a decorated function may have a reverse rule only). ``order=2``
    checks the first derivatives, then, for each mode, the derivatives of ``(x, w) -> vjp(w)``
    or ``(x, v) -> jvp(v)`` in each mode: reverse over reverse, forward over reverse, reverse
    over forward (``hvp``) and forward over forward.

    Works for any output (a random cotangent reduces it to a scalar), raises
    ``GradientCheckError`` (a ``MutadError`` and an ``AssertionError``) on a mismatch, and
    returns ``None`` when the derivatives are right and every argument came back bit-for-bit.
    ``symmetric`` lists positional arguments (square matrices) perturbed only along symmetric
    directions (Hermitian ones for complex arguments), for functions such as Cholesky that read
    one triangle and have a symmetric (Hermitian) gradient.
    ``seed`` chooses the random directions and cotangents; they are drawn from a stream of the
    checker's own, never the numbers of ``np.random.default_rng(seed)``, so a check is never
    made along arguments drawn from that generator (where a wrong derivative of a homogeneous
    function passes).

    >>> import numpy as np, mutad
    >>> def f(a, b):
    ...     a[1:] *= b[:-1]
    ...     return np.sin(a)
    >>> mutad.check_grads(f, np.array([0.1, 0.2, 0.3]), np.array([1.5, -0.5, 2.0]))
    """
    if order not in (1, 2):
        raise InvalidArgumentError(f"check_grads(order={order!r}): order is 1 or 2.")
    if modes is not None and (not modes or set(modes) - set(MODES)):
        raise InvalidArgumentError(f"check_grads(modes={modes!r}): the modes are 'rev' and 'fwd'.")
    settings = _Settings(policy, rtol, atol, step, symmetric,
                         modes or (("rev",) if order == 1 else MODES), optional_fwd=modes is None)
    _check(f, args, settings, _checker_rng(seed), order)


@user_frames
def check_jvp(f: Callable[..., Any], *args: Any, rtol: float = 1e-6, atol: float = 1e-9,
              step: float = 1e-4, seed: int = 0, symmetric: Sequence[int] = (),
              order: int = 1) -> None:
    """Check ``mutad.jvp`` of ``f`` at ``args`` against central finite differences along a
    random tangent, and that every argument comes back bit-for-bit: ``check_grads`` in
    forward mode."""
    check_grads(f, *args, rtol=rtol, atol=atol, step=step, seed=seed, symmetric=symmetric,
                order=order, modes=("fwd",))


SINGLE = (np.dtype(np.float32), np.dtype(np.complex64))
"""Single precision, checked to looser tolerances."""


class _Settings:
    """What the recursion keeps: ``optional_fwd`` skips forward mode for a function without
    forward rules; ``restoration``, a list, collects how far each replay left the arguments
    from their values before it (``check_rule``)."""

    def __init__(self, policy, rtol, atol, step, symmetric, modes, optional_fwd=False,
                 restoration=None):
        self.policy, self.rtol, self.atol, self.step = policy, rtol, atol, step
        self.symmetric, self.modes = tuple(symmetric), tuple(modes)
        self.optional_fwd, self.restoration = optional_fwd, restoration

    def tolerances(self, leaves, depth):
        """(rtol, atol): looser for single precision and for derivatives of derivatives, whose
        finite differences difference values that are themselves derivatives."""
        if any(isinstance(x, (np.ndarray, np.inexact)) and x.dtype in SINGLE for x in leaves):
            rtol, atol = 2e-3, 1e-4
        else:
            rtol, atol = (1e-6, 1e-9) if depth == 0 else (1e-5, 1e-8)
        return (rtol if self.rtol is None else self.rtol), (atol if self.atol is None else self.atol)

    def inner(self, symmetric):
        return _Settings(self.policy, self.rtol, self.atol, self.step, symmetric, self.modes,
                         self.optional_fwd)


def _check(f, args, settings, rng, order, depth=0, name="f"):
    """Check ``f`` at ``args`` in each mode of ``settings``, then its derivatives to ``order``."""
    leaves = _leaves(args)
    before = [_fingerprint(x) for x in leaves]
    program = _returning_arguments(f, args, settings.restoration)
    directions = _directions(args, rng, settings.symmetric)
    analytic, w = {}, None
    if "rev" in settings.modes:
        y, back = pullback(program, *args, policy=settings.policy)
        w = _cotangents(y, rng)
        analytic["reverse mode"] = _dot(directions, _leaves(back(w)))
        _check_unchanged(leaves, before, f"after reverse mode of {name}")
    if "fwd" in settings.modes:
        try:
            y, dy = jvp(program, tuple(args), _rebuilt(args, directions))
        except UnsupportedFunctionError as error:  # a decorated function with a reverse rule only
            if not settings.optional_fwd:
                raise
            handled(error)
        else:
            w = _cotangents(y, rng) if w is None else w
            analytic["forward mode"] = _dot(flatten(w)[0], flatten(dy)[0])
            _check_unchanged(leaves, before, f"after forward mode of {name}")
    if w is None:
        raise UnsupportedFunctionError(f"{name} has no forward rule, and reverse mode was not "
                                       "asked for: nothing was checked.")
    points = [leaves_at for leaves_at, _ in _points(program, args, directions, settings.step)]
    weights = flatten(w)[0]
    numeric = _dot(weights, _combine(points, settings.step))
    magnitude = max(abs(_dot(weights, p)) for p in points)
    _check_unchanged(leaves, before, f"after the finite differences of {name}")
    rtol, atol = settings.tolerances(leaves, depth)
    for mode, value in analytic.items():
        allowed = atol + rtol * max(abs(value), abs(numeric), magnitude * 1e-3)
        if not abs(value - numeric) <= allowed:
            what = ("second-derivative" if depth else "gradient" if mode == "reverse mode"
                    else "jvp")
            raise GradientCheckError(
                f"{what} mismatch in {name} (policy={settings.policy!r}): {mode} gives "
                f"{value!r} along a random direction, finite differences give {numeric!r} "
                f"(difference {abs(value - numeric):.3g}, allowed {allowed:.3g}).")
    if order > 1:
        n = len(args)
        if "reverse mode" in analytic:
            _check(_pullback_of(f, n, settings.policy), (*args, _cotangents(w[0], rng)),
                   settings.inner(settings.symmetric), rng, order - 1, depth + 1,
                   f"the pullback of {name}")
        if "forward mode" in analytic:
            tangents = _rebuilt(args, _directions(args, rng, settings.symmetric))
            _check(_pushforward_of(f, n), (*args, *tangents),
                   settings.inner(settings.symmetric + tuple(n + i for i in settings.symmetric)),
                   rng, order - 1, depth + 1, f"the pushforward of {name}")


def _returning_arguments(f, args, restoration):
    """``f`` returning ``(f(*xs), the float leaves of xs after f)``. With ``restoration`` (a
    list), it first calls a probe whose pullback, run after every later record was undone,
    measures how far the replay left the argument arrays from their values at the call."""
    floats = [i for i, x in enumerate(_leaves(args)) if _is_float(x)]
    arrays = [i for i in floats if is_inexact_array(_leaves(args)[i])]
    probe = None if restoration is None else _restoration_probe(restoration)

    def program(*xs):
        leaves = _leaves(xs)
        if probe is not None:
            probe(*(leaves[i] for i in arrays))
        return f(*xs), [leaves[i] for i in floats]

    return program


def _restoration_probe(errors):
    @inplace_adjoint(writes=())
    def probe(*arrays):
        pass

    @probe.rule
    def _probe_rule(*arrays):
        originals = [a.copy() for a in arrays]

        def back(*shadows):
            errors.extend(_relative_error(a, o) for a, o in zip(arrays, originals, strict=True))

        return back

    return probe


def _pullback_of(f, n, policy):
    """``(*xs, w) -> vjp(w)`` of ``f`` at ``xs`` (``n`` positional arguments)."""
    def pullback_of_f(*xs_and_w):
        return pullback(f, *xs_and_w[:n], policy=policy)[1](xs_and_w[n])

    return pullback_of_f


def _pushforward_of(f, n):
    """``(*xs, *vs) -> jvp(vs)`` of ``f`` at ``xs`` (``n`` positional arguments)."""
    def pushforward_of_f(*xs_and_vs):
        return jvp(f, xs_and_vs[:n], xs_and_vs[n:])[1]

    return pushforward_of_f


# ----------------------------------------------------------------------------------------------
# Rule-level checks


def check_transpose(forward_rule: Callable[..., tuple[Any, Any]],
                    reverse_rule: Callable[..., tuple[Any, Callable[[Any], Sequence[Any]]]],
                    *args: Any, tangents: Sequence[Any] | None = None, rtol: float = 1e-9,
                    atol: float = 1e-9, seed: int = 0, **kwargs: Any) -> None:
    """Check that a primitive's forward and reverse rules are transposes of each other,
    ``<w, J t> = <t, Jᵀ w>``, and that both compute the same output.

    ``forward_rule(tangents, *args, **kwargs)`` returns ``(y, dy)`` (``tangents``: one per
    positional argument, ``None`` for one without); ``reverse_rule(*args, **kwargs)`` returns
    ``(y, back)``, ``back(w)`` one cotangent per positional argument. ``tangents`` defaults to
    random ones for every float array argument. The cotangent ``w`` is zero where an output is
    not finite (NaN cases), and terms where a tangent or cotangent is not finite are left out.
    Pins down the conventions at ties and kinks that finite differences cannot see. The rules
    are pure: the arguments must come back bit-for-bit.

    >>> import numpy as np
    >>> from mutad.testing import check_transpose
    >>> def square_jvp(tangents, x):
    ...     return x * x, 2 * x * tangents[0]
    >>> def square_vjp(x):
    ...     return x * x, lambda w: (2 * x * w,)
    >>> check_transpose(square_jvp, square_vjp, np.array([1.0, -2.0]))
    """
    rng = _checker_rng(seed)
    leaves = _leaves(args)
    before = [_fingerprint(x) for x in leaves]
    if tangents is None:
        tangents = tuple(_random(a, rng) if is_inexact_array(a) else None for a in args)
    y, dy = forward_rule(tuple(tangents), *args, **kwargs)
    _check_unchanged(leaves, before, "after the forward rule")
    y_reverse, back = reverse_rule(*args, **kwargs)
    outputs, dys = flatten(y)[0], flatten(dy)[0] if dy is not None else [None] * len(flatten(y)[0])
    for a, b in zip(outputs, flatten(y_reverse)[0], strict=True):
        if not np.array_equal(a, b, equal_nan=np.result_type(a).kind in "fc"):
            raise GradientCheckError("the forward and reverse rules compute different outputs.")
    ws = [np.where(np.isfinite(o), _random(o, rng), 0.0) if _is_float(o) else None
          for o in outputs]
    cotangents = back(flatten(y)[1](ws) if isinstance(y, (tuple, list)) else ws[0])
    _check_unchanged(leaves, before, "after the reverse rule")
    forward = _finite_dot(zip(ws, dys, strict=True))
    reverse = _finite_dot(_pairs(tuple(tangents), tuple(cotangents)))
    if any(np.result_type(o) in SINGLE for o in outputs):
        rtol = max(rtol, 1e-5)
    if not abs(forward - reverse) <= atol + rtol * max(abs(forward), abs(reverse)):
        raise GradientCheckError(
            f"the rules are not transposes: <w, J t> = {forward!r} by the forward rule, "
            f"<t, Jᵀ w> = {reverse!r} by the reverse rule.")


def check_rule(f: Adjoint, *args: Any, restore_rtol: float = 1e-8, rtol: float | None = None,
               atol: float | None = None, seed: int = 0, symmetric: Sequence[int] = ()) -> float:
    """Prove the rule of a ``mutad.adjoint`` or ``mutad.inplace_adjoint`` function right.

    For a pure rule, its ``y`` must equal the function's own output. Then, for the arguments
    and for each aliased variant (every pair of float array arguments of one shape passed as
    one buffer; a rule may refuse that with a ``MutadError``): the forward rule, if it has one
    (``@f.jvp_rule``), in forward mode; the rule in reverse mode under both policies, the
    gradient against finite differences (with the argument shadows seeded non-zero, so
    ``back`` must accumulate, not assign), every argument put back by the replay bit-for-bit
    under ``policy="checkpoint"`` and within ``restore_rtol`` (relative) by the rule's own
    restoration. ``symmetric`` is as for ``check_grads``. Returns the worst relative
    restoration error seen.

    >>> import numpy as np, mutad
    >>> from mutad.testing import check_rule
    >>> @mutad.inplace_adjoint(writes=("a",))
    ... def add_vecs_(a, b):
    ...     a += b
    ...     return a
    >>> @add_vecs_.rule
    ... def _add_vecs_rule(a, b):
    ...     add_vecs_(a, b)
    ...     def back(da, db):
    ...         if a is b:
    ...             a[...] *= 0.5      # add_vecs_(a, a) doubled a
    ...         else:
    ...             a[...] -= b
    ...         db += da
    ...     return back
    >>> check_rule(add_vecs_, np.array([0.5, 1.5]), np.array([2.0, -1.0])) < 1e-15
    True
    """
    if getattr(f, "pure_rule", None) is None:
        raise InvalidArgumentError("check_rule takes a function decorated with mutad.adjoint or "
                                   "mutad.inplace_adjoint that has a rule attached.")
    if hasattr(f, "writes"):  # in place: the arrays it writes are its outputs
        def program(*values):
            f(*values)
            return tuple(values[i] for i in f.writes
                         if i < len(values) and _is_float(values[i]))
    else:
        program = f
        _check_output(f, args)

    checks = ([("fwd", None)] if f.forward_rule is not None else []) + [
        ("rev", "restore"), ("rev", "checkpoint")]
    worst = 0.0
    for variant in [args, *_aliased_variants(args)]:
        for mode, policy in checks:
            restoration: list[float] | None = [] if mode == "rev" else None
            settings = _Settings(policy, rtol, atol, 1e-4, symmetric, (mode,),
                                 restoration=restoration)
            try:
                _check(program, variant, settings, _checker_rng(seed), 1)
            except GradientCheckError:
                raise
            except MutadError as error:
                if variant is args:
                    raise
                handled(error)
                continue  # the rule refuses this aliasing explicitly: allowed
            error = max(restoration or (), default=0.0)
            if policy == "checkpoint" and error != 0.0:
                raise GradientCheckError(
                    f"{f.__name__}: under policy='checkpoint' an argument came back with "
                    f"relative error {error:.3g} after the replay, not bit-for-bit.")
            if error > restore_rtol:
                raise GradientCheckError(
                    f"{f.__name__}: the rule put an argument back with relative error "
                    f"{error:.3g}, more than restore_rtol={restore_rtol:g}; restore it more "
                    "accurately or declare it with @rule(checkpoint=(...)).")
            worst = max(worst, error)
    return worst


def _check_output(f, args):
    y_function = f.fn(*copy.deepcopy(args))
    y_rule, _ = f.pure_rule(*copy.deepcopy(args))
    for a, b in zip(flatten(y_function)[0], flatten(y_rule)[0], strict=True):
        if not np.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True):
            raise GradientCheckError(
                f"{f.__name__}: the rule's output differs from the function's own output.")


def _aliased_variants(args):
    """``args`` with argument j replaced by argument i, for each pair of float arrays of one
    shape and dtype: the rule then sees one buffer in both places."""
    positions = [i for i, a in enumerate(args) if is_inexact_array(a)]
    for n, i in enumerate(positions):
        for j in positions[n + 1:]:
            if args[i].shape == args[j].shape and args[i].dtype == args[j].dtype:
                variant = list(args)
                variant[j] = args[i]
                yield tuple(variant)


# ----------------------------------------------------------------------------------------------
# Leaves, directions and inner products


def _leaves(trees):
    return [leaf for t in trees for leaf in flatten(t)[0]]


def _rebuilt(args, leaves):
    """One tree per positional argument of ``args``, around ``leaves``."""
    out, start = [], 0
    for a in args:
        count, rebuild = len(flatten(a)[0]), flatten(a)[1]
        out.append(rebuild(leaves[start:start + count]))
        start += count
    return tuple(out)


def _direction_leaves(args, directions):
    """The leaves of ``directions``, one per leaf of ``args``: ``None`` for a whole argument
    spreads over its leaves."""
    out = []
    for a, d in zip(args, directions, strict=True):
        count = len(flatten(a)[0])
        out.extend([None] * count if d is None else flatten(d)[0])
    return out


def _directions(args, rng, symmetric):
    """A random direction for each float leaf of ``args`` (``None`` for the others); those of
    the positional arguments in ``symmetric`` symmetric (Hermitian for complex arguments)."""
    out = []
    for position, a in enumerate(args):
        for x in flatten(a)[0]:
            v = _random(x, rng) if _is_float(x) else None
            if v is not None and position in symmetric:
                transposed = np.swapaxes(v, -1, -2)
                v = (v + (np.conjugate(transposed) if np.iscomplexobj(v) else transposed)) / 2
            out.append(v)
    return out


def _cotangents(y, rng):
    """A random cotangent for each float leaf of ``y``, in ``y``'s structure."""
    leaves, rebuild = flatten(y)
    return rebuild([_random(o, rng) if _is_float(o) else None for o in leaves])


def _random(x, rng):
    """Standard normal numbers of ``x``'s shape; complex ones (both parts drawn) for a complex
    ``x``, so that directions and cotangents probe the imaginary parts too."""
    v = rng.standard_normal(np.shape(x))
    v = v + 1j * rng.standard_normal(np.shape(x)) if _wide(x).kind == "c" else v
    # in x's own precision, as jvp and back take them (a wider one would be rounded)
    return v.astype(x.dtype if hasattr(x, "dtype") else np.result_type(x))


def _dot(a, b):
    """``Σ Re <a_i, b_i>`` over leaf lists, skipping ``None`` on either side: the pairing of a
    tangent and a cotangent (the real part of ``Σ conj(a) b`` for complex values)."""
    return sum((float(np.vdot(np.asarray(x, _wide(x)), np.asarray(y, _wide(y))).real)
                for x, y in zip(a, b, strict=True) if x is not None and y is not None), 0.0)


def _finite_dot(pairs):
    """``_dot`` over pairs, leaving out the terms where ``x`` is not finite."""
    kept = [(np.where(np.isfinite(x), x, 0.0), y) for x, y in pairs
            if x is not None and y is not None]
    return _dot([x for x, _ in kept], [y for _, y in kept])


def _pairs(a, b):
    """The matching leaves of two trees of tuples and lists; ``None`` on either side (a whole
    argument without a tangent or a cotangent) matches nothing."""
    if a is None or b is None:
        return
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        for x, y in zip(a, b, strict=True):
            yield from _pairs(x, y)
    else:
        yield a, b


def _is_float(y):
    return (wrapped(y) and y.dtype.kind in "fc") or is_inexact_array(y) or is_inexact_scalar(y)


# ----------------------------------------------------------------------------------------------
# The caller's bytes


def _fingerprint(x):
    """What must come back unchanged of one argument leaf: an array's bytes, those of the
    arrays inside an object mutad passes as it is (a SciPy spline), a number's value."""
    if isinstance(x, np.ndarray):
        return x.tobytes()
    if isinstance(x, (numbers.Number, str, bytes)):
        return copy.deepcopy(x)
    return [a.tobytes() for a in arrays_within(x)]


def _check_unchanged(leaves, before, when):
    for i, (x, old) in enumerate(zip(leaves, before, strict=True)):
        if _fingerprint(x) != old:
            raise GradientCheckError(f"{when}: argument leaf {i} did not come back bit-for-bit.")


def _relative_error(x, original):
    if x.dtype.kind not in "fc":
        return 0.0 if np.array_equal(x, original) else np.inf
    scale = np.max(np.abs(original), initial=0.0)
    error = np.max(np.abs(x - original), initial=0.0)
    return float(error / scale) if scale else float(error)
