"""``mutad-bench --xp cupy`` without a GPU: its device path on the CuPy-like stand-in.

The device benchmark takes its array namespace as a parameter (``cupy`` on a GPU); here it is
``tests/device_array.py``, which wraps NumPy and raises on an implicit conversion to NumPy, as
CuPy does. The tests run the workloads W2, W3, W5 and W6 through the device path at tiny sizes,
check that their gradients equal NumPy's, that the measurement produces its rows, and that the
timed calls copy nothing to the host where nothing is to be read. Nothing here reads a clock to
decide whether a test passes.
"""

import json
import os
import subprocess
import sys
import types
import weakref
from pathlib import Path

import numpy as np
import pytest

import device_array
import mutad
from mutad.bench import cli, device, peers
from mutad.bench.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
TINY = {name: WORKLOADS[name].sizes["tiny"][0] for name in device.WORKLOAD_NAMES}


def relative(a, b):
    scale = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / scale) if scale else float(np.max(np.abs(a - b)))


@pytest.mark.parametrize("system", ["mutad-restore", "mutad-checkpoint", "mutad-budget"])
@pytest.mark.parametrize("name", device.WORKLOAD_NAMES)
def test_device_gradients_are_numpys(name, system):
    problem = device.device_problem(name, TINY[name], device_array)
    assert all(type(a) is device_array.ndarray for a in problem.args
               if isinstance(a, device_array.ndarray | np.ndarray))
    implementation = device._mutad(system, problem)
    value, gradients = implementation.gradient()
    assert all(type(g) is device_array.ndarray for g in gradients if not isinstance(g, float))
    value, gradients = implementation.to_numpy((value, gradients))

    host = WORKLOADS[name].build(**TINY[name])  # the CPU workload, W3 with its Cholesky
    expected_value, expected = mutad.value_and_gradient(
        host.loss, *host.args, argnums=host.argnums, policy=peers._policy(system))
    assert value == pytest.approx(float(expected_value), rel=1e-12)
    for position, g, e in zip(host.argnums, gradients, expected, strict=True):
        if position in host.symmetric:  # A's gradient, as the harness compares it
            g, e = (g + g.T) / 2, (e + e.T) / 2
        assert relative(np.asarray(g), np.asarray(e)) <= 1e-9, (name, position)


@pytest.fixture
def counted_rounds(monkeypatch):
    """The timed rounds run as they are, counting the copies to the host they make (the
    stand-in counts every explicit one and raises on an implicit one)."""
    counted = []
    time_rounds = device.time_rounds

    def counting(calls, rounds):
        before = device_array.TRANSFERS[0]
        found = time_rounds(calls, rounds)
        counted.append(device_array.TRANSFERS[0] - before)
        return found

    monkeypatch.setattr(device, "time_rounds", counting)
    return counted


@pytest.mark.parametrize("system", ["mutad-checkpoint", "mutad-restore", "cupy"])
@pytest.mark.parametrize("name", device.WORKLOAD_NAMES)
def test_the_device_measurement_on_the_stand_in(name, system, tmp_path, counted_rounds):
    configuration = {"system": system, "workload": name, "params": TINY[name], "rounds": 2,
                     "check": True, "reference_dir": str(tmp_path)}
    row = device.measure(configuration, xp=device_array)
    assert row["status"] == "ok", row
    assert row["checks"]["ok"], row["checks"]
    assert row["xp"] == "device_array"
    assert len(row["gradient_seconds"]) == len(row["forward_seconds"]) == 2
    assert len(row["ratios"]) == 2 and row["own_ratios"] == []
    assert row["peak_extra_mib"] is None  # the stand-in has no memory pool
    if system == "cupy":
        assert row["first_call_seconds"] is None and row["checks"].get("gradient_error") is None
    else:
        assert row["checks"]["arguments_unchanged"] and row["checks"]["same_as_first_call"]
        assert row["checks"]["finite_difference_error"] <= 1e-6
    # The device forward and the checkpoint policy read nothing on the host in the timed
    # calls (3: one untimed, two timed), but W6's derivative with respect to its Python float
    # c, which mutad returns as a float; the restore policy reads a few numbers per write it
    # inverts (explicitly).
    if system == "cupy":
        assert counted_rounds == [0]
    elif system == "mutad-checkpoint":
        assert counted_rounds == [3 if name == "bratu-gs" else 0]


class Pointer:
    """What the fake pool's ``malloc`` returns (CuPy: a ``MemoryPointer``)."""


