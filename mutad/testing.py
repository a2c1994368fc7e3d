"""Proving gradients right: ``check_grads`` compares mutad with finite differences.

The check runs mutad's reverse pass with a random output cotangent ``w`` and random non-zero
*seeds* in the arguments' shadows, so a rule that assigns where it must accumulate fails. It
compares ``<gradient, v>`` with a fourth-order central difference of ``<w, f(x + h v)>`` along
a random direction ``v`` (cost independent of the array sizes), and it checks that every array
the function received holds its original bytes afterwards.
"""

import copy
import numbers

import numpy as np

from .api import Run
from . import errors
from .errors import GradientCheckError, InvalidArgumentError, UnsupportedFunctionError
from .shadows import Shadows, whole
from .trees import arrays_within, flatten, is_float_array, is_float_scalar
from .tracing import Traced
from .views import address, owner, wrapped


def _snapshot(leaves):
    return [_fingerprint(x) for x in leaves]


def _fingerprint(x):
    """What must come back unchanged of one argument leaf: an array's bytes, those of the
    arrays inside an object mutad passes as it is (a SciPy spline), a number's value."""
    if isinstance(x, np.ndarray):
        return x.tobytes()
    if isinstance(x, (numbers.Number, str, bytes)):
        return copy.deepcopy(x)
    return [a.tobytes() for a in arrays_within(x)]


def _check_unchanged(leaves, before, what):
    for i, (x, old) in enumerate(zip(leaves, before, strict=True)):
        if _fingerprint(x) != old:
            raise GradientCheckError(f"{what}: argument leaf {i} did not come back bit-for-bit.")


def _inner(a, b):
    return float(np.vdot(np.asarray(a, np.float64), np.asarray(b, np.float64)))


