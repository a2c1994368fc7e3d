"""Fitting two physical constants to many experiments at once, on a Dask cluster.

Each experiment heats a rod from its own initial profile and measures its temperature at a few
times; the rod obeys u_t = D u_xx - k u, integrated by the explicit scheme written in place
(``u[1:-1] += ...``, ``u *= ...``). The diffusivity ``D`` and the loss rate ``k`` are the same
in every experiment, so the misfit to fit is the sum of the experiments' misfits, and its
gradient the sum of theirs: ``mutad.distributed.value_and_grad_sum`` computes each experiment's
on a worker (recorded once per worker, replayed afterwards) and adds them up on the cluster,
and ``scipy.optimize.minimize`` takes it as it takes ``mutad.value_and_grad``.

The cluster is a ``LocalCluster`` of two worker processes started here; a real one is a
``distributed.Client`` of its scheduler's address, and nothing else changes.

Run it with ``python examples/distributed_fit.py``; it takes several seconds, a few of them
starting the workers.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once (the workers inherit the setting);
# setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np
from scipy.optimize import minimize

import mutad
import mutad.distributed

POINTS = 24
STEPS_BETWEEN = 20  # time steps between two measurements
MEASUREMENTS = 3
EXPERIMENTS = 8
DX = 1.0 / (POINTS - 1)
DT = 0.2 * DX * DX  # stable for D up to 2.5


def misfit(log_constants, u, measured):
    """The squared misfit of one experiment: ``u`` is its initial profile (overwritten as the
    rod evolves: mutad gives it back as it was), ``measured`` its measurements, one per row."""
    diffusivity, loss_rate = np.exp(log_constants)
    total = 0.0
    for row in measured:
        for _ in range(STEPS_BETWEEN):
            u[1:-1] += (DT * diffusivity / (DX * DX)) * (u[2:] - 2 * u[1:-1] + u[:-2])
            u *= 1.0 - DT * loss_rate
        total += np.sum((u - row) ** 2)
    return total


def experiments(log_constants, seed=0):
    """Initial profiles (a bump somewhere on the rod) and noisy measurements of each."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, POINTS)
    out = []
    for _ in range(EXPERIMENTS):
        u0 = np.exp(-((x - rng.uniform(0.2, 0.8)) / rng.uniform(0.05, 0.2)) ** 2)
        u0[[0, -1]] = 0.0
        diffusivity, loss_rate = np.exp(log_constants)
        u, rows = u0.copy(), []
        for _ in range(MEASUREMENTS):
            for _ in range(STEPS_BETWEEN):
                u[1:-1] += (DT * diffusivity / (DX * DX)) * (u[2:] - 2 * u[1:-1] + u[:-2])
                u *= 1.0 - DT * loss_rate
            rows.append(u + 0.002 * rng.standard_normal(POINTS))
        out.append((u0, np.array(rows)))
    return out


def main():
    from distributed import Client, LocalCluster

    truth = np.log([1.0, 3.0])  # D = 1, k = 3
    data = experiments(truth)
    start = np.log([0.3, 1.0])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        total = mutad.distributed.value_and_grad_sum(misfit, data, client=client)

        # The cluster's sum is the serial one, up to the order of the additions
        value, grad = total(start)
        serial = [mutad.value_and_grad(misfit)(start, *experiment) for experiment in data]
        assert np.isclose(value, sum(v for v, _ in serial), rtol=1e-12)
        assert np.allclose(grad, sum(g for _, g in serial), rtol=1e-12)
        print(f"{EXPERIMENTS} experiments on {len(client.scheduler_info()['workers'])} workers: "
              f"misfit {value:.4g}, gradient {np.round(grad, 3)}")

        result = minimize(total, start, jac=True, method="L-BFGS-B")
    fitted = np.exp(result.x)
    print(f"misfit {value:.4g} -> {result.fun:.4g} in {result.nit} iterations "
          f"({result.nfev} distributed gradients)")
    print(f"fitted D = {fitted[0]:.3f}, k = {fitted[1]:.3f}; true D = 1, k = 3")
    assert result.success and np.allclose(fitted, [1.0, 3.0], rtol=0.05)


if __name__ == "__main__":
    main()
