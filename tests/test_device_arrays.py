"""mutad on device arrays (CuPy's), tested on a stand-in that needs no GPU (``device_array``).

Each test differentiates a program on device arrays and the same program on NumPy arrays and
compares the gradients bit for bit (taken back with ``.get()``): the gradients must be device
arrays, and nothing may be converted to NumPy implicitly on the way (the stand-in raises, as
CuPy does). The programs are written with NumPy's names, which dispatch to the device library
through NumPy's protocols, or against the device library's namespace (``import cupy as np``).
``tests/test_cupy.py`` runs the same on CuPy, where a GPU is found.
"""

import contextlib
import re
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings

import device_array as xp
import mutad
import random_programs as rp
from mutad.core import devices
from mutad.engines import recompute

devices.register(xp.ndarray, xp)  # (found by its protocols too, at its first differentiation)

# ----------------------------------------------------------------------------------------------
# Helpers


def to_device(tree):
    """``tree`` with its NumPy arrays copied to the device."""
    if type(tree) is np.ndarray:
        return xp.asarray(tree)
    if type(tree) in (list, tuple):
        return type(tree)(to_device(x) for x in tree)
    if type(tree) is dict:
        return {k: to_device(v) for k, v in tree.items()}
    return tree


def to_host(tree):
    """``tree`` with its device arrays copied back (``.get()``), checking they are device
    arrays where ``expected`` has NumPy arrays."""
    if type(tree) is xp.ndarray:
        return tree.get()
    if type(tree) in (list, tuple):
        return type(tree)(to_host(x) for x in tree)
    if type(tree) is dict:
        return {k: to_host(v) for k, v in tree.items()}
    return tree


EXACT = True
"""Whether values are compared bit for bit: on the stand-in, which computes with NumPy; on a
GPU (``tests/test_cupy.py``) its math library and its reductions' order round otherwise, so
values are compared to ``RTOL``."""
RTOL = 1e-9


def assert_same(on_device, on_host, what="gradient", exact=None):
    """``on_device`` is ``on_host`` bit for bit (``exact``, by default ``EXACT``), with device
    arrays where it has NumPy arrays."""
    exact = EXACT if exact is None else exact
    if type(on_host) in (list, tuple):
        assert type(on_device) is type(on_host) and len(on_device) == len(on_host), what
        for d, h in zip(on_device, on_host, strict=True):
            assert_same(d, h, what, exact)
        return
    if type(on_host) is dict:
        assert on_device.keys() == on_host.keys()
        for k in on_host:
            assert_same(on_device[k], on_host[k], what, exact)
        return
    if type(on_host) is np.ndarray:
        assert type(on_device) is xp.ndarray, f"the {what} is a {type(on_device)}, not on the device"
        got = on_device.get()
        assert got.dtype == on_host.dtype and got.shape == on_host.shape, what
        if not exact:
            np.testing.assert_allclose(got, on_host, rtol=RTOL, atol=RTOL, err_msg=what)
            return
        assert got.tobytes() == on_host.tobytes(), f"{what}: {got} != {on_host}"
        return
    if isinstance(on_host, (float, complex, np.inexact)):
        got = on_device.item() if type(on_device) is xp.ndarray else on_device
        if not exact:
            np.testing.assert_allclose(got, on_host, rtol=RTOL, atol=RTOL, err_msg=what)
            return
        assert np.array(got).tobytes() == np.array(on_host).tobytes() or got == on_host, \
            f"{what}: {got} != {on_host}"
        return
    assert on_device == on_host, what


def namespace_version(function, **names):
    """``function`` compiled again with ``np`` bound to the device namespace: the program as
    ``import cupy as np`` code."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(function))
    scope = {**function.__globals__, "np": xp, **names}
    exec(compile(source, inspect.getsourcefile(function), "exec"), scope)  # noqa: S102
    return scope[function.__name__]


def same_gradients(f, *args, device_f=None, **options):
    """Differentiate ``f`` at ``args`` on NumPy and at their device copies (``device_f``: the
    program to run there, ``f`` by default), and compare value and gradients bit for bit."""
    host_args = [a.copy() if type(a) is np.ndarray else a for a in args]
    value, grads = mutad.value_and_gradient(f, *host_args, **options)
    device_args = to_device(list(args))
    before = [a.get() if type(a) is xp.ndarray else None for a in device_args]
    d_value, d_grads = mutad.value_and_gradient(device_f or f, *device_args, **options)
    assert_same(d_grads, grads)
    assert_same(d_value, value, "value")
    for a, b in zip(device_args, before, strict=True):  # the caller's arrays come back
        if b is not None:
            assert a.get().tobytes() == b.tobytes()
    return d_grads


# ----------------------------------------------------------------------------------------------
# The stand-in behaves as CuPy does where it matters


@pytest.mark.skipif(xp.__name__ != "device_array", reason="the stand-in's own behaviour")
def test_the_stand_in_refuses_implicit_conversion():
    d = xp.arange(4.0)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(d)
    with pytest.raises(TypeError, match="Unsupported type"):
        np.add(d, np.ones(4))
    view = d[1:3]
    view += 1.0
    assert view.base is d and d.get().tolist() == [0.0, 2.0, 3.0, 3.0]
    assert type(np.sum(d)) is xp.ndarray and np.sum(d).ndim == 0
    assert devices.is_device(d) and devices.namespace(d) is xp


def test_a_gradient_on_the_device():
    def f(x):
        x *= 2.0
        x[1:] += x[:-1]
        return (np.sin(x) * x).sum()

    grads = same_gradients(f, np.linspace(0.1, 1.0, 5))
    assert type(grads[0]) is xp.ndarray


def test_a_fold_of_a_ufunc_on_the_device():
    """np.logaddexp.reduce's fold is compared with the device library's reduction on the
    device (it read the device's array as NumPy's, which the stand-in refuses)."""
    def f(x):
        return np.logaddexp.reduce(x * x) + np.subtract.reduce(x, initial=0.5)

    grads = same_gradients(f, np.linspace(0.1, 1.0, 5))
    assert type(grads[0]) is xp.ndarray


# ----------------------------------------------------------------------------------------------
# Random programs, their arrays on the device: written against the device namespace (the
# program's ``np`` is it: its functions are NumPy's in the allocation mode, which dispatch)


def _on_device(program, numpy_names=False):
    """``(f, args)`` of ``program`` on the device; with ``numpy_names``, ``f`` written with
    NumPy's names (whose ``np.array`` of the buffers' and constants' lists makes them on the
    device), which reach the device library through NumPy's protocols."""
    scope = {"np": _numpy_on_device() if numpy_names else xp}
    exec(program.source(), scope)  # noqa: S102
    f, args = scope["make"](**{f"d{name}": 0.0 for name in program.buffers})
    return f, args


