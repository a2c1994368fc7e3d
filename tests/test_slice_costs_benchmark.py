"""benchmarks/slice_costs.py: its statements through mutad, so that the script cannot rot and
measures statements mutad differentiates right.

Correctness only: a loop of each statement, over every row, has the gradient of a central
difference and gives the caller's arrays back bit for bit (``check_grads``); the script runs
end to end at a tiny count. No test reads a clock to decide.
"""

import runpy
from pathlib import Path

import numpy as np
import pytest

import mutad

SCRIPT = runpy.run_path(str(Path(__file__).resolve().parent.parent / "benchmarks"
                            / "slice_costs.py"))  # (its names; its main does not run)
STATEMENTS = SCRIPT["STATEMENTS"]


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_each_statement_is_differentiated_right(name):
    statement = STATEMENTS[name]

    def loss(A, s):  # the loss the script times, 45 steps: every row the statement updates
        for k in range(45):
            statement(A, s, k)
        return (A * A).sum() + s * s

    mutad.check_grads(loss, np.random.default_rng(0).standard_normal((40, 40)), np.float64(0.3))


def test_the_script_lists_every_statement(capsys):
    rows = SCRIPT["main"](["--count", "2", "--runs", "1"])
    assert list(rows) == list(STATEMENTS)
    assert all(len(row) == 2 for row in rows.values())
    assert "forward us" in capsys.readouterr().out
