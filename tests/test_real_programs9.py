"""Whole research programs in fields and code shapes the earlier files leave out, written as
their scientists write NumPy and SciPy: MUSCL shallow water with a van Leer limiter and an HLL
flux, a D2Q5 lattice Boltzmann streamed by ``np.roll``, 2-D particle-in-cell deposition by
``bincount`` of ``ravel_multi_index``, SPH sums over ``cKDTree.query_pairs``, position-based
cloth with ``np.add.at``/``np.subtract.at``; an RTS smoother with ``solve(assume_a="pos")``, a
particle filter with residual resampling by ``multinomial`` and ``np.repeat``, HMM
forward-backward in log space, a Matérn GP's predictive variance; Hodgkin-Huxley, Newmark-beta
with ``lu_factor``, implicit ocean mixing by ``solve_banded``; Euler-Bernoulli beams in a
``coo_array``, ``cg`` with a Jacobi ``LinearOperator`` and a callback, ``factorized``,
normalised graph convolutions, ``csgraph.laplacian``, ``minres`` on a ``bmat`` saddle point,
``block_array``, ``spsolve_triangular`` sweeps, ``lgmres``/``gcrotmk``/``tfqmr``,
``svds``/sparse ``expm``/``inv``, operators of operators (``op.T @ op + D``) in ``cg``;
``affine_transform`` of a traced matrix, image pyramids and Lucas-Kanade, SSIM,
``center_of_mass``, a CNN by ``sliding_window_view``, dilated ``as_strided`` convolutions,
``savgol_filter(mode="interp")``, ``sosfiltfilt``, MFCCs, ``solve_toeplitz``, ``lombscargle``,
``deconvolve``, ``dlsim``/``lsim``, ``zoom_fft``/``czt``, ``wiener``/``medfilt2d``,
``fourier_shift``, grey morphology, ``geometric_transform``, ``generic_filter``;
``interp1d``, barycentric, Krogh, RBF and Clough-Tocher interpolants, ``splprep``,
``LSQUnivariateSpline``, ``CubicHermiteSpline``/``BPoly``; ``cumulative_simpson``,
``lsq_linear``, trust-exact and Newton-CG, ``root(method="lm")``, ``toms748``; logistic
regression by ``minimize`` inside the function, k-means by ``bincount``, PCA, Kabsch, an LSTM,
label smoothing, smoothed quantile regression with ``nnls``, Tobit, ordinal logit,
Dirichlet-multinomial, Bayesian evidence, t-SNE, RBF networks by ``pinv``; Sobol barrier
options, yield-curve bootstrapping by ``brentq``, SABR, CVA; Gauss-Legendre, Chebyshev fits,
a Wilkinson-shifted QR algorithm (its shifted matrices singular once the shift converges),
Richardson tables, damped Newton, Padé; structured arrays and ``recfunctions``, ``np.pad``
modes, ``einsum(out=)``, ``lstsq``, ``Rotation``, ``Delaunay``/``ConvexHull``, descriptive
statistics, distances between distributions, special functions, ``np.insert``/``np.delete``,
``fht``, ``dctn``, ``np.cumulative_sum``, ``np.piecewise``/``np.select``.

Each is checked as ``test_real_programs8`` checks its programs: NumPy's value bit for bit, the
gradient against finite differences, the caller's arrays bit for bit, ``replay=True`` over three
calls with other inputs bit for bit against tracing, and the tangent of ``jvp`` against the
gradient (where cheap: not through a solver's iterations)."""

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
import scipy.sparse.csgraph
import scipy.sparse.linalg
import scipy.spatial
import scipy.special
import scipy.stats
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from tests.test_real_programs8 import check

# ---------------------------------------------------------------------------------------------
# Conservation laws, kinetic and particle methods


def shallow_water_muscl_van_leer_hll():
    n = 24
    dx, dt, g = 1.0 / n, 0.004, 9.81
    def van_leer(r):
        return (r + np.abs(r)) / (1 + np.abs(r))
    def hll(hl, hul, hr, hur):
        ul, ur = hul / hl, hur / hr
        cl, cr = np.sqrt(g * hl), np.sqrt(g * hr)
        sl = np.minimum(ul - cl, ur - cr)
        sr = np.maximum(ul + cl, ur + cr)
        fl = np.stack([hul, hul * ul + 0.5 * g * hl ** 2])
        fr = np.stack([hur, hur * ur + 0.5 * g * hr ** 2])
        ql, qr = np.stack([hl, hul]), np.stack([hr, hur])
        return (sr * fl - sl * fr + sl * sr * (qr - ql)) / (sr - sl)
    def loss(h0, hu0):
        q = np.empty((2, n))
        q[0] = h0
        q[1] = hu0
        for _ in range(5):
            qp = np.pad(q, ((0, 0), (2, 2)), mode="edge")
            d = np.diff(qp, axis=1)
            r = d[:, :-1] / (d[:, 1:] + 1e-12)
            slope = 0.5 * van_leer(r) * d[:, 1:]
            left = qp[:, 1:-1] + slope               # right face of each cell
            right = qp[:, 1:-1] - slope
            F = hll(left[0, :-1], left[1, :-1], right[0, 1:], right[1, 1:])
            q -= dt / dx * (F[:, 1:] - F[:, :-1])
        return np.sum(q[0] ** 2) + 0.1 * np.sum(q[1] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        x = np.linspace(0, 1, n)
        return 1 + 0.2 * np.exp(-40 * (x - 0.4 - 0.05 * r.random()) ** 2), 0.05 * r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), step=1e-7)


def lattice_boltzmann_d2q5_roll_streaming():
    w = np.array([1 / 3, 1 / 6, 1 / 6, 1 / 6, 1 / 6])
    e = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]
    def loss(c0, tau):
        f = w[:, None, None] * c0[None]
        for _ in range(4):
            rho = f.sum(axis=0)
            f += (w[:, None, None] * rho - f) / tau
            for k, (ex, ey) in enumerate(e):
                f[k] = np.roll(np.roll(f[k], ex, axis=0), ey, axis=1)
        rho = f.sum(axis=0)
        return np.sum(rho ** 3)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.1 * r.random((6, 6)), 0.8 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def pic_2d_cic_bincount_ravel_multi_index():
    m = 8
    def loss(pos, q):
        g = pos * m
        i0 = np.floor(g).astype(int)
        f = g - i0
        rho = np.zeros(m * m)
        for dx in (0, 1):
            for dy in (0, 1):
                wx = f[:, 0] if dx else 1 - f[:, 0]
                wy = f[:, 1] if dy else 1 - f[:, 1]
                idx = np.ravel_multi_index(((i0[:, 0] + dx) % m, (i0[:, 1] + dy) % m), (m, m))
                rho += np.bincount(idx, weights=q * wx * wy, minlength=m * m)
        rho = rho.reshape(m, m)
        rho -= rho.mean()
        k = np.fft.fftfreq(m) * 2 * np.pi * m
        k2 = k[:, None] ** 2 + k[None, :] ** 2
        k2[0, 0] = 1.0
        phi_hat = np.fft.fft2(rho) / k2
        phi_hat[0, 0] = 0
        phi = np.fft.ifft2(phi_hat).real
        return np.sum(phi * rho)
    def make(s):
        r = np.random.default_rng(s)
        return 0.05 + 0.9 * r.random((10, 2)), 1 + r.random(10)
    return loss, make, dict(argnums=(0, 1))


def sph_cubic_spline_ckdtree_neighbour_sums():
    h = 0.35
    def W(r):
        q = r / h
        s = 10 / (7 * np.pi * h ** 2)
        return s * np.where(q < 1, 1 - 1.5 * q ** 2 + 0.75 * q ** 3, 0.25 * np.clip(2 - q, 0, None) ** 3)
    def loss(x, m):
        pairs = scipy.spatial.cKDTree(x).query_pairs(2 * h, output_type="ndarray")
        i, j = pairs[:, 0], pairs[:, 1]
        r = np.linalg.norm(x[i] - x[j], axis=1)
        rho = m * W(np.zeros(len(x)))
        wij = W(r)
        np.add.at(rho, i, m[j] * wij)
        np.add.at(rho, j, m[i] * wij)
        p = 2.0 * (rho - 1.0)
        return np.sum(m * p / rho) + np.sum(rho ** 2)
    def make(s):
        r = np.random.default_rng(3)
        g = np.stack(np.meshgrid(np.arange(4), np.arange(4)), -1).reshape(-1, 2) * 0.3
        return g + 0.02 * r.standard_normal(g.shape) * (1 + 0.1 * s), 1 + 0.1 * np.random.default_rng(s).random(16)
    return loss, make, dict(argnums=(0, 1))


def cloth_position_based_dynamics_subtract_at():
    n = 4
    idx = np.arange(n * n).reshape(n, n)
    springs = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                              np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)])
    def loss(x0, stiffness):
        x = x0.copy()
        v = np.zeros_like(x)
        rest = np.linalg.norm(x0[springs[:, 0]] - x0[springs[:, 1]], axis=1)
        for _ in range(3):
            v[:, 2] -= 0.05
            p = x + 0.1 * v
            for _ in range(2):
                d = p[springs[:, 1]] - p[springs[:, 0]]
                L = np.sqrt(np.einsum("ij,ij->i", d, d))
                corr = (stiffness * 0.5 * (L - rest) / L)[:, None] * d
                np.add.at(p, springs[:, 0], corr)
                np.subtract.at(p, springs[:, 1], corr)
                p[idx[0]] = x0[idx[0]]                       # pinned edge
            v[:] = (p - x) / 0.1
            x[...] = p
        return np.sum(x[:, 2]) + np.sum(v ** 2)
    def make(s):
        r = np.random.default_rng(s)
        g = np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij"), -1).reshape(-1, 2) * 0.5
        x = np.concatenate([g, np.zeros((n * n, 1))], 1) + 0.01 * r.standard_normal((n * n, 3))
        return x, 0.5 + 0.2 * r.random()
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# Estimation: smoothers, filters, hidden Markov models, Gaussian processes


