"""mutad-bench at tiny sizes: every workload under mutad's systems (its policies and the replay),
the tables, the JSON, CSV and plot files, and argument errors. No peer is needed; nothing
asserts a timing."""

import csv
import importlib.util
import json
import subprocess
import sys

import pytest

from mutad.bench import cli, peers
from mutad.bench.workloads import DEFAULT_WORKLOADS

TINY = ["--n", "20", "--steps", "3", "--reps", "1", "--no-progress"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One run of the default workloads at tiny sizes, with every output file asked for."""
    directory = tmp_path_factory.mktemp("run")
    paths = {"json": directory / "run.json", "csv": directory / "run.csv",
             "plot": directory / "memory.png"}
    arguments = [*TINY, "--systems", "mutad", "--json", str(paths["json"]),
                 "--csv", str(paths["csv"])]
    if importlib.util.find_spec("matplotlib") is not None:
        arguments += ["--plot", str(paths["plot"])]
    completed = subprocess.run([sys.executable, "-m", "mutad.bench", *arguments],
                               capture_output=True, text=True, timeout=300)
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


def test_plot_is_written_when_matplotlib_is_present(tiny_run):
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (the 'bench' extra)")
    _, paths = tiny_run
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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
                   "rec/traced", "later ms", "replays", "kept MiB", "heat-scalar"):
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
