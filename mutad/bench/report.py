"""What a run prints and writes: the tables, the JSON and CSV files, and the plot."""

import csv
import datetime
import os
import platform
import subprocess
import textwrap
from pathlib import Path

import numpy as np

from mutad.bench import peers
from mutad.bench.harness import FINITE_DIFFERENCE_TOLERANCE, GRADIENT_TOLERANCE, spread
from mutad.bench.workloads import WORKLOADS

SCHEMA = "mutad-bench/1"

METHOD = (
    "Each (system, workload, size) runs in a fresh interpreter, one at a time, with one compute "
    "thread and, with glibc, malloc's thresholds pinned by mallopt whatever the process "
    "allocated before: for the warm-up and the peaks every block of 128 KiB or more is mapped "
    "and unmapped on its own, so VmRSS counts live blocks, not freed ones the heap keeps; for "
    "the timing blocks under 32 MiB come from a heap that is never trimmed, so every timed call "
    "runs on memory already mapped. Warm-up: the first gradient call of the process, timed on "
    "its own (for mutad-replay the recording, for jax tracing and compiling), with gc.collect "
    "and malloc_trim(0) and a read of VmRSS before it and after it once its result is dropped "
    "(the difference is what the system keeps between calls; for mutad-replay the second read "
    "follows its second call, which replays and compiles, timed on its own too); one peer "
    "forward; one NumPy forward. mutad-replay's later calls replay the compiled program (or "
    "trace again, where mutad cannot replay it). Peak extra memory: gc.collect and malloc_trim(0), read VmRSS, "
    "reset VmHWM through /proc/self/clear_refs, one gradient call with its result kept alive, "
    "VmHWM minus VmRSS before (a 1 ms VmRSS sampling thread is the cross-check, and the "
    "measure where clear_refs is unavailable). Timing: one untimed round, then rounds of "
    "(NumPy forward, gradient, peer forward) back to back; median [min-max] over rounds, "
    "ratios per round. "
    "Correctness: loss against the reference loss, gradient against mutad's "
    "checkpoint-policy gradient (max |g - g_ref| / max |g_ref| per input, symmetric parts for "
    "symmetric matrices), g.v against a 4th-order central difference of the NumPy forward, and, "
    "for mutad, the caller's arguments bit-for-bit as before the first call and the checked "
    "result bit-for-bit the first call's."
)

FIGURES = """\
the figures, per workload, size and system:
  peak MiB        peak extra memory of one gradient call: VmHWM during the call minus VmRSS
                  before it, in MiB (for numpy: of one plain forward call)
  gradient        time of one gradient call, median [min-max] over the rounds
                  (ms; for small-ops microseconds per elementwise operation, for heat-scalar
                  per point update); for mutad-replay the calls after the first, which
                  replay it (or trace again, where mutad cannot replay the program)
  /NumPy fwd      gradient time over the plain NumPy forward's time in the same round,
                  median [min-max] of the per-round ratios
  /own fwd        the same over the system's own forward without AD (torch under no_grad,
                  jax.jit(loss), autograd's code on ndarrays); only when a peer ran: mutad
                  and numpy have no other forward than NumPy's
  grad err        max relative difference of the gradient to mutad's checkpoint-policy
                  gradient, the reference ("ref" on the reference row)
  fd err          relative difference of g.v to a 4th-order central difference of the NumPy
                  forward along a fixed random direction v
  check           ok, or WRONG when the loss, grad err (> 1e-8), fd err (> 1e-6) or, for mutad,
                  the caller's arguments after the call are not as they must be, or the checked
                  call's result is not bit-for-bit the first call's (for mutad-replay: the
                  replayed gradient is not the recorded, traced one)
where mutad-replay ran, a table sets it against mutad-restore (traced on every call):
  traced ms       mutad-restore's gradient, median
  recording ms    mutad-replay's first call, which records (a traced gradient besides); over
                  the traced median (rec/traced) and over mutad-restore's own first call
                  (rec/traced 1st: both the first gradient call of a fresh process)
  2nd call ms     mutad-replay's second call, which replays the program and compiles its
                  runs of small elementwise steps (once)
  replays         yes, or no where mutad traces the program on every call instead of
                  replaying it (correct, not faster), with mutad's reason below the table
  later ms        mutad-replay's gradient after the first call, median; over the traced median
                  (later/traced) and, per round, over the NumPy forward (as in its row)
  kept MiB        resident memory the first call leaves once its result is dropped (recorded
                  program, buffers, modules imported on first use, what Python's allocator
                  keeps), for mutad-restore (traced kept MiB) and for mutad-replay, whose
                  figure is read after its second call (the program as it is compiled)
                  ("first_call_seconds" and "kept_mib" are in --json and --csv for every system)
the systems: mutad-restore puts back what the code overwrote by undoing each step (a -= b
undoes a += b), mutad-checkpoint by saving what each step overwrites (exact; the reference),
mutad-budget as mutad-restore, saving the steps that cannot be undone within a memory budget of
8 times the largest input's size (memory= of mutad.value_and_gradient), mutad-replay as
mutad-restore, its program recorded on the first call and replayed on later ones,
mutad-replay-budget as mutad-budget, recorded and replayed so; numpy is the plain function, no
gradient: the baseline
W1 addvecs prints what each system does with `a += b` and `a[:] += b` written inside the
differentiated function, the idiomatic workaround, and whether the caller's a ends up mutated.
"""



