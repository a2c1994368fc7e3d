"""Gradients through SciPy's solvers: a sparse implicit heat solver and an ODE fit, against JAX.

Two workloads, each written as SciPy code is and differentiated by ``mutad.value_and_grad``:

* **sparse heat**: u_t = (k u_x)_x on n interior points, the ends held at 0, implicit Euler
  with a fixed step. The diffusivity on the n + 1 cell faces is ``k = exp(log_k)``, the
  differentiated argument; the matrix ``I + r K(k)`` (``r = dt / h^2``) is assembled with
  ``scipy.sparse.diags``. Two variants: ``splu`` factorizes it once and every step writes
  ``u[:] = lu.solve(u)``; ``spsolve`` calls ``spsolve(A, u)`` at every step. The loss is the
  squared misfit of the final state to a target.
* **ODE fit**: Lotka-Volterra with 4 rates, ``solve_ivp(..., method="RK45", t_eval=...)`` at
  rtol 1e-7, atol 1e-9, ten observations per unit of time on (0, T]; the loss is the squared
  misfit to noisy counts, differentiated in the 4 rates. T grows tenfold from row to row, and
  the number of steps with it.

The JAX peers, each jitted with float64 enabled, the steps in ``lax.scan``:

* ``jax-tridiag``: ``jax.lax.linalg.tridiagonal_solve`` at every step (LAPACK's gtsv, O(n);
  JAX has no factor-once sparse LU, and for a tridiagonal matrix this direct banded solve is
  its fastest), differentiated by JAX's own rules for it.
* ``jax-spsolve``: ``jax.experimental.sparse.linalg.spsolve`` on the CSR arrays at every step;
  on a CPU it calls ``scipy.sparse.linalg.spsolve`` through a host callback, and JAX
  differentiates it with a transposed solve.
* ``jax-cg``: a ``jax.experimental.sparse.BCOO`` matrix and ``jax.scipy.sparse.linalg.cg``
  (relative tolerance 1e-12, the previous state as the first guess) at every step, the matrix
  being symmetric positive definite; its gradient solves the transposed system by CG too.
* ``diffrax``: ``diffeqsolve`` with ``Dopri5`` (RK45's Dormand-Prince pair),
  ``PIDController`` with the same rtol and atol, ``SaveAt(ts=t_eval)``, and
  ``RecursiveCheckpointAdjoint()`` (diffrax's default: it differentiates the discrete steps,
  recomputing them from binomial checkpoints); ``max_steps`` is 4 times the steps SciPy takes.
* ``jax-odeint``: ``jax.experimental.ode.odeint`` (its own Dormand-Prince, the continuous
  adjoint, as mutad's ``solve_ivp``), same rtol and atol, outputs at 0 and ``t_eval``.

A peer that is not installed is reported as such.

**Method.** Every configuration (workload, system, size) runs in a fresh interpreter, with one
compute thread (``OMP_NUM_THREADS=1`` and its relatives, XLA's
``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``) and glibc malloc pinned
as ``mutad-bench`` pins it (``mutad.bench.harness``). There: a first gradient call (JAX compiles
then), then the peak extra memory of one gradient call (VmHWM, reset through
``/proc/self/clear_refs``, minus VmRSS before), and the same for the plain SciPy forward; then
one untimed round and ``--rounds`` rounds of (SciPy forward, gradient, the peer's own jitted
forward) back to back. A ratio is computed within a round, gradient time over the SciPy
forward's of the same round (and over the peer's own forward), and reported as the median
[min-max] over the rounds: no absolute time is reported, the machine being shared. The SciPy
forward is the splu program for the splu, tridiagonal and CG rows, the spsolve program for the
spsolve rows, and solve_ivp for the ODE. Every gradient is compared with mutad's (the splu
variant's for the heat) and along a fixed random direction with a central difference of the
SciPy forward.

    python benchmarks/scipy_solvers.py                        # both workloads, every system
    python benchmarks/scipy_solvers.py --heat-steps 10,100,1000 --ode-spans 10,100,1000
    python benchmarks/scipy_solvers.py --workloads heat --systems mutad-splu,jax-tridiag
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

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
import scipy.sparse  # noqa: E402
import scipy.sparse.linalg  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import mutad  # noqa: E402

MARKER = "SCIPY-SOLVERS-RESULT "

# ----------------------------------------------------------------------------------------------
# The sparse implicit heat solver

HEAT_R = 5.0  # dt / h^2: each implicit step spreads heat over a few cells


def heat_inputs(n):
    """``(log_k, u0, target)`` for n interior points."""
    x = np.linspace(0.0, 1.0, n + 2)
    faces = 0.5 * (x[:-1] + x[1:])
    log_k = 0.5 * np.sin(2 * np.pi * faces) + 0.2 * np.cos(7 * np.pi * faces)
    u0 = np.exp(-200.0 * (x[1:-1] - 0.4) ** 2)
    target = 0.8 * np.exp(-150.0 * (x[1:-1] - 0.45) ** 2)
    return log_k, u0, target


def heat_matrix(log_k):
    """``I + r K``: implicit Euler's matrix, sparse, from the face diffusivities."""
    k = np.exp(log_k)
    stiffness = scipy.sparse.diags([-k[1:-1], k[:-1] + k[1:], -k[1:-1]], [-1, 0, 1],
                                   format="csc")
    return scipy.sparse.identity(k.size - 1, format="csc") + HEAT_R * stiffness


