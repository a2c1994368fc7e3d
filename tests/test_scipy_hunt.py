"""Wrong answers found by a differential hunt over SciPy's calls (``overwrite_*`` flags of
scipy.linalg on layouts and dtypes, scipy.sparse in place, ndimage/signal outputs, special
functions at branch points, fft, interpolate, optimize inside f), in traced, forward and
second-order differentiation, each against SciPy's own call on a copy and finite differences;
each failed before its fix. A seeded hunt over the same calls runs at the end."""

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse
import pytest

import mutad
from mutad.testing import directional_fd


def _directional(grads, directions):
    return sum(np.sum(g * v) for g, v in zip(grads, directions, strict=True))


# ----------------------------------------------------------------------------------------------
# ``solve(a, b, overwrite_a=True, overwrite_b=True)`` of Fortran-ordered traced ``a`` and
# contiguous ``b``: SciPy's workspace in ``a`` was computed by calling SciPy again on a copy of
# ``a`` but on ``b``'s own memory, which SciPy overwrote with x: the caller's ``b`` came back
# changed and the gradient was wrong. Every array of that call is a copy now


@pytest.mark.parametrize("assume_a", ["gen", "pos"])
def test_workspace_of_one_overwritten_array_leaves_the_others_as_they_were(assume_a):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((3, 3))
    a0, b0 = np.asfortranarray(m @ m.T + 3 * np.eye(3)), rng.standard_normal(3)

    def f(a, b):
        x = scipy.linalg.solve(a, b, overwrite_a=True, overwrite_b=True, assume_a=assume_a)
        return np.sum(1.5 * x)

    a, b = a0.copy(order="F"), b0.copy()
    value, grads = mutad.value_and_gradient(f, a, b)
    assert a.tobytes() == a0.tobytes() and b.tobytes() == b0.tobytes()
    assert value == f(a0.copy(order="F"), b0.copy())
    va, vb = rng.standard_normal((3, 3)), rng.standard_normal(3)
    va = va + va.T
    expected = directional_fd(f, (a0, b0), (va, vb), step=1e-5)
    assert np.isclose(_directional(grads, (va, vb)), expected, rtol=1e-6, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# ``A[i, j] = v`` of a csr/csc matrix with traced values, where the write adds a stored entry:
# SciPy warns (SparseEfficiencyWarning); mutad's write of the pattern silenced SciPy's warning


def _outcome(f, *args):
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        y = f(*args)
    return y, [(w.category, str(w.message)) for w in issued]


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr"])
def test_a_write_that_changes_a_sparse_pattern_warns_as_scipy_does(fmt):
    pattern = scipy.sparse.csr_matrix(np.array([[1.0, 0, 0], [0, 2.0, 0], [3.0, 0, 4.0]]))

    def f(x):
        a = pattern.asformat(fmt) * x[0]
        a = a.tocsc() if fmt == "csc" else a.tocsr()
        a[0, 2] = x[1]
        a[1, 1] = x[2]
        return np.sum(a @ x)

    x = np.array([0.5, -1.5, 2.0])
    expected, warned = _outcome(f, x.copy())
    assert warned and all(category is scipy.sparse.SparseEfficiencyWarning
                          for category, _ in warned)
    (value, grad), issued = _outcome(lambda x: mutad.value_and_gradient(f, x), x)
    assert value == expected and issued == warned
    dx = np.array([0.3, -0.2, 0.7])
    assert np.isclose(np.sum(grad * dx), directional_fd(f, (x,), (dx,)), rtol=1e-8)


def test_a_replay_of_a_write_that_changes_a_sparse_pattern_warns_as_scipy_does():
    pattern = scipy.sparse.csr_matrix(np.array([[1.0, 0, 0], [0, 2.0, 0], [3.0, 0, 4.0]]))

    def f(x):
        a = pattern * x[0]
        a[0, 2] = x[1]
        return np.sum(a @ x)

    replaying = mutad.value_and_grad(f, replay=True)
    for k in range(3):
        x = np.arange(3.0) + k
        (value, _), issued = _outcome(replaying, x)
        expected, warned = _outcome(f, x.copy())
        assert value == expected and issued == warned


# ----------------------------------------------------------------------------------------------
# csr_matrix((data, indices, indptr)) of a traced ``data`` longer than ``indptr[-1]``: SciPy
# stores its first nnz values, a view of ``data`` (a copy only where that is less than half of
# it), so ``A.data *= c`` writes into ``data``; mutad stored a copy, and ``data`` read after it
# had its old values. And SciPy's in-place changes of the pattern (sort_indices,
# sum_duplicates, eliminate_zeros) change the index arrays it keeps, and eliminate_zeros the
# kept values too: mutad left the caller's arrays as they were; refused now


@pytest.mark.parametrize("kind", ["csr_matrix", "csc_matrix", "csr_array"])
@pytest.mark.parametrize("indptr", [[0, 1, 2, 3], [0, 1, 1, 2], [0, 2, 3, 5]])
def test_values_stored_as_a_view_of_the_first_entries_of_a_longer_array(kind, indptr):
    indices, indptr = np.array([0, 1, 0, 0, 2]), np.array(indptr)

    def f(d, x):
        a = getattr(scipy.sparse, kind)((d, indices, indptr), shape=(3, 3))
        a.data *= x[0]
        return np.sum(d * x[1]) + np.sum(a @ x)

    d, x = np.arange(1.0, 6.0), np.array([0.5, -1.0, 2.0])
    value, grads = mutad.value_and_gradient(f, d, x)
    assert value == f(d.copy(), x.copy()) and d.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    dd, dx = np.array([0.3, -0.1, 0.2, 0.5, -0.4]), np.array([0.2, 0.7, -0.3])
    expected = directional_fd(f, (d, x), (dd, dx))
    assert np.isclose(_directional(grads, (dd, dx)), expected, rtol=1e-8)
    assert np.isclose(mutad.jvp(f, (d, x), (dd, dx))[1], expected, rtol=1e-8)


@pytest.mark.parametrize("change", ["sort_indices", "sum_duplicates", "eliminate_zeros"])
def test_changes_of_a_pattern_kept_in_the_callers_arrays_are_refused(change):
    indices = np.array([2, 0, 1, 2, 0], np.int32)
    indptr = np.array([0, 2, 3, 5], np.int32)

    def f(d):
        a = scipy.sparse.csr_matrix((d, indices, indptr), shape=(3, 3))
        a.data *= np.array([1.0, 0.0, 1.0, 1.0, 1.0])
        getattr(a, change)()
        return np.sum(a @ np.arange(3.0)) + np.sum(d)

    d = np.arange(1.0, 6.0)
    before = indices.copy(), indptr.copy(), d.copy()
    with pytest.raises(mutad.MutadError, match=f"{change}.*keeps the arrays"):
        mutad.gradient(f, d)
    assert all(x.tobytes() == y.tobytes() for x, y in zip((indices, indptr, d), before))
    f(d.copy())  # (SciPy's changes the caller's index arrays)
    assert indices.tobytes() != before[0].tobytes()


def test_eliminate_zeros_of_values_kept_in_the_callers_array_is_refused():
    indices, indptr = np.array([0, 2, 1, 0, 2]), np.array([0, 2, 3, 5])

    def f(d):
        a = scipy.sparse.csr_matrix((d, indices, indptr), shape=(3, 3))
        a.data *= np.array([1.0, 0.0, 1.0, 1.0, 0.0])
        a.eliminate_zeros()
        return np.sum(a @ np.arange(3.0)) + np.sum(d)

    with pytest.raises(mutad.MutadError, match="eliminate_zeros"):
        mutad.gradient(f, np.arange(1.0, 6.0))

    def g(d):  # no zeros: nothing moves, nothing is refused
        a = scipy.sparse.csr_matrix((d, indices, indptr), shape=(3, 3))
        a.eliminate_zeros()
        return np.sum(a @ np.ones(3)) + np.sum(d)

    assert mutad.gradient(g, np.arange(1.0, 6.0))[0].tolist() == [2.0] * 5


def test_a_write_into_a_zero_of_a_dense_matrix_warns_as_scipy_does():
    def f(x):
        a = scipy.sparse.csr_matrix(np.diag(x + 2.0))
        a[0, 2] = x[1]
        return np.sum(a @ x)

    x = np.array([0.5, -1.5, 2.0])
    expected, warned = _outcome(f, x.copy())
    assert warned
    (value, _), issued = _outcome(lambda x: mutad.value_and_gradient(f, x), x)
    assert value == expected and issued == warned


# ----------------------------------------------------------------------------------------------
# The hunt, on a fixed seed: programs drawn from SciPy's calls above (overwrite flags on each
# layout, sparse matrices sharing their arrays, special functions), each checked for SciPy's
# value bit for bit, the caller's arrays bit for bit, and its gradient against finite
# differences (a MutadError is an answer too, if it leaves the caller's arrays as they were)


def _layout(x, how):
    if how == "F":
        return np.asfortranarray(x)
    if how == "view":
        padded = np.zeros((x.shape[0] + 1,) + x.shape[1:])
        padded[1:] = x
        return padded[1:]
    return np.ascontiguousarray(x)


_LINALG = {
    "solve": lambda a, b, oa, ob: scipy.linalg.solve(a, b, overwrite_a=oa, overwrite_b=ob),
    "solve_pos": lambda a, b, oa, ob: scipy.linalg.solve(a, b, overwrite_a=oa, overwrite_b=ob,
                                                         assume_a="pos"),
    "lu_solve": lambda a, b, oa, ob: scipy.linalg.lu_solve(
        scipy.linalg.lu_factor(a, overwrite_a=oa), b, overwrite_b=ob),
    "cho_solve": lambda a, b, oa, ob: scipy.linalg.cho_solve(
        scipy.linalg.cho_factor(a, overwrite_a=oa), b, overwrite_b=ob),
    "solve_triangular": lambda a, b, oa, ob: scipy.linalg.solve_triangular(
        np.triu(a), b, overwrite_b=ob),
    "lstsq": lambda a, b, oa, ob: scipy.linalg.lstsq(a, b, overwrite_a=oa, overwrite_b=ob)[0],
    "inv": lambda a, b, oa, ob: scipy.linalg.inv(a, overwrite_a=oa) @ b,
    "det": lambda a, b, oa, ob: scipy.linalg.det(a, overwrite_a=oa) * b,
}


def _linalg_program(rng):
    name = rng.choice(sorted(_LINALG))
    la, lb = rng.choice(["C", "F", "view"], 2)
    oa, ob, direct = (bool(v) for v in rng.integers(0, 2, 3))
    call = _LINALG[name]

    def f(a, b):
        if not direct:
            a, b = _layout(a.copy(), la), _layout(b.copy(), lb)
        return np.sum(np.arange(1.0, 4.0) * call(a, b, oa, ob))

    m = rng.standard_normal((3, 3))
    a, b = m @ m.T + 3 * np.eye(3), rng.standard_normal(3)
    if direct:
        a, b = _layout(a, la), _layout(b, lb)
    return f"{name}({la}, {lb}, {oa}, {ob}, direct={direct})", f, (a, b), True


def _sparse_program(rng):
    kind = rng.choice(["csr_matrix", "csc_matrix", "csr_array", "bsr_matrix"])
    indptr = np.array(rng.choice([[0, 2, 3, 5], [0, 1, 2, 3], [0, 1, 1, 2]]))
    indices = np.array([0, 2, 1, 0, 2], rng.choice([np.int32, np.int64]))
    step = rng.choice(["data", "setitem", "sum_duplicates", "eliminate_zeros", "tocoo"])

    def f(d, x):
        a = getattr(scipy.sparse, kind)((d, indices.copy(), indptr.copy()), shape=(3, 3))
        if step == "data":
            a.data *= x[0]
        elif step == "setitem" and kind != "bsr_matrix":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scipy.sparse.SparseEfficiencyWarning)
                a[1, 2] = x[1]
        elif step == "sum_duplicates":
            a.sum_duplicates()
        elif step == "eliminate_zeros":
            a.data *= (np.arange(a.data.size) % 2).reshape(a.data.shape)
            a.eliminate_zeros()
        else:
            a = a.tocoo()
        return np.sum(d * x[2]) + np.sum(a @ x)

    return f"{kind}({indptr.tolist()}, {indices.dtype}).{step}", f, (
        rng.standard_normal(5), rng.standard_normal(3)), True


