"""Shadows of views and transposes share memory exactly as their primals do.

Each test drives ``Shadows`` with ``Traced`` values made by hand (no tape), one ``Buffer`` per
memory owner as ``mutad.api`` makes them: the shadow of a view of buffer ``x`` must be the same
view of ``shadow(x)``, with the same shape, strides and byte offset, so a write through any
alias lands where the same write on the primal would.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mutad.core import shadows
from mutad.core.shadows import Buffer, Place
from mutad.core.shadows import Shadows as _Shadows
from mutad.engines.reverse import Traced
from mutad.core.views import address
from strategies import ALIASINGS, aliased_pair, view_chains

# fmt: off
VIEWS = [
    # name                      the view of a (4, 6) buffer
    ("contiguous_slice",        lambda x: x[2:4]),
    ("row_slice_of_columns",    lambda x: x[1, 2:5]),
    ("stepped",                 lambda x: x[::2, 1::3]),
    ("negative_steps",          lambda x: x[::-1, ::-2]),
    ("transpose",               lambda x: x.T),
    ("transpose_of_slice",      lambda x: x[1:, ::-2].T),
    ("zero_dimensional",        lambda x: x[1, 2, ...]),
    ("reshape",                 lambda x: x.reshape(3, 8)),
    ("reshape_then_reverse",    lambda x: x.reshape(2, 12)[:, ::-1]),
    ("new_axis",                lambda x: x[:, None, 1:3]),
    ("empty",                   lambda x: x[2:2]),
]
# fmt: on

BUFFERS = [
    ("c_order", lambda: np.arange(24.0).reshape(4, 6)),
    ("fortran_order", lambda: np.asfortranarray(np.arange(24.0).reshape(4, 6))),
]
"""Buffers a view can be of. A Fortran-ordered result is a buffer of its own whose shadow
has its strides; reshapes of it are not views, so those rows use the C-ordered one only."""


def place(t):
    """Where traced ``t``'s shadow lives: its buffer, and its bytes' offset and layout in it."""
    value = t.value
    return Place(t.buffer, t.whole, address(value) - t.buffer.low, value.shape, value.strides,
                 value.dtype)


class Shadows:
    """The shadow cache of ``mutad.core.shadows``, looked up by traced arrays rather than places."""

    def __init__(self):
        self.cache = _Shadows()

    def of(self, t):
        return self.cache.of(place(t))

    def get(self, t):
        return self.cache.get(place(t))

    def take(self, t):
        return self.cache.take(place(t))

    def add(self, t, g, owned=False):
        self.cache.add(place(t), g, owned)


_BUFFERS = {}


def traced(value, base):
    """``value`` traced as a view of ``base``: every view of one base shares one Buffer."""
    entry = _BUFFERS.get(id(base))
    if entry is None or entry[0] is not base:
        buffer = Buffer(base)
        buffer.note_address(base)  # as mutad.api does for an argument's buffer
        entry = _BUFFERS[id(base)] = (base, buffer)
    return Traced(value, entry[1], None, value is base)


def assert_same_geometry(shadow_of_view, shadow_of_base, view, base):
    assert shadow_of_view.shape == view.shape
    assert shadow_of_view.strides == view.strides
    assert shadow_of_view.dtype == view.dtype
    assert address(shadow_of_view) - address(shadow_of_base) == address(view) - address(base)
    if view.size:
        assert np.shares_memory(shadow_of_view, shadow_of_base)


def assert_write_lands_as_on_primal(make_view, shadows, base, view):
    """Write distinct values through the view's shadow; the base's shadow must change exactly
    where the same write through the same view of a zeroed copy of the primal does."""
    marker = np.arange(1.0, view.size + 1).reshape(view.shape)
    shadows.of(traced(view, base))[...] = marker
    expected = np.zeros_like(base)
    make_view(expected)[...] = marker
    np.testing.assert_array_equal(shadows.of(traced(base, base)), expected)


def _view_buffer_pairs():
    for view_name, make_view in VIEWS:
        for buffer_name, make_buffer in BUFFERS:
            buffer = make_buffer()
            try:
                view = make_view(buffer)
            except ValueError:
                continue
            if not np.shares_memory(view, buffer) and view.size:
                continue  # a reshape that copies: not a view
            yield pytest.param(make_view, make_buffer, id=f"{view_name}-{buffer_name}")


VIEW_BUFFER_PAIRS = list(_view_buffer_pairs())


@pytest.mark.parametrize(("make_view", "make_buffer"), VIEW_BUFFER_PAIRS)
def test_shadow_of_view_is_the_same_view_of_the_buffers_shadow(make_view, make_buffer):
    base = make_buffer()
    view = make_view(base)
    shadows = Shadows()
    shadow_of_view = shadows.of(traced(view, base))
    shadow_of_base = shadows.of(traced(base, base))
    assert_same_geometry(shadow_of_view, shadow_of_base, view, base)
    assert not shadow_of_base.any()


@pytest.mark.parametrize(("make_view", "make_buffer"), VIEW_BUFFER_PAIRS)
def test_writing_through_a_views_shadow_changes_the_buffers_shadow(make_view, make_buffer):
    base = make_buffer()
    assert_write_lands_as_on_primal(make_view, Shadows(), base, make_view(base))


@pytest.mark.parametrize(("make_view", "make_buffer"), VIEW_BUFFER_PAIRS)
def test_adopted_shadow_maps_views_as_a_zero_filled_one_does(make_view, make_buffer):
    """A whole buffer's first cotangent may become its shadow instead of being copied; views
    looked up afterwards must map into that adopted array exactly as into a fresh one."""
    base = make_buffer()
    view = make_view(base)
    shadows = Shadows()
    cotangent = np.full(base.shape, 0.5)
    shadows.add(traced(base, base), cotangent, owned=True)
    shadow_of_base = shadows.of(traced(base, base))
    shadow_of_view = shadows.of(traced(view, base))
    assert_same_geometry(shadow_of_view, shadow_of_base, view, base)
    shadow_of_view += 1.0
    expected = np.full(base.shape, 0.5)
    make_view(expected)[...] += 1.0
    np.testing.assert_array_equal(shadows.of(traced(base, base)), expected)


@given(st.data())
def test_random_view_chains_share_shadow_memory_as_primals_do(data):
    owner = np.arange(48.0)
    base = owner.reshape(data.draw(st.sampled_from([(48,), (6, 8), (2, 4, 6)])))
    view, description = data.draw(view_chains(base), label="view")
    shadows = Shadows()
    # The buffer is the owner of the memory, as for arguments: views of a reshape of it too.
    shadow_of_view = shadows.of(traced(view, owner))
    shadow_of_owner = shadows.of(traced(owner, owner))
    assert_same_geometry(shadow_of_view, shadow_of_owner, view, owner)
    marker = np.arange(1.0, view.size + 1).reshape(view.shape)
    shadow_of_view[...] = marker
    expected = np.zeros_like(owner)
    expected_view = np.ndarray(view.shape, view.dtype, expected,
                               address(view) - address(owner), view.strides)
    expected_view[...] = marker
    np.testing.assert_array_equal(shadow_of_owner, expected, err_msg=description)


@pytest.mark.parametrize("aliasing", ALIASINGS)
def test_aliased_arguments_share_shadow_memory_exactly_where_they_overlap(aliasing):
    first, second = aliased_pair(np.arange(1.0, 40.0), aliasing, 3)
    base = first.base
    shadows = Shadows()
    shadow_first = shadows.of(traced(first, base))
    shadow_second = shadows.of(traced(second, base))
    assert np.shares_memory(shadow_first, shadow_second) == np.shares_memory(first, second)
    shadow_first += 1.0
    shadow_second += 10.0
    primal_first, primal_second = aliased_pair(np.zeros(39), aliasing, 3)
    primal_first += 1.0
    primal_second += 10.0
    np.testing.assert_array_equal(shadow_first, primal_first)
    np.testing.assert_array_equal(shadow_second, primal_second)


def test_add_through_a_view_accumulates_into_the_buffers_shadow():
    base = np.zeros((3, 4))
    shadows = Shadows()
    shadows.add(traced(base, base), np.ones((3, 4)))
    shadows.add(traced(base[1:, ::-2], base), np.full((2, 2), 5.0))
    expected = np.ones((3, 4))
    expected[1:, ::-2] += 5.0
    np.testing.assert_array_equal(shadows.of(traced(base, base)), expected)


def test_take_reads_and_zeroes_only_the_views_region():
    base = np.zeros((3, 4))
    shadows = Shadows()
    shadows.add(traced(base, base), np.arange(12.0).reshape(3, 4))
    view = base.T[::-1, 1]
    taken = shadows.take(traced(view, base))
    np.testing.assert_array_equal(taken, np.arange(12.0).reshape(3, 4).T[::-1, 1])
    expected = np.arange(12.0).reshape(3, 4)
    expected.T[::-1, 1] = 0.0
    np.testing.assert_array_equal(shadows.of(traced(base, base)), expected)
    taken += 100.0  # the caller owns what take returns: the shadow must not move
    np.testing.assert_array_equal(shadows.of(traced(base, base)), expected)


def test_nothing_exists_for_a_buffer_no_gradient_reached():
    base = np.zeros(5)
    shadows = Shadows()
    assert shadows.get(traced(base[1:3], base)) is None
    assert shadows.get(traced(base, base)) is None


def test_distinct_buffers_have_distinct_shadows():
    first, second = np.zeros(4), np.zeros(4)
    shadows = Shadows()
    shadows.of(traced(first, first))[...] = 1.0
    assert not shadows.of(traced(second, second)).any()


def test_shared_shadows_are_never_seen_sharing():
    # Equal cotangents (of a + b) may be one array for several buffers; every write, take or
    # hand-over through one of them first gives it memory of its own, so no other one moves.
    first, second, third = np.zeros(6), np.zeros(6), np.zeros(6)
    a, b, c = Buffer(first), Buffer(second), Buffer(third)
    for b_ in (a, b, c):
        b_.note_address(first if b_ is a else second if b_ is b else third)
    cache = _Shadows()
    g = np.arange(6.0)
    cache.share([a, b, c], g)
    cache.add(a, np.ones(6))                             # a write: a gets its own copy
    np.testing.assert_array_equal(cache.get(a), np.arange(6.0) + 1)
    popped = cache.pop(b, read_only=True)                # still shared with c: a read-only view
    assert not popped.flags.writeable
    np.testing.assert_array_equal(popped, np.arange(6.0))
    of_view = cache.of(Place(c, False, 8, (2,), (16,), c.dtype))   # c is the last: no copy
    of_view[...] = -1.0
    np.testing.assert_array_equal(cache.get(c), [0.0, -1.0, 2.0, -1.0, 4.0, 5.0])
    assert cache.pop(a) is not cache.get(c)


def test_a_shared_shadow_taken_or_released_is_a_copy_of_its_own():
    first, second = np.zeros(4), np.zeros(4)
    a, b = Buffer(first), Buffer(second)
    cache = _Shadows()
    cache.share([a, b], np.full(4, 2.0))
    taken = cache.take(a)
    taken += 1.0
    np.testing.assert_array_equal(cache.get(b), np.full(4, 2.0))
    cache.share([a, Buffer(np.zeros(4))], np.full(4, 3.0))
    released = cache.release(a, hand_over=True)
    released += 1.0
    np.testing.assert_array_equal(cache.release(a, hand_over=True), np.full(4, 3.0))


def _zero_filled_then(base, view, g, negate=False):
    """What the shadow of ``base`` is after ``g`` (``-g``) is added at ``view`` into a
    zero-filled shadow: the general path, which a first cotangent into a run of consecutive
    elements skips (``Shadows._fresh_run``)."""
    expected = np.zeros_like(base)
    region = expected[...] if view is base else np.ndarray(
        view.shape, view.dtype, expected, address(view) - address(base), view.strides)
    region += np.multiply(g, -1.0) if negate else g
    return expected


@pytest.mark.parametrize("negate", [False, True], ids=["add", "subtract"])
@pytest.mark.parametrize(("make_view", "make_buffer"), VIEW_BUFFER_PAIRS)
def test_first_cotangent_into_a_view_gives_the_zero_filled_paths_bits(make_view, make_buffer,
                                                                      negate):
    # Signed zeros and an infinity: 0.0 + (-0.0) is +0.0, which a copy would not give.
    base = make_buffer()
    view = make_view(base)
    g = np.resize(np.array([-0.0, 0.0, 1.5, -2.25, np.inf, -3.0]), view.shape)
    cache = _Shadows()
    t = traced(view, base)
    if negate:
        cache.subtract(place(t), g)
    else:
        cache.add(place(t), g.copy())
    got = cache.get(place(traced(base, base)))
    expected = _zero_filled_then(base, view, g, negate)
    assert got.tobytes() == expected.tobytes()
    # and later cotangents accumulate on it as on a zero-filled one
    cache.subtract(place(t), g) if negate else cache.add(place(t), g)
    expected_view = expected[...] if view is base else np.ndarray(
        view.shape, view.dtype, expected, address(view) - address(base), view.strides)
    expected_view += np.multiply(g, -1.0) if negate else g
    assert cache.get(place(traced(base, base))).tobytes() == expected.tobytes()


def test_subtract_into_an_existing_or_shared_shadow_is_adding_the_negation():
    first, second = np.zeros(6), np.zeros(6)
    a, b = Buffer(first), Buffer(second)
    cache = _Shadows()
    cache.share([a, b], np.array([1.0, -0.0, 0.0, 2.0, -1.0, 0.5]))
    g = np.array([0.0, -0.0, 0.0, 7.0, -1.0, np.inf])
    cache.subtract(a, g)  # shared: a gets its own copy, b does not move
    expected = np.array([1.0, -0.0, 0.0, 2.0, -1.0, 0.5]) + np.multiply(g, -1.0)
    assert cache.get(a).tobytes() == expected.tobytes()
    np.testing.assert_array_equal(cache.get(b), [1.0, -0.0, 0.0, 2.0, -1.0, 0.5])
    cache.subtract(Place(b, False, 8, (3,), (8,), b.dtype), g[:3])
    assert cache.get(b).tobytes() == np.array(
        [1.0, -0.0 + -0.0, 0.0 + -(-0.0), 2.0 + -0.0, -1.0, 0.5]).tobytes()


def _uncached_facts(array):
    """A buffer's layout facts for ``array``, with no layout remembered from another array."""
    saved = dict(shadows._contiguous)
    shadows._contiguous.clear()
    try:
        buffer = Buffer(array)
        return (buffer.shape, buffer.strides, buffer.span, buffer.c_contiguous, buffer.offset,
                buffer.low)
    finally:
        shadows._contiguous.clear()
        shadows._contiguous.update(saved)