def rts_smoother_information_scipy_solve_assume_pos():
    F = np.array([[1.0, 0.1], [0.0, 1.0]])
    H = np.array([[1.0, 0.0]])
    def loss(logq, ys):
        Q = np.exp(logq) * np.array([[0.001, 0.01], [0.01, 0.1]])
        T = len(ys)
        m = np.zeros((T, 2))
        P = np.zeros((T, 2, 2))
        mp = np.zeros((T, 2))
        Pp = np.zeros((T, 2, 2))
        x, S = np.zeros(2), np.eye(2)
        for t in range(T):
            mp[t] = F @ x
            Pp[t] = F @ S @ F.T + Q
            Sy = H @ Pp[t] @ H.T + 0.1
            K = scipy.linalg.solve(Sy, H @ Pp[t], assume_a="pos").T
            x = mp[t] + K @ (ys[t:t + 1] - H @ mp[t])
            S = Pp[t] - K @ Sy @ K.T
            m[t], P[t] = x, S
        ms, Ps = m.copy(), P.copy()
        for t in range(T - 2, -1, -1):
            G = scipy.linalg.solve(Pp[t + 1], F @ P[t], assume_a="pos").T
            ms[t] += G @ (ms[t + 1] - mp[t + 1])
            Ps[t] += G @ (Ps[t + 1] - Pp[t + 1]) @ G.T
        return np.sum((ms[:, 0] - ys) ** 2) + np.sum(np.trace(Ps, axis1=1, axis2=2))
    def make(s):
        r = np.random.default_rng(s)
        return np.array(0.1 * r.standard_normal()), np.cumsum(0.1 * r.standard_normal(8))
    return loss, make, dict(argnums=(0, 1))


def particle_filter_residual_resampling_multinomial():
    N = 30
    def loss(theta, ys):
        rng = np.random.default_rng(11)
        x = rng.standard_normal(N)
        logw = np.zeros(N)
        total = 0.0
        for y in ys:
            x *= theta
            x += 0.5 * rng.standard_normal(N)
            logw += scipy.stats.norm.logpdf(y, loc=x, scale=0.5)
            mx = logw.max()
            w = np.exp(logw - mx)
            total += mx + np.log(w.mean())
            w /= w.sum()
            counts = np.floor(N * w).astype(int)
            rest = N - counts.sum()
            resid = N * w - counts
            counts += rng.multinomial(rest, resid / resid.sum())
            x = np.repeat(x, counts)
            logw[:] = 0.0
        return total
    def make(s):
        r = np.random.default_rng(s)
        return 0.8 + 0.05 * r.random(), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def hmm_forward_backward_logsumexp_posteriors():
    def loss(logA, mu, obs):
        logA = logA - scipy.special.logsumexp(logA, axis=1, keepdims=True)
        K, T = len(mu), len(obs)
        logB = scipy.stats.norm.logpdf(obs[:, None], mu[None, :], 1.0)
        la = np.empty((T, K))
        lb = np.zeros((T, K))
        la[0] = np.log(1.0 / K) + logB[0]
        for t in range(1, T):
            la[t] = scipy.special.logsumexp(la[t - 1][:, None] + logA, axis=0) + logB[t]
        for t in range(T - 2, -1, -1):
            lb[t] = scipy.special.logsumexp(logA + (logB[t + 1] + lb[t + 1])[None, :], axis=1)
        ll = scipy.special.logsumexp(la[-1])
        gamma = np.exp(la + lb - ll)
        return ll + np.sum(gamma * (obs[:, None] - mu) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 3)), np.array([-1.0, 0.2, 1.5]) + 0.1 * r.random(3), r.standard_normal(7)
    return loss, make, dict(argnums=(0, 1, 2))


def gp_matern52_cho_factor_predictive_variance():
    def loss(logp, X, y, Xs):
        ell, sf, sn = np.exp(logp)
        def k(A, B):
            r = scipy.spatial.distance.cdist(A, B) / ell
            return sf ** 2 * (1 + np.sqrt(5) * r + 5 / 3 * r ** 2) * np.exp(-np.sqrt(5) * r)
        K = k(X, X)
        K[np.diag_indices_from(K)] += sn ** 2
        c = scipy.linalg.cho_factor(K, lower=True)
        alpha = scipy.linalg.cho_solve(c, y)
        Ks = k(Xs, X)
        mean = Ks @ alpha
        v = scipy.linalg.solve_triangular(c[0], Ks.T, lower=True)
        var = sf ** 2 - np.sum(v ** 2, axis=0)
        nll = 0.5 * y @ alpha + np.sum(np.log(np.diag(c[0])))
        return nll + np.sum(mean ** 2) + np.sum(var)
    def make(s):
        r = np.random.default_rng(s)
        X = r.random((8, 2))
        return np.log([0.5, 1.0, 0.1]) + 0.05 * r.random(3), X, np.sin(3 * X[:, 0]), r.random((3, 2))
    return loss, make, dict(argnums=(0, 1, 2))


# ---------------------------------------------------------------------------------------------
# ODE models through SciPy's integrators


def hodgkin_huxley_forward_euler_preallocated():
    def rates(V):
        am = 0.1 * (V + 40) / (1 - np.exp(-(V + 40) / 10))
        bm = 4 * np.exp(-(V + 65) / 18)
        ah = 0.07 * np.exp(-(V + 65) / 20)
        bh = 1 / (1 + np.exp(-(V + 35) / 10))
        an = 0.01 * (V + 55) / (1 - np.exp(-(V + 55) / 10))
        bn = 0.125 * np.exp(-(V + 65) / 80)
        return am, bm, ah, bh, an, bn
    def loss(gNa, I):
        dt, T = 0.05, 12
        trace = np.empty(T)
        V, m, h, n = -65.0, 0.05, 0.6, 0.32
        for t in range(T):
            am, bm, ah, bh, an, bn = rates(V)
            INa = gNa * m ** 3 * h * (V - 50)
            IK = 36 * n ** 4 * (V + 77)
            IL = 0.3 * (V + 54.4)
            V = V + dt * (I[t] - INa - IK - IL)
            m += dt * (am * (1 - m) - bm * m)
            h += dt * (ah * (1 - h) - bh * h)
            n += dt * (an * (1 - n) - bn * n)
            trace[t] = V
        return np.mean(trace) + 0.01 * np.sum(trace ** 2) / T
    def make(s):
        r = np.random.default_rng(s)
        return 120.0 + r.random(), 10 + r.random(12)
    return loss, make, dict(argnums=(0, 1))


def newmark_beta_mdof_lu_factor():
    n = 4
    def loss(k, f0):
        K = np.diag(np.full(n, 2.0)) - np.diag(np.ones(n - 1), 1) - np.diag(np.ones(n - 1), -1)
        K *= k
        M = np.eye(n)
        C = 0.02 * K + 0.1 * M
        dt, beta, gamma = 0.05, 0.25, 0.5
        Keff = K + gamma / (beta * dt) * C + M / (beta * dt ** 2)
        lu = scipy.linalg.lu_factor(Keff)
        u, v = np.zeros(n), np.zeros(n)
        a = np.linalg.solve(M, f0 - K @ u)
        energy = 0.0
        for step in range(6):
            f = f0 * np.cos(0.5 * step * dt)
            rhs = f + M @ (u / (beta * dt ** 2) + v / (beta * dt) + (0.5 / beta - 1) * a) \
                + C @ (gamma / (beta * dt) * u + (gamma / beta - 1) * v + dt * (0.5 * gamma / beta - 1) * a)
            un = scipy.linalg.lu_solve(lu, rhs)
            an = (un - u) / (beta * dt ** 2) - v / (beta * dt) - (0.5 / beta - 1) * a
            v += dt * ((1 - gamma) * a + gamma * an)
            u[:] = un
            a = an
            energy += u @ K @ u
        return energy
    def make(s):
        r = np.random.default_rng(s)
        return 10 + r.random(), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# Structures and sparse solvers


def euler_bernoulli_beam_coo_array_spsolve():
    ne = 5
    def loss(EI, q):
        L = 1.0 / ne
        ke = np.array([[12, 6 * L, -12, 6 * L], [6 * L, 4 * L ** 2, -6 * L, 2 * L ** 2],
                       [-12, -6 * L, 12, -6 * L], [6 * L, 2 * L ** 2, -6 * L, 4 * L ** 2]]) / L ** 3
        rows, cols, vals = [], [], []
        f = np.zeros(2 * ne + 2)
        for e in range(ne):
            dofs = np.arange(2 * e, 2 * e + 4)
            rows.append(np.repeat(dofs, 4))
            cols.append(np.tile(dofs, 4))
            vals.append((EI[e] * ke).ravel())
            f[dofs] += q[e] * L * np.array([0.5, L / 12, 0.5, -L / 12])
        K = scipy.sparse.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                   shape=(2 * ne + 2, 2 * ne + 2)).tocsc()
        free = np.arange(2, 2 * ne + 2)                      # clamped at the left end
        u = np.zeros(2 * ne + 2)
        u[free] = scipy.sparse.linalg.spsolve(K[free][:, free], f[free])
        return f @ u + u[-2] ** 2
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(ne), 1 + r.random(ne)
    return loss, make, dict(argnums=(0, 1))


def poisson_sparse_cg_jacobi_preconditioner_callback():
    n = 6
    def loss(kappa, f):
        T = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
        A = scipy.sparse.kronsum(T, T).tocsr() + scipy.sparse.diags(kappa.ravel())
        d = A.diagonal()
        M = scipy.sparse.linalg.LinearOperator(A.shape, matvec=lambda r: r / d)
        iters = []
        u, info = scipy.sparse.linalg.cg(A, f.ravel(), M=M, rtol=1e-12, atol=0.0,
                                         callback=lambda xk: iters.append(1))
        return u @ f.ravel() + 1e-3 * len(iters) * 0
    def make(s):
        r = np.random.default_rng(s)
        return 0.1 + r.random((n, n)), r.standard_normal((n, n))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def sparse_factorized_reused_implicit_steps():
    n = 10
    def loss(u0, D):
        L = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(n, n), format="csc")
        A = scipy.sparse.identity(n, format="csc") - 0.1 * D * L
        solve = scipy.sparse.linalg.factorized(A)
        u = u0.copy()
        for _ in range(4):
            u = solve(u)
        return np.sum(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n), 1.0 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def graph_convolution_normalized_sparse_adjacency():
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [1, 3], [4, 0], [4, 2]])
    def loss(W1, X, ew):
        n = 5
        A = scipy.sparse.coo_matrix((ew, (edges[:, 0], edges[:, 1])), shape=(n, n))
        A = A + A.T + scipy.sparse.identity(n)
        deg = np.asarray(A.sum(axis=1)).ravel()
        Dm = scipy.sparse.diags(1 / np.sqrt(deg))
        Ahat = Dm @ A @ Dm
        H = np.tanh(Ahat @ (X @ W1))
        H2 = Ahat @ H
        return np.sum(H2 ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 4)), r.standard_normal((5, 3)), 1 + r.random(7)
    return loss, make, dict(argnums=(0, 1, 2))


