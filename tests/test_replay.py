"""Record once, replay fast (``grad(f, replay=True)``): the replayed gradient is the traced
gradient bit for bit, the caller's arrays come back bit for bit, and every decision the program
depends on is guarded."""

import builtins
import collections
import functools
import itertools
import random
import sys
import types
import warnings

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mutad
import random_programs as rp
from mutad.bench.workloads import big_elementwise
from mutad.engines import replay
from mutad.engines.replay import ElementwiseWrite
from test_recompute import peak_bytes
from test_replay_budget import replays
from test_replay_reentered import all_steps

POLICIES = ("restore", "checkpoint")


def same(a, b):
    """Equal structure and bytes (a float gradient of a float argument compared as a float)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def replayed_like_traced(f, calls, policy="restore", argnums=0, traced_once=False,
                         replayed=True):
    """Call ``value_and_grad(f, replay=True)`` on each argument tuple of ``calls`` in turn
    (the first records), and check each against the traced gradient on fresh copies, and the
    caller's bytes. ``traced_once``: also that only the first call traced (every later one
    replayed, none recorded again after a failure); ``replayed``: that some later call
    replayed (False where each may be traced). Returns the replaying function."""
    replaying = mutad.value_and_grad(f, argnums=argnums, policy=policy, replay=True)
    trace, traced = replaying.trace, []  # (a call that never traces is a replay)
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    untraced = 0
    for args in calls:
        copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
        before = [a.tobytes() for a in args if isinstance(a, np.ndarray)]
        count = len(traced)
        got = replaying(*args)
        untraced += len(traced) == count
        assert [a.tobytes() for a in args if isinstance(a, np.ndarray)] == before
        expected = mutad.value_and_grad(f, argnums=argnums, policy=policy)(*copies)
        assert same(got[0], expected[0]) and same(got[1], expected[1])
    if traced_once:
        assert len(traced) == 1, f"traced {len(traced)} times"
    if replayed and len(calls) > 1:
        assert untraced, f"no call replayed: {replaying.reasons}"
    return replaying


def program_count(replaying):
    return sum(type(p) is not str for p in replaying.programs.values())


def replayed(replaying, *args):
    """``replaying(*args)``, which must replay a recorded program rather than trace."""
    count = replays(replaying)
    result = replaying(*args)
    assert replays(replaying) == count + 1, f"traced: {replaying.reasons}"
    return result


# ----------------------------------------------------------------------------------------------
# What is replayed


def small_ops(x):
    for j in range(20):
        s = np.sin(x) if j % 2 == 0 else np.tanh(x)
        x = s * 0.1 + x * 0.999
    return x.sum()


def applied_partials(x, u):
    """Each row whose partial is a function of one value (``registry.Applied``): of the input,
    of the output (tanh's, also written in place), on whole arrays and on a region."""
    u = u.copy()
    np.tanh(u, out=u)
    u[1:] = np.cosh(u[1:]) + np.sinh(x[1:])
    y = np.sin(x) * np.cos(u) + np.expm1(x * 0.5) * np.tanh(x)
    return (y * u).sum() + np.sin(u[2:]).sum()


def test_partials_applied_directly_are_replayed_bit_for_bit():
    rng = np.random.default_rng(3)
    calls = [(rng.standard_normal(6), rng.standard_normal(6)) for _ in range(4)]
    for policy in POLICIES:
        replaying = replayed_like_traced(applied_partials, calls, policy, argnums=(0, 1),
                                         traced_once=True)
        assert program_count(replaying) == 1 and not replaying.reasons


def test_an_elementwise_chain_is_replayed_bit_for_bit():
    rng = np.random.default_rng(0)
    replaying = replayed_like_traced(small_ops, [(rng.standard_normal(10),) for _ in range(4)])
    assert program_count(replaying) == 1 and not replaying.reasons


@pytest.mark.parametrize("policy", POLICIES)
def test_in_place_updates_of_arguments_and_of_allocated_buffers(policy):
    def step(u, c):
        work = np.zeros_like(u)          # allocated in the function, filled with traced values
        for _ in range(3):
            work[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
            u += c * work                # an argument, written in place
            u[0] = u[1]                  # one element
            np.multiply(u, 0.9, out=u)
        return (u * u).sum() + work[3]

    rng = np.random.default_rng(1)
    calls = [(rng.standard_normal(12), 0.1 + rng.random()) for _ in range(3)]
    replaying = replayed_like_traced(step, calls, policy, argnums=(0, 1))
    assert program_count(replaying) == 1, replaying.reasons


def test_functions_with_rules_views_and_scalar_elements():
    def f(a, b):
        m = a.reshape(3, 4)
        v = m.T @ b                       # a view, and np.matmul's rule
        w = np.concatenate([v, np.exp(a[:2])])
        total = 0.0
        for i in range(len(w)):
            total = total + w[i] * w[i]   # scalar elements, one at a time
        return total + np.sum(m[1])

    rng = np.random.default_rng(2)
    calls = [(rng.standard_normal(12), rng.standard_normal(3)) for _ in range(3)]
    replaying = replayed_like_traced(f, calls, argnums=(0, 1))
    assert program_count(replaying) == 1, replaying.reasons


def test_float_scalar_arguments_give_float_gradients():
    replaying = replayed_like_traced(lambda x, s: (np.sin(x) * s).sum(),
                                     [(np.arange(3.0), 2.0), (np.ones(3), 0.5)], argnums=(0, 1))
    assert type(replaying(np.ones(3), 0.5)[1][1]) is float


# ----------------------------------------------------------------------------------------------
# Guards and signatures


def test_an_argument_sharing_memory_with_a_constant_of_the_program_is_traced():
    weights = np.linspace(1.0, 2.0, 6)

    def f(x):
        y = x * weights                   # weights: read as a constant
        x *= 2.0                          # a write into the argument
        return (y * x).sum() + (weights * weights).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.ones(6)
    assert same(replaying(x), mutad.grad(f)(x.copy()))
    assert same(replaying(x), mutad.grad(f)(x.copy()))
    with pytest.raises(mutad.MutadError):  # traced, which refuses it
        replaying(weights)
    assert same(weights, np.linspace(1.0, 2.0, 6))


@pytest.mark.parametrize("memory", ["array", "bytes"])
def test_an_argument_viewing_a_constants_memory_is_traced_where_they_overlap(memory):
    """The constant read is a view of a larger array (or of a bytearray's memory, which no
    array owns): an argument over memory of that array apart from the constant's is replayed,
    one over the constant's own, of a layout a program was recorded for, is traced, which
    refuses the write into it; a new array is replayed."""
    if memory == "array":
        whole = np.linspace(1.0, 2.0, 12)
    else:
        whole = np.frombuffer(bytearray(np.linspace(1.0, 2.0, 12).tobytes()))
        assert whole.flags.writeable and not whole.flags.owndata
    weights = whole[:6]

    def f(x):
        y = x * weights                   # weights: read as a constant
        x *= 2.0                          # a write into the argument
        return (y * x).sum()

    replaying = mutad.grad(f, replay=True)
    other = np.ones(12)
    for x in (other[:6], other[6:], other[:6], other[6:]):  # the two layouts' programs
        assert same(replaying(x), mutad.grad(f)(x.copy()))
    apart = whole[6:]  # (the second program's layout)
    assert same(replaying(apart), mutad.grad(f)(apart.copy()))
    assert same(whole, np.linspace(1.0, 2.0, 12))
    with pytest.raises(mutad.MutadError):  # the first's layout: traced, which refuses it
        replaying(weights)
    assert same(whole, np.linspace(1.0, 2.0, 12))
    assert program_count(replaying) == 2
    assert same(replaying(np.full(6, 3.0)), mutad.grad(f)(np.full(6, 3.0)))


def test_a_new_shape_dtype_or_aliasing_is_a_new_program():
    def f(a, b):
        a *= 2.0
        return (a * b).sum()

    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    x = np.arange(4.0)
    for args in [(x.copy(), x.copy()), (np.ones(5), np.ones(5)), (x, x), (x[:2], x[2:]),
                 (x.astype(np.float32), x.astype(np.float32))]:
        for k in range(2):  # (recorded, then replayed)
            copies = [a.copy() for a in args] if args[0] is not args[1] else [args[0].copy()] * 2
            got = replayed(replaying, *args) if k else replaying(*args)
            expected = mutad.value_and_grad(f, argnums=(0, 1))(*copies)
            assert same(got[0], expected[0]) and same(got[1], expected[1])
    assert program_count(replaying) == 5


def test_the_truth_of_a_traced_value_is_a_guard():
    def f(x, flag):
        y = np.sin(x) * flag
        if y.sum():                       # Python's decision on a traced value
            return (y * y).sum()
        return (3.0 * x).sum()

    x = np.linspace(0.1, 1.0, 5)
    replaying = replayed_like_traced(f, [(x, 1.0), (x, 2.0), (x, 0.0), (x, 0.0), (x, 3.0)],
                                     argnums=(0, 1))
    assert program_count(replaying) == 1  # one signature: the last recording replaced it


def test_a_failed_guard_leaves_the_callers_arrays_as_they_were():
    def f(x):
        x *= 3.0                          # writes the caller's array, then a guard fails
        x[0] = 5.0
        if np.sin(x).sum() * 0:           # false on the recording
            return x.sum()
        return (x * x).sum()

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.ones(3)
    replaying(x)
    replayed(replaying, x * 2.0)  # (the guard holds)
    y = np.array([np.nan, 1.0, 1.0])  # nan * 0 is nan, which is true: the guard fails
    before = y.tobytes()
    got = replaying(y)
    assert y.tobytes() == before
    expected = mutad.value_and_grad(f)(y.copy())
    assert same(got[0], expected[0]) and same(got[1], expected[1])


def _scalars_indexed_with_none(x):
    s = 2.0 * x[0] - x[1]  # a 0-d value: s[None] is a new, writable array of one element
    t = s[None]
    t *= 3.0
    m = np.concatenate([(2.0 * s - x[0])[None], t, x, x[-1][None]])
    return np.sum(m[1:] * m[:-1]) + s


def test_a_scalar_indexed_with_none_is_replayed():
    """Regression: ``s[None]`` of a traced scalar (NumPy's new array, not a view) was refused
    by a recording ("an index recorded as several operations"): every call was traced."""
    x = np.array([0.5, -1.25, 2.0, 0.75])
    replayed_like_traced(_scalars_indexed_with_none, [(x,), (x * 1.5,), (x[::-1] - 0.5,)],
                         traced_once=True)


SCALE = np.full(3, 2.0)


def scaled(x):
    return (x * SCALE).sum()


def test_what_the_function_closes_over_is_guarded_by_identity():
    global SCALE
    x = np.ones(3)
    replaying = mutad.grad(scaled, replay=True)
    assert same(replaying(x), np.full(3, 2.0))
    SCALE[:] = 4.0                        # the same array, changed: read as it is now
    assert same(replaying(x), np.full(3, 4.0))
    saved = SCALE
    try:
        SCALE = np.full(3, 5.0)           # a global f names, rebound: recorded again
        assert same(replaying(x), np.full(3, 5.0))
        assert same(replayed(replaying, x), np.full(3, 5.0))
    finally:
        SCALE = saved

    def make(scale):
        def f(x):
            return (x * scale).sum()
        return f

    for scale in (3.0, 7.0):              # a closure over a number: a function of its own
        assert same(mutad.grad(make(scale), replay=True)(x), np.full(3, scale))

    factor = 3.0

    def f(x):
        return (x * factor).sum()

    replaying = mutad.grad(f, replay=True)
    assert same(replaying(x), np.full(3, 3.0))
    factor = 6.0                          # the cell f closes over, rebound: recorded again
    assert same(replaying(x), np.full(3, 6.0)) and same(replayed(replaying, x), np.full(3, 6.0))


def _round_written(x):
    s = np.round(x, 1)
    s[s == 0.5] = x[s == 0.5]
    return (s * s).sum()


def _floor_added(x):
    s = np.floor(x)
    s += x
    return (s * s).sum()


def _sign_multiplied(x):
    m = np.sign(x)
    np.multiply(m, x, out=m)
    return (m * m).sum()


def _mask_of_ones_written(x):
    w = np.where(x > 0, 1.0, 0.0)
    w[w == 0] = x[w == 0]
    return (w * w).sum()


def _index_cast_multiplied(x):
    w = np.argsort(x).astype(float)
    w *= x
    return w.sum()


def _comparison_scaled_added(x):
    w = (x > 0) * 1.0
    w += x
    return (w * w).sum()


@pytest.mark.parametrize("f", [_round_written, _floor_added, _sign_multiplied,
                               _mask_of_ones_written, _index_cast_multiplied,
                               _comparison_scaled_added])
def test_a_write_into_a_result_without_a_derivative_is_followed_as_tracing_follows_it(f):
    """Tracing holds a function's result without a derivative (np.round's, np.sign's) as a
    constant, and follows a traced value written into it; the recording holds it as a
    constant too, and the replaying function gives tracing's value and gradient on every
    call, the caller's bytes unchanged."""
    calls = [(np.array(x),) for x in ([0.5, 1.25, -2.0, 0.3], [0.5, 1.75, 2.0, -0.3],
                                      [-1.5, 0.25, 2.5, 0.5], [0.5, 1.25, -2.0, 0.3])]
    replayed_like_traced(f, calls)


def _weights_refilled_after_a_read(x):
    w = (x > 0.5) * 1.0
    y = np.exp(x * w) * x
    w[:] = 1.0
    return y.sum()


def test_a_write_into_a_result_without_a_derivative_a_record_read_is_followed():
    """Regression: a comparison's result (and what is computed from such results alone),
    written after a record read it, is followed as tracing follows it (its old values put
    back for the reverse pass): the replaying function gives tracing's value and gradient on
    every call, where it had given an error on some calls and a value on others."""
    calls = [(np.array(x),) for x in ([0.5, 1.25, -2.0, 0.3], [0.5, 1.75, 2.0, -0.3],
                                      [-1.5, 0.25, 2.5, 0.5], [0.5, 1.25, -2.0, 0.3])]
    replayed_like_traced(_weights_refilled_after_a_read, calls)


def _comparison_written(x):
    m = x > 0
    m[0] = x[0]
    return (x * x).sum() + m.sum()


def _index_written(x):
    k = np.argsort(x)
    k[0] = x[1]
    return (x[k] ** 2).sum()


@pytest.mark.parametrize("f", [_comparison_written, _index_written])
def test_a_traced_value_written_into_a_comparison_or_an_index_is_replayed(f):
    """A comparison's or an index's result is a plain array to tracing, into which NumPy
    writes a traced value's values (the gradient ends there); the recording holds it as a
    constant, and writes the values as NumPy does, not a traced write NumPy refuses."""
    calls = [(np.array(x),) for x in ([0.5, 1.25, -2.0, 0.3], [-0.5, 2.25, 2.0, 0.0],
                                      [0.0, 1.0, 3.0, -1.0], [0.5, 1.25, -2.0, 0.3])]
    replayed_like_traced(f, calls)


def each_change_reaches_the_replay(f, x, changes):
    """Replay ``f`` at ``x`` after each of ``changes`` to what it reaches, twice each: every
    call is the traced one, and one program serves them all (recorded again after each, and
    replayed on the second call)."""
    replaying = mutad.grad(f, replay=True)
    for change in [lambda: None, *changes]:
        change()
        assert same(replaying(x), mutad.grad(f)(x))
        assert same(replayed(replaying, x), mutad.grad(f)(x))
    assert program_count(replaying) == 1


def program_in(source):
    """The namespace ``source`` defines ``f`` in, as a module of the user's."""
    namespace = {"np": np, "types": types, "scipy": scipy}
    exec(source, namespace)
    return namespace


def change_closure(namespace):
    namespace["set_k"](3.0)


def change_code(namespace):
    namespace["f"].__code__ = namespace["other"].__code__


# Programs whose walk of what f reaches a replay keeps (replay.Reached), each with a change,
# between calls, to what that walk read (functions, modules, namespaces)
KEPT_WALKS = {
    "a global number": ("scale = 2.0\ndef f(x):\n    return (scale * np.sin(x)).sum()",
                        lambda ns: ns.update(scale=3.0)),
    "a global function": ("def h(x):\n    return np.sin(x)\ndef f(x):\n    return h(x).sum()",
                          lambda ns: ns.update(h=np.cos)),
    "a builtin shadowed by a new global": ("def f(x):\n    return abs(np.sin(x)).sum()",
                                           lambda ns: ns.update(abs=np.square)),
    "a closure cell": ("def make():\n    k = 2.0\n    def f(x):\n        return (k * x).sum()\n"
                       "    def set_k(v):\n        nonlocal k\n        k = v\n    return f, set_k\n"
                       "f, set_k = make()", change_closure),
    "a default": ("def f(x, k=2.0):\n    return (k * x).sum()",
                  lambda ns: setattr(ns["f"], "__defaults__", (3.0,))),
    "a keyword default, in place": ("def f(x, *, k=2.0):\n    return (k * x).sum()",
                                    lambda ns: ns["f"].__kwdefaults__.update(k=3.0)),
    "the code": ("def f(x):\n    return np.sin(x).sum()\ndef other(x):\n    return np.cos(x).sum()",
                 change_code),
    "a function's attribute": ("def h(x):\n    return h.scale * x\nh.scale = 2.0\n"
                               "def f(x):\n    return h(x).sum()",
                               lambda ns: setattr(ns["h"], "scale", 3.0)),
    "a function's first attribute": ("def h(x):\n    return getattr(h, 'scale', 2.0) * x\n"
                                     "def f(x):\n    return h(x).sum()",
                                     lambda ns: setattr(ns["h"], "scale", 3.0)),
    "a function's attribute read by a name it builds": (
        "def h(x):\n    return getattr(h, 's' + str(0)) * x\nh.s0 = 2.0\n"
        "def f(x):\n    return h(x).sum()", lambda ns: setattr(ns["h"], "s0", 3.0)),
    "a function's attributes replaced": ("def h(x):\n    return h.scale * x\nh.scale = 2.0\n"
                                         "def f(x):\n    return h(x).sum()",
                                         lambda ns: setattr(ns["h"], "__dict__", {"scale": 3.0})),
    "a module's attribute": ("params = types.ModuleType('params')\nparams.dt = 2.0\n"
                             "def f(x):\n    return (params.dt * x).sum()",
                             lambda ns: setattr(ns["params"], "dt", 3.0)),
    "a global tuple": ("pair = (2.0, 1.0)\ndef f(x):\n    return (pair[0] * x + pair[1]).sum()",
                       lambda ns: ns.update(pair=(3.0, 1.0))),
    "a global array, in place": ("w = np.full(3, 2.0)\ndef f(x):\n    return (w * x).sum()",
                                 lambda ns: ns["w"].fill(3.0)),
    "what a module's __getattr__ reads": (
        "params = types.ModuleType('params')\nstep = 2.0\ndef lookup(name):\n"
        "    if name == 'dt':\n        return step\n    raise AttributeError(name)\n"
        "params.__getattr__ = lookup\ndef f(x):\n    return (params.dt * x).sum()",
        lambda ns: ns.update(step=3.0)),
    "a module's __getattr__ replaced": (
        "params = types.ModuleType('params')\ndef lookup(name):\n"
        "    if name == 'dt':\n        return 2.0\n    raise AttributeError(name)\n"
        "def other(name):\n    if name == 'dt':\n        return 3.0\n"
        "    raise AttributeError(name)\n"
        "params.__getattr__ = lookup\ndef f(x):\n    return (params.dt * x).sum()",
        lambda ns: setattr(ns["params"], "__getattr__", ns["other"])),
    "a record of a global array, in place": (
        "table = np.zeros(1, dtype=[('dt', 'f8')])\ntable['dt'] = 2.0\nrecord = table[0]\n"
        "def f(x):\n    return (record['dt'] * x).sum()",
        lambda ns: ns["table"].__setitem__("dt", 3.0)),
    "a global list, in place": ("ks = [2.0, 1.0]\ndef f(x):\n    return (ks[0] * x + ks[1]).sum()",
                                lambda ns: ns["ks"].__setitem__(0, 3.0)),
    "a global list, grown": ("ks = [2.0]\ndef f(x):\n    return (ks[-1] * x).sum()",
                             lambda ns: ns["ks"].append(3.0)),
    "a global dict, in place": ("p = {'k': 2.0}\ndef f(x):\n    return (p['k'] * x).sum()",
                                lambda ns: ns["p"].update(k=3.0)),
    "a global set, grown": ("s = {2.0}\ndef f(x):\n    return (max(s) * x).sum()",
                            lambda ns: ns["s"].add(3.0)),
    "a library's object, an attribute rebound": (
        "spline = scipy.interpolate.CubicSpline(np.arange(4.0), np.arange(4.0) ** 2)\n"
        "def f(x):\n    return spline(x).sum()",
        lambda ns: setattr(ns["spline"], "c", 1.5 * ns["spline"].c)),
}


@pytest.mark.parametrize("name", KEPT_WALKS)
def test_a_kept_walk_of_what_f_reaches_sees_each_change(name):
    source, change = KEPT_WALKS[name]
    namespace = program_in(source)
    f, x = namespace["f"], np.linspace(0.5, 1.5, 3)
    replaying = mutad.grad(f, replay=True)
    for _ in range(3):
        assert same(replaying(x), mutad.grad(f)(x))
    assert replays(replaying) == 2
    kept = replaying.reached
    assert kept is not None and kept.holds()  # the walk is not made again: what it read holds
    change(namespace)
    for _ in range(3):  # the kept walk's answer is the walk's own, after the change too
        assert [*map(id, replaying._reach()[0])] == [*map(id, mutad.engines.replay.reach(f)[0])]
        assert same(replaying(x), mutad.grad(f)(x))
    assert replays(replaying) >= 2  # (recorded again, then replayed)
    assert replaying.reached is not None and replaying.reached.holds()


# Names f reads in namespaces no program owns, which a program may set between calls: the
# builtins' (a name f's globals lack), and attributes of NumPy's modules and objects f reads
# through ``np.``: (source, owner, name); the test sets ``owner.name`` and removes it after
LIBRARY_NAMES = {
    "a name of the builtins": ("def f(x):\n    return (SCALE * np.sin(x)).sum()",
                               builtins, "SCALE"),
    "an attribute of a ufunc read through np": (
        "def f(x):\n    return (np.add.scale * np.sin(x)).sum()", np.add, "scale"),
    "an attribute of NumPy's module": (
        "def f(x):\n    return (np.mutad_scale * np.sin(x)).sum()", np, "mutad_scale"),
    "an attribute of a NumPy submodule": (
        "def f(x):\n    return (np.linalg.mutad_scale * np.sin(x)).sum()", np.linalg,
        "mutad_scale"),
}


@pytest.mark.parametrize("name", LIBRARY_NAMES)
def test_a_name_f_reads_in_a_library_namespace_is_guarded(name):
    source, owner, attribute = LIBRARY_NAMES[name]
    f, x = program_in(source)["f"], np.linspace(0.5, 1.5, 3)
    setattr(owner, attribute, 2.0)
    try:
        replaying = mutad.value_and_grad(f, replay=True)
        for value in (2.0, 2.0, 3.0, 3.0, np.array([1.0, 2.0, 3.0]), "in place", 2.0):
            if isinstance(value, str):
                getattr(owner, attribute)[0] = 5.0
            else:
                setattr(owner, attribute, value)
            for k in range(2):  # (the second replays)
                got = replayed(replaying, x) if k else replaying(x)
                expected = mutad.value_and_grad(f)(x)
                assert same(got, expected)
                assert same(got[0], f(x))  # NumPy's value with the value set now
        assert replaying.reached is not None and replaying.reached.holds()
    finally:
        delattr(owner, attribute)


def test_a_walk_through_np_keeps_a_ufunc_whose_signature_inspect_cached():
    import inspect
    inspect.signature(np.cbrt)  # kept in the ufunc's __dict__: the walk takes nothing of it
    f = program_in("def f(x):\n    return np.cbrt(x).sum()")["f"]
    replaying, x = mutad.grad(f, replay=True), np.linspace(0.5, 1.5, 3)
    for _ in range(3):
        assert same(replaying(x), mutad.grad(f)(x))
    assert replays(replaying) == 2 and replaying.reached is not None and replaying.reached.holds()


def test_an_attribute_set_on_a_ufunc_f_reaches_is_seen():
    namespace = program_in("identity = np.frompyfunc(lambda a: a, 1, 1)\n"
                           "def f(x):\n    identity\n    return (2.0 * x).sum()")
    f, x = namespace["f"], np.ones(3)
    replaying = mutad.grad(f, replay=True)
    assert same(replaying(x), np.full(3, 2.0)) and same(replayed(replaying, x), np.full(3, 2.0))
    assert replaying.reached is not None and replaying.reached.holds()
    namespace["identity"].scale = 3.0  # a ufunc's attributes: walked, as a library object's
    assert [*map(id, replaying._reach()[0])] == [*map(id, mutad.engines.replay.reach(f)[0])]
    assert same(replaying(x), np.full(3, 2.0)) and replaying.reached.holds()
    namespace["identity"].scale = [3.0]  # one the walk reads more of (its items): walked
    assert same(replaying(x), np.full(3, 2.0)) and replaying.reached is None


def test_a_walk_that_meets_what_it_cannot_read_again_is_made_on_every_call():
    stepper = Stepper()

    def f(x):
        return stepper.step(x).sum()

    x = np.ones(3)
    replaying = mutad.grad(f, replay=True)
    assert same(replaying(x), np.ones(3)) and same(replayed(replaying, x), np.ones(3))
    assert replaying.reached is None  # an object: its attributes, by the walk on each call
    stepper.dt = 2.0
    assert same(replaying(x), np.full(3, 2.0))


class Physics:
    scale = 1.0                           # a class attribute f reads through the class

    @staticmethod
    def shift():
        return OFFSET[0]                  # a global a static method reads


class Coefficients:
    @property
    def coef(self):
        return self._coef[0]              # a list a property reads


class Stepper(Coefficients):
    def __init__(self):
        self._coef = [1.0]
        self.dt = 1.0
        self.damping = 1.0                # read only by a name in a string

    def step(self, x):                    # inherited by the objects of a subclass
        return x * self.dt


class Tuned(Stepper):
    pass


OFFSET = [0.0]
SETTINGS = types.SimpleNamespace(gain=1.0)
TABLE = collections.OrderedDict(gain=1.0)
NAMES = ("damp" + "ing",)
OBSERVATIONS = list(range(mutad.engines.replay.REACHED_ITEMS + 1))


def test_what_the_function_reaches_through_classes_properties_and_containers_is_guarded():
    # each change between calls must reach the next call's gradient, as tracing reads it
    tuned = Tuned()

    def f(x):
        y = tuned.step(x) * Physics.scale + Physics.shift() + tuned.coef
        y = y * SETTINGS.gain * TABLE["gain"]
        for name in NAMES:                # an attribute read by a name in a string
            y = y + x * getattr(tuned, name)
        return (y * x).sum()

    x = np.array([1.0, 2.0])
    changes = [lambda: setattr(Physics, "scale", 2.0),
               lambda: OFFSET.__setitem__(0, 3.0),
               lambda: tuned._coef.__setitem__(0, 5.0),
               lambda: setattr(tuned, "dt", 0.5),
               lambda: setattr(tuned, "damping", 4.0),
               lambda: setattr(SETTINGS, "gain", 3.0),
               lambda: TABLE.__setitem__("gain", 0.25)]
    try:
        each_change_reaches_the_replay(f, x, changes)
    finally:
        Physics.scale, OFFSET[0] = 1.0, 0.0
        SETTINGS.gain, TABLE["gain"] = 1.0, 1.0

    def g(x):                             # a container too long to compare on every call
        return (x * OBSERVATIONS[-1]).sum()

    replaying = mutad.grad(g, replay=True)
    assert same(replaying(x), np.full(2, float(OBSERVATIONS[-1])))
    OBSERVATIONS.append(7)
    try:
        assert same(replaying(x), np.full(2, 7.0))
    finally:
        OBSERVATIONS.pop()
    assert "10,000" in replaying.reasons["what f reaches"]


MISSING = np.ma.masked
SCALES = np.ma.masked_array([1.0, 2.0], mask=[False, True])


def test_arrays_of_ndarray_subclasses_that_f_reaches():
    """np.ma.masked (read for its mask) and a masked array f reads are compared by their
    memory: the second call raised np.ma's AttributeError (np.ma.masked.tobytes), and a change
    of a masked array's data reaches the replay. (``y is not MISSING`` would leave f traced:
    ``test_replay_hunt10``.)"""
    def f(x):
        y = (x * SCALES.data).sum()
        return y if MISSING.mask else 0.0

    try:
        each_change_reaches_the_replay(f, np.array([1.0, 3.0]),
                                       [lambda: SCALES.data.__setitem__(0, 4.0)])
    finally:
        SCALES.data[0] = 1.0


class Config:
    """Settings whose attributes live in a dict the object holds (read by ``__getattr__``)."""

    def __init__(self, **values):
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self._values[name] = value


CONFIG = Config(lam=1.0)
HISTORY = []
JITTER = random.Random(0)
LAPLACIAN = scipy.sparse.diags([2.0, -1.0, -1.0], [0, 1, -1], shape=(2, 2), format="csr")
POLYNOMIAL = np.poly1d([1.0, 2.0])


def test_what_attributes_lists_python_generators_and_library_objects_reach_is_guarded():
    """Each was replayed with the recorded call's numbers: a function's own attribute, an
    attribute served by ``__getattr__`` from a dict, a list f appends to and reads (the same
    float appended again), a ``random.Random`` f draws from, the arrays of a module-level
    sparse matrix or poly1d changed in place."""
    def f(x):
        HISTORY.append(0.0)
        y = x * f.scale * CONFIG.lam * len(HISTORY) + POLYNOMIAL(x) + LAPLACIAN @ x
        return (y * x).sum()

    f.scale = 1.0
    x = np.array([1.0, 2.0])
    changes = [lambda: setattr(f, "scale", 3.0), lambda: setattr(CONFIG, "lam", 10.0),
               lambda: LAPLACIAN.data.__setitem__(0, 5.0),
               lambda: POLYNOMIAL.coeffs.__setitem__(0, 4.0)]
    try:
        replaying = mutad.grad(f, replay=True)
        for change in [lambda: None, *changes]:
            change()
            for _ in range(2):  # each call appends: the traced call's list is one longer
                got = replaying(x)
                HISTORY.pop()
                assert same(got, mutad.grad(f)(x))
    finally:
        CONFIG.lam = 1.0
        HISTORY.clear()
        LAPLACIAN.data[0] = 2.0
        POLYNOMIAL.coeffs[0] = 1.0

    def g(x):
        return (x * JITTER.gauss(0.0, 1.0)).sum()

    replaying = mutad.grad(g, replay=True)
    state = JITTER.getstate()
    got = [replaying(x) for _ in range(3)]
    JITTER.setstate(state)
    assert all(same(a, mutad.grad(g)(x)) for a in got)


WEIGHTS = types.SimpleNamespace(w0=1.0, w1=2.0, w2=3.0)


def test_attributes_read_by_names_built_at_run_time_are_guarded():
    """``getattr(p, f"w{i}")`` and ``vars(p)`` read attributes no code names: the replay
    guarded only those named, so a changed or new one gave the recorded call's gradient."""
    def f(x):
        y = sum(getattr(WEIGHTS, f"w{i}") * x[i] ** 2 for i in range(3))
        return y + sum(vars(WEIGHTS).values()) * x.sum()

    x = np.array([1.0, 2.0, 3.0])
    changes = [lambda: setattr(WEIGHTS, "w1", 10.0), lambda: setattr(WEIGHTS, "w9", 4.0)]
    try:
        each_change_reaches_the_replay(f, x, changes)
    finally:
        WEIGHTS.w1 = 2.0
        del WEIGHTS.w9


def test_a_function_reaching_too_many_objects_is_traced():
    """The walk of what f reaches is bounded: past ``REACHED_OBJECTS`` objects it stops and f
    is traced on every call (a program reaching a library's whole object graph by built names
    walked it on every call)."""
    count = mutad.engines.replay.REACHED_ITEMS
    tables = [[float(i * count + j) for j in range(count)]
              for i in range(mutad.engines.replay.REACHED_OBJECTS // count + 1)]

    def f(x):
        return (x * tables[-1][-1]).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([1.0, 2.0])
    assert same(replaying(x), mutad.grad(f)(x))
    tables[-1][-1] = 3.0
    assert same(replaying(x), np.full(2, 3.0))
    assert "objects" in replaying.reasons["what f reaches"]


class Gains:
    w1 = 1.0


READ = getattr  # a function reading attributes by name, under another name


def test_attributes_of_classes_and_modules_read_by_built_names_are_guarded():
    """The same through a class's attributes, ``object.__getattribute__`` and an alias of
    ``getattr``: only instances' attributes were held in full."""
    def f(x):
        y = getattr(Gains, "w" + str(1)) + READ(WEIGHTS, "w" + "0")
        return (y + object.__getattribute__(WEIGHTS, "w2"[:2])) * (x * x).sum()

    x = np.array([1.0, 2.0, 3.0])
    changes = [lambda: setattr(Gains, "w1", 5.0), lambda: setattr(WEIGHTS, "w0", 7.0),
               lambda: setattr(WEIGHTS, "w2", 0.5)]
    try:
        each_change_reaches_the_replay(f, x, changes)
    finally:
        Gains.w1 = 1.0
        WEIGHTS.w0, WEIGHTS.w2 = 1.0, 3.0


class Counter:
    """An iterator by ``__next__`` alone (no ``__iter__``)."""

    def __init__(self):
        self.i = 1.0

    def __next__(self):
        self.i += 1.0
        return self.i


USER_PROGRAM = """
import operator, types

READ_W0 = operator.attrgetter("w0")
WEIGHTS = types.SimpleNamespace(w0=1.0)
W_GLOBAL = 1.0


class Doubled:  # a descriptor: what ``t.d`` reads comes from ``__get__``
    def __get__(self, obj, kind=None):
        return 2.0 * obj.v


class Held:
    d = Doubled()

    def __init__(self):
        self.v = 1.0

    def __float__(self):
        return self.v


HELD = Held()


def f(x):
    y = READ_W0(WEIGHTS) + globals()["W_" + "GLOBAL".lower().upper()]
    return (y + HELD.d + float(HELD)) * (x * x).sum()
"""


def test_attributes_read_through_other_routes_are_guarded():
    """An attrgetter held in a global, globals()[name], a descriptor's __get__ and
    __float__ gave the recorded call's numbers; a function reading modules by built names
    (sys.modules[name]) is traced, as is one taking from an object with __next__."""
    # the user's program in a module of its own (globals() holds it whole)
    program = types.ModuleType("user_program")
    exec(compile(USER_PROGRAM, "user_program.py", "exec"), program.__dict__)
    x = np.array([1.0, 2.0, 3.0])
    changes = [lambda: setattr(program.WEIGHTS, "w0", 7.0),
               lambda: setattr(program, "W_GLOBAL", 4.0), lambda: setattr(program.HELD, "v", 3.0)]
    each_change_reaches_the_replay(program.f, x, changes)

    counter = Counter()
    replaying = mutad.grad(lambda x: (x * next(counter)).sum(), replay=True)
    assert [replaying(x)[0] for _ in range(3)] == [2.0, 3.0, 4.0]
    replaying = mutad.grad(lambda x: (x * sys.modules["".join(["test_", "replay"])]
                                      .OFFSET[0]).sum(), replay=True)
    replaying(x)
    assert "modules" in replaying.reasons["what f reaches"]


def test_the_globals_of_an_installed_package_are_guarded(tmp_path):
    """The standard library's folder often holds the installed packages (site-packages): a
    package's function reading its module's globals was taken for the standard library's,
    whose globals the walk does not go into, and its replay gave the recorded numbers."""
    import os

    path = os.path.join(os.path.dirname(os.__file__), "site-packages", "userpkg", "__init__.py")
    module = types.ModuleType("userpkg")
    module.__file__ = path
    exec(compile("SCALE = 2.0\ndef scaled(x):\n    return x * SCALE\n", path, "exec"),
         module.__dict__)

    def f(x):
        return (module.scaled(x) * x).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([1.0, 2.0])
    replaying(x)
    module.SCALE = 3.0
    assert same(replaying(x), mutad.grad(f)(x)) and same(replayed(replaying, x), mutad.grad(f)(x))


def _counting():
    k = 0
    while True:
        k += 1
        yield float(k)


def test_a_function_taking_from_an_iterator_is_traced():
    """What an iterator gives next is its state, which a replay cannot compare: every call
    took the recorded call's item (a minibatch loop, a learning-rate schedule)."""
    batches = iter([np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])])
    for source in (batches, itertools.count(1.0), _counting()):
        def f(w, source=source):
            return ((w * next(source)) ** 2).sum()

        replaying = mutad.grad(f, replay=True)
        w = np.ones(2)
        got = [replaying(w) for _ in range(3)]
        assert not same(got[0], got[1]) and not same(got[1], got[2])
        assert "iterator" in replaying.reasons["what f reaches"]


KEYS = {"a": 1.0}
BYTES = bytearray(b"\x01")
PARAMETERS = {"w": 1.0}
GET = PARAMETERS.get
CHAINED = collections.ChainMap({"w": 1.0})
OBJECTS = np.array([[1.0], None], dtype=object)


def test_what_keys_bytes_bound_methods_mappings_and_object_arrays_reach_is_guarded():
    def f(x):
        y = x * (2.0 if "a" in KEYS else 3.0)
        y = y * BYTES[0] * GET("w") * CHAINED["w"] * OBJECTS[0][0]
        return (y * x).sum()

    x = np.array([1.0, 2.0])
    changes = [lambda: (KEYS.pop("a"), KEYS.__setitem__("b", 1.0)),
               lambda: BYTES.__setitem__(0, 3), lambda: PARAMETERS.__setitem__("w", 5.0),
               lambda: CHAINED.maps[0].__setitem__("w", 0.25),
               lambda: OBJECTS[0].__setitem__(0, 7.0)]
    try:
        each_change_reaches_the_replay(f, x, changes)
    finally:
        KEYS.clear()
        KEYS["a"] = 1.0
        BYTES[0] = 1
        PARAMETERS["w"] = CHAINED.maps[0]["w"] = 1.0
        OBJECTS[0][0] = 1.0


def test_a_generator_seeded_from_fresh_entropy_in_the_function_is_traced():
    def f(x):
        noise = np.random.default_rng().standard_normal(x.shape)
        return ((x + noise) ** 2).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.zeros(3)
    gradients = {replaying(x).tobytes() for _ in range(4)}
    assert len(gradients) == 4
    (reason,) = replaying.reasons.values()
    assert "fresh entropy" in reason


def test_comparisons_indices_and_loop_trip_counts_are_guarded():
    def f(x, tol):
        y = x * 1.0
        steps = 0
        while np.abs(y).max() > tol:      # a loop whose trip count the values decide
            y = y * 0.5
            steps += 1
        k = int(np.argmax(y))             # an index computed from traced values
        if (y > 0).any():                 # a comparison Python decides on
            return y[k] * steps + (y * y).sum()
        return -y.sum()

    calls = [(np.array([1.0, -2.0, 0.5]), 0.1), (np.array([1.0, -2.0, 0.5]), 0.1),
             (np.array([4.0, 1.0, 3.0]), 0.1), (np.array([-1.0, -2.0, -0.5]), 0.1),
             (np.array([-1.0, -2.0, -0.5]), 0.1)]
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_a_shape_that_depends_on_values_is_guarded():
    def f(x):
        x[x > -0.5] *= 2.0                # a gather, then a scatter, of a data-dependent size
        y = x[np.flatnonzero(x < 0.5)]
        return (x * x).sum() + (y * y).sum()

    rng = np.random.default_rng(5)
    draws = [rng.uniform(-1, 1, 8) for _ in range(3)]  # the counts differ from draw to draw
    calls = [(x.copy(),) for x in draws for _ in range(2)]  # a failed guard, then a replay
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_integer_and_float_conversions_of_computed_values_are_guarded():
    def f(x):
        n = np.zeros(1)
        n[0] = np.floor(np.abs(x).sum())  # a constant whose value depends on x
        total = x.sum()
        for _ in range(int(n[0])):        # Python reads it
            total = total * 0.5
        return total * float(n[0] + 1.0)

    calls = [(np.array([0.5, 1.0]),), (np.array([0.7, 0.9]),), (np.array([2.0, 1.5]),),
             (np.array([2.0, 1.5]),)]
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_decisions_on_a_stop_gradient_are_guarded():
    """``stop_gradient`` gives a constant holding the traced values: a replay makes it again
    from the replayed values, and guards what Python decides on it."""
    def f(x):
        s = mutad.stop_gradient(x)
        y = (x * x).sum() * float(s[0])   # a conversion
        if s[1] > 0:                      # a decision on a comparison of constants
            y = y + x[1]
        return y + (np.exp(s) * x).sum()

    calls = [(np.array([1.0, 2.0]),), (np.array([3.0, 2.0]),), (np.array([3.0, -2.0]),),
             (np.array([3.0, -2.0]),)]
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_a_dtype_a_function_takes_from_the_values_is_guarded():
    """eigvals gives float64 eigenvalues where they are real, complex128 where they are not:
    the program recorded on real ones is not replayed on complex ones (it was, and computed
    the gradient of another program)."""
    def f(m):
        return np.sum(np.abs(np.linalg.eigvals(m)))

    real, rotation = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([[1.0, -2.0], [2.0, 1.0]])
    calls = [(real * scale,) for scale in (1.0, 1.5)] + [(rotation * scale,)
                                                           for scale in (1.0, 0.5)]
    replaying = replayed_like_traced(f, calls + calls[:1] + calls[2:3])
    assert program_count(replaying) == 1 and not replaying.reasons  # (recorded again)


def test_a_stop_gradient_of_a_view_is_made_again_in_its_layout():
    """stop_gradient copies in C order (ndarray.copy's); a replay made it in the view's own
    order (np.copy's), and a sum of it, whose rounding follows the layout, had other bits."""
    def f(x):
        v = np.moveaxis(x, 2, 0)
        return mutad.stop_gradient(v).sum() * v.sum()

    rng = np.random.default_rng(1)
    calls = [(rng.standard_normal((2, 2, 3)) * 10.0 ** rng.integers(-8, 8, (2, 2, 3)),)
             for _ in range(12)]
    replaying = replayed_like_traced(f, calls, traced_once=True)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_arrays_f_makes_and_scipy_takes_as_plain_arrays_are_replayed_and_guarded():
    """SciPy's code, which no step redoes, takes an array f made as a plain array (a spline's
    knots): a replay runs the program where that array holds the recorded values, as one made
    from constants always does; one made from the arguments is guarded."""
    import scipy.interpolate

    def from_constants(x):
        knots = np.linspace(0.0, 1.0, x.size)
        return (scipy.interpolate.CubicSpline(knots, x)(np.linspace(0.0, 1.0, 7)) ** 2).sum()

    def from_the_arguments(x):
        knots = np.cumsum(np.exp(mutad.stop_gradient(x)))
        at = 0.5 * (knots[1:] + knots[:-1])
        return (scipy.interpolate.interp1d(knots, x * x)(at) * at).sum()

    def plain_code_on_the_arguments(x):
        weights = np.cumsum(np.exp(mutad.stop_gradient(x)))  # no decision of Python's on them
        weights = np.cos(weights.__array__())  # plain code: the program holds its result
        return (x * weights).sum()

    rng = np.random.default_rng(7)
    draws = [rng.uniform(-1.0, 1.0, 5) for _ in range(3)]
    replaying = replayed_like_traced(from_constants, [(x.copy(),) for x in draws],
                                     traced_once=True)
    assert program_count(replaying) == 1 and not replaying.reasons
    # the same values twice (a replay), then others (the guard fails: traced again)
    calls = [(x.copy(),) for x in draws for _ in range(2)]
    for f in (from_the_arguments, plain_code_on_the_arguments):
        replaying = replayed_like_traced(f, calls)
        assert program_count(replaying) == 1 and not replaying.reasons


def test_an_array_written_after_its_conversion_to_a_plain_array_is_traced():
    """The plain array a conversion gives is the recorded call's, which a program holds as it
    was converted: an array f writes into afterwards (here the same zeros while x is finite,
    NaN where it is not) is not replayed; nor one written through the plain array."""
    def written_after(x):
        k = np.zeros(3)
        plain = getattr(k, "__array__")()        # as code without a rule converts it (not
        # k.__array__() in f's code, which is k itself, as NumPy's)
        k[:] = mutad.stop_gradient(x) * 0.0
        return (x * np.cos(plain)).sum()

    def written_through(x):
        k = np.linspace(0.0, 1.0, 3)
        plain = getattr(k, "__array__")()
        plain[0] = 2.0                           # plain code, which no step redoes
        return (x * k).sum()

    finite, infinite = np.array([1.0, 2.0, 3.0]), np.array([1.0, np.inf, 3.0])
    with np.errstate(invalid="ignore"):
        replaying = replayed_like_traced(written_after, [(finite.copy(),), (finite.copy(),),
                                                         (infinite.copy(),)], replayed=False)
    assert any("written after" in why for why in replaying.reasons.values())
    replaying = replayed_like_traced(written_through, [(finite.copy(),)] * 3,
                                     replayed=False)
    assert any("written after" in why for why in replaying.reasons.values())


def test_scatters_ufunc_at_copyto_and_in_place_rules_are_replayed():
    def f(x, idx):
        y = np.zeros(4)
        np.add.at(y, idx, x)              # repeated indices
        y[[3, 1]] = x[:2] * 2.0           # a scatter through an index array
        z = np.empty(4)
        np.copyto(z, np.sin(y))
        a = np.outer(x[:3], x[:3]) + 3.0 * np.eye(3)
        mutad.linalg.cholesky_(a)         # an in-place rule
        return (y * z).sum() + a.sum()

    rng = np.random.default_rng(3)
    calls = [(rng.random(4), np.array([0, 0, 2, 1])) for _ in range(3)]
    calls.append((rng.random(4), np.array([1, 2, 2, 2])))  # other indices: a new signature
    replaying = replayed_like_traced(f, calls, argnums=0)
    assert program_count(replaying) == 2 and not replaying.reasons


def test_functions_and_matmul_writing_through_out_are_replayed():
    a = np.random.default_rng(4).standard_normal((3, 3))

    def f(x):
        y = np.empty((2, 3))
        np.dot(a, x, out=y[0])            # a function's out=, a view
        np.matmul(a, y[0], out=y[1])      # a generalized ufunc's out=
        np.clip(y, -0.5, 0.5, out=y)      # into itself
        np.cumsum(x, out=x)               # into the argument, which comes back as it was
        return (y * y).sum() + (x * x).sum()

    rng = np.random.default_rng(5)
    replaying = replayed_like_traced(f, [(rng.standard_normal(3),) for _ in range(4)],
                                     traced_once=True)
    assert not replaying.reasons


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_matmul_in_place_by_the_operator_is_replayed(argnums):
    # A @= B reaches the recording with no keywords at all (None), np.matmul(..., out=A) with
    # out among them: both are computed, then assigned
    def f(A, B):
        A @= B
        C = A * 1.0
        C @= A.T                          # into an array allocated in the function
        return (A ** 2).sum() + (C * B).sum()

    rng = np.random.default_rng(6)
    calls = [(np.eye(3) + rng.standard_normal((3, 3)), rng.standard_normal((3, 3)))
             for _ in range(4)]
    replaying = replayed_like_traced(f, calls, argnums=argnums, traced_once=True)
    assert program_count(replaying) == 1 and not replaying.reasons
    mutad.check_grads(f, *calls[0])
    mutad.check_jvp(f, *calls[0])


def test_an_integer_array_a_rule_computes_is_replayed_and_guarded():
    # lu_factor's pivots: a plain array computed from the traced operand, read by lu_solve
    # and by Python; they change with the values, and the program reads each call's own
    import scipy.linalg

    a = np.random.default_rng(1).standard_normal((4, 4))

    def f(x, first=False):
        lu, piv = scipy.linalg.lu_factor(a + np.diag(x))
        y = scipy.linalg.lu_solve((lu, piv), x * 2.0)
        return (y ** 2).sum() + (1.0 if piv[0 if first else -1] == 0 else 0.0)

    rng = np.random.default_rng(2)
    calls = [(rng.standard_normal(4) * scale,) for scale in (0.1, 10.0, 0.1, 10.0, 0.1)]
    pivots = [tuple(scipy.linalg.lu_factor(a + np.diag(x))[1]) for (x,) in calls]
    assert len(set(pivots)) > 1 and len({p[0] for p in pivots}) > 1
    # the calls pivot differently, and all replay the first's program
    replayed_like_traced(f, calls, traced_once=True)
    # Python's decision on the pivots is a guard: a call deciding otherwise records again
    replaying = replayed_like_traced(functools.partial(f, first=True), calls[:2] + calls[3:4])
    assert program_count(replaying) == 1 and not replaying.reasons


def _plus_one(x, k):
    k += 1
    return (x * k).sum()


def _times_three_between_reads(x, k):
    y = (x + k).sum()  # read before the write, by a step that keeps no copy of k
    k *= 3
    return y + (x + k).sum()


def _one_element(x, k):
    k[0] = 2
    return (x * k).sum()


def _sorted_in_place(x, k):
    k.sort()
    return (x[k] * x[::-1]).sum()


def _through_a_view(x, k):
    k[1:] += k[:-1]
    return (x * k[::-1]).sum()


PLAIN_ARGUMENT_WRITES = {"k += 1": (_plus_one, np.array([1, 2, 0])),
                         "k *= 3 between reads": (_times_three_between_reads, np.array([1, 2, 0])),
                         "k[0] = 2": (_one_element, np.array([1, 2, 0])),
                         "k.sort()": (_sorted_in_place, np.array([2, 0, 1])),
                         "through views": (_through_a_view, np.array([1, 2, 0])),
                         "a boolean mask": (_one_element, np.array([False, True, False]))}


@pytest.mark.parametrize("f, k", PLAIN_ARGUMENT_WRITES.values(), ids=PLAIN_ARGUMENT_WRITES)
def test_writes_into_an_argument_the_call_does_not_trace_are_seen_by_the_replay(f, k):
    """Regression: f's writes into an integer or boolean argument (not traced: plain NumPy
    code no step redoes) were not seen by the replay, whose steps read the caller's array as
    it was given. Each step reads what the argument held when it ran; the caller's array
    comes back as it was, in a replay as in tracing."""
    rng = np.random.default_rng(3)
    calls = [(rng.random(3), k) for _ in range(4)]
    replaying = replayed_like_traced(f, calls, traced_once=True)
    given = k.tobytes()
    for x, _ in calls:
        value, _ = replaying(x, k)
        assert value == f(x.copy(), k.copy()) and k.tobytes() == given
        assert mutad.value_and_grad(f)(x, k)[0] == value and k.tobytes() == given


def test_a_view_of_an_argument_the_call_does_not_trace_is_read_as_the_call_read_it():
    """Regression: a step reading a view of an integer argument held the view, so a replay
    read the memory of the recording call's array, whatever its caller wrote into it since."""
    def f(x, k):
        return (x * k[::-1]).sum()

    x, k = np.array([1.0, 2.0]), np.array([1, 2])
    replaying = mutad.value_and_grad(f, replay=True)
    replaying(x, k)
    again = k.copy()
    k[:] = [5, 6]  # the recorded call's array, changed by its caller
    for _ in range(2):
        assert same(replaying(x, again), mutad.value_and_grad(f)(x, again))
    assert program_count(replaying) == 1 and replays(replaying) >= 1


def _closing_over(dense_output):
    """A function whose solve_ivp calls fun, made by the call, closing over p (and k, an
    argument not differentiated)."""
    import scipy.integrate

    def f(y0, p, k):
        def rhs(t, y):
            return np.array([y[1], -p[1] * y[0] - p[0] * y[1] * k[0]])

        times = np.linspace(0.0, 1.0, 3)
        sol = scipy.integrate.solve_ivp(rhs, (0.0, 1.0), y0, t_eval=times, rtol=1e-8,
                                        atol=1e-10, dense_output=dense_output)
        free = scipy.integrate.solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.ones(1),
                                         t_eval=times)
        return sol.y[0, -1] ** 2 + sol.y[1, -1] * free.y[0, -1]

    return f


def test_a_rule_given_a_closure_over_the_calls_arrays_is_traced():
    # solve_ivp's rule with dense output keeps the problem's solve, which sol.sol reads:
    # replayed, it would read the recorded call's p and k
    calls = [(np.array([1.0, 0.0]) * s, np.array([0.3, 1.5]) * s, np.array([s]))
             for s in (1.0, 1.01, 0.9)]
    replaying = replayed_like_traced(_closing_over(True), calls, argnums=(0, 1),
                                     replayed=False)
    (reason,) = replaying.reasons.values()
    assert "closure" in reason


def test_a_solve_binds_the_arrays_its_function_closes_over_to_the_calls():
    # Without dense output, the problem binds the arrays fun closes over (p, and k, an
    # argument not differentiated) to each call's, and a replay solves again: a call with
    # another k replays, reading its own
    calls = [(np.array([1.0, 0.0]), np.array([0.3, 1.5]), np.array([s]))
             for s in (1.0, 1.0, 1.0001, 1.0001)]
    replaying = replayed_like_traced(_closing_over(False), calls, argnums=(0, 1))
    assert program_count(replaying) == 1 and replays(replaying) == 3


def test_values_the_program_computes_without_a_gradient_are_followed_where_they_are_used():
    # each from an independent run of real programs, wrong or raising before: a named tuple of
    # a function of a constant, a slice bound, a view's axis, a dict key and a shape
    weights = np.arange(6.0).reshape(2, 3)
    table = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}

    def f(x):
        c = mutad.stop_gradient(x[:4]).reshape(2, 2) + np.eye(2) * 3.0
        k = np.count_nonzero(x > 0)
        y = np.linalg.slogdet(c).logabsdet * x[0]            # SlogdetResult
        y = y + (x[:k] ** 2).sum()                           # x[:k]
        y = y + (np.flip(x.reshape(2, 3), k % 2) * weights).sum()  # a view along axis k % 2
        y = y + x[1] * table[int(np.argmax(x[:4]))] * table[np.argmax(x[:4])]
        return y + np.resize(x, k + 1).sum()

    patterns = ([1, -1, -1, -1, -1, -1], [1, 2, -1, 3, -1, -1], [1, 2, 3, -1, -1, -1],
                [-1, 2, 3, 4, 5, 1])
    # each pattern twice, scaled (the same decisions: replayed), then the next (recorded)
    calls = [(np.array(v, dtype=float) * scale,) for v in patterns for scale in (1.0, 1.5)]
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_integers_the_program_computes_as_scipys_indices_and_settings_are_guarded():
    # sparse indices, map_coordinates' coordinates, a filter's sigma from the data: the
    # recording call raised, then such a call was traced; the program holds them as recorded,
    # guarded: a call with others records again, one with the same replays
    import scipy.ndimage
    import scipy.sparse

    def f(v):
        r = np.nonzero(v > 0)[0]
        m = scipy.sparse.csr_matrix((v[r], (r, r)), shape=(4, 4))
        coordinates = np.argsort(v)[None, :].astype(float)
        y = scipy.ndimage.map_coordinates(v, coordinates, order=1)
        z = scipy.ndimage.gaussian_filter1d(v, np.count_nonzero(v > 0) + 1.0)
        return (m @ v).sum() + (y * v).sum() + (z * v).sum()

    calls = [(np.array(x),) for x in ([1.0, -2.0, 3.0, 0.5], [2.0, 1.0, -3.0, 0.5],
                                      [2.2, 1.1, -3.3, 0.55])]
    replaying = replayed_like_traced(f, calls)
    assert program_count(replaying) == 1 and not replaying.reasons


