"""Programs calling SciPy (outside scipy.stats) that stopped with an error instead of being
differentiated: each checked against central differences, in reverse mode, forward mode and a
replay (``grad(..., replay=True)`` recorded at one point, replayed at another), its value
SciPy's bit for bit and the caller's arrays unchanged; and the cases that stay refused, with
what to do instead."""

import functools

import numpy as np
import pytest
import scipy.fft
import scipy.fftpack
import scipy.integrate
import scipy.interpolate
import scipy.linalg
import scipy.optimize
import scipy.signal
import scipy.sparse
import scipy.sparse.linalg
import scipy.spatial
import scipy.stats.qmc
import scipy.special

import mutad
from cases import replays_as_traced
from mutad.engines.replay import Program
from mutad.errors import UnsupportedOperationError


def central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def check(f, x, rtol=1e-6, atol=1e-7, symmetric=False, h=1e-6, replay=True):
    """``f``'s value (SciPy's, bit for bit), gradient (reverse mode, and, where ``replay``, a
    replay at another point), and directional derivative (forward mode) against central
    differences of step ``h``; ``x`` unchanged. ``symmetric``: a symmetric matrix argument,
    whose gradient is the symmetric one (the differences are symmetrised too)."""
    def expected(x):
        g = central(f, x, h)
        return (g + g.T) / 2 if symmetric else g

    plain = f(x.copy())
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(f, x)
    assert x.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(plain).tobytes()
    np.testing.assert_allclose(g, expected(x), rtol=rtol, atol=atol)
    direction = np.cos(np.arange(x.size)).reshape(x.shape)
    if symmetric:
        direction = direction + direction.T
    _, tangent = mutad.jvp(f, (x,), (direction,))
    np.testing.assert_allclose(tangent, np.sum(central(f, x, h) * direction), rtol=rtol,
                               atol=atol * np.abs(direction).sum())
    if not replay:
        return
    replayed = mutad.grad(f, replay=True)
    np.testing.assert_array_equal(replayed(x), g)
    other = x * 1.05
    before = other.tobytes()
    np.testing.assert_allclose(replayed(other), expected(other), rtol=rtol, atol=atol)
    assert other.tobytes() == before


# ----------------------------------------------------------------------------------------------
# scipy.linalg.eigh and eigvalsh of a subset of the eigenpairs: SciPy's subset, differentiated
# by the formulas of all the eigenpairs (an eigenvector's derivative couples it with the others)

_M = np.random.default_rng(4).random((5, 5))
SPD = _M @ _M.T + np.eye(5)
PENCIL = 2.0 * np.eye(5) + 0.1


def _subset_vectors(a):
    w, v = scipy.linalg.eigh(a, subset_by_index=[1, 2])
    return w.sum() + (v[:, 0] ** 2 * np.arange(5)).sum() + v[0, 1] * v[1, 1]


def _subset_by_value(a):
    return scipy.linalg.eigh(a, eigvals_only=True, subset_by_value=(0.5, 3.0)).sum()


def _eigvalsh_subset(a):
    return (scipy.linalg.eigvalsh(a, subset_by_index=(3, 4)) ** 2).sum()


def _generalized_subset(a):
    w, v = scipy.linalg.eigh(a, PENCIL, subset_by_index=[0, 1])
    return w[0] + v[2, 1] * v[3, 1]


def _subset_by_value_vectors(a):
    w, v = scipy.linalg.eigh(a, subset_by_value=(1.05, 12.0), driver="evx")
    return np.sum(w * np.abs(v[0])) + v[1, -1] * v[4, -1]


@pytest.mark.parametrize("f", [_subset_vectors, _subset_by_value, _eigvalsh_subset,
                               _generalized_subset, _subset_by_value_vectors],
                         ids=lambda f: f.__name__)
def test_eigh_subset(f):
    check(f, SPD.copy(), symmetric=True)


def test_eigh_subset_refusals():
    repeated = np.diag([1.0, 2.0, 2.0, 3.0])
    with pytest.raises(UnsupportedOperationError, match="repeated"):
        mutad.gradient(lambda a: scipy.linalg.eigh(a, subset_by_index=[1, 1])[1][0, 0],
                       repeated)
    with pytest.raises(UnsupportedOperationError, match="stack of matrices by value"):
        mutad.gradient(lambda a: scipy.linalg.eigvalsh(np.stack([
            a, np.diag([2.0, 3.0, 4.0, 5.0, 20.0])]), subset_by_value=(1.05, 12.0)).sum(),
            SPD.copy())


def test_eigh_subset_of_a_stack():
    check(lambda a: (scipy.linalg.eigh(np.stack([a, a @ a]), subset_by_index=[2, 3])[1][:, :, 0]
                     ** 2 * np.arange(4.0)).sum(), SPD[:4, :4].copy(), symmetric=True)
    check(lambda a: scipy.linalg.eigvalsh(np.stack([a, a + 0.01 * np.eye(5)]),
                                          subset_by_value=(1.05, 100.0)).prod(),
          SPD.copy(), symmetric=True)


# ----------------------------------------------------------------------------------------------
# scipy.optimize.newton of an array x0: SciPy's vectorized Newton, its roots differentiated as
# root's solution of func(x) = 0


def _newton_squares(a):
    r = scipy.optimize.newton(lambda x: x ** 2 - a, np.array([1.0, 1.0, 2.0]), tol=1e-14)
    return (r * np.arange(1, 4)).sum()


def _newton_args_fprime(a):
    res = scipy.optimize.newton(lambda x, c: np.cos(x) - c * x, np.full(3, 0.5),
                                fprime=lambda x, c: -np.sin(x) - c, args=(a,), tol=1e-14,
                                full_output=True)
    return res.root @ np.arange(1.0, 4.0) + res.converged.sum()


@pytest.mark.parametrize("f", [_newton_squares, _newton_args_fprime], ids=lambda f: f.__name__)
def test_newton_of_an_array(f):
    check(f, np.array([2.0, 3.0, 5.0]) / 4, rtol=1e-6)


def test_newton_of_one_element_array_refused():
    with pytest.raises(UnsupportedOperationError, match="x0 as a number"):
        mutad.gradient(lambda a: scipy.optimize.newton(lambda x: x ** 2 - a, np.array([1.0]))[0],
                       np.array([2.0]))


# ----------------------------------------------------------------------------------------------
# scipy.fftpack: scipy.fft's transforms by fftpack's arguments

FFTPACK = {
    "dct": lambda x: (scipy.fftpack.dct(x, norm="ortho")[:, :5] ** 2).sum()
    + scipy.fftpack.dct(x, type=1).sum(),
    "idct": lambda x: (scipy.fftpack.idct(x, type=2) * np.arange(x.shape[-1])).sum()
    + scipy.fftpack.idct(x, 3, n=5, norm="ortho").sum(),
    "dst": lambda x: (scipy.fftpack.dst(x, 2, axis=0) ** 2).sum()
    + scipy.fftpack.idst(x, 4).sum(),
    "dctn": lambda x: (scipy.fftpack.dctn(x, norm="ortho") ** 2
                       * np.arange(x.size).reshape(x.shape)).sum()
    + scipy.fftpack.idctn(x, shape=(2, 5)).sum() + scipy.fftpack.idstn(x, axes=[0]).sum(),
    "fft": lambda x: np.abs(scipy.fftpack.fft(x, n=9)).sum()
    + np.real(scipy.fftpack.ifft(x * 1j, axis=0)).sum(),
    "fftn": lambda x: np.abs(scipy.fftpack.fftn(x)).sum()
    + np.abs(scipy.fftpack.ifft2(x, shape=(4, 4))).sum(),
    "rfft": lambda x: (scipy.fftpack.rfft(x) ** 2 * np.arange(x.shape[-1])).sum()
    + scipy.fftpack.rfft(x, n=5, axis=0).sum() + scipy.fftpack.rfft(x, 6).sum(),
    "irfft": lambda x: (scipy.fftpack.irfft(x) * np.arange(x.shape[-1])).sum()
    + scipy.fftpack.irfft(x, n=10).sum() + scipy.fftpack.irfft(x, 5, axis=0).sum(),
}


@pytest.mark.parametrize("n", [7, 8])
@pytest.mark.parametrize("name", list(FFTPACK))
def test_fftpack(name, n):
    check(FFTPACK[name], np.random.default_rng(n).random((3, n)))


def test_fftpack_values_bit_for_bit():
    """fftpack's own outputs, of every shape its arguments give (the packed real forms too)."""
    x = np.random.default_rng(0).random((3, 7))
    for name in ("dct", "idct", "dst", "idst", "fft", "ifft", "rfft", "irfft"):
        for n in (None, 5, 10):
            def f(z, name=name, n=n):
                return getattr(scipy.fftpack, name)(z, n=n, axis=0)
            assert mutad.vjp(f, x)[0].tobytes() == f(x).tobytes()
            assert mutad.jvp(f, (x,), (x,))[0].tobytes() == f(x).tobytes()


# ----------------------------------------------------------------------------------------------
# quad and solve_ivp of a callable object, or a method bound to one, that holds differentiated
# arrays in its attributes (an interpolant, a model class)


class _Model:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return self.w[0] * np.sin(x) + self.w[1] * x ** 2

    def rhs(self, t, y):
        return -self.w[0] * y + self.w[1]


CALLABLES = {
    "quad of an object": lambda w: scipy.integrate.quad(_Model(w * 2.0), 0, 1)[0],
    "quad of its __call__": lambda w: scipy.integrate.quad(_Model(w).__call__, 0, 1)[0],
    "solve_ivp of a bound method": lambda w: scipy.integrate.solve_ivp(
        _Model(w).rhs, (0, 1), [1.0], rtol=1e-10, atol=1e-12).y[0, -1],
    "quad of an interpolant": lambda y: scipy.integrate.quad(scipy.interpolate.interp1d(
        np.linspace(0, 1, 2), y, kind="linear"), 0, 1)[0],
}


@pytest.mark.parametrize("name", list(CALLABLES))
def test_callable_objects_holding_differentiated_arrays(name):
    check(CALLABLES[name], np.array([0.7, 1.3]), rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# solve_ivp and odeint with differentiated times alone (the parameters and y0 constants)

TIMES = {
    "final time": lambda T: scipy.integrate.solve_ivp(
        lambda t, y: -y + np.sin(t), (0, T[0]), [1.0], rtol=1e-10, atol=1e-12).y[0, -1],
    "both ends, dense": lambda T: (lambda sol: sol.sol(1.0)[0] + sol.y[0, -1])(
        scipy.integrate.solve_ivp(lambda t, y: -y + np.sin(t), (T[1], T[0]), [1.0],
                                  rtol=1e-10, atol=1e-12, dense_output=True)),
    "odeint's last time": lambda T: scipy.integrate.odeint(
        lambda y, t: -y + np.sin(t), [1.0], np.array([0.0, 1.0, T[0]]), rtol=1e-10,
        atol=1e-12)[-1, 0],
}


@pytest.mark.parametrize("name", list(TIMES))
def test_differentiated_times_alone(name):
    check(TIMES[name], np.array([2.0, 0.3]), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# np.matrix results of scipy.sparse (sum(axis), todense()): np.matrix's reductions


def _laplacian(n):
    return scipy.sparse.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1],
                              format="csr")


MATRICES = {
    "max, min of sums": lambda k: (scipy.sparse.diags(k) @ _laplacian(6)).multiply(
        _laplacian(6)).sum(axis=0).max() + (scipy.sparse.diags(k) @ _laplacian(6)).sum(
        axis=1).min(),
    "mean": lambda k: (scipy.sparse.diags(k) @ _laplacian(6)).todense().mean()
    + (scipy.sparse.diags(k) @ _laplacian(6)).todense().mean(axis=0).sum()
    + np.max(scipy.sparse.csr_matrix(np.diag(k)).sum(axis=0)),
    "std, var": lambda k: (scipy.sparse.diags(k) + _laplacian(6)).todense().std(axis=1).sum()
    + (scipy.sparse.diags(k) + _laplacian(6)).todense().var(ddof=1)
    + np.mean(scipy.sparse.diags(k).sum(axis=1)),
    "trace, abs, diagonal, prod": lambda k: (
        (scipy.sparse.diags(k) + _laplacian(6)).todense().trace()[0, 0]
        + abs(-(scipy.sparse.diags(k) @ _laplacian(6)).todense()).sum()
        + (scipy.sparse.diags(k) + _laplacian(6)).todense().diagonal()[0, 2]
        + (scipy.sparse.diags(k) + _laplacian(6)).sum(axis=0).prod()),
    "spmatrix plus and minus arrays": lambda k: (
        np.sum(np.asarray(scipy.sparse.diags(k) + np.eye(6)) ** 2)
        + (np.outer(k, k) - scipy.sparse.diags(k ** 2)).sum(axis=0).max()
        + (scipy.sparse.csr_matrix(np.diag(k)) - k).A1 @ np.tile(k, 6)
        + (np.ones(6) + scipy.sparse.diags(k)).mean()),
}


@pytest.mark.parametrize("name", list(MATRICES))
def test_matrix_reductions(name):
    check(MATRICES[name], np.linspace(1.0, 2.0, 6))


