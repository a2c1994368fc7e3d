"""Every program of benchmarks/field_programs.py runs unchanged at its tiny size: its value is
NumPy's, its gradient matches finite differences, and the caller's arrays come back bit-for-bit."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "field_programs.py"
spec = importlib.util.spec_from_file_location("field_programs", PATH)
field_programs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(field_programs)


@pytest.mark.parametrize("program", field_programs.PROGRAMS, ids=lambda p: p.name)
def test_field_program_runs_unchanged(program):
    row = field_programs.run(program, program.sizes[0], rounds=0)
    assert row["ran"], row.get("traceback")
    assert row["restored"]
    assert row["value_error"] <= 1e-12
    assert row["finite_difference"] < 1e-5
