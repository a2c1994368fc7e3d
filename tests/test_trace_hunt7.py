"""Wrong answers found in traced, forward and second-order differentiation at special values,
each checked against NumPy's own run bit for bit; every one failed before its fix."""

import warnings

import numpy as np
import pytest
import scipy.linalg

import mutad

inf, nan = np.inf, np.nan


def bits(v):
    return np.asarray(v).tobytes()


# ----------------------------------------------------------------------------------------------
# np.prod's and np.cumprod's derivatives took the product of the other factors as prod / x (and
# y / x along a cumulative product) wherever no factor was zero: beside an infinity that is
# inf / inf, beside a NaN NaN for every element, and where the product overflows or underflows
# inf / x or 0 / x, where the others' product is finite. They are now taken without dividing
# wherever a product is not finite and normal (exclusive products; cumprod step by step).

def exclusive(x):
    return np.array([np.prod(np.delete(x, k)) for k in range(x.size)])


PRODUCTS = [np.array([inf, -inf, 1.0, 2.0, -1.0]), np.array([nan, 1.0, 2.0, -1.0, 0.5]),
            np.array([1e-200, 1e-200, 1e200, 2.0]), np.array([1e200, 1e200, 1e-200, 0.5]),
            np.array([0.0, inf, 2.0])]


@pytest.mark.parametrize("x", PRODUCTS, ids=str)
@pytest.mark.parametrize("reduce", [np.prod, np.nanprod, np.multiply.reduce])
def test_the_derivatives_of_prod_beside_infinities_nans_and_beyond_the_floats(x, reduce):
    def f(x):
        x *= 1.0  # in place
        return reduce(x)

    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    others = exclusive(x) if reduce is not np.nanprod else np.where(
        np.isnan(x), 0.0, exclusive(np.where(np.isnan(x), 1.0, x)))
    np.testing.assert_array_equal(g, others)
    for k in range(x.size):  # forward mode: the other factors' product, direction by direction
        e = np.zeros_like(x)
        e[k] = 1.0
        _, t = mutad.jvp(f, (x.copy(),), (e,))
        np.testing.assert_array_equal(t, others[k])


@pytest.mark.parametrize("x", [np.array([inf, 2.0, 3.0]), np.array([nan, 2.0, 0.5, 4.0]),
                               np.array([1e200, 1e200, 1e-200, 3.0]),
                               np.array([1e-200, 1e-200, 1e200, 3.0])], ids=str)
def test_the_derivatives_of_cumprod_beside_infinities_nans_and_beyond_the_floats(x):
    w = np.arange(1.0, x.size + 1)

    def f(x):
        x *= 1.0  # in place
        return np.cumprod(x) @ w

    # d y[i] / d x[k] = the product of x[:i + 1] but x[k], taken in NumPy's order
    jac = np.array([[np.prod(np.delete(x[:i + 1], k)) if k <= i else 0.0 for k in range(x.size)]
                    for i in range(x.size)])
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    with np.errstate(invalid="ignore"):
        expected = np.array([np.sum(np.where(jac[:, k] == 0, 0.0, w * jac[:, k]))
                             for k in range(x.size)])
    np.testing.assert_allclose(g, expected, rtol=1e-15)  # sums in another order
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = 1.0
        y, t = mutad.jvp(np.cumprod, (x.copy(),), (e,))
        assert bits(y) == bits(np.cumprod(x))
        np.testing.assert_allclose(t, jac[:, k], rtol=1e-15)


# ----------------------------------------------------------------------------------------------
# Products (matmul, dot, einsum, inner, tensordot, outer, kron, vdot) summed NumPy's products of
# a zero cotangent or tangent with a NaN or an infinity of the other operand, so a NaN in a
# column an output does not read made that output's derivative NaN: the gradient of
# (y @ A)[0] with A[0, 1] NaN was NaN where it is A[:, 0], np.cov's variance of one row beside a
# row with a NaN was NaN, and jvp of x @ x in a direction away from a NaN was NaN. Each term is
# now a product whose zero factor gives zero (as the elementwise rules' are).

