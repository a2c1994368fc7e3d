"""Fitting an ODE's parameters through an RK4 integrator with a preallocated stage buffer.

Lotka-Volterra predator-prey dynamics, integrated by the classical Runge-Kutta scheme written as
numerical codes write it: the four stages live in one work array ``K = np.empty((4, 2))``, the
right-hand side fills a row of it in place, and the state is advanced with ``y += ...``. We fit
the four rates to noisy observations with ``scipy.optimize.minimize``, the gradient coming from
``mutad.value_and_grad`` on the unchanged integrator.

Run it with ``python examples/rk4_fit.py``; it takes a second or two.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np
from scipy.optimize import minimize

import mutad

STEPS = 25
DT = 0.1


def rhs(y, rates, out):
    """Lotka-Volterra right-hand side, written into ``out``."""
    out[0] = rates[0] * y[0] - rates[1] * y[0] * y[1]
    out[1] = rates[3] * y[0] * y[1] - rates[2] * y[1]


def trajectory_misfit(rates, y0, observations):
    """Sum of squared differences between the RK4 trajectory and the observations."""
    K = np.empty((4, 2))
    stage = np.empty(2)
    y = y0.copy()
    misfit = 0.0
    for observed in observations:
        rhs(y, rates, K[0])
        stage[:] = y + 0.5 * DT * K[0]
        rhs(stage, rates, K[1])
        stage[:] = y + 0.5 * DT * K[1]
        rhs(stage, rates, K[2])
        stage[:] = y + DT * K[2]
        rhs(stage, rates, K[3])
        y += DT / 6.0 * (K[0] + 2.0 * K[1] + 2.0 * K[2] + K[3])
        misfit += np.sum((y - observed) ** 2)
    return misfit


def observations_of(rates, y0, seed=0):
    """Noisy observations of the trajectory, by the same integrator on plain arrays."""
    rng = np.random.default_rng(seed)
    K, y, rows = np.empty((4, 2)), y0.copy(), []
    for _ in range(STEPS):
        rhs(y, rates, K[0])
        rhs(y + 0.5 * DT * K[0], rates, K[1])
        rhs(y + 0.5 * DT * K[1], rates, K[2])
        rhs(y + DT * K[2], rates, K[3])
        y += DT / 6.0 * (K[0] + 2.0 * K[1] + 2.0 * K[2] + K[3])
        rows.append(y + 0.01 * rng.standard_normal(2))
    return np.array(rows)


def main():
    true_rates = np.array([1.0, 0.5, 0.8, 0.4])
    y0 = np.array([1.5, 1.0])
    data = observations_of(true_rates, y0)
    rates = np.array([0.8, 0.6, 0.9, 0.3])
    rates_before = rates.copy()

    gradient, = mutad.gradient(trajectory_misfit, rates, y0, data, argnums=(0,))
    assert np.array_equal(rates, rates_before), "the caller's array must come back as it was"
    direction = np.array([0.3, -0.2, 0.5, 0.1])
    step = 1e-6
    estimate = (trajectory_misfit(rates + step * direction, y0, data)
                - trajectory_misfit(rates - step * direction, y0, data)) / (2 * step)
    relative = abs(gradient @ direction - estimate) / abs(estimate)
    print(f"gradient . v = {gradient @ direction:.10g}, finite differences {estimate:.10g}, "
          f"relative difference {relative:.1e}")
    assert relative < 1e-6, "mutad's gradient disagrees with finite differences"

    first = trajectory_misfit(rates, y0, data)
    result = minimize(mutad.value_and_grad(trajectory_misfit), rates, args=(y0, data), jac=True,
                      method="L-BFGS-B")
    print(f"misfit {first:.4g} -> {result.fun:.4g} in {result.nit} iterations "
          f"({result.nfev} gradients)")
    print(f"fitted rates {np.round(result.x, 3)}, true {true_rates}")
    assert result.fun < 0.01 * first and np.allclose(result.x, true_rates, atol=0.05)


if __name__ == "__main__":
    main()
