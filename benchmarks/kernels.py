"""Gradients through PolyBench's in-place kernels, written as NumPy users write them.

Thirteen kernels of PolyBench/C 4.2 (stencils: jacobi_1d, jacobi_2d, seidel_2d, heat_3d,
fdtd_2d; linear algebra: lu, ludcmp, cholesky, trisolv, syrk, trmm, gemm, gemver), each written
in NumPy the way NumPy users (and NPBench's NumPy versions) write them: the arrays are updated
in place, with loops over time steps, rows and elements, slice updates, ``+=``, ``-=``, ``/=``
and element assignments; nothing is tuned for mutad. Each kernel runs on its arguments, as
PolyBench's do; the loss of a kernel is a fixed random weighting of the arrays it writes,
``sum_k sum(W_k * out_k)``, and the gradient is taken with respect to every input array
(mutad hands the caller's arrays back unchanged). The inputs are PolyBench's initialisations
(heat_3d's is linear in the indices, which its stencil maps to itself: the loss's value does
not move, its gradient is the stencil's transpose all the same); the sizes are its MINI
(the default), SMALL and MEDIUM datasets (``--size``), and a tiny one for the tests.

The systems, each in its own fresh interpreter per kernel:

* ``mutad``: ``mutad.value_and_grad(loss, argnums=every input)``, traced on every call;
* ``mutad-replay``: the same with ``replay=True``: the first call records the program, the
  second replays it and compiles its runs of small steps; both are timed on their own, and the
  timed rounds start at the third call. ``g.reasons`` is reported where the calls are traced
  instead of replayed;
* ``jax``: the same kernel written for JAX at its best (each kernel's ``jax_note`` says how,
  and the table repeats it), ``jax.jit(jax.value_and_grad(loss, argnums=every input))`` with
  float64 enabled: pure updates with ``.at[].set/add``, the time steps and long sequential
  loops in ``lax.fori_loop`` or ``lax.scan``, masks instead of slices of varying length, and
  whatever has no loop-carried dependence vectorised. If JAX is not installed, its column says
  so.

**Method**, as ``benchmarks/scipy_solvers.py`` and ``mutad-bench`` (``mutad.bench.harness``):
every configuration (kernel, system) runs in a fresh interpreter with one compute thread
(``OMP_NUM_THREADS=1`` and its relatives; XLA's ``--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1``) and glibc malloc pinned. There: the first gradient call
(JAX compiles then; mutad-replay records, and its second call, which replays and compiles, is
timed too), then the peak extra memory of one gradient call, twice: tracemalloc's peak (which
sees NumPy's buffers and mutad's Python objects, exact at these small sizes) and VmHWM after a
reset through ``/proc/self/clear_refs`` (the harness's measure, which sees XLA's buffers too
but moves by whole pages and heap growths), then one untimed round and ``--rounds`` rounds of
(NumPy forward, gradient[, JAX's jitted forward]) back to back, each timed by the process's CPU
time (``--clock``: on a machine shared with other work, the wall clock counts the time others
take the core) over as many calls as make the NumPy forwards last ``--min-time`` (2 ms) at
least: a forward of a few microseconds is below the resolution of one timing. The NumPy
forward runs on fresh copies of the inputs, made before its clock starts. A ratio is computed
within a round and
reported as the median [min-max] over the rounds; the only absolute time is the NumPy
forward's (and the replay's first two calls). Correctness, in the parent: each gradient along
a fixed random direction against a fourth-order central difference of the NumPy loss
(``harness.directional_finite_difference``), mutad's and JAX's gradients against each other
(max |g - g_jax| / max |g_jax| over the inputs), the replayed gradient against the traced one
bit for bit, mutad's loss against NumPy's bit for bit, and, in the child, the caller's arrays
unchanged bit for bit after mutad's gradient. A kernel on which mutad raises keeps its row,
with the error's text.

    python benchmarks/kernels.py                                   # every kernel, MINI sizes
    python benchmarks/kernels.py --size small --kernels lu,seidel_2d --rounds 3
    python benchmarks/kernels.py --systems mutad,jax --json kernels.json
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script: use the checkout's mutad
    sys.path.insert(0, str(ROOT))

# One compute thread, read when NumPy's BLAS and XLA's CPU client start: set before either is
# imported (setdefault keeps a value the caller exported).
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("XLA_FLAGS",
                      "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import mutad  # noqa: E402
from mutad.bench.harness import CLOCKS  # noqa: E402

MARKER = "KERNELS-RESULT "
ALPHA, BETA = 1.5, 1.2  # PolyBench's alpha and beta
FD_STEP = 1e-4
"""The step of the central difference along a direction of standard normal entries: the
factorisations' errors at MINI sizes fall as step**4 down to about 1e-11 there."""

# ----------------------------------------------------------------------------------------------
# The kernels, in NumPy: in place on their arguments, as PolyBench's are. A stencil takes its
# number of time steps first, then its arrays.


