"""Whole research programs in fields and code shapes the earlier files leave out, written as
their scientists and engineers write NumPy and SciPy: a D2Q9 lattice Boltzmann flow past a
cylinder bounced back by fancy-indexed swaps, 1-D particle-in-cell with a ``solve_banded`` field
and an ``np.interp`` gather, 2-D shallow water with a superbee limiter and ``np.divide(where=)``,
Swift-Hohenberg by ``fft2``, an unscented Kalman filter, a Laplace-approximated GP classifier,
Levenberg-Marquardt by hand with accepted and rejected steps, demons registration, periodic
``CubicSpline`` integrals, FEM assembled into ``lil_matrix`` with a generalized ``eigsh``,
FastICA, absorbing Markov chains, optimal control by shooting, ``odeint(tfirst=True)``, a
multi-server queue on a seeded generator, MPS transfer matrices, non-local means, cotangent
Laplacians by ``np.add.at``, weighted ``polyfit(cov=)``; SciPy's ``ode`` class and ``RK45``
stepped by hand, BLAS and LAPACK routines called directly, sparse patterns given traced
``.data``, in-place ``coo`` data and ``max(axis, explicit=True)``, ``lil`` ``setdiag`` with
Dirichlet rows and ``gmres`` with an ILU preconditioner, ``expm_multiply`` on a time grid,
ndimage labels and filters into ``output=`` buffers, cubic ``rotate``/``zoom``/``shift``,
``savgol_filter``/``detrend(bp=)``/``medfilt``, ``sosfilt`` along an axis with traced ``zi``,
``cont2discrete``/``bilinear``/``freqz``, ``interp1d`` extrapolated, ``RectBivariateSpline``,
``RegularGridInterpolator`` in 3-D, ``LinearNDInterpolator``, ``curve_fit(absolute_sigma=)``,
``least_squares(loss="soft_l1")``, bounded ``minimize_scalar``, descriptive statistics,
``expm``/``solve_continuous_are``/``lu_solve(trans=1)``/``eigh_tridiagonal(select="i")``;
thin-film transfer matrices, J2 plasticity by radial return, Peng-Robinson by ``np.roots``,
Izhikevich neurons, motif scans, NMF, ALS on masked ratings, an integral projection model, VAR
impulse responses, gravity of a prism, Muskingum routing, economic dispatch, binned KDEs,
Karplus-Strong, ``np.vectorize`` of ``quad``, masked climatologies, Black-Litterman, Rayleigh
quotient iteration, float pairs viewed as complex, the ``operator`` module and ``frompyfunc``,
AC nodal analysis.

Each is checked as ``test_real_programs8`` checks its programs: NumPy's value bit for bit, the
gradient against finite differences, the caller's arrays bit for bit, ``replay=True`` over three
calls with other inputs bit for bit against tracing, and the tangent of ``jvp`` against the
gradient (where cheap: not through a solver's iterations)."""

import functools
import itertools
import operator
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.fft
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.linalg.blas
import scipy.ndimage
import scipy.optimize
import scipy.signal
import scipy.sparse
import scipy.sparse.linalg
import scipy.spatial
import scipy.spatial.distance
import scipy.special
import scipy.stats
from numpy.lib.stride_tricks import sliding_window_view

from tests.test_real_programs8 import check

# ---------------------------------------------------------------------------------------------
# Flows, particles, filters, fits and assemblies


def lbm_d2q9_cylinder_bounce_back_fancy_swap():
    nx, ny = 10, 6
    c = np.array([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]])
    w = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)
    opp = np.array([0, 3, 4, 1, 2, 7, 8, 5, 6])
    X, Y = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    solid = (X - 4) ** 2 + (Y - 3) ** 2 < 2.5
    def equilibrium(rho, u):
        cu = np.einsum("qd,xyd->qxy", c, u)
        usq = np.sum(u ** 2, axis=-1)
        return w[:, None, None] * rho * (1 + 3 * cu + 4.5 * cu ** 2 - 1.5 * usq)
    def loss(tau, u0):
        u = np.zeros((nx, ny, 2))
        u[..., 0] = u0
        f = equilibrium(np.ones((nx, ny)), u)
        for _ in range(4):
            rho = f.sum(axis=0)
            u = np.einsum("qxy,qd->xyd", f, c) / rho[..., None]
            f += (equilibrium(rho, u) - f) / tau
            bounced = f[opp][:, solid]
            for q in range(9):
                f[q] = np.roll(f[q], tuple(c[q]), axis=(0, 1))
            f[:, solid] = bounced
        return np.sum(u[~solid] ** 2) + f[1, 0, 0]
    def make(s):
        return 0.8 + 0.05 * s, 0.05 + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def pic_1d_banded_poisson_interp_gather():
    n, npart = 16, 40
    L = 1.0
    dx = L / n
    xg = np.arange(n) * dx
    def loss(x0, v0, qm):
        x, v = x0.copy(), v0.copy()
        ab = np.zeros((3, n - 1))
        ab[0, 1:] = 1.0
        ab[1] = -2.0
        ab[2, :-1] = 1.0
        for _ in range(3):
            j = np.floor(x / dx).astype(int) % n
            frac = x / dx - np.floor(x / dx)
            rho = np.bincount(j, weights=1 - frac, minlength=n) + np.bincount((j + 1) % n, weights=frac, minlength=n)
            rho -= rho.mean()
            phi = np.zeros(n)
            phi[1:] = scipy.linalg.solve_banded((1, 1), ab, -rho[1:] * dx ** 2)
            E = -(np.roll(phi, -1) - np.roll(phi, 1)) / (2 * dx)
            Ep = np.interp(x, np.append(xg, L), np.append(E, E[0]))
            v += qm * Ep * 0.05
            x += v * 0.05
            np.mod(x, L, out=x)
        return np.sum(v ** 2) + 0.1 * np.sum(phi ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sort(r.random(npart)) * 0.98 + 0.01, 0.1 * r.standard_normal(npart), -1.0 + 0.1 * s
    return loss, make, dict(argnums=(1, 2))


def shallow_water_2d_superbee_pad_edge_diff():
    n = 8
    g = 9.81
    def superbee(r):
        return np.maximum.reduce([np.zeros_like(r), np.minimum(2 * r, 1), np.minimum(r, 2)])
    def limited_slopes(q):
        qp = np.pad(q, ((1, 1), (0, 0)), mode="edge")
        d = np.diff(qp, axis=0)
        num, den = d[:-1], d[1:]
        r = np.divide(num, den, out=np.zeros_like(num), where=np.abs(den) > 1e-12)
        return superbee(r) * den
    def loss(h0, dt):
        h = h0.copy()
        hu = np.zeros_like(h)
        for _ in range(3):
            s = limited_slopes(h)
            hl, hr = h[:-1] + 0.5 * s[:-1], h[1:] - 0.5 * s[1:]
            ul, ur = hu[:-1] / h[:-1], hu[1:] / h[1:]
            a = np.maximum(np.abs(ul) + np.sqrt(g * hl), np.abs(ur) + np.sqrt(g * hr))
            Fh = 0.5 * (hl * ul + hr * ur) - 0.5 * a * (hr - hl)
            Fm = 0.5 * (hl * ul ** 2 + 0.5 * g * hl ** 2 + hr * ur ** 2 + 0.5 * g * hr ** 2) - 0.5 * a * (hr * ur - hl * ul)
            h[1:-1] -= dt * (Fh[1:] - Fh[:-1])
            hu[1:-1] -= dt * (Fm[1:] - Fm[:-1])
        return np.sum(h ** 2) + np.sum(hu[:, 2])
    def make(s):
        r = np.random.default_rng(s)
        x = np.linspace(-1, 1, n)
        return 1 + 0.2 * np.exp(-4 * np.add.outer(x ** 2, 0.5 * x ** 2)) + 0.01 * r.random((n, n)), 0.01
    return loss, make, dict(argnums=(0,), step=1e-6)


def swift_hohenberg_fft2_semi_implicit():
    n = 16
    k = 2 * np.pi * np.fft.fftfreq(n, d=0.5)
    K2 = k[:, None] ** 2 + k[None, :] ** 2
    def loss(u0, eps):
        u = u0.copy()
        lin = eps - (1 - K2) ** 2
        dt = 0.1
        for _ in range(4):
            nl = np.fft.fft2(-u ** 3)
            uh = (np.fft.fft2(u) + dt * nl) / (1 - dt * lin)
            u[...] = np.fft.ifft2(uh).real
        return np.mean(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.1 * r.standard_normal((n, n)), 0.3 + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def unscented_kalman_filter_sigma_points_cholesky():
    def fx(x, dt):
        return np.array([x[0] + dt * x[1], x[1] - dt * np.sin(x[0])])
    def hx(x):
        return np.array([np.sin(x[0])])
    def loss(zs, q):
        n, alpha, kappa, beta = 2, 0.5, 1.0, 2.0
        lam = alpha ** 2 * (n + kappa) - n
        Wm = np.full(2 * n + 1, 0.5 / (n + lam))
        Wc = Wm.copy()
        Wm[0] = lam / (n + lam)
        Wc[0] = Wm[0] + 1 - alpha ** 2 + beta
        x, P = np.array([0.3, 0.0]), np.eye(2) * 0.1
        Q, R = q * np.eye(2), np.array([[0.05]])
        nll = 0.0
        for z in zs:
            S = scipy.linalg.cholesky((n + lam) * P, lower=True)
            sig = np.vstack([x, x + S.T, x - S.T])
            Y = np.array([fx(s, 0.1) for s in sig])
            x = Wm @ Y
            d = Y - x
            P = np.einsum("i,ij,ik->jk", Wc, d, d) + Q
            S = scipy.linalg.cholesky((n + lam) * P, lower=True)
            sig = np.vstack([x, x + S.T, x - S.T])
            Z = np.array([hx(s) for s in sig])
            zm = Wm @ Z
            dz, dx = Z - zm, sig - x
            Pz = np.einsum("i,ij,ik->jk", Wc, dz, dz) + R
            Pxz = np.einsum("i,ij,ik->jk", Wc, dx, dz)
            K = Pxz @ np.linalg.inv(Pz)
            innov = z - zm
            x = x + K @ innov
            P = P - K @ Pz @ K.T
            nll += 0.5 * (innov @ np.linalg.solve(Pz, innov) + np.log(np.linalg.det(Pz)))
        return nll
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal((5, 1)), 0.01 + 0.001 * s
    return loss, make, dict(argnums=(0, 1))


def gp_classification_laplace_newton_cho():
    X = np.linspace(-2, 2, 10)
    y = np.where(np.sin(2 * X) > 0, 1.0, -1.0)
    def loss(ell, amp):
        K = amp * np.exp(-0.5 * np.subtract.outer(X, X) ** 2 / ell ** 2) + 1e-8 * np.eye(len(X))
        f = np.zeros(len(X))
        for _ in range(6):
            pi = scipy.special.expit(f)
            W = pi * (1 - pi)
            sW = np.sqrt(W)
            B = np.eye(len(X)) + sW[:, None] * K * sW[None, :]
            cf = scipy.linalg.cho_factor(B, lower=True)
            grad = (y + 1) / 2 - pi
            b = W * f + grad
            a = b - sW * scipy.linalg.cho_solve(cf, sW * (K @ b))
            f = K @ a
        L = cf[0]
        logZ = -0.5 * a @ f + np.sum(scipy.special.log_expit(y * f)) - np.sum(np.log(np.diag(L)))
        return -logZ
    def make(s):
        return 0.7 + 0.1 * s, 1.5 - 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def levenberg_marquardt_by_hand_accept_reject():
    t = np.linspace(0, 3, 15)
    def model(p):
        return p[0] * np.exp(-p[1] * t) + p[2]
    def jac(p):
        J = np.empty((len(t), 3))
        J[:, 0] = np.exp(-p[1] * t)
        J[:, 1] = -p[0] * t * np.exp(-p[1] * t)
        J[:, 2] = 1.0
        return J
    def loss(y):
        p = np.array([1.0, 1.0, 0.0])
        lam = 1e-2
        r = y - model(p)
        cost = r @ r
        for _ in range(8):
            J = jac(p)
            A = J.T @ J
            A[np.diag_indices_from(A)] *= 1 + lam
            step = np.linalg.solve(A, J.T @ r)
            pn = p + step
            rn = y - model(pn)
            cn = rn @ rn
            if cn < cost:
                p, r, cost, lam = pn, rn, cn, lam / 10
            else:
                lam *= 10
        return p[0] + 2 * p[1] + cost
    def make(s):
        r = np.random.default_rng(s)
        return 2.0 * np.exp(-1.3 * t) + 0.5 + 0.01 * r.standard_normal(len(t)),
    return loss, make, dict()


def demons_registration_gaussian_filter_map_coordinates():
    n = 12
    yy, xx = np.mgrid[0:n, 0:n].astype(float)
    def loss(moving):
        fixed = np.exp(-((xx - 6) ** 2 + (yy - 5.5) ** 2) / 8)
        disp = np.zeros((2, n, n))
        for _ in range(3):
            warped = scipy.ndimage.map_coordinates(moving, [yy + disp[0], xx + disp[1]], order=1, mode="nearest")
            gy, gx = np.gradient(warped)
            diff = warped - fixed
            denom = gx ** 2 + gy ** 2 + diff ** 2 + 1e-3
            disp[0] -= diff * gy / denom
            disp[1] -= diff * gx / denom
            scipy.ndimage.gaussian_filter(disp, sigma=(0, 1.0, 1.0), output=disp)
        return np.sum((warped - fixed) ** 2) + 0.01 * np.sum(disp ** 2)
    def make(s):
        return np.exp(-((xx - 6.5 - 0.1 * s) ** 2 + (yy - 5) ** 2) / 8),
    return loss, make, dict(rtol=1e-4)


def iir_lfilter_traced_coefficients_welch_hilbert():
    def loss(b, a1, x):
        y = scipy.signal.lfilter(b, [1.0, a1], x)
        f, P = scipy.signal.welch(y, fs=10.0, nperseg=16, noverlap=8)
        env = np.abs(scipy.signal.hilbert(y))
        yc = scipy.signal.fftconvolve(y, np.hanning(5), mode="same")
        return np.sum(P * f) + np.mean(env) + np.sum(yc ** 2) * 1e-2
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.2, 0.3, 0.1]), -0.5 + 0.05 * s, r.standard_normal(48)
    return loss, make, dict(argnums=(0, 1, 2))