class _Copies:
    """Float64 copies of the arguments that keep their aliasing: views of one buffer in the
    arguments are the same views of one copied buffer, so the finite differences see the same
    program mutad differentiated."""

    def __init__(self, leaves):
        self.buffers = {}
        self.leaves = []
        for x in leaves:
            if is_float_array(x):
                base = owner(x)
                if base.flags.c_contiguous or base.flags.f_contiguous:
                    if id(base) not in self.buffers:
                        self.buffers[id(base)] = (base, base.reshape(-1, order="A").astype(np.float64))
                    flat = self.buffers[id(base)][1]
                    size = x.dtype.itemsize
                    x = np.ndarray(x.shape, np.float64, flat, (address(x) - address(base)) // size * 8,
                                   tuple(s // size * 8 for s in x.strides))
                else:
                    x = x.astype(np.float64)
            elif isinstance(x, np.ndarray) or is_float_scalar(x) or arrays_within(x):
                x = copy.deepcopy(x)
            self.leaves.append(x)

    def base_view(self, base):
        flat = self.buffers[id(base)][1]
        size = base.dtype.itemsize
        return np.ndarray(base.shape, np.float64, flat, 0, tuple(s // size * 8 for s in base.strides))


def _objective(f, args, directions, h, weights, seeds):
    """``<w, f(x + h v)> + <s, x after f>``: the scalar whose derivative mutad computed when it
    seeded the output's shadow with ``w`` and every argument buffer's shadow with ``s``."""
    leaves = [leaf for a in args for leaf in flatten(a)[0]]
    copies = _Copies(leaves)
    moved = []
    for x, v in zip(copies.leaves, directions, strict=True):
        if v is None:
            moved.append(x)
        elif isinstance(x, np.ndarray):
            x += h * v
            moved.append(x)
        else:
            moved.append(float(x) + h * float(v))
    new_args, start = [], 0
    for a in args:
        leaves_a, rebuild = flatten(a)
        new_args.append(rebuild(moved[start:start + len(leaves_a)]))
        start += len(leaves_a)
    outputs, _ = flatten(f(*new_args))
    total = sum(_inner(w, y) for w, y in zip(weights, outputs, strict=True) if w is not None)
    for base, s in seeds:
        if isinstance(base, np.ndarray) and id(base) in copies.buffers:
            total += _inner(s, copies.base_view(base))
        else:  # a scalar argument: its value after f is the perturbed value itself
            index = next(i for i, x in enumerate(leaves) if x is base)
            total += _inner(s, moved[index])
    return total


def check_grads(f, *args, policy="restore", rtol=None, atol=None, step=1e-4, seed=0,
                symmetric=(), order=1):
    """Check mutad's gradient of ``f`` at ``args`` against central finite differences.

    With ``order=2``, check second derivatives instead: the Hessian-vector products of
    ``<w, f>`` along a random direction, computed three ways (reverse over forward, ``hvp``;
    forward over reverse, ``jvp`` of the gradient; nested reverse mode, the gradient of
    ``<gradient, v>``), against finite differences of mutad's gradient (checked with
    ``order=1``). Forward over reverse is left out for a decorated function with no forward
    rule (``hvp`` then nests reverse mode).

    Works for any output (a random cotangent reduces it to a scalar), raises
    ``GradientCheckError`` (a ``MutadError`` and an ``AssertionError``) on a mismatch, and
    returns ``None`` when the gradient is right and every argument came back bit-for-bit.
    ``symmetric`` lists positional arguments (square matrices) perturbed only along symmetric
    directions, for functions such as Cholesky that read one triangle and have a symmetric
    gradient.

    >>> import numpy as np, mutad
    >>> def f(a, b):
    ...     a[1:] *= b[:-1]
    ...     return np.sin(a)
    >>> mutad.check_grads(f, np.array([0.1, 0.2, 0.3]), np.array([1.5, -0.5, 2.0]))
    """
    if order == 2:
        return _check_second(f, args, policy, rtol, atol, step, seed, symmetric)
    if order != 1:
        raise InvalidArgumentError(f"check_grads(order={order!r}): order is 1 or 2.")
    _check(f, args, policy, rtol, atol, step, seed, symmetric)


def _check(f, args, policy, rtol, atol, step, seed, symmetric=()):
    """``check_grads``; returns the relative error with which the replay itself put the
    arguments back (0.0 when every overwritten region was checkpointed)."""
    rng = np.random.default_rng(seed)
    leaves = [leaf for a in args for leaf in flatten(a)[0]]
    before = _snapshot(leaves)
    low_precision = any(isinstance(x, (np.ndarray, np.floating)) and x.dtype == np.float32
                        for x in leaves)
    rtol = rtol if rtol is not None else (2e-3 if low_precision else 1e-6)
    atol = atol if atol is not None else (1e-4 if low_precision else 1e-9)

    run = Run(policy)
    try:
        outputs, _ = flatten(run.call(f, run.wrap(args)))
        shadows = Shadows()
        weights = [rng.standard_normal(np.shape(y)) if _is_float(y) else None for y in outputs]
        for y, w in zip(outputs, weights, strict=True):
            if type(y) is Traced:
                shadows.add(y, w)  # outputs may share memory: add
        # Seed each argument buffer's shadow: a rule that assigns instead of accumulating
        # drops the seed, and the finite differences (which add <seed, buffer after f>) notice.
        seeds = {}
        for x, t in zip(run.leaves, run.traced, strict=True):
            if t is not None and t.buffer.key not in seeds:
                s = rng.standard_normal(t.buffer.shape)
                seeds[t.buffer.key] = (owner(x) if isinstance(x, np.ndarray) else x, s)
                shadows.add(whole(t.buffer), s)
        run.reverse(shadows)
        grads = [None if t is None else shadows.of(t).copy() for t in run.traced]
        restoration_error = max((_relative_error(x, original) for x, original in run.originals.copies),
                                default=0.0)
    finally:
        run.restore()
    _check_unchanged(leaves, before, "after mutad's gradient")

    directions = [None if t is None else rng.standard_normal(np.shape(x))
                  for x, t in zip(run.leaves, run.traced, strict=True)]
    for position in symmetric:
        start, count, _ = run.rebuilds[position]
        v = directions[start]
        directions[start] = (v + np.swapaxes(v, -1, -2)) / 2
    analytic = sum(_inner(g, v) for g, v in zip(grads, directions, strict=True) if v is not None)
    f_at = {k: _objective(f, args, directions, k * step, weights, list(seeds.values()))
            for k in (-2, -1, 1, 2)}
    numeric = (8 * (f_at[1] - f_at[-1]) - (f_at[2] - f_at[-2])) / (12 * step)
    _check_unchanged(leaves, before, "after the finite differences")
    scale = max(abs(analytic), abs(numeric), max(abs(v) for v in f_at.values()) * 1e-3)
    if not abs(analytic - numeric) <= atol + rtol * scale:
        raise GradientCheckError(
            f"gradient mismatch (policy={policy!r}): reverse mode gives {analytic!r} along a "
            f"random direction, finite differences give {numeric!r} "
            f"(difference {abs(analytic - numeric):.3g}, allowed {atol + rtol * scale:.3g}).")
    return restoration_error


class _Directions:
    """Random directions for every float leaf of ``args``, with the arguments' structure;
    matrices named in ``symmetric`` get symmetric ones."""

    def __init__(self, args, rng, symmetric):
        self.parts = []
        for position, a in enumerate(args):
            leaves, rebuild = flatten(a)
            vs = [rng.standard_normal(np.shape(x)) if _is_float(x) else None for x in leaves]
            if position in symmetric:
                vs = [(v + np.swapaxes(v, -1, -2)) / 2 for v in vs]
            self.parts.append((vs, rebuild))

    def tree(self):
        """One direction per positional argument (``None`` leaves: not differentiable)."""
        return tuple(rebuild(vs) for vs, rebuild in self.parts)

    def moved(self, args, h):
        """Copies of ``args`` (aliasing kept) moved by ``h`` along the directions."""
        leaves = [leaf for a in args for leaf in flatten(a)[0]]
        copies = _Copies(leaves)
        flat = [v for vs, _ in self.parts for v in vs]
        new = [x if v is None else (x.__iadd__(h * v) if isinstance(x, np.ndarray)
                                    else float(x) + h * float(v))
               for x, v in zip(copies.leaves, flat, strict=True)]
        out, start = [], 0
        for vs, rebuild in self.parts:
            out.append(rebuild(new[start:start + len(vs)]))
            start += len(vs)
        return out

    def dot(self, trees):
        """``<directions, trees>`` summed over every leaf (traced leaves too)."""
        flat = [v for vs, _ in self.parts for v in vs]
        values = [leaf for t in trees for leaf in flatten(t)[0]]
        return sum(((g * v).sum() for v, g in zip(flat, values, strict=True) if v is not None),
                   0.0)


def _weighted(f, weights):
    """The scalar ``<w, f(*args)>``, for a random cotangent ``w`` per float output."""
    def scalar(*args):
        outputs = flatten(f(*args))[0]
        total = 0.0
        for w, y in zip(weights, outputs, strict=True):
            if w is not None:
                total = total + (y * w).sum()
        return total

    return scalar


def _check_second(f, args, policy, rtol, atol, step, seed, symmetric):
    from .api import gradient, hvp, jvp

    rng = np.random.default_rng(seed)
    leaves = [leaf for a in args for leaf in flatten(a)[0]]
    before = _snapshot(leaves)
    outputs = flatten(f(*_Directions(args, rng, symmetric).moved(args, 0.0)))[0]
    weights = [rng.standard_normal(np.shape(y)) if _is_float(y) else None for y in outputs]
    phi = _weighted(f, weights)
    v, u = _Directions(args, rng, symmetric), _Directions(args, rng, symmetric)
    reverse_over_forward = hvp(phi, args, v.tree(), policy=policy)
    if len(args) == 1:
        reverse_over_forward = (reverse_over_forward,)
    _check_unchanged(leaves, before, "after hvp")

    try:
        forward_over_reverse = jvp(lambda *xs: gradient(phi, *xs, policy=policy), args,
                                   v.tree())[1]
    except UnsupportedFunctionError:  # a decorated function without a forward rule
        forward_over_reverse = None
    _check_unchanged(leaves, before, "after jvp of the gradient")

    def directional(*xs):
        return v.dot(gradient(phi, *xs, policy=policy))

    nested_reverse = gradient(directional, *args, policy=policy)
    _check_unchanged(leaves, before, "after nested gradients")
    g_at = {k: u.dot(gradient(phi, *v.moved(args, k * step), policy=policy))
            for k in (-2, -1, 1, 2)}
    numeric = (8 * (g_at[1] - g_at[-1]) - (g_at[2] - g_at[-2])) / (12 * step)
    _check_unchanged(leaves, before, "after the finite differences")
    rtol = 1e-5 if rtol is None else rtol
    atol = 1e-8 if atol is None else atol
    for name, result in (("reverse over forward (hvp)", reverse_over_forward),
                         ("forward over reverse", forward_over_reverse),
                         ("nested reverse mode", nested_reverse)):
        if result is None:
            continue
        analytic = float(u.dot(result))
        scale = max(abs(analytic), abs(numeric), max(abs(g) for g in g_at.values()) * 1e-3)
        if not abs(analytic - numeric) <= atol + rtol * scale:
            raise GradientCheckError(
                f"second-derivative mismatch (policy={policy!r}, {name}): <u, H v> is "
                f"{analytic!r}, finite differences of the gradient give {numeric!r}.")


def check_jvp(f, *args, rtol=1e-6, atol=1e-9, step=1e-4, seed=0, symmetric=()):
    """Check ``mutad.jvp`` of ``f`` at ``args`` against central finite differences along a
    random tangent, and that every argument comes back bit-for-bit."""
    from .api import jvp

    rng = np.random.default_rng(seed)
    leaves = [leaf for a in args for leaf in flatten(a)[0]]
    before = _snapshot(leaves)
    v = _Directions(args, rng, symmetric)
    y, dy = jvp(f, tuple(args), v.tree())
    _check_unchanged(leaves, before, "after jvp")
    outputs = flatten(y)[0]
    weights = [rng.standard_normal(np.shape(o)) if _is_float(o) else None for o in outputs]
    phi = _weighted(f, weights)
    at = {k: float(phi(*v.moved(args, k * step))) for k in (-2, -1, 1, 2)}
    numeric = (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * step)
    analytic = sum(_inner(w, d) for w, d in zip(weights, flatten(dy)[0], strict=True)
                   if w is not None)
    _check_unchanged(leaves, before, "after the finite differences")
    scale = max(abs(analytic), abs(numeric), max(abs(a) for a in at.values()) * 1e-3)
    if not abs(analytic - numeric) <= atol + rtol * scale:
        raise GradientCheckError(
            f"jvp mismatch: forward mode gives {analytic!r} along a random direction, finite "
            f"differences give {numeric!r}.")


def _relative_error(x, original):
    if x.dtype.kind != "f":
        return 0.0 if np.array_equal(x, original) else np.inf
    scale = np.max(np.abs(original), initial=0.0)
    error = np.max(np.abs(x - original), initial=0.0)
    return float(error / scale) if scale else float(error)


def check_rule(f, *args, restore_rtol=1e-8, rtol=None, atol=None, seed=0, symmetric=()):
    """Prove the rule of a ``mutad.adjoint`` or ``mutad.inplace_adjoint`` function right.

    Checks its forward rule, if it has one (``@f.jvp_rule``), with ``check_jvp``; then, under
    both policies: the gradient against finite differences (with the argument
    shadows seeded non-zero, so ``back`` must accumulate, not assign); that every argument is
    put back by the replay bit-for-bit under ``policy="checkpoint"`` and within
    ``restore_rtol`` (relative) by the rule's own restoration; for a pure rule, that its ``y``
    equals the function's own output. Then the same for each aliased variant: every pair of
    float array arguments of one shape passed as one buffer (a rule may refuse that with a
    ``MutadError``). ``symmetric`` is as for ``check_grads``. Returns the worst relative
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
    from .custom import Adjoint, InplaceAdjoint

    if not isinstance(f, Adjoint) or f.pure_rule is None:
        raise InvalidArgumentError("check_rule takes a function decorated with mutad.adjoint or "
                         "mutad.inplace_adjoint that has a rule attached.")
    if isinstance(f, InplaceAdjoint):
        def program(*values):
            f(*values)
            return tuple(values[i] for i in f.writes
                         if i < len(values) and _is_float(values[i]))
    else:
        program = f
        _check_forward(f, args)

    worst = 0.0
    for variant in [args, *_aliased_variants(args)]:
        if f.forward_rule is not None:
            try:
                check_jvp(program, *variant, rtol=1e-6 if rtol is None else rtol,
                          atol=1e-9 if atol is None else atol, seed=seed, symmetric=symmetric)
            except GradientCheckError:
                raise
            except errors.MutadError:
                if variant is args:
                    raise
        for policy in ("restore", "checkpoint"):
            try:
                error = _check(program, variant, policy, rtol, atol, 1e-4, seed, symmetric)
            except GradientCheckError:
                raise
            except errors.MutadError:
                if variant is args:
                    raise
                continue  # the rule refuses this aliasing explicitly: allowed
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


def _check_forward(f, args):
    y_function = f.fn(*copy.deepcopy(args))
    y_rule, _ = f.pure_rule(*copy.deepcopy(args))
    for a, b in zip(flatten(y_function)[0], flatten(y_rule)[0], strict=True):
        if not np.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True):
            raise GradientCheckError(
                f"{f.__name__}: the rule's output differs from the function's own output.")


def _aliased_variants(args):
    """``args`` with argument j replaced by argument i, for each pair of float arrays of one
    shape and dtype: the rule then sees one buffer in both places."""
    positions = [i for i, a in enumerate(args) if is_float_array(a)]
    for n, i in enumerate(positions):
        for j in positions[n + 1:]:
            if args[i].shape == args[j].shape and args[i].dtype == args[j].dtype:
                variant = list(args)
                variant[j] = args[i]
                yield tuple(variant)


def _is_float(y):
    return (wrapped(y) and y.dtype.kind == "f") or is_float_array(y) or is_float_scalar(y)
