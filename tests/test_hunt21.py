"""Answers that differed from NumPy's, and refusals that misnamed their cause: each test fails
without its fix."""

import pickle
import random

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import mutad


# ----------------------------------------------------------------------------------------------
# as_strided of a differentiated array with a step of zero (``strides=(0, 8)``) gave a read-only
# broadcast where NumPy's view is writeable: ``flags.writeable`` said False, a write of one
# element (which NumPy's memory takes in any order) was refused, and a write of several was
# refused as into "a read-only view, as NumPy makes it". The view is writeable as NumPy's.


def _one_element_through_a_repeating_view(x):
    u = x.copy()
    z = as_strided(u, shape=(2, 3), strides=(0, 8))
    assert z.flags.writeable and not as_strided(u, (2, 3), (0, 8), writeable=False).flags.writeable
    z[1, 2] = x[0] * 3.0
    return (u * [1.0, 2.0, 3.0]).sum() + (z ** 2).sum()


def test_a_view_with_a_step_of_zero_is_writeable_as_numpys():
    x = np.array([0.5, -0.3, 0.8])
    before = x.tobytes()
    value, (gradient,) = mutad.value_and_gradient(_one_element_through_a_repeating_view, x)
    assert x.tobytes() == before
    assert value == _one_element_through_a_repeating_view(x.copy())
    # u = [x0, x1, 3 x0]: 1 x0 + 2 x1 + 9 x0 + 2 (x0² + x1² + 9 x0²)
    np.testing.assert_allclose(gradient, [10.0 + 40.0 * x[0], 2.0 + 4.0 * x[1], 0.0])
    tangent = mutad.jvp(_one_element_through_a_repeating_view, (x,), (np.ones(3),))[1]
    np.testing.assert_allclose(tangent, gradient.sum())
    assert x.tobytes() == before

    def several(x):
        u = x.copy()
        as_strided(u, shape=(4,), strides=(0,))[...] += 1.0
        return u.sum()

    with pytest.raises(mutad.MutadError, match="elements share memory"):
        mutad.gradient(several, x)
    assert x.tobytes() == before


# ----------------------------------------------------------------------------------------------
# x.shape = ... of an array made before the call, once the function wrote into it, was refused
# as of "a traced array [that] stands for its argument": the refusal names such arrays too, and
# what works (the shape set before the first write).

GRID = np.linspace(0.0, 1.0, 6)  # a module-level work array


def test_the_shape_of_an_array_made_before_is_refused_by_its_cause():
    def reshaped_after_a_write(x):
        GRID[:3] = x
        GRID.shape = (2, 3)
        return GRID.sum()

    def reshaped_before(x):
        GRID.shape = (2, 3)
        GRID[1] = x
        return (GRID * [[1.0], [2.0]]).sum()

    x = np.array([0.5, -0.3, 0.8])
    with pytest.raises(mutad.MutadError, match="made before the call that the function wrote"):
        mutad.gradient(reshaped_after_a_write, x)
    assert GRID.shape == (6,) and GRID.tolist() == np.linspace(0.0, 1.0, 6).tolist()
    assert mutad.gradient(reshaped_before, x)[0].tolist() == [2.0, 2.0, 2.0]
    assert GRID.shape == (2, 3) and GRID[1].tolist() == x.tolist()  # as NumPy's run leaves it
    GRID.shape = (6,)
    GRID[:] = np.linspace(0.0, 1.0, 6)


def _reshaped_then_refused(x):
    GRID.shape = (2, 3)
    GRID[1] = x
    GRID.shape = (3, 2)  # after the write: refused
    return GRID.sum()


def _reshaped_then_raising(x):
    GRID.shape = (3, 2)
    GRID[0] = x[:2]
    raise KeyError("the user's own error")


def _reshaped_then_raising_unwritten(x):
    GRID.shape = (2, 3)
    return (x + GRID[0, :2]).sum()  # NumPy's ValueError: shapes (3,) and (2,)


@pytest.mark.parametrize("f, error", [(_reshaped_then_refused, mutad.MutadError),
                                      (_reshaped_then_raising, KeyError),
                                      (_reshaped_then_raising_unwritten, ValueError)],
                         ids=["refused", "raising", "raising unwritten"])
@pytest.mark.parametrize("replay", [False, True])
def test_an_array_made_before_reshaped_comes_back_in_its_shape_where_f_raises(f, error, replay):
    """A call that raises leaves the caller's arrays as they were: a module-level array
    reshaped in place (``GRID.shape = ...``) came back with its values but in the new shape."""
    x = np.array([0.5, -0.3, 0.8])
    for _ in range(2 if replay else 1):
        with pytest.raises(error):
            mutad.grad(f, replay=replay)(x)
        assert GRID.shape == (6,) and GRID.tolist() == np.linspace(0.0, 1.0, 6).tolist()


# ----------------------------------------------------------------------------------------------
# jacobian and jacrev run f more than once (a run for the outputs' shapes, then one per row or
# per batch of columns): where f reads state its runs change (a counter, a list it appends to,
# a draw from a random generator that lives between calls), their rows came from other runs
# than NumPy's one, silently: jacrev of x * len(calls) gave diag(2, 3, 4, 5) for the identity.
# Each run's values are the first one's, bit for bit, or the Jacobian is refused.

_CALLS = []


def _counting(x):
    _CALLS.append(1)
    return x * len(_CALLS)


_JACOBIANS = [
    lambda f, x: mutad.jacobian(f, x),
    lambda f, x: mutad.jacrev(f)(x),
    lambda f, x: mutad.hessian(lambda x: (f(x) ** 2).sum() + 0.0 * x[0], x),
]