def periodic_cubic_spline_traced_values_integrate():
    th = np.linspace(0, 2 * np.pi, 9)
    def loss(r):
        rr = np.append(r, r[0])
        cs = scipy.interpolate.CubicSpline(th, rr, bc_type="periodic")
        tt = np.linspace(0, 2 * np.pi, 50)
        x, y = cs(tt) * np.cos(tt), cs(tt) * np.sin(tt)
        area = 0.5 * np.trapezoid(x * np.gradient(y, tt) - y * np.gradient(x, tt), tt)
        return area + cs.integrate(0, np.pi) + np.sum(cs(tt, 2) ** 2) * 1e-3
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.1 * r.random(8),
    return loss, make, dict()


def fem_2d_lil_assembly_generalized_eigsh_spsolve():
    m = 3
    pts = np.array([[i / m, j / m] for j in range(m + 1) for i in range(m + 1)])
    tris = []
    for j in range(m):
        for i in range(m):
            a = j * (m + 1) + i
            tris += [[a, a + 1, a + m + 2], [a, a + m + 2, a + m + 1]]
    tris = np.array(tris)
    boundary = np.where((pts[:, 0] == 0) | (pts[:, 0] == 1) | (pts[:, 1] == 0) | (pts[:, 1] == 1))[0]
    interior = np.setdiff1d(np.arange(len(pts)), boundary)
    def loss(kappa):
        N = len(pts)
        K = scipy.sparse.lil_matrix((N, N))
        M = scipy.sparse.lil_matrix((N, N))
        for e, tri in enumerate(tris):
            P = pts[tri]
            B = np.array([P[1] - P[0], P[2] - P[0]]).T
            area = 0.5 * abs(np.linalg.det(B))
            G = np.linalg.solve(B.T, np.array([[-1, 1, 0], [-1, 0, 1]], float))
            ke = kappa[e] * area * G.T @ G
            me = area / 12 * (np.ones((3, 3)) + np.eye(3))
            for a in range(3):
                for b in range(3):
                    K[tri[a], tri[b]] += ke[a, b]
                    M[tri[a], tri[b]] += me[a, b]
        Ki = K.tocsr()[interior][:, interior]
        Mi = M.tocsr()[interior][:, interior]
        vals, modes = scipy.sparse.linalg.eigsh(Ki, k=2, M=Mi, sigma=0, which="LM",
                                                v0=np.ones(len(interior)))
        vals = vals + 0.1 * np.sum(modes[0] ** 2)
        u = scipy.sparse.linalg.spsolve(Ki.tocsc(), Mi @ np.ones(len(interior)))
        return np.sum(vals) + u.sum()
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.2 * r.random(len(tris)),
    return loss, make, dict(rtol=1e-4, jvp=False)


def fastica_symmetric_decorrelation_eigh_loop():
    def loss(X):
        Xc = X - X.mean(axis=1, keepdims=True)
        d, E = np.linalg.eigh(np.cov(Xc))
        Z = (E / np.sqrt(d)) @ E.T @ Xc
        W = np.array([[1.0, 0.3], [0.2, 1.0]])
        for _ in range(4):
            G = np.tanh(W @ Z)
            W = G @ Z.T / Z.shape[1] - np.mean(1 - G ** 2, axis=1)[:, None] * W
            s, U = np.linalg.eigh(W @ W.T)
            W = U @ np.diag(1 / np.sqrt(s)) @ U.T @ W
        S = W @ Z
        return np.sum(np.log(np.cosh(S)).mean(axis=1))
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, 4, 60)
        src = np.vstack([np.sign(np.sin(3 * t)), np.sin(5 * t)])
        return np.array([[1.0, 0.5], [0.4, 1.2]]) @ src + 0.05 * r.standard_normal((2, 60)),
    return loss, make, dict()


def absorbing_markov_chain_fundamental_matrix_stationary():
    def loss(theta):
        T = scipy.special.softmax(theta, axis=1)
        Q = T[:3, :3] * 0.9
        N = np.linalg.inv(np.eye(3) - Q)
        steps = N @ np.ones(3)
        P = scipy.special.softmax(theta[:, :4], axis=1)
        w, V = np.linalg.eig(P.T)
        k = np.argmin(np.abs(w - 1))
        pi = np.real(V[:, k])
        pi /= pi.sum()
        Pn = np.linalg.matrix_power(P, 5)
        return steps @ np.arange(1, 4) + pi @ np.arange(4.0) + np.trace(Pn)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((4, 5)),
    return loss, make, dict()


