"""Arrays a library's method returns to the function from plain values (``spline(t)``,
``dist.pdf(grid)``, ``A @ c``) are followed as np.zeros' are: a traced value written into one
carries its derivative. Only a new array nothing else holds is (CPython's reference counts say
so); the library's own state, or a view of it, stays plain and a write into it is refused."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.sparse
import scipy.stats

import mutad
from cases import replays_as_traced
from mutad import errors
from mutad.core import registry

GRID = np.linspace(-1.0, 1.0, 6)
KNOTS = np.linspace(0.0, 5.0, 6)
FROZEN = scipy.stats.norm(0.5, 2.0)
SPLINE = scipy.interpolate.CubicSpline(KNOTS, np.sin(KNOTS))
TABLE = scipy.interpolate.interp1d(KNOTS, np.cos(KNOTS))
LAPLACIAN = scipy.sparse.diags([1.0, -2.0, 1.0], [-1, 0, 1], shape=(6, 6)).tocsr()

MADE = {
    "a distribution's pdf": lambda: scipy.stats.norm.pdf(GRID),
    "a frozen distribution's cdf": lambda: FROZEN.cdf(GRID),
    "a t distribution's logpdf": lambda: scipy.stats.t.logpdf(GRID, 3.0),
    "a spline's values (a view of a new array)": lambda: SPLINE(GRID),
    "a spline's derivative's values": lambda: SPLINE.derivative()(KNOTS),
    "an interpolation table's values": lambda: TABLE(KNOTS),
    "a sparse product": lambda: LAPLACIAN @ GRID,
    "a sparse matrix's diagonal (a method no rule routes)": lambda: LAPLACIAN.diagonal(),
    "a frozen distribution's draws": lambda: FROZEN.rvs(size=6, random_state=1),
    "a distribution's draws": lambda: scipy.stats.norm.rvs(size=6, random_state=2),
}


def _scaled(make):
    def f(x):
        u = make()
        u *= x           # a traced value written into the array the library made
        u[0] += x[1]
        return (u * u).sum()
    return f


@pytest.mark.parametrize("name", list(MADE))
def test_a_new_array_a_method_made_carries_what_is_written_into_it(name):
    f = _scaled(MADE[name])
    x = np.linspace(0.1, 0.9, 6)
    before = x.copy()
    made = MADE[name]()
    grad = mutad.gradient(f, x)[0]
    final = made * x
    final[0] += x[1]
    expected = 2 * final * made
    expected[1] += 2 * final[0]
    assert np.allclose(grad, expected, rtol=1e-12, atol=1e-14)
    assert x.tobytes() == before.tobytes()
    assert mutad.value_and_grad(f)(x)[0] == f(x.copy())


@pytest.mark.parametrize("name", ["a distribution's pdf", "a frozen distribution's cdf",
                                  "a spline's values (a view of a new array)"])
def test_replayed_as_traced(name):
    """A library's own object (``scipy.stats.norm``) is called again by the replay; an object
    the program holds (a frozen distribution, a spline) may hold other values on another
    call, so such a call is traced: either way each call is the traced one, bit for bit."""
    f = _scaled(MADE[name])
    replays_as_traced(f, [(np.linspace(0.1, 0.9, 6) * k,) for k in (1.0, -2.0, 0.5, 3.0)])


def test_a_frozen_distribution_changed_between_calls_is_not_replayed_stale():
    dist = scipy.stats.norm(loc=0.0, scale=1.0)

    def f(x):
        u = dist.pdf(GRID)
        u *= x
        return u.sum()

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.ones(6)
    for loc in (0.0, 0.0, 0.3, 0.3, -1.0):
        dist.kwds["loc"] = loc   # (its parameters, changed in place between calls)
        value, grad = replaying(x)
        assert value == f(x) and np.array_equal(grad, scipy.stats.norm.pdf(GRID, loc))


class Cache:
    """A library-like object whose method hands out arrays: its own state, a view of it, a new
    one, or a tuple of a new one and its own."""

    def __init__(self):
        self.state = np.linspace(1.0, 2.0, 6)

    def values(self, kind):
        if kind == "own":
            return self.state
        if kind == "view of own":
            return self.state[::-1]
        if kind == "new":
            return self.state * 2.0
        return self.state * 2.0, self.state


@pytest.fixture
def routed_cache():
    registry.defmethod(Cache, "values", lambda self, kind: pytest.fail("no traced argument"))
    try:
        yield Cache()
    finally:
        registry.RULES[Cache, "values"].method = None


@pytest.mark.parametrize("kind", ["own", "view of own", "new and own"])
def test_an_array_the_object_still_holds_stays_plain(routed_cache, kind):
    """Writing into the object's own memory would change what the object computes with later,
    without the derivative: refused, the object's state unchanged."""
    state = routed_cache.state.copy()

    def f(x):
        u = routed_cache.values(kind)
        u = u[-1] if type(u) is tuple else u
        u *= x
        return u.sum()

    with pytest.raises(errors.UntracedWriteError):
        mutad.gradient(f, np.ones(6))
    assert routed_cache.state.tobytes() == state.tobytes()


def test_a_new_array_of_the_same_method_is_followed(routed_cache):
    def f(x):
        u = routed_cache.values("new")
        u *= x
        w, _ = routed_cache.values("new and own")
        w += x
        return (u + w).sum()

    assert np.array_equal(mutad.gradient(f, np.ones(6))[0], routed_cache.state * 2.0 + 1.0)
