"""scipy.linalg's lu, pinv, lstsq, eig, eigvals and the structured solves (solve_banded,
solveh_banded, cho_solve_banded, solve_toeplitz), by SciPy's names and mutad.scipy.linalg's.

Each is checked by mutad.check_grads (finite differences, both policies, forward mode, second
order, the caller's arrays restored), its value against SciPy's own bit for bit, and the
structured solves' gradients against the dense solve's, read at the stored entries.
"""

import numpy as np
import pytest
import scipy.linalg
from scipy.linalg import solve_banded, solve_toeplitz, solveh_banded

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import linalg
from cases import replays_as_traced

POLICIES = ("restore", "checkpoint")
N = 6


def _rng():
    return np.random.default_rng(7)


def _general_band(l, u):
    ab = _rng().standard_normal((l + u + 1, N))
    ab[u] += 5.0  # diagonally dominant
    return ab


def _symmetric_band(p, lower):
    ab = 0.3 * _rng().standard_normal((p + 1, N))
    ab[0 if lower else p] = 3.0 + _rng().random(N)
    return ab


A = _rng().standard_normal((4, 4)) + 4 * np.eye(4)
PIVOTED = np.roll(A, 1, axis=0)  # LU's pivoting undoes the roll
TALL = _rng().standard_normal((5, 3))
B = _rng().standard_normal(N)
B2 = _rng().standard_normal((N, 2))
C = np.r_[4.0, 0.5 * _rng().standard_normal(N - 1)]
R = np.r_[9.0, 0.5 * _rng().standard_normal(N - 1)]  # r[0] is not read
PENCIL_B = np.eye(4) + 0.2 * np.cos(np.arange(16.0)).reshape(4, 4)  # invertible, nonsymmetric
NEAR_SYMMETRIC = A + A.T + np.diag([0.0, 1.0, 3.0, 6.0]) + 0.1 * np.triu(A)  # real eigenvalues

# name: (f, arguments); f returns the differentiable outputs
FORMS = {
    "lu": (lambda a: scipy.linalg.lu(a), (PIVOTED,)),
    "lu permute_l": (lambda a: scipy.linalg.lu(a, permute_l=True), (PIVOTED,)),
    "lu p_indices": (lambda a: scipy.linalg.lu(a, p_indices=True)[1:], (PIVOTED,)),
    "mutad lu": (lambda a: linalg.lu(a)[1:], (A,)),
    "pinv": (lambda a: scipy.linalg.pinv(a), (TALL,)),
    "pinv wide": (lambda a: scipy.linalg.pinv(a, atol=1e-12), (TALL.T,)),
    "pinv return_rank": (lambda a: scipy.linalg.pinv(a, return_rank=True)[0], (TALL,)),
    "mutad pinv": (lambda a: linalg.pinv(a), (TALL,)),
    "lstsq": (lambda a, b: scipy.linalg.lstsq(a, b)[:2], (TALL, B[:5])),
    "lstsq columns": (lambda a, b: scipy.linalg.lstsq(a, b)[:2], (TALL, B2[:5])),
    "lstsq singular values": (lambda a, b: scipy.linalg.lstsq(a, b)[3], (TALL, B[:5])),
    "lstsq wide": (lambda a, b: scipy.linalg.lstsq(a, b)[0], (TALL.T, B[:3])),
    "mutad lstsq": (lambda a, b: linalg.lstsq(a, b)[0], (TALL, B[:5])),
    "eigvals": (lambda a: np.abs(scipy.linalg.eigvals(a)) ** 2, (A,)),
    "eigvals real": (lambda a: scipy.linalg.eigvals(a).real, (NEAR_SYMMETRIC,)),
    "eig values": (lambda a: scipy.linalg.eig(a)[0].imag, (A,)),
    "eig real vectors": (lambda a: scipy.linalg.eig(a), (NEAR_SYMMETRIC,)),
    "mutad eig": (lambda a: np.abs(linalg.eig(a)[1]) ** 2, (A,)),
    # left eigenvectors, and the eigenvalues alone (they were refused: "left=False")
    "eig left": (lambda a: (lambda w, vl, vr: (w.imag, np.abs(vl) ** 2, np.abs(vr) ** 2))(
        *scipy.linalg.eig(a, left=True)), (A,)),
    "eig left, not right": (lambda a: (lambda w, vl: (w.real, np.abs(vl) ** 2))(
        *scipy.linalg.eig(a, left=True, right=False)), (A,)),
    "eig left real vectors": (lambda a: scipy.linalg.eig(a, left=True), (NEAR_SYMMETRIC,)),
    "eig not right": (lambda a: scipy.linalg.eig(a, right=False).imag, (A,)),
    # a generalized problem's eigenvalues (they were refused: "b=None")
    "eigvals generalized": (lambda a, b: np.abs(scipy.linalg.eigvals(a, b)) ** 2, (A, PENCIL_B)),
    "eigvals generalized real": (lambda a, b: scipy.linalg.eigvals(a, b).real,
                                 (NEAR_SYMMETRIC, PENCIL_B)),
    "eig generalized, not right": (lambda a, b: scipy.linalg.eig(a, b, right=False).imag,
                                   (A, PENCIL_B)),
    "eigvals generalized, b constant": (lambda a: scipy.linalg.eigvals(a, PENCIL_B).imag, (A,)),
    "solve_banded (1, 1)": (lambda ab, b: solve_banded((1, 1), ab, b), (_general_band(1, 1), B)),
    "solve_banded (2, 1)": (lambda ab, b: solve_banded((2, 1), ab, b), (_general_band(2, 1), B2)),
    "solve_banded (0, 2)": (lambda ab, b: solve_banded((0, 2), ab, b), (_general_band(0, 2), B)),
    "solve_banded (3, 0)": (lambda ab, b: solve_banded((3, 0), ab, b), (_general_band(3, 0), B)),
    "mutad solve_banded": (lambda ab, b: linalg.solve_banded((1, 2), ab, b),
                           (_general_band(1, 2), B)),
    "solveh_banded": (lambda ab, b: solveh_banded(ab, b), (_symmetric_band(2, False), B)),
    "solveh_banded lower": (lambda ab, b: solveh_banded(ab, b, lower=True),
                            (_symmetric_band(2, True), B2)),
    "solveh_banded tridiagonal": (lambda ab, b: solveh_banded(ab, b, lower=True),
                                  (_symmetric_band(1, True), B)),
    "mutad solveh_banded": (lambda ab, b: linalg.solveh_banded(ab, b),
                            (_symmetric_band(1, False), B2)),
    "cho_solve_banded": (lambda cb, b: scipy.linalg.cho_solve_banded((cb, False), b),
                         (_symmetric_band(2, False), B)),
    "cho_solve_banded lower": (lambda cb, b: scipy.linalg.cho_solve_banded((cb, True), b),
                               (_symmetric_band(2, True), B2)),
    "cho_solve_banded of cholesky_banded": (
        lambda ab, b: scipy.linalg.cho_solve_banded(
            (scipy.linalg.cholesky_banded(ab, lower=True), True), b),
        (_symmetric_band(1, True), B)),
    "solve_toeplitz c": (lambda c, b: solve_toeplitz(c, b), (C, B)),
    "solve_toeplitz (c, r)": (lambda c, r, b: solve_toeplitz((c, r), b), (C, R, B2)),
    "mutad solve_toeplitz": (lambda c, r, b: linalg.solve_toeplitz((c, r), b), (C, R, B)),
    "polar": (lambda a: scipy.linalg.polar(a), (A,)),
    "polar left": (lambda a: scipy.linalg.polar(a, side="left"), (A,)),
    "polar tall": (lambda a: scipy.linalg.polar(a), (TALL,)),
    "polar wide left": (lambda a: scipy.linalg.polar(a, "left"), (TALL.T,)),
    "mutad polar": (lambda a: linalg.polar(a, side="left")[0], (A,)),
}


