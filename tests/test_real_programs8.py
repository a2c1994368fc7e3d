"""Whole research programs in fields and code shapes the earlier files leave out, written as
their scientists write NumPy and SciPy: finite volumes assembled into a ``csr_matrix`` and a
truss into a dense matrix with ``np.add.at``, Crank-Nicolson for the Schrödinger equation with a
complex ``solve_banded``, ``solveh_banded``, ``cho_factor`` and ``splu`` reused over implicit
steps, semi-lagrangian advection by ``map_coordinates``, particle-in-cell with ``rfft``;
``cKDTree`` pairs with ``bincount``, BAOAB Langevin, ensemble and particle filters, ARD and
sparse Gaussian processes, kriging; ETDRK4, de-aliased pseudo-spectral Burgers, Chebyshev
derivatives by ``dct``, a ``dstn`` Poisson solver, Richardson-Lucy, Perona-Malik, Harris
corners, matched filters, Wiener deconvolution, ``savgol`` derivatives, ``sosfilt_zi``,
``filtfilt(method="gust")``, ``welch``, ``stft``/``istft``; ``root``, ``fixed_point``, dense
``solve_ivp`` output, IRLS, Hawkes, Student-t regression, ``CubicSpline``,
``RegularGridInterpolator``, ``make_interp_spline``, ``Pchip``, ``Akima``, ``splrep``,
``griddata``; structured and record arrays, ``as_strided`` Hankel matrices, ``einsum_path``,
``np.ma``, ``lexsort``/``reduceat``, as-of joins by ``searchsorted``, ``digitize``,
``argpartition``; Heston Monte Carlo, tight-binding bands, Kuramoto, word2vec, Newton logistic
regression, an MLP, Hermite beam elements, normal modes, two-stream radiative transfer,
Wright-Fisher; arrays made by library calls and then written (SciPy's windows, ``ogrid`` and
``mgrid``, sparse ``toarray``/``todense``, ``block_diag``, ``fromfunction``, ``loadtxt``,
``frombuffer``, ``np.ndarray``, ``tri``/``diagflat``, ``out=`` of ``scipy.special``); sparse
``kron``, column slices and ``coo`` duplicates; ndimage labels, gradient magnitudes, rank
filters, shifts and rotations, traced kernels; single precision, complex arguments, projected
gradients, generators, dataclasses, NaN-aware reductions, ``errstate``, rectangular ``lu``,
``overwrite_a`` on matrices built in the function, ``ufunc.reduce(where=)`` and
``accumulate``.

Each is checked for NumPy's value bit for bit, the gradient against finite differences, the
caller's arrays bit for bit, ``replay=True`` over three calls with other inputs bit for bit
against tracing, and the tangent of ``jvp`` against the gradient (where cheap: not through an
ODE solve). Programs whose later calls change the decisions they take (clip bounds hit or not,
argmax and argmin ties, NaNs, iteration counts, Python's ``min``/``max``/``sorted``, a CFL step
and a limiter) are replayed call by call against tracing and NumPy."""

import copy
import warnings

import numpy as np
import pytest
import scipy.fft
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.ndimage
import scipy.optimize
import scipy.signal
import scipy.sparse
import scipy.sparse.linalg
import scipy.spatial
import scipy.spatial.distance
import scipy.special
import scipy.stats

import mutad
from mutad.testing import directional_fd
from tests.test_real_programs3 import _check_replay, _direction, _dot, _leaves, _same


def check(program):
    """NumPy's value bit for bit, the gradient against finite differences, the caller's arrays
    bit for bit, three replayed calls against tracing, and the tangent against the gradient."""
    f, make, options = program()
    argnums = options.get("argnums", 0)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        args = make(0)
        before = [a.tobytes() for a in _leaves(args)]
        expected = f(*copy.deepcopy(args))
        value, grads = mutad.value_and_gradient(f, *args, argnums=argnums)
        assert [a.tobytes() for a in _leaves(args)] == before
        assert _same(value, expected)
        rng = np.random.default_rng(7)
        directions = [_direction(a, rng) if i in nums else None for i, a in enumerate(args)]
        fd = directional_fd(f, args, directions, step=options.get("step", 1e-4))
        per_argument = (grads,) if isinstance(argnums, int) else grads
        ad = sum(_dot(per_argument[k], directions[i]) for k, i in enumerate(nums))
        assert np.isclose(ad, fd, rtol=options.get("rtol", 1e-5), atol=1e-9 * max(1.0, abs(fd)))
        _check_replay(f, make, argnums, seeds=(0, 1, 2))
        if options.get("jvp", True):
            y, dy = mutad.jvp(f, tuple(args), tuple(directions))
            assert _same(y, expected)
            assert np.isclose(float(dy), ad, rtol=options.get("forward_rtol", 1e-7),
                              atol=1e-12 * max(1.0, abs(ad)))
            assert [a.tobytes() for a in _leaves(args)] == before

# ---------------------------------------------------------------------------------------------
# PDEs: finite volumes, finite elements, banded and sparse solves, reaction-diffusion


def fv_harmonic_conductivity_csr_spsolve():
    n = 12
    dx = 1.0 / n
    def loss(logk, q):
        k = np.exp(logk)
        kf = 2 * k[1:] * k[:-1] / (k[1:] + k[:-1])          # harmonic face conductivity
        rows = np.concatenate([np.arange(n), np.arange(n - 1), np.arange(1, n)])
        cols = np.concatenate([np.arange(n), np.arange(1, n), np.arange(n - 1)])
        diag = np.zeros(n)
        diag[:-1] += kf
        diag[1:] += kf
        diag[0] += 2 * k[0]                                  # Dirichlet faces
        diag[-1] += 2 * k[-1]
        vals = np.concatenate([diag, -kf, -kf]) / dx ** 2
        A = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
        u = scipy.sparse.linalg.spsolve(A, q)
        return np.sum(u * q) * dx + 0.1 * np.max(u)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal(n), 1 + r.random(n)
    return loss, make, dict(argnums=(0, 1), hvp=False)

def truss_stiffness_add_at_assembly():
    nodes = np.array([[0, 0], [1, 0], [2, 0], [0.5, 0.8], [1.5, 0.8]], float)
    bars = np.array([[0, 1], [1, 2], [0, 3], [1, 3], [1, 4], [2, 4], [3, 4]])
    free = np.array([2, 3, 4, 6, 7, 8, 9])
    def loss(area, load):
        d = nodes[bars[:, 1]] - nodes[bars[:, 0]]
        L = np.linalg.norm(d, axis=1)
        c, s = d[:, 0] / L, d[:, 1] / L
        t = np.stack([-c, -s, c, s], axis=1)
        ke = (area / L)[:, None, None] * np.einsum("ei,ej->eij", t, t)
        dofs = np.stack([2 * bars[:, 0], 2 * bars[:, 0] + 1, 2 * bars[:, 1], 2 * bars[:, 1] + 1], 1)
        K = np.zeros((10, 10))
        np.add.at(K, (dofs[:, :, None], dofs[:, None, :]), ke)
        f = np.zeros(10)
        f[free] = load
        u = np.zeros(10)
        u[free] = np.linalg.solve(K[np.ix_(free, free)], f[free])
        return f @ u                                         # compliance
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(7), r.standard_normal(7)
    return loss, make, dict(argnums=(0, 1))


def schrodinger_crank_nicolson_banded_complex():
    n = 40
    x = np.linspace(-5, 5, n)
    dx = x[1] - x[0]
    dt = 0.01
    def loss(V, k0):
        psi = np.exp(-x ** 2 + 1j * k0 * x).astype(complex)
        psi /= np.sqrt(np.sum(np.abs(psi) ** 2) * dx)
        a = 1j * dt / (4 * dx ** 2)
        ab = np.zeros((3, n), complex)
        ab[0, 1:] = -a
        ab[1] = 1 + 2 * a + 0.5j * dt * V
        ab[2, :-1] = -a
        rhs = np.empty(n, complex)
        for _ in range(5):
            rhs[:] = (1 - 2 * a - 0.5j * dt * V) * psi
            rhs[1:] += a * psi[:-1]
            rhs[:-1] += a * psi[1:]
            psi = scipy.linalg.solve_banded((1, 1), ab, rhs)
        prob = np.abs(psi) ** 2
        return np.sum(prob * x) * dx
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 * x ** 2 * (1 + 0.1 * r.random()), 1.0 + r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def beam_pentadiagonal_solveh_banded():
    n = 20
    h = 1.0 / (n + 1)
    def loss(EI, w):
        ab = np.zeros((3, n))                               # upper form of the SPD 4th-difference
        ab[2] = 6 * EI
        ab[1, 1:] = -4 * 0.5 * (EI[1:] + EI[:-1])
        ab[0, 2:] = EI[1:-1]
        ab[2, 0] += 1.0
        ab[2, -1] += 1.0
        y = scipy.linalg.solveh_banded(ab, w * h ** 4)
        return np.sum(y ** 2) + y.max()
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.1 * r.random(n), 1 + r.random(n)
    return loss, make, dict(argnums=(0, 1))


def implicit_diffusion_cho_factor_reused():
    n = 16
    A = 3 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    def loss(u0, src):
        c = scipy.linalg.cho_factor(A)
        u = u0.copy()
        rhs = np.empty_like(u)
        for _ in range(6):
            np.multiply(u, 1.0, out=rhs)
            rhs += 0.1 * src
            u = scipy.linalg.cho_solve(c, rhs)
        return np.sum(u ** 3)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(n), r.random(n)
    return loss, make, dict(argnums=(0, 1))


def fitzhugh_nagumo_splu_imex():
    n = 20
    L = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(n, n), format="csc") * 4.0
    M = (scipy.sparse.identity(n, format="csc") - 0.05 * L).tocsc()
    def loss(v0, eps):
        lu = scipy.sparse.linalg.splu(M)
        v = v0.copy(); w = np.zeros(n)
        for _ in range(3):
            react = v - v ** 3 / 3 - w
            v = lu.solve(v + 0.05 * react)
            w += 0.05 * eps * (v + 0.7 - 0.8 * w)
        return np.sum(v ** 2) + np.sum(w)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(n), 0.08 + 0.01 * r.random()
    return loss, make, dict(argnums=(0, 1))


def semi_lagrangian_map_coordinates_wrap():
    n = 16
    yy, xx = np.mgrid[0:n, 0:n].astype(float)
    dep = np.array([yy - 0.7 * np.sin(2 * np.pi * xx / n), xx - 0.4])
    def loss(q0):
        q = q0.copy()
        for _ in range(2):
            q[...] = scipy.ndimage.map_coordinates(q, dep, order=1, mode="grid-wrap")
        return np.sum(q ** 2 * yy)
    return loss, lambda s: (np.random.default_rng(s).random((n, n)),), dict()


