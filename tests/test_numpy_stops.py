"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import collections
import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

import mutad
from test_scipy_stops import central, check


# ----------------------------------------------------------------------------------------------
# np.convolve of 0-d operands, which NumPy takes as 1-element vectors

def _convolve_scalar_first(x):
    return np.convolve(x[0], x).sum() + np.convolve(x[0], x)[1] ** 2


def _convolve_scalar_second(x):
    return (np.convolve(x, 2.0 * x[1], mode="same") ** 2).sum()


def _convolve_scalars(x):
    return np.convolve(x[0], x[1], mode="valid")[0] + np.convolve(x[1], 3.0)[0]


@pytest.mark.parametrize("f", [_convolve_scalar_first, _convolve_scalar_second,
                               _convolve_scalars])
def test_convolve_of_0d_operands(f):
    check(f, np.array([0.3, -0.7, 1.1]))


# ----------------------------------------------------------------------------------------------
# np.matrix built in the differentiated function of float64 values (an array, a list of traced
# numbers, a 1-d or 0-d array: NumPy's shapes), computing as np.matrix does (* the product, .I,
# .T, reductions keeping two dimensions); without copy a view of its array, written through

def _matrix_products(x):
    m = np.matrix(x.reshape(2, 2))
    return np.asarray(m * m.T + m.I).sum() + m.sum(axis=0)[0, 1] * 2.0


def _matrix_of_numbers(x):
    m = np.matrix([[x[0], 1.0], [x[2], x[3] * x[1]]])
    return (m * np.matrix(x[:2]).T).sum() + np.matrix(x[1]).item()


def _matrix_view_written(x):
    y = x * 1.0
    m = np.matrix(y.reshape(2, 2), copy=False)
    m[0, 0] = 5.0 * x[1]  # writes y[0]
    return (m.T * m).sum() + y.sum()


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("f", [_matrix_products, _matrix_of_numbers, _matrix_view_written])
def test_np_matrix_made_in_the_function(f):
    x = np.array([0.3, -0.5, 0.9, 1.4])
    check(f, x)
    replayed = mutad.grad(f, replay=True)
    for other in (x * 0.8, x[::-1].copy(), x + 0.25):
        before = other.tobytes()
        np.testing.assert_allclose(replayed(other), central(f, other), rtol=1e-6, atol=1e-7)
        assert other.tobytes() == before


# ----------------------------------------------------------------------------------------------
# np.interp of complex scalars: NumPy takes a complex x by its real part (with a ComplexWarning)
# and complex left and right beside complex fp, as NumPy scalars (not as 0-d arrays)

def _interp_complex_x(x):
    return np.interp(x[0] * (1 + 1j) + 0.2, [0.0, 1.0], x * (1 - 1j)).imag


def _interp_complex_x_real_fp(x):
    return np.interp(x[1] * (2 - 1j) + 1.6, [0.0, 0.5, 1.0], [x[0], 2.0, x[1] ** 2])


def _interp_complex_left(x):
    return np.interp(-2.0, [0.0, 1.0], x * (1 + 2j), left=x[0] * 1j).imag


def _interp_complex_right(x):
    return np.interp(x[0] + 1.5, [0.0, 1.0], [1j, 2.0], right=x[1] * (2 + 1j)).imag


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("f", [_interp_complex_x, _interp_complex_x_real_fp,
                               _interp_complex_left, _interp_complex_right])
def test_interp_of_complex_scalars(f):
    check(f, np.array([0.3, -0.7]))


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_interp_of_a_complex_argument():
    """A complex x's imaginary part, which NumPy discards, has no derivative."""
    z = np.array([0.3 + 0.2j, 0.6 - 0.1j])

    def f(z):
        return 2.0 * np.interp(z[0], [0.0, 1.0], [1.0, 3.0]) \
            + np.abs(np.interp(z[1], [0.0, 1.0], [1j, 3.0]))

    before = z.tobytes()
    value, (g,) = mutad.value_and_gradient(f, z)
    assert z.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(f(z.copy())).tobytes()
    slope = (9 * 0.6 - (1 - 0.6)) / np.hypot(3 * 0.6, 1 - 0.6)  # d|3t + i(1 - t)|/dt, t = 0.6
    np.testing.assert_allclose(g, [4.0, slope], rtol=1e-12)
    direction = np.array([1 + 1j, 2 - 1j])
    _, tangent = mutad.jvp(f, (z,), (direction,))
    np.testing.assert_allclose(tangent, 4.0 + 2.0 * slope, rtol=1e-12)
    np.testing.assert_array_equal(mutad.grad(f, replay=True)(z), g)
    assert z.tobytes() == before


# ----------------------------------------------------------------------------------------------
# An integer or boolean array f computed, written after a record read it: each record keeps the
# values it read (tracing froze the array, and refused the write)

def _mask_rewritten(x):
    m = x > 0
    y = np.where(m, x, 0.0)
    m[:] = ~m
    z = np.where(m, x, 1.0)
    return (y * z).sum() + y.sum() + 2.0 * z.sum()


def _index_rewritten(x):
    idx = np.arange(x.size)[::-1].copy()
    a = x[idx] * x
    idx[:] = np.argsort(x)
    return (a * x[idx] ** 2).sum()


def _mask_flipped_in_place(x):
    m = x > 0
    a = x[m].sum()
    m ^= True
    return a * x[m].sum()


def _counter_incremented(x):
    k = np.arange(x.size)
    y = x * k
    k += 2
    return (y * (x * k)).sum()


def _scatter_mask_rewritten(x):
    u = np.zeros(x.size)
    m = x > 0.2
    u[m] = x[m] ** 2
    m[:] = x < 0
    u[m] = 3.0 * x[m]
    return (u * x).sum()


def _add_at_index_rewritten(x):
    u = np.zeros(3)
    i = np.array([0, 1, 1, 2, 0])
    np.add.at(u, i, x)
    i[0] = 2
    np.add.at(u, i, x ** 2)
    return (u ** 2).sum()


def _take_index_sorted(x):
    i = np.argsort(x)
    a = np.take(x, i)
    i.sort()
    return (a * np.take(x, i)).sum() + (np.take_along_axis(x, i, 0) * a).sum()


def _boolean_factor_rewritten(x):
    u = x.copy()
    m = x > 0
    u *= m
    y = x * m
    m[:] = True
    m[0] = False
    u += x * m
    return (u ** 2).sum() + (y * u).sum()


def _index_shifted(x):
    index = np.array([0, 2])
    y = x[index]
    index += 1  # the gather's pullback scatters through the index it read
    return (y * x[index]).sum()


def _where_mask_rewritten(x):
    m = x > 0
    u = np.zeros_like(x)
    np.add(u, x ** 2, where=m, out=u)
    s = np.sum(x ** 2, where=m)
    np.logical_not(m, out=m)
    np.multiply(x, 3.0, where=m, out=u)
    m[:2] = True
    return (u * x).sum() + s * np.sum(x, where=m)


# An integer or boolean array NumPy computed from constants f made (counts, an order, bins),
# written after a traced operation read it: it stands in for itself, as one computed from a
# traced array does, so that each record keeps the values it read

def _counts_zeroed(x):
    grid = np.linspace(0.0, 1.0, 12)
    counts = np.histogram(grid, bins=x.size)[0]
    w = counts * x
    counts[0] = 0
    return (w * x).sum() + (counts * x ** 2).sum()


def _counts_normalised(x):
    counts = np.bincount(np.floor(np.linspace(0.0, 4.9, 9)).astype(int), minlength=x.size)
    w = x * counts
    counts //= 2
    return (w ** 2).sum() + (x * counts).sum()


def _order_shifted(x):
    order = np.argsort(np.cos(np.arange(x.size, dtype=float)))
    y = x[order]
    order += 1
    order %= x.size
    return (y * x[order]).sum()


def _bins_rewritten(x):
    bins = np.digitize(np.linspace(0.0, 1.0, x.size), [0.3, 0.6])
    y = x * bins
    bins[:] = bins[::-1]
    return (y * x * bins).sum()


def _positions_sorted(x):
    where = np.searchsorted(np.arange(10.0), np.linspace(4.5, 0.0, x.size)) // 2
    y = np.take(x, where)
    where.sort()
    return (y * np.take(x, where) ** 2).sum()


def _nonzero_written(x):
    (i,) = np.nonzero(np.cos(np.arange(x.size, dtype=float)) > 0)
    y = x[i] ** 2
    np.add(i, 1, out=i)
    return y.sum() * x[i].sum()


def _nonzero_method_written(x):
    # the method, not np.nonzero: ndarray's gives plain arrays even of a subclass's
    (i,) = (np.linspace(0.0, 1.0, x.size) > 0.3).nonzero()
    y = x[i] ** 2
    i -= 1
    return y.sum() * x[i].sum()


def _mask_of_constants_flipped(x):
    m = np.linspace(-1.0, 1.0, x.size) > 0
    y = np.where(m, x, 2.0 * x)
    m[:] = ~m
    return (y * np.where(m, x ** 2, 0.0)).sum()


def _counts_as_floats_written(x):
    w = np.histogram(np.linspace(0.0, 1.0, 12), bins=x.size)[0] / 12
    y = w * x
    w[1] = 0.5
    w /= w.sum()
    return (y * w).sum() + (w * x ** 2).sum()


def _counts_as_floats_traced(x):
    w = np.histogram(np.linspace(0.0, 1.0, 12), bins=x.size)[0].astype(float)
    w[...] = x * w
    w[1] = x[2]
    return (w ** 2).sum()


def _counts_of_the_argument_zeroed(x):
    counts, edges = np.histogram(x, bins=x.size)
    w = counts * x
    counts[0] = 0
    return (w * x).sum() + (counts * x ** 2).sum() + edges.sum()


