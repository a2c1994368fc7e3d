"""Complex linear algebra: slogdet, the norms, cholesky, eigh, eigvalsh, svd, qr, eig, eigvals,
pinv and lstsq of complex matrices (and eig's complex results of real ones), each checked
against finite differences along complex directions (Hermitian ones for the functions of
Hermitian matrices) in both modes and under both policies, most at order 2; the eigenvectors'
and singular vectors' phases, which have no gradient; and the functions still refused."""

import numpy as np
import pytest
import scipy.linalg

import mutad
from mutad import errors
from mutad.linalg import cholesky_, ldiv_, lu_factor_, solve_triangular_
from mutad.scipy import linalg as scipy_linalg

RNG = np.random.default_rng(11)


def complex_array(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def hermitian(*shape, shift=0.0):
    """A (stack of) complex Hermitian matrices, ``shift`` added to the diagonal."""
    m = complex_array(*shape)
    return (m + np.swapaxes(m, -1, -2).conj()) / 2 + shift * np.eye(shape[-1])


def hermitian_positive_definite(*shape):
    m = complex_array(*shape)
    return m @ np.swapaxes(m, -1, -2).conj() + shape[-1] * np.eye(shape[-1])


def check(f, *args, order=1, symmetric=(), policies=("restore", "checkpoint")):
    for policy in policies:
        mutad.check_grads(f, *args, policy=policy, order=order, modes=("rev", "fwd"),
                          symmetric=symmetric)


def spread(*shape):
    """Complex matrices whose rows' and columns' sums of magnitudes are far apart, so that the
    max/min norms have no near tie for the finite differences' steps to cross.
    The draws are the first of a generator of their own that pass, whichever tests ran before
    (the module's generator's state depends on which tests a worker ran)."""
    rows, columns = 1.0 + 0.7 * np.arange(shape[-2]), 1.0 + 1.1 * np.arange(shape[-1])
    draws = np.random.default_rng(shape)
    while True:
        x = (draws.standard_normal(shape) + 1j * draws.standard_normal(shape)) \
            * rows[:, None] * columns
        if all(np.min(np.diff(np.sort(np.abs(x).sum(axis=axis), axis=-1), axis=-1)) > 0.05
               for axis in (-1, -2)):
            return x


A = complex_array(3, 3) + 2 * np.eye(3)
X34 = spread(3, 4)


# ----------------------------------------------------------------------------------------------
# slogdet, and det of a singular matrix


def test_slogdet_of_complex_matrices():
    check(np.linalg.slogdet, A, order=2)                       # the complex sign and log|det|
    check(lambda a: np.linalg.slogdet(a).sign, A)
    check(lambda a: np.linalg.slogdet(a).logabsdet, complex_array(2, 3, 3), order=2)


def test_slogdet_of_real_matrices_is_unchanged():
    check(lambda a: np.linalg.slogdet(a)[1], A.real.copy(), order=2)


def test_det_of_a_singular_complex_matrix_takes_the_cofactor():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]]) * (1.0 - 0.5j)
    a[2] += 1j * a[0]
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(a)
    check(np.linalg.det, a)


# ----------------------------------------------------------------------------------------------
# Norms


@pytest.mark.parametrize("ord", [None, 2, 1, np.inf, -np.inf, 3, 1.5, 0])
def test_vector_norms(ord):
    check(lambda x: np.linalg.norm(x, ord, axis=1), X34, order=2)
    check(lambda x: np.linalg.vector_norm(x, ord=2 if ord is None else ord, axis=0,
                                          keepdims=True), X34)


@pytest.mark.parametrize("ord", ["fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"])
def test_matrix_norms(ord):
    check(lambda x: np.linalg.norm(x, ord), X34, order=2)
    check(lambda x: np.linalg.matrix_norm(x, ord=ord, keepdims=True), spread(2, 4, 3))