def pic_electrostatic_1d_cic_rfft():
    ng, npart, L = 16, 40, 2 * np.pi
    dx = L / ng
    k = 2 * np.pi * np.fft.rfftfreq(ng, d=dx)
    k[0] = 1.0
    def loss(x0, v0):
        x = x0.copy(); v = v0.copy()
        rho = np.empty(ng)
        for _ in range(2):
            g = x / dx
            i = np.floor(g).astype(int)
            w = g - i
            rho.fill(0.0)
            np.add.at(rho, i % ng, 1 - w)
            np.add.at(rho, (i + 1) % ng, w)
            rho *= ng / npart
            rho -= 1.0
            phik = np.fft.rfft(rho) / k ** 2
            phik[0] = 0.0
            E = np.fft.irfft(-1j * k * phik, n=ng)
            Ep = E[i % ng] * (1 - w) + E[(i + 1) % ng] * w
            v -= 0.1 * Ep
            x += 0.1 * v
            np.mod(x, L, out=x)
        return np.sum(v ** 2) + np.sum(E ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sort(r.random(npart)) * L * 0.9 + 0.1, 0.1 * r.standard_normal(npart)
    return loss, make, dict(argnums=(0, 1), step=1e-6, rtol=1e-4)
# ---------------------------------------------------------------------------------------------
# Particles, filters and Gaussian processes


def md_ckdtree_query_pairs_bincount_energy():
    n = 20
    def loss(pos, eps):
        tree = scipy.spatial.cKDTree(pos)
        pairs = tree.query_pairs(1.2, output_type="ndarray")
        d = pos[pairs[:, 0]] - pos[pairs[:, 1]]
        r2 = np.einsum("ij,ij->i", d, d)
        inv6 = (1.0 / r2) ** 3
        e_pair = 4 * eps * (inv6 ** 2 - inv6)
        per_atom = np.bincount(pairs[:, 0], weights=e_pair, minlength=n)
        per_atom += np.bincount(pairs[:, 1], weights=e_pair, minlength=n)
        return 0.5 * np.sum(per_atom ** 2)
    def make(s):
        r = np.random.default_rng(s)
        g = np.stack(np.meshgrid(np.arange(5), np.arange(4), indexing="ij"), -1).reshape(-1, 2)
        return g * 1.1 + 0.05 * r.standard_normal((n, 2)), 1.0 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def langevin_baoab_harmonic_chain():
    n = 8
    def loss(x0, k, gamma):
        rng = np.random.default_rng(1)
        x = x0.copy(); p = np.zeros(n)
        dt = 0.05
        c1 = np.exp(-gamma * dt); c2 = np.sqrt(1 - c1 ** 2)
        F = np.empty(n)
        def force(out):
            out[:] = 0
            out[1:] -= k * (x[1:] - x[:-1])
            out[:-1] += k * (x[1:] - x[:-1])
            return out
        force(F)
        acc = 0.0
        for _ in range(5):
            p += 0.5 * dt * F
            x += 0.5 * dt * p
            p *= c1
            p += c2 * rng.standard_normal(n)
            x += 0.5 * dt * p
            force(F)
            p += 0.5 * dt * F
            acc += np.sum(x ** 2)
        return acc
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(n), 1.0 + r.random(), 0.5
    return loss, make, dict(argnums=(0, 1, 2))


def ensemble_kalman_filter_lorenz96():
    n, N = 6, 10
    H = np.eye(n)[::2]
    def l96(x, F):
        return (np.roll(x, -1, -1) - np.roll(x, 2, -1)) * np.roll(x, 1, -1) - x + F
    def loss(E0, F, obs):
        rng = np.random.default_rng(0)
        E = E0.copy()
        out = 0.0
        for y in obs:
            for _ in range(2):
                E += 0.02 * l96(E, F)
            A = E - E.mean(axis=0)
            HA = A @ H.T
            C = HA.T @ HA / (N - 1) + 0.1 * np.eye(len(y))
            D = y + np.sqrt(0.1) * rng.standard_normal((N, len(y))) - E @ H.T
            E += (A.T @ HA / (N - 1) @ np.linalg.solve(C, D.T)).T
            out += np.sum(E.mean(axis=0) ** 2)
        return out
    def make(s):
        r = np.random.default_rng(s)
        return 8 + r.standard_normal((N, n)), 8.0 + r.random(), 8 + r.standard_normal((2, 3))
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def particle_filter_systematic_resampling_logsumexp():
    N = 30
    def loss(y, sigma):
        rng = np.random.default_rng(5)
        x = rng.standard_normal(N)
        logw = np.zeros(N)
        ll = 0.0
        for yt in y:
            x = 0.9 * x + 0.3 * rng.standard_normal(N)
            logw += scipy.stats.norm.logpdf(yt, loc=x, scale=sigma)
            lse = scipy.special.logsumexp(logw)
            ll += lse - np.log(N)
            w = np.exp(logw - lse)
            u = (rng.random() + np.arange(N)) / N
            idx = np.searchsorted(np.cumsum(w), u)
            idx = np.minimum(idx, N - 1)
            x[:] = x[idx]
            logw[:] = 0.0
        return ll
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(3), 0.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1), step=1e-6, rtol=1e-4)

def gp_ard_cdist_cho_solve_marginal_likelihood():
    rng = np.random.default_rng(0)
    X = rng.random((15, 3))
    def loss(log_ell, log_sf, y):
        ell = np.exp(log_ell)
        D = scipy.spatial.distance.cdist(X / ell, X / ell, "sqeuclidean")
        K = np.exp(2 * log_sf) * np.exp(-0.5 * D)
        K[np.diag_indices_from(K)] += 1e-2
        c, low = scipy.linalg.cho_factor(K, lower=True)
        alpha = scipy.linalg.cho_solve((c, low), y)
        return 0.5 * y @ alpha + np.sum(np.log(np.diag(c)))
    def make(s):
        r = np.random.default_rng(s)
        return 0.1 * r.standard_normal(3), 0.1 * r.random(), np.sin(X @ np.array([3, 1, 2.])) + 0.1 * r.standard_normal(15)
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def ordinary_kriging_bordered_system():
    rng = np.random.default_rng(2)
    pts = rng.random((10, 2)); grid = rng.random((6, 2))
    def loss(z, rng_param, sill):
        def gamma(h):
            return sill * (1.5 * h / rng_param - 0.5 * (h / rng_param) ** 3) * (h < rng_param) + sill * (h >= rng_param)
        n = len(z)
        A = np.ones((n + 1, n + 1))
        A[:n, :n] = gamma(scipy.spatial.distance.cdist(pts, pts))
        A[n, n] = 0.0
        b = np.ones((n + 1, len(grid)))
        b[:n] = gamma(scipy.spatial.distance.cdist(pts, grid))
        w = np.linalg.solve(A, b)
        est = w[:n].T @ z
        var = np.sum(w * b, axis=0)
        return np.sum(est ** 2) + np.sum(var)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(10), 2.0 + r.random(), 1.0 + r.random()
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def nystrom_sparse_gp_solve_triangular():
    rng = np.random.default_rng(3)
    X = np.sort(rng.random(25)); Z = np.linspace(0, 1, 6)
    def k(a, b, ell):
        return np.exp(-0.5 * np.subtract.outer(a, b) ** 2 / ell ** 2)
    def loss(y, ell, noise):
        Kzz = k(Z, Z, ell) + 1e-6 * np.eye(len(Z))
        Kxz = k(X, Z, ell)
        L = np.linalg.cholesky(Kzz)
        V = scipy.linalg.solve_triangular(L, Kxz.T, lower=True)
        B = np.eye(len(Z)) + V @ V.T / noise
        LB = np.linalg.cholesky(B)
        c = scipy.linalg.solve_triangular(LB, V @ y, lower=True) / noise
        return 0.5 * (y @ y / noise - c @ c) + np.sum(np.log(np.diag(LB))) + 0.5 * len(X) * np.log(noise)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(6 * X) + 0.1 * r.standard_normal(25), 0.2 + 0.05 * r.random(), 0.05
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)
# ---------------------------------------------------------------------------------------------
# Spectral methods, images and signals


def kuramoto_sivashinsky_etdrk4_rfft():
    n, Lx, h = 32, 32 * np.pi / 4, 0.1
    k = 2 * np.pi / Lx * np.fft.rfftfreq(n, 1.0 / n)
    Lop = k ** 2 - k ** 4
    E, E2 = np.exp(h * Lop), np.exp(h * Lop / 2)
    r = np.exp(1j * np.pi * (np.arange(1, 17) - 0.5) / 16)
    LR = h * Lop[:, None] + r[None, :]
    Q = h * np.real(np.mean((np.exp(LR / 2) - 1) / LR, axis=1))
    f1 = h * np.real(np.mean((-4 - LR + np.exp(LR) * (4 - 3 * LR + LR ** 2)) / LR ** 3, axis=1))
    f2 = h * np.real(np.mean((2 + LR + np.exp(LR) * (-2 + LR)) / LR ** 3, axis=1))
    f3 = h * np.real(np.mean((-4 - 3 * LR - LR ** 2 + np.exp(LR) * (4 - LR)) / LR ** 3, axis=1))
    g = -0.5j * k
    def N(vh):
        return g * np.fft.rfft(np.fft.irfft(vh, n) ** 2)
    def loss(u0):
        v = np.fft.rfft(u0)
        for _ in range(2):
            Nv = N(v)
            a = E2 * v + Q * Nv; Na = N(a)
            b = E2 * v + Q * Na; Nb = N(b)
            c = E2 * a + Q * (2 * Nb - Nv); Nc = N(c)
            v = E * v + Nv * f1 + 2 * (Na + Nb) * f2 + Nc * f3
        return np.sum(np.fft.irfft(v, n) ** 2)
    x = Lx * np.arange(n) / n
    return loss, lambda s: (np.cos(x / 4) * (1 + np.sin(x / 4)) + 0.01 * np.random.default_rng(s).random(n),), dict(rtol=1e-4)