@pytest.mark.parametrize("f", [_index_shifted, _where_mask_rewritten, _mask_rewritten,
                               _index_rewritten, _mask_flipped_in_place, _counter_incremented,
                               _scatter_mask_rewritten, _add_at_index_rewritten,
                               _take_index_sorted, _boolean_factor_rewritten,
                               _counts_zeroed, _counts_normalised, _order_shifted,
                               _bins_rewritten, _positions_sorted, _nonzero_written,
                               _nonzero_method_written,
                               _mask_of_constants_flipped, _counts_as_floats_written,
                               _counts_as_floats_traced, _counts_of_the_argument_zeroed])
def test_integer_array_written_after_a_read(f):
    check(f, np.array([0.3, -0.7, 1.1, -0.2, 0.5]))


def test_index_written_after_a_read_replays_each_call():
    """A replay does not keep an index f made as the value it held at the end of the call
    (an index rewritten with values computed from the argument): another argument, another
    order."""
    g = mutad.grad(_index_rewritten, replay=True)
    x = np.array([0.3, -0.7, 1.1, -0.2, 0.5])
    other = np.array([-0.4, 0.9, 0.1, 1.3, -0.6])
    g(x)
    np.testing.assert_array_equal(g(other), mutad.gradient(_index_rewritten, other)[0])


# ----------------------------------------------------------------------------------------------
# Products of integer or boolean arrays with traced ones, in every spelling

def _method_dot(x):
    return (x > 0).astype(int).dot(x) + (x < 0).dot(x ** 2)


def _function_products(x):
    k = np.arange(x.size)
    return np.dot(k, x) + k @ x + x @ k + np.inner(k, x ** 2) + np.vdot(k, x)


def _einsum_with_integers(x):
    k = np.arange(x.size)
    return np.einsum("i,i->", k, x) + np.einsum("i,j->ij", x > 0, x).sum() ** 2


def _matmul_of_integers(x):
    a = x[:4].reshape(2, 2)
    return (np.matmul(np.ones((3, 2), bool), a).sum() + np.matmul(a, np.eye(2, dtype=int)) ** 2
            ).sum() + (np.arange(4).reshape(2, 2) @ a).sum()


WEIGHTS = np.arange(25.0).reshape(5, 5)


def _method_dot_of_a_global(x):
    return (WEIGHTS.dot(x) ** 2).sum() + WEIGHTS[1:3].dot(x).sum()


def _reduced_masks(x):
    m = np.logical_and.reduce([x > -1, x < 1, x != 0])
    both = np.logical_or.accumulate((x > 0, x < -0.5))[-1]
    return x[m].sum() + np.cumsum(m).dot(x) + (both * x).sum()


def _method_choose(x):
    return ((x > 0).astype(int).choose([x, 2.0 * x]) ** 2).sum()


@pytest.mark.parametrize("f", [_method_dot, _function_products, _einsum_with_integers,
                               _matmul_of_integers, _method_dot_of_a_global, _reduced_masks,
                               _method_choose])
def test_products_with_integer_arrays(f):
    check(f, np.array([0.3, -0.7, 1.1, -0.2, 0.5]))


# ----------------------------------------------------------------------------------------------
# logsumexp, softmax and log_softmax of Python lists of traced numbers and constants: the array
# NumPy makes of it, at every level of nested differentiations; a rule run inside a
# distribution's formula (dpareto_lognorm's logsumexp of lists, under jvp) gives plain values

def _logsumexp_of_a_list(x):
    return scipy.special.logsumexp([x[0], x[1] * 2, 0.0])


def _logsumexp_of_lists_weighted(x):
    return scipy.special.logsumexp([x[0], x[1]], b=[x[1] ** 2, 0.5])


def _logsumexp_of_a_list_of_arrays(x):
    return scipy.special.logsumexp([x, np.ones(2), x[::-1] * 3], axis=0).sum()


def _logsumexp_of_a_list_signed(x):
    y, sign = scipy.special.logsumexp([x[0], x[1]], b=[1.0, -1.0], return_sign=True)
    return y * sign


def _softmax_of_lists(x):
    return (scipy.special.softmax([x[0], 1.0, x[1]]) * np.arange(3)).sum() \
        + scipy.special.log_softmax((x[1], x[0]))[0]


LISTS = [_logsumexp_of_a_list, _logsumexp_of_lists_weighted, _logsumexp_of_a_list_of_arrays,
         _logsumexp_of_a_list_signed, _softmax_of_lists]


@pytest.mark.parametrize("f", LISTS)
def test_logsumexp_of_lists(f):
    check(f, np.array([0.3, -0.7]))


@pytest.mark.parametrize("f", LISTS)
def test_logsumexp_of_lists_nested(f):
    x = np.array([0.3, -0.7])
    rows = [central(lambda z: mutad.gradient(f, z)[0][i], x) for i in range(2)]
    np.testing.assert_allclose(mutad.hessian(f, x), np.array(rows), rtol=1e-6, atol=1e-7)


def test_logsumexp_of_lists_in_a_distribution_under_jvp():
    x = np.array([0.5, 1.0, 2.0])

    def f(x):
        return scipy.stats.dpareto_lognorm.cdf(x, 3, 1.2, 1.5, 2)

    y, dy = mutad.jvp(f, (x,), (np.ones(3),))
    assert type(y) is np.ndarray and y.tobytes() == f(x).tobytes()
    np.testing.assert_allclose(dy, scipy.stats.dpareto_lognorm.pdf(x, 3, 1.2, 1.5, 2),
                               rtol=1e-10)


# ----------------------------------------------------------------------------------------------
# Forward mode on the arrays f makes: a function of constants alone gives constants, as reverse
# mode's (np.unique has no forward rule; np.histogram's edges were plain arrays, which a later
# write of a dual into them refused)

def _unique_of_constants(x):
    u = np.unique(np.array([3.0, 1.0, 2.0, 1.0]))
    u[0] = x[0]
    return (u * x[:3]).sum()


def _histogram_edges_written(x):
    _, edges = np.histogram(np.array([0.1, 0.5, 0.9]), bins=4, range=(0, 1))
    edges[1:-1] += 0.01 * x[:3]
    return (np.diff(edges) ** 2).sum()


@pytest.mark.parametrize("f", [_unique_of_constants, _histogram_edges_written])
def test_functions_of_constants_in_forward_mode(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24]))


# ----------------------------------------------------------------------------------------------
# Arrays made by calls the allocation mode did not follow, then given traced values: an integer
# np.mgrid (a stand-in of itself, so its astype(float) is a constant), np.load's and np.fromfile's
# arrays (constants; a replay traces such a call), np.frombuffer's view of a buffer (standing in
# as an array made before: what f makes of it is followed, a write into it refused)

def _mgrid_as_floats(x):
    grid = np.mgrid[0:2, 0:4].astype(float)
    grid[0, 0] = x[:4]
    i, j = np.ogrid[0:2, 0:4]
    return (grid ** 2).sum() + (x.reshape(2, 4) * (i + 2 * j)).sum()


def _loaded(x):
    import io
    stream = io.BytesIO()
    np.save(stream, np.ones(4))
    stream.seek(0)
    d = np.load(stream)
    d[0] = x[0]
    d *= x[4:]
    return (d * x[:4]).sum()


def _from_a_buffer(x):
    c = np.frombuffer(np.arange(4.0).tobytes()).copy()
    c[1] = x[1]
    k = np.frombuffer(np.arange(4).tobytes(), dtype=np.int64)
    return (c * x[:4]).sum() + (k.astype(float) * x[4:]).sum() + x[k].sum()