@pytest.mark.parametrize("dense_output", [True, False])
def test_a_solve_that_keeps_its_forward_solution_is_traced(dense_output):
    # solve_ivp's rule kept its call's forward solve: replayed, its reverse pass raised. With
    # dense output (sol.sol reads the solve) it still does: traced; without, a replay solves
    # again (the same steps on the same y0, other steps recorded again)
    import scipy.integrate

    def f(y0):
        sol = scipy.integrate.solve_ivp(lambda t, y: -0.5 * y ** 3, (0.0, 1.0), y0,
                                        rtol=1e-8, atol=1e-10, dense_output=dense_output)
        return (sol.y[:, -1] ** 2).sum()

    calls = [(np.array([1.0, 0.8]) * s,) for s in (1.0, 1.0, 1.1, 1.1, 0.9)]
    replaying = replayed_like_traced(f, calls, replayed=not dense_output)
    if dense_output:
        (reason,) = replaying.reasons.values()
        assert "solve_ivp" in reason
    else:
        assert replays(replaying) == 2


def test_what_a_replay_cannot_follow_is_traced_on_every_call_with_a_reason():
    def f(x):
        inner = mutad.grad(lambda y: (x * y * y).sum())(x)  # nested differentiation
        return (inner * x).sum()

    replaying = replayed_like_traced(f, [(np.arange(3.0),), (np.ones(3),), (np.ones(3),)],
                                     replayed=False)
    assert program_count(replaying) == 0
    (reason,) = replaying.reasons.values()
    assert "nested" in reason


