"""The allocation mode: arrays the differentiated code creates are arrays mutad follows.

Numerical code allocates work arrays and fills them (``K = np.empty((4, n)); K[0] = f(y)``).
NumPy has no hook for allocation (``like=`` dispatches only when it is passed), so while a
differentiation runs mutad puts its own factories in place of NumPy's, as PyTorch's modes
intercept its factory functions:

* in every module other than NumPy's, SciPy's and mutad's own, the names bound to the
  ``numpy`` module (``np``, ``numpy``) are bound to a copy of it whose factories are mutad's,
  and names bound to a factory itself (``from numpy import zeros``) to mutad's factory. NumPy
  and SciPy internals keep their own bindings, so they receive and make plain arrays;
* a factory called in a thread running a differentiation gives a float array as a *constant*
  of the innermost differentiation (``reverse.constant``; a dual with a zero tangent in
  forward mode): it behaves as a plain array until a traced value is written into it, from
  when on it is traced. Other threads, integer and boolean results, and results that are
  views of existing arrays (``np.asarray(a)`` of an array) are left plain;
* the arrays NumPy's index expressions make (``np.mgrid``, ``np.ogrid``, ``np.r_`` of slices)
  and those of ``np.indices``, ``np.loadtxt`` and ``np.genfromtxt``, the float arrays
  ``pickle.loads`` and ``pickle.load`` give user code and those of ``np.load``'s ``.npz``
  archives are such constants too (but for a round trip of traced values through
  ``pickle.dumps``, a copy: ``_pickling``), as
  are the new float arrays the routed SciPy functions below return to user code when no traced
  value reaches them (``scipy.signal.get_window("hann", n)``, a solve of plain values), and
  those SciPy's other Python functions return to it (``scipy.special.roots_legendre(n)``,
  ``scipy.linalg.dft(n)``: ``_Made``, reached as routed functions are; on traced arguments
  SciPy's code runs followed, as user code is: ``scipy.stats.qmc.geometric_discrepancy``);
* ``np.array`` and its variants build traced arrays from traced values (``np.array([a, b])``),
  and reductions and functions with integer results read lists and tuples of traced values
  as those arrays (``np.mean([a, b])``, ``np.argmin((a, b))``); the new arrays the mode's
  ufuncs, those functions and the routed ones make, called by user code on Python's lists,
  tuples and numbers alone (``np.sin([0.1, 0.2])``, ``np.cumsum(L)``,
  ``scipy.special.gammaln(L)``), are what ``np.array`` of the same objects gives
  (``from_plain_objects``), and so are the new arrays they make of plain arrays the mode does
  not follow (``np.tile(np.float32([1, 2]), 3)``, ``np.cumsum(cache[0])``: ``_new_memory``);
  NumPy's other public functions, Python's and those its ``__array_function__`` protocol
  dispatches (``np.choose``, ``np.polyadd``, ``np.block``), give the user's code their new
  float arrays as constants too (``_MadeFloats``);
* methods whose Rule has a ``method`` (``registry.defmethod``) are routed to their rules when
  traced arrays are among their arguments (``scipy.stats.norm.logpdf``); called from user code
  with plain values, the new float arrays they return that nothing else holds (``spline(t)``,
  ``dist.pdf(grid)``, ``A @ c``; not the object's own state: ``_handed``) are constants too,
  as are those of the other public methods of SciPy's classes among them, their bases and
  subclasses (``A.diagonal()``, ``dist.rvs(size=n)``: ``_hand_methods``); any other new
  float array a call the mode does not follow made from plain values (``np.ma.getdata``,
  ``np.asarray`` of a SciPy matrix) that one local name alone holds takes traced values by an
  augmented assignment to the name, which rebinds it (``rebound_in_place``);
* functions whose Rule has a ``route`` (``registry.defroute``: ``scipy.linalg.solve``) are
  replaced by their
  stand-ins wherever user code reaches them: names bound to them in user modules, and the
  attributes of the library's public modules (``scipy.linalg.solve``, not
  ``scipy.linalg._basic.solve``, which SciPy's internals call), read through the class the
  mode gives those modules (``_RoutingModule``): on entry to the modules a namespace binds
  and those heading their family, the others (SciPy's deprecated modules) as code in the mode
  reaches them (``_Mode._entered``, ``_Mode.reach``);
* the ``numpy`` module, the functions above, routed functions, bound methods and
  ``functools.partial`` objects of them that the differentiated function reaches through its
  closure cells and the module-level names its code reads, and that the user functions those
  hold reach (a callback bound before the differentiation started:
  ``make_loss(scipy.stats.norm.logpdf)``, ``check(np.append)``), are swapped there too.

The bindings are swapped in when the first differentiation starts (in any thread) and swapped
back when the last one ends, on return or exception, so code outside a differentiation runs
NumPy's own functions at no cost. ``plain_allocation()`` turns the mode off in its block.

``import numpy`` and ``import math`` run by user code in a differentiating thread bind the
mode's modules (``builtins.__import__`` is swapped too); ``np.random``'s functions, and the
generators ``np.random.default_rng`` makes in the mode (and those made before that the function
reaches by a name, over the same bit generator), give their float draws as constants; their
draws with traced parameters that NumPy computes from standard numbers by a formula (normal,
uniform, exponential, lognormal, Laplace, logistic, Gumbel, Rayleigh, Weibull, Pareto,
triangular, gamma's scale) are NumPy's draws computed from the standard ones with the traced
parameters (``_reparameterised``), and their draws of integers (Poisson, binomial, ...) take
the parameters' values (``_decided``);
Python's ``math`` functions of floats follow traced scalars (``MATH``), and ``json`` writes
those standing for floats as their numbers (``_json_default``); Python's ``float``, called by
the differentiated code, gives the traced value standing for the Python float (as ``x.item()``
does), and ``complex`` of traced floats the value standing for the Python complex: a module's
global bound to ``PYTHON_FLOAT`` (``PYTHON_COMPLEX``) for the differentiation, in the modules whose
code reads it and never compares a type with it (``_Mode._compares_float``); and ``type``, called
by the differentiated code, gives the class of NumPy's value (``_shown_type``), in the modules
whose code loads it only to call it.

Float arrays (and arrays of records holding floats) made before the differentiation started
that the differentiated function reaches by a name (a module-level initial condition ``U0``, a
closure's, a default's, an attribute its
method names, or one its code names of an object or a user's module it reaches so:
``model.grid.u0``, ``buffers.W``) stand in as
views of themselves (``Preexisting``), so that the arrays made from them are followed however
they are made (``U0.copy()``, ``U0 + 0.0``), and the function's first write into one adopts
its memory (``adopted``: the differentiation follows it from then on as an argument outside
argnums, and writes its bytes back); ``np.ndarray((n,))``
allocates as ``np.empty`` does where the function calls it (``ndarray``), and NumPy's float and
complex scalar types called on traced values (``np.float64(x[0])``) give the converted traced
values where the function calls them (``SCALAR_TYPES``).

Not followed: writing a traced value into an array allocated before the differentiation
started that the function does not reach by a name (held in a deque, a cache; lists, tuples
and dicts it reaches so are looked into), and draws from generators made before the
differentiation started that the function does not reach by a name (an argument, an attribute
of an object it is given); the functions of a deprecated SciPy module (``scipy.linalg.basic``)
that the function reads from ``sys.modules`` alone, in a process where no code reached it
otherwise (its routed functions then refuse traced values, and its new arrays are plain).
"""

from __future__ import annotations

import array
import builtins
import cmath
import collections
import contextlib
import copy
import ctypes
import dis
import functools
import importlib
import inspect
import io
import itertools
import json
import math
import operator
import pickle
import random
import statistics
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .devices import (LIBRARIES, SCIPY_LIBRARIES, device_of, is_device, is_namespace,
                      namespace_of)
from .debug import (FROM_USER_LINE, Capture, from_callers_line, from_user_line, warn_at,
                    without_events)
from .errors import (ConversionError, EscapedTracerError, UnsupportedArrayError,
                     UnsupportedOperationError, UntracedWriteError, objects_refused)
from .levels import ACTIVE, CARRIERS, WRAPPERS, Tracer, innermost, nesting, running
from .registry import (NO_RULE, RULE_MODULES, RULES, SUBCLASS_VIEWS, VERSIONS,
                       load_rule_modules, table)
from .views import (address, byte_bounds, memory, owner, stands_for_scalar, strided, view_as,
                    weaken, wrapped, writeable)
from .written import check_read, saving, source

FACTORIES = ("zeros", "empty", "ones", "full", "eye", "identity", "tri", "zeros_like",
             "ones_like", "empty_like", "full_like", "copy", "linspace", "logspace", "geomspace",
             "arange", "diag", "diagflat", "vander", "fromfunction", "fromiter",
             "indices", "loadtxt", "genfromtxt", "fromstring")
"""NumPy functions whose float results are new arrays, allocated as constants in the mode."""

INDEX_MAKERS = ("ravel_multi_index",)
"""NumPy's compiled functions making integer arrays of numbers (not of arrays: no argument
dispatches them): a new integer array they give stands in for itself, as ``np.arange``'s
(``factory``'s ``_counting``)."""

LOADERS = ("load", "fromfile", "frombuffer")
"""NumPy functions reading arrays from files and buffers: their float results are constants, as
the factories' are, which a replay cannot make again (a file read once); a buffer's view stands
in as an array made before (``Preexisting``)."""

SAVERS = ("save", "savez", "savez_compressed", "savetxt")
"""NumPy functions writing arrays to files: what a save of traced values wrote to is
remembered (``written.saving``), so that a read of it in the differentiation is refused."""

FILE_READERS = ("loadtxt", "genfromtxt")
"""The factories among ``FACTORIES`` that read a file: a read of what a save of traced values
wrote is refused (``written.check_read``), as the ``LOADERS``' and ``pickle.load``'s are."""


BUILDERS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "require")
"""NumPy's array constructors: they also build arrays from traced values."""

TAKES_LIKE = ("zeros", "empty", "ones", "full", "eye", "identity", "tri", "arange",
              "fromfunction", "fromiter")
"""Factories that dispatch on ``like=`` alone: a traced argument (``np.full(n, x[0])``) is
passed as ``like=`` too, so that its rule runs instead of a conversion."""

READERS = ("sum", "prod", "mean", "std", "var", "max", "min", "amax", "amin", "average",
           "cumsum", "cumprod", "ptp", "median", "append", "diff", "sort",
           "argmin", "argmax", "argsort", "argpartition", "lexsort", "nonzero", "flatnonzero",
           "argwhere", "searchsorted", "digitize", "count_nonzero", "shape", "ndim", "size",
           "isclose", "allclose", "array_equal", "array_equiv")
"""NumPy functions of array_like arguments that dispatch on arrays alone: lists and tuples
holding traced values among their positional arguments (``np.mean([a, b])``,
``np.argmin((a, b))``) are stacked into one traced array first, as ``np.array`` would build
it, so that the engine sees the call (and a replay guards a result Python decides on)."""

READERS += ("dot", "vdot", "inner", "outer", "cross", "kron", "tensordot", "einsum", "polyval",
            "polyint", "polyder",
            "roots", "interp", "clip", "where", "trapezoid", "round", "around", "real", "imag", "angle",
            "nansum", "nanmean", "nanprod", "nanmax", "nanmin", "nanstd", "nanvar", "nancumsum",
            "nancumprod", "nanmedian", "nanpercentile", "nanquantile", "percentile", "quantile",
            "reshape", "ravel", "transpose", "squeeze", "expand_dims", "moveaxis", "swapaxes",
            "flip", "fliplr", "flipud", "roll", "rot90", "tile", "repeat", "atleast_1d",
            "atleast_2d", "atleast_3d", "broadcast_to", "diagonal", "trace", "tril", "triu",
            "convolve", "correlate", "cumulative_sum", "cumulative_prod", "ediff1d", "gradient",
            "cov", "corrcoef", "unwrap", "sinc", "i0", "nan_to_num", "take", "take_along_axis",
            "matrix_transpose", "insert", "delete", "resize", "pad", "partition", "unique",
            "histogram", "histogram_bin_edges", "bincount", "meshgrid", "split", "array_split",
            "polyfit", "real_if_close", "all", "any", "linalg.norm", "linalg.vector_norm",
            "linalg.matrix_norm", "linalg.det", "linalg.slogdet", "linalg.inv", "linalg.pinv",
            "linalg.solve", "linalg.lstsq", "linalg.eig", "linalg.eigh", "linalg.eigvals",
            "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "linalg.qr", "linalg.cholesky",
            "linalg.matrix_power", "linalg.cond", "linalg.matrix_rank", "linalg.trace",
            "linalg.diagonal", "linalg.outer", "linalg.cross", "linalg.tensordot",
            "linalg.tensorsolve", "linalg.tensorinv", "linalg.vecdot", "linalg.matmul",
            "fft.fft", "fft.ifft", "fft.rfft", "fft.irfft", "fft.fft2", "fft.ifft2", "fft.fftn",
            "fft.ifftn", "fft.rfft2", "fft.irfft2", "fft.rfftn", "fft.irfftn", "fft.hfft",
            "fft.ihfft", "fft.fftshift", "fft.ifftshift")
"""More of them, each of whose positional list arguments NumPy reads as one array (not
``np.block``'s nesting, ``np.histogramdd``'s sequence of coordinates or ``multi_dot``'s list
of matrices, whose meaning an array of them would change); ``linalg.`` and ``fft.`` name the
functions of those modules of NumPy's, which the mode's ``numpy`` module has copies of
(``SUBMODULES``)."""

SUBMODULES = ("linalg", "fft")

INTERNAL = LIBRARIES
"""Packages whose modules keep NumPy's own functions: NumPy's, SciPy's, mutad's and the device
libraries' (``devices.LIBRARIES``)."""

STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) - {"__main__"}
"""Python's own modules: not scanned (``math.sqrt`` in ``math`` itself stays; the names user
modules bind to ``math`` and its functions are swapped)."""


class _State(threading.local):
    def __init__(self):
        self.plain = 0  # depth of plain_allocation() blocks in this thread
        self.rules = 0  # depth of the decorated functions and rules running on plain values
        self.library = 0  # depth of library_allocation() blocks in this thread


@contextlib.contextmanager
def running_rule() -> Iterator[None]:
    """A decorated function (``mutad.adjoint``), or its rule, runs on plain values in this
    block: the routed functions it calls give it SciPy's plain results (``by_user_code``), and
    the buffers SciPy's code allocates are plain in it, within a ``library_allocation()`` block
    too (a rule of ``logsumexp`` inside a distribution's formula: they would be constants of
    the differentiations, wrapping the rule's plain results once more)."""
    STATE.rules += 1
    library, STATE.library = STATE.library, 0
    try:
        yield
    finally:
        STATE.rules -= 1
        STATE.library = library


STATE = _State()


@contextlib.contextmanager
def apart_from_rules(apart: bool) -> Iterator[None]:
    """Where ``apart``, a differentiation a rule's forward pass started runs in this block:
    the code it differentiates is not the rule's, whose arrays are plain (``running_rule``),
    but a function of its own, whose arrays its allocation mode follows."""
    if not apart:
        yield
        return
    rules, STATE.rules = STATE.rules, 0
    try:
        yield
    finally:
        STATE.rules = rules


@contextlib.contextmanager
def plain_allocation() -> Iterator[None]:
    """Turn the allocation mode off in this block (of this thread): arrays created here are
    plain, as outside a differentiation. For code that hands its arrays to compiled routines
    needing plain ndarrays; writing a traced value into such an array raises
    ``UntracedWriteError``. Usable as a decorator too.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     with mutad.plain_allocation():
    ...         grid = np.linspace(0.0, 1.0, 3)   # a plain ndarray
    ...     return (x * grid).sum()
    >>> mutad.gradient(f, np.ones(3))[0].tolist()
    [0.0, 0.5, 1.0]
    """
    STATE.plain += 1
    try:
        yield
    finally:
        STATE.plain -= 1


def allocate(y, made=None):
    """``y``, a new plain array, as a constant of every differentiation running in this
    thread (each level's value an array of the levels outside it); the innermost's array.
    Inside a decorated function's rule, which runs on the plain values of the level recording
    it, of the levels outside that one alone (``nesting``): what the rule returns, and its
    ``back`` computes, are plain to that level. ``made``: ``(function, args, kwargs)``, the
    call that made it."""
    for differentiation in nesting():
        if y.dtype.names is not None and getattr(differentiation, "recorder", None) is not None:
            differentiation.recorder.refuse("an array of records (a structured dtype), "
                                            "which a replay does not redo")
        y = differentiation.constant(y, made)
    return y


def _nested_records(how):
    return UnsupportedOperationError(
        f"an array of records (a structured dtype) {how} under nested differentiation "
        "(a Hessian, a gradient of a gradient): mutad follows its fields in one "
        "differentiation. Keep each field in an array of its own (pos = np.zeros(n)).")


def _in_mode():
    return ACTIVE.running and not STATE.plain


def holds_wrapped(tree):
    """Whether ``tree`` (lists and tuples of it) holds a traced value: a traced array, or the
    stand-in of an array made before whose memory a write adopted (``rows[0][:] = x`` of a
    list ``rows`` made outside, then ``np.array(rows)``), which NumPy would read as its plain
    bytes."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return any(holds_wrapped(x) for x in tree)
    return wrapped(tree) or kind is Preexisting and adopted(tree) is not None


def holds_derivative(tree):
    """Whether ``tree`` (lists and tuples of it) holds a traced or dual value that carries a
    derivative of some running differentiation (not a constant at every level: an array the
    function allocated, ``mutad.stop_gradient``)."""
    if type(tree) in (list, tuple):
        return any(holds_derivative(x) for x in tree)
    if type(tree) is Preexisting:  # (an array made before: what a write adopted, if any)
        tree = adopted(tree)
    if wrapped(tree) and not isinstance(tree, Tracer) or type(tree) in CARRIERS:
        return True  # (a traced sparse matrix, a tree of traced points: it may)
    while isinstance(tree, Tracer):
        if not tree.constant_here():
            return True
        tree = tree.value
    return False


def _arrays(tree):
    if type(tree) in (list, tuple):
        for x in tree:
            yield from _arrays(x)
    elif isinstance(tree, np.ndarray) or is_device(tree):
        yield tree
    elif type(tree) is dict:
        yield from _arrays(list(tree.values()))


def _allocated(y, args, kwargs):
    """Whether ``y`` is a new float array (NumPy's or a device's), not the memory of an
    argument."""
    if type(y) is not np.ndarray and not is_device(y) or not follows_floats(y.dtype):
        return False
    return _fresh_memory(y, args, kwargs)


def _fresh_memory(y, args, kwargs):
    """Whether the array ``y`` a call of ``args`` and ``kwargs`` returned is new, not the
    memory of an argument."""
    root = owner(y)
    return not any(owner(a) is root for a in _arrays([args, kwargs]))


def follows_floats(dtype):
    """Whether the mode follows the arrays of ``dtype``: floats and complex numbers, or records
    of them (``_followed_records``)."""
    return dtype.kind in "fc" or _followed_records(dtype)


def _followed_records(dtype):
    """Whether ``dtype`` is a structured one of numbers and text (a name, a label beside the
    floats), a float among them: records whose floats the mode follows."""
    if dtype.names is None:
        return False
    leaves = []

    def walk(d):
        if d.subdtype is not None:
            return walk(d.subdtype[0])
        if d.names is None:
            leaves.append(d)
            return
        for name in d.names:
            walk(d.fields[name][0])

    walk(dtype)
    return all(d.kind in "biufcUS" for d in leaves) and any(d.kind in "fc" for d in leaves)


def factory(func, counting=True):
    """``func`` allocating constants in the mode; without ``counting``, its integer and
    boolean results are NumPy's own (not stand-ins of themselves: ``_counting``)."""

    takes_like = func.__name__ in TAKES_LIKE and func is getattr(np, func.__name__, None)

    def allocating(*args, **kwargs):
        if ACTIVE.running and _holds_adopted((args, kwargs)):
            # (an array made before that a write adopted, np.full(n, buf), np.fromiter(buf):
            # the array the write adopted, which NumPy, not dispatching, would read as bytes)
            args, kwargs = adopted_views(args), adopted_views(kwargs)
        if func is np.fromiter and ACTIVE.running and args:
            y, args = _fromiter_items(args, kwargs)
            if y is not None:
                return y
        if ACTIVE.running and any(type(a) in (list, tuple) and holds_wrapped(a) for a in args):
            args = lists_as_arrays(args)  # np.diag([x[0], 1.0])
        if takes_like and ACTIVE.running and "like" not in kwargs:
            like = next((a for a in (*args, *kwargs.values()) if wrapped(a)), None)
            if like is not None:
                return func(*args, like=like, **kwargs)
        if func.__name__ in FILE_READERS:
            check_read(f"np.{func.__name__}", source(args, kwargs))
        y = func(*args, **kwargs)
        if _in_mode():
            if args and not isinstance(args[0], np.ndarray) and type(y) is np.ndarray \
                    and y.base is not None:  # a view of a memoryview's, an interface's memory
                named = _named_view(y)
                if named is not None:
                    return named
            if _allocated(y, args, kwargs):
                return allocate(y, (func, args, kwargs))
            if type(y) is np.ndarray and y.dtype.kind == "O" and _fresh_memory(y, args, kwargs):
                # np.empty(n, dtype=object), np.array(numbers, dtype=object): takes traced
                # values, and its floats (o.astype(float)) are followed
                return y.view(TracedObjects)
            if counting and _counting(y, args, kwargs):
                return _own_stand_in(y)
            if type(y) is tuple:  # np.linspace(..., retstep=True): (samples, step)
                return by_user_code(y, func, args, kwargs, sys._getframe(1))
        return y

    return _named(allocating, func)


def loader(func):
    """``func`` (``LOADERS``) in the mode: a new float array it reads is a constant, without the
    call that made it (a replay of the program refuses it: the call is traced), an integer one a
    stand-in of itself; ``np.frombuffer``'s view of memory that may be the caller's (a
    ``bytearray``, ``bytes``) stands in for itself as an array made before does: what f makes of
    it is followed (``np.frombuffer(b).copy()``), a traced value written into it refused; an
    array viewing an argument's memory is NumPy's own."""

    def loading(*args, **kwargs):
        if func is np.frombuffer and wrapped(args[0] if args else kwargs.get("buffer")):
            return _frombuffer_of_followed(args, kwargs)
        check_read(f"np.{func.__name__}", source(args, kwargs))
        y = func(*args, **kwargs)
        if _in_mode():
            if type(y) is np.lib.npyio.NpzFile:  # np.load of an .npz archive: its arrays so
                y.__class__ = _Archive
            elif func is np.frombuffer:
                return _buffer_view(y)
            return _loaded(y, args, kwargs)
        return y

    return _named(loading, func)


def _frombuffer_of_followed(args, kwargs):
    """``np.frombuffer(x, ...)`` of an array ``x`` the differentiations follow: NumPy's view of
    its memory (its checks and errors too), as that view of ``x``; read in another dtype
    than ``x``'s, refused, as ``x.view(dtype)`` is: its bytes reinterpreted have no
    derivative."""
    x = args[0] if args else kwargs["buffer"]
    plain = (memory(x), *args[1:]) if args else ()
    y = np.frombuffer(*plain, **{k: memory(x) if k == "buffer" else v
                                 for k, v in kwargs.items()})
    view = view_as(x, y) if y.dtype == x.dtype else None
    if view is None:
        raise UnsupportedOperationError(
            f"np.frombuffer of an array the function computes with, read as {y.dtype} "
            f"({x.dtype} in the array): its bytes reinterpreted have no derivative. Read it "
            f"in its own dtype (np.frombuffer(x, dtype=x.dtype)), or x.astype({y.dtype}) for "
            "its values converted.")
    return view


def _loaded(y, args=(), kwargs=None):
    """An array a call read from a file, a buffer or a pickle, as the mode gives it: a new
    float array a constant, without the call that made it (a replay of the program refuses
    it: the call is traced), an integer or boolean one a stand-in of itself; anything else (an
    array viewing an argument's memory, records) NumPy's own."""
    if type(y) is np.ndarray and y.dtype.names is None:
        if _allocated(y, args, kwargs or {}):
            return allocate(y)
        if _counting(y, args, kwargs or {}):
            return _own_stand_in(y)
    return y


class _Archive(np.lib.npyio.NpzFile):
    """``np.load``'s archive of ``.npz`` files, opened in the mode: each array read from it
    (``data["u"]``, ``dict(data)``) as ``np.load`` reads an ``.npy`` file (``_loaded``);
    outside the mode (the archive kept past the differentiation), NumPy's own."""

    def __getitem__(self, key):
        y = super().__getitem__(key)
        return _loaded(y) if _in_mode() else y


class _Pickled(threading.local):
    """The bytes ``pickle.dumps`` gave the differentiated code of objects holding traced values,
    in this thread: ``id(bytes) -> (bytes, copy, differentiation)``, ``copy`` the objects as they
    were then, copied as ``copy.deepcopy`` copies them (which mutad follows), for the
    differentiation then innermost."""

    def __init__(self):
        self.made = {}


PICKLED = _Pickled()


def _pickling(func):
    """``pickle.dumps`` in the mode: of objects holding traced values (which NumPy's pickling
    would convert, cutting their derivative), called by the user's code, the bytes Python's
    pickling gives of their values, and a copy of the objects as they are now
    (``copy.deepcopy``'s, which mutad follows), which ``pickle.loads`` of those very bytes
    gives again (``_unpickling``): a round trip through pickle (a checkpoint of a state dict,
    a deep copy spelled so) is a copy whose derivative flows. What a program writes the bytes
    to is plain numbers, as before (``pickle.dump`` into a file, read back, is refused)."""

    def pickling(obj, protocol=None, *, fix_imports=True, buffer_callback=None):
        caller = _top(sys._getframe(1).f_globals)
        if not (_in_mode() and ACTIVE.running) or caller in INTERNAL \
                or caller in STANDARD_LIBRARY:
            return func(obj, protocol, fix_imports=fix_imports, buffer_callback=buffer_callback)
        buffer = io.BytesIO()
        pickler = _PlainPickler(buffer, protocol, fix_imports=fix_imports,
                                buffer_callback=buffer_callback)
        pickler.dump(obj)
        made = buffer.getvalue()
        if not pickler.met:
            return made
        running = ACTIVE.running
        PICKLED.made = {key: entry for key, entry in PICKLED.made.items()
                        if any(entry[2] is level for level in running)}  # (those ended go)
        PICKLED.made[id(made)] = (made, copy.deepcopy(obj), running[-1])
        return made

    return _named(pickling, func)


def _made_by_pickling(data):
    """The copy ``pickle.dumps`` kept of the objects it pickled into the bytes ``data`` (the
    same bytes, or equal ones: the same numbers, read back by another route) in a
    differentiation running now, or None."""
    if type(data) not in (bytes, bytearray, memoryview):
        return None
    running = ACTIVE.running
    for made, kept, level in PICKLED.made.values():
        if (made is data or made == data) and any(level is each for each in running):
            return kept
    return None


def _position(stream):
    """Where a stream ``pickle.load`` reads from stands, or None where it cannot go back there;
    while pickled traced values could be read back through it, so that what it reads is told."""
    try:
        return stream.tell() if stream.seekable() else _unknown_stream()
    except (AttributeError, OSError):
        return _unknown_stream()


def _unknown_stream():
    raise ConversionError(
        "pickle.load from a stream that cannot be read again, after pickle.dumps pickled traced "
        "values in the differentiated function: what it reads may be those values as plain "
        "numbers, which would cut their gradient. Pass the bytes pickle.dumps gave to "
        "pickle.loads, which gives back a copy mutad follows, or copy the objects with "
        "copy.deepcopy.")


def _read_since(stream, start):
    end = stream.tell()
    stream.seek(start)
    data = stream.read(end - start)
    stream.seek(end)
    return data


class _PlainPickler(pickle.Pickler):
    """Python's pickling of traced values as the plain arrays they stand for: the bytes NumPy's
    pickling gives of the same numbers."""

    def __init__(self, file, protocol=None, **kwargs):
        super().__init__(file, protocol, **kwargs)
        self.protocol = pickle.DEFAULT_PROTOCOL if protocol is None else \
            pickle.HIGHEST_PROTOCOL if protocol < 0 else protocol
        self.met = False  # whether it met a traced value

    def reducer_override(self, obj):
        if type(obj) is Preexisting:
            obj = _pickled(obj)
        if wrapped(obj):
            self.met = True
            value = memory(obj)
            return (value[()] if stands_for_scalar(obj) else value).__reduce_ex__(self.protocol)
        return NotImplemented


def _unpickling(func):
    """``pickle.loads`` or ``pickle.load`` in the mode: the float arrays it gives the user's
    code (at the top, or in a list, tuple or dict it gives) as ``np.load``'s (``_loaded``: a
    constant); the others as Python's own (an integer array is NumPy's, as pickled); the calls
    of NumPy's and the libraries' code as Python's own. Given out-of-band ``buffers``, its
    arrays may view the caller's memory (an array made before, as a view of it would): they
    are Python's own, a traced write into them refused."""

    reads_bytes = func.__name__ == "loads"

    def unpickling(*args, **kwargs):
        made = _made_by_pickling(args[0]) if PICKLED.made and args and reads_bytes else None
        if made is not None:  # (pickle.loads(pickle.dumps(x)): a copy, followed)
            return copy.deepcopy(made)
        check_read(f"pickle.{func.__name__}", source(args, kwargs))
        start = _position(args[0]) if PICKLED.made and args and not reads_bytes else None
        y = func(*args, **kwargs)
        if start is not None:  # (the bytes pickle.dumps gave, written to a file and read back)
            made = _made_by_pickling(_read_since(args[0], start))
            if made is not None:
                return copy.deepcopy(made)
        if _in_mode() and kwargs.get("buffers") is None:
            caller = _top(sys._getframe(1).f_globals)
            if caller not in INTERNAL and caller not in STANDARD_LIBRARY:
                return _unpickled(y)
        return y

    return _named(unpickling, func)


def _unpickled(tree):
    """``tree``, what ``pickle.loads`` made, with each float array in it (at the top, or in its
    lists, tuples and dicts) a constant (``_loaded``), as Python's unpickling made it otherwise:
    an object it holds twice (``[a, a]``, a list two dicts hold) is one object still, written
    through either name, and a list holding itself holds itself. Its lists and dicts, new and
    nobody else's, are given their items in place; a tuple holding a float array is made again,
    once, and given in place of the old one wherever it is held."""
    made = {}  # id(object of the tree) -> what it becomes (_BUILDING: a tuple being made)
    cycles = []  # (list or dict, key, tuple): a reference to a tuple within its own making

    def given(container, key, item):
        new = walk(item)
        if new is _BUILDING:
            cycles.append((container, key, item))
            return item
        return new

    def walk(x):
        if id(x) in made:
            return made[id(x)]
        kind = type(x)
        if kind is list or kind is dict:
            made[id(x)] = x
            for key in range(len(x)) if kind is list else list(x):
                x[key] = given(x, key, x[key])
            return x
        if kind is tuple:
            made[id(x)] = _BUILDING
            items = tuple(walk(item) for item in x)
            made[id(x)] = x if all(a is b for a, b in zip(items, x)) else items
            return made[id(x)]
        made[id(x)] = _loaded(x) if type(x) is np.ndarray and x.dtype.kind in "fc" else x
        return made[id(x)]

    tree = walk(tree)
    for container, key, item in cycles:
        container[key] = made[id(item)]
    return tree


_BUILDING = object()


def _buffer_view(y):
    """``y``, NumPy's array viewing memory that may be the caller's (``np.frombuffer(b)``,
    ``np.ndarray(shape, buffer=b)`` of a ``bytearray``, an ``array.array``, ``bytes``), as the
    stand-in of an array made before: its writes adopt the memory, and what the function
    makes of it is followed. Over the memory of an array made before that the function
    reaches by a name (``np.frombuffer(memoryview(W))``), that array's view (``_named_view``);
    an array viewing another ndarray's memory is NumPy's own."""
    named = _named_view(y)
    if named is not None:
        return named
    if y.base is None or isinstance(y.base, np.ndarray) or y.dtype.names is not None:
        return y
    stand_in = y.view(Preexisting)
    stand_in.original = y
    return stand_in


class _Interface:
    """Memory exposed by ``__array_interface__``, holding the array that owns it as its
    ``base`` (which ``views.owner`` follows), as ``as_strided``'s object does."""

    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def _named_view(y):
    """``y``, a new plain array viewing memory by a route other than NumPy's views and
    indexing (``np.frombuffer(W.data)``, ``np.ndarray(shape, buffer=memoryview(W))``,
    ``np.asarray`` of a memoryview or of an object's ``__array_interface__``,
    ``np.ctypeslib.as_array(W.ctypes...)``), as the stand-in of the array made before whose
    memory it views, when the function reaches that array by a name (``_Mode._stand_in``): a
    view of the stand-in's memory, so that its memory has one owner, one array the
    differentiation adopts, and a write through either name is seen through the other, as
    in NumPy. None where no such array holds ``y``'s bytes."""
    if not ACTIVE.running or type(y) is not np.ndarray or y.base is None or y.size == 0:
        return None
    low, high = byte_bounds(y)
    for stand_in in MODE.array_stand_ins.values():
        plain = plain_memory(stand_in)
        start, end = byte_bounds(plain)
        if start <= low and high <= end:
            interface = {"shape": y.shape, "strides": y.strides, "typestr": y.dtype.str,
                         "descr": y.dtype.descr, "data": (address(y), not writeable(y)),
                         "version": 3}
            view = np.asarray(_Interface(interface, plain))
            return view.view(Preexisting)
    return None


def _library_factory(func):
    """NumPy's factory, builder or reader ``func`` as SciPy's code reaches it (``np.full``,
    ``xp.full_like``, ``np.asarray``, ``np.broadcast_to``) in a ``library_allocation()``
    block: allocating as ``factory(func)`` does, building as ``builder(func)`` does
    (``np.asarray(x)`` of a traced ``x`` is ``x``, not a conversion), and reading lists of
    traced values as ``reader(func)`` does (``np.broadcast_to([lower, upper], d)``), where
    SciPy's own code calls it in a thread in such a block; NumPy's own call otherwise (NumPy's
    code, mutad's, other threads). Its integer and boolean results are NumPy's own."""
    name = func.__name__
    following = (reader(func) if name in _LIBRARY_READERS
                 else builder(func, counting=False) if name in BUILDERS
                 else factory(func, counting=False))

    def allocating(*args, **kwargs):
        if STATE.library and _top(sys._getframe(1).f_globals) == "scipy":
            return following(*args, **kwargs)
        return func(*args, **kwargs)

    return _named(allocating, func)


_LIBRARY_READERS = tuple(name for name in READERS if "." not in name and hasattr(np, name)
                         and name not in FACTORIES + BUILDERS)
"""The readers of the ``numpy`` module itself (not of its submodules) that a
``library_allocation()`` block binds there, beside its factories and builders (each name
bound once)."""

_LIBRARY_NAMES = FACTORIES + BUILDERS + _LIBRARY_READERS
"""NumPy's functions a ``library_allocation()`` block binds in the ``numpy`` module."""

_NUMPYS_OWN = {getattr(np, name): name for name in _LIBRARY_NAMES}
"""NumPy's factories, builders and readers, as NumPy binds them (the mode rebinds some in
``numpy``)."""


def library_binding(value):
    """What a SciPy module's name bound to ``value`` reads in a ``library_allocation()`` block:
    where ``value`` is NumPy's factory or builder (``from numpy import asarray, zeros`` at the
    module's import, which binding them in ``numpy`` does not reach), its ``_library_factory``;
    where it is one of ``POLYNOMIAL_READERS``, the mode's reader;
    where it is NumPy's index expression ``r_`` or ``c_`` (``from numpy import r_``), the
    mode's (``_Joined``: a traced item is joined, not converted); where it is
    ``np.isscalar``, the mode's (True of a traced number standing for a scalar); where it is
    the ``math`` or ``cmath`` module (``math.sqrt(s2 / n)`` of a traced number), the mode's,
    whose functions follow traced scalars; ``None`` otherwise."""
    for original, mode in (JOINED["r_"], JOINED["c_"]):
        if value is original:
            return mode
    if value is math:
        return _LIBRARY_MATH
    if value is cmath:
        return _LIBRARY_CMATH
    if value is QUERIES["isscalar"][0]:
        return QUERIES["isscalar"][1]
    polynomial = POLYNOMIAL_READERS.get(id(value))
    if polynomial is not None and polynomial[0] is value:
        return polynomial[1]
    try:
        name = _NUMPYS_OWN.get(value)
    except TypeError:  # (an unhashable value)
        return None
    if name is None:
        return None
    factories = _LIBRARY["factories"]
    if name not in factories or factories[name][0] is not value:
        factories[name] = (value, _library_factory(value))
    return factories[name][1]


def _writeable_array(x):
    """``is_writeable_array`` of SciPy's array API helpers (``xpx.at(x, i).set(y)`` updates
    ``x`` in place where it says so), which knows NumPy's arrays alone: an array a
    differentiation follows is writeable where its memory is."""
    if wrapped(x):
        return writeable(memory(x))
    return _LIBRARY["bindings"][0][2](x)


def _at_update(self, at_op, in_place_op, out_of_place_op, y, /, copy=None, xp=None):
    """``at(x, idx).set(y)`` (``.add``, ``.multiply``, ...: ``at._op``) of SciPy's array API
    helpers, where ``y`` is traced and ``x`` a plain float array the block does not follow
    (one SciPy made by a call no factory stands for: ``fill_value.astype(dtype)`` in
    ``apply_where``): the update of a copy of ``x`` (``copy=True``: the helpers' copy is
    ``np.array(x, copy=True)``, which the block follows), as ``at`` makes where ``x`` is not
    writeable. ``copy=None`` lets ``at`` copy (its callers read the array it returns); with
    ``copy=False``, which asks for ``x`` itself, the write is refused as any write of a
    traced value into an array not followed is."""
    x = self._x
    if copy is None and type(x) is np.ndarray and x.dtype.kind in "fc" and wrapped(y):
        copy = True
    return _LIBRARY["bindings"][1][2](self, at_op, in_place_op, out_of_place_op, y,
                                      copy=copy, xp=xp)


_LIBRARY: dict[str, Any] = {
    "depth": 0, "lock": threading.Lock(), "factories": {}, "numpy": None,
    "bindings": [["scipy._lib.array_api_extra._lib._at", "is_writeable_array", None,
                  _writeable_array],
                 ["scipy._lib.array_api_extra._lib._at", "at._op", None, _at_update]]}
"""The ``library_allocation()`` blocks running in any thread; NumPy's factories bound in the
``numpy`` module while one runs (name -> (NumPy's, ``_library_factory`` of it)); the swap of
the ``numpy`` module's names a block makes (``_NumpySwap``, kept while they stay bound as it
found them); and the bindings of SciPy's
modules swapped then ([module, name, SciPy's, mutad's]: a dotted name is a class's
attribute)."""


def _binding_owner(binding):
    """The object (a SciPy module, or a class of it) whose attribute ``binding`` swaps, and
    the attribute's name; ``None`` where the module is not imported."""
    owner = sys.modules.get(binding[0])
    *path, name = binding[1].split(".")
    for part in path:
        owner = getattr(owner, part, None)
    return None if owner is None else (owner, name)


