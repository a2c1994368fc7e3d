"""The measurement protocol, identical for mutad, plain NumPy and every peer.

Each configuration (system, workload, size) runs in a fresh interpreter, started by
:func:`run_in_fresh_interpreter`, which calls :func:`measure` there:

* one compute thread: ``OMP_NUM_THREADS`` and friends are 1 in the child's environment, so its
  BLAS starts with one thread; torch gets ``set_num_threads(1)``, XLA
  ``--xla_cpu_multi_thread_eigen=false`` (see ``peers.py``);
* glibc malloc pinned (:data:`ALLOCATOR_STATES`), so that neither figure depends on what the
  process allocated before: for the warm-up and the peaks, every block of 128 KiB or more is a
  mapping of its own; for the timing, blocks under 32 MiB come from a heap that is never
  trimmed, and every timed call of every system runs on memory already mapped;
* warm-up: the first gradient call of the process, timed on its own (for ``jax.jit`` it
  includes tracing and compiling, for mutad-replay it is the recording), with ``gc.collect()``
  and glibc ``malloc_trim(0)`` before it and after it once its result is dropped, and VmRSS
  read both times: the difference is the memory the system keeps between calls (compiled or
  recorded programs, buffers, caches, modules imported on first use); then one peer forward
  call, one NumPy forward call. mutad-replay's second call, which replays and compiles the
  program's runs of small steps, is timed on its own too, before the second read of VmRSS.
  Its later gradient calls replay the compiled program (or trace again, where mutad cannot
  replay it);
* peak memory: ``gc.collect()``, glibc ``malloc_trim(0)``, read VmRSS, write ``5`` to
  ``/proc/self/clear_refs`` (which resets VmHWM), one gradient call with its result kept alive,
  read VmHWM; extra = VmHWM - VmRSS before. A thread sampling VmRSS every millisecond during
  that call is a cross-check, and the measurement itself where clear_refs cannot be written
  (then the result says ``memory_method: "sampled"``). The same for one NumPy forward call gives
  the plain program's own peak, for scale. The timing rounds come after, so the sampler cannot
  slow them;
* timing: one untimed round of (NumPy forward, gradient, peer forward), which maps in the timing
  state the memory those calls need, then ``rounds`` rounds of the same back to back, and the
  per-round ratios gradient / NumPy forward and gradient / peer forward;
* correctness, after the measurements: the loss against the reference loss, the gradient
  against mutad's checkpoint-policy gradient (max |g - g_ref| / max |g_ref| per input, symmetric
  parts for symmetric matrices), the gradient along a fixed random direction against a
  fourth-order central difference of the NumPy forward, and for mutad the caller's arguments
  bit-for-bit unchanged and the checked result (a later call's: for mutad-replay a replayed
  one) bit-for-bit the first call's.
  The reference gradient and the finite difference are computed once per (workload, size) and
  shared between the children through a directory of ``.npz`` files.

The parent watches each child: past its time limit or memory limit the child is killed and its
row says "timeout" or "out of memory", and the other configurations still run.
"""

import ctypes
import gc
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from mutad.bench import peers
from mutad.bench.workloads import WORKLOADS

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
MIB = 1024 * 1024
RESULT_MARKER = "MUTAD-BENCH-RESULT "

FINITE_DIFFERENCE_STEP = 1e-3
FINITE_DIFFERENCE_TOLERANCE = 1e-6
GRADIENT_TOLERANCE = 1e-8
"""Agreement with mutad's checkpoint gradient that every system must reach. The design asks 1e-10
of mutad's restore policy on well-conditioned programs; peers sum in other orders."""

NUMPY_LOSS_TOLERANCE = 1e-12


# ----------------------------------------------------------------------------------------------
# Memory


