"""Wrong answers found by a differential hunt over NumPy's writing and dtype-mixing functions
(``np.put``, ``place``, ``putmask``, ``copyto(where=)``, ``ufunc.at``, ``reduceat``,
``accumulate(out=)``, in-place sorts, repeated fancy writes, ``flat``, ``real``/``imag``
views, ``nditer``, strided views, ``dtype=`` and ``out=`` casts, generators, ``errstate``),
in traced, forward, second-order and replayed differentiation; each failed before its fix.
The hunt itself runs at the end, on a fixed seed."""

import warnings

import numpy as np
import pytest

import mutad

from test_replay_budget import replays
from test_replay_warnings import outcome


# ----------------------------------------------------------------------------------------------
# NumPy's operations on plain values before f's first step (integers f made, NumPy's scalars)
# warn in the traced call; a recording heard only the events after its first step, so a
# replay issued none of the earlier ones (``divide by zero encountered in floor_divide`` of
# ``np.arange(3) // np.zeros(3, int)`` on the first call only). A recording hears them from
# the start, and a replay issues them as the traced call did, at the same lines


def _integers_divided_by_zero_first(x):
    k = np.arange(3) // np.zeros(3, int)
    return (x * k).sum()


def _scalar_overflow_first(x):
    big = np.float64(1e308) * 10
    return (x * 2.0).sum() + 0.0 * float(big > 0)


def test_warnings_of_plain_operations_before_the_first_step_are_issued_again():
    for f in (_integers_divided_by_zero_first, _scalar_overflow_first):
        replaying = mutad.value_and_grad(f, replay=True)
        for k in range(4):
            x = np.arange(3.0) + k
            caller = x.copy()
            assert outcome(replaying, x) == outcome(f, x.copy())
            assert x.tobytes() == caller.tobytes()
        assert replays(replaying) == 3 and not replaying.reasons


# ----------------------------------------------------------------------------------------------
# A Python complex number, a string or None written into a real traced array (``x.fill(1j)``,
# ``x[0] = 1j``, ``x[:2] = [1j, 2]``, ``x.fill("1.5")``, ``x[0] = None``) is converted by
# NumPy's assignment as ``float()`` converts it: TypeError for the complex number, 1.5, NaN.
# Reverse mode cast the complex number by a ufunc (its real part, a ComplexWarning: a value
# where NumPy raises) and refused the others; ``x.flat[0] = 1j`` (NumPy's ValueError) was cast
# in both modes. And forward mode cast a complex tangent into a real one a second time (two
# ComplexWarnings where NumPy issues one)


def _writes(value):
    return [lambda x: x.fill(value), lambda x: x.__setitem__(0, value),
            lambda x: x.__setitem__(Ellipsis, value), lambda x: x.__setitem__(slice(0, 2), value),
            lambda x: x.__setitem__(slice(0, 2), [value, 2.0]),
            lambda x: x.flat.__setitem__(0, value), lambda x: x.flat.__setitem__(slice(1, 3), value)]


def _outcome(f, x):
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            y = f(x)
            raised = None
        except Exception as error:  # noqa: BLE001 (NumPy's, compared)
            y, raised = None, (type(error), str(error))
    return (None if y is None else np.asarray(y).tobytes()), raised, \
        [(w.category, str(w.message)) for w in issued]


def test_python_complex_numbers_strings_and_none_written_as_numpy_converts_them():
    for value in (1j, 1 + 0j, "1.5", None, b"2.5", "a"):
        for write in _writes(value):
            def f(x, write=write):
                y = x * 2.0
                write(y)
                return (y * x).sum()

            x = np.array([1.0, 2.0, 3.0])
            caller = x.copy()
            expected = _outcome(f, x.copy())
            assert _outcome(lambda v: mutad.value_and_gradient(f, v)[0], x) == expected
            assert _outcome(lambda v: mutad.jvp(f, (v,), (np.ones(3),))[0], x) == expected
            assert x.tobytes() == caller.tobytes()