class _NumpySwap:
    """The names a ``library_allocation()`` block binds in the ``numpy`` module, computed once
    for the functions they are bound to (entering and leaving a block is paid by every rule
    that runs SciPy's formulas, each step of a loop: one dict update each way, not a
    ``setattr`` per name): what they are bound to outside blocks (``before``), what a block
    binds them to (``during``: the ``_library_factory`` of each function, the mode's ``r_``,
    ``c_`` and ``isscalar``), and NumPy's function each of the block's functions stands for (whose rule it
    takes while a block runs: NumPy hands a call with ``like=`` over by the function the name
    is bound to). The versions of the namespace and of ``RULES`` (``_VERSION``) prove, where
    they did not change since this swap last left, that the names are bound as it found them
    and the rules are those it gave; else the bindings and rules are compared."""

    def __init__(self, namespace):
        factories = _LIBRARY["factories"]
        self.names = (*_LIBRARY_NAMES, "r_", "c_", "isscalar")
        self.found = tuple(namespace[name] for name in self.names)
        self.during = {}
        for name, own in zip(_LIBRARY_NAMES, self.found):
            if name not in factories or factories[name][0] is not own:
                factories[name] = (own, _library_factory(own))
            self.during[name] = factories[name][1]
        for name in ("r_", "c_"):  # np.r_[y[::-1], last] of traced items: joined
            self.during[name] = JOINED[name][1]
        # np.isscalar(x) of a traced number standing for NumPy's scalar (a shape's mean in
        # norminvgauss._isf, which then calls _sf(x) as on a scalar): True, as NumPy says
        self.during["isscalar"] = QUERIES["isscalar"][1]
        self.before = dict(zip(self.names, self.found))
        self.bound = tuple(self.during.values())
        self.owns = self.found[:len(_LIBRARY_NAMES)]
        self.standing = self.bound[:len(_LIBRARY_NAMES)]
        self.version = _VERSION(namespace) if _VERSION is not None else None
        self.rules_version = _VERSION(RULES) if _VERSION is not None else None
        self.entered = self.left = None  # the versions after enter and leave
        self.rules_entered = self.rules_left = None
        self.rules: dict = {}  # the block's functions given rules -> the rules

    def current(self, namespace):
        """Whether ``namespace`` binds every name as this swap found it."""
        if self.version is not None and self.version.value == self.left:
            return True
        return all(map(operator.is_, map(namespace.get, self.names), self.found))

    def enter(self, namespace):
        """Bind the block's functions in ``namespace`` (the ``numpy`` module's), giving each
        the rule of NumPy's it stands for."""
        namespace.update(self.during)
        if self.version is not None:
            self.entered = self.version.value
        if self.rules_version is None or self.rules_version.value != self.rules_left:
            ruled = list(map(RULES.__contains__, self.owns))
            self.rules = dict(zip(itertools.compress(self.standing, ruled),
                                  map(RULES.__getitem__, itertools.compress(self.owns, ruled))))
        RULES.update(self.rules)
        if self.rules_version is not None:
            self.rules_entered = self.rules_version.value

    def leave(self, namespace):
        """Bind again what the names were bound to before the block, where they still hold
        the block's (a name the code rebound meanwhile keeps its new binding), and take the
        rules ``enter`` gave back."""
        untouched = self.rules_version is not None \
            and self.rules_version.value == self.rules_entered  # (no rule made in the block)
        collections.deque(map(RULES.pop, self.rules, itertools.repeat(None)), maxlen=0)
        self.rules_left = self.rules_version.value if untouched else None
        self.left = None
        if (self.version is not None and self.version.value == self.entered) \
                or all(map(operator.is_, map(namespace.get, self.names), self.bound)):
            namespace.update(self.before)
            if self.version is not None:
                self.left = self.version.value
            return
        for name, following in self.during.items():
            if namespace.get(name) is following:
                namespace[name] = self.before[name]


@contextlib.contextmanager
def library_allocation() -> Iterator[None]:
    """Follow, in this block (of this thread), the float arrays SciPy's private code allocates,
    as the mode follows those of the user's code: constants that a traced value written into
    makes traced. For a rule that runs SciPy's own formulas on traced values (a distribution's
    ``_logpdf``, ``_lazywhere``, ``apply_where``), which fill buffers they allocate with NumPy's
    factories through the ``numpy`` module (``np.full``, ``np.empty``; the array API's
    ``xp.full_like``). The mode does not swap the bindings of SciPy's private modules on every
    differentiation (there are too many: its fixed cost); this binds the factories in the
    ``numpy`` module itself while a block runs, so the SciPy functions called within read them
    (``_library_factory``), whose module they were found through; and its ``r_`` and ``c_``,
    which join traced items (``np.r_[output[::-1], last]``) rather than convert them."""
    with _LIBRARY["lock"]:
        if _LIBRARY["depth"] == 0:
            namespace = vars(np)
            swap = _LIBRARY["numpy"]
            if swap is None or not swap.current(namespace):
                swap = _LIBRARY["numpy"] = _NumpySwap(namespace)
            swap.enter(namespace)
            for binding in _LIBRARY["bindings"]:
                found = _binding_owner(binding)
                if found is not None:
                    binding[2] = getattr(*found)
                    setattr(found[0], found[1], binding[3])
        _LIBRARY["depth"] += 1
    STATE.library += 1
    try:
        yield
    finally:
        STATE.library -= 1
        with _LIBRARY["lock"]:
            _LIBRARY["depth"] -= 1
            if _LIBRARY["depth"] == 0:
                _LIBRARY["numpy"].leave(vars(np))
                for binding in _LIBRARY["bindings"]:
                    found = _binding_owner(binding)
                    if found is not None and getattr(*found) is binding[3]:
                        setattr(found[0], found[1], binding[2])


def _fromiter_items(args, kwargs):
    """``np.fromiter(iterable, dtype, count)`` whose items are traced numbers (a generator of
    ``x[i] ** 2``): NumPy would convert each with ``float()``, cutting its gradient. The items
    are read once (``count`` of them, or all), and where some are traced numbers and the dtype
    is a float or complex one, the result is their stack, cast to ``dtype`` as NumPy casts
    each item (NumPy's own call on their values first, for its errors). Otherwise ``(None,
    args)``, the iterable replaced by the list of its items, for NumPy's own call."""
    iterable, rest = args[0], args[1:]
    settings = dict(zip(("dtype", "count"), rest), **kwargs)
    dtype, count = settings.get("dtype"), settings.get("count", -1)
    if wrapped(iterable) and np.ndim(iterable) == 1 and dtype is not None \
            and np.dtype(dtype).kind in "fc" and isinstance(count, (int, np.integer)):
        # a traced vector's elements (np.fromiter(x, float)): the copy of those read
        np.fromiter(memory(iterable), *rest, **kwargs)  # (NumPy's errors: too few items)
        return iterable[:None if count < 0 else int(count)].astype(dtype), args
    if wrapped(iterable) or isinstance(iterable, np.ndarray) and type(iterable) is not \
            TracedObjects or dtype is None \
            or not isinstance(count, (int, np.integer)):
        return None, args
    items = list(itertools.islice(iterable, None if count < 0 else int(count)))
    args = (items, *rest)  # the iterator is spent: NumPy reads its items from the list
    if not any(wrapped(x) for x in items) or np.dtype(dtype).kind not in "fc" \
            or any(np.ndim(x) != 0 for x in items):
        return None, args
    func = np.fromiter
    func([memory(x) if wrapped(x) else x for x in items], *rest, **kwargs)  # NumPy's errors
    y = np.stack([x if wrapped(x) else np.asarray(x) for x in items])
    return (y if y.dtype == np.dtype(dtype) else y.astype(dtype)), args


SELF_STANDING = "iubUSmM"
"""The kinds of the new arrays the mode gives as stand-ins of themselves (``_counting``):
integers, booleans, text, dates and time spans."""


def _counting(y, args, kwargs):
    """Whether ``y`` is a new integer, boolean, text or date array (``np.arange(n)``,
    ``np.array(["1.5", "2"])``), not the memory of an argument: it stands in for itself
    (``Preexisting``), so that the floats user code computes from it are followed as an
    allocation's are (``x = np.arange(n) * dx``, then ``u = np.sin(x)`` and ``u[1:-1] +=
    ...``; ``(t - t[0]) / np.timedelta64(1, "D")``, ``labels.astype(float)``), and so are the
    arrays of those kinds made from it (``(i % 2).astype(float)``). Its own values are NumPy's,
    plain."""
    if type(y) is not np.ndarray or y.dtype.kind not in SELF_STANDING:
        return False
    return _fresh_memory(y, args, kwargs)


def _stacked(tree):
    """Nested lists and tuples holding traced values, as one array: each level stacked, so
    that every item keeps its gradient and plain numbers are constants."""
    if type(tree) not in (list, tuple):
        return _adopted_view(tree)
    items = [_stacked(x) for x in tree]
    if any(wrapped(x) for x in items):
        return np.stack(items)
    return np.array(items)


def _plain(tree):
    """``tree`` with each traced value its plain value: what NumPy reads it as."""
    if type(tree) in (list, tuple):
        return type(tree)(_plain(x) for x in tree)
    return memory(tree) if wrapped(tree) else tree


def _field(tree, i):
    """The ``i``-th field of the records in ``tree``: NumPy reads a tuple as a record and a
    list as a dimension, and gives a value that is not a record to every field."""
    if type(tree) is list:
        return [_field(x, i) for x in tree]
    return tree[i] if type(tree) is tuple else tree


def _records(allocating, a, rest, kwargs):
    """``np.array(a, dtype)`` of a structured ``dtype`` from nested lists of tuples (the records)
    holding traced values: NumPy's array of their plain values (its shape, its errors, the
    fields of constants), then each field holding traced values written, which the engines
    follow as any write into an array of records."""
    y = allocating(_plain(a), *rest, **kwargs)
    for i, name in enumerate(y.dtype.names):
        values = _field(a, i)
        if holds_wrapped(values):
            y[name] = _stacked(values)
    return y


def builder(func, counting=True):
    """``func`` (``np.array`` and its variants) allocating constants in the mode, and building
    arrays from traced values: ``np.array(x)`` of a traced ``x`` is a copy and
    ``np.asarray(x)`` is ``x``, as NumPy's; nested lists with traced items are stacked."""
    allocating = factory(func, counting)

    def building(*args, **kwargs):
        if args and type(args[0]) is Preexisting and (level := adopted(args[0])) is not None:
            y = building(level, *args[1:], **kwargs)  # a write adopted its memory
            return args[0] if y is level else y  # np.asarray(U0) is U0, as in NumPy
        if args and type(args[0]) is Preexisting:  # NumPy's builders dispatch on like= alone
            stand_in, original = args[0], _original(args[0])
            y = allocating(original, *args[1:], **kwargs)
            return stand_in if y is original else y  # np.asarray(U0) is U0, as in NumPy
        if args and ACTIVE.running and converted_by_numpy(args[0]):
            # an object of the user's whose __array__ may return an array computed in the
            # mode, a traced one, which NumPy would reject ("not producing an array"): built
            # from what it returns, called once as NumPy would call it
            return building(args[0].__array__(), *args[1:], **kwargs)
        if args and type(args[0]) is TracedObjects:
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            if dtype is not None and np.dtype(dtype).kind in "fc":  # its values, followed
                return building(args[0].astype(dtype), *args[2:], **{
                    k: v for k, v in kwargs.items() if k != "dtype"})
            return _holding_objects(allocating(*args, **kwargs))  # (np.array(o): objects)
        if args and ACTIVE.running and type(args[0]) in SUBCLASS_VIEWS.values():
            kwargs.setdefault("like", args[0])  # (np.recarray's stand-in: NumPy's of it)
            return func(*args, **kwargs)
        if not (args and ACTIVE.running and holds_wrapped(args[0])):
            return allocating(*args, **kwargs)
        a, *rest = args
        if wrapped(a) and a.dtype.kind in "fc" and set(kwargs) <= {"dtype", "copy"} \
                and np.dtype(kwargs.get("dtype", rest[0] if rest else None)) == object \
                and len(rest) <= 1:  # (NumPy's objects of its numbers: Python's)
            return python_objects(a)
        if wrapped(a):  # NumPy dispatches on like= alone
            kwargs.setdefault("like", a)
            y = func(a, *rest, **kwargs)
            if wrapped(y) and y.value is a.value:  # np.asarray(x): x itself, and of NumPy's
                # scalar a 0-d array (x[0] > 0, which a recording holds as a constant standing
                # for np.True_: np.asarray(b) ** 2 is np.square's int8, b ** 2 an int64)
                return a[...] if stands_for_scalar(a) else a
            return y
        dtype = kwargs.get("dtype", rest[0] if rest else None)
        if dtype is not None and np.dtype(dtype).names is not None:
            return _records(allocating, a, rest, kwargs)
        if dtype is not None and np.dtype(dtype) == object:
            objects = _objects_of(func, args, kwargs)
            if objects is not None:
                return objects
        try:
            y = _stacked(a)
        except ValueError:  # ragged: NumPy's array of objects, which holds plain numbers
            if dtype is None or np.dtype(dtype) != object:
                raise
            raise objects_refused(f"np.{func.__name__}") from None
        if dtype is not None and np.dtype(dtype) != y.dtype:
            y = y.astype(dtype)
        ndmin = kwargs.get("ndmin", 0)
        if y.ndim < ndmin:
            y = y.reshape((1,) * (ndmin - y.ndim) + y.shape)
        return y

    return _named(building, func)


def reader(func):
    """``func``, reading lists and tuples of traced values as the arrays they stand for (where
    they do not stack into one, a ragged list, NumPy's own call, which converts them), and a
    ``np.poly1d`` of traced coefficients first as its coefficients."""

    def reading_arrays(*args, **kwargs):
        if ACTIVE.running and args and type(args[0]) is np.poly1d and wrapped(args[0].coeffs):
            # its coefficients, the array NumPy reads it as (np.polyval(p, x)), which its
            # __array__ would convert; a poly1d of the result where NumPy returns one
            args = (args[0].coeffs, *args[1:])
            if func in _POLY1D_OF_POLY1D:
                return np.poly1d(func(*args, **kwargs))
        if ACTIVE.running and func in _SPLITTERS and type(args[0]) in _SEQUENCES \
                and _of_plain_objects((args, kwargs)):
            return _split_list(func, args, kwargs, sys._getframe(1))
        if ACTIVE.running and func in _RANGED and type(args[0]) in _SEQUENCES \
                and not holds_wrapped(args[0]) and any(
                    wrapped(v) or type(v) in _SEQUENCES and holds_wrapped(v)
                    for v in (*args[1:], *kwargs.values())):
            # traced values where NumPy's dispatch does not look (np.histogram's range) beside
            # plain numbers of a list: the array NumPy makes of the list, a constant, takes
            # the call to the rule
            args = (allocate(np.asarray(args[0]), (np.asarray, (args[0],), {})), *args[1:])
        if ACTIVE.running and any(type(a) in (list, tuple) and holds_wrapped(a) for a in args):
            try:
                stacked = lists_as_arrays(args)
            except ValueError:
                return func(*args, **kwargs)
            return func(*stacked, **kwargs)
        y = func(*args, **kwargs)
        if ACTIVE.running and (type(y) in _SEQUENCES_OR_ARRAY or _sequence(y)):
            return from_plain_objects(y, func, args, kwargs)  # (not a traced result)
        return y

    return _named(reading_arrays, func)


_RANGED = (np.histogram, np.histogram_bin_edges)
"""NumPy's functions whose ``range`` NumPy's dispatch does not look at."""

_POLY1D_OF_POLY1D = (np.polyint, np.polyder)
"""NumPy's functions that return a ``np.poly1d`` of one (its integral, its derivative)."""

_SPLITTERS = (np.split, np.array_split)
"""NumPy's functions whose results are several views of the array they make of a list (the
others of the family refuse lists)."""


def _split_list(func, args, kwargs, caller):
    """``func(*args, **kwargs)``, a ``_SPLITTERS``' of Python's objects alone: NumPy's pieces,
    views of one new array, as the user's code receives them (``caller``) the same pieces of
    the constant np.array makes of the list, so that traced values written into one are
    followed. NumPy's call first: its errors, and its pieces where they are not the array's
    (along an axis other than the first NumPy counts the list's length)."""
    pieces = func(*args, **kwargs)
    first = from_plain_objects(np.asanyarray(args[0]), np.asanyarray, args[:1], {}, caller)
    if not wrapped(first):
        return pieces
    followed = func(first, *args[1:], **kwargs)
    if [p.shape for p in followed] != [p.shape for p in pieces]:
        return pieces
    return followed


def joiner(func):
    """``func`` (``np.concatenate``, ``np.column_stack``, ...) reading the lists and tuples in
    its sequence of arrays that hold traced values as the arrays NumPy makes of them
    (``joined_operands``): where no item is a traced array itself
    (``np.column_stack(([a, b], [1.0, c]))``), NumPy would not dispatch, and convert them."""

    def joining(*args, **kwargs):
        if not ACTIVE.running:
            return func(*args, **kwargs)
        args = joined_operands(func, args)
        y = func(*args, **kwargs)
        if type(y) in _SEQUENCES_OR_ARRAY:  # (not a traced result: of lists, a constant)
            return from_plain_objects(y, func, args, kwargs)
        return y

    return _named(joining, func)


JOINERS = ("concatenate", "stack", "hstack", "vstack", "dstack", "column_stack")
"""NumPy's functions joining a sequence of arrays, whose items may be lists of traced values."""


def joined_operands(func, args):
    """``args`` of ``func``; for a function joining a sequence of arrays (facet ``joins``),
    each list or tuple in it that holds traced values as the array NumPy makes of it
    (``np.concatenate([x, [1.0, a]])``), which the engines follow; NumPy would convert it."""
    if not RULES.get(func, NO_RULE).joins or not args or type(args[0]) not in (list, tuple) \
            or not any(type(e) in (list, tuple) and holds_wrapped(e) for e in args[0]):
        return args
    return (type(args[0])(lists_as_arrays(args[0])), *args[1:])


_ROUTED_LIBRARIES = ("numpy", "scipy", "mutad")
"""The libraries whose public modules the mode swaps routes into (``_scan(internal=True)``),
with the device libraries' SciPy counterparts (``devices.SCIPY_LIBRARIES``: ``cupyx``)."""


def _routes_into(top):
    return top in _ROUTED_LIBRARIES or top in SCIPY_LIBRARIES


def _top(namespace):
    """The top-level package of the module whose namespace is ``namespace``."""
    return str(namespace.get("__name__")).partition(".")[0]


def internal(frame):
    """Whether ``frame`` runs NumPy's, SciPy's, mutad's or a device library's own code
    (``INTERNAL``), not the user's: mutad's call of NumPy's made at the user's line
    (``from_user_line``, for NumPy's warnings) is mutad's, though its globals are the user's."""
    return _top(frame.f_globals) in INTERNAL or frame.f_code.co_name == FROM_USER_LINE


def shown_class(x, numpy_class):
    """``x.__class__`` (of a value mutad hands the program in place of NumPy's) as its caller
    asks it: to the user's code, ``numpy_class(x)``, the class of what NumPy would have handed
    it, so that Python's ``isinstance`` (which asks ``__class__`` where ``type(x)`` fails)
    answers as of NumPy's value and the program takes NumPy's branch; to NumPy's, SciPy's and
    mutad's own code, which must tell the value from the array it wraps, ``type(x)``, as
    ``type()`` always gives. Python's modules (``abc``'s ``isinstance(x, numbers.Number)``,
    ``functools.singledispatch``) and the mode's stand-in types ask for their caller, which
    decides."""
    frame = sys._getframe(2)  # (above the property's getter)
    while (frame.f_code in FOR_THE_CALLER or _top(frame.f_globals) in STANDARD_LIBRARY) \
            and frame.f_back is not None:
        frame = frame.f_back
    return type(x) if internal(frame) else numpy_class(x)


_SEQUENCES = (list, tuple)
DISPATCHED = {}
"""Class -> ``function(ufunc, operands)``, which a ufunc the user's code calls in the mode
calls where every operand is of that class or a Python float or int, one at least of the
class (``_ModeUfunc``), as its ``__array_ufunc__`` would be called: the traced array's, which
its engine adds."""
_SEQUENCES_OR_ARRAY = (list, tuple, np.ndarray)


class _ModeUfunc:
    """A NumPy ufunc (``np.exp``) as user code sees it in the mode: called, or its methods
    (``reduce``, ``accumulate``, ``outer``, ``reduceat``) called, with lists or tuples holding
    traced values and no traced array beside them (``np.exp([a, b])``, ``np.maximum((a, b),
    0.0)``), it stacks them into the arrays NumPy makes of them first, so that the engines see
    the call (NumPy dispatches on arrays alone, and would convert the list). Otherwise it is
    the ufunc itself, one Python call more: its attributes are the ufunc's, and it passes
    ``isinstance(f, np.ufunc)``."""

    __slots__ = ("ufunc",)
    _METHODS = ("reduce", "accumulate", "outer", "reduceat")

    def __init__(self, ufunc):
        object.__setattr__(self, "ufunc", ufunc)

    @property  # type: ignore[misc]
    def __class__(self):  # isinstance(np.exp, np.ufunc), as NumPy's
        return np.ufunc

    def __call__(self, *args, **kwargs):
        # This runs for every ufunc the user's code calls: a loop, not any(...), over the
        # operands' types against a module-level tuple, and the thread's differentiations
        # asked only of a call that has a list or tuple operand.
        for a in args:
            if type(a) in _SEQUENCES:
                if ACTIVE.running:
                    args = _list_operands(args)
                    return from_plain_objects(self.ufunc(*args, **kwargs), self.ufunc, args,
                                              kwargs)
                break
        else:
            # Operands of one class of ``DISPATCHED`` and Python floats and ints beside them,
            # one per input, no keyword: NumPy would call that class's ``__array_ufunc__``
            # with them and nothing else, once (``np.sin(x)``, ``np.maximum(x, 0.0)`` of a
            # traced ``x``); its engine's function does it here, without NumPy's search for
            # overrides. Where it declines (NotImplemented), NumPy's call says what NumPy says.
            if not kwargs:
                kind = None
                for a in args:
                    t = type(a)
                    if t is float or t is int:
                        continue
                    if kind is None and t in DISPATCHED:
                        kind = t
                    elif t is not kind:
                        break
                else:
                    if kind is not None and len(args) == self.ufunc.nin:
                        y = DISPATCHED[kind](self.ufunc, args)
                        if y is not NotImplemented:
                            return y
            elif self.ufunc is np.square and len(kwargs) == 1 and _no_out(kwargs.get("out", 0)):
                # NumPy squares a complex scalar by a loop of its own only where the call has
                # no keyword (the engines do so too), and drops ``out=None`` before
                # ``__array_ufunc__``: its default ``where=True`` tells them of the keyword.
                kwargs = {"where": True}
        return self.ufunc(*args, **kwargs)

    def __getattr__(self, name):
        attribute = getattr(self.ufunc, name)
        if name in self._METHODS:
            return _named(_reading_lists(attribute), attribute)
        return attribute

    def __setattr__(self, name, value):
        setattr(self.ufunc, name, value)

    def __eq__(self, other):
        return self.ufunc == (other.ufunc if type(other) is _ModeUfunc else other)

    def __hash__(self):
        return hash(self.ufunc)

    def __repr__(self):
        return repr(self.ufunc)

    def __reduce__(self):
        return self.ufunc.__reduce__()

    @property
    def __doc__(self):
        return self.ufunc.__doc__

    @property
    def __name__(self):
        return self.ufunc.__name__


def _no_out(out):
    """Whether ``out`` is ``None`` or ``(None,)``, a ufunc's ``out=`` NumPy drops."""
    return out is None or type(out) is tuple and len(out) == 1 and out[0] is None


def _reading_lists(method):
    def reading(*args, **kwargs):
        if ACTIVE.running and any(type(a) in (list, tuple) for a in args):
            args = _list_operands(args)
            return from_plain_objects(method(*args, **kwargs), method, args, kwargs)
        return method(*args, **kwargs)

    return reading


def _list_operands(args):
    """A ufunc's operands with each list or tuple holding traced values stacked (the engines
    see the call), and each holding stand-ins the array the mode's ``np.array`` makes of it:
    an integer or boolean one a stand-in of itself, a float one a constant
    (``np.logical_and.reduce([x > -1, x < 1])`` is then a stand-in too, as ``&`` gives)."""
    return [(_stacked(a) if holds_wrapped(a) else REPLACEMENTS["array"][1](a)
             if _stand_ins(a) else a) if type(a) in (list, tuple) else a for a in args]


UFUNCS = {name: (value, _ModeUfunc(value)) for name, value in vars(np).items()
          if isinstance(value, np.ufunc)}
"""NumPy's ufuncs by their names in the ``numpy`` module, and the mode's (``_ModeUfunc``)."""


def mode_ufunc(ufunc):
    """The mode's ``_ModeUfunc`` of ``ufunc`` (a library's: ``scipy.special.gammaln``), made
    once per ufunc."""
    pair = _LIBRARY_UFUNCS.get(id(ufunc))
    if pair is None or pair[0] is not ufunc:
        pair = _LIBRARY_UFUNCS[id(ufunc)] = (ufunc, _ModeUfunc(ufunc))
    return pair[1]


_LIBRARY_UFUNCS: dict[int, tuple[np.ufunc, _ModeUfunc]] = {}


def _objects_of(func, args, kwargs):
    """``np.array(items, dtype=object)`` (``asarray``, ``asanyarray``), of nested lists whose
    items are traced numbers: the array of those objects, as NumPy keeps NumPy's scalars in an
    array of objects (a sum of its elements is Python's, of the traced numbers), converted back
    to floats as NumPy converts it (``TracedObjects``). None for any other call."""
    if func not in (np.array, np.asarray, np.asanyarray) or type(args[0]) not in (list, tuple):
        return None
    items = list(_leaves(args[0]))
    if any(wrapped(x) and np.ndim(x) != 0 for x in items):
        return None  # (a traced array among them: NumPy reads it as a sequence)
    y = func(_plain(args[0]), *args[1:], **kwargs)  # NumPy's shape, layout and errors
    if y.size != len(items):
        return None
    for index, item in zip(np.ndindex(y.shape), items):
        y[index] = item
    return y.view(TracedObjects) if any(wrapped(item) for item in items) else y


def _leaves(tree):
    if type(tree) in (list, tuple):
        for x in tree:
            yield from _leaves(x)
    else:
        yield tree


class TracedObjects(np.ndarray):
    """An array of objects some of which are traced numbers: what a ufunc ``np.frompyfunc``
    made gives of traced arguments (``rules.composites.pyfunc_ufunc_called``), NumPy's
    object array (its shape, its memory order) of what the Python function returned. NumPy's object arithmetic on it calls their operators, which mutad
    follows (``o * 2``, ``o.sum()``); ``astype`` (and ``np.asarray(o, dtype=float)``, ``builder``) to a float or complex type gives the traced
    array of its values, where NumPy would read each element's ``float()`` (which has no
    derivative). A ufunc of it and a traced float array reads that array as NumPy's object
    loop does: its elements Python's numbers (``python_objects``). To the user's code it is
    NumPy's array of objects (``__class__``, ``repr``)."""

    takes_over_operations = True  # (the engines leave ufuncs of it and traced arrays to it)

    # isinstance(o, np.ndarray) and o.__class__ as of NumPy's array (user code branches on it)
    __class__ = property(lambda self: shown_class(self, _ndarray_class))

    def __repr__(self):
        return repr(self.view(np.ndarray))

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        dtype = np.dtype(dtype)
        elements = list(self.flat)  # (C order)
        if dtype.kind not in "fc" or not any(wrapped(e) for e in elements) or not all(
                _real_number(e) for e in elements):
            y = self.view(np.ndarray).astype(dtype, order, casting, subok, copy)
            if _in_mode() and type(y) is np.ndarray and follows_floats(y.dtype):
                # floats of plain objects (o = np.array([1.0, 2.0], dtype=object)): new
                # memory, which takes traced values as np.array of the numbers would
                return allocate(y)
            return y
        y = np.stack([e if wrapped(e) else np.float64(e) for e in elements])
        y = y.astype(dtype).reshape(self.shape)
        if order == "F" or order == "A" and self.flags.f_contiguous and not self.flags.c_contiguous:
            return np.asfortranarray(y)
        axes = sorted(range(self.ndim), key=lambda axis: -abs(self.strides[axis]))
        if order in ("K", "A") and axes != sorted(axes):  # NumPy's: the memory order of self
            y = y.transpose(axes).copy().transpose(np.argsort(axes))
        return y

    def __array_function__(self, func, types, args, kwargs):
        return _holding_objects(super().__array_function__(func, types, args, kwargs))

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
        """NumPy's mean of objects (``numpy._core._methods._mean``): their sum divided by their
        count, a traced sum's NumPy scalar type (``ret.dtype.type(ret / n)``) the mode's, which
        converts it as NumPy's converts a number."""
        count = _reduced_count(self, axis)
        if count == 0:
            warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
        total = np.ndarray.sum(self, axis, dtype, out, keepdims, where=where)
        if isinstance(total, np.ndarray):
            return np.true_divide(total, count, out=total, casting="unsafe", subok=False)
        if wrapped(total) and total.dtype.name in SCALAR_TYPES:
            return SCALAR_TYPES[total.dtype.name][1](total / count)
        if hasattr(total, "dtype"):
            return total.dtype.type(total / count)
        return total / count

    def __setitem__(self, key, value):
        if (wrapped(value) or type(value) in (list, tuple) and holds_wrapped(value)) \
                and isinstance(np.broadcast_to(np.int8(0), self.shape)[key], np.ndarray):
            # into several elements (o[:] = list(x), o[1:] = x[1:]), which NumPy would convert
            # to floats: the array of objects NumPy makes of the value, of its traced numbers
            # (into one, o[0] = x[0], the object itself, as NumPy stores it)
            if wrapped(value) and np.ndim(value) == 0:
                objects = np.empty((), dtype=object)
                objects[()] = value
            elif wrapped(value) and value.dtype.kind in "fc":  # (its numbers as Python's)
                objects = python_objects(value)
            else:
                objects = _objects_of(np.array, (_elements(value),), {"dtype": object})
            if objects is not None:
                value = objects.view(np.ndarray)
        np.ndarray.__setitem__(self, key, value)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        outs = kwargs.get("out") or ()
        operands = (*inputs, *(outs if type(outs) is tuple else (outs,)))
        plain = [x.view(np.ndarray) if isinstance(x, TracedObjects) else x for x in inputs]
        if type(outs) is tuple and outs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, TracedObjects) else x
                                  for x in outs)
        if any(wrapped(x) for x in operands):
            if not any(isinstance(x, TracedObjects) and any(map(wrapped, x.flat))
                       for x in operands):
                return getattr(ufunc, method)(*plain, **kwargs)  # (plain objects: as NumPy's)
            if any(wrapped(x) for x in operands[len(inputs):]) or not set(kwargs) <= {"out"} \
                    or any(wrapped(x) and x.dtype.kind not in "fc" for x in inputs):
                raise UnsupportedOperationError(
                    f"np.{ufunc.__name__} of an array of objects holding traced numbers (a "
                    "ufunc np.frompyfunc made, or one they were written into) and a traced "
                    "array other than a float or complex operand (an out=, a dtype=): NumPy "
                    "would read the traced array's elements as plain numbers, which have no "
                    "derivative. Convert the object array first, o.astype(float), and compute "
                    "with the float array.")
            # (NumPy's object loop: the float array's elements as Python's numbers)
            plain = [python_objects(x).view(np.ndarray) if wrapped(x) else x for x in plain]
        y = getattr(ufunc, method)(*plain, **kwargs)
        return tuple(as_objects(r) for r in y) if type(y) is tuple else as_objects(y)


def _reduced_count(a, axis):
    """How many elements of ``a`` a reduction over ``axis`` reduces into each result, as
    NumPy's mean counts them (``numpy._core._methods._count_reduce_items``; a ``where=`` NumPy
    refuses for objects, whose sum has no identity)."""
    axes = range(a.ndim) if axis is None else np.lib.array_utils.normalize_axis_tuple(
        axis, a.ndim)
    return np.intp(math.prod(a.shape[i] for i in axes))


def _holding_objects(y):
    """``y``, a result of NumPy's function of a ``TracedObjects`` (``np.concatenate``,
    ``np.stack``, ``np.copy``): each array of objects in it holding traced numbers a
    ``TracedObjects``, as the one it was made of."""
    if type(y) in (tuple, list):
        return type(y)(_holding_objects(item) for item in y)
    if type(y) is np.ndarray and y.dtype.kind == "O" and any(map(wrapped, y.flat)):
        return y.view(TracedObjects)
    return y


def _elements(tree):
    """``tree`` (lists and tuples of it) with each traced array of one or more dimensions the
    nested lists of its traced numbers, as NumPy reads an array into an array of objects."""
    if type(tree) in (list, tuple):
        return type(tree)(_elements(x) for x in tree)
    if wrapped(tree) and np.ndim(tree) > 0:
        return [_elements(x) for x in tree]
    return tree


def _ndarray_class(x):
    return np.ndarray


def python_number(e):
    """Traced element ``e`` of a float or complex array as NumPy casts it to an object: a
    Python number (its value as a double, standing for a Python float or complex)."""
    if not wrapped(e) or e.dtype.kind not in "fc":
        return e
    e = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64, copy=False)
    weaken(e)
    return e


def python_objects(x, order="K"):
    """``x.astype(object)`` (``np.array(x, dtype=object)``) of a traced float or complex
    array: NumPy's array of objects (its layout of ``order``), each of ``x``'s elements in it
    as the Python number NumPy makes of it (``python_number``), followed."""
    y = np.empty_like(memory(x), dtype=object, order=order)
    for index in np.ndindex(y.shape):
        y[index] = python_number(x[index])
    return y.view(TracedObjects)


def _real_number(x):
    """Whether ``x``, an element of a :class:`TracedObjects`, converts to a float as NumPy's
    ``float(x)`` does, exactly: a traced real value, a real number."""
    if wrapped(x):
        return x.dtype.kind in "fiub" and x.ndim == 0
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def as_objects(y):
    """``y`` as a ``TracedObjects`` where it is an array of objects; otherwise ``y``."""
    return y.view(TracedObjects) if type(y) is np.ndarray and y.dtype == object else y


def lists_as_arrays(args):
    return [_stacked(a) if type(a) in (list, tuple) and holds_wrapped(a) else a for a in args]


def ufunc_operands(inputs):
    """A ufunc's operands with each list or tuple the array NumPy makes of it (stacked, if it
    holds traced values), each stand-in the plain array it views, and each object NumPy
    converts by its ``__array__`` that array (``converted_by_numpy``)."""
    return tuple((_stacked(a) if holds_wrapped(a) else np.asarray(a))
                 if type(a) in (list, tuple) else stand_in_value(a)
                 if type(a) is Preexisting else np.asarray(a)
                 if converted_by_numpy(a) else a for a in inputs)


def converted_by_numpy(x):
    """Whether ``x``, a ufunc's operand, is an object of another class that NumPy converts
    by its ``__array__`` (a field class of the user's), which the ufunc's rule then reads as
    that array: not an array, a NumPy scalar, a Python number, nor an object that takes part
    in ufuncs itself (``__array_ufunc__``: a device array, a traced one)."""
    kind = type(x)
    return (hasattr(kind, "__array__") and not hasattr(kind, "__array_ufunc__")
            and not isinstance(x, (np.ndarray, np.generic)))


class _Joined:
    """``np.r_`` or ``np.c_`` in the mode: an index expression joining traced values (``np.r_[a,
    0.0, b]``, ``np.c_[x, y]``, ``np.r_['0,2', a, b]``, ``np.r_[x, 1:4]``) is the concatenation
    it stands for, made as NumPy's ``AxisConcatenator`` makes it (a directive's axis, least
    number of dimensions and place of the items' axes; a slice's range; NumPy's promotion of
    the items, Python numbers weak), which the engines follow; NumPy's own would convert them.
    Keys without traced values, and the matrix directives (``'r'``, ``'c'``), are NumPy's own."""

    def __init__(self, original):
        self.original = original

    def __getitem__(self, key):
        items = key if type(key) is tuple else (key,)
        if not (ACTIVE.running and holds_wrapped(items)) or any(
                type(x) is str and (k or x in ("r", "c")) for k, x in enumerate(items)):
            return _indexed(self.original, key, items)
        axis, ndmin, trans1d = self.original.axis, self.original.ndmin, self.original.trans1d
        if type(items[0]) is str:  # 'axis', or 'axis,ndmin' and a third, trans1d, as NumPy's
            settings = items[0].split(",")
            try:
                axis = int(settings[0])
                if len(settings) > 1:
                    ndmin = int(settings[1])
                    trans1d = int(settings[2]) if len(settings) == 3 else trans1d
            except ValueError:
                return _indexed(self.original, key, items)  # NumPy's error
            items = items[1:]
        parts, kinds = [], []
        for item in items:
            if type(item) is slice:
                part = np.r_[item]  # its range, one-dimensional
                if ndmin > 1:
                    part = np.array(part, copy=None, ndmin=ndmin)
                    if trans1d != -1:
                        part = part.swapaxes(-1, trans1d)
            elif type(item) in np.ScalarType:
                part = item
            else:
                item = _stacked(item)  # a list holding traced values: NumPy's array of it
                part = np.array(item, copy=None, subok=True, ndmin=ndmin,
                                like=item if wrapped(item) else None)
                if trans1d != -1 and np.ndim(item) < ndmin:
                    k2, k1 = ndmin - np.ndim(item), trans1d
                    k1 += k2 + 1 if k1 < 0 else 0
                    axes = list(range(ndmin))
                    part = part.transpose(axes[:k1] + axes[k2:] + axes[k1:k2])
            parts.append(part)
            kinds.append(item if type(item) in np.ScalarType else part.dtype)
        dtype = np.result_type(*kinds)
        parts = [p.astype(dtype, copy=False) if wrapped(p) else
                 np.array(p, copy=None, subok=True, ndmin=ndmin, dtype=dtype) for p in parts]
        return np.concatenate(parts, axis=axis)

    def __len__(self):
        return len(self.original)


class _Grid:
    """``np.mgrid`` or ``np.ogrid`` in the mode: its float arrays are new, allocated as the
    factories' are."""

    def __init__(self, original):
        self.original = original

    def __getitem__(self, key):
        return _indexed(self.original, key, key if type(key) is tuple else (key,))

    def __len__(self):
        return len(self.original)


def _indexed(original, key, items):
    """``original[key]`` (an index expression of NumPy's building arrays from ``items``), each
    new float array a constant of the differentiations running in this thread, each new integer
    one a stand-in of itself, as the factories' (``np.mgrid[0:2, 0:4].astype(float)``)."""
    y = original[key]
    if not _in_mode():
        return y
    if type(y) in (tuple, list):
        return type(y)(_new(a, (_item, (original.__getitem__, i, key), {}), items)
                       for i, a in enumerate(y))
    return _new(y, (original.__getitem__, (key,), {}), items)


def _new(y, made, items):
    if _allocated(y, items, {}):
        return allocate(y, made)
    return _own_stand_in(y) if _counting(y, items, {}) else y