def status_kib(field, pid="self"):
    """A ``/proc/<pid>/status`` field such as VmRSS or VmHWM, in KiB (None if absent)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _load_malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


MALLOC_TRIM = _load_malloc_trim()

# glibc malloc's thresholds move with the process's history: the mmap threshold rises after the
# first free of a large block, and the heap is trimmed whenever its free top passes twice that.
# Each child pins them with mallopt (which also turns the dynamic rule off), in one of two states.
M_TRIM_THRESHOLD = -1  # mallopt's parameters (malloc.h)
M_MMAP_THRESHOLD = -3
NEVER = -1  # mallopt's documented trim threshold for "never trim the heap's top"
ALLOCATOR_STATES = {
    # Peak memory: every block of 128 KiB or more (glibc's starting threshold) is mapped and
    # unmapped on its own, so VmRSS counts live blocks. A block freed into the heap stays
    # resident, and the heap does not always reuse it for the next large one: PyTorch's W2
    # peak read 4x the bytes of its saved tensors that way.
    "peak": {M_MMAP_THRESHOLD: 128 * 1024, M_TRIM_THRESHOLD: 128 * 1024},
    # Timing: blocks under 32 MiB (glibc's largest threshold, the one its rule reaches in a
    # process that has freed such a block) come from the heap, which is never trimmed, so every
    # timed call runs on memory already mapped instead of page-faulting fresh blocks, whatever
    # the process did before.
    "timing": {M_MMAP_THRESHOLD: 32 * MIB, M_TRIM_THRESHOLD: NEVER},
}


def _load_mallopt():
    try:
        return ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc: its own allocator, left as it is
        return None


MALLOPT = _load_mallopt()


def pin_allocator(state):
    """Put glibc malloc in ``state`` (a key of :data:`ALLOCATOR_STATES`) for the rest of the
    process; returns its thresholds by name, or None where they cannot be pinned."""
    settings = ALLOCATOR_STATES[state]
    if MALLOPT is None or not all(MALLOPT(parameter, value)
                                  for parameter, value in settings.items()):
        return None
    trim = settings[M_TRIM_THRESHOLD]
    return {"mmap_threshold_bytes": settings[M_MMAP_THRESHOLD],
            "trim_threshold_bytes": None if trim == NEVER else trim}


def release_free_memory():
    """Collect garbage and hand glibc's free heap pages back, so VmRSS counts live data only."""
    gc.collect()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


