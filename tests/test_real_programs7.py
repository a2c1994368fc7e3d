"""Whole research programs in fields and code shapes the earlier files leave out, written the
way their scientists write NumPy and SciPy: optics (Fresnel beam propagation by FFT), acoustics,
Hartree-Fock SCF with a generalized ``eigh``, Cahn-Hilliard by semi-implicit FFT steps, shallow
water, SPH, traffic flow (LWR with a Godunov flux), a hydrological bucket model, a latitudinal
energy-balance climate model, pharmacokinetics (``solve_ivp`` with an in-place right-hand side,
``odeint``), power-flow Newton steps solved with ``spsolve``, FEM assembled in ``lil`` and
``coo`` matrices, tomography by sums of ``ndimage.rotate``, image registration, audio DSP
(``lfilter``, ``sosfilt``, ``stft``, ``filtfilt``, ``upfirdn``), Gaussian processes with
``cho_factor``, MCMC, value iteration, Ising mean field, tandem queues, portfolios, survival
(Cox, Kaplan-Meier and Weibull), seismic convolution, crystallographic structure factors; sparse
matrices scaled in place (``A.data *= s``, ``setdiag``), ``bmat``, ``LinearOperator`` with
``lsqr``, ``eigsh``, ``splu``, ``expm_multiply``, ``gmres``; ndimage and signal filters,
interpolators, ``cKDTree``, ``pdist``, distributions, matrix functions; and the shapes of
the code: classes with ``step()`` methods, ``functools.partial``, generators, dicts of state,
``out=`` everywhere, work buffers reused across calls, ``np.ma``, ``np.polynomial`` classes and
basis conversions, ``np.vectorize``, ``np.fromiter``, ``np.piecewise``/``np.select``,
``ufunc.at``/``reduceat``/``outer``, NumPy 2's array-API functions; and DCT Poisson solvers,
batched small solves, ``solve_discrete_are`` and ``expm_frechet``, an assignment then a traced
cost, shortest paths over traced weights, ``quad_vec``/``dblquad``, ``rng.normal`` of traced
location and scale, ``freqz`` and ``lfilter`` of a traced denominator, ``BSpline`` of traced
coefficients, a solver object growing its history with ``np.append``; SLSQP and trust-constr
minima, LSODA and ``odeint`` with ``Dfun``, ``bicgstab`` preconditioned by ``spilu``, CSR
matrix-vector products by hand over ``indptr``, ``dok`` and ``lil`` assembly stacked into blocks,
``diags_array``, traced kernels of ``correlate`` and ``convolve``, traced ``sos`` sections,
``interpn``, ``RectBivariateSpline`` (a Hessian too), ``LinearNDInterpolator``, information
measures of ``scipy.special``, shape parameters of distributions, Sylvester, Schur, LDL and
banded eigenproblems, matrix functions, ``lstsq``, ``tensorsolve``, ``hfft`` and ``fftn``; and
single in-place functions as they are lifted from public projects: Numerical Recipes' tridag,
Crank-Nicolson and banded Crout solvers, Savitzky-Golay and bilateral filters by hand, a
Cholesky rank-one update, LU with row swaps, Givens QR, modified Gram-Schmidt, Jacobi
rotations, Lanczos, Runge-Kutta, Fehlberg, Adams-Bashforth and leapfrog steppers with
preallocated stages, conjugate gradients and SOR sweeps, Kalman updates with ``P -= K S Kᵀ``,
particle pushes with ``np.add.at``, finite-volume and upwind flux loops, running medians,
CSR products by hand, Floyd-Warshall and Bellman-Ford, banded DTW, Viterbi, HMM forward, Smith-Waterman
and Needleman-Wunsch tables, histogram equalisation, Sinkhorn, Adam, GARCH, Romberg, a radix-2
FFT, Newton with deflation; and code shapes: ``np.nditer(op_flags=["readwrite"])``,
``np.ndenumerate``, ``a.flat``/``np.put``/``np.fill_diagonal``, writes through ``A.T`` and
``x[::-1]``, ``out=`` of ``matmul``, ``cumsum``, ``divide(where=)`` and ``einsum``, structured
arrays, LAPACK's ``overwrite_a``/``overwrite_b``.

Each is checked as ``test_real_programs5`` checks its programs: NumPy's value bit for bit, the
gradient against finite differences, the caller's arrays bit for bit, ``replay=True`` over four
calls bit for bit against tracing, the tangent against the gradient and Hessian-vector
products against finite differences of the gradient (``hvp=False`` where a step is
differentiated to first order only: events of ``solve_ivp``, a traced matrix of
``affine_transform``, ``lsqr``, constrained minima, ``gamma.cdf`` in its shape; and where an
argument is an integer array)."""

import functools

import numpy as np
import numpy.polynomial as P
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

from tests.test_real_programs5 import check_forward_and_second_order, check_program


def optics_beam_propagation_fft():
    n, L, wl = 64, 2e-3, 633e-9
    x = np.linspace(-L / 2, L / 2, n, endpoint=False)
    X, Y = np.meshgrid(x, x, indexing="ij")
    fx = np.fft.fftfreq(n, d=L / n)
    FX, FY = np.meshgrid(fx, fx, indexing="ij")
    k = 2 * np.pi / wl
    def loss(phase, w0):
        field = np.exp(-(X ** 2 + Y ** 2) / w0 ** 2).astype(complex)
        field *= np.exp(1j * phase)
        H = np.exp(1j * k * 0.05 * np.sqrt(1 - (wl * FX) ** 2 - (wl * FY) ** 2))
        for _ in range(3):
            spec = np.fft.fft2(field)
            spec *= H
            field = np.fft.ifft2(spec)
        I = np.abs(field) ** 2
        return np.sum(I * (X ** 2 + Y ** 2)) / np.sum(I)
    def make(s):
        r = np.random.default_rng(s)
        return 0.3 * r.standard_normal((n, n)), 3e-4 * (1 + 0.1 * r.random())
    return loss, make, dict(argnums=(0, 1), rtol=1e-4, step=1e-6)


def acoustics_room_modes_eigh():
    n = 12
    def loss(c):
        A = np.zeros((n, n))
        for i in range(n):
            A[i, i] = 2.0 * c[i] ** 2
            if i + 1 < n:
                A[i, i + 1] = A[i + 1, i] = -c[i] * c[i + 1]
        w, V = scipy.linalg.eigh(A)
        freqs = np.sqrt(w[:4]) / (2 * np.pi)
        return np.sum(freqs) + np.sum(V[:, 0] ** 4)
    return loss, lambda s: (340 + 20 * np.random.default_rng(s).random(n),), dict(rtol=1e-4)


def hartree_fock_scf_eigh():
    n = 6
    rng = np.random.default_rng(42)
    M = rng.standard_normal((n, n)); S = np.eye(n) + 0.05 * (M + M.T)
    eri = rng.standard_normal((n, n, n, n)) * 0.02
    eri = eri + eri.transpose(1, 0, 2, 3); eri = eri + eri.transpose(0, 1, 3, 2)
    eri = eri + eri.transpose(2, 3, 0, 1)
    nocc = 2
    def loss(h):
        H = 0.5 * (h + h.T)
        D = np.zeros((n, n))
        for it in range(8):
            J = np.einsum("pqrs,rs->pq", eri, D)
            K = np.einsum("prqs,rs->pq", eri, D)
            F = H + 2 * J - K
            e, C = scipy.linalg.eigh(F, S)
            Cocc = C[:, :nocc]
            D_new = Cocc @ Cocc.T
            D *= 0.5
            D += 0.5 * D_new
        E = np.einsum("pq,pq->", D, H + F)
        return E
    def make(s):
        r = np.random.default_rng(s)
        return np.diag(np.arange(n) * 1.0) + 0.1 * r.standard_normal((n, n)),
    return loss, make, dict(rtol=1e-4)


def cahn_hilliard_fft_semi_implicit():
    n = 32
    k = 2 * np.pi * np.fft.fftfreq(n, d=1.0 / n)
    K2 = k[:, None] ** 2 + k[None, :] ** 2
    def loss(c0, eps):
        c = c0.copy()
        dt = 1e-4
        denom = 1 + dt * eps ** 2 * K2 ** 2
        for _ in range(10):
            mu = c ** 3 - c
            ch = np.fft.fft2(c); mh = np.fft.fft2(mu)
            ch -= dt * K2 * mh
            ch /= denom
            c[...] = np.fft.ifft2(ch).real
        return np.mean(c ** 2) + np.var(c)
    def make(s):
        return 0.1 * np.random.default_rng(s).standard_normal((n, n)), 0.05 + 0.01 * s
    return loss, make, dict(argnums=(0, 1))


def shallow_water_lax_friedrichs_1d():
    n, g = 60, 9.81
    def loss(h0, b):
        h = h0.copy(); hu = np.zeros(n)
        dx = 1.0 / n; dt = 0.2 * dx / np.sqrt(g * h.max())
        F = np.empty((2, n)); U = np.empty((2, n))
        for _ in range(25):
            U[0] = h; U[1] = hu
            F[0] = hu
            F[1] = hu ** 2 / h + 0.5 * g * h ** 2
            Un = U.copy()
            Un[:, 1:-1] = 0.5 * (U[:, 2:] + U[:, :-2]) - dt / (2 * dx) * (F[:, 2:] - F[:, :-2])
            Un[1, 1:-1] -= dt * g * h[1:-1] * (b[2:] - b[:-2]) / (2 * dx)
            Un[:, 0] = Un[:, 1]; Un[:, -1] = Un[:, -2]
            h, hu = Un[0], Un[1]
        return np.sum(h ** 2) + np.sum(hu)
    def make(s):
        r = np.random.default_rng(s)
        x = np.linspace(0, 1, n)
        return 1 + 0.2 * np.exp(-((x - 0.4) / 0.1) ** 2) + 0.01 * r.random(n), 0.05 * np.sin(3 * x + s)
    return loss, make, dict(argnums=(0, 1))


def sph_density_pressure():
    def kernel(r, h):
        q = r / h
        return np.where(q < 1, (1 - q) ** 3, 0.0) * 10 / (np.pi * h ** 2)
    def loss(pos, vel):
        h = 0.4; m = 0.1
        x = pos.copy(); v = vel.copy()
        for _ in range(6):
            d = x[:, None, :] - x[None, :, :]
            r = np.sqrt(np.sum(d ** 2, axis=-1) + 1e-12)
            W = kernel(r, h)
            rho = m * W.sum(axis=1)
            p = 2.0 * (rho - 1.0)
            q = r / h
            dW = np.where(q < 1, -3 * (1 - q) ** 2 / h, 0.0) * 10 / (np.pi * h ** 2)
            coef = -m * (p[:, None] / rho[:, None] ** 2 + p[None, :] / rho[None, :] ** 2) * dW / r
            np.fill_diagonal(coef, 0.0)
            a = np.einsum("ij,ijk->ik", coef, d)
            v += 0.01 * a
            x += 0.01 * v
        return np.sum(x ** 2) + np.sum(rho)
    def make(s):
        r = np.random.default_rng(s)
        g = np.stack(np.meshgrid(np.arange(4), np.arange(4)), -1).reshape(-1, 2) * 0.25
        return g + 0.02 * r.standard_normal(g.shape), 0.1 * r.standard_normal(g.shape)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def traffic_lwr_godunov():
    vmax, rmax = 1.0, 1.0
    def flux(r):
        return vmax * r * (1 - r / rmax)
    def godunov(rl, rr):
        rc = rmax / 2
        fl, fr = flux(rl), flux(rr)
        demand = np.where(rl < rc, fl, flux(rc))
        supply = np.where(rr > rc, fr, flux(rc))
        return np.minimum(demand, supply)
    def loss(rho0):
        rho = rho0.copy(); dx = 0.05; dt = 0.02
        F = np.empty(len(rho) - 1)
        for _ in range(40):
            F[:] = godunov(rho[:-1], rho[1:])
            rho[1:-1] -= dt / dx * (F[1:] - F[:-1])
        return np.sum(rho * np.arange(len(rho))) * dx
    def make(s):
        x = np.linspace(0, 1, 50)
        return 0.3 + 0.4 * np.exp(-((x - 0.3 - 0.05 * s) / 0.1) ** 2),
    return loss, make, {}


def hydrology_bucket_model():
    def loss(params, precip, pet):
        smax, k, beta = params
        S = np.zeros(len(precip) + 1); Q = np.empty(len(precip))
        S[0] = 0.5 * smax
        for t in range(len(precip)):
            frac = (S[t] / smax) ** beta
            runoff = precip[t] * frac
            et = pet[t] * min(1.0, S[t] / (0.7 * smax))
            S[t + 1] = S[t] + precip[t] - runoff - et
            base = k * S[t + 1]
            S[t + 1] -= base
            Q[t] = runoff + base
        return np.sum((Q - 0.3 * precip) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([100.0, 0.05, 1.5 + 0.1 * s]), 5 * r.gamma(0.5, 2, 40), 1 + r.random(40)
    return loss, make, dict(argnums=(0,))


def climate_energy_balance_latitude():
    n = 30
    xs = np.linspace(-1, 1, n)  # the sine of latitude, uniform
    dx = xs[1] - xs[0]
    def loss(D, A):
        T = 10 * np.ones(n)
        S = 1365 / 4 * (1 - 0.482 * (3 * xs ** 2 - 1) / 2)
        lap = np.empty(n)
        for _ in range(60):
            albedo = 0.3 + 0.3 * 0.5 * (1 + np.tanh(-(T + 10) / 3))
            flux = (1 - xs[:-1] ** 2) * (T[1:] - T[:-1]) / dx
            lap[0] = flux[0] / dx; lap[-1] = -flux[-1] / dx
            lap[1:-1] = (flux[1:] - flux[:-1]) / dx
            T += 0.003 * (S * (1 - albedo) - (A + 2.1 * T) + D * lap)
        return np.mean(T) + np.std(T)
    return loss, lambda s: (0.6 + 0.05 * s, 203.0 + s), dict(argnums=(0, 1))


def pk_two_compartment_solve_ivp():
    t_obs = np.linspace(0.5, 12, 10)
    def loss(theta, conc):
        ka, ke, k12, k21 = np.exp(theta)
        dy = np.empty(3)
        def rhs(t, y):
            dy[0] = -ka * y[0]
            dy[1] = ka * y[0] - (ke + k12) * y[1] + k21 * y[2]
            dy[2] = k12 * y[1] - k21 * y[2]
            return dy
        # (rtol 1e-6: 236 right-hand sides instead of 548 at 1e-8; the program is the same,
        # and forward_rtol follows the solver's tolerance, as in odeint_sir_fit)
        sol = scipy.integrate.solve_ivp(rhs, (0, 12), np.array([100.0, 0, 0]), t_eval=t_obs,
                                        rtol=1e-6, atol=1e-6)
        pred = sol.y[1] / 10.0
        return np.sum((np.log(pred) - np.log(conc)) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.log(np.array([1.0, 0.2, 0.3, 0.1])) + 0.05 * r.standard_normal(4), 2 + r.random(10)
    return loss, make, dict(argnums=(0,), rtol=1e-3, forward_rtol=1e-5)


def power_flow_newton_sparse():
    nb = 5
    lines = [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4), (1, 3)]
    def loss(P, Q):
        Y = scipy.sparse.lil_matrix((nb, nb), dtype=complex)
        for i, j in lines:
            y = 1 / (0.02 + 0.1j)
            Y[i, i] += y; Y[j, j] += y; Y[i, j] -= y; Y[j, i] -= y
        Y = Y.tocsr()
        G, B = Y.real.toarray(), Y.imag.toarray()
        th = np.zeros(nb); V = np.ones(nb)
        for _ in range(6):
            Pc = V * ((G * np.cos(th[:, None] - th[None, :]) + B * np.sin(th[:, None] - th[None, :])) @ V)
            Qc = V * ((G * np.sin(th[:, None] - th[None, :]) - B * np.cos(th[:, None] - th[None, :])) @ V)
            mis = np.concatenate([P[1:] - Pc[1:], Q[1:] - Qc[1:]])
            J = np.zeros((2 * (nb - 1), 2 * (nb - 1)))
            eps = 1e-7
            x = np.concatenate([th[1:], V[1:]])
            for c in range(len(x)):
                th2 = th.copy(); V2 = V.copy()
                if c < nb - 1: th2[c + 1] += eps
                else: V2[c - nb + 2] += eps
                P2 = V2 * ((G * np.cos(th2[:, None] - th2[None, :]) + B * np.sin(th2[:, None] - th2[None, :])) @ V2)
                Q2 = V2 * ((G * np.sin(th2[:, None] - th2[None, :]) - B * np.cos(th2[:, None] - th2[None, :])) @ V2)
                J[:, c] = (np.concatenate([P2[1:], Q2[1:]]) - np.concatenate([Pc[1:], Qc[1:]])) / eps
            dx = scipy.sparse.linalg.spsolve(scipy.sparse.csr_matrix(J), mis)
            th[1:] += dx[:nb - 1]; V[1:] += dx[nb - 1:]
        return np.sum(V ** 2) + np.sum(th ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return -0.3 * r.random(nb), -0.1 * r.random(nb)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3)


def fem_1d_poisson_lil_spsolve():
    ne = 20
    def loss(kappa, f):
        nn = ne + 1; h = 1.0 / ne
        K = scipy.sparse.lil_matrix((nn, nn))
        F = np.zeros(nn)
        for e in range(ne):
            ke = kappa[e] / h * np.array([[1, -1], [-1, 1]])
            idx = [e, e + 1]
            for a in range(2):
                F[idx[a]] += f[e] * h / 2
                for b in range(2):
                    K[idx[a], idx[b]] += ke[a, b]
        K[0, :] = 0; K[0, 0] = 1; F[0] = 0
        K[-1, :] = 0; K[-1, -1] = 1; F[-1] = 0
        u = scipy.sparse.linalg.spsolve(K.tocsr(), F)
        return np.sum(u ** 2) * h
    def make(s):
        r = np.random.default_rng(s)
        return 1 + r.random(ne), 1 + np.sin(np.arange(ne) + s)
    return loss, make, dict(argnums=(0, 1))


def fem_2d_coo_assembly_spsolve():
    m = 6
    xs = np.linspace(0, 1, m)
    X, Y = np.meshgrid(xs, xs, indexing="ij")
    nodes = np.column_stack([X.ravel(), Y.ravel()])
    tris = []
    for i in range(m - 1):
        for j in range(m - 1):
            a = i * m + j; b = a + m; c = a + 1; d = b + 1
            tris += [(a, b, d), (a, d, c)]
    tris = np.array(tris)
    boundary = np.flatnonzero((X.ravel() == 0) | (X.ravel() == 1) | (Y.ravel() == 0) | (Y.ravel() == 1))
    interior = np.setdiff1d(np.arange(m * m), boundary)
    def loss(k):
        rows, cols, vals = [], [], []
        for t, tri in enumerate(tris):
            p = nodes[tri]
            Bm = np.array([[p[1, 0] - p[0, 0], p[2, 0] - p[0, 0]], [p[1, 1] - p[0, 1], p[2, 1] - p[0, 1]]])
            area = 0.5 * abs(np.linalg.det(Bm))
            G = np.linalg.solve(Bm.T, np.array([[-1.0, 1, 0], [-1, 0, 1]]))
            ke = k[t] * area * G.T @ G
            for a in range(3):
                for b in range(3):
                    rows.append(tri[a]); cols.append(tri[b]); vals.append(ke[a, b])
        A = scipy.sparse.coo_matrix((np.array(vals), (rows, cols)), shape=(m * m, m * m)).tocsr()
        Aii = A[interior][:, interior]
        u = scipy.sparse.linalg.spsolve(Aii.tocsc(), np.ones(len(interior)))
        return u.sum()
    def make(s):
        return 1 + 0.5 * np.random.default_rng(s).random(len(tris)),
    return loss, make, dict(rtol=1e-4)


def tomography_rotate_backprojection():
    n = 16
    angles = np.linspace(0, 180, 6, endpoint=False)
    def loss(img):
        sino = np.stack([scipy.ndimage.rotate(img, a, reshape=False, order=1).sum(axis=0) for a in angles])
        back = np.zeros_like(img)
        for a, p in zip(angles, sino):
            back += scipy.ndimage.rotate(np.tile(p, (n, 1)), -a, reshape=False, order=1)
        return np.sum(sino ** 2) * 1e-3 + np.sum(back * img) * 1e-4
    def make(s):
        r = np.random.default_rng(s)
        yy, xx = np.mgrid[:n, :n]
        return np.exp(-((xx - 8) ** 2 + (yy - 7) ** 2) / 10.0) + 0.05 * r.random((n, n)),
    return loss, make, dict(rtol=1e-4)


def image_registration_shift_ssd():
    n = 24
    yy, xx = np.mgrid[:n, :n].astype(float)
    ref = np.exp(-((xx - 11) ** 2 + (yy - 12) ** 2) / 18.0)
    def loss(shift, img):
        moved = scipy.ndimage.shift(img, shift, order=3, mode="nearest")
        r = moved - ref
        return np.sum(r ** 2)
    def make(s):
        return np.array([0.3 + 0.1 * s, -0.4]), np.exp(-((xx - 11.5) ** 2 + (yy - 12.3) ** 2) / 18.0)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def audio_lfilter_biquad_cascade():
    def loss(b, x):
        y = x.copy()
        for stage in range(3):
            a = np.array([1.0, -1.2 + 0.1 * stage, 0.5])
            y = scipy.signal.lfilter(b, a, y)
        env = np.abs(scipy.signal.hilbert(y))
        return np.sum(env ** 2) / len(x)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.2, 0.1, 0.05]) + 0.01 * s, r.standard_normal(128)
    return loss, make, dict(argnums=(0, 1))