_LAYOUTS = [np.zeros(6), np.zeros(6, np.float32), np.zeros(12, np.float32)[::2],
            np.zeros((3, 4)), np.zeros((3, 4)).T, np.zeros((4, 3), order="F"),
            np.zeros((1, 5)), np.zeros((1, 5))[:, ::1], np.zeros((5, 1))[:, :1],
            np.zeros((0, 3)), np.zeros(()), np.zeros(6, complex), np.zeros((2, 3, 4))[:, 1],
            np.zeros(6, np.dtype(float, metadata={"unit": "m"})), np.zeros(3, ">f8")]


@pytest.mark.parametrize("first", range(len(_LAYOUTS)))
def test_a_buffer_made_after_any_other_layout_has_the_facts_of_its_own(first):
    """A buffer's layout facts, found by the layout of an array met before
    (``shadows._contiguous``), are those worked out from the array alone: after an array of
    another dtype with the same shape and strides (a float32 array with float64's strides
    is not contiguous), or of an equal dtype that is another object, of other shapes or
    strides, F-ordered, empty or 0-d."""
    expected = [_uncached_facts(a) for a in _LAYOUTS]
    Buffer(_LAYOUTS[first])
    for a, facts in zip(_LAYOUTS, expected, strict=True):
        buffer = Buffer(a)
        assert (buffer.shape, buffer.strides, buffer.span, buffer.c_contiguous, buffer.offset,
                buffer.low) == facts
        assert buffer.c_contiguous == a.flags.c_contiguous