def reset_peak():
    """Reset VmHWM to the current VmRSS (Linux: writing 5 to clear_refs); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return status_kib("VmHWM") is not None


class RssSampler:
    """Samples VmRSS every millisecond in a thread, keeping the highest value (a cross-check of
    VmHWM that does not depend on the kernel's high-water mark)."""

    def __init__(self, interval=1e-3):
        self.interval = interval
        self.highest_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.highest_kib = max(self.highest_kib, status_kib("VmRSS"))
            self._stop.wait(self.interval)

    def __enter__(self):
        self.highest_kib = status_kib("VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.highest_kib = max(self.highest_kib, status_kib("VmRSS"))


def peak_extra_memory(call):
    """Run ``call()`` once; return its result (kept alive until the peak is read), the peak
    extra memory in MiB, the same from the sampling thread, and the method of the first:
    "VmHWM" where the high-water mark could be reset, otherwise "sampled"."""
    release_free_memory()
    before = status_kib("VmRSS")
    high_water_mark = reset_peak()
    with RssSampler() as sampler:
        result = call()
    sampled = (sampler.highest_kib - before) / 1024
    if not high_water_mark:
        return result, sampled, sampled, "sampled"
    return result, (status_kib("VmHWM") - before) / 1024, sampled, "VmHWM"


# ----------------------------------------------------------------------------------------------
# Correctness


def symmetric_part(g):
    return (g + g.T) / 2


def relative_difference(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")  # NaN compares false with every tolerance: make it fail them
    scale = np.max(np.abs(b)) if b.size else 0.0
    difference = np.max(np.abs(a - b)) if a.size else 0.0
    return float(difference / scale) if scale else float(difference)


def gradient_difference(problem, gradients, reference):
    """Max over the differentiated arguments of the relative difference to ``reference``."""
    worst = 0.0
    for position, g, g_ref in zip(problem.argnums, gradients, reference, strict=True):
        if position in problem.symmetric:
            g, g_ref = symmetric_part(g), symmetric_part(g_ref)
        worst = max(worst, relative_difference(g, g_ref))
    return worst


def directions(problem, seed=0):
    """A fixed random direction per differentiated argument; symmetric for symmetric ones."""
    rng = np.random.default_rng(seed)
    found = []
    for position in problem.argnums:
        v = rng.standard_normal(np.shape(problem.args[position]))
        if position in problem.symmetric:
            v = symmetric_part(v)
        found.append(v * problem.direction_scale.get(position, 1.0))
    return found


def directional_finite_difference(problem, direction, step=FINITE_DIFFERENCE_STEP):
    """Fourth-order central difference of the NumPy forward along ``direction``."""
    at = {}
    for k in (-2, -1, 1, 2):
        args = list(problem.args)
        for position, v in zip(problem.argnums, direction, strict=True):
            args[position] = args[position] + k * step * v  # a new array: args stay as they are
        at[k] = float(problem.numpy_forward(*args))
    return (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * step)


def snapshot(args):
    """The bytes of every argument, to check that mutad handed them back unchanged."""
    return [x.tobytes() if isinstance(x, np.ndarray) else x for x in args]


def fingerprint(value, gradients):
    """A digest of the bits of a loss and its gradients: two calls' results can be compared
    without keeping the first's arrays alive while memory is measured."""
    digest = hashlib.blake2b(np.float64(value).tobytes())
    for g in gradients:
        g = np.asarray(g)
        digest.update(f"{g.dtype.str}{g.shape}".encode())
        digest.update(np.ascontiguousarray(g).tobytes())
    return digest.hexdigest()


def size_key(workload_name, params):
    return workload_name + "-" + "-".join(f"{key}{value}" for key, value in sorted(params.items()))


def shared_reference(problem, workload_name, reference_dir, own_gradients=None, own_system=None):
    """The reference gradient (mutad's checkpoint policy) and the finite difference along the
    fixed direction, computed once per (workload, size) and kept in ``reference_dir``.

    Returns a dict with ``gradients`` (None if mutad could not compute them, and then
    ``gradient_error`` says why) and ``finite_difference``.
    """
    path = Path(reference_dir) / f"{size_key(workload_name, problem.params)}.npz"
    if path.exists():
        with np.load(path) as stored:
            count = int(stored["count"])
            return {
                "gradients": tuple(stored[f"g{i}"] for i in range(count)) if count else None,
                "gradient_error": str(stored["gradient_error"]),
                "finite_difference": float(stored["finite_difference"]),
            }
    gradient_error = ""
    if own_system == peers.REFERENCE_SYSTEM:
        gradients = own_gradients
    else:
        try:
            reference = peers.implementation(peers.REFERENCE_SYSTEM, workload_name, problem)
            gradients = reference.to_numpy(reference.gradient())[1]
        except Exception as error:  # recorded in the row: the other checks still run
            gradients = None
            gradient_error = f"{type(error).__name__}: {error}"
    finite_difference = directional_finite_difference(problem, directions(problem))
    stored = {f"g{i}": g for i, g in enumerate(gradients or ())}
    Path(reference_dir).mkdir(parents=True, exist_ok=True)
    np.savez(path, count=len(gradients or ()), gradient_error=gradient_error,
             finite_difference=finite_difference, **stored)
    return {"gradients": gradients, "gradient_error": gradient_error,
            "finite_difference": finite_difference}


def check(problem, workload_name, system, value, gradients, reference_dir,
          arguments_before=None, first_call=None):
    """Check one system's loss and gradients; returns a dict with ``ok``. ``first_call``, the
    :func:`fingerprint` of an earlier call's result, asks the checked one to be bit-for-bit
    the same."""
    results = {"loss": float(value)}
    reference_loss = problem.reference_loss()
    results["reference_loss"] = reference_loss
    results["loss_error"] = abs(float(value) - reference_loss) / abs(reference_loss)
    numpy_loss = float(problem.numpy_forward(*problem.args))
    results["numpy_loss_error"] = abs(float(value) - numpy_loss) / abs(numpy_loss)
    ok = (results["loss_error"] <= problem.reference_tolerance
          and results["numpy_loss_error"] <= NUMPY_LOSS_TOLERANCE)
    if gradients is None:  # plain NumPy: the loss is all there is to check
        results["ok"] = bool(ok)
        return results

    shared = shared_reference(problem, workload_name, reference_dir, gradients, system)
    along_gradient = sum(float(np.vdot(g, v)) for g, v in
                         zip(gradients, directions(problem), strict=True))
    finite_difference = shared["finite_difference"]
    results["directional_derivative"] = along_gradient
    results["finite_difference"] = finite_difference
    results["finite_difference_error"] = (
        abs(along_gradient - finite_difference) / max(abs(finite_difference), 1e-300)
        if np.isfinite(along_gradient) else float("inf"))
    ok = ok and results["finite_difference_error"] <= FINITE_DIFFERENCE_TOLERANCE
    if shared["gradients"] is not None:
        results["gradient_error"] = gradient_difference(problem, gradients, shared["gradients"])
        ok = ok and results["gradient_error"] <= GRADIENT_TOLERANCE
    else:
        results["gradient_error"] = None
        results["reference_unavailable"] = shared["gradient_error"]
    if arguments_before is not None:
        results["arguments_unchanged"] = snapshot(problem.args) == arguments_before
        ok = ok and results["arguments_unchanged"]
    if first_call is not None:
        results["same_as_first_call"] = fingerprint(value, gradients) == first_call
        ok = ok and results["same_as_first_call"]
    results["ok"] = bool(ok)
    return results


# ----------------------------------------------------------------------------------------------
# One configuration, in this process


CLOCKS = {"process": time.process_time, "wall": time.perf_counter}
"""What times a call (``--clock``): the process's CPU time (on a machine shared with other work,
the time this single-threaded process ran, not the time others took the core from it), or the
wall clock."""


def seconds(call, clock=time.perf_counter):
    """The time of one ``call()`` by ``clock`` (the wall clock unless told)."""
    start = clock()
    call()
    return clock() - start


def measure(configuration):
    """Measure one configuration in the current interpreter (meant to be a fresh one).

    ``configuration``: ``{"system", "workload", "params", "rounds", "check", "reference_dir"}``.
    Returns a JSON-ready dict of raw per-round timings, memory and checks.
    """
    peak_allocator = pin_allocator("peak")
    system = configuration["system"]
    workload = WORKLOADS[configuration["workload"]]
    problem = workload.build(**configuration["params"])
    result = {
        "system": system,
        "workload": workload.name,
        "label": workload.label,
        "params": configuration["params"],
        "version": peers.version(system),
        "status": "ok",
    }
    if workload.behaviour_only:
        found = result["behaviour"] = peers.behaviour(system, problem)
        if system in peers.MUTAD_SYSTEMS and not (
                found["a += b"]["ok"] and found["a[:] += b"]["ok"]
                and not found["caller's a mutated"]):
            result["status"] = "wrong"  # mutad promises all three
        return result

    implementation = peers.implementation(system, workload.name, problem)
    arguments_before = snapshot(problem.args)

    def numpy_forward():
        return problem.numpy_forward(*problem.args)

    first_call_seconds = second_call_seconds = kept_mib = first_call = None
    if implementation is not None:
        release_free_memory()
        resident_before = status_kib("VmRSS")
        start = time.perf_counter()
        native = implementation.gradient()
        first_call_seconds = time.perf_counter() - start
        first_call = fingerprint(*implementation.to_numpy(native))
        del native
        if system in peers.REPLAYS:  # the second call replays and compiles, once
            start = time.perf_counter()
            implementation.gradient()
            second_call_seconds = time.perf_counter() - start
        release_free_memory()
        resident_after = status_kib("VmRSS")
        if resident_before is not None and resident_after is not None:
            kept_mib = (resident_after - resident_before) / 1024
        if implementation.forward is not None:
            implementation.forward()
    numpy_forward()

    value, gradients = numpy_forward(), None
    peak_mib = sampled_mib = None
    if implementation is not None:
        native, peak_mib, sampled_mib, memory_method = peak_extra_memory(
            implementation.gradient)
        value, gradients = implementation.to_numpy(native)
        gradients = tuple(np.array(g) for g in gradients)  # own copies: free the native result
        del native
    numpy_value, numpy_peak_mib, numpy_sampled_mib, numpy_method = peak_extra_memory(
        numpy_forward)
    del numpy_value
    if implementation is None:
        peak_mib, sampled_mib, memory_method = numpy_peak_mib, numpy_sampled_mib, numpy_method

    timing_allocator = pin_allocator("timing")
    calls = [numpy_forward]
    if implementation is not None:
        calls.append(implementation.gradient)
        if implementation.forward is not None:
            calls.append(implementation.forward)

    clock = CLOCKS[configuration.get("clock", "wall")]

    def one_round():
        return [seconds(call, clock) for call in calls]

    one_round()  # untimed: the heap grows to what the calls need
    rounds = [one_round() for _ in range(configuration["rounds"])]
    per_call = [list(times) for times in zip(*rounds, strict=True)]
    numpy_seconds, gradient_seconds, peer_seconds = (per_call + [[], []])[:3]
    if implementation is None:
        gradient_seconds = list(numpy_seconds)  # the row's time is the forward's own

    if implementation is not None and implementation.traced_instead is not None:
        result["traced_instead"] = implementation.traced_instead()
    checks = None
    if configuration.get("check", True):
        mutad_system = system in peers.MUTAD_SYSTEMS
        checks = check(problem, workload.name, system, value, gradients,
                       configuration["reference_dir"],
                       arguments_before if mutad_system else None,
                       first_call if mutad_system else None)
        if not checks["ok"]:
            result["status"] = "wrong"
    result.update({
        "rounds": configuration["rounds"],
        "clock": configuration.get("clock", "wall"),
        "operations": problem.operations,
        "state_mib": problem.state_bytes / MIB,
        "numpy_seconds": numpy_seconds,
        "gradient_seconds": gradient_seconds,
        "peer_forward_seconds": peer_seconds,
        "ratios": [g / n for g, n in zip(gradient_seconds, numpy_seconds, strict=True)],
        "peer_ratios": [g / p for g, p in zip(gradient_seconds, peer_seconds, strict=False)],
        "first_call_seconds": first_call_seconds,
        "second_call_seconds": second_call_seconds,
        "kept_mib": kept_mib,
        "allocator": ({"peak": peak_allocator, "timing": timing_allocator}
                      if peak_allocator and timing_allocator else None),
        "peak_extra_mib": peak_mib,
        "sampled_extra_mib": sampled_mib,
        "numpy_peak_extra_mib": numpy_peak_mib,
        "memory_method": memory_method,
        "checks": checks,
    })
    return result


# ----------------------------------------------------------------------------------------------
# One configuration, in a fresh interpreter


def _outcome_row(configuration, status, detail=""):
    return {"system": configuration["system"], "workload": configuration["workload"],
            "label": WORKLOADS[configuration["workload"]].label,
            "params": configuration["params"], "status": status, "detail": detail}


def run_in_fresh_interpreter(configuration, timeout=3600, memory_limit_mib=None):
    """Measure ``configuration`` in a new Python process with one compute thread.

    The child is killed past ``timeout`` seconds or when its resident memory passes
    ``memory_limit_mib``; the row then has status "timeout" or "out of memory".
    """
    system = configuration["system"]
    if not peers.installed(system):
        return _outcome_row(configuration, "not installed")
    if not peers.has_implementation(system, configuration["workload"]):
        return _outcome_row(configuration, "not implemented")
    environment = dict(os.environ)
    environment.update({variable: "1" for variable in THREAD_VARIABLES})
    return run_child("mutad.bench.harness", configuration, timeout, memory_limit_mib,
                     environment)


def run_child(module, configuration, timeout, memory_limit_mib, environment):
    """Run ``python -m module --child CONFIGURATION`` and return the row it printed after
    :data:`RESULT_MARKER`; a row with status "timeout", "out of memory" or "error" if it was
    stopped or printed none."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", module, "--child", json.dumps(configuration)],
            env=environment, stdout=stdout, stderr=stderr, text=True)
        stopped = _watch(child, timeout, memory_limit_mib)
        stdout.seek(0)
        stderr.seek(0)
        output, errors = stdout.read(), stderr.read()
    if stopped == "timeout":
        return _outcome_row(configuration, "timeout", f"killed after {timeout:g} s")
    if stopped == "memory":
        return _outcome_row(configuration, "out of memory",
                            f"killed above {memory_limit_mib:,.0f} MiB resident")
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    if child.returncode == -signal.SIGKILL or "MemoryError" in errors:
        # SIGKILL from outside is the kernel's out-of-memory killer in practice.
        return _outcome_row(configuration, "out of memory", (errors.strip() or "killed")[-300:])
    last_line = (errors.strip().splitlines() or [""])[-1]
    row = _outcome_row(configuration, "error", last_line or f"exit status {child.returncode}")
    row["stderr"] = errors[-4000:]
    return row


def _watch(child, timeout, memory_limit_mib, interval=0.05):
    """Wait for ``child``; kill it past the limits. Returns None, "timeout" or "memory"."""
    deadline = time.monotonic() + timeout
    while child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            child.wait()
            return "timeout"
        resident = status_kib("VmRSS", child.pid)
        if memory_limit_mib and resident and resident / 1024 > memory_limit_mib:
            child.kill()
            child.wait()
            return "memory"
        time.sleep(interval)
    return None


def run_script_child(script, marker, configuration, timeout):
    """Run ``script --child CONFIGURATION`` (a benchmark script's own measurement of one
    configuration) in a fresh interpreter with one compute thread (BLAS's and XLA's), and
    return the JSON it printed after ``marker``; ``{"status": "timeout"}`` past ``timeout``
    seconds, ``{"status": "error"}`` with the last line of its stderr if it printed none."""
    environment = dict(os.environ)
    environment.update({v: "1" for v in THREAD_VARIABLES})
    environment["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                                "intra_op_parallelism_threads=1")
    environment["JAX_PLATFORMS"] = "cpu"
    try:
        child = subprocess.run([sys.executable, str(Path(script).resolve()), "--child",
                                json.dumps(configuration)], capture_output=True, text=True,
                               env=environment, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "detail": f"killed after {timeout:g} s"}
    for line in child.stdout.splitlines():
        if line.startswith(marker):
            return json.loads(line[len(marker):])
    return {"status": "error", "detail": (child.stderr.strip().splitlines() or ["?"])[-1]}


def default_memory_limit_mib():
    """Nine tenths of the memory available now: a child past it would push the machine into
    swap or the kernel's out-of-memory killer, and the other rows could not run."""
    available = None
    try:
        with open("/proc/meminfo") as meminfo:
            match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo.read(), re.MULTILINE)
            available = int(match.group(1)) if match else None
    except OSError:
        pass
    return 0.9 * available / 1024 if available else None


# ----------------------------------------------------------------------------------------------
# Summaries


def spread(values):
    """``(median, min, max)`` of a list of numbers."""
    return statistics.median(values), min(values), max(values)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        sys.exit("usage: python -m mutad.bench.harness --child '<configuration as JSON>' "
                 "(started by mutad-bench)")
    print(RESULT_MARKER + json.dumps(measure(json.loads(sys.argv[2]))), flush=True)


if __name__ == "__main__":
    main()
