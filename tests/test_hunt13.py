"""Wrong answers found by differential hunting: replayed calls compared with traced ones, bit
for bit, on inputs that change the recorded call's decisions, and the caller's data."""

import numpy as np
import scipy.integrate
import pytest

import mutad


def _same(a, b):
    """Bit for bit, types included, through tuples."""
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype \
        and np.shape(a) == np.shape(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _replayed_as_traced(f, inputs, **options):
    """Each input three times through one replaying function, each call's value and gradient
    against a traced call's, and the caller's array left as it was."""
    replaying = mutad.value_and_grad(f, replay=True, **options)
    for x in inputs:
        for _ in range(3):
            given = x.copy()
            got = replaying(given)
            assert given.tobytes() == x.tobytes()
            assert _same(got, mutad.value_and_grad(f, **options)(x.copy()))


# ----------------------------------------------------------------------------------------------
# Under a memory budget, a replayed chain (the writes into a buffer rebuilt from snapshots)
# holds what its redone writes read alive for the whole call; a temporary that records of later
# writes also read alive was let go after the last of those records, so the chain's redo of an
# earlier write read None in its place: the replay raised NumPy's casting error (multiply of an
# object array) on every call where tracing computes the gradient


def _rebuilt_from_a_temporary(x):
    u = x * 1.0
    w = np.log(np.abs(u) + 1e-3)  # large: the reverse pass reads it alive
    u *= w  # rebuilt by the chain of u, from w
    u += w
    u /= 1 + w * w
    return (u * x).sum()


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_chain_reads_what_records_also_read_alive(policy):
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(600), np.linspace(-2.0, 3.0, 600)]
    _replayed_as_traced(_rebuilt_from_a_temporary, inputs, memory=0, policy=policy)


# ----------------------------------------------------------------------------------------------
# A function with a rule that gives a Python float (scipy.integrate.quad's integral, of a
# traced bound) is held as one (``replay._store``); compiled into a block from the second
# replay on, it was held as NumPy's float64, so the gradient's value was np.float64 where
# tracing (and NumPy's call) give a float


def _integral_to(x):
    return scipy.integrate.quad(lambda t: t * t, 0.0, x[0])[0]


def _integral_of_sine(x):
    return scipy.integrate.quad(np.sin, 0.0, x[0])[0]


@pytest.mark.parametrize("f", [_integral_to, _integral_of_sine])
def test_a_rules_python_float_compiled_stays_a_float(f):
    _replayed_as_traced(f, [np.array([0.5, 1.2]), np.array([1.5, 0.3])])


# ----------------------------------------------------------------------------------------------
# A value the reverse pass recomputes for several records (the same recipe twice:
# np.log1p(np.abs(x)) on two lines) is kept in the replay's cache by the record that computes it
# first; where a record that reads it from the cache comes first in this call, the value is
# computed there, and what that reads alive was counted down as if it were the planned read, so
# an argument was let go before its last planned read, which found None: every replay raised
# TypeError (abs() of None) where tracing computes the gradient


def _the_same_recipe_twice(x):
    a = x.copy()
    c = x * 0.5
    c = c * np.log1p(np.abs(x))
    a *= np.log1p(np.abs(x))
    return (a * np.cos(x) + c).sum()


@pytest.mark.parametrize("options", [{}, {"policy": "checkpoint"}, {"memory": 0}])
def test_a_value_recomputed_for_several_records_read_first_from_the_cache(options):
    inputs = [np.random.default_rng(0).standard_normal(600), np.linspace(-2.0, 2.0, 600)]
    _replayed_as_traced(_the_same_recipe_twice, inputs, **options)


# ----------------------------------------------------------------------------------------------
# A value the cache misses at a planned read is computed there from the plan that keeps it,
# whose record keeps none this call (the in-place write's bytes are copied); that plan's
# computations nested in another's ran again this way (np.abs(s) once for itself, once inside
# np.log1p(np.abs(s))), and each run counted down the reads of the cached np.sin(x) it makes:
# the count reached 0 before its last planned read, which found the value gone and the
# argument let go (TypeError: sin of None) on every replay where tracing computes the gradient


def _a_cached_value_read_inside_a_shared_recipe(x):
    s = np.sin(x)
    a = x.copy()
    c = x * s
    c = c * np.log1p(np.abs(s))
    a *= np.log1p(np.abs(s))
    return (a * np.cos(x) + c).sum() + (s * s).sum()


@pytest.mark.parametrize("options", [{}, {"policy": "checkpoint"}, {"memory": 0},
                                     {"memory": 6000}])
def test_a_value_computed_on_a_cache_miss_counts_nothing(options):
    inputs = [np.random.default_rng(1).standard_normal(600), np.linspace(-2.0, 2.0, 600)]
    _replayed_as_traced(_a_cached_value_read_inside_a_shared_recipe, inputs, **options)


_OUT = np.zeros(3)