MATRIX_FUNCTIONS = {
    "det": lambda k: np.linalg.det((scipy.sparse.diags(k) + _laplacian(6)).todense()),
    "slogdet": lambda k: np.linalg.slogdet((scipy.sparse.diags(k) + _laplacian(6)).todense())[1],
    "inv, solve": lambda k: np.linalg.inv((scipy.sparse.diags(k) + _laplacian(6)).todense()).sum()
    + np.linalg.solve((scipy.sparse.diags(k) + _laplacian(6)).todense(), np.ones(6)).sum(),
    "eigvalsh": lambda k: np.linalg.eigvalsh((scipy.sparse.diags(k) + _laplacian(6)).todense()
                                             ).max(),
    "trace, diag, norm": lambda k: np.trace((scipy.sparse.diags(k) @ _laplacian(6)).todense())
    + np.diag((scipy.sparse.diags(k) @ _laplacian(6)).todense()).sum()
    + np.linalg.norm((scipy.sparse.diags(k) @ _laplacian(6)).sum(axis=0)),
    "cumsum, ravel": lambda k: np.cumsum((scipy.sparse.diags(k) @ _laplacian(6)).sum(axis=1)
                                         ).max()
    + np.ravel((scipy.sparse.diags(k) @ _laplacian(6)).todense()).sum(),
}


@pytest.mark.parametrize("name", list(MATRIX_FUNCTIONS))
def test_numpy_functions_of_matrices(name):
    check(MATRIX_FUNCTIONS[name], np.linspace(1.0, 2.0, 6), rtol=1e-6, atol=1e-6)


def test_matrix_results_have_numpy_matrix_shapes():
    seen = {}

    def f(k):
        m = (scipy.sparse.diags(k) + _laplacian(3)).todense()
        seen.update(trace=np.shape(m.trace()), diagonal=np.shape(m.diagonal()),
                    max=np.shape(m.max(axis=1)), mean=np.ndim(m.mean()),
                    inverse=isinstance(np.linalg.inv(m), np.matrix), det=np.ndim(np.linalg.det(m)),
                    cumsum=np.shape(np.cumsum(m)))
        return m.sum()

    mutad.gradient(f, np.ones(3))
    plain = np.matrix(np.eye(3) * 2)
    assert seen == dict(trace=np.shape(plain.trace()), diagonal=np.shape(plain.diagonal()),
                        max=np.shape(plain.max(axis=1)), mean=np.ndim(plain.mean()),
                        inverse=True, det=0, cumsum=np.shape(np.cumsum(plain)))


# ----------------------------------------------------------------------------------------------
# scipy.spatial's distance_matrix, minkowski_distance, minkowski_distance_p

_P = np.random.default_rng(0).random((5, 3))
_Q = np.random.default_rng(1).random((4, 3))

DISTANCES = {
    "to itself": lambda x: (1 / (scipy.spatial.distance_matrix(x, x) + np.eye(5))).sum(),
    "p = 1, inf, 3": lambda x: scipy.spatial.distance_matrix(x, _Q, p=1).sum()
    + scipy.spatial.distance_matrix(x, _Q, p=np.inf).sum()
    + (scipy.spatial.distance_matrix(x, _Q, p=3) ** 2).sum(),
    "rows, minkowski": lambda x: scipy.spatial.distance_matrix(x, _Q, threshold=10).sum()
    + scipy.spatial.minkowski_distance(x[0], x[1])
    + scipy.spatial.minkowski_distance_p(x, x[::-1], 1.5).sum(),
}


@pytest.mark.parametrize("name", list(DISTANCES))
def test_distance_matrix(name):
    check(DISTANCES[name], _P.copy())


# ----------------------------------------------------------------------------------------------
# scipy.sparse.linalg.svds with SciPy's older random_state= (it was passed on beside rng=None,
# which SciPy refuses)


