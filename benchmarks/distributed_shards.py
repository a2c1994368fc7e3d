"""The gradient of a sum over shards of a W2-like simulation: one process against a LocalCluster.

Each of ``--shards`` shards runs the W2 workload (velocity Verlet for the FPU-beta chain, every
update in place, ``mutad.bench.workloads.leapfrog``) from the shared initial state ``(q, p)``
displaced by the shard's own ``dq``; the loss is the sum of the shards' W2 losses and the
gradient is with respect to ``(q, p)``. Serial: ``mutad.value_and_grad`` shard after shard in
this process, added in shard order. Cluster: ``mutad.distributed.value_and_grad_sum`` on a
``LocalCluster`` of ``--workers`` processes of one thread each, started here. Both trace every
call (``replay=False``), so that the comparison is of the same work.

Method: one warm-up call of each (the workers import mutad and SciPy on their first task), then
``--rounds`` rounds, each timing one serial call and one cluster call back to back; the table
gives the median [min-max] of each and of the per-round ratio serial / cluster. The two
gradients are checked to agree to 1e-12 relative. BLAS and OpenMP threads are limited to one.

    python benchmarks/distributed_shards.py                # 16 shards, n = 10,000, 100 steps
    python benchmarks/distributed_shards.py --shards 32 --n 100000 --steps 10
"""

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse
import platform
import statistics
import time

import numpy as np

import mutad
import mutad.distributed
from mutad.bench.workloads import leapfrog, leapfrog_initial_state


def shard_loss(q, p, dq, steps):
    """W2 from ``(q + dq, p)``: ``q`` is displaced in place, as the simulation then moves it."""
    q += dq
    return leapfrog(q, p, steps)


def serial(q, p, shards):
    value, grads = 0.0, None
    for shard in shards:
        v, g = mutad.value_and_grad(shard_loss, argnums=(0, 1))(q, p, *shard)
        value = value + v
        grads = g if grads is None else (grads[0] + g[0], grads[1] + g[1])
    return value, grads


def spread(values):
    return (f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()

    from distributed import Client, LocalCluster

    q, p = leapfrog_initial_state(options.n)
    rng = np.random.default_rng(0)
    shards = [(0.01 * rng.standard_normal(options.n), options.steps)
              for _ in range(options.shards)]
    with LocalCluster(n_workers=options.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        total = mutad.distributed.value_and_grad_sum(shard_loss, shards, client=client,
                                                     argnums=(0, 1), replay=False)
        expected, got = serial(q, p, shards), total(q, p)  # the warm-up calls
        for a, b in zip(expected[1], got[1]):
            np.testing.assert_allclose(b, a, rtol=1e-12)
        times = {"serial": [], "cluster": []}
        for _ in range(options.rounds):
            for name, run in (("serial", lambda: serial(q, p, shards)),
                              ("cluster", lambda: total(q, p))):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    ratios = [s / c for s, c in zip(times["serial"], times["cluster"])]
    # Other work on the machine takes cores from both sides: its load is part of the result
    print(f"W2-like, {options.shards} shards, n = {options.n:,}, {options.steps} steps; "
          f"{options.workers} worker processes x 1 thread; {options.rounds} rounds; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} after the run; "
          f"Python {platform.python_version()}, NumPy {np.__version__}")
    print()
    print("| serial (s) | cluster (s) | serial / cluster |")
    print("|---|---|---|")
    print(f"| {spread(times['serial'])} | {spread(times['cluster'])} | {spread(ratios)} |")


if __name__ == "__main__":
    main()
