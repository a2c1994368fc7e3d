"""What the SciPy wrappers share: a ``mutad.adjoint`` whose rule sees every argument in place,
elementwise functions that are not ufuncs (a value computed by an algorithm of its own, its
derivatives by formulas), and SciPy's values without a derivative."""

import contextlib
import functools
import inspect
import sys
import threading

import numpy as np
from scipy._lib import array_api_compat

from . import _devices
from ..core.arguments import unwrapped
from ..core.allocation import (FOLLOWED_LIBRARY_CODE, FOR_THE_CALLER, MODE, PYTHON_BUILTINS,
                               Preexisting, adopted, by_user_code, follows_floats, in_containers,
                               library_allocation, library_binding, library_route, plain_memory,
                               lists_as_arrays,
                               stand_in_value)
from ..core.views import (address, byte_span, may_overlap, overlaps_itself, owner, weaken,
                          writeable)
from ..api import stop_gradient
from ..engines.arraylike import ArrayMethods, carries_derivative, weak
from ..engines.replay import Heard
from ..custom import Adjoint, adjoint, dispatch
from ..core.errors import (ConversionError, EscapedTracerError, MutadError,
                          UnsupportedOperationError, UntracedWriteError)
from ..core.debug import Warnings
from ..core.levels import ACTIVE, handled, innermost
from ..core.views import memory, wrapped
from ..core.registry import RULES, NoClosedForm, defroute, padded, zero_derivative
from ..rules._helpers import stacked, unbroadcast


def _array_namespace(self, api_version=None):
    """A traced or dual array's ``__array_namespace__``: the one SciPy's namespace detection
    (array_api_compat's) gives the array it stands for (NumPy's compatible namespace, for a
    NumPy array). That detection knows NumPy's arrays by their type, and asks an array of
    another type for this method, refusing one without; so SciPy's code written against the
    namespace (``xp.clip`` in ``bartlett``) runs on traced arrays as on NumPy's."""
    return array_api_compat.array_namespace(_plain(self), api_version=api_version)


setattr(ArrayMethods, "__array_namespace__", _array_namespace)  # (NumPy's arrays' protocol)


class ScipyAdjoint(Adjoint):
    """``mutad.adjoint`` of a SciPy function written in Python, whose rule receives every
    positional-or-keyword parameter positionally, defaults filled in.

    The core differentiates traced arrays and duals only in positional places (it refuses them
    as keyword arguments), yet users write ``logsumexp(a, b=weights)`` and
    ``cho_solve((c, lower), b=y)``. Binding the call to SciPy's signature first puts each
    argument in its place, so a rule has one fixed argument list; its ``back`` returns
    cotangents for the leading parameters only, and the settings after them (``axis``,
    ``lower``, ``check_finite``) get ``None``. Plain calls go to SciPy untouched.
    """

    complex_values: str | None = None  # SciPy's functions take complex values only where a module says so

    def __init__(self, fn, arrays=()):
        super().__init__(fn)
        self.signature = inspect.signature(fn)
        self.arrays = arrays  # the parameters SciPy takes as arrays (np.asarray of a list)

    def __call__(self, *args, **kwargs):
        # Traced arrays (reverse mode) and duals (forward mode) both need the binding.
        if innermost((*args, *kwargs.values())) is None:
            y = _devices.call(self.fn, _writable(args),
                              dict(zip(kwargs, _writable(kwargs.values()))))
            return by_user_code(y, self.fn, args, kwargs, sys._getframe(1))
        refuse_device_arrays(self.fn, (*args, *kwargs.values()))
        # a matrix written as nested lists of numbers, traced among them (sos=[[1, a, ...]]):
        # the array NumPy makes of it (a list one level deep the dispatch unwraps itself)
        args = [lists_as_arrays([a])[0] if _nested_numbers(a) else a for a in args]
        kwargs = {k: lists_as_arrays([a])[0] if _nested_numbers(a) else a
                  for k, a in kwargs.items()}
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        for name in self.arrays:
            # a list of traced numbers (logsumexp([a, b, 0.0])): the array NumPy makes of it,
            # stacked at every level, so that the rule of each differentiation, reverse or
            # forward, nested or not, receives an array of its own level, as for an array
            value = bound.arguments[name]
            if type(value) in (list, tuple):
                bound.arguments[name] = lists_as_arrays([value])[0]
        overwritten = _overwritten(self.fn, bound)
        y = super().__call__(*bound.args, **bound.kwargs)
        for name, place in overwritten:
            y = _written_as_scipy_writes(self.fn, bound, name, place, y)
        return y

    def rule(self, rule):
        super().rule(padded(rule))
        return rule


def _plain(x, numbers=False):
    """``x`` with each traced array or dual (at any level, in tuples and lists) its plain
    value; where ``numbers``, a 0-d one's the number it holds."""
    if type(x) in (tuple, list):
        return type(x)(_plain(v, numbers) for v in x)
    if not wrapped(x):
        return x
    while wrapped(x):
        x = x.value
    return x[()] if numbers and np.ndim(x) == 0 else x


