"""The tape of one differentiation, and the invariant that makes mutation safe.

A tape is the list of records of one differentiation, in forward order. A :class:`Record` is
data: the operation's primitive, the places it read and wrote, the values it keeps, how its
write is undone, and the recipe of what it produced (primitive, inputs, settings). Replaying a
record does three things for one operation: puts back the bytes the operation overwrote (if it
wrote in place), reads the cotangent of what it produced from the shadows, and accumulates the
cotangents of its inputs into their shadows (its ``pullback``).

Records are replayed newest first, and each in-place record puts back what it overwrote before
its pullback reads any primal. By induction this gives the invariant the whole design rests on:

    when the pullback of record k runs, every buffer holds the contents it held right after
    record k ran in the forward pass.

So pullbacks of pure operations may keep plain references to their inputs and outputs (never
copies), and the program's own arrays hold their original contents again once the replay ends.

Overwritten bytes are put back in one of two ways, chosen per write by :meth:`Tape.undo_for`:

* restore: run the operation's inverse (``a -= b`` after ``a += b``); costs no memory, drifts
  by rounding, and is only used where the inverse is safe for the operands at hand;
* checkpoint: save just the region about to be overwritten and copy it back.

``policy="checkpoint"`` forces the second everywhere.

The restore policy's guarantee is per element. An elementwise write is undone by its inverse
only where that gives each element back within ``writes.ULPS`` (2) units in the last place of
the value it held (exactly, where that is zero or subnormal), given the bytes the write left:
the core computes the write and its inverse on the values at hand before writing, and saves the
elements where they miss (an underflow, an overflow, a division by zero, an absorbed term), which
are put back after the inverse runs.
In-place rules (``inplace_adjoint``) restore their own arguments, to their own accuracy.

Restoring one record's write is accurate, but a chain of them can lose it: undoing ``u ← A⁻¹ u``
by ``u ← A u`` multiplies the rounding error already in ``u`` by up to the condition number of
``A``, so for a dissipative step repeated T times it grows like cond(A)^T. An inverse therefore
states its *growth*, norm-wise (``max|s| / min|s|`` for ``a /= s``, 1 for a scalar ``s``;
``1 + max|o| / max|t|`` for ``t -= o``), the tape multiplies the growths of consecutive
inversions on one buffer, and it checkpoints a write whose inverse's rounding the product of
the earlier ones (undone after it) would amplify past ``DRIFT_LIMIT``; a checkpoint of the
whole buffer restarts the product. The last write's growth never counts: its inverse acts on
exact bytes. Each restored value is then within about ``DRIFT_LIMIT`` roundings of the truth
(norm-wise for a chain: its first link is the per-element check above).

This module knows nothing about arrays: a test drives it with a toy value type.
"""

POLICIES = ("restore", "checkpoint")
DRIFT_LIMIT = 1e4
SMALL_WRITE = 1 << 16
"""Under the restore policy, a write of at most this many bytes (64 KiB) is checkpointed,
while the bytes so copied stay within ``SMALL_COPIES``: a copy costs less time than an inverse
and its exactness check, and it is exact; inversion is for the large buffers whose memory
matters, and for every write once the allowance is spent."""
SMALL_COPIES = 8 << 20


class Absent:
    """An input of a record that it does not keep (a constant its pullback does not read):
    described by what it looked like (``shape`` and ``dtype``, None where it has none), not
    held, so the record keeps no memory for it."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype


class Primitive:
    """A rule as a record names it: ``rule(*inputs, **settings)`` returns ``(outputs,
    pullback)``, so it recomputes the outputs from the record's recipe; printed as ``name``."""

    __slots__ = ("name", "rule")

    def __init__(self, name, rule):
        self.name = name
        self.rule = rule

    def __repr__(self):
        return self.name


