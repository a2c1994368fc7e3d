"""Arrays that are not plain float ndarrays, and ndarray attributes and methods: each behaves as
NumPy's or raises a MutadError naming what is unsupported and what to do instead; never a
silent None or a number NumPy would not give, never an AttributeError from mutad."""

import copy

import numpy as np
import pytest

import mutad
from mutad.errors import ConversionError, UnsupportedArrayError, UnsupportedOperationError

POLICIES = ("restore", "checkpoint")
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix


class Tagged(np.ndarray):
    """A subclass that adds nothing: still refused, since one that did would be wrong."""


# fmt: off
UNSUPPORTED = {
    "masked array":  (lambda: np.ma.array([1.0, 2.0, 3.0, 4.0], mask=[0, 1, 0, 0]), "filled"),
    "matrix":        (lambda: np.matrix([[1.0, 2.0], [3.0, 4.0]]), "@"),
    "subclass":      (lambda: np.arange(1.0, 5.0).view(Tagged), "np.asarray"),
    "recarray":      (lambda: np.rec.array(np.arange(1.0, 5.0)), "np.asarray"),
    "object floats": (lambda: np.array([1.0, 2.0, 3.0, 4.0], dtype=object), "astype"),
    "object arrays": (lambda: np.array([np.ones(2), np.ones(3)], dtype=object), "astype"),
}
# fmt: on


def program(x):
    return (x * x).sum()


def one(x):
    return np.ones(np.shape(x))


# every function that differentiates, on one argument
DIFFERENTIATE = {
    "gradient": lambda x: mutad.gradient(program, x),
    "gradient checkpoint": lambda x: mutad.gradient(program, x, policy="checkpoint"),
    "value_and_gradient": lambda x: mutad.value_and_gradient(program, x),
    "pullback": lambda x: mutad.pullback(program, x)[1](1.0),
    "jvp": lambda x: mutad.jvp(program, (x,), (one(x),)),
    "jacobian": lambda x: mutad.jacobian(program, x),
    "hessian": lambda x: mutad.hessian(program, x),
    "hvp": lambda x: mutad.hvp(program, (x,), (one(x),)),
    "check_grads": lambda x: mutad.check_grads(program, x),
    "as a constant": lambda x: mutad.gradient(lambda y, c: program(y), np.ones(2), x, argnums=0),
}


@pytest.mark.parametrize("how", list(DIFFERENTIATE))
@pytest.mark.parametrize("kind", list(UNSUPPORTED))
def test_arrays_that_are_not_plain_float_arrays_are_refused(kind, how):
    make, fix = UNSUPPORTED[kind]
    x = make()
    with pytest.raises(UnsupportedArrayError, match=fix):
        DIFFERENTIATE[how](x)


def test_object_arrays_of_other_things_are_not_differentiated():
    labels = np.array(["a", "b"], dtype=object)
    assert mutad.gradient(lambda x, labels: x.sum(), np.ones(2), labels) == (
        pytest.approx(np.ones(2)), None)


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_constants_that_are_subclasses_are_refused_when_they_meet_traced_arrays(mode):
    constant = np.ma.array([1.0, 2.0], mask=[0, 1])

    def f(x):
        return (x * constant).sum()  # masked for a masked array

    x = np.ones(constant.shape)
    with pytest.raises(UnsupportedArrayError):
        if mode == "reverse":
            mutad.gradient(f, x)
        else:
            mutad.jvp(f, (x,), (np.ones_like(x),))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_a_constant_matrix_meeting_a_traced_array_computes_as_np_matrix():
    constant = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    f = lambda x: (x * constant).sum()  # noqa: E731  (np.matrix's *: the matrix product)
    x = np.array([[0.5, -1.0], [2.0, 0.25]])
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value == f(x) and type(value) is type(f(x))
    np.testing.assert_allclose(g, np.ones((2, 2)) @ constant.A.T)
    np.testing.assert_allclose(mutad.jvp(f, (x,), (np.ones_like(x),))[1], g.sum())


MATRICES_WITHOUT_SCIPY_SPARSE = """
import sys, warnings
import numpy as np
import mutad
warnings.simplefilter("ignore", PendingDeprecationWarning)
A = np.matrix([[2.0, 1.0], [0.5, 3.0]])
programs = [
    lambda p: (np.matrix(p.reshape(2, 2)) * np.matrix(p.reshape(2, 2)).T).sum()
    + np.asmatrix(p.reshape(2, 2)).I.sum(),
    lambda p: np.bmat([[np.asmatrix(p.reshape(2, 2)), A], [A, A]]).sum(),
    lambda p: (A + np.diag(p[:2])).sum() + np.asarray(A * p.reshape(2, 2)).sum(),
    lambda p: (p.reshape(2, 2) * A).sum(),
]
assert "scipy.sparse" not in sys.modules
filters = list(warnings.filters)
for f in programs:
    p = np.array([0.7, 1.3, 0.4, 0.9])
    value, (g,) = mutad.value_and_gradient(f, p)
    assert warnings.filters == filters  # (SciPy's import adds filters: not the program's)
    assert value == f(p), (value, f(p))
    mutad.check_grads(f, p)
    assert p.tobytes() == np.array([0.7, 1.3, 0.4, 0.9]).tobytes()
"""


