"""The fixed cost of one differentiation: microseconds per call of ``mutad.gradient`` of a
one-operation function, beside HIPS autograd's ``grad`` and NumPy's forward alone, in one
process; and what mutad imported costs the user's plain NumPy code outside a differentiation.

    OMP_NUM_THREADS=1 python benchmarks/fixed_cost.py
    OMP_NUM_THREADS=1 python benchmarks/fixed_cost.py --trees /path/to/old /path/to/new
    OMP_NUM_THREADS=1 python benchmarks/fixed_cost.py --plain
    OMP_NUM_THREADS=1 python benchmarks/fixed_cost.py --imports jax

The function is ``np.sin(x).sum()`` of 10 floats. Each row is the median, over ``--rounds``
rounds of ``--calls`` calls, of the process time (CPU time, steadier than the wall clock on a
shared machine) per call. With ``--trees``, each round is a fresh interpreter importing mutad
from one tree after the other, alternately, so that both trees see the same machine load;
autograd, where installed, runs in every interpreter, as the reference the trees are compared
with. ``--plain`` times NumPy calls made outside any differentiation, alternately in an
interpreter that never imported mutad and in one that imported it and ran a gradient first
(which installed and removed the allocation mode's bindings). ``--imports`` names modules each
interpreter imports first: a library's modules that bind NumPy are namespaces the allocation
mode swaps on every call.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

ROOT = Path(__file__).resolve().parent.parent

CASES = """
import importlib, os, sys, time
import numpy as np
for name in filter(None, os.environ.get("FIXED_COST_IMPORTS", "").split(",")):
    importlib.import_module(name)
import mutad
x = np.linspace(0.1, 1.0, 10)
f = lambda x: np.sin(x).sum()
cases = {
    "numpy forward": lambda: f(x),
    "mutad.gradient": lambda: mutad.gradient(f, x),
    "mutad.grad(replay=True)": (lambda g: lambda: g(x))(mutad.grad(f, replay=True)),
    "mutad.value_and_grad": (lambda g: lambda: g(x))(mutad.value_and_grad(f)),
    "mutad.jvp": lambda: mutad.jvp(f, (x,), (x,)),
}
try:
    import autograd, autograd.numpy as anp
    cases["autograd.grad"] = (lambda g: lambda: g(x))(autograd.grad(lambda x: anp.sin(x).sum()))
except ImportError:
    pass
"""

PLAIN_CASES = """
import sys, time
import numpy as np
import scipy.spatial.distance
import scipy.special
if sys.argv[2] == "mutad":
    import mutad
    mutad.gradient(lambda x: (np.zeros(3) + x).sum(), np.ones(3))
x = np.linspace(0.1, 1.0, 10)
def errstate():
    with np.errstate(divide="ignore"):
        pass
cases = {"np.zeros(3)": lambda: np.zeros(3), "np.sin(x)": lambda: np.sin(x),
         "np.errstate()": errstate, "np.seterr(**np.geterr())": lambda: np.seterr(**np.geterr()),
         "scipy.special.expit(x)": lambda: scipy.special.expit(x),
         "np.linalg.norm(x)": lambda: np.linalg.norm(x),
         "np.ma: (m * 2.0).sum()": (lambda m: lambda: (m * 2.0).sum())(
             np.ma.masked_array(x, mask=x > 0.85)),
         "distance.correlation(x, y)": lambda: scipy.spatial.distance.correlation(x, x[::-1])}
"""

TIMED = """
calls = int(sys.argv[1])
for call in cases.values():
    for _ in range(max(calls // 10, 1)):
        call()
for name, call in cases.items():
    start = time.process_time()
    for _ in range(calls):
        call()
    print(name, (time.process_time() - start) / calls * 1e6)
"""
"""Run in the child after ``CASES`` or ``PLAIN_CASES``: each case ``argv[1]`` times, after a
tenth as many untimed calls, printed as ``name microseconds``."""


def run(code, *args, tree=ROOT, imports=""):
    """One fresh interpreter running ``code`` with mutad imported from ``tree`` (after the
    modules ``imports`` names, separated by commas): ``{row: us}``."""
    environment = {**os.environ, "PYTHONPATH": str(tree), "FIXED_COST_IMPORTS": imports}
    # (run in ``tree``: ``-c`` puts the working directory first on the path, which would
    # import the checkout the benchmark was started in, whatever ``tree`` says)
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, check=True, env=environment, cwd=tree).stdout
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in out.splitlines()}


def medians(results):
    """The median per row of ``results``, a list of ``{row: us}``."""
    return {row: statistics.median(r[row] for r in results) for row in results[0]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT],
                        help="repositories to import mutad from, alternately (default: this one)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--imports", default="",
                        help="modules to import before mutad, separated by commas (jax)")
    parser.add_argument("--plain", action="store_true",
                        help="time plain NumPy calls with mutad imported against without")
    options = parser.parse_args(argv)
    if options.plain:
        kinds = ("numpy", "mutad")
        results: dict = {kind: [] for kind in kinds}
        for _ in range(options.rounds):
            for kind in kinds:
                results[kind].append(run(PLAIN_CASES + TIMED, options.calls, kind, tree=options.trees[-1]))
        without, with_mutad = medians(results["numpy"]), medians(results["mutad"])
        print(f"{'outside a differentiation':28s} {'numpy (us)':>10s} {'mutad (us)':>10s} "
              f"{'ratio':>6s}")
        for row in without:
            print(f"{row:28s} {without[row]:10.3f} {with_mutad[row]:10.3f} "
                  f"{with_mutad[row] / without[row]:6.2f}")
        return
    results = {tree: [] for tree in options.trees}
    for _ in range(options.rounds):
        for tree in options.trees:
            results[tree].append(run(CASES + TIMED, options.calls, tree=tree,
                                      imports=options.imports))
    table = {tree: medians(rounds) for tree, rounds in results.items()}
    rows = list(table[options.trees[0]])
    print(f"{'us per call (process time)':28s}" + "".join(f" {str(i):>10s}" for i in
                                                         range(len(options.trees))))
    for row in rows:
        print(f"{row:28s}" + "".join(f" {table[tree][row]:10.1f}" for tree in options.trees))
    for i, tree in enumerate(options.trees):
        line = table[tree]
        if "autograd.grad" in line:
            print(f"tree {i} ({tree}): mutad.gradient / autograd.grad = "
                  f"{line['mutad.gradient'] / line['autograd.grad']:.2f}")


if __name__ == "__main__":
    main()
