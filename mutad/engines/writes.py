"""How an in-place write is undone, the one place both engines decide it.

A write offers its undo before it runs: an inverse (``a -= b`` undoes ``a += b``; for an
elementwise write an :class:`ElementwiseInverse`, which also answers whether it is safe for the
operands at hand, how much it may amplify the error already in the target, and how to make
it exact element by element), or a save of the bytes about to be overwritten
(:class:`CopyBack`). :func:`decide_undo` asks the tape's policy (``Tape.undo_for``) and returns
the callable the reverse pass runs, and its kind. The traced engine (``inplace.record_write``)
and the replay of a recording (``replay``) both call it, on the same values, so that they
decide alike.
"""

import functools
import math
import threading

import numpy as np

from ..core.debug import Handling
from ..core.devices import namespace
from .products import CHUNK
from .recompute import Rebuild
from ..core.errors import (ReadOnlyError, UnsupportedOperationError, function_name,
                           plain_copy_missed)
from ..core.levels import ACTIVE
from ..core.registry import Normwise
from ..core.views import (may_overlap, memory, overlaps_itself, owner, same_region, views,
                          wrapped, writeable)


ULPS = 2
"""The restore policy's per-element guarantee: where an elementwise write is undone by its
inverse, each element comes back within this many units in the last place of the value it
held (bit for bit where that is zero or subnormal), given the bytes the write left; any other
element is saved before the write."""


def check_region(value, what, whole=False, key=None):
    """Refuse, before anything is written or recorded, a write into ``value`` that NumPy would
    not do (a read-only view, as ``np.diagonal`` gives) or whose elements share bytes, whose
    values, and so derivative, depend on the order NumPy writes them in (``whole``: the
    write covers the whole of an array, which NumPy lays out apart; ``key``: the write is
    ``value[key] = ...``, whose region alone is asked about). ``what`` names the write (a
    ufunc: its out=). Both modes ask it of every destination."""
    if writeable(value) and (whole or not overlaps_itself(value)
                             or (key is not None and _region_apart(value, key))):
        return
    if isinstance(what, np.ufunc):
        what = f"np.{what.__name__}(..., out=...)"
    if not writeable(value):
        if any(id(owner(value)) in getattr(run, "plain_handed", ()) for run in ACTIVE.running):
            # read-only as a plain array a conversion handed out of it was read by a record
            raise plain_copy_missed(what)
        raise ReadOnlyError(f"{what}: the destination is read-only, as NumPy makes it (a view "
                            "from np.diagonal, np.broadcast_to, ...). Write into a copy of it.")
    raise UnsupportedOperationError(
        f"{what}: the destination is a view whose elements share memory (from "
        "np.broadcast_arrays, sliding_window_view(..., writeable=True) or as_strided), so the "
        "result depends on the order of the writes. Write into the base array instead.")


def _region_apart(x, key):
    """Whether ``x[key]``, where ``x`` is a view whose elements share memory (a sliding
    window's), is a region whose own elements do not (a column of the windows, one element):
    a basic index, a view NumPy writes the same in any order."""
    parts = key if type(key) is tuple else (key,)
    if not all(k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))
               for k in parts):
        return False  # (an advanced index may name one element twice, a traced one changes)
    x = memory(x)  # (a traced destination's plain memory: indexing it would trace the region)
    region = x[key]
    return isinstance(region, np.generic) or (views(region, x) and not overlaps_itself(region))


# The operands of an elementwise write ``ufunc(*operands, out=target)``, as both modes see
# them. The operand that is the target itself (``at_target``) is updated in place: reverse mode
# offers the write's inverse for it (``operations.WritePlan``), forward mode updates its tangent
# in place. Another operand over the target's memory (``over_target``) is changed as NumPy
# reads it: reverse mode offers no inverse, which would read it after the write, and forward
# mode copies its tangent before it updates the target's. Each mode hands over the arrays of the
# operands it follows, None for the others (a Python number, an operand without derivative).


def at_target(target, operands):
    """The position of the operand that is ``target`` itself, the same elements of the same
    memory (None: none is)."""
    for i, x in enumerate(operands):
        if x is not None and same_region(x, target):
            return i
    return None


def over_target(target, operands, position):
    """The positions of the operands but the target's own (at ``position``) that may share
    memory with ``target``."""
    return [i for i, x in enumerate(operands)
            if x is not None and i != position and may_overlap(x, target)]


def reads_written(rule):
    """Whether the partials of an elementwise write by ``rule`` read the values it wrote and
    nothing of its operands: they read the target as the write leaves it (forward mode: after
    the write; reverse mode: before the write is undone), and no copy of the values is kept."""
    return rule.uses == "y"


