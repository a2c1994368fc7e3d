"""Every system's version of every workload: mutad's policies, its replay, plain NumPy and the
peers.

A peer is what a user would pick instead of mutad: PyTorch eager, JAX under ``jax.jit`` and HIPS
autograd. Each writes the workloads of ``workloads.py`` idiomatically for itself, in place where
it allows that and still gives correct gradients, out of place where it must, with float64 and
one compute thread. Peers are optional: :func:`installed` says which can be imported, and the
CLI reports the others as "not installed".

:func:`implementation` returns an :class:`Implementation` for one (system, workload, problem);
:func:`behaviour` answers W1's questions for one system.
"""

import importlib.util
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

import mutad

POLICIES = ("restore", "checkpoint")
BUDGET_STATES = 8
"""mutad-budget: the restore policy with ``memory=`` this many times the largest argument's
bytes, for the writes that cannot be inverted (W6, heat-explicit)."""
REPLAY_SYSTEM = "mutad-replay"
"""The restore policy through ``mutad.value_and_grad(..., replay=True)``, made once per process:
its first call records the program (a traced gradient besides), later calls with the same
argument signature replay it. The harness times it after that first call, which it reports on
its own."""
TRACED_SYSTEM = "mutad-restore"
"""What mutad-replay is compared with: the same policy, traced on every call."""
REPLAY_BUDGET_SYSTEM = "mutad-replay-budget"
"""mutad-budget through ``mutad.value_and_grad(..., memory=..., replay=True)``, made once per
process as mutad-replay is: the same budget, its rebuilt writes rebuilt by the replay too."""
REPLAYS = {REPLAY_SYSTEM: TRACED_SYSTEM, REPLAY_BUDGET_SYSTEM: "mutad-budget"}
"""Each system that records and replays, and the system it is compared with: the same,
traced on every call."""
MUTAD_SYSTEMS = (*(f"mutad-{policy}" for policy in POLICIES), "mutad-budget", REPLAY_SYSTEM,
                 REPLAY_BUDGET_SYSTEM)
PEER_MODULES = {"torch": "torch", "jax": "jax", "autograd": "autograd"}
SYSTEMS = (*MUTAD_SYSTEMS, "numpy", *PEER_MODULES)
"""Every system, in the order tables list them. "numpy" is the plain forward, no AD."""

REFERENCE_SYSTEM = "mutad-checkpoint"
"""Every gradient is compared with this system's: exact, no rounding drift."""

TORCH_DEVICE = "cpu"
"""Where the torch peers put their tensors: "cpu", or "cuda" for ``mutad-bench --xp cupy``."""
JAX_PLATFORMS = "cpu"
"""The platform the jax peers ask XLA for when ``JAX_PLATFORMS`` is not set: the CPU, or None
(JAX's default device, a GPU where jax has CUDA) for ``mutad-bench --xp cupy``."""


class NotImplementedForWorkload(Exception):
    """Raised by :func:`implementation` for a (system, workload) pair nobody wrote."""


@dataclass
class Implementation:
    """One system's version of one problem.

    ``gradient()`` runs one gradient call and returns the system's own result (kept alive while
    memory is measured); ``to_numpy(result)`` turns it into ``(loss, gradients)`` with one NumPy
    array per differentiated argument. ``forward()`` is the system's own forward without AD
    (torch under ``no_grad``, ``jax.jit(loss)``, autograd's code on ndarrays), or None.
    ``traced_instead()``, for mutad-replay, says why its calls are traced instead of replayed
    (mutad's own reason), or returns None when they replay.
    """

    gradient: Callable[[], object]
    to_numpy: Callable[[object], tuple]
    forward: Callable[[], float] | None = None
    traced_instead: Callable[[], str | None] | None = None
    compile_ahead: Callable[[], None] | None = None
    """For jax: compile the gradient and the forward ahead of their first call, so that the
    compiler's scratch memory is spent before a peak is measured (``mutad-bench --xp
    cupy``)."""


def installed(system):
    """Whether ``system`` can run here (mutad and NumPy always can)."""
    module = PEER_MODULES.get(system)
    return module is None or importlib.util.find_spec(module) is not None


def version(system):
    """The version of the library behind ``system`` (imports it)."""
    if system in MUTAD_SYSTEMS:
        return getattr(mutad, "__version__", None) or _distribution_version("mutad")
    if system == "numpy":
        return np.__version__
    return _distribution_version(PEER_MODULES[system])