@pytest.mark.parametrize("f", [_mgrid_as_floats, _loaded, _from_a_buffer])
def test_arrays_of_unfollowed_makers(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


_WORKSPACE = __import__("pickle").dumps(np.zeros(8))  # (pickled before the differentiation)


def _unpickled_workspace(x):
    import pickle
    w = pickle.loads(_WORKSPACE)
    w[...] = x
    w[1:] += w[:-1] * 0.5
    return (w ** 2).sum()


def _unpickled_from_a_file(x):
    import io
    import pickle
    stream = io.BytesIO()
    pickle.dump({"u": np.ones(4), "k": np.arange(4), "name": "run"}, stream)
    stream.seek(0)
    state = pickle.load(stream)
    state["u"][:] = x[:4] * state["u"]
    state["k"][0] = 3  # (integers: NumPy's, as pickled)
    return (state["u"] * x[state["k"] + 4]).sum() + len(state["name"])


def _unpickled_by_its_own_name(x):
    from pickle import dumps, loads
    u, v = loads(dumps((np.zeros(4), np.linspace(0.0, 1.0, 4))))
    u[:] = x[4:]
    v *= x[:4]
    return u @ v


def _unpickled_objects_held_twice(x):
    import pickle
    w, names = np.zeros(4), ["u"]
    state = pickle.loads(pickle.dumps({"pair": (w, w), "names": names, "also": names}))
    u, v = state["pair"]  # one array, as pickled: written through u, read through v
    u[:] = x[:4]
    state["names"].append("v")
    return (v * x[4:]).sum() * len(state["also"])


def _unpickled_cycles(x):
    import pickle
    w, loop = np.ones(4), []
    loop.append(loop)
    ring = ([], w)
    ring[0].append(ring)
    state = pickle.loads(pickle.dumps({"ring": ring, "loop": loop}))
    state["ring"][0][0][1][1:] *= x[5:]  # the tuple the list in it holds is the tuple
    held = state["loop"][0] is state["loop"] and state["ring"][0][0] is state["ring"]
    return (state["ring"][1] * x[:4]).sum() * held


def _archive_read(x):
    import io
    stream = io.BytesIO()
    np.savez(stream, u=np.zeros(8), c=np.full(8, 2.0))
    stream.seek(0)
    with np.load(stream) as data:
        u = data["u"]
        arrays = dict(data)
    u[...] = x
    arrays["c"][:4] = x[4:] ** 2
    return (u * arrays["c"]).sum() + arrays["u"].sum()


@pytest.mark.parametrize("f", [_unpickled_workspace, _unpickled_from_a_file,
                               _unpickled_by_its_own_name, _unpickled_objects_held_twice,
                               _unpickled_cycles, _archive_read])
def test_arrays_read_from_pickles_and_archives_written(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def _pickled_state_round_trip(x):
    """A checkpoint of a state dict through pickle: a copy, as of the time it was pickled, that
    keeps a Fortran array's layout, a NumPy scalar, Python's numbers and an array held twice."""
    import pickle
    u = np.asfortranarray(np.outer(x[:3], x[3:6]))
    state = {"u": u, "again": u, "peak": x.max(), "step": 3, "v": x * 2}
    blob = pickle.dumps(state)
    state["v"][0] = 100.0  # after pickling: not in the copy
    back = pickle.loads(blob)
    back["u"][0, 0] += 1.0  # one array, as pickled: seen through "again"
    layout = back["again"].flags.f_contiguous and isinstance(back["peak"], np.float64) \
        and __import__("copy").deepcopy(u).flags.f_contiguous  # (NumPy's copies keep it)
    return (back["again"] ** 2).sum() * layout + back["peak"] * back["step"] + back["v"] @ x


def _pickled_bytes_read_back_by_another_route(x):
    """The bytes pickled from traced values, copied, and written to a stream read back by
    pickle.load: the same numbers, a copy mutad follows."""
    import io
    import pickle
    blob = pickle.dumps([x[:4] * 2, x[4:] ** 2], protocol=pickle.HIGHEST_PROTOCOL)
    a, b = pickle.loads(bytes(bytearray(blob)))
    stream = io.BytesIO()
    stream.write(blob)
    stream.seek(0)
    c, d = pickle.load(stream)
    return a @ b + (c * d).sum() + len(blob) * 0.0


def _masked_filled_written(x):
    m = np.ma.masked_array(np.zeros(8), mask=np.arange(8) % 3 == 0)
    w = np.ma.filled(m, 1.0)  # a new array: the data, masked elements replaced
    w[...] = x * w
    d = np.ma.filled(np.ma.masked_less(np.linspace(-1.0, 1.0, 8), 0.0), 0.5)
    d[1:] += w[:-1]
    return (w * d).sum() + m.sum()


@pytest.mark.parametrize("f", [_pickled_state_round_trip,
                               _pickled_bytes_read_back_by_another_route])
def test_pickle_round_trips_of_traced_values(f):
    """pickle.loads of what pickle.dumps made of traced values in the function (refused
    before): a copy of them as they were pickled, followed; the bytes are NumPy's."""
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_pickled_bytes_are_numpys_and_an_unreadable_stream_is_refused():
    import pickle
    made = {}

    def f(x):
        made["blob"] = pickle.dumps({"v": x * 2, "s": x[0]})
        return x.sum()

    x = np.array([0.5, -1.0, 2.0])
    mutad.gradient(f, x)
    assert made["blob"] == pickle.dumps({"v": x * 2, "s": x[0]})

    class Pipe:  # a stream pickle.load reads once, which cannot go back
        def __init__(self, data):
            self.data, self.at = data, 0

        def read(self, n=-1):
            n = len(self.data) - self.at if n < 0 else n
            self.at += n
            return self.data[self.at - n:self.at]

        def readline(self):
            return self.read(1)

        def readinto(self, buffer):
            data = self.read(len(buffer))
            buffer[:len(data)] = data
            return len(data)

    def g(x):
        return pickle.load(Pipe(pickle.dumps(x * 2))).sum()

    with pytest.raises(mutad.errors.ConversionError, match="pickle.loads"):
        mutad.gradient(g, x)


@pytest.mark.parametrize("f", [_masked_filled_written])
def test_arrays_a_masked_array_of_constants_fills_written(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_a_masked_arrays_own_data_written_stays_refused():
    """np.ma.getdata's array (np.ma.filled's of no mask) is the memory of a masked array of
    plain values (a list's), which the plain masked array reads after: the write is refused,
    not followed into a wrong sum (over an array the function allocated, it is followed:
    ``_masked_own_data_written``)."""
    def f(x):
        m = np.ma.masked_array([0.0, 0.0, 0.0, 0.0], mask=[True, False, False, False])
        np.ma.getdata(m)[:] = x
        return m.sum()

    with pytest.raises(mutad.errors.UntracedWriteError, match="np.array"):
        mutad.gradient(f, np.ones(4))


def test_a_replay_of_an_unpickled_workspace_traces_with_its_reason():
    g = mutad.grad(_unpickled_workspace, replay=True)
    for k in range(3):
        x = np.linspace(-1.0, 1.0, 8) * (1.0 + k)
        assert g(x).tobytes() == mutad.gradient(_unpickled_workspace, x)[0].tobytes()
    assert "a call a replay cannot redo" in str(g.reasons)


@pytest.mark.parametrize("pickled_in_the_call", [False, True])
def test_an_array_unpickled_out_of_band_over_an_array_made_before(pickled_in_the_call):
    """pickle's protocol 5 with out-of-band buffers: the array unpickled views the memory of
    the array pickled, made before the call (NumPy's w *= x writes into it). Taken as a new
    constant (and the stand-in pickled in band) the write went elsewhere, a read of the array
    made before gave its old values, silently; the write is refused, the array left as it
    was."""
    import pickle
    base = np.ones(4)
    buffers = []
    data = pickle.dumps(base, protocol=5, buffer_callback=buffers.append)

    def f(x):
        if pickled_in_the_call:
            buffers.clear()
            w = pickle.loads(pickle.dumps(base, protocol=5, buffer_callback=buffers.append),
                             buffers=buffers)
        else:
            w = pickle.loads(data, buffers=buffers)
        w *= x
        return w.sum() + base.sum()

    with pytest.raises(mutad.errors.UntracedWriteError):
        mutad.gradient(f, np.linspace(0.5, 2.0, 4))
    assert base.tolist() == [1.0] * 4


def test_pickle_and_archives_are_pythons_and_numpys_outside():
    import io
    import pickle
    import _pickle

    def f(x):
        return (pickle.loads(pickle.dumps(np.ones(2))) * x).sum()

    mutad.gradient(f, np.ones(2))
    assert pickle.loads is _pickle.loads and pickle.load is _pickle.load
    stream = io.BytesIO()
    np.savez(stream, u=np.ones(2))
    stream.seek(0)
    kept = {}

    def g(x):
        kept["data"] = np.load(stream)
        return x.sum()

    mutad.gradient(g, np.ones(2))
    u = kept["data"]["u"]  # read after the differentiation: NumPy's array
    assert type(u) is np.ndarray and u.tolist() == [1.0, 1.0]


def test_a_write_into_a_view_of_a_named_buffer_is_refused():
    """The buffer may be read by another route than the view written (bytes(buffer), another
    view of it), whose values mutad would read as constants (the gradients were x where they
    are 2x): the write is refused, and the buffer left as it was."""
    buffer = bytearray(np.zeros(4).tobytes())

    def f(x):
        d = np.frombuffer(buffer)
        d[:] = x
        return (d * np.frombuffer(buffer)).sum()

    def g(x):
        d = np.frombuffer(buffer)
        d[:] = x
        return (d * np.frombuffer(bytes(buffer))).sum()

    for program in (f, g):
        with pytest.raises(mutad.errors.UntracedWriteError, match=r"frombuffer\(b\)\.copy"):
            mutad.gradient(program, np.arange(4.0))
        assert bytes(buffer) == np.zeros(4).tobytes()


def _ndarray_over_bytes(x):  # (regression: the raw constructor's view was NumPy's own)
    w = np.ndarray((4,), dtype=float, buffer=bytearray(32))
    w[:] = np.sin(x[:4])
    w[1:] += w[:-1] * x[4:7]
    import array
    a = np.ndarray((2,), buffer=array.array("d", [0.5, 2.0]))
    a *= x[7]
    return w @ w + (a * x[:2]).sum()


def test_a_write_into_the_constructors_view_of_a_buffer():
    check(_ndarray_over_bytes, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))
    buffer = bytearray(np.ones(2).tobytes())

    def f(x):
        d = np.ndarray((2,), buffer=buffer)
        d *= x
        return (d ** 2).sum()

    assert mutad.gradient(f, np.array([1.5, 2.0]))[0].tolist() == [3.0, 4.0]
    assert bytes(buffer) == np.array([1.5, 2.0]).tobytes()  # as NumPy's run leaves it


# ----------------------------------------------------------------------------------------------
# np.nditer with an output it allocates (a None operand), as NumPy's tutorial writes it

def _nditer_allocated_output(x):
    it = np.nditer([x, None])
    with it:
        for a, b in it:
            b[...] = a * a + 2.0 * a
        squares = it.operands[1]
    return (squares ** 2).sum()


def _nditer_allocated_broadcast(x):
    a = x.reshape(2, 4)
    it = np.nditer([a, x[:4], None], op_flags=[["readonly"], ["readonly"],
                                               ["writeonly", "allocate"]])
    for p, q, r in it:
        r[...] = p * q
    return (it.operands[2] * np.arange(8.0).reshape(2, 4)).sum()


def _nditer_into_an_array_it_made(x):
    """A loop over an array the function allocated, writing differentiated values into it
    through the iterator's elements (its multi-index picking them)."""
    out = np.zeros(8)
    it = np.nditer(out, flags=["multi_index"], op_flags=["readwrite"])
    for v in it:
        v[...] = x[7 - it.multi_index[0]] ** 2
    return (out * np.arange(8.0)).sum()


@pytest.mark.parametrize("f", [_nditer_allocated_output, _nditer_allocated_broadcast,
                               _nditer_into_an_array_it_made])
def test_nditer_with_an_allocated_output(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_a_mask_read_on_every_step_is_kept_once():
    """The records of a loop reading the same mask share the copy they keep (the mask read
    on every step of a time loop is not copied once per step), and a write into it makes the
    later records keep the new values."""
    from mutad.engines import reverse

    kept = []

    def f(x):
        # Copies an earlier test left for the collector stay alive (and keep their ids) here.
        earlier = list(reverse._COPIES.values())
        m = x > 0
        y = x.copy()
        for _ in range(20):
            y = np.where(m, y * 1.01, y)
        kept.append(len({id(c) for c in reverse._COPIES.values()} - {id(c) for c in earlier}))
        m[:] = ~m
        for _ in range(3):
            y = np.where(m, y * 1.02, y)
        return y.sum()

    x = np.linspace(-1.0, 1.0, 11)
    (g,) = mutad.gradient(f, x)
    assert kept == [1]
    np.testing.assert_allclose(g, np.where(x > 0, 1.01 ** 20, 1.02 ** 3), rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# MaskedArray.max and .min (np.ma.max, np.max of a masked array): NumPy's values and masks

def _masked_extremes(x):
    m = np.ma.masked_where(x < 0, x)
    return (m * 2 + 1).sum() + np.ma.sqrt(m).sum() + m.max() + m.min() * 3


def _masked_extremes_by_axis(x):
    m = np.ma.masked_where(x.reshape(2, 4) < 0, x.reshape(2, 4))
    a, b = m.max(axis=0), np.ma.min(m, axis=1)
    c = np.max(m, axis=1, keepdims=True)
    return (a.filled(0.0) ** 2).sum() + b.sum() + c.sum() + np.amin(m)


def _masked_column(x):
    """A column masked whole: its maximum masked, its data NumPy's default fill value."""
    m = np.ma.masked_where(x.reshape(2, 4) < 0.0, x.reshape(2, 4))
    a = m.max(axis=0)
    return a.filled(7.0).sum() + (a.data == 1e20).sum() + a.mask.sum()


@pytest.mark.parametrize("f", [_masked_extremes, _masked_extremes_by_axis, _masked_column])
def test_masked_extremes(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, -0.57, 0.93, -1.36, 0.42]))


# ----------------------------------------------------------------------------------------------
# A view of a NumPy scalar (x[0] * 2) is a view of the new array NumPy makes of it: writeable,
# and its own (np.atleast_1d(s), s.reshape(1, 1), np.ascontiguousarray(s) then written)

def _scalar_views_written(x):
    s = x[0] * 2.0
    total = s
    for view in (np.atleast_1d(s), np.atleast_2d(s), np.atleast_3d(s), np.expand_dims(s, 0),
                 np.reshape(s, (1,)), np.ravel(s), s.reshape(1, 1), s.ravel(),
                 np.ascontiguousarray(s), np.asfortranarray(s)):
        view[...] += 1.0
        view[...] *= x[1]
        total = total + view.sum()
    return total * s


def test_views_of_a_scalar_written():
    check(_scalar_views_written, np.array([0.3, -0.7]))


def test_a_broadcast_scalar_stays_read_only():
    def f(x):
        b = np.broadcast_to(x[0] * 2.0, (1,))
        with pytest.raises(ValueError):
            b[0] = 1.0
        return b.sum()

    check(f, np.array([0.3, -0.7]))


# ----------------------------------------------------------------------------------------------
# np.ma's factories (np.ma.zeros, masked_all, empty_like, ...) then written with differentiated
# values: their float data is a constant the function may write into, as np.zeros' is

def _masked_zeros_written(x):
    m = np.ma.zeros(8)
    m[:] = x
    m[x < 0] = np.ma.masked
    return (m ** 2).sum() + m.mean()


def _masked_all_filled(x):
    m = np.ma.masked_all((2, 4))
    m[x.reshape(2, 4) > 0] = x.reshape(2, 4)[x.reshape(2, 4) > 0]
    return m.sum() + (m * 3.0).max()


def _masked_like_factories(x):
    a = np.ma.array(x, mask=x > 1.0)
    z = np.ma.zeros_like(a)  # a's mask, NumPy's zeros
    z += x
    e = np.ma.empty_like(a)
    e[:] = 2.0 * x
    o = np.ma.ones((2, 4))
    o[1, 1] = np.ma.masked
    o[0] = x[:4]
    return z.sum() + e.sum() + (o * x.reshape(2, 4)).sum()


@pytest.mark.parametrize("f", [_masked_zeros_written, _masked_all_filled, _masked_like_factories])
def test_masked_factories_written(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_masked_factories_of_integers_and_outside_stay_numpys():
    def f(x):
        k = np.ma.zeros(3, dtype=int)
        assert type(k) is np.ma.MaskedArray
        return x.sum()

    mutad.gradient(f, np.ones(2))
    assert type(np.ma.zeros(2)) is np.ma.MaskedArray


# ----------------------------------------------------------------------------------------------
# A generator's draw into a traced out= buffer: NumPy's numbers, in the buffer's layout

def _drawn_into(x):
    rng = np.random.default_rng(7)
    buf = np.empty(8)
    rng.random(out=buf)
    buf *= x
    g = np.empty((2, 4), order="F")
    rng.standard_normal(out=g)
    g[0] += x[:4]
    return buf.sum() + (g ** 2).sum()


def test_a_draw_into_a_traced_buffer():
    check(_drawn_into, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))

    def noncontiguous(x):
        b = np.zeros((4, 2))
        np.random.default_rng(0).random(out=b[:, 0])
        return x.sum()

    with pytest.raises(ValueError, match="contiguous"):  # NumPy's error
        mutad.gradient(noncontiguous, np.ones(2))


# ----------------------------------------------------------------------------------------------
# Records written whole (a tuple, or records of another array) into an array of records holding
# differentiated values: field by field, as NumPy assigns them (by position)

def _records_written_whole(x):
    dt = np.dtype([("p", "f8"), ("q", "f8"), ("k", "i8")])
    a = np.zeros(4, dtype=dt)
    for i in range(4):
        a[i] = (x[i], x[i + 4] ** 2, i)
    a[1:] = a[:-1]  # overlapping, as NumPy copies it
    a[0] = (x[7] * 3, 1.5, 2)
    b = np.zeros(2, dtype=[("u", "f8"), ("v", "f8"), ("w", "i8")])
    b[:] = a[2:]  # by position, not by name
    return (a["p"] * a["q"]).sum() + (b["u"] ** 2).sum() + b["w"].sum() + b["v"].sum()


def test_records_written_whole():
    check(_records_written_whole, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


# ----------------------------------------------------------------------------------------------
# x.setflags(write=False) (x.flags.writeable = False) on a differentiated array: read-only as
# NumPy's until the reverse pass, whose undos write into it; the caller's flags as they were

def _locked(x):
    y = x * 2.0
    y.setflags(write=False)
    v = y[1:]
    for write in (lambda: v.__setitem__(0, 5.0), lambda: np.add(y, 1.0, out=y)):
        try:
            write()
            raise AssertionError("a write into a read-only array")
        except ValueError:
            pass
    assert not y.flags.writeable and not v.flags.writeable
    w = y + x
    y.flags.writeable = True
    y[0] = y[0] ** 2
    return (y * x).sum() + (w ** 2).sum()


def _argument_locked(x):
    x.setflags(write=False)
    try:
        x[0] = 1.0
        raise AssertionError("a write into a read-only array")
    except ValueError:
        pass
    return (x ** 2).sum()


def _locked_after_writes(x):
    """The undos of the writes before the lock write into the array in the reverse pass."""
    y = x * 2.0
    y += x[::-1]
    y *= x
    y[1:] /= 1.5
    y.setflags(write=False)
    return (y ** 2).sum()


@pytest.mark.parametrize("f", [_locked, _argument_locked, _locked_after_writes])
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_arrays_made_read_only(f, policy):
    x = np.array([0.31, -0.72, 1.13, -0.24])
    if policy == "checkpoint":
        before = x.tobytes()
        (g,) = mutad.gradient(f, x, policy=policy)
        np.testing.assert_allclose(g, central(f, x), rtol=1e-6)
        assert x.tobytes() == before
    else:
        check(f, x)
    assert x.flags.writeable


def test_a_read_only_argument_stays_so():
    x = np.array([0.31, -0.72, 1.13])
    x.setflags(write=False)
    (g,) = mutad.gradient(_argument_locked, x)
    np.testing.assert_array_equal(g, 2 * x)
    assert not x.flags.writeable

    def unlocking(x):
        x.setflags(write=True)  # the caller's read-only array: refused, left as it was
        return x.sum()

    with pytest.raises(mutad.MutadError):
        mutad.gradient(unlocking, x)
    assert not x.flags.writeable


# ----------------------------------------------------------------------------------------------
# New float arrays from NumPy's Python functions that take numbers (windows, quadrature rules,
# frequencies), however the function reaches them: constants it may write traced values into,
# as np.zeros' arrays are

def _windows_written(x):
    w = np.hanning(8)
    w[0] = x[0]
    w *= x
    g = np.hamming(8).reshape(2, 4).T.copy()
    g[:, 0] = x[:4]
    k = np.fft.fftfreq(8)
    k[0] = x[1]
    return (w ** 2).sum() + (g ** 2).sum() + (k * x).sum()


def _quadrature_weights_written(x):
    nodes, weights = np.polynomial.legendre.leggauss(8)
    weights *= 0.5
    weights[3] += x[3]
    t, w = np.polynomial.hermite.hermgauss(8)  # read, then written in place
    w /= np.sqrt(np.pi)
    w[:] = w * np.exp(x * 0.1)
    return (weights * np.exp(x * nodes)).sum() + (w * np.cos(x[0] + t)).sum()


def _imported_by_name(x):
    from numpy import blackman, kaiser
    from numpy.polynomial.chebyshev import chebpts1
    w = blackman(8) + kaiser(8, 2.0)
    w[1:3] = x[1:3]
    c = chebpts1(8)
    c *= x
    return (w * x).sum() + c.sum()


@pytest.mark.parametrize("f", [_windows_written, _quadrature_weights_written, _imported_by_name])
def test_arrays_of_numpys_python_functions_written(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_numpys_python_functions_give_numpys_other_results():
    """Integer arrays as NumPy's values (standing in for themselves, as np.argsort's of a
    constant do), other objects as NumPy gives them; NumPy's own functions outside a
    differentiation."""
    def f(x):
        i, j = np.triu_indices(3, 1)
        assert isinstance(i, np.ndarray) and i.dtype.kind == "i" and i.base is None
        assert i.tolist() == [0, 0, 1] and j.tolist() == [1, 2, 2]
        r, c = np.diag_indices(3)
        assert r is c  # NumPy gives one array twice
        assert np.base_repr(5, 2) == "101" and np.iterable(x)
        return x[i].sum() + x[j].sum()

    np.testing.assert_array_equal(mutad.gradient(f, np.ones(3))[0], [2.0, 2.0, 2.0])
    assert type(np.hanning) is type(f)
    assert type(np.polynomial.legendre.leggauss) is type(f)


# Integer arrays of NumPy's Python functions (np.triu_indices, np.tril_indices_from,
# np.diag_indices), written after a traced operation read them: they stand in for themselves,
# as np.argsort's of a constant does, so that each record keeps the values it read

def _triu_indices_rewritten(x):
    i, j = np.triu_indices(3, 1)
    a = x.reshape(3, 3)
    v = a[i, j]
    i[:] = 2 - i
    return (v * a[i, j]).sum() + x[j].sum()


def _tril_indices_shifted(x):
    a = x.reshape(3, 3).copy()
    i, j = np.tril_indices_from(a)
    v = a[i, j] ** 2
    j[:] = i
    np.add(i, 0, out=i)
    return (v * a[i, j]).sum()


def _diag_indices_written_through_one_name(x):
    a = x.reshape(3, 3).copy()
    r, c = np.diag_indices(3)  # one array: a write through r shows through c
    d = a[r, c].copy()
    r[0] = 1
    a[r, c] = d ** 2
    return (a * x.reshape(3, 3)).sum()


def _triu_indices_as_cholesky_mask(x):
    L = np.linalg.cholesky(np.outer(x[:3], x[:3]) + np.eye(3))
    upper = np.triu_indices(3, 1)
    L[upper] = x[3:6]
    upper[1][:] = upper[0]
    return (L ** 2).sum() + L[upper].sum()


def _mask_indices_rewritten(x):
    i, j = np.mask_indices(3, np.triu)  # (views of one array NumPy made)
    a = x.reshape(3, 3)
    v = a[i, j]
    i[:] = 0
    return (v * a[i, j]).sum()


def _raveled_index_rewritten(x):
    k = np.ravel_multi_index(([0, 1, 2], [2, 1, 0]), (3, 3))
    y = x[k]
    k[0] = 4
    return (y * x[k]).sum()


@pytest.mark.parametrize("f", [_triu_indices_rewritten, _tril_indices_shifted,
                               _diag_indices_written_through_one_name,
                               _triu_indices_as_cholesky_mask, _mask_indices_rewritten,
                               _raveled_index_rewritten])
def test_index_arrays_of_numpys_python_functions_written(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42, 0.11]))


# ----------------------------------------------------------------------------------------------
# ndarray's searchsorted method of an array made before the differentiation, with traced
# values to find: np.searchsorted's computation (the method converted them)

KNOTS = np.linspace(-2.0, 2.0, 7)


def _knots_searched_by_the_method(x):
    k = KNOTS.searchsorted(x)
    return (x * k).sum() + x[k % x.size].sum() + KNOTS[1:].searchsorted(x[0] ** 2, "right")


def _knots_of_a_closure_searched():
    knots = np.array([-1.0, 0.0, 0.5, 2.0])

    def f(x):
        k = knots.searchsorted(x * 2.0, side="left")
        return ((x - knots[np.minimum(k, 3)]) ** 2).sum()
    return f


@pytest.mark.parametrize("f", [_knots_searched_by_the_method, _knots_of_a_closure_searched()])
def test_searchsorted_method_of_an_array_made_before(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42, 0.11]))


