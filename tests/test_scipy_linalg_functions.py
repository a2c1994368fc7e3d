"""scipy.linalg's matrix functions written on expm (cosm, sinm, tanm, coshm, sinhm, tanhm),
expm of complex matrices, fractional_matrix_power, orth, null_space, pinvh and hessenberg, by
SciPy's names and mutad.scipy.linalg's.

Each is checked by mutad.check_grads (finite differences, both policies, second order, the
caller's arrays restored) and mutad.check_jvp, its value against SciPy's own bit for bit, and a
replayed gradient against the traced one; what has no derivative is refused by name.
"""

import numpy as np
import pytest
import scipy.linalg

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import linalg

POLICIES = ("restore", "checkpoint")


def _rng():
    return np.random.default_rng(11)


SMALL = 0.4 * _rng().standard_normal((4, 4))
COMPLEX = SMALL + 0.3j * _rng().standard_normal((4, 4))[::-1]
_B = _rng().standard_normal((5, 3))
SPD = _B @ _B.T + np.eye(5)
TALL = _rng().standard_normal((5, 3))
WIDE = _rng().standard_normal((3, 4))
LEFT, RIGHT = _rng().standard_normal((5, 2)), _rng().standard_normal((2, 3))[::-1].copy()
LEFT4, RIGHT4 = _rng().standard_normal((4, 3)), _rng().standard_normal((3, 4))[::-1].copy()
GENERAL = _rng().standard_normal((5, 5)) + 3 * np.eye(5)


def _projector(q):
    """Q Qᵀ: free of the signs SVD gives the columns of a rank-deficient matrix, which rounding
    decides (the dropped singular values are rounding errors there)."""
    return q @ q.T


def _hermitian_projector(q):
    """Q Qᴴ: free of the phases of a complex matrix's singular vectors, which are arbitrary."""
    return q @ q.conj().T


FIRST_ORDER = {"orth complex", "orth complex, moduli", "null_space complex",
               "null_space complex tall"}
"""Forms whose second derivatives are refused: the SVD's of a complex matrix."""


def _symmetric(f):
    """``f`` of the symmetric part of its argument: finite differences along the symmetric
    directions whose derivative a one-triangle function's gradient gives."""
    return lambda a, *rest: f((a + a.T) / 2, *rest)


def _outputs(y):
    return y if isinstance(y, tuple) else (y,)