def _of_plain_objects(tree):
    """Whether ``tree`` holds Python's numbers, strings, lists, tuples and dicts and NumPy's
    scalars alone, however nested (no array, traced value or other object with memory)."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return all(_of_plain_objects(x) for x in tree)
    if kind is dict:
        return all(_of_plain_objects(x) for x in tree.values())
    return kind in _PLAIN_OBJECTS or isinstance(tree, (np.generic, np.dtype, type))


_PLAIN_OBJECTS = frozenset((int, float, complex, bool, str, type(None), slice,
                            type(Ellipsis)))


def from_plain_objects(y, func, args, kwargs, caller=None):
    """``y = func(*args, **kwargs)`` as the mode gives it user code where the arguments are
    Python's objects alone (``_of_plain_objects``: ``np.sin([0.1, 0.2])``, ``np.cumsum(L)``):
    what the user's code receives of arrays NumPy made (``by_user_code``), as ``np.array`` of
    the same objects gives them; anything else (a traced result) as it is. ``caller``: the
    frame that called, where not the one that calls this. So too where plain arrays are among
    the arguments (an array the function made by a call the mode does not follow,
    ``np.float32([1, 2])``, or one it reads from a cache) and the call made new arrays of its
    own (``_new_memory``: ``np.tile(a, 3)``, not ``np.reshape(a, -1)``'s view of ``a``)."""
    if not _of_plain_objects((args, kwargs)) and not (
            _new_memory(y, args, kwargs) and _of_plain_arrays((args, kwargs))):
        return y
    return by_user_code(y, func, args, kwargs, caller or sys._getframe(1))


def _new_memory(y, args, kwargs):
    """Whether ``y`` (each array of a tuple or list of them) is an array of NumPy's over new
    memory, none of ``args``' and ``kwargs``' (a float one among them): an array that owns
    its memory, or a view of one, through NumPy's arrays alone (``np.tile``'s reshape of
    the array it makes). ``by_user_code`` tells whether anything else holds it."""
    items = y if _sequence(y) else (y,)
    if not items or not all(type(a) is np.ndarray and _over_arrays(a) for a in items):
        return False
    given = list(_arrays([args, kwargs]))
    return any(follows_floats(a.dtype) for a in items) and not any(
        owner(b) is owner(a) for a in items for b in given)


def _over_arrays(a):
    """Whether ``a``'s chain of bases holds NumPy's plain arrays alone (no buffer, no stand-in
    of an array made before)."""
    while a.base is not None:
        a = a.base
        if type(a) is not np.ndarray:
            return False
    return True


def _of_plain_arrays(tree):
    """Whether ``tree`` holds Python's objects (``_of_plain_objects``) and NumPy's own plain
    arrays alone, however nested: no traced value, stand-in or other object."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return all(_of_plain_arrays(x) for x in tree)
    if kind is dict:
        return all(_of_plain_arrays(x) for x in tree.values())
    return kind is np.ndarray or _of_plain_objects(tree)


JOINED = {"r_": (np.r_, _Joined(np.r_)), "c_": (np.c_, _Joined(np.c_)),
          "mgrid": (np.mgrid, _Grid(np.mgrid)), "ogrid": (np.ogrid, _Grid(np.ogrid))}
"""NumPy's index expressions that build arrays, and the mode's."""


def _follows(tree):
    """Whether a value some running differentiation follows, not a constant of every one
    (``arraylike.carries_derivative``), is in ``tree`` (lists and tuples of them)."""
    if type(tree) in (list, tuple):
        return any(_follows(x) for x in tree)
    while wrapped(tree):
        if not tree.constant_here():
            return True
        tree = tree.value
    return False


def _nditer(op, flags=None, op_flags=None, op_dtypes=None, order="K", *rest, **kwargs):
    """``np.nditer`` in the mode: NumPy's iterator, which cannot take arrays mutad follows
    (it needs their memory, and would write into it behind the tape's back). Over arrays
    mutad follows (one, or several that broadcast together, ``np.nditer([x, y],
    op_flags=[["readonly"], ["writeonly"]])``), with no flags: their elements in NumPy's
    order, each by indexing (:class:`_ElementIterator`); otherwise an error that says what to
    write instead. Constants (arrays allocated in the function) it reads as plain arrays, as
    before, unless it may write into them (``_writes_allocated``)."""
    if _in_mode() and _holds_adopted(op):  # (the arrays writes adopted, not their bytes)
        op = adopted_views(op)
    if not (_in_mode() and (_follows([op, op_dtypes, *rest, *kwargs.values()])
                            or _writes_allocated(op, op_flags))):
        return np.nditer(op, flags, op_flags, op_dtypes, order, *rest, **kwargs)
    several = type(op) in (list, tuple)
    operands = list(op) if several else [op]
    if op_flags is None or not all(type(f) in (list, tuple) for f in op_flags):
        op_flags = [op_flags or ["readonly"]] * len(operands)
    allowed = {"readonly", "readwrite", "writeonly", "allocate"}
    flags = list(flags or ())
    given = [x for x in operands if x is not None]
    if len(given) < len(operands) and given and len(op_flags) == len(operands) and all(
            wrapped(x) or isinstance(x, np.ndarray) for x in given):
        # NumPy's allocation of an output (``np.nditer([x, None])``): NumPy's array (the
        # inputs' broadcast shape and dtype, laid out as they are, which decides the order
        # of the elements), allocated here as a constant the loop writes into
        op_flags = [list(f) if x is not None else [g for g in f if g != "readonly"] + (
            [] if set(f) & {"readwrite", "writeonly"} else ["writeonly"]) + (
            [] if "allocate" in f else ["allocate"]) for x, f in zip(operands, op_flags)]
        made = np.nditer([None if x is None else memory(x) for x in operands],
                         [f for f in flags if f != "buffered"],
                         [f if x is None else ["readonly"] for x, f in zip(operands, op_flags)],
                         order=order).operands
        operands = [REPLACEMENTS["empty_like"][1](y) if x is None else x
                    for x, y in zip(operands, made)]
    if (set(flags) - _TRACKING - _CHUNKING or len(op_flags) != len(operands)
            or op_dtypes is not None
            or rest or kwargs
            or not all(wrapped(x) or isinstance(x, np.ndarray) for x in operands)
            or not all(set(f) <= allowed for f in op_flags)):
        raise UnsupportedOperationError(
            "np.nditer over an array mutad follows with flags other than multi_index, "
            "c_index, f_index, zerosize_ok, refs_ok, external_loop, buffered and grow_inner, "
            "op_dtypes, or an operand that is not an array: NumPy's "
            "iterator reads and writes the arrays' memory directly, where mutad cannot follow "
            "it. Iterate over arrays with op_flags and those flags alone (np.nditer([x, y], "
            "flags=['multi_index'], op_flags=[['readonly'], ['writeonly']])), loop with "
            "`for i in np.ndindex(x.shape):` and x[i], or better, write the loop as "
            "whole-array operations.")
    writes = [bool(set(f) & {"readwrite", "writeonly"}) for f in op_flags]
    if "external_loop" in flags:
        return _ChunkIterator(operands, order, writes, several, flags)
    return _ElementIterator(operands, order, writes, several, flags)


def _writes_allocated(op, op_flags):
    """Whether ``np.nditer(op, op_flags=op_flags)`` may write into an array the function
    allocated (``out = np.zeros(n)``, then ``x[...] = p[i]`` in the loop): the loop can write
    traced values there, which NumPy's iterator would put in its memory unseen."""
    operands = list(op) if type(op) in (list, tuple) else [op]
    if not op_flags:
        return False
    each = op_flags if all(type(f) in (list, tuple) for f in op_flags) \
        else [op_flags] * len(operands)
    return any(wrapped(x) and bool(set(f) & {"readwrite", "writeonly"})
               for x, f in zip(operands, each))


_TRACKING = {"multi_index", "c_index", "f_index", "zerosize_ok", "refs_ok"}
"""The flags of ``np.nditer`` its stand-in takes: which indices it tracks, and what NumPy
allows it to iterate over; none changes the elements it gives."""

_CHUNKING = {"external_loop", "buffered", "grow_inner"}
"""The flags of ``np.nditer`` with which it gives one-dimensional runs of elements
(``_ChunkIterator``)."""


class _ElementIterator:
    """``np.nditer`` of arrays mutad follows: the elements in the order NumPy's iterator
    visits them (read from the order it visits the memories', a layout fact, not a value),
    each a 0-d view ``x[i, j, ...]`` (of a broadcast operand, the element broadcast there),
    through which ``v[...] = ...`` writes ``x`` where the iterator may write
    (``op_flags=['readwrite']``); read-only, it gives the element, which refuses writes as
    NumPy's read-only view does. Several operands give a tuple per step, as NumPy's. As
    NumPy's, it is its own iterator (a loop exhausts it, ``reset()`` starts it again), steps
    with ``iternext()`` until ``finished``, gives the operands' elements where it stands as
    ``it[i]`` and ``it.value``, the index as ``it.multi_index`` (flag ``multi_index``) and the
    flat index as ``it.index`` (``c_index`` or ``f_index``), and is a context manager."""

    def __init__(self, operands, order, writes, several, flags):
        walk = np.nditer([memory(x) for x in operands],
                         flags=["multi_index", "zerosize_ok", "refs_ok"], order=order,
                         op_flags=[["readwrite" if w else "readonly"] for w in writes])
        self._shape = walk.shape
        self._indices = [walk.multi_index for _ in walk]
        self._operands, self._writes, self._several = operands, writes, several
        self._flags = set(flags)
        self._at = 0  # the step it stands at; len(self._indices) once finished

    def _element(self, x, index, writes):
        index = tuple(0 if n == 1 else i for i, n in zip(index[len(index) - x.ndim:], x.shape))
        return x[index + (Ellipsis,)] if writes else x[index]

    def _elements(self):
        index = self._current("value")
        return tuple(self._element(x, index, w) for x, w in zip(self._operands, self._writes))

    def _current(self, what):
        if self._at >= len(self._indices):
            raise ValueError(f"Iterator is past the end: no {what}")  # (as NumPy's refuses)
        return self._indices[self._at]

    def __iter__(self):
        return self

    def __next__(self):
        if self._started:
            self._at += 1
        self._started = True
        if self._at >= len(self._indices):
            raise StopIteration
        elements = self._elements()
        return elements if self._several else elements[0]

    _started = False  # whether a loop took the element it stands at

    @property
    def finished(self):
        return self._at >= len(self._indices)

    def iternext(self):
        self._started = False
        self._at = min(self._at + 1, len(self._indices))
        return not self.finished

    def reset(self):
        self._at, self._started = 0, False

    @property
    def value(self):
        elements = self._elements()
        return elements if self._several else elements[0]

    def __getitem__(self, i):
        return self._elements()[i]

    @property
    def multi_index(self):
        if "multi_index" not in self._flags:
            raise ValueError("Iterator is not tracking a multi-index")
        return self._current("multi-index")

    @property
    def index(self):
        order = "C" if "c_index" in self._flags else "F" if "f_index" in self._flags else None
        if order is None:
            raise ValueError("Iterator does not have an index")
        return int(np.ravel_multi_index(self._current("index"), self._shape, order=order))

    @property
    def iterindex(self):
        return self._at

    @property
    def operands(self):
        """The arrays iterated over, an allocated output among them, as NumPy's gives them."""
        return tuple(self._operands)

    @property
    def itersize(self):
        return len(self._indices)

    def __len__(self):  # the number of operands, as NumPy's
        return len(self._operands)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _ChunkIterator(_ElementIterator):
    """``np.nditer(..., flags=['external_loop'])`` of arrays mutad follows: the one-dimensional
    runs of elements NumPy's iterator gives over their memory (its layout decisions: the
    order, the dimensions it joins, a buffered run's length), each the same view of the array
    mutad follows, writeable where the iterator may write. A run NumPy's would copy into a
    buffer (no view of the memory) is refused."""

    def __init__(self, operands, order, writes, several, flags):
        plain = [memory(x) for x in operands]
        walk = np.nditer(plain, flags=flags, order=order, op_flags=[["readonly"]] * len(plain))
        self._steps = []
        with walk:
            if "delay_bufalloc" in flags:
                walk.reset()
            for runs in walk:
                runs = runs if type(runs) is tuple else (runs,)
                self._steps.append([_run(x, run) for x, run in zip(plain, runs, strict=True)])
        self._indices = self._steps  # (the steps, whose length is the iterator's)
        self._operands, self._writes, self._several = operands, writes, several
        self._flags = set(flags)
        self._at = 0

    def _elements(self):
        runs = self._current("value")
        return tuple(_run_view(x, run, w)
                     for x, run, w in zip(self._operands, runs, self._writes, strict=True))

    @property
    def itersize(self):
        return sum(int(np.prod(run[0])) for run, *_ in self._steps)


def _run(x, run):
    """Where ``run``, a run of elements NumPy's iterator gives over the plain array ``x``,
    lies in ``x``'s memory: (shape, strides, byte offset from the memory's start)."""
    base = owner(x)
    start = address(base)
    end = start + base.nbytes
    if not (run.dtype == x.dtype and (run.size == 0 or start <= address(run) < end)
            and (run.size == 0 or np.shares_memory(run, base))):
        raise UnsupportedOperationError(
            "np.nditer(..., flags=['external_loop', 'buffered']) over an array mutad follows, "
            "where NumPy's iterator copies the elements into a buffer of its own (a cast, or "
            "a layout it does not read in place), whose writes mutad cannot follow. Leave "
            "out 'buffered', or write the loop as whole-array operations.")
    return run.shape, run.strides, address(run) - start


def _run_view(x, run, writes):
    """The view of ``x`` (an array mutad follows) that ``run`` (``_run``) is, read-only
    unless the iterator ``writes`` it."""
    shape, strides, offset = run
    flat = owner(memory(x)).reshape(-1, order="A")  # (its owner's memory, in order)
    view = strided(flat, shape, x.dtype, offset, strides)
    if wrapped(x):
        view = view_as(x, view)
    elif type(x) is Preexisting:
        view = view.view(Preexisting)
    if not writes:
        memory(view).flags.writeable = False
    return view


def _ndenumerate(arr):
    """``np.ndenumerate`` in the mode: of an array mutad follows (or a list holding its
    values), each index with the element itself, read by indexing (NumPy's reads the array's
    memory through ``np.asarray``); else NumPy's own. A buffer made before the call is read
    as the array a write adopted, as ``_nditer`` reads it."""
    if _in_mode() and _holds_adopted(arr):  # (the arrays writes adopted, not their bytes)
        arr = adopted_views(arr)
    if _in_mode() and (holds_wrapped([arr]) or wrapped(arr)):
        if type(arr) in (list, tuple):
            arr = lists_as_arrays([arr])[0]
        return ((index, arr[index]) for index in np.ndindex(*np.shape(arr)))
    return np.ndenumerate(arr)


def _named(wrapper, func):
    wrapper.__name__ = func.__name__
    wrapper.__qualname__ = getattr(func, "__qualname__", func.__name__)
    wrapper.__module__ = getattr(func, "__module__", "numpy")
    wrapper.__doc__ = func.__doc__
    wrapper.__wrapped__ = func
    return wrapper


class _ShownType(type):
    """The type of one of NumPy's classes (``numpys``) as the mode shows it where the
    differentiated code calls it: as a type it is NumPy's."""

    numpys: type

    def __instancecheck__(cls, x):  # for the user's code (``FOR_THE_CALLER``)
        return isinstance(x, cls.numpys)

    def __subclasscheck__(cls, kind):
        return kind is cls or issubclass(kind, cls.numpys)

    def __getattr__(cls, name):
        return getattr(cls.numpys, name)

    def __eq__(cls, other):
        return other is cls or other is cls.numpys

    def __hash__(cls):
        return hash(cls.numpys)


class _Constructor(_ShownType):
    """The type of ``numpy.ndarray`` as the mode shows it: calling it (``np.ndarray((n,))``, the
    raw constructor) allocates a constant, as ``np.empty`` does, unless it views a ``buffer``;
    as a type it is ndarray (``isinstance(u, np.ndarray)``, ``np.ndarray.sum``)."""

    numpys = np.ndarray

    def __call__(cls, shape, dtype=float, buffer=None, offset=0, strides=None, order=None):
        if wrapped(buffer):
            return _viewing(buffer, np.ndarray(shape, dtype, memory(buffer), offset, strides,
                                               order))
        y = np.ndarray(shape, dtype, buffer, offset, strides, order)
        if buffer is not None and _in_mode():
            return _buffer_view(y)
        if buffer is None and _in_mode() and y.dtype.kind in "fc":
            return allocate(y, (np.ndarray, (shape, dtype, None, offset, strides, order), {}))
        if buffer is None and _in_mode() and y.dtype.kind in SELF_STANDING:  # (_counting)
            return _own_stand_in(y)
        return y

    def __getattr__(cls, name):
        attribute = getattr(np.ndarray, name)
        if type(attribute) in (types.MethodDescriptorType, types.WrapperDescriptorType):
            return _unbound_method(attribute, name)
        return attribute

    def __eq__(cls, other):  # type(u) == np.ndarray, type(u) in (np.ndarray, list)
        return other is cls or other is np.ndarray or other is Preexisting

    def __hash__(cls):
        return hash(np.ndarray)


def _viewing(buffer, y):
    """``np.ndarray(..., buffer=buffer)`` of a traced or dual ``buffer``: the view of its memory
    that NumPy's ``y`` is (made of the memory, with NumPy's errors), as a view of ``buffer``'s,
    which the differentiation follows. Of another dtype, which reinterprets the bytes, refused
    as ``buffer.view(dtype)`` is."""
    view = view_as(buffer, y) if y.dtype == buffer.dtype else None
    if view is None:
        raise UnsupportedOperationError(
            "np.ndarray(..., buffer=x) of a differentiated array x, of another dtype than x's "
            "or over memory x's owner does not lay out in order: reinterpreting its bytes has "
            "no derivative. Use x.view(), reshape or indexing for views, and x.astype for "
            "another dtype.")
    return view


def _unbound_method(method, name):
    """ndarray's ``method`` called unbound (``np.ndarray.__iadd__(u, v)``, ``np.ndarray.sum(u)``):
    of a traced or dual ``u`` its own method ``name``, which NumPy's refuses with a TypeError
    (its ``self`` is no ndarray), else NumPy's."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if wrapped(self) or type(self) is Preexisting:
            # (a stand-in's own: NumPy's np.ndarray.view(U0) or np.ndarray.__getitem__(U0, k)
            # would be a plain view of its memory, read as a constant after a write adopted it)
            args = tuple(np.ndarray if isinstance(a, _Constructor) else a for a in args)
            return getattr(self, name)(*args, **kwargs)
        return method(self, *args, **kwargs)

    return call


class ndarray(metaclass=_Constructor):  # noqa: N801 (NumPy's name)
    """``numpy.ndarray`` where differentiated code calls it (``_Constructor``)."""


class _ScalarType(type):
    """The type of a NumPy scalar type (``np.float64``) as the mode shows it where the
    differentiated code calls it: of a traced value (``np.float64(x[0])``, ``np.float32(s)``)
    the value converted as NumPy converts it (``astype``: a traced array for an array; for a
    scalar a read-only 0-d value, which the engines take for NumPy's scalar, computing its
    products and powers in NumPy's scalar math), which the engines follow; otherwise NumPy's own scalar type,
    called as it is. As a type it is NumPy's: a subclass of it, equal to it, with its hash, its
    dtype (``dtype=np.float64``, ``np.finfo``, ``issubclass``) and its instances
    (``isinstance(v, np.float64)``, the values it gave among them, whose class the user's
    code is shown as NumPy's: ``shown_class``). Identity (``type(v) is np.float64``) it cannot
    pass: code that may compare by identity keeps NumPy's own (``_Mode._swap_cells``)."""

    def __new__(mcs, name, bases, namespace, **kwargs):
        # a class the user's code derives from the stand-in in the mode (``class P(float)``
        # in f) is derived from the type it stands in for: its own class, as outside the mode
        if any(isinstance(base, _ScalarType) for base in bases):
            return type(name, tuple(base.__bases__[0] if isinstance(base, _ScalarType)
                                    else base for base in bases), namespace, **kwargs)
        return super().__new__(mcs, name, bases, namespace, **kwargs)

    def __call__(cls, *args, **kwargs):
        original = cls.__bases__[0]
        if ACTIVE.running and len(args) == 1 and not kwargs and holds_wrapped(args[0]):
            value = args[0]
            if type(value) in (list, tuple):
                value = lists_as_arrays([value])[0]
            converted = value.astype(original)
            if memory(converted).ndim == 0:  # NumPy's scalar: immutable, computed with as one
                memory(converted).flags.writeable = False
                # and promoted as one, of a Python number too (x32 * np.float64(v) is float64)
                weaken(converted, False)
            return converted
        if ACTIVE.running and len(args) == 1 and not kwargs and type(args[0]) in _TEXTS \
                and _NUMBER_TEXTS:
            y = original(args[0])
            number = parsed_number(args[0], original, y)
            return y if number is None else cls(number)
        y = original(*args, **kwargs)
        if type(y) is np.ndarray and ACTIVE.running:  # (of a list: NumPy's new array)
            return from_plain_objects(y, original, args, kwargs, sys._getframe(1))
        return y

    def __instancecheck__(cls, x):  # for the user's code (``FOR_THE_CALLER``)
        return isinstance(x, cls.__bases__[0])

    def __subclasscheck__(cls, kind):
        return kind is cls or issubclass(kind, cls.__bases__[0])

    def __eq__(cls, other):
        return True if other is cls or other is cls.__bases__[0] else NotImplemented

    def __ne__(cls, other):
        # (the metaclass's __eq__: ``cls.__eq__`` is the scalar type's method of its values)
        equal = _ScalarType.__eq__(cls, other)
        return equal if equal is NotImplemented else not equal

    def __hash__(cls):
        return hash(cls.__bases__[0])


def _scalar_type(original):
    stand_in = _ScalarType(original.__name__, (original,), {"__module__": "numpy",
                                                           "__doc__": original.__doc__})
    stand_in.__qualname__ = original.__qualname__
    return stand_in


SCALAR_TYPES = {name: (getattr(np, name), _scalar_type(getattr(np, name)))
                for name in ("float16", "float32", "float64", "complex64", "complex128")}
SCALAR_TYPES.update({alias: SCALAR_TYPES[np.dtype(getattr(np, alias)).name]
                     for alias in ("half", "single", "double", "csingle", "cdouble")})
"""NumPy's float and complex scalar types by the names the ``numpy`` module gives them, and
the mode's (``_ScalarType``), installed where the differentiated code calls them."""


# The text of a traced number parsed back. ``str(x[0])``, ``repr(v)`` and ``f"{v:.17g}"`` give
# NumPy's text, a plain string; the mode's ``float()`` and NumPy's scalar types, called on that
# very string object, give the traced number back where the text is its value's exactly (a
# format that writes every number of its type in full, not a rounding, whose derivative is
# zero). Only the string object itself is known: a text built from it, a file or json's
# document of it, parses to a constant (docs/sharp-bits.md).

_NUMBER_TEXTS = {}
"""``id(text) -> (text, value, spec)``: the strings that ``str()``, ``repr()`` and
``format(value, spec)`` gave of a traced or dual 0-d value while the mode runs, held (so that
no other string takes the id) until it ends."""


class _Digit(str):
    """A text of one character (``f"{v:.17g}"`` of 3.0): Python's is one object shared by
    every string of it (the literal ``"3"`` too), which no id tells apart; this one is the
    formatting's own. As a string it is Python's (pickled, copied as Python's)."""

    __slots__ = ()

    def __reduce__(self):
        return str, (str(self),)


_TEXTS = (str, _Digit)

_FULL_DIGITS = {2: 5, 4: 9, 8: 17}
"""Significant digits that write every float of that many bytes so that it parses back to it."""


def remember_text(value, text, spec=""):
    """``text``, the string formatting the traced or dual ``value`` gave, remembered as its
    text (``_NUMBER_TEXTS``) where ``value`` is 0-d."""
    if value.value.ndim:  # (an array's text: no number parses from it)
        return text
    if len(text) < 2:  # ("" and one character are Python's shared strings)
        text = _Digit(text)
    _NUMBER_TEXTS[id(text)] = (text, value, spec)
    return text


def writes_in_full(spec, itemsize):
    """Whether ``format(v, spec)`` of every float ``v`` of ``itemsize`` bytes parses back to
    ``v``: Python's and NumPy's shortest text (no precision, no type: ``str``, ``repr``,
    ``f"{v}"``), or enough significant digits (``.17g``, ``.16e`` of a float64)."""
    kind = spec[-1:] if spec[-1:].isalpha() else ""
    _, dot, digits = spec[:len(spec) - len(kind)].rpartition(".")
    if not (dot and digits.isdigit()):
        return kind == ""
    need = _FULL_DIGITS.get(itemsize, math.inf)
    return int(digits) >= need if kind in ("", "g", "G") else \
        kind in ("e", "E") and int(digits) + 1 >= need


def parsed_number(text, convert, parsed):
    """The traced or dual value the string ``text`` is the text of (``_NUMBER_TEXTS``), where
    ``parsed``, ``convert(text)`` (Python's ``float``, NumPy's ``float32``), is bit for bit
    ``convert`` of that value and the text writes every number of its type in full; else
    None (a rounded text's derivative is zero: the constant ``parsed`` is exact)."""
    entry = _NUMBER_TEXTS.get(id(text))
    if entry is None or entry[0] is not text:
        return None
    _, value, spec = entry
    if not running(value.level) or value.dtype.kind != "f" \
            or not writes_in_full(spec, value.dtype.itemsize):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        number = convert(memory(value)[()])
    if number != number and parsed != parsed:  # nan: NumPy's of the text, a constant
        return None
    if type(number) is not type(parsed) or \
            np.asarray(number).tobytes() != np.asarray(parsed).tobytes():  # a text in full, of another type's number (float() of a float32's)
        raise ConversionError(
            f"{convert.__name__}() of the text of a traced {value.dtype} number gives "
            f"{parsed!r}, not that number, so its derivative cannot follow. Convert the "
            f"number itself ({convert.__name__}(v), not {convert.__name__}(str(v))), or "
            f"mutad.stop_gradient(v) where no gradient should flow.")
    return value


class _PythonFloat(_ScalarType):
    """The type of Python's ``float`` as the mode shows it where the differentiated code calls
    it: of a traced float value (``float(x[0])``, ``return float(loss)``) the value standing
    for the Python float Python gives, as ``x.item()`` gives it, which the engines follow
    (after NumPy's own errors and warnings: ``float()`` of an array of several elements);
    otherwise Python's ``float``. As a type it is Python's (``_ScalarType``)."""

    def __call__(cls, *args, **kwargs):
        if ACTIVE.running and len(args) == 1 and not kwargs and wrapped(args[0]) \
                and args[0].dtype.kind == "f":
            value = args[0]
            float(memory(value)[()] if stands_for_scalar(value) else memory(value))
            if value.dtype.itemsize > 8:  # (np.longdouble's .item() is not a Python float)
                value = value.astype(np.float64)
            return value.item()
        if ACTIVE.running and len(args) == 1 and not kwargs and type(args[0]) in CARRIERS \
                and hasattr(args[0], "python_float"):  # (a masked array of traced values)
            return args[0].python_float()
        if ACTIVE.running and len(args) == 1 and not kwargs and type(args[0]) in _TEXTS \
                and _NUMBER_TEXTS:
            parsed = float(args[0])
            number = parsed_number(args[0], float, parsed)
            return parsed if number is None else cls(number)
        return float(*args, **kwargs)


PYTHON_FLOAT = _PythonFloat("float", (float,), {"__module__": "builtins",
                                                 "__doc__": float.__doc__})
"""Python's ``float`` in the mode (``_PythonFloat``), bound where the differentiated code reads
the builtin and never compares a type with it by identity (``_Mode._swap_cells``)."""


class _PythonComplex(_ScalarType):
    """The type of Python's ``complex`` as the mode shows it where the differentiated code
    calls it: of traced float values and real numbers (``complex(x[0], x[1])``,
    ``complex(x[0])``) the value standing for the Python complex Python gives, its parts
    exactly those numbers (the pair viewed as one complex number, which the engines follow);
    otherwise Python's ``complex``. As a type it is Python's (``_ScalarType``)."""

    def __call__(cls, *args, **kwargs):
        if ACTIVE.running and 1 <= len(args) <= 2 and not kwargs \
                and any(wrapped(a) for a in args) \
                and all(_traced_real_scalar(a) or type(a) in (float, int, bool) for a in args):
            parts = [a.astype(np.float64) if wrapped(a) else np.float64(float(a)) for a in args]
            return np.stack(parts + [np.float64(0.0)] * (2 - len(args))).view(
                np.complex128)[0].item()
        return complex(*args, **kwargs)


def _traced_real_scalar(value):
    """Whether ``value`` is a traced 0-d float value of at most double precision, whose
    ``complex()`` parts are its number exactly."""
    return wrapped(value) and value.dtype.kind == "f" and value.dtype.itemsize <= 8 \
        and value.shape == ()


PYTHON_COMPLEX = _PythonComplex("complex", (complex,), {"__module__": "builtins",
                                                       "__doc__": complex.__doc__})


def _shown_type(*args, **kwargs):
    """Python's ``type`` as the differentiated code sees it where it loads the name only to
    call it: of a value mutad hands the program in place of NumPy's (a traced array, a traced
    element, a value standing for a Python float, an array the function made), the class of
    what NumPy would have handed it, as ``isinstance`` answers (``shown_class``), so that
    ``type(x) is np.ndarray`` and ``type(x.sum()) == np.float64`` take NumPy's branch (they took
    the other, silently: a wrong value); otherwise Python's ``type`` itself."""
    if len(args) != 1 or kwargs:
        return type(*args, **kwargs)
    value = args[0]
    cls = type(value)
    if cls.__module__.partition(".")[0] != "mutad":
        return cls
    shown = value.__class__  # (asked for the user's code that called: ``FOR_THE_CALLER``)
    if shown is not cls or not isinstance(value, np.ndarray):
        return shown
    # an array of the mode's own class (``Preexisting``): NumPy's class it derives from
    return next(c for c in cls.__mro__ if c.__module__.partition(".")[0] != "mutad")


_shown_type.__name__ = _shown_type.__qualname__ = "type"
PYTHON_BUILTINS = {"float": PYTHON_FLOAT, "complex": PYTHON_COMPLEX, "type": _shown_type}
"""Python's builtins the mode stands in for, bound as ``PYTHON_FLOAT`` is, each under its
name: the number types, and ``type``."""


class _RecordsConstructor(_ShownType):
    """The type of ``numpy.recarray`` as the mode shows it where the differentiated code calls
    it: calling it (``np.recarray(n, dtype=...)``) allocates a constant record array of numbers
    as ``np.zeros`` allocates an array (the record array ``registry.SUBCLASS_VIEWS`` gives of
    it), unless it views a buffer; as a type it is NumPy's recarray."""

    numpys = np.recarray

    def __call__(cls, *args, **kwargs):
        y = np.recarray(*args, **kwargs)
        as_records = SUBCLASS_VIEWS.get(np.recarray)
        if y.base is None and _in_mode() and _followed_records(y.dtype) \
                and as_records is not None:
            return as_records(allocate(y.view(np.ndarray), (_records_data, args, kwargs)))
        return y


def _records_data(*args, **kwargs):
    """The array of records ``np.recarray(*args, **kwargs)`` holds (the call a replay redoes)."""
    return np.recarray(*args, **kwargs).view(np.ndarray)


class recarray(metaclass=_RecordsConstructor):  # noqa: N801 (NumPy's name)
    """``numpy.recarray`` where differentiated code calls it (``_RecordsConstructor``)."""


class _MatrixConstructor(_ShownType):
    """The type of ``numpy.matrix`` as the mode shows it where the differentiated code calls
    it: of traced values (``np.matrix(x.reshape(2, 2))``, ``np.matrix([[a, b], [c, d]])``),
    the traced array in the shape NumPy's matrix of their plain values has (its errors too),
    as the object that computes as np.matrix does which a library registers
    (``HANDED_SUBCLASSES``: scipy.sparse's), of float64 values (np.matrix's products of
    others take NumPy's promotion of arrays, not of numbers); NumPy's matrix otherwise, and
    as a type."""

    numpys = np.matrix

    def __call__(cls, data, dtype=None, copy=True):
        # (NumPy's warning names the line calling np.matrix, not mutad's)
        return _matrix_of(data, dtype, copy, lambda values: from_callers_line(
            np.matrix, (values, dtype, copy), {}))


def _matrix_of(data, dtype, copy, numpys):
    """``np.matrix(data, dtype, copy)`` in the mode (``_MatrixConstructor``), ``numpys`` the
    call of NumPy's (``np.matrix``, ``np.asmatrix``) that makes its matrix of given values:
    made once, of the plain values where ``data`` holds traced ones, so that NumPy's warning
    is issued once, from NumPy's line."""
    if ACTIVE.running and holds_wrapped(data):
        subclass_rules(np.matrix)
    handed = HANDED_SUBCLASSES.get(np.matrix)
    if handed is None or not (ACTIVE.running and holds_wrapped(data)):
        return numpys(data)
    plain = reissued(numpys, _plain(data))
    if plain.dtype != np.float64:
        return np.matrix(data, dtype, copy)  # (NumPy's: a conversion, refused)
    array = REPLACEMENTS["array"][1](data, dtype=dtype, copy=True if copy else None)
    return handed(np.reshape(array, plain.shape))  # (without copy, a view of data's)


def reissued(function, *args):
    """``function(*args)``, NumPy's or SciPy's call on plain values that mutad makes for a
    result it computes otherwise (``np.matrix(x)`` of traced values, a write to a
    scipy.sparse matrix), which a replay does not call again: the warnings it issues
    (np.matrix's PendingDeprecationWarning, SciPy's SparseEfficiencyWarning), decided by
    what the program holds, are issued where the call issued them, and each replay recording
    it issues them again (``Recorder.warned``), as the traced call does."""
    capture = Capture()
    try:
        result = function(*args)
    finally:
        issued = capture.stop()
    for w in issued:
        warn_at(w.message, w.category, w.filename, w.lineno)
        for differentiation in ACTIVE.running:
            recorder = getattr(differentiation, "recorder", None)
            if recorder is not None:
                recorder.warned(w.message, w.category, w.filename, w.lineno)
    return result


class matrix(metaclass=_MatrixConstructor):  # noqa: N801 (NumPy's name)
    """``numpy.matrix`` where differentiated code calls it (``_MatrixConstructor``)."""


def _asmatrix(data, dtype=None):
    """``np.asmatrix`` in the mode, ``np.matrix(data, dtype, copy=False)`` as NumPy's is: the
    mode's ``matrix`` where the calling code compares no type with np.matrix by identity
    (``CALLED_TYPES``' condition), NumPy's otherwise."""
    if _uses(sys._getframe(1).f_code, "matrix")[1]:
        return np.asmatrix(data, dtype)
    return _matrix_of(data, dtype, False, lambda values: np.asmatrix(values, dtype))


def _bmat(obj, ldict=None, gdict=None):
    """``np.bmat`` in the mode: of blocks holding traced values (``np.bmat([[m, m], [m, m]])``
    of matrices ``np.asmatrix(x)`` made), NumPy's concatenations of the blocks' arrays as the
    object that computes as np.matrix does (``HANDED_SUBCLASSES``), in the shape NumPy's bmat
    of their plain values has (its errors too), where the calling code compares no type with
    np.matrix by identity (``_asmatrix``'s condition); NumPy's otherwise (a string of names)."""
    if ACTIVE.running and holds_wrapped(obj):
        subclass_rules(np.matrix)
    handed = HANDED_SUBCLASSES.get(np.matrix)
    if handed is None or not (ACTIVE.running and holds_wrapped(obj)) or type(obj) not in (
            list, tuple) or _uses(sys._getframe(1).f_code, "matrix")[1]:
        return np.bmat(obj, ldict, gdict)
    plain = reissued(np.bmat, _plain(obj))
    rows = obj if type(obj[0]) in (list, tuple) else [obj]
    arrays = [[block.array if type(block) is handed else block.view(np.ndarray)
               if isinstance(block, np.matrix) else block for block in row] for row in rows]
    joined = np.concatenate([np.concatenate(row, axis=-1) for row in arrays], axis=0)
    return handed(np.reshape(joined, plain.shape))


class _Broadcast:
    """``np.broadcast`` of arrays mutad follows: NumPy's object (its ``shape``, ``nd``,
    ``ndim``, ``size``, ``numiter``, ``index``, ``reset()``; ``isinstance(b, np.broadcast)``),
    whose iteration gives a tuple per position of the broadcast shape, in C order, of each
    operand's element there (``x[i, j]``, NumPy's scalar), read by indexing (NumPy's reads the
    arrays' memory). Its ``iters`` (NumPy's flat iterators over that memory) are refused."""

    __class__ = property(lambda self: shown_class(self, lambda _: np.broadcast))

    def __init__(self, operands):
        self._operands = [x if wrapped(x) else np.asarray(x) for x in operands]
        self.shape = np.broadcast_shapes(*(np.shape(x) for x in self._operands))
        self.nd = self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.numiter = len(self._operands)
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.index >= self.size:
            raise StopIteration
        index = np.unravel_index(self.index, self.shape)
        self.index += 1
        return tuple(x[tuple(0 if n == 1 else int(i) for i, n in zip(
            index[len(index) - np.ndim(x):], np.shape(x)))] for x in self._operands)

    def reset(self):
        self.index = 0

    @property
    def iters(self):
        raise UnsupportedOperationError(
            "np.broadcast(...).iters of arrays mutad follows: NumPy's flat iterators read "
            "the arrays' memory, where mutad cannot follow them. Iterate over the broadcast "
            "object itself (for a, b in np.broadcast(x, y)), or over np.broadcast_arrays(x, y).")


class _BroadcastConstructor(_ShownType):
    """The type of ``numpy.broadcast`` as the mode shows it where the differentiated code calls
    it: of arrays mutad follows, :class:`_Broadcast`; NumPy's otherwise, and as a type."""

    numpys = np.broadcast

    def __call__(cls, *args):
        if ACTIVE.running and holds_wrapped(list(args)):
            np.broadcast(*(memory(x) if wrapped(x) else x for x in args))  # (NumPy's errors)
            return _Broadcast(args)
        return np.broadcast(*args)


class broadcast(metaclass=_BroadcastConstructor):  # noqa: N801 (NumPy's name)
    """``numpy.broadcast`` where differentiated code calls it (``_BroadcastConstructor``)."""


CALLED_TYPES = {**SCALAR_TYPES, "recarray": (np.recarray, recarray),
                "matrix": (np.matrix, matrix), "broadcast": (np.broadcast, broadcast)}
"""NumPy's types the mode's ``numpy`` module binds to its stand-ins where the differentiated
code calls them and never compares a type with them by identity (``_Mode._swap_cells``)."""
_CALLED_ORIGINALS = {name: original for name, (original, _) in CALLED_TYPES.items()}


def _uses_ndarray(code):
    """``(calls, compares)``: whether ``code`` (or a function defined in it) calls NumPy's
    ``ndarray`` (``np.ndarray((n,))``: then the mode's stands in for it), and whether it may
    compare a type with it by identity (``type(u) is np.ndarray``, which no stand-in passes:
    then NumPy's own stays)."""
    return _uses(code, "ndarray")


def _uses(code, name):
    """``(calls, compares)``: whether ``code`` (or a function defined in it) calls the name
    ``name`` (``np.ndarray((n,))``, ``np.float64(x[0])``), and whether it may compare a type
    with it by identity (``type(u) is np.float64``, which no stand-in passes). Read from the
    bytecode: a name loaded to be called (a method load, or a load that pushes the NULL of a
    call), and, for want of a proof, any ``is`` in code that loads it otherwise."""
    uses = _NAME_USES.get((code, name))
    if uses is None:
        calls = compares = False
        for c in _codes(code):
            instructions = list(dis.get_instructions(c))
            called = [_loaded_to_call(instructions, k) for k, i in enumerate(instructions)
                      if i.argval == name and i.opname.startswith("LOAD_")]
            calls = calls or any(called)
            compares = compares or (not all(called) and any(
                i.opname == "IS_OP" for i in instructions))
        uses = _NAME_USES[code, name] = calls, compares
    return uses


_NAME_USES = {}  # (code, name) -> (calls it, may compare it by identity)
# (code, type) -> whether it reads the builtin type other than to show or call what it gives
# (``_compares_with_float``)


def _keeps_builtin(code, name):
    """Whether ``code`` (or a function defined in it) needs Python's own builtin ``name``
    rather than the mode's (``PYTHON_BUILTINS``): ``float`` or ``complex`` where it may compare
    a type with it (``_compares_with_float``); ``type`` where it loads it for anything but a
    call (``isinstance(c, type)``, ``class Meta(type)``, ``t = type``), which the mode's, a
    function, cannot pass for."""
    if name != "type":
        return _compares_with_float(code, name)
    return _loads_type(code, "type loaded", lambda instructions, k, c: _loaded_to_call(
        instructions, k))


def _compares_with_float(code, name="float"):
    """Whether ``code`` (or a function defined in it) may compare a type with ``name``
    (``float``, ``complex``) where
    the mode's float, standing for Python's, cannot pass: by identity (``_uses``), or a type
    that Python's ``type`` gave (``type(v) == float``, ``issubclass(type(v), float)``,
    ``type(v).__name__ == "float"``), which of the value standing for a Python float is mutad's
    class; a read of ``type`` whose result is only shown or called (``_type_only_shown``)
    compares nothing."""
    if _uses(code, name)[1]:
        return True
    return _loads_type(code, type, lambda instructions, k, c: _type_only_shown(
        instructions, k, c.co_name))


def _loads_type(code, key, harmless):
    """Whether ``code`` (or a function defined in it) loads the builtin ``type`` where
    ``harmless(instructions, k, code)`` does not clear the load at instruction ``k``; kept in
    ``_NAME_USES`` under ``(code, key)``."""
    loads = _NAME_USES.get((code, key))
    if loads is None:
        loads = False
        for c in _codes(code):
            instructions = list(dis.get_instructions(c))
            loads = loads or any(
                i.argval == "type" and i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
                and not harmless(instructions, k, c) for k, i in enumerate(instructions))
        _NAME_USES[code, key] = loads
    return loads


# Callees a type, or its name, may be handed to without being compared: shown to a person,
# or made text (a comparison of which is followed further: ``str(type(v)) == ...``).
_SHOWING_CALLEES = {"print", "write", "debug", "info", "warning", "warn", "error", "exception",
                    "critical", "log"}
_TEXT_CALLEES = {"repr", "str", "format", "join"}
_NAME_ATTRIBUTES = ("__name__", "__qualname__", "__module__")
_FORMATTING = ("FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE")


def _type_only_shown(instructions, k, code_name):
    """Whether the builtin ``type`` that instruction ``k`` loads is called, and what it gives
    (or its ``__name__``, or text made of them) is only called (``type(x)(y)``), shown (handed
    to print, a logger's or an exception's call, returned by ``__repr__``) or dropped: no
    comparison with a type can come of it. Read by following the values on the stack through
    the straight code after the load; anything else (a comparison, a store, a jump, an
    instruction not known here) is taken as a possible comparison."""
    start = k  # the start of its line: the callee it is handed to (print) is loaded there
    while start and getattr(instructions[start], "starts_line", None) in (None, False):
        start -= 1
    stack = []  # what each value pushed since ``start`` is: a label, or None for another
    watched = {"type", "the type", "its name", "text"}
    seen = False  # the load of type
    for i in instructions[start:start + 64]:
        seen = seen or i is instructions[k]
        name, argrepr = i.opname, i.argrepr or ""
        popped = None
        if name in ("PRECALL", "KW_NAMES", "NOP", "CACHE", "EXTENDED_ARG"):
            continue
        if name == "PUSH_NULL":
            pops, pushed = 0, ["null"]
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):
            pops = 1
            if stack[-1:] in (["the type"], ["its name"]) and i.argval in _NAME_ATTRIBUTES:
                pushed = ["its name"]
            elif stack[-1:] and stack[-1] in watched:
                return False  # another attribute of the type (__mro__, __eq__)
            else:
                method = name == "LOAD_METHOD" or "NULL" in argrepr
                pushed = [("callee", i.argval)] + ([None] if method else [])
        elif name.startswith("LOAD_") and name not in ("LOAD_SUPER_ATTR", "LOAD_BUILD_CLASS"):
            loaded = ("type" if i is instructions[k] else ("callee", i.argval)
                      if name in ("LOAD_GLOBAL", "LOAD_NAME") else None)
            pops = 0
            pushed = ([loaded] if dis.stack_effect(i.opcode, i.arg, jump=False) == 1
                      else ["null", loaded] if argrepr.startswith("NULL") else [loaded, "null"])
        elif name in ("CALL", "CALL_METHOD", "CALL_FUNCTION"):
            pops = i.arg + (1 if name == "CALL_FUNCTION" else 2)
            called = stack[len(stack) - pops:] if pops <= len(stack) else [None] * 2
            callee, arguments = ((called[0], called[1:]) if name == "CALL_FUNCTION"
                                 or "null" not in called[:2] else
                                 (called[1] if called[0] == "null" else called[0], called[2:]))
            named = callee[1] if isinstance(callee, tuple) else None
            texts = named in _TEXT_CALLEES or _exception(named)  # (an exception: raised)
            given = watched.intersection(arguments)
            popped = given and not (texts or named in _SHOWING_CALLEES) or callee in (
                "its name", "text")
            pushed = ["the type" if callee == "type" else "text" if given and texts else None]
        elif name in _FORMATTING or name in ("BUILD_STRING", "BUILD_TUPLE") or (
                name == "BINARY_OP" and argrepr.strip() in ("%", "+")):
            pops = (2 if name == "FORMAT_WITH_SPEC" or name == "FORMAT_VALUE" and (i.arg or 0)
                    & 0x04 else 1 if name in _FORMATTING else i.arg if name.startswith("BUILD")
                    else 2)
            pushed = ["text" if watched.intersection(stack[len(stack) - pops:]) else None]
        elif name == "POP_TOP" or name == "RETURN_VALUE" and stack[-1:] == ["text"] and (
                code_name in ("__repr__", "__str__")):
            pops, pushed = 1, []
        elif name == "RAISE_VARARGS":
            pops, pushed = i.arg, []
        else:
            return False  # an instruction not followed here
        if pops > len(stack) or popped:
            return False  # what comes from before ``start``, or a watched value not shown
        del stack[len(stack) - pops:]
        stack += pushed
        if seen and not watched.intersection(stack):
            return True
    return False


def _exception(name):
    """Whether ``name`` is one of Python's exception classes (``TypeError(...)``)."""
    value = getattr(builtins, name, None) if type(name) is str else None
    return isinstance(value, type) and issubclass(value, BaseException)


def _loaded_to_call(instructions, k):
    """Whether instruction ``k`` loads a value to be called: a method load, or one that pushes
    the NULL of a call (``NULL + ndarray``), or an attribute of a module loaded so (3.11:
    ``NULL + np`` then ``ndarray``), or a value whose method is called (``np.ndarray.sum``)."""
    here = instructions[k]
    if here.opname == "LOAD_METHOD" or "NULL" in (here.argrepr or ""):
        return True
    after = instructions[k + 1] if k + 1 < len(instructions) else None
    if after is not None and (after.opname == "LOAD_METHOD" or after.opname == "LOAD_ATTR"
                              and "NULL" in (after.argrepr or "")):
        return True  # a method of it called: np.ndarray.__iadd__(u, v)
    before = instructions[k - 1] if k else None
    return (here.opname == "LOAD_ATTR" and before is not None
            and before.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST")
            and "NULL" in (before.argrepr or ""))


def _replacements():
    """NumPy's functions and mutad's for the mode, by name."""
    table = {}
    for names, make in ((FACTORIES, factory), (INDEX_MAKERS, factory), (LOADERS, loader),
                        (BUILDERS, builder), (READERS, reader), (JOINERS, joiner),
                        (SAVERS, lambda func: _named(saving(func), func))):
        for name in names:
            if "." in name:
                continue  # a submodule's (SUBMODULE_REPLACEMENTS)
            func = getattr(np, name, None)
            if func is not None:
                table[name] = (func, make(func))
    table.update(JOINED)
    table.update(ITERATORS)
    table.update(QUERIES)
    table.update(DIGITS)
    table["asmatrix"] = (np.asmatrix, _named(_asmatrix, np.asmatrix))
    table["bmat"] = (np.bmat, _named(_bmat, np.bmat))
    table["from_dlpack"] = (np.from_dlpack, _named(_from_dlpack, np.from_dlpack))
    table.update({name: entry[:2] for name, entry in CHECKED.items()})
    table.update(UFUNCS)
    return table


def _from_dlpack(x, /, *, device=None, copy=None):
    """``np.from_dlpack`` in the mode: of an array mutad follows (one the function made, a
    traced one), NumPy's array over the same memory, its view (its copy where ``copy=True``),
    NumPy's checks of ``device`` and ``copy`` made on an empty array of its dtype; of anything
    else NumPy's."""
    if not wrapped(x):
        return np.from_dlpack(x, device=device, copy=copy)
    np.from_dlpack(np.empty(0, x.dtype), device=device, copy=copy)  # (NumPy's errors)
    return x.copy() if copy else x.view()


ITERATORS = {"nditer": (np.nditer, _named(_nditer, np.nditer)),
             "ndenumerate": (np.ndenumerate, _named(_ndenumerate, np.ndenumerate))}
"""NumPy's iterators, and the mode's."""


def _isscalar(element):
    """``np.isscalar`` of what a traced or dual value stands for: an element ``x[i]``, a
    reduction's result or a float argument stands for NumPy's scalar (or Python's number), of
    which NumPy says True; an array, a 0-d one too, is not one. It depends on how the value was
    made, not on its numbers, so a replayed program's answer is the recorded one."""
    if wrapped(element):
        return stands_for_scalar(element)
    return QUERIES["isscalar"][0](element)  # (NumPy's: a library block binds this one in numpy)


def _asarray_chkfinite(a, dtype=None, order=None):
    """``np.asarray_chkfinite``, which converts with ``np.asarray`` (dispatching on nothing): of a
    traced ``a``, NumPy's check of its values (its error for one not finite), then the mode's
    ``np.asarray`` of it (``a`` itself where it fits); of a stand-in, the stand-in itself where
    NumPy's is the array given (``np.asarray_chkfinite(U0) is U0``)."""
    if type(a) is Preexisting:
        view = _plain_view(a)
        y = _asarray_chkfinite(view, dtype, order)
        return a if y is view else y
    if ACTIVE.running and holds_wrapped(a):
        values = _stacked(a)
        decided = getattr(values, "_decided", None)
        if decided is not None:  # the check is a decision on the values: a replay guards it
            decided(lambda value: _all_finite(value, dtype))
        np.asarray_chkfinite(memory(values), dtype, order)
        return REPLACEMENTS["asarray"][1](a, dtype, order)
    return CHECKED["asarray_chkfinite"][2](a, dtype, order)


def _all_finite(value, dtype):
    """Whether ``np.asarray_chkfinite(value, dtype)`` passes NumPy's check."""
    with np.errstate(all="ignore"):  # (a cast that overflows: NumPy's call warns, once)
        a = np.asarray(memory(value), dtype)  # (an enclosing differentiation's value: its memory)
    return a.dtype.char not in np.typecodes["AllFloat"] or bool(np.isfinite(a).all())


CHECKED = {"asarray_chkfinite": (np.asarray_chkfinite, _named(_asarray_chkfinite,
                                                              np.asarray_chkfinite),
                                 factory(np.asarray_chkfinite))}
"""NumPy's converters that check the values they convert, the mode's, and the factory that
allocates their results from plain values as constants."""


QUERIES = {"isscalar": (np.isscalar, _named(_isscalar, np.isscalar))}
"""NumPy's functions that tell what kind of value they are given, and the mode's."""


def _writing_digits(func):
    """``func`` (``DIGITS``) in the mode: of a traced value, NumPy's digits of the value it
    stands for (its scalar, as ``x[0]`` hands NumPy), a decision a replay guards as it
    guards ``str(x)``'s."""
    def writing(x, *args, **kwargs):
        decided = getattr(x, "_decided", None) if wrapped(x) else None
        if decided is not None:
            return decided(lambda value: func(value, *args, **kwargs))
        return func(x, *args, **kwargs)

    return _named(writing, func)


DIGITS = {name: (getattr(np, name), _writing_digits(getattr(np, name)))
          for name in ("format_float_positional", "format_float_scientific")}
"""NumPy's functions that write a number's digits (dispatching on nothing), and the mode's."""


REPLACEMENTS = _replacements()
_BY_ORIGINAL = {id(func): (func, new) for func, new in REPLACEMENTS.values()}

HANDED_SUBCLASSES: dict[type, Callable[[Any], Any]] = {}
"""For a subclass of ndarray a library's method returns (an spmatrix's ``todense()``, an
``np.matrix``), what stands in for a new one that the user's code alone holds, given the
constant the mode makes of its array: an object that computes as the subclass does and takes
traced values written into it (``scipy.sparse`` registers np.matrix's)."""

SUBCLASS_CALLS: dict[type, Callable[[Any, tuple, dict], Any]] = {}
"""For a subclass of ndarray whose plain arrays (constants: ``np.matrix(A)``) meet traced values
in a NumPy function or ufunc (``np.matrix(A) + np.diag(x)``), what computes ``call(*args,
**kwargs)`` as the subclass does, its results of the subclass where NumPy's are
(``scipy.sparse`` registers np.matrix's)."""

SUBCLASS_LIBRARIES = {np.matrix: "scipy.sparse"}
"""For a subclass of ndarray, the library whose rule module registers its stand-ins
(``HANDED_SUBCLASSES``, ``SUBCLASS_CALLS``): np.matrix's computes beside scipy.sparse's
matrices, whose ``todense()`` gives one (``subclass_rules``)."""


def subclass_rules(kind):
    """Load the rules that register ``kind``'s stand-ins (``SUBCLASS_LIBRARIES``) where no
    rule module has yet: a program of np.matrix that imports no scipy.sparse, as the mode
    loads them for one that imports it in its body."""
    library = SUBCLASS_LIBRARIES.get(kind)
    if library is not None and kind not in HANDED_SUBCLASSES:
        # (the program did not import it: its warning filters, which importing SciPy adds to,
        # stay the program's; SciPy's would silence np.matrix's own warning)
        with warnings.catch_warnings():
            _imported(_IMPORT_MODULE, library)


FOLLOWED_LIBRARY_CODE: list[Callable[[Any, tuple, dict], Any]] = []
"""How a Python function of SciPy's that nothing routes (``_Made``) runs on traced arguments:
SciPy's own code, followed step by step (``scipy`` registers ``following_scipys_code``)."""

COMPILED_OBJECTS: dict[type, Callable[[Any], Any]] = {}
"""For a type of SciPy's compiled objects whose methods take plain arrays only (SuperLU, made
by ``splu`` before the differentiation), what stands in for one the function reaches, and for
its methods (a ``factorized`` solve): an object whose methods follow traced arguments
(``scipy.sparse`` registers SuperLU's)."""


def _submodule_replacements():
    """``{submodule name: {name: (NumPy's function, the mode's)}}`` of ``SUBMODULES``."""
    table = {module: {} for module in SUBMODULES}
    for dotted in READERS:
        module, _, name = dotted.partition(".")
        func = getattr(importlib.import_module("numpy." + module), name, None) if name else None
        if func is not None:
            table[module][name] = (func, reader(func))
    return table


SUBMODULE_REPLACEMENTS = _submodule_replacements()

POLYNOMIAL_READERS = {id(func): (func, reader(func))
                      for func in (np.polyval, *_POLY1D_OF_POLY1D)}
"""The readers a SciPy module binds by name (``from numpy import polyint``) that read a
``np.poly1d`` of traced coefficients (``library_binding``)."""
_BY_ORIGINAL.update({id(func): (func, new) for table in SUBMODULE_REPLACEMENTS.values()
                     for func, new in table.values()})


def _mode_submodule(name):
    """``numpy.<name>`` (``linalg``, ``fft``) as user code sees it in the mode: its functions
    that read lists of traced values as arrays (``READERS``)."""
    original = importlib.import_module("numpy." + name)
    module = types.ModuleType(original.__name__, original.__doc__)
    module.__dict__.update(_mirrored(original, SUBMODULE_REPLACEMENTS[name]))
    return module


MATH = {"sqrt": "sqrt", "exp": "exp", "expm1": "expm1", "log1p": "log1p", "log10": "log10",
        "log2": "log2", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin",
        "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
        "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "fabs": "fabs",
        "cbrt": "cbrt", "exp2": "exp2", "degrees": "degrees", "radians": "radians",
        "atan2": "arctan2", "copysign": "copysign", "fmod": "fmod", "pow": "power",
        "log": "log", "hypot": "hypot", "erf": "special.erf", "erfc": "special.erfc",
        "gamma": "special.gamma", "lgamma": "special.gammaln", "modf": "modf",
        "frexp": "frexp", "ldexp": "ldexp"}
"""Python's ``math`` functions of floats and the NumPy ufuncs (or ``scipy.special``'s) that
compute them on arrays: in the mode, one of a traced scalar is that ufunc, its value put right
to ``math``'s where the two round differently."""


def _ufunc_of(name):
    library, _, attribute = MATH[name].rpartition(".")
    if library:
        return getattr(importlib.import_module("scipy." + library), attribute)
    return getattr(np, attribute)


def math_function(original):
    """``math.<name>`` following traced scalars (``math.sqrt(a[k, k] - s)``) through its
    ufunc, with ``math``'s own value (``put_value``)."""
    name = original.__name__

    def following(*args):
        if not (ACTIVE.running and any(wrapped(a) for a in args)):
            return original(*args)
        if any(wrapped(a) and a.size != 1 for a in args):
            return original(*args)  # math's own error (a conversion of an array)
        if any(wrapped(a) and a.dtype.kind == "c" for a in args):
            # math takes a complex scalar's float(), its real part, as NumPy gives it, warning
            warnings.warn("Casting complex values to real discards the imaginary part",
                          np.exceptions.ComplexWarning, stacklevel=2)
            args = [np.real(a) if wrapped(a) and a.dtype.kind == "c" else a for a in args]
        # math computes with Python floats, whatever the precision of its operands, and gives
        # one: a value that NumPy promotes weakly (``x32 * math.exp(a)`` is float32)
        args = [a.astype(np.float64) if wrapped(a) and a.dtype.kind == "f"
                and a.dtype != np.float64 else a for a in args]
        # math's value first: its error (a domain error, an overflow) is raised before any
        # NumPy loop, and math raises no floating-point event, where the ufunc computing it
        # warns or raises (math.exp(1000.0), math.atan2(0.0, -0.0)'s partials aside)
        value = _math_value(original, as_floats(args), args)
        return pythons_numbers(without_events(_as_ufuncs, name, args), value, original, args)

    return _named(following, original)


def _as_ufuncs(name, args):
    """``math.<name>(*args)`` of traced scalars computed by NumPy's ufuncs (``MATH``)."""
    if name == "log" and len(args) == 2:  # log(x, base)
        return np.log(args[0]) / np.log(args[1])
    if name == "hypot" and len(args) != 2:
        return np.sqrt(sum(a * a for a in args))
    return _ufunc_of(name)(*args)


def pythons_numbers(results, exact, original, args):
    """The traced ``results`` (one, or a tuple: ``math.modf``'s) of ``original(*args)`` of
    Python's ``math`` or ``cmath`` as the numbers it gives: each with its own value from
    ``exact``, ``original``'s (``put_value``, which a replay puts too), a Python float or
    complex (``weaken``), a value of its own, so that what the ufunc's record keeps of its
    output stays the array the value was put into; an integer (``math.frexp``'s exponent)
    Python's, a decision a replay guards."""
    single = type(results) is not tuple
    numbers = []
    for i, (y, value) in enumerate(zip((results,) if single else results,
                                       (exact,) if single else exact)):
        if type(value) is int:
            numbers.append(operator.index(y))
            continue
        put_value(y, value)
        recorder = getattr(getattr(y, "tape", None), "recorder", None)
        if recorder is not None and recorder.ready:  # a replay puts the value too
            recorder.put_value(y, original if single else _component(original, i), args)
        y = np.positive(y)
        weaken(y)
        numbers.append(y)
    return numbers[0] if single else tuple(numbers)


def _math_value(original, numbers, args):
    """``original(*numbers)``, math's own value of the traced ``args``. Its error (a domain
    error, fsum's overflow), which f may catch and go on, is a decision a replay cannot guard:
    the recording that meets it is told so (``Recorder.raised``)."""
    try:
        return original(*numbers)
    except Exception as error:
        for x in args:
            recorder = getattr(getattr(x, "tape", None), "recorder", None)
            if recorder is not None:
                recorder.raised(error)
                break
        raise


def _math_of_floats(original, split):
    """``original`` (``math.fsum``, ``dist``, ``sumprod``) of the floats ``xs``, its sequences
    the first ``split`` and the others (a replay calls it on its values, as ``put_value``)."""
    def of_floats(*xs):
        return original(xs) if split is None else original(xs[:split], xs[split:])

    of_floats.__name__ = original.__name__
    return of_floats


def _of_sequences(name, sequences):
    """``math.<name>`` (``fsum``, ``dist``, ``sumprod``) of ``sequences`` holding traced real
    scalars, computed by NumPy's functions (``math_of_sequences``)."""
    stacked = [np.stack([x.reshape(()).astype(np.float64) if wrapped(x)
                         else np.float64(x) for x in sequence]) for sequence in sequences]
    if name == "fsum":
        return np.sum(stacked[0])
    if name == "dist":
        difference = stacked[0] - stacked[1]
        return np.sqrt(np.sum(difference * difference))
    return np.sum(stacked[0] * stacked[1])


def math_of_sequences(original):
    """``math.fsum``, ``math.dist`` and ``math.sumprod`` of sequences holding traced real
    scalars (``math.fsum(x * w)``, ``math.dist(p, q)``): NumPy's sum (of the squared
    differences, of the products) of their elements, followed, with ``math``'s own value
    (``put_value``: fsum rounds once); a Python float, as ``math_function`` gives. Anything
    else is ``math``'s call (its errors, its conversions)."""
    name = original.__name__

    def following(*args):
        if not ACTIVE.running:
            return original(*args)
        try:
            sequences = [list(a) for a in args]  # read once, as math reads them (generators)
        except TypeError:  # not iterable: math's error
            return original(*args)
        items = [x for sequence in sequences for x in sequence]
        if not any(wrapped(x) for x in items) or any(
                wrapped(x) and (x.size != 1 or x.dtype.kind != "f") for x in items):
            return original(*sequences)  # math's conversion: refused, or math's error
        exact = _math_value(original, [[memory(x).reshape(()) if wrapped(x) else x
                                        for x in sequence] for sequence in sequences], items)
        y = without_events(_of_sequences, name, sequences)  # (math raises no event)
        put_value(y, exact)
        recorder = getattr(getattr(y, "tape", None), "recorder", None)
        if recorder is not None and recorder.ready:  # a replay puts math's value too
            recorder.put_value(y, _math_of_floats(
                original, None if len(sequences) == 1 else len(sequences[0])), items)
        y = np.positive(y)  # a Python float: a value of its own (see math_function)
        weaken(y)
        return y

    return _named(following, original)


def math_predicate(original, ufunc):
    """``math.isfinite``, ``isnan``, ``isinf`` of a traced scalar: the answer of NumPy's
    ``ufunc`` on it, a decision the program takes as it takes ``x > 0`` (a replay checks it
    again)."""
    def deciding(x):
        if ACTIVE.running and wrapped(x) and x.size == 1:
            return bool(ufunc(x.reshape(())))
        return original(x)

    return _named(deciding, original)


def math_isclose(original):
    """``math.isclose`` of traced scalars: CPython's steps on them (equal, else neither
    infinite and the difference within the tolerances, each compared as ``math`` compares it),
    NumPy's comparisons of the same doubles, so the same answer; a decision the program takes
    as it takes ``x > 0`` (a replay checks it again). Its tolerances stay plain numbers."""
    def deciding(a, b, *, rel_tol=1e-09, abs_tol=0.0):
        traced = [wrapped(v) for v in (a, b)]
        if not (ACTIVE.running and any(traced)) or any(
                wrapped(v) for v in (rel_tol, abs_tol)) or any(
                t and (v.size != 1 or v.dtype.kind != "f") for t, v in zip(traced, (a, b))):
            return original(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
        rel_tol, abs_tol = float(rel_tol), float(abs_tol)
        if rel_tol < 0.0 or abs_tol < 0.0:
            raise ValueError("tolerances must be non-negative")
        a, b = (v.reshape(()).astype(np.float64) if t else np.float64(float(v))
                for t, v in zip(traced, (a, b)))  # math compares doubles
        if bool(a == b):
            return True
        if bool(np.isinf(a) | np.isinf(b)):
            return False
        diff = np.abs(b - a)
        return bool((diff <= np.abs(rel_tol * b)) | (diff <= np.abs(rel_tol * a))
                    | (diff <= abs_tol))

    return _named(deciding, original)


CMATH = {"sqrt": "sqrt", "exp": "exp", "log10": "log10", "sin": "sin", "cos": "cos",
         "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan", "sinh": "sinh",
         "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh", "acosh": "arccosh",
         "atanh": "arctanh", "log": "log", "phase": "angle"}
"""Python's ``cmath`` functions of complex numbers and the NumPy functions that compute them on
arrays (``polar`` and ``rect`` are theirs composed): in the mode, one of a traced scalar is
that function of it as a complex number, its value put right to ``cmath``'s."""


def _cmath_formula(name):
    if name == "polar":
        return lambda z: (np.abs(z), np.angle(z))
    if name == "rect":
        return lambda r, phi: r * np.cos(phi) + 1j * (r * np.sin(phi))
    if name == "log":
        return lambda z, *base: np.log(z) / np.log(base[0]) if base else np.log(z)
    return getattr(np, CMATH[name])


def cmath_function(original):
    """``cmath.<name>`` following traced real or complex scalars (``cmath.exp(1j * t)``):
    NumPy's function of them as complex numbers (``rect(r, phi)``: of reals), ``cmath``'s own
    value put in its place (``put_value``), a Python number as ``cmath`` gives (a complex, or
    the floats of ``phase`` and ``polar``). Anything else is ``cmath``'s call (its errors, its
    conversions)."""
    name, formula = original.__name__, _cmath_formula(original.__name__)

    def following(*args):
        if not (ACTIVE.running and any(wrapped(a) for a in args)) or any(
                wrapped(a) and (a.size != 1 or a.dtype.kind not in "fc") for a in args):
            return original(*args)
        exact = _math_value(original, as_numbers(args), args)
        kind = np.float64 if name == "rect" else np.complex128
        # cmath, like math, raises no floating-point event (``cmath.sin(nan + 1e308j)``)
        results = without_events(formula, *[a.reshape(()).astype(kind) if wrapped(a)
                                            else kind(a) for a in args])
        return pythons_numbers(results, exact, original, args)

    return _named(following, original)


def _component(original, i):
    """Item ``i`` of ``original``'s result (a replay's value of one of ``cmath.polar``'s)."""
    def component(*xs):
        return original(*xs)[i]

    component.__name__ = original.__name__
    return component


def _sample_variance(d, centre, n):
    return np.sum((d - centre) * (d - centre)) / n


def _deviations(x, y):
    return x - np.mean(x), y - np.mean(y)


def _covariance(x, y):
    dx, dy = _deviations(x, y)
    return np.sum(dx * dy) / (x.size - 1)


def _correlation(x, y, method="linear"):
    dx, dy = _deviations(x, y)
    return np.sum(dx * dy) / np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))


def _linear_regression(x, y, *, proportional=False):
    if proportional:
        return np.sum(x * y) / np.sum(x * x), 0.0
    dx, dy = _deviations(x, y)
    slope = np.sum(dx * dy) / np.sum(dx * dx)
    return slope, np.mean(y) - slope * np.mean(x)


# fmt: off
STATISTICS = {
    # name            its formula of the stacked data (and weights), in NumPy's functions
    "mean":           lambda data: np.mean(data),
    "fmean":          lambda data, weights=None: np.mean(data) if weights is None
                      else np.sum(data * weights) / np.sum(weights),
    "geometric_mean": lambda data: np.exp(np.mean(np.log(data))),
    "harmonic_mean":  lambda data, weights=None: data.size / np.sum(1.0 / data)
                      if weights is None else np.sum(weights) / np.sum(weights / data),
    "median":         lambda data: np.median(data),
    "median_low":     lambda data: np.sort(data)[(data.size - 1) // 2],
    "median_high":    lambda data: np.sort(data)[data.size // 2],
    "pvariance":      lambda data, mu=None: _sample_variance(
                      data, np.mean(data) if mu is None else mu, data.size),
    "variance":       lambda data, xbar=None: _sample_variance(
                      data, np.mean(data) if xbar is None else xbar, data.size - 1),
    "pstdev":         lambda data, mu=None: np.sqrt(_sample_variance(
                      data, np.mean(data) if mu is None else mu, data.size)),
    "stdev":          lambda data, xbar=None: np.sqrt(_sample_variance(
                      data, np.mean(data) if xbar is None else xbar, data.size - 1)),
    "covariance":     _covariance,
    "correlation":    _correlation,
    "linear_regression": _linear_regression,
}
# fmt: on
"""Python's ``statistics`` functions of real numbers and their formulas in NumPy's functions:
in the mode, one of data holding traced floats (``statistics.pstdev(x)``) is its formula of
them, ``statistics``' own value put in its place (``put_value``: it sums exactly)."""

_DATA = ("data", "x", "y", "weights")
"""The parameters of ``statistics``' functions that take sequences of numbers."""


def statistics_function(original):
    """``statistics.<name>`` following data (and weights, ``mu``, ``xbar``) holding traced
    float64 scalars: its formula (``STATISTICS``) of them, with ``statistics``' own value of
    their numbers (NumPy's float64 where the data are, as ``statistics`` gives its type back;
    its errors: too few points, a negative one of a geometric mean). Anything else (a
    correlation of ranks, Fractions) is ``statistics``' call (its conversions, refused)."""
    formula, signature = STATISTICS[original.__name__], inspect.signature(original)

    def following(*args, **kwargs):
        if not ACTIVE.running:
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            arguments = {key: list(value) if key in _DATA and value is not None else value
                         for key, value in bound.arguments.items()}
        except TypeError:  # statistics' own error
            return original(*args, **kwargs)
        items = [x for key, value in arguments.items()
                 for x in (value if key in _DATA and value is not None else [value])]
        if not any(wrapped(x) for x in items) or any(
                wrapped(x) and (x.size != 1 or x.dtype != np.float64) for x in items) or any(
                not wrapped(x) and not isinstance(x, (int, float, np.integer, np.floating,
                                                      str, type(None)))
                for x in items) or arguments.get("method", "linear") != "linear":
            return original(*args, **kwargs)  # statistics' own: its conversion refused
        exact = _math_value(_statistics_of(original, signature, arguments, None),
                            as_numbers(items), items)
        results = formula(**{key: np.stack([x.reshape(()) if wrapped(x) else np.float64(x)
                                            for x in value])
                             if key in _DATA and value is not None else value
                             for key, value in arguments.items()})
        single = type(results) is not tuple
        results = (results,) if single else results
        followed = []
        for i, (y, value) in enumerate(zip(results, (exact,) if single else exact)):
            if not wrapped(y):  # (a proportional regression's intercept)
                followed.append(value)
                continue
            put_value(y, value)
            recorder = getattr(getattr(y, "tape", None), "recorder", None)
            if recorder is not None and recorder.ready:  # a replay puts statistics' too
                recorder.put_value(y, _statistics_of(
                    original, signature, arguments, None if single else i), items)
            y = np.positive(y)  # a number of its own (see math_function)
            if type(value) is float:  # a Python float, not NumPy's float64
                weaken(y)
            followed.append(y)
        return followed[0] if single else type(exact)(*followed)

    return _named(following, original)


def _statistics_of(original, signature, arguments, index):
    """``original`` of the numbers of the call's items, flattened as ``statistics_function``
    lists them: its result, or its item ``index`` (of ``linear_regression``'s pair)."""
    shape = [(key, len(value) if key in _DATA and value is not None else None)
             for key, value in arguments.items()]

    def of_numbers(*xs):
        call = {}
        for key, length in shape:
            if length is None:
                call[key], xs = xs[0], xs[1:]
            else:
                call[key], xs = list(xs[:length]), xs[length:]
        call = inspect.BoundArguments(signature, call)  # (x and y: positional only)
        result = original(*call.args, **call.kwargs)
        return result if index is None else result[index]

    of_numbers.__name__ = original.__name__
    return of_numbers


def as_floats(args):
    """The Python numbers of NumPy's or traced 0-d ``args``: floats, complex numbers, integers
    (``math.ldexp``'s exponent) as their kinds."""
    return [_PYTHONS.get(np.asarray(memory(a)).dtype.kind, float)(memory(a).reshape(()))
            if wrapped(a) or isinstance(a, (np.ndarray, np.generic)) else a for a in args]


_PYTHONS = {"c": complex, "i": int, "u": int}


def as_numbers(args):
    """The NumPy scalars the traced 0-d ``args`` hold (as plain code hands ``x[0]`` on)."""
    return [memory(a).reshape(())[()] if wrapped(a) else a for a in args]


def put_value(result, exact):
    """Give the 0-d traced or dual ``result`` the value ``exact`` where its bits differ (the
    last bit of another rounding, the sign of a zero): the record and the partials stand, as
    computed from the operands."""
    value = memory(result)
    exact = np.asarray(exact, value.dtype)
    if value.ndim == 0 and exact.tobytes() != value.tobytes():
        writeable = value.flags.writeable
        value.flags.writeable = True
        value[()] = exact
        value.flags.writeable = writeable


class Preexisting(np.ndarray):
    """What stands in, in the mode, for a float array (or one of ``SELF_STANDING``'s kinds, whose
    memory is never adopted: it holds no traced value) that existed before the differentiation
    started and that the differentiated code reaches (a module-level initial condition ``U0``,
    a closure's or a default's array): a view of its memory, so that the arrays the code makes
    from it are followed like those NumPy's factories make (``u = U0.copy()``, ``U0 + 0.0``,
    ``U0[1:] * 2``, ``np.roll(U0, 1)``), however they are made. ndarray's methods and
    operators give ndarrays, so NumPy has no hook for them: the methods that make an array
    are overridden here, and the operators and functions reach NumPy's protocols.

    Its own memory is plain until the function writes into it: views of it stand in too
    (``U0[1:].copy()``), and a write into one (``U0[1:] *= D``) adopts the memory
    (``adopted``), after which the stand-ins of it are the running differentiation's array for
    it to every operation. In another thread, and outside the mode, it behaves as the ndarray
    it views; ``mutad``'s engines receive that plain view (or the adopted array), never the
    stand-in.
    """

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not kwargs and method == "__call__" and len(inputs) == 2:  # (``READ_BESIDE``)
            beside = READ_BESIDE.get(type(inputs[1] if inputs[0] is self else inputs[0]))
            if beside is not None:
                y = beside(ufunc, inputs)
                if y is not None:
                    return y
        out = kwargs.get("out")
        if ACTIVE.running:
            written = (inputs[0],) if method == "at" else out or ()
            accessed(inputs, kwargs.get("where"), written=written)
            adopt(written)
        # (operands it only reads: the one plain view of each that the engines read, as the
        # operators' ``x * U0`` reads it, so that a loop's records keep one array, not a new
        # view on every step, each checked and protected afresh)
        inputs = _plain_views(inputs) if method == "at" else _read_views(inputs)
        if ACTIVE.running:  # U0 + [a, b]: the list of traced values an array beside U0's view
            inputs = lists_as_arrays(inputs)
        kwargs = _plain_views(kwargs)  # out=, where= (a mask f made from np.arange)
        call = getattr(ufunc, method)
        y = call(*inputs, **kwargs)
        if out is not None:  # NumPy's own: the out= array itself
            return out[0] if len(out) == 1 else tuple(out)
        return made_in(y, call, inputs, kwargs, _caller(sys._getframe(1)))

    def __array_function__(self, func, types, args, kwargs):
        if ACTIVE.running:
            written = (*(args[:1] if func in WRITE_FIRST else ()), kwargs.get("out"))
            accessed(args, kwargs, written=written)
            adopt(written)
        given = [*args, *kwargs.values()]
        args, kwargs = _plain_views(args), _plain_views(kwargs)
        composite = RULES.get(func, NO_RULE).composite
        if composite is not None and ACTIVE.running and holds_wrapped(
                [list(args), list(kwargs.values())]):
            # traced values where NumPy does not dispatch (np.histogram's range=): mutad's
            # composition, which follows them, not NumPy's own code computing with them
            y = composite(*args, **kwargs)
            if y is not NotImplemented:  # (np.pad's copying modes: its rule's, after NumPy)
                return y
        y = func(*args, **kwargs)
        # NumPy's result, or an item of it, that is an argument itself (np.atleast_1d(U0) is
        # U0, np.atleast_1d(U0, U0)'s both; np.fix(L, out=O) is O): the stand-in, as it was
        # given, so that the caller's tests of identity hold
        stand_ins = {id(view): stand_in for view, stand_in
                     in zip(_flat_operands([*args, *kwargs.values()]), _flat_operands(given))
                     if type(stand_in) is Preexisting}
        if id(y) in stand_ins:
            return stand_ins[id(y)]
        if _sequence(y) and any(id(item) in stand_ins for item in y):
            return _like(y, [stand_ins[id(item)] if id(item) in stand_ins
                             else made_in(item, functools.partial(_item, func, i), args, kwargs,
                                          _caller(sys._getframe(1)))
                             for i, item in enumerate(y)])
        return made_in(y, func, args, kwargs, _caller(sys._getframe(1)))

    def __repr__(self):
        return repr(_plain_views(self))

    def _reshape_in_place(self, shape):
        """``U0.shape = ...``: the array it stands for is reshaped too, as NumPy's would be, and
        the differentiation's array for it where a write adopted its memory."""
        level = adopted(self)
        if level is not None:
            level.shape = shape
        original = self.__dict__.get("original")
        if original is not None:
            for differentiation in ACTIVE.running:  # its shape before, if f raises
                adopter = getattr(differentiation, "adopter", None)
                if adopter is not None:
                    adopter.reshaped.setdefault(id(original), (original, original.shape))
            original.shape = shape
        np.ndarray.shape.__set__(self, shape)

    shape = property(np.ndarray.shape.__get__, _reshape_in_place, doc="The array's shape.")

    @property
    def base(self):
        """As NumPy's ``base`` of the array this one stands for (a stand-in is made as a view
        of it): None for one that owns its memory, else the array owning its memory, through
        the plain views the stand-ins' methods make (a stand-in where one owns it: ``i[::2].base
        is i``); for a view NumPy made of a stand-in itself (``np.ndarray.__getitem__(U0, k)``,
        a method the stand-in does not override), that stand-in, so that ``views.owner`` finds
        the one owner of the memory through it."""
        viewed = np.ndarray.base.__get__(self)
        if viewed is None or type(viewed) is Preexisting:
            return viewed
        base = viewed.base
        while type(base) is np.ndarray and not base.flags.owndata \
                and isinstance(base.base, np.ndarray):
            base = base.base
        # the owner as the code names it: its stand-in where it has one in the mode
        # (np.atleast_2d(U0).base is U0)
        stand_in = MODE.array_stand_ins.get(id(base)) if _in_mode() else None
        return stand_in if stand_in is not None and stand_in.original is base else base

    def __reduce__(self):  # pickled as the ndarray it stands for (loadable without mutad)
        return _pickled(self).__reduce__()

    def __reduce_ex__(self, protocol):  # (protocol 5: its memory out of band, as NumPy's)
        return _pickled(self).__reduce_ex__(protocol)


def _flat_operands(operands):
    """``operands`` with the items of the tuples and lists among them (``out=(O,)``,
    ``np.atleast_1d(U0, U0)``'s) in their place, in order."""
    return [item for x in operands
            for item in (x if type(x) in (tuple, list) else (x,))]


def _view_attribute(name):
    """ndarray's attribute ``name``, a view of the array (``T``, ``mT``, ``real``, ``imag``,
    ``flat``): on a stand-in whose memory a write adopted, the differentiation's array's, whose
    reads and writes it follows; else NumPy's view of the plain array, a stand-in too (made
    from the stand-in itself, its ``base`` would end the chain at the stand-in, not at the
    memory's owner, and a write into it would adopt other memory)."""
    attribute = getattr(np.ndarray, name)

    def viewing(self):
        level = adopted(self)
        if level is not None:
            return getattr(level, name)
        plain = plain_memory(self)
        y = attribute.__get__(plain)
        if type(y) is np.flatiter:
            return _Flat(self, y)
        return self if y is plain else y.view(Preexisting)

    def setting(self, value):
        # (``U0.flat = x``, ``U0.real = x``, ``Z0.imag = x``: NumPy's write through that view,
        # which adopts the memory as any other write does; a real array's imaginary part
        # raises NumPy's error)
        if name == "imag" and self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        viewing(self)[...] = value

    return property(viewing, setting if name in _WRITABLE_VIEWS else None)


_WRITABLE_VIEWS = ("real", "imag", "flat")
"""The attributes of ndarray's views that NumPy lets a program assign (``a.flat = x``)."""


class _Flat:
    """``U0.flat`` of a stand-in whose memory no write adopted: NumPy's flatiter of the plain
    array, whose reads are constants until a write through it (``U0.flat[:] = x``) or another
    adopts the memory; from then on its reads and writes are the differentiation's array's."""

    def __init__(self, stand_in, plain):
        self._stand_in, self._plain = stand_in, plain

    def _flat(self, write=False):
        if ACTIVE.running:
            accessed(self._stand_in, written=self._stand_in if write else ())
            level = adopted(self._stand_in, write=write)
            if level is not None:
                return level.flat
        return self._plain

    def __getitem__(self, key):
        return self._flat()[_plain_views(key)]

    def __setitem__(self, key, value):
        self._flat(write=True)[_plain_views(key)] = _plain_views(value)

    def __iter__(self):
        return iter(self._flat())

    def __len__(self):
        return len(self._plain)

    def __array__(self, dtype=None, copy=None):  # (of an adopted memory: a conversion refused)
        return self._flat().__array__(dtype, copy=copy)

    def __getattr__(self, name):  # base, coords, index, copy: the flatiter's
        return getattr(self._flat(), name)


for _name in ("T", "mT", "real", "imag", "flat"):
    setattr(Preexisting, _name, _view_attribute(_name))


def _pickled(stand_in):
    """What pickling ``stand_in`` pickles: the array a write adopted (whose pickling, as a
    traced array's, refuses to cut its derivative), else the plain array it stands for."""
    level = adopted(stand_in)
    return plain_memory(stand_in) if level is None else level


def _holds_adopted(tree):
    """Whether ``tree`` (lists, tuples and dicts of it) holds the stand-in of an array made
    before whose memory a write adopted."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return any(_holds_adopted(x) for x in tree)
    if kind is dict:
        return any(_holds_adopted(x) for x in tree.values())
    return kind is Preexisting and adopted(tree) is not None


def plain_memory(stand_in):
    """The plain ndarray viewing the memory ``stand_in`` (a ``Preexisting``) stands for, which
    mutad's own code reads and writes: ``ndarray.view``'s, not the stand-in's (``_view``)."""
    return np.ndarray.view(stand_in, np.ndarray)


def _view(self, *args, **kwargs):
    """``U0.view()``, ``U0.view(dtype)``, ``U0.view(np.ndarray)``: on a stand-in whose memory
    a write adopted, the differentiation's array's view; otherwise NumPy's view of the plain
    array, a stand-in too (``_viewing``); the user's code sees no other type for it than
    ndarray. ``U0.view(np.recarray)``, another subclass: ndarray's."""
    kind = kwargs.pop("type", None)
    if args and isinstance(args[0], type) and issubclass(args[0], (np.ndarray, ndarray)):
        kind, args = args[0], args[1:]
    if isinstance(kind, _Constructor):  # (the mode's np.ndarray, as the user's code names it)
        kind = np.ndarray
    level = adopted(self)
    if level is not None:  # (as another subclass too, np.asmatrix(U0): refused there)
        return level.view(*args, **kwargs) if kind in (None, np.ndarray) else \
            level.view(*args, type=kind, **kwargs)
    if kind is not None and kind is not np.ndarray:
        return np.ndarray.view(self, *args, type=kind, **kwargs)
    return np.ndarray.view(plain_memory(self), *args, **kwargs).view(Preexisting)


Preexisting.view = _named(_view, np.ndarray.view)  # type: ignore[method-assign]


def _array(self, dtype=None, copy=None):
    """``U0.__array__()``: the stand-in itself, as NumPy's is the array itself (ndarray's would
    be a plain view of the memory, read as a constant), which the differentiation follows; of
    another dtype, or a copy, NumPy's (NumPy calls no ``__array__`` of an ndarray's subclass
    to convert it)."""
    if ACTIVE.running and copy is not True and (dtype is None or np.dtype(dtype) == self.dtype):
        return self
    return np.ndarray.__array__(plain_memory(self), dtype, copy=copy)


Preexisting.__array__ = _named(_array, np.ndarray.__array__)  # type: ignore[method-assign]


PLAIN_ACCESS: list[Callable[[np.ndarray, bool], None]] = []
"""The engines' checks of the memory a stand-in views when user code reads or writes it by
NumPy alone (the engines see no such operation: no traced value is among its operands), each
``check(view, written)``: it refuses an array sharing memory with an argument a running
differentiation traces, whose read after the function wrote into the argument would miss the
derivative through that write, and whose write would change the argument behind the
differentiation's back (``reverse.check_alias``, ``forward._check_alias``)."""

READ_BESIDE: dict[type, Callable[[np.ufunc, tuple], Any]] = {}
"""The engines' short paths of ``ufunc(a, b)``, without keywords, where one operand is a
stand-in and the other an array of the engine's type (the key): ``x * U0``, ``U0 * x``, a
global read on every step of a loop. Each gives what ``Preexisting.__array_ufunc__`` would, in
fewer steps, or None where it is not its common case: the general path follows."""

WRITE_FIRST = frozenset((np.copyto, np.putmask, np.place, np.put, np.fill_diagonal,
                         np.put_along_axis))
"""NumPy functions that write into their first argument."""


def adopted(stand_in, write=False):
    """What the stand-in ``stand_in`` (of a float array) is to the differentiations running in
    this thread once the function wrote into its memory: the array of the innermost one that
    adopted it (``session.Differentiation.adopt``), which its reads and writes go to from then
    on; with ``write`` (the function writes into it now), the innermost one's, adopted now.
    None for a stand-in whose memory none adopted: the plain array it views is read as a
    constant."""
    running = ACTIVE.running
    if not running:
        if ACTIVE.suspended and follows_floats(stand_in.dtype):
            _adopted_apart(stand_in)
        return None
    if not follows_floats(stand_in.dtype):
        return None
    plain = plain_memory(stand_in)
    base = owner(plain)
    if write and len(running) > 1 and base.dtype.names is not None:  # (records, or a field)
        raise _nested_records("made before and written")
    if write and _read_elsewhere(base):
        raise UntracedWriteError(
            "a traced value was written into an array over the memory of another object (a "
            "bytearray, a ctypes array: np.frombuffer(b), np.ctypeslib.as_array(c)) that the "
            "function may read by another route (bytes(b), c[0], another view of it), where "
            "mutad would not see the derivative of what was written. Write into a copy "
            "(y = np.frombuffer(b).copy()), or make the array over memory nothing else "
            "holds (np.frombuffer(bytearray(n)), np.ctypeslib.as_array((c_double * n)())).")
    return _adopted_at(stand_in, plain, id(base), len(running) - 1, write)


def _adopted_apart(stand_in):
    """Refuse ``stand_in`` where the differentiations a block set aside (a SciPy solver's run
    on plain numbers, ``outside_differentiations``) adopted its memory: its own memory holds,
    in forward mode, the values before the call, and the reverse pass would not see the
    derivative through what the block computes of it (``brentq(lambda t: t - W.sum(), ...)``
    of a module-level buffer the function wrote)."""
    root = id(owner(plain_memory(stand_in)))
    for differentiation in ACTIVE.suspended[-1]:
        adopter = getattr(differentiation, "adopter", None)
        if adopter is not None and root in adopter.adopted:
            raise EscapedTracerError(
                "an array made before the call, which the function wrote into, was read by "
                "code running on plain numbers for a library's routine")


def _read_elsewhere(root):
    """Whether the memory of ``root``, an array over another object's buffer
    (``np.frombuffer(b)``, ``np.ctypeslib.as_array(c)``), may be read by a route mutad does not
    see: its exporter held by anything but the view NumPy took of it (a name of the user's,
    read as ``bytes(b)`` or ``c[0]``; another array over it), or not the owner of that memory
    (a ctypes array over another's, ``from_buffer(b)``, a pointer's; a file's ``mmap``)."""
    view = root.base
    if type(view) is not memoryview:  # NumPy's own memory, or an __array_interface__'s
        return False
    exporter = view.obj
    owns = type(exporter) in (bytearray, array.array) or (
        isinstance(exporter, ctypes.Array) and getattr(exporter, "_b_needsfree_", 0) == 1)
    # held by the view's buffer, this frame and getrefcount's argument alone
    return not owns or sys.getrefcount(exporter) > 3


def _adopted_at(stand_in, plain, root, depth, write):
    """``adopted`` at the differentiation ``ACTIVE.running[depth]`` and those around it: the
    array of the innermost that adopted ``root``'s memory (the array an enclosing one has for
    the stand-in is what an inner one adopts)."""
    running = ACTIVE.running
    for k in range(depth, -1, -1):
        adopter = getattr(running[k], "adopter", None)
        if adopter is None:
            if write and k == depth:
                return None  # a level that adopts nothing: the write's own error follows
            continue
        arrays = adopter.adopted.get(root)
        if arrays is not None:
            pair = arrays.get(id(stand_in))
            if pair is not None:
                return pair[1]
        if arrays is not None or write and k == depth:
            outer = _adopted_at(stand_in, plain, root, k - 1, False) if k else None
            return adopter.adopt(stand_in, root, plain if outer is None else outer)
    return None


def stand_in_value(stand_in):
    """What the engines read for ``stand_in``: the plain array it views, or the running
    differentiation's array for it once a write adopted its memory (``adopted``)."""
    level = adopted(stand_in)
    return read_plain(stand_in) if level is None else level


def read_plain(stand_in):
    """The plain view of ``stand_in``'s memory that the engines read, one per stand-in of an
    array reached by a name (``_Mode._stand_in``: a global or a closure's array, read on
    every step of a loop) while it keeps its layout: the records reading it keep one array,
    which ``reverse.freeze`` checks and protects once, not a new view on every read. Kept
    by the mode, not the stand-in (which its view's ``base`` holds), while a differentiation
    runs, until the stand-ins go (``_Mode._undo``)."""
    views = MODE.plain_views
    plain = views.get(id(stand_in))  # (the view holds its stand-in: the id stays its own)
    if plain is None or plain.shape != stand_in.shape or plain.strides != stand_in.strides \
            or plain.dtype != stand_in.dtype:
        plain = plain_memory(stand_in)
        if ACTIVE.running and "original" in stand_in.__dict__:
            views[id(stand_in)] = plain
    return plain


def adopt(written):
    """Adopt the memory of the stand-ins of float arrays within ``written``, which the function
    writes into: the caller's arrays, whose bytes the differentiation keeps and writes back,
    as an argument's (``adopted``)."""
    for stand_in in _each_stand_in(written):
        adopted(stand_in, write=True)


def writing_into(args, positions):
    """``args`` of a function that writes into those at ``positions`` (``mutad.inplace_adjoint``)
    as the differentiations running in this thread take them: the stand-ins written adopted
    (``adopted``), and each stand-in whose memory a write adopted the array for it."""
    if not ACTIVE.running or not _each_stand_in(args):
        return args
    adopt([args[i] for i in positions if i < len(args)])
    return adopted_views(args)


def accessed(*read, written=()):
    """Run the ``PLAIN_ACCESS`` checks on the stand-ins within ``read`` and ``written`` (not
    those whose memory was adopted, whose reads and writes the differentiations follow)."""
    for view in _stand_ins(read):
        for check in PLAIN_ACCESS:
            check(view, False)
    for view in _stand_ins(written):
        for check in PLAIN_ACCESS:
            check(view, True)


class _Route:
    """A routed function (``registry.defroute``) as user code reaches it in the mode: its
    stand-in, called after the ``PLAIN_ACCESS`` checks of the stand-ins among its arguments.
    The library converts such an array itself (``np.asarray``: NumPy converts an array of a
    subclass without a hook, neither ``__array__`` nor ``__array_finalize__``), so the call is
    the one place mutad sees it go: read, and written where the call says the library writes
    into it (``out=``, ``output=``, ``overwrite_a=True``). Otherwise as the stand-in: its
    attributes, ``isinstance`` against it, bound as a method if it is a function."""

    def __init__(self, original, stand_in):
        functools.update_wrapper(self, stand_in, updated=())
        self.original, self.stand_in = original, stand_in

    def __call__(self, *args, **kwargs):
        if not ACTIVE.running:
            # another thread, running no differentiation, that reads a namespace the mode
            # binds (a module's names that SciPy's code followed by the mode reads): the
            # library's function itself (the stand-in may reach its original through the same
            # namespace, and so itself)
            return self.original(*args, **kwargs)
        if _each_stand_in((args, kwargs)):
            written = self._written(args, kwargs)
            accessed(args, kwargs, written=written)
            adopt(written)
            args, kwargs = adopted_views(args), adopted_views(kwargs)
            y = self.stand_in(*args, **kwargs)
            # a plain view of a stand-in's memory (as_strided(U0, ...)): the stand-in's view
            named = _named_view(y)
            return y if named is None else named
        y = self.stand_in(*args, **kwargs)
        if type(y) in _SEQUENCES_OR_ARRAY:  # (not a traced result)
            return from_plain_objects(y, self.original, args, kwargs)
        return y

    def __get__(self, instance, owner=None):
        if instance is None or type(self.stand_in) is not types.FunctionType:
            return self
        return types.MethodType(self, instance)

    def __getattr__(self, name):
        if name == "stand_in":  # (not yet set: copy.copy's new object)
            raise AttributeError(name)
        return getattr(self.stand_in, name)

    def __instancecheck__(self, instance):  # for the user's code (``FOR_THE_CALLER``)
        return isinstance(instance, self.stand_in)

    def __subclasscheck__(self, subclass):
        return issubclass(subclass, self.stand_in)

    def __repr__(self):
        return repr(self.stand_in)

    @functools.cached_property
    def __signature__(self):
        """The library function's signature, not the stand-in's: code that inspects it (to
        tell SciPy's versions apart by a parameter's name) takes the branch it takes outside
        the mode. The stand-in's where the original has none."""
        for function in (self.original, self.stand_in):
            try:
                return inspect.signature(function)
            except (TypeError, ValueError):
                continue
        return None

    @functools.cached_property
    def _flags(self):
        """``(signature, position)`` of the original where a parameter names what it writes
        (``overwrite_a``, ``out``, ``output``), ``position`` that of the first such one, to find
        those passed by position; else None."""
        try:
            signature = inspect.signature(self.original)
        except (TypeError, ValueError):
            return None
        positions = [i for i, name in enumerate(signature.parameters)
                     if name.startswith("overwrite_") or name in _OUTPUTS]
        return (signature, positions[0]) if positions else None

    def _written(self, args, kwargs):
        """What the library may write into, called with ``args`` and ``kwargs``: its ``out=``
        and ``output=`` arrays, and each ``<name>`` whose flag ``overwrite_<name>`` is set (all
        the arguments where the call does not bind to its signature: the library's error, or
        a write, follows)."""
        arguments = kwargs
        flags = self._flags
        if flags is not None and (len(args) > flags[1] or any(  # (Signature.bind is slow)
                name.startswith("overwrite_") for name in kwargs)):
            try:
                arguments = {**kwargs, **flags[0].bind(*args, **kwargs).arguments}
            except TypeError:
                return args, kwargs
        return [arguments[name] for name in _OUTPUTS if name in arguments] + [
            arguments[name[len("overwrite_"):]] for name, flag in arguments.items()
            if name.startswith("overwrite_") and type(flag) in (bool, int, np.bool_) and flag
            and name[len("overwrite_"):] in arguments]


FOR_THE_CALLER = {method.__code__ for method in (_ShownType.__instancecheck__,
                                                 _ScalarType.__instancecheck__,
                                                 _Route.__instancecheck__, _shown_type)}
"""The code of the stand-ins that answer ``isinstance`` for the user's code that asked
(``shown_class``): the mode's types, routed classes, and SciPy's sparse classes'
(``mutad.scipy.sparse``)."""


class _Made:
    """A Python function of SciPy's that nothing routes (``scipy.special.roots_legendre``,
    ``scipy.linalg.dft``), as code reaches it in the mode: the function itself, whose result the
    user's code receives as it receives a routed function's (``by_user_code``): a new float
    array made of plain values is a constant the function may write traced values into, as
    one NumPy makes. On traced arguments, SciPy's code runs followed step by step
    (``FOLLOWED_LIBRARY_CODE``), as a rule's ``ScipysCode`` does: the arrays it builds of them
    and the buffers it fills with them are traced. Bound as a method where the function is
    one."""

    def __init__(self, original):
        functools.update_wrapper(self, original)
        self.original = original

    def __call__(self, *args, **kwargs):
        if FOLLOWED_LIBRARY_CODE and innermost(_as_held((*args, *kwargs.values()))) is not None:
            return FOLLOWED_LIBRARY_CODE[0](self.original, args, kwargs)
        y = self.original(*args, **kwargs)
        return by_user_code(y, self.original, args, kwargs, sys._getframe(1))

    def __get__(self, instance, owner=None):
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self):
        return repr(self.original)


def _as_held(items):
    """``items``, a ``np.poly1d`` among them as the coefficients it holds (traced ones make
    SciPy's function that takes it followed: ``sweep_poly(t, poly)``)."""
    return tuple(x.coeffs if type(x) is np.poly1d else x for x in items)


class _MadeFloats(_Made):
    """A public function of NumPy's the mode does not replace otherwise, a Python one or one
    NumPy's protocol dispatches (``np.choose``, ``np.polyadd``, ``np.union1d``), that makes
    arrays of numbers (``np.hanning(n)``,
    ``np.fft.fftfreq(n)``, ``np.polynomial.legendre.leggauss(n)``, ``np.triu_indices(n)``), as
    code reaches it in the mode: a new float array it gives the user's code is a constant the
    function may write traced values into, as np.zeros' is (``made_in``); a new integer or
    boolean one stands in for itself, as ``np.argsort`` of a constant's does
    (``without_derivative``), so that a record reading it keeps the values it read and the
    function may go on writing into it (``i, j = np.triu_indices(n, 1)``, then ``i[:] = ...``);
    anything else (views of its arguments, other objects) as NumPy gives it."""

    def __call__(self, *args, **kwargs):
        y = from_user_line(self.original, *args, **kwargs)  # (its warnings at the caller's line)
        kind = type(y)  # (a traced result, a number: as it is, told by its type alone)
        if kind is np.ndarray and any(y is a for a in (*args, *kwargs.values())):
            return y  # (its argument itself: np.astype(a, a.dtype, copy=False), out=)
        if kind is np.ndarray or issubclass(kind, _SEQUENCES) or kind in HANDED_SUBCLASSES:
            return by_user_code(y, self.original, args, kwargs, sys._getframe(1))
        return y


def by_user_code(y, func, args, kwargs, caller, new=False):
    """What the user's code receives of ``y = func(*args, **kwargs)``, made by NumPy's or a
    library's code of plain values (Python's lists, tuples and numbers, arrays it allocated)
    while a differentiation runs: a routed function's (``scipy.linalg.solve`` of plain values,
    ``polyvander``), a ``_MadeFloats``' (``np.hanning(n)``), a ufunc's or a reader's of lists
    (``from_plain_objects``). Where the caller (frame ``caller``, or the one a ``PASSING``
    wrapper passes the call on for: ``from_user``) is the user's, each new array of it once
    (``np.diag_indices(n)`` is ``(i, i)``): a float one, or a view of one laid out in order that
    nothing else holds (``_fresh_view``), a constant the function may write traced values into,
    as np.zeros' is, which a replay makes again by the same call; an integer or boolean one a
    stand-in of itself (``_counting``); a view of a stand-in's memory that stand-in's view
    (``_named_view``); SciPy's results and subclasses as ``made_in`` gives them; anything else
    (a view of memory something else holds) as it is. NumPy's, SciPy's and mutad's own code
    (``special.gammaln`` read from SciPy's public module), a rule (``running_rule``) and code
    outside the mode receive ``y`` itself. ``new``: ``y`` is the caller's own view of the new
    array the call made (``y.data`` of np.ma.zeros' masked array), however many hold that."""
    if not _in_mode() or STATE.rules or not from_user(caller):
        return y
    return _new_arrays(y, func, args, kwargs, _caller(caller), {}, new)


def from_user(frame):
    """Whether ``frame``, or the frame a ``PASSING`` wrapper running in it passes the call on
    for, runs the user's code: the one test of who called."""
    return not internal(_caller(frame))


def _new_arrays(y, func, args, kwargs, caller, made, new=False):
    """``by_user_code``'s result ``y``; ``made``: what each new array of it became, by ``id``,
    so that one array given twice stays one."""
    if _sequence(y):
        return _like(y, [_new_arrays(item, func and functools.partial(_item, func, i), args,
                                     kwargs, caller, made) for i, item in enumerate(y)])
    if type(y) is not np.ndarray:
        return made_in(y, func, args, kwargs, caller)
    if id(y) not in made:
        if follows_floats(y.dtype) and (new or y.base is None or _fresh_view(y)):
            made[id(y)] = made_in(y if y.base is None or _in_order(owner(y)) else y.copy("K"),
                                  func, args, kwargs, caller)
        elif _counting(y, args, kwargs):
            made[id(y)] = _own_stand_in(y)  # (np.mask_indices': views of NumPy's own array)
        elif y.base is not None:  # (as_strided(U0, ...), np.ctypeslib.as_array(U0.ctypes...)
            made[id(y)] = _buffer_view(y)  # or of a ctypes array, bytearray, mmap)
        else:
            made[id(y)] = y
    return made[id(y)]


def _fresh_view(y):
    """Whether ``y`` is a view of a new array that nothing else holds, nor any array between
    them, the one or the other laid out in order (``np.moveaxis(v, 0, -1)`` of the ``v``
    NumPy's ``polyvander`` fills; ``legvander2d``'s reshape of a product whose axes NumPy
    ordered as its operands', which ``_new_arrays`` follows as a copy: mutad's views address
    an owner's memory laid out in order): the memory is the user's code's alone, as a new
    array's is; not a view of another object's memory (a buffer, a ctypes array:
    ``np.ctypeslib.as_array``), which it may read."""
    base = y.base
    while type(base) is np.ndarray:
        base = base.base
    if base is not None or not _fresh(y, True, _bases(y)):
        return False
    return _in_order(owner(y)) or _in_order(y)  # (which holds the owner: after its count)


def _in_order(a):
    return a.flags.c_contiguous or a.flags.f_contiguous


_NUMPY_MADE = ("numpy.polynomial", "numpy.lib", "numpy.fft", "numpy.linalg", "numpy.ctypeslib")
"""NumPy's modules besides ``numpy`` whose Python functions user code receives as
``_MadeFloats`` (the mode's copies of ``numpy``, ``numpy.fft`` and ``numpy.linalg`` bind them;
NumPy's public modules under the others read them so, ``_MadeModule``); not np.random's or
np.ma's, which the mode follows otherwise."""


def _numpy_made(value):
    """Whether ``value`` is a public function of NumPy's to be ``_MadeFloats``: a Python
    function, or one NumPy's ``__array_function__`` protocol dispatches (``np.choose``,
    ``np.polyadd``: its implementation's module tells whose it is)."""
    kind = type(value)
    if kind is not types.FunctionType and kind is not _DISPATCHER \
            or value.__name__.startswith("_"):
        return False
    code = value._implementation if kind is _DISPATCHER else value
    if _top(getattr(code, "__globals__", {"__name__": code.__module__})) != "numpy":
        return False  # (the mode's own bear NumPy's names)
    module = str(getattr(value, "__module__", ""))
    return module == "numpy" or module in _NUMPY_MADE \
        or module.startswith(tuple(m + "." for m in _NUMPY_MADE))


_DISPATCHER = type(np.choose)

_MADE_TOPS = ("numpy", "scipy")
"""The packages whose Python functions may be ``_MadeFloats`` (``_numpy_made``: a function's
own module's package is NumPy) or ``_Made`` (``_Mode._made``: SciPy)."""
"""The type of NumPy's functions that its ``__array_function__`` protocol dispatches."""

_MADE_FLOATS: dict[int, tuple[Any, _MadeFloats]] = {}


def made_floats(value):
    """``_MadeFloats`` of NumPy's function ``value``, made once per function."""
    pair = _MADE_FLOATS.get(id(value))
    if pair is None or pair[0] is not value:
        pair = _MADE_FLOATS[id(value)] = (value, _MadeFloats(value))
    return pair[1]


class _RoutingModule(types.ModuleType):
    """The class of a library's public module in the mode (``scipy.linalg``, ``numpy.ma``):
    a routed function or class read from it (``scipy.linalg.solve``, ``from numpy.ma import
    add`` run in the function) reads as its ``_Route``, so that the mode need not bind the
    routes into the module's namespace and back on every entry and exit (one assignment of the
    module's class instead); everything else as the module's own. The names the module's own
    code reads as globals, which no attribute access sees, are swapped (``_own_names``).

    (Routes bound into the modules for good, as dispatchers that call the library's function
    outside a differentiation, would cost nothing per entry, but user code would see them
    outside one too: not the library's function by identity or type, not picklable by
    reference as a function, and one frame more between the caller and the library, which
    moves the line a library's ``warnings.warn(..., stacklevel=2)`` names, and so whether
    Python's default filters show it.)"""

    def __getattribute__(self, name):
        value = types.ModuleType.__getattribute__(self, name)
        if not ACTIVE.running:  # (another thread, running no differentiation: the module's)
            return value
        if type(value) is types.ModuleType:  # (a submodule: scipy.linalg's basic)
            MODE.reach(value)
            return value
        pair = MODE.routes.get(id(value))
        return pair[1] if pair is not None and pair[0] is value else value


class _MadeModule(_RoutingModule):
    """The class of SciPy's public modules in the mode: their Python functions that nothing
    routes read as their ``_Made`` (``scipy.linalg.dft``, ``from scipy.special import
    roots_legendre`` run in the function); the routed ones as their ``_Route``; everything
    else as the module's own."""

    def __getattribute__(self, name):
        value = _RoutingModule.__getattribute__(self, name)
        if not ACTIVE.running:
            return value
        if type(value) is types.FunctionType or type(value) is _DISPATCHER:
            made = MODE._made(value)
            if made is not None:
                return made
        elif type(value) is np.ufunc:  # (scipy.special.gammaln: of lists, as NumPy's)
            return mode_ufunc(value)
        return value


_OUTPUTS = ("out", "output")
"""The names of the parameters of library functions that take the array they write into."""

PASSING = frozenset((reader(np.sum).__code__, joiner(np.stack).__code__,
                     _reading_lists(np.add.reduce).__code__,
                     _ModeUfunc.__call__.__code__, _Route.__call__.__code__,
                     _unbound_method(np.ndarray.sum, "sum").__code__))
"""The code of the mode's wrappers that call NumPy's or a library's function for the user's
code."""


def _stand_ins(tree):
    """The plain views of the stand-ins within ``tree`` (lists, tuples and dicts of them) whose
    memory no running differentiation adopted (``adopted``), a list."""
    return [plain_memory(x) for x in _each_stand_in(tree) if not _adopted_memory(x)]


def _adopted_memory(stand_in):
    """Whether a running differentiation adopted the memory ``stand_in`` views."""
    root = None
    for level in ACTIVE.running:
        adopter = getattr(level, "adopter", None)
        if adopter is not None and adopter.adopted:
            root = id(owner(plain_memory(stand_in))) if root is None else root
            if root in adopter.adopted:
                return True
    return False


def in_containers(leaf, tree):
    """``tree`` with ``leaf`` applied to what its lists, tuples and dicts hold, however deep
    (each container rebuilt as one of its own type), or to ``tree`` itself."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return kind(in_containers(leaf, x) for x in tree)
    if kind is dict:
        return {k: in_containers(leaf, v) for k, v in tree.items()}
    return leaf(tree)


def adopted_views(tree):
    """``tree`` with each stand-in whose memory a write adopted replaced by the
    differentiation's array for it (``adopted``), the others as they are."""
    return in_containers(_adopted_view, tree)


def _adopted_view(x):
    if type(x) is Preexisting:
        level = adopted(x)
        if level is not None:
            return level
    return x


def _each_stand_in(tree, found=None):
    """The stand-ins within ``tree`` (lists, tuples and dicts of them), a list (a walk of every
    routed call's arguments: no generators)."""
    found = [] if found is None else found
    kind = type(tree)
    if kind is Preexisting:
        found.append(tree)
    elif kind is list or kind is tuple:
        for x in tree:
            _each_stand_in(x, found)
    elif kind is dict:
        for x in tree.values():
            _each_stand_in(x, found)
    return found


def stands_in(inputs, kwargs):
    """Whether a stand-in is among a ufunc's operands: the engines let its
    ``__array_ufunc__`` go first, which hands them the plain array it views."""
    for x in inputs:  # (a loop, not any(...): this runs for every ufunc call)
        if type(x) is Preexisting:
            return True
    out = kwargs.get("out")
    return out is not None and any(type(x) is Preexisting for x in out)


def _original(a):
    """The array stand-in ``a`` stands for (``np.asarray(U0)`` is ``U0``, as in NumPy), or the
    plain view of its memory for a view of it."""
    original = a.__dict__.get("original")
    return _plain_views(a) if original is None else original


def _plain_views(tree):
    """``tree`` with each stand-in replaced by the plain ndarray viewing its memory: read-only
    while its owner is (``reverse.freeze`` makes an array a record reads read-only, and NumPy
    does not pass the flag on to views made before, such as the stand-in itself); by the
    differentiation's array for it once a write adopted its memory (``adopted``)."""
    return in_containers(_plain_view, tree)


def _read_views(tree):
    """``_plain_views`` of operands NumPy only reads: the plain view of each stand-in is the
    one the engines read for it (``read_plain``), not a new one."""
    return in_containers(_read_view, tree)


def _plain_view(x, view_of=plain_memory):
    if type(x) is not Preexisting:
        return x
    level = adopted(x)
    if level is not None:
        return level
    view = view_of(x)
    if writeable(view) and not writeable(owner(view)):  # no FutureWarning on a broadcast
        view.flags.writeable = False
    return view


def _read_view(x):
    """``_plain_view`` of a stand-in NumPy only reads (``read_plain`` found as it is called)."""
    return _plain_view(x, read_plain)


def _caller(frame):
    """``frame``, or the user's frame that called the mode's wrapper running in it (a ufunc's,
    a reader's: ``PASSING``), which pass NumPy's call on as the user's own."""
    while frame is not None and frame.f_code in PASSING:
        frame = frame.f_back
    return frame


def made_in(y, func, args, kwargs, caller):
    """What the mode gives for ``y = func(*args, **kwargs)`` (``func`` None: a call a replay
    cannot make again) made from pre-existing memory in
    the code of frame ``caller``: in user code, a view of it stands in too and a new float array
    is a constant of the differentiations running in this thread (a replay makes it again by
    the same call, whose pre-existing operands it guards by their bytes); in NumPy's, SciPy's
    and mutad's own code (a stand-in handed to a SciPy function), ``y`` as it is, plain."""
    if wrapped(y):  # (the engines' result, a stand-in beside a traced operand: as it is,
        return y    # told without ``isinstance``, which looks for the caller's frame)
    if _sequence(y):
        return _like(y, [made_in(item, func and functools.partial(_item, func, i), args, kwargs,
                                 caller) for i, item in enumerate(y)])
    if isinstance(y, dict) and str(type(y).__module__).startswith("scipy.") \
            and not internal(caller):  # SciPy's results: minimize(...).x, solve_ivp(...).y
        for key, (count, bases) in _held_in(y).items():  # (those nothing else holds)
            item = y[key]
            if item.dtype.kind not in "fc" or _fresh(item, count <= _IN_A_DICT, bases):
                y[key] = made_in(item, func and functools.partial(_item, func, key), args,
                                 kwargs, caller)
        return y
    handed = HANDED_SUBCLASSES.get(type(y))
    if handed is not None and not internal(caller) and _in_mode() and y.dtype.kind in "fc":
        # (its array as a constant, which a replay cannot make again by the call: it is the
        # subclass's)
        return handed(made_in(y.view(np.ndarray), None, args, kwargs, caller))
    if type(y) is not np.ndarray or internal(caller):
        return y
    root = owner(y)
    if any(owner(a) is root for a in _arrays([args, kwargs])):
        return y.view(Preexisting)
    if _in_mode() and follows_floats(y.dtype):
        return allocate(y, None if func is None else (func, args, kwargs))
    if _in_mode() and y.dtype.kind in SELF_STANDING:  # (an integer array from a stand-in)
        return _own_stand_in(y)
    return y


def without_derivative(y, args, kwargs, level):
    """``y = func(*args, **kwargs)``, a function without a derivative of traced values
    (``np.floor(x)``, ``x > 0``, ``np.argsort(x)``), as tracing hands it to the user's code:
    a new float array (NumPy's or a device's) as a constant of the differentiations
    (``np.floor(x) + 1``, then a traced value written into it, is followed, as a recording
    follows it: ``Recorder.derive``; a product with it sums the same terms on either kind), a new
    integer or boolean one of NumPy's as a stand-in of itself, so that the floats computed from it
    are constants too (``w = (x > 0).astype(float)``, ``np.where(x > 0, 1.0, 0.5)``). Its
    values are NumPy's; no derivative flows through them. NumPy's, SciPy's and mutad's own
    code (a rule's composition: the frame outside the engines that called the function) gets
    ``y`` as it is, and so does the differentiation of ``level`` where it is not the innermost
    (the primal computation of a forward-mode one inside it: the inner one holds the
    result). The engines give the integer arrays of functions of constants
    (``np.argsort(np.cos(t))``) and of composites (``np.histogram(x)``'s counts) so too."""
    if type(y) in (tuple, list) and not hasattr(y, "_fields"):  # np.nonzero's, np.modf's
        return type(y)(without_derivative(item, args, kwargs, level) for item in y)
    device = type(y) is not np.ndarray and is_device(y)
    if type(y) is not np.ndarray and not device or not y.ndim or not _in_mode() \
            or ACTIVE.running[-1].level != level:
        return y
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__")).startswith(_DISPATCH):
        frame = frame.f_back
    if frame is None or internal(frame):
        return y
    kind = y.dtype.kind
    if y.base is None and all(a is not y for a in args):  # (a ufunc's: new memory, always)
        new = kind in "fciubO"
    else:
        new = _allocated(y, args, kwargs) or _counting(y, args, kwargs)
    if not new or y.dtype.names is not None:
        return y
    if kind == "O":  # (a ufunc np.frompyfunc made, of constants): as np.empty(n, dtype=object)
        return y.view(TracedObjects)
    if kind in "fc":
        return allocate(y)
    # (a device's integers stay its own: a stand-in of itself is an array of NumPy's, and a
    # constant could not index the library's plain arrays; a traced value written into the
    # floats the library makes of them is refused: devices.traced_refused)
    return y if device else _own_stand_in(y)


_DISPATCH = ("mutad.engines.", "mutad.core.")
"""The modules of mutad's machinery between a NumPy function and the code that called it."""


def _own_stand_in(y):
    """A new integer or boolean array ``y`` (nothing else holds it) as a stand-in of itself
    that owns its memory, as ``y`` did (``.base is None``, ``resize``): a copy of it."""
    stand_in = np.ndarray.__new__(Preexisting, y.shape, y.dtype,
                                  order="F" if y.flags.f_contiguous and not y.flags.c_contiguous
                                  else "C")
    np.copyto(plain_memory(stand_in), y)
    return stand_in


def _item(func, i, *args, **kwargs):
    return func(*args, **kwargs)[i]


def _sequence(y):
    """Whether ``y`` is a list, a tuple or a named tuple (``np.linalg.eigh``'s,
    ``np.unique_counts``'), whose items a call's results are."""
    return type(y) in _SEQUENCES or isinstance(y, tuple) and hasattr(y, "_fields")


def _like(y, items):
    """A sequence of ``items`` of ``y``'s type (``_sequence``)."""
    return type(y)(items) if type(y) in _SEQUENCES else type(y)(*items)


_WITH_OPERANDS = {"dot": np.dot, "choose": np.choose, "clip": np.clip,
                  "searchsorted": np.searchsorted}
"""ndarray's methods whose arguments are arrays they compute with, by the NumPy function that
computes the same (``a.dot(b)`` is ``np.dot(a, b)``, ``knots.searchsorted(v)`` is
``np.searchsorted(knots, v)``)."""


def _making(name):
    """ndarray's method ``name``, which may make a new array (``copy``, ``astype``, a fancy
    index): on a stand-in, its result as ``_made`` gives it."""
    method = getattr(np.ndarray, name)

    def making(self, *args, **kwargs):
        if kwargs.get("out") is not None and ACTIVE.running:
            # ``U.cumsum(out=W)``: NumPy's function of the same call, whose out= the mode sees
            # (adopted where it stands in), where ndarray's method writes past it
            return getattr(np, name)(self, *args, **kwargs)
        level = adopted(self)
        if level is not None:  # (a write adopted its memory: as the differentiation's array)
            return getattr(level, name)(*_plain_views(args), **_plain_views(kwargs))
        plain = plain_memory(self)
        if ACTIVE.running:
            function = _WITH_OPERANDS.get(name)
            if function is not None and holds_wrapped([list(args), list(kwargs.values())]):
                # traced operands (``(x > 0).astype(int).dot(x)``), which ndarray's method
                # would convert: NumPy's function of the same computation, which follows them
                # (a list of traced values, ``M.dot([a, b])``, the array NumPy makes of it)
                kwargs = dict(zip(kwargs, lists_as_arrays(kwargs.values()), strict=True))
                return function(self, *lists_as_arrays(args), **kwargs)
            accessed(args, kwargs)
        args, kwargs = _plain_views(args), _plain_views(kwargs)
        y = method(plain, *args, **kwargs)
        if y is plain:  # x.astype(x.dtype, copy=False): x itself, as NumPy gives it
            return self
        if ACTIVE.running and not (type(y) is np.ndarray and owner(y) is owner(plain)):
            # values read now, not a view whose reads are checked when they happen
            accessed(_region(self, args[0]) if name == "__getitem__" else self)
        return made_in(y, method, (plain, *args), kwargs, _caller(sys._getframe(1)))

    return _named(making, method)


def _writing(name):
    """ndarray's method ``name``, which writes into the array (``__setitem__``, ``fill``): on a
    stand-in, through a new view of its memory (``_plain_views``)."""
    method = getattr(np.ndarray, name)

    def writing(self, *args, **kwargs):
        if ACTIVE.running:
            accessed(args, kwargs, written=_region(self, args[0]) if name == "__setitem__"
                     else self)
            level = adopted(self, write=True)
            if level is not None:
                return getattr(level, name)(*_plain_views(args), **_plain_views(kwargs))
        return method(_plain_views(self), *_plain_views(args), **_plain_views(kwargs))

    return _named(writing, method)


def _region(stand_in, key):
    """The elements of ``stand_in`` that ``stand_in[key]`` reads or ``stand_in[key] = ...``
    writes, as a stand-in: those of a basic index, or all of them (a fancy index's elements
    are no view)."""
    try:
        region = np.ndarray.__getitem__(plain_memory(stand_in),
                                        (*key, ...) if type(key) is tuple else (key, ...))
    except (IndexError, TypeError, ValueError):  # (a second Ellipsis): NumPy's error follows
        return stand_in
    return region.view(Preexisting) if region.base is not None else stand_in


def _reading(name):
    """ndarray's method ``name``, which reads the array into Python's values (``item``,
    ``tolist``, ``float()``): on a stand-in, after the ``PLAIN_ACCESS`` checks."""
    method = getattr(np.ndarray, name)

    def reading(self, *args, **kwargs):
        if ACTIVE.running:
            level = adopted(self)
            if level is not None and hasattr(level, name):
                return getattr(level, name)(*args, **kwargs)
            if level is None:
                accessed(self)
            # (else NumPy's error of any float array: ``__index__``'s TypeError)
        return method(self, *args, **kwargs)

    return _named(reading, method)


def _bytes(self):
    """``bytes(U0)``, which Python asks of ``__bytes__`` before the buffer NumPy exports of the
    memory: once a write adopted it, the differentiation's array's ``tobytes()``, which refuses
    a value with a derivative (the buffer holds, in forward mode, the values before the call,
    and the reverse pass would not see the conversion); else the buffer's bytes, as NumPy's."""
    if ACTIVE.running:
        level = adopted(self)
        if level is not None:
            return level.tobytes()
        accessed(self)
    return bytes(memoryview(plain_memory(self)))


Preexisting.__bytes__ = _bytes  # type: ignore[attr-defined]


for _name in ("item", "tolist", "tobytes", "__float__", "__int__", "__complex__", "__index__",
              "__bool__", "tofile"):  # (dumps, dump: pickling's, ``_pickled``)
    setattr(Preexisting, _name, _reading(_name))

for _name in ("__setitem__", "fill", "sort", "put", "partition", "setfield"):
    setattr(Preexisting, _name, _writing(_name))

for _name in ("copy", "astype", "flatten", "ravel", "reshape", "__getitem__", "take", "repeat",
              "compress", "choose", "round", "dot", "diagonal", "squeeze", "transpose",
              "swapaxes", "conj", "conjugate", "cumsum", "cumprod", "__copy__", "__deepcopy__",
              "mean", "std", "var", "clip", "searchsorted", "argmax", "argmin", "argsort",
              "argpartition", "byteswap",  # (of the values, not of the plain memory)
              "nonzero"):  # (nonzero: ndarray's, never a subclass's)
    setattr(Preexisting, _name, _making(_name))


class _ModeNumpy(types.ModuleType):
    """The ``numpy`` module as user code sees it during a differentiation: NumPy's own
    attributes, with the mode's factories."""


def _mode_numpy():
    module = _ModeNumpy(np.__name__, np.__doc__)
    module.__dict__.update(_mirrored(np, REPLACEMENTS))
    return module


def _mirrored(original, replacements):
    """The namespace of the mode's copy of the module ``original``: ``original``'s, each name
    of ``replacements`` (name -> (the library's function, the mode's)) bound to the mode's
    function where ``original`` binds the library's (one the user rebound, ``np.zeros = g``,
    stays the user's)."""
    namespace = dict(vars(original))
    for name, value in namespace.items():
        if name not in replacements and _numpy_made(value):
            namespace[name] = made_floats(value)
    for name, (own, new) in replacements.items():
        bound = namespace.get(name, own)
        if bound is own or bound is _LIBRARY["factories"].get(name, (own, own))[1]:
            namespace[name] = new
    return namespace


def _snapshot(module):
    """What ``module``'s namespace binds, to tell by identity whether it changed since."""
    namespace = vars(module)
    return tuple(namespace), tuple(namespace.values())


def _version_reader():
    """How to read a dictionary's version: a number CPython (3.10 to 3.13, built with the
    global interpreter lock) gives every dict anew from one global counter each time it is
    changed (``ma_version_tag``, PEP 509), the field after the object's header and its size,
    read through ``ctypes``; so an unchanged version proves the dict binds what it bound when
    it was read, and the mode need not compare hundreds of bindings on every entry and exit.
    Where reading it so does not change with every kind of change to a probe dict, or on other
    interpreters, None: the bindings are compared."""
    try:
        import ctypes
    except ImportError:  # an interpreter without ctypes
        return None
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13) \
            or getattr(sys, "_is_gil_enabled", lambda: True)() is False \
            or ctypes.sizeof(ctypes.c_ssize_t) != 8:
        return None
    offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)  # past ob_refcnt, ob_type
    probe = {"a": 1.5, "b": None}                                     # and ma_used

    def read(d):  # an object (kept with the dict, which it must not outlive) whose .value reads
        return ctypes.c_uint64.from_address(id(d) + offset)

    version = read(probe)
    seen = [version.value]
    for change in (lambda: probe.__setitem__("a", 2.5), lambda: probe.__setitem__("c", 1),
                   lambda: probe.pop("c"), lambda: probe.update(b=3), probe.popitem,
                   probe.clear, lambda: probe.setdefault("d", 4)):
        change()
        seen.append(version.value)
        if seen[-1] == seen[-2] or read(probe).value != seen[-1]:
            return None
    return read if len(set(seen)) == len(seen) else None


_VERSION = _version_reader()


class _Swaps:
    """The sites of one namespace of many (``_Mode.sites``), swapped together: by one
    ``update`` where the namespace's version (``_VERSION``) proves nothing was bound there
    since it was known to hold all of one side, else name by name, each swapped where it holds
    what the mode put there or found there."""

    __slots__ = ("namespace", "version", "sides", "known")

    def __init__(self, namespace, sites):
        self.namespace = namespace
        self.version = _VERSION(namespace) if _VERSION is not None else None
        self.sides = ({name: original for name, original, _ in sites},
                      {name: replacement for name, _, replacement in sites})
        self.known = [None, None]  # per side: the version when all its sites held that side

    @staticmethod
    def swap(swaps, to):
        """Bind side ``to`` (0: the library's, 1: the mode's) where the other side is bound, in
        each of ``swaps`` (one loop: every differentiation swaps every namespace, both ways)."""
        other = 1 - to
        for one in swaps:
            namespace, version, known = one.namespace, one.version, one.known
            if version is not None and version.value == known[other]:
                namespace.update(one.sides[to])
                known[to] = version.value
                continue
            new, complete = one.sides[to], True
            for name, value in one.sides[other].items():
                if namespace.get(name) is value:
                    namespace[name] = new[name]
                else:
                    complete = False
            if version is not None:
                known[to] = version.value if complete else None


FEW_SITES = 4
"""The namespaces of at most this many sites (a module that binds ``np`` alone: each module of
a library imported beside NumPy, more than a hundred with JAX) are swapped site by site, in
one loop over all of them (``_swap_sites``): two reads of each one's version and an
``update`` cost more than asking what a few names hold."""


def _swap_sites(sites, to):
    """Bind side ``to`` (0: the library's, 1: the mode's) at each of ``sites``, ``(namespace,
    name, original, replacement)``, where the other side is bound (as ``_Swaps.swap`` does name
    by name)."""
    if to:
        for namespace, name, original, replacement in sites:
            if namespace.get(name) is original:
                namespace[name] = replacement
    else:
        for namespace, name, original, replacement in sites:
            if namespace.get(name) is replacement:
                namespace[name] = original


def _unchanged(module, snapshot):
    namespace = vars(module)
    names, values = snapshot
    return len(namespace) == len(names) and tuple(namespace) == names \
        and all(map(operator.is_, namespace.values(), values))


DEVICE_FACTORIES = frozenset(FACTORIES) | {"array", "asarray", "asanyarray", "ascontiguousarray",
                                           "asfortranarray", "empty", "full", "mgrid", "ogrid"}
"""What a device library's namespace keeps as its own in the mode: the functions that make new
arrays on its device (their float results allocated as constants, as NumPy's factories' are).
Its other names that NumPy has are NumPy's, which dispatch to the device library through the
protocols, and to mutad for traced arrays, which the library's own functions refuse."""


class _ModeDevice(types.ModuleType):
    """A device library's namespace (``cupy``, ``cupy.linalg``) as user code sees it during a
    differentiation: ``import cupy as np`` code computes with NumPy's functions of the same
    names (the mode's), and allocates with the library's own factories, whose float arrays are
    constants of the running differentiations; what NumPy lacks is the library's."""

    def __init__(self, namespace, numpy_module):
        super().__init__(getattr(namespace, "__name__", numpy_module.__name__),
                         getattr(namespace, "__doc__", None))
        self._namespace = namespace
        self._numpy = numpy_module

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        own = getattr(self._namespace, name)
        numpy_value = getattr(self._numpy, name, None)
        if isinstance(numpy_value, types.ModuleType) and not callable(own):
            value = _ModeDevice(own, numpy_value)  # linalg, fft: NumPy's, dispatching
        elif name in DEVICE_FACTORIES and callable(own):
            value = device_factory(own, numpy_value)
        elif callable(numpy_value) and not isinstance(numpy_value, type) \
                and name not in ("ndarray", "random", "get_array_module", "asnumpy"):
            value = numpy_value
        else:
            value = own
        setattr(self, name, value)
        return value


def device_factory(func, numpy_func):
    """A device library's factory ``func`` in the mode: its new float arrays are constants of
    the running differentiations; given traced values (``cupy.asarray(x)``,
    ``cupy.zeros_like(x)``), NumPy's function of the same name (``numpy_func``, the mode's),
    which dispatches to the traced arrays as the library's would to its own."""
    allocating = factory(func)

    def allocating_on_device(*args, **kwargs):
        if numpy_func is not None and ACTIVE.running and (
                any(holds_wrapped(a) for a in args[:1]) or any(map(wrapped, kwargs.values()))):
            return numpy_func(*args, **kwargs)
        return allocating(*args, **kwargs)

    return _named(allocating_on_device, func)


class _ModeGenerator(np.random.Generator):
    """``np.random.default_rng(...)`` in the mode: NumPy's generator over the same bit
    generator (the same numbers), whose float draws are arrays mutad follows (``_drawn``)."""


def _laplace(loc, scale, u):
    return np.where(u >= 0.5, loc - scale * np.log(2.0 - u - u), loc + scale * np.log(u + u))


def _triangular(left, mode, right, u):
    base = right - left
    leftbase = mode - left
    lower = u <= leftbase / base
    # (each branch's square root of its own numbers alone, so the other's has no derivative)
    return np.where(lower, left + np.sqrt(np.where(lower, u * (leftbase * base), 1.0)),
                    right - np.sqrt(np.where(lower, 1.0, (1.0 - u) * ((right - mode) * base))))


_UNIFORM = "uniform numbers"  # (a Generator's random, a RandomState's random_sample)
_REQUIRED = object()

# fmt: off
REPARAMETERISED = {
    # draw           parameters, (name, default)                     standard numbers        NumPy's C formula
    "normal":      ((("loc", 0.0), ("scale", 1.0)),                  "standard_normal",      lambda loc, scale, z: loc + scale * z),
    "uniform":     ((("low", 0.0), ("high", 1.0)),                   _UNIFORM,               lambda low, high, u: low + (high - low) * u),
    "exponential": ((("scale", 1.0),),                               "standard_exponential", lambda scale, e: scale * e),
    "lognormal":   ((("mean", 0.0), ("sigma", 1.0)),                 "standard_normal",      lambda mean, sigma, z: np.exp(mean + sigma * z)),
    "laplace":     ((("loc", 0.0), ("scale", 1.0)),                  _UNIFORM,               _laplace),
    "logistic":    ((("loc", 0.0), ("scale", 1.0)),                  _UNIFORM,               lambda loc, scale, u: loc + scale * np.log(u / (1.0 - u))),
    "gumbel":      ((("loc", 0.0), ("scale", 1.0)),                  _UNIFORM,               lambda loc, scale, u: loc - scale * np.log(-np.log(1.0 - u))),
    "rayleigh":    ((("scale", 1.0),),                               "standard_exponential", lambda scale, e: scale * np.sqrt(2.0 * e)),
    "weibull":     ((("a", _REQUIRED),),                             "standard_exponential", lambda a, e: e ** (1.0 / a)),
    "pareto":      ((("a", _REQUIRED),),                             "standard_exponential", lambda a, e: np.expm1(e / a)),
    "power":       ((("a", _REQUIRED),),                             "standard_exponential", lambda a, e: (-np.expm1(-e)) ** (1.0 / a)),
    "gamma":       ((("shape", _REQUIRED), ("scale", 1.0)),          "standard_gamma",       lambda shape, scale, g: scale * g),
    "triangular":  ((("left", _REQUIRED), ("mode", _REQUIRED), ("right", _REQUIRED)), _UNIFORM, _triangular),
}
# fmt: on
"""The draws whose parameters may be traced: their parameters with their defaults, and the
standard numbers (of the same generator, in the same order) NumPy's C code computes each draw
from, by the formula given, which ``_reparameterised`` computes with the traced parameters. A
standard draw of a parameter (``standard_gamma(shape)``) takes that parameter, the first, plain:
its derivative is refused (``SHAPED``)."""

LEGACY = {"pareto": lambda a, e: np.exp(e / a) - 1.0,
          "power": lambda a, e: (1.0 - np.exp(-e)) ** (1.0 / a)}
"""The formulas of a legacy ``RandomState``'s draws that differ from a ``Generator``'s."""

SHAPED = {"standard_gamma": "shape"}
"""The standard draws of a parameter, and its name."""

REJECTED = frozenset(("beta", "chisquare", "dirichlet", "f", "noncentral_chisquare",
                      "noncentral_f", "standard_gamma", "standard_t", "vonmises", "wald"))
"""The draws NumPy makes by rejection or from several standard draws whose count depends on the
parameters, which no formula of standard numbers mutad follows gives: their traced parameters
are refused (``_rejected``)."""

DECIDED = frozenset(("poisson", "binomial", "negative_binomial", "geometric", "hypergeometric",
                     "logseries", "zipf", "multinomial", "multivariate_hypergeometric",
                     "integers", "randint", "random_integers"))
"""The draws of integers: their parameters decide which integers are drawn, and the integers
have no derivative (a draw is a decision), so they are drawn with the plain values of traced
parameters (``_decided``)."""


_ROUNDINGS = 4
"""How many units in the last place NumPy's C code of a draw and its formula computed by
NumPy's ufuncs may differ by."""


def _reparameterised(name, generator, args, kwargs):
    """``generator.<name>(*args, **kwargs)`` (a ``REPARAMETERISED`` draw, of a ``Generator`` or
    a legacy ``RandomState``) with traced parameters: NumPy's own draw is taken on their plain
    values (the generator's state advances as NumPy's does), then the same standard numbers are
    drawn again from the state before it, and the draw is computed from them with the traced
    parameters as NumPy's C code computes it (``loc + scale * z``, ``low + (high - low) * u``,
    ``scale * e``, ``exp(mean + sigma * z)``, ...): its derivatives are those of that formula (1
    and ``z`` for a normal's). That the formula gives NumPy's draw bit for bit is checked; where
    it does not (another rounding of NumPy's C code on this machine, a number NumPy's code
    rejected and drew again), the draw is refused."""
    spec, standard, formula = REPARAMETERISED[name]
    legacy = isinstance(generator, np.random.RandomState)
    formula = LEGACY.get(name, formula) if legacy else formula
    names = [p for p, _ in spec] + ["size"]
    if len(args) > len(names) or set(kwargs) - set(names):
        raise TypeError(f"{name}() got unexpected arguments")
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key in bound:
            raise TypeError(f"{name}() got multiple values for argument '{key}'")
        bound[key] = value
    missing = [p for p, default in spec if default is _REQUIRED and p not in bound]
    if missing:
        raise TypeError(f"{name}() missing required argument '{missing[0]}'")
    params = [bound.get(p, default) for p, default in spec]
    size = bound.get("size")
    cls = np.random.RandomState if legacy else np.random.Generator
    plain = [memory(p) if wrapped(p) else
             (_stacked_plain(p) if type(p) in (list, tuple) else p) for p in params]
    if standard == _UNIFORM:
        standard = "random_sample" if legacy else "random"
    if standard in SHAPED and holds_derivative([params[0]]):
        raise _rejected(name, f"a traced {SHAPED[standard]}", SHAPED[standard])

    def standard_numbers(shape):
        if standard in SHAPED:  # (the draw's parameter, as its draw broadcasts it)
            return getattr(cls, standard)(generator, np.broadcast_to(plain[0], shape), shape)
        return getattr(cls, standard)(generator, shape)

    expected, unit, same = _redrawn(
        generator, lambda: getattr(cls, name)(generator, *plain, size), standard_numbers,
        np.shape)
    if not same:
        raise UnsupportedOperationError(
            f"{name}() with traced parameters from {type(generator).__name__}: its standard "
            "numbers could not be drawn again as NumPy draws them. Draw them yourself "
            f"(z = rng.{standard}(size)) and move and scale them with the parameters.")
    shape = np.shape(expected)
    params = [lists_as_arrays([p])[0] if type(p) in (list, tuple) else p for p in params]
    params = [p.astype(np.float64) if wrapped(p) and p.dtype != np.float64 else p
              for p in params]  # NumPy takes its parameters as doubles
    y = formula(*params, unit)
    drawn = np.asarray(expected, np.float64)
    if wrapped(y) and np.shape(y) == shape and memory(y).tobytes() != drawn.tobytes() and \
            np.all(np.abs(drawn - memory(y)) <= _ROUNDINGS * np.spacing(np.abs(drawn))):
        # NumPy's elementwise pow, exp, log (its SIMD loops) and its C code's scalar ones may
        # round the last bits otherwise: the draw is NumPy's, its derivative the formula's
        # (the difference, a constant of a few units in the last place, is exact: Sterbenz)
        y = y + (drawn - memory(y))
    if not wrapped(y) or np.shape(y) != shape or memory(y).tobytes() != drawn.tobytes():
        raise UnsupportedOperationError(
            f"{name}() with traced parameters: computed from the standard draw, its value is "
            "not NumPy's bit for bit here (NumPy's C code rounds it otherwise on this machine, "
            f"or the parameters broadcast otherwise). Draw z = rng.{standard}(size) yourself "
            "and write the formula, which mutad follows.")
    if type(expected) is float:  # one draw of scalar parameters: NumPy gives a Python float
        weaken(y)
    return y


def _redrawn(generator, draw, standard, shape):
    """NumPy's ``draw()`` (of the generator's plain parameters), the same generator's
    ``standard`` numbers of ``shape(draw())`` drawn again (NumPy's method of that name, or the
    function ``standard`` of the shape) from the state before it, and whether that left the state NumPy's draw left (the numbers are then those
    the draw consumed); the generator is left as NumPy's draw left it."""
    legacy = isinstance(generator, np.random.RandomState)
    cls = np.random.RandomState if legacy else np.random.Generator

    def state():
        return (generator.get_state(legacy=False) if legacy
                else generator.bit_generator.state)

    def set_state(s):
        if legacy:
            generator.set_state(s)
        else:
            generator.bit_generator.state = s

    before = state()
    expected = draw()
    after = state()
    set_state(before)
    unit = standard(shape(expected)) if callable(standard) else getattr(cls, standard)(
        generator, shape(expected))
    again = state()
    set_state(after)
    return expected, unit, pickle.dumps(again) == pickle.dumps(after)


def _multivariate_normal(generator, args, kwargs):
    """``generator.multivariate_normal(mean, cov, size, ...)`` with a traced mean or
    covariance: NumPy's draw of their plain values (its checks and warnings too), then its
    standard normal numbers drawn again and moved as NumPy's code moves them, with the traced
    parameters: ``mean + z @ factor.T`` with the factor of ``method`` (``u * sqrt(s)`` of the
    SVD, ``u * sqrt(|w|)`` of eigh, the Cholesky factor) for a ``Generator``, ``z @ (sqrt(s)
    [:, None] * vh) + mean`` for a ``RandomState``. Its derivatives are those of the formula
    (and of the factorization); that it gives NumPy's draw bit for bit is checked, and where
    it does not, the draw is refused."""
    legacy = isinstance(generator, np.random.RandomState)
    names = ["mean", "cov", "size", "check_valid", "tol"]
    bound = dict(zip(names, args))
    if len(args) > len(names) or set(bound) & set(kwargs):
        raise TypeError("multivariate_normal() got unexpected or repeated arguments")
    bound.update(kwargs)
    method = bound.get("method", "svd")
    cls = np.random.RandomState if legacy else np.random.Generator
    plain = {k: (memory(v) if wrapped(v) else _stacked_plain(v) if type(v) in (list, tuple)
                 else v) for k, v in bound.items()}
    expected, unit, same = _redrawn(
        generator, lambda: cls.multivariate_normal(generator, **plain), "standard_normal",
        np.shape)
    mean, cov = lists_as_arrays([bound["mean"], bound["cov"]])
    n = np.shape(mean)[0]
    z = np.reshape(unit, (-1, n))
    cov = cov.astype(np.double) if wrapped(cov) else np.asarray(cov, np.double)
    if legacy:
        u, s, v = np.linalg.svd(cov)
        y = np.dot(z, np.sqrt(s)[:, None] * v) + mean
    else:
        if method == "svd":
            u, s, _ = np.linalg.svd(cov)
            factor = u * np.sqrt(s)
        elif method == "eigh":
            s, u = np.linalg.eigh(cov)
            factor = u * np.sqrt(np.abs(s))
        else:
            factor = np.linalg.cholesky(cov)
        y = mean + z @ factor.T
    y = np.reshape(y, np.shape(expected))
    if not same or not wrapped(y) or memory(y).tobytes() != np.asarray(expected).tobytes():
        raise UnsupportedOperationError(
            "multivariate_normal() with a traced mean or covariance: computed from the "
            "standard draw, its value is not NumPy's bit for bit here. Draw z = "
            "rng.standard_normal((size, n)) yourself and write mean + z @ "
            "np.linalg.cholesky(cov).T, which mutad follows.")
    return y


def _stacked_plain(tree):
    if type(tree) in (list, tuple):
        return [_stacked_plain(x) for x in tree]
    return memory(tree) if wrapped(tree) else tree


def _drawn(draw):
    """``draw`` (a function or a generator's method) whose new float arrays, in the mode, are
    constants of the running differentiations, as ``np.zeros``' are: a work array initialised
    by a random draw (``w = rng.standard_normal(n)``) can take traced values. A replay holds
    the numbers drawn when it recorded (a generator that lives between calls leaves the
    signature traced, ``replay._random_states``)."""

    name = draw.__name__
    reparameterised = name in REPARAMETERISED or name == "multivariate_normal"

    def drawing(*args, **kwargs):
        if RUNS_OF_F.watching:  # (a Jacobian's runs of f: each draws from the same state)
            generator = getattr(draw, "__self__", None)  # (a method's: the first argument)
            RUNS_OF_F.drawing_from(generator if generator is not None or not args else args[0])
        if ACTIVE.running and _holds_adopted((args, kwargs)):  # (parameters a write adopted)
            args, kwargs = adopted_views(args), adopted_views(kwargs)
        if reparameterised and ACTIVE.running and (
                holds_derivative(list(args)) or holds_derivative(list(kwargs.values()))):
            generator = getattr(draw, "__self__", None)
            if generator is None:  # a Generator's method: the generator comes first
                generator, args = args[0], args[1:]
            if name == "multivariate_normal":
                return _multivariate_normal(generator, args, kwargs)
            return _reparameterised(name, generator, args, kwargs)
        if name in REJECTED and ACTIVE.running and (
                holds_derivative(list(args)) or holds_derivative(list(kwargs.values()))):
            raise _rejected(name)
        if name in DECIDED and ACTIVE.running and (
                holds_wrapped(list(args)) or holds_wrapped(list(kwargs.values()))):
            return _decided(draw, name, args, kwargs)
        if name == "shuffle" and ACTIVE.running and holds_wrapped(list(args)):
            return _shuffled(draw, args, kwargs)
        if name == "permuted" and ACTIVE.running and len(args) == 2 and set(kwargs) <= {
                "axis", "out"} and (holds_wrapped(list(args)) or holds_wrapped([kwargs.get(
                    "out")])):
            return _permuted(draw, args, kwargs)
        if name in _SAMPLES and ACTIVE.running and (
                holds_wrapped(list(args)) or holds_wrapped(list(kwargs.values()))):
            return _sampled(draw, name, args, kwargs)
        out = kwargs.get("out")
        if wrapped(out) and ACTIVE.running:
            # NumPy's draw fills a plain array, of out's layout (the order its numbers land
            # in), which is written into out, as a constant of the draws the replay holds
            drawn = memory(out)
            if drawn.flags.c_contiguous or drawn.flags.f_contiguous:  # (else NumPy's error)
                drawn = np.empty_like(drawn)
            draw(*args, **{**kwargs, "out": drawn})
            out[...] = allocate(drawn, (np.array, (drawn.copy(),), {})) if _in_mode() \
                else drawn
            return out
        y = draw(*args, **kwargs)
        if _in_mode() and _drawn_for_the_user(_caller(sys._getframe(1))):
            if _allocated(y, args, kwargs):
                return allocate(y, (np.array, (y.copy(),), {}))
            if _counting(y, args, kwargs):  # rng.integers(...), rng.permutation(n): as
                return _own_stand_in(y)     # np.arange's, the floats made from them followed
        return y

    return _named(drawing, draw)


class _RunsOfF(threading.local):
    """The random generators f draws from while a Jacobian or a Hessian runs it once per pass
    (``api._RunsShownAsOne``, which restores them): ``watching``, the runs objects now open,
    innermost last (a new list for each change), each told of every generator a draw in the
    mode meets (``_drawn``)."""
    watching: list = []

    def drawing_from(self, generator):
        for runs in self.watching:
            runs.drawing_from(generator)


RUNS_OF_F = _RunsOfF()


def random_state(generator):
    """The object that holds ``generator``'s state (a ``Generator``'s bit generator, shared by
    mutad's stand-in over it; a legacy ``RandomState`` or Python's ``random.Random`` itself,
    whose state holds a cached normal too), and functions reading and setting that state; None
    for another object."""
    if isinstance(generator, np.random.Generator):
        generator = generator.bit_generator
    if isinstance(generator, np.random.BitGenerator):
        bits = generator
        return bits, lambda: bits.state, lambda state: setattr(bits, "state", state)
    if isinstance(generator, np.random.RandomState):
        return generator, lambda: generator.get_state(legacy=False), generator.set_state
    if isinstance(generator, random.Random):  # (Python's, random.random() one of its methods)
        return generator, generator.getstate, generator.setstate
    return None


def _drawn_for_the_user(frame):
    """Whether a draw in ``frame`` is the user's code's (or, in a ``library_allocation()``
    block, SciPy's private code's, whose buffers are followed there): a generator the function
    made and handed to SciPy (``eigsh(A, rng=rng)``) draws ARPACK's start vector in SciPy's
    code, which takes NumPy's own array, as its ``np.zeros`` gives."""
    return not internal(frame) or bool(STATE.library) and _top(frame.f_globals) == "scipy"


def _shuffled(shuffle, args, kwargs):
    """``shuffle(x)`` (a generator's, ``np.random.shuffle``) of a traced or dual ``x``: NumPy's
    permutation of ``x``'s rows (along ``axis``) is that of shuffling their indices, the same
    draws in the same order, so the indices are shuffled and ``x`` gathered by them in place.
    (NumPy's own shuffle takes a traced array for a Python sequence, and swaps rows that are
    views of it.)"""
    if getattr(shuffle, "__self__", None) is None:  # a method: the generator comes first
        generator, (x, *rest) = args[0], args[1:]
        order_of = functools.partial(shuffle, generator)
    else:
        (x, *rest), order_of = args, shuffle
    axis = rest[0] if rest else kwargs.get("axis", 0)
    order = np.arange(np.shape(x)[axis])
    order_of(order)
    x[...] = np.take(x, order, axis=axis)


def _permuted(permuted, args, kwargs):
    """``rng.permuted(x, axis=None, out=None)`` of a traced or dual ``x`` or ``out``: NumPy
    moves ``x``'s elements by draws that depend on the shape, the axis and the memory layout of
    the array it shuffles (``out``, or a copy of ``x`` in its layout), not on the values; so an
    array of the indices of ``x``'s elements in that layout is permuted by the same draws, and
    ``x`` gathered by them (into ``out`` if given, as NumPy writes it)."""
    (generator, x), axis, out = args, kwargs.get("axis"), kwargs.get("out")
    indices = np.empty_like(memory(out) if wrapped(out) else x if out is not None
                            else memory(x) if wrapped(x) else x, dtype=np.intp)
    indices[...] = np.arange(indices.size).reshape(np.shape(x))
    permuted(generator, indices, axis=axis, out=indices)
    result = np.reshape(x, -1)[indices]
    if out is None:
        return result
    out[...] = result
    return out


_SAMPLES = {"choice": ("a", "size", "replace", "p", "axis", "shuffle"),
            "permutation": ("x", "axis")}
"""The draws that pick from a population: of a traced one, its rows taken by the indices
drawn (``_sampled``)."""


def _sampled(draw, name, args, kwargs):
    """``rng.choice(a, ..., p=p)`` or ``rng.permutation(x)`` with traced values: NumPy picks
    the rows of an array by indices it draws as for a population of its length (the same draws
    in the same order), so the indices are drawn, with the plain values of ``p``, and the
    traced rows taken by them. The indices have no derivative (a draw is a decision): where
    they depend on traced weights ``p``, a replay would hold those of the call it recorded,
    so it traces such a call."""
    if getattr(draw, "__self__", None) is None:  # a method: the generator comes first
        draw, args = functools.partial(draw, args[0]), args[1:]
    bound = dict(zip(_SAMPLES[name], args))
    bound.update(kwargs)
    population = bound.get("a", bound.get("x"))
    axis = bound.get("axis", 0)
    weights = bound.get("p")
    if weights is not None and holds_wrapped([weights]):
        bound["p"] = memory(lists_as_arrays([weights])[0])
        _traced_on_replay("a draw weighted by traced values (rng.choice(..., p=...)): the "
                          "indices it draws depend on them")
    if not wrapped(population):  # only the weights were traced
        return draw(**bound)
    if name == "permutation":
        return np.take(population, draw(np.shape(population)[axis]), axis=axis)
    bound["a"] = np.shape(population)[axis]
    bound.pop("axis", None)
    return np.take(population, draw(**bound), axis=axis)


def _rejected(name, what="traced parameters", parameter="p"):
    """The refusal of a draw NumPy makes by rejection (``REJECTED``, a gamma's shape)."""
    return UnsupportedOperationError(
        f"{name}() with {what}: NumPy draws its numbers by rejection, or from a number of "
        "standard draws that depends on the parameters, which no formula of standard numbers "
        "mutad follows gives, so it has no derivative mutad computes. Pass "
        f"mutad.stop_gradient({parameter}) for draws without that derivative.")


def _traced_on_replay(reason):
    """Make the replays recording now trace the call they record instead (``reason``): what
    it draws depends on traced values, so the numbers recorded would not be those of another
    call's values."""
    for level in ACTIVE.running:
        recorder = getattr(level, "recorder", None)
        if recorder is not None:
            recorder.refuse(reason)


def _decided(draw, name, args, kwargs):
    """``rng.poisson(lam)``, ``rng.binomial(n, p)``, ... (``DECIDED``) with traced parameters:
    NumPy's integers drawn with their plain values, the same draws in the same order; the
    integers have no derivative."""
    _traced_on_replay(f"a draw of integers by traced parameters (rng.{name}(...)): the "
                      "integers it draws depend on them")
    return draw(*map(_stacked_plain, args), **{k: _stacked_plain(v) for k, v in kwargs.items()})


class _ModeRandomState(np.random.RandomState):
    """``np.random.RandomState(...)`` in the mode, as ``_ModeGenerator``."""


for _name in dir(np.random.Generator):
    if not _name.startswith("_") and _name not in ("bit_generator", "spawn", "bytes"):
        setattr(_ModeGenerator, _name, _drawn(getattr(np.random.Generator, _name)))
for _name in dir(np.random.RandomState):
    if not _name.startswith("_") and _name not in ("seed", "get_state", "set_state", "bytes"):
        setattr(_ModeRandomState, _name, _drawn(getattr(np.random.RandomState, _name)))


def drawing_argument(x, received=None):
    """An argument of the differentiated function as it receives it: a NumPy ``Generator``
    passed in draws through the mode (a stand-in over the same bit generator, whose state
    advances as NumPy's), as one it reaches by name does; an array of records of floats
    (which no engine traces as an argument) stands in as one made before the call that the
    function reaches by name (``Preexisting``), so that the arrays made from it are followed
    however they are made (``t = s.copy(); t["a"] *= x``), in the lists, tuples and dicts it
    is passed in too; the ids of the memory's owners go into ``received``, a set: an
    argument's memory, which comes back as it was, however ``f`` writes into it."""
    kind = type(x)
    if kind is np.random.Generator:
        return _ModeGenerator(x.bit_generator)
    if kind is np.ndarray:
        if not _followed_records(x.dtype):
            return x
        if received is not None:
            received.add(id(owner(x)))
        return MODE._stand_in(x)
    if kind is list or kind is tuple or kind is dict:
        items = list(x.values()) if kind is dict else x
        given = [drawing_argument(item, received) for item in items]
        if any(map(operator.is_not, given, items)):  # (else the caller's own container)
            return dict(zip(x, given)) if kind is dict else kind(given)
    return x


def _default_rng(*args, **kwargs):
    return _ModeGenerator(np.random.default_rng(*args, **kwargs).bit_generator)


def _mode_random():
    """``numpy.random`` as user code sees it in the mode: its functions' float draws are
    followed (``_drawn``), and ``default_rng`` gives generators whose draws are."""
    module = types.ModuleType(np.random.__name__, np.random.__doc__)
    module.__dict__.update(_random_namespace())
    return module


def _random_namespace():
    """The namespace of the mode's ``numpy.random`` (``_mode_random``)."""
    namespace = dict(vars(np.random))
    for name, value in vars(np.random).items():
        if isinstance(value, (types.BuiltinFunctionType, types.FunctionType,
                              types.MethodType)) and not name.startswith("_") \
                and name not in ("seed", "get_state", "set_state", "default_rng"):
            namespace[name] = _drawn(value)
    namespace["default_rng"] = _named(_default_rng, np.random.default_rng)
    namespace["RandomState"] = _ModeRandomState
    return namespace


def _mode_python(original):
    """Python's module ``original`` (``math``, ``cmath``, ``statistics``) as user code sees it
    in the mode: its functions of numbers follow traced scalars (``PYTHON_MODULES``)."""
    module = types.ModuleType(original.__name__, original.__doc__)
    module.__dict__.update(_mirrored(original, PYTHON_MODULES[original]))
    return module


MATH_REPLACEMENTS = {name: (getattr(math, name), math_function(getattr(math, name)))
                     for name in MATH if hasattr(math, name)}
MATH_REPLACEMENTS.update({name: (getattr(math, name), math_predicate(getattr(math, name), ufunc))
                          for name, ufunc in (("isfinite", np.isfinite), ("isnan", np.isnan),
                                              ("isinf", np.isinf))})
MATH_REPLACEMENTS["isclose"] = (math.isclose, math_isclose(math.isclose))
MATH_REPLACEMENTS.update({name: (getattr(math, name), math_of_sequences(getattr(math, name)))
                          for name in ("fsum", "dist", "sumprod") if hasattr(math, name)})
CMATH_REPLACEMENTS = {name: (getattr(cmath, name), cmath_function(getattr(cmath, name)))
                      for name in (*CMATH, "polar", "rect")}
CMATH_REPLACEMENTS.update({name: (getattr(cmath, name), math_predicate(getattr(cmath, name), ufunc))
                           for name, ufunc in (("isfinite", np.isfinite), ("isnan", np.isnan),
                                               ("isinf", np.isinf))})
STATISTICS_REPLACEMENTS = {name: (getattr(statistics, name),
                                  statistics_function(getattr(statistics, name)))
                           for name in STATISTICS if hasattr(statistics, name)}
PYTHON_MODULES = {math: MATH_REPLACEMENTS, cmath: CMATH_REPLACEMENTS,
                  statistics: STATISTICS_REPLACEMENTS}
"""Python's modules of functions of numbers whose copies the mode binds where user code binds
them (``import math``), and the functions swapped in them (name -> (Python's, the mode's))."""
for _swapped in PYTHON_MODULES.values():
    _BY_ORIGINAL.update({id(func): (func, new) for func, new in _swapped.values()})
_LIBRARY_MATH = _mode_python(math)
"""The ``math`` module as SciPy's code a differentiation follows reads it (``library_binding``)."""
_LIBRARY_CMATH = _mode_python(cmath)
"""The ``cmath`` module as SciPy's code reads it there (``cmath.exp(2j * pi * f1 / fs)`` of a
traced frequency in ``scipy.signal.czt``)."""
PICKLE_REPLACEMENTS = {name: (getattr(pickle, name), _unpickling(getattr(pickle, name)))
                       for name in ("load", "loads")}
PICKLE_REPLACEMENTS["dumps"] = (pickle.dumps, _pickling(pickle.dumps))
"""``pickle``'s functions, swapped in the ``pickle`` module itself (Python's other modules,
NumPy's and the libraries' read them there, and keep Python's: ``_unpickling``) and where a
user's module binds them (``from pickle import loads``)."""
_BY_ORIGINAL.update({id(func): (func, new) for func, new in PICKLE_REPLACEMENTS.values()})


@functools.wraps(importlib.import_module)
def _import_module(name, package=None):
    """``importlib.import_module`` in the mode: the library module it gives is switched as an
    ``import`` statement's is (``_Mode.reach``)."""
    module = _imported(_IMPORT_MODULE, name, package)
    if type(module) is types.ModuleType:
        MODE.reach(module)
    return module


IMPORTS = threading.local()
"""``depth``: the imports running in this thread through the mode's ``__import__`` and
``importlib.import_module``; the rule modules of the libraries they load are loaded once the
outermost one has returned (``_Mode.load_rules``), when no module of theirs is half-made."""


def _imported(importer, *arguments):
    """``importer(*arguments)``, an import in the mode; the outermost one loads the rule
    modules of the libraries imported since the last did (``_Mode.load_rules``)."""
    IMPORTS.depth = getattr(IMPORTS, "depth", 0) + 1
    try:
        module = importer(*arguments)
    finally:
        IMPORTS.depth -= 1
    if len(sys.modules) != MODE.rules_checked and not IMPORTS.depth:
        MODE.load_rules()
    return module


_IMPORT_MODULE = importlib.import_module
IMPORTLIB_REPLACEMENTS = {"import_module": (_IMPORT_MODULE, _import_module)}
"""``importlib``'s function that gives a module by its name, swapped in ``importlib`` and where
a user's module binds it, as ``pickle``'s are."""
_BY_ORIGINAL.update({id(func): (func, new) for func, new in IMPORTLIB_REPLACEMENTS.values()})


_IMPORT = builtins.__import__
_JSON_DEFAULT = json.JSONEncoder.default


def _json_default(encoder, o):
    """``json.JSONEncoder.default`` in the mode: a traced or dual value standing for a Python
    float or NumPy's float64 scalar (``x[0].item()``, ``x[0]``: floats, which json writes) is
    its number, whose digits a replay guards (as ``str()``'s); anything else is json's own
    (its TypeError naming NumPy's type: ``float32``, ``ndarray``)."""
    if wrapped(o):
        if o.dtype == np.float64 and stands_for_scalar(o):
            return o._decided(float)
        o = memory(o)[()] if stands_for_scalar(o) else memory(o)
    return _JSON_DEFAULT(encoder, o)


class _Mode:
    """The bindings swapped in while any differentiation runs."""

    def __init__(self):
        self.lock = threading.RLock()
        self.depth = 0
        self.random = _mode_random()
        self.numpy = _mode_numpy()
        self.numpy.random = self.random
        self.submodules = {name: _mode_submodule(name) for name in SUBMODULES}
        self.numpy.__dict__.update(self.submodules)
        self.by_submodule = {id(importlib.import_module("numpy." + name)): module
                             for name, module in self.submodules.items()}
        self.python = {id(module): _mode_python(module) for module in PYTHON_MODULES}
        # [a module, the mode's copy, what makes the copy's namespace, the module's _snapshot
        # when it was made]: made again where the module's bindings changed (NumPy loaded a
        # submodule lazily; the user set np.scale = 2.0 or rebound np.linalg.norm between
        # calls), so that user code reads in the mode what it reads outside it
        self.mirrors = [
            [np, self.numpy, lambda: {**_mirrored(np, REPLACEMENTS), "random": self.random,
                                      **self.submodules}],
            [np.random, self.random, _random_namespace],
            *([module, self.python[id(module)],
               functools.partial(_mirrored, module, replacements)]
              for module, replacements in PYTHON_MODULES.items()),
            *([importlib.import_module("numpy." + name), module,
               functools.partial(_mirrored, importlib.import_module("numpy." + name),
                                 SUBMODULE_REPLACEMENTS[name])]
              for name, module in self.submodules.items())]
        for mirror in self.mirrors:  # and its version (_VERSION) when that was taken
            version = _VERSION(vars(mirror[0])) if _VERSION is not None else None
            mirror += [_snapshot(mirror[0]), version,
                       version.value if version is not None else None]
        # (the mirrors' versions, and their values when all were last found unchanged, to
        # ask of all of them in one comparison on every entry: None until then)
        self.mirrored: tuple | None = None
        # id(namespace) -> (namespace, its size when scanned): by the namespace itself, not the
        # module's name (a script loaded twice from one file makes two modules of one name)
        self.scanned = {}
        self.sites = {  # (id(namespace), name) -> (namespace, name, original, replacement)
            (id(vars(module)), name): (vars(module), name, own, new)
            for module, replacements in ((pickle, PICKLE_REPLACEMENTS),
                                         (importlib, IMPORTLIB_REPLACEMENTS))
            for name, (own, new) in replacements.items()}
        # the sites as they are swapped (``_swap``): those of namespaces of many by namespace
        # (_Swaps), and the others one by one; made again when they change
        self.swaps = None
        self.methods = {}  # (cls, name) -> (the rule its installed method routes to, NumPy's)
        self.methods_version = -1  # registry.VERSIONS["method"] when they were installed
        self.cells = []  # (cell or namespace, key, what it held, the stand-in swapped in)
        # each array made before by its one stand-in while the cells hold them: two names of one
        # array (``V = W``) stay one object (``V is W``), whichever place the swap finds first
        self.array_stand_ins: dict = {}
        self.plain_views: dict = {}  # id(such a stand-in) -> the view the engines read (read_plain)
        self.modules = 0
        self.libraries = len(LIBRARIES)
        self.devices = {}  # id(device namespace) -> its mode version
        # ``builtins.__import__`` in the mode (``_importing``), bound once: put in and found by
        # identity on every entry and exit
        self.importer = self._importing
        self.routes = {}  # id(original) -> (original, its _Route), from the Rules' routes
        self.made = {}  # id(SciPy's function) -> (it, its _Made): the functions not routed
        self.switched = {}  # id(a library's public module) -> [it, its class in the mode]
        # id(module) -> module, of every module some module's namespace binds by a name other
        # than its parent package's attribute for it (``from scipy import linalg``, ``import
        # scipy.linalg as sla``); and its size when ``entered`` was chosen (None: to choose
        # again, ``switched`` changed)
        self.bound: dict = {}
        self.bound_scanned: dict = {}  # id(namespace) -> (namespace, its size when looked into)
        self.entered_of = None
        self.entered: list = []  # the pairs of ``switched`` switched on every entry
        # those of them of NumPy's and SciPy's modules (``_OWN_LIBRARIES``), and the others
        self.entered_apart: tuple = ([], [])
        # whether the libraries' side of the mode (their modules' own names and classes, and
        # JSON's encoder) is swapped in: not while the differentiated functions running reach
        # no library's module (``_reaches_no_library``)
        self.libraries_in = False
        self.reached: list = []  # those switched since the last entry, on first reach
        self.routes_version = -1  # registry.VERSIONS["route"] when they were read
        self.ndarray = None  # what np.ndarray is in the mode: NumPy's, or the constructor's
        self.scalars = {}  # name -> what np.<name> is in the mode (CALLED_TYPES): NumPy's or not
        # the version of the mode's numpy's namespace when it was last found or made to bind
        # NumPy's own types (``_holds_own_types``; None: not known)
        self.types_version = _VERSION(self.numpy.__dict__) if _VERSION is not None else None
        self.own_types = None
        # id(namespace) -> [a user module's namespace whose code reads float, what its float
        # is in the mode: PYTHON_FLOAT, Python's own where some code may compare by identity]
        self.floats = {}
        self.float_compares = {}  # id(namespace) -> (it, its size, _compares_float's answer)
        # the versions (_VERSION) of sys.modules and RULE_MODULES when enter last loaded the
        # rule modules of the libraries imported: unchanged, no library was imported since
        self.imports_of = sys.modules
        self.imports = None if _VERSION is None else (_VERSION(sys.modules),
                                                      _VERSION(RULE_MODULES))
        self.imported = None
        self.rules_checked = 0  # len(sys.modules) when imports in the mode last loaded them

    # finding the bindings ----------------------------------------------------------------

    def _scan(self, namespace, internal=False, module=None):
        """Note the bindings of ``namespace`` to swap: of a user module, those to NumPy, its
        factories and routed functions; of a library's public module, those to routed
        functions alone, where its own code reads them as globals; the rest of its routed
        functions, and of SciPy's public ``module`` its other Python functions (``_Made``), by
        switching the module's class (``_RoutingModule``, ``_MadeModule``): one assignment
        per module, not one per function, on every entry and exit."""
        own = str(namespace.get("__name__"))
        by_class = module is not None and type(module) is types.ModuleType and internal
        made_by_class = by_class and (
            _top(namespace) == "scipy"
            or own.startswith(("numpy.polynomial", "numpy.lib", "numpy.ctypeslib")))
        read = None  # (_own_names, asked once a routed function is found)
        for name, value in list(namespace.items()):
            if value is np and not internal:
                replacement = self.numpy
            elif isinstance(value, types.ModuleType) and not internal and is_namespace(value):
                replacement = self.device(value)
            elif not internal and type(value) is types.ModuleType and value in PYTHON_MODULES:
                replacement = self.python[id(value)]
            elif value is np.random and not internal:
                replacement = self.random
            elif isinstance(value, types.ModuleType) and id(value) in self.by_submodule \
                    and not internal:
                replacement = self.by_submodule[id(value)]
            else:
                pair = self.routes.get(id(value))
                if pair is None and not internal:
                    pair = _BY_ORIGINAL.get(id(value))
                if pair is not None and pair[0] is value:
                    replacement = pair[1]
                    if by_class and read is None:
                        read = _own_names(namespace)
                    if by_class and name not in read:
                        self.switched.setdefault(id(module), [module, _RoutingModule])
                        self.entered_of = None
                        continue
                elif not internal or made_by_class or _top(namespace) == "scipy":
                    replacement = self._made(value)
                    if replacement is None:
                        continue
                    if made_by_class:
                        self.switched[id(module)] = [module, _MadeModule]
                        self.entered_of = None  # (its class may have changed: chosen again)
                        continue
                else:
                    continue
            key = id(namespace), name
            site = self.sites.get(key)
            if site is None or site[0] is not namespace or site[2] is not value \
                    or site[3] is not replacement:  # (a scan again finds the sites it knows)
                self.sites[key] = (namespace, name, value, replacement)
                self.swaps = None

    def _made(self, value):
        """``_Made`` of ``value`` where it is a Python function of SciPy's that nothing routes
        (made once per function), ``_MadeFloats`` where it is one of NumPy's, else None."""
        if type(value) is types.FunctionType and _top(value.__globals__) not in _MADE_TOPS:
            return None  # (the user's own function, met on every entry: neither question asked)
        if _numpy_made(value):
            return made_floats(value)
        # (SciPy's by where its code is, not by its __module__: a user's function wrapped
        # with functools.wraps(scipy_function) bears SciPy's names, and is the user's code)
        if type(value) is not types.FunctionType or _top(value.__globals__) != "scipy":
            return None
        pair = self.made.get(id(value))
        if pair is None or pair[0] is not value:
            pair = self.made[id(value)] = (value, _Made(value))
        return pair[1]

    def _scan_modules(self, f):
        """Find the bindings in modules imported since the last scan, and in ``f``'s module
        if it gained names (a script binding ``from numpy import zeros`` after its first
        differentiation)."""
        if VERSIONS["route"] != self.routes_version:  # a rule module was loaded: look again
            self.routes_version = VERSIONS["route"]
            self.routes = {id(f): (f, _Route(f, stand_in))
                           for f, stand_in in table("route").items()}
            self.scanned.clear()
            self.modules = 0
        if len(LIBRARIES) != self.libraries:  # a device library's modules keep their bindings
            self.libraries = len(LIBRARIES)
            # (NumPy's and SciPy's public modules keep the routes swapped into them: the
            # functions user code reaches as scipy.sparse.diags)
            self.sites = {key: site for key, site in self.sites.items()
                          if _top(site[0]) not in INTERNAL or _routes_into(_top(site[0]))}
            self.swaps = None
        if len(sys.modules) != self.modules:
            for name, module in list(sys.modules.items()):
                namespace = getattr(module, "__dict__", None)
                if type(namespace) is dict:
                    self._note_bound(namespace)
                if not isinstance(module, types.ModuleType) or namespace is None or (
                        self.scanned.get(id(namespace), (None,))[0] is namespace):
                    continue
                self.scanned[id(namespace)] = (namespace, len(namespace))
                # A library's module filed under another package's name too (an alias in
                # sys.modules) is still the library's: judged by its own name, not the key.
                own = namespace.get("__name__")
                own = own if isinstance(own, str) else name
                if own.partition(".")[0] in STANDARD_LIBRARY:
                    continue  # math's own functions, random's: the names users bind are enough
                if own.partition(".")[0] not in INTERNAL:
                    self._scan(namespace)
                elif _routes_into(own.partition(".")[0]) \
                        and not any(part.startswith("_") for part in own.split(".")):
                    self._scan(namespace, internal=True, module=module)  # not its _basic
            self.modules = len(sys.modules)
        namespace = getattr(f, "__globals__", None)
        name = namespace.get("__name__") if namespace is not None else None
        seen, size = self.scanned.get(id(namespace), (None, None))
        if (isinstance(name, str) and (seen is not namespace or size != len(namespace))
                and name.partition(".")[0] not in INTERNAL):
            self.scanned[id(namespace)] = (namespace, len(namespace))
            self._scan(namespace)
            self._note_bound(namespace)

    def _note_bound(self, namespace):
        """Note the modules ``namespace`` binds (``bound``), where it is new or grew since it
        was looked into."""
        seen, size = self.bound_scanned.get(id(namespace), (None, None))
        if seen is namespace and size == len(namespace):
            return
        self.bound_scanned[id(namespace)] = (namespace, len(namespace))
        own = namespace.get("__name__")
        for name, value in list(namespace.items()):
            if isinstance(value, types.ModuleType) and not (
                    isinstance(own, str) and value.__dict__.get("__name__") == f"{own}.{name}"):
                self.bound[id(value)] = value

    def _entered(self):
        """The library modules whose class is switched on every entry (``_RoutingModule``,
        ``_MadeModule``): those at the top of their family (``scipy``, ``numpy.polynomial``:
        their package's class is not switched, so no read of them as its attribute is seen)
        and those some module's namespace binds by another name (``import scipy.linalg as
        sla``), which user or library code may read with no attribute of a package between.
        The others (``scipy.linalg.basic``, a deprecated module SciPy keeps to warn, two
        thirds of them) are reached as attributes of their package alone, whose switched class
        switches them as they are read (``reach``), or by an import, which switches them as it
        gives them (``_importing``), or from the function's cells (``_swap_cells``)."""
        now = len(self.bound)
        if now != self.entered_of:
            self.entered_of = now
            entered = []
            for module, cls in self.switched.values():
                parent, _, name = str(module.__dict__.get("__name__")).rpartition(".")
                package = sys.modules.get(parent)
                if package is None or id(package) not in self.switched \
                        or package.__dict__.get(name) is not module \
                        or self.bound.get(id(module)) is module:
                    entered.append((module, cls))
            self.entered = entered
            self.entered_apart = (
                [pair for pair in entered if _top(vars(pair[0])) in _OWN_LIBRARIES],
                [pair for pair in entered if _top(vars(pair[0])) not in _OWN_LIBRARIES])
        return self.entered

    def reach(self, module):
        """Switch the class of the library's module ``module``, read by code running in the
        mode, where it is one whose class the mode switches and no entry switched it; and
        switch it on every entry from the next on (``bound``): whatever bound it to a name
        while the function ran, which no scan sees, was done by code that read it so."""
        pair = self.switched.get(id(module))
        if pair is not None and pair[0] is module:
            with self.lock:
                if self.depth and type(module) is types.ModuleType:
                    module.__class__ = pair[1]
                    self.reached.append(pair)
                    self.bound[id(module)] = module

    def device(self, namespace):
        """The mode's version of device library ``namespace`` (``_ModeDevice``), made once."""
        mode = self.devices.get(id(namespace))
        if mode is None or mode._namespace is not namespace:
            mode = self.devices[id(namespace)] = _ModeDevice(namespace, self.numpy)
        return mode

    # swapping them -----------------------------------------------------------------------

    def enter(self, f=None, arguments=None):
        """A differentiation starts in this thread: load the rule modules of the libraries in
        use, and swap the mode's bindings in if none was running; the libraries' side of them
        (``swap_libraries``) where ``f``, called with ``arguments`` (None: not known), may
        reach a library's module (``_reaches_no_library``)."""
        now = (self.imports[0].value, self.imports[1].value) \
            if self.imports is not None and sys.modules is self.imports_of else None
        if now is None or now != self.imported:  # (sys.modules or RULE_MODULES changed)
            load_rule_modules()
            cupy_array = getattr(sys.modules.get("cupy"), "ndarray", None)
            if cupy_array is not None:  # known before the scan: its SciPy's functions are
                namespace_of(cupy_array)  # routed in the first differentiation too
            self.imported = now  # (as read before: an import made since shows next time)
        # (the lock taken and released by its methods, not a ``with`` block, whose special
        # methods are looked up anew each time: the mode's entry and exit run once per
        # differentiation)
        self.lock.acquire()
        try:
            self.depth += 1
            if self.depth > 1:
                if self.methods_version != VERSIONS["method"]:
                    self._route_methods()
                if not self.libraries_in and (
                        arguments is None or not _reaches_no_library(f, arguments)):
                    self.swap_libraries(1)
                holders = self._swap_cells(f)
                self._install_types()
                return holders
            try:
                self.libraries_in = False
                # (asked before the user's names are swapped: of what they bind outside)
                libraries = arguments is None or not _reaches_no_library(f, arguments)
                builtins.__import__ = self.importer
                self._mirror()
                self._scan_modules(f)
                self._swap(1)
                self._entered()
                plain = types.ModuleType  # (read once: 40 modules, on every entry and exit)
                for module, cls in self.entered_apart[1]:
                    if type(module) is plain:
                        module.__class__ = cls
                if libraries:
                    self.swap_libraries(1)
                if self.methods_version != VERSIONS["method"]:
                    self._route_methods()
                self.ndarray = None
                if self.scalars:  # (a new one where the last entry chose some: the common
                    self.scalars = {}  # case, none, keeps the empty one)
                holders = self._swap_cells(f)
                self._install_types()
                return holders
            except BaseException:
                self._undo()
                self.depth -= 1
                raise
        finally:
            self.lock.release()

    def _mirror(self):
        """Make the mode's copies of NumPy's modules and ``math`` again where a module's
        bindings changed since they were made (``self.mirrors``)."""
        if self.mirrored is not None:  # (a loop, not a comprehension: on every entry)
            for version, known in zip(*self.mirrored):
                if version.value != known:
                    break
            else:
                return  # (every module's version as last known: nothing bound since, in any)
        for mirror in self.mirrors:
            module, copy, make, snapshot, version, known = mirror
            now = version.value if version is not None else None  # read before comparing: a
            # change made after it shows next time
            if version is not None and now == known:
                continue
            if not _unchanged(module, snapshot):
                namespace = make()
                copy.__dict__.clear()
                copy.__dict__.update(namespace)
                mirror[3] = _snapshot(module)
            mirror[5] = now
        if _VERSION is not None:  # (each as read above: a change made since shows next time)
            self.mirrored = ([mirror[4] for mirror in self.mirrors],
                             [mirror[5] for mirror in self.mirrors])

    def exit(self):
        """A differentiation ended (returned or raised): swap NumPy's bindings back when it
        was the last one running."""
        self.lock.acquire()  # (as in ``enter``)
        try:
            self.depth -= 1
            if self.depth == 0:
                self._undo()
        finally:
            self.lock.release()

    def _importing(self, name, globals=None, locals=None, fromlist=(), level=0):
        """``builtins.__import__`` in the mode: ``import numpy`` (``as np``, ``from numpy import
        zeros``) run by user code in a thread that differentiates binds the mode's module, as
        the module-level names are bound (a function that imports NumPy in its body)."""
        module = _imported(_IMPORT, name, globals, locals, fromlist, level)
        if type(module) is types.ModuleType:  # (``from scipy.linalg.basic import solve``)
            self.reach(module)
        if (module is np or module in PYTHON_MODULES) and _in_mode() and globals is not None:
            caller = globals.get("__name__")
            if isinstance(caller, str) and caller.partition(".")[0] not in INTERNAL:
                return self.numpy if module is np else self.python[id(module)]
        return module

    def load_rules(self):
        """Code running in the mode imported modules (``import scipy.stats`` in the function's
        body, SciPy's ``scipy.stats`` loaded on its first read): load the rule modules of the
        libraries among them (``RULE_MODULES``), and bind what they route in the mode as an
        entry would have, had they been imported before it, so that the function runs as it
        runs where they were (the rule modules are loaded by the first differentiation that
        finds their library imported, not by ``import mutad``)."""
        with self.lock:
            self.rules_checked = len(sys.modules)
            if all(library not in sys.modules or rules in sys.modules
                   for library, rules in RULE_MODULES.items()):
                return
            IMPORTS.depth = getattr(IMPORTS, "depth", 0) + 1  # (their own imports wait)
            # (the rule modules bind the libraries' own functions, as when imported before a
            # differentiation: ``from scipy.sparse.linalg import spsolve`` read in the mode gave
            # the stand-in, for good, which SciPy's ``solver != ssl.spsolve`` then told apart)
            switched = self._library_side() if self.depth else None
            try:
                with plain_allocation():
                    load_rule_modules()
            finally:
                IMPORTS.depth -= 1
                if switched is not None:
                    if builtins.__import__ is _IMPORT:
                        builtins.__import__ = self.importer
                    for module, cls in switched:
                        module.__class__ = cls
            if self.depth:
                self._scan_modules(None)
                self._swap(1)
                plain = types.ModuleType
                for module, cls in self._entered():
                    if type(module) is plain:
                        module.__class__ = cls
                self.swap_libraries(1)  # (its imports may be the libraries' own)
                if self.methods_version != VERSIONS["method"]:
                    self._route_methods()
            self.rules_checked = len(sys.modules)

    def _library_side(self):
        """Bind the libraries' side of every site, Python's import, and give every switched
        module its plain class while the mode stays entered; gives the modules switched, for
        their classes back (the sites' side is bound again by the caller)."""
        self._swap(0)
        self._swap(0, libraries=True)
        if builtins.__import__ is self.importer:  # (its imports switch the modules they give)
            builtins.__import__ = _IMPORT
        plain = types.ModuleType
        switched = [(module, cls) for module, cls in (*self.entered, *self.reached)
                    if type(module) is cls]
        for module, _ in switched:
            module.__class__ = plain
        return switched

    def _install_types(self):
        """Bind ``np.ndarray`` and NumPy's scalar types in the mode's module to what the code
        ``_swap_cells`` read chose: the stand-ins where it calls them and never compares them by
        identity, NumPy's own otherwise."""
        namespace = self.numpy.__dict__
        if self.ndarray is not None or self.scalars or not self._holds_own_types():
            self.numpy.ndarray = self.ndarray or np.ndarray
            namespace.update(_CALLED_ORIGINALS)
            for name, chosen in self.scalars.items():
                if chosen is not None:
                    namespace[name] = chosen
        for namespace, name, chosen in self.floats.values():  # (a builtin: bound as a global)
            if chosen is PYTHON_BUILTINS[name]:
                namespace[name] = chosen
            elif namespace.get(name) is PYTHON_BUILTINS[name]:
                del namespace[name]

    def _holds_own_types(self):
        """Whether the mode's ``numpy`` binds NumPy's own ``ndarray`` and types of
        ``CALLED_TYPES``, as ``_undo`` left it, its namespace's version (``_VERSION``) proving
        nothing was bound there since: the common case, a function that calls none of them,
        then costs no ``update`` of them on entry and exit."""
        return self.own_types is not None and self.types_version.value == self.own_types

    def _undo(self):
        _NUMBER_TEXTS.clear()
        for namespace, name, _ in self.floats.values():
            if namespace.get(name) is PYTHON_BUILTINS[name]:
                del namespace[name]
        if self.floats:  # (emptied where it holds some: the common case holds none)
            self.floats = {}
        if not self._holds_own_types():
            self.numpy.ndarray = np.ndarray
            self.numpy.__dict__.update(_CALLED_ORIGINALS)
            self.own_types = self.types_version.value if self.types_version is not None else None
        if builtins.__import__ is self.importer:
            builtins.__import__ = _IMPORT
        if self.libraries_in:
            self.swap_libraries(0)
        self._swap(0)
        plain = types.ModuleType
        for module, cls in self.entered_apart[1]:
            if type(module) is cls:
                module.__class__ = plain
        while self.reached:
            module, cls = self.reached.pop()
            if type(module) is cls:
                module.__class__ = plain
        # (a place may hold another place's stand-in: ping-pong buffers swapped by the
        # function, ``self.a, self.b = self.b, self.a``; each gets back what that one stands for)
        originals = {id(stand_in): (stand_in, original)
                     for _, _, original, stand_in in self.cells} if self.cells else {}
        if self.array_stand_ins:  # (the common case made none: the empty ones are kept)
            self.array_stand_ins = {}
        if self.plain_views:
            self.plain_views = {}
        while self.cells:
            place, key, _, _ = self.cells.pop()
            if type(place) is list:  # (the function may have moved its items: each one)
                for i, held in enumerate(place):
                    pair = originals.get(id(held))
                    if pair is not None and held is pair[0]:
                        place[i] = pair[1]
                continue
            held = _get(place, key)
            pair = originals.get(id(held))
            if pair is not None and held is pair[0]:
                _put(place, key, pair[1])

    def _swap(self, to, libraries=False):
        """Bind side ``to`` (0: the library's, 1: the mode's) of every site but those of the
        namespaces of many of NumPy's and SciPy's own modules (``_OWN_LIBRARIES``), of those
        alone where ``libraries``."""
        if self.swaps is None:
            by_namespace: dict = {}
            for site in self.sites.values():
                by_namespace.setdefault(id(site[0]), []).append(site)
            few = [group for group in by_namespace.values() if len(group) <= FEW_SITES]
            many = [_Swaps(group[0][0], [site[1:] for site in group])
                    for group in by_namespace.values() if len(group) > FEW_SITES]
            self.swaps = ([one for one in many if _top(one.namespace) in _OWN_LIBRARIES],
                          [one for one in many if _top(one.namespace) not in _OWN_LIBRARIES],
                          tuple(site for group in few for site in group))
        if libraries:
            _Swaps.swap(self.swaps[0], to)
            return
        _, many, few_sites = self.swaps
        _Swaps.swap(many, to)
        _swap_sites(few_sites, to)

    def swap_libraries(self, to):
        """Bind side ``to`` (1: the mode's) of the libraries' side of the mode: the names
        NumPy's and SciPy's own modules read as globals, those modules' classes, JSON's
        encoder's ``default``; 0: the libraries' own. Needed only where a function running
        may reach one of their modules: their code runs, and reads their modules'
        attributes, nowhere else (``_reaches_no_library``)."""
        self.libraries_in = bool(to)
        if to:
            json.JSONEncoder.default = _json_default
            self._swap(1, libraries=True)
            plain = types.ModuleType
            for module, cls in self.entered_apart[0]:
                if type(module) is plain:
                    module.__class__ = cls
        else:
            json.JSONEncoder.default = _JSON_DEFAULT
            self._swap(0, libraries=True)
            for module, cls in self.entered_apart[0]:
                if type(module) is cls:
                    module.__class__ = types.ModuleType

    def _swap_cells(self, f, depth=4):
        """Swap what the mode replaces or routes where ``f`` reaches it through its closure
        cells and the module-level names its code reads (a bound method or a partial, which the
        module scan leaves), and where the user functions, bound methods and partials held there
        reach it, ``depth`` levels down. Gives the places found so (``holders``, what
        ``settle`` looks into when ``f`` returns): ``(place, key)``, or ``(container, None)``
        for all of an object's attributes, a list's items or a dict's."""
        todo, seen, objects = [(f, 0)], set(), set()
        holders: list = []
        while todo:
            g, level = todo.pop()
            # (a method by its object and function: ``_methods`` binds it anew each time)
            key: Any = (id(g.__self__), id(g.__func__)) if type(g) is types.MethodType else id(g)
            if g is None or key in seen or level > depth:
                continue
            seen.add(key)
            names: Any = ()
            if isinstance(g, functools.partial):
                todo.append((g.func, level + 1))
                # a work array bound as the partial's keyword (partial(step, work=W))
                places: list = [(g.keywords, key) for key in g.keywords]
                holders.append((g.keywords, None))
                code = namespace = None
                own = False
                g = None
            elif type(g) is not types.FunctionType and user_object(g) \
                    and not callable(getattr(g, "__func__", None)):
                todo += [(method, level) for method in _methods(g, ())]  # a callable object
                continue
            else:
                g_bound, g = g, getattr(g, "__func__", g)
                code, namespace = getattr(g, "__code__", None), getattr(g, "__globals__", None)
                package = str((namespace or {}).get("__name__")).partition(".")[0]
                if package in INTERNAL and package != "mutad":
                    continue  # NumPy's and SciPy's own functions keep their bindings
                # mutad's own (a wrapper around the user's function, in testing or api) keep
                # theirs too, but the functions they hold are followed, and a routed function
                # or method they hold (the user's f itself: mutad.hessian(
                # scipy.special.logsumexp, x)) is swapped.
                own = package == "mutad"
                closure = getattr(g, "__closure__", None)
                places = [(cell, "cell_contents") for cell in closure] if closure else []
                if not own:  # (mutad's own closures hold what its engines need as it is)
                    holders += places
            if code is not None and namespace is not None and not own:
                # its own code's and its nested functions' names (a lambda's), and of those
                # the types and builtins the mode stands in for
                names, called, builtins_read = _read_by(code)
                if "ndarray" in names:
                    calls, compares = _uses_ndarray(code)
                    self.ndarray = np.ndarray if compares or self.ndarray is np.ndarray else (
                        ndarray if calls else self.ndarray)
                for name in called:
                    original, stand_in = CALLED_TYPES[name]
                    calls, compares = _uses(code, name)
                    chosen = self.scalars.get(name)
                    self.scalars[name] = original if compares or chosen is original else (
                        stand_in if calls else chosen)
                for name in builtins_read:
                    stand_in = PYTHON_BUILTINS[name]
                    if namespace.get(name, stand_in) is not stand_in:
                        continue
                    # (called, or handed on to be called: map(float, x), defaultdict(float))
                    original = getattr(builtins, name)
                    site = self.floats.setdefault((id(namespace), name), [namespace, name, None])
                    site[2] = original if site[2] is original \
                        or _keeps_builtin(code, name) \
                        or self._compares_float(namespace, name) else stand_in
                for name in names:  # (one loop, not two comprehensions: a few names)
                    holders.append((namespace, name))  # (a global f binds: ``global``)
                    if name in namespace:
                        places.append((namespace, name))
                bound = getattr(g_bound, "__self__", None)
                if bound is not None and user_object(bound):  # (a function's: None, not asked)
                    holders += attribute_holders(bound)
                    # self.u0 of a method: the attributes its code names, and the code of the
                    # methods (properties, a base's through super()) it names on self
                    places += _attributes(bound, names)
                    # and its class's (self.buf of a class attribute, a cached method)
                    for base in type(bound).__mro__:
                        if _user_class(base):
                            places += _class_attributes(base, names)
                            holders += [(base, name) for name in names]
                    todo += [(method, level + 1) for method in _methods(bound, names)]
                elif isinstance(bound, type) and _user_class(bound):  # a classmethod's cls.W
                    places += [(bound, name) for name in names if name in vars(bound)]
                    holders += [(bound, name) for name in names]
                defaults = getattr(g, "__defaults__", None)
                if defaults:
                    places += [(g, i) for i in range(len(defaults))]
                defaults = getattr(g, "__kwdefaults__", None)
                if defaults:
                    places += [(g, name) for name in defaults]
            while places:
                place, key = places.pop()
                try:
                    value = _get(place, key)
                except ValueError:  # a cell not filled yet
                    continue
                if type(value) in _ATOMS or value is self.numpy:  # (a number, a string, the
                    continue  # mode's numpy module: nothing to swap or follow)
                stand_in = self._stand_in(value, routed_only=own)
                if stand_in is not None:
                    self.cells.append((place, key, value, stand_in))
                    _put(place, key, stand_in)
                elif type(value) is types.FunctionType:  # (a helper of the user's: followed,
                    todo.append((value, level + 1))  # as the last branch would, asked first)
                elif type(value) is dict and level < depth and place is not value:
                    places += [(value, k) for k in list(value)[:64]]  # a table of callbacks
                    holders.append((value, None))
                elif type(value) is list and not own and id(value) not in objects:
                    # work arrays held in a list (``self.k[i][:] = ...``, a layer's buffers)
                    objects.add(id(value))
                    holders.append((value, None))
                    places += [(value, i) for i in range(min(len(value), 64))]
                elif isinstance(value, tuple) and not own and (
                        held := _tuple_stand_in(value, self._stand_in)) is not None:
                    # arrays in a tuple, which holds them for good: a tuple of their stand-ins
                    self.cells.append((place, key, value, held))
                    _put(place, key, held)
                elif isinstance(value, type) and _user_class(value) and code is not None:
                    places += _class_attributes(value, names)
                    holders += [(value, name) for name in names]
                    todo += [(method, level + 1) for method in _methods(value, names)
                             if isinstance(getattr(method, "__self__", None), type)]
                elif user_object(value) and type(value) is not functools.partial \
                        and level < depth and id(value) not in objects:
                    # An object made before, reached by a name (``model.u0.copy()``, a
                    # model's ``model.run(k)``): the attributes the code names, as of a
                    # method's ``self``, and the code of the methods it names
                    objects.add(id(value))
                    places += _attributes(value, names)
                    holders += attribute_holders(value)
                    todo += [(method, level + 1) for method in _methods(value, names)]
                elif type(value) is types.ModuleType and id(value) in self.switched:
                    self.reach(value)  # (``sla = scipy.linalg.basic`` held by an object)
                elif type(value) is types.ModuleType and _user_module(value) \
                        and level < depth and id(value) not in objects:
                    # a module of the user's reached by a name (``import buffers``, then
                    # ``buffers.W``): the attributes the code names, as of an object
                    objects.add(id(value))
                    attributes = vars(value)
                    places += [(attributes, name) for name in names if name in attributes]
                elif callable(value) and not isinstance(value, (type, types.ModuleType)):
                    todo.append((value, level + 1))
        return holders

    def _compares_float(self, namespace, name="float"):
        """Whether the code of some function or class of the module whose namespace is
        ``namespace`` needs Python's own builtin ``name`` (``_keeps_builtin``: compares a type
        with ``float``, loads ``type`` other than to call it): the mode's, bound as the
        module's global, would be the one it reads."""
        # (its size without the stand-ins the mode binds there itself, ``_install_types``:
        # a nested differentiation finds them bound, and must not scan the module again)
        size = len(namespace) - sum(namespace.get(builtin) is stand_in
                                    for builtin, stand_in in PYTHON_BUILTINS.items())
        known = self.float_compares.get((id(namespace), name))
        if known is None or known[0] is not namespace or known[1] != size:
            compares = any(_keeps_builtin(code, name) for code in _own_codes(namespace)
                           if name in _names(code))
            known = self.float_compares[id(namespace), name] = (namespace, size, compares)
        return known[2]

    def _hold(self, place, key):
        """Swap into ``place`` (a dict, a list) at ``key`` the stand-in of the float array it
        holds there, till the mode ends, as for an array a global dict holds: the container a
        cached function returns, which its cache keeps."""
        value = place[key]
        if type(value) is np.ndarray and value.dtype.kind in "fc":
            stand_in = self._stand_in(value)
            self.cells.append((place, key, value, stand_in))
            place[key] = stand_in

    def _stand_in(self, value, routed_only=False):
        """What stands in for ``value`` in the mode (the numpy module, a function the mode
        replaces or routes, a bound method of a routed class, a partial of these, an array
        made before, of floats or of a kind whose arithmetic makes floats (an index grid
        ``idx = np.arange(n)``, a mask, dates: ``SELF_STANDING``), so that the float arrays
        the function makes of it are followed: ``Preexisting``), or None; with
        ``routed_only``, only for the functions and methods it routes."""
        kind = type(value)
        if kind is np.ndarray:
            if routed_only or not (follows_floats(value.dtype)
                                   or value.dtype.kind in SELF_STANDING):
                return None
            stand_in = self.array_stand_ins.get(id(value))
            if stand_in is None or stand_in.original is not value:
                stand_in = value.view(Preexisting)
                stand_in.original = value
                self.array_stand_ins[id(value)] = stand_in
            return stand_in
        if kind is types.FunctionType:  # (the user's functions, met on every entry: of the
            # questions below, those a Python function may answer)
            pair = self.routes.get(id(value))
            if pair is None and not routed_only:
                pair = _BY_ORIGINAL.get(id(value))
            if pair is not None and pair[0] is value:
                return pair[1]
            return None if routed_only else self._made(value)
        if value is np:
            return None if routed_only else self.numpy
        if isinstance(value, types.ModuleType) and is_namespace(value):
            return None if routed_only else self.device(value)
        if type(value) is types.ModuleType and value in PYTHON_MODULES:
            return None if routed_only else self.python[id(value)]
        if value is np.random:
            return None if routed_only else self.random
        if type(value) is np.random.Generator:  # made before: the same bit generator's numbers
            return None if routed_only else _ModeGenerator(value.bit_generator)
        if isinstance(value, types.ModuleType) and id(value) in self.by_submodule:
            return None if routed_only else self.by_submodule[id(value)]
        pair = self.routes.get(id(value))
        if pair is None and not routed_only:
            pair = _BY_ORIGINAL.get(id(value))
        if pair is not None and pair[0] is value:
            return pair[1]
        if not routed_only and (made := self._made(value)) is not None:
            return made
        if type(value) is np.ufunc and not routed_only:  # a library's, bound by a name (``from
            return mode_ufunc(value)  # scipy.special import gammaln``): of lists, as NumPy's
        if isinstance(value, types.MethodType) and not isinstance(value.__self__, type):
            owner_class, name = type(value.__self__), value.__func__.__name__
            if any((base, name) in self.methods for base in owner_class.__mro__):
                routed = getattr(owner_class, name, None)
                if routed is not None and routed is not value.__func__:
                    return types.MethodType(routed, value.__self__)
        if isinstance(value, functools.partial):
            func = self._stand_in(value.func, routed_only)
            if func is not None:
                return functools.partial(func, *value.args, **value.keywords)
        if routed_only:
            return None
        if type(value) is LRU_CACHED and type(getattr(value, "__wrapped__", None)) \
                is types.FunctionType and str(value.__wrapped__.__globals__.get(
                    "__name__")).partition(".")[0] not in INTERNAL:
            return _CachedStandIn(value, self._stand_in, self._hold)
        if type(value) is staticmethod and type(value.__func__) is LRU_CACHED:
            held = self._stand_in(value.__func__)  # (a cached static method of a class)
            return None if held is None else staticmethod(held)
        wrap = COMPILED_OBJECTS.get(type(value))
        if wrap is not None:
            return wrap(value)
        if isinstance(value, types.BuiltinMethodType | types.MethodType) and \
                type(value.__self__) in COMPILED_OBJECTS:  # a compiled object's method: lu.solve
            return getattr(COMPILED_OBJECTS[type(value.__self__)](value.__self__), value.__name__)
        return None

    def _route_methods(self):
        """Install the methods the Rules route (facet ``method``), once: each calls its rule
        when a traced array is among its arguments in a thread that differentiates, and the
        method it replaces otherwise (one Python call more), so that a differentiation need not
        install and remove them (85 class attributes, most of its fixed cost). Nothing to do
        unless a Rule's ``method`` was set since."""
        version = VERSIONS["method"]
        if self.methods_version == version:
            return
        for (cls, name), rule in table("method").items():
            installed = self.methods.get((cls, name))
            if installed is None or installed[0] is not rule:
                original = installed[1] if installed else next(
                    base.__dict__[name] for base in cls.__mro__ if name in base.__dict__)
                self.methods[cls, name] = rule, original
                setattr(cls, name, _routed(cls, name, rule, original))
        self._hand_methods({cls for cls, _ in table("method")} | HANDED_CLASSES)
        self.methods_version = version

    def _hand_methods(self, routed):
        """Install, once, the library's other public methods of the classes whose methods
        are routed and of ``HANDED_CLASSES``, their bases and subclasses (a sparse matrix's
        ``diagonal``, a distribution's ``rvs``, a polynomial's ``linspace``), as ``_handing``
        makes them: the new float arrays they hand user code are
        constants, as the routed ones' are (``_handed``)."""
        family, seen = [*routed], set()
        while family:
            cls = family.pop()
            if cls in seen or not f"{cls.__module__}.".startswith(HANDING_LIBRARIES):
                continue
            seen.add(cls)
            family += [*cls.__mro__[1:], *cls.__subclasses__()]
            for name, value in list(vars(cls).items()):
                if type(value) is types.FunctionType and (cls, name) not in self.methods \
                        and (not name.startswith("_") or name in HANDED_OPERATORS) \
                        and not hasattr(value, "handing"):
                    with contextlib.suppress(TypeError, AttributeError):  # (a class that
                        setattr(cls, name, _handing(value))  # refuses: its method as it is)


def _codes(code):
    """``code`` and the code of the functions defined in it."""
    codes = [code]
    while codes:
        c = codes.pop()
        yield c
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


@functools.lru_cache(maxsize=4096)
def _names(code):
    """The names ``code`` (immutable) and the code of the functions defined in it read (read
    again on every entry of the mode: kept)."""
    return tuple(sorted({name for c in _codes(code) for name in c.co_names}))


@functools.lru_cache(maxsize=4096)
def _read_by(code):
    """``_names(code)``, the names of ``CALLED_TYPES`` among them and those of
    ``PYTHON_BUILTINS`` (kept, as those are: one look-up of ``code`` on every entry of the
    mode, not one per question, each of which hashes the code object)."""
    names = _names(code)
    return (names, tuple(sorted(CALLED_TYPES.keys() & names)),
            tuple(name for name in PYTHON_BUILTINS if name in names))


def _own_names(namespace):
    """The names that the code of the functions and classes defined in the module whose
    namespace is ``namespace`` reads as globals, which no attribute access of the module
    sees, found among its bindings, its classes' attributes and the containers it binds (not
    the names it reads as attributes alone, ``self.sum()``, which ``co_names`` holds too: the
    mode's class of the module answers those, and swapping them would cost every entry)."""
    found: set = set()
    for code in _own_codes(namespace):
        for c in _codes(code):
            _global_names(c, found)
    return found


def _global_names(code, found):
    """Add to ``found`` the names ``code`` (not the code objects within it) reads or writes
    as globals (or, in a class's body, as names), read from its instructions as ``dis`` reads
    them, without making an object per instruction (the modules of a library, on the first
    differentiation that finds them: thousands of functions)."""
    names, raw, extended = code.co_names, code.co_code, 0
    for i in range(0, len(raw), 2):
        op, arg = raw[i], raw[i + 1] | extended
        extended = arg << 8 if op == _EXTENDED_ARG else 0
        if op in _GLOBAL_OPCODES:
            found.add(names[arg >> 1 if op in _NULL_FLAGGED else arg])


_GLOBAL_OPCODES = frozenset(dis.opmap[name] for name in (
    "LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME", "DELETE_NAME",
    "LOAD_FROM_DICT_OR_GLOBALS") if name in dis.opmap)
_EXTENDED_ARG = dis.EXTENDED_ARG
# (from Python 3.11, LOAD_GLOBAL's argument holds the name's index shifted past a flag)
_NULL_FLAGGED = frozenset((dis.opmap["LOAD_GLOBAL"],) if sys.version_info >= (3, 11) else ())


def _own_codes(namespace):
    """The code of the functions and classes defined in the module whose namespace is
    ``namespace`` (``_own_names``)."""
    codes, seen, package = [], set(), _top(namespace)
    todo = [value for name, value in namespace.items() if name != "__builtins__"]
    while todo:
        value = todo.pop()
        kind = type(value)  # (not isinstance, which would ask a lazy object's __class__)
        if kind in _ATOMS or id(value) in seen:
            continue
        seen.add(id(value))
        if kind is staticmethod or kind is classmethod:
            todo.append(value.__func__)
        elif issubclass(kind, property):
            todo += [value.fget, value.fset, value.fdel]
        elif issubclass(kind, functools.partial):
            todo.append(value.func)
        elif kind is types.FunctionType:
            if value.__globals__ is namespace:  # (not _names: its cache is for user code)
                codes.append(value.__code__)
            todo.append(value.__dict__.get("__wrapped__"))
        elif issubclass(kind, type) and str(value.__module__).partition(".")[0] == package:
            todo += vars(value).values()  # (its methods' globals tell in which module it was
            # defined: its __module__ may name the public module)
        elif kind in (dict, list, tuple, set, frozenset):
            todo += value.values() if kind is dict else value
    return codes


_ATOMS = frozenset((str, int, float, bool, bytes, complex, type(None)))
"""Values ``_own_names`` need not look into."""


# functions that reach no library's module -----------------------------------------------

_OWN_LIBRARIES = ("numpy", "scipy")
"""The libraries whose modules' own names (``_Swaps``) and classes (``_RoutingModule``) the
mode swaps for what their code reads: the side of the mode a function that can reach none of
their modules (``_reaches_no_library``) never meets."""

_PLAIN_ATTRIBUTES = frozenset(
    name for kind in (np.ndarray, np.generic, np.dtype, list, tuple, dict, str, int, float,
                      complex, range, slice)
    for name in dir(kind) if not name.startswith("_"))
"""The attributes code may read of the values it holds and still reach no library's module:
NumPy's arrays', scalars' and dtypes', and Python's numbers', strings' and containers' (not a
private or special one: ``x.__array_namespace__()`` is NumPy's module)."""

_PLAIN_BUILTINS = {name: getattr(builtins, name) for name in (
    "abs", "all", "any", "bool", "complex", "dict", "divmod", "enumerate", "float", "int",
    "isinstance", "len", "list", "max", "min", "pow", "range", "reversed", "round", "slice",
    "sorted", "sum", "tuple", "zip")}
"""Python's builtins that reach no library's module with the values they are given."""

_REACHING_OPCODES = frozenset(name for name in (
    "IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR", "LOAD_BUILD_CLASS", "LOAD_NAME", "STORE_NAME",
    "DELETE_NAME", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_SUPER_ATTR",
    "SETUP_ANNOTATIONS") if name in dis.opmap)
"""Instructions after which no reading of a code tells what it reaches: an import, a class
made, a module's or a class's body."""

_ATTRIBUTE_OPCODES = frozenset(name for name in (
    "LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR") if name in dis.opmap)
_NUMPY_SCALARS = frozenset(np.sctypeDict.values())
_BUILTIN_FUNCTION = type(len)


def _plain_reads(code):
    """The globals ``code`` (and the code of the functions defined in it) reads, each with
    the attributes it reads of it where it reads it only as ``name.attribute`` (else None), as
    a tuple of pairs; None where the code imports, makes a class, reads names as a module's body
    does or reads an attribute not in ``_PLAIN_ATTRIBUTES`` of another value."""
    reads: dict = {}
    for c in _codes(code):
        instructions = list(dis.get_instructions(c))
        read_as_attribute = set()
        for k, instruction in enumerate(instructions):
            name = instruction.opname
            if name in _REACHING_OPCODES:
                return None
            if name == "LOAD_GLOBAL":
                following = instructions[k + 1] if k + 1 < len(instructions) else None
                if following is not None and following.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                    read_as_attribute.add(k + 1)
                    attributes = reads.setdefault(instruction.argval, set())
                    if attributes is not None:
                        attributes.add(following.argval)
                else:
                    reads[instruction.argval] = None
            elif name in _ATTRIBUTE_OPCODES and k not in read_as_attribute \
                    and instruction.argval not in _PLAIN_ATTRIBUTES:
                return None
    return tuple((name, None if attributes is None else frozenset(attributes))
                 for name, attributes in reads.items())


def _reaches_no_library(f, arguments, depth=4):
    """Whether ``f``, called with ``arguments`` (``(args, kwargs)``), can reach no module of
    NumPy's or SciPy's but through the functions of NumPy's core (``_core_of_numpy``), so that
    their modules' own names and classes need not be swapped (``_OWN_LIBRARIES``): a user's
    function whose code (``_plain_reads``), and that of the user's functions it holds,
    ``depth`` levels down, reads only plain values (``_plain_values``: numbers, strings,
    arrays, containers of them), the builtins of ``_PLAIN_BUILTINS``, and NumPy's module as
    ``np.<name>`` of those functions; given arguments of plain values alone. Code of those
    libraries' modules runs only where one of their functions or objects is called, and reads
    their modules' attributes only where it holds them: a value reached so holds none of them.
    (Loops, not comprehensions, and arrays and numbers told at once: asked on every
    differentiation.)"""
    args, kwargs = arguments
    functions: list = [(f, depth)]
    held: list = [(kwargs, depth)] if kwargs else []
    for value in args:
        kind = type(value)
        if kind in WRAPPERS or kind is np.ndarray:
            if value.dtype.hasobject:
                return False
        elif kind not in _ATOMS:
            held.append((value, depth))
    if held and not _plain_values(held, functions):
        return False
    seen = set()
    while functions:
        g, level = functions.pop()
        if type(g) is not types.FunctionType:
            return False
        if id(g) in seen:
            continue
        seen.add(id(g))
        namespace = g.__globals__
        # (by its module's name, as ``_swap_cells`` tells it: a namespace of code made by exec
        # without one is the user's)
        package = str(namespace.get("__name__")).partition(".")[0]
        if package in INTERNAL or package in STANDARD_LIBRARY:
            return False
        code = g.__code__
        known = _PLAIN_READS.get(id(code))
        if known is None or known[0] is not code:
            if len(_PLAIN_READS) >= 4096:  # (code made anew, by exec: not kept for ever)
                _PLAIN_READS.clear()
            known = _PLAIN_READS[id(code)] = (code, _plain_reads(code))
        reads = known[1]
        if reads is None:
            return False
        held = []
        if g.__defaults__:
            held.append((g.__defaults__, level - 1))
        if g.__kwdefaults__:
            held.append((g.__kwdefaults__, level - 1))
        for cell in g.__closure__ or ():
            try:
                held.append((cell.cell_contents, level - 1))
            except ValueError:  # (a cell not filled yet)
                continue
        for name, attributes in reads:
            if name in namespace:
                value = namespace[name]
                if value is np or value is MODE.numpy:  # (NumPy's, or the mode's in it)
                    if attributes is None:
                        return False
                    for attribute in attributes:
                        if not _core_of_numpy(vars(np).get(attribute)):
                            return False
                    continue
                held.append((value, level - 1))
            else:  # (where neither binds it, a NameError, as without mutad)
                own = _PLAIN_BUILTINS.get(name)
                found = g.__builtins__ if type(g.__builtins__) is dict else vars(builtins)
                if found.get(name) is not own:
                    return False
            if attributes is not None and not attributes <= _PLAIN_ATTRIBUTES:
                return False
        if held and not _plain_values(held, functions):
            return False
    return True


_PLAIN_READS: dict = {}  # id(code) -> (code, _plain_reads(code)): by identity, not by hash
_PLAIN_ITEMS = 256


def _plain_values(held, functions):
    """Whether each value of ``held``, ``(value, depth)``, reaches no library's module
    (``_reaches_no_library``): a number, a string, None, an array of numbers (or one a
    differentiation traces), a NumPy scalar, or a tuple, list or dict of such values, ``depth``
    levels deep; or a user's function, noted in ``functions`` with ``depth`` for its own reads
    to be looked into. (At most ``_PLAIN_ITEMS`` items, and as many functions: beyond, not
    asked.)"""
    todo, left = list(held), _PLAIN_ITEMS
    while todo:
        value, depth = todo.pop()
        kind = type(value)
        if kind in _ATOMS or kind in _NUMPY_SCALARS:
            continue
        if kind is np.ndarray or kind in WRAPPERS:
            if value.dtype.hasobject:
                return False
            continue
        if depth < 0:
            return False
        if kind is tuple or kind is list or kind is dict:
            left -= len(value)
            if left < 0:
                return False
        if kind is tuple or kind is list:
            for item in value:
                todo.append((item, depth - 1))
        elif kind is dict:
            for key, item in value.items():
                if type(key) not in _ATOMS:
                    return False
                todo.append((item, depth - 1))
        elif kind is types.FunctionType:  # (whose code ``_reaches_no_library`` reads)
            if len(functions) >= _PLAIN_ITEMS:
                return False
            functions.append((value, depth))
        else:
            return False
    return True


def _core_of_numpy(value):
    """Whether ``value``, what NumPy's module binds to a name, is a ufunc, a function of
    NumPy's core (``numpy._core``: arithmetic, reductions, shapes, not ``numpy.ma``'s or
    ``numpy.polynomial``'s), one of NumPy's scalar types or ``ndarray``, or a number."""
    kind = type(value)
    if kind is np.ufunc or kind in _ATOMS or value is np.ndarray \
            or isinstance(value, type) and value in _NUMPY_SCALARS:
        return True
    if kind is _DISPATCHER:
        value = value._implementation
        kind = type(value)
    if kind is types.FunctionType:
        return str(value.__globals__.get("__name__")).startswith("numpy._core.")
    return kind is _BUILTIN_FUNCTION and value.__module__ == "numpy"


def user_object(obj):
    """Whether ``obj`` is an instance of a user class with attributes of its own (in its
    ``__dict__``, or in slots)."""
    return (obj is not None and not isinstance(obj, (type, types.ModuleType))
            and _user_class(type(obj)) and (type(getattr(obj, "__dict__", None)) is dict
                                            or hasattr(type(obj), "__slots__")))


def _methods(obj, names):
    """The user-written methods of ``obj`` (a ``user_object``, or a user class) that code
    naming ``names`` may run: each definition of such a name along its class's bases (an
    override calls its base's through ``super()``), a property's getter, a static method's and
    a class method's function, bound as Python binds them; and an object's special methods,
    which syntax runs without naming them (``obj(x)``, ``obj[k] = v``, ``obj += u``, ``for v
    in obj``), but those that make it and those NumPy calls to convert it (``_CONVERTING``)."""
    cls = obj if isinstance(obj, type) else type(obj)
    methods = []
    for base in cls.__mro__:
        if not _user_class(base):
            continue
        wanted = set(names) if cls is obj else set(names) | {
            name for name in vars(base) if name.startswith("__") and name.endswith("__")
            and name not in _MAKING and name not in _CONVERTING}
        for name in wanted & vars(base).keys():
            member = vars(base)[name]
            if type(member) is property:
                member = member.fget
            if type(member) is classmethod:
                methods.append(types.MethodType(member.__func__, cls))
            elif type(member) is staticmethod:
                methods.append(member.__func__)
            elif type(member) is types.FunctionType and cls is not obj:
                methods.append(types.MethodType(member, obj))
    return methods


_MAKING = {"__init__", "__new__", "__init_subclass__", "__class_getitem__", "__del__",
           "__set_name__"}
"""Special methods that make (or unmake) an object, which no syntax on it runs (``_methods``)."""

_CONVERTING = {"__array__", "__array_interface__", "__array_struct__", "__array_priority__",
               "__array_ufunc__", "__array_function__", "__buffer__", "__dlpack__",
               "__dlpack_device__"}
"""Special methods by which NumPy converts an object of the user's (``np.asarray(obj)``, ``x *
obj``), which must give NumPy's own arrays: the attributes they read are not followed through
them (``_methods``), else a stand-in of ``self.value`` would reach NumPy from ``__array__``."""


def attribute_holders(obj):
    """The places of all attributes of ``obj`` (a ``user_object``) for ``settle``: its
    ``__dict__`` (which may gain one), and its slots."""
    attributes = getattr(obj, "__dict__", None)
    slots = [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())
             if type(name) is str and hasattr(obj, name)]
    return ([(attributes, None)] if type(attributes) is dict else []) + [
        (_Slots(obj), name) for name in slots]