def _writes_a_constant(program):
    """Whether ``program`` writes into a constant (an array made before the call that ``f``
    reaches by a name): NumPy's is adopted by the write (docs/sharp-bits.md), a device
    library's is not, and its write is refused."""
    return any(re.match(r"(np\.copyto\()?C\d", s) for s in program.statements)


def _numpy_on_device():
    scope = types.ModuleType("numpy_on_device")
    scope.__dict__.update(np.__dict__)
    scope.array = xp.asarray
    return scope


@pytest.fixture
def small_arrays_as_large(monkeypatch):
    """Small arrays handled as large ones: temporaries recomputed rather than kept, and writes
    undone by their inverses (checked element by element) rather than copied, so that the
    random programs exercise those paths on the device too."""
    import mutad.core.tape

    monkeypatch.setattr(recompute, "SMALL", 0)
    monkeypatch.setattr(mutad.core.tape, "SMALL_WRITE", 0)


DEVICE_FEATURES = rp.CI_FEATURES
NUMPY_NAMES_FEATURES = tuple(f for f in rp.CI_FEATURES if f != "complex")
"""With NumPy's names, not the complex class, whose programs allocate with ``np.zeros``: a host
array, which CuPy refuses beside device arrays."""


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.generate), database=None)
@given(program=rp.programs(enabled=DEVICE_FEATURES, avoid=tuple(rp.KNOWN_BUGS)))
def test_random_programs(small_arrays_as_large, policy, program):
    f, args = program.make()
    try:
        with np.errstate(all="ignore"):
            y, back = mutad.vjp(f, *args, policy=policy)
            weights = rp._weights(tuple(np.asarray(o) for o in y))
            grads = back(weights)
    except Exception:  # noqa: BLE001 - refused on NumPy (by mutad, or NumPy itself)
        assume(False)
    assume(not _writes_a_constant(program))
    f, args = _on_device(program)
    with np.errstate(all="ignore"):
        d_y, d_back = mutad.vjp(f, *args, policy=policy)
        d_grads = d_back(to_device(weights))
    with _exact(not _reads_elements(program)):
        assert_same(d_y, y, "output")
    # The restore policy's inverses hold each element within a few ulps (docs/sharp-bits.md):
    # whether a write is inverted or copied is decided by a check the device computes in its
    # own order, so its gradients are compared to 1e-9; the checkpoint policy's bit for bit.
    with _exact(not _reads_elements(program) and policy == "checkpoint"):
        assert_same(d_grads, grads)


ELEMENT_READ = re.compile(r"\w\[-?\d+(?:, -?\d+)*\](?!\s*=(?!=))")
"""An element read by integers (``a0[1, -2]``, ``a0[0] += v``): on CuPy a 0-d view of the
array (``a0[0] += v`` adds through it, then assigns it to itself), in NumPy a copied scalar."""


def _reads_elements(program):
    return any(ELEMENT_READ.search(line) for line in program.statements)


@contextlib.contextmanager
def _exact(exact):
    """Values compared bit for bit only where ``exact``: a program that reads an element by
    integers means another program on CuPy (a view where NumPy copies), whose restorations
    may round otherwise by an ulp; NumPy's gradient of that program (``x[1, -2, ...]``, a view)
    is the device's bit for bit."""
    global EXACT
    saved = EXACT
    EXACT = EXACT and exact
    try:
        yield
    finally:
        EXACT = saved


# ----------------------------------------------------------------------------------------------
# The W-workloads (mutad/bench/workloads.py), written against the device namespace


def _workloads():
    from mutad.bench.workloads import WORKLOADS

    return [pytest.param(w, id=w.name) for w in WORKLOADS.values()]


