"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import numpy as np
import pytest

from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])
A = np.array([[0.3, -0.7, 1.1], [0.4, 2.0, -0.2]])


# ----------------------------------------------------------------------------------------------
# np.var and np.std of a traced keyword-only mean=: differentiated through the mean too

@pytest.mark.parametrize("f", [
    lambda x: np.std(x, mean=np.mean(x, keepdims=True)),
    lambda x: np.var(x, mean=np.mean(x, keepdims=True)),
    lambda x: np.var(x, mean=1.1 * np.mean(x, keepdims=True), ddof=1),
    lambda x: np.std(x, mean=np.array([0.2])),  # a plain mean: about the given mean
    lambda x: np.var(x, mean=np.array([0.2]), correction=1),
    lambda x: np.var(x * 2, mean=x[:1] ** 2),
    lambda x: np.sum(np.std(x.reshape(2, 2), axis=1, keepdims=True,
                            mean=np.mean(x.reshape(2, 2), axis=1, keepdims=True) * x[:2, None])),
    lambda x: np.sum(np.var(x.reshape(2, 2), 0, mean=x[2:] * 0.5,
                            where=np.array([[True, False], [True, True]]))),
])
def test_variance_of_a_traced_mean(f):
    check(f, X)


def test_variance_of_the_mean_numpy_computes_is_the_variance():
    """The mean given as NumPy computes it changes nothing, its derivative included (the
    derivative through the mean is 0 there)."""
    import mutad
    (g,) = mutad.gradient(lambda a: np.sum(np.std(a, axis=1, mean=np.mean(a, 1, keepdims=True))),
                          A)
    (plain,) = mutad.gradient(lambda a: np.sum(np.std(a, axis=1)), A)
    np.testing.assert_allclose(g, plain, rtol=1e-12, atol=1e-15)


def test_clip_of_a_traced_keyword_bound_beside_another_keyword():
    """A keyword argument that has no position (casting=) beside a traced keyword-only bound."""
    check(lambda x: np.sum(np.clip(x, min=x[0] * 0.5, casting="unsafe") ** 2), X)


def _variance_of_a_traced_mean_into_out(x):
    out = np.zeros(2)
    out += x[:2]  # overwritten: no gradient
    np.var(x.reshape(2, 2), axis=1, out=out, mean=x[2:, None] * 0.5)
    return np.sum(out * x[:2])


def test_variance_of_a_traced_mean_into_out():
    check(_variance_of_a_traced_mean_into_out, X)


# ----------------------------------------------------------------------------------------------
# Cholesky factorizations and SciPy's symmetric eigenproblems of a real matrix that is not
# symmetric: NumPy and SciPy read one triangle (NumPy's lower, or upper with upper=True;
# scipy.linalg.cholesky and cho_factor the upper by default, eigh and eigvalsh the lower), and
# the gradient goes onto the triangle read, 0 on the other

import scipy.linalg  # noqa: E402

ASYMMETRIC = np.array([[4.0, 1.0, 0.5], [0.3, 3.0, 0.2], [0.1, 0.7, 5.0]])


@pytest.mark.parametrize("f", [
    lambda a: np.sum(np.sin(np.linalg.cholesky(a))),
    lambda a: np.sum(np.sin(np.linalg.cholesky(a, upper=True))),
    lambda a: np.sum(np.sin(scipy.linalg.cholesky(a))),
    lambda a: np.sum(np.sin(scipy.linalg.cholesky(a, lower=True))),
    lambda a: np.sum(np.sin(scipy.linalg.cho_factor(a)[0])),
    lambda a: np.sum(np.sin(scipy.linalg.cho_factor(a, lower=True)[0])),
])
def test_cholesky_of_one_triangle(f):
    check(f, ASYMMETRIC)


def _eigenvectors_product(v):
    return np.sum(np.sin(v * v) * np.arange(v.size).reshape(v.shape))  # invariant to signs


@pytest.mark.parametrize("f", [
    lambda a: np.sum(np.sin(scipy.linalg.eigvalsh(a))),
    lambda a: np.sum(np.sin(scipy.linalg.eigvalsh(a, lower=False))),
    lambda a: np.sum(np.cos(scipy.linalg.eigh(a, eigvals_only=True))),
    lambda a: _eigenvectors_product(scipy.linalg.eigh(a)[1]) + np.sum(scipy.linalg.eigh(a)[0]),
    lambda a: _eigenvectors_product(scipy.linalg.eigh(a, lower=False)[1]),
    lambda a: np.sum(np.sin(scipy.linalg.eigvalsh(a, subset_by_index=[1, 2]))),
])
def test_scipy_symmetric_eigenproblem_of_one_triangle(f):
    check(f, ASYMMETRIC)
