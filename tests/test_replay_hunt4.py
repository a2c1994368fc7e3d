"""Replays of scientific programs whose answers differed from tracing's: each program's
replaying function is called on inputs that change its decisions, each call compared with a
traced one, bit for bit, and the caller's bytes."""

import numpy as np
import pytest
import scipy.interpolate
import scipy.special

import mutad

from test_replay import replayed_like_traced


# ----------------------------------------------------------------------------------------------
# Arrays outside argnums, which a recording follows as inputs of the program


def spline_of_knots_from_data(y, d):
    knots = np.sort(d) + np.arange(3) * 10.0  # constants in tracing; followed in a recording
    return scipy.interpolate.CubicSpline(knots, y)(knots.mean())


def test_a_spline_of_knots_computed_from_an_array_outside_argnums_is_tracings():
    """CubicSpline(knots, y) of knots computed from data passed outside argnums: the recording
    followed the knots as traced (inputs of its program), so SciPy's steps of a spline of
    traced knots gave the gradient in y, which differs from tracing's (constant knots) in the
    last bits; every replay answered as that recording."""
    y = np.array([1.0, 2.0, 3.0])
    calls = [(y.copy(), np.array(d)) for d in ([-1.0, 5.0, 0.5],) * 3 + ([1.0, 2.0, 3.0],) * 3]
    replaying = replayed_like_traced(spline_of_knots_from_data, calls, replayed=False)
    assert "scipy.interpolate" in " ".join(map(str, replaying.reasons.values()))


def spline_of_knots_from_data_caught(y, d):
    try:
        return spline_of_knots_from_data(y, d)
    except Exception:  # what a careful program does where SciPy raises on bad knots
        return y.sum() * 100.0


def test_a_spline_of_knots_from_data_in_a_try_is_tracings():
    """The same where f catches every error: the recording call answered f's except branch
    (the refusal, caught), which tracing does not take."""
    y = np.array([1.0, 2.0, 3.0])
    calls = [(y.copy(), np.array([-1.0, 5.0, 0.5]))] * 3
    replayed_like_traced(spline_of_knots_from_data_caught, calls, replayed=False)


def refused_spline_of_knots_from_data_caught(y, d):
    knots = np.sort(d) + np.arange(4) * 10.0
    try:
        return scipy.interpolate.make_interp_spline(knots, y, k=3)(knots.mean()) * 1.0
    except Exception:
        return y.sum() * 100.0


def test_a_refusal_of_knots_from_data_in_a_try_is_tracings():
    """make_interp_spline refuses traced knots; those computed from data outside argnums are
    traced only in the recording, whose refusal f caught: every replay answered f's except
    branch, where tracing (constant knots) interpolates."""
    y = np.array([1.0, 2.0, 3.0, 4.0])
    calls = [(y.copy(), np.array(d)) for d in ([-1.0, 5.0, 0.5, 2.0],) * 3
             + ([1.0, 2.0, 3.0, 4.0],) * 3]
    replayed_like_traced(refused_spline_of_knots_from_data_caught, calls, replayed=False)


def bessel_of_an_order_from_data_caught(x, orders):
    try:
        return scipy.special.struve(orders[0] * 1.0, x).sum()
    except Exception:
        return x.sum() * 1000.0


def test_any_rules_refusal_of_an_array_outside_argnums_caught_by_f_is_tracings():
    """scipy.special.struve has no derivative in its order: an order computed from data outside
    argnums is traced in the recording only, whose refusal f caught, so the recording call
    answered f's except branch (2000.0 where tracing, with a constant order, gives struve's
    value). Any rule's refusal so caught makes the call traced again, not only
    scipy.interpolate's."""
    calls = [(np.array([0.7, 1.3]) + 0.1 * i, np.array([1.5, 2.0])) for i in range(4)]
    replayed_like_traced(bessel_of_an_order_from_data_caught, calls, replayed=False)


def test_a_spline_of_constant_knots_in_traced_data_still_replays():
    """Knots f makes from no argument are constants in the recording too: replayed."""
    def f(y, q):
        return scipy.interpolate.CubicSpline(np.linspace(0, 1, 4), y)(0.3) * 2.0

    replaying = replayed_like_traced(f, [(np.arange(4.0) * s, np.ones(2)) for s in (1, 2, 3)],
                                     argnums=0)
    assert not replaying.reasons



def scattered_of_points_from_data(y, d):
    points = np.stack([d, np.arange(6.0)], 1)
    return scipy.interpolate.griddata(points, y, np.array([[1.0, 2.5]]), method="linear").sum()


def interp1d_of_knots_from_data(y, d):
    knots = np.sort(d) + np.arange(6) * 10.0
    return scipy.interpolate.interp1d(knots, y)(knots.mean() + 1.0) * 1.0


@pytest.mark.parametrize("f", [scattered_of_points_from_data, interp1d_of_knots_from_data])
def test_data_points_computed_from_an_array_outside_argnums_are_tracings(f):
    """griddata(points, y, ...) of points computed from data outside argnums: the recording
    followed the points as traced, so the barycentric weights were solved in the traced
    points rather than taken from SciPy's triangulation as tracing takes them, and the
    gradient in y differed in the last bits. (interp1d's traced knots alike.)"""
    y = np.array([1.0, 2.0, 3.0, 2.5, 1.0, 0.5])
    calls = [(y.copy(), np.array(d)) for d in ([-1.0, 5.0, 0.5, 2.0, 1.0, 3.0],) * 3
             + ([0.3, 0.1, 0.7, 0.2, 0.9, 0.4],) * 3]
    replayed_like_traced(f, calls, replayed=False)


# ----------------------------------------------------------------------------------------------
# The value's type


@pytest.mark.parametrize("f", [
    lambda x: np.asarray(x @ x),
    lambda x: scipy.interpolate.CubicSpline(np.arange(3.0), x)(0.5),
    lambda x: x[:1].squeeze(),
    lambda x: x.sum(),
    lambda x: x.sum(keepdims=True)[0],
], ids=["asarray", "spline", "squeeze", "sum", "element"])
def test_a_replay_returns_the_value_as_tracing_does(f):
    """A 0-d array f returns (np.asarray(x @ x), a spline's value at one point) is a 0-d array
    traced, as in NumPy; a replay returned NumPy's scalar of it (a number the caller cannot
    write into, and not an np.ndarray)."""
    replaying = replayed_like_traced(f, [(np.array([1.0, 2.0, 3.0]) * s,) for s in (1, 2, 3)])
    x = np.array([1.0, 2.0, 3.0])
    assert type(replaying(x)[0]) is type(mutad.value_and_grad(f)(x)[0]) is type(f(x))


def test_a_replay_returns_the_aux_values_as_tracing_does():
    """The same for the arrays in aux: a replay made each 0-d one NumPy's scalar."""
    def f(x):
        return x.sum(), {"array": np.asarray(x @ x), "squeezed": x[:1].squeeze(),
                         "sum": x.sum(), "element": x[0], "number": x[1].item()}

    replaying = mutad.value_and_grad(f, has_aux=True, replay=True)
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(3):
        (_, got), _ = replaying(x)
    (_, traced), _ = mutad.value_and_grad(f, has_aux=True)(x)
    plain = f(x)[1]
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in traced.items()} \
        == {k: type(v) for k, v in plain.items()}
    assert all(np.asarray(got[k]).tobytes() == np.asarray(traced[k]).tobytes() for k in got)
