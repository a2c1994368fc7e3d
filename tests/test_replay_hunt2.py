"""Replays that answered as the recorded call where a decision went otherwise: each program
here calls its replaying function on inputs that flip one decision the replay did not guard,
and compares every call with a traced one, bit for bit, and the caller's bytes."""

import contextvars
import math
import os
import random
import secrets
import sys
import uuid
import warnings
import weakref

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import mutad

from test_replay import replayed_like_traced


def flips(*rows):
    return [(np.array(row, dtype=float),) for row in rows]


# ----------------------------------------------------------------------------------------------
# A float Python reads of a traced value, compared by its bits


SIGNED_ZEROS = {
    "%-format": lambda x: (x * len("%.1f" % x[0])).sum(),
    "%-format's sign": lambda x: (x * (2.0 if ("%+.0f" % x[0])[0] == "-" else 1.0)).sum(),
    "%-format of a tuple": lambda x: (x * len("%.3g|%s" % (x[0], x[1]))).sum(),
}


@pytest.mark.parametrize("name", SIGNED_ZEROS)
def test_a_float_formatted_by_percent_is_guarded_by_its_bits(name):
    """"%.1f" % x[0] reads float(x[0]), which the guard compared with ==: 0.0 == -0.0, so a
    replay on -0.0 wrote the recorded "0.0" (3 characters, not 4)."""
    replayed_like_traced(SIGNED_ZEROS[name], flips([0.0, 1.0], [0.0, 1.0], [-0.0, 1.0],
                                                    [-0.0, 1.0], [0.0, 1.0]))


def precise_string(x):
    with np.printoptions(precision=8):
        text = str(x)
    return (x * len(text)).sum()


def test_a_string_written_under_print_options_f_set_is_traced():
    """str(x) under np.printoptions(precision=8) in f, the caller's precision 2: a replay's
    guard wrote the string under the caller's options, "[1. 2.]" for [1.001, 2.0] as for
    [1.0, 2.0], and answered as recorded where f, traced, wrote "[1.001 2.   ]"."""
    with np.printoptions(precision=2):
        replaying = replayed_like_traced(precise_string, flips([1.0, 2.0], [1.0, 2.0],
                                                               [1.001, 2.0], [1.0, 2.0]),
                                         replayed=False)
    assert "print options" in "".join(replaying.reasons.values())


# ----------------------------------------------------------------------------------------------
# Python's warnings the steps issue


GOOD = np.eye(14) * 2.0 + 0.1
ILL = scipy.linalg.hilbert(14)  # rcond 1e-18: scipy.linalg.solve warns


def solve_or_flag(A, b):
    """A program that reads the warnings of its solve, as a careful solver would."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        x = scipy.linalg.solve(A, b)
    return (x * x).sum() * (2.0 if heard else 1.0)


@pytest.mark.parametrize("first", [GOOD, ILL], ids=["well-conditioned", "ill-conditioned"])
def test_a_warning_a_replayed_step_issues_is_the_recorded_ones(first):
    """scipy.linalg.solve's LinAlgWarning on an ill-conditioned matrix, which f reads: a replay
    ran the solve again under the caller's filters, not f's, so it answered as the recorded
    call, whether that warned or not."""
    other = ILL if first is GOOD else GOOD
    b = np.ones(14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        replayed_like_traced(solve_or_flag, [(first, b), (first, b), (other, b), (other, b),
                                             (first, b)], argnums=(0, 1))


def test_a_warning_the_recorded_call_showed_is_issued_again():
    """A replay whose steps warn as the recorded call's did replays, and warns as it did."""
    replaying = replayed_like_traced(lambda A, b: scipy.linalg.solve(A, b).sum(),
                                     [(ILL, np.ones(14))] * 3, argnums=(0, 1))
    assert not replaying.reasons
    with pytest.warns(scipy.linalg.LinAlgWarning):
        replaying(ILL, np.ones(14))


def special_or_fallback(x):
    with scipy.special.errstate(all="raise"):
        try:
            y = scipy.special.gammaln(x) + scipy.special.kv(1.0, x)
        except scipy.special.SpecialFunctionError:
            y = x
    return y.sum()


def test_scipy_specials_error_handling_inside_f_is_traced():
    """scipy.special.errstate(all="raise") in f: a replay ran gammaln under the caller's
    handling (ignore), so gammaln(0.0) gave inf where f, traced, caught the error."""
    replaying = replayed_like_traced(special_or_fallback, flips([1.5, 2.5], [1.5, 2.5],
                                                                [0.0, 2.5], [1.5, 2.5]),
                                     replayed=False)
    assert "scipy.special's error handling" in "".join(replaying.reasons.values())


def test_scipy_specials_error_handling_of_the_caller_replays():
    """The caller's own handling, unchanged inside f, leaves the program replayed: a replay
    runs the functions under it as the traced call does."""
    with scipy.special.errstate(singular="warn"):
        replaying = replayed_like_traced(lambda x: scipy.special.gammaln(x).sum(),
                                         flips([1.5, 2.5], [1.5, 2.5], [3.0, 2.5]))
    assert not replaying.reasons