@pytest.mark.parametrize("seed", [{"random_state": 0}, {"rng": 1}], ids=["random_state", "rng"])
def test_svds_seeded(seed):
    def f(k):
        a = scipy.sparse.diags(k) + _laplacian(8)
        return scipy.sparse.linalg.svds(a.tocsc(), k=2, return_singular_vectors=False,
                                        tol=1e-12, **seed).sum()

    check(f, np.linspace(1.0, 2.0, 8), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# SciPy's legacy minimizers and leastsq, differentiated as minimize and least_squares: compared
# with the derivatives of the exact minimum, x* = argmin Σ (x - p)² + 0.1 Σ x⁴ (x* + 0.2 x*³
# = p, so dx*/dp = 1 / (1 + 0.6 x*²)), the solvers' tolerances tight


def _quartic(x, p):
    return np.sum((x - p) ** 2) + 0.1 * np.sum(x ** 4)


def _quartic_gradient(x, p):
    return 2 * (x - p) + 0.4 * x ** 3


LEGACY = {
    "fmin": lambda p: scipy.optimize.fmin(_quartic, np.zeros(2), args=(p,), xtol=1e-13,
                                          ftol=1e-15, disp=False, maxiter=5000),
    "fmin_powell": lambda p: scipy.optimize.fmin_powell(_quartic, np.zeros(2), args=(p,),
                                                        xtol=1e-13, ftol=1e-15, disp=False),
    "fmin_bfgs": lambda p: scipy.optimize.fmin_bfgs(_quartic, np.zeros(2), _quartic_gradient,
                                                    args=(p,), gtol=1e-12, disp=False),
    "fmin_cg": lambda p: scipy.optimize.fmin_cg(_quartic, np.zeros(2), _quartic_gradient,
                                                args=(p,), gtol=1e-12, disp=False),
    "fmin_ncg": lambda p: scipy.optimize.fmin_ncg(_quartic, np.zeros(2), _quartic_gradient,
                                                  args=(p,), avextol=1e-14, disp=False),
    "fmin_l_bfgs_b": lambda p: scipy.optimize.fmin_l_bfgs_b(
        lambda x: (_quartic(x, p), _quartic_gradient(x, p)), np.zeros(2), pgtol=1e-13,
        factr=1)[0],
    "fmin_l_bfgs_b approx_grad": lambda p: scipy.optimize.fmin_l_bfgs_b(
        _quartic, np.zeros(2), args=(p,), approx_grad=True, pgtol=1e-13, factr=1)[0],
    "fmin_tnc": lambda p: scipy.optimize.fmin_tnc(
        _quartic, np.zeros(2), _quartic_gradient, args=(p,), pgtol=1e-14, ftol=1e-16,
        xtol=1e-16, disp=0)[0],
    "leastsq": lambda p: scipy.optimize.leastsq(
        lambda x: np.r_[x - p, np.sqrt(0.1) * x ** 2], np.zeros(2), xtol=1e-15,
        ftol=1e-15)[0],
}


@pytest.mark.parametrize("name", list(LEGACY))
def test_legacy_minimizers(name):
    solve = LEGACY[name]
    weights = np.array([1.0, 3.0])

    def f(p):
        return solve(p) @ weights

    p = np.array([1.0, 2.0])
    plain = f(p.copy())
    value, (g,) = mutad.value_and_gradient(f, p)
    assert value == plain
    x = solve(p)
    exact = weights / (1 + 0.6 * x ** 2)
    np.testing.assert_allclose(g, exact, rtol=1e-6)
    np.testing.assert_allclose(mutad.jvp(f, (p,), (np.ones(2),))[1], exact.sum(), rtol=1e-6)
    replayed = mutad.grad(f, replay=True)
    replayed(p)
    q = p * 1.05
    np.testing.assert_allclose(replayed(q), weights / (1 + 0.6 * solve(q) ** 2), rtol=1e-6)


def test_legacy_full_outputs():
    """fopt with its derivative (the envelope theorem: dfopt/dp = -2 (x* - p)), the
    outputs of numbers mutad does not differentiate refused, counts and flags kept. (A refusal
    the function caught and went past would end the differentiation: each is its own.)"""
    p = np.array([1.0, 2.0])

    def f(p, use_gopt=False):
        xopt, fopt, gopt, bopt, calls, grad_calls, flag = scipy.optimize.fmin_bfgs(
            _quartic, np.zeros(2), _quartic_gradient, args=(p,), gtol=1e-12, disp=False,
            full_output=True)
        assert isinstance(calls, int) and flag in (0, 2)  # (2: precision lost near gtol)
        return gopt.sum() if use_gopt else fopt

    x = scipy.optimize.fmin_bfgs(_quartic, np.zeros(2), _quartic_gradient, args=(p,),
                                 gtol=1e-12, disp=False)
    np.testing.assert_allclose(mutad.gradient(f, p)[0], -2 * (x - p), rtol=1e-6)
    with pytest.raises(UnsupportedOperationError, match="output 2"):
        mutad.gradient(lambda p: f(p, use_gopt=True), p)

    def g(p, use_cov=False):
        x, cov, info, message, ier = scipy.optimize.leastsq(
            lambda x: np.r_[x - p, np.sqrt(0.1) * x ** 2], np.zeros(2), xtol=1e-15,
            ftol=1e-15, full_output=True)
        return cov.sum() if use_cov else info["fvec"] @ info["fvec"]

    np.testing.assert_allclose(mutad.gradient(g, p)[0], -2 * (x - p), rtol=1e-6)
    with pytest.raises(UnsupportedOperationError, match="cov_x"):
        mutad.gradient(lambda p: g(p, use_cov=True), p)


# ----------------------------------------------------------------------------------------------
# scipy.special: betaincinv, betainccinv in the probability

SPECIAL = {
    "betaincinv": lambda y: scipy.special.betaincinv(2.0, 3.0, y).sum(),
    "betainccinv": lambda y: scipy.special.betainccinv(2.5, 1.5, y).sum(),
}


@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_functions(name):
    check(SPECIAL[name], np.linspace(0.1, 0.9, 5))


# ----------------------------------------------------------------------------------------------
# IIR filter design of differentiated critical frequencies (butter, cheby1, cheby2, ellip,
# iirfilter): SciPy's steps on the traced Wn

_SIGNAL = np.sin(np.linspace(0, 6, 48)) + 0.2 * np.cos(np.arange(48) * 1.3)

DESIGNS = {
    "butter low": (lambda w: scipy.signal.butter(3, w[0]), [0.25]),
    "butter high, fs": (lambda w: scipy.signal.butter(4, w[0], btype="high", fs=10.0), [2.0]),
    "butter bandpass": (lambda w: scipy.signal.butter(2, w, btype="bandpass"), [0.2, 0.4]),
    "cheby1 zpk": (lambda w: scipy.signal.cheby1(3, 1.0, w[0], output="zpk"), [0.3]),
    "cheby2": (lambda w: scipy.signal.cheby2(4, 40, w[0]), [0.3]),
    "ellip bandpass": (lambda w: scipy.signal.ellip(3, 1, 30, w, btype="band"), [0.2, 0.5]),
    "iirfilter analog": (lambda w: scipy.signal.iirfilter(3, w[0], btype="low", analog=True,
                                                          ftype="butter"), [2.0]),
    # the ripple and attenuation (were refused): SciPy's prototypes (cheb1ap, ellipap: ellipk,
    # ellipkm1, ellipj) followed; bessel's prototype (was refused), SciPy's own
    "cheby1 ripple, even order": (lambda r: scipy.signal.cheby1(4, r[0], r[1]), [0.5, 0.3]),
    "ellip ripple and attenuation": (lambda r: scipy.signal.ellip(4, r[0], r[1], 0.25),
                                     [0.5, 40.0]),
    "ellip odd bandpass zpk": (lambda r: scipy.signal.ellip(3, r[0], 30, [0.2, r[1]],
                                                            btype="band", output="zpk"),
                               [0.8, 0.45]),
    "bessel mag, fs": (lambda w: scipy.signal.bessel(4, w[0], norm="mag", fs=100.0), [12.0]),
}


def _response(design):
    def f(w):
        out = design(w)
        if len(out) == 3:  # zeros, poles, gain
            return np.abs(out[1]).sum() + out[2] + np.real(out[0]).sum()
        return scipy.signal.lfilter(*out, _SIGNAL).var()
    return f


@pytest.mark.parametrize("name", list(DESIGNS))
def test_filter_design_in_the_critical_frequencies(name):
    design, w = DESIGNS[name]
    check(_response(design), np.array(w), rtol=1e-5, atol=1e-8)
    plain = design(np.array(w))
    for got, expected in zip(mutad.vjp(design, np.array(w))[0], plain):
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def test_filter_design_refusals():
    with pytest.raises(UnsupportedOperationError, match="butter, cheby1, cheby2, ellip and"):
        mutad.gradient(lambda w: scipy.signal.iirfilter(2, w, btype="bandstop").sum(),
                       np.array([0.3, 0.5]))


# ----------------------------------------------------------------------------------------------
# roots and solve of piecewise polynomials built from traced data: SciPy's roots,
# differentiated by the implicit function theorem

_XS = np.linspace(0, 3, 8)
_YS = np.sin(_XS) + 0.1 * _XS

ROOTS = {
    "CubicSpline.roots": lambda y: scipy.interpolate.CubicSpline(_XS, y - 0.5).roots(
        extrapolate=False).sum(),
    "CubicSpline.solve": lambda y: (scipy.interpolate.CubicSpline(
        _XS, y, bc_type="natural").solve(0.6, extrapolate=False) ** 2).sum(),
    "PchipInterpolator.roots": lambda y: scipy.interpolate.PchipInterpolator(
        _XS, y - 0.5).roots().sum(),
    "CubicHermiteSpline.roots": lambda y: scipy.interpolate.CubicHermiteSpline(
        _XS, y - 0.5, np.cos(_XS)).roots().sum(),
}


@pytest.mark.parametrize("name", list(ROOTS))
def test_roots_of_traced_interpolants(name):
    check(ROOTS[name], _YS.copy(), rtol=1e-5, atol=1e-6)


def test_roots_at_breakpoints():
    """A spline's root at a knot (a value of the data) moves smoothly; a PPoly's may be a jump
    through zero there: refused."""
    check(lambda y: scipy.interpolate.CubicSpline(_XS, y - 0.55).roots(extrapolate=False).sum(),
          np.linspace(0.1, 1.0, 8) + (np.arange(8) == 4) * (0.55 - np.linspace(0.1, 1.0, 8)[4]),
          rtol=1e-5, atol=1e-6)
    c = np.array([[1.0, 1.0], [-1.0, 0.0]])  # x - 1 on [0, 1], then x - 1 on [1, 2]
    with pytest.raises(UnsupportedOperationError, match="breakpoints"):
        mutad.gradient(lambda c: scipy.interpolate.PPoly(c, [0.0, 1.0, 2.0]).roots().sum(), c)


# ----------------------------------------------------------------------------------------------
# lfiltic and tf2zpk of differentiated coefficients and histories: SciPy's steps

SIGNAL_STEPS = {
    "lfiltic into lfilter": (lambda p: scipy.signal.lfilter(
        [1.0, p[0]], [1.0, -p[1]], _SIGNAL, zi=scipy.signal.lfiltic(
            [1.0, p[0]], [1.0, -p[1]], y=[0.5], x=[0.2]))[0], [0.3, 0.1]),
    "lfiltic, a[0] != 1": (lambda p: scipy.signal.lfiltic(
        [p[0], 0.5, 0.1], [2.0, -p[1]], y=np.array([0.5, p[0]]), x=[0.2, 0.1]), [0.3, 0.1]),
    "lfiltic of y": (lambda y: scipy.signal.lfiltic([1.0, 0.3], [1.0, -0.5, 0.2], y),
                     [0.4, -0.2]),
    "tf2zpk poles": (lambda a: scipy.signal.tf2zpk([1.0], [1.0, a[0], a[1]])[1], [0.5, 0.2]),
    "tf2zpk": (lambda a: scipy.signal.tf2zpk([a[0], 1.0, 0.3], [2.0, a[1], 0.5]),
               [0.5, 1.2]),
}


@pytest.mark.parametrize("name", list(SIGNAL_STEPS))
def test_signal_steps(name):
    f, x = SIGNAL_STEPS[name]
    x = np.array(x)

    def loss(x):
        out = f(x)
        parts = out if isinstance(out, tuple) else (out,)
        return sum(np.sum(np.abs(part) ** 2) for part in parts)

    check(loss, x)
    out = f(x)
    for got, expected in zip(mutad.vjp(f, x)[0] if isinstance(out, tuple)
                             else (mutad.vjp(f, x)[0],),
                             out if isinstance(out, tuple) else (out,)):
        assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def test_legacy_retall():
    """retall=True without full_output: xopt and the iterates (refused: not differentiated)."""
    def f(p, use_iterates=False):
        x, iterates = scipy.optimize.fmin_cg(_quartic, np.zeros(2), _quartic_gradient,
                                             args=(p,), gtol=1e-12, disp=False, retall=True)
        if use_iterates:
            return len(iterates)
        constant = scipy.optimize.fmin_cg(_quartic, np.zeros(2), _quartic_gradient,
                                          args=(np.ones(2),), disp=False, retall=True)
        assert len(constant) == 2 and len(constant[1]) > 1  # SciPy's own, nothing followed
        return x.sum()

    p = np.array([1.0, 2.0])
    x = scipy.optimize.fmin_cg(_quartic, np.zeros(2), _quartic_gradient, args=(p,), gtol=1e-12,
                               disp=False)
    np.testing.assert_allclose(mutad.gradient(f, p)[0], 1 / (1 + 0.6 * x ** 2), rtol=1e-6)
    with pytest.raises(UnsupportedOperationError, match="allvecs"):
        mutad.gradient(lambda p: f(p, use_iterates=True), p)
    plain = scipy.optimize.fmin_cg(_quartic, np.zeros(2), _quartic_gradient, args=(p,),
                                   gtol=1e-12, disp=False, retall=True)
    assert len(plain) == 2 and len(plain[1]) > 1


# ----------------------------------------------------------------------------------------------
# SciPy's explicit Runge-Kutta solver classes stepped by the program (RK23, RK45, DOP853):
# SciPy's steps, their step size control too, on the differentiated values (the differences
# of a step of 1e-4: the step size control's rounding makes finer ones noisy); and solve_ivp
# of an integer y0

def _stepped(solver, **options):
    def f(p):
        s = solver(lambda t, y: np.array([y[1], -p[0] * y[0] - p[1] * y[1]]), 0.0,
                   p[2:4], 3.0, **options)
        ys = [s.y[0]]
        while s.status == "running":
            s.step()
            ys.append(s.y[0])
        return np.sum(np.array(ys) ** 2) + s.y[1]
    return f


def _stepped_dense(p, solver=scipy.integrate.RK45):
    s = solver(lambda t, y: -p[0] * y + p[1], 0.0, np.array([1.0, 2.0]), 2.0)
    total = 0.0
    while s.status == "running":
        s.step()
        total = total + s.dense_output()(0.5 * (s.t_old + s.t)).sum()
    return total


_SOLVERS = {
    "RK23": _stepped(scipy.integrate.RK23, rtol=1e-6),
    "RK45": _stepped(scipy.integrate.RK45, rtol=1e-6, atol=1e-9),
    "DOP853": _stepped(scipy.integrate.DOP853),
    "RK45_first_step": _stepped(scipy.integrate.RK45, first_step=0.1, max_step=0.5),
    "RK45_dense": _stepped_dense,
    "DOP853_dense": lambda p: _stepped_dense(p, scipy.integrate.DOP853),
}


@pytest.mark.parametrize("name", list(_SOLVERS))
def test_solver_classes_stepped(name):
    x = np.array([0.8, 0.4]) if name.endswith("dense") else np.array([1.0, 0.3, 1.0, 0.5])
    check(_SOLVERS[name], x, rtol=5e-4, atol=1e-6, h=1e-4)


def test_solve_ivp_integer_y0():
    def f(p):
        sol = scipy.integrate.solve_ivp(lambda t, y: [y[1], -p[0] * y[0]], (0, 5), [1, 0],
                                        t_eval=[1.0, 2.5], rtol=1e-10, atol=1e-12)
        return sol.y[0, -1] + sol.y[1].sum()
    check(f, np.array([1.0]))


@pytest.mark.parametrize("solver", ["Radau", "BDF", "LSODA"])
def test_implicit_solver_classes_refused(solver):
    def f(k):
        s = getattr(scipy.integrate, solver)(lambda t, y: -k * y, 0.0, np.array([1.0]), 1.0)
        while s.status == "running":
            s.step()
        return s.y[0]
    with pytest.raises(UnsupportedOperationError, match=f"{solver}.*solve_ivp"):
        mutad.gradient(f, np.array([2.0]))
    # nothing differentiated reaching it: SciPy's solver as it is
    g = mutad.gradient(lambda k: k[0] * f(np.array([2.0])), np.array([1.0]))[0]
    assert g.tobytes() == np.array([f(np.array([2.0]))]).tobytes()


ODE_INTEGRATORS = {
    "dopri5": ("dopri5", {}),
    # (a stiff integrator with a Jacobian that reads the differentiated values too)
    "vode, bdf": ("vode", {"method": "bdf", "with_jacobian": True}),
}


@pytest.mark.parametrize("integrator", ODE_INTEGRATORS)
def test_ode_class_integrations_are_differentiated(integrator):
    """SciPy's old ode API, integrated in a loop from a differentiated initial value with a
    right-hand side (and f_params) reading differentiated values: SciPy's integrator's values
    bit for bit, each integration differentiated as odeint's (it refused these)."""
    name, options = ODE_INTEGRATORS[integrator]

    def f(p, y0):
        jac = (lambda t, y, c: [[0.0, 1.0], [-p[0], -c]]) if name == "vode" else None
        r = scipy.integrate.ode(lambda t, y, c: [y[1], -p[0] * y[0] - c * y[1]], jac)
        r.set_integrator(name, rtol=1e-9, atol=1e-10, **options)
        r.set_initial_value(y0, 0.0).set_f_params(p[1])
        if jac is not None:
            r.set_jac_params(0.3)
        total = 0.0
        while r.successful() and r.t < 1.0:
            total = total + np.sum(r.integrate(r.t + 0.5) ** 2) + r.y[0]
        return total

    p, y0 = np.array([2.0, 0.3]), np.array([1.0, 0.5])
    mutad.check_grads(f, p, y0, rtol=1e-4)
    assert mutad.value_and_grad(f, argnums=(0, 1))(p, y0)[0] == f(p, y0)


def test_ode_class_refuses_a_differentiated_initial_time():
    """A differentiated t0 of set_initial_value stopped with a ConversionError at SciPy's
    asarray, whose advice (give it a rule) said nothing of solve_ivp."""
    def f(p):
        r = scipy.integrate.ode(lambda t, y: -0.5 * y).set_integrator("dopri5")
        r.set_initial_value([1.0, 1.0], p[0])
        return r.integrate(2.0)[0]
    with pytest.raises(UnsupportedOperationError, match="ode of an initial time.*solve_ivp"):
        mutad.gradient(f, np.array([0.5]))


# ----------------------------------------------------------------------------------------------
# FITPACK's spline classes fitted to differentiated y where the fit is linear in it
# (InterpolatedUnivariateSpline, UnivariateSpline with s=0, LSQUnivariateSpline): SciPy's knots,
# the coefficients the fit of the identity columns maps y to

_KNOTS_X = np.linspace(0.0, 3.0, 12)


def _interpolated(y):
    s = scipy.interpolate.InterpolatedUnivariateSpline(_KNOTS_X, y)
    return s(np.array([0.4, 1.1, 3.2])).sum() + s.integral(0.2, 2.5) + s.derivative()(0.7)


def _univariate_s0(y):
    s = scipy.interpolate.UnivariateSpline(_KNOTS_X, y, k=4, s=0, ext="const")
    return s(np.array([1.3, 3.5])).sum() + s.antiderivative(2)(2.0) + s.get_coeffs()[3]


def _lsq(y):
    s = scipy.interpolate.LSQUnivariateSpline(_KNOTS_X, y, [1.0, 2.0], w=1.0 + _KNOTS_X, k=2)
    return (s(_KNOTS_X) ** 2).sum() + s.derivative(2)(1.5) + s.get_knots()[1] * s.get_coeffs()[0]


@pytest.mark.parametrize("f", [_interpolated, _univariate_s0, _lsq], ids=lambda f: f.__name__)
def test_fitpack_spline_classes(f):
    check(f, np.sin(_KNOTS_X) + 0.1 * _KNOTS_X ** 2)


def test_fitpack_spline_refusals():
    y = np.sin(_KNOTS_X)
    with pytest.raises(UnsupportedOperationError, match="the argument s"):
        mutad.gradient(lambda y: scipy.interpolate.UnivariateSpline(_KNOTS_X, y, s=y[0])(1.0), y)
    with pytest.raises(UnsupportedOperationError, match="the argument x"):
        mutad.gradient(lambda x: scipy.interpolate.InterpolatedUnivariateSpline(x, y)(1.0), _KNOTS_X)
    with pytest.raises(UnsupportedOperationError, match="roots"):
        mutad.gradient(lambda y: scipy.interpolate.InterpolatedUnivariateSpline(
            _KNOTS_X, y).roots().sum(), y)


# ----------------------------------------------------------------------------------------------
# scipy.sparse.csgraph's shortest paths of traced weights: SciPy's distances, each the sum of
# the weights on SciPy's path

import scipy.sparse.csgraph  # noqa: E402

_WEIGHTS = np.array([[0.0, 1.0, 4.0, 0.0, 7.0],
                     [0.0, 0.0, 2.0, 5.0, 0.0],
                     [1.5, 0.0, 0.0, 1.2, 0.0],
                     [0.0, 0.0, 0.0, 0.0, 1.1],
                     [0.3, 0.0, 2.5, 0.0, 0.0]])
_EDGES = np.nonzero(_WEIGHTS)
# every entry an edge (a dense graph's zeros are no edges: at them the distances jump)
_COMPLETE = np.where(_WEIGHTS == 0, 6.0 + np.arange(25.0).reshape(5, 5) / 7, _WEIGHTS)


def _paths_sparse(method, directed):
    def f(v):
        G = scipy.sparse.csr_matrix((v, _EDGES), shape=(5, 5))
        d = scipy.sparse.csgraph.shortest_path(G, method=method, directed=directed)
        return np.sum(d * np.arange(25.0).reshape(5, 5))
    return f


def _paths_dense_indices(w):
    d, p = scipy.sparse.csgraph.dijkstra(w * 1.0, indices=[0, 3], return_predecessors=True)
    return (d ** 2).sum() + p.sum()


def _paths_min_only(w):
    d = scipy.sparse.csgraph.dijkstra(w, indices=[1, 3], min_only=True, limit=3.0)
    return np.sum(np.where(np.isfinite(d), d, 0.0) * np.arange(1.0, 6.0))


def _paths_coo(v):
    G = scipy.sparse.coo_matrix((v, ([0, 0, 1, 2, 3], [1, 2, 2, 3, 0])), shape=(4, 4))
    return scipy.sparse.csgraph.bellman_ford(G, indices=0)[3] \
        + scipy.sparse.csgraph.johnson(G.tocsr(), directed=False)[1, 3] \
        + scipy.sparse.csgraph.floyd_warshall(G.tocsr(), unweighted=True).sum()


_PATHS = {f"{m}_{'directed' if d else 'undirected'}": _paths_sparse(m, d)
          for m in ("auto", "FW", "D", "BF", "J") for d in (True, False)}
_PATHS.update(dense_indices=_paths_dense_indices, min_only=_paths_min_only)


@pytest.mark.parametrize("name", list(_PATHS))
def test_shortest_paths(name):
    check(_PATHS[name], _WEIGHTS[_EDGES] if name[0].isupper() or name.startswith("auto")
          else _COMPLETE.copy())


def test_shortest_paths_coo():
    check(_paths_coo, np.array([1.0, 4.0, 2.0, 0.5, 3.0]))


# ----------------------------------------------------------------------------------------------
# scipy.signal's waveforms and second-order designs of differentiated parameters (chirp,
# sawtooth, iirnotch, iirpeak, bilinear): SciPy's steps

_T = np.linspace(0.0, 1.0, 40)


def _chirp(method, **options):
    def f(p):
        return np.sum(scipy.signal.chirp(_T * p[3], f0=p[0], t1=p[1], f1=p[2], method=method,
                                         phi=30 * p[0], **options) * np.hanning(40))
    return f


def _complex_chirp(p):
    return np.sum(np.abs(scipy.signal.chirp(_T, p[0], p[1], p[2], complex=True) - 0.5) ** 2)


def _sawtooth(p):
    return np.sum(scipy.signal.sawtooth(2 * np.pi * p[0] * _T + 0.1, width=p[1]) * np.hanning(40))


def _notch(p):
    b, a = scipy.signal.iirnotch(p[0], p[1], fs=100.0)
    c, d = scipy.signal.iirpeak(p[0] / 100, p[1])
    return np.sum(scipy.signal.lfilter(b, a, np.sin(7 * _T)) ** 2) + (c * d).sum()


def _bilinear(p):
    b, a = scipy.signal.bilinear(np.array([0.0, p[0], 1.0]), [1.0, p[1], p[2]], fs=10.0)
    return np.sum(b * np.arange(1.0, 4.0)) + np.sum(a ** 2)


_WAVES = {f"chirp_{m}": _chirp(m) for m in ("linear", "quadratic", "logarithmic", "hyperbolic")}
_WAVES.update(chirp_quadratic_vertex=_chirp("quadratic", vertex_zero=False),
              chirp_complex=_complex_chirp, sawtooth=_sawtooth, notch=_notch, bilinear=_bilinear)


@pytest.mark.parametrize("name", list(_WAVES))
def test_waveforms_and_designs(name):
    x = {"sawtooth": np.array([3.0, 0.3]), "notch": np.array([12.0, 4.0]),
         "bilinear": np.array([0.5, 0.2, 1.3])}.get(name, np.array([2.0, 1.1, 5.0, 1.0]))
    check(_WAVES[name], x, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# spilu of a constant matrix, its solve of a differentiated right-hand side: a linear map of it

def _ilu(b):
    A = (scipy.sparse.diags([-1.0, 2.5, -1.2], [-1, 0, 1], shape=(6, 6))
         + scipy.sparse.coo_matrix(([0.3], ([0], [5])), shape=(6, 6))).tocsc()
    ilu = scipy.sparse.linalg.spilu(A, drop_tol=0.1)
    M = scipy.sparse.linalg.LinearOperator(A.shape, matvec=ilu.solve)
    x, info = scipy.sparse.linalg.gmres(A, b, M=M, rtol=1e-12)
    return np.sum(ilu.solve(b) * np.arange(6.0)) + ilu.solve(b ** 2, trans="T")[2] + x.sum()


def test_spilu_solve_of_a_traced_right_hand_side():
    check(_ilu, np.linspace(1.0, 2.0, 6))


# ----------------------------------------------------------------------------------------------
# curve_fit's pcov: SciPy's, differentiated as (JᵀJ)⁻¹ s² at the differentiated popt (SciPy's J
# a finite-difference estimate: the differences of its pcov agree to about 1e-5)

_XD = np.linspace(0.0, 1.0, 12)


def _fit(method, absolute_sigma=False, sigma=None):
    tight = {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15}

    def f(p):
        yd = p[0] * np.exp(-p[1] * _XD) + 0.05 * np.sin(9 * _XD)
        popt, pcov = scipy.optimize.curve_fit(
            lambda x, a, b: a * np.exp(-b * x), _XD, yd, p0=[1.0, 1.0], method=method,
            sigma=sigma, absolute_sigma=absolute_sigma, **tight)
        return popt.sum() + 100 * np.sqrt(np.diag(pcov)).sum() + pcov[0, 1]
    return f


@pytest.mark.parametrize("method, absolute, sigma", [
    ("lm", False, None), ("trf", False, None), ("lm", True, 0.1 + _XD), ("dogbox", False, _XD + 1)])
def test_curve_fit_covariance(method, absolute, sigma):
    check(_fit(method, absolute, sigma), np.array([1.0, 0.5]), rtol=1e-4, atol=1e-6, h=1e-3)


def test_curve_fit_covariance_refused_where_indeterminate():
    def f(p):  # as many data as parameters: SciPy's pcov infinite (with a warning)
        popt, pcov = scipy.optimize.curve_fit(lambda x, a, b: a * x + b, _XD[:2], p * _XD[:2])
        return popt.sum() + pcov.sum()
    with pytest.warns(scipy.optimize.OptimizeWarning), \
            pytest.raises(UnsupportedOperationError, match="pcov"):
        mutad.gradient(f, np.array([1.0, 2.0]))


# ----------------------------------------------------------------------------------------------
# gmres and bicgstab of a LinearOperator without rmatvec, its matvec reading differentiated
# values: the adjoint solve's Aᵀ y by the pullback of the matvec

def _operator_solve(method):
    def f(p):
        def matvec(v):
            out = np.zeros(5)
            out[:] = p[0] * v + 0.3 * np.roll(v, 1)
            out[1:] -= p[1] * v[:-1]
            return out
        A = scipy.sparse.linalg.LinearOperator((5, 5), matvec=matvec)
        x, info = getattr(scipy.sparse.linalg, method)(A, p[2:], rtol=1e-13, atol=0.0)
        return np.sum(x * np.arange(1.0, 6.0))
    return f


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_operator_without_rmatvec(method):
    check(_operator_solve(method), np.array([2.0, 0.4, 1.0, 0.5, -0.3, 0.8, 1.2]), rtol=1e-5)


def test_constant_operator_without_rmatvec():
    dense = np.eye(5) * 3.0 + np.triu(np.ones((5, 5)), 1) * 0.4

    def f(b):
        A = scipy.sparse.linalg.LinearOperator((5, 5), matvec=lambda v: dense @ v)
        return np.sum(scipy.sparse.linalg.gmres(A, b ** 2, rtol=1e-13, atol=0.0)[0] * b)
    check(f, np.array([1.0, 0.5, -0.3, 0.8, 1.2]), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# splprep of differentiated points with u given and s=0 (linear in the points), or its own u
# (then its knots move with the points too), and splev of its parametric curve

_U = np.linspace(0.0, 1.0, 9)


def _curve(r):
    th = np.linspace(0.0, 3.0, 9)
    tck, u = scipy.interpolate.splprep([np.cos(th) * r, np.sin(th) * r ** 2, th], u=_U, s=0)
    x, y, z = scipy.interpolate.splev(np.linspace(0.0, 1.0, 7), tck)
    dx, _, _ = scipy.interpolate.splev(0.3, tck, der=1)
    return np.sum(x * y) + z.sum() + dx + tck[1][1][2]


def test_splprep_with_u():
    check(_curve, 1.0 + 0.1 * np.arange(9.0))


def _curve_by_chords(r, k=3):
    """splprep's own u (it was refused: "u given"): u, the knots and the coefficients move
    with the points; splev of the curve in its knots, its derivatives, outside too."""
    th = np.linspace(0.0, 3.0, 9)
    tck, u = scipy.interpolate.splprep([np.cos(th) * r, np.sin(th) * r ** 2], k=k, s=0)
    x, y = scipy.interpolate.splev(np.linspace(0.0, 1.0, 7), tck)
    dx, dy = scipy.interpolate.splev(u[3:5], tck, der=1)
    outside = scipy.interpolate.splev(np.array([-0.1, 1.2]), tck, ext=1)[1]
    beyond = scipy.interpolate.splev(1.1, tck)[0]
    return (np.sum(x * y) + np.sum(dx * dy) + u[4] + tck[0][5] + tck[1][1][2]
            + outside.sum() + beyond)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_splprep_by_its_own_chord_lengths(k):
    f = functools.partial(_curve_by_chords, k=k)
    check(f, 1.0 + 0.1 * np.arange(9.0), rtol=1e-5)
    if k == 3:
        mutad.check_grads(f, 1.0 + 0.1 * np.arange(9.0), order=2, rtol=1e-4)


def _spline_in_its_knots(inner):
    t = np.concatenate([np.zeros(4), inner, np.full(4, 3.0)])
    c, q = np.cos(np.arange(7.0)), np.array([0.3, 1.0, 2.5, 3.4])
    return (np.sum(scipy.interpolate.splev(q, (t, c, 3)) ** 2)
            + scipy.interpolate.splev(q, (t, c, 3), der=2) @ q)


def test_splev_in_its_knots():
    """splev of traced knots (they were refused): de Boor's recursion in them, extrapolated."""
    check(_spline_in_its_knots, np.array([0.8, 1.5, 2.2]))


def test_splprep_refusals():
    th = np.linspace(0.0, 3.0, 9)
    with pytest.raises(UnsupportedOperationError, match="interpolates"):
        mutad.gradient(lambda r: scipy.interpolate.splev(0.5, scipy.interpolate.splprep(
            [np.cos(th) * r, np.sin(th) * r])[0])[0], th)  # (its default s smooths)
    with pytest.raises(UnsupportedOperationError, match="ext=0 and ext=1"):
        mutad.gradient(lambda r: scipy.interpolate.splev(1.5, scipy.interpolate.splprep(
            [np.cos(th) * r, np.sin(th) * r], s=0)[0], ext=3)[0], th)
    with pytest.raises(UnsupportedOperationError, match="interpolates"):
        mutad.gradient(lambda r: scipy.interpolate.splev(0.5, scipy.interpolate.splprep(
            [np.cos(th) * r, np.sin(th) * r], u=_U, s=0.1)[0])[0], th)


# zpk2sos, CloughTocher2DInterpolator, eigsh of a LinearOperator, lagrange, and
# minimum_spanning_tree of differentiated values


def test_minimum_spanning_tree_differentiates_the_chosen_weights():
    import scipy.sparse.csgraph

    def f(w):
        M = np.zeros((4, 4))
        M[0, 1], M[1, 2], M[0, 2], M[2, 3], M[3, 0] = w
        tree = scipy.sparse.csgraph.minimum_spanning_tree(M)
        assert isinstance(tree, scipy.sparse.csr_array)
        return (tree.toarray() ** 2).sum() + tree.sum()

    check(f, np.array([1.0, 2.0, 4.0, 3.0, 0.5]))
    replayed, other = mutad.grad(f, replay=True), np.array([5.0, 2.0, 1.0, 3.0, 0.5])
    replayed(np.array([1.0, 2.0, 4.0, 3.0, 0.5]))
    np.testing.assert_allclose(replayed(other), central(f, other), rtol=1e-6)  # another tree


def test_minimum_spanning_tree_of_a_traced_sparse_graph():
    import scipy.sparse.csgraph
    rows, cols = np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3])

    def f(w):
        graph = scipy.sparse.csr_matrix((w, (rows, cols)), shape=(4, 4))
        tree = scipy.sparse.csgraph.minimum_spanning_tree(graph)
        assert isinstance(tree, scipy.sparse.csr_matrix)
        return np.sin(tree.toarray()).sum()

    check(f, np.array([1.0, 3.0, 2.0, 0.7]))


def test_lagrange_of_a_zero_value():
    def f(w):
        return scipy.interpolate.lagrange(np.array([0.0, 1.0, 2.0]), w)(1.5) ** 2

    check(f, np.array([0.0, 2.0, 5.0]))


def test_lagrange_whose_leading_coefficient_cancels_is_refused():
    f = lambda w: scipy.interpolate.lagrange(np.array([0.0, 1.0, 2.0]), w)(1.5)  # noqa: E731
    with pytest.raises(UnsupportedOperationError, match="lagrange.*BarycentricInterpolator"):
        mutad.gradient(f, np.array([1.0, 2.0, 3.0]))


SOS_DESIGNS = {
    "butter bandpass": (lambda w: scipy.signal.butter(2, w, btype="band", output="sos"),
                        [0.2, 0.4]),
    "butter lowpass, odd order": (lambda w: scipy.signal.butter(5, w[0], output="sos"), [0.3]),
    "cheby1 highpass": (lambda w: scipy.signal.cheby1(4, 1, w[0], btype="high", output="sos"),
                        [0.3]),
    "ellip bandpass": (lambda w: scipy.signal.ellip(3, 1, 40, w, btype="bandpass",
                                                    output="sos"), [0.2, 0.45]),
    "zpk2sos of real poles": (lambda a: scipy.signal.zpk2sos(np.array([-1.0, -1.0]), a[:2],
                                                             a[2]), [0.5, 0.3, 2.0]),
    "zpk2sos of complex poles, keep_odd": (lambda r: scipy.signal.zpk2sos(
        np.array([-1.0, 0.3]), np.array([r[0] * np.exp(0.5j), r[0] * np.exp(-0.5j), r[1]]),
        2.0 * r[1], pairing="keep_odd"), [0.7, 0.4]),
}


@pytest.mark.parametrize("name", list(SOS_DESIGNS))
def test_second_order_sections_of_differentiated_designs(name):
    """zpk2sos (and output='sos'): SciPy's sections, differentiated as the sections of the
    zeros and poles SciPy paired."""
    design, w = SOS_DESIGNS[name]
    check(lambda w: scipy.signal.sosfilt(design(w), _SIGNAL).var(), np.array(w), rtol=1e-5,
          atol=1e-8)
    assert mutad.vjp(design, np.array(w))[0].tobytes() == design(np.array(w)).tobytes()


def test_zpk2sos_refusals():
    z = np.array([-1.0, -1.0])
    with pytest.raises(UnsupportedOperationError, match="'nearest' and 'keep_odd'"):
        mutad.gradient(lambda a: scipy.signal.zpk2sos(z, a[:2], a[2], pairing="minimal").sum(),
                       np.array([0.5, 0.3, 2.0]))
    with pytest.raises(UnsupportedOperationError, match="zpk2tf"):  # no gain: no pairing
        mutad.gradient(lambda a: scipy.signal.zpk2sos(z, a[:2], a[2] * 0.0).sum(),
                       np.array([0.5, 0.3, 2.0]))


def test_eigsh_of_a_linear_operator_closing_over_traced_values_is_refused():
    A = np.diag(np.arange(1.0, 7.0))

    def f(a):
        operator = scipy.sparse.linalg.LinearOperator((6, 6), matvec=lambda v: A @ v * a[0],
                                                      dtype=float)
        return scipy.sparse.linalg.eigsh(operator, k=2, return_eigenvectors=False).sum()

    with pytest.raises(UnsupportedOperationError, match="eigsh of a LinearOperator"):
        mutad.gradient(f, np.array([2.0]))


def test_lagrange_in_its_nodes():
    w = np.array([1.0, -2.0, 0.5, 3.0])
    check(lambda x: scipy.interpolate.lagrange(x, w)(0.3), np.array([0.0, 0.4, 1.1, 2.0]))


def test_eigs_of_a_linear_operator_closing_over_traced_values_is_refused():
    A = np.diag(np.arange(1.0, 7.0)) + np.eye(6, k=1)

    def f(a):
        operator = scipy.sparse.linalg.LinearOperator((6, 6), matvec=lambda v: A @ v * a[0],
                                                      dtype=float)
        return np.abs(scipy.sparse.linalg.eigs(operator, k=2, return_eigenvectors=False)).sum()

    with pytest.raises(UnsupportedOperationError, match="eigs of a LinearOperator"):
        mutad.gradient(f, np.array([2.0]))


def test_eigsh_of_a_plain_linear_operator_is_scipys():
    A = np.diag(np.arange(1.0, 7.0))
    operator = scipy.sparse.linalg.LinearOperator((6, 6), matvec=lambda v: A @ v, dtype=float)
    v0 = np.ones(6)

    def f(a):
        w = scipy.sparse.linalg.eigsh(operator, k=2, v0=v0, return_eigenvectors=False)
        return (w * a).sum()

    a = np.array([1.0, 2.0])
    value, (g,) = mutad.value_and_gradient(f, a)
    assert value == f(a)
    np.testing.assert_array_equal(
        g, scipy.sparse.linalg.eigsh(operator, k=2, v0=v0, return_eigenvectors=False))


# ----------------------------------------------------------------------------------------------
# splint, splder and splantider of a tck whose coefficients are differentiated (splrep's at
# s=0, a parametric curve's, the program's own): SciPy's, linear in the coefficients


def _splint_of_splrep(y):
    tck = scipy.interpolate.splrep(_KNOTS_X, y, s=0)
    whole, integrals = scipy.interpolate.splint(0.0, 4.0, tck, full_output=1)
    n = len(tck[0]) - 4  # the B-splines' integrals (FITPACK leaves the last entries unset)
    assert integrals[:n].tobytes() == scipy.interpolate.splint(0.0, 4.0, (
        tck[0], np.zeros(len(tck[0])), 3), full_output=1)[1][:n].tobytes()
    return scipy.interpolate.splint(0.2, 2.5, tck) ** 2 + whole


def _splder_splantider(y):
    tck = scipy.interpolate.splrep(_KNOTS_X, y, s=0)
    second = scipy.interpolate.splder(tck, 2)
    up = scipy.interpolate.splantider(second, 3)
    assert second[2] == 1 and up[2] == 4
    return (scipy.interpolate.splev(1.1, second) + up[1][2]
            + scipy.interpolate.splint(0.0, 1.0, up) * scipy.interpolate.splder(tck)[1][4])


def _splint_of_a_curve(r):
    tck, _ = scipy.interpolate.splprep([np.cos(_KNOTS_X) * r, np.sin(_KNOTS_X) * r],
                                       u=np.linspace(0.0, 1.0, 12), s=0)
    a, b = scipy.interpolate.splint(0.1, 0.8, tck)
    return a * b


def _tck_of_the_program(c):
    t = np.r_[[0.0] * 4, 1.0, 2.0, [3.0] * 4]
    return (scipy.interpolate.splint(0.5, 2.5, (t, c[:6], 3))
            + scipy.interpolate.splder((t, np.reshape(c, (6, 2)), 3))[1][2, 1] ** 2)


def _splint_in_its_bounds(y):
    """Traced bounds (they were refused: "pass them as constants"), inside the base interval
    and beyond it (FITPACK's spline is zero there), of traced coefficients and constant ones."""
    tck = scipy.interpolate.splrep(_KNOTS_X, y, s=0)
    fixed = scipy.interpolate.splrep(_KNOTS_X, np.cos(_KNOTS_X), s=0)
    return (scipy.interpolate.splint(y[1], 2.0 + y[3], tck) * y[2]
            + scipy.interpolate.splint(-1.0, y[5] + 0.5, fixed) ** 2
            + scipy.interpolate.splint(y[0] + 0.3, _KNOTS_X[-1] + 1.0, fixed)
            + sum(scipy.interpolate.splint(0.1, 0.5 + y[4], (tck[0], [tck[1], fixed[1]], 3))))


@pytest.mark.parametrize("f", [_splint_of_splrep, _splder_splantider, _splint_of_a_curve,
                               _tck_of_the_program, _splint_in_its_bounds],
                         ids=lambda f: f.__name__)
def test_spline_functions_of_traced_coefficients(f):
    x = 1.0 + 0.1 * np.arange(12.0) if f is _splint_of_a_curve else np.sin(_KNOTS_X) + 0.1 * _KNOTS_X
    check(f, x, replay=f in (_splint_of_splrep, _tck_of_the_program, _splint_in_its_bounds))
    mutad.check_grads(f, x, order=2 if f in (_tck_of_the_program, _splint_in_its_bounds) else 1)


def test_splint_refusals():
    tck = scipy.interpolate.splrep(_KNOTS_X, np.sin(_KNOTS_X), s=0)
    with pytest.raises(UnsupportedOperationError, match="bounds a and b"):
        mutad.gradient(lambda b: scipy.interpolate.splint(0.0, b[0], tck, full_output=1)[0],
                       np.array([1.0]))
    with pytest.raises(UnsupportedOperationError, match="knots t"):
        mutad.gradient(lambda t: scipy.interpolate.splder((t, tck[1], 3))[1].sum(), tck[0])


# ----------------------------------------------------------------------------------------------
# spsolve_triangular of a matrix made from a dense triangular array (csr_matrix(np.tril(M))):
# SciPy leaves out its zeros outside the triangle, so the solve reads none of them


def _triangular_of_dense(k):
    A = scipy.sparse.csr_matrix(np.tril(np.outer(k, k)) + np.diag(k))
    return (scipy.sparse.linalg.spsolve_triangular(A, np.ones(4)).sum()
            + scipy.sparse.linalg.spsolve_triangular(A, k, unit_diagonal=True) @ k)


def _upper_triangular_of_dense(k):
    A = scipy.sparse.csc_array(np.triu(np.outer(k, k)) + np.eye(4))
    return scipy.sparse.linalg.spsolve_triangular(A, np.ones((4, 2)), lower=False).sum()


@pytest.mark.parametrize("f", [_triangular_of_dense, _upper_triangular_of_dense],
                         ids=lambda f: f.__name__)
def test_spsolve_triangular_of_a_dense_triangle(f):
    check(f, np.linspace(0.5, 1.0, 4))
    mutad.check_grads(f, np.linspace(0.5, 1.0, 4), policy="checkpoint")


def test_spsolve_triangular_of_a_dense_matrix_with_entries_outside_is_refused():
    def f(k):
        M = np.tril(np.ones((3, 3))) + np.diag(k)
        M[0, 2] = k[0] - 1.0  # zero where recorded, not zero at the replayed point
        return scipy.sparse.linalg.spsolve_triangular(scipy.sparse.csr_matrix(M),
                                                      np.ones(3)).sum()

    replayed = mutad.grad(f, replay=True)
    replayed(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(UnsupportedOperationError, match="outside its triangle"):
        replayed(np.array([1.5, 2.0, 3.0]))
    with pytest.raises(UnsupportedOperationError, match="outside its triangle"):
        mutad.gradient(f, np.array([1.5, 2.0, 3.0]))


# ----------------------------------------------------------------------------------------------
# the legacy scipy.interpolate.Rbf of differentiated values: SciPy's object, its nodes SciPy's
# solve A⁻¹ d, differentiated in d


def _rbf_1d(v):
    return scipy.interpolate.Rbf(np.linspace(0.0, 1.0, 6), v)(np.array([0.25, 0.6])).sum()


def _rbf_2d_smoothed(v):
    x, y = np.random.default_rng(0).random((2, 6))
    f = scipy.interpolate.Rbf(x, y, v * 2, function="gaussian", smooth=0.01)
    return (f(np.array([0.3, 0.5]), np.array([0.2, 0.9])) ** 2).sum() + f.nodes[0]


def _rbf_n_d(v):
    f = scipy.interpolate.Rbf(np.linspace(0.0, 1.0, 3), v.reshape(3, 2), mode="N-D",
                              function="cubic")
    return (f(np.array([0.3, 0.7])) ** 2).sum()


def _rbf_own_function(v):
    f = scipy.interpolate.Rbf(np.linspace(0.0, 1.0, 6), v, function=lambda self, r: r ** 3 + r,
                              epsilon=0.5)
    return f(np.array([0.33]))[0]


@pytest.mark.parametrize("f", [_rbf_1d, _rbf_2d_smoothed, _rbf_n_d, _rbf_own_function],
                         ids=lambda f: f.__name__)
def test_legacy_rbf(f):
    x = np.cos(np.arange(6.0)) + 1.0
    check(f, x)
    mutad.check_grads(f, x, order=2 if f is _rbf_1d else 1)


def test_legacy_rbf_is_scipys_object():
    v = np.cos(np.arange(6.0))

    def f(v):
        rbf = scipy.interpolate.Rbf(np.linspace(0.0, 1.0, 6), v)
        assert isinstance(rbf, scipy.interpolate.Rbf)
        return rbf

    traced = mutad.vjp(f, v)[0]
    plain = f(v)
    assert np.asarray(traced.nodes).tobytes() == plain.nodes.tobytes()
    assert traced(0.3).tobytes() == plain(0.3).tobytes()


def test_legacy_rbf_refusals():
    v = np.cos(np.arange(6.0))
    x = np.linspace(0.0, 1.0, 6)
    with pytest.raises(UnsupportedOperationError, match="Rbf.*data points.*RBFInterpolator"):
        mutad.gradient(lambda x: scipy.interpolate.Rbf(x, v)(0.5), x)
    with pytest.raises(UnsupportedOperationError, match="Rbf.*query points.*RBFInterpolator"):
        mutad.gradient(lambda q: scipy.interpolate.Rbf(x, v * q[0])(q).sum(), np.array([0.5]))
    with pytest.raises(UnsupportedOperationError, match="Rbf.*epsilon"):
        mutad.gradient(lambda e: scipy.interpolate.Rbf(x, v, epsilon=e[0])(0.5), np.array([0.5]))


# ----------------------------------------------------------------------------------------------
# FITPACK's smoothing fits (UnivariateSpline, its default s too, and splrep at s > 0) of
# differentiated y: SciPy's values, differentiated on FITPACK's knots as its least-squares
# spline there or its smoothing spline of the weight p its iteration finds from y

_NOISY_X = np.linspace(0.0, 3.0, 15)
_NOISY_Y = np.sin(_NOISY_X) + 0.1 * np.cos(7.0 * _NOISY_X)


def _smoothed(y):  # curfit's iteration on p
    s = scipy.interpolate.UnivariateSpline(_NOISY_X, y, s=0.05)
    assert len(s.get_knots()) > 2 and s.get_residual() != 0.05
    return ((s(np.linspace(0.0, 3.0, 7)) ** 2).sum() + s.integral(0.5, 2.0)
            + s.derivative()(1.1) + s.get_residual())


def _smoothed_by_default(y):  # s = len(y), weighted: the least-squares polynomial
    s = scipy.interpolate.UnivariateSpline(_NOISY_X, 3.0 * y, w=np.linspace(1.0, 4.0, 15), k=2)
    return s(np.array([0.3, 2.2])).sum() + s.get_coeffs()[1] ** 2


def _smoothed_in_a_box(y):
    s = scipy.interpolate.UnivariateSpline(_NOISY_X, y, bbox=[-0.5, 3.5], k=4, s=0.02)
    return (s.antiderivative()(np.array([0.0, 3.4])) ** 2).sum()


def _splrep_smoothed(y):
    (t, c, k), fp, ier, _ = scipy.interpolate.splrep(_NOISY_X, y, s=0.05, full_output=1)
    assert ier == 0
    return (scipy.interpolate.splev(np.array([0.3, 1.7, 2.9]), (t, c, k)) ** 2).sum() \
        + scipy.interpolate.splint(0.0, 2.0, (t, c, k)) + fp * 3.0


def _splrep_weighted(y):  # no s with weights: SciPy's s = m - sqrt(2 m)
    tck = scipy.interpolate.splrep(_NOISY_X, 4.0 * y, w=np.full(15, 1.5), k=3)
    return np.sin(scipy.interpolate.splev(np.array([0.5, 2.5]), tck)).sum()


@pytest.mark.parametrize("f", [_smoothed, _smoothed_by_default, _smoothed_in_a_box,
                               _splrep_smoothed, _splrep_weighted], ids=lambda f: f.__name__)
def test_smoothing_fits(f):
    check(f, _NOISY_Y, replay=False)  # (replayed: the test below)
    mutad.check_grads(f, _NOISY_Y, modes=("rev", "fwd"))


def test_smoothing_fit_replayed_where_fitpack_places_other_knots():
    y, other = _NOISY_Y, _NOISY_Y + 0.3 * np.sin(9.0 * _NOISY_X)
    knots = [len(scipy.interpolate.UnivariateSpline(_NOISY_X, v, s=0.05).get_knots())
             for v in (y, other)]
    assert knots[0] != knots[1]
    replayed = mutad.grad(_smoothed, replay=True)
    replayed(y)
    np.testing.assert_allclose(replayed(other), central(_smoothed, other), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(replayed(other), mutad.gradient(_smoothed, other)[0])


def test_smoothing_fit_refused_where_the_steps_do_not_reproduce_scipys(monkeypatch):
    from mutad.scipy import interpolate as minterpolate
    steps = minterpolate._curfit_steps
    def perturbed(*args):
        fit, fp = steps(*args)
        return fit * (1.0 + 1e-6), fp

    monkeypatch.setattr(minterpolate, "_curfit_steps", perturbed)
    with pytest.raises(UnsupportedOperationError, match="did not reproduce SciPy's"):
        mutad.gradient(_smoothed, _NOISY_Y)


# ----------------------------------------------------------------------------------------------
# CloughTocher2DInterpolator and griddata(method='cubic') of differentiated values: SciPy's
# values, differentiated as the interpolant of the number of Gauss-Seidel sweeps SciPy's
# gradient estimate took (each sweep linear in the values)

_CT_POINTS = np.random.default_rng(0).random((12, 2))
_CT_QUERIES = np.array([[0.5, 0.5], [0.4, 0.45], [0.2, 0.7], [5.0, 5.0]])  # the last outside


def _clough_tocher(v):
    return np.nansum(scipy.interpolate.CloughTocher2DInterpolator(_CT_POINTS, v)(_CT_QUERIES) ** 2)


def _clough_tocher_on_a_grid(v):
    f = scipy.interpolate.CloughTocher2DInterpolator(_CT_POINTS, np.sin(v), rescale=True,
                                                     fill_value=0.0, tol=1e-3)
    X, Y = np.meshgrid(np.linspace(0.2, 0.8, 3), np.linspace(0.3, 0.6, 2))
    return (f(X, Y) ** 2).sum()


def _clough_tocher_of_a_plane(v):  # an exact estimate, a fixed point of the sweeps
    values = 0.7 * _CT_POINTS[:, 0] - 0.3 * _CT_POINTS[:, 1] + v
    return np.nansum(scipy.interpolate.CloughTocher2DInterpolator(_CT_POINTS, values)(
        _CT_QUERIES) ** 3)


def _griddata_cubic(v):
    return np.nansum(scipy.interpolate.griddata(_CT_POINTS, v, _CT_QUERIES, method="cubic") ** 2)


@pytest.mark.parametrize("f", [_clough_tocher, _clough_tocher_on_a_grid, _griddata_cubic,
                               _clough_tocher_of_a_plane], ids=lambda f: f.__name__)
def test_clough_tocher_of_differentiated_values(f):
    v = np.zeros(12) if f is _clough_tocher_of_a_plane else \
        np.cos(3.0 * _CT_POINTS[:, 0]) + _CT_POINTS[:, 1]
    check(f, v)
    mutad.check_grads(f, v, modes=("rev", "fwd"))


@pytest.mark.filterwarnings("ignore:Gradient estimation did not converge")  # (some differences')
@pytest.mark.parametrize("tol", [1e-6, 1e-20])  # 1e-20: SciPy stops at a sweep changing nothing
def test_clough_tocher_sweeps_are_scipys(tol):
    """The sweeps found are those SciPy's estimate stops after: it stops within that many (no
    warning), not within one fewer; and swept as often without a tolerance it is SciPy's."""
    import warnings

    from scipy.interpolate import _interpnd

    from mutad.scipy.interpolate import _clough_tocher_sweeps

    def estimate(interpolant, sweeps, tol):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g = _interpnd.estimate_gradients_2d_global(interpolant.tri, interpolant.values,
                                                       maxiter=sweeps, tol=tol)
        return g, bool(caught)

    for values in (np.cos(3.0 * _CT_POINTS[:, 0]), np.zeros(12)):
        interpolant = scipy.interpolate.CloughTocher2DInterpolator(_CT_POINTS, values, tol=tol)
        sweeps = _clough_tocher_sweeps(interpolant, tol, 400)
        assert not estimate(interpolant, sweeps, tol)[1]
        assert sweeps == 1 or estimate(interpolant, sweeps - 1, tol)[1]
        assert estimate(interpolant, sweeps, -1.0)[0].tobytes() == interpolant.grad.tobytes()
    f = lambda v: np.nansum(scipy.interpolate.CloughTocher2DInterpolator(  # noqa: E731
        _CT_POINTS, v, tol=tol)(_CT_QUERIES) ** 2)
    check(f, np.cos(3.0 * _CT_POINTS[:, 0]))


def test_clough_tocher_refusals():
    v = np.cos(3.0 * _CT_POINTS[:, 0])
    with pytest.raises(UnsupportedOperationError, match="CloughTocher2DInterpolator.*query"):
        mutad.gradient(lambda q: scipy.interpolate.CloughTocher2DInterpolator(
            _CT_POINTS, v * q[0, 0])(q).sum(), _CT_QUERIES[:1])
    with pytest.raises(UnsupportedOperationError, match="one column of real values"):
        mutad.gradient(lambda v: scipy.interpolate.CloughTocher2DInterpolator(
            _CT_POINTS, np.stack([v, v], axis=1))(_CT_QUERIES[:1]).sum(), v)
    with pytest.raises(UnsupportedOperationError, match="one column of real values"):
        mutad.gradient(lambda p: scipy.interpolate.CloughTocher2DInterpolator(
            p, v)(_CT_QUERIES[:1]).sum(), _CT_POINTS)


# ----------------------------------------------------------------------------------------------
# RectBivariateSpline(...).integral of differentiated values (s=0, linear in z as uᵀ z v);
# FITPACK's scattered surface fits of differentiated data refused by name


def _grid_integral(z):
    spline = scipy.interpolate.RectBivariateSpline(np.linspace(0.0, 1.0, 5),
                                                   np.linspace(0.0, 2.0, 6), z.reshape(5, 6) ** 2,
                                                   kx=2, ky=3)
    return spline.integral(0.1, 0.8, -1.0, 1.5) ** 2 + spline.integral(2.0, 3.0, 0.0, 1.0)


def test_rect_bivariate_integral():
    z = np.sin(np.linspace(0.0, 6.0, 30))
    check(_grid_integral, z)
    mutad.check_grads(_grid_integral, z, modes=("rev", "fwd"))


@pytest.mark.parametrize("name", ["SmoothBivariateSpline", "LSQBivariateSpline"])
def test_scattered_surface_fits_refused_by_name(name):
    x, y = np.random.default_rng(0).random((2, 30))
    knots = (np.array([0.5]), np.array([0.5])) if name == "LSQBivariateSpline" else ()

    def f(z):
        return getattr(scipy.interpolate, name)(x, y, z, *knots)(0.5, 0.5)[0, 0]

    with pytest.raises(UnsupportedOperationError, match=f"{name} of differentiated.*RBF"):
        mutad.gradient(f, np.sin(3.0 * x) + y)


# ----------------------------------------------------------------------------------------------
# scipy.sparse.linalg.expm and matrix_power of traced sparse matrices: SciPy's values (its Padé
# approximant; its squarings of mutad's products), expm differentiated as the dense exponential
# at the entries SciPy's result stores


def _sparse_expm_tridiagonal(k):
    A = scipy.sparse.diags([k[:2], -k, k[1:]], [-1, 0, 1], format="csc")
    E = scipy.sparse.linalg.expm(A)
    assert isinstance(E, scipy.sparse.csc_matrix)
    return (E.toarray() ** 2).sum() + E[0, 2]


def _sparse_expm_of_a_rate_matrix(k):
    n = len(k)
    Q = scipy.sparse.csr_array(scipy.sparse.diags(
        [k[:-1], -np.r_[k[:-1], 0.0] - np.r_[0.0, k[1:]], k[1:]], [1, 0, -1]))
    p = np.zeros(n)
    p[0] = 1.0
    return (scipy.sparse.linalg.expm(0.7 * Q).T @ p) @ np.arange(n)


def _sparse_expm_block_diagonal(k):  # entries SciPy leaves out: unreached, their derivative 0
    rows, cols = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2])
    A = scipy.sparse.csc_matrix((k, (rows, cols)), shape=(3, 3))
    return np.sin(scipy.sparse.linalg.expm(A).toarray()).sum()


def _sparse_matrix_power(k):
    A = scipy.sparse.csr_matrix((k, ([0, 0, 1, 2], [0, 1, 1, 2])), shape=(3, 3))
    B = scipy.sparse.linalg.matrix_power(A, 5)
    return B.toarray().sum() + (B @ k[:3]).sum() + scipy.sparse.linalg.matrix_power(A, 1)[0, 1]


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")  # (SciPy's, of csr)
@pytest.mark.parametrize("f", [_sparse_expm_tridiagonal, _sparse_expm_of_a_rate_matrix,
                               _sparse_expm_block_diagonal, _sparse_matrix_power],
                         ids=lambda f: f.__name__)
def test_sparse_expm_and_matrix_power(f):
    k = np.array([0.3, 0.8, 0.5, 0.2])[:3 if f is _sparse_expm_tridiagonal else 4]
    check(f, k)
    mutad.check_grads(f, k, modes=("rev", "fwd"))


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
def test_sparse_expm_refusals():
    def dense_made(k):  # csr_matrix(D) drops D's zeros, which the differentiation reaches
        A = scipy.sparse.csr_matrix(np.diag(k) + 0.5 * np.eye(3, k=1))
        return scipy.sparse.linalg.expm(A).toarray().sum()

    with pytest.raises(UnsupportedOperationError, match="expm.*leaves out.*scipy.linalg.expm"):
        mutad.gradient(dense_made, np.array([0.3, -0.2, 0.5]))
    with pytest.raises(UnsupportedOperationError, match="expm of a traced \\(2, 3\\)"):
        mutad.gradient(lambda k: scipy.sparse.linalg.expm(scipy.sparse.csc_matrix(
            (k, ([0, 1], [0, 2])), shape=(2, 3))).sum(), np.array([0.3, 0.2]))


# ----------------------------------------------------------------------------------------------
# Arrays SciPy makes of constants in the function (a method's values, a solver's result), into
# which the function then writes traced values: constants of the differentiation, as np.zeros'


def _method_values_written(p):
    y = scipy.interpolate.interp1d(np.arange(4.0), [0.0, 1.0, 0.0, 1.0])(np.linspace(0, 3, 7))
    y[3] = p[0]
    w = scipy.stats.norm.pdf(np.linspace(-2.0, 2.0, 9))
    w[4] = p[1]
    w /= w.sum()
    return np.sum(y ** 2) + w @ np.arange(9.0)


def _solution_written(p):
    x = scipy.optimize.minimize(lambda z: np.sum((z - 1.0) ** 2), np.zeros(2)).x
    x[0] = p[0]
    sol = scipy.integrate.solve_ivp(lambda t, y: -y, (0.0, 1.0), [1.0, 2.0],
                                    t_eval=np.linspace(0.0, 1.0, 5))
    sol.y[0, :] *= p[1]
    return np.sum(x ** 2) + sol.y.sum()


@pytest.mark.parametrize("f", [_method_values_written, _solution_written],
                         ids=lambda f: f.__name__)
def test_arrays_scipy_makes_of_constants_take_traced_writes(f):
    """Regression: the values of a SciPy object's method (an interpolant's, a distribution's pdf)
    and the arrays of a solver's result (minimize(...).x, solve_ivp(...).y), made of constants
    in the function, were plain: a traced value written into them raised UntracedWriteError."""
    check(f, np.array([0.5, 0.2]), replay=f is _method_values_written)


def test_an_array_a_scipy_object_holds_stays_scipys():
    """A method's result that is the object's own memory (a spline's coefficients) is not made
    a constant: a traced value written into it would change the object where its own calls,
    SciPy's, would not see the derivative. It stays SciPy's array (the write is refused)."""
    x = np.linspace(0.0, 1.0, 12)
    spline = scipy.interpolate.UnivariateSpline(x, np.sin(3 * x), s=0.01)
    coefficients = spline.get_coeffs().copy()

    def f(p):
        c = spline.get_coeffs()   # (a view of the spline's own coefficients)
        c *= p
        return spline(0.5) + c.sum()

    with pytest.raises(mutad.errors.UntracedWriteError):
        mutad.gradient(f, 2.0)
    assert spline.get_coeffs().tobytes() == coefficients.tobytes()
    new = mutad.gradient(lambda p: (spline(x) * p).sum(), 2.0)[0]   # a new array: followed
    assert new == spline(x).sum()


# ----------------------------------------------------------------------------------------------
# A stand-in takes its SciPy function's arguments by their names: the Fourier filters' second
# parameter is sigma, size or shift (fourier_gaussian(F, sigma=1.0) raised TypeError), eigsh
# takes rng, BarycentricInterpolator random_state


def _routes():
    import importlib

    from mutad.core import registry
    for module in set(registry.RULE_MODULES.values()):
        importlib.import_module(module)
    for original, rule in list(registry.RULES.items()):
        stand_in = getattr(rule, "route", None)
        if stand_in is not None and callable(original):
            yield original, stand_in


def _keywords(f):
    import inspect
    try:
        parameters = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):  # (a builtin without a signature)
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def test_every_stand_in_takes_its_scipy_functions_keywords():
    missing = {}
    for original, stand_in in _routes():
        ours, theirs = _keywords(getattr(stand_in, "fn", stand_in)), _keywords(original)
        if ours is not None and theirs is not None and theirs - ours:
            missing[getattr(original, "__qualname__", repr(original))] = theirs - ours
    assert not missing