def audio_sosfilt_stft_spectral_flux():
    sos = scipy.signal.butter(4, [0.1, 0.3], btype="band", output="sos")
    def loss(x):
        y = scipy.signal.sosfilt(sos, x)
        f, t, Z = scipy.signal.stft(y, nperseg=32)
        mag = np.abs(Z)
        flux = np.diff(mag, axis=1)
        np.maximum(flux, 0, out=flux)
        return np.sum(flux ** 2) + np.sum(mag[:, 0])
    def make(s):
        r = np.random.default_rng(s); t = np.arange(256)
        return np.sin(0.4 * t) * (t > 100) + 0.1 * r.standard_normal(256),
    return loss, make, dict(step=1e-5)


def gp_regression_cho_factor():
    def loss(log_ell, log_sf, X, y):
        ell, sf = np.exp(log_ell), np.exp(log_sf)
        d2 = (X[:, None] - X[None, :]) ** 2
        K = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2)
        K[np.diag_indices_from(K)] += 0.1
        c, low = scipy.linalg.cho_factor(K)
        alpha = scipy.linalg.cho_solve((c, low), y)
        nll = 0.5 * y @ alpha + np.sum(np.log(np.diag(c))) + 0.5 * len(y) * np.log(2 * np.pi)
        return nll
    def make(s):
        r = np.random.default_rng(s); X = np.sort(r.random(15) * 5)
        return 0.1 * s, 0.0, X, np.sin(X) + 0.1 * r.standard_normal(15)
    return loss, make, dict(argnums=(0, 1, 2, 3))


def mcmc_log_likelihood_random_walk():
    def logpost(theta, x, y):
        mu = theta[0] + theta[1] * x
        sig = np.exp(theta[2])
        return -np.sum(0.5 * ((y - mu) / sig) ** 2 + np.log(sig)) - 0.5 * theta @ theta / 100
    def loss(theta0, x, y):
        rng = np.random.default_rng(0)
        theta = theta0.copy(); lp = logpost(theta, x, y); total = 0.0
        props = rng.standard_normal((30, 3)) * 0.05
        us = np.log(rng.random(30))
        for k in range(30):
            prop = theta + props[k]
            lpp = logpost(prop, x, y)
            if us[k] < lpp - lp:
                theta, lp = prop, lpp
            total = total + lp
        return total / 30
    def make(s):
        r = np.random.default_rng(s); x = r.random(20)
        return np.array([0.1, 0.9, -1.0]), x, 0.2 + x + 0.3 * r.standard_normal(20)
    return loss, make, dict(argnums=(0, 1, 2), step=1e-6)


def value_iteration_gridworld():
    nS, nA = 9, 4
    rng = np.random.default_rng(1)
    P = rng.random((nA, nS, nS)); P /= P.sum(axis=2, keepdims=True)
    def loss(R, gamma):
        V = np.zeros(nS)
        Qbuf = np.empty((nA, nS))
        for _ in range(40):
            np.einsum("ast,t->as", P, V, out=Qbuf)
            Qbuf *= gamma
            Qbuf += R.T
            V = Qbuf.max(axis=0)
        pi = Qbuf.argmax(axis=0)
        return V.sum() + float(pi.sum()) * 0
    def make(s):
        return np.random.default_rng(s).standard_normal((nS, nA)), 0.9
    return loss, make, dict(argnums=(0, 1))


def ising_mean_field_tanh_iteration():
    n = 10
    rng = np.random.default_rng(3)
    J = rng.standard_normal((n, n)) * 0.3; J = (J + J.T) / 2; np.fill_diagonal(J, 0)
    def loss(h, beta):
        m = np.zeros(n)
        for _ in range(60):
            np.tanh(beta * (J @ m + h), out=m)
        p = (1 + m) / 2
        ent = -np.sum(p * np.log(p) + (1 - p) * np.log(1 - p))
        F = -0.5 * m @ J @ m - h @ m - ent / beta
        return F
    return loss, lambda s: (0.3 * np.random.default_rng(s).standard_normal(n), 0.8), dict(argnums=(0, 1))


def queue_mm1_tandem_lindley():
    def loss(rates, arrivals):
        s1 = -np.log(np.random.default_rng(5).random(len(arrivals))) / rates[0]
        s2 = -np.log(np.random.default_rng(6).random(len(arrivals))) / rates[1]
        d1 = np.zeros(len(arrivals)); d2 = np.zeros(len(arrivals))
        t = np.cumsum(arrivals)
        for i in range(len(t)):
            start1 = max(t[i], d1[i - 1] if i else 0.0)
            d1[i] = start1 + s1[i]
            start2 = max(d1[i], d2[i - 1] if i else 0.0)
            d2[i] = start2 + s2[i]
        return np.mean(d2 - t)
    def make(s):
        return np.array([1.3, 1.5]), np.random.default_rng(s).exponential(1.0, 25)
    return loss, make, dict(argnums=(0, 1))


def portfolio_mean_variance_minimize():
    def loss(mu, Sigma_f):
        Sigma = Sigma_f @ Sigma_f.T + 0.01 * np.eye(len(mu))
        def obj(w):
            return 0.5 * 3.0 * w @ Sigma @ w - mu @ w
        n = len(mu)
        # analytic KKT with sum(w)=1
        K = np.zeros((n + 1, n + 1))
        K[:n, :n] = 3.0 * Sigma; K[:n, n] = 1; K[n, :n] = 1
        rhs = np.append(mu, 1.0)
        sol = np.linalg.solve(K, rhs)
        w = sol[:n]
        return obj(w) + np.sum(w ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.05 + 0.02 * r.standard_normal(5), 0.1 * r.standard_normal((5, 3))
    return loss, make, dict(argnums=(0, 1))


def survival_cox_partial_likelihood():
    def loss(beta, X, times, events):
        order = np.argsort(-times)
        eta = X[order] @ beta
        ev = events[order]
        log_risk = np.logaddexp.accumulate(eta)
        return -np.sum((eta - log_risk) * ev) + 0.01 * beta @ beta
    def make(s):
        r = np.random.default_rng(s)
        X = r.standard_normal((30, 3))
        return np.array([0.2, -0.1, 0.3]), X, r.exponential(1, 30), (r.random(30) < 0.7).astype(float)
    return loss, make, dict(argnums=(0, 1))


def survival_kaplan_meier_weibull_fit():
    def loss(logk, loglam, t, d):
        k, lam = np.exp(logk), np.exp(loglam)
        z = (t / lam) ** k
        ll = d * (np.log(k) - np.log(lam) + (k - 1) * np.log(t / lam)) - z
        uniq, idx = np.unique(t, return_inverse=True)
        at_risk = np.array([np.sum(t >= u) for u in uniq], dtype=float)
        deaths = np.bincount(idx, weights=d)
        S = np.cumprod(1 - deaths / at_risk)
        model = np.exp(-(uniq / lam) ** k)
        return -np.sum(ll) + np.sum((S - model) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.2, 0.1, r.weibull(1.3, 25) + 0.01, (r.random(25) < 0.8).astype(float)
    return loss, make, dict(argnums=(0, 1, 2))


def seismology_reflectivity_convolution():
    def ricker(t, f):
        a = (np.pi * f * t) ** 2
        return (1 - 2 * a) * np.exp(-a)
    def loss(imp, f0):
        refl = (imp[1:] - imp[:-1]) / (imp[1:] + imp[:-1])
        t = np.arange(-20, 21) * 0.002
        w = ricker(t, f0)
        trace = np.convolve(refl, w, mode="same")
        obs = np.convolve(np.sign(np.sin(np.arange(len(refl)))) * 0.1, w, mode="same")
        return np.sum((trace - obs) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 2000 + 500 * np.cumsum(r.random(60) > 0.8) + 10 * r.random(60), 25.0 + s
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def crystallography_structure_factors():
    hkl = np.array([[h, k, l] for h in range(-2, 3) for k in range(-2, 3) for l in range(0, 3)
                    if (h, k, l) != (0, 0, 0)], dtype=float)
    def loss(frac, B):
        f = np.array([6.0, 8.0, 8.0, 1.0])
        s2 = np.sum(hkl ** 2, axis=1) / (4 * 5.0 ** 2)
        phase = 2 * np.pi * hkl @ frac.T
        F = (f[None, :] * np.exp(-B[None, :] * s2[:, None]) * np.exp(1j * phase)).sum(axis=1)
        I = (F * F.conj()).real
        Iobs = np.abs(np.sum(np.cos(phase[:, :2]), axis=1)) * 10
        scale = np.sum(I * Iobs) / np.sum(I * I)
        return np.sum((scale * I - Iobs) ** 2) / np.sum(Iobs ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((4, 3)), 1.0 + r.random(4)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def masked_gauge_network_fill():
    def loss(readings, weights):
        m = np.ma.masked_where(readings < 0, readings)
        daily = (m * weights[:, None]).mean(axis=0)
        anomalies = m - daily
        score = np.ma.sum(anomalies ** 2) / anomalies.count()
        return float(score) + float(np.ma.mean(daily))
    def make(s):
        r = np.random.default_rng(s); x = r.random((5, 12)); x[r.random((5, 12)) < 0.2] = -1.0
        return x, 1 + r.random(5)
    return loss, make, dict(argnums=(0, 1))


def polynomial_class_chebyshev_fit():
    def loss(y, w):
        x = np.linspace(-1, 1, len(y))
        c = P.Chebyshev.fit(x, y, 5, w=w)
        d = c.deriv()
        xx = np.linspace(-1, 1, 40)
        return np.sum(c(xx) ** 2) / 40 + np.sum(d(xx) ** 2) / 400 + c.integ()(1.0)
    def make(s):
        r = np.random.default_rng(s); x = np.linspace(-1, 1, 20)
        return np.exp(x) + 0.1 * r.standard_normal(20), 1 + r.random(20)
    return loss, make, dict(argnums=(0, 1))


def polynomial_legendre_gauss_quadrature():
    nodes, wts = P.legendre.leggauss(8)
    def loss(coef, a):
        p = P.Polynomial(coef)
        f = lambda t: np.exp(-a * t ** 2) * p(t)
        I = np.sum(wts * f(nodes))
        leg = P.legendre.poly2leg(coef)
        return I + np.sum(leg ** 2)
    return loss, lambda s: (np.array([1.0, 0.5, -0.2, 0.1]) + 0.01 * s, 1.2), dict(argnums=(0, 1))


def vectorized_black_scholes_greeks():
    def bs(S, K, T, r, sig):
        d1 = (np.log(S / K) + (r + 0.5 * sig ** 2) * T) / (sig * np.sqrt(T))
        d2 = d1 - sig * np.sqrt(T)
        return S * scipy.stats.norm.cdf(d1) - K * np.exp(-r * T) * scipy.stats.norm.cdf(d2)
    vbs = np.vectorize(bs)
    def loss(vols, strikes):
        prices = vbs(100.0, strikes, 0.5, 0.02, vols)
        return np.sum(prices) + np.sum(np.gradient(prices, strikes) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 0.05 * r.random(7), np.linspace(80, 120, 7)
    return loss, make, dict(argnums=(0,))


def fromiter_generator_series():
    def terms(x, n):
        t = 1.0
        for k in range(n):
            yield t
            t = t * x / (k + 1)
    def loss(x):
        out = 0.0
        for xi in x:
            series = np.fromiter(terms(xi, 15), dtype=float, count=15)
            out = out + np.sum(series) - np.exp(xi) + series[3] ** 2
        return out
    return loss, lambda s: (np.random.default_rng(s).random(4),), {}


def partial_closure_rk_integrator():
    def rk4_step(f, y, t, h, k1, k2, k3, k4):
        k1[:] = f(t, y)
        k2[:] = f(t + h / 2, y + h / 2 * k1)
        k3[:] = f(t + h / 2, y + h / 2 * k2)
        k4[:] = f(t + h, y + h * k3)
        y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    def duffing(t, y, delta, alpha, beta, gamma):
        return np.array([y[1], -delta * y[1] - alpha * y[0] - beta * y[0] ** 3 + gamma * np.cos(1.2 * t)])
    def loss(params, y0):
        f = functools.partial(duffing, delta=params[0], alpha=params[1], beta=params[2], gamma=params[3])
        y = y0.copy(); bufs = [np.empty(2) for _ in range(4)]
        traj = []
        for i in range(50):
            rk4_step(f, y, i * 0.05, 0.05, *bufs)
            traj.append(y.copy())
        traj = np.stack(traj)
        return np.sum(traj[:, 0] ** 2) + traj[-1, 1]
    return loss, lambda s: (np.array([0.3, -1.0, 1.0, 0.5]) + 0.01 * s, np.array([1.0, 0.0])), dict(argnums=(0, 1))


def dict_state_predator_prey_spatial():
    n = 20
    def lap(u, out):
        out[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
        out[0] = u[1] - u[0]; out[-1] = u[-2] - u[-1]
        return out
    def loss(u0, v0, p):
        st = {"u": u0.copy(), "v": v0.copy()}
        work = {"lu": np.empty(n), "lv": np.empty(n)}
        for _ in range(40):
            lap(st["u"], work["lu"]); lap(st["v"], work["lv"])
            du = p[0] * st["u"] - p[1] * st["u"] * st["v"] + 0.1 * work["lu"]
            dv = p[2] * st["u"] * st["v"] - p[3] * st["v"] + 0.05 * work["lv"]
            st["u"] += 0.05 * du
            st["v"] += 0.05 * dv
        return sum(np.sum(a ** 2) for a in st.values())
    def make(s):
        r = np.random.default_rng(s)
        return 1 + 0.1 * r.random(n), 0.5 + 0.1 * r.random(n), np.array([1.0, 0.8, 0.5, 0.6])
    return loss, make, dict(argnums=(0, 1, 2))


def out_everywhere_diffusion_reaction():
    def loss(u0, k):
        u = u0.copy(); tmp = np.empty_like(u); lap = np.empty_like(u)
        for _ in range(30):
            np.roll(u, 1, axis=0, ) 
            np.subtract(np.roll(u, 1) + np.roll(u, -1), 2 * u, out=lap)
            np.multiply(u, u, out=tmp)
            np.multiply(tmp, u, out=tmp)
            np.subtract(u, tmp, out=tmp)
            np.multiply(tmp, k, out=tmp)
            np.add(tmp, lap, out=tmp)
            np.multiply(tmp, 0.05, out=tmp)
            np.add(u, tmp, out=u)
        return np.sum(np.square(u, out=tmp))
    return loss, lambda s: (0.3 * np.random.default_rng(s).standard_normal(32), 1.5), dict(argnums=(0, 1))


class KalmanSmoother:
    def __init__(self, F, H, Q, R):
        self.F, self.H, self.Q, self.R = F, H, Q, R
        n = F.shape[0]
        self.x = np.zeros(n); self.P = np.eye(n)
        self._tmp = np.empty((n, n))
    def step(self, y):
        self.x = self.F @ self.x
        np.matmul(self.F, self.P, out=self._tmp)
        np.matmul(self._tmp, self.F.T, out=self.P)
        self.P += self.Q
        S = self.H @ self.P @ self.H.T + self.R
        K = scipy.linalg.solve(S, self.H @ self.P, assume_a="pos").T
        innov = y - self.H @ self.x
        self.x += K @ innov
        self.P -= K @ self.H @ self.P
        return innov @ np.linalg.solve(S, innov) + np.linalg.slogdet(S)[1]


def kalman_class_step_solve_pos():
    F = np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1.0]])
    H = np.array([[1.0, 0, 0], [0, 0, 1]])
    def loss(q, ys):
        kf = KalmanSmoother(F, H, q * np.eye(3), 0.5 * np.eye(2))
        return sum(kf.step(y) for y in ys) + kf.x @ kf.x
    def make(s):
        r = np.random.default_rng(s)
        return 0.1 + 0.01 * s, np.cumsum(r.standard_normal((10, 2)), axis=0)
    return loss, make, dict(argnums=(0, 1))


def odeint_sir_fit():
    t = np.linspace(0, 30, 16)
    def loss(logp, data):
        beta, gamma = np.exp(logp)
        def rhs(y, t):
            S, I, R = y
            return [-beta * S * I, beta * S * I - gamma * I, gamma * I]
        # (tolerances 1e-7: the same program in fewer steps than at 1e-9, within the checks')
        sol = scipy.integrate.odeint(rhs, [0.99, 0.01, 0.0], t, rtol=1e-7, atol=1e-7)
        return np.sum((sol[:, 1] - data) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.log(np.array([0.4, 0.1])) + 0.01 * s, 0.1 * r.random(16)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3, forward_rtol=1e-5)


def quad_spectral_radiance_integral():
    def loss(T, eps):
        def planck(lam):
            return eps * 1.0 / lam ** 5 / np.expm1(1.0 / (lam * T))
        val, err = scipy.integrate.quad(planck, 0.05, 5.0)
        return val
    return loss, lambda s: (0.3 + 0.01 * s, 0.9), dict(argnums=(0, 1), rtol=1e-4)


def sparse_cg_poisson_2d_kron():
    n = 10
    D = scipy.sparse.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n))
    I = scipy.sparse.identity(n)
    A = (scipy.sparse.kron(D, I) + scipy.sparse.kron(I, D)).tocsr()
    def loss(f, k):
        M = A * k + scipy.sparse.identity(n * n) * 0.1
        u, info = scipy.sparse.linalg.cg(M, f, rtol=1e-12, atol=0)
        return u @ f + np.sum(u ** 2)
    return loss, lambda s: (np.random.default_rng(s).random(n * n), 1.3), dict(argnums=(0, 1), rtol=1e-4)


def sparse_eigsh_graph_laplacian():
    rng = np.random.default_rng(2)
    n = 30
    rows = rng.integers(0, n, 80); cols = rng.integers(0, n, 80)
    keep = rows != cols; rows, cols = rows[keep], cols[keep]
    def loss(w):
        W = scipy.sparse.csr_matrix((w, (rows, cols)), shape=(n, n))
        W = W + W.T
        d = np.asarray(W.sum(axis=1)).ravel() + 1.0
        L = scipy.sparse.diags(d) - W
        vals = scipy.sparse.linalg.eigsh(L, k=3, which="LA", return_eigenvectors=False, v0=np.ones(n))
        return np.sum(vals)
    return loss, lambda s: (1 + np.random.default_rng(s).random(len(rows)),), dict(rtol=1e-4)


def sparse_splu_implicit_reaction_diffusion():
    n = 30
    def loss(u0, D):
        L = scipy.sparse.diags([1, -2, 1], [-1, 0, 1], shape=(n, n), format="csc")
        A = scipy.sparse.identity(n, format="csc") - 0.1 * D * L
        lu = scipy.sparse.linalg.splu(A)
        u = u0.copy()
        for _ in range(15):
            u += 0.1 * u * (1 - u)
            u[:] = lu.solve(u)
        return np.sum(u)
    return loss, lambda s: (0.5 * np.random.default_rng(s).random(n), 1.0), dict(argnums=(0, 1))


def expm_multiply_master_equation():
    n = 12
    def loss(rates, p0):
        Q = scipy.sparse.lil_matrix((n, n))
        for i in range(n - 1):
            Q[i + 1, i] = rates[i]
            Q[i, i + 1] = 0.5 * rates[i]
        Q = Q.tocsc()
        Q = Q - scipy.sparse.diags(np.asarray(Q.sum(axis=0)).ravel())
        p = scipy.sparse.linalg.expm_multiply(Q, p0, start=0, stop=2.0, num=5, endpoint=True)
        return np.sum(p[-1] * np.arange(n)) + np.sum(p ** 2)
    def make(s):
        r = np.random.default_rng(s); p0 = r.random(n); return 1 + r.random(n - 1), p0 / p0.sum()
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def ndimage_cell_segmentation_filters():
    def loss(img, sigma):
        sm = scipy.ndimage.gaussian_filter(img, sigma)
        bg = scipy.ndimage.uniform_filter(sm, size=5)
        fg = sm - bg
        lap = scipy.ndimage.laplace(fg)
        mask = fg > 0
        labels, nl = scipy.ndimage.label(mask)
        sums = scipy.ndimage.sum_labels(fg, labels, index=np.arange(1, nl + 1))
        return np.sum(sums ** 2) + np.sum(lap ** 2) + np.sum(scipy.ndimage.median_filter(img, 3))
    def make(s):
        r = np.random.default_rng(s); yy, xx = np.mgrid[:20, :20]
        return np.exp(-((xx - 6) ** 2 + (yy - 7) ** 2) / 5) + np.exp(-((xx - 14) ** 2 + (yy - 12) ** 2) / 6) + 0.05 * r.random((20, 20)), 1.2
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def ndimage_map_coordinates_optical_flow_warp():
    n = 16
    yy, xx = np.mgrid[:n, :n].astype(float)
    def loss(img, flow):
        coords = np.stack([yy + flow[0], xx + flow[1]])
        warped = scipy.ndimage.map_coordinates(img, coords, order=1, mode="reflect")
        gy, gx = np.gradient(flow[0])
        return np.sum((warped - img[::-1]) ** 2) + 0.1 * np.sum(gx ** 2 + gy ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sin(xx / 3) * np.cos(yy / 4) + 0.1 * r.random((n, n)), 0.3 * r.standard_normal((2, n, n))
    return loss, make, dict(argnums=(0, 1))


def savgol_find_peaks_spectroscopy():
    x = np.linspace(0, 10, 200)
    def loss(amps, widths, noise):
        y = sum(a * np.exp(-((x - c) / w) ** 2) for a, c, w in zip(amps, [2.0, 5.0, 7.5], widths)) + noise
        ys = scipy.signal.savgol_filter(y, 11, 3)
        peaks, props = scipy.signal.find_peaks(ys, height=0.3)
        base = scipy.signal.medfilt(y, 5)
        return np.sum(ys[peaks]) + np.sum((y - base) ** 2) * 0.01
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.0, 0.7, 1.3]), np.array([0.3, 0.5, 0.4]), 0.02 * r.standard_normal(200)
    return loss, make, dict(argnums=(0, 1, 2), step=1e-6)