# name: (f, arguments)
FORMS = {
    "cosm": (scipy.linalg.cosm, (SMALL,)),
    "sinm": (scipy.linalg.sinm, (SMALL,)),
    "tanm": (scipy.linalg.tanm, (SMALL,)),
    "coshm": (scipy.linalg.coshm, (SMALL,)),
    "sinhm": (scipy.linalg.sinhm, (SMALL,)),
    "tanhm": (scipy.linalg.tanhm, (SMALL,)),
    "mutad cosm": (linalg.cosm, (SMALL,)),
    "mutad tanhm": (linalg.tanhm, (SMALL,)),
    "cosm stack": (scipy.linalg.cosm, (np.stack([SMALL, SMALL.T]),)),
    "expm complex": (scipy.linalg.expm, (COMPLEX,)),
    "cosm complex": (scipy.linalg.cosm, (COMPLEX,)),
    "sinm complex": (scipy.linalg.sinm, (COMPLEX,)),
    "tanm complex": (scipy.linalg.tanm, (COMPLEX,)),
    "coshm complex": (scipy.linalg.coshm, (COMPLEX,)),
    "sinhm complex": (scipy.linalg.sinhm, (COMPLEX,)),
    "tanhm complex": (scipy.linalg.tanhm, (COMPLEX,)),
    "expm of i A, real part": (lambda a: scipy.linalg.expm(1j * a).real, (SMALL,)),
    "fractional_matrix_power 1/2": (lambda a: scipy.linalg.fractional_matrix_power(a, 0.5),
                                    (SPD,)),
    "fractional_matrix_power -1.5": (lambda a: scipy.linalg.fractional_matrix_power(a, -1.5),
                                     (SPD,)),
    "fractional_matrix_power 3": (lambda a: scipy.linalg.fractional_matrix_power(a, 3), (SPD,)),
    "fractional_matrix_power nonsymmetric": (
        lambda a: scipy.linalg.fractional_matrix_power(a, 0.3), (GENERAL @ GENERAL.T + GENERAL,)),
    "mutad fractional_matrix_power": (lambda a: linalg.fractional_matrix_power(a, 1 / 3),
                                      (SPD,)),
    "fractional_matrix_power of complex eigenvalues": (
        lambda a: scipy.linalg.fractional_matrix_power(a, 0.5), (GENERAL,)),
    "fractional_matrix_power complex": (lambda a: scipy.linalg.fractional_matrix_power(a, 0.3),
                                        (COMPLEX + 2 * np.eye(4),)),
    "fractional_matrix_power 2 of negative eigenvalues": (
        lambda a: scipy.linalg.fractional_matrix_power(a, 2), (-SPD,)),
    "orth": (scipy.linalg.orth, (TALL,)),
    "orth wide": (scipy.linalg.orth, (TALL.T,)),
    "orth rank deficient": (lambda b, c: _projector(scipy.linalg.orth(b @ c)), (LEFT, RIGHT)),
    "orth rcond": (lambda a: scipy.linalg.orth(a, rcond=1e-3), (TALL,)),
    "mutad orth": (linalg.orth, (TALL,)),
    "null_space wide": (scipy.linalg.null_space, (WIDE,)),
    "null_space tall": (lambda b, c: _projector(scipy.linalg.null_space(b @ c)), (LEFT, RIGHT)),
    "null_space square": (lambda b, c: _projector(scipy.linalg.null_space(b @ c)),
                          (LEFT4, RIGHT4)),
    "null_space empty": (scipy.linalg.null_space, (TALL,)),
    "orth complex": (lambda a: _hermitian_projector(scipy.linalg.orth(a)), (COMPLEX[:, :3],)),
    "orth complex, moduli": (lambda a: np.abs(scipy.linalg.orth(a)) ** 2, (COMPLEX[:3],)),
    "null_space complex": (lambda a: _hermitian_projector(scipy.linalg.null_space(a)),
                           (COMPLEX[:3],)),
    "null_space complex tall": (lambda b, c: _hermitian_projector(scipy.linalg.null_space(
        b @ c)), (COMPLEX[:, :2], COMPLEX[:2, :3] + 1j)),
    "mutad null_space": (linalg.null_space, (WIDE,)),
    "pinvh": (_symmetric(scipy.linalg.pinvh), (SPD,)),
    "pinvh upper": (_symmetric(lambda a: scipy.linalg.pinvh(a, lower=False)), (SPD,)),
    "pinvh return_rank": (_symmetric(lambda a: scipy.linalg.pinvh(a, return_rank=True)[0]),
                          (SPD,)),
    "pinvh rank deficient": (lambda b: scipy.linalg.pinvh(b @ b.T), (TALL,)),
    "mutad pinvh": (_symmetric(linalg.pinvh), (SPD,)),
    "pinvh Hermitian": (lambda a: scipy.linalg.pinvh((a + a.conj().T) / 2),
                        (COMPLEX @ COMPLEX.conj().T + np.eye(4),)),
    "pinvh Hermitian rank deficient": (lambda b: scipy.linalg.pinvh(b @ b.conj().T),
                                       (COMPLEX[:, :2],)),
    "hessenberg": (scipy.linalg.hessenberg, (GENERAL,)),
    "hessenberg calc_q": (lambda a: scipy.linalg.hessenberg(a, calc_q=True), (GENERAL,)),
    "hessenberg symmetric": (_symmetric(scipy.linalg.hessenberg), (SPD,)),
    "hessenberg 2 x 2": (lambda a: scipy.linalg.hessenberg(a, calc_q=True)[0], (SMALL[:2, :2],)),
    "mutad hessenberg": (lambda a: linalg.hessenberg(a, True), (GENERAL[:4, :4],)),
    "hessenberg complex": (lambda a: scipy.linalg.hessenberg(a, calc_q=True), (COMPLEX,)),
}


@pytest.mark.parametrize("form", FORMS)
def test_rules(form):
    f, args = FORMS[form]
    copies = [a.copy() for a in args]
    y, _ = mutad.pullback(f, *copies)
    for ours, expected in zip(_outputs(y), _outputs(f(*args)), strict=True):
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        assert ours.tobytes() == expected.tobytes()  # SciPy's values, bit for bit
    for policy in POLICIES:
        mutad.check_grads(f, *copies, policy=policy)
    mutad.check_jvp(f, *copies)
    for a, original in zip(copies, args, strict=True):
        assert a.tobytes() == original.tobytes()


@pytest.mark.slow  # second order: the first-order checks above stay fast
@pytest.mark.parametrize("form", FORMS)
def test_second_order(form):
    f, args = FORMS[form]
    if form in FIRST_ORDER:
        with pytest.raises(UnsupportedOperationError, match="nested differentiation"):
            mutad.check_grads(f, *[a.copy() for a in args], order=2)
        return
    mutad.check_grads(f, *[a.copy() for a in args], order=2)


@pytest.mark.parametrize("name", ["cosm", "tanhm", "fractional_matrix_power 1/2", "orth",
                                  "null_space wide", "pinvh", "tanm complex",
                                  "hessenberg calc_q"])
def test_replay(name):
    f, args = FORMS[name]

    def loss(*xs):
        return sum(np.sum(np.abs(y) ** 2) for y in _outputs(f(*xs)))

    replayed = mutad.grad(loss, argnums=tuple(range(len(args))), replay=True)
    for k in range(3):
        xs = [a * (1.0 + 0.05 * k) for a in args]
        traced = mutad.gradient(loss, *[x.copy() for x in xs])
        for ours, expected in zip(replayed(*[x.copy() for x in xs]), traced, strict=True):
            assert ours.tobytes() == expected.tobytes()


