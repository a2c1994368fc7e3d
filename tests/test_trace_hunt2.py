"""Wrong answers found by writing programs as scientists write them, each checked against NumPy's
values and JAX's or the exact derivative; every one failed before its fix."""

import numpy as np
import pytest

import mutad

# ----------------------------------------------------------------------------------------------
# where= reductions: an element the mask leaves out is never read, so its derivative is 0 even
# where the reduction's own derivative is NaN or infinite (a slice with too few elements for
# ddof, an overflowing product) or the tangent flowing into it is (sqrt's at 0).

A = np.array([[-0.6, -1.3, -0.1, 0.9],
              [-0.02, 0.49, -1.9, 0.14],
              [-0.9, 1.7, 0.88, 0.94]])


def finite_or_zero(y):
    return np.sum(np.where(np.isfinite(y), y, 0.0))


@pytest.mark.parametrize("reduction", [np.std, np.var])
def test_where_reduction_with_a_nan_slice_gives_left_out_elements_zero(reduction):
    def f(a):  # column 0 keeps one element, ddof=1: a NaN the program then drops
        return finite_or_zero(reduction(a, axis=0, where=a > -0.5, ddof=1))

    a = A.copy()
    g = mutad.gradient(f, a)[0]
    assert np.array_equal(a, A)
    left_out = ~(A > -0.5)
    assert np.all(g[left_out] == 0.0)
    # the element kept alone in column 0 is where the 0 * NaN of the chain rule stays
    assert np.isnan(g[1, 0]) and np.all(np.isfinite(g[:, 1:]))


def test_where_product_with_a_nan_cotangent_gives_left_out_elements_zero():
    def f(a):  # sqrt of a negative product: NaN, dropped, whose cotangent is NaN
        return finite_or_zero(np.sqrt(np.prod(a, axis=0, where=a > 0) - 1.0))

    g = mutad.gradient(f, A.copy())[0]
    assert np.all(g[~(A > 0)] == 0.0)


@pytest.mark.parametrize("reduction", [
    lambda y, m: np.std(y, where=m), lambda y, m: np.var(y, axis=0, where=m),
    lambda y, m: np.prod(y + 1.0, where=m)])
def test_where_reduction_forward_mode_ignores_the_tangents_of_left_out_elements(reduction):
    x = np.array([0.0, 1.0, 4.0, 0.0, 2.25])

    def f(x):  # sqrt's tangent at 0 is infinite, and the mask leaves those elements out
        return reduction(np.sqrt(x), x > 0)

    t = np.array([1.0, 0.5, -1.0, 2.0, 0.25])
    y, dy = mutad.jvp(f, (x,), (t,))
    kept = x > 0
    yk, dk = mutad.jvp(lambda z: reduction(np.sqrt(z), np.ones(z.shape, bool)), (x[kept],),
                       (t[kept],))
    assert y == yk and np.isfinite(dy) and np.isclose(dy, dk, rtol=1e-14)
