"""Recomputation: the values a record reads, computed again in the reverse pass rather than kept.

By the tape's invariant, when the replay reaches record k every buffer holds what it held right
after record k ran. So a temporary that record k reads need not stay alive until then: if every
buffer its computation read will hold, at that point of the replay, the bytes it held when the
temporary was computed, the replay can compute it again from its recipe. A version per buffer
(``Buffer.version``, the number of writes into it so far) tells, when record k is made: the
temporary can be recomputed there exactly when no buffer its computation reads (the temporaries
in between included) has been written since it was computed (``Recipe.current``).

What a recomputation reads must then exist at that point of the replay:

* arrays held for the whole differentiation (``Held``): the arguments, and any array a record
  keeps (pinned when it is kept);
* arrays written in place before: the undo of each write holds its target until the replay
  reaches it;
* other temporaries, themselves read or recomputed the same way (the program may still hold
  them: ``Buffer.ref`` is a weak reference, and a living array is read, not recomputed).

A record holds a :class:`Lazy` stand-in instead of a value (``hold``) where that is worth it:
the work of recomputing it (the elements computed by the chain of temporaries it recomputes,
counted as if none of them were alive) is at most ``WORK`` per element it saves, and it is not
small (below ``SMALL`` bytes the memory saved is less than a record's own, and the call costs
more than the arithmetic). Otherwise the record keeps the value, and pins its buffer, so that
later recipes may read it.

The replay resolves a record's stand-ins just before it runs (``Recomputation.resolve``), and
keeps a recomputed value only while records that will read it remain (``release``).

Recomputing gives the same bytes as the first computation when its inputs hold the same bytes:
only elementwise ufuncs and rules declared cheap to rerun (``recomputable``) have recipes, and
both compute each element from the same elements in the same order. Under the restore policy an
input restored by an inverse is within rounding of its old value, so a value recomputed from it
is within the rounding that value propagates (measured on the leapfrog workload: see
``benchmarks/RESULTS.md``).
"""

import weakref

import numpy as np

from .shadows import Buffer, Place
from .tape import Absent
from .views import address, owner, strided

WORK = 64
"""The most elements a recomputation may compute per element of the value it gives back."""

SMALL = 4096
"""Values below this many bytes are kept, not recomputed."""


def small(value):
    """Whether the array ``value`` is small enough to keep rather than recompute."""
    return value.nbytes < SMALL


class Held:
    """A strong reference, called as a weak one is: the array of a buffer the differentiation
    holds until its replay ends."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __call__(self):
        return self.array


class Recipe:
    """How to compute a buffer again: output ``output`` of ``record``, whose recomputation reads
    the buffers of ``depends`` (with the versions they had) and computes ``cost`` elements."""

    __slots__ = ("record", "output", "depends", "cost")

    def __init__(self, record, output, depends, cost):
        self.record = record
        self.output = output
        self.depends = depends
        self.cost = cost

    def current(self):
        """Whether every buffer the recomputation reads still holds the bytes it read."""
        return all(buffer.version == version for buffer, version in self.depends)


class Lazy:
    """What a record holds in place of a value it reads: the place of the value, recomputed
    (or read, if the program still holds it) when the replay reaches the record."""

    __slots__ = ("place",)

    def __init__(self, place):
        self.place = place


def track(buffer, array):
    """Follow ``array``, the memory of the new ``buffer``, without keeping it alive."""
    buffer.ref = weakref.ref(array)


def hold_for_good(buffer, array):
    """The differentiation holds ``array``, all of ``buffer``, until its replay ends."""
    buffer.ref = Held(array)


def _places(items):
    for x in items:
        if type(x) in (list, tuple):
            yield from _places(x)
        else:
            yield x


def _is_place(x):
    return type(x) is Buffer or type(x) is Place


def _pin(buffer):
    """Hold the array of ``buffer`` (which the program still holds) from now on."""
    if type(buffer.ref) is weakref.ReferenceType:
        array = buffer.ref()
        if array is not None:
            buffer.ref = Held(array)
            return True
    return type(buffer.ref) is Held


def give_recipe(record, output, buffer, settings=None):
    """Make ``buffer``, output ``output`` of the pure ``record``, recomputable from the record's
    recipe, if the recipe is whole (no input described rather than held) and everything it
    reads will exist during the replay; ``settings``, the record's keyword arguments."""
    if buffer.ref is None or not buffer.c_contiguous:
        return
    depends = [(buffer, 0)]
    cost = buffer.span
    for x in _places((record.inputs, list((settings or {}).values()))):
        if not _is_place(x):
            if type(x) is Absent:
                return
            continue
        source = x.buffer
        if source.version > 0 or type(source.ref) is Held:  # alive during the replay
            depends.append((source, source.version))
        elif source.origin is not None and source.origin.current():
            depends.extend(source.origin.depends)
            cost += source.origin.cost
        elif source.constant and _pin(source):  # allocated by the program: hold it
            depends.append((source, source.version))
        else:
            return
    if cost <= WORK * buffer.span:
        buffer.origin = Recipe(record, output, tuple(depends), cost)


