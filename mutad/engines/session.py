"""A differentiation from its start to its end, in either mode: the session the public
functions compose (``api``).

    with ReverseDifferentiation(policy, memory) as d:
        y = d.call(f, d.wrap(args))
        grads = d.gradients([(y, 1.0)])

:class:`ReverseDifferentiation` traces the arguments (``tracing``), calls the function with
its tape running, runs the reverse pass from the cotangents it is given and hands the
gradients over; :class:`ForwardDifferentiation` runs the function on duals over private copies
of the caller's memory (``forward``). Either one, on leaving its ``with`` block (or on
:meth:`restore`), writes back every byte of the caller's that the function changed
(``arguments.Originals``), whatever happened in between: the one place a differentiation
ends.
"""

import contextlib
import threading

import numpy as np

from ..core.allocation import attribute_holders, drawing_argument, holds_derivative, settle
from ..core.devices import is_device
from ..core.arguments import Originals, check_distinct_memory, no_full_collections, run
from ..core.debug import issue_held
from .arraylike import stands_for_scalar, weak_value
from ..core.errors import (ConstantModifiedError, InvalidArgumentError, PolicyError,
                           UnsupportedOperationError)
from .forward import (BATCH, FAILED, NESTED, BatchUnsupported, Dual, as_array, enclosed, split,
                      unbatched, zero_tangent)
from ..core.levels import ACTIVE, LEVELS, Tracer, nesting
from .recompute import hold_for_good
from .reverse import (REVERSING, DeviceCopy, ReverseTape, Traced, _depth, as_owner,
                      check_constants, checksum, fresh, thaw, unfreeze, view_of)
from ..core.shadows import Buffer, Shadows
from ..core.tape import POLICIES
from ..core.trees import (STATIC, check_leaf, flatten, is_inexact_array, is_inexact_scalar,
                          contents, same_contents, scalar_derivative, written_back)
from ..core.views import (address, element_indices, memory, overlaps_itself, owner, owner_view,
                          same_region, spanned_from, spans, views, weaken, wrapped, writeable,
                          made_writable)


ADOPTED = ("f wrote into an array made before the call that it reaches by a name (a "
           "module-level work buffer, an object's attribute, a default argument): its bytes "
           "before each call would be an input of the program, which a replay does not read, "
           "so each call is traced")
"""Why a recording stops where the function writes into such an array (``adopt``)."""


def written_elsewhere(error):
    """The error for a write NumPy refused (``error``) where the function wrote into an array
    made before the call through a name (``Differentiation.adopt``), and then, it may be, by
    another way to its memory."""
    return ConstantModifiedError(
        f"{error}: the function wrote into an array made before the call through a name (a "
        "module-level work buffer, an object's attribute), whose writes mutad follows from then "
        "on, and then wrote into its memory another way (a list or an object holding the "
        "array, a view of it made before the call), which mutad would not see; such arrays "
        "are read-only while it differentiates. Write into it through the name alone, or "
        "allocate the array inside the function. (Or an array an operation read as a "
        "constant was overwritten: allocate it inside the function, or write into a new "
        "array instead.)")


def _part_of_complex(x):
    """For ``x``, a plain float array viewing the real or imaginary parts of complex memory
    (``U.imag`` of a complex buffer, taken before a write adopted it): ``(the complex array
    whose part it is, "real" or "imag")``, so that the part is followed as that array's, whose
    memory the differentiation follows; else None."""
    if isinstance(x, Tracer) or type(x) is not np.ndarray:
        return None
    base = owner(x)
    size = x.dtype.itemsize
    if base.dtype.kind != "c" or x.dtype.kind != "f" or 2 * size != base.dtype.itemsize:
        return None
    offset = address(x) - address(base)
    if any(s % base.dtype.itemsize for s in x.strides):
        raise UnsupportedOperationError(
            "a float view of a complex array made before the call, other than its real or "
            "imaginary parts, through which the function reads or writes the array it wrote "
            "into: use U.real or U.imag, or allocate the array inside the function.")
    part = offset % (2 * size) // size
    # (made from ``x``, which stays writeable while the owner of the memory is shut: ``adopt``)
    whole = np.asarray(_Interface(x, {
        "data": (address(x) - part * size, False), "shape": x.shape, "strides": x.strides,
        "typestr": base.dtype.str, "version": 3}))
    return whole, ("real", "imag")[part]


class _Interface:
    """An array interface over the memory of ``base`` (``np.lib.stride_tricks``' way), which
    ``views.owner`` follows to the owner of that memory."""

    def __init__(self, base, interface):
        self.base, self.__array_interface__ = base, interface


