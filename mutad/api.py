"""The differentiating functions of the public API, as short compositions of the core."""

from __future__ import annotations

import functools
import itertools
import random
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import numpy as np

from .core.devices import LIBRARIES, device_of, is_device, namespace
from .core.errors import (
    ArgnumsError,
    ComplexInputError,
    ConversionError,
    InvalidArgumentError,
    NonScalarOutputError,
    PullbackReusedError,
    UnsupportedFunctionError,
    UnsupportedOperationError,
)
from .engines import forward, session
from .core.allocation import RUNS_OF_F, allocate, as_called, random_state
from .core.arguments import check_argnums, no_full_collections
from .core.debug import user_frames
from .core.levels import Tracer, handled
from .listing import TapeListing
from .engines.replay import Replayed
from .engines.reverse import Traced, active, place_of, thaw
from .engines.session import ReverseDifferentiation, check_precision
from .core.trees import (check_leaf, flatten, written_back, is_inexact_array, is_inexact_scalar,
                          scalar_derivative)
from .core.views import memory, owner, wrapped

T = TypeVar("T")


def _unwrapped_output(y, has_aux):
    """``f``'s output (``(loss, aux)`` where ``has_aux``) with its loss, where an object that
    stands for NumPy's (an ``np.matrix`` of traced values) holds it, as the traced array it
    holds (``__mutad_output__``), and what makes the loss's value NumPy's again (None: it is)."""
    pair = has_aux and isinstance(y, (tuple, list)) and len(y) == 2
    loss = y[0] if pair else y
    # (a traced array, the common loss, has none: not asked of its class, where a missing
    # attribute costs an AttributeError made and dropped)
    unwrap = None if type(loss) is Traced else getattr(type(loss), "__mutad_output__", None)
    if unwrap is None:
        return y, None
    loss, output_as = unwrap(loss)
    return ((loss, y[1]) if pair else loss), output_as


def _scalar_output(y):
    # (a traced value's isinstance asks its __class__, which looks for its caller: not here;
    # nor its dtype, a property that does too: its value's)
    traced = type(y) is Traced
    if not traced and isinstance(y, (tuple, list)):
        raise NonScalarOutputError(
            f"gradient needs a scalar output, but the function returned a {type(y).__name__}. "
            "If it is (loss, aux), pass has_aux=True to get aux back beside the gradients; "
            "otherwise return one float (y.sum() for an array).")
    dtype = y.value.dtype if traced else getattr(y, "dtype", None)
    if dtype is not None and dtype.kind == "c" or type(y) is complex:
        raise ComplexInputError(
            "gradient needs a real-valued function, but this one returned a complex value, "
            "whose derivative is not a gradient. Return a real loss (np.abs(y) ** 2, "
            "np.real(y), ...), or use mutad.pullback with a complex cotangent.")
    if traced:
        # One element of any shape is a scalar (a (1, 1) ``e.T @ e`` of column vectors), as
        # for autograd and PyTorch; the value comes back in its shape
        if y.value.size != 1:
            raise NonScalarOutputError(
                f"gradient needs a scalar output (or an array of one element), but the function "
                f"returned an array of shape {y.value.shape}. Reduce it (y.sum()), or use "
                "mutad.pullback with a cotangent.")
        return _returned(y)  # a Python number or NumPy's scalar, or 0-d array, as it was
    if type(y) in (float, int, bool):  # Python's number, as f returned it
        return y
    value = np.asarray(y)
    if value.size != 1 or value.dtype.kind not in "fiub":
        raise NonScalarOutputError(
            f"gradient needs a scalar output, but the function returned {type(y).__name__}"
            f"{' of shape ' + str(value.shape) if value.ndim else ''}. Return a float "
            "(y.sum() for an array), or use mutad.pullback for non-scalar outputs.")
    # a 0-d array stays one, as in NumPy; a subclass's too, as f returned it: np.ma.masked (a
    # reduction of masked elements alone) is NumPy's value, whose data np.asarray would return
    return y if isinstance(y, np.ndarray) else value[()]


@user_frames
def value_and_gradient(f: Callable[..., Any], *args: Any,
                       argnums: int | tuple[int, ...] | None = None,
                       policy: Literal["restore", "checkpoint"] = "restore",
                       has_aux: bool = False, memory: float | None = None) -> Any:
    """The value of scalar-valued ``f(*args)`` and its gradient with respect to ``args``.

    ``f`` may update arrays in place; every array reachable from ``args`` holds its original
    bytes again when this returns or raises. Gradients mirror their arguments (see ``gradient``).
    With ``has_aux=True``, ``f`` returns ``(loss, aux)`` and this returns
    ``((value, aux), grads)`` (JAX's convention). Given no arguments, it is
    :func:`value_and_grad`'s function (``value_and_gradient(f)(x)``, as ``gradient(f)``).

    >>> import numpy as np, mutad
    >>> def f(a, b):
    ...     a += b
    ...     return (a * a).sum()
    >>> value, (da, db) = mutad.value_and_gradient(f, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> float(value), da.tolist(), db.tolist()
    (52.0, [8.0, 12.0], [8.0, 12.0])
    """
    if not args:  # (as ``gradient(f)``)
        return value_and_grad(f, 0 if argnums is None else argnums, has_aux, policy, memory)
    return _value_and_gradient(f, args, {}, argnums, policy, has_aux, memory)


def _value_and_gradient(f, args, kwargs, argnums, policy, has_aux, memory=None,
                        recording=None):
    """``value_and_gradient``; ``recording`` (``replay.Recording``) writes the program down."""
    selected, single = check_argnums(argnums, len(args))
    if argnums is not None:  # chosen by position: an integer there is a mistake, not a None
        for i in selected:
            _not_an_integer(args[i], i)
    with ReverseDifferentiation(policy, memory) as d:
        # Keyword arguments are traced like the others (they may alias or be written), but
        # get no gradient.
        # (and what a recording takes as inputs of the program besides: outside argnums)
        given = () if recording is None else recording.given()
        traced = d.wrap((*args, kwargs, *given), selected if argnums is not None else
                        range(len(args) + 1) if given else None, recording is not None)
        *traced_args, traced_kwargs = traced[:len(args) + 1]
        if recording is not None:
            recording.start(d, traced[len(args) + 1:])
        y = d.call(f, traced_args, traced_kwargs)
        y, output_as = _unwrapped_output(y, has_aux)
        if recording is not None:
            recording.end(d, y, output_as)
        if has_aux:
            y, aux = _loss_and_aux(y)
        value = _scalar_output(y)
        if output_as is not None:
            value = output_as(value)
        grads = d.gradients([(y, 1.0)])
    if single:
        grads = grads[selected[0]]
    else:  # (a loop, not a generator: made and resumed on every call, it costs more)
        picked = []
        for i in selected:
            picked.append(grads[i])
        grads = tuple(picked)
    return ((value, aux) if has_aux else value), grads