def burgers_pseudospectral_dealias_inplace():
    n = 32
    k = np.fft.rfftfreq(n, 1.0 / n)
    cut = int(n // 3)
    def loss(u0, nu):
        uh = np.fft.rfft(u0)
        for _ in range(5):
            u = np.fft.irfft(uh, n)
            ux = np.fft.irfft(1j * k * uh, n)
            nl = np.fft.rfft(u * ux)
            nl[cut:] = 0.0
            uh -= 0.01 * nl
            uh /= 1 + 0.01 * nu * k ** 2
        return np.sum(np.abs(uh[1:6]) ** 2)
    x = 2 * np.pi * np.arange(n) / n
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(x) + 0.1 * r.random(n), 0.1 + 0.01 * r.random()
    return loss, make, dict(argnums=(0, 1))


def chebyshev_dct_derivative_collocation():
    n = 17
    xs = np.cos(np.pi * np.arange(n) / (n - 1))
    def cheb_coeffs(f):
        a = scipy.fft.dct(f, type=1) / (n - 1)
        a[0] /= 2; a[-1] /= 2
        return a
    def deriv_coeffs(a):
        d = np.zeros_like(a)
        for j in range(n - 2, -1, -1):
            d[j] = (d[j + 2] if j + 2 < n else 0.0) + 2 * (j + 1) * a[j + 1]
        d[0] /= 2
        return d
    def loss(f):
        a = cheb_coeffs(f)
        d = deriv_coeffs(a)
        vals = np.polynomial.chebyshev.chebval(xs, d)
        return np.sum(vals ** 2) + a[3]
    return loss, lambda s: (np.exp(xs) * (1 + 0.1 * np.random.default_rng(s).random(n)),), dict()


def dst_poisson_dirichlet_2d():
    n = 12
    h = 1.0 / (n + 1)
    lam = (2 * np.cos(np.pi * np.arange(1, n + 1) * h) - 2) / h ** 2
    denom = lam[:, None] + lam[None, :]
    def loss(f):
        fh = scipy.fft.dstn(f, type=1)
        fh /= denom
        u = scipy.fft.idstn(fh, type=1)
        return np.sum(u * f) * h ** 2
    return loss, lambda s: (np.random.default_rng(s).standard_normal((n, n)),), dict()


def richardson_lucy_fftconvolve_deconvolution():
    n = 20
    x = np.arange(-3, 4)
    psf = np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / 3.0); psf /= psf.sum()
    def loss(obs):
        est = np.full_like(obs, obs.mean())
        for _ in range(4):
            conv = scipy.signal.fftconvolve(est, psf, mode="same")
            ratio = obs / (conv + 1e-6)
            est *= scipy.signal.fftconvolve(ratio, psf[::-1, ::-1], mode="same")
        return np.sum(est ** 2)
    return loss, lambda s: (0.5 + np.random.default_rng(s).random((n, n)),), dict(rtol=1e-4)


def perona_malik_anisotropic_diffusion():
    n = 14
    def loss(img, kappa):
        u = img.copy()
        for _ in range(2):
            dn = np.zeros_like(u); ds = np.zeros_like(u); de = np.zeros_like(u); dw = np.zeros_like(u)
            dn[1:, :] = u[:-1, :] - u[1:, :]
            ds[:-1, :] = u[1:, :] - u[:-1, :]
            de[:, :-1] = u[:, 1:] - u[:, :-1]
            dw[:, 1:] = u[:, :-1] - u[:, 1:]
            for d in (dn, ds, de, dw):
                u += 0.2 * np.exp(-(d / kappa) ** 2) * d
        return np.sum(u ** 2 * np.arange(n))
    def make(s):
        r = np.random.default_rng(s)
        return r.random((n, n)), 0.3 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def harris_corner_sobel_gaussian_filter():
    n = 16
    def loss(img):
        Ix = scipy.ndimage.sobel(img, axis=1)
        Iy = scipy.ndimage.sobel(img, axis=0)
        Sxx = scipy.ndimage.gaussian_filter(Ix * Ix, 1.0)
        Syy = scipy.ndimage.gaussian_filter(Iy * Iy, 1.0)
        Sxy = scipy.ndimage.gaussian_filter(Ix * Iy, 1.0)
        R = Sxx * Syy - Sxy ** 2 - 0.05 * (Sxx + Syy) ** 2
        return np.sum(R[2:-2, 2:-2])
    return loss, lambda s: (np.random.default_rng(s).random((n, n)),), dict(rtol=1e-4)


def unsharp_mask_uniform_filter_output_buffer():
    n = 16
    def loss(img, amount):
        blur = np.empty_like(img)
        scipy.ndimage.uniform_filter(img, size=3, output=blur, mode="reflect")
        sharp = img + amount * (img - blur)
        np.clip(sharp, 0, 1, out=sharp)
        scipy.ndimage.uniform_filter1d(sharp, 5, axis=0, output=blur)
        return np.sum((blur - img) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 0.6 * r.random((n, n)), 0.4 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def spline_filter_then_map_coordinates_prefilter_false():
    n = 12
    coords = np.array(np.meshgrid(np.linspace(1, n - 2, 9), np.linspace(1.5, n - 2.5, 7), indexing="ij"))
    def loss(img):
        c = scipy.ndimage.spline_filter(img, order=3)
        vals = scipy.ndimage.map_coordinates(c, coords, order=3, prefilter=False)
        return np.sum(vals ** 2)
    return loss, lambda s: (np.random.default_rng(s).random((n, n)),), dict()


def matched_filter_correlate_hilbert_envelope():
    n = 128
    t = np.arange(n) / n
    chirp = scipy.signal.chirp(t[:32], 5, t[31], 20)
    def loss(sig):
        mf = scipy.signal.correlate(sig, chirp, mode="same")
        env = np.abs(scipy.signal.hilbert(mf))
        return np.sum(env ** 2) / n
    return loss, lambda s: (np.random.default_rng(s).standard_normal(n),), dict(rtol=1e-4)


def wiener_deconvolution_rfft():
    n = 64
    h = np.exp(-np.arange(n) / 3.0); h /= h.sum()
    H = np.fft.rfft(h)
    def loss(y, snr):
        G = np.conj(H) / (np.abs(H) ** 2 + 1 / snr)
        x = np.fft.irfft(G * np.fft.rfft(y), n)
        return np.sum(np.diff(x) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(n), 10 + r.random()
    return loss, make, dict(argnums=(0, 1))


def savgol_derivative_peak_width():
    n = 60
    t = np.linspace(-3, 3, n)
    def loss(y):
        sm = scipy.signal.savgol_filter(y, 9, 3)
        d1 = scipy.signal.savgol_filter(y, 9, 3, deriv=1, delta=t[1] - t[0])
        d2 = scipy.signal.savgol_filter(y, 11, 4, deriv=2, delta=t[1] - t[0], mode="nearest")
        return np.sum(sm * d2) + np.sum(d1 ** 2)
    return loss, lambda s: (np.exp(-t ** 2) + 0.05 * np.random.default_rng(s).standard_normal(n),), dict(rtol=1e-4)


def sosfilt_zi_steady_start_butter():
    sos = scipy.signal.butter(4, 0.2, output="sos")
    zi0 = scipy.signal.sosfilt_zi(sos)
    def loss(x):
        y, zf = scipy.signal.sosfilt(sos, x, zi=zi0 * x[0])
        y2 = scipy.signal.lfilter([1, -0.9], [1], y)
        return np.sum(y2 ** 2) + np.sum(zf)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(50),), dict()


def filtfilt_gust_and_detrend():
    b, a = scipy.signal.butter(3, 0.3)
    def loss(x):
        y = scipy.signal.filtfilt(b, a, x, method="gust")
        z = scipy.signal.detrend(y)
        return np.sum(z ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(40),), dict(rtol=1e-4)


def welch_psd_band_power_ratio():
    fs = 100.0
    def loss(x):
        f, P = scipy.signal.welch(x, fs=fs, nperseg=32)
        band = (f > 8) & (f < 13)
        return np.sum(P[band]) / np.sum(P)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(128),), dict(rtol=1e-4)


def resample_poly_medfilt_pipeline():
    def loss(x):
        y = scipy.signal.resample_poly(x, 3, 2)
        z = scipy.signal.medfilt(y, 5)
        return np.sum(z ** 2) + np.sum(y[::3])
    return loss, lambda s: (np.random.default_rng(s).standard_normal(40),), dict()
# ---------------------------------------------------------------------------------------------
# Optimizers, ODEs, statistics and interpolation


def root_hybr_steady_state_kinetics():
    def loss(k):
        def F(c):
            return np.array([k[0] - k[1] * c[0] * c[1], k[1] * c[0] * c[1] - k[2] * c[1] ** 2 + 0.1 - c[1] * 0.05])
        sol = scipy.optimize.root(F, np.array([1.0, 1.0]), method="hybr", tol=1e-12)
        return np.sum(sol.x ** 2)
    return loss, lambda s: (np.array([1.0, 2.0, 0.5]) + 0.1 * np.random.default_rng(s).random(3),), dict(rtol=1e-3)


def fixed_point_iteration_inplace_damped():
    n = 6
    rng = np.random.default_rng(4)
    W = 0.3 * rng.standard_normal((n, n))
    def loss(b):
        h = np.zeros(n); new = np.empty(n)
        for _ in range(12):
            np.tanh(W @ h + b, out=new)
            h *= 0.5
            h += 0.5 * new
        return np.sum(h ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(n),), dict()


def scipy_fixed_point_del2():
    def loss(a):
        x = scipy.optimize.fixed_point(lambda x: np.cos(a * x), np.full(3, 0.5), xtol=1e-12)
        return np.sum(x ** 2)
    return loss, lambda s: (np.array([0.5, 0.7, 0.9]) + 0.1 * np.random.default_rng(s).random(3),), dict(rtol=1e-3)


def solve_ivp_dense_output_observation_fit():
    tobs = np.array([0.3, 0.6, 0.9])
    def loss(theta, y0):
        def rhs(t, y):
            return np.array([theta[0] * y[0] - theta[1] * y[0] * y[1], -theta[2] * y[1] + theta[1] * y[0] * y[1]])
        sol = scipy.integrate.solve_ivp(rhs, (0, 1), y0, dense_output=True, rtol=1e-7, atol=1e-9)
        Y = sol.sol(tobs)
        return np.sum((Y - 1.0) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.0, 0.5, 0.8]) + 0.05 * r.random(3), np.array([1.0, 0.5]) + 0.05 * r.random(2)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3, jvp=False)

def poisson_glm_irls_newton():
    rng = np.random.default_rng(8)
    X = np.column_stack([np.ones(30), rng.standard_normal((30, 2))])
    def loss(y, w_obs):
        beta = np.zeros(3)
        for _ in range(6):
            eta = X @ beta
            mu = np.exp(eta)
            W = w_obs * mu
            z = eta + (y - mu) / mu
            XtW = X.T * W
            beta[:] = np.linalg.solve(XtW @ X, XtW @ z)
        ll = np.sum(w_obs * (y * (X @ beta) - np.exp(X @ beta) - scipy.special.gammaln(y + 1)))
        return -ll
    def make(s):
        r = np.random.default_rng(s)
        return r.poisson(np.exp(X @ np.array([0.5, 0.3, -0.2]))).astype(float) + 0.1, 1 + 0.1 * r.random(30)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def hawkes_exponential_kernel_recursion():
    times = np.cumsum(np.random.default_rng(9).exponential(0.5, 25))
    T = times[-1] + 1
    def loss(params):
        mu, alpha, beta = np.exp(params)
        A = np.zeros(len(times))
        for i in range(1, len(times)):
            A[i] = np.exp(-beta * (times[i] - times[i - 1])) * (1 + A[i - 1])
        ll = np.sum(np.log(mu + alpha * A)) - mu * T - alpha / beta * np.sum(1 - np.exp(-beta * (T - times)))
        return -ll
    return loss, lambda s: (np.log([0.8, 0.5, 1.5]) + 0.1 * np.random.default_rng(s).random(3),), dict()