@pytest.mark.parametrize("name, keyword, value", [
    ("fourier_gaussian", "sigma", 1.3), ("fourier_uniform", "size", 2.5),
    ("fourier_ellipsoid", "size", 2.5), ("fourier_shift", "shift", 0.7)])
def test_fourier_filters_by_keyword(name, keyword, value):
    import scipy.ndimage
    image = np.cos(np.arange(36.0)).reshape(6, 6)

    def f(x):
        filtered = getattr(scipy.ndimage, name)(np.fft.fft2(x), **{keyword: value}, axis=-1)
        return np.sum(np.abs(np.fft.ifft2(filtered)) ** 2)

    check(f, image)


@pytest.mark.parametrize("seed", ["a seed", "a generator made in f"])
def test_eigsh_and_eigs_with_rng(seed):
    """rng=: eigsh took none; a generator made in f drew ARPACK's start vector in SciPy's code
    as an array mutad follows, which ARPACK's compiled code refused (a TypeError)."""
    def rng():
        return 0 if seed == "a seed" else np.random.default_rng(0)

    def f(k):
        a = scipy.sparse.diags([-k[1:], 2.0 + k, -0.5 * k[1:]], [-1, 0, 1], format="csr")
        w = scipy.sparse.linalg.eigsh((a + a.T) / 2, 2, which="LA", tol=1e-14, rng=rng())[0]
        z = scipy.sparse.linalg.eigs(a, 2, which="LR", tol=1e-14, rng=rng())[0]
        return w.sum() + z.real.sum()

    check(f, np.linspace(0.5, 1.5, 8), rtol=1e-5)