@pytest.mark.parametrize("jacobian", _JACOBIANS, ids=["jacobian", "jacrev", "hessian"])
def test_a_jacobian_of_runs_that_differ_is_refused(jacobian, f=_counting):
    x = np.linspace(0.5, 1.0, 20)  # (more directions than one batch of a Hessian)
    before = x.tobytes()
    _CALLS.clear()
    with pytest.raises(mutad.MutadError, match="returned other values on another of the runs"):
        jacobian(f, x)
    assert x.tobytes() == before


# A draw from a random generator that lives between calls (a module's, np.random's own, one
# passed in, one an object holds, Python's random module) was refused so: each run drew other
# numbers. Every run of f now starts from the generators' states before the first one (those f
# reaches, and those it draws from), so each draws NumPy's one run's numbers, and the last
# leaves the generators as that run does.

_NOISE = np.random.default_rng(0)


class _Noisy:
    def __init__(self):
        self.rng = np.random.RandomState(1)

    def __call__(self, x):
        return x * self.rng.standard_normal(x.shape)


def _in_a_closure():
    g = np.random.default_rng(2)
    return lambda x: x * g.standard_normal(x.shape), g


_GENERATORS = {  # f (x times numbers it draws), and the generator it draws them from
    "a module's": lambda: (lambda x: x * _NOISE.standard_normal(x.shape), _NOISE),
    "np.random's": lambda: (lambda x: x * np.random.normal(size=x.shape),
                            np.random.mtrand._rand),
    "a closure's": _in_a_closure,
    "an attribute": lambda: (lambda noisy: (noisy, noisy.rng))(_Noisy()),
    "python's random": lambda: (lambda x: x * np.array([random.gauss(0.0, 1.0) for _ in x]),
                                random._inst),
}


def _state(g):
    return pickle.dumps(g.getstate() if isinstance(g, random.Random) else g.get_state()
                        if isinstance(g, np.random.RandomState) else g.bit_generator.state)


@pytest.mark.parametrize("jacobian", _JACOBIANS, ids=["jacobian", "jacrev", "hessian"])
@pytest.mark.parametrize("kind", list(_GENERATORS))
def test_a_jacobian_of_draws_from_a_generator_that_lives_on_is_that_of_one_run(jacobian, kind):
    f, g = _GENERATORS[kind]()
    x = np.linspace(0.5, 1.0, 20)  # (more directions than one batch of a Hessian)
    before, start = x.tobytes(), _state(g)
    z = f(x) / x  # NumPy's one run: its draws, and the state it leaves
    after = _state(g)
    _set_state(g, start)
    result = jacobian(f, x)
    expected = np.diag(z) if jacobian is not _JACOBIANS[2] else np.diag(2 * z ** 2)
    np.testing.assert_allclose(result, expected, rtol=1e-14, atol=0)
    assert _state(g) == after and x.tobytes() == before


def _set_state(g, state):
    state = pickle.loads(state)
    if isinstance(g, random.Random):
        g.setstate(state)
    elif isinstance(g, np.random.RandomState):
        g.set_state(state)
    else:
        g.bit_generator.state = state


def test_a_jacobian_of_a_function_with_harmless_state_is_its_one_runs():
    log = []

    def logged(x):
        log.append(x.shape)  # state no value reads
        y = x.copy()
        y[1:] *= x[:-1]
        return y

    x = np.array([0.5, -0.3, 0.8])
    expected = np.array([[1.0, 0.0, 0.0], [-0.3, 0.5, 0.0], [0.0, 0.8, -0.3]])
    assert mutad.jacobian(logged, x).tolist() == expected.tolist()
    assert mutad.jacrev(logged)(x).tolist() == expected.tolist()


# ----------------------------------------------------------------------------------------------
# A Jacobian or a Hessian of a library's function itself (``mutad.hessian(rosen, x)``,
# ``mutad.jacobian(math.sin, 0.5)``) stopped as a conversion inside it, where its gradient, and
# the Jacobian of a lambda calling it, were followed: the function of the arguments' leaves
# around f called f itself, not what the mode calls for it.

@pytest.mark.slow  # (about 1.7 s alone: its first differentiation after importing scipy.optimize)
def test_a_jacobian_and_a_hessian_of_a_library_function_itself():
    import math

    import scipy.optimize
    x = np.array([0.3, 1.2, 0.7, -0.4])
    before = x.tobytes()
    hessian = scipy.optimize.rosen_hess(x)
    np.testing.assert_allclose(mutad.hessian(scipy.optimize.rosen, x), hessian, rtol=1e-13)
    np.testing.assert_allclose(mutad.jacobian(scipy.optimize.rosen_der, x), hessian, rtol=1e-13)
    np.testing.assert_allclose(mutad.jacrev(scipy.optimize.rosen_der)(x), hessian, rtol=1e-13)
    assert x.tobytes() == before
    assert mutad.jacobian(math.sin, 0.5) == math.cos(0.5)
    assert mutad.hessian(math.exp, 0.5) == math.exp(0.5)


# ----------------------------------------------------------------------------------------------
# f that hands a differentiated array to a thread pool stopped with an error naming a global, a
# closure or a cache as where the array escaped: it names the other thread, and what to do.

def test_an_array_handed_to_another_thread_is_refused_by_that_cause():
    import concurrent.futures

    def f(x):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return sum(pool.map(lambda part: (part ** 2).sum(), np.array_split(x, 2)))

    x = np.array([0.3, -1.2, 0.7])
    with pytest.raises(mutad.errors.EscapedTracerError, match="another thread.*map"):
        mutad.grad(f)(x)
    assert x.tolist() == [0.3, -1.2, 0.7]
