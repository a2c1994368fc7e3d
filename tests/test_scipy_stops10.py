"""SciPy programs that stopped: an ndarray's augmented assignment with a traced sparse matrix
(``x *= A``, which rebinds ``x`` as NumPy's deferral to SciPy's matrix does), the real and
imaginary parts of a traced sparse matrix. Each checked with central differences
(``tests.test_scipy_stops.check``: reverse and forward mode, a replay), its value SciPy's bit
for bit and the caller's arrays unchanged, and replayed a third time."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats

import mutad

from tests.test_replay_budget import replays
from tests.test_scipy_stops8 import check_replayed

X = np.array([0.7, 1.3, 0.4, 0.9, 1.1, 0.2, 0.8, 1.5])
W = np.cos(np.arange(8.0))


def _tridiagonal(kind, p):
    return kind(sp.diags([-0.5 * p[1:], 2.0 + p, -np.ones(7)], [-1, 0, 1], format="csr"))


# ----------------------------------------------------------------------------------------------
# x op= A with an ndarray x and a traced sparse matrix A: NumPy's in-place operator gives way to
# SciPy's matrix (its __array_priority__, no __array_ufunc__), and Python rebinds x to
# A.__rmul__(x) (x @ A of an spmatrix, x.multiply(A) of a sparse array): the array x named
# before is unchanged


def _augmented(kind, traced_x):
    def f(p):
        A = _tridiagonal(kind, p)
        x = (0.5 * p + W) if traced_x else W.copy()
        before = x
        x *= A
        y = x if not sp.issparse(x) else x.toarray()
        x2 = np.outer(W, W) if not traced_x else np.outer(p, W)
        x2 += A
        x2 -= 2.0 * A
        return (np.asarray(y) * W).sum() + np.asarray(x2).sum() + before @ W
    return f


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_array])
@pytest.mark.parametrize("traced_x", [False, True], ids=["plain_x", "traced_x"])
def test_an_ndarrays_augmented_assignment_with_a_traced_sparse_matrix_rebinds_it(kind,
                                                                                  traced_x):
    """Regression: ``x *= A`` (and ``+=``, ``-=``) was refused ("np.multiply of a
    scipy.sparse matrix with traced values ... with out="), for a plain x and a traced one."""
    check_replayed(_augmented(kind, traced_x), X.copy())


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array])
def test_a_traced_arrays_augmented_assignment_with_a_constant_sparse_matrix(kind):
    """A traced x *= B of SciPy's own matrix B (its values constants) gives way to B as an
    ndarray's does: x @ B of an spmatrix, x.multiply(B) of a sparse array."""
    B = kind(np.diag(W) + np.diag(W[1:], 1))

    def f(p):
        x = np.outer(p, W) if kind is sp.csr_array else p * 2.0
        x *= B
        x = x.toarray() if sp.issparse(x) else np.asarray(x)
        return (x * x).sum()

    check_replayed(f, X.copy())


def test_an_augmented_assignment_rebinds_to_the_class_scipy_gives():
    seen = []

    def f(p):
        x = W.copy()
        x *= sp.csr_array(np.diag(p))
        seen.append(x.__class__)
        return x.toarray().sum()

    f(X.copy())
    check_replayed(f, X.copy())
    assert set(seen) == {sp.coo_array}


# ----------------------------------------------------------------------------------------------
# The real and imaginary parts of a traced sparse matrix (np.real(A), A.real, np.imag(A),
# A.imag): of real values, SciPy's A.real is a matrix sharing A's stored values, A.imag the
# zeros of its read-only data.imag in A's pattern


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csc_array, sp.coo_matrix, sp.lil_matrix,
                                  sp.dok_array])