# ----------------------------------------------------------------------------------------------
# np.rec's record arrays of differentiated values: structured arrays the differentiation
# follows, whose fields read and write as attributes, as NumPy's record arrays

def _records_from_arrays(x):
    r = np.rec.fromarrays([x[:4], 2 * x[4:]], names="t,y")
    r.y[1:] += r.t[:-1]
    r.t = r.t ** 2  # a field set as an attribute
    head = r[:2]  # a record array too
    return np.sum(r.t * r.y) + r.y.max() + head.y.sum() + r[3].t + len(r) * r["y"][0]


def _records_from_records(x):
    r = np.rec.fromrecords([(x[0], 1.0, 3), (x[1] * x[2], x[3], 4)], names="a,b,k")
    for record in r:
        record.a *= 2.0
    return (r.a * r.b).sum() + r.k.sum() * x[4]


def _records_of_a_structured_array(x):
    s = np.zeros(4, dtype=[("u", float), ("v", float)])
    s["u"] = x[:4]
    s["v"] = x[4:] ** 2
    copied, viewed = np.rec.array(s), np.rec.array(s, copy=False)
    viewed.u *= 3.0  # s's memory
    lists = np.rec.array([x[:4], x[4:]], names="p,q")
    return (copied.u * s["u"]).sum() + (viewed.v * copied.v).sum() + lists.q @ lists.p