def _namespace_program(problem):
    """The workload's loss as ``import cupy as np`` code: every function of the workloads'
    module compiled again with ``np`` bound to the device namespace."""
    import inspect

    from mutad.bench import workloads

    scope = {**vars(workloads), "np": xp, "__name__": "device_user_code"}
    source = inspect.getsource(workloads).replace("\nimport numpy as np\n", "\npass\n")
    exec(compile(source, inspect.getsourcefile(workloads), "exec"), scope)  # noqa: S102
    loss = problem.loss
    return scope[loss.__name__] if getattr(loss, "__name__", "<lambda>") in scope else None


REFUSED = {"implicit-heat": "cholesky_"}
"""Workloads refused on a device, and the routine named: mutad.linalg's in-place routines call
the host's LAPACK."""


@pytest.mark.parametrize("workload", _workloads())
def test_workloads_on_the_device(workload):
    params = workload.sizes["tiny"][0]
    problem = workload.build(**params)
    loss = _namespace_program(problem)
    assert loss is not None, problem.loss
    args = list(problem.args)
    argnums = problem.argnums
    if workload.name in REFUSED:
        with pytest.raises(mutad.errors.UnsupportedArrayError, match=REFUSED[workload.name]):
            mutad.gradient(loss, *to_device(args), argnums=argnums)
        return
    grads = same_gradients(problem.loss, *args, device_f=loss, argnums=argnums)
    assert all(type(g) is xp.ndarray for g in (grads if type(grads) is tuple else (grads,))
               if not isinstance(g, float))


# ----------------------------------------------------------------------------------------------
# Policies, memory budgets, replay, forward mode and second order on the device


def _workload(name):
    from mutad.bench.workloads import WORKLOADS

    workload = WORKLOADS[name]
    problem = workload.build(**workload.sizes["tiny"][0])
    return problem, _namespace_program(problem)


@pytest.mark.parametrize("name", ["leapfrog", "bratu-gs", "heat-explicit", "kalman"])
@pytest.mark.parametrize("options", [{"policy": "checkpoint"}, {"memory": 0}],
                         ids=["checkpoint", "memory=0"])
def test_policies_and_budgets_on_the_device(name, options):
    problem, loss = _workload(name)
    same_gradients(problem.loss, *problem.args, device_f=loss, argnums=problem.argnums,
                   **options)


@pytest.mark.parametrize("name", ["small-ops", "leapfrog", "bratu-gs"])
def test_replay_on_the_device(name):
    problem, loss = _workload(name)
    expected = mutad.value_and_grad(problem.loss, argnums=problem.argnums)(*problem.args)
    replayed = mutad.value_and_grad(loss, argnums=problem.argnums, replay=True)
    for _ in range(3):
        assert_same(replayed(*to_device(list(problem.args))), expected, "replayed")
    # A replay does not follow device arrays yet, nor what the device module's __getattr__
    # reads (its own module, by name, and type() of what it wraps): every call is traced, and
    # says why.
    assert any("device array" in why or "modules by names" in why or "reads type()" in why
               for why in replayed.reasons.values())
    assert not replayed.programs


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.generate), database=None)
@given(program=rp.programs(enabled=NUMPY_NAMES_FEATURES, avoid=tuple(rp.KNOWN_BUGS)))
def test_random_programs_with_numpy_names(small_arrays_as_large, program):
    f, args = program.make()
    try:
        with np.errstate(all="ignore"):
            y, back = mutad.vjp(f, *args)
            weights = rp._weights(tuple(np.asarray(o) for o in y))
            grads = back(weights)
    except Exception:  # noqa: BLE001 - refused on NumPy (by mutad, or NumPy itself)
        assume(False)
    assume(not _writes_a_constant(program))
    f, args = _on_device(program, numpy_names=True)
    with np.errstate(all="ignore"):
        d_y, d_back = mutad.vjp(f, *args)
        d_grads = d_back(to_device(weights))
    with _exact(not _reads_elements(program)):
        assert_same(d_y, y, "output")
    with _exact(False):  # the restore policy's: see test_random_programs
        assert_same(d_grads, grads)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck),
          phases=(Phase.explicit, Phase.generate), database=None)
@given(program=rp.programs(enabled=DEVICE_FEATURES, avoid=tuple(rp.KNOWN_BUGS)))
def test_random_programs_forward(small_arrays_as_large, policy, program):
    f, args = program.make()
    tangents = tuple(np.linspace(-1.0, 1.0, a.size).reshape(a.shape).astype(a.dtype)
                     for a in args)
    try:
        with np.errstate(all="ignore"):
            y, dy = mutad.jvp(f, args, tangents)
    except Exception:  # noqa: BLE001 - refused on NumPy (by mutad, or NumPy itself)
        assume(False)
    assume(not _writes_a_constant(program))
    f, args = _on_device(program)
    with np.errstate(all="ignore"):
        d_y, d_dy = mutad.jvp(f, args, to_device(tangents))
    # (complex programs: some tangents differ from NumPy's by an ulp, a difference not
    # accounted for yet; compared to RTOL)
    with _exact(not _reads_elements(program) and "complex" not in program.features):
        assert_same(d_y, y, "output")
        assert_same(d_dy, dy, "tangent")


def _sign_times_imaginary_part(x):
    return np.sign(x) * np.imag(x)  # -1 * 0.0: the tangent's sign follows the terms summed