class Differentiation:
    """What both modes share: the caller's arrays to write back (``originals``), and the
    ``with`` block that writes them back on leaving."""

    def __init__(self):
        self.originals = Originals()
        # id(owner of the memory) -> {id(stand-in): (the stand-in, this one's array for it)}
        self.adopted = {}
        self.apart = set()  # the ids of those owners whose memory no argument views
        self.written = []  # (the caller's array of an adopted stand-in, this one's array for it)
        self.left = []  # (that caller's array, its values as f left them: ``settle``)
        self.caller_of = {}  # id of an array given to f -> the caller's object (``detached``)
        self.later = []  # what differentiations nested in f left in plain arrays (``leave``)
        self.views = []  # (a view of a caller's array ``settle`` stored, that array)
        # the caller's containers f was given as they are, and those a differentiation nested
        # in f stored values in (``settle``)
        self.given_as_is = []
        self.built = []  # the containers f was given for the caller's (``trees.Built``)
        self.recorded = None  # what those given as they are held before a recorded call
        # ids of the owners of the memory of arguments f is given untraced (records), which
        # come back as they were, as every argument does (``allocation.drawing_argument``)
        self.received = set()
        # id of a caller's array made before the call that f reshaped in place
        # (``U0.shape = ...``) -> (that array, its shape before), put back if f raises
        self.reshaped = {}

    def adopt(self, stand_in, root, x):
        """This differentiation's array for ``stand_in`` (``allocation.Preexisting``), which
        stands for a float array made before the call that the function reaches by a name (a
        module-level work buffer, ``self.u`` of a method), once the function wrote into its
        memory (``root``: the id of the array owning it): ``x``, the plain array the stand-in
        views (or an enclosing differentiation's array for it), taken as an argument outside
        argnums is: its values before the call are constants, its bytes are the caller's,
        written back when the differentiation ends. One array per stand-in, which its reads
        and writes go to from then on (``allocation.adopted``)."""
        first = root not in self.adopted
        arrays = self.adopted.setdefault(root, {})
        pair = arrays.get(id(stand_in))
        if pair is None:  # (the stand-in is held: its id stays its own)
            part = _part_of_complex(x)
            adopted = self._adopted(x, first) if part is None else getattr(
                self._adopted(part[0], first), part[1])
            pair = arrays[id(stand_in)] = (stand_in, adopted)
            self.written.append((x, adopted))
            self.caller_of[id(adopted)] = x
            if id(owner(x)) in self.apart:
                # The caller's own objects for the memory are made read-only while this
                # differentiation runs: another way to it than the name (a list holding the
                # array) would write where mutad does not see. Its array for the memory views
                # it through an array made before, which stays writable (NumPy does not pass
                # the flag on to views made before).
                for a in (owner(x), stand_in.__dict__.get("original")):
                    if a is not None and writeable(a):
                        a.flags.writeable = False
                        self.shut[id(a)] = a
        return pair[1]

    def _adopted(self, x, first):
        raise NotImplementedError

    @property
    def shut(self):
        """The caller's arrays made read-only while this differentiation runs, by id, made
        writable again when it ends: ``adopt``'s (``reverse.thaw``)."""
        raise NotImplementedError

    def __enter__(self):
        # Full collections held off from the start to the end, the run of f and its reverse
        # pass included: the reverse pass's block nests in this one, which costs it a count
        # rather than a freeze and an unfreeze (``no_full_collections``); the run has none
        # of its own (``arguments.run``).
        _COLLECTIONS.__enter__()
        return self

    def __exit__(self, *exception):
        try:
            self.restore()
        finally:
            _COLLECTIONS.__exit__()

    def ours(self, x):
        """Whether ``x`` is a traced or dual value of this differentiation."""
        raise NotImplementedError

    def settle(self, holders, returned=True):
        """``f`` returned: its effects on the caller's state are those of NumPy's one run of
        ``f``. An array made before the call that it wrote into ends holding what ``f`` left
        in it (written back by :meth:`restore`, after the reverse pass rewound it; one whose
        memory an argument views comes back as the argument does), and a
        value of this differentiation ``f`` stored where it reaches by a name (``self.buf``,
        a list it appended to, a global: ``holders``, ``allocation.settle``) is replaced by
        its plain value, as NumPy's run would have stored it: the caller's own object where
        it is an argument or such an array, else a copy of its values now. ``returned``: False
        where ``f`` raised, after which the caller's arrays come back as they were, in the
        shapes they had (``U0.shape = ...``)."""
        if not returned:
            for caller, shape in self.reshaped.values():
                caller.shape = shape
        if returned:
            # (memory an argument views too comes back as the argument's does; what nested
            # differentiations left in a plain array first: a write this one adopted the
            # array at came after them, as the writes of a nested one into it from then on
            # are this one's)
            self.left = self.later + [(x, t.value.copy()) for x, t in self.written
                                      if isinstance(x, Tracer) or id(owner(x)) in self.apart]
        settle(holders, self.detached)
        recorder = getattr(getattr(self, "tape", None), "recorder", None)
        changed = bool(self.built) and written_back(self.built, self._plain,
                                                   refuse=returned)
        if recorder is not None and (changed or self.recorded is not None and not all(
                same_contents(before, contents(c)) for c, before
                in zip(self.given_as_is, self.recorded))):
            # (a replay runs no line of f: it would change none)
            recorder.refuse("f changed a container it was given (an attribute, a dict entry, "
                            "a list item)")
        if changed:
            if len(ACTIVE.running) > 1:  # nested: what it stored may be an enclosing level's
                enclosing = getattr(ACTIVE.running[-2], "adopter", None)  # value, settled
                if enclosing is not None:  # when that level's function returns
                    enclosing.given_as_is.extend(b.tree for b in self.built
                                                 if not isinstance(b.tree, tuple))
        if self.given_as_is:  # (a caller's list f was given: ``log.append(x.sum())``)
            settle([(self.given_as_is, None), *(h for x in self.given_as_is
                                                if not isinstance(x, STATIC)
                                                for h in attribute_holders(x))], self.detached)

    def given_for(self, argument, rebuild, leaves):
        """What f is given for the caller's ``argument``: ``rebuild`` (``trees.flatten``'s)
        around ``leaves``, the caller's own containers within it where they hold nothing
        replaced, kept to settle as NumPy's run of f leaves them."""
        given = rebuild(leaves, self.given_as_is, self.built)
        if given is argument and _user_object(argument):  # (holding no array: a leaf)
            self.given_as_is.append(argument)
        return given

    def _plain(self, value):
        """What NumPy's run of f leaves where f stored ``value`` in a container it was given
        (``trees.written_back``): a value of this differentiation's, detached."""
        if isinstance(value, Tracer):
            plain = self.detached(value)
            if plain is not None:
                return plain
        return value

    def stands_for_callers(self, x):
        """Whether ``x`` is the very array ``f`` was given for a caller's (an argument's, an
        adopted one's), not a view of it: ``x.shape = ...`` would reshape the caller's array,
        whose shape stays."""
        return id(x) in self.caller_of

    def detached(self, x):
        """``x``'s plain value (``settle``) where it is this differentiation's, else None."""
        if not self.ours(x):
            return None
        caller = self.caller_of.get(id(x))
        if caller is None:
            caller = self._caller_view(x)
        return caller if caller is not None else returned(x)

    def _caller_view(self, x):
        """Where ``x`` views an array made before the call that ``f`` wrote into and that ends
        holding what ``f`` left (``self.interior = self.u[1:-1]``): the same view of the
        caller's array, as NumPy's run would have stored it; else None."""
        if stands_for_scalar(x) or type(x.value) is not np.ndarray:
            return None
        for caller, adopted in self.written:
            if type(caller) is np.ndarray and type(adopted.value) is np.ndarray and any(
                    caller is a for a, _ in self.left) and owner(x.value) is owner(
                    adopted.value) and caller.strides == adopted.value.strides:
                offset = address(x.value) - address(adopted.value) + address(caller) - address(
                    owner(caller))
                try:
                    view = np.ndarray(x.shape, x.dtype, buffer=owner(caller), offset=offset,
                                      strides=x.value.strides)
                except (TypeError, ValueError):  # (memory NumPy hands out no buffer of)
                    return None
                self.views.append((view, caller))
                return view
        return None

    def restore(self):
        """Write back the caller's original bytes, then the values ``f`` left in the arrays
        made before the call it wrote into (``settle``)."""
        self.originals.restore()
        for view, caller in self.views:  # (made while the caller's memory was read-only)
            if writeable(caller):
                made_writable(view)
        left, self.left, self.views = self.left, [], []
        if not left:  # (f wrote into no array made before the call: nothing to leave)
            return
        runs = RUNS.left
        if runs is not None and not ACTIVE.running:  # one run of several: the first's, at the end
            if not runs:
                runs.extend(left)
            return
        leave(left)


