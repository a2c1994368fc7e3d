"""The caller's side of a differentiation, the same for both modes: the bytes of the caller's
arrays, which come back as they were, and the call of the differentiated function.

A differentiation changes no array of the caller's for good. Reverse mode traces the caller's
float arrays in place and copies one the first time it is written; forward mode works on
private copies; both copy the other writable arrays reachable from the arguments (integer and
boolean ones, arrays inside objects of NumPy's and SciPy's classes) up front. ``Originals``
keeps those copies and writes them back.

:func:`run` calls the differentiated function with its differentiation running in this thread
(``levels.ACTIVE``) and the allocation mode on, and reports an error NumPy wrapped (a mutad
error raised while NumPy converted an element) as the mutad error itself.
"""

import gc
import sys
import threading

import numpy as np
from numpy.lib.array_utils import byte_bounds

from .allocation import adopted_views, apart_from_rules, mode
from .debug import ERRORS, Warnings, at_user_lines_keeping_seterr
from .errors import ArgnumsError, MutadError, UnsupportedOperationError
from .levels import ACTIVE, resume, set_aside
from .trees import arrays_within
from .views import writeable


class Originals:
    """Copies of the caller's arrays that a differentiation may change, to write back."""

    __slots__ = ("copies", "objects")

    def __init__(self):
        self.copies = []
        self.objects = []  # (an object the differentiation changed in place, its class, dict)

    def keep(self, x):
        """Copy ``x`` now, to write back at the end."""
        self.copies.append((x, x.copy()))

    def keep_within(self, x):
        """Copy every array reachable from ``x`` (an integer array, an object's arrays)."""
        self.copies.extend((a, a.copy()) for a in arrays_within(x))

    def keep_object(self, x):
        """Keep ``x``'s class and attributes now (a SciPy matrix of constants that becomes a
        matrix with traced values in place: ``mutad.scipy.sparse``), to put back at the end."""
        self.objects.append((x, type(x), dict(x.__dict__)))

    def restore(self):
        """Write the copies back, the earliest last: it holds the caller's own bytes."""
        while self.objects:
            x, cls, attributes = self.objects.pop()
            object.__dict__["__class__"].__set__(x, cls)  # (past a class property)
            x.__dict__.clear()
            x.__dict__.update(attributes)
        copies = self.copies
        while copies:
            x, original = copies.pop()
            if writeable(x):  # an enclosing differentiation may have frozen it: unchanged
                np.copyto(x, original)


def run(differentiation, f, call, explain=None, arguments=None):
    """``call(g)``, which calls ``g``: the differentiated function ``f``, or what stands in for
    it when ``f`` is a function the mode routes (``scipy.stats.norm.logpdf`` itself), with
    ``differentiation`` running in this thread and the allocation mode on. A ``ValueError`` or ``TypeError`` that
    NumPy raised around a mutad error is that mutad error; ``explain(error)`` may give a
    clearer error for another one (None: it stands). NumPy's floating-point warnings are
    issued at the user's line that ran the operation, not inside mutad (``debug.Warnings``).
    ``arguments``: what ``call`` hands ``g``, where known (``allocation.mode``)."""
    aside = set_aside()  # (started by a rule's forward pass: nested in none of its own)
    if aside is None:  # (no rule running, the common case: no block to enter, none to resume)
        return _run(differentiation, f, call, explain, arguments)
    try:
        with apart_from_rules(True):
            return _run(differentiation, f, call, explain, arguments)
    finally:
        resume(aside)


