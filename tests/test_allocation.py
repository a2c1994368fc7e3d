"""The allocation mode: arrays the differentiated code creates are followed, however it spells
the call, and only while a differentiation runs in the calling thread."""

import collections
import functools
import pickle
import sys
import threading
import types

import numpy
import numpy as np
import pytest
import scipy.linalg
import scipy.stats
from numpy import empty, zeros
from scipy.linalg import expm as matrix_exponential  # a SciPy function under a name of ours

import kalman_style  # imported before mutad: its NumPy names are bound long before

import mutad
from cases import replays_as_traced
from mutad import errors
from mutad.core import registry
from mutad.core.allocation import FEW_SITES, MODE, Preexisting

P = np.array([0.5, -1.0, 2.0])  # a plain array made before any differentiation

FACTORIES = {
    "zeros": lambda: np.zeros(3),
    "numpy.zeros": lambda: numpy.zeros((3,)),
    "from numpy import zeros": lambda: zeros(3),
    "from numpy import empty": lambda: empty(3),
    "empty": lambda: np.empty((3,)),
    "ones": lambda: np.ones(3),
    "full": lambda: np.full(3, 2.0),
    "eye": lambda: np.eye(3),
    "identity": lambda: np.identity(3),
    "tri": lambda: np.tri(3),
    "zeros_like": lambda: np.zeros_like(P),
    "ones_like": lambda: np.ones_like(P),
    "empty_like": lambda: np.empty_like(P),
    "full_like": lambda: np.full_like(P, 1.5),
    "copy": lambda: np.copy(P),
    "array of a plain array": lambda: np.array(P),
    "array of a list": lambda: np.array([1.0, 2.0, 3.0]),
    "asarray of a list": lambda: np.asarray([1.0, 2.0, 3.0]),
    "ascontiguousarray": lambda: np.ascontiguousarray(P[::-1]),
    "linspace": lambda: np.linspace(0.0, 1.0, 3),
    "logspace": lambda: np.logspace(0.0, 1.0, 3),
    "arange": lambda: np.arange(3.0),
    "diag of a plain vector": lambda: np.diag(P),
    "zeros().copy()": lambda: np.zeros((3, 3)).copy(),
    "zeros().reshape": lambda: np.zeros(9).reshape(3, 3),
    "float32": lambda: np.zeros(3, np.float32),
}


@pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES.keys())
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_every_factory_gives_an_array_that_carries_gradients(make, policy):
    def f(x):
        b = make()
        first = (0,) * b.ndim
        b[first] = x[0] * x[1]         # a traced value into a freshly allocated array
        b *= 2.0
        return (b * b).sum() + (b[first] * x[2])

    mutad.check_grads(f, np.array([0.3, -0.7, 1.1]), policy=policy, rtol=1e-4)


def test_the_third_party_style_module_imported_numpy_names_before_mutad_ran():
    assert kalman_style.zeros is np.zeros  # NumPy's own, outside any differentiation
    observations = np.array([0.1, 0.5, 0.4, 1.2, 1.0, 1.9])
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(lambda a, q, r: kalman_style.kalman_loglik(observations, a, q, r),
                          0.9, 0.3, 0.5, policy=policy, rtol=1e-5)
    assert kalman_style.zeros is np.zeros and kalman_style.numpy is numpy


def test_integer_and_boolean_allocations_stand_in_for_themselves():
    """An integer or boolean array made in the function is NumPy's, values and all, standing in
    for itself (an ndarray), so that the floats computed from it are followed: a grid
    ``np.arange(n) * dx`` then written with traced values, ``mask.astype(float)``."""
    seen = {}

    def f(x):
        seen["int"] = np.zeros(3, dtype=int)
        seen["bool"] = np.ones(2, dtype=bool)
        seen["arange"] = i = np.arange(4)
        seen["same"] = np.asarray(P) is P  # not an allocation: the array itself
        # SciPy's internals allocate plain arrays; the float result a routed SciPy function
        # hands the function is a constant it may write into
        block = scipy.linalg.block_diag(P[:2], P[:2])
        scipys = getattr(scipy.linalg.block_diag, "__wrapped__", scipy.linalg.block_diag)
        seen["scipy"] = np.array_equal(block, scipys(P[:2], P[:2]))
        block[0, 0] = x[0]
        grid = i * 0.5                         # floats from an integer array
        grid[1:3] += x
        mask = (i % 2 == 0).astype(float)      # from a boolean array made from it
        mask[3] = x[1]
        I, J = np.indices((2, 2))
        w = I * 2.0 + J
        w[0, 0] = x[0] * x[1]
        return x.sum() + block.sum() + (grid * grid).sum() + (mask * grid).sum() + w.sum()

    x = np.array([1.0, 2.0])
    g, = mutad.gradient(f, x)
    inside = dict(seen)
    h = 1e-6
    expected = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
    assert np.allclose(g, expected, rtol=1e-7)
    assert inside.pop("same") is True and inside.pop("scipy") is True
    for value, made in zip(inside.values(), (np.zeros(3, dtype=int), np.ones(2, dtype=bool),
                                             np.arange(4)), strict=True):
        assert type(value) is Preexisting and isinstance(value, np.ndarray)
        assert value.dtype == made.dtype and value.tobytes() == made.tobytes()


def test_allocations_outside_a_differentiation_and_in_other_threads_are_plain():
    seen = {}
    box = collections.deque([seen])  # (what f stores where it reaches by a name is NumPy's after)

    def elsewhere():
        box[0]["thread"] = np.zeros(3)

    def f(x):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        box[0]["here"] = np.zeros(3)
        return x.sum()

    mutad.gradient(f, np.ones(2))
    assert type(seen["thread"]) is np.ndarray
    assert type(seen["here"]) is not np.ndarray
    assert type(np.zeros(3)) is np.ndarray


def _numpy_bindings():
    return (globals()["np"], globals()["zeros"], kalman_style.zeros, kalman_style.numpy)


def test_the_mode_is_undone_on_return_and_on_exceptions():
    before = _numpy_bindings()
    assert before == (numpy, numpy.zeros, numpy.zeros, numpy)

    def failing(x):
        assert np is not sys.modules["numpy"]  # swapped in while it runs
        np.zeros(3)[0] = x[0]
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        mutad.gradient(failing, np.ones(2))
    assert _numpy_bindings() == before and MODE.depth == 0
    with pytest.raises(RuntimeError, match="boom"):
        mutad.jvp(failing, (np.ones(2),), (np.ones(2),))
    assert _numpy_bindings() == before and MODE.depth == 0


def test_the_modes_modules_read_what_numpy_and_math_bind_at_each_call():
    """The mode's copies of NumPy's modules and math (what user code's ``np`` is while a
    differentiation runs) bind what the modules bind when the differentiation starts: a name
    set or rebound between calls (np.scale = 3.0, np.linalg.norm = g) is read as outside the
    mode, not as it was bound when the first differentiation ran."""
    import math

    def f(x):
        return np.linalg.norm(x) * np.mutad_weight + math.mutad_shift * x[0]

    x, caller = np.array([3.0, 4.0]), np.array([3.0, 4.0])
    norm = np.linalg.norm
    try:
        for weight, shift, rebind in ((2.0, 1.0, False), (3.0, 1.0, False), (3.0, 5.0, False),
                                      (3.0, 5.0, True)):
            np.mutad_weight, math.mutad_shift = weight, shift
            np.linalg.norm = (lambda v: (v * v).sum()) if rebind else norm
            value, (grad,) = mutad.value_and_gradient(f, x)
            assert value == f(caller)  # NumPy's value with the bindings of now
            expected = weight * (2 * caller if rebind else caller / 5.0) + [shift, 0.0]
            assert np.allclose(grad, expected, rtol=1e-15, atol=0)
            assert np.array_equal(x, caller)
    finally:
        np.linalg.norm = norm
        del np.mutad_weight, math.mutad_shift


def test_plain_allocation_turns_the_mode_off():
    def f(x):
        with mutad.plain_allocation():
            grid = np.linspace(0.0, 1.0, 3)
            work = np.zeros(3)
        assert type(grid) is np.ndarray and type(work) is np.ndarray
        return (x * grid).sum()

    assert mutad.gradient(f, np.ones(3))[0].tolist() == [0.0, 0.5, 1.0]

    def g(x):
        with mutad.plain_allocation():
            work = np.zeros(3)
        work[0] = x[0]
        return work.sum()

    x = np.ones(3)
    with pytest.raises(errors.UntracedWriteError, match="inside"):
        mutad.gradient(g, x)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_a_module_level_work_buffer_is_followed_and_written_back():
    def f(x):
        kalman_style_buffer[0] = x[0]
        return kalman_style_buffer.sum()

    x = np.ones(3)
    assert mutad.gradient(f, x)[0].tolist() == [1.0, 0.0, 0.0]
    assert kalman_style_buffer.tolist() == [1.0, 0.0]  # as NumPy's run leaves it
    kalman_style_buffer[0] = 0.0


kalman_style_buffer = np.zeros(2)


# ----------------------------------------------------------------------------------------------
# Constants: arrays that hold no traced value yet behave as plain ones


def test_constants_work_where_plain_arrays_do():
    def f(x):
        A = np.eye(3)
        scale = float(A[1, 1]) + int(A[0, 0])          # converting a constant loses nothing
        B = scipy.linalg.expm(A * 0.1)                  # code without a rule
        spectrum = np.unwrap(np.full(4, 4.0))           # a NumPy function without a rule
        assert A.tolist()[0] == [1.0, 0.0, 0.0] and A.item(0) == 1.0
        return (x * scale).sum() + (B @ x).sum() + spectrum[0] * x[0]

    mutad.check_grads(f, np.array([0.2, 0.4, 0.6]))


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_work_array_refilled_every_step(policy):
    """The work array is read by the step's product, then overwritten on the next step: its
    overwritten values are put back in the reverse pass."""
    def f(x):
        w = np.empty(x.shape)
        total = np.zeros(x.shape)
        for k in range(4):
            w[:] = np.cos(k + np.arange(x.size))
            w *= 1.0 + 0.1 * k                 # constants written in place, after a read
            np.multiply(w, 2.0, out=w)
            x = x * w
            total += x
        return (total * total).sum()

    mutad.check_grads(f, np.linspace(0.5, 1.5, 4), policy=policy)


def test_a_constant_matrix_updated_between_reads():
    def f(x):
        M = np.ones((x.size, x.size))
        y = M @ x
        M += 1.0
        np.fill_diagonal(M, 3.0)
        M[[0, 1], [1, 0]] = -1.0
        return (M @ y).sum() + (M @ x).sum()

    mutad.check_grads(f, np.linspace(0.5, 1.5, 3))
    mutad.check_grads(f, np.linspace(0.5, 1.5, 3), policy="checkpoint")


