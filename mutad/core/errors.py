"""The errors mutad raises, defined here, below everything that raises them, and public as
``mutad.errors`` (whose docstring says what they share)."""

import sys

from numpy.linalg import LinAlgError

# The error classes, in this file's order (the documentation lists them so); function_name and
# no_rule, at the end, are how the core names functions and words its missing-rule errors, not
# a part of the API.
__all__ = ["MutadError", "NonScalarOutputError", "UntracedWriteError", "ConversionError",
           "EscapedTracerError", "UnsupportedFunctionError", "UnsupportedArgumentError",
           "ComplexInputError", "InvalidArgumentError", "PolicyError", "ArgnumsError",
           "RuleError", "PullbackReusedError", "UnsupportedOperationError",
           "UnsupportedAttributeError",
           "UnsupportedArrayError", "ReadOnlyError", "NotPositiveDefiniteError",
           "ConstantModifiedError", "GradientCheckError", "NonFiniteError"]


class MutadError(Exception):
    """Base class of every error mutad raises: ``except mutad.MutadError`` catches them all."""

    # Whether the error refuses what NumPy or SciPy would have computed: made while a
    # differentiation runs, it is noted (``levels.refused``), and a program that catches it and
    # goes on, down another path than NumPy's, ends with an error (``arguments.run``).
    _refusal = False
    # ``levels.refused``, which ``core.levels`` (above this module: it raises these errors)
    # puts here when it is imported
    _note_refusal: "staticmethod | None" = None

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        if self._refusal and MutadError._note_refusal is not None:
            MutadError._note_refusal(self)


class NonScalarOutputError(MutadError, TypeError):
    """``gradient`` was asked to differentiate a function whose output is not a scalar.

    Example: ``mutad.gradient(lambda x: x * 2, np.ones(3))``, or a function returning
    ``(loss, extras)`` without ``has_aux=True``.
    Fix: reduce the output to a scalar (``.sum()``), pass ``has_aux=True`` for a ``(loss, aux)``
    pair, or use ``mutad.pullback`` with an explicit output cotangent.
    """


class UntracedWriteError(MutadError, TypeError):
    """A traced value was written into an array that mutad does not follow.

    Arrays the differentiated code allocates (``np.zeros``, ``np.empty``, ``np.array``, ...)
    are followed; an array allocated before the differentiation started is not. Example:
    ``WORK = np.zeros(3)`` at module level, then ``WORK[0] = x[0]`` inside the differentiated
    function: the gradient of that write would be lost. Fix: allocate the array inside the
    function (or pass it as an argument).
    """

    _refusal = True


class ConversionError(MutadError, TypeError):
    """A traced array was converted to a plain ndarray or number (``complex()``, or
    ``float()`` or ``np.asarray`` inside code without a mutad rule).

    This happens when code without a mutad rule, typically a SciPy routine, converts its input,
    or when ``complex(x)`` is taken of a value that depends on the arguments (``float(x)``
    called by the differentiated code itself is followed, as ``x.item()`` is): the conversion
    would cut the gradient. Fix: wrap the routine with ``mutad.adjoint`` (or
    ``mutad.inplace_adjoint`` if it writes into its arguments) and give it a rule with
    ``@routine.rule`` (see docs/guide.md, "Custom rules"); keep computing with the array instead
    of ``float(x)``, and take ``mutad.stop_gradient(x)`` for a value that should carry no
    gradient: it is a constant, which converts (``float(mutad.stop_gradient(x))``) and which
    SciPy routines take. Arrays with no dependence on the arguments convert as plain arrays do.
    A function that catches this error and goes on (``except TypeError:``) would take another
    path than NumPy's: the differentiation then ends with this error, quoting the one caught.
    """

    _refusal = True


class EscapedTracerError(MutadError, TypeError):
    """A traced or dual array was used after the differentiation that created it had ended.

    Example: ``leaked.append(x * 2)`` inside ``f``, then ``leaked[0] + 1`` after
    ``mutad.gradient(f, x)`` returned. Fix: return values from the differentiated function
    (``has_aux=True`` returns extra values beside the loss) instead of storing them.
    """


class UnsupportedFunctionError(MutadError, NotImplementedError):
    """A NumPy function or ufunc that mutad has no rule for received a traced array.

    Example: ``np.fft.fft(x)`` with ``x`` traced. Fix: give the function a rule by wrapping it
    with ``mutad.adjoint``, or compute the same thing with functions mutad differentiates.
    """

    _refusal = True