def _records_viewed(x):
    s = np.zeros(4, dtype=[("u", float), ("v", float)])
    r = s.view(np.recarray)  # s's memory, fields as attributes
    r.u = x[:4]
    r.v[1:] = r.u[:-1] ** 2 * x[5:]
    return (s["v"] * x[4:]).sum() + r[2].u + r[1:].v.sum()


def _records_allocated(x):
    r = np.recarray((4,), dtype=[("u", float), ("v", float)])
    assert isinstance(r, np.recarray)
    r.u = x[:4]
    r.v = x[4:] * 2
    r.u += r.v
    return (r.u ** 2).sum()


@pytest.mark.parametrize("f", [_records_from_arrays, _records_from_records,
                               _records_of_a_structured_array, _records_viewed,
                               _records_allocated])
def test_record_arrays_of_derivatives(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


def test_record_arrays_are_numpys_record_arrays():
    def f(x):
        r = np.rec.fromarrays([x, 2 * x], names="a,b")
        assert isinstance(r, np.recarray) and r.shape == (3,) and r.dtype.names == ("a", "b")
        with pytest.raises(AttributeError):
            r.c
        return r.b.sum()

    np.testing.assert_array_equal(mutad.gradient(f, np.ones(3))[0], [2.0, 2.0, 2.0])


# ----------------------------------------------------------------------------------------------
# np.copy and np.sort of an array of records holding differentiated values: field by field (a
# new array of records, each field copied, or gathered in NumPy's order of the records)

def _records_copied_and_sorted(x):
    s = np.zeros(4, dtype=[("k", int), ("v", float), ("w", float, (2,))])
    s["k"] = [3, 1, 2, 0]
    s["v"] = x[:4]
    s["w"] = x[4:, None] * np.array([1.0, -2.0])
    t = np.sort(s, order="k")
    c = s.copy()
    c["v"] *= 2.0  # a copy: s is as it was
    d = np.copy(s)
    return (t["v"] * np.arange(4)).sum() + (c["v"] * t["w"][:, 1]).sum() + d["w"][0, 0] \
        + s["v"].sum()


def _records_sorted_along_axes(x):
    s = np.zeros((2, 2), dtype=[("a", float), ("b", float)])
    s["a"] = x[:4].reshape(2, 2)
    s["b"] = x[4:].reshape(2, 2)
    t = np.sort(s, order=["b"], axis=0)
    u = np.sort(s, order="a", axis=None)
    return (t["a"] * np.arange(4).reshape(2, 2)).sum() + (u["b"] * np.arange(4)).sum()


@pytest.mark.parametrize("f", [_records_copied_and_sorted, _records_sorted_along_axes])
def test_records_copied_and_sorted(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


# ----------------------------------------------------------------------------------------------
# np.ndarray(shape, buffer=x, offset=..., strides=...) of an array the differentiation follows:
# a view of its memory, as NumPy's

def _ndarray_over_a_buffer(x):
    base = np.zeros(8)
    a = np.ndarray((4,), buffer=base, offset=16)
    a[:] = x[:4]
    b = np.ndarray((2, 2), dtype=float, buffer=x, offset=8, strides=(24, 8))  # x's memory
    return (base ** 2).sum() + a.sum() + (b * np.arange(4.0).reshape(2, 2)).sum()


def test_an_ndarray_over_a_traced_buffer():
    check(_ndarray_over_a_buffer, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))

    def reinterpreted(x):
        return np.ndarray((8,), dtype=np.int64, buffer=x * 2.0).sum()

    with pytest.raises(mutad.MutadError, match="reinterpreting"):
        mutad.gradient(reinterpreted, np.ones(8))


# ----------------------------------------------------------------------------------------------
# ufuncs with several outputs into several out= arrays (refused before)

def _into_several_outs(x):
    q, r = np.empty(4), np.empty(4)
    np.divmod(x * 3.0, 1.0, out=(q, r))
    m = np.empty(4)
    mantissas, exponents = np.frexp(x, out=(m, None))
    f, i = np.modf(x * 2.5, out=(np.empty(4), None))
    return (r ** 2).sum() + (m * exponents).sum() + (f * x).sum() + q.sum() + i @ x


def test_ufuncs_into_several_outs():
    check(_into_several_outs, np.array([0.31, -0.72, 1.13, -0.24]))

    def other_dtype(x):
        q, r = np.empty(4, dtype=np.float32), np.empty(4)
        np.divmod(x, 1.0, out=(q, r))
        return r.sum()

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="dtype float32"):
        mutad.gradient(other_dtype, np.array([0.31, -0.72, 1.13, -0.24]))


