"""Gathers (take, sort, choose, diff, interp, …) and in-place scatters (ufunc.at, put, copyto),
with overlapping operands and repeated indices computing what NumPy computes."""

import collections

import numpy as np
import pytest

import mutad
from cases import (Case, arguments, case_id, check_complex, complexified, curved, fixed, normal,
                   replays_as_traced)
from rule_checks import (RNG, TIES, V4, WHERE, X3, Const, V, X, check_forward_rule, normal_array,
                         rule_case)
from mutad.core import tape as tape_module
from mutad.engines import inplace
from mutad.core.trees import flatten

POLICIES = ("restore", "checkpoint")


def sort_in_place(x):
    x.sort()
    return x * np.arange(5.0)


def sort_rows_of_view(x):
    x[:, 1:].sort(axis=1)
    return np.sin(x)


# fmt: off
GATHERS = [
    Case.named("take",                lambda a: np.take(a, [0, 2, 2, -1]), arguments(normal(5))),
    Case.named("take-axis",           lambda a: np.take(a, [[0, 1], [1, 1]], axis=1), arguments(normal(2, 3))),
    Case.named("take-wrap",           lambda a: np.take(a, [5, -7], mode="wrap"), arguments(normal(3))),
    Case.named("take-clip",           lambda a: np.take(a, [5, -7, 1], mode="clip"), arguments(normal(3))),
    Case.named("take-method",         lambda a: a.take([1, 1]), arguments(normal(3))),
    Case.named("take_along_axis",     lambda a: np.take_along_axis(a, np.array([[0, 0], [2, 1]]), 1),
                                       arguments(normal(2, 3))),
    Case.named("take_along_axis-broadcast", lambda a: np.take_along_axis(a, np.array([[0, 2, 1], [2, 1, 1]]).T, 0),
                                       arguments(normal(3, 1))),
    Case.named("take_along_axis-argsort", lambda a: np.take_along_axis(a, np.argsort(a, axis=0), 0),
                                       arguments(normal(4, 2))),
    Case.named("compress",            lambda a: np.compress([True, False, True], a, axis=1), arguments(normal(2, 3))),
    Case.named("extract",             lambda a: np.extract(a > 0, a), arguments(normal(2, 3))),
    Case.named("sort",                np.sort,       arguments(normal(2, 4))),
    Case.named("sort-axis-0",         lambda a: np.sort(a, 0), arguments(normal(3, 2))),
    Case.named("sort-flat",           lambda a: np.sort(a, axis=None), arguments(normal(3, 2))),
    Case.named("sort-stable",         lambda a: np.sort(a, stable=True), arguments(normal(4))),
    Case.named("sort-method-in-place", sort_in_place, arguments(normal(5))),
    Case.named("sort-view-in-place",  sort_rows_of_view, arguments(normal(2, 4))),
    Case.named("partition",           lambda a: np.partition(a, 2), arguments(normal(2, 5))),
    Case.named("partition-axis-0",    lambda a: np.partition(a, (1, 3), axis=0), arguments(normal(5, 2))),
    Case.named("choose",              lambda a, b: np.choose([0, 1, 1, 0], [a, b]), arguments(normal(4), normal(1))),
    Case.named("choose-array",        lambda c: np.choose(np.array([[0, 2], [1, 0]]), c), arguments(normal(3, 2, 2))),
    Case.named("choose-clip",         lambda a, b: np.choose([0, 5, -1], (a, b), mode="clip"),
                                       arguments(normal(3), normal(3))),
    Case.named("select",              lambda a, b, d: np.select([a > 0, b > 0], [a, b], d),
                                       arguments(normal(6), normal(6), normal(6))),
    Case.named("select-overlapping",  lambda a, b: np.select([a > 0.5, a > 0], [a, b], 0.0),
                                       arguments(normal(6), normal(6))),
    Case.named("diff",                np.diff,       arguments(normal(5))),
    Case.named("diff-n2-axis0",       lambda a: np.diff(a, 2, 0), arguments(normal(5, 3))),
    Case.named("diff-prepend-append", lambda a: np.diff(a, prepend=0.5, append=np.ones((2, 2))),
                                       arguments(normal(2, 3))),
    Case.named("diff-traced-prepend", lambda a, p: np.diff(a, 1, -1, p), arguments(normal(2, 3), normal(2, 1))),
    Case.named("diff-n0",             lambda a: np.diff(a, 0) * 2.0, arguments(normal(3))),
    Case.named("interp",              np.interp,
                                       arguments(fixed([-1.0, 0.3, 1.4, 2.2, 5.0]), fixed([0.0, 1.0, 2.0, 3.0]), normal(4))),
    Case.named("interp-left-right",   lambda x, fp, left, right: np.interp(x, [0.0, 1.0, 2.0], fp, left, right),
                                       arguments(fixed([-1.0, 0.5, 3.0]), normal(3), normal(), normal())),
    Case.named("interp-scalar-x",     lambda x, fp: np.interp(x, [0.0, 1.0, 2.0], fp), arguments(fixed(1.3), normal(3))),
    Case.named("interp-single-knot",  lambda x, fp: np.interp(x, [1.0], fp), arguments(fixed([0.0, 1.0, 2.0]), normal(1))),
    Case.named("interp-list-x",       lambda fp: np.interp([0.5, 2.5, -1.0], [0.0, 1.0, 2.0], fp), arguments(normal(3))),
    Case.named("interp-float-x",      lambda xp, fp: np.interp(1.3, xp, fp), arguments(fixed([0.0, 1.0, 2.0]), normal(3))),
    Case.named("interp-period",       lambda x, xp, fp: np.interp(x, xp, fp, period=4.0),
                                       arguments(fixed([-5.3, -0.4, 0.3, 1.4, 2.2, 5.1, 9.7]),
                                                 fixed([3.1, 0.2, 1.5, 6.6]), normal(4))),
    Case.named("interp-period-negative", lambda x, fp: np.interp(x, [0.5, 2.5, 1.5], fp, -3.0, 3.0, -3.0),
                                       arguments(fixed([-1.0, 0.3, 2.9, 4.2]), normal(3))),
]
# fmt: on


def add_at_argument(x, v):
    np.add.at(x, [0, 0, 2], v)
    return x * x


def add_at_view_of_target(x):
    np.add.at(x, [0, 0, 2], x[3:6])  # the values change under the write: checkpointed
    return x * x


def add_at_overlapping_view(x):
    np.add.at(x, [1, 1, 2], x[:3])
    return x * x


def add_at_scalar_view(x):
    np.add.at(x, [0, 0, 2], x[3])
    return x * x


def add_at_broadcast(x, v):
    np.add.at(x, [0, 2, 0], v)  # v of shape (4,) broadcast over three rows of x
    return np.sin(x)


def subtract_at_2d(x, v):
    np.subtract.at(x, ([0, 1, 0], [1, 2, 1]), v)
    return np.sin(x)


def multiply_at_repeated(x, v):
    np.multiply.at(x, ([0, 1, 0, 0], [1, 2, 1, 1]), 1.5 + np.sin(v))
    return np.sin(x)


def divide_at_broadcast(x, v):
    np.divide.at(x, (slice(None), [2, 0, 2]), 2.0 + v * v)  # v along the rows, columns repeated
    return x * x


def maximum_at_repeated(x, v):
    np.maximum.at(x, [3, 1, 3, 0], v)
    return x * np.arange(1.0, 6.0)


def negative_at_repeated(x):
    np.negative.at(x, [0, 2, 2, 2, 4])
    return np.cos(x) + x


def add_at_into_new_buffer(a, v):
    x = np.zeros_like(a)
    np.add.at(x, [1, 1, 0], v)
    x *= a
    return x


def add_at_slice(x, v):
    np.add.at(x, slice(1, 3), v)
    return x * x


def add_at_twice(x, v):
    np.add.at(x, [0, 1], v)
    np.add.at(x, [1, 1], v * v)
    return x * x


def put_into_argument(x, v):
    np.put(x, [0, -2, 4], v)
    return x * x


def put_cycling_values(x, v):
    np.put(x, [0, 1, 4, 5], v)
    return x * x


def put_clipped(x, v):
    np.put(x, [-9, 2], v, mode="clip")
    return x * x


def place_positive(x, v):
    np.place(x, x > 0, v)
    return x * x


def putmask_positive(x, v):
    np.putmask(x, x > 0, v)
    return x * x


def put_along_rows(x, v):
    np.put_along_axis(x, np.array([[0], [2]]), v, axis=1)
    return x * x


def copyto_argument(x, v):
    np.copyto(x, v)
    return x * x


def copyto_where(x, v):
    np.copyto(x, v, where=x > 0)
    return x * x


def copyto_shifted_self(x):
    np.copyto(x[1:], x[:-1])
    return x * x


def copyto_new_buffer(v):
    x = np.zeros_like(v)
    np.copyto(x, 2.0 * v)
    return x


def getitem_repeated(a):
    return a[[0, 2, 2, 4]] * a[[1, 1, 3, 0]]


def getitem_two_arrays(a):
    return a[[0, 1, 1], [2, 0, 2]] * a[1, [0, 0]].sum()


def setitem_advanced(x, v):
    x[[0, 3, 4]] = v ** 2
    x[[4, 1]] *= 2.0
    return x * x


def setitem_boolean(x, v):
    x[np.array([True, False, True, False, False, True])] = v * x[1]
    return x * x


def assign_booleans(x):
    """Booleans assigned into a traced array are NumPy's 0 and 1: a Python bool, NumPy's, an
    array of them, a product with one (a NumPy error, no ufunc loop of booleans, before)."""
    x[0] = True
    x[1:3] = np.array([True, False])
    x[3] = np.bool_(False)
    x[4] = x[5] * True
    return x * np.arange(1.0, 7.0)