def test_norms_over_axes():
    x = spread(3, 2, 4)
    check(lambda x: np.linalg.norm(x), x, order=2)
    check(lambda x: np.linalg.norm(x, "fro", axis=(0, 2)), x)
    check(lambda x: np.linalg.norm(x, np.inf, axis=(2, 0), keepdims=True), x)
    check(lambda x: np.linalg.vector_norm(x, axis=(0, 1), ord=3), x)


@pytest.mark.parametrize("ord", [None, 1, np.inf, 3])
def test_vector_norm_subgradient_is_zero_at_zero(ord):
    # the subgradient 0, as for real arrays: checked where the norm is smooth around it
    offset = np.array([1.0 + 0.5j, -2.0, 3.0j])  # magnitudes far apart: no tie for inf
    check(lambda x, z: np.linalg.norm(x, ord) + np.linalg.norm(z * x + offset, ord),
          np.zeros(3, complex), complex_array(3))


# ----------------------------------------------------------------------------------------------
# Hermitian matrices: cholesky, eigh, eigvalsh


def test_cholesky_of_hermitian_positive_definite_matrices():
    check(np.linalg.cholesky, hermitian_positive_definite(3, 3), symmetric=(0,), order=2)
    check(lambda a: np.linalg.cholesky(a, upper=True), hermitian_positive_definite(3, 3),
          symmetric=(0,), order=2)
    check(np.linalg.cholesky, hermitian_positive_definite(2, 3, 3), symmetric=(0,))


def test_cholesky_solves_as_a_complex_program():
    def solve(a, b):
        lower = np.linalg.cholesky(a)
        return np.linalg.solve(lower.conj().T, np.linalg.solve(lower, b))

    check(solve, hermitian_positive_definite(3, 3), complex_array(3, 2), symmetric=(0,),
          order=2)


def phase_free_eigh(a, uplo="L"):
    """Outputs of eigh that do not depend on the phase of each eigenvector."""
    w, v = np.linalg.eigh(a, uplo)
    return (w, np.abs(v) ** 2, (v * np.sin(w)[..., None, :]) @ np.swapaxes(v, -1, -2).conj(),
            v * (v[..., :1, :].conj() / np.abs(v[..., :1, :])))   # the phase fixed by a formula


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_hermitian_matrices(uplo):
    check(lambda a: phase_free_eigh(a, uplo), hermitian(4, 4), symmetric=(0,), order=2)


def test_eigh_of_stacked_hermitian_matrices():
    check(phase_free_eigh, hermitian(2, 3, 3, shift=1.0), symmetric=(0,))


def test_eigvalsh_of_hermitian_matrices():
    check(np.linalg.eigvalsh, hermitian(4, 4), symmetric=(0,), order=2)
    check(lambda a: np.linalg.eigvalsh(a, "U"), hermitian(2, 3, 3), symmetric=(0,))


@pytest.mark.parametrize("function", [np.linalg.cholesky, np.linalg.eigvalsh,
                                      lambda a: np.linalg.eigh(a)[0]])
def test_a_complex_matrix_that_is_not_hermitian_is_refused(function):
    a = hermitian_positive_definite(3, 3)
    a[0, 0] += 0.5j  # a complex diagonal: not Hermitian
    with pytest.raises(errors.UnsupportedOperationError, match="not Hermitian"):
        check(function, a)
    with pytest.raises(errors.UnsupportedOperationError, match="not Hermitian"):
        check(function, a + np.triu(complex_array(3, 3), 1))


# ----------------------------------------------------------------------------------------------
# SVD and QR


