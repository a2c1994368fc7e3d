"""Whole programs written the way people structure their code rather than their numerics:
classes holding work arrays as attributes and updating them in methods (``self.buf *= ...``),
dataclasses (with buffers made in ``__post_init__``) and named tuples of arrays, ``__slots__``,
properties and ``functools.cached_property``, dicts of arrays keyed by names updated in loops,
generators and iterator classes yielding views (a generator driven by ``send``), recursion (a
multigrid V-cycle, a quadtree, a radix-2 FFT), ``functools.lru_cache``'d helpers (work arrays
cached by shape, coefficients by order) and a module-level dict of buffers, context managers
restoring state, ``np.nditer`` with a multi-index and an external loop, ``np.errstate`` blocks
that raise and ``try``/``except`` around a step that may fail, deep copies of state, chains of
``reshape``, ``.T``, ``np.moveaxis`` and ``view`` written into, ``np.resize`` and
``ndarray.resize``, ``out=`` into views of a preallocated buffer, ``itertools``-driven loops;
and a few tutorial programs (a small MLP trained by manual backprop, a smooth Ising-like
relaxation, a particle filter with systematic resampling, Gauss-Newton with
``scipy.linalg.lstsq``).

Each is checked as ``test_real_programs5`` checks its programs: NumPy's value bit for bit, the
gradient against finite differences, the caller's arrays bit for bit, ``replay=True`` over
four calls bit for bit against tracing, the tangent against the gradient and Hessian-vector
products against finite differences of the gradient."""

import contextlib
import copy
import dataclasses
import functools
import heapq
import math
import statistics
import warnings
import itertools
from typing import NamedTuple

import numpy as np
import pytest
import scipy.linalg

import mutad
from tests.test_real_programs5 import check_forward_and_second_order, check_program


class HeatSolver:
    def __init__(self, n, kappa):
        self.n = n; self.kappa = kappa
        self.state = np.zeros(n)
        self.buf = np.empty(n)
        self.history = {}
    def set_initial(self, u0):
        self.state[...] = u0
    def step(self, dt):
        self.buf[1:-1] = self.state[2:] - 2 * self.state[1:-1] + self.state[:-2]
        self.buf[0] = self.buf[-1] = 0.0
        self.buf *= self.kappa * dt
        self.state += self.buf
    def run(self, nsteps, dt):
        for k in range(nsteps):
            self.step(dt)
            if k % 5 == 0:
                self.history[k] = self.state.copy()


def class_heat_solver():
    def loss(u0, kappa):
        s = HeatSolver(len(u0), kappa); s.set_initial(u0); s.run(20, 0.2)
        return np.sum(s.state ** 2) + sum(np.sum(h) for h in s.history.values())
    return loss, lambda s: (np.sin(np.linspace(0, 3, 16) + s), 0.4 + 0.01 * s), dict(argnums=(0, 1))


@dataclasses.dataclass
class Particles:
    x: np.ndarray
    v: np.ndarray
    m: np.ndarray
    def kinetic(self):
        return 0.5 * np.sum(self.m[:, None] * self.v ** 2)


def dataclass_leapfrog():
    def loss(x0, v0, m):
        p = Particles(x0.copy(), v0.copy(), m)
        for _ in range(15):
            d = p.x[:, None, :] - p.x[None, :, :]
            r2 = np.sum(d ** 2, axis=-1) + 0.5
            F = -np.sum(d / r2[..., None] ** 1.5 * p.m[None, :, None], axis=1)
            p.v += 0.02 * F
            p.x += 0.02 * p.v
        q = dataclasses.replace(p, v=p.v * 2)
        return p.kinetic() + q.kinetic() + np.sum(p.x[0])
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((5, 2)), r.standard_normal((5, 2)) * 0.1, 1 + r.random(5)
    return loss, make, dict(argnums=(0, 1, 2))


class KState(NamedTuple):
    mean: np.ndarray
    cov: np.ndarray


def namedtuple_kalman():
    F = np.array([[1, 0.1], [0, 1]]); H = np.array([[1.0, 0.0]])
    Q = 0.01 * np.eye(2); R = np.array([[0.2]])
    def loss(ys, x0):
        st = KState(x0, np.eye(2)); ll = 0.0
        for y in ys:
            st = st._replace(mean=F @ st.mean, cov=F @ st.cov @ F.T + Q)
            S = H @ st.cov @ H.T + R
            K = st.cov @ H.T / S
            r = y - H @ st.mean
            st = KState(st.mean + (K @ r), (np.eye(2) - K @ H) @ st.cov)
            ll = ll + r[0] ** 2 / S[0, 0] + np.log(S[0, 0])
        return ll + st.mean @ st.mean
    def make(s):
        walk = np.cumsum(np.random.default_rng(s).standard_normal(12))
        return walk.reshape(12, 1) * 0.3, np.array([0.1, 0.2])
    return loss, make, dict(argnums=(0, 1))


