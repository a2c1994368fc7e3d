"""The benchmark workloads at tiny sizes: right losses, right gradients, arguments unchanged.

Correctness only; nothing here asserts a timing or a workload's memory figure. No peer is
needed.
"""

import functools
import subprocess
import sys

import numpy as np
import pytest

from mutad.bench import peers, report
from mutad.bench.harness import check, fingerprint, measure, run_in_fresh_interpreter
from mutad.bench.report import format_workload
from mutad.bench.workloads import (
    WORKLOADS,
    build_big_elementwise,
    build_explicit_heat,
    build_explicit_heat_scalar,
    build_implicit_heat,
    build_leapfrog,
    build_small_ops,
    implicit_heat_by_eigenvalues,
    leapfrog_out_of_place,
)

TINY = [(name, params) for name, workload in WORKLOADS.items() if not workload.behaviour_only
        for params in workload.sizes["tiny"]]


@pytest.mark.parametrize("system", peers.MUTAD_SYSTEMS)
@pytest.mark.parametrize(("name", "params"), TINY,
                         ids=[f"{name}-{'-'.join(map(str, p.values()))}" for name, p in TINY])
def test_workload_gradient_is_right(name, params, system, tmp_path):
    problem = WORKLOADS[name].build(**params)
    before = [a.tobytes() if isinstance(a, np.ndarray) else a for a in problem.args]
    implementation = peers.implementation(system, name, problem)
    first_call = fingerprint(*implementation.to_numpy(implementation.gradient()))
    # The second call is the one the harness checks: for mutad-replay, a replayed one.
    value, gradients = implementation.to_numpy(implementation.gradient())
    checks = check(problem, name, system, value, gradients, tmp_path, before, first_call)
    assert checks["ok"], checks
    assert checks["same_as_first_call"] and checks["arguments_unchanged"]


def test_small_ops_matches_the_published_loss():
    problem = build_small_ops()
    assert problem.numpy_forward(*problem.args) == pytest.approx(0.87272429875160, rel=1e-13)


def test_big_elementwise_closed_form_matches_the_in_place_code():
    problem = build_big_elementwise(n=1001)
    assert problem.numpy_forward(*problem.args) == pytest.approx(problem.reference_loss(),
                                                                 rel=1e-13)


def test_leapfrog_in_place_and_out_of_place_spellings_agree():
    problem = build_leapfrog(n=300, steps=20)
    q0, p0, steps = problem.args
    assert problem.numpy_forward(*problem.args) == pytest.approx(
        leapfrog_out_of_place(q0, p0, steps), rel=1e-12)


def test_implicit_heat_matches_the_published_loss_at_t10():
    problem = build_implicit_heat(n=1000, steps=10)
    assert problem.numpy_forward(*problem.args) == pytest.approx(611.67995794183, rel=1e-12)


def test_implicit_heat_eigenvalue_reference_agrees_with_the_solves():
    problem = build_implicit_heat(n=200, steps=50)
    assert implicit_heat_by_eigenvalues(*problem.args) == pytest.approx(
        problem.numpy_forward(*problem.args), rel=1e-10)


def test_heat_scalar_steps_are_those_of_the_vectorised_stepper_bit_for_bit():
    # Each point update is the vectorised one's arithmetic on one element, in the same order.
    scalar, vectorised = build_explicit_heat_scalar(n=40, steps=7), build_explicit_heat(40, 7)
    assert scalar.numpy_forward(*scalar.args) == vectorised.numpy_forward(*vectorised.args)
    assert scalar.operations == 7 * 38


def test_a_configuration_runs_in_a_fresh_interpreter_and_reports(tmp_path):
    configuration = {"system": "mutad-restore", "workload": "heat-explicit",
                     "params": {"n": 50, "steps": 3}, "rounds": 1, "check": True,
                     "reference_dir": str(tmp_path)}
    result = run_in_fresh_interpreter(configuration, timeout=120)
    assert result["status"] == "ok", result
    assert result["checks"]["ok"], result["checks"]
    assert result["checks"]["same_as_first_call"]
    assert result["first_call_seconds"] > 0 and result["kept_mib"] is not None
    table = format_workload(WORKLOADS["heat-explicit"], [result])
    assert "n=50 steps=3" in table and "mutad-restore" in table