def test_a_constant_becomes_traced_through_any_view():
    def f(x):
        A = np.zeros((2, 3))
        row = A[1]
        column = A.T[:, 0]
        row[:] = x                # writes through a view make all of A's memory traced
        column += x
        np.add.at(A, ([0, 0], [2, 2]), x[0])
        np.copyto(A[:, 1], x[1:])
        return (A ** 2).sum()

    mutad.check_grads(f, np.array([0.3, -0.5, 0.8]))


def test_an_array_cached_by_an_earlier_differentiation_is_a_constant_later():
    cache = {}

    def grid(n):
        if n not in cache:
            cache[n] = np.linspace(0.0, 1.0, n)   # allocated during the first gradient
        return cache[n]

    def f(x):
        return (x * grid(3)).sum() + np.dot(x, grid(3)) + (np.array([x[0], 1.0]) @ grid(2))

    first = mutad.gradient(f, np.ones(3))[0]
    assert first.tolist() == [0.0, 1.0, 2.0]
    assert mutad.gradient(f, np.ones(3))[0].tolist() == first.tolist()
    assert np.asarray(cache[3]).tolist() == [0.0, 0.5, 1.0]


def test_complex_of_a_traced_value_says_what_to_do():
    x = np.ones(2)
    with pytest.raises(errors.ConversionError, match="comparisons"):
        mutad.gradient(lambda x: complex(x[0] * 1j).real * x.sum(), x)
    assert x.tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------------------------
# Building arrays from traced values


def test_building_arrays_from_traced_values():
    def f(x):
        a, b = x[0] * 2.0, np.sin(x[1])
        v = np.array([a, b])
        D = np.array([[x[0], 0.0], [0.0, x[1]]])
        w = np.asarray([a, 1, b])
        z = np.array((x[2], a), dtype=np.float64)
        return (D @ v).sum() + (w * w).sum() + z.prod()

    mutad.check_grads(f, np.array([0.3, -0.5, 0.8]))
    mutad.check_jvp(f, np.array([0.3, -0.5, 0.8]))


def test_array_and_asarray_of_a_traced_array_follow_numpy():
    def f(x):
        same = np.asarray(x)
        copy = np.array(x)
        assert same is x and copy is not x
        copy *= 3.0                  # a copy: x is unchanged
        same[0] = same[0] * 2.0      # the array itself: x changes
        return (copy * x).sum()

    mutad.check_grads(f, np.array([0.3, -0.5, 0.8]))


def scalar_constructors(x):
    a = np.float64(x[0])                  # NumPy's scalar of a traced element
    b = np.float32(x[1] * 3.0)            # rounded to single precision, as NumPy rounds it
    c = np.complex128(x[2])
    w = np.zeros(3, dtype=np.float64)     # the same names, as types, in the same function
    if not (isinstance(np.float64(1.5), np.float64) and w.dtype == np.float64
            and np.issubdtype(np.float32, np.floating) and np.finfo(np.float64).eps > 0):
        raise TypeError("not NumPy's types")  # (no assert: pytest's rewriting is reached)
    w[0] = a * b
    w[1:] = np.float64(x[1:] ** 2)        # of an array: the array converted
    return (w * x).sum() + (c * c).real + np.double(x[0]) * np.single(x[2])


def test_numpy_scalar_types_of_traced_values_are_the_converted_values():
    x = np.array([0.3, -0.5, 0.8])
    saved = x.tobytes()
    value, _ = mutad.value_and_gradient(scalar_constructors, x)
    assert np.asarray(value).tobytes() == np.asarray(scalar_constructors(x)).tobytes()
    assert x.tobytes() == saved
    mutad.check_grads(scalar_constructors, x, rtol=1e-4)  # finite differences of float32
    mutad.check_jvp(scalar_constructors, x, rtol=1e-4)
    replays_as_traced(scalar_constructors, [(x,), (np.array([1.5, 0.25, -2.0]),)])
    assert x.tobytes() == saved
    assert np.float64 is numpy.float64 and type(np.float64) is type  # NumPy's again after


def converted_scalar_math(x):
    z = np.complex128(x[0] + 1j * x[1])
    w = z * np.complex128(x[2] + 1j * x[0]) + abs(z) + z ** 2
    v = np.float64(x[0]) ** 1.7 + np.float32(x[2]) ** np.float32(1.7)
    kinds = isinstance(z, np.complex128) + isinstance(np.float64(x[1]), np.float64)
    return w.real * kinds + v


