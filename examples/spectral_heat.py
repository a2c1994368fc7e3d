"""Fitting the diffusion coefficient of a pseudo-spectral reaction-diffusion solver.

The solver advances u_t = kappa u_xx - u**3 on a periodic grid the way spectral codes are
written: the state lives in Fourier space as the complex array ``u_hat = np.fft.rfft(u)``, and
each step updates it in place,

    u = np.fft.irfft(u_hat, n)               # back to the grid for the reaction term
    u_hat -= dt * np.fft.rfft(u ** 3)        # the reaction, explicitly
    u_hat *= decay                           # diffusion, exactly: exp(-kappa k^2 dt)

for 150 steps. We fit kappa (as log kappa, so it stays positive) to noisy snapshots
with ``scipy.optimize.minimize``, the gradient coming from ``mutad.value_and_grad`` on the
unchanged solver: through the complex in-place updates and the FFTs. The script checks the
gradient against central finite differences, then reports the gradient's cost over the
forward run's under both policies (medians of several runs in this process), and the peak
memory each takes; with JAX installed, the same ratio for JAX on the same problem written
out of place (``jnp.fft``, ``jax.jit``).

Run it with ``python examples/spectral_heat.py``; it takes a few seconds.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import time
import tracemalloc

import numpy as np
from scipy.optimize import minimize

import mutad

GRID_POINTS = 512
STEPS = 150
DT = 2e-3
SNAPSHOTS = (50, 100, 150)  # the steps after which the state is observed
TRUE_KAPPA = 0.08


def wavenumbers(n=GRID_POINTS):
    return np.fft.rfftfreq(n, 1.0 / n)  # integers 0 .. n/2 on [0, 2 pi)


def solve(log_kappa, u0, steps=STEPS):
    """The states at ``SNAPSHOTS``, stepping ``u_hat`` in place in Fourier space."""
    n = u0.size
    decay = np.exp(-np.exp(log_kappa) * wavenumbers(n) ** 2 * DT)
    u_hat = np.fft.rfft(u0)
    states = []
    for step in range(1, steps + 1):
        u = np.fft.irfft(u_hat, n)
        u_hat -= DT * np.fft.rfft(u ** 3)
        u_hat *= decay
        if step in SNAPSHOTS:
            states.append(np.fft.irfft(u_hat, n))
    return states


def misfit(log_kappa, u0, observations):
    """Squared distance between the snapshots and the observations."""
    return sum(np.sum((u - seen) ** 2) for u, seen in zip(solve(log_kappa, u0), observations))


def make_problem(seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 2 * np.pi, GRID_POINTS, endpoint=False)
    u0 = 1.5 * np.sin(x) + np.cos(3 * x) + 0.5 * np.sin(7 * x)
    observations = [u + 0.01 * rng.standard_normal(GRID_POINTS)
                    for u in solve(np.log(TRUE_KAPPA), u0)]
    return u0, observations


def median_seconds(run, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def peak_bytes(run):
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def jax_times(u0, observations, log_kappa):
    """JAX's gradient and forward times (seconds, medians) on the same problem, out of place
    (None without JAX)."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    k2 = jnp.asarray(wavenumbers() ** 2)
    seen = [jnp.asarray(o) for o in observations]

    def loss(log_kappa, u0):
        decay = jnp.exp(-jnp.exp(log_kappa) * k2 * DT)
        u_hat = jnp.fft.rfft(u0)
        total = 0.0
        for step in range(1, STEPS + 1):
            u = jnp.fft.irfft(u_hat, GRID_POINTS)
            u_hat = (u_hat - DT * jnp.fft.rfft(u ** 3)) * decay
            if step in SNAPSHOTS:
                total = total + jnp.sum((jnp.fft.irfft(u_hat, GRID_POINTS)
                                         - seen[SNAPSHOTS.index(step)]) ** 2)
        return total

    forward = jax.jit(loss)
    gradient = jax.jit(jax.value_and_grad(loss))
    u0 = jnp.asarray(u0)
    forward(log_kappa, u0).block_until_ready()  # compile both first
    gradient(log_kappa, u0)[1].block_until_ready()
    return (median_seconds(lambda: gradient(log_kappa, u0)[1].block_until_ready()),
            median_seconds(lambda: forward(log_kappa, u0).block_until_ready()))


def main():
    u0, observations = make_problem()
    u0_before = u0.copy()
    log_kappa = np.log(0.03)

    value, gradient = mutad.value_and_grad(misfit)(log_kappa, u0, observations)
    assert np.array_equal(u0, u0_before), "the caller's array must come back as it was"
    step = 1e-5
    estimate = (misfit(log_kappa + step, u0, observations)
                - misfit(log_kappa - step, u0, observations)) / (2 * step)
    relative = abs(gradient - estimate) / abs(estimate)
    print(f"d misfit / d log kappa = {gradient:.10g}, finite differences {estimate:.10g}, "
          f"relative difference {relative:.1e}")
    assert relative < 1e-6, "mutad's gradient disagrees with finite differences"

    result = minimize(mutad.value_and_grad(misfit), [log_kappa], args=(u0, observations),
                      jac=True, method="L-BFGS-B")
    fitted = float(np.exp(result.x[0]))
    print(f"misfit {value:.4g} -> {result.fun:.4g} in {result.nit} iterations "
          f"({result.nfev} gradients); kappa {fitted:.4f}, true {TRUE_KAPPA}")
    assert abs(fitted - TRUE_KAPPA) < 0.01 * TRUE_KAPPA

    forward = median_seconds(lambda: misfit(log_kappa, u0, observations))
    forward_memory = peak_bytes(lambda: misfit(log_kappa, u0, observations))
    for policy in ("restore", "checkpoint"):
        def run(policy=policy):
            return mutad.value_and_grad(misfit, policy=policy)(log_kappa, u0, observations)

        ratio = median_seconds(run) / forward
        memory = peak_bytes(run)
        print(f"{policy:>10}: gradient / forward time {ratio:.1f}x, peak memory "
              f"{memory / 2 ** 20:.2f} MiB (forward {forward_memory / 2 ** 20:.2f} MiB)")
    jax = jax_times(u0, observations, log_kappa)
    if jax is not None:
        print(f"       jax: gradient / forward time {jax[0] / jax[1]:.1f}x (jit, out of place); "
              f"its gradient / NumPy's forward time {jax[0] / forward:.1f}x")


if __name__ == "__main__":
    main()