def _overwritten(fn, bound, always=()):
    """The traced arrays that SciPy's ``fn`` called as ``bound`` says, ``overwrite_<name>``
    set (or named in ``always``: a BLAS routine's output argument), would overwrite (SciPy
    does where the memory's order and dtype fit LAPACK's, and copies otherwise): ``(name, place)`` for each, ``place`` what SciPy leaves there: the path
    of the output that is that memory (``lu_factor``'s ``lu``), or the bytes it leaves. Found
    by calling SciPy on plain copies laid out as the arrays are, as the flag only permits an
    overwrite; the rule computes on the values themselves and leaves them as they are."""
    names = [key[len("overwrite_"):] for key, value in bound.arguments.items()
             if key.startswith("overwrite_") and value is True] + list(always)
    names = [name for name in names if wrapped(bound.arguments.get(name))]
    if not names:
        return []
    arguments = {key: _plain(value) for key, value in bound.arguments.items()}
    copies = {}
    for name in names:
        x = arguments[name]
        if type(x) is np.ndarray and x.flags.writeable and not overlaps_itself(x):
            # (LAPACK's wrappers copy an array not contiguous; scipy.fft writes into strides)
            copies[name] = arguments[name] = _laid_out_as(x)
    if not copies:
        return []
    try:
        result = fn(*inspect.BoundArguments(bound.signature, arguments).args,
                    **inspect.BoundArguments(bound.signature, arguments).kwargs)
    except Exception as error:
        # this call's error, which f may catch and take another path, is SciPy's on these
        # values, not a step's: a replay would not see it
        for recorder in _recorders(bound.arguments[name] for name in copies):
            recorder.raised(error)
        # SciPy raised (a singular or indefinite matrix's LinAlgError) after overwriting: f
        # may catch the error and read what it left, a partial factorization without a rule
        for name, copy in copies.items():
            if copy.tobytes(order="A") != _plain(bound.arguments[name]).tobytes(order="A"):
                raise UnsupportedOperationError(
                    f"scipy {getattr(fn, '__name__', fn)}(..., overwrite_{name}=True) of a "
                    f"differentiated array raised {type(error).__name__} ({error}) after "
                    f"overwriting `{name}` with its workspace, which mutad does not follow. "
                    f"Pass overwrite_{name}=False, or pass a copy of the array") from error
        raise  # (SciPy left the arrays as they were: its error is f's to catch)
    found = []
    for name, copy in copies.items():
        path = _memory_path(result, copy)
        if path is not None:  # (written even where its bytes are the array's: inv(I))
            found.append((name, path))
        elif copy.tobytes(order="A") != _plain(bound.arguments[name]).tobytes(order="A"):
            found.append((name, copy))
        elif _writes_into(fn, bound, arguments, name, copy):
            # left as it was on these values only (solve's workspace of I is I): a replay
            # would leave it so on others
            for recorder in _recorders([bound.arguments[name]]):
                recorder.refuse(f"scipy {getattr(fn, '__name__', fn)}(..., overwrite_{name}="
                                f"True) left `{name}` as it was on these values only")
    if found and _reads_what_it_overwrites(fn, bound, [name for name, _ in found], result):
        raise UnsupportedOperationError(
            f"scipy {getattr(fn, '__name__', fn)}(..., overwrite_{found[0][0]}=True) of an "
            "array that shares memory with another of its arguments: SciPy then reads what it "
            "has written, in LAPACK's order, which mutad does not follow. Pass a copy of the "
            f"array, or overwrite_{found[0][0]}=False")
    return found


def _array_leaves(x):
    """The plain arrays in ``x`` and in its tuples and lists, at any depth."""
    if type(x) in (tuple, list):
        return [leaf for v in x for leaf in _array_leaves(v)]
    return [x] if type(x) is np.ndarray else []


def _reads_what_it_overwrites(fn, bound, names, result):
    """Whether SciPy's ``fn`` gives other values than ``result`` (its values on separate
    copies) where an array it overwrites shares memory with another of its arguments
    (``lu_solve(lu, lu[0][:, 0], overwrite_b=True)``): called again on copies that share
    memory as the arguments do. (Where the wrapper copies the other argument first, as
    ``solve(a, a[:, 0], overwrite_b=True)``'s of ``a``, the values are the same.)"""
    plain = {key: _plain(value) for key, value in bound.arguments.items()}
    if not any(may_overlap(x, other) for name in names for x in _array_leaves(plain[name])
               for key, value in plain.items() if key != name
               for other in _array_leaves(value)):
        return False
    buffers = {}

    def shared(v):
        if type(v) in (tuple, list):
            return type(v)(shared(u) for u in v)
        if type(v) is not np.ndarray:
            return v
        base = owner(v)
        if not (base.flags.c_contiguous or base.flags.f_contiguous):
            raise LookupError  # (not known: as if it did)
        if id(base) not in buffers:
            buffers[id(base)] = np.copy(base, order="K")
        return np.ndarray(v.shape, v.dtype, buffers[id(base)], address(v) - address(base),
                          v.strides)

    try:
        probe = inspect.BoundArguments(bound.signature, {k: shared(v) for k, v in plain.items()})
        again = fn(*probe.args, **probe.kwargs)
    except Exception as error:  # (a probe of mutad's own: not the program's path)
        handled(error)
        return True
    ys, expected = _array_leaves(again), _array_leaves(result)
    return len(ys) != len(expected) or any(
        y.shape != e.shape or y.tobytes() != e.tobytes() for y, e in zip(ys, expected))


def _writes_into(fn, bound, arguments, name, copy):
    """Whether SciPy's ``fn`` writes into argument ``name`` laid out as ``copy`` is (which
    it left as it was): asked again on a copy of other values, a symmetric, diagonally
    dominant matrix (or, not 2-d, an increasing sequence) that none of its routines refuses
    and whose factors and results are not its bytes."""
    generic = _laid_out_as(copy)
    if copy.ndim == 2:
        rows, columns = np.indices(copy.shape)
        generic[...] = 1.0 / (2.0 + rows + columns) + max(copy.shape) * (rows == columns)
    else:
        generic[...] = (1.0 + np.arange(copy.size) / copy.size).reshape(copy.shape)
    before = generic.copy(order="K")
    probe = inspect.BoundArguments(bound.signature, {**arguments, name: generic})
    try:
        fn(*probe.args, **probe.kwargs)
    except Exception as error:  # (a probe of mutad's own: not the program's path)
        handled(error)
        return True  # (not known: as if it did)
    return generic.tobytes(order="A") != before.tobytes(order="A")


