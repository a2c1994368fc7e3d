"""Programs that take a discrete decision and then overwrite its input in place.

A decision is what a derivative branches on: which element is the maximum, a tie, a sign at 0,
whether a bound was hit, a permutation, a quotient. Each program applies an operation, then
changes the operation's input by writes the default policy undoes by inversion (``disturb``),
which gives the values back only up to rounding, and then uses both. The gradient must be the
one the checkpoint policy gives, which puts the bytes back exactly: a rule that took its
decision again in the reverse pass, from the restored values, would lose ties and zeros.

The family test files build their tables of decisions with ``then_disturbed`` and check them
with ``check_decision_kept``.
"""

import numpy as np

import mutad
from mutad.core.trees import flatten

NOT_RESTORED_EXACTLY = np.array([0.7, 0.2, 0.4, -0.7, -0.3, 0.8, 0.0])
"""Values that ``disturb`` followed by its inverse does not give back bit for bit (so a
decision taken on them twice would differ), 0 included."""


def disturb(x):
    """In-place writes the default policy restores by inversion (``x -= 0.2`` after
    ``x += 0.2``, ``x /= 3`` after ``x *= 3``)."""
    x *= 3.0
    x += 0.1
    x += 0.2


def undone(x):
    """What inverting ``disturb`` gives back, computed as the reverse pass computes it."""
    t = x * 3.0
    t += 0.1
    t += 0.2
    t -= 0.2
    t -= 0.1
    t /= 3.0
    return t


def then_disturbed(operation, name=None):
    """The program ``operation(x, *rest)``, then ``disturb(x)``, using both afterwards (through
    a sine, so each output element gets its own cotangent)."""

    def program(x, *rest):
        y = operation(x, *rest)
        disturb(x)
        outputs = [leaf for leaf in flatten(y)[0]
                   if getattr(leaf, "dtype", np.dtype(int)).kind == "f"]
        return sum(np.sum(np.sin(v)) for v in outputs) + np.sum(x * x)

    program.__name__ = name or f"{getattr(operation, '__name__', 'operation')}_then_disturbed"
    return program


def check_decision_kept(program, *args, differentiable=True, order=2):
    """The default policy's gradient of ``program`` is the checkpoint policy's (to rounding),
    every argument comes back bit for bit, and where the program is differentiable at ``args``
    the gradient matches finite differences (to ``order``) and forward mode does too."""
    x = args[0]
    assert undone(x).tobytes() != x.tobytes(), "the test needs values inversion does not restore"
    before = [np.asarray(a).tobytes() for a in args]
    restored = mutad.gradient(program, *args)
    checkpointed = mutad.gradient(program, *args, policy="checkpoint")
    assert [np.asarray(a).tobytes() for a in args] == before
    for by_restore, by_checkpoint in zip(restored, checkpointed, strict=True):
        np.testing.assert_allclose(by_restore, by_checkpoint, rtol=1e-12, atol=1e-14)
    if differentiable:
        for policy in ("restore", "checkpoint"):
            mutad.check_grads(program, *args, policy=policy, order=order)
        mutad.check_jvp(program, *args)
    return restored