@pytest.mark.parametrize("replay", [False, True])
def test_a_ufunc_of_a_list_into_a_module_array(replay):
    """``np.negative(L, out=O)`` of a list into an array of the module: the traced array
    ``O`` becomes as ``out=`` takes the call, whose operands (a list) hold no tracer of any
    level to defer to; NumPy writes the list's values into ``O``, and the function's traced
    writes after it carry their gradient (an AttributeError before)."""
    def f(x):
        r = np.negative([1., 5., -1.], out=_OUT)
        r[0] = x[0]
        np.add([1., 2., 3.], (2., 1., 0.), out=_OUT)
        _OUT[1] *= x[1]
        return (_OUT * x).sum()

    differentiate = mutad.value_and_grad(f, replay=replay)
    for x in (np.array([0.3, 1.1, -0.7]), np.array([0.6, 1.4, -0.4]), np.array([-1., 2., 3.])):
        given = x.copy()
        _OUT[:] = 0.
        value, gradient = differentiate(x)
        written = _OUT.copy()
        _OUT[:] = 0.
        assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
        assert written.tobytes() == _OUT.tobytes() and x.tobytes() == given.tobytes()
        np.testing.assert_allclose(gradient, [3., 6. * x[1], 3.], rtol=1e-15)


# ----------------------------------------------------------------------------------------------
# NumPy's Python functions whose result is one of their arrays itself (an ``out=`` array, the
# argument of np.atleast_1d, of np.broadcast_arrays where it keeps its shape) gave, for an array
# of the module, another object than the one given: ``is`` false, and where the function wrote
# through the result the writes reached a copy's wrapper, not the name the code reads


_O = np.zeros(3)
_G = np.array([1., 2., 3.])


def _identities(x):
    L = [1.5, -2.5, 3.7]
    same = [np.fix(L, out=_O) is _O, np.clip(L, 0, 2, out=_O) is _O,
            np.around(L, 1, out=_O) is _O, np.cumsum(L, out=_O) is _O]
    r = np.fix(x * 2.5, out=_O)
    same.append(r is _O)
    r[1] += x[0]  # through the result: into _O, as NumPy's
    a, b = np.atleast_1d(_G, _G)
    same += [a is _G, b is _G, np.broadcast_arrays(_G, np.ones(3))[0] is _G]
    c = np.clip(x, -1, 1, out=_O)
    c *= x  # into _O
    assert all(same), same
    return (_O * x).sum() + (a * x).sum()


@pytest.mark.parametrize("replay", [False, True])
def test_results_that_are_a_module_arrays_are_that_array(replay):
    differentiate = mutad.value_and_grad(_identities, replay=replay)
    for x in (np.array([0.3, 1.1, -0.7]), np.array([0.6, -1.4, 0.4]), np.array([-1.5, 2., 3.])):
        given = x.copy()
        _O[:] = 0.
        value, gradient = differentiate(x)
        written = _O.copy()
        _O[:] = 0.
        expected = _identities(x.copy())
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert written.tobytes() == _O.tobytes() and x.tobytes() == given.tobytes()
        assert _G.tobytes() == np.array([1., 2., 3.]).tobytes()
        # d/dx of sum(clip(x)*x*x) + sum(G*x): the fix'd values are constants
        clipped = np.clip(x, -1, 1)
        inside = np.abs(x) < 1
        np.testing.assert_allclose(gradient, np.where(inside, 3 * x * x, 2 * clipped * x) + _G,
                                   rtol=1e-14)


_H = np.array([1., 2., 3.])


def _named_as_given(x):
    g = np.asarray_chkfinite(_H)
    v = np.atleast_2d(_H)
    assert g is _H and v.base is _H
    v[0, 1] = x[0]  # through the view: into _H, as NumPy's
    g[2] *= x[1]
    return (_H * x).sum()


@pytest.mark.parametrize("replay", [False, True])
def test_a_module_array_converted_or_viewed_is_named_as_given(replay):
    """``np.asarray_chkfinite(U0)`` is ``U0`` and ``np.atleast_2d(U0).base`` is ``U0``, as in
    NumPy (a new wrapper before), and the writes through them reach ``U0``."""
    differentiate = mutad.value_and_grad(_named_as_given, replay=replay)
    for x in (np.array([0.3, 1.1, -0.7]), np.array([0.6, -1.4, 0.4]), np.array([-1.5, 2., 3.])):
        given = x.copy()
        _H[:] = [1., 2., 3.]
        value, gradient = differentiate(x)
        written = _H.copy()
        _H[:] = [1., 2., 3.]
        expected = _named_as_given(x.copy())
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert written.tobytes() == _H.tobytes() and x.tobytes() == given.tobytes()
        np.testing.assert_allclose(gradient, [1 + x[1], x[0] + 3 * x[2], 3 * x[1]], rtol=1e-14)
    _H[:] = [1., 2., 3.]