def test_a_decision_on_a_python_number_the_program_computed_is_replayed():
    """round() of Python arithmetic on x[0].item() (a Python float to the program) decides a
    loop's length: the guard read the replay's Python float as an array (AttributeError), so
    every replay failed and traced."""
    def f(x):
        n = int(round(abs(x[0].item()) * 3)) + 1
        total = 0.0
        for j in range(n):
            total = total + x[j % len(x)] * j
        return total

    x = np.array([0.9, -0.4, 1.3])
    replayed_like_traced(f, [(x,), (x * 1.01,), (x * 0.99,)], traced_once=True)


def test_an_operation_run_as_the_engine_runs_it_that_makes_a_new_array_is_replayed():
    """np.bincount of traced weights into bins the program computes (a particle deposit) is
    one step the replay runs as the engine does, whose result is a new array: its slot was
    bound by a step of its own, dropped, and no step filled it, so every replay failed on it
    (then it was refused, traced on every call). The step's new array now takes the
    recorded one's key, which the later steps' records name, and the bins that move between
    calls are counted again, replayed as traced."""
    def deposit(x):
        bins = np.floor(x * 8.0).astype(int) % 8
        return (np.bincount(bins, weights=x * x, minlength=8) * np.arange(1.0, 9.0)).sum()

    x = np.linspace(0.05, 0.95, 7).copy()  # (an array of its own, as x * 1.01 is)
    assert len({tuple(np.floor(a * 8.0) % 8) for a in (x, x * 1.01, x * 0.9)}) == 3
    replaying = replayed_like_traced(deposit, [(x,), (x * 1.01,), (x * 0.9,), (x,)],
                                     traced_once=True)
    (program,) = replaying.programs.values()
    assert any(type(step) is replay.Reenter and step.made for step in all_steps(program))