class CopyBack:
    """The undo of a checkpointed write: the saved bytes of ``region`` (at ``key`` within it,
    an advanced index or mask, if given), copied back when called, once. ``at``, if given,
    finds the region then (``recompute.current_region``), so that the undo does not hold it."""

    __slots__ = ("region", "key", "saved", "at", "lends")

    def __init__(self, region, key=None, at=None):
        self.region = region if at is None else None
        self.at = at
        self.key = key
        self.saved = region.copy() if key is None else region[key]  # an advanced index copies
        self.lends = False  # whether the copy is kept, once put back, for the pullback to lend

    def __call__(self):
        region = self.region if self.at is None else self.at()
        saved, self.saved = self.saved, None  # freed once copied back, before the pullback runs
        if self.lends:  # unless its memory is lent on (``elementwise.write_pullback``)
            self.saved = saved
        if region is None:  # a temporary nothing reads any more
            return
        if self.key is None:
            copy_back(region, saved)
        else:
            region[self.key] = saved  # repeated indices all get the same original

    def lent(self):
        """The saved copy, put back and kept (``lends``), let go of: for the pullback to lend
        its memory on (``elementwise.write_cotangents``)."""
        saved, self.saved = self.saved, None
        return saved


def copy_back(region, saved):
    """Put the bytes ``saved`` of ``region`` before a write back into it: a checkpoint's undo,
    :class:`CopyBack`'s, ``inplace.SavedWrite``'s and a compiled block's."""
    if type(region) is np.ndarray:
        _copyto(region, saved)  # NumPy's own: no dispatch
    else:
        np.copyto(region, saved)  # a device library's, through NumPy's protocol


_copyto = getattr(np.copyto, "_implementation", np.copyto)


def exact_as_scalar(dtype):
    """Whether NumPy's scalar of ``dtype`` gives back every bit of an element of it: real and
    complex floats up to 16 bytes, whose scalars hold the value and nothing else (an extended
    precision's padding bytes are not kept), in the machine's byte order."""
    return dtype in EXACT_AS_SCALAR


EXACT_AS_SCALAR = frozenset(map(np.dtype, (np.float16, np.float32, np.float64, np.complex64,
                                           np.complex128)))
"""The dtypes :func:`exact_as_scalar` answers for (a set: a scalar loop asks it of each element
it writes, ``elementwise.ElementWrite.write``)."""


def checkpoint(region, key=None):
    """Save ``region`` (``region[key]``) before it is overwritten; return the callable that
    copies it back."""
    return CopyBack(region, key)


def saving(value, key):
    """What saves the bytes of ``value[key]`` (``key`` None: all of ``value``) before a write:
    the region where the key makes a view, else (an advanced index, one element) a copy of
    what the key selects."""
    if key is None:
        return lambda: CopyBack(value)
    region = value[key]
    if views(region, value):
        return lambda: CopyBack(region)
    return lambda: CopyBack(value, key)


class Undos:
    """The undo of a write into several arrays: each one's, in turn."""

    __slots__ = ("undos",)

    def __init__(self, undos):
        self.undos = undos

    def __call__(self):
        for undo in self.undos:
            undo()


class Undo:
    """What a write offers, before it runs, for putting back the bytes it overwrites (a write
    into several arrays: one offer per array, in lists):

    * ``inverse``: a callable that computes them back from those the write left, or an
      :class:`ElementwiseInverse`, which also answers whether it is safe for the operands at
      hand and how to make it exact element by element; ``growth`` bounds how much it amplifies
      the error already in the target (a number, or a callable asked only of a safe inverse);
    * ``save``: a callable that copies the region about to be overwritten and returns the
      callable that copies it back (None: a copy of the whole target);
    * ``redo(inputs, out)``: how the write is done again from what it read, which a memory
      budget may rebuild it with in the reverse pass instead of saving.

    :func:`decide_undo` chooses among them."""

    __slots__ = ("inverse", "save", "growth", "redo")

    def __init__(self, inverse=None, save=None, growth=1.0, redo=None):
        self.inverse = inverse
        self.save = save
        self.growth = growth
        self.redo = redo


SAVED = Undo()
"""The offer of a write with no inverse: the target's bytes are saved."""


class Unread:
    """The undo of a write whose overwritten bytes nothing reads: no record of the reverse pass
    reads them, no undo of an earlier write computes back from them, and nobody outside the
    differentiation sees the array (``inplace.unread``). It puts nothing back, so the write
    needs neither an inverse (nor its verification) nor a copy."""

    __slots__ = ()

    def __call__(self):
        pass


UNREAD = Unread()
"""The one :class:`Unread` undo (``decide_undo``'s kind ``"unread"``)."""

