"""Hypothesis strategies and samplers: float arrays in a domain, shapes, views, aliased pairs.

A :class:`Domain` is where a function's input must lie for its derivative to exist and for
finite differences to be reliable there (AutoGrad.jl's per-function samplers). It serves both
the table-driven tests (``domain.sample(rng, shape)``, deterministic under a seeded generator)
and hypothesis (``arrays_in(domain, shape)``).
"""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


@dataclass(frozen=True)
class Domain:
    """Values in ``[low, high]``; ``symmetric`` mirrors them to ``[-high, -low]`` at random
    (a domain that keeps away from zero); ``spacing`` > 0 draws distinct values at least that
    far apart, for functions with kinks or jumps where two inputs meet (maximum, remainder)."""

    name: str
    low: float
    high: float
    symmetric: bool = False
    spacing: float = 0.0

    def sample(self, rng, shape):
        size = int(np.prod(shape, dtype=int))
        if self.spacing:
            grid = np.arange(self.low, self.high + self.spacing / 2, self.spacing)
            if self.symmetric:
                grid = np.concatenate([-grid[::-1], grid])
            if size > grid.size:
                raise ValueError(f"{self.name}: {size} distinct values asked of a grid of "
                                 f"{grid.size}")
            values = rng.choice(grid, size, replace=False)
        else:
            values = rng.uniform(self.low, self.high, size)
            if self.symmetric:
                values *= rng.choice([-1.0, 1.0], size)
        return values.reshape(shape)

    def elements(self):
        """Hypothesis floats in the domain (no spacing: use ``sample`` where that matters)."""
        magnitudes = st.floats(self.low, self.high, allow_nan=False, allow_infinity=False)
        if not self.symmetric:
            return magnitudes
        return st.tuples(magnitudes, st.sampled_from([-1.0, 1.0])).map(lambda ms: ms[0] * ms[1])


# Bounds keep every derivative within a few orders of magnitude of 1, so fourth-order central
# differences with step 1e-4 agree with the reverse pass to 1e-6 relative.
real = Domain("real", -2.0, 2.0)
small = Domain("small", -1.2, 1.2)  # tan, exp-like growth stays moderate
nonzero = Domain("nonzero", 0.3, 2.0, symmetric=True)  # division, kinks at 0 (abs, cbrt)
positive = Domain("positive", 0.2, 3.0)
open_unit_interval = Domain("open_unit_interval", -0.9, 0.9)
above_one = Domain("above_one", 1.1, 3.0)
distinct = Domain("distinct", 0.05, 2.0, symmetric=True, spacing=0.05)
between_one_and_two = Domain("between_one_and_two", 1.05, 1.95, spacing=0.025)
"""Quotients of two such values lie in (0.53, 1.86) and, values being distinct and spaced,
stay at least 0.012 from 1, so ``remainder`` and ``fmod`` are far from their jumps."""


@dataclass(frozen=True)
class ComplexDomain:
    """Complex values whose real parts are drawn from ``real`` and imaginary parts from
    ``imag`` (two :class:`Domain`), away from the branch cuts and poles of the functions that
    take them: a rectangle of the plane (``spacing`` in ``real`` keeps real parts distinct, for
    NumPy's complex order, in which maximum and minimum compare real parts first)."""

    name: str
    real: Domain
    imag: Domain

    def sample(self, rng, shape):
        return self.real.sample(rng, shape) + 1j * self.imag.sample(rng, shape)


def is_complex_domain(domain):
    return isinstance(domain, ComplexDomain)


complex_plane = ComplexDomain("complex", Domain("re", -1.5, 1.5), Domain("im", -1.5, 1.5))
complex_small = ComplexDomain("complex_small", Domain("re", -0.6, 0.6), Domain("im", -0.6, 0.6))
"""Inside the unit disc, away from the cuts of arcsin, arccos, arctan, arcsinh and arctanh
(on the axes beyond ±1 or ±i) and the poles of tan and tanh (±pi/2, ±i pi/2)."""
complex_right = ComplexDomain("complex_right", Domain("re", 0.5, 2.0), Domain("im", -1.0, 1.0))
"""The right half plane away from 0: log, sqrt, reciprocal, the base of a power (cut along
the negative real axis); log1p's cut lies beyond -1."""
complex_right_of_one = ComplexDomain("complex_right_of_one", Domain("re", 1.3, 2.5),
                                     Domain("im", -0.8, 0.8))
"""arccosh: away from its cut along the real axis left of 1."""
complex_nonzero = ComplexDomain("complex_nonzero", nonzero, Domain("im", -1.0, 1.0))
"""|z| >= 0.3: divisors, and the kink of absolute and sign at 0."""
complex_distinct = ComplexDomain("complex_distinct", distinct, Domain("im", -1.0, 1.0))
"""Real parts distinct and spaced: maximum and minimum (NumPy's complex order compares real
parts first) take each operand well away from a switch."""


