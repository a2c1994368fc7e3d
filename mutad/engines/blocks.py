"""Straight-line Python for a run of a replayed program's steps.

A replay that interprets its steps pays, per operation, for a method call, a list of this
call's values, a record on the tape and, in the reverse pass, a dictionary of shadows looked
up and written by buffer key. For a long run of small elementwise operations that is most of
the cost: NumPy itself takes a few hundred nanoseconds per call on a short array. A
:class:`Block` turns such a run into two Python functions of straight-line code: the forward
pass, with each value a local variable, and the reverse pass, each step's pullback unrolled in
reverse order.

The cotangent of a value that only the block's own elementwise steps read is a local variable
too, and which of those exist at each point is known when the code is written, so the reverse
pass tests nothing about them. That knowledge rests on one assumption: that a cotangent
reaches each value the rest of the program reads, as a plain array of the block's own (as it
does unless a gradient stops on the way, or a large operation shares memory between
shadows). Where that fails the reverse pass hands its local cotangents over to the shadows'
dictionary and finishes the block one step at a time, as an interpreted replay does
(:meth:`Block.deopt`).

The code names no object, slot or buffer of its own: those are the arguments of a factory
that makes the functions, so that the runs of a loop body, which differ only in them, share
one compiled template (:data:`TEMPLATES`); and finishing their lines, which takes most of the
time of writing them (``Code.factory``), is done once for them (:data:`FINISHED`).

A float64 scalar's cotangent is NumPy's scalar, not a 0-d array: the same correctly rounded
operations at a tenth of a ufunc call's cost. Where both operands of an operation are NaN,
which of them comes out (the sign and payload of the NaN) is up to the code that computes it,
and NumPy's scalar arithmetic and its ufunc loops may choose differently; so wherever a block
computes with NumPy's scalars and gets a NaN, it computes that result again with the ufunc,
or with NumPy's scalar math where the program's own operator took it (``Pure._nan_again``),
as the tracing engine does.

A product of a cotangent and a partial is checked for a zero factor meeting a non-finite one
(``products.times``), which costs a dot product; where a stretch of the reverse pass reads and
writes local cotangents alone, its products are taken unchecked and the stretch is checked
once, at its end, and taken again, checked, where that check fails (:class:`Stretch`).

The steps write their own code (``emit``, ``emit_back``), each next to the pullback it unrolls,
so that both say the same thing: the same NumPy calls on the same arrays in the same order,
and so the same bits. A step that writes no code of its own (a write of another kind than the
lean elementwise one, a function's rule, a guard) is run as it is, and its record reversed in
its place (:class:`Opaque`), so that one block spans a whole loop body, views, writes and all.
"""

import collections
import functools
import math
import re
import sys
import threading

import numpy as np

from .products import UNTHREADED, ZERO, _sum_of_products, _vdot, times, times_scalar, unmasked
from ..core.shadows import Buffer
from ..core.tape import Tape

TEMPLATES = collections.OrderedDict()
"""Compiled factories by source, the least recently used dropped past :data:`KEPT`."""

KEPT = 256

_TEMPLATES_LOCK = threading.Lock()

FINISHED = collections.OrderedDict()
"""Per :meth:`Code.finishing` of a block's lines, what finishing them made
(:class:`Finished`), the least recently used dropped past :data:`KEPT`."""


def scalar_cotangents(buffer):
    """Whether the block computes the cotangents of ``buffer`` as NumPy's float64 scalars
    rather than 0-d arrays. (Not for other dtypes: a scalar's arithmetic may promote where
    ``out=`` would cast back.)"""
    return buffer.shape == () and buffer.dtype == np.float64


def _product(dy, p, out):
    """``times(dy, p, out)``; ``out`` None: a new array of ``dy``'s dtype, ``dy * p`` (half the
    cost of ``multiply`` into a new ``empty_like``) where that has it (not NumPy's float64
    number times a float32 ``dy``: NEP 50 promotes it)."""
    if unmasked(dy, p):
        if out is not None:
            return np.multiply(dy, p, out)
        product = dy * p
        return product if product.dtype == dy.dtype else np.multiply(dy, p, np.empty_like(dy))
    return times(dy, p, np.empty_like(dy) if out is None else out)


def _with_a_zero(dy, p):
    """``products.times`` of a float64 cotangent and its partial, one of them zero: the
    product (a zero of its sign) where the other is finite, else zero."""
    return dy * p if math.isfinite(dy) and math.isfinite(p) else ZERO


class Retake(Exception):
    """A stretch of products taken unchecked (:class:`Stretch`) met a partial it cannot take
    so (not a vector of the cotangent's length, nor a finite nonzero number): it fails."""


def _retake():
    raise Retake


def _added_in_place(target, g):
    """``target + g`` for NumPy's float64 scalars whose sum is NaN, as the shadows compute it:
    ``shadow += g`` into a 0-d array (``Shadows.add``). Where both are NaN, NumPy's loop that
    writes into its first operand keeps the second one's NaN (its sign and payload), where
    ``np.add`` into a new array keeps the first one's."""
    total = np.array(target)
    total += g
    return total[()]


def as_traced(value):
    """``value`` as tracing holds a value of the program for the partials that read it:
    NumPy's real or complex scalar as a 0-d array; anything else as it is."""
    return np.array(value) if isinstance(value, np.inexact) else value


def partial_as_traced(partial, y, *values):
    """``partial(y, *values)`` of NumPy's scalars (a replay's values of 0-d buffers) computed
    on them as tracing holds them (:func:`as_traced`), where computed on the scalars it is a
    NaN: which of two NaN operands comes out of ``a * b`` (its sign and payload) is up to the
    code that computes it, and NumPy's scalar math and its loops over 0-d arrays choose
    differently. NumPy's scalar, as the partial of the scalars; the floating-point events of
    computing it again are not heard again (those of the scalars' were)."""
    with np.errstate(all="ignore"):
        p = partial(as_traced(y), *map(as_traced, values))
    return p[()] if type(p) is np.ndarray and p.ndim == 0 else p


def _number(y):
    """A value that stands for a Python number (``arraylike.weak``) as one."""
    return y.item() if isinstance(y, np.generic) else y


HELPERS = {"number": _number, "product": _product, "multiply": np.multiply, "add": np.add,
           "added_in_place": _added_in_place, "partial_as_traced": partial_as_traced,
           "add_reduce": np.add.reduce,
           "copyto": np.copyto,
           "empty_like": np.empty_like, "array": np.array, "with_a_zero": _with_a_zero,
           "times_scalar": times_scalar, "isfinite": math.isfinite,
           "sum_of_products": _sum_of_products, "vdot": _vdot, "ndarray": np.ndarray,
           "float64": np.float64, "retake": _retake}


def unchecked(buffer):
    """Whether a stretch may take the products of ``buffer``'s cotangent unchecked
    (:class:`Stretch`): a float64 vector short enough that checking a product is a dot
    product of BLAS's (``products.UNTHREADED``), which is most of its cost."""
    return len(buffer.shape) == 1 and buffer.dtype == np.float64 \
        and buffer.shape[0] <= UNTHREADED


class Pair:
    """A reverse line in two forms: ``careful``, as it runs alone, and ``fast``, as a
    :class:`Stretch` runs it before it checks its results (None: it has none)."""

    __slots__ = ("fast", "careful")

    def __init__(self, fast, careful):
        self.fast = fast
        self.careful = careful


def careful(lines):
    """``lines`` with each :class:`Pair` in its careful form."""
    return [line.careful if type(line) is Pair else line for line in lines]


