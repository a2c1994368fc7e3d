"""benchmarks/kernels.py: every PolyBench kernel at a tiny size through mutad, so that the
script cannot rot and its kernels stay a check of mutad.

Correctness only: the value is NumPy's bit for bit, the gradient matches a central difference
along a random direction, the caller's arrays come back bit for bit, a replayed gradient is the
traced one; no test reads a clock to decide.
"""

import functools
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import mutad

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "kernels.py"


@functools.cache
def bench():
    """The script as a module, loaded once."""
    spec = importlib.util.spec_from_file_location("kernels_benchmark", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NAMES = list(bench().KERNELS)


def tiny(name):
    return bench().Problem(bench().KERNELS[name], "tiny")


@pytest.mark.parametrize("name", NAMES)
def test_kernel_gradient_is_right_and_the_arguments_come_back(name):
    problem = tiny(name)
    before = [a.tobytes() for a in problem.args]
    value, gradients = mutad.value_and_grad(problem.loss, argnums=problem.argnums)(*problem.args)
    assert [a.tobytes() for a in problem.args] == before
    assert np.float64(value).tobytes() == np.float64(problem.numpy_forward()).tobytes()
    direction = problem.direction()
    estimate = problem.finite_difference(direction)
    along = sum(float(np.sum(g * v)) for g, v in zip(gradients, direction, strict=True))
    assert along == pytest.approx(estimate, rel=1e-7)
    assert [a.tobytes() for a in problem.args] == before  # the finite differences copy too


@pytest.mark.parametrize("name", NAMES)
def test_kernel_replayed_gradient_is_the_traced_one(name):
    problem = tiny(name)
    before = [a.tobytes() for a in problem.args]
    traced = mutad.grad(problem.loss, argnums=problem.argnums)(*problem.args)
    replayed = mutad.grad(problem.loss, argnums=problem.argnums, replay=True)
    for _ in range(3):  # records, replays and compiles, replays the compiled program
        gradients = replayed(*problem.args)
        assert [g.tobytes() for g in gradients] == [g.tobytes() for g in traced]
        assert [a.tobytes() for a in problem.args] == before


def test_the_kernels_write_what_the_loss_weighs():
    # Each kernel changes its output arrays (a loss that weighed an untouched array would test
    # nothing of the kernel) and no other. The inputs are perturbed: PolyBench's heat_3d input
    # is linear in the indices, which its stencil leaves as it is.
    rng = np.random.default_rng(0)
    for name in NAMES:
        problem = tiny(name)
        inputs = [a + 0.01 * rng.random(a.shape) for a in problem.args]
        copies = [a.copy() for a in inputs]
        problem.kernel.run(*problem.steps, *copies)
        changed = {k for k, (a, b) in enumerate(zip(copies, inputs)) if
                   a.tobytes() != b.tobytes()}
        assert changed == set(problem.kernel.outputs), name


def options(*argv):
    return bench().parse(["--size", "tiny", "--rounds", "1", "--in-process", "--no-progress",
                          *argv])


def test_the_table_reports_every_kernel_and_system(monkeypatch):
    monkeypatch.setattr(bench(), "installed", lambda system: system != "jax")
    printed = []
    rows = bench().run(options("--kernels", "jacobi_1d,trisolv"), out=printed.append)
    assert [(r["kernel"], r["system"], r["status"]) for r in rows] == [
        (k, s, "not installed" if s == "jax" else "ok") for k in ("jacobi_1d", "trisolv")
        for s in ("mutad", "mutad-replay", "jax")]
    for row in rows[:2]:
        assert row["fd_err"] < 1e-7 and row["value_err"] == 0 and "wrong" not in row
        assert row["arguments_unchanged"] and row["same_as_first_call"]
    assert rows[1]["same_as_traced"] and rows[1]["reasons"] == {}
    text = printed[0]
    assert "| jacobi_1d | tsteps=3 n=8 |" in text and "**not installed**" in text
    assert "| mutad-replay |" in text  # the summary of medians and worst ratios


def test_a_mutad_error_is_reported_in_its_row_and_the_run_goes_on(monkeypatch):
    module = bench()
    real = module.mutad.value_and_grad

    def value_and_grad(f, **kwargs):
        if f.__name__ == "lu_loss":
            def raising(*args):
                raise mutad.MutadError("a finding, reported | as such")
            return raising
        return real(f, **kwargs)

    monkeypatch.setattr(module, "mutad", type("M", (), {"value_and_grad": staticmethod(
        value_and_grad)}))
    printed = []
    rows = module.run(options("--kernels", "lu,trisolv", "--systems", "mutad"),
                      out=printed.append)
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert rows[0]["detail"] == "MutadError: a finding, reported | as such"
    assert rows[0]["arguments_unchanged"]
    assert "**error**: MutadError: a finding, reported \\| as such" in printed[0]


@pytest.mark.slow
def test_the_jax_versions_agree_with_mutad():
    pytest.importorskip("jax")
    runs = bench().jax_kernels()
    import jax

    for name in NAMES:
        problem = tiny(name)
        loss = problem.jax_loss(runs)
        value, expected = jax.value_and_grad(loss, argnums=problem.argnums)(
            *[jax.numpy.asarray(a) for a in problem.args])
        gradients = mutad.grad(problem.loss, argnums=problem.argnums)(*problem.args)
        assert float(value) == pytest.approx(problem.numpy_forward(), rel=1e-12), name
        for g, e in zip(gradients, expected, strict=True):
            np.testing.assert_allclose(g, np.asarray(e), rtol=1e-10,
                                       atol=1e-12 * max(np.abs(e).max(), 1.0), err_msg=name)
