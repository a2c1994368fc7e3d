"""Recomputation: the values a record reads, computed again in the reverse pass rather than kept.

By the tape's invariant, when the replay reaches record k every buffer holds what it held right
after record k ran. So a temporary that record k reads need not stay alive until then: if every
buffer its computation read will hold, at that point of the replay, the bytes it held when the
temporary was computed, the replay can compute it again from its recipe. A version per buffer
(``Buffer.version``, the number of writes into it so far) tells, when record k is made: the
temporary can be recomputed there exactly when no buffer its computation reads (the temporaries
in between included) has been written since it was computed (``Recipe.current``).

What a recomputation reads must then exist at that point of the replay:

* arrays held for the whole differentiation (``Held``): the arguments, and the constants
  recipes read;
* arrays an older record keeps (``Kept``): alive until the replay passes that record, so for
  every record made after it;
* arrays written in place before: the undo of each write holds its target until the replay
  reaches it;
* other temporaries, themselves read or recomputed the same way (the program may still hold
  them: ``Buffer.ref`` is a weak reference, and a living array is read, not recomputed).

A record holds a :class:`Lazy` stand-in instead of a value (``hold``) where that is worth it:
the work of recomputing it (the elements computed by the chain of temporaries it recomputes,
counted as if none of them were alive) is at most ``WORK`` per element it saves, and it is not
small (below ``SMALL`` bytes the memory saved is less than a record's own, and the call costs
more than the arithmetic). Otherwise the record keeps the value, and marks its buffer
``Kept``, so that later recipes may read it.

The replay resolves a record's stand-ins just before it runs (``Recomputation.resolve``), and
keeps a recomputed value only while records that will read it remain (``release``). A
temporary the program computes twice from the same bytes (a force evaluated at the end of one
time step and again at the start of the next) is recomputed once: value numbering names the
older buffer in the later one's recipe (``Recipe.same``).

A temporary written in place is held from its first write on (``Written``) until the record
that made it has run, and the undos of its writes read it through that holder. When the forward
pass ends, one that no record keeps, no recomputation reads after a write and the program no
longer holds is let go (``Recomputation.finish``): the bytes its undos would put back are read
by nothing, so they do nothing.

Under a memory budget (``gradient(..., memory=...)``) the writes that would save what they
overwrite are rebuilt instead, from a few snapshots of the array they write (:class:`Chain`).

Recomputing gives the same bytes as the first computation when its inputs hold the same bytes:
only elementwise ufuncs and rules declared cheap to rerun (``recomputable``) have recipes, and
both compute each element from the same elements in the same order. Under the restore policy an
input restored by an inverse is within rounding of its old value, so a value recomputed from it
is within the rounding that value propagates (measured on the leapfrog workload: see
``benchmarks/RESULTS.md``).
"""

import collections
import itertools
import math
import struct
import weakref

import numpy as np

from ..core.devices import is_device, span_of
from ..core.shadows import Buffer, Place, bytes_of, shared
from ..core.tape import Absent
from ..core.views import address, owner, strided

WORK = 64
"""The most elements a recomputation may compute per element of the value it gives back."""

SMALL = 4096
"""Values below this many bytes are kept, not recomputed."""

FEW_BYTES = 64
"""Under a memory budget, a write of at most this many bytes (an element, a boundary value) is
saved, not rebuilt: its copy costs no more memory than its record, where its rebuild would
redo the writes before it into a copy of its whole array. It joins its array's chain all the
same (``Recomputation.chain``), which redoes it when it rebuilds the writes before it."""


EXACT = frozenset((np.add, np.subtract, np.multiply, np.true_divide, np.negative))
"""Ufuncs whose every element of real floating values is correctly rounded (IEEE arithmetic;
complex products and quotients are formulas a loop may fuse otherwise): computed straight into a
strided region or into a fresh array, whatever loop NumPy picks, they give the same bits. A
rebuilt write whose value is such a ufunc's result is redone into its target directly
(``Recomputation.recompute_into``); a transcendental one (``np.exp``) may pick a loop of other
rounding for a strided output, so it is computed as the forward pass did."""


def small(value):
    """Whether the array ``value`` (or all of a buffer, or the values at a place in one) is
    small enough to keep rather than recompute."""
    return bytes_of(value) < SMALL


class Tracked(weakref.ref):
    """A weak reference to the array of a buffer, alive as long as its memory is.

    It refers to the array that owns the memory, and gives the buffer's array back as a view of
    it where that is another array: a result may view memory of its own (``np.reshape`` of an
    F-ordered array views the C-ordered copy it makes), and what keeps the memory alive (a
    record or an undo holding part of it, the program holding another view of it) holds its
    owner, not that view. A buffer taken for gone would be recomputed from its recipe, which
    gives its bytes as they were before any write into it, or its undos would be skipped."""

    __slots__ = ("layout",)

    def __new__(cls, array):
        # (an array of its own memory, a fresh result's: its own owner, answered first)
        root = array if type(array) is np.ndarray and array.base is None else owner(array)
        self = weakref.ref.__new__(cls, root)
        self.layout = None if root is array else (
            array.shape, array.dtype, address(array) - address(root), array.strides)
        return self

    def __call__(self):
        root = weakref.ref.__call__(self)
        if root is None or self.layout is None:
            return root
        return strided(root, *self.layout)