def filtfilt_resample_eeg_bandpower():
    b, a = scipy.signal.butter(3, [0.08, 0.25], btype="band")
    def loss(x):
        y = scipy.signal.filtfilt(b, a, x)
        z = scipy.signal.resample(y, 100)
        f, Pxx = scipy.signal.welch(z, nperseg=32)
        c = scipy.signal.fftconvolve(z, np.hanning(9), mode="same")
        return np.sum(Pxx) + np.sum(c ** 2) * 1e-3
    def make(s):
        r = np.random.default_rng(s); t = np.arange(300)
        return np.sin(0.5 * t) + 0.5 * r.standard_normal(300),
    return loss, make, {}


def interp_regular_grid_atmosphere():
    z = np.linspace(0, 10, 11); lat = np.linspace(-60, 60, 7)
    def loss(T, pts):
        f = scipy.interpolate.RegularGridInterpolator((z, lat), T, method="linear")
        vals = f(pts)
        cs = scipy.interpolate.CubicSpline(z, T[:, 3])
        return np.sum(vals ** 2) + np.sum(cs(np.linspace(0, 10, 25), 1) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        T = 288 - 6.5 * z[:, None] - 0.3 * np.abs(lat)[None, :] + r.standard_normal((11, 7))
        return T, np.column_stack([r.random(9) * 10, r.random(9) * 100 - 50])
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def univariate_spline_smoothing():
    def loss(y):
        x = np.linspace(0, 1, len(y))
        spl = scipy.interpolate.make_interp_spline(x, y, k=3)
        xx = np.linspace(0, 1, 50)
        return np.sum(spl(xx) ** 2) + np.sum(spl.derivative()(xx) ** 2) * 1e-3
    return loss, lambda s: (np.sin(np.linspace(0, 3, 12)) + 0.1 * np.random.default_rng(s).random(12),), {}


def special_functions_bessel_waveguide():
    def loss(r, k):
        J0 = scipy.special.jv(0, k * r)
        J1 = scipy.special.j1(k * r)
        lg = scipy.special.gammaln(1 + r)
        e = scipy.special.erf(r - 1)
        lse = scipy.special.logsumexp(k * r)
        return np.sum(J0 ** 2 + J1 ** 2) + np.sum(lg) + np.sum(e) + lse + np.sum(scipy.special.expit(r))
    return loss, lambda s: (0.1 + np.random.default_rng(s).random(8) * 3, 2.4), dict(argnums=(0, 1))


def stats_mixture_loglik_logpdf():
    def loss(mu, logsig, w, x):
        comps = np.stack([scipy.stats.norm.logpdf(x, m, np.exp(s)) for m, s in zip(mu, logsig)])
        ww = scipy.special.softmax(w)
        ll = scipy.special.logsumexp(comps + np.log(ww)[:, None], axis=0)
        prior = scipy.stats.gamma.logpdf(np.exp(logsig), a=2.0).sum()
        return -ll.sum() - prior
    def make(s):
        r = np.random.default_rng(s)
        return np.array([-1.0, 1.0]), np.array([0.0, -0.3]), np.array([0.2, -0.1]), np.concatenate([r.normal(-1, 1, 10), r.normal(1.5, 0.5, 10)])
    return loss, make, dict(argnums=(0, 1, 2, 3))


def linalg_lyapunov_controllability():
    def loss(A_off, B):
        A = -np.eye(4) * 2 + A_off
        Wc = scipy.linalg.solve_continuous_lyapunov(A, -B @ B.T)
        s = scipy.linalg.svdvals(Wc)
        ex = scipy.linalg.expm(A * 0.5)
        return np.sum(np.log(s)) + np.trace(ex)
    def make(s):
        r = np.random.default_rng(s); return 0.3 * r.standard_normal((4, 4)), r.standard_normal((4, 2))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def lu_factor_reused_implicit_steps():
    def loss(A_s, b):
        A = np.eye(6) + 0.1 * A_s
        lu, piv = scipy.linalg.lu_factor(A)
        x = b.copy()
        for _ in range(5):
            x = scipy.linalg.lu_solve((lu, piv), x)
            x += 0.1 * np.tanh(x)
        return np.sum(x ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((6, 6)), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1))


def solve_banded_cubic_spline_by_hand():
    def loss(y, x):
        n = len(x); h = np.diff(x)
        ab = np.zeros((3, n)); rhs = np.zeros(n)
        ab[1, 0] = ab[1, -1] = 1.0
        for i in range(1, n - 1):
            ab[0, i + 1] = h[i]
            ab[1, i] = 2 * (h[i - 1] + h[i])
            ab[2, i - 1] = h[i - 1]
            rhs[i] = 3 * ((y[i + 1] - y[i]) / h[i] - (y[i] - y[i - 1]) / h[i - 1])
        c = scipy.linalg.solve_banded((1, 1), ab, rhs)
        return np.sum(c ** 2)
    def make(s):
        r = np.random.default_rng(s); x = np.cumsum(0.5 + r.random(10))
        return np.sin(x), x
    return loss, make, dict(argnums=(0, 1))


def minimize_inner_bfgs_hyperparameter():
    def loss(lam, X, y):
        def obj(w):
            r = X @ w - y
            return r @ r + lam * w @ w
        res = scipy.optimize.minimize(obj, np.zeros(X.shape[1]), method="BFGS", options={"gtol": 1e-10})
        w = res.x
        return np.sum((X[:5] @ w - y[:5]) ** 2)
    def make(s):
        r = np.random.default_rng(s); X = r.standard_normal((12, 3))
        return 0.5, X, X @ np.array([1.0, -2, 0.5]) + 0.1 * r.standard_normal(12)
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-3)


def least_squares_michaelis_menten():
    def loss(S, v):
        def resid(p):
            return p[0] * S / (p[1] + S) - v
        sol = scipy.optimize.least_squares(resid, np.array([1.0, 1.0]), xtol=1e-14, ftol=1e-14, gtol=1e-14)
        return sol.x[0] + sol.x[1] ** 2
    def make(s):
        r = np.random.default_rng(s); S = np.linspace(0.1, 5, 10)
        return S, 2.0 * S / (0.7 + S) + 0.02 * r.standard_normal(10)
    return loss, make, dict(argnums=(0, 1), rtol=1e-3)


def root_fsolve_chemical_equilibrium():
    def loss(K, tot):
        def eqs(c):
            A, B, C = c
            return [A + C - tot[0], B + C - tot[1], C - K * A * B]
        c = scipy.optimize.fsolve(eqs, np.array([0.5, 0.5, 0.1]), xtol=1e-13)
        return c[2] ** 2 + c[0]
    return loss, lambda s: (2.0 + 0.1 * s, np.array([1.0, 0.8])), dict(argnums=(0, 1), rtol=1e-4)


def histogram_interp_cumulative_quantile():
    def loss(x, q):
        xs = np.sort(x)
        cdf = np.arange(1, len(xs) + 1) / len(xs)
        quant = np.interp(q, cdf, xs)
        hist, edges = np.histogram(x, bins=8, density=True)
        return np.sum(quant ** 2) + np.trapezoid(np.cumsum(x) / len(x))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(40), np.array([0.13, 0.52, 0.87])), dict(argnums=(0, 1))


def take_put_along_axis_topk_attention():
    def loss(Q, Kt, V):
        S = Q @ Kt / np.sqrt(Q.shape[1])
        idx = np.argsort(S, axis=1)[:, -3:]
        top = np.take_along_axis(S, idx, axis=1)
        M = np.full_like(S, -np.inf)
        np.put_along_axis(M, idx, top, axis=1)
        W = np.exp(M - M.max(axis=1, keepdims=True))
        W /= W.sum(axis=1, keepdims=True)
        return np.sum((W @ V) ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((5, 4)), r.standard_normal((4, 7)), r.standard_normal((7, 3))
    return loss, make, dict(argnums=(0, 1, 2))


def sparse_inplace_data_scaling_gmres():
    n = 25
    rng = np.random.default_rng(0)
    A0 = scipy.sparse.random(n, n, density=0.15, random_state=rng, format="csr") + scipy.sparse.identity(n, format="csr") * 4
    def loss(scale, b):
        A = A0.copy()
        A.data *= scale
        A.setdiag(A.diagonal() + 1.0)
        x, info = scipy.sparse.linalg.gmres(A, b, rtol=1e-12, atol=0, restart=n)
        return x @ x
    return loss, lambda s: (1.1 + 0.1 * s, np.random.default_rng(s).standard_normal(n)), dict(argnums=(0, 1), rtol=1e-4)


def sparse_bmat_saddle_point_stokes():
    n, m = 8, 3
    rng = np.random.default_rng(1)
    B = scipy.sparse.csr_matrix(rng.standard_normal((m, n)))
    def loss(kdiag, f):
        K = scipy.sparse.diags(kdiag)
        M = scipy.sparse.bmat([[K, B.T], [B, None]], format="csc")
        rhs = np.concatenate([f, np.zeros(m)])
        sol = scipy.sparse.linalg.spsolve(M, rhs)
        u, p = sol[:n], sol[n:]
        return u @ u + np.sum(p)
    return loss, lambda s: (2 + np.random.default_rng(s).random(n), np.ones(n)), dict(argnums=(0, 1))


def sparse_linear_operator_lsqr_deconvolution():
    n = 30
    k = np.array([0.25, 0.5, 0.25])
    lam = 0.3
    def loss(y):
        def mv(x): return np.convolve(x, k, mode="same")
        A = scipy.sparse.linalg.LinearOperator((n, n), matvec=mv, rmatvec=mv)
        x = scipy.sparse.linalg.lsqr(A, y, damp=lam, atol=1e-14, btol=1e-14, iter_lim=500)[0]
        return np.sum(x ** 2)
    return loss, lambda s: (np.sin(np.linspace(0, 4, n) + s),), dict(rtol=1e-4, hvp=False)


def sparse_csr_row_slicing_markov_chain():
    n = 15
    rng = np.random.default_rng(4)
    rows = np.repeat(np.arange(n), 3); cols = rng.integers(0, n, 3 * n)
    def loss(w):
        T = scipy.sparse.csr_matrix((np.exp(w), (rows, cols)), shape=(n, n))
        rs = np.asarray(T.sum(axis=1)).ravel()
        T = scipy.sparse.diags(1 / rs) @ T
        p = np.ones(n) / n
        for _ in range(20):
            p = T.T @ p
        sub = T[2:6].toarray()
        return np.sum(p ** 2) + np.sum(sub ** 2)
    return loss, lambda s: (0.3 * np.random.default_rng(s).standard_normal(3 * n),), {}


def sparse_multiply_hadamard_graph_smoothing():
    n = 20
    rng = np.random.default_rng(7)
    Adj = scipy.sparse.random(n, n, density=0.2, random_state=rng, format="csr")
    Adj = Adj + Adj.T
    def loss(x, w):
        W = Adj.multiply(w[:, None]).tocsr()
        L = scipy.sparse.diags(np.asarray(W.sum(axis=1)).ravel()) - W
        y = x.copy()
        for _ in range(10):
            y -= 0.05 * (L @ y)
        return y @ y + (W.power(2)).sum()
    return loss, lambda s: (np.random.default_rng(s).standard_normal(n), 1 + np.random.default_rng(s + 9).random(n)), dict(argnums=(0, 1))


def ndimage_convolve1d_separable_sharpen():
    def loss(img, a):
        k = np.array([a, 1 - 2 * a, a])
        blur = scipy.ndimage.convolve1d(img, k, axis=0, mode="reflect")
        blur = scipy.ndimage.convolve1d(blur, k, axis=1, mode="reflect")
        sx = scipy.ndimage.sobel(img, axis=0); sy = scipy.ndimage.sobel(img, axis=1)
        edge = np.hypot(sx, sy)
        sharp = img + 0.5 * (img - blur)
        return np.sum(sharp ** 2) + np.sum(edge)
    def make(s):
        r = np.random.default_rng(s); return r.random((12, 14)), 0.2
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def ndimage_zoom_affine_super_resolution():
    def loss(lowres, theta):
        up = scipy.ndimage.zoom(lowres, 2, order=1)
        c, s = np.cos(theta), np.sin(theta)
        M = np.array([[c, -s], [s, c]])
        rot = scipy.ndimage.affine_transform(up, M, offset=[1.0, -0.5], order=1)
        return np.sum((rot - up) ** 2)
    return loss, lambda s: (np.random.default_rng(s).random((8, 8)), 0.1), dict(argnums=(0, 1), hvp=False)


def ndimage_distance_transform_weighted_loss():
    n = 20
    yy, xx = np.mgrid[:n, :n]
    mask = (xx - 10) ** 2 + (yy - 9) ** 2 < 30
    dist = scipy.ndimage.distance_transform_edt(~mask)
    def loss(pred):
        p = scipy.special.expit(pred)
        w = np.exp(-dist / 3)
        bce = -(mask * np.log(p) + (~mask) * np.log1p(-p))
        return np.sum(w * bce) + np.sum(scipy.ndimage.maximum_filter(p, 3))
    return loss, lambda s: (np.random.default_rng(s).standard_normal((n, n)),), dict(step=1e-6)


def ndimage_generic_filter_local_variance():
    def loss(img):
        mean = scipy.ndimage.uniform_filter(img, 3)
        sq = scipy.ndimage.uniform_filter(img ** 2, 3)
        var = sq - mean ** 2
        g1 = scipy.ndimage.gaussian_filter1d(img, 1.5, axis=1, order=1)
        return np.sum(var) + np.sum(g1 ** 2)
    return loss, lambda s: (np.random.default_rng(s).random((10, 10)),), {}


def signal_lfilter_zi_streaming_blocks():
    b, a = scipy.signal.butter(2, 0.2)
    def loss(x, gain):
        zi = scipy.signal.lfilter_zi(b, a) * x[0]
        out = []
        for blk in np.array_split(x, 4):
            y, zi = scipy.signal.lfilter(b, a, gain * blk, zi=zi)
            out.append(y)
        y = np.concatenate(out)
        return np.sum(y ** 2) + np.sum(scipy.signal.detrend(y) ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(64), 1.3), dict(argnums=(0, 1))


def signal_sosfiltfilt_decimate_periodogram():
    sos = scipy.signal.butter(3, 0.3, output="sos")
    def loss(x):
        y = scipy.signal.sosfiltfilt(sos, x)
        d = scipy.signal.decimate(y, 2, ftype="fir")
        f, P = scipy.signal.periodogram(d, window="hann")
        return np.sum(P) + np.sum(scipy.signal.correlate(d, d[:5], mode="valid") ** 2) * 1e-2
    return loss, lambda s: (np.random.default_rng(s).standard_normal(128),), {}


def signal_upfirdn_polyphase_resampler():
    h = scipy.signal.firwin(21, 0.4)
    def loss(x):
        y = scipy.signal.upfirdn(h, x, up=3, down=2)
        z = scipy.signal.resample_poly(x, 3, 2)
        return np.sum((y[:len(z)] - z) ** 2) + np.sum(z ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(40),), {}


def solve_ivp_events_projectile_drag():
    def loss(v0, k):
        def rhs(t, y):
            v = np.hypot(y[2], y[3])
            return [y[2], y[3], -k * v * y[2], -9.81 - k * v * y[3]]
        def ground(t, y): return y[1]
        ground.terminal = True; ground.direction = -1
        sol = scipy.integrate.solve_ivp(rhs, (0, 10), [0, 0, v0[0], v0[1]], events=ground,
                                        rtol=1e-10, atol=1e-10, dense_output=True)
        tland = sol.t_events[0][0]
        return sol.y_events[0][0][0] + tland
    return loss, lambda s: (np.array([10.0 + s, 12.0]), 0.05), dict(argnums=(0, 1), rtol=1e-4, hvp=False)


def solve_ivp_radau_stiff_with_jacobian():
    def loss(k):
        def rhs(t, y):
            return np.array([-k[0] * y[0] + k[2] * y[1] * y[2],
                             k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2,
                             k[1] * y[1] ** 2])
        def jac(t, y):
            return np.array([[-k[0], k[2] * y[2], k[2] * y[1]],
                             [k[0], -k[2] * y[2] - 2 * k[1] * y[1], -k[2] * y[1]],
                             [0, 2 * k[1] * y[1], 0]])
        # (rtol 1e-5: the same stiff program in fewer Newton steps than at 1e-7)
        sol = scipy.integrate.solve_ivp(rhs, (0, 0.5), [1.0, 0, 0], method="Radau", jac=jac,
                                        rtol=1e-5, atol=1e-8, t_eval=[0.1, 0.5])
        return sol.y[0, -1] + 1e4 * sol.y[1, 0]
    return loss, lambda s: (np.array([0.04, 3e7, 1e4]) * (1 + 0.01 * s),), dict(rtol=1e-3, hvp=False)


def cumulative_trapezoid_simpson_work():
    def loss(F, x):
        W = scipy.integrate.cumulative_trapezoid(F, x, initial=0)
        total = scipy.integrate.simpson(F * np.cos(x), x=x)
        return W[-1] ** 2 + total + np.sum(W)
    def make(s):
        r = np.random.default_rng(s); x = np.cumsum(0.1 + 0.05 * r.random(21))
        return np.sin(x) + 0.1 * r.random(21), x
    return loss, make, dict(argnums=(0, 1))


def solve_bvp_beam_deflection():
    def loss(q, EI):
        def rhs(x, y):
            return np.vstack([y[1], y[2], y[3], q * np.ones_like(x) / EI])
        def bc(ya, yb):
            return np.array([ya[0], ya[1], yb[2], yb[3]])
        x = np.linspace(0, 1, 11)
        sol = scipy.integrate.solve_bvp(rhs, bc, x, np.zeros((4, 11)), tol=1e-10)
        return sol.sol(1.0)[0]
    return loss, lambda s: (1.0 + 0.1 * s, 2.0), dict(argnums=(0, 1), rtol=1e-4)


def lbfgsb_bounded_calibration_jac_true():
    def loss(data, lower):
        t = np.linspace(0, 5, len(data))
        def obj(p):
            m = p[0] * np.exp(-p[1] * t)
            r = m - data
            g = np.array([2 * r @ np.exp(-p[1] * t), 2 * r @ (-p[0] * t * np.exp(-p[1] * t))])
            return r @ r, g
        res = scipy.optimize.minimize(obj, np.array([1.0, 1.0]), jac=True, method="L-BFGS-B",
                                      bounds=[(lower, 10), (0.01, 5)], options={"ftol": 1e-15, "gtol": 1e-12})
        return res.x @ res.x
    def make(s):
        r = np.random.default_rng(s); t = np.linspace(0, 5, 12)
        return 2.0 * np.exp(-0.7 * t) + 0.01 * r.standard_normal(12), 0.1
    return loss, make, dict(argnums=(0,), rtol=1e-3)


def curve_fit_spectral_line():
    def lorentz(x, a, x0, g):
        return a * g ** 2 / ((x - x0) ** 2 + g ** 2)
    def loss(y):
        x = np.linspace(-5, 5, 30)
        popt, pcov = scipy.optimize.curve_fit(lorentz, x, y, p0=[1.0, 0.0, 1.0])
        return popt[0] + popt[1] ** 2 + popt[2]
    def make(s):
        r = np.random.default_rng(s); x = np.linspace(-5, 5, 30)
        return 2.0 / (1 + (x - 0.3) ** 2) + 0.01 * r.standard_normal(30),
    return loss, make, dict(rtol=1e-3)


def minimize_scalar_brentq_optics_focus():
    def loss(R, n):
        def spot(z):
            return (z - R / (n - 1)) ** 2 + 0.01 * np.cos(z)
        res = scipy.optimize.minimize_scalar(spot, bracket=(0.5, 5.0), options={"xtol": 1e-12})
        z0 = scipy.optimize.brentq(lambda z: np.tanh(z - R) - 0.3, -10, 10, xtol=1e-14)
        return res.x + z0
    return loss, lambda s: (1.0 + 0.1 * s, 1.5), dict(argnums=(0, 1), rtol=1e-4)


def interp_pchip_akima_hydrograph():
    def loss(q, tq):
        t = np.arange(len(q), dtype=float)
        p = scipy.interpolate.PchipInterpolator(t, q)
        a = scipy.interpolate.Akima1DInterpolator(t, q)
        f = scipy.interpolate.interp1d(t, q, kind="cubic")
        return np.sum(p(tq) ** 2) + np.sum(a(tq)) + np.sum(f(tq)) + p.integrate(0, len(q) - 1)
    def make(s):
        r = np.random.default_rng(s)
        return np.cumsum(r.random(10)) + np.sin(np.arange(10)), np.array([0.5, 2.3, 4.7, 7.1])
    return loss, make, dict(argnums=(0, 1))


def rbf_griddata_terrain():
    rng = np.random.default_rng(3)
    pts = rng.random((20, 2))
    def loss(z, q):
        rbf = scipy.interpolate.RBFInterpolator(pts, z, kernel="thin_plate_spline", smoothing=0.01)
        g = scipy.interpolate.griddata(pts, z, q, method="linear")
        return np.sum(rbf(q) ** 2) + np.nansum(g)
    return loss, lambda s: (np.sin(3 * pts[:, 0]) + np.cos(2 * pts[:, 1]) + 0.01 * s, np.array([[0.4, 0.5], [0.6, 0.3]])), dict(argnums=(0, 1))


def splrep_splev_smoothing_spline():
    def loss(y):
        x = np.linspace(0, 1, len(y))
        tck = scipy.interpolate.splrep(x, y, s=0)
        xx = np.linspace(0, 1, 33)
        return np.sum(scipy.interpolate.splev(xx, tck) ** 2) + np.sum(scipy.interpolate.splev(xx, tck, der=1) ** 2) * 1e-2
    return loss, lambda s: (np.sin(np.linspace(0, 4, 15)) + 0.05 * np.random.default_rng(s).random(15),), {}


def kdtree_lennard_jones_cutoff():
    def loss(x):
        tree = scipy.spatial.cKDTree(x)
        pairs = tree.query_pairs(1.5, output_type="ndarray")
        d = x[pairs[:, 0]] - x[pairs[:, 1]]
        r2 = np.sum(d ** 2, axis=1)
        inv6 = 1 / r2 ** 3
        return np.sum(4 * (inv6 ** 2 - inv6))
    def make(s):
        r = np.random.default_rng(s)
        g = np.stack(np.meshgrid(np.arange(3), np.arange(3), np.arange(2), indexing="ij"), -1).reshape(-1, 3) * 1.12
        return g + 0.03 * r.standard_normal(g.shape),
    return loss, make, dict(step=1e-6)


def pdist_squareform_mds_stress():
    def loss(Y, D):
        d = scipy.spatial.distance.pdist(Y)
        Dm = scipy.spatial.distance.squareform(d)
        C = scipy.spatial.distance.cdist(Y, Y[:3], "sqeuclidean")
        return np.sum((Dm - D) ** 2) + 0.01 * np.sum(C)
    def make(s):
        r = np.random.default_rng(s); X = r.standard_normal((8, 3))
        return r.standard_normal((8, 2)), scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(X))
    return loss, make, dict(argnums=(0, 1))


