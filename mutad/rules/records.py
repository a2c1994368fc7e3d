"""``np.rec``'s record arrays of differentiated values: structured arrays whose fields are
attributes (``r.a``, ``r.a = v``).

NumPy's ``recarray`` is an ndarray subclass owning its data, so it cannot hold a traced array.
While a differentiation runs, ``np.rec.fromarrays``, ``np.rec.fromrecords`` and
``np.rec.array`` called by the user's code give a :class:`Records`: a structured array the
differentiation follows (NumPy's values, made by NumPy's function of the plain values, as a
constant the function may write traced values into, as np.zeros' arrays are; the fields or
records that carry a derivative written into it), read and written as NumPy's record array
reads and writes it: ndarray's attributes first, then the fields; a field of a structured
dtype, records by an index and whole-array methods as record arrays; other fields as arrays.
One record (``r[1]``) is NumPy's ``np.record`` to the program, a view of the records, whose
fields of numbers (``r[1].a``, ``r[1]['a']``, ``r[1][0]``, its iteration) are NumPy's scalars. NumPy's functions of it are those of its structured array (what mutad
refuses of whole records it refuses here too), each result a record array where NumPy's is one. ``a.view(np.recarray)`` of an array the
differentiation follows is one too.
"""

import sys

import numpy as np
from numpy.lib import recfunctions

from ..core.allocation import BUILDERS, allocate, by_user_code, holds_derivative, in_containers
from ..core.errors import UnsupportedOperationError
from ..core.levels import CARRIERS
from ..core.registry import SUBCLASS_VIEWS, defcomposite, defroute
from ..core.views import memory, owner, view_as, wrapped
from ..engines.arraylike import RECORD_FUNCTIONS, one_record, record_field


