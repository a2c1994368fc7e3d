"""A library written the way filtering packages are: NumPy's names imported at module level,
long before any differentiation, and work arrays allocated with them and filled in place.
Used by test_allocation.py as third-party code the differentiated function calls."""

from numpy import dot, eye, log, zeros
import numpy


def kalman_loglik(observations, a, q, r):
    """The log-likelihood of scalar observations of a two-state (position, velocity) model
    x_{k+1} = F x_k + w, y_k = x_k[0] + v, with process noise ``q``, measurement noise ``r``
    and a damping ``a`` on the velocity."""
    F = eye(2)
    F[0, 1] = 1.0
    F[1, 1] = a
    Q = zeros((2, 2))
    Q[1, 1] = q
    x = zeros(2)          # state, updated in place
    P = eye(2) * 10.0     # covariance, updated in place
    total = 0.0
    for y in observations:
        x[:] = dot(F, x)
        P[:] = dot(dot(F, P), F.T) + Q
        s = P[0, 0] + r
        gain = P[:, 0] / s
        innovation = y - x[0]
        x += gain * innovation
        P -= numpy.outer(gain, P[0, :])
        total = total - 0.5 * (log(2.0 * numpy.pi * s) + innovation ** 2 / s)
    return total
