"""Float arrays NumPy's functions make of plain values in the differentiated function, then
written with traced values: functions NumPy's ``__array_function__`` protocol dispatches
(``np.choose``, ``np.polyadd``, ``np.block``, ``np.union1d``), NumPy's scalar types called on
lists (``np.float32([1, 2])``), and calls of plain arrays the function made by a call the
mode does not follow or reads from a cache (``np.tile(Q[0], 2)`` of a deque's array). Their
new arrays are constants, followed as np.zeros' are: values bit for bit as NumPy's, gradients
as finite differences give, on traced and replayed calls, the module's arrays left as they
were; views and arguments stay what NumPy gives."""

import collections

import numpy as np
import pytest
from rule_checks import central_differences

import mutad
from mutad.errors import MutadError

M0 = np.array([[2., 1., 0.], [1., 3., 1.], [0., 1., 4.]])


def _cache(*arrays):
    return collections.deque(np.array(a, dtype=float) for a in arrays)


PROGRAMS = {
    "choose of lists": ("""
def f(x):
    c = np.choose([0, 1, 0], [[1., 2., 3.], [4., 5., 6.]])
    c[1] *= x[1]
    return c @ x[:3]
""", {}),
    "concat of lists": ("""
def f(x):
    c = np.concat([[1., 2.], [3., 4., 5., 6.]])
    c[0] = x[0]
    return c @ x
""", {}),
    "compress": ("""
def f(x):
    c = np.compress([True, False, True], [1., 2., 3.])
    c[0] = x[0]
    return c @ x[:2]
""", {}),
    "poly of roots": ("""
def f(x):
    c = np.poly([1., 2., 3.])
    c[0] = x[0]
    return np.polyval(c, x[1])
""", {}),
    "polyadd": ("""
def f(x):
    c = np.polyadd([1., 2.], [1., 0., 3.])
    c[1] = x[1]
    return c @ x[:3]
""", {}),
    "polymul read after write": ("""
def f(x):
    c = np.polymul([1., 2.], [1., 0., 3.])
    c[1] *= x[1]
    return c @ x[:4] + c[1] * c[2]
""", {}),
    "polysub": ("""
def f(x):
    c = np.polysub([1., 2., 4.], [1., 0., 3.])
    c[2] = x[2]
    return c @ x[:3]
""", {}),
    "polydiv quotient and remainder": ("""
def f(x):
    q, r = np.polydiv([1., 2., 4.], [1., 1.])
    q[0] = x[0]
    r[-1] += x[1]
    return q @ x[:2] + r.sum() * x[2]
""", {}),
    "sort_complex": ("""
def f(x):
    c = np.sort_complex([3., 1., 2.])
    c[0] = x[0]
    return np.abs(c * x[:3]).sum()
""", {}),
    "union1d": ("""
def f(x):
    u = np.union1d([1., 2.], [2., 3.])
    u[0] = x[0]
    return u @ x[:3]
""", {}),
    "setxor1d": ("""
def f(x):
    u = np.setxor1d([1., 2., 5.], [2., 3.])
    u[1] = x[1]
    return u @ x[:3]
""", {}),
    "unique_counts' values": ("""
def f(x):
    r = np.unique_counts([1., 1., 2.])
    v = r.values
    v[0] = x[0]
    return v @ x[:2] + r.counts @ x[2:4]
""", {}),
    "unique_inverse's values": ("""
def f(x):
    v, inverse = np.unique_inverse([2., 1., 2.])
    v[1] = x[1]
    return v[inverse] @ x[:3]
""", {}),
    "block of lists": ("""
def f(x):
    b = np.block([[1., 2.], [3., 4.]])
    b[0, 0] = x[0]
    return np.linalg.det(b)
""", {}),
    "block of float64 pieces": ("""
def f(x):
    b = np.block([[np.float64([[1]]), np.float64([[2, 3]])],
                  [np.float64([[4]]), np.float64([[5, 6]])]])
    b[1, 1:] = x[1:3]
    return (b @ x[:3]).sum()
""", {}),
    "select of lists": ("""
def f(x):
    s = np.select([[True, False, True]], [[1., 2., 3.]], 5.0)
    s[1] = x[1]
    return s @ x[:3]
""", {}),
    "float32 of a list": ("""
def f(x):
    a = np.float32([1, 2, 3])
    a[0] = x[0]
    return (a * x[:3]).sum()
""", {}),
    "float64 of a list, written": ("""
def f(x):
    a = np.float64([1., 2., 3.])
    a[1] = x[1]
    return a @ x[:3]
""", {}),
    "complex128 of a list": ("""
def f(x):
    a = np.complex128([1., 2j, 3.])
    a[0] = x[0]
    return np.abs(a * x[:3]).sum()
""", {}),
    "tile of float32 of a list": ("""
def f(x):
    b = np.tile(np.float32([1, 2]), 3)
    b[2] = x[2]
    return (b * x).sum()
""", {}),
    "cumsum of float64 of a list": ("""
def f(x):
    c = np.cumsum(np.float64([1, 2, 3]))
    c[0] = x[0]
    return c @ x[:3]
""", {}),
    "pad of float32 of a list": ("""
def f(x):
    a = np.pad(np.float32([1, 2]), 2)
    a[0] = x[0]
    return (a * x).sum()
""", {}),
    "kron of float32 of a list": ("""
def f(x):
    a = np.kron(np.float32([1, 2]), np.float32([1, 1, 1]))
    a[0] = x[0]
    return a @ x
""", {}),
    "outer of float64 of lists, row view": ("""
def f(x):
    o = np.outer(np.float64([1, 2]), np.float64([1, 2, 3]))
    row = o[1]
    row *= x[:3]
    return (o ** 2).sum()
""", {}),
    "linalg.inv of float64 of a list": ("""
def f(x):
    a = np.linalg.inv(np.float64([[2, 1], [1, 3]]))
    a[0] *= x[:2]
    return (a @ x[2:4]).sum()
""", {}),
    "fft of complex128 of a list": ("""
def f(x):
    F = np.fft.fft(np.complex128([1, 2, 3, 4]))
    F[0] = x[0] + 1j * x[1]
    return np.abs(np.fft.ifft(F)).sum()
""", {}),
    "cumsum of a cache's array": ("""
def f(x):
    a = np.cumsum(Q[0])
    a[0] = x[0]
    return a @ x
""", {"Q": _cache(np.linspace(0., 1., 6))}),
    "tile of a cache's array": ("""
def f(x):
    a = np.tile(Q[0], 2)
    a[0] = x[0]
    return a @ x
""", {"Q": _cache(np.linspace(0., 1., 3))}),
    "concatenate of cache's arrays": ("""
def f(x):
    a = np.concatenate([Q[0], Q[1]])
    a[3:] *= x[3:]
    return a @ x
""", {"Q": _cache([1., 2., 3.], [4., 5., 6.])}),
    "polyval of cache's arrays, reversed view": ("""
def f(x):
    v = np.polyval(Q[0], Q[1])
    v[::-1][:2] = x[:2]
    return (v ** 2).sum() + v[3] * v[-1]
""", {"Q": _cache([1., 2., 3.], np.linspace(0., 1., 6))}),
    "einsum of a cache's arrays": ("""
def f(x):
    K = np.einsum("i,j->ij", Q[0], Q[1])
    K[0, 0] += x[0]
    K[1] = x[1:3]
    return (K * K).sum()
""", {"Q": _cache([1., 2.], [3., 4.])}),
    "sort of a cache's array, 2-d": ("""
def f(x):
    s = np.sort(Q[0].reshape(2, 3), axis=1)
    s[:, 0] = x[:2]
    return (s ** 2).sum() + s[0, 0] * s[1, 2]
""", {"Q": _cache([3., 1., 2., 6., 5., 4.])}),
    "linalg.solve of a cache's arrays": ("""
def f(x):
    s = np.linalg.solve(Q[0].reshape(2, 2), Q[1])
    s[1] = x[1]
    return s @ x[:2]
""", {"Q": _cache([2., 1., 1., 3.], [1., 2.])}),
    "cumprod of a cache's array": ("""
def f(x):
    w = np.cumprod(Q[0])
    w[1:] = x[1:] * w[1:]
    return w.sum()
""", {"Q": _cache(np.linspace(0.5, 1.5, 6))}),
    "diff of float32 of a list": ("""
def f(x):
    d = np.diff(np.float32([1, 4, 9, 16]))
    d[0] = x[0]
    return (d * x[:3]).sum()
""", {}),
    "polyfit of float64 of lists": ("""
def f(x):
    c = np.polyfit(np.float64([0, 1, 2, 3]), np.float64([1, 3, 5, 7]), 1)
    c[0] = x[0]
    return np.polyval(c, x[1])
""", {}),
    "interp of a cache's arrays": ("""
def f(x):
    v = np.interp(Q[2], Q[0], Q[1])
    v[1:] += x[1:]
    return (v ** 2).sum()
""", {"Q": _cache([0., 1.], [0., 2.], np.linspace(0., 1., 6))}),
    "histogram2d counts and edges": ("""
def f(x):
    h, ex, ey = np.histogram2d([0.1, 0.4, 0.8], [0.2, 0.9, 0.3], bins=2)
    h[0, 0] = x[0]
    ex[0] = x[1]
    return (h ** 2).sum() + ex @ x[:3]
""", {}),
    "choose of cache's arrays": ("""
def f(x):
    c = np.choose([0, 1, 0, 1, 0, 1], [Q[0], Q[1]])
    c[0] = x[0]
    return c @ x
""", {"Q": _cache(np.linspace(0., 1., 6), np.linspace(2., 3., 6))}),
    "matrix_transpose of float64 of a list": ("""
def f(x):
    K = np.linalg.matrix_transpose(np.float64([[1, 2, 3], [4, 5, 6]]))
    K[0] = x[:2]
    return (K ** 2).sum()
""", {}),
    "multi_dot of cache's arrays": ("""
def f(x):
    K = np.linalg.multi_dot([Q[0].reshape(2, 2), Q[1].reshape(2, 2), Q[0].reshape(2, 2)])
    K[0] = x[:2]
    return (K @ x[2:4]).sum()
""", {"Q": _cache([1., 2., 3., 4.], [0., 1., 1., 0.])}),
    "array_split of float64 of a list, several views": ("""
def f(x):
    a = np.float64([1, 2, 3, 4, 5, 6])
    p, q = np.array_split(a, 2)
    p[0] = x[0]
    q *= x[3:]
    return (a ** 2).sum() + p @ q
""", {}),
    "eigh of a global, eigenvalues and vectors": ("""
def f(x):
    w, v = np.linalg.eigh(M0)
    w[0] = x[0]
    v[:, 1] *= x[1]
    return w @ x[:3] + (v ** 2).sum()
""", {"M0": M0}),
    "eig of a global, complex vectors": ("""
def f(x):
    w, v = np.linalg.eig(M0)
    v[0] = x[:3]
    return (v ** 2).sum().real + w.real @ x[3:]
""", {"M0": M0}),
    "svd of a global": ("""
def f(x):
    u, s, vt = np.linalg.svd(M0)
    s[0] = x[0]
    return (u * s @ vt).sum()
""", {"M0": M0}),
    "qr of a cache's array": ("""
def f(x):
    q, r = np.linalg.qr(Q[0])
    r[0, 1] = x[0]
    return (q @ r).sum() * x[1]
""", {"Q": collections.deque([np.array([[2., 1.], [1., 3.]])])}),
    "eigh of a list": ("""
def f(x):
    w, v = np.linalg.eigh([[2., 1.], [1., 3.]])
    w[0] = x[0]
    v[0] *= x[1:3]
    return w @ x[:2] + (v ** 2).sum()
""", {}),
    "emath.sqrt of a list": ("""
def f(x):
    c = np.emath.sqrt([-1., 4.])
    c[0] = x[0]
    return np.abs(c * x[:2]).sum()
""", {}),
    "unique_all's values": ("""
def f(x):
    r = np.unique_all([3., 1., 3.])
    v = r.values
    v[1] = x[1]
    return v @ x[:2] + r.counts @ x[2:4]
""", {}),
    "polynomial's linspace": ("""
P = np.polynomial.Polynomial(PC)
def f(x):
    t, y = P.linspace(6)
    y[1:3] = x[:2] * y[1:3]
    t[0] = x[2]
    return (y ** 2).sum() + t @ y
""", {"PC": [1., 2., 3.]}),
    "chebyshev fit, its derivative called on a grid": ("""
def f(x):
    c = np.polynomial.Chebyshev.fit(np.linspace(0., 1., 7), np.arange(7.) ** 2, 3)
    y = c.deriv()(np.linspace(0., 1., 5))
    y[::2] *= x[:3]
    t, z = c.linspace(4, domain=[0., 2.])
    z[-1] = x[3]
    return (y ** 2).sum() + z @ t
""", {}),
}


