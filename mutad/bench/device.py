"""``mutad-bench --xp cupy``: the workloads W2, W3, W5 and W6 with their arrays on a GPU.

Each configuration (system, workload, size) runs in a fresh interpreter, as on the CPU. The
arrays are CuPy's; mutad differentiates the workloads' in-place code written against CuPy's
namespace (``import cupy as np``, :func:`mutad.bench.workloads.on_namespace`), and the
baseline, "cupy", is the same code run by CuPy without a gradient: the device forward. The
peers run on the same GPU: PyTorch on ``cuda``, JAX on its default device (a GPU where jax has
CUDA). W3 on a device inverts its matrix once with the namespace's ``linalg.inv`` and applies
the inverse in place at every step (:func:`mutad.bench.workloads.implicit_heat_inverse`).

Everything here takes the array namespace as a parameter (``cupy`` in real use; the tests
give it ``tests/device_array.py``, a CuPy-like stand-in on NumPy that needs no GPU).

In each process:

* warm-up: for jax, the gradient and its forward compiled ahead of time (their compile time
  reported on its own); the first gradient call, timed on its own (CuPy compiles its kernels
  on first use), then one own forward and one device forward;
* peak device memory of one gradient call, its result kept alive, beyond what was in use
  before it: CuPy's memory pool's high-water mark (CuPy keeps none: while the call runs, an
  allocator wrapping the pool's ``malloc`` records the highest ``used_bytes()`` after each
  allocation), ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``,
  and for jax, whose counter cannot be reset, the device's ``memory_stats()
  ["peak_bytes_in_use"]`` after the process's first gradient call (compiled ahead, so that
  the compiler's scratch memory is spent before; where the compiler's peak was higher, the
  figure is an upper bound, shown with "<="). The same for one device forward, for scale;
* timing: every call followed by a synchronisation with the device (CuPy: the device's
  ``synchronize()``; torch: ``torch.cuda.synchronize()``; jax: ``block_until_ready``), one
  untimed round, then rounds of (device forward, gradient, own forward) back to back, and the
  per-round ratios gradient / device forward and gradient / own forward;
* correctness, after the measurements: the loss against NumPy's forward on the host, the
  gradient against mutad-checkpoint's on the device (max |g - g_ref| / max |g_ref| per input,
  symmetric parts for W3's matrix), the gradient along a fixed random direction against a
  fourth-order central difference of the device forward, and for mutad the caller's arrays
  unchanged and the checked call's result bit for bit the first call's.
"""

import functools
import hashlib
import importlib
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mutad.bench import harness, peers, report
from mutad.bench import workloads as workload_code
from mutad.bench.workloads import WORKLOADS, on_namespace

MIB = harness.MIB
XP_CHOICES = ("numpy", "cupy")
FORWARD_SYSTEM = "cupy"
"""The device forward: the workload's code run by CuPy without a gradient, the baseline."""
MUTAD_DEVICE_SYSTEMS = ("mutad-restore", "mutad-checkpoint", "mutad-budget")
SYSTEMS = (*MUTAD_DEVICE_SYSTEMS, FORWARD_SYSTEM, "torch", "jax")
"""The systems of a device run, in the order tables list them. mutad-replay is not among
them: a replay does not record device arrays yet, so its calls are traced, as mutad-restore's."""
DEFAULT_SYSTEMS = ("mutad-restore", "mutad-checkpoint", FORWARD_SYSTEM, "torch", "jax")
WORKLOAD_NAMES = ("leapfrog", "implicit-heat", "big-elementwise", "bratu-gs")
"""W2, W3, W5 and W6: the workloads whose code runs on a device."""

PROGRAMS = {
    "leapfrog": ("leapfrog", (0, 1)),
    "implicit-heat": ("implicit_heat_inverse", (0,)),
    "big-elementwise": ("big_elementwise", ()),
    "bratu-gs": ("bratu_sweeps", (0,)),
}
"""Per workload: the function of ``workloads.py`` that runs on the device, and the positions of
the arguments it writes into, which the device forward copies first (as NumPy's does)."""