def csgraph_laplacian_spectral_embedding_eigh():
    def loss(w):
        n = 6
        W = np.zeros((n, n))
        iu = np.triu_indices(n, 1)
        W[iu] = w
        W += W.T
        L = scipy.sparse.csgraph.laplacian(W, normed=True)
        vals, vecs = np.linalg.eigh(L)
        return vals[1] + vals[2] + np.sum(vecs[:, 1] ** 4)
    def make(s):
        r = np.random.default_rng(s)
        return (0.2 + r.random(15),)
    return loss, make, dict()


def sparse_minres_saddle_point_vstack():
    def loss(h, b):
        n, m = 6, 2
        H = scipy.sparse.diags(h)
        B = scipy.sparse.csr_matrix(np.array([[1.0] * 6, [1, -1, 1, -1, 1, -1]]))
        K = scipy.sparse.bmat([[H, B.T], [B, None]], format="csr")
        rhs = np.concatenate([b, np.zeros(m)])
        x, info = scipy.sparse.linalg.minres(K, rhs, rtol=1e-12)
        return x[:n] @ b + x[n:] @ x[n:]
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def sparse_matrix_power_multiply_markov_hitting():
    def loss(P0):
        P = scipy.sparse.csr_array(P0 / P0.sum(axis=1, keepdims=True))
        P2 = P @ P
        mix = 0.5 * (P + P2)
        pi = np.full(5, 0.2)
        for _ in range(5):
            pi = mix.T @ pi
        occ = P.multiply(P.T).sum()
        return pi @ np.arange(5.0) + occ
    def make(s):
        r = np.random.default_rng(s)
        P = r.random((5, 5))
        P[P < 0.3] = 0.0
        P += np.eye(5) * 0.1
        return (P,)
    return loss, make, dict()


# ---------------------------------------------------------------------------------------------
# Images and signals


def image_registration_affine_transform_traced_matrix():
    def loss(theta, img):
        c, s = np.cos(theta[0]), np.sin(theta[0])
        A = np.array([[c, -s], [s, c]]) * (1 + theta[1])
        centre = np.array(img.shape) / 2
        offset = centre - A @ centre + theta[2:]
        warped = scipy.ndimage.affine_transform(img, A, offset=offset, order=1, mode="nearest")
        return np.sum((warped - img.T) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        y, x = np.mgrid[:10, :10]
        img = np.exp(-((x - 4.3) ** 2 + (y - 5.1) ** 2) / 6.0) + 0.01 * r.random((10, 10))
        return np.array([0.1, 0.02, 0.3, -0.2]) + 0.01 * r.random(4), img
    return loss, make, dict(argnums=(0, 1), step=1e-6, rtol=1e-4)


def image_pyramid_zoom_gaussian_lucas_kanade():
    def loss(I0, I1):
        levels = []
        a, b = I0, I1
        for _ in range(2):
            levels.append((a, b))
            a = scipy.ndimage.zoom(scipy.ndimage.gaussian_filter(a, 1.0), 0.5, order=1)
            b = scipy.ndimage.zoom(scipy.ndimage.gaussian_filter(b, 1.0), 0.5, order=1)
        total = 0.0
        for a, b in levels:
            Ix = scipy.ndimage.sobel(a, axis=1)
            Iy = scipy.ndimage.sobel(a, axis=0)
            It = b - a
            Sxx = scipy.ndimage.uniform_filter(Ix * Ix, 3)
            Sxy = scipy.ndimage.uniform_filter(Ix * Iy, 3)
            Syy = scipy.ndimage.uniform_filter(Iy * Iy, 3)
            Sxt = scipy.ndimage.uniform_filter(Ix * It, 3)
            Syt = scipy.ndimage.uniform_filter(Iy * It, 3)
            det = Sxx * Syy - Sxy ** 2 + 1e-3
            u = (-Syy * Sxt + Sxy * Syt) / det
            v = (Sxy * Sxt - Sxx * Syt) / det
            total += np.mean(u ** 2 + v ** 2)
        return total
    def make(s):
        r = np.random.default_rng(s)
        y, x = np.mgrid[:12, :12]
        I0 = np.sin(x / 2.0) * np.cos(y / 3.0) + 0.05 * r.random((12, 12))
        return I0, np.roll(I0, 1, axis=1) + 0.05 * r.random((12, 12))
    return loss, make, dict(argnums=(0, 1))


def ssim_gaussian_filter_structural_similarity():
    def loss(x, y):
        C1, C2 = 0.01 ** 2, 0.03 ** 2
        mx = scipy.ndimage.gaussian_filter(x, 1.5, truncate=2.0)
        my = scipy.ndimage.gaussian_filter(y, 1.5, truncate=2.0)
        sxx = scipy.ndimage.gaussian_filter(x * x, 1.5, truncate=2.0) - mx ** 2
        syy = scipy.ndimage.gaussian_filter(y * y, 1.5, truncate=2.0) - my ** 2
        sxy = scipy.ndimage.gaussian_filter(x * y, 1.5, truncate=2.0) - mx * my
        ssim = ((2 * mx * my + C1) * (2 * sxy + C2)) / ((mx ** 2 + my ** 2 + C1) * (sxx + syy + C2))
        return 1 - ssim.mean()
    def make(s):
        r = np.random.default_rng(s)
        x = r.random((10, 10))
        return x, x + 0.1 * r.standard_normal((10, 10))
    return loss, make, dict(argnums=(0, 1))


def center_of_mass_and_labeled_means_of_traced_image():
    labels = np.zeros((8, 8), int)
    labels[1:4, 1:4] = 1
    labels[5:8, 2:7] = 2
    def loss(img):
        com = scipy.ndimage.center_of_mass(img, labels, [1, 2])
        means = scipy.ndimage.mean(img, labels, [1, 2])
        var = scipy.ndimage.variance(img, labels, [1, 2])
        sums = scipy.ndimage.sum_labels(img ** 2, labels, index=[1, 2])
        return np.sum(np.array(com) ** 2) + np.sum(means) + np.sum(var) + np.sum(sums)
    def make(s):
        r = np.random.default_rng(s)
        return (0.5 + r.random((8, 8)),)
    return loss, make, dict()


def cnn_conv_relu_maxpool_sliding_window_view():
    def loss(K, X, w):
        out = np.empty((X.shape[0], 2, 6, 6))
        for n in range(X.shape[0]):
            win = sliding_window_view(X[n], (3, 3))          # (6, 6, 3, 3)
            np.einsum("ijkl,ckl->cij", win, K, out=out[n])
        np.maximum(out, 0, out=out)
        pooled = sliding_window_view(out, (2, 2), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-1, -2))
        logits = pooled.reshape(X.shape[0], -1) @ w
        return np.sum(np.logaddexp(0, -logits))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((2, 3, 3)), r.standard_normal((3, 8, 8)), 0.1 * r.standard_normal(18)
    return loss, make, dict(argnums=(0, 1, 2))