def dict_params_adam():
    def loss(W1, b1, X, y):
        params = {"W1": W1.copy(), "b1": b1.copy()}
        m = {k: np.zeros_like(v) for k, v in params.items()}
        v = {k: np.zeros_like(v) for k, v in params.items()}
        for t in range(1, 6):
            h = np.tanh(X @ params["W1"] + params["b1"])
            err = h.sum(axis=1) - y
            gh = (2 * err[:, None]) * (1 - h ** 2)
            grads = {"W1": X.T @ gh / len(y), "b1": gh.mean(axis=0)}
            for k in params:
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] *= 0.999; v[k] += 0.001 * grads[k] ** 2
                step = (m[k] / (1 - 0.9 ** t)) / (np.sqrt(v[k] / (1 - 0.999 ** t)) + 1e-8)
                params[k] -= 0.05 * step
        h = np.tanh(X @ params["W1"] + params["b1"])
        return np.mean((h.sum(axis=1) - y) ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return (r.standard_normal((3, 4)) * 0.5, r.standard_normal(4) * 0.1,
                r.standard_normal((10, 3)), r.standard_normal(10))
    return loss, make, dict(argnums=(0, 1, 2, 3), rtol=1e-4)


def _blocks(a, size):
    for i in range(0, len(a), size):
        yield a[i:i + size]


def generator_views_blockwise():
    def loss(a):
        a = a.copy()
        for blk in _blocks(a, 4):
            blk -= blk.mean()
            blk *= 1.0 / (1.0 + np.abs(blk).max())
        tot = 0.0
        for i, (x, y) in enumerate(itertools.pairwise(_blocks(a, 4))):
            tot += (i + 1) * np.dot(x[:len(y)], y)
        return tot + np.sum(a ** 3)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(18),), {}


def _smooth(u, f, h, n):
    for _ in range(n):
        u[1:-1] = 0.5 * (u[:-2] + u[2:] + h * h * f[1:-1])
    return u


def _vcycle(u, f, h):
    if len(u) <= 3:
        u[1] = 0.5 * (u[0] + u[2] + h * h * f[1]); return u
    _smooth(u, f, h, 2)
    r = np.zeros_like(u)
    r[1:-1] = f[1:-1] - (2 * u[1:-1] - u[:-2] - u[2:]) / h ** 2
    rc = r[::2].copy()
    rc[1:-1] = 0.25 * r[1:-2:2] + 0.5 * r[2:-1:2] + 0.25 * r[3::2]
    ec = _vcycle(np.zeros_like(rc), rc, 2 * h)
    e = np.zeros_like(u)
    e[::2] = ec
    e[1::2] = 0.5 * (ec[:-1] + ec[1:])
    u += e
    return _smooth(u, f, h, 2)


def recursive_multigrid():
    def loss(f):
        u = np.zeros_like(f)
        for _ in range(3):
            u = _vcycle(u, f, 1.0 / (len(f) - 1))
        return np.sum(u ** 2) * 100
    return loss, lambda s: (np.sin(np.linspace(0, np.pi * (1 + 0.1 * s), 33)),), {}


def _quad(img, depth):
    if depth == 0 or img.shape[0] < 2:
        return img.mean() ** 2
    h, w = img.shape[0] // 2, img.shape[1] // 2
    quads = [img[:h, :w], img[:h, w:], img[h:, :w], img[h:, w:]]
    var = img.var()
    if var < 0.05:
        img[...] = img.mean()
        return var
    return sum(_quad(q, depth - 1) for q in quads) + var


def recursive_quadtree():
    def loss(img):
        work = img.copy()
        val = _quad(work, 3)
        return val + np.sum(work * img)
    ramp = np.linspace(0, 1, 16) ** 3
    return loss, lambda s: (np.random.default_rng(s).random((16, 16)) * ramp,), {}


@functools.lru_cache(maxsize=None)
def _workspace(shape):
    return np.empty(shape), np.empty(shape)


def lru_cache_workspace():
    def loss(u):
        a, b = _workspace(u.shape)
        a[...] = u
        for _ in range(10):
            b[1:-1] = 0.25 * a[:-2] + 0.5 * a[1:-1] + 0.25 * a[2:]
            b[0] = a[0]; b[-1] = a[-1]
            a, b = b, a
        return np.sum(a ** 2) + a[3]
    return loss, lambda s: (np.cos(np.arange(12.0) * (0.3 + 0.1 * s)),), {}


_WORK = np.zeros(20)


class Opt:
    def __init__(self, x):
        self.x = x.copy(); self.best = x.copy(); self.trace = [x.copy()]


def view_chain_writes():
    def loss(a):
        buf = a.copy()
        g = buf.reshape(3, 4)
        g.T[1] *= 2.0
        v = buf.view()
        v.shape = (2, 6)
        v[:, ::2] += v[:, 1::2] ** 2
        c = np.moveaxis(buf.reshape(2, 3, 2), 0, -1)
        c[..., 0] = np.tanh(c[..., 1])
        sw = np.swapaxes(buf.reshape(2, 6), 0, 1)
        sw[::3] -= 0.5
        return np.sum(buf ** 3) + np.sum(g * g)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(12),), {}


def resize_grow():
    def loss(x):
        y = np.resize(x, 10)
        z = x.copy()
        z.resize(8, refcheck=False)
        z[len(x):] = x[:8 - len(x)] * 2
        return np.sum(y * np.arange(10)) + np.sum(z ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(5),), {}


def out_into_buffer_views():
    def loss(a, b):
        buf = np.empty((3, len(a)))
        np.multiply(a, b, out=buf[0])
        np.add(buf[0], a, out=buf[1])
        np.sin(buf[1], out=buf[2])
        np.maximum(buf[2], 0.0, out=buf[2])
        np.cumsum(buf[:, ::2], axis=1, out=buf[:, ::2])
        np.matmul(buf[:2], buf[2], out=buf[2, :2])
        return buf.sum() + (buf[2] ** 2).sum()
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(6), r.standard_normal(6)
    return loss, make, dict(argnums=(0, 1))


class MLP:
    def __init__(self, W1, W2):
        self.W1 = W1.copy(); self.W2 = W2.copy()
        self.gW1 = np.zeros_like(W1); self.gW2 = np.zeros_like(W2)
        self.cache = {}
    def forward(self, X):
        self.cache["X"] = X
        self.cache["h"] = np.maximum(X @ self.W1, 0)
        return self.cache["h"] @ self.W2
    def backward(self, dout):
        self.gW2[...] = self.cache["h"].T @ dout
        dh = dout @ self.W2.T
        dh[self.cache["h"] <= 0] = 0
        self.gW1[...] = self.cache["X"].T @ dh
    def sgd(self, lr):
        for p, g in ((self.W1, self.gW1), (self.W2, self.gW2)):
            p -= lr * g