A = np.array([[1.0, nan], [2.0, 3.0], [4.0, -inf]])
Y = np.array([1.0, 2.0, 3.0])

FIRST_COLUMN = {
    "matmul": lambda y, a: (y @ a)[0],
    "matmul of the transpose": lambda y, a: (a.T @ y)[0],
    "matmul of matrices": lambda y, a: ((np.eye(3) * y) @ a)[:, 0].sum(),
    "dot": lambda y, a: np.dot(y, a)[0],
    "einsum": lambda y, a: np.einsum("i,ij->j", y, a)[0],
    "inner": lambda y, a: np.inner(a.T, y)[0],
    "tensordot": lambda y, a: np.tensordot(y, a, 1)[0],
    "outer": lambda y, a: np.outer(y, a[0])[:, 0].sum() + y @ a[:, 0] - y.sum(),
    "kron": lambda y, a: np.kron(y, a[0])[::2].sum() + y @ a[:, 0] - y.sum(),
    "stack of matmuls": lambda y, a: (np.stack([y, y]) @ a)[:, 0].sum() / 2.0,
}


@pytest.mark.parametrize("product", FIRST_COLUMN)
def test_a_product_reading_no_nan_has_its_derivative_beside_one(product):
    def f(y):
        y *= 1.0  # in place
        return FIRST_COLUMN[product](y, A)

    caller = Y.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(Y.copy()))
    assert caller.tobytes() == Y.tobytes()
    np.testing.assert_allclose(g, A[:, 0], rtol=1e-15)  # d (y @ A[:, 0]) / dy
    np.testing.assert_allclose(mutad.jacfwd(f)(Y.copy()), A[:, 0], rtol=1e-15)


def test_the_variance_of_a_row_beside_a_row_with_a_nan():
    def f(y):
        return np.cov(np.stack([y, np.array([1.0, nan, 2.0])]))[0, 0]

    (g,) = mutad.gradient(f, Y.copy())
    np.testing.assert_array_equal(g, 2.0 * (Y - Y.mean()) / 2.0)


@pytest.mark.parametrize("product", [lambda x: x @ x, lambda x: np.dot(x, x),
                                     lambda x: np.einsum("i,i", x, x), lambda x: np.vdot(x, x),
                                     lambda x: np.inner(x, x)])
def test_jvp_of_a_product_in_a_direction_away_from_a_nan(product):
    x = np.array([nan, 1.0, 2.0])
    y, t = mutad.jvp(product, (x.copy(),), (np.array([0.0, 1.0, 0.0]),))
    assert bits(y) == bits(product(x.copy()))
    assert t == 2.0  # 2 x[1]
    np.testing.assert_array_equal(mutad.jacfwd(product)(x.copy()), [nan, 2.0, 4.0])


def test_jacfwd_of_a_matrix_product_with_a_nan_in_the_matrix():
    B = np.array([[1.0, 2.0], [nan, 3.0]])
    np.testing.assert_array_equal(mutad.jacfwd(lambda y: B @ y)(np.array([1.0, 2.0])), B)
    np.testing.assert_array_equal(mutad.jacfwd(lambda y: y @ A)(Y.copy()), A.T)


# ----------------------------------------------------------------------------------------------
# scipy.special.logsumexp at an infinite result took e^(a - y) with y taken as 0, e^a: the
# gradient of logsumexp([0, inf, 1]) was [1, inf, e], where it is the softmax's limit, all the
# weight on the infinity ([0, 1, 0]; equal shares b_i / sum b_j among several); a term SciPy
# leaves out (b_i = 0) at a_i = inf had the NaN e^(inf - inf) where it has no weight; and a
# zero tangent of b beside an infinite partial gave jvp NaN.

