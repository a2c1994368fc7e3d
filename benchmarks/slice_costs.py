"""What one traced statement on slices costs: microseconds per statement of a gradient call,
forward pass and whole call, with one compute thread.

    OMP_NUM_THREADS=1 python benchmarks/slice_costs.py
    OMP_NUM_THREADS=1 python benchmarks/slice_costs.py "x[i, :] *= c" --runs 9

The statements of the stencil and linear-algebra loops of ``benchmarks/kernels.py`` (jacobi,
seidel's rows, syrk, trmm, lu), measured as ``statement_costs.py`` measures a scalar loop's:
each runs ``--count`` times in a loop inside ``mutad.gradient`` of ``(A * A).sum() + s * s``
over a 40 x 40 array ``A`` and a 0-d ``s``; process time, medians of ``--runs`` calls after
one untimed call, divided by the count: the forward pass (the loop alone) and the whole call
(the reverse pass, and the call's fixed cost spread over the count). Meant for whoever
optimises the traced engine's writes of slices, views and products of slices.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # statement_costs, beside this

from statement_costs import cost  # noqa: E402


def _scale_row(A, s, k):
    A[k % 40, :] *= 1.0001


def _axpy(A, s, k):
    i, j = k % 40, 1 + k % 39
    A[i, :j] += 0.5 * A[:j, 7]


def _smooth(A, s, k):
    A[1:-1, 3] = (A[:-2, 3] + A[1:-1, 3] + A[2:, 3]) / 3


def _row_product(A, s, k):
    i = k % 39
    A[i, :] += A[i + 1:, i] @ A[i + 1:, :] / 64  # (/ 64: the values stay finite)


def _syrk(A, s, k):
    i, j = k % 40, k % 39
    A[i, :i + 1] += 1.5 * A[i, j] * A[:i + 1, j]


def _seidel_row(A, s, k):
    i = 1 + k % 38
    A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:] + A[i + 1, :-2]
                   + A[i + 1, 1:-1] + A[i + 1, 2:]) / 9


def _dot_update(A, s, k):
    i = 1 + k % 39
    j = k % i
    A[i, j] -= A[i, :j] @ A[:j, j]


def _copy_row(A, s, k):
    A[k % 40, :] = A[(k + 7) % 40, :]


STATEMENTS = {
    "x[i, :] *= c": _scale_row,
    "x[i, :k] += a * x[:k, j]": _axpy,
    "x[1:-1, j] = (x[:-2, j] + x[1:-1, j] + x[2:, j]) / 3": _smooth,
    "x[i, :] += x[i+1:, i] @ x[i+1:, :] / 64": _row_product,
    "x[i, :i+1] += a * x[i, j] * x[:i+1, j]": _syrk,
    "x[i, 1:-1] += (seven neighbouring rows) / 9": _seidel_row,
    "x[i, j] -= x[i, :j] @ x[:j, j]": _dot_update,
    "x[i, :] = x[j, :]": _copy_row,
}
"""Each statement as a function of the array, the scalar and the loop's counter."""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="STATEMENT",
                        help="the statements to time (default: all): " + "; ".join(STATEMENTS))
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in STATEMENTS]
    if unknown:
        parser.error(f"no statement {unknown[0]!r}")
    rows = {}
    print(f"{'statement':52} {'forward us':>10} {'whole us':>10}")
    for name in args.names or STATEMENTS:
        rows[name] = cost([STATEMENTS[name]], args.count, args.runs)
        print(f"{name:52} {rows[name][0]:10.2f} {rows[name][1]:10.2f}", flush=True)
    return rows


if __name__ == "__main__":
    main()