# fmt: off
SCATTERS = [
    Case.named("add.at",                  add_at_argument, arguments(normal(6), normal(3))),
    Case.named("add.at-view-of-target",   add_at_view_of_target, arguments(normal(6))),
    Case.named("add.at-overlapping-view", add_at_overlapping_view, arguments(normal(6))),
    Case.named("add.at-scalar-view",      add_at_scalar_view, arguments(normal(6))),
    Case.named("add.at-broadcast",        add_at_broadcast, arguments(normal(3, 4), normal(4))),
    Case.named("add.at-slice",            add_at_slice, arguments(normal(4), normal(2))),
    Case.named("add.at-twice",            add_at_twice, arguments(normal(3), normal(2))),
    Case.named("add.at-new-buffer",       add_at_into_new_buffer, arguments(normal(3), normal(3))),
    Case.named("subtract.at-2d",          subtract_at_2d, arguments(normal(2, 3), normal(3))),
    Case.named("multiply.at-repeated",    multiply_at_repeated, arguments(normal(2, 3), normal(4))),
    Case.named("divide.at-broadcast",     divide_at_broadcast, arguments(normal(2, 3), normal(2, 1))),
    Case.named("maximum.at-repeated",     maximum_at_repeated, arguments(normal(5), normal(4))),
    Case.named("negative.at-repeated",    negative_at_repeated, arguments(normal(5))),
    Case.named("put",                     put_into_argument, arguments(normal(5), normal(3))),
    Case.named("put-cycling",             put_cycling_values, arguments(normal(6), normal(3))),
    Case.named("put-clip",                put_clipped, arguments(normal(4), normal(2))),
    Case.named("place",                   place_positive, arguments(normal(6), normal(2))),
    Case.named("putmask",                 putmask_positive, arguments(normal(6), normal(4))),
    Case.named("put_along_axis",          put_along_rows, arguments(normal(2, 3), normal(2, 1))),
    Case.named("copyto",                  copyto_argument, arguments(normal(2, 3), normal(3))),
    Case.named("copyto-where",            copyto_where, arguments(normal(2, 3), normal(3))),
    Case.named("copyto-shifted-self",     copyto_shifted_self, arguments(normal(5))),
    Case.named("copyto-new-buffer",       copyto_new_buffer, arguments(normal(3))),
    Case.named("getitem-repeated",        getitem_repeated, arguments(normal(5))),
    Case.named("getitem-two-arrays",      getitem_two_arrays, arguments(normal(2, 3))),
    Case.named("setitem-advanced",        setitem_advanced, arguments(normal(5), normal(3))),
    Case.named("setitem-boolean",         setitem_boolean, arguments(normal(6), normal(3))),
    Case.named("assign-booleans",         assign_booleans, arguments(normal(6))),
]
# fmt: on


# Writes whose source overlaps their target. NumPy does not always read the source as if it
# were copied first (x[::2] = x[:3] reads x[2] after writing it, np.place reads its values as it
# goes): mutad computes what NumPy computes, and differentiates that.

MASK = np.array([True, False, True, True, False])


def assign_strided_from_prefix(x):
    x[::2] = x[0:3]  # NumPy: x[4] takes the x[2] it has just written, x[1]'s value
    return x


def copyto_strided_from_prefix(x):
    np.copyto(x[::2], x[0:3])
    return x


def copyto_where_overlapping(x):
    np.copyto(x[::2], x[0:3], where=np.array([True, False, True]))
    return x


def assign_shifted_right(x):
    x[1:] = x[:-1]
    return x


def assign_shifted_left(x):
    x[:-1] = x[1:]
    return x


def assign_reversed(x):
    x[:] = x[::-1]
    return x


def assign_negative_strides(x):
    x[4:0:-2] = x[1:3]
    x[::-1][1:4] = x[::2]
    return x


def assign_partly_overlapping(x):
    x[2:5] = x[0:6:2]  # only x[2] and x[4] are both read and written
    return x


def assign_fancy_from_overlapping_view(x):
    x[[0, 2, 4]] = x[0:3]
    return x


def assign_boolean_from_overlapping_view(x):
    x[MASK] = x[1:4]
    return x


def assign_expression_of_self(x):
    x[1:] = x[:-1] * x[1:]
    return x


def put_overlapping(x):
    np.put(x, [1, 2, 3], x[0:3])
    return x


def place_overlapping(x):
    np.place(x, MASK, x[0:4])  # NumPy: each value read after the previous write
    return x


def putmask_overlapping(x):
    np.putmask(x, MASK, x[::-1])
    return x


def put_along_axis_overlapping(a):
    np.put_along_axis(a, np.array([[1], [0]]), a[:, :1], axis=1)
    return a


def add_at_overlapping_shifted(x):
    np.add.at(x, [1, 2, 3], x[0:3])
    return x


def add_at_overlapping_reversed(x):
    np.add.at(x, [3, 2, 1], x[2:5])
    return x


def add_out_overlapping_inputs(x):
    np.add(x[1:], x[:-1], out=x[:-1])
    return x


def negative_reversed_out(x):
    np.negative(x[::-1], out=x)
    return x


def add_shifted_in_place(x):
    x[1:] += x[:-1]
    return x


def multiply_strided_reversed_in_place(x):
    x[::2] *= x[::-1][::2]
    return x


def assign_transposed(a):
    a[...] = a.T
    return a


def add_transposed_in_place(a):
    a += a.T
    return a


def assign_part_transposed(a):
    a[1:, :2] = a[:2, 1:].T
    return a


def assign_rows_shifted_and_flipped(a):
    a[1:] = a[:-1, ::-1]
    return a


def assign_columns_shifted(a):
    a[:, 1:] = a[:, :-1]
    return a


def assign_between_argument_views(a, b):
    a[::2] = b[:2]  # b starts at a[3]: the same memory
    np.place(a, a > 0.0, b[::-1])
    return a * b.sum()


def views_of_one_array(rng):
    base = rng.standard_normal(8)
    return base[:4], base[3:]


# fmt: off
OVERLAPS = [
    Case.named("assign-strided-from-prefix",       assign_strided_from_prefix, arguments(normal(5))),
    Case.named("copyto-strided-from-prefix",       copyto_strided_from_prefix, arguments(normal(5))),
    Case.named("copyto-where-overlapping",         copyto_where_overlapping, arguments(normal(5))),
    Case.named("assign-shifted-right",             assign_shifted_right, arguments(normal(5))),
    Case.named("assign-shifted-left",              assign_shifted_left, arguments(normal(5))),
    Case.named("assign-reversed",                  assign_reversed, arguments(normal(5))),
    Case.named("assign-negative-strides",          assign_negative_strides, arguments(normal(5))),
    Case.named("assign-partly-overlapping",        assign_partly_overlapping, arguments(normal(6))),
    Case.named("assign-fancy-from-overlapping",    assign_fancy_from_overlapping_view, arguments(normal(5))),
    Case.named("assign-boolean-from-overlapping",  assign_boolean_from_overlapping_view, arguments(normal(5))),
    Case.named("assign-expression-of-self",        assign_expression_of_self, arguments(normal(5))),
    Case.named("put-overlapping",                  put_overlapping, arguments(normal(5))),
    Case.named("place-overlapping",                place_overlapping, arguments(normal(5))),
    Case.named("putmask-overlapping",              putmask_overlapping, arguments(normal(5))),
    Case.named("put_along_axis-overlapping",       put_along_axis_overlapping, arguments(normal(2, 3))),
    Case.named("add.at-overlapping-shifted",       add_at_overlapping_shifted, arguments(normal(5))),
    Case.named("add.at-overlapping-reversed",      add_at_overlapping_reversed, arguments(normal(5))),
    Case.named("add-out-overlapping-inputs",       add_out_overlapping_inputs, arguments(normal(5))),
    Case.named("negative-reversed-out",            negative_reversed_out, arguments(normal(5))),
    Case.named("add-shifted-in-place",             add_shifted_in_place, arguments(normal(5))),
    Case.named("multiply-strided-reversed",        multiply_strided_reversed_in_place, arguments(normal(5))),
    Case.named("assign-transposed",                assign_transposed, arguments(normal(3, 3))),
    Case.named("add-transposed-in-place",          add_transposed_in_place, arguments(normal(3, 3))),
    Case.named("assign-part-transposed",           assign_part_transposed, arguments(normal(3, 3))),
    Case.named("assign-rows-shifted-flipped",      assign_rows_shifted_and_flipped, arguments(normal(3, 4))),
    Case.named("assign-columns-shifted",           assign_columns_shifted, arguments(normal(3, 4))),
    Case.named("assign-between-argument-views",    assign_between_argument_views, views_of_one_array),
    Case.named("assign-strided-float32",           assign_strided_from_prefix,
                                                    lambda rng: (rng.standard_normal(5).astype(np.float32),)),
]
# fmt: on


# Repeated indices: NumPy keeps one of the writes to an element (the last, in practice);
# mutad keeps the one NumPy kept, and only its value gets the element's gradient.


def assign_repeated(x, v):
    x[[0, 0, 1]] = v
    return x


def add_repeated_in_place(x, v):
    x[[0, 0]] += v  # x[0] + v[1]: the second sum wins
    return x


def multiply_repeated_in_place(x, v):
    x[[1, 3, 1]] *= v
    return x


def assign_repeated_constants(x):
    x[[2, 2]] = [1.5, -0.5]
    return x * x


def assign_negative_alias(x, v):
    x[[0, -5]] = v  # the same element of a length-5 array
    return x


def assign_repeated_from_self(x):
    x[[1, 1, 3]] = x[2:5]
    return x


def assign_repeated_pairs(a, v):
    a[[0, 0, 1], [1, 1, 2]] = v
    return a


def assign_repeated_index_grids(a, v):
    a[np.array([[0, 1], [0, 1]]), np.array([[2, 0], [2, 0]])] = v
    return a


def assign_repeated_rows_and_slice(a, v):
    a[[0, 0], 1:] = v
    return a


def assign_boolean_mask(x, v):
    x[MASK] = v
    return x


def put_repeated(x, v):
    np.put(x, [1, 1, -4], v)
    return x


def put_wrapped_alias(x, v):
    np.put(x, [0, 5], v, mode="wrap")  # 5 wraps to 0
    return x


def put_along_axis_repeated(a, v):
    np.put_along_axis(a, np.array([[0, 0], [2, 2]]), v, axis=1)
    return a