def optimal_control_shooting_solve_ivp_costate():
    def hamiltonian_system(t, z, a):
        x, v, lx, lv = z
        u = -lv
        return [v, -a * x + u, a * lv, -lx]
    def loss(lam0, a):
        sol = scipy.integrate.solve_ivp(hamiltonian_system, (0, 1), np.concatenate([[1.0, 0.0], lam0]),
                                        args=(a,), rtol=1e-8, atol=1e-10, t_eval=np.linspace(0, 1, 5))
        x, v, lx, lv = sol.y
        cost = np.trapezoid(x ** 2 + lv ** 2, sol.t)
        return cost + 10 * (x[-1] ** 2 + v[-1] ** 2)
    def make(s):
        return np.array([0.5 + 0.1 * s, 0.2]), 1.0 + 0.1 * s
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def odeint_predator_prey_args_tfirst_fit():
    t = np.linspace(0, 3, 6)
    def rhs(t, z, a, b, c, d):
        x, y = z
        return np.array([a * x - b * x * y, d * x * y - c * y])
    def loss(params, data):
        sol = scipy.integrate.odeint(rhs, [1.0, 0.5], t, args=tuple(params), tfirst=True, rtol=1e-8, atol=1e-8)
        return np.sum((sol - data) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.0, 0.6, 0.8, 0.4]) + 0.01 * s, 1 + 0.1 * r.random((6, 2))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def multiserver_queue_monte_carlo_seeded_rng():
    def loss(mu, lam):
        rng = np.random.default_rng(42)
        n, c = 60, 2
        inter = rng.exponential(1.0, n) / lam
        serv = rng.exponential(1.0, n) / mu
        arrive = np.cumsum(inter)
        free = np.zeros(c)
        wait = np.empty(n)
        for i in range(n):
            k = np.argmin(free)
            start = max(arrive[i], free[k])
            wait[i] = start - arrive[i]
            free[k] = start + serv[i]
        return wait.mean() + 0.1 * np.percentile(wait, 90)
    def make(s):
        return 1.0 + 0.1 * s, 1.5
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def mps_transfer_matrix_einsum_contraction():
    def loss(A, h):
        d = 2
        Z = np.array([[1.0, 0.0], [0.0, -1.0]])
        E = np.einsum("sab,scd->acbd", A, A).reshape(9, 9)
        EZ = np.einsum("sab,st,tcd->acbd", A, Z + h * np.eye(d), A).reshape(9, 9)
        v = np.ones(9)
        num = v.copy()
        for _ in range(4):
            num = EZ @ num if _ == 2 else E @ num
            v = E @ v
        norm = np.einsum("i,i->", np.ones(9), v)
        return np.einsum("i,i->", np.ones(9), num) / norm
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + 0.1 * r.random((2, 3, 3)), 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def nonlocal_means_patches_sliding_window_view():
    n, p = 10, 3
    def loss(img, h):
        pad = np.pad(img, 1, mode="reflect")
        patches = sliding_window_view(pad, (p, p)).reshape(n * n, p * p)
        D = np.sum((patches[:, None, :] - patches[None, :, :]) ** 2, axis=-1)
        W = np.exp(-D / h ** 2)
        W /= W.sum(axis=1, keepdims=True)
        out = (W @ img.ravel()).reshape(n, n)
        return np.sum((out - img) ** 2) + np.sum(np.abs(np.diff(out, axis=0)))
    def make(s):
        r = np.random.default_rng(s)
        return np.tile(np.linspace(0, 1, n), (n, 1)) + 0.1 * r.standard_normal((n, n)), 0.5 + 0.05 * s
    return loss, make, dict(argnums=(0, 1))


def cotangent_laplacian_add_at_mesh_fairing():
    m = 4
    pts = np.array([[i, j] for j in range(m) for i in range(m)], float)
    faces = []
    for j in range(m - 1):
        for i in range(m - 1):
            a = j * m + i
            faces += [[a, a + 1, a + m + 1], [a, a + m + 1, a + m]]
    faces = np.array(faces)
    def loss(z):
        V = np.column_stack([pts, z])
        L = np.zeros((len(V), len(V)))
        for k in range(3):
            i, j, o = faces[:, k], faces[:, (k + 1) % 3], faces[:, (k + 2) % 3]
            u, v = V[i] - V[o], V[j] - V[o]
            cot = np.einsum("ij,ij->i", u, v) / np.linalg.norm(np.cross(u, v), axis=1)
            np.add.at(L, (i, j), 0.5 * cot)
            np.add.at(L, (j, i), 0.5 * cot)
        L[np.diag_indices_from(L)] = -L.sum(axis=1)
        return -0.5 * np.einsum("i,ij,i->", z, L, z) + np.sum(L[0] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal(m * m),
    return loss, make, dict()


def weighted_polyfit_cov_and_polyval_uncertainty():
    x = np.linspace(0, 2, 12)
    def loss(y, sig):
        p, C = np.polyfit(x, y, 2, w=1 / sig, cov="unscaled")
        yfit = np.polyval(p, x)
        J = np.vander(x, 3)
        band = np.sqrt(np.einsum("ij,jk,ik->i", J, C, J))
        chi2 = np.sum(((y - yfit) / sig) ** 2)
        return chi2 + np.sum(band) + p[0]
    def make(s):
        r = np.random.default_rng(s)
        return 1 + x - 0.3 * x ** 2 + 0.05 * r.standard_normal(12), 0.05 + 0.01 * r.random(12)
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# SciPy's solvers, sparse matrices, filters and interpolants, and its low-level routines


def ode_class_dopri5_set_initial_value_integrate():
    def rhs(t, y, k):
        return [y[1], -k * y[0] - 0.1 * y[1]]
    def loss(k, y0):
        r = scipy.integrate.ode(rhs).set_integrator("dopri5", rtol=1e-8, atol=1e-10)
        r.set_initial_value(y0, 0.0).set_f_params(k)
        out = []
        for t in (0.5, 1.0):
            out.append(r.integrate(t)[0])
        return np.sum(np.array(out) ** 2)
    def make(s):
        return 2.0 + 0.1 * s, np.array([1.0, 0.1 * s])
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def rk45_stepper_object_while_running():
    def loss(a, y0):
        solver = scipy.integrate.RK45(lambda t, y: -a * y + np.sin(t), 0.0, y0, 1.0, rtol=1e-6, atol=1e-8)
        ts, ys = [0.0], [y0.copy()]
        while solver.status == "running":
            solver.step()
            ts.append(solver.t)
            ys.append(solver.y.copy())
        Y = np.array(ys)
        return np.trapezoid(Y[:, 0] ** 2, ts) + Y[-1, 1]
    def make(s):
        return 0.7 + 0.1 * s, np.array([1.0, -0.5])
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def blas_axpy_scal_on_work_arrays():
    axpy = scipy.linalg.blas.get_blas_funcs("axpy", (np.zeros(1),))
    def loss(x, y):
        r = y.copy()
        p = x.copy()
        for _ in range(3):
            r = axpy(p, r, a=-0.3)
            p = 0.5 * p + r
        nrm = scipy.linalg.blas.dnrm2(r)
        return nrm + scipy.linalg.blas.ddot(p, r)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1))


def lapack_potrf_potrs_direct_calls():
    potrf, potrs = scipy.linalg.get_lapack_funcs(("potrf", "potrs"), (np.zeros((2, 2)),))
    def loss(A, b):
        S = A @ A.T + 4 * np.eye(4)
        c, info = potrf(S, lower=True)
        x, info = potrs(c, b, lower=True)
        return x @ b + np.sum(np.log(np.diag(c)))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((4, 4)), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def sparse_random_structure_traced_data_assigned():
    pattern = scipy.sparse.random_array((8, 8), density=0.3, rng=np.random.default_rng(3), format="csr")
    def loss(theta, b):
        A = pattern.copy()
        A.data = np.exp(theta)
        A = A + scipy.sparse.eye_array(8, format="csr") * 3.0
        x = scipy.sparse.linalg.spsolve(A.tocsc(), b)
        lu = scipy.sparse.linalg.splu(A.tocsc())
        y = lu.solve(b, trans="T")
        return x @ b + y @ y + A.diagonal().sum() + A.power(2).sum(axis=0) @ np.arange(8.0)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal(pattern.nnz), r.standard_normal(8)
    return loss, make, dict(argnums=(0, 1))