_COLLECTIONS = no_full_collections()

class _Runs(threading.local):
    left = None  # (a default, not getattr's: a local's missing attribute makes an error)


RUNS = _Runs()
"""``left``: while a Jacobian or a Hessian runs ``f`` once per pass (``api._RunsShownAsOne``),
a list that takes what the first run left in the arrays made before the call it wrote into
(``Differentiation.settle``): each run starts from the caller's bytes, and ``leave`` writes
those values when the last one has ended, as NumPy's one run of ``f`` leaves them."""


@contextlib.contextmanager
def kept_state_writable():
    """User code a pullback runs again on plain values (an ODE's right-hand side, which the
    discrete adjoint evaluates anew), writing into an array the running differentiations keep
    read-only: its own work buffer (``self.dy[:] = ...``, a module-level one), which the
    function wrote in the forward pass and mutad adopted. NumPy's one run of ``f`` made those
    writes already, and the records still to be reversed need the bytes the arrays hold now:
    in this block they are writable, and after it they hold those bytes again, read-only."""
    held = [t.frozen for t in (*ACTIVE.running, *REVERSING.tapes) if hasattr(t, "frozen")]
    shut = {id(a): a for frozen in held for a in frozen.values() if not a.flags.writeable}
    kept = sorted(shut.values(), key=_depth)  # owners first: a view turns writable after its owner
    saved = [a.copy() for a in kept]  # (a view whose owner mutad left writable: its own bytes)
    for a in kept:
        made_writable(a)  # (each was writable before mutad froze it)
    try:
        yield
    finally:
        for a, values in zip(kept, saved):
            np.copyto(a, values)
        for a in kept:
            a.flags.writeable = False


def leave(left):
    """Write ``left``'s values, ``(the caller's array, values)``, into the caller's arrays.
    Inside an enclosing differentiation (this one nested in its function), into an array that
    one does not follow, a plain one: the enclosing one keeps its bytes first, to put them
    back when it ends, and leaves these values then (``later``), so that each of its runs
    starts from the caller's bytes."""
    enclosing = ACTIVE.running[-1].adopter if ACTIVE.running else None
    for x, values in left:
        if not isinstance(x, Tracer):  # (an enclosing level's values: NumPy's numbers)
            while isinstance(values, Tracer):
                values = values.value
            if enclosing is not None:
                enclosing.originals.keep(x)
                enclosing.later.append((x, values))
        if writeable(x):
            np.copyto(x, values)


def _part_of_dual(whole, layout, x):
    """The view of a forward level's dual ``whole`` of the caller's array ``layout`` that the
    caller's view ``x`` of ``layout``'s memory is (``W[1:]`` inside a hessian): the same view
    of its value and tangent, laid out as ``layout``. None where the dual's value is not laid
    out so, or its memory not in order (no view of it is ``x``'s)."""
    if type(whole) is not Dual or whole.value.strides != layout.strides:
        return None
    flat = whole.reshape(-1, order="A")
    if not views(memory(flat), memory(whole)):
        return None
    return flat.restrided(x.shape, x.dtype, address(x) - address(layout), x.strides)


def _user_object(x):
    """Whether ``x`` is an object of the user's whose attributes f may set (``state.last =
    loss``): not a value or code (``trees.STATIC``), whose namespace is not f's to settle."""
    return type(getattr(x, "__dict__", None)) is dict and not isinstance(x, STATIC)