SKIP_UNREAD = True
"""Whether :func:`decide_undo` gives writes whose overwritten bytes nothing reads the undo
:data:`UNREAD` (False: every write is undone, the path the differential tests compare with)."""


VERIFYING = "verifying"
"""The kind :func:`decide_undo` gives a write whose elementwise inverse it chose and whose
verification is left to the write itself (``ElementwiseInverse.write_verified``), which then
says whether it is ``"inverse"`` or ``"partial"``."""


def decide_undo(tape, inverse, save, key, whole, size, growth=1.0, writing=False,
                unread=None):
    """``(undo, kind)``: how a write whose undo offers ``inverse`` (or None) and ``save()`` is
    undone, decided before it (``Tape.undo_for``; ``key``, ``whole``, ``size`` and ``growth``
    are its questions), and what that is: ``"inverse"``, ``"partial"`` (the inverse, then the
    elements it would not give back copied back: ``ElementwiseInverse.exactly``),
    ``"checkpoint"`` (``save()``'s copy) or ``"rebuild"`` (under a memory budget). The one place
    the traced engine and the replay of a recording decide it.

    ``writing``: the caller can have the elementwise inverse write the target as it verifies
    it (``ElementwiseInverse.write_verified``), a piece at a time while the piece is in cache;
    where the inverse can (``ElementwiseInverse.can_write``) and is chosen, the kind is
    ``VERIFYING``, the undo the inverse itself, and its growth is added to the tape's drift
    once measured, by the write: the growth of a write counts from the next write on, so the
    decision is the same.

    ``unread()`` (None: never) proves that nothing will read the bytes the write overwrites
    (``inplace.unread``): if it does, the write is undone by nothing (``UNREAD``, kind
    ``"unread"``)."""
    if unread is not None and SKIP_UNREAD and unread():
        return UNREAD, "unread"
    elementwise = type(inverse) is ElementwiseInverse
    deferred = writing and elementwise and inverse.can_write()
    undo = tape.undo_for(inverse, inverse.is_safe if elementwise else None, save, key,
                         None if deferred else inverse.growth if elementwise else growth,
                         whole, size)
    if undo is not inverse:
        return undo, "rebuild" if type(undo) is Rebuild else "checkpoint"
    if not elementwise:
        return undo, "inverse"
    if deferred:
        return undo, VERIFYING
    return inverse.made_exact()


class Reads:
    """What the record of a write reads (``inplace.record_write``): its operands, ``inputs``
    (traced or not) and their ``values``; ``kept``, per input the value the pullback reads
    (None where it reads none); ``inverse_reads``, the positions of those the inverse reads,
    which the record keeps too where the write is inverted; ``recompute``: the pullback and the
    inverse read them from the record's ``kept``, which may then hold stand-ins for values the
    reverse pass recomputes (``ReverseTape.hold``). ``named``: the inputs as the record names
    them, where they are known already (the replay of a recording: its places); None: the
    record names them (``reverse.recipe``)."""

    __slots__ = ("inputs", "values", "kept", "inverse_reads", "recompute", "named")

    def __init__(self, inputs, values, kept=None, inverse_reads=(), recompute=False, named=None):
        self.inputs = inputs
        self.values = values
        self.kept = kept
        self.inverse_reads = inverse_reads
        self.recompute = recompute
        self.named = named


class Destination:
    """Where a write lands, as its undo and its record need it: the array written
    (``value``), the key of its buffer (``key``), whether the write covers all of it
    (``whole``), its place in records (``place``), what the undo calls to find it then
    (``find``; None: the undo holds ``value``), and the traced buffer whose version the write
    advances and whose memory recomputation follows (``buffer``; None in the replay of a
    recording, which follows neither). In the replay of a recording, ``unseen``: the buffer
    as its records name it, where nobody outside the differentiation saw the array when the
    write was recorded (``inplace.unseen``), so that the write may go undone where nothing
    reads what it overwrites (``inplace.unread``); else None."""

    __slots__ = ("value", "key", "whole", "place", "find", "buffer", "unseen")

    def __init__(self, value, key, whole, place, find=None, buffer=None, unseen=None):
        self.value = value
        self.key = key
        self.whole = whole
        self.place = place
        self.find = find
        self.buffer = buffer
        self.unseen = unseen


