"""mutad-bench at tiny sizes: every workload under mutad's systems (its policies and the replay),
the tables, the JSON, CSV and plot files, a saved run reported again, the progress it prints
and argument errors. No peer is needed; nothing asserts a timing."""

import csv
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mutad.bench import cli, peers, report
from mutad.bench.cli import Progress
from mutad.bench.workloads import DEFAULT_WORKLOADS, WORKLOADS

# The slow kind (the benchmark command, in fresh interpreters): not in the fast subset,
# python -m pytest -m "not slow".
pytestmark = pytest.mark.slow

SAVED_RUN = Path(__file__).resolve().parent.parent / "benchmarks" / "results.json"
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib is not installed (the 'bench' extra)")

TINY = ["--n", "20", "--steps", "3", "--reps", "1", "--no-progress"]
# A limit for a run of the command, for a command that hangs: most of a run's time is its
# children's start (each imports mutad, SciPy's modules included), about 2 s of CPU apiece, and a
# loaded 2-core machine running two test workers beside it gives them a fraction of a core, so
# the limit is the whole suite's budget rather than a multiple of the run's time on an idle one.
RUN_LIMIT_SECONDS = 900


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One run of the default workloads at tiny sizes, with every output file asked for."""
    directory = tmp_path_factory.mktemp("run")
    paths = {"json": directory / "run.json", "csv": directory / "run.csv",
             "plot": directory / "plot.png"}
    arguments = [*TINY, "--systems", "mutad", "--json", str(paths["json"]),
                 "--csv", str(paths["csv"]), "--save-to", str(directory / "saved")]
    if importlib.util.find_spec("matplotlib") is not None:
        arguments += ["--plot", str(paths["plot"])]
    completed = subprocess.run([sys.executable, "-m", "mutad.bench", *arguments],
                               capture_output=True, text=True, timeout=RUN_LIMIT_SECONDS)
    return completed, paths


def test_every_workload_runs_and_is_right_under_every_mutad_system(tiny_run):
    completed, _ = tiny_run
    assert completed.returncode == 0, completed.stdout + completed.stderr
    table = completed.stdout
    for heading in ("W1 addvecs", "W2 leapfrog", "W3 implicit-heat", "W4 small-ops",
                    "W5 big-elementwise", "W6 bratu-gs", "scalar heat-scalar"):
        assert heading in table
    for system in peers.MUTAD_SYSTEMS:
        assert system in table
    assert "WRONG" not in table and "error" not in table
    assert "peak MiB" in table and "/NumPy fwd" in table and "grad err" in table
    # mutad-replay's recording call, set against the traced gradient, one row per size
    assert "mutad-replay: the first call records" in table
    assert "recording ms" in table and "rec/traced" in table and "kept MiB" in table
    replay_table = table[table.index("mutad-replay: the first call records"):]
    assert "W6 bratu-gs" in replay_table and "scalar heat-scalar" in replay_table


def test_the_run_says_where_it_wrote_its_files_and_no_progress_silences_stderr(tiny_run):
    completed, paths = tiny_run
    written = [name for name in ("json", "csv", "plot") if paths[name].exists()]
    assert written == (["json", "csv", "plot"] if importlib.util.find_spec("matplotlib")
                       else ["json", "csv"])
    for name in written:
        assert f": {paths[name].resolve()}\n" in completed.stdout
    assert completed.stderr == ""


def test_json_has_the_schema(tiny_run):
    _, paths = tiny_run
    document = json.loads(paths["json"].read_text())
    assert document["schema"] == "mutad-bench/1"
    assert {"command", "mode", "method", "environment", "results"} <= set(document)
    assert {"python", "cpu", "processor_count", "versions"} <= set(document["environment"])
    assert document["environment"]["versions"]["numpy"]
    results = document["results"]
    assert {r["workload"] for r in results} == set(DEFAULT_WORKLOADS)
    for result in results:
        assert result["status"] == "ok", result
        assert {"system", "workload", "params", "version"} <= set(result)
        if result["workload"] == "addvecs":
            assert "behaviour" in result
            continue
        assert result["memory_method"] in ("VmHWM", "sampled")
        assert result["peak_extra_mib"] is not None
        assert len(result["gradient_seconds"]) == len(result["ratios"]) == 1
        assert result["checks"]["ok"]
        assert result["first_call_seconds"] > 0 and result["kept_mib"] is not None
        if result["system"].startswith("mutad"):
            assert result["checks"]["arguments_unchanged"]
            assert result["checks"]["same_as_first_call"]
        if result["system"] == "mutad-replay":
            assert result["first_call_over_traced"] > 0
            assert "traced_instead" in result  # None, or mutad's reason


def test_csv_has_one_row_per_configuration(tiny_run):
    _, paths = tiny_run
    with open(paths["csv"], newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == len(DEFAULT_WORKLOADS) * len(peers.MUTAD_SYSTEMS)  # per workload, system
    assert {"workload", "system", "peak_extra_mib", "ratio_to_numpy_median", "gradient_error",
            "first_call_seconds", "first_call_over_traced", "kept_mib", "traced_instead",
            "python", "cpu", "method"} <= set(rows[0])
    assert all(row["status"] == "ok" for row in rows)


@needs_matplotlib
def test_plot_is_written_when_matplotlib_is_present(tiny_run):
    _, paths = tiny_run
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_matplotlib
def test_a_saved_run_is_reported_and_drawn_again_without_running(tiny_run, tmp_path, capsys):
    _, paths = tiny_run
    plot = tmp_path / "again.png"
    assert cli.main(["--from-json", str(paths["json"]), "--plot", str(plot),
                     "--workloads", "W2,W4"]) == 0
    out = capsys.readouterr().out
    assert f"the run saved in {paths['json']}" in out
    assert "W2 leapfrog" in out and "W4 small-ops" in out and "W6 bratu-gs" not in out
    assert f"wrote the plot: {plot.resolve()}" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_committed_results_reproduce_the_committed_tables(capsys):
    # RESULTS.md's tables are what --from-json prints from results.json, so the plot drawn
    # from that file shows the numbers the page quotes.
    assert cli.main(["--from-json", str(SAVED_RUN), "--markdown"]) == 0
    printed = {line for line in capsys.readouterr().out.splitlines() if line.startswith("|")}
    committed = {line for line in (SAVED_RUN.parent / "RESULTS.md").read_text().splitlines()
                 if line.startswith("|")}
    assert printed == committed


def _tables(markdown):
    """The Markdown tables of a page: a list of (header, rows), each row a list of cells."""
    tables, lines = [], markdown.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and lines[i + 1].startswith("|---"):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in row.strip("|").split(" | ")])
            tables.append(([cell.strip() for cell in line.strip("|").split(" | ")], rows))
    return tables


def test_the_comparison_page_quotes_the_committed_results():
    page = (SAVED_RUN.parent.parent / "docs" / "comparison.md").read_text()
    results = json.loads(SAVED_RUN.read_text())["results"]
    quoted = [t for t in _tables(page) if t[0][:2] == ["workload", "mutad-restore"]]
    assert [("numpy forward" in header) for header, _ in quoted] == [True, False]
    for header, rows in quoted:
        memory = "numpy forward" in header
        for row in rows:
            label, _, size = row[0].partition(", T = ")  # "W2 leapfrog, T = 1,000"
            label, steps = label.split()[0], int(size.replace(",", "")) if size else None
            for system, cell in zip(header[1:], row[1:], strict=True):
                system = "numpy" if system == "numpy forward" else system
                [found] = [r for r in results if r["label"] == label and r["system"] == system
                           and r["params"].get("steps") == steps]
                expected = (f"{found['peak_extra_mib']:.1f}" if memory else
                            report._number(report.spread(found["ratios"])[0]))
                assert cell == expected, (row[:2], system)


def _overlapping(boxes):
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]


@needs_matplotlib
def test_the_plot_is_a_grid_of_time_and_memory_panels_on_logarithmic_axes():
    document = json.loads(SAVED_RUN.read_text())
    measured = {row["workload"] for row in document["results"]}  # the saved run's workloads
    names = [n for n in WORKLOADS if not WORKLOADS[n].behaviour_only and n in measured]
    figure = report.plot_figure(document["results"], names, document["environment"])
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = [axis for axis in figure.axes if axis.axison]
    assert len(axes) == 2 * len(names)  # a (time, memory) pair per workload
    assert figure.get_figwidth() == report.PLOT_WIDTH_INCHES  # two pairs a row, a page wide
    for pair, name in enumerate(names):
        time_axis, memory_axis = axes[2 * pair], axes[2 * pair + 1]
        assert time_axis.get_title(loc="left").startswith(f"{WORKLOADS[name].label} {name}")
        assert "NumPy" in time_axis.get_xlabel() and "MiB" in memory_axis.get_xlabel()
        # NumPy is the baseline line, not a row of bars
        assert "numpy" not in {t.get_text() for t in time_axis.get_yticklabels()}
        for axis in (time_axis, memory_axis):
            assert axis.get_xscale() == "log"
            for labels in (axis.get_yticklabels(), axis.get_xticklabels(), axis.texts):
                boxes = [t.get_window_extent(renderer) for t in labels if t.get_text()]
                assert not _overlapping(boxes), (name, [t.get_text() for t in labels])
            # every bar starts at the axis's left end and ends at its value, written beside it
            values = {t.get_text().removesuffix(" WRONG") for t in axis.texts}
            for bar in axis.patches:
                assert bar.get_x() == axis.get_xlim()[0]
                assert report._number(bar.get_x() + bar.get_width()) in values
    labels = [t for axis in axes for t in (axis.title, axis._left_title, axis._right_title,
                                           axis.xaxis.label) if t.get_text()]
    assert not _overlapping([t.get_window_extent(renderer) for t in labels]), [
        t.get_text() for t in labels]
    systems = {t.get_text() for t in axes[0].get_yticklabels()}
    assert {"mutad-restore", "jax", "autograd"} <= systems
    [caption] = [t.get_text() for t in figure.texts]
    versions = document["environment"]["versions"]
    for fact in (document["environment"]["cpu"], f"NumPy {versions['numpy']}",
                 f"JAX {versions['jax']}"):
        assert fact in caption.replace("\n", " ")
    import matplotlib.pyplot as plt

    plt.close(figure)


@needs_matplotlib
def test_the_plot_is_written_at_print_resolution(tmp_path):
    document = json.loads(SAVED_RUN.read_text())
    path = tmp_path / "figure.png"
    report.plot(path, document["results"], ["leapfrog"], document["environment"])
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    assert width == round(report.PLOT_WIDTH_INCHES * report.PLOT_DPI)


def test_a_run_saves_its_tables_and_measurements_and_explains_its_figures(tiny_run):
    completed, paths = tiny_run
    [table] = (paths["json"].parent / "saved").glob("mutad-bench-*.txt")
    [measurements] = (paths["json"].parent / "saved").glob("mutad-bench-*.json")
    assert table.stem == measurements.stem
    assert f"wrote the tables: {table.resolve()}\n" in completed.stdout
    assert f": {measurements.resolve()}\n" in completed.stdout
    saved = table.read_text()
    assert "W2 leapfrog" in saved and "How to read the tables" in saved
    assert saved in completed.stdout  # the tables as printed
    assert json.loads(measurements.read_text())["schema"] == report.SCHEMA
    # no peer ran: no column for a peer's own forward, and no allocator jargon
    assert "/own fwd" not in completed.stdout and "VmHWM" not in completed.stdout
    assert "mutad-budget" in saved.split("How to read the tables")[1]


def test_progress_is_printed_as_lines_when_stderr_is_not_a_terminal(tmp_path):
    # Run in an empty folder, mutad from this checkout, to see where the results go by default.
    checkout = str(Path(__file__).resolve().parent.parent)
    completed = subprocess.run(
        [sys.executable, "-m", "mutad.bench", "--workloads", "W4,W1", "--systems",
         "mutad-restore,numpy", "--reps", "1", "--progress-every", "0.05"],
        capture_output=True, text=True, timeout=RUN_LIMIT_SECONDS, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": checkout})
    assert completed.returncode == 0, completed.stderr
    saved = sorted(p.suffix for p in (tmp_path / cli.SAVE_TO).iterdir())
    assert saved == [".json", ".txt"]
    assert str(tmp_path / cli.SAVE_TO) in completed.stdout
    lines = completed.stderr.splitlines()
    assert lines and all(line.startswith("mutad-bench: ") for line in lines)
    assert lines[0].startswith("mutad-bench: W4 small-ops: starting 2 runs (runs 1-2 of 4)")
    assert lines[-1].startswith("mutad-bench: W1 addvecs: done (2 ok); 4 of 4 runs done")
    assert any(line.startswith("mutad-bench: W4 small-ops: done (2 ok); 2 of 4 runs done")
               for line in lines)
    assert any(line.startswith("mutad-bench: W1 addvecs: starting 2 runs") for line in lines)
    ticks = [line for line in lines if re.match(
        r"mutad-bench: \[\d/4\] W\d \S+ \S+=[\d,]+ \S+: running for \d+:\d\d; \d of 4 runs "
        r"done, \d+:\d\d elapsed$", line)]
    assert ticks, lines  # a fresh interpreter per run takes far longer than 0.05 s


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_is_a_bar_and_lines_without_tqdm(monkeypatch):
    plan = [{"workload": "small-ops", "params": {"groups": 250}, "system": "numpy"}]
    if importlib.util.find_spec("tqdm") is not None:
        progress = Progress(plan, stream=_Terminal())
        assert progress.bar is not None and not progress.lines
        progress.close()
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    stream = _Terminal()
    progress = Progress(plan, stream=stream, every=60)
    assert progress.bar is None and progress.lines
    progress.start(plan[0])
    progress.finish(plan[0], {"status": "ok"})
    progress.close()
    assert stream.getvalue().splitlines()[-1].startswith(
        "mutad-bench: W4 small-ops: done (1 ok); 1 of 1 runs done")
    silent = _Terminal()
    quiet = Progress(plan, enabled=False, stream=silent, every=0.01)
    quiet.start(plan[0])
    quiet.finish(plan[0], {"status": "ok"})
    quiet.close()
    assert silent.getvalue() == ""


@pytest.mark.parametrize("arguments", [
    ["--workloads", "nonsense"],
    ["--systems", "tensorflow"],
    ["--steps", "ten"],
    ["--steps", "0"],
    ["--reps", "-1"],
    ["--n", "1,x"],
    ["--timeout", "0"],
    ["--workloads", "small-ops", "--steps", "10"],
    ["--unknown-option"],
    ["--from-json", "results.json", "--steps", "3"],
    ["--from-json", "results.json", "--json", "again.json"],
    ["--from-json", "no-such-file.json"],
    ["--progress-every", "0"],
])
def test_bad_arguments_exit_2_with_a_message(arguments, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(arguments)
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "mutad-bench: error:" in error and len(error.strip().splitlines()[-1]) > 30


def test_help_explains_each_figure(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--help"])
    assert stopped.value.code == 0
    text = capsys.readouterr().out
    for figure in ("peak MiB", "/NumPy fwd", "/own fwd", "grad err", "fd err", "--steps",
                   "--plot", "--json", "--csv", "--systems", "mutad-replay", "recording ms",
                   "rec/traced", "later ms", "replays", "kept MiB", "heat-scalar",
                   "--from-json", "--progress-every", "docs/workloads.md", "--save-to",
                   "--no-save", "mutad-budget"):
        assert figure in text


def test_sizes_replace_only_the_parameters_a_workload_has():
    from mutad.bench.workloads import WORKLOADS

    assert cli.sizes(WORKLOADS["leapfrog"], "quick", steps=[5, 7], n=[30]) == [
        {"n": 30, "steps": 5}, {"n": 30, "steps": 7}]
    assert cli.sizes(WORKLOADS["small-ops"], "quick", steps=[5], n=[30]) == [{"groups": 250}]


def test_workloads_are_found_by_name_or_label_in_any_case():
    # The labels "heat" and "scalar" are lower case; W1-W6 are typed either way.
    options = cli.parser().parse_args(["--workloads", "w4,W2,heat,scalar,bratu-gs"])
    _, workloads, _ = cli._resolve(options)
    assert workloads == ["small-ops", "leapfrog", "heat-explicit", "heat-scalar", "bratu-gs"]
