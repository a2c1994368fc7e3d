"""SciPy's LAPACK and BLAS wrappers called on traced values (scipy.linalg.lapack.dgesv,
get_lapack_funcs, scipy.linalg.blas.dgemm, ...), which stopped with a ConversionError: each
differentiated in reverse and forward mode against central differences, its value the routine's
own bit for bit, the caller's arrays unchanged, a few replayed; the overwrite flags and the
BLAS routines' output arguments written as SciPy writes them."""

import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.blas as blas
import scipy.linalg.lapack as lapack

import mutad
from mutad.errors import UnsupportedFunctionError, UnsupportedOperationError
from rule_checks import central_differences

RNG = np.random.default_rng(7)
A0 = RNG.random((4, 4)) + 4.0 * np.eye(4)
S0 = A0 @ A0.T
B0 = RNG.random(4) + 0.5


def central(f, x, h=1e-6):
    return central_differences(f, x, h)


def check(f, x, replay=False, rtol=1e-6, atol=1e-8):
    plain = f(x.copy())
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(f, x)
    assert x.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(plain).tobytes()
    np.testing.assert_allclose(g, central(f, x), rtol=rtol, atol=atol)
    direction = np.cos(np.arange(x.size)).reshape(x.shape)
    _, tangent = mutad.jvp(f, (x,), (direction,))
    np.testing.assert_allclose(tangent, np.sum(central(f, x) * direction), rtol=rtol, atol=atol)
    if replay:
        replayed = mutad.grad(f, replay=True)
        np.testing.assert_array_equal(replayed(x), g)
        other = x * 1.05
        np.testing.assert_allclose(replayed(other), central(f, other), rtol=rtol, atol=atol)
        np.testing.assert_array_equal(replayed(other), mutad.gradient(f, other)[0])


def _gesv(b):
    lu, piv, x, info = lapack.dgesv(A0 + np.diag(b), b)
    return np.sum(x ** 2) + np.sum(np.diag(lu)) + info


def _gesv_overwritten(b):
    a = np.asfortranarray(A0 + np.outer(b, b))
    rhs = b.copy()
    lu, piv, x, info = lapack.dgesv(a, rhs, overwrite_a=1, overwrite_b=1)
    assert lu is a and x is rhs  # (as in NumPy: the routine's outputs are the arrays passed)
    return np.sum(rhs ** 2) + np.sum(a[np.triu_indices(4)] * a[np.tril_indices(4)])


def _getrf_getrs(b):
    a = A0 + np.outer(b, b)
    lu, piv, info = lapack.dgetrf(a)
    x, info = lapack.dgetrs(lu, piv, b)
    y, _ = lapack.dgetrs(lu, piv, x, trans=1)
    return np.sum(x * y) + np.sum(np.log(np.abs(np.diag(lu))))


def _getrf_in_place(b):
    a = np.asfortranarray(A0 + np.diag(b))
    lapack.dgetrf(a, overwrite_a=True)  # the factors left in a, read back from it
    return np.sum(np.log(np.abs(np.diag(a)))) + np.sum(np.tril(a, -1) ** 2)


def _potrf_potrs(b):
    a = S0 + np.diag(b)
    c, info = lapack.dpotrf(a, lower=1)
    x, info = lapack.dpotrs(c, b, lower=1)
    return 2 * np.sum(np.log(np.diag(c))) + np.sum(x ** 2)


def _potrf_of_a_triangle(b):
    a = np.triu(S0 + np.outer(b, b))  # the triangle potrf reads: the other is left as it was
    c, info = lapack.dpotrf(a, clean=0)
    return np.sum(c ** 2) + np.sum(c[1:, 0])


def _posv(b):
    c, x, info = lapack.dposv(S0 + np.diag(b), b, lower=0)
    return np.sum(np.triu(c) ** 2) + np.sum(x)


def _trtrs(b):
    lower = np.tril(A0) + np.diag(b)
    x, info = lapack.dtrtrs(lower, b, lower=1)
    y, info = lapack.dtrtrs(lower, x, lower=1, trans=1, unitdiag=1)
    return np.sum(x ** 2) + np.sum(y)


def _syev(b):
    w, v, info = lapack.dsyev(S0 + np.outer(b, b))
    values, _, _ = lapack.dsyev(S0 + np.diag(b), compute_v=0, lower=1)
    return np.sum(w ** 2) + np.sum(v[:, -1] ** 2 * np.arange(4)) + np.sum(np.sqrt(values))


