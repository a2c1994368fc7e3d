"""Where a workload's gradient spends its time: cProfile of repeated gradient calls.

    python benchmarks/profile_workload.py small-ops
    python benchmarks/profile_workload.py big-elementwise --param n=10000000 --calls 3
    python benchmarks/profile_workload.py leapfrog --param n=100000 --param steps=100
    python benchmarks/profile_workload.py heat-scalar --replay    # replayed calls
    python benchmarks/profile_workload.py big-elementwise --param n=2000000 --parts

Prints the functions with the most time spent in their own body (``tottime``) and, separately,
the most cumulative time, after one warm-up call (with ``--replay``, the call that records).
Meant for whoever optimises the core: the numbers are cProfile's, so per-call Python overhead is
inflated relative to ``mutad-bench``'s.

``--parts`` profiles the replay without cProfile: each replayed step (by its class and
operation) and each record the replay's reverse loop takes off the tape (by its class; a
recomputed one by what it recomputes for; a compiled block's records within the block's) is
timed on its own, and its total printed in units of the plain NumPy forward timed in the same
rounds (a gradient call, then the forward, glibc malloc pinned as mutad-bench pins it for
timing), beside the whole gradient's ratio: what each part of a replayed gradient costs, in the
measure its targets are set in, on a machine whose speed varies from minute to minute. (A timer
per step adds about a microsecond to each: for programs of small steps, read the shares, not the
whole ratio.)
Set OMP_NUM_THREADS=1 for the one compute thread ``mutad-bench`` uses.
"""

import argparse
import collections
import cProfile
import pstats
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mutad  # noqa: E402
from mutad.bench.harness import pin_allocator  # noqa: E402
from mutad.bench.workloads import WORKLOADS  # noqa: E402
from mutad.core.tape import Tape  # noqa: E402


def _record_name(record):
    """What a record on the replay's tape is: a step's own ``(step, a, b)`` by the step's class,
    a recomputed one (``Recomputed``, the record, its plans) by the record it recomputes for."""
    if type(record) is not tuple:
        return type(record).__name__
    owner = type(record[0]).__name__
    return f"{owner}({type(record[1]).__name__})" if owner == "Recomputed" else owner


def _step_name(step):
    operation = getattr(step, "ufunc", None) or getattr(step, "function", None)
    name = getattr(operation, "__name__", None)
    return type(step).__name__ if name is None else f"{type(step).__name__} {name}"


def parts(gradient, problem, calls):
    """``(gradient over forward, {part: its time over the forward})`` over ``calls`` rounds of
    the replayed ``gradient``; None where the program is traced rather than replayed."""
    programs = [p for p in gradient.programs.values() if type(p) is not str]
    if len(programs) != 1:
        return None
    program = programs[0]
    spent = collections.Counter()

    def timed(step):
        name = "step " + _step_name(step)

        def run(values, tape):
            start = time.perf_counter()
            try:
                step(values, tape)
            finally:
                spent[name] += time.perf_counter() - start
        return run

    reverse = Tape.reverse

    def reverse_timed(record, shadows):  # the records the replay's own loop takes off
        start = time.perf_counter()
        try:
            reverse(record, shadows)
        finally:
            spent["reverse " + _record_name(record)] += time.perf_counter() - start

    steps = program.steps
    program.steps = [timed(step) for step in steps]
    Tape.reverse = staticmethod(reverse_timed)
    forward = total = 0.0
    try:
        for _ in range(calls):
            start = time.perf_counter()
            gradient(*problem.args)
            middle = time.perf_counter()
            problem.numpy_forward(*problem.args)
            forward += time.perf_counter() - middle
            total += middle - start
    finally:
        Tape.reverse = staticmethod(reverse)
        program.steps = steps
    return total / forward, {name: t / forward for name, t in spent.items()}


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
    parser.add_argument("--parts", action="store_true",
                        help="time the replay's steps and the records of its reverse pass, in "
                             "units of the NumPy forward (implies --replay)")
    parser.add_argument("--calls", type=int, default=10, help="gradient calls to profile")
    parser.add_argument("--top", type=int, default=10)
    options = parser.parse_args(argv)

    workload = WORKLOADS[options.workload]
    params = dict(workload.sizes["full"][0])
    params.update(options.param)
    problem = workload.build(**params)

    if options.replay or options.parts:
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
    if options.parts:
        pin_allocator("timing")  # as mutad-bench times: no page faults on fresh blocks
        gradient(*problem.args)  # the second call replays and compiles
        measured = parts(gradient, problem, options.calls)
        print(f"{workload.label} {workload.name} {params} policy={options.policy}, replayed, "
              f"{options.calls} gradient calls, in NumPy forwards")
        if measured is None:
            print(f"not replayed: {gradient.reasons}")
            return
        ratio, shares = measured
        print(f"{'gradient':<40} {ratio:8.3f}")
        for name, share in sorted(shares.items(), key=lambda item: -item[1])[:options.top]:
            print(f"  {name:<38} {share:8.3f}")
        return
    profiler = cProfile.Profile()
    profiler.runcall(differentiate)
    print(f"{workload.label} {workload.name} {params} policy={options.policy}"
          f"{', replayed' if options.replay else ''}, {options.calls} gradient calls")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(options.top)
    stats.sort_stats("cumulative").print_stats(options.top)


if __name__ == "__main__":
    main()