def _float_outputs(y):
    """The differentiable outputs of a result (the permutation matrix and ranks carry none)."""
    if isinstance(y, tuple):
        return [v for v in y if np.asarray(v).dtype.kind in "fc"]
    return y


# Finite-difference steps other than 1e-4: two eigenvalues of the pencil (A, PENCIL_B) 0.23
# apart make the second derivatives of |λ|² steep.
STEPS = {"eigvals generalized": 3e-5}


@pytest.mark.parametrize("form", FORMS)
def test_rules(form):
    f, args = FORMS[form]
    copies = [a.copy() for a in args]

    def g(*xs):
        return _float_outputs(f(*xs))

    def loss(*xs):
        return sum(np.sum(np.real(v) ** 2) for v in (g(*xs) if isinstance(g(*xs), list)
                                                      else [g(*xs)]))

    assert mutad.value_and_gradient(loss, *copies)[0] == loss(*args)  # SciPy's own values
    for policy in POLICIES:
        mutad.check_grads(g, *copies, policy=policy, order=2, step=STEPS.get(form, 1e-4))
    for a, original in zip(copies, args, strict=True):
        assert np.array_equal(a, original)


@pytest.mark.parametrize("f", [lambda a: np.abs(scipy.linalg.eig(a)[1]) ** 2,
                               lambda a: scipy.linalg.eig(a)[0], scipy.linalg.eigvals],
                         ids=["eigenvectors", "eigenvalues", "eigvals"])
def test_eig_of_a_complex_matrix(f):
    """A complex matrix's eigenpairs, to first order in both modes (their second order is
    that of np.linalg.eig's and eigvals's rules, which SciPy's names share)."""
    a = A + 1j * A.T
    # LAPACK orders its eigenvalues otherwise at a distance of 1e-4 along many directions (none
    # of 4e-5): finite differences of a step of 1e-5 stay within one order
    for policy in POLICIES:
        mutad.check_grads(f, a.copy(), policy=policy, step=1e-5)
        mutad.check_grads(f, a.copy(), modes=["fwd"], step=1e-5)


def _dense_banded(ab, l, u):
    n = ab.shape[1]
    return sum(np.diag(ab[u - d, max(d, 0):n + min(d, 0)], d) for d in range(-l, u + 1))


@pytest.mark.parametrize("l, u", [(1, 1), (2, 1), (0, 2)])
def test_banded_gradient_is_the_dense_ones_on_the_band(l, u):
    ab = _general_band(l, u)
    w = _rng().standard_normal(N)
    dab, db = mutad.gradient(lambda ab, b: solve_banded((l, u), ab, b) @ w, ab, B)
    da, db_dense = mutad.gradient(lambda a, b: scipy.linalg.solve(a, b) @ w,
                                  _dense_banded(ab, l, u), B)
    np.testing.assert_allclose(db, db_dense, rtol=1e-12)
    for d in range(-l, u + 1):  # each stored diagonal's gradient is the dense one's
        np.testing.assert_allclose(dab[u - d, max(d, 0):N + min(d, 0)], np.diag(da, d),
                                   rtol=1e-11, atol=1e-14)