def _written_out(items):
    """The reverse lines ``items`` as :meth:`Code.rendered` writes them, where each run of
    :class:`Stretch`es among them is written in its careful form (none of them writes into a
    vector it checks at the end: ``Code._stretch``'s sinks), so that they never leave the
    compiled pass; else None."""
    lines, run = [], []
    for item in [*items, None]:
        if type(item) is Stretch:
            run.append(item)
            continue
        if run:
            touched = set().union(*(stretch.touched for stretch in run))
            if any(key in touched and unchecked(buffer)
                   for key, buffer in run[-1].closed[0].items()):
                return None
            lines += careful([line for stretch in run for line in stretch.lines])
            run = []
        if item is not None:
            if type(item) is not str and type(item) is not _Zeroing:
                return None
            lines.append(item)
    return lines


class Stretch:
    """The reverse lines of one step that read and write local cotangents alone (no shadow,
    no entry of the dictionary, no deopt), strings and :class:`Pair`s; consecutive ones are
    one stretch of the block's reverse pass (:meth:`Code.rendered`).

    Checking each product of a cotangent and a partial (``products.times``: a zero factor
    gives zero whatever the other) is a dot product per product; a stretch takes its products
    unchecked instead, and checks once, at its end, that the cotangents it wrote hold no NaN.
    That settles every product: one that ``times`` would mask is a zero meeting an infinity or
    a NaN, whose plain product is a NaN, and a NaN stays one through every line of a stretch
    (products, sums, copies of vectors of one length; a product whose partial is not a vector
    of that length, which ``times`` might mask, leaves the unchecked stretch: ``retake``). Any
    other product is ``times``' own, bit for bit, with the same floating-point events. Where
    the check fails, or a line raises, the cotangents the stretch began with are restored
    (their arrays copied first), the events it logged forgotten (``Shadows.events``: a
    replay's whose events can be taken back; where they cannot, printed or handed to a
    callback of the caller's, the stretch is not tried), and the block's reverse pass is
    finished from there one step at a time, each product checked (``Block.deopt``), as are
    its later calls, compiled again without stretches: a block that meets such a product
    once is likely to meet it again.

    ``opened``: the live local cotangents (key -> buffer) where its lines begin; ``entry``:
    ``(name, buffer)`` of a cotangent the step took out of the dictionary, which its lines may
    write, or None; ``touched``: the keys of the local cotangents its lines may write or bind;
    ``closed``: the live ones where they end, and which of them hold one array
    (``Code.sharing``); ``start``: ``(k, entry)``, its step and the name of the shadow entry
    the step took out of the dictionary (``Code.deopt``)."""

    __slots__ = ("lines", "opened", "entry", "touched", "closed", "start")

    def __init__(self, lines, opened, entry, touched, closed, start):
        self.lines = lines
        self.opened = opened
        self.entry = entry
        self.touched = touched
        self.closed = closed
        self.start = start