def test_a_converted_scalar_is_a_scalar_of_numpys():
    """np.float64(x[0]) and np.complex128(z) of traced values were 0-d arrays: computed with
    NumPy's loops rather than its scalar math (a complex product off by an ulp on 91 inputs
    in 200), and not instances of the type (isinstance(v, np.float64) False: a branch on it
    silently took the other way)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = np.abs(rng.standard_normal(3)) + 0.1
        value, _ = mutad.value_and_gradient(converted_scalar_math, x)
        assert np.asarray(value).tobytes() == np.asarray(converted_scalar_math(x)).tobytes()
    replays_as_traced(converted_scalar_math, [(x,), (x + 0.5,), (x * 2.0,)])


def test_a_scalar_type_compared_by_identity_stays_numpys():
    def f(x):
        assert x.dtype.type is np.float64   # a stand-in cannot pass `is`: NumPy's own stays
        return np.float64(x[0]) * 2.0

    x = np.array([0.3, -0.5])
    with pytest.raises(errors.ConversionError, match="np.float64"):
        mutad.gradient(f, x)
    assert x.tolist() == [0.3, -0.5]


def test_integer_valued_functions_of_traced_scalars_are_plain():
    def f(x):
        best = np.argmin((x[0], x[1]))
        order = np.argsort([x[2], x[0], x[1]])
        where = np.searchsorted(np.array([0.0, 1.0]), x[2])
        assert isinstance(best, np.integer) and order.dtype.kind == "i"
        return x[best] * 2.0 + x[order[0]] + where

    g = mutad.gradient(f, np.array([0.3, -0.5, 0.8]))[0]
    assert g.tolist() == [0.0, 2.0, 1.0]


# ----------------------------------------------------------------------------------------------
# Nested differentiations, forward mode, second derivatives


def _fill_and_sum(x):
    buf = np.zeros((2, x.size))
    buf[0] = x * x
    buf[1] = np.sin(buf[0])
    return (buf ** 2).sum()


def test_an_allocation_belongs_to_the_innermost_differentiation():
    def outer(x):
        work = np.zeros(2)
        inner = mutad.gradient(_fill_and_sum, x)[0]
        work[:] = inner * x[:2]
        return work.sum()

    mutad.check_grads(outer, np.array([0.3, -0.5]))


def test_forward_mode_gives_allocations_a_zero_tangent():
    mutad.check_jvp(_fill_and_sum, np.array([0.3, -0.5, 0.8]))
    y, dy = mutad.jvp(lambda x: np.full(2, x[0]) * np.zeros(2), (np.ones(2),), (np.ones(2),))
    assert dy.tolist() == [0.0, 0.0]


def test_second_derivatives_through_allocations():
    x = np.array([0.3, -0.5, 0.8])
    mutad.check_grads(_fill_and_sum, x, order=2)
    H = mutad.hessian(_fill_and_sum, x)
    assert H.shape == (3, 3) and np.allclose(H, H.T)


# ----------------------------------------------------------------------------------------------
# The realistic patterns


def rk4_fit(theta, y0):
    """An RK4 integrator of a damped oscillator with a preallocated stage buffer."""
    n, steps, h = y0.size, 40, 0.05
    K = np.empty((4, n))
    y = np.array(y0)
    trajectory = np.zeros(steps)

    def rhs(state, out):
        out[0] = state[1]
        out[1] = -theta[0] * state[0] - theta[1] * state[1]

    for k in range(steps):
        rhs(y, K[0])
        rhs(y + 0.5 * h * K[0], K[1])
        rhs(y + 0.5 * h * K[1], K[2])
        rhs(y + h * K[2], K[3])
        y += h / 6.0 * (K[0] + 2.0 * K[1] + 2.0 * K[2] + K[3])
        trajectory[k] = y[0]
    return ((trajectory - np.cos(np.linspace(0.0, 2.0, steps))) ** 2).sum()


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_rk4_with_a_preallocated_stage_buffer(policy):
    y0 = np.array([1.0, 0.0])
    mutad.check_grads(rk4_fit, np.array([2.0, 0.3]), y0, policy=policy, rtol=1e-5)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_finite_volume_step_allocating_work_arrays_every_step(policy):
    def f(u, c):
        for _ in range(5):
            flux = np.zeros(u.size + 1)
            flux[1:-1] = c * (u[1:] - u[:-1])
            du = np.empty_like(flux[:-1])
            du[:] = flux[1:] - flux[:-1]
            u = u + 0.2 * du
        return (u ** 3).sum()

    mutad.check_grads(f, np.linspace(0.1, 1.0, 6), 0.7, policy=policy)


# ----------------------------------------------------------------------------------------------
# Routing methods and loading rule modules


class Distribution:
    def logpdf(self, x, mu):
        return -0.5 * (np.asarray(x) - mu) ** 2


def test_a_method_is_routed_to_its_rule_only_with_traced_arguments():
    calls = []

    def rule(self, x, mu):
        calls.append(type(self).__name__)
        return -0.5 * (x - mu) ** 2

    d = Distribution()
    registry.defmethod(Distribution, "logpdf", rule)
    try:
        g = mutad.gradient(lambda x: d.logpdf(x, 1.0).sum(), np.array([0.0, 2.0]))[0]
        assert g.tolist() == [1.0, -1.0] and calls == ["Distribution"]
        assert d.logpdf(np.zeros(1), 1.0).tolist() == [-0.5]   # outside: the method itself
        assert "logpdf" in Distribution.__dict__ and calls == ["Distribution"]
    finally:
        registry.RULES[Distribution, "logpdf"].method = None
    assert Distribution.__dict__["logpdf"].__qualname__ == "Distribution.logpdf"


def test_a_rule_module_is_imported_when_its_library_is_in_use(tmp_path, monkeypatch):
    (tmp_path / "fake_library_rules.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.RULE_MODULES, "fake_library", "fake_library_rules")
    mutad.gradient(lambda x: x.sum(), np.ones(1))
    assert "fake_library_rules" not in sys.modules   # the library is not in use
    monkeypatch.setitem(sys.modules, "fake_library", type(sys)("fake_library"))
    try:
        mutad.gradient(lambda x: x.sum(), np.ones(1))
        assert sys.modules["fake_library_rules"].LOADED
    finally:
        sys.modules.pop("fake_library_rules", None)


def test_a_rule_module_filed_after_its_library_was_imported_is_imported(tmp_path,
                                                                       monkeypatch):
    # The mode looks at the libraries in use again only where sys.modules or the index of
    # rule modules changed since the last differentiation: here the index alone changes.
    (tmp_path / "late_library_rules.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "late_library", type(sys)("late_library"))
    mutad.gradient(lambda x: x.sum(), np.ones(1))
    monkeypatch.setitem(registry.RULE_MODULES, "late_library", "late_library_rules")
    try:
        mutad.gradient(lambda x: x.sum(), np.ones(1))
        assert sys.modules["late_library_rules"].LOADED
    finally:
        sys.modules.pop("late_library_rules", None)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_scipy_functions_are_differentiated_by_scipy_names(policy):
    A = np.array([[3.0, 1.0], [0.5, 2.0]])
    b = np.array([1.0, 2.0])
    before = A.tobytes(), b.tobytes()

    def f(A, b):
        x = scipy.linalg.solve(A, b)  # the public module's attribute
        return (x * x).sum() + matrix_exponential(0.1 * A).sum()  # a name bound on import

    mutad.check_grads(f, A, b, policy=policy)
    assert (A.tobytes(), b.tobytes()) == before


def test_routed_functions_are_scipys_own_outside_a_differentiation_and_inside_scipy():
    import scipy.linalg._basic as basic

    seen = []

    def f(x):
        seen.append((scipy.linalg.solve, basic.solve, matrix_exponential))
        return x.sum()

    original = scipy.linalg.solve
    mutad.gradient(f, np.ones(2))
    routed, internal, by_name = seen[0]
    # (the stand-in behind the one place its arguments are checked: allocation._Route)
    assert routed is not original and routed.__wrapped__ is registry.RULES[original].route
    assert internal is original  # SciPy's internals keep SciPy's function
    assert by_name.__wrapped__ is registry.RULES[scipy.linalg.expm].route
    assert scipy.linalg.solve is original and matrix_exponential is scipy.linalg.expm


def test_a_library_module_binds_the_routes_only_where_its_own_code_reads_them():
    # Code reading a routed function as the module's attribute (scipy.linalg.solve,
    # np.ma.add) gets the route through the module's class in the mode; the module's own
    # code reads its globals from its namespace, which binds the route only for those names
    # (np.ma.core's MaskedArray.__add__ calls its global ``add``).
    seen = []
    masked = np.ma.masked_array(np.ones(2), mask=[False, True])

    def f(x):
        seen.append((scipy.linalg.solve, vars(scipy.linalg)["solve"], np.ma.add,
                     vars(np.ma)["add"], vars(np.ma.core)["add"]))
        return (x * x).sum()

    solve, add = scipy.linalg.solve, np.ma.add
    mutad.gradient(f, np.ones(2))
    routed_solve, bound_solve, routed_add, bound_add, own_add = seen[0]
    assert routed_solve.__wrapped__ is registry.RULES[solve].route and bound_solve is solve
    assert routed_add.__wrapped__ is registry.RULES[add].route and bound_add is add
    assert own_add is routed_add
    assert scipy.linalg.solve is solve and np.ma.add is add and np.ma.core.add is add
    assert type(scipy.linalg) is types.ModuleType and type(np.ma) is types.ModuleType
    assert (masked + 1.0).tolist() == [2.0, None]


def test_numpy_filed_under_another_name_keeps_its_own_functions(monkeypatch):
    # A package that re-exports NumPy by filing its modules in sys.modules under names of its
    # own: they are still NumPy's modules, so the mode must not swap bindings inside them.
    alias = type(sys)("numpy_alias_package")
    monkeypatch.setitem(sys.modules, "numpy_alias_package", alias)
    monkeypatch.setitem(sys.modules, "numpy_alias_package.numpy", numpy)
    monkeypatch.setitem(sys.modules, "numpy_alias_package.linalg", numpy.linalg)
    monkeypatch.setitem(sys.modules, "numpy_alias_package.special", sys.modules["scipy.linalg"])
    MODE.modules = 0  # look at every module again, the aliases too
    real_numpy, original = sys.modules["numpy"], sys.modules["numpy"].zeros

    def f(x):
        assert real_numpy.__dict__["zeros"] is original  # NumPy's namespace is left alone
        y = np.zeros(3)
        y[1:] = np.sin(x)
        return (y * y).sum() + np.linalg.norm(x)

    x = np.array([0.3, -1.2])
    before = x.tobytes()
    mutad.check_grads(f, x)
    assert x.tobytes() == before


def test_routed_functions_and_methods_bound_before_the_differentiation_are_routed():
    # A callback bound before the differentiation starts, held in a closure cell, a partial
    # or a module-level name its code reads: SciPy's own function or bound method, which the
    # mode swaps for its stand-in there while the differentiation runs.
    import functools

    import scipy.special
    import scipy.stats

    def make_loss(logpdf, normaliser):
        return lambda x: (logpdf(x, 0.5, 2.0) - normaliser(x)).sum()

    held = scipy.stats.norm.logpdf
    loss = make_loss(held, scipy.special.logsumexp)
    weighted = functools.partial(scipy.stats.norm.logpdf, loc=0.5, scale=2.0)
    x = np.array([1.0, 2.0, -0.5])
    before = x.tobytes()
    mutad.check_grads(loss, x)
    mutad.check_jvp(loss, x)
    mutad.check_grads(lambda x: make_loss(lambda x, m, s: weighted(x), np.sin)(x), x)
    (g,) = mutad.gradient(loss, x)
    np.testing.assert_allclose(g, -(x - 0.5) / 4.0 - 3 * np.exp(x) / np.exp(x).sum())
    assert x.tobytes() == before
    cell = loss.__closure__[0]  # what it held again once the differentiation is over (not
    # compared with scipy.stats.norm.logpdf: a class's route, installed by the first call that
    # meets it, stays installed, passing the call on to SciPy's outside a differentiation)
    assert cell.cell_contents is held and not MODE.cells


def test_numpy_functions_held_in_a_closure_are_the_modes():
    def make(join, allocate):
        def f(a, b):
            w = allocate(2)
            w[1] = b * b  # a traced value into an array a closure's np.zeros made
            return (join(a, b) ** 2).sum() + w.sum()  # np.append of a list of traced floats
        return f

    f = make(np.append, np.zeros)
    mutad.check_grads(f, [1.0, -2.0], 3.0)
    mutad.check_jvp(f, [1.0, -2.0], 3.0)
    assert {c.cell_contents for c in f.__closure__} == {numpy.append, numpy.zeros}
    assert not MODE.cells


@pytest.mark.parametrize("program", [
    lambda x: np.mean([x[0], x[0] * x[1], 2.0]),
    lambda x: np.std((x[0], x[1] + 2.0)) * np.var([x[1], x[0] * x[0]]),
    lambda x: np.sum([x[0], np.sin(x[1])], axis=0) + np.prod((x[0], x[1])),
    lambda x: np.max([x[0], 0.25]) - np.min((x[1], -3.0)) + np.cumsum([x[0], x[1]])[1],
    lambda x: (np.append([x[0], 1.0], x[1:]) ** 2).sum() + np.diff([x[1], x[0] * 3.0])[0],
], ids=["mean", "std-var", "sum-prod", "max-min-cumsum", "append-diff"])
def test_reductions_of_lists_of_traced_values(program):
    # NumPy dispatches on arrays, not on the items of a list: the mode stacks them first.
    x = np.array([0.7, -1.2])
    before = x.tobytes()
    mutad.check_grads(program, x)
    mutad.check_jvp(program, x)
    assert x.tobytes() == before


def test_callbacks_are_routed_through_mutads_own_wrappers():
    # check_grads and hvp call the user's function from functions of their own: the closure
    # swap follows them to it without touching mutad's own bindings.
    import scipy.stats

    def make(logpdf):
        return lambda x: logpdf(x, 0.5, 2.0).sum()

    x = np.array([1.0, 2.0, -0.5])
    mutad.check_grads(make(scipy.stats.norm.logpdf), x, order=2)
    assert mutad.hvp(make(scipy.stats.norm.logpdf), (x,), (np.ones(3),)) == pytest.approx(
        np.full(3, -0.25))


def test_index_expressions_join_traced_values():
    # np.r_ and np.c_ convert their items inside NumPy; in the mode they are the concatenations
    # they stand for. Slices and directives stay NumPy's own.
    from numpy import r_

    def f(a, b):
        x = np.r_[a, 1.5, b, np.array(2.0)]
        y = np.c_[a, a * a, np.ones((3, 1))]
        z = r_[b, a[0]]
        return np.sum(x * x) + np.sum(y[:, 1] * y[:, 0] * y[:, 2]) + np.sum(z**3) \
            + np.sum(np.r_[0:3] * a)

    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, 2.0])
    before = a.tobytes() + b.tobytes()
    assert mutad.value_and_gradient(f, a, b)[0] == f(a, b)
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, a, b, policy=policy, order=2)
    mutad.check_jvp(f, a, b)
    assert a.tobytes() + b.tobytes() == before


# ----------------------------------------------------------------------------------------------
# What the mode reaches: NumPy imported in the body, SciPy's methods held anywhere f reaches


def test_numpy_imported_inside_the_function_allocates_followed_arrays():
    def f(x):
        import numpy
        from numpy import empty

        w = numpy.zeros(3)
        w[:] = x * 2.0
        v = empty(3)
        v[:] = x
        return (w * v).sum()

    x = np.ones(3)
    assert mutad.gradient(f, x)[0].tolist() == [4.0, 4.0, 4.0]
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_traced_values_written_into_an_integer_array_are_cast_as_numpy_casts():
    def f(x):
        k = np.zeros(3, dtype=int)
        k[:] = x * 2.5  # truncated, as NumPy truncates: no gradient through the cast
        return (k * x).sum()

    x = np.array([1.0, 1.0, 2.0])
    assert mutad.gradient(f, x)[0].tolist() == [2.0, 2.0, 5.0]
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    replaying = mutad.grad(f, replay=True)
    for row in ([1.0, 1.0, 2.0], [1.0, 1.0, 2.0], [3.0, 1.0, 2.0]):
        assert replaying(np.array(row)).tolist() == mutad.grad(f)(np.array(row)).tolist()


def test_the_bytes_of_a_constant_are_numpys():
    def f(x):
        w = np.frombuffer(np.ones(3).tobytes())
        return (w * x).sum()

    assert mutad.gradient(f, np.arange(3.0))[0].tolist() == [1.0, 1.0, 1.0]


LOGPDF = scipy.stats.norm.logpdf


class HeldLogcdf:
    f = scipy.stats.norm.logcdf


TABLE = {"logpdf": scipy.stats.norm.logpdf}
HELD = (scipy.stats.norm.logpdf, TABLE["logpdf"])  # as bound at import


def nested(x):
    def inner(v):
        return LOGPDF(v)
    return inner(x).sum()


def by_default(x, fn=scipy.stats.norm.logpdf):
    return fn(x).sum()


@pytest.mark.parametrize("f, expected", [
    (nested, -1.0),
    (lambda x: (lambda v: LOGPDF(v))(x).sum(), -1.0),
    (by_default, -1.0),
    (lambda x: TABLE["logpdf"](x).sum(), -1.0),
    (lambda x: HeldLogcdf.f(x).sum(),
     float(scipy.stats.norm.pdf(1.0) / scipy.stats.norm.cdf(1.0))),
], ids=("nested function", "lambda", "default argument", "dict", "class attribute"))
def test_scipys_bound_methods_held_where_f_reaches_them_use_their_rules(f, expected):
    grads = mutad.gradient(f, np.ones(2))[0]
    assert np.allclose(grads, expected, rtol=1e-14)
    assert (by_default.__defaults__[0], TABLE["logpdf"]) == HELD  # swapped back


# ----------------------------------------------------------------------------------------------
# Random draws used as buffers


def test_random_draws_are_buffers_mutad_follows():
    """A work array initialised by a random draw (weights of a from-scratch network) can take
    traced values: np.random's functions and the generators np.random.default_rng makes in the
    function draw the same numbers as NumPy's, as arrays mutad follows."""
    def loss(x):
        rng = np.random.default_rng(0)
        w = rng.standard_normal(3)
        w[:] = w * x
        b = np.random.rand(3)
        b += x
        import numpy.random as npr
        c = npr.default_rng(1).uniform(size=3)
        c[0] = x[0]
        return (w * b * c).sum()

    x = np.array([1.0, 2.0, 0.5])
    np.random.seed(1)
    expected = loss(x.copy())
    np.random.seed(1)
    value, grad = mutad.value_and_grad(loss)(x)
    assert value == expected and x.tolist() == [1.0, 2.0, 0.5]
    np.random.seed(1)
    mutad.check_grads(lambda x: (np.random.default_rng(3).standard_normal(3) * x ** 2).sum(), x)
    draws = np.random.default_rng(5).standard_normal(2)
    assert type(draws) is np.ndarray  # outside a differentiation: NumPy's own


