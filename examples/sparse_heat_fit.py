"""A diffusivity fitted through a sparse implicit heat solver, with scipy.optimize.minimize.

Heat diffuses along a rod whose conductivity k(x) varies: u_t = (k u_x)_x, the ends held at 0.
The solver is written as sparse solvers usually are: the stiffness matrix is assembled with
``scipy.sparse.diags`` from the conductivities at the cell faces, the Crank-Nicolson matrix
``I + dt/2 K`` is factorized once with ``scipy.sparse.linalg.splu``, and every step solves with
that factorization, writing the new interior temperatures in place (``u[1:-1] = ...``).

We measure the temperature at a few times and recover k(x) = exp(c0 + c1 x + c2 x^2) by least
squares: ``mutad.value_and_grad`` turns the misfit into the ``(value, gradient)`` function that
``minimize(..., jac=True)`` wants, through SciPy's own sparse calls. The derivative of each
solve is one more solve with the same factorization (transposed); no dense matrix is formed.

Run it with ``python examples/sparse_heat_fit.py``; it takes a few seconds.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from scipy.optimize import minimize

import mutad

CELLS, STEPS, DT = 80, 40, 2e-4
X = np.linspace(0.0, 1.0, CELLS + 2)  # the nodes, ends included
FACES = 0.5 * (X[:-1] + X[1:])  # where the conductivities live
H = X[1] - X[0]
OBSERVED = (10, 20, 40)  # the steps after which the temperature is measured


def conductivity(coefficients):
    return np.exp(coefficients[0] + coefficients[1] * FACES + coefficients[2] * FACES ** 2)


def simulate(coefficients, u0):
    """The interior temperatures after each step in OBSERVED: Crank-Nicolson, sparse."""
    k = conductivity(coefficients)
    stiffness = scipy.sparse.diags([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], [-1, 0, 1],
                                   format="csc") / H ** 2
    identity = scipy.sparse.identity(CELLS, format="csc")
    implicit = scipy.sparse.linalg.splu(identity + 0.5 * DT * stiffness)  # factorized once
    explicit = identity - 0.5 * DT * stiffness
    u = u0.copy()
    seen = []
    for step in range(1, STEPS + 1):
        u[1:-1] = implicit.solve(explicit @ u[1:-1])  # the ends stay at 0
        if step in OBSERVED:
            seen.append(u[1:-1].copy())
    return seen


def misfit(coefficients, u0, measured):
    return 0.5 * sum(np.sum((u - m) ** 2) for u, m in zip(simulate(coefficients, u0), measured))


def main():
    u0 = np.exp(-80.0 * (X - 0.4) ** 2)
    u0[[0, -1]] = 0.0
    truth = np.array([-0.5, 1.0, -1.5])
    measured = simulate(truth, u0)
    start = np.zeros(3)
    start_before, u0_before = start.tobytes(), u0.tobytes()

    value, gradient = mutad.value_and_grad(misfit)(start, u0, measured)
    step = 1e-6
    for i in range(3):
        e = np.zeros(3)
        e[i] = step
        estimate = (misfit(start + e, u0, measured) - misfit(start - e, u0, measured)) / (2 * step)
        relative = abs(gradient[i] - estimate) / abs(estimate)
        print(f"d misfit / d c{i}: mutad {gradient[i]:.10g}, finite differences {estimate:.10g}, "
              f"relative difference {relative:.1e}")
        assert relative < 1e-6, "mutad's gradient disagrees with finite differences"
    assert start.tobytes() == start_before and u0.tobytes() == u0_before, \
        "the caller's arrays must come back as they were"

    result = minimize(mutad.value_and_grad(misfit), start, args=(u0, measured), jac=True,
                      method="BFGS", options={"gtol": 1e-10})
    print(f"minimize: {result.nit} iterations, {result.nfev} evaluations, "
          f"misfit {value:.3e} -> {result.fun:.3e}")
    print(f"recovered c = {np.round(result.x, 4)} (true {truth})")
    assert np.allclose(result.x, truth, atol=1e-3), "the fit should recover the conductivity"


if __name__ == "__main__":
    main()