class FakePool:
    """CuPy's MemoryPool as far as PoolPeak uses it: ``malloc`` and ``used_bytes``, a block
    given back when its pointer is dropped."""

    def __init__(self):
        self.used = 0

    def used_bytes(self):
        return self.used

    def malloc(self, size):
        self.used += size
        pointer = Pointer()
        weakref.finalize(pointer, self._free, size)
        return pointer

    def _free(self, size):
        self.used -= size


def fake_cupy():
    pool = FakePool()
    cuda = types.SimpleNamespace(current=pool.malloc)
    cuda.set_allocator = lambda allocator: setattr(cuda, "current", allocator)
    cuda.get_allocator = lambda: cuda.current
    cuda.alloc = lambda size: cuda.current(size)
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool), pool


def test_the_pool_peak_is_the_highest_use_after_an_allocation():
    xp, pool = fake_cupy()
    held = xp.cuda.alloc(1000)  # in use before: not counted

    def call():
        a = xp.cuda.alloc(300)
        b = xp.cuda.alloc(200)  # 500 at once
        del a, b
        c = xp.cuda.alloc(400)  # less than 500 again
        return c

    kept, extra_mib = device.pool_peak(xp, call, lambda: None)
    assert extra_mib * device.MIB == 500
    assert xp.cuda.current == pool.malloc  # the pool's own allocator again
    del held, kept
    assert pool.used == 0


def test_the_defaults_on_a_device_fill_it_and_n_and_steps_replace_them():
    assert device.sizes("big-elementwise", "quick") == [{"n": 100_000_000}]
    assert device.sizes("leapfrog", "quick") == [{"n": 10_000_000, "steps": 20}]
    assert device.sizes("leapfrog", "quick", steps=[5], n=[30]) == [{"n": 30, "steps": 5}]


def options(*argv):
    parsed = cli.parser().parse_args(list(argv))
    parsed.argv = list(argv)
    return parsed


def test_a_workload_that_does_not_run_on_a_device_is_refused():
    with pytest.raises(cli.UsageError, match="W2.*not 'small-ops'"):
        cli.resolve_device(options("--xp", "cupy", "--workloads", "small-ops"))
    with pytest.raises(cli.UsageError, match="unknown system 'autograd'"):
        cli.resolve_device(options("--xp", "cupy", "--systems", "autograd"))
    mode, workloads, systems = cli.resolve_device(options("--xp", "cupy", "--systems", "mutad,jax"))
    assert workloads == list(device.WORKLOAD_NAMES)
    assert systems == [*device.MUTAD_DEVICE_SYSTEMS, "jax"]


def test_the_device_run_end_to_end_on_the_stand_in(tmp_path, monkeypatch, capsys):
    """The CLI's device path with the stand-in's namespace: fresh interpreters, the tables, the
    JSON; the peers where they are installed (not here: 'not installed')."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    path = tmp_path / "run.json"
    chosen = options("--xp", "cupy", "--workloads", "W2,W3", "--systems",
                     "mutad-checkpoint,cupy,torch", "--n", "12", "--steps", "2", "--reps", "1",
                     "--no-progress", "--no-save", "--json", str(path), "--markdown")
    status = cli.run_device(chosen, namespace_name="device_array")
    printed = capsys.readouterr().out
    assert status == 0, printed
    document = json.loads(path.read_text())
    assert document["xp"] == "cupy" and document["environment"]["gpu_facts"]["xp"] == "device_array"
    rows = {(r["workload"], r["system"]): r for r in document["results"]}
    assert len(rows) == 6
    for name in ("leapfrog", "implicit-heat"):
        for system in ("mutad-checkpoint", "cupy"):
            assert rows[name, system]["status"] == "ok", rows[name, system]
            assert rows[name, system]["checks"]["ok"]
        assert rows[name, "torch"]["status"] in ("not installed", "ok")
    assert "**W2 leapfrog" in printed and "| n=12 steps=2 | mutad-checkpoint |" in printed
    assert "peak MiB" in printed and "/dev fwd" in printed
    # --from-json reports it again
    assert cli.run(options("--from-json", str(path), "--markdown")) == 0
    assert "**W3 implicit-heat" in capsys.readouterr().out


def test_without_cupy_the_device_run_says_so_in_one_line():
    try:
        device.find_cupy()
    except device.NoDevice:
        pass
    else:
        pytest.skip("cupy finds a GPU here")
    run = subprocess.run([sys.executable, "-m", "mutad.bench", "--xp", "cupy", "--no-save"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("mutad-bench: --xp cupy needs CuPy and a GPU: cupy")