@pytest.mark.slow
def test_replay_is_checked_on_a_replayed_call_and_its_recording_is_reported(tmp_path):
    rows = [run_in_fresh_interpreter(
        {"system": system, "workload": "heat-scalar", "params": {"n": 10, "steps": 2},
         "rounds": 2, "check": True, "reference_dir": str(tmp_path)}, timeout=120)
        for system in ("mutad-checkpoint", "mutad-restore", "mutad-replay")]
    report.annotate_first_calls(rows)
    replay = rows[-1]
    assert replay["status"] == "ok", replay
    assert replay["checks"]["ok"] and replay["checks"]["same_as_first_call"], replay["checks"]
    assert replay["traced_instead"] is None  # the scalar loops are replayed
    assert replay["second_call_seconds"] > 0  # which compiles, timed on its own
    assert replay["first_call_over_traced"] == pytest.approx(
        replay["first_call_seconds"] / np.median(rows[1]["gradient_seconds"]))
    table = report.format_replay(rows, ["heat-scalar"])
    assert "scalar heat-scalar" in table and "n=10 steps=2" in table


def synthetic_row(system, first_call_seconds, gradient_seconds, workload="small-ops"):
    return {"system": system, "workload": workload, "params": {"groups": 25}, "status": "ok",
            "first_call_seconds": first_call_seconds, "gradient_seconds": gradient_seconds,
            "ratios": [2.0, 3.0, 4.0], "kept_mib": 0.5}


def test_the_recording_is_set_against_the_traced_gradient_of_the_same_size():
    rows = [synthetic_row("mutad-restore", 0.012, [0.010, 0.011, 0.009]),
            {**synthetic_row("mutad-replay", 0.015, [0.001, 0.002, 0.003]),
             "second_call_seconds": 0.03},
            {**synthetic_row("mutad-replay", 0.015, [0.001], workload="big-elementwise"),
             "traced_instead": "its records would keep too much"}]
    report.annotate_first_calls(rows)
    assert rows[1]["first_call_over_traced"] == pytest.approx(1.5)  # over the median, 10 ms
    assert rows[2]["first_call_over_traced"] is None  # no traced row for this workload
    table = report.format_replay(rows, ["small-ops", "big-elementwise"]).splitlines()
    small_ops, big_elementwise = table[3].split(), table[4].split()
    # replays, traced, recording, rec/traced, rec/traced 1st, 2nd call, later, later/traced
    assert small_ops[3:11] == ["yes", "10", "15", "1.5", "1.25", "30", "2", "0.2"]
    assert big_elementwise[3:8] == ["no", "(1)", "-", "15", "-"]
    assert table[5] == "(1) traced on every call: its records would keep too much"
    assert report.format_replay(rows[:1], ["small-ops"]) == ""


def test_a_result_that_is_not_the_first_calls_fails_the_check(tmp_path):
    problem = WORKLOADS["small-ops"].build(groups=5)
    implementation = peers.implementation("mutad-restore", "small-ops", problem)
    value, gradients = implementation.to_numpy(implementation.gradient())
    other = fingerprint(value, [np.nextafter(gradients[0], np.inf)])
    checks = check(problem, "small-ops", "mutad-restore", value, gradients, tmp_path,
                   first_call=other)
    assert not checks["ok"] and checks["same_as_first_call"] is False
    assert "not the first call's bits" in report._check_label({"checks": checks})