def test_the_recording_call_of_a_refused_program_is_the_traced_call():
    """A recording that is refused lets go of the arrays it held at once: the traced call then
    reads or recomputes the same temporaries as without recording, to the same bits."""
    def f(x):  # W5's large temporaries, recomputed by tracing, then what is refused
        with np.errstate(over="raise"):
            return big_elementwise(x)

    x = np.linspace(-3.0, 3.0, 1000)
    replaying = mutad.grad(f, replay=True)
    recorded, again = replaying(x), replaying(x)
    assert "np.errstate" in next(iter(replaying.reasons.values()))
    traced = mutad.grad(f)(x)
    assert same(recorded, traced) and same(again, traced)


def test_a_replayed_gradient_differentiated_again_is_traced_there():
    def f(x):
        y = x * 1.0
        y *= np.sin(x)
        return (y * y).sum()

    replaying = mutad.grad(f, replay=True)
    x, v = np.linspace(0.1, 1.0, 4), np.linspace(1.0, -1.0, 4)
    replaying(x)                          # recorded; inside jvp and hvp it is traced
    _, tangent = mutad.jvp(replaying, (x,), (v,))
    assert same(tangent, mutad.hvp(f, (x,), (v,)))
    assert np.allclose(mutad.jacobian(replaying, x), mutad.hessian(f, x), rtol=1e-12)
    assert same(replaying(x), mutad.grad(f)(x))


def test_threads_share_a_replayed_function():
    import concurrent.futures

    def f(x):
        y = np.zeros_like(x)
        y[1:] = x[:-1] * x[1:]
        x *= 2.0
        return (y * x).sum()

    replaying = mutad.grad(f, replay=True)
    rng = np.random.default_rng(4)
    inputs = [rng.random(6) for _ in range(40)]
    expected = [mutad.grad(f)(x.copy()) for x in inputs]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # (calls made while one records
        got = list(pool.map(lambda x: replaying(x.copy()), inputs))  # are traced)
    assert all(same(a, b) for a, b in zip(got, expected))
    # Once recorded, a call made while another thread replays waits for it, as the replay
    # costs less than tracing: every call replays
    before = replays(replaying)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads switched often: replays overlap)
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda x: replaying(x.copy()), inputs))
    finally:
        sys.setswitchinterval(interval)
    assert all(same(a, b) for a, b in zip(got, expected))
    assert replays(replaying) == before + len(inputs)


def test_the_garbage_collector_runs_again_once_a_recording_or_a_replay_ends():
    import gc

    def fails(x):
        y = x * 2.0
        raise ValueError("f's own error")

    def refused(x):
        inner = mutad.grad(lambda y: (y * y).sum())(x)  # nested: refused midway
        assert gc.isenabled()
        return (inner * x).sum()

    assert gc.isenabled()
    with pytest.raises(ValueError, match="f's own error"):
        mutad.grad(fails, replay=True)(np.ones(2))
    assert gc.isenabled()
    mutad.grad(refused, replay=True)(np.ones(2))
    replaying = mutad.grad(small_ops, replay=True)
    replaying(np.ones(3))
    assert gc.isenabled()
    replaying(np.ones(3))                 # a replay holds it off too
    assert gc.isenabled()
    with pytest.raises(TypeError):
        replaying(np.ones(3), np.ones(3))
    assert gc.isenabled()


def test_a_signature_whose_guards_fail_call_after_call_is_traced_from_then_on():
    """Regression: the reason kept after the fourth failure in a row was overwritten by the
    recording of that same call, so the function was recorded again on every call, forever,
    and ``reasons`` stayed empty."""
    def f(x):
        y = x * 1.0
        while y.sum() > 0:                # a trip count that changes on every call
            y -= 1.0
        return (y * y).sum()

    calls = [(np.array([k + 0.5]),) for k in range(mutad.engines.replay.FAILED_GUARDS + 3)]
    replaying = replayed_like_traced(f, calls, replayed=False)
    assert program_count(replaying) == 0
    (reason,) = replaying.reasons.values()
    assert f"failed on {mutad.engines.replay.FAILED_GUARDS} calls in a row" in reason
    replaying(np.array([20.5]))           # traced: not recorded again
    assert program_count(replaying) == 0 and list(replaying.reasons.values()) == [reason]


def _positives_squared(x):
    x *= 2.0                              # the caller's array, written before the decision
    return (x[x > 0] ** 2).sum()          # how many are positive: a guard


def _reciprocals_where_positive(x):
    out = np.zeros_like(x)
    np.divide(1.0, x, out=out, where=x > 0)  # which elements: a guard
    return (out * x[::-1]).sum()


def _legendre_roots(c):
    return (np.abs(np.polynomial.legendre.legroots(c)) ** 2).sum()  # real or complex roots


@pytest.mark.parametrize("f, inputs", [
    (_positives_squared, [[1.0, -2.0, 3.0, 4.0], [1.0, 2.0, -3.0, -4.0], [-1.0, -2.0, -3.0, 4.0]]),
    (_reciprocals_where_positive, [[1.0, -2.0, 3.0], [-1.0, 2.0, -3.0], [1.0, 2.0, 3.0]]),
    (_legendre_roots, [[-1.0, 0.2, 1.0], [1.0, 0.2, 1.0]]),
])
def test_a_decision_that_alternates_between_a_few_outcomes_replays_each(f, inputs, monkeypatch):
    """A signature keeps a program for each of a few ways its guards go: a call replays the
    one whose guards hold (a partial run of another, whose guard failed midway, undone: the
    caller's array written before it too), bit for bit as traced. Regression: one program
    was kept per signature, recorded again on every call until the signature was traced;
    and a program whose first replay failed a guard was prepared again on its next (its
    steps compiled into blocks twice: a replay that raised AttributeError)."""
    prepared, prepare = [], mutad.engines.replay.Program.prepare
    monkeypatch.setattr(mutad.engines.replay.Program, "prepare",
                        lambda self: (prepared.append(self), prepare(self))[1])
    calls = [(np.array(x),) for x in inputs] * 3
    replaying = replayed_like_traced(f, calls)
    (key,) = replaying.programs
    kept = [replaying.programs[key], *replaying.others.get(key, ())]
    assert not replaying.reasons and len(kept) == len(inputs)
    assert len(prepared) == len(set(map(id, prepared))) == len(inputs)
    assert sum(p.replays for p in kept) == len(calls) - len(inputs)  # each recorded once


GAIN = 2.0


def test_what_an_arguments_methods_reach_is_guarded():
    """A method of an argument's class reads a global: changing it drops the program, as for
    a global ``f`` reads itself (without that the replay gave the old gradient)."""
    import dataclasses
    global GAIN

    @dataclasses.dataclass
    class Model:
        w: np.ndarray

        def predict(self, x):
            return GAIN * self.w * x

    def f(m, x):
        return np.sum(m.predict(x) ** 2)

    replaying = mutad.grad(f, replay=True)
    x, m = np.array([1.0, 2.0]), Model(np.array([0.5, 0.25]))
    try:
        for k in range(5):
            GAIN = 3.0 if k >= 3 else 2.0
            assert same(replaying(m, x).w, mutad.grad(f)(m, x).w)
    finally:
        GAIN = 2.0
    assert program_count(replaying) == 1 and replays(replaying) == 1  # (the last call)


def test_namedtuples_dataclasses_and_complex_arrays_are_replayed():
    """They were traced on every call (before that, without an entry in ``reasons``)."""
    import collections
    import dataclasses

    Pair = collections.namedtuple("Pair", "a b")

    @dataclasses.dataclass
    class Box:
        w: np.ndarray

    replaying = mutad.grad(lambda p: (p[0] * p[1]).sum() if isinstance(p, tuple)
                           else (p.w * p.w).sum() if isinstance(p, Box)
                           else (np.abs(p) ** 2).sum(), replay=True)
    x = np.array([1.0, 2.0])
    for _ in range(2):
        assert same(replaying(Pair(x, 3 * x)).a, 3 * x)
        assert same(replaying(Box(x)).w, 2 * x)
        assert same(replaying(x + 1j), 2 * (x + 1j))
    assert not replaying.reasons and program_count(replaying) == 3 and replays(replaying) == 3
    # another namedtuple class, or a dataclass with other attributes: other signatures
    Other = collections.namedtuple("Other", "a b")
    assert same(replaying(Other(x, 3 * x)).a, 3 * x)
    box = Box(x)
    box.extra = 2.0
    assert same(replaying(box).w, 2 * x)
    assert program_count(replaying) == 5
    budget = mutad.grad(lambda x: (x * x).sum(), memory=1024, replay=True)
    for _ in range(2):
        assert same(budget(x), 2 * x)
    assert not budget.reasons and program_count(budget) == 1 and replays(budget) == 1


def test_a_write_tracing_saves_for_its_large_operand_is_saved_in_the_replay_too():
    """Tracing offers no inverse for ``a += y`` where the inverse alone would keep ``y``, a
    large temporary it cannot recompute (``np.cumsum``'s), and saves what the write
    overwrites instead; the replay did offer it, and its gradient came out an ulp off."""
    def f(a, x):
        s = np.sum(a * a * 1.3)  # reads ``a`` as the undo of the write leaves it
        y = np.cumsum(x)
        a += y
        a *= 1.7
        return s + np.sum(np.sin(a))

    rng = np.random.default_rng(0)
    calls = [(rng.standard_normal(2000), 1e-3 * rng.standard_normal(2000)) for _ in range(4)]
    replaying = replayed_like_traced(f, calls, argnums=(0, 1), traced_once=True)
    # the step of ``a += y`` runs the plan tracing ran once it withheld the inverse; that of
    # ``a *= 1.7``, which keeps a number, offers it
    from mutad.engines.blocks import Block
    writes = [member for program in replaying.programs.values() if type(program) is not str
              for step in program.steps
              for member in (step.steps if type(step) is Block else (step,))
              if type(member) is ElementwiseWrite]
    assert [(w.ufunc, w.plan.invertible) for w in writes] == [(np.add, False),
                                                               (np.multiply, True)]


def test_the_cache_keeps_a_bounded_number_of_programs():
    replaying = mutad.grad(lambda x: (x * x).sum(), replay=True)
    for n in range(1, 3 * mutad.engines.replay.CACHE_SIZE):
        replaying(np.ones(n))
    assert len(replaying.programs) == mutad.engines.replay.CACHE_SIZE
    replayed(replaying, np.ones(n))  # (the newest kept)


def test_aux_outputs_are_replayed_and_so_are_budgets():
    def f(x, k):
        y = np.sin(x)
        y *= 2.0
        steps = 0
        while y.sum() > 0.5:              # aux: a count Python kept, and arrays
            y = y * 0.5
            steps += 1
        return (y * y).sum(), {"y": y, "steps": steps, "k": k, "first": y[0]}

    replaying = mutad.value_and_grad(f, has_aux=True, replay=True)
    traced = mutad.value_and_grad(f, has_aux=True)
    for x in (np.linspace(0.1, 1.0, 4), np.linspace(0.2, 1.1, 4), np.linspace(0.1, 1.0, 4),
              np.linspace(0.1, 1.0, 4)):  # (the last two replay the first's recording)
        got, expected = replaying(x, 3), traced(x.copy(), 3)
        assert same(got[1], expected[1]) and same(got[0][0], expected[0][0])
        aux, expected_aux = got[0][1], expected[0][1]
        assert aux.keys() == expected_aux.keys() and all(
            same(aux[k], expected_aux[k]) and type(aux[k]) is type(expected_aux[k])
            for k in aux)
    assert program_count(replaying) == 1 and not replaying.reasons and replays(replaying) == 2
    g, aux = mutad.grad(f, has_aux=True, replay=True)(np.ones(2), 1)
    assert same(g, mutad.grad(f, has_aux=True)(np.ones(2), 1)[0]) and aux["k"] == 1

    budget = mutad.grad(lambda x: (x * x).sum(), memory=1024, replay=True)
    for _ in range(2):
        assert same(budget(np.arange(3.0)), 2 * np.arange(3.0))
    assert replays(budget) == 1


# ----------------------------------------------------------------------------------------------
# Compiled runs of elementwise steps (mutad.engines.blocks)


def blocks(replaying):
    from mutad.engines.blocks import Block
    return [step for program in replaying.programs.values() if type(program) is not str
            for step in program.steps if type(step) is Block]


def heat_scalar(u, r):
    for _ in range(3):
        un = u.copy()
        for i in range(1, len(u) - 1):
            u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])
    return (u * u).sum()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f, make", [
    (small_ops, lambda rng: (rng.standard_normal(10),)),
    (heat_scalar, lambda rng: (rng.standard_normal(9), 0.2 + 0.1 * rng.random())),
])
@pytest.mark.parametrize("block_steps", [7, 128])
def test_compiled_runs_of_elementwise_steps_replay_bit_for_bit(f, make, policy, block_steps,
                                                                monkeypatch):
    from mutad.engines import replay
    monkeypatch.setattr(replay, "BLOCK_STEPS", block_steps)  # 7: a run cut into many blocks
    rng = np.random.default_rng(11)
    # r in argnums: followed as an input of the program, not held as a number
    replaying = replayed_like_traced(f, [make(rng) for _ in range(5)], policy,
                                     argnums=tuple(range(len(make(rng)))))
    assert len(blocks(replaying)) > (5 if block_steps == 7 else 0), "compiled blocks ran"


def heat_scalar_steps(u, r, steps):
    for _ in range(steps):
        un = u.copy()
        for i in range(1, len(u) - 1):
            u[i] += r * (un[i + 1] - 2 * un[i] + un[i - 1])
    return (u * u).sum()


@pytest.mark.parametrize("policy", POLICIES)
def test_an_index_equal_to_a_number_among_the_arguments_is_a_constant(policy):
    """``u[3]`` where ``steps`` is 3: CPython shares the object 3, and the index once read
    the argument's slot, which the signature fixes anyway, so that the element write was a
    computed one, guarded and uncompiled. It is the number itself: every element write of the
    loop compiles as one (``SetElement``), and the gradients are the traced ones."""
    from mutad.engines.replay import SetElement
    rng = np.random.default_rng(5)
    calls = [(rng.standard_normal(9), 0.2 + 0.1 * rng.random(), 3) for _ in range(4)]
    replaying = replayed_like_traced(heat_scalar_steps, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    fused = [member for block in blocks(replaying) for member in block.steps
             if type(member) is SetElement]
    assert len(fused) == 3 * 7


def heat_stencil(u0, target, r, steps=40, damped=False):
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[0] = 0.0
        u[-1] = u[-2]
        if damped:  # a write of the whole buffer: its shadow leaves the dictionary and back
            u *= 1.0 - 0.1 * r
            u[1:-1] -= 0.5 * u[:-2] * r
    d = u - target
    return np.sum(d * d)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n, small_copies", [(11, None), (11, 1000), (400, 20000),
                                               (2000, None), (2000, 100_000)])
@pytest.mark.parametrize("damped", [False, True])
def test_a_stencils_loop_body_compiles_views_and_writes_and_all(policy, n, small_copies,
                                                                 damped, monkeypatch):
    """The slices, the arithmetic on them and the writes of ``u[1:-1] += ...`` and the
    boundary assignments run as one block per loop body; the writes' undos are decided afresh
    on each call, whether their bytes are copied (a small write, while the copy allowance
    lasts: ``small_copies``) or put back by the inverse once it is spent."""
    from mutad.core import tape as tape_module
    if small_copies is not None:
        monkeypatch.setattr(tape_module, "SMALL_COPIES", small_copies)
    rng = np.random.default_rng(14)
    calls = [(rng.standard_normal(n), rng.standard_normal(n), 0.2 + 0.2 * rng.random())
             for _ in range(4)]
    replaying = replayed_like_traced(functools.partial(heat_stencil, damped=damped), calls,
                                     policy, argnums=(0, 2), traced_once=True)
    compiled = blocks(replaying)
    assert not replaying.reasons and compiled
    assert any(type(member) is ElementwiseWrite for block in compiled for member in block.steps)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_a_program_that_warns_is_replayed_not_recorded_again():
    """The warnings a call issued are part of its program (``Program.kinds``); a replay that
    hears the same ones is that program. (A name clash once made every such call record
    again, unseen by the gradients.)"""
    def f(x):
        y = np.log(x - 1.0)  # x[0] = 1: divide by zero, as NumPy warns
        return np.sum(np.where(np.isfinite(y), y, 0.0) * x)

    x = np.array([1.0, 2.0, 3.0])
    replayed_like_traced(f, [(x,)] * 4, traced_once=True)


def jacobi_2d(A, B, steps=3):
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return np.sum(A * A) + np.sum(np.sin(B))


def fdtd_2d(ex, ey, hz, steps=3):
    for t in range(steps):
        ey[0, :] = 0.1 * t
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
        hz *= np.cos(ex)  # a pure step whose operands the reverse pass reads
    return np.sum(hz * hz) + np.sum(ex) + np.sum(ey * ey)