def test_symmetric_banded_gradient_sums_both_triangles():
    ab = _symmetric_band(2, False)
    dense = _dense_banded(np.vstack([ab, ab[:-1][::-1]]), 2, 2)  # not symmetric storage
    dense = np.triu(dense) + np.triu(dense, 1).T
    w = _rng().standard_normal(N)
    dab = mutad.gradient(lambda ab: solveh_banded(ab, B) @ w, ab)[0]
    da = mutad.gradient(lambda a: scipy.linalg.solve(a, B) @ w, dense)[0]
    for d in range(3):  # ab[2 - d] holds the d-th upper diagonal, also the d-th lower one
        expected = np.diag(da, d) + (np.diag(da, -d) if d else 0.0)
        np.testing.assert_allclose(dab[2 - d, d:], expected, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve_banded_gradient_is_cho_solves_on_the_band(lower):
    """cho_solve_banded (a stop: SciPy's code converted the traced factor) differentiates
    the stored entries of the factor as cho_solve differentiates the dense one's, and
    replays as traced on other numbers."""
    cb = _symmetric_band(2, lower)
    dense = _dense_banded(cb, 2, 0) if lower else _dense_banded(cb, 0, 2)
    w = _rng().standard_normal((N, 2))
    dcb, db = mutad.gradient(
        lambda cb, b: np.sum(scipy.linalg.cho_solve_banded((cb, lower), b) * w), cb, B2)
    dc, db_dense = mutad.gradient(
        lambda c, b: np.sum(scipy.linalg.cho_solve((c, lower), b) * w), dense, B2)
    np.testing.assert_allclose(db, db_dense, rtol=1e-12)
    for d in range(3):  # the d-th diagonal below (L) or above (U) the main one
        stored = dcb[d, :N - d] if lower else dcb[2 - d, d:]
        np.testing.assert_allclose(stored, np.diag(dc, -d if lower else d), rtol=1e-11,
                                   atol=1e-14)
    corners = dcb[np.arange(3)[:, None], np.arange(N)[None, :]][
        (np.arange(N)[None, :] >= N - np.arange(3)[:, None]) if lower
        else (np.arange(N)[None, :] < 2 - np.arange(3)[:, None])]
    assert not corners.any()  # entries band storage does not use
    replays_as_traced(lambda cb, b: np.sum(scipy.linalg.cho_solve_banded((cb, lower), b) * w),
                      [(cb, B2), (cb * 1.1, B2 + 1.0)], argnums=(0, 1))


def _crank_nicolson_banded(u0, kappa):
    """Implicit steps of a tridiagonal system with SciPy's overwrite flags, ab filled afresh
    before each solve (SciPy leaves its workspace in it), and a loss that decides on ab."""
    n = u0.size
    u, ab = u0.copy(), np.empty((3, n))
    for _ in range(3):
        ab[0], ab[1], ab[2] = -kappa, 1.0 + 2.0 * kappa, -kappa
        u = solve_banded((1, 1), ab, u, overwrite_ab=True, overwrite_b=True)
    det = scipy.linalg.det(np.diag(u) + 3.0, overwrite_a=True)
    return u @ u + det + float(ab[1, 0] > 1.0)


def _reads_the_workspace(ab, b):
    work = ab * 1.0
    return solve_banded((1, 1), work, b, overwrite_ab=True).sum() + work.sum()


def test_scipys_workspace_in_an_overwritten_array_is_followed_until_the_gradient_reads_it():
    """``solve_banded(..., overwrite_ab=True)`` (also ``det``'s, ``solveh_banded``'s) of a
    traced array was refused, as SciPy leaves its workspace there; ab holds SciPy's bytes now,
    without a derivative, and a gradient that reads them is refused."""
    u0, kappa = np.sin(np.linspace(0.0, 3.0, N)), 0.3
    before = u0.tobytes()
    value, _ = mutad.value_and_gradient(_crank_nicolson_banded, u0, kappa)
    assert value == _crank_nicolson_banded(u0.copy(), kappa) and u0.tobytes() == before
    mutad.check_grads(_crank_nicolson_banded, u0, kappa, modes=("rev",))
    replays_as_traced(_crank_nicolson_banded, [(u0, kappa), (2.0 * u0, 0.7), (u0, 1.5)],
                      argnums=(0, 1))
    ab = _general_band(1, 1)
    work = ab.copy()
    solve_banded((1, 1), work, B, overwrite_ab=True)
    assert not np.array_equal(work, ab), "SciPy did not overwrite: the test proves nothing"
    with pytest.raises(UnsupportedOperationError, match="the gradient reads it"):
        mutad.gradient(_reads_the_workspace, ab, B)
    with pytest.raises(UnsupportedOperationError, match="forward mode"):
        mutad.jvp(_crank_nicolson_banded, (u0, kappa), (u0, 1.0))
    assert u0.tobytes() == before


def test_toeplitz_gradient_sums_each_diagonal():
    w = _rng().standard_normal(N)
    dc, dr = mutad.gradient(lambda c, r: solve_toeplitz((c, r), B) @ w, C, R)
    da = mutad.gradient(lambda a: scipy.linalg.solve(a, B) @ w, scipy.linalg.toeplitz(C, R))[0]
    np.testing.assert_allclose(dc, [np.trace(da, -k) for k in range(N)], rtol=1e-11)
    np.testing.assert_allclose(dr, [0.0] + [np.trace(da, k) for k in range(1, N)], rtol=1e-11)


def test_pinv_of_full_rank_is_the_normal_equations():
    w = _rng().standard_normal((3, 5))
    grad = mutad.gradient(lambda a: np.sum(scipy.linalg.pinv(a) * w), TALL.copy())[0]
    expected = mutad.gradient(lambda a: np.sum(np.linalg.solve(a.T @ a, a.T) * w),
                              TALL.copy())[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-10)


Q = np.linalg.qr(A)[0]
NEARLY_SINGULAR = Q @ np.diag([1.0, 0.5, 1e-5, 2e-5]) @ Q.T  # rank 2 at cond=1e-3, 4 at pinv's

REFUSED = {
    "eig b": lambda a: scipy.linalg.eig(a, np.eye(4))[0].real,
    "eigvals singular b": lambda a: np.nan_to_num(scipy.linalg.eigvals(
        a, np.diag([1.0, 1.0, 1.0, 0.0])).real),
    "eigvals b complex": lambda a: scipy.linalg.eigvals(a, np.eye(4) + 1j).real,
    "eig left complex": lambda a: np.abs(scipy.linalg.eig(a + 1j * a.T, left=True)[1]),
    "eigvals homogeneous": lambda a: scipy.linalg.eigvals(a, homogeneous_eigvals=True).real,
    "lstsq rank": lambda a: scipy.linalg.lstsq(NEARLY_SINGULAR + 0.0 * a, B[:4], cond=1e-3)[0],
    "toeplitz batch": lambda a: solve_toeplitz(a[:2], np.ones(4)),
    "polar wide right": lambda a: scipy.linalg.polar(a[:3])[0],
    "polar tall left": lambda a: scipy.linalg.polar(a[:, :3], side="left")[0],
    "polar stacked": lambda a: scipy.linalg.polar(np.stack([a, a]))[0],
    "ldl complex": lambda a: scipy.linalg.ldl(a + 1j * a.T)[1].real,
    "funm repeated eigenvalues": lambda a: scipy.linalg.funm(np.diag([1.0, 2.0, 2.0, 3.0])
                                                             + 0.0 * a, np.cos),
}


@pytest.mark.parametrize("form", REFUSED)
def test_refused(form):
    a = A.copy()
    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(lambda a: np.sum(REFUSED[form](a)), a)
    assert np.array_equal(a, A)


@pytest.mark.parametrize("side", ["right", "left"])
def test_polar_forward_mode_and_repeated_singular_values(side):
    # An orthogonal matrix: every singular value is 1, and U's derivative divides by s_i + s_j.
    weights = np.arange(1.0, 17.0).reshape(4, 4)
    for a in (A, np.linalg.qr(A)[0]):
        copy = a.copy()

        def f(a):
            u, p = scipy.linalg.polar(a, side)
            return np.sum(weights * u) + np.sum(weights * p * p)

        mutad.check_grads(f, copy)
        mutad.check_jvp(f, copy)
        assert np.array_equal(copy, a)


def _real_spectrum():
    rng = _rng()
    v = rng.standard_normal((5, 5))
    return v @ np.diag([3.0, -1.0, 0.5, 2.0, -2.5]) @ np.linalg.inv(v)


SCHUR_MATRICES = {"nonsymmetric": _real_spectrum(),
                  "symmetric": (lambda m: m + m.T)(_rng().standard_normal((5, 5)))}
WEIGHTS = np.arange(1.0, 26.0).reshape(5, 5) / 25.0


@pytest.mark.parametrize("kind", SCHUR_MATRICES)
def test_schur_of_real_distinct_eigenvalues(kind):
    """SciPy's real Schur form bit for bit; T and Z differentiated (Zᵀ dA Z = dT + TΩ - ΩT),
    both modes, second order; the caller's matrix unchanged."""
    m = SCHUR_MATRICES[kind]
    a = m.copy()
    (t, z), _ = mutad.pullback(scipy.linalg.schur, a)
    expected = scipy.linalg.schur(m)
    assert t.tobytes() == expected[0].tobytes() and z.tobytes() == expected[1].tobytes()

    def f(a):
        t, z = scipy.linalg.schur(a)
        return np.sum(np.sin(t) * WEIGHTS) + np.sum(np.cos(z) * WEIGHTS.T)

    def odd(a):  # the signs of Z's columns: LAPACK's, kept under a perturbation
        t, z = scipy.linalg.schur(a)
        return np.sum(t * WEIGHTS) + np.sum(z ** 3 * WEIGHTS.T)

    for g in (f, odd):
        mutad.check_grads(g, a, rtol=1e-5)
        mutad.check_jvp(g, a)
    mutad.check_grads(f, a, order=2, rtol=1e-5)
    assert np.array_equal(a, m)
    replays_as_traced(f, [(m,), (m * 1.1,), (m + 0.05 * np.eye(5),)])


QUASI_TRIANGULAR = np.triu(np.ones((4, 4))) + np.diag([1.0, 0.0, 1.0], -1)
"""Where a real Schur form may hold numbers: the triangle and two 2x2 blocks' subdiagonals."""


def _quasi_triangular(p):  # two 2x2 blocks with complex eigenvalues, apart from the triangle
    return p * QUASI_TRIANGULAR


def test_rsf2csf_takes_scipys_steps():
    """rsf2csf of a real Schur form: SciPy's complex form bit for bit (its Givens rotations of
    the 2x2 blocks, from their eigenvalues and BLAS's norm), both modes, replayed; of a
    triangular T (schur of a matrix with real eigenvalues) complex copies. It converted the
    traced arrays."""
    p = np.triu(_rng().standard_normal((4, 4))) + np.diag([-0.9, 0.0, -0.7], -1)
    p[0, 0] = p[1, 1] = 0.3
    p[2, 2] = p[3, 3] = -0.4
    p[0, 1], p[2, 3] = 1.1, 0.6

    def f(p):
        t, z = scipy.linalg.rsf2csf(_quasi_triangular(p), np.eye(4) + 0.1 * p.T)
        return np.sum(np.abs(t) ** 2 * WEIGHTS[:4, :4]) + np.sum(np.real(z) + np.imag(z))

    def after_schur(a):
        t, z = scipy.linalg.rsf2csf(*scipy.linalg.schur(a))
        return np.sum(np.real(np.diag(t))) + np.sum(np.abs(t) * WEIGHTS)

    a = SCHUR_MATRICES["nonsymmetric"]
    for g, x in ((f, p), (after_schur, a)):
        before = x.tobytes()
        value, _ = mutad.value_and_grad(g)(x)
        assert np.asarray(value).tobytes() == np.asarray(g(x.copy())).tobytes()
        mutad.check_grads(g, x, modes=("rev", "fwd"))
        assert x.tobytes() == before
    replays_as_traced(f, [(p,), (p * 1.1,)])
    (t, z), _ = mutad.pullback(lambda p: scipy.linalg.rsf2csf(_quasi_triangular(p), np.eye(4)), p)
    expected = scipy.linalg.rsf2csf(_quasi_triangular(p), np.eye(4))
    assert t.tobytes() == expected[0].tobytes() and z.tobytes() == expected[1].tobytes()


ROTATING = np.array([[0.0, 2.0, 1.0], [-2.0, 0.1, 0.3], [0.2, 0.1, 1.0]])
"""A real matrix with a pair of complex eigenvalues (a 2x2 block of its real Schur form)."""

PHASE_FREE = {
    "|T|²": lambda a: np.abs(scipy.linalg.schur(a, output="complex")[0]) ** 2,
    "eigenvalues": lambda a: np.diagonal(scipy.linalg.schur(a, output="complex")[0]).real,
    "|Z|²": lambda a: np.abs(scipy.linalg.schur(a, output="complex")[1]) ** 2,
    "projector": lambda a: (lambda t, z: (z[:, :2] @ z[:, :2].conj().T).real)(
        *scipy.linalg.schur(a, output="complex")),
    "Z triu(T) Zᴴ": lambda a: (lambda t, z: (z @ np.triu(t, 1) @ z.conj().T).imag)(
        *scipy.linalg.schur(a, output="complex")),
}


@pytest.mark.parametrize("loss", PHASE_FREE)
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_complex_schur_of_losses_free_of_the_phases(loss, kind):
    """schur(a, output='complex') (a stop: refused for its vectors' phases): SciPy's form bit
    for bit, the derivative of the phases' convention (Ω = Zᴴ dZ without a diagonal), exact
    for losses that do not read the phases, of a real and a complex matrix, both modes,
    replayed; the caller's matrix unchanged."""
    m = ROTATING if kind == "real" else ROTATING + 0.5j * ROTATING.T
    f = PHASE_FREE[loss]
    a = m.copy()
    y, _ = mutad.pullback(lambda a: scipy.linalg.schur(a, output="complex"), a)
    expected = scipy.linalg.schur(m, output="complex")
    assert all(mine.tobytes() == theirs.tobytes() for mine, theirs in zip(y, expected,
                                                                           strict=True))
    mutad.check_grads(f, a, modes=("rev", "fwd"))
    assert a.tobytes() == m.tobytes()
    if kind == "real":
        replays_as_traced(lambda a: np.sum(f(a) * WEIGHTS[:3, :3]),
                          [(m,), (m + 0.05 * np.eye(3),), (m * 1.1,)])


def test_complex_schur_second_order():
    mutad.check_grads(PHASE_FREE["|T|²"], ROTATING.copy(), order=2)


def test_complex_schur_refuses_a_loss_that_reads_the_phases():
    a = ROTATING.copy()
    for f in (lambda a: scipy.linalg.schur(a, output="complex")[1][0, 0].real,
              lambda a: np.sum(scipy.linalg.schur(a, output="complex")[0].real)):
        with pytest.raises(UnsupportedOperationError, match="phases"):
            mutad.gradient(f, a)
        assert a.tobytes() == ROTATING.tobytes()


def test_schur_refusals():
    refusals = {
        "repeated": (np.diag([2.0, 2.0, 1.0]) + np.triu(np.ones((3, 3)), 1), "output='real'"),
        "complex eigenvalues": (np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 3]]), "output='real'"),
    }
    messages = {"repeated": "repeated eigenvalues", "complex eigenvalues": "output='complex'"}
    with pytest.raises(UnsupportedOperationError, match="sort="):  # its rotations' signs jump
        mutad.gradient(lambda a: np.sum(scipy.linalg.schur(a, sort="lhp")[0]), _real_spectrum())
    for name, (m, output) in refusals.items():
        a = m.copy()
        with pytest.raises(UnsupportedOperationError, match=messages[name]):
            mutad.gradient(lambda a: np.sum(np.abs(scipy.linalg.schur(
                a, output="complex" if output == "complex" else "real")[0])), a)
        assert np.array_equal(a, m)
    (g,) = mutad.gradient(lambda s: s * np.sum(scipy.linalg.schur(A)[0]), 2.0)
    assert g == np.sum(scipy.linalg.schur(A)[0])
    t, z = mutad.jvp(lambda s: scipy.linalg.schur(mutad.stop_gradient(s * A))[0], (1.0,), (1.0,))
    assert np.array_equal(t, scipy.linalg.schur(A)[0])


