"""Implicit heat equation: factor once in place, then T implicit steps solved in place.

    A = I + dt·κ·K          K: the 1-D Dirichlet Laplacian, n × n, dense
    F = cholesky_(A)        A's memory now holds its Cholesky factor L
    repeat T times:  ldiv_(F, u)       u ← A⁻¹ u, in place
    loss = Σ w · u_T²

An ensemble of initial temperature profiles is stepped at once (u is n × m). mutad gives the
gradient with respect to the initial states and to the diffusion coefficient κ. Its reverse
pass undoes each solve by multiplying back (u = L Lᵀ x) and the factorisation by A = L Lᵀ,
instead of saving u before every solve as the checkpoint policy does.

Multiplying back is exact up to rounding, but it amplifies the rounding already in u by up to
cond(A): heat flow forgets, and running it backwards magnifies what it forgot. So the default
policy still saves u once every K ≈ log(10⁴)/log(cond A) steps, keeping each restored state
within about 10⁴ roundings of the truth. With the step here (cond A ≈ 1.3) that is one state in
about 35: the default policy's memory grows about 35 times slower in T than the checkpoint
policy's, and its gradient agrees with it to about 1e-13.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import ctypes
import gc

import numpy as np

import mutad
from mutad.linalg import cholesky_, ldiv_

N, ENSEMBLE, DT = 200, 16, 2.25e-6


def laplacian(n):
    h = 1.0 / (n + 1)
    return (2.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)) / h**2


def loss(u0, kappa, K, weights, steps):
    A = np.eye(len(K), like=u0) + (DT * kappa) * K   # traced: it depends on kappa
    F = cholesky_(A)
    u = u0.copy()
    for _ in range(steps):
        ldiv_(F, u)
    return (weights * u * u).sum()


def make_problem(n=N, ensemble=ENSEMBLE, seed=0):
    rng = np.random.default_rng(seed)
    x = np.arange(1, n + 1) / (n + 1)
    modes = np.sin(np.pi * np.outer(x, np.arange(1, ensemble + 1)))
    u0 = modes + 0.1 * rng.standard_normal((n, ensemble))
    weights = 1.0 + 0.5 * np.sin(0.37 * np.arange(n) ** 2 + 1.1)
    return u0, 0.8, laplacian(n), weights[:, None]


def can_measure_peak_memory():
    """Linux lets a process reset its peak-memory mark through /proc/self/clear_refs."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def peak_extra_mib(call):
    """Peak resident memory during ``call()`` above what was resident before, in MiB."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)

    def field(name):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(name))

    before = field("VmRSS:")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the high-water mark VmHWM
    result = call()
    return (field("VmHWM:") - before) / 1024, result


def main():
    u0, kappa, K, weights = make_problem()
    state_mib = u0.nbytes / 2**20
    print(f"n = {N}, ensemble of {ENSEMBLE}: state {state_mib:.3f} MiB, A {K.nbytes / 2**20:.2f} MiB")
    growth = cholesky_(np.eye(N) + (DT * kappa) * K).growth
    print(f"cond(A) estimate {growth:.3f}: the default policy saves u about once every "
          f"{np.log(1e4) / np.log(growth):.0f} solves")

    du0, dkappa = mutad.gradient(loss, u0, kappa, K, weights, 10, argnums=(0, 1))
    rng = np.random.default_rng(1)
    direction, step = rng.standard_normal(u0.shape), 1e-6
    numeric = (loss(u0 + step * direction, kappa, K, weights, 10)
               - loss(u0 - step * direction, kappa, K, weights, 10)) / (2 * step)
    numeric_kappa = (loss(u0, kappa + step, K, weights, 10)
                     - loss(u0, kappa - step, K, weights, 10)) / (2 * step)
    print(f"T = 10: <du0, v> = {np.vdot(du0, direction):.10g} (finite differences "
          f"{numeric:.10g}); dL/dkappa = {dkappa:.10g} (finite differences {numeric_kappa:.10g})")
    assert abs(np.vdot(du0, direction) - numeric) <= 1e-6 * abs(numeric)
    assert abs(dkappa - numeric_kappa) <= 1e-6 * abs(numeric_kappa)

    if not can_measure_peak_memory():
        print("\n(peak memory needs Linux's /proc/self/clear_refs: not measured here)")
        return
    print(f"\n{'T':>6}  {'policy':>10}  {'peak extra MiB':>14}  {'in states':>9}  dkappa")
    peaks, dkappas = {}, {}
    for steps in (10, 100, 1000):
        for policy in ("restore", "checkpoint"):
            peak, (_, dkappa) = peak_extra_mib(lambda: mutad.gradient(
                loss, u0, kappa, K, weights, steps, argnums=(0, 1), policy=policy))
            peaks[steps, policy], dkappas[steps, policy] = peak, dkappa
            print(f"{steps:>6}  {policy:>10}  {peak:>14.1f}  {peak / state_mib:>9.0f}  {dkappa:.12g}")
        assert abs(dkappas[steps, "restore"] - dkappas[steps, "checkpoint"]) \
            <= 1e-10 * abs(dkappas[steps, "checkpoint"])
    restore_growth = peaks[1000, "restore"] - peaks[10, "restore"]
    checkpoint_growth = peaks[1000, "checkpoint"] - peaks[10, "checkpoint"]
    print(f"\nfrom T = 10 to T = 1000 the default policy's peak grows by {restore_growth:.1f} MiB, "
          f"the checkpoint policy's by {checkpoint_growth:.1f} MiB")
    assert restore_growth < 0.2 * checkpoint_growth


if __name__ == "__main__":
    main()