# fmt: off
REPEATS = [
    Case.named("assign-repeated",                  assign_repeated, arguments(normal(5), normal(3))),
    Case.named("add-repeated-in-place",            add_repeated_in_place, arguments(normal(5), normal(2))),
    Case.named("multiply-repeated-in-place",       multiply_repeated_in_place, arguments(normal(5), normal(3))),
    Case.named("assign-repeated-constants",        assign_repeated_constants, arguments(normal(5))),
    Case.named("assign-negative-alias",            assign_negative_alias, arguments(normal(5), normal(2))),
    Case.named("assign-repeated-from-self",        assign_repeated_from_self, arguments(normal(5))),
    Case.named("assign-repeated-pairs",            assign_repeated_pairs, arguments(normal(2, 3), normal(3))),
    Case.named("assign-repeated-index-grids",      assign_repeated_index_grids, arguments(normal(2, 3), normal(2, 2))),
    Case.named("assign-repeated-rows-and-slice",   assign_repeated_rows_and_slice, arguments(normal(2, 3), normal(2, 2))),
    Case.named("assign-boolean-mask",              assign_boolean_mask, arguments(normal(5), normal(3))),
    Case.named("put-repeated",                     put_repeated, arguments(normal(5), normal(3))),
    Case.named("put-wrapped-alias",                put_wrapped_alias, arguments(normal(5), normal(2))),
    Case.named("put_along_axis-repeated",          put_along_axis_repeated, arguments(normal(2, 3), normal(2, 2))),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", GATHERS + SCATTERS + OVERLAPS + REPEATS, ids=case_id)
def test_indexing_gradient(case, policy, rng):
    mutad.check_grads(case.function, *case.sample(rng), policy=policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", GATHERS + SCATTERS + OVERLAPS + REPEATS, ids=case_id)
def test_indexing_second_derivatives(case, policy, rng):
    # Nested reverse mode: gathers add traced cotangents with np.add.at, and the scatters'
    # restorations and checkpoints write into arrays the outer gradient traces (np.add.at
    # through repeated indices too).
    mutad.check_grads(curved(case.function), *case.sample(rng), policy=policy, order=2)


def _bytes(tree):
    return [np.asarray(leaf).tobytes() for leaf in flatten(tree)[0]]


def _copies_sharing_as(args):
    """Copies of the array arguments that share memory with each other as the arguments do."""
    copies = {}

    def copy_of(x):
        base = x
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in copies:
            copies[id(base)] = base.copy()
        offset = x.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return np.ndarray(x.shape, x.dtype, copies[id(base)], offset, x.strides)

    return [copy_of(a) for a in args]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", SCATTERS + OVERLAPS + REPEATS, ids=case_id)
def test_writes_compute_what_numpy_computes(case, policy, rng):
    """The value of every write, and what it leaves in the arguments, is NumPy's bit for bit,
    in reverse and forward mode; the two modes' derivatives agree (<gradient, v> = <w, jvp>)."""
    args = case.sample(rng)
    before = _bytes(args)
    expected_arguments = _copies_sharing_as(args)
    expected = case.function(*expected_arguments)

    y, back = mutad.pullback(case.function, *args, policy=policy)
    assert _bytes(y) == _bytes(expected)
    assert _bytes(args) == _bytes(expected_arguments)  # pullback leaves them as f left them
    # (cotangents and tangents in each float value's own precision: a wider one is refused)
    w = [rng.standard_normal(np.shape(leaf)).astype(np.result_type(leaf, np.float16))
         for leaf in flatten(y)[0]]
    grads = back(flatten(y)[1](w))
    assert _bytes(args) == before

    tangents = tuple(rng.standard_normal(np.shape(a)).astype(np.result_type(a, np.float16))
                     for a in args)
    y_forward, dy = mutad.jvp(case.function, tuple(args), tangents)
    assert _bytes(y_forward) == _bytes(expected)
    assert _bytes(args) == before
    reverse = sum(np.vdot(g, t) for g, t in zip(grads, tangents, strict=True))
    forward = sum(np.vdot(wi, di) for wi, di in zip(w, flatten(dy)[0], strict=True))
    single = any(np.asarray(a).dtype == np.float32 for a in args)
    assert np.isclose(reverse, forward, rtol=1e-5 if single else 1e-12, atol=1e-12)


# Complex arrays: every case above but interp's (np.interp takes complex values in fp only:
# tests/test_complex.py) with an imaginary part on each float array, in both modes and to
# order 2; the writes' values NumPy's bit for bit.


COMPLEX_GATHERS = [complexified(c) for c in GATHERS if not c.name.startswith("interp")]
COMPLEX_WRITES = [complexified(c) for c in SCATTERS + OVERLAPS + REPEATS]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_GATHERS + COMPLEX_WRITES, ids=case_id)
def test_complex_indexing_gradient(case, policy, rng):
    check_complex(case, case.sample(rng), policy)


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_GATHERS + COMPLEX_WRITES, ids=case_id)
def test_complex_indexing_second_derivatives(case, policy, rng):
    check_complex(case, case.sample(rng), policy, order=2)


def _complex_normal(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("case", COMPLEX_WRITES, ids=case_id)
def test_complex_writes_compute_what_numpy_computes(case, rng):
    """As ``test_writes_compute_what_numpy_computes``, on complex arrays (restore policy):
    values bit for bit in both modes, ``Re <gradient, v> = Re <w, jvp(v)>``."""
    args = case.sample(rng)
    before = _bytes(args)
    expected_arguments = _copies_sharing_as(args)
    expected = case.function(*expected_arguments)

    y, back = mutad.pullback(case.function, *args)
    assert _bytes(y) == _bytes(expected)
    assert _bytes(args) == _bytes(expected_arguments)
    w = [_complex_normal(rng, np.shape(leaf)) if np.iscomplexobj(leaf)
         else rng.standard_normal(np.shape(leaf)) for leaf in flatten(y)[0]]
    grads = back(flatten(y)[1](w))
    assert _bytes(args) == before

    tangents = tuple(_complex_normal(rng, np.shape(a)) for a in args)
    y_forward, dy = mutad.jvp(case.function, tuple(args), tangents)
    assert _bytes(y_forward) == _bytes(expected)
    assert _bytes(args) == before
    reverse = sum(np.vdot(g, t).real for g, t in zip(grads, tangents, strict=True))
    forward = sum(np.vdot(wi, di).real for wi, di in zip(w, flatten(dy)[0], strict=True))
    assert np.isclose(reverse, forward, rtol=1e-12, atol=1e-12)


def _slices_of(length, size):
    """Every slice with steps of ±1 and ±2 that picks ``length`` elements of ``size``."""
    found = []
    for step in (1, -1, 2, -2):
        for start in range(size):
            stop = start + step * length
            if 0 <= start + step * (length - 1) < size:
                found.append(slice(start, None if stop < 0 else stop, step))
    return found


def test_every_strided_overlap_of_three_elements_in_six(rng):
    """x[t] = x[s] and np.copyto(x[t], x[s]) for every pair of such slices: NumPy's values bit
    for bit in both modes, and the gradient the transpose of the forward derivative."""
    slices = _slices_of(3, 6)
    x = rng.standard_normal(6)
    w, v = rng.standard_normal(6), rng.standard_normal(6)
    for t in slices:
        for s in slices:
            for write in (lambda x: x.__setitem__(t, x[s]), lambda x: np.copyto(x[t], x[s])):
                def f(x):
                    write(x)
                    return x

                expected = f(x.copy())
                y, back = mutad.pullback(f, x)
                (grad,) = back(w)
                y_forward, dy = mutad.jvp(f, (x,), (v,))
                assert y.tobytes() == expected.tobytes() == y_forward.tobytes(), (t, s)
                assert np.isclose(grad @ v, w @ dy, rtol=1e-12, atol=1e-12), (t, s)


@pytest.mark.parametrize("case", OVERLAPS + REPEATS, ids=case_id)
def test_writes_jvp(case, rng):
    mutad.check_jvp(case.function, *case.sample(rng))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("write", [assign_strided_from_prefix, copyto_strided_from_prefix],
                         ids=["assign", "copyto"])
def test_strided_assignment_from_an_overlapping_prefix(write, policy):
    """The reproducer: NumPy leaves [1, 2, 2, 4, 2] (x[4] takes the x[2] it has just
    written), so the sum is 11 and its gradient is [1, 3, 0, 1, 0], in both modes."""
    def f(x):
        return write(x).sum()

    x = np.arange(1.0, 6.0)
    value, (grad,) = mutad.value_and_gradient(f, x, policy=policy)
    assert value == f(x.copy()) == 11.0
    assert np.array_equal(grad, [1.0, 3.0, 0.0, 1.0, 0.0])
    y, dy = mutad.jvp(f, (x,), (np.array([1.0, 10.0, 100.0, 1000.0, 10000.0]),))
    assert y == 11.0 and dy == 1.0 + 3 * 10.0 + 1000.0
    assert np.array_equal(x, np.arange(1.0, 6.0))


@pytest.mark.parametrize("policy", POLICIES)
def test_the_repeated_index_numpy_keeps_gets_the_gradient(policy):
    """Of x[[0, 0, 1]] = v NumPy keeps one write to x[0]; mutad asks NumPy which."""
    kept = np.zeros(2)
    kept[[0, 0, 1]] = [1.0, 2.0, 3.0]
    winner = int(kept[0]) - 1
    v = np.array([0.5, -1.5, 2.5])
    (_, grad) = mutad.gradient(lambda x, v: assign_repeated(x, v)[0] * 1.0, np.ones(5), v,
                               policy=policy)
    assert np.array_equal(grad, np.eye(3)[winner])


@pytest.mark.parametrize("policy", POLICIES)
def test_repeated_indices_in_assignment_are_no_longer_refused(policy):
    """x[[0, 0]] = [1, 2] * x[1] used to raise; NumPy keeps the second write, 2 x[1]."""
    x = np.linspace(0.0, 1.0, 4)
    before = x.tobytes()

    def f(x):
        x[np.array([0, 0])] = np.array([1.0, 2.0]) * x[1]
        return x.sum()

    value, (grad,) = mutad.value_and_gradient(f, x, policy=policy)
    assert value == f(x.copy())
    assert np.array_equal(grad, [0.0, 3.0, 1.0, 1.0])
    assert x.tobytes() == before


@pytest.mark.parametrize("policy", POLICIES)
def test_a_nested_gradient_writing_from_the_enclosing_array_into_its_own_memory(policy):
    """The inner function's argument is the outer one's array: x[0:3] is a constant to the
    inner gradient but the same memory as y, and NumPy's assignment reads it as it writes."""
    def outer(x):
        def inner(y):
            y[::2] = x[0:3]
            return (y * y).sum()

        value, (g,) = mutad.value_and_gradient(inner, x, policy=policy)
        return value + (g * np.arange(5.0)).sum()

    x = np.arange(1.0, 6.0)
    y = x.copy()
    y[::2] = y[0:3]  # [1, 2, 2, 4, 2]: inner's value is 29, its gradient [0, 4, 0, 8, 0]
    value, (grad,) = mutad.value_and_gradient(outer, x, policy=policy)
    assert value == (y * y).sum() + 4.0 + 3 * 8.0
    assert np.array_equal(grad, [2.0, 14.0, 0.0, 14.0, 0.0])
    mutad.check_grads(outer, x, policy=policy)


def _undo_kinds(monkeypatch):
    """Record, per in-place write, whether the tape chose the inverse or a checkpoint."""
    kinds = []
    choose = tape_module.Tape.undo_for

    def spy(self, inverse, is_safe, checkpoint, *args, **kwargs):
        undo = choose(self, inverse, is_safe, checkpoint, *args, **kwargs)
        kinds.append("restore" if undo is inverse else "checkpoint")
        return undo

    monkeypatch.setattr(tape_module.Tape, "undo_for", spy)
    return kinds


@pytest.mark.parametrize(("write", "shape"), [
    (assign_strided_from_prefix, (5,)), (add_shifted_in_place, (5,)), (place_overlapping, (5,)),
    (add_at_overlapping_shifted, (5,)), (assign_transposed, (3, 3)),
], ids=["assign", "augmented", "place", "add.at", "transposed"])
def test_overlapping_writes_are_checkpointed_under_restore(write, shape, monkeypatch, rng):
    # An inverse of an overlapping write would read its own target after the write.
    x = rng.standard_normal(shape)
    mutad.check_grads(lambda x: write(x) * 2.0, x)
    kinds = [r.undo_kind for r in mutad.make_tape(lambda x: write(x) * 2.0, x).records
             if r.undo_kind]
    assert kinds and set(kinds) == {"checkpoint"}


def test_a_write_numpy_performs_otherwise_than_on_labels_is_refused(monkeypatch):
    """If the labels ever disagreed with what NumPy wrote, the gradient would be wrong: the write
    is checked, and a disagreement raises instead."""
    def shifted_provenance(write, target, source):
        changed, origins, raised = provenance(write, target, source)
        return changed, (origins + 1) % source.size, raised

    provenance = inplace._provenance
    monkeypatch.setattr(inplace, "_provenance", shifted_provenance)
    x = np.arange(1.0, 6.0)
    with pytest.raises(mutad.MutadError, match="labels"):
        mutad.gradient(lambda x: assign_strided_from_prefix(x).sum(), x)
    assert np.array_equal(x, np.arange(1.0, 6.0))


def test_add_at_accumulates_repeated_indices():
    (grad,) = mutad.gradient(lambda v: (np.add.at(x := np.zeros_like(v), [0, 0, 1], v), x[0])[1],
                             np.array([1.0, 2.0, 3.0]))
    assert np.array_equal(grad, [1.0, 1.0, 0.0])


def test_add_at_saves_its_touched_elements_even_when_values_are_separate(monkeypatch, rng):
    kinds = _undo_kinds(monkeypatch)
    mutad.gradient(lambda x, v: (add_at_argument(x, v)).sum(), rng.standard_normal(6),
                   rng.standard_normal(3))
    assert kinds == ["checkpoint"]


def test_add_at_checkpoints_when_values_view_the_target(monkeypatch, rng):
    kinds = _undo_kinds(monkeypatch)
    mutad.gradient(lambda x: add_at_view_of_target(x).sum(), rng.standard_normal(6))
    assert kinds == ["checkpoint"]


def test_sort_sends_the_gradient_through_the_permutation():
    (grad,) = mutad.gradient(lambda x: (np.sort(x) * np.array([1.0, 10.0, 100.0])).sum(),
                             np.array([3.0, 1.0, 2.0]))
    assert np.array_equal(grad, [100.0, 1.0, 10.0])


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble])
def test_a_permutations_gradient_of_long_doubles(dtype):
    """np.sort, np.partition and a percentile of long doubles: the cotangent gathered back in
    its own dtype (np.bincount, which adds in float64, raised a TypeError on it)."""
    x = np.array([3.0, 1.0, 2.0, 0.5], dtype=dtype)
    weights = np.array([1.0, 10.0, 100.0, 1000.0])
    for f, expected in [(lambda x: (np.sort(x) * weights).sum().real, [1000.0, 10.0, 100.0, 1.0]),
                        (lambda x: np.partition(x, 1)[1].real, [0.0, 1.0, 0.0, 0.0]),
                        (lambda x: np.percentile(x.real, 50), [0.0, 0.5, 0.5, 0.0])]:
        (grad,) = mutad.gradient(f, x.copy())
        assert grad.dtype == x.dtype and np.array_equal(grad, expected)