def _written_into_a_floor(x):
    w = np.floor(x)  # a new array without a derivative, then traced values written into it
    w[1:] += x[:-1] * x[1:]
    return np.sign(x) * w


def _angle_of_reals(x):
    return np.sign(x) * np.angle(x)  # no derivative at all: zeros


@pytest.mark.parametrize("f", [_sign_times_imaginary_part, _written_into_a_floor, _angle_of_reals])
def test_results_without_a_derivative_on_the_device(f):
    """A function without a derivative (np.sign(x), np.floor(x)) of a device array gives a
    constant of the differentiation, as of NumPy's, not the device's plain array: a traced
    value written into it is followed, and a product with it sums the same terms, whose zeros'
    signs are NumPy's (sign(x) * imag(x) has the tangent 0.0 + -1 * 0.0 = 0.0, not -0.0)."""
    x = np.array([-0.5, 0.3, 1.5, -2.0])
    t = np.linspace(-1.0, 1.0, x.size)
    y, dy = mutad.jvp(f, (x.copy(),), (t,))
    d_x = xp.asarray(x)
    d_y, d_dy = mutad.jvp(f, (d_x,), (xp.asarray(t),))
    assert_same(d_y, y, "output")
    assert_same(d_dy, dy, "tangent")
    assert d_x.get().tobytes() == x.tobytes()
    same_gradients(lambda x: np.sum(f(x) * x), x)
    same_gradients(lambda x: np.sum(f(x)), x)

    def cubic(x):  # nested: a constant of both differentiations
        return np.sum(f(x) * x * x)

    assert_same(mutad.hvp(cubic, (xp.asarray(x),), (xp.asarray(t),)),
                mutad.hvp(cubic, (x.copy(),), (t,)), "hvp")


def _written_into_a_mask_as_floats(x):
    w = (x > 0).astype(float)  # floats of a boolean result without a derivative
    w[1:] += x[:-1]
    return w


def _written_into_a_choice(x):
    w = np.where(x > 0, 1.0, 0.5)
    w[1:] += x[:-1]
    return w


def _written_into_an_order_as_floats(x):
    w = np.argsort(x) * 1.0
    w[1:] += x[:-1]
    return w


def _written_into_a_mask_times_ones(x):
    w = (x > 0) * np.ones_like(x)  # the ways round it the refusal names
    w[1:] += x[:-1]
    return w


def _written_into_a_choice_plus_zeros(x):
    w = np.where(x > 0, 1.0, 0.5) + np.zeros_like(x)
    w[1:] += x[:-1]
    return w


def _written_into_zeros_set_to_an_order(x):
    w = np.zeros_like(x)
    w[...] = np.argsort(x)
    w[1:] += x[:-1]
    return w


def _in_every_mode(f, x, t):
    """``f``'s value and derivatives at the device copy of ``x`` in every mode, compared with
    NumPy's bit for bit, the device array given coming back unchanged."""
    d_x = xp.asarray(x)
    y, dy = mutad.jvp(f, (x.copy(),), (t,))
    d_y, d_dy = mutad.jvp(f, (d_x,), (xp.asarray(t),))
    assert_same(d_y, y, "output")
    assert_same(d_dy, dy, "tangent")
    same_gradients(lambda x: np.sum(f(x) * x), x)
    u = np.linspace(0.5, 2.0, x.size)
    value, pullback = mutad.vjp(f, x.copy())
    d_value, d_pullback = mutad.vjp(f, d_x)
    assert_same(d_value, value, "output")
    assert_same(d_pullback(xp.asarray(u)), pullback(u))

    def cubic(x):  # nested: a constant of both differentiations
        return np.sum(f(x) * x * x)

    assert_same(mutad.hvp(cubic, (d_x,), (xp.asarray(t),)), mutad.hvp(cubic, (x.copy(),), (t,)),
                "hvp")
    assert d_x.get().tobytes() == x.tobytes()


@pytest.mark.parametrize("f", [_written_into_a_mask_as_floats, _written_into_a_choice,
                               _written_into_an_order_as_floats])
def test_floats_of_integer_results_without_a_derivative_on_the_device(f):
    """The floats computed from a device's boolean or integer result of a function without a
    derivative (x > 0, np.argsort(x)) stay the device library's plain arrays, which mutad does
    not follow (the integers must stay the library's own, to index its arrays): a traced value
    written into them is refused in every mode with a MutadError naming the case and the ways
    round it, not the device library's TypeError; on NumPy it is followed."""
    x = np.array([-0.5, 0.3, 1.5, -2.0])
    t = np.linspace(-1.0, 1.0, x.size)
    mutad.jvp(f, (x.copy(),), (t,))  # followed on NumPy
    d_x = xp.asarray(x)
    for differentiate in (lambda: mutad.gradient(lambda x: np.sum(f(x) * x), d_x),
                          lambda: mutad.vjp(f, d_x),
                          lambda: mutad.jvp(f, (d_x,), (xp.asarray(t),)),
                          lambda: mutad.hvp(lambda x: np.sum(f(x) * x * x), (d_x,),
                                            (xp.asarray(t),))):
        with pytest.raises(mutad.errors.UntracedWriteError,
                           match=r"np\.where\(x > 0, 1\.0, 0\.5\) \+ np\.zeros_like\(x\)"):
            differentiate()
    assert d_x.get().tobytes() == x.tobytes()


