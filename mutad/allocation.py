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
  of the innermost differentiation (``tracing.constant``; a dual with a zero tangent in
  forward mode): it behaves as a plain array until a traced value is written into it, from
  when on it is traced. Other threads, integer and boolean results, and results that are
  views of existing arrays (``np.asarray(a)`` of an array) are left plain;
* ``np.array`` and its variants build traced arrays from traced values (``np.array([a, b])``),
  reductions read lists and tuples of traced values as those arrays (``np.mean([a, b])``), and
  functions with integer results (``np.argmin((a, b))``) take the plain values of traced
  scalars inside lists and tuples;
* methods listed in ``registry.METHODS`` are routed to their rules when traced arrays are among
  their arguments (``scipy.stats.norm.logpdf``);
* functions listed in ``registry.ROUTES`` (``scipy.linalg.solve``) are replaced by their
  stand-ins wherever user code reaches them: names bound to them in user modules, and the
  attributes of the library's public modules (``scipy.linalg.solve``, not
  ``scipy.linalg._basic.solve``, which SciPy's internals call);
* the ``numpy`` module, the functions above, routed functions, bound methods and
  ``functools.partial`` objects of them that the differentiated function reaches through its
  closure cells and the module-level names its code reads, and that the user functions those
  hold reach (a callback bound before the differentiation started:
  ``make_loss(scipy.stats.norm.logpdf)``, ``check(np.append)``), are swapped there too.

The bindings are swapped in when the first differentiation starts (in any thread) and swapped
back when the last one ends, on return or exception, so code outside a differentiation runs
NumPy's own functions at no cost. ``plain_allocation()`` turns the mode off in its block.

Not followed: arrays allocated before the differentiation started (a module-level work
buffer), names bound in other ways than at module level or in closures (a default argument
``zeros=np.zeros``, a class attribute), ``np.random`` draws and ``np.frombuffer`` (their values are not made by the
differentiated code: copy them, ``np.array(r)``, to write into them).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import types
from collections.abc import Iterator

import numpy as np

from .levels import ACTIVE
from .registry import METHODS, ROUTES, RULE_MODULES
from .views import owner, wrapped

FACTORIES = ("zeros", "empty", "ones", "full", "eye", "identity", "tri", "zeros_like",
             "ones_like", "empty_like", "full_like", "copy", "linspace", "logspace", "geomspace",
             "arange", "diag", "diagflat", "vander", "fromfunction", "fromiter",
             "asarray_chkfinite")
"""NumPy functions whose float results are new arrays, allocated as constants in the mode."""

BUILDERS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray")
"""NumPy's array constructors: they also build arrays from traced values."""

TAKES_LIKE = ("zeros", "empty", "ones", "full", "eye", "identity", "tri", "arange",
              "fromfunction", "fromiter")
"""Factories that dispatch on ``like=`` alone: a traced argument (``np.full(n, x[0])``) is
passed as ``like=`` too, so that its rule runs instead of a conversion."""

INTEGRAL = ("argmin", "argmax", "argsort", "argpartition", "lexsort", "nonzero", "flatnonzero",
            "argwhere", "searchsorted", "digitize", "count_nonzero", "shape", "ndim", "size",
            "isclose", "allclose", "array_equal")
"""NumPy functions with integer or boolean results: traced scalars in lists are read plainly."""

READERS = ("sum", "prod", "mean", "std", "var", "max", "min", "amax", "amin", "average",
           "cumsum", "cumprod", "ptp", "median", "append", "diff", "sort")
"""NumPy functions of array_like arguments that dispatch on arrays alone: lists and tuples
holding traced values among their positional arguments (``np.mean([a, b])``) are stacked into
one traced array first, as ``np.array`` would build it."""

INTERNAL = ("numpy", "scipy", "mutad")
"""Packages whose modules keep NumPy's own functions."""


class _State(threading.local):
    def __init__(self):
        self.plain = 0  # depth of plain_allocation() blocks in this thread


