"""Arguments as trees: flatten any structure of arrays to leaves, and rebuild the same structure.

Gradients mirror their arguments: the same containers, an ndarray of the argument's shape and
dtype for a float array, a float for a float scalar, ``None`` for what cannot be differentiated.

What is followed, and how it is rebuilt (the gradient of a structure is the same structure):

* tuples, lists, namedtuples, dicts and dict subclasses (``OrderedDict``, ``defaultdict`` with
  its factory), in their own order;
* dataclass instances (frozen ones too) and plain objects: every attribute stored in the
  instance, in ``__dict__`` and in ``__slots__``. The rebuilt object is a shallow copy whose
  attributes are set directly (``object.__setattr__``): neither ``__init__`` nor
  ``__post_init__`` runs, because a gradient need not pass the checks made on parameters (a
  negative scale), and attributes derived in ``__post_init__`` are followed like the others;
* types registered with :func:`register_pytree`, by their own functions.

Leaves: arrays and anything array-like, numbers, strings, ``None``, functions, modules, classes,
and objects of NumPy's and SciPy's own classes (passed as they are: mutad saves the writable
arrays inside them and writes them back, see :func:`arrays_within`). What cannot be followed is
refused before the function runs, with :class:`UnsupportedArgumentError`: sets holding arrays
(no order to rebuild them in), iterators and generators (reading them consumes them), objects
that refer back to themselves, and objects that hold arrays outside their attributes.
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import functools
import gc
import numbers
import operator
import types
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np

from .errors import (InvalidArgumentError, MutadError, UnsupportedArgumentError,
                     UnsupportedArrayError, UnsupportedOperationError)
from .allocation import Preexisting, stand_in_value
from .devices import is_device
from .levels import handled
from .views import writeable

T = TypeVar("T")

REGISTERED: dict[type, tuple[Callable[[Any], tuple[Iterable[Any], Any]],
                             Callable[[Any, list[Any]], Any]]] = {}
"""Types given to :func:`register_pytree`: ``type -> (flatten, unflatten)``."""

STATIC = (numbers.Number, str, bytes, type(None), type(Ellipsis), slice, range, type,
          types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
          functools.partial, enum.Enum, np.dtype, np.generic)
"""Leaves that are not containers: values and code, never followed."""

LIBRARIES = ("numpy", "scipy")


def _users_registration(cls):
    """Whether ``cls`` was given to ``register_pytree`` by the user's code, whose changes by
    the function are followed to the caller's object (``_Registered``); the types mutad
    registers itself (SciPy's sparse matrices, whose operations sort and canonicalise the
    rebuilt copy's indices in place) are left as they are."""
    registered = REGISTERED.get(cls)
    return registered is not None and not str(
        getattr(registered[0], "__module__", "")).startswith("mutad.")


def register_pytree(cls: type[T], flatten: Callable[[T], tuple[Iterable[Any], Any]],
                    unflatten: Callable[[Any, list[Any]], T]) -> None:
    """Tell mutad how to take apart and rebuild objects of type ``cls``, as JAX's
    ``register_pytree_node``: ``flatten(obj)`` returns ``(children, aux)``, a sequence of the
    values to follow and anything else needed to rebuild; ``unflatten(aux, children)`` builds an
    object from them (it is called with gradients as children, to give the gradient).

    Needed only for types whose arrays are not attributes of the instance (a C extension type),
    or whose gradient should be built by the type's own constructor."""
    if not isinstance(cls, type) or not callable(flatten) or not callable(unflatten):
        raise InvalidArgumentError("register_pytree(cls, flatten, unflatten): give a class and "
                                   "two functions.")
    REGISTERED[cls] = (flatten, unflatten)


def flatten(tree):
    """``(leaves, rebuild)``: the leaves in order, and ``rebuild(new_leaves)`` for the structure.
    ``rebuild(new_leaves, kept)`` builds what a function is given for ``tree``: the caller's
    own container wherever each leaf within it is the very leaf it holds (a log list, an empty
    list), so that what the function does to it (``log.append``) reaches the caller, as in
    NumPy's run; a new one only around leaves that were replaced. ``kept``, a list, takes the
    caller's containers so given; ``rebuild(new_leaves, kept, built)`` also records in
    ``built`` each container made anew (``Built``), whose changes :func:`written_back` gives
    the caller's."""
    kind = type(tree)
    if kind is np.ndarray:  # the common case, first
        return [tree], _first
    if kind in _NUMBERS and kind not in REGISTERED:  # (a leaf, as _node would find)
        return [tree], _first
    if kind is dict and not tree and dict not in REGISTERED:  # no keyword arguments
        return [], _no_keywords
    return _flatten(tree, set())


_NUMBERS = frozenset((float, int, bool, str, type(None)))
"""Exact types of leaves told before the general walk: an argument such as a step count."""


def _first(leaves, kept=None, built=None):
    return leaves[0]


def _no_keywords(leaves, kept=None, built=None):
    return {}


def _flatten(tree, path):
    children, build = _node(tree)
    if build is None:
        if type(tree) is Preexisting:  # an array made before, standing in: the array itself
            tree = stand_in_value(tree)  # (or the differentiation's, once written)
        return [tree], _first
    if id(tree) in path:
        raise UnsupportedArgumentError(
            f"an argument of type {type(tree).__name__} refers back to itself, so mutad cannot "
            "follow or rebuild it. Pass the arrays it holds in a tuple, list or dict instead.")
    path.add(id(tree))
    parts = [_flatten(child, path) for child in children]
    path.discard(id(tree))
    sizes = [len(leaves) for leaves, _ in parts]
    leaves = [leaf for p in parts for leaf in p[0]]
    if type(build) is _ObjectBuilder and not any(map(_data, leaves)):
        return [tree], _first  # nothing to differentiate or restore: passed as it is

    def rebuild(new, kept=None, built=None):
        if kept is not None and all(a is b for a, b in zip(new, leaves, strict=True)):
            kept.append(tree)
            return tree
        out, start = [], 0
        for (_, sub), n in zip(parts, sizes, strict=True):
            out.append(sub(new[start:start + n], kept, built))
            start += n
        try:
            made = build(out)
            if built is not None:
                built.append(Built(tree, made, children, out, type(build) is _ObjectBuilder,
                                   _Registered(made, REGISTERED[type(tree)][0])
                                   if _users_registration(type(tree)) else None))
            return made
        except MutadError:
            raise
        except Exception as error:  # a tuple subclass with its own __new__, an object copy
            raise UnsupportedArgumentError(
                f"mutad cannot rebuild an argument of type {type(tree).__qualname__} around "
                f"traced arrays or gradients ({type(error).__name__}: {error}). Register the "
                "type with mutad.register_pytree(cls, flatten, unflatten), or pass its arrays "
                "in a tuple, list or dict.") from error

    return leaves, rebuild


def _node(x):
    """``(children, build)`` of a container, ``build(children)`` making one of its kind;
    ``(None, None)`` for a leaf."""
    kind = type(x)
    if kind in REGISTERED:
        flatten_, unflatten = REGISTERED[kind]
        children, aux = flatten_(x)
        return list(children), lambda values: unflatten(aux, values)
    if kind in (tuple, list):
        return x, kind
    if kind is np.ndarray:  # a leaf, told before asking ``STATIC``'s ABCs (numbers.Number)
        return None, None
    if kind is dict:
        keys = list(x)
        return [x[k] for k in keys], lambda values: dict(zip(keys, values, strict=True))
    # (array-like first: a traced value answers ``isinstance`` through its ``__class__``, which
    # asks who is calling, once for each type of ``STATIC``)
    if _array_like(x) or isinstance(x, STATIC):
        return None, None
    if isinstance(x, tuple):
        if hasattr(kind, "_make"):  # a namedtuple
            return x, kind._make
        return x, kind
    if isinstance(x, list):
        return x, kind
    if isinstance(x, dict):  # OrderedDict, defaultdict (copied with its factory), others
        keys = list(x)
        return [x[k] for k in keys], lambda values: _refilled(x, keys, values)
    if isinstance(x, (set, frozenset)):
        if any(_holds_arrays(e) for e in x):
            raise UnsupportedArgumentError(
                f"an argument is a {kind.__name__} holding arrays: a set has no order, so mutad "
                "cannot rebuild it around traced arrays or gradients. Pass a tuple or list.")
        return None, None
    if isinstance(x, collections.abc.Iterator):  # a file, a generator, iter(list)
        if isinstance(x, types.GeneratorType) or _reaches_arrays(x):
            raise UnsupportedArgumentError(
                f"an argument is an iterator ({kind.__name__}) that may yield arrays: mutad "
                "would consume it to find them, and could not give it back as it was. Pass a "
                "tuple or list (tuple(it)).")
        return None, None
    if kind.__module__.split(".")[0] in LIBRARIES:
        return None, None
    names = _attributes(x)
    if names is None:
        if _reaches_arrays(x):
            raise UnsupportedArgumentError(
                f"an argument of type {kind.__qualname__} holds arrays that are not attributes "
                "of the instance, so mutad cannot follow them. Register the type with "
                "mutad.register_pytree(cls, flatten, unflatten), or pass its arrays instead.")
        return None, None
    return [getattr(x, n) for n in names], _ObjectBuilder(x, names)


class Built:
    """A container ``rebuild`` made for the caller's ``tree`` around other leaves: ``made``,
    whose children ``given`` stand for ``tree``'s ``children``; ``attributes``: a plain object
    or dataclass instance (``_ObjectBuilder``'s); ``registered``: for a type given to
    ``register_pytree``, what ``made`` held as its ``unflatten`` built it (``_Registered``)."""

    __slots__ = ("tree", "made", "children", "given", "attributes", "registered")

    def __init__(self, tree, made, children, given, attributes, registered=None):
        self.tree, self.made, self.children, self.given = tree, made, list(children), given
        self.attributes, self.registered = attributes, registered


def written_back(built, plain, apply=True, refuse=True):
    """Whether the function changed a container it was given for the caller's (``built``,
    ``rebuild``'s records): a key, attribute or item added, removed or bound to another value
    (``st.y = ...``, ``d["y"] = ...``, ``p.append(...)``). ``apply``: give the caller's
    containers those changes, as NumPy's run of the function makes them in the caller's own
    objects: where the function stored a value it was given for the caller's (an array, a
    container), the caller's own; else ``plain(value)``, the value NumPy's run stores (a
    traced value's plain one), within the lists, dicts and tuples it made too. Tuples and
    namedtuples cannot change. An object of a type given to ``register_pytree`` (built by
    its ``unflatten``) gives the caller's the attributes the function added, removed or
    rebound in it; what else changed in it (its items, the contents of a dict or list it
    does not share with the caller's, what only its ``flatten`` finds) cannot be given back,
    and is refused (``refuse``, and ``apply``: :class:`UnsupportedOperationError`), before
    any container is changed."""
    registered = {id(b): b.registered.changes(b.made, b.tree, plain) for b in built
                  if b.registered is not None}
    if all(not names and elsewhere is None and not shared
           for names, elsewhere, shared in registered.values()) \
            and all(map(_unchanged, built)):  # (the common case, told cheaply: no change)
        return False
    if apply and refuse:
        for b in built:
            names, elsewhere, _ = registered.get(id(b), ((), None, ()))
            if elsewhere is not None or names and type(b.made) is not type(b.tree):
                raise UnsupportedOperationError(
                    f"f changed {elsewhere or 'attributes'} of an argument of type "
                    f"{type(b.tree).__qualname__}, given to mutad.register_pytree: f is given "
                    "an object that the type's unflatten builds around traced arrays, and "
                    "mutad cannot give that change to the caller's object, as NumPy's run of "
                    "f would make it. Store what f keeps in an attribute of the object (an "
                    "instance with a __dict__ or __slots__, rebuilt by unflatten as the same "
                    "type), or keep it outside the argument (a dict or list argument).")
    callers = {}
    for b in built:
        for given, child in zip(b.given, b.children):
            callers[id(given)] = child
        callers[id(b.made)] = b.tree

    def mapped(value, depth=3):
        caller = callers.get(id(value))
        if caller is not None or id(value) in callers:
            return caller
        kind = type(value)
        if depth and (kind is list or kind is dict):
            for k in (list(value) if kind is dict else range(len(value))):
                item = mapped(value[k], depth - 1)
                if item is not value[k]:
                    value[k] = item
            return value
        if depth and kind is tuple:
            items = tuple(mapped(item, depth - 1) for item in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        return plain(value)

    changed = False
    for b in built:
        caller, made = b.tree, b.made
        if b.attributes:
            own = getattr(made, "__dict__", None)
            if type(own) is dict:
                changed |= _refill(caller.__dict__, own, callers, mapped, apply)
            for name in _slot_names(type(made)):
                if hasattr(made, name):
                    value = getattr(made, name)
                    if not hasattr(caller, name) or getattr(caller, name) is not callers.get(
                            id(value), value):
                        changed = True
                        if apply:
                            object.__setattr__(caller, name, mapped(value))
                elif hasattr(caller, name):
                    changed = True
                    if apply:
                        object.__delattr__(caller, name)
        elif b.registered is not None:
            names, elsewhere, shared = registered[id(b)]
            changed |= bool(names) or elsewhere is not None or bool(shared)
            if apply:
                for value in shared:  # (its items: plain values, or the caller's own)
                    mapped(value)
            if apply and names and elsewhere is None and type(made) is type(caller):
                now, slots = _attribute_values(made), _slot_names(type(made))
                for name in names:
                    if name in slots:
                        if name in now:
                            object.__setattr__(caller, name, mapped(now[name]))
                        elif hasattr(caller, name):
                            object.__delattr__(caller, name)
                    elif name in now:
                        caller.__dict__[name] = mapped(now[name])
                    else:
                        caller.__dict__.pop(name, None)
        elif isinstance(caller, tuple):
            continue
        elif isinstance(caller, dict):
            changed |= _refill(caller, made, callers, mapped, apply)
        elif isinstance(caller, list):
            if len(made) != len(caller) or any(callers.get(id(v), v) is not c
                                               for v, c in zip(made, caller)):
                changed = True
                if apply:
                    caller[:] = [mapped(v) for v in made]
    return changed


def contents(x, depth=3):
    """What the container ``x`` holds, ``depth`` containers down (dicts, lists, the
    attributes of plain objects), to tell with :func:`same_contents` whether a function
    changed it; None for what is no such container."""
    if isinstance(x, dict):
        items = list(x.items())
    elif isinstance(x, list):
        items = list(enumerate(x))
    elif type(getattr(x, "__dict__", None)) is dict and not isinstance(x, STATIC) \
            and not _array_like(x):
        items = list(vars(x).items())
    else:
        return None
    return [(k, v, contents(v, depth - 1) if depth else None) for k, v in items]


def same_contents(before, after):
    """Whether two :func:`contents` of a container are the same keys and objects."""
    if before is None or after is None:
        return before is after
    return len(before) == len(after) and all(
        k == k2 and v is v2 and same_contents(c, c2)
        for (k, v, c), (k2, v2, c2) in zip(before, after))


def _unchanged(b):
    """Whether the container ``b.made`` holds what it was made with, keys and all (where
    it cannot tell cheaply, an object with slots, False: ``written_back`` looks closer)."""
    made, given = b.made, b.given
    if b.registered is not None:  # (told by its ``changes``)
        return True
    if b.attributes:
        own = getattr(made, "__dict__", None)
        return type(own) is dict and len(own) == len(given) and all(
            map(operator.is_, own.values(), given)) and own.keys() == b.tree.__dict__.keys()
    if type(made) is dict or type(made) is not tuple and isinstance(made, dict) \
            and type(made) not in REGISTERED:
        return len(made) == len(given) and all(map(operator.is_, made.values(), given)) \
            and made.keys() == b.tree.keys()
    if type(made) is list or type(made) is not tuple and isinstance(made, list) \
            and type(made) not in REGISTERED:
        return len(made) == len(given) and all(map(operator.is_, made, given))
    return True  # (a tuple, a registered type: left as they are)


def _refill(caller, made, callers, mapped, apply):
    """``written_back`` for a dict (an object's ``__dict__``): whether ``made``'s items differ
    from ``caller``'s (``callers``: the caller's value for each one given), and, ``apply``,
    ``caller`` given them (``mapped``)."""
    if list(made) == list(caller) and all(callers.get(id(v), v) is caller[k]
                                          for k, v in made.items()):
        return False
    if apply:
        items = [(k, mapped(v)) for k, v in made.items()]
        caller.clear()
        caller.update(items)
    return True


class _Registered:
    """What an object of a type given to ``register_pytree`` held as its ``unflatten`` built
    it, to tell what a function then changed in it (``changes``): its attributes
    (``__dict__`` and slots), the contents of the dicts, lists and objects among them, its
    items (a dict or list); for a type keeping no attribute (a C extension type, one keeping
    its state elsewhere), the children and ``aux`` its ``flatten`` finds, where two calls of
    it find the same (else they cannot be compared)."""

    __slots__ = ("flatten", "attributes", "inner", "items", "found")

    def __init__(self, made, flatten_):
        self.flatten = flatten_
        self.attributes = _attribute_values(made)
        self.inner = {k: contents(v, 1) for k, v in self.attributes.items()}
        self.items = contents(made, 1) if isinstance(made, (dict, list)) else None
        self.found = None
        if not self.attributes and self.items is None:
            found = self._found(made)
            if found is not None and _same_found(found, self._found(made)):
                self.found = found

    def _found(self, made):
        try:
            children, aux = self.flatten(made)
            return list(children), aux
        except Exception:  # (a flatten that cannot take what the function left)
            return None

    def changes(self, made, caller, plain=None):
        """``(names, elsewhere, shared)``: the attributes the function added, removed or
        rebound in ``made``; what else it changed there that the caller's object does not
        share, in words (None if nothing): the contents of a dict, list or object held in an
        attribute that is not the caller's own, its items, what its ``flatten`` finds (a
        child found then or its ``plain`` value: mutad's own settling of a store the
        function reaches by a name); the caller's own containers among its attributes whose
        contents it changed (``unflatten`` gave them on: a log it appended to)."""
        now, before = _attribute_values(made), self.attributes
        names = [n for n in before if n not in now or now[n] is not before[n]]
        names += [n for n in now if n not in before]
        elsewhere, callers, shared = None, None, []
        for name, inner in self.inner.items():
            value = now.get(name)
            if inner is not None and value is before[name] and not same_contents(
                    inner, contents(value, 1)):
                callers = _attribute_values(caller) if callers is None else callers
                if value is not callers.get(name):
                    elsewhere = f"the contents of its attribute {name!r}"
                else:
                    shared.append(value)
        if self.items is not None and not same_contents(self.items, contents(made, 1)):
            elsewhere = "its items"
        if self.found is not None:
            found = self._found(made)
            if found is None or not _same_found(self.found, found, plain):
                elsewhere = "what its flatten function finds in it"
        return names, elsewhere, shared


def _same_found(a, b, plain=None):
    """Whether two ``(children, aux)`` a ``flatten`` found are the same objects (``aux``
    equal), where that can be told; ``plain``: a child of ``a`` may be its plain value."""
    if len(a[0]) != len(b[0]) or not all(x is y or plain is not None and plain(x) is y
                                         for x, y in zip(a[0], b[0])):
        return False
    if a[1] is b[1]:
        return True
    try:
        same = a[1] == b[1]
        return type(same) in (bool, np.bool_) and bool(same)
    except Exception:  # (arrays in aux: no one answer)
        return False


def _attribute_values(x):
    """The attributes stored in the instance ``x`` (``__dict__`` and slots), by name."""
    own = getattr(x, "__dict__", None)
    values = dict(own) if type(own) is dict else {}
    for name in _slot_names(type(x)):
        try:
            values[name] = object.__getattribute__(x, name)
        except AttributeError:  # (a slot not set)
            pass
    return values


class _ObjectBuilder:
    """Rebuilds a plain object or dataclass instance: a shallow copy with its attributes set
    directly, so that neither ``__init__`` nor ``__post_init__`` runs on gradients."""

    def __init__(self, x, names):
        self.x, self.names = x, names

    def __call__(self, values):
        return _with_attributes(self.x, self.names, values)


def _data(leaf):
    """Whether a leaf is an array or a float: something to differentiate or to restore."""
    return _array_like(leaf) or isinstance(leaf, (np.ndarray, float, complex, np.inexact))


def _array_like(x):
    kind = type(x)
    return hasattr(kind, "__array_ufunc__") or hasattr(kind, "__array_function__")


def attributes(x):
    """The names of the attributes of ``x`` that :func:`flatten` follows, in its order, where it
    follows ``x`` as a plain object or dataclass instance (``_node``); else None."""
    kind = type(x)
    if kind in REGISTERED or isinstance(x, (tuple, list, dict, set, frozenset, STATIC)) \
            or _array_like(x) or isinstance(x, collections.abc.Iterator) \
            or kind.__module__.split(".")[0] in LIBRARIES:
        return None
    return _attributes(x)


def _attributes(x):
    """The names of the attributes stored in instance ``x`` (its ``__dict__`` and its slots),
    or None when it stores none there."""
    slots = [name for name in _slot_names(type(x))
             if hasattr(x, name)]  # an unset slot has no value to follow
    own = getattr(x, "__dict__", None)
    if not isinstance(own, dict):
        return slots or None
    return list(own) + [n for n in slots if n not in own]


def _slot_names(kind):
    """The names of the ``__slots__`` attributes of instances of ``kind``, as stored."""
    names = []
    for cls in kind.__mro__:
        declared = cls.__dict__.get("__slots__", ())
        for name in (declared,) if isinstance(declared, str) else declared:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{cls.__name__.lstrip('_')}{name}"  # Python's name mangling
            names.append(name)
    return names


def _with_attributes(x, names, values):
    new = copy.copy(x)
    own = getattr(new, "__dict__", None)
    if type(own) is dict and len(own) > len(names):  # (set since ``names`` were taken: by
        for name in [n for n in own if n not in names]:  # f, ``written_back`` gives them the
            del own[name]  # caller's; the gradient keeps the structure the call was given)
    for name, value in zip(names, values, strict=True):
        object.__setattr__(new, name, value)  # frozen dataclasses too
    return new


def _refilled(x, keys, values):
    new = copy.copy(x)
    new.clear()
    new.update(zip(keys, values, strict=True))
    return new


def _holds_arrays(x):
    try:
        leaves = flatten(x)[0]
    except UnsupportedArgumentError as error:  # (an argument mutad refuses holds arrays)
        handled(error)
        return True
    return any(isinstance(leaf, np.ndarray) or _array_like(leaf) for leaf in leaves)


def _reaches_arrays(x, depth=3):
    """Whether an object mutad cannot take apart refers to arrays through C-level storage, a
    few references deep (code, modules and classes are not searched: they are not data)."""
    level = [x]
    for _ in range(depth):
        level = [r for item in level for r in gc.get_referents(item)
                 if not isinstance(r, (type, types.ModuleType, types.FunctionType, types.CodeType))]
        if any(isinstance(r, np.ndarray) for r in level):
            return True
    return False


def arrays_within(x):
    """The writable arrays inside a leaf that mutad does not follow (an object of a NumPy or
    SciPy class): saved before the function runs and written back after, not differentiated."""
    if isinstance(x, np.ndarray):
        return [x] if writeable(x) else []
    if isinstance(x, STATIC) or _array_like(x) or not type(x).__module__.startswith(LIBRARIES):
        return []
    found, seen, stack = [], set(), [x]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if type(item) is np.ndarray:
            if writeable(item):
                found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif not isinstance(item, STATIC) and not _array_like(item):
            stack.extend(getattr(item, name) for name in _attributes(item) or ())
    return found


def is_inexact_array(x):
    """A float or complex array, NumPy's or a device's: one mutad differentiates."""
    return (isinstance(x, np.ndarray) or is_device(x)) and x.dtype.kind in "fc"


def is_inexact_scalar(x):
    """A float or complex number: one mutad differentiates."""
    return isinstance(x, (float, complex, np.inexact)) and not isinstance(x, bool)


def scalar_derivative(value, *types):
    """The 0-d derivative ``value`` with respect to (or of) numbers of ``types``, as the
    number it is returned as: Python's where every one of them is Python's, else NumPy's
    scalar of its dtype (a float32 argument's gradient is float32, as an array's is). Exact
    either way: ``item`` of a longdouble keeps it one."""
    if all(t is float or t is complex for t in types):
        return value.item()
    return value[()]


def check_leaf(x):
    """Refuse a leaf mutad would differentiate wrongly: ndarray subclasses, and ``object``
    arrays holding numbers."""
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        raise UnsupportedArrayError(unsupported_array(x, "an argument"))
    if isinstance(x, np.ndarray) and x.dtype == object and any(
            isinstance(e, (float, complex, np.inexact))
            or (isinstance(e, np.ndarray) and e.dtype.kind in "fc") for e in x.flat):
        raise UnsupportedArrayError(
            "an argument is an array of dtype object holding numbers: mutad differentiates "
            "float and complex arrays only, and would give it no gradient. Convert it: x.astype(float).")


def unsupported_array(x, what):
    """What to say about ``what``, an ndarray subclass ``x``, and what to pass instead."""
    if isinstance(x, np.ma.MaskedArray):
        instead = ("x.filled(0.0) or x.compressed(), applying the mask inside the function "
                   "(np.where(mask, 0.0, x)) if it matters there")
    elif isinstance(x, np.matrix):
        instead = "np.asarray(x), writing matrix products with @"
    else:
        instead = "np.asarray(x)"
    return (f"{what} is a {type(x).__module__}.{type(x).__qualname__}, a subclass of "
            "ndarray, whose operations may mean something else than a plain ndarray's, which "
            f"is what mutad differentiates. Pass {instead} instead.")
