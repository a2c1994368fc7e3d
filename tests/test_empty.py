"""Every rule family at size 0: the last step of a textbook loop (``np.dot(x[3:], x[3:])`` for
a length-3 ``x``) and any other empty operand.

Each case of the families' tables is tried with its arrays emptied along one axis, in the ways
listed in ``VARIANTS``; the first way NumPy itself accepts is differentiated under both
policies, to second order and in forward mode. (The ufunc table has its own empty scenarios in
tests/cases.py.)
"""

import warnings

import numpy as np
import pytest

import mutad
import test_composites
import test_indexing
import test_linalg
import test_reductions
import test_scipy
import test_shape

POLICIES = ("restore", "checkpoint")

# Reductions of nothing give NaN or warn, as they do without mutad.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _emptied(x, axis):
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.ndim:
        shape = list(x.shape)
        shape[axis] = 0
        # Fresh: a slice or copy of nothing may have zero strides, with which NumPy's own
        # einsum stops checking that a repeated index has one length.
        return np.zeros(shape, x.dtype)
    return x


def _each(axis):
    return lambda args: [_emptied(x, axis) for x in args]


def _contracted(args):
    """The first array emptied along its last axis, the others along their first: the shared
    axis of a product."""
    return [_emptied(x, -1 if i == 0 else 0) for i, x in enumerate(args)]


def _first_only(axis):
    return lambda args: [_emptied(x, axis) if i == 0 else x for i, x in enumerate(args)]


VARIANTS = {
    "all-first-axis": _each(0),
    "all-last-axis": _each(-1),
    "contracted": _contracted,
    "first-argument-first-axis": _first_only(0),
    "first-argument-last-axis": _first_only(-1),
}


def _symmetrised(function):
    return lambda a, *rest: function(0.5 * (a + np.swapaxes(a, -1, -2)), *rest)


def _cases():
    tables = [
        ("reductions", test_reductions.CASES),
        ("shape", test_shape.CASES),
        ("indexing", test_indexing.GATHERS + test_indexing.SCATTERS),
        ("linalg", test_linalg.ALL_CASES + test_linalg.EINSUM_SUBLISTS),
        ("composites", test_composites.CASES),
        ("scipy", test_scipy.CASES),
    ]
    for family, cases in tables:
        for index, case in enumerate(cases):
            function = _symmetrised(case.program) if case.symmetric else case.program
            name = f"{family}-{case.id}"
            yield pytest.param(function, case.sample, name, POLICIES[index % 2], id=name)


def _accepted_by_numpy(function, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            function(*args)
        except Exception:
            return False
    return True


NUMPY_UNDEFINED = {
    # np.einsum("ii->i", a) of a 0x3 array returns 3 uninitialised values instead of refusing
    "linalg-einsum-diagonal", "linalg-einsum-sublist-diagonal",
}

EXPECTED_REFUSALS = {
    "linalg-svd-full-square": "not determined",  # U or Vt of an empty matrix is arbitrary
}


def _outputs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _finite_part(function):
    """``function`` with the NaN of a mean of nothing (and other non-finite outputs) replaced
    by 0, which finite differences can compare: those entries carry no gradient."""
    def finite(*args):
        return tuple(np.where(np.isfinite(y), y, 0.0) if np.ndim(y) or isinstance(y, float)
                     or getattr(y, "dtype", None) is not None else y
                     for y in _outputs(function(*args)))
    return finite


def _empty_arguments(function, sample, rng):
    args = list(sample(rng))
    for name, variant in VARIANTS.items():
        emptied = variant(args)
        if any(x is not y for x, y in zip(emptied, args)) and _accepted_by_numpy(function, emptied):
            return name, emptied
    return None, None


@pytest.mark.parametrize("function, sample, name, second_order_policy", list(_cases()))
def test_size_zero(function, sample, name, second_order_policy, rng):
    """Every row of the families' tables at size 0: the gradient under both policies, the
    tangent, and the second order under one policy, alternating along each family's rows (each
    policy meets half of every family at second order; the first order checks every row under
    both)."""
    if name in NUMPY_UNDEFINED:
        pytest.skip("NumPy's own result is undefined at size 0")
    variant, args = _empty_arguments(function, sample, rng)
    if variant is None:
        pytest.skip("NumPy itself refuses these arguments at size 0")
    if name in EXPECTED_REFUSALS:
        with pytest.raises(mutad.MutadError, match=EXPECTED_REFUSALS[name]):
            mutad.gradient(lambda *a: sum(np.sum(y) for y in _outputs(function(*a))), *args)
        return
    before = [x.tobytes() if isinstance(x, np.ndarray) else None for x in args]
    function = _finite_part(function)
    for policy in POLICIES:
        mutad.check_grads(function, *args, policy=policy)
    mutad.check_grads(function, *args, policy=second_order_policy, order=2)
    mutad.check_jvp(function, *args)
    assert [x.tobytes() if isinstance(x, np.ndarray) else None for x in args] == before


@pytest.mark.parametrize("policy", POLICIES)
def test_textbook_back_substitution_reaches_an_empty_dot_product(policy):
    def back_substitution(upper, b):
        x = b.copy()
        for i in range(len(b) - 1, -1, -1):
            x[i] = (x[i] - np.dot(upper[i, i + 1:], x[i + 1:])) / upper[i, i]
        return x

    upper = np.triu(np.ones((3, 3))) + 2.0 * np.eye(3)
    b = np.array([1.0, -2.0, 0.5])
    mutad.check_grads(back_substitution, upper, b, policy=policy, order=2)
    mutad.check_jvp(back_substitution, upper, b)
    x = np.array([1.0, 2.0, 3.0])
    assert mutad.gradient(lambda x: np.dot(x[3:], x[3:]) + x.sum(), x)[0].tolist() == [1.0] * 3