def multivariate_normal_t_logpdf_robust():
    def loss(mu, L, x):
        cov = L @ L.T + 0.1 * np.eye(2)
        ll = scipy.stats.multivariate_normal.logpdf(x, mean=mu, cov=cov).sum()
        lt = scipy.stats.t.logpdf(x[:, 0], df=4, loc=mu[0], scale=2.0).sum()
        return -ll - lt
    def make(s):
        r = np.random.default_rng(s); return np.array([0.1, -0.2]), np.array([[1.0, 0], [0.3, 0.8]]), r.standard_normal((15, 2))
    return loss, make, dict(argnums=(0, 1, 2))


def gaussian_kde_density_loss():
    def loss(samples, q):
        kde = scipy.stats.gaussian_kde(samples, bw_method=0.3)
        return -np.sum(np.log(kde(q)))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(25), np.linspace(-1, 1, 7)), dict(argnums=(0, 1))


def linalg_cholesky_solve_triangular_whitening():
    def loss(A, X):
        S = A @ A.T + np.eye(3)
        L = scipy.linalg.cholesky(S, lower=True)
        Z = scipy.linalg.solve_triangular(L, X.T, lower=True)
        logdet = 2 * np.sum(np.log(np.diag(L)))
        return 0.5 * np.sum(Z ** 2) + 0.5 * X.shape[0] * logdet
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((3, 3)), r.standard_normal((10, 3))
    return loss, make, dict(argnums=(0, 1))


def linalg_qr_economic_pinv_regression():
    def loss(X, y):
        Q, R = scipy.linalg.qr(X, mode="economic")
        beta = scipy.linalg.solve_triangular(R, Q.T @ y)
        beta2 = np.linalg.pinv(X) @ y
        H = Q @ Q.T
        return np.sum(beta ** 2) + np.sum((beta - beta2) ** 2) + np.trace(H) + np.sum(np.diag(H) ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((10, 3)), r.standard_normal(10)
    return loss, make, dict(argnums=(0, 1))


def linalg_sqrtm_logm_polar_strain():
    def loss(F):
        C = F.T @ F
        U = scipy.linalg.sqrtm(C)
        E = 0.5 * scipy.linalg.logm(C)
        R, P = scipy.linalg.polar(F)
        return np.sum(E ** 2) + np.trace(U) + np.sum(R * F)
    return loss, lambda s: (np.eye(3) + 0.1 * np.random.default_rng(s).standard_normal((3, 3)),), dict(rtol=1e-4)


def linalg_eig_nonsymmetric_stability():
    def loss(A):
        w, V = np.linalg.eig(A)
        return np.sum(np.exp(w.real)) + np.sum(np.abs(w) ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((4, 4)),), dict(rtol=1e-4)


def toeplitz_levinson_ar_fit():
    def loss(x):
        x = x - x.mean()
        r = np.array([np.dot(x[:len(x) - k], x[k:]) for k in range(4)]) / len(x)
        a = scipy.linalg.solve_toeplitz(r[:3], r[1:4])
        T = scipy.linalg.toeplitz(r[:3])
        return np.sum(a ** 2) + np.linalg.det(T)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(50),), {}


def frompyfunc_piecewise_select_constitutive():
    def stress(e, E, ey):
        return E * e if abs(e) < ey else np.sign(e) * (E * ey + 0.1 * E * (abs(e) - ey))
    ufs = np.vectorize(stress, otypes=[float])
    def loss(strain, E):
        s1 = ufs(strain, E, 0.01)
        s2 = np.piecewise(strain, [strain < -0.01, strain > 0.01],
                          [lambda e: -E * 0.01 + 0.1 * E * (e + 0.01), lambda e: E * 0.01 + 0.1 * E * (e - 0.01), lambda e: E * e])
        s3 = np.select([np.abs(strain) < 0.01], [E * strain], default=np.sign(strain) * E * 0.01)
        return np.sum(s1 * s2) * 1e-4 + np.sum(s3)
    return loss, lambda s: (np.linspace(-0.03, 0.027, 9) + 0.001 * s, 200.0), dict(argnums=(0, 1))


def ufunc_at_reduceat_outer_histogram_features():
    def loss(w, x):
        bins = np.clip((x * 5).astype(int), 0, 4)
        acc = np.zeros(5)
        np.add.at(acc, bins, w)
        mx = np.full(5, -np.inf)
        np.maximum.at(mx, bins, w * x)
        seg = np.add.reduceat(w, [0, 3, 7])
        O = np.multiply.outer(seg, acc)
        run = np.logaddexp.accumulate(w)
        return np.sum(O) + np.sum(mx[np.isfinite(mx)]) + run[-1]
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(12), r.random(12)
    return loss, make, dict(argnums=(0,))


def sliding_window_view_local_regression():
    from numpy.lib.stride_tricks import sliding_window_view
    def loss(y):
        win = sliding_window_view(y, 7)
        t = np.arange(7) - 3.0
        slopes = win @ t / (t @ t)
        means = win.mean(axis=-1)
        resid = win - means[:, None] - slopes[:, None] * t
        return np.sum(resid ** 2) + np.sum(np.median(win, axis=1))
    return loss, lambda s: (np.cumsum(np.random.default_rng(s).standard_normal(30)),), {}


def copyto_putmask_place_imputation():
    def loss(x, fill):
        y = x.copy()
        bad = y < -1.0
        np.copyto(y, fill, where=bad)
        z = x.copy()
        np.putmask(z, z > 1.5, fill * 2)
        q = x.copy()
        np.place(q, q > 1.0, np.array([fill, fill + 1]))
        return np.sum(y ** 2) + np.sum(z) + np.sum(q * x)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(20), 0.3), dict(argnums=(0, 1))


def nan_to_num_unwrap_phase_tracking():
    def loss(phase, amp):
        wrapped = np.angle(amp * np.exp(1j * phase))
        un = np.unwrap(wrapped)
        ratio = np.nan_to_num(np.log(amp) / (un - un[0]), nan=0.0, posinf=0.0, neginf=0.0)
        return np.sum(un ** 2) + np.sum(ratio ** 2) * 1e-3
    def make(s):
        r = np.random.default_rng(s)
        return np.cumsum(0.8 + 0.3 * r.random(20)), 1 + r.random(20)
    return loss, make, dict(argnums=(0, 1))


def quantile_partition_sort_inplace_robust_stats():
    def loss(x):
        y = x.copy()
        y.sort()
        q = np.quantile(x, [0.1, 0.5, 0.9])
        med = np.median(x)
        mad = np.median(np.abs(x - med))
        p = np.partition(x, 3)[:3]
        trimmed = y[2:-2].mean()
        return np.sum(q ** 2) + mad + np.sum(p) + trimmed + np.percentile(x, 75)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(25),), {}


def cov_corrcoef_norm_pca_whitening():
    def loss(X):
        C = np.cov(X, rowvar=False)
        R = np.corrcoef(X, rowvar=False)
        w, V = np.linalg.eigh(C)
        Z = (X - X.mean(0)) @ V / np.sqrt(w)
        return np.linalg.norm(Z, "fro") + np.sum(R ** 2) + np.linalg.norm(C, 2) + np.linalg.norm(X[0], 1)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((20, 3)) @ np.array([[1, 0.5, 0], [0, 1, 0.3], [0, 0, 1.0]]),), dict(rtol=1e-4)


def einsum_diagonal_view_write_and_block():
    def loss(A, d):
        M = A @ A.T
        diag = np.einsum("ii->i", M)
        diag += d
        B = np.block([[M, np.eye(3)], [np.eye(3), M]])
        return np.linalg.slogdet(B)[1] + np.einsum("ij,jk,ki->", M, M, M, optimize=True) * 1e-2
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((3, 3)), 2 + r.random(3)
    return loss, make, dict(argnums=(0, 1))


def list_of_traced_scalars_asarray():
    def loss(p):
        a, b, c = p
        M = np.array([[a, b], [b, c]])
        v = np.asarray([a * b, np.sin(c), 1.0])
        rows = [np.array([p[i] ** k for k in range(3)]) for i in range(3)]
        V = np.stack(rows)
        cs = np.column_stack([p, p ** 2])
        return np.linalg.det(M) + v @ v + np.linalg.det(V) + np.sum(cs)
    return loss, lambda s: (np.array([1.3, 0.4, 2.0]) + 0.1 * s,), {}


def full_fill_empty_like_tri_vander():
    def loss(x, c):
        F = np.full((4, 4), c)
        E = np.empty_like(F)
        E.fill(c * 2)
        T = np.tri(4) * F + np.triu(E, 1)
        V = np.vander(x, 4, increasing=True)
        return np.sum(np.linalg.solve(V + T, x))
    return loss, lambda s: (np.array([0.1, 0.7, 1.3, 2.0]) + 0.05 * s, 0.3), dict(argnums=(0, 1))


def polyfit_poly1d_roots_calibration_curve():
    def loss(x, y):
        c = np.polyfit(x, y, 2)
        p = np.poly1d(c)
        dp = p.deriv()
        r = np.roots(c - np.array([0, 0, 1.0]))
        return np.sum(p(x) ** 2) + dp(1.0) + np.sum(np.real(r) ** 2)
    def make(s):
        r = np.random.default_rng(s); x = np.linspace(0, 3, 12)
        return x, 0.5 * x ** 2 - x + 0.3 + 0.05 * r.standard_normal(12)
    return loss, make, dict(argnums=(0, 1))


def unique_counts_isin_setdiff_bookkeeping():
    def loss(v, labels):
        u, inv, cnt = np.unique(labels, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=v)
        means = sums / cnt
        keep = np.isin(labels, np.setdiff1d(u, [2]))
        return np.sum(means ** 2) + np.sum(v[keep]) + np.sum(np.ediff1d(v, to_begin=0.0) ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(20), r.integers(0, 5, 20)
    return loss, make, dict(argnums=(0,), hvp=False)


def gradient_edge_order_trapezoid_2d():
    def loss(f, hx):
        x = np.cumsum(np.full(12, hx))
        gx, gy = np.gradient(f, x, 0.5, edge_order=2)
        I = np.trapezoid(np.trapezoid(f ** 2, dx=0.5, axis=1), x=x)
        return np.sum(gx ** 2 + gy ** 2) + I
    return loss, lambda s: (np.random.default_rng(s).random((12, 9)), 0.3), dict(argnums=(0, 1))


def numpy2_array_api_functions():
    def loss(A, x):
        y = np.matvec(A, x) if hasattr(np, "matvec") else A @ x
        v = np.vecdot(A, x)
        n = np.linalg.vector_norm(A, axis=1)
        cs = np.cumulative_sum(x, include_initial=True)
        B = np.permute_dims(np.stack([A, 2 * A]), (1, 0, 2))
        parts = np.unstack(B, axis=1)
        return np.sum(y ** 2) + np.sum(v) + np.sum(n) + np.sum(cs) + np.sum(parts[1] * parts[0]) + np.sum(np.concat([x, x]))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((4, 3)), r.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def rot90_flip_roll_inplace_symmetrize():
    def loss(img):
        u = img.copy()
        u += np.rot90(u, 2)
        u[:] = u[::-1]
        u[:, 1:] += np.roll(u, 1, axis=1)[:, 1:]
        u = np.flip(u, axis=1).copy()
        u[np.triu_indices(len(u), 1)] *= 0.5
        return np.sum(u ** 2) + np.sum(np.swapaxes(np.expand_dims(u, 0), 0, 2))
    return loss, lambda s: (np.random.default_rng(s).random((5, 5)),), {}


def broadcast_arrays_ascontiguous_fortran_ops():
    def loss(a, b):
        A, B = np.broadcast_arrays(a[:, None], b[None, :])
        C = np.ascontiguousarray(A * B)
        F = np.asfortranarray(C)
        F[:, 0] += 1.0
        R = np.require(F, requirements=["C"])
        return np.sum(R ** 2) + np.sum(np.atleast_2d(a).T * C)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(4), r.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def masked_array_ops_climatology():
    def loss(temps, w):
        m = np.ma.masked_invalid(temps)
        m = np.ma.masked_greater(m, 35.0)
        clim = np.ma.average(m, axis=0, weights=w)
        anom = m - clim
        filled = anom.filled(0.0)
        std = np.ma.std(m, axis=1)
        return np.sum(filled ** 2) + float(np.ma.sum(std)) + float(clim.max())
    def make(s):
        r = np.random.default_rng(s); t = 20 + 8 * r.standard_normal((6, 8))
        t[r.random((6, 8)) < 0.1] = np.nan
        return t, 1 + r.random(6)
    return loss, make, dict(argnums=(0, 1))


class GrowingLog:
    def __init__(self):
        self.rows = []
    def append(self, **kw):
        self.rows.append(kw)
    def column(self, k):
        return np.array([r[k] for r in self.rows])


def logger_of_dicts_then_columns():
    def loss(x0, rate):
        log = GrowingLog()
        x = x0.copy()
        for t in range(15):
            x *= np.exp(-rate * 0.1)
            x += 0.05 * np.sin(t)
            log.append(t=t, mean=x.mean(), energy=np.sum(x ** 2))
        e = log.column("energy"); m = log.column("mean")
        return np.sum(e) + np.sum(np.diff(m) ** 2)
    return loss, lambda s: (np.random.default_rng(s).random(6), 0.7), dict(argnums=(0, 1))


def generator_pipeline_windowed_features():
    def frames(x, n, hop):
        for start in range(0, len(x) - n + 1, hop):
            yield x[start:start + n] * np.hanning(n)
    def loss(x):
        specs = [np.abs(np.fft.rfft(fr)) ** 2 for fr in frames(x, 16, 8)]
        S = np.array(specs)
        centroid = (S @ np.arange(S.shape[1])) / S.sum(axis=1)
        return np.sum(centroid) + np.sum(np.log1p(S))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(80),), {}


def work_buffers_reused_across_calls():
    buf = {"grad": np.empty(20), "tmp": np.empty(20)}
    def energy_and_grad(u, k, out):
        np.subtract(np.roll(u, -1), u, out=buf["tmp"])
        e = 0.5 * k * np.sum(buf["tmp"] ** 2) + np.sum(np.cos(u))
        np.subtract(np.roll(buf["tmp"], 1), buf["tmp"], out=out)
        out *= k
        out -= np.sin(u)
        return e
    def loss(u0, k):
        u = u0.copy(); es = []
        for _ in range(25):
            es.append(energy_and_grad(u, k, buf["grad"]))
            u -= 0.05 * buf["grad"]
        return es[-1] + 0.1 * sum(es)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(20), 1.5), dict(argnums=(0, 1))


def dct_poisson_neumann_solver():
    n = 16
    k = np.pi * np.arange(n) / n
    lam = (2 * np.cos(k)[:, None] - 2) + (2 * np.cos(k)[None, :] - 2)
    lam[0, 0] = 1.0
    def loss(f):
        fh = scipy.fft.dctn(f - f.mean(), type=2, norm="ortho")
        uh = fh / lam
        uh[0, 0] = 0.0
        u = scipy.fft.idctn(uh, type=2, norm="ortho")
        return np.sum(u ** 2) + np.sum(scipy.fft.rfft2(u, norm="ortho").real)
    return loss, lambda s: (np.random.default_rng(s).random((n, n)),), {}


def batched_small_systems_solve_inv():
    def loss(A, b):
        M = A + 3 * np.eye(3)
        x = np.linalg.solve(M, b[..., None])[..., 0]
        Minv = np.linalg.inv(M)
        return np.sum(x ** 2) + np.sum(np.trace(Minv, axis1=1, axis2=2)) + np.sum(np.linalg.det(M))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((6, 3, 3)), r.standard_normal((6, 3))
    return loss, make, dict(argnums=(0, 1))


def eigh_subset_expm_frechet_dare():
    def loss(A, Q):
        S = A + A.T
        w = scipy.linalg.eigh(S, eigvals_only=True, subset_by_index=[0, 1])
        E, L = scipy.linalg.expm_frechet(0.1 * A, Q)
        F = np.array([[1.0, 0.1], [0, 1]]); H = np.array([[1.0, 0]])
        P = scipy.linalg.solve_discrete_are(F.T, H.T, Q[:2, :2] @ Q[:2, :2].T + 0.1 * np.eye(2), np.array([[0.5]]))
        return np.sum(w) + np.sum(L ** 2) + np.trace(P)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((3, 3)), r.standard_normal((3, 3))
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def assignment_matching_then_traced_cost():
    def loss(X, Y):
        C = np.sum((X[:, None] - Y[None]) ** 2, axis=-1)
        r, c = scipy.optimize.linear_sum_assignment(C)
        return C[r, c].sum()
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((6, 2)), r.standard_normal((6, 2))
    return loss, make, dict(argnums=(0, 1))


def csgraph_shortest_path_traced_weights():
    rng = np.random.default_rng(5)
    n = 10
    rows = np.concatenate([np.arange(n - 1), rng.integers(0, n, 12)])
    cols = np.concatenate([np.arange(1, n), rng.integers(0, n, 12)])
    keep = rows != cols; rows, cols = rows[keep], cols[keep]
    def loss(w):
        G = scipy.sparse.csr_matrix((w, (rows, cols)), shape=(n, n))
        D, pred = scipy.sparse.csgraph.shortest_path(G, directed=True, indices=0, return_predecessors=True)
        total = 0.0
        j = n - 1
        while pred[j] >= 0:
            i = pred[j]
            total = total + G[i, j]
            j = i
        return total + np.sum(D[np.isfinite(D)]) * 0
    return loss, lambda s: (1 + np.random.default_rng(s).random(len(rows)),), {}


def legendre_roots_eval_quadrature():
    x, w = scipy.special.roots_legendre(10)
    def loss(c, a):
        P = np.stack([scipy.special.eval_legendre(k, x) for k in range(len(c))])
        f = (c @ P) * np.exp(-a * x ** 2)
        return np.sum(w * f ** 2)
    return loss, lambda s: (np.array([1.0, 0.3, -0.2, 0.1]) + 0.01 * s, 0.7), dict(argnums=(0, 1))


def truncnorm_ppf_quantile_matching():
    def loss(mu, sig):
        qs = np.array([0.1, 0.5, 0.9])
        z = scipy.stats.norm.ppf(qs, loc=mu, scale=sig)
        tn = scipy.stats.truncnorm.logpdf(np.array([0.2, 0.5]), -1.0, 2.0, loc=mu, scale=sig)
        return np.sum((z - np.array([-1.0, 0.2, 1.5])) ** 2) - np.sum(tn)
    return loss, lambda s: (0.1 + 0.01 * s, 1.2), dict(argnums=(0, 1))


def quad_vec_dblquad_moments():
    def loss(a, b):
        v, err = scipy.integrate.quad_vec(lambda t: np.array([np.exp(-a * t), t * np.exp(-b * t)]), 0, 3, epsabs=1e-12)
        I, e2 = scipy.integrate.dblquad(lambda y, x: np.exp(-a * x * y), 0, 1, 0, 1, epsabs=1e-12)
        return v[0] + v[1] ** 2 + I
    return loss, lambda s: (0.5 + 0.1 * s, 1.3), dict(argnums=(0, 1), rtol=1e-4, hvp=False)


