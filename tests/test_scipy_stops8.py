"""SciPy programs that were refused or stopped: LAPACK's banded and tridiagonal routines as
``get_lapack_funcs`` returns them, ``lsqr``/``lsmr`` of a ``LinearOperator`` whose functions
read traced values, NumPy's ufuncs of a traced sparse matrix. Each checked with central
differences (``tests.test_scipy_stops.check``: reverse and forward mode, a replay), its value
SciPy's bit for bit and the caller's arrays unchanged, and replayed a third time."""

import warnings

import numpy as np
import pytest
import scipy.interpolate
import scipy.linalg
import scipy.ndimage
import scipy.optimize
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import mutad
from mutad.errors import UnsupportedOperationError
from tests.test_scipy_stops import central, check

X = np.array([0.7, 1.3, 0.4, 0.9, 1.1, 0.2, 0.8, 1.5])
W = np.cos(np.arange(8.0))


def check_replayed(f, x, rtol=1e-6, atol=1e-7):
    """``check``, and a replay at a third point: the traced gradient's bits, the caller's
    array unchanged."""
    check(f, x, rtol=rtol, atol=atol)
    replayed = mutad.grad(f, replay=True)
    for scale in (1.0, 1.02, 0.98):
        point = x * scale
        before = point.tobytes()
        np.testing.assert_array_equal(replayed(point), mutad.gradient(f, point)[0])
        assert point.tobytes() == before
    np.testing.assert_allclose(replayed(x * 0.98), central(f, x * 0.98), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------------------------
# LAPACK's band and tridiagonal solvers and factorizations, as get_lapack_funcs returns them:
# SciPy's values, the derivatives of lu_factor of the dense matrix (whose pivots theirs are),
# cholesky_banded, solveh_banded and solve


def _tridiagonal(p):  # a small diagonal: the rows are interchanged
    return 0.1 * p[1:] + 1.0, 0.3 * p - 0.2, 0.2 * p[:-1] + 0.5


def _gtsv(p):
    gtsv, = scipy.linalg.get_lapack_funcs(("gtsv",), (p,))
    du2, d, du, x, info = gtsv(*_tridiagonal(p), W.copy())
    return x @ W + du2 @ W[:7] + d @ W + du @ W[1:]


def _gtsv_overwriting(p):
    gtsv = scipy.linalg.get_lapack_funcs("gtsv", (p,))
    b = np.stack([W, W ** 2], 1)
    dl, d, du = _tridiagonal(p)
    du2, d2, du, x, info = gtsv(dl, d, du, b, overwrite_b=1, overwrite_d=1)
    return (x * b).sum() + d.sum() + d2 @ W


def _gttrf_gttrs(p, trans):
    gttrf, gttrs = scipy.linalg.get_lapack_funcs(("gttrf", "gttrs"), dtype=np.float64)
    dl, d, du, du2, ipiv, info = gttrf(*_tridiagonal(p))
    x, info = gttrs(dl, d, du, du2, ipiv, W * p, trans=trans)
    return x @ W + dl @ W[:7] + du2 @ W[:6] + np.prod(d)


def _pttrf_pttrs(p):
    pttrf, pttrs = scipy.linalg.get_lapack_funcs(("pttrf", "pttrs"), dtype=np.float64)
    d, e, info = pttrf(3 + p, 0.3 * p[1:])
    x, info = pttrs(d, e, W * p)
    return x @ W + d @ W + e @ W[1:]


def _ptsv(p):
    ptsv = scipy.linalg.get_lapack_funcs("ptsv", dtype=np.float64)
    d, e, x, info = ptsv(3 + p, 0.3 * p[1:], W)
    return x @ W + d @ W + e @ W[1:]


def _band(p, kl, ku, extra):
    """General band storage (``extra`` rows of workspace first) of a matrix whose small
    diagonal makes partial pivoting interchange rows."""
    ab = np.zeros((extra + kl + ku + 1, 8))
    ab[extra + ku] = 0.2 + 0.3 * p
    for k in range(1, ku + 1):
        ab[extra + ku - k, k:] = 1.0 + 0.2 * k * p[k:]
    for k in range(1, kl + 1):
        ab[extra + ku + k, :-k] = 0.7 + k + 0.1 * p[:-k]
    return ab


def _gbsv(p, kl, ku):
    gbsv = scipy.linalg.get_lapack_funcs("gbsv", dtype=np.float64)
    lub, piv, x, info = gbsv(kl, ku, _band(p, kl, ku, kl), W)
    return x @ W + 0.01 * (lub * np.arange(lub.size).reshape(lub.shape)).sum()


def _gbtrf_gbtrs(p, kl, ku):
    gbtrf, gbtrs = scipy.linalg.get_lapack_funcs(("gbtrf", "gbtrs"), dtype=np.float64)
    lu, ipiv, info = gbtrf(_band(p, kl, ku, kl), kl, ku)
    x, info = gbtrs(lu, kl, ku, W * p, ipiv)
    y, info = gbtrs(lu, kl, ku, W, ipiv, trans=1)
    return x @ W + y @ W + 0.01 * (lu * np.arange(lu.size).reshape(lu.shape)).sum()


def _positive_band(p, lower):
    ab = np.zeros((3, 8))
    if lower:
        ab[0], ab[1, :-1], ab[2, :-2] = 4 + p, 0.5 * p[1:], 0.2 * p[2:]
    else:
        ab[2], ab[1, 1:], ab[0, 2:] = 4 + p, 0.5 * p[1:], 0.2 * p[2:]
    return ab


def _pbsv_pbtrf_pbtrs(p, lower):
    pbsv, pbtrf, pbtrs = scipy.linalg.get_lapack_funcs(("pbsv", "pbtrf", "pbtrs"),
                                                       dtype=np.float64)
    ab = _positive_band(p, lower)
    c, x, info = pbsv(ab, W, lower=lower)
    c2, info = pbtrf(ab, lower=lower)
    y, info = pbtrs(c2, W * p, lower=lower)
    return x @ W + y @ W + 0.01 * (c * np.arange(24.0).reshape(3, 8)).sum() + c2.sum()


_S = np.random.default_rng(0).random((4, 4))


def _syevd(p):
    syevd = scipy.linalg.get_lapack_funcs("syevd", (_S,))
    w, v, info = syevd(_S + _S.T + np.diag(p[:4]))
    return w @ p[4:] + v[:, 0] ** 2 @ p[4:]


BANDED = [_gtsv, _gtsv_overwriting, lambda p: _gttrf_gttrs(p, "N"),
          lambda p: _gttrf_gttrs(p, "T"), _pttrf_pttrs, _ptsv, _syevd,
          *(lambda p, kl=kl, ku=ku: _gbsv(p, kl, ku) for kl, ku in [(1, 1), (2, 1), (1, 2)]),
          *(lambda p, kl=kl, ku=ku: _gbtrf_gbtrs(p, kl, ku) for kl, ku in [(1, 1), (2, 1),
                                                                              (2, 0)]),
          lambda p: _pbsv_pbtrf_pbtrs(p, 0), lambda p: _pbsv_pbtrf_pbtrs(p, 1)]


@pytest.mark.parametrize("f", BANDED, ids=["gtsv", "gtsv_overwriting", "gttrs_N", "gttrs_T",
                                           "pttrs", "ptsv", "syevd", "gbsv_11", "gbsv_21",
                                           "gbsv_12", "gbtrs_11", "gbtrs_21", "gbtrs_20",
                                           "pbsv_upper", "pbsv_lower"])
def test_banded_lapack_routines(f):
    check_replayed(f, X.copy())


def test_the_pivots_a_band_routine_interchanges_rows_by():
    """The test matrices make gttrf and gbtrf interchange rows, several in a row (each
    multiplier of getrf's L moved on by the next interchange)."""
    ipiv = scipy.linalg.lapack.dgttrf(*_tridiagonal(X))[4]
    assert np.sum(ipiv != np.arange(1, 9)) >= 3
    piv = scipy.linalg.lapack.dgbtrf(_band(X, 2, 1, 2), 2, 1)[1]
    assert np.sum(piv != np.arange(8)) >= 3


# ----------------------------------------------------------------------------------------------
# lsqr and lsmr of a LinearOperator whose matvec and rmatvec read traced values


def _operator(p):
    def matvec(v):
        return np.concatenate([(2 + p) * v + 0.1 * np.roll(v, 1), v[:2] * p[:2]])

    def rmatvec(u):
        return (2 + p) * u[:8] + 0.1 * np.roll(u[:8], -1) \
            + np.concatenate([u[8:] * p[:2], np.zeros(6)])

    return spla.LinearOperator((10, 8), matvec=matvec, rmatvec=rmatvec, dtype=float)


@pytest.mark.parametrize("method", ["lsqr", "lsmr"])
@pytest.mark.parametrize("damp", [0.0, 0.3, "traced"])
def test_least_squares_of_an_operator_reading_traced_values(method, damp):
    def f(p):  # (a traced damp was refused)
        b = np.concatenate([W, [0.5, p[3]]])
        x = getattr(spla, method)(_operator(p), b, damp=0.4 * p[5] if damp == "traced" else damp,
                                  atol=1e-14, btol=1e-14)[0]
        return x @ W

    check_replayed(f, X.copy())


# ----------------------------------------------------------------------------------------------
# NumPy's ufuncs of a traced sparse matrix: SciPy's matrix defines no __array_ufunc__, so
# NumPy's object loop calls its method (np.sqrt(A) is A.sqrt(), of A's class); the traced one
# does the same, and an ndarray's operators still give way to the matrix's reflected ones


@pytest.mark.parametrize("kind", [sp.csr_array, sp.csr_matrix, sp.coo_array])
@pytest.mark.parametrize("ufunc", [np.sqrt, np.sin, np.abs, np.expm1, np.tanh, np.negative,
                                   np.conjugate, np.square, np.log1p, np.deg2rad])
def test_a_numpy_ufunc_of_a_traced_sparse_matrix_is_scipys(kind, ufunc):
    classes = []

    def f(p):
        B = ufunc(kind(sp.diags([p, p[1:]], [0, 1])))
        classes.append(B.__class__)
        return (B @ W).sum() + B.sum()

    check_replayed(f, X.copy())
    assert set(classes) == {type(ufunc(kind(sp.diags([X, X[1:]], [0, 1]))))}


def test_an_ndarrays_operators_give_way_to_a_traced_sparse_matrix():
    def f(p):
        A = sp.csr_array(np.diag(p) + np.diag(p[1:], 1))
        a, t = W.copy(), 2.0 * p
        return ((a @ A) @ W + ((a * A) @ W).sum() + (a < A).sum() + (np.float64(2.0) * A).sum()
                + (a[:, None] + A).sum() + (t @ A) @ W + (t * A).sum() + (A.T @ t) @ a)

    check_replayed(f, X.copy())


def test_a_ufunc_of_a_traced_sparse_matrix_that_scipy_meets_as_an_object_is_refused():
    """NumPy's ufunc of SciPy's matrix and another operand, or with out=, is its object loop
    (np.multiply(x, A) an object array of x[i] * A): refused, saying what to call (x *= A,
    which rebinds x to A.__rmul__(x), is followed: tests.test_scipy_stops10)."""
    def of(g):
        return lambda p: g(W.copy(), sp.csr_array(np.diag(p))).sum()

    for g in [lambda a, A: np.multiply(a, A), lambda a, A: np.add.reduce(A),
              lambda a, A: np.multiply(a, A, out=a)]:
        with pytest.raises(UnsupportedOperationError, match="A.multiply"):
            mutad.gradient(of(g), X.copy())


@pytest.mark.parametrize("kind", [sp.csr_array, sp.csr_matrix, sp.coo_array, sp.lil_array])
@pytest.mark.parametrize("call", [np.exp, np.log, np.cos, np.floor, np.positive,
                                  lambda A: +A], ids=["exp", "log", "cos", "floor", "positive",
                                                       "unary_plus"])
def test_what_scipys_matrix_has_no_method_for_raises_scipys_error(kind, call):
    """Regression: NumPy's ufunc of a traced sparse matrix whose class has no method for it
    (np.exp(A): NumPy's object loop looks for A.exp()) raised mutad's refusal, and np.positive
    and +A, which SciPy's matrix refuses, returned the matrix: SciPy's error, in every mode."""
    def f(p):
        return call(kind(np.diag(p))).sum()

    with pytest.raises(TypeError) as plain:
        f(X.copy())
    replayed = mutad.grad(f, replay=True)
    for run in (lambda: mutad.gradient(f, X.copy()), lambda: replayed(X.copy()),
                lambda: replayed(X.copy()), lambda: mutad.jvp(f, (X.copy(),), (W,))):
        with pytest.raises(TypeError) as traced:
            run()
        assert str(traced.value) == str(plain.value)


def _square_root_sum(kind, p):
    A = kind(np.diag(np.maximum(p - 0.7, 0.0)) + np.diag(p[1:], 1))
    return (A.sqrt() @ W).sum() + np.sqrt(A).sum()


@pytest.mark.parametrize("kind", [sp.csr_array, sp.csr_matrix, sp.coo_array, sp.csc_matrix])
def test_the_root_of_a_sparse_matrix_of_a_dense_array_warns_as_scipys(kind):
    """Regression: the root (A.sqrt(), np.sqrt(A)) of a matrix made from a dense array warned
    "divide by zero ..., in the gradient of np.sqrt": mutad keeps the dense array's zeros that
    SciPy leaves out, and took their root's infinite partial. They are SciPy's unstored
    zeros, constants; which entries they are is the values' at each call (a replay's too:
    here entries of the diagonal become zero and nonzero from call to call)."""
    def f(p):
        return _square_root_sum(kind, p)

    x = np.array([0.9, 1.3, 0.4, 0.8, 1.1, 0.65, 0.8, 1.5])  # the diagonal: zero at 2 and 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(f, x, rtol=1e-5, atol=1e-6)
        replayed = mutad.grad(f, replay=True)
        for point in (x, x + 0.1, x - 0.3, x):
            np.testing.assert_array_equal(replayed(point), mutad.gradient(f, point)[0])
            np.testing.assert_allclose(replayed(point), central(f, point), rtol=1e-5, atol=1e-6)


def test_the_root_of_a_stored_zero_is_the_derivatives_event():
    """A zero SciPy stores (a matrix of data, indices and pointers) it takes the root of: its
    infinite partial is the derivative's own, warned of as np.sqrt's of a dense array is."""
    def f(p):
        return sp.csr_array((p * np.array([0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
                             np.arange(8), np.arange(9))).sqrt().sum()

    with pytest.warns(RuntimeWarning, match="in the gradient of np.sqrt"):
        mutad.gradient(f, X.copy())


# ----------------------------------------------------------------------------------------------
# A keyword argument carrying a derivative, which mutad refuses, where NumPy's call of those
# values fails first: NumPy's error


@pytest.mark.parametrize("f", [lambda c: np.clip(c, 0.0, max=c[1]).sum(),
                               lambda c: np.clip(c, a_min=0.0, max=c[1]).sum(),
                               lambda c: np.linspace(0.0, 1.0, 3, stop_at=c).sum(),
                               lambda c: np.sum(c, axis=3, initial=c[0])],
                         ids=["clip_positional_and_max", "clip_a_min_and_max",
                              "unknown_keyword", "sum_initial_bad_axis"])
def test_numpys_error_comes_before_the_refusal_of_a_traced_keyword(f):
    """Regression: np.clip(c, 0.0, max=b) with a traced b raised mutad's refusal of the
    keyword, where NumPy raises "clip() missing 1 required positional argument: 'a_max'"."""
    x = np.array([0.7, 1.3, 0.4])
    with pytest.raises(Exception) as plain:
        f(x)
    assert not isinstance(plain.value, mutad.MutadError)
    replayed = mutad.grad(f, replay=True)
    for run in (lambda: mutad.gradient(f, x), lambda: replayed(x), lambda: replayed(x),
                lambda: mutad.jvp(f, (x,), (np.ones(3),))):
        with pytest.raises(type(plain.value)) as traced:
            run()
        assert str(traced.value) == str(plain.value)


def test_a_traced_keyword_numpy_takes_is_still_refused_with_the_way_out():
    def f(c):
        total = np.empty(())
        np.sum(c, initial=c[0], out=total)  # (a traced initial= alone is differentiated)
        return total * 1.0

    with pytest.raises(UnsupportedOperationError, match="keyword argument initial="):
        mutad.gradient(f, np.array([0.7, 1.3]))


# ----------------------------------------------------------------------------------------------
# minimize(method="trust-constr") with an active inequality: its interior point stops on gtol
# with the barrier parameter where it is (SciPy's minimum 2e-5 inside the constraint), refused
# as no solution to the derivative's accuracy; the refusal names the options that bring it
# onto the constraint, and with them the minimum is differentiated


def test_trust_constr_with_an_active_inequality_says_what_brings_it_onto_it():
    def f(p, **options):
        res = scipy.optimize.minimize(
            lambda z: np.sum((z - p) ** 2), np.zeros(2), method="trust-constr",
            constraints=[scipy.optimize.LinearConstraint(np.array([[1.0, 1.0]]), -np.inf, 1.0)],
            options={"gtol": 1e-12, "xtol": 1e-14, **options})
        return res.x @ np.array([1.0, 2.0])

    p = np.array([0.9, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (SciPy's quasi-Newton's, of a quadratic)
        with pytest.raises(UnsupportedOperationError, match="initial_barrier_parameter"):
            mutad.gradient(f, p.copy())
        g, = mutad.gradient(lambda p: f(p, initial_barrier_parameter=1e-10,
                                        initial_barrier_tolerance=1e-10), p.copy())
    # z = p - (p₀ + p₁ - 1)/2 on the constraint: d(z₀ + 2 z₁) = (-1/2, 1/2)
    np.testing.assert_allclose(g, [-0.5, 0.5], atol=1e-7)


# ----------------------------------------------------------------------------------------------
# LAPACK's inverses from factors: getri, potri (one triangle, the other the input's), trtri


_M = np.random.default_rng(1).random((4, 4)) + 3.0 * np.eye(4)


def _getri(p):
    getrf, getri = scipy.linalg.get_lapack_funcs(("getrf", "getri"), (_M,))
    lu, piv, info = getrf(_M + np.diag(p[:4]))
    inverse, info = getri(lu, piv)
    return inverse @ p[4:] @ W[:4]


def _potri(p, lower):
    potrf, potri = scipy.linalg.get_lapack_funcs(("potrf", "potri"), (_M,))
    c, info = potrf(_M @ _M.T + np.diag(p[:4]), lower=lower, clean=0)
    inverse, info = potri(c, lower=lower)
    return (inverse * np.arange(16.0).reshape(4, 4)).sum() + inverse @ p[4:] @ W[:4]


def _trtri(p, lower, unitdiag):
    trtri = scipy.linalg.get_lapack_funcs("trtri", (_M,))
    inverse, info = trtri(_M + np.diag(p[:4]) + np.outer(p[4:], W[:4]), lower=lower,
                          unitdiag=unitdiag)
    return (inverse * np.arange(16.0).reshape(4, 4)).sum()


@pytest.mark.parametrize("f", [_getri, lambda p: _potri(p, 0), lambda p: _potri(p, 1),
                               lambda p: _trtri(p, 0, 0), lambda p: _trtri(p, 1, 0),
                               lambda p: _trtri(p, 0, 1)],
                         ids=["getri", "potri_upper", "potri_lower", "trtri_upper",
                              "trtri_lower", "trtri_unit"])
def test_lapack_inverses(f):
    check_replayed(f, X.copy())


# ----------------------------------------------------------------------------------------------
# scipy.ndimage's interpolations of a traced cval (refused): affine in the image and cval
# jointly, the derivative in cval SciPy's interpolation of zeros with cval=1


_IMAGE = np.random.default_rng(2).random((8, 9))


@pytest.mark.parametrize("mode", ["constant", "grid-constant"])
@pytest.mark.parametrize("order", [1, 3])
@pytest.mark.parametrize("transform", [
    lambda m, **k: scipy.ndimage.shift(m, (0.5, 1.3), **k) * _IMAGE,
    lambda m, **k: scipy.ndimage.zoom(m, 1.4, **k) ** 2,
    lambda m, **k: scipy.ndimage.rotate(m, 20.0, reshape=False, **k) * _IMAGE,
    lambda m, **k: scipy.ndimage.affine_transform(m, np.array([[1.1, 0.1], [0.0, 0.9]]),
                                                  offset=(0.5, -1.0), **k),
    lambda m, **k: scipy.ndimage.map_coordinates(m, np.array([[-1.3, 4.2, 8.7],
                                                              [2.1, 10.3, 8.6]]), **k),
    lambda m, **k: scipy.ndimage.geometric_transform(
        m, lambda x: (x[0] * 1.2 - 0.5, x[1] * 0.9 + 1.0), **k) * _IMAGE],
    ids=["shift", "zoom", "rotate", "affine_transform", "map_coordinates",
         "geometric_transform"])
def test_an_interpolation_of_a_traced_cval(transform, order, mode):
    check_replayed(lambda c: transform(_IMAGE * c[1], order=order, mode=mode, cval=c[0]).sum(),
                   np.array([0.3, 1.1]))


def test_an_interpolation_of_a_traced_cval_into_output():
    def f(c):
        out = np.zeros((8, 9))
        scipy.ndimage.shift(_IMAGE, (0.5, 1.3), output=out, cval=c[0])
        return (out * _IMAGE).sum()

    check_replayed(f, np.array([-0.4]))


# ----------------------------------------------------------------------------------------------
# scipy.interpolate.sproot of a spline of traced coefficients (FITPACK read the traced array):
# SciPy's roots, each moving as dr = -ds(r) / s'(r)

_KNOTS = np.linspace(0.0, 3.0, 12)


def _roots_of(p):
    tck = scipy.interpolate.splrep(_KNOTS, np.cos(2.0 * _KNOTS) * p[0] + p[1])
    return scipy.interpolate.sproot(tck)


def test_the_roots_of_a_spline_of_traced_coefficients():
    check_replayed(lambda p: (_roots_of(p) ** 2).sum() + _roots_of(p) @ np.arange(2.0),
                   np.array([1.0, 0.4]))


def test_the_roots_of_a_spline_replayed_where_their_number_changes():
    def f(p):
        return (_roots_of(p) ** 2).sum()

    replayed = mutad.grad(f, replay=True)
    for point in ([1.0, 0.5], [1.0, 1.5], [1.0, 0.2], [1.0, 0.5]):  # two roots, none, two
        point = np.array(point)
        np.testing.assert_array_equal(replayed(point), mutad.gradient(f, point)[0])


def test_the_cs_decomposition_of_a_differentiated_matrix_is_refused_saying_what_to_do():
    """Regression: scipy.linalg.cossin stopped on a conversion of the traced matrix."""
    a = np.random.default_rng(0).standard_normal((4, 4))

    def f(p):
        return scipy.linalg.cossin(scipy.linalg.expm((a - a.T) * p[0]), p=2, q=2)[1].sum()

    with pytest.raises(UnsupportedOperationError, match=r"svdvals\(X\[:p, :q\]\)"):
        mutad.gradient(f, np.array([1.0]))
    constant = scipy.linalg.expm(a - a.T)
    check(lambda p: scipy.linalg.cossin(constant, p=2, q=2)[1].sum() * p[0], np.array([1.0]))