def phase_free_svd(a):
    """Outputs of the SVD that do not depend on the common phase of each singular pair."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return (s, np.abs(u) ** 2, np.abs(vh) ** 2, (u * np.exp(s)[..., None, :]) @ vh,
            u[..., :, :1] * vh[..., :1, :])


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 4, 3)])
def test_svd_of_complex_matrices(shape):
    check(phase_free_svd, complex_array(*shape), order=2 if len(shape) == 2 else 1)


def test_svd_singular_values_and_full_square_factors():
    check(lambda a: np.linalg.svd(a, compute_uv=False), complex_array(3, 5), order=2)
    check(lambda a: np.abs(np.linalg.svd(a)[0]) ** 2, complex_array(3, 3))
    check(lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[0][:, 0]) ** 2,
          complex_array(4, 3), order=2)                      # one singular vector only


def test_svd_of_a_hermitian_matrix_with_hermitian_true():
    def f(a):
        u, s, vh = np.linalg.svd(a, hermitian=True)
        return s, np.abs(u) ** 2

    check(f, hermitian(4, 4), symmetric=(0,), order=2)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4, 3)])
def test_qr_of_complex_matrices(shape):
    a = complex_array(*shape) + (2 * np.eye(3) if shape == (3, 3) else 0)
    check(np.linalg.qr, a, order=2 if len(shape) == 2 else 1)   # R's diagonal stays real


def test_qr_r_mode():
    check(lambda a: np.linalg.qr(a, "r"), complex_array(4, 2), order=2)


# ----------------------------------------------------------------------------------------------
# eig and eigvals of general matrices


def phase_free_eig(a):
    w, v = np.linalg.eig(a)
    return (w, np.abs(v) ** 2, (v * np.sin(w)[..., None, :]) @ np.linalg.inv(v),
            v * (v[..., :1, :].conj() / np.abs(v[..., :1, :])))


ROTATING = np.array([[0.0, 1.0, 0.3], [-1.0, 0.2, 0.1], [0.5, 0.0, 2.0]])  # a complex pair
STRETCHING = np.array([[2.0, 1.0, 0.3], [0.4, -1.2, 0.1], [0.5, 0.0, 0.5]])  # real eigenvalues


def test_eig_of_complex_matrices():
    check(phase_free_eig, complex_array(3, 3), order=2)
    check(phase_free_eig, complex_array(2, 3, 3))


def test_eig_of_a_real_matrix_with_complex_eigenvalues():
    assert np.iscomplexobj(np.linalg.eig(ROTATING).eigenvalues)
    check(phase_free_eig, ROTATING.copy(), order=2)


def test_eig_of_a_real_matrix_with_real_eigenvalues():
    # real eigenvectors: their signs are a discrete choice, so every output has a derivative
    assert not np.iscomplexobj(np.linalg.eig(STRETCHING).eigenvalues)
    check(np.linalg.eig, STRETCHING.copy(), order=2)


def test_eigvals():
    check(np.linalg.eigvals, complex_array(2, 3, 3), order=2)
    check(np.linalg.eigvals, ROTATING.copy(), order=2)
    check(np.linalg.eigvals, RNG.standard_normal((4, 4)))


@pytest.mark.parametrize("eigvals", [np.linalg.eigvals, scipy.linalg.eigvals])
def test_second_derivative_of_eigenvalues_whose_vectors_get_no_cotangent(eigvals):
    """Σ Re(w)² of a 2 × 2 matrix with a complex pair is tr(A)²/2: its eigenvalues' tangent
    reads the eigenvectors in V⁻¹ Ȧ V, whose cotangent cancels to rounding, which was refused
    as a loss of the eigenvectors' phases under hvp and hessian."""
    def loss(a):
        return np.sum(eigvals(a).real ** 2)

    a = np.array([[0.0, 1.0], [-1.0, -0.2]])
    t = np.array([[0.3, -0.1], [0.2, 0.5]])
    np.testing.assert_allclose(mutad.hvp(loss, (a,), (t,)), np.trace(t) * np.eye(2), atol=1e-12)
    np.testing.assert_allclose(mutad.hessian(loss, a).reshape(4, 4),
                               np.outer(np.eye(2), np.eye(2)), atol=1e-12)
    check(loss, ROTATING.copy(), order=2)


