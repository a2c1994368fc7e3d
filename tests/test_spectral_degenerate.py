"""Repeated eigenvalues and singular values: a derivative where mutad can prove it, else a refusal.

At a repeated eigenvalue of a symmetric matrix LAPACK returns an arbitrary basis of the
eigenspace, and the eigenvalues split along a perturbation into values none of which is
differentiable. A loss of the eigenvalues alone that is symmetric in the repeated ones
(Σ f(w)) has a derivative, checked here against finite differences; one that tells them apart
is refused. Through the decomposition with vectors, a loss that reads the repeated values or
their vectors is refused: its derivative depends on how it couples their split to the basis,
which its cotangent does not show (the gradient of V diag(sin w) Vᵀ at I came out cos(1) I,
not cos(1) on every entry); the vectors of simple values keep their derivative. Forward mode
differentiates tangents that keep the repeated values together, and a second derivative there
is refused. The same for eig (a defective matrix refused), the SVD (zero singular values
too) and np.roots (a repeated root). The matrices repeat their values exactly (identity
blocks) and within rounding (rotations of diag(1, 1, 2, -0.5)); a caller's array always comes
back unchanged.
"""

import numpy as np
import pytest
import scipy.linalg

import mutad
from mutad.errors import UnsupportedOperationError
from cases import replays_as_traced


def _rotation(n, seed=0):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]


def _symmetric(values, seed=0):
    q = _rotation(len(values), seed)
    a = q @ np.diag(values) @ q.T
    return (a + a.T) / 2


ROTATED = _symmetric([1.0, 1.0, 2.0, -0.5])  # 1 repeated within rounding
BLOCK = np.diag([1.0, 1.0, 2.0, -0.5]) + np.diag([0.0, 0.0, 0.3], 1) + np.diag([0.0, 0.0, 0.3],
                                                                                -1)
# BLOCK's eigenvalue 1 is exactly repeated: an identity block beside a coupled 2x2
REPEATED = {"rotated": ROTATED, "identity block": BLOCK, "identity": np.eye(3)}
WEIGHTS = np.arange(1.0, 17.0).reshape(4, 4) / 7.0 - 1.0


def _weights(a):
    n = np.shape(a)[0]
    return WEIGHTS[:n, :n]


def _projector(a):
    """The projector onto the eigenspace of the eigenvalues below 1.5, from eigh's vectors."""
    w, v = np.linalg.eigh(a)
    inside = v[:, np.asarray(w) < 1.5]
    return np.sum(_weights(a) * (inside @ inside.T))


def _spectral_function(a):
    w, v = np.linalg.eigh(a)
    return np.sum(_weights(a) * (v @ np.diag(np.sin(w)) @ v.T))


def _simple_vector(a):
    """The eigenvector of the simple eigenvalue 2 (the others repeated or apart), sign-free."""
    w, v = np.linalg.eigh(a)
    top = v[:, np.argmin(np.abs(np.asarray(w) - 2.0))]
    return np.sum(_weights(a) * np.outer(top, top)) + np.max(np.linalg.eigvalsh(a))


def _eigh_values_and_a_vector(a):
    """The values summed, and a repeated value's vector read with a zero weight, of one call:
    the cotangent reached the vectors, so the loss may couple the values to the basis."""
    w, v = np.linalg.eigh(a)
    return np.sum(w) + 0.0 * v[0, 1]

DIFFERENTIABLE = {
    "sum of f(w)": lambda a: np.sum(np.linalg.eigvalsh(a) ** 3),
    "the simple largest eigenvalue": lambda a: np.linalg.eigvalsh(a)[-1] ** 2,
    "the simple eigenpair, through eigh": _simple_vector,
    "scipy eigvalsh, sum": lambda a: np.sum(scipy.linalg.eigvalsh(a) ** 2),
    "scipy eigh eigvals_only, sum": lambda a: np.sum(np.sin(scipy.linalg.eigh(
        a, eigvals_only=True))),
    "generalized eigvalsh, sum": lambda a: np.sum(np.exp(scipy.linalg.eigvalsh(
        a, 2.0 * np.eye(np.shape(a)[0])))),
    # the values of a decomposition whose vectors no gradient reaches: as the values alone
    "eigh's values, summed": lambda a: np.sum(np.sin(np.linalg.eigh(a)[0])),
    "scipy eigh's values, summed": lambda a: np.sum(scipy.linalg.eigh(a)[0] ** 2),
    "generalized eigh's values, summed": lambda a: np.sum(scipy.linalg.eigh(
        a, 2.0 * np.eye(np.shape(a)[0]))[0] ** 3),
}