def integer_draws_as_weights(x):
    """Integers drawn (a generator's, np.random's) stand in for themselves, as np.arange's do:
    the float arrays made from them are followed (a mini-batch's indices, counts as weights)."""
    rng = np.random.default_rng(0)
    w = rng.integers(1, 4, size=4) * 1.0
    w[0] = x[0]
    idx = rng.permutation(4)
    np.random.seed(2)
    k = np.random.randint(1, 5, size=4).astype(float)
    k[1] += x[1]
    c = rng.choice(4, size=4)
    return (w * x[idx]).sum() + (k * x).sum() + x[c].sum()


def test_integer_draws_stand_in_for_themselves():
    x = np.array([0.7, 1.3, 0.4, 0.9])
    saved = x.tobytes()
    value, _ = mutad.value_and_gradient(integer_draws_as_weights, x)
    assert value == integer_draws_as_weights(x.copy()) and x.tobytes() == saved
    mutad.check_grads(integer_draws_as_weights, x)
    replays_as_traced(integer_draws_as_weights, [(x,), (x + 1.0,)])

    def local_draws(x):  # a generator the function makes: the replay holds its integers
        rng = np.random.default_rng(3)
        w = rng.integers(0, 3, 4).astype(float)
        w[2] = x[2]
        return (w * x[rng.permutation(4)]).sum()

    replays_as_traced(local_draws, [(x,), (x + 1.0,), (x * 2.0,)], replayed=2)
    assert x.tobytes() == saved

def reparameterised_draws(theta):
    rng = np.random.default_rng(7)
    y = rng.normal(theta[0], theta[1], size=5)
    m = rng.normal(theta[:3], theta[3], size=(2, 3))        # broadcast against size
    u = rng.uniform(theta[0], theta[2], 3)
    e = rng.exponential(theta[1])
    g = rng.lognormal(mean=theta[0], sigma=0.5 * theta[1], size=2)
    n = rng.normal(loc=[theta[0], 1.0], scale=theta[3])      # a list of traced values
    return (y ** 2).sum() + (m * theta[:3]).sum() + u.sum() + e + g.sum() + n.prod()


def legacy_draws(theta):
    np.random.seed(3)
    return (np.random.normal(theta[0], theta[1], 4).sum() + np.random.uniform(theta[0], theta[1])
            + np.random.exponential(theta[2], 2).sum() + np.random.lognormal(theta[0], theta[1]))


def multivariate_draws(theta):
    """multivariate_normal of a traced mean and covariance, each method, a Generator's and a
    RandomState's (it converted the traced arrays)."""
    rng = np.random.default_rng(2)
    root = np.array([[1.0, 0.0], [theta[2], 1.0 + theta[3] ** 2]])
    cov = root @ root.T
    draws = [rng.multivariate_normal(theta[:2], cov, size=3, method=method)
             for method in ("svd", "eigh", "cholesky")]
    draws.append(rng.multivariate_normal([theta[0], 0.5], np.eye(2), size=(2, 2)))
    np.random.seed(4)
    draws.append(np.random.multivariate_normal(theta[1:3], cov))
    draws.append(np.random.RandomState(6).multivariate_normal(theta[:2], cov, 2))
    return sum(np.sum(np.sin(d)) for d in draws)


@pytest.mark.parametrize("f", [reparameterised_draws, legacy_draws, multivariate_draws])
def test_random_draws_with_traced_parameters_are_numpys_draws(f):
    theta = np.array([0.3, 1.2, 2.5, 0.7])
    saved = theta.tobytes()
    value, _ = mutad.value_and_gradient(f, theta)
    assert np.asarray(value).tobytes() == np.asarray(f(theta)).tobytes()  # NumPy's bits
    assert theta.tobytes() == saved
    mutad.check_grads(f, theta)
    mutad.check_jvp(f, theta)
    replays_as_traced(f, [(theta,), (np.array([-0.4, 0.6, 1.5, 2.0]),)])
    assert theta.tobytes() == saved


def test_a_normal_draw_moves_by_one_and_scales_by_its_standard_number():
    z = np.random.default_rng(11).standard_normal(4)
    g = mutad.gradient(lambda p: np.random.default_rng(11).normal(p[0], p[1], 4).sum(),
                       np.array([0.5, 2.0]))[0]
    assert g.tolist() == [4.0, z.sum()]


def test_one_draw_of_scalar_parameters_is_a_python_float():
    """NumPy gives a Python float, which it promotes weakly (x32 * draw stays float32): mutad
    gave a float64 scalar."""
    def f(x):
        np.random.seed(5)
        a = np.random.default_rng(4).lognormal(x[0], x[1])
        b = np.random.normal(x[0], x[1])
        return x.astype(np.float32) * a + b, type(a), type(b)

    x = np.array([0.7, 1.3])
    y, *types = f(x)
    assert types == [float, float] and y.dtype == np.float32
    value, _ = mutad.value_and_gradient(lambda x: f(x)[0].sum(), x)
    assert np.asarray(value).tobytes() == np.asarray(y.sum()).tobytes()


RNG = np.random.default_rng(5)  # a generator that lives between calls


def test_a_generator_that_lives_between_calls_advances_as_numpys():
    def f(p):
        return (RNG.normal(p[0], p[1], (2, 3)) ** 2).sum() + RNG.uniform(p[0], 1.0 + p[1])

    p = np.array([0.3, 1.2])
    twin = np.random.default_rng(5)
    twin.bit_generator.state = RNG.bit_generator.state
    replaying = mutad.value_and_grad(f, replay=True)
    for call in range(3):  # each call draws new numbers: the replay does not keep them
        value, _ = replaying(p)
        expected = (twin.normal(0.3, 1.2, (2, 3)) ** 2).sum() + twin.uniform(0.3, 2.2)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert RNG.bit_generator.state == twin.bit_generator.state
    assert type(RNG) is np.random.Generator and p.tolist() == [0.3, 1.2]


def test_a_generator_passed_as_an_argument_draws_as_numpys():
    """rng.normal(theta[0], theta[1]) of a generator passed to f was converted by NumPy (a
    ConversionError), where one reached by name drew through the mode."""
    def loss(theta, rng):
        return (rng.normal(theta[0], theta[1], 4) ** 2).sum() + rng.uniform(theta[0], 2.0)

    theta = np.array([0.3, 1.2])
    rng, twin = np.random.default_rng(8), np.random.default_rng(8)
    replaying = mutad.value_and_grad(loss, replay=True)
    for call in range(3):
        expected = loss(theta, twin)
        value, grad = replaying(theta, rng)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert rng.bit_generator.state == twin.bit_generator.state
    mutad.check_grads(lambda t: loss(t, np.random.default_rng(3)), theta)
    assert mutad.jvp(loss, (theta, rng), (np.ones(2), None))[0] == loss(theta, twin)
    assert rng.bit_generator.state == twin.bit_generator.state
    assert theta.tolist() == [0.3, 1.2]


SHUFFLES = {
    "a generator's": lambda y: np.random.default_rng(0).shuffle(y),
    "a generator's, along axis 1": lambda y: np.random.default_rng(1).shuffle(y, axis=1),
    "a RandomState's": lambda y: np.random.RandomState(2).shuffle(y),
    "np.random.shuffle": lambda y: (np.random.seed(3), np.random.shuffle(y)),
}


@pytest.mark.parametrize("name", SHUFFLES)
def test_shuffling_the_rows_of_a_traced_array_is_numpys_permutation(name):
    """NumPy took a traced array for a Python sequence and swapped rows that are views of it:
    rows came out duplicated, silently. The rows are NumPy's permutation, the same draws."""
    shuffle = SHUFFLES[name]

    def f(x):
        y = x * 1.0
        shuffle(y)
        return (y * np.arange(1.0, 9.0).reshape(4, 2)).sum() + (y[0] * y[1]).sum()

    x = np.arange(8.0).reshape(4, 2)
    assert mutad.value_and_grad(f)(x)[0] == f(x.copy())
    mutad.check_grads(f, x, order=2)


PERMUTED = {
    "all elements": lambda rng, y: rng.permuted(y),
    "along axis 1": lambda rng, y: rng.permuted(y, axis=1),
    "along axis 0, into a new array": lambda rng, y: rng.permuted(y, axis=0, out=np.empty((4, 3))),
    "in place": lambda rng, y: rng.permuted(y, out=y),
    "in place along axis -1": lambda rng, y: rng.permuted(y, axis=-1, out=y),
    "of an F-ordered array": lambda rng, y: rng.permuted(np.asfortranarray(y)),
    "into an F-ordered array": lambda rng, y: rng.permuted(
        y, out=np.asfortranarray(np.zeros((4, 3)))),
    "of a strided view, along axis 0": lambda rng, y: rng.permuted(
        np.concatenate([y, y], axis=1)[:, ::2], axis=0),
}


