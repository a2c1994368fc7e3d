"""mutad-bench: the memory and time of a gradient through in-place NumPy code, for mutad's
policies traced on every call (restore, checkpoint, restore with a memory budget) and recorded
once then replayed (mutad-replay, timed after its first call, which is reported on its own),
plain NumPy and the peers a user would pick instead (PyTorch eager, JAX jit, HIPS autograd), on
the workloads W1-W6 and heat-scalar.

    mutad-bench                        # the quick suite: mutad and NumPy, a minute or two
    mutad-bench --full --systems all   # the full sizes, every installed peer
    mutad-bench --workloads leapfrog,implicit-heat --steps 10,100,1000 --systems all
    mutad-bench --full --json run.json --csv run.csv --plot results.png
    mutad-bench --from-json run.json --plot results.png   # report a saved run again
    mutad-bench --xp cupy              # W2, W3, W5, W6 on a GPU, against torch and jax there

Every run saves its tables and its measurements in mutad-bench-results/ (--save-to changes
the folder, --no-save turns it off) and says where.

With --xp cupy the arrays are on a GPU (CuPy's): the workloads W2, W3, W5 and W6 at sizes
that fill it (n = 10^7-10^8; W3's dense matrix 4096^2), for mutad's policies, the same code run
by CuPy without a gradient (the baseline, "cupy"), PyTorch on cuda and JAX on its default
device, every call synchronised with the device, and peak device memory from CuPy's memory
pool, torch's and jax's own counters (see mutad/bench/device.py and docs/scaling-out.md).

The workloads are defined on the workloads page of the documentation, docs/workloads.md.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter

from mutad.bench import device, harness, peers, report
from mutad.bench.workloads import DEFAULT_WORKLOADS, WORKLOADS

QUICK_SYSTEMS = (*peers.MUTAD_SYSTEMS, "numpy")
STEPPED_WORKLOADS = tuple(name for name, w in WORKLOADS.items() if w.steps_parameter)
ROUNDS = {"full": {"small-ops": 21}, "quick": {"small-ops": 7}}
DEFAULT_ROUNDS = {"full": 5, "quick": 3}
TIMEOUT = {"full": 3600.0, "quick": 300.0}
BAR_AFTER_SECONDS = 3.0
PROGRESS_EVERY_SECONDS = 5.0
RUN_ONLY_OPTIONS = ("full", "steps", "n", "reps", "timeout", "memory_limit", "json")
SAVE_TO = "mutad-bench-results"


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
        epilog=(report.FIGURES + "\nThe method: " + report.METHOD + "\n\nOn a GPU, "
                "--xp cupy (the tables print what each column means): " + device.METHOD
                + "\n\nThe workloads "
                "(what each computes, its inputs and sizes, its reference loss) are defined on "
                "the workloads page of the documentation, docs/workloads.md."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("--full", action="store_true",
                        help="the full sizes and rounds, every system unless --systems "
                             "says otherwise (many minutes; W2 at T=1000 needs GiBs for the "
                             "peers)")
    result.add_argument("--xp", choices=device.XP_CHOICES, default="numpy",
                        help="where the arrays are: numpy (the CPU, default) or cupy (a GPU: "
                             "W2, W3, W5 and W6 at sizes that fill it, n = 10^7-10^8 and W3 at "
                             "n = 4096, for mutad-restore, mutad-checkpoint, cupy (the same "
                             "code run by CuPy without a gradient: the baseline of /dev fwd), "
                             "torch on cuda and jax on its default device, unless --workloads, "
                             "--systems, --n and --steps say otherwise; mutad-budget on "
                             "request; times synchronised with the device; peak device memory "
                             "from CuPy's memory pool, torch.cuda.max_memory_allocated and "
                             "jax's peak_bytes_in_use; needs CuPy and a GPU, and says so in "
                             "one line where either is missing)")
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
    result.add_argument("--clock", choices=tuple(harness.CLOCKS), default="wall",
                        help="what times the rounds: the wall clock (default) or the "
                             "process's CPU time, which other work on a shared machine "
                             "does not inflate (NumPy's arrays; --xp cupy times the wall "
                             "clock)")
    result.add_argument("--timeout", type=_positive_number, metavar="SECONDS",
                        help="limit per configuration; a slower one is reported as 'timeout' "
                             "(default 300, with --full 3600)")
    result.add_argument("--memory-limit", type=_positive_number, metavar="MiB",
                        help="resident memory a configuration may reach before it is stopped "
                             "and reported as 'out of memory' (default: 90%% of the memory "
                             "available at the start)")
    result.add_argument("--save-to", metavar="FOLDER", default=SAVE_TO,
                        help="the folder where every run saves its tables as printed "
                             "(mutad-bench-DATE.txt) and its measurements "
                             "(mutad-bench-DATE.json, which --from-json reports again), DATE "
                             "the run's date and time in UTC, so runs never overwrite each "
                             "other "
                             "(default: %(default)s in the current folder)")
    result.add_argument("--no-save", action="store_true",
                        help="save nothing unless --json, --csv or --plot asks for it")
    result.add_argument("--json", metavar="FILE", help="write every raw measurement to FILE")
    result.add_argument("--csv", metavar="FILE", help="write one row per configuration to FILE")
    result.add_argument("--plot", metavar="FILE.png",
                        help="draw a figure for a paper (300 dpi, a page wide): per "
                             "workload, a panel of the gradient's time over the NumPy "
                             "function's and a panel of its peak extra memory, per system and "
                             "size, on logarithmic axes, two workloads to a row, the machine "
                             "and versions in a caption (needs matplotlib: pip install "
                             "matplotlib)")
    result.add_argument("--from-json", metavar="FILE",
                        help="run nothing: report the run saved in FILE by --json (tables, "
                             "and --plot, --csv), e.g. to redraw benchmarks/results.json; "
                             "--workloads and --systems choose among its rows")
    result.add_argument("--markdown", action="store_true",
                        help="print the tables as Markdown (as in benchmarks/RESULTS.md)")
    result.add_argument("--no-progress", action="store_true",
                        help="print no progress on stderr (by default a bar on a terminal, "
                             "otherwise a line when each workload starts and ends and every "
                             "few seconds in between)")
    result.add_argument("--progress-every", type=_positive_number, metavar="SECONDS",
                        default=PROGRESS_EVERY_SECONDS,
                        help="seconds between progress lines when stderr is not a terminal "
                             "(default %(default)g)")
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

    systems = _systems(options.systems or (list(peers.SYSTEMS) if options.full
                                           else QUICK_SYSTEMS),
                       peers.SYSTEMS, tuple(peers.PEER_MODULES), peers.MUTAD_SYSTEMS)

    if options.steps and not any(WORKLOADS[n].steps_parameter for n in workloads):
        raise UsageError("--steps applies to " + ", ".join(STEPPED_WORKLOADS)
                         + ", none of which was chosen")
    if options.n and not any(WORKLOADS[n].n_parameter for n in workloads):
        raise UsageError("--n applies to every workload but small-ops, and only small-ops "
                         "was chosen")
    return mode, workloads, systems


def _systems(items, known, peer_systems, mutad_systems, prefix=""):
    """The systems ``items`` name (``all``, ``peers`` and ``mutad`` standing for groups of
    ``known``), each once, in ``known``'s order."""
    systems = []
    for item in items:
        expanded = {"all": known, "peers": peer_systems, "mutad": mutad_systems}.get(
            item, (item,))
        for system in expanded:
            if system not in known:
                raise UsageError(f"{prefix}unknown system {system!r}; choose from "
                                 + ", ".join(known) + ", all, peers, mutad")
            if system not in systems:
                systems.append(system)
    return sorted(systems, key=list(known).index)


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
                       "clock": options.clock, "check": True, "reference_dir": reference_dir}