def sparse_coo_data_scaled_in_place_then_csr_matvec():
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 6, 14), rng.integers(0, 6, 14)
    def loss(w, x):
        A = scipy.sparse.coo_array((np.ones(14), (rows, cols)), shape=(6, 6))
        A.data *= w
        A.sum_duplicates()
        B = A.tocsr()
        B.data[B.data > 1.0] = np.sqrt(B.data[B.data > 1.0])
        y = B @ x
        z = B.T @ y
        return np.sum(z ** 2) + np.sum(scipy.sparse.csr_matrix(B).max(axis=1, explicit=True).toarray())
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(14), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def sparse_lil_setdiag_rows_dirichlet_gmres_ilu():
    n = 10
    def loss(c, f):
        A = scipy.sparse.lil_array((n, n))
        A.setdiag(2.0 + c)
        A.setdiag(-1.0 + 0.1 * c[:-1], 1)
        A.setdiag(-1.0 - 0.1 * c[1:], -1)
        A[0, :] = 0.0
        A[0, 0] = 1.0
        A[n - 1, :] = 0.0
        A[n - 1, n - 1] = 1.0
        rhs = f.copy()
        rhs[[0, -1]] = 0.0
        Ac = A.tocsc()
        ilu = scipy.sparse.linalg.spilu(scipy.sparse.csc_array(np.diag(np.full(n, 2.5))))
        M = scipy.sparse.linalg.LinearOperator((n, n), ilu.solve)
        x, info = scipy.sparse.linalg.gmres(Ac, rhs, M=M, rtol=1e-12, atol=0, restart=n)
        return x @ f + info
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def sparse_expm_multiply_traced_vector_and_time_grid():
    n = 8
    L = scipy.sparse.diags_array([np.ones(n - 1), -2 * np.ones(n), np.ones(n - 1)], offsets=[-1, 0, 1], format="csr")
    def loss(u0, D):
        U = scipy.sparse.linalg.expm_multiply(D * L, u0, start=0.0, stop=1.0, num=4, endpoint=True)
        return np.sum(U[-1] ** 2) + np.sum(U[1] * u0)
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n), 0.5 + 0.1 * s
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def ndimage_labels_sum_mean_variance_find_objects():
    base = np.zeros((10, 10))
    base[1:4, 1:5] = 1
    base[6:9, 3:8] = 1
    base[2:5, 7:9] = 1
    labels, nlab = scipy.ndimage.label(base)
    def loss(img):
        idx = np.arange(1, nlab + 1)
        s = scipy.ndimage.sum_labels(img, labels, idx)
        m = scipy.ndimage.mean(img, labels, idx)
        v = scipy.ndimage.variance(img, labels, idx)
        mx = scipy.ndimage.maximum(img, labels, idx)
        tot = 0.0
        for sl in scipy.ndimage.find_objects(labels):
            tot += np.sum(img[sl] ** 2)
        return np.sum(s * m) + np.sum(v) + np.sum(mx) + tot
    def make(s):
        r = np.random.default_rng(s)
        return r.random((10, 10)),
    return loss, make, dict()


def ndimage_filters_output_buffers_uniform1d_minimum_sobel():
    def loss(img, w):
        out = np.empty_like(img)
        scipy.ndimage.uniform_filter1d(img, size=3, axis=0, output=out, mode="nearest")
        scipy.ndimage.sobel(out, axis=1, output=out, mode="reflect")
        lap = scipy.ndimage.gaussian_laplace(img, sigma=1.0)
        mn = scipy.ndimage.minimum_filter1d(img, size=3, axis=1)
        conv = scipy.ndimage.convolve(img, w, mode="constant", cval=0.5)
        return np.sum(out ** 2) + np.sum(lap * mn) + np.sum(conv ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((8, 9)), r.random((3, 3))
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def ndimage_rotate_zoom_cubic_spline_order3():
    def loss(img):
        rot = scipy.ndimage.rotate(img, 17.0, reshape=False, order=3, mode="nearest")
        zm = scipy.ndimage.zoom(img, 1.5, order=3, mode="mirror", grid_mode=False)
        sh = scipy.ndimage.shift(img, (0.3, -0.7), order=3, mode="wrap")
        return np.sum(rot ** 2) + np.mean(zm) + np.sum(sh * img)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((8, 8)),
    return loss, make, dict()


def signal_savgol_nearest_deriv_delta_medfilt_detrend_bp():
    def loss(x):
        d1 = scipy.signal.savgol_filter(x, 7, 3, deriv=1, delta=0.1, mode="nearest")
        d0 = scipy.signal.savgol_filter(x, 5, 2, mode="wrap")
        dt = scipy.signal.detrend(x, type="linear", bp=[10, 20])
        md = scipy.signal.medfilt(x, 5)
        c = scipy.signal.correlate(x, d0, mode="full", method="fft")
        return np.sum(d1 ** 2) + np.sum(dt ** 2) + np.sum(md * x) + c.max()
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, 3, 30)
        return np.sin(3 * t) + 0.2 * r.standard_normal(30),
    return loss, make, dict(step=1e-6)


def signal_sosfilt_axis1_traced_zi_and_resample():
    sos = scipy.signal.butter(4, 0.2, output="sos")
    def loss(X, z0):
        zi = scipy.signal.sosfilt_zi(sos)[:, None, :] * z0[None, :, None]
        zi = np.moveaxis(zi, 1, 1)
        y, zf = scipy.signal.sosfilt(sos, X, axis=1, zi=np.broadcast_to(zi.transpose(0, 1, 2), (2, 3, 2)).copy())
        r = scipy.signal.resample(y, 20, axis=1)
        return np.sum(r ** 2) + np.sum(zf)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 16)), r.random(3)
    return loss, make, dict(argnums=(0, 1))


def signal_cont2discrete_dlsim_bilinear_freqz():
    def loss(k, c, u):
        A = np.array([[0.0, 1.0], [-k, -c]])
        B = np.array([[0.0], [1.0]])
        C = np.array([[1.0, 0.0]])
        Ad, Bd, Cd, Dd, dt = scipy.signal.cont2discrete((A, B, C, np.zeros((1, 1))), 0.1, method="zoh")
        x = np.zeros(2)
        y = np.empty(len(u))
        for i, ui in enumerate(u):
            y[i] = (Cd @ x)[0]
            x = Ad @ x + Bd[:, 0] * ui
        bz, az = scipy.signal.bilinear([1.0], [1.0, c, k], fs=10.0)
        w, h = scipy.signal.freqz(bz, az, worN=8)
        return np.sum(y ** 2) + np.sum(np.abs(h) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 4.0 + 0.1 * s, 0.5, r.standard_normal(12)
    return loss, make, dict(argnums=(0, 1, 2))


def interp1d_quadratic_extrapolate_rectbivariate_ev():
    x = np.linspace(0, 1, 7)
    xg, yg = np.linspace(0, 1, 5), np.linspace(0, 2, 6)
    def loss(y, Z):
        f = scipy.interpolate.interp1d(x, y, kind="quadratic", fill_value="extrapolate")
        g = scipy.interpolate.interp1d(x, y, bounds_error=False, fill_value=(y[0], y[-1]))
        r = scipy.interpolate.RectBivariateSpline(xg, yg, Z, kx=3, ky=2)
        q = np.array([-0.1, 0.33, 0.8, 1.2])
        return np.sum(f(q) ** 2) + np.sum(g(q)) + np.sum(r.ev([0.2, 0.7], [0.5, 1.5])) + r.integral(0, 1, 0, 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random(7), r.random((5, 6))
    return loss, make, dict(argnums=(0, 1))


def regular_grid_3d_bounds_fill_none_and_linear_nd():
    g = (np.linspace(0, 1, 4), np.linspace(0, 1, 3), np.linspace(0, 2, 5))
    pts = np.random.default_rng(1).random((6, 2))
    def loss(V, vals):
        rgi = scipy.interpolate.RegularGridInterpolator(g, V, bounds_error=False, fill_value=None)
        q = np.array([[0.2, 0.5, 1.0], [0.9, 0.1, 1.9], [1.1, 0.5, 0.5]])
        lin = scipy.interpolate.LinearNDInterpolator(pts, vals)
        near = scipy.interpolate.NearestNDInterpolator(pts, vals)
        c = pts.mean(axis=0)
        return np.sum(rgi(q) ** 2) + np.nan_to_num(lin(c)[0]) + near([0.5, 0.5])[0]
    def make(s):
        r = np.random.default_rng(s)
        return r.random((4, 3, 5)), r.random(6)
    return loss, make, dict(argnums=(0, 1))


def curve_fit_sigma_absolute_pcov_and_least_squares_soft_l1():
    t = np.linspace(0, 4, 20)
    def model(t, a, k, c):
        return a * np.exp(-k * t) + c
    def loss(y, sig):
        p, pcov = scipy.optimize.curve_fit(model, t, y, p0=[1.0, 0.5, 0.0], sigma=sig, absolute_sigma=True)
        res = scipy.optimize.least_squares(lambda q: model(t, *q) - y, x0=[1.0, 0.5, 0.0], loss="soft_l1", f_scale=0.1,
                                           xtol=1e-14, ftol=1e-14, gtol=1e-14)
        return p[1] + np.sqrt(pcov[1, 1]) + res.x[0]
    def make(s):
        r = np.random.default_rng(s)
        return 2 * np.exp(-0.7 * t) + 0.3 + 0.02 * r.standard_normal(20), 0.02 + 0.01 * r.random(20)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3, jvp=False)


def minimize_scalar_bounded_and_nelder_mead_inner():
    def loss(a, b):
        r = scipy.optimize.minimize_scalar(lambda x: (x - a) ** 2 + b * np.cos(x), bounds=(-2, 4), method="bounded",
                                           options=dict(xatol=1e-12))
        return r.x ** 2 + r.fun
    def make(s):
        return 1.0 + 0.1 * s, 0.5
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def stats_linregress_pearson_boxcox_trim_mean():
    def loss(x, y):
        lr = scipy.stats.linregress(x, y)
        r, p = scipy.stats.pearsonr(x, y)
        bc = scipy.stats.boxcox(y + 3.0, lmbda=0.5)
        tm = scipy.stats.trim_mean(y, 0.1)
        gm = scipy.stats.gmean(y + 3.0)
        return lr.slope + lr.intercept + lr.stderr + r + np.sum(bc ** 2) * 0.01 + tm + gm
    def make(s):
        r = np.random.default_rng(s)
        x = np.linspace(0, 1, 15)
        return x, 2 * x + 0.3 * r.standard_normal(15)
    return loss, make, dict(argnums=(0, 1))


def linalg_expm_loop_care_lu_solve_trans_eigh_tridiagonal():
    def loss(a, d, e):
        A = np.array([[0.0, 1.0], [-a, -0.2]])
        Phi = np.eye(2)
        E = scipy.linalg.expm(0.1 * A)
        for _ in range(5):
            Phi = E @ Phi
        P = scipy.linalg.solve_continuous_are(A, np.array([[0.0], [1.0]]), np.eye(2), np.array([[1.0]]))
        lu = scipy.linalg.lu_factor(A + 3 * np.eye(2))
        x = scipy.linalg.lu_solve(lu, np.array([1.0, 2.0]), trans=1)
        w = scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(0, 1))
        return np.trace(Phi) + np.trace(P) + x.sum() + w.sum()
    def make(s):
        r = np.random.default_rng(s)
        return 2.0 + 0.1 * s, np.arange(5.0) + r.random(5), 0.3 + 0.1 * r.random(4)
    return loss, make, dict(argnums=(0, 1, 2))