def settle(holders, detached, depth=3):
    """Replace in ``holders`` (``_Mode._swap_cells``'s: the places the differentiated function
    reaches by a name) each value of the differentiation that ended its run of the function
    by ``detached(value)``, a plain value (None: not the differentiation's), in the lists,
    dicts and tuples held there too, ``depth`` levels down: what the function stored there
    (``self.buf = np.zeros_like(x)``, ``history.append(u)``) is NumPy's value after the
    differentiation, never a traced one."""
    for place, key in holders:
        for k in (list(place) if type(place) is dict else range(len(place))) \
                if key is None else (key,):
            if type(place) is dict and k not in place:
                continue  # (not bound: a name f's code reads from elsewhere, asked before
                # _get's KeyError, which costs more than the rest of the loop)
            try:
                value = _get(place, k)
            except (KeyError, IndexError, AttributeError, ValueError):  # (not bound)
                continue
            plain = _settled(value, detached, depth)
            if plain is not value:
                _put(place, k, plain)


def _settled(value, detached, depth):
    if isinstance(value, Tracer):
        plain = detached(value)
        return value if plain is None else plain
    if depth == 0 or type(value) not in (list, dict, tuple) and not (
            isinstance(value, tuple) and hasattr(value, "_fields")):
        return value
    if type(value) is list or type(value) is dict:
        for k in (list(value) if type(value) is dict else range(len(value))):
            plain = _settled(value[k], detached, depth - 1)
            if plain is not value[k]:
                value[k] = plain
        return value
    items = [_settled(item, detached, depth - 1) for item in value]
    if all(a is b for a, b in zip(items, value)):
        return value
    return type(value)(*items) if hasattr(value, "_fields") else tuple(items)


