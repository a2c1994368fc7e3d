"""The measurement protocol of BENCHMARKS.md, for mutad against plain NumPy.

Each configuration (workload, size, policy) runs in a fresh interpreter, started by
:func:`run_in_fresh_interpreter`, which calls :func:`measure` there:

* one compute thread: ``OMP_NUM_THREADS`` and friends are set to 1 before NumPy is imported
  (here at import time, and in the child's environment);
* warm-up: one gradient call and one NumPy forward call;
* peak memory: ``gc.collect()``, glibc ``malloc_trim(0)``, read VmRSS, write ``5`` to
  ``/proc/self/clear_refs`` (which resets VmHWM), one gradient call with its result kept alive,
  read VmHWM; extra = VmHWM - VmRSS before. A thread sampling VmRSS every millisecond during
  that call is a cross-check. The same for one NumPy forward call gives the plain program's own
  peak, for scale. The timing rounds come after, so the sampler cannot slow them;
* timing: ``rounds`` rounds of (NumPy forward, gradient) back to back, and the per-round ratio
  gradient / NumPy forward, reported as median [min-max];
* correctness, after the measurements: the loss against the reference, the gradient along a
  fixed random direction against a fourth-order central difference of the NumPy forward, the
  gradient against the other policy's, and the caller's arguments bit-for-bit unchanged.

Run directly (``python benchmarks/harness.py --child '{json}'``) it is the child process: it
measures one configuration and prints the result as one JSON line.
"""

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _variable in THREAD_VARIABLES:
    os.environ[_variable] = "1"  # before NumPy is imported, or its BLAS has already started

import ctypes  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import mutad  # noqa: E402
from benchmarks.workloads import WORKLOADS  # noqa: E402

POLICIES = ("restore", "checkpoint")
MIB = 1024 * 1024
RESULT_MARKER = "MUTAD-BENCH-RESULT "

FINITE_DIFFERENCE_STEP = 1e-3
FINITE_DIFFERENCE_TOLERANCE = 1e-6
POLICY_TOLERANCE = 1e-10  # DESIGN.md: restore agrees with checkpoint to 1e-10 relative
NUMPY_LOSS_TOLERANCE = 1e-12


# ----------------------------------------------------------------------------------------------
# Memory


def status_kib(field):
    """A ``/proc/self/status`` field such as VmRSS or VmHWM, in KiB."""
    with open("/proc/self/status") as status:
        match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    return int(match.group(1))


def _load_malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


MALLOC_TRIM = _load_malloc_trim()


def release_free_memory():
    """Collect garbage and hand glibc's free heap pages back, so VmRSS counts live data only."""
    gc.collect()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