class Code:
    """The source of one block as its steps write it, and the constants it names.

    ``internal``: the buffer keys whose cotangents are local variables (values made in the
    block that only the block's own elementwise steps read); ``unreached``: those of values
    no cotangent can reach (only guards read them); ``guarded``: those of the buffers whose
    bytes the call saves before their first write (``Tape.guard``: the arguments');
    ``shared``: the indices bound so far by the blocks of the program (:meth:`bind`);
    ``stretches``: whether runs of local lines take their products unchecked (:class:`Stretch`).
    """

    def __init__(self, internal, unreached=frozenset(), guarded=(), shared=None,
                 stretches=True, unstored=frozenset()):
        self.internal = internal
        self.unstored = unstored  # the slots made whose values the program's values never hold
        self.stretches = stretches
        self.stretched = False  # whether some run of its lines is a stretch
        self.unreached = unreached
        self.guarded = guarded
        self.shared = {} if shared is None else shared  # see bind
        self.asked = set()  # the guarded keys whose saves the lines so far have asked for
        self.constants = []  # the factory's arguments, named k0, k1, ...
        self.named = {}  # id of an object, or (kind, number), -> its name
        self.held = []  # the indices named by id whose constant is an equal one (bind)
        self.indices = {}  # the name of an index -> its value's key (``_index``): bind
        self.locals = {}  # slot -> the local holding its value
        self.cotangents = {}  # buffer key -> the local holding its cotangent
        self.forward = []
        self.reverse = []
        self.records = []  # per step, the arguments of its ``back`` after the shadows, by
        # name (a list of names for a list), for Block.deopt
        self.kept = {}  # the locals the reverse pass reads, in order of first use
        self.live = {}  # key -> buffer: the local cotangents that hold an array, at this point
        self.shadows = {}  # a place's layout -> the local holding ``shadows.of(place)``
        self.views = 0  # the locals of shadows named so far
        self.arrays = {}  # the name of a finite nonzero float -> that of the same float64 0-d array
        self.makers = {}  # buffer key -> the step of the block that makes it
        self.sharing = {}  # buffer key -> that of the other local cotangent holding its array
        # (index of its line in forward, local, the ufunc's call) per NaN check of an
        # arithmetic operation on NumPy's scalars: defer_nan_checks
        self.nan_checks = []
        # the reverse lines ``g = multiply(dy, k, dy)`` of a real float dy by a constant
        self.real_products = set()
        # (array, index) -> the local holding that element as a step read it, while no line
        # since may have written into memory (``forget``): a write of the element keeps it
        # from there rather than reading it again
        self.elements = {}
        # while the lines are finished: the constants finishing them bound (``derive``)
        self.derived = None
        # the last element of a flat shadow read and zeroed in the reverse pass (``took``)
        self.taken = None
        # buffer key -> (place, flag) of the saved write since which no step's reverse lines
        # read the buffer's memory (``rewrite``), and the steps whose copies may go (``dropped``)
        self.rewritten = {}
        self.dropped = set()

    def read_back(self, keys):
        """Before a step's lines: its reverse lines may read the memory of the buffers keyed
        ``keys`` (None: of any buffer), so no later write's copy into them may go
        (:meth:`rewrite`)."""
        if keys is None:
            self.rewritten.clear()
        else:
            for key in keys:
                self.rewritten.pop(key, None)

    def rewrite(self, place, eligible, k):
        """A write into ``place`` whose overwritten bytes step ``k`` copies (where
        ``Tape.copied`` says so) and copies back in the reverse pass: ``(flag, first)``, the
        local that says, as the forward pass runs, whether its copy may go (None: it may not),
        and whether the write is the first of its run.

        A run is a write into a region, then writes into that same region, with no line
        between whose reverse pass may read the buffer's memory (:meth:`read_back`): the
        reverse pass puts back the bytes before the first write, and nothing reads the region
        before then, so the bytes the later writes overwrote need not be put back on the way.
        A later write's copy goes only where the first write was copied (the flag: an inverse
        of the first would compute back from the bytes the later writes left); the writes
        between that were inverted compute back from such bytes too, into the region the
        first's copy then covers. ``eligible``: the write's own reverse lines read nothing of
        the buffer's memory."""
        key = place.buffer.key
        run = self.rewritten.pop(key, None)
        if not eligible:
            return None, False
        if run is not None and _same_region(run[0], place):
            self.rewritten[key] = run
            self.dropped.add(k)
            return run[1], False
        flag = f"again{k}"
        self.rewritten[key] = (place, flag)
        return flag, True

    def defer_nan_checks(self):
        """Check a chain of arithmetic on NumPy's scalars for a NaN once, at its end.

        Each such operation's line is followed by its check: ``y = y if y == y else
        ufunc(a, b)``, the NaN as the ufunc makes it (module docstring). Where ``y`` is read by
        the forward pass only as an operand of one later such operation (a local the block
        alone reads, stored nowhere; the reverse pass reads it after the forward pass ends),
        its check is left to that operation's: a sum, difference, product or quotient with a
        NaN operand is a NaN, so a chain whose last value is not a NaN had none on the way,
        and each value's check would have passed. Where the last value is a NaN, its check
        does what the checks left out would have done, in their order: each value of the
        chain that is a NaN is computed again by the ufunc, from its operands as they are
        then, which are the operands the checks would have left; then the last one. (A NaN
        operand makes NumPy's scalar arithmetic raise no floating-point event, so the events
        are those of the checks on the way, too.)"""
        if not self.nan_checks:  # (most blocks: their lines are not scanned)
            return
        checks = {y: (index, call) for index, y, call in self.nan_checks}
        at = {index: y for index, y, _ in self.nan_checks}
        uses = collections.defaultdict(list)  # local -> the forward lines that name it
        findall = _LOCAL.findall
        for i, line in enumerate(self.forward):
            for name in set(findall(line)):
                uses[name].append(i)
        reader = {}  # a deferred local -> the checked operation that reads it
        for y, (index, _) in checks.items():
            other = [i for i in uses[y] if i != index - 1 and i != index]
            if len(other) == 2 and other[1] == other[0] + 1 and other[1] in at \
                    and other[0] > index:
                reader[y] = at[other[1]]
        if not reader:
            return
        chains = collections.defaultdict(list)  # the last value -> its chain's others
        for y in sorted(reader, key=lambda y: checks[y][0]):
            last = y
            while last in reader:
                last = reader[last]
            chains[last].append(y)
        lines = {checks[y][0]: [] for y in reader}
        for last, chain in chains.items():
            index, call = checks[last]
            lines[index] = [f"if {last} != {last}:", *indent([
                line for y in chain for line in (f"if {y} != {y}:",
                                                 f"    {y} = {checks[y][1]}")]),
                f"    {last} = {call}"]
        self.forward = [line for i, line in enumerate(self.forward)
                        for line in lines.get(i, (line,))]
        self.nan_checks = []

    def fold_negations(self):
        """Take a product by exactly -1 and the next product by a constant as one product.

        In ``b = multiply(a, k1, a)``, then ``c = multiply(b, k2, b)`` (subtract's -1, then
        2 * u's 2), where ``a`` is a real float array, ``k1`` is -1 and ``k2`` a finite
        nonzero real number, and ``b`` is named nowhere else, the two lines are one:
        ``c = multiply(a, -k2, a)``, the same bits. The product by -1 is exact (a
        negation, in any real float loop, and so is its cast back into ``a``), and rounding
        to nearest is symmetric in the sign, so (-x) * k2 and x * (-k2) round alike, with
        the same overflow; a NaN in ``a`` is a multiply's NaN operand, passed on as it is
        (quieted, its sign kept: a product by -1 is no negative), and an invalid operation
        (a signalling NaN) is the first product's either way, once.

        So too on NumPy's real float scalars: ``b = a * k1``, then ``c = b * k2``, each
        followed by its NaN check (``times_scalar`` of its operands), are ``c = a * -k2`` and
        its check, where ``k1`` is a Python number or of ``k2``'s type (the product's type
        is then ``a * k2``'s). Where ``a`` is a NaN, the product by -1 and its check made
        ``a`` quieted (a signalling one's invalid operation raised by the product, then by
        the check's multiply) and the second passed that on; the product by -k2 and its
        check do the same, in the same order."""
        lines = self.reverse
        counted = []

        def count(name):
            """How many times the lines name the local ``name`` (counted once, where a pair
            of lines is a candidate: in most blocks none is)."""
            if not counted:
                counted.append(collections.Counter(_COTANGENT.findall(
                    "\n".join([*self.forward, *lines]))))
            return counted[0][name]
        negations = {}  # a constant's name -> that of its negation
        i = 0
        while i + 1 < len(lines):
            scalar = self._scalar_negation(lines, i, count)
            if scalar is not None:
                indent_, c, a, k2 = scalar
                negated = negations.get(k2)
                if negated is None:
                    negated = negations[k2] = self.derive(("negative", k2))
                line = f"{c} = {a} * {negated}"
                self.real_products.add(line)
                lines[i:i + 6] = [indent_ + line, f"{indent_}if {c} != {c}:",
                                  f"{indent_}    {c} = times_scalar({a}, {negated})"]
                continue
            first, second = lines[i], lines[i + 1]
            one = type(first) is str and _PRODUCT.fullmatch(first)
            two = type(second) is str and _PRODUCT.fullmatch(second)
            if one and two and one[1] == two[1] and one[3] == one[5] and two[3] == two[5] \
                    and two[3] == one[2] and count(one[2]) == 3 \
                    and first.strip() in self.real_products \
                    and second.strip() in self.real_products \
                    and _real_number(self.constant(one[4])) == -1:
                number = _real_number(self.constant(two[4]))
                if number is not None and math.isfinite(number) and number != 0:
                    negated = negations.get(two[4])
                    if negated is None:
                        negated = negations[two[4]] = self.derive(("negative", two[4]))
                    line = f"{two[1]}{two[2]} = multiply({one[3]}, {negated}, {one[3]})"
                    self.real_products.add(line.strip())
                    lines[i:i + 2] = [line]
                    continue
            i += 1

    def _scalar_negation(self, lines, i, count):
        """``(indent, c, a, k2)`` where ``lines[i:i + 6]`` are ``b = a * k1`` and ``c = b *
        k2`` on real float scalars, each with its NaN check, that ``fold_negations`` takes as
        one product, else None."""
        first = lines[i]  # most lines are no scalar product: asked first, before the window
        one = type(first) is str and (_SCALAR_PRODUCT.fullmatch(first)
                                      or _SCALAR_NEGATION.fullmatch(first))
        if not one:
            return None
        window = lines[i:i + 6]
        if len(window) < 6 or any(type(line) is not str for line in window):
            return None
        if one.lastindex == 3:  # ``b = -a``, the product by -1 its check names
            check = _SCALAR_CHECK.fullmatch(window[2])
            if check is None:
                return None
            one = _SCALAR_PRODUCT.fullmatch(f"{one[1]}{one[2]} = {one[3]} * {check[1]}")
        two = _SCALAR_PRODUCT.fullmatch(window[3])
        if not two or one[1] != two[1] or two[3] != one[2] \
                or count(one[2]) != 6 or window[0].strip() not in self.real_products \
                or window[3].strip() not in self.real_products:
            return None
        for (_, b, a, k), check in ((one.groups(), window[1:3]), (two.groups(), window[4:6])):
            if check != [f"{one[1]}if {b} != {b}:", f"{one[1]}    {b} = times_scalar({a}, {k})"]:
                return None
        k1, k2 = self.constant(one[4]), self.constant(two[4])
        if _real_number(k1) != -1 or type(k2) not in (float, int, np.float64) \
                or type(k1) not in (float, int, type(k2)):
            return None
        number = _real_number(k2)
        if number is None or not math.isfinite(number) or number == 0:
            return None
        return one[1], two[2], one[3], two[4]

    def bind(self, value, kind=None):
        """The name of a constant: an object, or the number ``value`` of ``kind`` (a slot, a
        buffer key).

        An index (integers, slices, tuples of them) is bound as the first equal one that the
        blocks of the program bound: a loop's steps record the same indices again and again,
        each its own object, and where a program is long a replay waits on memory more than
        it computes (seidel_2d's, at PolyBench's MINI size, is 213,000 steps): one object
        for each index takes 40% off its time there.

        Each index bound takes a name of its own, even where it equals another: the blocks of
        a loop body differ in which of their indices happen to be equal (``j == i + 1``), and
        names given by value would make their sources differ too (a template per
        coincidence). Where the lines ask whether two indices are the same, they compare
        what the names stand for (:meth:`alike`)."""
        if kind is None and type(value) in _INDEX_TYPES:
            index = _index(value)
            if index is not None:
                # (the same object bound again is the same index, and takes its name again;
                # not an integer, which Python shares between equal ones: equal by chance)
                tag = None if type(value) is int else id(value)
                name = self.named.get(tag)
                if name is None:
                    name = numbered("k", len(self.constants))
                    self.constants.append(self.shared.setdefault(index, value))
                    self.indices[name] = index
                    if tag is not None:
                        self.named[tag] = name
                        self.held.append(value)  # (its id names no other object meanwhile)
                return name
        tag = id(value) if kind is None else (kind, value)
        name = self.named.get(tag)
        if name is None:
            name = self.named[tag] = numbered("k", len(self.constants))
            self.constants.append(value)
        return name

    def alike(self, line, other):
        """Whether two lines say the same, an index named in either standing for its value
        (:meth:`bind`)."""
        if line == other:
            return True
        indices = self.indices

        def read(match):
            index = indices.get(match[0])
            return match[0] if index is None else repr(index)
        return _CONSTANT.sub(read, line) == _CONSTANT.sub(read, other)

    def read_as(self, name):
        """What ``name`` stands for where lines compare it: an index's value, else the name."""
        return self.indices.get(name, name)

    def constant(self, name):
        """The value of the constant named ``name``, or None if ``name`` is not one."""
        if name[0] != "k" or not name[1:].isdigit():
            return None
        return self.constants[int(name[1:])]

    def derive(self, recipe):
        """The name of a constant that finishing the lines makes of the block's own:
        ``("negative", name)``, the negation of the constant ``name`` (``fold_negations``);
        ``("keys", names)``, the buffer keys of the local cotangents ``names`` (``deopt``).
        Written down (:attr:`derived`) for the blocks that reuse the finishing
        (:meth:`factory`), with its name and what finishing may read of it (``_as_read``)."""
        kind, source = recipe
        if kind == "negative":
            value = self.constant(source)
            if type(value) is np.ndarray:
                value = np.negative(value, out=value.copy())
                value.flags.writeable = False
            else:
                value = -value
        else:
            keys = {name: key for key, name in self.cotangents.items()}
            value = tuple(keys[name] for name in source)
        name = self.bind(value)
        if self.derived is not None:
            self.derived.append((recipe, name, _as_read(value)))
        return name

    def finishing(self):
        """All that finishing the lines (:meth:`factory`) reads, as a key: the lines, the NaN
        checks and products the steps noted, the locals kept, what it may read of each
        constant (``_as_read``) and of each :class:`Stretch` (the names of its cotangents and
        the shapes ``scalar_cotangents`` and ``unchecked`` ask about); None where a reverse
        item is of another kind."""
        reverse = []
        for item in self.reverse:
            if type(item) is str:
                reverse.append(item)
            elif type(item) is Stretch:
                stretch = self._stretch_read(item)
                if stretch is None:
                    return None
                reverse.append(stretch)
            else:
                return None
        return ("\n".join(self.forward), tuple(self.nan_checks), tuple(reverse),
                frozenset(self.real_products), tuple(self.kept), self.stretches,
                tuple([_as_read(value) if type(value) in _REAL_NUMBERS else type(value)
                       for value in self.constants]))

    def _stretch_read(self, stretch):
        """What :meth:`rendered` reads of ``stretch``, its buffers by their cotangents' names;
        None where a line is of another kind or a buffer has no local cotangent."""
        names = self.cotangents
        lines = []
        for line in stretch.lines:
            if type(line) is str:
                lines.append(line)
            elif type(line) is Pair:
                lines.append((line.fast, line.careful))
            else:
                return None
        live, sharing = stretch.closed
        entry = stretch.entry
        try:
            return (tuple(lines),
                    tuple([(names[key], scalar_cotangents(buffer), unchecked(buffer))
                           for key, buffer in stretch.opened.items()]),
                    None if entry is None else (entry[0], scalar_cotangents(entry[1])),
                    tuple(sorted(names[key] for key in stretch.touched)),
                    tuple([(names[key], unchecked(buffer)) for key, buffer in live.items()]),
                    tuple([(names[a], names[b]) for a, b in sharing.items()]), stretch.start)
        except KeyError:
            return None

    def factory(self):
        """The compiled ``make`` of the block, once its steps wrote their lines: the NaN checks
        deferred (:meth:`defer_nan_checks`), the stretches written out (:meth:`rendered`),
        the negations folded (:meth:`fold_negations`), the source compiled.

        The runs of a loop body write the same lines and differ in their constants alone;
        finishing them reads nothing else than :meth:`finishing` holds, so where another
        block's lines were finished with the same key, this one takes its source and derives
        its own constants as that one did (:meth:`derive`), in the same order, each of which
        must come out under the same name and read the same (else the lines are finished
        here)."""
        shape = self.finishing()
        if shape is not None:
            with _TEMPLATES_LOCK:
                finished = FINISHED.get(shape)
                if finished is not None:
                    FINISHED.move_to_end(shape)
            if finished is not None and self._derived_again(finished.derived):
                self.stretched = finished.stretched
                return _factory(finished.source)
        self.derived = []
        self.defer_nan_checks()
        self.reverse = self.rendered()
        self.fold_negations()
        source = self.source()
        if shape is not None:
            with _TEMPLATES_LOCK:
                FINISHED[shape] = Finished(source, tuple(self.derived), self.stretched)
                if len(FINISHED) > KEPT:
                    FINISHED.popitem(last=False)
        self.derived = None
        return _factory(source)

    def _derived_again(self, derived):
        """Derive the constants ``derived`` lists (:meth:`derive`); whether each came out
        under its name there, reading the same. Where one does not, those bound are taken
        back."""
        count = len(self.constants)
        for recipe, name, read in derived:
            try:
                again = self.derive(recipe)
            except (KeyError, TypeError):
                again = None
            if again != name or _as_read(self.constant(again)) != read:
                for tag in [tag for tag, bound in self.named.items()
                            if int(bound[1:]) >= count]:
                    del self.named[tag]
                del self.constants[count:]
                return False
        return True

    def key(self, buffer):
        return self.bind(buffer.key, "key")

    def before_write(self, key):
        """The lines a write into the buffer named ``key`` runs first (``Tape.before_write``,
        which saves the caller's bytes once): none for a buffer the call made, which no save
        awaits, nor after the block's first write into it (whose lines, and those of the step
        that writes where they do not run, have asked already)."""
        if key not in self.guarded or key in self.asked:
            return []
        self.asked.add(key)
        return ["if tape.guards:", f"    tape.before_write({self.bind(key, 'key')})"]

    def element(self, array, index):
        """The local holding the element ``array[index]`` as a step read it (:attr:`elements`),
        or None; ``index`` names the index. A tuple of one integer stands for that integer
        where the element was read with it (``u[i]`` read, ``u[i] += ...`` written: a write
        records its index as a tuple), both one element of a vector."""
        index = self.read_as(index)
        read = self.elements.get((array, index))
        if read is None and type(index) is tuple and index[0] is tuple and len(index[1]) == 1 \
                and index[1][0][0] is int:
            read = self.elements.get((array, index[1][0]))
        return read

    def forget(self, local=None):
        """The elements read (:attr:`elements`) forgotten: all of them, or those ``local``
        holds or was read from (a local let go)."""
        if local is None:
            self.elements.clear()
        else:
            self.elements = {read: held for read, held in self.elements.items()
                             if held != local and read[0] != local}

    def local(self, slot):
        name = self.locals.get(slot)
        if name is None:
            # (interned: the blocks of a program keep their names, the same few hundred)
            name = self.locals[slot] = numbered("v", len(self.locals))
        return name

    def value(self, slot):
        """The local holding the value at ``slot``, read from the program's values at its
        first use in the block."""
        if slot not in self.locals:
            self.forward.append(f"{self.local(slot)} = values[{self.bind(slot, 'slot')}]")
        return self.locals[slot]

    def made(self, slot, expression, internal):
        """A forward line that makes the value at ``slot``; stored back into the program's
        values unless only the block reads it. Returns its local."""
        name = self.local(slot)
        self.forward.append(f"{name} = {expression}")
        if not internal and slot not in self.unstored:
            self.forward.append(f"values[{self.bind(slot, 'slot')}] = {name}")
        return name

    def keep(self, name):
        """Name a local of the forward pass that the reverse pass reads."""
        name = sys.intern(name)
        self.kept.setdefault(name, None)
        return name

    def cotangent(self, buffer):
        """The local holding ``buffer``'s cotangent if the block keeps it in one, else None."""
        if buffer.key not in self.internal:
            return None
        name = self.cotangents.get(buffer.key)
        if name is None:
            name = self.cotangents[buffer.key] = f"c{len(self.cotangents)}"
        return name

    def take(self, buffer):
        """The local cotangent of a value the block made, for the step that made it (no other
        step touches it after), or None if none reaches it: then the step has nothing to do.
        (Whether another local holds its array too: :meth:`shares`, asked first.)"""
        if self.live.pop(buffer.key, None) is None:
            return None
        self.unshare(buffer.key)  # the other holds it alone from here on
        return self.cotangent(buffer)

    def shares(self, buffer):
        """Whether ``buffer``'s local cotangent holds the array another local cotangent holds
        (:meth:`share`): then neither may be written in place, nor handed over."""
        return buffer.key in self.sharing

    def share(self, first, second):
        """The local cotangents of the buffers ``first`` and ``second`` become one array, the
        ``dy`` of an elementwise step whose partials in both are one (``a + b``), in place of
        a copy for one of them. Only where both are made by steps whose reverse lines heed
        :meth:`shares` (the lean elementwise ones: ``replay.Pure``)."""
        self.sharing[first.key], self.sharing[second.key] = second.key, first.key

    def unshare(self, key):
        other = self.sharing.pop(key, None)
        if other is not None:
            del self.sharing[other]

    def accumulate(self, buffer, local, g):
        """Lines for ``local += g``, ``local`` the live local cotangent of ``buffer`` holding
        an array: into a new array where it shares its array (:meth:`shares`), the same sum
        (of one element, the shadows' own: their copy, then ``+=``, for NumPy's loop that
        writes into its first operand keeps the second one's NaN there, where ``local + g``
        keeps the first one's; and ``local + g`` of 0-d arrays is a scalar, not an array)."""
        if buffer.key not in self.sharing:
            return [f"{local} += {g}"]
        self.unshare(buffer.key)
        if math.prod(buffer.shape) == 1:
            return [f"{local} = {local}.copy()", f"{local} += {g}"]
        return [f"{local} = {local} + {g}"]

    def add(self, buffer, g):
        """Lines that accumulate the array ``g``, which nothing else holds, into ``buffer``'s
        cotangent, as ``Pure.back`` does: it becomes the cotangent if there is none. For a
        float64 scalar ``g`` is NumPy's scalar (:func:`scalar`), an array in the shadows."""
        local = self.cotangent(buffer)
        if local is not None:
            if buffer.key in self.live:
                return self.plus(local, g) if scalar_cotangents(buffer) else \
                    self.accumulate(buffer, local, g)
            self.live[buffer.key] = buffer
            return [] if g == local else [f"{local} = {g}"]  # (made in it: _new_local)
        key = self.key(buffer)
        shadow = f"array({g})" if scalar_cotangents(buffer) else g
        return [f"x = get({key})", "if x is None:",
                f"    entries[{key}] = [{self.bind(buffer)}, {shadow}, None, None]", "else:",
                f"    x[1] += {g}"]

    @staticmethod
    def plus(target, g, in_place=True):
        """Lines for ``target += g`` on NumPy's float64 scalars, a NaN as tracing makes it: as
        the shadows' ``+=`` into a 0-d array (``_added_in_place``), or, not ``in_place``, as
        ``np.add`` into a new array (an element of a shadow, ``shadow[key] += dy``)."""
        again = "added_in_place" if in_place else "add"
        return [f"t = {target} + {g}", f"{target} = t if t == t else {again}({target}, {g})"]

    def took(self, flat, element):
        """The line that zeroes the element ``element`` (its name) of the flat shadow
        ``flat`` where its cotangent was just read into ``dy``, as a marker that
        :meth:`added_back` may take out again."""
        zeroed = _Zeroing(f"{flat}[{element}] = 0.0")
        self.taken = (flat, self.constant(element), zeroed)
        return zeroed

    def added_back(self, flat, element, g):
        """Lines for ``flat[element] += g`` (NumPy's float64 scalars, as :meth:`plus` writes
        it, not in place) where the element was the last one read and zeroed (:meth:`took`:
        ``x[i] -= ...`` or ``x[i] /= ...``, then ``x[i]`` read, its cotangent taken, then given
        back), and no line since reads or writes it by any route; else None.

        Then the element need not be zeroed: the sum into the zero is ``0.0 + g``, stored over
        what the element holds. Where ``g`` is the cotangent read there, each name between
        ``dy`` and ``g`` a plain copy of the one before, made where every line runs, the
        element holds ``g``'s bits already, which ``0.0 + g`` gives again wherever ``g`` is
        nonzero and not a NaN: it is left as it is (a zero, whose sign the sum makes
        positive, and a NaN are summed). The lines since the read are read for all that; where
        one cannot be told apart (one that reaches the shadows otherwise, a stretch that may
        leave the compiled pass, a way out of it) the element is zeroed and added into as
        before."""
        taken = self.taken
        if taken is None or taken[0] != flat or taken[1] != self.constant(element) \
                or type(taken[1]) is not int:
            return None
        self.taken = None
        lines = self.reverse
        start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i] is taken[2]), None)
        if start is None:
            return None
        owners = {name: layout[1] if layout[0] == "flat" else layout[0]
                  for layout, name in self.shadows.items()}
        since = _written_out(lines[start + 1:])
        if since is None:
            return None
        copies, view = {"dy"}, False
        for line in since:
            reaching, named, viewed, copy, assigned = _read_line(line)
            if reaching or not self._apart(named, flat, taken[1], owners):
                return None
            if viewed:  # (a view of a shadow made since, by a line read here)
                view = view or line.startswith("view = ")
                if not view:
                    return None
            if copy is not None and copy[1] in copies:
                copies.add(copy[0])
                continue
            copies -= assigned
        del lines[start]
        zero = self.bind(ZERO)
        stored = [f"t = {zero} + {g}", f"{flat}[{element}] = t if t == t else add({zero}, {g})"]
        return [f"if not ({g} and {g} == {g}):", *indent(stored)] if g in copies else stored

    def _apart(self, named, flat, element, owners):
        """Whether a reverse line that reaches the shadows only through the locals holding
        them, and names those ``named`` (``_read_line``), leaves the element ``element`` of the
        flat shadow ``flat`` alone: that one only at other elements or by slices that miss it,
        another only where it is another buffer's (``owners``: their buffers' keys)."""
        for name, index in named:
            if name == flat:
                at = self.constant(index) if index else None
                if type(at) is int:
                    if at == element:
                        return False
                elif type(at) is slice and all(type(part) is int and part >= 0 for part in (
                        at.start, at.stop, at.step)):
                    if element in range(at.start, at.stop, at.step):
                        return False
                else:
                    return False
            elif name not in owners or owners[name] == owners.get(flat):
                return False
        return True

    def shadow(self, place, always):
        """``(lines, expression)``: the shadow of ``place`` (``shadows.of``) where a reverse
        line adds into it. Once a line that always runs has made it, it is a local, for every
        place of the same layout: until the block's reverse pass ends, or a step whose
        reverse may take a shadow out of the dictionary (``Opaque``, a write of a whole buffer)
        forgets it, nothing but adding or zeroing in place touches that shadow."""
        layout = (place.buffer.key, place.whole, place.offset, place.shape, place.strides,
                  place.dtype)
        name = self.shadows.get(layout)
        if name is not None:
            return [], name
        of = f"shadows.of({self.bind(place)})"
        if not always:
            return [], of
        name = self.shadows[layout] = f"s{self.views}"
        self.views += 1
        return [f"{name} = {of}"], name

    def existing_flat(self, buffer, k):
        """``(lines, name)``: the flat view of ``buffer``'s shadow, its own memory (not shared:
        ``Shadows._own``), for reading and zeroing its elements where they lie, as
        ``Shadows.take`` does, from a line that always runs at step ``k``'s reverse; leaving
        the compiled pass there if no gradient reached the buffer. A local from then on, as
        :meth:`shadow`'s are."""
        if ("flat", buffer.key) in self.shadows:
            return self.flat_of(buffer, always=True)
        lines, name = self.flat_of(buffer, always=True)
        return [f"if {self.key(buffer)} not in entries:", f"    {self.deopt(k, 'None')}",
                *lines], name

    def flat_of(self, buffer, always):
        """``(lines, name)``: the local holding ``buffer``'s flat shadow (``Shadows.flat``),
        made by ``lines`` where they always run (as :meth:`shadow`'s are; :meth:`existing_flat`
        takes one only where a gradient reached the buffer); ``name`` None where there is none
        and they may not."""
        name = self.shadows.get(("flat", buffer.key))
        if name is not None or not always:
            return [], name
        name = self.shadows[("flat", buffer.key)] = f"s{self.views}"
        self.views += 1
        return [f"{name} = shadows.flat({self.bind(buffer)})"], name

    def add_into(self, place, g, always):
        """Lines for ``shadows.of(place) += g`` (``shadow``): for a row or a column, into its
        buffer's flat shadow (:meth:`flat_of`), through a view of it (``flat[span] += g``
        would also assign the view's values back to where they are: a sixth of the time)."""
        span = flat_slice(place)
        if span is not None:
            looked_up, flat = self.flat_of(place.buffer, always)
            if flat is not None:
                return [*looked_up, f"view = {flat}[{self.bind(span)}]", f"view += {g}"]
        looked_up, shadow = self.shadow(place, always)
        if shadow.startswith("shadows."):
            return [*looked_up, f"view = {shadow}", f"view += {g}"]
        return [*looked_up, f"{shadow} += {g}"]

    def deopt(self, k, entry, stretch=None):
        """A line that leaves the compiled reverse pass at step ``k`` (:meth:`Block.deopt`),
        ``entry`` the shadow entry the step took out of the dictionary; or where ``stretch``,
        which begins there, failed its check (:class:`Stretch`), with its ``opened`` live."""
        if stretch is None:
            live, keys = self.live, self.bind(tuple(self.live))
        else:
            live = stretch.opened
            keys = self.derive(("keys", tuple(self.cotangents[key] for key in live)))
        names = "".join(f"{self.cotangents[key]}, " for key in live)
        retaken = "" if stretch is None else ", True"
        return f"return deopt(shadows, kept, {k}, {entry}, {keys}, ({names}){retaken})"

    def stretch(self, lines, opened, entry, touched, start):
        """``lines``, a step's, as a :class:`Stretch` that began where ``opened`` (a copy of
        :attr:`live`) was live, at ``start``; as careful lines where the block takes none
        (``stretches``), ``touched`` is empty, or a product has no fast form (``Pair.fast``
        None: its partial a number known now, zero or not finite, which ``times`` masks)."""
        if not self.stretches or not touched \
                or any(type(line) is Pair and line.fast is None for line in lines):
            return careful(lines)
        return [Stretch(lines, opened, entry, touched, (dict(self.live), dict(self.sharing)),
                        start)]

    def rendered(self):
        """The reverse pass's lines, each run of :class:`Stretch`es written out."""
        lines, run = [], []
        for item in [*self.reverse, None]:
            if type(item) is Stretch:
                run.append(item)
                continue
            if run:
                lines += self._stretch(run)
                run = []
            if item is not None:
                lines.append(item)
        return lines

    def _stretch(self, run):
        """The lines of a run of stretches: the fast lines, checked at their end, and where
        that fails, what leaves the compiled pass where they began (:class:`Stretch`)."""
        unchecked_products = sum(type(line) is Pair for stretch in run for line in stretch.lines)
        touched = set().union(*(stretch.touched for stretch in run))
        first = run[0]
        saved = [(self.cotangents[key], buffer) for key, buffer in first.opened.items()
                 if key in touched]
        if first.entry is not None:
            saved.append(first.entry)
        arrays = [name for name, buffer in saved if not scalar_cotangents(buffer)]
        closed, sharing = run[-1].closed
        sinks = []
        for key, buffer in closed.items():
            if key in touched and unchecked(buffer) and sharing.get(key) not in sinks:
                sinks.append(key)  # (of two that hold one array, one)
        sinks = [self.cotangents[key] for key in sinks]
        # each copy and each check costs about what checking a product does
        if not sinks or unchecked_products <= len(arrays) + len(sinks) + 1:
            return careful([line for stretch in run for line in stretch.lines])
        self.stretched = True
        fast = [line.fast if type(line) is Pair else line
                for stretch in run for line in stretch.lines]
        total = " + ".join(f"vdot({name}, {name})" for name in sinks)
        retreat = self.deopt(*first.start, stretch=first)
        return [
            "retake = shadows.events", "if retake is None:", f"    {retreat}",
            "heard = len(retake.kinds)",
            *(f"before{i} = {name}" for i, (name, _) in enumerate(saved)),
            *(f"saved{i} = {name}.copy()" for i, (name, buffer) in enumerate(saved)
              if not scalar_cotangents(buffer)),
            "try:", *indent(fast), f"    total = {total}", "    checked = total != total",
            "except Exception:", "    checked = True",
            "if checked:", "    del retake.kinds[heard:]",
            *(line for i, (name, buffer) in enumerate(saved)
              for line in indent([f"{name} = before{i}", *(
                  [] if scalar_cotangents(buffer) else [f"copyto({name}, saved{i})"])])),
            f"    {retreat}"]

    def source(self):
        """The factory: ``make(constants, deopt, GuardFailed)`` returns the block's two
        functions."""
        kept = "".join(f"{name}, " for name in self.kept)
        constants = "".join(f"k{i}, " for i in range(len(self.constants)))
        return "\n".join([
            "def make(constants, deopt, GuardFailed):", f"    ({constants}) = constants",
            *indent([
                "def forward(values, tape):", *indent(self.forward), f"    return ({kept})",
                "def backward(shadows, kept):", f"    ({kept}) = kept",
                "    entries = shadows.entries", "    get = entries.get", "    pop = entries.pop",
                *indent(self.reverse),
                "return forward, backward"])]) + "\n"


