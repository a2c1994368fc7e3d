"""Wrong answers found by hunting through forward mode and second derivatives of in-place
programs (jvp, hvp, hessian, jacobian, jacfwd, jacrev, nested gradients)."""
import numpy as np
import pytest

import mutad


# ----------------------------------------------------------------------------------------------
# The Jacobian of outputs in a structure with respect to a tuple of argnums (or an argument that
# is a structure) was nested the argument outside: ``J[i][k]`` for argument i and output k,
# where JAX's jacfwd/jacrev (and the shape y.shape + x.shape) put the output outside,
# ``J[k][i]``. With outputs and arguments of the same shapes, code written for JAX's read
# another block than it meant, silently.

def _two_outputs(x, y):
    x *= y                      # in place
    x[1:] += y[:-1] ** 2
    return x.sum() * 2.0, x * 3.0


def _reference(x, y):
    """The blocks by central differences of the plain function: d output k / d argument i."""
    h = 1e-6

    def column(i, e, k):
        a = [x.copy(), y.copy()]
        b = [x.copy(), y.copy()]
        a[i] = a[i] + h * e
        b[i] = b[i] - h * e
        return (np.asarray(_two_outputs(*a)[k]) - np.asarray(_two_outputs(*b)[k])) / (2 * h)

    return [[np.moveaxis(np.array([column(i, e, k) for e in np.eye(2)]), 0, -1)
             for i in range(2)] for k in range(2)]


@pytest.mark.parametrize("transform", [
    lambda f: mutad.jacfwd(f, argnums=(0, 1)), lambda f: mutad.jacrev(f, argnums=(0, 1)),
    lambda f: lambda *a: mutad.jacobian(f, *a, argnums=(0, 1))],
    ids=["jacfwd", "jacrev", "jacobian"])
def test_jacobian_of_outputs_in_a_structure_nests_outputs_outside(transform):
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    x0, y0 = x.copy(), y.copy()
    J = transform(_two_outputs)(x, y)
    assert np.array_equal(x, x0) and np.array_equal(y, y0)
    expected = _reference(x, y)
    assert isinstance(J, tuple) and len(J) == 2
    for k in range(2):
        assert isinstance(J[k], tuple) and len(J[k]) == 2
        for i in range(2):
            np.testing.assert_allclose(J[k][i], expected[k][i], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("transform", [mutad.jacfwd, mutad.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_of_a_structured_argument_nests_outputs_outside(transform):
    def f(p):
        p["w"] *= p["b"]        # in place
        return {"total": p["w"].sum(), "each": p["w"] * 1.0}

    p = {"w": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    J = transform(f)(p)
    assert set(J) == {"total", "each"}
    np.testing.assert_array_equal(J["total"]["w"], [3.0, 4.0])
    np.testing.assert_array_equal(J["total"]["b"], [1.0, 2.0])
    np.testing.assert_array_equal(J["each"]["w"], np.diag([3.0, 4.0]))
    np.testing.assert_array_equal(J["each"]["b"], np.diag([1.0, 2.0]))
    assert np.array_equal(p["w"], [1.0, 2.0])


@pytest.mark.parametrize("transform", [mutad.jacfwd, mutad.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobian_of_the_gradient_of_two_arguments_is_hessians_blocks(transform):
    # JAX's idiom for the Hessian's blocks: jacfwd(grad(f, argnums=(0, 1)), argnums=(0, 1)),
    # its block [i][j] the derivative of the gradient of argument i along argument j
    def f(x, y):
        x[1:] *= y[:-1]             # in place
        y += x ** 2
        np.add.at(y, [0, 0, 2], x[:3])
        return np.sum(y ** 2 * x)

    x, y = np.array([0.3, -1.2, 0.8, 0.5]), np.array([1.1, 0.4, -0.7, 0.9])
    x0, y0 = x.copy(), y.copy()
    J = transform(lambda x, y: mutad.gradient(f, x, y), argnums=(0, 1))(x, y)
    H = mutad.hessian(f, x, y, argnums=(0, 1))
    assert np.array_equal(x, x0) and np.array_equal(y, y0)
    assert not np.allclose(H[0][1], H[1][0])  # the blocks that a transposed nesting swaps differ
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(J[i][j], H[i][j], rtol=1e-10, atol=1e-12)