def _distribution_version(name):
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------------------------
# Setting up each peer: float64, one compute thread (the measurement protocol).


def _torch():
    import torch

    torch.set_num_threads(1)
    return torch


def _jax():
    # Read when XLA's CPU client starts: set before the first import of jax.
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false").strip()
    if JAX_PLATFORMS is not None:
        os.environ.setdefault("JAX_PLATFORMS", JAX_PLATFORMS)
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _torch_result(value, gradients):
    return float(value.detach()), tuple(g.detach().cpu().numpy() for g in gradients)


def _tensor(torch, array):
    """A copy of NumPy array ``array`` as a tensor on :data:`TORCH_DEVICE`."""
    return torch.from_numpy(np.array(array)).to(TORCH_DEVICE)


def _torch_inputs(torch, problem):
    return [_tensor(torch, problem.args[i]).requires_grad_() for i in problem.argnums]


def _torch_gradient(torch, loss, inputs, rest=()):
    def gradient():
        value = loss(*inputs, *rest)
        return value, torch.autograd.grad(value, inputs)

    def forward():
        with torch.no_grad():
            return float(loss(*inputs, *rest))

    return Implementation(gradient, lambda result: _torch_result(*result), forward)


def _jax_gradient(jax, loss, inputs, rest=()):
    argnums = tuple(range(len(inputs)))
    compiled = {"gradient": jax.jit(jax.value_and_grad(loss, argnums=argnums)),
                "forward": jax.jit(loss)}

    def gradient():
        return jax.block_until_ready(compiled["gradient"](*inputs, *rest))

    def to_numpy(result):
        value, gradients = result
        return float(value), tuple(np.asarray(g) for g in gradients)

    def compile_ahead():
        for name, jitted in list(compiled.items()):
            compiled[name] = jitted.lower(*inputs, *rest).compile()

    return Implementation(gradient, to_numpy,
                          lambda: float(jax.block_until_ready(compiled["forward"](*inputs,
                                                                                  *rest))),
                          compile_ahead=compile_ahead)


def _autograd_gradient(loss, inputs, rest=()):
    import autograd

    argnums = tuple(range(len(inputs)))
    value_and_gradient = autograd.value_and_grad(loss, argnum=argnums)

    def to_numpy(result):
        value, gradients = result
        return float(value), tuple(np.asarray(g) for g in gradients)

    return Implementation(lambda: value_and_gradient(*inputs, *rest), to_numpy,
                          lambda: float(loss(*inputs, *rest)))


# ----------------------------------------------------------------------------------------------
# mutad and plain NumPy: the functions of workloads.py as they are.


def _policy(system):
    """The policy behind a mutad system: its name's, restore for the budget and the replay."""
    name = system.removeprefix("mutad-")
    return name if name in POLICIES else "restore"


def _mutad(problem, system):
    policy = _policy(system)
    memory = None
    if system in ("mutad-budget", REPLAY_BUDGET_SYSTEM):
        memory = BUDGET_STATES * max(np.asarray(a).nbytes for a in problem.args)

    traced_instead = None
    if system in REPLAYS:
        replayed = mutad.value_and_grad(problem.loss, argnums=problem.argnums, policy=policy,
                                        memory=memory, replay=True)

        def gradient():
            return replayed(*problem.args)

        def traced_instead():
            return "; ".join(sorted(set(replayed.reasons.values()))) or None
    else:
        def gradient():
            return mutad.value_and_gradient(problem.loss, *problem.args,
                                            argnums=problem.argnums, policy=policy,
                                            memory=memory)

    def to_numpy(result):
        value, gradients = result
        return float(value), tuple(np.asarray(g) for g in gradients)

    return Implementation(gradient, to_numpy, traced_instead=traced_instead)


# ----------------------------------------------------------------------------------------------
# W2 leapfrog. torch: the same in-place updates (no saved tensor is overwritten: diff and add
# save nothing, the cube saves d); JAX and autograd: out of place, JAX with a fori_loop so the
# compiled program does not grow with T.


