"""Wrong answers found by writing programs as scientists write them, each checked against NumPy's
values and the exact derivative; every one failed before its fix."""

import warnings

import numpy as np
import pytest

import mutad

# ----------------------------------------------------------------------------------------------
# Forward mode computes a tangent inside f, beside NumPy's value: the tangent's floating-point
# events (1 / (2 sqrt(x)) at x = 0) are the derivative's, not NumPy's. Raised or warned there, f
# could act on them, as on NumPy's own: under np.errstate(all="raise") it took its except branch,
# and a warning recorded by warnings.catch_warnings changed its value. They are issued once f
# has returned, as a reverse pass issues its gradient's.

X = np.array([0.0, 1.0, 4.0])


def _caught_error(x):
    with np.errstate(all="raise"):
        try:
            y = np.sqrt(x * 1.0)  # NumPy computes it; its derivative divides by zero
        except FloatingPointError:
            y = x * 0.0 + 100.0
    return np.sum(y)


def _caught_warning(x):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            y = x ** 0.5
            y *= 2.0
        except RuntimeWarning:
            y = x * 0.0 + 100.0
    return np.sum(y)


def _recorded_warnings(x):
    y = x * 1.0
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        np.sqrt(y, out=y)  # in place: the target's tangent is updated after the write
    return np.sum(y) + 100.0 * len(heard)


@pytest.mark.parametrize("f", [_caught_error, _caught_warning, _recorded_warnings])
def test_a_tangents_floating_point_events_are_not_fs(f):
    expected = f(X.copy())
    assert expected == f(X.copy()) and expected < 100.0  # NumPy takes no except branch
    x = X.copy()
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        try:
            value, tangent = mutad.jvp(f, (x,), (np.ones(3),))
        except FloatingPointError as error:  # the derivative's, raised once f returned
            assert f is _caught_error and "in a tangent" in str(error)
        else:
            assert value.tobytes() == expected.tobytes() and tangent == np.inf
            assert [str(w.message) for w in heard] == [
                "divide by zero encountered in divide, in a tangent"]
    assert np.array_equal(x, X)
    if f is not _caught_error:  # forward over reverse: the Hessian's diagonal (inf at 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h = mutad.hessian(f, X.copy())
        s = 2.0 if f is _caught_warning else 1.0
        assert np.array_equal(np.diag(h)[1:], -s * 0.25 * X[1:] ** -1.5)


def _function_events(x, catch):
    # np.prod's rule computes the value and its tangent (prod / x: 2e108 / 1e-200 overflows) in
    # one call
    if catch == "errors":
        with np.errstate(all="raise"):
            try:
                np.prod(x)
            except FloatingPointError:
                return x[1] * 0.0 + 100.0
        return x[1] * 1.0
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        np.prod(x)
        np.log(x[1:] - 2.0)  # NumPy's own warning (log(0)) is still heard
    return x[1] * 1.0 + 10.0 * len(heard)


@pytest.mark.parametrize("catch", ["errors", "warnings"])
def test_a_function_rules_tangent_events_are_not_fs(catch):
    x = np.array([1e-200, 2.0, 1e308])
    expected = _function_events(x.copy(), catch)
    assert expected == (2.0 if catch == "errors" else 12.0)
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        try:
            value, tangent = mutad.jvp(lambda x: _function_events(x, catch), (x.copy(),),
                                       (np.ones(3),))
        except FloatingPointError as error:
            assert catch == "errors" and "in a tangent" in str(error)
        else:
            assert catch == "warnings" and value == expected and tangent == 1.0
            assert any("overflow encountered" in str(w.message) for w in heard)


def test_numpys_own_error_still_reaches_f_in_forward_mode():
    def f(x):
        with np.errstate(divide="raise"):
            try:
                return np.sum(1.0 / x)
            except FloatingPointError:
                return np.sum(x * 3.0)

    x = np.array([0.0, 2.0])
    value, tangent = mutad.jvp(f, (x,), (np.array([1.0, 1.0]),))
    assert value == 6.0 and tangent == 6.0


# ----------------------------------------------------------------------------------------------
# np.linalg.cond computed as NumPy does: under np.errstate(all="ignore"), the norms' inverse in
# double precision with a singular matrix's inverse NaN (NumPy's cond of a singular matrix is
# inf, where mutad's inverse raised LinAlgError), cast to x's real precision (float32 values
# differed in the last bit), and a NaN where x holds none made inf (the zero matrix's 0 / 0).

