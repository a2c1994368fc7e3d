"""Wrong answers found in traced and forward differentiation of realistic programs, each checked
against NumPy's own run bit for bit; every one failed before its fix."""

import numpy as np
import scipy.integrate
import pytest

import mutad


def bits(v):
    v = np.asarray(v)
    return v.dtype.str, v.shape, v.tobytes()


# ----------------------------------------------------------------------------------------------
# ``.item()`` of an extended-precision element is NumPy's np.longdouble (np.clongdouble), no
# Python number: it was handed back as a plain number, so the derivative through it was lost
# (the gradient of b.sum().item() + a.sum() was 1 where it is 2). ``float()`` of one, which
# is Python's float, was that np.longdouble too: a value of the wrong type, which made the
# loss np.longdouble, and again no derivative.

def _extended_items(a):
    b = a.astype(np.longdouble)
    c = a.astype(np.clongdouble) * (1 + 1j)
    return (b.sum().item() + b[1].item() + b.reshape(2, 1).item(1, 0)
            + c[0].item().real * a[1] + a.sum())


def _float_of_extended(a):
    return float(a.astype(np.longdouble).sum()) * 2 + a[0]


@pytest.mark.parametrize("f, gradient", [(_extended_items, [4.0, 5.0]),
                                         (_float_of_extended, [3.0, 2.0])])
def test_extended_precision_items_and_floats_keep_their_derivative(f, gradient):
    x = np.array([1.0, 2.0])
    caller = x.copy()
    expected = f(x.copy())
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(expected)
    assert caller.tobytes() == x.tobytes()
    assert g.tolist() == gradient
    y, t = mutad.jvp(f, (x.copy(),), (np.array([1.0, 10.0]),))
    assert bits(y) == bits(expected)
    assert t == gradient[0] + 10 * gradient[1]


# ----------------------------------------------------------------------------------------------
# np.vecdot's pullback put the summed axis back into the cotangent even where keepdims=True had
# kept it: the cotangent broadcast against the other operand over one axis too many, and the
# gradient of vecdot(A, A, keepdims=True).sum() was 4 A where it is 2 A. Its axes= (NumPy's
# setting of each operand's summed axis) met the rule's own axis=-1: a TypeError where NumPy
# computes.

VECDOTS = [
    lambda a: (np.vecdot(a, a * 0.5 + 1, keepdims=True) ** 2).sum(),
    lambda a: (np.vecdot(a, a[::-1], axis=0, keepdims=True) ** 2).sum(),
    lambda a: (np.vecdot(a, a[:, ::-1].T, axes=[(1,), (0,), ()]) ** 2).sum(),
    lambda a: (np.vecdot(a, a, axes=[(1,), (1,), (0,)], keepdims=True) ** 2).sum(),
    lambda a: (np.abs(np.vecdot(a * 1j + 1, a, keepdims=True)) ** 2).sum(),
]


@pytest.mark.parametrize("f", VECDOTS)
def test_vecdot_keeping_its_axis_or_placing_it_by_axes(f):
    a = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [2.0, 1.0, 0.5]])
    caller = a.copy()
    value, g = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(a.copy()))
    assert caller.tobytes() == a.tobytes()
    mutad.check_grads(f, a, order=2)


def test_vecdot_keeping_its_axis_gives_twice_the_vector():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (g,) = mutad.gradient(lambda a: np.vecdot(a, a, keepdims=True).sum(), a)
    assert g.tolist() == (2 * a).tolist()


# ----------------------------------------------------------------------------------------------
# np.multiply.reduceat's pullback gathered its terms into zeros made like the cotangent, which
# under forward mode over it (mutad.hessian) carries no tangent where the products of the other
# factors do: an UntracedWriteError where the Hessian is defined.

def _segment_products(a):
    return (np.multiply.reduceat(a, [0, 2, 2, 5]) * [1.0, 2.0, 3.0, 4.0]).sum()


def test_the_hessian_of_segment_products():
    a = np.array([0.5, 2.0, -1.5, 0.75, 3.0, 1.25, -0.5, 2.5])
    caller = a.copy()
    h = np.asarray(mutad.hessian(_segment_products, caller))
    assert caller.tobytes() == a.tobytes()
    expected = np.zeros((8, 8))
    for weight, (start, end) in zip([1.0, 2.0, 3.0, 4.0], [(0, 2), (2, 3), (2, 5), (5, 8)]):
        for i in range(start, end):
            for j in range(start, end):
                if i != j:
                    others = [k for k in range(start, end) if k not in (i, j)]
                    expected[i, j] += weight * np.prod(a[others])
    np.testing.assert_allclose(h, expected, rtol=1e-14, atol=1e-14)
    mutad.check_grads(_segment_products, a, order=2)


