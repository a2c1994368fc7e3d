"""Maximum likelihood for a multivariate Gaussian by Newton's method, with ``mutad.hessian``.

The negative log-likelihood of data x_1..x_n under N(mu, Sigma) is

    nll(mu, Sigma) = n/2 log det Sigma + 1/2 sum_i (x_i - mu)^T Sigma^-1 (x_i - mu),

and it is written the way numerical code computes it: ``mutad.linalg.cholesky_`` overwrites
Sigma's lower triangle with its Cholesky factor L in place, ``mutad.linalg.ldiv_`` overwrites
the residuals with Sigma^-1 (x - mu) in place, and log det Sigma is twice the sum of log L_kk.

The parameters are mu and the lower triangle of Sigma. Each Newton step takes the gradient and
the full Hessian (``mutad.hessian``: forward mode over reverse mode, one ``jvp`` of the gradient
per parameter, through the in-place factorisation and solves), shifts the Hessian's
diagonal where the likelihood is not convex yet, and halves the step until the likelihood is
no worse (to within rounding) and Sigma stays positive definite (``cholesky_`` raises
``NotPositiveDefiniteError``, leaving its argument as it was, when it is not). Newton's method
converges quadratically: a handful of iterations reach the closed form, the sample mean and
the (biased) sample covariance, which the script checks.

Run it with ``python examples/newton_gaussian_mle.py``; it takes about a second.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad
from mutad.errors import NotPositiveDefiniteError

DIMENSION = 3
SAMPLES = 200
TOLERANCE = 1e-10


def symmetric(lower, d=DIMENSION):
    """The symmetric matrix whose lower triangle (row by row) is ``lower``."""
    rows, columns = np.tril_indices(d)
    S = np.zeros_like(lower, shape=(d, d))
    S[rows, columns] = lower
    return S + S.T - np.diag(np.diagonal(S))


def negative_log_likelihood(theta, data):
    d = DIMENSION
    mu, Sigma = theta[:d], symmetric(theta[d:])
    factor = mutad.linalg.cholesky_(Sigma)       # Sigma's lower triangle is now L
    residuals = (data - mu).T.copy()              # (d, n)
    mutad.linalg.ldiv_(factor, residuals)         # residuals <- Sigma^-1 (x - mu), in place
    log_det = 2.0 * np.log(np.diagonal(Sigma)).sum()
    return 0.5 * ((data - mu).T * residuals).sum() + 0.5 * len(data) * log_det


def positive_definite(H):
    """``H``, or ``H + lambda I`` with the smallest power-of-ten ``lambda`` that makes it positive
    definite (far from the optimum the likelihood need not be convex: Levenberg's safeguard)."""
    shift = 0.0
    while True:
        try:
            np.linalg.cholesky(H + shift * np.eye(len(H)))
            return H + shift * np.eye(len(H))
        except np.linalg.LinAlgError:
            shift = max(10 * shift, 1e-6 * np.abs(H).max())


def newton(theta, data, iterations=20):
    value = negative_log_likelihood(theta, data)
    for k in range(iterations):
        g = mutad.gradient(negative_log_likelihood, theta, data, argnums=0)
        if np.linalg.norm(g) < TOLERANCE * len(data):
            return theta, k
        H = mutad.hessian(negative_log_likelihood, theta, data)
        step = np.linalg.solve(positive_definite(H), g)
        t = 1.0
        while True:  # backtracking: the likelihood must improve, Sigma stay positive definite
            try:
                candidate = theta - t * step
                new_value = negative_log_likelihood(candidate, data)
                # Not worse, to within rounding: next to the optimum the likelihood is flat
                # to its last digits, and a full Newton step must not be cut for noise.
                if new_value <= value + 1e-12 * abs(value):
                    break
            except NotPositiveDefiniteError:
                pass
            t /= 2
        theta, value = candidate, new_value
        print(f"iteration {k + 1}: nll = {value:.12f}, |gradient| before = "
              f"{np.linalg.norm(g):.2e}, step length {t:g}")
    raise RuntimeError("Newton's method did not converge")


def main():
    rng = np.random.default_rng(0)
    true_L = np.array([[1.0, 0.0, 0.0], [0.5, 0.8, 0.0], [-0.3, 0.2, 0.6]])
    data = rng.standard_normal((SAMPLES, DIMENSION)) @ true_L.T + np.array([1.0, -2.0, 0.5])
    rows, columns = np.tril_indices(DIMENSION)
    # Start at the first observation and the best Sigma for that mean, the second moments
    # about it: not the answer, but positive definite.
    about = data - data[0]
    start = np.concatenate([data[0], (about.T @ about / len(data))[rows, columns]])
    before = start.tobytes(), data.tobytes()

    # First and second derivatives (the latter in all four orders of the two modes) against
    # central finite differences; check_grads raises if they disagree.
    mutad.check_grads(negative_log_likelihood, start, data, order=2)
    print("check_grads(order=2): gradient and Hessian agree with finite differences")

    theta, iterations = newton(start, data)

    mean = data.mean(axis=0)
    covariance = (data - mean).T @ (data - mean) / len(data)  # the maximum-likelihood estimate
    mu, Sigma = theta[:DIMENSION], np.asarray(symmetric(theta[DIMENSION:]))
    print(f"converged in {iterations} iterations")
    print(f"|mu - sample mean|           = {np.abs(mu - mean).max():.2e}")
    print(f"|Sigma - sample covariance|  = {np.abs(Sigma - covariance).max():.2e}")
    assert iterations <= 10
    np.testing.assert_allclose(mu, mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(Sigma, covariance, rtol=0, atol=1e-9)
    assert (start.tobytes(), data.tobytes()) == before, "the caller's arrays changed"


if __name__ == "__main__":
    main()