@pytest.mark.parametrize("call", [
    lambda x, plain: np.add.at(plain, [0], x),
    lambda x, plain: np.put(plain, [0], x),
    lambda x, plain: np.copyto(plain, x),
    lambda x, plain: np.putmask(plain, plain > 0, x),
], ids=["add.at", "put", "copyto", "putmask"])
def test_writing_a_traced_value_into_an_untraced_array_names_the_fix(call):
    untraced = collections.deque([np.ones(3)])  # through a deque: not followed

    def f(x):
        call(x, untraced[0])
        return x.sum()

    with pytest.raises(mutad.MutadError, match="Allocate it inside"):
        mutad.gradient(f, np.ones(3))
    assert np.array_equal(untraced[0], np.ones(3))


def test_interp_with_period_is_numpys_reduction_differentiated():
    # NumPy reduces x and xp modulo the period and wraps xp around: fp's ends get the weight of
    # the points past them, and left and right are ignored.
    f = lambda fp: np.interp([0.25, 1.75, 3.5], [0.0, 1.0], fp, period=2.0, left=9.0)  # noqa: E731
    fp = np.array([1.0, 3.0])
    before = fp.tobytes()
    y, back = mutad.pullback(f, fp)
    assert np.array_equal(y, f(fp))
    np.testing.assert_allclose(back(np.ones(3))[0], [0.75 + 0.75 + 0.5, 0.25 + 0.25 + 0.5])
    assert fp.tobytes() == before


@pytest.mark.parametrize("points, knots", [
    ([0.5, -1.0, 0.0, np.inf, -np.inf], (0.0, 0.0)),  # repeated knots, x outside or on them
    ([0.5, 1.0, 1.5, 2.0], (0.0, 1.0, 1.0, 2.0)),  # a repeated knot inside
    ([0.5, -0.5, 0.0, 1.0], (1.0, 0.0)),  # decreasing: x both above and below, NumPy's right
], ids=["repeated-ends", "repeated-inside", "decreasing-ends"])
def test_interp_gradients_where_knots_repeat_or_decrease_are_those_of_numpys_values(points, knots):
    """Regression: np.interp(0.5, [0, 0], fp) (NumPy's fp[-1]) had the gradient nan in every
    argument (0/0 of the empty interval, times the zero of an x outside it), and
    np.interp(0.5, [1, 0], [2, 5]) (NumPy's 5.0: x > xp[-1] is asked first) gave fp the
    gradient [1, 1], taking x for both below and above. Each point's gradient and tangent is
    the derivative of NumPy's value, here a knot's height or a line's."""
    n = len(knots)
    x = np.array([*knots, *np.arange(3.0, 3.0 + n)])
    f = lambda x: np.interp(np.array(points), x[:n], x[n:])  # noqa: E731
    before = x.tobytes()
    assert mutad.pullback(f, x)[0].tobytes() == f(x).tobytes()
    for k, point in enumerate(points):
        value, gradient = mutad.value_and_grad(lambda x: f(x)[k])(x)
        assert value == f(x)[k]
        expected = np.zeros(2 * n)  # by hand: the height NumPy returns, or the line through two
        if point > knots[-1]:
            expected[2 * n - 1] = 1.0
        elif point < knots[0]:
            expected[n] = 1.0
        else:  # (x == xp[-1]: the last interval's, the height fp[-1] where it is empty)
            i = max([i for i in range(n - 1) if knots[i] <= point < knots[i + 1]], default=n - 2)
            width = knots[i + 1] - knots[i]
            t = (point - knots[i]) / width if width else 1.0
            s = (x[n + i + 1] - x[n + i]) / width if width else 0.0
            expected[[i, i + 1, n + i, n + i + 1]] = [s * (t - 1.0), -s * t, 1.0 - t, t]
        assert gradient.tolist() == expected.tolist(), point
        tangent = mutad.jvp(lambda x: f(x)[k], (x,), (np.arange(1.0, 2 * n + 1.0),))[1]
        assert tangent == expected @ np.arange(1.0, 2 * n + 1.0)
    assert x.tobytes() == before


def test_interp_inside_knots_that_decrease_is_refused():
    """NumPy's value inside an xp that decreases is its search's, which mutad does not
    follow: refused, not a gradient of another interval."""
    for run in (lambda: mutad.gradient(lambda fp: np.interp(0.5, [0.0, 2.0, 1.0], fp), np.ones(3)),
                lambda: mutad.jvp(lambda fp: np.interp(0.5, [0.0, 2.0, 1.0], fp), (np.ones(3),),
                                  (np.ones(3),))):
        with pytest.raises(mutad.errors.UnsupportedOperationError, match="xp not increasing"):
            run()


# Decisions: permutations and intervals are decided when the rule runs -----------------------

from decisions import check_decision_kept, then_disturbed  # noqa: E402

ON_KNOTS = np.array([0.7, 0.2, 0.4, -0.3, 0.8])
KNOTS = np.array([-0.5, 0.2, 0.4, 0.7, 1.0])
HEIGHTS = np.array([1.0, -2.0, 0.5, 3.0, 0.0])