@pytest.mark.parametrize("f", [_written_into_a_mask_times_ones, _written_into_a_choice_plus_zeros,
                               _written_into_zeros_set_to_an_order])
def test_floats_of_integer_results_made_from_followed_floats_on_the_device(f):
    """The ways round that refusal it names give NumPy's values and derivatives bit for bit."""
    _in_every_mode(f, np.array([-0.5, 0.3, 1.5, -2.0]), np.linspace(-1.0, 1.0, 4))


def test_second_order_on_the_device():
    def f(x, w):
        x *= w
        x[1:] += np.sin(x[:-1])
        return (x * x).sum() + np.tanh(w).sum()

    x, w = np.linspace(0.1, 0.9, 5), np.linspace(1.0, 2.0, 5)
    v = (np.linspace(-1.0, 1.0, 5), np.ones(5))
    expected = mutad.hvp(f, (x.copy(), w), v)
    assert_same(mutad.hvp(f, to_device((x, w)), to_device(v)), expected, "hvp")
    assert_same(mutad.hessian(f, xp.asarray(x), xp.asarray(w)),
                mutad.hessian(f, x.copy(), w), "hessian")


# ----------------------------------------------------------------------------------------------
# A sample of each rule family, written with NumPy's names


def _matrix(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) + n * np.eye(n)


FAMILIES = {
    # ufuncs, in place and out of place
    "ufuncs": (lambda x: (np.exp(np.sin(x)) * np.tanh(x) + np.hypot(x, 1.0 - x)
                          + np.maximum(x, 0.3) + np.arctan2(x, 2.0)).sum(),
               [np.linspace(-1.0, 1.0, 7)]),
    "ufuncs-in-place": (lambda x: (np.log1p(np.square(x, out=x), out=x) * 3.0).sum(),
                        [np.linspace(-1.0, 1.0, 7)]),
    "power": (lambda x, y: (np.power(x, y) + x ** 2.5 + np.sqrt(x)).sum(),
              [np.linspace(0.5, 2.0, 6), np.linspace(-1.0, 1.0, 6)]),
    # reductions
    "reductions": (lambda x: (x.sum(axis=0) * x.max(axis=1) + np.cumsum(x, axis=1)[:, -1]
                              + np.prod(x, axis=0) + x.var(axis=1) + np.mean(x)).sum(),
                   [np.linspace(0.1, 1.2, 12).reshape(3, 4)[:, :3].copy()]),
    "quantile": (lambda x: np.quantile(x, 0.3) + np.median(x) + np.linalg.norm(x),
                 [np.linspace(-1.0, 2.0, 9)]),
    "logsumexp-like": (lambda x: np.log(np.sum(np.exp(x - x.max()))) + np.cumprod(x).sum(),
                       [np.linspace(-1.0, 0.5, 6)]),
    # indexing: basic, advanced, masks, scatters
    "indexing": (lambda x: (x[1:4] * x[[0, 2, 2]] + x[x > 0.0].sum()
                            + np.take(x, [4, 1, 1])).sum(),
                 [np.linspace(-0.5, 1.5, 6)]),
    "scatter": (lambda x: _scatter(x), [np.linspace(-0.5, 1.5, 6)]),
    "where-sort": (lambda x: (np.where(x > 0.2, x, -x) * np.sort(x)).sum()
                   + np.partition(x, 2)[:3].sum(),
                   [np.array([0.3, -0.2, 0.9, 0.1, -0.7])]),
    # shape and joins
    "shape": (lambda x: (np.concatenate([x, x[::-1]]).reshape(2, -1).T.sum(axis=1)
                         + np.roll(x, 1).repeat(2)[:6] + np.stack([x, 2 * x])[1]).sum()
              + np.pad(x, 1)[0:3].sum() + np.diff(x).sum(),
              [np.linspace(0.1, 0.6, 6)]),
    "views": (lambda x: _views(x), [np.linspace(0.1, 1.2, 12)]),
    # linear algebra
    "linalg": (lambda A, b: (np.linalg.solve(A, b) + np.linalg.inv(A) @ b).sum()
               + np.linalg.det(A) + np.trace(A @ A.T) + np.einsum("ij,j->", A, b),
               [_matrix(), np.linspace(1.0, 2.0, 4)]),
    "factorizations": (lambda A: np.linalg.cholesky(A @ A.T).sum()
                       + np.linalg.eigh(A + A.T)[0].sum() + np.linalg.svd(A)[1].sum()
                       + np.linalg.qr(A)[1].sum(),
                       [_matrix()]),
    # the FFT
    "fft": (lambda x: (np.abs(np.fft.fft(x)) ** 2).sum() + np.fft.irfft(np.fft.rfft(x)).sum()
            + np.real(np.fft.ifft2(np.fft.fft2(x.reshape(2, 4)))).sum(),
            [np.linspace(-1.0, 1.0, 8)]),
}


def _scatter(x):
    y = np.zeros_like(x)
    y[[1, 3, 3]] += x[:3]
    np.add.at(y, [0, 0, 5], x[3:])
    y[x < 0.5] = 2.0 * x[x < 0.5]
    return (y * y).sum()