def _leapfrog_torch(problem):
    from mutad.bench.workloads import LEAPFROG_BETA as beta, LEAPFROG_DT as dt

    torch = _torch()
    steps = problem.params["steps"]

    def force(q):
        zero = q.new_zeros(1)
        d = torch.diff(q, prepend=zero, append=zero)
        cube = d * d * d
        return (d[1:] - d[:-1]) + beta * (cube[1:] - cube[:-1])

    def loss(q0, p0):
        q, p = q0.clone(), p0.clone()
        for _ in range(steps):
            p += 0.5 * dt * force(q)
            q += dt * p
            p += 0.5 * dt * force(q)
        return (q * q).sum() + (p * p).sum()

    return _torch_gradient(torch, loss, _torch_inputs(torch, problem))


def _leapfrog_jax(problem):
    from mutad.bench.workloads import LEAPFROG_BETA as beta, LEAPFROG_DT as dt

    jax = _jax()
    jnp = jax.numpy
    steps = problem.params["steps"]

    def force(q):
        d = jnp.diff(q, prepend=0.0, append=0.0)
        cube = d**3  # XLA lowers an integer power to products and keeps one residual fewer
        return (d[1:] - d[:-1]) + beta * (cube[1:] - cube[:-1])

    def step(_, state):
        q, p = state
        p = p + 0.5 * dt * force(q)
        q = q + dt * p
        p = p + 0.5 * dt * force(q)
        return q, p

    def loss(q0, p0):
        q, p = jax.lax.fori_loop(0, steps, step, (q0, p0))
        return jnp.sum(q * q) + jnp.sum(p * p)

    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[i]) for i in problem.argnums])


def _leapfrog_autograd(problem):
    import autograd.numpy as anp

    from mutad.bench.workloads import LEAPFROG_BETA as beta, LEAPFROG_DT as dt

    steps = problem.params["steps"]

    def force(q):
        padded = anp.concatenate((anp.zeros(1), q, anp.zeros(1)))
        d = padded[1:] - padded[:-1]
        cube = d * d * d
        return (d[1:] - d[:-1]) + beta * (cube[1:] - cube[:-1])

    def loss(q, p):
        for _ in range(steps):
            p = p + 0.5 * dt * force(q)
            q = q + dt * p
            p = p + 0.5 * dt * force(q)
        return anp.sum(q * q) + anp.sum(p * p)

    return _autograd_gradient(loss, [problem.args[i].copy() for i in problem.argnums])


# ----------------------------------------------------------------------------------------------
# W3 implicit-heat: no peer can factor or solve in place under AD, so all are out of place.


def _implicit_heat_torch(problem):
    torch = _torch()
    steps = problem.params["steps"]
    weights = _tensor(torch, problem.args[2])

    def loss(u0, A):
        lower = torch.linalg.cholesky(A)
        u = u0[:, None]
        for _ in range(steps):
            u = torch.cholesky_solve(u, lower)
        return (weights * u[:, 0] * u[:, 0]).sum()

    return _torch_gradient(torch, loss, _torch_inputs(torch, problem))


def _implicit_heat_jax(problem):
    jax = _jax()
    import jax.scipy.linalg

    jnp = jax.numpy
    steps = problem.params["steps"]
    weights = jnp.asarray(problem.args[2])

    def loss(u0, A):
        factor = (jnp.linalg.cholesky(A), True)
        u = jax.lax.fori_loop(0, steps, lambda _, u: jax.scipy.linalg.cho_solve(factor, u), u0)
        return jnp.sum(weights * u * u)

    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[i]) for i in problem.argnums])


def _implicit_heat_autograd(problem):
    import autograd.numpy as anp
    import autograd.scipy.linalg

    steps = problem.params["steps"]
    weights = problem.args[2]

    def loss(u, A):
        lower = anp.linalg.cholesky(A)
        for _ in range(steps):
            u = autograd.scipy.linalg.solve_triangular(lower, u, lower=True)
            u = autograd.scipy.linalg.solve_triangular(lower, u, lower=True, trans="T")
        return anp.sum(weights * u * u)

    return _autograd_gradient(loss, [problem.args[i].copy() for i in problem.argnums])


# ----------------------------------------------------------------------------------------------
# W4 small-ops: out of place for everyone, as the workload specifies it.


def _small_ops_loss(sin, tanh, total, groups):
    def loss(x):
        for j in range(groups):
            if j % 2 == 0:
                s = sin(x)
                s = s * 0.1
                r = x * 0.999
            else:
                s = tanh(x)
                s = s * -0.1
                r = x * 1.001
            x = s + r
        return total(x)

    return loss


