"""Proving gradients right: ``check_grads`` compares mutad with finite differences.

The check runs mutad's reverse pass with a random output cotangent ``w`` and random non-zero
*seeds* in the arguments' shadows, so a rule that assigns where it must accumulate fails. It
compares ``<gradient, v>`` with a fourth-order central difference of ``<w, f(x + h v)>`` along
a random direction ``v`` (cost independent of the array sizes), and it checks that every array
the function received holds its original bytes afterwards.
"""

import copy

import numpy as np

from .api import Run
from .errors import MutadError
from .shadows import Shadows
from .trees import flatten, is_float_array, is_float_scalar
from .tracing import Traced
from .views import address, owner


class GradientCheckError(MutadError, AssertionError):
    """``check_grads`` found a gradient that disagrees with finite differences, or an argument
    that did not come back bit-for-bit."""


def _snapshot(leaves):
    return [x.tobytes() if isinstance(x, np.ndarray) else copy.deepcopy(x) for x in leaves]


def _check_unchanged(leaves, before, what):
    for i, (x, old) in enumerate(zip(leaves, before, strict=True)):
        now = x.tobytes() if isinstance(x, np.ndarray) else x
        if now != old:
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
            elif isinstance(x, np.ndarray) or is_float_scalar(x):
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


def check_grads(f, *args, policy="restore", rtol=None, atol=None, step=1e-4, seed=0):
    """Check mutad's gradient of ``f`` at ``args`` against central finite differences.

    Works for any output (a random cotangent reduces it to a scalar), raises
    ``GradientCheckError`` (a ``MutadError`` and an ``AssertionError``) on a mismatch, and
    returns ``None`` when the gradient is right and every argument came back bit-for-bit.

    >>> import numpy as np, mutad
    >>> def f(a, b):
    ...     a[1:] *= b[:-1]
    ...     return np.sin(a)
    >>> mutad.check_grads(f, np.array([0.1, 0.2, 0.3]), np.array([1.5, -0.5, 2.0]))
    """
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
            if t is not None and id(t.base) not in seeds:
                s = rng.standard_normal(t.base.shape)
                seeds[id(t.base)] = (x if t.base is t.value and not isinstance(x, np.ndarray)
                                     else t.base, s)
                shadows.add(Traced(t.base, t.base, None), s)
        run.reverse(shadows)
        grads = [None if t is None else shadows.of(t).copy() for t in run.traced]
    finally:
        run.restore()
    _check_unchanged(leaves, before, "after mutad's gradient")

    directions = [None if t is None else rng.standard_normal(np.shape(x))
                  for x, t in zip(run.leaves, run.traced, strict=True)]
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


def _is_float(y):
    return type(y) is Traced or is_float_array(y) or is_float_scalar(y)