@pytest.mark.slow  # (a new process: its imports)
def test_np_matrix_in_a_program_that_imports_no_scipy_sparse(fresh_process):
    """np.matrix's stand-in is scipy.sparse's rules': a program of np.matrix of traced values
    (or a constant matrix meeting them) that imports no scipy.sparse loads them (was refused,
    as a conversion, where nothing had imported scipy.sparse)."""
    fresh_process(MATRICES_WITHOUT_SCIPY_SPARSE)


# ----------------------------------------------------------------------------------------------
# x.flat


def contiguous(x):
    return x


def transposed(x):
    return x.T


@pytest.mark.parametrize("layout", [contiguous, transposed])
@pytest.mark.parametrize("key", [3, slice(1, 5), slice(None, None, -2), [0, 5, 2],
                                 np.array([True, False] * 3)], ids=repr)
def test_flat_reads(layout, key, rng):
    def f(x):
        return np.sin(layout(x).flat[key]).sum() + sum(np.cos(v) for v in layout(x).flat)

    x = rng.normal(size=(2, 3))
    np.testing.assert_allclose(mutad.value_and_gradient(f, x)[0], f(x.copy()))
    for policy in POLICIES:
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)


@pytest.mark.parametrize("layout", [contiguous, transposed])
@pytest.mark.parametrize("key, values", [
    (3, "v[0]"), (slice(1, 5), "v[:4]"), (slice(None), "v[:2]"), ([0, 5, 2], "v[:3]"),
    (np.array([True, False] * 3), "v[1]"), (Ellipsis, "v[:6]")], ids=repr)
def test_flat_writes(layout, key, values, rng):
    def f(x, v):
        target = layout(x)
        target.flat[key] = eval(values)  # noqa: S307 (a fixed expression of v)
        target.flat[0] *= 2.0
        return (np.sin(x) * np.arange(6.0).reshape(2, 3)).sum()

    x, v = rng.normal(size=(2, 3)), rng.normal(size=6)
    np.testing.assert_allclose(mutad.value_and_gradient(f, x, v)[0], f(x.copy(), v.copy()))
    for policy in POLICIES:
        mutad.check_grads(f, x, v, policy=policy)
    mutad.check_jvp(f, x, v)


def test_flat_assignment_fills_cyclically_as_numpy(rng):
    def f(x, v):
        x.flat = v  # v has 2 elements, x has 6: repeated
        return (x * np.arange(6.0)).sum()

    x, v = rng.normal(size=6), rng.normal(size=2)
    np.testing.assert_allclose(mutad.value_and_gradient(f, x, v)[0], f(x.copy(), v))
    np.testing.assert_allclose(mutad.gradient(f, x, v)[1], [0 + 2 + 4, 1 + 3 + 5])


def running_sum_through_flat(x):
    view = x[::2]  # not C-contiguous: NumPy's iterator reads each element when it gets there
    for k, v in enumerate(view.flat):
        if k + 1 < view.size:
            view.flat[k + 1] += v
    return (view * np.arange(1.0, view.size + 1)).sum() + (x * x).sum()


def test_the_flat_iterator_reads_elements_as_they_are_when_it_reaches_them():
    x = np.arange(1.0, 9.0)
    assert mutad.value_and_grad(running_sum_through_flat)(x)[0] == \
        running_sum_through_flat(x.copy())
    mutad.check_grads(running_sum_through_flat, x)
    flat = np.arange(6.0).reshape(2, 3).T.flat
    assert next(flat) == 0.0 and next(flat) == 3.0  # an iterator, as NumPy's


def test_a_flat_slice_is_a_copy_and_an_overlapping_flat_write_is_refused():
    def copy_then_write(x):
        part = x.flat[1:3]  # NumPy: a new array, not a view of x
        part *= 10.0
        return (x * x).sum() + part.sum()

    x = np.arange(1.0, 5.0)
    assert mutad.value_and_grad(copy_then_write)(x)[0] == copy_then_write(x.copy())
    mutad.check_grads(copy_then_write, x)

    def smeared(x):
        x.flat[1:] = x[:-1]  # NumPy reads x as it writes: x[0] everywhere
        return x.sum()

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="shares memory"):
        mutad.gradient(smeared, x.copy())