def rng_normal_traced_location_scale():
    def loss(mu, sig):
        rng = np.random.default_rng(0)
        x = rng.normal(mu, sig, size=200)
        y = rng.normal(loc=mu * 2, scale=1.0, size=(50,))
        return np.mean(np.tanh(x)) + np.mean(y ** 2)
    return loss, lambda s: (0.3 + 0.1 * s, 1.1), dict(argnums=(0, 1))


def rng_choice_traced_probabilities_resample():
    def loss(logw, x):
        w = np.exp(logw - logw.max()); w /= w.sum()
        rng = np.random.default_rng(1)
        idx = rng.choice(len(w), size=len(w), p=w)
        return np.sum(x[idx] ** 2) + np.sum(w * x)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(10), r.standard_normal(10)
    return loss, make, dict(argnums=(1,))


def freqz_iir_design_fit():
    def loss(b, a1):
        a = np.array([1.0, a1[0], a1[1]])
        w, h = scipy.signal.freqz(b, a, worN=64)
        target = (w < 1.0).astype(float)
        return np.sum((np.abs(h) - target) ** 2)
    return loss, lambda s: (np.array([0.1, 0.2, 0.1]) + 0.01 * s, np.array([-0.8, 0.3])), dict(argnums=(0, 1))


def lfilter_traced_denominator_ar_fit():
    def loss(a1, x):
        e = scipy.signal.lfilter([1.0], np.concatenate([[1.0], a1]), x)
        return np.sum(e ** 2)
    def make(s):
        r = np.random.default_rng(s); return np.array([-0.5, 0.2]), r.standard_normal(60)
    return loss, make, dict(argnums=(0, 1))


def spectrogram_coherence_csd():
    def loss(x, y):
        f, t, S = scipy.signal.spectrogram(x, nperseg=32)
        f2, C = scipy.signal.coherence(x, y, nperseg=32)
        f3, P = scipy.signal.csd(x, y, nperseg=32)
        return np.sum(S) + np.sum(C) + np.sum(np.abs(P))
    def make(s):
        r = np.random.default_rng(s); x = r.standard_normal(128); return x, 0.5 * x + r.standard_normal(128)
    return loss, make, dict(argnums=(0, 1))


def bspline_lsq_traced_coefficients():
    k = 3
    t = np.r_[[0.0] * 4, np.linspace(0.2, 0.8, 4), [1.0] * 4]
    def loss(c, y):
        spl = scipy.interpolate.BSpline(t, c, k)
        xx = np.linspace(0, 1, 30)
        lsq = scipy.interpolate.make_lsq_spline(np.linspace(0, 1, len(y)), y, t, k)
        return np.sum(spl(xx) ** 2) + np.sum(spl.derivative(2)(xx) ** 2) * 1e-3 + np.sum(lsq(xx))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(len(t) - k - 1), np.sin(np.linspace(0, 3, 25)) + 0.05 * r.random(25)
    return loss, make, dict(argnums=(0, 1))


def newton_vectorized_and_root_scalar():
    def loss(c):
        r = scipy.optimize.newton(lambda x: x ** 3 - c, np.ones_like(c), fprime=lambda x: 3 * x ** 2, tol=1e-14)
        s = scipy.optimize.root_scalar(lambda x: np.cos(x) - c[0] * x, bracket=[0, 2], xtol=1e-14).root
        return np.sum(r ** 2) + s
    return loss, lambda s: (np.array([0.5, 2.0, 3.0]) + 0.1 * s,), dict(rtol=1e-4)


def binary_morphology_mask_then_traced():
    def loss(img):
        mask = img > 0.5
        er = scipy.ndimage.binary_erosion(mask, iterations=1)
        di = scipy.ndimage.binary_dilation(mask)
        edge = di & ~er
        com = scipy.ndimage.center_of_mass(img, scipy.ndimage.label(mask)[0], 1)
        return np.sum(img[edge] ** 2) + np.sum(img * er) + np.sum(np.asarray(com))
    def make(s):
        yy, xx = np.mgrid[:12, :12]
        return np.exp(-((xx - 6) ** 2 + (yy - 5) ** 2) / 8) + 0.01 * np.random.default_rng(s).random((12, 12)),
    return loss, make, dict(step=1e-6)


def convolve2d_fft_psf_deblur():
    psf = np.outer(scipy.signal.windows.gaussian(5, 1.0), scipy.signal.windows.gaussian(5, 1.0))
    psf /= psf.sum()
    def loss(x, y):
        b = scipy.signal.convolve2d(x, psf, mode="same", boundary="symm")
        c = scipy.signal.convolve(x, psf, mode="same", method="fft")
        r = b - y
        tv = np.sum(np.abs(np.diff(x, axis=0))) + np.sum(np.abs(np.diff(x, axis=1)))
        return np.sum(r ** 2) + 0.01 * tv + np.sum(c ** 2) * 1e-3
    def make(s):
        r = np.random.default_rng(s); return r.random((10, 10)), r.random((10, 10))
    return loss, make, dict(argnums=(0, 1), step=1e-6)


class Integrator:
    """A solver object: state, parameters and a history grown with np.append."""
    def __init__(self, y0, params):
        self.y = np.array(y0, dtype=float)
        self.p = params
        self.t = 0.0
        self.hist = np.empty((0, len(y0)))
    def rhs(self, y):
        a, b = self.p
        return np.array([y[1], -a * np.sin(y[0]) - b * y[1]])
    def step(self, h):
        k1 = self.rhs(self.y); k2 = self.rhs(self.y + h * k1)
        self.y += 0.5 * h * (k1 + k2)
        self.t += h
        self.hist = np.append(self.hist, self.y[None, :], axis=0)


def solver_object_history_np_append():
    def loss(params, y0):
        s = Integrator(y0, params)
        for _ in range(30):
            s.step(0.1)
        return np.sum(s.hist[:, 0] ** 2) + s.y @ s.y
    return loss, lambda s: (np.array([2.0, 0.1]) + 0.01 * s, np.array([0.5, 0.0])), dict(argnums=(0, 1))


def einsum_ellipsis_out_preallocated_attention():
    def loss(Q, K, V):
        S = np.empty(Q.shape[:-1] + K.shape[-2:-1])
        np.einsum("...qd,...kd->...qk", Q, K, out=S)
        S -= S.max(axis=-1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(axis=-1, keepdims=True)
        O = np.zeros_like(Q)
        np.einsum("...qk,...kd->...qd", S, V, out=O)
        return np.sum(O ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((2, 4, 3)), r.standard_normal((2, 5, 3)), r.standard_normal((2, 5, 3))
    return loss, make, dict(argnums=(0, 1, 2))


def slsqp_constrained_portfolio():
    def loss(mu, C):
        S = C @ C.T + 0.05 * np.eye(4)
        cons = [{"type": "eq", "fun": lambda w: np.sum(w) - 1.0}]
        res = scipy.optimize.minimize(lambda w: 2.0 * w @ S @ w - mu @ w, np.full(4, 0.25),
                                      method="SLSQP", constraints=cons, bounds=[(0, 1)] * 4,
                                      options={"ftol": 1e-14, "maxiter": 200})
        return res.fun
    def make(s):
        r = np.random.default_rng(s); return 0.1 + 0.05 * r.random(4), 0.3 * r.standard_normal((4, 4))
    return loss, make, dict(argnums=(0, 1), rtol=1e-3, hvp=False)


def lsoda_vectorized_and_odeint_dfun():
    def loss(k):
        def rhs(t, y):
            return np.vstack([-k[0] * y[0] + k[1] * y[1], k[0] * y[0] - k[1] * y[1] - k[2] * y[1]])
        sol = scipy.integrate.solve_ivp(rhs, (0, 4), [1.0, 0.0], method="LSODA", vectorized=True,
                                        rtol=1e-10, atol=1e-12, t_eval=[1.0, 4.0])
        f = lambda y, t: [-k[0] * y[0] + k[1] * y[1], k[0] * y[0] - (k[1] + k[2]) * y[1]]
        J = lambda y, t: [[-k[0], k[1]], [k[0], -(k[1] + k[2])]]
        y2 = scipy.integrate.odeint(f, [1.0, 0.0], [0, 1.0, 4.0], Dfun=J, rtol=1e-10, atol=1e-12)
        return np.sum(sol.y ** 2) + np.sum(y2 ** 2)
    return loss, lambda s: (np.array([1.0, 0.5, 0.2]) + 0.01 * s,), dict(rtol=1e-4, forward_rtol=1e-5)


def bicgstab_spilu_preconditioned_convection():
    n = 30
    def loss(v, f):
        D = scipy.sparse.diags([-1 - v, 2.0 + 0.1, -1 + v], [-1, 0, 1], shape=(n, n), format="csc")
        ilu = scipy.sparse.linalg.spilu(D.tocsc())
        M = scipy.sparse.linalg.LinearOperator((n, n), ilu.solve)
        x, info = scipy.sparse.linalg.bicgstab(D, f, M=M, rtol=1e-13, atol=0)
        return x @ x
    return loss, lambda s: (0.3 + 0.01 * s, np.random.default_rng(s).random(n)), dict(argnums=(0, 1), rtol=1e-4)


def sparse_manual_csr_matvec_loops():
    n = 8
    rng = np.random.default_rng(2)
    A0 = scipy.sparse.random(n, n, density=0.4, random_state=rng, format="csr")
    def loss(vals, x):
        A = scipy.sparse.csr_matrix((vals, A0.indices, A0.indptr), shape=(n, n))
        y = np.zeros(n)
        for i in range(n):
            for jj in range(A.indptr[i], A.indptr[i + 1]):
                y[i] += A.data[jj] * x[A.indices[jj]]
        return y @ y + (A @ x) @ x
    return loss, lambda s: (np.random.default_rng(s).standard_normal(A0.nnz), np.random.default_rng(s + 1).standard_normal(n)), dict(argnums=(0, 1))


def sparse_dok_lil_rows_hstack_block_diag():
    def loss(w):
        D = scipy.sparse.dok_matrix((4, 4))
        for i in range(4):
            D[i, i] = w[i]
            D[i, (i + 1) % 4] = -0.5 * w[i]
        L = scipy.sparse.lil_matrix((4, 4))
        L[1, :] = w[:4] * 0.1
        B = scipy.sparse.block_diag([D.tocsr(), L.tocsr()])
        H = scipy.sparse.hstack([B, scipy.sparse.identity(8)]).tocsr()
        V = scipy.sparse.vstack([H, H]).tocsc()
        return (V.T @ V).sum() + scipy.sparse.linalg.norm(B)
    return loss, lambda s: (1 + np.random.default_rng(s).random(4),), {}


def sparse_array_api_diags_array():
    def loss(d, x):
        A = scipy.sparse.diags_array([d[:-1], 2 + d, d[:-1]], offsets=[-1, 0, 1], format="csr")
        y = A @ x
        col = A.sum(axis=0)
        return y @ y + np.sum(col ** 2) + np.sum(A.multiply(A).toarray())
    return loss, lambda s: (np.random.default_rng(s).random(6), np.ones(6)), dict(argnums=(0, 1))


def ndimage_traced_kernel_correlate_convolve():
    def loss(img, k):
        K = k.reshape(3, 3)
        a = scipy.ndimage.correlate(img, K, mode="nearest")
        b = scipy.ndimage.convolve(img, K / K.sum(), mode="wrap")
        c = scipy.signal.convolve(img, K, mode="valid")
        return np.sum(a ** 2) + np.sum(b) + np.sum(c ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.random((8, 8)), 0.5 + r.random(9)
    return loss, make, dict(argnums=(0, 1))


def gaussian_filter_3d_wrap_volume():
    def loss(vol, sig):
        g = scipy.ndimage.gaussian_filter(vol, sigma=sig, mode="wrap")
        gm = scipy.ndimage.gaussian_gradient_magnitude(vol, 1.0)
        return np.sum(g ** 2) + np.sum(gm)
    return loss, lambda s: (np.random.default_rng(s).random((6, 7, 5)), 1.1), dict(argnums=(0, 1))


def lfilter_axis0_traced_sos():
    def loss(x, b, a):
        y = scipy.signal.lfilter([0.2, 0.3], [1.0, -0.4], x, axis=0)
        sos = np.column_stack([b, np.ones(len(b)), a])
        z = scipy.signal.sosfilt(sos, y, axis=0)
        return np.sum(z ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((40, 3)), np.array([[0.2, 0.1, 0.05], [0.3, 0.0, -0.1]]), np.array([[-0.5, 0.2], [0.1, 0.05]])
    return loss, make, dict(argnums=(0, 1, 2))


def interpn_rectbivariate_linear_nd():
    x = np.linspace(0, 1, 6); y = np.linspace(0, 2, 7)
    rng = np.random.default_rng(3)
    pts = rng.random((15, 2)) * [1, 2]
    def loss(Z, vals):
        q = np.array([[0.3, 0.5], [0.71, 1.2], [0.05, 1.9]])
        a = scipy.interpolate.interpn((x, y), Z, q)
        spl = scipy.interpolate.RectBivariateSpline(x, y, Z)
        b = spl(q[:, 0], q[:, 1], grid=False)
        lin = scipy.interpolate.LinearNDInterpolator(pts, vals)
        c = lin(np.array([[0.5, 1.0], [0.4, 0.8]]))
        return np.sum(a ** 2) + np.sum(b) + np.nansum(c)
    def make(s):
        r = np.random.default_rng(s); return r.random((6, 7)), r.random(15)
    return loss, make, dict(argnums=(0, 1))


def special_information_theory_digamma():
    def loss(p, q, a):
        P = scipy.special.softmax(p); Q = scipy.special.softmax(q)
        kl = np.sum(scipy.special.rel_entr(P, Q)) + np.sum(scipy.special.kl_div(P, Q))
        H = np.sum(scipy.special.entr(P)) - np.sum(scipy.special.xlogy(P, Q))
        dg = np.sum(scipy.special.digamma(a)) + np.sum(scipy.special.polygamma(1, a)) + scipy.special.betaln(a[0], a[1])
        return kl + H + dg + np.sum(scipy.special.log_softmax(q))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(5), r.standard_normal(5), 1 + r.random(3)
    return loss, make, dict(argnums=(0, 1, 2))


def special_bessel_kv_ive_erfcx():
    nu = 1.3
    def loss(x):
        return (np.sum(scipy.special.kv(nu, x)) + np.sum(scipy.special.ive(nu, x)) +
                np.sum(scipy.special.erfcx(x)) + np.sum(scipy.special.hyp2f1(0.5, 1.0, 1.5, -x ** 2)))
    return loss, lambda s: (0.5 + np.random.default_rng(s).random(5) * 2,), {}


def stats_count_models_shape_parameters():
    def loss(mu, a, b, x, k):
        lp = scipy.stats.poisson.logpmf(k, mu).sum()
        lb = scipy.stats.beta.logpdf(x, a, b).sum()
        lw = scipy.stats.weibull_min.logpdf(x + 0.1, a, scale=b).sum()
        ln = scipy.stats.lognorm.logpdf(x + 0.1, s=a * 0.5, scale=b).sum()
        nb = scipy.stats.nbinom.logpmf(k, 5, 1 / (1 + mu)).sum()
        return -(lp + lb + lw + ln + nb)
    def make(s):
        r = np.random.default_rng(s)
        return 2.0 + 0.1 * s, 1.5, 2.5, r.beta(2, 3, 12), r.poisson(2.0, 12)
    return loss, make, dict(argnums=(0, 1, 2, 3), hvp=False)


def stats_gamma_cdf_shape_and_dirichlet():
    def loss(a, alpha, x):
        c = scipy.stats.gamma.cdf(x, a)
        d = scipy.stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), alpha)
        v = scipy.stats.vonmises.logpdf(x, 2.0, loc=0.1).sum()
        return np.sum(c) + d + v
    return loss, lambda s: (1.7 + 0.1 * s, np.array([1.5, 2.0, 3.0]), np.array([0.5, 1.0, 2.0])), dict(argnums=(0, 1, 2), hvp=False)


def linalg_sylvester_schur_hessenberg_ldl():
    def loss(A, B, C):
        X = scipy.linalg.solve_sylvester(A - 3 * np.eye(3), B + 3 * np.eye(3), C)
        T, Z = scipy.linalg.schur(A + A.T)
        Hh = scipy.linalg.hessenberg(A)
        S = A @ A.T + np.eye(3)
        lu, d, perm = scipy.linalg.ldl(S)
        return np.sum(X ** 2) + np.sum(np.diag(T)) + np.sum(Hh ** 2) + np.sum(np.diag(d))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((3, 3)), r.standard_normal((3, 3)), r.standard_normal((3, 3))
    return loss, make, dict(argnums=(0, 1, 2), rtol=1e-4)


def linalg_tridiagonal_banded_eigen():
    def loss(d, e):
        w, v = scipy.linalg.eigh_tridiagonal(d, e)
        ab = np.vstack([np.r_[0.0, e], d])
        wb = scipy.linalg.eigvals_banded(ab)
        cb = scipy.linalg.cholesky_banded(np.vstack([np.r_[0.0, 0.1 * e], d + 3]))
        x = scipy.linalg.cho_solve_banded((cb, False), np.ones(len(d)))
        return np.sum(w[:2]) + np.sum(wb ** 2) + np.sum(x) + np.sum(v[:, 0] ** 4)
    return loss, lambda s: (np.arange(5.0) + 0.1 * s, np.full(4, 0.5)), dict(argnums=(0, 1), rtol=1e-4)


def linalg_matrix_functions_funm_power():
    def loss(A):
        S = A @ A.T / 3 + np.eye(3)
        F = scipy.linalg.fractional_matrix_power(S, 0.5)
        Cm = scipy.linalg.cosm(0.3 * A)
        Pn = np.linalg.matrix_power(S, 3)
        return np.sum(F ** 2) + np.trace(Cm) + np.trace(Pn) * 1e-2 + np.linalg.cond(S)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 3)),), dict(rtol=1e-4)


def numpy_linalg_lstsq_tensorsolve_multidot():
    def loss(A, b, T):
        x, res, rank, sv = np.linalg.lstsq(A, b, rcond=None)
        y = np.linalg.tensorsolve(T.reshape(2, 3, 6) + np.eye(6).reshape(2, 3, 6) * 2, np.ones((2, 3)))
        M = np.linalg.multi_dot([A.T, A, A.T, A])
        return np.sum(x ** 2) + np.sum(res) + np.sum(y ** 2) + np.trace(M) * 1e-2 + np.sum(np.linalg.eigvalsh(A.T @ A))
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal((8, 3)), r.standard_normal(8), 0.1 * r.standard_normal(36)
    return loss, make, dict(argnums=(0, 1, 2))


def fft_hfft_fftshift_fftn_axes():
    def loss(x, v):
        s = np.fft.fftshift(np.fft.fft(x))
        h = np.fft.hfft(x[:9])
        V = np.fft.fftn(v, axes=(0, 2))
        V[:, :, 0] *= 0.5
        return np.sum(np.abs(s) ** 2) + np.sum(h ** 2) * 1e-2 + np.sum(np.abs(np.fft.ifftn(V, axes=(0, 2))) ** 2)
    def make(s):
        r = np.random.default_rng(s); return r.standard_normal(16), r.standard_normal((4, 3, 5))
    return loss, make, dict(argnums=(0, 1))


def trust_constr_nonlinear_constraint():
    def loss(target):
        con = scipy.optimize.NonlinearConstraint(lambda x: x[0] ** 2 + x[1] ** 2, 0, 1.0)
        res = scipy.optimize.minimize(lambda x: np.sum((x - target) ** 2), np.zeros(2), method="trust-constr",
                                      constraints=[con], options={"gtol": 1e-12, "xtol": 1e-14})
        return res.x @ np.array([1.0, 2.0])
    return loss, lambda s: (np.array([1.5, 0.8]) + 0.1 * s,), dict(rtol=1e-3, hvp=False)


# In-place numerical recipes as they are lifted from public projects, one function each: band
# and tridiagonal solvers, factorisation updates, steppers with preallocated stages, dynamic
# programming tables, hand-written filters, loops over CSR arrays.


def nr_tridag_thomas():
    """Numerical Recipes' tridag: forward sweep into a preallocated gam, back substitution."""
    n = 20
    def tridag(a, b, c, r, u):
        gam = np.empty(n)
        bet = b[0]
        u[0] = r[0] / bet
        for j in range(1, n):
            gam[j] = c[j - 1] / bet
            bet = b[j] - a[j] * gam[j]
            u[j] = (r[j] - a[j] * u[j - 1]) / bet
        for j in range(n - 2, -1, -1):
            u[j] -= gam[j + 1] * u[j + 1]
    def loss(diag, r):
        a = np.full(n, -1.0); c = np.full(n, -1.0)
        u = np.zeros(n)
        tridag(a, diag, c, r, u)
        return np.sum(u ** 2)
    def make(s):
        rng = np.random.default_rng(s)
        return 3 + rng.random(n), rng.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def savitzky_golay_by_hand():
    """Savitzky-Golay coefficients by a pseudo-inverse of the Vandermonde, then a loop of
    window dot products into out[i], edges mirrored by hand."""
    m, order = 5, 3
    k = np.arange(-m, m + 1)
    A = np.vander(k, order + 1, increasing=True)
    coeffs = np.linalg.pinv(A)[0]
    def loss(y):
        padded = np.concatenate([y[m:0:-1], y, y[-2:-m - 2:-1]])
        out = np.empty_like(y)
        for i in range(len(y)):
            out[i] = coeffs @ padded[i:i + 2 * m + 1]
        return np.sum((out - y) ** 2) + np.sum(out[::3])
    return loss, lambda s: (np.sin(np.linspace(0, 6, 40)) + 0.1 * np.random.default_rng(s).standard_normal(40),), {}