def test_a_mutad_system_wrong_on_addvecs_makes_its_row_wrong(monkeypatch):
    wrong = {"ok": False, "text": "gradient wrt a = 0, wrt b = 1: WRONG, silently"}
    monkeypatch.setattr(peers, "behaviour", lambda system, problem: {
        "a += b": wrong, "a[:] += b": wrong, "workaround": "none needed",
        "workaround outcome": wrong, "caller's a mutated": False})
    result = measure({"system": "mutad-restore", "workload": "addvecs", "params": {"n": 10},
                      "rounds": 1})
    assert result["status"] == "wrong"
    assert "WRONG, silently" in format_workload(WORKLOADS["addvecs"], [result])


def test_a_configuration_past_its_time_limit_is_reported_as_timeout(tmp_path):
    configuration = {"system": "mutad-restore", "workload": "leapfrog",
                     "params": {"n": 100_000, "steps": 1000}, "rounds": 1, "check": True,
                     "reference_dir": str(tmp_path)}
    result = run_in_fresh_interpreter(configuration, timeout=0.5)
    assert result["status"] == "timeout"


def test_a_configuration_past_its_memory_limit_is_reported_as_out_of_memory(tmp_path):
    configuration = {"system": "mutad-checkpoint", "workload": "big-elementwise",
                     "params": {"n": 10_000_000}, "rounds": 1, "check": True,
                     "reference_dir": str(tmp_path)}
    result = run_in_fresh_interpreter(configuration, timeout=120, memory_limit_mib=60)
    assert result["status"] == "out of memory"


def test_a_missing_peer_is_reported_as_not_installed(monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "installed", lambda system: system != "torch")
    configuration = {"system": "torch", "workload": "leapfrog", "params": {"n": 20, "steps": 3},
                     "rounds": 1, "check": True, "reference_dir": str(tmp_path)}
    assert run_in_fresh_interpreter(configuration)["status"] == "not installed"


@pytest.mark.parametrize("system", peers.MUTAD_SYSTEMS)
def test_mutad_handles_the_literal_addvecs(system):
    found = peers.behaviour(system, WORKLOADS["addvecs"].build(n=10))
    assert found["a += b"]["ok"] and found["a[:] += b"]["ok"], found
    assert not found["caller's a mutated"]


def test_a_gradient_with_nan_fails_the_comparison():
    from mutad.bench.harness import relative_difference

    assert relative_difference(np.array([np.nan, 1.0]), np.ones(2)) == float("inf")


PINNED_ALLOCATOR_PROBE = """
import sys
import numpy as np
from mutad.bench import harness
np.ones(8 * 1024 * 1024 // 8)  # a history: freeing 8 MiB raises glibc's mmap threshold
if sys.argv[1] != "none" and harness.pin_allocator(sys.argv[1]) is None:
    print("unpinned")
    raise SystemExit
block = np.ones(4 * 1024 * 1024 // 8)  # 4 MiB: glibc's defaults would map it, then keep it
held = harness.status_kib("VmRSS")
del block
freed = harness.status_kib("VmRSS")
harness.release_free_memory()
print(held - freed, freed - harness.status_kib("VmRSS"))
"""


def allocator_probe(state):
    """KiB handed back when a 4 MiB block is freed, and then by release_free_memory."""
    probe = subprocess.run([sys.executable, "-c", PINNED_ALLOCATOR_PROBE, state],
                           capture_output=True, text=True, check=True)
    if probe.stdout.strip() == "unpinned":
        pytest.skip("malloc's thresholds cannot be pinned here (not glibc)")
    return tuple(map(int, probe.stdout.split()))


def test_for_peaks_the_pinned_allocator_unmaps_a_freed_block_at_once():
    # A freed block the heap kept would count in VmRSS, inflating a peak that follows it.
    unmapped_on_free_kib, _ = allocator_probe("peak")
    assert unmapped_on_free_kib > 3 * 1024


def test_for_timing_the_pinned_allocator_keeps_freed_blocks_until_memory_is_measured():
    # Timed calls must find memory already mapped whatever ran before them, and the peak
    # measurement must still start from live data only.
    kept_on_free_kib, handed_back_kib = allocator_probe("timing")
    assert kept_on_free_kib < 1024
    assert handed_back_kib > 3 * 1024