# ---------------------------------------------------------------------------------------------
# Engineering and science programs: optics, plasticity, thermodynamics, neurons, ecology,
# economics, hydrology, acoustics, circuits; Python's own shapes (operator, frompyfunc, views)


def thin_film_transfer_matrix_stacked_complex():
    lam = np.linspace(400.0, 700.0, 7)
    def loss(d, n_re):
        n = np.concatenate([[1.0 + 0j], n_re + 0.01j, [1.5 + 0j]])
        M = np.broadcast_to(np.eye(2, dtype=complex), (len(lam), 2, 2)).copy()
        for j in range(1, len(n) - 1):
            delta = 2 * np.pi * n[j] * d[j - 1] / lam
            L = np.empty((len(lam), 2, 2), complex)
            L[:, 0, 0] = np.cos(delta)
            L[:, 0, 1] = 1j * np.sin(delta) / n[j]
            L[:, 1, 0] = 1j * n[j] * np.sin(delta)
            L[:, 1, 1] = np.cos(delta)
            M = M @ L
        B = M[:, 0, 0] + M[:, 0, 1] * n[-1]
        C = M[:, 1, 0] + M[:, 1, 1] * n[-1]
        r = (n[0] * B - C) / (n[0] * B + C)
        return np.sum(np.abs(r) ** 2)
    def make(s):
        return np.array([90.0, 120.0]) + 5 * s, np.array([2.1, 1.4])
    return loss, make, dict(argnums=(0, 1))


def j2_plasticity_radial_return_strain_loop():
    def dev(s):
        return s - np.trace(s) / 3 * np.eye(3)
    def loss(E, H, sy):
        G, K = E / 2.6, E / 1.2
        eps_p = np.zeros((3, 3))
        alpha = 0.0
        stresses = []
        for t in np.linspace(0.0, 0.004, 6):
            eps = np.diag([t, -0.3 * t, -0.3 * t])
            e = dev(eps) - eps_p
            s_trial = 2 * G * e
            q = np.sqrt(1.5 * np.tensordot(s_trial, s_trial))
            f = q - (sy + H * alpha)
            if f > 0:
                dg = f / (3 * G + H)
                nrm = 1.5 * s_trial / q
                eps_p = eps_p + dg * nrm
                alpha += dg
                s_trial = s_trial - 2 * G * dg * nrm
            stresses.append(s_trial[0, 0] + K * np.trace(eps))
        return np.sum(np.array(stresses) ** 2) * 1e-6
    def make(s):
        return 200e3 + 1e3 * s, 1e3, 250.0 + s
    return loss, make, dict(argnums=(0, 1, 2))


def peng_robinson_cubic_np_roots_largest_real():
    R = 8.314
    def loss(T, P):
        Tc, Pc, w = 190.6, 4.6e6, 0.011
        kappa = 0.37464 + 1.54226 * w - 0.26992 * w ** 2
        a = 0.45724 * R ** 2 * Tc ** 2 / Pc * (1 + kappa * (1 - np.sqrt(T / Tc))) ** 2
        b = 0.07780 * R * Tc / Pc
        A, B = a * P / (R * T) ** 2, b * P / (R * T)
        roots = np.roots([1.0, -(1 - B), A - 3 * B ** 2 - 2 * B, -(A * B - B ** 2 - B ** 3)])
        Z = np.max(roots[np.abs(roots.imag) < 1e-10].real)
        return Z + np.log(Z - B)
    def make(s):
        return 300.0 + 5 * s, 5e6
    return loss, make, dict(argnums=(0, 1), step=1e-3)


def izhikevich_neurons_reset_masks_inplace():
    def loss(I, d):
        n = len(I)
        v = np.full(n, -65.0)
        u = 0.2 * v
        spikes = np.zeros(n)
        trace = np.zeros(n)
        for _ in range(20):
            fired = v >= 30
            spikes += fired
            v[fired] = -65.0
            u[fired] += d
            for _ in range(2):
                v += 0.25 * (0.04 * v ** 2 + 5 * v + 140 - u + I)
            u += 0.5 * 0.02 * (0.2 * v - u)
            trace = 0.9 * trace + 0.1 * np.tanh(v / 30)
        return trace.sum() + spikes.sum() * 0.0 + np.sum(u)
    def make(s):
        return np.array([4.0, 6.0, 10.0]) + 0.1 * s, 8.0
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, step=1e-6)


def pwm_motif_scan_sliding_window_logsumexp():
    seq = np.random.default_rng(3).integers(0, 4, 30)
    onehot = np.eye(4)[seq]
    def loss(logits, bg):
        pwm = scipy.special.log_softmax(logits, axis=1)
        windows = sliding_window_view(onehot, (6, 4))[:, 0]
        scores = np.einsum("wkl,kl->w", windows, pwm) - 6 * bg
        both = np.stack([scores, scores[::-1]])
        return scipy.special.logsumexp(both) + scipy.special.logsumexp(scores, b=np.linspace(0.5, 1, len(scores)))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((6, 4)), np.log(0.25) + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def nmf_multiplicative_updates_inplace_eps():
    def loss(X):
        r = np.random.default_rng(0)
        W = r.random((X.shape[0], 2)) + 0.1
        H = r.random((2, X.shape[1])) + 0.1
        eps = 1e-9
        for _ in range(5):
            H *= (W.T @ X) / np.maximum(W.T @ W @ H, eps)
            W *= (X @ H.T) / np.maximum(W @ (H @ H.T), eps)
            scale = W.sum(axis=0)
            W /= scale
            H *= scale[:, None]
        return np.linalg.norm(X - W @ H) ** 2 + H.sum()
    def make(s):
        r = np.random.default_rng(s)
        return r.random((6, 5)) + 0.1,
    return loss, make, dict()


def als_matrix_factorization_masked_ratings_list_comprehension():
    mask = np.random.default_rng(2).random((6, 5)) < 0.7
    def loss(R, lam):
        Rm = np.ma.masked_array(R, mask=~mask)
        U = np.ones((6, 2)) * 0.5
        V = np.linspace(0.1, 1.0, 10).reshape(5, 2)
        for _ in range(3):
            U = np.array([np.linalg.solve(V[mask[i]].T @ V[mask[i]] + lam * np.eye(2), V[mask[i]].T @ R[i, mask[i]])
                          for i in range(6)])
            V = np.array([np.linalg.solve(U[mask[:, j]].T @ U[mask[:, j]] + lam * np.eye(2), U[mask[:, j]].T @ R[mask[:, j], j])
                          for j in range(5)])
        err = (Rm - U @ V.T)
        return float(np.ma.sum(err ** 2)) + lam * (np.sum(U ** 2) + np.sum(V ** 2))
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 4 * r.random((6, 5)), 0.1 + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def integral_projection_model_norm_kernel_dominant_eigenvalue():
    m = 12
    z = np.linspace(0, 10, m + 1)
    mid = 0.5 * (z[1:] + z[:-1])
    h = z[1] - z[0]
    def loss(theta):
        s = scipy.special.expit(theta[0] + theta[1] * mid)
        G = scipy.stats.norm.pdf(mid[:, None], loc=theta[2] + 0.8 * mid[None, :], scale=1.0) * h
        F = np.outer(scipy.stats.norm.pdf(mid, 2.0, 0.7) * h, np.exp(theta[3] + 0.1 * mid))
        K = G * s[None, :] + F
        w = np.linalg.eigvals(K)
        lam = np.max(w.real)
        return np.log(lam)
    def make(s):
        return np.array([-2.0, 0.5, 1.0 + 0.1 * s, -3.0]),
    return loss, make, dict()


