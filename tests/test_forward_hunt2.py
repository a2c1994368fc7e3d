"""Forward and reverse mode beside infinite and subnormal values: a zero (co)tangent component
beside an infinite operand contributes zero in both modes, as the elementwise rules' ``times``
products do, so the two modes give the same Jacobian."""

import numpy as np
import pytest

import mutad


def _jacobians(f, x):
    """``f``'s Jacobian at ``x`` by reverse mode and by one ``jvp`` per basis direction."""
    before = x.tobytes()
    reverse = np.asarray(mutad.jacrev(f)(x)).reshape(-1, x.size)
    forward = np.stack([np.ravel(mutad.jvp(f, (x,), (e,))[1]) for e in np.eye(x.size)], axis=1)
    assert x.tobytes() == before
    return reverse, forward


C = np.array([1.0, np.inf, 3.0])


@pytest.mark.parametrize("f", [
    lambda x: np.cross(x, C),
    lambda x: np.cross(C, x),
    lambda x: np.cross(x[:2], C[:2]),                   # 2-vectors: the z component alone
    lambda x: np.cross(x.reshape(3, 1), C.reshape(3, 1), axis=0).ravel(),
])
def test_a_cross_product_beside_an_infinite_component(f):
    """jvp took each term of the product rule as NumPy's cross product, whose ``0 * inf`` made
    the tangent of every component NaN: d(x × c)/dx₀ has no term of c₁ = inf in the component
    x₂c₀ - x₀c₂, yet it came out NaN. The pullback was right; the modes now agree."""
    x = np.array([0.5, -2.0, 1.5])
    reverse, forward = _jacobians(f, x)
    assert np.isfinite(reverse).sum() > 0
    np.testing.assert_array_equal(forward, reverse)


@pytest.mark.parametrize("f", [
    lambda x: np.convolve(x, x),
    lambda x: np.convolve(x, np.array([1.0, np.inf, 3.0])),
    lambda x: np.correlate(x, np.array([1.0, np.inf, 3.0]), "full"),
    lambda x: np.polymul(x, np.array([2.0, np.inf])),
])
def test_a_convolution_beside_an_infinite_element(f):
    """The pullback of np.convolve correlated the cotangent with the other operand by NumPy's
    convolution, so a zero cotangent beside an infinite element made every gradient NaN:
    d(x * x)[0]/dx₀ = 2x₀ came out NaN where x₁ = inf. jvp was right."""
    x = np.array([1.0, np.inf, 0.5, 0.0])
    reverse, forward = _jacobians(f, x)
    np.testing.assert_array_equal(reverse, forward)
    assert np.isfinite(reverse[0]).all()


def test_the_magnitude_of_a_subnormal_complex_number():
    """d|z|/dRe z = Re z / |z| = 1 at z = 5e-324: NumPy's complex division by |z| multiplies by
    1 / |z|, which overflows, so both modes gave NaN."""
    x = np.array([5e-324, 1e-310, -2.0])
    reverse, forward = _jacobians(lambda x: np.abs(x + 0j), x)
    np.testing.assert_array_equal(reverse, np.diag([1.0, 1.0, -1.0]))
    np.testing.assert_array_equal(forward, np.diag([1.0, 1.0, -1.0]))


def test_the_magnitude_of_an_infinite_complex_number_beside_others():
    """The direction z / |z| of z = inf is NaN; a zero (co)tangent beside it contributed NaN to
    every other element's derivative, by rows in jvp and by columns in the gradient."""
    x = np.array([np.inf, 2.0, -1.0])
    reverse, forward = _jacobians(lambda x: np.abs(x + 1j * x[::-1]), x)
    np.testing.assert_array_equal(reverse, forward)
    assert np.isfinite(reverse[1]).all()
    np.testing.assert_allclose(reverse[1], [0.0, np.sqrt(2.0), 0.0])  # |x₁ + i x₁| = √2 x₁


def test_a_product_along_an_axis_has_no_derivative_from_another_column_beside_an_infinity():
    """Row 0 of the Jacobian of ``np.prod(x.reshape(2, 2), axis=0)`` at [1, inf, .5, 0]: x[3]
    is in column 1 only, so its entry is 0; the pullback multiplied the zero cotangent by the
    product of the others there (inf) and gave NaN, where the jvp gave 0."""
    x = np.array([1.0, np.inf, 0.5, 0.0])
    before = x.copy()
    f = lambda x: np.prod(x.reshape(2, 2), axis=0)
    rows = mutad.jacrev(f)(x)
    columns = mutad.jacfwd(f)(x)
    assert np.array_equal(rows, columns, equal_nan=True)
    assert np.array_equal(rows[0], [0.5, 0.0, 1.0, 0.0])
    assert x.tobytes() == before.tobytes()