def _run(differentiation, f, call, explain, arguments):
    # this thread's lists, read once (an attribute of a thread-local is a dear read): none is
    # rebound for good while f runs (``outside_differentiations`` puts the same list back)
    running, noted = ACTIVE.running, ACTIVE.refusals
    for outer in running:  # a replay records no program with one nested inside it
        recorder = getattr(outer, "recorder", None)
        if recorder is not None:
            recorder.refuse("a differentiation nested inside the function")
    # (full collections held off by the caller: a differentiation's ``with`` block holds them
    # from its start to its end, this run included: ``no_full_collections``)
    with mode(f, arguments) as (function, holders), at_user_lines_keeping_seterr(Warnings()):
        if hasattr(differentiation, "errors"):  # (a tape: its records' handling is told apart)
            differentiation.errors = ERRORS.get()
        running.append(differentiation)
        refusals = len(noted)
        recorder = getattr(differentiation, "recorder", None)
        if recorder is not None:  # the events of plain operations before f's first step too
            recorder.watch()
        try:
            adopter = getattr(differentiation, "adopter", None)
            try:
                result = call(function)
            except BaseException:
                if adopter is not None:  # what f stored before it raised is plain too
                    adopter.settle(holders, returned=False)
                raise
            if adopter is not None:
                adopter.settle(holders)  # the caller's state as NumPy's run of f leaves it
                if adopter.adopted:  # f returns an array it wrote into
                    result = adopted_views(result)
            # (an error made, not raised, has no traceback: a refusal kept ready, say)
            # (no comprehension made where none was noted: the common case, on every call)
            raised = [e for e in noted[refusals:] if e.__traceback__ is not None] \
                if len(noted) > refusals else ()
            if raised:
                raise went_past(raised[0])
            return result
        except MutadError:
            raise
        except (ValueError, TypeError, RuntimeError) as error:
            mutad_error = unwrapped(error)
            if mutad_error is not None:
                raise mutad_error from None
            if isinstance(error, RuntimeError):
                raise
            clearer = None if explain is None else explain(error)
            if clearer is not None:
                raise clearer.with_traceback(error.__traceback__) from error  # the user's line
            raise
        finally:
            # a refusal raised out of this differentiation, into an enclosing one's function,
            # stays noted there
            escaping = sys.exc_info()[1]
            kept = [e for e in noted[refusals:] if e is escaping] \
                if len(noted) > refusals else []
            del noted[refusals:]
            running.pop()
            if running:
                noted += kept
            else:
                ACTIVE.written.clear()


def went_past(error):
    """The error for a program that caught ``error``, which refused what NumPy or SciPy would
    have computed (a conversion, an operation or function mutad does not differentiate), and
    went on: without mutad the program takes another path, so its value and derivative under
    mutad would not be NumPy's."""
    refusal = type(error)(
        "the differentiated function caught an error mutad raised and went on (an `except "
        "Exception:` or `except TypeError:` around the call, say), taking another path than "
        "it takes without mutad, where NumPy or SciPy computes what mutad refused: its value "
        "and derivative would not be NumPy's. Let the error through (catch only the errors "
        "NumPy raises), or do what it says instead. The error it caught: "
        f"{error}")
    refusal.__cause__ = error
    return refusal


_COLLECTOR = threading.Lock()


def no_full_collections():
    """Full collections of the cyclic garbage collector walk only what is new while the block
    runs. A differentiation makes an object or more per operation, and they live until it
    ends: each full collection would walk them, and every other object of the process, again
    (a fifth to a third of the time of a traced program of scalar operations with SciPy
    imported). So the first block to start moves every object out of the collector's view
    (``gc.freeze``), and so does each full collection once it has freed the garbage it found:
    the next one walks only the objects made since, and the program's cyclic garbage is freed
    as the collector frees it without a differentiation. A cycle that was alive at a freeze
    and dies later waits for the collector to walk the frozen objects again, which a full
    collection does (``gc.unfreeze`` as it starts) once four times as many objects were made
    as were frozen the last time it did: that garbage stays proportional to what lives, and
    those walks cost about one more per object made. The last block to end gives the objects
    back (``gc.unfreeze``). Process-wide, as the collector is; where the process froze objects
    of its own (``gc.freeze``), which an unfreeze would give back, the collector runs as is.

    While a block runs, the collector's youngest generation is also collected less often
    (``paced``): each of its collections costs a fixed part beyond the objects it walks (this
    block's callback among it), and a differentiation's objects live until it ends, so
    frequent ones free nothing sooner (a twentieth of a traced program of small operations).
    The middle generation is collected after as many objects made as with the process's
    thresholds, so no cycle of garbage waits longer than it may without a differentiation,
    and the same objects reach the oldest generation, whose pacing is unchanged. The last
    block to end puts the process's thresholds back, unless the program set others meanwhile
    (``gc.set_threshold``), which it keeps."""
    return _NO_FULL_COLLECTIONS