def legend(with_peers):
    """What the figures of the tables mean, in a scientist's words, printed under them (the
    --help epilog says how each is measured)."""
    lines = [
        "How to read the tables (mutad-bench --help says how each figure is measured):",
        "  peak MiB    the most memory one gradient call needed beyond what the program held",
        "              before it (for numpy: one plain call of the function, no gradient)",
        "  gradient    the time of one gradient call: median [fastest-slowest] over the rounds",
        "  /NumPy fwd  that time in multiples of one plain NumPy call of the same function:",
        "              the price of the derivative (theory allows reverse mode a few times)",
    ]
    if with_peers:
        lines += [
            "  /own fwd    the same in multiples of the peer's own function without derivatives",
            "              (torch under no_grad, jax.jit of the function, autograd's on arrays)",
        ]
    lines += [
        "  grad err    the largest relative difference from mutad-checkpoint's gradient,",
        "              the reference (it saves what each step overwrites: no rounding drift)",
        "  fd err      the relative difference from a finite-difference derivative",
        "  mutad-restore undoes each step to put back what the code overwrote (a -= b undoes",
        "  a += b); mutad-checkpoint saves what each step overwrites; mutad-budget undoes what",
        "  it can and, for the steps it cannot, keeps at most 8 times the largest input's",
        "  memory, recomputing the rest; mutad-replay records the program on its first call",
        "  and replays it on later calls (mutad-replay-budget: under mutad-budget's budget);",
        "  numpy is the plain function, without a gradient",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Environment


def environment():
    """Versions and machine facts, for the JSON and CSV files and RESULTS.md."""
    facts = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "processor_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "memory_total_mib": _memory_total_mib(),
        "threads_per_configuration": 1,
        "mutad_commit": _mutad_commit(),
        "versions": {system: peers.version(system) if peers.installed(system) else None
                     for system in ("mutad-restore", "numpy", *peers.PEER_MODULES)},
    }
    facts["versions"]["mutad"] = facts["versions"].pop("mutad-restore")
    facts["versions"]["scipy"] = _scipy_version()
    return facts


def _scipy_version():
    import scipy

    return scipy.__version__


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_total_mib():
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _mutad_commit():
    try:
        completed = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                   cwd=Path(__file__).resolve().parent, capture_output=True,
                                   text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() or None


# ----------------------------------------------------------------------------------------------
# Tables


def _number(value):
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_spread(values, scale=1.0):
    if not values:
        return "-"
    median, low, high = spread([v * scale for v in values])
    return f"{_number(median)} [{_number(low)}-{_number(high)}]"