# ----------------------------------------------------------------------------------------------
# numpy.lib.recfunctions.structured_to_unstructured of records holding differentiated values
# (refused before): NumPy's view of their memory, through which writes reach the fields, or,
# where NumPy copies (fields of several dtypes), the fields side by side

def _unstructured_view(x):
    from numpy.lib import recfunctions
    p = np.zeros(3, dtype=[("x", float), ("y", float), ("v", float, 2)])
    p["x"], p["y"] = x[:3], x[3:6]
    p["v"] = np.outer(x[:3], [1.0, -2.0])
    xy = recfunctions.structured_to_unstructured(p[["x", "y"]])
    xy[1] *= x[6]  # through the view, into p's fields
    whole = recfunctions.structured_to_unstructured(p)
    d = xy[:, None, :] - xy[None, :, :]
    return np.sum(d ** 2) + (whole * np.arange(12.0).reshape(3, 4)).sum() + p["x"] @ p["y"]


def _unstructured_copy(x):
    from numpy.lib import recfunctions
    p = np.zeros(2, dtype=[("a", float), ("n", np.int64), ("b", float)])
    p["a"], p["b"] = x[:2], x[2:4] ** 2
    p["n"] = [3, 4]
    u = recfunctions.structured_to_unstructured(p)
    u[0, 0] = 5.0  # a copy: p's field stays
    return (u * np.arange(6.0).reshape(2, 3)).sum() + p["a"] @ x[4:6]


def _unstructured_of_constant_records(x):
    # records holding no derivative yet: NumPy's view of their memory is followed in forward
    # mode as in reverse mode (a traced value written into it, into a copy of it)
    from numpy.lib import recfunctions
    a = np.zeros(4, dtype=[("a", float), ("b", float)])
    u = recfunctions.structured_to_unstructured(a)
    A = u.T.copy()
    A[..., 0] = x[0]
    u[1:3] = x[2:4, None] * x[4]  # through the view, into a's fields
    return (A ** 2).sum() + (u * np.arange(8.0).reshape(4, 2)).sum() + a["b"] @ x[:4]


@pytest.mark.parametrize("f", [_unstructured_view, _unstructured_copy,
                               _unstructured_of_constant_records])
def test_structured_to_unstructured(f):
    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36]))


def _with_an_integer_field(x):  # (regression: the integer field's view froze the records'
    # memory, and the undo of the write into p['a'] raised; flat, its cotangent was added
    # into the integer field's shadow)
    p = np.zeros(2, dtype=[("a", float), ("n", np.int64)])
    p["a"] = x[:2]
    p["n"] = [3, -1]
    u = np.concatenate([p["a"].reshape(2, -1), p["n"].reshape(2, -1)], axis=-1)
    flat = np.concatenate([p["a"], p["n"]])
    return (u * np.arange(4.0).reshape(2, 2)).sum() + flat @ x


def test_records_with_an_integer_field_beside_their_floats():
    check(_with_an_integer_field, np.array([0.31, -0.72, 1.13, -0.24]))


# Records with text fields beside their floats (a name, a label): followed as records of
# numbers are; the text is written as NumPy writes it (no derivative flows through it)

def _records_with_a_name(x):
    rec = np.zeros(4, dtype=[("name", "U5"), ("v", float), ("k", int)])
    rec["name"] = "a"
    rec["v"] = x
    rec["k"] = np.arange(4)
    rec["name"][2] = "b"
    return (rec["v"] * rec["k"]).sum() + rec["v"][rec["name"] == "b"].sum()


def _records_sorted_by_a_label(x):
    rec = np.zeros(4, dtype=[("label", "S3"), ("w", float)])
    rec["label"] = [b"d", b"a", b"c", b"b"]
    rec["w"] = x ** 2
    rec.sort(order="label")  # the labels move with their weights
    return (rec["w"] * np.arange(4)).sum() + rec[0]["w"] + (rec["label"] == b"c") @ rec["w"]


def _atoms_by_element(x):
    atoms = np.empty(4, dtype=[("element", "U2"), ("mass", float), ("pos", float, 2)])
    atoms["element"] = ["H", "O", "H", "C"]
    atoms["mass"] = [1.0, 16.0, 1.0, 12.0]
    atoms["pos"] = x[:, None] * np.array([1.0, 0.5])
    hydrogens = atoms["element"] == "H"
    atoms["pos"][hydrogens] *= 2.0
    centre = (atoms["mass"][:, None] * atoms["pos"]).sum(0) / atoms["mass"].sum()
    return (centre ** 2).sum() + atoms["pos"][hydrogens].sum()


ATOMS = np.zeros(3, dtype=[("name", "U2"), ("q", float)])
ATOMS["name"] = ["Na", "Cl", "K"]
ATOMS["q"] = [1.0, -1.0, 1.0]


def _records_made_before_copied(x):
    a = ATOMS.copy()
    a["q"] *= x[:3]
    a["name"][0] = "Li"
    return (a["q"] ** 2).sum() + (a["name"] == "Li") @ x[1:]


def _names_read_as_text(x):
    rec = np.zeros(3, dtype=[("name", "U5"), ("v", float)])
    rec["v"] = x[:3]
    rec["name"][1] = "ab"
    name = rec["name"][1]  # NumPy's str: its length, its methods, + text
    scale = len(name) + name.upper().startswith("A") + len(rec["name"][1] + "c")
    return (rec["v"] * scale).sum() + x[3] * sum(len(n) for n in rec["name"])


def _record_read_field_by_field(x):
    rec = np.zeros(3, dtype=[("name", "U5"), ("tag", "S3"), ("v", float)])
    rec["v"] = x[:3]
    rec["name"][1], rec["tag"][1] = "ab", b"zz"
    one = rec[1]  # NumPy's np.void: its text fields are NumPy's str and bytes
    name, tag = one["name"], rec[1]["tag"]
    scale = len(name) + name.upper().startswith("A") + len(tag) + (one[1] == b"zz") * 3
    if one["name"] == "ab":  # a Python bool, as NumPy's str compares
        scale += len(rec[2]["name"] + "c")
    one[2] = one[2] * x[3]  # its fields by position, read and written through the view
    one[0] = "abc"
    return (rec["v"] * scale).sum() + one["v"] * x[3] + len(rec["name"][1])


@pytest.mark.parametrize("f", [_records_with_a_name, _records_sorted_by_a_label,
                               _atoms_by_element, _records_made_before_copied,
                               _names_read_as_text, _record_read_field_by_field])
def test_records_with_text_beside_their_floats(f):
    before = ATOMS.tobytes()
    check(f, np.array([0.31, -0.72, 1.13, -0.24]))
    assert ATOMS.tobytes() == before


def test_records_made_before_with_text_written():
    """A module's records written (a float field by a traced value, a name by text): followed,
    and left as NumPy's run leaves them."""
    atoms = ATOMS.copy()
    namespace = {"np": np, "ATOMS": atoms}
    exec("def f(x):\n"
         "    ATOMS['q'][1] = x[0]\n"
         "    ATOMS['name'][2] = 'Li'\n"
         "    return (ATOMS['q'] * x[:3]).sum() + (ATOMS['name'] == 'Li') @ x[3:]\n",
         namespace)
    x = np.array([0.3, -0.7, 1.1, 0.2, 0.5, 0.9])
    (g,) = mutad.gradient(namespace["f"], x)
    np.testing.assert_array_equal(g, [1.0 - 0.7, 0.3, 1.0, 0.0, 0.0, 1.0])
    expected = ATOMS.copy()
    namespace["ATOMS"] = expected
    namespace["f"](x)
    assert atoms.tobytes() == expected.tobytes()


def _records_made_before_written_by_field(records):
    namespace = {"R": records}
    exec("def f(x):\n"
         "    R['q'][1:] *= x[0]\n"
         "    R['q'][0] = x[1]\n"
         "    R['k'][0] = 7\n"
         "    return (R['q'] * x).sum()\n", namespace)
    return namespace["f"]


@pytest.mark.parametrize("text", [False, True])
def test_records_made_before_written_by_field_in_forward_mode(text):
    """A field of records made before the call, written: forward mode adopts all of the
    records (it took the field's view as an argument's array, and raised an AttributeError);
    under nested differentiation, refused with what to do, the records left as they were."""
    dtype = [("k", int), ("q", float)] + ([("name", "U2")] * text)
    start = np.array([(1, 1.0) + ("a",) * text, (2, 2.0) + ("b",) * text,
                      (3, 3.0) + ("c",) * text], dtype=dtype)
    x, direction = np.array([0.5, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])
    expected = start.copy()
    value = _records_made_before_written_by_field(expected)(x.copy())  # x0 x1 + 2 x0 x1 + 3 x0 x2
    gradient = np.array([3 * x[1] + 3 * x[2], 3 * x[0], 3 * x[0]])
    records = start.copy()
    y, tangent = mutad.jvp(_records_made_before_written_by_field(records), (x,), (direction,))
    assert y == value and records.tobytes() == expected.tobytes()
    np.testing.assert_allclose(tangent, gradient @ direction, rtol=1e-14)
    records = start.copy()
    np.testing.assert_array_equal(
        mutad.gradient(_records_made_before_written_by_field(records), x)[0], gradient)
    assert records.tobytes() == expected.tobytes()
    records = start.copy()
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="nested"):
        mutad.hessian(_records_made_before_written_by_field(records), x)
    assert records.tobytes() == start.tobytes()