def cholesky_rank_one_update_inplace():
    """The classic in-place rank-one update of a Cholesky factor (r, c, s rotations on L)."""
    n = 6
    def cholupdate(L, x):
        x = x.copy()
        for k in range(n):
            r = np.sqrt(L[k, k] ** 2 + x[k] ** 2)
            c = r / L[k, k]
            s = x[k] / L[k, k]
            L[k, k] = r
            if k + 1 < n:
                L[k + 1:, k] = (L[k + 1:, k] + s * x[k + 1:]) / c
                x[k + 1:] = c * x[k + 1:] - s * L[k + 1:, k]
    def loss(A0, x):
        A = A0 @ A0.T + n * np.eye(n)
        L = np.linalg.cholesky(A)
        cholupdate(L, x)
        return np.sum(np.log(np.diag(L))) + np.sum(L[3:, :2] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((n, n)), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def lu_partial_pivoting_row_swaps():
    """Doolittle LU with partial pivoting, swapping rows of a copy in place (a[[k, p]] =
    a[[p, k]]), then forward and back substitution."""
    n = 7
    def lu_solve(a, b):
        a = a.copy(); b = b.copy()
        for k in range(n - 1):
            p = k + np.argmax(np.abs(a[k:, k]))
            if p != k:
                a[[k, p]] = a[[p, k]]
                b[[k, p]] = b[[p, k]]
            a[k + 1:, k] /= a[k, k]
            a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
        for i in range(1, n):
            b[i] -= a[i, :i] @ b[:i]
        for i in range(n - 1, -1, -1):
            b[i] = (b[i] - a[i, i + 1:] @ b[i + 1:]) / a[i, i]
        return b
    def loss(a, b):
        return np.sum(np.tanh(lu_solve(a, b)))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((n, n)) + 2 * np.eye(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def rk4_preallocated_stages():
    """A Runge-Kutta stepper with k1..k4 preallocated once and filled by a right-hand side that
    writes into its out argument."""
    n = 8
    def rhs(t, y, p, out):
        out[:] = -p * y
        out[1:] += 0.5 * y[:-1]
        out[0] += np.sin(t)
    def loss(y0, p):
        y = y0.copy()
        k1, k2, k3, k4, tmp = (np.empty(n) for _ in range(5))
        t, h = 0.0, 0.05
        for _ in range(20):
            rhs(t, y, p, k1)
            np.multiply(k1, 0.5 * h, out=tmp); tmp += y
            rhs(t + h / 2, tmp, p, k2)
            np.multiply(k2, 0.5 * h, out=tmp); tmp += y
            rhs(t + h / 2, tmp, p, k3)
            np.multiply(k3, h, out=tmp); tmp += y
            rhs(t + h, tmp, p, k4)
            y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t += h
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(n), 1 + r.random(n)
    return loss, make, dict(argnums=(0, 1))


def conjugate_gradient_inplace_axpy():
    """Jacobi-preconditioned CG by hand with in-place axpys (x += alpha*p; r -= alpha*Ap;
    z[:] = r / diag; p *= beta; p += z) and np.dot(out=) into a preallocated Ap."""
    n = 12
    def loss(d, b):
        A = np.diag(d) - 0.5 * (np.eye(n, k=1) + np.eye(n, k=-1))
        diag = A.diagonal()
        x = np.zeros(n); r = b.copy(); z = r / diag; p = z.copy()
        rz = r @ z
        Ap = np.empty(n)
        for _ in range(n):
            np.dot(A, p, out=Ap)
            alpha = rz / (p @ Ap)
            x += alpha * p
            r -= alpha * Ap
            z[:] = r / diag
            rz, rz_old = r @ z, rz
            p *= rz / rz_old
            p += z
        return np.sum(x * b) + np.sum(x ** 3)
    def make(s):
        r = np.random.default_rng(s)
        return 2 + r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def kalman_joseph_update_inplace():
    """A Kalman filter over a track: predict P = F P F' + Q, update with P -= K S K' and
    x += K y, the log-likelihood summed."""
    def loss(q, r, zs):
        F = np.array([[1.0, 1.0], [0.0, 1.0]]); H = np.array([[1.0, 0.0]])
        x = np.zeros(2); P = np.eye(2)
        ll = 0.0
        for z in zs:
            x = F @ x
            P = F @ P @ F.T
            P += q * np.array([[0.25, 0.5], [0.5, 1.0]])
            y = z - H @ x
            S = H @ P @ H.T + r
            K = P @ H.T / S
            x += (K * y).ravel()
            P -= K @ S @ K.T
            ll += -0.5 * (np.log(2 * np.pi * S[0, 0]) + y[0] ** 2 / S[0, 0])
        return -ll
    def make(s):
        rng = np.random.default_rng(s)
        return 0.1 + 0.1 * rng.random(), 0.5 + rng.random(), np.cumsum(rng.standard_normal(15))[:, None]
    return loss, make, dict(argnums=(0, 1, 2))


def particle_push_add_at_deposit():
    """A PIC step: cloud-in-cell deposit with np.add.at, field by finite differences, push."""
    ng, npart = 16, 40
    def loss(xp, vp, q):
        x = xp.copy(); v = vp.copy()
        for _ in range(3):
            rho = np.zeros(ng)
            cell = np.floor(x).astype(int) % ng
            frac = x - np.floor(x)
            np.add.at(rho, cell, q * (1 - frac))
            np.add.at(rho, (cell + 1) % ng, q * frac)
            rho -= rho.mean()
            E = np.zeros(ng)
            E[1:-1] = -(rho[2:] - rho[:-2]) / 2
            E[0] = -(rho[1] - rho[-1]) / 2; E[-1] = -(rho[0] - rho[-2]) / 2
            Ep = E[cell] * (1 - frac) + E[(cell + 1) % ng] * frac
            v += 0.1 * q * Ep
            x += 0.1 * v
            x %= ng
        return np.sum(v ** 2) + np.sum(np.sin(x))
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 + 15.5 * r.random(npart), 0.1 * r.standard_normal(npart), 1.0 + 0.1 * r.random()
    return loss, make, dict(argnums=(1, 2), rtol=1e-4)


def finite_volume_flux_loop():
    """A 1-D finite-volume advection-diffusion with a minmod-limited MUSCL flux computed face
    by face in a loop, the update u[i] -= dt/dx*(F[i+1] - F[i])."""
    n = 24
    def minmod(a, b):
        if a * b <= 0:
            return 0.0
        return a if abs(a) < abs(b) else b
    def loss(u0, nu):
        u = u0.copy()
        F = np.zeros(n + 1)
        for _ in range(5):
            for i in range(1, n):
                sl = minmod(u[i - 1] - u[i - 2] if i >= 2 else 0.0, u[i] - u[i - 1])
                F[i] = u[i - 1] + 0.5 * sl - nu * (u[i] - u[i - 1])
            u[:] -= 0.2 * (F[1:] - F[:-1])
        return np.sum(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 1 + np.sin(np.arange(n) / 3.0) + 0.3 * r.random(n), 0.1 + 0.05 * r.random()
    return loss, make, dict(argnums=(0, 1), step=1e-6, rtol=1e-4)


def median_percentile_filter_by_hand():
    """A running median and 90th percentile by hand over windows (np.median, np.percentile of
    each slice, written into out[i])."""
    w = 5
    def loss(x):
        n = len(x)
        med = np.empty(n - w + 1); hi = np.empty(n - w + 1)
        for i in range(n - w + 1):
            win = x[i:i + w]
            med[i] = np.median(win)
            hi[i] = np.percentile(win, 90)
        return np.sum((x[w // 2:n - w // 2] - med) ** 2) + np.sum(hi)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(30),), {}


def csr_matvec_loop_by_hand():
    """y = A x over CSR arrays (indptr, indices, data) by a double loop, A's values traced, in a
    few power-iteration steps with in-place normalisation."""
    rng = np.random.default_rng(11)
    n = 10
    dense = (rng.random((n, n)) < 0.3) + np.eye(n, dtype=bool)
    indptr = np.concatenate([[0], np.cumsum(dense.sum(axis=1))])
    indices = np.nonzero(dense)[1]
    def loss(data, x0):
        x = x0.copy()
        y = np.zeros(n)
        for _ in range(4):
            for i in range(n):
                acc = 0.0
                for jj in range(indptr[i], indptr[i + 1]):
                    acc += data[jj] * x[indices[jj]]
                y[i] = acc
            x[:] = y / np.linalg.norm(y)
        return x @ y
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random(len(indices)), 1 + r.random(n)
    return loss, make, dict(argnums=(0, 1))


def floyd_warshall_inplace():
    """Floyd-Warshall on a distance matrix written in place (d = np.minimum(d, d[:, k, None] +
    d[None, k, :], out=d)), the sum of shortest paths."""
    n = 8
    def loss(w):
        d = w.copy()
        np.fill_diagonal(d, 0.0)
        for k in range(n):
            np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
        return np.sum(d)
    return loss, lambda s: (1 + 3 * np.random.default_rng(s).random((n, n)),), {}


def dtw_sakoe_chiba_weighted_steps():
    """Dynamic time warping within a Sakoe-Chiba band, a diagonal step weighted by a traced
    factor, the table preallocated with inf and filled only inside the band."""
    band = 3
    def loss(a, b, wd):
        n, m = len(a), len(b)
        D = np.full((n + 1, m + 1), np.inf)
        D[0, 0] = 0.0
        for i in range(1, n + 1):
            for j in range(max(1, i - band), min(m, i + band) + 1):
                cost = abs(a[i - 1] - b[j - 1])
                D[i, j] = min(D[i - 1, j] + cost, D[i, j - 1] + cost, D[i - 1, j - 1] + wd * cost)
        return D[n, m] / (n + m)
    def make(s):
        r = np.random.default_rng(s)
        return (np.sin(np.linspace(0, 3, 9)) + 0.1 * r.random(9), np.sin(np.linspace(0.2, 3.3, 11)),
                2.0 + 0.1 * r.random())
    return loss, make, dict(argnums=(0, 1, 2))


def viterbi_log_table():
    """Viterbi in log space: delta[t] = max over previous of delta[t-1] + logA, with the
    backpointers in an int table; the best path's score, differentiated in the emissions."""
    K, T = 3, 12
    def loss(logB, logA):
        delta = np.empty((T, K)); psi = np.zeros((T, K), dtype=int)
        delta[0] = np.log(1.0 / K) + logB[0]
        for t in range(1, T):
            scores = delta[t - 1][:, None] + logA
            psi[t] = np.argmax(scores, axis=0)
            delta[t] = scores[psi[t], np.arange(K)] + logB[t]
        path = np.empty(T, dtype=int)
        path[-1] = np.argmax(delta[-1])
        for t in range(T - 2, -1, -1):
            path[t] = psi[t + 1, path[t + 1]]
        return delta[-1].max() + 0.1 * np.sum(logB[np.arange(T), path])
    def make(s):
        r = np.random.default_rng(s)
        A = r.random((K, K)) + np.eye(K); A /= A.sum(axis=1, keepdims=True)
        return np.log(r.random((T, K))), np.log(A)
    return loss, make, dict(argnums=(0, 1))


def smith_waterman_soft_scores():
    """Smith-Waterman local alignment over a traced substitution matrix and gap penalty:
    H[i, j] = max(0, diag + s, up - g, left - g), the best cell's score."""
    a = np.array([0, 1, 2, 1, 3, 0, 2]); b = np.array([1, 2, 1, 3, 3, 0])
    def loss(S, gap):
        H = np.zeros((len(a) + 1, len(b) + 1))
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                H[i, j] = max(0.0, H[i - 1, j - 1] + S[a[i - 1], b[j - 1]],
                              H[i - 1, j] - gap, H[i, j - 1] - gap)
        return H.max()
    def make(s):
        r = np.random.default_rng(s)
        return 2 * np.eye(4) - 1 + 0.2 * r.random((4, 4)), 0.7 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def histogram_equalisation_soft():
    """Histogram equalisation: a CDF of the image's histogram (np.histogram's counts fixed,
    the mapping by np.interp of traced intensities), then a contrast loss."""
    def loss(img, gamma):
        x = np.clip(img, 0, 1) ** gamma
        hist, edges = np.histogram(x, bins=16, range=(0, 1))
        cdf = np.cumsum(hist).astype(float)
        cdf /= cdf[-1]
        eq = np.interp(x.ravel(), edges[1:], cdf).reshape(x.shape)
        out = np.empty_like(eq)
        out[...] = eq
        out *= x
        return np.var(out) + np.sum(out[::4, ::4])
    def make(s):
        r = np.random.default_rng(s)
        return 0.05 + 0.9 * r.random((12, 12)), 1.2 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1), step=1e-6, rtol=1e-4)



def gauss_seidel_sor_sweeps():
    """SOR sweeps on a 2-D Poisson grid written point by point (u[i, j] = (1-w) u + w/4 (...))."""
    n = 8
    def loss(f, w):
        u = np.zeros((n + 2, n + 2))
        for _ in range(6):
            for i in range(1, n + 1):
                for j in range(1, n + 1):
                    u[i, j] = (1 - w) * u[i, j] + w * 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] + f[i - 1, j - 1])
        return np.sum(u ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.random((n, n)), 1.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def jacobi_eigenvalue_rotations():
    """The cyclic Jacobi eigenvalue method: rotations applied to rows and columns of a copy in
    place (a[[p, q], :] = ..., a[:, [p, q]] = ...), the sum of squares of sorted eigenvalues."""
    n = 4
    def loss(m):
        a = 0.5 * (m + m.T)
        for _ in range(5):
            for p in range(n - 1):
                for q in range(p + 1, n):
                    if abs(a[p, q]) < 1e-14:
                        continue
                    theta = 0.5 * np.arctan2(2 * a[p, q], a[q, q] - a[p, p])
                    c, s = np.cos(theta), np.sin(theta)
                    R = np.array([[c, s], [-s, c]])
                    a[[p, q], :] = R @ a[[p, q], :]
                    a[:, [p, q]] = a[:, [p, q]] @ R.T
        w = np.sort(np.diag(a))
        return np.sum(w * np.arange(1, n + 1))
    return loss, lambda s: (np.random.default_rng(s).standard_normal((n, n)) + np.diag([0.0, 2, 4, 6]),), dict(rtol=1e-4)


def givens_qr_least_squares_inplace():
    """Least squares by Givens rotations zeroing R[i, j] from the bottom up, each rotation
    applied in place to two rows of R and of the right-hand side."""
    m, n = 9, 3
    def loss(A, b):
        R = A.copy(); y = b.copy()
        for j in range(n):
            for i in range(m - 1, j, -1):
                r = np.hypot(R[i - 1, j], R[i, j])
                c, s = R[i - 1, j] / r, R[i, j] / r
                G = np.array([[c, s], [-s, c]])
                R[i - 1:i + 1, j:] = G @ R[i - 1:i + 1, j:]
                y[i - 1:i + 1] = G @ y[i - 1:i + 1]
        coef = np.zeros(n)
        for i in range(n - 1, -1, -1):
            coef[i] = (y[i] - R[i, i + 1:n] @ coef[i + 1:]) / R[i, i]
        return np.sum(coef ** 2) + np.sum(y[n:] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((m, n)), r.standard_normal(m)
    return loss, make, dict(argnums=(0, 1))


def leapfrog_nbody_preallocated():
    """N-body leapfrog with a preallocated acceleration array filled pair by pair
    (acc[i] += ..., acc[j] -= ...), kinetic plus potential energy at the end."""
    N = 5
    def accel(x, m, acc):
        acc[:] = 0.0
        for i in range(N):
            for j in range(i + 1, N):
                d = x[j] - x[i]
                r3 = (d @ d + 0.1) ** 1.5
                acc[i] += m[j] * d / r3
                acc[j] -= m[i] * d / r3
    def loss(x0, v0, m):
        x = x0.copy(); v = v0.copy(); acc = np.empty_like(x)
        accel(x, m, acc)
        for _ in range(10):
            v += 0.5 * 0.01 * acc
            x += 0.01 * v
            accel(x, m, acc)
            v += 0.5 * 0.01 * acc
        return 0.5 * np.sum(m[:, None] * v ** 2) + np.sum(x[:, 0])
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((N, 3)), 0.1 * r.standard_normal((N, 3)), 1 + r.random(N)
    return loss, make, dict(argnums=(0, 1, 2))


def crank_nicolson_thomas_heat():
    """Crank-Nicolson heat equation, the tridiagonal system solved each step by the Thomas
    algorithm into preallocated c' and d' arrays."""
    n = 16
    def loss(u0, kappa):
        u = u0.copy()
        r = kappa * 0.1
        a = -r / 2; b = 1 + r; c = -r / 2
        cp = np.empty(n); dp = np.empty(n); rhs = np.empty(n)
        for _ in range(8):
            rhs[1:-1] = r / 2 * u[:-2] + (1 - r) * u[1:-1] + r / 2 * u[2:]
            rhs[0] = (1 - r) * u[0] + r / 2 * u[1]
            rhs[-1] = (1 - r) * u[-1] + r / 2 * u[-2]
            cp[0] = c / b; dp[0] = rhs[0] / b
            for i in range(1, n):
                den = b - a * cp[i - 1]
                cp[i] = c / den
                dp[i] = (rhs[i] - a * dp[i - 1]) / den
            u[-1] = dp[-1]
            for i in range(n - 2, -1, -1):
                u[i] = dp[i] - cp[i] * u[i + 1]
        return np.sum(u ** 2 * np.arange(n))
    def make(s):
        r = np.random.default_rng(s)
        return r.random(n), 1 + r.random()
    return loss, make, dict(argnums=(0, 1))


def needleman_wunsch_global():
    """Needleman-Wunsch global alignment score table with traced gap and match scores."""
    a = "GATTACA"; b = "GCATGCU"
    def loss(match, gap):
        F = np.zeros((len(a) + 1, len(b) + 1))
        F[:, 0] = -gap * np.arange(len(a) + 1)
        F[0, :] = -gap * np.arange(len(b) + 1)
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                s = match if a[i - 1] == b[j - 1] else -1.0
                F[i, j] = max(F[i - 1, j - 1] + s, F[i - 1, j] - gap, F[i, j - 1] - gap)
        return F[-1, -1]
    return loss, lambda s: (1.0 + 0.1 * np.random.default_rng(s).random(), 1.1 + 0.05 * np.random.default_rng(s + 9).random()), dict(argnums=(0, 1))


def forward_algorithm_scaled_hmm():
    """The HMM forward algorithm with per-step scaling (alpha /= c; loglik += log c)."""
    K, T = 3, 15
    def loss(A, B, pi):
        obs = np.array([0, 1, 1, 0, 2, 2, 1, 0, 0, 1, 2, 1, 0, 2, 1])
        alpha = pi * B[:, obs[0]]
        ll = 0.0
        for t in range(1, T):
            c = alpha.sum(); alpha /= c; ll += np.log(c)
            alpha = (alpha @ A) * B[:, obs[t]]
        return -(ll + np.log(alpha.sum()))
    def make(s):
        r = np.random.default_rng(s)
        A = r.random((K, K)) + np.eye(K); A /= A.sum(1, keepdims=True)
        B = r.random((K, 3)); B /= B.sum(1, keepdims=True)
        return A, B, np.full(K, 1 / K)
    return loss, make, dict(argnums=(0, 1, 2))


def levinson_durbin_inplace():
    """Levinson-Durbin recursion updating the AR coefficients in place (a[1:k] += k * a[k-1:0:-1])."""
    p = 5
    def loss(x):
        n = len(x)
        r = np.array([x[:n - k] @ x[k:] for k in range(p + 1)]) / n
        a = np.zeros(p + 1); a[0] = 1.0
        err = r[0]
        for k in range(1, p + 1):
            acc = r[k] + a[1:k] @ r[k - 1:0:-1]
            kk = -acc / err
            a[1:k] += kk * a[k - 1:0:-1]
            a[k] = kk
            err *= 1 - kk ** 2
        return err + np.sum(a ** 2)
    return loss, lambda s: (np.sin(0.3 * np.arange(60)) + 0.3 * np.random.default_rng(s).standard_normal(60),), {}


def lanczos_tridiagonalisation():
    """Lanczos with full reorthogonalisation by in-place subtraction, eigenvalues of the
    tridiagonal T by eigh_tridiagonal."""
    n, k = 12, 5
    def loss(d):
        A = np.diag(d) + 0.3 * (np.eye(n, k=1) + np.eye(n, k=-1))
        Q = np.zeros((n, k)); alpha = np.zeros(k); beta = np.zeros(k - 1)
        q = np.ones(n) / np.sqrt(n)
        for j in range(k):
            Q[:, j] = q
            w = A @ q
            alpha[j] = q @ w
            w -= Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
            if j < k - 1:
                beta[j] = np.linalg.norm(w)
                q = w / beta[j]
        return np.sum(scipy.linalg.eigh_tridiagonal(alpha, beta, eigvals_only=True) ** 2)
    return loss, lambda s: (np.arange(n) + np.random.default_rng(s).random(n),), dict(rtol=1e-4)


def bilateral_filter_loops():
    """A 1-D bilateral filter with loops over neighbours, the weights from traced range sigma."""
    def loss(x, sr):
        n = len(x); out = np.empty(n)
        for i in range(n):
            lo, hi = max(0, i - 3), min(n, i + 4)
            win = x[lo:hi]
            w = np.exp(-((np.arange(lo, hi) - i) ** 2) / 4.0 - (win - x[i]) ** 2 / (2 * sr ** 2))
            out[i] = w @ win / w.sum()
        return np.sum((out - x) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.sign(np.sin(np.arange(25) / 4)) + 0.2 * r.standard_normal(25), 0.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def iir_direct_form_ii_transposed():
    """An IIR filter in transposed direct form II, the state z updated in place sample by sample."""
    def loss(b, a, x):
        z = np.zeros(len(a) - 1)
        y = np.empty_like(x)
        for n in range(len(x)):
            y[n] = b[0] * x[n] + z[0]
            z[:-1] = z[1:] + b[1:-1] * x[n] - a[1:-1] * y[n]
            z[-1] = b[-1] * x[n] - a[-1] * y[n]
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([0.2, 0.3, 0.2]) + 0.01 * r.random(3), np.array([1.0, -0.5, 0.2]), r.standard_normal(30)
    return loss, make, dict(argnums=(0, 1, 2))


def allen_cahn_heun_roll_laplacian():
    """A Heun (RK2) integration of an Allen-Cahn field with the Laplacian by np.roll into a
    preallocated lap array, and periodic padding by hand."""
    n = 16
    def loss(u0, eps):
        u = u0.copy(); lap = np.empty_like(u)
        def rhs(v):
            lap[...] = np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1) - 4 * v
            return eps * lap + v - v ** 3
        for _ in range(6):
            k1 = rhs(u)
            k2 = rhs(u + 0.05 * k1)
            u += 0.025 * (k1 + k2)
        return np.mean(0.25 * (u ** 2 - 1) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.2 * r.standard_normal((n, n)), 0.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def kmeans_lloyd_soft_centroids():
    """Lloyd's k-means with assignments by argmin (fixed) and centroids accumulated by
    np.add.at, the within-cluster sum of squares."""
    def loss(X, C0):
        C = C0.copy()
        for _ in range(3):
            d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
            lab = np.argmin(d, axis=1)
            sums = np.zeros_like(C); cnt = np.zeros(len(C))
            np.add.at(sums, lab, X)
            np.add.at(cnt, lab, 1)
            C = sums / np.maximum(cnt, 1)[:, None]
        return np.sum((X - C[lab]) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        X = np.concatenate([r.standard_normal((10, 2)) + [3, 0], r.standard_normal((10, 2)) - [3, 0]])
        return X, np.array([[2.0, 0.5], [-2.0, -0.5]])
    return loss, make, dict(argnums=(0, 1))


def newton_raphson_implicit_euler_jacobian():
    """Implicit Euler on a stiff chemical system, each step a Newton iteration with a
    hand-built Jacobian filled in place and np.linalg.solve."""
    def loss(y0, k):
        y = y0.copy(); J = np.empty((3, 3)); h = 0.1
        for _ in range(5):
            z = y.copy()
            for _ in range(4):
                f = np.array([-k[0] * z[0] + k[1] * z[1] * z[2],
                              k[0] * z[0] - k[1] * z[1] * z[2] - k[2] * z[1] ** 2,
                              k[2] * z[1] ** 2])
                J[0] = [-k[0], k[1] * z[2], k[1] * z[1]]
                J[1] = [k[0], -k[1] * z[2] - 2 * k[2] * z[1], -k[1] * z[1]]
                J[2] = [0.0, 2 * k[2] * z[1], 0.0]
                z -= np.linalg.solve(np.eye(3) - h * J, z - y - h * f)
            y[:] = z
        return y[0] + 2 * y[2]
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.0, 0.0, 0.0]) + 0.01 * r.random(3), np.array([0.4, 10.0, 3.0]) * (1 + 0.1 * r.random(3))
    return loss, make, dict(argnums=(0, 1))


def bellman_ford_relaxation():
    """Bellman-Ford relaxing edges in Python loops (dist[v] = dist[u] + w where shorter)."""
    edges = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4), (2, 4), (4, 5), (3, 5)]
    def loss(w):
        dist = np.full(6, np.inf); dist[0] = 0.0
        for _ in range(5):
            for e, (u, v) in enumerate(edges):
                if dist[u] + w[e] < dist[v]:
                    dist[v] = dist[u] + w[e]
        return np.sum(dist)
    return loss, lambda s: (1 + np.random.default_rng(s).random(len(edges)),), {}



def lu_crout_banded_inplace():
    """Crout LU of a pentadiagonal matrix stored as a (5, n) band array, factors written
    over it in place, then the solve."""
    n = 12
    def loss(d, rhs):
        ab = np.zeros((5, n))
        ab[2] = d; ab[1, 1:] = -1.0; ab[3, :-1] = -1.0; ab[0, 2:] = 0.1; ab[4, :-2] = 0.1
        A = np.zeros((n, n))
        for k in range(-2, 3):
            A += np.diag(ab[2 - k, max(k, 0):n + min(k, 0)] if k >= 0 else ab[2 - k, :n + k], k)
        for k in range(n - 1):
            A[k + 1:k + 3, k] /= A[k, k]
            A[k + 1:k + 3, k + 1:k + 3] -= np.outer(A[k + 1:k + 3, k], A[k, k + 1:k + 3])
        y = rhs.copy()
        for i in range(1, n):
            y[i] -= A[i, max(0, i - 2):i] @ y[max(0, i - 2):i]
        for i in range(n - 1, -1, -1):
            y[i] = (y[i] - A[i, i + 1:i + 3] @ y[i + 1:i + 3]) / A[i, i]
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def gram_schmidt_modified_inplace():
    """Modified Gram-Schmidt orthonormalising the columns of a copy in place."""
    def loss(A):
        Q = A.copy(); n = Q.shape[1]; R = np.zeros((n, n))
        for j in range(n):
            for i in range(j):
                R[i, j] = Q[:, i] @ Q[:, j]
                Q[:, j] -= R[i, j] * Q[:, i]
            R[j, j] = np.linalg.norm(Q[:, j])
            Q[:, j] /= R[j, j]
        return np.sum(np.log(np.abs(np.diag(R)))) + np.sum(Q[:3] ** 3)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((8, 4)),), {}


def power_iteration_pagerank_inplace():
    """PageRank by power iteration on a column-stochastic matrix built from traced weights,
    the rank vector updated in place (r[:] = d * M @ r + (1 - d) / n)."""
    n = 8
    mask = (np.random.default_rng(4).random((n, n)) < 0.4) | np.eye(n, k=1, dtype=bool) | np.eye(n, k=-(n - 1), dtype=bool)
    def loss(w, d):
        W = np.where(mask, w, 0.0)
        M = W / W.sum(axis=0, keepdims=True)
        r = np.full(n, 1.0 / n)
        for _ in range(30):
            r[:] = d * (M @ r) + (1 - d) / n
        return r @ np.arange(n)
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 + r.random((n, n)), 0.85
    return loss, make, dict(argnums=(0, 1))


def verlet_list_lennard_jones_forces():
    """Molecular dynamics forces accumulated into a preallocated array over a neighbour list
    built once (pairs within a cutoff), f[i] += fij; f[j] -= fij."""
    N = 8
    def loss(x):
        pairs = [(i, j) for i in range(N) for j in range(i + 1, N)
                 if np.linalg.norm(np.asarray(x[i] - x[j])) < 2.5]
        f = np.zeros_like(x); e = 0.0
        for i, j in pairs:
            d = x[i] - x[j]
            r2 = d @ d
            inv6 = 1.0 / r2 ** 3
            e += 4 * (inv6 ** 2 - inv6)
            fij = (48 * inv6 ** 2 - 24 * inv6) / r2 * d
            f[i] += fij
            f[j] -= fij
        return e + 0.01 * np.sum(f ** 2)
    def make(s):
        r = np.random.default_rng(s)
        g = np.stack(np.meshgrid([0, 1.2], [0, 1.2], [0, 1.2], indexing="ij"), -1).reshape(-1, 3)
        return g + 0.05 * r.standard_normal((N, 3))
    return loss, lambda s: (make(s),), {}


def upwind_burgers_loop_cfl():
    """Inviscid Burgers with a first-order upwind scheme written as an index loop choosing the
    side by the sign of u[i], a fixed dt."""
    n = 20
    def loss(u0):
        u = u0.copy(); new = np.empty_like(u)
        for _ in range(6):
            for i in range(n):
                if u[i] > 0:
                    new[i] = u[i] - 0.2 * u[i] * (u[i] - u[i - 1])
                else:
                    new[i] = u[i] - 0.2 * u[i] * (u[(i + 1) % n] - u[i])
            u, new = new, u
        return np.sum(u ** 2)
    return loss, lambda s: (np.sin(2 * np.pi * np.arange(n) / n) + 0.1 * np.random.default_rng(s).random(n),), {}


def bilinear_image_resize_loops():
    """A bilinear resize written with loops and floor/ceil weights into a preallocated output."""
    def loss(img):
        H, W = img.shape; oh, ow = 7, 9
        out = np.zeros((oh, ow))
        for i in range(oh):
            y = i * (H - 1) / (oh - 1); y0 = int(np.floor(y)); y1 = min(y0 + 1, H - 1); wy = y - y0
            for j in range(ow):
                x = j * (W - 1) / (ow - 1); x0 = int(np.floor(x)); x1 = min(x0 + 1, W - 1); wx = x - x0
                out[i, j] = ((1 - wy) * ((1 - wx) * img[y0, x0] + wx * img[y0, x1])
                             + wy * ((1 - wx) * img[y1, x0] + wx * img[y1, x1]))
        return np.sum(out ** 2) + out[3, 4]
    return loss, lambda s: (np.random.default_rng(s).random((5, 6)),), {}


def adam_optimizer_state_inplace():
    """An Adam optimiser by hand (m *= b1; m += (1-b1) g; v likewise), inner training of a
    ridge model whose outer loss is differentiated in the data and learning rate."""
    def loss(X, y, lr):
        w = np.zeros(X.shape[1]); m = np.zeros_like(w); v = np.zeros_like(w)
        for t in range(1, 11):
            g = X.T @ (X @ w - y) / len(y) + 0.01 * w
            m *= 0.9; m += 0.1 * g
            v *= 0.999; v += 0.001 * g ** 2
            mh = m / (1 - 0.9 ** t); vh = v / (1 - 0.999 ** t)
            w -= lr * mh / (np.sqrt(vh) + 1e-8)
        return np.mean((X @ w - y) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((20, 3)), r.standard_normal(20), 0.05 + 0.01 * r.random()
    return loss, make, dict(argnums=(0, 1, 2))


def radix2_fft_by_hand():
    """An iterative radix-2 Cooley-Tukey FFT: bit reversal by fancy indexing, butterflies
    writing a[k] and a[k + half] in place; the power spectrum's weighted sum."""
    n = 16
    bits = 4
    rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)])
    def loss(x):
        a = x[rev].astype(complex)
        size = 2
        while size <= n:
            half = size // 2
            w = np.exp(-2j * np.pi * np.arange(half) / size)
            for start in range(0, n, size):
                t = w * a[start + half:start + size]
                u = a[start:start + half].copy()
                a[start:start + half] = u + t
                a[start + half:start + size] = u - t
            size *= 2
        return np.sum(np.abs(a) ** 2 * np.arange(n)) / n
    return loss, lambda s: (np.random.default_rng(s).standard_normal(n),), {}


