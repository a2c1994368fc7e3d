"""Replays that answered otherwise than tracing on fresh programs: each program's replaying
function is called on inputs that keep its decisions while the values change (and on values
that are not finite), each call compared with a traced one, bit for bit, with NumPy's value,
and the caller's data."""

import warnings

import numpy as np

import mutad

from test_replay import replayed_like_traced as replayed_like, same


def replayed_like_traced(f, calls, argnums=0):
    """Call ``value_and_grad(f, replay=True)`` on each tuple of arguments of ``calls``, and
    check each call against a traced one and NumPy's value on copies, and that the caller's
    arrays are as they were."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for args in calls:
        mine = [np.copy(a) for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # infinities and NaNs, on purpose
            got = replaying(*mine)
            expected = mutad.value_and_grad(f, argnums=argnums)(*[np.copy(a) for a in args])
            value = f(*[np.copy(a) for a in args])
        assert all(same(a, b) for a, b in zip(mine, args))
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], value)
    return replaying


# ----------------------------------------------------------------------------------------------
# A dot product's cotangents in a compiled block are ``dy * b`` where the cotangent dy is finite
# and not zero, NumPy's product, whose NaN is its NaN factor's (its sign: sin(-inf) is -nan);
# tracing's product_times gave NumPy's nan (+nan) there: the third call on, every replay's
# gradient held the other NaN. product_times keeps NumPy's NaN where its product has one


def _sines_squared_and_dotted(u):
    v = np.sin(u)
    return (v * v).sum() + v @ u


def test_a_dot_products_nan_cotangent_is_numpys_nan():
    calls = [(np.array([0.3, -np.inf, 0.2]) * s,) for s in (1.0, 1.1, 1.2, 1.3)]
    replayed_like_traced(_sines_squared_and_dotted, calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        grad = mutad.gradient(_sines_squared_and_dotted, calls[0][0], argnums=0)
    assert np.signbit(grad[1]) and np.isnan(grad[1])  # (-nan: sin's, and cos's, NaN)


# ----------------------------------------------------------------------------------------------
# A dot product's cotangent of its second operand is ``a * dy``; where dy is NaN or zero a
# compiled block's lines called product_times(multiply, dy, a) instead, whose NaN, where both
# are NaN, is dy's (NumPy's product is its first NaN factor's): the third call on, one element
# of x's gradient, all NaN, had the other sign than tracing's. The lines keep the back's order


def _abs_of_a_nan_then_dot_products(x, y):
    s = np.outer(x, y) @ x
    s[0] = abs(s[1])
    for r in range(5):
        s[r] = s[r] + s[:r] @ x[:r]
    return s.sum()


def test_nan_cotangents_of_a_compiled_loop_are_tracings():
    x, y = np.array([-1.0, -0.7, -np.nan, -0.5, 2.0]), np.array([-1.2, 1.1, 0.4, 0.5, 0.2])
    calls = [(x * (1 + k / 100), y * (1 + k / 100)) for k in range(4)]
    replayed_like_traced(_abs_of_a_nan_then_dot_products, calls, argnums=(0, 1))


# ----------------------------------------------------------------------------------------------
# A boolean assigned into a float array is NumPy's 0 or 1; the assignment cast NumPy's bool
# (tracing's x[2] > 0) but not a traced one, the recording's (a comparison of traced values,
# which a replay computes again), into whose np.positive went a bool: UFuncTypeError, so the
# program was traced on every call


def _a_comparison_written_into_floats(x):
    s = x * 2.0
    s[2] = x[2] > 0
    s[:2] = x[1:3] < x[3]
    for i in range(3):
        s[i + 1] = s[i + 1] + s[i] * x[i]
    return (s * s).sum()


def test_a_boolean_written_into_floats_replays():
    calls = [(np.array([1.0, 2.0, v, w]),) for v, w in [
        (3.0, -1.0), (2.0, 2.5), (-1.0, 4.0), (4.0, 0.0), (0.0, 1.0), (-np.nan, 3.0)]]
    replaying = replayed_like(_a_comparison_written_into_floats, calls, traced_once=True)
    assert not replaying.reasons