_LOCAL = re.compile(r"\bv[0-9]+\b")
"""The name of a local holding a value of the program (``Code.local``)."""
_COTANGENT = re.compile(r"\b[cg][0-9]+\b")
"""The name of a local of the reverse pass: a cotangent, a product made for an input."""
_CONSTANT = re.compile(r"\bk[0-9]+\b")
"""The name of a constant (``Code.bind``)."""
_SHADOW_LOCAL = re.compile(r"\b(s[0-9]+)\b(?:\[(k[0-9]+)\])?")
"""A local holding a shadow (``Code.shadow``, ``Code.flat_of``), and the constant it is
indexed by, if any."""
_VIEW = re.compile(r"\bview\b")
"""The local holding a view of a shadow (``Code.add_into``)."""
_COPY = re.compile(r"(c[0-9]+|dy) = (c[0-9]+|dy)")
"""A reverse line, at the pass's own level, that makes one name of a cotangent another's."""
PARTIAL_TRY = "try:  # (a partial's arithmetic only)"
"""The line opening the ``try`` around a partial's value (``replay._partial_value``): its
``except`` computes the partial again, touching no shadow and staying in the compiled pass, so
:meth:`Code.added_back` reads through it."""
_REACHING = re.compile("|".join(map(re.escape, (
    "shadows", "entries", "get(", "pop(", "deopt", "retake", "Retake", "x[")))
    + r"|try:(?!  # \(a partial's arithmetic only\))")