class ElementwiseInverse:
    """The inverse on offer for the elementwise write ``ufunc(*values, out=target)`` (its
    operand at ``position`` is the target, those at ``others_at`` the rest): called in the
    reverse pass, it computes the target's old values from those the write left and the other
    operands (as ``kept`` holds them then). With it, what ``decide_undo`` asks of an inverse:
    whether it is safe for the operands at hand (``is_safe``: ``apart()``, no other operand
    over the target's memory, and the rule's own condition), how much it may amplify the error
    already in the target (``growth``), and the inverse made exact element by element
    (``exactly``). ``find()`` gives the target in the reverse pass (None: a temporary nothing
    reads any more); None: ``target`` itself.

    ``Tape.undo_for`` asks ``growth`` only of an inverse it chooses, which ``exactly`` is then
    asked of: a norm-wise growth (``registry.Normwise``) is measured in the pass over the
    operands that verifies the inverse (``_verify``), whose findings ``exactly`` takes."""

    __slots__ = ("ufunc", "invert", "rule", "position", "values", "target", "kept",
                 "others_at", "apart", "find", "kwargs", "verified")

    def __init__(self, ufunc, rule, position, others_at, values, target, kept, apart, find,
                 kwargs):
        self.ufunc = ufunc
        self.invert = rule.inverse[position]
        self.rule = rule
        self.position = position
        self.values = values
        self.target = target
        self.kept = kept
        self.others_at = others_at
        self.apart = apart
        self.find = find
        self.kwargs = kwargs
        self.verified = None  # what ``_verify`` found, once asked

    def __call__(self):
        written = self.target if self.find is None else self.find()
        if written is not None:
            self.invert(written, [self.kept[i] for i in self.others_at])

    def settle(self):
        """Once it is the write's undo: let go of what only the questions read (the operands,
        which may be temporaries recomputed in the reverse pass, and the target where
        ``find`` finds it), so that the record holds no more than the inverse reads."""
        self.values = self.rule = self.ufunc = self.kwargs = self.apart = None
        self.verified = None
        if self.find is not None:
            self.target = None

    def is_safe(self):
        return self.apart() and self.rule.is_safe([self.values[i] for i in self.others_at])

    def can_write(self):
        """Whether the write can be done a piece at a time as its inverse is verified
        (:meth:`write_verified`): one of the correctly rounded writes whose floating-point
        exceptions the verification sees (``WRITTEN_AS_VERIFIED``), without keyword
        arguments, into a long C-contiguous array of a float type, from operands of that
        type laid out as it or Python numbers (``_pieceable``), none of an outer
        differentiation (whose own tape must see the write), and a growth measured in the
        same pass, if any."""
        target = self.target
        if self.ufunc not in WRITTEN_AS_VERIFIED or self.kwargs or type(target) is not np.ndarray \
                or target.dtype not in _WRITTEN_DTYPES or not (
                    self.rule.growth is None or type(self.rule.growth) is Normwise):
            return False
        dtype = target.dtype
        values = list(self.values)
        values[self.position] = target
        return all(type(v) in (float, int) or type(v) is np.ndarray and v.dtype == dtype
                   for v in values) and _pieceable(values, self.position)

    def write_verified(self, tape, key):
        """Do the write a piece at a time as its inverse is verified (``_verify``), add its
        growth to the drift of the buffer ``key`` on ``tape`` (``Tape.grow``), and return
        ``(undo, kind)`` as :func:`decide_undo` does for an inverse it verified first: the
        same checks on the same bytes, so the same undo."""
        growth = self.rule.growth
        self.verified = _verify(self.ufunc, self.invert, self.target, self.values,
                                self.position, self.kwargs, growth, write=True)
        if growth is not None:
            tape.grow(key, growth.bound(self.verified[1]))
        return self.made_exact()

    def made_exact(self):
        """``(undo, kind)`` of the inverse, chosen: :meth:`exactly`, then :meth:`settle`."""
        undo = self.exactly(self)
        self.settle()
        return undo, ("inverse" if undo is self else "checkpoint" if type(undo) is CopyBack
                      else "partial")

    def growth(self):
        growth = self.rule.growth
        if growth is None:
            return 1.0
        if type(growth) is Normwise:
            return growth.bound(self._verified(growth)[1])
        return growth(self.target, [self.values[i] for i in self.others_at])

    def exactly(self, inverse):
        """``inverse``, made to give back every element of the target that the write is about
        to overwrite to within ``ULPS`` (``_verify``): it copies back, after it runs, the
        elements it would not give back, saved now (where there are any; the whole region, a
        checkpoint, under nested differentiation)."""
        lost = self._verified(None)[0]
        if lost is None:
            return checkpoint(self.target)
        if not lost:
            return inverse
        target = self.target
        return _put_back(inverse, self.find or (lambda: target), lost)

    def _verified(self, normwise):
        if self.verified is None:
            self.verified = _verify(self.ufunc, self.invert, self.target, self.values,
                                    self.position, self.kwargs, normwise)
        return self.verified