@pytest.mark.parametrize("name", PERMUTED)
def test_permuting_a_traced_array_is_numpys_permutation(name):
    """rng.permuted(x, axis, out) of traced values: NumPy's elements moved as NumPy moves them
    (its draws depend on the shape, axis and layout), into out where given."""
    permuted = PERMUTED[name]

    def f(x):
        y = x * 1.0
        z = permuted(np.random.default_rng(5), y)
        return (z * np.arange(1.0, 13.0).reshape(4, 3)).sum() + (y[0] * z[1]).sum()

    x = np.arange(12.0).reshape(4, 3) ** 1.5
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x)


def resampled(x, w):
    """A particle filter's resampling: particles drawn with probabilities w, then moved."""
    rng = np.random.default_rng(11)
    picked = rng.choice(x, size=5, p=w / w.sum())
    order = np.random.RandomState(4).permutation(picked)
    again = rng.choice(picked.shape[0], size=3, replace=False)
    return (order * np.arange(1.0, 6.0)).sum() + (picked[again] ** 2).sum()


def test_draws_from_traced_populations_and_weights_are_numpys_draws():
    """rng.choice(x, p=w) and permutation(x) of traced values pick NumPy's rows (the same
    draws); the picked rows carry their gradient, the weights none (a draw is a decision),
    and a replay traces calls whose draws depend on traced weights."""
    x = np.linspace(0.5, 2.0, 4)
    w = np.array([0.1, 0.4, 0.2, 0.3])
    value, (gx, gw) = mutad.value_and_grad(resampled, argnums=(0, 1))(x, w)
    assert value == resampled(x, w) and gw.tolist() == [0.0] * 4
    mutad.check_grads(lambda x: resampled(x, w), x, order=2)
    assert mutad.jvp(resampled, (x, w), (np.ones(4), np.ones(4)))[0] == value
    replaying = mutad.grad(resampled, argnums=(0, 1), replay=True)
    for scale in (1.0, 2.0, 3.0):
        w2 = np.roll(w, int(scale))
        assert all(a.tobytes() == b.tobytes() for a, b in zip(
            replaying(x * scale, w2), mutad.grad(resampled, argnums=(0, 1))(x * scale, w2)))
    assert "weighted by traced values" in str(replaying.reasons)


# ----------------------------------------------------------------------------------------------
# Arrays made from arrays that existed before the call: followed, however they are made

U0 = np.linspace(0.0, 1.0, 5)  # a module-level initial condition
K0 = np.array([[2.0, 0.5], [0.5, 1.0]])

MADE_FROM_U0 = {
    "U0.copy()": lambda: U0.copy(),
    "U0 + 0.0": lambda: U0 + 0.0,
    "U0 * 1": lambda: U0 * 1,
    "U0[1:].copy()": lambda: np.concatenate([U0[:1], U0[1:].copy()]),
    "U0.astype(float)": lambda: U0.astype(float),
    "U0.reshape(5, 1).ravel()": lambda: U0.reshape(5, 1).copy().ravel(),
    "U0[[0, 1, 2, 3, 4]]": lambda: U0[[0, 1, 2, 3, 4]],
    "np.roll(U0, 0)": lambda: np.roll(U0, 0),
    "np.array(U0)": lambda: np.array(U0),
    "-(-U0)": lambda: -(-U0),
    "np.copy(U0.T)": lambda: np.copy(U0.T),
    "K0 @ ... ": lambda: (K0 @ np.ones(2)).repeat(3)[:5] * U0 / (K0 @ np.ones(2)).repeat(3)[:5],
}


@pytest.mark.parametrize("make", MADE_FROM_U0.values(), ids=MADE_FROM_U0.keys())
def test_arrays_made_from_arrays_made_before_are_followed(make):
    def simulate(D):
        u = make()
        u *= D
        u[1:-1] += D * (u[2:] - 2 * u[1:-1] + u[:-2])
        return (u * u).sum()

    before = U0.tobytes(), U0.flags.writeable
    value, g = mutad.value_and_grad(simulate)(0.5)
    assert value == simulate(0.5)
    mutad.check_grads(simulate, 0.5)
    assert mutad.grad(simulate, replay=True)(0.7) == mutad.grad(simulate, replay=True)(0.7) \
        == mutad.grad(simulate)(0.7)
    assert (U0.tobytes(), U0.flags.writeable) == before
    assert type(U0) is np.ndarray and globals()["U0"] is U0  # the caller's array, back


def test_arrays_reached_through_closures_defaults_and_attributes_are_followed():
    initial = np.array([1.0, 2.0, 3.0])

    class Model:
        def __init__(self):
            self.weights = np.array([0.5, -1.0, 2.0])

        def loss(self, x, start=np.ones(3)):
            w = self.weights.copy()
            w *= x
            u = initial + start
            u[0] = x[1]
            return (w * u).sum()

    model, x = Model(), np.array([1.0, 3.0, 2.0])
    mutad.check_grads(model.loss, x)
    jvp_value, tangent = mutad.jvp(model.loss, (x,), (np.ones(3),))
    assert jvp_value == model.loss(x)
    assert type(model.weights) is np.ndarray and model.loss.__defaults__[0].tolist() == [1.0] * 3


class _Grid:
    def __init__(self):
        self.u0 = np.sin(np.linspace(0.0, np.pi, 8))


class _HeatModel:
    """A model made before the differentiation, reached by a name: its initial condition is
    copied in its method and through the object, then updated in place."""

    def __init__(self):
        self.grid = _Grid()
        self.scale = np.array([1.0, 2.0])

    def run(self, k):
        u = self.grid.u0.copy()
        for _ in range(5):
            u[1:-1] += k * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u


HEAT_MODEL = _HeatModel()


def _through_a_global_object(k):
    u = HEAT_MODEL.grid.u0.copy()  # an attribute of an attribute of a module-level object
    u *= HEAT_MODEL.scale.copy()[0] * k
    return (HEAT_MODEL.run(k) ** 2).sum() + u.sum()


def _through_a_default(k, model=HEAT_MODEL):
    w = [model.scale][0].copy()  # (the copy of a list's item: made from the stand-in)
    w *= k
    return w.sum() + model.run(k)[3]


def test_arrays_of_objects_reached_by_a_name_are_followed():
    originals = HEAT_MODEL.grid.u0, HEAT_MODEL.scale
    kept = [a.copy() for a in originals]
    for f in (_through_a_global_object, _through_a_default):
        k = np.array(0.2)
        fd = mutad.testing.directional_fd(f, (k,), (np.array(1.0),))
        np.testing.assert_allclose(mutad.gradient(f, k)[0], fd, rtol=1e-8)
        np.testing.assert_allclose(mutad.jvp(f, (k,), (np.array(1.0),))[1], fd, rtol=1e-8)
        replays_as_traced(f, [(np.array(0.2),), (np.array(0.3),), (np.array(0.25),)])
    assert HEAT_MODEL.grid.u0 is originals[0] and HEAT_MODEL.scale is originals[1]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(originals, kept))


def test_a_traced_value_written_into_an_array_made_before_is_written_back():
    def f(D):
        U0[1:] *= D  # the caller's array itself: left as NumPy's run leaves it
        return U0.sum()

    assert mutad.grad(f)(0.5) == np.linspace(0.0, 1.0, 5)[1:].sum()
    assert U0.tolist() == (np.linspace(0.0, 1.0, 5) * [1.0, 0.5, 0.5, 0.5, 0.5]).tolist()
    U0[:] = np.linspace(0.0, 1.0, 5)


Z0 = np.zeros(3, complex)  # a module-level complex work array


@pytest.mark.parametrize("write", [
    lambda x: setattr(U0, "flat", x[:2] ** 2),  # (repeated to U0's size, as NumPy does)
    lambda x: setattr(U0, "real", x[0] * np.arange(5.0)),
    lambda x: (setattr(Z0, "imag", x ** 2), setattr(Z0, "real", x[::-1])),
], ids=["U0.flat = ...", "U0.real = ...", "Z0.imag = ..."])
def test_an_attribute_of_an_array_made_before_assigned_a_traced_value(write):
    """``U0.flat = x``, ``U0.real = x``, ``Z0.imag = x`` of an array made before the
    differentiation raised "property of 'Preexisting' object has no setter": each writes
    through NumPy's view, as any other write into that array does."""
    def f(x):
        write(x)
        return (U0 * np.arange(5.0)).sum() + (np.abs(Z0) ** 2 * [1.0, 2.0, 3.0]).sum()

    x, before = np.array([0.5, -0.3, 0.8]), np.array([0.5, -0.3, 0.8]).tobytes()
    expected_value = f(x.copy())
    expected_arrays = U0.tobytes(), Z0.tobytes()
    fd = mutad.testing.directional_fd(f, (x,), (np.array([1.0, 2.0, -1.0]),))
    U0[:], Z0[:] = np.linspace(0.0, 1.0, 5), 0.0
    value, (gradient,) = mutad.value_and_gradient(f, x)
    assert x.tobytes() == before and value == expected_value
    assert (U0.tobytes(), Z0.tobytes()) == expected_arrays  # left as NumPy's run leaves them
    np.testing.assert_allclose(gradient @ [1.0, 2.0, -1.0], fd, rtol=1e-8)
    U0[:], Z0[:] = np.linspace(0.0, 1.0, 5), 0.0
    with pytest.raises(TypeError, match="array does not have imaginary part to set"):
        mutad.gradient(lambda x: (setattr(U0, "imag", x), x.sum())[1], x)
    assert U0.tolist() == np.linspace(0.0, 1.0, 5).tolist()


def test_an_array_made_before_behaves_as_numpys_in_the_function():
    seen = {}

    def f(x):
        seen["same"] = np.asarray(U0) is U0 and np.asarray(K0[0]).base is not None
        seen["repr"] = repr(U0), str(U0), U0.shape, U0.dtype, len(U0), U0.T.shape
        seen["isinstance"] = isinstance(U0, np.ndarray)
        # (integer and boolean arrays stand in for themselves, as those the function makes)
        seen["plain results"] = [(type(v), v.tolist()) for v in (U0 > 0.5, np.argsort(U0),
                                                                 U0.argmax())]
        seen["values"] = float(U0 @ U0), U0.sum(), U0.mean(), float(np.max(U0))
        return (x * U0[:2]).sum()

    mutad.gradient(f, np.ones(2))
    assert seen["same"] and seen["isinstance"]
    assert seen["repr"] == (repr(U0), str(U0), (5,), np.float64, 5, (5,))
    assert seen["plain results"] == [(Preexisting, (U0 > 0.5).tolist()),
                                     (Preexisting, np.argsort(U0).tolist()),
                                     (np.intp, U0.argmax())]
    assert [float(v) for v in seen["values"]] == [U0 @ U0, U0.sum(), U0.mean(), U0.max()]