def birth_death_moment_equations_euler():
    """Expected trajectory of a birth-death process by the moment equations stepped with
    explicit Euler into a preallocated history array."""
    def loss(k):
        hist = np.empty((40, 2)); m = np.array([5.0, 30.0])
        for t in range(40):
            dm = np.array([k[0] - k[1] * m[0], k[2] + 2 * k[0] + k[1] * m[0] - 2 * k[1] * m[1]])
            m += 0.05 * dm
            hist[t] = m
        return np.sum((hist[:, 0] - 8.0) ** 2) + np.sum(hist[-5:, 1])
    return loss, lambda s: (np.array([2.0, 0.3, 0.1]) * (1 + 0.1 * np.random.default_rng(s).random(3)),), {}


def sinkhorn_log_domain_inplace():
    """Sinkhorn iterations in the log domain with logsumexp, f and g updated in place."""
    n = 6
    def loss(a, C, eps):
        b = np.full(n, 1.0 / n)
        f = np.zeros(n); g = np.zeros(n)
        for _ in range(20):
            f[:] = eps * np.log(a) - eps * scipy.special.logsumexp((g[None, :] - C) / eps, axis=1)
            g[:] = eps * np.log(b) - eps * scipy.special.logsumexp((f[:, None] - C) / eps, axis=0)
        P = np.exp((f[:, None] + g[None, :] - C) / eps)
        return np.sum(P * C)
    def make(s):
        r = np.random.default_rng(s)
        a = r.random(n) + 0.5; a /= a.sum()
        x = r.random(n)
        return a, (x[:, None] - np.linspace(0, 1, n)[None]) ** 2, 0.1
    return loss, make, dict(argnums=(0, 1, 2))


def wave_equation_leapfrog_three_buffers():
    """The 1-D wave equation with three rotating buffers (prev, cur, nxt) and fixed ends."""
    n = 30
    def loss(u0, c):
        prev = u0.copy(); cur = u0.copy(); nxt = np.zeros(n)
        r2 = (c * 0.5) ** 2
        for _ in range(15):
            nxt[1:-1] = 2 * cur[1:-1] - prev[1:-1] + r2 * (cur[2:] - 2 * cur[1:-1] + cur[:-2])
            nxt[0] = nxt[-1] = 0.0
            prev, cur, nxt = cur, nxt, prev
        return np.sum(cur ** 2) + cur[n // 3]
    def make(s):
        r = np.random.default_rng(s)
        x = np.linspace(0, 1, n)
        return np.exp(-((x - 0.4 - 0.1 * r.random()) / 0.1) ** 2), 0.9 + 0.05 * r.random()
    return loss, make, dict(argnums=(0, 1))


def local_polynomial_regression_loop():
    """LOESS by hand: a weighted least-squares fit per point with tricube weights, solved by
    np.linalg.lstsq of the weighted design, results written into fitted[i]."""
    def loss(x, y):
        n = len(x); fitted = np.empty(n)
        for i in range(n):
            d = np.abs(x - x[i]); h = np.sort(d)[5]
            w = np.clip(1 - (d / h) ** 3, 0, None) ** 3
            sw = np.sqrt(w)
            X = np.stack([np.ones(n), x - x[i]], axis=1)
            beta = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)[0]
            fitted[i] = beta[0]
        return np.sum((fitted - y) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        x = np.sort(r.random(15)); return x, np.sin(4 * x) + 0.1 * r.standard_normal(15)
    return loss, make, dict(argnums=(1,))


def simplex_projection_sorting():
    """Euclidean projection onto the simplex by sorting (Duchi et al.), inside a projected
    gradient loop with w -= lr * g; w[:] = proj(w)."""
    def proj(v):
        u = np.sort(v)[::-1]
        css = np.cumsum(u)
        rho = np.nonzero(u * np.arange(1, len(v) + 1) > (css - 1))[0][-1]
        theta = (css[rho] - 1) / (rho + 1.0)
        return np.maximum(v - theta, 0)
    def loss(Sigma, mu):
        w = np.full(len(mu), 1.0 / len(mu))
        for _ in range(15):
            g = Sigma @ w - mu
            w -= 0.1 * g
            w[:] = proj(w)
        return w @ Sigma @ w - mu @ w
    def make(s):
        r = np.random.default_rng(s)
        A = r.standard_normal((5, 5)); return A @ A.T / 5 + np.eye(5), 0.5 * r.random(5)
    return loss, make, dict(argnums=(0, 1))


def runge_kutta_fehlberg_fixed_tableau():
    """RK45 stages from the Butcher tableau in arrays, k stored in a (6, n) preallocated array
    by rows, a fixed step (the embedded error only reported)."""
    A = np.array([[0, 0, 0, 0, 0], [1 / 4, 0, 0, 0, 0], [3 / 32, 9 / 32, 0, 0, 0],
                  [1932 / 2197, -7200 / 2197, 7296 / 2197, 0, 0], [439 / 216, -8, 3680 / 513, -845 / 4104, 0],
                  [-8 / 27, 2, -3544 / 2565, 1859 / 4104, -11 / 40]])
    b5 = np.array([16 / 135, 0, 6656 / 12825, 28561 / 56430, -9 / 50, 2 / 55])
    def loss(y0, mu):
        y = y0.copy(); K = np.zeros((6, 2)); h = 0.1
        for _ in range(10):
            for s in range(6):
                ys = y + h * (A[s, :s] @ K[:s]) if s else y
                K[s, 0] = ys[1]
                K[s, 1] = mu * (1 - ys[0] ** 2) * ys[1] - ys[0]
            y += h * (b5 @ K)
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return np.array([2.0, 0.0]) + 0.1 * r.random(2), 0.5 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def ewma_volatility_garch_filter():
    """A GARCH(1,1) variance filter written sample by sample into sigma2[t], the Gaussian
    negative log-likelihood in its parameters."""
    def loss(params, r):
        omega, alpha, beta = params
        T = len(r); sigma2 = np.empty(T)
        sigma2[0] = np.var(r)
        for t in range(1, T):
            sigma2[t] = omega + alpha * r[t - 1] ** 2 + beta * sigma2[t - 1]
        return 0.5 * np.sum(np.log(sigma2) + r ** 2 / sigma2)
    def make(s):
        rng = np.random.default_rng(s)
        return np.array([0.05, 0.1, 0.85]), 0.5 * rng.standard_normal(40)
    return loss, make, dict(argnums=(0, 1))



def nditer_readwrite_relaxation():
    """An element-wise relaxation written with np.nditer(op_flags=["readwrite"]) as older
    tutorials teach, x[...] = f(x) per element."""
    def loss(u, t):
        v = u.copy()
        with np.nditer(v, op_flags=["readwrite"]) as it:
            for x in it:
                x[...] = np.tanh(t * x) + 0.1 * x
        return np.sum(v ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 4)), 1.3), dict(argnums=(0, 1))


def ndenumerate_stencil_boundary():
    """A Laplacian smoothing over np.ndenumerate of a grid, boundary cells skipped by index
    tests, writing into new[i, j]."""
    def loss(u):
        new = u.copy()
        n, m = u.shape
        for (i, j), val in np.ndenumerate(u):
            if 0 < i < n - 1 and 0 < j < m - 1:
                new[i, j] = 0.5 * val + 0.125 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
        return np.sum(new ** 3)
    return loss, lambda s: (np.random.default_rng(s).random((5, 6)),), {}


def flat_put_fill_diagonal_assembly():
    """Matrix assembly through a.flat[k] = ..., np.put of a traced vector and np.fill_diagonal
    of traced values, then a solve."""
    n = 6
    def loss(d, off):
        A = np.zeros((n, n))
        np.fill_diagonal(A, d)
        idx = np.arange(n - 1) * (n + 1) + 1
        np.put(A, idx, off)
        A.flat[idx + n - 1] = off
        return np.sum(np.linalg.solve(A, np.ones(n)))
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(n), -0.5 - 0.2 * r.random(n - 1)
    return loss, make, dict(argnums=(0, 1))


def transposed_view_inplace_symmetric_update():
    """A symmetric rank-2 update written through the transposed view (A.T[...] += ...), and the
    upper triangle mirrored by A[il] = A.T[il]."""
    n = 5
    il = np.tril_indices(n, -1)
    def loss(A0, u, v):
        A = np.triu(A0).copy()
        A += np.triu(np.outer(u, v) + np.outer(v, u))
        A.T[...] += 0.0
        A[il] = A.T[il]
        return np.linalg.slogdet(A @ A.T + np.eye(n))[1]
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((n, n)), r.standard_normal(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1, 2))


def matmul_out_cumsum_out_chain():
    """A linear recurrence with np.matmul(out=), np.cumsum(out=) and np.divide(where=, out=)
    into preallocated buffers."""
    def loss(W, x0):
        x = x0.copy(); tmp = np.empty_like(x); cs = np.empty_like(x); ratio = np.zeros_like(x)
        for _ in range(5):
            np.matmul(W, x, out=tmp)
            np.tanh(tmp, out=x)
            np.cumsum(x, out=cs)
            np.divide(x, cs, out=ratio, where=np.abs(cs) > 0.1)
        return np.sum(ratio) + np.sum(x ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 0.5 * r.standard_normal((6, 6)), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def reversed_view_backward_sweep():
    """An exponential smoother run forward and backward, the backward pass over x[::-1] views
    written in place (a two-pass filtfilt by hand)."""
    def loss(x, a):
        y = x.copy()
        for i in range(1, len(y)):
            y[i] = a * y[i] + (1 - a) * y[i - 1]
        r = y[::-1]
        for i in range(1, len(r)):
            r[i] = a * r[i] + (1 - a) * r[i - 1]
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(25), 0.3 + 0.1 * r.random()
    return loss, make, dict(argnums=(0, 1))


def structured_particles_recarray():
    """Particles in a structured array (fields x, v, m) updated field by field in place."""
    dt = np.dtype([("x", float), ("v", float), ("m", float)])
    def loss(x0, v0):
        p = np.zeros(len(x0), dtype=dt)
        p["x"] = x0; p["v"] = v0; p["m"] = 1.0
        for _ in range(5):
            p["v"] -= 0.1 * p["x"] / p["m"]
            p["x"] += 0.1 * p["v"]
        return np.sum(p["x"] ** 2 + p["v"] ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1))