def var1_lstsq_impulse_responses_dict_of_arrays():
    def loss(Y):
        X, Z = Y[:-1], Y[1:]
        A = np.linalg.lstsq(X, Z, rcond=None)[0].T
        resid = Z - X @ A.T
        Sigma = resid.T @ resid / len(resid)
        P = np.linalg.cholesky(Sigma)
        irf = {}
        Ak = np.eye(3)
        for h in range(5):
            irf[h] = Ak @ P
            Ak = Ak @ A
        fevd = sum(irf[h] ** 2 for h in irf)
        fevd /= fevd.sum(axis=1, keepdims=True)
        return np.trace(fevd) + np.linalg.matrix_power(A, 3).sum()
    def make(s):
        r = np.random.default_rng(s)
        Y = np.zeros((30, 3))
        for t in range(1, 30):
            Y[t] = 0.5 * Y[t - 1] + r.standard_normal(3)
        return Y,
    return loss, make, dict()


def gravity_prism_corners_itertools_product_arctan2():
    obs = np.array([[0.0, 0.0], [50.0, 10.0], [120.0, -30.0]])
    def loss(rho, depth):
        x1, x2, y1, y2 = -40.0, 40.0, -30.0, 30.0
        z1, z2 = depth, depth + 50.0
        g = np.zeros(len(obs))
        for (i, xe), (j, ye), (k, ze) in itertools.product(enumerate((x1, x2)), enumerate((y1, y2)), enumerate((z1, z2))):
            sign = (-1) ** (i + j + k)
            x, y = xe - obs[:, 0], ye - obs[:, 1]
            r = np.sqrt(x ** 2 + y ** 2 + ze ** 2)
            g += sign * (x * np.log(y + r) + y * np.log(x + r) - ze * np.arctan2(x * y, ze * r))
        return np.sum((6.674e-3 * rho * g) ** 2)
    def make(s):
        return 300.0 + 10 * s, 20.0 + s
    return loss, make, dict(argnums=(0, 1))


@dataclass
class _Reach:
    K: float
    X: float
    dt: float = 1.0


def muskingum_routing_dataclass_preallocated():
    def loss(inflow, K):
        reach = _Reach(K=K, X=0.2)
        den = 2 * reach.K * (1 - reach.X) + reach.dt
        c0 = (reach.dt - 2 * reach.K * reach.X) / den
        c1 = (reach.dt + 2 * reach.K * reach.X) / den
        c2 = (2 * reach.K * (1 - reach.X) - reach.dt) / den
        out = np.empty_like(inflow)
        out[0] = inflow[0]
        for t in range(1, len(inflow)):
            out[t] = c0 * inflow[t] + c1 * inflow[t - 1] + c2 * out[t - 1]
        return np.max(out) + np.argmax(out) * 0.0 + np.sum(out ** 2) * 1e-3
    def make(s):
        t = np.arange(20.0)
        return 10 + 50 * np.exp(-((t - 5 - 0.1 * s) / 2) ** 2), 2.0 + 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def economic_dispatch_lambda_bisection_clip_out():
    def loss(a, b, demand):
        pmin, pmax = np.array([10.0, 20.0, 5.0]), np.array([100.0, 80.0, 60.0])
        lo, hi = 0.0, 100.0
        P = np.empty(3)
        for _ in range(50):
            lam = 0.5 * (lo + hi)
            np.clip((lam - b) / (2 * a), pmin, pmax, out=P)
            if P.sum() > demand:
                hi = lam
            else:
                lo = lam
        free = (P > pmin) & (P < pmax)
        lam = (demand - P[~free].sum() + np.sum(b[free] / (2 * a[free]))) / np.sum(1 / (2 * a[free]))
        P[free] = (lam - b[free]) / (2 * a[free])
        return np.sum(a * P ** 2 + b * P) + lam
    def make(s):
        return np.array([0.01, 0.02, 0.015]), np.array([2.0, 1.5, 1.8]), 150.0 + s
    return loss, make, dict(argnums=(0, 1, 2))


def binned_kde_histogram_convolve_interp():
    edges = np.linspace(-3, 3, 41)
    centers = 0.5 * (edges[1:] + edges[:-1])
    def loss(w, bw):
        x = np.random.default_rng(0).standard_normal(50)
        counts, _ = np.histogram(x, bins=edges, weights=w)
        u = np.arange(-10, 11) * (edges[1] - edges[0])
        kern = np.exp(-0.5 * (u / bw) ** 2)
        kern /= kern.sum()
        dens = np.convolve(counts, kern, mode="same") / (w.sum() * (edges[1] - edges[0]))
        return np.interp(0.3, centers, dens) + np.sum(dens ** 2) * 0.1
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(50), 0.4 + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def karplus_strong_ring_buffer_modulo_writes():
    def loss(noise, decay):
        N = len(noise)
        buf = noise.copy()
        out = np.zeros(60)
        idx = 0
        for t in range(60):
            out[t] = buf[idx]
            nxt = (idx + 1) % N
            buf[idx] = decay * 0.5 * (buf[idx] + buf[nxt])
            idx = nxt
        spec = np.abs(np.fft.rfft(out * np.hanning(60)))
        return np.sum(spec ** 2) * 0.01 + out @ out
    def make(s):
        r = np.random.default_rng(s)
        return r.uniform(-1, 1, 9), 0.99 - 0.001 * s
    return loss, make, dict(argnums=(0, 1))


def vectorize_excluded_partial_quad_per_element():
    def integrand(x, k, c):
        return np.exp(-k * x) * np.cos(c * x)
    def one(k, c):
        return scipy.integrate.quad(integrand, 0.0, 2.0, args=(k, c), epsabs=1e-12, epsrel=1e-12)[0]
    def loss(ks, c):
        vec = np.vectorize(functools.partial(one, c=c))
        vals = vec(ks)
        return np.sum(vals ** 2)
    def make(s):
        return np.array([0.5, 1.0, 1.5]) + 0.1 * s, 2.0
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def masked_climatology_average_weights_anomalies_filled():
    rng = np.random.default_rng(5)
    bad = rng.random((4, 6)) < 0.2
    def loss(T, w):
        Tm = np.ma.masked_where(bad | (T > 30.0), T)
        clim = np.ma.average(Tm, axis=0, weights=np.broadcast_to(w[:, None], T.shape))
        anom = Tm - clim
        filled = anom.filled(0.0)
        spread = np.ma.std(Tm, axis=1)
        return np.sum(filled ** 2) + np.ma.sum(spread) + float(np.ma.median(clim))
    def make(s):
        r = np.random.default_rng(s)
        return 15 + 5 * r.standard_normal((4, 6)), 0.5 + r.random(4)
    return loss, make, dict(argnums=(0, 1))


