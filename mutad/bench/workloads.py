"""The benchmark workloads: what is computed, on which inputs, and what the answer must be.

Each workload builds a :class:`Problem` for one size. A problem holds the positional arguments,
the plain-NumPy forward every timing is compared with, the function ``mutad.gradient``
differentiates, and a reference loss to check both against. The workloads page of the
documentation, docs/workloads.md, defines each one (W1-W6, heat-explicit, heat-scalar): the
functions are written the way a NumPy user writes them, and the mutad version is the same
in-place code as the NumPy one, handed to ``mutad.gradient`` unchanged. The peers' versions of
the same workloads are in ``peers.py``.

Nothing here measures anything (that is ``harness.py``), so the CLI and the tests share these
definitions.
"""

import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Problem:
    """One workload at one size: everything needed to time it and to check it.

    ``numpy_forward(*args)`` returns the loss with plain NumPy and leaves ``args`` as they were;
    ``loss(*args)`` is what mutad differentiates with respect to ``args[i]`` for ``i`` in
    ``argnums`` (it may write into its arguments; mutad hands them back unchanged).
    ``reference_loss()`` is computed independently of both, or published with the workload.
    ``symmetric`` lists the differentiated arguments that are symmetric matrices: their
    gradients are compared by their symmetric parts and finite differences perturb them along
    symmetric directions. ``operations`` divides timings into a per-operation cost where that is
    the quantity of interest. ``direction_scale[i]`` shrinks the random direction along which
    finite differences perturb ``args[i]``, where a unit perturbation would leave the region
    in which a fourth-order difference is accurate.
    """

    params: dict
    args: tuple
    argnums: tuple
    numpy_forward: Callable
    loss: Callable
    reference_loss: Callable[[], float]
    symmetric: tuple = ()
    direction_scale: dict = field(default_factory=dict)
    operations: int | None = None
    state_bytes: int = 0
    reference_tolerance: float = 1e-12


@dataclass(frozen=True)
class Workload:
    """A named family of problems.

    ``sizes[mode]`` lists the parameters to build for the modes ``full``,
    ``quick`` (the default suite) and ``tiny`` (tests). ``steps_parameter`` and ``n_parameter``
    name the parameters that ``--steps`` and ``--n`` replace, where the workload has them.
    ``behaviour_only``: the workload records what each system does with one program (W1), not
    timings.
    """

    name: str
    label: str
    summary: str
    build: Callable[..., Problem]
    sizes: dict = field(default_factory=dict)
    time_unit: str = "ms"
    steps_parameter: str | None = None
    n_parameter: str | None = "n"
    behaviour_only: bool = False


def grid(n):
    """x_i = (i+1)/(n+1), i = 0..n-1: the interior points of the unit interval."""
    return np.arange(1, n + 1) / (n + 1)


def as_user_code(*functions):
    """``functions`` compiled again from their source, at their lines of this file, into one
    namespace that is not a module of mutad's and holds this module's names. The allocation
    mode leaves mutad's own modules with NumPy's functions; in that namespace it follows what
    the functions allocate (``np.zeros``, ``np.array``) as it does in their users' modules."""
    namespace = {**globals(), "__name__": "mutad_bench_user_code"}
    for function in functions:
        try:
            lines, first = inspect.getsourcelines(function)
        except OSError:  # installed without its sources: the functions as they are
            return functions
        source = "\n" * (first - 1) + "".join(lines)
        exec(compile(source, inspect.getsourcefile(function), "exec"), namespace)  # noqa: S102
    return tuple(namespace[function.__name__] for function in functions)


# ----------------------------------------------------------------------------------------------
# W1 addvecs: what each system does with an in-place update of an argument.


def add_vectors(a, b):
    """Workload W1: ``a += b`` in place (the caller's ``a`` is modified), then ``sum(a)``."""
    a += b
    return a.sum()


def build_addvecs(n=1000):
    a = np.linspace(0.0, 1.0, n)
    b = np.linspace(1.0, 2.0, n)
    return Problem(
        params={"n": n},
        args=(a, b),
        argnums=(0, 1),
        # Plain NumPy would modify the caller's a: the baseline works on a copy.
        numpy_forward=lambda a, b: add_vectors(a.copy(), b),
        loss=add_vectors,
        reference_loss=lambda: float(math.fsum(a.tolist()) + math.fsum(b.tolist())),
        state_bytes=a.nbytes,
    )


