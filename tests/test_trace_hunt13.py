"""Defects found by tracing real programs: the LU factors of a singular matrix, forward mode's
floating-point events inside adjoint rules, a complex diagonal written with real numbers, and
jacrev/jacfwd with auxiliary results."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import mutad

SINGULAR = np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])  # U's last diagonal entry is 0


def _weighted(m):
    return (m * np.arange(m.size).reshape(m.shape)).sum()


@pytest.mark.parametrize("f", [
    lambda a: sl.lu_solve(sl.lu_factor(a), np.ones(len(a))).sum(),
    lambda a: _weighted(sl.lu_factor(a)[0]),
    lambda a: _weighted(sl.lu(a)[2]),
])
@pytest.mark.parametrize("a", [np.ones((2, 2)), SINGULAR])
def test_the_lu_factors_of_a_singular_matrix(f, a):
    """The derivatives solved with U by LAPACK's trtrs, which raised LinAlgError on U's zero
    diagonal entry where SciPy's value is computed: they are the formulas' IEEE values (NaN
    here, as JAX's), and the factors' own value is SciPy's."""
    n = len(a)
    before = a.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.LinAlgWarning)
        (gradient,) = mutad.gradient(f, a)
        value, tangent = mutad.jvp(f, (a,), (np.ones((n, n)),))
        expected = f(a)
    assert a.tobytes() == before
    assert np.array_equal(value, expected, equal_nan=True)
    assert np.isnan(gradient).all() and np.isnan(tangent)


def test_the_lu_factors_of_a_regular_matrix_are_unchanged():
    """A regular U takes SciPy's triangular solve itself: finite differences agree."""
    a = np.array([[4.0, 1, 2], [1, 3, 0], [2, 1, 5]])
    f = lambda a: sl.lu_solve(sl.lu_factor(a), np.arange(1.0, 4.0)).sum()  # noqa: E731
    (gradient,) = mutad.gradient(f, a)
    h = 1e-6
    numeric = np.array([(f(a + h * e.reshape(3, 3)) - f(a - h * e.reshape(3, 3))) / (2 * h)
                        for e in np.eye(9)]).reshape(3, 3)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)
    assert np.isclose(mutad.jvp(f, (a,), (np.ones((3, 3)),))[1], gradient.sum())


TINY = np.diag([1e-320, 1e-320])  # its Cholesky factor's tangent divides 0 by 0


def _messages(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("f", [
    lambda a: sl.cholesky(a).sum(),
    lambda a: sl.cho_solve(sl.cho_factor(a), np.ones(2)).sum(),
    lambda a: np.linalg.cholesky(a).sum(),  # (a NumPy function's rule: the reference)
])
def test_forward_mode_labels_the_events_of_an_adjoint_rule(f):
    """jvp ran the forward rules of SciPy's functions (and mutad.adjoint's) outside
    ``tangent_errors``: their tangents' floating-point events were issued as NumPy's own, not
    labelled "in a tangent", and raised at once under np.errstate(all="raise")."""
    a, before = TINY.copy(), TINY.tobytes()
    messages = _messages(lambda: mutad.jvp(f, (a,), (np.ones((2, 2)),)))
    assert messages and all(m.endswith(", in a tangent") for m in messages)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="multiply, in a tangent"):
        mutad.jvp(f, (a,), (np.ones((2, 2)),))
    assert a.tobytes() == before


def test_the_value_events_of_an_adjoint_stay_numpys():
    """The events of the value an adjoint's forward rule computes are NumPy's own, unlabelled
    (and raised as NumPy raises them), its tangent's labelled."""
    @mutad.adjoint
    def reciprocal(x):
        return 1.0 / x

    @reciprocal.jvp_rule
    def _(tangents, x):
        y = 1.0 / x
        return y, -tangents[0] * y * y

    x = np.array([0.0, 2.0])
    messages = _messages(lambda: mutad.jvp(lambda x: reciprocal(x), (x,), (np.zeros(2),)))
    assert messages == ["divide by zero encountered in divide",
                        "invalid value encountered in multiply, in a tangent"]
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="encountered in divide\n"):
        mutad.jvp(lambda x: reciprocal(x), (x,), (np.ones(2),))


W = np.arange(9.0).reshape(3, 3)


def _hermitian_diagonal(h):
    """Writes the diagonal's real parts over it: the source is a float view of the complex
    target, NumPy reading it from a copy (an advanced index)."""
    h = h * (1 + 0.5j)
    h[np.diag_indices(3)] = h.diagonal().real
    return (np.abs(h) ** 2 * W).sum() + (h.imag * W.T).sum()


def test_a_complex_diagonal_written_with_its_real_parts():
    """The write stopped ("different item layout") where NumPy copies its source: the value
    is NumPy's bit for bit, the gradient (dL/dx + i dL/dy) that of finite differences."""
    h = np.arange(1.0, 10.0).reshape(3, 3) + 1j * np.arange(9.0, 0.0, -1).reshape(3, 3)
    before = h.tobytes()
    value, (gradient,) = mutad.value_and_gradient(_hermitian_diagonal, h)
    assert h.tobytes() == before
    assert np.float64(value).tobytes() == np.float64(_hermitian_diagonal(h)).tobytes()
    step = 1e-6
    numeric = np.zeros_like(h)
    for i in np.ndindex(h.shape):
        for unit in (1, 1j):
            e = np.zeros_like(h)
            e[i] = step * unit
            slope = (_hermitian_diagonal(h + e) - _hermitian_diagonal(h - e)) / (2 * step)
            numeric[i] += slope * unit
    np.testing.assert_allclose(gradient, numeric, rtol=1e-7, atol=1e-6)
    replayed = mutad.grad(_hermitian_diagonal, replay=True)
    for scale in (1.0, 2.0):  # recorded, then replayed
        (expected,) = mutad.gradient(_hermitian_diagonal, scale * h)
        assert replayed(scale * h).tobytes() == expected.tobytes()


def _with_aux(x):
    y = x * x
    y[1:] += x[:-1]  # in place
    return y, {"total": y.sum(), "label": "y", "y": y}


@pytest.mark.parametrize("jac", [mutad.jacfwd, mutad.jacrev])
def test_jacfwd_and_jacrev_take_has_aux(jac):
    """jacrev and jacfwd had no has_aux (JAX's have): the function returns (jacobian, aux),
    aux the plain values of f's run, not differentiated."""
    x = np.array([1.0, 2.0, 3.0])
    before = x.tobytes()
    jacobian, aux = jac(_with_aux, has_aux=True)(x)
    assert x.tobytes() == before
    assert np.array_equal(jacobian, jac(lambda x: _with_aux(x)[0])(x))
    expected = _with_aux(x.copy())[1]
    assert aux["label"] == "y" and type(aux["y"]) is np.ndarray
    assert type(aux["total"]) is type(expected["total"]) and aux["total"] == expected["total"]
    assert aux["y"].tobytes() == expected["y"].tobytes()
    with pytest.raises(mutad.MutadError, match="has_aux=True"):
        jac(lambda x: x * x, has_aux=True)(x)
