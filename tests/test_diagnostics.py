"""Diagnostics: each record's line of the differentiated code, NumPy's warnings issued at that
line, and mutad.detect_anomaly, which raises at the first operation that makes a NaN or an
infinity out of finite numbers.

Lines are found by the marker comments at their end (``# <- sqrt``), so that the tests do not
depend on where in this file the functions are."""

import contextlib
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import mutad
from mutad.core.debug import detect_anomaly
from mutad.errors import NonFiniteError
from mutad.linalg import cholesky_
from mutad.engines.reverse import ReverseTape

HERE = Path(__file__).read_text().splitlines()


def line_of(marker):
    """The number of the one line of this file that ends with ``# <- marker``."""
    found = [i + 1 for i, text in enumerate(HERE) if text.endswith(f"# <- {marker}")]
    assert len(found) == 1, marker
    return found[0]


def snapshot(*arrays):
    return [a.tobytes() for a in arrays]


# ----------------------------------------------------------------------------------------------
# Programs


def sqrt_at_zero(x):
    y = np.sqrt(x)  # <- sqrt
    return y.sum()


def log_of_zero(x):
    y = x * 2.0
    z = np.log(y)  # <- log
    return z.sum()


def arcsin_at_one(x):
    x *= 0.5  # <- halve
    y = np.arcsin(x + 0.5)  # <- arcsin
    return y.sum()


def sqrt_of_a_negative(x):
    y = x - 1.0  # <- shift
    z = np.sqrt(y)  # <- sqrt of negative
    w = z * 2.0  # <- after the NaN
    return w.sum()


def helper(u):
    return np.exp(u)  # <- in helper


def calls_a_helper(x):
    return helper(x * 2.0).sum()  # <- calls helper


def steps(u, v):
    u += 0.1 * v  # <- step
    u[1:] = v[:-1] * u[1:]  # <- slice write
    w = u[[0, 2]]  # <- gather
    return (w * w).sum() + np.sum(u)  # <- sum


@mutad.inplace_adjoint(writes=("a",))
def scale_(a, s):
    a *= s
    return a


@scale_.rule
def _scale_rule(a, s):
    scale_(a, s)

    def back(da, ds):
        if ds is not None:
            ds += (da * a / s).sum()  # a / s: a's value before the write
        da *= s
        a[...] /= s  # restore a: at s == 0 this gives 0 / 0, NaN  # <- restore in back
    return back


def scaled(x, s):
    y = x.copy()
    scale_(y, s)  # <- scale_
    return (y * y).sum()


def zoo(x, w):
    """One operation per path the engine records by: each line's records must name it."""
    a = np.zeros(4)  # <- zoo first
    a += x  # <- zoo
    np.multiply(a, w, out=a)  # <- zoo
    b = np.empty(4)  # <- zoo
    np.add.at(b, [0, 0, 1], x[:3])  # <- zoo
    np.put(b, [2, 3], w[:2])  # <- zoo
    np.copyto(a, b, where=w > 0)  # <- zoo
    a[[1, 3]] = x[[0, 2]] * 2.0  # <- zoo
    a[0] = a[1] * a[2]  # <- zoo
    c = np.concatenate([a, x])  # <- zoo
    d = np.einsum("i,i->", c[:4], w) + np.mean(c) + np.var(x)  # <- zoo
    e = np.where(x > 0.5, np.exp(x), x)  # <- zoo
    m = np.outer(x, w) + 4.0 * np.eye(4)  # <- zoo
    cholesky_(m)  # <- zoo
    s = np.linalg.solve(m + np.eye(4), e)  # <- zoo
    t = scale_(s.copy(), 0.5)  # <- zoo
    u = np.sort(t)[::-1].cumsum()  # <- zoo
    return d + (u * u).sum() + helper(x).sum() + m.sum()  # <- zoo last


def finite_program(x, w):
    u = np.zeros(4)
    for k in range(3):
        u[1:] += w[:-1] * np.tanh(x[1:] + k)
        u *= 0.9
        x[:2] = x[2:] * u[:2]
    a = np.stack([x, u])
    return (a @ w.reshape(4, 1)).sum() + np.linalg.norm(u) + np.sqrt(x * x + 1).sum()


# ----------------------------------------------------------------------------------------------
# Each record knows its line