def test_plain_calls_are_scipys_own():
    for name in ("cosm", "sinm", "tanm", "coshm", "sinhm", "tanhm", "orth", "null_space",
                 "pinvh"):
        assert getattr(linalg, name)(SPD).tobytes() == getattr(scipy.linalg, name)(SPD).tobytes()
    assert (linalg.fractional_matrix_power(SPD, 0.5).tobytes()
            == scipy.linalg.fractional_matrix_power(SPD, 0.5).tobytes())


def test_null_space_of_one_dimension_is_the_pseudo_inverse_formula():
    """q ⊥ the rows of a wide A of full rank: dq = -A⁺ dA q (dq stays orthogonal to q)."""
    a = WIDE.copy()
    q = scipy.linalg.null_space(WIDE)[:, 0]
    direction = _rng().standard_normal(WIDE.shape)
    _, dq = mutad.jvp(scipy.linalg.null_space, (a,), (direction,))
    np.testing.assert_allclose(dq[:, 0], -np.linalg.pinv(WIDE) @ direction @ q, atol=1e-12)


REFUSED = {
    "orth of repeated singular values": lambda a: scipy.linalg.orth(np.eye(4) + 0.0 * a),
    "null_space of two dimensions": lambda a: scipy.linalg.null_space(a[:2]),
    "pinvh of a matrix that is not symmetric": lambda a: scipy.linalg.pinvh(a),
    "pinvh of a complex matrix that is not Hermitian": lambda a: np.abs(scipy.linalg.pinvh(
        a + 1j * np.eye(4))),
    "orth stacked": lambda a: scipy.linalg.orth(np.stack([a, a])),
    "hessenberg of a Hessenberg matrix": lambda a: scipy.linalg.hessenberg(np.triu(a, -1)),
    "hessenberg stacked": lambda a: scipy.linalg.hessenberg(np.stack([a, a])),
    "fractional_matrix_power of a negative eigenvalue": lambda a: np.abs(
        scipy.linalg.fractional_matrix_power(a - 10 * np.eye(4), 0.5)),
}


@pytest.mark.parametrize("form", REFUSED)
def test_refused(form):
    a = GENERAL[:4, :4].copy()
    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(lambda a: np.sum(REFUSED[form](a)), a)
    assert a.tobytes() == GENERAL[:4, :4].tobytes()


def test_null_space_of_two_dimensions_has_a_value_without_a_gradient_reaching_it():
    a = WIDE[:2].copy()
    (g,) = mutad.gradient(lambda a: np.sum(a ** 2) + 0.0 * np.sum(
        mutad.stop_gradient(scipy.linalg.null_space(a))), a)
    assert np.array_equal(g, 2 * WIDE[:2])
    with pytest.raises(UnsupportedOperationError, match="2 dimensions"):
        mutad.jvp(scipy.linalg.null_space, (a,), (np.ones_like(a),))


def test_fractional_matrix_power_refuses_a_differentiated_power():
    with pytest.raises(UnsupportedOperationError, match="power t"):
        mutad.gradient(lambda t: np.sum(scipy.linalg.fractional_matrix_power(SPD, t)), 0.5)


@pytest.mark.parametrize("f", [lambda a: scipy.linalg.orth(a).real,
                               lambda a: scipy.linalg.null_space(a[:3]).imag])
def test_a_loss_reading_the_phases_of_complex_columns_is_refused(f):
    with pytest.raises(UnsupportedOperationError, match="phases"):
        mutad.gradient(lambda a: np.sum(f(a)), COMPLEX.copy())


def test_hessenberg_of_a_real_matrix_in_a_complex_array_is_refused():
    """Its last subdiagonal entry is real: LAPACK's last reflector of a complex matrix (of one
    entry, making that entry real) is skipped there and taken nearby."""
    with pytest.raises(UnsupportedOperationError, match="already zero"):
        mutad.gradient(lambda a: np.sum(np.abs(scipy.linalg.hessenberg(a)) ** 2),
                       GENERAL.astype(complex))


def test_expm_of_a_float16_matrix_has_the_gradient_of_scipys_float32_values():
    """SciPy computes expm of float16 in float32; the gradient's Fréchet derivative was
    computed in float16, where it overflowed (SciPy's lu_factor then raised on infinities)."""
    a = np.array([[0.3, -1.2, 2.0], [0.5, 0.1, -0.4], [1.5, 0.2, 0.7]])
    w = np.arange(9.0).reshape(3, 3)
    f = lambda m: np.sum(scipy.linalg.expm(m) * w)  # noqa: E731
    a16 = a.astype(np.float16)
    before = a16.tobytes()
    value, grad = mutad.value_and_grad(f)(a16)
    assert value == f(a16.copy()) and a16.tobytes() == before and grad.dtype == np.float16
    expected = mutad.grad(f)(a16.astype(np.float64))
    np.testing.assert_allclose(grad, expected, rtol=2e-3, atol=2e-3)
