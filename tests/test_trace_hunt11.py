"""Traced programs that answered otherwise than NumPy: each the value, dtype, warning or
exception NumPy gives, traced, replayed (three calls) and in forward mode."""

import warnings

import numpy as np
import pytest

import mutad


class Raised(tuple):
    """An exception's type and message, as ``outcome`` gives them."""

    def __new__(cls, kind, message):
        return super().__new__(cls, (kind, message))


def outcome(call):
    """``call()``'s value, or its exception's type and message, and the messages of the
    warnings it issued."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        try:
            value = call()
        except Exception as error:  # noqa: BLE001 (NumPy's own, compared)
            value = Raised(type(error), str(error))
    return value, [str(w.message) for w in heard]


def replayed(f, *args):
    """The outcomes of three calls of ``value_and_grad(f, replay=True)``."""
    vg = mutad.value_and_grad(f, replay=True)
    return [outcome(lambda: vg(*args)) for _ in range(3)]


def with_huge_integers(x):
    """An integer past 2**64 beside another: NumPy makes an array of references."""
    counts = np.array([int(x[0] * 1e17), 1])
    return (x * counts).sum() + x[1] * float(counts[0] + 1)


def test_an_array_of_references_read_as_a_constant():
    """Regression: an object array read by a traced operation was summed as bytes to find
    later writes into it, and NumPy refuses to view references as bytes: "TypeError: Cannot
    change data-type for array of references"."""
    x = np.array([1e3, 2.0])
    before = x.tobytes()
    expected = with_huge_integers(x)
    value, grad = mutad.value_and_grad(with_huge_integers)(x)
    assert value == expected and type(value) is type(expected)
    assert np.array_equal(grad, [1e20, 1.0 + 1e20 + 1])
    assert x.tobytes() == before
    for got in replayed(with_huge_integers, x):
        assert got[0][0] == expected and np.array_equal(got[0][1], grad)
    assert mutad.jvp(with_huge_integers, (x,), (np.ones(2),))[0] == expected


def test_a_write_into_an_array_of_references_read_as_a_constant_is_found():
    """The references an operation read are compared when the gradient is computed: a write
    through a view made before the call is found, as in an array of numbers."""
    counts = np.array([2 ** 70, 1], dtype=object)
    view = counts[:]

    def f(x):
        y = (x * counts).sum()
        view[0] = 2 ** 71
        return y

    with pytest.raises(mutad.errors.ConstantModifiedError):
        mutad.gradient(f, np.array([1.0, 2.0]))


@pytest.mark.parametrize("f, name", [
    (lambda x: np.sqrt(x).sum(), "np.sqrt"),
    (lambda x: np.arcsin(x + 1).sum(), "np.arcsin"),
    (lambda x: np.sqrt(x[0]) + x[1], "np.sqrt"),
])
def test_an_error_raised_in_the_gradient_names_it(f, name):
    """Regression: under ``np.errstate(all="raise")`` NumPy's FloatingPointError raised by a
    pullback was NumPy's bare message, where the same event warned of is labelled ", in the
    gradient of ..." (and forward mode's raised one ", in a tangent"): f's own call raises
    nothing here, so the label says the error is the derivative's."""
    x = np.zeros(3)
    with np.errstate(all="raise"):
        f(x)
        expected = Raised(FloatingPointError,
                          f"divide by zero encountered in divide, in the gradient of {name}")
        assert outcome(lambda: mutad.value_and_grad(f)(x))[0] == expected
        assert [got[0] for got in replayed(f, x)] == [expected] * 3
        with pytest.raises(FloatingPointError, match="in divide, in a tangent"):
            mutad.jvp(f, (x,), (np.ones(3),))
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        mutad.gradient(f, x)
    assert str(heard[0].message) == expected[1]


def heard_in_every_mode(f, x):
    """The warnings of ``f(x)`` in NumPy, traced, in each of three replayed calls and in
    forward mode, less those of the derivative (labelled so)."""
    def of_f(call):
        return [m for m in outcome(call)[1] if ", in the gradient of " not in m
                and ", in a tangent" not in m]

    vg = mutad.value_and_grad(f, replay=True)
    return [of_f(lambda: f(x.copy())), of_f(lambda: mutad.value_and_grad(f)(x.copy())),
            *(of_f(lambda: vg(x.copy())) for _ in range(3)),
            of_f(lambda: mutad.jvp(f, (x.copy(),), (np.ones(x.shape),)))]


def one_in_place_square(x):
    s = x[0]
    s **= 2
    return s


@pytest.mark.parametrize("f, x, message", [
    (lambda x: x[0] ** 2, [1e308, 1.0], "overflow encountered in scalar power"),
    (one_in_place_square, [1e308, 1.0], "overflow encountered in scalar power"),
    (lambda x: x[0] ** 0.5, [-1.0, 1.0], "invalid value encountered in scalar power"),
    (lambda x: x[0] ** -1, [0.0, 1.0], "divide by zero encountered in scalar power"),
    (lambda x: (x ** 2).sum(), [1e308, 1.0], "overflow encountered in square"),
])
def test_a_scalars_power_by_a_fast_exponent_is_worded_as_numpys(f, x, message):
    """Regression: ``x[0] ** 2`` is computed by ``np.square`` (NumPy's fast path for arrays),
    and its event was worded "in scalar square", where NumPy's scalar math says "in scalar
    power" (an array's ``x ** 2`` says "in square", as NumPy's fast path does)."""
    x = np.array(x)
    assert heard_in_every_mode(f, x) == [[message]] * 6
    with np.errstate(all="raise"):
        with pytest.raises(FloatingPointError, match=message):
            mutad.gradient(f, x)


@pytest.mark.parametrize("reduction", [np.nanvar, np.nanstd])
def test_nan_statistics_without_degrees_of_freedom_warn_as_numpy(reduction):
    """Regression: ``np.nanstd(..., ddof=1)`` of one value left warned "invalid value
    encountered in divide" where NumPy divides under ``np.errstate(invalid="ignore")`` and
    warns "Degrees of freedom <= 0 for slice.", at the program's line; its value is NumPy's
    scalar."""
    def f(x):
        return reduction(np.where(x > 1.2, x, np.nan), ddof=1)

    x = np.array([1.0, 1.5, 0.5])
    assert heard_in_every_mode(f, x) == [["Degrees of freedom <= 0 for slice."]] * 6
    value, grad = outcome(lambda: mutad.value_and_grad(f)(x))[0]
    assert type(value) is type(outcome(lambda: f(x))[0]) and np.isnan(value)
    assert np.array_equal(grad, np.zeros(3))
    with np.errstate(all="raise"):  # (NumPy's divisions raise nothing)
        assert outcome(lambda: f(x))[1] == outcome(lambda: mutad.value_and_grad(f)(x))[1]
    # with degrees of freedom left, nothing
    assert heard_in_every_mode(f, np.array([1.3, 1.5, 0.5])) == [[]] * 6