SIZES = {
    "quick": {
        "leapfrog": [{"n": 10_000_000, "steps": 20}],
        "implicit-heat": [{"n": 4096, "steps": 100}],
        "big-elementwise": [{"n": 100_000_000}],
        "bratu-gs": [{"n": 10_000_000, "steps": 20}],
    },
    "full": {
        "leapfrog": [{"n": 10_000_000, "steps": steps} for steps in (10, 100)],
        "implicit-heat": [{"n": n, "steps": 100} for n in (4096, 8192)],
        "big-elementwise": [{"n": n} for n in (10_000_000, 100_000_000)],
        "bratu-gs": [{"n": 10_000_000, "steps": steps} for steps in (10, 100)],
    },
}
"""Sizes that fill a GPU of tens of GiB without exceeding it: vectors of 10^7-10^8 float64
(80-800 MB each; W2 and W6 keep a state per step for the gradient, W2 at T=100 tens of GiB for
the peers), W3's dense matrix 4096^2 or 8192^2 (128-512 MiB). --n and --steps replace them."""
ROUNDS = {"quick": 5, "full": 7}
TIMEOUT = {"quick": 180.0, "full": 900.0}

LOSS_TOLERANCE = 1e-9
"""The loss against NumPy's on the host: a GPU's math library and its reductions round
otherwise than NumPy's."""

METHOD = (
    "mutad-bench --xp cupy: each (system, workload, size) runs in a fresh interpreter, one at a "
    "time, with its arrays on the GPU; mutad differentiates the workload's in-place code written "
    "against CuPy's namespace, and the baseline (cupy) is the same code run by CuPy without a "
    "gradient; torch runs on cuda, jax on its default device. Warm-up: jax's gradient and "
    "forward compiled ahead (timed on their own), the first gradient call timed on its own "
    "(CuPy compiles its kernels on first use), one own forward, one device forward. Peak device "
    "memory of one gradient call (its result kept alive) beyond what was in use before it: "
    "CuPy's memory pool's high-water mark, recorded by an allocator wrapping the pool's malloc "
    "that keeps the highest used_bytes() after each allocation; torch.cuda.max_memory_allocated "
    "after reset_peak_memory_stats; jax's memory_stats()['peak_bytes_in_use'] after the "
    "process's first gradient call (an upper bound, '<=', where compiling had reached higher). "
    "Timing: every call followed by a synchronisation with the device (CuPy's "
    "Device().synchronize(), torch.cuda.synchronize(), jax's block_until_ready); one untimed "
    "round, then rounds of (device forward, gradient, own forward) back to back; median "
    "[min-max] over rounds, ratios per round. Correctness: the loss against NumPy's forward on "
    "the host, the gradient against mutad-checkpoint's on the device, g.v against a 4th-order "
    "central difference of the device forward, and for mutad the caller's arrays unchanged and "
    "the checked result bit for bit the first call's."
)


class NoDevice(Exception):
    """CuPy cannot be imported, or finds no GPU: the message says which, on one line."""


# ----------------------------------------------------------------------------------------------
# The array namespace


def find_cupy():
    """The ``cupy`` module, if it imports and finds a GPU; raises :class:`NoDevice`."""
    try:
        import cupy
    except Exception as error:  # noqa: BLE001 - ImportError, or CuPy's own on a broken CUDA
        raise NoDevice(f"cupy cannot be imported ({_one_line(error)})") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - no driver, no device: CuPy raises its own
        raise NoDevice(f"cupy finds no GPU ({_one_line(error)})") from None
    if count < 1:
        raise NoDevice("cupy finds no GPU (0 devices)")
    return cupy


def _one_line(error):
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:300]


def namespace(name):
    """The array namespace called ``name``: ``cupy``, or a module of the same interface (the
    tests' stand-in, ``device_array``), whose arrays mutad differentiates as device arrays."""
    if name == "cupy":
        return find_cupy()
    module = importlib.import_module(name)
    from mutad.core import devices

    devices.register(module.ndarray, module)
    return module