def heat_splu(log_k, u0, target, steps):
    """Factorized once, one ``lu.solve`` per step, the state updated in place."""
    lu = scipy.sparse.linalg.splu(heat_matrix(log_k))
    u = u0.copy()
    for _ in range(steps):
        u[:] = lu.solve(u)
    return 0.5 * np.sum((u - target) ** 2)


def heat_spsolve(log_k, u0, target, steps):
    """One ``spsolve`` per step."""
    matrix = heat_matrix(log_k)
    u = u0.copy()
    for _ in range(steps):
        u[:] = scipy.sparse.linalg.spsolve(matrix, u)
    return 0.5 * np.sum((u - target) ** 2)


def _tridiagonal_pattern(n):
    """The CSR and COO index arrays of the tridiagonal pattern, and where the values of
    ``concatenate([lower, diagonal, upper])`` go in their stored order."""
    marks = np.arange(1.0, 3 * n - 1)  # 1-based, so that none is a zero SciPy drops
    lower, diagonal, upper = marks[:n - 1], marks[n - 1:2 * n - 1], marks[2 * n - 1:]
    csr = scipy.sparse.diags([lower, diagonal, upper], [-1, 0, 1], format="csr")
    coo = csr.tocoo()
    return (csr.indices, csr.indptr, (csr.data - 1).astype(np.int64),
            np.stack([coo.row, coo.col], axis=1), (coo.data - 1).astype(np.int64))


def jax_heat(kind, n, steps):
    """The heat loss in JAX, ``kind`` one of "tridiag", "spsolve", "cg"."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    indices, indptr, csr_order, coo_indices, coo_order = _tridiagonal_pattern(n)

    def loss(log_k, u0, target):
        k = jnp.exp(log_k)
        diagonal = 1.0 + HEAT_R * (k[:-1] + k[1:])
        off = -HEAT_R * k[1:-1]
        if kind == "tridiag":
            lower = jnp.concatenate([jnp.zeros(1), off])
            upper = jnp.concatenate([off, jnp.zeros(1)])

            def step(u, _):
                return jax.lax.linalg.tridiagonal_solve(lower, diagonal, upper,
                                                        u[:, None])[:, 0], None
        elif kind == "spsolve":
            from jax.experimental.sparse.linalg import spsolve

            data = jnp.concatenate([off, diagonal, off])[csr_order]

            def step(u, _):
                return spsolve(data, indices, indptr, u), None
        else:
            from jax.experimental import sparse

            matrix = sparse.BCOO((jnp.concatenate([off, diagonal, off])[coo_order],
                                  coo_indices), shape=(n, n))

            def step(u, _):
                return jax.scipy.sparse.linalg.cg(lambda v: matrix @ v, u, x0=u,
                                                  tol=1e-12)[0], None

        u, _ = jax.lax.scan(step, u0, None, length=steps)
        return 0.5 * jnp.sum((u - target) ** 2)

    return jax, loss


# ----------------------------------------------------------------------------------------------
# The ODE fit

LV_START = np.array([10.0, 5.0])
LV_TRUTH = np.array([1.0, 0.1, 0.075, 1.5])
LV_GUESS = np.array([0.98, 0.102, 0.074, 1.52])
ODE_RTOL, ODE_ATOL = 1e-7, 1e-9


def lotka_volterra(t, z, theta):
    """dz/dt for prey z[0] and predators z[1], ``theta = (birth, predation, growth, death)``,
    filled in place as NumPy code often is."""
    dz = np.empty(2)
    dz[0] = theta[0] * z[0] - theta[1] * z[0] * z[1]
    dz[1] = theta[2] * z[0] * z[1] - theta[3] * z[1]
    return dz


def ode_inputs(span):
    """``(theta, counts, t_eval)``: ten observations per unit of time on (0, span]."""
    t_eval = np.linspace(0.0, span, 10 * span + 1)[1:]
    clean = solve_ivp(lotka_volterra, (0.0, span), LV_START, method="RK45", t_eval=t_eval,
                      args=(LV_TRUTH,), rtol=1e-10, atol=1e-12).y
    counts = clean + 0.1 * np.random.default_rng(0).standard_normal(clean.shape)
    return LV_GUESS.copy(), counts, t_eval


def ode_misfit(theta, counts, t_eval):
    sol = solve_ivp(lotka_volterra, (0.0, t_eval[-1]), LV_START, method="RK45", t_eval=t_eval,
                    args=(theta,), rtol=ODE_RTOL, atol=ODE_ATOL)
    return 0.5 * np.sum((sol.y - counts) ** 2)


def ode_steps(theta, t_eval):
    """The steps SciPy's RK45 takes (6 evaluations a step after the first)."""
    sol = solve_ivp(lotka_volterra, (0.0, t_eval[-1]), LV_START, method="RK45", t_eval=t_eval,
                    args=(theta,), rtol=ODE_RTOL, atol=ODE_ATOL)
    return (sol.nfev - 2) // 6


