"""Realistic in-place programs, written the way the field writes them, differentiated unchanged.

Each program below is ordinary NumPy/SciPy code of the kind found in teaching codes and
research scripts: work arrays from ``np.zeros``/``np.empty``/``np.full`` filled in loops, state
updated with ``+=`` and slice assignment, SciPy called by its own names. None was written for
mutad; each only returns a scalar loss.

``python benchmarks/field_programs.py`` differentiates every program with ``mutad.gradient`` and
prints, per program, whether it ran unchanged, whether its value is NumPy's, how its gradient
compares with a central finite difference along a random direction, and the ratio of the
gradient's time to the plain NumPy forward's: rounds of (forward, gradient) back to back, the
median [min-max] of the per-round ratios, as ``mutad-bench`` reports them. ``--tiny`` runs the
test sizes; ``tests/test_field_programs.py`` checks every program at those sizes.
"""

import argparse
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.special
import scipy.stats

if __package__ in (None, ""):  # run as a script: use the checkout's mutad
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mutad  # noqa: E402


@dataclass
class Program:
    name: str
    build: object  # build(size) -> (f, args): f(*args) returns a float
    sizes: tuple  # (tiny, default)
    preallocates: bool  # fills buffers from np.zeros / np.empty / np.full / np.eye
    scipy_names: bool  # calls SciPy by its own names


PROGRAMS = []


def program(sizes, preallocates=False, scipy_names=False):
    def register(build):
        PROGRAMS.append(Program(build.__name__, build, sizes, preallocates, scipy_names))
        return build
    return register


# ----------------------------------------------------------------------------------------------
# Filters and recursions


@program(sizes=(8, 200), preallocates=True)
def kalman_filter(steps):
    """Negative log-likelihood of a constant-velocity Kalman filter in its noise parameters."""
    def negative_loglik(log_noise, ys):
        q, r = np.exp(log_noise[0]), np.exp(log_noise[1])
        F = np.array([[1.0, 1.0], [0.0, 1.0]])
        H = np.array([[1.0, 0.0]])
        Q = q * np.array([[1.0 / 3.0, 0.5], [0.5, 1.0]])
        x = np.zeros(2)
        P = np.eye(2) * 10.0
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

    rng = np.random.default_rng(1)
    ys = np.cumsum(np.cumsum(0.1 * rng.standard_normal(steps))) + rng.standard_normal(steps)
    return negative_loglik, (np.array([np.log(0.05), np.log(0.8)]), ys)


@program(sizes=(6, 100), preallocates=True, scipy_names=True)
def hmm_forward(steps):
    """Scaled forward algorithm of a Gaussian hidden Markov model, in its transition logits."""
    def negative_loglik(logits, means, ys):
        A = scipy.special.softmax(logits, axis=1)
        k = A.shape[0]
        alpha = np.zeros((len(ys), k))
        emission = np.exp(-0.5 * (ys[0] - means) ** 2)
        alpha[0] = emission / k
        loglik = 0.0
        for t in range(1, len(ys)):
            scale = alpha[t - 1].sum()
            alpha[t - 1] /= scale
            loglik += np.log(scale)
            emission = np.exp(-0.5 * (ys[t] - means) ** 2)
            alpha[t] = (alpha[t - 1] @ A) * emission
        return -(loglik + np.log(alpha[-1].sum()))

    rng = np.random.default_rng(2)
    ys = np.where(rng.random(steps) < 0.5, -1.0, 1.5) + 0.3 * rng.standard_normal(steps)
    return negative_loglik, (0.3 * rng.standard_normal((3, 3)), np.array([-1.0, 0.2, 1.5]), ys)


@program(sizes=(12, 300), preallocates=True)
def biquad_filter(n):
    """A direct-form-I biquad run sample by sample, fitted to a target response."""
    def misfit(b, a, x, target):
        y = np.zeros(len(x))
        for i in range(len(x)):
            y[i] = b[0] * x[i]
            if i >= 1:
                y[i] += b[1] * x[i - 1] - a[0] * y[i - 1]
            if i >= 2:
                y[i] += b[2] * x[i - 2] - a[1] * y[i - 2]
        return np.sum((y - target) ** 2)

    rng = np.random.default_rng(3)
    x = rng.standard_normal(n)
    return misfit, (np.array([0.2, 0.3, 0.2]), np.array([-0.5, 0.2]), x, np.sin(0.1 * np.arange(n)))