# (np.copyto(x, z, casting="unsafe") checked NumPy's casting on empty arrays first, which
# issued a ComplexWarning of its own, in both modes, and forward mode's rule of the writes by
# index or mask (np.copyto, np.put, np.place, np.putmask) cast the tangent again)


def _complex_written(write):
    def f(x):
        y = x.copy()
        write(y, x[1:] * (1 + 1j))
        return (y * y).sum()
    return f


def test_a_complex_value_cast_into_a_real_array_warns_once_as_numpy():
    for write in (lambda y, z: y.__setitem__(slice(0, 2), z),
                  lambda y, z: np.copyto(y[:2], z, casting="unsafe"),
                  lambda y, z: np.put(y, [0, 2], z), lambda y, z: np.putmask(y[1:], [True, False], z),
                  lambda y, z: np.place(y[1:], [False, True], z)):
        f = _complex_written(write)
        x = np.array([1.0, 2.0, 3.0])
        expected = _outcome(f, x.copy())
        assert len(expected[2]) == (expected[1] is None)  # (np.put: NumPy's TypeError)
        assert _outcome(lambda v: mutad.jvp(f, (v,), (np.ones(3),))[0], x) == expected
        assert _outcome(lambda v: mutad.value_and_gradient(f, v)[0], x) == expected
        assert x.tolist() == [1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------------------------
# np.seterr inside f, not undone, leaves NumPy's error handling changed after NumPy's call;
# mutad's run of f put the caller's back when it left (gradient, jvp, hessian), so the caller's
# code after it warned where NumPy's would not, and a replay, which does not run f, left it
# unchanged on every later call. The handling f leaves is kept, and such a call is traced


def _ignores_division_by_zero(x):
    np.seterr(divide="ignore")
    return (np.log(x) * x).sum()


def _raises_after_seterr(x):
    np.seterr(over="ignore")
    raise KeyError(float(x.sum()))


def test_error_handling_f_leaves_changed_stays_changed():
    runs = {"numpy": _ignores_division_by_zero,
            "gradient": lambda x: mutad.gradient(_ignores_division_by_zero, x),
            "jvp": lambda x: mutad.jvp(_ignores_division_by_zero, (x,), (np.ones(2),)),
            "hessian": lambda x: mutad.hessian(_ignores_division_by_zero, x),
            "replay": mutad.value_and_grad(_ignores_division_by_zero, replay=True)}
    try:
        for name, run in runs.items():
            for k in range(3 if name == "replay" else 1):
                with np.errstate(all="warn"):
                    x = np.array([1.0, 2.0 + k])
                    caller = x.copy()
                    run(x)
                    assert np.geterr()["divide"] == "ignore", name
                    assert np.geterr()["invalid"] == "warn" and np.geterrcall() is None
                    assert x.tobytes() == caller.tobytes()
        for run in (lambda x: mutad.gradient(_raises_after_seterr, x),
                    lambda x: mutad.jvp(_raises_after_seterr, (x,), (np.ones(2),))):
            with np.errstate(all="warn"):
                try:
                    run(np.ones(2))
                except KeyError:
                    pass
                assert np.geterr()["over"] == "ignore" and np.geterr()["divide"] == "warn"
        with np.errstate(all="warn"), warnings.catch_warnings(record=True) as issued:
            warnings.simplefilter("always")
            mutad.gradient(_ignores_division_by_zero, np.array([0.0, 1.0]))
            assert not [w for w in issued if "divide by zero encountered in log" == str(w.message)]
    finally:
        np.seterr(all="warn", under="ignore")


# ----------------------------------------------------------------------------------------------
# forward mode took an argument of floats viewing the bytes of an array of integers (an
# unaligned array, np.zeros(33, np.uint8)[1:].view(np.float64)) as a view of a dual of those
# integers, and failed with an AttributeError where NumPy computes; its own memory is now all
# of it (two such views of one array: a clear error, their aliasing not followed)


def test_forward_mode_of_floats_viewing_the_bytes_of_integers():
    buffer = np.zeros(4 * 8 + 1, np.uint8)
    x = buffer[1:].view(np.float64)
    x[:] = [1.0, 2.0, 3.0, 4.0]
    before = buffer.tobytes()

    def f(v):
        v[1:] += v[:-1]
        return (v * v).sum()

    value, tangent = mutad.jvp(f, (x,), (np.ones(4),))
    assert (value, tangent) == (f(x.copy()), 62.0)
    assert np.diag(mutad.hessian(lambda v: (v ** 3).sum(), x)).tolist() == [6.0, 12.0, 18.0, 24.0]
    try:
        mutad.jvp(lambda u, w: (u * w).sum(), (x, buffer[1:17].view(np.float64)),
                  (np.ones(4), np.ones(2)))
    except mutad.MutadError as error:
        assert "pass copies of them" in str(error)
    else:
        raise AssertionError("two views of one integer buffer were not refused")
    assert buffer.tobytes() == before


# ----------------------------------------------------------------------------------------------
# The hunt itself, on a fixed seed: random programs of NumPy's writing functions, each called
# with NumPy and with mutad, traced and replayed, on four inputs (writing_programs)


@pytest.mark.parametrize("first", range(0, 100, 25))
def test_random_programs_of_writes_answer_as_numpy(first):
    from writing_programs import differences, program

    for seed in range(first, first + 25):
        found = differences(seed)
        assert not found, (program(seed)[1], found)


# ----------------------------------------------------------------------------------------------
# NumPy computes an operator on scalars (``x[0] / 0.0``, ``x.sum() * 0.0`` of an infinity) by
# its scalar math, whose events say "divide by zero encountered in scalar divide"; mutad
# computes it by the ufunc, whose words are "... in divide": warnings and FloatingPointErrors
# otherwise worded than NumPy's, in every mode. An operator on values standing for scalars
# words them as NumPy's scalar math (an explicit ufunc, or a 0-d array, keeps the ufunc's)


def _divides_scalars(x):
    a = x[0] / 0.0
    b = np.exp(x.sum() * 1000.0) * 0.0
    c = np.divide(x[1], 0.0)
    d = x[1] / np.array(0.0)
    return x.sum() * float(np.isinf(a) + np.isnan(b) + np.isinf(c) + np.isinf(d))


def _raises_on_scalars(x):
    caught = []
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        for operation in (lambda: 1.0 / (x[0] - x[0]), lambda: x.sum() * np.inf * 0.0,
                          lambda: (x[1] - x[1]) ** -1.0, lambda: np.divide(x[1], 0.0)):
            try:
                operation()
            except FloatingPointError as error:
                caught.append(str(error))
    return x.sum() * len(caught), caught


def test_events_of_operators_on_scalars_are_worded_as_numpys_scalar_math():
    x = np.array([1.0, 2.0])
    expected = _outcome(_divides_scalars, x.copy())
    assert [m for _, m in expected[2]] == [
        "divide by zero encountered in scalar divide", "overflow encountered in exp",
        "invalid value encountered in scalar multiply", "divide by zero encountered in divide",
        "divide by zero encountered in divide"]
    replaying = mutad.value_and_grad(_divides_scalars, replay=True)
    for run in (lambda v: mutad.value_and_gradient(_divides_scalars, v)[0],
                lambda v: mutad.jvp(_divides_scalars, (v,), (np.ones(2),))[0],
                lambda v: replaying(v)[0], lambda v: replaying(v)[0], lambda v: replaying(v)[0]):
        value, raised, issued = _outcome(run, x)
        numpys = [w for w in issued if ", in a tangent" not in w[1]
                  and ", in the gradient of" not in w[1]]  # (the derivative's own)
        assert (value, raised, numpys) == expected
        assert x.tolist() == [1.0, 2.0]
    caught = _raises_on_scalars(x.copy())[1]
    assert caught == ["divide by zero encountered in scalar divide",
                      "invalid value encountered in scalar multiply",
                      "divide by zero encountered in scalar power",
                      "divide by zero encountered in divide"]
    aux = mutad.value_and_grad(_raises_on_scalars, has_aux=True)(x)[0][1]
    assert aux == caught
    assert mutad.jvp(lambda v: _raises_on_scalars(v)[1], (x,), (np.ones(2),))[0] == caught