def conv1d_as_strided_im2col_dilated():
    def loss(x, k):
        n, kw, dil = len(x), len(k), 2
        m = n - dil * (kw - 1)
        cols = as_strided(x, shape=(m, kw), strides=(x.strides[0], dil * x.strides[0]))
        y = cols @ k
        y = np.tanh(y)
        return np.sum(y ** 2) + np.sum(np.diff(y) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(16), r.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def savgol_mode_interp_lfilter_traced_iir_zi():
    def loss(x, a1):
        y = scipy.signal.savgol_filter(x, 7, 2, mode="interp")
        b = np.array([1 - a1])
        a = np.array([1.0, -a1])
        zi = scipy.signal.lfilter_zi(b, a) * y[0]
        z, _ = scipy.signal.lfilter(b, a, y, zi=zi)
        return np.sum(z ** 2) + np.sum(np.diff(y) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, 1, 30)
        return np.sin(6 * t) + 0.1 * r.standard_normal(30), 0.7 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def sosfiltfilt_bandpass_padlen_envelope():
    sos = scipy.signal.butter(2, [0.1, 0.3], btype="band", output="sos")
    def loss(x):
        y = scipy.signal.sosfiltfilt(sos, x, padlen=10)
        env = np.abs(scipy.signal.hilbert(y))
        return np.sum(env ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal(40),)
    return loss, make, dict()


def mfcc_mel_filterbank_dct_ortho():
    def loss(x):
        frames = sliding_window_view(x, 16)[::8] * np.hanning(16)
        spec = np.abs(np.fft.rfft(frames, axis=1)) ** 2
        nb = spec.shape[1]
        mel = np.zeros((4, nb))
        edges = np.linspace(0, nb - 1, 6)
        bins = np.arange(nb)
        for m in range(4):
            lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
            mel[m] = np.clip(np.minimum((bins - lo) / (c - lo), (hi - bins) / (hi - c)), 0, None)
        logmel = np.log(spec @ mel.T + 1e-6)
        cep = scipy.fft.dct(logmel, type=2, norm="ortho", axis=1)
        return np.sum(cep[:, 1:] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (np.sin(np.arange(64) * 0.7) + 0.3 * r.standard_normal(64),)
    return loss, make, dict()


def cepstrum_lpc_solve_toeplitz():
    def loss(x):
        p = 3
        r = np.correlate(x, x, mode="full")[len(x) - 1:len(x) + p]
        a = scipy.linalg.solve_toeplitz(r[:p], r[1:p + 1])
        err = r[0] - a @ r[1:p + 1]
        ceps = np.fft.irfft(np.log(np.abs(np.fft.rfft(x)) + 1e-3))
        return err + np.sum(a ** 2) + np.sum(ceps[1:5] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal(32),)
    return loss, make, dict()


def lombscargle_uneven_sampling_period_fit():
    def loss(y, t):
        freqs = np.linspace(0.5, 4, 12)
        P = scipy.signal.lombscargle(t, y, freqs)
        return np.sum(P * freqs)
    def make(s):
        r = np.random.default_rng(s)
        t = np.sort(r.random(20) * 10)
        return np.sin(2 * t) + 0.1 * r.standard_normal(20), t
    return loss, make, dict(argnums=(0, 1))


def deconvolve_polynomial_division_traced():
    def loss(sig, div):
        q, r = scipy.signal.deconvolve(sig, div)
        return np.sum(q ** 2) + np.sum(r ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(8), np.array([1.0, 0.3 + 0.1 * r.random(), -0.2])
    return loss, make, dict(argnums=(0, 1))


def dlsim_state_space_traced_matrices():
    def loss(A, u):
        B = np.array([[1.0], [0.5]])
        C = np.array([[1.0, -1.0]])
        D = np.array([[0.0]])
        t, y, x = scipy.signal.dlsim((A, B, C, D, 1.0), u)
        return np.sum(y ** 2) + np.sum(x[-1] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([[0.5, 0.1], [-0.2, 0.7]]) + 0.05 * r.random((2, 2)), r.standard_normal((10, 1))
    return loss, make, dict(argnums=(0, 1))


def navier_stokes_vorticity_rfft2_rk2():
    n = 8
    def loss(w0, nu):
        k = np.fft.fftfreq(n, 1.0 / n)
        kr = np.fft.rfftfreq(n, 1.0 / n)
        KX, KY = np.meshgrid(k, kr, indexing="ij")
        K2 = KX ** 2 + KY ** 2
        K2i = np.where(K2 == 0, 0.0, 1.0 / np.where(K2 == 0, 1.0, K2))
        def rhs(wh):
            psih = wh * K2i
            u = np.fft.irfft2(1j * KY * psih, s=(n, n))
            v = np.fft.irfft2(-1j * KX * psih, s=(n, n))
            wx = np.fft.irfft2(1j * KX * wh, s=(n, n))
            wy = np.fft.irfft2(1j * KY * wh, s=(n, n))
            return -np.fft.rfft2(u * wx + v * wy) - nu * K2 * wh
        wh = np.fft.rfft2(w0)
        dt = 0.05
        for _ in range(3):
            k1 = rhs(wh)
            wh = wh + 0.5 * dt * (k1 + rhs(wh + dt * k1))
        w = np.fft.irfft2(wh, s=(n, n))
        return np.sum(w ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((n, n)), 0.05 + 0.01 * r.random()
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# Statistics and learning


def logistic_regression_minimize_inside_warm_start():
    def loss(lam, X, y):
        def nll(w):
            z = X @ w
            return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * lam * w @ w
        def grad(w):
            p = scipy.special.expit(X @ w)
            return X.T @ (p - y) + lam * w
        res = scipy.optimize.minimize(nll, np.zeros(X.shape[1]), jac=grad, method="BFGS",
                                      options=dict(gtol=1e-10))
        return np.sum(res.x ** 2)
    def make(s):
        r = np.random.default_rng(s)
        X = r.standard_normal((20, 3))
        return 0.5 + 0.1 * r.random(), X, (X[:, 0] + 0.5 * r.standard_normal(20) > 0).astype(float)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, jvp=False)


def kmeans_hard_assignment_bincount_centroids():
    def loss(X, C0):
        C = C0.copy()
        for _ in range(3):
            d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
            lab = np.argmin(d, axis=1)
            cnt = np.bincount(lab, minlength=len(C))
            for j in range(C.shape[1]):
                C[:, j] = np.bincount(lab, weights=X[:, j], minlength=len(C)) / np.maximum(cnt, 1)
        d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
        return np.sum(np.min(d, axis=1))
    def make(s):
        r = np.random.default_rng(s)
        X = np.concatenate([r.standard_normal((8, 2)) + 3, r.standard_normal((8, 2)) - 3])
        return X, np.array([[2.5, 2.5], [-2.5, -2.5]]) + 0.1 * r.random((2, 2))
    return loss, make, dict(argnums=(0, 1))


def pca_svd_reconstruction_whitened():
    def loss(X):
        Xc = X - X.mean(axis=0)
        U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
        Z = U[:, :2] * S[:2]
        R = Z @ Vt[:2]
        white = Xc @ Vt[:2].T / S[:2]
        return np.sum((Xc - R) ** 2) + np.sum(white ** 4)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal((10, 4)) @ np.diag([3.0, 2.0, 1.0, 0.5]),)
    return loss, make, dict()


def kabsch_icp_rigid_alignment_svd_det():
    def loss(P, Q):
        Pc, Qc = P - P.mean(0), Q - Q.mean(0)
        U, S, Vt = np.linalg.svd(Pc.T @ Qc)
        d = np.sign(np.linalg.det(Vt.T @ U.T))
        D = np.diag([1.0, 1.0, d])
        R = Vt.T @ D @ U.T
        return np.sum((Pc @ R.T - Qc) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        P = r.standard_normal((8, 3))
        th = 0.4
        R = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
        return P, P @ R.T + 0.05 * r.standard_normal((8, 3))
    return loss, make, dict(argnums=(0, 1))


def lstm_cell_by_hand_preallocated_gates():
    def loss(W, xs):
        H = 3
        h, c = np.zeros(H), np.zeros(H)
        gates = np.empty(4 * H)
        hs = np.empty((len(xs), H))
        for t, x in enumerate(xs):
            np.dot(W, np.concatenate([x, h, [1.0]]), out=gates)
            i = scipy.special.expit(gates[:H])
            f = scipy.special.expit(gates[H:2 * H])
            o = scipy.special.expit(gates[2 * H:3 * H])
            g = np.tanh(gates[3 * H:])
            c = f * c + i * g
            h = o * np.tanh(c)
            hs[t] = h
        return np.sum(hs[-1] ** 2) + 0.1 * np.sum(hs ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal((12, 2 + 3 + 1)), r.standard_normal((5, 2))
    return loss, make, dict(argnums=(0, 1))


def softmax_cross_entropy_label_smoothing_take_along_axis():
    def loss(W, X, y):
        logits = X @ W
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        nll = -np.take_along_axis(logp, y[:, None], axis=1).mean()
        smooth = -logp.mean()
        return 0.9 * nll + 0.1 * smooth
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((4, 3)), r.standard_normal((12, 4)), r.integers(0, 3, 12)
    return loss, make, dict(argnums=(0, 1))


def quantile_regression_smoothed_check_loss_nnls():
    def loss(beta, X, y):
        tau = 0.7
        r = y - X @ beta
        h = 0.1
        rho = np.where(np.abs(r) <= h, r ** 2 / (4 * h) + (tau - 0.5) * r + h / 4,
                       r * (tau - (r < 0)))
        w, _ = scipy.optimize.nnls(X, y)
        return np.sum(rho) + np.sum(w ** 2)
    def make(s):
        r = np.random.default_rng(s)
        X = r.random((10, 3))
        return r.standard_normal(3), X, X @ np.array([1.0, 2.0, 0.5]) + 0.1 * r.standard_normal(10)
    return loss, make, dict(argnums=(0, 1, 2))


def tobit_censored_likelihood_log_ndtr():
    def loss(theta, X, y):
        beta, logs = theta[:-1], theta[-1]
        s = np.exp(logs)
        mu = X @ beta
        cens = y <= 0
        ll = np.empty_like(y)
        ll[cens] = scipy.special.log_ndtr(-mu[cens] / s)
        ll[~cens] = scipy.stats.norm.logpdf(y[~cens], mu[~cens], s)
        return -ll.sum()
    def make(s):
        r = np.random.default_rng(4)
        X = np.column_stack([np.ones(14), r.standard_normal(14)])
        y = np.maximum(X @ np.array([0.2, 1.0]) + 0.5 * r.standard_normal(14), 0)
        return np.array([0.1, 0.9, -0.5]) + 0.05 * np.random.default_rng(s).random(3), X, y
    return loss, make, dict(argnums=(0, 1))


def ordinal_logit_cumulative_cutpoints_cumsum():
    def loss(theta, x, y):
        beta = theta[0]
        cuts = np.cumsum(np.concatenate([theta[1:2], np.exp(theta[2:])]))
        eta = beta * x
        F = scipy.special.expit(cuts[None, :] - eta[:, None])
        F = np.hstack([np.zeros((len(x), 1)), F, np.ones((len(x), 1))])
        p = F[np.arange(len(x)), y + 1] - F[np.arange(len(x)), y]
        return -np.sum(np.log(p))
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.5, -1.0, 0.0, 0.2]) + 0.05 * r.random(4), r.standard_normal(15), r.integers(0, 4, 15)
    return loss, make, dict(argnums=(0, 1))


def dirichlet_multinomial_gammaln_betaln():
    def loss(logalpha, counts):
        a = np.exp(logalpha)
        A = a.sum()
        N = counts.sum(axis=1)
        ll = (scipy.special.gammaln(A) - scipy.special.gammaln(N + A)
              + np.sum(scipy.special.gammaln(counts + a) - scipy.special.gammaln(a), axis=1))
        return -ll.sum() + np.sum(scipy.special.betaln(a[:-1], a[1:]))
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal(3), r.integers(0, 6, (5, 3)).astype(float)
    return loss, make, dict(argnums=(0,))


def bayesian_linear_regression_evidence_slogdet():
    def loss(logab, X, y):
        alpha, beta = np.exp(logab)
        n, d = X.shape
        A = alpha * np.eye(d) + beta * X.T @ X
        mN = beta * np.linalg.solve(A, X.T @ y)
        sign, logdetA = np.linalg.slogdet(A)
        E = beta / 2 * np.sum((y - X @ mN) ** 2) + alpha / 2 * mN @ mN
        return -(d / 2 * np.log(alpha) + n / 2 * np.log(beta) - E - 0.5 * logdetA)
    def make(s):
        r = np.random.default_rng(s)
        X = r.standard_normal((12, 3))
        return np.log([1.0, 4.0]) + 0.1 * r.random(2), X, X @ np.array([1.0, -1.0, 0.3]) + 0.5 * r.standard_normal(12)
    return loss, make, dict(argnums=(0, 1, 2))


def tsne_gradient_steps_inplace_momentum():
    def loss(P, Y0):
        Y = Y0.copy()
        v = np.zeros_like(Y)
        for _ in range(3):
            D = np.sum((Y[:, None] - Y[None]) ** 2, -1)
            num = 1 / (1 + D)
            np.fill_diagonal(num, 0.0)
            Q = num / num.sum()
            PQ = (P - Q) * num
            grad = 4 * (np.diag(PQ.sum(1)) - PQ) @ Y
            v *= 0.5
            v -= 10.0 * grad
            Y += v
        D = np.sum((Y[:, None] - Y[None]) ** 2, -1)
        num = 1 / (1 + D)
        np.fill_diagonal(num, 0.0)
        Q = num / num.sum()
        mask = ~np.eye(len(Y), dtype=bool)
        return np.sum(P[mask] * np.log(P[mask] / Q[mask]))
    def make(s):
        r = np.random.default_rng(s)
        P = r.random((6, 6)) + 0.1
        P = P + P.T
        np.fill_diagonal(P, 0)
        return P / P.sum(), 0.1 * r.standard_normal((6, 2))
    return loss, make, dict(argnums=(0, 1))


def rbf_network_pinv_ridge_weights():
    def loss(centres, X, y):
        D = scipy.spatial.distance.cdist(X, centres, "sqeuclidean")
        Phi = np.exp(-D / 0.5)
        w = np.linalg.pinv(Phi) @ y
        return np.sum((Phi @ w - y) ** 2) + 1e-2 * w @ w
    def make(s):
        r = np.random.default_rng(s)
        X = r.random((12, 2))
        return r.random((4, 2)), X, np.sin(4 * X[:, 0]) + X[:, 1]
    return loss, make, dict(argnums=(0, 1))


# ---------------------------------------------------------------------------------------------
# Finance and economics


def sobol_qmc_barrier_option_norm_ppf():
    u = scipy.stats.qmc.Sobol(d=4, scramble=True, seed=3).random(64)
    z = scipy.stats.norm.ppf(u)
    def loss(sigma, S0):
        dt = 0.25
        logS = np.full(len(z), np.log(S0))
        alive = np.ones(len(z))
        for t in range(4):
            logS += (0.02 - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * z[:, t]
            alive *= scipy.special.expit((1.4 - np.exp(logS)) * 50)
        payoff = np.maximum(np.exp(logS) - 1.0, 0) * alive
        return np.exp(-0.02) * payoff.mean()
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 0.02 * r.random(), 1.0 + 0.01 * r.random()
    return loss, make, dict(argnums=(0, 1))


def yield_curve_bootstrap_brentq_loop():
    def loss(coupons, prices):
        mats = np.arange(1, len(coupons) + 1)
        dfs = np.empty(len(coupons))
        for i, (c, p) in enumerate(zip(coupons, prices)):
            known = c * dfs[:i].sum()
            def f(r):
                return known + (1 + c) * np.exp(-r * mats[i]) - p
            r = scipy.optimize.brentq(f, -0.5, 1.0, xtol=1e-14)
            dfs[i] = np.exp(-r * mats[i])
        return np.sum(-np.log(dfs) / mats)
    def make(s):
        r = np.random.default_rng(s)
        return 0.03 + 0.01 * r.random(4), np.array([0.99, 0.98, 0.97, 0.96]) + 0.005 * r.random(4)
    return loss, make, dict(argnums=(0, 1), jvp=False, rtol=1e-4)


def exponential_yield_curve_least_squares_fit():
    tau = np.array([0.5, 1, 2, 3, 5, 7, 10.0])
    def loss(yields):
        def curve(p):
            b0, b1, lam = p
            x = tau / lam
            return b0 + b1 * (1 - np.exp(-x)) / x
        res = scipy.optimize.least_squares(lambda p: curve(p) - yields, [0.05, -0.02, 2.0],
                                           xtol=1e-15, ftol=1e-15, gtol=1e-15)
        return res.x[0] + res.x[1] + 0.01 * res.x[2]
    def make(s):
        r = np.random.default_rng(s)
        return (0.05 - 0.02 * (1 - np.exp(-tau / 2)) / (tau / 2) + 0.001 * r.random(7),)
    return loss, make, dict(jvp=False, rtol=1e-4)


def sabr_hagan_implied_vol_smile():
    def loss(params, K):
        alpha, rho, nu = params
        F, T, beta = 1.0, 1.0, 0.5
        logFK = np.log(F / K)
        FK = (F * K) ** ((1 - beta) / 2)
        z = nu / alpha * FK * logFK
        xz = np.log((np.sqrt(1 - 2 * rho * z + z ** 2) + z - rho) / (1 - rho))
        zx = np.ones_like(K)
        nz = np.abs(z) > 1e-8
        zx[nz] = z[nz] / xz[nz]
        vol = alpha / FK * zx * (1 + ((1 - beta) ** 2 / 24 * alpha ** 2 / FK ** 2
                                      + rho * beta * nu * alpha / (4 * FK) + (2 - 3 * rho ** 2) / 24 * nu ** 2) * T)
        return np.sum((vol - 0.2) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.2, -0.3, 0.4]) + 0.01 * r.random(3), np.array([0.8, 0.9, 1.1, 1.2]) + 0.01 * r.random(4)
    return loss, make, dict(argnums=(0, 1))


def cva_exposure_profile_percentile():
    def loss(sigma):
        rng = np.random.default_rng(5)
        paths = np.empty((50, 6))
        paths[:, 0] = 0.0
        for t in range(1, 6):
            paths[:, t] = paths[:, t - 1] + sigma * rng.standard_normal(50)
        epe = np.maximum(paths, 0).mean(axis=0)
        pfe = np.percentile(paths, 95, axis=0)
        pd = np.diff(1 - np.exp(-0.02 * np.arange(6)))
        return np.sum(epe[1:] * pd) + 0.1 * pfe.sum()
    def make(s):
        return (0.1 + 0.01 * s,)
    return loss, make, dict()


# ---------------------------------------------------------------------------------------------
# Numerical analysis


def gauss_legendre_leggauss_and_fixed_quad():
    def loss(p):
        x, w = np.polynomial.legendre.leggauss(6)
        f = lambda t: np.exp(-p[0] * t ** 2) * np.cos(p[1] * t)
        I1 = w @ f(x)
        I2, _ = scipy.integrate.fixed_quad(f, 0.0, 1.0, n=5)
        return I1 * I2
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([1.0, 2.0]) + 0.1 * r.random(2),)
    return loss, make, dict()


def chebyshev_interpolation_chebfit_chebval_integ():
    def loss(a):
        x = np.cos(np.pi * (np.arange(9) + 0.5) / 9)
        y = np.tanh(a[0] * x) + a[1] * x ** 2
        c = np.polynomial.chebyshev.chebfit(x, y, 6)
        ci = np.polynomial.chebyshev.chebint(c, lbnd=-1)
        dc = np.polynomial.chebyshev.chebder(c)
        return np.polynomial.chebyshev.chebval(1.0, ci) + np.sum(np.polynomial.chebyshev.chebval(x, dc) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([2.0, 0.5]) + 0.1 * r.random(2),)
    return loss, make, dict()


def qr_algorithm_wilkinson_shift_deflation():
    def loss(B):
        A = B + B.T
        A = scipy.linalg.hessenberg(A)
        n = len(A)
        eig = []
        m = n
        while m > 1:
            for _ in range(30):
                d = (A[m - 2, m - 2] - A[m - 1, m - 1]) / 2
                b = A[m - 1, m - 2]
                mu = A[m - 1, m - 1] - b ** 2 / (d + np.copysign(np.hypot(d, b), d))
                Q, R = np.linalg.qr(A[:m, :m] - mu * np.eye(m))   # singular once mu converged
                A[:m, :m] = R @ Q + mu * np.eye(m)
                if abs(A[m - 1, m - 2]) < 1e-12:
                    break
            eig.append(A[m - 1, m - 1])
            m -= 1
        eig.append(A[0, 0])
        return np.sum(np.array(eig) ** 3)
    def make(s):
        r = np.random.default_rng(s)
        return (np.diag([1.0, 2.0, 4.0, 7.0]) + 0.1 * r.standard_normal((4, 4)),)
    return loss, make, dict(jvp=False)


def richardson_extrapolation_table_inplace():
    def loss(p):
        f = lambda x: np.sin(p[0] * x) * np.exp(p[1] * x)
        R = np.zeros((4, 4))
        h = 0.4
        for i in range(4):
            R[i, 0] = (f(1 + h) - f(1 - h)) / (2 * h)
            for j in range(1, i + 1):
                R[i, j] = R[i, j - 1] + (R[i, j - 1] - R[i - 1, j - 1]) / (4 ** j - 1)
            h /= 2
        return R[-1, -1] ** 2
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([1.5, 0.3]) + 0.1 * r.random(2),)
    return loss, make, dict()


def newton_vector_early_exit_line_search():
    def loss(p):
        def F(x):
            return np.array([x[0] ** 2 + x[1] ** 2 - p[0], np.exp(x[0]) + x[1] - p[1]])
        def J(x):
            return np.array([[2 * x[0], 2 * x[1]], [np.exp(x[0]), 1.0]])
        x = np.array([1.0, 0.5])
        for it in range(50):
            Fx = F(x)
            if np.linalg.norm(Fx) < 1e-12:
                break
            dx = np.linalg.solve(J(x), -Fx)
            t = 1.0
            while np.linalg.norm(F(x + t * dx)) > (1 - 1e-4 * t) * np.linalg.norm(Fx) and t > 1e-4:
                t *= 0.5
            x += t * dx
        return x @ x + x[0]
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([2.0, 2.5]) + 0.05 * r.random(2),)
    return loss, make, dict(rtol=1e-4)


