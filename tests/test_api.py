"""The public API's conventions (DESIGN.md §2): argnums, structure, dtypes, restoration."""

import numpy as np
import pytest

import mutad


def weighted_sum(a, b):
    return (a * b).sum()


def test_argnums_none_int_tuple_negative():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    da, db = mutad.gradient(weighted_sum, a, b)
    assert np.array_equal(da, b) and np.array_equal(db, a)
    assert np.array_equal(mutad.gradient(weighted_sum, a, b, argnums=1), a)
    assert np.array_equal(mutad.gradient(weighted_sum, a, b, argnums=-2), b)
    only_b = mutad.gradient(weighted_sum, a, b, argnums=(1,))
    assert isinstance(only_b, tuple) and np.array_equal(only_b[0], a)


@pytest.mark.parametrize("argnums", [2, -3, (0, 5), 1.0, "0", [0], True])
def test_bad_argnums_raise(argnums):
    a = np.ones(2)
    with pytest.raises(mutad.MutadError, match="argnums"):
        mutad.gradient(weighted_sum, a, a.copy(), argnums=argnums)


def test_gradients_mirror_containers_and_kinds():
    def f(params, scale, count, flag, name, index, nothing):
        w, (b, c) = params["w"], params["bc"]
        return scale * (w.sum() + b * c[0][index].sum()) + count

    params = {"w": np.ones(3), "bc": (2.0, [np.arange(4.0)])}
    grads = mutad.gradient(f, params, 1.5, 7, True, "x", np.array([0, 2]), None)
    g_params, g_scale, g_count, g_flag, g_name, g_index, g_nothing = grads
    assert set(g_params) == {"w", "bc"}
    assert np.array_equal(g_params["w"], np.full(3, 1.5))
    g_b, (g_c,) = g_params["bc"]
    assert isinstance(g_params["bc"], tuple) and isinstance(g_params["bc"][1], list)
    assert type(g_b) is float and g_b == 1.5 * 2.0
    assert np.array_equal(g_c, [3.0, 0.0, 3.0, 0.0])
    assert type(g_scale) is float and g_scale == 3.0 + 2.0 * 2.0
    assert g_count is g_flag is g_name is g_index is g_nothing is None


def test_unused_float_arguments_get_zeros_of_their_shape_and_dtype():
    unused = np.ones((2, 3), np.float32)
    grads = mutad.gradient(lambda x, u: (x * x).sum(), np.ones(2), unused)
    assert grads[1].dtype == np.float32 and grads[1].shape == (2, 3) and not grads[1].any()


def test_constant_output_gives_zero_gradients():
    assert np.array_equal(mutad.gradient(lambda x: 3.0, np.ones(2))[0], np.zeros(2))


def test_float32_stays_float32():
    x = np.linspace(0.1, 1.0, 5, dtype=np.float32)
    (g,) = mutad.gradient(lambda x: np.sin(x).sum(), x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-6)


def test_value_and_gradient():
    value, (g,) = mutad.value_and_gradient(lambda x: (x ** 3).sum(), np.array([1.0, 2.0]))
    assert value == 9.0 and np.array_equal(g, [3.0, 12.0])


def test_same_array_twice_is_one_buffer():
    # Enzyme's memory semantics: each place receives the gradient with respect to the buffer.
    x = np.array([1.0, 2.0])
    da, db = mutad.gradient(weighted_sum, x, x)
    assert np.array_equal(da, 2 * x) and np.array_equal(db, 2 * x)


def test_overlapping_views_share_one_shadow():
    base = np.arange(1.0, 6.0)

    def f(a, b):
        a += b  # a = base[:3], b = base[2:]: a[2] is b[0]
        return (a * a).sum()

    mutad.check_grads(f, base[:3], base[2:])
    assert np.array_equal(base, np.arange(1.0, 6.0))