@pytest.mark.parametrize("matrix", [ROTATED, BLOCK], ids=["rotated", "identity block"])
@pytest.mark.parametrize("loss", DIFFERENTIABLE.values(), ids=DIFFERENTIABLE.keys())
def test_differentiable_losses_at_repeated_eigenvalues_match_finite_differences(loss, matrix):
    a = matrix.copy()
    mutad.check_grads(loss, a, symmetric=(0,), modes=["rev"], rtol=1e-6)
    assert np.array_equal(a, matrix)


def test_the_gradient_of_a_spectral_sum_is_the_matrix_function():
    """Σ w³ = tr(A³): the gradient is 3 A², also where the eigenvalues repeat exactly or
    within rounding."""
    for a in REPEATED.values():
        (grad,) = mutad.gradient(lambda a: np.sum(np.linalg.eigvalsh(a) ** 3), a)
        np.testing.assert_allclose(grad, 3 * a @ a, atol=1e-12)


NOT_DEFINED = {
    "an eigenvector of the repeated value": lambda a: np.sum(np.linalg.eigh(a)[1][:, 1]),
    "eigh's second vector, weighted": lambda a: np.sum(_weights(a)[0] * np.linalg.eigh(a)[1][
        :, 1]),
    "one of the repeated eigenvalues": lambda a: np.linalg.eigvalsh(a)[1],
    "eigh's values, weighted": lambda a: np.sum(np.arange(np.shape(a)[0]) * np.linalg.eigh(a)[0]),
    "scipy eigh's vector": lambda a: np.sum(scipy.linalg.eigh(a)[1][:, 1] * np.arange(
        np.shape(a)[0])),
    "scipy eigvalsh, one value": lambda a: scipy.linalg.eigvalsh(a)[1],
    "scipy eigh eigvals_only, one value": lambda a: scipy.linalg.eigh(a, eigvals_only=True)[1],
    "generalized eigh, one value": lambda a: scipy.linalg.eigh(a, np.eye(np.shape(a)[0]))[0][1],
    "generalized eigh, a vector": lambda a: np.sum(scipy.linalg.eigh(
        a, np.eye(np.shape(a)[0]))[1][:, 1] * np.arange(np.shape(a)[0])),
    # through the vectors: these have a derivative, which the cotangent does not determine
    "V diag(f(w)) Vᵀ": _spectral_function,
    "the projector onto the eigenspace": _projector,
    "eigh's values, summed, a repeated vector read": _eigh_values_and_a_vector,
}



@pytest.mark.parametrize("matrix", REPEATED.values(), ids=REPEATED.keys())
@pytest.mark.parametrize("loss", NOT_DEFINED.values(), ids=NOT_DEFINED.keys())
def test_losses_at_repeated_eigenvalues_that_mutad_cannot_differentiate_are_refused(loss,
                                                                                    matrix):
    """These gave LAPACK's arbitrary basis's gradient (1e14 where the values repeat within
    rounding), or V diag(f(w)) Vᵀ's without the couplings of the repeated values."""
    a = matrix.copy()
    with pytest.raises(UnsupportedOperationError, match="repeated eigenvalues"):
        mutad.gradient(loss, a)
    assert np.array_equal(a, matrix)