def special_around_numpys_own(x):
    with scipy.special.errstate(all="raise"):
        y = x * 2.0 - 1.0  # (NumPy's own ufuncs: they never consult scipy.special's handling)
    return scipy.special.gammaln(y).sum()


def test_scipy_specials_handling_around_numpys_own_ufuncs_replays():
    """scipy.special.errstate in f around NumPy's own ufuncs alone, which never consult it:
    the program replays on every later call (gammaln, after the block, runs under the
    caller's handling, as traced), bit for bit."""
    replaying = replayed_like_traced(special_around_numpys_own,
                                     flips([1.5, 2.5], [1.5, 2.5], [0.5, 2.5], [1.5, 2.5]),
                                     traced_once=True)
    assert not replaying.reasons


def leaves_specials_handling_changed(x):
    total = (x * x).sum()
    scipy.special.seterr(all="raise")  # left so for the caller, after the last operation
    return total


def test_scipy_specials_handling_f_leaves_changed_is_traced():
    """f leaves scipy.special's error handling changed after its last operation: a replay,
    which does not run f, would not change it; the recording is refused."""
    before = scipy.special.geterr()
    try:
        g = mutad.grad(leaves_specials_handling_changed, replay=True)
        g(np.array([1.5, 2.5]))
        assert "scipy.special's error handling" in "".join(g.reasons.values())
    finally:
        scipy.special.seterr(**before)


# ----------------------------------------------------------------------------------------------
# Python's errors of math's functions, which f catches


def sqrt_or_zero(x):
    try:
        r = math.sqrt(x[0])
    except ValueError:
        r = 0.0
    return x.sum() * r


def fsum_or_one(x):
    try:
        r = math.fsum([x[0] * 1e308, x[1] * 1e308])
    except OverflowError:
        r = 1.0
    return x.sum() * r


@pytest.mark.parametrize("f, rows", [
    (sqrt_or_zero, ([1.0, 2.0], [1.0, 2.0], [-1.0, 2.0], [1.0, 2.0], [4.0, 2.0])),
    (fsum_or_one, ([1e-300, 1e-300], [1e-300, 1e-300], [1.0, 1.0], [1e-300, 1e-300])),
], ids=["math.sqrt", "math.fsum"])
def test_an_error_of_maths_function_f_catches_traces_the_signature(f, rows):
    """math.sqrt(-1.0)'s ValueError, caught by f: math's value is computed after its ufunc's
    step, outside every operation the recording watches, so the call recorded f's except
    branch unguarded, and replays on x[0] > 0 answered 0.0."""
    with np.errstate(invalid="ignore", over="ignore"):
        replaying = replayed_like_traced(f, flips(*rows))
    assert "raised" in "".join(replaying.reasons.values())


# ----------------------------------------------------------------------------------------------
# Python's numbers a replay holds for values that stand for them


POWERS = {
    "v ** 0.5": lambda v, w: v ** 0.5,
    "(v * w) ** 0.5": lambda v, w: (v * w) ** 0.5,
    "-v ** 0.5": lambda v, w: -v ** 0.5,
    "v ** 0.5 + w ** 0.5": lambda v, w: v ** 0.5 + w ** 0.5,
}


@pytest.mark.parametrize("name", POWERS)
def test_partials_of_pythons_numbers_compute_on_numpys_scalars(name):
    """v = x[0].item() stands for a Python float; v ** 0.5 is NumPy's sqrt of it. Its
    partial, 0.5 / y, was handed the Python float a replay holds for y: at y = 0.0 Python
    raised ZeroDivisionError from the replay's reverse pass, where the traced call's partial
    is inf. (A negative v, whose power is Python's complex number, is
    test_replay_python_numbers'.)"""
    power = POWERS[name]

    def f(x):
        with np.errstate(all="ignore"):
            return x.sum() * power(x[0].item(), x[1].item())

    replaying = replayed_like_traced(f, flips([0.5, 2.0], [0.5, 2.0], [0.0, 0.5], [0.0, 0.5],
                                              [0.5, 2.0]))
    assert not replaying.reasons


# ----------------------------------------------------------------------------------------------
# Python's errors converting a traced value, which f catches


CONVERSIONS = {
    "int": int,
    "round": round,
    "math.floor": math.floor,
    "range": lambda v: len(range(int(v))),
    "as_integer_ratio": lambda v: v.as_integer_ratio()[0],
}


