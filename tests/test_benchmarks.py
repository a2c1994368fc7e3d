"""The benchmark workloads at tiny sizes: right losses, right gradients, arguments unchanged.

Correctness only; nothing here asserts a timing or a memory figure.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import (  # noqa: E402
    POLICIES,
    check,
    format_table,
    run_in_fresh_interpreter,
)
from benchmarks.workloads import WORKLOADS, build_big_elementwise, build_small_ops  # noqa: E402

TINY = [(name, params) for name, workload in WORKLOADS.items()
        for params in workload.sizes["tiny"]]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("name", "params"), TINY,
                         ids=[f"{name}-{'-'.join(map(str, p.values()))}" for name, p in TINY])
def test_workload_gradient_is_right(name, params, policy):
    problem = WORKLOADS[name].build(**params)
    checks = check(problem, policy)
    assert checks["ok"], checks


def test_small_ops_matches_the_published_loss():
    problem = build_small_ops()
    assert problem.numpy_forward(*problem.args) == pytest.approx(0.87272429875160, rel=1e-13)


def test_big_elementwise_closed_form_matches_the_in_place_code():
    problem = build_big_elementwise(n=1001)
    assert problem.numpy_forward(*problem.args) == pytest.approx(problem.reference_loss(),
                                                                 rel=1e-13)


def test_a_configuration_runs_in_a_fresh_interpreter_and_reports():
    configuration = {"workload": "heat-explicit", "params": {"n": 50, "steps": 3},
                     "policy": "restore", "rounds": 1, "check": True}
    result = run_in_fresh_interpreter(configuration, timeout=120)
    assert "error" not in result, result.get("stderr")
    assert result["checks"]["ok"], result["checks"]
    table = format_table(WORKLOADS["heat-explicit"], [result])
    assert "n=50 steps=3" in table and "restore" in table