@pytest.mark.parametrize(("operation", "x", "differentiable"), [
    (lambda x: np.interp(x, KNOTS, HEIGHTS), ON_KNOTS, False),
    (lambda x: np.interp(x, KNOTS, HEIGHTS), ON_KNOTS + 0.05, True),
    (lambda x: np.interp(np.array([0.3, 0.5, 0.9]), np.sort(x), HEIGHTS), ON_KNOTS, True),
    (lambda x: np.sort(x), np.array([0.7, 0.7, 0.2, -0.3, 0.2]), False),
    (lambda x: np.sort(x), ON_KNOTS, True),
    (lambda x: np.partition(x, 2), np.array([0.7, 0.2, 0.2, -0.3, 0.8]), False),
    (lambda x: x[np.argsort(x)], np.array([0.7, 0.7, 0.2, -0.3, 0.2]), False),
    (lambda x: np.take_along_axis(x, np.argmax(x, keepdims=True), 0),
     np.array([0.7, 0.7, 0.2, -0.3, 0.2]), False),
], ids=["interp-on-knots", "interp", "interp-knots", "sort-ties", "sort", "partition",
        "argsort-gather", "argmax-gather"])
def test_gather_decisions_survive_restoration_by_inversion(operation, x, differentiable):
    check_decision_kept(then_disturbed(operation), x, differentiable=differentiable)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("scatter", [np.add.at, np.subtract.at])
def test_a_scatter_that_absorbs_its_target_is_undone_exactly(scatter, policy):
    # Subtracting 1e300 back from 0.3 + 1e300 gives 0, not 0.3: the touched elements are saved.
    def f(x):
        y = x * x
        scatter(x, [0, 1, 1], 1e300)
        return y.sum()

    x = np.array([0.3, 0.2, 0.5])
    before = x.tobytes()
    (g,) = mutad.gradient(f, x, policy=policy)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-15)
    assert x.tobytes() == before


def layout(y):
    """What a later ravel, reshape or write depends on: shape, strides and contiguity flags."""
    return y.shape, y.strides, y.flags.c_contiguous, y.flags.f_contiguous


def in_place_sort(a):
    a = a.copy(order="K")
    a.sort(axis=0)
    return a


# Results NumPy computes itself (a copy in the input's order, then sorted or gathered) have the
# input's layout or a C-ordered one; the traced result must have NumPy's, or a later ravel is
# a view where NumPy's is a copy.
# fmt: off
GATHER_LAYOUTS = {
    "sort-axis-0":        lambda a: np.sort(a, axis=0),
    "sort-last-axis":     np.sort,
    "sort-flat":          lambda a: np.sort(a, axis=None),
    "sort-method":        in_place_sort,
    "partition-axis-0":   lambda a: np.partition(a, 1, axis=0),
    "partition-last":     lambda a: np.partition(a, (0, 2)),
    "take_along_axis":    lambda a: np.take_along_axis(a, np.argsort(a, axis=0), 0),
    "choose":             lambda a: np.choose(np.zeros(a.shape, int), [a, a * 2.0]),
}
LAYOUT_INPUTS = {
    "F-ordered":          lambda x: np.asfortranarray(x[:, :, 0]),
    "strided":            lambda x: x[::2, ::2, 0],
    "transposed-3d":      lambda x: x.transpose(2, 0, 1),
}
# fmt: on


@pytest.mark.parametrize("made", LAYOUT_INPUTS.values(), ids=LAYOUT_INPUTS.keys())
@pytest.mark.parametrize("func", GATHER_LAYOUTS.values(), ids=GATHER_LAYOUTS.keys())
def test_gathers_have_numpys_layout_and_values(func, made, rng):
    x = made(rng.standard_normal((6, 5, 4)))
    expected = func(x)
    seen = {}

    def f(a):
        y = func(a)
        seen["layout"], seen["bytes"] = layout(y.value), y.value.tobytes(order="A")
        return (y * y).sum()

    before = x.tobytes()
    mutad.gradient(f, x)
    assert x.tobytes() == before
    assert seen["layout"] == layout(expected)
    assert seen["bytes"] == expected.tobytes(order="A")


def test_ravel_of_the_sort_of_an_f_ordered_array_is_a_copy():
    a = np.array([0.274, -0.46, -0.918, -0.967]).reshape(2, 2, order="F")

    def f(a):
        t = np.sort(a, axis=0)
        v = np.ravel(t)
        t *= 3.0
        return t.sum() + 10 * v.sum()

    value, _ = mutad.value_and_grad(f)(a)
    assert value == f(np.copy(a, order="K"))
    mutad.check_grads(f, a)


@pytest.mark.parametrize("func", [np.sort, lambda a: np.partition(a, 3)], ids=["sort", "partition"])
def test_sort_keeps_the_signs_of_zeros_numpy_gives(func):
    # NumPy's SIMD sort may order +0.0 and -0.0 otherwise than a stable gather would.
    x = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, 0.0, -0.0] * 4)
    seen = {}

    def f(a):
        y = func(a * 1.0)
        seen["bytes"] = y.value.tobytes()
        return (y * np.arange(32.0)).sum()

    (g,) = mutad.gradient(f, x)
    assert seen["bytes"] == func(x).tobytes()
    # Each output's weight goes to an input of equal value: the weights sum as the outputs do.
    weights = np.arange(32.0)
    y = func(x)
    for value in (-1.0, 0.0, 1.0):
        assert g[x == value].sum() == weights[y == value].sum()

# ----------------------------------------------------------------------------------------------
# Indexing traced arrays: basic reads are views, element reads copies, advanced and boolean
# indexing read and write


def check_both_policies(f, *args):
    for policy in POLICIES:
        mutad.check_grads(f, *args, policy=policy)


@pytest.fixture
def x(rng):
    return rng.uniform(0.5, 1.5, 6)


def test_basic_indexing_reads_are_views_that_see_later_writes(x):
    def f(a):
        view = a[1:4]
        a[2] = 10.0 * a[0]  # visible through the view, as in NumPy
        return view * 1.0

    check_both_policies(f, x)
    y, _ = mutad.pullback(f, x.copy())
    assert y[1] == 10.0 * x[0]


def test_scalar_element_reads_are_copies(x):
    def f(a):
        first = a[0]
        a[0] = 5.0  # NumPy's a[0] is a copy: `first` keeps the old value
        return first * a

    check_both_policies(f, x)


@pytest.mark.parametrize("index", [
    np.array([0, 2, 2, 5]), np.array([True, False, True, False, False, True]),
    ([0, 3],), (slice(None, None, -2),), (Ellipsis,), (np.array([[1], [4]]),),
], ids=repr)
def test_advanced_and_boolean_indexing_reads_and_writes(x, index):
    def read(a):
        return a[index] * a[index]

    check_both_policies(read, x)


@pytest.mark.parametrize("index", [np.array([0, 2, 5]), np.array([True, False, True, False, False, True]),
                                   [4, 1]], ids=repr)
def test_advanced_and_boolean_indexing_writes(x, index):
    def write(a, b):
        a[index] = b[: np.size(a[index])] ** 2
        a[index] *= 2.0
        return a

    check_both_policies(write, x, x[::-1] + 0.5)


# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, and the transpose of
# the reverse rule (rule_checks.check_forward_rule)

Y = normal_array(3, 4)
PICK = RNG.integers(0, 2, (3, 4))
XP = np.sort(normal_array(6))
SAMPLES = np.concatenate([XP[0] - [1.0, 0.3], XP[:-1] + 0.4 * np.diff(XP), XP[-1] + [0.2, 2.0]])

FORWARD_GATHERS = [
    rule_case(np.take, X, [0, 2, 2], axis=1),
    rule_case(np.take, X, [3, 11, 0, 3]),
    rule_case(np.take, X, [5, -1, 20], mode="clip"),
    rule_case(np.take, X, 7),
    rule_case(np.take_along_axis, X, np.argsort(X, 1), 1),
    rule_case(np.take_along_axis, X, np.array([[0, 0, 2, 1]]), 0),
    rule_case(np.compress, [True, False, True], X, axis=0),
    rule_case(np.compress, [False, True], V),
    rule_case(np.extract, WHERE, X),
    rule_case(np.sort, X),
    rule_case(np.sort, X3, 0),
    rule_case(np.sort, X, None),
    rule_case(np.sort, TIES, fd=False),
    rule_case(np.partition, V, 2),
    rule_case(np.partition, X, 1, axis=0),
    rule_case(np.partition, X, [0, 5], axis=None),
    rule_case(np.choose, PICK, [X, Y]),
    rule_case(np.choose, PICK, np.stack([X, Y])),
    rule_case(np.choose, PICK, [Const(X), Y]),
    rule_case(np.choose, PICK + 1, [X, Y, V4], mode="wrap"),
    rule_case(np.select, [WHERE, X > 0], [X, Y], default=1.5),
    rule_case(np.select, [WHERE, X > 0], [Const(X), Y], V4),
    rule_case(np.select, [WHERE], [X]),
    rule_case(np.diff, X),
    rule_case(np.diff, X, 2, 0),
    rule_case(np.diff, X, 1, -1, prepend=2.5, append=V[:3, None]),
    rule_case(np.diff, X, 1, 1, normal_array(3, 2), np.array(0.5)),
    rule_case(np.diff, X, 2, 1, Const(normal_array(3, 1))),
    rule_case(np.diff, X, 0),
    rule_case(np.interp, SAMPLES, XP, normal_array(6)),
    rule_case(np.interp, SAMPLES, Const(XP), normal_array(6), np.array(-3.0), np.array(4.0)),
    rule_case(np.interp, SAMPLES, XP, Const(normal_array(6)), -3.0),
    rule_case(np.interp, np.array(0.1), np.array([0.1]), np.array([2.0])),
    rule_case(np.interp, SAMPLES[2], XP, normal_array(6)),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arguments are cases here
@pytest.mark.parametrize("case", FORWARD_GATHERS, ids=case_id)
def test_forward_rule_gather(case, rng):
    check_forward_rule(case, rng)


def test_a_ufunc_at_whose_operand_shares_the_targets_memory_is_refused():
    # NumPy reads the operand while it writes the target: refused rather than guessed.
    x = np.array([0.5, 1.5, 2.5, 3.5])
    before = x.tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="shares memory"):
        mutad.gradient(lambda x: (np.multiply.at(x, [0, 1], x[2:]), x.sum())[1], x)
    assert x.tobytes() == before


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply])
@pytest.mark.parametrize("mode", ["gradient", "jvp", "jacfwd"])
def test_a_ufunc_at_numpy_reads_past_its_values_is_refused(ufunc, mode):
    # Into a 1-d array at a 2-d index, values of one dimension: NumPy reads past their end (its
    # result holds what lies in memory there), so no value or derivative can match it. The
    # jvp wrote NumPy's misread into the tangent; the gradient was of the broadcast values.
    x, v = np.array([0.5, 1.5, 2.5, 3.5]), np.array([2.0, 3.0, 4.0])
    before = x.tobytes(), v.tobytes()

    def f(x, v):
        ufunc.at(x, np.array([[0, 1], [1, 2]]), v[:2])
        return x

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="reads past the end"):
        if mode == "gradient":
            mutad.gradient(lambda x, v: f(x, v).sum(), x, v)
        elif mode == "jvp":
            mutad.jvp(f, (x, v), (np.ones(4), np.ones(3)))
        else:
            mutad.jacfwd(f, argnums=(0, 1))(x, v)
    assert (x.tobytes(), v.tobytes()) == before