WRITTEN_AS_VERIFIED = frozenset((np.add, np.subtract, np.multiply, np.divide, np.negative))
"""The ufuncs whose writes :func:`_verify` may do a piece at a time (``write=True``): each
element correctly rounded, so a piece's values are those of the whole write, and with every
floating-point exception it may raise seen by the verification (``_verify``)."""

_WRITTEN_DTYPES = frozenset((np.dtype(np.float64), np.dtype(np.float32)))


def _verify(ufunc, invert, target, values, position, kwargs, normwise=None, write=False):
    """``(lost, measures)``: which elements of ``target`` that ``ufunc(*values, out=target)``
    is about to overwrite its inverse ``invert`` would not give back to within ``ULPS``, and
    the ``measures`` of the growth ``normwise`` (a ``registry.Normwise``; None: none).

    Run before the write: the write and its inverse are computed on the values at hand, a piece
    at a time into scratch memory, and the elements the inverse would not give back (an
    underflow, an overflow, a small term absorbed by a large one, a division by zero) are
    listed as ``(where, positions, their values)`` per piece that has any (``lost``, empty
    where there are none; None where they are, and the target is an array an outer
    differentiation traces, whose saved values would have to be traced too: the whole region
    is checkpointed instead): a write undone this way keeps them until the reverse pass
    reaches it, so a long run of writes keeps no more than the elements they lost.
    The replay computes the same correctly rounded operations on the same bytes, so it gives
    back what was verified here. An inverse marked ``bounded_where_normal`` (a product undone
    by a division) is within ``ULPS`` wherever the write's result is a normal float, so that
    is all a piece is checked for before its elements are. The growth is measured on the same
    pieces, while they are at hand: one pass over the operands for both.

    ``write``: the write itself is done too (``ElementwiseInverse.can_write``: a long
    contiguous write of ``WRITTEN_AS_VERIFIED``), each piece right after it is checked (its
    lost elements saved), while it is in cache, as long as the pieces are clean, so that no
    piece so written raised a floating-point exception: a product's or a quotient's result
    normal (``_normal``), a sum's or a negation's finite (an overflow, an invalid operation
    or a division by zero gives an infinity or NaN, an underflow a result that is not
    normal, and a sum of two floats of one type never underflows: a result below the normal
    range is exact), or the growth's measures of the piece show it raises nothing
    (``Normwise.quiet``: a sum of finite operands too small to overflow), which spares the
    pass over its result. From the first piece that is not clean on, the rest is written after
    the pass, by one call under the caller's ``np.errstate``, which warns or raises as
    NumPy's call on the whole does.
    """
    plain = [memory(v) if wrapped(v) else v for v in values]
    plain[position] = memory(target)
    # (complex products are not correctly rounded part by part: checked element by element)
    bounded = getattr(invert, "bounded_where_normal", False) and target.dtype.kind != "c"
    lost, measures = [], []
    quiet = None if normwise is None else normwise.quiet
    scratch = None
    rest = 0 if write else None  # where the pieces not written yet start
    with Handling(all="ignore"):  # the write itself warns, as NumPy does
        for where, piece, operands in _pieces(plain, position):
            others = [v for i, v in enumerate(operands) if i != position]
            if normwise is not None:
                measures.append(normwise.measure(piece, others))
            if scratch is None:  # (the first piece is the largest)
                scratch = _take_scratch(namespace(piece), piece.dtype, piece.size)
            back = scratch[0][:piece.size].reshape(piece.shape)
            ufunc(*operands, out=back, **kwargs)
            writing = rest is not None and rest == where.start  # (``write``: pieces)
            if bounded:
                clean = _normal(back)
                if clean:
                    if writing:
                        ufunc(*operands, out=piece)
                        rest = where.stop
                    continue
                ufunc(*operands, out=back, **kwargs)  # (``_normal`` left magnitudes there)
            else:  # (the operands' measures may settle it: ``Normwise.quiet``)
                clean = writing and (quiet is not None and quiet(measures[-1], target.dtype)
                                     or math.isfinite(_sum(back, axis=None)))
            invert(back, others)
            far = _lost(back, piece, scratch[1][:piece.size].reshape(piece.shape))
            if far is not None and lost is not None:
                if wrapped(target):
                    lost = None  # (the growth still measured on every piece)
                else:
                    lost.append((where, far, piece[far]))  # (before it is written)
            if writing and clean:
                ufunc(*operands, out=piece)
                rest = where.stop
    if scratch is not None:
        _give_back_scratch(scratch)
    if rest is not None and rest < target.size:
        flat = [v.reshape(-1)[rest:] if type(v) is np.ndarray and v.ndim else v
                for v in plain]
        ufunc(*flat, out=flat[position])
    if len(measures) > 1:  # each the largest over the pieces, a NaN in any made one
        return lost, tuple(np.maximum.reduce(np.array(measures), axis=0).tolist())
    return lost, measures[0] if measures else None


