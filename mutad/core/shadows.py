"""The shadow cache of one differentiation: one adjoint buffer per traced buffer.

A traced array names its :class:`Buffer`: a small description of the memory behind it (a
serial key, dtype, span, layout) that holds none of that memory, so records can keep it without
keeping the array alive. Shadows are keyed by the buffer's key, created zero-filled on first
touch, and accumulated in place, so a write through any alias reaches the right place. A view's
shadow is the same view, by byte offset and strides, of its buffer's shadow. Nothing exists for
a buffer no gradient reached, which is how the replay skips records off the path to the output.

Shadows are addressed by *places*: anything with ``buffer``, ``whole`` (the place is the whole
buffer, laid out as it) and, for a part of it, ``offset`` (bytes from the buffer's lowest byte),
``shape``, ``strides``. Traced arrays are places; :class:`Place` is one that holds no array.
"""

import itertools
import math
import sys
import weakref

import numpy as np

from .devices import device_of, is_device, ufunc_at
from .levels import deeper
from .views import (NDARRAY, address, byte_span, element_indices, real_part_if, self_overlapping,
                    strided, memory, wrapped, writeable)

_serial = itertools.count()
_next_key = _serial.__next__
_FLOAT = np.dtype(float)

SPARE = 1 << 25
"""Bytes from which memory the reverse pass is done with is lent to the next cotangent of its
shape (:meth:`Shadows.lend`): malloc gives memory this large back to the system when it is
freed and maps fresh pages for the next array, which the kernel zero-fills on first touch."""


def _references_when_lent():
    """What ``sys.getrefcount`` says, in :meth:`Shadows.lend`, of an array its caller holds in
    one variable and nothing else holds (the interpreter's count, measured once)."""
    def lend(array):
        return sys.getrefcount(array)
    array = np.empty(0)
    return lend(array)


_LENT = _references_when_lent()


def lendable(array):
    """Whether memory such as ``array`` is worth lending on (:meth:`Shadows.lend`): a plain
    array of at least ``SPARE`` bytes."""
    return type(array) is NDARRAY and array.nbytes >= SPARE


_layouts = {}
LAYOUTS = 1024
"""How many distinct shapes, strides and sizes ``shared`` remembers, and how many layouts of
C-contiguous NumPy arrays ``_contiguous`` does."""
_contiguous = {}
"""The shape of a C-contiguous NumPy array -> ``(strides, dtype, shape, strides, span)``: the
strides and dtype of the last such array of that shape, and its buffer's ``shape``,
``strides`` and ``span``, as ``shared`` gives them. Keyed by the shape alone, the strides
compared and the dtype by identity: a key holding the dtype costs its hash on every lookup."""


def shared(value):
    """One object for all equal ``value`` (a shape, strides, a size): a buffer is made for
    every operation, and the few layouts of a program repeat, so the buffers of a long recording
    hold one copy of each rather than one each."""
    one = _layouts.get(value)
    if one is None:
        if len(_layouts) >= LAYOUTS:
            _layouts.clear()
        one = _layouts[value] = value
    return one