def _loss_and_aux(y):
    """``(loss, aux)`` returned by ``f``, aux detached as it is now: plain copies, which the
    replay that follows (it rewinds every traced buffer) cannot change."""
    if not (isinstance(y, (tuple, list)) and len(y) == 2):
        raise NonScalarOutputError(
            f"has_aux=True: f must return a pair (loss, aux), but it returned "
            f"{type(y).__name__}{' of length ' + str(len(y)) if isinstance(y, (tuple, list)) else ''}.")
    loss, aux = y
    leaves, rebuild = flatten(aux)
    return loss, rebuild([_detached(leaf) for leaf in leaves])


def _detached(x):
    if type(x) is forward.Dual:  # (a Jacobian's forward pass)
        x = x.value
    if type(x) is Traced:
        return _returned(x)
    if isinstance(x, np.ndarray):
        x = x.copy()  # the caller's integer arrays are put back after f returns
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x


_returned = session.returned


@user_frames
def gradient(f: Callable[..., Any], *args: Any, argnums: int | tuple[int, ...] | None = None,
             policy: Literal["restore", "checkpoint"] = "restore", has_aux: bool = False,
             memory: float | None = None) -> Any:
    """The gradient of scalar-valued ``f`` at ``args``, through any in-place updates.

    ``argnums=None`` gives a tuple with one entry per positional argument; an int gives that
    gradient alone; a tuple of ints gives a tuple (negative positions count from the end).
    Each gradient has its argument's structure: an array of the same shape and dtype for a
    float array, a Python float for a Python float and NumPy's scalar of its dtype for
    NumPy's, the same tuples, lists, dicts, namedtuples,
    dataclasses and objects for containers (see docs/guide.md, "Argument structures"), and
    ``None`` for what cannot be differentiated (integers, booleans, integer arrays, None).
    ``policy="checkpoint"`` saves every overwritten region instead of restoring it by
    inversion: exact, at the cost of memory. ``memory=`` (bytes) bounds what is saved of an
    array that writes overwrite without a safe inverse (a clip, an assignment, a dissipative
    step): a few snapshots of it within that many bytes, from which the reverse pass redoes
    the recorded writes in between (binomial checkpointing; see docs/guide.md, "Memory"). With
    ``has_aux=True``, ``f`` returns
    ``(loss, aux)`` and this returns ``(grads, aux)``. Keyword arguments for ``f`` go through
    :func:`grad`: ``mutad.grad(f)(x, scale=2.0)``.

    Arguments that share memory are one buffer with one gradient: each receives the gradient
    with respect to that buffer (passing ``x`` twice gives the total derivative twice).

    ``gradient(f)`` given no arguments is :func:`grad`'s function, as JAX's ``grad(f)``: the
    gradient with respect to the first argument (or ``argnums``) alone, what
    ``scipy.optimize.minimize(fun, x0, jac=mutad.gradient(fun))`` takes.

    >>> import numpy as np, mutad
    >>> def add_vecs(a, b):
    ...     a += b            # in place: b reaches the output only through a's memory
    >>> def add_sum(a, b):
    ...     add_vecs(a, b)
    ...     return a.sum()
    >>> a, b = np.zeros(3), np.ones(3)
    >>> mutad.gradient(add_sum, a, b)
    (array([1., 1., 1.]), array([1., 1., 1.]))
    >>> a.tolist()            # the caller's array is as it was
    [0.0, 0.0, 0.0]
    """
    if not args:  # (a function of no arguments has no gradient: JAX's ``grad(f)(x)``)
        return grad(f, 0 if argnums is None else argnums, has_aux, policy, memory)
    value, grads = _value_and_gradient(f, args, {}, argnums, policy, has_aux, memory)
    return (grads, value[1]) if has_aux else grads


def grad(f: Callable[..., Any], argnums: int | tuple[int, ...] | None = 0,
         has_aux: bool = False, policy: Literal["restore", "checkpoint"] = "restore",
         memory: float | None = None, replay: bool = False) -> Callable[..., Any]:
    """``f``'s gradient as a function, as JAX's ``grad``: ``grad(f)(x, ...)`` is
    ``gradient(f, x, ..., argnums=0)``. Keyword arguments of the call are passed to ``f``
    without being differentiated; every array reachable from them comes back as it was too.
    With ``has_aux=True`` the function returns ``(grads, aux)``.

    >>> import numpy as np, mutad
    >>> def f(x, scale):
    ...     x *= scale
    ...     return (x * x).sum()
    >>> mutad.grad(f)(np.array([1.0, 2.0]), scale=3.0).tolist()
    [18.0, 36.0]

    With ``replay=True`` the first call for each signature of arguments records ``f``'s
    program, and later calls replay it as plain NumPy calls, guarded on every decision it
    depends on (see docs/guide.md, "Record once, replay fast").
    """
    if replay:
        return Replayed(f, _value_and_gradient, argnums, policy, False, has_aux, memory)

    @functools.wraps(f)
    @user_frames
    def gradient_of_f(*args, **kwargs):
        value, grads = _value_and_gradient(f, args, kwargs, argnums, policy, has_aux, memory)
        return (grads, value[1]) if has_aux else grads

    return gradient_of_f


def value_and_grad(f: Callable[..., Any], argnums: int | tuple[int, ...] | None = 0,
                   has_aux: bool = False, policy: Literal["restore", "checkpoint"] = "restore",
                   memory: float | None = None,
                   replay: bool = False) -> Callable[..., tuple[Any, Any]]:
    """``f``'s value and gradient as a function, as JAX's ``value_and_grad``: it returns
    ``(value, grads)``, or ``((value, aux), grads)`` with ``has_aux=True``. With the default
    ``argnums=0`` it is what ``scipy.optimize.minimize(fun, x0, jac=True)`` takes.

    >>> import numpy as np, scipy.optimize, mutad
    >>> def f(x):
    ...     x -= [1.0, 2.0]   # in place
    ...     return (x * x).sum()
    >>> scipy.optimize.minimize(mutad.value_and_grad(f), np.zeros(2), jac=True).x.round(6).tolist()
    [1.0, 2.0]

    ``replay=True`` records and replays, as for :func:`grad`.
    """
    if replay:
        return Replayed(f, _value_and_gradient, argnums, policy, True, has_aux, memory)

    @functools.wraps(f)
    @user_frames
    def value_and_gradient_of_f(*args, **kwargs):
        return _value_and_gradient(f, args, kwargs, argnums, policy, has_aux, memory)

    return value_and_gradient_of_f