_SPARE = threading.local()
"""Per thread, the scratch memory (``_verify``'s) of one write, kept for the next: a long run
of writes of one size verifies each in the same memory rather than in memory allocated and
freed per write. Nothing outside ``_verify`` sees it (what it finds is copied out of it:
``_lost``), and it is taken out while in use, so a verification within another (or on
another thread) gets its own."""


def _take_scratch(xp, dtype, size):
    """``(values, flags)``: scratch memory of ``size`` elements of ``dtype`` and of bool, in
    the namespace ``xp`` (where the target lives: a device's memory), the kept one where it
    is large enough (``_SPARE``); give it back with :func:`_give_back_scratch`."""
    kept = getattr(_SPARE, "scratch", None)
    scratch = None if kept is None else kept.get((xp, dtype))
    if scratch is None or scratch[0].size < size:  # (the kept one stays for the next)
        return xp.empty(size, dtype), xp.empty(size, bool)
    del kept[(xp, dtype)]
    return scratch


def _give_back_scratch(scratch):
    """Keep ``scratch`` (:func:`_take_scratch`'s) for the next write, where it is no larger
    than a piece (``PIECE``): a single larger write's is let go, not held after the pass."""
    values = scratch[0]
    if values.size <= PIECE * CHUNK:
        kept = getattr(_SPARE, "scratch", None)
        if kept is None:
            kept = _SPARE.scratch = {}
        kept[(namespace(values), values.dtype)] = scratch


def _put_back(inverse, find, lost):
    """``inverse``, then the ``lost`` elements (``_verify``'s) copied back into the target,
    which ``find()`` gives in the reverse pass (None: a temporary nothing reads any more)."""

    def inverse_then_put_back():
        written = find()
        if written is None:
            return
        with Handling(all="ignore"):  # at the elements put back below
            inverse()
        for where, positions, original in lost:
            region = written if where is None else written.reshape(-1)[where]
            region[positions] = original

    return inverse_then_put_back


def _pieceable(values, position):
    """Whether ``_pieces`` takes the write into ``values[position]`` a piece at a time: the
    target is large and contiguous, and the array operands are laid out as it."""
    target = values[position]
    return target.size > 2 * CHUNK and type(target) is np.ndarray \
        and target.flags.c_contiguous and all(
            type(v) is not np.ndarray or v.ndim == 0
            or (v.shape == target.shape and v.flags.c_contiguous) for v in values)


PIECE = 1
"""``CHUNK`` s per piece of a write ``_verify`` takes a piece at a time: its pass over a piece
is a dozen NumPy calls, whose own cost is paid per piece, on the piece's arrays (the target's
piece, the operands', the scratch: a quarter megabyte each), which stay in the second level of
cache as pieces of a megabyte do not (``products.PIECE``). The gradient of ``a = x * 1.0;
a *= y`` (the write verified as it is done), pieces of a megabyte -> a quarter of one, median
of 9 (5 at 10^7): 1.95 -> 1.82 ms at n = 10^5, 12.4 -> 11.5 ms at 10^6, 131 -> 125 ms at
10^7 (an earlier machine's, at 10^5: 223 us in one piece, 270 us in pieces of a quarter
megabyte)."""


def _pieces(values, position):
    """``(where, piece, operands)``: the target ``values[position]`` of a write and the
    operands, a piece of ``PIECE * CHUNK`` elements at a time (``where`` slices the flat
    target: ``_pieceable``), else all at once (``where`` None)."""
    if _pieceable(values, position):
        flat = [v.reshape(-1) if type(v) is np.ndarray and v.ndim else v for v in values]
        size = flat[position].size
        length = PIECE * CHUNK
        for start in range(0, size, length):
            where = slice(start, min(start + length, size))
            yield (where, flat[position][where],
                   [v[where] if type(v) is np.ndarray and v.ndim else v for v in flat])
    else:
        yield None, values[position], values


_smallest, _largest, _sum = np.minimum.reduce, np.maximum.reduce, np.add.reduce


def _normal(a):
    """Whether every element of ``a`` is a normal float (not zero, subnormal, infinite or
    NaN); may overwrite ``a`` with its magnitudes."""
    if not a.size:  # every element of nothing
        return True
    info = _FINFO.get(a.dtype)
    if info is None:
        info = _FINFO[a.dtype] = np.finfo(a.dtype)
    # by the reductions themselves, not np.min's and np.max's Python wrappers (a long write:
    # a piece at a time): the extremes, which of an array of one sign, as most pieces are,
    # are those of its magnitudes; of another, its largest magnitude (a NaN: NaN, not normal)
    low, high = _smallest(a, axis=None), _largest(a, axis=None)
    if low > 0 or high < 0:
        if high < 0:
            low, high = -high, -low
        return bool(low >= info.smallest_normal and high <= info.max)
    if not (-low <= info.max and high <= info.max):
        return False
    np.abs(a, out=a)
    return bool(_smallest(a, axis=None) >= info.smallest_normal)