def _laid_out_as(x):
    """A copy of ``x`` in memory of its own with ``x``'s strides (SciPy's choice between
    overwriting an array and copying it depends on its layout)."""
    if x.flags.c_contiguous or x.flags.f_contiguous:
        copy = np.empty_like(x, order="K")
    else:
        low, span = byte_span(x)
        copy = np.ndarray(x.shape, x.dtype, np.empty(span, x.dtype), address(x) - low,
                          x.strides)
    np.copyto(copy, x)
    return copy


def _recorders(arrays):
    """The recorders of a replay recording now (``replay.Recorder``) that the traced
    ``arrays`` belong to."""
    for x in arrays:
        recorder = getattr(getattr(x, "tape", None), "recorder", None)
        if recorder is not None and recorder.ready:
            yield recorder


def _memory_path(y, memory, path=()):
    """The path (indices into tuples) of the array in ``y`` that is ``memory`` itself (its
    address, shape and strides), or None."""
    if isinstance(y, (tuple, list)):  # (a namedtuple too)
        for i, v in enumerate(y):
            found = _memory_path(v, memory, (*path, i))
            if found is not None:
                return found
        return None
    if type(y) is np.ndarray and y.shape == memory.shape and y.strides == memory.strides \
            and y.__array_interface__["data"][0] == memory.__array_interface__["data"][0]:
        return path
    return None


def _written_as_scipy_writes(fn, bound, name, place, y):
    """``y``, the rule's result for SciPy's ``fn`` called as ``bound`` says, after the traced
    array ``name`` that SciPy would overwrite (``_overwritten``) is written as SciPy writes it:
    where SciPy's output is that memory (``lu_factor(a, overwrite_a=True)``'s ``lu``), the
    rule's output is written into it and it stands for it in the result, so that both are one
    array, as in NumPy; otherwise SciPy leaves its workspace there (``solve_banded``'s
    ``ab``), SciPy's bytes without a derivative (``_workspace``)."""
    x = bound.arguments[name]
    if type(place) is tuple:
        def replaced(v, path):
            if not path:
                x[...] = v
                return x
            items = list(v)
            items[path[0]] = replaced(items[path[0]], path[1:])
            return v._make(items) if hasattr(v, "_make") else type(v)(items)  # (a namedtuple)
        return replaced(y, place)
    x[...] = _workspace(fn, bound.signature, name, tuple(bound.arguments),
                        *bound.arguments.values())
    return y


def _scipy_workspace(fn, signature, name, keys, *values):
    """The bytes SciPy's ``fn``, called with ``values`` for the parameters ``keys``, leaves
    in argument ``name``, a contiguous array it overwrites (on a copy of it; the other arrays
    are copies too, as SciPy may overwrite them as well: ``solve``'s ``b``)."""
    arguments = {key: _laid_out_as(v) if type(v) is np.ndarray else v
                 for key, v in zip(keys, values, strict=True)}
    copy = arguments[name]
    call = inspect.BoundArguments(signature, arguments)
    fn(*call.args, **call.kwargs)
    return copy


_workspace = Adjoint(_scipy_workspace)
"""SciPy's workspace in an array it overwrites: a value without a derivative that mutad
follows, so that the program runs on where it is never read again (an ``ab`` built afresh on
every step). Where the gradient reads it, its derivative would be needed: refused then."""


def _workspace_refused(fn, name, mode):
    return UnsupportedOperationError(
        f"scipy {getattr(fn, '__name__', fn)}(..., overwrite_{name}=True) of a differentiated "
        f"array: SciPy leaves its workspace in `{name}`, whose derivative mutad does not "
        f"compute, and {mode}. Pass overwrite_{name}=False, or pass a copy of the array if "
        "it is read afterwards")


@_workspace.rule
def _workspace_rule(fn, signature, name, keys, *values):
    y = _scipy_workspace(fn, signature, name, keys, *values)

    def back(dy):
        # dy is zero where the loss does not read the workspace, and then so is what the
        # derivative would give, whatever it is
        if dy is not None and (innermost((dy,)) is not None or np.any(np.asarray(dy) != 0)):
            raise _workspace_refused(fn, name, "the gradient reads it after the call")
        # (zeros, not None: the arrays' derivative is not zero, its product with dy is)
        return (None,) * 4 + tuple(np.zeros_like(v) if np.ndim(v) and np.asarray(v).dtype.kind
                                   in "fc" else None for v in values)

    return y, back


@_workspace.jvp_rule
def _workspace_jvp(tangents, fn, signature, name, keys, *values):
    raise _workspace_refused(fn, name, "forward mode would carry its tangent on")


def _nested_numbers(x):
    """Whether ``x`` is a list or tuple of lists or tuples whose leaves are all numbers (0-d),
    some traced."""
    return type(x) in (list, tuple) and any(type(v) in (list, tuple) for v in x) \
        and _numbers(x, (list, tuple))


def _numbers(x, kinds):
    """Whether ``x``, of one of the types ``kinds``, is a list or tuple (of lists or tuples,
    at any depth) whose leaves are all numbers (0-d), some traced."""
    if not isinstance(x, kinds) or type(x) not in (list, tuple):
        return False

    def numbers(v):
        if type(v) in (list, tuple):
            return all(numbers(e) for e in v)
        return np.ndim(v) == 0 if wrapped(v) else isinstance(v, (int, float, np.number))

    return numbers(x) and innermost(x) is not None