def _attributes(obj, names):
    """The places of the attributes of ``obj`` (a ``user_object``) among ``names``: the items
    of its ``__dict__``, and its slots (``_Slots``)."""
    attributes = getattr(obj, "__dict__", None)
    places = [] if type(attributes) is not dict else [
        (attributes, name) for name in names if name in attributes]
    slots = [name for name in names
             if type(inspect.getattr_static(type(obj), name, None)) is types.MemberDescriptorType
             and hasattr(obj, name)]
    return places + [(_Slots(obj), name) for name in slots]


def _class_attributes(cls, names):
    """The places of the attributes of the user class ``cls`` among ``names`` (but its class
    methods)."""
    return [(cls, name) for name in names if name in vars(cls)
            and type(vars(cls)[name]) is not classmethod]


class _Slots:
    """An object's slots as a place (``_get``, ``_put``): ``__slots__`` attributes, which no
    ``__dict__`` holds."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


def _user_module(module):
    """Whether ``module`` is the user's: neither Python's own, nor NumPy's, SciPy's, mutad's
    or a device library's."""
    top = str(getattr(module, "__name__", "")).partition(".")[0]
    return top not in STANDARD_LIBRARY and top not in INTERNAL


def _user_class(cls):
    return str(getattr(cls, "__module__", "builtins")).partition(".")[0] not in (
        *INTERNAL, "builtins")