def einsum_out_tensor_contraction_sweep():
    """A tensor-train style contraction sweep with np.einsum(out=) into reused buffers."""
    def loss(cores, v):
        left = np.ones(1); buf = np.empty(3)
        for c in cores:
            np.einsum("i,ijk,j->k", left, c, v, out=buf)
            left = buf.copy()
        return np.sum(left ** 2)
    def make(s):
        r = np.random.default_rng(s)
        cores = [r.standard_normal((1, 4, 3))] + [r.standard_normal((3, 4, 3)) for _ in range(3)]
        return np.stack(cores[1:]), r.standard_normal(4)
    def wrapped(cores, v):
        return loss([np.ones((1, 4, 3)) * 0.5] + list(cores), v)
    return wrapped, make, dict(argnums=(0, 1))


def rolling_window_zscore_loop():
    """A rolling z-score with a running sum and sum of squares updated in place as the window
    slides (s += x[i] - x[i - w])."""
    w = 5
    def loss(x):
        n = len(x); z = np.zeros(n)
        s = np.sum(x[:w]); s2 = np.sum(x[:w] ** 2)
        for i in range(w, n):
            s += x[i] - x[i - w]
            s2 += x[i] ** 2 - x[i - w] ** 2
            mean = s / w
            var = s2 / w - mean ** 2
            z[i] = (x[i] - mean) / np.sqrt(var + 1e-6)
        return np.sum(z ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(30),), {}


def scipy_solve_triangular_inplace_overwrite():
    """Cholesky by scipy.linalg.cho_factor(overwrite_a=True) on a copy and
    solve_triangular(overwrite_b=True): the in-place LAPACK flags as people pass them."""
    n = 5
    def loss(A0, b):
        A = A0 @ A0.T + n * np.eye(n)
        c, low = scipy.linalg.cho_factor(A.copy(), lower=True, overwrite_a=True)
        y = scipy.linalg.solve_triangular(c, b.copy(), lower=True, overwrite_b=True)
        return y @ y + np.sum(np.log(np.diag(c)))
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((n, n)), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))


def ode_adams_bashforth_history_deque():
    """Adams-Bashforth 3 with the derivative history kept in a preallocated (3, n) array
    rolled in place (hist[:-1] = hist[1:])."""
    def loss(y0, k):
        y = y0.copy(); hist = np.zeros((3, len(y))); h = 0.05
        f = lambda y: -k * y + np.sin(y[::-1])  # noqa: E731
        for i in range(3):
            hist[i] = f(y); y = y + h * hist[i]
        for _ in range(12):
            hist[:-1] = hist[1:].copy()
            hist[-1] = f(y)
            y += h / 12 * (23 * hist[2] - 16 * hist[1] + 5 * hist[0])
        return np.sum(y ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(4), 1 + r.random(4)
    return loss, make, dict(argnums=(0, 1))


def sparse_jacobi_csr_arrays_iteration():
    """Jacobi iterations on a scipy.sparse.csr_array whose data is traced, diagonal by
    A.diagonal(), the residual by A @ x, x updated in place."""
    n = 15
    def loss(d, b):
        A = scipy.sparse.diags_array([-np.ones(n - 1), d, -np.ones(n - 1)], offsets=[-1, 0, 1], format="csr")
        x = np.zeros(n); D = A.diagonal()
        for _ in range(20):
            x += (b - A @ x) / D
        return np.sum(x ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return 3 + r.random(n), r.standard_normal(n)
    return loss, make, dict(argnums=(0, 1))



def romberg_table_inplace():
    """Romberg integration: trapezoid refinements in R[i, 0], Richardson extrapolation filling
    the table in place, of an integrand with traced parameters."""
    def loss(p):
        f = lambda x: np.exp(-p[0] * x) * np.cos(p[1] * x)  # noqa: E731
        a, b, K = 0.0, 2.0, 5
        R = np.zeros((K, K))
        h = b - a
        R[0, 0] = 0.5 * h * (f(a) + f(b))
        for i in range(1, K):
            h /= 2
            R[i, 0] = 0.5 * R[i - 1, 0] + h * np.sum(f(a + h * np.arange(1, 2 ** i, 2)))
            for j in range(1, i + 1):
                R[i, j] = R[i, j - 1] + (R[i, j - 1] - R[i - 1, j - 1]) / (4 ** j - 1)
        return R[-1, -1] ** 2
    return loss, lambda s: (np.array([0.5, 2.0]) + 0.1 * np.random.default_rng(s).random(2),), {}


def newton_deflation_synthetic_division():
    """All real roots of a polynomial by Newton's method with Horner evaluation, each root
    deflated from the coefficients by synthetic division in place (b[k] += root * b[k-1])."""
    def loss(c):
        b = c.copy(); roots = np.zeros(len(c) - 1)
        for r in range(len(c) - 1):
            x = 0.0 + 0.1 * r
            for _ in range(30):
                p = b[0]; dp = 0.0
                for k in range(1, len(b)):
                    dp = dp * x + p
                    p = p * x + b[k]
                x = x - p / dp
            roots[r] = x
            for k in range(1, len(b)):
                b[k] += x * b[k - 1]
            b = b[:-1].copy()
        return np.sum(np.sort(roots) * np.arange(1, len(roots) + 1))
    def make(s):
        z = np.array([-1.5, 0.4, 1.7, 3.1]) + 0.05 * np.random.default_rng(s).random(4)
        return np.poly(z),
    return loss, make, dict(rtol=1e-4)


SLOW = {"gauss_seidel_sor_sweeps", "rk4_preallocated_stages", "kalman_joseph_update_inplace",
        "sinkhorn_log_domain_inplace", "verlet_list_lennard_jones_forces",
        "runge_kutta_fehlberg_fixed_tableau", "upwind_burgers_loop_cfl",
        "local_polynomial_regression_loop", "birth_death_moment_equations_euler",
        "newton_raphson_implicit_euler_jacobian",
        "csgraph_shortest_path_traced_weights", "curve_fit_spectral_line",
        "dct_poisson_neumann_solver", "dict_state_predator_prey_spatial",
        "eigh_subset_expm_frechet_dare", "expm_multiply_master_equation",
        "fem_1d_poisson_lil_spsolve", "fem_2d_coo_assembly_spsolve", "hydrology_bucket_model",
        "image_registration_shift_ssd", "interp_pchip_akima_hydrograph",
        "interpn_rectbivariate_linear_nd", "kalman_class_step_solve_pos",
        "lbfgsb_bounded_calibration_jac_true", "lfilter_axis0_traced_sos",
        "linalg_matrix_functions_funm_power", "lsoda_vectorized_and_odeint_dfun",
        "mcmc_log_likelihood_random_walk", "minimize_inner_bfgs_hyperparameter",
        "ndimage_map_coordinates_optical_flow_warp", "newton_vectorized_and_root_scalar",
        "odeint_sir_fit", "out_everywhere_diffusion_reaction", "partial_closure_rk_integrator",
        "pk_two_compartment_solve_ivp", "power_flow_newton_sparse",
        "quad_spectral_radiance_integral", "quad_vec_dblquad_moments",
        "shallow_water_lax_friedrichs_1d", "slsqp_constrained_portfolio",
        "solve_bvp_beam_deflection", "solve_ivp_events_projectile_drag",
        "solve_ivp_radau_stiff_with_jacobian", "solver_object_history_np_append",
        "sparse_csr_row_slicing_markov_chain", "sparse_dok_lil_rows_hstack_block_diag",
        "sparse_inplace_data_scaling_gmres", "sparse_multiply_hadamard_graph_smoothing",
        "spectrogram_coherence_csd", "stats_count_models_shape_parameters",
        "stats_gamma_cdf_shape_and_dirichlet", "tomography_rotate_backprojection",
        "traffic_lwr_godunov", "truncnorm_ppf_quantile_matching",
        "trust_constr_nonlinear_constraint", "value_iteration_gridworld",
        "vectorized_black_scholes_greeks", "work_buffers_reused_across_calls"}

PROGRAMS = [pytest.param(p, marks=pytest.mark.slow) if p.__name__ in SLOW else p for p in [
    optics_beam_propagation_fft,
    acoustics_room_modes_eigh,
    hartree_fock_scf_eigh,
    cahn_hilliard_fft_semi_implicit,
    shallow_water_lax_friedrichs_1d,
    sph_density_pressure,
    traffic_lwr_godunov,
    hydrology_bucket_model,
    climate_energy_balance_latitude,
    pk_two_compartment_solve_ivp,
    power_flow_newton_sparse,
    fem_1d_poisson_lil_spsolve,
    fem_2d_coo_assembly_spsolve,
    tomography_rotate_backprojection,
    image_registration_shift_ssd,
    audio_lfilter_biquad_cascade,
    audio_sosfilt_stft_spectral_flux,
    gp_regression_cho_factor,
    mcmc_log_likelihood_random_walk,
    value_iteration_gridworld,
    ising_mean_field_tanh_iteration,
    queue_mm1_tandem_lindley,
    portfolio_mean_variance_minimize,
    survival_cox_partial_likelihood,
    survival_kaplan_meier_weibull_fit,
    seismology_reflectivity_convolution,
    crystallography_structure_factors,
    masked_gauge_network_fill,
    polynomial_class_chebyshev_fit,
    polynomial_legendre_gauss_quadrature,
    vectorized_black_scholes_greeks,
    fromiter_generator_series,
    partial_closure_rk_integrator,
    dict_state_predator_prey_spatial,
    out_everywhere_diffusion_reaction,
    kalman_class_step_solve_pos,
    odeint_sir_fit,
    quad_spectral_radiance_integral,
    sparse_cg_poisson_2d_kron,
    sparse_eigsh_graph_laplacian,
    sparse_splu_implicit_reaction_diffusion,
    expm_multiply_master_equation,
    ndimage_cell_segmentation_filters,
    ndimage_map_coordinates_optical_flow_warp,
    savgol_find_peaks_spectroscopy,
    filtfilt_resample_eeg_bandpower,
    interp_regular_grid_atmosphere,
    univariate_spline_smoothing,
    special_functions_bessel_waveguide,
    stats_mixture_loglik_logpdf,
    linalg_lyapunov_controllability,
    lu_factor_reused_implicit_steps,
    solve_banded_cubic_spline_by_hand,
    minimize_inner_bfgs_hyperparameter,
    least_squares_michaelis_menten,
    root_fsolve_chemical_equilibrium,
    histogram_interp_cumulative_quantile,
    take_put_along_axis_topk_attention,
    sparse_inplace_data_scaling_gmres,
    sparse_bmat_saddle_point_stokes,
    sparse_linear_operator_lsqr_deconvolution,
    sparse_csr_row_slicing_markov_chain,
    sparse_multiply_hadamard_graph_smoothing,
    ndimage_convolve1d_separable_sharpen,
    ndimage_zoom_affine_super_resolution,
    ndimage_distance_transform_weighted_loss,
    ndimage_generic_filter_local_variance,
    signal_lfilter_zi_streaming_blocks,
    signal_sosfiltfilt_decimate_periodogram,
    signal_upfirdn_polyphase_resampler,
    solve_ivp_events_projectile_drag,
    solve_ivp_radau_stiff_with_jacobian,
    cumulative_trapezoid_simpson_work,
    solve_bvp_beam_deflection,
    lbfgsb_bounded_calibration_jac_true,
    curve_fit_spectral_line,
    minimize_scalar_brentq_optics_focus,
    interp_pchip_akima_hydrograph,
    rbf_griddata_terrain,
    splrep_splev_smoothing_spline,
    kdtree_lennard_jones_cutoff,
    pdist_squareform_mds_stress,
    multivariate_normal_t_logpdf_robust,
    gaussian_kde_density_loss,
    linalg_cholesky_solve_triangular_whitening,
    linalg_qr_economic_pinv_regression,
    linalg_sqrtm_logm_polar_strain,
    linalg_eig_nonsymmetric_stability,
    toeplitz_levinson_ar_fit,
    frompyfunc_piecewise_select_constitutive,
    ufunc_at_reduceat_outer_histogram_features,
    sliding_window_view_local_regression,
    copyto_putmask_place_imputation,
    nan_to_num_unwrap_phase_tracking,
    quantile_partition_sort_inplace_robust_stats,
    cov_corrcoef_norm_pca_whitening,
    einsum_diagonal_view_write_and_block,
    list_of_traced_scalars_asarray,
    full_fill_empty_like_tri_vander,
    polyfit_poly1d_roots_calibration_curve,
    unique_counts_isin_setdiff_bookkeeping,
    gradient_edge_order_trapezoid_2d,
    numpy2_array_api_functions,
    rot90_flip_roll_inplace_symmetrize,
    broadcast_arrays_ascontiguous_fortran_ops,
    masked_array_ops_climatology,
    logger_of_dicts_then_columns,
    generator_pipeline_windowed_features,
    work_buffers_reused_across_calls,
    dct_poisson_neumann_solver,
    batched_small_systems_solve_inv,
    eigh_subset_expm_frechet_dare,
    assignment_matching_then_traced_cost,
    csgraph_shortest_path_traced_weights,
    legendre_roots_eval_quadrature,
    truncnorm_ppf_quantile_matching,
    quad_vec_dblquad_moments,
    rng_normal_traced_location_scale,
    rng_choice_traced_probabilities_resample,
    freqz_iir_design_fit,
    lfilter_traced_denominator_ar_fit,
    spectrogram_coherence_csd,
    bspline_lsq_traced_coefficients,
    newton_vectorized_and_root_scalar,
    binary_morphology_mask_then_traced,
    convolve2d_fft_psf_deblur,
    solver_object_history_np_append,
    einsum_ellipsis_out_preallocated_attention,
    slsqp_constrained_portfolio,
    lsoda_vectorized_and_odeint_dfun,
    bicgstab_spilu_preconditioned_convection,
    sparse_manual_csr_matvec_loops,
    sparse_dok_lil_rows_hstack_block_diag,
    sparse_array_api_diags_array,
    ndimage_traced_kernel_correlate_convolve,
    gaussian_filter_3d_wrap_volume,
    lfilter_axis0_traced_sos,
    interpn_rectbivariate_linear_nd,
    special_information_theory_digamma,
    special_bessel_kv_ive_erfcx,
    stats_count_models_shape_parameters,
    stats_gamma_cdf_shape_and_dirichlet,
    linalg_sylvester_schur_hessenberg_ldl,
    linalg_tridiagonal_banded_eigen,
    linalg_matrix_functions_funm_power,
    numpy_linalg_lstsq_tensorsolve_multidot,
    fft_hfft_fftshift_fftn_axes,
    trust_constr_nonlinear_constraint,
    nr_tridag_thomas,
    savitzky_golay_by_hand,
    cholesky_rank_one_update_inplace,
    lu_partial_pivoting_row_swaps,
    rk4_preallocated_stages,
    conjugate_gradient_inplace_axpy,
    kalman_joseph_update_inplace,
    particle_push_add_at_deposit,
    finite_volume_flux_loop,
    median_percentile_filter_by_hand,
    csr_matvec_loop_by_hand,
    floyd_warshall_inplace,
    dtw_sakoe_chiba_weighted_steps,
    viterbi_log_table,
    smith_waterman_soft_scores,
    histogram_equalisation_soft,
    gauss_seidel_sor_sweeps,
    jacobi_eigenvalue_rotations,
    givens_qr_least_squares_inplace,
    leapfrog_nbody_preallocated,
    crank_nicolson_thomas_heat,
    needleman_wunsch_global,
    forward_algorithm_scaled_hmm,
    levinson_durbin_inplace,
    lanczos_tridiagonalisation,
    bilateral_filter_loops,
    iir_direct_form_ii_transposed,
    allen_cahn_heun_roll_laplacian,
    kmeans_lloyd_soft_centroids,
    newton_raphson_implicit_euler_jacobian,
    bellman_ford_relaxation,
    lu_crout_banded_inplace,
    gram_schmidt_modified_inplace,
    power_iteration_pagerank_inplace,
    verlet_list_lennard_jones_forces,
    upwind_burgers_loop_cfl,
    bilinear_image_resize_loops,
    adam_optimizer_state_inplace,
    radix2_fft_by_hand,
    birth_death_moment_equations_euler,
    sinkhorn_log_domain_inplace,
    wave_equation_leapfrog_three_buffers,
    local_polynomial_regression_loop,
    simplex_projection_sorting,
    runge_kutta_fehlberg_fixed_tableau,
    ewma_volatility_garch_filter,
    nditer_readwrite_relaxation,
    ndenumerate_stencil_boundary,
    flat_put_fill_diagonal_assembly,
    transposed_view_inplace_symmetric_update,
    matmul_out_cumsum_out_chain,
    reversed_view_backward_sweep,
    structured_particles_recarray,
    einsum_out_tensor_contraction_sweep,
    rolling_window_zscore_loop,
    scipy_solve_triangular_inplace_overwrite,
    ode_adams_bashforth_history_deque,
    sparse_jacobi_csr_arrays_iteration,
    romberg_table_inplace,
    newton_deflation_synthetic_division,
]]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_research_program(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_research_program_forward_and_second_order(program):
    check_forward_and_second_order(program)


@pytest.mark.parametrize("write", [
    lambda y, fill: np.putmask(y, y > 0.5, fill * 2),
    lambda y, fill: np.place(y, y > 0.5, fill),
    lambda y, fill: np.copyto(y, fill + 1, where=y < -0.5),
], ids=["putmask", "place", "copyto"])
def test_a_python_float_argument_written_into_an_array_is_replayed(write):
    # regression: a replay of np.putmask or np.place writing a value computed from a Python
    # float argument (a Python number in the replay, not a NumPy scalar) failed on the
    # number's address and was traced again
    from tests.test_replay import replayed_like_traced

    def loss(x, fill):
        y = x.copy()
        write(y, fill)
        return np.sum(y * x)

    calls = [(np.random.default_rng(s).standard_normal(12), 0.3 + s) for s in range(4)]
    replayed_like_traced(loss, calls, argnums=(0, 1), traced_once=True)


def _damped_least_squares(method, dense):
    """The solution norm of a damped least-squares fit, in the data and the damping both (a
    ridge path), as an L-curve search writes it."""
    A = scipy.sparse.random(30, 10, density=0.4, random_state=1, format="csr") \
        + scipy.sparse.eye(30, 10)
    if dense:
        A = A.toarray()
    options = dict(atol=1e-13, btol=1e-13, **({"iter_lim": 500} if method == "lsqr"
                                               else {"maxiter": 500}))

    def loss(b, damp):
        x = getattr(scipy.sparse.linalg, method)(A, b, damp=damp, **options)[0]
        return np.sum(x ** 2) + np.sum(np.sin(x))
    return loss


@pytest.mark.parametrize("method", ["lsqr", "lsmr"])
@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_a_traced_damp_of_lsqr_and_lsmr_is_differentiated(method, dense):
    # regression: a traced damp was refused as a traced setting
    import mutad

    loss = _damped_least_squares(method, dense)
    b = np.random.default_rng(0).standard_normal(30)
    damp = 0.7
    kept = b.copy()
    value, (gb, gd) = mutad.value_and_grad(loss, argnums=(0, 1))(b, damp)
    assert value == loss(b, damp)
    assert np.array_equal(b, kept)
    h = 1e-5
    assert np.isclose(gd, (loss(b, damp + h) - loss(b, damp - h)) / (2 * h), rtol=1e-5)
    e = np.zeros(30)
    e[3] = h
    assert np.isclose(gb[3], (loss(b + e, damp) - loss(b - e, damp)) / (2 * h), rtol=1e-5)
    direction = np.random.default_rng(1).standard_normal(30)
    _, tangent = mutad.jvp(loss, (b, damp), (direction, 0.5))
    assert np.isclose(tangent, gb @ direction + 0.5 * gd, rtol=1e-6)
    from tests.test_replay import replayed_like_traced
    replayed_like_traced(loss, [(b * (1 + 0.1 * s), damp + 0.1 * s) for s in range(4)],
                         argnums=(0, 1))


def test_a_number_given_a_none_tangent_is_a_constant():
    # regression: jvp traced a number whose tangent was None (docs: a constant, as an argument
    # left out of gradient's argnums), so a tolerance passed that way was refused as a traced
    # setting of lsqr
    import mutad

    A = scipy.sparse.diags([-1, 2.5, -1], [-1, 0, 1], shape=(8, 8), format="csr")

    def energy(y, tol):
        x = scipy.sparse.linalg.lsqr(A, y, atol=tol, btol=tol)[0]
        return np.sum(x ** 2)

    y = np.linspace(0, 1, 8)
    value, tangent = mutad.jvp(energy, (y, 1e-12), (np.ones(8), None))
    assert value == energy(y, 1e-12)
    assert np.isclose(tangent, mutad.gradient(energy, y, 1e-12, argnums=0) @ np.ones(8),
                      rtol=1e-6)
    seen = []  # (isinstance: a type compared by identity here would stop float() being followed)
    mutad.jvp(lambda y, a, b: seen.append(isinstance(a, float) and isinstance(b, np.float32))
              or np.sum(y * a * b), (y, 0.3, np.float32(2)), (y, None, None))
    assert seen == [True]
