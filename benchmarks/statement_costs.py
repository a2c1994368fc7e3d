"""What one traced statement of a scalar loop costs: microseconds per statement of a gradient
call, forward pass and whole call, with one compute thread.

    OMP_NUM_THREADS=1 python benchmarks/statement_costs.py
    OMP_NUM_THREADS=1 python benchmarks/statement_costs.py --statement "x[i, j] -= s" --runs 9

Each statement runs ``--count`` times in a loop inside ``mutad.gradient`` of
``(A * A).sum() + s * s`` over a 40 x 40 array ``A`` and a 0-d ``s``; the times are process
time (CPU time, steadier than the wall clock on a shared machine), medians of ``--runs`` calls
after one untimed call, divided by the count: the forward pass (the loop alone, timed inside
the function) and the whole call (the reverse pass, and the call's fixed cost spread over the
count). Meant for whoever optimises the traced engine's per-statement cost. Every statement
keeps its values finite at any count a run takes (``tests/test_statement_costs_benchmark.py``):
a value grown to infinity would send the pullbacks down their masked path and time that.

A statement made of two (``--pairs``) is listed with what it costs beyond its two parts run
alone. That excess (about 5 us a pair) is no work of mutad's: the two loops make the same
Python calls as the parts together, and run the same machine instructions within 1% (valgrind's
cachegrind, hash seed fixed: the 1% is mostly the cyclic collector's, 0.5 us at most); it does
not grow with the number of records alive (100 to 5000 statements a call: the same cost per
statement), and the interpreter's specialised instructions end up the same. What grows is the
simulated data-cache misses (+9%) and branch mispredicts (+5%): a loop that alternates two
statements' code runs at fewer instructions per cycle than one repeating one statement's, as
the processor's predictors and caches hold one path better than two. Cutting it means fewer
instructions per statement, not a lookup that misses.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

import mutad  # noqa: E402

def _read(A, s, k):
    A[3, 5]


def _write(A, s, k):
    A[3, 5] = s


def _write_number(A, s, k):
    A[3, 5] = 0.5


def _scale(A, s, k):
    s * 1.0


def _subtract(A, s, k):
    A[3, 5] -= s


def _add(A, s, k):
    A[3, 5] += s


def _multiply(A, s, k):
    A[3, 5] *= 1.0001


def _divide(A, s, k):
    A[3, 5] /= 1.0001


def _stencil(A, s, k):
    i, j = 1 + k % 30, 1 + k % 29
    A[i, j] = (A[i - 1, j] + A[i, j] + A[i + 1, j]) / 3.0


def _update(A, s, k):
    # k below i and j, as in LU's and Cholesky's loops: row 0 and column 0 are read, never
    # written, so each element moves by the same amount at each of its visits and the values
    # grow linearly in the count. (Reading a row and column that the loop also writes,
    # ``A[7, 7] -= A[7, 7] * A[7, 7]`` among them, grows them geometrically until they
    # overflow, and the pullbacks of infinite values take the masked products' slow path:
    # the benchmark would time that path, not the statement.)
    i, j = 1 + k % 30, 1 + k % 29
    A[i, j] -= A[i, 0] * A[0, j]


STATEMENTS = {
    "x[i, j]": _read,
    "x[i, j] = s": _write,
    "x[i, j] = 0.5": _write_number,
    "y = s * 1.0": _scale,
    "x[i, j] -= s": _subtract,
    "x[i, j] += s": _add,
    "x[i, j] *= 1.0001": _multiply,
    "x[i, j] /= 1.0001": _divide,
    "x[i, j] = (x[i-1, j] + x[i, j] + x[i+1, j]) / 3.0": _stencil,
    "x[i, j] -= x[i, k] * x[k, j]": _update,
}
"""Each statement as a function of the array, the scalar and the loop's counter."""

PAIRS = [("y = s * 1.0", "x[i, j] = s"), ("y = s * 1.0", "x[i, j] = 0.5")]
"""Statements run two at a time by ``--pairs``."""


def cost(bodies, count, runs):
    """``(forward, whole)``: microseconds per statement, the medians of ``runs`` gradient calls
    of a loop of ``count`` runs of ``bodies`` (one or more statements, in turn)."""
    forward = []

    def loss(A, s):
        start = time.process_time()
        for k in range(count):
            for body in bodies:
                body(A, s, k)
        forward.append(time.process_time() - start)
        return (A * A).sum() + s * s

    A = np.random.default_rng(0).standard_normal((40, 40))
    s = np.float64(0.3)
    mutad.gradient(loss, A, s)  # untimed: first calls make what later ones share
    forward.clear()
    whole = []
    for _ in range(runs):
        start = time.process_time()
        mutad.gradient(loss, A, s)
        whole.append(time.process_time() - start)
    scale = 1e6 / count
    return statistics.median(forward) * scale, statistics.median(whole) * scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--statement", action="append", dest="statements",
                        help="one of: " + "; ".join(STATEMENTS) + " (repeat it for several; "
                        "default: all)")
    parser.add_argument("--pairs", action="store_true",
                        help="also the pairs " + "; ".join(" then ".join(p) for p in PAIRS))
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    names = args.statements or list(STATEMENTS)
    for name in names:
        if name not in STATEMENTS:
            parser.error(f"unknown statement {name!r}")
    rows = {}
    print(f"{'statement':58} {'forward us':>10} {'whole us':>10}")
    for name in names:
        rows[name] = cost([STATEMENTS[name]], args.count, args.runs)
        print(f"{name:58} {rows[name][0]:10.2f} {rows[name][1]:10.2f}")
    if args.pairs:
        print(f"{'pair':58} {'forward us':>10} {'whole us':>10}  beyond its parts (forward)")
        for first, second in PAIRS:
            parts = [rows.get(n) or cost([STATEMENTS[n]], args.count, args.runs)
                     for n in (first, second)]
            pair = cost([STATEMENTS[first], STATEMENTS[second]], args.count, args.runs)
            label = f"{first}; {second}"
            rows[label] = pair
            print(f"{label:58} {pair[0]:10.2f} {pair[1]:10.2f}  "
                  f"{pair[0] - parts[0][0] - parts[1][0]:+.2f}")
    return rows


if __name__ == "__main__":
    main()