def _clock(seconds):
    """Elapsed time as m:ss, or h:mm:ss from an hour on."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def _workload_title(name):
    return f"{WORKLOADS[name].label} {name}"


class Progress:
    """What the run is doing, on ``stream`` (stderr).

    On a terminal, a tqdm bar (from the ``bench`` extra) that appears once the run has taken a
    few seconds. Elsewhere (a pipe, a log file, a CI job) or without tqdm, plain lines, which
    a log keeps: one when each workload starts and ends, and every ``every`` seconds in
    between one saying which configuration runs, for how long, how many are done and the time
    elapsed. ``enabled=False`` prints nothing.
    """

    def __init__(self, plan, enabled=True, every=PROGRESS_EVERY_SECONDS, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.total = len(plan)
        self.per_workload = Counter(c["workload"] for c in plan)
        self.finished = Counter()
        self.statuses = {}
        self.done = 0
        self.current = None
        self.every = every
        self.started = self.current_started = time.monotonic()
        self.bar = None
        self.lines = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = None
        if not enabled:
            return
        tqdm = None
        if getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm import tqdm
            except ImportError:
                pass
        if tqdm is not None:
            self.bar = tqdm(total=self.total, delay=BAR_AFTER_SECONDS, unit="run",
                            file=self.stream, leave=False)
        else:
            self.lines = True
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _elapsed(self):
        return _clock(time.monotonic() - self.started)

    def _print(self, text):
        print(f"mutad-bench: {text}", file=self.stream, flush=True)

    def _tick(self):
        while not self._stop.wait(self.every):
            with self._lock:
                if self.current is not None:
                    c = self.current
                    self._print(
                        f"[{self.done + 1}/{self.total}] {_workload_title(c['workload'])} "
                        f"{report.size_label(c['params'])} {c['system']}: running for "
                        f"{_clock(time.monotonic() - self.current_started)}; "
                        f"{self.done} of {self.total} runs done, {self._elapsed()} elapsed")

    def start(self, configuration):
        name = configuration["workload"]
        with self._lock:
            if self.lines and self.finished[name] == 0:  # the workload's first run
                self._print(f"{_workload_title(name)}: starting {self.per_workload[name]} "
                            f"runs (runs {self.done + 1}-{self.done + self.per_workload[name]} "
                            f"of {self.total}); {self._elapsed()} elapsed")
            self.current = configuration
            self.current_started = time.monotonic()
        if self.bar is not None:
            self.bar.set_description_str(
                f"{name} {report.size_label(configuration['params'])} "
                f"{configuration['system']}", refresh=False)

    def finish(self, configuration, result):
        name = configuration["workload"]
        with self._lock:
            self.done += 1
            self.finished[name] += 1
            self.statuses.setdefault(name, Counter())[result["status"]] += 1
            self.current = None
            if self.lines and self.finished[name] == self.per_workload[name]:
                statuses = ", ".join(f"{count} {status}" for status, count
                                     in sorted(self.statuses[name].items()))
                self._print(f"{_workload_title(name)}: done ({statuses}); {self.done} of "
                            f"{self.total} runs done, {self._elapsed()} elapsed")
        if self.bar is not None:
            self.bar.update(1)

    def close(self):
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.bar is not None:
            self.bar.close()


def _check_plot_possible(options):
    if options.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib, "
                             "or the bench extra from a checkout: pip install '.[bench]'") from None


def _run_plan(plan, run_one, options, timeout, memory_limit):
    """Each configuration of ``plan`` run by ``run_one`` (in a fresh interpreter), with the
    progress shown as asked; their results."""
    results = []
    progress = Progress(plan, enabled=not options.no_progress, every=options.progress_every)
    try:
        for configuration in plan:
            progress.start(configuration)
            result = run_one(configuration, timeout, memory_limit)
            results.append(result)
            progress.finish(configuration, result)
    finally:
        progress.close()
    return results


def measure(options):
    """Run every configuration the options ask for; returns the document --json writes."""
    mode, workloads, systems = _resolve(options)
    _check_plot_possible(options)
    timeout = options.timeout or TIMEOUT[mode]
    memory_limit = options.memory_limit or harness.default_memory_limit_mib()

    with tempfile.TemporaryDirectory(prefix="mutad-bench-") as reference_dir:
        plan = list(configurations(mode, workloads, systems, options, reference_dir))
        results = _run_plan(plan, harness.run_in_fresh_interpreter, options, timeout,
                            memory_limit)
    report.annotate_first_calls(results)
    return {"schema": report.SCHEMA, "command": ["mutad-bench", *options.argv], "mode": mode,
            "method": report.METHOD, "environment": report.environment(),
            "results": results}, workloads


def saved(options):
    """The document of a run saved by --json, its rows narrowed to the --workloads and
    --systems asked for; raises UsageError for options that only apply to running."""
    given = [name for name in RUN_ONLY_OPTIONS if getattr(options, name)]
    if given:
        raise UsageError("--from-json reports a saved run; "
                         + ", ".join("--" + name.replace("_", "-") for name in given)
                         + " applies only when running")
    try:
        with open(options.from_json) as file:
            document = json.load(file)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read {options.from_json}: {error}") from None
    if not isinstance(document, dict) or document.get("schema") != report.SCHEMA:
        raise UsageError(f"{options.from_json} is not a file written by mutad-bench --json "
                         f"(schema {report.SCHEMA})")
    _check_plot_possible(options)
    _, chosen_workloads, chosen_systems = _resolve(options)
    found = [name for name in WORKLOADS if any(r["workload"] == name
                                               for r in document["results"])]
    workloads = [n for n in (chosen_workloads if options.workloads else found) if n in found]
    document["results"] = [r for r in document["results"] if r["workload"] in workloads and (
        not options.systems or r["system"] in chosen_systems)]
    return document, workloads


def _header(document, from_file):
    """The lines above the tables: what was run, and how, in a scientist's words."""
    results = document["results"]
    lines = []
    if from_file:
        environment = document.get("environment", {})
        lines.append(f"mutad-bench: the run saved in {from_file}, measured "
                     f"{environment.get('date', 'at an unknown date')} at mutad commit "
                     f"{environment.get('mutad_commit') or 'unknown'} on "
                     f"{environment.get('processor_count', '?')} cores "
                     f"({environment.get('cpu')}); command: "
                     f"{' '.join(document.get('command', []))}")
    memory_methods = {r.get("memory_method") for r in results} - {None}
    timed = [r for r in results if r.get("gradient_seconds")]
    pinned = all(r.get("allocator") for r in timed)
    lines.append(f"mutad-bench ({document['mode']} sizes): each row is measured in a fresh Python "
                 "process computing on one core; the first gradient call is timed on its own "
                 "(for mutad-replay, the call that records), then, after one untimed round, "
                 "every round times the plain NumPy function and the gradient back to back"
                 + (" by the process's CPU time" if any(r.get("clock") == "process"
                                                         for r in timed) else ""))
    if not pinned:
        lines.append("note: the memory allocator could not be set up here as on Linux with glibc, "
                     "so a time can depend on what the process allocated before, and a peak on "
                     "how much freed memory the allocator keeps")
    if "sampled" in memory_methods:
        lines.append("note: this system cannot reset its peak-memory counter, so peaks come from "
                     "sampling memory every millisecond, which can miss short peaks")
    return lines + [""]