class UnsupportedArgumentError(MutadError, TypeError):
    """An argument holds arrays in a way mutad cannot follow, so it could not promise to give
    them back bit-for-bit or to differentiate them. Raised before the function runs.

    Example: a set of objects holding arrays (no order to rebuild it in), a generator or
    iterator (reading it consumes it), an object that refers back to itself, or an object of a
    type whose arrays are not in its attributes. Fix: pass the arrays in a tuple, list, dict,
    namedtuple, dataclass or plain object, or register the type with ``mutad.register_pytree``.
    """

    _refusal = True


class ComplexInputError(MutadError, TypeError):
    """Complex values reached something mutad does not differentiate for them.

    Example: a function whose rule is written for real values only (``np.cov`` of a complex
    array), or a complex-valued function given to ``gradient``, which needs a real loss. The message names the function and what to do instead (take ``np.abs`` or
    ``np.real`` of a complex loss; use ``pullback`` for complex outputs).
    """

    _refusal = True


class InvalidArgumentError(MutadError, ValueError):
    """A mutad function was called with an argument it cannot use.

    Example: ``mutad.jvp(f, x, v)`` with ``x`` not in a tuple, a tangent of the wrong shape, or
    a non-square matrix for ``mutad.linalg.cholesky_``. The message names the argument and what
    it must be.
    """


class PolicyError(InvalidArgumentError):
    """``policy`` was neither ``"restore"`` nor ``"checkpoint"``."""


class ArgnumsError(InvalidArgumentError):
    """``argnums`` named an argument that does not exist, or was not an int or tuple of ints."""


class RuleError(MutadError, TypeError):
    """A rule given with ``mutad.adjoint`` or ``mutad.inplace_adjoint`` returned something mutad
    cannot use.

    Example: an in-place rule that returns nothing instead of its ``back`` function. Fix: follow
    "Custom rules" in docs/guide.md, and prove the rule with ``mutad.testing.check_rule``.
    """


class PullbackReusedError(MutadError, RuntimeError):
    """The ``back`` function returned by ``mutad.pullback`` was called a second time.

    The first call runs the reverse pass, which consumes the tape and puts the caller's arrays
    back. Fix: call ``mutad.pullback`` again for a second cotangent.
    """


class UnsupportedOperationError(MutadError, NotImplementedError):
    """A traced array was used in a way mutad cannot differentiate exactly.

    The message names the operation and what to do instead, for example a ufunc called with
    ``where=``, or a write through a view whose elements share memory (from
    ``np.broadcast_arrays``), whose result depends on the order of the writes:

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     x.resize(3)           # replaces the array's memory
    ...     return x.sum()
    >>> try:
    ...     mutad.gradient(f, np.array([1.0, -1.0]))
    ... except mutad.errors.UnsupportedOperationError as error:
    ...     print(str(error).split(":")[0])   # the message goes on with what to do instead
    x.resize(...) on a differentiated array
    """

    _refusal = True


class UnsupportedAttributeError(UnsupportedOperationError, AttributeError):
    """An attribute of an object standing for a traced value that mutad does not follow: a
    method of a ``scipy.sparse`` matrix with traced values other than its products, solves,
    transposes, conversions and sums (``A.sum()``, ``A[i, j]``). It is an ``AttributeError``
    too, so that ``hasattr`` answers ``False``.

    Fix: the message names what is followed; compute with ``A.data`` (the traced stored
    values) or ``A.toarray()`` (a traced dense array).
    """

    _refusal = False  # (NumPy and hasattr ask for attributes that may be missing)


class UnsupportedArrayError(MutadError, TypeError):
    """An argument is an array mutad cannot differentiate exactly: an ndarray subclass
    (``np.ma.MaskedArray``, ``np.matrix``, ``np.memmap``, ...), whose operations mean something
    other than a plain ndarray's (a mask, matrix products), or an ``object`` array holding
    numbers, whose gradient would silently be None.

    Example: ``mutad.gradient(f, np.ma.array([1.0, 2.0], mask=[0, 1]))``.
    Fix: pass a plain float ndarray: ``x.filled(0.0)`` or ``x.compressed()`` for a masked array
    (and apply the mask inside ``f``, with ``np.where``), ``np.asarray(x)`` for a matrix (with
    ``@`` for its products) or a memory map, ``x.astype(float)`` for an object array.
    """


class ReadOnlyError(MutadError, ValueError):
    """A traced array NumPy makes read-only was written into.

    Example: ``d = np.diagonal(x); d += 1``. NumPy's ``np.diagonal``, ``np.broadcast_to`` and
    ``sliding_window_view`` give read-only views, and mutad's views are read-only exactly when
    NumPy's are, so the write fails as it does in NumPy (this is also a ``ValueError``).
    Fix: write into a copy (``d = np.diagonal(x).copy()``), or into the base array.
    """


