"""The sensitivity of a finite-volume Burgers solution to its initial condition.

Burgers' equation u_t + (u²/2)_x = 0, discretised by finite volumes with the Rusanov (local
Lax-Friedrichs) flux, written the way teaching codes write it: every step allocates its flux
array with ``np.zeros``, fills the interior faces, copies the boundary faces, and updates the
cell averages in place with ``u -= dt/dx * (flux[1:] - flux[:-1])``. ``mutad.gradient`` gives the
gradient of a misfit at the final time with respect to the whole initial condition, through the
solver unchanged; the script checks it against finite differences along random directions.

Run it with ``python examples/burgers_finite_volume.py``; it takes a second or two.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad

CELLS = 200
STEPS = 100
DX = 1.0 / CELLS
DT = 0.4 * DX  # CFL 0.4 for |u| <= 1


def evolve(u):
    """Advance the cell averages ``u`` by ``STEPS`` Rusanov steps, in place."""
    for _ in range(STEPS):
        left, right = u[:-1], u[1:]
        speed = np.maximum(np.abs(left), np.abs(right))
        flux = np.zeros(len(u) + 1)
        flux[1:-1] = 0.25 * (left ** 2 + right ** 2) - 0.5 * speed * (right - left)
        flux[0], flux[-1] = flux[1], flux[-2]  # outflow boundaries
        u -= DT / DX * (flux[1:] - flux[:-1])
    return u


def misfit(u0, target):
    u = evolve(u0)
    return np.sum((u - target) ** 2) * DX


def main():
    x = (np.arange(CELLS) + 0.5) * DX
    u0 = 0.5 + 0.4 * np.sin(2 * np.pi * x)
    target = 0.5 + 0.4 * np.sin(2 * np.pi * (x - 0.15))
    u0_before = u0.copy()

    gradient = mutad.gradient(misfit, u0, target, argnums=0)
    checkpointed = mutad.gradient(misfit, u0, target, argnums=0, policy="checkpoint")
    assert np.array_equal(u0, u0_before), "the caller's array must come back as it was"

    rng = np.random.default_rng(0)
    step = 1e-6
    for _ in range(2):
        v = rng.standard_normal(CELLS)
        estimate = (misfit(u0 + step * v, target) - misfit(u0 - step * v, target)) / (2 * step)
        relative = abs(gradient @ v - estimate) / abs(estimate)
        print(f"gradient . v = {gradient @ v:.10g}, finite differences {estimate:.10g}, "
              f"relative difference {relative:.1e}")
        assert relative < 1e-5, "mutad's gradient disagrees with finite differences"
    agreement = np.max(np.abs(gradient - checkpointed)) / np.max(np.abs(checkpointed))
    print(f"restore and checkpoint policies agree to {agreement:.1e} (relative)")
    assert agreement < 1e-10
    print(f"largest sensitivity at x = {x[np.argmax(np.abs(gradient))]:.3f}")


if __name__ == "__main__":
    main()