def test_each_record_has_the_line_of_the_code_that_ran_it():
    tape = mutad.make_tape(steps, np.arange(1.0, 4.0), np.ones(3))
    lines = [record.line for record in tape.records]
    assert {line[0] for line in lines} == {__file__}
    expected = {line_of(m) for m in ("step", "slice write", "gather", "sum")}
    assert {line[1] for line in lines} == expected
    # in program order: the records of one line are made before those of the next
    assert [n for _, n in lines] == sorted(n for _, n in lines)


def test_the_line_is_the_innermost_frame_of_the_users_code():
    tape = mutad.make_tape(calls_a_helper, np.ones(2))
    by_primitive = {getattr(r.primitive, "__name__", None): r.line[1] for r in tape.records}
    assert by_primitive["exp"] == line_of("in helper")
    assert by_primitive["multiply"] == line_of("calls helper")


def _root_of_first(x):
    return np.sqrt(x)  # <- root of first


def _root_of_second(x):
    return np.sqrt(x)  # <- root of second


def test_two_functions_with_a_record_at_one_offset_each_name_their_own_line():
    # The same code in two functions: their records are made at the same offset of their
    # bytecode, where a line found is kept (``debug.caller``): each must still name its own.
    assert _root_of_first.__code__.co_code == _root_of_second.__code__.co_code

    def f(x):
        return sum(root(x[k:k + 2]).sum() for root in (_root_of_first, _root_of_second)
                   for k in (0, 2))

    tape = mutad.make_tape(f, np.arange(1.0, 5.0))
    lines = [record.line[1] for record in tape.records
             if getattr(record.primitive, "__name__", None) == "sqrt"]
    first, second = line_of("root of first"), line_of("root of second")
    assert lines == [first, first, second, second]


def test_every_path_of_the_engine_notes_the_line_of_the_code():
    # A frame skipped without being looked at (debug.SKIPPED) must be mutad's on every path:
    # were it not, a record would name a line outside the function (its caller's).
    tape = mutad.make_tape(zoo, np.array([0.3, 0.9, 1.2, 0.1]), np.array([1.0, -0.5, 2.0, 0.7]))
    inside = set(range(line_of("zoo first"), line_of("zoo last") + 1)) | {line_of("in helper")}
    lines = [record.line for record in tape.records]
    assert all(line is not None and line[0] == __file__ and line[1] in inside for line in lines)
    # and each line that computes with traced values made records (not the allocations)
    computing = {n for n in inside if HERE[n - 1].endswith(("# <- zoo", "# <- zoo last"))
                 and "np.empty" not in HERE[n - 1]}
    assert computing <= {n for _, n in lines}


def test_a_custom_rules_record_has_the_line_that_called_it():
    tape = mutad.make_tape(scaled, np.ones(2), 2.0)
    scale_records = [r for r in tape.records if "scale_" in repr(r.primitive)]
    assert [r.line[1] for r in scale_records] == [line_of("scale_")]


def test_records_keep_no_frame():
    tape = mutad.make_tape(steps, np.arange(1.0, 4.0), np.ones(3))
    for record in tape.records:
        code, offset = record.where
        assert type(offset) is int and code.co_filename == __file__


def test_the_listing_heads_each_lines_records_with_it():
    text = str(mutad.make_tape(steps, np.arange(1.0, 4.0), np.ones(3)))
    headings = [line for line in text.splitlines() if line.startswith("  # ")]
    assert headings == [
        f"  # test_diagnostics.py:{line_of('step')}  u += 0.1 * v  # <- step",
        f"  # test_diagnostics.py:{line_of('slice write')}  u[1:] = v[:-1] * u[1:]  "
        "# <- slice write",
        f"  # test_diagnostics.py:{line_of('gather')}  w = u[[0, 2]]  # <- gather",
        f"  # test_diagnostics.py:{line_of('sum')}  return (w * w).sum() + np.sum(u)  # <- sum"]


def test_no_headings_for_code_typed_at_a_prompt():
    namespace = {"np": np}
    exec(compile("def typed(x):\n    return (x * x).sum()\n", "<stdin>", "exec"), namespace)
    tape = mutad.make_tape(namespace["typed"], np.ones(2))
    assert [record.line for record in tape.records] == [("<stdin>", 2)] * 2
    assert [line.split()[:3] for line in str(tape).splitlines()] == [
        ["typed(%0:", "f64[2]):"], ["%1", "=", "np.multiply(%0,"], ["%2", "=", "np.sum(%1)"],
        ["return", "%2"]]
    # a prompt's function calling a file's: every line is headed, the prompt's as <stdin>
    exec(compile("def calls(x):\n    return helper(x).sum()\n", "<stdin>", "exec"),
         {"helper": helper}, namespace)
    headings = [line for line in str(mutad.make_tape(namespace["calls"], np.ones(2))).splitlines()
                if line.startswith("  # ")]
    assert headings == [f"  # test_diagnostics.py:{line_of('in helper')}  return np.exp(u)  "
                        "# <- in helper", "  # <stdin>:2"]