# Structured matrices: gathers of their inputs, so SciPy's values bit for bit.

VECTOR, SHORT = _rng().standard_normal(5), _rng().standard_normal(4)
BATCH, MATRIX = _rng().standard_normal((2, 3, 4)), _rng().standard_normal((2, 3))

STRUCTURED = {
    "toeplitz": (lambda c: scipy.linalg.toeplitz(c), (VECTOR,)),
    "toeplitz (c, r)": (lambda c, r: scipy.linalg.toeplitz(c, r), (VECTOR, SHORT)),
    "toeplitz batch": (lambda c, r: scipy.linalg.toeplitz(c, r), (BATCH, SHORT)),
    "toeplitz constant r": (lambda c: scipy.linalg.toeplitz(c, [1.0, 2.0]), (VECTOR,)),
    "hankel": (lambda c: scipy.linalg.hankel(c), (VECTOR,)),
    "hankel (c, r)": (lambda c, r: scipy.linalg.hankel(c, r), (VECTOR, SHORT)),
    "circulant": (lambda c: scipy.linalg.circulant(c), (VECTOR,)),
    "circulant batch": (lambda c: scipy.linalg.circulant(c), (BATCH,)),
    "block_diag": (lambda a, b: scipy.linalg.block_diag(a, b, 2.0, [[1.0, 3.0]]),
                   (VECTOR, MATRIX)),
    "block_diag batch": (lambda a, b: scipy.linalg.block_diag(a, b), (BATCH, MATRIX)),
    "companion": (lambda a: scipy.linalg.companion(a), (VECTOR,)),
    "companion batch": (lambda a: scipy.linalg.companion(a), (BATCH,)),
    "fiedler": (lambda a: scipy.linalg.fiedler(a), (VECTOR,)),
    "fiedler batch": (lambda a: scipy.linalg.fiedler(a), (BATCH,)),
    "convolution_matrix": (lambda a: scipy.linalg.convolution_matrix(a, 3), (VECTOR,)),
    "convolution_matrix same": (lambda a: scipy.linalg.convolution_matrix(a, 7, "same"),
                                (VECTOR,)),
    "convolution_matrix same short": (lambda a: scipy.linalg.convolution_matrix(a, 4, "same"),
                                      (VECTOR,)),
    "convolution_matrix valid": (lambda a: scipy.linalg.convolution_matrix(a, 3, "valid"),
                                 (VECTOR,)),
    "convolution_matrix valid long": (
        lambda a: scipy.linalg.convolution_matrix(a[:2], 6, "valid"), (VECTOR,)),
    "convolution_matrix batch": (lambda a: scipy.linalg.convolution_matrix(a, 4, "same"),
                                 (MATRIX,)),
    "leslie": (lambda f, s: scipy.linalg.leslie(f, s), (VECTOR, SHORT)),
    "leslie batch": (lambda f, s: scipy.linalg.leslie(f, s[:3]), (BATCH, SHORT)),
    "fiedler_companion": (lambda a: scipy.linalg.fiedler_companion(a), (VECTOR,)),
    "fiedler_companion even": (lambda a: scipy.linalg.fiedler_companion(a[:4]), (VECTOR,)),
    "fiedler_companion 2": (lambda a: scipy.linalg.fiedler_companion(a[:2]), (VECTOR,)),
    "fiedler_companion batch": (lambda a: scipy.linalg.fiedler_companion(a), (MATRIX,)),
    "mutad toeplitz": (lambda c, r: linalg.toeplitz(c, r), (VECTOR, SHORT)),
    "mutad block_diag": (lambda a: linalg.block_diag(a, a), (MATRIX,)),
}


