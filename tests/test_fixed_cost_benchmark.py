"""benchmarks/fixed_cost.py: the code its interpreters run, here in one, at a tiny count, so
that the script cannot rot. No test reads a clock to decide."""

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "fixed_cost.py"


def _script():
    spec = importlib.util.spec_from_file_location("fixed_cost_benchmark", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("cases", ["CASES", "PLAIN_CASES"])
def test_every_case_runs(cases, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(sys, "argv", ["-c", "2", "mutad"])  # (2 calls of each; mutad imported)
    exec(getattr(script, cases) + script.TIMED, {})
    rows = dict(line.rsplit(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert len(rows) >= 5 and all(float(us) >= 0 for us in rows.values())
    if cases == "CASES":
        assert {"numpy forward", "mutad.gradient", "mutad.jvp"} <= set(rows)
