"""Gradient of an explicit heat-equation solver with respect to its initial condition.

The solver is the textbook explicit finite-difference scheme for u_t = u_xx on a grid with fixed
(Dirichlet) ends, written the way NumPy users write it: one slice update per time step that
overwrites the interior of ``u`` in place,

    u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])      with r = dt / dx**2 <= 1/2 for stability.

The loss compares the final temperature with a target profile. ``mutad.gradient`` differentiates
straight through the in-place updates; the script then checks that gradient against central
finite differences and shows that the caller's initial condition came back untouched.

Run it with ``python examples/heat_explicit.py``; it takes well under a second.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad

GRID_POINTS = 200
STEPS = 400
DIFFUSION_NUMBER = 0.4  # r = dt / dx**2; the explicit scheme is stable for r <= 1/2


def heat_steps(u, steps, r=DIFFUSION_NUMBER):
    """Advance ``u`` by ``steps`` explicit Euler steps of the heat equation, in place.

    The end values ``u[0]`` and ``u[-1]`` are never written: they are the fixed boundary values.
    NumPy evaluates the whole right-hand side before ``+=`` writes, so each step reads only the
    previous step's values, as the scheme requires.
    """
    for _ in range(steps):
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def misfit(u0, target, weights, steps=STEPS):
    """Weighted squared distance between the state after ``steps`` steps and ``target``.

    ``u0`` is stepped in place, as a solver that owns its state would do. Under mutad this is
    harmless: the caller's array is handed back unchanged. Plain NumPy callers pass a copy.
    """
    u = heat_steps(u0, steps)
    difference = u - target
    return np.sum(weights * difference * difference)


def make_problem(grid_points=GRID_POINTS, seed=0):
    """An initial condition (a bump plus noise, zero at the ends), a target and weights."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, grid_points)
    u0 = np.exp(-((x - 0.3) / 0.1) ** 2) + 0.05 * rng.standard_normal(grid_points)
    u0[0] = u0[-1] = 0.0
    target = 0.5 * np.sin(np.pi * x)
    weights = 1.0 + x  # care more about the right half of the rod
    return u0, target, weights


def directional_derivative(u0, direction, target, weights, step=1e-3):
    """Central finite difference of the misfit along ``direction``, with plain NumPy.

    The misfit is quadratic in ``u0`` (the scheme is linear), so the central difference has no
    truncation error and agrees with the exact derivative up to rounding.
    """
    plus = misfit(u0 + step * direction, target, weights)  # u0 + ... is a fresh array, so the
    minus = misfit(u0 - step * direction, target, weights)  # in-place stepping cannot touch u0
    return (plus - minus) / (2 * step)


def main():
    u0, target, weights = make_problem()
    u0_before = u0.copy()

    # argnums=0: differentiate with respect to the initial condition only.
    gradient = mutad.gradient(misfit, u0, target, weights, argnums=0)

    # policy="checkpoint" saves every overwritten slice instead of undoing each update by
    # subtraction: exact, at the cost of memory. Both must give the same gradient.
    checkpointed = mutad.gradient(misfit, u0, target, weights, argnums=0, policy="checkpoint")
    policy_difference = np.max(np.abs(gradient - checkpointed)) / np.max(np.abs(checkpointed))

    print(f"Explicit heat equation: {GRID_POINTS} grid points, {STEPS} steps, "
          f"r = {DIFFUSION_NUMBER}")
    print(f"misfit(u0) = {misfit(u0.copy(), target, weights):.12g}")
    print(f"|gradient| = {np.linalg.norm(gradient):.6g}")
    print()
    print("direction   mutad: gradient . v    finite differences    relative difference")
    rng = np.random.default_rng(1)
    for index in range(2):
        direction = rng.standard_normal(GRID_POINTS)
        reverse_mode = float(gradient @ direction)
        finite_difference = directional_derivative(u0, direction, target, weights)
        relative = abs(reverse_mode - finite_difference) / abs(finite_difference)
        print(f"{index:9d}   {reverse_mode:20.12g}   {finite_difference:20.12g}   {relative:19.2e}")
        assert relative < 1e-7, "mutad's gradient disagrees with finite differences"
    print()
    print(f"restore and checkpoint policies agree to {policy_difference:.1e} (relative)")
    assert policy_difference < 1e-10

    assert np.array_equal(u0, u0_before), "the caller's initial condition must come back as it was"
    print("u0 after both gradients is bit-for-bit the array passed in (unchanged)")


if __name__ == "__main__":
    main()