@pytest.mark.parametrize("form", STRUCTURED)
def test_structured_matrices(form):
    f, args = STRUCTURED[form]
    copies = [a.copy() for a in args]
    y, _ = mutad.pullback(f, *copies)
    expected = f(*args)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    assert y.tobytes() == expected.tobytes()  # SciPy's values, bit for bit
    # (a step of 1e-4 would move a[0] = 0.0012, which the companion forms divide by, by a tenth
    # of itself; the other forms are linear, exact at any step)
    for policy in POLICIES:
        mutad.check_grads(f, *copies, policy=policy, step=1e-6)
    mutad.check_jvp(f, *copies, step=1e-6)
    for a, original in zip(copies, args, strict=True):
        assert np.array_equal(a, original)


@pytest.mark.parametrize("form", ["toeplitz (c, r)", "companion", "fiedler_companion"])
def test_structured_matrices_second_order(form):
    f, args = STRUCTURED[form]
    args = [np.r_[2.0, a[1:]] for a in args]  # a leading coefficient away from 0
    mutad.check_grads(lambda *xs: np.sum(np.sin(f(*xs)) ** 2), *args, order=2)


def test_complex_toeplitz_conjugates_c():
    c = VECTOR + 1j * VECTOR[::-1]
    y, _ = mutad.pullback(scipy.linalg.toeplitz, c.copy())
    assert y.tobytes() == scipy.linalg.toeplitz(c).tobytes()
    mutad.check_grads(scipy.linalg.toeplitz, c.copy())


def test_fiedler_at_equal_entries_has_a_gradient():
    # |a_i - a_j| on the diagonal (and at equal entries): the subgradient 0, not NaN.
    a = np.array([1.0, 2.0, 1.0])
    (g,) = mutad.gradient(lambda a: np.sum(scipy.linalg.fiedler(a)), a)
    assert np.array_equal(g, [-2.0, 4.0, -2.0])  # sign(a_i - a_j), 0 where equal


def test_structured_errors_are_scipys():
    for f in (lambda a: scipy.linalg.companion(a[:1]),
              lambda a: scipy.linalg.companion(a * 0.0),
              lambda a: scipy.linalg.leslie(a, a),
              lambda a: scipy.linalg.convolution_matrix(a, 0)):
        with pytest.raises(ValueError):
            f(VECTOR)
        with pytest.raises(ValueError):
            mutad.gradient(lambda a: np.sum(f(a)), VECTOR.copy())
    with pytest.raises(UnsupportedOperationError, match="ravel"):
        mutad.gradient(lambda a: np.sum(scipy.linalg.hankel(a)), MATRIX.copy())


def test_structured_matrices_replay():
    def f(c, r):
        t = scipy.linalg.toeplitz(c, r) @ scipy.linalg.circulant(r)
        return np.sum(scipy.linalg.block_diag(t, scipy.linalg.companion(c)) ** 2)

    replayed = mutad.grad(f, argnums=(0, 1), replay=True)
    for k in range(4):
        c, r = VECTOR[:4] + k, SHORT * (k + 1)
        traced = mutad.gradient(f, c.copy(), r.copy())
        for ours, expected in zip(replayed(c.copy(), r.copy()), traced, strict=True):
            assert ours.tobytes() == expected.tobytes()


