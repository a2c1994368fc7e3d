"""mutad-bench: the memory and time of a gradient through in-place NumPy code, for mutad's
policies traced on every call (restore, checkpoint, restore with a memory budget) and recorded
once then replayed (mutad-replay, timed after its first call, which is reported on its own),
plain NumPy and the peers a user would pick instead (PyTorch eager, JAX jit, HIPS autograd), on
the workloads W1-W6 and heat-scalar.

    mutad-bench                                   # the quick suite: mutad and NumPy, < 1 minute
    mutad-bench --full --systems all              # the full sizes, every installed peer
    mutad-bench --workloads leapfrog,implicit-heat --steps 10,100,1000 --systems all
    mutad-bench --full --json run.json --csv run.csv --plot memory.png
"""

import argparse
import json
import sys
import tempfile
import time

from mutad.bench import harness, peers, report
from mutad.bench.workloads import DEFAULT_WORKLOADS, WORKLOADS

QUICK_SYSTEMS = (*peers.MUTAD_SYSTEMS, "numpy")
STEPPED_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.steps_parameter)
ROUNDS = {"full": {"small-ops": 21}, "quick": {"small-ops": 7}}
DEFAULT_ROUNDS = {"full": 5, "quick": 3}
TIMEOUT = {"full": 3600.0, "quick": 300.0}
PROGRESS_AFTER_SECONDS = 3.0


class UsageError(Exception):
    """An option value the parser accepted but the run cannot use; exits with status 2."""


def _comma_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def _positive_integers(text):
    try:
        values = [int(item.replace("_", "")) for item in _comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}") from None
    if not values or any(value <= 0 for value in values):
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}")
    return values


