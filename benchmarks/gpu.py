"""Everything to measure on a machine with a GPU, in one go, into benchmarks/RESULTS-gpu.md.

    python benchmarks/gpu.py                  # from the repository's root, on a GPU machine

1. ``mutad-bench --xp cupy``, one workload at a time (W2, W3, W5, W6 at sizes that fill a GPU;
   mutad's policies, the device forward "cupy", and PyTorch on cuda and JAX on its GPU where
   they can be imported), 3 rounds each;
2. the CuPy-marked tests, ``python -m pytest -q -m cupy tests/test_cupy.py``, with the time
   that is left;
3. benchmarks/RESULTS-gpu.md written from what was measured (the machine, the versions, the
   method, the tables, the tests' outcome), and benchmarks/results-gpu.json with every
   measurement. The file is written again after each part, so a part that fails or runs out
   of time loses nothing the others measured, and says what happened to it.

Time budget: --budget seconds in all, 570 by default (under 10 minutes on an H200): each
workload gets at most a quarter of the benchmark's share (360 s) and what the workloads
before it left, each configuration at most 90 s and a third of its workload's share; the tests get what is left, at least 180 s. Where cupy cannot be imported or finds no
GPU, the script says so and writes nothing.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mutad.bench import device, report  # noqa: E402
from mutad.bench.workloads import WORKLOADS  # noqa: E402

BUDGET = 570.0
BENCH_SHARE = 360.0
CONFIGURATION_TIMEOUT = 90.0
TESTS_AT_LEAST = 180.0
ROUNDS = 3


def versions():
    found = {"python": platform.python_version()}
    for name in ("numpy", "scipy", "cupy", "cupy-cuda12x", "cupy-cuda11x", "torch", "jax",
                 "jaxlib", "jax-cuda12-plugin"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def nvidia_smi():
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,"
                               "clocks.max.sm", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_logged(command, timeout, log):
    """Run ``command`` with its output in file ``log``; (exit status or "timeout", seconds)."""
    start = time.monotonic()
    with open(log, "w") as out:
        child = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            status = child.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            child.wait()
            status = "timeout"
    return status, time.monotonic() - start


def tail(path, lines=25):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def write(path, state):
    """RESULTS-gpu.md from what was measured so far."""
    facts = state["facts"]
    out = ["# mutad on a GPU: measured results", "",
           f"Written by `benchmarks/gpu.py` on {facts['date']} (mutad commit "
           f"{facts.get('mutad_commit')}); every figure below was measured by that run. "
           f"Its budget was {state['budget']:.0f} s; it took {state['elapsed']:.0f} s.", "",
           "## Machine", "",
           f"* GPU (nvidia-smi): {facts.get('nvidia_smi') or 'nvidia-smi not found'}",
           f"* GPU (CuPy): {facts['gpu'].get('gpu')}, {facts['gpu'].get('gpu_memory_mib')} MiB, "
           f"CUDA runtime {facts['gpu'].get('cuda_runtime')}, driver "
           f"{facts['gpu'].get('cuda_driver')}",
           f"* host: {facts.get('cpu')}, {facts.get('processor_count')} cores, "
           f"{facts.get('memory_total_mib')} MiB, {facts.get('platform')}",
           "* versions: " + ", ".join(f"{k} {v}" for k, v in facts["versions"].items()), "",
           "## Benchmark: `mutad-bench --xp cupy`", ""]
    bench = state["bench"]
    results = [r for part in bench for r in part.get("results", [])]
    if results:
        names = [n for n in device.WORKLOAD_NAMES if any(r["workload"] == n for r in results)]
        out += [device.format_tables(results, names, markdown=True), "", "```text",
                device.LEGEND, "```", ""]
    for part in bench:
        if part["status"] != 0:
            out += [f"`{' '.join(part['command'])}` ended with {part['status']} after "
                    f"{part['seconds']:.0f} s; its last lines:", "", "```text", part["tail"],
                    "```", ""]
    if not bench:
        out += ["Not run.", ""]
    out += ["Method: " + device.METHOD, ""]
    out += ["## Tests: `python -m pytest -q -m cupy tests/test_cupy.py`", ""]
    tests = state.get("tests")
    if tests is None:
        out += ["Not run (no time was left, or the run stopped before).", ""]
    else:
        out += [f"Exit status {tests['status']} after {tests['seconds']:.0f} s "
                f"(limit {tests['limit']:.0f} s). The last lines:", "", "```text",
                tests["tail"], "```", ""]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(out))
    with open(Path(path).with_name("results-gpu.json"), "w") as raw:
        json.dump({"facts": facts, "bench": bench, "tests": tests,
                   "method": device.METHOD}, raw, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=BUDGET,
                        help="seconds for the whole run (default %(default)g)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS-gpu.md"))
    options = parser.parse_args(argv)
    started = time.monotonic()
    try:
        xp = device.find_cupy()
    except device.NoDevice as error:
        print(f"benchmarks/gpu.py: no GPU to measure on: {error}; nothing written",
              file=sys.stderr)
        return 2
    facts = report.environment()
    facts.update({"gpu": device.gpu_facts(xp), "nvidia_smi": nvidia_smi(),
                  "versions": versions()})
    state = {"facts": facts, "budget": options.budget, "elapsed": 0.0, "bench": [],
             "tests": None}
    logs = Path(tempfile.mkdtemp(prefix="mutad-gpu-"))

    def left():
        return options.budget - (time.monotonic() - started)

    bench_until = min(BENCH_SHARE, options.budget - TESTS_AT_LEAST)
    for index, name in enumerate(device.WORKLOAD_NAMES):
        share = (bench_until - (time.monotonic() - started)) / (len(device.WORKLOAD_NAMES)
                                                               - index)
        if share < 20:
            break
        saved = logs / f"{name}.json"
        command = [sys.executable, "-m", "mutad.bench", "--xp", "cupy", "--workloads", name,
                   "--systems", "mutad-restore,mutad-checkpoint,cupy,torch,jax",
                   "--reps", str(ROUNDS),
                   # a configuration that hangs is stopped in time for the others' rows
                   "--timeout", f"{max(20.0, min(CONFIGURATION_TIMEOUT, share / 3)):.0f}",
                   "--no-progress", "--no-save", "--json", str(saved)]
        print(f"gpu.py: {WORKLOADS[name].label} {name}, at most {share:.0f} s", flush=True)
        status, seconds = run_logged(command, share, logs / f"{name}.log")
        part = {"workload": name, "command": command[2:], "status": status,
                "seconds": seconds, "tail": tail(logs / f"{name}.log")}
        if saved.exists():
            part["results"] = json.loads(saved.read_text())["results"]
            part["status"] = 0 if status in (0, 1) else status  # 1: a row is wrong: shown
        state["bench"].append(part)
        state["elapsed"] = time.monotonic() - started
        write(options.out, state)

    limit = left()
    if limit >= 30:
        print(f"gpu.py: the cupy tests, at most {limit:.0f} s", flush=True)
        status, seconds = run_logged([sys.executable, "-m", "pytest", "-q", "-p",
                                      "no:cacheprovider", "-m", "cupy", "tests/test_cupy.py"],
                                     limit, logs / "tests.log")
        state["tests"] = {"status": status, "seconds": seconds, "limit": limit,
                          "tail": tail(logs / "tests.log")}
    state["elapsed"] = time.monotonic() - started
    write(options.out, state)
    print(f"gpu.py: wrote {options.out} and {Path(options.out).with_name('results-gpu.json')} "
          f"in {state['elapsed']:.0f} s (logs in {logs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