def mlp_manual_backprop():
    X = np.random.default_rng(0).standard_normal((20, 3))
    Y = np.sin(X.sum(axis=1, keepdims=True))
    def loss(W1, W2):
        net = MLP(W1, W2)
        for ep in range(5):
            out = net.forward(X)
            net.backward(2 * (out - Y) / len(X))
            net.sgd(0.1)
        return np.mean((net.forward(X) - Y) ** 2)
    def make(s):
        r = np.random.default_rng(s + 10)
        return r.standard_normal((3, 6)), r.standard_normal((6, 1)) * 0.5
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def ising_smooth_relaxation():
    def loss(J, h):
        s = np.zeros((8, 8))
        mask = (np.add.outer(np.arange(8), np.arange(8)) % 2).astype(bool)
        for sweep in range(6):
            for color in (mask, ~mask):
                nb = np.roll(s, 1, 0) + np.roll(s, -1, 0) + np.roll(s, 1, 1) + np.roll(s, -1, 1)
                s[color] = np.tanh(J * nb + h)[color]
        E = -J * np.sum(s * (np.roll(s, 1, 0) + np.roll(s, 1, 1))) - np.sum(h * s)
        return E
    def make(s):
        return 0.3 + 0.05 * s, np.random.default_rng(s).standard_normal((8, 8)) * 0.2
    return loss, make, dict(argnums=(0, 1))


def particle_filter_systematic():
    def loss(theta, ys):
        rng = np.random.default_rng(123)
        N = 64
        x = rng.standard_normal(N)
        w = np.full(N, 1.0 / N); ll = 0.0
        for y in ys:
            x = theta * x + 0.5 * rng.standard_normal(N)
            logw = -0.5 * (y - x) ** 2
            m = logw.max()
            w = w * np.exp(logw - m)
            ll += m + np.log(w.sum())
            w /= w.sum()
            u = (rng.random() + np.arange(N)) / N
            idx = np.searchsorted(np.cumsum(w), u)
            idx = np.minimum(idx, N - 1)
            x = x[idx]; w = np.full(N, 1.0 / N)
        return -ll
    def make(s):
        return 0.8 + 0.01 * s, np.sin(np.arange(8) * (0.5 + 0.01 * s))
    return loss, make, dict(argnums=(0, 1), step=1e-6)


def gauss_newton_lstsq():
    t = np.linspace(0, 3, 25)
    def loss(p0, y):
        p = p0.copy()
        for _ in range(5):
            model = p[0] * np.exp(-p[1] * t) + p[2]
            r = model - y
            J = np.empty((len(t), 3))
            J[:, 0] = np.exp(-p[1] * t)
            J[:, 1] = -p[0] * t * np.exp(-p[1] * t)
            J[:, 2] = 1.0
            dp, *_ = scipy.linalg.lstsq(J, -r)
            p += dp
        return np.sum((p[0] * np.exp(-p[1] * t) + p[2] - y) ** 2) + p @ p
    def make(s):
        r = np.random.default_rng(s)
        return np.array([1.8, 0.9, 0.4]), 2 * np.exp(-1.1 * t) + 0.5 + 0.02 * r.standard_normal(25)
    return loss, make, dict(argnums=(0, 1), rtol=1e-4)


def itertools_pairs_energy():
    def loss(X):
        E = 0.0
        for i, j in itertools.combinations(range(len(X)), 2):
            d = X[i] - X[j]
            E += 1.0 / (d @ d + 0.3)
        G = np.zeros((3, 3))
        for (a, b), c in zip(itertools.product(range(3), repeat=2), itertools.cycle([1.0, -1.0])):
            G[a, b] += c * X[a] @ X[b]
        for acc in itertools.accumulate(X, lambda u, v: u * 0.5 + v):
            E += np.sum(acc ** 2) * 0.01
        return E + np.sum(G ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((5, 2)),), {}


class Field:
    def __init__(self, data): self.data = data
    def __iadd__(self, other):
        self.data += other.data if isinstance(other, Field) else other
        return self
    def __getitem__(self, k): return self.data[k]
    def __setitem__(self, k, v): self.data[k] = v
    def laplacian(self):
        out = Field(np.zeros_like(self.data))
        out[1:-1, 1:-1] = (self[2:, 1:-1] + self[:-2, 1:-1] + self[1:-1, 2:] + self[1:-1, :-2]
                           - 4 * self[1:-1, 1:-1])
        return out


def field_class_operators():
    def loss(u0):
        u = Field(u0.copy())
        for _ in range(8):
            L = u.laplacian()
            L.data *= 0.1
            u += L
            u[0, :] = u[1, :]
        return np.sum(u.data ** 2) + u[2, 3]
    return loss, lambda s: (np.random.default_rng(s).random((6, 7)),), {}


class Windows:
    def __init__(self, a, w): self.a, self.w, self.i = a, w, 0
    def __iter__(self): return self
    def __next__(self):
        if self.i + self.w > len(self.a): raise StopIteration
        v = self.a[self.i:self.i + self.w]; self.i += 1
        return v


def iterator_class_windows():
    def loss(x, k):
        y = x.copy()
        for i, w in enumerate(Windows(y, 3)):
            w[1] = (w[0] + w[2]) * 0.5 + k * w[1]
        return np.sum(y ** 2) + sum(np.prod(w) for w in Windows(x, 2))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(9), 0.3), dict(argnums=(0, 1))