def _time_scale(workload, result):
    if workload.time_unit.startswith("us/"):  # per operation: us/op, us/update
        return 1e6 / result["operations"]
    return 1e3


def size_label(params):
    return " ".join(f"{key}={value:,}" if isinstance(value, int) else f"{key}={value}"
                    for key, value in params.items())


def _error(value):
    return "-" if value is None else f"{value:.0e}"


def _check_label(result, loss_tolerance=1e-10):
    """What a result's checks say: ok, not checked, or WRONG with the checks that failed."""
    checks = result.get("checks")
    if checks is None:
        return "not checked"
    if checks["ok"]:
        return "ok"
    reasons = []
    if not checks["loss_error"] <= loss_tolerance:
        reasons.append("loss")
    if not (checks.get("gradient_error") or 0) <= GRADIENT_TOLERANCE:
        reasons.append("gradient")
    if not (checks.get("finite_difference_error") or 0) <= FINITE_DIFFERENCE_TOLERANCE:
        reasons.append("fd")
    if checks.get("arguments_unchanged") is False:
        reasons.append("arguments changed")
    if checks.get("same_as_first_call") is False:
        reasons.append("not the first call's bits")
    return "WRONG (" + ", ".join(reasons or ["numpy loss"]) + ")"


def _row(workload, result):
    size = size_label(result["params"])
    if result["status"] not in ("ok", "wrong"):
        detail = result.get("detail", "")
        return [size, result["system"], result["status"] + (f": {detail}" if detail and
                                                              result["status"] == "error"
                                                              else "")]
    checks = result.get("checks") or {}
    scale = _time_scale(workload, result)
    if result["system"] == peers.REFERENCE_SYSTEM:
        gradient_error = "ref"
    elif result["system"] == "numpy":
        gradient_error = "-"
    else:
        gradient_error = _error(checks.get("gradient_error"))
    return [
        size,
        result["system"],
        f"{result['peak_extra_mib']:.1f}",
        format_spread(result["gradient_seconds"], scale),
        format_spread(result["ratios"]),
        format_spread(result["peer_ratios"]),
        gradient_error,
        _error(checks.get("finite_difference_error")),
        _check_label(result),
    ]


def _columns(header, rows):
    full = [row for row in rows if len(row) == len(header)]
    widths = [max(len(str(row[i])) for row in [header, *full]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        if len(row) == len(header):
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        else:  # a row without figures: its status spans the remaining columns
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(row[:-1], widths))
                         + "  " + row[-1])
    return [line.rstrip() for line in lines]


def _with_peers(results):
    """Whether a peer (torch, jax, autograd) is among ``results``' systems: only then has the
    table an "/own fwd" column, the gradient over the peer's own forward, which mutad's and
    numpy's rows do not have."""
    return any(r["system"] in peers.PEER_MODULES for r in results)


def _table(workload, results):
    """The header and the rows of one workload's table."""
    header = ["size", "system", "peak MiB", f"gradient {workload.time_unit}", "/NumPy fwd",
              "/own fwd", "grad err", "fd err", "check"]
    rows = [_row(workload, r) for r in results]
    if not _with_peers(results):
        own = header.index("/own fwd")
        header.pop(own)
        rows = [row[:own] + row[own + 1:] if len(row) == len(header) + 1 else row
                for row in rows]
    return header, rows


def format_workload(workload, results):
    """A plain-text table of one workload's results, one row per (size, system)."""
    lines = [f"{workload.label} {workload.name}: {workload.summary}"]
    if workload.behaviour_only:
        return "\n".join(lines + format_behaviour(results))
    return "\n".join(lines + _columns(*_table(workload, results)))


def format_behaviour(results):
    header = ["system", "a += b", "a[:] += b", "workaround", "its outcome", "caller's a mutated"]
    rows = []
    for result in results:
        if "behaviour" not in result:
            rows.append([result["system"], result["status"] + (
                f": {result.get('detail', '')}" if result["status"] == "error" else "")])
            continue
        found = result["behaviour"]
        rows.append([result["system"], found["a += b"]["text"], found["a[:] += b"]["text"],
                     found["workaround"], found["workaround outcome"]["text"],
                     "yes" if found["caller's a mutated"] else "no"])
    return _columns(header, rows)