_FINFO = {}
"""``np.finfo`` of each float dtype ``_normal`` has met."""


_BITS = {np.dtype(t): np.dtype(i) for t, i in ((np.float64, np.int64), (np.float32, np.int32),
                                               (np.float16, np.int16))}
"""The integer type of the bit patterns of a real float type, which ``_lost`` compares."""


def _lost(a, b, out):
    """What indexes the elements ``_far(a, b, out)`` marks, None where it marks none: their
    positions (``nonzero``'s) where they are few, else a copy of the mask (a byte per element
    at most, where a position takes eight per axis); uses the memory of ``a`` and ``out``.

    For a real ``b`` of a float type whose bit patterns are ordered, the common answers are
    found in one pass over the elements, which finds those that are not ``b`` bit for bit:
    none, or a few (a write of 10^5 elements undone by its inverse: tens), which ``_far`` then
    asks about alone; where many are, it asks about all."""
    bits = _BITS.get(a.dtype) if type(a) is np.ndarray else None
    if bits is not None and a.ndim:
        np.not_equal(a.view(bits), b.view(bits), out=out)
        differ = out.nonzero()
        count = differ[0].size
        if not count:
            return None
        if count <= out.size // FEW:
            far = _far(a[differ], b[differ], np.empty(count, bool))
            return tuple(i[far] for i in differ) if far.any() else None
    far = _far(a, b, out)
    count = np.count_nonzero(far)
    if not count:
        return None
    return far.nonzero() if far.ndim and count <= far.size // FEW else far.copy()


FEW = 16
"""``_lost`` asks ``_far`` about the elements that are not bit for bit those they were alone
where they are at most one in ``FEW`` (a dozen NumPy calls on them, each gathering its
operands, against a handful of passes over all the elements), and keeps the positions of
those lost where they are (else their mask)."""


def _far(a, b, out):
    """Into bool ``out``: where ``a`` is more than ``ULPS`` units in the last place from ``b``
    (of the other sign, a zero of the other sign included, or NaN where ``b`` is not), or is
    not ``b`` itself where ``b`` is zero or subnormal. Uses ``a``'s memory.

    Below the normal range an ulp is no longer a small relative error (5e-324 is one ulp from
    0), and a later inverse (undoing ``x *= 5e-324``) would magnify it to a wrong value of any
    size: there an element must come back bit for bit. Complex values: each part so."""
    if a.dtype.kind == "c":
        far_imaginary = _far(a.imag, b.imag, np.empty_like(out))
        return np.logical_or(_far(a.real, b.real, out), far_imaginary, out=out)
    smallest_normal = np.finfo(b.dtype).smallest_normal
    if a.dtype.itemsize in (2, 4, 8):  # the ordered bit patterns of same-signed floats
        tiny = None if _all_normal_magnitudes(b, smallest_normal) else (
            np.abs(b) < smallest_normal)
        kind = f"i{a.dtype.itemsize}"
        d = a.view(kind)
        np.subtract(d, b.view(kind), out=d)
        if tiny is not None:
            tiny &= d != 0
        np.add(d, ULPS, out=d)
        np.greater(d.view(f"u{a.dtype.itemsize}"), 2 * ULPS, out=out)
        return out if tiny is None else np.logical_or(out, tiny, out=out)
    tiny = np.abs(b) < smallest_normal
    close = np.abs(a - b) <= ULPS * np.spacing(b)
    tiny &= a != b
    return np.logical_or(~close | tiny, np.signbit(a) != np.signbit(b), out=out)


def _all_normal_magnitudes(b, smallest_normal):
    """Whether no element of real ``b`` is zero or subnormal, read from its extremes alone (two
    reductions, no temporary): every element at least the smallest normal float, or every one
    at most its negation, answers yes; elements of both signs, or a NaN among them (which the
    reductions carry and every comparison with it denies), answer no, and ``_far`` then asks
    each element. A yes is exact: every ``|b|`` is at least the smaller extreme's magnitude, so
    ``|b| < smallest_normal`` holds nowhere and the mask it would give is all False."""
    low = _smallest(b, axis=None, initial=np.inf)  # (no element: inf, and nothing is tiny)
    high = _largest(b, axis=None, initial=-np.inf)
    return bool(low >= smallest_normal or high <= -smallest_normal)