def test_a_draw_in_f_still_takes_traced_writes():
    def f(x):
        w = np.random.default_rng(1).standard_normal(3)
        w[0] = x[0]
        w *= x[1]
        return np.sum(w ** 2)

    check(f, np.array([0.3, 1.2]))


# ----------------------------------------------------------------------------------------------
# scipy.linalg.matrix_balance (it was refused: SciPy's np.asarray of A): B = T⁻¹ A T, T
# LAPACK's permutation and powers of 2, decided on the plain values

_UNBALANCED = np.array([[1.0, 64.0, 3.0], [0.05, 2.0, 40.0], [0.5, 0.02, 3.0]])


def _balanced(a):
    b, t = scipy.linalg.matrix_balance(a)
    return np.sum(b * np.arange(9.0).reshape(3, 3)) + t[0, 0]


def _balanced_separately(a):
    b, (scaling, permutation) = scipy.linalg.matrix_balance(a, separate=True)
    return np.sum(b ** 2) + scaling[1] + permutation[0]


def _balanced_in_place(a):
    a = a.copy()
    b, _ = scipy.linalg.matrix_balance(a, overwrite_a=True, permute=False)
    return np.sum(np.linalg.eigvals(b).real * np.arange(3.0)) + np.sum(a * b)


@pytest.mark.parametrize("f", [_balanced, _balanced_separately, _balanced_in_place],
                         ids=lambda f: f.__name__)