def format_results(results, workload_names):
    blocks = []
    for name in workload_names:
        rows = [r for r in results if r["workload"] == name]
        if rows:
            blocks.append(format_workload(WORKLOADS[name], rows))
    return "\n\n".join(blocks)


def format_markdown(results, workload_names):
    """The same tables in Markdown, for RESULTS.md."""
    blocks = []
    for name in workload_names:
        workload = WORKLOADS[name]
        rows = [r for r in results if r["workload"] == name]
        if not rows:
            continue
        if workload.behaviour_only:
            header = ["system", "a += b", "a[:] += b", "workaround", "its outcome",
                      "caller's a mutated"]
            body = [([r["system"], r["status"]] + [""] * 4 if "behaviour" not in r else
                     [r["system"], r["behaviour"]["a += b"]["text"],
                      r["behaviour"]["a[:] += b"]["text"], f"`{r['behaviour']['workaround']}`",
                      r["behaviour"]["workaround outcome"]["text"],
                      "yes" if r["behaviour"]["caller's a mutated"] else "no"]) for r in rows]
        else:
            header, table = _table(workload, rows)
            body = [row if len(row) == len(header) else
                    row[:2] + [row[2]] + [""] * (len(header) - 3) for row in table]
        lines = [f"**{workload.label} {workload.name}**: {workload.summary}", "",
                 "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"
                  for row in body]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ----------------------------------------------------------------------------------------------
# Record once, replay: mutad-replay next to the traced gradient it replaces


def _measured(result):
    return result["status"] in ("ok", "wrong") and bool(result.get("gradient_seconds"))


def _traced_row(results, replay_row):
    """The measured mutad-restore row of the same workload and size, or None."""
    for r in results:
        if (r["system"] == peers.REPLAYS[replay_row["system"]]
                and r["workload"] == replay_row["workload"]
                and r["params"] == replay_row["params"] and _measured(r)):
            return r
    return None


def annotate_first_calls(results):
    """Give each measured mutad-replay row ``first_call_over_traced``: its first (recording)
    call's time over the median traced gradient of mutad-restore at the same size in the same
    run, or None where mutad-restore did not run."""
    for row in results:
        if row["system"] in peers.REPLAYS and _measured(row):
            traced = _traced_row(results, row)
            row["first_call_over_traced"] = (
                row["first_call_seconds"] / _median(traced["gradient_seconds"])
                if traced else None)
    return results


REPLAY_HEADER = ["workload", "size", "replays", "traced ms", "recording ms", "rec/traced",
                 "rec/traced 1st", "2nd call ms", "later ms", "later/traced", "later/NumPy fwd", "kept MiB",
                 "traced kept MiB"]


def _ratio(numerator, denominator):
    return None if numerator is None or not denominator else numerator / denominator


def _replay_rows(results, workload_names, system):
    """The table's rows for the replaying ``system``, and the reasons mutad gave for the
    programs it traces on every call instead of replaying them, numbered as the rows refer to
    them."""
    rows, reasons = [], []
    for name in workload_names:
        for replay in results:
            if (replay["workload"] != name or replay["system"] != system
                    or not _measured(replay)):
                continue
            traced = _traced_row(results, replay) or {}
            traced_seconds = _median(traced.get("gradient_seconds") or [])
            later_seconds = _median(replay["gradient_seconds"])
            milliseconds = [None if t is None else 1e3 * t for t in
                            (traced_seconds, replay["first_call_seconds"], later_seconds)]
            kept = [r.get("kept_mib") for r in (replay, traced)]
            reason = replay.get("traced_instead")
            if reason and reason not in reasons:
                reasons.append(reason)
            rows.append([
                f"{WORKLOADS[name].label} {name}", size_label(replay["params"]),
                f"no ({reasons.index(reason) + 1})" if reason else "yes",
                _number(milliseconds[0]), _number(milliseconds[1]),
                _number(replay.get("first_call_over_traced")),
                _number(_ratio(replay["first_call_seconds"], traced.get("first_call_seconds"))),
                _number(None if replay.get("second_call_seconds") is None
                        else 1e3 * replay["second_call_seconds"]),
                _number(milliseconds[2]), _number(_ratio(later_seconds, traced_seconds)),
                format_spread(replay["ratios"]),
                *("-" if k is None else f"{k:.1f}" for k in kept),
            ])
    return rows, [f"({i}) traced on every call: {reason}" for i, reason in
                  enumerate(reasons, start=1)]