@pytest.mark.parametrize("a, b, expected", [
    (np.array([0.0, inf, -inf, 1.0]), None, [0.0, 1.0, 0.0, 0.0]),
    (np.array([0.0, inf, inf, 1.0]), np.array([1.0, 2.0, 1.0, 0.5]), [0.0, 2 / 3, 1 / 3, 0.0]),
    (np.array([0.0, -0.0, inf, -inf, 1.0]), np.array([1.0, 2.0, 0.0, 1.0, 0.5]),
     np.array([1.0, 2.0, 0.0, 0.0, 0.5 * np.e]) / (3.0 + 0.5 * np.e)),
])
def test_logsumexp_at_an_infinity(a, b, expected):
    import scipy.special

    def f(a):
        a *= 1.0  # in place
        return scipy.special.logsumexp(a, b=None if b is None else np.array(b))

    caller = a.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(a.copy()))
    assert caller.tobytes() == a.tobytes()
    np.testing.assert_allclose(g, expected, rtol=1e-15)
    for k in range(a.size):
        _, t = mutad.jvp(f, (a.copy(),), (np.eye(a.size)[k],))
        np.testing.assert_allclose(t, expected[k], rtol=1e-15)


# ----------------------------------------------------------------------------------------------
# np.cross's pullback took NumPy's cross products of the cotangent with the other operand: a
# zero component of the cotangent met a NaN there, so the gradient of the z component of
# [1, 0, nan] × b, which reads no NaN, was NaN in b's x and y.

def test_the_gradient_of_a_cross_product_component_beside_a_nan():
    a = np.array([[1.0, 0.0, nan], [1.0, 2.0, 3.0]])

    def f(b):
        b *= 1.0  # in place
        return np.cross(a, b)[:, 2].sum()

    b = np.array([1.0, 2.0, 3.0])
    caller = b.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(b.copy()))
    assert caller.tobytes() == b.tobytes()
    np.testing.assert_array_equal(g, [-a[0, 1] - a[1, 1], a[0, 0] + a[1, 0], 0.0])


def test_jvp_of_solve_with_a_matrix_made_in_f_beside_a_nan():
    # the matrix made in f has a tangent of zeros: its term dA x was 0 * NaN where x is NaN
    def f(x):
        return np.linalg.solve(np.eye(2) * 2.0, np.array([x[1], x[0]]))

    x = np.array([nan, 3.0])
    y, t = mutad.jvp(f, (x.copy(),), (np.array([0.0, 1.0]),))
    assert bits(y) == bits(f(x.copy()))
    np.testing.assert_array_equal(t, mutad.jvp(f, (np.array([1.0, 3.0]),),
                                               (np.array([0.0, 1.0]),))[1])


# ----------------------------------------------------------------------------------------------
# An einsum of three or more operands took NumPy's einsum of the cotangent (or the tangent) with
# the other operands: a zero weight beside W's NaN made the whole contraction NaN, where the
# derivative along x of w W x is w W, finite in every column. And a compiled replay's loop of
# dot products checks a scalar cotangent, or the product, before it calls product_times: the
# same derivative as the traced one.

@pytest.mark.parametrize("infinity", [nan, np.inf])
def test_an_einsum_of_three_operands_beside_a_nan_or_an_infinity(infinity):
    w = np.array([1.0, 0.0])
    m = np.array([[1.0, 2.0, 3.0, 4.0], [infinity, 1.0, 1.0, 1.0]])

    def f(x):
        x *= 1.0  # in place
        return np.einsum("i,ij,j->", w, m, x)

    x = np.array([nan, 1.0, 2.0, 3.0])
    caller = x.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(x.copy()))
    assert caller.tobytes() == x.tobytes()
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0, 4.0])
    for k in range(1, 4):  # the value reads x[0]'s NaN: the tangent, along e_k, does not
        _, t = mutad.jvp(f, (x.copy(),), (np.eye(4)[k],))
        assert t == g[k]