LRU_CACHED = type(functools.lru_cache(lambda: None))
"""The type of the functions ``functools.lru_cache`` and ``functools.cache`` make."""


class _CachedStandIn:
    """A function of the user's cached by ``functools.lru_cache``, reached by a name, as the
    mode has it: the cached function itself called, whose results it keeps between calls (the
    work arrays a cache keyed by shape holds), with a stand-in for each float array it returns
    (alone, or in a tuple; in a dict or a list, the cache's own, which f may change, swapped
    into it by ``hold`` till the mode ends), so that the function's writes into them are
    followed and their bytes written back, as a global array's; mutad cannot look into the
    cache. What a call the cache does not answer makes, the cache keeps: plain arrays, made
    outside the mode, as NumPy makes them. A call given a traced value (``decay(3,
    float(x[0]))``, a method's ``self.weight(x[0])``) runs the function it wraps, past its
    cache: a traced scalar hashes and compares as its number, so the cache would hand back
    what a plain call stored under that number, with no derivative, and keep the traced
    result for later calls; the cache is left as it was."""

    def __init__(self, cached, stand_in, hold):
        functools.update_wrapper(self, cached, updated=())
        self.cached, self.stand_in, self.hold = cached, stand_in, hold

    def __call__(self, *args, **kwargs):
        if _holds_traced(args) or kwargs and _holds_traced(kwargs):
            hash((args, *kwargs.values()))  # (an array refused as a key, as the cache does)
            return self.cached.__wrapped__(*args, **kwargs)
        with plain_allocation():  # (what a call it does not answer from its cache makes
            y = self.cached(*args, **kwargs)  # is kept: plain arrays, as NumPy's)
        if type(y) is np.ndarray:
            held = self.stand_in(y)
            return y if held is None else held
        if isinstance(y, tuple):
            held = _tuple_stand_in(y, self.stand_in)
            return y if held is None else held
        if type(y) is dict or type(y) is list:
            for key in list(y)[:64] if type(y) is dict else range(min(len(y), 64)):
                self.hold(y, key)
        return y

    def __getattr__(self, name):  # cache_info, cache_clear, cache_parameters
        return getattr(self.cached, name)

    def __get__(self, instance, owner=None):  # a cached method, as a class's attribute
        return self if instance is None else types.MethodType(self, instance)