def test_eig_and_eigvals_give_numpys_bits():
    for a in (ROTATING, complex_array(3, 3)):
        y, _ = mutad.pullback(np.linalg.eig, a)
        for mine, numpys in zip(y, np.linalg.eig(a), strict=True):
            np.testing.assert_array_equal(mine, numpys)
        y, _ = mutad.pullback(np.linalg.eigvals, a)
        np.testing.assert_array_equal(y, np.linalg.eigvals(a))


# ----------------------------------------------------------------------------------------------
# Phases: a loss that reads them has no gradient


@pytest.mark.parametrize("loss, a", [
    (lambda a: np.sum(np.linalg.eigh(a)[1]).real, hermitian(3, 3)),
    (lambda a: np.linalg.eig(a)[1][0, 0].imag, complex_array(3, 3)),
    (lambda a: np.linalg.svd(a)[2][0, 0].imag, complex_array(3, 3)),
    (lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[0]).real, complex_array(4, 3)),
])
def test_a_loss_that_depends_on_the_phases_is_refused(loss, a):
    before = a.tobytes()
    with pytest.raises(errors.UnsupportedOperationError, match="phases"):
        check(loss, a, policies=("restore",))
    assert a.tobytes() == before


# ----------------------------------------------------------------------------------------------
# pinv and lstsq


def test_pinv_of_complex_matrices():
    check(np.linalg.pinv, complex_array(4, 3), order=2)
    check(np.linalg.pinv, complex_array(2, 2, 4))


def test_lstsq_of_complex_matrices():
    check(lambda a, b: np.linalg.lstsq(a, b)[0], complex_array(5, 3), complex_array(5), order=2)
    check(lambda a, b: np.linalg.lstsq(a, b)[:2] + np.linalg.lstsq(a, b)[3:],
          complex_array(5, 3), complex_array(5, 2), order=2)
    check(lambda a, b: np.linalg.lstsq(a, b)[0], complex_array(2, 4), complex_array(2))


def test_lstsq_of_a_real_matrix_and_a_complex_right_hand_side():
    check(lambda a, b: np.linalg.lstsq(a, b)[:2], RNG.standard_normal((5, 3)),
          complex_array(5), order=2)


# ----------------------------------------------------------------------------------------------
# Still refused


def test_in_place_routines_refuse_complex_values():
    h = hermitian_positive_definite(3, 3)
    b = complex_array(3)
    calls = [
        (lambda a: cholesky_(a).L, (h.copy(),)),
        (lambda a: lu_factor_(a).packed, (h.copy(),)),
        (lambda a, b: ldiv_(a, b), (h.copy(), b.copy())),
        (lambda a, b: ldiv_(a, b), (h.real.copy(), b.copy())),  # a real matrix, a complex b
        (lambda b: ldiv_(cholesky_(h.real + 3 * np.eye(3)), b), (b.copy(),)),  # a real factor
        (lambda t, b: solve_triangular_(t, b, lower=True), (np.tril(h), b.copy())),
    ]
    for call, args in calls:
        before = [x.tobytes() for x in args]
        with pytest.raises(errors.ComplexInputError, match="np.linalg"):
            call(*args)                                            # plain arrays
        with pytest.raises(errors.ComplexInputError, match="np.linalg"):
            check(call, *args, policies=("restore",))             # traced
        assert [x.tobytes() for x in args] == before


def test_scipy_linalg_wrappers_refuse_complex_values():
    h = hermitian_positive_definite(3, 3)
    with pytest.raises(errors.ComplexInputError):
        check(scipy_linalg.cholesky, h, policies=("restore",))
    with pytest.raises(errors.ComplexInputError):
        check(lambda a, b: scipy_linalg.solve(a, b), h, complex_array(3), policies=("restore",))
    # as SciPy names them, routed to the same rules
    with pytest.raises(errors.ComplexInputError):
        check(lambda a: scipy.linalg.cholesky(a, lower=True), h, policies=("restore",))