def student_t_robust_regression_stats():
    rng = np.random.default_rng(10)
    x = rng.random(25)
    def loss(w, nu, y):
        r = y - (w[0] + w[1] * x)
        return -np.sum(scipy.stats.t.logpdf(r, df=nu, scale=0.3)) + scipy.stats.gamma.logpdf(nu, 2.0, scale=5.0)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.1, 1.9]) + 0.1 * r.random(2), 4.0 + r.random(), 2 * x + 0.3 * r.standard_t(3, 25)
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def cubic_spline_clamped_integrate_derivative():
    x = np.linspace(0, 2, 9)
    def loss(y, slope):
        cs = scipy.interpolate.CubicSpline(x, y, bc_type=((1, slope), (2, 0.0)))
        area = cs.integrate(0.1, 1.9)
        d = cs.derivative()(np.linspace(0, 2, 15))
        return area + np.sum(d ** 2) + cs(0.77)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(x) + 0.1 * r.random(9), 1.0 + r.random()
    return loss, make, dict(argnums=(0, 1))


def regular_grid_interpolator_linear_and_cubic():
    gx, gy = np.linspace(0, 1, 6), np.linspace(0, 2, 7)
    pts = np.random.default_rng(11).random((20, 2)) * [1, 2]
    def loss(V):
        lin = scipy.interpolate.RegularGridInterpolator((gx, gy), V)
        cub = scipy.interpolate.RegularGridInterpolator((gx, gy), V, method="cubic")
        return np.sum(lin(pts) ** 2) + np.sum(cub(pts))
    # (the cubic spline's coefficients are SciPy's iterative solve, to atol 1e-6; its gradient
    # is that of the exact spline: they agree to about 1e-5)
    return loss, lambda s: (np.random.default_rng(s).random((6, 7)),), dict(rtol=1e-4)


def make_interp_spline_derivative_antiderivative():
    x = np.linspace(0, 1, 11)
    def loss(y):
        b = scipy.interpolate.make_interp_spline(x, y, k=3)
        d2 = b.derivative(2)(x)
        A = b.antiderivative()(1.0)
        return np.sum(d2 ** 2) * 1e-3 + A
    return loss, lambda s: (np.exp(x) + 0.1 * np.random.default_rng(s).random(11),), dict()


def pchip_monotone_rating_curve_antiderivative():
    stage = np.array([0.0, 0.3, 0.7, 1.2, 2.0, 3.1])
    def loss(q):
        Q = np.cumsum(np.exp(q))
        p = scipy.interpolate.PchipInterpolator(stage, Q)
        vol = p.antiderivative()(3.0) - p.antiderivative()(0.5)
        return vol + np.sum(p(np.linspace(0, 3, 7)) ** 2) * 1e-2
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6),), dict(rtol=1e-4)
# ---------------------------------------------------------------------------------------------
# Data munging without pandas: structured arrays, strides, einsum paths, masked arrays


def structured_sensor_table_groupby_bincount():
    rng = np.random.default_rng(12)
    station = rng.integers(0, 5, 40)
    hour = rng.integers(0, 24, 40)
    def loss(reading):
        tab = np.zeros(40, dtype=[("station", "i4"), ("hour", "i4"), ("value", "f8")])
        tab["station"] = station; tab["hour"] = hour
        tab["value"] = reading
        tab.sort(order=["station", "hour"])
        keys, inv, counts = np.unique(tab["station"], return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=tab["value"])
        means = sums / counts
        dev = tab["value"] - means[inv]
        return np.sum(dev ** 2) + np.sum(means * keys)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(40),), dict()


def hankel_as_strided_singular_spectrum_analysis():
    n, L = 30, 8
    def loss(x):
        K = n - L + 1
        H = np.lib.stride_tricks.as_strided(x, shape=(L, K), strides=(x.strides[0], x.strides[0]), writeable=False)
        U, s, Vt = np.linalg.svd(H, full_matrices=False)
        Hr = s[0] * np.outer(U[:, 0], Vt[0])
        rec = np.zeros(n); cnt = np.zeros(n)
        ii = np.arange(L)[:, None] + np.arange(K)[None, :]
        np.add.at(rec, ii, Hr)
        np.add.at(cnt, ii, 1.0)
        rec /= cnt
        return np.sum((rec - x) ** 2)
    t = np.arange(n)
    return loss, lambda s: (np.sin(t / 3) + 0.2 * np.random.default_rng(s).standard_normal(n),), dict(rtol=1e-4)


def einsum_path_optimized_tensor_network():
    rng = np.random.default_rng(13)
    B = rng.standard_normal((4, 5, 3)); C = rng.standard_normal((5, 6))
    def loss(A, D):
        path, _ = np.einsum_path("ij,jkl,km,mn->iln", A, B, C, D, optimize="greedy")
        T = np.einsum("ij,jkl,km,mn->iln", A, B, C, D, optimize=path)
        T2 = np.einsum("ij,jkl->ikl", A, B, optimize=True)
        return np.sum(T ** 2) + np.sum(T2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 4)), r.standard_normal((6, 2))
    return loss, make, dict(argnums=(0, 1))


def masked_invalid_weighted_climatology():
    rng = np.random.default_rng(14)
    gaps = rng.random((12, 5)) < 0.2
    def loss(temp, w):
        t = np.where(gaps, np.nan, temp)
        m = np.ma.masked_invalid(t)
        clim = np.ma.average(m, axis=0, weights=np.broadcast_to(w[:, None], m.shape))
        anom = m - clim
        filled = anom.filled(0.0)
        return np.sum(filled ** 2) + np.sum(clim)
    def make(s):
        r = np.random.default_rng(s)
        return 15 + r.standard_normal((12, 5)), 1 + r.random(12)
    return loss, make, dict(argnums=(0, 1))


def lexsort_reduceat_panel_segments():
    rng = np.random.default_rng(15)
    firm = rng.integers(0, 4, 30); year = rng.integers(2000, 2005, 30)
    def loss(ret):
        order = np.lexsort((year, firm))
        f_sorted = firm[order]
        starts = np.flatnonzero(np.r_[True, f_sorted[1:] != f_sorted[:-1]])
        r = ret[order]
        logg = np.log1p(r)
        cum = np.add.reduceat(logg, starts)
        mx = np.maximum.reduceat(r, starts)
        return np.sum(np.expm1(cum)) + np.sum(mx)
    return loss, lambda s: (0.05 * np.random.default_rng(s).standard_normal(30),), dict()


def searchsorted_asof_join_interpolation():
    rng = np.random.default_rng(16)
    t_quote = np.sort(rng.random(20)) * 10
    t_trade = np.sort(rng.random(15)) * 9 + 0.5
    def loss(quote):
        j = np.searchsorted(t_quote, t_trade, side="right") - 1
        j = np.clip(j, 0, len(t_quote) - 2)
        w = (t_trade - t_quote[j]) / (t_quote[j + 1] - t_quote[j])
        mid = quote[j] * (1 - w) + quote[j + 1] * w
        last = quote[j]
        return np.sum((mid - last) ** 2) + np.interp(5.0, t_quote, quote)
    return loss, lambda s: (np.cumsum(np.random.default_rng(s).standard_normal(20)),), dict()


def digitize_binned_weighted_profile():
    rng = np.random.default_rng(17)
    r = rng.random(50) * 2
    edges = np.linspace(0, 2, 6)
    def loss(mass):
        b = np.digitize(r, edges) - 1
        prof = np.bincount(b, weights=mass, minlength=5)
        h, _ = np.histogram(r, bins=edges, weights=mass ** 2)
        cdf = np.cumsum(prof) / np.sum(prof)
        return np.sum(cdf ** 2) + np.sum(h)
    return loss, lambda s: (1 + np.random.default_rng(s).random(50),), dict()


def argpartition_topk_and_take_wrap():
    def loss(scores, emb):
        k = 4
        idx = np.argpartition(-scores, k)[:k]
        top = scores[idx]
        w = np.exp(top - top.max()); w /= w.sum()
        ctx = np.take(emb, idx + 1, axis=0, mode="wrap")
        return np.sum(w[:, None] * ctx) + np.sum(np.choose(np.arange(3) % 2, [emb[0, :3], emb[1, :3]]))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(10), r.standard_normal((10, 5))
    return loss, make, dict(argnums=(0, 1))


def record_array_attribute_access_update():
    def loss(m, v):
        ps = np.rec.fromarrays([m, v, np.zeros(8)], names="mass,vel,ke")
        ps.ke = 0.5 * ps.mass * ps.vel ** 2
        ps.vel[ps.ke > 0.1] *= 0.5
        return np.sum(ps.ke) + np.sum(ps.vel * ps.mass)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(8), r.standard_normal(8)
    return loss, make, dict(argnums=(0, 1))


def sliding_window_axis_rolling_regression_slopes():
    def loss(y):
        W = np.lib.stride_tricks.sliding_window_view(y, 6, axis=1)
        t = np.arange(6) - 2.5
        slopes = np.einsum("bwk,k->bw", W - W.mean(-1, keepdims=True), t) / np.sum(t ** 2)
        out = np.empty_like(slopes)
        np.abs(slopes, out=out)
        return np.sum(out) + np.sum(slopes[:, ::2] ** 2)
    return loss, lambda s: (np.cumsum(np.random.default_rng(s).standard_normal((3, 20)), axis=1),), dict()


def unique_inverse_sparse_coo_sum_duplicates():
    rng = np.random.default_rng(18)
    users = rng.integers(0, 6, 40); items = rng.integers(0, 5, 40)
    def loss(rating):
        M = scipy.sparse.coo_matrix((rating, (users, items)), shape=(6, 5))
        M.sum_duplicates()
        D = M.toarray()
        deg = np.asarray((M != 0).sum(axis=1)).ravel()
        return np.sum(D ** 2) + np.sum(M.sum(axis=0)) + np.sum(deg)
    return loss, lambda s: (np.random.default_rng(s).random(40),), dict()


def fancy_index_scatter_with_repeats_then_gather():
    rng = np.random.default_rng(19)
    idx = rng.integers(0, 8, 20)
    def loss(x, w):
        acc = np.zeros(8)
        np.add.at(acc, idx, w * x[idx % 5])
        mx = np.full(8, -np.inf)
        np.maximum.at(mx, idx, w)
        mx[np.isinf(mx)] = 0
        acc[idx[:3]] += 1.0                       # buffered: repeats count once
        return np.sum(acc ** 2) + np.sum(mx)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(5), r.random(20)
    return loss, make, dict(argnums=(0, 1))