def test_the_real_and_imaginary_parts_of_a_traced_sparse_matrix(kind):
    """Regression: np.real(A), A.real, np.imag(A) and A.imag were refused."""
    seen = []

    def f(p):
        A = kind(np.diag(p) + np.diag(p[1:] ** 2, 1) + np.diag(np.ones(7), -1))
        R, I = np.real(A), np.imag(A)
        seen.append((R.__class__, I.__class__, I.nnz, I.data.flags.writeable))
        return ((R @ W) @ W + A.real.multiply(A).sum() + (np.imag(A.real) @ W).sum()
                + abs(I).sum() + R.power(2).sum())

    f(X.copy())
    check_replayed(f, X.copy())
    assert len(set(seen)) == 1


@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.coo_array, sp.dia_matrix])
def test_the_real_part_shares_the_stored_values(kind):
    """SciPy's A.real holds A's stored values: scaling its data in place scales A's."""
    def f(p):
        A = kind(sp.diags([p, p[1:]], [0, 1]))
        R = A.real
        R.data *= 3.0
        R *= 2.0
        return (A @ W) @ W + R.sum()

    check_replayed(f, X.copy())


@pytest.mark.parametrize("kind", [sp.lil_matrix, sp.lil_array, sp.dok_matrix, sp.dok_array])
def test_numpys_functions_of_a_lil_or_dok_matrix_holding_traced_entries(kind):
    """Regression: NumPy's functions that read the matrix's methods (np.sum(A) reads A.sum,
    np.real(A) A.real, np.transpose(A) A.transpose), called through the mode's wrappers, read
    SciPy's own methods, which summed the placeholders stored for the traced entries: a wrong
    value, and no derivative."""
    def f(p):
        A = kind((8, 8))
        for j in range(8):
            A[j, j] = p[j] ** 2
            A[j, j - 1] = 2.0 * p[j]
        return (np.sum(A) + np.real(A).sum() + (np.transpose(A) @ W) @ W + np.conj(A).sum()
                + np.mean(A) + np.abs(A).sum())

    check_replayed(f, X.copy())


# ----------------------------------------------------------------------------------------------
# The warnings of SciPy's functions mutad calls for the user's code name the user's line, as
# SciPy's own call does (its stacklevel names the function's caller), not mutad's


_CALLS = [
    lambda p: scipy.stats.spearmanr(p, np.ones(5)).statistic,
    lambda p: scipy.stats.pearsonr(np.ones(5), p).statistic,
    lambda p: scipy.stats.spearmanr(np.ones(5), W[:5]).statistic + p[0],  # (of plain values)
]


@pytest.mark.parametrize("call", _CALLS, ids=["spearmanr", "pearsonr", "plain"])
def test_scipys_warning_names_the_users_line(call):
    """Regression: spearmanr's and pearsonr's ConstantInputWarning named a line of mutad's
    (of SciPy's spearmanr called for the user's code, and of mutad's pearsonr); pearsonr's
    was not issued on replayed calls."""
    def f(p):
        return np.nan_to_num(call(p)) + p @ W[:5]

    p = X[:5].copy()
    replayed = mutad.grad(f, replay=True)
    runs = [lambda: f(p), lambda: mutad.gradient(f, p), lambda: mutad.jvp(f, (p,), (W[:5],)),
            lambda: replayed(p), lambda: replayed(p * 1.1), lambda: replayed(p * 0.9)]
    for run in runs:
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            run()
        assert [w.category for w in heard] == [scipy.stats.ConstantInputWarning]
        assert (heard[0].filename, heard[0].lineno) == (__file__, _line_of(call))


def _line_of(call):
    return call.__code__.co_firstlineno


# ----------------------------------------------------------------------------------------------
# Sparse matrices whose pattern the zero values of a dense array choose: SciPy stores a dense
# matrix's entries that are not zero (a dia matrix's diagonals, a bsr matrix's blocks, holding
# one; its blocksize chosen by them), and so does a conversion of a matrix that leaves out its
# zeros. mutad keeps the zero entries (their derivative is there) but tells SciPy's pattern