# ----------------------------------------------------------------------------------------------
# benchmarks/scipy_solvers.py: its workloads at tiny sizes, so that the script cannot rot.


@functools.cache
def scipy_solvers():
    """The script as a module, loaded once: the workloads' functions are module-level."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "scipy_solvers.py"
    spec = importlib.util.spec_from_file_location("scipy_solvers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scipy_solvers_heat_variants_agree_and_match_finite_differences():
    import mutad

    bench = scipy_solvers()
    log_k, u0, target = bench.heat_inputs(60)
    value, splu = mutad.value_and_grad(bench.heat_splu)(log_k, u0, target, 3)
    _, spsolve = mutad.value_and_grad(bench.heat_spsolve)(log_k, u0, target, 3)
    assert value == bench.heat_splu(log_k, u0, target, 3)
    np.testing.assert_allclose(spsolve, splu, rtol=1e-10, atol=1e-14 * np.abs(splu).max())
    direction = bench.fd_direction("heat", log_k.size)
    estimate = bench.directional_difference(
        lambda x: bench.heat_splu(x, u0, target, 3), log_k, direction, 1e-3)
    assert splu @ direction == pytest.approx(estimate, rel=1e-6)


def test_scipy_solvers_ode_gradient_matches_finite_differences():
    import mutad

    bench = scipy_solvers()
    theta, counts, t_eval = bench.ode_inputs(2)
    gradient = mutad.grad(bench.ode_misfit)(theta, counts, t_eval)
    direction = bench.fd_direction("ode", 4)
    estimate = bench.directional_difference(
        lambda x: bench.ode_misfit(x, counts, t_eval), theta, direction, 1e-4)
    assert gradient @ direction == pytest.approx(estimate, rel=1e-4)


def test_scipy_solvers_runs_its_mutad_rows_in_fresh_interpreters():
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "scipy_solvers.py"
    run = subprocess.run(
        [sys.executable, str(script), "--systems", "mutad-splu,mutad-spsolve,mutad",
         "--heat-n", "200", "--heat-steps", "2", "--ode-spans", "1", "--rounds", "1",
         "--no-progress"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith(("| heat", "| ode"))]
    assert len(rows) == 3 and all(" ok " not in row for row in rows), rows  # no status text
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2] in ("mutad-splu", "mutad-spsolve", "mutad")
        assert cells[8] == "0e+00" and cells[9] in ("ref", "0e+00"), row  # loss, gradient
        assert float(cells[10]) < 1e-4, row  # against finite differences


def test_scipy_solvers_reports_a_missing_peer(monkeypatch):
    bench = scipy_solvers()
    monkeypatch.setattr(bench, "installed", lambda system: False)
    printed = []
    options = bench.parse(["--workloads", "ode", "--systems", "diffrax", "--ode-spans", "1",
                           "--no-progress"])
    rows = bench.run(options, out=printed.append)
    assert [row["status"] for row in rows] == ["not installed"]
    assert "| ode | span=1 | diffrax | not installed" in printed[0]


def test_the_workloads_run_as_a_users_module_would():
    """What mutad differentiates is compiled again outside mutad's modules, so that the
    allocation mode follows what it allocates (the Kalman filter writes traced values into
    arrays it allocates); without its sources, as it is."""
    from mutad.bench import workloads

    assert workloads.kalman_nll.__globals__["__name__"] == "mutad_bench_user_code"
    assert workloads.leapfrog.__globals__ is workloads.fpu_force.__globals__
    assert workloads.leapfrog.__code__.co_filename == workloads.__file__


def test_workloads_without_their_sources_run_as_they_are(monkeypatch):
    import inspect

    from mutad.bench import workloads

    def no_source(function):
        raise OSError("could not get source code")

    monkeypatch.setattr(inspect, "getsourcelines", no_source)
    assert workloads.as_user_code(workloads.grid) == (workloads.grid,)