STATE = _State()


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
    ``made``: ``(function, args, kwargs)``, the call that made it."""
    for differentiation in ACTIVE.running:
        y = differentiation.constant(y, made)
    return y


def _in_mode():
    return ACTIVE.running and not STATE.plain


def _holds_wrapped(tree):
    if type(tree) in (list, tuple):
        return any(_holds_wrapped(x) for x in tree)
    return wrapped(tree)


def _arrays(tree):
    if type(tree) in (list, tuple):
        for x in tree:
            yield from _arrays(x)
    elif isinstance(tree, np.ndarray):
        yield tree
    elif type(tree) is dict:
        yield from _arrays(list(tree.values()))


def _allocated(y, args, kwargs):
    """Whether ``y`` is a new float ndarray, not the memory of an argument."""
    if type(y) is not np.ndarray or y.dtype.kind not in "fc":
        return False
    root = owner(y)
    return not any(owner(a) is root for a in _arrays([args, kwargs]))


def factory(func):
    """``func`` allocating constants in the mode."""

    takes_like = func.__name__ in TAKES_LIKE

    def allocating(*args, **kwargs):
        if takes_like and ACTIVE.running and "like" not in kwargs:
            like = next((a for a in (*args, *kwargs.values()) if wrapped(a)), None)
            if like is not None:
                return func(*args, like=like, **kwargs)
        y = func(*args, **kwargs)
        if _in_mode() and _allocated(y, args, kwargs):
            return allocate(y, (func, args, kwargs))
        return y

    return _named(allocating, func)


def _stacked(tree):
    """Nested lists and tuples holding traced values, as one array: each level stacked, so
    that every item keeps its gradient and plain numbers are constants."""
    if type(tree) not in (list, tuple):
        return tree
    items = [_stacked(x) for x in tree]
    if any(wrapped(x) for x in items):
        return np.stack(items)
    return np.array(items)


def builder(func):
    """``func`` (``np.array`` and its variants) allocating constants in the mode, and building
    arrays from traced values: ``np.array(x)`` of a traced ``x`` is a copy and
    ``np.asarray(x)`` is ``x``, as NumPy's; nested lists with traced items are stacked."""
    allocating = factory(func)

    def building(*args, **kwargs):
        if not (args and ACTIVE.running and _holds_wrapped(args[0])):
            return allocating(*args, **kwargs)
        a, *rest = args
        if wrapped(a):  # NumPy dispatches on like= alone
            kwargs.setdefault("like", a)
            y = func(a, *rest, **kwargs)
            return a if wrapped(y) and y.value is a.value else y  # np.asarray(x): x itself
        y = _stacked(a)
        dtype = kwargs.get("dtype", rest[0] if rest else None)
        if dtype is not None and np.dtype(dtype) != y.dtype:
            y = y.astype(dtype)
        ndmin = kwargs.get("ndmin", 0)
        if y.ndim < ndmin:
            y = y.reshape((1,) * (ndmin - y.ndim) + y.shape)
        return y

    return _named(building, func)


def _plain_values(tree):
    if type(tree) in (list, tuple):
        return type(tree)(_plain_values(x) for x in tree)
    while wrapped(tree):
        tree = tree.value
    return tree


def integral(func):
    """``func``, whose result is integer or boolean (no gradient), reading traced scalars
    inside lists and tuples by their values (NumPy converts those; it dispatches only on
    arrays)."""

    def reading_values(*args, **kwargs):
        if ACTIVE.running and any(type(a) in (list, tuple) and _holds_wrapped(a) for a in args):
            return func(*_plain_values(args), **kwargs)
        return func(*args, **kwargs)

    return _named(reading_values, func)


def reader(func):
    """``func``, reading lists and tuples of traced values as the arrays they stand for."""

    def reading_arrays(*args, **kwargs):
        if ACTIVE.running and any(type(a) in (list, tuple) and _holds_wrapped(a) for a in args):
            args = [_stacked(a) if type(a) in (list, tuple) and _holds_wrapped(a) else a
                    for a in args]
        return func(*args, **kwargs)

    return _named(reading_arrays, func)


class _Joined:
    """``np.r_`` or ``np.c_`` in the mode: an index expression joining traced values (``np.r_[a,
    0.0, b]``, ``np.c_[x, y]``) is the concatenation it stands for, which the engines follow;
    NumPy's own would convert them. Keys with a slice or a string directive, or without traced
    values, are NumPy's own."""

    def __init__(self, original, columns):
        self.original = original
        self.columns = columns

    def __getitem__(self, key):
        items = key if type(key) is tuple else (key,)
        if not (ACTIVE.running and _holds_wrapped(items)) or any(
                type(x) in (slice, str) for x in items):
            return self.original[key]
        parts = [x if wrapped(x) else np.asarray(x) for x in items]
        if not self.columns:  # r_: along the first axis, scalars as 1-d
            return np.concatenate([p.reshape(1) if p.ndim == 0 else p for p in parts])
        if any(p.ndim == 0 for p in parts):
            return self.original[key]
        return np.concatenate([p.reshape(-1, 1) if p.ndim == 1 else p for p in parts], axis=-1)

    def __len__(self):
        return len(self.original)


JOINED = {"r_": (np.r_, _Joined(np.r_, columns=False)), "c_": (np.c_, _Joined(np.c_, columns=True))}
"""NumPy's index expressions that build arrays, and the mode's."""