def pade_approximant_and_polyval():
    def loss(c):
        taylor = np.cumprod(np.concatenate([[1.0], c / np.arange(1, len(c) + 1)]))
        p, q = scipy.interpolate.pade(taylor, 2)
        x = np.linspace(0, 1, 5)
        return np.sum((p(x) / q(x)) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (1 + 0.1 * r.random(4),)
    return loss, make, dict()


# ---------------------------------------------------------------------------------------------
# Code shapes: records, stencils with np.pad modes, einsum, out=


def structured_array_particles_fields_inplace():
    dt = np.dtype([("x", float, 2), ("v", float, 2), ("m", float)])
    def loss(x0, m):
        p = np.zeros(len(m), dtype=dt)
        p["x"] = x0
        p["m"] = m
        for _ in range(3):
            com = (p["m"][:, None] * p["x"]).sum(0) / p["m"].sum()
            p["v"] -= 0.1 * (p["x"] - com)
            p["x"] += 0.1 * p["v"]
        return np.sum(p["m"] * np.sum(p["v"] ** 2, axis=1)) + np.sum(p["x"] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((5, 2)), 1 + r.random(5)
    return loss, make, dict(argnums=(0, 1))


def pad_modes_reflect_symmetric_wrap_stencils():
    def loss(u0):
        u = u0.copy()
        for mode in ("reflect", "symmetric", "wrap", "edge"):
            up = np.pad(u, 1, mode=mode)
            lap = up[:-2, 1:-1] + up[2:, 1:-1] + up[1:-1, :-2] + up[1:-1, 2:] - 4 * u
            u += 0.1 * lap
            u -= 0.01 * u ** 3
        return np.sum(u ** 2) + np.sum(np.pad(u, ((2, 1), (0, 3)), mode="linear_ramp") ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal((5, 6)),)
    return loss, make, dict()


def einsum_bilinear_attention_out_preallocated():
    def loss(Wq, Wk, X):
        Q = np.einsum("bnd,de->bne", X, Wq)
        K = np.einsum("bnd,de->bne", X, Wk)
        S = np.empty((X.shape[0], X.shape[1], X.shape[1]))
        np.einsum("bie,bje->bij", Q, K, out=S)
        S /= np.sqrt(Q.shape[-1])
        S -= S.max(-1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(-1, keepdims=True)
        out = np.einsum("bij,bjd->bid", S, X, optimize=True)
        return np.sum(out ** 2) + np.einsum("bii->", S)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 2)), r.standard_normal((3, 2)), r.standard_normal((2, 4, 3))
    return loss, make, dict(argnums=(0, 1, 2))


def lstsq_polynomial_trend_residuals_rcond():
    def loss(y, t):
        A = np.vander(t, 4, increasing=True)
        coef, res, rank, sv = np.linalg.lstsq(A, y, rcond=None)
        c2, res2, _, _ = scipy.linalg.lstsq(A[:, :2], y)
        return np.sum(coef ** 2) + res[0] + res2 + np.sum(c2)
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, 1, 10) + 0.01 * r.random(10)
        return np.sin(3 * t) + 0.1 * r.standard_normal(10), t
    return loss, make, dict(argnums=(0, 1))