def _small_ops_torch(problem):
    torch = _torch()
    loss = _small_ops_loss(torch.sin, torch.tanh, torch.sum, problem.params["groups"])
    return _torch_gradient(torch, loss, _torch_inputs(torch, problem))


def _small_ops_jax(problem):
    jax = _jax()
    jnp = jax.numpy
    loss = _small_ops_loss(jnp.sin, jnp.tanh, jnp.sum, problem.params["groups"])
    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[0])])


def _small_ops_autograd(problem):
    import autograd.numpy as anp

    loss = _small_ops_loss(anp.sin, anp.tanh, anp.sum, problem.params["groups"])
    return _autograd_gradient(loss, [problem.args[0].copy()])


# ----------------------------------------------------------------------------------------------
# W5 big-elementwise. torch: steps 2, 5 and 8 in place; 4 and 7 would overwrite outputs that
# tanh and exp saved for backward, which torch rejects, so they are out of place.


def _big_elementwise_torch(problem):
    torch = _torch()

    def loss(x):
        a = torch.sin(x)
        a *= x
        b = torch.tanh(a)
        b = b + x
        b *= -0.1
        c = torch.exp(b)
        c = c * a
        c.cos_()
        return c.sum()

    return _torch_gradient(torch, loss, _torch_inputs(torch, problem))


def _big_elementwise_loss(np_like):
    def loss(x):
        a = np_like.sin(x) * x
        b = (np_like.tanh(a) + x) * -0.1
        c = np_like.cos(np_like.exp(b) * a)
        return np_like.sum(c)

    return loss


def _big_elementwise_jax(problem):
    jax = _jax()
    return _jax_gradient(jax, _big_elementwise_loss(jax.numpy),
                         [jax.numpy.asarray(problem.args[0])])


def _big_elementwise_autograd(problem):
    import autograd.numpy as anp

    return _autograd_gradient(_big_elementwise_loss(anp), [problem.args[0].copy()])


# ----------------------------------------------------------------------------------------------
# W6 bratu-gs. torch: the same slice assignments in place (exp saves its output, which no later
# write touches); JAX and autograd cannot assign into an array under AD, so they sweep the odd
# and even points held as two arrays, out of place (JAX in a fori_loop, so the compiled
# program does not grow with T).


def _bratu_half_sweeps(np_like, n, c):
    """The two half-sweeps of one W6 sweep on the even and odd points held apart."""
    odd_inner, even_inner = len(range(1, n - 1, 2)), len(range(2, n - 1, 2))

    def sweep(even, odd):
        odd = np_like.concatenate((0.5 * (even[:odd_inner] + even[1:odd_inner + 1]
                                          + c * np_like.exp(odd[:odd_inner])),
                                   odd[odd_inner:]))
        even = np_like.concatenate((even[:1], 0.5 * (odd[:even_inner] + odd[1:even_inner + 1]
                                                     + c * np_like.exp(even[1:even_inner + 1])),
                                    even[even_inner + 1:]))
        return even, odd

    return sweep


def _bratu_torch(problem):
    torch = _torch()
    steps = problem.params["steps"]
    weights = _tensor(torch, problem.args[2])

    def loss(u0, c):
        u = u0.clone()
        for _ in range(steps):
            u[1:-1:2] = 0.5 * (u[0:-2:2] + u[2::2] + c * torch.exp(u[1:-1:2]))
            u[2:-1:2] = 0.5 * (u[1:-2:2] + u[3::2] + c * torch.exp(u[2:-1:2]))
        return (weights * u * u).sum()

    u0, c = problem.args[:2]
    inputs = [_tensor(torch, u0).requires_grad_(),
              torch.tensor(c, dtype=torch.float64, device=TORCH_DEVICE, requires_grad=True)]
    return _torch_gradient(torch, loss, inputs)


def _bratu_jax(problem):
    jax = _jax()
    jnp = jax.numpy
    steps = problem.params["steps"]
    u0, c, weights = problem.args[:3]
    n = len(u0)
    w_even, w_odd = jnp.asarray(weights[0::2]), jnp.asarray(weights[1::2])

    def loss(u0, c):
        sweep = _bratu_half_sweeps(jnp, n, c)
        even, odd = jax.lax.fori_loop(0, steps, lambda _, state: sweep(*state),
                                      (u0[0::2], u0[1::2]))
        return jnp.sum(w_even * even * even) + jnp.sum(w_odd * odd * odd)

    return _jax_gradient(jax, loss, [jnp.asarray(u0), jnp.asarray(c)])


