"""Diagnostics: the line of the user's code behind each record, NumPy's floating-point
warnings issued at that line, and the switch that finds the first NaN or infinity
(:func:`detect_anomaly`).

**Source lines.** Every record the tape appends notes where the innermost frame outside
mutad, NumPy and SciPy was (:func:`caller`): the line of the differentiated function, or of
the library it called, that ran the operation. It notes the frame's code object and
instruction offset, and works out the line number only when it is shown
(``tape.source_line``): a record pays for a short walk up the stack, nothing more (whether a
file is inside is worked out once per file name).

**Warnings.** NumPy warns about a division by zero, an overflow or an invalid value from
inside the ufunc that met it, so a warning from a traced operation, or from a pullback in the
reverse pass, would name a line of mutad. While a differentiation runs its function, and while
its reverse pass runs, NumPy's error handling is set to ``"log"`` for the categories that were
``"warn"`` (:func:`at_user_lines`, once per pass): NumPy then hands its message to a
:class:`Warnings` object, which issues it with :func:`warnings.warn_explicit` at the user's
line (in the reverse pass, the line of the record being reversed), with that module's registry,
so the user's filters and "once per location" apply as they would to NumPy's own warning.
NumPy's error handling is per thread and per context, unlike ``warnings.catch_warnings``.
Categories the user set otherwise (``"ignore"``, ``"raise"``, ``"call"``) are left as they are.
A call that ``grad(f, replay=True)`` replays runs its steps under the error handling each
had when recorded, counting the events it would have warned about; it issues the recorded
warnings again, at the recorded lines, when they are the same events (else the call is
traced, ``replay.Modes``).

**The anomaly switch.** Under :func:`detect_anomaly`, a tape made in that context carries an
:class:`Anomaly`, which checks the records that compute values as they are made (a gather
only copies) and every record as it is reversed, and raises :class:`errors.NonFiniteError` at
the first that makes a NaN or an infinity out of finite numbers. Off, it costs one attribute
check per record and one per reverse pass.
"""

import builtins
import contextlib
import contextvars
import copy
import functools
import importlib
import linecache
import os
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import numpy as np

from .errors import (ConversionError, NonFiniteError, UnsupportedOperationError,
                     function_name)
from .shadows import Buffer, Place
from .views import memory, stands_for_scalar, wrapped

__all__ = ["detect_anomaly"]

BLOCKS = "<mutad replay block>"
"""The file name of the straight-line code a replay compiles (``blocks``): mutad's own."""

_INSIDE = {}
"""File name -> whether it is a file of mutad, NumPy or SciPy."""