def ocean_column_implicit_mixing_solve_banded_loop():
    n = 10
    def loss(kappa, T0, Q):
        T = T0.copy()
        dz, dt = 1.0, 0.5
        ab = np.zeros((3, n))
        for step in range(4):
            k = kappa * (1 + np.tanh(T[:-1] - T[1:]))
            ab[0, 1:] = -dt * k / dz ** 2
            ab[2, :-1] = -dt * k / dz ** 2
            ab[1] = 1.0
            ab[1, :-1] += dt * k / dz ** 2
            ab[1, 1:] += dt * k / dz ** 2
            T[0] += dt * Q
            T = scipy.linalg.solve_banded((1, 1), ab, T)
        return np.sum(T * np.arange(n)) + np.sum(T ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 + 0.1 * r.random(), np.linspace(20, 4, n) + 0.1 * r.random(n), 1.0 + r.random()
    return loss, make, dict(argnums=(0, 1, 2))


def haversine_facility_distances_logsumexp():
    def loss(fac, pts, w):
        lat1, lon1 = np.radians(pts[:, 0])[:, None], np.radians(pts[:, 1])[:, None]
        lat2, lon2 = np.radians(fac[:, 0])[None], np.radians(fac[:, 1])[None]
        a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
        d = 2 * 6371 * np.arcsin(np.sqrt(a))
        soft_min = -100 * scipy.special.logsumexp(-d / 100, axis=1)
        return np.sum(w * soft_min)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([[40.0, -3.0], [48.0, 2.0]]) + r.random((2, 2)), \
            np.array([[41.0, 2.0], [45.0, -1.0], [50.0, 4.0]]) + r.random((3, 2)), 1 + r.random(3)
    return loss, make, dict(argnums=(0, 1, 2))


def metapopulation_dispersal_matrix_power():
    def loss(D, r):
        n = len(r)
        M = np.diag(np.exp(r)) @ (np.eye(n) * (1 - D.sum(0)) + D)
        Mk = np.linalg.matrix_power(M, 5)
        N = Mk @ np.ones(n)
        lam = np.max(np.abs(np.linalg.eigvals(M)))
        return np.log(N.sum()) + lam
    def make(s):
        rng = np.random.default_rng(s)
        D = 0.05 * rng.random((3, 3))
        np.fill_diagonal(D, 0)
        return D, 0.1 * rng.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def butler_volmer_newton_scalar_current():
    def loss(eta, i0):
        F_RT = 38.9
        def f(i):
            return i - i0 * (np.exp(0.5 * F_RT * (eta - 0.01 * i)) - np.exp(-0.5 * F_RT * (eta - 0.01 * i)))
        def fp(i):
            return 1 + i0 * 0.5 * F_RT * 0.01 * (np.exp(0.5 * F_RT * (eta - 0.01 * i))
                                                 + np.exp(-0.5 * F_RT * (eta - 0.01 * i)))
        i = scipy.optimize.newton(f, np.zeros_like(eta), fprime=fp, tol=1e-13, maxiter=100)
        return np.sum(i * eta)
    def make(s):
        r = np.random.default_rng(s)
        return np.linspace(-0.05, 0.05, 5) + 0.001 * r.random(5), 1.0 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# Less travelled library calls inside whole programs


def rigid_body_rotation_from_rotvec_apply():
    from scipy.spatial.transform import Rotation
    def loss(rotvec, pts):
        R = Rotation.from_rotvec(rotvec)
        moved = R.apply(pts)
        M = R.as_matrix()
        q = R.as_quat()
        return np.sum((moved - pts[::-1]) ** 2) + np.trace(M) + q[0] ** 2
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.1, 0.2, 0.3]) + 0.05 * r.random(3), r.standard_normal((4, 3))
    return loss, make, dict(argnums=(0, 1))


def delaunay_mesh_area_weighted_gradient_energy():
    def loss(pts, u):
        tri = scipy.spatial.Delaunay(np.array(pts))
        s = tri.simplices
        a, b, c = pts[s[:, 0]], pts[s[:, 1]], pts[s[:, 2]]
        area = 0.5 * np.abs((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]))
        ub = u[s].mean(axis=1)
        hull = scipy.spatial.ConvexHull(pts)
        return np.sum(area * ub ** 2) + hull.volume
    def make(s):
        r = np.random.default_rng(0)
        pts = r.random((9, 2))
        return pts + 1e-3 * np.random.default_rng(s).random((9, 2)), r.standard_normal(9) + 0.1 * s
    return loss, make, dict(argnums=(0, 1))


def structured_to_unstructured_recfunctions():
    from numpy.lib import recfunctions as rfn
    dt = np.dtype([("a", float), ("b", float), ("c", float)])
    def loss(x):
        rec = np.zeros(len(x), dtype=dt)
        rec["a"] = x[:, 0]
        rec["b"] = x[:, 1] ** 2
        rec["c"] = np.sin(x[:, 2])
        u = rfn.structured_to_unstructured(rec)
        u *= np.array([1.0, 2.0, 3.0])
        back = rfn.unstructured_to_structured(u, dt)
        return np.sum(u ** 2) + np.sum(back["c"])
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal((4, 3)),)
    return loss, make, dict()


def circulant_solve_and_convolution_matrix():
    def loss(c, b):
        x = scipy.linalg.solve_circulant(c, b)
        C = scipy.linalg.circulant(c)
        T = scipy.linalg.convolution_matrix(c[:3], 5, mode="valid")
        return np.sum(x ** 2) + np.sum(C @ b) + np.sum(T @ b[:5])
    def make(s):
        r = np.random.default_rng(s)
        return np.array([4.0, 1.0, 0.5, 0.2, 0.1, 0.0]) + 0.1 * r.random(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1))


def null_space_orth_subspace_angles():
    def loss(A, B):
        N = scipy.linalg.null_space(A)
        P = N @ N.T
        Q = scipy.linalg.orth(B)
        ang = scipy.linalg.subspace_angles(B, A[:2].T)
        return np.sum(P * np.arange(16.0).reshape(4, 4)) + np.sum((Q @ Q.T) ** 2) + np.sum(ang)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 4)), r.standard_normal((4, 2))
    return loss, make, dict(argnums=(0, 1))


def continuous_lyapunov_controllability_gramian_polar():
    def loss(A, B):
        W = scipy.linalg.solve_continuous_lyapunov(A, -B @ B.T)
        U, P = scipy.linalg.polar(W)
        E = scipy.linalg.expm(A * 0.5)
        return np.trace(W) + np.sum(P) + np.sum(E ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return -2 * np.eye(3) + 0.3 * r.standard_normal((3, 3)), r.standard_normal((3, 1))
    return loss, make, dict(argnums=(0, 1))


def khatri_rao_cp_als_step_lstsq():
    def loss(A, B, X):
        KR = scipy.linalg.khatri_rao(A, B)
        C, *_ = np.linalg.lstsq(KR, X.reshape(-1, X.shape[-1]) if False else X, rcond=None)
        return np.sum((KR @ C - X) ** 2) + np.sum(C ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 2)), r.standard_normal((4, 2)), r.standard_normal((12, 5))
    return loss, make, dict(argnums=(0, 1, 2))


def firwin_traced_cutoff_and_filtfilt_padtype_even():
    def loss(x):
        h = scipy.signal.firwin(9, 0.3, window="hamming")
        y = scipy.signal.filtfilt(h, [1.0], x, padtype="even", padlen=8)
        w, H = scipy.signal.freqz(h, worN=8)
        return np.sum(y ** 2) + np.sum(np.abs(np.convolve(y, h, mode="valid")))
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal(30),)
    return loss, make, dict()


def lsim_continuous_state_space_response():
    def loss(k, u):
        A = np.array([[0.0, 1.0], [-k[0], -k[1]]])
        B = np.array([[0.0], [1.0]])
        C = np.array([[1.0, 0.0]])
        t = np.linspace(0, 2, 21)
        tout, y, x = scipy.signal.lsim((A, B, C, np.zeros((1, 1))), u, t)
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([4.0, 1.0]) + 0.1 * r.random(2), r.standard_normal(21)
    return loss, make, dict(argnums=(0, 1))