_SPECIAL = {
    "gammaln": lambda x: scipy.special.gammaln(x * 3.0),
    "xlogy": lambda x: scipy.special.xlogy(x, x * x + 1.0),
    "logsumexp": lambda x: np.prod(scipy.special.logsumexp(x, b=np.cos(x) + 0.5,
                                                          return_sign=True)),
    "erfcx": lambda x: scipy.special.erfcx(x * 20.0),
    "expit": lambda x: scipy.special.expit(x * 700.0) * x,
    "log_ndtr": lambda x: scipy.special.log_ndtr(x * 30.0),
    "expit_out": lambda x: (scipy.special.expit(x, out=x), x * x)[1],
}


def _special_program(rng):
    name = rng.choice(sorted(_SPECIAL))

    def f(x):
        return np.sum(_SPECIAL[name](x))

    return name, f, (rng.uniform(-1.3, 1.3, 4),), False


@pytest.mark.parametrize("seed", range(3))
def test_seeded_hunt_over_scipy_calls(seed):
    rng = np.random.default_rng(seed)
    for draw in (_linalg_program, _sparse_program, _special_program) * 6:
        name, f, args, symmetric = draw(rng)
        before = [x.copy(order="K") for x in args]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = f(*[x.copy(order="K") for x in args])
            except Exception as error:
                expected, scipys_error = None, type(error)
            else:
                scipys_error = mutad.MutadError
            try:
                value, grads = mutad.value_and_gradient(f, *args, argnums=tuple(range(len(args))))
            except (mutad.MutadError, scipys_error):  # refused, or SciPy's own error
                value = grads = None
        assert all(x.tobytes() == y.tobytes() and x.strides == y.strides
                   for x, y in zip(args, before)), name
        if grads is None or expected is None:
            assert grads is None, name
            continue
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes(), name
        directions = [rng.standard_normal(x.shape) for x in args]
        if symmetric:
            directions[0] = directions[0] + directions[0].T
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fd = directional_fd(f, args, directions, step=1e-5)
        if np.isfinite(fd):
            assert np.isclose(_directional(grads, directions), fd, rtol=1e-5, atol=1e-7), name