def jax_ode(kind, t_eval, max_steps):
    """The ODE misfit in JAX, ``kind`` one of "diffrax", "odeint"."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    start, ts = jnp.asarray(LV_START), jnp.asarray(t_eval)

    def field(z, theta):
        return jnp.stack([theta[0] * z[0] - theta[1] * z[0] * z[1],
                          theta[2] * z[0] * z[1] - theta[3] * z[1]])

    if kind == "diffrax":
        import diffrax

        def loss(theta, counts):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(lambda t, z, theta: field(z, theta)), diffrax.Dopri5(),
                t0=0.0, t1=float(t_eval[-1]), dt0=None, y0=start, args=theta,
                saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.PIDController(rtol=ODE_RTOL, atol=ODE_ATOL),
                adjoint=diffrax.RecursiveCheckpointAdjoint(), max_steps=max_steps)
            return 0.5 * jnp.sum((sol.ys.T - counts) ** 2)
    else:
        from jax.experimental.ode import odeint

        times = jnp.concatenate([jnp.zeros(1), ts])

        def loss(theta, counts):
            ys = odeint(lambda z, t, theta: field(z, theta), start, times, theta,
                        rtol=ODE_RTOL, atol=ODE_ATOL, mxstep=max_steps)
            return 0.5 * jnp.sum((ys[1:].T - counts) ** 2)

    return jax, loss


# ----------------------------------------------------------------------------------------------
# Systems

HEAT_SYSTEMS = ("mutad-splu", "mutad-spsolve", "jax-tridiag", "jax-spsolve", "jax-cg")
ODE_SYSTEMS = ("mutad", "diffrax", "jax-odeint")
PEER_MODULES = {"jax-tridiag": ("jax",), "jax-spsolve": ("jax",), "jax-cg": ("jax",),
                "diffrax": ("jax", "diffrax"), "jax-odeint": ("jax",)}
REFERENCE = {"heat": "mutad-splu", "ode": "mutad"}


def installed(system):
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in PEER_MODULES.get(system, ()))


class Setup:
    """One configuration, ready to call: ``gradient()`` and ``forward()`` (the system's own,
    or None) return ``(value, gradient)`` and the value; ``scipy_forward()`` is the SciPy
    program the ratios divide by."""

    def __init__(self, workload, system, size):
        if workload == "heat":
            log_k, u0, target = heat_inputs(size["n"])
            steps = size["steps"]
            self.argument = log_k
            program = heat_spsolve if system.endswith("spsolve") else heat_splu
            self.scipy_forward = lambda: program(log_k, u0, target, steps)
            if system.startswith("mutad"):
                self.gradient = lambda: mutad.value_and_grad(program)(log_k, u0, target, steps)
                self.forward = None
            else:
                jax, loss = jax_heat(system.split("-")[1], size["n"], steps)
                self._jax(jax, loss, log_k, u0, target)
        else:
            theta, counts, t_eval = ode_inputs(size["span"])
            self.argument = theta
            self.scipy_forward = lambda: ode_misfit(theta, counts, t_eval)
            if system == "mutad":
                self.gradient = lambda: mutad.value_and_grad(ode_misfit)(theta, counts, t_eval)
                self.forward = None
            else:
                max_steps = 4 * ode_steps(theta, t_eval) + 100
                jax, loss = jax_ode("diffrax" if system == "diffrax" else "odeint", t_eval,
                                    max_steps)
                self._jax(jax, loss, theta, counts)

    def _jax(self, jax, loss, argument, *rest):
        rest = tuple(jax.numpy.asarray(r) for r in rest)
        argument = jax.numpy.asarray(argument)
        value_and_grad, forward = jax.jit(jax.value_and_grad(loss)), jax.jit(loss)
        self.gradient = lambda: jax.block_until_ready(value_and_grad(argument, *rest))
        self.forward = lambda: jax.block_until_ready(forward(argument, *rest))


def directional_difference(f, x, direction, step):
    """A fourth-order central difference of f along direction."""
    at = lambda s: f(x + s * step * direction)  # noqa: E731
    return (8 * (at(1) - at(-1)) - (at(2) - at(-2))) / (12 * step)


def fd_direction(workload, size):
    """The direction of the finite-difference check, of unit length. For the heat a smooth
    one: a face's own derivative is tiny (a product of differences between neighbours), and
    along a random direction they cancel to a value that rounding in the loss hides."""
    if workload == "heat":
        direction = np.cos(3 * np.pi * np.linspace(0.0, 1.0, size))
    else:
        direction = np.random.default_rng(1).standard_normal(size)
    return direction / np.linalg.norm(direction)


def measure(configuration):
    """Run in the child: warm-up, peaks, timed rounds; the gradient saved for the parent."""
    from mutad.bench import harness

    workload, system, size = (configuration[k] for k in ("workload", "system", "size"))
    setup = Setup(workload, system, size)
    harness.pin_allocator("peak")
    start = time.perf_counter()
    value, gradient = setup.gradient()
    first_call = time.perf_counter() - start
    del value, gradient
    result, peak, _, method = harness.peak_extra_memory(setup.gradient)
    value, gradient = float(result[0]), np.asarray(result[1])
    del result
    _, scipy_peak, _, _ = harness.peak_extra_memory(setup.scipy_forward)
    harness.pin_allocator("timing")
    calls = {"scipy": setup.scipy_forward, "gradient": setup.gradient}
    if setup.forward is not None:
        calls["own"] = setup.forward
    times = {key: [] for key in calls}
    for round_ in range(configuration["rounds"] + 1):
        for key, call in calls.items():
            start = time.perf_counter()
            call()
            if round_:  # the first round is untimed
                times[key].append(time.perf_counter() - start)
    scipy_value = float(setup.scipy_forward())
    np.save(configuration["gradient_file"], gradient)
    row = {"status": "ok", "peak_mib": peak, "scipy_peak_mib": scipy_peak,
           "memory_method": method, "first_call_s": first_call, "value": value,
           "scipy_value": scipy_value,
           "over_scipy": [g / s for g, s in zip(times["gradient"], times["scipy"])],
           "over_own": ([g / o for g, o in zip(times["gradient"], times["own"])]
                        if "own" in times else None)}
    if configuration.get("finite_difference"):
        direction = fd_direction(workload, setup.argument.size)
        if workload == "heat":
            log_k, u0, target = heat_inputs(size["n"])
            f = lambda x: heat_splu(x, u0, target, size["steps"])  # noqa: E731
            step = 1e-1
        else:
            _, counts, t_eval = ode_inputs(size["span"])
            f = lambda x: ode_misfit(x, counts, t_eval)  # noqa: E731
            step = 1e-4
        row["direction_fd"] = float(directional_difference(f, setup.argument, direction, step))
        np.save(configuration["gradient_file"] + ".direction.npy", direction)
    return row


def run_child(configuration, timeout):
    from mutad.bench import harness

    return harness.run_script_child(__file__, MARKER, configuration, timeout)


# ----------------------------------------------------------------------------------------------
# The parent: configurations, checks, the table


def spread(values):
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def configurations(options):
    for workload in options.workloads:
        systems = HEAT_SYSTEMS if workload == "heat" else ODE_SYSTEMS
        sizes = ([{"n": options.heat_n, "steps": s} for s in options.heat_steps]
                 if workload == "heat" else [{"span": s} for s in options.ode_spans])
        for size in sizes:
            for system in systems:
                if options.systems and system not in options.systems:
                    continue
                yield workload, system, size


def size_label(size):
    return " ".join(f"{k}={v:,}" for k, v in size.items())


BASELINE = {"mutad-splu": "splu", "mutad-spsolve": "spsolve", "jax-tridiag": "splu",
            "jax-spsolve": "spsolve", "jax-cg": "splu", "mutad": "solve_ivp",
            "diffrax": "solve_ivp", "jax-odeint": "solve_ivp"}


def run(options, out=print):
    """Every configuration in a fresh interpreter; returns the rows and prints the table."""
    directory = Path(tempfile.mkdtemp(prefix="scipy-solvers-"))
    rows = []
    for index, (workload, system, size) in enumerate(configurations(options)):
        if not installed(system):
            row = {"status": "not installed"}
        else:
            configuration = {"workload": workload, "system": system, "size": size,
                             "rounds": options.rounds,
                             "gradient_file": str(directory / f"{index}.npy"),
                             "finite_difference": system == REFERENCE[workload]}
            row = (measure(configuration) if options.in_process
                   else run_child(configuration, options.timeout))
            row["gradient_file"] = configuration["gradient_file"]
        row.update(workload=workload, system=system, size=size)
        rows.append(row)
        if options.json:  # after every configuration, so that a stopped run keeps its rows
            Path(options.json).write_text(json.dumps(rows, indent=1))
        if options.progress:
            print(f"  {workload} {size_label(size)} {system}: {row['status']}",
                  file=sys.stderr, flush=True)
    check(rows)
    out(table(rows, options))
    return rows


def check(rows):
    """Each gradient against the reference system's of the same size, and along its direction
    against the reference's finite difference."""
    references = {}
    for row in rows:
        if row["status"] == "ok" and row["system"] == REFERENCE[row["workload"]]:
            references[row["workload"], json.dumps(row["size"])] = row
    for row in rows:
        reference = references.get((row["workload"], json.dumps(row["size"])))
        if row["status"] != "ok" or reference is None:
            continue
        g, g_ref = np.load(row["gradient_file"]), np.load(reference["gradient_file"])
        row["grad_err"] = float(np.abs(g - g_ref).max() / np.abs(g_ref).max())
        direction = np.load(reference["gradient_file"] + ".direction.npy")
        fd = reference["direction_fd"]
        row["fd_err"] = float(abs(g @ direction - fd) / abs(fd))
        row["value_err"] = abs(row["value"] - row["scipy_value"]) / abs(row["scipy_value"])