def _bratu_autograd(problem):
    import autograd.numpy as anp

    steps = problem.params["steps"]
    u0, c, weights = problem.args[:3]
    n = len(u0)

    def loss(u0, c):
        sweep = _bratu_half_sweeps(anp, n, c)
        even, odd = u0[0::2], u0[1::2]
        for _ in range(steps):
            even, odd = sweep(even, odd)
        return anp.sum(weights[0::2] * even * even) + anp.sum(weights[1::2] * odd * odd)

    return _autograd_gradient(loss, [u0.copy(), c])


# ----------------------------------------------------------------------------------------------
# heat-scalar: every peer keeps the loops over points, as the workload is about them (the
# vectorised spelling of the same scheme is heat-explicit's). torch: the same element updates
# in place on a clone (un, a second clone, is what they read, so no saved tensor is
# overwritten); JAX: both loops as lax.fori_loop, jitted, since unrolled Python loops would
# compile one operation per point update; autograd cannot assign into an array, so the points
# are a list of scalars.


def _heat_scalar_torch(problem):
    from mutad.bench.workloads import EXPLICIT_HEAT_DIFFUSION_NUMBER as r

    torch = _torch()
    steps = problem.params["steps"]
    target, weights = (torch.from_numpy(a.copy()) for a in problem.args[1:3])

    def loss(u0):
        u = u0.clone()
        for _ in range(steps):
            un = u.clone()
            for i in range(1, len(u) - 1):
                u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])
        difference = u - target
        return (weights * difference * difference).sum()

    return _torch_gradient(torch, loss, _torch_inputs(torch, problem))


def _heat_scalar_jax(problem):
    from mutad.bench.workloads import EXPLICIT_HEAT_DIFFUSION_NUMBER as r

    jax = _jax()
    jnp = jax.numpy
    steps = problem.params["steps"]
    target, weights = (jnp.asarray(a) for a in problem.args[1:3])
    n = len(target)

    def step(_, un):  # arrays are values: the step reads the state it started from
        def update(i, u):
            return u.at[i].add(r * (un[i + 1] - 2 * un[i] + un[i - 1]))

        return jax.lax.fori_loop(1, n - 1, update, un)

    def loss(u0):
        difference = jax.lax.fori_loop(0, steps, step, u0) - target
        return jnp.sum(weights * difference * difference)

    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[0])])


def _heat_scalar_autograd(problem):
    import autograd.numpy as anp

    from mutad.bench.workloads import EXPLICIT_HEAT_DIFFUSION_NUMBER as r

    steps = problem.params["steps"]
    target, weights = problem.args[1:3]

    def loss(u0):
        u = [u0[i] for i in range(len(u0))]
        for _ in range(steps):
            un = list(u)
            for i in range(1, len(u) - 1):
                u[i] = u[i] + r * (un[i + 1] - 2 * un[i] + un[i - 1])
        difference = anp.array(u) - target
        return anp.sum(weights * difference * difference)

    return _autograd_gradient(loss, [problem.args[0].copy()])


def _heat_fit_jax(problem):
    from mutad.bench.workloads import EXPLICIT_HEAT_DIFFUSION_NUMBER as r

    jax = _jax()
    jnp = jax.numpy
    steps = problem.params["steps"]
    target = jnp.asarray(problem.args[1])

    def step(_, u):
        u = u.at[1:-1].add(r * (u[2:] - 2 * u[1:-1] + u[:-2]))
        return u.at[0].set(0.0).at[-1].set(0.0)

    def loss(u0):
        difference = jax.lax.fori_loop(0, steps, step, u0) - target
        return jnp.sum(difference * difference)

    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[0])])