@program(sizes=(5, 40), preallocates=True)
def dynamic_time_warping(n):
    """The dynamic-time-warping distance between a warped template and a signal."""
    def distance(template, signal):
        n, m = len(template), len(signal)
        D = np.full((n + 1, m + 1), np.inf)
        D[0, 0] = 0.0
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                cost = (template[i - 1] - signal[j - 1]) ** 2
                D[i, j] = cost + min(D[i - 1, j], D[i, j - 1], D[i - 1, j - 1])
        return D[n, m]

    t = np.linspace(0.0, 1.0, n)
    return distance, (np.sin(2 * np.pi * t) + 0.05 * t, np.sin(2 * np.pi * t ** 1.3))


# ----------------------------------------------------------------------------------------------
# Time steppers


@program(sizes=(3, 200), preallocates=True)
def rk4_lotka_volterra(steps):
    """Lotka-Volterra parameters fitted by RK4 with a preallocated stage buffer."""
    def rhs(y, p, out):
        out[0] = p[0] * y[0] - p[1] * y[0] * y[1]
        out[1] = p[3] * y[0] * y[1] - p[2] * y[1]

    def misfit(p, y0, data, dt=0.05):
        K = np.empty((4, 2))
        stage = np.empty(2)
        y = y0.copy()
        loss = 0.0
        for step in range(len(data)):
            rhs(y, p, K[0])
            stage[:] = y + 0.5 * dt * K[0]
            rhs(stage, p, K[1])
            stage[:] = y + 0.5 * dt * K[1]
            rhs(stage, p, K[2])
            stage[:] = y + dt * K[2]
            rhs(stage, p, K[3])
            y += dt / 6.0 * (K[0] + 2.0 * K[1] + 2.0 * K[2] + K[3])
            loss += np.sum((y - data[step]) ** 2)
        return loss

    data = 1.0 + 0.5 * np.sin(0.1 * np.arange(steps))[:, None] * np.array([1.0, -1.0])
    return misfit, (np.array([1.0, 0.5, 0.8, 0.4]), np.array([1.2, 0.9]), data)


@program(sizes=(10, 400), preallocates=True)
def heat_explicit_swap(n):
    """Explicit heat steps into a preallocated second buffer, swapped every step."""
    def misfit(u0, target, steps=50, r=0.4):
        u = np.empty(len(u0))
        u[:] = u0
        unew = np.empty(len(u0))
        unew[0] = u[0]
        unew[-1] = u[-1]
        for _ in range(steps):
            unew[1:-1] = u[1:-1] + r * (u[2:] - 2.0 * u[1:-1] + u[:-2])
            u, unew = unew, u
        return np.sum((u - target) ** 2)

    x = np.linspace(0.0, 1.0, n)
    return misfit, (np.exp(-((x - 0.3) / 0.1) ** 2), 0.5 * np.sin(np.pi * x))


@program(sizes=(12, 400), preallocates=True)
def burgers_finite_volume(n):
    """Rusanov finite volumes for Burgers' equation, a flux array allocated every step."""
    def misfit(u0, target, steps=30, dx=0.01, dt=0.004):
        u = u0.copy()
        for _ in range(steps):
            left, right = u[:-1], u[1:]
            speed = np.maximum(np.abs(left), np.abs(right))
            flux = np.zeros(len(u) + 1)
            flux[1:-1] = 0.25 * (left ** 2 + right ** 2) - 0.5 * speed * (right - left)
            flux[0], flux[-1] = flux[1], flux[-2]
            u -= dt / dx * (flux[1:] - flux[:-1])
        return np.sum((u - target) ** 2)

    x = np.linspace(0.0, 1.0, n)
    return misfit, (0.5 + 0.5 * np.sin(2 * np.pi * x), 0.5 + 0.4 * np.sin(2 * np.pi * (x - 0.1)))


@program(sizes=(10, 300), preallocates=True)
def lattice_boltzmann_diffusion(n):
    """D1Q3 lattice-Boltzmann diffusion: distributions in one preallocated array."""
    def misfit(rho0, target, steps=40, omega=1.2):
        weights = np.array([2.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0])
        f = np.zeros((3, len(rho0)))
        for k in range(3):
            f[k] = weights[k] * rho0
        for _ in range(steps):
            rho = f.sum(axis=0)
            for k in range(3):
                f[k] += omega * (weights[k] * rho - f[k])
            f[1] = np.roll(f[1], 1)
            f[2] = np.roll(f[2], -1)
        return np.sum((f.sum(axis=0) - target) ** 2)

    x = np.linspace(0.0, 1.0, n)
    return misfit, (1.0 + np.exp(-((x - 0.5) / 0.05) ** 2), np.ones(n) * 1.05)