class NotPositiveDefiniteError(MutadError, LinAlgError):
    """``mutad.linalg.cholesky_`` was given a matrix that is not (numerically) positive definite.

    Example: ``cholesky_(np.array([[1.0, 2.0], [2.0, 1.0]]))``. The matrix is left as it was
    (exactly, for a symmetric matrix). Fix: check the matrix is symmetric positive definite, or
    add a small multiple of the identity.
    """


class ConstantModifiedError(MutadError, ValueError):
    """An untraced array that a recorded operation reads was written afterwards.

    Example: ``w = np.empty(n)`` is filled with constants and used in ``x = x * w``, then
    overwritten on the next loop iteration (``w[:] = ...``), where ``w`` was allocated before
    the differentiation started. The gradient of the first product needs the first values of
    ``w``, so mutad makes such arrays (and the arrays that own their memory) read-only while it
    differentiates, and the write fails; a write through a view made before the differentiation
    started, which NumPy leaves writable, is found by a checksum before the reverse pass. The
    flags are the process's: another thread writing ``w`` meanwhile gets NumPy's read-only
    ``ValueError``. Fix: allocate ``w`` inside the differentiated function (mutad then follows
    its writes and puts the overwritten values back in the reverse pass), or write into a new
    array each time (``w = np.cos(...)``).

    The same holds for an array that views an argument's memory, reached through a global or
    a closure (``head = data[:2]`` at module level, and ``mutad.gradient(f, data)``): it is a
    constant only while the function does not write into that argument, so reading it after
    such a write, or writing the argument after an operation kept it for the gradient,
    raises. Fix: pass it as an argument too (arguments that share memory are one buffer with
    one gradient).
    """


class GradientCheckError(MutadError, AssertionError):
    """``check_grads`` or ``check_jvp`` found a derivative that disagrees with finite
    differences, or an argument that did not come back bit-for-bit.

    Example: a rule given with ``mutad.adjoint`` whose pullback has a wrong sign. Fix: the
    message gives both numbers; check the rule against its derivation.
    """