class Kept(Tracked):
    """A weak reference to the array of a buffer that a record keeps: whatever reads it in the
    replay of a newer record finds it alive."""

    __slots__ = ()


class Held:
    """A strong reference, called as a weak one is: the array of a buffer the differentiation
    holds until its replay ends."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __call__(self):
        return self.array


class Written:
    """The array of a temporary the program writes in place, held from its first write on
    (``Recomputation.write``). The undos of its writes read it through here rather than hold
    it, so that once the forward pass is over it can be let go where nothing else needs it
    (``Recomputation.finish``); they then put back nothing. Called as a weak reference is."""

    __slots__ = ("array", "was", "buffer")

    def __init__(self, array, was, buffer):
        self.array = array
        self.was = was  # the buffer's weak reference before
        self.buffer = buffer

    def __call__(self):
        return self.array


class Recipe:
    """How to compute ``buffer`` again, while it is unwritten: output ``output`` of ``record``,
    whose recomputation reads the buffers of ``depends`` (``buffer, how, buffer, how, ...``: one
    flat tuple, the smallest), each as it is, ``how`` being the version it must still have, or
    computed again, ``how`` being its recipe; and computes ``cost`` elements, those of the
    recipes it follows included. A recipe names only the buffers it reads directly: one that
    named every buffer its chain of recipes reads would hold as many as the chain is long.
    """

    __slots__ = ("record", "output", "buffer", "depends", "cost", "same", "found")

    writes = 0
    """The writes into any buffer so far (``written``): what ``current`` answers changes only
    with them."""

    def __init__(self, record, output, buffer, depends, cost, same=None):
        self.record = record
        self.output = output
        self.buffer = buffer
        self.depends = depends
        self.cost = cost
        self.same = same  # an older buffer computed the same way from the same bytes
        # ``writes`` when it was last found current; -1: not current, which it stays (a
        # buffer's version only grows). A chain of recipes, each asked for every record that
        # reads a value, is so walked once between two writes.
        self.found = None

    def current(self):
        """Whether every buffer the recomputation reads still holds the bytes it read, and its
        own buffer still the bytes it computed."""
        found = self.found
        if found == Recipe.writes:
            return True
        if found == -1:
            return False
        if self._current():
            self.found = Recipe.writes
            return True
        self.found = -1
        return False

    def _current(self):
        if self.buffer.version:
            return False
        same = self.same
        if same is not None and (same.version or same.origin is None
                                 or not same.origin.current()):
            # Its twin has been written since, or a buffer its twin reads (a constant of the
            # same bytes as one this one reads: ``_number``): what reads this value from now on
            # computes it from this recipe (what read it before reads the twin as it was then).
            self.same = None
        depends = self.depends
        for i in range(0, len(depends), 2):
            how = depends[i + 1]
            if type(how) is Recipe:
                if not how.current():
                    return False
            elif depends[i].version != how:
                return False
        return True

    def pairs(self):
        """``(buffer, version)`` for its own buffer and each buffer the recomputation reads,
        those its chain of recipes reads included (some more than once)."""
        yield self.buffer, 0
        yield from versions(self.depends)


class Lazy:
    """What a record holds in place of a value it reads: the place of the value, recomputed
    (or read, if the program still holds it) when the replay reaches the record."""

    __slots__ = ("place",)

    def __init__(self, place):
        self.place = place


_WRITES = itertools.count(1)


def written(buffer):
    """Count a write into ``buffer``, before or as it happens: its version, and the writes
    ``Recipe.current`` answers for (a number no write had: ``next`` of a count, which threads
    do not interleave, so two writes never leave one number)."""
    buffer.version += 1
    Recipe.writes = next(_WRITES)


def track(buffer, array):
    """Follow ``array``, the memory of the new ``buffer``, without keeping it alive."""
    buffer.ref = Tracked(array)


def hold_for_good(buffer, array):
    """The differentiation holds ``array``, all of ``buffer``, until its replay ends."""
    buffer.ref = Held(array)


def flat(items):
    """The items of ``items``, at any depth of lists and tuples."""
    for x in items:
        if type(x) in (list, tuple):
            yield from flat(x)
        else:
            yield x


def _is_place(x):
    return type(x) is Buffer or type(x) is Place


def _pin(buffer):
    """Hold the array of ``buffer`` (which the program still holds) from now on."""
    if type(buffer.ref) is not Held and buffer.ref is not None:
        array = buffer.ref()
        if array is not None:
            buffer.ref = Held(array)
            return True
    return type(buffer.ref) is Held


def _kept(buffer):
    """Whether the array of ``buffer`` is held for good or by a record (``Kept``, also once
    its ``Written`` holder lets go of it)."""
    ref = buffer.ref
    if type(ref) is Written:
        ref = ref.was
    return type(ref) is Held or type(ref) is Kept


def _alive(buffer):
    """Whether the array of ``buffer`` (not a constant) exists when the replay reaches any record
    made from now on, and is found through its reference: an argument's, one a record keeps,
    or one written in place (the undos of its writes hold it) that a reference follows (not a
    small temporary, which none does: ``reverse.fresh``)."""
    ref = buffer.ref
    return ref is not None and (buffer.version > 0 or type(ref) is Held or type(ref) is Kept)


def versions(depends):
    """``(buffer, version)`` for each buffer of ``depends`` (``buffer, how, ...`` as in a
    :class:`Recipe`, or a dict ``buffer -> how``) and each one the recipes among them read."""
    flat = iter(depends.items() if type(depends) is dict else zip(*[iter(depends)] * 2))
    for buffer, how in flat:
        if type(how) is Recipe:
            yield from how.pairs()
        else:
            yield buffer, how


def _reads(items):
    """What computing from ``items`` (a recipe's inputs and settings) reads, at this point of the
    forward pass: ``(depends, cost)``, the buffers it reads directly (each once: all it reads of
    one buffer is of its present version) with their versions, or their recipes for those it
    computes again, and the elements of the temporaries it recomputes; None if something it
    reads may not exist during the replay."""
    depends = {}
    cost = 0
    for x in items:  # (most recipes name no list: ``flat`` only for those that do)
        if type(x) is list or type(x) is tuple:
            items = flat(items)
            break
    for x in items:
        if type(x) is not Buffer and type(x) is not Place:  # (``_is_place``)
            if type(x) is Absent:
                return None
            continue
        source = x if type(x) is Buffer else x.buffer  # (a buffer's ``buffer``: a property)
        if source.constant:  # allocated by the program: hold it, and undo later writes into it
            if not _pin(source):
                return None
            source.read = True
            depends[source] = source.version
        elif source.ref is not None and (source.version > 0 or type(source.ref) is Held
                                         or type(source.ref) is Kept):  # (``_alive``)
            depends[source] = source.version
        elif source.origin is not None and source.origin.current():
            depends[source] = source.origin
            cost += source.origin.cost
        else:
            return None
    return depends, cost


def redone(named, values):
    """The inputs of a write a chain may redo (``Recomputation.chain``): ``named``, as the
    record names them (``reverse.recipe``), less the small temporaries that no reference
    follows (an element read, ``u[0] = u[1]``), which the replay could neither find nor
    compute again: those by their ``values``, copied now (no more memory than a checkpoint of
    such a write keeps, and the write no longer ends the chain)."""
    if not any(_is_place(x) and _lost(x, v) for x, v in zip(named, values)):
        return named
    return tuple((v.copy() if type(v) is np.ndarray else v) if _is_place(x) and _lost(x, v)
                 else x for x, v in zip(named, values))


def _lost(place, value):
    buffer = place if type(place) is Buffer else place.buffer
    return buffer.ref is None and not buffer.constant and (
        type(value) is not np.ndarray or small(value))


def _reading(buffer):
    """The replay may recompute ``buffer`` from its recipe: the buffers that reads after a
    write into them (at a version above 0) must have the writes since undone."""
    origin = buffer.origin
    for recipe in (origin, None if origin.same is None else origin.same.origin):
        if recipe is not None:
            for source, version in recipe.pairs():
                if version:
                    source.read = True


READ, ALIVE, CACHED, SAME, RUN, SEQUENCE, CONSTANT = (
    "read", "alive", "cached", "same", "run", "sequence", "constant")
"""The kinds of the steps of a plan (``Recomputation.read``)."""

NUMBERED = 256
"""How many recent recipes are remembered by what they compute (``Recomputation.numbers``)."""


_DOUBLE = struct.Struct("<d")


def _number(x):
    """What identifies the input ``x`` of a recipe for value numbering: a buffer (that of the
    older one computed the same way, while it is unwritten) with its version and the region; a number or a
    small array by its bytes and type; None if it cannot be told."""
    kind = type(x)
    if kind is Buffer or kind is Place:
        buffer = x if kind is Buffer else x.buffer  # (a buffer's ``buffer``: a property)
        if buffer.constant and kind is Buffer and not buffer.version \
                and type(buffer.ref) is Held and small(buffer):
            # A small constant the program allocated, unwritten and held (``_pin``), by its
            # bytes: the np.zeros(1) a force pads its argument with is allocated anew at each
            # evaluation, and the force computed again from the same bytes is still the same
            # (``Recipe.current`` lets go of the twin if the twin's constant is written later)
            array = buffer.ref()
            return (array.dtype.str, array.shape, array.tobytes())
        origin = buffer.origin
        # an unwritten twin holds its older twin's bytes; once written, bytes of its own
        same = buffer if buffer.version or origin is None or origin.same is None else origin.same
        if x.whole:
            return (same.key, buffer.version)
        return (same.key, buffer.version, x.offset, x.shape, x.strides, x.dtype.str)
    if kind is float:  # its bits: 0.0 is not -0.0, nor one NaN another
        return float, _DOUBLE.pack(x)
    if kind is list or kind is tuple:
        items = []
        for e in x:  # (a loop, not a comprehension: this runs for every large result)
            number = _number(e)
            if number is None:
                return None
            items.append(number)
        return kind, tuple(items)
    if kind is dict:
        return _number(tuple((k, v) for k, v in sorted(x.items())))
    if type(x) is np.ndarray or isinstance(x, np.generic):
        return (x.dtype.str, np.shape(x), x.tobytes())
    if kind is int or kind is bool:
        return (kind, x)
    if kind is complex:
        return (kind, _DOUBLE.pack(x.real), _DOUBLE.pack(x.imag))
    try:
        hash(x)
    except TypeError:
        return None
    return (type(x), x)


class Recomputation:
    """The stand-ins of one tape: how many records will read each buffer's recomputed value,
    and the values recomputed while some still will."""

    __slots__ = ("readers", "values", "budget", "chains", "numbers", "written", "lazy",
                 "planner")

    def __init__(self, budget=None):
        self.readers = {}
        self.values = {}
        self.budget = budget  # bytes of snapshots per rebuilt buffer; None: save every write
        self.chains = {}
        # Value numbering: recent recipes by what they compute, so that a temporary computed
        # again by the program (a force evaluated at the end of one step and at the start of
        # the next) is recomputed once in the replay, not once per evaluation.
        self.numbers = collections.OrderedDict()  # (the oldest let go in constant time)
        self.written = []  # the Written holders of this forward pass
        self.lazy = {}  # the buffers records hold stand-ins of, by key
        # While the reverse pass of a call a replay records runs: asked, for each record,
        # where to write down how its stand-ins were resolved (``resolve``)
        self.planner = None

    def write(self, buffer):
        """``buffer`` is about to be written in place for the first time: if it is a temporary
        the program holds (a weak reference follows it), hold its array in a :class:`Written`
        from now on."""
        ref = buffer.ref
        if type(ref) is Tracked or type(ref) is Kept:
            array = ref()
            if array is not None:
                buffer.ref = Written(array, ref, buffer)
                self.written.append(buffer.ref)

    def finish(self):
        """The forward pass is over: let go of the temporaries written in place that are dead.

        A temporary whose array is held by a ``Written`` holder stays alive in the replay
        until the record that made it has run, so a stand-in for it reads it rather than
        recomputes it. It is dead when nothing reads its bytes any more: no record keeps it,
        the program no longer holds it (what its reference count says once the holder lets go),
        and no recomputation in the replay reads it after a write (``read``). A dead temporary
        is let go now, and the undos of its writes do nothing: W5 frees one array of the three
        it writes this way. What a stand-in for a dead or never-written temporary recomputes is
        read; so temporaries are decided newest first, each before those its recipe reads.
        """
        if not self.written and not self.lazy:  # (a program of small arrays: all kept)
            return
        written = {holder.buffer.key: holder for holder in self.written
                   if holder.buffer.ref is holder}
        for key, buffer in self.lazy.items():
            if key not in written:
                _reading(buffer)
        for key in sorted(written, reverse=True):
            holder = written[key]
            if holder.buffer.read:
                continue
            holder.array = None  # freed here unless something else holds it
            holder.array = holder.was()
            if holder.array is None and key in self.lazy:
                _reading(holder.buffer)
        self._forget_written()
        self.lazy.clear()

    def _forget_written(self):
        for holder in self.written:  # (its buffer's reference is the holder: a cycle)
            holder.buffer = None
        self.written.clear()

    def give_recipe(self, record, output, buffer, settings=None):
        """Make ``buffer``, output ``output`` of the pure ``record``, recomputable from the
        record's recipe, if the recipe is whole (no input described rather than held) and
        everything it reads will exist during the replay; ``settings``, the record's keyword
        arguments."""
        if buffer.ref is None or not buffer.c_contiguous or small(buffer):
            return  # a small array is kept, never recomputed: no recipe needed
        # (what it reads: its inputs, then its settings' values; without settings, the inputs
        # alone, the same items without a level of ``flat`` more)
        reads = _reads((record.inputs, list(settings.values())) if settings else record.inputs)
        if reads is None or reads[1] + buffer.span > WORK * buffer.span:
            return
        depends = tuple(itertools.chain.from_iterable(reads[0].items()))
        recipe = buffer.origin = Recipe(record, output, buffer, depends,
                                        shared(reads[1] + buffer.span))
        inputs = _number(record.inputs)
        if inputs is None:
            return
        if settings:
            settings = _number(settings)
            if settings is None:
                return
        key = (record.primitive, output, inputs, settings or None)
        try:
            same = self.numbers.get(key)
        except TypeError:  # a primitive with no hash (a bound method of such an object)
            return
        if same is not None and same.origin is not None and same.origin.current():
            recipe.same = same
            return
        self.numbers[key] = buffer
        if len(self.numbers) > NUMBERED:
            self.numbers.popitem(last=False)  # (a dict's first key is found by a scan)

    def hold(self, place, value):
        """What a record keeps of ``value``, which it reads at ``place``: a :class:`Lazy`
        stand-in if it can be recomputed when the replay reaches the record and that is worth
        it; else ``value`` itself, its buffer marked ``Kept``. A Python number (a weak value's:
        ``Buffer.weak``) is kept as it is, and its buffer holds it (``read`` gives
        the number back)."""
        buffer = place if type(place) is Buffer else place.buffer
        if type(value) is not np.ndarray and not is_device(value):
            if buffer.ref is None and place.whole:
                buffer.ref = Held(np.array(value))  # a number: nothing to free
            return value
        if recomputable(buffer, value):
            key = buffer.key
            self.readers[key] = self.readers.get(key, 0) + 1
            self.lazy[key] = buffer
            return Lazy(place)
        ref = buffer.ref
        if type(ref) is Tracked:  # the record keeps it: say so
            array = ref()
            if array is not None:
                buffer.ref = Kept(array)
        elif type(ref) is Written and type(ref.was) is Tracked:  # say so once it is let go
            ref.was = Kept(ref.array)
        elif ref is None and place.whole:  # a small array, followed from now on
            buffer.ref = Kept(value)
        return value

    def resolve(self, items, plans=None):
        """Replace the stand-ins among ``items`` (a list) by their values; returns the keys of
        their buffers, for ``release``. ``plans``: a list to which ``(position, plan)`` is
        added for each, the plan saying how its value was found (``read``)."""
        keys = []
        for i, x in enumerate(items):
            if type(x) is Lazy:
                plan = None if plans is None else []
                items[i] = self.read(x.place, plan=plan)
                keys.append(x.place.buffer.key)
                if plans is not None:
                    plans.append((i, plan[0]))
        return keys

    def release(self, keys):
        """A record read the buffers of ``keys``: forget recomputed values that no record left
        will read."""
        for key in keys:
            if count_down(self.readers, key):
                self.values.pop(key, None)

    def read(self, place, rebuilt=None, numbers=True, plan=None, once=None):
        """The value at ``place`` now: its buffer's array if alive, else recomputed.
        ``rebuilt`` maps the keys of buffers being rebuilt to the arrays that stand for them.
        A buffer that stands for a Python number (``Buffer.weak``) gives that number, as a
        ufunc's operand, unless not ``numbers`` (a rule's argument: its 0-d array).
        ``once``: the values recomputed for the other inputs of one recipe, by buffer key, with
        their plans (``_recompute``): a buffer it reads at several places (both views of
        ``d[1:] - d[:-1]``, both factors of ``d * d``) is computed once, for the same bytes.

        ``plan``, a list: add to it how the value was found, for a replay to find it the same
        way: ``(READ, place, numbers, source)``, ``source`` ``ALIVE`` (the array, as it is
        now), ``CACHED`` (recomputed for an earlier record) or how it was computed again:
        ``(SAME, key, stored, plan)`` (as the older buffer of ``plan`` is) or ``(RUN, key,
        stored, primitive, rule, output, inputs, settings)``, the inputs and settings plans of
        their own where they are places (``read_all``), ``stored`` whether the value is kept
        for the records left that read it."""
        buffer = place.buffer
        array = None if rebuilt is None else rebuilt.get(buffer.key)
        source = ALIVE
        if array is None:
            array = buffer.ref() if buffer.ref is not None else None
        if array is None:
            array = self.values.get(buffer.key)
            source = CACHED
            if array is None and once is not None and buffer.key in once:
                array, source = once[buffer.key]  # (the plan's own object: computed once)
            elif array is None:
                source = None if plan is None else []
                array = self._recompute(buffer, rebuilt, source)
                source = None if plan is None else source[0]
                if once is not None:
                    once[buffer.key] = array, source
        if plan is not None:
            plan.append((READ, place, numbers, source))
        if numbers and buffer.weak:  # a Python number, as the program computed with it
            return array.item()
        return view(array, buffer, place)

    def _recompute(self, buffer, rebuilt, plan=None):
        recipe = buffer.origin
        # kept for the records left that read it; not what a rebuild computes on its way
        # (those stay as long as the rebuild needs them)
        stored = rebuilt is None and buffer.key in self.readers
        if recipe.same is not None:  # the same bytes as an older buffer's
            same = None if plan is None else []
            y = self.read(recipe.same, rebuilt, plan=same)
            if stored:
                self.values[buffer.key] = y
            if plan is not None:
                plan.append((SAME, buffer.key, stored, same[0]))
            return y
        record = recipe.record
        primitive = record.primitive
        rule = getattr(primitive, "rule", None)
        plans = None if plan is None else []
        once = {}
        inputs = [self.read_all(x, rebuilt, rule is None, plans, once) for x in record.inputs]
        settings = {k: self.read_all(v, rebuilt, True, plans, once)
                    for k, v in (record.settings or {}).items()}
        if rule is not None:  # a rule: its outputs, without the pullback it also returns
            y = rule(*inputs, **settings)[0]
            if recipe.output is not None:
                y = y[recipe.output]
        else:
            y = primitive(*inputs, **settings)
        if stored:
            self.values[buffer.key] = y
        if plan is not None:
            plan.append((RUN, buffer.key, stored, primitive, rule, recipe.output,
                         tuple(plans[:len(inputs)]), dict(zip(settings, plans[len(inputs):]))))
        return y

    def recompute_into(self, inputs, rebuilt, out):
        """Compute the one value of ``inputs`` (a rebuilt assignment's) straight into ``out``
        (of its shape and dtype), where it would be recomputed (not alive, not kept) by one
        ufunc of ``EXACT``; whether it did. The assignment so skips a temporary of its
        region's size and its copy. (Its value may be no place: ``redone``'s copy of a small
        one; then it did not.)"""
        if len(inputs) != 1 or not _is_place(inputs[0]):
            return False
        place = inputs[0]
        buffer = place.buffer
        recipe = buffer.origin
        if recipe is None or recipe.same is not None or recipe.output not in (None, 0) \
                or not place.whole or buffer.weak or buffer.dtype != out.dtype \
                or out.dtype.kind != "f" \
                or buffer.shape != out.shape:
            return False
        record = recipe.record
        if type(record.primitive) is not np.ufunc or record.primitive not in EXACT \
                or record.settings \
                or rebuilt.get(buffer.key) is not None or buffer.key in self.values \
                or (buffer.ref is not None and buffer.ref() is not None):
            return False
        record.primitive(*[self.read_all(x, rebuilt) for x in record.inputs], out=out)
        return True

    def read_all(self, x, rebuilt=None, numbers=True, plan=None, once=None):
        """``x`` (a recipe's input: a place, a constant, a list of them) as a value now
        (``numbers`` and ``once``: see ``read``). ``plan``: a list to which the plan of ``x``
        is added: ``read``'s for a place, ``(SEQUENCE, type, plans)`` for a list or tuple,
        ``(CONSTANT, x)`` for anything else."""
        if type(x) in (list, tuple):
            inner = None if plan is None else []
            y = type(x)(self.read_all(e, rebuilt, numbers, inner, once) for e in x)
            if plan is not None:
                plan.append((SEQUENCE, type(x), tuple(inner)))
            return y
        if _is_place(x):
            return self.read(x, rebuilt, numbers, plan, once)
        if plan is not None:
            plan.append((CONSTANT, x))
        return x

    def clear(self):
        """Forget everything: the differentiation is over."""
        self.readers.clear()
        self.values.clear()
        for chain in self.chains.values():
            chain.writes.clear()  # the undos of its writes, which refer back to it
        self.chains.clear()
        self.numbers.clear()
        self._forget_written()
        self.lazy.clear()

    def chain(self, place, inputs, undone=False):
        """The undo of a write into ``place`` from ``inputs`` (the places and values it reads),
        when the replay can rebuild what it overwrites (see :class:`Chain`) under the memory
        budget; None otherwise. ``undone``: the write is undone otherwise (by its inverse), and
        joins the chain of its buffer, if there is one, only so that the replay can redo it
        when it rebuilds the chain's earlier writes (what it returns is then no undo); where
        it cannot, the chain ends there."""
        buffer = place.buffer
        if undone and buffer.key not in self.chains:
            return None
        array = buffer.ref() if buffer.ref is not None else None
        if self.budget is None or array is None or not buffer.c_contiguous:
            return None
        reads = _reads(inputs)
        if reads is None:
            return None
        pairs = list(versions(reads[0]))
        if any(not b.c_contiguous for b, _ in pairs if b is not buffer):
            return None  # one its redone writes read could not be pinned (Chain.pin)
        # made at its first write (its version ``first``): a chain made before a write it
        # does not take would redo each write in place of the one after
        chain = self.chains.get(buffer.key)
        if chain is None:
            chain = self.chains[buffer.key] = Chain(self, buffer, array, self.budget)
        depends = [(b, v) for b, v in pairs if b is not buffer]
        if undone and not chain.continues(depends):
            return None
        for source, version in pairs:
            if version:  # read as it is now by the writes the replay redoes
                source.read = True
        return chain.before_write(place, depends)


    def overwriting(self, buffer, exact):
        """``buffer`` is about to be written by a write whose undo gives its bytes back
        ``exact``ly (a checkpoint, a rebuild) or not (an inverse: within rounding). In the
        second case a chain whose writes since its last barrier read it keeps its bytes now
        (``Chain.pin``)."""
        if not exact:
            for chain in self.chains.values():
                if chain.buffer is not buffer:
                    chain.pin(buffer)


def recomputable(buffer, value):
    """Whether a record reading ``value``, the array of ``buffer``, would hold a stand-in for
    it (``Recomputation.hold``): the replay can recompute it there, and it is not small."""
    origin = buffer.origin
    return origin is not None and origin.current() and not small(value)


def count_down(counts, key):
    """One reader of ``key`` fewer in ``counts``; whether that was the last (then ``key`` is
    forgotten)."""
    left = counts[key] - 1
    if left:
        counts[key] = left
        return False
    del counts[key]
    return True


def current_region(place):
    """The array at ``place`` now, read through its buffer's reference (None if the array is
    gone): how the undo of a write finds what it writes back without holding it."""
    buffer = place.buffer
    array = buffer.ref()
    return None if array is None else view(array, buffer, place)


class CurrentRegion:
    """``current_region(place)`` when called: what an undo holds to find the region it writes
    back (a scalar loop holds one per write: smaller than a ``functools.partial``)."""

    __slots__ = ("place",)

    def __init__(self, place):
        self.place = place

    def __call__(self):
        return current_region(self.place)


def keeps_memory(place, written):
    """Whether a record that keeps the value at ``place`` after a write into the buffer
    ``written`` holds memory for it: unless it is an argument's or the replay can recompute
    it then."""
    buffer = place.buffer
    if _kept(buffer):  # held anyway
        return False
    origin = buffer.origin
    return origin is None or not origin.current() or any(b is written for b, _ in origin.pairs())


def view(array, buffer, place):
    """The view at ``place`` of ``array``, all of ``buffer``."""
    if place.whole:
        return array
    if buffer.c_contiguous:
        flat = array.reshape(-1)
    else:  # the memory the buffer spans, from its lowest byte
        root = owner(array)
        flat = np.ndarray(buffer.span, buffer.dtype, root, buffer.low - address(root)) \
            if type(root) is np.ndarray else span_of(root, buffer.dtype,
                                                     buffer.low - address(root), buffer.span)
    return strided(flat, place.shape, place.dtype, place.offset, place.strides)


class Chain:
    """The writes into one buffer whose overwritten bytes the replay computes again instead of
    saving them: binomial checkpointing over the recorded program, after Griewank's *revolve*.

    The forward pass keeps a few snapshots of the whole buffer (at most half the budget,
    evenly spaced: when they are too many, every other one goes and the spacing doubles), and
    each write records how to redo it: its record, whose inputs are places of the buffer itself
    (read from the copy being rebuilt) and recomputable temporaries. The replay needs the
    buffer as it was before each write, newest first (``state_at``): from the nearest snapshot
    below, it redoes the writes in between, leaving snapshots on the way where revolve's
    schedule puts them while the budget allows (``advance``: the fewest writes redone for the
    snapshots left), and drops those above, which it will not need again. A write into the
    buffer undone by its inverse is redone too (it keeps its inverse as its undo), where it
    needs no barrier; else the chain ends there. Nothing else may
    change what the redone writes read: when a buffer they depend on is written, the next
    write starts from a snapshot kept to the end (a barrier), and a chain that holds as many
    barriers as its budget has snapshots ends (its later writes are saved, as without a
    budget, which then costs no more); and where the replay will give
    that buffer back only within rounding (an inverse), its bytes are kept first (``pin``) for
    the writes before, which then compute again exactly what they computed: a rebuilt region
    holds the bytes a checkpoint would have saved, and a budget changes no bit of the
    gradient.
    """

    __slots__ = ("recomputation", "buffer", "array", "writes", "snapshots", "barriers", "budget",
                 "spacing", "depends", "first", "last", "pending", "pins", "spares")

    def __init__(self, recomputation, buffer, array, budget):
        self.recomputation = recomputation
        self.buffer = buffer
        self.array = array  # held: the replay writes into it
        # The undo (``Rebuild``) of each write, which also says how to redo it; the writes of a
        # chain are consecutive (see before_write), so the one leaving version v is at
        # v - first - 1.
        self.writes = []
        self.snapshots = {}  # version -> a copy of the whole buffer at that version
        self.barriers = set()
        self.budget = max(4, budget // max(1, array.nbytes))  # snapshots
        self.spacing = 1
        self.depends = {}  # what the writes since the last barrier read, by buffer key
        self.first = buffer.version  # the version before its first write
        self.last = None  # the version its last write left
        self.pending = None  # the undo of the write about to be made
        self.pins = {}  # barrier version -> {key: a copy of a buffer its stretch's writes read}
        self.spares = []  # arrays of the buffer's layout the reverse pass has done with

    def before_write(self, place, depends):
        """Just before a write into ``place`` that reads ``depends``: snapshot if due; returns
        the write's undo."""
        version = self.buffer.version
        if self.last is not None and version != self.last:
            # written since by a write not in the chain (undone by its inverse, an in-place
            # rule), which cannot be redone: the chain ends, later writes are checkpointed
            return None
        if not self.snapshots or not self._unchanged():
            if len(self.barriers) >= self.budget:
                # what the writes read changes as often as they write (a stepper reading an
                # array each step changes): a snapshot kept to the end per stretch would cost
                # more than saving what the writes overwrite, so from here on they are saved
                return None
            snapshot = True
            self.depends = {}
        elif version % self.spacing == 0:
            snapshot = False
        else:
            snapshot = None
        for b, v in depends:
            if b.key not in self.depends:  # since the last barrier, b had this version
                self.depends[b.key] = (b, v)
        return self.again(version, place, snapshot)

    def again(self, version, place, snapshot):
        """The undo of a write into ``place`` at ``version``, after keeping the snapshot
        ``snapshot`` says (None: none, False: one, True: a barrier): ``before_write``'s, and a
        replay's of the recorded call, which keeps the snapshots that call kept
        (``Rebuild.snapshot``)."""
        if snapshot is not None:
            self._snapshot(version, barrier=snapshot)
        self.pending = Rebuild(self, version, place, snapshot)
        return self.pending

    def continues(self, depends):
        """Whether a write that reads ``depends`` and is undone otherwise can join the chain
        without a snapshot kept to the end (a barrier), which would cost more than the write's
        own undo: the chain's last write left the buffer as it is, and nothing the writes
        since the last barrier read, nor what this one reads, has changed since then."""
        if self.last is None or self.buffer.version != self.last or not self._unchanged():
            return False
        return all(self.depends.get(b.key, (b, v))[1] == v for b, v in depends)

    def pin(self, buffer):
        """``buffer``, about to be written by a write the replay undoes only within rounding:
        if the writes since the last barrier read it as it is, keep a copy of it, which the
        replay reads when it redoes them (it is C-contiguous: see ``Recomputation.chain``)."""
        entry = self.depends.get(buffer.key)
        if entry is None or entry[0].version != entry[1] or self.last is None \
                or self.last - max(self.barriers) < 2:  # no write the replay redoes
            return
        array = buffer.ref() if buffer.ref is not None else None
        if array is not None:
            self.pins.setdefault(max(self.barriers), {}).setdefault(buffer.key, array.copy())

    def _unchanged(self):
        """Whether no buffer the writes since the last barrier read has been written since.
        Forgets those that can no longer be (unchanged, their memory gone): without that the
        list would grow by every temporary the writes read, for as long as the chain lasts."""
        depends = self.depends
        for key, (b, v) in list(depends.items()):
            if b.version != v:
                return False
            if type(b.ref) is Tracked and b.ref() is None:  # its memory is gone
                del depends[key]
        return True

    def _snapshot(self, version, barrier):
        self.snapshots[version] = self.array.copy()
        if barrier:
            self.barriers.add(version)
        forward = self.budget // 2
        while len(self.snapshots) > forward and self.spacing < 1 << 30:
            self.spacing *= 2
            for v in [v for v in self.snapshots if v % self.spacing and v not in self.barriers]:
                del self.snapshots[v]
            if len(self.snapshots) <= len(self.barriers):
                break

    def wrote(self, inputs, written, redo):
        """The write just made, into the place ``written`` (its undo's) from ``inputs`` (places
        and values): ``redo(inputs, out)`` does it again."""
        self.last = self.buffer.version
        rebuild, self.pending = self.pending, None
        rebuild.inputs, rebuild.redo = inputs, redo
        self.writes.append(rebuild)

    def state_at(self, version):
        """The whole buffer as it was at ``version``: an array not to be written, which the
        caller hands back to ``spare`` once it has read it where it is not a snapshot."""
        snapshots = self.snapshots
        for v in [v for v in snapshots if v > version]:
            self.spare(snapshots.pop(v))
        while True:
            start = max(v for v in snapshots if v <= version)
            if start == version:
                return snapshots[start]
            if len(snapshots) < self.budget and version - start > 1:
                middle = start + advance(version - start + 1, self.budget - len(snapshots))
                snapshots[middle] = self._redo(snapshots[start], start, middle)
            else:
                return self._redo(snapshots[start], start, version)

    def _redo(self, snapshot, start, stop):
        """The buffer at version ``stop``: ``snapshot`` (at ``start``), the writes between
        redone into a copy of it (into a spare's memory where there is one)."""
        if self.spares:
            work = self.spares.pop()
            np.copyto(work, snapshot)
        else:
            work = snapshot.copy()
        rebuilt = {self.buffer.key: work}
        pins = self.pins.get(max(b for b in self.barriers if b <= start))
        if pins:
            rebuilt.update(pins)
        recomputation = self.recomputation
        read_all = recomputation.read_all
        for write in self.writes[start - self.first:stop - self.first]:
            # (its first redo while a replay records says how it found its inputs; no local
            # holds them, which would keep a recomputed one alive through the next redo)
            plans = write.plans
            out = view(work, self.buffer, write.place)
            if plans is None and getattr(write.redo, "copies", False) \
                    and recomputation.recompute_into(write.inputs, rebuilt, out):
                continue  # an assignment of a value computed again: computed in place
            write.redo(read_all(write.inputs, rebuilt) if plans is None or plans
                       else read_all(write.inputs, rebuilt, True, plans), out)
        return work

    def spare(self, array):
        """Keep ``array``, a state of the buffer the reverse pass no longer reads, for a state
        ``_redo`` rebuilds later: the reverse pass rebuilds a state for each write it undoes,
        and memory of that size, freed, goes back to the system and comes back a page at a
        time, at the cost of another pass over it. No more memory is held than before: a new
        state is allocated only where no spare is left, when the chain holds its snapshots
        alone, so it never holds more than its budget of snapshots and one state besides."""
        if len(self.spares) < self.budget:
            self.spares.append(array)