def test_matrix_balance(f):
    check(f, _UNBALANCED.copy(), rtol=1e-5)
    g = mutad.gradient(_balanced, _UNBALANCED)[0]
    t = scipy.linalg.matrix_balance(_UNBALANCED)[1]  # B = T⁻¹ A T: Ā = T⁻ᵀ B̄ Tᵀ
    np.testing.assert_array_equal(g, np.linalg.inv(t).T @ np.arange(9.0).reshape(3, 3) @ t.T)


# ----------------------------------------------------------------------------------------------
# A solver's function meeting one differentiated array in two places (args=(k, k), a closure
# cell beside a list or a solution holding it): its derivative was counted twice


def _quad_of_one_array_twice(x):
    return scipy.integrate.quad(lambda t, a, b: a[0] * t + b[1] * t * t, 0.0, 1.0,
                                args=(x, x))[0]


def _quad_closure_and_list(x):
    p = [x]
    return scipy.integrate.quad(lambda t: x[0] * np.sin(t) + p[0][1] * t * t, 0.0, 1.0)[0]


def _ivp_of_one_array_twice(x):
    s = scipy.integrate.solve_ivp(lambda t, y, a, b: -a[0] * y - b[1], (0.0, 1.0), [1.0],
                                  args=(x, x), rtol=1e-11, atol=1e-12)
    return s.y[0, -1]