def _named(wrapper, func):
    wrapper.__name__ = func.__name__
    wrapper.__qualname__ = getattr(func, "__qualname__", func.__name__)
    wrapper.__module__ = getattr(func, "__module__", "numpy")
    wrapper.__doc__ = func.__doc__
    wrapper.__wrapped__ = func
    return wrapper


def _replacements():
    """NumPy's functions and mutad's for the mode, by name."""
    table = {}
    for names, make in ((FACTORIES, factory), (BUILDERS, builder), (INTEGRAL, integral),
                        (READERS, reader)):
        for name in names:
            func = getattr(np, name, None)
            if func is not None:
                table[name] = (func, make(func))
    table.update(JOINED)
    return table


REPLACEMENTS = _replacements()
_BY_ORIGINAL = {id(func): (func, new) for func, new in REPLACEMENTS.values()}


class _ModeNumpy(types.ModuleType):
    """The ``numpy`` module as user code sees it during a differentiation: NumPy's own
    attributes, with the mode's factories."""


def _mode_numpy():
    module = _ModeNumpy(np.__name__, np.__doc__)
    module.__dict__.update(np.__dict__)
    module.__dict__.update({name: new for name, (_, new) in REPLACEMENTS.items()})
    return module


class _Mode:
    """The bindings swapped in while any differentiation runs."""

    def __init__(self):
        self.lock = threading.RLock()
        self.depth = 0
        self.numpy = _mode_numpy()
        self.numpy_size = len(np.__dict__)
        self.scanned = {}  # module name -> its namespace's size when scanned
        self.sites = {}  # (id(namespace), name) -> (namespace, name, original, replacement)
        self.methods = {}  # (cls, name) -> (whether cls defined it, its own attribute)
        self.cells = []  # (cell or namespace, key, what it held, the stand-in swapped in)
        self.modules = 0
        self.routes = {}  # id(original) -> (original, stand-in), from registry.ROUTES

    # finding the bindings ----------------------------------------------------------------

    def _scan(self, namespace, internal=False):
        """Note the bindings of ``namespace`` to swap: of a user module, those to NumPy, its
        factories and routed functions; of a library's public module, those to routed
        functions alone."""
        for name, value in list(namespace.items()):
            if value is np and not internal:
                replacement = self.numpy
            else:
                pair = self.routes.get(id(value))
                if pair is None and not internal:
                    pair = _BY_ORIGINAL.get(id(value))
                if pair is None or pair[0] is not value:
                    continue
                replacement = pair[1]
            self.sites[id(namespace), name] = (namespace, name, value, replacement)

    def _scan_modules(self, f):
        """Find the bindings in modules imported since the last scan, and in ``f``'s module
        if it gained names (a script binding ``from numpy import zeros`` after its first
        differentiation)."""
        if len(ROUTES) != len(self.routes):  # a rule module was loaded: look everywhere again
            self.routes = {id(f): (f, stand_in) for f, stand_in in ROUTES.items()}
            self.scanned.clear()
            self.modules = 0
        if len(sys.modules) != self.modules:
            for name, module in list(sys.modules.items()):
                if name in self.scanned or not isinstance(module, types.ModuleType):
                    continue
                namespace = getattr(module, "__dict__", None)
                self.scanned[name] = len(namespace) if namespace is not None else 0
                if namespace is None:
                    continue
                # A library's module filed under another package's name too (an alias in
                # sys.modules) is still the library's: judged by its own name, not the key.
                own = namespace.get("__name__")
                own = own if isinstance(own, str) else name
                if own.partition(".")[0] not in INTERNAL:
                    self._scan(namespace)
                elif not any(part.startswith("_") for part in own.split(".")):
                    self._scan(namespace, internal=True)  # scipy.linalg, not its _basic
            self.modules = len(sys.modules)
        namespace = getattr(f, "__globals__", None)
        name = namespace.get("__name__") if namespace is not None else None
        if (name is not None and self.scanned.get(name) != len(namespace)
                and name.partition(".")[0] not in INTERNAL):
            self.scanned[name] = len(namespace)
            self._scan(namespace)

    # swapping them -----------------------------------------------------------------------

    def enter(self, f=None):
        """A differentiation starts in this thread: load the rule modules of the libraries in
        use, and swap the mode's bindings in if none was running."""
        for library, rules in RULE_MODULES.items():
            if library in sys.modules and rules not in sys.modules:
                importlib.import_module(rules)
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                if len(self.methods) != len(METHODS):
                    self._route_methods()
                self._swap_cells(f)
                return
            try:
                if len(np.__dict__) != self.numpy_size:  # NumPy loaded a submodule lazily
                    self.numpy.__dict__.update(
                        {k: v for k, v in np.__dict__.items() if k not in REPLACEMENTS})
                    self.numpy_size = len(np.__dict__)
                self._scan_modules(f)
                for namespace, name, original, replacement in self.sites.values():
                    if namespace.get(name) is original:
                        namespace[name] = replacement
                self._route_methods()
                self._swap_cells(f)
            except BaseException:
                self._undo()
                self.depth -= 1
                raise

    def exit(self):
        """A differentiation ended (returned or raised): swap NumPy's bindings back when it
        was the last one running."""
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self._undo()

    def _undo(self):
        for namespace, name, original, replacement in self.sites.values():
            if namespace.get(name) is replacement:
                namespace[name] = original
        for (cls, name), (defined, attribute) in self.methods.items():
            if defined:
                setattr(cls, name, attribute)
            else:
                delattr(cls, name)
        self.methods.clear()
        while self.cells:
            place, key, original, stand_in = self.cells.pop()
            if (place.get(key) if type(place) is dict else place.cell_contents) is stand_in:
                _put(place, key, original)

    def _swap_cells(self, f, depth=4):
        """Swap what the mode replaces or routes where ``f`` reaches it through its closure
        cells and the module-level names its code reads (a bound method or a partial, which the
        module scan leaves), and where the user functions, bound methods and partials held there
        reach it, ``depth`` levels down."""
        todo, seen = [(f, 0)], set()
        while todo:
            g, level = todo.pop()
            if g is None or id(g) in seen or level > depth:
                continue
            seen.add(id(g))
            if isinstance(g, functools.partial):
                todo.append((g.func, level + 1))
                continue
            g = getattr(g, "__func__", g)
            code, namespace = getattr(g, "__code__", None), getattr(g, "__globals__", None)
            package = str((namespace or {}).get("__name__")).partition(".")[0]
            if package in INTERNAL and package != "mutad":
                continue  # NumPy's and SciPy's own functions keep their bindings
            # mutad's own (a wrapper around the user's function, in testing or api) keep theirs
            # too, but the functions they hold are followed, and a routed function or method
            # they hold (the user's f itself: mutad.hessian(scipy.special.logsumexp, x)) is
            # swapped.
            own = package == "mutad"
            places = [(cell, "cell_contents") for cell in getattr(g, "__closure__", None) or ()]
            if code is not None and namespace is not None and not own:
                places += [(namespace, name) for name in code.co_names if name in namespace]
            for place, key in places:
                try:
                    value = place[key] if type(place) is dict else place.cell_contents
                except ValueError:  # a cell not filled yet
                    continue
                stand_in = self._stand_in(value, routed_only=own)
                if stand_in is not None:
                    self.cells.append((place, key, value, stand_in))
                    _put(place, key, stand_in)
                elif callable(value) and not isinstance(value, (type, types.ModuleType)):
                    todo.append((value, level + 1))

    def _stand_in(self, value, routed_only=False):
        """What stands in for ``value`` in the mode (the numpy module, a function the mode
        replaces or routes, a bound method of a routed class, a partial of these), or None;
        with ``routed_only``, only for the functions and methods it routes."""
        if value is np:
            return None if routed_only else self.numpy
        pair = self.routes.get(id(value))
        if pair is None and not routed_only:
            pair = _BY_ORIGINAL.get(id(value))
        if pair is not None and pair[0] is value:
            return pair[1]
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
        return None

    def _route_methods(self):
        for (cls, name), rule in list(METHODS.items()):
            if (cls, name) not in self.methods:
                defined = name in cls.__dict__
                self.methods[cls, name] = (defined, cls.__dict__.get(name))
                setattr(cls, name, _routed(cls, name, rule))


