"""Whole research programs as scientists and engineers write them (PDE time steppers with
limiters and multigrid, spectral methods, molecular dynamics with neighbour and cell lists,
Kalman and particle filters, iterative solvers by hand, image processing, ODE fits, Monte
Carlo pricing, networks trained in place, classes, dataclasses, namedtuples, generators,
closures and module-level buffers), each checked four ways: NumPy's value bit for bit, the
gradient against finite differences, ``replay=True`` on later calls with other inputs bit for
bit against tracing (and the results of earlier calls left alone), and the caller's arrays
back bit for bit."""

import copy
import math
import warnings
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.linalg
import scipy.ndimage
import scipy.optimize
import scipy.signal
import scipy.sparse
import scipy.sparse.linalg
import scipy.stats
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import mutad
from mutad.testing import directional_fd


def _leaves(x):
    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, dict):
        return [leaf for item in x.values() for leaf in _leaves(item)]
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in _leaves(item)]
    return []


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _direction(x, rng):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":  # in x's precision, as jvp takes it
        return rng.standard_normal(x.shape).astype(x.dtype)
    if isinstance(x, float):
        return float(rng.standard_normal())
    if isinstance(x, dict):
        return {k: _direction(y, rng) for k, y in x.items()}
    if isinstance(x, (tuple, list)):
        items = [_direction(y, rng) for y in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return None


def _dot(g, v):
    if v is None:
        return 0.0
    if isinstance(g, dict):
        return sum(_dot(g[k], v[k]) for k in g)
    if isinstance(g, (tuple, list)):
        return sum(_dot(a, b) for a, b in zip(g, v, strict=True))
    return float(np.sum(np.asarray(g) * np.asarray(v)))


def _check(program, argnums=0, rtol=1e-5, step=1e-4, seeds=(0, 1, 2)):
    """``program()`` -> ``(f, make)``, ``make(seed)`` the arguments of one call."""
    f, make = program()
    nums = (argnums,) if isinstance(argnums, int) else argnums
    args = make(seeds[0])
    before = [a.tobytes() for a in _leaves(args)]
    expected = f(*copy.deepcopy(args))
    value, grads = mutad.value_and_gradient(f, *args, argnums=argnums)
    assert [a.tobytes() for a in _leaves(args)] == before
    assert _same(value, expected)
    rng = np.random.default_rng(7)
    directions = [_direction(a, rng) if i in nums else None for i, a in enumerate(args)]
    fd = directional_fd(f, args, directions, step=step)
    per_argument = (grads,) if isinstance(argnums, int) else grads
    ad = sum(_dot(per_argument[k], directions[i]) for k, i in enumerate(nums))
    assert np.isclose(ad, fd, rtol=rtol, atol=1e-9 * max(1.0, abs(fd)))
    return _check_replay(f, make, argnums, seeds)


def _check_replay(f, make, argnums, seeds):
    """``replay=True`` on calls with ``make(seed)``'s arguments: bit for bit as tracing and
    NumPy, the caller's arrays left alone, and earlier calls' results untouched by later ones."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    kept = []
    for seed in seeds:
        args = make(seed)
        before = [a.tobytes() for a in _leaves(args)]
        got = replaying(*args)
        assert [a.tobytes() for a in _leaves(args)] == before
        traced = mutad.value_and_gradient(f, *make(seed), argnums=argnums)
        assert _same(got[0], traced[0]) and _same(got[1], traced[1])
        assert _same(got[0], f(*make(seed)))
        kept.append((got, copy.deepcopy(got)))
    for got, snapshot in kept:  # a later call leaves what an earlier one returned alone
        assert _same(got[0], snapshot[0]) and _same(got[1], snapshot[1])
    return replaying


# ----------------------------------------------------------------------------------------------
# PDE time steppers


def heat_explicit():
    nx = 40
    x = np.linspace(0, 1, nx)
    dx = x[1] - x[0]

    def loss(kappa):
        u = np.sin(np.pi * x) + 0.3 * np.sin(3 * np.pi * x)
        dt = 0.4 * dx**2 / kappa.max()
        kf = 0.5 * (kappa[1:] + kappa[:-1])
        for _ in range(60):
            flux = kf * (u[1:] - u[:-1]) / dx
            u[1:-1] += dt / dx * (flux[1:] - flux[:-1])
            u[0] = u[-1] = 0.0
        return np.sum(u**2) * dx
    return loss, lambda s: (1.0 + 0.2 * np.random.default_rng(s).random(nx),)


def heat_crank_nicolson_banded():
    nx = 30
    x = np.linspace(0, 1, nx + 2)[1:-1]
    dx = 1.0 / (nx + 1)

    def loss(u0, D):
        r = D * 0.01 / dx**2
        ab = np.zeros((3, nx))
        ab[0, 1:] = -r / 2
        ab[1, :] = 1 + r
        ab[2, :-1] = -r / 2
        u = u0.copy()
        rhs = np.empty_like(u)
        for _ in range(20):
            rhs[:] = (1 - r) * u
            rhs[1:] += r / 2 * u[:-1]
            rhs[:-1] += r / 2 * u[1:]
            u = scipy.linalg.solve_banded((1, 1), ab, rhs)
        return u @ u

    def make(s):
        rng = np.random.default_rng(s)
        return np.sin(np.pi * x) + 0.1 * rng.standard_normal(nx), 0.5 + rng.random()
    return loss, make


def wave_leapfrog_rotating_buffers():
    nx = 64
    dx = 1.0 / nx
    dt = 0.5 * dx

    def loss(u0, c):
        u_prev = u0.copy()
        u = u0.copy()
        lap = np.zeros_like(u)
        for _ in range(80):
            lap[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
            u_next = 2 * u - u_prev + (c[0] * dt / dx) ** 2 * lap
            u_next[0] = 0.0
            u_next[-1] = 0.0
            u_prev, u = u, u_next
        return 0.5 * np.sum(((u - u_prev) / dt) ** 2) * dx

    def make(s):
        rng = np.random.default_rng(s)
        xx = np.linspace(0, 1, nx)
        return (np.exp(-100 * (xx - 0.4 - 0.05 * rng.random()) ** 2),
                np.array([0.9 + 0.1 * rng.random()]))
    return loss, make


def advection_minmod_limiter():
    nx = 80
    dx = 1.0 / nx
    dt = 0.5 * dx

    def minmod(a, b):
        return np.where(a * b > 0, np.sign(a) * np.minimum(np.abs(a), np.abs(b)), 0.0)

    def loss(u0):
        u = u0.copy()
        for _ in range(40):
            du = np.roll(u, -1) - u
            slope = minmod(du, np.roll(du, 1))
            flux = u + 0.5 * (1 - dt / dx) * slope
            u -= dt / dx * (flux - np.roll(flux, 1))
        return np.sum(np.sin(np.arange(nx)) * u)

    def make(s):
        xx = (np.arange(nx) + 0.5) * dx
        return (np.where(np.abs(xx - 0.3) < 0.1, 1.0, 0.0) + np.sin(2 * np.pi * xx)
                + 0.01 * np.random.default_rng(s).standard_normal(nx),)
    return loss, make


def burgers_godunov_masks():
    nx = 50
    dx = 2.0 / nx

    def godunov_flux(ul, ur):
        fl, fr = 0.5 * ul * ul, 0.5 * ur * ur
        shock = ul > ur
        s = 0.5 * (ul + ur)
        flux = np.empty_like(ul)
        flux[shock] = np.where(s[shock] > 0, fl[shock], fr[shock])
        rare = ~shock
        flux[rare] = np.where(ul[rare] > 0, fl[rare], np.where(ur[rare] < 0, fr[rare], 0.0))
        return flux

    def loss(u0):
        u = np.concatenate([[u0[0]], u0, [u0[-1]]])
        for _ in range(30):
            dt = 0.4 * dx / np.max(np.abs(u))
            F = godunov_flux(u[:-1], u[1:])
            u[1:-1] -= dt / dx * (F[1:] - F[:-1])
            u[0], u[-1] = u[1], u[-2]
        return np.sum(u[1:-1] ** 3) * dx

    def make(s):
        xx = np.linspace(-1, 1, nx)
        return np.sin(np.pi * xx) + 0.5 + 0.05 * np.random.default_rng(s).standard_normal(nx),
    return loss, make


def shallow_water_rusanov():
    nx, g = 40, 9.81
    dx = 1.0 / nx

    def loss(h0, hu0):
        q = np.empty((2, nx + 2))
        q[0, 1:-1] = h0
        q[1, 1:-1] = hu0
        t = 0.0
        for _ in range(25):
            q[:, 0] = q[:, 1]
            q[:, -1] = q[:, -2]
            q[1, 0] *= -1
            q[1, -1] *= -1
            h, hu = q
            c = np.abs(hu / h) + np.sqrt(g * h)
            dt = 0.4 * dx / c.max()
            F = np.stack([hu, hu * hu / h + 0.5 * g * h * h])
            a = np.maximum(c[:-1], c[1:])
            Fi = 0.5 * (F[:, :-1] + F[:, 1:]) - 0.5 * a * (q[:, 1:] - q[:, :-1])
            q[:, 1:-1] -= dt / dx * np.diff(Fi, axis=1)
            t += dt
        return np.sum(q[0, 1:-1] ** 2) + t

    def make(s):
        rng = np.random.default_rng(s)
        xx = np.linspace(0, 1, nx)
        return (1 + 0.3 * np.exp(-50 * (xx - 0.5) ** 2) + 0.01 * rng.random(nx),
                0.05 * rng.standard_normal(nx))
    return loss, make


def poisson_red_black_sor():
    n = 12
    h = 1.0 / (n + 1)
    i, j = np.meshgrid(np.arange(1, n + 1), np.arange(1, n + 1), indexing="ij")
    red = (i + j) % 2 == 0

    def loss(f, omega):
        u = np.zeros((n + 2, n + 2))
        inner = u[1:-1, 1:-1]
        for _ in range(40):
            for mask in (red, ~red):
                gs = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + h * h * f)
                inner[mask] = (1 - omega) * inner[mask] + omega * gs[mask]
        return np.sum(u ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random((n, n)), 1.5 + 0.1 * rng.random()
    return loss, make


def multigrid_v_cycles():
    def smooth(u, f, h, w=2 / 3):
        for _ in range(3):
            u[1:-1] = (1 - w) * u[1:-1] + w * 0.5 * (u[:-2] + u[2:] + h * h * f[1:-1])
        return u

    def residual(u, f, h):
        r = np.zeros_like(u)
        r[1:-1] = f[1:-1] - (2 * u[1:-1] - u[:-2] - u[2:]) / h**2
        return r

    def restrict(r):
        rc = r[::2].copy()
        rc[1:-1] = 0.25 * r[1:-2:2] + 0.5 * r[2:-1:2] + 0.25 * r[3::2]
        return rc

    def prolong(e, n):
        ef = np.zeros(n)
        ef[::2] = e
        ef[1::2] = 0.5 * (e[:-1] + e[1:])
        return ef

    def vcycle(u, f, h):
        if u.size <= 3:
            u[1] = f[1] * h * h / 2
            return u
        u = smooth(u, f, h)
        ec = vcycle(np.zeros((u.size + 1) // 2), restrict(residual(u, f, h)), 2 * h)
        u += prolong(ec, u.size)
        return smooth(u, f, h)

    def loss(f):
        u = np.zeros(33)
        for _ in range(3):
            u = vcycle(u, f, 1.0 / 32)
        return np.sum(u ** 2)
    return loss, lambda s: (np.random.default_rng(s).random(33),)


def spectral_burgers_rk4():
    n, L = 64, 2 * np.pi
    k = np.fft.rfftfreq(n, d=L / n) * 2 * np.pi
    dealias = np.abs(k) < (2 / 3) * k.max()

    def rhs(u, nu):
        uh = np.fft.rfft(u)
        return -u * np.fft.irfft(1j * k * uh * dealias, n) + nu * np.fft.irfft(-k**2 * uh, n)

    def loss(u0, nu):
        u = u0.copy()
        dt = 1e-3
        for _ in range(10):
            k1 = rhs(u, nu)
            k2 = rhs(u + 0.5 * dt * k1, nu)
            k3 = rhs(u + 0.5 * dt * k2, nu)
            k4 = rhs(u + dt * k3, nu)
            u += dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return np.sum(u * u) / n

    def make(s):
        rng = np.random.default_rng(s)
        return np.sin(np.arange(n) * L / n) + 0.1 * rng.standard_normal(n), 0.05 + 0.01 * rng.random()
    return loss, make


def split_step_schrodinger():
    n, L = 64, 20.0
    x = (np.arange(n) - n / 2) * L / n
    k = 2 * np.pi * np.fft.fftfreq(n, L / n)

    def loss(V):
        psi = np.exp(-(x - 1) ** 2).astype(complex)
        psi /= np.sqrt(np.sum(np.abs(psi) ** 2) * L / n)
        half = np.exp(-0.5j * V * 0.01)
        kinetic = np.exp(-0.5j * k ** 2 * 0.01)
        for _ in range(30):
            psi *= half
            psi[:] = np.fft.ifft(kinetic * np.fft.fft(psi))
            psi *= half
        return np.sum(x * np.abs(psi) ** 2) * L / n
    return loss, lambda s: (0.5 * x ** 2 + 0.1 * np.random.default_rng(s).random(n),)


def implicit_heat_sparse():
    n = 40

    def loss(u0, D):
        r = D * 1e-3 * (n + 1) ** 2
        A = scipy.sparse.diags([-r * np.ones(n - 1), (1 + 2 * r) * np.ones(n), -r * np.ones(n - 1)],
                               [-1, 0, 1], format="csc")
        u = u0.copy()
        for _ in range(10):
            u = scipy.sparse.linalg.spsolve(A, u)
        return np.sum(u ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random(n), 0.5 + rng.random()
    return loss, make


# ----------------------------------------------------------------------------------------------
# Molecular dynamics


def _lattice(n_side, L, rng):
    g = (np.arange(n_side) + 0.5) * L / n_side
    X = np.array(np.meshgrid(g, g, indexing="ij")).reshape(2, -1).T
    return X + 0.05 * rng.standard_normal(X.shape)


def md_verlet_neighbour_list():
    L, rc, skin = 6.0, 2.0, 0.3

    def forces(x, pairs):
        i, j = pairs
        d = x[i] - x[j]
        d -= L * np.round(d / L)
        r2 = np.einsum("ij,ij->i", d, d)
        inv6 = np.where(r2 < rc * rc, 1.0 / r2**3, 0.0)
        fij = (24 * inv6 * (2 * inv6 - 1) / r2)[:, None] * d
        F = np.zeros_like(x)
        np.add.at(F, i, fij)
        np.subtract.at(F, j, fij)
        return F, np.sum(4 * inv6 * (inv6 - 1))

    def build(x):
        i, j = np.triu_indices(len(x), 1)
        d = x[i] - x[j]
        d -= L * np.round(d / L)
        keep = np.sum(d * d, axis=1) < (rc + skin) ** 2
        return i[keep], j[keep]

    def loss(x0, v0):
        x, v = x0.copy(), v0.copy()
        dt = 0.002
        pairs = build(x)
        F, ep = forces(x, pairs)
        for step in range(20):
            v += 0.5 * dt * F
            x += dt * v
            x = np.mod(x, L)
            if step % 10 == 9:
                pairs = build(x)
            F, ep = forces(x, pairs)
            v += 0.5 * dt * F
        return ep + 0.5 * np.sum(v * v)

    def make(s):
        rng = np.random.default_rng(s)
        return _lattice(4, L, rng), 0.1 * rng.standard_normal((16, 2))
    return loss, make


def md_cell_list_argsort_bincount():
    L, rc = 6.0, 1.5
    ncell = int(L // rc)

    def energy(x, eps):
        c = np.floor(x / (L / ncell)).astype(int) % ncell
        cid = c[:, 0] * ncell + c[:, 1]
        order = np.argsort(cid, kind="stable")
        counts = np.bincount(cid, minlength=ncell * ncell)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        E = 0.0
        for a in range(ncell):
            for b in range(ncell):
                me = order[start[a * ncell + b]:start[a * ncell + b] + counts[a * ncell + b]]
                if me.size == 0:
                    continue
                cells = [((a + da) % ncell) * ncell + (b + db) % ncell
                         for da in (-1, 0, 1) for db in (-1, 0, 1)]
                nb = np.unique(np.concatenate([order[start[cc]:start[cc] + counts[cc]]
                                               for cc in cells]))
                d = x[me][:, None, :] - x[nb][None, :, :]
                d -= L * np.round(d / L)
                r2 = np.sum(d ** 2, axis=-1)
                mask = (me[:, None] < nb[None, :]) & (r2 < rc * rc)
                E += np.sum(eps * (np.exp(-r2[mask]) - np.exp(-rc * rc)))
        return E

    def make(s):
        rng = np.random.default_rng(s)
        return _lattice(5, L, rng), 1.0 + 0.1 * rng.random()
    return energy, make


def nbody_leapfrog_einsum():
    def acceleration(x, m):
        d = x[None, :, :] - x[:, None, :]
        inv3 = (np.einsum("ijk,ijk->ij", d, d) + 0.05) ** -1.5
        np.fill_diagonal(inv3, 0.0)
        return np.einsum("ij,ijk,j->ik", inv3, d, m)

    def loss(x0, m):
        x, v = x0.copy(), np.zeros_like(x0)
        a = acceleration(x, m)
        for _ in range(25):
            v += 0.005 * a
            x += 0.01 * v
            a = acceleration(x, m)
            v += 0.005 * a
        return 0.5 * np.sum(m[:, None] * v ** 2) + np.sum(x[:, 0])

    def make(s):
        rng = np.random.default_rng(s)
        return rng.standard_normal((6, 3)), 1 + rng.random(6)
    return loss, make


# ----------------------------------------------------------------------------------------------
# Filters


@dataclass
class _FilterState:
    x: np.ndarray
    P: np.ndarray


def kalman_joseph_form_dataclass():
    T, dt = 25, 0.1
    F = np.array([[1, dt], [0, 1]])
    H = np.array([[1.0, 0.0]])

    def loss(log_q, log_r, ys):
        Q = np.exp(log_q) * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
        R = np.exp(log_r) * np.eye(1)
        st = _FilterState(np.zeros(2), np.eye(2))
        xs = np.empty((T, 2))
        ll = 0.0
        for t in range(T):
            st.x = F @ st.x
            st.P = F @ st.P @ F.T + Q
            S = H @ st.P @ H.T + R
            K = np.linalg.solve(S.T, (st.P @ H.T).T).T
            innovation = ys[t] - H @ st.x
            st.x = st.x + K @ innovation
            IKH = np.eye(2) - K @ H
            st.P = IKH @ st.P @ IKH.T + K @ R @ K.T
            xs[t] = st.x
            ll += -0.5 * (np.linalg.slogdet(S)[1] + innovation @ np.linalg.solve(S, innovation)
                          + np.log(2 * np.pi))
        return -ll + 0.01 * np.sum(xs ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return -1.0 + 0.1 * rng.random(), -0.5, np.cumsum(rng.standard_normal(T))[:, None] * 0.3
    return loss, make


def kalman_preallocated_cho_factor():
    T, n = 20, 3
    rng0 = np.random.default_rng(11)
    A = np.eye(n) + 0.1 * rng0.standard_normal((n, n))
    C = rng0.standard_normal((2, n))

    def loss(q, ys):
        xf = np.zeros((T + 1, n))
        Pf = np.zeros((T + 1, n, n))
        Pf[0] = np.eye(n)
        nll = 0.0
        Q = np.diag(q ** 2)
        for t in range(T):
            xp = A @ xf[t]
            Pp = A @ Pf[t] @ A.T + Q
            S = C @ Pp @ C.T + 0.5 * np.eye(2)
            cS = scipy.linalg.cho_factor(S)
            e = ys[t] - C @ xp
            K = scipy.linalg.cho_solve(cS, C @ Pp).T
            xf[t + 1] = xp + K @ e
            Pf[t + 1] = Pp - K @ S @ K.T
            Pf[t + 1] = 0.5 * (Pf[t + 1] + Pf[t + 1].T)
            nll += 0.5 * e @ scipy.linalg.cho_solve(cS, e) + np.sum(np.log(np.diag(cS[0])))
        return nll

    def make(s):
        rng = np.random.default_rng(s)
        return 0.3 + 0.1 * rng.random(n), rng.standard_normal((T, 2))
    return loss, make


def particle_filter_systematic_resampling():
    T, N = 15, 200

    def loss(theta, ys):
        rng = np.random.default_rng(123)
        noise = rng.standard_normal((T, N))
        us = rng.random(T)
        x = np.zeros(N)
        w = np.full(N, 1.0 / N)
        ll = 0.0
        for t in range(T):
            x = theta[0] * x + np.exp(theta[1]) * noise[t]
            logw = -0.5 * (ys[t] - x) ** 2
            mx = logw.max()
            wt = w * np.exp(logw - mx)
            s = wt.sum()
            ll += np.log(s) + mx
            wt /= s
            if 1.0 / np.sum(wt ** 2) < N / 2:
                cdf = np.cumsum(wt)
                cdf[-1] = 1.0
                x = x[np.searchsorted(cdf, (us[t] + np.arange(N)) / N)]
                w = np.full(N, 1.0 / N)
            else:
                w = wt
        return -ll

    def make(s):
        rng = np.random.default_rng(s)
        return (np.array([0.8, -0.5 + 0.05 * rng.random()]),
                np.cumsum(rng.standard_normal(T)) * 0.5)
    return loss, make


# ----------------------------------------------------------------------------------------------
# Iterative solvers by hand


def conjugate_gradient():
    n = 30
    M = np.random.default_rng(3).standard_normal((n, n))

    def loss(diagonal, b):
        A = M @ M.T / n + np.diag(diagonal)
        x = np.zeros(n)
        r = b - A @ x
        p = r.copy()
        rs = r @ r
        for _ in range(n):
            Ap = A @ p
            alpha = rs / (p @ Ap)
            x += alpha * p
            r -= alpha * Ap
            rs_new = r @ r
            if np.sqrt(rs_new) < 1e-10:
                break
            p *= rs_new / rs
            p += r
            rs = rs_new
        return x @ x

    def make(s):
        rng = np.random.default_rng(s)
        return 1 + rng.random(n), rng.standard_normal(n)
    return loss, make


def gmres_arnoldi_lstsq():
    n, m = 20, 12
    B = np.random.default_rng(4).standard_normal((n, n))

    def loss(s, b):
        A = np.eye(n) * s + 0.1 * B
        beta = np.linalg.norm(b)
        V = np.zeros((n, m + 1))
        Hm = np.zeros((m + 1, m))
        V[:, 0] = b / beta
        for j in range(m):
            w = A @ V[:, j]
            for i in range(j + 1):
                Hm[i, j] = w @ V[:, i]
                w -= Hm[i, j] * V[:, i]
            Hm[j + 1, j] = np.linalg.norm(w)
            V[:, j + 1] = w / Hm[j + 1, j]
        e1 = np.zeros(m + 1)
        e1[0] = beta
        y = np.linalg.lstsq(Hm, e1, rcond=None)[0]
        return np.sum((V[:, :m] @ y) ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return 2.0 + rng.random(), rng.standard_normal(n)
    return loss, make


def newton_backtracking():
    def F(x, p):
        return np.array([x[0] ** 2 + p[0] * x[1] - 3.0, np.sin(x[0]) + p[1] * x[1] ** 3 - 1.0])

    def J(x, p):
        return np.array([[2 * x[0], p[0]], [np.cos(x[0]), 3 * p[1] * x[1] ** 2]])

    def loss(p):
        x = np.array([1.0, 1.0])
        for _ in range(50):
            Fx = F(x, p)
            norm = np.linalg.norm(Fx)
            if norm < 1e-13:
                break
            dx = np.linalg.solve(J(x, p), -Fx)
            t = 1.0
            while np.linalg.norm(F(x + t * dx, p)) > (1 - 1e-4 * t) * norm and t > 1e-8:
                t *= 0.5
            x = x + t * dx
        return x[0] * x[1] + x[1] ** 2
    return loss, lambda s: (np.array([1.0 + 0.1 * s, 2.0 - 0.05 * s]),)


def lu_partial_pivoting_row_swaps():
    n = 6

    def loss(A):
        A = A.copy()
        b = np.arange(1.0, n + 1)
        for k in range(n - 1):
            p = k + np.argmax(np.abs(A[k:, k]))
            if p != k:
                A[[k, p]] = A[[p, k]]
                b[[k, p]] = b[[p, k]]
            A[k + 1:, k] /= A[k, k]
            A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])
            b[k + 1:] -= A[k + 1:, k] * b[k]
        x = np.zeros(n)
        for i in range(n - 1, -1, -1):
            x[i] = (b[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
        return np.sum(x ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((n, n)) + 0.5 * np.eye(n),)


def jacobi_eigenvalue_rotations_with_math():
    n = 4

    def loss(B):
        A = B + B.T
        for _ in range(6):
            for p in range(n - 1):
                for q in range(p + 1, n):
                    if abs(A[p, q]) < 1e-14:
                        continue
                    theta = 0.5 * math.atan2(2 * A[p, q], A[q, q] - A[p, p])
                    c, s = math.cos(theta), math.sin(theta)
                    J = np.eye(n)
                    J[p, p] = J[q, q] = c
                    J[p, q], J[q, p] = s, -s
                    A = J.T @ A @ J
        ev = np.sort(np.diag(A))
        return ev[-1] - ev[0]
    return loss, lambda s: (np.random.default_rng(s).standard_normal((n, n)),)


# ----------------------------------------------------------------------------------------------
# Images


def tv_denoising_gradient_descent():
    def grad_x(u):
        g = np.zeros_like(u)
        g[:, :-1] = u[:, 1:] - u[:, :-1]
        return g

    def grad_y(u):
        g = np.zeros_like(u)
        g[:-1, :] = u[1:, :] - u[:-1, :]
        return g

    def div(px, py):
        d = np.zeros_like(px)
        d[:, 0] = px[:, 0]
        d[:, 1:-1] = px[:, 1:-1] - px[:, :-2]
        d[:, -1] = -px[:, -2]
        d[0, :] += py[0, :]
        d[1:-1, :] += py[1:-1, :] - py[:-2, :]
        d[-1, :] += -py[-2, :]
        return d

    def loss(f, lam):
        u = f.copy()
        for _ in range(30):
            ux, uy = grad_x(u), grad_y(u)
            norm = np.sqrt(ux ** 2 + uy ** 2 + 1e-4)
            u += 0.05 * ((f - u) + lam * div(ux / norm, uy / norm))
        return np.sum((u - 0.5) ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return np.clip(0.5 + 0.3 * rng.standard_normal((14, 14)), 0, 1), 0.2 + 0.05 * rng.random()
    return loss, make


def morphology_and_sobel_by_slicing():
    def dilate(x):
        p = np.pad(x, 1, mode="edge")
        out = np.full_like(x, -np.inf)
        for a in range(3):
            for b in range(3):
                np.maximum(out, p[a:a + x.shape[0], b:b + x.shape[1]], out=out)
        return out

    def convolve(img, k):
        p = np.pad(img, 1, mode="reflect")
        out = np.zeros_like(img)
        for a in range(3):
            for b in range(3):
                out += k[a, b] * p[a:a + img.shape[0], b:b + img.shape[1]]
        return out

    def loss(img, k):
        opened = dilate(-dilate(-img))
        edges = np.hypot(convolve(img, k), convolve(img, k.T))
        return np.sum((img - opened) ** 2) + np.mean(edges)

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random((16, 14)), np.array([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]) + 0.01 * rng.random((3, 3))
    return loss, make


def richardson_lucy_convolve2d():
    def loss(observed, psf):
        psf = psf / psf.sum()
        estimate = np.full(observed.shape, 0.5)
        for _ in range(10):
            blurred = scipy.signal.convolve2d(estimate, psf, mode="same", boundary="symm")
            estimate *= scipy.signal.convolve2d(observed / blurred, psf[::-1, ::-1], mode="same",
                                                boundary="symm")
        return np.sum(estimate ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return 0.5 + rng.random((14, 14)), 1 + rng.random((3, 3))
    return loss, make


def local_contrast_and_im2col():
    def loss(img, kernel):
        windows = sliding_window_view(np.pad(img, 2, mode="symmetric"), (5, 5))
        normalised = (img - windows.mean(axis=(-1, -2))) / (windows.std(axis=(-1, -2)) + 1e-3)
        H, W = img.shape
        sH, sW = img.strides
        cols = as_strided(img, shape=(H - 2, W - 2, 3, 3), strides=(sH, sW, sH, sW))
        fm = np.einsum("ijkl,kl->ij", cols, kernel)
        np.maximum(fm, 0, out=fm)
        pooled = fm[:H // 2 * 2 - 2, :W // 2 * 2 - 2].reshape(H // 2 - 1, 2, W // 2 - 1, 2)
        return np.sum(np.tanh(normalised)) + np.sum(pooled.max(axis=(1, 3)) ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random((12, 14)), rng.standard_normal((3, 3))
    return loss, make


def unsharp_mask_and_registration_ndimage():
    yy, xx = np.mgrid[0:16, 0:16].astype(float)

    def loss(img, shift):
        sharp = img + 0.7 * (img - scipy.ndimage.gaussian_filter(img, 1.5, mode="nearest"))
        np.clip(sharp, 0.0, 1.0, out=sharp)
        warped = scipy.ndimage.map_coordinates(sharp, np.array([yy + shift[0], xx + shift[1]]),
                                               order=1, mode="nearest")
        return np.sum((warped - np.exp(-((yy - 8) ** 2 + (xx - 7) ** 2) / 10)) ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return (np.exp(-((yy - 7.5) ** 2 + (xx - 7.2) ** 2) / 10) + 0.01 * rng.random((16, 16)),
                np.array([0.3, -0.2]) + 0.01 * rng.random(2))
    return loss, make


# ----------------------------------------------------------------------------------------------
# ODE fits, Monte Carlo, learning


def rk4_lotka_volterra_fit():
    t = np.linspace(0, 5, 26)

    def lotka(y, a, b, c, d):
        dy = np.empty(2)
        dy[0] = a * y[0] - b * y[0] * y[1]
        dy[1] = -c * y[1] + d * y[0] * y[1]
        return dy

    def rk4(y0, *p):
        ys = np.empty((len(t), 2))
        ys[0] = y0
        for i in range(len(t) - 1):
            h, y = t[i + 1] - t[i], ys[i]
            k1 = lotka(y, *p)
            k2 = lotka(y + h / 2 * k1, *p)
            k3 = lotka(y + h / 2 * k2, *p)
            k4 = lotka(y + h * k3, *p)
            ys[i + 1] = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return ys

    data = rk4(np.array([1.0, 0.5]), 1.0, 0.4, 0.8, 0.3) * (1 + 0.01 * np.sin(np.arange(52)).reshape(26, 2))

    def loss(theta):
        return 0.5 * np.sum((np.log(rk4(np.array([1.0, 0.5]), *theta)) - np.log(data)) ** 2)
    return loss, lambda s: (np.array([1.0, 0.4, 0.8, 0.3]) * (1 + 0.05 * np.random.default_rng(s).random(4)),)


def heston_paths_and_asian_cumprod():
    z = np.random.default_rng(9).standard_normal((3, 40, 200))

    def loss(p):
        kappa, theta, xi, rho = p
        dt = 1.0 / 40
        S = np.empty((41, 200))
        v = np.empty_like(S)
        S[0], v[0] = 100.0, 0.04
        for i in range(40):
            vp = np.maximum(v[i], 0.0)
            w2 = rho * z[0, i] + np.sqrt(1 - rho ** 2) * z[1, i]
            v[i + 1] = v[i] + kappa * (theta - vp) * dt + xi * np.sqrt(vp * dt) * w2
            S[i + 1] = S[i] * np.exp(-0.5 * vp * dt + np.sqrt(vp * dt) * z[0, i])
        growth = np.exp((0.03 - 0.5 * theta) * dt + np.sqrt(theta * dt) * z[2].T)
        asian = np.maximum((100.0 * np.cumprod(growth, axis=1)).mean(axis=1) - 100.0, 0.0)
        return np.mean(np.maximum(S[-1] - 100.0, 0)) + np.exp(-0.03) * asian.mean()
    return loss, lambda s: (np.array([2.0, 0.04 + 0.001 * s, 0.3, -0.7]),)


def mlp_trained_in_place_then_validated():
    rng0 = np.random.default_rng(2)
    X, Xv = rng0.standard_normal((64, 3)), rng0.standard_normal((16, 3))
    y, yv = np.sin(X @ np.array([1.0, -2.0, 0.5])), np.sin(Xv @ np.array([1.0, -2.0, 0.5]))

    def forward(W1, b1, W2, b2, X):
        h = np.tanh(X @ W1 + b1)
        return h @ W2 + b2, h

    def loss(W1, lr):
        W1 = W1.copy()
        b1, W2, b2 = np.zeros(W1.shape[1]), np.full(W1.shape[1], 0.1), np.zeros(())
        for _ in range(5):
            for start in range(0, 64, 16):
                xb, yb = X[start:start + 16], y[start:start + 16]
                out, h = forward(W1, b1, W2, b2, xb)
                err = (out - yb) / len(yb)
                dh = np.outer(err, W2) * (1 - h ** 2)
                W1 -= lr * (xb.T @ dh)
                b1 -= lr * dh.sum(axis=0)
                W2 -= lr * (h.T @ err)
                b2 -= lr * err.sum()
        return np.mean((forward(W1, b1, W2, b2, Xv)[0] - yv) ** 2)

    def make(s):
        return 0.5 * np.random.default_rng(s).standard_normal((3, 8)), 0.5
    return loss, make


def adam_state_dict_hypergradient():
    rng0 = np.random.default_rng(4)
    A, b = rng0.standard_normal((20, 5)), rng0.standard_normal(20)

    def loss(hyper):
        lr, wd = hyper
        params = {"w": np.zeros(5)}
        state = {"m": np.zeros(5), "v": np.zeros(5), "t": 0}
        for _ in range(15):
            g = A.T @ (A @ params["w"] - b) / 20 + wd * params["w"]
            state["t"] += 1
            state["m"] *= 0.9
            state["m"] += 0.1 * g
            state["v"] *= 0.999
            state["v"] += 0.001 * g * g
            mhat = state["m"] / (1 - 0.9 ** state["t"])
            vhat = state["v"] / (1 - 0.999 ** state["t"])
            params["w"] -= lr * mhat / (np.sqrt(vhat) + 1e-8)
        return 0.5 * np.mean((A @ params["w"] - b) ** 2)
    return loss, lambda s: (np.array([0.05 + 0.01 * s, 0.01]),)


_Gaussian = namedtuple("_Gaussian", "mu L")


def gaussian_likelihood_namedtuple():
    data = np.random.default_rng(8).standard_normal((40, 3)) @ np.array(
        [[1, 0, 0], [0.5, 1, 0], [0.2, 0.3, 1]])

    def loss(p):
        L = np.tril(p.L)
        L[np.diag_indices(3)] = np.exp(np.diag(p.L))
        c, low = scipy.linalg.cho_factor(L @ L.T)
        diff = data - p.mu
        solved = scipy.linalg.cho_solve((c, low), diff.T)
        return 0.5 * np.einsum("ij,ji->", diff, solved) + len(data) * np.sum(np.log(np.diag(c)))

    def make(s):
        rng = np.random.default_rng(s)
        return _Gaussian(0.1 * rng.standard_normal(3), 0.1 * rng.standard_normal((3, 3))),
    return loss, make


class _GaussianProcess:
    def __init__(self, X, y):
        self.X, self.y = X, y

    def nll(self, theta):
        ell, sf, sn = np.exp(theta)
        d2 = np.sum((self.X[:, None, :] - self.X[None, :, :]) ** 2, axis=-1)
        K = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2)
        K[np.diag_indices_from(K)] += sn ** 2
        L = scipy.linalg.cholesky(K, lower=True)
        alpha = scipy.linalg.cho_solve((L, True), self.y)
        return 0.5 * self.y @ alpha + np.sum(np.log(np.diag(L)))


def gaussian_process_method():
    rng0 = np.random.default_rng(6)
    X = rng0.random((15, 2))
    gp = _GaussianProcess(X, np.sin(3 * X[:, 0]) + 0.1 * rng0.standard_normal(15))
    return gp.nll, lambda s: (np.array([-1.0, 0.0, -2.0]) + 0.1 * s,)


def _upwind_states(u, c, n):
    for k in range(n):
        u[1:] -= c * (u[1:] - u[:-1])
        yield k, u


def generator_of_time_steps():
    def loss(u0, c):
        u = u0.copy()
        acc = 0.0
        for k, state in _upwind_states(u, c, 20):
            acc += np.exp(-0.1 * k) * state[len(state) // 2]
        return acc + np.sum(u ** 2)

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random(20), 0.3 + 0.1 * rng.random()
    return loss, make


def gauss_seidel_chained_indexing():
    n = 6

    def loss(f):
        u = np.zeros((n + 2, n + 2))
        for _ in range(8):
            for i in range(1, n + 1):
                for j in range(1, n + 1):
                    u[i][j] = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]
                                      + f[i - 1][j - 1] / (n + 1) ** 2)
        return np.sum(u ** 2) * 1e4
    return loss, lambda s: (np.random.default_rng(s).random((n, n)),)


def finite_volume_bincount_and_fem_assembly():
    faces = np.random.default_rng(1).integers(0, 10, size=(40, 2))
    conn = np.stack([np.arange(10), np.arange(1, 11)], axis=1)

    def loss(u, k):
        flux = k[np.arange(40) % 5] * (u[faces[:, 1]] - u[faces[:, 0]])
        div = (np.bincount(faces[:, 0], weights=flux, minlength=10)
               - np.bincount(faces[:, 1], weights=flux, minlength=10))
        K = np.zeros((11, 11))
        for e in range(10):
            K[np.ix_(conn[e], conn[e])] += k[e % 5] * 10 * np.array([[1.0, -1.0], [-1.0, 1.0]])
        F = np.zeros(11)
        np.add.at(F, conn.ravel(), np.repeat(u, 2))
        free = np.arange(1, 11)
        x = np.linalg.solve(K[np.ix_(free, free)], F[free])
        return np.sum(div ** 2) + F[free] @ x

    def make(s):
        rng = np.random.default_rng(s)
        return rng.random(10), 1 + rng.random(5)
    return loss, make


PROGRAMS = [
    (heat_explicit, {}), (heat_crank_nicolson_banded, dict(argnums=(0, 1))),
    (wave_leapfrog_rotating_buffers, dict(argnums=(0, 1))),
    (advection_minmod_limiter, dict(rtol=1e-4, step=1e-6)),
    (burgers_godunov_masks, dict(rtol=1e-4, step=1e-6)),
    (shallow_water_rusanov, dict(argnums=(0, 1), rtol=1e-4, step=1e-6)),
    (poisson_red_black_sor, dict(argnums=(0, 1))), (multigrid_v_cycles, {}),
    (spectral_burgers_rk4, dict(argnums=(0, 1))), (split_step_schrodinger, {}),
    (implicit_heat_sparse, dict(argnums=(0, 1))),
    (md_verlet_neighbour_list, dict(argnums=(0, 1), rtol=1e-4)),
    (md_cell_list_argsort_bincount, dict(argnums=(0, 1), rtol=1e-4)),
    (nbody_leapfrog_einsum, dict(argnums=(0, 1))),
    (kalman_joseph_form_dataclass, dict(argnums=(0, 1, 2))),
    (kalman_preallocated_cho_factor, dict(argnums=(0, 1))),
    (particle_filter_systematic_resampling, dict(rtol=1e-4, step=1e-6)),
    (conjugate_gradient, dict(argnums=(0, 1))), (gmres_arnoldi_lstsq, dict(argnums=(0, 1))),
    (newton_backtracking, {}), (lu_partial_pivoting_row_swaps, {}),
    (jacobi_eigenvalue_rotations_with_math, {}),
    (tv_denoising_gradient_descent, dict(argnums=(0, 1), step=1e-6)),
    (morphology_and_sobel_by_slicing, dict(argnums=(0, 1), rtol=1e-4, step=1e-6)),
    (richardson_lucy_convolve2d, dict(argnums=(0, 1))),
    (local_contrast_and_im2col, dict(argnums=(0, 1))),
    (unsharp_mask_and_registration_ndimage, dict(argnums=(0, 1), rtol=1e-4, step=1e-6)),
    (rk4_lotka_volterra_fit, {}), (heston_paths_and_asian_cumprod, {}),
    (mlp_trained_in_place_then_validated, dict(argnums=(0, 1))),
    (adam_state_dict_hypergradient, {}), (gaussian_likelihood_namedtuple, {}),
    (gaussian_process_method, {}), (generator_of_time_steps, dict(argnums=(0, 1))),
    (gauss_seidel_chained_indexing, {}),
    (finite_volume_bincount_and_fem_assembly, dict(argnums=(0, 1))),
]


@pytest.mark.parametrize("program, settings", PROGRAMS, ids=[p.__name__ for p, _ in PROGRAMS])
def test_a_research_program(program, settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a limiter's 0/0, taken by a where)
        _check(program, **settings)


def test_jacobi_rotations_with_math_are_replayed_not_traced():
    """Regression: ``math.atan2`` and ``math.cos`` of traced entries, whose values differ
    from the ufuncs' on some inputs, made every replay fail its guards, and the sweep was
    traced on every call after the fourth."""
    replaying = _check(jacobi_eigenvalue_rotations_with_math, seeds=(1, 1, 1, 1, 1, 2))
    assert not replaying.reasons


@pytest.mark.parametrize("program, method", [(rk4_lotka_volterra_fit, "L-BFGS-B"),
                                             (gaussian_process_method, "BFGS"),
                                             (adam_state_dict_hypergradient, "L-BFGS-B")])
def test_a_replayed_gradient_in_scipy_minimize(program, method):
    """As a user fits: ``minimize(value_and_grad(loss, replay=True), jac=True)``, each call
    the traced value and gradient bit for bit and the optimiser's array left alone."""
    f, make = program()
    replaying = mutad.value_and_grad(f, replay=True)
    calls = []

    def fun(z):
        before = z.tobytes()
        value, grad = replaying(z)
        assert z.tobytes() == before
        traced = mutad.value_and_gradient(f, z.copy(), argnums=0)
        assert _same(value, traced[0]) and _same(grad, traced[1])
        calls.append(value)
        return value, grad

    result = scipy.optimize.minimize(fun, make(0)[0], jac=True, method=method,
                                     options=dict(maxiter=8))
    assert len(calls) > 3 and result.fun <= calls[0]