def table(rows, options):
    lines = [
        f"Gradients through SciPy's solvers, mutad against JAX: {options.rounds} rounds per "
        "configuration, each in a fresh interpreter with one thread. Ratios are computed "
        "within each round; median [min-max] over the rounds.",
        "",
        "| workload | size | system | peak MiB | SciPy fwd peak MiB | grad / SciPy fwd "
        "| (SciPy fwd) | grad / own fwd | loss err | grad err | fd err |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        head = f"| {row['workload']} | {size_label(row['size'])} | {row['system']} |"
        if row["status"] != "ok":
            lines.append(f"{head} {row['status']} {row.get('detail', '')} |  |  |  |  |  |  |  |")
            continue
        own = spread(row["over_own"]) if row["over_own"] else "-"
        errors = [f"{row[key]:.0e}" if key in row else "-"
                  for key in ("value_err", "grad_err", "fd_err")]
        if row["system"] == REFERENCE[row["workload"]]:
            errors[1] = "ref"
        lines.append(f"{head} {row['peak_mib']:.1f} | {row['scipy_peak_mib']:.1f} | "
                     f"{spread(row['over_scipy'])} | {BASELINE[row['system']]} | {own} | "
                     f"{' | '.join(errors)} |")
    lines += [
        "",
        "peak MiB: VmHWM during one gradient call minus VmRSS before it (after a first call, "
        "which compiles JAX's); SciPy fwd peak: the same for the SciPy forward named in "
        "(SciPy fwd); grad / SciPy fwd: that forward's time in the same round as the "
        "denominator; grad / own fwd: the peer's jitted loss; loss err: the system's loss "
        "against SciPy's; grad err: max |g - g_ref| / max |g_ref| against mutad's (the splu "
        "variant's for heat); fd err: the gradient along a fixed random direction against a "
        "fourth-order central difference of the SciPy forward.",
    ]
    return "\n".join(lines)


def integers(text):
    return [int(v) for v in text.split(",")]


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=["heat", "ode"])
    parser.add_argument("--systems", type=lambda s: s.split(","), default=None)
    parser.add_argument("--heat-n", type=int, default=100_000)
    parser.add_argument("--heat-steps", type=integers, default=[10, 100])
    parser.add_argument("--ode-spans", type=integers, default=[10, 100])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", help="write the rows to this file as they are measured")
    parser.add_argument("--in-process", action="store_true",
                        help="measure in this interpreter (for a quick check; no fresh state)")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    options = parse(argv)
    if options.child:
        print(MARKER + json.dumps(measure(json.loads(options.child))), flush=True)
        return 0
    rows = run(options)
    return 1 if any(r["status"] not in ("ok", "not installed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