def _put(place, key, value):
    """Bind ``value`` in a namespace (``key`` its name) or a closure cell."""
    if type(place) is dict:
        place[key] = value
    else:
        place.cell_contents = value


def _routed(cls, name, rule):
    """Method ``name`` of ``cls`` that calls ``rule(self, *args, **kwargs)`` when a traced
    array is among its arguments, and the method it replaces otherwise."""
    original = next(base.__dict__[name] for base in cls.__mro__ if name in base.__dict__)

    def method(self, *args, **kwargs):
        if ACTIVE.running and (_holds_wrapped(args) or _holds_wrapped(list(kwargs.values()))):
            return rule(self, *args, **kwargs)
        return original.__get__(self, type(self))(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    method.__doc__ = getattr(original, "__doc__", None)
    return method


MODE = _Mode()


@contextlib.contextmanager
def mode(f=None):
    """The allocation mode around one differentiation of ``f``; gives the function to call:
    ``f``, or what stands in for it when ``f`` is itself a function the mode routes (a bound
    method of a routed class, ``scipy.stats.norm.logpdf``; ``scipy.linalg.det``)."""
    MODE.enter(f)
    try:
        with MODE.lock:
            stand_in = None if f is None else MODE._stand_in(f)
        yield f if stand_in is None else stand_in
    finally:
        MODE.exit()