# ----------------------------------------------------------------------------------------------
# np.matvec's and np.vecmat's rules took no settings: NumPy's axes=, dtype=, casting=, order=
# raised a TypeError where NumPy computes (and np.matmul refused axes=). The value is NumPy's with
# them; axes= has the cotangents taken with the core dimensions last, and put back.

A3 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [2.0, 1.0, 0.5]])
WEIGHTS = np.arange(1.0, 10.0).reshape(3, 3)

PRODUCTS_WITH_SETTINGS = [
    lambda a: (np.matvec(a, a[1], axes=[(1, 0), (0,), (0,)]) ** 2 * WEIGHTS[0]).sum(),
    lambda a: (np.matvec(np.stack([a, a * 2]), a[0], axes=[(2, 1), 0, 0]) ** 2).sum(),
    lambda a: (np.vecmat(a[0] + 1j * a[1], a, axes=[0, (1, 0), 0]).real ** 2 * WEIGHTS[1]).sum(),
    lambda a: (np.matvec(a, a[1], dtype=np.float64, casting="same_kind") ** 2).sum(),
    lambda a: (np.vecmat(a[2], a, order="F") ** 2 * WEIGHTS[2]).sum(),
    lambda a: (np.matmul(a, a[::-1], axes=[(-1, -2), (-2, -1), (-2, -1)]) ** 2 * WEIGHTS).sum(),
    lambda a: (np.matmul(a, a[0], axes=[(0, 1), (0,), (0,)]) ** 2 * WEIGHTS[0]).sum(),
]


@pytest.mark.parametrize("f", PRODUCTS_WITH_SETTINGS)
def test_matrix_vector_products_with_numpys_settings(f):
    caller = A3.copy()
    value, g = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(A3.copy()))
    assert caller.tobytes() == A3.tobytes()
    mutad.check_grads(f, A3, order=2)


# ----------------------------------------------------------------------------------------------
# solve_ivp's forward mode through the solver's own steps took the first stage's Jacobian-vector
# product at y0 itself, a view of the array the right-hand side reads from its closure
# (y0 = x[:2] beside x[2] in f): jvp took them for one buffer and added the closure's tangent to
# the state's, so the tangent along y0 was off (0.27242 for e^-1.3 = 0.27253).

def _decay_closing_over_its_start(x):
    sol = scipy.integrate.solve_ivp(lambda t, y: -x[2] * y + 0.5 * x[0], (0.0, 1.0), x[:2],
                                    rtol=1e-10, atol=1e-12)
    return sol.y[0, -1] + 2.0 * sol.y[1, -1]


def test_solve_ivp_forward_mode_with_y0_viewing_a_closure_array():
    x = np.array([1.0, 0.5, 1.3])
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(_decay_closing_over_its_start, caller)
    assert bits(value) == bits(_decay_closing_over_its_start(x.copy()))
    assert caller.tobytes() == x.tobytes()
    for direction in np.eye(3):
        y, t = mutad.jvp(_decay_closing_over_its_start, (x.copy(),), (direction,))
        assert bits(y) == bits(value)
        np.testing.assert_allclose(t, g @ direction, rtol=1e-9)
    decay = np.exp(-1.3)  # d y_i(1) / d y_i(0)
    np.testing.assert_allclose(g[:2], [decay + 1.5 * (1 - decay) / 1.3, 2 * decay], rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# SciPy's solvers differentiate the function they call with respect to the arrays it reads (in
# args= or its closure). Two of them sharing memory (x and its view a = x[1:], both read) are
# one buffer to those differentiations, which gave each of them the derivative of both: the
# derivative along x[2] twice over (solve_ivp's -3.22 where it is -1.61, quad's 0.545 for
# 0.2725). Such an array is handed to them as a copy of its own.

def _decay_reading_a_view(x):
    a = x[1:]
    sol = scipy.integrate.solve_ivp(lambda t, y: -a[1] * y + 0.5 * x[0] + 0.1 * x[2],
                                    (0.0, 1.0), np.array([1.0, 2.0]), rtol=1e-10, atol=1e-12)
    return sol.y[0, -1] + 2.0 * sol.y[1, -1]


def _integral_reading_a_view(x):
    a = x[1:]
    return scipy.integrate.quad(lambda t: np.exp(-a[1] * t) * x[2] + x[0], 0.0, 1.0,
                                epsabs=1e-13, epsrel=1e-13)[0]


@pytest.mark.parametrize("f", [_decay_reading_a_view, _integral_reading_a_view])
def test_scipy_solvers_of_functions_reading_an_array_and_its_view(f):
    x = np.array([1.0, 0.5, 1.3])
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    h = 1e-6
    numeric = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-9)
    for direction in np.eye(3):
        np.testing.assert_allclose(mutad.jvp(f, (x.copy(),), (direction,))[1], g @ direction,
                                   rtol=1e-9, atol=1e-12)