# ----------------------------------------------------------------------------------------------
# detect_anomaly


def raised(f, *args, **switch):
    """The NonFiniteError ``gradient(f, *args)`` raises under the switch; the arguments must
    come back bit for bit."""
    before = snapshot(*args)
    with detect_anomaly(**switch), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(NonFiniteError) as info:
            mutad.gradient(f, *args)
    assert snapshot(*args) == before
    return info.value


def test_an_infinite_derivative_is_named_at_its_line():
    error = raised(sqrt_at_zero, np.array([0.0, 4.0]))
    assert (error.kind, error.operation) == ("cotangent", "np.sqrt")
    assert (error.filename, error.lineno) == (__file__, line_of("sqrt"))
    assert error.source == "y = np.sqrt(x)  # <- sqrt"
    assert f"{__file__}:{line_of('sqrt')}" in str(error) and "y = np.sqrt(x)" in str(error)
    assert isinstance(error, mutad.MutadError) and isinstance(error, FloatingPointError)


def test_a_division_by_zero_only_in_the_reverse_pass():
    # arcsin(1) is finite; its derivative divides by sqrt(1 - 1) = 0
    x = np.array([1.0, 0.2])
    error = raised(arcsin_at_one, x)
    assert (error.kind, error.operation, error.lineno) == ("cotangent", "np.arcsin",
                                                          line_of("arcsin"))
    error = raised(arcsin_at_one, x, check_forward=False)
    assert error.lineno == line_of("arcsin")


def test_a_forward_value_is_named_at_the_operation_that_made_it():
    error = raised(log_of_zero, np.array([0.0, 1.0]))
    assert (error.kind, error.operation, error.lineno) == ("value", "np.log", line_of("log"))
    assert "forward pass" in str(error)
    # the first to go wrong: not the operations that carry the NaN on
    error = raised(sqrt_of_a_negative, np.array([0.0, 2.0]))
    assert (error.kind, error.operation, error.lineno) == ("value", "np.sqrt",
                                                          line_of("sqrt of negative"))


def test_checking_the_reverse_pass_only():
    # log(0) = -inf is left alone; its derivative 1/0 is not
    error = raised(log_of_zero, np.array([0.0, 1.0]), check_forward=False)
    assert (error.kind, error.operation, error.lineno) == ("cotangent", "np.log",
                                                          line_of("log"))


def test_a_restore_that_makes_a_nan_is_named(inverting):
    x = np.array([1.0, 2.0])
    error = raised(lambda x: scaled(x, 0.0), x)
    assert error.kind == "restored value"
    assert "scale_" in error.operation and error.lineno == line_of("scale_")


def test_an_in_place_write_that_makes_an_infinity():
    def f(x):
        x /= x - 1.0  # <- in-place division
        return x.sum()

    error = raised(f, np.array([1.0, 3.0]))
    assert (error.kind, error.operation, error.lineno) == ("value", "np.divide",
                                                          line_of("in-place division"))


def test_the_caller_arrays_come_back_when_the_reverse_pass_raises():
    def f(x, y):
        x += y * y
        x[1:] *= 2.0
        return np.sqrt(x - x).sum() + x.sum()

    x, y = np.array([1.0, -0.0, np.nan]), np.array([2.0, 3.0, 4.0])
    raised(f, x, y, check_forward=False)  # compares the bytes