def raw_constructor(x):
    u = np.ndarray((3,))  # uninitialised, as np.empty
    u[:] = x * 2.0
    checks = (issubclass(np.ndarray, np.ndarray), isinstance(np.arange(2), np.ndarray),
              type(np.arange(2)) == np.ndarray, type(np.arange(2)) in (np.ndarray, list))
    view = np.ndarray((2,), buffer=bytearray(16))  # a view of a buffer: plain
    return (u * u).sum() + view.sum(), checks


def identity_of_ndarray(x):
    u = np.ndarray((3,))
    return (x * 2.0).sum(), type(u) is np.ndarray  # no stand-in passes `is`: NumPy's stays


def test_the_raw_constructor_allocates_a_followed_array():
    x = np.array([1.0, 2.0, 3.0])
    g, checks = mutad.grad(raw_constructor, has_aux=True)(x)
    np.testing.assert_array_equal(g, 8.0 * x)
    assert all(checks)
    replayed = mutad.grad(raw_constructor, replay=True, has_aux=True)
    for _ in range(3):
        np.testing.assert_array_equal(replayed(x)[0], 8.0 * x)
    assert mutad.grad(identity_of_ndarray, has_aux=True)(x)[1] is True


def test_a_replay_sees_an_array_made_before_change_between_calls():
    init = np.array([1.0, 2.0, 3.0])

    def f(D):
        u = init * 1.0
        u *= D
        return (u * u).sum()

    replayed = mutad.grad(f, replay=True)
    for value in (1.0, 2.0, 2.0, -1.0, -1.0):
        init[1] = value  # the caller's array changes between calls: read again
        assert replayed(0.5) == mutad.grad(f)(0.5) == 0.5 * 2 * (init @ init)


def test_a_script_loaded_twice_is_two_modules_with_their_own_bindings(tmp_path):
    """Two modules of one name and as many globals (a script loaded twice from its file): each
    is scanned for its own bindings, so the second one's np.empty is followed too, also where
    SciPy calls its functions (a right-hand side solve_ivp calls in the reverse pass)."""
    import importlib.util

    path = tmp_path / "loaded_twice.py"
    path.write_text(
        "import numpy as np\n"
        "from scipy.integrate import solve_ivp\n"
        "def rhs(t, z, theta):\n"
        "    dz = np.empty(2)\n"
        "    dz[0] = -theta[0] * z[0]\n"
        "    dz[1] = -theta[1] * z[1]\n"
        "    return dz\n"
        "def loss(theta):\n"
        "    return solve_ivp(rhs, (0.0, 1.0), np.ones(2), t_eval=[1.0], args=(theta,),\n"
        "                     rtol=1e-10, atol=1e-12).y.sum()\n")

    def load():
        spec = importlib.util.spec_from_file_location("loaded_twice", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    theta = np.array([1.0, 2.0])
    for module in (load(), load()):
        np.testing.assert_allclose(mutad.grad(module.loss)(theta), -np.exp(-theta), rtol=1e-6)


def test_arrays_numpys_index_expressions_and_scipys_functions_make_are_followed():
    """New float arrays made in the function by np.mgrid, np.ogrid, np.r_ of slices,
    np.indices, SciPy's windows and SciPy's functions of plain values: traced values may be
    written into them (they were plain arrays mutad did not follow)."""
    import scipy.linalg
    import scipy.signal
    from scipy.signal.windows import hann

    def f(x):
        grid = np.mgrid[0:1:3j]
        grid *= x
        rows = np.indices((3,), dtype=float)[0]
        rows *= x
        _, columns = np.ogrid[0:2, 0:3.0]
        columns = columns[0] * 1.0
        columns[0] = x[0]
        ramp = np.r_[0:1:3j]
        ramp *= x
        window = scipy.signal.get_window("hann", 3)
        window *= x
        taper = hann(3)
        taper[1] = x[1]
        band = scipy.linalg.solve([[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 8.0]],
                                  [1.0, 1.0, 1.0])  # lists: SciPy's own call
        band[0] = x[2]
        return ((grid ** 2).sum() + (rows ** 2).sum() + columns.sum() + ramp.sum()
                + (window ** 2).sum() + taper.sum() + (band ** 2).sum())

    x = np.array([1.0, 2.0, 3.0])
    before = x.tobytes()
    value, (g,) = mutad.value_and_grad(f, argnums=(0,))(x)
    assert value == f(x)
    mutad.check_grads(f, x)
    replays_as_traced(f, [(x * scale,) for scale in (1.0, 2.0, 0.5)])
    assert x.tobytes() == before
    assert type(scipy.signal.get_window("hann", 3)) is np.ndarray  # outside: SciPy's own


def squares_by_nditer(x):
    s = 0.0
    for v in np.nditer(x):
        s = s + v * v
    return s


def weighted_by_nditer(x):  # the order of the elements decides the weights
    s, k = 0.0, 1.0
    for v in np.nditer(x):
        s, k = s + k * np.sin(v), k + 1.0
    return s


def doubled_by_nditer(x):
    with np.nditer(x, op_flags=[["readwrite"]]) as it:
        for v in it:
            v[...] = 2 * v * v
    return (x * np.arange(1.0, x.size + 1).reshape(x.shape)).sum()


def rewritten_by_nditer(x):  # NumPy's documented pattern, over an array of the function's own
    y = np.cos(x)
    for v in np.nditer(y, op_flags=["readwrite"]):
        v[...] = v * y[0, 0]
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


def mapped_by_nditer(x):  # NumPy's documented pattern with an output operand
    y = np.empty_like(x)
    with np.nditer([x, y], op_flags=[["readonly"], ["writeonly"]]) as it:
        for a, b in it:
            b[...] = a * a + np.sin(a)
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


def broadcast_by_nditer(x):  # several operands broadcast together, in NumPy's order
    s, k = 0.0, 1.0
    for a, b in np.nditer([x, x[0]]):
        s, k = s + k * a * b, k + 1.0
    return s


def indexed_by_nditer(x):  # the indices it tracks, in NumPy's order (regression: refused)
    it = np.nditer(x, flags=["multi_index", "c_index"])
    s = 0.0
    for v in it:
        i, j = it.multi_index
        s = s + v * (i + 2 * j + 1) + it.index * v * v
    if not it.finished or list(it) or len(it) != 1 or it.itersize != x.size:  # as NumPy's
        raise ValueError("not NumPy's iterator")
    it.reset()
    return s + it.value * it.multi_index[1]


def stepped_by_nditer(x):  # NumPy's while-loop pattern, through the operands by index
    y = np.zeros_like(x)
    it = np.nditer([x, y], flags=["multi_index", "f_index"],
                   op_flags=[["readonly"], ["writeonly"]])
    while not it.finished:
        it[1][...] = it[0] * it[0] * (it.multi_index[0] + 1) + it.index * it.value[0]
        it.iternext()
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


def mapped_in_runs(x):  # NumPy's external loop: runs of elements, in NumPy's order and lengths
    y = np.zeros_like(x)
    with np.nditer([x, y], flags=["external_loop"],
                   op_flags=[["readonly"], ["writeonly"]]) as it:
        for a, b in it:
            b[...] = np.sin(a) * a.size + a[::-1] * a[0]
    return (y * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()


def doubled_in_runs(x):  # (regression: external_loop was refused)
    with np.nditer(x, flags=["external_loop"], op_flags=[["readwrite"]]) as it:
        for v in it:
            v[...] = 2 * v * v + v[-1]
    return (x * np.arange(1.0, x.size + 1).reshape(x.shape)).sum()


def buffered_runs(x):  # buffered, with an output the iterator allocates
    it = np.nditer([x, None], flags=["external_loop", "buffered"],
                   op_flags=[["readonly"], ["writeonly", "allocate"]])
    s = 0.0
    with it:
        for a, c in it:
            c[...] = a * a[0] + np.cumsum(a)
            s = s + (a ** 2).sum() * a.size
        out = it.operands[1]
    return s + (out * np.arange(1.0, out.size + 1).reshape(out.shape)).sum()


@pytest.mark.parametrize("layout", ["C", "F", "reversed", "transposed"])
@pytest.mark.parametrize("f", [squares_by_nditer, weighted_by_nditer, doubled_by_nditer,
                               rewritten_by_nditer, mapped_by_nditer, broadcast_by_nditer,
                               indexed_by_nditer, stepped_by_nditer, mapped_in_runs,
                               doubled_in_runs, buffered_runs])
def test_nditer_over_a_followed_array_visits_numpys_elements_in_numpys_order(f, layout):
    def laid_out():  # the same values, the memory in another order
        base = np.array([[0.5, -1.0, 0.3], [2.0, 0.25, -0.7]])
        return {"C": base, "F": np.asfortranarray(base), "transposed": base.T.copy().T,
                "reversed": base[::-1, ::-1].copy()[::-1, ::-1]}[layout]

    x = laid_out()
    before = x.tobytes()
    value = mutad.value_and_gradient(f, x)[0]
    assert np.asarray(value).tobytes() == np.asarray(f(laid_out())).tobytes()
    assert x.tobytes() == before
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    assert x.tobytes() == before
    if layout == "C":
        replays_as_traced(f, [(x * scale,) for scale in (1.0, 2.0, 0.5)])


def test_nditer_refuses_what_it_cannot_follow_with_what_to_write_instead():
    def read_only_written(x):
        for v in np.nditer(x):
            v[...] = 1.0
        return x.sum()

    def cast(x):
        return sum(v.sum() for v in np.nditer(x, flags=["external_loop", "buffered"],
                                              op_dtypes=[np.float32]))

    def broadcast_buffered(x):  # NumPy's iterator copies x[0]'s elements into its buffer
        return sum((a * b).sum() for a, b in np.nditer([x, x[0]],
                                                       flags=["external_loop", "buffered"]))

    def read_only_run(x):
        for v in np.nditer(x, flags=["external_loop"]):
            v[...] = 1.0
        return x.sum()

    x = np.array([[0.5, -1.0], [2.0, 0.25]])
    before = x.tobytes()
    with pytest.raises(ValueError):  # NumPy's: a read-only view
        read_only_written(x.copy())
    with pytest.raises(TypeError):  # the element, which refuses writes as NumPy's scalar does
        mutad.gradient(read_only_written, x)
    with pytest.raises(ValueError):  # NumPy's: a read-only run
        read_only_run(x.copy())
    with pytest.raises(ValueError):
        mutad.gradient(read_only_run, x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=r"np\.ndindex"):
        mutad.gradient(cast, x)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=r"np\.nditer"):
        mutad.jvp(cast, (x,), (np.ones_like(x),))
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="buffer of its own"):
        mutad.gradient(broadcast_buffered, x)
    assert x.tobytes() == before

    def over_a_constant(x):  # an array allocated in the function: NumPy's own iterator
        s = 0.0
        for v in np.nditer(np.arange(3.0)):
            s = s + v
        return (x * s).sum()

    assert np.array_equal(mutad.gradient(over_a_constant, x)[0], np.full((2, 2), 3.0))