@pytest.mark.parametrize("f", [_quad_of_one_array_twice, _quad_closure_and_list,
                               _ivp_of_one_array_twice], ids=lambda f: f.__name__)
def test_a_solver_meeting_one_array_twice(f):
    check(f, np.array([1.0, 0.5]), rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# quad of solve_ivp's dense output, the integrand closing over the result (s.sol(t): SciPy's
# OdeResult, a dict) or its interpolant: it was refused, their values hidden from quad


def _quad_of_a_dense_solution(x):
    # (loose tolerances on a short interval: the derivative is that of the computed solution
    # whatever its steps, and forward mode solves a tangent problem at each quad node)
    s = scipy.integrate.solve_ivp(lambda t, y: -x[0] * y, (0.0, 0.5), [x[1]], dense_output=True,
                                  rtol=1e-6, atol=1e-8)
    sol = s.sol
    return scipy.integrate.quad(lambda t: s.sol(t)[0] * sol(t)[0] + x[0] * t, 0.0, 0.5,
                                epsrel=1e-6)[0]


@pytest.mark.slow
def test_quad_of_a_dense_ode_solution():
    check(_quad_of_a_dense_solution, np.array([1.0, 0.5]), rtol=1e-5, atol=1e-6, h=1e-5,
          replay=False)


# ----------------------------------------------------------------------------------------------
# scipy.special: the incomplete elliptic integrals in their parameter m (refused: no closed
# form) and Tricomi's U (no rule)


@pytest.mark.parametrize("f, x", [
    (lambda m: np.sum(scipy.special.ellipeinc(0.9, m) ** 2), np.array([0.3, -0.5, 0.95, 0.8])),
    (lambda m: np.sum(scipy.special.ellipkinc(0.9, m) ** 2), np.array([0.3, -0.5, 0.95, 0.8])),
    (lambda p: np.sum(scipy.special.ellipkinc(p, p / 2) + scipy.special.ellipeinc(p, p / 3)),
     np.array([0.3, 0.7, 1.3, 1.9])),
    (lambda x: np.sum(scipy.special.hyperu(1.5, 2.5, x) * x), np.array([0.3, 1.7, 4.0])),
], ids=["ellipeinc m", "ellipkinc m", "both arguments", "hyperu"])
def test_special_functions_without_a_rule(f, x):
    check(f, x)
    mutad.check_grads(f, x, order=2, rtol=1e-5)


@pytest.mark.parametrize("phi", [0.4, 1.2, -2.0])
def test_incomplete_elliptic_integrals_at_m_0_and_1(phi):
    """At m = 0 the quotients are 0/0, at m = 1 ellipkinc's terms cancel: their limits, the
    integrals ∓∫ sin²θ / 2 dθ and ∫ sin²θ / 2cos³θ dθ."""
    e = mutad.gradient(lambda m: scipy.special.ellipeinc(phi, m), 0.0)[0]
    k = mutad.gradient(lambda m: scipy.special.ellipkinc(phi, m), 0.0)[0]
    assert np.isclose(e, (np.sin(2 * phi) - 2 * phi) / 8, rtol=1e-14)
    assert np.isclose(k, (2 * phi - np.sin(2 * phi)) / 8, rtol=1e-14)
    one = mutad.gradient(lambda m: scipy.special.ellipkinc(phi, m), 1.0)[0]
    if np.cos(phi) > 0:
        left = (scipy.special.ellipkinc(phi, 1.0) - scipy.special.ellipkinc(phi, 1.0 - 1e-7)) / 1e-7
        assert np.isclose(one, left, rtol=1e-5)
        m = np.array([1.0 - 1e-9])
        assert np.isclose(one, mutad.gradient(lambda m: scipy.special.ellipkinc(phi, m)[0], m)[0][0],
                          rtol=1e-5)
    else:
        assert np.isnan(one)


@pytest.mark.parametrize("a, b", [(2.0, 2.0), (2.0, 2.0 + 1e-5), (-1.0, -3.0), (5.0, 0.01),
                                  (0.3, 40.0)])
def test_arithmetic_geometric_mean_where_its_closed_form_cancels_or_signs_are_negative(a, b):
    """agm(a, b)'s partials are K's derivative at m = 1 - (b/a)²: by K's series at a = b (0/0
    there), of |b/a| for two negative arguments (agm(-a, -b) = -agm(a, b))."""
    x = np.array([a, b])
    kept = x.copy()
    mutad.check_grads(lambda x: scipy.special.agm(x[0], x[1]), x, order=2, rtol=1e-5)
    assert np.array_equal(x, kept)
    if a == b:
        g = mutad.gradient(lambda x: scipy.special.agm(x[0], x[1]), x)[0]
        assert np.array_equal(g, [0.5, 0.5])


def test_arithmetic_geometric_mean_at_a_zero_argument_and_of_opposite_signs():
    """agm(0, b) = 0 along b, growing as π / 2 log(4b/a) along a: partials 0 and +inf; NaN where
    SciPy's value is (arguments of opposite signs) and at (0, 0)."""
    def g(a, b):
        return mutad.gradient(lambda x: scipy.special.agm(x[0], x[1]), np.array([a, b]))[0]
    assert np.array_equal(g(0.0, 1.5), [np.inf, 0.0])
    assert np.array_equal(g(-1.5, 0.0), [0.0, np.inf])
    assert np.isnan(g(1.0, -2.0)).all() and np.isnan(g(0.0, 0.0)).all()


def test_generalized_laguerre_in_its_parameter_of_integer_degrees_only():
    """∂/∂α L_n^(α)(x) = Σ_(k<n) L_k^(α)(x) / (n - k) for degrees of one array (0 and below:
    SciPy's 0, a constant); NaN for SciPy's non-integer degrees (its hypergeometric form)."""
    n = np.array([-1, 0, 1, 3, 5])

    def f(p):
        return np.sum(scipy.special.eval_genlaguerre(n, p[0], p[1] * np.linspace(-1.0, 2.0, 5)))

    x = np.array([0.8, 1.2])
    kept = x.copy()
    mutad.check_grads(f, x, order=2, rtol=1e-5)
    assert np.array_equal(x, kept)
    g = mutad.gradient(lambda p: scipy.special.eval_genlaguerre(2.5, p[0], p[1]), x)[0]
    assert np.isnan(g[0]) and np.isfinite(g[1])


# ----------------------------------------------------------------------------------------------
# The stored values and pattern of a sparse matrix made from a dense array of constants
# (np.eye's, a dense matrix built in f), read by the user's code: SciPy's matrix holds none of
# its zeros, and neither does mutad's from then on (it refused the read: the zeros it keeps
# for their derivative have none here)


def _scaled_identity_data(x):
    A = scipy.sparse.csr_matrix(np.eye(4) * 2.0 + np.eye(4, k=1))
    A.data *= x[0]
    A.data[:3] += x[1:]
    return np.sum((A @ x) ** 2) + A.nnz


def _triplet_loop(x):
    A = scipy.sparse.csr_matrix(np.diag(np.ones(4)) + np.eye(4, k=2))
    A.data[:4] = x * x
    C = A.tocoo()
    s = 0.0
    for i, j, v in zip(C.row, C.col, C.data):
        s = s + v * (i + 1.0) * (j + 2.0)
    return s + np.sum(A.indices) + (A.T @ x) @ x


def _zero_written_stays_stored(x):
    A = scipy.sparse.csc_array(np.ones((3, 3)))
    d = A.data
    d[0] = 0.0  # SciPy stores the zero written: nnz 9, as in SciPy
    d[1:4] *= x
    return A.nnz + np.sum(A.indices) + A @ x @ x + scipy.sparse.linalg.spsolve(
        A + scipy.sparse.eye(3, format="csc") * 4.0, x).sum()


@pytest.mark.parametrize("f", [_scaled_identity_data, _triplet_loop, _zero_written_stays_stored],
                         ids=lambda f: f.__name__)
def test_data_of_a_sparse_matrix_of_dense_constants(f):
    check(f, np.array([0.7, 1.3, -0.4, 0.9])[:3 if f is _zero_written_stays_stored else 4])


def test_data_of_a_sparse_matrix_of_traced_dense_zeros_stays_refused():
    """A zero entry of a dense array that carries a derivative: SciPy leaves it out, yet what
    the user's code does to the stored values would reach it in SciPy for any other value."""
    def f(x):
        A = scipy.sparse.csr_matrix(np.outer(x, x) - np.outer(x, x)[0, 1])
        A.data *= 2.0
        return (A @ x).sum()

    with pytest.raises(UnsupportedOperationError, match="leaves them out"):
        mutad.gradient(f, np.array([1.0, 2.0, 3.0]))


# ----------------------------------------------------------------------------------------------
# scipy.signal.deconvolve (it was refused: SciPy's np.asarray): SciPy's own code, lfilter of an
# impulse, on the traced signal and divisor


def _deconvolved(x):
    quotient, remainder = scipy.signal.deconvolve(np.convolve(x, [1.0, 0.5, 0.1]), x[:2] + 1.0)
    return np.sum(quotient ** 2) + np.sum(remainder * np.arange(remainder.size))


def test_deconvolve():
    check(_deconvolved, np.array([0.4, 0.9, 1.3, -0.2, 0.7]))


# ----------------------------------------------------------------------------------------------
# A.count_nonzero() of a traced sparse matrix (it was refused): SciPy's count, repeated entries
# added in place first as SciPy adds them


def _counted(x):
    A = scipy.sparse.coo_matrix((np.r_[x, -x[0]], ([0, 1, 2, 0], [0, 1, 2, 0])), shape=(3, 3))
    B = scipy.sparse.csr_matrix(np.outer(x, x) - x[0] * x[0])
    return (A.count_nonzero() * x[1] + B.count_nonzero() + B.count_nonzero(axis=0) @ x
            + scipy.sparse.diags(x).count_nonzero() * x[2] + A.nnz + A.toarray().sum())


def test_count_nonzero_of_a_traced_sparse_matrix():
    check(_counted, np.array([1.0, 2.0, 3.0]))


# ----------------------------------------------------------------------------------------------
# scipy.special.comb and perm of traced values (refused: SciPy's np.asarray): binom and poch,
# 0 where SciPy's condition says so; exact=True SciPy's integer


def _combinations(x):
    return (np.sum(scipy.special.comb(10, x * 3)) + np.sum(scipy.special.comb(x + 5, 2))
            + np.sum(scipy.special.comb(x + 2, 2, repetition=True))
            + np.sum(scipy.special.comb(x, 3 * x)) + scipy.special.comb(x[0] + 5, 2)
            + scipy.special.comb(5, 2, exact=True) * x[1])


def _permutations(x):
    return (np.sum(scipy.special.perm(8, x * 2)) + np.sum(scipy.special.perm(3 * x, x))
            + scipy.special.perm(x[1] + 4, 2) + scipy.special.perm(6, 2, exact=True) * x[0])


@pytest.mark.parametrize("f", [_combinations, _permutations], ids=lambda f: f.__name__)
def test_comb_and_perm(f):
    x = np.array([0.4, 0.9, 1.3, 2.2, 3.7])
    check(f, x, rtol=1e-5)
    mutad.check_grads(f, x, order=2, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# SciPy's own Python code whose module binds NumPy's builders by name (``from numpy import
# asarray, zeros``), followed step by step


def _square_wave(t):
    return np.sum(scipy.signal.square(2 * np.pi * 3 * t, duty=0.3) * t ** 2)


def _square_of_a_traced_duty(t):
    return np.sum(scipy.signal.square(2 * np.pi * 3 * t[:3], duty=t[3:] / 2) * t[:3])


@pytest.mark.parametrize("f", [_square_wave, _square_of_a_traced_duty])
def test_waveforms_of_modules_binding_numpys_builders(f):
    check(f, np.array([0.11, 0.23, 0.37, 0.52, 0.64, 0.81]))


def _checked_gradient(x):
    # a gradient off by x itself: check_grad's value is |x| up to the differences' errors
    return scipy.optimize.check_grad(lambda z: np.sum(z ** 2), lambda z: 3 * z, x) * x[0]


def test_check_grad_of_differentiated_values():
    check(_checked_gradient, np.array([0.4, -0.7, 1.1]), rtol=1e-4, atol=1e-5, h=1e-3)


# ----------------------------------------------------------------------------------------------
# scipy.linalg.signm: SciPy's sign, differentiated by the Sylvester equation of its Fréchet
# derivative, N L + L N = E - S E S with N = S A

_MIXED = np.random.default_rng(7).normal(size=(4, 4)) + np.diag([2.0, -1.5, 1.0, -2.5])


def _sign(x):
    s = scipy.linalg.signm(_MIXED + x.reshape(4, 4) * 0.3)
    return np.sum(s * np.arange(16.0).reshape(4, 4)) + s[1, 2] ** 2


def test_signm_of_mixed_signs():
    check(_sign, np.cos(np.arange(16.0)) * 0.2)


# ----------------------------------------------------------------------------------------------
# scipy.fft.fht and ifht: SciPy's steps, its real transforms among them


@pytest.mark.parametrize("name", ["fht", "ifht"])
@pytest.mark.parametrize("bias", [0.0, 0.3])
def test_fast_hankel_transforms(name, bias):
    transform = getattr(scipy.fft, name)
    check(lambda a: np.sum(transform(a, dln=0.1, mu=0.5, offset=0.2, bias=bias) ** 2
                           * np.arange(6.0)), np.linspace(0.2, 1.1, 6))


def test_fast_hankel_transform_of_a_differentiated_order_refused():
    with pytest.raises(UnsupportedOperationError, match="scipy.fft.fht of a differentiated dln, mu"):
        mutad.gradient(lambda m: np.sum(scipy.fft.fht(np.ones(6), dln=0.1, mu=m)), 0.5)


# ----------------------------------------------------------------------------------------------
# scipy.stats.qmc.discrepancy: SciPy's value, the derivatives of its sums


@pytest.mark.parametrize("method", ["CD", "WD", "MD", "L2-star"])
@pytest.mark.parametrize("iterative", [False, True])
def test_discrepancy(method, iterative):
    check(lambda x: scipy.stats.qmc.discrepancy(x, iterative=iterative, method=method),
          np.random.default_rng(3).uniform(0.05, 0.95, (5, 3)))


def test_discrepancy_of_a_list_of_points():
    check(lambda x: scipy.stats.qmc.discrepancy([x[0], x[1] ** 2, x[2]]),
          np.random.default_rng(5).uniform(0.05, 0.95, (3, 2)))


# ----------------------------------------------------------------------------------------------
# The pattern of a sparse matrix of a dense traced array whose zeros carry a derivative (it was
# refused): SciPy's, a decision on the values that a replay guards; the zeros stay for their
# derivative. A bsr matrix of a dense array replays while its blocks are chosen the same (it
# was traced on every call).

_PATTERNED = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0], [4.0, 0.0, 5.0, 1.0],
                       [0.0, 0.0, 0.0, 2.0]])