def errstate_smooth_try_except():
    def loss(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(x != 0, np.sin(x) / x, 1.0)
            lg = x ** 3 * np.log(np.abs(x))
        lg[~np.isfinite(lg)] = 0.0
        try:
            L = np.linalg.cholesky(np.outer(x, x) - np.eye(len(x)))
            extra = np.sum(L)
        except np.linalg.LinAlgError:
            extra = np.sum(x ** 2)
        return np.sum(r * lg) + extra
    return loss, lambda s: (np.array([0.0, 1.0 + 0.1 * s, -2.0, 3.0, 0.5]),), {}


def errstate_raise_fallback():
    def loss(x, scale):
        out = np.empty_like(x)
        for i in range(len(x)):
            try:
                with np.errstate(over="raise"):
                    out[i] = np.exp(scale * x[i]) / (1 + np.exp(scale * x[i]))
            except FloatingPointError:
                out[i] = 1.0 - np.exp(-scale * x[i]) * 0.0
        return np.sum(out * x)
    return loss, lambda s: (np.array([-1.0, 0.5, 800.0 + s, 2.0]), 1.2), dict(argnums=(0, 1))


_BUFFERS = {}


def _buffer(shape):
    if shape not in _BUFFERS:
        _BUFFERS[shape] = np.zeros(shape)
    return _BUFFERS[shape]


def module_dict_cache_by_shape():
    def loss(u):
        w = _buffer(u.shape)
        w[:] = u
        for _ in range(5):
            w[1:-1] += 0.2 * (w[2:] - 2 * w[1:-1] + w[:-2])
        return np.sum(w ** 2)
    return loss, lambda s: (np.sin(np.arange(10.0) + s),), {}


@dataclasses.dataclass
class Workspace:
    n: int
    u: np.ndarray = dataclasses.field(init=False)
    flux: np.ndarray = dataclasses.field(init=False)
    def __post_init__(self):
        self.u = np.zeros(self.n); self.flux = np.zeros(self.n + 1)


def dataclass_post_init_buffers():
    def loss(u0, c):
        ws = Workspace(len(u0))
        ws.u[:] = u0
        for _ in range(12):
            ws.flux[1:-1] = c * np.where(c > 0, ws.u[:-1], ws.u[1:])
            ws.u -= 0.3 * np.diff(ws.flux)
        snap = copy.deepcopy(ws)
        snap.u *= 2
        return np.sum(ws.u ** 2) + np.sum(snap.u)
    bump = np.exp(-np.linspace(-2, 2, 14) ** 2)
    return loss, lambda s: (bump * (1 + 0.1 * s), 0.7), dict(argnums=(0, 1))


class Slotted:
    __slots__ = ("x", "g")
    def __init__(self, x): self.x = x; self.g = np.zeros_like(x)
    @property
    def energy(self): return 0.5 * self.x @ self.x + np.sum(np.cos(self.x))


def slots_and_property():
    def loss(x0):
        s = Slotted(x0.copy())
        for _ in range(8):
            s.g[...] = s.x - np.sin(s.x)
            s.x -= 0.3 * s.g
        return s.energy
    return loss, lambda s: (np.random.default_rng(s).standard_normal(5),), {}


class Model:
    def __init__(self, w): self.w = w
    @functools.cached_property
    def gram(self): return np.outer(self.w, self.w) + np.eye(len(self.w))


def cached_property_model():
    def loss(w, b):
        m = Model(w)
        x = np.linalg.solve(m.gram, b)
        m.gram[0, 0] += 1.0
        y = np.linalg.solve(m.gram, b)
        return x @ y
    def make(s):
        return np.random.default_rng(s).standard_normal(4), np.ones(4)
    return loss, make, dict(argnums=(0, 1))


def _fft_rec(x):
    n = len(x)
    if n == 1: return x.astype(complex)
    even, odd = _fft_rec(x[::2]), _fft_rec(x[1::2])
    tw = np.exp(-2j * np.pi * np.arange(n // 2) / n) * odd
    out = np.empty(n, complex)
    out[:n // 2] = even + tw; out[n // 2:] = even - tw
    return out


def recursive_fft():
    def loss(x):
        X = _fft_rec(x)
        return np.sum(np.abs(X[:5]) ** 2) + X.real @ np.arange(len(x))
    return loss, lambda s: (np.random.default_rng(s).standard_normal(16),), {}


@contextlib.contextmanager
def _checkpoint(state):
    saved = state.copy()
    try:
        yield state
    finally:
        state[:] = 0.5 * (state + saved)


def contextmanager_checkpoint():
    def loss(x):
        st = x.copy()
        for k in range(4):
            with _checkpoint(st) as s:
                s *= np.tanh(s) + 1.0
                s[k] += 1.0
        return np.sum(st ** 2)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6),), {}


def generator_send_stepper():
    def stepper(y, dt):
        while True:
            k = yield y
            if k is None: k = 1.0
            y -= dt * k * y ** 3
    def loss(y0, k):
        y = y0.copy()
        g = stepper(y, 0.05)
        next(g)
        for i in range(10):
            g.send(k if i % 2 else None)
        g.close()
        return np.sum(y)
    return loss, lambda s: (np.linspace(0.5, 1.5, 4) + 0.1 * s, 0.7), dict(argnums=(0, 1))


def nditer_multi_index_external():
    def loss(A):
        B = np.empty_like(A)
        it = np.nditer(A, flags=["multi_index"])
        for a in it:
            i, j = it.multi_index
            B[i, j] = a * (i + 1) - j * a ** 2
        C = np.zeros_like(A)
        with np.nditer([A, C], flags=["external_loop"],
                       op_flags=[["readonly"], ["writeonly"]]) as it2:
            for a, c in it2:
                c[...] = np.sin(a) * 2
        return np.sum(B * C)
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 4)),), {}