def _views(x):
    m = x.reshape(3, 4)
    m.T[1:, :2] *= 2.0
    m[:, ::2] += m[:, 1::2]
    d = np.diagonal(m)
    return (np.sin(m) * m).sum() + d.sum()


@pytest.mark.parametrize("name", list(FAMILIES))
def test_rule_families_on_the_device(name):
    f, args = FAMILIES[name]
    same_gradients(f, *args)


# ----------------------------------------------------------------------------------------------
# What is refused on a device, and how


def _scipy_call(name):
    import scipy.linalg
    import scipy.stats

    A = xp.asarray(_matrix())
    return {"inv": lambda x: (scipy.linalg.inv(A) @ x).sum(),
            "det": lambda x: scipy.linalg.det(A * x).sum(),
            "logpdf": lambda x: scipy.stats.norm.logpdf(x, 0.0, 1.0).sum()}[name]


@pytest.mark.parametrize("name", ["inv", "det", "logpdf"])
def test_scipy_on_the_device_is_refused_by_name(name):
    """SciPy's routines the device's SciPy (cupyx.scipy) lacks, or that mutad does not compute
    with it (``mutad.scipy._devices.ROUTINES``), are refused by name, not failed inside SciPy."""
    x = xp.asarray(np.linspace(0.1, 1.0, 4))
    with pytest.raises(mutad.errors.UnsupportedArrayError, match=name):
        mutad.gradient(_scipy_call(name), x)
    assert x.get().tolist() == np.linspace(0.1, 1.0, 4).tolist()


# ----------------------------------------------------------------------------------------------
# SciPy's routines the device's SciPy computes (cupyx.scipy; the stand-in's ``xp.scipy``)


def _device_scipy():
    """The device library's SciPy: ``cupyx.scipy`` for CuPy, ``xp.scipy`` for the stand-in."""
    return devices.scipy_of(xp)


def _host_scipy():
    import scipy.linalg
    import scipy.ndimage
    import scipy.signal
    import scipy.special

    return scipy


def _image():
    return np.sin(np.linspace(0.0, 3.0, 20)).reshape(4, 5)


SCIPY_PROGRAMS = {
    # (program of a SciPy namespace ``s``, its arguments)
    "solve_triangular": (lambda s: lambda a, b: (
        (s.linalg.solve_triangular(a, b, lower=True) ** 2).sum()
        + s.linalg.solve_triangular(a, b, trans=1, lower=True).sum()),
        [np.tril(_matrix()), np.linspace(1.0, 2.0, 4)]),
    "lu_factor-lu_solve": (lambda s: lambda a, b: (
        (s.linalg.lu_solve(s.linalg.lu_factor(a), b) * b).sum()
        + s.linalg.lu_solve(s.linalg.lu_factor(a), b, trans=1).sum()),
        [_matrix(seed=1), np.linspace(1.0, 2.0, 8).reshape(4, 2)]),
    "logsumexp": (lambda s: lambda x, w: (
        s.special.logsumexp(x) + s.special.logsumexp(x.reshape(2, 4), axis=1,
                                                     b=w.reshape(2, 4)).sum()),
        [np.linspace(-1.0, 0.5, 8), np.linspace(0.5, 1.5, 8)]),
    "lfilter": (lambda s: lambda b, a, x: _lfiltered(s, b, a, x),
                [np.array([1.0, 0.5, 0.25]), np.array([1.0, -0.3]), np.linspace(-1.0, 1.0, 9)]),
    "convolve-fftconvolve": (lambda s: lambda u, v: (
        (s.signal.convolve(u, v) ** 2).sum() + (s.signal.fftconvolve(u, v, "same") * u).sum()
        + s.signal.convolve(u, v, "valid", "direct").sum()),
        [np.linspace(-1.0, 1.0, 7), np.array([0.5, -1.0, 2.0])]),
    "ndimage-filters": (lambda s: lambda image, w: _filtered(s, image, w),
                        [_image(), np.array([[1.0, -0.5], [0.25, 2.0]])]),
}
"""Programs calling SciPy's routines the device computes, written once against a SciPy
namespace: SciPy's own (on device arrays, through mutad's routes) or the device's
(``cupyx.scipy.signal.lfilter``, routed to the same rules)."""


def _lfiltered(s, b, a, x):
    y = s.signal.lfilter(b, a, x)
    y[1:] += 0.5 * y[:-1]  # in place, after the filter
    return (y * y).sum()


def _filtered(s, image, w):
    image = image * 2.0
    image[1:, :] += s.ndimage.gaussian_filter(image, 1.0)[:-1, :]
    return ((s.ndimage.uniform_filter(image, 3) ** 2).sum()
            + (s.ndimage.convolve(image, w, mode="constant") * image).sum()
            + (s.ndimage.correlate1d(image, w[1], axis=0, mode="nearest") ** 2).sum())


@pytest.mark.parametrize("name", list(SCIPY_PROGRAMS))
def test_scipy_routines_on_the_device(name):
    """SciPy's names on device arrays: values and gradients those of SciPy on the host copies
    (bit for bit on the stand-in, which computes with the same SciPy calls), on the device,
    with nothing copied to the host and the caller's arrays unchanged."""
    program, args = SCIPY_PROGRAMS[name]
    f = program(_host_scipy())
    same_gradients(f, *args)
    device_args = to_device(list(args))
    before = xp.TRANSFERS[0] if hasattr(xp, "TRANSFERS") else None
    mutad.value_and_gradient(f, *device_args)
    if before is not None:
        assert xp.TRANSFERS[0] == before