def _learn(filename):
    """Whether ``filename`` is a file of mutad, NumPy or SciPy (or a replay's compiled block),
    remembered. The benchmark workloads (``mutad/bench``) are code being differentiated, as a
    user's is: outside."""
    if len(_INSIDE) >= 4096:  # names made up on the fly (exec) cannot fill the memory
        _INSIDE.clear()
    inside = filename == BLOCKS
    for name in ("mutad", "numpy", "scipy"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path is not None and filename.startswith(os.path.dirname(path) + os.sep):
            inside = name != "mutad" or not filename.startswith(
                os.path.join(os.path.dirname(path), "bench") + os.sep)
    _INSIDE[filename] = inside
    return inside


SKIPPED = 4
"""The frames :func:`caller` skips without looking: its own, ``ReverseTape.record``'s, the
engine function's that made the record, and the one that called that (the engine's functions
that make records are internal: user code never calls them). Looking at a frame makes Python
build a frame object for it, which costs more than the rest of the walk, and the engine's
frames live for one operation: building them is most of the cost of a record's line. A record
made by a function that only the engine's internal functions call (``apply_ufunc``, never an
entry point) may skip one more."""


def caller(skip=SKIPPED, lines=None):
    """``(code, offset)`` of the innermost frame outside mutad, NumPy and SciPy, as a record's
    ``where`` (``tape.source_line`` gives its line), for ``ReverseTape.record``, skipping
    ``skip`` frames (``SKIPPED``); None if there is none. ``lines``: a dict in which each
    ``where`` found is kept, so that the records of one line share one tuple (a loop's)."""
    try:
        frame = sys._getframe(skip)
    except ValueError:  # a stack that shallow has no frame of the user's
        return None
    inside = _INSIDE
    while frame is not None:
        code = frame.f_code
        try:  # (a subscript, not ``dict.get``: the interpreter's specialised lookup; misses once)
            known = inside[code.co_filename]
        except KeyError:
            known = _learn(code.co_filename)
        if not known:
            offset = frame.f_lasti  # (the line number costs a search: worked out if shown)
            if lines is None:
                return code, offset
            # Keyed by the offset alone first, the last ``where`` found at it kept there: a
            # loop's records come from few lines, so it is mostly the answer, told by the
            # identity of its code (which the tuple keeps alive: no other code object can take
            # its place in memory), without a tuple and an id made for the key. Else keyed by
            # the code's id, which the tuple kept keeps from being reused: hashing a code object
            # hashes its constants and names, every time.
            where = lines.get(offset)
            if where is None or where[0] is not code:
                key = (id(code), offset)
                where = lines.get(key)
                if where is None:
                    where = lines[key] = (code, offset)
                lines[offset] = where
            return where
        frame = frame.f_back
    return None


def nowhere(skip=SKIPPED, lines=None):
    """:func:`caller` for a tape whose records need no line: a replay's, whose steps have
    none to give (walking up from one finds the call of the replayed function, at a cost)."""
    return None


def source(line):
    """The text of ``line`` (``(filename, lineno)``), stripped; '' if unknown."""
    if line is None:
        return ""
    return linecache.getline(line[0], line[1]).strip()


def location(line, short=False):
    """``line`` (``(filename, lineno)``) as ``file:line`` (``short``: the file's base name), or
    a word for None."""
    if line is None:
        return "(no line of the differentiated code)"
    filename = line[0]
    if short:
        if filename.startswith("<"):  # <doctest mutad.api.make_tape[1]>, <stdin>
            filename = filename.split(" ", 1)[0].rstrip(">") + ">"
        else:
            filename = os.path.basename(filename)
    return f"{filename}:{line[1]}"


# ----------------------------------------------------------------------------------------------
# NumPy's warnings at the user's line


_GLOBALS = {}
"""File name -> the globals of the module loaded from it (None: none), for a warning's module
name and registry."""

_REGISTRIES = {}
"""The warnings registries of files no module was loaded from (a doctest, ``exec``)."""


def _globals_of(filename):
    if filename not in _GLOBALS:
        found = None
        for module in list(sys.modules.values()):
            if getattr(module, "__file__", None) == filename:
                found = vars(module)
                break
        _GLOBALS[filename] = found
    return _GLOBALS[filename]


def warn_at(message, category, filename, lineno, module_globals=None):
    """Issue a warning at ``filename:lineno`` as :func:`warnings.warn` would from a frame of
    that line: with its module's name and ``__warningregistry__``, so the user's filters and
    the "default" action (once per location) apply."""
    if module_globals is None and not filename.startswith(_PACKAGE):
        # (mutad's own lines: a registry apart from their modules', which Python consults
        # before its filters, so that a replay, catching every warning its steps issue
        # there, catches one this showed once: ``replay.Capture``)
        module_globals = _globals_of(filename)
    if module_globals is None:
        # A module name as warnings.warn would make it (warn_explicit drops a warning whose
        # module is None).
        registry, module = _REGISTRIES.setdefault(filename, {}), filename.removesuffix(".py")
    else:
        registry = module_globals.setdefault("__warningregistry__", {})
        module = module_globals.get("__name__", "<string>")
    # No module_globals: warn_explicit would ask the module's loader for its source, which
    # fails for code that is not a file (python -c, exec) and is not needed for a file.
    warnings.warn_explicit(message, category, filename, lineno, module, registry)


_FROM_LINE = {}
"""``(filename, lineno)`` -> the code of a one-line function at that line that calls what it
is given (:func:`from_user_line`)."""

FROM_USER_LINE = "<call from the differentiated line>"
"""The name of those functions' code, whose frames tracebacks leave out (:func:`_ours`)."""


# Python's warnings are the process's (``warnings.filters``, ``warnings._showwarnmsg``), which
# what mutad does in one thread must not take from another's. Each thread's handlers of the
# warnings Python shows are its own (``show_to``), one hook routing to them, installed while
# any thread has one; the filters a ``Capture`` swaps are given back by the last to stop.


class _Handlers(threading.local):
    def __init__(self):
        self.stack = []  # this thread's handlers of the warnings Python shows, innermost last
        self.captures = 0  # how many Captures are on in this thread


_THREAD = _Handlers()
_LOCK = threading.Lock()
_OUTSIDE = [0, None]
"""How many handlers are on (``show_to``), in all threads, and ``warnings._showwarnmsg`` as
it was when the first of them came on (the user's, as a rule Python's own)."""


def _shown(message):
    """``warnings._showwarnmsg`` while a handler is on: the message to this thread's innermost
    handler, or where Python would show it in a thread that has none."""
    stack = _THREAD.stack
    (stack[-1] if stack else _OUTSIDE[1])(message)


def show_to(handler):
    """The warnings Python shows in this thread (its filters neither ignore nor raise them, C
    code's too) go to ``handler`` (called with a ``warnings.WarningMessage``) until
    ``unshow(handler)``."""
    with _LOCK:
        _show_to(handler)


def _show_to(handler):
    """``show_to``, the lock held."""
    if not _OUTSIDE[0] and warnings._showwarnmsg is not _shown:
        _OUTSIDE[1] = warnings._showwarnmsg
        warnings._showwarnmsg = _shown
    _OUTSIDE[0] += 1
    _THREAD.stack.append(handler)


def unshow(handler):
    with _LOCK:
        _unshow(handler)


def _unshow(handler):
    """``unshow``, the lock held."""
    stack = _THREAD.stack
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is handler:
            del stack[i]
            break
    else:
        return
    _OUTSIDE[0] -= 1
    if not _OUTSIDE[0] and warnings._showwarnmsg is _shown:  # (not where another
        warnings._showwarnmsg = _OUTSIDE[1]  # replaced it since; _OUTSIDE[1] is kept for
        # a thread that looked the hook up before, and calls it after)


def show_below(handler, message):
    """Show ``message`` as it would be shown without ``handler``: to the handler under it in
    this thread, or where Python would show it."""
    stack = _THREAD.stack
    for i in range(len(stack) - 1, 0, -1):
        if stack[i] is handler:
            return stack[i - 1](message)
    return _OUTSIDE[1](message)


class Capture:
    """While it is on, every warning this thread issues is kept (``issued``,
    ``warnings.WarningMessage``s) rather than shown, whatever Python's filters would do with
    it: each filter's action becomes "always" in this thread, but "error", which raises where
    NumPy raises; other threads' warnings meet the caller's filters as they are (``_capturing``).
    The filters are swapped as a list, not changed through ``warnings.simplefilter``
    (``catch_warnings``), which would make Python forget the warnings its "default" action
    already showed once. Python consults a location's registry before its filters: one issued
    at the user's line (:func:`from_user_line`) is issued with a registry of its own, which
    nothing keys. ``filters``: those in force without it, the caller's.

    The filters are the process's: the first Capture on swaps them, one nested in it in the
    same thread swaps them again and gives back what it found, one in another thread takes
    those on as they are, and the last to stop gives back the first's."""

    __slots__ = ("filters", "show", "issued", "swapped", "made", "stack")

    # (A replay starts and stops one on every call: this thread's state, a ``threading.local``
    # whose every attribute read looks the thread up, is read once per read needed, its
    # handlers' stack kept; ``_show_to`` and ``_unshow`` are written out, under the one lock.)
    def __init__(self):
        self.issued = []
        self.show = show = self.issued.append
        thread = _THREAD
        self.stack = stack = thread.stack  # (started and stopped in one thread)
        with _LOCK:
            captures = thread.captures
            self.swapped = captures or not _CAPTURES[0]
            if self.swapped:
                self.filters = warnings.filters
                if not _CAPTURES[0]:
                    _CAPTURES[1] = self.filters
                self.made = _capturing(self.filters)
                warnings.filters = list(self.made)  # (a list of its own, which code may change)
            else:  # (another thread's are on)
                self.filters = _CAPTURES[1]
                self.made = None
            _CAPTURES[0] += 1
            thread.captures = captures + 1
            if not _OUTSIDE[0] and warnings._showwarnmsg is not _shown:  # (``_show_to``)
                _OUTSIDE[1] = warnings._showwarnmsg
                warnings._showwarnmsg = _shown
            _OUTSIDE[0] += 1
            stack.append(show)

    def stop(self):
        show, stack = self.show, self.stack
        with _LOCK:
            if stack and stack[-1] is show:  # (the innermost, as a rule: ``_unshow``)
                del stack[-1]
                _OUTSIDE[0] -= 1
                if not _OUTSIDE[0] and warnings._showwarnmsg is _shown:
                    warnings._showwarnmsg = _OUTSIDE[1]
            else:
                _unshow(show)
            _CAPTURES[0] -= 1
            thread = _THREAD
            captures = thread.captures = thread.captures - 1
            if not _CAPTURES[0]:
                found = _CAPTURES[1]
                warnings.filters, _CAPTURES[1] = self._given_back(found), None
            elif self.swapped and captures:
                warnings.filters = self._given_back(self.filters, capturing=True)
        return self.issued

    def _given_back(self, found, capturing=False):
        """``_given_back(found)``, at once where the filters are those this Capture put on
        (no filter added since: the common case, told without reading each filter)."""
        if found is self.filters and self.made is not None and warnings.filters == self.made:
            return found
        return _given_back(found, capturing)


def _capturing(filters):
    """``filters`` as a ``Capture`` has them (a list kept for them: copy it before changing
    it): in a thread with one on, each
    action but "error" is "always"; in any other, each is the caller's, matched as Python
    matches it (the filters are the process's, and such a thread's warnings are the user's
    own). Each filter but an "error" one is preceded by its copy whose action is "always"
    and whose message pattern matches only in a capturing thread (``_WhileCapturing``)."""
    key = tuple(filters)
    last = _LAST_CAPTURING
    if key == last[0]:  # (the filters of the last call, as a rule: their own tuples, which
        return last[1]  # compare by identity, where hashing a key reads each filter)
    made = _CAPTURING.get(key)
    if made is None:
        if len(_CAPTURING) >= 256:
            _CAPTURING.clear()
        made = []
        for action, text, *rest in _users(key):  # (those of a Capture on in this thread too)
            if action != "error":
                made.append(("always", _WhileCapturing(text), *rest))
            made.append((action, text, *rest))
        made.append(_ALWAYS_WHILE_CAPTURING)
        _CAPTURING[key] = made
    last[:] = key, made
    return made


def _given_back(found, capturing=False):
    """The filters a ``Capture`` gives back as it stops, ``found`` those it found: ``found``
    itself, unless a filter was added meanwhile (another thread's
    ``warnings.filterwarnings``), which stays: those in force then, less the copies
    ``_capturing`` made, as a Capture still on (``capturing``) has them."""
    kept = _users(warnings.filters)
    if kept == _users(found):
        return found
    return list(_capturing(kept)) if capturing else kept


def _users(filters):
    """``filters`` less the copies ``_capturing`` made: the user's own."""
    return [entry for entry in filters if type(entry[1]) is not _WhileCapturing]


class _WhileCapturing:
    """A warnings filter's message pattern (a regular expression, a text, or None for every
    message) that matches only in a thread with a ``Capture`` on: Python calls its ``match``,
    as it calls a regular expression's."""

    __slots__ = ("pattern",)

    def __init__(self, pattern):
        self.pattern = pattern

    def match(self, text):
        if not _THREAD.captures:
            return False
        pattern = self.pattern
        return pattern is None or (pattern == text if type(pattern) is str  # (as Python
                                   else pattern.match(text))  # matches a text: whole)

    def __repr__(self):
        return f"<while mutad captures: {self.pattern!r}>"


_ALWAYS_WHILE_CAPTURING = ("always", _WhileCapturing(None), Warning, None, 0)
"""The last of the filters a ``Capture`` has: its thread's warnings no other filter matches."""


_CAPTURING = {}
"""``_capturing``'s answer for each list of filters it was given (as a tuple)."""

_LAST_CAPTURING = [None, None]
"""The last filters ``_capturing`` was given (as a tuple) and its answer."""


_CAPTURES = [0, None]
"""How many ``Capture``s are on, in all threads, and the filters as the first found them."""

_UNREGISTERED = {}
"""Per module name, the globals :func:`from_user_line` gives its frame while a ``Capture`` is
on: the name, and a warnings registry of their own."""


def from_user_line(function, *args, **kwargs):
    """``function(*args, **kwargs)``, one of NumPy's, called from a frame at the user's line
    (the innermost outside mutad, NumPy and SciPy): a warning NumPy issues with a
    ``stacklevel`` that names its caller (np.nanmean's "Mean of empty slice", a cast's
    ComplexWarning) names that line, with that module's name and registry, as NumPy's own
    call would, where a rule's call would name the rule. The frame is a function of the
    module's globals whose code says it is at that line; no warnings filter is touched."""
    frame = sys._getframe(1)
    inside = _INSIDE
    while frame is not None:
        filename = frame.f_code.co_filename
        known = inside.get(filename)
        if not (_learn(filename) if known is None else known):
            break
        frame = frame.f_back
    return _called_at(frame, function, args, kwargs)


def from_callers_line(function, args, kwargs):
    """``function(*args, **kwargs)``, one of SciPy's that mutad calls for its caller (a
    stand-in's, a rule's), called from a frame at that caller's line (the innermost outside
    mutad: the user's, or SciPy's own code calling a SciPy function mutad stands in for): a
    warning SciPy issues with a ``stacklevel`` that names its caller (spearmanr's
    ConstantInputWarning) names that line, as SciPy's own call would, not mutad's."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE)
                                 and not frame.f_code.co_filename.startswith(_TOOLS)
                                 or frame.f_code.co_filename == BLOCKS
                                 or frame.f_code.co_name == FROM_USER_LINE):
        frame = frame.f_back
    return _called_at(frame, function, args, kwargs)


def _called_at(frame, function, args, kwargs):
    """``function(*args, **kwargs)`` called from a frame at ``frame``'s line (none: from
    here)."""
    if frame is None:
        return function(*args, **kwargs)
    key = (frame.f_code.co_filename, frame.f_lineno)
    code = _FROM_LINE.get(key)
    if code is None:
        if len(_FROM_LINE) >= 4096:  # lines made up on the fly (exec) cannot fill the memory
            _FROM_LINE.clear()
        made = compile("\n" * (key[1] - 1) + "def call(function, args, kwargs): "
                       "return function(*args, **kwargs)", key[0], "exec")
        code = _FROM_LINE[key] = next(
            c for c in made.co_consts if isinstance(c, types.CodeType)).replace(
                co_name=FROM_USER_LINE, co_qualname=FROM_USER_LINE)
    scope = frame.f_globals
    if _CAPTURES[0]:
        name = scope.get("__name__")
        scope = _UNREGISTERED.get(name)
        if scope is None:
            scope = _UNREGISTERED[name] = {"__name__": name, "__builtins__": builtins}
    return types.FunctionType(code, scope)(function, args, kwargs)


# ----------------------------------------------------------------------------------------------
# Tracebacks that end at the user's lines


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # mutad/
_TOOLS = _PACKAGE + "bench" + os.sep  # the benchmark workloads are code being differentiated
HIDDEN_NOTE = ("(mutad's own frames are left out of this traceback; set the environment "
               "variable MUTAD_TRACEBACKS=full to see them)")


def _ours(entry):
    code = entry.tb_frame.f_code
    name = code.co_filename
    return (name.startswith(_PACKAGE) and not name.startswith(_TOOLS)
            or code.co_name == FROM_USER_LINE)


def without_our_frames(traceback):
    """``traceback`` without the frames of mutad's own code: those of the user's code, and of
    the libraries it called (NumPy's, SciPy's), stay in their order."""
    kept = []
    while traceback is not None:
        if not _ours(traceback):
            kept.append(traceback)
        traceback = traceback.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


_P = ParamSpec("_P")
_R = TypeVar("_R")


def user_frames(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` (a public entry point) raising with a traceback that ends at the user's
    lines, as JAX's do: mutad's own frames are left out, and a note says how to see them
    (``MUTAD_TRACEBACKS=full``)."""

    @functools.wraps(function)
    def calling(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except Exception as caught:
            error = _compiled_code_refusal(caught)
            if os.environ.get("MUTAD_TRACEBACKS", "").strip().lower() == "full":
                raise error  # noqa: B904  (the cause set: the TypeError, or the error's own)
            if HIDDEN_NOTE not in getattr(error, "__notes__", ()) and hasattr(error, "add_note"):
                error.add_note(HIDDEN_NOTE)
            raise error.with_traceback(without_our_frames(error.__traceback__))  # noqa: B904

    return calling


class _Refusals(threading.local):
    last = None


REFUSALS = _Refusals()
"""``REFUSALS.last``: ``(id(frame), code, lasti, error)`` of the latest conversion of a traced
value that mutad refused (``remember_refusal``), for compiled code that replaces the error with
its own (``struct.pack("d", x[0])``'s "required argument is not a float"). Neither the frame nor
the error raised is held (their locals, the traceback's frames: the user's arrays), only what
tells the frame while it runs, and a copy of the error made before it was raised."""


def remember_refusal(error, frame):
    """``error`` (a conversion of a traced value refused), remembered with the user's call that
    asked for it (``frame`` and its instruction), and returned for raising."""
    if frame is not None:
        REFUSALS.last = (id(frame), frame.f_code, frame.f_lasti, copy.copy(error))
    return error


def _swallowed_refusal(error):
    """The conversion refusal ``error`` stands for, where compiled code replaced it with its
    own error (``struct.pack``, whose error has no context): the refusal was raised inside the
    very call ``error`` came out of (the same frame, at the same instruction). Else None."""
    last, REFUSALS.last = REFUSALS.last, None
    if last is None or isinstance(error, ConversionError) or error.__context__ is not None:
        return None
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    frame, code, lasti, refusal = last
    if traceback is None or id(traceback.tb_frame) != frame \
            or traceback.tb_frame.f_code is not code or traceback.tb_lasti != lasti:
        return None
    refusal.__cause__ = error
    return refusal.with_traceback(error.__traceback__)


DECIMAL_FIX = (
    "decimal.Decimal() and fractions.Fraction() take Python's own numbers only, and a traced "
    "value stands for one: the exact decimal or fraction of its value would cut its gradient. "
    "Keep computing with the value itself, or convert mutad.stop_gradient(x) where no "
    "gradient should flow.")


def _compiled_code_refusal(error):
    """``error``, or, for the TypeError of compiled code handed a traced array, which takes
    plain arrays only ("argument 1 must be numpy.ndarray, not Traced": a method of an
    extension object, a SciPy routine in C), the ConversionError that says what to do
    instead (the TypeError its cause)."""
    from .devices import traced_refused
    from .levels import WRAPPERS
    refusal = traced_refused(error)  # a device library's words for the same refusal
    if refusal is None:
        refusal = _swallowed_refusal(error)
    if refusal is not None:
        return refusal
    text = str(error)
    if type(error) is TypeError and any(  # decimal.Decimal(x[0])
            re.fullmatch(f"conversion from {kind.__name__} to Decimal is not supported", text)
            for kind in WRAPPERS):
        refusal = ConversionError(f"a traced value was handed to decimal.Decimal() ({error}). "
                                  + DECIMAL_FIX)
        refusal.__cause__ = error
        return refusal.with_traceback(error.__traceback__)
    ufunc = re.fullmatch(r"operand '(\w+)' does not support ufuncs \(__array_ufunc__=None\)",
                         text)
    if type(error) is TypeError and ufunc and ufunc.group(1) in {k.__name__ for k in WRAPPERS}:
        refusal = UnsupportedOperationError(  # np.sqrt(A) of a traced sparse matrix
            f"a NumPy ufunc of a traced value that takes no part in NumPy's ufunc protocol "
            f"({error}): the np.matrix SciPy gives of a sparse matrix (A.todense(), "
            "A.sum(axis=0)), or a sparse matrix among other operands. Of a sparse matrix call "
            "its method, which mutad follows: A.sqrt(), A.sin(), A.expm1(), A.log1p(), abs(A), "
            "-A, A.power(k), A.multiply(B); of an np.matrix m, apply the ufunc to m.A.")
        refusal.__cause__ = error
        return refusal.with_traceback(error.__traceback__)
    if type(error) is not TypeError or not any(
            f"not {kind.__name__}" in text or f"not '{kind.__name__}'" in text
            or f"a '{kind.__name__}' object" in text
            for kind in WRAPPERS):
        return error
    unbound = re.match(r"descriptor '(\w+)' for 'numpy\.ndarray' objects", text)
    if unbound:  # np.ndarray.sum(x): NumPy's own method, taken from the class
        name = unbound.group(1)
        refusal = ConversionError(
            f"np.ndarray.{name}(x), ndarray's method taken from the class, was handed a traced "
            f"array ({error}): it takes NumPy's own arrays only. Call the method on the array, "
            f"x.{name}(...), which mutad follows, or the function np.{name}(x, ...) where NumPy "
            "has one.")
        refusal.__cause__ = error
        return refusal.with_traceback(error.__traceback__)
    if text.startswith("memoryview:"):
        refusal = ConversionError(
            f"memoryview(x) of an array mutad follows ({error}): a traced array hands out no "
            "buffer of its memory, since what is read or written through one has no derivative "
            "mutad could see. Compute with the array itself (np.asarray(x) is x, x.copy() a "
            "copy, x.view() a view), and take memoryview(mutad.stop_gradient(x)) where bytes "
            "no gradient flows through are needed; an array made in the function for such "
            "code is NumPy's own where it is made inside a `with mutad.plain_allocation():` "
            "block.")
        refusal.__cause__ = error
        return refusal.with_traceback(error.__traceback__)
    refusal = ConversionError(
        f"a traced array was handed to compiled code that takes plain NumPy arrays only "
        f"({error}), which mutad cannot follow: a routine without a rule in mutad, or the method "
        "of an object made outside the function that mutad does not reach (an object the "
        "function reads through another object's attribute). Make that object inside the "
        "function or name it there (a global, a closure), give the routine a rule "
        "(mutad.adjoint, docs/guide.md 'Custom rules'), or take mutad.stop_gradient(x) where no "
        "gradient should flow; an array made in the function for such code (memoryview(w), a "
        "buffer a routine fills) is NumPy's own where it is made inside a `with "
        "mutad.plain_allocation():` block.")
    refusal.__cause__ = error
    return refusal.with_traceback(error.__traceback__)


class _Holding(threading.local):
    level = None


HOLDING = _Holding()
"""``HOLDING.level``: the level of forward mode whose tangent is being computed inside ``f``,
while one is (``forward.tangent_errors``); else None."""

HELD: dict[int, list] = {}
"""``level -> events``: NumPy's floating-point events of the tangents of a level of forward mode
computed inside ``f``, to be issued once ``f`` has returned (``issue_held``), as a reverse
pass issues its gradient's: issued inside ``f``, they are events NumPy's own call does not
have, which ``f`` may act on (``except FloatingPointError`` under ``np.errstate(all="raise")``,
a warning turned into an error or recorded by ``warnings.catch_warnings``). An event is
``(message, filename, lineno, module_globals)`` for a warning, ``(message,)`` for an error."""


def issue_held(level, issue=True):
    """Issue the events held for ``level`` (``HELD``) in their order, an error raised as a
    ``FloatingPointError``, one of a category set to "call" or "log" handed to its callback; with
    ``issue=False`` (``f`` raised), drop them."""
    events = HELD.pop(level, None)
    for event in events if issue and events else ():
        if len(event) == 1:
            raise FloatingPointError(f"{event[0]}, in a tangent")
        if len(event) == 2:  # a category set to "call" or "log": its callback or log
            event[1](event[0])
            continue
        # labelled, as a gradient's are: the derivative's, beside NumPy's own (issued in f)
        warn_at(f"{event[0]}, in a tangent", RuntimeWarning, *event[1:])


class Warnings:
    """Where NumPy writes its floating-point warnings (error handling ``"log"``), to issue them
    at the user's line: the innermost frame outside mutad, NumPy and SciPy, up to ``stop`` (the
    code of the replay loop, in the reverse pass); from there on, the line of ``record``, the
    record being reversed."""

    __slots__ = ("stop", "record", "heard", "muted", "filters", "replaced", "unanswered")

    def __init__(self, stop=None):
        self.stop = stop
        self.replaced = None  # the callback (``np.seterrcall``) it stands in for: the user's,
        # which f sees and which its categories set to "call" call (``__call__``)
        self.unanswered = frozenset()  # the categories set to "call" with no callback: logged
        # to this writer, which raises NumPy's NameError at their events (``write``)
        self.record = None
        self.heard = None  # while a replay records: a list, of (message, file, line) issued
        self.muted = False  # while the engines compute a value whose events NumPy's are not
        # (``without_events``)
        self.filters = warnings.filters  # Python's warnings filters when it was made

    def __call__(self, kind, flag):
        return self.replaced(kind, flag)

    def write(self, text):
        if self.muted and HOLDING.level is None:  # (a tangent's events are its own)
            return
        message = text.removeprefix("Warning: ").rstrip("\n")  # as NumPy words its warning
        if self.unanswered:
            kind, _, ufunc = message.partition(" encountered in ")
            if CATEGORIES[kind] in self.unanswered:  # (NumPy's words for a "call" without one)
                raise NameError(f"python callback specified for {kind} (in  {ufunc}) but no "
                                "function found.")
        frame, called, operator, read = sys._getframe(1), None, None, False
        while frame is not None and frame.f_code is not self.stop:
            code = frame.f_code
            read = read or code in READ_PULLBACKS
            if code in SCALAR_PASSING and HOLDING.level is None:  # the user's operator, passed
                # on to the reflected one it calls
                message = _as_scalar_math(message, called)
            if operator is None and code in SCALAR_OPERATORS:
                operator = frame  # (an operator NumPy's or SciPy's code ran, np.average's
                # ``sum / scale`` of two NumPy scalars: scalar math too)
            known = _INSIDE.get(code.co_filename)
            if not (_learn(code.co_filename) if known is None else known):
                if HOLDING.level is None:
                    message = _as_scalar_math(message, operator or called)
                if self.heard is not None:
                    self.heard.append((message, code.co_filename, frame.f_lineno))
                if HOLDING.level is not None:  # a tangent's, inside f: issued once f returns
                    HELD.setdefault(HOLDING.level, []).append(
                        (message, code.co_filename, frame.f_lineno, frame.f_globals))
                    return
                warn_at(message, RuntimeWarning, code.co_filename, frame.f_lineno,
                        frame.f_globals)
                return
            frame, called = frame.f_back, frame
        line = None if self.record is None else self.record.line
        if line is not None:  # in a pullback: say so, NumPy names the ufunc inside it
            message += in_the_gradient(self.record, read)
            if self.heard is not None:
                # (one the rule's own filters silence, heard but not issued: no line)
                self.heard.append((message, *line) if not silenced(self.filters, message, *line)
                                  else (message, None, None))
            warn_at(message, RuntimeWarning, *line)
        else:
            if self.heard is not None:
                caller = sys._getframe(1)
                self.heard.append((message, caller.f_code.co_filename, caller.f_lineno))
            warnings.warn(message, RuntimeWarning, stacklevel=2)  # where NumPy would


CATEGORIES = {"divide by zero": "divide", "overflow": "over", "underflow": "under",
              "invalid value": "invalid"}
"""NumPy's error handling categories, by the words of its messages."""

_FLAGS = {"divide": 1, "over": 2, "under": 4, "invalid": 8}
"""The flag NumPy hands an error callback for each category (``np.errstate(...="call")``)."""


def handed_on(mode, callback):
    """How an event of a category set to ``mode`` ("call" or "log") is handed to ``callback``
    (``np.seterrcall``'s), as NumPy hands it: a function of NumPy's message."""
    if mode == "log":
        return lambda message: callback.write(f"Warning: {message}\n")

    def call(message):
        words = message.partition(" encountered")[0]
        callback(words, _FLAGS[CATEGORIES[words]])
    return call


def silenced(ambient, message, filename, lineno):
    """Whether the warnings filters set since ``ambient`` (the filters in force when a reverse
    pass began: those of a rule's own ``warnings.catch_warnings()`` around what it computes)
    ignore a RuntimeWarning ``message`` at ``filename:lineno``: a replay, which issues the
    reverse pass's warnings once it is over, outside those filters, issues it no more than
    the traced call did. The caller's filters, in force on every call, are left to act then."""
    current = warnings.filters
    if current is ambient:
        return False
    added = len(current) - len(ambient)
    own = current[:added] if added >= 0 and current[added:] == ambient else current
    module = filename.removesuffix(".py")
    for action, text, category, within, line in own:
        if (text is None or text.match(message)) and issubclass(RuntimeWarning, category) \
                and (within is None or within.match(module)) and line in (0, lineno):
            return action == "ignore"
    return False


def without_events(compute, *args):
    """``compute(*args)`` without the floating-point events of the NumPy loops it runs, for a
    value whose events are not NumPy's (Python's arithmetic and ``math`` on its floats raise
    none): those warned about are not written (``Warnings.muted``: the handling in force
    stays, which a replay records, and a replay hearing them is traced), and where one
    raised, it is computed again ignoring them."""
    writer = np.geterrcall()
    if type(writer) is not Warnings:
        with np.errstate(all="ignore"):
            return compute(*args)
    muted, writer.muted = writer.muted, True
    try:
        try:
            return compute(*args)
        except FloatingPointError:
            with np.errstate(all="ignore"):
                return compute(*args)
    finally:
        writer.muted = muted


def in_the_gradient(record, read=False):
    """What a message of NumPy's about a floating-point event in the pullback of ``record``
    adds, to say it is the derivative's, beside NumPy's own (issued by ``f``). ``read``: the
    event came from a read's pullback run in ``record``'s (``READ_PULLBACKS``)."""
    return f", in the gradient of {'x[key]' if read else operation_name(record.primitive)}"


READ_PULLBACKS: set[types.CodeType] = set()
"""The code of the function that adds a read's cotangent into what it read (``x[i]``), which
runs in the pullback of a record the read was folded into (a scalar loop's ``x[i - 1] *
x[i]``: ``elementwise.fold_reads``) as in the read's own: its events are the read's, named
as a replay, which keeps the read a step of its own, names them, and as the record would be
had the read not been folded."""


class gradient_errors:
    """Around a reverse pass whose warnings go to ``writer`` (a :class:`Warnings`): the
    ``FloatingPointError`` NumPy raises (``np.errstate``'s "raise") in the pullback of
    ``writer.record`` labelled as its warnings are (``in_the_gradient``), as forward mode
    labels a tangent's ("in a tangent"); any other error (``NonFiniteError`` of
    ``detect_anomaly``, one labelled already) as it is. (A class, not a generator: cheaper to
    enter and leave, once per reverse pass.)"""

    __slots__ = ("writer",)

    def __init__(self, writer):
        self.writer = writer

    def __enter__(self):
        return None

    def __exit__(self, kind, error, traceback):
        if kind is not FloatingPointError:  # (a subclass, or another error: as it is)
            return False
        message = str(error)
        record = self.writer.record
        if record is None or any(label in message
                                 for label in (", in the gradient of ", ", in a tangent")):
            return False
        read, tb = False, traceback
        while tb is not None and not read:
            read, tb = tb.tb_frame.f_code in READ_PULLBACKS, tb.tb_next
        raise FloatingPointError(message + in_the_gradient(record, read)).with_traceback(
            traceback) from None


SCALAR_OPERATORS: set[types.CodeType] = set()
"""The code of the functions that are Python's operators of traced and dual values (``a / b``:
``arraylike.install_operators``), which the user's line calls. NumPy computes an operator on
scalars (``x[0] / 0.0``) by its scalar math, which words its events so ("divide by zero
encountered in scalar divide"), where the ufunc the engines compute with says "in divide"."""


SCALAR_NAMES: dict[str, str] = {}
"""The ufuncs an operator computes with in NumPy's place, by the operator's ufunc, whose name
NumPy's scalar math gives their events: ``x[0] ** 2`` is ``np.square`` (NumPy's fast path for
arrays), and NumPy's scalar math says "overflow encountered in scalar power"."""


SCALAR_PASSING: set[types.CodeType] = set()
"""The code of the engines' function that passes the operator of NumPy's scalar on the left
of a traced or dual value, which NumPy hands their ``__array_ufunc__``, to the value's
reflected operator (``np.float64(1.0) / v``: ``arraylike.numpys_scalar_operator``)."""


def _as_scalar_math(message, called):
    """``message``, of an event below the frame ``called`` (of what the user's line called),
    as NumPy's scalar math words it where ``called`` is an operator."""
    if called is None or called.f_code not in SCALAR_OPERATORS:
        return message
    operands = called.f_locals
    return as_scalar_math(message, operands.get("self"), operands.get("other"))


def as_scalar_math(message, x, other):
    """``message``, of a floating-point event of the operator ``x op other``, as NumPy's
    scalar math words it where both stand for scalars (NumPy's or Python's numbers)."""
    if not (wrapped(x) and stands_for_scalar(x)) or not (
            type(other) in (bool, int, float, complex) or isinstance(other, np.generic)
            or wrapped(other) and stands_for_scalar(other)) \
            or _promotes(x, other) or _promotes(other, x):
        return message
    event, found, name = message.partition(" encountered in ")
    return f"{event} encountered in scalar {SCALAR_NAMES.get(name, name)}" \
        if found and not name.startswith("scalar ") else message


_KIND_RANKS = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def _promotes(number, scalar):
    """Whether ``number``, a Python number (or a value standing for one), is of a higher kind
    than NumPy's scalar ``scalar`` (or a value standing for one): NumPy's scalar math leaves
    the operation to the ufunc, whose words its events have (``np.float64(0.0) * (inf+0j)``:
    "invalid value encountered in multiply")."""
    if type(number) in (bool, int, float, complex):
        kind = np.asarray(number).dtype.kind
    elif wrapped(number) and getattr(number, "weak", False) is True:
        kind = memory(number).dtype.kind
    else:
        return False
    if isinstance(scalar, np.generic):
        strong = scalar.dtype.kind
    elif wrapped(scalar) and getattr(scalar, "weak", False) is not True:
        strong = memory(scalar).dtype.kind
    else:
        return False
    return _KIND_RANKS.get(kind, 0) > _KIND_RANKS.get(strong, 3)


def scalar_math_error(error, x, other):
    """The FloatingPointError ``error`` an operator ``x op other`` raised (``np.errstate``'s
    "raise"), as NumPy's scalar math words it (``as_scalar_math``)."""
    message = str(error)
    worded = as_scalar_math(message, x, other)
    if worded == message:
        return error
    return FloatingPointError(worded).with_traceback(error.__traceback__)


ERRORS = importlib.import_module("numpy._core._multiarray_umath")._extobj_contextvar
"""NumPy's floating-point error handling in force (what ``np.errstate`` sets): one object per
handling set, compared by identity."""


@contextlib.contextmanager
def errors_as(errors, writer):
    """NumPy's floating-point error handling ``errors`` (an ``ERRORS`` value: that under which
    a record's operation ran in the forward pass, np.ma's ``np.errstate(divide="ignore")``), its
    categories warned about logged to ``writer`` (``at_user_lines``), for the record's
    pullback: the derivative of what NumPy computed without a word is computed without one
    (a masked log's at the masked zeros), and raises where the operation would have."""
    token = ERRORS.set(errors)
    try:
        with at_user_lines(writer):
            yield
    finally:
        ERRORS.reset(token)


def at_user_lines(writer, modes=None):
    """NumPy's error handling with the categories set to ``"warn"`` logged to ``writer`` (a
    :class:`Warnings`, or what else has its ``write``) instead (and those an enclosing differentiation's writer logs: a
    gradient inside a function being differentiated); a null context if there are none, or
    if the user's handling already calls or logs (its ``seterrcall`` object must stay).
    ``modes``: ``np.geterr()`` as it is now, where the caller has just read it."""
    settings = _logging_to(writer, modes)
    return contextlib.nullcontext() if settings is None else Handling(**settings)


def _logging_to(writer, modes=None):
    """``at_user_lines``' handling: the settings of ``np.errstate`` that log to ``writer``, or
    None where nothing is to be logged."""
    if modes is not None:
        logged, kept = logged_categories(modes), False
    else:  # (a function of the handling in force, which one object holds: ``ERRORS``)
        global _LOGGED
        errors = ERRORS.get()
        known, logged, _ = _LOGGED
        kept = errors is known
        if not kept:
            logged = logged_categories(np.geterr())
            # kept with the handling, held (so that no other one takes its id), unless it calls
            # a differentiation's writer, which may hold that differentiation's records
            call = _handling()["call"]
            if type(call) is not Warnings:
                _LOGGED = errors, logged, call
    if not logged:
        return None
    unanswered = None if kept else getattr(np.geterrcall(), "unanswered", None)
    if unanswered and type(writer) is Warnings:  # (the events of a category set to "call"
        # with no callback, which the writer replaced answers with NumPy's NameError)
        writer = copy.copy(writer)
        writer.unanswered = unanswered
    return {"call": writer, **logged}


class Handling:
    """``np.errstate(**settings)`` as mutad's own code enters it (which sets the handling as
    given: ``_make_handling_as_set``), without its questions: the handling NumPy's
    ``_make_extobj`` makes set in ``ERRORS`` on entry, and the one before put back on exit
    (the settings not given are kept from the handling in force, the callback included)."""

    __slots__ = ("settings", "token")

    def __init__(self, **settings):
        self.settings = settings
        self.token = None

    def __enter__(self):
        self.token = ERRORS.set(_make_handling(**self.settings))

    def __exit__(self, *exception):
        ERRORS.reset(self.token)
        return False


_LOGGED: tuple = (None, {}, None)
"""The ``ERRORS`` value ``at_user_lines`` last met, its ``logged_categories`` and its callback
(``np.geterrcall()``)."""


def _callback():
    """``np.geterrcall()`` as mutad's code reads it: the callback of the handling in force,
    known without NumPy's dictionary of it where ``at_user_lines`` last met that handling (the
    same object: it cannot have changed, and ``_LOGGED`` holds it, so no other takes its id)."""
    known, _, call = _LOGGED
    return call if ERRORS.get() is known else _handling()["call"]


class at_user_lines_keeping_seterr:
    """``at_user_lines(writer)`` around a run of f, and NumPy's error handling as f leaves it
    (``np.seterr`` in f, not undone) kept after it, as NumPy's run of f keeps it, where leaving
    the context would put the caller's back. Inside, f sees and sets the caller's handling as
    NumPy shows it (``_as_the_user_sees``). (A class, not a generator: cheaper to enter and
    leave, once per differentiation; and ``at_user_lines``' handling set here, not through a
    ``Handling`` of its own: one object and two calls fewer.)"""

    __slots__ = ("writer", "token", "inside")

    def __init__(self, writer):
        self.writer = writer
        self.token = self.inside = None

    def __enter__(self):
        writer = self.writer
        writer.replaced = _callback()
        settings = _logging_to(writer)
        # (None: nothing logged, the handling left as it is)
        self.token = None if settings is None else ERRORS.set(_make_handling(**settings))
        self.inside = ERRORS.get()

    def __exit__(self, *exception):
        try:
            left = None if ERRORS.get() is self.inside else _as_the_user_sees(_handling())
        finally:
            if self.token is not None:
                ERRORS.reset(self.token)
        # (f may have raised after it: NumPy's handling stays as f left it all the same)
        if left is not None and self.token is not None:
            ERRORS.set(_made_as_the_user_sets(left))  # (under an enclosing differentiation's
            # writer: still logged to it)
        return False


_ufunc_config: Any = importlib.import_module("numpy._core._ufunc_config")  # (private)
_handling = _ufunc_config._get_extobj_dict  # NumPy's, as it reads the handling in force
_make_handling = _ufunc_config._make_extobj
_OURS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
_BENCH = os.path.join(_OURS, "bench", "")  # (the workloads: code being differentiated)


def _from_the_user(frame):
    """Whether ``frame``, the caller of ``np.geterr``, ``np.seterr``, ``np.errstate`` and the
    like, is code outside mutad (f's, NumPy's or SciPy's under it), which sees NumPy's handling
    as it would without mutad."""
    filename = frame.f_code.co_filename
    return not (filename == BLOCKS or filename.startswith(_OURS)
                and not filename.startswith(_BENCH))


def _as_the_user_sees(handling):
    """NumPy's handling ``handling`` (a dict, ``call`` included) as the user set it: where a
    differentiation's :class:`Warnings` logs the categories the user has warned about
    (``at_user_lines``), those are "warn" and the callback the user's."""
    call = handling["call"]
    if type(call) is Warnings:
        unanswered = call.unanswered
        while type(call) is Warnings:  # (a differentiation inside one being differentiated)
            call = call.replaced
        handling = {category: "call" if category in unanswered else "warn" if mode == "log"
                    else mode for category, mode in handling.items()}
        handling["call"] = call
    return handling


def users_callback():
    """``np.geterrcall()`` as the user sees it, wherever it is read."""
    return _as_the_user_sees(_handling())["call"]


def _handling_seen():
    """``_get_extobj_dict`` as NumPy's functions call it: the handling in force, as the user
    set it where they read it (``np.geterr``, ``np.geterrcall``, ``np.seterr``'s old)."""
    global _UNLOGGED
    handling = _handling()
    if type(handling["call"]) is not Warnings:  # (no differentiation logs: as NumPy's; and
        _UNLOGGED = ERRORS.get()  # ``np.seterr``'s ``_make_extobj`` after it knows it)
        return handling
    return _as_the_user_sees(handling) if _from_the_user(sys._getframe(2)) else handling


def _make_handling_as_set(*args, **settings):
    """``_make_extobj`` as NumPy's ``np.seterr``, ``np.seterrcall`` and ``np.errstate`` call
    it: while a differentiation logs the events the user has warned about, what the user
    sets takes effect as it would without mutad, the events still heard: "warn" is logged to
    the differentiation's writer, and a callback set is one the writer calls."""
    if args or ERRORS.get() is _UNLOGGED or not _from_the_user(sys._getframe(2)):
        return _make_handling(*args, **settings)
    return _made_as_the_user_sets(settings)


def _made_as_the_user_sets(settings):
    """``_make_extobj(**settings)``, the settings as the user sets them (as f sets them)."""
    global _UNLOGGED
    handling = _handling()
    writer = handling["call"]
    if type(writer) is not Warnings:
        _UNLOGGED = ERRORS.get()
        return _make_handling(**settings)
    seen = _as_the_user_sees(handling)
    call = settings["call"] if "call" in settings else seen["call"]
    modes = {category: settings.get(category) or settings.get("all") or seen[category]
             for category in ("divide", "over", "under", "invalid")}
    if "log" in settings.values():  # to the user's own object: the writer steps aside, as it
        # does where the caller's handling logs (``logged_categories``)
        return _make_handling(call=call, **modes)
    # the writer logs the categories warned about, and those set to "call" with no callback,
    # whose events it answers with NumPy's NameError
    unanswered = frozenset(c for c, mode in modes.items() if mode == "call" and call is None)
    settings = {name: setting for name, setting in settings.items()
                if name not in modes and name != "all"}  # (bufsize)
    settings.update({c: "log" if mode == "warn" or c in unanswered else mode
                     for c, mode in modes.items()})
    settings["call"] = writer
    if call is not seen["call"] and call is not writer or unanswered != writer.unanswered:
        # a writer that still logs, calling the user's callback
        settings["call"] = copy.copy(writer)
        settings["call"].replaced, settings["call"].unanswered = call, unanswered
    return _make_handling(**settings)


_UNLOGGED: Any = None
"""The ``ERRORS`` value last read (``_handling_seen``, ``_made_as_the_user_sets``) that calls
no differentiation's writer (held, so that no other takes its id): what the user sets under it
is set as given, outside any differentiation at the cost of a comparison."""

_ufunc_config._get_extobj_dict = _handling_seen
_ufunc_config._make_extobj = _make_handling_as_set


def logged_categories(modes):
    """The categories ``at_user_lines`` logs under NumPy's error handling ``modes``
    (``np.geterr()``): ``{category: "log"}``, empty where it is a null context. A function of
    ``modes`` alone where none of them calls or logs."""
    calls = "call" in modes.values() or "log" in modes.values()
    ours = calls and type(np.geterrcall()) is Warnings
    if calls and not ours:
        return {}
    return {category: "log" for category, mode in modes.items()
            if mode == "warn" or ours and mode == "log"}


# ----------------------------------------------------------------------------------------------
# The anomaly switch


def _from_environment():
    value = os.environ.get("MUTAD_DEBUG_NANS", "").strip().lower()
    return None if value in ("", "0", "false", "no", "off") else True


_SWITCH = contextvars.ContextVar("mutad.detect_anomaly", default=_from_environment())
"""None (off), or whether the forward pass is checked too."""


@contextlib.contextmanager
def detect_anomaly(enabled: bool = True, *, check_forward: bool = True) -> Iterator[None]:
    """Find the first operation that makes a NaN or an infinity, and raise there.

    Inside ``with mutad.detect_anomaly():`` (or in a function decorated with
    ``@mutad.detect_anomaly()``), every differentiation that starts checks each operation it
    records, as PyTorch's anomaly mode and JAX's ``debug_nans`` do:

    * in the reverse pass, after each operation's pullback ran, the gradients it accumulated
      into its inputs, and the values its undo put back into an array it wrote in place;
    * with ``check_forward`` (the default), also the values each operation computes in the
      forward pass.

    The first operation whose result is a NaN or an infinity while everything it started
    from was finite raises :class:`mutad.errors.NonFiniteError` (also a
    ``FloatingPointError``), naming the operation, the file, line and source text of the code
    that ran it, and whether the forward value, the gradient or the restored value went wrong.
    As with every error, the caller's arrays are back as they were when it propagates.
    Finite programs give the same results, bit for bit, with the switch on.

    >>> import numpy as np, mutad
    >>> def f(x):
    ...     return np.sqrt(x).sum()
    >>> with mutad.detect_anomaly():
    ...     try:
    ...         mutad.gradient(f, np.array([0.0, 1.0]))
    ...     except mutad.errors.NonFiniteError as e:
    ...         print(e.kind, e.operation)
    cotangent np.sqrt

    ``check_forward=False`` checks the reverse pass only: for code that computes NaNs or
    infinities on purpose and discards them (``np.where(x > 0, np.log(x), 0.0)``), whose
    gradient is still finite. ``enabled=False`` turns the checks off inside a block.
    Setting the environment variable ``MUTAD_DEBUG_NANS=1`` turns them on for the whole
    process, without editing the program (as ``JAX_DEBUG_NANS`` does). The switch holds in
    the thread (and ``contextvars`` context) that set it, and is read when a differentiation
    starts: a ``back`` function from :func:`mutad.pullback` checks as its forward pass did.
    ``grad(f, replay=True)`` traces every call while it is on, so that each operation has
    its line.

    The checks read every value and gradient once more: a program runs a few times slower
    under them. Off, they cost one attribute check per operation.
    """
    token = _SWITCH.set(bool(check_forward) if enabled else None)
    try:
        yield
    finally:
        _SWITCH.reset(token)


def anomaly_detection():
    """Whether :func:`detect_anomaly` is on here."""
    return _SWITCH.get() is not None


def anomaly():
    """An :class:`Anomaly` for a tape starting now, or None if the switch is off."""
    forward = _SWITCH.get()
    return None if forward is None else Anomaly(forward)


def finite(x):
    """Whether every float in ``x`` (an array, a number, a traced array, lists and tuples of
    them) is finite; values that hold no floats are."""
    if type(x) in (list, tuple):
        return all(finite(item) for item in x)
    x = memory(x)
    if isinstance(x, (np.ndarray, np.inexact)):
        return x.dtype.kind not in "fc" or bool(np.isfinite(x).all())
    if type(x) is float or type(x) is complex:
        return bool(np.isfinite(x))
    return True


def _what(arrays):
    """What is not finite among ``arrays``: "NaN", "an infinity", or both."""
    plain = [memory(a) for a in arrays]
    nan = any(np.isnan(a).any() for a in plain)
    inf = any(np.isinf(a).any() for a in plain)
    return " and ".join(w for w, there in (("NaN", nan), ("an infinity", inf)) if there)


def operation_name(primitive):
    """How a record's primitive is spelled in a message."""
    if primitive is None:
        return "a write"
    name = getattr(primitive, "name", None)  # a tape.Primitive: a rule's name
    if type(name) is str:
        return name
    owner_ufunc = getattr(primitive, "__self__", None)
    if isinstance(owner_ufunc, np.ufunc):  # np.add.at
        return f"{function_name(owner_ufunc)}.{primitive.__name__}"
    if getattr(primitive, "__name__", None) in ("getitem", "setitem"):  # the operator module's
        return "x[key]" if primitive.__name__ == "getitem" else "x[key] = value"
    if getattr(primitive, "__name__", None) == "assign":
        return "an assignment"
    return function_name(primitive)


_WHY = {
    "value": ("computed {what} in the forward pass from finite values",
              "Keep its arguments inside its domain (np.log(x) for x > 0, a division by a "
              "nonzero, np.exp of a moderate value). Where the value is discarded on purpose "
              "(np.where(x > 0, np.log(x), 0.0)), keep the argument valid there too "
              "(np.log(np.where(x > 0, x, 1.0))), or check the reverse pass only with "
              "detect_anomaly(check_forward=False)."),
    "cotangent": ("made {what} in the gradient, in the reverse pass, from finite cotangents",
                  "Its derivative is not finite at these values (np.sqrt or a power below 1 "
                  "at 0, np.log at 0, a division by a value that is zero): keep its "
                  "arguments off those points, or, where the value is discarded (np.where), "
                  "keep the argument valid there too "
                  "(np.sqrt(np.where(x > 0, x, 1.0)))."),
    "restored value": ("gave back {what} when its in-place write was undone in the reverse "
                       "pass, where the array held finite values",
                       "Its undo is not exact here: for a rule of your own (mutad."
                       "inplace_adjoint), restore what it overwrote another way, or declare "
                       "the argument in checkpoint= so that mutad saves and copies it back."),
}


def non_finite(kind, record, arrays):
    """The :class:`errors.NonFiniteError` for ``record``, of ``kind`` (a key of ``_WHY``),
    ``arrays`` being what is not finite."""
    name = operation_name(record.primitive)
    line = record.line
    text = source(line)
    what, fix = _WHY[kind]
    message = (f"{name} at {location(line)} {what.format(what=_what(arrays))}"
               + (f":\n    {text}\n" if text else ".\n") + fix)
    return NonFiniteError(message, kind, name, None if line is None else line[0],
                          None if line is None else line[1], text)


def _places(items):
    """The places (buffers, regions of them) among ``items``, at any depth of lists and
    tuples."""
    for x in items:
        if type(x) is Buffer or type(x) is Place:
            yield x
        elif type(x) in (list, tuple):
            yield from _places(x)


class Anomaly:
    """The checks :func:`detect_anomaly` makes on one tape. ``forward``: whether values the
    forward pass computes are checked; ``writes``: per in-place record still to be reversed,
    its targets and whether each held finite values before the write."""

    __slots__ = ("forward", "writes")

    def __init__(self, forward):
        self.forward = forward
        self.writes = {}

    def produced(self, record, inputs, outputs):
        """``record`` computed ``outputs`` (arrays) from ``inputs`` (its arguments' values)."""
        if self.forward and not finite(outputs) and finite(inputs):
            raise non_finite("value", record, outputs)

    @staticmethod
    def before_write(targets, inputs):
        """Before an in-place write into ``targets`` (traced arrays) from ``inputs``: whether
        each target, and all of ``inputs``, hold finite values (for :meth:`wrote`)."""
        return [finite(t) for t in targets], finite(inputs)

    def wrote(self, record, targets, before):
        """``record`` wrote into ``targets``; ``before`` is what :meth:`before_write` said."""
        was, inputs = before
        arrays = [memory(t) for t in targets]
        self.writes[id(record)] = (record, list(zip(arrays, was)))
        if self.forward and all(was) and inputs and not finite(arrays):
            raise non_finite("value", record, arrays)

    def checked(self, reverse):
        """``reverse(record, shadows)`` (``Tape.reverse``), followed by the checks."""

        def reverse_and_check(record, shadows):
            written = record.written
            written = () if written is None else written if type(written) is tuple else (written,)
            read = {p.buffer.key: p.buffer for p in (*_places(record.inputs), *written)}
            started = all(_finite_shadow(shadows, buffer)
                          for buffer in (*read.values(), *record.outputs))
            reverse(record, shadows)
            stored = self.writes.pop(id(record), None)
            if stored is not None:
                for array, was_finite in stored[1]:
                    if was_finite and not finite(array):
                        raise non_finite("restored value", record, [array])
            if started:
                bad = [shadow for shadow in (_shadow(shadows, b) for b in read.values())
                       if shadow is not None and not finite(shadow)]
                if bad:
                    raise non_finite("cotangent", record, bad)

        return reverse_and_check


def _shadow(shadows, buffer):
    entry = shadows.entries.get(buffer.key)
    return None if entry is None else entry[1]


def _finite_shadow(shadows, buffer):
    shadow = _shadow(shadows, buffer)
    return shadow is None or finite(shadow)