def lru_cache_coefficients_by_order():
    @functools.lru_cache(maxsize=8)
    def stencil(order):
        c = np.zeros(2 * order + 1)
        c[order] = -2.0; c[order - 1] = c[order + 1] = 1.0
        return c
    def loss(u):
        v = u.copy()
        for _ in range(6):
            c = stencil(1)
            v[1:-1] += 0.2 * np.convolve(v, c, mode="valid")
        return np.sum(v ** 2)
    return loss, lambda s: (np.cos(np.arange(9.0) * (0.5 + 0.1 * s)),), {}


def reshape_T_out_views():
    def loss(a, b):
        pre = np.zeros((2, 3, 4))
        np.multiply(a.reshape(3, 4), b, out=pre[0])
        np.exp(pre[0].T, out=pre[1].T)
        pre.reshape(6, 4)[::2] *= 0.5
        m = np.moveaxis(pre, 2, 0)
        m[1:3] = m[1:3] ** 2
        return np.sum(pre ** 2) + pre[1, 2, 3]
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(12) * 0.5, r.standard_normal(4)
    return loss, make, dict(argnums=(0, 1))



class PIC:
    def __init__(self, ng, pos, q):
        self.ng = ng; self.pos = pos; self.q = q
        self.rho = np.zeros(ng); self.E = np.zeros(ng)
    def deposit(self):
        self.rho[:] = 0.0
        i = np.floor(self.pos).astype(int) % self.ng
        w = self.pos - np.floor(self.pos)
        np.add.at(self.rho, i, self.q * (1 - w))
        np.add.at(self.rho, (i + 1) % self.ng, self.q * w)
    def field(self):
        self.E[:] = np.cumsum(self.rho - self.rho.mean())
        self.E -= self.E.mean()
    def interior(self):
        return self.E[1:-1]


def pic_add_at_class():
    def loss(pos, q):
        p = PIC(8, pos.copy(), q)
        for _ in range(3):
            p.deposit(); p.field()
            p.interior()[...] *= 0.9
            i = np.floor(p.pos).astype(int) % p.ng
            p.pos += 0.1 * p.E[i]
        return np.sum(p.E ** 2) + np.sum(p.pos)
    def make(s):
        return np.array([0.3, 1.7, 2.2, 4.9, 6.1]) + 0.01 * s, np.array([1.0, -0.5, 0.8, 0.3, -1.1])
    return loss, make, dict(argnums=(0, 1))


class Vec:
    __slots__ = ("v",)
    def __init__(self, v): self.v = v
    def __add__(self, o): return Vec(self.v + o.v)
    def __mul__(self, s): return Vec(self.v * s)
    __rmul__ = __mul__
    def __sub__(self, o): return Vec(self.v - o.v)
    def norm2(self): return self.v @ self.v


def operator_class_vectors():
    def loss(a, b):
        x, y = Vec(a), Vec(b)
        for _ in range(5):
            x, y = x + 0.1 * y, y - 0.1 * x * 1.5
        return (x - y).norm2() + 2 * x.norm2()
    def make(s):
        return np.array([1.0, 0.5, -0.3]) * (1 + 0.1 * s), np.array([0.2, -0.4, 0.9])
    return loss, make, dict(argnums=(0, 1))


class Body:
    def __init__(self, x): self.x = x


def shallow_copy_aliases():
    def loss(x0):
        b = Body(x0.copy())
        c = copy.copy(b)          # shares b.x
        c.x *= 2.0
        d = copy.deepcopy(b)
        d.x += 1.0
        return np.sum(b.x ** 2) + np.sum(d.x * b.x)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(4),), {}


def soft_dtw():
    def softmin(a, b, c, gamma):
        m = min(a, b, c)
        return m - gamma * math.log(math.exp(-(a - m) / gamma) + math.exp(-(b - m) / gamma)
                                    + math.exp(-(c - m) / gamma))
    def loss(x, y):
        D = (x[:, None] - y[None, :]) ** 2
        n, m = D.shape
        R = np.full((n + 1, m + 1), np.inf); R[0, 0] = 0.0
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                R[i, j] = D[i - 1, j - 1] + softmin(R[i - 1, j], R[i, j - 1], R[i - 1, j - 1], 0.5)
        return R[n, m]
    def make(s):
        return np.sin(np.linspace(0, 3, 6) + 0.1 * s), np.cos(np.linspace(0, 3, 5))
    return loss, make, dict(argnums=(0, 1))


class RK:
    a = np.array([[0, 0, 0], [0.5, 0, 0], [-1, 2, 0]])
    b = np.array([1 / 6, 2 / 3, 1 / 6]); c = np.array([0, 0.5, 1])
    def __init__(self, f, n):
        self.f = f; self.k = np.zeros((3, n))
    def step(self, t, y, h):
        for i in range(3):
            self.k[i] = self.f(t + self.c[i] * h, y + h * (self.a[i, :i] @ self.k[:i]))
        y += h * (self.b @ self.k)


def butcher_tableau_class():
    def loss(y0, mu):
        f = lambda t, y: np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])
        rk = RK(f, 2); y = y0.copy()
        for n in range(25):
            rk.step(n * 0.05, y, 0.05)
        return y @ y
    return loss, lambda s: (np.array([1.0 + 0.1 * s, 0.0]), 0.8), dict(argnums=(0, 1))


class P:
    def __init__(self, x, e): self.x = x; self.e = e