def test_bincount_is_linear_in_its_weights():
    """Regression: np.bincount and np.histogram were non-differentiable, so a differentiated
    weights argument got a silent zero gradient."""
    rng = np.random.default_rng(0)
    indices, w = np.array([0, 3, 3, 1, 5, 0]), rng.random(6)
    y, _ = mutad.pullback(lambda w: np.bincount(indices, weights=w, minlength=8), w)
    assert y.tobytes() == np.bincount(indices, w, 8).tobytes()
    for policy in POLICIES:
        mutad.check_grads(lambda w: np.bincount(indices, w * w, minlength=8), w, order=2,
                          policy=policy, modes=("rev", "fwd"))
    samples = np.array([0.1, 0.35, 0.6, 0.9])
    assert mutad.gradient(lambda x: np.histogram(x, 2, (0, 1))[0].sum() * x.sum(), samples)[
        0].tolist() == [4.0] * 4


HISTOGRAMS = {"even bins": dict(bins=3), "a range": dict(bins=3, range=(0.0, 1.0)),
              "uneven bins": dict(bins=[0.0, 0.2, 0.6, 1.0]),
              "density": dict(bins=4, density=True)}


@pytest.mark.parametrize("settings", HISTOGRAMS.values(), ids=HISTOGRAMS)
def test_histogram_is_linear_in_its_weights(settings):
    """np.histogram with differentiated weights: NumPy's own sums (an algorithm of its own for
    uneven bins: the same bits), each weight's derivative its bin's; samples outside the
    edges, and its right edge in the last bin, as NumPy bins them."""
    samples = np.array([0.1, 0.5, 0.7, 0.99, 1.0, 1.5, -0.2, 0.3])
    w = np.linspace(0.5, 2.0, 8)
    before = w.tobytes()
    f = lambda w: (np.histogram(samples, weights=w * w, **settings)[0] ** 2).sum()  # noqa: E731
    assert mutad.value_and_grad(f)(w)[0] == f(w)
    for policy in POLICIES:
        mutad.check_grads(f, w, order=2, policy=policy, modes=("rev", "fwd"))
    replaying = mutad.grad(f, replay=True)
    assert [replaying(w).tolist() for _ in range(3)][2] == mutad.grad(f)(w).tolist()
    assert w.tobytes() == before


def _counts_times_samples(x, w):
    counts, _ = np.histogram(x, bins=3, range=(0.0, 1.0))
    return (counts * x[:3]).sum() + w.sum()


def _weighted(x, w):
    sums, edges = np.histogram(x, bins=3, range=(0.0, 1.0), weights=w * w)
    return (sums * x[:3]).sum() + edges.sum()


def _weighted_density(x, w):
    heights, _ = np.histogram(x, bins=[0.0, 0.3, 0.55, 1.0], density=True, weights=w * w)
    return (heights * x[:3]).sum()


def _bins_from_the_samples(x, w):
    heights, edges = np.histogram(x, bins="auto", range=(0.0, 1.0), density=True)
    return (heights ** 2).sum() * x[0] + edges.size * w[0]


HISTOGRAM_BINNINGS = {"counts": _counts_times_samples, "weights": _weighted,
                      "weights, density": _weighted_density,
                      "bins='auto'": _bins_from_the_samples}


@pytest.mark.parametrize("f", HISTOGRAM_BINNINGS.values(), ids=HISTOGRAM_BINNINGS)
def test_a_replayed_histogram_bins_each_calls_samples(f):
    """Regression: np.histogram counted the samples' plain values outside any step, so a
    replay reused the first call's counts (and bins) on every later call: stale values and
    gradients. The bins are decided again on every call, and a number of bins decided by the
    samples is guarded (bins='auto' takes 5 bins on the middle calls, 6 on the others: the
    third call replays the second's program). Bins given as a list are the array NumPy makes
    of it, which a replay makes again (a density's edges were refused)."""
    from test_replay import replayed_like_traced

    calls = [(np.array([0.1, 0.5, 0.9, 0.2, 0.25, 0.4]), np.linspace(0.5, 1.0, 6)),
             (np.array([0.9, 0.9, 0.5, 0.5, 0.05, 0.95]), np.linspace(1.0, 2.0, 6)),
             (np.array([0.05, 0.1, 0.2, 0.95, 0.97, 0.99]), np.linspace(0.5, 1.0, 6)),
             (np.array([0.1, 0.5, 0.9, 0.2, 0.25, 0.4]), np.linspace(0.5, 1.0, 6))]
    replaying = replayed_like_traced(f, calls, argnums=(0, 1))
    for x, w in calls:
        value, grads = replaying(x, w)
        assert value == f(x, w)
        for policy in POLICIES:
            mutad.check_grads(f, x, w, policy=policy, modes=("rev", "fwd"))


def test_a_replayed_histogram_counts_with_the_range_each_call_computes():
    """Regression (a silently wrong replay): a range computed from the samples
    (``range=(x.min(), x.max())``) entered the recorded program as the first call's numbers,
    so later calls were counted in the first call's bins."""
    def f(x, w):
        counts, _ = np.histogram(x, bins=4, range=(x.min(), x.max()))
        return (counts * w[:4]).sum() + (x * x).sum()

    calls = [(np.array([0.1, 0.2, 0.3, 0.9, 0.95]), np.linspace(0.5, 1.0, 5)),
             (np.array([0.6, 0.7, 0.8, 0.9, 0.65]), np.linspace(1.0, 2.0, 5)),
             (np.array([0.05, 0.5, 0.52, 0.97, 0.3]), np.linspace(0.5, 1.0, 5))]
    replaying = replays_as_traced(f, calls, argnums=(0, 1))
    for x, w in calls:
        assert replaying(x, w)[0] == f(x, w)


def _mean_bin_center(x):
    heights, edges = np.histogram(x, bins=4, density=True)
    centers = (edges[1:] + edges[:-1]) / 2
    return (heights * centers * np.diff(edges)).sum()


def test_histogram_edges_computed_from_the_samples_are_differentiated():
    """Regression: without range=, NumPy's edges are np.linspace(x.min(), x.max(), bins + 1),
    and density's heights depend on them, but they had no gradient: a silent zero. The
    mean bin center moves with the smallest sample (index 0) and the largest (index 2)."""
    x = np.array([0.0, 0.1, 1.0, 0.2, 0.4, 0.6])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(_mean_bin_center)(x)
    assert value == _mean_bin_center(x)
    assert np.allclose(grad, [0.625, 0.0, 0.375, 0.0, 0.0, 0.0], rtol=0, atol=1e-15)
    for policy in POLICIES:
        mutad.check_grads(_mean_bin_center, x, order=2, policy=policy, modes=("rev", "fwd"))
    assert x.tobytes() == before


BIN_EDGES = {"an int": 5, "'auto'": "auto", "'fd'": "fd", "'sturges'": "sturges",
             "'doane'": "doane", "'scott'": "scott", "'stone'": "stone", "'rice'": "rice",
             "'sqrt'": "sqrt"}