@program(sizes=(4, 16), preallocates=True)
def nbody_verlet(n):
    """Velocity Verlet for softened gravity, pair forces summed into a zeroed buffer."""
    def forces(x, masses, out):
        out[:] = 0.0
        for i in range(len(x)):
            for j in range(i + 1, len(x)):
                d = x[j] - x[i]
                inv = (d @ d + 0.01) ** -1.5
                out[i] += masses[j] * inv * d
                out[j] -= masses[i] * inv * d

    def energy_misfit(x0, v0, masses, steps=5, dt=0.01):
        x, v = x0.copy(), v0.copy()
        a = np.zeros_like(x)
        forces(x, masses, a)
        for _ in range(steps):
            v += 0.5 * dt * a
            x += dt * v
            forces(x, masses, a)
            v += 0.5 * dt * a
        return np.sum(x ** 2) + np.sum(v ** 2)

    rng = np.random.default_rng(4)
    return energy_misfit, (rng.standard_normal((n, 2)), 0.1 * rng.standard_normal((n, 2)),
                           np.linspace(1.0, 2.0, n))


@program(sizes=(6, 120), preallocates=True)
def sph_density(n):
    """Smoothed-particle density summed particle by particle, then an equation of state."""
    def pressure_energy(x, h=0.15, mass=0.02, k=3.0, rho0=1.0):
        rho = np.zeros(len(x))
        for i in range(len(x)):
            rho[i] = mass * np.sum(np.exp(-((x - x[i]) / h) ** 2)) / (np.sqrt(np.pi) * h)
        pressure = k * (rho - rho0)
        return np.sum(pressure ** 2)

    return pressure_energy, (np.linspace(0.0, 1.0, n) + 0.01 * np.sin(np.arange(n)),)


# ----------------------------------------------------------------------------------------------
# Linear algebra written out


@program(sizes=(4, 30), preallocates=True)
def cholesky_solve_textbook(n):
    """Cholesky-Banachiewicz and forward/back substitution, loops into zeroed arrays."""
    def solve_weighted(A, b, w):
        n = len(b)
        L = np.zeros((n, n))
        for i in range(n):
            for j in range(i + 1):
                s = np.dot(L[i, :j], L[j, :j])
                if i == j:
                    L[i, j] = np.sqrt(A[i, i] - s)
                else:
                    L[i, j] = (A[i, j] - s) / L[j, j]
        y = np.zeros(n)
        for i in range(n):
            y[i] = (b[i] - np.dot(L[i, :i], y[:i])) / L[i, i]
        x = np.zeros(n)
        for i in reversed(range(n)):
            x[i] = (y[i] - np.dot(L[i + 1:, i], x[i + 1:])) / L[i, i]
        return np.dot(w, x)

    rng = np.random.default_rng(5)
    M = rng.standard_normal((n, n))
    return solve_weighted, (M @ M.T + n * np.eye(n), rng.standard_normal(n), rng.standard_normal(n))


@program(sizes=(5, 60), preallocates=True)
def conjugate_gradient(n):
    """A fixed number of conjugate-gradient iterations, every update in place."""
    def solution_norm(A, b, iterations=4):
        x = np.zeros(len(b))
        r = b - A @ x
        p = r.copy()
        rs = r @ r
        for _ in range(iterations):
            Ap = A @ p
            alpha = rs / (p @ Ap)
            x += alpha * p
            r -= alpha * Ap
            rs_new = r @ r
            p *= rs_new / rs
            p += r
            rs = rs_new
        return np.sum(x ** 2)

    rng = np.random.default_rng(6)
    M = rng.standard_normal((n, n))
    return solution_norm, (M @ M.T + n * np.eye(n), rng.standard_normal(n))


@program(sizes=(4, 40), preallocates=True)
def poisson_jacobi_2d(n):
    """Jacobi sweeps for the 2-D Poisson equation on a zero-padded grid."""
    def solution_energy(source, sweeps=20):
        m = source.shape[0]
        h2 = (1.0 / (m + 1)) ** 2
        u = np.zeros((m + 2, m + 2))
        for _ in range(sweeps):
            interior = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                               + h2 * source)
            u[1:-1, 1:-1] = interior
        return np.sum(u ** 2)

    x = np.linspace(0.0, 1.0, n)
    return solution_energy, (np.outer(np.sin(np.pi * x), np.sin(2 * np.pi * x)),)


