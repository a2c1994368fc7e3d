"""Gradients of nested quadratures (``dblquad``, ``tplquad``, ``nquad``, a ``quad`` of a
function that calls ``quad``) by ``mutad.value_and_grad``, against SciPy's plain call.

Each integral is of ``exp(-k x y) cos(y)`` (a third variable ``z`` multiplying in ``tplquad``),
differentiated in ``k`` and in an upper limit ``c`` (the outer range, and the inner range
``x c``). Per round: SciPy's plain call, then the gradient; the ratio of the two within a
round, reported as the median [min-max] over the rounds (the machine being shared, no absolute
time). Also reported: how often the integrand was called, by SciPy's call and by the gradient.

    OMP_NUM_THREADS=1 python benchmarks/nested_quad.py
    OMP_NUM_THREADS=1 python benchmarks/nested_quad.py --rounds 5 --kinds dblquad,tplquad
"""

import argparse
import statistics
import time

import numpy as np
import scipy.integrate

import mutad

CALLS = [0]


def integrand(*variables):
    CALLS[0] += 1
    *inner, x, k = variables
    return np.exp(-k * x * np.prod(inner)) * np.cos(inner[0])


KINDS = {
    "dblquad": lambda p: scipy.integrate.dblquad(
        integrand, 0.0, p[1], 0.0, lambda x: x * p[1], args=(p[0],))[0],
    "nquad": lambda p: scipy.integrate.nquad(
        integrand, [lambda x, k: [0.0, x * p[1]], [0.0, p[1]]], args=(p[0],))[0],
    "quad of quad": lambda p: scipy.integrate.quad(
        lambda x: scipy.integrate.quad(integrand, 0.0, x * p[1], args=(x, p[0]))[0],
        0.0, p[1])[0],
    "tplquad": lambda p: scipy.integrate.tplquad(
        integrand, 0.0, p[1], 0.0, 1.0, 0.0, lambda x, y: x * p[1], args=(p[0],))[0],
}


def _timed(f):
    CALLS[0] = 0
    start = time.perf_counter()
    f()
    return time.perf_counter() - start, CALLS[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    options = parser.parse_args()
    p = np.array([0.7, 1.2])
    for kind in options.kinds.split(","):
        f = KINDS[kind]
        gradient = mutad.value_and_grad(f)
        ratios = []
        for _ in range(options.rounds):
            plain, plain_calls = _timed(lambda: f(p))
            differentiated, calls = _timed(lambda: gradient(p))
            ratios.append(differentiated / plain)
        print(f"{kind:>13}: gradient / plain {statistics.median(ratios):8.0f} "
              f"[{min(ratios):.0f}-{max(ratios):.0f}]; integrand calls {plain_calls} plain, "
              f"{calls} by the gradient")


if __name__ == "__main__":
    main()