def _program(source, arrays):
    namespace = {"np": np, **arrays}
    exec(source, namespace)  # noqa: S102 (a test's own module)
    return namespace["f"], namespace


def _as_bytes(v):
    return v.tobytes() if isinstance(v, np.ndarray) else [np.asarray(a).tobytes() for a in v]


@pytest.mark.parametrize("replay", [False, True])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name, replay):
    source, arrays = PROGRAMS[name]
    f, namespace = _program(source, arrays)
    held = {key: _as_bytes(namespace[key]) for key in arrays}
    x = np.array([0.3, 1.1, -0.7, 1.9, 0.45, 1.3])
    given = x.copy()
    differentiate = mutad.value_and_grad(f, replay=replay)
    for _ in range(2 if replay else 1):
        value, gradient = differentiate(x)
    assert x.tobytes() == given.tobytes()
    assert {key: _as_bytes(namespace[key]) for key in arrays} == held
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    h = 1e-6 if "32" not in name else 1e-3
    np.testing.assert_allclose(gradient, central_differences(f, x, h),
                               rtol=1e-5 if "32" not in name else 1e-2, atol=1e-6)


def test_arguments_and_their_views_stay_numpys():
    """Calls that give their argument itself or a view of it keep doing so in the mode: a plain
    array the function holds, and NumPy's own views of it, are not new arrays."""
    seen = {}

    def f(x):
        a = np.float64([1., 2., 3.])  # (a constant, new)
        plain = Q[0]
        seen["same"] = np.asarray(plain) is plain and np.atleast_1d(plain) is plain \
            and np.astype(plain, np.float64, copy=False) is plain \
            and np.fix([1.5, -2.5, 3.0], out=plain) is plain
        seen["view"] = type(np.reshape(plain, (3, 1))) is np.ndarray
        return (a * x).sum()

    Q = _cache([1., 2., 3.])
    mutad.gradient(f, np.ones(3))
    assert seen == {"same": True, "view": True}
    assert Q[0].tolist() == [1.0, -2.0, 3.0]  # (NumPy's write into it)