@pytest.mark.parametrize("name", CONVERSIONS)
def test_an_error_converting_a_traced_value_is_guarded(name):
    """int(inf)'s OverflowError (int(nan)'s ValueError), caught by f: the guard was written
    after the conversion, which raised first, so the call recorded f's except branch
    unguarded, and replays on finite values answered as it."""
    convert = CONVERSIONS[name]

    def f(x):
        with np.errstate(all="ignore"):
            y = x / x[1]
            try:
                n = convert(y[0])
            except (ValueError, OverflowError):
                n = -1
            return (x * n).sum()

    # (as_integer_ratio() of a finite traced value is refused: the traced call raises too)
    replayed = flips([1.0, 0.0], [0.0, 0.0], [1.0, 0.0])
    rows = replayed if name == "as_integer_ratio" else (
        flips([1.0, 2.0], [1.0, 2.0], [1.0, 0.0], [1.0, 2.0], [0.0, 0.0], [3.0, 2.0]))
    replaying = replayed_like_traced(f, rows, replayed=False)
    if name == "as_integer_ratio":
        with pytest.raises(mutad.errors.ConversionError):
            replaying(np.array([1.0, 2.0]))


def test_a_dtype_numpy_computes_from_a_traced_value_is_guarded():
    """np.min_scalar_type(x[0]): float16 for 1.0, float64 for 1e10, a dtype the program
    goes on with; the replay held the recorded one."""
    def f(x):
        return x.sum() * np.dtype(np.min_scalar_type(x[0])).itemsize

    replayed_like_traced(f, flips([1.0, 2.0], [1.0, 2.0], [1e10, 2.0], [1.5, 2.0], [1e300, 2.0]))


# ----------------------------------------------------------------------------------------------
# What f reaches besides its arguments


def test_a_module_f_imports_is_what_f_reaches(tmp_path, monkeypatch):
    """import settings inside f (a lazy import): the module was not among what f reaches,
    so a replay answered with the recorded settings.scale after the caller changed it."""
    (tmp_path / "replay_hunt_settings.py").write_text("scale = 1.0\nweights = [1.0, 2.0]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import replay_hunt_settings as settings

    def f(x):
        import replay_hunt_settings
        from replay_hunt_settings import weights
        return (x * replay_hunt_settings.scale).sum() + x[0] * weights[0]

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([1.0, 2.0])
    for scale, first in [(1.0, 1.0), (1.0, 1.0), (2.0, 1.0), (2.0, 1.0), (2.0, 5.0), (2.0, 5.0)]:
        settings.scale = scale
        settings.weights[0] = first
        value, grad = replaying(x)
        assert value == 3.0 * scale + first and grad.tolist() == [scale + first, scale]
    monkeypatch.delitem(sys.modules, "replay_hunt_settings")


class Holder:
    pass


def test_an_object_f_reaches_through_a_weak_reference_is_what_f_reaches():
    """f calls a weakref.ref for its object: the walk stopped at the reference, so a replay
    read the object's recorded array after the caller rebound it."""
    holder = Holder()
    holder.w = np.array([1.0, 2.0])
    reference = weakref.ref(holder)

    def f(x):
        return (x * reference().w).sum()

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([1.0, 1.0])
    for w in ([1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0]):
        holder.w = np.array(w)
        value, grad = replaying(x)
        assert value == sum(w) and grad.tolist() == w


SCALE = contextvars.ContextVar("replay_hunt_scale", default=1.0)


def test_a_context_variable_f_reads_is_what_f_reaches():
    """SCALE.get() in f, a context variable the caller sets between calls: the walk did not
    read its value, so a replay answered with the recorded scale."""
    replaying = mutad.value_and_grad(lambda x: (x * SCALE.get()).sum(), replay=True)
    x = np.array([1.0, 2.0])
    one, two = 1.0, 2.0
    for scale in (one, one, two, two, one):
        token = SCALE.set(scale)
        try:
            value, grad = replaying(x)
        finally:
            SCALE.reset(token)
        assert value == 3.0 * scale and grad.tolist() == [scale, scale]


class Units(type):
    scale = 1.0


class Metres(metaclass=Units):
    pass


def test_an_attribute_of_a_metaclass_is_what_f_reaches():
    """Metres.scale, found on the class's metaclass: the walk held the class and its bases,
    not its metaclass, so a replay answered with the recorded scale after the caller set
    another."""
    replaying = mutad.value_and_grad(lambda x: (x * Metres.scale).sum(), replay=True)
    x = np.array([1.0, 2.0])
    try:
        for scale in (1.0, 1.0, 3.0, 3.0):
            Units.scale = scale
            value, grad = replaying(x)
            assert value == 3.0 * scale and grad.tolist() == [scale, scale]
    finally:
        Units.scale = 1.0


# ----------------------------------------------------------------------------------------------
# Random draws


@pytest.mark.parametrize("draw", [
    lambda: os.urandom(1)[0] % 2,
    lambda: secrets.randbelow(2),
    lambda: uuid.uuid4().int % 2,
    lambda: random.SystemRandom().random(),
], ids=["os.urandom", "secrets", "uuid4", "SystemRandom"])
def test_fresh_entropy_the_standard_library_draws_in_f_traces_the_call(draw):
    """Bytes of the operating system's entropy drawn in f: a replay reused the recorded
    call's numbers (f's value the same on every call where the traced calls differ)."""
    replaying = mutad.value_and_grad(lambda x: (x * (1.0 + draw())).sum(), replay=True)
    for _ in range(3):
        replaying(np.ones(2))
    assert "fresh entropy" in "".join(replaying.reasons.values())