def _structured_view_of_floats(x):
    from numpy.lib import recfunctions
    y = x * 2.0
    s = recfunctions.unstructured_to_structured(y.reshape(3, 2), names=["a", "b"])
    s["a"] *= x[:3]  # through the records, into y
    plain = recfunctions.unstructured_to_structured(np.ones((2, 2)), names=["p", "q"])
    return (s["a"] * s["b"]).sum() + y @ x + plain["q"].sum()


def test_unstructured_to_structured():
    """NumPy's records viewing the floats' memory, as a view of the traced array (it had no
    rule); where NumPy copies (another dtype), refused with the way out."""
    check(_structured_view_of_floats, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93]))

    def copied(x):
        from numpy.lib import recfunctions
        s = recfunctions.unstructured_to_structured(
            x.reshape(3, 2), np.dtype([("a", np.float32), ("b", np.float32)]))
        return s["a"].sum()

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="write each field"):
        mutad.gradient(copied, np.ones(6))


# ----------------------------------------------------------------------------------------------
# float() called by the differentiated code: Python's float of a traced value, followed as
# x.item() is (it was refused, though the code of the same meaning with .item() was followed)

def _float_of_the_loss(x):
    return float(np.sum(x ** 2)) + x[0]


def _float_of_elements(x):
    loss = 0.0
    for v in x:
        loss += float(v) ** 2 * np.cos(float(v))
    return loss


def _float_of_a_buffers_sum(x):
    prev, cur = np.empty_like(x), np.empty_like(x)
    prev[...] = x
    cur[:] = 0.9 * x
    for _ in range(3):
        prev, cur = cur, 2 * cur - prev + 0.2 * (np.roll(cur, 1) - 2 * cur + np.roll(cur, -1))
    return float(np.sum(cur ** 2)) * float(x.max())


def _float_beside_floats_as_a_type(x):
    y = np.zeros(3, dtype=float)  # the name as a dtype, and a type, in the same function
    y[:] = x * float(x[1])
    assert isinstance(float(x[0]), float) and isinstance(1.5, float) and issubclass(float, float)
    return y.sum() + float("0.5") * float(2) * x[2]


def _float_handed_on(x):
    values = list(map(float, x))  # (float loaded, not called here: map calls it)
    sums = collections.defaultdict(float)
    for i, v in enumerate(values):
        sums[i % 2] += v * v
    return sums[0] - sums[1] + math.fsum(map(float, x))


@pytest.mark.parametrize("f", [_float_of_the_loss, _float_of_elements, _float_of_a_buffers_sum,
                               _float_beside_floats_as_a_type, _float_handed_on])
def test_float_of_traced_values_is_followed(f):
    check(f, np.array([0.31, -0.72, 1.13]))
    assert "float" not in globals()  # the mode's float bound for the differentiation only



# ----------------------------------------------------------------------------------------------
# Forward mode: a view NumPy's function gives of an array f made (np.einsum('ii->i', D), which
# views D's diagonal) was a plain array, so a write of a dual into it was refused, where reverse
# mode followed it; now the same view of the dual, as reverse mode's constant_result gives

def _einsum_diagonal_written(x):
    D = np.diag(np.ones(3))
    np.einsum("ii->i", D)[...] = x
    return np.linalg.det(D) + D.sum()


def _einsum_transpose_written(x):
    M = np.zeros((3, 2))
    np.einsum("ij->ji", M)[0] = x
    M[:, 1] = x ** 2
    return (M @ np.array([1.0, -2.0])).prod()


@pytest.mark.parametrize("f", [_einsum_diagonal_written, _einsum_transpose_written])
def test_views_of_arrays_f_made_written_in_forward_mode(f):
    check(f, np.array([0.31, -0.72, 1.13]))


# ----------------------------------------------------------------------------------------------
# repr() of an array under nested differentiation (a Hessian): NumPy's text, as at one level
# (it converted the enclosing differentiation's traced value)

def test_repr_of_an_array_under_nested_differentiation():
    shown = []

    def f(x):
        with np.printoptions(precision=3, suppress=True):
            shown.append((repr(x * 2), repr(x[1:]), str(x), repr(x[0])))
        return (x ** 3).sum() * (len(shown[-1][0]) > 0)

    x = np.array([0.3, -0.7, 1.1])
    expected = f(x.copy()) and shown.pop()
    np.testing.assert_allclose(mutad.hessian(f, x), np.diag(6.0 * x), rtol=1e-14)
    assert shown.pop() == expected
    direction = np.array([1.0, 0.5, -2.0])
    _, tangent = mutad.jvp(lambda x: mutad.gradient(f, x)[0], (x,), (direction,))
    np.testing.assert_allclose(tangent, 6.0 * x * direction, rtol=1e-14)
    assert shown.pop() == expected


# ----------------------------------------------------------------------------------------------
# NumPy's named results (np.linalg.qr's, eigh's, svd's, slogdet's) of constants f made: their
# float arrays constants too, as a plain tuple's are (they stayed plain, and a traced write
# into one was refused)

def _factors_of_constants_written(x):
    Q, R = np.linalg.qr(np.vander(np.linspace(0.0, 1.0, x.size), 3))
    R[0, 0] = x[0]
    eigen = np.linalg.eigh(np.diag([1.0, 2.0, 3.0]) + 0.1)
    eigen.eigenvectors[:, 0] = x[:3]
    u, s, vt = np.linalg.svd(np.eye(3) * 2.0 + 0.5)
    s *= x[3:6]
    sign, logdet = np.linalg.slogdet(np.eye(2) * 3.0)
    return (R ** 2).sum() + (Q.T @ x).sum() + (eigen.eigenvectors.T @ eigen.eigenvectors).sum() \
        + eigen.eigenvalues @ x[3:6] + ((u * s) @ vt[0]).sum() + sign * logdet * x[6]


def test_named_results_of_constants_written():
    def f(x):
        result = np.linalg.qr(np.eye(3) + 1.0)
        assert type(result).__name__ == "QRResult" and result.Q is result[0]
        return _factors_of_constants_written(x)

    check(f, np.array([0.31, -0.72, 1.13, -0.24, 0.57, 0.93, -1.36, 0.42]))


# ----------------------------------------------------------------------------------------------
# np.array of a structured dtype from tuples (the records) holding traced values: each tuple one
# record, its items the fields (they were stacked as rows and cast, each number to every field:
# a wrong value)

def _records_of_tuples(x):
    r = np.array([(x[0], 1), (x[1] ** 2, 2)], dtype=[("v", "f8"), ("n", "i8")])
    return (r["v"] * r["n"]).sum()


def _records_of_tuples_in_rows(x):
    r = np.array([[(x[0], x[1])], [(2.0, x[2] ** 2)]], dtype=[("a", "f8"), ("b", "f8")])
    return (r["a"] * r["b"]).sum() + r["b"][1, 0]


def _records_with_a_subarray_field(x):
    r = np.asarray([(x[:2], 1.5), (x[1:], x[0])], dtype=[("u", "f8", (2,)), ("w", "f8")])
    return (r["u"] ** 2 * r["w"][:, None]).sum()


@pytest.mark.parametrize("f", [_records_of_tuples, _records_of_tuples_in_rows,
                               _records_with_a_subarray_field])
def test_records_of_tuples_holding_traced_values(f):
    check(f, np.array([0.31, -0.72, 1.13]))


# ----------------------------------------------------------------------------------------------
# np.r_ and np.c_ of traced values with a slice (a range) or a directive (axis, least number of
# dimensions, where the items' axes go): NumPy's concatenation, made by the engines (NumPy's own
# converted the traced items)

def _joined_with_a_range(x):
    y = np.r_[x, 1:4, 0:1:3j]
    return (y ** 2 * np.arange(y.size)).sum()


def _joined_by_a_directive(x):
    a = np.r_["0,2", x, x * 2]
    b = np.r_["1,2,0", x, [1.0, x[0], 3.0]]
    c = np.r_["-1", x, x[::-1]]
    return (a ** 2).sum() + (b * np.arange(6.0).reshape(3, 2)).sum() + c @ np.cos(c)


def _columns_with_a_range(x):
    return (np.c_[x, 0:3, x ** 2] @ np.array([1.0, 0.5, -2.0]) ** 2).sum()


@pytest.mark.parametrize("f", [_joined_with_a_range, _joined_by_a_directive,
                               _columns_with_a_range])
def test_index_concatenations_with_ranges_and_directives(f):
    check(f, np.array([0.31, -0.72, 1.13]))


# ----------------------------------------------------------------------------------------------
# np.polydiv of traced coefficients: NumPy's long division step by step (it had no rule)

def _divided(x):
    q, r = np.polydiv(x[:4], x[4:])
    return (q ** 2).sum() + (r * np.arange(1, r.size + 1)).sum()


def _divided_by_a_constant(x):
    q, r = np.polydiv(x[:3], np.array([1.0, -1.0]))
    return q @ q + r.sum()


def _dividing_a_constant(x):
    q, r = np.polydiv(np.array([1.0, 2.0, 2.0]), x[1:3])
    return q.sum() * r[0]


def _divided_by_a_longer_one(x):
    q, r = np.polydiv(x[:2], x[2:5])
    return q.sum() + (r ** 2).sum()


@pytest.mark.parametrize("f", [_divided, _divided_by_a_constant, _dividing_a_constant,
                               _divided_by_a_longer_one])