P_ZEROS = np.array([0.0, 1.5, 0.0, 2.0])  # the superdiagonal all zero
P_FULL = np.array([1.0, 1.5, 0.5, 2.0])
W4 = np.array([0.3, -1.2, 0.7, 2.0])


def _dense(p):
    return np.diag(p) + np.diag(p[:-1] * p[1:], 1) + np.diag(p[:2] * p[2:], -2)


def _explicit(p):  # a stored zero, which SciPy keeps
    return sp.csr_matrix((np.array([p[0], 0.0, p[1]]), np.array([0, 2, 3]),
                          np.array([0, 2, 3, 3, 3])), shape=(4, 4))


_ZERO_PATTERNED = {
    "csr": lambda p: sp.csr_matrix(_dense(p)),
    "csc_array": lambda p: sp.csc_array(_dense(p)),
    "coo": lambda p: sp.coo_matrix(_dense(p)),
    "dia": lambda p: sp.dia_matrix(_dense(p)),
    "dia_array": lambda p: sp.dia_array(_dense(p)),
    "bsr": lambda p: sp.bsr_matrix(_dense(p)),
    "bsr_blocksize": lambda p: sp.bsr_matrix(_dense(p), blocksize=(2, 2)),
    "lil": lambda p: sp.lil_matrix(_dense(p)),
    "dok": lambda p: sp.dok_matrix(_dense(p)),
    "todia": lambda p: sp.csr_matrix(_dense(p)).todia(),
    "tobsr": lambda p: sp.csr_matrix(_dense(p)).tobsr(),
    "asformat_dia": lambda p: sp.coo_array(_dense(p)).asformat("dia"),
    "asformat_bsr": lambda p: sp.csc_matrix(_dense(p)).asformat("bsr"),
    "dia_tobsr": lambda p: sp.dia_matrix(_dense(p)).tobsr(),
    "dia_tocsr": lambda p: sp.dia_matrix(_dense(p)).tocsr(),
    "dia_T": lambda p: sp.dia_matrix(_dense(p)).T,
    "bsr_tocsr": lambda p: sp.bsr_matrix(_dense(p)).tocsr(),
    "diags_bsr": lambda p: sp.diags([p[1:] * p[:-1], p], [1, 0], format="bsr"),
    "diags_csr": lambda p: sp.diags([p[1:] * p[:-1], p], [1, 0], format="csr"),
    "spdiags_bsr": lambda p: sp.spdiags([p * p[0], p], [1, 0], 4, 4, format="bsr"),
    "explicit_todia": lambda p: _explicit(p).todia(),
    "explicit_tobsr": lambda p: _explicit(p).tobsr(),
    "eliminate_zeros": lambda p: (lambda A: (A.eliminate_zeros(), A)[1])(
        sp.csr_matrix(_dense(p))),
}


def _pattern(A):
    told = {"format": A.format, "nnz": A.nnz}
    if A.format == "dia":
        told["offsets"] = np.asarray(A.offsets).tolist()
    if A.format == "bsr":
        told["blocksize"] = A.blocksize
    return told


def _uses(A):
    B = A.tocsr() if A.format in ("lil", "dok") else A
    return ((B @ W4) ** 2).sum() + (A.toarray() ** 3).sum() + (B.power(3) @ W4).sum()


def test_a_bsr_matrix_of_a_dense_array_multiplied_by_itself():
    """Regression: bsr_matrix(dense).multiply(itself).sum() stopped (ValueError: shape too
    large to be a matrix, SciPy's own of a bsr product of blocks larger than 1 x 1): the
    blocksize was that of the values' numbers, not SciPy's (1, 1)."""
    def f(p):
        A = sp.bsr_matrix(_dense(p) + np.diag(np.ones(3), -1))
        return A.multiply(A).sum()

    for point in (P_ZEROS, P_FULL):
        check_replayed(f, point.copy())