def _kalman_jax(problem):
    from mutad.bench.workloads import KALMAN_DT as dt

    jax = _jax()
    jnp = jax.numpy
    steps = problem.params["steps"]
    ys = jnp.asarray(problem.args[1][:steps])

    def loss(theta):
        q, r, damping = jnp.exp(theta[0]), jnp.exp(theta[1]), theta[2]
        F = jnp.array([[1.0, dt], [0.0, 1.0]]).at[1, 1].set(1.0 - damping * dt)
        H = jnp.array([[1.0, 0.0]])
        Q = q * jnp.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
        R = r * jnp.eye(1)

        def step(carry, y):
            x, P, nll = carry
            x = F @ x
            P = F @ P @ F.T + Q
            S = H @ P @ H.T + R
            K = P @ H.T / S[0, 0]
            v = y - H @ x
            x = x + K @ v
            P = P - K @ S @ K.T
            nll = nll + 0.5 * (jnp.log(2 * jnp.pi * S[0, 0]) + v[0] ** 2 / S[0, 0])
            return (x, P, nll), (x[1], jnp.diag(P))

        (_, _, nll), (velocities, variances) = jax.lax.scan(
            step, (jnp.zeros(2), 10.0 * jnp.eye(2), 0.0), ys)
        return nll + 1e-3 * jnp.sum(velocities**2) + jnp.sum(variances)

    return _jax_gradient(jax, loss, [jnp.asarray(problem.args[0])])


PEER_IMPLEMENTATIONS = {
    ("torch", "leapfrog"): _leapfrog_torch,
    ("jax", "leapfrog"): _leapfrog_jax,
    ("autograd", "leapfrog"): _leapfrog_autograd,
    ("torch", "implicit-heat"): _implicit_heat_torch,
    ("jax", "implicit-heat"): _implicit_heat_jax,
    ("autograd", "implicit-heat"): _implicit_heat_autograd,
    ("torch", "small-ops"): _small_ops_torch,
    ("jax", "small-ops"): _small_ops_jax,
    ("autograd", "small-ops"): _small_ops_autograd,
    ("torch", "big-elementwise"): _big_elementwise_torch,
    ("jax", "big-elementwise"): _big_elementwise_jax,
    ("autograd", "big-elementwise"): _big_elementwise_autograd,
    ("torch", "bratu-gs"): _bratu_torch,
    ("jax", "bratu-gs"): _bratu_jax,
    ("autograd", "bratu-gs"): _bratu_autograd,
    ("torch", "heat-scalar"): _heat_scalar_torch,
    ("jax", "heat-scalar"): _heat_scalar_jax,
    ("autograd", "heat-scalar"): _heat_scalar_autograd,
    ("jax", "heat-fit"): _heat_fit_jax,
    ("jax", "kalman"): _kalman_jax,
}


def has_implementation(system, workload_name):
    if system in MUTAD_SYSTEMS or system == "numpy":
        return True
    if workload_name == "addvecs":
        return system in _PEER_BEHAVIOURS
    return (system, workload_name) in PEER_IMPLEMENTATIONS


def implementation(system, workload_name, problem):
    """``system``'s version of ``problem``; None for "numpy", which has no gradient."""
    if system in MUTAD_SYSTEMS:
        return _mutad(problem, system)
    if system == "numpy":
        return None
    try:
        build = PEER_IMPLEMENTATIONS[(system, workload_name)]
    except KeyError:
        raise NotImplementedForWorkload(f"{system} has no version of {workload_name}") from None
    return build(problem)


# ----------------------------------------------------------------------------------------------
# W1 addvecs: what the literal in-place spelling does in each system.


def _outcome(attempt):
    """Run ``attempt()`` (returning the gradients wrt a and b); describe what happened."""
    try:
        gradients = attempt()
    except Exception as error:  # each peer raises its own type; the message is the finding
        message = " ".join(str(error).split())
        return {"ok": False, "text": f"{type(error).__name__}: {message[:160]}"}
    da, db = (np.asarray(g, dtype=np.float64) for g in gradients)
    if np.all(da == 1.0) and np.all(db == 1.0):
        return {"ok": True, "text": "gradient (1, 1): right"}
    return {"ok": False, "text": (f"gradient wrt a = {_describe(da)}, wrt b = {_describe(db)}: "
                                  "WRONG, silently")}


def _describe(g):
    return f"{g.flat[0]:g}" if np.all(g == g.flat[0]) else "mixed"