def _positive_integer(text):
    values = _positive_integers(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return values[0]


def _positive_number(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def parser():
    labels = {workload.label.lower(): name for name, workload in WORKLOADS.items()}
    workload_help = ", ".join(f"{name} ({w.label})" for name, w in WORKLOADS.items())
    result = argparse.ArgumentParser(
        prog="mutad-bench",
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=report.FIGURES + "\nThe method: " + report.METHOD,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("--full", action="store_true",
                        help="the full sizes and rounds, every system unless --systems "
                             "says otherwise (many minutes; W2 at T=1000 needs GiBs for the "
                             "peers)")
    result.add_argument("--workloads", type=_comma_list, metavar="NAMES",
                        help=f"comma-separated workloads, by name or label: {workload_help} "
                             f"(default: W1-W6 and heat-scalar)")
    result.add_argument("--systems", type=_comma_list, metavar="NAMES",
                        help="comma-separated systems: " + ", ".join(peers.SYSTEMS)
                             + "; 'all' for every one, 'mutad' for mutad's, 'peers' for "
                               "torch,jax,autograd (default: mutad's and numpy; with --full, "
                               "all)")
    result.add_argument("--steps", type=_positive_integers, metavar="T,...",
                        help="time steps T for the workloads that have them ("
                             + ", ".join(STEPPED_WORKLOADS) + "), e.g. 10,100,1000")
    result.add_argument("--n", type=_positive_integers, metavar="N,...",
                        help="problem sizes n for the workloads that have one (all but "
                             "small-ops)")
    result.add_argument("--reps", type=_positive_integer, metavar="R",
                        help="timing rounds per configuration (default 3, 7 for small-ops; "
                             "with --full 5 and 21)")
    result.add_argument("--timeout", type=_positive_number, metavar="SECONDS",
                        help="limit per configuration; a slower one is reported as 'timeout' "
                             "(default 300, with --full 3600)")
    result.add_argument("--memory-limit", type=_positive_number, metavar="MiB",
                        help="resident memory a configuration may reach before it is stopped "
                             "and reported as 'out of memory' (default: 90%% of the memory "
                             "available at the start)")
    result.add_argument("--json", metavar="FILE", help="write every raw measurement to FILE")
    result.add_argument("--csv", metavar="FILE", help="write one row per configuration to FILE")
    result.add_argument("--plot", metavar="FILE.png",
                        help="plot peak memory against T per system, one panel per workload "
                             "(needs matplotlib: pip install 'mutad[bench]')")
    result.add_argument("--markdown", action="store_true",
                        help="print the tables as Markdown (as in benchmarks/RESULTS.md)")
    result.add_argument("--no-progress", action="store_true", help="no progress bar")
    result.set_defaults(labels=labels)
    return result


def _resolve(options):
    """Check the option values against each other; raise UsageError with the fix."""
    mode = "full" if options.full else "quick"
    workloads = []
    for item in options.workloads or DEFAULT_WORKLOADS:
        name = options.labels.get(item.lower(), item)
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {item!r}; choose from "
                             + ", ".join(f"{n} ({w.label})" for n, w in WORKLOADS.items()))
        if name not in workloads:
            workloads.append(name)

    systems = []
    for item in options.systems or (list(peers.SYSTEMS) if options.full else QUICK_SYSTEMS):
        expanded = {"all": peers.SYSTEMS, "peers": tuple(peers.PEER_MODULES),
                    "mutad": peers.MUTAD_SYSTEMS}.get(item, (item,))
        for system in expanded:
            if system not in peers.SYSTEMS:
                raise UsageError(f"unknown system {system!r}; choose from "
                                 + ", ".join(peers.SYSTEMS) + ", all, peers, mutad")
            if system not in systems:
                systems.append(system)
    systems.sort(key=peers.SYSTEMS.index)

    if options.steps and not any(WORKLOADS[n].steps_parameter for n in workloads):
        raise UsageError("--steps applies to " + ", ".join(STEPPED_WORKLOADS)
                         + ", none of which was chosen")
    if options.n and not any(WORKLOADS[n].n_parameter for n in workloads):
        raise UsageError("--n applies to every workload but small-ops, and only small-ops "
                         "was chosen")
    return mode, workloads, systems


def sizes(workload, mode, steps=None, n=None):
    """The parameter sets to run: the mode's defaults, with --steps and --n replacing theirs."""
    defaults = workload.sizes[mode]
    replacements = {}
    if steps and workload.steps_parameter:
        replacements[workload.steps_parameter] = steps
    if n and workload.n_parameter:
        replacements[workload.n_parameter] = n
    if not replacements:
        return [dict(params) for params in defaults]
    found = []
    for params in defaults:
        combinations = [dict(params)]
        for key, values in replacements.items():
            combinations = [{**c, key: value} for c in combinations for value in values]
        for combination in combinations:
            if combination not in found:
                found.append(combination)
    return found


def configurations(mode, workloads, systems, options, reference_dir):
    """Every (workload, size, system) to run, the reference system first within each size so
    that its gradient is the one the others are compared with."""
    ordered = sorted(systems, key=lambda s: (s != peers.REFERENCE_SYSTEM, peers.SYSTEMS.index(s)))
    for name in workloads:
        rounds = options.reps or ROUNDS[mode].get(name, DEFAULT_ROUNDS[mode])
        for params in sizes(WORKLOADS[name], mode, options.steps, options.n):
            for system in ordered:
                yield {"system": system, "workload": name, "params": params, "rounds": rounds,
                       "check": True, "reference_dir": reference_dir}


class Progress:
    """A progress bar on stderr (tqdm, from the ``bench`` extra) that appears only once a run
    has taken a few seconds; without tqdm, one line per configuration after that."""

    def __init__(self, total, enabled=True):
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.started = time.monotonic()
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, delay=PROGRESS_AFTER_SECONDS, unit="run",
                                file=sys.stderr, leave=False, disable=None)

    def describe(self, configuration):
        text = (f"{configuration['workload']} {report.size_label(configuration['params'])} "
                f"{configuration['system']}")
        if self.bar is not None:
            self.bar.set_description_str(text, refresh=False)
        elif self.enabled and time.monotonic() - self.started > PROGRESS_AFTER_SECONDS:
            print(f"  [{self.done + 1}/{self.total}] {text}", file=sys.stderr, flush=True)

    def advance(self):
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run(options):
    mode, workloads, systems = _resolve(options)
    if options.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'mutad[bench]' "
                             "(or pip install matplotlib)") from None
    timeout = options.timeout or TIMEOUT[mode]
    memory_limit = options.memory_limit or harness.default_memory_limit_mib()

    results = []
    with tempfile.TemporaryDirectory(prefix="mutad-bench-") as reference_dir:
        plan = list(configurations(mode, workloads, systems, options, reference_dir))
        progress = Progress(len(plan), enabled=not options.no_progress)
        try:
            for configuration in plan:
                progress.describe(configuration)
                result = harness.run_in_fresh_interpreter(configuration, timeout, memory_limit)
                results.append(result)
                progress.advance()
        finally:
            progress.close()
    report.annotate_first_calls(results)

    facts = report.environment()
    memory_methods = {r.get("memory_method") for r in results} - {None}
    timed = [r for r in results if r.get("gradient_seconds")]
    pinned = all(r.get("allocator") for r in timed)
    print(f"mutad-bench ({mode} sizes; each row a fresh interpreter with one compute thread"
          + ("; glibc malloc pinned: for peaks every block of 128 KiB or more mapped on its own, "
             "for times blocks under 32 MiB from a heap never trimmed" if pinned else "")
          + "; the first gradient call timed on its own, for mutad-replay the recording; "
            "an untimed round, then times and ratios: median [min-max] over rounds)")
    if not pinned:
        print("note: malloc's thresholds could not be pinned here (not glibc); a time can depend "
              "on what its process allocated before (fresh pages or reused ones), and a peak on "
              "how the allocator keeps freed memory")
    if "sampled" in memory_methods:
        print("note: /proc/self/clear_refs could not reset VmHWM here; peak memory comes from "
              "a thread sampling VmRSS every millisecond, which can miss short peaks")
    print()
    tables = (report.format_markdown if options.markdown else report.format_results)
    print(tables(results, workloads))
    print()
    replay = report.format_replay(results, workloads, markdown=options.markdown)
    if replay:
        print(replay)
        print()
    missing = [s for s in peers.PEER_MODULES if not peers.installed(s)]
    unused = [s for s in peers.PEER_MODULES if peers.installed(s) and s not in systems]
    if missing:
        print("not installed: " + ", ".join(missing)
              + " (pip install 'mutad[peers]'; PyTorch: pip install torch==2.13.0)")
    if unused:
        print("installed but not run: " + ", ".join(unused) + " (add --systems all)")
    print("peak MiB: VmHWM during one gradient call minus VmRSS before it; gradient/NumPy fwd: "
          "per-round ratio; grad err: vs mutad's checkpoint policy; fd err: vs finite "
          "differences (mutad-bench --help explains each figure)")

    if options.json:
        with open(options.json, "w") as out:
            json.dump({"schema": report.SCHEMA, "command": ["mutad-bench", *options.argv],
                       "mode": mode, "method": report.METHOD, "environment": facts,
                       "results": results}, out, indent=1)
    if options.csv:
        report.write_csv(options.csv, results, facts)
    if options.plot:
        report.plot(options.plot, results, workloads)

    broken = [r for r in results if r["status"] in ("wrong", "error")]
    for row in broken:
        found = row.get("detail") or row.get("checks") or row.get("behaviour")
        print(f"{row['status'].upper()}: {row['workload']} {report.size_label(row['params'])} "
              f"{row['system']}: {found}", file=sys.stderr)
    return 1 if broken else 0


def main(argv=None):
    """Run mutad-bench; returns the exit status (2 for bad arguments, 1 if a row is wrong)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    argument_parser = parser()
    options = argument_parser.parse_args(argv)
    options.argv = argv
    try:
        return run(options)
    except UsageError as error:
        argument_parser.error(str(error))


if __name__ == "__main__":
    sys.exit(main())