def black_litterman_posterior_inv_formula():
    def loss(Sigma_f, q, tau):
        Sigma = Sigma_f @ Sigma_f.T + 0.01 * np.eye(4)
        w_mkt = np.array([0.3, 0.3, 0.2, 0.2])
        pi = 2.5 * Sigma @ w_mkt
        P = np.array([[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
        Omega = np.diag(np.diag(tau * P @ Sigma @ P.T))
        A = np.linalg.inv(np.linalg.inv(tau * Sigma) + P.T @ np.linalg.inv(Omega) @ P)
        mu = A @ (np.linalg.inv(tau * Sigma) @ pi + P.T @ np.linalg.inv(Omega) @ q)
        w = np.linalg.solve(2.5 * Sigma, mu)
        return w @ mu - 0.5 * 2.5 * w @ Sigma @ w
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 * r.standard_normal((4, 4)), np.array([0.02, 0.05]), 0.05
    return loss, make, dict(argnums=(0, 1, 2))


def rayleigh_quotient_iteration_solve_normalise():
    def loss(A0):
        A = A0 + A0.T
        x = np.ones(len(A)) / np.sqrt(len(A))
        mu = x @ A @ x
        for _ in range(3):
            y = np.linalg.solve(A - mu * np.eye(len(A)), x)
            x = y / np.linalg.norm(y)
            mu = x @ A @ x
        return mu
    def make(s):
        r = np.random.default_rng(s)
        return np.diag([1.0, 3.0, 6.0, 10.0]) + 0.1 * r.standard_normal((4, 4)),
    return loss, make, dict(rtol=1e-4)


def float_pairs_viewed_as_complex_phasors():
    def loss(pairs, w):
        z = pairs.copy().view(np.complex128)
        z *= np.exp(1j * w)
        acc = np.zeros(2)
        acc.view(np.complex128)[0] = z.sum()
        return acc @ acc + np.abs(z).sum()
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(8), 0.3 + 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def operator_module_setitem_iadd_frompyfunc():
    def loss(x):
        y = np.zeros(5)
        for i in range(5):
            operator.setitem(y, i, x[i] * x[(i + 1) % 5])
        y = operator.iadd(y, x)
        f = np.frompyfunc(lambda a, b: a * b + 1.0, 2, 1)
        z = f(y, x).astype(float)
        return functools.reduce(operator.add, [np.sum(z), operator.mul(y, y).sum()])
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(5),
    return loss, make, dict()


def ac_nodal_analysis_frequency_sweep_stacked_solve():
    freqs = np.array([10.0, 100.0, 1000.0, 5000.0])
    def loss(R, C, L):
        w = 2 * np.pi * freqs
        Y = np.zeros((len(freqs), 3, 3), complex)
        def stamp(a, b, y):
            Y[:, a, a] += y
            if b is not None:
                Y[:, b, b] += y
                Y[:, a, b] -= y
                Y[:, b, a] -= y
        stamp(0, 1, 1 / R[0])
        stamp(1, 2, 1j * w * C * 1e-6)
        stamp(2, None, 1 / (R[1] + 1j * w * L))
        stamp(1, None, 1 / R[2])
        I = np.zeros((len(freqs), 3), complex)
        I[:, 0] = 1.0
        V = np.linalg.solve(Y, I[..., None])[..., 0]
        return np.sum(np.abs(V[:, 2]) ** 2) + np.sum(np.angle(V[:, 1]))
    def make(s):
        return np.array([100.0, 50.0, 1e3]) + s, 1.0 + 0.1 * s, 1e-2
    return loss, make, dict(argnums=(0, 1, 2))


# ---------------------------------------------------------------------------------------------
# More of SciPy: sparse rows, blocks and coordinates, Krylov solvers with guesses and
# preconditioners, shift-invert eigsh, binary morphology, traced filter coefficients, spectral
# subtraction, peak measures, a BDF solve with a sparsity pattern, distances and trees,
# smoothing splines and B-spline design matrices


def sparse_csr_array_rows_iterated_dot():
    def loss(k):
        A = scipy.sparse.diags_array([-k[1:], 2 + k, -k[1:]], offsets=[-1, 0, 1], format="csr")
        x = np.linspace(0, 1, len(k))
        tot = 0.0
        for i in range(A.shape[0]):
            row = A[[i], :]
            tot += (row @ x)[0] ** 2
        return tot + A.trace()
    def make(s):
        return 1 + 0.1 * np.arange(6.0) + 0.01 * s,
    return loss, make, dict()


def sparse_hstack_vstack_identity_kkt_spsolve():
    def loss(H, c):
        n = 4
        Hs = scipy.sparse.csc_array(H @ H.T + np.eye(n))
        Aeq = scipy.sparse.csc_array(np.ones((1, n)))
        K = scipy.sparse.vstack([scipy.sparse.hstack([Hs, Aeq.T]), scipy.sparse.hstack([Aeq, scipy.sparse.csc_array((1, 1))])]).tocsc()
        sol = scipy.sparse.linalg.spsolve(K, np.concatenate([-c, [1.0]]))
        x = sol[:n]
        return 0.5 * x @ (Hs @ x) + c @ x
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((4, 4)), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def sparse_tocoo_row_col_data_edge_weights():
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    def loss(w, x):
        W = scipy.sparse.coo_array((w, (edges[:, 0], edges[:, 1])), shape=(4, 4))
        W = (W + W.T).tocsr()
        C = W.tocoo()
        e = np.sum(C.data * (x[C.row] - x[C.col]) ** 2)
        d = np.asarray(W.sum(axis=1)).ravel()
        Lap = scipy.sparse.diags_array(d) - W
        return e + x @ (Lap @ x) + np.sum(d ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(5), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def sparse_cg_with_x0_and_maxiter_preconditioned_diagonal():
    n = 10
    def loss(k, b):
        A = scipy.sparse.diags_array([-np.ones(n - 1), 2 + k, -np.ones(n - 1)], offsets=[-1, 0, 1], format="csr")
        Minv = scipy.sparse.diags_array(1 / (2 + k))
        x0 = b / (2 + k)
        x, info = scipy.sparse.linalg.cg(A, b, x0=x0, M=Minv, rtol=1e-12, atol=0, maxiter=200)
        y = scipy.sparse.linalg.bicgstab(A, b, rtol=1e-12, atol=0)[0]
        return x @ b + y @ y
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def sparse_eigsh_smallest_shift_invert_standard():
    n = 12
    def loss(k):
        A = scipy.sparse.diags_array([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], offsets=[-1, 0, 1], format="csc")
        w, v = scipy.sparse.linalg.eigsh(A, k=2, sigma=0.0, which="LM", v0=np.ones(n - 1))
        return np.sum(w) + np.sum(v[:, 0] ** 4)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.3 * r.random(n),
    return loss, make, dict(rtol=1e-4, jvp=False)


def ndimage_binary_closing_fill_holes_distance_weighted():
    base = np.zeros((10, 10), bool)
    base[2:8, 2:8] = True
    base[4, 4] = False
    def loss(img):
        mask = scipy.ndimage.binary_fill_holes(scipy.ndimage.binary_closing(base))
        dist = scipy.ndimage.distance_transform_edt(mask)
        sm = scipy.ndimage.gaussian_filter(img, 1.0, mode="constant")
        com = scipy.ndimage.center_of_mass(sm * mask)
        return np.sum(sm * dist) + com[0] * com[1]
    def make(s):
        r = np.random.default_rng(s)
        return r.random((10, 10)),
    return loss, make, dict()


def ndimage_correlate_traced_kernel_grey_dilation_percentile():
    def loss(img, k):
        c = scipy.ndimage.correlate(img, k, mode="reflect")
        d = scipy.ndimage.grey_dilation(img, size=(3, 3))
        p = scipy.ndimage.percentile_filter(img, 75, size=3)
        u = scipy.ndimage.uniform_filter(img, size=(3, 1))
        return np.sum(c * d) + np.sum(p ** 2) + np.sum(u)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((7, 8)), r.random((3, 3))
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def signal_filtfilt_traced_ba_lfilter_zi_steady():
    def loss(b, a1, x):
        a = np.array([1.0, a1, 0.2])
        y = scipy.signal.filtfilt(b, a, x, padtype="odd", padlen=6)
        zi = scipy.signal.lfilter_zi(b, a)
        y2, _ = scipy.signal.lfilter(b, a, x, zi=zi * x[0])
        return np.sum(y ** 2) + np.sum(y2 ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.2, 0.4, 0.2]), -0.5 + 0.05 * s, r.standard_normal(30)
    return loss, make, dict(argnums=(0, 1, 2))


def signal_stft_istft_traced_window_spectral_subtraction():
    def loss(x, alpha):
        f, t, Z = scipy.signal.stft(x, nperseg=16, noverlap=8)
        mag = np.abs(Z)
        noise = mag[:, :2].mean(axis=1, keepdims=True)
        gain = np.maximum(1 - alpha * noise / (mag + 1e-9), 0.1)
        _, xr = scipy.signal.istft(Z * gain, nperseg=16, noverlap=8)
        return np.sum(xr[:len(x)] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(np.linspace(0, 20, 64)) + 0.3 * r.standard_normal(64), 1.0 + 0.1 * s
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def signal_find_peaks_prominences_widths_then_traced():
    def loss(y):
        peaks, props = scipy.signal.find_peaks(y, prominence=0.2, width=1)
        prom = scipy.signal.peak_prominences(y, peaks)[0]
        w = scipy.signal.peak_widths(y, peaks, rel_height=0.5)[0]
        return np.sum(y[peaks] ** 2) + np.sum(prom) + np.sum(w) * 0.1
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, 6, 40)
        return np.sin(3 * t) + 0.5 * np.sin(7 * t) + 0.01 * r.standard_normal(40),
    return loss, make, dict(step=1e-6)


def solve_ivp_bdf_sparse_jacobian_reaction_diffusion():
    n = 4
    def loss(D, u0):
        def rhs(t, u):
            du = np.empty_like(u)
            du[1:-1] = D * (u[2:] - 2 * u[1:-1] + u[:-2]) - u[1:-1] ** 3
            du[0] = D * (u[1] - u[0]) - u[0] ** 3
            du[-1] = D * (u[-2] - u[-1]) - u[-1] ** 3
            return du
        sol = scipy.integrate.solve_ivp(rhs, (0, 0.3), u0, method="BDF", rtol=1e-7, atol=1e-9,
                                        jac_sparsity=scipy.sparse.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)],
                                                                                   offsets=[-1, 0, 1]))
        return np.sum(sol.y[:, -1] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 5.0 + 0.1 * s, r.random(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3, jvp=False)


def spatial_distance_cdist_minkowski_kdtree_query_k():
    pts = np.random.default_rng(4).random((12, 2))
    def loss(X):
        D = scipy.spatial.distance.cdist(X, pts, metric="minkowski", p=3)
        tree = scipy.spatial.cKDTree(pts)
        d, i = tree.query(X, k=2)
        nn = pts[i[:, 0]]
        return np.sum(np.exp(-D)) + np.sum((X - nn) ** 2) + np.sum(scipy.spatial.distance.pdist(X, "cityblock"))
    def make(s):
        r = np.random.default_rng(s)
        return r.random((4, 2)),
    return loss, make, dict()


def make_smoothing_spline_lam_and_bspline_design_matrix():
    x = np.linspace(0, 1, 12)
    t = np.r_[[0.0] * 4, 0.33, 0.66, [1.0] * 4]
    def loss(y):
        spl = scipy.interpolate.make_smoothing_spline(x, y, lam=1e-3)
        B = scipy.interpolate.BSpline.design_matrix(x, t, 3).toarray()
        c = np.linalg.lstsq(B, y, rcond=None)[0]
        return np.sum(spl(x) ** 2) + np.sum(c ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(4 * x) + 0.1 * r.standard_normal(12),
    return loss, make, dict()


# ---------------------------------------------------------------------------------------------
# Markov chains on sparse arrays, modal superposition by a generalized eigsh, splu of several
# right-hand sides, direct and overlap-add convolutions, cross-spectra, cubic map_coordinates,
# terminal events, bracketed roots, weighted KDEs, Schur and Sylvester


def sparse_csr_array_row_sum_and_mean_axis_loops():
    def loss(w):
        A = scipy.sparse.csr_array(np.outer(w, w) * (np.abs(np.subtract.outer(np.arange(5), np.arange(5))) <= 1))
        deg = A.sum(axis=1)
        Dinv = scipy.sparse.diags_array(1 / deg)
        P = Dinv @ A
        pi = np.full(5, 0.2)
        for _ in range(6):
            pi = P.T @ pi
        return pi @ np.arange(5.0) + A.mean() + np.sum(A.multiply(A).sum(axis=0))
    def make(s):
        return 1 + 0.1 * np.arange(5.0) + 0.05 * s,
    return loss, make, dict()


def sparse_eigsh_generalized_modal_superposition():
    n = 8
    def loss(k, f):
        K = scipy.sparse.diags_array([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], offsets=[-1, 0, 1], format="csc")
        M = scipy.sparse.diags_array(np.full(n, 2.0), format="csc")
        w2, Phi = scipy.sparse.linalg.eigsh(K, k=3, M=M, sigma=0, v0=np.ones(n))
        q = (Phi.T @ f) / w2
        u = Phi @ q
        return u @ f + np.sum(np.sqrt(w2))
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(n + 1), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), jvp=False)