class Records:
    """A record array of differentiated values (the module's docstring)."""

    __slots__ = ("array",)

    # isinstance(r, np.recarray) holds, as of NumPy's (user code branches on it); of one
    # record (r[1]), NumPy's np.record
    __class__ = property(lambda self: np.record if one_record(memory(
        object.__getattribute__(self, "array"))) else np.recarray)

    def __init__(self, array):
        object.__setattr__(self, "array", array)

    def __getattr__(self, name):
        array = object.__getattribute__(self, "array")
        if hasattr(np.ndarray, name):  # ndarray's attributes first, as NumPy's recarray
            value = getattr(array, name)
            if callable(value):  # a method: its results typed as NumPy's recarray's
                return lambda *args, **kwargs: _as_numpys(
                    value, lambda *a, **k: getattr(_copy(self), name)(*a, **k), args, kwargs)
            return _records(value)
        if array.dtype.names is not None and name in array.dtype.names:
            return _records(record_field(array, array[name]))
        if one_record(memory(array)):  # (NumPy's errors, of np.record, of np.recarray)
            raise AttributeError(f"'record' object has no attribute '{name}'")
        raise AttributeError(f"recarray has no attribute {name}")

    def __setattr__(self, name, value):
        array = object.__getattribute__(self, "array")
        if not hasattr(np.ndarray, name) and array.dtype.names is not None \
                and name in array.dtype.names:
            array[name] = _arrays(value)  # recarray.__setattr__: setfield
        else:
            setattr(array, name, _arrays(value))

    def __getitem__(self, key):
        return _records(record_field(self.array, self.array[_arrays(key)]))

    def __setitem__(self, key, value):
        self.array[_arrays(key)] = _arrays(value)

    def __len__(self):
        return len(self.array)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"rec.array({self.array!r})"

    def __array__(self, dtype=None, copy=None):
        return self.array.__array__(dtype, copy=copy)

    def __array_function__(self, func, types, args, kwargs):
        if func in _BUILDERS:  # (dispatched on like=, which NumPy leaves out of kwargs)
            kwargs = {**kwargs, "like": args[0]}
        return _as_numpys(func, func, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _as_numpys(getattr(ufunc, method), getattr(ufunc, method), inputs, kwargs)

    def __eq__(self, other):
        return self.array == _arrays(other)

    def __ne__(self, other):
        return self.array != _arrays(other)

    __hash__ = None  # type: ignore[assignment]  # unhashable, as NumPy's arrays


def _arrays(tree):
    """``tree`` (lists, tuples and dicts of it) with each :class:`Records`' structured array."""
    return in_containers(
        lambda x: object.__getattribute__(x, "array") if type(x) is Records else x, tree)


_BUILDERS = frozenset(getattr(np, name) for name in BUILDERS if hasattr(np, name))


def _as_numpys(call, numpys, args, kwargs):
    """``call(*args, **kwargs)`` (a NumPy function, ufunc or ndarray method) of record arrays
    and arrays, each of its results a record array exactly where NumPy's is one, NumPy's
    results the arguments themselves where NumPy's are (``out=``, ``np.asanyarray``). Which
    of NumPy's functions keep the subclass depends on the function and its arguments
    (``np.take`` keeps it, ``np.concatenate``, ``np.copy`` and ``np.where`` do not), so
    ``numpys`` (``call`` as NumPy's of a record array) is first called of copies of the plain
    values, raising NumPy's errors. With the user's function among the arguments (run once,
    as NumPy runs it), the structured results are record arrays."""
    leaves = list(_leaves([args, kwargs]))
    calls_back = any(callable(x) and not isinstance(x, (type, np.ufunc, np.dtype))
                     and type(x) is not Records for x in leaves)
    copies = {}  # (id of each copy: the argument it stands for)
    if not calls_back:
        def copy(x):
            copies[id(c := _copy(x))] = x
            return c
        plain_args, plain_kwargs = in_containers(copy, args), in_containers(copy, kwargs)
        with np.errstate(all="ignore"):  # (NumPy's warnings come once, of the call itself)
            probe = numpys(*plain_args, **plain_kwargs)
    y = call(*_arrays(args), **_arrays(kwargs))

    def typed(y, probe):
        if calls_back:
            given = [x for x in leaves if type(x) is Records and _arrays(x) is y]
            return given[0] if given else _records(y)
        if id(probe) in copies:  # NumPy's result is the argument itself
            return copies[id(probe)]
        if type(y) in (list, tuple) and type(probe) is type(y) and len(probe) == len(y):
            return type(y)(typed(a, b) for a, b in zip(y, probe))
        if any(_arrays(x) is y for x in leaves if type(x) is Records):
            y = y[...]  # (NumPy's is a new view of it)
        return Records(y) if wrapped(y) and isinstance(probe, np.recarray) else y

    return typed(y, None if calls_back else probe)


def _copy(x):
    """A copy of ``x``'s plain values (a record array of a :class:`Records`'), for NumPy's
    function to read and write in its stead (``_as_numpys``)."""
    if type(x) is Records:
        return memory(object.__getattribute__(x, "array")).copy().view(np.recarray)
    return memory(x).copy() if wrapped(x) else x


def _records(y):
    """A structured traced result as a record array, as NumPy's recarray gives its own."""
    if wrapped(y) and y.dtype.names is not None:
        return Records(y)
    return y


def _plain(tree):
    """NumPy's values of ``tree`` (lists and tuples of it), for NumPy's function to read."""
    kind = type(tree)
    if kind is Records:
        return memory(object.__getattribute__(tree, "array"))
    if kind in (list, tuple):
        return kind(_plain(x) for x in tree)
    return memory(tree) if wrapped(tree) else tree


def _constructor(original, written, viewing=False):
    """``original`` (one of np.rec's constructors) as the user's code calls it in a
    differentiation: NumPy's record array of the plain values as a constant, ``written(t,
    *args, **kwargs)`` then writing into it the values that carry a derivative. Called by
    NumPy's, SciPy's or mutad's code, NumPy's, which refuses values with a derivative.
    ``viewing``: ``original(a, copy=False)`` of an array of records is a view of it
    (``np.rec.array``'s)."""

    def stand_in(*args, **kwargs):
        if len(args) == 1 and set(kwargs) == {"copy"} and kwargs["copy"] is False \
                and viewing and wrapped(_arrays(args[0])) \
                and _arrays(args[0]).dtype.names is not None:
            return Records(_arrays(args[0]))  # a view of it, as NumPy's
        plain_args, plain_kwargs = _plain(args), {k: _plain(v) for k, v in kwargs.items()}
        y = original(*plain_args, **plain_kwargs)
        carried = holds_derivative(list(args)) or holds_derivative(list(kwargs.values()))
        if isinstance(y, np.ndarray) and any(
                owner(memory(a)) is owner(y) for a in _leaves(_arrays([args, kwargs]))
                if wrapped(a)):
            raise UnsupportedOperationError(  # (it would be a second array over its memory)
                f"np.rec.{original.__name__} viewing the memory of an array the function "
                "follows, other than np.rec.array(a, copy=False) of an array of records: "
                "copy it (copy=True), or read and write the structured array's fields.")
        made = y
        if type(y) is np.recarray:
            made = by_user_code(y.view(np.ndarray), original, args, kwargs, sys._getframe(1),
                                True)
        if not wrapped(made):
            if carried:
                raise UnsupportedOperationError(
                    f"np.rec.{original.__name__} of differentiated values, called by a "
                    "library's code: mutad follows record arrays the function makes. Allocate "
                    "a structured array in the function and write its fields, r = np.zeros("
                    "len(x), dtype=[('a', float), ('b', float)]); r['a'] = x.")
            return y
        if carried:
            written(made, *args, **kwargs)
        return Records(made)

    stand_in.__name__ = stand_in.__qualname__ = original.__name__
    stand_in.__doc__ = original.__doc__
    defroute(original, stand_in)


def _leaves(tree):
    if type(tree) in (list, tuple):
        for x in tree:
            yield from _leaves(x)
    elif type(tree) is dict:
        yield from _leaves(list(tree.values()))
    else:
        yield tree


def _from_arrays(t, arrayList, *args, **kwargs):
    for name, a in zip(t.dtype.names, arrayList):
        if holds_derivative([a]):
            t[name] = _arrays(a)


def _from_records(t, recList, *args, **kwargs):
    if wrapped(recList) or type(recList) is Records:  # an array of records
        _copy_fields(t, _arrays(recList))
        return
    for place, record in zip(np.ndindex(t.shape), recList):  # (in C order, as NumPy's)
        if holds_derivative([record]):
            t[place] = tuple(_arrays(record))


def _array(t, obj, *args, **kwargs):
    obj = _arrays(obj)
    if type(obj) in (list, tuple) and len(obj) and type(obj[0]) in (list, tuple):
        _from_records(t, obj)
    elif type(obj) in (list, tuple):
        _from_arrays(t, obj)
    elif wrapped(obj) and obj.dtype.names is not None:
        _copy_fields(t, obj)
    else:
        raise UnsupportedOperationError(
            "np.rec.array of differentiated values other than arrays, records or an array of "
            "records: allocate a structured array in the function and write its fields.")


def _copy_fields(t, records):
    """The fields of ``records`` written into ``t`` by position, as NumPy assigns records."""
    for name, source in zip(t.dtype.names, records.dtype.names):
        t[name] = records[source]


CARRIERS.add(Records)
SUBCLASS_VIEWS[np.recarray] = Records
_constructor(np.rec.fromarrays, _from_arrays)
_constructor(np.rec.fromrecords, _from_records)
_constructor(np.rec.array, _array, viewing=True)


@defcomposite(recfunctions.unstructured_to_structured)
def unstructured_to_structured(arr, dtype=None, names=None, align=False, copy=False,
                               casting="unsafe"):
    """NumPy's view of ``arr``'s memory as records (its last axis the fields, of its dtype),
    as a view of the array mutad follows, whose fields are then views of it. Where NumPy
    copies (fields of another dtype, a last axis not laid out as records), refused."""
    y = recfunctions.unstructured_to_structured(memory(arr), dtype, names, align, copy,
                                                casting)
    view = view_as(arr, y) if np.shares_memory(y, memory(arr)) else None
    if view is None:
        raise UnsupportedOperationError(
            "np.lib.recfunctions.unstructured_to_structured of differentiated values that "
            "NumPy copies into new records (fields of another dtype than the array's, or a "
            "last axis not laid out as records): make the records with np.zeros(shape, dtype) "
            "and write each field, a['m'] = x[..., 0].")
    return view


@defcomposite(recfunctions.append_fields)
def append_fields(base, names, data, dtypes=None, fill_value=-1, usemask=True,
                  asrecarray=False):
    """NumPy's records of ``base``'s fields and the new ones (its dtype, its fill where the
    arrays' lengths differ), made of the plain values as a new array the differentiations
    follow, into which each field that carries a derivative is then written. Of records in
    records, and as NumPy's masked array (``usemask=True``, its default), refused."""
    if usemask:
        raise UnsupportedOperationError(
            "np.lib.recfunctions.append_fields of differentiated values with usemask=True (its "
            "default), whose masked array of records mutad does not follow: pass "
            "usemask=False (the records, the shorter arrays filled with fill_value).")
    base_array = _arrays(base)
    if np.ndim(base_array) != 1 or any(
            base_array.dtype.fields[name][0].names is not None
            for name in base_array.dtype.names or ()):
        raise UnsupportedOperationError(
            "np.lib.recfunctions.append_fields of differentiated values into records that are "
            "not one-dimensional or that hold records: allocate the records with "
            "np.zeros(n, dtype) and write each field, r['m'] = x.")
    several = isinstance(names, (tuple, list))
    names, data = (list(names), list(data)) if several else ([names], [data])
    plain = recfunctions.append_fields(_plain(base), names, _plain(data), dtypes,
                                       fill_value, False, False)
    y = allocate(plain)
    if holds_derivative([base_array]):
        for name in base_array.dtype.names:
            y[name][:len(base_array)] = base_array[name]
    for name, values in zip(names, data):
        values = _arrays(values)
        if holds_derivative([values]):
            y[name][:np.size(values)] = np.ravel(values)
    return Records(y) if asrecarray else y


RECORD_FUNCTIONS[recfunctions.append_fields] = append_fields


def _by_name(function):
    """NumPy's recfunctions ``function`` (``drop_fields``, ``rename_fields``,
    ``repack_fields``, ``require_fields``) of records holding differentiated values: NumPy's
    result of the plain values, the records themselves or a view of them where NumPy's is one
    (``rename_fields``); else a new array the differentiations follow, NumPy's values in the
    fields it made (zeros of ``require_fields``), and into it each field of the records that
    is one of its (by name, in records in records too)."""
    def by_name(base, *args, **kwargs):
        array = _arrays(base)
        if not holds_derivative([array]):
            return function(base, *args, **kwargs)
        plain = memory(array)
        y = function(plain, *args, **kwargs)
        if y is plain:  # (repack_fields of packed records)
            return base
        asrecords = isinstance(y, np.recarray)
        y = y.view(np.ndarray) if asrecords else y
        view = view_as(array, y) if np.shares_memory(y, plain) else None
        if view is None:
            view = allocate(y)
            kept = set(_leaf_paths(array.dtype))
            for path in _leaf_paths(y.dtype):
                if path in kept:
                    _field(view, path)[...] = _field(array, path)
        return Records(view) if asrecords else view
    by_name.__name__ = function.__name__
    by_name.nested = True  # (records in records, by their fields)
    defcomposite(function)(by_name)
    RECORD_FUNCTIONS[function] = by_name


for _function in (recfunctions.drop_fields, recfunctions.rename_fields,
                  recfunctions.repack_fields, recfunctions.require_fields):
    _by_name(_function)
del _function


def _leaf_paths(dtype, path=()):
    """The paths (tuples of names) of ``dtype``'s fields that hold no records, in its order;
    ``[()]`` for a dtype of no fields."""
    if dtype.names is None:
        return [path]
    return [leaf for name in dtype.names
            for leaf in _leaf_paths(dtype.fields[name][0], (*path, name))]


def _field(records, path):
    for name in path:
        records = records[name]
    return records


def _rows(records, path=()):
    """The field of ``records`` at ``path`` with the records' axes flattened to one, as NumPy
    reads it from the records flattened."""
    field = _field(records, path)
    return field.reshape((-1, *field.shape[np.ndim(records):]))


def _refuse_masked(name, usemask):
    if usemask:
        raise UnsupportedOperationError(
            f"np.lib.recfunctions.{name} of differentiated values with usemask=True, whose "
            "masked array of records mutad does not follow: pass usemask=False (the "
            "records, the places no array fills holding NumPy's fill values).")


@defcomposite(recfunctions.merge_arrays)
def merge_arrays(seqarrays, fill_value=-1, flatten=False, usemask=False, asrecarray=False):
    """NumPy's records of the arrays' fields side by side (its dtype, the shorter arrays
    padded with ``fill_value``), made of the plain values as a new array the differentiations
    follow, into which each field that carries a derivative is then written: the fields
    that hold no records keep their order (those of a plain array one field). Where NumPy's
    result views one array's memory, a view of it; as NumPy's masked array, refused."""
    _refuse_masked("merge_arrays", usemask)
    arrays = _arrays(seqarrays)
    plain = recfunctions.merge_arrays(_plain(seqarrays), fill_value, flatten, False, False)
    if type(arrays) in (list, tuple) and len(arrays) == 1:
        arrays = arrays[0]
    if type(arrays) not in (list, tuple):
        if wrapped(arrays) and np.shares_memory(plain, memory(arrays)):
            view = view_as(arrays, plain)
            if view is None:
                raise UnsupportedOperationError(
                    "np.lib.recfunctions.merge_arrays of one differentiated array, whose "
                    "records NumPy lays out over its memory in a way mutad does not follow: "
                    "copy it first (merge_arrays(x.copy())).")
            return Records(view) if asrecarray else view
        arrays = [arrays]
    y = allocate(plain)
    leaves = iter(_leaf_paths(plain.dtype))
    for array in arrays:
        carried = holds_derivative([array])
        for path in _leaf_paths(array.dtype if wrapped(array) else np.asarray(array).dtype):
            leaf = next(leaves)
            if carried:
                _field(y, leaf)[:np.size(array)] = _rows(array, path)
    return Records(y) if asrecarray else y


@defcomposite(recfunctions.stack_arrays)
def stack_arrays(arrays, defaults=None, usemask=True, asrecarray=False, autoconvert=False):
    """NumPy's records of the arrays one after the other, their fields matched by name (a
    plain array's named ``f<n>``; of one field, NumPy's concatenation), made of the plain
    values as a new array the differentiations follow, into which each field that carries a
    derivative is then written. As NumPy's masked array (``usemask=True``, its default),
    refused."""
    arrays = _arrays(arrays)
    if type(arrays) not in (list, tuple):
        return arrays
    if len(arrays) == 1:
        return arrays[0]
    _refuse_masked("stack_arrays", usemask)
    plain = recfunctions.stack_arrays(_plain(arrays), defaults, False, False, autoconvert)
    y = allocate(plain)
    start, seen = 0, []
    for array in arrays:
        n = np.size(array)
        names = getattr(np.asarray(array).dtype if not wrapped(array) else array.dtype,
                        "names", None)
        if holds_derivative([array]):
            if y.dtype.names is None:  # (one field in all: NumPy's concatenation)
                y[start:start + n] = _rows(array, names or ())
            elif names is None:
                y[f"f{len(seen)}"][start:start + n] = _rows(array)
            else:
                for name in names:
                    y[name][start:start + n] = _rows(array, (name,))
        seen += [name for name in names or () if name not in seen]
        start += n
    return Records(y) if asrecarray else y


RECORD_FUNCTIONS[recfunctions.stack_arrays] = stack_arrays
RECORD_FUNCTIONS[recfunctions.merge_arrays] = merge_arrays
