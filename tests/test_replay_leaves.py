"""A replay's gradients per leaf: a shadow handed over to the leaf that alone has its buffer,
copied for leaves that share one (the same array twice, two views of one array), also where
the arguments hold many leaves."""

import numpy as np

import mutad


def _traced_and_replayed(f, make_args, argnums, calls=3):
    """The traced gradient of ``f`` at ``make_args()``, and the replayed ones of ``calls``
    calls (the first records), each on fresh arguments; the caller's arrays checked bit for
    bit after each."""
    traced = mutad.value_and_grad(f, argnums=argnums)(*make_args())
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    replayed = []
    for _ in range(calls):
        args = make_args()
        leaves = list(_arrays(args))
        before = [a.tobytes() for a in leaves]
        replayed.append(replaying(*args))
        assert [a.tobytes() for a in leaves] == before
    assert sum(type(p) is not str for p in replaying.programs.values()) == 1
    return traced, replayed


def _arrays(tree):
    if isinstance(tree, np.ndarray):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _arrays(x)


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_each_leaf_gets_a_gradient_of_its_own_where_leaves_share_a_buffer():
    def f(a, b, c):
        a *= 2.0
        return (a * b).sum() + (c * c).sum()

    x = np.linspace(0.5, 2.0, 6)

    def twice():  # a and b one array, c another
        y = x.copy()
        return y, y, x[:3].copy()

    def views():  # a and b two views of one array
        y = x.copy()
        return y[:3], y[3:], x[:3].copy()

    for make in (twice, views):
        traced, replayed = _traced_and_replayed(f, make, (0, 1, 2))
        for value, grads in replayed:
            assert value == traced[0] and _same(grads, traced[1])
            assert len({id(g) for g in grads}) == 3
            assert not any(np.shares_memory(g, h) for i, g in enumerate(grads)
                           for h in grads[i + 1:])
            grads[0][...] = -1.0  # writing one gradient leaves the others as they were
            assert _same(grads[1:], traced[1][1:])


def test_many_leaves_replay_as_traced():
    rng = np.random.default_rng(3)
    base = [rng.standard_normal(3) for _ in range(400)]

    def f(xs, w):
        total = 0.0
        for k, x in enumerate(xs):
            if k % 7 == 0:
                x *= w                    # some leaves written in place
            total = total + np.sum(x * x)
        return total

    def make():
        xs = [x.copy() for x in base]
        xs[5] = xs[4]                     # one array twice in the list
        return xs, np.float64(1.5)

    traced, replayed = _traced_and_replayed(f, make, (0, 1))
    for value, grads in replayed:
        assert value == traced[0] and _same(grads, traced[1])
        assert grads[0][4] is not grads[0][5]