def stop_gradient(x: T) -> T:
    """``x``'s value, through which no gradient flows (at any level of nested
    differentiation), as JAX's ``stop_gradient``. Works on traced and dual arrays, plain arrays,
    scalars, and containers of them (the same structure comes back).

    The result is a new array, as in JAX: writing into it does not write into ``x``'s memory.
    Inside a differentiation it is a *constant*, as the arrays the differentiated code
    allocates are (docs/guide.md, "What you can write inside ``f``"), in reverse and forward
    mode and nested: it behaves as a plain array (``float(mutad.stop_gradient(x[0]))`` works, and SciPy
    routines without rules take it), and becomes traced only if a traced value is written
    into it.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     scale = float(mutad.stop_gradient(x[0]))   # a plain number: no gradient through it
    ...     return scale * (x * x).sum()
    >>> mutad.gradient(f, np.array([1.0, 2.0]))
    (array([2., 4.]),)
    """
    leaves, rebuild = flatten(x)
    return rebuild([_stopped(leaf) for leaf in leaves])


def _stopped(x):
    if not isinstance(x, Tracer):
        return x.copy() if isinstance(x, np.ndarray) else x
    if type(x) is Traced:
        active(x.tape)  # a traced array whose differentiation ended: a clear error
    else:
        forward.active(x.level)  # a dual whose jvp ended: a clear error
    # The plain numbers through every level, as a constant of every differentiation running
    # (np.copy of x is how a replay makes it again: in C order, as ndarray.copy's, whose
    # layout later operations' results, and their sums' rounding, follow).
    return allocate(memory(x).copy(), (np.copy, (x,), {"order": "C"}))


@user_frames
def pullback(f: Callable[..., Any], *args: Any,
             policy: Literal["restore", "checkpoint"] = "restore", memory: float | None = None,
             ) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """Run ``f(*args)`` and return ``(y, back)``; ``back(dy)`` gives one gradient per argument.

    ``y`` is a plain array (or the same structure of them) that never aliases the arguments.
    The caller's arrays are left as ``f`` left them until ``back`` runs, which puts them back
    as they were before ``f`` (writing into them in between makes ``back`` raise
    ``ConstantModifiedError``: it reverses ``f``'s writes from the values ``f`` left). ``back`` may be called once. Untraced arrays that ``f``'s
    operations read as constants stay read-only until then (or until ``back`` is discarded):
    ``back`` needs their values.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     x *= 2.0
    ...     return x[:2]
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> y, back = mutad.pullback(f, x)
    >>> y.tolist(), x.tolist()
    ([2.0, 4.0], [2.0, 4.0, 6.0])
    >>> back(np.array([1.0, 10.0]))[0].tolist(), x.tolist()
    ([2.0, 20.0, 0.0], [1.0, 2.0, 3.0])
    """
    d = ReverseDifferentiation(policy, memory)
    try:
        with no_full_collections():  # (d's ``with`` block holds them elsewhere: here, not)
            y = d.call(f, d.wrap(args))
    except BaseException:
        d.restore()
        raise
    outputs, rebuild = flatten(y)
    # Copies: the replay in back() rewinds every buffer, the outputs' too.
    plain = [_returned(t) if type(t) is Traced else t for t in outputs]
    done: list[bool] = []
    left = d.caller_sums()  # the arguments as f left them, which back() reverses from

    @user_frames
    def back(dy):
        if done:
            raise PullbackReusedError(
                "back() was called a second time; call mutad.pullback again for another "
                "cotangent.")
        d.check_caller_sums(left)
        done.append(True)
        with d:
            cotangents, _ = flatten(dy)
            if len(cotangents) != len(outputs):
                raise InvalidArgumentError(
                    f"back(dy): dy has {len(cotangents)} leaves but f returned {len(outputs)}.")
            for t, g in zip(outputs, cotangents, strict=True):
                if type(t) is Traced and g is not None and np.shape(g) != t.value.shape:
                    raise InvalidArgumentError(
                        f"back(dy): a cotangent of shape {np.shape(g)} was given for an "
                        f"output of shape {t.value.shape}.")
                if type(t) is Traced:
                    check_precision(g, t.value, ("back(dy)", "cotangent", "output"))
            return d.gradients(zip(outputs, cotangents))

    weakref.finalize(back, thaw, d.tape)  # a back never called still releases the constants
    return rebuild(plain), back


@user_frames
def vjp(f: Callable[..., Any], *primals: Any,
        policy: Literal["restore", "checkpoint"] = "restore", memory: float | None = None,
        ) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """JAX's name for :func:`pullback`, with JAX's signature: ``vjp(f, *primals)`` returns
    ``(y, vjp_fn)``, and ``vjp_fn(dy)`` gives a tuple with one cotangent per primal (the
    vector-Jacobian product ``dy ᵀ J``). Everything :func:`pullback` says holds: ``vjp_fn`` may
    be called once, and puts the caller's arrays back as they were before ``f`` ran.

    >>> import numpy as np, mutad
    >>> def f(x, w):
    ...     x *= w            # in place
    ...     return x
    >>> y, vjp_fn = mutad.vjp(f, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> [g.tolist() for g in vjp_fn(np.array([1.0, 1.0]))]
    [[3.0, 4.0], [1.0, 2.0]]
    """
    return pullback(f, *primals, policy=policy, memory=memory)


@user_frames
def make_tape(f: Callable[..., Any], *args: Any, **kwargs: Any) -> TapeListing:
    """The program mutad records for ``f(*args, **kwargs)``, as JAX's ``make_jaxpr`` shows
    JAX's: ``str()`` of the result is a Wengert list, one line per record, with its outputs,
    primitive, inputs, the bytes it keeps for the reverse pass and how its write is undone.
    Buffers are named ``%0``, ``%1``, ... in order of appearance, the arguments' first; views
    are shown as regions of their buffer. For a function written in a file, the records each
    of its lines made are headed by that line, as a comment (``# step.py:3  u += 0.1 * v``);
    not for one typed at a prompt, as here. ``f`` runs once, and the caller's arrays come back
    as they were; no gradient is computed. The records are in ``.records``; each one's
    ``line`` is the ``(filename, lineno)`` of the code that ran it.

    >>> import numpy as np, mutad
    >>> def step(u, v):
    ...     u += 0.1 * v
    ...     return (u * u).sum()
    >>> print(mutad.make_tape(step, np.ones(10_000), np.ones(10_000)))
    step(%0: f64[10000], %1: f64[10000]):
      %2 = np.multiply(0.1, %1)         0 B
      %0 <- np.add(%0, %2)              0 B  inverse
      %3 = np.multiply(%0, %0)          0 B
      %4 = np.sum(%3)                   0 B
      return %4
    """
    with ReverseDifferentiation("restore") as d:
        *traced_args, traced_kwargs = d.wrap((*args, kwargs))
        y = d.call(f, traced_args, traced_kwargs)
        outputs, _ = flatten(y)
        places = [place_of(t) if type(t) is Traced and t.tape is d.tape else None
                  for t in outputs]
        arguments = [None if t is None or type(t) is not Traced else t.buffer
                     for t in d.traced]
        memory = [id(owner(t.value)) for t in d.traced if type(t) is Traced]
        return TapeListing(getattr(f, "__name__", "f"), list(d.tape.records), arguments,
                           places, memory)