def _grids(rng, n, count):
    """``count`` random n x n grids, with a zero and an infinity now and then (in the
    cotangents' products, then, a zero meets an infinite factor)."""
    grids = [rng.standard_normal((n, n)) for _ in range(count)]
    if rng.random() < 0.5:
        grids[0][n // 2, n // 2] = 0.0
    return tuple(grids)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f, count", [(jacobi_2d, 2), (fdtd_2d, 3)])
@pytest.mark.parametrize("n", [23, 40, 100])
def test_stencils_on_grids_of_a_few_to_64_kib_compile(f, count, n, policy):
    """The steps on arrays up to ``elementwise.SHORT`` (64 KiB) are lean, and compiled: the
    slices of a grid, the arithmetic on them and the writes into it run as blocks, alongside
    the temporaries the reverse pass recomputes (4 KiB and more) and let go after their last
    use (``Free``); on 100 x 100 (78 KiB) the slices are past it, and run step by step."""
    from mutad.engines.replay import Pure
    rng = np.random.default_rng(n)
    calls = [_grids(rng, n, count) for _ in range(4)]
    replaying = replayed_like_traced(f, calls, policy, argnums=tuple(range(count)),
                                     traced_once=True)
    compiled = [member for block in blocks(replaying) for member in block.steps]
    assert not replaying.reasons
    assert (sum(type(member) is Pure for member in compiled) > 10) == (n < 100)


def solve_lower(L, b):
    """Forward substitution as NumPy users write it: a dot product per row."""
    x = np.zeros_like(b)
    for i in range(len(b)):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return np.sum(x * x) + np.dot(x[1:], x[:-1])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", [6, 40])
def test_the_dot_products_of_a_substitution_loop_compile(n, policy):
    """``L[i, :i] @ x[:i]`` (a function with a rule, on real arrays) runs as lines of its block:
    the rule, and its pullback's cotangents added where the engine's record adds them."""
    from mutad.engines.replay import Function
    rng = np.random.default_rng(n)
    calls = [(np.tril(rng.uniform(0.5, 1, (n, n))) + n * np.eye(n), rng.standard_normal(n))
             for _ in range(4)]
    calls[2][0][n // 2, 0] = 0.0
    replaying = replayed_like_traced(solve_lower, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    assert sum(type(member) is Function and member.rule.__name__ in ("matmul", "dot")
               for block in blocks(replaying) for member in block.steps) == n + 1


def products_in_a_loop(M, x):
    """Products of a vector and a vector, a matrix and a vector (either side), whose outputs
    only elementwise steps read (their cotangents the block's locals: a float64 scalar's, a
    vector's), of a row of ``M``, of ``M`` whole, of a value the block made, and of one
    vector with itself."""
    y = x * 1.0
    for i in range(1, 4):
        r = M[i, :] @ y
        v = y @ M
        w = M @ y
        y = y * 0.5 + (v * w) * r * 0.1 + (x @ x) * 0.01
    return np.sum(y * y)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_products_of_a_matmul_are_lines_of_the_block(policy):
    """The cotangents of ``@`` on vectors and matrices are written as lines of the block
    (``contractions._dot_back.lines`` and its kin), the same products bit for bit: with zeros
    and infinities among the inputs (NaNs in the products), a float64 scalar's cotangent as a
    0-d array."""
    from mutad.engines.replay import Function
    from mutad.rules import contractions
    rng = np.random.default_rng(6)
    calls = []
    for i in range(5):
        M, x = rng.standard_normal((5, 5)), rng.standard_normal(5)
        if i >= 3:
            M[1, 2], x[3] = 0.0, (np.inf if i == 4 else 0.0)
        calls.append((M, x))
    with np.errstate(invalid="ignore", over="ignore"):
        replaying = replayed_like_traced(products_in_a_loop, calls, policy, argnums=(0, 1))
    compiled = blocks(replaying)
    written = (contractions._dot_back, contractions._vector_matrix_back,
               contractions._matrix_vector_back)
    assert {member.special[1] for block in compiled for member in block.steps
            if type(member) is Function and member.special is not None} >= set(written)
    assert not any(c in written for block in compiled for c in block.constants
                   if callable(c))


def divided(a, b, t):
    """Divisions of float64 elements by float64 elements (``x[i] /= x[i - 1]``) and by a
    Python float argument, whose partials a block computes by NumPy's scalar division where
    the operands are NumPy's float64 scalars (``ufuncs._by_dividend.scalar``)."""
    x = a * 1.0
    for i in range(1, len(x)):
        x[i] /= x[i - 1]
        x[i] = x[i] / t + b[i]
    return np.sum(x * b)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("policy", POLICIES)
def test_divisions_of_scalars_take_their_partials_from_scalar_division(policy):
    """The partials of ``/`` of float64 scalars, computed by NumPy's scalar division, are the
    rule's bit for bit: divisors that are zero (an infinite partial), NaN over NaN (which NaN
    comes out), a Python float divisor (the rule's own call)."""
    rng = np.random.default_rng(4)
    calls = []
    for i in range(6):
        a, b = rng.uniform(0.5, 2.0, 8), rng.standard_normal(8)
        if i == 3:
            a[2] = 0.0
        if i == 4:
            a[3], b[3] = np.nan, -np.nan
        calls.append((a, b, 1.5 + i))
    replaying = replayed_like_traced(divided, calls, policy, argnums=(0, 1, 2))
    assert blocks(replaying)


def divided_by_nine(a, w):
    """seidel_2d's element updates: divisions by a number, whose partial a block folds into a
    NumPy float64 constant and multiplies each cotangent by as it is."""
    a = a * 1.0
    for i in range(1, len(a)):
        a[i] += a[i - 1]
        a[i] /= 9.0
    return np.sum(a * w)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("policy", POLICIES)
def test_cotangents_times_a_folded_partial_keep_their_zeros_and_nans(policy):
    """Cotangents of zero (of either sign), infinite or NaN, times the folded partial of a
    division by 9.0, give tracing's bits."""
    rng = np.random.default_rng(5)
    calls = []
    for i in range(6):
        a, w = rng.standard_normal(10), rng.standard_normal(10)
        w[2:5] = (0.0, -0.0, 0.0) if i % 2 else (-0.0, 0.0, -0.0)
        w[:2] = (np.nan, np.inf)  # (their cotangents reach the earlier elements only)
        if i >= 3:
            w[5:8] = -0.0  # the cotangents of a[5:8] zeros of that sign
        calls.append((a, w))
    replaying = replayed_like_traced(divided_by_nine, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    assert blocks(replaying)


def sweep_then_sum(a, b):
    """Element writes into an array whose shadow the reverse pass of a large sum shares with
    another's (``elementwise._sharing``) before the writes' block reaches it; and divisions by
    a number, whose partial the block computes once."""
    a = a * 1.0
    for i in range(1, 12):
        a[i] += a[i - 1]
        a[i] /= 9.0
    y = a + b
    return np.sum(y * y)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", [40, 20_000])
def test_element_writes_take_their_cotangents_from_a_shadow_of_their_own(n, policy):
    """The elements a block's writes read their cotangents from are those of the array's own
    shadow, made its own first where the reverse pass of ``a + b`` (large: ``n = 20,000``)
    left it shared with ``b``'s."""
    from mutad.engines.replay import SetElement
    rng = np.random.default_rng(n)
    calls = [(rng.standard_normal(n), rng.standard_normal(n)) for _ in range(4)]
    replaying = replayed_like_traced(sweep_then_sum, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    assert any(type(step) is SetElement for block in blocks(replaying) for step in block.steps)


def pinned_ends(a, b):
    """Numbers assigned to elements in a loop: a float, an int, NumPy's float64, an int no
    float64 holds exactly (fused into ``SetElement`` steps: an int as the double NumPy's
    assignment takes it for, ``operations.as_assigned``); before any gradient reaches the array (its shadow absent), after
    (an element of it zeroed), and while a large sum's reverse pass leaves it shared."""
    a = a * 1.0
    for _ in range(3):
        a[1:-1] += 0.25 * (a[2:] - a[:-2])
        a[0] = 0.5
        a[-1] = 2
        a[3] = np.float64(-0.0)
        a[4] = (1 << 60) + 1
        a[5] = a[6] * 1.5
    y = a + b
    return np.sum(y * y) + a[0] * a[1] * 1e-19


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("n", [12, 20_000])
def test_numbers_assigned_to_elements_compile_as_element_writes(n, policy):
    """``u[0] = 0.0`` in a loop compiles as one element's save, assignment and restore (not as
    a view, its copy and ``np.positive`` into it), with the bits the engine's assignment
    writes, and its element's cotangent zeroed wherever the shadow lies."""
    from mutad.engines.replay import SetElement
    rng = np.random.default_rng(n)
    calls = [(rng.standard_normal(n), rng.standard_normal(n)) for _ in range(4)]
    replaying = replayed_like_traced(pinned_ends, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    fused = [step for block in blocks(replaying) for step in block.steps
             if type(step) is SetElement]
    assert sorted({type(step.constant).__name__ for step in fused}) == ["NoneType", "float",
                                                                        "float64"]
    assert {2.0, float((1 << 60) + 1)} <= {step.constant for step in fused}


def elements_of_each_kind(a, b):
    """Values assigned to elements of a float32 and a float64 array in a loop, and Python's
    numbers: the writes a block does not fuse (``SetElement`` takes float64 alone)."""
    c = b.astype(np.float32)
    a = a * 1.0
    for i in range(1, len(a) - 1):
        c[i] = c[i - 1] * np.float32(0.5) + c[i + 1]
        a[i] = a[i - 1] * 0.25 - a[i + 1]
        c[0] = 1.5
    return np.sum(a * a) + np.sum(c * c)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_element_write_is_replayed_as_tracing_records_it(policy, monkeypatch):
    """An element's assignment is one record in both engines (``elementwise.ElementWrite``):
    the traced engine's put-back and the replay's (its steps one at a time, where no block
    compiles the loop) are that record's, once per element written, and the values and
    gradients are the traced ones bit for bit on every call."""
    from mutad.engines import replay
    from mutad.engines.elementwise import ElementWrite
    monkeypatch.setattr(replay, "with_blocks", lambda steps, *rest: steps)
    put_back = ElementWrite.__call__
    engines = []
    monkeypatch.setattr(ElementWrite, "__call__",
                        lambda record: (engines.append(record), put_back(record))[1])
    rng = np.random.default_rng(5)
    calls = [(rng.standard_normal(9), rng.standard_normal(9)) for _ in range(3)]
    replaying = mutad.value_and_grad(elements_of_each_kind, argnums=(0, 1), policy=policy,
                                     replay=True)
    traced, replayed = [], []
    for args in calls:
        del engines[:]
        got = replaying(*args)
        replayed.append(len(engines))
        del engines[:]
        expected = mutad.value_and_grad(elements_of_each_kind, argnums=(0, 1),
                                        policy=policy)(*args)
        traced.append(len(engines))
        assert same(got[0], expected[0]) and same(got[1], expected[1])
    assert traced == [3 * 7] * 3  # a[i], c[i] and c[0] in each of 7 iterations
    assert replayed[1:] == [3 * 7] * 2  # (the first call records)


def float32_elements(b):
    """Values assigned to elements of a float32 array in a loop (writes a block does not fuse
    into ``SetElement``): computed ones, a Python float, and an integer that NumPy's
    assignment would round twice (by float64), where ``np.positive``, the engine's
    assignment, rounds it once."""
    c = b.astype(np.float32)
    for i in range(1, len(c) - 1):
        c[i] = c[i - 1] * np.float32(0.5) + c[i + 1]
        c[0] = 1.5
        c[-1] = (1 << 60) + (1 << 36) + 1
    return np.sum(c * c)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_compiled_element_write_runs_its_records_lines(policy, monkeypatch):
    """An element's assignment a block compiles without fusing it (a float32 one) runs the
    lines of its record, ``elementwise.ElementWrite``, tracing's and the replay's before the
    block: not a ``SavedWrite``'s copy and copy back. The values and gradients are the traced
    ones bit for bit on every call."""
    from mutad.engines.elementwise import ElementWrite
    from mutad.engines.inplace import SavedWrite
    from mutad.engines.replay import ElementwiseWrite
    made = []
    for kind in (ElementWrite, SavedWrite):
        for name in ("write_lines", "back_lines"):
            lines = getattr(kind, name)
            monkeypatch.setattr(kind, name, staticmethod(
                lambda *args, kind=kind, lines=lines, **kwargs: (
                    made.append(kind), lines(*args, **kwargs))[1]))
    rng = np.random.default_rng(8)
    replaying = replayed_like_traced(float32_elements,
                                     [(rng.standard_normal(9),) for _ in range(5)], policy)
    assert [step for block in blocks(replaying) for step in block.steps
            if type(step) is ElementwiseWrite and step.written.dtype == np.float32
            and step.written.shape == ()]
    assert made and set(made) == {ElementWrite}


def kalman_like(a, q, F0, ys):
    """Products of small matrices in a loop, as a newcomer's Kalman filter writes them: whole
    temporaries (``F @ P``) whose cotangents the products of matmul's plain back become or
    are added into, an operand used twice (``x @ x``), a transposed view (``F.T``), constant
    operands of the program (``H``, ``np.eye``), a float32 operand (its products not
    adopted)."""
    F = F0 * a
    H = np.array([[1.0, 0.5]])
    P = np.eye(2)
    x = np.ones(2)
    total = 0.0
    for t in range(len(ys)):
        x = F @ x
        P = F @ P @ F.T + q * np.eye(2)
        S = H @ P @ H.T
        x = x + P @ (ys[t] - x) * 0.1 + H.T @ (H @ x)
        total = total + x @ x + np.sum(P @ P) + S[0, 0]
    w = np.ones(2, dtype=np.float32)
    return total + np.sum(P @ w)


@pytest.mark.parametrize("policy", POLICIES)
def test_products_of_small_matrices_hand_their_cotangents_to_the_shadows(policy):
    """The cotangents matmul's plain back computes become shadows of the temporaries (no
    copy) or are added into them, with the traced bits."""
    rng = np.random.default_rng(11)
    calls = [(1.0 + 0.1 * rng.random(), 0.1 + rng.random(), rng.standard_normal((2, 2)),
              rng.standard_normal((6, 2))) for _ in range(4)]
    replaying = replayed_like_traced(kalman_like, calls, policy, argnums=(0, 1, 2),
                                     traced_once=True)
    from mutad.engines.replay import Function
    products = [step for block in blocks(replaying) for step in block.steps
                if type(step) is Function and step.special is not None]
    assert any(place is None for step in products for place in step.places)  # H @ P


def smoothed_twice(a, b, read_c):
    """Slices assigned computed values in a loop (writes copied on every call), one array of
    which the loss reads only if ``read_c``."""
    c = np.zeros_like(a)
    d = np.zeros_like(a)
    for _ in range(3):
        t = a * 0.5
        c[1:-1] = 0.25 * (t[2:] + t[:-2])
        d[1:-1] = (t[1:-1] - 0.1) * b[1:-1]
        a = a + d
    return np.sum(a * a) + (np.sum(c * c) if read_c else 0.0)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("read_c", [False, True])
def test_slices_assigned_where_no_gradient_reaches_them(policy, read_c, monkeypatch):
    """Where no gradient reached the values a block's write assigned (``c``, unread), the
    block's earlier steps are reversed one at a time from there, with the same gradients."""
    from mutad.engines.blocks import Block
    deopts = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda *a: (deopts.append(1), deopt(*a))[1])
    rng = np.random.default_rng(3)
    calls = [(rng.standard_normal(20), rng.standard_normal(20), read_c) for _ in range(4)]
    replaying = replayed_like_traced(smoothed_twice, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    assert blocks(replaying)
    assert bool(deopts) == (not read_c)


def regions_assigned(a, b, read_c):
    """A region of ``c`` (a row's span, or a 2-D block) assigned a value only the block reads
    (its cotangent a local, handed over by the write's lines: ``ElementwiseWrite.operands``),
    which a product reads too where ``a`` is 2-D (the local added into); the loss reads ``c``
    only if ``read_c``."""
    a = a * 1.0
    c = np.zeros_like(a)
    inner = (slice(1, -1),) * a.ndim
    for _ in range(3):
        t = np.sqrt(a * a + 1.0) * 0.5
        u = 0.25 * (t[inner] + b[inner])
        c[inner] = u
        if a.ndim == 2:
            a[inner] -= u * b[inner]
        else:
            a = a * 0.75
    return np.sum(a * a) + (np.sum(c * c) if read_c else 0.0)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("read_c", [False, True])
@pytest.mark.parametrize("shape", [(12,), (5, 6)])
def test_a_region_assigned_hands_its_cotangent_to_a_local(policy, read_c, shape, monkeypatch):
    """The cotangent an assignment takes from its region is its operand's local cotangent in
    the block, the same gradients bit for bit (zeros and an infinity among the inputs, the
    products masked); where no gradient reached the array (``c`` unread), the block finishes
    one step at a time from the write."""
    from mutad.engines.blocks import Block
    deopts = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda *a: (deopts.append(1), deopt(*a))[1])
    rng = np.random.default_rng(8)
    calls = []
    for i in range(5):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        if i >= 3:
            a.flat[3], b.flat[-3] = 0.0, (np.inf if i == 4 else 0.0)
        calls.append((a, b, read_c))
    replaying = replayed_like_traced(regions_assigned, calls, policy, argnums=(0, 1))
    assert any(type(member) is ElementwiseWrite and member.operands
               for block in blocks(replaying) for member in block.steps)
    assert bool(deopts) == (not read_c)


def regions_added_into(a, b, read_c, reread):
    """A region of ``c`` added into (a write the tape may copy or invert) a value only the
    block reads, whose cotangent is a local: read again after the write where ``reread`` is
    ``"live"`` (the local holds a cotangent when the write's lines run), summed with another
    where ``"shared"`` (the two locals one array); the loss reads ``c`` only if ``read_c``."""
    a = a * 1.0
    c = np.ones_like(a)
    inner = (slice(1, -1),) * a.ndim
    for _ in range(3):
        t = np.sqrt(a * a + 1.0)
        u = t[inner] * 0.5
        w = b[inner] * 0.25
        c[inner] += u
        if reread == "live":
            a[inner] = a[inner] * 0.9 + u * w
        elif reread == "shared":
            a[inner] = (u + w) * 0.9
        else:
            a = a * 0.75
    return np.sum(a * a) + (np.sum(c * c) if read_c else 0.0)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("small_copies", [None, 1])
@pytest.mark.parametrize("read_c", [False, True])
@pytest.mark.parametrize("reread", ["once", "live", "shared"])
@pytest.mark.parametrize("shape", [(12,), (5, 6)])
def test_a_region_added_into_hands_its_cotangent_to_a_local_either_way(
        policy, small_copies, read_c, reread, shape, monkeypatch):
    """The cotangent a write in place takes from its region is its operand's local cotangent,
    whether the write's bytes were copied (the lean lines) or it was inverted (the engine's
    record, whose cotangent is taken back from the shadows' dictionary, the local handed over
    first where it holds one), the same gradients bit for bit (zeros and an infinity among
    the inputs); where no gradient reached the array, the block may finish one step at a time
    (where one did, it does not)."""
    from mutad.core import tape as tape_module
    from mutad.engines.blocks import Block
    if small_copies is not None:
        monkeypatch.setattr(tape_module, "SMALL_COPIES", small_copies)
    deopts = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda *a: (deopts.append(1), deopt(*a))[1])
    rng = np.random.default_rng(10)
    calls = []
    for i in range(5):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        if i >= 3:
            a.flat[7], b.flat[-4] = 0.0, (np.inf if i == 4 else -0.0)
        calls.append((a, b, read_c, reread))
    with np.errstate(invalid="ignore", over="ignore"):
        replaying = replayed_like_traced(regions_added_into, calls, policy, argnums=(0, 1))
    assert any(type(member) is ElementwiseWrite and member.operands and member.plan.invertible
               for block in blocks(replaying) for member in block.steps)
    assert not (read_c and deopts)


def rows_updated(C, A, read_D):
    """syrk's rows: ``C[i, :i + 1]`` scaled and added into in place (invertible writes, copied
    while the allowance lasts, inverted after), and rows of ``D`` subtracted from, which the
    loss reads only if ``read_D``."""
    C = C * 1.0
    D = np.zeros_like(C)
    n, m = A.shape
    for i in range(n):
        C[i, :i + 1] *= 1.2
        for k in range(m):
            C[i, :i + 1] += 1.5 * A[i, k] * A[:i + 1, k]
        D[i, 1:] -= C[i, :-1] * 0.5
    return np.sum(C * C) + (np.sum(D * D) if read_D else 0.0)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("read_D", [False, True])
@pytest.mark.parametrize("small_copies", [None, 600])
def test_rows_written_in_place_take_their_cotangents_from_the_flat_shadow(
        policy, read_D, small_copies, monkeypatch):
    """A row's write in place takes its cotangent from its array's flat shadow, a local of
    the block, whether the write's bytes were copied or it is inverted (the copy allowance
    spent: ``small_copies``), the same gradients bit for bit (zeros and an infinity among
    the inputs); where no gradient reached the array (``D`` unread), the block finishes one
    step at a time from the write."""
    from mutad.core import tape as tape_module
    from mutad.engines.blocks import Block
    if small_copies is not None:
        monkeypatch.setattr(tape_module, "SMALL_COPIES", small_copies)
    deopts = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda *a: (deopts.append(1), deopt(*a))[1])
    rng = np.random.default_rng(9)
    calls = []
    for i in range(5):
        C, A = rng.standard_normal((6, 6)), rng.standard_normal((6, 3))
        if i >= 3:
            C[4, 2], A[3, 1] = 0.0, (np.inf if i == 4 else 0.0)
        calls.append((C, A, read_D))
    with np.errstate(invalid="ignore", over="ignore"):
        replaying = replayed_like_traced(rows_updated, calls, policy, argnums=(0, 1))
    assert any(type(member) is ElementwiseWrite for block in blocks(replaying)
               for member in block.steps)
    assert bool(deopts) == (not read_D)


def fanned_out(x, w, read_c, reread):
    """Sums of two values made by elementwise steps (``s + r``), whose cotangent becomes both
    of theirs, one array (``blocks.Code.share``); ``s`` read again before the sum where
    ``reread`` (its cotangent added into while shared), the steps that made them in either
    order, and a value only an unread array ``c`` takes where not ``read_c`` (the block's
    reverse pass leaves its lines while the two share)."""
    c = np.zeros_like(x)
    for j in range(4):
        a = np.sqrt(x) * 0.5
        b = x * (w * w)
        s, r = (a, b) if j % 2 == 0 else (b, a)
        q = (s if reread else x) * 3.0
        c[1:-1] = q[1:-1]
        t = s + r
        x = t * 0.75
    return np.sum(x * x) + (np.sum(c * c) if read_c else 0.0)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("read_c", [False, True])
@pytest.mark.parametrize("reread", [False, True])
def test_a_sums_cotangent_shared_by_its_operands_locals(policy, read_c, reread, monkeypatch):
    """The two locals holding one array are neither written in place nor handed over while
    both live (a product into a new array, a sum into a new array, a copy for each shadow
    where the pass finishes one step at a time), with the traced gradients: on inputs where
    ``sqrt``'s partial is infinite and a factor zero (the masked products) too."""
    from mutad.engines.blocks import Block, Code
    shared, duplicates = [], []
    share, deopt = Code.share, Block.deopt
    monkeypatch.setattr(Code, "share", lambda self, *a: (shared.append(1), share(self, *a)))

    def deopting(self, shadows, kept, k, entry, keys, live):
        duplicates.append(len({id(g) for g in live}) < len(live))
        return deopt(self, shadows, kept, k, entry, keys, live)

    monkeypatch.setattr(Block, "deopt", deopting)
    rng = np.random.default_rng(21)
    calls = []
    for i in range(5):
        x, w = rng.uniform(0.0, 2.0, 6), rng.standard_normal(6)
        if i >= 3:
            x[1], w[2] = 0.0, 0.0
        calls.append((x, w, read_c, reread))
    replaying = replayed_like_traced(fanned_out, calls, policy, argnums=(0, 1))
    assert blocks(replaying) and shared and not replaying.reasons
    assert any(duplicates) == (not read_c)


def sums_of_every_kind(a, b, scale, read_d=True):
    """``np.sum`` over every axis (a block's plain functions: ``reductions._sum_for``) of a
    whole array, a region of one (its shadow added into), a transposed one, a 0-d one and a
    float32 one, beside a sum over an axis (the rule), each cotangent ``scale`` (-0.0 too);
    then an array ``d`` of the sums' values that the loss reads only if ``read_d`` (where it
    does not, the block's reverse pass finishes one step at a time, the sums' too)."""
    c = a * b
    t = np.sum(c) + np.sum(c[1:, ::2]) + np.sum((a * 2.0).T) + np.sum(np.sum(b, axis=1))
    z = (a[0, 0] * 3.0).reshape(())
    f = (b * 0.5).astype(np.float32)
    d = np.zeros_like(a)
    d[1:] = (a * t)[1:]
    loss = scale * t + scale * np.sum(z * z) + scale * np.sum(f * f).astype(np.float64)
    return loss + np.sum(d * d) if read_d else loss


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scale", [1.5, -0.0, np.inf])
@pytest.mark.parametrize("read_d", [True, False])
def test_sums_over_every_axis_replay_as_the_rule(policy, scale, read_d, monkeypatch):
    """The plain functions a compiled block calls for ``np.sum`` over every axis give the
    rule's values and cotangents bit for bit: the sum ``np.add.reduce``'s, each cotangent the
    array the shadows made of the rule's broadcast (a -0.0 kept where it is the shadow, added
    into zeros where a region's; an infinite one)."""
    from mutad.engines.blocks import Block
    from mutad.engines.replay import Function
    deopts = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda *a: (deopts.append(1), deopt(*a))[1])
    rng = np.random.default_rng(4)
    calls = [(rng.standard_normal((4, 6)), rng.standard_normal((4, 6)), scale, read_d)
             for _ in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf * 0 in the gradients, if any
        replaying = replayed_like_traced(sums_of_every_kind, calls, policy, argnums=(0, 1))
    special = [step for block in blocks(replaying) for step in block.steps
               if type(step) is Function and str(step.primitive) == "np.sum"
               and step.special is not None]
    assert len(special) >= 4 and not replaying.reasons
    assert bool(deopts) == (not read_d)


def scaled_by_a_number(a, s):
    """A float64 number ``s`` (0-d) times arrays: its cotangent the sum of products, which a
    block takes as NumPy's scalar (``add.reduce`` of the products over every axis)."""
    t = a * 1.0
    for _ in range(3):
        t = t * s + a
    m = a.reshape(2, -1) * s
    return np.sum(t * t) + np.sum(m * m)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("s", [0.75, -0.0, 0.0, np.inf])
@pytest.mark.parametrize("infinite", [False, True])
def test_a_numbers_summed_cotangent_replays_bit_for_bit(policy, s, infinite):
    """The cotangent of a number broadcast over an array (a 1-d one, a 2-d one) is the sum
    of its products over every axis, the same reduction as ``unbroadcast``'s: on arrays with
    zeros of either sign and infinities (the masked products, signed zero sums, NaNs)."""
    rng = np.random.default_rng(8)
    calls = []
    for _ in range(5):
        a = rng.standard_normal(12)
        a[[1, 4, 6]] = [0.0, -0.0, np.inf if infinite else 3.0]
        calls.append((a, s))
    replaying = replayed_like_traced(scaled_by_a_number, calls, policy, argnums=(0, 1))
    assert blocks(replaying) and not replaying.reasons


def outer_products(u, v, M):
    """``np.outer`` (a block's plain functions: ``contractions._outer_for``) of vectors,
    regions of a vector, a matrix it ravels and a number, and ``np.linalg.outer``."""
    A = M * 1.0
    for _ in range(2):
        A += np.outer(u, v) + np.outer(u[::-1] * 0.5, M[0] * v)
        A -= np.outer(M[:2, :2], v * 2.0) * 0.25
        A *= np.linalg.outer(u * 0.1, v * 0.3) + np.outer(u[0] * 2.0, v).reshape(A.shape[1])
    return np.sum(A * A)


@pytest.mark.parametrize("policy", POLICIES)
def test_outer_products_replay_as_the_rule(policy):
    rng = np.random.default_rng(17)
    calls = [(rng.standard_normal(4), rng.standard_normal(6), rng.standard_normal((4, 6)))
             for _ in range(5)]
    replaying = replayed_like_traced(outer_products, calls, policy, argnums=(0, 1, 2))
    from mutad.engines.replay import Function
    special = [step for block in blocks(replaying) for step in block.steps
               if type(step) is Function and "outer" in str(step.primitive)
               and step.special is not None]
    assert len(special) >= 4 and not replaying.reasons


def rows_pinned(a, b):
    """Numbers assigned to a row of an array, between updates that read its rows: the row's
    cotangent is dropped from the flat shadow the block holds, and its bytes put back."""
    a = a * 1.0
    for _ in range(4):
        a[1:-1] += 0.25 * (a[2:] - a[:-2]) * b[1:-1]
        a[2:5] = 0.5
    return np.sum(a * a * b)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_row_assigned_numbers_drops_its_cotangent_where_the_block_holds_it(policy):
    rng = np.random.default_rng(4)
    calls = [(rng.standard_normal(12), rng.standard_normal(12)) for _ in range(4)]
    replaying = replayed_like_traced(rows_pinned, calls, policy, argnums=(0, 1),
                                     traced_once=True)
    assert blocks(replaying)


COMPLEX_WEIGHTS = (np.array([1.0, 2.0]), np.array([1 - 1j, 2 + 0.5j]),
                   np.array([1 + 1j, 2 - 0.5j]))


def real_part_pinned(a0, a1, a2):
    """A number assigned to an element of the real part of a complex array, views of whose
    memory the loss reads too: the element's real cotangent is zeroed, its imaginary one
    kept."""
    a0[0] = a0[0]
    a0[0] = 0.0
    total = 0.0
    for w, y in zip(COMPLEX_WEIGHTS, (a0, a1, a2)):
        total = total + ((np.conj(w) * y).real.sum() if np.iscomplexobj(w) else (w * y).sum())
    return total


@pytest.mark.parametrize("policy", POLICIES)
def test_a_number_assigned_to_a_real_part_keeps_the_imaginary_cotangent(policy):
    """Found by the soak: the element's cotangent was zeroed in the complex shadow's flat
    view as if it were a float64 one, the imaginary part's with it."""
    def calls():
        s = np.array([0.274 - 0.46j, -0.918 - 0.967j, 0.627 + 0.826j])
        return s[0:2].real, s[1:3], s[0:2]
    replaying = mutad.value_and_grad(real_part_pinned, argnums=(0, 1, 2), policy=policy,
                                     replay=True)
    for _ in range(4):
        got = replaying(*calls())
        expected = mutad.value_and_grad(real_part_pinned, argnums=(0, 1, 2), policy=policy)(
            *calls())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
    assert replays(replaying) == 3


def clipped_transpose(a):
    """A function whose output is laid out as its operand (F-ordered), read by an elementwise
    step of the same block whose output is C-ordered: its lean pullback adds into the
    function's output through the shadows, not into a local of the block."""
    t = np.clip(a.T, -1.0, 0.5)
    return np.sum(np.linspace(1.0, 2.0, 6).reshape(2, 3) * t)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_functions_output_in_another_layout_gets_its_cotangent_through_the_shadows(policy):
    rng = np.random.default_rng(21)
    calls = [(rng.uniform(-1.5, 1.5, (3, 2)),) for _ in range(4)]
    replaying = replayed_like_traced(clipped_transpose, calls, policy, traced_once=True)
    assert blocks(replaying)


def branching(x, w):
    """Operations whose partials branch on a decision taken in the forward pass: a ReLU
    (np.maximum), abs, powers (0 ** 0 and a zero base decided), on arrays and on elements."""
    h = x.copy()
    total = 0.0
    for k in range(3):
        h = np.maximum(h * w - 0.5, 0.0) + np.abs(h - w) ** 2 + h ** w
        total = total + np.minimum(h[k], h[k + 1]) ** 2 + abs(h[0] - h[-1])
    return np.sum(h) + total


@pytest.mark.parametrize("policy", POLICIES)
def test_operations_whose_partials_branch_compile(policy):
    """Their steps keep the decision beside the values their partials read, and run as lines
    of a block, with calls whose ties, zeros and signs decide otherwise: as traced, bit for
    bit. (0 ** w's partials divide by zero on some calls only: ignored, so that the replay's
    reverse pass hears the same events on every call.)"""
    from mutad.engines.replay import Pure
    values = np.array([0.0, 0.5, 1.0, 2.0])
    rng = np.random.default_rng(16)
    calls = [(rng.choice(values, 6), rng.choice(values, 6)) for _ in range(6)]
    with np.errstate(divide="ignore", invalid="ignore"):
        replaying = replayed_like_traced(branching, calls, policy, argnums=(0, 1))
    decided = [member for block in blocks(replaying) for member in block.steps
               if type(member) is Pure and member.rule.decide is not None]
    assert len(decided) >= 9


def periodic(u, c):
    """np.roll with its shift, np.where with a 0-d operand: rules with settings and scalars."""
    for _ in range(4):
        u = u - 0.3 * (u - np.roll(u, 1))
        u = np.where(u > 0.5, c, u)
    return np.sum(u * u)


@pytest.mark.parametrize("policy", POLICIES)
def test_rules_with_settings_and_scalar_operands_compile(policy):
    """A rule's call with a setting (np.roll's shift) or a 0-d operand (held by a replay as
    NumPy's scalar, handed to the rule as the 0-d array it stands for) writes its lines in
    its block."""
    from mutad.engines.replay import Function
    rng = np.random.default_rng(18)
    calls = [(rng.uniform(0, 1, 7), np.float64(0.25 + 0.1 * k)) for k in range(4)]
    replaying = replayed_like_traced(periodic, calls, policy, argnums=(0, 1))
    assert sum(type(member) is Function and member.rule.__name__ in ("roll", "where")
               for block in blocks(replaying) for member in block.steps) == 8


def controlled_steps(y, rate, tolerance=1e-3):
    """An adaptive Euler-Heun integrator: comparisons Python decides on, in its loop."""
    t, h = 0.0, 0.1
    while t < 1.0:
        k1 = -rate * y
        k2 = -rate * (y + h * k1)
        error = np.max(np.abs(h * (k2 - k1) / 2))
        if error < tolerance or h < 1e-3:
            y = y + h * (k1 + k2) / 2
            t += h
        h = min(0.9 * h * (tolerance / max(error, 1e-12)) ** 0.5, 1.0 - t + 1e-9)
    return np.sum(y * y)


@pytest.mark.parametrize("policy", POLICIES)
def test_comparisons_and_guards_compile(policy):
    """The comparisons a program's Python decides on (``error < tolerance``: a call that
    makes an array) and the guards on them run as lines of their blocks; a call whose
    decisions go otherwise fails a guard inside a block and records again."""
    from mutad.engines.replay import Call, Guard
    rng = np.random.default_rng(17)
    y, rate = rng.uniform(0.5, 1.0, 3), np.array([1.0, 2.0, 3.0])
    calls = [(y, rate), (y, rate), (y * 1.001, rate), (y, rate * 1.5)] + [(y, rate)] * 3
    replaying = replayed_like_traced(controlled_steps, calls, policy, argnums=(0, 1))
    members = [type(member) for block in blocks(replaying) for member in block.steps]
    assert members.count(Guard) > 5 and members.count(Call) > 5


def test_the_reverse_pass_warns_as_tracing_does():
    """A replay's reverse pass warns what the traced call's did, at the user's line with the
    operation named ("..., in the gradient of np.power"), not from mutad's own modules; a
    call whose reverse pass hears other events than the recorded ones is traced."""
    def f(x, w):
        return np.sum(x ** w)  # d/dx at x = 0 for w < 1: a division by zero

    def warned(call, *args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call(*args)
        return result, [(str(w.message), w.filename, w.lineno) for w in caught]

    x, w = np.array([0.0, 0.5, 1.0]), np.array([0.5, 2.0, 0.5])
    traced = mutad.value_and_grad(f, argnums=(0, 1))
    expected, expected_warnings = warned(traced, x, w)
    assert expected_warnings and "in the gradient of np.power" in expected_warnings[0][0]
    replaying = mutad.value_and_grad(f, argnums=(0, 1), replay=True)
    for args in [(x, w)] * 3 + [(x + 0.25, w), (x, w)]:
        got, got_warnings = warned(replaying, *args)
        want, want_warnings = warned(traced, *args)
        assert same(got[0], want[0]) and same(got[1], want[1])
        assert got_warnings == want_warnings
    assert program_count(replaying) >= 1


def test_a_block_whose_outputs_get_no_cotangent_finishes_one_step_at_a_time(monkeypatch):
    from mutad.engines.blocks import Block
    left = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda self, *args: (left.append(1), deopt(self, *args)))

    def f(x):
        d = x[:3] @ x[2:]    # a function's rule, compiled: reversed by its step's own back
        C = np.array([[0.1, 0.2, 0.05], [0.0, 0.01, 0.3], [0.2, 0.0, 0.1]])  # a constant
        d = d + (C @ x[1:4]) @ x[:3]
        x = x + d
        a = np.sin(x)        # read only by the next step: its cotangent is a local
        b = a * 2.0          # read by a decision only: no cotangent reaches it
        c = x * 3.0
        if b[0] > 0:         # (through an element, which the block does not know gets none)
            c = c + 1.0
        return (c * c).sum()

    rng = np.random.default_rng(12)
    replaying = replayed_like_traced(f, [(rng.uniform(0.1, 1, 5),) for _ in range(4)])
    assert blocks(replaying) and left


def deposit(positions, charges, cells=8):
    """Cloud-in-cell deposition: ``int(x / dx)`` makes a value only a guard reads."""
    dx = 1.0 / cells
    rho = np.zeros(cells + 1)
    for p in range(len(positions)):
        cell = int(positions[p] / dx)
        frac = positions[p] / dx - cell
        rho[cell] += charges[p] * (1.0 - frac)
        rho[cell + 1] += charges[p] * frac
    return np.sum(rho * rho)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_value_only_guards_read_gets_no_cotangent_and_no_deopt(policy, monkeypatch):
    """``positions[p] / dx``, read by ``int()`` alone, never gets a cotangent: its step has no
    lines in the compiled reverse pass, which once left it at every such step to finish one
    step at a time (``Block.deopt``: ten times slower)."""
    from mutad.engines.blocks import Block
    left = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda self, *args: (left.append(1), deopt(self, *args)))
    rng = np.random.default_rng(15)
    calls = [(rng.uniform(0.05, 0.95, 12), rng.uniform(0.5, 1.5, 12)) for _ in range(4)]
    calls[3] = (calls[2][0], calls[3][1])  # the same cells: replayed, compiled
    replaying = replayed_like_traced(deposit, calls[2:] + calls[2:], policy, argnums=(0, 1))
    assert blocks(replaying) and not left


def nearest_moved(prototypes, samples):
    """Competitive learning: ``np.argmin`` of distances (integers: no cotangent reaches the
    distances, nor the sum of squares they come from) picks the prototype moved toward each
    sample, in place."""
    P = prototypes.copy()
    for x in samples:
        k = np.argmin(((P - x) ** 2).sum(axis=1))
        P[k] += 0.3 * (x - P[k])
    return np.sum(P * P)


@pytest.mark.parametrize("policy", POLICIES)
def test_values_an_integer_result_alone_reads_get_no_cotangent_and_no_deopt(policy,
                                                                              monkeypatch):
    """The distances and their sums, read by ``np.argmin`` alone, never get a cotangent: their
    steps have no lines in the compiled reverse pass, which once left it at each of them to
    finish one step at a time (``Block.deopt``)."""
    from mutad.engines.blocks import Block
    left = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda self, *args: (left.append(1), deopt(self, *args)))
    rng = np.random.default_rng(16)
    prototypes, samples = rng.standard_normal((3, 2)), rng.standard_normal((12, 2))
    calls = [(prototypes, samples), (prototypes, samples * 1.01), (prototypes * 0.99, samples)]
    replaying = replayed_like_traced(nearest_moved, calls + calls, policy, argnums=(0, 1))
    assert blocks(replaying) and not left


def conjugate_gradient(diagonal, b, tol=1e-3):
    """Conjugate gradient with a convergence test: ``np.sqrt(r @ r) < tol`` is a value whose
    only reader is a comparison (a ufunc that records nothing), which a decision reads."""
    n = len(b)
    A = np.outer(np.arange(1.0, n + 1), np.ones(n)) / n ** 2 + np.diag(diagonal)
    A = A + A.T
    x = np.zeros(n)
    r = b.copy()
    p = r.copy()
    rs = r @ r
    for _ in range(n):
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        rs_new = r @ r
        if np.sqrt(rs_new) < tol:
            break
        p *= rs_new / rs
        p += r
        rs = rs_new
    return x @ x


@pytest.mark.parametrize("policy", POLICIES)
def test_the_operands_of_a_value_only_a_decision_reads_get_no_cotangent(policy, monkeypatch):
    """``np.sqrt(rs_new)``, read by ``np.less`` alone (which records nothing, its value a
    bool), never gets a cotangent, nor does what only it reads: its step has no lines in the
    compiled reverse pass, which left it (``Block.deopt``) at every iteration's test to
    finish one step at a time. The replays, at sizes and tolerances that stop the loop at
    other iterations (other decisions: other programs, or guards that fail), give tracing's
    bits."""
    from mutad.engines.blocks import Block
    left = []
    deopt = Block.deopt
    monkeypatch.setattr(Block, "deopt", lambda self, *args: (
        left.append(self.steps[args[2]]), deopt(self, *args)))
    rng = np.random.default_rng(16)
    calls = [(1.0 + rng.random(6), rng.standard_normal(6)) for _ in range(2)]
    calls += [(10.0 + rng.random(6), rng.standard_normal(6)),  # converges sooner
              (1.0 + rng.random(6), 1e-4 * rng.standard_normal(6))]  # at once
    replaying = replayed_like_traced(conjugate_gradient, [c for c in calls for _ in range(3)],
                                     policy, argnums=(0, 1))
    assert blocks(replaying)  # (the last calls' program, replayed compiled)
    assert not any(getattr(step, "ufunc", None) is np.sqrt for step in left)


def test_a_guard_that_fails_inside_a_block_records_again():
    def f(x):
        y = x[np.flatnonzero(x > 0)] * 2.0   # a gather whose size depends on the values
        z = np.sin(y) * y
        return (z * z).sum() + (x * x).sum()

    rng = np.random.default_rng(13)
    x = rng.uniform(-1, 1, 8)
    replaying = replayed_like_traced(f, [(x,)] * 3)  # the third call runs compiled
    assert blocks(replaying)
    traced = replaying.trace
    recorded = []
    replaying.trace = lambda *args, **kwargs: (recorded.append(1), traced(*args, **kwargs))[1]
    other = -x
    assert np.count_nonzero(other > 0) != np.count_nonzero(x > 0)
    before = other.tobytes()
    got = replaying(other)
    assert recorded and other.tobytes() == before
    expected = mutad.value_and_grad(f)(-x)
    assert same(got[0], expected[0]) and same(got[1], expected[1])


def test_a_nan_from_two_nans_has_the_bits_tracing_gives():
    """Where both operands are NaN, NumPy's scalar arithmetic and its ufunc loops may return
    different ones; a compiled block computes such a result again with the ufunc. (Shrunk
    from a random program: infinities, then cos of one element, and a scatter.)"""
    def make(shift=0.0):
        o0 = np.array([0.264, -0.545, 0.279, 0.811]) + shift

        def f(a0):
            t0 = a0 * a0
            a0 *= 1e300
            a0 *= 1e300
            np.copyto(t0[:, 3:0:-1], t0[:, 0:3])
            v1 = np.diagonal(a0, 1)
            t2 = v1 * 1.5
            t0[0, 0] = t0[0, 2]
            np.multiply.at(t0, [-1, -1, -1, 0], np.cos(a0[0, 3]))
            v3 = np.broadcast_to(v1, (2,) + v1.shape)
            t4 = v3 * 1.5
            outputs = (a0, t0, t2, t4, v1, v3)
            return sum((np.linspace(1.0, 2.0, np.size(y)).reshape(np.shape(y)) * y).sum()
                       for y in outputs)
        return f, o0.reshape(4, 1).T

    f, _ = make()
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(f, [(make(0.25)[1],), (make()[1],), (make()[1],)])
    assert blocks(replaying)


def test_a_compiled_product_with_an_infinite_factor_is_times_own():
    """A compiled block multiplies a float64 cotangent by its partial and recomputes only a
    product that is not finite (``products.times``: zero where a factor is zero, whatever the
    other): a zero cotangent times an infinite or NaN partial is zero, a finite one times an
    infinite partial is infinite, as traced."""
    def f(x):
        total = 0.0
        for i in range(4):
            a = x[i] * x[(i + 1) % 4]
            total = total + a * x[(i + 2) % 4] + x[i] * 0.5
        return total

    calls = [(np.array(v),) for v in ([1.0, np.inf, 0.0, 2.0], [0.0, np.nan, 1.0, -np.inf],
                                       [1e300, 1e300, 1e-300, 3.0], [2.0, -0.0, 0.0, -3.0],
                                       [1.0, np.inf, 0.0, 2.0])]
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(f, calls, traced_once=True)
    assert blocks(replaying)


def test_a_compiled_product_of_arrays_masks_as_traced():
    """In a compiled block an array's cotangent times an array partial is the product where
    their dot product is finite (``products.unmasked``, the same dot product), else
    ``products.times``: zero where a factor is zero, whatever the other (the infinite slope of
    sqrt at 0 times a zero cotangent), and the masked path's zeros, as traced."""
    def f(x, w):
        total = 0.0
        for _ in range(3):
            y = np.sqrt(x) * w
            x = np.exp(-y) + x * 0.5
            total = total + y.sum()
        return total

    rng = np.random.default_rng(3)
    calls = []
    for case in range(5):
        x, w = rng.random(6), rng.standard_normal(6)
        if case % 2:
            x[1], w[1] = 0.0, 0.0  # sqrt's partial infinite where the cotangent is zero
            w[4] = -0.0
        calls.append((x, w))
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(f, calls, argnums=(0, 1), traced_once=True)
    assert blocks(replaying)


UNARY = (np.sin, np.tanh, np.negative, np.square, np.exp)
BINARY = (np.add, np.subtract, np.multiply, np.divide, np.maximum)


@st.composite
def elementwise_chains(draw):
    """Straight-line programs of small elementwise operations on two arrays, their elements
    and Python numbers: each operation reads earlier values, some values are read only by a
    decision or by an in-place update (of a whole array or a slice, which a block runs as
    it is), some are assigned into one element of an array, constants and slices are assigned,
    and the result sums a few of them."""
    operations = []
    for k in range(draw(st.integers(2, 14))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "constant", "element",
                                     "decide", "update", "assign", "region", "boundary"]))
        a, b = draw(st.integers(0, k + 1)), draw(st.integers(0, k + 1))
        operations.append((kind, a, b, draw(st.integers(0, 4)),
                           draw(st.sampled_from([0.5, -1.5, 2.0, 3]))))
    kept = draw(st.lists(st.integers(0, len(operations) + 1), min_size=1, max_size=3))
    return operations, kept


