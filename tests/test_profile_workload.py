"""benchmarks/profile_workload.py: its ``--parts`` view of a replayed gradient, so that the script
cannot rot. No test reads a clock to decide: the times are only printed."""

import functools
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mutad
from mutad.bench.workloads import WORKLOADS
from mutad.core.tape import Tape

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "profile_workload.py"


@functools.cache
def script():
    """The script's functions by name, loaded once."""
    return runpy.run_path(str(PATH))


def test_parts_name_the_replayed_steps_and_records_and_leave_the_replay_as_it_was():
    problem = WORKLOADS["big-elementwise"].build(n=1000)
    gradient = mutad.value_and_grad(problem.loss, argnums=problem.argnums, replay=True)
    gradient(*problem.args)  # records
    value, (g,) = gradient(*problem.args)  # replays and compiles
    reverse, program = Tape.reverse, next(iter(gradient.programs.values()))
    steps = program.steps
    ratio, shares = script()["parts"](gradient, problem, 2)
    assert ratio > 0 and all(share >= 0 for share in shares.values())
    # (at this size the replay compiles the steps between the writes into blocks; a step whose
    # partial reads its output stays a step of its own)
    assert {"step Block", "reverse Block"} <= shares.keys()
    assert any(name.startswith("step Pure ") for name in shares)
    assert Tape.reverse is reverse and program.steps is steps
    value_after, (g_after,) = gradient(*problem.args)
    assert value_after == value and np.array_equal(g_after.view(np.int64), g.view(np.int64))


@pytest.mark.slow
def test_the_script_prints_the_parts_of_a_workload():
    run = subprocess.run([sys.executable, str(PATH), "big-elementwise", "--param", "n=1000",
                          "--parts", "--calls", "2"], capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("W5 big-elementwise") and lines[1].startswith("gradient")
    assert any(line.split()[:2] == ["step", "Block"] for line in lines[2:])