def _holds_traced(tree, depth=3):
    """Whether ``tree`` is, or holds ``depth`` levels down, a traced value: in a tuple, a list,
    a set, a dict's keys or values, or the attributes of an object of the user's that hashes
    by its values (a frozen dataclass of parameters; one hashed by identity is a cache's key
    whatever it holds, as in NumPy's run)."""
    kind = type(tree)
    if kind in WRAPPERS or kind in CARRIERS:
        return True
    if depth == 0:
        return False
    if isinstance(tree, tuple) or kind is list or kind is set or kind is frozenset:
        items = tree
    elif kind is dict:
        items = (*tree, *tree.values())
    elif user_object(tree) and type(getattr(tree, "__dict__", None)) is dict \
            and type(tree).__hash__ not in (object.__hash__, None):
        items = vars(tree).values()
    else:
        return False
    return any(_holds_traced(item, depth - 1) for item in itertools.islice(items, 64))


def _tuple_stand_in(held, stand_in):
    """A tuple (or a named tuple) like ``held`` with a stand-in (``stand_in``) for each float
    array among its items, or None where it holds none."""
    if len(held) > 64 or not any(type(item) is np.ndarray and item.dtype.kind in "fc"
                                 for item in held):
        return None
    items = [stand_in(item) if type(item) is np.ndarray and item.dtype.kind in "fc" else item
             for item in held]
    return type(held)(*items) if hasattr(held, "_fields") else type(held)(items)