def czt_zoom_spectrum_peak_refinement():
    def loss(x):
        Z = scipy.signal.zoom_fft(x, [0.1, 0.3], m=16, fs=1.0)
        P = np.abs(Z) ** 2
        C = scipy.signal.czt(x, m=8)
        return np.sum(P * np.arange(16)) / np.sum(P) + np.sum(np.abs(C))
    def make(s):
        r = np.random.default_rng(s)
        return (np.cos(2 * np.pi * 0.2 * np.arange(32)) + 0.1 * r.standard_normal(32),)
    return loss, make, dict()


def wiener_medfilt2d_order_filter_denoise():
    def loss(img):
        w = scipy.signal.wiener(img, (3, 3))
        m = scipy.signal.medfilt2d(img, 3)
        o = scipy.signal.order_filter(img, np.ones((3, 3)), 4)
        return np.sum(w ** 2) + np.sum(m * o)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random((7, 7)),)
    return loss, make, dict()


def ndimage_fourier_gaussian_shift_filters():
    def loss(img, sh):
        F = np.fft.fft2(img)
        G = scipy.ndimage.fourier_gaussian(F, sigma=1.0)
        S = scipy.ndimage.fourier_shift(G, (sh[0], sh[1]))
        out = np.fft.ifft2(S).real
        return np.sum(out ** 2 * np.arange(64.0).reshape(8, 8))
    def make(s):
        r = np.random.default_rng(s)
        return r.random((8, 8)), np.array([0.5, -1.2]) + 0.1 * r.random(2)
    return loss, make, dict(argnums=(0, 1))


def grey_morphology_tophat_laplace_prewitt():
    def loss(img):
        d = scipy.ndimage.grey_dilation(img, size=(3, 3))
        e = scipy.ndimage.grey_erosion(img, size=(3, 3))
        th = scipy.ndimage.white_tophat(img, size=3)
        lap = scipy.ndimage.gaussian_laplace(img, 1.0)
        pw = scipy.ndimage.prewitt(img, axis=0)
        m1 = scipy.ndimage.maximum_filter1d(img, 3, axis=1)
        u1 = scipy.ndimage.uniform_filter1d(img, 4, axis=0, mode="mirror")
        return np.sum((d - e) ** 2) + np.sum(th) + np.sum(lap ** 2) + np.sum(pw * m1) + np.sum(u1 ** 3)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random((8, 8)),)
    return loss, make, dict(step=1e-6)


def geometric_transform_and_spline_filter1d():
    def loss(img):
        def mapping(c):
            return (c[0] * 0.9 + 0.3, c[1] * 1.1 - 0.2)
        w = scipy.ndimage.geometric_transform(img, mapping, order=1, mode="nearest")
        sf = scipy.ndimage.spline_filter1d(img, order=3, axis=0)
        return np.sum(w ** 2) + np.sum(sf ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random((6, 6)),)
    return loss, make, dict()


def generic_filter_local_entropy_callable():
    def loss(img):
        def local_energy(v):
            return np.sum(v ** 2) - v.mean() ** 2
        out = scipy.ndimage.generic_filter(img, local_energy, size=3, mode="reflect")
        return np.sum(out * img)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random((6, 6)),)
    return loss, make, dict()


def interp1d_cubic_barycentric_krogh():
    def loss(y, xq):
        x = np.linspace(0, 1, 7)
        f = scipy.interpolate.interp1d(x, y, kind="cubic")
        b = scipy.interpolate.BarycentricInterpolator(x, y, rng=0)
        k = scipy.interpolate.KroghInterpolator(x[:4], y[:4])
        return np.sum(f(xq) ** 2) + np.sum(b(xq)) + np.sum(k(xq * 0.5) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(np.linspace(0, 3, 7)) + 0.1 * r.random(7), np.array([0.15, 0.45, 0.8]) + 0.01 * r.random(3)
    return loss, make, dict(argnums=(0, 1))


def rbf_interpolator_thin_plate_terrain():
    def loss(vals, xq):
        rng = np.random.default_rng(2)
        pts = rng.random((10, 2))
        rbf = scipy.interpolate.RBFInterpolator(pts, vals, kernel="thin_plate_spline", smoothing=1e-3)
        return np.sum(rbf(xq) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(10), r.random((4, 2))
    return loss, make, dict(argnums=(0, 1))


def clough_tocher_scattered_surface():
    pts = np.random.default_rng(4).random((12, 2))
    def loss(vals):
        ip = scipy.interpolate.CloughTocher2DInterpolator(pts, vals)
        g = np.linspace(0.3, 0.7, 4)
        X, Y = np.meshgrid(g, g)
        z = ip(X, Y)
        return np.nansum(z ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (np.sin(3 * pts[:, 0]) + pts[:, 1] + 0.1 * r.random(12),)
    return loss, make, dict()


def splprep_parametric_curve_length():
    def loss(pts):
        tck, u = scipy.interpolate.splprep([pts[:, 0], pts[:, 1]], s=0, k=3)
        uu = np.linspace(0, 1, 20)
        dx, dy = scipy.interpolate.splev(uu, tck, der=1)
        return np.trapezoid(np.sqrt(dx ** 2 + dy ** 2), uu)
    def make(s):
        r = np.random.default_rng(s)
        t = np.linspace(0, np.pi, 6)
        return (np.column_stack([np.cos(t), np.sin(t)]) + 0.01 * r.random((6, 2)),)
    return loss, make, dict(jvp=False)


def lsq_univariate_spline_fixed_knots():
    def loss(y):
        x = np.linspace(0, 1, 20)
        spl = scipy.interpolate.LSQUnivariateSpline(x, y, [0.25, 0.5, 0.75], k=3)
        return np.sum(spl(x) ** 2) + spl.integral(0, 1) + np.sum(spl.derivative()(x) ** 2) * 1e-2
    def make(s):
        r = np.random.default_rng(s)
        return (np.sin(6 * np.linspace(0, 1, 20)) + 0.1 * r.standard_normal(20),)
    return loss, make, dict()


def cubic_hermite_ppoly_from_derivatives():
    def loss(y, dy):
        x = np.array([0.0, 0.4, 1.0, 1.5])
        h = scipy.interpolate.CubicHermiteSpline(x, y, dy)
        p = scipy.interpolate.BPoly.from_derivatives(x, np.column_stack([y, dy]))
        xq = np.linspace(0, 1.5, 9)
        return np.sum(h(xq) ** 2) + np.sum(p(xq)) + h.integrate(0, 1.5)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(4), r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))


def cumulative_simpson_and_romb_tplquad():
    def loss(p):
        x = np.linspace(0, 1, 17)
        y = np.exp(-p[0] * x) * np.sin(p[1] * x)
        c = scipy.integrate.cumulative_simpson(y, x=x, initial=0)
        r = scipy.integrate.romb(y, dx=x[1] - x[0])
        return np.sum(c) + r
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([1.0, 3.0]) + 0.1 * r.random(2),)
    return loss, make, dict()


def lsq_linear_bounded_unmixing():
    def loss(E, y):
        res = scipy.optimize.lsq_linear(E, y, bounds=(0, np.inf), tol=1e-12, lsmr_tol="auto")
        return np.sum(res.x * np.arange(1, 4)) + res.cost
    def make(s):
        r = np.random.default_rng(s)
        E = r.random((8, 3))
        return E, E @ np.array([0.5, 0.3, 0.2]) + 0.01 * r.standard_normal(8)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def minimize_newton_cg_trust_exact_hessian():
    def loss(a):
        def f(x):
            return np.sum(a * (x - 1) ** 4) + np.sum(x ** 2)
        def g(x):
            return 4 * a * (x - 1) ** 3 + 2 * x
        def H(x):
            return np.diag(12 * a * (x - 1) ** 2 + 2)
        r1 = scipy.optimize.minimize(f, np.zeros(3), jac=g, hess=H, method="trust-exact", options=dict(gtol=1e-12))
        r2 = scipy.optimize.minimize(f, np.zeros(3), jac=g, hess=H, method="Newton-CG", options=dict(xtol=1e-12))
        return r1.fun + np.sum(r2.x ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (1 + r.random(3),)
    return loss, make, dict(jvp=False, rtol=1e-4)


def root_lm_and_fsolve_full_output():
    def loss(p):
        def F(x):
            return [x[0] + 0.5 * (x[0] - x[1]) ** 3 - p[0], 0.5 * (x[1] - x[0]) ** 3 + x[1] - p[1]]
        sol = scipy.optimize.root(F, [0.0, 0.0], method="lm", options=dict(xtol=1e-14))
        x2, info, ier, msg = scipy.optimize.fsolve(F, [0.0, 0.0], full_output=True, xtol=1e-13)
        return np.sum(sol.x ** 2) + x2[0]
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([1.0, 0.5]) + 0.1 * r.random(2),)
    return loss, make, dict(jvp=False, rtol=1e-4)


def toms748_ridder_bisect_roots():
    def loss(c):
        f = lambda x, c: x ** 3 + c * x - 1
        r1 = scipy.optimize.toms748(f, 0, 2, args=(c,), xtol=1e-14)
        r2 = scipy.optimize.ridder(f, 0, 2, args=(c,), xtol=1e-14)
        r3 = scipy.optimize.bisect(f, 0, 2, args=(c,), xtol=1e-14)
        return r1 + r2 ** 2 + r3 ** 3
    def make(s):
        return (1.0 + 0.1 * s,)
    return loss, make, dict(jvp=False, rtol=1e-4)


def stats_descriptive_pipeline_zscore_skew_kurtosis():
    def loss(x, y):
        z = scipy.stats.zscore(x)
        sk = scipy.stats.skew(x)
        ku = scipy.stats.kurtosis(y)
        tm = scipy.stats.trim_mean(x, 0.1)
        gm = scipy.stats.gmean(np.abs(y) + 1)
        r, _ = scipy.stats.pearsonr(x, y)
        lr = scipy.stats.linregress(x, y)
        m3 = scipy.stats.moment(y, order=3)
        return np.sum(z ** 3) + sk + ku + tm + gm + r + lr.slope + m3
    def make(s):
        r = np.random.default_rng(s)
        x = r.standard_normal(15)
        return x, 0.5 * x + r.standard_normal(15)
    return loss, make, dict(argnums=(0, 1))