def paced(thresholds):
    """The collector's thresholds while a differentiation runs (``no_full_collections``), for
    the process's ``thresholds``: the youngest generation waits for half as many objects as
    the middle one waits for with ``thresholds``, and every other of its collections is a
    middle one (a middle threshold of 0), so the middle generation, and the oldest after it,
    are collected as often as with ``thresholds``. Kept where the process collects nothing by
    itself (a youngest threshold of 0) or the middle generation at every other collection
    already (a middle threshold of 0)."""
    young, middle, oldest = thresholds
    if not young or not middle:
        return thresholds
    # (a generation is collected when its count exceeds its threshold: the middle one after
    # middle + 1 collections of the youngest, each after young + 1 objects)
    return (young + 1) * (middle + 1) // 2 - 1, 0, oldest


class _Freezer:
    """``no_full_collections``' block (a class, not a generator: it runs twice per
    differentiation) and the collector's callback it installs (``gc.callbacks``) while a
    block runs in the process."""

    __slots__ = ("running", "frozen", "made", "walk_all", "idle", "callback", "thresholds",
                 "paced")

    def __init__(self):
        self.running = 0  # blocks running in the process
        self.frozen = 0  # objects frozen when the collector last walked them all (0: not counted)
        self.made = 0  # objects made since (collections since, times the youngest's threshold)
        self.walk_all = False  # the full collection running walks the frozen objects too
        self.idle = False  # the process froze objects of its own: the collector runs as is
        # (the callback bound once: added and removed as one object, found by identity)
        self.callback = self.collected
        self.thresholds = self.paced = None  # the process's thresholds, and those set instead

    # (the lock taken and released by its methods, not a ``with`` block, whose special
    # methods are looked up anew on each entry: this runs twice per differentiation)
    def __enter__(self):
        _COLLECTOR.acquire()
        try:
            if not self.running:
                self.idle = gc.get_freeze_count() > 0
                if not self.idle:
                    gc.freeze()
                    self.frozen = self.made = 0
                    self.walk_all = False
                    gc.callbacks.append(self.callback)
                    self.thresholds = gc.get_threshold()
                    self.paced = paced(self.thresholds)
                    gc.set_threshold(*self.paced)
            self.running += 1
        finally:
            _COLLECTOR.release()

    def __exit__(self, *exception):
        _COLLECTOR.acquire()
        try:
            self.running -= 1
            if not self.running and not self.idle:
                gc.callbacks.remove(self.callback)
                gc.unfreeze()
                if gc.get_threshold() == self.paced:  # (else the program's own, kept)
                    gc.set_threshold(*self.thresholds)
        finally:
            _COLLECTOR.release()

    def collected(self, phase, info):
        """The collector's callback: it runs as each collection starts and stops."""
        if phase == "start":
            self.made += gc.get_threshold()[0]
            if info["generation"] == 2:
                if not self.frozen:  # (the first: what the block's start froze)
                    self.frozen = gc.get_freeze_count()
                if self.made >= 4 * self.frozen:
                    gc.unfreeze()
                    self.walk_all = True
        elif info["generation"] == 2:  # (its garbage is freed: what is left lives)
            gc.freeze()
            if self.walk_all:
                self.walk_all = False
                self.frozen, self.made = gc.get_freeze_count(), 0