def test_a_matrix_function_through_eigh_at_the_identity_is_refused_not_wrong():
    """sum(V diag(sin w) Vᵀ) = sum(sin(A)): its gradient at I is cos(1) on every entry; the
    rule's formula without the repeated pairs' couplings gave cos(1) I. Its cotangent there
    (w̄ = cos(1), V̄ symmetric in Vᵀ V̄) is that of cos(1) tr(A), whose gradient is cos(1) I."""
    loss = lambda a: np.sum(np.linalg.eigh(a)[1] @ np.diag(np.sin(np.linalg.eigh(  # noqa
        a)[0])) @ np.linalg.eigh(a)[1].T)
    with pytest.raises(UnsupportedOperationError, match="scipy.linalg's"):
        mutad.gradient(loss, np.eye(3))
    (grad,) = mutad.gradient(lambda a: np.sum(np.sin(np.linalg.eigvalsh(a))), np.eye(3))
    np.testing.assert_allclose(grad, np.cos(1.0) * np.eye(3), atol=1e-15)


def test_nearly_repeated_but_distinct_eigenvalues_keep_their_derivative():
    """1e-4 apart the eigenvectors have a derivative (large): it matches finite differences."""
    a0 = _symmetric([1.0, 1.0 + 1e-4, 2.0])
    for loss in (lambda a: np.sum(np.linalg.eigh(a)[1][:, 0] * np.arange(3.0)),
                 lambda a: np.linalg.eigvalsh(a)[0]):
        a = a0.copy()
        mutad.check_grads(loss, a, symmetric=(0,), step=1e-8, rtol=1e-4, modes=["rev", "fwd"])
        assert np.array_equal(a, a0)


def test_complex_hermitian_repeated_eigenvalues():
    """A symmetric function of the eigenvalues has the Hermitian gradient f'(A); the vectors of
    the repeated value (a unitary choice within the eigenspace) are refused."""
    q = np.linalg.qr(np.random.default_rng(1).standard_normal((3, 3))
                     + 1j * np.random.default_rng(2).standard_normal((3, 3)))[0]
    h = q @ np.diag([1.0, 1.0, 3.0]) @ q.conj().T
    h = (h + h.conj().T) / 2
    (grad,) = mutad.gradient(lambda a: np.sum(np.linalg.eigvalsh(a) ** 2), h)
    np.testing.assert_allclose(grad, 2 * h, atol=1e-12)
    for loss in (lambda a: np.sum(np.abs(np.linalg.eigh(a)[1][:, 0] * np.arange(3)) ** 2),
                 lambda a: np.sum(np.abs((lambda v: v[:, :2] @ v[:, :2].conj().T)(
                     np.linalg.eigh(a)[1])) ** 2 * WEIGHTS[:3, :3])):
        with pytest.raises(UnsupportedOperationError, match="repeated eigenvalues"):
            mutad.gradient(loss, h)


def test_forward_mode_at_repeated_eigenvalues():
    """A tangent that moves the repeated eigenvalues together (its block a multiple of the
    identity) is differentiated; one that splits them is refused."""
    a = ROTATED.copy()
    w, v = np.linalg.eigh(a)
    inner = np.diag([3.0, 0.5, 0.5, 2.0]) + np.diag([0.4, 0.0, 0.3], 1) + np.diag(
        [0.4, 0.0, 0.3], -1)
    together = v @ inner @ v.T  # the block of the repeated pair (1, 2) is 0.5 I
    for loss in (_spectral_function, _projector, lambda a: np.linalg.eigvalsh(a)):
        _, tangent = mutad.jvp(loss, (a,), (together,))
        step = 1e-6
        expected = (np.asarray(loss(a + step * together)) - np.asarray(loss(a - step * together))
                    ) / (2 * step)
        np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-7)
    apart = v @ np.diag([0.0, 0.5, -0.5, 0.0]) @ v.T
    for f in (np.linalg.eigvalsh, lambda a: np.linalg.eigh(a)[1], scipy.linalg.eigvalsh,
              lambda a: scipy.linalg.eigh(a, np.eye(4))[0]):
        with pytest.raises(UnsupportedOperationError, match="splits them"):
            mutad.jvp(f, (a,), (apart,))
    assert np.array_equal(a, ROTATED)


