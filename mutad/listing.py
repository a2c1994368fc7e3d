"""The recorded program as a Wengert list: one line per record (``mutad.make_tape``).

Buffers are named ``%0``, ``%1``, ... in order of appearance, the arguments' first; a view is
shown as the region of its buffer it covers (``%0[1:-1]`` is written ``%0[1:9]`` for a buffer of
ten elements). A line reads

    outputs = primitive(inputs, settings)      kept bytes      undo kind

with ``<-`` in place of ``=`` for a write into an existing buffer. The records that one line of
the differentiated code made are headed by that line, as a comment: its file, line number and
text (``# step.py:3  u += dt * v``), unless no record was made by code in a file (a doctest, the
interactive prompt), whose line numbers would say little. Constants are shown by value
when they are numbers, else as ``<f64[3]>`` (kept by the record) or ``<f64[3] not kept>`` (the
record holds none of its memory). *Kept* counts the bytes of the arrays a record holds for its
replay (a view counts the memory it keeps alive); *undo* says how a write is put back:
``inverse`` (computed back), ``partial`` (the inverse, then the few elements it could not give
back copied back), ``checkpoint`` (the overwritten region copied back).
"""

import operator

import numpy as np

from .core.debug import location, source
from .engines.elementwise import ASSIGNMENT, ElementWrite, ElementsRead
from .core.errors import function_name
from .core.shadows import Buffer, Place
from .core.tape import Absent, Primitive
from .engines.operations import assign
from .core.views import owner
from .engines.inplace import SavedWrite
from .engines.writes import CopyBack


class TapeListing:
    """The records of one traced call of a function, and their listing (``str``)."""

    def __init__(self, name, records, arguments, outputs, argument_memory=()):
        self.name = name
        self.records = records  # the tape.Record objects, in forward order
        self.arguments = arguments  # the arguments' buffers (None for untraced arguments)
        self.outputs = outputs  # the output's places (None where not traced)
        self.names = {}
        self.argument_memory = set(argument_memory)  # ids of the arguments' memory owners
        for buffer in arguments:
            if buffer is not None:
                self._name(buffer)
        self.lines = [self._line(record) for record in records]

    def _name(self, buffer):
        if buffer.key not in self.names:
            self.names[buffer.key] = f"%{len(self.names)}"
        return self.names[buffer.key]

    def __str__(self):
        width = max((len(text) for text, _, _ in self.lines), default=0)
        signature = ", ".join("_" if b is None else f"{self._name(b)}: {_type(b)}"
                              for b in self.arguments)
        lines = [record.line for record in self.records]
        headed = any(line is not None and not line[0].startswith("<") for line in lines)
        body = []
        for i, (line, (text, kept, undo)) in enumerate(zip(lines, self.lines, strict=True)):
            if headed and (i == 0 or line != lines[i - 1]):  # the first record of a line of f
                body.append(f"  # {location(line, short=True)}  {source(line)}".rstrip())
            body.append(f"  {text:<{width}}  {kept:>10}  {undo}".rstrip())
        returned = ", ".join("_" if p is None else self._place(p) for p in self.outputs)
        return "\n".join([f"{self.name}({signature}):", *body, f"  return {returned}"])

    __repr__ = __str__

    def _line(self, record):
        read = record.state[1] if type(record) is ElementsRead else ()  # elements it read
        inputs = ", ".join(self._element(*x) if i in read else self._value(x)
                           for i, x in enumerate(record.inputs))
        if record.settings:
            inputs += "".join(f", {k}={self._value(v)}" for k, v in record.settings.items())
        call = f"{_primitive_name(record.primitive)}({inputs})"
        if record.undo is None:
            outputs = ", ".join(self._name(b) for b in record.outputs)
            text = f"{outputs} = {call}"
        else:
            written = record.written if type(record.written) is tuple else (record.written,)
            text = f"{', '.join(self._place(p) for p in written)} <- {call}"
        return (text, _bytes(kept_bytes(record, self.argument_memory)),
                record.undo_kind or "")

    def _place(self, place):
        name = self._name(place.buffer)
        if place.whole:
            return name
        return name + _region(place)

    def _element(self, source, key):
        """The element ``source[key]`` (a place, the integers of a key), as ``%0[1, 2]``."""
        return f"{self._value(source)}[{', '.join(map(str, key)) if type(key) is tuple else key}]"

    def _value(self, x):
        if type(x) in (Buffer, Place):
            return self._place(x)
        if type(x) is Absent:
            if x.shape is None:
                return "<not kept>"
            return f"<{'' if x.dtype is None else _dtype(x.dtype)}{list(x.shape)} not kept>"
        if type(x) in (list, tuple):
            items = ", ".join(self._value(e) for e in x)
            return f"[{items}]" if type(x) is list else f"({items}{',' if len(x) == 1 else ''})"
        if type(x) is slice:
            return ":".join("" if v is None else str(v) for v in (x.start, x.stop, x.step)) \
                .rstrip(":") or ":"
        if x is Ellipsis:
            return "..."
        if hasattr(x, "dtype") and hasattr(x, "shape") and np.ndim(x):
            return f"<{_dtype(x.dtype)}{list(np.shape(x))}>"
        if isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0:
            return repr(x.item()) if type(x) is not np.ndarray or x.dtype.kind != "f" \
                else f"<{_dtype(x.dtype)}[]>"
        if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
            return _dtype(np.dtype(x))
        return repr(x)