@pytest.mark.parametrize("point", [P_ZEROS, P_FULL], ids=["zeros", "full"])
@pytest.mark.parametrize("name", list(_ZERO_PATTERNED))
def test_a_sparse_matrix_tells_the_pattern_its_zero_values_choose(name, point):
    """Regression: dia_matrix(np.diag(p)) had nnz 16 and offsets -3..3 where SciPy's has 4
    and [0], bsr_matrix(np.diag(p)) blocksize (4, 4) where SciPy's is (1, 1): the pattern was
    that of the values' numbers, none zero. Now SciPy's (nnz, offsets, blocksize, the
    matrix), and the derivative of the zero entries kept."""
    make = _ZERO_PATTERNED[name]
    told = {}

    def f(p):
        A = make(p)
        told.update(_pattern(A))
        return _uses(A)

    mutad.gradient(f, point)
    assert told == _pattern(make(point.copy()))
    check_replayed(lambda p: _uses(make(p)), point.copy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["dia", "bsr", "todia", "tobsr", "diags_bsr"])
def test_a_replay_follows_the_zero_pattern_of_each_call(name):
    """A replay recorded where a diagonal (a block) is all zero, called where it is not, and
    the other way round: the values and gradients of the traced calls, bit for bit. SciPy's
    bsr blocksize, which the nonzero values choose, is a guard of the replay, and so are the
    entries the matrix stores (an entrywise product keeps them as SciPy does): each pattern
    records a program of its own, which the later calls of that pattern replay."""
    make = _ZERO_PATTERNED[name]

    def f(p):
        return _uses(make(p))

    for first, second in ((P_ZEROS, P_FULL), (P_FULL, P_ZEROS)):
        replayed = mutad.value_and_grad(f, replay=True)
        for point in (first, second, first, second * 1.01):
            value, grad = replayed(point.copy())
            assert value == f(point.copy())
            np.testing.assert_array_equal(grad, mutad.gradient(f, point.copy())[0])
        assert replays(replayed) == 2 and not replayed.reasons


def test_kron_of_a_dia_matrix_of_a_dense_array_counts_its_nonzero_entries():
    """SciPy's kron multiplies dense blocks where B's coo matrix (its nonzero entries) holds
    at least half of B: of a dia matrix of a dense array, each of whose diagonals holds a
    value that is not zero, the entries are counted, not the diagonals."""
    A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))

    def dense(p):  # seven nonzero entries, one on each diagonal
        d = np.zeros((4, 4))
        d[0, :], d[1:, 0] = p, p[1:] ** 2
        return d

    told = []

    def f(p):
        K = sp.kron(A, sp.dia_matrix(dense(p)))
        told.append((K.format, K.nnz))
        return (K @ np.arange(8.0)).sum()

    check_replayed(f, P_FULL.copy())
    told.clear()
    mutad.gradient(f, P_FULL.copy())
    f(P_FULL.copy())
    assert told[0] == told[1] == ("coo", 21)