def test_caller_arrays_come_back_bit_for_bit_including_int_arrays():
    x = np.linspace(0.3, 1.7, 7)
    counts = np.arange(3)
    nested = {"y": [x[::2]]}

    def f(x, counts, nested):
        x *= 3.0
        x[1:] = np.exp(x[:-1])
        counts += 1
        nested["y"][0][0] = 5.0
        return x.sum()

    before = (x.tobytes(), counts.tobytes())
    mutad.gradient(f, x, counts, nested)
    assert (x.tobytes(), counts.tobytes()) == before


def test_caller_arrays_come_back_after_an_exception_midway():
    x = np.linspace(0.0, 1.0, 4)
    before = x.tobytes()

    def f(x):
        x += 1.0
        x *= x
        raise ValueError("midway")

    with pytest.raises(ValueError, match="midway"):
        mutad.gradient(f, x)
    assert x.tobytes() == before


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_zygote_120_helper_returning_nothing(policy):
    def add_vecs(a, b):
        a += b

    def add_sum(a, b):
        add_vecs(a, b)
        return a.sum()

    a, b = np.zeros(3), np.ones(3)
    da, db = mutad.gradient(add_sum, a, b, policy=policy)
    assert np.array_equal(da, np.ones(3)) and np.array_equal(db, np.ones(3))
    assert np.array_equal(a, np.zeros(3))


def test_zygote_120_rebinding():
    def add_vecs(a, b):
        a += b
        return a

    def add_sum(a, b):
        a = add_vecs(a, b)
        return a.sum()

    assert all(np.array_equal(g, np.ones(3)) for g in mutad.gradient(add_sum, np.zeros(3), np.ones(3)))


def leapfrog(q, p, steps=50, dt=0.05):
    for _ in range(steps):
        p -= 0.5 * dt * np.sin(q)
        q += dt * p
        p -= 0.5 * dt * np.sin(q)
    return (q * q).sum() + (p * p).sum()


def test_policies_agree_to_1e10_on_a_well_conditioned_program(rng):
    q, p = rng.standard_normal(20), rng.standard_normal(20)
    restored = mutad.gradient(leapfrog, q, p)
    checkpointed = mutad.gradient(leapfrog, q, p, policy="checkpoint")
    for r, c in zip(restored, checkpointed, strict=True):
        assert np.max(np.abs(r - c)) <= 1e-10 * np.max(np.abs(c))
    mutad.check_grads(leapfrog, q, p)


def test_pullback_leaves_f_state_until_back_and_is_one_shot():
    x = np.array([1.0, 2.0, 3.0])

    def f(x):
        x *= 2.0
        return x

    y, back = mutad.pullback(f, x)
    assert np.array_equal(x, [2.0, 4.0, 6.0])  # as f left it
    assert not np.shares_memory(y, x)
    (g,) = back(np.array([1.0, 1.0, 1.0]))
    assert np.array_equal(g, [2.0, 2.0, 2.0])
    assert np.array_equal(x, [1.0, 2.0, 3.0])  # as before f
    assert np.array_equal(y, [2.0, 4.0, 6.0])  # y is not rewound by the replay
    with pytest.raises(mutad.MutadError, match="second time"):
        back(np.ones(3))


def test_pullback_of_several_outputs():
    y, back = mutad.pullback(lambda a: (a * 2.0, a.sum()), np.array([1.0, 2.0]))
    (g,) = back((np.array([1.0, 0.0]), 3.0))
    assert np.array_equal(g, [5.0, 3.0])


def test_a_long_tape_of_small_operations(rng):
    x = rng.standard_normal(3)

    def f(x):
        for _ in range(20000):
            x *= 0.9999
            x += 1e-4
        return x.sum()

    (g,) = mutad.gradient(f, x)
    np.testing.assert_allclose(g, np.full(3, 0.9999 ** 20000), rtol=1e-9)


def test_threads_differentiate_independently(rng):
    from concurrent.futures import ThreadPoolExecutor

    xs = [rng.standard_normal(50) for _ in range(8)]
    expected = [mutad.gradient(leapfrog, x, x[::-1].copy())[0] for x in xs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda x: mutad.gradient(leapfrog, x, x[::-1].copy())[0], xs))
    for r, e in zip(results, expected, strict=True):
        assert np.array_equal(r, e)