RAISED_AFTER_WRITING = (FloatingPointError, RuntimeWarning)
"""What NumPy raises after writing its result, for a floating-point error its loop met: its
FloatingPointError under ``np.errstate(...="raise")``, or its RuntimeWarning where the warning
filters make warnings errors (``warnings.simplefilter("error")``). f may catch either and go
on with what NumPy wrote."""


def raised_after_writing(error):
    """Whether ``error``, raised by a NumPy call writing its result, is raised after NumPy
    wrote it, as f may catch it and go on with what NumPy wrote: one of
    ``RAISED_AFTER_WRITING``, or what the error callback of ``np.errstate(...="call",
    call=handler)`` (or the ``write`` of a ``"log"`` one) raised, which NumPy calls exactly
    where it would raise its FloatingPointError. The error could be of any class, so the
    callback is told by its frame in the error's traceback (NumPy's loops call no other
    Python code); a callback with no Python frame of its own is refused."""
    if isinstance(error, RAISED_AFTER_WRITING):
        return True
    modes = set(np.geterr().values())
    callback = np.geterrcall()
    if callback is None or not modes & {"call", "log"}:
        return False
    codes = {_code(callback if mode == "call" else getattr(callback, "write", None))
             for mode in modes & {"call", "log"}}
    if None in codes:
        raise UnsupportedOperationError(
            f"a {type(error).__name__} from a NumPy call under np.errstate(...='call') whose "
            f"error callback ({callback!r}) is not a Python function: mutad cannot tell "
            "whether the callback raised it after NumPy wrote its result. Use a Python "
            "function as the callback.") from error
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code in codes:
            return True
        traceback = traceback.tb_next
    return False


def _code(callback):
    """The code object a call of ``callback`` runs (a function, a bound method, a
    functools.partial of one, an object whose class defines ``__call__`` in Python), or
    None."""
    while isinstance(callback, functools.partial):
        callback = callback.func
    callback = getattr(callback, "__func__", callback)
    code = getattr(callback, "__code__", None)
    if code is None and callback is not None:
        code = getattr(getattr(type(callback), "__call__", None), "__code__", None)
    return code


def raising_ignored():
    """``np.errstate``'s settings with every category ignored: to compute again what NumPy
    computed before it raised (``RAISED_AFTER_WRITING``), whose events its call has issued."""
    return {"all": "ignore"}


def written_before_raising(out, operands):
    """Whether NumPy, raising FloatingPointError under ``np.errstate(...="raise")`` in a call
    writing into ``out`` (None: none), wrote its result there first, as f may catch the error
    and go on: it did, unless ``out`` may overlap one of ``operands`` (by their bounds, as
    NumPy asks), when it computes into a copy that it drops as it raises."""
    return out is not None and not any(np.may_share_memory(memory(out), memory(v))
                                       for v in operands if type(memory(v)) is np.ndarray)


def written_in_place_before_raising(out, operands):
    """Whether NumPy's elementwise ufunc writing into ``out``, raising FloatingPointError under
    ``np.errstate(...="raise")``, surely wrote its result there first (f may catch the error
    and go on): where no operand shares memory with ``out``, or each one that does is ``out``'s
    very elements in its order (same address, shape, strides and dtype: ``x **= 0.5``,
    ``np.sqrt(x, out=x)``), which NumPy's loop reads and writes in place. Where an operand
    overlaps ``out`` otherwise, NumPy's memory layout decides whether it writes in place or
    into a copy that it drops as it raises (``np.sqrt(x[::-1], out=x)`` leaves ``x`` as it
    was; ``np.sqrt(x[1:], out=x[:-1])`` writes): False, an answer mutad does not give."""
    out = memory(out)
    if overlaps_itself(out):
        return False
    for v in operands:
        v = memory(v)
        if type(v) is not np.ndarray or not np.may_share_memory(out, v):
            continue
        if not (v.__array_interface__["data"][0] == out.__array_interface__["data"][0]
                and v.shape == out.shape and v.strides == out.strides and v.dtype == out.dtype):
            return False
    return True


def unknown_write_refused(func):
    """The error for a FloatingPointError NumPy raised in ``func`` (a ufunc, or a primitive's
    name) writing into an array that an operand overlaps in another layout
    (``written_in_place_before_raising`` says no)."""
    name = func if isinstance(func, str) else function_name(func)
    return UnsupportedOperationError(
        f"{name}(..., out=...): NumPy raised FloatingPointError (np.errstate(...='raise')) in a write into an "
        "array that an operand overlaps in another order or layout, where NumPy's memory "
        "layout decides whether the result was written before it raised, and mutad cannot "
        "tell which to differentiate. Compute into a new array (y = np.sqrt(x[::-1])) and "
        "copy it in, or let the error be a warning there (np.errstate(invalid='warn')).")