class Record:
    """One operation of the recorded program.

    * ``primitive``: what ran (a NumPy function or ufunc, a rule; printable);
    * ``inputs``: its positional arguments: a place (a buffer or a region of one) for each
      array the differentiation follows, else the constant itself (or an :class:`Absent`
      stand-in when the record does not keep it); ``settings``: its keyword arguments (None:
      none). With ``primitive`` they are the recipe of what it produced;
    * ``outputs``: the buffers it created;
    * ``kept``: the values it keeps (by input position, None where it keeps nothing), and
      ``state``, whatever else its pullback reads;
    * ``pullback(record, shadows, dy)``: accumulates the cotangents of the inputs, ``dy`` being
      the cotangent a write took (None for a pure operation, which reads its outputs' shadows);
    * ``where``: where the differentiated code ran the operation, set when the tape records
      it (None until then, or if no frame of that code was on the stack): the code object and
      the offset of its instruction, cheaper to take than a line number; ``line`` gives
      ``(filename, lineno)``. A record keeps these, never the frame, which would keep the
      frame's locals alive.

    A pure operation writes nothing: it has no ``written`` place and no ``undo``.
    """

    __slots__ = ("primitive", "inputs", "settings", "outputs", "kept", "state", "pullback",
                 "where")

    written = undo = undo_kind = taken = key = None
    undo_first = True

    def __init__(self, primitive, inputs, settings, outputs, kept, state, pullback):
        self.primitive = primitive
        self.inputs = inputs
        self.settings = settings
        self.outputs = outputs
        self.kept = kept
        self.state = state
        self.pullback = pullback
        self.where = None

    @property
    def line(self):
        """``(filename, lineno)`` of the line of the differentiated code that ran the
        operation, or None."""
        return source_line(self.where)


class OneOutput:
    """A record of a pure operation with one output, of a kind whose pullback is the kind's own
    (``pullback``, a static method of a subclass): a :class:`Record` whose ``outputs`` are
    derived from ``output``, the buffer it created. Most records of a long program are of such
    kinds (elementwise operations), so neither a tuple of one output nor the pullback is held by
    each of them."""

    __slots__ = ("primitive", "inputs", "settings", "output", "kept", "state", "where")

    written = undo = undo_kind = taken = key = None
    undo_first = True

    def __init__(self, primitive, inputs, settings, output, kept, state):
        self.primitive = primitive
        self.inputs = inputs
        self.settings = settings
        self.output = output
        self.kept = kept
        self.state = state
        self.where = None

    @property
    def outputs(self):
        return (self.output,)

    line = Record.line


def source_line(where):
    """``(filename, lineno)`` of a record's ``where``, ``(code, offset)``; None for None."""
    if where is None:
        return None
    code, offset = where
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return code.co_filename, line
    return code.co_filename, code.co_firstlineno


class Write(Record):
    """A record of an operation that wrote in place. Besides a record's fields:

    * ``written``: the place it wrote (a tuple of places for several);
    * ``undo``: the callable that puts back the bytes it overwrote, and ``undo_kind``:
      ``"inverse"`` (computed back), ``"partial"`` (the inverse, then the few elements it could
      not give back copied back), ``"checkpoint"`` (the region copied back);
    * ``taken``: the place whose cotangent (of the values the write left) is read and zeroed
      before the write is undone, at ``key`` within it (None: all of it); None if the write
      passes the target's cotangent through;
    * ``undo_first``: whether the pullback reads the inputs as they were before the write (so
      the undo runs first) or the values the write left (the undo runs after it).
    """

    __slots__ = ("written", "undo", "undo_kind", "taken", "key", "undo_first")

    def __init__(self, primitive, inputs, settings, kept, state, pullback, written, undo,
                 undo_kind, taken=None, key=None, undo_first=True):
        Record.__init__(self, primitive, inputs, settings, (), kept, state, pullback)
        self.written = written
        self.undo = undo
        self.undo_kind = undo_kind
        self.taken = taken
        self.key = key
        self.undo_first = undo_first

    def reverse(self, shadows):
        """Take the cotangent of the values written, undo the write and run the pullback, in
        the order the record states."""
        undo = self.undo
        dy = None
        if self.taken is not None:
            dy = shadows.take(self.taken, self.key)
            if dy is None:  # no gradient reached the values it wrote
                undo()
                return
        if self.undo_first:
            undo()
        if self.pullback is not None:
            self.pullback(self, shadows, dy)
        if not self.undo_first:
            undo()