def synchronizer(xp):
    """A function that waits for the device of namespace ``xp`` to finish its work (nothing to
    wait for on a namespace without ``cuda``, such as the stand-in)."""
    cuda = getattr(xp, "cuda", None)
    if cuda is None:
        return lambda: None
    return lambda: cuda.Device().synchronize()


def to_host(x):
    """A NumPy copy of device array ``x`` (an explicit copy); numbers and NumPy arrays as they
    are."""
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def scalar(x):
    """The Python float of a 0-d device array or a number (an explicit read)."""
    return float(x.item()) if hasattr(x, "item") else float(x)


# ----------------------------------------------------------------------------------------------
# The problems on the device


@dataclass
class DeviceProblem:
    """One workload at one size on the device: ``host`` is the CPU problem it was made from,
    ``args`` its arguments copied to the device, ``loss`` the code mutad differentiates there
    (``import cupy as np``), ``forward(*args)`` the same code without a gradient, on copies of
    the arguments it writes into."""

    name: str
    host: object
    args: tuple
    argnums: tuple
    loss: Callable
    forward: Callable


@functools.lru_cache(maxsize=None)
def programs(xp):
    """The device programs of the workloads, their ``np`` bound to namespace ``xp``."""
    functions = (workload_code.fpu_force, workload_code.leapfrog,
                 workload_code.implicit_heat_inverse, workload_code.big_elementwise,
                 workload_code.bratu_sweeps)
    return dict(zip((f.__name__ for f in functions), on_namespace(xp, *functions),
                    strict=True))


def device_problem(name, params, xp):
    """Workload ``name`` at ``params`` with its arrays on the device of namespace ``xp``."""
    host = WORKLOADS[name].build(**params)
    function_name, written = PROGRAMS[name]
    loss = programs(xp)[function_name]

    def forward(*args):
        return loss(*(a.copy() if i in written else a for i, a in enumerate(args)))

    args = tuple(xp.asarray(a) if isinstance(a, np.ndarray) else a for a in host.args)
    return DeviceProblem(name, host, args, host.argnums, loss, forward)


# ----------------------------------------------------------------------------------------------
# Peak device memory


class PoolPeak:
    """The high-water mark of CuPy's memory pool during a ``with`` block: CuPy keeps none, so
    while the block runs an allocator wrapping the pool's ``malloc`` records the highest
    ``used_bytes()`` after each allocation (the pool's use rises only when it allocates).
    ``extra_mib`` is that mark minus what was in use when the block began."""

    def __init__(self, xp, synchronize=None):
        self.cuda = xp.cuda
        self.pool = xp.get_default_memory_pool()
        self.synchronize = synchronize or (lambda: None)
        self.before = self.highest = 0
        self._previous = None

    def __enter__(self):
        self.synchronize()
        self.before = self.highest = self.pool.used_bytes()
        get_allocator = getattr(self.cuda, "get_allocator", None)
        self._previous = get_allocator() if get_allocator is not None else self.pool.malloc
        pool_malloc, pool = self._previous, self.pool

        def malloc(size):
            memory = pool_malloc(size)
            used = pool.used_bytes()
            if used > self.highest:
                self.highest = used
            return memory

        self.cuda.set_allocator(malloc)
        return self

    def __exit__(self, *exc):
        self.synchronize()
        self.cuda.set_allocator(self._previous)

    @property
    def extra_mib(self):
        return (self.highest - self.before) / MIB


def pool_peak(xp, call, synchronize):
    """``call()``'s result and its peak extra device memory in MiB from CuPy's pool; None for a
    namespace without one (the stand-in)."""
    if not hasattr(xp, "get_default_memory_pool") or not hasattr(xp, "cuda"):
        return call(), None
    with PoolPeak(xp, synchronize) as peak:
        result = call()
    return result, peak.extra_mib