def _writable(values):
    """``values`` with each read-only array (one a record of a running differentiation reads,
    which mutad keeps read-only: ``reverse.freeze``), at any depth of tuples and lists, a
    copy: SciPy's compiled functions take writable buffers even where they only read them."""
    return [type(v)(_writable(v)) if type(v) in (tuple, list) else
            v.copy() if type(v) is np.ndarray and not writeable(v) else v for v in values]


def refuse_device_arrays(fn, args):
    """Refuse a device array (CuPy's) among ``args`` (one level into lists and tuples) given to
    SciPy's ``fn`` while it is differentiated, unless the device's SciPy computes ``fn`` and
    its rule computes with nothing else (``_devices.computes_on``): otherwise its rule runs
    SciPy's compiled code, which computes on the host."""
    namespace = _devices.device_among(args)
    if namespace is not None and not _devices.computes_on(fn, namespace):
        raise _devices.refusal(fn)


def scipy_adjoint(fn, arrays=()):
    """Wrap the SciPy function ``fn`` for a rule attached with ``@wrapped.rule``; the wrapper
    stands in for ``fn`` while a differentiation runs (``registry.defroute``), so that user code
    calling ``scipy.linalg.solve`` by SciPy's name is differentiated. ``arrays``: the names of
    the parameters SciPy converts to arrays, which may be given as lists of traced numbers."""
    wrapper = defroute(fn, ScipyAdjoint(fn, arrays))
    _devices.made(fn, wrapper)
    return wrapper


def scipys_value(value, composition):
    """SciPy's own ``value`` with the derivatives of ``composition`` (the same numbers up to
    rounding, computed with calls mutad differentiates): ``value - (c₀ - composition)``, c₀ the
    composition's value as a constant, so that the difference is +0 exactly wherever it is
    finite and every bit of SciPy's value stays, the sign of a zero included; laid out as
    SciPy's value is (LAPACK's Fortran order), which later sums' rounding may depend on, and
    of its dtype (a float32 value stays float32, where a float64 composition would widen it,
    and a double stays a double beside a float32 composition, where SciPy's Python float would
    take its rounding in NumPy's weak promotion); a value that stands for a Python number
    (weak) gives one that does."""
    if not wrapped(value) and wrapped(composition):
        # SciPy's value of what the composition follows, computed on plain values outside any
        # step (a step's value, a Value's, is traced while a replay records): a replay would
        # keep this call's value
        not_replayed("SciPy's value computed from plain values outside a recorded step")
    order = "F" if weak(value) or np.isfortran(value) else "K"
    dtype = np.result_type(value)
    zero = np.subtract(stop_gradient(composition), composition, order=order)
    if zero.dtype != dtype and zero.dtype.kind == dtype.kind:
        zero = zero.astype(dtype, order=order)
    y = np.subtract(value, zero, order=order)
    if weak(value):
        weaken(y)
    return y


def linear_map(f, size, name):
    """SciPy's function ``f`` of a vector of ``size`` numbers, linear in it, as a function
    that differentiates (to every order): values ``f``'s own, derivatives by the matrix ``L``
    of ``f`` at the identity columns, and its transpose."""
    L = np.stack([np.ravel(f(column)) for column in np.eye(size)], axis=1)
    shape = np.shape(f(np.zeros(size)))
    return linear_function(f, lambda u: L.T @ np.ravel(u), lambda v: np.reshape(L @ v, shape),
                           name)


def linear_function(f, transposed, applied, name):
    """SciPy's function ``f``, linear in its one argument, as a function that differentiates
    (to every order): values ``f``'s own, its pullback ``transposed`` (the transpose of ``f``'s
    matrix times a cotangent), and that one's pullback ``applied`` (the matrix times a
    vector: ``f`` again, computed by what differentiates)."""
    forward = Adjoint(lambda v: f(v))
    transpose = Adjoint(transposed)
    forward.__name__ = forward.__qualname__ = name
    transpose.__name__ = transpose.__qualname__ = f"the transpose of {name}"
    forward.rule(lambda v: (forward(v), lambda du: (transpose(du),)))
    forward.jvp_rule(lambda tangents, v: (
        forward(v), None if tangents[0] is None else forward(tangents[0])))
    transpose.rule(lambda u: (transpose(u), lambda dv: (applied(dv),)))
    transpose.jvp_rule(lambda tangents, u: (
        transpose(u), None if tangents[0] is None else transpose(tangents[0])))
    return forward


def reproduces(value, composition, rtol=1e-8):
    """Whether ``composition`` (a traced computation of SciPy's ``value``, whose derivatives
    ``scipys_value`` gives it) has ``value``'s shape and agrees with it where it is finite, to
    ``rtol`` of its largest entry: the guard that keeps another computation's derivative from
    standing for SciPy's (a choice SciPy made otherwise, a case the composition misses)."""
    finite = np.isfinite(value)
    scale = 1.0 + np.max(np.abs(value), where=finite, initial=0.0)
    return np.shape(composition) == np.shape(value) and bool(np.max(
        np.abs(np.where(finite, composition - value, 0.0)), initial=0.0) <= rtol * scale)


def array_tangent(x, dx):
    """The tangent ``dx`` of an array argument ``x`` as one array. Forward mode gives the
    tangent of a list or tuple (``lfilter([b0, 0.5], ...)``, ``b0`` a dual) item by item,
    ``None`` for an item without one: those become zeros, nested lists rows, as NumPy makes
    the array of ``x``. Any other tangent as it is."""
    if type(dx) not in (list, tuple):
        return dx
    return stacked([np.zeros(np.shape(item)) if d is None else array_tangent(item, d)
                    for item, d in zip(x, dx, strict=True)])