def sparse_kron_2d_laplacian_splu_multiple_rhs():
    m = 4
    T = scipy.sparse.diags_array([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], offsets=[-1, 0, 1])
    def loss(c, B):
        A = (scipy.sparse.kron(T, scipy.sparse.eye_array(m)) + scipy.sparse.kron(scipy.sparse.eye_array(m), T)
             + scipy.sparse.diags_array(c)).tocsc()
        lu = scipy.sparse.linalg.splu(A)
        X = lu.solve(B)
        return np.sum(X * B) + np.sum(lu.solve(B[:, 0]) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(m * m), r.standard_normal((m * m, 2))
    return loss, make, dict(argnums=(0, 1))


def signal_convolve_direct_oaconvolve_and_lfilter_2d_axis0():
    def loss(x, h):
        a = scipy.signal.convolve(x, h, mode="valid", method="direct")
        b = scipy.signal.oaconvolve(x, h, mode="full")
        X = np.stack([x, x[::-1]], axis=1)
        c = scipy.signal.lfilter(h, [1.0], X, axis=0)
        return np.sum(a ** 2) + np.sum(b) + np.sum(c ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(20), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def signal_periodogram_spectrum_csd_coherence():
    def loss(x, y):
        f, P = scipy.signal.periodogram(x, fs=4.0, scaling="spectrum", window="hann")
        f2, Pxy = scipy.signal.csd(x, y, fs=4.0, nperseg=16)
        f3, C = scipy.signal.coherence(x, y, fs=4.0, nperseg=16)
        return np.sum(P) + np.sum(np.abs(Pxy)) + np.sum(C)
    def make(s):
        r = np.random.default_rng(s)
        x = r.standard_normal(48)
        return x, 0.5 * x + r.standard_normal(48)
    return loss, make, dict(argnums=(0, 1))


def ndimage_map_coordinates_order3_spline_prefilter_mode_mirror():
    def loss(img, shift):
        yy, xx = np.mgrid[0:8, 0:8].astype(float)
        out = scipy.ndimage.map_coordinates(img, [yy + shift, xx - 0.5 * shift], order=3, mode="mirror")
        out2 = scipy.ndimage.map_coordinates(img, [yy * 0.9, xx * 1.1], order=2, mode="constant", cval=0.3)
        return np.sum(out ** 2) + np.sum(out2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((8, 8)), 0.3 + 0.05 * s
    return loss, make, dict(argnums=(0, 1))


def integrate_solve_ivp_events_terminal_direction_and_dense():
    def loss(k, v0):
        def hit(t, y, k):
            return y[0]
        hit.terminal = True
        hit.direction = -1
        sol = scipy.integrate.solve_ivp(lambda t, y, k: [y[1], -9.81 - k * y[1] * abs(y[1])], (0, 10), [0.0, v0],
                                        args=(k,), events=hit, rtol=1e-7, atol=1e-9, dense_output=True)
        tf = sol.t_events[0][0]
        return tf + sol.sol(0.5 * tf)[0]
    def make(s):
        return 0.05 + 0.01 * s, 10.0
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def optimize_root_scalar_bracket_and_newton_fprime_vector():
    def loss(a, b):
        r = scipy.optimize.root_scalar(lambda x: x ** 3 - a * x - b, bracket=[1.0, 5.0], method="brentq", xtol=1e-14)
        x = scipy.optimize.newton(lambda x: np.tanh(x) - a * 0.3 * x + b * 0.01, np.full(3, 2.0),
                                  fprime=lambda x: 1 - np.tanh(x) ** 2 - a * 0.3, tol=1e-13)
        return r.root + np.sum(x)
    def make(s):
        return 2.0 + 0.1 * s, 1.0
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def stats_gaussian_kde_weights_and_norm_logcdf_censoring():
    def loss(w, mu):
        x = np.linspace(-2, 2, 12)
        kde = scipy.stats.gaussian_kde(x, weights=w, bw_method=0.4)
        dens = kde(np.array([-0.5, 0.0, 0.7]))
        cens = scipy.stats.norm.logcdf(1.0, loc=mu, scale=0.5) + scipy.stats.norm.logsf(-1.0, loc=mu, scale=0.5)
        return np.sum(np.log(dens)) + cens
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(12), 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def linalg_schur_sylvester_qr_mode_r_pinvh():
    def loss(A, C):
        T, Z = scipy.linalg.schur(A @ A.T + np.eye(3))
        X = scipy.linalg.solve_sylvester(A + 3 * np.eye(3), -A.T + 3 * np.eye(3), C)
        R = scipy.linalg.qr(A, mode="r")[0]
        P = scipy.linalg.pinvh(A @ A.T)
        return np.trace(T) + np.sum(X ** 2) + np.sum(np.abs(np.diag(R))) + np.trace(P)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 3)) + 2 * np.eye(3), r.standard_normal((3, 3))
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# A LinearOperator subclass of the user's, solve's assume_a structures, shuffled minibatches,
# FFT lengths and norms, matrix norms and condition numbers in a loop


def linear_operator_subclass_matvec_cg_closure():
    class Stencil(scipy.sparse.linalg.LinearOperator):
        def __init__(self, k):
            self.k = k
            super().__init__(dtype=float, shape=(len(k), len(k)))
        def _matvec(self, x):
            y = (2 + self.k) * x
            y[1:] -= x[:-1]
            y[:-1] -= x[1:]
            return y
        def _rmatvec(self, x):
            return self._matvec(x)
    def loss(k, b):
        x, info = scipy.sparse.linalg.cg(Stencil(k), b, rtol=1e-12, atol=0)
        return x @ b
    def make(s):
        r = np.random.default_rng(s)
        return r.random(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def scipy_linalg_solve_assume_a_structures():
    def loss(d, e, b):
        T = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
        x1 = scipy.linalg.solve(T, b, assume_a="tridiagonal")
        x2 = scipy.linalg.solve(np.diag(d), b, assume_a="diagonal")
        L = np.tril(np.outer(d, d) * 0.1) + np.diag(d)
        x3 = scipy.linalg.solve(L, b, assume_a="lower triangular")
        x4 = scipy.linalg.solve(T, b, assume_a="banded")
        x5 = scipy.linalg.solve(T, b, assume_a="sym")
        return x1 @ b + x2 @ x2 + x3.sum() + x4 @ x1 + x5.sum()
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(5), 0.5 * r.random(4), r.standard_normal(5)
    return loss, make, dict(argnums=(0, 1, 2))


def rng_permutation_and_shuffle_of_traced_minibatches():
    def loss(X, w):
        rng = np.random.default_rng(0)
        data = X.copy()
        total = 0.0
        for epoch in range(2):
            rng.shuffle(data)
            for batch in np.split(data, 3):
                total += np.sum((batch @ w) ** 2)
            perm = rng.permutation(data)
            total += perm[0] @ w
        return total
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((6, 3)), r.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def fft_next_fast_len_workers_norm_forward():
    def loss(x):
        n = scipy.fft.next_fast_len(2 * len(x) - 1)
        X = scipy.fft.rfft(x, n=n, workers=2)
        ac = scipy.fft.irfft(np.abs(X) ** 2, n=n)[:len(x)]
        Y = np.fft.rfft(x, norm="forward")
        z = np.fft.irfft(Y, n=len(x) - 1, norm="forward")
        return np.sum(ac ** 2) + np.sum(z ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(11),
    return loss, make, dict()


def matrix_two_norm_cond_nuclear_in_loop():
    def loss(A):
        tot = 0.0
        B = A.copy()
        for _ in range(3):
            tot += np.linalg.norm(B, 2) + np.linalg.norm(B, "nuc") + np.linalg.cond(B)
            B = B @ A * 0.5 + np.eye(3)
        return tot
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 3)) + 2 * np.eye(3),
    return loss, make, dict()


PROGRAMS = [obj for name, obj in list(globals().items())
            if callable(obj) and getattr(obj, "__module__", None) == __name__
            and not name.startswith(("check", "test", "_")) and not isinstance(obj, type)]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_research_program(program):
    check(program)