def test_integer_results_stay_plain_numbers():
    """Integer and boolean results of the functions NumPy dispatches are integers: usable as
    indices, their values NumPy's."""
    def f(x):
        i, j = np.unravel_index([1, 5], (2, 3))
        inside = np.isin([1., 4.], [1., 2.])
        w = np.zeros((2, 3))
        w[i, j] = x[:2]
        return (w ** 2).sum() + inside.sum() * x[2]

    x = np.array([0.5, 1.5, 2.0])
    np.testing.assert_allclose(mutad.gradient(f, x)[0], [1.0, 3.0, 1.0])


def test_a_write_into_a_cached_arrays_copy_by_its_method_is_refused():
    """``Q[0].copy()`` of an array held in a cache is NumPy's method of a plain array, which no
    mode reaches: a traced value written into it is refused, saying what to do."""
    Q = _cache([1., 2., 3.])

    def f(x):
        a = Q[0].copy()
        a[0] = x[0]
        return a @ x

    with pytest.raises(MutadError, match="np.array"):
        mutad.gradient(f, np.ones(3))


def _warned_lines(run):
    """The (file, line) of each warning ``run()`` issues under the "always" filter, and how
    many Python's "default" filter shows."""
    import warnings
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        run()
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        run()
    return [(w.filename, w.lineno) for w in issued], len(shown)