def jacobi_1d(tsteps, A, B):
    for t in range(tsteps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_2d(tsteps, A, B):
    for t in range(tsteps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                               + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                               + B[2:, 1:-1] + B[:-2, 1:-1])


def seidel_2d(tsteps, A):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            # the row's neighbours that are already known, then the sweep along the row
            A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:]
                           + A[i + 1, :-2] + A[i + 1, 1:-1] + A[i + 1, 2:])
            for j in range(1, n - 1):
                A[i, j] += A[i, j - 1]
                A[i, j] /= 9.0


def heat_3d(tsteps, A, B):
    for t in range(tsteps):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2])
            + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
            + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
            + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2])
            + B[1:-1, 1:-1, 1:-1])


def fdtd_2d(tmax, ex, ey, hz, fict):
    for t in range(tmax):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]


def ludcmp(A, b, x, y):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] = (A[i, j] - A[i, :j] @ A[:j, j]) / A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    for i in range(n):
        y[i] = b[i] - A[i, :i] @ y[:i]
    for i in range(n - 1, -1, -1):
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]


def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[j, :j]
            A[i, j] /= A[j, j]
        A[i, i] -= A[i, :i] @ A[i, :i]
        A[i, i] = np.sqrt(A[i, i])


def trisolv(L, x, b):
    for i in range(x.shape[0]):
        x[i] = b[i]
        x[i] -= L[i, :i] @ x[:i]
        x[i] /= L[i, i]


def syrk(C, A):
    n, m = A.shape
    for i in range(n):
        C[i, :i + 1] *= BETA
        for k in range(m):
            C[i, :i + 1] += ALPHA * A[i, k] * A[:i + 1, k]


def trmm(A, B):
    m = B.shape[0]
    for i in range(m):
        B[i, :] += A[i + 1:, i] @ B[i + 1:, :]
        B[i, :] *= ALPHA


def gemm(C, A, B):
    C *= BETA
    C += ALPHA * (A @ B)


def gemver(A, u1, v1, u2, v2, w, x, y, z):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += BETA * (y @ A) + z
    w += ALPHA * (A @ x)


# ----------------------------------------------------------------------------------------------
# PolyBench's initialisations


def _grid(*shape):
    return np.indices(shape, dtype=np.float64)


def _spd(n):
    """PolyBench's input of lu, ludcmp and cholesky: L @ L.T for a unit lower-triangular L."""
    i, j = _grid(n, n)
    lower = np.where(j < i, -(j % n) / n + 1.0, 0.0) + np.eye(n)
    return lower @ lower.T


def init_jacobi_1d(tsteps, n):
    i = np.arange(n, dtype=np.float64)
    return (i + 2) / n, (i + 3) / n


def init_jacobi_2d(tsteps, n):
    i, j = _grid(n, n)
    return (i * (j + 2) + 2) / n, (i * (j + 3) + 3) / n


def init_seidel_2d(tsteps, n):
    i, j = _grid(n, n)
    return ((i * (j + 2) + 2) / n,)


def init_heat_3d(tsteps, n):
    i, j, k = _grid(n, n, n)
    A = (i + j + (n - k)) * 10 / n
    return A, A.copy()


def init_fdtd_2d(tmax, nx, ny):
    i, j = _grid(nx, ny)
    return i * (j + 1) / nx, i * (j + 2) / ny, i * (j + 3) / nx, np.arange(tmax, dtype=np.float64)


def init_lu(n):
    return (_spd(n),)


def init_ludcmp(n):
    b = (np.arange(n) + 1.0) / n / 2.0 + 4.0
    return _spd(n), b, np.zeros(n), np.zeros(n)


def init_cholesky(n):
    return (_spd(n),)


def init_trisolv(n):
    i, j = _grid(n, n)
    L = np.where(j <= i, (i + n - j + 1) * 2 / n, 0.0)
    return L, np.full(n, -999.0), np.arange(n, dtype=np.float64)


def init_syrk(m, n):
    i, j = _grid(n, m)
    A = (i * j + 1) % n / n
    i, j = _grid(n, n)
    return (i * j + 2) % m / m, A


def init_trmm(m, n):
    i, j = _grid(m, m)
    A = np.where(j < i, (i + j) % m / m, 0.0) + np.eye(m)
    i, j = _grid(m, n)
    return A, (n + (i - j)) % n / n


def init_gemm(ni, nj, nk):
    i, j = _grid(ni, nj)
    C = (i * j + 1) % ni / ni
    i, k = _grid(ni, nk)
    A = i * (k + 1) % nk / nk
    k, j = _grid(nk, nj)
    return C, A, k * (j + 2) % nj / nj


def init_gemver(n):
    i, j = _grid(n, n)
    r = (np.arange(n) + 1.0) / n
    return ((i * j) % n / n, np.arange(n, dtype=np.float64), r / 4, r / 2, r / 6, np.zeros(n),
            np.zeros(n), r / 8, r / 9)


# ----------------------------------------------------------------------------------------------
# The kernels for JAX: pure functions of the same arrays that return every array, updated.