def sorted_by_traced_key():
    def loss(X):
        ps = [P(X[i], np.sum(X[i] ** 2)) for i in range(len(X))]
        ps.sort(key=lambda p: p.e)
        best = max(ps, key=lambda p: p.x[0])
        worst = min((p.x for p in ps), key=np.linalg.norm)
        return sum((k + 1) * p.e for k, p in enumerate(ps[:3])) + best.x @ worst
    return loss, lambda s: (np.random.default_rng(s).standard_normal((5, 2)),), {}


def python_iteration_over_arrays():
    def loss(A):
        tot = sum(row @ row for row in A)
        col = functools.reduce(np.add, A)
        flat = np.fromiter((a * b for a, b in zip(A[0], A[1])), float, count=A.shape[1])
        lst = [np.sin(r) for r in map(np.asarray, A)]
        z = np.array([r.max() for r in lst])
        m = statistics.fmean(z)
        return tot + col @ col + flat.sum() + m
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 4)),), {}


def vectorize_signature_apply_over_axes():
    def loss(A):
        nrm = np.vectorize(lambda r: np.sqrt(r @ r + 1.0), signature="(n)->()")(A)
        s = np.apply_over_axes(np.sum, A ** 2, [0, 1])
        return np.sum(nrm) + s[0, 0]
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 4)),), {}


def fromiter_generator_traced():
    def loss(x):
        def gen():
            acc = 0.0
            for v in x:
                acc = 0.5 * acc + v
                yield acc
        y = np.fromiter(gen(), dtype=float)
        return y @ y
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6),), {}


class Event:
    def __init__(self, t, i): self.t = t; self.i = i
    def __lt__(self, o): return self.t < o.t


def heap_event_simulation():
    def loss(rates, x0):
        x = x0.copy()
        q = [Event(1.0 / r, i) for i, r in enumerate(rates)]
        heapq.heapify(q); t = 0.0
        for _ in range(8):
            e = heapq.heappop(q)
            x[e.i] += (e.t - t) * x[(e.i + 1) % len(x)]
            t = e.t
            heapq.heappush(q, Event(e.t + 1.0 / rates[e.i], e.i))
        return np.sum(x ** 2)
    def make(s):
        return np.array([1.0, 1.7, 2.3]) * (1 + 0.01 * s), np.array([1.0, 0.5, -0.2])
    return loss, make, dict(argnums=(0, 1))


@dataclasses.dataclass(frozen=True)
class Params:
    w: np.ndarray
    b: np.ndarray


def frozen_dataclass_astuple():
    def loss(w, b):
        p = Params(w, b)
        t = dataclasses.astuple(p)      # deep-copies the arrays
        t[0][0] = 5.0
        d = dataclasses.asdict(p)
        d["b"] *= 2
        q = dataclasses.replace(p, b=p.b + 1)
        return np.sum(p.w * t[0]) + np.sum(d["b"] * q.b) + np.sum(p.b)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal(3), r.standard_normal(3)
    return loss, make, dict(argnums=(0, 1))


def tolist_and_item_refused_or_right():
    def loss(x):
        y = x * 2
        lst = y.tolist()
        return np.sum(np.array(lst) ** 2) + y.item(0)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(4),), {}


def readonly_view_write_guard():
    def loss(x):
        y = x.copy()
        v = y.view(); v.flags.writeable = False
        try:
            v[0] = 1.0
        except ValueError:
            y[0] = 3.0 * y[1]
        return np.sum(y ** 2) + np.sum(v)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(4),), {}


def einsum_out_view():
    def loss(A, B):
        buf = np.zeros((2, 3, 3))
        np.einsum("ij,jk->ik", A, B, out=buf[0])
        np.einsum("ij,kj->ik", A, B.T, out=buf[1])
        np.matmul(buf[0], buf[1].T, out=buf[1])
        return np.sum(buf ** 2)
    def make(s):
        r = np.random.default_rng(s)
        return r.standard_normal((3, 3)), r.standard_normal((3, 3))
    return loss, make, dict(argnums=(0, 1))


def memo_recursive_dp():
    def loss(c):
        memo = {}
        def best(i, j):
            if (i, j) in memo: return memo[i, j]
            if i == 0 or j == 0:
                r = c[i, j]
            else:
                a, b = best(i - 1, j), best(i, j - 1)
                r = c[i, j] + 0.5 * (a + b) - 0.1 * np.logaddexp(a, b)
            memo[i, j] = r
            return r
        return best(c.shape[0] - 1, c.shape[1] - 1)
    return loss, lambda s: (np.random.default_rng(s).random((4, 5)),), {}


@np.errstate(divide="ignore", invalid="ignore")
def _safe_ratio(a, b):
    r = a / b
    r[~np.isfinite(r)] = 0.0
    return r


def errstate_decorator_and_catch_warnings():
    def loss(x, y):
        r = _safe_ratio(x, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lg = np.log(np.abs(r) + 1)
        old = np.seterr(over="ignore")
        try:
            big = np.exp(x * 300)
        finally:
            np.seterr(**old)
        return np.sum(r * lg) + np.sum(np.minimum(big, 1e3))
    def make(s):  # (y, holding a zero, is not differentiated: x / y jumps there)
        return np.array([1.0, 0.0, 2.0, -1.5]) + 0.1 * s, np.array([2.0, 0.0, 0.5, 1.0])
    return loss, make, {}


_LEVELS = [np.zeros((n, n)) for n in (9, 5, 3)]


def _vc2(level, f, h):
    u = _LEVELS[level]
    u[...] = 0.0
    for _ in range(3):
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                + h * h * f[1:-1, 1:-1])
    if level + 1 < len(_LEVELS):
        r = np.zeros_like(u)
        r[1:-1, 1:-1] = f[1:-1, 1:-1] + (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                         - 4 * u[1:-1, 1:-1]) / h ** 2
        e = _vc2(level + 1, r[::2, ::2], 2 * h)
        u[::2, ::2] += e
        u[1::2, ::2] += 0.5 * (e[:-1] + e[1:])
        u[:, 1::2] += 0.5 * (u[:, :-1:2] - u[:, :-1:2] + 0.0 * u[:, 2::2])
    return u.copy()


