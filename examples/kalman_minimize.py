"""Maximum likelihood for a Kalman filter's noise levels, with scipy.optimize.minimize.

A target moves with nearly constant velocity; we see its position with noise. The filter below
is written as filtering code usually is: the state and covariance start as ``np.zeros`` and
``np.eye`` and are updated in place every step (``x += K * innovation``, ``P -= K @ H @ P``).
``mutad.value_and_grad`` turns its negative log-likelihood into the ``(value, gradient)``
function that ``minimize(..., jac=True)`` wants, with the filter's code unchanged.

Run it with ``python examples/kalman_minimize.py``; it takes a second or two.
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

STEPS = 80


def negative_loglik(log_noise, ys):
    """-log p(ys | q, r) of a constant-velocity model; ``log_noise = (log q, log r)``."""
    q, r = np.exp(log_noise[0]), np.exp(log_noise[1])
    F = np.array([[1.0, 1.0], [0.0, 1.0]])  # position += velocity, per step
    H = np.array([[1.0, 0.0]])  # we observe the position
    Q = q * np.array([[1.0 / 3.0, 0.5], [0.5, 1.0]])  # white-noise acceleration
    x = np.zeros(2)
    P = np.eye(2) * 100.0  # a vague prior
    nll = 0.0
    for y in ys:
        x = F @ x
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + r
        K = P @ H.T / S
        innovation = y - H @ x
        x += K[:, 0] * innovation[0]
        P -= K @ H @ P
        nll += 0.5 * (np.log(2.0 * np.pi * S[0, 0]) + innovation[0] ** 2 / S[0, 0])
    return nll


def simulate(q, r, steps=STEPS, seed=0):
    rng = np.random.default_rng(seed)
    velocity = np.cumsum(np.sqrt(q) * rng.standard_normal(steps))
    position = np.cumsum(velocity)
    return position + np.sqrt(r) * rng.standard_normal(steps)


def main():
    true_q, true_r = 0.01, 4.0
    ys = simulate(true_q, true_r)
    start = np.array([0.0, 0.0])  # q = r = 1
    start_before = start.copy()

    value, gradient = mutad.value_and_grad(negative_loglik)(start, ys)
    step = 1e-6
    for i in range(2):
        e = np.zeros(2)
        e[i] = step
        estimate = (negative_loglik(start + e, ys) - negative_loglik(start - e, ys)) / (2 * step)
        relative = abs(gradient[i] - estimate) / abs(estimate)
        print(f"d nll / d log_noise[{i}]: mutad {gradient[i]:.10g}, "
              f"finite differences {estimate:.10g}, relative difference {relative:.1e}")
        assert relative < 1e-6, "mutad's gradient disagrees with finite differences"
    assert np.array_equal(start, start_before), "the caller's array must come back as it was"

    result = minimize(mutad.value_and_grad(negative_loglik), start, args=(ys,), jac=True,
                      method="L-BFGS-B")
    q, r = np.exp(result.x)
    print(f"minimize: {result.nit} iterations, {result.nfev} evaluations, "
          f"nll {value:.4f} -> {result.fun:.4f}")
    print(f"estimated q = {q:.4g} (true {true_q}), r = {r:.4g} (true {true_r})")
    assert result.success and result.fun < value
    assert np.linalg.norm(mutad.grad(negative_loglik)(result.x, ys)) < 1e-3


if __name__ == "__main__":
    main()