def _stable(rng, n):
    return rng.normal(size=(n, n)) - 3.0 * np.eye(n)


LYAPUNOV_AND_RICCATI = {
    "continuous-lyapunov": (lambda a, q: scipy.linalg.solve_continuous_lyapunov(a, q),
                            lambda rng: (_stable(rng, 3), rng.normal(size=(3, 3)))),
    "discrete-lyapunov": (lambda a, q: scipy.linalg.solve_discrete_lyapunov(0.2 * a, q),
                          lambda rng: (rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))),
    "discrete-lyapunov-bilinear": (
        lambda a, q: scipy.linalg.solve_discrete_lyapunov(0.2 * a, q, method="bilinear"),
        lambda rng: (rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))),
    "continuous-are": (  # Q and R symmetric positive definite, as SciPy checks
        lambda a, b, qh, rh: scipy.linalg.solve_continuous_are(
            a, b, qh @ qh.T + np.eye(3), rh @ rh.T + np.eye(2)),
        lambda rng: (_stable(rng, 3), rng.normal(size=(3, 2)), rng.normal(size=(3, 3)),
                     rng.normal(size=(2, 2)))),
    "discrete-are": (
        lambda a, b, qh, rh: scipy.linalg.solve_discrete_are(
            a, b, qh @ qh.T + np.eye(3), rh @ rh.T + np.eye(2)),
        lambda rng: (0.5 * rng.normal(size=(3, 3)), rng.normal(size=(3, 2)),
                     rng.normal(size=(3, 3)), rng.normal(size=(2, 2)))),
}


@pytest.mark.parametrize("name", LYAPUNOV_AND_RICCATI)
def test_lyapunov_and_riccati_equations(name, rng):
    """SciPy's solutions; their derivatives by one more Lyapunov solve (the implicit function
    theorem), in both modes, to second order, replayed bit for bit."""
    solve, sample = LYAPUNOV_AND_RICCATI[name]
    args = sample(rng)
    weights = rng.normal(size=(3, 3))

    def f(*args):
        return (solve(*args) * weights).sum()

    before = [a.tobytes() for a in args]
    argnums = tuple(range(len(args)))
    assert mutad.value_and_grad(f, argnums=argnums)(*args)[0] == f(*args)
    mutad.check_grads(f, *args)
    mutad.check_jvp(f, *args)
    mutad.check_grads(f, *args, order=2)
    replayed = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for scale in (1.0, 1.1, 0.9):
        moved = (args[0] * scale, *args[1:])
        a, b = replayed(*moved), mutad.value_and_grad(f, argnums=argnums)(*moved)
        assert a[0] == b[0] and all(np.array_equal(u, v) for u, v in zip(a[1], b[1]))
    assert [a.tobytes() for a in args] == before


def test_svdvals_as_scipy_computes_them():
    """scipy.linalg.svdvals stopped (it converts its argument with np.array); now SciPy's
    values bit for bit, differentiated as svd's, in both modes, under the user's own name."""
    a = _rng().standard_normal((6, 4))
    before = a.tobytes()

    def loss(m):
        return (scipy.linalg.svdvals(m) ** 3).sum()

    value, _ = mutad.value_and_grad(loss)(a)
    assert value == loss(a)
    assert a.tobytes() == before
    mutad.check_grads(loss, a)
    mutad.check_grads(linalg.svdvals, a)


@pytest.mark.parametrize("lower", [False, True])
def test_a_symmetric_structure_of_a_matrix_that_is_not_symmetric_reads_one_triangle(lower):
    """SciPy reads one triangle (``lower``, else the upper) of a real matrix that is not
    symmetric: mutad computes that call, and its derivative is with respect to the entries
    read (finite differences give zero on the other triangle). It was refused."""
    a = np.array([[4.0, 1.0, 0.5], [0.2, 3.0, 0.3], [0.1, 0.4, 2.0]])
    b = np.array([1.0, 2.0, 3.0])
    before = a.tobytes()
    checked = ("pos", "sym")  # (the others the same LAPACK calls: their values and triangles)
    calls = [(assume_a, lambda a, s=assume_a: np.sum(
        scipy.linalg.solve(a, b, assume_a=s, lower=lower, transposed=s == "sym") ** 2))
        for assume_a in ("pos", "sym", "her", "positive definite", "symmetric")]
    calls += [(assume_a, lambda a, s=assume_a: np.sum(
        scipy.linalg.inv(a, assume_a=s, lower=lower) ** 2)) for assume_a in ("pos", "sym")]
    for assume_a, f in calls:
        value, gradient = mutad.value_and_grad(f)(a)
        assert value == f(a)
        assert not (np.triu(gradient, 1) if lower else np.tril(gradient, -1)).any()
        if assume_a in checked:
            mutad.check_grads(f, a)
    assert a.tobytes() == before


# The symmetric eigenproblem in band storage (eig_banded, eigvals_banded, eigh_tridiagonal,
# eigvalsh_tridiagonal), cholesky_banded and rq: SciPy's values bit for bit, the derivatives of
# np.linalg's rules on the dense matrix (or the reversed QR) they stand for.

DIAGONAL = np.r_[1.0, 2.5, 4.0, 5.5, 7.0, 9.0]  # well separated eigenvalues
OFF = 0.3 * _rng().standard_normal(N - 1)
WIDE = _rng().standard_normal((3, 5))


def _eigen_band(p, lower):
    ab = 0.3 * _rng().standard_normal((p + 1, N))
    ab[0 if lower else p] = DIAGONAL
    return ab