def module_level_hierarchy_recursive():
    def loss(f):
        u = _vc2(0, f, 1.0 / 8)
        return np.sum(u ** 2) * 1e3 + np.sum(_LEVELS[1])
    return loss, lambda s: (np.outer(np.sin(np.linspace(0, 3, 9) + 0.1 * s), np.ones(9)),), {}


class Base:
    def __init__(self, x): self.x = x.copy(); self.v = np.zeros_like(x)
    def step(self, dt): self.x += dt * self.v


class Damped(Base):
    def __init__(self, x, c): super().__init__(x); self.c = c
    def step(self, dt):
        self.v -= dt * (self.x + self.c * self.v)
        super().step(dt)
    @property
    def energy(self): return 0.5 * (self.x @ self.x + self.v @ self.v)
    @energy.setter
    def energy(self, e):
        self.v *= np.sqrt(e / self.energy)


def inheritance_super_property_setter():
    def loss(x0, c):
        o = Damped(x0, c)
        o.v[:] = 0.3
        for k in range(10):
            o.step(0.1)
            if k == 4: o.energy = 1.0
        return o.energy + o.x.sum()
    return loss, lambda s: (np.array([1.0, -0.5]) * (1 + 0.1 * s), 0.2), dict(argnums=(0, 1))


class Proxy:
    def __init__(self, arr): self._arr = arr
    def __getattr__(self, k): return getattr(self._arr, k)
    def __getitem__(self, k): return self._arr[k]
    def __setitem__(self, k, v): self._arr[k] = v
    def __len__(self): return len(self._arr)
    def __array__(self, dtype=None, copy=None): return self._arr


def getattr_proxy():
    def loss(x):
        p = Proxy(x.copy())
        p[1:] = p[1:] * 2 + p[:-1]
        s = p.sum() + p.max()
        q = np.asarray(p)
        q *= 0.5
        return s + np.sum(p[:] ** 2) + len(p)
    return loss, lambda s: (np.random.default_rng(s).standard_normal(5),), {}


