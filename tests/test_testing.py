"""mutad.testing: its one stencil and its checks catch what they are for."""

import numpy as np
import pytest

import mutad
from mutad.testing import GradientCheckError, check_rule, check_transpose, directional_fd


def square_jvp(tangents, x):
    return x * x, 2.0 * x * tangents[0]


def square_vjp(x):
    return x * x, lambda w: (2.0 * x * w,)


def test_check_transpose_accepts_a_rule_pair_and_leaves_the_arguments(rng):
    x = rng.standard_normal(5)
    before = x.tobytes()
    check_transpose(square_jvp, square_vjp, x)
    assert x.tobytes() == before


def test_check_transpose_catches_a_reverse_rule_that_is_not_the_transpose(rng):
    def wrong_vjp(x):
        return x * x, lambda w: (2.0 * x[::-1] * w,)

    with pytest.raises(GradientCheckError, match="not transposes"):
        check_transpose(square_jvp, wrong_vjp, rng.standard_normal(5))


def test_check_transpose_catches_rules_computing_different_outputs(rng):
    def other_vjp(x):
        return x * x + 1.0, lambda w: (2.0 * x * w,)

    with pytest.raises(GradientCheckError, match="different outputs"):
        check_transpose(square_jvp, other_vjp, rng.standard_normal(5))


def test_check_transpose_catches_a_rule_that_writes_into_its_argument(rng):
    def writing_jvp(tangents, x):
        y = x * x
        x[0] = 0.0
        return y, 2.0 * x * tangents[0]

    with pytest.raises(GradientCheckError, match="bit-for-bit"):
        check_transpose(writing_jvp, square_vjp, rng.standard_normal(5))


def test_directional_fd_keeps_aliasing_as_forward_mode_does(rng):
    """Two views of one buffer move together, by the sum of their directions where they
    overlap: what mutad.jvp gives arguments that share memory."""
    def f(a, b):
        a[1:] *= np.sin(b[:-1])
        return a * b

    base = rng.standard_normal(6)
    args = (base[:5], base[1:])
    directions = (rng.standard_normal(5), rng.standard_normal(5))
    before = base.tobytes()
    numeric = directional_fd(f, args, directions)
    assert base.tobytes() == before
    _, dy = mutad.jvp(f, args, directions)
    np.testing.assert_allclose(numeric, dy, rtol=1e-8, atol=1e-10)


def test_directional_fd_gives_none_for_outputs_that_are_not_float(rng):
    x = rng.standard_normal(4)
    derivative, count = directional_fd(lambda x: (np.sin(x), np.count_nonzero(x > 0)), (x,),
                                       (np.ones(4),))
    np.testing.assert_allclose(derivative, np.cos(x), rtol=1e-8)
    assert count is None


def test_order_two_checks_every_composition_of_the_modes(monkeypatch, rng):
    """Reverse and forward mode of f, then of its pullback and of its pushforward."""
    calls = []
    pullback, jvp = mutad.testing.pullback, mutad.testing.jvp
    monkeypatch.setattr(mutad.testing, "pullback",
                        lambda f, *a, **k: calls.append(("rev", f.__name__)) or pullback(f, *a, **k))
    monkeypatch.setattr(mutad.testing, "jvp",
                        lambda f, *a: calls.append(("fwd", f.__name__)) or jvp(f, *a))
    mutad.check_grads(lambda x: np.sin(x) * x, rng.standard_normal(3), order=2)
    checked = [mode for mode, name in calls if name == "program"]  # a check differentiates this
    assert sorted(checked) == ["fwd"] * 3 + ["rev"] * 3  # of f, its pullback, its pushforward


def test_a_wrong_first_derivative_fails_order_two(rng):
    @mutad.adjoint
    def cube(x):
        return x * x * x

    @cube.rule
    def _cube_rule(x):
        return cube(x), lambda dy: (2.0 * x * x * dy,)

    with pytest.raises(GradientCheckError, match="gradient mismatch"):
        mutad.check_grads(lambda x: cube(x).sum(), rng.standard_normal(3), order=2)


@mutad.adjoint
def half_right_product(x):
    return x[0] * x[1]


@half_right_product.rule
def _half_right_product_rule(x):
    """Wrong: ``2 x[1]`` for ``x[0]`` and nothing for ``x[1]``; right along ``x`` alone, where
    both give ``2 x[0] x[1]``, as any derivative of a function of degree 2 does."""
    return half_right_product(x), lambda dy: (np.array([2.0 * x[1], 0.0]) * dy,)


@pytest.mark.parametrize("check", [mutad.check_grads, check_rule])
def test_a_check_is_not_made_along_arguments_drawn_with_its_seed(check):
    """``seed=s`` draws no direction that ``np.random.default_rng(s)`` drew as the argument."""
    x = np.random.default_rng(3).standard_normal(2)
    with pytest.raises(GradientCheckError, match="gradient mismatch"):
        check(half_right_product, x, seed=3)


def test_forward_mode_asked_for_of_a_function_without_a_forward_rule_is_refused(rng):
    @mutad.adjoint
    def cube(x):
        return x * x * x

    @cube.rule
    def _cube_rule(x):
        return cube(x), lambda dy: (3.0 * x * x * dy,)

    mutad.check_grads(lambda x: cube(x).sum(), rng.standard_normal(3), order=2)  # reverse only
    with pytest.raises(mutad.errors.UnsupportedFunctionError):
        mutad.check_grads(lambda x: cube(x).sum(), rng.standard_normal(3), modes=("fwd",))