def advance(states, free):
    """How many writes past a snapshot to leave the next one, when the states of the
    ``states`` versions from the snapshot's on are needed newest first and ``free`` more
    snapshots may be kept: the place of Griewank and Walther's binomial schedule (*revolve*,
    ACM TOMS 26, 2000), which redoes the fewest writes. With the snapshot below counted among
    ``c = free + 1``, the least repetition ``r`` with ``C(c + r, c) >= states`` steps, the
    first step is ``max(C(c + r - 2, c), states - C(c + r - 1, c - 1))`` (at least 1).
    Halving each stretch instead redid a sixth to a third more: W6 with 8 snapshots redoes
    2.25 writes per write at T = 100 (2.94 halving), 4.26 at T = 1000 (4.99)."""
    c = free + 1
    r = 0
    while math.comb(c + r, c) < states:
        r += 1
    return max(1, math.comb(c + r - 2, c) if r >= 2 else 0, states - math.comb(c + r - 1, c - 1))


class Rebuild:
    """The undo of a write in a :class:`Chain`: the bytes it overwrote, from the state the
    chain rebuilds. It also says how the chain redoes the write (``Chain.wrote``): ``redo(the
    values of inputs now, out)``, into ``place``."""

    __slots__ = ("chain", "version", "place", "inputs", "redo", "snapshot", "plans")

    def __init__(self, chain, version, place, snapshot=None):
        self.chain = chain
        self.version = version  # the buffer's before the write
        self.place = place
        self.inputs = self.redo = None
        # what the chain kept just before the write: None, a snapshot (False) or a barrier
        # (True), which a replay of the recorded call keeps at the same write
        self.snapshot = snapshot
        # While a replay records: a list to which the first redo of the write adds how it
        # found its inputs (``Recomputation.read_all``'s plan), for the replay to find them so
        self.plans = None

    def __call__(self):
        chain = self.chain
        state = chain.state_at(self.version)
        np.copyto(view(chain.array, chain.buffer, self.place),
                  view(state, chain.buffer, self.place))
        if state is not chain.snapshots.get(self.version):  # rebuilt for this write alone
            chain.spare(state)
        if self.version == chain.first:  # its first write: nothing left to rebuild
            chain.snapshots.clear()
            chain.spares.clear()
            chain.writes.clear()
            chain.pins.clear()
            chain.array = None  # from now on only what reads the buffer holds it