def test_an_einsum_of_three_operands_counts_infinite_terms_of_both_signs():
    # along x: the terms w_i m_ij of column j: inf + 1 (inf), inf - inf (NaN), -inf (-inf),
    # 0 * NaN (zero: finite, the sum of the others)
    w = np.array([1.0, 1.0, 0.0])
    m = np.array([[inf, inf, -inf, 1.0], [1.0, -inf, 1.0, 2.0], [5.0, 5.0, 5.0, nan]])
    g = mutad.gradient(lambda x: np.einsum("i,ij,j->", w, m, x), np.ones(4))[0]
    np.testing.assert_array_equal(g, [inf, nan, -inf, 3.0])


@pytest.mark.parametrize("replay", [False, True])
def test_a_loop_of_dot_products_beside_a_nan_in_a_row_it_weighs_by_zero(replay):
    def f(a, x):
        y = np.zeros(3)
        for i in range(3):
            y[i] = a[i, :] @ x
        return y[0] - y[2] + 0.0 * y[1]

    a = np.arange(1.0, 10.0).reshape(3, 3)
    a[1, 2] = nan
    x = np.array([1.0, 2.0, 3.0])
    gradient = mutad.grad(f, argnums=(0, 1), replay=replay)
    for _ in range(3):  # replay: the recording, the compiled replay, a replay
        caller = a.copy(), x.copy()
        ga, gx = gradient(*caller)
        assert caller[0].tobytes() == a.tobytes() and caller[1].tobytes() == x.tobytes()
        np.testing.assert_array_equal(ga, [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, -2.0, -3.0]])
        np.testing.assert_array_equal(gx, a[0] - a[2])


# ----------------------------------------------------------------------------------------------
# solve's and lstsq's cotangents of A are products of the cotangent with the solution (or the
# right-hand side): a column of b holding a NaN, which the loss does not read, has a zero
# cotangent, and NumPy's products made all of A's cotangent NaN. Its derivative is the one
# without that column.

_SQUARE = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
_TALL = np.array([[4.0, 1.0], [1.0, 3.0], [0.0, 1.0]])
_NAN_COLUMN = np.array([[1.0, nan], [2.0, 1.0], [3.0, 1.0]])


@pytest.mark.parametrize("solver, a", [
    (lambda a, b: np.linalg.solve(a, b)[:, 0].sum(), _SQUARE),
    (lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0][:, 0].sum(), _SQUARE),
    (lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0][:, 0].sum(), _TALL),
    (lambda a, b: np.linalg.lstsq(a, b, rcond=None)[1][0], _TALL),
    (lambda a, b: scipy.linalg.solve(a, b, check_finite=False)[:, 0].sum(), _SQUARE),
    (lambda a, b: scipy.linalg.solve_triangular(a, b, lower=True, check_finite=False)[:, 0].sum(),
     _SQUARE),
    (lambda a, b: scipy.linalg.lu_solve(scipy.linalg.lu_factor(a), b,
                                        check_finite=False)[:, 0].sum(), _SQUARE),
    (lambda a, b: scipy.linalg.cho_solve(scipy.linalg.cho_factor(a), b,
                                         check_finite=False)[:, 0].sum(), _SQUARE),
], ids=["solve", "lstsq", "lstsq tall", "lstsq residual", "scipy solve", "solve_triangular",
        "lu_solve", "cho_solve"])
def test_a_solver_beside_a_column_of_b_holding_a_nan(solver, a):
    def f(a):
        a *= 1.0  # in place
        return solver(a, _NAN_COLUMN)

    caller = a.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(a.copy()))
    assert caller.tobytes() == a.tobytes()
    expected = mutad.gradient(lambda a: solver(a, _NAN_COLUMN[:, :1]), a.copy())[0]
    np.testing.assert_allclose(g, expected, rtol=1e-14, atol=1e-15)
    assert np.isfinite(g).all()
    direction = np.ones_like(a)
    _, t = mutad.jvp(f, (a.copy(),), (direction,))
    np.testing.assert_allclose(t, np.sum(expected * direction), rtol=1e-13)