# ---------------------------------------------------------------------------------------------
# More fields: optics, finance, hydrology, neuroscience, condensed matter, learning


def heston_euler_full_truncation_mc():
    rng = np.random.default_rng(20)
    Z1 = rng.standard_normal((4, 50)); Z2 = rng.standard_normal((4, 50))
    def loss(params):
        kappa, theta, xi, rho, v0 = params
        S = np.full(50, 100.0); v = np.full(50, v0); vp = np.empty(50)
        dt = 0.5 / 4
        for k in range(4):
            np.maximum(v, 0.0, out=vp)
            W2 = rho * Z1[k] + np.sqrt(1 - rho ** 2) * Z2[k]
            S *= np.exp(-0.5 * vp * dt + np.sqrt(vp * dt) * Z1[k])
            v += kappa * (theta - vp) * dt + xi * np.sqrt(vp * dt) * W2
        return np.mean(np.maximum(S - 100.0, 0.0))
    return loss, lambda s: (np.array([2.0, 0.04, 0.3, -0.7, 0.04]) * (1 + 0.05 * np.random.default_rng(s).random(5)),), dict(rtol=1e-4, step=1e-6)


def tight_binding_bands_batched_eigvalsh():
    kpts = np.linspace(-np.pi, np.pi, 9)
    def loss(t, eps):
        H = np.zeros((len(kpts), 3, 3), complex)
        idx = np.arange(3)
        H[:, idx, idx] = eps
        hop = t[:, None] * np.exp(1j * kpts)[None, :]
        H[:, 0, 1] = hop[0]; H[:, 1, 2] = hop[1]; H[:, 2, 0] = hop[2]
        H += np.conj(np.swapaxes(H, -1, -2)) - np.eye(3) * H[:, idx, idx][:, None, :] * 0
        H[:, idx, idx] = eps
        E = np.linalg.eigvalsh(H)
        return np.sum(E[:, 0]) + np.sum(E[:, -1] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.0, 0.8, 0.6]) + 0.1 * r.random(3), np.array([0.0, 0.5, -0.3]) + 0.1 * r.random(3)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def kuramoto_oscillators_subtract_outer_rk4():
    n = 8
    def loss(theta0, omega, K):
        def f(th):
            return omega + K / n * np.sum(np.sin(np.subtract.outer(th, th).T), axis=1)
        th = theta0.copy()
        h = 0.1
        for _ in range(3):
            k1 = f(th); k2 = f(th + h / 2 * k1); k3 = f(th + h / 2 * k2); k4 = f(th + h * k3)
            th += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return np.abs(np.mean(np.exp(1j * th)))
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n) * 2 * np.pi, r.standard_normal(n), 1.5 + r.random()
    return loss, make, dict(argnums=(0, 1, 2))