BANDED = {
    "eig_banded": (lambda ab: scipy.linalg.eig_banded(ab), (_eigen_band(2, False),)),
    "eig_banded lower": (lambda ab: scipy.linalg.eig_banded(ab, lower=True),
                         (_eigen_band(1, True),)),
    "eig_banded eigvals_only": (lambda ab: scipy.linalg.eig_banded(ab, eigvals_only=True),
                                (_eigen_band(2, False),)),
    "eig_banded diagonal": (lambda ab: scipy.linalg.eig_banded(ab, eigvals_only=True),
                            (DIAGONAL[None, :] * 1.0,)),
    "eigvals_banded": (lambda ab: scipy.linalg.eigvals_banded(ab, lower=True),
                       (_eigen_band(2, True),)),
    "eigh_tridiagonal": (lambda d, e: scipy.linalg.eigh_tridiagonal(d, e), (DIAGONAL, OFF)),
    "eigh_tridiagonal eigvals_only": (
        lambda d, e: scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True), (DIAGONAL, OFF)),
    "eigvalsh_tridiagonal": (lambda d, e: scipy.linalg.eigvalsh_tridiagonal(d, e),
                             (DIAGONAL, OFF)),
    "eigvalsh_tridiagonal constant e": (
        lambda d: scipy.linalg.eigvalsh_tridiagonal(d, OFF), (DIAGONAL,)),
    # a selection of the eigenpairs: by index, or those in a half-open interval of values
    "eig_banded select": (lambda ab: scipy.linalg.eig_banded(ab, select="i", select_range=(1, 3)),
                          (_eigen_band(2, False),)),
    "eigvals_banded select values": (lambda ab: scipy.linalg.eigvals_banded(
        ab, lower=True, select="v", select_range=(3.0, 8.0)), (_eigen_band(1, True),)),
    "eigh_tridiagonal select": (lambda d, e: scipy.linalg.eigh_tridiagonal(
        d, e, select="i", select_range=(0, 1)), (DIAGONAL, OFF)),
    "eigh_tridiagonal select values": (lambda d, e: scipy.linalg.eigh_tridiagonal(
        d, e, eigvals_only=True, select="v", select_range=(2.0, 6.0)), (DIAGONAL, OFF)),
    "eigvalsh_tridiagonal select": (lambda d, e: scipy.linalg.eigvalsh_tridiagonal(
        d, e, select="i", select_range=(4, 5)), (DIAGONAL, OFF)),
    "cholesky_banded": (lambda ab: scipy.linalg.cholesky_banded(ab), (_symmetric_band(2, False),)),
    "cholesky_banded lower": (lambda ab: scipy.linalg.cholesky_banded(ab, lower=True),
                              (_symmetric_band(1, True),)),
    "rq": (lambda a: scipy.linalg.rq(a), (A,)),
    "rq economic wide": (lambda a: scipy.linalg.rq(a, mode="economic"), (WIDE,)),
    "rq r wide": (lambda a: scipy.linalg.rq(a, mode="r"), (WIDE,)),
    "rq r": (lambda a: scipy.linalg.rq(a, mode="r"), (A,)),
}


def _outputs(y):
    return list(y) if isinstance(y, tuple) else [y]


@pytest.mark.parametrize("form", BANDED)
def test_banded_eigenproblems_cholesky_banded_and_rq(form):
    f, args = BANDED[form]
    copies = [a.copy() for a in args]
    y, _ = mutad.pullback(f, *copies)
    for ours, expected in zip(_outputs(y), _outputs(f(*args)), strict=True):
        assert ours.dtype == expected.dtype and ours.tobytes() == expected.tobytes()
    # (a step of 1e-4 would move a[0] = 0.0012, which the companion forms divide by, by a tenth
    # of itself; the other forms are linear, exact at any step)
    for policy in POLICIES:
        mutad.check_grads(f, *copies, policy=policy, step=1e-6)
    mutad.check_jvp(f, *copies, step=1e-6)
    for a, original in zip(copies, args, strict=True):
        assert np.array_equal(a, original)  # the caller's arrays, bit for bit


@pytest.mark.parametrize("form", ["eig_banded", "eigh_tridiagonal", "cholesky_banded", "rq"])
def test_banded_eigenproblems_cholesky_banded_and_rq_second_order(form):
    f, args = BANDED[form]
    mutad.check_grads(lambda *xs: sum(np.sum(np.sin(v) ** 2) for v in _outputs(f(*xs))),
                      *[a.copy() for a in args], order=2)


def test_banded_eigenvalues_are_the_dense_ones_on_the_band():
    # Each stored off-diagonal entry stands for A[i, j] and A[j, i]: it gets both gradients.
    ab = _eigen_band(1, False)
    weights = np.arange(1.0, N + 1)
    (g,) = mutad.gradient(lambda ab: weights @ scipy.linalg.eig_banded(ab, eigvals_only=True),
                          ab)
    dense = np.diag(ab[1]) + np.diag(ab[0, 1:], 1) + np.diag(ab[0, 1:], -1)
    (expected,) = mutad.gradient(lambda a: weights @ np.linalg.eigvalsh(a), dense)
    assert np.allclose(g[1], np.diag(expected), rtol=1e-10, atol=1e-12)
    assert np.allclose(g[0, 1:], 2 * np.diag(expected, 1), rtol=1e-10, atol=1e-12)
    assert g[0, 0] == 0.0  # the corner band storage does not use


BANDED_REFUSED = {
    "rq tall": lambda ab: scipy.linalg.rq(ab.T @ np.ones((3, 5)))[0],
    "rq full wide": lambda ab: scipy.linalg.rq(ab)[0],
    "cholesky_banded complex": lambda ab: scipy.linalg.cholesky_banded(ab + 0j).real,
}


@pytest.mark.parametrize("form", BANDED_REFUSED)
def test_banded_refused(form):
    ab = _eigen_band(2, False)
    original = ab.copy()
    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(lambda ab: np.sum(BANDED_REFUSED[form](ab)), ab)
    assert np.array_equal(ab, original)


def test_banded_and_rq_calls_declare_no_rules():
    # SciPy's values come from module-level Values: a call adds nothing to the registry.
    from mutad.core.registry import RULES
    for form in ("eig_banded", "eigvals_banded", "eigh_tridiagonal", "eigvalsh_tridiagonal",
                 "cholesky_banded", "rq r"):
        f, args = BANDED[form]
        mutad.pullback(f, *[a.copy() for a in args])
        before = len(RULES)
        mutad.pullback(f, *[a.copy() for a in args])
        assert len(RULES) == before


_INDEFINITE = (lambda m: m + m.T - np.diag(np.diag(m + m.T)))(
    np.random.default_rng(0).standard_normal((5, 5)))  # a zero diagonal: a 2 x 2 pivot block


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("matrix", ["indefinite", "definite"])
def test_ldl_is_differentiated_with_scipys_pivots(matrix, lower):
    """Regression: scipy.linalg.ldl of a differentiated matrix was refused. Its factors are
    SciPy's bit for bit, differentiated (to the second order) as the block factorisation with
    SciPy's order and blocks, in the triangle LAPACK reads; the caller's array unchanged."""
    a = _INDEFINITE if matrix == "indefinite" else _INDEFINITE @ _INDEFINITE + np.eye(5)
    weights = np.arange(25.0).reshape(5, 5)

    def f(a):
        lu, d, perm = scipy.linalg.ldl(a, lower=lower)
        return np.sum(lu * weights) + np.sum(d * d) + perm @ np.diag(a)

    copy = a.copy()
    value, (g,) = mutad.value_and_gradient(f, copy)
    assert value == f(a.copy()) and np.array_equal(copy, a)
    assert not np.any(np.triu(g, 1) if lower else np.tril(g, -1))  # the triangle read
    mutad.check_grads(f, copy, order=2)
    mutad.check_jvp(f, copy)


def test_ldl_and_funm_of_constants_are_scipys():
    # Refused by name only where the matrix is differentiated (test_refused): of a constant,
    # SciPy's own, inside a differentiation too.
    s = A + A.T

    def f(c):
        lu, d, perm = scipy.linalg.ldl(mutad.stop_gradient(s))
        return c * (np.sum(d) + np.trace(scipy.linalg.funm(0.1 * s, np.cos)))

    (g,) = mutad.gradient(f, 2.0)
    assert g == np.sum(scipy.linalg.ldl(s)[1]) + np.trace(scipy.linalg.funm(0.1 * s, np.cos))