def test_second_derivatives_at_repeated_eigenvalues_are_refused():
    """Σ w³ at I: the Hessian is 6 (E ↦ E); the rule's derivative would lose the couplings of
    the split eigenvalues (it gave 6 on the diagonal entries only)."""
    loss = lambda a: np.sum(np.linalg.eigvalsh(a) ** 3)  # noqa: E731
    for second in (lambda a: mutad.hessian(loss, a),
                   lambda a: mutad.hvp(loss, (a,), (np.array([[0.0, 1.0], [1.0, 0.0]]),))):
        with pytest.raises(UnsupportedOperationError, match="repeated"):
            second(np.eye(2))
    # distinct eigenvalues: the Hessian of tr(A³)'s spectral form is tr(A³)'s
    a = np.diag([1.0, 2.0]) + 0.1
    symmetric_cube = lambda a: np.trace(np.linalg.matrix_power((a + a.T) / 2, 3))  # noqa
    np.testing.assert_allclose(mutad.hessian(loss, a), mutad.hessian(symmetric_cube, a),
                               atol=1e-10)


def test_replay_refuses_a_repeated_spectrum_it_did_not_trace():
    """Replayed at a matrix whose eigenvalues repeat, a loss that reads the basis is refused,
    and a symmetric function of the eigenvalues gives the traced gradient bit for bit."""
    distinct = _symmetric([1.0, 1.5, 2.0, -0.5])
    reads_basis = mutad.value_and_grad(lambda a: np.sum(np.linalg.eigh(a)[1][:, 1]),
                                       replay=True)
    reads_basis(distinct)
    with pytest.raises(UnsupportedOperationError, match="repeated eigenvalues"):
        reads_basis(ROTATED.copy())
    spectral_sum = lambda a: np.sum(np.exp(np.linalg.eigvalsh(a)))  # noqa: E731
    replays_as_traced(spectral_sum, [(distinct,), (ROTATED,), (BLOCK,), (distinct,)])


# ----------------------------------------------------------------------------------------------
# eig, eigvals and np.roots: repeated eigenvalues of general matrices

_S = np.array([[1.0, 0.5, 0.0], [0.2, 1.0, 0.3], [0.0, 0.4, 1.0]])
DIAGONALIZABLE = _S @ np.diag([1.0, 1.0, 2.0]) @ np.linalg.inv(_S)


def test_eig_of_repeated_eigenvalues():
    a = DIAGONALIZABLE.copy()

    def spectral(a):  # V diag(f(w)) V⁻¹: invariant under any change of basis of an eigenspace
        w, v = np.linalg.eig(a)
        return np.sum(WEIGHTS[:3, :3] * np.real(v @ np.diag(np.exp(w)) @ np.linalg.inv(v)))

    mutad.check_grads(lambda a: np.sum(np.real(np.linalg.eigvals(a)) ** 2), a, modes=["rev"])
    mutad.check_grads(lambda a: np.sum(np.real(scipy.linalg.eigvals(a)) ** 3), a,
                      modes=["rev"])
    for loss in (spectral, lambda a: np.real(np.linalg.eigvals(a)[1]),
                 lambda a: np.sum(np.real(np.linalg.eig(a)[1][:, 1]) * np.arange(3)),
                 lambda a: np.real(scipy.linalg.eigvals(a)[1]),
                 lambda a: np.sum(np.real(scipy.linalg.eig(a)[1][:, 1]) * np.arange(3))):
        with pytest.raises(UnsupportedOperationError, match="repeated eigenvalues"):
            mutad.gradient(loss, a)
    with pytest.raises(UnsupportedOperationError, match="splits them"):
        mutad.jvp(np.linalg.eigvals, (a,), (np.diag([1.0, 0.0, 0.0]),))
    assert np.array_equal(a, DIAGONALIZABLE)