def test_pullback_checks_its_reverse_pass():
    def f(x):
        x *= 3.0
        return np.sqrt(x)

    x = np.array([0.0, 1.0])
    before = snapshot(x)
    with detect_anomaly():
        y, back = mutad.pullback(f, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(NonFiniteError):
            back(np.ones(2))  # outside the block: checked as its forward pass was
    assert snapshot(x) == before


def test_a_cotangent_given_as_nan_is_not_an_anomaly():
    with detect_anomaly():
        y, back = mutad.pullback(lambda x: x * 2.0, np.array([1.0, 2.0]))
        grads = back(np.array([np.nan, 1.0]))
    assert np.isnan(grads[0][0]) and grads[0][1] == 2.0


def test_nonfinite_values_that_were_there_already_are_not_anomalies():
    def f(x):
        mask = np.full(2, -np.inf)
        mask[1] = 0.0
        return np.exp(x + mask).sum()  # exp(-inf) = 0: a masked softmax's pattern

    with detect_anomaly():
        assert mutad.gradient(f, np.array([1.0, 2.0]))[0].tolist() == [0.0, np.exp(2.0)]


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_finite_programs_give_the_same_gradients_with_the_switch_on(policy):
    args = (np.array([0.3, -1.2, 2.0, 0.7]), np.array([1.0, -0.5, 0.25, 2.0]))
    plain = mutad.value_and_gradient(finite_program, *[a.copy() for a in args], policy=policy)
    before = snapshot(*args)
    with detect_anomaly():
        checked = mutad.value_and_gradient(finite_program, *args, policy=policy)
    assert snapshot(*args) == before
    assert plain[0] == checked[0]
    assert snapshot(*plain[1]) == snapshot(*checked[1])


def test_nested_differentiation_under_the_switch():
    def f(x):
        return (np.sin(x) * x).sum()

    x = np.array([0.5, 1.5])
    plain = mutad.hessian(f, x)
    with detect_anomaly():
        assert np.array_equal(mutad.hessian(f, x), plain)
        inner = mutad.grad(lambda x: mutad.grad(f)(x).sum())(x)
    assert np.array_equal(inner, plain.sum(axis=0))


def test_replay_traces_under_the_switch():
    g = mutad.grad(sqrt_at_zero, replay=True)
    x = np.array([1.0, 4.0])
    first = g(x)
    assert np.array_equal(g(x), first)  # replayed
    with detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(NonFiniteError) as info:
            g(np.array([0.0, 4.0]))
    assert info.value.lineno == line_of("sqrt")
    assert np.array_equal(g(x), first)


def test_the_switch_is_off_by_default_and_in_other_threads():
    assert ReverseTape("restore", None).anomaly is None
    seen = []
    with detect_anomaly():
        assert ReverseTape("restore", None).anomaly is not None
        thread = threading.Thread(target=lambda: seen.append(ReverseTape("restore", None)))
        thread.start()
        thread.join()
        with detect_anomaly(enabled=False):
            assert ReverseTape("restore", None).anomaly is None
    assert seen[0].anomaly is None


def test_as_a_decorator():
    @detect_anomaly()
    def checked(x):
        return mutad.gradient(sqrt_at_zero, x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(NonFiniteError):
            checked(np.zeros(1))
        assert np.isinf(mutad.gradient(sqrt_at_zero, np.zeros(1))[0][0])  # off again


@pytest.mark.parametrize("value, raises", [("1", True), ("0", False)])
def test_the_environment_variable(value, raises):
    code = ("import numpy as np, mutad, warnings\n"
            "warnings.simplefilter('ignore')\n"
            "try:\n"
            "    mutad.gradient(lambda x: np.sqrt(x).sum(), np.zeros(2))\n"
            "except mutad.errors.NonFiniteError as e:\n"
            "    print(e.kind)\n")
    env = {"MUTAD_DEBUG_NANS": value, "PATH": "", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=Path(__file__).parent.parent, check=True).stdout
    assert out.strip() == ("cotangent" if raises else "")


# ----------------------------------------------------------------------------------------------
# NumPy's warnings at the user's line


def caught(f, *args, action="always"):
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter(action)
        mutad.gradient(f, *args)
    return [w for w in log if issubclass(w.category, RuntimeWarning)]


def test_a_pullbacks_warning_points_at_the_users_line():
    x = np.array([0.0, 4.0])
    before = snapshot(x)
    log = caught(sqrt_at_zero, x)
    assert snapshot(x) == before
    assert [(w.filename, w.lineno) for w in log] == [(__file__, line_of("sqrt"))]
    assert str(log[0].message).startswith("divide by zero encountered")
    assert "np.sqrt" in str(log[0].message)


@pytest.mark.parametrize("filename", ["<snippet>", "page.md"])
@pytest.mark.parametrize("user_mode", [None, "warn"])
def test_a_warning_from_code_that_is_not_a_module_is_issued(filename, user_mode):
    # Regression: code run by exec (a notebook cell, python -c, a docs snippet) has no module
    # mutad finds by file name, and its warnings were dropped (warn_explicit drops a warning
    # whose module is None); under the user's own np.errstate too.
    source = "def f(x):\n    return np.sqrt(x).sum()\n"
    namespace = {"np": np}
    exec(compile(source, filename, "exec"), namespace)
    with np.errstate(all=user_mode) if user_mode else contextlib.nullcontext():
        log = caught(namespace["f"], np.zeros(2))
    assert [(w.filename, w.lineno) for w in log] == [(filename, 2)]


def test_a_warning_under_python_c_is_shown():
    # The module of `python -c` code has no file and a loader that cannot give its source.
    code = ("import numpy as np, mutad\n"
            "print(mutad.gradient(lambda x: np.log(x).sum(), np.ones(1))[0])\n"
            "mutad.gradient(lambda x: np.sqrt(x).sum(), np.zeros(1))\n")
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                          text=True, env={"PATH": "", "OMP_NUM_THREADS": "1"},
                          cwd=Path(__file__).parent.parent, check=True)
    assert done.stdout.strip() == "[1.]"
    assert "<string>:3: RuntimeWarning: divide by zero" in done.stderr


def test_a_forward_warning_points_at_the_users_line():
    log = caught(log_of_zero, np.array([0.0, 1.0]))
    assert [w.lineno for w in log] == [line_of("log"), line_of("log")]  # value, then gradient
    assert {w.filename for w in log} == {__file__}
    assert str(log[0].message) == "divide by zero encountered in log"  # NumPy's own words


def test_a_warning_in_place_points_at_the_users_line():
    def f(x):
        x /= x - 1.0  # <- warns in place
        return x.sum()

    log = caught(f, np.array([1.0, 3.0]))
    assert log and {(w.filename, w.lineno) for w in log} == {(__file__,
                                                              line_of("warns in place"))}


def test_warnings_as_errors_raise_and_the_arrays_come_back():
    x = np.array([0.0, 4.0])
    before = snapshot(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            mutad.gradient(sqrt_at_zero, x)
    assert snapshot(x) == before


def test_the_default_action_shows_a_warning_once_per_line():
    x = np.array([0.0, 4.0])
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("default")
        for _ in range(3):
            mutad.gradient(sqrt_at_zero, x)
    assert len([w for w in log if w.lineno == line_of("sqrt")]) == 1


def test_numpys_error_handling_is_left_as_the_user_set_it():
    x = np.array([0.0, 4.0])
    with warnings.catch_warnings(record=True) as log, np.errstate(divide="ignore"):
        warnings.simplefilter("always")
        mutad.gradient(sqrt_at_zero, x)
    assert not log
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        mutad.gradient(sqrt_at_zero, x)


def test_each_gradient_follows_the_handling_in_force_when_it_starts():
    # (the categories a differentiation logs are kept for the handling last met: one set
    # between two gradients is the one followed)
    x = np.array([0.0, 4.0])
    assert caught(sqrt_at_zero, x)
    with np.errstate(divide="ignore"):
        assert not caught(sqrt_at_zero, x)
    assert caught(sqrt_at_zero, x)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        mutad.gradient(sqrt_at_zero, x)
    heard = []
    with np.errstate(divide="call", call=lambda kind, flag: heard.append(kind)):
        assert not caught(sqrt_at_zero, x)
    assert heard and all(kind == "divide by zero" for kind in heard)
    assert caught(sqrt_at_zero, x)


def test_a_warning_in_a_rule_of_the_users_points_at_the_rule():
    log = caught(lambda x: scaled(x, 0.0), np.array([1.0, 2.0]))
    assert {(w.filename, w.lineno) for w in log} == {(__file__, line_of("restore in back"))}


def test_a_warning_in_a_nested_gradient_points_at_the_inner_line():
    def outer(x):
        return mutad.grad(sqrt_at_zero)(x * 1.0).sum()  # <- nested

    log = caught(outer, np.array([0.0, 4.0]))
    assert log and all(w.filename == __file__ for w in log)
    assert line_of("sqrt") in {w.lineno for w in log}


def test_forward_mode_warnings_point_at_the_users_line():
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        mutad.jvp(log_of_zero, (np.array([0.0, 1.0]),), (np.ones(2),))
    assert log and {(w.filename, w.lineno) for w in log} == {(__file__, line_of("log"))}