@pytest.mark.parametrize("name", ["cholesky_banded", "eig_banded", "eigh_tridiagonal", "rq"])
def test_values_taken_from_scipy_keep_its_layout(name):
    """Regression: these results came back in C order where SciPy's are in Fortran order, and
    a sum of them rounded otherwise than SciPy's."""
    import scipy.linalg as sl

    rng = np.random.default_rng(0)
    banded = rng.standard_normal((3, 7)) * 0.3
    banded[2] = 3 + rng.random(7)
    fn, x = {"cholesky_banded": (sl.cholesky_banded, banded),
             "eig_banded": (lambda a: sl.eig_banded(a)[1], banded),
             "eigh_tridiagonal": (lambda a: sl.eigh_tridiagonal(a[1], a[0, 1:])[1], banded),
             "rq": (lambda a: sl.rq(a)[1], rng.standard_normal((4, 4)))}[name]
    expected = fn(x.copy())
    value = mutad.jvp(fn, (x.copy(),), (np.ones_like(x),))[0]
    assert value.strides == expected.strides and value.tobytes() == expected.tobytes()
    for seed in range(8):
        a = np.random.default_rng(seed).standard_normal(x.shape) * 0.3
        if name != "rq":
            a[2] = 3 + np.abs(a[2])

        def loss(a):
            y = fn(a * a if name == "cholesky_banded" else a * 1.0)
            return (y ** 2 * np.arange(1.0, y.size + 1).reshape(y.shape)).sum()

        assert mutad.value_and_gradient(loss, a)[0] == loss(a.copy())


# ----------------------------------------------------------------------------------------------
# orthogonal_procrustes, subspace_angles, expm_frechet: SciPy's steps (or SciPy's value with the
# derivatives of the block exponential's corners), its values bit for bit

M5 = np.random.default_rng(3).standard_normal((5, 5))
E5 = np.random.default_rng(4).standard_normal((5, 5))
SL = scipy.linalg
COMPOSED = {
    "orthogonal_procrustes": lambda a: (lambda r, s: np.sum(r * E5) + s)(
        *SL.orthogonal_procrustes(a, np.eye(5) + 0.3 * E5)),
    "orthogonal_procrustes, tall, in B": lambda a: (lambda r, s: np.sum(r * E5[:2, :2]) * s)(
        *SL.orthogonal_procrustes(E5[:, :2], a[:, :2])),
    "subspace_angles, a constant basis": lambda a: SL.subspace_angles(
        a[:, :2], np.eye(5)[:, :2]).sum(),
    "subspace_angles, both traced": lambda a: np.sum(np.cos(SL.subspace_angles(
        a[:, :3], a[:, 2:4] + E5[:, :2]))),
    "subspace_angles, a column in a close plane": lambda a: SL.subspace_angles(  # (its sine
        a[:, :1], a[:, :2] + 0.05 * E5[:, :2]).sum(),  # from svdvals of a Fortran residual)
    "expm_frechet": lambda a: (lambda e, l: np.sum(e) + np.sum(l * E5))(
        *SL.expm_frechet(a * 0.3, E5)),
    "expm_frechet, in E, compute_expm=False": lambda a: np.sum(SL.expm_frechet(
        E5 * 0.3, np.sin(a), compute_expm=False) ** 2),
}


@pytest.mark.parametrize("name", COMPOSED)
def test_composed_scipy_linalg(name):
    from cases import replays_as_traced
    f = COMPOSED[name]
    a = M5.copy()
    mutad.check_grads(f, a, modes=["rev", "fwd"], rtol=1e-5)
    mutad.check_grads(f, a, policy="checkpoint", rtol=1e-5)
    replays_as_traced(f, [(a,), (a * 1.1,), (a * 0.9,)])
    assert mutad.value_and_grad(f)(a)[0].tobytes() == f(M5.copy()).tobytes()
    assert a.tobytes() == M5.tobytes()


def test_composed_scipy_linalg_values_are_scipys():
    def parts(a):
        r, s = SL.orthogonal_procrustes(a, E5)
        t = SL.subspace_angles(a[:, :3], E5[:, :2])
        e, l = SL.expm_frechet(a, E5)
        return r, s, t, e, l

    got = mutad.jvp(parts, (M5.copy(),), (np.ones((5, 5)),))[0]
    for x, y in zip(got, parts(M5.copy())):
        x, y = np.asarray(x), np.asarray(y)
        assert x.tobytes() == y.tobytes() and x.strides == y.strides


@pytest.mark.parametrize("seed", [0, 10])
def test_subspace_angles_of_subspaces_that_meet_are_refused(seed):
    """A plane and a 3-space of R^4 meet: SciPy's smallest angle is arccos of a cosine
    rounded to 1 (0 or 2.6e-8), whose partial is infinite; the derivative was a NaN (seed
    10) or rounding's (seed 0), where the angle has none or one of 0."""
    r = np.random.default_rng(seed)
    a, b = r.standard_normal((3, 4)), r.standard_normal((4, 2))
    with pytest.raises(UnsupportedOperationError, match="subspaces that meet"):
        mutad.gradient(lambda a, b: np.sum(SL.subspace_angles(b, a.T)), a, b, argnums=(0, 1))


def test_expm_frechet_second_order():
    f = COMPOSED["expm_frechet"]
    mutad.check_grads(f, M5.copy(), modes=["rev"], order=2, rtol=1e-4)


@pytest.mark.parametrize("name", ["qz", "ordqz"])
def test_qz_is_refused_by_name(name):
    a = M5.copy()
    with pytest.raises(UnsupportedOperationError, match=f"scipy.linalg.{name}.*eigvals"):
        mutad.gradient(lambda a: np.sum(np.abs(np.diag(
            getattr(scipy.linalg, name)(a, np.eye(5) + 0.1 * a.T)[0]))), a)
    assert a.tobytes() == M5.tobytes()
    # of constants, SciPy's own
    (g,) = mutad.gradient(lambda s: s * np.sum(scipy.linalg.qz(M5, E5)[0]), 2.0)
    assert g == np.sum(scipy.linalg.qz(M5, E5)[0])


def test_khatri_rao_is_scipys_own_code():
    """SciPy's column-wise Kronecker product of traced matrices (it stopped with a
    ConversionError at SciPy's asarray)."""
    from cases import followed_as_scipy

    def f(a):
        return np.sum(scipy.linalg.khatri_rao(a.reshape(2, 3), np.ones((4, 3)) + a[:3]) ** 2)

    x = np.linspace(0.2, 1.3, 6)
    followed_as_scipy(f, x, x[::-1].copy())
