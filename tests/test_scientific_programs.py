"""Programs written as scientists write them, each of which once gave a wrong value or
gradient, traced or replayed: the value is NumPy's, the replayed gradient the traced one bit
for bit, and the caller's arrays come back bit for bit."""

import numpy as np

import mutad
from test_replay import replayed_like_traced


def _checked_like_numpy(f, calls, argnums=0, replayed=True):
    """``replayed_like_traced``, and each value NumPy's bit for bit."""
    replaying = replayed_like_traced(f, calls, argnums=argnums, replayed=replayed)
    for args in calls:
        copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
        assert np.asarray(replaying(*args)[0]).tobytes() == np.asarray(f(*copies)).tobytes()


def _flat_at_argmax(x):
    y = x.copy()
    y.flat[np.argmax(x)] = -1.0
    y.flat[[np.argmin(x)]] = 2.0
    return (y ** 2 * x).sum() + y.flat[np.argmax(y)]


def test_a_flat_position_computed_from_the_values_is_guarded():
    rng = np.random.default_rng(0)
    _checked_like_numpy(_flat_at_argmax, [(rng.standard_normal((2, 3)),) for _ in range(6)],
                        replayed=False)


def _same_object(x, y):
    if x is y:  # f(a, a): NumPy's x is y
        return (x * 2.0).sum() + x[0]
    x *= y
    return (x * y).sum()


def test_one_array_passed_twice_is_one_object_in_f_traced_and_replayed():
    """f(a, a) gets one array twice, and ``x is y`` holds; mutad traced each position apart,
    so f took its other branch, a wrong value and gradient; a replay told f(a, a) from
    f(a, a[:]) (two objects over the same memory, laid out alike) by neither."""
    a = np.array([1.0, 2.0, 3.0])
    before = a.tobytes()
    value, grads = mutad.value_and_grad(_same_object, argnums=(0, 1))(a, a)
    b = a.copy()
    assert value == _same_object(b, b) == 13.0
    assert [g.tolist() for g in grads] == [[3.0, 2.0, 2.0]] * 2  # one buffer, one gradient
    assert a.tobytes() == before
    replaying = mutad.value_and_grad(_same_object, argnums=(0, 1), replay=True)
    for args in [(a, a), (a, a), (a, a[:]), (a, a[:]), (a, a), (a[:], a[:].view())]:
        b = a.copy()  # (f(a, a[:]) writes into a's memory: a copy of it for NumPy)
        expected = _same_object(b, b) if args[0] is args[1] else _same_object(b, b[:])
        got, traced = replaying(*args), mutad.value_and_grad(_same_object, argnums=(0, 1))(*args)
        assert got[0] == traced[0] == expected
        assert all(g.tobytes() == t.tobytes() for g, t in zip(got[1], traced[1]))
        assert a.tobytes() == before


def test_one_array_passed_twice_is_one_object_in_forward_mode():
    """jvp made one dual for every argument over the same whole memory: f(a, a[:]) took the
    branch of ``x is y``; f(a, a) is one object, its tangents added."""
    a = np.array([1.0, 2.0, 3.0])
    before = a.tobytes()
    ones = (np.ones(3), np.ones(3))
    assert mutad.jvp(_same_object, (a, a), ones) == (13.0, 14.0)  # 2 * 6 + 2
    b = a.copy()
    assert mutad.jvp(_same_object, (a, a[:]), ones) == (_same_object(b, b[:]), 288.0)
    assert a.tobytes() == before


def test_one_array_passed_twice_is_one_object_in_nested_differentiations():
    """hessian(f, a, a): the inner gradient's arguments are the outer pass's duals, one
    object twice, which it traced apart (the branch of x is not y: 10 times the Hessian)."""
    a = np.array([1.0, 2.0, 3.0])
    before = a.tobytes()
    cubic = lambda x, y: (x ** 3).sum() if x is y else (x * y * y).sum() * 10.0  # noqa: E731
    for row in mutad.hessian(cubic, a, a, argnums=(0, 1)):
        for block in row:
            np.testing.assert_array_equal(block, np.diag(6.0 * a))
    assert a.tobytes() == before


def _owns_memory(x):
    scale = 2.0 if x.base is None else 3.0
    return (x * (scale if x.flags.owndata else 5.0)).sum()


def test_whether_an_argument_owns_its_memory_is_not_baked_into_a_replay():
    """``x.base is None`` and ``x.flags.owndata`` of the caller's array and of a view of all of
    another's, which a replay's signature did not tell apart (laid out alike): a replay gave
    the recorded call's answer. Each has a program of its own."""
    a = np.array([1.0, 2.0, 3.0])
    replaying = mutad.value_and_grad(_owns_memory, replay=True)
    for x in (a, a, a[:], a[:], a, np.linspace(1.0, 3.0, 3)):
        got, traced = replaying(x), mutad.value_and_grad(_owns_memory)(x)
        assert got[0] == traced[0] == _owns_memory(x)
        assert got[1].tobytes() == traced[1].tobytes()
    assert not replaying.reasons
