"""Every MutadError path: raised, names the fix, and leaves the caller's arrays as they were."""

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import mutad
from mutad import errors


def mutate_then(action):
    """A function that first changes its argument in place, then does ``action``."""

    def f(x):
        x *= 2.0
        x[0] = -1.0
        return action(x)

    return f


WORK = np.zeros(4)  # allocated before any differentiation: mutad cannot follow it


def untraced_setitem(x):
    WORK[0] = x[1]
    return WORK.sum()


def untraced_out(x):
    np.sin(x, out=WORK)
    return WORK.sum()


def untraced_augmented(x):
    WORK[...] += x
    return WORK.sum()


CASES = [
    # (what the function does after mutating x, error class, words the message must contain)
    (lambda x: x * 2.0, errors.NonScalarOutputError, ["scalar", "sum", "pullback"]),
    (untraced_setitem, errors.UntracedWriteError, ["before the differentiation", "inside"]),
    (untraced_out, errors.UntracedWriteError, ["np.sin", "Allocate that array inside"]),
    (untraced_augmented, errors.UntracedWriteError, ["np.add", "Allocate that array inside"]),
    (lambda x: scipy.linalg.expm(x[:, None] * x).sum(), errors.ConversionError,
     ["scipy.linalg", "expm", "mutad.adjoint"]),
    (lambda x: float(x[0]) * 2.0, errors.ConversionError, ["float()"]),
    (lambda x: np.fft.fft(x).real.sum(), errors.UnsupportedFunctionError,
     ["np.fft.fft", "mutad.adjoint"]),
    (lambda x: scipy.special.gammaln(x).sum(), errors.UnsupportedFunctionError,
     ["gammaln", "mutad.adjoint"]),
    (lambda x: np.add(x, 1.0, out=x, where=x > 0).sum(), errors.UnsupportedOperationError,
     ["where=", "np.where"]),
]


@pytest.mark.parametrize("action, error, words", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_error_names_the_fix_and_restores_arguments(action, error, words):
    x = np.linspace(0.5, 1.5, 4)
    before = x.tobytes()
    with pytest.raises(error) as caught:
        mutad.gradient(mutate_then(action), x)
    assert isinstance(caught.value, mutad.MutadError)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert x.tobytes() == before


def test_complex_input():
    z = np.ones(2, complex)
    with pytest.raises(errors.ComplexInputError, match="real and imaginary"):
        mutad.gradient(lambda z: z.sum(), z)
    with pytest.raises(errors.ComplexInputError):
        mutad.gradient(lambda a, c: a.sum(), np.ones(2), 1j)


def test_unknown_policy():
    x = np.ones(2)
    with pytest.raises(errors.PolicyError, match="checkpoint"):
        mutad.gradient(lambda x: x.sum(), x, policy="fastest")


def test_traced_array_escaping_its_differentiation():
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return x.sum()

    mutad.gradient(f, np.ones(2))
    with pytest.raises(mutad.MutadError, match="outside the differentiation"):
        leaked[0] + 1.0


def test_every_error_class_is_documented():
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.MutadError):
            assert cls.__doc__ and len(cls.__doc__) > 40, name


W = np.empty(4)  # allocated before any differentiation
M = np.ones((4, 4))


def refill_constant(x):
    for k in range(3):
        W[:] = np.cos(k + np.arange(x.size))  # the same work array, refilled
        x = x * W
    return x.sum()


def reuse_matrix(x):
    M[...] = 1.0
    y = np.dot(M, x)
    M[...] += 1.0  # the product's pullback needs the first M
    return (np.dot(M, y)).sum()


def shift_indices(x):
    index = np.array([0, 2])
    y = x[index]
    index += 1  # the gather's pullback scatters through the first index
    return (y * x[index]).sum()


@pytest.mark.parametrize("f", [refill_constant, reuse_matrix, shift_indices],
                         ids=lambda f: f.__name__)
def test_overwriting_a_constant_a_record_reads_is_refused(f):
    x = np.linspace(0.5, 1.5, 4)
    before = x.tobytes()
    with pytest.raises(errors.ConstantModifiedError, match="Allocate it inside"):
        mutad.gradient(f, x)
    assert x.tobytes() == before


def test_constants_are_writable_again_after_the_gradient():
    w = np.ones(3)
    mutad.gradient(lambda x: (x * w).sum(), np.ones(3))
    w[0] = 2.0
    _, back = mutad.pullback(lambda x: x * w, np.ones(3))
    with pytest.raises(ValueError):
        w[0] = 3.0  # back still needs w
    del back
    w[0] = 3.0


def test_constants_only_copied_into_a_traced_array_stay_writable():
    t = np.linspace(0.0, 1.0, 4)

    def f(x):
        work = np.empty(4)
        total = np.zeros_like(x)
        for k in range(3):
            work[:] = np.cos(k * t)   # refilled: only ever copied into total, never read later
            total[:] = work
            total += x * k
        return total.sum()

    assert np.allclose(mutad.gradient(f, np.ones(4))[0], 2.0)
