"""Where a workload's gradient spends its time: cProfile of repeated gradient calls.

    python benchmarks/profile_workload.py small-ops
    python benchmarks/profile_workload.py big-elementwise --param n=10000000 --calls 3
    python benchmarks/profile_workload.py leapfrog --param n=100000 --param steps=100
    python benchmarks/profile_workload.py heat-scalar --replay    # replayed calls

Prints the functions with the most time spent in their own body (``tottime``) and, separately,
the most cumulative time, after one warm-up call (with ``--replay``, the call that records).
Meant for whoever optimises the core: the numbers are cProfile's, so per-call Python overhead is
inflated relative to ``mutad-bench``'s.
Set OMP_NUM_THREADS=1 for the one compute thread ``mutad-bench`` uses.
"""

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mutad  # noqa: E402
from mutad.bench.workloads import WORKLOADS  # noqa: E402


def parse_param(text):
    key, _, value = text.partition("=")
    return key, int(value)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(n for n, w in WORKLOADS.items()
                                                   if not w.behaviour_only))
    parser.add_argument("--param", action="append", type=parse_param, default=[],
                        help="a size parameter, e.g. n=10000000 (default: the full size)")
    parser.add_argument("--policy", default="restore", choices=("restore", "checkpoint"))
    parser.add_argument("--replay", action="store_true",
                        help="profile mutad.value_and_grad(..., replay=True): the warm-up call "
                             "records the program, the profiled calls replay it")
    parser.add_argument("--calls", type=int, default=10, help="gradient calls to profile")
    parser.add_argument("--top", type=int, default=10)
    options = parser.parse_args(argv)

    workload = WORKLOADS[options.workload]
    params = dict(workload.sizes["full"][0])
    params.update(options.param)
    problem = workload.build(**params)

    if options.replay:
        gradient = mutad.value_and_grad(problem.loss, argnums=problem.argnums,
                                        policy=options.policy, replay=True)
    else:
        def gradient(*args):
            return mutad.value_and_gradient(problem.loss, *args, argnums=problem.argnums,
                                            policy=options.policy)

    def differentiate():
        for _ in range(options.calls):
            gradient(*problem.args)

    gradient(*problem.args)
    profiler = cProfile.Profile()
    profiler.runcall(differentiate)
    print(f"{workload.label} {workload.name} {params} policy={options.policy}"
          f"{', replayed' if options.replay else ''}, {options.calls} gradient calls")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(options.top)
    stats.sort_stats("cumulative").print_stats(options.top)


if __name__ == "__main__":
    main()
