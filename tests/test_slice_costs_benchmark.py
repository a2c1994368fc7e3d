"""benchmarks/slice_costs.py: its statements through mutad, so that the script cannot rot and
measures statements mutad differentiates right.

Correctness only: each statement's loop has the gradient of a central difference and gives the
caller's arrays back bit for bit (``check_grads``); the script runs end to end at a tiny count.
No test reads a clock to decide.
"""

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import mutad

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "slice_costs.py"


@functools.cache
def bench():
    """The script as a module, loaded once."""
    spec = importlib.util.spec_from_file_location("slice_costs_benchmark", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loop(body, count=45):
    """The loss the script times, at ``count`` runs of ``body`` (enough for every row)."""
    def loss(A, s):
        for k in range(count):
            body(A, s, k)
        return (A * A).sum() + s * s
    return loss


ARGS = (np.random.default_rng(0).standard_normal((40, 40)), np.float64(0.3))


@pytest.mark.parametrize("name", list(bench().STATEMENTS))
def test_each_statement_is_differentiated_right(name):
    mutad.check_grads(loop(bench().STATEMENTS[name]), *ARGS)


def test_the_script_lists_every_statement(capsys):
    rows = bench().main(["--count", "2", "--runs", "1"])
    assert list(rows) == list(bench().STATEMENTS)
    assert all(len(row) == 2 for row in rows.values())
    assert "forward us" in capsys.readouterr().out