def format_replay(results, workload_names, markdown=False):
    """Each replaying system (mutad-replay, mutad-replay-budget) against the same system
    traced on every call (mutad-restore, mutad-budget) per workload and size, a table for each
    that was measured; "" when none was."""
    tables = []
    for system, traced in peers.REPLAYS.items():
        rows, notes = _replay_rows(results, workload_names, system)
        if not rows:
            continue
        title = (f"{system}: the first call records, later calls replay; against {traced}, "
                 "traced on every call (ms, medians)")
        if not markdown:
            tables.append("\n".join([title, *_columns(REPLAY_HEADER, rows), *notes]))
            continue
        lines = [f"**{title}**", "", "| " + " | ".join(REPLAY_HEADER) + " |",
                 "|" + "---|" * len(REPLAY_HEADER)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        tables.append("\n".join(lines + ([""] + [f"{note}  " for note in notes]
                                          if notes else [])))
    return "\n\n".join(tables)


# ----------------------------------------------------------------------------------------------
# Files

CSV_FIELDS = [
    "workload", "label", "size", "system", "version", "status", "detail", "peak_extra_mib",
    "sampled_extra_mib", "memory_method", "numpy_forward_peak_extra_mib", "rounds",
    "gradient_seconds_median", "gradient_seconds_min", "gradient_seconds_max",
    "numpy_forward_seconds_median", "ratio_to_numpy_median", "ratio_to_numpy_min",
    "ratio_to_numpy_max", "ratio_to_own_forward_median", "first_call_seconds",
    "first_call_over_traced", "second_call_seconds", "kept_mib", "traced_instead", "loss",
    "loss_error", "gradient_error", "finite_difference_error", "ok", "python", "numpy_version",
    "cpu", "processor_count", "method",
]


def _median(values):
    return spread(values)[0] if values else None


def csv_rows(results, facts):
    for r in results:
        checks = r.get("checks") or {}
        measured = r["status"] in ("ok", "wrong") and "gradient_seconds" in r
        gradient = r.get("gradient_seconds") or []
        ratios = r.get("ratios") or []
        yield {
            "workload": r["workload"], "label": r.get("label"), "size": size_label(r["params"]),
            "system": r["system"], "version": r.get("version"), "status": r["status"],
            "detail": r.get("detail", ""),
            "peak_extra_mib": r.get("peak_extra_mib"),
            "sampled_extra_mib": r.get("sampled_extra_mib"),
            "memory_method": r.get("memory_method"),
            "numpy_forward_peak_extra_mib": r.get("numpy_peak_extra_mib"),
            "rounds": r.get("rounds"),
            "gradient_seconds_median": _median(gradient),
            "gradient_seconds_min": min(gradient) if measured and gradient else None,
            "gradient_seconds_max": max(gradient) if measured and gradient else None,
            "numpy_forward_seconds_median": _median(r.get("numpy_seconds") or []),
            "ratio_to_numpy_median": _median(ratios),
            "ratio_to_numpy_min": min(ratios) if ratios else None,
            "ratio_to_numpy_max": max(ratios) if ratios else None,
            "ratio_to_own_forward_median": _median(r.get("peer_ratios") or []),
            "first_call_seconds": r.get("first_call_seconds"),
            "first_call_over_traced": r.get("first_call_over_traced"),
            "second_call_seconds": r.get("second_call_seconds"),
            "kept_mib": r.get("kept_mib"),
            "traced_instead": r.get("traced_instead"),
            "loss": checks.get("loss"), "loss_error": checks.get("loss_error"),
            "gradient_error": checks.get("gradient_error"),
            "finite_difference_error": checks.get("finite_difference_error"),
            "ok": checks.get("ok") if checks else None,
            "python": facts["python"], "numpy_version": facts["versions"]["numpy"],
            "cpu": facts["cpu"], "processor_count": facts["processor_count"],
            "method": METHOD,
        }


def write_csv(path, results, facts):
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in csv_rows(results, facts):
            writer.writerow({key: "" if value is None else value for key, value in row.items()})


PLOT_DPI = 300  # print resolution
PLOT_WIDTH_INCHES = 7.2  # a page's text width, two workloads side by side
PLOT_PAIRS_PER_ROW = 2  # workloads per row of the grid, each a (time, memory) pair of panels
PLOT_BAR_INCHES = 0.07  # the height of one bar; a system's group is one bar per size
PLOT_ROW_INCHES = 0.75  # a row of panels besides its bars: titles, ticks, axis labels
PLOT_FONT = 6.0  # points, legible in print at this width
MEMORY_FLOOR_MIB = 0.01  # the left end of the logarithmic memory axis; smaller peaks end there


def _plotted(result):
    return result["status"] in ("ok", "wrong") and bool(result.get("ratios"))


def _common_and_varying(rows):
    """The sizes of ``rows`` in order, the parameters all of them share, and the names of the
    ones that vary (what tells one bar of a system from another)."""
    sizes = []
    for r in rows:
        if r["params"] not in sizes:
            sizes.append(r["params"])
    keys = list(sizes[0]) if sizes else []
    varying = [k for k in keys if len({str(p.get(k)) for p in sizes}) > 1]
    common = {k: sizes[0][k] for k in keys if k not in varying}
    return sizes, common, varying


def caption(environment):
    """The machine and the versions a figure was measured with, in a sentence."""
    if not environment:
        return ""
    versions = environment.get("versions") or {}
    names = {"numpy": "NumPy", "scipy": "SciPy", "torch": "PyTorch", "jax": "JAX",
             "autograd": "autograd"}
    software = [f"Python {environment.get('python', '?')}"] + [
        f"{names[k]} {versions[k]}" for k in names if versions.get(k)]
    commit = environment.get("mutad_commit")
    memory = environment.get("memory_total_mib")
    return (f"Measured {str(environment.get('date', '?'))[:10]} on {environment.get('cpu')}, "
            f"{environment.get('processor_count', '?')} cores"
            + (f", {memory / 1024:.0f} GiB" if memory else "")
            + " (one core per run, a fresh process each); "
            + (f"mutad {commit}, " if commit else "") + ", ".join(software) + ". "
            "Bars: median over rounds; lines: fastest to slowest round. Time is the gradient's "
            "over one plain NumPy call of the same function (dashed: 1); memory is the extra "
            "peak of one gradient call, NumPy's own forward dotted.")


def plot_figure(results, workload_names, environment=None):
    """The figure --plot writes: a grid of panels, two workloads to a row, each a pair of
    panels. Left, the gradient's time over the plain NumPy function's in the same rounds (the
    median of the per-round ratios, a line from their min to their max); right, the peak extra
    memory of one gradient call. One horizontal bar per system and size, its value written at
    its end, on logarithmic axes: the systems' figures span orders of magnitude, and a ratio
    reads the same everywhere on them. NumPy, the baseline, has no bars: it is the dashed line
    at 1 on the time axis and a dotted line per size on the memory axis. Systems that did not
    run (not installed, timeout, ...) are named under the title. ``environment`` (the run's,
    as --json saves it) gives the caption: machine and versions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name in workload_names if not WORKLOADS[name].behaviour_only
             and any(r["workload"] == name and _plotted(r) for r in results)]
    layouts = []
    for name in names:
        rows = [r for r in results if r["workload"] == name]
        shown = [s for s in peers.SYSTEMS if s != "numpy"
                 and any(r["system"] == s and _plotted(r) for r in rows)]
        absent = {}
        for r in rows:
            if (r["system"] not in shown and r["system"] != "numpy"
                    and r["system"] not in absent.get(r["status"], [])):
                absent.setdefault(r["status"], []).append(r["system"])
        sizes, common, varying = _common_and_varying(
            [r for r in rows if r["system"] in shown or r["system"] == "numpy"])
        layouts.append((name, rows, shown, absent, sizes, common, varying))
    grid_rows = [layouts[i:i + PLOT_PAIRS_PER_ROW]
                 for i in range(0, len(layouts), PLOT_PAIRS_PER_ROW)] or [[]]
    heights = [max([len(shown) * (len(sizes) + 0.8) * PLOT_BAR_INCHES
                    for _, _, shown, _, sizes, _, _ in row] or [1.0]) + PLOT_ROW_INCHES
               for row in grid_rows]
    text = caption(environment)
    with plt.rc_context({"font.size": PLOT_FONT, "axes.titlesize": PLOT_FONT + 1,
                         "axes.labelsize": PLOT_FONT, "xtick.labelsize": PLOT_FONT - 0.5,
                         "ytick.labelsize": PLOT_FONT, "legend.fontsize": PLOT_FONT - 0.5}):
        figure, axes = plt.subplots(
            len(grid_rows), 2 * PLOT_PAIRS_PER_ROW, squeeze=False, layout="constrained",
            figsize=(PLOT_WIDTH_INCHES, sum(heights) + (0.45 if text else 0.0)),
            gridspec_kw={"height_ratios": heights})
        for row_axes, row in zip(axes, grid_rows, strict=True):
            for k in range(PLOT_PAIRS_PER_ROW):
                time_axis, memory_axis = row_axes[2 * k], row_axes[2 * k + 1]
                if k < len(row):
                    _plot_workload(time_axis, memory_axis, *row[k])
                else:
                    time_axis.set_axis_off()
                    memory_axis.set_axis_off()
        if not layouts:
            axes[0][0].text(0.5, 0.5, "no time or memory figures in these results",
                            ha="center")
        if text:
            figure.get_layout_engine().set(rect=(0, 0.45 / figure.get_figheight(), 1,
                                                 1 - 0.45 / figure.get_figheight()))
            figure.text(0.01, 0.04 / figure.get_figheight(), textwrap.fill(text, 160),
                        ha="left", va="bottom", fontsize=PLOT_FONT - 0.5, color="0.25")
    return figure


def plot(path, results, workload_names, environment=None):
    """Write :func:`plot_figure` to ``path`` (PNG at print resolution, or any format
    matplotlib infers from the name)."""
    import matplotlib.pyplot as plt

    figure = plot_figure(results, workload_names, environment)
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)


def _size_colours(count):
    # Sizes in increasing order, light to dark: the largest T reads darkest in every panel.
    import matplotlib

    return [matplotlib.colormaps["Blues"](level) for level in np.linspace(0.45, 0.9, count)]


def _plot_workload(time_axis, memory_axis, name, rows, shown, absent, sizes, common, varying):
    import matplotlib.ticker

    workload = WORKLOADS[name]
    colours = _size_colours(len(sizes))
    group = len(sizes) + 0.8
    centres = np.arange(len(shown)) * group
    numpy_peaks = [r["peak_extra_mib"] for r in rows
                   if r["system"] == "numpy" and r.get("peak_extra_mib") is not None]
    for (axis, figure_of) in ((time_axis, _time_figure), (memory_axis, _memory_figure)):
        ends, lows, drawn = [], [], []
        for i, system in enumerate(shown):
            for j, params in enumerate(sizes):
                y = centres[i] + j - (len(sizes) - 1) / 2
                found = [r for r in rows if r["system"] == system and r["params"] == params]
                if not found or not _plotted(found[0]):
                    drawn.append((y, None, found[0]["status"] if found else "not run",
                                  "dimgrey"))
                    continue
                value, low, high = figure_of(found[0])
                lows.append(value if low is None else low)
                ends.append(value if high is None else high)
                wrong = found[0]["status"] == "wrong"
                drawn.append((y, ends[-1], _number(value) + (" WRONG" if wrong else ""),
                              "red" if wrong else "black"))
        # A logarithmic axis has no zero: bars start at the power of ten below every value
        # (and below 1, the time axis's NumPy line, or NumPy's own memory).
        marks = [1.0] if axis is time_axis else numpy_peaks
        floor = 10.0 ** np.floor(np.log10(max(min([*lows, *marks]) * 0.9, MEMORY_FLOOR_MIB)))
        decades = int(np.ceil(np.log10(max([*ends, floor * 10]) * 4.0 / floor)))
        axis.set_xscale("log")
        axis.set_xlim(floor, floor * 10.0 ** decades)
        # A labelled tick every decade, or every other one where that would crowd the panel;
        # 0.1, 1, 1,000 rather than powers of ten: the numbers the bars' labels use.
        step = 1 if decades <= 4 else 2
        axis.set_xticks([floor * 10.0 ** k for k in range(0, decades + 1, step)])
        axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        axis.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
            lambda v, _: f"{v:g}" if v < 1 else f"{v:,.0f}"))
        for i, system in enumerate(shown):
            for j, params in enumerate(sizes):
                found = [r for r in rows if r["system"] == system and r["params"] == params]
                if not found or not _plotted(found[0]):
                    continue
                value, low, high = figure_of(found[0])
                value = max(value, floor)
                y = centres[i] + j - (len(sizes) - 1) / 2
                label = None
                if i == 0 and varying:
                    label = " ".join(f"{k}={params[k]:,}" if isinstance(params[k], int)
                                     else f"{k}={params[k]}" for k in varying)
                error = None if low is None else [[value - max(low, floor)], [high - value]]
                axis.barh(y, value - floor, left=floor, height=0.85, color=colours[j],
                          label=label, xerr=error,
                          error_kw={"elinewidth": 0.5, "capsize": 1.0, "ecolor": "black"})
        for y, end, text, colour in drawn:
            axis.text(max(end or floor, floor) * 1.12, y, text, va="center",
                      fontsize=PLOT_FONT - 1.5, color=colour)
        axis.set_ylim(centres[-1] + group / 2, centres[0] - group / 2)  # first system on top
        axis.grid(True, axis="x", which="major", alpha=0.3, linewidth=0.5)
        axis.tick_params(axis="y", length=0)
    time_axis.set_yticks(centres, shown)
    memory_axis.set_yticks(centres, [])
    time_axis.axvline(1.0, color="grey", linestyle="--", linewidth=0.6)
    for j, params in enumerate(sizes):
        numpy_rows = [r for r in rows if r["system"] == "numpy" and r["params"] == params
                      and r.get("peak_extra_mib") is not None]
        if numpy_rows:
            memory_axis.axvline(max(numpy_rows[0]["peak_extra_mib"], memory_axis.get_xlim()[0]),
                                color=colours[j], linestyle=":", linewidth=0.8)
    time_axis.set_xlabel("gradient time / NumPy time")
    memory_axis.set_xlabel("peak extra memory (MiB)")
    title = f"{workload.label} {workload.name}"
    if common:
        title += " (" + size_label(common) + ")"
    if absent:
        title += "\n" + "; ".join(f"{status}: {', '.join(systems)}"
                                  for status, systems in absent.items())
    time_axis.set_title(title, loc="left")
    if varying:
        memory_axis.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False,
                           handlelength=0.8, borderaxespad=0.1, labelspacing=0.2)


def _time_figure(result):
    return spread(result["ratios"])


def _memory_figure(result):
    return result["peak_extra_mib"], None, None