def chain(operations, kept):
    def f(x, y):
        values = [x, y]
        for kind, a, b, which, number in operations:
            u, v = values[a], values[b]
            if kind == "unary":
                values.append(UNARY[which](np.tanh(u) if which == 4 else u))
            elif kind == "binary":
                values.append(BINARY[which](u, v * v + 1.0 if which == 3 else v))
            elif kind == "constant":
                values.append(u * number if which % 2 else number - u)
            elif kind == "element":
                values.append(u[which % u.size] if u.ndim else u * number)
            elif kind == "decide":
                values.append(u * 2.0 if np.sum(v) > 0 else u - 1.0)
            elif kind == "assign" and u.ndim:  # one element of a new array
                w = u * 1.0
                w[which % w.size] = v[which % v.size] * number if v.ndim else v * number
                values.append(w)
            elif kind == "region" and u.ndim and v.ndim:  # a stencil's update of a slice
                w = u * 1.0
                w[1:] += number * (v[:-1] - w[1:])
                values.append(w)
            elif kind == "boundary" and u.ndim:  # a constant assigned, a region copied
                w = u + 0.0
                w[which % w.size] = number
                w[-2:] = w[:2] if which % 2 else v[-2:] if v.ndim else v
                values.append(w)
            else:
                w = u + 0.0
                w += v
                values.append(w)
        return sum(np.sum(values[i]) for i in kept)
    return f


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elementwise_chains(), st.sampled_from(POLICIES), st.sampled_from([3, 128]))
def test_random_elementwise_chains_compile_bit_for_bit(program, policy, block_steps):
    """Also with runs cut into blocks of 3 steps (``replay.BLOCK_STEPS``): a value made in one
    block and read in the next."""
    from mutad.engines import replay
    f = chain(*program)
    rng = np.random.default_rng(len(program[0]))
    calls = [(rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5)) for _ in range(3)]
    calls.append(tuple(a.copy() for a in calls[-1]))  # (replayed, whatever a decision took)
    kept, replay.BLOCK_STEPS = replay.BLOCK_STEPS, block_steps
    try:
        replayed_like_traced(f, calls, policy, argnums=(0, 1))
    finally:
        replay.BLOCK_STEPS = kept