def array_argument(x):
    """An array argument given as a list or tuple as one array, NumPy's of it: under nested
    differentiation its items may be traced by the enclosing one, which NumPy's conversion
    of the list would cut. Any other argument as it is."""
    if type(x) not in (list, tuple):
        return x
    return stacked([array_argument(item) for item in x])


def refused_attribute(name, message, private="__"):
    """What a stand-in object built from differentiated values says of an attribute it does
    not hold (its ``__getattr__``): the names Python's protocols ask for (copy, pickle)
    are missing, as usual; any other is refused by ``message``."""
    if name.startswith(private):
        raise AttributeError(name)
    raise UnsupportedOperationError(message)


class StandIn:
    """What stands in for SciPy's function ``original`` while a differentiation runs
    (``registry.defroute``) where SciPy's function is a composition of steps mutad
    differentiates: SciPy's own when no argument is traced, else ``fn``, the same steps on the
    differentiated functions. An attribute, not a closure cell or a module's name, holds
    ``original``: the allocation mode swaps routed functions in those."""

    def __init__(self, original, fn):
        functools.update_wrapper(self, original)
        self.original, self.fn = original, fn
        try:  # whether SciPy's function has overwrite_<name> flags
            self.overwrites = any(name.startswith("overwrite_")
                                  for name in inspect.signature(original).parameters)
        except (TypeError, ValueError):
            self.overwrites = False
        defroute(original, self)
        _devices.made(original, self)

    def __call__(self, *args, **kwargs):
        if innermost((*args, *kwargs.values())) is None:
            # SciPy's own code receives the plain array a stand-in of an array made before
            # views, one per stand-in: np.asarray(x) is then x, as SciPy's tests of identity
            # expect (csd(x, x) computes |X|² where y is x, X·conj(Y) otherwise)
            y = _devices.call(self.original, *_plain_arrays((args, kwargs)))
            return by_user_code(y, self.original, args, kwargs, sys._getframe(1))
        # coefficients written as a list of numbers, traced among them (b=[1.0, a]): the
        # array NumPy makes of it (a tuple may be a tuple of arguments: args=(a, b))
        args = [lists_as_arrays([a])[0] if _numbers(a, list) else a for a in args]
        kwargs = {k: lists_as_arrays([a])[0] if _numbers(a, list) else a
                  for k, a in kwargs.items()}
        overwritten, bound = [], None
        if self.overwrites:  # (SciPy's overwrite_a=True, as ScipyAdjoint's)
            try:
                bound = inspect.signature(self.original).bind(*args, **kwargs)
            except TypeError:
                pass  # (SciPy's own error, from the call below)
            else:
                bound.apply_defaults()
                overwritten = _overwritten(self.original, bound)
        y = self.fn(*args, **kwargs)
        for name, place in overwritten:
            y = _written_as_scipy_writes(self.original, bound, name, place, y)
        return y


class StandInClass:
    """A SciPy class standing in for itself while a differentiation runs
    (``registry.defroute``), its subclass saying what a call makes of traced values; else it
    is the class: ``isinstance`` and ``issubclass`` ask it, its attributes are its."""

    def __init__(self, cls, doc):
        self.cls = cls
        self.__name__ = self.__qualname__ = cls.__name__
        self.__doc__ = doc
        self.__wrapped__ = cls
        defroute(cls, self)

    def __instancecheck__(self, instance):  # for the user's code (``FOR_THE_CALLER``)
        return isinstance(instance, self.cls)

    def __subclasscheck__(self, subclass):
        return issubclass(subclass, self.cls)

    def __getattr__(self, name):
        return getattr(self.cls, name)

    def __repr__(self):
        return repr(self.cls)


FOR_THE_CALLER.add(StandInClass.__instancecheck__.__code__)


class ScipysCode(StandIn):
    """SciPy's function ``original``, written in Python as steps mutad follows (NumPy's
    functions, and SciPy's routed ones by the names its module binds): on traced arguments
    SciPy's own code runs as it is (``following_scipys_code``), so that its value is SciPy's
    and its derivative that of its steps, decisions on values included, as the user's code
    is followed."""

    def __init__(self, original):
        super().__init__(original, self.follow)

    def follow(self, *args, **kwargs):
        return following_scipys_code(self.original, args, kwargs)