def islice_tee_chain():
    def loss(x):
        rows = (x[i:i + 3] for i in range(len(x) - 2))
        a, b = itertools.tee(rows)
        s = sum(np.sum(r ** 2) for r in itertools.islice(a, 0, None, 2))
        t = sum(np.prod(r) for r in b)
        y = np.concatenate(list(itertools.chain([x[:2]], [x[-2:] * 2])))
        for g, grp in itertools.groupby(range(len(x)), key=lambda i: i // 3):
            idx = list(grp)
            s += np.mean(x[idx]) * (g + 1)
        return s + t + y @ y
    return loss, lambda s: (np.random.default_rng(s).standard_normal(8),), {}


def ravel_multi_index_ndindex():
    def loss(A):
        flat = A.ravel().copy()
        for idx in np.ndindex(A.shape):
            k = np.ravel_multi_index(idx, A.shape)
            if idx[0] > 0:
                flat[k] += 0.5 * flat[np.ravel_multi_index((idx[0] - 1, idx[1]), A.shape)]
        i, j = np.unravel_index(np.argmax(flat), A.shape)
        return flat @ flat + A[i, j]
    return loss, lambda s: (np.random.default_rng(s).standard_normal((3, 3)),), {}


def writeable_as_strided_overlap():
    from numpy.lib.stride_tricks import as_strided
    def loss(x):
        y = x.copy()
        w = as_strided(y, shape=(len(y) - 1, 2), strides=(y.strides[0],) * 2)
        for i in range(len(w)):
            w[i, 1] = w[i, 0] * 0.5 + w[i, 1]
        return y @ y
    return loss, lambda s: (np.random.default_rng(s).standard_normal(6),), {}


SLOW = {"butcher_tableau_class", "soft_dtw"}

PROGRAMS = [pytest.param(p, marks=pytest.mark.slow) if p.__name__ in SLOW else p for p in [
    class_heat_solver,
    dataclass_leapfrog,
    namedtuple_kalman,
    dict_params_adam,
    generator_views_blockwise,
    recursive_multigrid,
    recursive_quadtree,
    lru_cache_workspace,
    view_chain_writes,
    resize_grow,
    out_into_buffer_views,
    mlp_manual_backprop,
    ising_smooth_relaxation,
    particle_filter_systematic,
    gauss_newton_lstsq,
    itertools_pairs_energy,
    field_class_operators,
    iterator_class_windows,
    errstate_smooth_try_except,
    errstate_raise_fallback,
    module_dict_cache_by_shape,
    dataclass_post_init_buffers,
    slots_and_property,
    cached_property_model,
    recursive_fft,
    contextmanager_checkpoint,
    generator_send_stepper,
    nditer_multi_index_external,
    lru_cache_coefficients_by_order,
    reshape_T_out_views,
    pic_add_at_class,
    operator_class_vectors,
    shallow_copy_aliases,
    soft_dtw,
    butcher_tableau_class,
    sorted_by_traced_key,
    python_iteration_over_arrays,
    vectorize_signature_apply_over_axes,
    fromiter_generator_traced,
    heap_event_simulation,
    frozen_dataclass_astuple,
    tolist_and_item_refused_or_right,
    readonly_view_write_guard,
    einsum_out_view,
    memo_recursive_dp,
    errstate_decorator_and_catch_warnings,
    module_level_hierarchy_recursive,
    inheritance_super_property_setter,
    getattr_proxy,
    islice_tee_chain,
    ravel_multi_index_ndindex,
    writeable_as_strided_overlap,
]]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_structured_program(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_structured_program_forward_and_second_order(program):
    check_forward_and_second_order(program)


@pytest.mark.parametrize("differentiate", ["gradient", "jvp"])
def test_lru_cached_work_arrays_are_followed_and_kept_plain(differentiate):
    """Work arrays a ``functools.lru_cache``'d function of the user's holds between calls, into
    which f writes traced values: followed (their writes differentiated), the cache left with
    plain arrays holding NumPy's bytes, whether the call that makes them runs inside the
    differentiation (a cache miss) or before it."""

    @functools.lru_cache(maxsize=None)
    def workspace(shape):
        return np.empty(shape), np.empty(shape)

    def f(u):
        a, b = workspace(u.shape)
        a[...] = u
        for _ in range(4):
            b[1:-1] = 0.25 * a[:-2] + 0.5 * a[1:-1] + 0.25 * a[2:]
            b[0], b[-1] = a[0], a[-1]
            a, b = b, a
        return np.sum(a ** 2) + a[3]

    u, v = np.cos(np.arange(8.0)), np.linspace(-1.0, 1.0, 8)
    expected = f(u.copy())
    numpys = [w.copy() for w in workspace(u.shape)]
    workspace.cache_clear()
    if differentiate == "gradient":
        value, derivative = mutad.value_and_gradient(f, u, argnums=0)
        derivative = derivative @ v
    else:
        value, derivative = mutad.jvp(f, (u,), (v,))
    kept = workspace(u.shape)
    assert workspace.cache_info().misses == 1
    assert all(type(w) is np.ndarray for w in kept)
    assert [w.tobytes() for w in kept] == [w.tobytes() for w in numpys]
    assert value == expected and f(u.copy()) == expected
    assert np.isclose(derivative, mutad.testing.directional_fd(f, (u,), (v,)), rtol=1e-6)
    again = mutad.value_and_gradient(f, u, argnums=0)  # answered from the cache
    assert again[0] == expected and np.allclose(again[1] @ v, derivative, rtol=1e-12)


@functools.lru_cache(maxsize=None)
def running_mean(n):
    return np.zeros(n)


def test_a_cached_array_read_before_written_carries_state_between_calls_as_numpy():
    """A work array an lru_cache'd function holds, which each call reads before it writes (a
    running mean): traced, replayed and forward calls return, and leave in it, what the same
    calls of NumPy do; the replay's gradients are the traced ones bit for bit."""
    def f(u):
        a = running_mean(len(u))
        a[:] = 0.5 * a + 0.5 * u
        return np.sum(a ** 2) + a[0] * u[1]

    calls = [np.array([1.0, 2.0, 3.0]) + k for k in range(4)]

    def run(call):
        running_mean.cache_clear()
        try:
            return [call(u) for u in calls], running_mean(3).tobytes()
        finally:
            running_mean.cache_clear()

    numpys, state = run(f)
    traced, traced_state = run(mutad.value_and_grad(f))
    replayed, replayed_state = run(mutad.value_and_grad(f, replay=True))
    forward, forward_state = run(lambda u: mutad.jvp(f, (u,), (np.ones(3),)))
    assert traced_state == replayed_state == forward_state == state
    assert [v for v, _ in traced] == [v for v, _ in replayed] == [v for v, _ in forward] == numpys
    assert all(g.tobytes() == h.tobytes() for (_, g), (_, h) in zip(traced, replayed))
    assert np.allclose([g.sum() for _, g in traced], [t for _, t in forward], rtol=1e-12)


class ClassBuffers:
    """Work arrays held by the class, not by its objects: a class attribute, and a method
    cached by lru_cache (keyed by the object and the size)."""

    shared = np.zeros(4)

    @functools.lru_cache(maxsize=None)
    def work(self, n):
        return np.zeros(n)

    def run(self, u):
        self.shared[:] = 2.0 * u
        a = self.work(len(u))
        a[:] = np.sin(self.shared)
        a[1:] += a[:-1] ** 2
        return a @ self.shared


@pytest.mark.parametrize("differentiate", ["gradient", "jvp"])
def test_arrays_a_class_holds_written_through_self_are_followed(differentiate):
    """``self.shared[:] = ...`` into a class attribute, and the array a cached method returns
    (its first call inside the differentiation): followed, and left holding NumPy's bytes, the
    class's attributes as they were."""
    solver = ClassBuffers()
    u, v = np.array([0.5, 1.0, -0.3, 0.2]), np.array([1.0, -2.0, 0.5, 0.3])
    try:
        expected = solver.run(u)
        numpys = [ClassBuffers.shared.copy(), solver.work(4).copy()]
        ClassBuffers.shared[:] = 0.0
        ClassBuffers.work.cache_clear()
        if differentiate == "gradient":
            value, derivative = mutad.value_and_gradient(lambda u: solver.run(u), u, argnums=0)
            derivative = derivative @ v
        else:
            value, derivative = mutad.jvp(lambda u: solver.run(u), (u,), (v,))
        assert value == expected
        assert type(vars(ClassBuffers)["shared"]) is np.ndarray
        assert type(vars(ClassBuffers)["work"]) is type(functools.cache(len))
        kept = [ClassBuffers.shared, solver.work(4)]
        assert all(type(w) is np.ndarray for w in kept)
        assert [w.tobytes() for w in kept] == [w.tobytes() for w in numpys]
        fd = mutad.testing.directional_fd(lambda u: solver.run(u), (u,), (v,))
        assert np.isclose(derivative, fd, rtol=1e-6)
    finally:
        ClassBuffers.work.cache_clear()