# ----------------------------------------------------------------------------------------------
# Methods that behave as NumPy's

# fmt: off
METHODS = {
    "x.partition":    lambda x: (x.partition(2), x)[1],
    "x.argpartition": lambda x: x[x.argpartition(2)],
    "x.put":          lambda x: (x.put([1, 4], x[:2] * 3.0), x)[1],
    "x.compress":     lambda x: x.compress([True, False, True], axis=1),
    "x.nonzero":      lambda x: x[(x > 0).nonzero()],
    "x.sort":         lambda x: (x.sort(axis=0), x)[1],
    "x.fill":         lambda x: (x[0].fill(2.0), x)[1],
    "x.cumsum":       lambda x: x.cumsum(axis=1),
    "x.trace":        lambda x: x.trace(),
    "np.resize":      lambda x: np.resize(x, (4, 4)),
    "copy.copy":      lambda x: (copy.copy(x), x.__imul__(2.0))[0],
    "copy.deepcopy":  lambda x: (copy.deepcopy(x), x.__imul__(2.0))[0],
    "divmod":         lambda x: divmod(x, 0.7)[1],
    "x.base":         lambda x: x[1:].base * x[1:].base,
    "x.imag":         lambda x: x + x.imag,
    "x.to_device":    lambda x: x.to_device("cpu") * 2.0,
}
# fmt: on


@pytest.mark.parametrize("name", list(METHODS))
def test_methods_behave_as_numpy(name, rng):
    def f(x):
        return np.sin(METHODS[name](x)).sum()

    x = rng.normal(size=(3, 3)) + np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(mutad.value_and_gradient(f, x)[0], f(x.copy()))
    for policy in POLICIES:
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)


# fmt: off
REFUSED = {
    "x.resize":     (lambda x: x.resize(10), UnsupportedOperationError, "np.resize"),
    "x.data":       (lambda x: x.data, UnsupportedOperationError, "indexing"),
    "x.ctypes":     (lambda x: x.ctypes, UnsupportedOperationError, "mutad.adjoint"),
    "x.setflags":   (lambda x: x.setflags(align=False), UnsupportedOperationError, "copy"),
    "x.byteswap":   (lambda x: x.byteswap(), UnsupportedOperationError, "astype"),
    "x.getfield":   (lambda x: x.getfield(np.float32), UnsupportedOperationError, "astype"),
    "x.setfield":   (lambda x: x.setfield(1.0, np.float64), UnsupportedOperationError, "indexing"),
    "x.view(int)":  (lambda x: x.view(np.int64), UnsupportedOperationError, "astype"),
    "x.view(matrix)": (lambda x: x.view(np.matrix), UnsupportedOperationError, "subclass"),
    "x.tobytes":    (lambda x: x.tobytes(), ConversionError, "cut its gradient"),
    "x.tofile":     (lambda x: x.tofile("unused"), ConversionError, "cut its gradient"),
    "x.dump":       (lambda x: x.dump("unused"), ConversionError, "cut its gradient"),
    "x.dumps":      (lambda x: x.dumps(), ConversionError, "cut its gradient"),
    "np.asarray(x.flat)": (lambda x: np.asarray(x.flat), ConversionError, "cut its gradient"),
}
# fmt: on


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_methods_without_a_derivative_are_refused_clearly(name, mode):
    call, error, fix = REFUSED[name]

    def f(x):
        call(x)
        return x.sum()

    x = np.ones((3, 3))
    before = x.tobytes()
    with pytest.raises(error, match=fix):
        if mode == "reverse":
            mutad.gradient(f, x)
        else:
            mutad.jvp(f, (x,), (np.ones_like(x),))
    assert x.tobytes() == before


def grown_by_resize(x):
    y = np.zeros(8)
    y[:] = x ** 2
    y.resize(12, refcheck=False)  # NumPy's: the elements kept, zeros after them
    y[8:] = x[:4]
    return (y * np.arange(12.0)).sum()


def reshaped_by_resize(x):
    y = np.sin(x).reshape(2, 4).copy()
    y.resize((3, 2), refcheck=False)  # fewer elements, C order
    y *= y
    y.resize(2, 5, refcheck=False)  # resized again: the new memory is its own
    return (y * np.arange(10.0).reshape(2, 5)).sum()


@pytest.mark.parametrize("f", [grown_by_resize, reshaped_by_resize])
def test_resize_in_place_of_an_array_the_function_made(f):
    x = np.random.default_rng(5).standard_normal(8)
    before = x.tobytes()
    value, _ = mutad.value_and_grad(f)(x)
    assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    mutad.check_grads(f, x, order=2)
    (replayed, gradient), (traced, expected) = (
        mutad.value_and_grad(f, replay=True)(x), mutad.value_and_grad(f)(x))
    assert replayed == traced and np.array_equal(gradient, expected)  # (traced, not replayed)
    assert x.tobytes() == before