def _saved_names(folder, started):
    """The paths of the tables and the measurements a run saves in ``folder``, named by its
    date and time (UTC), so that runs never overwrite each other."""
    stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
    return (os.path.join(folder, f"mutad-bench-{stamp}.txt"),
            os.path.join(folder, f"mutad-bench-{stamp}.json"))


def report_run(options, document, workloads, from_file=None):
    """Print the tables of ``document``'s results, save them (a run, not a report of a saved
    one) with the files asked for, and say where; returns the exit status (1 if a row is wrong
    or failed)."""
    results = document["results"]
    printed = []

    def say(text=""):
        print(text)
        printed.append(text)

    for line in _header(document, from_file):
        say(line)
    tables = (report.format_markdown if options.markdown else report.format_results)
    say(tables(results, workloads))
    say()
    replay = report.format_replay(results, workloads, markdown=options.markdown)
    if replay:
        say(replay)
        say()
    if from_file is None:
        systems = {r["system"] for r in results}
        missing = [s for s in peers.PEER_MODULES if not peers.installed(s)]
        unused = [s for s in peers.PEER_MODULES if peers.installed(s) and s not in systems]
        if missing:
            say("not installed: " + ", ".join(missing)
                + " (pip install jax autograd, or from a checkout pip install '.[peers]';"
                " PyTorch: pip install torch==2.13.0)")
        if unused:
            say("installed but not run: " + ", ".join(unused) + " (add --systems all)")
    say(report.legend(report._with_peers(results)))

    written = []
    if from_file is None and not options.no_save:
        when = datetime.datetime.fromisoformat(document["environment"]["date"])
        table_path, json_path = _saved_names(options.save_to, when)
        os.makedirs(options.save_to, exist_ok=True)
        with open(table_path, "w") as out:
            out.write("\n".join(printed) + "\n")
        with open(json_path, "w") as out:
            json.dump(document, out, indent=1)
        written += [("the tables", table_path), ("every measurement (JSON; mutad-bench "
                                                 "--from-json FILE reports it again)", json_path)]
    if options.json:
        with open(options.json, "w") as out:
            json.dump(document, out, indent=1)
        written.append(("the raw measurements (JSON)", options.json))
    if options.csv:
        report.write_csv(options.csv, results, document["environment"])
        written.append(("one row per configuration (CSV)", options.csv))
    if options.plot:
        report.plot(options.plot, results, workloads, document.get("environment"))
        written.append(("the plot", options.plot))
    for what, path in written:
        print(f"wrote {what}: {os.path.abspath(path)}")
    if from_file is None and options.no_save and not written:
        print("saved nothing (--no-save)")

    broken = [r for r in results if r["status"] in ("wrong", "error")]
    for row in broken:
        found = row.get("detail") or row.get("checks") or row.get("behaviour")
        print(f"{row['status'].upper()}: {row['workload']} {report.size_label(row['params'])} "
              f"{row['system']}: {found}", file=sys.stderr)
    return 1 if broken else 0