"""What a reverse line names where it may reach a shadow other than through its locals, or
leave the compiled pass (``Code.added_back``)."""
_ASSIGNED = re.compile(r"(?<![\w.])(\w+)\s*(?:[-+*/@%&|^:]|//|\*\*|<<|>>)?=(?!=)")
"""The names a line assigns to, in place or not (``Code.added_back``)."""


@functools.lru_cache(maxsize=4096)
def _read_line(line):
    """What :meth:`Code.added_back` reads of the reverse line ``line``: whether it names what
    may reach the shadows otherwise (``_REACHING``), the locals holding shadows it names with
    the constant each is indexed by, or None (``_SHADOW_LOCAL``), whether it names ``view``,
    the names of a plain copy it makes (``_COPY``), or None, and the names it assigns to. (A
    block's lines name its locals and constants by number from 0: the blocks of a loop
    write the same lines again, each read once.)"""
    copy = _COPY.fullmatch(line)
    return (_REACHING.search(line) is not None,
            tuple((match[1], match[2]) for match in _SHADOW_LOCAL.finditer(line)),
            _VIEW.search(line) is not None, None if copy is None else (copy[1], copy[2]),
            frozenset(_ASSIGNED.findall(line)))


class _Zeroing(str):
    """The line that zeroes an element whose cotangent was read (``Code.took``), told apart
    from an equal one by its identity."""

    __slots__ = ()