def reset_peak():
    """Reset VmHWM to the current VmRSS (Linux: writing 5 to clear_refs)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


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
    """Run ``call()`` once; return its result (kept alive until VmHWM is read), the peak extra
    memory in MiB from VmHWM, and the same from the sampling thread."""
    release_free_memory()
    before = status_kib("VmRSS")
    reset_peak()
    with RssSampler() as sampler:
        result = call()
    highest = status_kib("VmHWM")
    return result, (highest - before) / 1024, (sampler.highest_kib - before) / 1024


# ----------------------------------------------------------------------------------------------
# Correctness


def relative_difference(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = np.max(np.abs(b)) if b.size else 0.0
    difference = np.max(np.abs(a - b)) if a.size else 0.0
    return float(difference / scale) if scale else float(difference)


def moved(args, argnums, displacement):
    """``args`` with ``displacement`` added to the differentiated argument (a new array)."""
    args = list(args)
    args[argnums] = args[argnums] + displacement
    return tuple(args)


def directional_finite_difference(problem, direction, step=FINITE_DIFFERENCE_STEP):
    """Fourth-order central difference of the NumPy forward along ``direction``."""
    at = {}
    for k in (-2, -1, 1, 2):
        args = moved(problem.args, problem.argnums, k * step * direction)
        at[k] = float(problem.numpy_forward(*args))
    return (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * step)


def snapshot(args):
    """The bytes of every argument, to check that mutad handed them back unchanged."""
    return [x.tobytes() if isinstance(x, np.ndarray) else x for x in args]


def check(problem, policy, value=None, gradient=None, arguments_before=None,
          compare_policies=True, seed=0):
    """Check mutad's loss and gradient for ``problem``; returns a dict with ``ok``.

    ``value`` and ``gradient`` may be passed together when already computed (the measurement
    keeps the ones of its memory pass), with ``arguments_before`` (:func:`snapshot` of the
    arguments before any differentiation); otherwise they are computed here.
    """
    if arguments_before is None:
        arguments_before = snapshot(problem.args)
    if gradient is None or value is None:
        value, gradient = mutad.value_and_gradient(
            problem.loss, *problem.args, argnums=problem.argnums, policy=policy)

    results = {"loss": float(value)}
    reference = problem.reference_loss()
    results["reference_loss"] = reference
    results["loss_error"] = abs(float(value) - reference) / abs(reference)
    numpy_loss = float(problem.numpy_forward(*problem.args))
    results["numpy_loss_error"] = abs(float(value) - numpy_loss) / abs(numpy_loss)

    x = problem.args[problem.argnums]
    direction = np.random.default_rng(seed).standard_normal(np.shape(x))
    along_gradient = float(np.vdot(gradient, direction))
    finite_difference = directional_finite_difference(problem, direction)
    results["directional_derivative"] = along_gradient
    results["finite_difference"] = finite_difference
    results["finite_difference_error"] = (
        abs(along_gradient - finite_difference) / max(abs(finite_difference), 1e-300))

    ok = (results["loss_error"] <= problem.reference_tolerance
          and results["numpy_loss_error"] <= NUMPY_LOSS_TOLERANCE
          and results["finite_difference_error"] <= FINITE_DIFFERENCE_TOLERANCE)
    if compare_policies:
        other = POLICIES[1 - POLICIES.index(policy)]
        other_gradient = mutad.gradient(
            problem.loss, *problem.args, argnums=problem.argnums, policy=other)
        results["policy_difference"] = relative_difference(gradient, other_gradient)
        ok = ok and results["policy_difference"] <= POLICY_TOLERANCE
    results["arguments_unchanged"] = snapshot(problem.args) == arguments_before
    results["ok"] = bool(ok and results["arguments_unchanged"])
    return results


# ----------------------------------------------------------------------------------------------
# One configuration, in this process


def measure(configuration):
    """Measure one configuration in the current interpreter (meant to be a fresh one).

    ``configuration``: ``{"workload": name, "params": {...}, "policy": ..., "rounds": int,
    "check": bool}``. Returns a JSON-ready dict of raw per-round timings, memory and checks.
    """
    workload = WORKLOADS[configuration["workload"]]
    policy = configuration["policy"]
    problem = workload.build(**configuration["params"])
    arguments_before = snapshot(problem.args)

    def differentiate():
        return mutad.value_and_gradient(
            problem.loss, *problem.args, argnums=problem.argnums, policy=policy)

    differentiate()
    problem.numpy_forward(*problem.args)

    (value, gradient), peak_mib, sampled_mib = peak_extra_memory(differentiate)
    # The plain forward's own peak, for scale: what the program needs without any AD.
    _, numpy_peak_mib, _ = peak_extra_memory(lambda: problem.numpy_forward(*problem.args))

    numpy_seconds, gradient_seconds = [], []
    for _ in range(configuration["rounds"]):
        start = time.perf_counter()
        problem.numpy_forward(*problem.args)
        middle = time.perf_counter()
        mutad.gradient(problem.loss, *problem.args, argnums=problem.argnums, policy=policy)
        end = time.perf_counter()
        numpy_seconds.append(middle - start)
        gradient_seconds.append(end - middle)

    checks = None
    if configuration.get("check", True):
        # Only one policy's child compares the two, so each comparison runs once.
        checks = check(problem, policy, value=value, gradient=gradient,
                       arguments_before=arguments_before, compare_policies=policy == "restore")
    return {
        "workload": workload.name,
        "label": workload.label,
        "params": configuration["params"],
        "policy": policy,
        "rounds": configuration["rounds"],
        "operations": problem.operations,
        "state_mib": problem.state_bytes / MIB,
        "numpy_seconds": numpy_seconds,
        "gradient_seconds": gradient_seconds,
        "ratios": [g / n for g, n in zip(gradient_seconds, numpy_seconds, strict=True)],
        "peak_extra_mib": peak_mib,
        "numpy_peak_extra_mib": numpy_peak_mib,
        "sampled_extra_mib": sampled_mib,
        "checks": checks,
    }


# ----------------------------------------------------------------------------------------------
# One configuration, in a fresh interpreter


def run_in_fresh_interpreter(configuration, timeout=3600):
    """Measure ``configuration`` in a new Python process with one compute thread."""
    environment = dict(os.environ)
    environment.update({variable: "1" for variable in THREAD_VARIABLES})
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(configuration)],
        env=environment, capture_output=True, text=True, timeout=timeout)
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    last_line = (completed.stderr.strip().splitlines() or [""])[-1]
    return {
        "workload": configuration["workload"],
        "params": configuration["params"],
        "policy": configuration["policy"],
        "error": last_line or f"exit status {completed.returncode}",
        "stderr": completed.stderr[-4000:],
    }


# ----------------------------------------------------------------------------------------------
# Reporting


def spread(values):
    """``(median, min, max)`` of a list of numbers."""
    return statistics.median(values), min(values), max(values)


def _number(value):
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_spread(values, scale=1.0):
    median, low, high = spread([v * scale for v in values])
    return f"{_number(median)} [{_number(low)}-{_number(high)}]"


def _time_scale(result, unit):
    """Factor from seconds to the workload's time unit."""
    if unit == "us/op":
        return 1e6 / result["operations"]
    return 1e3