@pytest.mark.parametrize("bins", BIN_EDGES.values(), ids=BIN_EDGES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_histogram_bin_edges_are_numpys_and_follow_the_samples_min_and_max(bins, dtype):
    """np.histogram_bin_edges, and np.histogram's edges and density: NumPy's bits (its
    linspace of the samples' min and max, in their dtype, with the number of bins a string
    decides from the samples), differentiated through the min and max."""
    x = np.array([0.31, 0.52, 0.1, 0.7, 0.45, 0.23, 0.66, 0.12], dtype=dtype)

    def f(x):
        heights, edges = np.histogram(x, bins=bins, density=True)
        return (heights * edges[1:] ** 2).sum() + (np.histogram_bin_edges(x, bins) ** 3).sum()

    def values(x):
        heights, edges = np.histogram(x, bins=bins, density=True)
        return heights, edges, np.histogram_bin_edges(x, bins)

    y, _ = mutad.pullback(values, x)
    for got, expected in zip(y, values(x)):
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    if dtype is np.float64:
        for policy in POLICIES:
            mutad.check_grads(f, x, policy=policy, modes=("rev", "fwd"))


def test_histogram_edges_of_equal_samples_widen_by_a_half():
    """NumPy widens an empty range by 0.5 each way: every edge moves with the samples' one
    value, whose gradient the min and the max share among their ties."""
    x = np.full(4, 2.0)
    edges = lambda x: np.histogram_bin_edges(x, bins=3)  # noqa: E731
    y, back = mutad.vjp(edges, x)
    assert y.tobytes() == edges(x).tobytes()
    assert back(np.ones(4))[0].tolist() == [1.0] * 4


def test_histogram_density_follows_traced_edges():
    """Edges given as a differentiated array: density's heights divide by their widths."""
    samples = np.array([0.1, 0.5, 0.7, 0.99, 0.3, 0.45])
    bins = np.array([0.0, 0.2, 0.6, 1.0])
    f = lambda bins: (np.histogram(samples, bins=bins, density=True)[0] ** 2).sum()  # noqa: E731
    assert mutad.value_and_grad(f)(bins)[0] == f(bins)
    for policy in POLICIES:
        mutad.check_grads(f, bins, order=2, policy=policy, modes=("rev", "fwd"))


def test_replayed_histogram_edges_follow_the_samples_and_guard_the_number_of_bins():
    from test_replay import replayed_like_traced

    def f(x):
        heights, edges = np.histogram(x, bins="auto", density=True)
        return (heights * edges[1:]).sum() + np.histogram_bin_edges(x, 3)[1]

    rng = np.random.default_rng(4)
    calls = [(rng.random(8) * scale,) for scale in (1.0, 2.0, 1.0)] + [
        (np.r_[rng.random(7), 40.0],), (np.full(8, 0.5),)]
    counts = [np.histogram_bin_edges(x, "auto").size for (x,) in calls]
    assert len(set(counts)) > 1  # the number of bins changes between calls
    replayed_like_traced(f, calls)


HISTOGRAM_SAMPLES = np.array([0.1, 0.5, 0.9, 1.3])  # a module-level array: a stand-in in f


@pytest.mark.parametrize("f", [
    lambda r: (np.histogram(HISTOGRAM_SAMPLES, bins=4, range=(r[0], r[1]))[1] ** 2).sum(),
    lambda r: (np.histogram(HISTOGRAM_SAMPLES * 1.0, 4, (r[0], r[1]), density=True)[0]
               * np.arange(4.0)).sum(),
    lambda r: (np.histogram_bin_edges(HISTOGRAM_SAMPLES, bins=3, range=(r[0], 2.0)) ** 3).sum(),
    lambda r: (np.histogram([0.5, 1.0, 1.5], bins=3, range=(r[0], r[1]))[1] ** 2).sum(),
    lambda r: (np.histogram([0.5, 1.0, 1.5], 3, (r[0], r[1]))[1] ** 2).sum(),
    lambda r: (np.histogram_bin_edges([0.5, 1.0], bins=3, range=(r[0], r[1])) ** 2).sum(),
], ids=["edges", "density", "bin-edges", "listed", "listed-positional", "listed-bin-edges"])
def test_histogram_edges_follow_a_differentiated_range(f):
    """The edges np.linspace(range[0], range[1], n + 1) move with a differentiated range (its
    gradient was 0, and samples reached by name raised ConstantModifiedError; samples of a
    list, which NumPy's dispatch passed over, ran NumPy's code on the traced range, which
    raised ConstantModifiedError)."""
    r = np.array([-1.1, 2.0])
    assert mutad.value_and_grad(f)(r)[0] == f(r)
    mutad.check_grads(f, r)
    mutad.check_jvp(f, r)
    replays_as_traced(f, [(r * scale,) for scale in (1.0, 1.05, 0.97)])


# np.histogramdd and np.histogram2d: NumPy's counts (decisions), linear in the weights; the
# edges NumPy computes from differentiated samples follow their min and max

HX = np.linspace(-2, 2, 60)
HY = np.sin(3 * HX)
HW = np.random.default_rng(1).standard_normal(60)
HS = np.array([0.05, 0.31, 0.52, 0.93, 0.18, 0.71, 0.44, 0.66, 0.87, 0.24])
HISTOGRAMS_DD = {
    "histogram2d, weights": (lambda w: np.sum(np.histogram2d(
        HX, HY, bins=5, weights=np.exp(w * 0.1))[0] ** 2), HW),
    "histogram2d, density": (lambda w: np.sum(np.histogram2d(
        HX, HY, bins=(4, 3), weights=w ** 2, density=True)[0]
        * np.arange(12).reshape(4, 3)), HW),
    "histogram2d, edges (ragged)": (lambda w: np.sum(np.histogram2d(
        HX, HY, bins=[np.linspace(-2.5, 1, 5), [-1, 0, 0.5, 1]], weights=w ** 2)[0]
        * np.arange(12).reshape(4, 3)), HW),
    "histogramdd, a stacked sample": (lambda w: np.histogramdd(
        np.stack([HX, np.cos(np.arange(60))], axis=1), bins=(4, 4), weights=w ** 2)[0].max(),
        HW),
    "histogramdd, ranges": (lambda w: np.sum(np.histogramdd(
        np.stack([HX, HY, HX * HY], axis=1), bins=3, range=[(-1, 1), None, (-1, 1)],
        weights=np.sin(w))[0] ** 2), HW),
    "histogram2d, differentiated samples and edges": (
        lambda w: (lambda h, xe, ye: np.sum(h * np.arange(25).reshape(5, 5)) + np.sum(xe ** 2)
                   + np.sum(ye))(*np.histogram2d(w, w[::-1] * 2, bins=5, weights=np.cos(w))),
        HS),
    "histogram2d, differentiated samples, density": (lambda w: np.sum(np.histogram2d(
        w, np.sin(w), bins=5, density=True)[0] * np.arange(25).reshape(5, 5)), HS),
}


@pytest.mark.parametrize("name", HISTOGRAMS_DD)
def test_histogramdd(name):
    from cases import replays_as_traced
    f, x = HISTOGRAMS_DD[name]
    w = x.copy()
    for policy in POLICIES:
        mutad.check_grads(f, w, policy=policy, modes=("rev", "fwd"))
    replays_as_traced(f, [(w,), (w * 1.1,), (w * 0.9,)])
    assert mutad.value_and_grad(f)(w)[0].tobytes() == f(x.copy()).tobytes()
    assert w.tobytes() == x.tobytes()


def test_histogramdd_values_are_numpys():
    def parts(w):
        h, xe, ye = np.histogram2d(w, HY[:10], bins=4, weights=w * w)
        g, edges = np.histogramdd(np.stack([w, w ** 2], axis=1), bins=(3, 2), density=True)
        return h, xe, ye, g, edges[0], edges[1]

    got = mutad.jvp(parts, (HS.copy(),), (np.ones(10),))[0]
    for a, b in zip(got, parts(HS.copy())):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_histogramdd_refuses_differentiated_edges():
    with pytest.raises(mutad.MutadError, match="histogramdd.*differentiated bins"):
        mutad.gradient(lambda e: np.histogram2d(HX, HY, bins=[e, e], weights=HW)[0].sum(),
                       np.linspace(-2, 2, 4))


def _element_loop(index):
    """A scalar loop writing elements of a vector and of a matrix, each key made by
    ``index`` from Python's integers: as they are (``tracing._element_of``'s keys) or as NumPy's
    integers (the general path)."""

    def f(a, m):
        n = a.shape[0]
        for j in range(1, n - 1):
            a[index(j)] = (a[index(j - 1)] + a[index(j)] + a[index(j + 1)]) / 3.0
        a[index(-1)] = a[index(0)] * 2.0
        for i in range(1, m.shape[0]):
            m[index(i), index(i - 1)] -= m[index(i - 1), index(i)] * m[index(i), index(i)]
            m[index(i), index(-1)] = np.sin(m[index(i - 1), index(0)])
            m[index(i)] *= 0.5  # fewer integers than axes: a row, not an element
            m[index(i - 1)] = m[index(i)][None, :] * 0.5  # NumPy drops the leading 1
        return (a * a).sum() + (m * m).sum()

    return f


@pytest.mark.parametrize("policy", POLICIES)
def test_element_writes_by_python_integers_are_those_by_numpy_integers(policy, rng):
    a, m = rng.standard_normal(7), rng.standard_normal((4, 4))
    before = [a.tobytes(), m.tobytes()]
    fast = mutad.value_and_grad(_element_loop(int), argnums=(0, 1), policy=policy)(a, m)
    general = mutad.value_and_grad(_element_loop(np.intp), argnums=(0, 1), policy=policy)(a, m)
    assert [a.tobytes(), m.tobytes()] == before
    expected = _element_loop(int)(a.copy(), m.copy())
    assert np.float64(fast[0]).tobytes() == np.float64(expected).tobytes()
    assert np.float64(fast[0]).tobytes() == np.float64(general[0]).tobytes()
    assert [g.tobytes() for g in fast[1]] == [g.tobytes() for g in general[1]]
    mutad.testing.check_grads(_element_loop(int), a, m, policy=policy, order=2, modes=("rev",))
    assert [a.tobytes(), m.tobytes()] == before


def test_an_element_write_out_of_bounds_is_numpys_index_error():
    def f(a):
        a[5] = a[0] * 2.0
        return a.sum()

    with pytest.raises(IndexError, match="out of bounds"):
        f(np.ones(3))
    with pytest.raises(IndexError, match="out of bounds"):
        mutad.gradient(f, np.ones(3))


def _put_past_the_end(u, x):
    np.put(u, [0, 1, 9], x[:3] * 3.0)  # NumPy writes u[0] and u[1], then meets 9


def _copyto_refusing_the_cast(u, x):
    np.copyto(u, (x * 3.0).astype(np.float32), casting="no")  # NumPy refuses before writing


def _copyto_refusing_complex(u, x):
    np.copyto(u, x * 3.0 + 1j)  # complex into float: refused by casting="same_kind"


def _flat_past_the_end(u, x):
    u.flat[[3, 1, 9, 0]] = x[:2] * 3.0  # NumPy writes u[3] and u[1], then meets 9


def _place_of_no_values(u, x):
    np.place(u, x > 0.4, [])  # NumPy refuses before writing: no values to place


def _sequence_by_index_array(u, x):
    u[[0, 2]] = [x[0] * 3.0, "q"]  # NumPy converts it whole first: writes nothing


def _sequence_broadcast(u, x):
    u.reshape(5, 1)[:] = [x[0] * 3.0, "q"][:1] + ["q"]  # (a row broadcast: nothing written)


def _sequence_of_a_number_in_words(u, x):
    u[1:3] = [x[0] * 3.0, "2.5"]  # converted as NumPy converts it: no error


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("write, error", [
    (_put_past_the_end, IndexError),
    (_copyto_refusing_the_cast, TypeError),
    (_copyto_refusing_complex, TypeError),
    (_place_of_no_values, ValueError),
    (_flat_past_the_end, IndexError),
    (_sequence_by_index_array, ValueError),
    (_sequence_broadcast, ValueError),
    (_sequence_of_a_number_in_words, ValueError),
], ids=["put-past-the-end", "copyto-casting-no", "copyto-complex-into-float", "place-no-values",
        "flat-past-the-end", "sequence-by-index-array", "sequence-broadcast",
        "sequence-of-a-number-in-words"])
def test_a_copying_write_raising_caught_by_f_leaves_what_numpy_leaves(write, error, policy):
    """Regression: ``np.put`` meeting an index out of bounds after writing the elements before
    it, f catching the IndexError: mutad wrote nothing (value 11.7 for NumPy's 8.7, the
    gradient missing the write); ``np.copyto`` refusing a cast wrote all the same (35.1 for
    11.7). Now the array holds what NumPy leaves, bit for bit, and the gradient is that of
    the whole program, the except branch included; the caller's bytes come back. Forward
    mode's ``np.place(u, mask, [])``, refused by NumPy, zeroed u's tangent under the mask: the
    tangent's write took a zero for the values, not their shape. ``u.flat[[3, 1, 9, 0]] = v``
    wrote nothing (NumPy writes u[3] and u[1], then raises). Forward mode's ``u[1:3] = [v,
    "2.5"]`` raised ValueError where NumPy converts the string (nothing written, caught by f:
    another value)."""
    weights = np.arange(1.0, 6.0)

    def f(x):
        u = x * 1.0
        try:
            write(u, x)
        except error:
            pass
        return np.sum(u * u * weights)

    x = np.array([0.5, -1.0, 2.0, 0.3, 1.2])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(f, policy=policy)(x)
    assert np.float64(value).tobytes() == np.float64(f(x)).tobytes()
    step = 1e-6
    differences = [(f(x + h) - f(x - h)) / (2 * step) for h in np.eye(5) * step]
    np.testing.assert_allclose(grad, differences, rtol=1e-6)
    tangent = np.linspace(-1.0, 1.0, 5)  # forward mode: np.put's tangent was not written
    y, dy = mutad.jvp(f, (x,), (tangent,))
    assert np.float64(y).tobytes() == np.float64(value).tobytes()
    np.testing.assert_allclose(dy, grad @ tangent, rtol=1e-12)
    assert x.tobytes() == before


@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x), lambda f, x: mutad.jvp(f, (x,), (np.ones_like(x),)),
    lambda f, x: mutad.grad(f, replay=True)(x)], ids=["gradient", "jvp", "replay"])