@pytest.mark.parametrize("f", [lambda x: np.sin(x).reshape(2, 4).resize(9, refcheck=False),
                               lambda x: np.sin(x).resize(9),  # NumPy's reference check
                               lambda x: np.asfortranarray(np.sin(x).reshape(2, 4)).resize(
                                   9, refcheck=False)])
def test_resize_of_a_view_or_with_the_reference_check_is_refused(f):
    x = np.ones(8)
    for differentiate in (lambda: mutad.gradient(lambda x: f(x) or x.sum(), x),
                          lambda: mutad.jvp(lambda x: f(x) or x.sum(), (x,), (x,))):
        with pytest.raises(UnsupportedOperationError, match="refcheck=False"):
            differentiate()


def test_deleting_elements_raises_as_numpy():
    def f(x):
        del x[0]
        return x.sum()

    with pytest.raises(ValueError, match="cannot delete"):
        f(np.ones(3))
    with pytest.raises(ValueError, match="cannot delete"):
        mutad.gradient(f, np.ones(3))


def test_every_public_ndarray_attribute_exists_on_traced_and_dual_arrays():
    seen = []

    def f(x):
        seen.append([name for name in dir(np.ndarray) if not name.startswith("_")
                     and not hasattr(type(x), name)])
        return x.sum()

    mutad.gradient(f, np.ones((2, 2)))
    mutad.jvp(f, (np.ones((2, 2)),), (np.ones((2, 2)),))
    assert seen == [[], []]


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("layout", [contiguous, transposed])
def test_fill_diagonal_writes_through_flat(layout, wrap, rng):
    def f(a, v):
        np.fill_diagonal(layout(a), v, wrap=wrap)
        a[np.diag_indices_from(a[:3, :3])] *= 2.0
        return (np.sin(a) * np.arange(15.0).reshape(5, 3)).sum()

    a, v = rng.normal(size=(5, 3)), rng.normal(size=2)
    np.testing.assert_allclose(mutad.value_and_gradient(f, a, v)[0], f(a.copy(), v))
    for policy in POLICIES:
        mutad.check_grads(f, a, v, policy=policy)
    mutad.check_jvp(f, a, v)


def test_attribute_assignments(rng):
    def f(x, v):
        x.real = v  # writes every element, as NumPy
        return (x * x).sum()

    x, v = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(mutad.gradient(f, x, v)[1], 2 * v)
    mutad.check_grads(f, x, v)
    mutad.check_jvp(f, x, v)

    def imag(x):
        x.imag = 1.0
        return x.sum()

    with pytest.raises(TypeError, match="imaginary part"):
        imag(np.ones(3))
    with pytest.raises(TypeError, match="imaginary part"):
        mutad.gradient(imag, np.ones(3))
    for setting, fix in (("shape", "reshape"), ("dtype", "astype"), ("strides", "indexing")):
        def assign(x, setting=setting):
            setattr(x, setting, getattr(np.ones((3, 1)), setting))
            return x.sum()

        with pytest.raises(UnsupportedOperationError, match=fix):
            mutad.gradient(assign, np.ones(3))
        with pytest.raises(UnsupportedOperationError, match=fix):
            mutad.jvp(assign, (np.ones(3),), (np.ones(3),))


def test_flags_are_read_and_writeable_alone_set(rng):
    x = np.ones((2, 3))

    def f(x):
        assert x.flags.c_contiguous and x.flags["C_CONTIGUOUS"] and not x.T.flags.c_contiguous
        assert "WRITEABLE" in repr(x.flags)
        x.flags.writeable = False  # as x.setflags(write=False)
        assert not x.flags.writeable
        return x.sum()

    def g(x):
        x.flags.aligned = False
        return x.sum()

    for differentiate in (lambda: mutad.gradient(f, x), lambda: mutad.jvp(f, (x,), (x,))):
        differentiate()
        assert x.flags.writeable  # the caller's array is as it was
    for differentiate in (lambda: mutad.gradient(g, x), lambda: mutad.jvp(g, (x,), (x,))):
        with pytest.raises(UnsupportedOperationError, match="copy"):
            differentiate()
        assert x.flags.writeable and x.flags.aligned


def test_methods_numpy_removed_are_not_there():
    """NumPy 2 removed ndarray.ptp: a traced array has none either (np.ptp stays)."""
    assert not hasattr(np.ndarray, "ptp")
    with pytest.raises(AttributeError):
        mutad.gradient(lambda x: x.ptp(), np.arange(3.0))
    assert mutad.gradient(np.ptp, np.arange(3.0))[0].tolist() == [-1.0, 0.0, 1.0]