def _size_label(params):
    return " ".join(f"{key}={value:,}" if isinstance(value, int) else f"{key}={value}"
                    for key, value in params.items())


def _check_label(checks):
    if checks is None:
        return "not checked"
    label = "ok" if checks["ok"] else "FAILED"
    details = [f"loss {checks['loss_error']:.0e}", f"fd {checks['finite_difference_error']:.0e}"]
    if "policy_difference" in checks:
        details.append(f"policies {checks['policy_difference']:.0e}")
    if not checks["arguments_unchanged"]:
        details.append("arguments changed")
    return f"{label} ({', '.join(details)})"


def _extra_per_state(result):
    # Below a MiB the peak is page-granular allocator noise, not a multiple of anything.
    if result["peak_extra_mib"] < 1:
        return "-"
    return f"{result['peak_extra_mib'] / result['state_mib']:.3g}"


def format_table(workload, results):
    """A plain-text table of one workload's results, one row per configuration."""
    unit = workload.time_unit
    header = ["size", "policy", f"NumPy fwd {unit}", f"gradient {unit}", "gradient/NumPy",
              "peak extra MiB", "sampled MiB", "NumPy fwd MiB", "extra/state", "check"]
    rows = []
    for result in results:
        if "error" in result:
            rows.append([_size_label(result["params"]), result["policy"], "-", "-", "-", "-",
                         "-", "-", "-", f"ERROR: {result['error']}"])
            continue
        scale = _time_scale(result, unit)
        rows.append([
            _size_label(result["params"]),
            result["policy"],
            format_spread(result["numpy_seconds"], scale),
            format_spread(result["gradient_seconds"], scale),
            format_spread(result["ratios"]),
            f"{result['peak_extra_mib']:.1f}",
            f"{result['sampled_extra_mib']:.1f}",
            f"{result['numpy_peak_extra_mib']:.1f}",
            _extra_per_state(result),
            _check_label(result["checks"]),
        ])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"{workload.label} {workload.name}: {workload.summary}",
             "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.append("peak extra MiB: VmHWM during one gradient call minus VmRSS before it "
                 "(sampled: the same from 1 ms VmRSS samples);")
    lines.append("NumPy fwd MiB: the same for one plain forward call; extra/state: peak extra "
                 "in multiples of the differentiated input's size")
    return "\n".join(line.rstrip() for line in lines)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        sys.exit("usage: harness.py --child '<configuration as JSON>' (started by run.py)")
    print(RESULT_MARKER + json.dumps(measure(json.loads(sys.argv[2]))))