def test_ndenumerate_gives_each_index_with_the_traced_element():
    def f(x):
        total = 0.0
        for (i, j), v in np.ndenumerate(x):
            total = total + v * v * (i + 1) + j
        return total

    x = np.arange(4.0).reshape(2, 2) + 0.5
    before = x.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    replays_as_traced(f, [(x * scale,) for scale in (1.0, 2.0, 3.0)])
    assert x.tobytes() == before


def test_a_users_subclass_that_changes_a_routed_class_is_not_given_its_rule():
    """Regression (silently wrong values): a user's subclass of a SciPy class whose methods
    mutad routes got the library class's rule: a distribution overriding ``_logpdf`` took the
    parent's density, a spline overriding ``__call__`` (calling ``super()``) had its change
    applied twice. Such a subclass runs its methods as they are: what SciPy's code cannot
    follow raises a MutadError. A subclass that only adds data keeps the rule."""
    import scipy.interpolate
    from scipy.stats._continuous_distns import expon_gen

    class FastExpon(expon_gen):
        def _logpdf(self, x):
            return np.log(2.0) - 2.0 * x

    fast = FastExpon(a=0.0, name="fast_expon")
    x = np.array([0.3, 1.2])
    with pytest.raises(mutad.MutadError):
        mutad.gradient(lambda s: fast.logpdf(x, scale=s).sum(), 1.3)

    knots = np.linspace(0.0, 1.0, 5)

    class Offset(scipy.interpolate.CubicSpline):
        def __call__(self, x, nu=0, extrapolate=None):
            return super().__call__(x, nu, extrapolate) + 1.0

    with pytest.raises(mutad.MutadError):
        mutad.gradient(lambda q: Offset(knots, knots ** 2)(q), 0.3)

    class Tagged(scipy.interpolate.CubicSpline):
        def __init__(self, x, y):
            super().__init__(x, y)
            self.tag = "data only"

    spline = Tagged(knots, knots ** 2)
    value, slope = mutad.value_and_grad(lambda q: spline(q))(0.3)
    assert value == spline(0.3)
    assert slope == pytest.approx(spline(0.3, 1), rel=1e-12)


def test_a_device_library_registered_later_leaves_scipys_routes_in_place():
    """Registering a device library dropped every binding the mode had swapped into NumPy's and
    SciPy's public modules (scipy.sparse.diags reached by attribute ran SciPy's own code on
    traced values: np.common_type has no rule)."""
    import scipy.sparse

    from mutad.core import devices

    def f(k):
        A = scipy.sparse.diags([k[1:], k + 2.0], [-1, 0], format="csc")
        return (A @ k).sum()

    k = np.array([1.0, 2.0, 3.0])
    expected = mutad.value_and_gradient(f, k)  # the mode has swapped its bindings in
    library = types.ModuleType("registered_later_device_library")
    kind = type("ndarray", (), {"__module__": library.__name__})
    try:
        devices.register(kind, library)
        value, grad = mutad.value_and_gradient(f, k)
    finally:
        devices.NAMESPACES.pop(kind, None)
        devices.LIBRARIES.discard(library.__name__)
    assert value == expected[0] and np.array_equal(grad[0], expected[1][0])


def test_isscalar_is_numpys_answer_for_what_a_value_stands_for():
    """An element, a reduction's result and a float argument stand for NumPy's scalars (or a
    Python number), of which np.isscalar says True; arrays, 0-d ones too, are not scalars. A
    helper that branches on it takes NumPy's branch, in both modes and replayed."""
    from numpy import isscalar

    def clipped(v):
        return max(v, 0.25) if np.isscalar(v) else np.maximum(v, 0.25)

    def f(x, k):
        answers = [isscalar(v) for v in (x[0], x.sum(), k, x[0] * 2.0, x, x[:1], np.zeros(()))]
        assert answers == [True, True, True, True, False, False, False]
        return clipped(x[0]) * k + clipped(x).sum()

    x = np.array([0.5, 0.1])
    assert mutad.gradient(f, x, 2.0)[0].tolist() == [3.0, 0.0]
    assert mutad.jvp(f, (x, 2.0), (np.ones(2), 0.0))[1] == 3.0
    replaying = mutad.grad(f, argnums=(0, 1), replay=True)
    for _ in range(3):
        assert replaying(x, 2.0)[0].tolist() == [3.0, 0.0]


def indices_made_in_the_function(x):
    n = x.size
    i = np.arange(n)
    even = i % 2 == 0
    y = x.copy()
    y[i[1:]] += y[i[:-1]] * 0.5          # a gather and a scatter by them
    y[np.array(2)] *= 3.0                # a 0-d index
    y[even] -= 0.1 * x[even]             # a mask made from them
    z = np.zeros(n)
    np.add.at(z, i % 3, y)
    w = np.take(y, i[::-1]) + y.take(i)
    y.put(i[:2], x[:2] * 2.0)
    grid = i * 0.25
    grid[0] = x[3]
    return ((y * y).sum() + (z * w).sum() + (grid * x).sum() + np.repeat(x, i % 2 + 1).sum()
            + x[i][i].sum())


def test_integer_arrays_made_in_the_function_index_as_numpys():
    """Indices the function makes (standing in for themselves) index, gather, scatter and
    mask as NumPy's arrays do, in both modes, second order and replayed."""
    x = np.linspace(0.3, 1.7, 6)
    assert mutad.value_and_grad(indices_made_in_the_function)(x)[0] == \
        indices_made_in_the_function(x)
    mutad.check_grads(indices_made_in_the_function, x, order=2)
    replaying = mutad.grad(indices_made_in_the_function, replay=True)
    for scale in (1.0, 1.1, 0.9):
        assert replaying(x * scale).tobytes() == \
            mutad.grad(indices_made_in_the_function)(x * scale).tobytes()


@pytest.mark.parametrize("f", [
    lambda x: np.r_[0.1, x, 0.2], lambda x: np.r_[1, x], lambda x: np.r_[np.float64(0.1), x],
    lambda x: np.r_[[0.1, 0.2], x], lambda x: np.c_[x, 2 * x], lambda x: np.c_[x, np.ones(4)],
], ids=["python-floats", "python-int", "float64-scalar", "list", "c_", "c_-float64"])
def test_joined_index_expressions_promote_as_numpys(f):
    """Regression: np.r_ and np.c_ give the items' promotion with Python numbers weak
    (np.r_[0.1, x32, 0.2] is float32), every item converted to it; mutad concatenated the
    items as 0-d float64 arrays, a float64 result."""
    x = np.array([1.3, 2.7, 0.35, -1.1], np.float32)
    expected = f(x.copy())
    y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert np.asarray(y).dtype == expected.dtype
    assert np.asarray(y).tobytes() == expected.tobytes()

    def loss(v):
        return np.sum(f(v) ** 2)

    for differentiate in (mutad.value_and_grad(loss), mutad.value_and_grad(loss, replay=True)):
        value, _ = differentiate(x)
        assert np.asarray(value).tobytes() == np.asarray(loss(x.copy())).tobytes()
    mutad.check_grads(loss, x, modes=("rev", "fwd"))


def made_indices_as_numpys(u):
    """What a program may ask of the integer and boolean arrays it makes."""
    i = np.arange(4)
    total = (u * i).sum()
    total += u.sum() * (3.0 if i[...].base is i else 1.0)          # NumPy: True
    total += u.sum() * (5.0 if i[::2].base is i else 1.0)          # NumPy: True
    total += u.sum() * (7.0 if i.base is None else 1.0)            # NumPy: True
    total += u.sum() * (2.0 if i.astype(np.int64, copy=False) is i else 1.0)
    mask = np.zeros(4, dtype=bool)
    total += u.sum() * (11.0 if mask.flags.owndata else 1.0)
    mask[::2] = True
    total += np.sum(u ** 2, where=mask)                              # a mask made in f
    counts = np.zeros(3, dtype=int)
    counts.resize(6)                                                 # owns its memory
    counts[3:] = 1
    total += (u[:2] * counts[:2]).sum() + counts.sum() * u[3]
    restored = pickle.loads(pickle.dumps(i))                         # as NumPy's array
    return total + u[0] * (type(restored) is np.ndarray)


def test_integer_arrays_made_in_the_function_are_numpys_to_the_program():
    x = np.array([0.5, -1.0, 2.0, 0.3])
    assert mutad.value_and_grad(made_indices_as_numpys)(x)[0] == made_indices_as_numpys(x)
    mutad.check_grads(made_indices_as_numpys, x, order=2)


@pytest.mark.parametrize("read", [lambda u, i: np.take(u, i), lambda u, i: u.take(i),
                                  lambda u, i: np.repeat(u, i)], ids=("np.take", "take",
                                                                          "repeat"))
def test_an_index_made_in_the_function_and_changed_after_a_record_read_it(read):
    """The gradient of u.take(i) reads i as it was: a write into i afterwards was followed
    silently once i stood in for itself, then refused (i frozen); the record now keeps its own
    copy of the index it read, and the program writes into i as NumPy lets it."""
    def f(u):
        i = np.arange(u.size)
        y = read(u, i) ** 2
        i[1] = 0
        return y.sum() + (u * i).sum()

    u = np.arange(1.0, 5.0)
    # each u[k] read once (take), or k times (np.repeat(u, [0, 1, 2, 3]))
    reads = np.ones(4) if read(u, np.arange(4)).size == 4 else np.arange(4.0)
    expected = 2.0 * u * reads + np.array([0.0, 0.0, 2.0, 3.0])
    value, (g,) = mutad.value_and_gradient(f, u)
    assert value == f(u.copy())
    np.testing.assert_array_equal(g, expected)
    np.testing.assert_array_equal(mutad.grad(f, replay=True)(u), expected)
    np.testing.assert_array_equal(mutad.grad(f, replay=True)(u), expected)
    np.testing.assert_array_equal(u, np.arange(1.0, 5.0))


# ----------------------------------------------------------------------------------------------
# Arrays SciPy's functions that nothing routes make inside the function