def word2vec_negative_sampling_add_at_sgd():
    rng = np.random.default_rng(22)
    centers = rng.integers(0, 10, 6); contexts = rng.integers(0, 10, 6); negs = rng.integers(0, 10, (6, 3))
    def loss(Win, Wout):
        Wi = Win.copy(); Wo = Wout.copy()
        for c, o, ng in zip(centers, contexts, negs):
            v = Wi[c]
            s_pos = scipy.special.expit(Wo[o] @ v)
            s_neg = scipy.special.expit(-Wo[ng] @ v)
            gv = (s_pos - 1) * Wo[o] + (1 - s_neg) @ Wo[ng]
            Wo[o] -= 0.1 * (s_pos - 1) * v
            np.add.at(Wo, ng, -0.1 * (1 - s_neg)[:, None] * v)
            Wi[c] -= 0.1 * gv
        return -np.sum(np.log(scipy.special.expit(np.sum(Wi[centers] * Wo[contexts], axis=1))))
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal((10, 4)), 0.3 * r.standard_normal((10, 4))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def logistic_regression_newton_expit_log1p():
    rng = np.random.default_rng(23)
    X = np.column_stack([np.ones(40), rng.standard_normal((40, 2))])
    def loss(y, l2):
        w = np.zeros(3)
        for _ in range(5):
            p = scipy.special.expit(X @ w)
            g = X.T @ (p - y) + l2 * w
            Hm = (X.T * (p * (1 - p))) @ X + l2 * np.eye(3)
            w -= scipy.linalg.solve(Hm, g, assume_a="pos")
        z = X @ w
        return np.sum(np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) - y * z)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random(40) < scipy.special.expit(X @ [0.2, 1, -1])).astype(float) * 0.9 + 0.05, 0.5 + r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def mlp_minibatch_sgd_softmax_inplace():
    rng = np.random.default_rng(24)
    X = rng.standard_normal((16, 3)); lab = rng.integers(0, 3, 16)
    def loss(W1, W2):
        A = W1.copy(); B = W2.copy()
        onehot = np.eye(3)[lab]
        for ep in range(2):
            for sl in (slice(0, 8), slice(8, 16)):
                h = np.tanh(X[sl] @ A)
                z = h @ B
                z -= z.max(axis=1, keepdims=True)
                p = np.exp(z); p /= p.sum(axis=1, keepdims=True)
                dz = (p - onehot[sl]) / 8
                dh = dz @ B.T * (1 - h ** 2)
                B -= 0.5 * h.T @ dz
                A -= 0.5 * X[sl].T @ dh
        z = np.tanh(X @ A) @ B
        return np.mean(scipy.special.logsumexp(z, axis=1) - z[np.arange(16), lab])
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 * r.standard_normal((3, 5)), 0.5 * r.standard_normal((5, 3))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def beam_hermite_fem_ix_assembly_solve():
    ne = 6
    def loss(EI, q):
        L = 1.0 / ne
        K = np.zeros((2 * ne + 2, 2 * ne + 2)); f = np.zeros(2 * ne + 2)
        k0 = np.array([[12, 6 * L, -12, 6 * L], [6 * L, 4 * L ** 2, -6 * L, 2 * L ** 2],
                       [-12, -6 * L, 12, -6 * L], [6 * L, 2 * L ** 2, -6 * L, 4 * L ** 2]]) / L ** 3
        for e in range(ne):
            dofs = np.arange(2 * e, 2 * e + 4)
            K[np.ix_(dofs, dofs)] += EI[e] * k0
            f[dofs] += q[e] * L * np.array([0.5, L / 12, 0.5, -L / 12])
        free = np.arange(2, 2 * ne + 2)
        u = np.linalg.solve(K[np.ix_(free, free)], f[free])
        return u[-2] + 0.1 * np.sum(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.2 * r.random(ne), 1 + r.random(ne)
    return loss, make, dict(argnums=(0, 1))


def molecular_normal_modes_mass_weighted_eigh():
    n = 4
    def loss(k, m):
        K = np.zeros((n, n))
        for i in range(n - 1):
            K[i:i + 2, i:i + 2] += k[i] * np.array([[1, -1], [-1, 1]])
        K[0, 0] += k[-1]
        Minv = 1 / np.sqrt(m)
        Kw = Minv[:, None] * K * Minv[None, :]
        w2, modes = scipy.linalg.eigh(Kw)
        freqs = np.sqrt(np.abs(w2))
        return np.sum(freqs) + np.sum(modes[:, -1] ** 4)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(n), 1 + r.random(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def two_stream_radiative_transfer_tridiagonal():
    nl = 8
    def loss(tau, omega):
        g1 = 2 - omega * 1.5; g2 = omega * 0.5
        lam = np.sqrt(g1 ** 2 - g2 ** 2)
        T = np.exp(-lam * tau)
        n = nl + 1
        lower = np.zeros(n); diag = np.ones(n); upper = np.zeros(n)
        lower[1:] = -T * 0.5; upper[:-1] = -T * 0.3
        diag[1:] += g2 * 0.1
        b = np.zeros(n); b[0] = 1.0
        ab = np.vstack([upper, diag, lower])
        ab[0] = np.roll(ab[0], 1); ab[2] = np.roll(ab[2], -1)
        F = scipy.linalg.solve_banded((1, 1), ab, b)
        return F[-1] + np.sum(F ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 0.1 * r.random(nl), 0.5 + 0.2 * r.random(nl)
    return loss, make, dict(argnums=(0, 1))


def wright_fisher_moment_recursion_selection():
    def loss(s_coef, p0):
        p = p0.copy()
        het = np.empty((10, len(p)))
        for g in range(10):
            wbar = 1 + s_coef * p
            p *= (1 + s_coef) / wbar
            np.multiply(2 * p, 1 - p, out=het[g])
            het[g] *= (1 - 1 / 50) ** g
        return np.sum(het)
    def make(s):
        r = np.random.default_rng(s)
        return 0.05 + 0.01 * r.random(), 0.1 + 0.8 * r.random(5)
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# Arrays made by library calls, windows, grids and buffers the program fills in


def window_functions_multiplied_in_place_spectrum():
    n = 64
    def loss(x):
        w = scipy.signal.get_window("hann", n)
        w *= x                                       # SciPy's window, written with traced values
        k = np.kaiser(n, 5.0)
        k *= x
        spec = np.abs(np.fft.rfft(w)) ** 2 + np.abs(np.fft.rfft(k)) ** 2
        return np.sum(np.log(spec + 1e-3))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(n),), dict(rtol=1e-4)


def ogrid_mgrid_indices_written_then_used():
    n = 8
    def loss(a, b):
        yy, xx = np.ogrid[0:n, 0:n]
        r = np.hypot(yy - a, xx - b)
        G = np.mgrid[0:n, 0:n].astype(float)
        G[0] -= a
        G[1] -= b
        I = np.indices((n, n), dtype=float)
        I *= 0.1
        return np.sum(np.exp(-r ** 2 / 8)) + np.sum(np.exp(-(G ** 2).sum(0) / 8) * I[0])
    def make(s):
        r = np.random.default_rng(s)
        return 3.3 + r.random(), 4.1 + r.random()
    return loss, make, dict(argnums=(0, 1))


def meshgrid_sparse_broadcast_and_copy_write():
    def loss(k):
        x = np.linspace(0, 1, 6); y = np.linspace(0, 2, 5)
        X, Y = np.meshgrid(x, y, sparse=True)
        Z = np.sin(k[0] * X) * np.cos(k[1] * Y)
        Xd, Yd = np.meshgrid(x, y, copy=True)
        Xd *= k[0]
        Yd += Z
        return np.sum(Z ** 2) + np.sum(Xd * Yd)
    return loss, lambda s: (np.array([1.3, 0.7]) + 0.1 * np.random.default_rng(s).random(2),), dict()


def sparse_toarray_then_inplace_dense_update():
    n = 8
    L = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(n, n), format="csr")
    def loss(d):
        A = (L + scipy.sparse.diags(d)).toarray()
        A[0, -1] = A[-1, 0] = 1.0
        A += np.diag(d ** 2)
        A[np.diag_indices(n)] *= 1.5
        return np.linalg.slogdet(A)[1] + np.trace(np.linalg.inv(A))
    return loss, lambda s: (3 + np.random.default_rng(s).random(n),), dict(rtol=1e-4)


def sparse_todense_matrix_then_asarray():
    n = 6
    def loss(w):
        W = scipy.sparse.csr_matrix((w, (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
        M = W.todense()                               # np.matrix
        S = np.asarray(M + M.T)
        D = np.diag(S.sum(axis=1))
        Lap = D - S
        return np.sum(np.linalg.eigvalsh(Lap)[1:] ** 2)
    return loss, lambda s: (1 + np.random.default_rng(s).random(n),), dict(rtol=1e-4)


def block_diag_output_written_then_solved():
    def loss(a, b):
        A = scipy.linalg.block_diag(np.diag(a), np.outer(b, b) + np.eye(2))
        A[0, -1] = 0.1 * a[0]
        A[-1, 0] = 0.1 * a[0]
        x = scipy.linalg.solve(A, np.ones(len(A)), assume_a="sym")
        return np.sum(x ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 2 + r.random(3), r.random(2)
    return loss, make, dict(argnums=(0, 1))


def fromfunction_and_vander_then_lstsq():
    def loss(y):
        n = len(y)
        t = np.fromfunction(lambda i: i / (n - 1), (n,))
        V = np.vander(t, 4, increasing=True)
        V[:, 1:] *= 1.0
        coef, *_ = np.linalg.lstsq(V, y, rcond=None)
        W = np.fromfunction(lambda i, j: np.exp(-abs(i - j) / 2), (n, n))
        return np.sum(coef ** 2) + y @ W @ y * 1e-2
    return loss, lambda s: (np.random.default_rng(s).standard_normal(10),), dict()


def python_list_of_rows_then_array_then_inplace():
    def loss(x):
        rows = []
        for i in range(4):
            rows.append([x[i], x[i] ** 2, np.sin(x[i])])
        A = np.array(rows)
        A -= A.mean(axis=0)
        A /= A.std(axis=0) + 1.0
        cov = A.T @ A
        return np.sum(cov) + np.linalg.det(cov + np.eye(3))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(4),), dict(rtol=1e-4)


def astype_copy_order_and_require_writeable():
    def loss(x):
        y = x.astype(np.float64, order="F", copy=True)
        y[::2] *= 2.0
        z = np.require(x.T, requirements=["C", "W"])
        z += 1.0
        f = np.asfortranarray(x)
        return np.sum(y * z.T) + np.sum(f[:, 0] ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((4, 3)),), dict()


def tolist_roundtrip_and_item_scalars():
    def loss(x):
        vals = x.tolist()
        y = np.asarray(vals)
        s = 0.0
        for i in range(len(x)):
            s += x[i].item() * x[i] if i % 2 else float(x[i]) ** 2
        y[0] = s
        return np.sum(y ** 2) + s
    return loss, lambda s: (np.random.default_rng(s).standard_normal(5),), dict(jvp=False)


def copy_module_and_deepcopy_state_dict():
    import copy as _copy
    def loss(x):
        state = {"u": x.copy(), "hist": []}
        for _ in range(3):
            snap = _copy.deepcopy(state)
            state["u"] *= 0.9
            state["u"] += 0.1 * np.roll(snap["u"], 1)
            state["hist"].append(_copy.copy(state["u"]))
        return np.sum(np.array(state["hist"]) ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6),), dict()


def frombuffer_tobytes_roundtrip_constant_table():
    table = np.linspace(0, 1, 12).tobytes()
    def loss(x):
        w = np.frombuffer(table, dtype=np.float64).copy()
        w *= x
        w[3:6] = x[:3] ** 2
        return np.sum(w ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(12),), dict()


def loadtxt_stringio_coefficients_then_traced():
    import io
    text = "1.0 0.5 0.1\n0.3 1.2 0.0\n0.0 0.2 2.0\n"
    def loss(x):
        A = np.loadtxt(io.StringIO(text))
        A[np.diag_indices(3)] += x ** 2
        b = np.genfromtxt(io.StringIO("1,2,3"), delimiter=",")
        b *= x
        return np.sum(np.linalg.solve(A, b))
    return loss, lambda s: (1 + np.random.default_rng(s).random(3),), dict()


def ndarray_constructor_and_empty_view_buffers():
    def loss(x):
        buf = np.ndarray((2, 4))
        buf[0] = x
        buf[1] = x[::-1]
        v = np.empty(8).reshape(2, 4)
        np.multiply(buf, buf, out=v)
        return np.sum(v @ buf.T)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(4),), dict()


def tri_diagflat_triu_indices_assembly():
    def loss(x, y):
        n = len(x)
        T = np.tri(n, k=-1)
        T *= y
        D = np.diagflat(x)
        iu = np.triu_indices(n, 1)
        U = np.zeros((n, n))
        U[iu] = np.arange(len(iu[0])) * 0.1 * y[iu[0]]
        M = T + D + U
        return np.sum(np.linalg.solve(M, y))
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(5), r.random(5)
    return loss, make, dict(argnums=(0, 1))


def module_buffer_reassigned_inside_function():
    state = {"buf": None}
    def loss(x):
        if state["buf"] is None or state["buf"].shape != x.shape:
            state["buf"] = np.empty_like(x)
        buf = np.empty_like(x)                         # fresh inside, as allocation rules ask
        np.cumsum(x, out=buf)
        buf -= buf.mean()
        return np.sum(buf ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(7),), dict()


def scipy_special_out_buffers_and_where():
    def loss(x):
        out = np.empty_like(x)
        scipy.special.expit(x, out=out)
        lg = np.empty_like(x)
        scipy.special.gammaln(1 + np.abs(x), out=lg)
        r = np.divide(out, lg, out=np.zeros_like(x), where=lg > 0.1)
        scipy.special.log1p(r, out=r)
        return np.sum(r) + np.sum(out * x)
    return loss, lambda s: (2 * np.random.default_rng(s).standard_normal(8),), dict()


# ---------------------------------------------------------------------------------------------
# Sparse formats, solvers and filters the programs above leave out


def sparse_kron_anisotropic_2d_cg():
    n = 6
    def loss(kx, ky, f):
        Dx = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
        I = scipy.sparse.identity(n)
        A = (kx * scipy.sparse.kron(Dx, I) + ky * scipy.sparse.kron(I, Dx)).tocsr()
        u, info = scipy.sparse.linalg.cg(A, f, rtol=1e-12)
        return np.sum(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(), 0.5 + r.random(), r.random(n * n)
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def sparse_csc_column_slicing_and_transpose_products():
    rng = np.random.default_rng(25)
    M = scipy.sparse.random(12, 8, density=0.4, random_state=rng, format="csc")
    def loss(w, x):
        A = M.copy()
        A.data = A.data * w[: A.nnz]
        cols = A[:, 2:6]
        y = cols.T @ x
        z = A @ (A.T @ x)
        return np.sum(y ** 2) + np.sum(z) + A.sum()
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(M.nnz), r.standard_normal(12)
    return loss, make, dict(argnums=(0, 1))


def ndimage_label_then_per_region_sums():
    rng = np.random.default_rng(26)
    mask = scipy.ndimage.binary_opening(rng.random((12, 12)) > 0.45)
    labels, nlab = scipy.ndimage.label(mask)
    def loss(img):
        idx = np.arange(1, nlab + 1)
        s = scipy.ndimage.sum_labels(img, labels, idx)
        m = scipy.ndimage.mean(img, labels, idx)
        mx = scipy.ndimage.maximum(img, labels, idx)
        com = scipy.ndimage.center_of_mass(img, labels, idx[:2])
        return np.sum(s * m) + np.sum(mx) + np.sum(np.array(com))
    return loss, lambda s: (0.5 + np.random.default_rng(s).random((12, 12)),), dict(rtol=1e-4)


def ndimage_gaussian_gradient_magnitude_laplace_edges():
    def loss(img):
        g = scipy.ndimage.gaussian_gradient_magnitude(img, 1.0)
        l = scipy.ndimage.gaussian_laplace(img, 1.5)
        d = scipy.ndimage.gaussian_filter1d(img, 1.0, axis=0, order=1)
        return np.sum(g ** 2) + np.sum(l * img) + np.sum(d ** 2)
    return loss, lambda s: (np.random.default_rng(s).random((14, 12)),), dict()


def ndimage_median_maximum_percentile_filters():
    def loss(img):
        med = scipy.ndimage.median_filter(img, size=3)
        mx = scipy.ndimage.maximum_filter(img, size=(3, 1))
        p = scipy.ndimage.percentile_filter(img, 75, size=3)
        mn = scipy.ndimage.minimum_filter1d(img, 3, axis=1)
        return np.sum(med * mx) + np.sum(p) + np.sum(mn ** 2)
    return loss, lambda s: (np.random.default_rng(s).random((10, 10)),), dict(step=1e-7)


def ndimage_shift_rotate_zoom_order1():
    def loss(img, dy):
        a = scipy.ndimage.shift(img, (dy, 0.3), order=1, mode="nearest")
        b = scipy.ndimage.rotate(img, 17.0, reshape=False, order=1)
        c = scipy.ndimage.zoom(img, 1.5, order=1)
        return np.sum(a * b) + np.sum(c ** 2) * 0.1
    def make(s):
        r = np.random.default_rng(s)
        return r.random((10, 10)), 0.4 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def ndimage_correlate1d_convolve_traced_weights():
    def loss(img, w):
        a = scipy.ndimage.correlate1d(img, w, axis=0, mode="mirror")
        b = scipy.ndimage.convolve(img, np.outer(w, w), mode="constant", cval=0.0)
        out = np.empty_like(img)
        scipy.ndimage.convolve1d(a, w[::-1], axis=1, output=out)
        return np.sum(out * b)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((9, 8)), np.array([0.25, 0.5, 0.25]) + 0.1 * r.random(3)
    return loss, make, dict(argnums=(0, 1))


def signal_convolve2d_symm_and_lfilter_axis():
    k = np.array([[1, 2, 1], [0, 0, 0], [-1, -2, -1]], float) / 8
    def loss(img, a):
        e = scipy.signal.convolve2d(img, k, mode="same", boundary="symm")
        f = scipy.signal.lfilter([1 - a], [1, -a], e, axis=1)
        g = scipy.signal.sosfiltfilt(scipy.signal.butter(2, 0.3, output="sos"), img, axis=0)
        return np.sum(f ** 2) + np.sum(g * img)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((10, 12)), 0.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def signal_find_peaks_then_traced_heights_widths():
    t = np.linspace(0, 1, 80)
    def loss(y):
        peaks, props = scipy.signal.find_peaks(y, height=0.3, distance=5)
        widths = scipy.signal.peak_widths(y, peaks, rel_height=0.5)[0]
        return np.sum(y[peaks] ** 2) + np.sum(props["peak_heights"]) + 0.0 * np.sum(widths)
    return loss, lambda s: (np.sin(12 * np.pi * t) ** 2 + 0.05 * np.random.default_rng(s).random(80),), dict()


def signal_decimate_detrend_periodogram():
    def loss(x):
        y = scipy.signal.decimate(x, 2, ftype="fir")
        z = scipy.signal.detrend(y, type="linear")
        f, P = scipy.signal.periodogram(z, fs=50.0, window="hann")
        return np.sum(P[1:10]) + np.sum(z ** 2) * 0.1
    return loss, lambda s: (np.random.default_rng(s).standard_normal(96),), dict(rtol=1e-4)


def signal_stft_istft_spectral_gate():
    def loss(x, thr):
        f, t, Z = scipy.signal.stft(x, nperseg=16)
        mag = np.abs(Z)
        gain = mag ** 2 / (mag ** 2 + thr)
        _, y = scipy.signal.istft(Z * gain, nperseg=16)
        return np.sum(y[: len(x)] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(64), 0.1 + 0.05 * r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def quad_with_traced_args_and_simpson_romb():
    def loss(p):
        val, _ = scipy.integrate.quad(lambda x, a, b: np.exp(-a * x) * np.sin(b * x), 0, 2, args=(p[0], p[1]))
        xs = np.linspace(0, 2, 17)
        ys = np.exp(-p[0] * xs) * np.cos(p[1] * xs)
        return val + scipy.integrate.simpson(ys, x=xs) + scipy.integrate.romb(ys, dx=xs[1] - xs[0])
    return loss, lambda s: (np.array([0.7, 2.0]) + 0.1 * np.random.default_rng(s).random(2),), dict(rtol=1e-4)


def brentq_newton_halley_roots_traced():
    def loss(a):
        r1 = scipy.optimize.brentq(lambda x: x ** 3 - a[0], 0.1, 5.0, xtol=1e-14)
        r2 = scipy.optimize.newton(lambda x: np.cos(x) - a[1] * x, 0.5, fprime=lambda x: -np.sin(x) - a[1],
                                   fprime2=lambda x: -np.cos(x), tol=1e-14)
        return r1 * r2
    return loss, lambda s: (np.array([2.0, 0.8]) + 0.1 * np.random.default_rng(s).random(2),), dict(rtol=1e-4)


def stats_distributions_mixed_likelihood():
    def loss(p, x, k):
        a, b, lam = np.exp(p)
        ll = np.sum(scipy.stats.beta.logpdf(x, a, b))
        ll += np.sum(scipy.stats.poisson.logpmf(k, lam))
        ll += np.sum(scipy.stats.norm.logcdf(x - 0.5)) + np.sum(scipy.stats.norm.logsf(x))
        ll += scipy.stats.entropy(np.exp(p) / np.sum(np.exp(p)))
        return -ll
    def make(s):
        r = np.random.default_rng(s)
        return np.log([2.0, 3.0, 1.5]) + 0.1 * r.random(3), r.beta(2, 3, 20), r.poisson(1.5, 20)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def multivariate_normal_traced_cov_logpdf():
    def loss(L, X):
        C = L @ L.T + 0.1 * np.eye(3)
        return -np.sum(scipy.stats.multivariate_normal.logpdf(X, mean=np.zeros(3), cov=C))
    def make(s):
        r = np.random.default_rng(s)
        return np.eye(3) + 0.1 * np.tril(r.standard_normal((3, 3))), r.standard_normal((10, 3))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def akima_bspline_splev_interpolate_integrate():
    x = np.linspace(0, 3, 10)
    def loss(y):
        ak = scipy.interpolate.Akima1DInterpolator(x, y)
        tck = scipy.interpolate.splrep(x, y, s=0)
        v = scipy.interpolate.splev(np.linspace(0.1, 2.9, 7), tck)
        I = scipy.interpolate.splint(0, 3, tck)
        return np.sum(ak(np.linspace(0, 3, 13)) ** 2) + np.sum(v) + I
    return loss, lambda s: (np.sin(x) + 0.1 * np.random.default_rng(s).random(10),), dict()


def interpn_and_griddata_linear_fill():
    gx, gy = np.linspace(0, 1, 5), np.linspace(0, 1, 6)
    pts = np.random.default_rng(27).random((8, 2)) * 0.9 + 0.05
    def loss(V):
        a = scipy.interpolate.interpn((gx, gy), V, pts, method="linear")
        P = np.stack(np.meshgrid(gx, gy, indexing="ij"), -1).reshape(-1, 2)
        b = scipy.interpolate.griddata(P, V.ravel(), pts, method="linear")
        return np.sum(a * b)
    return loss, lambda s: (np.random.default_rng(s).random((5, 6)),), dict()


# ---------------------------------------------------------------------------------------------
# Single precision, complex arguments, decisions that change between calls


def float32_image_pipeline_single_precision():
    def loss(img, gain):
        x = img * gain
        x -= x.mean(axis=0, keepdims=True)
        np.clip(x, -0.5, 0.5, out=x)
        blur = scipy.ndimage.gaussian_filter(x, 1.0)
        return np.sum(blur ** 2, dtype=np.float32)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((10, 10)).astype(np.float32), np.float32(1.2 + 0.1 * r.random())
    return loss, make, dict(argnums=(0,), rtol=1e-3, step=1e-3, forward_rtol=1e-5)


def float32_rnn_scan_preallocated_states():
    def loss(W, x):
        h = np.zeros((len(x) + 1, W.shape[0]), dtype=np.float32)
        for t in range(len(x)):
            np.tanh(W @ h[t] + x[t], out=h[t + 1])
        return np.sum(h[-1] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (0.5 * r.standard_normal((4, 4))).astype(np.float32), r.standard_normal((6, 4)).astype(np.float32)
    return loss, make, dict(argnums=(0, 1), rtol=2e-2, step=1e-2)


def complex_argument_quantum_state_fidelity():
    def loss(psi_re, psi_im, theta):
        psi = psi_re + 1j * psi_im
        psi = psi / np.linalg.norm(psi)
        H = np.array([[0, 1], [1, 0]], complex)
        U = scipy.linalg.expm(-1j * theta * np.kron(H, np.eye(2)))
        out = U @ psi
        target = np.array([1, 0, 0, 1j]) / np.sqrt(2)
        return np.abs(np.vdot(target, out)) ** 2
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(4), r.standard_normal(4), 0.3 + r.random()
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def complex_valued_argument_circuit_impedance():
    w = np.logspace(1, 4, 9)
    def loss(z_load, R):
        Zc = 1 / (1j * w * 1e-5)
        Z = R + Zc * z_load / (Zc + z_load)
        return np.sum(np.abs(Z) ** 2) * 1e-4 + np.sum(np.angle(Z))
    def make(s):
        r = np.random.default_rng(s)
        return (50 + 10 * r.random(9)) + 1j * (20 + 5 * r.random(9)), 30.0 + r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def active_set_projected_gradient_box_qp():
    rng = np.random.default_rng(28)
    M = rng.standard_normal((6, 6)); Q = M @ M.T + np.eye(6)
    def loss(c):
        x = np.zeros(6)
        for _ in range(15):
            g = Q @ x - c
            x -= 0.05 * g
            np.clip(x, 0.0, 1.0, out=x)
        active = (x <= 0) | (x >= 1)
        return 0.5 * x @ Q @ x - c @ x + np.sum(active)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6) * 2,), dict(rtol=1e-4, step=1e-7)


def generator_of_batches_and_running_statistics():
    def batches(X, size):
        for i in range(0, len(X), size):
            yield X[i:i + size]
    def loss(X, w):
        mean = np.zeros(X.shape[1]); M2 = np.zeros(X.shape[1]); n = 0
        for B in batches(X, 4):
            for row in B:
                n += 1
                d = row - mean
                mean += d / n
                M2 += d * (row - mean)
        var = M2 / (n - 1)
        return np.sum(w * var) + np.sum(mean ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((10, 3)), 1 + r.random(3)
    return loss, make, dict(argnums=(0, 1))


def dataclass_simulation_state_methods():
    from dataclasses import dataclass, field
    @dataclass
    class Cloth:
        x: np.ndarray
        v: np.ndarray = None
        k: float = 10.0
        history: list = field(default_factory=list)
        def __post_init__(self):
            self.v = np.zeros_like(self.x)
        def forces(self):
            d = np.diff(self.x, axis=0)
            L = np.linalg.norm(d, axis=1, keepdims=True)
            f = self.k * (L - 0.5) * d / L
            F = np.zeros_like(self.x)
            F[:-1] += f; F[1:] -= f
            F[:, 1] -= 0.1
            F[0] = 0.0
            return F
        def step(self, dt):
            self.v += dt * self.forces()
            self.v *= 0.98
            self.x += dt * self.v
            self.history.append(self.x[-1, 1].copy())
    def loss(x0, k):
        c = Cloth(x0.copy(), k=k)
        for _ in range(8):
            c.step(0.02)
        return np.sum(np.array(c.history) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.column_stack([np.arange(5) * 0.5, np.zeros(5)]) + 0.01 * r.random((5, 2)), 10.0 + r.random()
    return loss, make, dict(argnums=(0, 1))


def nan_aware_reductions_with_gaps_and_errstate():
    gaps = np.random.default_rng(29).random(20) < 0.2
    def loss(x):
        y = x.copy()
        y[gaps] = np.nan
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.log(np.abs(y))
        m = np.nanmean(y); s = np.nanstd(y); med = np.nanmedian(y)
        q = np.nanpercentile(y, [25, 75])
        return m + s + med + np.sum(q) + np.nansum(z) + np.nanmax(y) - np.nanmin(y)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(20) + 3,), dict()


def polynomial_fit_class_roots_and_deriv():
    x = np.linspace(-1, 1, 15)
    def loss(y):
        p = np.polynomial.Polynomial.fit(x, y, 3)
        d = p.deriv()
        c = np.polyfit(x, y, 2)
        return np.sum(d(x) ** 2) + np.polyval(c, 0.3) + p.integ()(1.0)
    return loss, lambda s: (x ** 3 - x + 0.1 * np.random.default_rng(s).standard_normal(15),), dict()


def cross_product_rigid_body_euler_equations():
    def loss(w0, I):
        w = w0.copy(); R = np.eye(3)
        for _ in range(4):
            Iw = I * w
            dw = -np.cross(w, Iw) / I
            w += 0.02 * dw
            Wx = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
            R = R @ scipy.linalg.expm(0.02 * Wx)
        return np.sum(R[:, 0] * np.array([1.0, 2.0, 3.0])) + np.sum(w ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.1, 1.0, 0.2]) + 0.1 * r.random(3), np.array([1.0, 2.0, 3.0]) + 0.1 * r.random(3)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def scipy_linalg_lu_qr_svd_pipeline():
    def loss(A):
        P, L, U = scipy.linalg.lu(A)
        Q, R = scipy.linalg.qr(A, mode="economic")
        s = scipy.linalg.svdvals(A)
        N = scipy.linalg.orth(A[:, :2])
        return np.sum(np.abs(np.diag(U))) + np.sum(np.abs(np.diag(R))) + np.sum(s ** 2) + np.sum(N ** 4)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((5, 4)) + 2 * np.eye(5, 4),), dict(rtol=1e-4)


def lapack_overwrite_a_on_locally_built_matrix():
    n = 6
    def loss(d, b):
        A = np.diag(d) + 0.3 * np.ones((n, n))
        lu, piv = scipy.linalg.lu_factor(A, overwrite_a=True)
        x = scipy.linalg.lu_solve((lu, piv), b.copy(), overwrite_b=True)
        C = np.diag(d ** 2) + 0.1
        c = scipy.linalg.cholesky(C, lower=True, overwrite_a=True)
        y = scipy.linalg.cho_solve((c, True), x, overwrite_b=True)
        return np.sum(y * b) + np.sum(A)
    def make(s):
        r = np.random.default_rng(s)
        return 2 + r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def special_functions_quadrature_and_softmax():
    xg, wg = np.polynomial.hermite.hermgauss(12)
    def loss(mu, sig, logits):
        vals = scipy.special.log_ndtr(mu + np.sqrt(2) * sig * xg)
        E = np.sum(wg * vals) / np.sqrt(np.pi)
        p = scipy.special.softmax(logits)
        lp = scipy.special.log_softmax(logits)
        return E + np.sum(scipy.special.xlogy(p, p)) + lp[0] + np.sum(scipy.special.eval_legendre(3, np.tanh(logits)))
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 0.1 * r.random(), 0.8 + 0.1 * r.random(), r.standard_normal(5)
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def median_and_sort_based_robust_losses():
    def loss(r):
        med = np.median(r)
        mad = np.median(np.abs(r - med))
        s = np.sort(r)
        trimmed = s[2:-2].mean()
        q = np.quantile(r, [0.1, 0.9], method="linear")
        order = np.argsort(r)
        ranks = np.empty_like(order); ranks[order] = np.arange(len(r))
        return med + mad + trimmed + q[1] - q[0] + np.sum(r * ranks) * 0.01
    return loss, lambda s: (np.random.default_rng(s).standard_normal(15),), dict()


def convolve_correlate_histogram2d_features():
    rng = np.random.default_rng(30)
    px, py = rng.random(30), rng.random(30)
    def loss(sig, w):
        c = np.convolve(sig, [0.25, 0.5, 0.25], mode="valid")
        r = np.correlate(sig, sig[:4], mode="full")
        H, _, _ = np.histogram2d(px, py, bins=4, weights=w)
        return np.sum(c ** 2) + np.sum(r) * 0.1 + np.sum(H ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(12), r.random(30)
    return loss, make, dict(argnums=(0, 1))


def cumprod_survival_and_interp_periodic():
    def loss(h, phase):
        S = np.cumprod(1 - h)
        pdf = np.empty_like(S)
        pdf[0] = h[0]
        pdf[1:] = S[:-1] * h[1:]
        ang = np.linspace(0, 2 * np.pi, 8, endpoint=False)
        v = np.interp(phase + np.array([0.1, 3.0, 6.2, 7.0]), ang, h[:8], period=2 * np.pi)
        return np.sum(pdf * np.arange(len(h))) + np.sum(v ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.1 + 0.2 * r.random(10), 0.3 + r.random()
    return loss, make, dict(argnums=(0, 1))


def ufunc_reduce_where_and_accumulate():
    def loss(x):
        m = x > 0
        s = np.add.reduce(x, where=m, initial=0.0)
        p = np.multiply.reduce(1 + 0.1 * x, axis=0)
        acc = np.maximum.accumulate(x)
        la = np.logaddexp.accumulate(x)
        return np.sum(s) + np.sum(p) + np.sum(acc) + np.sum(la[-1])
    return loss, lambda s: (np.random.default_rng(s).standard_normal((4, 5)),), dict()


PROGRAMS = [obj for name, obj in list(globals().items())
            if callable(obj) and getattr(obj, "__module__", None) == __name__
            and not name.startswith(("check", "test", "_"))]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_research_program(program):
    check(program)


# ---------------------------------------------------------------------------------------------
# Programs whose later calls change the decisions taken inside NumPy's and SciPy's calls and in
# Python (bounds hit or not, ties, NaNs, iteration counts, a CFL step, a limiter's branches):
# each call replayed bit for bit as traced and as NumPy, the caller's arrays left alone.


def _projected_gradient_clip(x):
    u = np.zeros_like(x)
    for _ in range(4):
        u -= 0.5 * (u - x)
        np.clip(u, -1.0, 1.0, out=u)
    return np.sum(u ** 2 * np.arange(1, u.size + 1))


def _winner_take_all_argmax(x):
    w = np.tile(x, (3, 1)) * np.array([1.0, 2.0, 3.0])[:, None]
    for _ in range(3):
        k = np.argmax(w @ x)
        w[k] += 0.1 * (x - w[k])
    return np.sum(w ** 2) + w[np.argmax(w[:, 0])].sum()


def _nan_filled_by_the_mean(x):
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.log(x)
    y[np.isnan(y)] = np.nanmean(y)
    return np.nansum(y ** 2) + np.nanmax(x)


def _newton_until_converged(a):
    x = a.copy()
    for _ in range(50):
        dx = (x * x - a) / (2 * x)
        x -= dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x * np.array([1.0, 2.0, 3.0]))


def _python_min_max_sorted(x):
    values = [x[0] * x[1], x[1] - x[2], x[2] ** 2]
    return max(values) - min(values) + sorted(values)[1] * 3.0 + max(x[0], 0.5)


def _kmeans_argmin_add_at(c):
    points = np.array([[0.0, 0], [1, 0], [0, 1], [5, 5], [6, 5], [5, 6]])
    c = c.reshape(2, 2).copy()
    for _ in range(3):
        d = ((points[:, None, :] - c[None]) ** 2).sum(-1)
        label = np.argmin(d, axis=1)
        sums = np.zeros_like(c)
        np.add.at(sums, label, points)
        counts = np.bincount(label, minlength=2)
        kept = counts > 0
        c[kept] = sums[kept] / counts[kept, None]
    return np.sum(d.min(axis=1)) + np.sum(c ** 2)


def _burgers_cfl_step_minmod(u0):
    u = u0.copy()
    dx, t, end = 1.0 / u.size, 0.0, 0.05
    while t < end:
        dt = min(0.4 * dx / np.max(np.abs(u)), end - t)
        a, b = u - np.roll(u, 1), np.roll(u, -1) - u
        du = np.where(a * b > 0, np.sign(a) * np.minimum(np.abs(a), np.abs(b)), 0.0)
        left, right = u + 0.5 * du, np.roll(u - 0.5 * du, -1)
        flux = np.maximum(0.5 * np.maximum(left, 0) ** 2, 0.5 * np.minimum(right, 0) ** 2)
        u -= dt / dx * (flux - np.roll(flux, 1))
        t += dt
    return np.sum(u ** 2 * np.arange(u.size))


_GRID = np.linspace(0.0, 1.0, 12, endpoint=False)
DECISIONS = {
    "clip bounds": (_projected_gradient_clip, [[0.5, 2, -3], [0.1, 0.2, 0.3], [5, 5, -5],
                                               [1.0, -1.0, 2.0]]),
    "argmax ties": (_winner_take_all_argmax, [[1, 2], [-1, -2], [0, 0], [1, -1]]),
    "nan or not": (_nan_filled_by_the_mean, [[1, 2, 3], [-1, 2, 3], [1, -2, -3], [1, 2, 3]]),
    "iteration count": (_newton_until_converged, [[2, 3, 4], [1, 1, 1], [100, 1e-3, 7]]),
    "python min max sorted": (_python_min_max_sorted, [[1, 2, 3], [-1, 2, -3], [0.5, 0.5, 0.5],
                                                       [2, 0, 1]]),
    "argmin labels": (_kmeans_argmin_add_at, [[0, 0, 5, 5], [5, 5, 0, 0], [-10, -10, 1, 1],
                                              [3, 3, 3, 3]]),
    "cfl steps and limiter": (_burgers_cfl_step_minmod, [np.sin(2 * np.pi * _GRID) + 1.5,
                                                          np.where(_GRID < 0.5, 2.0, 0.5),
                                                          -np.cos(2 * np.pi * _GRID)]),
}


@pytest.mark.parametrize("name", DECISIONS)
def test_a_replay_takes_the_decisions_each_call_changes(name):
    f, calls = DECISIONS[name]
    replaying = mutad.value_and_grad(f, replay=True)
    for x in map(np.array, calls + calls[:1]):
        x = x.astype(float)
        before = x.tobytes()
        got = replaying(x)
        assert x.tobytes() == before
        traced = mutad.value_and_grad(f)(x.copy())
        assert _same(got[0], traced[0]) and _same(got[1], traced[1])
        assert _same(got[0], f(x.copy()))


# ---------------------------------------------------------------------------------------------
# Regressions found by the programs above


def test_a_complex_banded_solve_is_differentiated():
    # regression: solve_banded refused complex values, though its rule (transposes, no
    # conjugates) holds for them as written: x = A⁻¹ b is complex-differentiable
    rng = np.random.default_rng(0)
    n = 6
    ab = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    ab[1] += 4
    b = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    w = rng.standard_normal((n, 2))

    def loss(ab, b):
        return np.sum(w * np.abs(scipy.linalg.solve_banded((1, 1), ab, b)) ** 2)

    before = (ab.copy(), b.copy())
    mutad.check_grads(loss, ab, b)
    mutad.check_jvp(loss, ab, b)
    assert np.array_equal(ab, before[0]) and np.array_equal(b, before[1])


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)], ids=["tall", "wide"])
@pytest.mark.parametrize("form", ["lu", "permute_l", "p_indices", "lu_factor"])
def test_the_lu_factors_of_a_rectangular_matrix_are_differentiated(shape, form):
    # regression: scipy.linalg.lu and lu_factor of a rectangular matrix were refused
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    k = min(shape)
    weights = [rng.standard_normal(s) for s in ((shape[0], k), (k, shape[1]), shape)]

    def loss(a):
        if form == "lu_factor":
            return np.sum(scipy.linalg.lu_factor(a)[0] * weights[2])
        factors = scipy.linalg.lu(a, permute_l=form == "permute_l", p_indices=form == "p_indices")
        return np.sum(factors[-2] * weights[0]) + np.sum(factors[-1] * weights[1] ** 2)

    before = a.copy()
    value, grad = mutad.value_and_gradient(loss, a)
    assert _same(value, loss(a.copy())) and np.array_equal(a, before)
    mutad.check_grads(loss, a, modes=("rev", "fwd"))