def torch_peak(torch, call):
    """``call()``'s result and the most memory torch's allocator held during it beyond what it
    held before, in MiB."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = call()
    torch.cuda.synchronize()
    return result, (torch.cuda.max_memory_allocated() - before) / MIB


def jax_memory():
    """``(bytes_in_use, peak_bytes_in_use)`` of jax's default device, or None where it keeps no
    statistics (the CPU)."""
    import jax

    stats = jax.devices()[0].memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return stats.get("bytes_in_use", 0), stats["peak_bytes_in_use"]


# ----------------------------------------------------------------------------------------------
# Each system's gradient on the device


@dataclass
class Measured:
    """One system's version of a device problem: ``implementation`` (None for the device
    forward), the synchronisation its calls need, and how its peak memory is read
    ("pool": CuPy's pool; "torch"; "jax")."""

    implementation: peers.Implementation | None
    synchronize: Callable[[], None]
    memory: str


def _mutad(system, problem):
    import mutad

    policy = peers._policy(system)
    memory = None
    if system == "mutad-budget":
        memory = peers.BUDGET_STATES * max(a.nbytes for a in problem.args if hasattr(a, "nbytes"))

    def gradient():
        return mutad.value_and_gradient(problem.loss, *problem.args, argnums=problem.argnums,
                                        policy=policy, memory=memory)

    def to_numpy(result):
        value, gradients = result
        return scalar(value), tuple(to_host(g) for g in gradients)

    return peers.Implementation(gradient, to_numpy)


def system_on_device(system, problem, synchronize):
    """``system``'s version of ``problem``, on the GPU."""
    if system in MUTAD_DEVICE_SYSTEMS:
        return Measured(_mutad(system, problem), synchronize, "pool")
    if system == FORWARD_SYSTEM:
        return Measured(None, synchronize, "pool")
    if system == "torch":
        peers.TORCH_DEVICE = "cuda"
        import torch

        return Measured(peers.implementation("torch", problem.name, problem.host),
                        torch.cuda.synchronize, "torch")
    if system == "jax":
        peers.JAX_PLATFORMS = None  # JAX's default device: its GPU where it has CUDA
        return Measured(peers.implementation("jax", problem.name, problem.host),
                        lambda: None, "jax")  # its calls end in block_until_ready
    raise ValueError(f"unknown system {system!r} on a device; choose from {', '.join(SYSTEMS)}")


def seconds(call, synchronize):
    """The wall-clock time of ``call()`` and the device's work it queued."""
    start = time.perf_counter()
    call()
    synchronize()
    return time.perf_counter() - start


def time_rounds(calls, rounds):
    """One untimed round of ``calls`` (pairs of a call and its synchronisation), then
    ``rounds`` timed ones; the times per round."""
    def one_round():
        return [seconds(call, synchronize) for call, synchronize in calls]

    one_round()
    return [one_round() for _ in range(rounds)]


# ----------------------------------------------------------------------------------------------
# Correctness


def digest(args):
    """A digest of the bytes of the arrays among ``args`` (copied to the host)."""
    found = hashlib.blake2b()
    for a in args:
        if hasattr(a, "shape"):
            found.update(np.ascontiguousarray(to_host(a)).tobytes())
        else:
            found.update(repr(a).encode())
    return found.hexdigest()


def device_finite_difference(problem, step=harness.FINITE_DIFFERENCE_STEP):
    """Fourth-order central difference of the device forward along the fixed directions of
    :func:`harness.directions`, copied to the device."""
    xp_args = problem.args
    directions = harness.directions(problem.host)
    at = {}
    for k in (-2, -1, 1, 2):
        args = list(xp_args)
        for position, v in zip(problem.argnums, directions, strict=True):
            a = args[position]
            if hasattr(a, "shape"):
                args[position] = a + type_like(a, k * step * v)
            else:
                args[position] = a + k * step * float(v)
        at[k] = scalar(problem.forward(*args))
    return (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * step)


def type_like(device_array, host_array):
    """``host_array`` copied to the device of ``device_array``."""
    from mutad.core import devices

    return devices.namespace(device_array).asarray(host_array)


def shared_reference(problem, reference_dir, own_gradients=None, own_system=None):
    """NumPy's loss on the host, the finite difference of the device forward and
    mutad-checkpoint's gradient on the device, computed once per (workload, size) by the
    first configuration to need them and kept in ``reference_dir`` for the others."""
    from pathlib import Path

    path = Path(reference_dir) / f"device-{harness.size_key(problem.name, problem.host.params)}.npz"
    if path.exists():
        with np.load(path) as stored:
            count = int(stored["count"])
            return {"numpy_loss": float(stored["numpy_loss"]),
                    "finite_difference": float(stored["finite_difference"]),
                    "gradient_error": str(stored["gradient_error"]),
                    "gradients": tuple(stored[f"g{i}"] for i in range(count)) if count else None}
    gradient_error = ""
    if own_system == peers.REFERENCE_SYSTEM:
        gradients = own_gradients
    else:
        try:
            reference = _mutad(peers.REFERENCE_SYSTEM, problem)
            gradients = reference.to_numpy(reference.gradient())[1]
        except Exception as error:  # noqa: BLE001 - recorded in the row: the other checks run
            gradients, gradient_error = None, _one_line(error)
    numpy_loss = float(problem.host.numpy_forward(*problem.host.args))
    finite_difference = device_finite_difference(problem)
    Path(reference_dir).mkdir(parents=True, exist_ok=True)
    np.savez(path, count=len(gradients or ()), numpy_loss=numpy_loss,
             finite_difference=finite_difference, gradient_error=gradient_error,
             **{f"g{i}": g for i, g in enumerate(gradients or ())})
    return {"numpy_loss": numpy_loss, "finite_difference": finite_difference,
            "gradient_error": gradient_error, "gradients": gradients}


def check(problem, system, value, gradients, reference_dir, arguments_unchanged=None,
          same_as_first_call=None):
    """Check one row's loss and gradients; a dict with ``ok``."""
    shared = shared_reference(problem, reference_dir, gradients, system)
    results = {"loss": value, "numpy_loss": shared["numpy_loss"],
               "loss_error": abs(value - shared["numpy_loss"]) / abs(shared["numpy_loss"])}
    ok = results["loss_error"] <= LOSS_TOLERANCE
    if gradients is not None:
        along = sum(float(np.vdot(g, v)) for g, v in
                    zip(gradients, harness.directions(problem.host), strict=True))
        results["directional_derivative"] = along
        results["finite_difference"] = shared["finite_difference"]
        results["finite_difference_error"] = (
            abs(along - shared["finite_difference"]) / max(abs(shared["finite_difference"]),
                                                            1e-300)
            if np.isfinite(along) else float("inf"))
        ok = ok and results["finite_difference_error"] <= harness.FINITE_DIFFERENCE_TOLERANCE
        if shared["gradients"] is not None:
            results["gradient_error"] = harness.gradient_difference(problem.host, gradients,
                                                                    shared["gradients"])
            ok = ok and results["gradient_error"] <= harness.GRADIENT_TOLERANCE
        else:
            results["gradient_error"] = None
            results["reference_unavailable"] = shared["gradient_error"]
    for name, found in (("arguments_unchanged", arguments_unchanged),
                        ("same_as_first_call", same_as_first_call)):
        if found is not None:
            results[name] = found
            ok = ok and found
    results["ok"] = bool(ok)
    return results


# ----------------------------------------------------------------------------------------------
# One configuration, in this process


def measure(configuration, xp=None):
    """Measure one configuration in the current interpreter (meant to be a fresh one) on the
    device of namespace ``xp`` (by default the one named by the configuration's
    ``"namespace"``, ``cupy``).

    ``configuration``: ``{"system", "workload", "params", "rounds", "reference_dir",
    "namespace"}``. Returns a JSON-ready dict of raw per-round timings, memory and checks.
    """
    if xp is None:
        xp = namespace(configuration.get("namespace", "cupy"))
    system, name = configuration["system"], configuration["workload"]
    synchronize = synchronizer(xp)
    problem = device_problem(name, configuration["params"], xp)
    measured = system_on_device(system, problem, synchronize)
    implementation, own_sync = measured.implementation, measured.synchronize
    result = {"system": system, "workload": name, "label": WORKLOADS[name].label,
              "params": configuration["params"], "xp": getattr(xp, "__name__", str(xp)),
              "version": _version(system, xp), "status": "ok"}

    def forward():
        return problem.forward(*problem.args)

    is_mutad = system in MUTAD_DEVICE_SYSTEMS
    arguments_before = digest(problem.args) if is_mutad else None
    compile_seconds = first_call_seconds = first_call = None
    peak_mib, peak_bound, jax_before = None, False, None
    if implementation is not None:
        if implementation.compile_ahead is not None:
            start = time.perf_counter()
            implementation.compile_ahead()
            compile_seconds = time.perf_counter() - start
        if measured.memory == "jax":
            jax_before = jax_memory()
        start = time.perf_counter()
        native = implementation.gradient()
        own_sync()
        first_call_seconds = time.perf_counter() - start
        if jax_before is not None:
            in_use, compiled_peak = jax_before
            peak_mib = (jax_memory()[1] - in_use) / MIB
            peak_bound = jax_memory()[1] <= compiled_peak  # the compiler's mark, not the call's
        first_call = harness.fingerprint(*implementation.to_numpy(native))
        del native
        if implementation.forward is not None:
            implementation.forward()
    forward()
    synchronize()

    if implementation is not None:
        if measured.memory == "pool":
            native, peak_mib = pool_peak(xp, implementation.gradient, synchronize)
        elif measured.memory == "torch":
            import torch

            native, peak_mib = torch_peak(torch, implementation.gradient)
        else:
            native = implementation.gradient()
        value, gradients = implementation.to_numpy(native)
        del native
    forward_value, forward_peak_mib = pool_peak(xp, forward, synchronize)
    forward_value = scalar(forward_value)
    if implementation is None:
        value, gradients, peak_mib = forward_value, None, forward_peak_mib

    calls = [(forward, synchronize)]
    if implementation is not None:
        calls.append((implementation.gradient, own_sync))
        if implementation.forward is not None:
            calls.append((implementation.forward, own_sync))
    rounds = time_rounds(calls, configuration["rounds"])
    per_call = [list(times) for times in zip(*rounds, strict=True)]
    forward_seconds, gradient_seconds, own_seconds = (per_call + [[], []])[:3]
    if implementation is None:
        gradient_seconds = list(forward_seconds)

    checks = None
    if configuration.get("check", True):
        checks = check(problem, system, value, gradients, configuration["reference_dir"],
                       digest(problem.args) == arguments_before if is_mutad else None,
                       harness.fingerprint(value, gradients) == first_call if is_mutad
                       else None)
        if not checks["ok"]:
            result["status"] = "wrong"
    result.update({
        "rounds": configuration["rounds"],
        "state_mib": problem.host.state_bytes / MIB,
        "forward_seconds": forward_seconds,
        "gradient_seconds": gradient_seconds,
        "own_forward_seconds": own_seconds,
        "ratios": [g / f for g, f in zip(gradient_seconds, forward_seconds, strict=True)],
        "own_ratios": [g / f for g, f in zip(gradient_seconds, own_seconds, strict=False)],
        "compile_seconds": compile_seconds,
        "first_call_seconds": first_call_seconds,
        "peak_extra_mib": peak_mib,
        "peak_is_upper_bound": peak_bound,
        "memory_method": measured.memory,
        "forward_peak_extra_mib": forward_peak_mib,
        "checks": checks,
    })
    return result


def _version(system, xp):
    if system == FORWARD_SYSTEM:
        return getattr(xp, "__version__", None)
    return peers.version(system)


# ----------------------------------------------------------------------------------------------
# One configuration, in a fresh interpreter


OUT_OF_MEMORY = ("OutOfMemory", "out of memory", "RESOURCE_EXHAUSTED")


def run_in_fresh_interpreter(configuration, timeout=TIMEOUT["quick"], memory_limit_mib=None):
    """Measure ``configuration`` in a new Python process; a row with status "not installed",
    "timeout", "out of memory" (host or device) or "error" where it could not be measured."""
    system = configuration["system"]
    if system in ("torch", "jax") and not peers.installed(system):
        return harness._outcome_row(configuration, "not installed")
    environment = dict(os.environ)
    environment.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # take what it uses
    return harness.run_child("mutad.bench.device", configuration, timeout, memory_limit_mib,
                             environment)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        sys.exit("usage: python -m mutad.bench.device --child '<configuration as JSON>' "
                 "(started by mutad-bench --xp cupy)")
    configuration = json.loads(sys.argv[2])
    try:
        row = measure(configuration)
    except Exception as error:
        if not any(mark in f"{type(error).__name__} {error}" for mark in OUT_OF_MEMORY):
            raise
        row = harness._outcome_row(configuration, "out of memory",
                                   f"device: {_one_line(error)}")
    print(harness.RESULT_MARKER + json.dumps(row), flush=True)


# ----------------------------------------------------------------------------------------------
# The plan, the machine, the tables


def sizes(name, mode, steps=None, n=None):
    """The sizes of workload ``name`` on a device: the mode's, with --steps and --n replacing
    theirs (each combination once)."""
    found = []
    for params in SIZES[mode][name]:
        for n_value in n or [params["n"]]:
            for steps_value in (steps or [params["steps"]]) if "steps" in params else [None]:
                combination = {**params, "n": n_value}
                if steps_value is not None:
                    combination["steps"] = steps_value
                if combination not in found:
                    found.append(combination)
    return found


def configurations(mode, workloads, systems, options, reference_dir, namespace_name="cupy"):
    """Every (workload, size, system) to run, mutad-checkpoint first within each size so that
    its gradient is the one the others are compared with."""
    ordered = sorted(systems, key=lambda s: (s != peers.REFERENCE_SYSTEM, SYSTEMS.index(s)))
    rounds = options.reps or ROUNDS[mode]
    for name in workloads:
        for params in sizes(name, mode, options.steps, options.n):
            for system in ordered:
                yield {"system": system, "workload": name, "params": params, "rounds": rounds,
                       "check": True, "reference_dir": reference_dir,
                       "namespace": namespace_name}


def gpu_facts(xp):
    """The GPU and the versions of its software, as CuPy sees them."""
    facts = {"xp": xp.__name__, "xp_version": getattr(xp, "__version__", None)}
    cuda = getattr(xp, "cuda", None)
    if cuda is None:
        facts["gpu"] = "none (a stand-in namespace on the CPU)"
        return facts
    try:
        properties = cuda.runtime.getDeviceProperties(cuda.Device().id)
        name = properties.get("name", b"?")
        facts["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        facts["gpu_memory_mib"] = int(properties.get("totalGlobalMem", 0)) // MIB
        facts["cuda_runtime"] = _cuda_version(cuda.runtime.runtimeGetVersion())
        facts["cuda_driver"] = _cuda_version(cuda.runtime.driverGetVersion())
    except Exception as error:  # noqa: BLE001 - facts for the header only
        facts["gpu"] = f"unknown ({_one_line(error)})"
    return facts


def _cuda_version(number):
    return f"{number // 1000}.{number % 1000 // 10}"


def _peak_label(result):
    peak = result.get("peak_extra_mib")
    if peak is None:
        return "-"
    return ("<=" if result.get("peak_is_upper_bound") else "") + f"{peak:.1f}"


HEADER = ["size", "system", "peak MiB", "gradient ms", "/dev fwd", "/own fwd", "1st call ms",
          "grad err", "fd err", "check"]


def _row(result):
    size = report.size_label(result["params"])
    if result["status"] not in ("ok", "wrong"):
        detail = result.get("detail", "")
        return [size, result["system"], result["status"] + (f": {detail}" if detail else "")]
    checks = result.get("checks") or {}
    if result["system"] == peers.REFERENCE_SYSTEM:
        gradient_error = "ref"
    elif result["system"] == FORWARD_SYSTEM:
        gradient_error = "-"
    else:
        gradient_error = report._error(checks.get("gradient_error"))
    first = result.get("first_call_seconds")
    return [size, result["system"], _peak_label(result),
            report.format_spread(result["gradient_seconds"], 1e3),
            report.format_spread(result["ratios"]), report.format_spread(result["own_ratios"]),
            "-" if first is None else report._number(first * 1e3), gradient_error,
            report._error(checks.get("finite_difference_error")),
            report._check_label(result, LOSS_TOLERANCE)]


def format_tables(results, workload_names, markdown=False):
    """One table per workload, plain text or Markdown."""
    blocks = []
    for name in workload_names:
        rows = [_row(r) for r in results if r["workload"] == name]
        if not rows:
            continue
        workload = WORKLOADS[name]
        title = f"{workload.label} {name}: {workload.summary}"
        if name == "implicit-heat":
            title += " (on the device: A inverted once, the inverse applied in place each step)"
        if markdown:
            lines = [f"**{title}**", "", "| " + " | ".join(HEADER) + " |",
                     "|" + "---|" * len(HEADER)]
            lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in
                                        (row if len(row) == len(HEADER) else
                                         row + [""] * (len(HEADER) - len(row)))) + " |"
                      for row in rows]
        else:
            lines = [title] + report._columns(HEADER, rows)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


