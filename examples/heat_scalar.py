"""Many gradients of a scalar-loop solver: record once, replay.

CFD teaching codes write the explicit heat scheme one grid point at a time, reading the previous
step from a copy ``un`` of ``u``:

    for i in range(1, n - 1):
        u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])      with r = dt / dx**2 <= 1/2.

Traced afresh, each of those element operations pays mutad's dispatch and bookkeeping on every
call. ``mutad.grad(misfit, replay=True)`` returns the same gradient function as
``mutad.grad(misfit)``, but it records the program on its first call and replays it on later
calls whose arguments have the same signature (shapes, dtypes, and the values of non-float
arguments such as the number of steps); a call with another signature records again.

The script fits the initial condition so that the rod reaches a target profile, by gradient
descent: one gradient per iteration, with the same signature each time. It checks that the
replayed gradient is bit-for-bit the traced one and agrees with finite differences, that a call
with another number of steps gives that program's gradient, and that the caller's array comes
back untouched from every call. ``mutad-bench --workloads heat-scalar`` measures what a
gradient of this program costs, traced and replayed.

Run it with ``python examples/heat_scalar.py``; it takes a second or two.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad

GRID_POINTS = 30
STEPS = 20
DIFFUSION_NUMBER = 0.4  # r = dt / dx**2; the explicit scheme is stable for r <= 1/2
ITERATIONS = 10
LEARNING_RATE = 0.2  # the misfit's curvature is at most 2 * max(weights) = 4: below 2 / 4


def heat_steps(u, steps, r=DIFFUSION_NUMBER):
    """Advance ``u`` by ``steps`` explicit Euler steps, one interior point at a time, in place.
    Every update reads ``un``, the state at the start of the step."""
    n = len(u)
    for _ in range(steps):
        un = u.copy()
        for i in range(1, n - 1):
            u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])
    return u


def misfit(u0, target, weights, steps=STEPS):
    """Weighted squared distance between the state after ``steps`` steps and ``target``; steps
    ``u0`` in place (mutad hands the caller's array back unchanged)."""
    difference = heat_steps(u0, steps) - target
    return np.sum(weights * difference * difference)


def make_problem(grid_points=GRID_POINTS, seed=0):
    """A first guess (a bump plus noise, zero at the ends), a target profile and weights."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, grid_points)
    u0 = np.exp(-((x - 0.3) / 0.1) ** 2) + 0.05 * rng.standard_normal(grid_points)
    u0[0] = u0[-1] = 0.0
    return u0, 0.5 * np.sin(np.pi * x), 1.0 + x


def main():
    u0, target, weights = make_problem()
    gradient = mutad.grad(misfit, replay=True)  # argnums=0: the initial condition

    caller_u0 = u0.tobytes()
    traced = mutad.grad(misfit)(u0, target, weights)
    recorded = gradient(u0, target, weights)  # the first call traces and records
    replayed = gradient(u0, target, weights)  # the same signature: replayed
    assert recorded.tobytes() == traced.tobytes() and replayed.tobytes() == traced.tobytes(), \
        "replaying must give the traced gradient bit for bit"
    assert u0.tobytes() == caller_u0, "the caller's initial condition must come back as it was"

    # The misfit is quadratic in u0, so a central difference is exact up to rounding.
    direction, step = np.random.default_rng(1).standard_normal(GRID_POINTS), 1e-3
    finite_difference = (misfit(u0 + step * direction, target, weights)
                         - misfit(u0 - step * direction, target, weights)) / (2 * step)
    relative = abs(replayed @ direction - finite_difference) / abs(finite_difference)
    assert relative < 1e-7, "the replayed gradient disagrees with finite differences"

    # Another number of steps is another program: the loop runs another number of times.
    fewer_steps = gradient(u0, target, weights, 5)
    assert fewer_steps.tobytes() == mutad.grad(misfit)(u0, target, weights, 5).tobytes()

    print(f"Explicit heat, one point at a time: {GRID_POINTS} points, {STEPS} steps, "
          f"r = {DIFFUSION_NUMBER}")
    print(f"replayed gradient = traced gradient, bit for bit; against finite differences "
          f"{relative:.1e} (relative)")
    start = misfit(u0.copy(), target, weights)
    print(f"gradient descent, misfit {start:.6g} at the first guess")
    for iteration in range(1, ITERATIONS + 1):
        g = gradient(u0, target, weights)  # replayed: same shapes, dtypes and steps
        u0 -= LEARNING_RATE * g  # the caller's own update of its array
        if iteration % 5 == 0:
            print(f"  iteration {iteration:2d}: misfit {misfit(u0.copy(), target, weights):.6g}")
    final = misfit(u0.copy(), target, weights)
    assert final < start, "gradient descent with a stable step must lower the misfit"


if __name__ == "__main__":
    main()
