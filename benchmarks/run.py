"""Run the benchmark workloads against plain NumPy and print one table per workload.

    python benchmarks/run.py                  # full sizes (BENCHMARKS.md): a few minutes
    python benchmarks/run.py --quick          # smaller sizes, fewer rounds: under a minute
    python benchmarks/run.py --json out.json  # also write every raw measurement
    python benchmarks/run.py --workload small-ops --policy restore

Every (workload, size, policy) is measured in its own fresh interpreter, one after another, by
``harness.py``; see its docstring for the protocol. The exit status is non-zero if any
configuration failed or gave a wrong loss or gradient.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.harness import (  # noqa: E402
    POLICIES,
    format_table,
    run_in_fresh_interpreter,
)
from benchmarks.workloads import REPOSITORY, WORKLOADS  # noqa: E402

# BENCHMARKS.md: 21 rounds for the per-op workload, 5 for the others.
ROUNDS = {"full": {"small-ops": 21}, "quick": {"small-ops": 7}}
DEFAULT_ROUNDS = {"full": 5, "quick": 3}


def configurations(mode, workloads, policies):
    for name in workloads:
        for params in WORKLOADS[name].sizes[mode]:
            for policy in policies:
                yield {
                    "workload": name,
                    "params": params,
                    "policy": policy,
                    "rounds": ROUNDS[mode].get(name, DEFAULT_ROUNDS[mode]),
                    "check": True,
                }


def environment():
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "processor_count": len(os.sched_getaffinity(0)),
        "mutad_commit": commit,
        "threads": 1,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and fewer rounds (under a minute)")
    parser.add_argument("--json", metavar="FILE", help="write every measurement to FILE")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                        help="run only this workload (may be repeated)")
    parser.add_argument("--policy", action="append", choices=POLICIES,
                        help="run only this policy (may be repeated)")
    options = parser.parse_args(argv)
    mode = "quick" if options.quick else "full"
    names = options.workload or list(WORKLOADS)
    policies = options.policy or list(POLICIES)

    results = []
    for configuration in configurations(mode, names, policies):
        print(f"  measuring {configuration['workload']} {configuration['params']} "
              f"policy={configuration['policy']} ...", file=sys.stderr, flush=True)
        results.append(run_in_fresh_interpreter(configuration))

    print(f"mutad vs plain NumPy ({mode} mode, one compute thread, each row a fresh "
          "interpreter; times and ratios: median [min-max] over rounds)")
    for name in names:
        print()
        print(format_table(WORKLOADS[name], [r for r in results if r["workload"] == name]))

    if options.json:
        with open(options.json, "w") as out:
            json.dump({"mode": mode, "environment": environment(), "results": results}, out,
                      indent=1)
    failures = [r for r in results if "error" in r or not (r["checks"] or {}).get("ok", True)]
    for failure in failures:
        print(f"\nFAILED: {failure['workload']} {failure['params']} policy={failure['policy']}: "
              f"{failure.get('error') or failure['checks']}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