@pytest.mark.parametrize("unconvertible", ["q", 1j, 2**1100, object()],
                         ids=["word", "complex", "past-the-doubles", "object"])
def test_a_sequence_numpy_writes_in_part_before_raising_is_refused(unconvertible, differentiate):
    """Regression: ``u[:] = [1.0, x[0], "q", ...]``, f catching the error: NumPy writes such
    a sequence element by element, leaving those before "q" written (a complex number, an
    int past the doubles, an object too), where mutad, converting the list first, wrote
    nothing (another value; forward mode wrote the object's values but not their tangents).
    Refused by name; the caller's bytes come back."""
    def f(x):
        u = x * 1.0
        try:
            u[:] = [1.0, x[0] * 2.0, unconvertible, 4.0, 5.0]
        except (ValueError, TypeError, OverflowError):
            pass
        return np.sum(u * u)

    x = np.array([0.5, -1.0, 2.0, 0.3, 1.2])
    before = x.tobytes()
    assert f(x.copy()) == 1.0 + 1.0 + 4.0 + 0.09 + 1.44  # NumPy wrote u[0] and u[1]
    with pytest.raises(mutad.errors.UnsupportedOperationError,
                       match="element by element|dtype object"):
        differentiate(f, x)
    assert x.tobytes() == before


def _scatters_raising(x, which, raising):
    u = x * 1.0
    operand = x[:4] * np.array([0.0, 1.0, 0.0, 2.0])
    try:
        with np.errstate(all="raise" if raising else "ignore"):
            if which == "log":
                np.log.at(u, [0, 1, 2, 0])  # NumPy applies all four, then raises
            elif which == "divide":
                np.divide.at(u, [0, 1, 2, 1], operand)
            else:
                np.multiply.at(u, [0, 1, 0], operand[1:] * 1e307 + 2.0)
    except FloatingPointError:
        pass
    return np.sum(np.nan_to_num(u, nan=0.25, posinf=7.0, neginf=-7.0) * np.arange(1.0, 6.0))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("which", ["log", "divide", "multiply"])
def test_a_ufunc_at_raising_after_numpy_applied_it_is_differentiated(which, policy):
    """Regression: ``np.log.at(u, i)`` under ``np.errstate(invalid="raise")``, f catching the
    FloatingPointError: NumPy applies every occurrence, then raises, but mutad's rounds raised
    at the first, leaving ``u`` as it was (value 11.7 for 9.09). It is the value and gradient
    of the same program with the errors ignored, bit for bit; the caller's bytes come back."""
    x = np.array([0.5, -1.0, 2.0, 0.3, 1.2])
    before = x.tobytes()
    with pytest.raises(FloatingPointError), np.errstate(all="raise"):
        getattr(np, which).at(x.copy(), [0, 1, 2, 1], *(() if which == "log" else (
            np.array([0.0, 1.0, 0.0, 2.0]) if which == "divide" else np.full(4, 1e308),)))
    value, grad = mutad.value_and_grad(_scatters_raising, policy=policy)(x, which, True)
    expected_value, expected = mutad.value_and_grad(_scatters_raising, policy=policy)(
        x, which, False)
    assert np.float64(value).tobytes() == np.float64(_scatters_raising(x, which, True)).tobytes()
    assert np.float64(value).tobytes() == np.float64(expected_value).tobytes()
    assert grad.tobytes() == expected.tobytes()
    tangent = np.linspace(-1.0, 1.0, 5)  # forward mode: the same (it recursed, for divide)
    forward = mutad.jvp(lambda x: _scatters_raising(x, which, True), (x,), (tangent,))
    assert [np.float64(v).tobytes() for v in forward] == [np.float64(v).tobytes() for v in
        mutad.jvp(lambda x: _scatters_raising(x, which, False), (x,), (tangent,))]
    assert x.tobytes() == before


# The set functions: NumPy's values and masks, each value taking the derivative of the input
# element it is (of equal ones, the first; copies of one value, np.intersect1d(x, x[::2])).

SET_SAMPLES = np.array([0.3, 1.2, -0.8, 2.5, 4.0, -1.0])
SET_OTHERS = np.array([5.0, 0.7, 1.9, 2.6])


def _weighted(y):
    return (y * np.arange(1.0, y.size + 1)).sum()


SET_FUNCTIONS = {
    "isin": lambda x: (x * np.isin(x, x[::2])).sum(),
    "isin, invert": lambda x: (x * np.isin(x[:, None] * np.ones(2), SET_OTHERS,
                                           invert=True)[:, 0]).sum(),
    "union1d": lambda x: _weighted(np.union1d(x, SET_OTHERS + 0.1)),
    "union1d of copies": lambda x: _weighted(np.union1d(x, x[1:3])),
    "intersect1d of copies": lambda x: _weighted(np.intersect1d(x, x[::2])),
    "intersect1d, indices": lambda x: _weighted(np.intersect1d(x, x[1:], return_indices=True)[0]),
    "setdiff1d": lambda x: _weighted(np.setdiff1d(x, x[::3])),
    "setdiff1d, unique": lambda x: _weighted(np.setdiff1d(x[1:], SET_OTHERS + 0.1,
                                                          assume_unique=True)),
    "setxor1d": lambda x: _weighted(np.setxor1d(SET_OTHERS + 0.1, x[::2])),
    # complex values (were refused as written for reals): gathered, in NumPy's complex order
    "isin, complex": lambda x: (x * np.isin(x + 1j * x[::-1], (x + 1j * x[::-1])[::2])).sum(),
    "union1d, complex": lambda x: _weighted(np.abs(np.union1d(x + 0.5j * x**2,
                                                              SET_OTHERS + 0.1j)) ** 2),
    "intersect1d, complex": lambda x: _weighted(np.abs(np.intersect1d(x * (1 - 2j),
                                                                      x[::2] * (1 - 2j))) ** 2),
    "setdiff1d, complex": lambda x: _weighted(np.imag(np.setdiff1d(x + 1j * x**2, x[::3] + 0j))),
    "setxor1d, complex": lambda x: _weighted(np.real(np.setxor1d(SET_OTHERS * 1j, x[::2] + 1j))),
    "unique, complex": lambda x: _weighted(np.abs(np.unique(np.r_[x, x[:3]] * (1 - 0.5j))) ** 2),
}


@pytest.mark.parametrize("f", SET_FUNCTIONS.values(), ids=SET_FUNCTIONS.keys())
def test_set_functions_are_numpys_values_with_the_derivatives_of_their_elements(f):
    """np.isin, union1d, intersect1d, setdiff1d and setxor1d had no rule (refused): NumPy's
    values, and finite differences where the sets stay as they are."""
    x = SET_SAMPLES.copy()
    value, _ = mutad.value_and_grad(f)(x)
    assert value == f(x)
    mutad.check_grads(f, x)
    assert x.tobytes() == SET_SAMPLES.tobytes()


def test_replayed_set_functions_decide_on_each_calls_values():
    """A replay takes the set decisions again: the order of the values changes (a call
    whose sets change size traces again)."""
    def f(x, y):
        return _weighted(np.union1d(x, y)) + _weighted(np.intersect1d(x, y)) \
            + _weighted(np.setdiff1d(x, y)) + (x * np.isin(x, y)).sum()

    y = SET_OTHERS.copy()
    calls = [(SET_SAMPLES, y), (SET_SAMPLES[::-1].copy(), y), (np.roll(SET_SAMPLES, 2) * 0.9, y)]
    replays_as_traced(f, calls, argnums=(0, 1), replayed=2)


def test_intersect1d_of_a_signed_zero_beside_its_negation_is_refused():
    """NumPy's sort of the two arrays' values may put the second's 0.0 before the first's -0.0:
    its common value is then not the first array's element, whose derivative mutad gives."""
    x = np.array([-0.0, 1.0, 2.0])
    assert np.intersect1d(x, -x).tobytes() != x[:1].tobytes()
    with pytest.raises(mutad.MutadError, match="bits"):
        mutad.gradient(lambda x: np.intersect1d(x, -x).sum(), x)