LEGEND = """\
How to read the tables (mutad-bench --help says how each figure is measured):
  peak MiB     the most device memory one gradient call needed beyond what was in use before
               it (cupy: one forward call): CuPy's memory pool, torch's allocator, jax's
               device statistics; "<=" an upper bound
  gradient ms  the time of one gradient call, synchronised with the device: median
               [fastest-slowest] over the rounds (cupy: the forward's own)
  /dev fwd     that time in multiples of the device forward (the same code run by CuPy without
               a gradient) in the same round
  /own fwd     the same in multiples of the peer's own forward (torch under no_grad, jax.jit)
  1st call ms  the process's first gradient call (CuPy compiles its kernels on first use; jax's
               compilation is done ahead and not in it)
  grad err     the largest relative difference from mutad-checkpoint's gradient on the device
  fd err       the relative difference from a finite-difference derivative of the device
               forward"""


def header_lines(document):
    facts = document.get("environment", {})
    gpu = facts.get("gpu_facts", {})
    versions = facts.get("versions", {})
    return [
        f"mutad-bench --xp {document.get('xp', 'cupy')} ({document['mode']} sizes) on "
        f"{gpu.get('gpu', '?')} ({gpu.get('gpu_memory_mib', '?')} MiB), CUDA runtime "
        f"{gpu.get('cuda_runtime', '?')}, driver {gpu.get('cuda_driver', '?')}, "
        f"{gpu.get('xp', '?')} {gpu.get('xp_version', '?')}, mutad {versions.get('mutad')}, "
        f"numpy {versions.get('numpy')}, torch {versions.get('torch')}, jax "
        f"{versions.get('jax')}; host {facts.get('cpu')}, {facts.get('processor_count')} "
        f"cores; measured {facts.get('date')} at mutad commit {facts.get('mutad_commit')}",
        "each row is measured in a fresh Python process; every call is followed by a "
        "synchronisation with the device",
        "",
    ]


def format_document(document, workloads, markdown=False):
    """The header, the tables and the legend of a device run's document (what --json
    writes)."""
    return "\n".join([*header_lines(document),
                      format_tables(document["results"], workloads, markdown=markdown), "",
                      LEGEND])


def installed_note():
    missing = [s for s in ("torch", "jax") if not peers.installed(s)]
    if not missing:
        return None
    return ("not installed: " + ", ".join(missing) + " (PyTorch with CUDA: pip install torch; "
            "JAX with CUDA: pip install 'jax[cuda12]')")


if __name__ == "__main__":
    main()
