"""Replay of Python's arithmetic on Python numbers (``x[0].item()``, float arguments).

Python's ``/``, ``//``, ``%`` and ``**`` on Python numbers are Python's own: a negative number
to a fractional power is a complex number, a division by 0.0 raises ZeroDivisionError, a power
beyond the floats OverflowError, where NumPy gives nan or inf. A program recorded where Python's
number was a float computes it with NumPy's arithmetic; a replay on a call where Python's number
would be of another kind, or where Python would raise, must not run: the call is traced, and
computes Python's number or raises Python's error, whatever NumPy's error handling.
"""

import math

import numpy as np
import pytest

import mutad
from test_replay import same


CASES = {  # a function, the values of x[0] its program is recorded and replayed on, and one
    # on which Python's arithmetic goes another way
    "abs(v ** 0.5 * s)": (lambda x: abs(x[0].item() ** 0.5 * x.sum()), (2.0, 3.0, 5.0), -2.0),
    "(v ** 0.5).real * s": (lambda x: (x[0].item() ** 0.5).real * x.sum(), (2.0, 3.0), -2.0),
    "pow(v, 0.5) in a branch": (
        lambda x: x.sum() if isinstance(pow(x[0].item(), 0.5), float) else 2 * x.sum(),
        (2.0, 3.0), -2.0),
    "v ** w": (lambda x: abs(x[0].item() ** x[1].item()) * x.sum(), (2.0, 3.0), -2.0),
    "(-8.0) ** v": (lambda x: abs((-8.0) ** (x[0].item() / 3)) * x.sum(), (3.0, 6.0), 1.0),
    "(v - 3.0) ** 1.5": (lambda x: abs((x[0].item() - 3.0) ** 1.5) * x.sum(), (4.0, 5.0), 2.0),
    "v ** (1 / 3)": (lambda x: x.sum() * abs(x[0].item() ** (1 / 3)), (2.0, 3.0), -2.0),
    "x[1] * v ** 0.5": (lambda x: x[1] * x[0].item() ** 0.5, (2.0, 3.0), -2.0),
    "v ** 0.5 > 1.0": (lambda x: (x[0].item() ** 0.5 > 1.0) * x.sum(), (2.0, 3.0), -2.0),
    "w / v": (lambda x: x[1].item() / (x[0].item() - 2.0) * x.sum(), (3.0, 4.0), 2.0),
    "w // v": (lambda x: x[1].item() // (x[0].item() - 2.0) * x.sum(), (3.0, 4.0), 2.0),
    "w % v": (lambda x: x[1].item() % (x[0].item() - 2.0) * x.sum(), (3.0, 4.0), 2.0),
    "divmod(w, v)": (lambda x: divmod(x[1].item(), x[0].item() - 2.0)[1] * x.sum(),
                     (3.0, 4.0), 2.0),
    "v ** -1.0": (lambda x: (x[0].item() - 2.0) ** -1.0 * x.sum(), (3.0, 4.0), 2.0),
    "10.0 ** v": (lambda x: 10.0 ** (x[0].item() * 100) * x.sum(), (1.0, 2.0), 4.0),
    "math.sqrt(v)": (lambda x: math.sqrt(x[0].item()) * x.sum(), (2.0, 3.0), -2.0),
    "int(v)": (lambda x: int(x[0].item()) * x.sum(), (2.5, 2.7), -2.0),
    "round(v)": (lambda x: round(x[0].item()) * x.sum(), (2.2, 2.4), 2.6),
    "v // 1.5": (lambda x: (x[0].item() // 1.5) * x.sum(), (2.0, 2.2), -2.0),
    "(v * 1j) ** 1.5": (lambda x: abs((x[0].item() * 1j) ** 1.5) * x.sum(), (2.0, 3.0), -2.0),
    "w * 1j / v": (lambda x: abs(x[1].item() * 1j / (x[0].item() - 2.0)) * x.sum(),
                   (3.0, 4.0), 2.0),
}


def _outcome(run):
    """``(value, gradient)``, or the type and message of what ``run`` raised."""
    try:
        return run()
    except (ArithmeticError, ValueError, TypeError) as error:
        return type(error), str(error)


def _same_outcome(got, expected):
    if type(expected) is tuple and type(expected[0]) is type:
        return got == expected
    return type(got) is tuple and type(got[0]) is not type and same(got, expected)


@pytest.mark.parametrize("errors", ["warn", "ignore"])
@pytest.mark.parametrize("name", CASES)
def test_a_replay_never_runs_where_pythons_arithmetic_goes_another_way(name, errors):
    """Recorded and replayed (compiled too) where Python's number is a float, a call on which
    it is another kind of number, or on which Python raises, is traced: Python's number and
    its derivative, or Python's error, bit for bit as traced; never NumPy's nan or inf, nor a
    complex number where the program computes floats; and the calls after it as traced."""
    f, recorded, other = CASES[name]
    replaying = mutad.value_and_grad(f, replay=True)
    trace, traced = replaying.trace, []
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    with np.errstate(all=errors):
        for i, v in enumerate((*recorded, other, *recorded)):
            x = np.array([v, 0.5, 2.25])
            before = x.copy()
            plain = _outcome(lambda: (f(before.copy()), None))  # Python's error, if any
            expected = _outcome(lambda: mutad.value_and_grad(f)(before.copy()))
            if type(plain[0]) is type:
                assert expected == plain
            got = _outcome(lambda: replaying(x))
            assert _same_outcome(got, expected), (v, got, expected)
            assert x.tobytes() == before.tobytes()
            if i == len(recorded) - 1:
                assert len(traced) == 1  # recorded once, replayed since


def test_a_python_number_whose_kind_changes_between_calls_leaves_a_reason():
    """The call on which Python's power is complex is traced, and says why."""
    def f(x):
        return abs(x[0].item() ** 0.5 * x.sum())

    replaying = mutad.grad(f, replay=True)
    for v in (2.0, 3.0, 5.0):
        replaying(np.array([v, 1.0]))
    assert not replaying.reasons
    x = np.array([-2.0, 1.0])
    assert same(replaying(x), mutad.gradient(f, x.copy())[0])
    assert np.array_equal(x, [-2.0, 1.0])
    assert any("complex" in reason for reason in replaying.reasons.values())


def test_a_float_argument_to_a_fractional_power_and_divided_by():
    """A differentiated float argument (a Python number too): replayed where Python's
    arithmetic on it gives floats, traced where it is complex or raises."""
    def f(x, k):
        return x.sum() * abs(k ** 0.5) + x[0] * (1.0 / (k - 2.0))

    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    with np.errstate(all="ignore"):
        for k in (3.0, 4.0, 5.0, -3.0, 2.0, 6.0):
            x = np.array([1.0, 2.0])
            expected = _outcome(lambda: mutad.value_and_grad(f, argnums=(0, 1))(x.copy(), k))
            got = _outcome(lambda: replaying(x, k))
            assert _same_outcome(got, expected), (k, got, expected)
            assert np.array_equal(x, [1.0, 2.0])
    assert _outcome(lambda: replaying(np.array([1.0, 2.0]), 2.0))[0] is ZeroDivisionError


PYTHONS_ARITHMETIC = {  # a function computing with Python's complex (or float) numbers, whose
    # arithmetic rounds otherwise than NumPy's scalars' (complex ** and /, in the last bit)
    "(v * 1j) ** 1.5": lambda x: abs((x[0].item() * 1j) ** 1.5) * x.sum(),
    "(v * 1j) ** w": lambda x: abs((x[0].item() * 1j) ** x[2].item()) * x.sum(),
    "(v + 1j) ** (w - 0.5j)": lambda x: ((x[0].item() + 1j) ** (x[2].item() - 0.5j)).real
    * x.sum(),
    "(v + 1j) ** (10 * w)": lambda x: abs((x[0].item() + 1j) ** (10 * x[2].item())) * x.sum(),
    "2.5 ** (v * 1j - 0.5)": lambda x: abs(2.5 ** (x[0].item() * 1j - 0.5)) * x.sum(),
    "w / (v + 1j)": lambda x: (x[2].item() / (x[0].item() + 1j)).real * x.sum(),
    "(v + 0.3j) / (w - 1.7j)": lambda x: abs((x[0].item() + 0.3j) / (x[2].item() - 1.7j))
    * x.sum(),
    "(v + 0.3j) * (w - 1.7j)": lambda x: abs((x[0].item() + 0.3j) * (x[2].item() - 1.7j))
    * x.sum(),
    "(v + 1j) * np.sin(x[1])": lambda x: abs((x[0].item() + 1j) * np.sin(x[1])) * x.sum(),
    "(v * 1j + w) - 0.1": lambda x: abs((x[0].item() * 1j + x[2].item()) - 0.1) * x.sum(),
    "v ** w": lambda x: abs(x[0].item()) ** x[2].item() * x.sum(),
    "v / w": lambda x: x[0].item() / x[2].item() * x.sum(),
    "v // w, v % w": lambda x: (x[0].item() // 0.7 + x[0].item() % 0.7) * x.sum(),
    "divmod(v, w)": lambda x: divmod(x[0].item(), 0.3)[1] * x.sum(),
}


@pytest.mark.parametrize("name", PYTHONS_ARITHMETIC)
def test_a_replay_computes_pythons_arithmetic_as_python(name):
    """Python's arithmetic on Python numbers (complex ones: ``(v * 1j) ** 1.5``, ``w / z``),
    which rounds otherwise than NumPy's scalars', replayed (interpreted, then compiled) as
    traced: value and gradient bit for bit, on calls whose numbers differ."""
    f = PYTHONS_ARITHMETIC[name]
    replaying = mutad.value_and_grad(f, replay=True)
    trace, traced = replaying.trace, []
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    values = (2.0, 3.0, 2.0, 1.3, 3.7, -2.0, 2.0)
    for v in values:
        x = np.array([v, 0.5, 2.25])
        before = x.copy()
        expected = mutad.value_and_grad(f)(before.copy())
        got = replaying(x)
        assert same(got, expected), (v, got, expected)
        assert same(got[0], f(before.copy())), (v, got[0])
        assert x.tobytes() == before.tobytes()
    assert len(traced) < len(values) - 2  # replayed, interpreted and compiled


def test_a_checked_python_number_is_compared_by_its_bits():
    """A replay checks a Python number computed from traced values (``np.count_nonzero``,
    lstsq's rank) against the recorded one; NaNs of the other sign or payload, or zeros of
    the other sign, are other numbers (``math.copysign`` and ``struct`` read them)."""
    from mutad.engines.replay import identical

    nan = float("nan")
    assert identical(nan, nan) and identical(1.5, 1.5) and identical(1 + 2j, 1 + 2j)
    assert not identical(nan, -nan) and not identical(0.0, -0.0)
    assert not identical(complex(0.0, nan), complex(0.0, -nan))
    assert not identical(complex(-0.0, 1.0), complex(0.0, 1.0))
    assert not identical(1, 1.0) and identical(True, True)