class ReverseDifferentiation(Differentiation):
    """One reverse-mode differentiation: its tape, the traced arguments, and the caller's
    original bytes.

    The caller's float buffers are traced as they are, with no copy; the first write into one
    saves it (``Tape.guard``), and :meth:`restore` writes every saved buffer back, so the
    caller's arrays come back bit-for-bit whatever happened in between. Other writable arrays
    (integer and boolean ones) are not traced, so they are saved up front.
    """

    def __init__(self, policy, memory=None):
        if policy not in POLICIES:
            raise PolicyError(f"policy={policy!r}: choose one of {', '.join(map(repr, POLICIES))}.")
        if memory is not None and not (isinstance(memory, (int, float)) and memory >= 0):
            raise PolicyError(f"memory={memory!r}: give a number of bytes, or None.")
        # Nested in another differentiation, its outer level is the innermost running one.
        outer = nesting()
        self.tape = ReverseTape(policy, outer[-1] if outer else None,
                                None if memory is None else int(memory))
        super().__init__()
        self.tape.originals = self.originals
        self.tape.adopter = self
        self.buffers = {}
        self.pending = {}
        self.leaves = []
        self.rebuilds = []
        self.traced = []
        self.scalar = []
        self.outside_argnums = False  # a recording traces arrays outside argnums (wrap)

    def wrap(self, args, selected=None, recording=False):
        """The traced version of each positional argument. Numbers in arguments outside
        ``selected`` (positions; None: all) are passed as they are, as autograd and JAX pass
        them: no gradient is asked of them, and Python's own functions of numbers
        (``math.log(gamma)``, ``float(gamma)``) then work on them. Their arrays are constants
        of the differentiation (``reverse.constant``): what is computed from them alone runs
        as NumPy's and records nothing, and writes into them are followed and undone. A call
        a replay records (``recording``) traces them instead: the replay reads them as
        inputs, and guards the decisions taken on them; so does a differentiation nested in
        another of the outer one's arrays that carry its derivative, or share memory with a
        selected argument."""
        wrapped = []
        made = {}  # id of a float array -> its traced array: one object passed twice is one
        # (loops, not comprehensions, on every call: Python makes a function and a frame for
        # each comprehension, which costs more than the loop over a few arguments)
        flat = []  # each argument's leaves, and its rebuild
        for arg in args:
            flat.append(flatten(arg))
        # the memory of the enclosing levels' arrays in selected arguments: followed here
        followed = set()
        for i, (leaves, _) in enumerate(flat):
            if selected is None or i in selected:
                for leaf in leaves:
                    if isinstance(leaf, Tracer):
                        followed.add(id(owner(leaf)))
        for i, arg in enumerate(args):  # (``x is y`` in f is True for f(a, a), as in NumPy)
            leaves, rebuild = flat[i]
            self.rebuilds.append((len(self.leaves), len(leaves), rebuild))
            plain = selected is not None and i not in selected
            new = []
            for leaf in leaves:
                t = made.get(id(leaf)) if _an_array(leaf) else None
                if t is None:
                    t = self._wrap_leaf(leaf, plain, plain and not recording, followed)
                    if type(t) is Traced and _an_array(leaf):
                        made[id(leaf)] = t
                else:  # the buffer is the same: its constancy as _wrap_leaf takes it
                    t.buffer.constant = t.buffer.constant and plain and not recording
                    self.traced.append(t)
                    self.scalar.append(None)
                new.append(t)
            if plain and recording and any(type(t) is not type(leaf) for t, leaf
                                           in zip(new, leaves, strict=True)):
                self.outside_argnums = True  # traced for the replay only
            self.leaves.extend(leaves)
            wrapped.append(self.given_for(arg, rebuild, new))
        if recording and self.given_as_is:
            self.recorded = [contents(c) for c in self.given_as_is]
        owners = []
        for key, entry in self.buffers.items():
            if type(key) is int:
                owners.append(entry[0])
        check_distinct_memory(owners)
        return wrapped

    def _wrap_leaf(self, x, plain=False, constant=False, followed=frozenset()):
        if type(x) is np.ndarray and x.dtype.kind in "fc":  # (the common leaf: asked first)
            t = self._caller_array(x, constant)
            self.traced.append(t)
            self.scalar.append(None)
            return t
        check_leaf(x)
        t = None
        if plain and is_inexact_scalar(x):
            pass  # a number no gradient is asked of: as it is
        elif is_inexact_array(x):
            t = self._caller_array(x, constant)
        elif is_inexact_scalar(x):
            t = fresh(np.result_type(x).type(x), self.tape)  # a NumPy scalar: immutable
            if type(x) is float or type(x) is complex:  # Python's: weak in NumPy's promotion
                weaken(t)
            if self.tape.outer is None:
                hold_for_good(t.buffer, t.value)
        elif isinstance(x, Tracer) and x.dtype.kind in "fc":
            if stands_for_scalar(x):  # an enclosing level's scalar: immutable, so a value of
                t = fresh(x, self.tape)  # its own at each place, as a float argument is
                if x.weak:
                    weaken(t)
            else:  # an array of a differentiation this one is inside: a constant here
                # where no level follows it (not asking of memory a selected argument shares,
                # whose tangents a batched pass holds in some directions only)
                t = self._wrap_outer(x, constant and id(owner(x)) not in followed
                                     and not holds_derivative(x))
        else:  # integer arrays, and those inside objects of NumPy's and SciPy's classes
            self.originals.keep_within(x)
        self.traced.append(t)
        # the type of a differentiated number, whose gradient is returned as one
        self.scalar.append(type(x) if t is not None and is_inexact_scalar(x) else None)
        return x if t is None else t

    def _caller_array(self, x, constant):
        """The traced array of the caller's float array ``x``, over the buffer of all of its
        memory: traced as it is, with no copy, its bytes kept before the first write."""
        base = owner(x)
        outer = self.tape.outer
        if id(base) not in self.buffers:
            # One buffer for all views of the memory, laid out as the argument when it
            # spans all of it (np.linspace's result views an array of its own).
            at = None if x is base else spanned_from(x, base)
            layout = x if x is base or at is not None else base
            lifted = None if outer is None else outer.lift(layout)
            # a constant here where no enclosing level's derivative flows through it either
            # (a forward level's zero tangent; a reverse level follows the writes into it)
            buffer = Buffer(layout, constant=constant and not holds_derivative(lifted))
            buffer.note_address(layout, at)
            if outer is None:
                hold_for_good(buffer, layout)
            if lifted is not None:
                outer.caller_memory(lifted, layout)
            self.buffers[id(base)] = (layout, buffer, lifted)
        layout, buffer, lifted = self.buffers[id(base)]
        buffer.constant = buffer.constant and constant  # all its arguments' views
        if lifted is None or x is layout:
            value = x if lifted is None else lifted
        elif type(lifted) is Traced:
            value = view_of(lifted, x, outer)
        elif same_region(x, layout):  # (a forward level's dual: ``W[...] *= k``)
            value = lifted
        elif (part := _part_of_dual(lifted, layout, x)) is not None:
            value = part
        else:
            raise UnsupportedOperationError(
                "a gradient inside forward mode (a hessian, a jvp of a gradient) whose function "
                "reads or writes part of an array made before the call (a view, W[1:]) that it "
                "writes into: mutad follows such an array there only as a whole. Compute with "
                "the whole array (W * mask, np.where), or work on a copy made inside the "
                "function (W = W.copy()).")
        t = Traced(value, buffer, self.tape, x is layout or same_region(x, layout))
        if value.base is None and buffer.owner is None:  # what u[::2].base is
            as_owner(t)
        self.tape.arguments.setdefault(id(base), []).append((x, buffer.key))
        if writeable(x):
            self.pending.setdefault(buffer.key, []).append(value)
            self.tape.guard(buffer.key, lambda key=buffer.key: self._save(key))
        return t

    def _adopted(self, x, first):
        """``adopt``: an array made before the call as this differentiation takes an argument
        outside argnums, a constant (an enclosing one's array as an argument of its own),
        over a view of all of its memory made now (``shut``)."""
        recorder = self.tape.recorder
        if recorder is not None:
            recorder.refuse(ADOPTED)
        if isinstance(x, Tracer):
            return self._wrap_outer(x)
        base = owner(x)
        # traced where records read it as a constant (see unfreeze), else a constant
        constant = not (first and unfreeze(self.tape, base))
        if id(base) not in self.buffers:  # memory apart from the arguments' (traced ones')
            if id(base) not in self.received:
                self.apart.add(id(base))
            if not spans(x, base):
                self._caller_array(base.view(), constant)  # (base itself is shut)
        return self._caller_array(x, constant)

    @property
    def shut(self):
        return self.tape.frozen  # (thawed when the differentiation ends, or back is dropped)

    def _wrap_outer(self, x, constant=False):
        """An argument an outer differentiation traces (this gradient is nested in another,
        reverse or forward): traced here as a buffer of its own, its values the outer one's.
        Saving and restoring it are operations the outer one follows like any other.
        ``constant``: outside argnums and constant at every enclosing level too (``x`` of
        ``hessian(f, y, x, argnums=0)``), so no derivative of any level flows through it."""
        key = ("outer", id(owner(x)))
        if key not in self.buffers:  # one buffer for all of the memory, as for plain arrays
            whole = self.tape.outer.lift(owner_view(x))
            buffer = Buffer(whole, constant=constant)
            buffer.note_address(whole)
            self.buffers[key] = (whole, buffer)
            self.tape.guard(buffer.key, lambda: self._save(buffer.key))
        whole, buffer = self.buffers[key]
        buffer.constant = buffer.constant and constant  # all its arguments' views
        value = self.tape.outer.lift(x)
        self.pending.setdefault(buffer.key, []).append(value)
        return Traced(value, buffer, self.tape, same_region(value, whole))

    def _save(self, key):
        for x in self.pending.pop(key):
            self.originals.keep(x)

    def call(self, f, args, kwargs=None):
        """``f(*args, **kwargs)`` of the traced arguments, with this differentiation running."""
        drawn = []  # (a loop, not a comprehension: see wrap)
        for a in args:
            drawn.append(drawing_argument(a, self.received))
        args = drawn
        kwargs = {k: drawing_argument(v, self.received) for k, v in kwargs.items()} \
            if kwargs else {}
        return run(self.tape, f, lambda g: g(*args, **kwargs), self._explain, (args, kwargs))

    def _explain(self, error):
        """A write NumPy refused because the array is one mutad keeps read-only."""
        if self.adopted and "read-only" in str(error):
            return written_elsewhere(error)
        if self.tape.read_views and "read-only" in str(error):
            return ConstantModifiedError(
                f"{error}: an array allocated in the differentiated function was read by an "
                "operation mutad recorded, then handed to code as a plain array (np.asarray(w), "
                "a routine's output= argument) that writes into it, which mutad cannot follow; "
                "its old values are needed by the gradient, so the plain array is read-only. "
                "Write into a new array instead (w = np.empty_like(w) before refilling it, or "
                "take the routine's result: w = routine(...)).")
        if self.tape.frozen and "read-only" in str(error):
            return ConstantModifiedError(
                f"{error}: this array (or the memory it views) was read as a constant by an "
                "operation mutad recorded, and its gradient needs those values, so mutad "
                "keeps it read-only while it differentiates, for every thread of the "
                "process. Allocate it inside the differentiated function (mutad then "
                "follows its writes), or write into a new array instead "
                "(w = np.cos(...) rather than w[:] = ...).")
        return None

    def caller_sums(self):
        """Checksums of the caller's writable arrays as ``f`` left them: ``pullback``'s ``back``
        reverses the tape from those bytes (and then writes the caller's first bytes back), so
        a write between the two, which it would undo on the wrong values, is found
        (:meth:`check_caller_sums`)."""
        return {key: DeviceCopy(entry[0].copy()) if is_device(entry[0]) else checksum(entry[0])
                for key, entry in self.buffers.items()
                if type(key) is int and entry[2] is None and writeable(entry[0])}

    def check_caller_sums(self, sums):
        for key, total in sums.items():
            now = self.buffers[key][0]
            if not (checksum(now) == total if type(total) is int else total.same(now)):
                raise ConstantModifiedError(
                    "an argument of the function was written after mutad.pullback (or vjp) "
                    "returned and before back() was called: back() undoes the function's writes "
                    "from the values it left, and would give a wrong gradient and then write "
                    "over the new values. Call back() before writing into the arguments, or "
                    "pass copies of them.")

    def gradients(self, seeds):
        """The reverse pass from ``seeds``, ``(output, cotangent)`` pairs (an output that is
        not traced here gets none), and one gradient per positional argument, of its
        structure (:meth:`_released`)."""
        shadows = Shadows()
        for t, g in seeds:
            if type(t) is Traced and g is not None:
                shadows.add(t, g)  # outputs may share memory: add
        check_constants(self.tape)
        self.tape.replay(shadows)
        return self._per_argument(self._released(shadows))

    def _released(self, shadows):
        """One gradient per leaf: a copy of its shadow (zeros if none), a number for a number
        (``scalar_derivative``), None for a leaf that is not differentiable."""
        # A shadow that no other argument reads is handed over instead of copied.
        # (counted in a plain loop: ``collections.Counter``'s set-up costs more than the
        # count itself for the few leaves of a call)
        keys: dict = {}
        for t in self.traced:
            if t is not None:
                keys[t.buffer.key] = keys.get(t.buffer.key, 0) + 1
        grads = []
        for t, scalar in zip(self.traced, self.scalar, strict=True):
            if t is None:
                grads.append(None)
                continue
            g = shadows.release(t, hand_over=keys[t.buffer.key] == 1)
            grads.append(scalar_derivative(g, scalar) if scalar and not wrapped(g) else g)
        return grads

    def ours(self, x):
        return type(x) is Traced and x.tape is self.tape

    def stands_for_callers(self, x):
        return super().stands_for_callers(x) or any(t is x for t in self.traced)

    def detached(self, x):
        if not self.ours(x):
            return None
        if id(x) not in self.caller_of:  # (an argument: the caller's object)
            self.caller_of.update((id(t), leaf) for t, leaf
                                  in zip(self.traced, self.leaves, strict=True) if t is not None)
        return super().detached(x)

    def _per_argument(self, leaf_values):
        """Rebuild each positional argument's structure around its leaves' values."""
        values = []  # (a loop, not a generator: see wrap)
        for start, n, rebuild in self.rebuilds:
            values.append(rebuild(leaf_values[start:start + n]))
        return tuple(values)

    def restore(self):
        """Write back the caller's original bytes, make frozen constants writable again, and
        drop the tape (``with`` does it on leaving)."""
        thaw(self.tape)
        self.tape.clear()
        super().restore()