def _get(place, key):
    """What ``place`` binds at ``key``: a dict's item, a closure cell's contents, a class's
    attribute, or a function's default (``key`` its position, or a keyword-only name)."""
    if type(place) is dict or type(place) is list:
        return place[key]
    if type(place) is _Slots:
        return getattr(place.obj, key)
    if isinstance(place, type):
        return place.__dict__[key]
    if type(place) is types.FunctionType:
        return place.__defaults__[key] if type(key) is int else place.__kwdefaults__[key]
    return place.cell_contents


def _put(place, key, value):
    """Bind ``value`` where ``_get`` reads."""
    if type(place) is dict or type(place) is list:
        place[key] = value
    elif type(place) is _Slots:
        setattr(place.obj, key, value)
    elif isinstance(place, type):
        setattr(place, key, value)
    elif type(place) is types.FunctionType and type(key) is int:
        defaults = list(place.__defaults__)
        defaults[key] = value
        place.__defaults__ = tuple(defaults)
    elif type(place) is types.FunctionType:
        place.__kwdefaults__ = {**place.__kwdefaults__, key: value}
    else:
        place.cell_contents = value


def _routed(cls, name, rule, original):
    """Method ``name`` of ``cls`` that calls ``rule(self, *args, **kwargs)`` when an array
    carrying a derivative is among its arguments, and ``original`` otherwise (a static method
    stays one, its rule called without ``self``; a class method's with the class) (constants convert
    to the plain arrays they stand for: a rule that evaluates the object on them calls it
    again). A rule marked ``on_constants`` takes the traced constants too (the method would
    not read them as NumPy's values: ``np.isscalar`` of one is False); where the mark is a
    function of the call's arguments, the calls it says yes to. A rule marked ``always``
    takes every call while a differentiation runs, of a user's subclass too: it is the method's
    own code, made to pass traced values through (``LinearOperator.matvec``). A rule marked
    ``subclasses`` takes a user's subclass's calls too: it computes with the methods the
    subclass defines (an ``rv_continuous``'s own ``_pdf``)."""
    on_constants = getattr(rule, "on_constants", False)
    always = getattr(rule, "always", False)
    subclasses = getattr(rule, "subclasses", False)

    def routes(owner, args, kwargs):
        if always:
            return bool(ACTIVE.running)
        if ACTIVE.running and (holds_derivative(args)
                               or holds_derivative(list(kwargs.values()))
                               or on_constants and holds_wrapped(args)
                               and (on_constants is True or on_constants(*args, **kwargs))) \
                and (subclasses or not _overridden(owner, cls)):
            if any(device_of(a) is not None for a in (*args, *kwargs.values())):
                raise UnsupportedArrayError(
                    f"{cls.__module__}.{cls.__qualname__}.{name} was given a device array "
                    "(CuPy's): mutad's rule for it computes on NumPy arrays. On a device, "
                    "write the step with NumPy's functions, which mutad differentiates there.")
            return True
        if ACTIVE.running:  # the library's method converts the stand-ins NumPy's way: unseen
            accessed(args, kwargs)
        return False

    if isinstance(original, staticmethod):  # rule(*args): no instance
        def method(*args, **kwargs):
            if ACTIVE.running:
                args, kwargs = _adopted_arguments(args, kwargs)
            if routes(cls, args, kwargs):
                return rule(*args, **kwargs)
            if ACTIVE.running and not internal(caller := _caller(sys._getframe(1))):
                return _handed(original.__func__, args, kwargs, None, caller)
            return original.__func__(*args, **kwargs)
    elif isinstance(original, classmethod):  # rule(owner, *args): the class it was called on
        def method(owner, *args, **kwargs):  # type: ignore[misc]
            if ACTIVE.running:
                args, kwargs = _adopted_arguments(args, kwargs)
            if routes(owner, args, kwargs):
                return rule(owner, *args, **kwargs)
            if ACTIVE.running and not internal(caller := _caller(sys._getframe(1))):
                return _handed(original.__get__(None, owner), args, kwargs, owner, caller)
            return original.__func__(owner, *args, **kwargs)
    else:
        def method(self, *args, **kwargs):  # type: ignore[misc]
            if ACTIVE.running:
                args, kwargs = _adopted_arguments(args, kwargs)
            if routes(type(self), args, kwargs):
                return rule(self, *args, **kwargs)
            if ACTIVE.running and not internal(caller := _caller(sys._getframe(1))):
                return _handed(original.__get__(self, type(self)), args, kwargs, self, caller)
            return original.__get__(self, type(self))(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__doc__ = getattr(original, "__doc__", None)
    method.__wrapped__ = getattr(original, "__func__", original)  # inspect.signature: the
    # library's parameters, not (*args, **kwargs)
    return type(original)(method) if isinstance(original, (staticmethod, classmethod)) \
        else method


def _adopted_arguments(args, kwargs):
    """A routed method's arguments with each stand-in whose memory a write adopted, where it
    carries a derivative, as the differentiation's array (``adopted_views``), so that the rule
    takes the call: the library's method would convert the stand-in NumPy's way, reading its
    memory (in forward mode the values before the call; the reverse pass would lose the
    derivative): ``norm.logpdf(W)`` of a module-level buffer the function wrote."""
    views, keywords = adopted_views(args), adopted_views(kwargs)
    if holds_derivative([views, list(keywords.values())]):
        return views, keywords
    return args, kwargs


HANDING_LIBRARIES = ("scipy.", "numpy.polynomial.")
"""The packages whose classes' public methods ``_hand_methods`` installs as ``_handing``."""

HANDED_CLASSES = frozenset({np.polynomial._polybase.ABCPolyBase})
"""Classes whose methods nothing routes but whose family's methods ``_hand_methods`` installs:
NumPy's polynomial classes (``p.linspace(6)``, ``p.roots()``, ``p(t)`` of plain values)."""

HANDED_OPERATORS = frozenset({"__call__", "__matmul__", "__rmatmul__", "__mul__", "__rmul__",
                              "__add__", "__radd__", "__sub__", "__rsub__", "__truediv__",
                              "__rtruediv__", "__neg__", "__pow__", "__getitem__"})
"""The special methods of theirs that user code calls by its operators (not ``__array__``,
which NumPy calls from compiled code with the user's frame above it)."""


def _handing(function):
    """A library's method ``function`` that, while a differentiation runs in this thread,
    hands the user's code its result as ``_handed`` does."""
    @functools.wraps(function)
    def method(self, *args, **kwargs):
        if ACTIVE.running and not internal(caller := _caller(sys._getframe(1))):
            return _handed(function.__get__(self, type(self)), args, kwargs, self, caller)
        return function(self, *args, **kwargs)

    method.handing = True
    return method


def _handed(call, args, kwargs, instance, caller):
    """``call(*args, **kwargs)``, a library's method that its rule does not take (no traced
    value among its arguments: ``spline(t)``, ``dist.pdf(grid)``), as the user's code (its
    frame ``caller``) receives it: a new float array nothing else holds (not the object's own
    state: ``_fresh``), or a tuple of them, is a constant the function may write traced values
    into, as np.zeros' is (``made_in``); anything else as the library gives it. A replay makes
    it again by the same call where the object is one of the library's own
    (``scipy.stats.norm``); an object the program made or was given may hold other values on
    another call, so it refuses then."""
    y = call(*args, **kwargs)
    if STATE.rules:
        return y
    holders, within = _references(y)  # (a statement of its own: no other reference on the stack)
    if holders > _ONE_LOCAL:
        return y
    made = call if instance is None or _library_object(instance) else None
    if type(y) is not tuple:
        return made_in(y, made, args, kwargs, caller) if _fresh(y, True, within) else y
    return tuple(made_in(item, made and functools.partial(_item, made, i), args, kwargs, caller)
                 if _fresh(item, count <= _IN_A_TUPLE, bases) else item
                 for i, (item, (count, bases)) in enumerate(zip(y, within)))


def _references(y):
    """How many references hold ``y`` (a local of its caller, as ``_handed``'s result) and
    each array in its chain of bases (``y.base``, its base, ...); of a tuple ``y``, those of
    each item."""
    if type(y) is tuple:
        return sys.getrefcount(y), [(sys.getrefcount(item), _bases(item)) for item in y]
    return sys.getrefcount(y), _bases(y)


def _bases(y):
    counts = []
    while (type(y) is np.ndarray or type(y) in HANDED_SUBCLASSES) and y.base is not None:
        y = y.base
        counts.append(sys.getrefcount(y))
    return counts


def _held_in(result):
    """``_references`` of each array among the values of the dict ``result``."""
    return {key: (sys.getrefcount(value), _bases(value)) for key, value in result.items()
            if type(value) is np.ndarray}


def _calibrated():
    """``_references`` of a new array, of a view of a new array, of a tuple of one, each held
    by one local, and ``_held_in`` of a dict of one: the counts that mean nothing else holds
    them."""
    y, view, pair = np.empty(0), np.empty(1)[:], (np.empty(0),)
    return (_references(y)[0], _references(view)[1][0], _references(pair)[1][0][0],
            _held_in({"": np.empty(0)})[""][0])


_ONE_LOCAL, _ONE_VIEW, _IN_A_TUPLE, _IN_A_DICT = _calibrated()


def _fresh(y, alone, bases):
    """Whether ``y`` is a float array that nothing else holds (``alone``), nor the arrays it is
    a view of (``bases``: their ``_bases`` counts; no attribute, cache or view of the
    library's: CPython's reference counts, as NumPy's own elision of temporaries reads them):
    the user's code alone may read its memory, so the values written into it are the ones the
    program reads."""
    return (type(y) is np.ndarray or type(y) in HANDED_SUBCLASSES) and alone \
        and y.dtype.kind in "fc" and all(
        count <= _ONE_VIEW for count in bases)


def rebound_in_place(ufunc, inputs, kwargs):
    """``y op= x`` of a traced ``x`` into a local ``y`` of the user's code that is a new float
    array nothing else holds, made by a call the mode does not follow from plain values
    (``np.asarray(A.sum(axis=0)).ravel()`` of a SciPy matrix, ``np.ma.getdata(m)``): the
    statement rebinds the name to what the operator gives, so ``y`` is a constant (as np.zeros'
    is) the traced values are written into, the array it gives. None for any other call: a
    write into an array something else may read (another name, an object, a view: CPython's
    reference counts, as ``_handed`` reads them) or that no name takes back is refused."""
    out = kwargs.get("out")
    if type(out) is not tuple or len(out) != 1 or type(out[0]) is not np.ndarray \
            or not inputs or out[0] is not inputs[0] or not _in_mode():
        return None
    if _out_references(inputs, kwargs) != _ONE_LOCAL_IN_PLACE:
        return None
    y = out[0]
    if y.dtype.kind not in "fc" or not y.flags.writeable or not _alone_in_its_memory(y):
        return None
    frame = sys._getframe(2)  # (the user's frame: NumPy's operator is compiled code)
    if internal(frame) or not _rebinds(frame.f_code, frame.f_lasti):
        return None
    del kwargs["out"]
    constant = allocate(np.copy(y, order="K"))
    return ufunc(constant, *inputs[1:], out=constant, **kwargs)


def _alone_in_its_memory(y):
    """Whether nothing holds the arrays ``y`` is a view of (a SciPy matrix it views) but the
    views of them, down to the array owning the memory (not an object of another kind, which
    may share it: a buffer, a memory map's)."""
    while y.base is not None:
        y = y.base
        if not isinstance(y, np.ndarray) or sys.getrefcount(y) > _ONE_VIEW:
            return False
    return True


def _out_references(inputs, kwargs):
    return sys.getrefcount(kwargs["out"][0])


def called_by_name(name):
    """Whether the mode's user code called the method ``name`` of a value by its name
    (``w.__array__()``), rather than NumPy's compiled code (a conversion) from wherever it
    runs: the caller's caller's instruction calls a method ``name`` it loaded."""
    frame = sys._getframe(2)
    return _in_mode() and not internal(frame) and _calls(frame.f_code, frame.f_lasti) == name


@functools.lru_cache(maxsize=256)
def _calls(code, lasti):
    """The name of the attribute or method whose value the call at ``lasti`` of ``code`` calls
    (the instruction that put it on the stack, found by the stack effects of those after it),
    or None."""
    instructions = list(dis.get_instructions(code))
    # (the last instruction at or before lasti: a call's inline caches follow it)
    k = next((i for i in range(len(instructions) - 1, -1, -1)
              if instructions[i].offset <= lasti), None)
    if k is None or not instructions[k].opname.startswith("CALL") \
            or instructions[k].arg is None:
        return None
    depth = 0
    for ins in reversed(instructions[:k]):
        if ins.opname in ("PRECALL", "KW_NAMES", "CACHE"):
            continue
        try:
            depth += dis.stack_effect(ins.opcode, ins.arg)
        except ValueError:  # (an instruction of no fixed effect: nothing to tell)
            return None
        if depth >= instructions[k].arg + 1:
            return ins.argval if ins.opname in ("LOAD_METHOD", "LOAD_ATTR") else None
    return None


@functools.lru_cache(maxsize=1024)
def _rebinds(code, lasti):
    """Whether the instruction at ``lasti`` of ``code`` is an augmented assignment to a local
    name (``y *= x``), whose result the name takes."""
    instructions = list(dis.get_instructions(code))
    for i, instruction in enumerate(instructions[:-1]):
        if instruction.offset == lasti:
            return instruction.opname == "BINARY_OP" and instruction.argrepr.endswith("=") \
                and instructions[i + 1].opname == "STORE_FAST"
    return False


class _Probe:
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _out_references(inputs, kwargs)


def _in_place_references():
    """``_out_references`` of ``y *= x`` into a local ``y`` nothing else holds (no tracing
    function reading the frame's locals, which would hold it too)."""
    def measured():
        y = np.empty(1)
        y *= _Probe()
        return y

    tracing = sys.gettrace()
    sys.settrace(None)
    try:
        return measured()
    finally:
        sys.settrace(tracing)


_ONE_LOCAL_IN_PLACE = _in_place_references()


def _library_object(instance):
    """Whether ``instance`` is an object a library's module binds (``scipy.stats.norm``), or
    a library's class: the same object on every call."""
    if isinstance(instance, type):
        return True
    module = sys.modules.get(getattr(type(instance), "__module__", ""))
    return module is not None and any(value is instance for value in vars(module).values())


@functools.lru_cache(maxsize=256)
def _overridden(cls, routed):
    """Whether a user's class between ``cls`` and the class ``routed`` whose method a Rule
    replaces defines methods of its own (beyond ``__init__``): the rule, written for the
    library's class, would compute the library's function, not the one the subclass changed (a
    distribution's ``_logpdf``, a ``__call__`` that calls ``super()``), so the method runs as it
    is (and a derivative it cannot follow raises, rather than a wrong value)."""
    for base in cls.__mro__:
        if base is routed:
            return False
        if _user_class(base) and any(
                callable(value) or isinstance(value, (staticmethod, classmethod, property))
                for key, value in vars(base).items() if key not in ("__init__", "__new__")):
            return True
    return False


MODE = _Mode()


def library_route(value):
    """What a SciPy module's name bound to the routed function ``value`` reads while SciPy's
    code is followed (``following_scipys_code``): the mode's ``_Route`` of it, which is
    the library's function itself in the threads running no differentiation (the module's
    names are the process's); None where nothing routes ``value``."""
    pair = MODE.routes.get(id(value))
    return pair[1] if pair is not None and pair[0] is value else None


_CACHE_WRAPPER = type(functools.lru_cache(maxsize=None)(len))
"""The type of ``functools.lru_cache``'s and ``functools.cache``'s wrappers."""


def uncached(f):
    """``f``, or the function its ``functools.lru_cache`` (or ``functools.cache``) wraps where
    ``f``, the differentiated function (or method), is itself such a wrapper: its cache, keyed
    on the number a differentiated value stands for, would hand back a result computed without
    this differentiation (of a plain call made before, or of another differentiation) and with
    no derivative. The function it wraps computes NumPy's number, with its derivative, and the
    cache is left as it was (no traced value is stored in it)."""
    if type(f) is types.MethodType and type(f.__func__) is _CACHE_WRAPPER:
        return types.MethodType(uncached(f.__func__), f.__self__)
    while type(f) is _CACHE_WRAPPER:
        f = f.__wrapped__
    return f


def mode(f=None, arguments=None):
    """The allocation mode around one differentiation of ``f``; gives the function to call:
    ``f``, or what stands in for it when ``f`` is itself a function the mode routes (a bound
    method of a routed class, ``scipy.stats.norm.logpdf``; ``scipy.linalg.det``), and the
    places ``_Mode.enter`` found. ``arguments``: what ``f`` is called with, where known (a
    function of plain values that reaches no library's module leaves their side of the mode
    alone, ``_reaches_no_library``)."""
    return _InMode(f, arguments)


def as_called(f):
    """What the running mode calls for ``f`` where mutad's own code calls it (a Jacobian's
    function of the leaves of the arguments around the differentiated function): what stands
    in for ``f`` if it is a function the mode routes, as ``mode`` gives it where ``f`` is the
    differentiated function itself; else ``f``."""
    f = uncached(f)
    with MODE.lock:
        stand_in = MODE._stand_in(f)
    return f if stand_in is None else stand_in


class _InMode:
    """``mode``'s block (a class: cheaper to enter and leave than a generator's)."""

    __slots__ = ("f", "arguments")

    def __init__(self, f=None, arguments=None):
        self.f = f
        self.arguments = arguments

    def __enter__(self):
        f = self.f if self.f is None else uncached(self.f)
        holders = MODE.enter(f, self.arguments)
        try:
            MODE.lock.acquire()  # (as in ``_Mode.enter``)
            try:
                stand_in = None if f is None else MODE._stand_in(f)
            finally:
                MODE.lock.release()
        except BaseException:
            MODE.exit()
            raise
        return f if stand_in is None else stand_in, holders

    def __exit__(self, *exception):
        MODE.exit()