@program(sizes=(4, 40), scipy_names=True)
def ridge_normal_equations(n):
    """Ridge regression by its normal equations, the ridge added on the diagonal in place."""
    def validation_loss(log_lambda, X, y, X_val, y_val):
        A = X.T @ X
        A[np.diag_indices_from(A)] += np.exp(log_lambda)
        w = scipy.linalg.solve(A, X.T @ y, assume_a="pos")
        return np.sum((X_val @ w - y_val) ** 2)

    rng = np.random.default_rng(7)
    X = rng.standard_normal((3 * n, n))
    X_val = rng.standard_normal((n, n))
    w_true = rng.standard_normal(n)
    return validation_loss, (np.array(0.3), X, X @ w_true + rng.standard_normal(3 * n),
                             X_val, X_val @ w_true)


# ----------------------------------------------------------------------------------------------
# Statistics and learning


@program(sizes=(6, 200))
def two_layer_network(n):
    """A CS231n-style two-layer network's softmax loss, normalised in place."""
    def loss(W1, b1, W2, b2, X, labels, reg=1e-3):
        hidden = np.maximum(0, X @ W1 + b1)
        scores = hidden @ W2 + b2
        scores -= scores.max(axis=1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=1, keepdims=True)
        data_loss = -np.log(probs[np.arange(len(labels)), labels]).mean()
        return data_loss + 0.5 * reg * (np.sum(W1 * W1) + np.sum(W2 * W2))

    rng = np.random.default_rng(8)
    return loss, (0.5 * rng.standard_normal((4, 10)), 0.1 * rng.standard_normal(10),
                  0.5 * rng.standard_normal((10, 3)), np.zeros(3), rng.standard_normal((n, 4)),
                  rng.integers(0, 3, n))


@program(sizes=(8, 500), scipy_names=True)
def logistic_regression(n):
    """Penalised logistic regression with scipy.special.expit."""
    def negative_loglik(w, X, y):
        p = scipy.special.expit(X @ w)
        return -np.sum(y * np.log(p) + (1.0 - y) * np.log1p(-p)) + 0.01 * np.sum(w ** 2)

    rng = np.random.default_rng(9)
    X = rng.standard_normal((n, 3))
    y = (rng.random(n) < scipy.special.expit(X @ np.array([1.0, -2.0, 0.5]))).astype(float)
    return negative_loglik, (np.array([0.1, 0.1, 0.1]), X, y)


@program(sizes=(8, 500), scipy_names=True)
def normal_mle(n):
    """Gaussian log-likelihood through scipy.stats.norm.logpdf, in mean and log-scale."""
    def negative_loglik(mu, log_sigma, x):
        return -np.sum(scipy.stats.norm.logpdf(x, mu, np.exp(log_sigma)))

    rng = np.random.default_rng(10)
    return negative_loglik, (np.array(0.5), np.array(0.2), 1.0 + 2.0 * rng.standard_normal(n))


@program(sizes=(8, 500), scipy_names=True)
def negative_binomial_glm(n):
    """A negative-binomial regression, its log-likelihood written with scipy.special.gammaln."""
    def negative_loglik(w, log_r, X, y):
        mu = np.exp(X @ w)
        r = np.exp(log_r)
        ll = (scipy.special.gammaln(y + r) - scipy.special.gammaln(r)
              - scipy.special.gammaln(y + 1.0) + r * np.log(r / (r + mu))
              + y * np.log(mu / (r + mu)))
        return -np.sum(ll)

    rng = np.random.default_rng(11)
    X = np.column_stack([np.ones(n), rng.standard_normal(n)])
    y = rng.poisson(np.exp(X @ np.array([1.0, 0.4]))).astype(float)
    return negative_loglik, (np.array([0.5, 0.1]), np.array(0.7), X, y)


# ----------------------------------------------------------------------------------------------
# Python's own numbers and NumPy's less common calls, as textbooks and scripts write them


@program(sizes=(4, 25), preallocates=True)
def cholesky_math_sqrt(n):
    """Textbook Cholesky with math.sqrt of an element (not np.sqrt), then a log-determinant."""
    import math

    def log_det(A):
        n = A.shape[0]
        L = np.zeros_like(A)
        for k in range(n):
            L[k, k] = math.sqrt(A[k, k] - np.dot(L[k, :k], L[k, :k]))
            for i in range(k + 1, n):
                L[i, k] = (A[i, k] - np.dot(L[i, :k], L[k, :k])) / L[k, k]
        return 2.0 * sum(math.log(L[k, k]) for k in range(n))

    rng = np.random.default_rng(21)
    M = rng.standard_normal((n, n))
    return log_det, (M @ M.T + n * np.eye(n),)