# ----------------------------------------------------------------------------------------------
# Forward mode and second derivatives


@user_frames
def jvp(f: Callable[..., Any], primals: tuple[Any, ...] | list[Any],
        tangents: tuple[Any, ...] | list[Any]) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J tangents)``, through any in-place updates.

    ``primals`` and ``tangents`` are tuples with one entry per positional argument of ``f``,
    each tangent of its primal's structure and shapes (``None``: zero; a number given ``None``
    is a constant, as one left out of ``gradient``'s ``argnums``). Tangents ride alongside
    the primals and are updated in place with them (``a += b`` makes ``ȧ += ḃ``); views share
    tangent memory as they share primal memory. Arguments that share memory are one buffer with
    one tangent, the sum of the tangents given for its places: the transpose of ``gradient``,
    which gives each place the gradient with respect to the buffer. ``f`` works on private
    copies: the caller's arrays are left as they were.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     x *= x            # in place
    ...     return x[1:] - x[:-1]
    >>> y, dy = mutad.jvp(f, (np.array([1.0, 2.0, 3.0]),), (np.array([1.0, 0.0, 0.0]),))
    >>> y.tolist(), dy.tolist()
    ([3.0, 5.0], [-2.0, 0.0])
    """
    return session.jvp(f, primals, tangents)


@user_frames
def hvp(f: Callable[..., Any], primals: tuple[Any, ...] | list[Any],
        tangents: tuple[Any, ...] | list[Any],
        policy: Literal["restore", "checkpoint"] = "restore") -> Any:
    """The Hessian of scalar-valued ``f`` at ``primals`` times ``tangents``, without forming it.

    Computed as reverse mode over forward mode, ``∇ₓ ⟨∇f(x), v⟩ = ∇ₓ (J_f(x) v)``: the gradient
    of ``jvp``'s tangent output, so it costs a small multiple of one gradient (the cheaper
    of the two orders here). A decorated function with no forward rule is differentiated by
    nested reverse mode instead. Returns
    the structure of ``primals[0]`` when there is one primal, a tuple otherwise.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     x **= 3.0
    ...     return x[0] + x[1]
    >>> mutad.hvp(f, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),)).tolist()
    [6.0, 12.0]
    """
    primals, tangents = tuple(primals), tuple(tangents)
    grads = _hvp(f, primals, tangents, None, policy)
    return grads[0] if len(primals) == 1 else grads


def _hvp(f, primals, tangents, argnums, policy):
    """The gradient of ``<∇f, v>``: reverse over forward, or nested reverse mode where a
    decorated function has no forward rule."""

    def over_forward(*xs):
        return session.jvp(f, xs, tangents)[1]

    def over_reverse(*xs):
        total = 0.0
        for g, v in zip(flatten(gradient(f, *xs, policy=policy))[0], flatten(tangents)[0],
                        strict=True):
            if g is not None and v is not None:
                total = total + (g * v).sum()
        return total

    try:
        return gradient(over_forward, *primals, argnums=argnums, policy=policy)
    except UnsupportedFunctionError as error:  # a decorated function with a reverse rule only
        handled(error)
        return gradient(over_reverse, *primals, argnums=argnums, policy=policy)


def _basis(x):
    """The unit perturbations of float array or scalar ``x``, one per element, in C order."""
    shape = np.shape(x)
    dtype = np.result_type(x, 0.0)
    xp = device_of(x) or np  # on the device of a device array
    for k in range(int(np.prod(shape))):
        e = xp.zeros(shape, dtype)
        e.reshape(-1)[k] = 1.0
        yield e if shape else dtype.type(1.0)


def _is_float(x):
    """A float array or scalar, or one an enclosing differentiation traces (nested)."""
    return is_inexact_array(x) or is_inexact_scalar(x) or (wrapped(x) and x.dtype.kind in "fc")


def _not_an_integer(x, position):
    """Refuse an integer (or bool) number or array selected by ``argnums``: its gradient would be
    a silent None (``D = 2`` for ``D = 2.0``), as JAX and autograd refuse it."""
    kind = getattr(x, "dtype", None)
    kind = kind.kind if kind is not None else ("b" if type(x) is bool else
                                                "i" if isinstance(x, int) else None)
    if kind in ("i", "u", "b"):
        raise ArgnumsError(
            f"argument {position}, selected by argnums, is "
            f"{'an integer' if kind != 'b' else 'a boolean'} "
            f"{'array' if getattr(x, 'ndim', 0) else 'number'} ({x!r}), which has no "
            "derivative. Pass a float (2.0 rather than 2, or x.astype(float)), or leave it out "
            "of argnums.")


def _differentiable_argument(x, function, position):
    leaves = flatten(x)[0]
    for leaf in leaves:
        check_leaf(leaf)
        if np.iscomplexobj(leaf) and not wrapped(leaf):
            raise ComplexInputError(
                f"{function}: argument {position} is complex, and a complex function's "
                "derivative is a matrix only where it is complex-differentiable. Use "
                "mutad.pullback and mutad.jvp, or pass the real and imaginary parts as real "
                "arguments.")
    if not any(_is_float(leaf) for leaf in leaves):
        raise ArgnumsError(f"{function}: argument {position} holds no float array or scalar, "
                           "so it has no derivative.")


def _on_leaves(f, args, selected, runs=None):
    """``f`` as a function of the leaves of ``args``, the leaves, the positions of the float
    leaves of each selected argument, and ``per_argument(values, i)``, which rebuilds argument
    ``i``'s structure around one value per float leaf (None for the others). ``runs``: the
    ``_RunsShownAsOne`` told of each run of ``f`` (in this function, which the allocation
    mode follows to ``f``, not in one more around it)."""
    leaves, parts = [], []
    for a in args:
        these, rebuild = flatten(a)
        parts.append((len(leaves), len(these), rebuild))
        leaves.extend(these)

    if runs is not None:
        runs.reach(f, leaves)

    def f_of_leaves(*xs):
        if runs is not None:
            runs.begin()
        built: list = []
        y = as_called(f)(*(rebuild(list(xs[start:start + n]), None, built) for start, n, rebuild in parts))
        if written_back(built, None, apply=False):
            raise UnsupportedOperationError(
                "f changed a container it was given (set an attribute, a dict entry, a list "
                "item) in a Jacobian or a Hessian, which runs f once per direction or batch "
                "of them: mutad cannot leave the caller's containers as NumPy's one run of f "
                "leaves them. Keep such state outside the arguments (a closure), or compute "
                "what f stores there outside the differentiation.")
        if runs is not None:
            runs.ended(y)
        return y

    def per_argument(values, i):
        start, n, rebuild = parts[i]
        return rebuild([values.get(k) for k in range(start, start + n)])

    positions = {i: [k for k in range(parts[i][0], parts[i][0] + parts[i][1])
                     if _is_float(leaves[k])] for i in selected}
    return f_of_leaves, leaves, positions, per_argument


@user_frames
def jacobian(f: Callable[..., Any], *args: Any, argnums: int | tuple[int, ...] = 0) -> Any:
    """The Jacobian of ``f`` with respect to ``args[argnums]``, of shape ``y.shape + x.shape``.

    Forward mode (the columns, a batch of directions per pass where every operation batches,
    else one ``jvp`` per input element: docs/api.md) or reverse mode (one gradient per output
    element, the program recorded once and replayed for the other rows), whichever has fewer
    directions to take. A tuple ``argnums`` gives a tuple of
    Jacobians; outputs in tuples, lists or dicts give Jacobians in the same structure, each
    holding the tuple of ``argnums`` (nested as JAX's, and as the shape: the outputs outside,
    ``J[k][i]`` for output ``k`` and argument ``i``). An argument that is a structure (a tuple,
    dataclass, object) gives that structure, each float leaf holding its Jacobian and ``None``
    for the others.
    :func:`jacfwd` and :func:`jacrev` choose the mode, and return a function, as JAX's do;
    so does ``jacobian(f)`` given no arguments, which takes keyword arguments for ``f`` too.
    """
    if not args:  # (a function of no arguments has no Jacobian: JAX's ``jacobian(f)(x)``)
        return _curried(_jacobian, f, argnums, None)
    return _jacobian(f, args, argnums, None)


def _curried(differentiation, f, *options):
    """``jacobian(f)``, ``hessian(f)``: the function of ``f``'s arguments, positional and
    keyword, computing ``differentiation(f, args, argnums, *more)`` at them."""
    argnums, *more = options

    @user_frames
    def at(*args, **kwargs):
        g, args, selected = _with_keywords(f, args, argnums, kwargs)
        return differentiation(g, args, selected, *more)

    return at


def _with_keywords(f, args, argnums, kwargs):
    """``f``, ``args`` and ``argnums`` of a call with keyword arguments as those of one whose
    keywords are a last positional argument (a dict, not differentiated): they then take the
    path of every argument that is not differentiated (the runs a Jacobian or a Hessian makes
    of ``f`` each get them as NumPy's one run does; the caller's arrays are left as they
    were)."""
    if not kwargs:
        return f, args, argnums
    selected, single = check_argnums(argnums, len(args))

    def with_keywords(*values):
        return as_called(f)(*values[:-1], **values[-1])

    return with_keywords, args + (kwargs,), selected[0] if single else selected


def _with_aux(f, has_aux):
    """``f`` and its Jacobian's result as they are, or for ``has_aux``: ``f`` returning
    ``(y, aux)`` as a function returning ``y`` that keeps the aux of its first run (the runs
    all start from the same arguments), and a function giving ``(jacobian, aux)``."""
    if not has_aux:
        return f, lambda jacobian: jacobian
    kept = []

    def loss(*args, **kwargs):
        y, aux = _loss_and_aux(f(*args, **kwargs))
        if not kept:
            kept.append(aux)
        return y

    return loss, lambda jacobian: (jacobian, kept[0])


@user_frames
def jacfwd(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           has_aux: bool = False) -> Callable[..., Any]:
    """The function computing the Jacobian of ``f`` in forward mode, a direction per element of
    the differentiated arguments, batched in a few passes where the program allows
    (:func:`jacobian`): JAX's ``jacfwd``. ``jacfwd(f)(*args)`` is
    :func:`jacobian`'s result, computed by forward mode whatever the shapes: the cheaper
    mode when ``f`` has more outputs than inputs.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     y = np.concatenate([x, x[:1]])
    ...     y *= x[1]             # in place
    ...     return y
    >>> mutad.jacfwd(f)(np.array([1.0, 2.0])).tolist()
    [[2.0, 1.0], [0.0, 4.0], [2.0, 1.0]]

    With ``has_aux=True``, ``f`` returns a pair ``(y, aux)`` and the function returns
    ``(jacobian, aux)``, aux not differentiated (as JAX's).
    """

    @user_frames
    def jacobian_of_f(*args, **kwargs):  # (keyword arguments are f's, as JAX's)
        loss, result = _with_aux(f, has_aux)
        loss, args, selected = _with_keywords(loss, args, argnums, kwargs)
        return result(_jacobian(loss, args, selected, "forward"))

    return jacobian_of_f


@user_frames
def jacrev(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           has_aux: bool = False) -> Callable[..., Any]:
    """The function computing the Jacobian of ``f`` in reverse mode, one gradient per element
    of the outputs: JAX's ``jacrev``. ``jacrev(f)(*args)`` is :func:`jacobian`'s result,
    computed by reverse mode whatever the shapes: the cheaper mode when ``f`` has fewer outputs
    than inputs.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     x[1:] -= x[:-1]       # in place
    ...     return x[1:]
    >>> mutad.jacrev(f)(np.array([1.0, 2.0, 4.0])).tolist()
    [[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0]]

    With ``has_aux=True``, ``f`` returns a pair ``(y, aux)`` and the function returns
    ``(jacobian, aux)``, as :func:`jacfwd`'s.
    """

    @user_frames
    def jacobian_of_f(*args, **kwargs):  # (keyword arguments are f's, as JAX's)
        loss, result = _with_aux(f, has_aux)
        loss, args, selected = _with_keywords(loss, args, argnums, kwargs)
        return result(_jacobian(loss, args, selected, "reverse"))

    return jacobian_of_f


def _on_host(value):
    """``value`` as a NumPy array: a device array's explicit copy to the host (a device library
    refuses NumPy's implicit conversion)."""
    if is_device(value):
        to_host = getattr(namespace(value), "asnumpy", None)
        if to_host is not None:
            return to_host(value)
    return np.asarray(value)


_GENERATORS = (np.random.Generator, np.random.RandomState, np.random.BitGenerator, random.Random)
_NO_ATTRIBUTES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
"""What ``_RunsShownAsOne.reach`` does not look into for generators: classes, modules and
functions (whose attributes are not the state of a program's objects)."""


def _reached_by(f, reached, seen, depth):
    """Append to ``reached`` what function ``f`` reaches: the object it is a method of (or is,
    a callable object), its closure's contents and the globals its code names; and, ``depth``
    levels down, what the functions among those reach (a lambda around f, a helper f calls)."""
    if id(f) in seen:
        return
    seen.add(id(f))
    if isinstance(f, types.MethodType):
        reached.append(f.__self__)
    elif not isinstance(f, (types.FunctionType, types.BuiltinFunctionType)):
        reached.append(f)  # a callable object
    function = getattr(f, "__func__", f)
    code = getattr(function, "__code__", None)
    if code is None:
        return
    start = len(reached)
    for cell in function.__closure__ or ():
        try:
            reached.append(cell.cell_contents)
        except ValueError:  # (a cell not filled yet)
            pass
    names = function.__globals__
    reached.extend(names[name] for name in _names_read(code) if name in names)
    if depth > 1:
        for x in reached[start:]:
            if isinstance(x, (types.FunctionType, types.MethodType)) and _users(x):
                _reached_by(x, reached, seen, depth - 1)


def _users(function):
    """Whether ``function`` is the user's code, not a library's (NumPy's, SciPy's, mutad's)."""
    module = getattr(function, "__func__", function).__globals__.get("__name__")
    return str(module).partition(".")[0] not in LIBRARIES


def _names_read(code):
    """The global names ``code`` reads, with those of the code it holds (a comprehension's,
    a lambda's)."""
    names = list(code.co_names)
    for inner in code.co_consts:
        if isinstance(inner, types.CodeType):
            names.extend(_names_read(inner))
    return names


def _generators_held(reached, depth=3, budget=256):
    """The random generators among ``reached`` or held in them ``depth`` steps down (an
    attribute, an item of a list, tuple or dict, the object a bound method is of:
    ``self.noise.rng``, ``self.layers[0].rng``, ``from random import gauss``), looking at no
    more than ``budget`` objects (a program's large containers are not walked through)."""
    level, seen = list(reached), set()
    for _ in range(depth + 1):
        below = []
        for x in level:
            if type(x) in _HOLDS_NO_GENERATOR or id(x) in seen or budget <= 0:
                continue
            seen.add(id(x))
            budget -= 1
            if isinstance(x, _GENERATORS):
                yield x
            elif isinstance(x, (list, tuple)):
                below.extend(x[:budget])
            elif isinstance(x, dict):
                below.extend(itertools.islice(x.values(), budget))
            elif isinstance(x, (types.MethodType, types.BuiltinMethodType)):
                below.append(x.__self__)  # (a generator's method: `from random import gauss`)
            elif type(x).__dictoffset__ and not isinstance(x, _NO_ATTRIBUTES):
                below.extend(itertools.islice(x.__dict__.values(), budget))
        level = below


_HOLDS_NO_GENERATOR = {int, float, complex, bool, str, bytes, type(None), np.ndarray,
                       np.float64, np.int64}


class _RunsShownAsOne:
    """While a Jacobian or a Hessian runs ``f`` once per direction (or batch of them), the
    warnings shown are those one run shows: NumPy's own, as its one run of ``f`` gives them,
    and the derivative's, not once more per direction. A warning (its text, category and line)
    is shown for its k-th occurrence in a run only if no run before has shown k of it. It
    hooks where Python shows a warning, after the filters: one that the user's filters turn
    into an error still raises inside ``f``, as in NumPy's run, and ``f``'s own
    ``catch_warnings`` records what it records."""

    def __init__(self):
        self.shown, self.run = {}, {}
        self.outer_runs = None
        self.first = None  # the values the first run of ``f`` returned (``ended``)
        # the random generators f reaches or draws from, by the id of what holds their state:
        # (holder, set_state, the state before the first run drew from it)
        self.generators = {}
        self.watching_before = None

    def reach(self, f, args):
        """Note the random generators ``f`` reaches before its first run (in its arguments,
        the object it is a method of, its closure and the globals it names, or held in one of
        those, a few attributes or items down: ``_generators_held``; Python's where it names
        the random module or a method of a generator): each run of ``f`` starts from their states as NumPy's one run does, so
        that its draws are the same (``begin``). Draws that mutad follows (np.random's
        functions, a Generator reached by name) note theirs as they are made
        (``allocation.RUNS_OF_F``): only a run that draws from NumPy's global generator pays
        for putting back its state, the dearest to read and set."""
        reached = list(args)
        _reached_by(f, reached, set(), 3)
        for generator in _generators_held(
                random._inst if x is random else x for x in reached):
            self.drawing_from(generator)

    def drawing_from(self, generator):
        """``f`` draws from ``generator``: its state before the first draw of these runs is
        kept, the state each later run starts from."""
        held = random_state(generator)
        if held is not None and id(held[0]) not in self.generators:
            holder, get_state, set_state = held
            self.generators[id(holder)] = (holder, set_state, get_state())

    def begin(self):
        """A run of ``f`` begins (``_on_leaves``'s function calls it). (Emptied in place: a
        dict rebound on every run would be a change to what ``f`` reaches for the replay of
        ``jacrev``'s rows, which then traced every row.) The random generators ``f`` draws
        from are put back as they were before the first run: each run draws the same numbers
        as NumPy's one run of ``f``, and the last leaves them as that run does."""
        self.run.clear()
        for _, set_state, state in self.generators.values():
            set_state(state)

    def ended(self, y):
        """A run of ``f`` returned ``y``: the values of each run are the first one's, bit for
        bit, or ``f`` reads state its runs change (a counter, a list it appends to; a draw
        from a generator ``reach`` did not find), and the derivatives of several runs would
        not be those of NumPy's one run of ``f``: refused. (A batched pass that stopped is not
        used, whatever ``f`` went on to compute after catching its stop.)"""
        if forward.FAILED:
            return
        values = [(v.dtype.str, v.shape, v.tobytes()) for v in
                  (_on_host(memory(leaf)) for leaf in flatten(y)[0]) if v.dtype.kind in "biufc"]
        if self.first is None:
            self.first = values
        elif values != self.first:
            raise UnsupportedOperationError(
                "f returned other values on another of the runs a Jacobian or a Hessian makes "
                "of it (one per row, or per batch of directions): it reads state that its runs "
                "change (a counter, a list it appends to, an attribute it updates, a generator "
                "held deeper in an object than mutad looks), and the derivatives of its several "
                "runs would not be those of one run. Pass that state as an argument, or keep it "
                "outside f.")

    def __enter__(self):
        self.show_before = warnings._showwarnmsg_impl
        warnings._showwarnmsg_impl = self.show
        # the arrays made before the call that f writes into, put back after each run and left
        # as the first one left them when all have ended (``session.RUNS``): by the outermost
        # Jacobian or Hessian, where one runs inside another's f
        self.outer_runs = session.RUNS.left
        if self.outer_runs is None:
            session.RUNS.left = []
        self.watching_before = RUNS_OF_F.watching
        RUNS_OF_F.watching = [*self.watching_before, self]
        return self

    def __exit__(self, *exception):
        warnings._showwarnmsg_impl = self.show_before
        RUNS_OF_F.watching = self.watching_before
        if exception[0] is not None:  # (the generators as they were before f ran)
            for _, set_state, state in self.generators.values():
                set_state(state)
        if self.outer_runs is None:
            left, session.RUNS.left = session.RUNS.left, None
            if exception[0] is None:
                session.leave(left)

    def show(self, message):
        key = (str(message.message), message.category, message.filename, message.lineno)
        k = self.run[key] = self.run.get(key, 0) + 1
        if k > self.shown.get(key, 0):
            self.shown[key] = k
            self.show_before(message)


def _jacobian(f, args, argnums, mode):
    """:func:`jacobian` by ``mode``: "forward", "reverse", or None for the one with fewer
    passes."""
    with _RunsShownAsOne() as runs:
        return _jacobian_of_runs(f, args, argnums, mode, runs)


def _jacobian_of_runs(f, args, argnums, mode, runs):
    selected, single = check_argnums(argnums, len(args))
    for i in selected:
        _differentiable_argument(args[i], "jacobian", i)
    f, args, positions, per_argument = _on_leaves(f, args, selected, runs)
    differentiated = sorted({k for leaves in positions.values() for k in leaves})
    # In forward mode, the first batch of directions gives f's value too: no run of f of its
    # own for the outputs' shapes, so that a small Jacobian runs f (and its side effects) once
    first = _first_batch(f, args, differentiated[0]) if (
        BATCHED and mode == "forward" and differentiated) else None
    y = first[0] if first is not None else session.jvp(f, tuple(args), (None,) * len(args))[0]
    outputs, rebuild = flatten(y)
    # A complex output of real arguments has a complex Jacobian, the derivatives of its real
    # and imaginary parts: its columns are forward mode's tangents (reverse mode's rows would
    # be the gradients of a complex number)
    complex_outputs = any(np.iscomplexobj(out) for out in outputs)
    if complex_outputs and mode == "reverse":
        raise ComplexInputError(
            "jacrev of a function with complex outputs: reverse mode takes real outputs. Use "
            "mutad.jacfwd or mutad.jacobian (the complex Jacobian of real arguments, in "
            "forward mode), mutad.pullback, or return the real and imaginary parts as real "
            "arrays.")
    # An output that is not a float (an iteration count, a flag, a mask beside the values)
    # has no derivative: its Jacobian is None, as a leaf of an argument that is not a float
    floats = [k for k, out in enumerate(outputs) if _is_float(out)]
    if not floats:
        raise NonScalarOutputError(
            "jacobian needs f to return float arrays or scalars (in tuples, lists or dicts), "
            f"not {type(y).__name__ if not outputs else type(outputs[0]).__name__}." + (
                " A function that writes its result into an array it is given returns "
                "nothing: return that array (return out)." if y is None else ""))
    sizes = [int(np.prod(np.shape(out))) if k in floats else 0 for k, out in enumerate(outputs)]
    jacobians = {}
    for i in differentiated:
        x_shape = np.shape(args[i])
        if mode == "reverse" or mode is None and sum(sizes) < int(np.prod(x_shape)) and \
                not complex_outputs:
            blocks = [_reverse_rows(f, args, i, k, outputs[k]) if k in floats else None
                      for k in range(len(outputs))]
        else:
            columns = None
            if first is not None and i == differentiated[0]:
                rest = _batched_columns(f, args, i, sizes, start=len(first[1]))
                columns = None if rest is None else first[1] + rest
            elif BATCHED:
                columns = _batched_columns(f, args, i, sizes)
            if columns is None:  # one direction per pass
                columns = []
                for e in _basis(args[i]):
                    tangents = [None] * len(args)
                    tangents[i] = e
                    columns.append(flatten(session.jvp(f, tuple(args), tuple(tangents))[1])[0])
            blocks = [_assemble([c[k] for c in columns], x_shape, out) if k in floats else None
                      for k, out in enumerate(outputs)]
        jacobians[i] = [scalar_derivative(J, type(args[i]), type(out))
                        if J is not None and is_inexact_scalar(args[i]) and is_inexact_scalar(out)
                        else J for J, out in zip(blocks, outputs, strict=True)]

    # JAX's nesting, as the shape y.shape + x.shape: the outputs' structure outside, then the
    # tuple of argnums, then each argument's structure around its leaves' blocks
    def of_output(k):
        if k not in floats:
            return None
        results = [per_argument({leaf: J[k] for leaf, J in jacobians.items()}, i)
                   for i in selected]
        return results[0] if single else tuple(results)

    return rebuild([of_output(k) for k in range(len(outputs))])


BATCHED = True
"""Whether ``jacobian`` and ``jacfwd`` try batches of directions (``_batched_columns``) before
one direction per pass; tests switch it off to compare the two."""
BATCH_BYTES = 8 << 20
"""About the most bytes a batch of tangents of one array holds: the batch has as many
directions as fit for the larger of the argument's memory and the outputs."""


def _first_batch(f, args, i):
    """``f``'s value and the columns of the Jacobian with respect to ``args[i]`` for its first
    directions (as many as ``HESSIAN_BATCH``, and as fit ``BATCH_BYTES`` for the argument's
    memory: the outputs' sizes are not known yet), from one batched pass; None where the batch
    does not apply or the pass failed (``_batched_columns``)."""
    x = args[i]
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.size < 2:
        return None
    count = max(2, min(x.size, HESSIAN_BATCH, BATCH_BYTES // (x.dtype.itemsize * owner(x).size)))
    values = []

    def run(tangents, count):
        y, dy = session.jvp_batched(f, tuple(args), tangents, count)
        values.append(y)
        return flatten(dy)[0]

    columns = _columns_in_batches(args, i, count, run, stop=count)
    return None if columns is None else (values[0], columns)


def _batched_columns(f, args, i, sizes, start=0):
    """The columns of the Jacobian with respect to ``args[i]``, as the loop over ``_basis``
    gives them, from forward passes that carry a batch of directions each
    (``session.jvp_batched``); None where the batch does not apply (a number, an array of a
    device, of one element) or a pass met something the batch does not handle
    (``forward.BATCH``), or failed in any way: then one direction per pass gives the result,
    or the error, as it always has. ``start``: the first direction (those before it were
    taken: ``_first_batch``)."""
    x = args[i]
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.size < 2:
        return None
    n = x.size
    per_direction = x.dtype.itemsize * max(owner(x).size, sum(sizes), 1)
    size = max(2, min(n, BATCH_BYTES // per_direction))
    return _columns_in_batches(args, i, size, lambda tangents, count: flatten(
        session.jvp_batched(f, tuple(args), tangents, count)[1])[0], start)


def _columns_in_batches(args, i, size, run, start=0, stop=None):
    """The columns for the basis directions ``start`` to ``stop`` (None: the last) of
    ``args[i]``, ``size`` directions a pass: ``run(tangents, count)`` gives the leaves of a
    pass's batched tangents; None where a pass fails in any way (``BatchUnsupported``, or an
    error one direction per pass gives too)."""
    x = args[i]
    n = x.size
    stop = n if stop is None else stop
    columns = []
    for start in range(start, stop, size):
        count = min(size, stop - start)
        directions = np.zeros((count, n), x.dtype)
        directions[np.arange(count), start + np.arange(count)] = 1.0
        tangents = [None] * len(args)
        tangents[i] = directions.reshape((count,) + x.shape)
        try:
            batch = run(tuple(tangents), count)
        except Exception as error:  # (done another way, column by column)
            handled(error)
            return None
        # (an integer output has no tangent, None: refused by name once f's value is known)
        columns.extend([None if leaf is None else leaf[b] for leaf in batch]
                       for b in range(count))
    return columns


def _reverse_rows(f, args, i, k, out):
    """The Jacobian of output leaf ``k`` (``out``) with respect to ``args[i]``, a gradient per
    element of the output: the program is recorded on the first and replayed on the others
    (traced again where it cannot be: ``grad(..., replay=True)``), whose cotangent ``e`` is an
    argument the replay reads, not a constant of the program."""
    def component(*a, e):
        return (flatten(f(*a))[0][k] * e).sum()

    row = grad(component, argnums=i, replay=True)
    rows = [row(*args, e=e) for e in _basis(out)]
    # np.stack, not np.array: rows an enclosing differentiation traces stay traced (nested).
    # Of the output's dtype, as forward mode's columns are (a gradient has its argument's):
    # jacobian's result is the same whichever mode it takes
    dtype = _dtype_of(out)
    stacked = np.stack(rows).astype(dtype, copy=False) if rows else np.zeros(0, dtype)
    return np.reshape(stacked, np.shape(out) + np.shape(args[i]))


def _dtype_of(out):
    """The dtype of output leaf ``out`` (an array, a NumPy or Python scalar)."""
    return out.dtype if hasattr(out, "dtype") else np.result_type(out)


def _assemble(columns, x_shape, out):
    """The derivative of shape ``out.shape + x_shape`` from its columns, one per element of
    ``x`` in C order, each of ``out``'s shape and dtype."""
    out_shape = np.shape(out)
    if not columns:  # x has no elements: zero columns of out's dtype, as the others are
        return np.zeros(out_shape + x_shape, _dtype_of(out))
    stacked = np.stack(columns).reshape(x_shape + out_shape)  # traced columns stay traced
    return np.moveaxis(stacked, tuple(range(len(x_shape))), tuple(range(-len(x_shape), 0)))


def _hessian_column(f, args, tangents, selected, policy):
    """``H v`` for the arguments ``selected``: forward over reverse."""
    def gradient_of_f(*xs):
        return gradient(f, *xs, argnums=selected, policy=policy)

    try:
        return session.jvp(gradient_of_f, args, tangents)[1]
    except (UnsupportedFunctionError, ConversionError) as error:  # a rule that does not dispatch
        handled(error)
        return _hvp(f, args, tangents, selected, policy)


HESSIAN_BATCH = 16
"""The most directions one batched pass of ``hessian`` carries: its reverse pass keeps a batch
of tangents for each array it saves, so fewer than ``jacobian``'s (an in-place program of 200
steps on 200 elements: 64 directions a pass took 61 MiB at its peak against 4.4 one at a time,
16 took 17 MiB, 7 times faster than one at a time)."""


def _batched_hessian_columns(f, args, j, selected, policy):
    """The columns of the Hessian with respect to ``args[j]``, as ``_hessian_column`` of each
    element of ``_basis`` gives them, from batched forward passes over the gradient (its
    reverse differentiation nested inside: ``session.jvp_batched(..., nested=True)``); None
    where the batch does not apply or a pass met something it does not handle, or failed in
    any way: then one direction per pass gives the result, or the error, as it always has."""
    x = args[j]
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.size < 2:
        return None

    def gradient_of_f(*xs):
        return gradient(f, *xs, argnums=selected, policy=policy)

    n = x.size
    per_direction = x.dtype.itemsize * max(owner(x).size, 1)
    size = max(2, min(n, HESSIAN_BATCH, BATCH_BYTES // per_direction))
    return _columns_in_batches(args, j, size, lambda tangents, count: session.jvp_batched(
        gradient_of_f, tuple(args), tangents, count, nested=True)[1])


@user_frames
def hessian(f: Callable[..., Any], *args: Any, argnums: int | tuple[int, ...] = 0,
            policy: Literal["restore", "checkpoint"] = "restore") -> Any:
    """The Hessian of scalar-valued ``f`` with respect to ``args[argnums]``, of shape
    ``x.shape + x.shape``; for a tuple ``argnums``, the nested tuple of blocks
    ``H[i][j]`` of shape ``x_i.shape + x_j.shape``. An argument that is a structure (a tuple,
    dataclass, object) gives its structure of its structures: ``H.w.b`` is the block for
    leaves ``w`` and ``b`` (``None`` where a leaf is not a float).

    Forward mode over reverse mode, as JAX's ``jacfwd(grad(f))``: a ``jvp`` of the gradient
    along the elements of ``x``, the gradient's in-place reverse pass carrying tangents: a batch
    of directions per pass where every operation on them is one the batch handles (as in
    :func:`jacobian`), else one direction per pass, with the same result. A decorated function
    whose reverse rule does not dispatch falls back to ``hvp``'s orders.

    ``hessian(f)``, given no arguments, is the function computing it at ``f``'s arguments,
    positional and keyword, as JAX's ``hessian(f)``."""
    if not args:  # (a function of no arguments has no Hessian)
        return _curried(_hessian_at, f, argnums, policy)
    return _hessian_at(f, args, argnums, policy)


def _hessian_at(f, args, argnums, policy):
    with _RunsShownAsOne() as runs:
        return _hessian(f, args, argnums, policy, runs)


def _hessian(f, args, argnums, policy, runs):
    selected, single = check_argnums(argnums, len(args))
    for i in selected:
        _differentiable_argument(args[i], "hessian", i)
    f, args, positions, per_argument = _on_leaves(f, args, selected, runs)
    leaves = sorted({k for ks in positions.values() for k in ks})
    blocks = {}  # (leaf, leaf) -> block
    for j in leaves:
        columns = (_batched_hessian_columns(f, args, j, tuple(leaves), policy) if BATCHED
                   else None)
        if columns is None:  # one direction per pass
            columns = []
            for e in _basis(args[j]):
                tangents = [None] * len(args)
                tangents[j] = e
                columns.append(_hessian_column(f, args, tuple(tangents), tuple(leaves), policy))
        for row, i in enumerate(leaves):
            block = _assemble([c[row] for c in columns], np.shape(args[j]), args[i])
            scalars = is_inexact_scalar(args[i]) and is_inexact_scalar(args[j])
            blocks[i, j] = (scalar_derivative(block, type(args[i]), type(args[j])) if scalars
                            else block)
    # Argument i's structure of argument j's structures: H[i][j] holds the second derivatives
    # with respect to a leaf of i, then a leaf of j.
    H = [[per_argument({a: per_argument({b: blocks[a, b] for b in positions[j]}, j)
                        for a in positions[i]}, i) for j in selected] for i in selected]
    if single:
        return H[0][0]
    return tuple(tuple(row) for row in H)