@pytest.mark.parametrize("name", list(SCIPY_PROGRAMS))
def test_device_scipy_functions_are_differentiated(name):
    """The device's own SciPy functions (``cupyx.scipy.linalg.lu_factor``) on traced arrays:
    the same rules as SciPy's, the host program's gradients."""
    program, args = SCIPY_PROGRAMS[name]
    same_gradients(program(_host_scipy()), *args, device_f=program(_device_scipy()))


@pytest.mark.parametrize("name", list(SCIPY_PROGRAMS))
@pytest.mark.parametrize("scipy_of", ["scipy", "device"])
def test_scipy_routines_on_the_device_forward(name, scipy_of):
    program, args = SCIPY_PROGRAMS[name]
    tangents = tuple(np.linspace(-1.0, 1.0, a.size).reshape(a.shape) for a in args)
    expected = mutad.jvp(program(_host_scipy()), [a.copy() for a in args], tangents)
    device_f = program(_host_scipy() if scipy_of == "scipy" else _device_scipy())
    device_args, device_tangents = to_device(list(args)), to_device(tangents)
    before = xp.TRANSFERS[0] if hasattr(xp, "TRANSFERS") else None
    result = mutad.jvp(device_f, device_args, device_tangents)
    if before is not None:
        assert xp.TRANSFERS[0] == before
    assert_same(result, expected, "jvp")
    for a, b in zip(device_args, args, strict=True):
        assert a.get().tobytes() == b.tobytes()


@pytest.mark.parametrize("name", ["solve_triangular", "lfilter"])
def test_scipy_routines_on_the_device_second_order(name):
    program, args = SCIPY_PROGRAMS[name]
    f = program(_host_scipy())
    v = tuple(np.linspace(-1.0, 1.0, a.size).reshape(a.shape) for a in args)
    expected = mutad.hvp(f, [a.copy() for a in args], v)
    assert_same(mutad.hvp(f, to_device(list(args)), to_device(v)), expected, "hvp")


def _solved(a, b):
    import scipy.linalg

    x = scipy.linalg.solve(a, b)
    y = scipy.linalg.solve(a, x, transposed=True)
    return (x * y).sum() + scipy.linalg.solve(a, b[:, 0], assume_a="gen").sum()


def _cholesky_solved(a, b, lower):
    import scipy.linalg

    spd = a @ a.T  # (positive definite: a is well conditioned)
    c = scipy.linalg.cho_factor(spd, lower=lower)
    x = scipy.linalg.cho_solve(c, b)
    return ((x * b).sum() + (c[0] ** 2).sum()
            + (scipy.linalg.cholesky(spd, lower=not lower) * a).sum())


ADAPTED_PROGRAMS = {
    "solve": (_solved, [_matrix(seed=2), np.linspace(1.0, 2.0, 8).reshape(4, 2)]),
    "cholesky-upper": (lambda a, b: _cholesky_solved(a, b, False),
                       [_matrix(seed=3), np.linspace(1.0, 2.0, 8).reshape(4, 2)]),
    "cholesky-lower": (lambda a, b: _cholesky_solved(a, b, True),
                       [_matrix(seed=4), np.linspace(-1.0, 2.0, 4)]),
}
"""Programs of SciPy's routines that cupyx.scipy.linalg lacks, computed with the device's
linalg (``_devices.ADAPTED``): solve of a general matrix, cholesky, cho_factor, cho_solve."""


@pytest.mark.parametrize("name", list(ADAPTED_PROGRAMS))
def test_scipy_linalg_the_device_computes_otherwise(name):
    """Another LAPACK routine than SciPy's (getrf and getrs for gesv, potrf of the triangle
    SciPy reads, two triangular solves for potrs), so values and gradients are SciPy's on the
    host to a relative 1e-9 (``RTOL``), in both modes; the caller's arrays are unchanged, and
    nothing is copied to the host but the flag of the symmetry check of the factorisations'
    rules (``require_symmetric``)."""
    f, args = ADAPTED_PROGRAMS[name]
    with _exact(False):
        same_gradients(f, *args)
        tangents = tuple(np.linspace(-1.0, 1.0, a.size).reshape(a.shape) for a in args)
        assert_same(mutad.jvp(f, to_device(args), to_device(tangents)),
                    mutad.jvp(f, [a.copy() for a in args], tangents), "jvp")
    if hasattr(xp, "TRANSFERS"):
        before = xp.TRANSFERS[0]
        mutad.gradient(f, *to_device(args))
        assert xp.TRANSFERS[0] - before == (0 if name == "solve" else 2)  # (two rules check)


def test_scipy_cho_factor_on_the_device_keeps_scipys_other_triangle():
    """cho_factor on a device reads the triangle SciPy reads and leaves the matrix's own
    entries in the other one, as SciPy's (LAPACK's potrf leaves them): a matrix symmetric but
    for its unread triangle factors as SciPy factors it."""
    import scipy.linalg

    from mutad.scipy import _devices

    spd = _matrix() @ _matrix().T + np.eye(4)
    on_device = _devices.counterpart(scipy.linalg.cho_factor, xp)
    for lower in (False, True):
        unread = np.triu(spd, 1) * 7.0 if lower else np.tril(spd, -1) * 7.0
        a = (np.tril(spd) if lower else np.triu(spd)) + unread
        expected = scipy.linalg.cho_factor(a.copy(), lower=lower)[0]
        got = on_device(xp.asarray(a), lower)[0].get()
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=RTOL)
        assert (got == expected)[unread != 0.0].all()  # the entries themselves