class Recomputation:
    """The stand-ins of one tape: how many records will read each buffer's recomputed value,
    and the values recomputed while some still will."""

    __slots__ = ("readers", "values")

    def __init__(self):
        self.readers = {}
        self.values = {}

    def hold(self, place, value):
        """What a record keeps of ``value``, which it reads at ``place``: a :class:`Lazy`
        stand-in if it can be recomputed when the replay reaches the record and that is worth
        it; else ``value`` itself, whose buffer is then pinned."""
        buffer = place.buffer
        origin = buffer.origin
        if origin is not None and origin.current() and not small(value):
            key = buffer.key
            self.readers[key] = self.readers.get(key, 0) + 1
            return Lazy(place)
        if buffer.ref is not None:
            _pin(buffer)
        return value

    def resolve(self, items):
        """Replace the stand-ins among ``items`` (a list) by their values; returns the keys of
        their buffers, for ``release``."""
        keys = []
        for i, x in enumerate(items):
            if type(x) is Lazy:
                items[i] = self.read(x.place)
                keys.append(x.place.buffer.key)
        return keys

    def release(self, keys):
        """A record read the buffers of ``keys``: forget recomputed values that no record left
        will read."""
        for key in keys:
            left = self.readers[key] - 1
            if left:
                self.readers[key] = left
            else:
                del self.readers[key]
                self.values.pop(key, None)

    def read(self, place):
        """The value at ``place`` now: its buffer's array if alive, else recomputed."""
        buffer = place.buffer
        array = buffer.ref() if buffer.ref is not None else None
        if array is None:
            array = self.values.get(buffer.key)
            if array is None:
                array = self._recompute(buffer)
        if place.whole:
            return array
        if buffer.c_contiguous:
            flat = array.reshape(-1)
        else:  # the memory the buffer spans, from its lowest byte
            root = owner(array)
            flat = np.ndarray(buffer.span, buffer.dtype, root, buffer.low - address(root))
        return strided(flat, place.shape, place.dtype, place.offset, place.strides)

    def _recompute(self, buffer):
        recipe = buffer.origin
        record = recipe.record
        inputs = [self._read_all(x) for x in record.inputs]
        settings = {k: self._read_all(v) for k, v in (record.settings or {}).items()}
        primitive = record.primitive
        rule = getattr(primitive, "rule", None)
        if rule is not None:  # a rule: its outputs, without the pullback it also returns
            y = rule(*inputs, **settings)[0]
            if recipe.output is not None:
                y = y[recipe.output]
        else:
            y = primitive(*inputs, **settings)
        if buffer.key in self.readers:
            self.values[buffer.key] = y
        return y

    def _read_all(self, x):
        if type(x) in (list, tuple):
            return type(x)(self._read_all(e) for e in x)
        return self.read(x) if _is_place(x) else x