MATRICES = {
    "singular": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "zero": np.zeros((2, 2)),
    "float32": np.array([[2.0, 1.0], [0.5, 3.0]], np.float32),
    "complex64": np.array([[2.0, 1.0j], [0.5, 3.0]], np.complex64),
    "stack": np.stack([np.zeros((2, 2)), np.eye(2), [[2.0, 1.0], [0.5, 3.0]]]),
    "nan": np.array([[np.nan, 1.0], [0.5, 3.0]]),
}


@pytest.mark.parametrize("p", [1, -1, np.inf, "fro", "nuc"])
@pytest.mark.parametrize("name", MATRICES)
def test_cond_of_any_matrix_is_numpys(name, p):
    a = MATRICES[name]
    try:
        expected = np.linalg.cond(a, p)
    except np.linalg.LinAlgError:  # the nuclear norm of a NaN inverse: the SVD fails
        with pytest.raises(np.linalg.LinAlgError):
            mutad.jvp(lambda z: np.linalg.cond(z, p), (a.copy(),), (np.ones_like(a),))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's cond warns about nothing
        y, _ = mutad.jvp(lambda z: np.linalg.cond(z, p), (a.copy(),), (np.ones_like(a),))
        (_, value), _ = mutad.value_and_gradient(
            lambda z: (np.sum(np.linalg.cond(z, p)), np.linalg.cond(z, p)), a.copy(),
            has_aux=True)
    for got in (y, value):
        assert type(got) is type(expected) and got.dtype == expected.dtype
        assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond_gradient_of_a_regular_matrix(p):
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    g = mutad.gradient(lambda z: np.linalg.cond(z, p), a)[0]
    eps = 1e-6
    fd = [(np.linalg.cond(a + eps * e, p) - np.linalg.cond(a - eps * e, p)) / (2 * eps)
          for e in np.eye(4).reshape(4, 2, 2)]
    assert np.allclose(g.ravel(), fd, rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# Derivatives that take an SVD with vectors where NumPy's own function takes none (the
# cofactors of np.linalg.det, the spectral norms, np.linalg.svd(compute_uv=False)): LAPACK's
# SVD of a matrix holding an infinity may never return, so the differentiation hung where
# NumPy answers. Such a matrix's derivative is NaN.

def _svd_of_finite_matrices_only(monkeypatch):
    svd = np.linalg.svd

    def guarded(a, full_matrices=True, compute_uv=True, hermitian=False):
        if type(a) is np.ndarray and compute_uv and not np.isfinite(a).all():
            raise AssertionError("an SVD with vectors of a matrix that is not finite")
        return svd(a, full_matrices, compute_uv, hermitian)

    monkeypatch.setattr(np.linalg, "svd", guarded)


@pytest.mark.parametrize("function", [
    np.linalg.det, lambda a: np.linalg.svd(a, compute_uv=False).sum(),
    lambda a: np.linalg.norm(a, 2), lambda a: np.linalg.norm(a, "nuc"),
    lambda a: np.linalg.norm(a, -2), lambda a: np.linalg.cond(a)])
def test_derivatives_of_a_matrix_with_an_infinity_take_no_svd_of_it(function, monkeypatch):
    def f(x):
        return function(np.diag(x))

    x = np.array([np.inf, 1.0, 0.0, 2.0])
    expected = f(x.copy())
    _svd_of_finite_matrices_only(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, g = mutad.value_and_gradient(f, x.copy())
        y, t = mutad.jvp(f, (x.copy(),), (np.ones(4),))
    assert value.tobytes() == expected.tobytes() and y.tobytes() == expected.tobytes()
    assert np.isnan(g[0][0])  # in the infinite entry


@pytest.mark.parametrize("function", [
    np.linalg.det, lambda a: np.linalg.svd(a, compute_uv=False)[..., 0],
    lambda a: np.linalg.norm(a, "nuc", axis=(-2, -1))])
def test_a_finite_matrix_beside_one_with_an_infinity_keeps_its_derivative(function,
                                                                           monkeypatch):
    finite = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.0, 1.0, 4.0]])
    singular = np.diag([np.inf, 1.0, 0.0])  # det's cofactors: an SVD
    alone = mutad.gradient(lambda a: function(a[None])[0], finite)[0]
    _svd_of_finite_matrices_only(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = mutad.gradient(lambda a: function(a)[1], np.stack([singular, finite]))[0]
    assert np.allclose(g[1], alone, rtol=1e-12, atol=1e-14)  # (det: by its cofactors)