_NO_FULL_COLLECTIONS = _Freezer()


def unwrapped(error):
    """The mutad error behind ``error``, if NumPy or SciPy wrapped one (``raise ... from``) they
    met while converting an element (``out[0] = x`` calls ``float(x)``) or calling the user's
    function (``differential_evolution`` raises a RuntimeError from it), with ``error``'s
    traceback: it runs down to the user's line that made the call, where the wrapped error's
    own stops inside the library."""
    if isinstance(error, MutadError):
        return None
    cause = error.__cause__
    while cause is not None and not isinstance(cause, MutadError):
        cause = cause.__cause__
    return None if cause is None else cause.with_traceback(error.__traceback__)


def check_argnums(argnums, count):
    """The tuple of selected argument positions, and whether one int was given."""
    if argnums is None:
        return tuple(range(count)), False
    if type(argnums) is int and -count <= argnums < count:  # (grad's default, asked per call)
        return (argnums % count,), True
    single = isinstance(argnums, (int, np.integer)) and not isinstance(argnums, bool)
    items = (argnums,) if single else argnums
    if not isinstance(items, tuple) or not all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items):
        raise ArgnumsError(f"argnums={argnums!r}: give an int or a tuple of ints.")
    for i in items:
        if not -count <= i < count and count == 0:
            raise ArgnumsError(
                f"argnums={argnums!r}: the function was given no positional argument. argnums "
                f"selects among the positional ones: pass the differentiated argument by "
                f"position, g(x) rather than g(x=x) (as JAX requires).")
        if not -count <= i < count:
            raise ArgnumsError(
                f"argnums={argnums!r}: the function was given {count} positional argument(s), "
                f"so each position must be in {-count}..{count - 1}.")
    return tuple(int(i) % count for i in items), single


def check_distinct_memory(owners):
    """Refuse arguments whose memory overlaps though no one NumPy array owns it all (two
    ``np.frombuffer`` arrays over one ``bytearray``, ``np.ndarray(buffer=...)``): mutad
    follows memory through NumPy's ``.base`` chain, and these are two chains, so a write
    through one would not reach the other's gradient. ``owners``: the arrays at the root of
    each argument's chain, one per chain.

    NumPy's arrays are asked in the order of their lowest bytes, each only about those before
    it whose bytes reach past its lowest: apart arrays (the common case) cost a sort, not a
    question per pair (3,000 arguments: 4.5 million). Other arrays (a device library's) are
    asked about every other array. Arrays that own their memory (NumPy allocated it: the
    common case) never share it with one another, so owners that all do are not asked."""
    if len(owners) < 2 or all(type(a) is np.ndarray and a.flags.owndata for a in owners):
        return
    spans, others = [], []
    for a in owners:
        if isinstance(a, np.ndarray):
            low, high = byte_bounds(a)
            spans.append((low, high, a))
        else:
            others.append(a)
    spans.sort(key=lambda span: span[0])
    pairs = [(a, b) for i, a in enumerate(others) for b in (*others[:i], *(s[2] for s in spans))]
    reaching = []  # (high, array) of the arrays so far whose bytes may reach the next one's
    for low, high, a in spans:
        reaching = [(end, b) for end, b in reaching if end > low]
        pairs.extend((a, b) for _, b in reaching)
        reaching.append((high, a))
    for a, b in pairs:
        if np.shares_memory(a, b, max_work=100_000):
            raise UnsupportedOperationError(
                f"two arguments (of shapes {a.shape} and {b.shape}) share memory, but "
                "neither is a view of the other: their memory belongs to an object that is "
                "not a NumPy array (np.frombuffer or np.ndarray(buffer=...) twice over one "
                "buffer), so mutad cannot tell that a write through one changes the "
                "other. Make one array over the memory and pass views of it (y = x[2:]), "
                "or pass copies.")