def test_a_defective_matrix_and_a_repeated_root_are_refused():
    """A Jordan block's eigenvalues move as √t: eigvals' formula gave a gradient there; a
    repeated root of a polynomial is a defective companion matrix's eigenvalue."""
    jordan = np.array([[1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(UnsupportedOperationError, match="defective"):
        mutad.gradient(lambda a: np.sum(np.real(np.linalg.eigvals(a))), jordan)
    # Similar to Jordan blocks, the computed eigenvalues split by ε^(1/k) (1 ± 1e-8): repeated
    # within their accuracy ε ‖A‖ κ; eigvals(a)[0] gave 2e7 here
    for size in (2, 3):
        similar = _S[:size, :size] @ (np.eye(size) + np.eye(size, k=1)) @ np.linalg.inv(
            _S[:size, :size])
        assert np.min(np.abs(np.diff(np.sort_complex(np.linalg.eigvals(similar))))) > 1e-10
        for loss in (lambda a: np.real(np.linalg.eigvals(a)[0]),
                     lambda a: np.sum(np.real(np.linalg.eig(a)[1][:, 0]))):
            with pytest.raises(UnsupportedOperationError, match="defective"):
                mutad.gradient(loss, similar)
    p = np.array([1.0, -2.0, 1.0])  # (x - 1)²
    with pytest.raises(UnsupportedOperationError, match="defective"):
        mutad.gradient(lambda p: np.sum(np.real(np.roots(p))), p)
    assert np.array_equal(p, [1.0, -2.0, 1.0])
    mutad.check_grads(lambda p: np.sum(np.real(np.roots(p)) ** 2), np.array([1.0, -3.0, 2.0]))


# ----------------------------------------------------------------------------------------------
# The SVD: repeated singular values (their vectors' joint rotation free) and zero ones

C = np.array([[0.3, -1.2, 0.7], [0.5, 0.1, -0.4], [1.1, 0.6, 0.2], [-0.3, 0.8, 0.9]])
REPEATED_SINGULAR = {
    "2 I": 2.0 * np.eye(3),
    "rotated": _rotation(3, 4) @ np.diag([2.0, 2.0, 1.0]) @ _rotation(3, 5).T,
    "tall": _rotation(4, 6)[:, :3] @ np.diag([1.5, 1.0, 1.0]) @ _rotation(3, 7).T,
}


def _polar_factor(a):
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return np.sum(C[:np.shape(a)[0], :np.shape(a)[1]] * (u @ vt))


SVD_DIFFERENTIABLE = {
    "sum of f(s)": lambda a: np.sum(np.linalg.svd(a, compute_uv=False) ** 3),
    "scipy svdvals": lambda a: np.sum(np.log(scipy.linalg.svdvals(a))),
    "scipy svd(compute_uv=False)": lambda a: np.sum(np.sqrt(scipy.linalg.svd(
        a, compute_uv=False))),
    # no gradient reaches the factors: the values alone
    "the values, through the factors": lambda a: np.sum(np.linalg.svd(
        a, full_matrices=False)[1] ** 2),
    "scipy svd's values, through the factors": lambda a: np.sum(np.exp(scipy.linalg.svd(
        a, full_matrices=False)[1])),
}


@pytest.mark.parametrize("matrix", REPEATED_SINGULAR.values(), ids=REPEATED_SINGULAR.keys())
@pytest.mark.parametrize("loss", SVD_DIFFERENTIABLE.values(), ids=SVD_DIFFERENTIABLE.keys())
def test_symmetric_functions_of_repeated_singular_values(loss, matrix):
    a = matrix.copy()
    mutad.check_grads(loss, a, modes=["rev"], rtol=1e-6)
    assert np.array_equal(a, matrix)


def test_the_simple_singular_triplet_beside_repeated_ones():
    """diag(1.5, 1, 1) rotated: the largest triplet is simple and keeps its derivative."""
    a = REPEATED_SINGULAR["tall"].copy()

    def top(a):
        u, s, vt = np.linalg.svd(a, full_matrices=False)
        return s[0] ** 2 + np.sum(C * np.outer(u[:, 0], vt[0]))

    mutad.check_grads(top, a, modes=["rev"], rtol=1e-6)
    assert np.array_equal(a, REPEATED_SINGULAR["tall"])


SVD_REFUSED = {
    "a vector of a repeated value": lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[0][
        :, 1] * np.arange(np.shape(a)[0])),
    "one of the repeated values": lambda a: scipy.linalg.svdvals(a)[1],
    "U Vᵀ (the polar factor)": _polar_factor,
    "scipy svd, U diag(f(s)) Vᵀ": lambda a: np.sum(C[:np.shape(a)[0], :np.shape(a)[1]] * (
        lambda u, s, vt: u @ np.diag(np.sqrt(s)) @ vt)(*scipy.linalg.svd(
            a, full_matrices=False))),
    "the values, a repeated vector read": lambda a: _values_and_a_vector(
        *np.linalg.svd(a, full_matrices=False)),
}


def _values_and_a_vector(u, s, vt):
    """A loss of the values that also reads a repeated value's vector (with a zero weight: the
    cotangent reached it, so the loss may couple the values to the basis)."""
    return np.sum(s) + 0.0 * u[0, 1]


@pytest.mark.parametrize("matrix", REPEATED_SINGULAR.values(), ids=REPEATED_SINGULAR.keys())
@pytest.mark.parametrize("loss", SVD_REFUSED.values(), ids=SVD_REFUSED.keys())
def test_svd_losses_mutad_cannot_differentiate_are_refused(loss, matrix):
    """These gave NaN (the couplings of a repeated pair are infinite)."""
    a = matrix.copy()
    with pytest.raises(UnsupportedOperationError, match="repeated singular values"):
        mutad.gradient(loss, a)
    assert np.array_equal(a, matrix)


def test_svd_forward_mode_at_repeated_singular_values():
    """Tangents that keep the repeated values together are differentiated (the polar factor's
    against finite differences), a splitting one refused."""
    a = 2.0 * np.eye(3)
    skew = np.array([[0.0, 1.0, -0.5], [-1.0, 0.0, 0.3], [0.5, -0.3, 0.0]])
    for tangent in (skew, np.eye(3) + skew):
        _, t = mutad.jvp(_polar_factor, (a,), (tangent,))
        step = 1e-6
        expected = (_polar_factor(a + step * tangent) - _polar_factor(a - step * tangent)) / (
            2 * step)
        assert abs(t - expected) < 1e-7
    with pytest.raises(UnsupportedOperationError, match="splits them"):
        mutad.jvp(lambda a: np.linalg.svd(a)[1], (a,), (np.diag([1.0, 0.0, 0.0]),))


RANK_DEFICIENT = C[:, :2] @ np.array([[1.0, 0.5, -0.3], [0.2, -1.0, 0.4]])  # 4x3 of rank 2


def test_zero_singular_values():
    """σ = |·| has a kink at 0, and a zero value's vectors are any of the null spaces': a loss
    reading either is refused (the nuclear norm; the reconstruction through all the factors,
    whose cotangent reads the zero value); the nonzero part is differentiated."""
    a = RANK_DEFICIENT.copy()
    for loss in (lambda a: np.sum(np.linalg.svd(a, compute_uv=False)),  # the nuclear norm
                 lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[0][:, 2]),
                 _polar_factor,
                 lambda a: np.sum(np.sin((lambda u, s, vt: u @ np.diag(s) @ vt)(
                     *np.linalg.svd(a, full_matrices=False))))):
        with pytest.raises(UnsupportedOperationError, match="zero"):
            mutad.gradient(loss, a)
    for loss in (lambda a: np.sum(np.linalg.svd(a, compute_uv=False)[:2] ** 2),
                 lambda a: np.sum(C[:, :2] * np.linalg.svd(a, full_matrices=False)[0][:, :2]),
                 lambda a: np.sum(np.sin((lambda u, s, vt: u[:, :2] @ np.diag(s[:2]) @ vt[:2])(
                     *np.linalg.svd(a, full_matrices=False))))):
        mutad.check_grads(loss, a, modes=["rev"], rtol=1e-6)
    with pytest.raises(UnsupportedOperationError, match="rank-deficient"):
        mutad.jvp(lambda a: np.linalg.svd(a, full_matrices=False)[1], (a,), (np.ones((4, 3)),))
    assert np.array_equal(a, RANK_DEFICIENT)


# ----------------------------------------------------------------------------------------------
# What reads singular values on the SVD rule's terms: lstsq's, the spectral norms', roots

def test_lstsq_singular_values_at_repeated_ones():
    """lstsq's singular values: their symmetric functions differentiated, one of a repeated
    pair refused (it gave NumPy's basis's u_i v_iᵀ)."""
    a = np.vstack([2.0 * np.eye(3), np.zeros((1, 3))])
    b = np.arange(4.0)
    mutad.check_grads(lambda a: np.sum(np.linalg.lstsq(a, b)[3] ** 2)
                      + np.sum(np.linalg.lstsq(a, b)[0]), a, modes=["rev"])
    with pytest.raises(UnsupportedOperationError, match="repeated singular values"):
        mutad.gradient(lambda a: np.linalg.lstsq(a, b)[3][0], a)
    with pytest.raises(UnsupportedOperationError, match="splits them"):
        mutad.jvp(lambda a: np.linalg.lstsq(a, b)[3], (a,), (np.ones((4, 3)),))
    assert np.array_equal(a, np.vstack([2.0 * np.eye(3), np.zeros((1, 3))]))


@pytest.mark.parametrize("lstsq", [np.linalg.lstsq, scipy.linalg.lstsq])
def test_lstsq_of_a_rank_deficient_matrix_along_a_tangent_that_moves_a_zero_singular_value(
        lstsq):
    """The solution, of the rank lstsq kept, has a derivative along any tangent (reverse mode
    gives it): forward mode gives it too (it refused, for the singular values beside it),
    and a NaN tangent to the zero singular value, which has none along it."""
    a, b = RANK_DEFICIENT.copy(), np.arange(1.0, 5.0)
    direction = np.ones((4, 3))
    x, dx = mutad.jvp(lambda a: lstsq(a, b)[0], (a,), (direction,))
    np.testing.assert_array_equal(x, lstsq(a, b)[0])
    np.testing.assert_allclose(dx, np.tensordot(mutad.jacobian(lambda a: lstsq(a, b)[0], a),
                                                direction, 2), rtol=1e-10, atol=1e-12)
    _, ds = mutad.jvp(lambda a: lstsq(a, b)[3], (a,), (direction,))
    assert np.isnan(ds[2]) and np.all(np.isfinite(ds[:2]))
    assert np.array_equal(a, RANK_DEFICIENT)


def test_spectral_norms_share_a_repeated_extreme_singular_value():
    """The 2-norm at a repeated σ_max, the -2 norm at a repeated σ_min: their block shares the
    subgradient, U_b V_bᵀ / k, free of NumPy's basis (it gave u_1 v_1ᵀ of that basis), as
    the max norm's ties share theirs; the nuclear norm's at a zero σ is U_r V_rᵀ."""
    q = _rotation(3, 8)
    a = q @ np.diag([2.0, 2.0, 1.0]) @ q.T
    (grad,) = mutad.gradient(lambda a: np.linalg.norm(a, 2), a)
    np.testing.assert_allclose(grad, q[:, :2] @ q[:, :2].T / 2, atol=1e-12)
    (grad,) = mutad.gradient(lambda a: np.linalg.norm(a, -2), q @ np.diag([3.0, 1.0, 1.0]) @ q.T)
    np.testing.assert_allclose(grad, q[:, 1:] @ q[:, 1:].T / 2, atol=1e-12)
    (grad,) = mutad.gradient(lambda a: np.linalg.norm(a, "nuc"), q @ np.diag([2.0, 1.0, 0.0])
                             @ q.T)
    np.testing.assert_allclose(grad, q[:, :2] @ q[:, :2].T, atol=1e-12)
    _, tangent = mutad.jvp(lambda a: np.linalg.norm(a, 2), (a,), (np.eye(3),))
    assert abs(tangent - 1.0) < 1e-12


def test_repeated_polynomial_roots_are_refused():
    for roots in (np.roots, np.polynomial.polynomial.polyroots,
                  lambda c: np.polynomial.Polynomial(c).roots()):
        p = np.array([1.0, -2.0, 1.0])  # (x - 1)², either order of coefficients
        with pytest.raises(UnsupportedOperationError, match="defective"):
            mutad.gradient(lambda p: np.sum(np.real(roots(p))), p)
        assert np.array_equal(p, [1.0, -2.0, 1.0])
    mutad.check_grads(lambda c: np.sum(np.polynomial.chebyshev.chebroots(c) ** 2),
                      np.array([1.0, -3.0, 2.0, 0.5]))


# ----------------------------------------------------------------------------------------------
# QR of a rank-deficient matrix: R_kk = 0 has a kink, Q's column k is not determined

DEPENDENT = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.3, 0.6, 2.0]])  # column 1 = 2 column 0