def jax_kernels():
    """``{name: run(steps, *arrays) -> arrays}``, JAX's versions (imported only when asked)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", True)

    def j_jacobi_1d(steps, A, B):
        def step(t, state):
            A, B = state
            B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
            A = A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:]))
            return A, B
        return lax.fori_loop(0, steps[0], step, (A, B))

    def j_jacobi_2d(steps, A, B):
        def five(X):
            return 0.2 * (X[1:-1, 1:-1] + X[1:-1, :-2] + X[1:-1, 2:] + X[2:, 1:-1]
                          + X[:-2, 1:-1])

        def step(t, state):
            A, B = state
            B = B.at[1:-1, 1:-1].set(five(A))
            A = A.at[1:-1, 1:-1].set(five(B))
            return A, B
        return lax.fori_loop(0, steps[0], step, (A, B))

    def j_seidel_2d(steps, A):
        n = A.shape[0]

        def along(previous, value):  # A[i, j] = (A[i, j] + A[i, j - 1]) / 9
            new = (value + previous) / 9.0
            return new, new

        def row(i, A):
            up, mid, down = A[i - 1], A[i], A[i + 1]
            mid = mid.at[1:-1].add(up[:-2] + up[1:-1] + up[2:] + mid[2:] + down[:-2]
                                   + down[1:-1] + down[2:])
            _, swept = lax.scan(along, mid[0], mid[1:-1])
            return A.at[i].set(mid.at[1:-1].set(swept))

        def sweep(t, A):
            return lax.fori_loop(1, n - 1, row, A)
        return (lax.fori_loop(0, steps[0], sweep, A),)

    def j_heat_3d(steps, A, B):
        def seven(X):
            c = X[1:-1, 1:-1, 1:-1]
            return (0.125 * (X[2:, 1:-1, 1:-1] - 2.0 * c + X[:-2, 1:-1, 1:-1])
                    + 0.125 * (X[1:-1, 2:, 1:-1] - 2.0 * c + X[1:-1, :-2, 1:-1])
                    + 0.125 * (X[1:-1, 1:-1, 2:] - 2.0 * c + X[1:-1, 1:-1, :-2]) + c)

        def step(t, state):
            A, B = state
            B = B.at[1:-1, 1:-1, 1:-1].set(seven(A))
            A = A.at[1:-1, 1:-1, 1:-1].set(seven(B))
            return A, B
        return lax.fori_loop(0, steps[0], step, (A, B))

    def j_fdtd_2d(steps, ex, ey, hz, fict):
        def step(t, state):
            ex, ey, hz = state
            ey = ey.at[0, :].set(fict[t])
            ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
            ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
            hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                             - ey[:-1, :-1]))
            return ex, ey, hz
        return (*lax.fori_loop(0, steps[0], step, (ex, ey, hz)), fict)

    def lu_in_place(A):
        """Right-looking Doolittle LU without pivoting (PolyBench's factors): one masked
        rank-1 update of the trailing block per column."""
        index = jnp.arange(A.shape[0])

        def column(k, A):
            below = index > k
            multipliers = jnp.where(below, A[:, k] / A[k, k], 0.0)
            A = A.at[:, k].set(jnp.where(below, multipliers, A[:, k]))
            return A - jnp.outer(multipliers, jnp.where(below, A[k], 0.0))
        return lax.fori_loop(0, A.shape[0], column, A)

    def j_lu(steps, A):
        return (lu_in_place(A),)

    def j_ludcmp(steps, A, b, x, y):
        n = A.shape[0]
        index = jnp.arange(n)
        A = lu_in_place(A)

        def forward(i, y):
            return y.at[i].set(b[i] - jnp.where(index < i, A[i], 0.0) @ y)

        def backward(k, x):
            i = n - 1 - k
            return x.at[i].set((y[i] - jnp.where(index > i, A[i], 0.0) @ x) / A[i, i])
        y = lax.fori_loop(0, n, forward, y)
        x = lax.fori_loop(0, n, backward, x)
        return A, b, x, y

    def j_cholesky(steps, A):
        n = A.shape[0]
        index = jnp.arange(n)
        trailing_lower = index[:, None] >= index[None, :]

        def column(k, A):
            # right-looking: the column's square root and multipliers, then the trailing
            # lower triangle; the upper triangle stays as it was, as in PolyBench
            pivot = jnp.sqrt(A[k, k])
            multipliers = jnp.where(index > k, A[:, k] / pivot, 0.0)
            A = A.at[:, k].set(jnp.where(index > k, multipliers,
                                         jnp.where(index == k, pivot, A[:, k])))
            update = jnp.where(trailing_lower & (index[None, :] > k),
                               jnp.outer(multipliers, multipliers), 0.0)
            return A - update
        return (lax.fori_loop(0, n, column, A),)

    def j_trisolv(steps, L, x, b):
        index = jnp.arange(x.shape[0])

        def row(i, x):
            return x.at[i].set((b[i] - jnp.where(index < i, L[i], 0.0) @ x) / L[i, i])
        return L, lax.fori_loop(0, x.shape[0], row, x), b

    def j_syrk(steps, C, A):
        n = C.shape[0]
        lower = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
        return jnp.where(lower, BETA * C + ALPHA * (A @ A.T), C), A

    def j_trmm(steps, A, B):
        return A, ALPHA * (B + jnp.tril(A, -1).T @ B)

    def j_gemm(steps, C, A, B):
        return BETA * C + ALPHA * (A @ B), A, B

    def j_gemver(steps, A, u1, v1, u2, v2, w, x, y, z):
        A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
        x = x + BETA * (y @ A) + z
        w = w + ALPHA * (A @ x)
        return A, u1, v1, u2, v2, w, x, y, z

    return {name[2:]: run for name, run in locals().items() if name.startswith("j_")}


# ----------------------------------------------------------------------------------------------
# The table of kernels


@dataclass
class Kernel:
    name: str
    run: object  # run(*steps, *arrays): PolyBench's kernel in NumPy, in place
    init: object  # init(**sizes) -> the input arrays
    outputs: tuple  # positions of the arrays the kernel writes: the loss weighs them
    sizes: dict  # "tiny", "mini", "small", "medium" -> the sizes, PolyBench's names
    jax_note: str


KERNELS = {k.name: k for k in [
    Kernel("jacobi_1d", jacobi_1d, init_jacobi_1d, (0, 1),
           {"tiny": {"tsteps": 3, "n": 8}, "mini": {"tsteps": 20, "n": 30},
            "small": {"tsteps": 40, "n": 120}, "medium": {"tsteps": 100, "n": 400}},
           "fori_loop over the steps, .at[1:-1].set"),
    Kernel("jacobi_2d", jacobi_2d, init_jacobi_2d, (0, 1),
           {"tiny": {"tsteps": 3, "n": 6}, "mini": {"tsteps": 20, "n": 30},
            "small": {"tsteps": 40, "n": 90}, "medium": {"tsteps": 100, "n": 250}},
           "fori_loop over the steps, .at[1:-1, 1:-1].set"),
    Kernel("seidel_2d", seidel_2d, init_seidel_2d, (0,),
           {"tiny": {"tsteps": 2, "n": 6}, "mini": {"tsteps": 20, "n": 40},
            "small": {"tsteps": 40, "n": 120}, "medium": {"tsteps": 100, "n": 400}},
           "fori_loop over steps and rows (the row's neighbours vectorised, .at[i].set), "
           "lax.scan along the row for the recurrence"),
    Kernel("heat_3d", heat_3d, init_heat_3d, (0, 1),
           {"tiny": {"tsteps": 2, "n": 5}, "mini": {"tsteps": 20, "n": 10},
            "small": {"tsteps": 40, "n": 20}, "medium": {"tsteps": 100, "n": 40}},
           "fori_loop over the steps, .at[1:-1, 1:-1, 1:-1].set"),
    Kernel("fdtd_2d", fdtd_2d, init_fdtd_2d, (0, 1, 2),
           {"tiny": {"tmax": 3, "nx": 5, "ny": 6}, "mini": {"tmax": 20, "nx": 20, "ny": 30},
            "small": {"tmax": 40, "nx": 60, "ny": 80},
            "medium": {"tmax": 100, "nx": 200, "ny": 240}},
           "fori_loop over the steps, .at[].set/.add"),
    Kernel("lu", lu, init_lu, (0,),
           {"tiny": {"n": 6}, "mini": {"n": 40}, "small": {"n": 120}, "medium": {"n": 400}},
           "right-looking: fori_loop over columns, a masked rank-1 update each"),
    Kernel("ludcmp", ludcmp, init_ludcmp, (0, 2, 3),
           {"tiny": {"n": 6}, "mini": {"n": 40}, "small": {"n": 120}, "medium": {"n": 400}},
           "lu's right-looking fori_loop, then two fori_loops of masked dots, .at[i].set"),
    Kernel("cholesky", cholesky, init_cholesky, (0,),
           {"tiny": {"n": 6}, "mini": {"n": 40}, "small": {"n": 120}, "medium": {"n": 400}},
           "right-looking: fori_loop over columns, a masked rank-1 update of the lower "
           "triangle each"),
    Kernel("trisolv", trisolv, init_trisolv, (1,),
           {"tiny": {"n": 6}, "mini": {"n": 40}, "small": {"n": 120}, "medium": {"n": 400}},
           "fori_loop over rows, a masked dot each, .at[i].set"),
    Kernel("syrk", syrk, init_syrk, (0,),
           {"tiny": {"m": 4, "n": 5}, "mini": {"m": 20, "n": 30}, "small": {"m": 60, "n": 80},
            "medium": {"m": 200, "n": 240}},
           "vectorised: where(lower, beta C + alpha A A^T, C)"),
    Kernel("trmm", trmm, init_trmm, (1,),
           {"tiny": {"m": 4, "n": 5}, "mini": {"m": 20, "n": 30}, "small": {"m": 60, "n": 80},
            "medium": {"m": 200, "n": 240}},
           "vectorised: alpha (B + tril(A, -1)^T B)"),
    Kernel("gemm", gemm, init_gemm, (0,),
           {"tiny": {"ni": 4, "nj": 5, "nk": 6}, "mini": {"ni": 20, "nj": 25, "nk": 30},
            "small": {"ni": 60, "nj": 70, "nk": 80},
            "medium": {"ni": 200, "nj": 220, "nk": 240}},
           "vectorised, as the NumPy version"),
    Kernel("gemver", gemver, init_gemver, (0, 5, 6),
           {"tiny": {"n": 6}, "mini": {"n": 40}, "small": {"n": 120}, "medium": {"n": 400}},
           "vectorised, as the NumPy version"),
]}
SIZES = ("tiny", "mini", "small", "medium")
SYSTEMS = ("mutad", "mutad-replay", "jax")


class Problem:
    """One kernel at one size: its inputs, its NumPy loss (which writes into its arguments,
    as the kernel does) and the weights of that loss."""

    def __init__(self, kernel, size):
        self.kernel = kernel
        self.sizes = kernel.sizes[size] if isinstance(size, str) else size
        self.args = tuple(kernel.init(**self.sizes))
        # the kernels take their step counts; the other sizes are the arrays' shapes
        self.steps = tuple(v for k, v in self.sizes.items() if k in ("tsteps", "tmax"))
        rng = np.random.default_rng(sum(map(ord, kernel.name)))
        self.weights = tuple(rng.standard_normal(self.args[k].shape) for k in kernel.outputs)
        self.argnums = tuple(range(len(self.args)))
        run, steps, outputs, weights = kernel.run, self.steps, kernel.outputs, self.weights

        def loss(*arrays):
            run(*steps, *arrays)
            total = 0.0
            for k, w in zip(outputs, weights):
                total = total + np.sum(w * arrays[k])
            return total

        loss.__name__ = kernel.name + "_loss"
        self.loss = loss

    @property
    def input_bytes(self):
        return sum(a.nbytes for a in self.args)

    def numpy_forward(self):
        """The loss on fresh copies of the inputs (the kernel writes into them)."""
        return self.loss(*[a.copy() for a in self.args])

    def jax_loss(self, runs):
        import jax.numpy as jnp

        run, steps, outputs = runs[self.kernel.name], self.steps, self.kernel.outputs
        weights = [jnp.asarray(w) for w in self.weights]

        def loss(*arrays):
            after = run(steps, *arrays)
            return sum(jnp.sum(w * after[k]) for k, w in zip(outputs, weights))
        return loss

    def finite_difference(self, direction, step=FD_STEP):
        """The NumPy loss's fourth-order central difference along ``direction`` (one array per
        input): the harness's, on new arrays each time, so the inputs stay as they are."""
        from mutad.bench import harness

        problem = SimpleNamespace(args=self.args, argnums=self.argnums,
                                  numpy_forward=self.loss)
        return harness.directional_finite_difference(problem, direction, step)

    def direction(self, seed=0):
        """A fixed random direction: standard normal entries in every input."""
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(a.shape) for a in self.args]