_PRODUCT = re.compile(r"( *)([cg][0-9]+) = multiply\(([cg][0-9]+), (k[0-9]+), ([cg][0-9]+)\)")
"""A reverse line that multiplies a local by a constant (``Code.fold_negations``)."""
_SCALAR_PRODUCT = re.compile(r"( *)([cg][0-9]+) = ([cg][0-9]+) \* (k[0-9]+)")
"""The same on NumPy's scalars, the line before its NaN check."""
_SCALAR_NEGATION = re.compile(r"( *)([cg][0-9]+) = -([cg][0-9]+)")
"""A product by -1 on NumPy's real float scalars, written as the negation it is."""
_SCALAR_CHECK = re.compile(r" *    [cg][0-9]+ = times_scalar\([cg][0-9]+, (k[0-9]+)\)")
"""A scalar product's NaN check, which names its constant."""


def _real_number(value):
    """``value`` as a Python float where it is a real number (a Python or NumPy float or int, a
    0-d array of a real float dtype), else None."""
    if type(value) is np.ndarray:
        return float(value) if value.shape == () and value.dtype.kind == "f" else None
    if type(value) is int:  # (negating it negates its rounding to any float: a small one)
        return float(value) if abs(value) <= 2 ** 24 else None
    if type(value) is float or type(value) is np.float64:
        return float(value)
    return None