@pytest.mark.parametrize("loss", [
    lambda a: np.sum(np.linalg.qr(a)[0] * WEIGHTS[:3, :3]),
    lambda a: np.sum(np.linalg.qr(a)[1] ** 2),
    lambda a: np.sum(scipy.linalg.qr(a, mode="economic")[0] * WEIGHTS[:3, :3]),
], ids=["np Q", "np R", "scipy Q"])
def test_qr_of_a_rank_deficient_matrix_is_refused(loss):
    """np.linalg.qr raised NumPy's 'Singular matrix' here, and huge gradients a rounding away
    (R_kk of 1e-16)."""
    near = DEPENDENT * np.array([1.0, 1.0 + 1e-15, 1.0])  # column 1 off by a few roundings
    assert 0 < abs(np.linalg.qr(near)[1][1, 1]) < 1e-14
    for matrix in (DEPENDENT, near):
        a = matrix.copy()
        with pytest.raises(UnsupportedOperationError, match="rank-deficient"):
            mutad.gradient(loss, a)
        assert np.array_equal(a, matrix)
    with pytest.raises(UnsupportedOperationError, match="rank-deficient"):
        mutad.jvp(lambda a: np.linalg.qr(a)[0], (DEPENDENT,), (np.ones((3, 3)),))
    mutad.check_grads(loss, DEPENDENT + np.diag([0.0, 0.5, 0.0]))