def following_scipys_code(function, args, kwargs):
    """``function(*args, **kwargs)``, a SciPy function (or method) written in Python, run in a
    ``library_allocation()`` block, where its ``np.asarray`` of a traced array is that array
    and the buffers it allocates are followed, and with the names its module binds to routed
    functions (``orthogonal_procrustes`` in ``procrustes``'s private module, which the mode
    does not swap) bound to their stand-ins meanwhile: what it reaches through them is
    followed. A conversion of a traced value to plain numbers (compiled code, ``math.log``)
    is refused, and so is an error of another kind that SciPy's code raises on the traced
    values but not on their plain ones (a check ``np.isscalar(df)`` of a traced number), saying
    which function it was; an error it raises on both is SciPy's, the caller's to see. The
    names its module binds to NumPy's factories and builders (``from numpy import asarray,
    zeros``) read them as the block's ``numpy`` module does (``library_binding``); so do those
    of the modules of a method's class and its bases (``_namespaces``)."""
    namespaces = _namespaces(function)
    with _ROUTED_NAMES:
        entries = []
        for namespace in namespaces:
            entry = _SWAPPED.get(id(namespace))
            if entry is None:
                originals = {}
                for name, value in list(namespace.items()):
                    try:
                        route = library_route(value) if callable(value) else None
                        stand_in = route or library_binding(value)  # (np.r_ is not callable)
                    except TypeError:  # (an unhashable value)
                        continue
                    if stand_in is not None:
                        originals[name] = value, stand_in
                        namespace[name] = stand_in
                for name, stand_in in PYTHON_BUILTINS.items():
                    # Python's float() and complex() of a traced number, as in the user's code
                    # (the value standing for the Python number), where the module's code
                    # compares no type with them
                    if name not in namespace and not MODE._compares_float(namespace, name):
                        originals[name] = _ABSENT, stand_in
                        namespace[name] = stand_in
                entry = _SWAPPED[id(namespace)] = [0, originals]
            entry[0] += 1
            entries.append((namespace, entry))
    try:
        with library_allocation():
            return function(*args, **kwargs)
    except ConversionError as error:  # (its advice, to call mutad's function, is this call)
        raise _converted(function, error)
    except MutadError:
        raise
    except SystemError as error:  # (compiled code reading a traced array's buffer; not SciPy's
        # own error, whatever the plain values do, which the allocation mode may fail too)
        if isinstance(error.__cause__, ConversionError):
            # compiled code that went on converting after its first conversion failed
            # (scipy.signal's symiirorder1_ic: PyArray_ObjectType, then PyArray_FromObject,
            # with the error pending), which raises the conversion's own error in some runs
            # and this SystemError in others: the conversion's error, in all of them
            converted = _converted(function, error.__cause__)
            raise converted from converted.__cause__
        raise _not_followed(function, "handed a differentiated value to compiled code, which "
                            f"failed on it ({error})") from error
    except Exception as error:
        try:  # (a traced number's plain value is a 0-d array: the number, as it was indexed)
            function(*_plain(args, numbers=True),
                     **{k: _plain(v, numbers=True) for k, v in kwargs.items()})
        except Exception as probed:
            handled(probed)  # (a probe of mutad's own: the error raised is the first)
            raise error from None  # (SciPy's own error, of the plain values too)
        raise _not_followed(function, f"raised {type(error).__name__} ({error}) where the "
                            "plain values pass") from error
    finally:
        with _ROUTED_NAMES:
            for namespace, entry in entries:
                entry[0] -= 1
                if entry[0] == 0:
                    del _SWAPPED[id(namespace)]
                    for name, (value, stand_in) in entry[1].items():
                        if namespace.get(name) is stand_in and value is _ABSENT:
                            del namespace[name]
                        elif namespace.get(name) is stand_in:
                            namespace[name] = value


_ABSENT = object()
"""The value of a name that ``following_scipys_code`` binds in a module that had none."""


def _namespaces(function):
    """The module namespaces whose names ``following_scipys_code`` binds for ``function``: its
    own module's, and, for a method of an object of SciPy's, the modules of its class and of
    the classes it inherits from (``lognorm.fit`` calls ``self._argcheck``, whose module binds
    ``asarray``), each once."""
    namespaces = {}
    own = getattr(inspect.unwrap(function), "__globals__", None)
    if own is not None:
        namespaces[id(own)] = own
    instance = getattr(function, "__self__", None)
    for cls in type(instance).__mro__ if instance is not None else ():
        module = sys.modules.get(getattr(cls, "__module__", None) or "")
        if module is not None and module.__name__.startswith("scipy."):
            namespaces.setdefault(id(vars(module)), vars(module))
    return list(namespaces.values())


FOLLOWED_LIBRARY_CODE.append(following_scipys_code)


def _converted(function, error):
    """What ``following_scipys_code`` raises for ``function`` where SciPy's code converted a
    traced value (the ``ConversionError`` ``error``): of a function nothing routes, that
    error, whose advice (a rule of the user's) holds; else the function named."""
    if function not in RULES:
        return error
    step = str(error).split(", called through")[0].split(", which would cut")[0]
    refusal = _not_followed(function, f"converted a traced value to plain numbers ({step})")
    refusal.__cause__ = error
    return refusal


def _not_followed(function, what):
    public = ".".join(p for p in function.__module__.split(".") if not p.startswith("_"))
    name = f"{public}.{function.__qualname__.replace('_gen.', '.')}"  # (scipy.stats.wishart)
    unruled = "" if function in RULES else (  # (a function nothing routes: _Made's)
        "; or give the function a rule: wrap it with mutad.adjoint (docs/guide.md, 'Custom "
        "rules')")
    return UnsupportedOperationError(
        f"{name} does not run on differentiated values: SciPy's code, which mutad follows step "
        f"by step, {what}. Pass that argument as a constant (a number, or an array not "
        f"computed from the differentiated arguments){unruled}.")


_ROUTED_NAMES = threading.Lock()
_SWAPPED: dict[int, list] = {}
"""``id(namespace)`` -> [the calls in ``following_scipys_code`` running with it, {name: (what
it bound before, the stand-in bound in its place)}]."""


def found_again(value, found, *settings):
    """``found(value, *settings)``: what a solver that computed the traced ``value`` found
    besides (an error estimate, an iteration count) on this call's values, held by one of the
    ``settings`` (its problem). A recording checks it again on each replay (a step that reads
    it after the solver's step ran again), as Python may have read it."""
    for recorder in _recorders([value]):
        return recorder.nondiff(found, (value, *settings), {})
    return found(value, *settings)


def not_replayed(reason):
    """Tell the running recordings that a replay would not compute this call again as it
    should (``reason`` says why: it decides on plain numbers, outside the recorded program):
    the calls are traced instead."""
    for differentiation in ACTIVE.running:
        recorder = getattr(differentiation, "recorder", None)
        if recorder is not None:
            recorder.refuse(reason)


def _plain_arrays(tree):
    """``tree`` with each stand-in of an array made before the differentiation (``Preexisting``)
    replaced by the array the engines read for it (``stand_in_value``)."""
    return in_containers(lambda x: stand_in_value(x) if type(x) is Preexisting else x, tree)