def returned(t):
    """Traced or dual ``t``'s value as ``f`` returns it to the caller, detached (the reverse
    pass rewinds every buffer): a Python number where it stands for one (``s.item()``), NumPy's
    scalar where for one (``x[0]``, ``x.sum()``), else a copy of the array (under an
    enclosing differentiation, an array it traces)."""
    if t.weak:
        return weak_value(t.value)
    return t.value[()] if stands_for_scalar(t) else t.value.copy()


def _an_array(x):
    """Whether the argument ``x`` is an array object (a traced or dual one of an enclosing
    differentiation too), which ``f`` may compare by identity: not a number."""
    return type(x) is np.ndarray or (isinstance(x, Tracer) and not stands_for_scalar(x))


def _add_tangent(tangent, x, t, batch, flat=None):
    """``tangent += t``, ``tangent`` laid out as the argument ``x`` (after ``batch`` leading
    axes of directions). Where several places of ``x`` are one element of memory (a broadcast,
    a sliding window: ``views.overlaps_itself``), that element's tangent is the sum of its
    places' (the transpose of the gradient, which gives each place the element's), added at
    one place each: NumPy's ``+=`` through such a view keeps one place's alone. ``flat``:
    ``(memory, start)``, the one-dimensional tangent of all of the memory and ``x``'s first
    element in it, written instead of the view (an enclosing level's array, which refuses
    writes through views whose elements share memory)."""
    if not overlaps_itself(x):
        tangent[...] += t
        return
    x = memory(x)
    places = element_indices(x.shape, x.strides, 0, x.dtype.itemsize).reshape(-1)
    _, first, element = np.unique(places, return_index=True, return_inverse=True)
    # the sums as a product with a constant 0/1 matrix (element by place), which a tangent of
    # an enclosing differentiation (traced) goes through as well
    into = (element == np.arange(first.size)[:, None]).astype(tangent.dtype)
    sums = np.reshape(t, tangent.shape[:batch] + (-1,)) @ into.T
    if flat is not None:
        memory_, start = flat
        memory_[start + places[first]] += sums
    else:
        tangent[(slice(None),) * batch + np.unravel_index(first, x.shape)] += sums