class Buffer:
    """What a shadow needs to know about a buffer, without holding its memory.

    A buffer is also the place of all of itself (``buffer``, ``whole``, ``offset``, ``shape``,
    ``strides``, ``dtype``), so naming a whole buffer allocates nothing.
    """

    whole = True

    @property
    def buffer(self):
        return self

    __slots__ = ("key", "dtype", "shape", "strides", "offset", "span", "low", "c_contiguous",
                 "device", "constant", "read", "version", "origin", "ref", "weak", "owner")

    def __init__(self, array, constant=False):
        self.key = _next_key()
        # ``version`` counts the writes into it so far in the forward pass. ``origin`` says how
        # the replay can read its bytes: ``HELD`` (the differentiation holds the array: an
        # argument), a ``Recipe`` (recomputable from the record that created it), or None;
        # ``ref`` is a weak reference to the array, for as long as the program keeps it.
        self.version = 0
        self.origin = None
        self.ref = None
        # ``owner``: a weak reference to the traced array that is all of it and owns it (what
        # ``x.base`` of its views is, as NumPy's), where one was made so; else None.
        self.owner = None
        # A constant buffer holds values that do not depend on the arguments (an array the
        # differentiated code allocated); it stops being one when a traced value is written
        # into it. ``read``: a record has read its values, so later writes into it are undone
        # in the replay.
        self.constant = constant
        self.read = False
        # A 0-d buffer that stands for a Python number (a float argument, Python's arithmetic
        # on such numbers): weakly typed in NumPy's promotion (arraylike.weak).
        self.weak = False
        self.dtype = dtype = array.dtype
        # The namespace of the device library its memory belongs to (CuPy), None for NumPy's:
        # its shadow is made there.
        shape, strides = array.shape, array.strides
        if type(array) is NDARRAY:
            self.device = None
            if not shape:  # (0-d: a scalar loop's values, a buffer each, answered first)
                self.shape = self.strides = ()
                self.span, self.c_contiguous, self.low, self.offset = 1, True, None, 0
                return
            # (a C-contiguous NumPy array laid out as one before, the common case: its facts
            # found at once, for a buffer is made for every operation)
            layout = _contiguous.get(shape)
            if layout is not None and layout[1] is dtype and layout[0] == strides:
                _, _, self.shape, self.strides, self.span = layout
                self.c_contiguous, self.low, self.offset = True, None, 0
                return
        else:
            self.device = device_of(array)
        # (``shared``'s lookups written out)
        # (None, not a false value, says it is missing: a 0-d array's shape and strides are
        # empty tuples, which are found)
        one = _layouts.get(shape)
        self.shape = one if one is not None else shared(shape)
        one = _layouts.get(strides)
        self.strides = one if one is not None else shared(strides)
        self.c_contiguous = array.flags.c_contiguous
        if self.c_contiguous:
            # The address of its first byte is only needed to map views: see note_address.
            size = array.size
            one = _layouts.get(size)
            self.low, self.span, self.offset = None, one if one is not None else shared(size), 0
            if self.device is None:
                if len(_contiguous) >= LAYOUTS:
                    _contiguous.clear()
                _contiguous[shape] = (strides, dtype, self.shape, self.strides, self.span)
        else:
            self.low, self.span = byte_span(array)
            self.offset = address(array) - self.low

    def note_address(self, array, at=None):
        """Record the address of the buffer's first byte from ``array``, the whole buffer,
        before the first view of it is mapped (``at``: that address, where already read)."""
        if self.low is None:
            self.low = address(array) if at is None else at


def scalar_buffer(dtype, _new=object.__new__):
    """``Buffer(y)`` of a 0-d NumPy array ``y`` of ``dtype``, traced (no constant): the same
    fields, set without the call of ``__init__`` and its questions of the array. A scalar loop
    makes one per element it reads and per operation (``tracing._element_read``,
    ``operations.fast_ufunc``), where this costs about two thirds of that call."""
    buffer = _new(Buffer)
    buffer.key = _next_key()
    buffer.version = 0
    buffer.origin = buffer.ref = buffer.owner = buffer.device = buffer.low = None
    buffer.constant = buffer.read = buffer.weak = False
    buffer.dtype = dtype
    buffer.shape = buffer.strides = ()
    buffer.span, buffer.c_contiguous, buffer.offset = 1, True, 0
    return buffer


def result_buffer(array, _new=object.__new__):
    """``Buffer(array)`` of an array an operation has just made, traced: of a C-contiguous
    NumPy array of a layout seen before (``_contiguous``), the common case, its fields set
    without the call of ``__init__`` and its other questions; else that call. A buffer is made
    per operation (``operations.fast_ufunc``, ``reverse.fresh``), where this costs a fifth
    less."""
    if type(array) is not NDARRAY:
        return Buffer(array)
    shape = array.shape
    layout = _contiguous.get(shape)
    dtype = array.dtype
    if layout is None or layout[1] is not dtype or layout[0] != array.strides:
        return Buffer(array)
    buffer = _new(Buffer)
    buffer.key = _next_key()
    buffer.version = 0
    buffer.origin = None
    buffer.ref = None
    buffer.owner = None
    buffer.constant = False
    buffer.read = False
    buffer.weak = False
    buffer.dtype = dtype
    buffer.device = None
    _, _, buffer.shape, buffer.strides, buffer.span = layout
    buffer.c_contiguous = True
    buffer.low = None
    buffer.offset = 0
    return buffer


class Place:
    """Where a shadow is read or written: a buffer, and the part of it (None: all of it)."""

    __slots__ = ("buffer", "whole", "offset", "shape", "strides", "dtype")

    def __init__(self, buffer, whole, offset, shape, strides, dtype):
        self.buffer = buffer
        self.whole = whole
        self.offset = offset
        self.shape = shape
        self.strides = strides
        self.dtype = dtype