def arrays_in(domain, shape, dtype=np.float64):
    return hnp.arrays(dtype, shape, elements=domain.elements())


def shapes(min_dims=1, max_dims=2, min_side=1, max_side=4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcasting_pairs(max_dims=3, max_side=4):
    """Two shapes that broadcast together, one of them possibly with fewer axes or size-1 axes."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims,
                                             max_side=max_side).map(lambda b: b.input_shapes)


# ----------------------------------------------------------------------------------------------
# Views


@st.composite
def axis_slices(draw, extent, length):
    """A slice of an axis of ``extent`` with ``length`` elements, step in {±1, ±2, ±3}."""
    steps = [s for s in (1, 2, 3, -1, -2, -3) if abs(s) * (length - 1) < extent]
    step = draw(st.sampled_from(steps))
    span = abs(step) * (length - 1)
    first = draw(st.integers(0, extent - 1 - span))
    if step > 0:
        return slice(first, first + span + 1, step)
    start = first + span
    stop = start - span - 1
    return slice(start, None if stop < 0 else stop, step)


@st.composite
def slices_of(draw, shape, min_side=1):
    """A tuple of slices of an array of ``shape``: each axis keeps between ``min_side`` and all
    of its elements, with positive or negative steps."""
    key = []
    for extent in shape:
        length = draw(st.integers(min(min_side, extent), extent))
        key.append(draw(axis_slices(extent, length)) if length else slice(0, 0))
    return tuple(key)


@st.composite
def view_chains(draw, base, max_steps=3):
    """``(view, description)``: a view of ``base`` made by a chain of basic slices (steps of
    either sign), transposes, reshapes that need no copy, and integer indices (down to 0-d)."""
    view = base
    description = ["base"]
    for _ in range(draw(st.integers(0, max_steps))):
        kinds = ["slice", "transpose"]
        if view.ndim:
            kinds.append("index")
        if view.size and view.flags.c_contiguous:
            kinds.append("reshape")
        kind = draw(st.sampled_from(kinds))
        if kind == "slice" and view.size:
            key = draw(slices_of(view.shape))
            view = view[key + (Ellipsis,)]  # the Ellipsis keeps a 0-d result a view, not a scalar
            description.append(f"[{', '.join(slice_text(k) for k in key)}]")
        elif kind == "transpose":
            view = view.T
            description.append(".T")
        elif kind == "index" and view.shape[0]:
            i = draw(st.integers(-view.shape[0], view.shape[0] - 1))
            view = view[i, ...]
            description.append(f"[{i}, ...]")
        elif kind == "reshape":
            shape = draw(st.sampled_from(_factorisations(view.size)))
            view = view.reshape(shape)
            description.append(f".reshape({shape})")
    return view, "".join(description)


def slice_text(key):
    """``key`` as it is written in a subscript: ``1:4``, ``::-2``, ``:``."""
    parts = ["" if key.start is None else str(key.start), "" if key.stop is None else str(key.stop)]
    return ":".join(parts) + ("" if key.step in (None, 1) else f":{key.step}")


def _factorisations(size):
    pairs = [(size,)] + [(d, size // d) for d in range(1, size + 1) if size % d == 0]
    return sorted(set(pairs))


# ----------------------------------------------------------------------------------------------
# Aliased arguments

ALIASINGS = ("same_object", "same_region", "overlapping", "transposed", "reversed", "disjoint")
"""How two arguments can share one buffer of shape (n + 1, n + 1), each argument (n, n):

* same_object: the same array passed twice;
* same_region: two distinct view objects of the same elements;
* overlapping: windows shifted by one row and column;
* transposed: a window and the transpose of the same window;
* reversed: a window and the same window with its rows reversed;
* disjoint: the first and last rows of a (2n, n) buffer, no element in common.
"""


def aliased_pair(buffer_values, aliasing, n):
    """Two arguments of shape (n, n) viewing one buffer filled from ``buffer_values``."""
    if aliasing == "disjoint":
        base = np.array(buffer_values[: 2 * n * n]).reshape(2 * n, n)
        return base[:n], base[n:]
    base = np.array(buffer_values[: (n + 1) ** 2]).reshape(n + 1, n + 1)
    window = base[:n, :n]
    second = {
        "same_object": window,
        "same_region": base[:n, :n],
        "overlapping": base[1:, 1:],
        "transposed": window.T,
        "reversed": window[::-1],
    }[aliasing]
    return window, second


@st.composite
def aliased_pairs(draw, domain=real, n=st.integers(1, 3)):
    """``(a, b, aliasing)``: two (n, n) arguments sharing memory in one of ``ALIASINGS``."""
    side = draw(n)
    aliasing = draw(st.sampled_from(ALIASINGS))
    values = draw(arrays_in(domain, (2 * side * side + 2 * side + 1,)))
    a, b = aliased_pair(values, aliasing, side)
    return a, b, aliasing