def test_reading_the_pattern_chosen_by_zero_values_is_not_replayed():
    """nnz, offsets and blocksize count the values that are zero: a replay, which would keep
    this call's, runs each call traced (its values SciPy's)."""
    def f(p):
        A = sp.dia_matrix(_dense(p))
        return _uses(A) * A.nnz + len(A.offsets)

    replayed = mutad.value_and_grad(f, replay=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for point in (P_ZEROS, P_FULL, P_ZEROS):
            value, grad = replayed(point.copy())
            assert value == f(point.copy())
            np.testing.assert_array_equal(grad, mutad.gradient(f, point.copy())[0])


# ----------------------------------------------------------------------------------------------
# A function returning an np.matrix of one entry (a sparse matrix's sum(axis) @ w): its loss,
# returned as the matrix f returns


def _matrix_loss(p):
    lap = sp.diags([p[1:], -2.0 * p ** 2, np.ones(3)], [-1, 0, 1], format="csr")
    return lap.sum(axis=0) @ W4


def test_a_function_returning_a_one_entry_np_matrix():
    """Regression: f returning lap.sum(axis=0) @ w, a 1 x 1 np.matrix of a sparse matrix's
    sum, was refused ("an np.matrix of traced values converted to a NumPy array"): its one
    entry is the loss, returned as the matrix f returns, traced, replayed and forward."""
    from tests.test_scipy_stops import central
    p = P_FULL.copy()
    plain = _matrix_loss(p.copy())
    expected = central(lambda q: float(np.asarray(_matrix_loss(q))[0, 0]), p)
    value, (grad,) = mutad.value_and_gradient(_matrix_loss, p)
    assert type(value) is np.matrix and value.shape == (1, 1) and value[0, 0] == plain[0, 0]
    np.testing.assert_allclose(grad, expected, rtol=1e-6)
    replayed = mutad.value_and_grad(_matrix_loss, replay=True)
    for point in (p, p * 1.1, p * 0.9):
        before = point.tobytes()
        value, again = replayed(point)
        assert type(value) is np.matrix and value[0, 0] == _matrix_loss(point.copy())[0, 0]
        np.testing.assert_array_equal(again, mutad.gradient(_matrix_loss, point)[0])
        assert point.tobytes() == before
    assert replays(replayed) == 2 and not replayed.reasons
    _, tangent = mutad.jvp(_matrix_loss, (p,), (W4,))
    np.testing.assert_allclose(np.asarray(tangent)[0, 0], expected @ W4, rtol=1e-6)


@pytest.mark.parametrize("scale", [0.0, 1.0], ids=["times_zero", "plain"])
def test_a_sparse_square_root_of_negative_entries_as_the_dense_one(scale):
    """A.sqrt() of negative entries is NaN, as np.sqrt of the dense matrix: mutad's gradient
    is the dense one's, bit for bit (a zero cotangent adds nothing, ``* 0``; else NaN where
    the entry is negative), traced, replayed and forward."""
    def dense(p):
        return np.diag(p) + np.diag(p[1:], 1)

    def sparse(p):
        return sp.csr_matrix(dense(p)).sqrt().sum() * scale

    def plain(p):
        return np.sqrt(dense(p)).sum() * scale

    p = np.array([1.0, -2.0, 0.5, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(mutad.gradient(sparse, p)[0], mutad.gradient(plain, p)[0])
        np.testing.assert_array_equal(mutad.grad(sparse, replay=True)(p),
                                      mutad.gradient(plain, p)[0])
        np.testing.assert_array_equal(mutad.jvp(sparse, (p,), (W4,))[1],
                                      mutad.jvp(plain, (p,), (W4,))[1])


def test_a_cubic_regular_grid_interpolators_derivative_is_its_exact_splines():
    """RegularGridInterpolator(method='cubic') solves for its spline by an iterative solver
    (gcrotmk, to its tolerance): SciPy's value is SciPy's, bit for bit, and the derivative is
    that of the exact spline's (the solution the solver converges to), as a direct solver's
    (solver=spsolve) central differences tell; the iterative solver's own differences are off
    by its tolerance."""
    import scipy.interpolate
    import scipy.sparse.linalg
    grid = np.linspace(0.0, 1.0, 7)

    def interpolated(solver=None):
        def f(y):
            settings = {} if solver is None else {"solver": solver}
            g = scipy.interpolate.RegularGridInterpolator((grid, grid), np.outer(y, y),
                                                          method="cubic", **settings)
            return g([[0.2, 0.1], [0.7, 0.4]]).sum()
        return f

    from tests.test_scipy_stops import central
    y = np.sin(3 * grid) + 0.1
    f, exact = interpolated(), interpolated(scipy.sparse.linalg.spsolve)
    value, (grad,) = mutad.value_and_gradient(f, y.copy())
    assert value == f(y.copy())
    np.testing.assert_allclose(grad, central(exact, y), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(grad, mutad.gradient(exact, y.copy())[0], rtol=1e-9)