def wasserstein_energy_entropy_distances():
    def loss(u, p):
        v = np.array([0.1, 0.5, 0.9, 1.4])
        w = scipy.stats.wasserstein_distance(u, v)
        e = scipy.stats.energy_distance(u, v)
        H = scipy.stats.entropy(p / p.sum(), np.full(4, 0.25))
        return w + e + H
    def make(s):
        r = np.random.default_rng(s)
        return r.random(5) * 1.5, 1 + r.random(4)
    return loss, make, dict(argnums=(0, 1))


def binned_statistic_profile_and_poisson_logpmf():
    def loss(x, lam):
        stat, edges, num = scipy.stats.binned_statistic(x, x ** 2, statistic="mean", bins=3, range=(0, 1))
        counts = np.bincount(num - 1, minlength=3)
        ll = scipy.stats.poisson.logpmf(counts, lam).sum()
        return np.nansum(stat) + ll + scipy.stats.nbinom.logpmf(2, 3, 1 / (1 + lam[0]))
    def make(s):
        r = np.random.default_rng(0)
        return 0.05 + 0.9 * r.random(12) + 0.001 * s, 2 + np.random.default_rng(s).random(3)
    return loss, make, dict(argnums=(0, 1))


def wishart_dirichlet_multivariate_t_logpdf():
    def loss(S, alpha, x):
        Sig = S @ S.T + np.eye(2)
        l1 = scipy.stats.wishart.logpdf(np.array([[2.0, 0.3], [0.3, 1.0]]), df=4, scale=Sig)
        l2 = scipy.stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), alpha)
        l3 = scipy.stats.multivariate_t.logpdf(x, loc=np.zeros(2), shape=Sig, df=5)
        return l1 + l2 + np.sum(l3)
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 * r.standard_normal((2, 2)), 1 + r.random(3), r.standard_normal((3, 2))
    return loss, make, dict(argnums=(0, 1, 2))


def special_functions_physics_mix():
    def loss(x):
        k = scipy.special.ellipk(x[0] * 0.5) + scipy.special.ellipe(x[0] * 0.5)
        w = scipy.special.lambertw(x[1]).real
        z = scipy.special.zeta(2.5, 1 + x[2])
        pg = scipy.special.polygamma(1, 1 + x[2])
        h = scipy.special.hyp2f1(0.5, 1.0, 1.5, 0.3 * x[0])
        sj = scipy.special.spherical_jn(2, x[1] + 1.0)
        hub = scipy.special.huber(0.5, x).sum() + scipy.special.pseudo_huber(0.5, x).sum()
        kl = scipy.special.kl_div(x + 1, 2.0).sum() + scipy.special.rel_entr(x + 1, 1.5).sum()
        sm = scipy.special.log_softmax(x) @ scipy.special.softmax(x)
        return k + w + z + pg + h + sj + hub + kl + sm + scipy.special.xlog1py(x[0], x[1]) + scipy.special.logit(0.3 + 0.1 * x[2])
    def make(s):
        r = np.random.default_rng(s)
        return (np.array([0.4, 0.7, 0.3]) + 0.05 * r.random(3),)
    return loss, make, dict()


def block_kron_multi_dot_assembly():
    def loss(a, b):
        A = np.block([[np.diag(a), np.outer(a, b)], [np.outer(b, a), np.eye(len(b)) * 3]])
        K = np.kron(np.eye(2), A[:2, :2])
        s = np.linalg.cond(A) * 0 + np.linalg.multi_dot([a, A[:2, :2], a])
        return s + np.sum(K) + np.sum(np.linalg.inv(A[:2, :2]))
    def make(s):
        r = np.random.default_rng(s)
        return 2 + r.random(2), 0.3 * r.standard_normal(2)
    return loss, make, dict(argnums=(0, 1))


def insert_delete_tile_choose_compress():
    def loss(x):
        y = np.insert(x, 2, x[0] * 2)
        y = np.delete(y, [0, 4])
        t = np.tile(y, 2)
        c = np.choose(np.array([0, 1, 0, 1]), [t[:4], t[4:8]])
        k = np.compress(x > -10, x)
        e = np.extract(np.arange(len(x)) % 2 == 0, x)
        z = x.copy()
        np.place(z, np.arange(len(x)) % 2 == 1, [1.0, 2.0])
        return np.sum(c ** 2) + np.sum(k) + np.sum(e ** 3) + np.sum(z ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal(6),)
    return loss, make, dict()


def fast_hankel_transform_fht():
    def loss(a):
        r = np.logspace(-2, 2, 16)
        f = r ** 2 * np.exp(-a * r ** 2)
        dln = np.log(r[1] / r[0])
        F = scipy.fft.fht(f, dln, mu=0.5)
        return np.sum(F ** 2)
    def make(s):
        return (0.5 + 0.1 * s,)
    return loss, make, dict()


def dctn_idctn_compression_quantization_soft():
    def loss(img):
        C = scipy.fft.dctn(img, norm="ortho")
        mask = np.add.outer(np.arange(8), np.arange(8)) < 6
        C *= mask
        C = np.sign(C) * np.maximum(np.abs(C) - 0.05, 0)
        rec = scipy.fft.idctn(C, norm="ortho")
        return np.sum((rec - img) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.random((8, 8)),)
    return loss, make, dict()


def sparse_spsolve_triangular_gauss_seidel_sweeps():
    n = 8
    def loss(d, b):
        A = scipy.sparse.diags([-1.0 * np.ones(n - 1), d, -1.0 * np.ones(n - 1)], [-1, 0, 1], format="csr")
        L = scipy.sparse.tril(A, format="csr")
        U = scipy.sparse.triu(A, k=1, format="csr")
        x = np.zeros(n)
        for _ in range(5):
            x = scipy.sparse.linalg.spsolve_triangular(L, b - U @ x, lower=True)
        return np.sum(x ** 2) + scipy.sparse.linalg.norm(A, "fro")
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def sparse_lgmres_gcrotmk_tfqmr_convection():
    n = 8
    def loss(v, b):
        A = scipy.sparse.diags([-1 - v, 2.5 * np.ones(n), -1 + v], [-1, 0, 1], shape=(n, n), format="csr") if False else \
            scipy.sparse.diags([(-1 - v) * np.ones(n - 1), 2.5 * np.ones(n), (-1 + v) * np.ones(n - 1)], [-1, 0, 1], format="csr")
        x1, _ = scipy.sparse.linalg.lgmres(A, b, rtol=1e-12, atol=0)
        x2, _ = scipy.sparse.linalg.gcrotmk(A, b, rtol=1e-12, atol=0)
        x3, _ = scipy.sparse.linalg.tfqmr(A, b, rtol=1e-12, atol=0)
        return x1 @ b + np.sum(x2 ** 2) + np.sum(x3)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 + 0.1 * r.random(), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def sparse_svds_eigs_and_expm_inv():
    rows, cols = np.nonzero(np.random.default_rng(1).random((5, 5)) > 0.4)
    def loss(vals):
        A = scipy.sparse.csc_matrix((vals, (rows, cols)), shape=(5, 5)) \
            + scipy.sparse.diags(np.arange(1.0, 6.0), format="csc")
        u, s, vt = scipy.sparse.linalg.svds(A, k=2, random_state=0)
        E = scipy.sparse.linalg.expm(A * 0.1)
        Ai = scipy.sparse.linalg.inv(A + 5 * scipy.sparse.identity(5, format="csc"))
        return np.sum(s) + E.sum() + Ai.sum()
    def make(s):
        r = np.random.default_rng(s)
        return (r.random(len(rows)),)
    return loss, make, dict()


def linear_operator_matmat_aslinearoperator_lsmr():
    def loss(A, b):
        op = scipy.sparse.linalg.aslinearoperator(A)
        D = scipy.sparse.linalg.LinearOperator((6, 6), matvec=lambda x: 0.5 * x, rmatvec=lambda x: 0.5 * x)
        M = op.T @ op + D
        x, *_ = scipy.sparse.linalg.cg(M, A.T @ b, rtol=1e-12, atol=0)
        y = scipy.sparse.linalg.lsmr(op, b, atol=1e-14, btol=1e-14, maxiter=100)[0]
        return x @ x + np.sum(op.matmat(np.eye(6)[:, :2]) ** 2) + y.sum()
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((8, 6)), r.standard_normal(8)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def histogram_density_weights_and_cumulative_sum():
    def loss(w, x):
        h, edges = np.histogram(x, bins=4, range=(0, 1), weights=w, density=True)
        cs = np.cumulative_sum(h * np.diff(edges), include_initial=True)
        return np.sum(cs ** 2) + np.interp(0.37, np.linspace(0, 1, 5), cs)
    def make(s):
        r = np.random.default_rng(0)
        return 1 + np.random.default_rng(s).random(12), r.random(12)
    return loss, make, dict()


def apply_along_axis_and_vectorized_piecewise_select():
    def loss(X):
        def row(r):
            return np.array([r.max() - r.min(), np.sum(r ** 2)])
        A = np.apply_along_axis(row, 1, X)
        P = np.piecewise(X, [X < 0, X >= 0], [lambda t: t ** 2, lambda t: np.sin(t)])
        S = np.select([X < -0.5, X > 0.5], [X * 2, X ** 3], default=0.1 * X)
        return np.sum(A ** 2) + np.sum(P) + np.sum(S)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal((4, 5)),)
    return loss, make, dict()


def gradient_with_coordinates_trapezoid_cross():
    def loss(y, x):
        dy = np.gradient(y, x, edge_order=2)
        area = np.trapezoid(y ** 2, x)
        v = np.stack([y[:3], x[:3], dy[:3]], axis=1)
        c = np.cross(v[0], v[1])
        return np.sum(dy ** 2) + area + c @ v[2]
    def make(s):
        r = np.random.default_rng(s)
        x = np.cumsum(0.1 + 0.05 * r.random(8))
        return np.sin(x), x
    return loss, make, dict(argnums=(0, 1))


PROGRAMS = [obj for name, obj in list(globals().items())
            if callable(obj) and getattr(obj, "__module__", None) == __name__
            and not name.startswith(("check", "test", "_"))]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_research_program(program):
    check(program)