def leapfrog_chain(q, p, steps=4):
    """W2's integrator, small: every temporary a large one the reverse pass recomputes."""
    def force(q):
        padded = np.concatenate((np.zeros(1), q, np.zeros(1)))
        d = padded[1:] - padded[:-1]
        cube = d * d * d
        return (d[1:] - d[:-1]) + 0.7 * (cube[1:] - cube[:-1])

    for _ in range(steps):
        p += 0.05 * force(q)
        q += 0.1 * p
        p += 0.05 * force(q)
    return np.sum(q * q) + np.sum(p * p)


def exp_chain(x):
    """W5's chain with exp where it takes tanh: exp's partial reads its output ``b``, which the
    next two steps overwrite, so the reverse pass recomputes it from ``a`` (tanh's partial reads
    its input, which stays alive for ``c = ... * a``: W5 itself recomputes nothing)."""
    a = np.sin(x) * x
    b = np.exp(a)
    b += x
    b *= -0.1
    c = np.exp(b) * a
    return np.cos(c, out=c).sum()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("f, make", [
    (leapfrog_chain, lambda rng: (rng.standard_normal(3000), rng.standard_normal(3000))),
    (exp_chain, lambda rng: (rng.uniform(-3, 3, 20000),)),
    (heat_stencil, lambda rng: (rng.standard_normal(3000), rng.standard_normal(3000), 0.3)),
    # temporaries of 4 to 16 KiB: the replay once held them to the end of its forward pass
    (heat_stencil, lambda rng: (rng.standard_normal(800), rng.standard_normal(800), 0.3)),
    (leapfrog_chain, lambda rng: (rng.standard_normal(700), rng.standard_normal(700))),
])
def test_large_temporaries_are_recomputed_by_the_replay_as_by_tracing(f, make, policy):
    """Temporaries of 4 KiB or more, which tracing recomputes in the reverse pass rather than
    keep, are replayed: found as the traced reverse pass found them (read alive, recomputed
    from the bytes the undos put back, recomputed once for several records), so the gradients
    are the traced ones bit for bit, and neither the recording nor the replay holds more memory
    than tracing."""
    rng = np.random.default_rng(3)
    argnums = tuple(range(len(make(rng)) - (f is heat_stencil)))
    calls = [make(rng) for _ in range(4)]
    traced = mutad.value_and_grad(f, argnums=argnums, policy=policy)
    # one-time allocations (NumPy's and mutad's caches, lazy imports) of a process's first
    # recording are not the recording's: a recording of its own makes them before measuring
    mutad.value_and_grad(f, argnums=argnums, policy=policy, replay=True)(*calls[1])
    traced(*calls[1])
    # the recording holds no temporary longer than the program does (``Recorder.bind``)
    recording = mutad.value_and_grad(f, argnums=argnums, policy=policy, replay=True)
    assert not recording.programs
    assert peak_bytes(lambda: recording(*calls[0])) <= 1.5 * peak_bytes(
        lambda: traced(*calls[0])) + 512 * 1024
    replaying = replayed_like_traced(f, calls, policy, argnums=argnums, traced_once=True)
    assert not replaying.reasons
    program = next(iter(replaying.programs.values()))
    assert program.recomputes is not None and program.recomputed
    args = calls[0]
    assert peak_bytes(lambda: replaying(*args)) <= 1.1 * peak_bytes(lambda: traced(*args)) \
        + 64 * 1024


def test_a_replay_recomputes_what_the_recording_kept_when_an_undo_is_decided_otherwise():
    """Whether a write is undone by its inverse (which reads an operand the reverse pass
    recomputes) or by saving what it overwrites is decided on each call's values: a replay
    whose undo differs from the recording's recomputes where the recording read a value kept
    for several records, and one that would invert where the recording saved traces the call
    (it cannot tell how tracing would find the operand); every call as traced, bit for bit."""
    def f(x, s):
        t = np.sin(x)
        w = t * s  # where s spans many decades, the inverse of ``y += w`` would amplify
        y = x * 1.0  # the errors of the inverse of ``y *= w`` too much (``Tape.undo_for``):
        y *= w       # what it overwrites is saved, and ``w`` is not read by its undo
        y += w
        z = y + w * w
        return np.sum(z * z) + np.sum(y * t)

    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 1.5, 3000)
    ones, spread = np.ones(3000), np.where(rng.random(3000) < 0.5, 1e-9, 1.0)
    for order in ([ones, spread, ones, spread, ones], [spread, ones, spread, ones]):
        replayed_like_traced(f, [(x + 0.01 * k, s) for k, s in enumerate(order)],
                             argnums=(0, 1))


def scaled_and_shifted(x, c, v):
    """Writes each undone by its inverse, checked and measured a piece at a time: into a
    temporary and into the caller's argument."""
    y = x * 1.0
    y *= c   # undone by y /= c: within 2 ulps wherever the product is a normal float
    y += v   # undone by y -= v, but where v absorbs y
    y *= 3.0
    x *= c
    x -= v
    np.divide(x, c, out=x)
    return np.sum(y * y) + np.sum(np.sin(x) * y)


def _deciding_calls(rng, n=43):
    """Arguments of ``scaled_and_shifted`` whose values change how its writes are undone, in
    some pieces only: none lost; products that are zero, subnormal or overflow, divisions by
    zero; terms that absorb the target; a NaN and infinities; factors spanning so many decades
    that inverting their writes would amplify errors too much (a checkpoint instead)."""
    def call(x=None, c=None, v=None):
        x = rng.uniform(0.5, 1.5, n) if x is None else x
        c = rng.uniform(0.5, 2.0, n) if c is None else c
        v = rng.uniform(-1.0, 1.0, n) if v is None else v
        return x, c, v

    def at(values, places, what):
        values = values.copy()
        values[places] = what
        return values

    ones, places = np.ones(n), [2, 17, 40]
    return [
        call(),
        call(c=np.full(n, 3.0), x=0.1 * np.arange(1, n + 1)),  # x * 3 / 3 is not always x
        call(c=at(ones, places, [0.0, 1e-310, 1e300])),  # zero, subnormal, overflowing products
        call(x=at(rng.uniform(0.5, 1.5, n), places, [5e-324, -0.0, 1e-300])),
        call(v=at(rng.uniform(-1.0, 1.0, n), places, [1e20, -1e17, 1e300])),  # absorbed
        call(x=at(rng.uniform(0.5, 1.5, n), places, [np.nan, np.inf, -np.inf])),
        call(c=np.geomspace(1e-150, 1e150, n)),  # an error growth of 10^300: saved
        call(),
    ]


@pytest.mark.parametrize("policy", POLICIES)
def test_writes_checked_a_piece_at_a_time_replay_as_they_trace(monkeypatch, policy):
    """Long writes are checked a piece at a time, in one pass that finds the elements their
    inverses would not give back and measures their growth (``writes._verify``), on each call's
    values: a replay decides as tracing does on calls whose values change those decisions, in
    some pieces only, bit for bit, and the caller's arrays come back as they were."""
    import mutad.engines.writes

    monkeypatch.setattr(mutad.engines.writes, "CHUNK", 4)  # 11 pieces, the last one short
    monkeypatch.setattr(mutad.engines.writes, "PIECE", 1)
    calls = _deciding_calls(np.random.default_rng(8))
    with np.errstate(all="ignore"):  # (a call that warns where the recording did not traces)
        replayed_like_traced(scaled_and_shifted, calls, policy, argnums=(0, 1, 2),
                             traced_once=True)
        for x, c, v in calls:  # the gradient is the checkpoint policy's
            got = mutad.gradient(scaled_and_shifted, x.copy(), c, v, argnums=(0, 1, 2),
                                 policy=policy)
            expected = mutad.gradient(scaled_and_shifted, x.copy(), c, v, argnums=(0, 1, 2),
                                      policy="checkpoint")
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)