# ----------------------------------------------------------------------------------------------
# A method SciPy's matrix of some format or kind lacks (a dia matrix's max, a csr_array's
# getrow) answered on a traced matrix, where SciPy raises AttributeError


@pytest.mark.parametrize("fmt, kind, method", [("dia", "matrix", "max"),
                                               ("dia", "array", "eliminate_zeros"),
                                               ("csr", "array", "getrow"),
                                               ("coo", "matrix", "sort_indices")])
def test_methods_a_format_lacks_raise_scipys_attribute_error(fmt, kind, method):
    pattern = getattr(scipy.sparse, f"csr_{kind}")(np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]]))

    def f(x):
        a = pattern.asformat(fmt) * x[0]
        assert not hasattr(a, method)
        getattr(a, method)
        return x[0]

    message = f"'{fmt}_{kind}' object has no attribute '{method}'"
    for run in (f, lambda x: mutad.gradient(f, x)):
        with pytest.raises(AttributeError) as raised:
            run(np.array([2.0]))
        assert str(raised.value) == message and not isinstance(raised.value, mutad.MutadError)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_setdiag_that_adds_entries_warns_as_scipy_does(fmt):
    pattern = scipy.sparse.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]]))

    def f(x):
        a = pattern.asformat(fmt) * x[0]
        a.setdiag(x[1:3], 1)
        return np.sum(a @ x)

    x = np.array([1.0, 2.0, 3.0])
    expected, warned = _outcome(f, x.copy())
    (value, _), issued = _outcome(lambda x: mutad.value_and_gradient(f, x), x)
    assert value == expected and issued == warned
