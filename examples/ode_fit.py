"""Fitting an ODE's parameters through ``scipy.integrate.solve_ivp`` with
``scipy.optimize.minimize``.

Predators and prey follow the Lotka–Volterra equations, whose right-hand side is written below
as NumPy code often is, filling an ``np.empty`` array in place. We observe both populations at
a few times, with noise, and fit the four rates by least squares. ``mutad.value_and_grad``
gives ``minimize(..., jac=True)`` the misfit and its gradient through ``solve_ivp``, called by
SciPy's own name: mutad computes it by going back through SciPy's RK45 steps, so the gradient is
the exact derivative of the misfit SciPy computes, at the step sizes SciPy chose.

Run it with ``python examples/ode_fit.py``; it takes a few seconds.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import minimize

import mutad

TIMES = np.linspace(0.5, 5.0, 10)  # when the populations are counted
START = np.array([10.0, 5.0])  # prey, predators at t = 0


def lotka_volterra(t, z, theta):
    """dz/dt for prey z[0] and predators z[1]; ``theta = (birth, predation, growth, death)``."""
    dz = np.empty(2)
    dz[0] = theta[0] * z[0] - theta[1] * z[0] * z[1]
    dz[1] = theta[2] * z[0] * z[1] - theta[3] * z[1]
    return dz


def misfit(log_theta, counts, rtol=1e-7):
    """The squared misfit of the model's populations at ``TIMES`` to ``counts``; the rates are
    ``exp(log_theta)``, so that the optimiser may try any real numbers. ``rtol`` is the
    solves' tolerance: how close the misfit is to that of the exact solution."""
    theta = np.exp(log_theta)
    sol = solve_ivp(lotka_volterra, (0.0, TIMES[-1]), START, method="RK45", t_eval=TIMES,
                    args=(theta,), rtol=rtol, atol=1e-2 * rtol)
    return 0.5 * np.sum((sol.y - counts) ** 2)


def main():
    true_theta = np.array([1.0, 0.1, 0.075, 1.5])
    clean = solve_ivp(lotka_volterra, (0.0, TIMES[-1]), START, t_eval=TIMES,
                      args=(true_theta,), rtol=1e-10, atol=1e-12).y
    counts = clean + 0.1 * np.random.default_rng(0).standard_normal(clean.shape)

    start = np.log(np.array([0.9, 0.11, 0.07, 1.6]))  # a guess near the truth
    start_before = start.copy()
    # The gradient against finite differences, both at a tight tolerance.
    tight = 1e-10
    gradient = mutad.grad(lambda log_theta: misfit(log_theta, counts, tight))(start)
    step = 1e-6
    for i in range(4):
        e = np.zeros(4)
        e[i] = step
        estimate = (misfit(start + e, counts, tight)
                    - misfit(start - e, counts, tight)) / (2 * step)
        relative = abs(gradient[i] - estimate) / abs(estimate)
        print(f"d misfit / d log_theta[{i}]: mutad {gradient[i]:.8g}, "
              f"finite differences {estimate:.8g}, relative difference {relative:.1e}")
        assert relative < 1e-4, "mutad's gradient disagrees with finite differences"
    assert np.array_equal(start, start_before), "the caller's array must come back as it was"

    # The fit, at solve_ivp's tolerance of 1e-7: gradients as accurate as the values.
    value = misfit(start, counts)
    result = minimize(mutad.value_and_grad(misfit), start, args=(counts,), jac=True,
                      method="BFGS", options=dict(gtol=1e-5))
    theta = np.exp(result.x)
    print(f"minimize: {result.nit} iterations, {result.nfev} evaluations, "
          f"misfit {value:.4f} -> {result.fun:.4f}")
    print("estimated rates", np.round(theta, 4), "true", true_theta)
    assert result.fun < value and np.allclose(theta, true_theta, rtol=0.05)


if __name__ == "__main__":
    main()