def _get_lapack_funcs(b):
    a = A0 + np.diag(b)
    getrf, getrs = scipy.linalg.get_lapack_funcs(("getrf", "getrs"), (a,))
    lu, piv, info = getrf(a)
    gesv = scipy.linalg.get_lapack_funcs("gesv", (a, b))
    x = gesv(a, b.copy(), overwrite_a=True, overwrite_b=True)[2]
    return np.sum(getrs(lu, piv, b)[0] ** 2) + np.sum(x)


def _blas_products(b):
    a = A0 + np.diag(b)
    c = np.asfortranarray(np.ones((4, 4)) * b)
    blas.dgemm(2.0, a, a, beta=0.5, c=c, trans_b=1, overwrite_c=1)  # into c
    y = blas.dgemv(1.5, a, b, trans=1)
    z = np.ones(4)
    blas.daxpy(b, z, a=2.0)  # into z, always
    blas.dscal(0.5, z)
    gemv, = scipy.linalg.get_blas_funcs(("gemv",), (a, b))
    return np.sum(c ** 2) + blas.ddot(y, z) + blas.dnrm2(gemv(1.0, a, z)) + np.sum(y)


def _blas_triangular(b):
    a = A0 + np.diag(b)
    m = np.outer(b, b[:3]) + 1.0
    x = blas.dtrsm(1.5, a, m, lower=1)
    y = blas.dtrsm(0.5, a[:3, :3], m, side=1, trans_a=1, diag=1)
    z = blas.dtrmm(2.0, a, x, trans_a=1)
    trsm, trmm = scipy.linalg.get_blas_funcs(("trsm", "trmm"), (a,))  # (SciPy's invwishart)
    w = trmm(1.0, a[:3, :3], trsm(1.0, a, m), side=1, lower=1, diag=1)
    return np.sum(x ** 2) + np.sum(y * z[:, :3]) + np.sum(w)


ROUTINES = {
    "blas triangular": (_blas_triangular, True),
    "gesv": (_gesv, True), "gesv overwriting a and b": (_gesv_overwritten, False),
    "getrf and getrs": (_getrf_getrs, True), "getrf in place": (_getrf_in_place, True),
    "potrf and potrs": (_potrf_potrs, True), "potrf of a triangle": (_potrf_of_a_triangle, False),
    "posv": (_posv, True), "trtrs": (_trtrs, True), "syev": (_syev, True),
    "get_lapack_funcs": (_get_lapack_funcs, False), "blas": (_blas_products, True),
}


@pytest.mark.parametrize("name", ROUTINES)
def test_lapack_and_blas_routines(name):
    f, replay = ROUTINES[name]
    check(f, B0.copy(), replay=replay)


def test_float32_routines_keep_their_dtype():
    def f(b):
        a = (A0 + np.diag(b)).astype(np.float32)
        lu, piv, x, info = lapack.sgesv(a, b.astype(np.float32))
        return np.sum(x.astype(float) ** 2)

    value, (g,) = mutad.value_and_gradient(f, B0.copy())
    assert value == f(B0.copy())
    np.testing.assert_allclose(g, central(f, B0, h=1e-3), rtol=1e-2)


def test_a_caller_array_overwritten_by_a_routine_comes_back():
    """The function's own argument factorized in place, as SciPy does: the caller's bytes
    come back after the differentiation."""
    def f(a):
        lapack.dgetrf(a, overwrite_a=1)
        return np.sum(np.log(np.abs(np.diag(a))))

    a = np.asfortranarray(A0.copy())
    before = a.tobytes()
    g, = mutad.gradient(f, a)
    assert a.tobytes() == before
    np.testing.assert_allclose(g, np.linalg.inv(A0).T, rtol=1e-9)


def test_routines_mutad_does_not_follow_are_refused_by_name():
    with pytest.raises(UnsupportedFunctionError, match="zgesv.*solve, lu_factor"):
        mutad.gradient(lambda b: np.sum(lapack.zgesv(A0 + 0j, b + 0j)[2].real), B0.copy())
    with pytest.raises(UnsupportedFunctionError, match="dgeqrf"):
        mutad.gradient(lambda b: np.sum(lapack.dgeqrf(A0 + np.diag(b))[0]), B0.copy())
    with pytest.raises(UnsupportedOperationError, match="incx"):
        mutad.gradient(lambda b: blas.ddot(b, b, incx=2, n=2), B0.copy())
    assert lapack.dgesv(A0, B0)[3] == 0  # outside: SciPy's own


def test_a_factorization_that_fails_is_refused_by_name():
    """potrf of a matrix that is not positive definite returns info > 0 and a partial factor,
    which has no derivative: refused, naming the routine and info."""
    def f(b):
        c, info = lapack.dpotrf(np.diag(b) - 1.0)
        return np.sum(c)

    with pytest.raises(UnsupportedOperationError, match="dpotrf returned info=1"):
        mutad.gradient(f, np.full(3, 0.5))