def zeros(buffer, shape=None, dtype=None):
    """Zeros of ``shape`` and ``dtype`` (``buffer``'s), in the memory of its library."""
    dtype = buffer.dtype if dtype is None else dtype
    shape = buffer.shape if shape is None else shape
    if buffer.device is None:
        return np.zeros(shape, dtype)
    return buffer.device.zeros(shape, dtype)


def bytes_of(value):
    """The bytes of the array ``value``, of all of a buffer, or of the values at a place in
    one."""
    if type(value) is Buffer:
        return value.span * value.dtype.itemsize
    if type(value) is Place:
        return math.prod(value.shape) * value.dtype.itemsize
    return value.nbytes


def overlapping(place):
    """Whether ``place`` is a view whose elements may share bytes (``views.overlaps_itself``)."""
    return not place.whole and self_overlapping(place.shape, place.strides, place.dtype.itemsize)


def whole(buffer):
    """The place covering all of ``buffer``: the buffer itself."""
    return buffer


class Shadows:
    """Shadows by buffer key: ``key -> [buffer, shadow, flat, sharers]``.

    ``shadow`` has the buffer's shape and strides; ``flat`` covers the buffer's bytes, for
    mapping views into it, and is made on the first view lookup when the shadow was adopted.
    ``sharers`` is None, or the list of the keys whose shadows are this same memory (``share``:
    equal cotangents, one copy); every method that writes a shadow or hands it out first gives
    a shadow still shared a copy of its own (``_own``), so sharing is never seen.

    ``events``: None, or, in a replay's reverse pass, the log of the floating-point events it
    hears where every event goes there or raises (``replay.Heard``), from which a compiled
    block may take back those of a stretch it takes again (``blocks.Stretch``).
    """

    __slots__ = ("entries", "events", "spare")

    def __init__(self):
        self.entries = {}
        self.events = None
        self.spare = None  # memory lent to the next cotangent of its shape (``lend``)

    def lend(self, array):
        """Keep ``array``, memory the caller is done with (the copy an undo put back), for the
        next new cotangent of its shape and type (``empty_like``), in place of the spare
        lent before, if it is a large plain array of its own memory that nothing but the
        caller's one variable holds (its reference count says so: no view, no record) and
        nothing could find again (no weak reference: an undo that finds its target so)."""
        if lendable(array) and array.base is None and array.flags.c_contiguous \
                and array.flags.writeable and sys.getrefcount(array) == _LENT \
                and not weakref.getweakrefcount(array):
            self.spare = array

    def let_go(self, spare):
        """Let go of ``spare``, the spare lent before a pullback ran, if that pullback did not
        take it: memory is lent from one write's undo to the pullbacks of the write and of
        the next elementwise write at most, so it is not held longer than it was."""
        if self.spare is spare:
            self.spare = None

    def empty_like(self, a):
        """``np.empty_like(a)`` for a cotangent: the spare memory (``lend``) if it has
        ``a``'s shape and type, else new memory. Its values are not read: only its pages are
        reused."""
        spare = self.spare
        if spare is not None and type(a) is NDARRAY and spare.shape == a.shape \
                and spare.dtype == a.dtype and a.flags.c_contiguous:
            self.spare = None
            return spare
        return np.empty_like(a)

    def _entry(self, buffer):
        entry = self.entries.get(buffer.key)
        if entry is None:
            if buffer.device is None:
                flat = np.zeros(buffer.span, buffer.dtype)
                shadow = np.ndarray(buffer.shape, buffer.dtype, flat, buffer.offset,
                                    buffer.strides)
            else:
                flat = zeros(buffer, buffer.span)
                shadow = strided(flat, buffer.shape, buffer.dtype, buffer.offset,
                                 buffer.strides)
            entry = self.entries[buffer.key] = [buffer, shadow, flat, None]
        return self._own(entry)

    @staticmethod
    def _own(entry):
        """``entry``, with a shadow of its own memory if it shared one."""
        sharers = entry[3]
        if sharers is not None:
            entry[3] = None
            sharers.remove(entry[0].key)
            if sharers:
                entry[1] = entry[1].copy()  # whole and C-contiguous, as every shared shadow
                entry[2] = None
        return entry

    @staticmethod
    def _flat(entry):
        """``entry``'s shadow over its buffer's bytes, one-dimensional (made on first use)."""
        if entry[2] is None:
            entry[2] = entry[1].reshape(-1)  # adopted shadows are C-contiguous, like their buffer
        return entry[2]

    @staticmethod
    def _view(entry, place):
        if place.whole:
            return entry[1]
        return strided(Shadows._flat(entry), place.shape, place.dtype, place.offset,
                       place.strides)

    def _traced_like(self, entry, g):
        """Make ``entry``'s shadow an array traced like ``g``, before ``g`` is added into it.

        Under nested differentiation cotangents are traced by the outer ones; the first that
        reaches a shadow none as deep follows turns it into a traced copy, so the accumulation
        is recorded."""
        if type(g) is not np.ndarray and deeper(g, entry[1]):  # (a plain array is not deeper)
            buffer = entry[0]
            entry[2] = np.array(self._flat(entry), like=g)
            entry[1] = strided(entry[2], buffer.shape, buffer.dtype, buffer.offset,
                               buffer.strides)
        return entry

    def has(self, place):
        """Whether a gradient reached the buffer of ``place`` (``get`` is not None)."""
        return (place if type(place) is Buffer else place.buffer).key in self.entries

    def get(self, place):
        """The shadow at ``place``, or None if no gradient reached its buffer."""
        entry = self.entries.get((place if type(place) is Buffer else place.buffer).key)
        return None if entry is None else self._view(self._own(entry), place)

    def of(self, place, like=None):
        """The shadow at ``place``, its buffer's shadow created zero-filled if needed; traced
        like ``like`` if that is traced (a cotangent about to be added into it)."""
        entry = self._entry(place.buffer)
        return self._view(entry if like is None else self._traced_like(entry, like), place)

    def flat(self, buffer):
        """The flat view of ``buffer``'s shadow over its bytes, as :meth:`of` maps places into
        it, made zero-filled if needed and its own memory (not shared)."""
        return self._flat(self._entry(buffer))

    def pop(self, buffer, read_only=False):
        """Take ``buffer``'s whole shadow out of the cache, or None if it has none.

        Called by the record that created the buffer: nothing older can read it, so the
        shadow is handed to the pullback, which may reuse its memory. ``read_only``: the caller
        only reads it, so a shadow another buffer still shares comes as a read-only view of
        that memory, not a copy (the caller must not hold it past a write into a shadow).
        """
        entry = self.entries.pop(buffer.key, None)
        if entry is None:
            return None
        if entry[3] is None:  # (``_own``'s first question, asked here: the common case)
            return entry[1]
        return self.handed(entry, read_only)

    def handed(self, entry, read_only=False):
        """The shadow of ``entry``, just popped from the cache, as :meth:`pop` hands it out
        (called there, and by a caller that pops an entry itself and finds it shared)."""
        sharers, buffer = entry[3], entry[0]
        if sharers is None:
            return entry[1]
        if read_only and len(sharers) > 1:
            sharers.remove(entry[0].key)
            view = entry[1].view()
            if buffer.device is None:  # (a device library has no read-only arrays)
                view.flags.writeable = False
            return view
        return self._own(entry)[1]

    def take(self, place, key=None):
        """Read the cotangent of the values an in-place write left at ``place`` (at the
        advanced index or mask ``key`` within it, if given), and zero it there: those values
        are gone once the write is undone. Returns an array the caller owns, or None if no
        gradient reached the buffer."""
        if place.whole and key is None:
            return self.pop(place.buffer)
        if key is None and place.shape == ():  # one element: a scalar loop's write
            entry = self.entries.get(place.buffer.key)
            if entry is None:
                return None
            # (``_own`` and ``_flat`` have nothing to do for a shadow of its own memory
            # already mapped flat: a scalar loop writes one buffer's elements many times)
            flat = entry[2] if entry[3] is None and entry[2] is not None else \
                self._flat(self._own(entry))
            # (read and zeroed by its index in the flat shadow, as ``_view`` maps it, without
            # making a view of it: the same value, the same element zeroed)
            if type(flat) is NDARRAY and flat.dtype is place.dtype \
                    and place.offset % flat.itemsize == 0:
                i = place.offset // flat.itemsize
                dy = np.array(flat[i])
                flat[i] = 0
                return dy
        view = self.get(place)
        if view is None:
            return None
        if key is None:
            dy = view.copy()
            view[...] = 0
        else:
            dy = view[key]  # an advanced index: a copy
            view[key] = 0
        return dy

    def add(self, place, g, owned=False):
        """Accumulate cotangent ``g`` into the shadow at ``place``: ``shadow += g``.

        ``owned`` says ``g`` is an array nobody else will read or write; on the first touch of a
        whole C-contiguous buffer it then becomes the shadow itself (else a copy of it does):
        no zero fill, no addition.
        """
        buffer = place if type(place) is Buffer else place.buffer
        if not place.whole and place.dtype.kind in "iub":
            return  # an integer field of an array of records: it carries no derivative
        if type(g) is NDARRAY and g.dtype is _FLOAT:
            if place.whole:
                # (the common case, a real cotangent into a whole buffer, answered first)
                entries, key = self.entries, buffer.key
                entry = entries.get(key)
                if entry is None:
                    if owned and buffer.c_contiguous and buffer.device is None \
                            and buffer.dtype is _FLOAT and g.shape == buffer.shape:
                        flags = g.flags
                        if flags.c_contiguous and flags.writeable:
                            entries[key] = [buffer, g, None, None]
                            return
                elif entry[3] is None:  # (not shared: ``_own`` has nothing to do)
                    shadow = entry[1]
                    if type(shadow) is NDARRAY:  # (not deeper than ``g``: ``_traced_like``)
                        shadow += g
                        return
            else:
                # (a real cotangent into a part of a shadow that exists, of its own memory,
                # whose elements share no bytes: what the general path below comes to,
                # answered first)
                entry = self.entries.get(buffer.key)
                if entry is not None and entry[3] is None and type(entry[1]) is NDARRAY \
                        and not overlapping(place):
                    view = self._view(entry, place)
                    view += g
                    return
                if entry is None:
                    view = self._fresh_run(buffer, place)
                    if view is not None:  # zeros, then ``view += g``: 0.0 + g, in one pass
                        np.add(g, 0.0, out=view)
                        return
        if type(g) is not float:  # (a Python float, the seed 1.0, is its own real part:
            g = real_part_if(place, g)  # not asked of the place's dtype, a property's read)
        if place.whole and buffer.c_contiguous and buffer.key not in self.entries:
            if buffer.device is not None:
                g = self._device_shadow(buffer, g, owned)
            elif buffer.shape == () and (type(g) is float or type(g) is np.float64) \
                    and buffer.dtype == _FLOAT:
                g = np.array(g)  # (a scalar loop's many: np.full's value, at a third the cost)
            elif buffer.shape != () and (type(g) is float or type(g) is np.float64 or (
                    type(g) is NDARRAY and g.ndim == 0)):
                g = np.full(buffer.shape, g, buffer.dtype)  # (broadcast_to's copy, faster)
            elif not (owned and (type(g) is NDARRAY or wrapped(g) or is_device(g))
                      and g.dtype == buffer.dtype and g.shape == buffer.shape
                      and g.flags.c_contiguous
                      and (g.flags.writeable if type(g) is NDARRAY else writeable(g))):
                if type(g) is not NDARRAY or g.shape != buffer.shape:  # (a copy either way)
                    g = np.broadcast_to(g, buffer.shape)
                g = np.array(g, dtype=buffer.dtype, order="C", like=g if wrapped(g) else None)
            self.entries[buffer.key] = [buffer, g, None, None]
            return
        entry = self._traced_like(self._entry(buffer), g)
        if overlapping(place):
            self._add_overlapping(entry, place, g)
            return
        view = self._view(entry, place)
        view += g

    def subtract(self, place, g):
        """``shadow -= g`` at ``place``, for a real ``g`` that nobody will write: the bits of
        ``add(place, -g)`` (IEEE's ``a - b`` is ``a + (-b)``), without the negated copy."""
        buffer = place if type(place) is Buffer else place.buffer
        if type(g) is np.ndarray and g.dtype is _FLOAT and not overlapping(place):
            entry = self.entries.get(buffer.key)
            if entry is not None and entry[3] is None and type(entry[1]) is np.ndarray:
                view = self._view(entry, place)
                np.subtract(view, g, out=view)
                return
            if entry is None and not place.whole:
                view = self._fresh_run(buffer, place)
                if view is not None:  # zeros, then ``view += -g``: 0.0 - g, in one pass
                    np.subtract(0.0, g, out=view)
                    return
        self.add(place, np.multiply(g, -1.0), owned=True)

    def _fresh_run(self, buffer, place):
        """The new shadow of ``buffer``, which has none, as the view at ``place`` whose elements
        are yet to be written, every other element zero; None where ``place`` is not one run of
        consecutive elements of a C-contiguous real host buffer (the caller then makes the
        shadow zero-filled). The zeros go where the first cotangent does not, so the shadow
        costs one pass, not a fill and an addition."""
        if not buffer.c_contiguous or buffer.device is not None or buffer.dtype is not _FLOAT \
                or place.dtype is not _FLOAT:
            return None
        size = math.prod(place.shape)
        step = _FLOAT.itemsize
        stride = step
        for n, s in zip(reversed(place.shape), reversed(place.strides)):
            if n != 1 and s != stride:
                return None
            stride *= n
        start = place.offset // step
        flat = np.empty(buffer.span, _FLOAT)
        flat[:start] = 0.0
        flat[start + size:] = 0.0
        shadow = np.ndarray(buffer.shape, _FLOAT, flat, 0, buffer.strides)
        self.entries[buffer.key] = [buffer, shadow, flat, None]
        return strided(flat, place.shape, place.dtype, place.offset, place.strides)

    @staticmethod
    def _device_shadow(buffer, g, owned):
        """``g`` made the shadow of a whole C-contiguous device ``buffer`` (``add``): itself
        where ``owned`` and laid out so, else a copy of it broadcast, in the buffer's library."""
        if owned and (wrapped(g) or is_device(g)) and g.dtype == buffer.dtype \
                and g.shape == buffer.shape and g.flags.c_contiguous \
                and memory(g).base is None:  # its own memory: a device's views may be
            return g  # broadcasts, which NumPy would have made read-only
        if getattr(g, "shape", ()) != buffer.shape:
            g = np.broadcast_to(g, buffer.shape) if hasattr(g, "shape") else \
                buffer.device.full(buffer.shape, g, buffer.dtype)
        if wrapped(g):
            return np.array(g, dtype=buffer.dtype, order="C", like=g)
        return buffer.device.array(g, dtype=buffer.dtype, order="C")

    def share(self, buffers, g):
        """Make the array ``g``, which nobody else will read or write, the shadow of each of
        ``buffers``: whole, C-contiguous buffers of ``g``'s shape and dtype that have no shadow
        yet (the cotangents of ``a + b``, equal), so they cost one array, not one each."""
        sharers = [buffer.key for buffer in buffers]
        for buffer in buffers:
            self.entries[buffer.key] = [buffer, g, None, sharers]

    def _add_overlapping(self, entry, place, g):
        """``shadow += g`` where several elements of ``place`` are one element of memory
        (``np.broadcast_to``, a sliding window): each element of memory receives the sum of the
        cotangents of all the elements that are it, as ``np.add.at`` adds repeated indices."""
        flat = self._flat(entry)
        if flat.dtype != place.dtype:  # a part of a complex buffer: its floats
            size = place.dtype.itemsize
            flat = strided(flat, (flat.nbytes // size,), place.dtype, 0, (size,))
        index = element_indices(place.shape, place.strides, place.offset, place.dtype.itemsize)
        if place.buffer.device is not None:  # a host index, copied to the device
            index = place.buffer.device.asarray(index)
        ufunc_at(np.add, flat, index.reshape(-1), np.reshape(np.broadcast_to(g, place.shape), -1))

    def add_at(self, place, key, g):
        """Accumulate ``g`` into ``shadow[key]``, adding repeated indices once each."""
        g = real_part_if(place, g)
        entry = self._traced_like(self._entry(place.buffer), g)
        if overlapping(place):  # gather into the view's elements, then add those up in memory
            gathered = np.zeros_like(g, shape=place.shape)
            ufunc_at(np.add, gathered, key, g)
            self._add_overlapping(entry, place, gathered)
            return
        ufunc_at(np.add, self._view(entry, place), key, g)

    def release(self, place, hand_over):
        """The shadow at ``place`` for the caller to keep, zeros if nothing reached it. With
        ``hand_over``, a whole C-contiguous buffer's shadow is given away (and forgotten) rather
        than copied: for the last use of a shadow."""
        entry = self.entries.get(place.buffer.key)
        if entry is None:
            return zeros(place.buffer, place.shape, place.dtype)
        if hand_over and place.whole and entry[1].flags.c_contiguous and (
                entry[3] is None or len(entry[3]) == 1):
            del self.entries[place.buffer.key]
            return entry[1]
        return np.copy(self._view(entry, place))