@program(sizes=(4, 30), preallocates=True)
def gauss_seidel_math(n):
    """Gauss-Seidel sweeps, a residual norm taken with math.sqrt and math.fsum-free sums."""
    import math

    def residual_after(A, b, sweeps=6):
        x = np.zeros(len(b))
        for _ in range(sweeps):
            for i in range(len(b)):
                x[i] = (b[i] - A[i, :i] @ x[:i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
        r = b - A @ x
        return math.sqrt(r @ r) + math.hypot(x[0], x[-1])

    rng = np.random.default_rng(22)
    M = rng.standard_normal((n, n))
    return residual_after, (M + 2 * n * np.eye(n), rng.standard_normal(n))


@program(sizes=(3, 8))
def levenberg_marquardt(n):
    """Levenberg-Marquardt steps for an exponential fit, the step scaled by a list [g @ g]."""
    def misfit_after(theta, t, y, iterations=4):
        theta = theta.copy()
        for _ in range(iterations):
            model = theta[0] * np.exp(-theta[1] * t)
            J = np.stack([np.exp(-theta[1] * t), -theta[0] * t * np.exp(-theta[1] * t)], axis=1)
            r = y - model
            g = J.T @ r
            step = np.linalg.solve(J.T @ J + 0.1 * np.eye(2), g)
            theta += step / [1.0 + step @ step]
        return np.sum((y - theta[0] * np.exp(-theta[1] * t)) ** 2)

    t = np.linspace(0.0, 2.0, 4 * n)
    y = 2.0 * np.exp(-1.3 * t) + 0.01 * np.sin(7 * t)
    return misfit_after, (np.array([1.5, 1.0]), t, y)


@program(sizes=(5, 200))
def logsumexp_by_hand(n):
    """A from-scratch log-sum-exp (Python's max of elements, a list subtracted) in a softmax
    cross-entropy."""
    def cross_entropy(logits, label=2):
        m = max(logits[i] for i in range(len(logits)))
        shifted = logits - [m]
        return -(shifted[label] - np.log(np.sum(np.exp(shifted))))

    return cross_entropy, (np.random.default_rng(23).standard_normal(n),)


@program(sizes=(4, 40), preallocates=True)
def black_scholes_explicit(n):
    """An explicit finite-difference Black-Scholes call price, its step count int(T / dt) + 1
    computed from the maturity that is differentiated."""
    def price(sigma, maturity, strike=1.0, rate=0.02):
        s = np.linspace(0.0, 3.0, n + 1)
        ds = s[1] - s[0]
        dt = 0.9 / (sigma[0] ** 2 * n ** 2 + 1.0)
        steps = int(maturity[0] / dt) + 1
        dt = maturity[0] / steps
        v = np.maximum(s - strike, 0.0)
        for _ in range(steps):
            delta = (v[2:] - v[:-2]) / (2 * ds)
            gamma = (v[2:] - 2 * v[1:-1] + v[:-2]) / ds ** 2
            v[1:-1] += dt * (0.5 * sigma[0] ** 2 * s[1:-1] ** 2 * gamma + rate * s[1:-1] * delta
                             - rate * v[1:-1])
            v[-1] = s[-1] - strike * np.exp(-rate * dt)
        return v[n // 3]

    return price, (np.array([0.3]), np.array([0.5]))


@program(sizes=(4, 64), preallocates=True)
def escape_time_smooth(n):
    """A Mandelbrot-style kernel: work arrays reshaped in place (z.shape = ...), a smooth
    escape measure over a few iterations."""
    def smooth_count(scale):
        z = np.zeros(n * n, dtype=complex)
        c = np.zeros(n * n, dtype=complex)
        z.shape = c.shape = (n, n)
        grid = np.linspace(-1.5, 0.5, n)
        c.real[...] = scale[0] * grid[None, :]
        c.imag[...] = scale[0] * grid[:, None]
        measure = np.zeros((n, n))
        for _ in range(6):
            z = z * z + c
            measure += np.exp(-np.abs(z))
        measure.shape = (n * n,)
        return measure.sum()

    return smooth_count, (np.array([0.8]),)


@program(sizes=(64, 2048))
def mfcc_framing(n):
    """Frames by np.lib.stride_tricks.as_strided (a read-only view), a Hann window, the power
    spectrum and a log-energy feature per frame."""
    def log_energy(signal, frame=16, hop=8):
        count = 1 + (len(signal) - frame) // hop
        frames = np.lib.stride_tricks.as_strided(
            signal, shape=(count, frame), strides=(hop * signal.strides[0], signal.strides[0]),
            writeable=False)
        windowed = frames * np.hanning(frame)
        power = np.abs(np.fft.rfft(windowed, axis=1)) ** 2 / frame
        return np.sum(np.log(power.sum(axis=1) + 1e-8))

    t = np.arange(n) / 800.0
    return log_energy, (np.sin(2 * np.pi * 60 * t) + 0.3 * np.cos(2 * np.pi * 170 * t),)


@program(sizes=(6, 64))
def azimuthal_average(n):
    """The azimuthal average of an image: np.histogram of radii weighted by the image, divided
    by the counts, against a radial profile."""
    def profile_misfit(image, target):
        yy, xx = np.indices(image.shape)
        r = np.hypot(xx - image.shape[1] / 2, yy - image.shape[0] / 2).ravel()
        sums, edges = np.histogram(r, bins=len(target), weights=image.ravel())
        counts, _ = np.histogram(r, bins=edges)
        return np.sum((sums / np.maximum(counts, 1) - target) ** 2)

    rng = np.random.default_rng(24)
    return profile_misfit, (rng.random((n, n)), rng.random(n // 2))


@program(sizes=(4, 30))
def floyd_warshall_soft(n):
    """All-pairs shortest paths by min-plus updates through np.minimum and np.add.outer, in the
    edge lengths."""
    def total_distance(lengths):
        D = lengths.copy()
        np.fill_diagonal(D, 0.0)
        for k in range(len(D)):
            D = np.minimum(D, np.add.outer(D[:, k], D[k, :]))
        return D.sum()

    rng = np.random.default_rng(25)
    return total_distance, (rng.uniform(1.0, 5.0, (n, n)),)


@program(sizes=(6, 300))
def gmm_fixed_wishart(n):
    """A one-dimensional two-component mixture's negative log-likelihood with an inverse-gamma
    prior whose parameter gamma is a float written with math.log and math.lgamma."""
    import math

    def negative_log_posterior(means, log_scales, x, gamma=2.5):
        scales = np.exp(log_scales)
        log_p = np.stack([scipy.stats.norm.logpdf(x, means[k], scales[k]) for k in range(2)])
        m = log_p.max(axis=0)
        nll = -np.sum(m + np.log(np.exp(log_p - m).sum(axis=0)) - math.log(2.0))
        prior = sum(gamma * math.log(gamma) - math.lgamma(gamma) - (gamma + 1) * 2 * ls
                    - gamma / scales[k] ** 2 for k, ls in enumerate(log_scales))
        return nll - prior

    rng = np.random.default_rng(26)
    x = np.concatenate([rng.normal(-1, 0.5, n // 2), rng.normal(1.5, 0.8, n - n // 2)])
    return negative_log_posterior, (np.array([-0.5, 1.0]), np.array([-0.3, 0.1]), x)


@program(sizes=(5, 60))
def adaptive_heun(n):
    """Heun's method with error control: the step factor min(2, max(0.5, 0.9 sqrt(tol / err)))
    taken with Python's min, max and math.sqrt."""
    import math

    def final_state(k, y0, tol=1e-4):
        y, t, h = y0.copy(), 0.0, 0.1
        while t < 1.0:
            h = min(h, 1.0 - t)
            f0 = -k * y + np.sin(t)
            predictor = y + h * f0
            f1 = -k * predictor + np.sin(t + h)
            candidate = y + 0.5 * h * (f0 + f1)
            err = np.max(np.abs(candidate - predictor)) + 1e-12
            if err <= tol:
                y, t = candidate, t + h
            h = h * min(2.0, max(0.5, 0.9 * math.sqrt(tol / err)))
        return np.sum(y * y)

    rng = np.random.default_rng(27)
    return final_state, (rng.uniform(0.5, 2.0, n), rng.standard_normal(n))


@program(sizes=(8, 2000), preallocates=True)
def particle_in_cell_deposit(n):
    """Cloud-in-cell charge deposition: a particle's cell int(x / dx), its share by the
    fraction, a Poisson solve and the field energy."""
    def field_energy(positions, charges, cells=16):
        dx = 1.0 / cells
        rho = np.zeros(cells + 1)
        for p in range(len(positions)):
            cell = int(positions[p] / dx)
            frac = positions[p] / dx - cell
            rho[cell] += charges[p] * (1.0 - frac)
            rho[cell + 1] += charges[p] * frac
        rho -= rho.mean()
        k = np.fft.rfftfreq(cells + 1, d=dx)[1:]
        phi_hat = np.fft.rfft(rho)[1:] / (2 * np.pi * k) ** 2
        return np.sum(np.abs(phi_hat) ** 2)

    rng = np.random.default_rng(28)
    return field_energy, (rng.uniform(0.05, 0.95, n), rng.uniform(0.5, 1.5, n))


@program(sizes=(5, 80))
def winner_take_all(n):
    """Competitive learning: the nearest prototype, by np.argmin, moved toward each sample in
    place."""
    def quantisation_error(prototypes, samples, rate=0.3):
        P = prototypes.copy()
        for x in samples:
            nearest = np.argmin(np.sum((P - x) ** 2, axis=1))
            P[nearest] += rate * (x - P[nearest])
        return sum(np.min(np.sum((P - x) ** 2, axis=1)) for x in samples)

    rng = np.random.default_rng(29)
    return quantisation_error, (rng.standard_normal((3, 2)), rng.standard_normal((n, 2)))


@program(sizes=(5, 120))
def rbf_interpolation(n):
    """Radial-basis interpolation: pairwise distances by np.subtract.outer, a Gaussian kernel
    matrix and its solve, a roughness penalty."""
    def roughness(x, y, width):
        K = np.exp(-(np.subtract.outer(x, x) / width[0]) ** 2) + 1e-6 * np.eye(len(x))
        coefficients = np.linalg.solve(K, y)
        return coefficients @ K @ coefficients

    x = np.linspace(0.0, 1.0, n)
    return roughness, (x, np.sin(3 * x), np.array([0.3]))


@program(sizes=(4, 50))
def tabulated_coefficients(n):
    """Coefficients looked up in dicts by an integer order and by the value of an element (a
    hashed NumPy scalar: exact values get their own weight), and a label formatted from a
    traced value, as scripts that log as they go do."""
    def weighted(x, orders):
        by_order = {0: 1.0, 1: 0.5, 2: 0.25}
        exact = {0.0: 0.0, 1.0: 2.0}
        total = 0.0
        for i in range(len(x)):
            total = total + by_order.get(orders[i], 0.1) * exact.get(x[i], 1.0) * x[i] ** 2
        label = f"loss={total:.3f}"
        return total * (1.0 + 0.0 * len(label))

    return weighted, (np.linspace(0.55, 1.45, n), np.arange(n) % 4)


# ----------------------------------------------------------------------------------------------
# Arrays that existed before the call: initial conditions, prototypes, raw buffers

GRID = np.linspace(0.0, 1.0, 41)
INITIAL_PROFILE = np.exp(-80.0 * (GRID - 0.4) ** 2)  # a module-level initial condition


@program(sizes=(6, 400))
def heat_from_initial_condition(steps):
    """An explicit heat solver started from a module-level profile by ``u = U0.copy()``, its
    boundary values set by slice assignment, fitted in the diffusivity."""
    def misfit(diffusivity, observed):
        u = INITIAL_PROFILE.copy()
        r = diffusivity[0] * 0.4
        for _ in range(steps):
            u[1:-1] += r * (u[2:] - 2.0 * u[1:-1] + u[:-2])
            u[0] = u[-1] = 0.0
        return np.sum((u - observed) ** 2)

    return misfit, (np.array([0.8]), INITIAL_PROFILE * 0.5)


@program(sizes=(5, 100))
def weather_stencil_raw_buffers(n):
    """A horizontal-diffusion stencil whose work arrays come from the raw constructor
    ``np.ndarray(shape)``, as a weather code allocates them, filled before they are read."""
    def smoothed(field, coefficient):
        lap = np.ndarray((n - 2, n - 2))
        out = np.ndarray(field.shape)
        lap[:] = (field[2:, 1:-1] + field[:-2, 1:-1] + field[1:-1, 2:] + field[1:-1, :-2]
                  - 4.0 * field[1:-1, 1:-1])
        out[:] = field
        out[1:-1, 1:-1] -= coefficient[0] * lap
        return np.sum(out ** 2)

    rng = np.random.default_rng(30)
    return smoothed, (rng.standard_normal((n, n)), np.array([0.1]))


class LeakyIntegrator:
    """A model object holding its initial state, integrated by a method: ``self.x0.copy()``."""

    def __init__(self, n):
        self.x0 = np.linspace(1.0, 2.0, n)
        self.dt = 0.05

    def loss(self, rates):
        x = self.x0.copy()
        for _ in range(20):
            x -= self.dt * rates * x
            x += self.dt * 0.1
        return np.sum(x ** 2)


@program(sizes=(4, 500))
def method_of_a_model(n):
    """The loss is a bound method of a model object whose initial state is an attribute."""
    return LeakyIntegrator(n).loss, (np.linspace(0.5, 1.5, n),)


PROTOTYPES = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 0.5]])


@program(sizes=(5, 80))
def online_kmeans_from_globals(n):
    """Online k-means started from module-level prototypes made into a work copy by
    arithmetic (``PROTOTYPES + 0.0``), each step's centre chosen by np.argmin."""
    def distortion(samples):
        centres = PROTOTYPES + 0.0
        counts = np.ones(len(centres))
        for x in samples:
            k = np.argmin(((centres - x) ** 2).sum(axis=1))
            counts[k] += 1.0
            centres[k] += (x - centres[k]) / counts[k]
        return ((centres[:, None, :] - samples[None]) ** 2).sum(axis=2).min(axis=0).sum()

    rng = np.random.default_rng(31)
    return distortion, (rng.standard_normal((n, 2)),)


# ----------------------------------------------------------------------------------------------
# Running them


def snapshot(args):
    return [a.tobytes() if isinstance(a, np.ndarray) else a for a in args]


def copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def float_positions(args):
    return [i for i, a in enumerate(args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def directional_check(f, args, gradients, seed=0):
    """Relative difference between <gradient, v> and a central finite difference along v."""
    rng = np.random.default_rng(seed)
    positions = float_positions(args)
    direction = {i: rng.standard_normal(np.shape(args[i])) for i in positions}
    predicted = sum(float(np.sum(gradients[i] * direction[i])) for i in positions)

    def along(step):
        moved = copies(args)
        for i in positions:
            moved[i] = moved[i] + step * direction[i]
        return float(f(*moved))

    step = 1e-5
    estimate = (along(step) - along(-step)) / (2 * step)
    return abs(predicted - estimate) / max(abs(estimate), abs(predicted), 1e-8)


def run(prog, size, rounds):
    """Differentiate one program; a dict of what happened."""
    f, args = prog.build(size)
    row = {"name": prog.name, "size": size, "preallocates": prog.preallocates,
           "scipy_names": prog.scipy_names}
    before = snapshot(args)
    numpy_value = float(f(*copies(args)))
    try:
        value, gradients = mutad.value_and_gradient(f, *args)
    except Exception as error:  # noqa: BLE001  (the report says what failed and why)
        row.update(ran=False, error=f"{type(error).__name__}: {error}".splitlines()[0][:160])
        row["restored"] = snapshot(args) == before
        row["traceback"] = traceback.format_exc()
        return row
    row.update(ran=True, restored=snapshot(args) == before,
               value_error=abs(float(value) - numpy_value) / max(abs(numpy_value), 1e-300),
               finite_difference=directional_check(f, args, gradients))
    ratios = []
    for _ in range(rounds):
        start = time.perf_counter()
        f(*copies(args))
        forward = time.perf_counter() - start
        start = time.perf_counter()
        mutad.gradient(f, *args)
        ratios.append((time.perf_counter() - start) / forward)
    row["ratios"] = ratios
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the test sizes")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds per program")
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--traceback", action="store_true", help="print failures' tracebacks")
    options = parser.parse_args(argv)
    chosen = PROGRAMS if not options.only else [
        p for p in PROGRAMS if p.name in options.only.split(",")]
    print(f"{'program':30} {'style':12} {'ran':4} {'value':>8} {'fd':>8}  grad/fwd median [min-max]")
    ran = 0
    for prog in chosen:
        row = run(prog, prog.sizes[0 if options.tiny else 1], options.rounds)
        style = ",".join(s for s, on in (("prealloc", prog.preallocates),
                                          ("scipy", prog.scipy_names)) if on) or "-"
        if not row["ran"]:
            print(f"{prog.name:30} {style:12} {'no':4}  {row['error']}"
                  f"{'' if row['restored'] else '  CALLER DATA CHANGED'}")
            if options.traceback:
                print(row["traceback"])
            continue
        ran += 1
        r = row["ratios"]
        print(f"{prog.name:30} {style:12} {'yes':4} {row['value_error']:8.1e} "
              f"{row['finite_difference']:8.1e}  {statistics.median(r):6.1f} "
              f"[{min(r):.1f}-{max(r):.1f}]{'' if row['restored'] else '  CALLER DATA CHANGED'}")
    print(f"{ran} of {len(chosen)} ran unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