import scipy.ndimage  # noqa: E402
import scipy.special  # noqa: E402
from scipy.special import roots_hermite  # noqa: E402  (a SciPy function bound by name)

NODES_BEFORE = scipy.special.roots_legendre(4)[0]  # made before any differentiation


def test_arrays_scipys_unrouted_functions_make_take_traced_writes():
    """Regression: a float array made inside the function by a SciPy function mutad routes
    nowhere (quadrature nodes, a DFT matrix, a distance transform) was a plain array, and
    writing a traced value into it raised UntracedWriteError."""
    mask = np.ones((4, 4), bool)
    mask[1, 2] = False

    def f(x):
        nodes, weights = scipy.special.roots_legendre(4)
        nodes *= x  # in place, into SciPy's array
        hermite, _ = roots_hermite(4)
        hermite[1:3] = x[:2]
        D = scipy.linalg.dft(4).real
        D[1] = x
        distances = scipy.ndimage.distance_transform_edt(mask)
        distances[0] += x
        return (np.sum(weights * np.exp(nodes)) + np.sum(hermite ** 2) + np.sum(D @ x)
                + np.sum(distances ** 2))

    x = np.array([0.3, -0.2, 0.5, 0.9])
    value, _ = mutad.value_and_gradient(f, x.copy())
    assert value == f(x.copy())
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)  # (the caller's array comes back, checked)
    replays_as_traced(f, [(x * s,) for s in (1.0, 0.5, -1.5)])
    # Outside the differentiation SciPy's modules are their own again: their class, and the
    # functions themselves (the mode reads them through its class, ``_MadeModule``).
    assert type(scipy.special) is types.ModuleType and type(scipy.linalg) is types.ModuleType
    assert type(scipy.special.roots_legendre) is types.FunctionType
    assert scipy.linalg.dft is scipy.linalg._special_matrices.dft


SCALE = np.array([1.0, 2.0, 3.0])


@functools.wraps(scipy.linalg.solve)  # (bears SciPy's names: __module__, __wrapped__)
def _scaled_by_its_first(v):
    out = SCALE.copy()
    out[1:] = v[1:] * v[0]
    return out @ v


def test_a_users_function_wrapped_with_scipys_names_is_the_users_code():
    """Regression: a function of the user's wrapped with functools.wraps(scipy.linalg.solve)
    was taken for SciPy's (by its __module__) and run as SciPy's code, whose traced writes
    into a copy of a global array were refused (a ValueError of SciPy's code)."""
    def f(x):
        return _scaled_by_its_first(x) * 2.0

    x = np.array([0.3, -0.7, 1.2])
    value, _ = mutad.value_and_gradient(f, x)
    assert value == f(x.copy())
    mutad.check_grads(f, x)


def test_a_function_importing_scipys_function_in_its_body_makes_constants():
    def f(x):
        from scipy.special import roots_legendre  # (run in the mode, through the module)
        nodes, weights = roots_legendre(3)
        nodes[1:] = x
        return np.sum(weights * nodes ** 2)

    x = np.array([0.4, -0.7])
    assert mutad.gradient(f, x.copy())[0].tolist() == pytest.approx(
        (2 * x * np.array(scipy.special.roots_legendre(3)[1][1:])).tolist())
    mutad.check_grads(f, x)


def test_an_array_scipy_made_before_the_differentiation_is_written_back():
    before = NODES_BEFORE.tobytes()

    def f(x):
        NODES_BEFORE[:] = x
        return np.sum(NODES_BEFORE ** 2)

    assert mutad.gradient(f, np.arange(4.0))[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert NODES_BEFORE.tobytes() == np.arange(4.0).tobytes()  # as NumPy's run leaves it
    NODES_BEFORE[:] = np.frombuffer(before)


def test_bindings_changed_between_calls_are_read_as_bound_now():
    """A name of NumPy's module rebound between calls to another object, even an equal one,
    or deleted, is read in the mode as outside it; a library function the user rebinds
    between calls (scipy.linalg.det = g) stays the user's in the mode and after it, and the
    routed one is swapped in again once the user binds NumPy's back (the mode's record of
    what it left bound where must not stand in for reading the bindings)."""
    import scipy.linalg

    seen = []

    def f(x):
        seen.append((getattr(np, "mutad_marker", None), scipy.linalg.det))
        return (x * x).sum()

    x, caller = np.array([1.0, 2.0]), np.array([1.0, 2.0])
    det = scipy.linalg.det

    def mine(a):
        return a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]

    try:
        for marker, bound in ((1.5, det), (float("1.5"), det), (None, mine), (None, mine),
                              (2.5, det), (None, det)):
            if marker is None:
                vars(np).pop("mutad_marker", None)
            else:
                np.mutad_marker = marker
            scipy.linalg.det = bound
            assert mutad.gradient(f, x)[0].tolist() == [2.0, 4.0]
            assert np.array_equal(x, caller)
            inside_marker, inside_det = seen.pop()
            assert inside_marker is marker
            assert (inside_det is mine) if bound is mine else (inside_det is not det)
            assert scipy.linalg.det is bound
    finally:
        scipy.linalg.det = det
        vars(np).pop("mutad_marker", None)


_FEW_SITES = """
import numpy as np

def f(x):
    z = np.zeros(3)
    z[:] = x  # (a traced value written: NumPy's own zeros would refuse it)
    return (z * z).sum()

def rebinding(x, value):
    global np
    np = value
    return (x * x).sum()
"""

_MANY_SITES = """
from numpy import empty, eye, full, ones, zeros

def f(x):
    z = zeros(3)
    z[:] = x
    return (z * z).sum()
"""


def test_a_name_the_user_rebinds_stays_the_users_in_modules_of_few_sites_and_of_many():
    """The modules that bind one of NumPy's names (np) and those that bind many (its
    factories, by name) are swapped in two ways (site by site, and by namespace): in both, the
    mode's functions are read inside a differentiation and NumPy's after, and a name the user
    rebinds between calls, or f inside one, stays the user's."""
    few, many = types.ModuleType("binds_numpy"), types.ModuleType("binds_numpys_factories")
    exec(_FEW_SITES, few.__dict__)
    exec(_MANY_SITES, many.__dict__)
    x = np.array([1.0, 2.0, 3.0])
    for module in (few, many, few, many):
        assert np.array_equal(mutad.grad(module.f)(x), 2 * x)
        assert few.np is np and many.zeros is np.zeros
    assert 0 < len(_sites_of(few)) <= FEW_SITES < len(_sites_of(many))
    mine = types.SimpleNamespace()
    few.np, many.zeros = mine, mine
    assert np.array_equal(mutad.grad(lambda x: (x * x).sum())(x), 2 * x)
    assert few.np is mine and many.zeros is mine
    few.np, many.zeros = np, np.zeros
    assert np.array_equal(mutad.grad(few.rebinding)(x, mine), 2 * x)
    assert few.np is mine and many.zeros is np.zeros
    few.np = np
    assert np.array_equal(mutad.grad(few.f)(x), 2 * x) and few.np is np


def _sites_of(module):
    return [site for site in MODE.sites.values() if site[0] is module.__dict__]


def test_routed_functions_and_methods_show_the_librarys_signature():
    """Code that inspects a library function (to tell SciPy's versions apart by a parameter's
    name) sees the library's parameters inside a differentiation and after one, not those of
    mutad's stand-in or of a routed method's (*args, **kwargs)."""
    import inspect

    import scipy.sparse
    import scipy.sparse.linalg
    import scipy.stats

    functions = (scipy.sparse.linalg.cg, scipy.linalg.solve, np.poly1d,
                 scipy.stats.multivariate_normal, scipy.stats.dirichlet)
    outside = [str(inspect.signature(h)) for h in functions]
    A = scipy.sparse.diags([1.0, 4.0, 1.0], [-1, 0, 1], shape=(5, 5)).tocsr()
    seen = []

    def f(b):
        seen.append([str(inspect.signature(h)) for h in functions])
        tol = {"rtol": 1e-12} if "rtol" in inspect.signature(scipy.sparse.linalg.cg).parameters \
            else {"tol": 1e-12}
        x, _ = scipy.sparse.linalg.cg(A, b, atol=0.0, **tol)
        return (x * x).sum()

    b = np.arange(1.0, 6.0)
    before = b.copy()
    g, = mutad.gradient(f, b)
    assert seen == [outside]
    assert [str(inspect.signature(h)) for h in functions] == outside
    x = np.linalg.solve(A.toarray(), b)
    np.testing.assert_allclose(g, 2 * np.linalg.solve(A.toarray().T, x), rtol=1e-9)
    assert b.tobytes() == before.tobytes()


def counted_out(x):
    k = np.zeros(3, dtype=np.int64)
    np.multiply(x, 10.0, out=k, casting="unsafe")
    np.add(x[1:], 1.0, out=k[:2], casting="unsafe", dtype=np.float32)
    flags = np.zeros(3, dtype=bool)
    np.subtract(x, 2.0, out=flags, casting="unsafe")
    return (x * k).sum() + (x * flags).sum()


def test_a_ufunc_writes_into_an_integer_array_f_made_as_numpy_casts():
    """Regression: np.multiply(x, 10.0, out=k, casting='unsafe') into an integer array f made
    was refused with a message saying k was created before the differentiation: NumPy casts
    the values into k, which carry no derivative (as k[...] = x * 10.0 does)."""
    x = np.array([1.26, 2.5, -3.7])
    replaying = mutad.value_and_grad(counted_out, replay=True)
    for y in (x, x, x * 1.1, x):
        before = y.tobytes()
        expected = counted_out(y.copy())
        value, g = mutad.value_and_grad(counted_out)(y)
        assert value == expected and value == mutad.jvp(counted_out, (y,), (y,))[0]
        assert np.array_equal(g, counted_out_gradient(y))
        again, h = replaying(y)
        assert again == value and np.array_equal(h, g) and y.tobytes() == before
    with pytest.raises(TypeError, match="Cannot cast ufunc 'multiply' output"):
        mutad.gradient(lambda x: np.multiply(x, 2.0, out=np.zeros(3, int)).sum() * x[0], x)
    # an integer array made before f: a write a replay would not redo, refused
    with pytest.raises(mutad.errors.UntracedWriteError, match="created before"):
        mutad.gradient(lambda x: (x * np.multiply(x, 2.0, out=COUNTS, casting="unsafe")).sum(),
                       x)
    assert not COUNTS.any()


COUNTS = np.zeros(3, dtype=np.int64)


def counted_out_gradient(x):
    k = np.zeros(3, dtype=np.int64)
    np.multiply(x, 10.0, out=k, casting="unsafe")
    np.add(x[1:], 1.0, out=k[:2], casting="unsafe", dtype=np.float32)
    return k + (x != 2.0)