ADDVECS = Workload(
    name="addvecs",
    label="W1",
    summary="a += b in place, then sum(a): what each system does with the literal spelling",
    build=build_addvecs,
    sizes={"full": [{"n": 1000}], "quick": [{"n": 1000}], "tiny": [{"n": 10}]},
    behaviour_only=True,
)


# ----------------------------------------------------------------------------------------------
# W2 leapfrog: velocity Verlet for the FPU-beta chain, every update in place.

LEAPFROG_BETA = 0.1
LEAPFROG_DT = 0.01
LEAPFROG_REFERENCE = {
    (100_000, 10): 15145.940538804,
    (100_000, 100): 17192.450507368,
    (100_000, 1000): 223066.477962855,
}


def fpu_force(q):
    """F_i = (d_{i+1} - d_i) + beta (d_{i+1}^3 - d_i^3), d_j = q_j - q_{j-1}, fixed ends."""
    padded = np.concatenate((np.zeros(1), q, np.zeros(1)))
    d = padded[1:] - padded[:-1]
    cube = d * d * d  # not d**3: NumPy's power calls libm pow for negative bases, ~25x slower
    return (d[1:] - d[:-1]) + LEAPFROG_BETA * (cube[1:] - cube[:-1])


def leapfrog(q, p, steps):
    """Workload W2: ``steps`` velocity-Verlet steps of ``q`` and ``p`` in place, then
    ``sum(q^2) + sum(p^2)``."""
    for _ in range(steps):
        p += 0.5 * LEAPFROG_DT * fpu_force(q)
        q += LEAPFROG_DT * p
        p += 0.5 * LEAPFROG_DT * fpu_force(q)
    return np.sum(q * q) + np.sum(p * p)


def leapfrog_initial_state(n):
    x = grid(n)
    i = np.arange(n)
    q0 = 0.5 * np.sin(7 * np.pi * x) + 0.1 * np.sin(0.37 * i)
    p0 = 0.2 * np.cos(3 * np.pi * x) + 0.05 * np.cos(0.11 * i)
    return q0, p0


def leapfrog_out_of_place(q, p, steps):
    """The same integrator with ``np.diff`` and no write into an existing array: an
    independent spelling to check losses at sizes with no published reference value."""
    def force(q):
        d = np.diff(q, prepend=0.0, append=0.0)
        return np.diff(d) + LEAPFROG_BETA * np.diff(d * d * d)

    for _ in range(steps):
        p = p + 0.5 * LEAPFROG_DT * force(q)
        q = q + LEAPFROG_DT * p
        p = p + 0.5 * LEAPFROG_DT * force(q)
    return float(np.dot(q, q) + np.dot(p, p))


def build_leapfrog(n=100_000, steps=100):
    q0, p0 = leapfrog_initial_state(n)

    def reference_loss():
        if (n, steps) in LEAPFROG_REFERENCE:
            return LEAPFROG_REFERENCE[(n, steps)]
        return leapfrog_out_of_place(q0, p0, steps)

    return Problem(
        params={"n": n, "steps": steps},
        args=(q0, p0, steps),
        argnums=(0, 1),
        numpy_forward=lambda q, p, steps: leapfrog(q.copy(), p.copy(), steps),
        loss=leapfrog,
        reference_loss=reference_loss,
        state_bytes=q0.nbytes + p0.nbytes,
        # Published values have 14 significant digits; other sizes sum in another order.
        reference_tolerance=1e-12 if (n, steps) in LEAPFROG_REFERENCE else 1e-10,
    )


LEAPFROG = Workload(
    name="leapfrog",
    label="W2",
    summary="FPU-beta chain, T velocity-Verlet steps, every update in place",
    build=build_leapfrog,
    sizes={
        "full": [{"n": 100_000, "steps": steps} for steps in (10, 100, 1000)],
        "quick": [{"n": 10_000, "steps": steps} for steps in (10, 100)],
        "tiny": [{"n": 20, "steps": 3}],
    },
    steps_parameter="steps",
)


# ----------------------------------------------------------------------------------------------
# W3 implicit-heat: implicit Euler with a dense Cholesky factor, solves in place.

HEAT_DT = 1e-5
IMPLICIT_HEAT_REFERENCE = {
    (1000, 10): 611.67995794183,
    (1000, 100): 548.73947924403,
    (1000, 1000): 409.61090918430,
}