# ----------------------------------------------------------------------------------------------
# One configuration, in the child


def _tracemalloc_peak(call):
    """Peak bytes tracemalloc saw during ``call()`` above what was allocated before."""
    from mutad.bench import harness

    harness.release_free_memory()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak - before



MIN_TIME = 0.002
"""Seconds of NumPy forwards per timed sample at least (``--min-time``)."""


def _timed(call, clock=time.perf_counter, repeat=1):
    """``(seconds, result)`` of ``repeat`` calls of ``call`` by ``clock``: the last result."""
    start = clock()
    for _ in range(repeat):
        result = call()
    return clock() - start, result


def _error_text(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    return " ".join(text.split())[:400]


def measure(configuration):
    """Warm-up, peaks and timed rounds of one (kernel, system); the gradient is saved to
    ``configuration["gradient_file"]`` for the parent's checks."""
    from mutad.bench import harness

    kernel = KERNELS[configuration["kernel"]]
    system = configuration["system"]
    problem = Problem(kernel, configuration["size"])
    row = {"status": "ok", "input_bytes": problem.input_bytes}
    harness.pin_allocator("peak")
    before = harness.snapshot(problem.args)
    forward = None
    if system.startswith("mutad"):
        gradient_of = mutad.value_and_grad(problem.loss, argnums=problem.argnums,
                                           replay=system == "mutad-replay")
        gradient = lambda: gradient_of(*problem.args)  # noqa: E731
    else:
        import jax

        loss = problem.jax_loss(jax_kernels())
        arrays = [jax.numpy.asarray(a) for a in problem.args]
        jitted = jax.jit(jax.value_and_grad(loss, argnums=problem.argnums))
        jitted_forward = jax.jit(loss)
        gradient = lambda: jax.block_until_ready(jitted(*arrays))  # noqa: E731
        forward = lambda: jax.block_until_ready(jitted_forward(*arrays))  # noqa: E731
    try:
        row["first_call_s"], result = _timed(gradient)
        row["arguments_unchanged"] = harness.snapshot(problem.args) == before
        first = harness.fingerprint(float(result[0]), [np.asarray(g) for g in result[1]])
        del result
        if system == "mutad-replay":
            row["second_call_s"], _ = _timed(gradient)
        if forward is not None:
            forward()
        problem.numpy_forward()
        row["tracemalloc_peak_bytes"] = _tracemalloc_peak(gradient)
        result, peak, _, method = harness.peak_extra_memory(gradient)
        row["vmhwm_peak_mib"], row["memory_method"] = peak, method
        value, gradients = float(result[0]), [np.array(g) for g in result[1]]
        del result
        row["same_as_first_call"] = harness.fingerprint(value, gradients) == first
        row["arguments_unchanged"] &= harness.snapshot(problem.args) == before
        harness.pin_allocator("timing")
        clock = CLOCKS[configuration.get("clock", "process")]
        # Calls per timed sample: as many NumPy forwards as fill ``min_time`` (one call of a
        # kernel whose forward takes microseconds is below the clock's and the machine's
        # resolution), the gradient and JAX's forward called as often
        once, _ = _timed(problem.numpy_forward, clock)
        repeat = max(1, math.ceil(configuration.get("min_time", MIN_TIME) / max(once, 1e-9)))
        row["calls_per_sample"], row["clock"] = repeat, configuration.get("clock", "process")
        times = {"numpy": [], "gradient": [], "own": []}
        for round_ in range(configuration["rounds"] + 1):  # the first round is untimed
            copies = [[a.copy() for a in problem.args] for _ in range(repeat)]
            start = clock()
            for arrays in copies:
                problem.loss(*arrays)
            elapsed = {"numpy": (clock() - start) / repeat}
            elapsed["gradient"] = _timed(gradient, clock, repeat)[0] / repeat
            if forward is not None:
                elapsed["own"] = _timed(forward, clock, repeat)[0] / repeat
            if round_:
                for key, seconds in elapsed.items():
                    times[key].append(seconds)
    except Exception as exc:  # a finding: reported in the row, the other kernels still run
        row.update(status="error", detail=_error_text(exc),
                   traceback=traceback.format_exc()[-4000:],
                   arguments_unchanged=harness.snapshot(problem.args) == before)
        return row
    if system == "mutad-replay":
        row["reasons"] = {str(k): str(v) for k, v in gradient_of.reasons.items()}
    row.update(value=value, numpy_value=float(problem.numpy_forward()),
               numpy_s=times["numpy"],
               over_numpy=[g / n for g, n in zip(times["gradient"], times["numpy"])],
               over_own=[g / o for g, o in zip(times["gradient"], times["own"])] or None)
    np.savez(configuration["gradient_file"], *gradients)
    return row


def run_child(configuration, timeout):
    from mutad.bench import harness

    return harness.run_script_child(__file__, MARKER, configuration, timeout)


def installed(system):
    import importlib.util

    return system != "jax" or importlib.util.find_spec("jax") is not None


# ----------------------------------------------------------------------------------------------
# The parent: configurations, checks, the tables


def run(options, out=print):
    """Every (kernel, system) in a fresh interpreter (or here, with ``--in-process``); returns
    the rows, checked, and prints the tables."""
    with tempfile.TemporaryDirectory(prefix="kernels-") as directory:
        rows = _run(options, Path(directory))
    if options.json:
        Path(options.json).write_text(json.dumps({"environment": environment(),
                                                  "options": vars(options), "rows": rows},
                                                 indent=1))
    out(table(rows, options))
    return rows


def _run(options, directory):
    rows = []
    for name in options.kernels:
        for system in options.systems:
            row = {"kernel": name, "system": system, "size": options.size,
                   "sizes": KERNELS[name].sizes[options.size]}
            if not installed(system):
                row["status"] = "not installed"
            else:
                configuration = {"kernel": name, "system": system, "size": options.size,
                                 "rounds": options.rounds, "clock": options.clock,
                                 "min_time": options.min_time,
                                 "gradient_file": str(directory / f"{name}-{system}.npz")}
                row.update(measure(configuration) if options.in_process
                           else run_child(configuration, options.timeout))
                row["gradient_file"] = configuration["gradient_file"]
            rows.append(row)
            if options.json:  # after every configuration, so that a stopped run keeps its rows
                Path(options.json).write_text(json.dumps(rows, indent=1))
            if options.progress:
                print(f"  {name} {system}: {row['status']} {row.get('detail', '')}",
                      file=sys.stderr, flush=True)
    check(rows)
    for row in rows:  # the files go with the directory
        row.pop("gradient_file", None)
    return rows


def _load(row):
    with np.load(row["gradient_file"]) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


FD_TOLERANCE = 1e-6
"""Agreement with the central difference that every gradient must reach (the MINI sizes reach
1e-9 or better)."""
JAX_TOLERANCE = 1e-8
"""Agreement of mutad's gradients with JAX's (the harness's GRADIENT_TOLERANCE): both
differentiate the same arithmetic, JAX's sums in another order."""


def check(rows):
    """Each gradient along a fixed direction against the NumPy loss's central difference;
    mutad's gradients against JAX's, the replayed against the traced bit for bit; mutad's
    loss against NumPy's bit for bit. A mutad row that fails one gets ``wrong``: what failed."""
    by_kernel = {}
    for row in rows:
        by_kernel.setdefault(row["kernel"], {})[row["system"]] = row
    for name, systems in by_kernel.items():
        done = {s: r for s, r in systems.items() if r["status"] == "ok"}
        if not done:
            continue
        problem = Problem(KERNELS[name], next(iter(done.values()))["size"])
        direction = problem.direction()
        fd = problem.finite_difference(direction)
        gradients = {s: _load(r) for s, r in done.items()}
        for system, row in done.items():
            along = sum(float(np.sum(g * v)) for g, v in zip(gradients[system], direction))
            row["fd"], row["along"] = fd, along
            row["fd_err"] = abs(along - fd) / abs(fd)
            row["value_err"] = abs(row["value"] - row["numpy_value"]) / abs(row["numpy_value"])
            if system != "jax" and "jax" in gradients:
                row["jax_err"] = max(_relative(g, g_jax) for g, g_jax
                                     in zip(gradients[system], gradients["jax"]))
        if "mutad" in gradients and "mutad-replay" in gradients:
            done["mutad-replay"]["same_as_traced"] = all(
                g.tobytes() == h.tobytes() for g, h in zip(gradients["mutad"],
                                                         gradients["mutad-replay"]))
        for system, row in done.items():
            wrong = []
            if not row["fd_err"] <= FD_TOLERANCE:
                wrong.append(f"off the central difference by {row['fd_err']:.1e}")
            if system != "jax":
                if row["value"] != row["numpy_value"]:
                    wrong.append(f"loss {row['value']!r}, NumPy's {row['numpy_value']!r}")
                if not row["arguments_unchanged"]:
                    wrong.append("the caller's arrays changed")
                if not row["same_as_first_call"]:
                    wrong.append("a later call's result is not the first call's")
                if not row.get("jax_err", 0.0) <= JAX_TOLERANCE:
                    wrong.append(f"off JAX's gradient by {row['jax_err']:.1e}")
                if row.get("same_as_traced") is False:
                    wrong.append("the replayed gradient is not the traced one bit for bit")
            if wrong:
                row["wrong"] = "; ".join(wrong)


def _relative(g, reference):
    from mutad.bench import harness

    return harness.relative_difference(g, reference)


def spread(values):
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def size_label(sizes):
    return " ".join(f"{k}={v}" for k, v in sizes.items())


def _ok(row):
    return row is not None and row["status"] == "ok"


def _ratio_cell(row):
    if row is None:
        return "-"
    if row["status"] != "ok":
        detail = f": {row['detail']}" if row.get("detail") else ""
        return f"**{row['status']}**{detail}".replace("|", "\\|")
    return spread(row["over_numpy"]) + (" **WRONG**" if row.get("wrong") else "")


def _err(row, key):
    return f"{row[key]:.0e}" if row is not None and key in row else "-"


def _kib(value_bytes):
    return f"{value_bytes / 1024:,.0f}"


def table(rows, options):
    kernels = list(dict.fromkeys(row["kernel"] for row in rows))
    by = {(row["kernel"], row["system"]): row for row in rows}
    lines = [
        f"PolyBench kernels ({options.size} sizes), gradient / NumPy forward: "
        f"{options.rounds} rounds per configuration, each in a fresh interpreter with one "
        f"thread, timed by the {options.clock} clock over calls lasting "
        f"{options.min_time * 1e3:g} ms at least; median [min-max] of the per-round ratios.",
        "",
        "| kernel | sizes | inputs KiB | NumPy fwd ms | mutad | mutad peak KiB (x inputs) "
        "| mutad-replay | replay 1st / 2nd call ms | jax | fd err mutad / replay / jax "
        "| mutad vs jax |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name in kernels:
        mutad_row, replay, jax_row = (by.get((name, s)) for s in SYSTEMS)
        done = [r for r in (mutad_row, replay, jax_row) if _ok(r)]
        any_row = next(r for r in (mutad_row, replay, jax_row) if r is not None)
        inputs = f"{done[0]['input_bytes'] / 1024:.1f}" if done else "-"
        numpy_ms = (f"{1e3 * statistics.median([t for r in done for t in r['numpy_s']]):.3g}"
                    if done else "-")
        peak = "-"
        if _ok(mutad_row):
            b = mutad_row["tracemalloc_peak_bytes"]
            peak = f"{_kib(b)} ({b / mutad_row['input_bytes']:.0f}x)"
        replay_cell, calls = _ratio_cell(replay), "-"
        if _ok(replay):
            calls = f"{1e3 * replay['first_call_s']:.3g} / {1e3 * replay['second_call_s']:.3g}"
            if replay.get("reasons"):
                notes.append(f"{name}: mutad-replay traced every call; `g.reasons`: "
                             + "; ".join(f"\"{v}\"" for v in sorted(set(
                                 replay["reasons"].values()))))
                replay_cell += " (traced)"
        for r in (mutad_row, replay, jax_row):
            if _ok(r) and r.get("wrong"):
                notes.append(f"{name} {r['system']}: WRONG: {r['wrong']}")
        fd = " / ".join(_err(r, "fd_err") for r in (mutad_row, replay, jax_row))
        lines.append(f"| {name} | {size_label(any_row['sizes'])} | {inputs} | {numpy_ms} | "
                     f"{_ratio_cell(mutad_row)} | {peak} | {replay_cell} | {calls} | "
                     f"{_ratio_cell(jax_row)} | {fd} | {_err(mutad_row, 'jax_err')} |")
    lines += ["", "| system | median over kernels | worst |", "|---|---|---|"]
    for system in SYSTEMS:
        medians = {name: statistics.median(by[name, system]["over_numpy"]) for name in kernels
                   if _ok(by.get((name, system)))}
        failed = sorted(f"{name} ({by[name, system]['status']})" for name in kernels
                        if (name, system) in by and not _ok(by[name, system]))
        if medians:
            worst = max(medians, key=medians.get)
            lines.append(f"| {system} | {statistics.median(medians.values()):.3g} | "
                         f"{medians[worst]:.3g} ({worst}){'; ' if failed else ''}"
                         f"{', '.join(failed)} |")
        elif failed:
            lines.append(f"| {system} | - | {', '.join(failed)} |")
    lines += ["", "| kernel | mutad tracemalloc KiB | mutad VmHWM KiB | replay tracemalloc KiB "
              "| replay VmHWM KiB | jax VmHWM KiB |", "|---|---|---|---|---|---|"]
    for name in kernels:
        cells = []
        for system, keys in (("mutad", ("tracemalloc", "vmhwm")),
                             ("mutad-replay", ("tracemalloc", "vmhwm")), ("jax", ("vmhwm",))):
            r = by.get((name, system))
            for key in keys:
                if not _ok(r):
                    cells.append("-")
                elif key == "tracemalloc":
                    cells.append(_kib(r["tracemalloc_peak_bytes"]))
                else:
                    cells.append(f"{r['vmhwm_peak_mib'] * 1024:,.0f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    if any(s == "jax" for _, s in by):
        lines += ["", "| kernel | JAX version | JAX compile + first call s | jax grad / own fwd |",
                  "|---|---|---|---|"]
        for name in kernels:
            r = by.get((name, "jax"))
            if r is None:
                continue
            compile_s = f"{r['first_call_s']:.2f}" if _ok(r) else r["status"]
            own = spread(r["over_own"]) if _ok(r) and r["over_own"] else "-"
            lines.append(f"| {name} | {KERNELS[name].jax_note} | {compile_s} | {own} |")
    lines += [
        "",
        "NumPy fwd ms: the median time of the NumPy loss (the kernel on fresh copies, then the "
        "weighted sum); mutad, mutad-replay, jax: gradient time over that forward's in the same "
        "round (mutad-replay from its third call on); mutad peak: tracemalloc's peak during one "
        "traced gradient call, over the bytes of the inputs; replay 1st / 2nd call: the "
        "recording, then the first replay (which compiles); fd err: |g . v - fd| / |fd| along "
        "a fixed random direction v against a fourth-order central difference of the NumPy "
        "loss; mutad vs jax: max |g - g_jax| / max |g_jax| over the inputs. VmHWM: the "
        "high-water mark during one gradient call over the resident memory before it (whole "
        "pages and heap growths: coarse at these sizes, but it sees XLA's buffers).",
    ]
    if notes:
        lines += [""] + [f"* {note}" for note in notes]
    return "\n".join(lines)


def environment():
    import scipy

    facts = {"date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
             "platform": platform.platform(), "cores": len(os.sched_getaffinity(0)),
             "numpy": np.__version__, "scipy": scipy.__version__,
             "mutad": getattr(mutad, "__version__", None)}
    try:
        from importlib.metadata import version

        facts["jax"] = version("jax")
    except Exception:  # not installed
        facts["jax"] = None
    try:
        facts["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                         capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):  # not a checkout
        facts["commit"] = None
    return facts


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=lambda s: s.split(","), default=list(KERNELS))
    parser.add_argument("--systems", type=lambda s: s.split(","), default=list(SYSTEMS))
    parser.add_argument("--size", choices=SIZES, default="mini")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="process",
                        help="the process's CPU time (default) or the wall clock")
    parser.add_argument("--min-time", type=float, default=MIN_TIME,
                        help="seconds of NumPy forwards per timed sample at least: a kernel "
                        "whose forward is shorter is called that many times per sample, its "
                        "gradient as often (default %(default)s)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--in-process", action="store_true",
                        help="measure in this interpreter (a quick check; no fresh state)")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    for name in options.kernels:
        if name not in KERNELS:
            parser.error(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    for system in options.systems:
        if system not in SYSTEMS:
            parser.error(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")
    return options


def main(argv=None):
    options = parse(argv)
    if options.child:
        print(MARKER + json.dumps(measure(json.loads(options.child))), flush=True)
        return 0
    rows = run(options)
    return 1 if any(r["status"] not in ("ok", "not installed") or r.get("wrong")
                    for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