def test_scipy_solve_of_a_structure_on_the_device_is_refused():
    import scipy.linalg

    a = xp.asarray(_matrix() @ _matrix().T)
    with pytest.raises(mutad.errors.UnsupportedArrayError, match="assume_a='pos'"):
        mutad.gradient(lambda b: scipy.linalg.solve(a, b, assume_a="pos").sum(),
                       xp.asarray(np.ones(4)))


def test_device_scipy_takes_scipys_parameters():
    """mutad's rules call a routine's counterpart as they call SciPy's, positionally in SciPy's
    order: each counterpart takes SciPy's parameters, those SciPy takes positionally at the
    same places."""
    import importlib
    import inspect

    from mutad.scipy import _devices

    for sub, names in _devices.ROUTINES.items():
        module = importlib.import_module(f"scipy.{sub}")
        for name in names:
            scipys = getattr(module, name)
            theirs = list(inspect.signature(_devices.counterpart(scipys, xp)).parameters)
            for place, (parameter, kind) in enumerate(
                    (p.name, p.kind) for p in inspect.signature(scipys).parameters.values()):
                if kind is inspect.Parameter.KEYWORD_ONLY:
                    assert parameter in theirs, (sub, name, parameter)
                else:
                    assert theirs[place] == parameter, (sub, name, parameter)


@pytest.mark.skipif(xp.__name__ != "device_array", reason="the stand-in's own SciPy")
def test_a_routine_the_device_lacks_is_refused_by_name(monkeypatch):
    """A routine mutad computes with the device's SciPy, on a device whose SciPy lacks it."""
    import scipy.signal

    from mutad.scipy import _devices

    monkeypatch.setitem(_devices._COUNTERPARTS, (id(xp), "signal", "lfilter"), (xp, None))
    with pytest.raises(mutad.errors.UnsupportedArrayError,
                       match="lfilter.*has no counterpart"):
        mutad.gradient(lambda x: scipy.signal.lfilter([1.0], [1.0, 0.5], x).sum(),
                       xp.asarray(np.linspace(0.1, 1.0, 4)))


@pytest.mark.skipif(xp.__name__ != "device_array", reason="the stand-in's own SciPy")
def test_the_stand_in_scipy_refuses_host_arrays():
    """As cupyx.scipy's functions do: they compute with their array arguments as device
    arrays."""
    with pytest.raises(TypeError, match="Unsupported type"):
        xp.scipy.signal.lfilter([1.0], [1.0], xp.arange(3.0))
    with pytest.raises(TypeError, match="Unsupported type"):
        xp.scipy.linalg.solve_triangular(np.eye(2), xp.ones(2))
    assert not hasattr(xp.scipy.linalg, "solve")  # as cupyx.scipy.linalg


def test_scipy_ufuncs_on_the_device():
    import scipy.special

    same_gradients(lambda x: (scipy.special.expit(x) * scipy.special.gammaln(x)).sum(),
                   np.linspace(0.1, 1.0, 6))


def test_in_place_linalg_on_the_device_is_refused_by_name():
    import mutad.linalg

    def f(A):
        return mutad.linalg.cholesky_(A @ A.T).L.sum()

    with pytest.raises(mutad.errors.UnsupportedArrayError, match="cholesky_"):
        mutad.gradient(f, xp.asarray(_matrix()))


def test_no_copy_to_the_host():
    """A gradient on the device copies nothing to the host: the stand-in counts every value
    read there (``get``, ``item``, ``float``, ``bool``...)."""
    def f(x):
        x *= 2.0
        x[1:] += np.tanh(x[:-1])
        return (x * x).sum()

    x = xp.asarray(np.linspace(0.1, 1.0, 1000))
    before = xp.TRANSFERS[0]
    mutad.gradient(f, x)
    assert xp.TRANSFERS[0] == before


@pytest.mark.parametrize("name, params", [
    ("leapfrog", {"n": 20_000, "steps": 3}), ("heat-explicit", {"n": 20_000, "steps": 3}),
    ("big-elementwise", {"n": 100_000})], ids=["leapfrog", "heat-explicit", "big-elementwise"])
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_workloads_at_sizes_whose_writes_are_checked(name, params, policy):
    """Arrays large enough that the restore policy checks each inverse element by element
    (``writes._verify``), in scratch memory on the device; the checkpoint policy reads
    nothing on the host."""
    from mutad.bench.workloads import WORKLOADS

    problem = WORKLOADS[name].build(**params)
    loss = _namespace_program(problem)
    same_gradients(problem.loss, *problem.args, device_f=loss, argnums=problem.argnums,
                   policy=policy)
    if policy == "checkpoint" and hasattr(xp, "TRANSFERS"):
        args = to_device(list(problem.args))
        before = xp.TRANSFERS[0]
        mutad.gradient(loss, *args, argnums=problem.argnums, policy=policy)
        assert xp.TRANSFERS[0] == before