_REAL_NUMBERS = frozenset((np.ndarray, int, float, np.float64))
"""The types of the values ``_real_number`` may take for a number."""


def _as_read(value):
    """What finishing a block's lines may read of a constant (``Code.fold_negations``): its
    type, and for a real number (``_real_number``) whether it is -1, and whether finite and
    nonzero."""
    number = _real_number(value)
    return type(value), None if number is None else (
        number == -1, math.isfinite(number) and number != 0)


class Finished:
    """What finishing a block's lines made (``Code.factory``): the source (whose compiled
    ``make`` is in :data:`TEMPLATES`), the constants it derived (``(recipe, name, read)``,
    ``Code.derive``) and whether some run of the lines is a :class:`Stretch`."""

    __slots__ = ("source", "derived", "stretched")

    def __init__(self, source, derived, stretched):
        self.source = source
        self.derived = derived
        self.stretched = stretched


_INDEX_TYPES = frozenset([int, slice, tuple, type(None), type(Ellipsis)])
"""The types of the values ``_index`` keys (``Code.bind`` looks at no other)."""


def _index(value):
    """A key equal for two indices exactly where either may stand for the other (integers,
    None, Ellipsis, slices, tuples of them; not a bool, NumPy's integer or a float that equals
    one), or None for any other value."""
    kind = type(value)
    if kind is int or value is None or value is Ellipsis:
        return kind, value
    if kind is slice:
        parts = (_index(value.start), _index(value.stop), _index(value.step))
    elif kind is tuple:
        parts = tuple(_index(item) for item in value)
    else:
        return None
    return None if None in parts else (kind, parts)


def flat_slice(place):
    """The slice of its buffer's flat shadow that holds the shadow of ``place``, a 1-d place
    of the buffer's dtype laid out forwards; None for any other."""
    size = place.dtype.itemsize
    if len(place.shape) != 1 or place.dtype != place.buffer.dtype:
        return None
    step, rest = divmod(place.strides[0], size)
    start, off = divmod(place.offset, size)
    if step < 1 or rest or off:
        return None
    return slice(start, start + (place.shape[0] - 1) * step + 1 if place.shape[0] else start,
                 step)


_NUMBERED: dict[str, dict[int, str]] = {"k": {}, "v": {}}
"""Per prefix, the names ``prefix + str(i)`` made so far by ``i``, interned (:func:`numbered`)."""


def numbered(prefix, i):
    """The name ``f"{prefix}{i}"`` of a constant or a local, interned (the blocks of a
    program keep their names, the same few hundred), made once."""
    names = _NUMBERED[prefix]
    name = names.get(i)
    if name is None:
        name = names.setdefault(i, sys.intern(f"{prefix}{i}"))
    return name