def implicit_heat_matrix(n):
    """A = I + dt K, K = h^-2 tridiag(-1, 2, -1), dense."""
    h = 1.0 / (n + 1)
    coupling = HEAT_DT / h**2
    return (np.diag(np.full(n, 1.0 + 2.0 * coupling))
            - np.diag(np.full(n - 1, coupling), 1) - np.diag(np.full(n - 1, coupling), -1))


def implicit_heat_inputs(n):
    x = grid(n)
    i = np.arange(n, dtype=np.float64)
    u0 = np.sin(np.pi * x) + 0.5 * np.sin(6 * np.pi * x) + 0.1 * np.sin(40 * np.pi * x)
    weights = 1.0 + 0.5 * np.sin(0.37 * i * i + 1.1)
    return u0, implicit_heat_matrix(n), weights


def implicit_heat(u, A, weights, steps):
    """Workload W3 with mutad's in-place routines: factor ``A`` in place once, then
    overwrite ``u`` with A^-1 u ``steps`` times."""
    import mutad.linalg  # imported when run, so the other workloads never depend on it

    factor = mutad.linalg.cholesky_(A)
    for _ in range(steps):
        mutad.linalg.ldiv_(factor, u)
    return np.sum(weights * u * u)


def implicit_heat_numpy(u0, A, weights, steps):
    """The plain forward: LAPACK's Cholesky, then two triangular solves per step, in place."""
    import scipy.linalg

    lower = scipy.linalg.cholesky(A, lower=True)
    u = u0.copy()
    for _ in range(steps):
        u = scipy.linalg.solve_triangular(lower, u, lower=True, overwrite_b=True,
                                          check_finite=False)
        u = scipy.linalg.solve_triangular(lower, u, lower=True, trans="T", overwrite_b=True,
                                          check_finite=False)
    return np.sum(weights * u * u)


def implicit_heat_inverse(u, A, weights, steps):
    """W3 as it runs on a device (``mutad-bench --xp cupy``): ``A`` inverted once with the
    array namespace's ``linalg.inv``, then ``u`` overwritten in place with A^-1 u ``steps``
    times. mutad's in-place Cholesky routines call the host's LAPACK, and a device library's
    ``linalg`` has no triangular solve; an inverse applied by products keeps each step's cost
    that of the triangular solves, n^2, where ``linalg.solve`` would factor A again every step."""
    inverse = np.linalg.inv(A)
    for _ in range(steps):
        u[...] = inverse @ u
    return np.sum(weights * u * u)


def implicit_heat_by_eigenvalues(u0, A, weights, steps):
    """u_T = V diag(lambda^-T) V^T u0 from A's eigendecomposition: no Cholesky, no solve."""
    eigenvalues, vectors = np.linalg.eigh(A)
    u = vectors @ ((vectors.T @ u0) * eigenvalues ** (-float(steps)))
    return float(np.sum(weights * u * u))


def build_implicit_heat(n=1000, steps=100):
    u0, A, weights = implicit_heat_inputs(n)

    def reference_loss():
        if (n, steps) in IMPLICIT_HEAT_REFERENCE:
            return IMPLICIT_HEAT_REFERENCE[(n, steps)]
        return implicit_heat_by_eigenvalues(u0, A, weights, steps)

    return Problem(
        params={"n": n, "steps": steps},
        args=(u0, A, weights, steps),
        argnums=(0, 1),
        numpy_forward=implicit_heat_numpy,
        loss=implicit_heat,
        reference_loss=reference_loss,
        symmetric=(1,),
        # u_T depends on A through A^-T: a perturbation of A's spectrum by e changes the loss
        # like (1 - e)^-T, so the direction is scaled to spectral norm about 1/T.
        direction_scale={1: 1.0 / (np.sqrt(n) * steps)},
        state_bytes=u0.nbytes,
        reference_tolerance=1e-12 if (n, steps) in IMPLICIT_HEAT_REFERENCE else 1e-10,
    )


IMPLICIT_HEAT = Workload(
    name="implicit-heat",
    label="W3",
    summary="implicit Euler, dense Cholesky factor once, T pairs of triangular solves",
    build=build_implicit_heat,
    sizes={
        "full": [{"n": 1000, "steps": steps} for steps in (10, 100, 1000)],
        "quick": [{"n": 200, "steps": steps} for steps in (10, 100)],
        "tiny": [{"n": 8, "steps": 3}],
    },
    steps_parameter="steps",
)