LAST_DEPENDENT = DEPENDENT[:, [0, 2, 1]]  # the dependent column last


@pytest.mark.parametrize("loss", [
    lambda a: np.sum(np.linalg.qr(a)[0] * WEIGHTS[:3, :3]),
    lambda a: np.sum(np.linalg.qr(a, mode="r") ** 2),
    lambda a: np.sum((lambda q, r: r @ q)(*np.linalg.qr(np.stack([a, 2 * a]))) * WEIGHTS[:3, :3]),
    lambda a: np.sum(scipy.linalg.qr(a, pivoting=True)[1] * WEIGHTS[:3, :3]),
    lambda a: np.sum(scipy.linalg.qr(DEPENDENT * a[0, 0], pivoting=True)[0] * WEIGHTS[:3, :3]),
    lambda a: np.sum(scipy.linalg.rq(DEPENDENT + a * 0.1)[0] * WEIGHTS[:3, :3]),
], ids=["np Q", "np R", "stack RQ", "scipy pivoted R", "scipy pivoted Q", "scipy rq"])
def test_qr_of_a_square_matrix_whose_last_column_depends_on_the_others(loss):
    """Regression: refused as rank-deficient (a shifted QR step's A - μI once μ is an
    eigenvalue, a pivoted QR of a singular matrix). Only the last column of a real square
    matrix depending on the others, Q's last column is the unit vector outside the others and
    R's last entry is signed: both have derivatives (LAPACK's last reflector is the identity)."""
    near = LAST_DEPENDENT * np.array([1.0, 1.0, 1.0 + 1e-15])  # a few roundings off
    for matrix in (LAST_DEPENDENT, near):
        assert abs(np.linalg.qr(matrix)[1][2, 2]) < 1e-14
        a = matrix.copy()
        mutad.check_grads(loss, a, rtol=1e-6)
        assert np.array_equal(a, matrix)