def stands_in_for(original):
    """Decorate ``fn`` to stand in for ``original`` (a :class:`StandIn`)."""
    return lambda fn: StandIn(original, fn)


class Elementwise(Adjoint):
    """An elementwise function that is not a ufunc, differentiated as an elementwise row is
    (``registry.elementwise``): its values are ``fn``'s own, computed on plain arrays, and
    ``partials[i](y, *args)`` is its derivative in argument ``i`` (``None``: none;
    ``NoClosedForm``: refused when that argument is differentiated), a composition of calls
    that dispatch, so that an enclosing differentiation differentiates it again.

    It serves where a value needs an algorithm of its own (a series near a cancellation, a
    quadrature) and its derivative has a formula accurate at the same points. Arguments are
    positional and broadcast together; complex values are refused.
    """

    complex_values: str | None = None

    def __init__(self, fn, *partials, name=None):
        super().__init__(fn)
        if name is not None:
            self.__name__ = self.__qualname__ = name
        self.partials = partials
        self.rule(self._pullback_rule)
        self.jvp_rule(self._forward_rule)

    def _name(self):
        return self.__qualname__

    def __call__(self, *args):
        followed = tuple(carries_derivative(a) for a in args)
        if not any(followed):
            return self.fn(*args)
        for partial, is_followed in zip(self.partials, followed, strict=True):
            if is_followed and isinstance(partial, NoClosedForm):
                raise UnsupportedOperationError(
                    f"{self._name()}: mutad has no derivative with respect to {partial.what}, "
                    "and that argument depends on the differentiated arguments. Pass it as a "
                    "constant (a number, or an array not computed from the arguments).")
        # Which arguments some differentiation follows: the pullback computes only their partials.
        return dispatch(self, args, {"followed": followed})

    def _pullback_rule(self, *args, followed):
        y = self(*args)

        def back(dy):
            return tuple(
                unbroadcast(dy * partial(y, *args), np.shape(a))
                if is_followed and partial is not None else None
                for partial, a, is_followed in zip(self.partials, args, followed, strict=True))

        return y, back

    def _forward_rule(self, tangents, *args, followed):
        y = self(*args)
        dy = None
        for partial, t in zip(self.partials, tangents, strict=True):
            if t is not None and partial is not None:
                term = t * partial(y, *args)
                dy = term if dy is None else dy + term
        if dy is not None and np.shape(dy) != np.shape(y):
            dy = np.broadcast_to(dy, np.shape(y))
        return y, dy


def elementwise_function(fn, *partials, name=None):
    """An :class:`Elementwise` function: ``fn``'s values, ``partials`` its derivatives."""
    return Elementwise(fn, *partials, name=name)


class Value(Adjoint):
    """SciPy's value of ``fn`` with no derivative: the value a composition takes from SciPy's
    own call, while its derivatives come from elsewhere (``stats``: the composition's)."""

    complex_values: str | None = None

    def __init__(self, fn, name):
        super().__init__(fn)
        self.__name__ = self.__qualname__ = name
        self.rule(self._pullback_rule)
        self.jvp_rule(self._forward_rule)

    def _name(self):
        return self.__qualname__

    @zero_derivative("args")  # (the composition gives the derivatives)
    def _pullback_rule(self, *args):
        return self(*args), lambda dy: (None,) * len(args)

    def _forward_rule(self, tangents, *args):
        return self(*args), None


def events_at_user_lines(writer=None):
    """NumPy's floating-point events, where a running differentiation hears them (a replay
    compares them with its recording's), issued at the user's lines in this block instead (by
    ``writer``, a ``debug.Warnings``: one kept for many blocks is one handling, which the
    programs of the replays run in them are recorded for), as a differentiation started in
    it logs them, which then replays (the handling a replay's listener sets is one a
    recording refuses: Python may act on it)."""
    logged = {category: "log" for category, mode in np.geterr().items() if mode == "log"}
    heard = logged and isinstance(np.geterrcall(), (Warnings, Heard))
    return np.errstate(call=writer or Warnings(), **logged) if heard \
        else contextlib.nullcontext()


@contextlib.contextmanager
def outside_differentiations(name):
    """Run the block outside every differentiation of this thread: on plain numbers, NumPy
    and the user's code compute plainly (the arrays they allocate are plain), and a nested
    ``mutad.hvp`` or ``pullback`` is a differentiation of its own. A value some
    differentiation follows, reached there, was not replaced by its numbers: it is refused
    (``name`` the routine the block runs for)."""
    running = ACTIVE.running
    ACTIVE.running = []
    ACTIVE.suspended.append(running)
    try:
        with events_at_user_lines():
            yield
    except EscapedTracerError as error:
        raise UnsupportedOperationError(
            f"{name}: a function given to it reaches a value the differentiation follows "
            "other than through its arguments, its closure and the user's objects it holds "
            "(a global, say), which mutad cannot replace by its numbers for the solver. Pass that "
            "value through args= (the function receives it as an argument).") from error
    finally:
        ACTIVE.suspended.pop()
        ACTIVE.running = running


# ----------------------------------------------------------------------------------------------
# Arrays a solver's user functions write into, read after the solve