# ----------------------------------------------------------------------------------------------
# W4 small-ops: per-operation overhead on arrays of length 10.

SMALL_OPS_REFERENCE_LOSS = 0.87272429875160
SMALL_OPS_LENGTH = 10


def small_ops(x, groups=250):
    """Workload W4: ``groups`` groups of four elementwise operations, then ``sum``."""
    for j in range(groups):
        if j % 2 == 0:
            s = np.sin(x)
            s = s * 0.1
            r = x * 0.999
        else:
            s = np.tanh(x)
            s = s * -0.1
            r = x * 1.001
        x = s + r
    return x.sum()


def build_small_ops(groups=250):
    x0 = np.linspace(-1.0, 1.0, SMALL_OPS_LENGTH) + 0.05

    def reference_loss():
        if groups == 250:
            return SMALL_OPS_REFERENCE_LOSS
        # Other lengths have no published value: the same map, one element at a time, with
        # the math module's functions, is independent of NumPy's vectorised loops.
        total = 0.0
        for value in x0.tolist():
            for j in range(groups):
                if j % 2 == 0:
                    value = math.sin(value) * 0.1 + value * 0.999
                else:
                    value = math.tanh(value) * -0.1 + value * 1.001
            total += value
        return float(total)

    return Problem(
        params={"groups": groups},
        args=(x0, groups),
        argnums=(0,),
        numpy_forward=small_ops,
        loss=small_ops,
        reference_loss=reference_loss,
        operations=4 * groups,
        state_bytes=x0.nbytes,
        # The published value has 14 significant digits.
        reference_tolerance=1e-13 if groups == 250 else 1e-12,
    )


SMALL_OPS = Workload(
    name="small-ops",
    label="W4",
    summary="1000 elementwise ops (sin/tanh, scale, add) on length-10 arrays; time per op",
    build=build_small_ops,
    sizes={"full": [{"groups": 250}], "quick": [{"groups": 250}], "tiny": [{"groups": 25}]},
    time_unit="us/op",
    n_parameter=None,
)


# ----------------------------------------------------------------------------------------------
# W5 big-elementwise: the same in-place chain on one large array.

BIG_ELEMENTWISE_REFERENCE = {10_000_000: 4658291.78756316}


def big_elementwise(x):
    """Workload W5, steps 1-9; steps 2, 4, 5, 7 and 8 write in place."""
    a = np.sin(x)
    a *= x
    b = np.tanh(a)
    b += x
    b *= -0.1
    c = np.exp(b)
    c *= a
    np.cos(c, out=c)
    return c.sum()


def build_big_elementwise(n=10_000_000):
    x = np.linspace(-3.0, 3.0, n)

    def reference_loss():
        if n in BIG_ELEMENTWISE_REFERENCE:
            return BIG_ELEMENTWISE_REFERENCE[n]
        # The workload's closed form, spelled out of place.
        x_sin_x = x * np.sin(x)
        return float(np.sum(np.cos(x_sin_x * np.exp(-0.1 * (np.tanh(x_sin_x) + x)))))

    return Problem(
        params={"n": n},
        args=(x,),
        argnums=(0,),
        numpy_forward=big_elementwise,
        loss=big_elementwise,
        reference_loss=reference_loss,
        state_bytes=x.nbytes,
        # The published value has 15 significant digits.
        reference_tolerance=1e-14 if n in BIG_ELEMENTWISE_REFERENCE else 1e-12,
    )


BIG_ELEMENTWISE = Workload(
    name="big-elementwise",
    label="W5",
    summary="sin, tanh, exp, cos chain with five in-place steps on one large array",
    build=build_big_elementwise,
    sizes={"full": [{"n": 10_000_000}], "quick": [{"n": 1_000_000}], "tiny": [{"n": 1000}]},
)


# ----------------------------------------------------------------------------------------------
# Explicit heat equation: the slice-update stepper of examples/heat_explicit.py.

EXPLICIT_HEAT_DIFFUSION_NUMBER = 0.4  # r = dt / dx^2; the explicit scheme is stable for r <= 1/2