def behaviour(system, problem):
    """W1 for ``system``: the outcome of ``a += b`` and ``a[:] += b`` written inside the function
    that is differentiated, the idiomatic workaround and its outcome, and whether the caller's
    ``a`` ends up mutated by the differentiation."""
    a, b = problem.args
    original_a = a.tobytes()
    if system in MUTAD_SYSTEMS:
        policy = _policy(system)

        def differentiate(f):
            if system not in REPLAYS:
                return mutad.gradient(f, caller_a, b, policy=policy)
            replayed = mutad.grad(f, argnums=(0, 1), policy=policy, replay=True)
            recorded = replayed(caller_a, b)
            again = replayed(caller_a, b)  # what a user gets from the second call on
            if [g.tobytes() for g in recorded] != [g.tobytes() for g in again]:
                raise AssertionError(f"the replayed gradient {again} is not the recorded one "
                                     f"{recorded}")
            return again

        def literal(a, b):
            a += b
            return a.sum()

        def sliced(a, b):
            a[:] += b
            return a.sum()

        caller_a = a.copy()
        found = {
            "a += b": _outcome(lambda: differentiate(literal)),
            "a[:] += b": _outcome(lambda: differentiate(sliced)),
            "workaround": "none needed",
        }
        found["workaround outcome"] = found["a += b"]
        found["caller's a mutated"] = caller_a.tobytes() != original_a
        return found
    if system == "numpy":
        caller_a = a.copy()
        problem.loss(caller_a, b)
        return {"a += b": {"ok": True, "text": "no AD: the forward runs"},
                "a[:] += b": {"ok": True, "text": "no AD: the forward runs"},
                "workaround": "-", "workaround outcome": {"ok": True, "text": "-"},
                "caller's a mutated": caller_a.tobytes() != original_a}
    return _PEER_BEHAVIOURS[system](a, b, original_a)


def _torch_behaviour(a, b, original_a):
    torch = _torch()
    caller_a = torch.from_numpy(a.copy()).requires_grad_()
    tb = torch.from_numpy(b.copy()).requires_grad_()

    def literal():
        x = caller_a
        x += tb
        return torch.autograd.grad(x.sum(), (caller_a, tb), allow_unused=True)

    def sliced():
        x = caller_a
        x[:] += tb
        return torch.autograd.grad(x.sum(), (caller_a, tb), allow_unused=True)

    def workaround():
        x = caller_a.clone()
        x += tb
        return torch.autograd.grad(x.sum(), (caller_a, tb))

    return {"a += b": _outcome(literal), "a[:] += b": _outcome(sliced),
            "workaround": "x = a.clone(); x += b", "workaround outcome": _outcome(workaround),
            "caller's a mutated": caller_a.detach().numpy().tobytes() != original_a}


def _jax_behaviour(a, b, original_a):
    jax = _jax()
    jnp = jax.numpy
    caller_a, jb = jnp.asarray(a), jnp.asarray(b)

    def literal(a, b):
        a += b
        return jnp.sum(a)

    def sliced(a, b):
        a[:] += b
        return jnp.sum(a)

    def workaround(a, b):
        return jnp.sum(a.at[:].add(b))

    def outcome(f):
        return _outcome(lambda: jax.jit(jax.grad(f, argnums=(0, 1)))(caller_a, jb))

    found = {"a += b": outcome(literal), "a[:] += b": outcome(sliced),
             "workaround": "a = a.at[:].add(b) (or a = a + b)",
             "workaround outcome": outcome(workaround),
             "caller's a mutated": np.asarray(caller_a).tobytes() != original_a}
    _note_rebinding(found)
    return found


def _autograd_behaviour(a, b, original_a):
    import autograd
    import autograd.numpy as anp

    caller_a = a.copy()

    def literal(a, b):
        a += b
        return anp.sum(a)

    def sliced(a, b):
        a[:] += b
        return anp.sum(a)

    def workaround(a, b):
        return anp.sum(a + b)

    def outcome(f):
        return _outcome(lambda: autograd.grad(f, argnum=(0, 1))(caller_a, b))

    found = {"a += b": outcome(literal), "a[:] += b": outcome(sliced),
             "workaround": "a = a + b", "workaround outcome": outcome(workaround),
             "caller's a mutated": caller_a.tobytes() != original_a}
    _note_rebinding(found)
    return found


def _note_rebinding(found):
    # JAX arrays and autograd's ArrayBox have no __iadd__, so `a += b` rebinds a local name:
    # the right gradient, but not NumPy's semantics (there the caller's a would change).
    if found["a += b"]["ok"]:
        found["a += b"]["text"] += " (rebinds a; nothing is written in place)"


_PEER_BEHAVIOURS = {"torch": _torch_behaviour, "jax": _jax_behaviour,
                    "autograd": _autograd_behaviour}