class BuffersWritten:
    """The block of a solve whose user functions run on plain numbers (SciPy's run, then
    the derivatives' runs), where they may write into arrays the differentiated function
    reaches and reads after the solve: the ``buffers`` the solver names (a work buffer the
    differentiated function allocated, bound to its numbers for SciPy's run) and the arrays
    made before the call that it reaches by a name (``Preexisting``: a module-level array).
    NumPy leaves in each the values of SciPy's last call of the functions, which depend on
    ``inputs`` (the call's differentiated values) through the solver's iterations: on leaving
    the block each array written holds those values (taken when SciPy's run ends:
    ``scipy_ran``; the derivatives' runs of the functions after it write there too), written
    by a recorded step (``solvers_last``) whose derivative is refused where one is asked of
    it, rather than left a constant whose derivative would be a silent zero."""

    def __init__(self, name, buffers, inputs):
        self.name, self.inputs = name, inputs
        arrays = [*buffers, *(x for x in MODE.array_stand_ins.values()
                              if follows_floats(x.dtype))]
        # (the values before, as ``_now`` reads them: of a stand-in a write adopted before the
        # solve, the differentiation's array's, which in forward mode are not its memory's)
        self.watched = [(x, m, _now(x, m).copy()) for x in arrays
                        for m in (plain_memory(x) if type(x) is Preexisting else memory(x),)
                        if type(m) is np.ndarray and m.dtype.kind in "fc"]
        self.last = None

    def __enter__(self):
        _WATCHED.blocks.append(self)
        return self

    def ran(self):
        """SciPy's run of the user's functions ended: what they left in the arrays."""
        if self.last is None:
            self.last = [_now(x, m).copy() for x, m, _ in self.watched]

    def __exit__(self, kind, error, traceback):
        _WATCHED.blocks.remove(self)
        last = self.last or [_now(x, m) for x, m, _ in self.watched]
        written = [(x, _now(x, m), before, after)
                   for (x, m, before), after in zip(self.watched, last)
                   if after.tobytes() != before.tobytes()]
        if kind is not None or not written:
            return
        after = [after.copy() for *_, after in written]
        for _, m, before, _ in written:
            np.copyto(m, before)  # (the write below is the one the differentiation follows)
        for differentiation in ACTIVE.running:  # (a replay would keep this call's values)
            recorder = getattr(differentiation, "recorder", None)
            if recorder is not None:
                recorder.refuse(f"{self.name}: a function given to it wrote into an array "
                                "the function may read after the solve")
        inputs = [v for v in self.inputs if carries_derivative(v)]
        for (x, *_), values in zip(written, after):
            x[...] = solvers_last(values, *inputs)


@contextlib.contextmanager
def derivative_runs(name):
    """The block of a run of a solver's user function that its derivatives make (on traced
    or dual values): a write there into an array mutad does not follow in that run (a
    module-level buffer, which a nested differentiation of a derivative of second order
    does not take as its own) is refused saying so, rather than by the write's general
    ``UntracedWriteError``."""
    try:
        yield
    except (UntracedWriteError, ValueError, TypeError) as error:
        # (NumPy's conversion of an element, ``B[0] = x``, raises a ValueError from it)
        found = error if isinstance(error, UntracedWriteError) else unwrapped(error)
        if isinstance(found, UntracedWriteError):
            raise UnsupportedOperationError(f"{name}: {_DERIVATIVE_RUN_WRITE}") from found
        raise


_DERIVATIVE_RUN_WRITE = (
    "a function given to the solver, run again for the derivatives, wrote a traced value into "
    "an array mutad does not follow in that run: a buffer made before the differentiation (a "
    "module-level array) under a derivative of second order (mutad.hvp, a hessian, a gradient "
    "of a gradient), whose nested differentiation does not take it as its own, or an array "
    "reached through an object mutad does not look into. Let the function allocate its "
    "buffer (np.empty inside it) or return new arrays, or ask for first derivatives only.")


def _now(x, m):
    """The memory that holds the values of ``x`` now (``m``, its memory when the block began):
    of a stand-in a write adopted in the block (forward mode's, which follows writes inside
    rules), the running differentiation's array for it."""
    level = adopted(x) if type(x) is Preexisting else None
    return m if level is None else memory(level)


class _Watched(threading.local):
    def __init__(self):
        self.blocks = []  # the BuffersWritten blocks running in this thread, innermost last


_WATCHED = _Watched()


def scipy_ran():
    """SciPy's run of a solve ended: the values its last call of the user's functions left
    in the arrays they write into are NumPy's (``BuffersWritten``)."""
    if _WATCHED.blocks:
        _WATCHED.blocks[-1].ran()


@adjoint
def solvers_last(last, *inputs):
    """``last``, the values a solver's last call of a user function left in an array, as a
    function of the solve's differentiated ``inputs`` whose derivative mutad does not know."""
    return last.copy()


@solvers_last.rule
def _solvers_last_rule(last, *inputs):
    # (``inputs`` an enclosing differentiation follows: the values are its step's too)
    y = solvers_last(last, *inputs) if innermost(inputs) is not None else last.copy()

    def back(dy):
        if np.any(memory(dy)):
            raise UnsupportedOperationError(_SOLVERS_LAST)
        return (None, *(np.zeros(np.shape(v), np.result_type(memory(v)))
                        for v in inputs))
    return y, back


@solvers_last.jvp_rule
def _solvers_last_forward(tangents, last, *inputs):
    # (a tangent not known: NaN, as that of sol.y at the solver's own step times)
    y = solvers_last(last, *inputs) if innermost(inputs) is not None else last.copy()
    moved = any(t is not None and np.any(memory(t)) for t in tangents[1:])
    return y, np.full(np.shape(last), np.nan if moved else 0.0, last.dtype)


_SOLVERS_LAST = (
    "a gradient reached values that a function given to a solver wrote into an array (a work "
    "buffer in its closure, a module-level array) in the solver's last call of it: they "
    "depend on the differentiated values through the solver's iterations, which mutad does "
    "not differentiate. Compute what the loss reads from the solution instead (the function "
    "called at the solution: the right-hand side at sol.y[:, -1], the objective at res.x); in "
    "forward mode such values' tangents are NaN.")