class NonFiniteError(MutadError, FloatingPointError):
    """Under :func:`mutad.detect_anomaly`, an operation made a NaN or an infinity out of finite
    numbers: the first one to do so, in the order the differentiation ran it.

    ``kind`` says what went wrong: ``"value"`` (the forward pass computed it), ``"cotangent"``
    (its pullback, in the reverse pass, made a gradient that is not finite from finite ones),
    or ``"restored value"`` (undoing its in-place write gave back a value that is not finite
    where the array held a finite one). ``operation`` names it (``np.sqrt``), ``filename``,
    ``lineno`` and ``source`` give the line of the differentiated code that ran it.

    Example: ``mutad.gradient(lambda x: np.sqrt(x).sum(), np.zeros(2))`` inside ``with
    mutad.detect_anomaly():`` names ``np.sqrt``, whose derivative is infinite at 0. Fix: keep
    the arguments inside the function's domain (or out of it by a margin), and where a value
    is discarded (``np.where(x > 0, np.log(x), 0.0)``), keep its argument valid too
    (``np.log(np.where(x > 0, x, 1.0))``).
    """

    def __init__(self, message: str, kind: str | None = None, operation: str | None = None,
                 filename: str | None = None, lineno: int | None = None,
                 source: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.operation = operation
        self.filename = filename
        self.lineno = lineno
        self.source = source


# SciPy's private ufuncs that a public function of scipy.special calls: a user who called
# scipy.special.zeta(x) knows it by that name, not by its ufunc's (_riemann_zeta).
_SCIPY_SPECIAL_WRAPPERS = {
    "_riemann_zeta": "zeta", "_zeta": "zeta", "_lambertw": "lambertw",
    "_ellip_harm": "ellip_harm", "_stirling2_inexact": "stirling2",
    **{f"_spherical_{kind}n{d}": f"spherical_{kind}n" for kind in "jyik" for d in ("", "_d")},
}


def function_name(func):
    """How a user would spell ``func``: ``np.sum``, ``np.linalg.solve``, ``scipy.special.erf``."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(func, numpy.ufunc):
        if getattr(numpy, func.__name__, None) is func:
            return f"np.{func.__name__}"
        special = sys.modules.get("scipy.special")
        if getattr(special, func.__name__, None) == func:  # (the mode's reads as it: ==)
            return f"scipy.special.{func.__name__}"
        wrapper = _SCIPY_SPECIAL_WRAPPERS.get(func.__name__)
        if wrapper is not None and getattr(getattr(special, "_ufuncs", None), func.__name__,
                                           None) is func:
            return f"scipy.special.{wrapper}"
        return f"the ufunc {func.__name__}"
    module = getattr(func, "__module__", None) or "numpy"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    if module.startswith("numpy"):
        module = "np" + module[len("numpy"):]
    return f"{module}.{name}"


def no_rule(func, forward=False, reverse_rule=False):
    """The error the core raises when traced arrays (reverse mode) or, with ``forward``, duals
    reach ``func`` (a function, a ufunc, or a ufunc method keyed ``(ufunc, method)``) and it has
    no rule for that mode; ``reverse_rule`` says that it has one for reverse mode. One wording
    for the engines and for ``registry.explain``, which quotes it."""
    numpy = sys.modules.get("numpy")
    method = type(func) is tuple
    ufunc = method or (numpy is not None and isinstance(func, numpy.ufunc))
    name = f"np.{func[0].__name__}.{func[1]}" if method else function_name(func)
    if not method and ufunc and func.types == ["O" * func.nin + "->" + "O" * func.nout]:
        # np.frompyfunc's, in either mode
        return UnsupportedFunctionError(
            f"{name}, made by np.frompyfunc, computes with Python objects (its result is an "
            "object array), which mutad does not differentiate. Write "
            "np.vectorize(f, otypes=[float]), whose calls of f mutad follows element by "
            "element, or compute it from ufuncs mutad differentiates.")
    if forward and not ufunc:
        return UnsupportedFunctionError(
            f"{name} has no forward-mode rule in mutad"
            + (" (it has a reverse-mode one: use mutad.gradient)" if reverse_rule else "")
            + ". Compute it from functions mutad differentiates, or wrap it with mutad.adjoint "
            "and attach a forward rule with @f.jvp_rule.")
    if forward:
        return UnsupportedFunctionError(f"{name} has no differentiation rule in mutad.")
    if method:
        return UnsupportedFunctionError(
            f"{name} has no differentiation rule in mutad; compute it with functions mutad "
            "differentiates.")
    if ufunc:
        return UnsupportedFunctionError(
            f"{name} has no differentiation rule in mutad. Give it one with mutad.adjoint, or "
            "compute it from ufuncs mutad differentiates.")
    return UnsupportedFunctionError(
        f"{name} has no differentiation rule in mutad. Give it one by wrapping it with "
        "mutad.adjoint (see docs/guide.md, 'Custom rules'), or compute the same thing with "
        "functions mutad differentiates.")


def holds_objects(y):
    """Whether ``y`` (or an item of a tuple or list of outputs) is an array of dtype object."""
    return any(getattr(item, "dtype", None) == object
               for item in (y if isinstance(y, (tuple, list)) else (y,)))


def objects_refused(name):
    """The error for an array of Python objects computed from differentiated arrays by
    ``name`` (``x.astype(object)``, ``np.array(x, dtype=object)``): NumPy fills it with plain
    numbers, which have no derivative, so the gradient through it would be cut without a
    word."""
    return UnsupportedOperationError(
        f"{name} of a differentiated array made an array of dtype object, whose elements NumPy "
        "makes plain Python numbers: the gradient would be cut. Keep a float dtype, or fill "
        "the object array by assignment, a[i] = x[i], which keeps each traced value.")


def plain_copy_missed(name):
    """The error for a value with a derivative meeting memory of which a conversion NumPy made
    (``getattr(w, "__array__")()``, compiled code: not ``w.__array__()`` written so, which is
    ``w``) handed out a plain array: that array reads the values as constants, so their
    derivative would be lost. One wording for both modes."""
    return ConstantModifiedError(
        f"{name}: a value with a derivative was written into an array of which a plain ndarray "
        "of the same memory was handed out by a conversion (getattr(w, '__array__')(), or "
        "compiled code converting w), and that plain array reads the values written as "
        "constants, so their derivative would be lost. Read the array itself instead (w, or "
        "w.__array__() written so, which is w), or write into a new array "
        "(w = np.empty_like(w)) before writing the differentiated values.")


def differentiated_keyword(name, key, kind):
    """The error the engines raise when a value carrying a derivative (``kind``: a traced
    array, a dual) reaches a function as keyword argument ``key``: keyword arguments are read
    as settings, so its derivative would be lost. One wording for both modes; whether ``key``
    may be given positionally depends on the function, so both ways out are named."""
    return UnsupportedOperationError(
        f"{name}: the {kind} passed as keyword argument {key}= cannot be differentiated "
        f"(mutad differentiates a function's positional arguments). Pass it positionally "
        f"where {name} takes it so, or, if its derivative is not wanted, pass "
        f"mutad.stop_gradient of it.")

# Public as mutad.errors (the face that re-exports them): named so in tracebacks, the
# documentation and pickles (an error raised on a Dask worker reaches the caller).
for _name in __all__:
    globals()[_name].__module__ = "mutad.errors"
del _name