class Tape:
    """The records of one differentiation, and the policy for putting overwritten bytes back."""

    __slots__ = ("records", "policy", "guards", "drift", "recorder", "copy_allowance")

    def __init__(self, policy="restore"):
        self.recorder = None  # a replay's recorder (``replay.Recorder``) while one records
        self.records = []
        self.policy = policy  # one of POLICIES
        self.guards = {}
        self.drift = {}
        self.copy_allowance = SMALL_COPIES  # bytes small writes may still copy (``SMALL_WRITE``)

    def record(self, record):
        """Append a :class:`Record` (a :class:`Write` for an in-place operation); the replay
        reverses it once."""
        self.records.append(record)

    def guard(self, key, save):
        """Run ``save()`` once, just before the first write to the buffer named ``key``.

        Used to keep the caller's original bytes (copy on first write) for an exact restore.
        """
        self.guards[key] = save

    def before_write(self, key):
        """Every in-place write calls this first, with its target buffer's key."""
        if self.guards:
            save = self.guards.pop(key, None)
            if save is not None:
                save()

    def undo_for(self, inverse, is_safe, checkpoint, key=None, growth=1.0, whole=False,
                 size=None):
        """Decide, before an in-place write, how its overwritten bytes will be put back.

        ``inverse()`` undoes the write; ``is_safe()`` (None: always) says whether that inverse is
        exact enough for the operands at hand; ``checkpoint()`` saves the region about to be
        overwritten and returns a callable that copies it back. ``key`` names the buffer
        written, ``growth`` (a number, or a callable evaluated only if the inverse is safe;
        None: the caller adds it once it is known, :meth:`grow`, before the next write)
        bounds how much the inverse can amplify the relative error already in it, and ``whole``
        says the write covers all of it (so a checkpoint makes it exact), ``size`` how many
        bytes it overwrites (a small write is copied: ``SMALL_WRITE``). Returns the callable
        to run during the replay.
        """
        if self.copied(inverse is not None, size, key, whole):
            return checkpoint()
        if self.policy == "restore" and (is_safe is None or is_safe()):
            # This inverse's own rounding is amplified by the inversions undone after it, the
            # earlier writes' (``drift``); its growth amplifies the rounding of those undone
            # before it, the later writes': it counts from the next write on.
            if self.drift.get(key, 1.0) <= DRIFT_LIMIT:
                if growth is not None:
                    self.grow(key, growth() if callable(growth) else growth)
                return inverse
        if whole:
            self.drift.pop(key, None)
        return checkpoint()

    def grow(self, key, growth):
        """Count the ``growth`` of an inverse :meth:`undo_for` chose for a write into the buffer
        named ``key`` in the drift of the inversions undone after it."""
        if growth != 1.0:
            self.drift[key] = self.drift.get(key, 1.0) * growth

    def copied(self, invertible, size, key=None, whole=False):
        """Whether a write is checkpointed whatever its operands are (:meth:`undo_for`'s first
        question): no inverse is on offer, or it overwrites ``size`` bytes, a small write the
        copy allowance still covers. If so, the write is counted as one; else
        :meth:`undo_for` asks the inverse."""
        if invertible:
            if size is None or size > SMALL_WRITE or size > self.copy_allowance:
                return False
            self.copy_allowance -= size
        if whole:
            self.drift.pop(key, None)
        return True

    def replay(self, shadows):
        """Reverse every record newest first; each record is dropped as soon as it ran, so the
        buffers only it kept alive are freed during the replay, not after it."""
        records = self.records
        while records:
            self.reverse(records.pop(), shadows)

    @staticmethod
    def reverse(record, shadows):
        """Reverse one record: its pullback, and for a write its undo. A tuple ``(step, a,
        b)`` is the record a replayed step keeps of itself, which it reverses
        (``step.back(shadows, a, b)``)."""
        if type(record) is tuple:
            record[0].back(shadows, record[1], record[2])
        elif record.undo is None:  # a pure operation
            record.pullback(record, shadows, None)
        else:
            record.reverse(shadows)
