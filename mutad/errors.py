"""Every error mutad raises, each documented with when it happens and how to fix it.

All of them derive from :class:`MutadError`, so ``except mutad.MutadError`` catches any of them.
Whenever one is raised from inside a differentiation, the caller's arrays have already been put
back bit-for-bit.
"""

from numpy.linalg import LinAlgError


class MutadError(Exception):
    """Base class of every error mutad raises: ``except mutad.MutadError`` catches them all."""


class NonScalarOutputError(MutadError):
    """``gradient`` was asked to differentiate a function whose output is not a scalar.

    Example: ``mutad.gradient(lambda x: x * 2, np.ones(3))``.
    Fix: reduce the output to a scalar (``.sum()``), or use ``mutad.pullback`` with an explicit
    output cotangent.
    """


class UntracedWriteError(MutadError):
    """A traced value was written into an array that mutad is not tracing.

    Example: ``out = np.zeros(3); out[0] = x`` inside the differentiated function, where ``x``
    depends on an argument. The gradient of that write would be lost.
    Fix: create the destination from a traced value, ``np.zeros_like(x)`` or
    ``np.empty(n, like=x)``, so mutad traces it.
    """


class ConversionError(MutadError):
    """A traced array was converted to a plain ndarray (``np.asarray``, ``float()``).

    This happens when code without a mutad rule, typically a SciPy routine, converts its input:
    the conversion would cut the gradient. Fix: wrap the routine with ``mutad.adjoint`` (or
    ``mutad.inplace_adjoint`` if it writes into its arguments) and give it a rule with
    ``@routine.rule``; see the README, "Custom rules".
    """


class UnsupportedFunctionError(MutadError):
    """A NumPy function or ufunc that mutad has no rule for received a traced array.

    Example: ``np.fft.fft(x)`` with ``x`` traced. Fix: give the function a rule by wrapping it
    with ``mutad.adjoint``, or compute the same thing with functions mutad differentiates.
    """


class ComplexInputError(MutadError):
    """A complex array or number was passed to a differentiating function.

    Complex differentiation is not designed yet. Fix: split real and imaginary parts into two
    real arguments.
    """


class PolicyError(MutadError):
    """``policy`` was neither ``"restore"`` nor ``"checkpoint"``."""


class ArgnumsError(MutadError):
    """``argnums`` named an argument that does not exist, or was not an int or tuple of ints."""


class PullbackReusedError(MutadError):
    """The ``back`` function returned by ``mutad.pullback`` was called a second time.

    The first call runs the reverse pass, which consumes the tape and puts the caller's arrays
    back. Fix: call ``mutad.pullback`` again for a second cotangent.
    """


class UnsupportedOperationError(MutadError):
    """A traced array was used in a way mutad cannot differentiate exactly.

    The message names the operation and what to do instead, for example writing through
    duplicate indices (``x[[0, 0]] = v``) or a ufunc called with ``where=``.
    """


class NotPositiveDefiniteError(MutadError, LinAlgError):
    """``mutad.linalg.cholesky_`` was given a matrix that is not (numerically) positive definite.

    Example: ``cholesky_(np.array([[1.0, 2.0], [2.0, 1.0]]))``. The matrix is left as it was
    (exactly, for a symmetric matrix). Fix: check the matrix is symmetric positive definite, or
    add a small multiple of the identity.
    """


class ConstantModifiedError(MutadError):
    """An untraced array that a recorded operation reads was written afterwards.

    Example: ``w = np.empty(n)`` is filled with constants and used in ``x = x * w``, then
    overwritten on the next loop iteration (``w[:] = ...``). The gradient of the first product
    needs the first values of ``w``, so mutad makes such arrays (and the arrays that own their
    memory) read-only while it differentiates, and the write fails; a write through a view made
    before the differentiation started, which NumPy leaves writable, is found by a checksum
    before the reverse pass. The flags are the process's: another thread writing ``w``
    meanwhile gets NumPy's read-only ``ValueError``. Fix: write into a new array each time
    (``w = np.cos(...)``), or create ``w`` from a traced value (``np.zeros_like(x)``) so that
    mutad tracks its writes.
    """
