"""The tape of one differentiation, and the invariant that makes mutation safe.

A tape is the list of records of one differentiation, in forward order. A record is a callable
``back(shadows)`` that, when replayed, does three things for one operation: puts back the bytes
the operation overwrote (if it wrote in place), reads the cotangent of what it produced from the
shadows, and accumulates the cotangents of its inputs into their shadows.

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
only where that gives each element back within ``tracing.ULPS`` (2) units in the last place of
the value it held (exactly, where that is zero or subnormal), given the bytes the write left:
the core computes the write and its inverse on the values at hand before writing, and saves the
elements where they miss (an underflow, an overflow, a division by zero, an absorbed term), which
are put back after the inverse runs.
In-place rules (``inplace_adjoint``) restore their own arguments, to their own accuracy.

Restoring one record's write is accurate, but a chain of them can lose it: undoing ``u ← A⁻¹ u``
by ``u ← A u`` multiplies the rounding error already in ``u`` by up to the condition number of
``A``, so for a dissipative step repeated T times it grows like cond(A)^T. An inverse therefore
states its *growth* (1 for ``a /= s``, whose relative errors do not compound; ``1 + max|o| /
max|t|`` for ``t -= o``), the tape multiplies the growths of consecutive inversions on one
buffer, and it checkpoints the write that would take the product past ``DRIFT_LIMIT``, which
restarts it. Each restored value is then within about ``DRIFT_LIMIT`` roundings of the truth
(norm-wise for a chain: its first link is the per-element check above).

This module knows nothing about arrays: a test drives it with a toy value type.
"""

POLICIES = ("restore", "checkpoint")
DRIFT_LIMIT = 1e4


class Tape:
    """The records of one differentiation, and the policy for putting overwritten bytes back."""

    __slots__ = ("records", "policy", "guards", "drift")

    def __init__(self, policy="restore"):
        self.records = []
        self.policy = policy  # one of POLICIES
        self.guards = {}
        self.drift = {}

    def record(self, back):
        """Append a record: ``back(shadows)`` is called once, during the replay."""
        self.records.append(back)

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

    def undo_for(self, inverse, is_safe, checkpoint, key=None, growth=1.0, whole=False):
        """Decide, before an in-place write, how its overwritten bytes will be put back.

        ``inverse()`` undoes the write; ``is_safe()`` (None: always) says whether that inverse is
        exact enough for the operands at hand; ``checkpoint()`` saves the region about to be
        overwritten and returns a callable that copies it back. ``key`` names the buffer
        written, ``growth`` (a number, or a callable evaluated only if the inverse is safe)
        bounds how much the inverse can amplify the relative error already in it, and ``whole``
        says the write covers all of it (so a checkpoint makes it exact). Returns the callable
        to run during the replay.
        """
        if inverse is not None and self.policy == "restore" and (is_safe is None or is_safe()):
            if callable(growth):
                growth = growth()
            if growth == 1.0:
                return inverse
            drift = self.drift.get(key, 1.0) * growth
            if drift <= DRIFT_LIMIT:
                self.drift[key] = drift
                return inverse
        if whole:
            self.drift.pop(key, None)
        return checkpoint()

    def replay(self, shadows):
        """Run every record's ``back`` newest first; each record is dropped as soon as it ran,
        so the buffers only it kept alive are freed during the replay, not after it."""
        records = self.records
        while records:
            records.pop()(shadows)