# ----------------------------------------------------------------------------------------------
# Random programs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rp.programs(max_steps=6), st.sampled_from(POLICIES), st.booleans())
def test_random_programs_replay_as_they_trace(program, policy, recomputing):
    """Recorded on shifted arguments, replayed on others: the value and gradients are the
    traced ones bit for bit, and the caller's bytes are unchanged (``rp.check_replay``).
    ``recomputing``: every temporary that can be is recomputed in the reverse pass (not only
    those of 4 KiB or more), by the replay as by tracing (``replay.Recomputed``)."""
    from mutad.engines import recompute
    f, args = program.make()
    try:
        with np.errstate(all="ignore"):
            weights = rp._weights(f(*args))
    except Exception:  # noqa: BLE001 - NumPy refuses the program: nothing to compare
        return
    if "constants" in program.features:
        return
    small, recompute.SMALL = recompute.SMALL, 0 if recomputing else recompute.SMALL
    try:
        replaying = rp.check_replay(program, policy, weights, rp.Outcome())
    finally:
        recompute.SMALL = small
    # (the second of two calls on the same arguments replays, unless the program is traced)
    assert replaying is None or replaying.reasons or replays(replaying) >= 1


def test_a_plain_array_f_changes_after_a_step_read_it_is_not_replayed():
    """An integer array f makes is plain (no step writes it): a replayed step reads it as it
    is when the program was recorded, so a program that changes it after a step read it
    (``w += 1``) is traced on every call, with the reason."""
    def changed(x):
        w = np.arange(2)
        y = x + w
        w += 1
        return (y * x * w).sum()

    def unchanged(x):
        w = np.arange(2)
        return ((x + w) * (x * w)).sum()

    for f, replayable in ((changed, False), (unchanged, True)):
        replayed = mutad.value_and_grad(f, replay=True)
        for scale in (1.0, 2.0, 3.0):
            x = np.array([1.0, 2.0]) * scale
            a, b = replayed(x), mutad.value_and_grad(f)(x)
            assert a[0] == b[0] == f(x) and np.array_equal(a[1], b[1])
        assert bool(replayed.reasons) is not replayable
        assert replays(replayed) == (2 if replayable else 0)
        if not replayable:
            assert "changed after an operation read it" in str(replayed.reasons)


def test_a_rule_refusing_an_array_outside_argnums_while_recording_is_traced_instead():
    """Regression: a recording follows the arrays outside argnums as inputs of the program, so
    a rule taking one as a setting (a cubic interp1d's knots, which mutad does not
    differentiate) refused it as differentiated, where a traced call takes it as a constant;
    the call is now traced, with the reason."""
    import scipy.interpolate

    knots = np.linspace(0.0, 1.0, 8)
    f = lambda y, xs: scipy.interpolate.interp1d(xs, y, kind="cubic")(0.5)  # noqa: E731
    g = mutad.grad(f, replay=True)
    for scale in (1.0, 2.0, 1.0):
        y = knots ** 2 * scale
        assert g(y, knots).tobytes() == mutad.grad(f)(y, knots).tobytes()
    assert any("refused an array outside argnums" in why for why in g.reasons.values())


def test_a_real_spectrum_transformed_back_from_a_slice_replays_in_compiled_blocks():
    """irfft and hfft of a slice of a real array: their rules give a complex cotangent for the
    real input, whose real part the traced engine adds (``Shadows.add``); the compiled reverse
    pass added it whole into the real shadow's region, and raised from the third call on."""
    w = np.arange(10.0)
    for f in (lambda p: (np.fft.irfft(p[:6]) * w).sum(),
              lambda p: (np.fft.hfft(np.sin(p)[1:6]) * w[:8]).sum(),
              lambda p: (np.fft.irfft(p[::2], n=6) * w[:6]).sum()):
        replaying = mutad.value_and_grad(f, replay=True)
        for i in range(4):
            p = np.linspace(0.1, 1.0, 8) + i
            value, grad = replaying(p)
            assert value == f(p) and same(grad, mutad.grad(f)(p))
        assert not replaying.reasons and replays(replaying) == 3


def test_a_view_of_a_python_float_argument_replays_as_the_array_it_is():
    """Regression: np.fill_diagonal(A, d) of a Python float d writes np.ravel(d), a view of
    shape (1,) of d's weak buffer; the replay stored each value of a weak buffer as the
    Python number, so the view became a float and the reverse pass raised AttributeError."""
    from cases import replays_as_traced

    def f(A, d):
        np.fill_diagonal(A, d)
        return (A @ A).sum()

    def g(A, d):
        v = np.ravel(d)
        A[0] += v
        return (A * A).sum() + (v * v).sum()

    for h in (f, g):
        calls = [(np.arange(9.0).reshape(3, 3) * s, 0.5 * s) for s in (1.0, 2.0, 1.0)]
        before = [(a.copy(), d) for a, d in calls]
        assert not replays_as_traced(h, calls, argnums=(0, 1), replayed=2).reasons
        assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(calls, before))


def test_a_broadcast_scalar_of_another_dtype_than_float64_replays_in_compiled_blocks():
    """Regression: in a compiled block, the cotangent of a 0-d float32 (or complex) value
    broadcast against an array (x + x[1] ** 2) was summed into NumPy's scalar, where the
    block holds a 0-d array for it, and the product of the next step written into it
    (out=dy) raised TypeError from the third call on."""
    from cases import replays_as_traced

    for f in (lambda x: (x + x[1] ** 2).sum(), lambda x: (x * (x[0] * 3.0)).sum(),
              lambda x: (x - x.sum() * x[2] ** 2).sum(),
              lambda x: np.abs(x.astype(np.complex128) * (x[1] * 1j) ** 2).sum()):
        calls = [(np.linspace(0.1, 0.5, 4).astype(dtype) * s,)
                 for dtype in (np.float32, np.float64) for s in (1.0, 2.0, 3.0, 1.0)]
        assert not replays_as_traced(f, calls, replayed=6).reasons


def test_a_cotangent_laid_out_otherwise_than_in_c_order_is_not_adopted_by_a_replay():
    """Regression: S += np.outer(S[:, 0], w) on an F-ordered S: the lean pullback of the
    write handed S's F-ordered cotangent over as the shadow of the outer product's C-ordered
    buffer (tracing's Shadows.add copies it into C order), and the outer product's pullback,
    a matmul, rounded in the order of that memory: gradients an ulp off the traced ones from
    the third call on."""
    from cases import replays_as_traced

    def f(X, W):
        S = X * 1.0
        S += np.outer(S[:, 0], W[1])
        return (S * S).sum()

    def g(X, W):
        S = X * W
        S = S + W[::-1]
        return (S.T @ np.arange(3.0)).sum() + (S.sum(axis=0) ** 2).sum()

    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    for h in (f, g):
        calls = [(np.asfortranarray(X) * s, W) for s in (1.0, 2.0, 3.0, 4.0)] + \
                [(X * s, np.asfortranarray(W)) for s in (1.0, 2.0, 3.0)]
        assert not replays_as_traced(h, calls, argnums=(0, 1), replayed=5).reasons


def test_a_zero_cotangent_keeps_its_sign_through_a_replayed_column_write():
    """Regression (of a first fix of the test above): a column written from a whole buffer's
    values (S[:, 0] = S[:, 2] * 2.0) added its zero cotangent (-0.0: abs's partial of a
    negative value times 0) into a new zero shadow, +0.0, where tracing's Shadows.add copies
    it, -0.0: the replayed gradient's sign of zero differed from the traced one."""
    from cases import replays_as_traced

    def f(X, e):
        S = X * 1.0
        S[:, 0] = S[:, 2] * 2.0
        return (np.abs(S) * e).sum()

    X = np.array([[0.5, 1.0, -1.0, 0.0], [0.5, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, -1.0]])
    e = np.zeros((3, 4))
    e[1, 1] = 1.0
    calls = [(X, e), (np.asfortranarray(X), e)] * 3
    assert not replays_as_traced(f, calls, replayed=4).reasons


def test_factors_of_mutad_linalg_are_not_replayed_with_the_recorded_calls_numbers():
    """Regression: lu_factor_'s pivots and a factor's growth (how much undoing a solve can
    amplify rounding, computed from the factor's memory) entered the recorded program as the
    first call's numbers: a replay on a matrix that pivots otherwise solved with the recorded
    pivots (a wrong value), and one on an ill-conditioned factor undid by inversion the solves
    tracing saves (a gradient 5e-4 off). Such calls are traced, with the reason."""
    from mutad.linalg import cholesky_, ldiv_, lu_factor_

    rng = np.random.default_rng(1)

    def lu(A, u):
        F = lu_factor_(A)
        ldiv_(F, u)
        ldiv_(F, u)
        return (u ** 2).sum()

    def cholesky(A, u):
        F = cholesky_(A)
        ldiv_(F, u)
        ldiv_(F, u)
        return (u ** 2).sum()

    A = rng.random((4, 4)) + 2 * np.eye(4)
    calls = [(A, rng.random(4)), (A[[1, 0, 2, 3]].copy(), rng.random(4))] * 2
    replaying = replayed_like_traced(lu, calls, argnums=(0, 1), replayed=False)
    assert "lu_factor_'s pivots" in str(replaying.reasons)

    def conditioned(c):
        Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
        return Q @ np.diag(np.geomspace(1.0, c, 4)) @ Q.T

    calls = [(conditioned(c), rng.random(4)) for c in (2.0, 1e14, 1e14, 2.0)]
    replaying = replayed_like_traced(cholesky, calls, argnums=(0, 1), replayed=False)
    assert "growth of a factor" in str(replaying.reasons)


CONSTANT_WRITES = {
    "fill_diagonal": lambda x: _with_diagonal(np.zeros((3, 3)), 2.0, x),
    "fill_diagonal of a constant read first": lambda x: (np.zeros((3, 3))[0] + x).sum()
    + _with_diagonal(np.ones((3, 3)), np.inf, x, inverse=True),
    "put, copyto": lambda x: _put_copyto(x),
    "ufunc.at": lambda x: _added_at(x),
    "copyto where a decision of x": lambda x: _copied_where(x),
}


def _with_diagonal(a, value, x, inverse=False):
    np.fill_diagonal(a, value)
    return ((1.0 / (a + 1.0) if inverse else a) @ x).sum() + (x * x).sum()


def _put_copyto(x):
    a = np.ones(3)
    np.put(a, [0, 2], [5.0, 7.0])
    b = a * x
    np.copyto(a, 3.0)  # after a record read a: its bytes saved, as tracing saves them
    return (a * b).sum()


def _added_at(x):
    a = np.ones(3)
    np.add.at(a, [0, 0, 1], 1.0)
    return (a * x).sum()


def _copied_where(x):
    m = (x > 1.0).astype(float)
    np.copyto(m, 2.0, where=m > 0)
    return (m * x).sum()


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("name", CONSTANT_WRITES)
def test_functions_writing_constants_into_the_programs_arrays_replay(name, policy):
    """np.fill_diagonal, np.put, np.copyto and ufunc.at writing constants into an array the
    function allocated (np.fill_diagonal(r2, np.inf) of a pair-distance matrix) are redone by
    the replay (they left the call traced); replayed as traced, bit for bit, on inputs that
    change the decisions the written values hold."""
    calls = [(np.arange(3.0) * (0.5 + 0.4 * i),) for i in range(5)]
    replayed_like_traced(CONSTANT_WRITES[name], calls, policy, traced_once=True)


def test_a_function_writing_constants_into_an_undifferentiated_argument_replays():
    """The caller's array, written by np.fill_diagonal inside f, is as it was after each
    replayed call, and the gradient reads the written values."""
    def f(x, w):
        np.fill_diagonal(w, 0.0)
        return (w @ x).sum()

    calls = [(np.arange(3.0) + i, np.full((3, 3), i + 1.0)) for i in range(4)]
    replaying = replayed_like_traced(f, calls, traced_once=True)
    assert np.array_equal(replaying(*calls[2])[1], np.full(3, 6.0))


def test_a_walk_meets_an_array_of_an_ended_differentiation_as_its_value():
    """What a replay compares of a traced array that f reaches (the pullbacks of SciPy's
    solvers replay functions closing over the enclosing differentiation's parameters) is its
    value, not its tape's records; and the walk is kept (``Reached``)."""
    from mutad.engines.reverse import ReverseTape, Traced
    from mutad.engines.replay import reach

    held = collections.deque()  # (a list would hold NumPy's value after the call)
    mutad.grad(lambda x: held.append(x) or (x * x).sum())(np.linspace(0.5, 1.5, 3))
    traced = held[0]
    assert type(traced) is Traced
    kept = []
    objects, arrays, unfollowed = reach(lambda: traced, kept=kept)
    assert unfollowed is None and not any(type(x) is ReverseTape for x in objects)
    assert any(a is traced.value for a in arrays)
    assert kept and kept[0].holds()


def test_a_function_of_constants_that_writes_nothing_and_returns_a_value_replays():
    """Regression: np.diagflat of an array the function computed from constants (a Jacobi
    iteration's D⁻¹) was traced on every call ("a function that writes into an array and
    returns a value": mutad does not know which arguments a NumPy function it composes writes).
    It is a call, replayed; a replay in which such a call writes into an array (the values may
    decide: np.nan_to_num(copy=False) of a NaN) fails its guard, and is traced."""
    from cases import replays_as_traced

    def jacobi(b):
        a = 4 * np.eye(b.size) - np.eye(b.size, k=1) - np.eye(b.size, k=-1)
        d = np.diag(a)
        rest = a - np.diagflat(d)
        x = np.zeros_like(b)
        for _ in range(30):
            x = (b - rest @ x) / d
        return x @ x

    replaying = replays_as_traced(jacobi, [(np.linspace(-1.0, 1.0, 6) * s,) for s in (1, 2, 3)],
                                   replayed=2)
    assert not replaying.reasons

    # the check of such a call in a replay: an array it writes fails the replay's guard
    from mutad.engines.replay import GuardFailed, _writing_nothing

    def fill(a, value):
        a[np.isnan(a)] = value
        return a.sum()

    checked = _writing_nothing(fill)
    assert checked(np.ones(3), 0.0) == 3.0
    with pytest.raises(GuardFailed):
        checked(np.array([1.0, np.nan]), 0.0)


def _complement_of_positives(x):
    i = np.setdiff1d(np.arange(x.size), np.nonzero(x > 0)[0])
    return (x[i] ** 2).sum() + x.sum()


def _union_of_extremes(x):
    i = np.union1d(np.argsort(x)[:2], np.nonzero(x > 1.0)[0])
    return (x[i] * 3.0).sum() + (x * x).sum()


@pytest.mark.parametrize("f", [_complement_of_positives, _union_of_extremes])
def test_a_numpy_function_of_a_plain_array_and_constants_is_replayed(f):
    """Regression: a NumPy function mutad composes (np.setdiff1d, np.union1d), not knowing
    which arguments it writes, given a plain array (np.arange's) and a constant the program
    computed (an index): the recording raised AttributeError on the first call (it read the
    plain array as a traced one); given two constants, it traced every call. It is a call of
    the program, checked to write nothing."""
    calls = [(np.array(x),) for x in ([1.0, -2.0, 3.0, -0.5, 1.0, 2.0],
                                      [1.5, -2.5, 3.5, -0.25, 1.0, 2.0],
                                      [-1.0, 2.0, -3.0, 0.5, -1.0, -2.0],
                                      [1.0, -2.0, 3.0, -0.5, 1.0, 2.0],
                                      [1.0, -2.0, 3.0, -0.5, 1.0, 2.0])]  # (the last replays)
    replaying = replayed_like_traced(f, calls)
    assert not replaying.reasons


def _ones_for_positives(x):
    k = np.count_nonzero(x > 0)
    return (np.array(k * [1.0] + [0.0] * (x.size - k)) * x).sum()


def _repeated_by_argmax(x):
    return len([0.0] * np.argmax(x)) * x.sum() + len("ab" * np.argmin(x)) * x[0]


@pytest.mark.parametrize("f", [_ones_for_positives, _repeated_by_argmax])
def test_a_count_computed_from_traced_values_repeats_a_sequence(f):
    """Regression: NumPy's integer scalar times a list, a tuple or a string repeats it
    (np.count_nonzero(m) * [1.0]); the recording holds that scalar as a traced constant, whose
    product broadcast over the list's items instead: a wrong value on the recording call, and
    the same one replayed. It repeats the sequence, its count a guard of the replay."""
    calls = [(np.array(x),) for x in ([1.0, -2.0, 3.0, -0.5, 1.0, 2.0],
                                      [1.5, -2.5, 3.5, -0.25, 1.0, 2.0],
                                      [-1.0, 2.0, -3.0, 0.5, -1.0, -2.0],
                                      [-1.5, 2.5, -3.5, 0.25, -1.0, -2.0])]
    for (x,) in calls:
        assert mutad.value_and_grad(f)(x.copy())[0] == f(x.copy())
    replayed_like_traced(f, calls)


def test_a_float_scalar_times_a_sequence_raises_as_numpys_does():
    """NumPy's float scalar times a list is Python's TypeError (only an integer repeats a
    sequence); a traced one broadcast over the list's items, in both modes."""
    def f(x):
        try:
            return len(x[0] * [1.0, 2.0, 3.0]) * x.sum()
        except TypeError:
            return 2.0 * x.sum()

    x = np.array([1.5, 2.0])
    assert f(x) == 7.0
    assert mutad.value_and_grad(f)(x)[0] == 7.0
    assert mutad.jvp(f, (x,), (np.ones(2),))[0] == 7.0
    replayed_like_traced(f, [(x,), (x * 2,)])


def test_a_derived_index_handed_to_code_taking_numpys_scalars_alone_is_traced():
    """Regression: the recording holds an index computed from traced values as a traced
    constant, which NumPy's random generators refuse (np.random.default_rng(np.argmax(x)):
    TypeError; rng.choice(k): IndexError) where tracing hands them NumPy's scalar, and refuses
    a view of its bytes as another dtype: the replaying function raised on every call. Such a
    signature is traced, reasons say why."""
    def seeded(x):
        return (x * np.random.default_rng(np.argmax(x)).normal(size=x.size)).sum()

    def chosen(x):
        return x[np.random.default_rng(0).choice(np.count_nonzero(x > 0) + 1)] * 2.0

    def bytes_viewed(x):  # (a view of a constant's bytes the recording refuses, as a traced's)
        return x.sum() * (x > 0).view(np.uint8).sum() + np.argsort(x).view(np.float64)[0]

    calls = [(np.array(x),) for x in ([1.0, -2.0, 3.0], [4.0, 2.0, -3.0], [1.0, -2.0, 3.0])]
    for f in (seeded, chosen, bytes_viewed):
        replaying = replayed_like_traced(f, calls, replayed=False)
        assert any("recording raised" in why for why in replaying.reasons.values())


def test_an_array_allocated_from_a_comparison_is_followed_as_tracing_follows_it():
    """np.array(m, dtype=float), np.zeros_like(k, dtype=float) of a comparison's or an index's
    result are allocations, which tracing follows even of plain arrays: a traced value written
    into one is replayed, where what a ufunc computes from such results alone is refused."""
    def f(x):
        m = x > 0
        w = np.array(m, dtype=float)
        w[~m] = x[~m]
        v = np.zeros_like(np.argsort(x), dtype=float)
        v += x
        return (w * w).sum() + (v * x).sum()

    calls = [(np.array(x),) for x in ([0.5, 1.25, -2.0, 0.3], [-0.5, 2.25, 2.0, 0.0],
                                      [0.0, 1.0, 3.0, -1.0], [0.5, 1.25, -2.0, 0.3])]
    replaying = replayed_like_traced(f, calls)
    assert not replaying.reasons