@pytest.mark.parametrize("replay", [False, True])
def test_numpys_warnings_name_the_callers_line(replay):
    # NumPy's warnings.warn(..., stacklevel=2) names the line that called it: of a constant
    # (np.nanmean of an all-NaN slice) and of a function the mode wraps (np.polyfit, poorly
    # conditioned); two lines warning the same text show twice under "default", as in NumPy,
    # and a filter by the user's module reaches them.
    namespace = {"np": np, "__name__": "made_warnings"}
    exec(compile("""
def f(x):
    a = np.nanmean(np.full(3, np.nan))
    b = np.nanmean(np.full(3, np.nan))
    c = np.polyfit(np.arange(3.), np.ones(3), 5)
    d = np.polyfit(np.arange(3.), np.ones(3), 5)
    return (x * 2.).sum()
""", "made_warnings.py", "exec"), namespace)
    f = namespace["f"]
    x = np.ones(2)
    gradient = mutad.grad(f, replay=replay)
    expected = [("made_warnings.py", line) for line in (3, 4, 5, 6)]
    assert _warned_lines(lambda: f(x)) == (expected, 4)
    for _ in range(2 if replay else 1):
        assert _warned_lines(lambda: gradient(x)) == (expected, 4)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.filterwarnings("error", module="made_warnings")
        with pytest.raises(RuntimeWarning, match="Mean of empty slice"):
            gradient(x)