def explicit_heat(u, target, weights, steps):
    """``steps`` explicit Euler steps of u_t = u_xx, each one slice update of ``u`` in place
    (the ends are the fixed boundary values), then a weighted misfit against ``target``."""
    for _ in range(steps):
        u[1:-1] += EXPLICIT_HEAT_DIFFUSION_NUMBER * (u[2:] - 2 * u[1:-1] + u[:-2])
    difference = u - target
    return np.sum(weights * difference * difference)


def explicit_heat_inputs(n, seed=0):
    """The inputs of examples/heat_explicit.py: a bump plus noise, zero at the ends."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, n)
    u0 = np.exp(-((x - 0.3) / 0.1) ** 2) + 0.05 * rng.standard_normal(n)
    u0[0] = u0[-1] = 0.0
    return u0, 0.5 * np.sin(np.pi * x), 1.0 + x


def explicit_heat_out_of_place(u0, target, weights, steps):
    """The same misfit without any in-place write: an independent reference."""
    u = u0
    r = EXPLICIT_HEAT_DIFFUSION_NUMBER
    for _ in range(steps):
        interior = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = np.concatenate([u[:1], interior, u[-1:]])
    difference = u - target
    return float(np.sum(weights * difference * difference))


def build_explicit_heat(n=100_000, steps=100):
    u0, target, weights = explicit_heat_inputs(n)
    return Problem(
        params={"n": n, "steps": steps},
        args=(u0, target, weights, steps),
        argnums=(0,),
        # The stepper writes into its argument; plain NumPy needs a copy to keep u0.
        numpy_forward=lambda u0, target, weights, steps: explicit_heat(
            u0.copy(), target, weights, steps),
        loss=explicit_heat,
        reference_loss=lambda: explicit_heat_out_of_place(u0, target, weights, steps),
        state_bytes=u0.nbytes,
        # A long sum of rounded steps, summed in a different order by the reference.
        reference_tolerance=1e-10,
    )


HEAT_EXPLICIT = Workload(
    name="heat-explicit",
    label="heat",
    summary="examples/heat_explicit.py's stepper: T in-place slice updates, then a misfit",
    build=build_explicit_heat,
    sizes={
        "full": [{"n": 100_000, "steps": steps} for steps in (10, 100, 1000)],
        "quick": [{"n": 10_000, "steps": steps} for steps in (10, 100)],
        "tiny": [{"n": 50, "steps": 3}],
    },
    steps_parameter="steps",
)


# ----------------------------------------------------------------------------------------------
# Explicit heat one point at a time: the scalar loops of teaching codes (CFD courses write the
# stencil as a loop over i before they vectorise it).


def explicit_heat_scalar(u, target, weights, steps):
    """heat-explicit's scheme written one element at a time: each step copies ``u`` into ``un``
    and updates the interior points of ``u`` in place in a Python loop, then the same misfit.
    Every update reads only ``un``, so the steps are those of :func:`explicit_heat`."""
    r = EXPLICIT_HEAT_DIFFUSION_NUMBER
    n = len(u)
    for _ in range(steps):
        un = u.copy()
        for i in range(1, n - 1):
            u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])
    difference = u - target
    return np.sum(weights * difference * difference)


def build_explicit_heat_scalar(n=200, steps=100):
    u0, target, weights = explicit_heat_inputs(n)
    return Problem(
        params={"n": n, "steps": steps},
        args=(u0, target, weights, steps),
        argnums=(0,),
        numpy_forward=lambda u0, target, weights, steps: explicit_heat_scalar(
            u0.copy(), target, weights, steps),
        loss=explicit_heat_scalar,
        # Vectorised and out of place: the same arithmetic on each element, none of the loops.
        reference_loss=lambda: explicit_heat_out_of_place(u0, target, weights, steps),
        operations=steps * (n - 2),
        state_bytes=u0.nbytes,
    )


HEAT_SCALAR = Workload(
    name="heat-scalar",
    label="scalar",
    summary="heat-explicit one point at a time: T times un = u.copy(), then "
            "u[i] += r*(un[i+1] - 2*un[i] + un[i-1]) for each i; time per point update "
            "(torch: the same loops in place; jax: nested lax.fori_loop of u.at[i].add, "
            "jitted; autograd: the loops on a list of scalars)",
    build=build_explicit_heat_scalar,
    sizes={
        "full": [{"n": 200, "steps": steps} for steps in (10, 100)],
        "quick": [{"n": 100, "steps": 10}],
        "tiny": [{"n": 10, "steps": 2}],
    },
    time_unit="us/update",
    steps_parameter="steps",
)


# ----------------------------------------------------------------------------------------------
# heat-fit: the explicit stepper as a newcomer writes a fit of it: a copy of the initial state,
# then T in-place slice updates on a short grid, the ends assigned at every step.


def heat_fit(u0, target, steps):
    """The squared misfit of ``steps`` explicit Euler steps of u_t = u_xx from ``u0`` to
    ``target``: ``u = u0.copy()``, then per step ``u[1:-1] += r * (u[2:] - 2*u[1:-1] +
    u[:-2])`` and the ends set to 0, as a first script writes it."""
    r = EXPLICIT_HEAT_DIFFUSION_NUMBER
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[0] = 0.0
        u[-1] = 0.0
    difference = u - target
    return np.sum(difference * difference)


def heat_fit_out_of_place(u0, target, steps):
    """The same misfit without any in-place write: an independent reference."""
    r = EXPLICIT_HEAT_DIFFUSION_NUMBER
    u = u0
    for _ in range(steps):
        interior = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = np.concatenate([[0.0], interior, [0.0]])
    difference = u - target
    return float(np.sum(difference * difference))


def build_heat_fit(n=101, steps=2000):
    u0, target, _ = explicit_heat_inputs(n)
    return Problem(
        params={"n": n, "steps": steps},
        args=(u0, target, steps),
        argnums=(0,),
        numpy_forward=heat_fit,  # it copies its argument itself
        loss=heat_fit,
        reference_loss=lambda: heat_fit_out_of_place(u0, target, steps),
        state_bytes=u0.nbytes,
        reference_tolerance=1e-10,
    )


HEAT_FIT = Workload(
    name="heat-fit",
    label="fit",
    summary="a newcomer's heat fit: u = u0.copy(), T times u[1:-1] += r*(u[2:] - 2*u[1:-1] + "
            "u[:-2]) and u[0] = u[-1] = 0, then a misfit, on nx = 101 points (jax: the same "
            "updates as .at[].add/.set in lax.fori_loop, jitted)",
    build=build_heat_fit,
    sizes={
        "full": [{"n": 101, "steps": 2000}],
        "quick": [{"n": 101, "steps": 200}],
        "tiny": [{"n": 11, "steps": 3}],
    },
    steps_parameter="steps",
)


# ----------------------------------------------------------------------------------------------
# kalman: a newcomer's Kalman filter, the likelihood of a track under a constant-velocity model,
# written as textbooks print the filter: small matrix products in a loop, the state updated in
# place, the filtered means and variances written into preallocated arrays.

KALMAN_DT = 0.1
KALMAN_THETA = (-2.0, -1.0, 0.3)
"""The parameters the gradient is taken at: log process noise, log measurement noise,
velocity damping."""


def kalman_model(theta):
    """The model's matrices: transition ``F``, observation ``H``, process noise ``Q`` (white
    acceleration of intensity ``exp(theta[0])``), measurement noise ``R``."""
    dt = KALMAN_DT
    q, r, damping = np.exp(theta[0]), np.exp(theta[1]), theta[2]
    F = np.array([[1.0, dt], [0.0, 1.0]])
    F[1, 1] = 1.0 - damping * dt
    H = np.array([[1.0, 0.0]])
    Q = q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
    R = r * np.eye(1)
    return F, H, Q, R


def kalman_nll(theta, ys, steps):
    """The negative log-likelihood of the first ``steps`` positions ``ys`` (the prediction
    error decomposition), and a small penalty on the filtered velocities and variances,
    which the loop writes into arrays allocated before it."""
    F, H, Q, R = kalman_model(theta)
    means = np.zeros((steps, 2))
    variances = np.zeros((steps, 2))
    x = np.zeros(2)
    P = 10.0 * np.eye(2)
    nll = 0.0
    for t in range(steps):
        x = F @ x
        P = F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = P @ H.T / S[0, 0]
        v = ys[t] - H @ x
        x += K @ v
        P -= K @ S @ K.T
        means[t] = x
        variances[t] = np.diag(P)
        nll += 0.5 * (np.log(2 * np.pi * S[0, 0]) + v[0] ** 2 / S[0, 0])
    return nll + 1e-3 * np.sum(means[:, 1] ** 2) + np.sum(variances)


def kalman_nll_joseph(theta, ys, steps):
    """The same likelihood with no write into an existing array: the gain from a linear
    solve and the covariance in Joseph's form, ``(I - K H) P (I - K H)^T + K R K^T``: an
    independent spelling, equal to rounding."""
    F, H, Q, R = kalman_model(theta)
    x, P = np.zeros(2), 10.0 * np.eye(2)
    nll, velocities, variances = 0.0, [], []
    for t in range(steps):
        x, P = F @ x, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = np.linalg.solve(S, H @ P).T
        v = ys[t] - H @ x
        x = x + K @ v
        A = np.eye(2) - K @ H
        P = A @ P @ A.T + K @ R @ K.T
        velocities.append(x[1])
        variances.append(P[0, 0] + P[1, 1])
        nll = nll + 0.5 * (math.log(2 * math.pi * S[0, 0]) + v[0] ** 2 / S[0, 0])
    return float(nll + 1e-3 * np.sum(np.square(velocities)) + np.sum(variances))


def kalman_track(steps, seed=7):
    """Positions of a track simulated from the model at ``KALMAN_THETA``, with noise."""
    rng = np.random.default_rng(seed)
    F, H, Q, R = kalman_model(np.array(KALMAN_THETA))
    x, ys = np.array([0.0, 1.0]), np.empty((steps, 1))
    for t in range(steps):
        x = F @ x + rng.multivariate_normal(np.zeros(2), Q)
        ys[t] = H @ x + rng.normal(0.0, math.sqrt(R[0, 0]))
    return ys


def build_kalman(steps=200):
    theta, ys = np.array(KALMAN_THETA), kalman_track(steps)
    return Problem(
        params={"steps": steps},
        args=(theta, ys, steps),
        argnums=(0,),
        numpy_forward=kalman_nll,  # it writes only into arrays of its own
        loss=kalman_nll,
        reference_loss=lambda: kalman_nll_joseph(theta, ys, steps),
        # theta's entries are logarithms and a damping: a unit step leaves the model's range
        direction_scale={0: 1e-2},
        reference_tolerance=1e-10,
    )


KALMAN = Workload(
    name="kalman",
    label="kf",
    summary="a newcomer's Kalman filter: T predict-update steps of 2 x 2 matrix products, the "
            "state updated in place, filtered means and variances written into arrays "
            "allocated before the loop, then a likelihood (jax: the same steps in lax.scan, "
            "jitted)",
    build=build_kalman,
    sizes={
        "full": [{"steps": steps} for steps in (200, 2000)],
        "quick": [{"steps": 200}],
        "tiny": [{"steps": 5}],
    },
    steps_parameter="steps",
    n_parameter=None,
)


# ----------------------------------------------------------------------------------------------
# W6 bratu-gs: red-black nonlinear Gauss-Seidel sweeps, whose writes cannot be inverted.

BRATU_C = -1e-3
BRATU_REFERENCE = {
    (100_000, 10): 11621.5633877355,
    (100_000, 100): 5392.58441947430,
    (100_000, 1000): 30571.9237527232,
}


def bratu_sweeps(u, c, weights, steps):
    """Workload W6: ``steps`` red-black Gauss-Seidel sweeps for the discrete Bratu problem
    u'' = -c exp(u) (mesh width folded into ``c``), in place, then ``sum(weights * u^2)``.

    Each half-sweep assigns every other interior point from its two neighbours and from its own
    old value, inside ``exp``: the new values do not determine the old ones, so a reverse pass
    must bring the old ones back from saved bytes or recompute them from an earlier state. The
    end points are never written.
    """
    for _ in range(steps):
        u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] + c * np.exp(u[1:-1:2]))  # odd points
        u[2:-1:2] = 0.5 * (u[1:-2:2] + u[3::2] + c * np.exp(u[2:-1:2]))  # even interior points
    return np.sum(weights * u * u)


def bratu_inputs(n):
    """n points x_i = i/(n-1), i = 0..n-1: the starting state, zero at both ends, and the
    weights of the loss."""
    i = np.arange(n)
    u0 = 0.5 * np.sin(np.pi * i / (n - 1)) + 0.1 * np.sin(0.37 * i)
    u0[0] = u0[-1] = 0.0
    weights = 1.0 + 0.5 * np.sin(0.37 * i**2 + 1.1)
    return u0, weights


def bratu_out_of_place(u0, c, weights, steps):
    """The same sweeps on the odd and even points held apart, with no write into an existing
    array: an independent reference."""
    even, odd = u0[0::2], u0[1::2]
    n = len(u0)
    odd_inner, even_inner = len(range(1, n - 1, 2)), len(range(2, n - 1, 2))
    for _ in range(steps):
        odd = np.concatenate((0.5 * (even[:odd_inner] + even[1:odd_inner + 1]
                                     + c * np.exp(odd[:odd_inner])), odd[odd_inner:]))
        even = np.concatenate((even[:1], 0.5 * (odd[:even_inner] + odd[1:even_inner + 1]
                                                + c * np.exp(even[1:even_inner + 1])),
                               even[even_inner + 1:]))
    return float(np.sum(weights[0::2] * even * even) + np.sum(weights[1::2] * odd * odd))


def build_bratu(n=100_000, steps=100):
    u0, weights = bratu_inputs(n)

    def reference_loss():
        if (n, steps) in BRATU_REFERENCE:
            return BRATU_REFERENCE[(n, steps)]
        return bratu_out_of_place(u0, BRATU_C, weights, steps)

    return Problem(
        params={"n": n, "steps": steps},
        args=(u0, BRATU_C, weights, steps),
        argnums=(0, 1),
        numpy_forward=lambda u0, c, weights, steps: bratu_sweeps(u0.copy(), c, weights, steps),
        loss=bratu_sweeps,
        reference_loss=reference_loss,
        state_bytes=u0.nbytes,
        # c is 1e-3 in size: a step of 1e-3 along a unit direction doubles it, and the loss is
        # far from quadratic over that range; a hundredth of it is.
        direction_scale={0: 1e-2, 1: 1e-2},
        # Published values have 15 significant digits; other sizes sum in another order.
        reference_tolerance=1e-12 if (n, steps) in BRATU_REFERENCE else 1e-10,
    )


BRATU = Workload(
    name="bratu-gs",
    label="W6",
    summary="red-black nonlinear Gauss-Seidel: T sweeps of slice assignments that cannot be "
            "inverted",
    build=build_bratu,
    sizes={
        "full": [{"n": 100_000, "steps": steps} for steps in (10, 100, 1000)],
        "quick": [{"n": 10_000, "steps": steps} for steps in (10, 100)],
        "tiny": [{"n": 20, "steps": 3}],
    },
    steps_parameter="steps",
)


# What mutad differentiates runs as user code (``as_user_code``): the allocation mode follows
# what these functions allocate as it would in their users' modules (W2's np.zeros(1), the
# Kalman filter's preallocated arrays), so that each figure is what a user's copy of the
# function costs.
(add_vectors, fpu_force, leapfrog, implicit_heat, small_ops, big_elementwise, explicit_heat,
 explicit_heat_scalar, heat_fit, kalman_model, kalman_nll, bratu_sweeps) = as_user_code(
    add_vectors, fpu_force, leapfrog, implicit_heat, small_ops, big_elementwise, explicit_heat,
    explicit_heat_scalar, heat_fit, kalman_model, kalman_nll, bratu_sweeps)


def on_namespace(xp, *functions):
    """``functions`` (of this module) compiled again, as :func:`as_user_code` does, with ``np``
    bound to the array namespace ``xp`` (``cupy``): the workloads as a user writes them with
    ``import cupy as np``, for ``mutad-bench --xp cupy``. Each function of one call sees the
    others of the same call (W2's ``leapfrog`` its ``fpu_force``)."""
    namespace = {**globals(), "np": xp, "__name__": "mutad_bench_device_code"}
    for function in functions:
        lines, first = inspect.getsourcelines(function)
        source = "\n" * (first - 1) + "".join(lines)
        exec(compile(source, inspect.getsourcefile(function), "exec"), namespace)  # noqa: S102
    return tuple(namespace[function.__name__] for function in functions)


WORKLOADS = {workload.name: workload for workload in (
    ADDVECS, LEAPFROG, IMPLICIT_HEAT, SMALL_OPS, BIG_ELEMENTWISE, BRATU, HEAT_EXPLICIT,
    HEAT_SCALAR, HEAT_FIT, KALMAN)}
"""Every workload by name, in the order tables list them."""

DEFAULT_WORKLOADS = ("addvecs", "leapfrog", "implicit-heat", "small-ops", "big-elementwise",
                     "bratu-gs", "heat-scalar")
"""What runs when no workload is chosen: W1-W6 and the scalar loops of heat-scalar."""
