"""Programs in the forms scientific code takes (filters, steppers, solvers, resamplers), each
of which once gave a wrong value or gradient, or stopped: the value is NumPy's bit for bit,
the gradient the derivative of it, the caller's arrays come back, and a replay is the traced
run bit for bit."""

import numpy as np
import pytest

import mutad
from mutad.errors import UnsupportedOperationError
from test_replay import replayed_like_traced


def _resampled(particles, z):
    """A particle filter's step: weights made in the function, then resized to the number
    of particles (the same number: NumPy reshapes in place, checking no references) and
    refilled, as particle-filter code resets them after resampling."""
    n = len(particles)
    weights = np.ones(n) / n
    first = weights[:2]  # a view taken before the resize: it stays one with the weights
    weights *= np.exp(-0.5 * (particles - z) ** 2)
    weights /= weights.sum()
    log_likelihood = np.log(weights @ particles ** 2)
    indexes = np.searchsorted(np.cumsum(weights), (0.5 + np.arange(n)) / n)
    particles[:] = particles[np.minimum(indexes, n - 1)]
    weights.resize(len(particles))
    weights.fill(1.0 / len(weights))
    first *= 3.0
    weights.resize((2, n // 2))  # a new shape, the same number: a view of the same memory
    return log_likelihood + (weights[0] * particles[: n // 2]).sum() + particles.mean()


def test_a_resize_to_the_same_number_of_elements_reshapes_in_place():
    rng = np.random.default_rng(0)
    particles, z = rng.standard_normal(8), 0.3
    before = particles.tobytes()
    value, gradient = mutad.value_and_grad(_resampled)(particles, z)
    assert np.asarray(value).tobytes() == np.asarray(_resampled(particles.copy(), z)).tobytes()
    assert particles.tobytes() == before
    mutad.check_grads(_resampled, particles, z, modes=("rev", "fwd"))
    replayed_like_traced(_resampled, [(rng.standard_normal(8), z) for _ in range(4)])


def _resized_argument(x):
    x.resize(2, x.size // 2)  # NumPy: the caller's array takes the new shape
    return x.sum()


def _resized_strided(x):
    y = (x * 2.0)[::2]
    y.resize(y.size)
    return y.sum()


def test_a_resize_keeping_the_size_of_an_argument_or_a_strided_view_is_refused_as_numpy():
    x = np.arange(4.0)
    with pytest.raises(UnsupportedOperationError, match="caller.s array"):
        mutad.gradient(_resized_argument, x)
    with pytest.raises(ValueError, match="single-segment"):
        _resized_strided(x.copy())
    with pytest.raises(ValueError, match="single-segment"):
        mutad.gradient(_resized_strided, x)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_resize_keeping_the_size_of_an_argument_is_refused_in_forward_mode():
    x = np.arange(4.0)
    with pytest.raises(UnsupportedOperationError, match="caller.s array"):
        mutad.jvp(_resized_argument, (x,), (np.ones(4),))
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


_folded = np.vectorize(lambda t: t * t if t > 0 else -t)


def _vectorized_sums(a):
    return (_folded(a).sum(), np.vectorize(lambda s, t: s * t + 1.0)(a.T[:, :, None], a[0]).sum())


def _vectorized_sum(a):
    return _vectorized_sums(a)[0] + _vectorized_sums(a)[1]


LAYOUTS = {"F": np.asfortranarray, "transposed": lambda a: a.T.copy().T,
           "strided": lambda a: np.repeat(a, 2, axis=1)[:, ::2]}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_vectorize_lays_out_its_output_as_numpys_ufuncs_do(layout):
    """np.vectorize's output is a ufunc's (frompyfunc): laid out as its operands (order 'K'),
    so a Fortran-ordered argument gives a Fortran-ordered result, which a sum adds up in
    another order than a C-ordered one's; mutad stacked the results in C order, and the
    value differed from NumPy's in its last bits."""
    rng = np.random.default_rng(0)
    for shape in [(4, 3), (7, 5)] * 2:
        x = LAYOUTS[layout](rng.standard_normal(shape))
        before = x.tobytes()
        for k in range(2):
            def part(a):
                return _vectorized_sums(a)[k]
            expected = part(x.copy(order="K"))
            value, gradient = mutad.value_and_grad(part)(x)
            assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
            assert np.asarray(mutad.jvp(part, (x,), (x,))[0]).tobytes() == expected.tobytes()
            replaying = mutad.value_and_grad(part, replay=True)
            for _ in range(3):
                got = replaying(x)
                assert np.asarray(got[0]).tobytes() == np.asarray(expected).tobytes()
                assert got[1].tobytes() == gradient.tobytes()
        assert x.tobytes() == before
    mutad.check_grads(_vectorized_sum, x, modes=("rev", "fwd"))


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("layout", ["C", "F", "reversed"])
def test_vectorize_calls_the_function_as_numpy_does(layout, cache):
    """NumPy calls the function once on the first elements to decide the output type
    (reused for the first element visited where ``cache`` is set), then on each element in
    the order its ufunc machinery visits them, the arguments' memory order: a function that
    draws random numbers (or counts its calls) gives NumPy's values only in NumPy's order.
    mutad called it in C order, without the first call, and the values were others."""
    a = np.arange(1.0, 7.0).reshape(2, 3)
    x = {"C": a, "F": np.asfortranarray(a), "reversed": a[::-1].copy()[::-1]}[layout]

    def noisy(m):
        rng = np.random.default_rng(5)
        draw = np.vectorize(lambda mu: mu * rng.standard_normal(), cache=cache)
        return (draw(m) * np.arange(6.0).reshape(2, 3)).sum()

    expected = noisy(x.copy(order="K") if layout != "reversed" else x[::-1].copy()[::-1])
    assert mutad.value_and_grad(noisy)(x)[0] == expected
    assert mutad.jvp(noisy, (x,), (np.ones_like(x),))[0] == expected
    mutad.check_grads(noisy, x, modes=("rev", "fwd"))


def test_vectorize_with_every_argument_excluded_calls_the_function_once():
    total = np.vectorize(lambda x: x.sum() * 2.0, excluded={0})
    x = np.arange(3.0)
    value, gradient = mutad.value_and_grad(total)(x)
    assert value == total(x) == 6.0 and gradient.tolist() == [2.0, 2.0, 2.0]


def test_vectorize_of_a_python_number_beside_an_array():
    scaled = np.vectorize(lambda x, k: x * k)
    x = np.arange(1.0, 4.0)
    for f in (lambda a: scaled(a, 3.0).sum(), lambda a: scaled(a, k=3.0).sum(),
              lambda a: scaled(2.0, a).sum()):
        value, gradient = mutad.value_and_grad(f)(x)
        assert value == f(x.copy())
        mutad.check_grads(f, x, modes=("rev", "fwd"))