def check_precision(direction, value, roles):
    """Refuse a float ``direction`` (a tangent, a cotangent) wider than its float ``value`` (a
    float64 direction for a float32 argument or output): it would be rounded to the value's
    precision first, a derivative along another direction than the one given, and JAX refuses
    it too. A Python number is weak (NEP 50: it takes the value's type, as in ``x + 1e-3``), and
    an integer direction holds exact values. ``roles``: ``(where, direction's name, value's
    name)`` for the message."""
    if direction is None or type(direction) in (bool, int, float, complex):
        return
    given = np.result_type(direction) if hasattr(direction, "dtype") \
        else np.asarray(direction).dtype
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind not in "fc" or given.kind not in "fc" \
            or np.can_cast(given, dtype, "safe"):
        return
    where, name, of = roles
    raise InvalidArgumentError(
        f"{where}: a {given} {name} was given for a {dtype} {of}; it would be rounded to {dtype} "
        f"first, a derivative along another direction than the one given. Pass it as {dtype} "
        f"(.astype(np.{dtype})), or compute in {given}.")


class ForwardDifferentiation(Differentiation):
    """One ``jvp``: its level, and its arguments, duals over private copies of the caller's
    memory. A reverse differentiation nested inside it sees it as its outer level."""

    def __init__(self):
        super().__init__()
        self.level = next(LEVELS)
        self.copies = {}  # id(owner) -> (all of the memory, its dual copy)
        self.given = {}  # id of an argument's array -> its dual (``_one_per_object``)
        self.given_duals = set()
        self.closed = {}  # ``shut``
        # The plain arrays conversions handed out of duals' memory, by the id of its owner: one
        # read once its dual's tangent is not zero is refused (``forward._check_alias``)
        self.handed = {}

    @property
    def adopter(self):
        """Itself: ``allocation.adopted`` asks the running levels for it (a property, not an
        attribute naming itself, a reference cycle)."""
        return self

    def call(self, f, primals, tangents):
        """``f(*primals)`` of duals carrying ``tangents``, with this differentiation running:
        the arguments are wrapped once it runs, so that a gradient inside ``f`` takes it as
        its outer level."""
        try:
            y = run(self, f, lambda g: g(*[drawing_argument(self.wrap(primal, tangent),
                                                            self.received)
                                            for primal, tangent
                                            in zip(primals, tangents, strict=True)]),
                    lambda error: written_elsewhere(error) if self.adopted
                    and "read-only" in str(error) else None)
        except BaseException:
            issue_held(self.level, issue=False)
            raise
        issue_held(self.level)  # a tangent's warnings and errors, once f has returned
        return y

    def ours(self, x):
        return type(x) is Dual and x.level == self.level

    def lift(self, y):
        """``y`` as a dual of this level (as ``ReverseTape.lift``): itself if it is one, else
        with a zero tangent."""
        if type(y) is Dual and y.level == self.level:
            return y
        y = enclosed(as_array(y), self.level)
        return Dual(y, zero_tangent(y, self.level), self.level)

    def caller_memory(self, dual, array):
        """``dual``, a dual of this level over ``array``, the memory of a caller of a
        differentiation nested inside this one (``ReverseTape.caller_memory``): forward mode
        undoes no write, so the inner one's own restoration leaves it as it was."""

    def constant(self, y, made=None):
        """A dual with a zero tangent is a constant of this level (``made``: how ``y`` was
        allocated, which only a replay's recording reads)."""
        return self.lift(y)

    def _adopted(self, x, first):
        """``adopt``: a private copy with a zero tangent, as an argument's (of an array of
        records, which is no argument, a copy of all of them as this level's constant, whose
        view ``x`` is: the records, some of them, or a field's)."""
        base = owner(x)
        if not wrapped(x) and id(base) not in self.copies and id(base) not in self.received:
            self.apart.add(id(base))
        if wrapped(x) or base.dtype.names is None:
            return self._leaf(x, None)
        if id(base) not in self.copies:
            copy = np.copy(base, order="K")
            if copy.strides != base.strides:
                raise UnsupportedOperationError(
                    "jvp: an array of records made before the call views memory laid out "
                    "with gaps; copy it in the function (r = R.copy()).")
            self.copies[id(base)] = (base, self.lift(copy))
        whole = self.copies[id(base)][1]
        return whole.restrided(x.shape, x.dtype, address(x) - address(base), x.strides)

    @property
    def shut(self):
        return self.closed

    def restore(self):
        """Make the caller's arrays ``adopt`` made read-only writable again (owners first),
        and write back the caller's original bytes."""
        closed, self.closed = self.closed, {}
        for a in closed.values():
            made_writable(a)
        super().restore()

    def wrap(self, primal, tangent):
        leaves, rebuild = flatten(primal)
        tangents = [None] * len(leaves) if tangent is None else flatten(tangent)[0]
        if len(tangents) != len(leaves):
            raise InvalidArgumentError("jvp: each tangent must have the structure of its primal.")
        wrapped = self.given_for(primal, rebuild, [self._one_per_object(x, self._leaf(x, t))
                                                   for x, t in zip(leaves, tangents, strict=True)])
        check_distinct_memory([whole for whole, _ in self.copies.values()])
        return wrapped

    def _one_per_object(self, x, dual):
        """``dual``, the dual ``_leaf`` made of the array ``x``, as one object per object of
        the caller's: f(a, a) gets one dual twice (``x is y``, as in NumPy), f(a, a[:]) two
        over the same memory and tangent."""
        if type(dual) is not Dual or not _an_array(x):
            return dual
        given = self.given.get(id(x))
        if given is not None:
            return given
        if id(dual) in self.given_duals:  # another object of the caller's has this one
            dual = dual[...]
        self.given[id(x)] = dual
        self.given_duals.add(id(dual))
        self.caller_of[id(dual)] = x
        return dual

    def _leaf(self, x, t):
        check_leaf(x)
        real = isinstance(x, float) or getattr(getattr(x, "dtype", None), "kind", "") == "f"
        if t is not None and real and np.iscomplexobj(t):
            # NumPy's cast would drop its imaginary part (a warning) or refuse in the middle
            raise InvalidArgumentError(
                f"jvp: a complex tangent was given for a real primal "
                f"({getattr(x, 'dtype', 'float')}): a real argument moves along real directions "
                "only. Pass the tangent's real part, or the primal as complex "
                "(x.astype(complex)) to move it off the real line.")
        check_precision(t, x, ("jvp", "tangent", "primal"))
        if self.level in BATCH:
            return self._batched_leaf(x, t, BATCH[self.level])
        if t is not None and np.shape(t) != np.shape(x):
            raise InvalidArgumentError(f"jvp: a tangent of shape {np.shape(t)} was given for a "
                                       f"primal of shape {np.shape(x)}.")
        level = self.level
        if t is None and (type(x) in (float, complex) or isinstance(x, np.inexact)):
            return x  # a number without a tangent: a constant, as NumPy's own (docs/api.md)
        if is_inexact_scalar(x):
            value = enclosed(as_array(np.result_type(x).type(x)), level)
            if wrapped(t):  # an enclosing level's value: it follows the tangent
                dual = Dual(value, enclosed(t.astype(value.dtype), level), level)
            else:
                dual = Dual(value, enclosed(np.array(0.0 if t is None else t, value.dtype),
                                            level), level)
            if type(x) is float or type(x) is complex:  # Python's: weak in NumPy's promotion
                weaken(dual)
            return dual
        if not (is_inexact_array(x) or (wrapped(x) and x.dtype.kind in "fc")):
            if t is not None and (wrapped(t) or np.any(np.asarray(t) != 0)):
                # it would be dropped: the derivative along it silently left out
                raise InvalidArgumentError(
                    f"jvp: a nonzero tangent was given for a primal that is not differentiated "
                    f"({type(x).__name__}{' of ' + str(x.dtype) if hasattr(x, 'dtype') else ''}"
                    "): integers and booleans have no tangent. Pass None for it, or pass the "
                    "primal as a float (2.0 rather than 2, x.astype(float)) to differentiate "
                    "it.")
            self.originals.keep_within(x)
            return x
        if wrapped(x) and stands_for_scalar(x):
            # An enclosing level's scalar is immutable, as a float argument is: a value of its
            # own at each place (not one buffer for the places that pass it), and no copy.
            tangent = zero_tangent(x, level)
            return Dual(x, tangent if t is None else enclosed(tangent + t, level), level,
                        x.weak)
        # One private copy of all of the memory behind x, laid out as it, so the caller's
        # arrays stay as they are and views of one buffer in several arguments keep sharing
        # it. An array of an enclosing differentiation (hvp's reverse pass, an outer jvp) is
        # copied through NumPy, so that level follows the copy.
        base = owner(x)
        foreign = not wrapped(x) and base.dtype.kind not in "fc"
        if foreign and id(base) in self.copies:
            raise UnsupportedOperationError(
                "jvp: two arguments view the memory of one array of another type than theirs "
                f"(floats viewing the bytes of {base.dtype}); pass copies of them.")
        if id(base) not in self.copies:
            # (floats viewing the bytes of integers, say: their own memory is all of it)
            whole = x if foreign else owner_view(x)
            copy = np.copy(whole, order="K")
            if copy.strides != whole.strides:
                raise UnsupportedOperationError(
                    "jvp: an argument views memory laid out with gaps; pass a copy of it.")
            # Enclosing levels follow what their values write into it and its tangent.
            copy = enclosed(copy, level)
            self.copies[id(base)] = (whole, Dual(copy, zero_tangent(copy, level), level))
        whole, dual = self.copies[id(base)]
        flat = None
        if not same_region(x, whole):
            flat = dual.reshape(-1, order="A")  # memory order: a view
            dual = flat.restrided(x.shape, x.dtype, address(x) - address(whole), x.strides)
        if t is not None:  # places that share memory: their tangents add up
            _add_tangent(dual.tangent, x, t, 0, None if flat is None or x.dtype != whole.dtype
                         else (flat.tangent, (address(x) - address(whole)) // x.itemsize))
        if type(x) is np.ndarray and not writeable(x):  # the private copy is read-only
            dual = Dual(dual.value.view(), dual.tangent, level)  # too, so writes raise as
            memory(dual.value).flags.writeable = False           # they would in NumPy
        return dual

    def _batched_leaf(self, x, t, size):
        """``_leaf`` of a batched pass (``forward.BATCH``): ``t`` holds ``size`` directions
        (``(size,) + x.shape``). Float arrays only, real, over memory without gaps or
        negative strides; anything else stops the pass."""
        level = self.level
        if wrapped(x) or is_inexact_scalar(x) or (is_inexact_array(x) and x.dtype.kind == "c"):
            unbatched(level, "an argument that is a number, complex, or traced")
        if not is_inexact_array(x):
            self.originals.keep_within(x)
            return x
        if t is not None and np.shape(t) != (size,) + np.shape(x):
            raise InvalidArgumentError("jvp: a batch of tangents must have the shape "
                                       f"{(size,) + np.shape(x)}, not {np.shape(t)}.")
        base = owner(x)
        if id(base) not in self.copies:
            whole = owner_view(x)
            copy = np.copy(whole, order="K")
            if copy.strides != whole.strides or any(s < 0 for s in whole.strides) \
                    or whole.size == 0:
                unbatched(level, "an argument over memory laid out with gaps")
            self.copies[id(base)] = (whole, Dual(copy, zero_tangent(copy, level), level))
        whole, dual = self.copies[id(base)]
        if not same_region(x, whole):
            if x.size == 0:
                unbatched(level, "an empty view as argument")
            offset = address(x) - address(whole)
            value = np.ndarray(x.shape, x.dtype, memory(dual.value), offset, x.strides)
            block = owner(dual.tangent)
            start = address(dual.tangent) - address(block) + offset
            tangent = np.ndarray((size,) + x.shape, x.dtype, block, start,
                                 dual.tangent.strides[:1] + x.strides)
            dual = Dual(value, tangent, level)
        if t is not None:
            _add_tangent(dual.tangent, x, t, 1)  # places that share memory: theirs add up
        if type(x) is np.ndarray and not writeable(x):
            dual = Dual(dual.value.view(), dual.tangent, level)
            memory(dual.value).flags.writeable = False
        return dual

    def output(self, out):
        """``(value, tangent)`` of one output leaf; a float that does not depend on the
        arguments has a zero tangent. A 0-d value is NumPy's scalar where it stands for one
        (``x.sum()``, ``x[0]``), and stays a 0-d array where NumPy's is one (``np.array(s)``),
        its tangent alike."""
        value, tangent = split(out, self.level)
        if type(out) is Dual and out.level == self.level and not stands_for_scalar(out):
            return value, tangent
        size = BATCH.get(self.level)
        if size is not None and tangent is None and (is_inexact_array(value)
                                                     or is_inexact_scalar(value)):
            tangent = np.zeros((size,) + np.shape(value), np.result_type(value))
        if tangent is None and (is_inexact_array(value) or is_inexact_scalar(value)
                                or wrapped(value)):
            tangent = np.zeros_like(value)
        return _result(value), _result(tangent)


def jvp(f, primals, tangents):
    """Run ``f(*primals)`` with ``tangents`` riding alongside; return ``(y, dy)``."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise InvalidArgumentError("jvp(f, primals, tangents): give primals and tangents as "
                                   "tuples, one entry per positional argument of f.")
    if len(primals) != len(tangents):
        raise InvalidArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents.")
    with ForwardDifferentiation() as d:
        y = d.call(f, primals, tangents)
    outputs, rebuild = flatten(y)
    pairs = [d.output(out) for out in outputs]
    return rebuild([value for value, _ in pairs]), rebuild([dy for _, dy in pairs])


def jvp_batched(f, primals, tangents, size, nested=False):
    """``jvp`` carrying ``size`` directions in one pass: each tangent given (and each returned)
    has a leading axis of length ``size``. Raises ``BatchUnsupported`` where the pass met
    something the batch does not handle (``forward.BATCH``), even if ``f`` caught that: the
    caller then takes one direction per pass. ``nested``: one reverse differentiation may run
    inside the pass (``forward.NESTED``), as ``f`` = a gradient does (``api.hessian``)."""
    if ACTIVE.running:
        raise BatchUnsupported("a nested differentiation")
    with ForwardDifferentiation() as d:
        BATCH[d.level] = size
        if nested:
            NESTED.add(d.level)
        try:
            y = d.call(f, primals, tangents)
            outputs, rebuild = flatten(y)
            pairs = [d.output(out) for out in outputs]
        finally:
            del BATCH[d.level]
            NESTED.discard(d.level)
            failed = d.level in FAILED
            FAILED.discard(d.level)
        if failed:
            raise BatchUnsupported("the batched pass met something it does not handle")
    return rebuild([value for value, _ in pairs]), rebuild([dy for _, dy in pairs])


def _result(x):
    """A 0-d plain result as a NumPy scalar, as NumPy itself returns them."""
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x
