"""The benchmark workloads: what is computed, on which inputs, and what the answer must be.

Each workload builds a :class:`Problem` for one size. A problem holds the positional arguments,
the plain-NumPy forward run every timing is compared with, the function ``mutad.gradient``
differentiates, and a reference loss to check both against. The functions are the ones
/work/shared/BENCHMARKS.md specifies, written the way a NumPy user writes them: the mutad
version is the same in-place code as the NumPy one, handed to ``mutad.gradient`` unchanged.

Nothing here measures anything (that is ``harness.py``), so the benchmark runner, the tests and
the ``mutad-bench`` command can share these definitions.
"""

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

REPOSITORY = Path(__file__).resolve().parent.parent


@dataclass
class Problem:
    """One workload at one size: everything needed to time it and to check it.

    ``numpy_forward(*args)`` returns the loss with plain NumPy and leaves ``args`` as they were;
    ``loss(*args)`` is what mutad differentiates with respect to ``args[argnums]`` (it may write
    into its arguments; mutad hands them back unchanged). ``reference_loss()`` is computed
    independently of both, or published in BENCHMARKS.md. ``operations`` divides timings into a
    per-operation cost where that is the quantity of interest.
    """

    args: tuple
    numpy_forward: Callable
    loss: Callable
    reference_loss: Callable[[], float]
    argnums: int = 0
    operations: int | None = None
    state_bytes: int = 0
    reference_tolerance: float = 1e-12


@dataclass(frozen=True)
class Workload:
    """A named family of problems; ``sizes[mode]`` lists the parameters to build, per mode."""

    name: str
    label: str
    summary: str
    build: Callable[..., Problem]
    sizes: dict = field(default_factory=dict)
    time_unit: str = "ms"


# ----------------------------------------------------------------------------------------------
# W4 small-ops: per-operation overhead on arrays of length 10.

SMALL_OPS_REFERENCE_LOSS = 0.87272429875160
SMALL_OPS_LENGTH = 10


def small_ops(x, groups=250):
    """BENCHMARKS.md W4: ``groups`` groups of four elementwise operations, then ``sum``."""
    for j in range(groups):
        if j % 2 == 0:
            s = np.sin(x)
            s = s * 0.1
            r = x * 0.999
        else:
            s = np.tanh(x)
            s = s * -0.1
            r = x * 1.001
        x = s + r
    return x.sum()


def build_small_ops(groups=250):
    x0 = np.linspace(-1.0, 1.0, SMALL_OPS_LENGTH) + 0.05

    def reference_loss():
        if groups == 250:
            return SMALL_OPS_REFERENCE_LOSS
        # Other lengths have no published value: the same map, one element at a time, with
        # the math module's functions, is independent of NumPy's vectorised loops.
        total = 0.0
        for value in x0.tolist():
            for j in range(groups):
                if j % 2 == 0:
                    value = math.sin(value) * 0.1 + value * 0.999
                else:
                    value = math.tanh(value) * -0.1 + value * 1.001
            total += value
        return float(total)

    return Problem(
        args=(x0, groups),
        numpy_forward=small_ops,
        loss=small_ops,
        reference_loss=reference_loss,
        operations=4 * groups,
        state_bytes=x0.nbytes,
        # The published value has 14 significant digits.
        reference_tolerance=1e-13 if groups == 250 else 1e-12,
    )


SMALL_OPS = Workload(
    name="small-ops",
    label="W4",
    summary="1000 elementwise ops (sin/tanh, scale, add) on length-10 arrays; time per op",
    build=build_small_ops,
    sizes={"full": [{"groups": 250}], "quick": [{"groups": 250}], "tiny": [{"groups": 250}]},
    time_unit="us/op",
)


# ----------------------------------------------------------------------------------------------
# W5 big-elementwise: the same in-place chain on one large array.

BIG_ELEMENTWISE_REFERENCE = {10_000_000: 4658291.78756316}


def big_elementwise(x):
    """BENCHMARKS.md W5, steps 1-9; steps 2, 4, 5, 7 and 8 write in place."""
    a = np.sin(x)
    a *= x
    b = np.tanh(a)
    b += x
    b *= -0.1
    c = np.exp(b)
    c *= a
    np.cos(c, out=c)
    return c.sum()


def build_big_elementwise(n=10_000_000):
    x = np.linspace(-3.0, 3.0, n)

    def reference_loss():
        if n in BIG_ELEMENTWISE_REFERENCE:
            return BIG_ELEMENTWISE_REFERENCE[n]
        # The closed form of BENCHMARKS.md, spelled out of place.
        x_sin_x = x * np.sin(x)
        return float(np.sum(np.cos(x_sin_x * np.exp(-0.1 * (np.tanh(x_sin_x) + x)))))

    return Problem(
        args=(x,),
        numpy_forward=big_elementwise,
        loss=big_elementwise,
        reference_loss=reference_loss,
        state_bytes=x.nbytes,
        # The published value has 15 significant digits.
        reference_tolerance=1e-14 if n in BIG_ELEMENTWISE_REFERENCE else 1e-12,
    )


BIG_ELEMENTWISE = Workload(
    name="big-elementwise",
    label="W5",
    summary="sin, tanh, exp, cos chain with five in-place steps on one large array",
    build=build_big_elementwise,
    sizes={"full": [{"n": 10_000_000}], "quick": [{"n": 1_000_000}], "tiny": [{"n": 1000}]},
)


# ----------------------------------------------------------------------------------------------
# Explicit heat equation: the stepper of examples/heat_explicit.py, at a larger size.


def load_heat_example():
    """The module examples/heat_explicit.py, so the benchmark measures exactly the example."""
    path = REPOSITORY / "examples" / "heat_explicit.py"
    spec = importlib.util.spec_from_file_location("heat_explicit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def heat_misfit_out_of_place(u0, target, weights, steps, r):
    """The example's misfit without any in-place write: an independent reference."""
    u = u0
    for _ in range(steps):
        interior = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = np.concatenate([u[:1], interior, u[-1:]])
    difference = u - target
    return float(np.sum(weights * difference * difference))


def build_heat_explicit(n=100_000, steps=100):
    example = load_heat_example()
    u0, target, weights = example.make_problem(n)

    def numpy_forward(u0, target, weights, steps):
        # The example steps its argument in place; plain NumPy needs a copy to keep u0.
        return example.misfit(u0.copy(), target, weights, steps)

    def reference_loss():
        return heat_misfit_out_of_place(u0, target, weights, steps, example.DIFFUSION_NUMBER)

    return Problem(
        args=(u0, target, weights, steps),
        numpy_forward=numpy_forward,
        loss=example.misfit,
        reference_loss=reference_loss,
        state_bytes=u0.nbytes,
        # A long sum of rounded steps, summed in a different order by the reference.
        reference_tolerance=1e-10,
    )


HEAT_EXPLICIT = Workload(
    name="heat-explicit",
    label="heat",
    summary="examples/heat_explicit.py: T in-place slice updates of the state, then a misfit",
    build=build_heat_explicit,
    sizes={
        "full": [{"n": 100_000, "steps": steps} for steps in (10, 100, 1000)],
        "quick": [{"n": 10_000, "steps": steps} for steps in (10, 100, 1000)],
        "tiny": [{"n": 50, "steps": steps} for steps in (3, 30)],
    },
)


WORKLOADS = {workload.name: workload for workload in (SMALL_OPS, BIG_ELEMENTWISE, HEAT_EXPLICIT)}
