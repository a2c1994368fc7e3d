"""Every MutadError path: raised, names the fix, and leaves the caller's arrays as they were."""

import traceback

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


def untraced_setitem(x):
    out = np.zeros(3)
    out[0] = x[1]
    return out.sum()


def untraced_out(x):
    out = np.zeros(x.shape)
    np.sin(x, out=out)
    return out.sum()


def untraced_augmented(x):
    out = np.zeros(x.shape)
    out += x
    return out.sum()


CASES = [
    # (what the function does after mutating x, error class, words the message must contain)
    (lambda x: x * 2.0, errors.NonScalarOutputError, ["scalar", "sum", "pullback"]),
    (untraced_setitem, errors.UntracedWriteError, ["zeros_like", "like="]),
    (untraced_out, errors.UntracedWriteError, ["np.sin", "zeros_like"]),
    (untraced_augmented, errors.UntracedWriteError, ["np.add", "zeros_like"]),
    (lambda x: np.asarray(x).sum(), errors.ConversionError, ["np.asarray(", "like=x"]),
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


def refill_constant(x):
    w = np.empty(x.shape)
    for k in range(3):
        w[:] = np.cos(k + np.arange(x.size))  # the same work array, refilled
        x = x * w
    return x.sum()


def reuse_matrix(x):
    M = np.ones((x.size, x.size))
    y = np.dot(M, x)
    M += 1.0  # the product's pullback needs the first M
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
    with pytest.raises(errors.ConstantModifiedError, match="copy"):
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


# ----------------------------------------------------------------------------------------------
# Every class derives from the built-in a Python user expects, and its traceback shows the
# user's line that caused it


BUILT_INS = {
    errors.NonScalarOutputError: TypeError,
    errors.UntracedWriteError: TypeError,
    errors.ConversionError: TypeError,
    errors.EscapedTracerError: TypeError,
    errors.UnsupportedArgumentError: TypeError,
    errors.ComplexInputError: TypeError,
    errors.RuleError: TypeError,
    errors.InvalidArgumentError: ValueError,
    errors.PolicyError: ValueError,
    errors.ArgnumsError: ValueError,
    errors.ConstantModifiedError: ValueError,
    errors.NotPositiveDefiniteError: ValueError,
    errors.UnsupportedFunctionError: NotImplementedError,
    errors.UnsupportedOperationError: NotImplementedError,
    errors.PullbackReusedError: RuntimeError,
    errors.GradientCheckError: AssertionError,
}


def test_every_class_derives_from_its_built_in():
    classes = {c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.MutadError)} - {errors.MutadError}
    assert classes == set(BUILT_INS)
    assert mutad.testing.GradientCheckError is errors.GradientCheckError


def write_element(x):
    out = np.ones(3)
    out[0] = x[1]  # CAUSE
    return out.sum()


def write_ufunc(x):
    out = np.ones(2)
    np.sin(x, out=out)  # CAUSE
    return out.sum()


def convert(x):
    y = np.array(x)  # CAUSE
    return y.sum()


def call_scipy(x):
    return scipy.linalg.expm(x[:, None] * x).sum()  # CAUSE


def no_rule(x):
    return np.fft.fft(x).real.sum()  # CAUSE


def unsupported(x):
    return np.add(x, 1.0, out=x, where=x > 0).sum()  # CAUSE


def overwrite_constant(x):
    M = np.ones((x.size, x.size))
    y = np.dot(M, x)
    M += 1.0  # CAUSE
    return np.dot(M, y).sum()


def nested_conversion(x):
    return mutad.gradient(lambda y: float(y[0] * x[0]), x)[0].sum()  # CAUSE


@mutad.inplace_adjoint(writes=("a",))
def scale_(a):
    a *= 2.0
    return a


@scale_.rule
def _scale_rule(a):
    scale_(a)  # returns no back function: a RuleError


def bad_rule(x):
    return scale_(x).sum()  # CAUSE


def not_a_pair(x):
    return x.sum()