def kept_bytes(record, argument_memory=()):
    """The bytes of the arrays ``record`` holds for its replay: the values its pullback reads,
    the constants and settings of its recipe, what its checkpoint saved, and the arrays a
    rule's pullback closure holds. A view counts the memory it keeps alive; each memory counts once, and the
    arguments' memory (``argument_memory``: ids of its owners), alive anyway, not at all."""
    owners, scalars = {}, 0
    items = [record.kept, record.inputs, record.state, record.undo,
             list((record.settings or {}).values())]
    seen = set()
    while items:
        x = items.pop()
        if id(x) in seen or x is None:
            continue
        seen.add(id(x))
        if isinstance(x, np.ndarray):
            root = owner(x)
            if id(root) not in argument_memory:
                owners[id(root)] = root.nbytes
        elif hasattr(x, "value") and isinstance(getattr(x, "value"), np.ndarray):
            items.append(x.value)  # an array an enclosing differentiation traces
        elif type(x) in (list, tuple):
            items.extend(x)
        elif type(x) is CopyBack or type(x) is SavedWrite:
            items.append(x.saved)
        elif type(x) is ElementWrite:
            if isinstance(x.saved, np.ndarray):
                items.append(x.saved)
            else:
                scalars += x.saved.nbytes  # NumPy's scalar: memory of its own
        elif callable(x) and getattr(x, "__closure__", None):
            # A pullback or undo closure: what it holds, one level deep.
            for cell in x.__closure__:
                try:
                    content = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if isinstance(content, np.ndarray) or type(content) in (list, tuple):
                    items.append(content)
    return sum(owners.values()) + scalars


def _bytes(n):
    return f"{n} B" if n < 10 * 1024 else f"{n / 1024:.0f} KiB" if n < 10 * 1024 ** 2 \
        else f"{n / 1024 ** 2:.0f} MiB"


def _dtype(dtype):
    return {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}.get(dtype.kind, dtype.kind) + (
        "" if dtype.kind == "b" else str(dtype.itemsize * 8))


def _type(buffer):
    return f"{_dtype(buffer.dtype)}{list(buffer.shape)}"


def _primitive_name(primitive):
    if primitive is None:
        return "write"
    if type(primitive) is Primitive:
        return primitive.name
    if primitive is assign or primitive is ASSIGNMENT:
        return "assign"
    if primitive is operator.getitem:
        return "getitem"
    if primitive is operator.setitem:
        return "setitem"
    owner_ufunc = getattr(primitive, "__self__", None)
    if isinstance(owner_ufunc, np.ufunc):  # ufunc.at, ufunc.reduce, ...
        return f"{function_name(owner_ufunc)}.{primitive.__name__}"
    return function_name(primitive)


def _region(place):
    """``place`` as basic indexing of its buffer (``[1:9]``, ``[:, 2]``, ``[::-1]``), or, where
    no basic index gives it (a transpose, say), as its offset, shape and strides counted in
    its own items; a view of another dtype (``z.real`` of a complex ``z``) names it first:
    ``<f64 +1 [3] strides [2]>`` is ``z.imag`` of a complex128 ``z`` of 3 elements."""
    buffer = place.buffer
    itemsize = place.dtype.itemsize
    index = _basic_index(buffer.shape, buffer.strides, place.offset - buffer.offset,
                         place.shape, place.strides)
    if index is None or place.dtype != buffer.dtype:
        kind = "" if place.dtype == buffer.dtype else f"{_dtype(place.dtype)} "
        return (f"<{kind}+{(place.offset - buffer.offset) // itemsize} {list(place.shape)} "
                f"strides {[s // itemsize for s in place.strides]}>")
    return f"[{', '.join(index)}]"


def _basic_index(shape, strides, offset, view_shape, view_strides):
    """The basic index (as text, one entry per buffer axis) that gives the view of ``view_shape``
    and ``view_strides`` at byte ``offset`` from the first element of a buffer of ``shape`` and
    ``strides``; None if there is none. The view's axes must follow the buffer's in order."""
    order = sorted(range(len(shape)), key=lambda a: -abs(strides[a]))
    start = [0] * len(shape)
    rest = offset
    for a in order:  # the start element, axis by axis, largest stride first
        if strides[a] and shape[a] > 1:
            start[a], rest = divmod(rest, abs(strides[a]))
            if strides[a] < 0:
                return None
    if rest:
        return None
    entries = [str(i) for i in start]
    a = 0
    for n, s in zip(view_shape, view_strides, strict=True):
        while a < len(shape) and not (
                (n == 1) or (strides[a] and s % strides[a] == 0 and s // strides[a] != 0)):
            a += 1
        if a == len(shape):
            return None
        step = 1 if n == 1 else s // strides[a]
        first, last = start[a], start[a] + (n - 1) * step
        if not (0 <= first < shape[a] or n == 0) or not (0 <= last < shape[a] or n == 0):
            return None
        stop = first + n * step
        if n == 0:
            entries[a] = f"{first}:{first}"
        elif step > 0:  # start and stop left out where they are the ends
            entries[a] = (f"{first or ''}:{'' if stop >= shape[a] else stop}"
                          + (f":{step}" if step != 1 else ""))
        else:
            entries[a] = f"{first}:{'' if stop < 0 else stop}:{step}"
        a += 1
    while len(entries) > 1 and entries[-1] == ":":
        entries.pop()
    return entries