def resolve_device(options):
    """The mode, workloads and systems of ``--xp cupy``; raises UsageError."""
    mode = "full" if options.full else "quick"
    workloads = []
    for item in options.workloads or device.WORKLOAD_NAMES:
        name = options.labels.get(item.lower(), item)
        if name not in device.WORKLOAD_NAMES:
            raise UsageError(f"--xp cupy runs {', '.join(f'{n} ({WORKLOADS[n].label})' for n in device.WORKLOAD_NAMES)}"
                             f"; not {item!r}")
        if name not in workloads:
            workloads.append(name)
    systems = _systems(options.systems or device.DEFAULT_SYSTEMS, device.SYSTEMS,
                       ("torch", "jax"), device.MUTAD_DEVICE_SYSTEMS, "--xp cupy: ")
    return mode, workloads, systems


def run_device(options, namespace_name="cupy"):
    """``mutad-bench --xp cupy``: measure, print and save; returns the exit status (1 if a row
    is wrong or failed, 2 where there is no GPU). ``namespace_name`` names the array namespace
    (the tests give the module of a stand-in for CuPy)."""
    if options.from_json:
        raise UsageError("--from-json reports a saved run by itself: leave out --xp")
    if options.plot or options.csv:
        raise UsageError("--plot and --csv apply to the CPU run; --xp cupy writes --json")
    mode, workloads, systems = resolve_device(options)
    try:
        xp = device.namespace(namespace_name)
    except device.NoDevice as error:
        print(f"mutad-bench: --xp cupy needs CuPy and a GPU: {error}; install CuPy where "
              "there is one (pip install cupy-cuda12x)", file=sys.stderr)
        return 2
    timeout = options.timeout or device.TIMEOUT[mode]
    memory_limit = options.memory_limit or harness.default_memory_limit_mib()
    with tempfile.TemporaryDirectory(prefix="mutad-bench-device-") as reference_dir:
        plan = list(device.configurations(mode, workloads, systems, options, reference_dir,
                                          namespace_name))
        results = _run_plan(plan, device.run_in_fresh_interpreter, options, timeout,
                            memory_limit)
    environment = report.environment()
    environment["gpu_facts"] = device.gpu_facts(xp)
    document = {"schema": report.SCHEMA, "xp": "cupy", "command": ["mutad-bench", *options.argv],
                "mode": mode, "method": device.METHOD, "environment": environment, "results": results}
    text = device.format_document(document, workloads, markdown=options.markdown)
    note = device.installed_note()
    if note:
        text = text.replace("\n" + device.LEGEND, "\n" + note + "\n" + device.LEGEND)
    print(text)
    written = []
    if not options.no_save:
        when = datetime.datetime.fromisoformat(environment["date"])
        table_path, json_path = _saved_names(options.save_to, when)
        os.makedirs(options.save_to, exist_ok=True)
        with open(table_path, "w") as out:
            out.write(text + "\n")
        with open(json_path, "w") as out:
            json.dump(document, out, indent=1)
        written += [("the tables", table_path), ("every measurement (JSON)", json_path)]
    if options.json:
        with open(options.json, "w") as out:
            json.dump(document, out, indent=1)
        written.append(("the raw measurements (JSON)", options.json))
    for what, path in written:
        print(f"wrote {what}: {os.path.abspath(path)}")
    broken = [r for r in results if r["status"] in ("wrong", "error")]
    for row in broken:
        found = row.get("detail") or row.get("checks")
        print(f"{row['status'].upper()}: {row['workload']} {report.size_label(row['params'])} "
              f"{row['system']}: {found}", file=sys.stderr)
    return 1 if broken else 0


def run(options):
    if options.xp == "cupy":
        return run_device(options)
    if options.from_json:
        document, workloads = saved(options)
        if document.get("xp") == "cupy":  # a run of --xp cupy: its own tables
            print(device.format_document(document, workloads, markdown=options.markdown))
            return 0
        return report_run(options, document, workloads, from_file=options.from_json)
    document, workloads = measure(options)
    return report_run(options, document, workloads)


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