def indent(lines, levels=1):
    return [" " * (4 * levels) + line for line in lines]


def _factory(source):
    """The compiled ``make`` of ``source``, from :data:`TEMPLATES` if it is there."""
    with _TEMPLATES_LOCK:  # replayed functions compile in the threads that call them
        make = TEMPLATES.get(source)
        if make is not None:
            TEMPLATES.move_to_end(source)
            return make
    namespace = dict(HELPERS)
    exec(compile(source, "<mutad replay block>", "exec"), namespace)
    with _TEMPLATES_LOCK:
        TEMPLATES[source] = namespace["make"]
        if len(TEMPLATES) > KEPT:
            TEMPLATES.popitem(last=False)
    return namespace["make"]


def _reverse_all(records, shadows):
    """Reverse ``records``, the newest first, as the tape would (``Tape.reverse``)."""
    for record in reversed(records):
        Tape.reverse(record, shadows)


class Opaque:
    """A step a block runs as it is, for the kinds that write no lines of their own (a write
    of another kind, a function's rule, a guard, a call, an operation the engine records
    again): its own ``step(values, tape)``, then the ``records`` (0 or 1; None: as many as it
    appended on this call) it appended taken off the tape, and reversed at the step's place in
    the block's reverse pass (``Tape.reverse``)."""

    __slots__ = ("step", "records")

    buffer = out = None  # it makes no value the block holds

    def __init__(self, step, records):
        self.step = step
        self.records = records

    def emit(self, code, k):
        if self.records is None:
            record = code.keep(f"r{k}")
            code.forward += ["before = len(tape.records)",
                             f"{code.bind(self.step)}(values, tape)",
                             f"{record} = tape.records[before:]", "del tape.records[before:]"]
            code.records.append((record,))
            return
        code.forward.append(f"{code.bind(self.step)}(values, tape)")
        if not self.records:
            code.records.append(())
            return
        record = code.keep(f"r{k}")
        code.forward.append(f"{record} = tape.records.pop()")
        code.records.append((record,))

    def emit_back(self, code, k):
        if self.records == 0:
            return []
        # the record may take a shadow out of the dictionary (a write's cotangent): the shadows
        # the block's earlier steps hold as locals are looked up again
        code.shadows.clear()
        reverse = Tape.reverse if self.records else _reverse_all
        return [f"{code.bind(reverse)}({code.records[k][0]}, shadows)"]

    def back(self, shadows, record=None):
        if record is None:
            return
        if self.records is None:
            _reverse_all(record, shadows)
        else:
            Tape.reverse(record, shadows)


def _same_region(a, b):
    """Whether the places ``a`` and ``b`` are the same elements of one buffer."""
    return a.buffer is b.buffer and a.whole == b.whole and a.offset == b.offset \
        and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype


def operand_buffers(args, places):
    """The keys of the buffers over whose memory the operands of a step are: ``args``, each
    a slot (None where the step dropped it) or a constant, at ``places`` (its record's: None
    where not traced); None where one may be over memory no place names (a value of the
    program not traced, an array), which may be any buffer's."""
    keys = set()
    for a, place in zip(args, places, strict=True):
        if place is not None:
            keys.add(place.key if type(place) is Buffer else place.buffer.key)
        elif not held_number(a):
            return None
    return keys


def held_number(a):
    """Whether the constant ``a`` is a number, which holds no memory of an array's."""
    return type(a) in (bool, int, float, complex) or isinstance(a, np.generic)


class Block:
    """A run of steps as generated functions; one tuple on the tape for all of them. Its lines
    are written and compiled when it first runs (:meth:`_compile`): a replay whose guard fails
    before it reaches a block never pays for that block's."""

    __slots__ = ("steps", "outputs", "buffers", "forward", "backward", "records", "constants",
                 "kept", "checked", "compile")

    def __init__(self, steps, internal, guard_failed, unreached=frozenset(), guarded=(),
                 shared=None, unstored=frozenset()):
        """``steps``: the run, each with ``emit`` and ``emit_back``; ``internal``: the keys of
        the buffers made in the run whose cotangents are locals (no step outside the run reads
        them); ``guard_failed``: the exception a failed guard raises; ``unreached``: the keys
        of the buffers made in the run that no cotangent reaches; ``guarded``: those of the
        buffers whose bytes are saved before their first write; ``shared``: the indices the
        program's blocks bound so far (``Code``); ``unstored``: the slots of the values made in
        the run that only its lines read (no step that runs as itself, nor a later one)."""
        self.steps = steps
        made = [None if getattr(step, "out", None) is None else step.buffer for step in steps]
        self.outputs = [None if buffer is None else buffer.key for buffer in made]
        self.buffers = {buffer.key: buffer for buffer in made if buffer is not None}

        def compiled(stretches):
            code = Code(internal, unreached, guarded, shared, stretches, unstored)
            code.makers = {key: step for key, step in zip(self.outputs, steps)
                           if key is not None}
            for k, step in enumerate(steps):
                code.read_back(getattr(step, "reverse_reads", None))
                step.emit(code, k)
                if not getattr(step, "writes_nothing", False):  # (into memory: see Code)
                    code.forget()
            for k in reversed(range(len(steps))):
                code.reverse += steps[k].emit_back(code, k)
            return code, code.factory()(code.constants, self.deopt, guard_failed)

        self.compile = compiled
        self.forward = self._compile

    def _compile(self, values, tape):
        """The forward pass of the block's first run: its lines written and compiled, then
        run."""
        compiled = self.compile
        code, (forward, self.backward) = compiled(True)
        self.records, self.constants = code.records, code.constants
        self.kept = {name: i for i, name in enumerate(code.kept)}
        # its reverse pass without stretches (whose forward pass and records are these)
        self.checked = (lambda: compiled(False)[1][1]) if code.stretched else None
        self.compile = None
        self.forward = forward
        return forward(values, tape)

    def __call__(self, values, tape):
        tape.records.append((self, self.forward(values, tape), None))

    def back(self, shadows, kept, _):
        self.backward(shadows, kept)

    def deopt(self, shadows, kept, k, entry, keys, live, retaken=False):
        """Finish the reverse pass from step ``k`` on, one step at a time with each step's own
        ``back``: the cotangents of the values made in the block that the compiled pass held
        (``keys``, ``live``) go into the shadows' dictionary, and so does ``entry``, the one
        step ``k`` took out. ``retaken``: a stretch that begins there failed its check
        (:class:`Stretch`); the block's later calls run its reverse pass without stretches."""
        checked = self.checked
        if retaken and checked is not None:
            self.checked = None
            self.backward = checked()
        entries = shadows.entries
        if entry is not None:
            entries[self.outputs[k]] = entry
        held = set()  # two locals may hold one array (Code.share): each shadow its own
        for key, g in zip(keys, live, strict=True):
            g = g if type(g) is np.ndarray else np.array(g)
            if id(g) in held:
                g = g.copy()
            held.add(id(g))
            entries[key] = [self.buffers[key], g, None, None]
        for j in reversed(range(k + 1)):
            self.steps[j].back(shadows, *(self._named(name, kept) for name in self.records[j]))

    def _named(self, name, kept):
        """The value ``name`` has in the generated code: a local the forward pass kept, or a
        constant ``k<i>``; a list of them for a list of names."""
        if name is None or name == "None":
            return None
        if type(name) is list:
            return [self._named(item, kept) for item in name]
        index = self.kept.get(name)
        return self.constants[int(name[1:])] if index is None else kept[index]
