"""Gathers (take, sort, choose, diff, interp, …) and in-place scatters (ufunc.at, put, copyto)."""

import numpy as np
import pytest

import mutad
from cases import SampledCase, arguments, case_id, curved, fixed, normal
from mutad import tape as tape_module

POLICIES = ("restore", "checkpoint")


def sort_in_place(x):
    x.sort()
    return x * np.arange(5.0)


def sort_rows_of_view(x):
    x[:, 1:].sort(axis=1)
    return np.sin(x)


# fmt: off
GATHERS = [
    SampledCase("take",                lambda a: np.take(a, [0, 2, 2, -1]), arguments(normal(5))),
    SampledCase("take-axis",           lambda a: np.take(a, [[0, 1], [1, 1]], axis=1), arguments(normal(2, 3))),
    SampledCase("take-wrap",           lambda a: np.take(a, [5, -7], mode="wrap"), arguments(normal(3))),
    SampledCase("take-clip",           lambda a: np.take(a, [5, -7, 1], mode="clip"), arguments(normal(3))),
    SampledCase("take-method",         lambda a: a.take([1, 1]), arguments(normal(3))),
    SampledCase("take_along_axis",     lambda a: np.take_along_axis(a, np.array([[0, 0], [2, 1]]), 1),
                                       arguments(normal(2, 3))),
    SampledCase("take_along_axis-broadcast", lambda a: np.take_along_axis(a, np.array([[0, 2, 1], [2, 1, 1]]).T, 0),
                                       arguments(normal(3, 1))),
    SampledCase("take_along_axis-argsort", lambda a: np.take_along_axis(a, np.argsort(a, axis=0), 0),
                                       arguments(normal(4, 2))),
    SampledCase("compress",            lambda a: np.compress([True, False, True], a, axis=1), arguments(normal(2, 3))),
    SampledCase("extract",             lambda a: np.extract(a > 0, a), arguments(normal(2, 3))),
    SampledCase("sort",                np.sort,       arguments(normal(2, 4))),
    SampledCase("sort-axis-0",         lambda a: np.sort(a, 0), arguments(normal(3, 2))),
    SampledCase("sort-flat",           lambda a: np.sort(a, axis=None), arguments(normal(3, 2))),
    SampledCase("sort-stable",         lambda a: np.sort(a, stable=True), arguments(normal(4))),
    SampledCase("sort-method-in-place", sort_in_place, arguments(normal(5))),
    SampledCase("sort-view-in-place",  sort_rows_of_view, arguments(normal(2, 4))),
    SampledCase("partition",           lambda a: np.partition(a, 2), arguments(normal(2, 5))),
    SampledCase("partition-axis-0",    lambda a: np.partition(a, (1, 3), axis=0), arguments(normal(5, 2))),
    SampledCase("choose",              lambda a, b: np.choose([0, 1, 1, 0], [a, b]), arguments(normal(4), normal(1))),
    SampledCase("choose-array",        lambda c: np.choose(np.array([[0, 2], [1, 0]]), c), arguments(normal(3, 2, 2))),
    SampledCase("choose-clip",         lambda a, b: np.choose([0, 5, -1], (a, b), mode="clip"),
                                       arguments(normal(3), normal(3))),
    SampledCase("select",              lambda a, b, d: np.select([a > 0, b > 0], [a, b], d),
                                       arguments(normal(6), normal(6), normal(6))),
    SampledCase("select-overlapping",  lambda a, b: np.select([a > 0.5, a > 0], [a, b], 0.0),
                                       arguments(normal(6), normal(6))),
    SampledCase("diff",                np.diff,       arguments(normal(5))),
    SampledCase("diff-n2-axis0",       lambda a: np.diff(a, 2, 0), arguments(normal(5, 3))),
    SampledCase("diff-prepend-append", lambda a: np.diff(a, prepend=0.5, append=np.ones((2, 2))),
                                       arguments(normal(2, 3))),
    SampledCase("diff-traced-prepend", lambda a, p: np.diff(a, 1, -1, p), arguments(normal(2, 3), normal(2, 1))),
    SampledCase("diff-n0",             lambda a: np.diff(a, 0) * 2.0, arguments(normal(3))),
    SampledCase("interp",              np.interp,
                                       arguments(fixed([-1.0, 0.3, 1.4, 2.2, 5.0]), fixed([0.0, 1.0, 2.0, 3.0]), normal(4))),
    SampledCase("interp-left-right",   lambda x, fp, left, right: np.interp(x, [0.0, 1.0, 2.0], fp, left, right),
                                       arguments(fixed([-1.0, 0.5, 3.0]), normal(3), normal(), normal())),
    SampledCase("interp-scalar-x",     lambda x, fp: np.interp(x, [0.0, 1.0, 2.0], fp), arguments(fixed(1.3), normal(3))),
    SampledCase("interp-single-knot",  lambda x, fp: np.interp(x, [1.0], fp), arguments(fixed([0.0, 1.0, 2.0]), normal(1))),
    SampledCase("interp-list-x",       lambda fp: np.interp([0.5, 2.5, -1.0], [0.0, 1.0, 2.0], fp), arguments(normal(3))),
    SampledCase("interp-float-x",      lambda xp, fp: np.interp(1.3, xp, fp), arguments(fixed([0.0, 1.0, 2.0]), normal(3))),
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


# fmt: off
SCATTERS = [
    SampledCase("add.at",                  add_at_argument, arguments(normal(6), normal(3))),
    SampledCase("add.at-view-of-target",   add_at_view_of_target, arguments(normal(6))),
    SampledCase("add.at-overlapping-view", add_at_overlapping_view, arguments(normal(6))),
    SampledCase("add.at-scalar-view",      add_at_scalar_view, arguments(normal(6))),
    SampledCase("add.at-broadcast",        add_at_broadcast, arguments(normal(3, 4), normal(4))),
    SampledCase("add.at-slice",            add_at_slice, arguments(normal(4), normal(2))),
    SampledCase("add.at-twice",            add_at_twice, arguments(normal(3), normal(2))),
    SampledCase("add.at-new-buffer",       add_at_into_new_buffer, arguments(normal(3), normal(3))),
    SampledCase("subtract.at-2d",          subtract_at_2d, arguments(normal(2, 3), normal(3))),
    SampledCase("put",                     put_into_argument, arguments(normal(5), normal(3))),
    SampledCase("put-cycling",             put_cycling_values, arguments(normal(6), normal(3))),
    SampledCase("put-clip",                put_clipped, arguments(normal(4), normal(2))),
    SampledCase("place",                   place_positive, arguments(normal(6), normal(2))),
    SampledCase("putmask",                 putmask_positive, arguments(normal(6), normal(4))),
    SampledCase("put_along_axis",          put_along_rows, arguments(normal(2, 3), normal(2, 1))),
    SampledCase("copyto",                  copyto_argument, arguments(normal(2, 3), normal(3))),
    SampledCase("copyto-where",            copyto_where, arguments(normal(2, 3), normal(3))),
    SampledCase("copyto-shifted-self",     copyto_shifted_self, arguments(normal(5))),
    SampledCase("copyto-new-buffer",       copyto_new_buffer, arguments(normal(3))),
    SampledCase("getitem-repeated",        getitem_repeated, arguments(normal(5))),
    SampledCase("getitem-two-arrays",      getitem_two_arrays, arguments(normal(2, 3))),
    SampledCase("setitem-advanced",        setitem_advanced, arguments(normal(5), normal(3))),
    SampledCase("setitem-boolean",         setitem_boolean, arguments(normal(6), normal(3))),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", GATHERS + SCATTERS, ids=case_id)
def test_indexing_gradient(case, policy, rng):
    mutad.check_grads(case.function, *case.sample(rng), policy=policy)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", GATHERS + SCATTERS, ids=case_id)
def test_indexing_second_derivatives(case, policy, rng):
    # Nested reverse mode: gathers add traced cotangents with np.add.at, and the scatters'
    # restorations and checkpoints write into arrays the outer gradient traces (np.add.at
    # through repeated indices too).
    mutad.check_grads(curved(case.function), *case.sample(rng), policy=policy, order=2)


def test_add_at_accumulates_repeated_indices():
    (grad,) = mutad.gradient(lambda v: (np.add.at(x := np.zeros_like(v), [0, 0, 1], v), x[0])[1],
                             np.array([1.0, 2.0, 3.0]))
    assert np.array_equal(grad, [1.0, 1.0, 0.0])


def _undo_kinds(monkeypatch):
    """Record, per in-place write, whether the tape chose the inverse or a checkpoint."""
    kinds = []
    choose = tape_module.Tape.undo_for

    def spy(self, inverse, is_safe, checkpoint):
        undo = choose(self, inverse, is_safe, checkpoint)
        kinds.append("restore" if undo is inverse else "checkpoint")
        return undo

    monkeypatch.setattr(tape_module.Tape, "undo_for", spy)
    return kinds


def test_add_at_restores_by_subtracting_when_values_are_separate(monkeypatch, rng):
    kinds = _undo_kinds(monkeypatch)
    mutad.gradient(lambda x, v: (add_at_argument(x, v)).sum(), rng.standard_normal(6),
                   rng.standard_normal(3))
    assert kinds == ["restore"]


def test_add_at_checkpoints_when_values_view_the_target(monkeypatch, rng):
    kinds = _undo_kinds(monkeypatch)
    mutad.gradient(lambda x: add_at_view_of_target(x).sum(), rng.standard_normal(6))
    assert kinds == ["checkpoint"]


def test_sort_sends_the_gradient_through_the_permutation():
    (grad,) = mutad.gradient(lambda x: (np.sort(x) * np.array([1.0, 10.0, 100.0])).sum(),
                             np.array([3.0, 1.0, 2.0]))
    assert np.array_equal(grad, [100.0, 1.0, 10.0])


@pytest.mark.parametrize("call", [
    lambda x, plain: np.add.at(plain, [0], x),
    lambda x, plain: np.put(plain, [0], x),
    lambda x, plain: np.copyto(plain, x),
    lambda x, plain: np.putmask(plain, plain > 0, x),
], ids=["add.at", "put", "copyto", "putmask"])
def test_writing_a_traced_value_into_an_untraced_array_names_the_fix(call):
    untraced = np.ones(3)

    def f(x):
        call(x, untraced)
        return x.sum()

    with pytest.raises(mutad.MutadError, match="Allocate that array inside"):
        mutad.gradient(f, np.ones(3))
    assert np.array_equal(untraced, np.ones(3))


def test_put_with_repeated_indices_is_refused():
    def f(x, v):
        np.put(x, [1, 1], v)
        return x.sum()

    with pytest.raises(mutad.MutadError, match="repeated indices"):
        mutad.gradient(f, np.ones(3), np.array([1.0, 2.0]))


def test_interp_with_period_is_refused_with_the_fix():
    with pytest.raises(mutad.MutadError, match="modulo the period"):
        mutad.gradient(lambda fp: np.interp(0.5, [0.0, 1.0], fp, period=2.0), np.ones(2))


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
