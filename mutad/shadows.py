"""The shadow cache of one differentiation: one adjoint buffer per traced buffer.

Shadows are keyed by the identity of the buffer (``id(traced.base)``), created zero-filled on
first touch, and accumulated in place, so a write through any alias reaches the right place.
A view's shadow is the same view of its buffer's shadow (``views.view_into``). Nothing exists for
a buffer no gradient reached, which is how the replay skips records off the path to the output.
"""

import numpy as np

from .views import address, flat_shadow, view_into


class Shadows:
    """Identity-keyed shadows: ``id(buffer) -> [buffer, shadow, flat, low]``.

    ``shadow`` has the buffer's shape and strides; ``flat``/``low`` map views into it and are
    made on the first view lookup. The entry keeps the buffer alive so its id is not reused.
    """

    __slots__ = ("entries",)

    def __init__(self):
        self.entries = {}

    def _entry(self, base):
        entry = self.entries.get(id(base))
        if entry is None:
            flat, low = flat_shadow(base)
            shadow = view_into(flat, low, base)
            entry = self.entries[id(base)] = [base, shadow, flat, low]
        return entry

    def _view(self, entry, value):
        if value is entry[0]:
            return entry[1]
        if entry[2] is None:
            entry[2] = entry[1].reshape(-1)  # adopted shadows are C-contiguous, like their buffer
            entry[3] = address(entry[0])
        return view_into(entry[2], entry[3], value)

    def get(self, t):
        """The shadow of traced ``t`` (a view if ``t`` is one), or None if nothing reached it."""
        entry = self.entries.get(id(t.base))
        return None if entry is None else self._view(entry, t.value)

    def of(self, t):
        """The shadow of ``t``, created zero-filled if nothing reached it yet."""
        return self._view(self._entry(t.base), t.value)

    def pop(self, base):
        """Take the whole shadow of buffer ``base`` out of the cache.

        Called by the record that created the buffer: nothing older can read it, so the
        shadow is handed to the pullback, which may reuse its memory.
        """
        entry = self.entries.pop(id(base), None)
        return None if entry is None else entry[1]

    def take(self, t):
        """Read the cotangent of the values an in-place write left in ``t``, and zero it there.

        Those values are gone once the write is undone, so their cotangent must not stay in the
        shadow. Returns an array the caller owns, or None if no gradient reached ``t``.
        """
        if t.value is t.base:
            return self.pop(t.base)
        view = self.get(t)
        if view is None:
            return None
        dy = view.copy()
        view[...] = 0
        return dy

    def add(self, t, g, owned=False):
        """Accumulate cotangent ``g`` into the shadow of ``t``: ``shadow(t) += g``.

        ``owned`` says ``g`` is an array nobody else will read or write; if ``t`` is a whole
        buffer without a shadow yet, ``g`` then becomes that shadow instead of being copied.
        """
        base = t.base
        if t.value is base and id(base) not in self.entries and base.flags.c_contiguous:
            # First touch of a whole buffer: the cotangent becomes its shadow (or a copy of it),
            # saving the zero fill and the addition.
            if not (owned and g.dtype == base.dtype and g.shape == base.shape
                    and g.flags.c_contiguous and g.flags.writeable):
                g = np.array(np.broadcast_to(g, base.shape), dtype=base.dtype, order="C")
            self.entries[id(base)] = [base, g, None, None]
            return
        view = self.of(t)
        view += g

    def release(self, t, hand_over):
        """The shadow of ``t`` for the caller to keep, zeros if nothing reached it. With
        ``hand_over``, a whole C-contiguous buffer's shadow is given away (and forgotten) rather
        than copied: for the last use of a shadow."""
        entry = self.entries.get(id(t.base))
        if entry is None:
            return np.zeros_like(t.value)
        if hand_over and t.value is t.base and entry[1].flags.c_contiguous:
            del self.entries[id(t.base)]
            return entry[1]
        return np.array(self._view(entry, t.value), copy=True)

    def add_at(self, t, key, g):
        """Accumulate ``g`` into ``shadow(t)[key]``, adding repeated indices once each."""
        np.add.at(self.of(t), key, g)
