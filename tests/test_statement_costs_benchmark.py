"""benchmarks/statement_costs.py: its statements through mutad, so that the script cannot rot
and measures statements mutad differentiates right.

Correctness only: each statement's loop (and each pair's) has the gradient of a central
difference and gives the caller's arrays back bit for bit (``check_grads``); the script runs
end to end at a tiny count. No test reads a clock to decide.
"""

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import mutad

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "statement_costs.py"


@functools.cache
def bench():
    """The script as a module, loaded once."""
    spec = importlib.util.spec_from_file_location("statement_costs_benchmark", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loop(bodies, count=3):
    """The loss the script times, at ``count`` runs of ``bodies``."""
    def loss(A, s):
        for k in range(count):
            for body in bodies:
                body(A, s, k)
        return (A * A).sum() + s * s
    return loss


ARGS = (np.random.default_rng(0).standard_normal((40, 40)), np.float64(0.3))


@pytest.mark.parametrize("name", list(bench().STATEMENTS))
def test_each_statement_is_differentiated_right(name):
    mutad.check_grads(loop([bench().STATEMENTS[name]]), *ARGS)


@pytest.mark.parametrize("pair", bench().PAIRS, ids=" then ".join)
def test_each_pair_is_differentiated_right(pair):
    mutad.check_grads(loop([bench().STATEMENTS[n] for n in pair]), *ARGS)


def test_the_script_lists_every_statement_and_pair(capsys):
    rows = bench().main(["--pairs", "--count", "2", "--runs", "1"])
    assert list(rows) == [*bench().STATEMENTS, *("; ".join(p) for p in bench().PAIRS)]
    assert all(len(row) == 2 for row in rows.values())
    assert "beyond its parts" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(bench().STATEMENTS))
def test_each_statement_keeps_its_values_finite_at_a_long_count(name):
    # A value grown to infinity sends the pullbacks down the masked products' path: the
    # script would time that path instead of the statement (its update read a row and column
    # it wrote, which overflowed after a few thousand runs).
    body = bench().STATEMENTS[name]
    A, s = ARGS[0].copy(), ARGS[1]
    with np.errstate(all="raise"):
        for k in range(20_000):
            body(A, s, k)
    assert np.abs(A).max() < 1e4