@pytest.mark.parametrize("solver", [
    lambda a, b: scipy.linalg.solve(a, b, check_finite=False),
    lambda a, b: scipy.linalg.solve_triangular(a, b, lower=True, check_finite=False),
    lambda a, b: scipy.linalg.solve_toeplitz(a[:, 0], b, check_finite=False),
], ids=["scipy solve", "solve_triangular", "solve_toeplitz"])
def test_jvp_of_a_scipy_solver_with_a_matrix_made_in_f_beside_a_nan(solver):
    # the matrix made in f has a tangent of zeros: its term dA x was 0 * NaN where x is NaN
    def f(x):
        return solver(np.eye(2) * 2.0, np.array([x[1], x[0]]))

    x = np.array([nan, 3.0])
    y, t = mutad.jvp(f, (x.copy(),), (np.array([0.0, 1.0]),))
    assert bits(y) == bits(f(x.copy()))
    np.testing.assert_array_equal(t, mutad.jvp(f, (np.array([1.0, 3.0]),),
                                               (np.array([0.0, 1.0]),))[1])


# ----------------------------------------------------------------------------------------------
# inv's and matrix_power's rules took NumPy's products Yᵀ Ȳ Yᵀ and the powers of A: a zero of
# the cotangent (or of the tangent, or of the identity the powers began with) met the NaN of
# diag(NaN, 1), whose inverse and square are finite at [1, 1]; the derivative there is finite.

_DIAGONAL_NAN = np.array([[nan, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("function, gradient", [
    (lambda a: np.linalg.matrix_power(a, 2)[1, 1], [[0.0, 0.0], [0.0, 2.0]]),
    (lambda a: np.linalg.inv(a)[1, 1], [[0.0, 0.0], [nan, -1.0]]),  # Ā[1, 0] = -Y[1, 1] Y[0, 1]
], ids=["matrix_power", "inv"])
def test_inv_and_matrix_power_beside_a_nan_they_do_not_spread(function, gradient):
    def f(a):
        a *= 1.0  # in place
        return function(a)

    a = _DIAGONAL_NAN
    caller = a.copy()
    value, (g,) = mutad.value_and_gradient(f, caller)
    assert bits(value) == bits(f(a.copy()))
    assert caller.tobytes() == a.tobytes()
    np.testing.assert_array_equal(g, gradient)
    _, t = mutad.jvp(f, (a.copy(),), (np.array([[0.0, 0.0], [0.0, 1.0]]),))
    assert t == gradient[1][1]


def test_checking_a_product_for_infinities_warns_of_no_overflow_of_its_own():
    """Regression: whether a (co)tangent product needs its zero-times-infinity mask was checked
    by a dot product of it with itself (or a sum) that overflows for elements past 1e154, and
    NumPy warned of that overflow ("overflow encountered in dot, in the gradient of
    np.multiply"; under ``np.errstate(over="raise")`` it raised) where the program's own
    arithmetic overflows nowhere: traced, forward, and in the lines of a compiled replay."""
    x = np.array([1.0, 2.0, 3.0])
    A = np.array([[1e305, 0.0], [0.0, 2.0]])
    w = np.full(3, 1e200)
    big = np.full((200, 300), 1e300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            assert mutad.gradient(lambda x: (np.ones((2, 3)) * x * w).sum(), x)[0].tolist() \
                == [2e200] * 3
            assert mutad.gradient(lambda x: (big * x[0]).sum(), x)[0][0] == np.sum(big)
            assert mutad.gradient(lambda x: (A @ x[:2]).sum(), x)[0].tolist() == [1e305, 2.0, 0.0]
            y, dy = mutad.jvp(lambda x: A @ x[:2], (x,), (np.ones(3),))
            assert dy.tolist() == [1e305, 2.0]
            g = mutad.grad(lambda x: (A @ x[:2]).sum() + np.dot(x[:2], A[0]), replay=True)
            for k in range(4):
                assert g(x * (k + 1)).tolist() == [2e305, 2.0, 0.0]