@pytest.mark.parametrize("f, error", [
    (write_element, errors.UntracedWriteError),
    (write_ufunc, errors.UntracedWriteError),
    (convert, errors.ConversionError),
    (call_scipy, errors.ConversionError),
    (no_rule, errors.UnsupportedFunctionError),
    (unsupported, errors.UnsupportedOperationError),
    (overwrite_constant, errors.ConstantModifiedError),
    (nested_conversion, errors.ConversionError),
    (bad_rule, errors.RuleError),
], ids=lambda c: getattr(c, "__name__", ""))
@pytest.mark.parametrize("mode", ["gradient", "jvp"])
def test_traceback_shows_the_users_line(f, error, mode):
    if mode == "jvp" and f in (overwrite_constant, nested_conversion, bad_rule):
        pytest.skip("reverse mode only")
    x = np.linspace(0.5, 1.5, 2)
    before = x.tobytes()
    with pytest.raises(error) as caught:
        if mode == "gradient":
            mutad.gradient(mutate_then(f), x)
        else:
            mutad.jvp(mutate_then(f), (x,), (np.ones(2),))
    assert isinstance(caught.value, BUILT_INS[error])
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(frame.name == f.__name__ and "# CAUSE" in frame.line for frame in frames), frames
    assert x.tobytes() == before


def raises_at_this_line(error, action):
    """Run ``action`` (a lambda written on the line that makes the call) and check the error's
    traceback holds that line."""
    with pytest.raises(error) as caught:
        action()
    assert isinstance(caught.value, BUILT_INS[error])
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(frame.filename == __file__ and frame.name == "<lambda>"
               and frame.lineno == action.__code__.co_firstlineno for frame in frames), frames
    return caught.value


def test_errors_raised_by_the_api_show_the_calling_line():
    x = np.ones(2)
    raises_at_this_line(errors.NonScalarOutputError, lambda: mutad.gradient(lambda x: x, x))
    raises_at_this_line(errors.NonScalarOutputError,
                        lambda: mutad.gradient(not_a_pair, x, has_aux=True))
    raises_at_this_line(errors.ComplexInputError, lambda: mutad.gradient(not_a_pair, 1j))
    raises_at_this_line(errors.PolicyError, lambda: mutad.gradient(not_a_pair, x, policy="no"))
    raises_at_this_line(errors.ArgnumsError, lambda: mutad.gradient(not_a_pair, x, argnums=3))
    raises_at_this_line(errors.InvalidArgumentError, lambda: mutad.jvp(not_a_pair, x, x))
    raises_at_this_line(errors.InvalidArgumentError,
                        lambda: mutad.jvp(not_a_pair, (x,), (np.ones(3),)))
    raises_at_this_line(errors.InvalidArgumentError,
                        lambda: mutad.linalg.cholesky_(np.ones((2, 3))))
    raises_at_this_line(errors.InvalidArgumentError, lambda: mutad.check_grads(
        not_a_pair, x, order=3))
    raises_at_this_line(errors.UnsupportedArgumentError,
                        lambda: mutad.gradient(lambda x, g: x.sum(), x, (y for y in [x])))
    raises_at_this_line(errors.NotPositiveDefiniteError, lambda: mutad.linalg.cholesky_(
        np.array([[1.0, 2.0], [2.0, 1.0]])))
    _, back = mutad.pullback(lambda x: x * 2.0, x)
    back(np.ones(2))
    raises_at_this_line(errors.PullbackReusedError, lambda: back(np.ones(2)))
    _, back = mutad.pullback(lambda x: x * 2.0, x)
    raises_at_this_line(errors.InvalidArgumentError, lambda: back(np.ones(3)))
    leaked = []
    mutad.gradient(lambda x: leaked.append(x * 2.0) or x.sum(), x)
    raises_at_this_line(errors.EscapedTracerError, lambda: leaked[0] + 1.0)
    leaked.clear()
    mutad.jvp(lambda x: leaked.append(x * 2.0) or x.sum(), (x,), (x,))
    raises_at_this_line(errors.EscapedTracerError, lambda: leaked[0] + 1.0)

    wrong = mutad.adjoint(lambda x: x * 2.0)

    @wrong.rule
    def _wrong_rule(x):
        return x * 2.0, lambda dy: (-2.0 * dy,)

    raises_at_this_line(errors.GradientCheckError, lambda: mutad.check_grads(
        lambda x: wrong(x).sum(), x))
    assert x.tobytes() == np.ones(2).tobytes()


def test_messages_name_what_the_user_wrote_and_the_mutad_equivalent():
    x = np.linspace(0.5, 1.5, 2)
    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(convert, x)
    assert "np.array(" in str(caught.value) and "np.asarray" not in str(caught.value)
    assert "x.copy()" in str(caught.value)
    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(call_scipy, x)
    assert "scipy.linalg.expm" in str(caught.value)
    assert "mutad.scipy.linalg.expm" in str(caught.value)
    with pytest.raises(errors.ConversionError, match="stop_gradient"):
        mutad.gradient(lambda x: float(x[0]), x)