def test_polydiv(f):
    check(f, np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87]))


def test_polydiv_dropping_a_differentiated_remainder_coefficient_is_refused():
    def f(x):
        u = np.array([1.0, 0.0, 0.0, 2.0]) + np.array([0.0, 0.0, 1.0, 0.0]) * x[0]
        return np.polydiv(u, np.array([1.0, 0.0, 0.0]))[1].sum()

    assert f(np.array([0.0])) == 2.0  # NumPy drops the remainder's leading 0 (x[0])
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="np.polydiv"):
        mutad.gradient(f, np.array([0.0]))


# ----------------------------------------------------------------------------------------------
# MaskedArray.argmin and argmax of traced values: NumPy's positions, of the data with the masked
# elements filled by the value that never wins (they were missing attributes)

def _masked_positions(x):
    m = np.ma.masked_where(x > 1.0, x)
    a = np.ma.masked_less(x.reshape(2, 3), 0)
    rows = a.argmax(axis=1)
    columns = np.ma.argmin(a, axis=0, keepdims=True)
    return x[m.argmin()] * x[m.argmax()] + (x.reshape(2, 3)[np.arange(2), rows] ** 2).sum() \
        + x.reshape(2, 3)[columns[0], np.arange(3)].sum()


def test_masked_argmin_and_argmax():
    check(_masked_positions, np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87]))


# ----------------------------------------------------------------------------------------------
# np.unique of traced values: NumPy's values, each gathered from its first occurrence (it had no
# rule); its index, inverse and counts NumPy's

def _unique_of_copies(x):
    u = np.unique(np.concatenate([x, x[:2]]))
    return (u ** 2 * np.arange(u.size)).sum()


def _unique_inverse_and_counts(x):
    u, inverse, counts = np.unique(np.concatenate([x, x[:2]]), return_inverse=True,
                                   return_counts=True)
    return (u * counts).sum() + (u[inverse] ** 2).sum()


def _unique_rows(x):
    rows = np.concatenate([x.reshape(2, 3), x.reshape(2, 3)[:1]])
    u, index = np.unique(rows, axis=0, return_index=True)
    return (u ** 2 * np.arange(u.size).reshape(u.shape)).sum() + index.sum()


@pytest.mark.parametrize("f", [_unique_of_copies, _unique_inverse_and_counts, _unique_rows])
def test_unique_of_traced_values(f):
    check(f, np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87]))


# ----------------------------------------------------------------------------------------------
# traced values written into the float arrays np.polynomial's routed functions make of plain
# values (a Vandermonde matrix, NumPy's view of one with its axes moved; a fit's coefficients):
# constants of the differentiation, as np.zeros' are

def _polyvander_written(x):
    V = np.polynomial.polynomial.polyvander(np.linspace(0.0, 1.0, 5), 3)  # (a view)
    V[:, 0] = x[0] * 2.0
    V[1:, 1] += x[1] ** 2
    V *= x[2]
    return (V ** 2).sum() + (V @ x).sum()


def _chebvander_fit_written(x):
    t = np.linspace(-1.0, 1.0, 6)
    V = np.polynomial.chebyshev.chebvander(t, 3)
    c = np.polynomial.chebyshev.chebfit(t, np.cos(t), 3)
    c[1:] += x[:3]
    V[2] = x
    return np.polynomial.chebyshev.chebval(0.3, c) + (V @ c).sum() ** 2


def _hermvander_written(x):
    V = np.polynomial.hermite.hermvander([0.1, 0.5, 0.9], 3)
    V[0, :] = x
    return np.sin(V).sum() * x[3]


@pytest.mark.parametrize("f", [_polyvander_written, _chebvander_fit_written,
                               _hermvander_written])
def test_writes_into_arrays_np_polynomial_makes(f):
    check(f, np.array([0.3, -0.7, 1.1, 0.4]))


# ----------------------------------------------------------------------------------------------
# np.linspace(..., retstep=True): its samples, a new float array, a constant the function may
# write traced values into, as np.linspace's without the step

def _linspace_with_step_written(x):
    t, dt = np.linspace(0.0, 1.0, 4, retstep=True)
    t[1:3] = x[:2] * dt
    t *= x[3]
    return (np.sin(t) ** 2).sum() + dt * t @ x


def test_writes_into_linspace_samples_with_their_step():
    check(_linspace_with_step_written, np.array([0.3, -0.7, 1.1, 0.4]))


# ----------------------------------------------------------------------------------------------
# a masked array made in the function over a float array it allocated (np.zeros, a copy):
# NumPy's masked array views that array, so the traced values written into either (m[:] = ...,
# np.ma.getdata(m)[i] = ..., m *= x) are followed, as np.ma.zeros' are

def _masked_over_zeros_written(x):
    m = np.ma.masked_array(np.zeros(6), mask=[0, 0, 1, 0, 0, 1])
    m[:] = x ** 2
    m[0] = x[1]
    return float(np.ma.sum(m)) + float(m.filled(0.0) @ x)


def _masked_data_written(x):
    base = np.linspace(0.0, 1.0, 6)
    m = np.ma.masked_greater(np.ma.masked_array(base), 0.7)
    d = np.ma.getdata(m)
    d[1:3] = x[:2] * 3.0
    m *= x[4]
    return float(m.mean()) + (base * x).sum()


def _masked_own_data_written(x):
    m = np.ma.masked_array(np.zeros(6), mask=[True, False, False, False, False, False])
    np.ma.getdata(m)[:] = x
    return m.sum()


@pytest.mark.parametrize("f", [_masked_over_zeros_written, _masked_data_written,
                               _masked_own_data_written])
def test_writes_into_masked_arrays_over_allocated_floats(f):
    check(f, np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87]))


def _masked_less_of_a_constant_filled_written(x):
    m = np.ma.masked_less(np.linspace(-1.0, 1.0, 6), 0.0)
    w = m.filled(0.5)
    w[:3] = x[3:] * w[3:]
    c = np.ma.masked_greater(np.arange(6.0), 3.5).compressed()
    c[1:] += x[:3]
    return (w * x).sum() + (c ** 2).sum() + float(m.sum())


def test_masks_of_allocated_floats_filled_and_written():
    check(_masked_less_of_a_constant_filled_written,
          np.array([0.31, -0.72, 1.13, 0.54, -0.25, 0.87]))


# ----------------------------------------------------------------------------------------------
# a series made in the function of a float array it allocated: its coefficients (NumPy's copy)
# are followed, so traced values written into p.coef reach what the series computes

def _series_coefficients_written(x):
    p = np.polynomial.Polynomial(np.ones(4))
    p.coef[1:3] = x[:2] * 2.0
    p.coef *= x[3]
    q = p * p + p.deriv()
    return p(0.4) + q(x[2]) + np.sum(p.coef ** 2)


def _chebyshev_of_linspace_written(x):
    c = np.polynomial.Chebyshev(np.linspace(0.5, 1.0, 4), domain=[-2.0, 2.0])
    c.coef[0] = x[0] ** 2
    return c(x[1]) + c.integ()(x[2]) * x[3]


@pytest.mark.parametrize("f", [_series_coefficients_written, _chebyshev_of_linspace_written])
def test_writes_into_coefficients_of_a_series_of_allocated_floats(f):
    check(f, np.array([0.3, -0.7, 1.1, 0.4]))


# ----------------------------------------------------------------------------------------------
# np.copyto (and np.put) of traced floats into an integer array the function made:
# NumPy's cast values, no derivative through them, as an assignment (o[...] = x * 4) writes them

def _copyto_into_integers(x):
    o = np.zeros(3, int)
    np.copyto(o, x * 4, casting="unsafe")
    return (x ** 2).sum() + o.sum() * x[0] + o[2]


def _copyto_into_integers_where(x):
    o = np.full(3, 7, np.int32)
    np.copyto(o, x * 4, casting="unsafe", where=[True, False, True])
    return (x * o).sum()


def _put_into_integers(x):
    o = np.zeros(3, np.int64)
    np.put(o, [2, 0], x[:2] * 4)
    return (x * o).sum()


@pytest.mark.parametrize("f", [_copyto_into_integers, _copyto_into_integers_where,
                               _put_into_integers])
def test_writes_of_traced_floats_into_integer_arrays(f):
    check(f, np.array([0.3, -0.7, 1.1]))


def test_copyto_into_integers_keeps_numpys_casting_check():
    def f(x):
        np.copyto(np.zeros(3, int), x * 4)  # same_kind: NumPy's TypeError
        return x.sum()

    with pytest.raises(TypeError, match="same_kind"):
        mutad.gradient(f, np.array([0.3, -0.7, 1.1]))


# ----------------------------------------------------------------------------------------------
# Floats of an array of plain objects (np.array(numbers, dtype=object), np.empty's filled, a
# ufunc np.frompyfunc made of constants) written into: followed, as np.array of the numbers is

def _floats_of_objects(x):
    a = np.array([1.0, 2.0, 3.0], dtype=object).astype(float)
    a[0] = x[0]
    return (a * x).sum()


def _floats_of_filled_objects(x):
    o = np.empty(3, dtype=object)
    o[:] = [1.5, 2, 3.0]
    a = np.asarray(o, dtype=float)
    a[1:] += x[1:] ** 2
    return (a * x).sum()


def _floats_of_a_pyfunc_ufunc(x):
    twice = np.frompyfunc(lambda v: v * 2, 1, 1)
    a = twice(np.arange(3.0)).astype(float)
    a[2] = x[2] * x[0]
    return (a * x).sum()


@pytest.mark.parametrize("f", [_floats_of_objects, _floats_of_filled_objects,
                               _floats_of_a_pyfunc_ufunc])
def test_floats_of_plain_objects_take_traced_values(f):
    check(f, np.array([0.3, -0.7, 1.1]))