def _replays(replaying):
    return sum(p.replays for p in replaying.programs.values() if type(p) is Program)


def _rows_of_stored(A):
    """The row of each stored entry, from the pattern as each format holds it."""
    if A.format == "coo":
        return np.asarray(A.row)
    major = np.repeat(np.arange(len(A.indptr) - 1), np.diff(A.indptr))
    return np.repeat(major, np.prod(A.blocksize)) if A.format == "bsr" else major


@pytest.mark.parametrize("name", ["csr_matrix", "csc_array", "coo_array", "bsr_array"])
def test_pattern_of_a_sparse_matrix_of_traced_dense_zeros(name):
    v = np.arange(1.0, 5.0)

    def f(x):
        A = getattr(scipy.sparse, name)(x * x)
        counts = np.bincount(_rows_of_stored(A), minlength=4).astype(float)
        return (A @ v) @ counts + (A.T @ v).sum()

    def expected(x):  # the counts constants, each zero of x's square kept: its derivative is 0
        counts = np.bincount(_rows_of_stored(getattr(scipy.sparse, name)(x * x)), minlength=4)
        return 2 * x * (counts[:, None] * v + v[:, None])

    other = _PATTERNED.copy()
    other[[0, 3], [1, 0]] = 0.5  # another pattern: the replay's guard fails, and it records
    for x in (_PATTERNED, other):
        value, g = mutad.value_and_grad(f)(x)
        assert value == f(x.copy())
        np.testing.assert_allclose(g, expected(x))
    replaying = replays_as_traced(f, [(_PATTERNED,), (_PATTERNED * 1.5,), (other,),
                                      (other * 0.5,), (other * 2.0,)])
    assert _replays(replaying) >= 1  # (other's program)


def test_bsr_of_a_dense_array_replays():
    def f(x):
        A = scipy.sparse.bsr_array(x * 2.0)
        return (A @ np.arange(6.0)).sum() + (A.tocsr().tobsr().multiply(A)).sum()

    x = np.random.default_rng(0).standard_normal((6, 6))
    blocky = np.kron(np.eye(3), np.ones((2, 2)))  # SciPy's blocks of 2 by 2, not one of 6
    assert scipy.sparse.bsr_array(blocky).blocksize != scipy.sparse.bsr_array(x).blocksize
    replaying = replays_as_traced(f, [(x,), (x * 1.5,), (blocky,), (blocky * 2.0,),
                                      (blocky * 3.0,)])
    assert _replays(replaying) >= 1  # (blocky's program)


@pytest.mark.parametrize("read", ["nnz", "getnnz", "count_nonzero", "nonzero", "find"])
def test_counts_of_the_zeros_of_a_sparse_matrix_replay(read):
    """Decisions on which entries of a matrix of a dense array are zero: a replay guards them
    (it refused to record the call)."""
    def f(x):
        A = scipy.sparse.csr_matrix(x * x)
        taken = {"nnz": lambda: A.nnz, "getnnz": lambda: A.getnnz(axis=0)[1],
                 "count_nonzero": A.count_nonzero, "nonzero": lambda: A.nonzero()[1].sum(),
                 "find": lambda: scipy.sparse.find(A)[1].sum()}[read]()
        return (A @ np.arange(1.0, 5.0)).sum() * taken

    other = _PATTERNED.copy()
    other[[0, 3], [1, 0]] = 0.5
    replaying = replays_as_traced(f, [(_PATTERNED,), (_PATTERNED * 1.5,), (other,),
                                      (other * 0.5,), (other * 2.0,)])
    assert _replays(replaying) >= 1


# ----------------------------------------------------------------------------------------------
# scipy.special.logsumexp of complex values (holomorphic: SciPy's log of the complex sum), as
# scipy.stats.loguniform's moments take it (log(b^n - a^n) by a sum with a term shifted by πi)


def _complex_logsumexp(x):
    a = x[:3] + 1j * x[3:]
    y = scipy.special.logsumexp(a, b=np.array([1.0, -0.5, 2.0]) + 0.25j * x[0])
    return np.real(y) * 2.0 + np.imag(y)


@pytest.mark.parametrize("f, x", [
    (lambda s: scipy.stats.loguniform.mean(0.5 * s, 5.0 * s), np.array(1.3)),
    (lambda s: scipy.stats.loguniform.moment(2, s[0], s[1]), np.array([0.7, 2.5])),
    (_complex_logsumexp, np.array([0.3, -1.2, 0.8, 2.0, -0.4, 1.1])),
], ids=["loguniform mean", "loguniform moment", "logsumexp"])
def test_logsumexp_of_complex_values(f, x):
    check(f, x, replay=False)


def test_logsumexp_of_complex_values_with_its_sign_refused():
    with pytest.raises(UnsupportedOperationError, match=r"return_sign=True\) of complex"):
        mutad.gradient(lambda x: scipy.special.logsumexp(x + 1j, return_sign=True)[0].sum(),
                       np.array([0.5, 1.0]))


# ----------------------------------------------------------------------------------------------
# SciPy's formulas called as SciPy calls them, their arguments broadcast and raveled
# (norminvgauss._sf iterates over zip(x, a, b): it stopped on 0-d shapes)


def test_scipys_formulas_on_raveled_arguments():
    check(lambda p: scipy.stats.norminvgauss.sf(0.3, p[0], p[1]), np.array([1.5, 0.4]),
          rtol=1e-5, replay=False)


# ----------------------------------------------------------------------------------------------
# Inverse distribution functions SciPy computes with compiled code: the derivative from the
# forward function's density and partials at the solution (fdtri, scipy.stats.f.ppf's;
# skewnorm.ppf's own inverse)


@pytest.mark.parametrize("f, x", [
    (lambda v: scipy.special.fdtri(v[0], v[1], v[2]), np.array([3.0, 7.5, 0.3])),
    (lambda v: scipy.stats.f.ppf(v[2], v[0], v[1], scale=2.0), np.array([4.5, 6.0, 0.8])),
    (lambda v: np.sum(scipy.stats.skewnorm.ppf(v[:2], v[2], v[3], v[4])),
     np.array([0.3, 0.7, -2.5, 0.2, 1.4])),
], ids=["fdtri", "f.ppf", "skewnorm.ppf"])
def test_inverse_distribution_functions(f, x):
    check(f, x, rtol=1e-5)
