"""Views: a traced result is a view exactly when NumPy's is, and writeable exactly when NumPy's
is. One table of view-returning functions and methods; each is compared with NumPy on plain
arrays (memory shared with the input, writeable or not, the value after a later write into the
base), differentiated through writes into the base and through the view, in both policies and
in forward mode, and writes NumPy refuses are refused."""

import warnings

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import mutad
from mutad.errors import ReadOnlyError, UnsupportedOperationError

POLICIES = ("restore", "checkpoint")

# fmt: off
# name                   the view of a (3, 4) array a
VIEWS = {
    "np.diagonal":        lambda a: np.diagonal(a),
    "np.diagonal offset": lambda a: np.diagonal(a, 1),
    "a.diagonal":         lambda a: a.diagonal(),
    "np.ravel":           lambda a: np.ravel(a),
    "a.ravel":            lambda a: a.ravel(),
    "np.ravel of .T":     lambda a: np.ravel(a.T),
    "np.reshape":         lambda a: np.reshape(a, (2, 6)),
    "a.reshape":          lambda a: a.reshape(4, 3),
    "a.reshape of .T":    lambda a: a.T.reshape(12),
    "np.transpose":       lambda a: np.transpose(a),
    "np.transpose axes":  lambda a: np.transpose(a[None], (2, 0, 1)),
    "np.ravel F of .T":   lambda a: np.ravel(a.T, order="F"),
    "np.reshape F":       lambda a: np.reshape(a, (6, 2), order="F"),
    "np.diagonal 3-d":    lambda a: np.diagonal(a.reshape(3, 2, 2), 0, 1, 2),
    "np.unstack":         lambda a: np.unstack(a, axis=1)[2],
    "a[1]":               lambda a: a[1],
    "a[1, 2]":            lambda a: a[1, 2],
    "a.transpose":        lambda a: a.transpose(1, 0),
    "a.T":                lambda a: a.T,
    "a.mT":               lambda a: a.mT,
    "np.matrix_transpose": lambda a: np.matrix_transpose(a),
    "np.linalg.matrix_transpose": lambda a: np.linalg.matrix_transpose(a),
    "np.swapaxes":        lambda a: np.swapaxes(a, 0, 1),
    "a.swapaxes":         lambda a: a.swapaxes(1, 0),
    "np.moveaxis":        lambda a: np.moveaxis(a, 0, -1),
    "np.rollaxis":        lambda a: np.rollaxis(a, 1),
    "np.squeeze":         lambda a: np.squeeze(a[:, None]),
    "a.squeeze":          lambda a: a[None].squeeze(0),
    "np.expand_dims":     lambda a: np.expand_dims(a, 1),
    "np.broadcast_to":    lambda a: np.broadcast_to(a, (2, 3, 4)),
    "np.broadcast_to row": lambda a: np.broadcast_to(a[1], (5, 4)),
    "np.broadcast_arrays same": lambda a: np.broadcast_arrays(a, np.ones(4))[0],
    "np.broadcast_arrays stretched": lambda a: np.broadcast_arrays(a[:, :1], np.ones(4))[0],
    "np.split":           lambda a: np.split(a, 2, axis=1)[1],
    "np.array_split":     lambda a: np.array_split(a, 2)[1],
    "np.hsplit":          lambda a: np.hsplit(a, 4)[2],
    "np.vsplit":          lambda a: np.vsplit(a, 3)[0],
    "np.dsplit":          lambda a: np.dsplit(a[:, None], 2)[0],
    "np.real":            lambda a: np.real(a),
    "a.real":             lambda a: a.real,
    "np.imag":            lambda a: np.imag(a),
    "a.view()":           lambda a: a.view(),
    "a.view(np.ndarray)": lambda a: a.view(np.ndarray),
    "a.view(float64)":    lambda a: a.view(np.float64),
    "np.atleast_1d":      lambda a: np.atleast_1d(a),
    "np.atleast_2d":      lambda a: np.atleast_2d(a),
    "np.atleast_2d of row": lambda a: np.atleast_2d(a[0]),
    "np.atleast_3d":      lambda a: np.atleast_3d(a),
    "np.flip":            lambda a: np.flip(a),
    "np.fliplr":          lambda a: np.fliplr(a),
    "np.flipud":          lambda a: np.flipud(a),
    "np.rot90":           lambda a: np.rot90(a),
    "np.rot90 k=2":       lambda a: np.rot90(a, 2),
    "sliding_window_view": lambda a: sliding_window_view(a, 2, axis=1),
    "sliding_window_view 2d": lambda a: sliding_window_view(a, (2, 3)),
    "a[...]":             lambda a: a[...],
    "a[1:, ::2]":         lambda a: a[1:, ::2],
    "a[::-1, 1]":         lambda a: a[::-1, 1],
    "a[None, 2]":         lambda a: a[None, 2],
    "np.diag":            lambda a: np.diag(a),
    "np.asarray":         lambda a: np.asarray(a),
    "np.asanyarray":      lambda a: np.asanyarray(a),
    "np.asarray of .T":   lambda a: np.asarray(a.T),
    "np.array":           lambda a: np.array(a),
    "np.ascontiguousarray of .T": lambda a: np.ascontiguousarray(a.T),
    "np.ascontiguousarray": lambda a: np.ascontiguousarray(a),  # the input itself, as:
    "np.asarray dtype":   lambda a: np.asarray(a, dtype=np.float64),
    "np.array copy=False": lambda a: np.array(a, copy=False),
    "np.atleast_3d of 3-d": lambda a: np.atleast_3d(a[None]),
    "a.copy()":           lambda a: a.copy(),
    "a.flatten()":        lambda a: a.flatten(),
    "np.triu":            lambda a: np.triu(a),
}
# fmt: on

NAMES = list(VIEWS)


def sample(rng):
    return rng.uniform(0.5, 1.5, size=(3, 4))


def numpy_layout(name):
    """What NumPy does with the view: shares the input's memory, is writeable."""
    a = sample(np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # broadcast_arrays' writeable flag
        d = VIEWS[name](a)
        return bool(np.shares_memory(d, a)), bool(d.flags.writeable)


def then_write_base(name):
    """The view, then a write into its base: a view shows it, a copy does not."""
    view = VIEWS[name]

    def program(a):
        d = view(a)
        a *= 2.0
        a[0] += 1.0
        return np.sin(d).sum()

    return program


@pytest.mark.parametrize("name", NAMES)
def test_view_or_copy_and_writeable_as_numpy(name):
    seen = {}

    def program(a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            d = VIEWS[name](a)
            seen["layout"] = (bool(np.shares_memory(d, a)), bool(d.flags.writeable))
        return np.sum(d * 1.0)

    expected = numpy_layout(name)
    mutad.gradient(program, sample(np.random.default_rng(1)))
    assert seen["layout"] == expected
    seen.clear()
    mutad.jvp(program, (sample(np.random.default_rng(1)),), (np.ones((3, 4)),))
    assert seen["layout"] == expected


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", NAMES)
def test_later_writes_into_the_base_show_through_views(name, policy, rng):
    program = then_write_base(name)
    a = sample(rng)
    value, _ = mutad.value_and_gradient(program, a, policy=policy)
    np.testing.assert_allclose(value, program(a.copy()), rtol=1e-12)
    mutad.check_grads(program, a, policy=policy)


@pytest.mark.parametrize("name", NAMES)
def test_later_writes_into_the_base_show_through_views_forward(name, rng):
    program = then_write_base(name)
    a = sample(rng)
    value, _ = mutad.jvp(program, (a,), (np.ones_like(a),))
    np.testing.assert_allclose(value, program(a.copy()), rtol=1e-12)
    mutad.check_jvp(program, a)


WRITEABLE = [name for name in NAMES if numpy_layout(name)[1]
             and name != "np.broadcast_arrays stretched"]  # overlaps itself: see below


def then_write_view(name):
    """A write through the view, which reaches the base when it is a view."""
    view = VIEWS[name]

    def program(a):
        d = view(a)
        d *= np.cos(d)
        d[...] += 0.5
        return np.sin(a).sum() + (d * d).sum()

    return program


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", WRITEABLE)
def test_writes_through_writeable_views_reach_the_base(name, policy, rng):
    program = then_write_view(name)
    a = sample(rng)
    value, _ = mutad.value_and_gradient(program, a, policy=policy)
    np.testing.assert_allclose(value, program(a.copy()), rtol=1e-12)
    mutad.check_grads(program, a, policy=policy)


@pytest.mark.parametrize("name", WRITEABLE)
def test_writes_through_writeable_views_reach_the_base_forward(name, rng):
    program = then_write_view(name)
    a = sample(rng)
    value, _ = mutad.jvp(program, (a,), (np.ones_like(a),))
    np.testing.assert_allclose(value, program(a.copy()), rtol=1e-12)
    mutad.check_jvp(program, a)


READ_ONLY = [name for name in NAMES if not numpy_layout(name)[1]
             and not isinstance(VIEWS[name](np.ones((3, 4))), np.generic)]  # scalars: below
WRITES = {
    "d += 1": lambda d: d.__iadd__(1.0),
    "np.add(d, 1, out=d)": lambda d: np.add(d, 1.0, out=d),
    "d[...] = 0": lambda d: d.__setitem__(Ellipsis, 0.0),
    "d[0, ..., 0] = 0": lambda d: d.__setitem__((0,) * d.ndim, 0.0),
    "d[[0]] = 0": lambda d: d.__setitem__([0], 0.0),
}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("name", READ_ONLY)
def test_writes_into_read_only_views_raise_as_in_numpy(name, write):
    def program(a):
        WRITES[write](VIEWS[name](a))
        return a.sum()

    a = sample(np.random.default_rng(2))
    with pytest.raises(ValueError):
        program(a.copy())
    before = a.tobytes()
    # np.imag of a real array is a plain array of zeros: NumPy's own error
    with pytest.raises(ValueError if name == "np.imag" else ReadOnlyError, match="read-only"):
        mutad.gradient(program, a)
    with pytest.raises(ValueError):
        mutad.jvp(program, (a,), (np.ones_like(a),))
    assert a.tobytes() == before


@pytest.mark.parametrize("name", ["np.diagonal", "np.broadcast_to"])
def test_unbuffered_writes_into_read_only_views_are_refused(name):
    """NumPy 2's ``ufunc.at`` writes into read-only arrays; mutad refuses, as every other
    write into them raises."""

    def program(a):
        np.add.at(VIEWS[name](a), [0], 1.0)
        return a.sum()

    a = sample(np.random.default_rng(2))
    before = a.tobytes()
    with pytest.raises(ReadOnlyError, match="read-only"):
        mutad.gradient(program, a)
    assert a.tobytes() == before


OVERLAPPING_WRITEABLE = {
    "np.broadcast_arrays": lambda a: np.broadcast_arrays(a[:, :1], np.ones(4))[0],
    "sliding_window_view(writeable=True)":
        lambda a: sliding_window_view(a, 2, axis=1, writeable=True),
}


@pytest.mark.parametrize("name", list(OVERLAPPING_WRITEABLE))
def test_writes_through_views_that_overlap_themselves_are_refused(name):
    """NumPy writes them element after element, so the result depends on its order."""

    def program(a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            OVERLAPPING_WRITEABLE[name](a)[...] += 1.0
        return a.sum()

    a = sample(np.random.default_rng(3))
    before = a.tobytes()
    with pytest.raises(UnsupportedOperationError, match="share memory"):
        mutad.gradient(program, a)
    assert a.tobytes() == before


def _window_columns(x):
    y = x * 1.0
    w = sliding_window_view(y, 2, writeable=True)
    w[:, 1] = w[:, 0] * x[0]  # a column of the windows: elements apart
    w[..., 0] += 1.0
    w[2, 1] = y[0] ** 2  # one element
    return (y ** 3 * np.arange(6)).sum()


def test_a_region_of_a_view_that_overlaps_itself_whose_own_elements_do_not_is_written():
    """A basic index picks a region of such a view (a column of sliding windows) that NumPy
    writes the same in any order: both modes and a replay follow the write, which they refused
    as a write into the whole view; an index naming an element twice is still refused."""
    x = np.linspace(0.5, 1.5, 6)
    before = x.tobytes()
    value, grad = mutad.value_and_grad(_window_columns)(x)
    assert value == _window_columns(x.copy()) and x.tobytes() == before
    mutad.check_grads(_window_columns, x, modes=("rev", "fwd"))
    replaying = mutad.value_and_grad(_window_columns, replay=True)
    for scale in (1.0, 2.0, -1.0):
        got = replaying(x * scale)
        expected = mutad.value_and_grad(_window_columns)(x * scale)
        assert got[0] == expected[0] and got[1].tobytes() == expected[1].tobytes()

    def twice(x):
        y = x * 1.0
        sliding_window_view(y, 2, writeable=True)[[0, 1], [1, 0]] = x[:2]  # y[1] twice
        return y.sum()

    for differentiate in (mutad.grad(twice), lambda x: mutad.jvp(twice, (x,), (x,))):
        with pytest.raises(UnsupportedOperationError, match="share memory"):
            differentiate(x)
    assert x.tobytes() == before


def test_refusing_a_write_through_broadcast_arrays_gives_no_warning():
    """Regression: reading the writeable flag of an ``np.broadcast_arrays`` result, to refuse
    the write, first emitted NumPy's FutureWarning about that flag; and so did an argument
    that is such a result."""
    def program(a):
        stretched, _ = np.broadcast_arrays(a[:, :1], np.ones(4))
        stretched += 1.0
        return a.sum()

    a = sample(np.random.default_rng(3))
    before = a.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedOperationError, match="share memory"):
            mutad.gradient(program, a)
        x, y = np.broadcast_arrays(np.ones(3), np.arange(6.0).reshape(2, 3))
        dx, dy = mutad.gradient(lambda x, y: (x * y).sum(), x, y)
    assert a.tobytes() == before
    np.testing.assert_array_equal(dx, np.tile([3.0, 5.0, 7.0], (2, 1)))  # per memory element
    np.testing.assert_array_equal(dy, np.ones((2, 3)))


def test_reading_views_that_overlap_themselves_accumulates_every_use():
    def program(a):
        windows = sliding_window_view(a, 3)  # each element in up to three windows
        stretched = np.broadcast_to(a[1:3], (4, 2))
        return (windows ** 2).sum() + (stretched * np.arange(8.0).reshape(4, 2)).sum()

    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    counts = np.array([1.0, 2.0, 3.0, 2.0, 1.0])
    expected = 2 * a * counts + np.array([0.0, 12.0, 16.0, 0.0, 0.0])
    for policy in POLICIES:
        np.testing.assert_allclose(mutad.gradient(program, a, policy=policy)[0], expected)


@pytest.mark.parametrize("name", ["np.diagonal", "np.broadcast_to", "sliding_window_view 2d",
                                  "np.broadcast_arrays stretched", "np.flip"])
def test_views_second_derivatives(name, rng):
    mutad.check_grads(then_write_base(name), sample(rng), order=2)


def test_overlapping_views_into_in_place_rules_accumulate_every_use():
    @mutad.inplace_adjoint(writes=("a",))
    def add_into(a, b):
        a += b
        return a

    @add_into.rule
    def _(a, b):
        add_into(a, b)

        def back(da, db):
            a[...] -= b
            db += da

        return back

    def program(x, v):
        add_into(x, np.broadcast_to(v, x.shape))
        return (x * x).sum()

    x, v = np.ones((3, 2)), np.array([0.5, 2.0])
    mutad.check_grads(program, x, v)
    np.testing.assert_allclose(mutad.gradient(program, x, v)[1], 2 * (x + v).sum(axis=0))


def test_gathers_from_views_that_overlap_themselves_accumulate_every_use():
    def program(v):
        stretched = np.broadcast_to(v, (3, 2))
        return (stretched[stretched > 0] ** 2).sum() + stretched[[0, 0, 2], 1].sum()

    v = np.array([0.5, 2.0])
    np.testing.assert_allclose(mutad.gradient(program, v)[0], [3.0, 12.0 + 3.0])


def test_diagonal_is_a_read_only_view_of_its_base():
    """The issue's reproducer: the diagonal shows the later write, value and gradient."""

    def f(a):
        d = np.diagonal(a)
        a *= 2.0
        return d.sum()

    a = np.eye(2) * 2
    assert f(a.copy()) == 8.0
    for policy in POLICIES:
        value, (grad,) = mutad.value_and_gradient(f, a, policy=policy)
        assert value == 8.0
        np.testing.assert_array_equal(grad, 2 * np.eye(2))

    def g(a):
        d = np.diagonal(a)
        d += 1
        return a.sum()

    with pytest.raises(ValueError, match="read-only"):
        g(a.copy())
    with pytest.raises(ReadOnlyError, match="read-only"):
        mutad.gradient(g, a)


def test_broadcasts_of_constants_next_to_traced_arrays():
    constant = np.array([[1.0], [2.0], [3.0]])

    def program(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            _, stretched = np.broadcast_arrays(x, constant)
        return (stretched * stretched * x).sum()

    x = np.ones((1, 4))
    np.testing.assert_array_equal(mutad.gradient(program, x)[0], np.full((1, 4), 14.0))
    mutad.check_grads(program, x)
    mutad.check_jvp(program, x)


def test_arguments_that_overlap_themselves():
    """An argument viewing memory several times gets, at each element, the gradient with
    respect to the memory it reads (as arguments sharing memory do); a write into it is
    refused."""
    base = np.array([1.0, 2.0, 3.0])
    windows = np.lib.stride_tricks.as_strided(base, (2, 2), (8, 8))  # writeable, overlapping

    def reads(w):
        return (w * w).sum()

    np.testing.assert_array_equal(mutad.gradient(reads, windows)[0], [[2.0, 8.0], [8.0, 6.0]])

    def writes(w):
        w *= 2.0
        return w.sum()

    with pytest.raises(UnsupportedOperationError, match="share memory"):
        mutad.gradient(writes, windows)
    np.testing.assert_array_equal(base, [1.0, 2.0, 3.0])


SCALARS = {
    "a reduction": lambda x, c: x.sum(),
    "an element": lambda x, c: x[1],
    "an element of a row": lambda x, c: x[1:][0],
    "an iterated element": lambda x, c: list(x)[0],
    "a float argument": lambda x, c: c,
}


@pytest.mark.parametrize("name", list(SCALARS))
def test_scalars_are_immutable_as_numpy_scalars(name, rng):
    """NumPy gives scalars for 0-d results, and ``s += 1`` makes a new one: another name for
    the old value keeps it (mutad's 0-d results stand for them, read-only)."""

    def program(x, c):
        s = SCALARS[name](x, c)
        kept = s
        s += x[0]
        s *= 3.0
        return kept * s + c

    x = rng.normal(size=3)
    c = 0.7
    for policy in POLICIES:
        value, _ = mutad.value_and_gradient(program, x, c, policy=policy)
        np.testing.assert_allclose(value, program(x.copy(), c), rtol=1e-12)
        mutad.check_grads(program, x, c, policy=policy)
    value, _ = mutad.jvp(program, (x, c), (np.ones(3), 1.0))
    np.testing.assert_allclose(value, program(x.copy(), c), rtol=1e-12)
    mutad.check_jvp(program, x, c)

    def writes(x, c):
        s = SCALARS[name](x, c)
        s[...] = 1.0  # NumPy: TypeError, scalars do not support item assignment
        return s

    with pytest.raises(TypeError, match="does not support item assignment"):  # as NumPy's
        mutad.gradient(writes, x, c)


def test_read_only_arguments_stay_read_only(rng):
    def program(d):
        d += 1.0
        return d.sum()

    a = rng.normal(size=(3, 3))
    with pytest.raises(ValueError, match="read-only"):
        program(np.diagonal(a))
    with pytest.raises(ReadOnlyError):
        mutad.gradient(program, np.diagonal(a))
    with pytest.raises(ValueError, match="read-only"):
        mutad.jvp(program, (np.diagonal(a),), (np.ones(3),))
    reads = lambda d: (d * d).sum()  # noqa: E731
    np.testing.assert_allclose(mutad.jvp(reads, (np.diagonal(a),), (np.ones(3),))[1],
                               2 * np.diagonal(a).sum())
    mutad.check_jvp(reads, np.diagonal(a))


def then_write_view_of_a_temporary(name):
    """A write through the view of an array computed inside the function (a buffer of its own,
    which a function like ``np.atleast_1d`` returns as itself): under forward over reverse the
    view is a dual of the outer differentiation, and the write must still reach the buffer."""
    view = VIEWS[name]

    def program(a):
        t = np.sin(a) + 0.5
        d = view(t)
        d *= np.cos(d)
        return (t * t * np.arange(1.0, 13.0).reshape(3, 4)).sum()

    return program


@pytest.mark.parametrize("of", ["argument", "temporary"])
@pytest.mark.parametrize("name", WRITEABLE)
def test_second_derivatives_through_writes_into_views(name, of, rng):
    """jvp of the gradient and mutad.hessian (forward over reverse) agree with hvp (reverse
    over forward); check_grads(order=2) compares all three orders with finite differences of
    the gradient."""
    program = (then_write_view if of == "argument" else then_write_view_of_a_temporary)(name)
    a, direction = sample(rng), rng.standard_normal((3, 4))
    before = a.tobytes()
    over_forward = mutad.hvp(program, (a,), (direction,))
    over_reverse = mutad.jvp(lambda x: mutad.gradient(program, x)[0], (a,), (direction,))[1]
    hessian = mutad.hessian(program, a)
    assert a.tobytes() == before
    np.testing.assert_allclose(over_reverse, over_forward, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.tensordot(hessian, direction, 2), over_forward, rtol=1e-10,
                               atol=1e-12)
    mutad.check_grads(program, a, order=2)


@pytest.mark.parametrize("name", list(VIEWS))
def test_the_address_of_a_view_is_numpys(name):
    """``views.address`` reads the data pointer directly where the probes at import allowed
    it: on every view of the table, its first element's address is ``__array_interface__``'s."""
    from mutad.core.views import address
    base = np.arange(12.0).reshape(3, 4)
    for a in (base, np.asfortranarray(base), base[::-1, ::-1], base.astype(complex)):
        with warnings.catch_warnings():  # np.asarray(a, float) of the complex one
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            view = VIEWS[name](a)
        if isinstance(view, np.ndarray):
            assert address(view) == view.__array_interface__["data"][0]
    for a in (np.zeros(()), np.empty((0, 3)), np.arange(6.0).view(np.matrix)):
        assert address(a) == a.__array_interface__["data"][0]


def private_view(view, owner):
    return view.copy() if view.base is owner else view  # "not into the owner's memory"


def copies_a_view_of_its_own_array(a):
    x = a * 1.0                         # owns its memory
    y = private_view(x[::2], x)         # NumPy: x[::2].base is x, so a copy
    y *= 0.0
    z = np.zeros(4)
    w = private_view(z[1:][::2], z)     # a view of a view: its base is the owner still
    w += a[0]
    return (x * np.arange(1.0, 5.0)).sum() + (z * a).sum() + (x.base is None) * a[1]


def test_a_views_base_is_the_array_that_owns_its_memory():
    """view.base is owner, as in NumPy, where the function made the owner (a defensive copy
    idiom took the other branch, silently), in both modes and replayed."""
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert mutad.value_and_grad(copies_a_view_of_its_own_array)(a)[0] == \
        copies_a_view_of_its_own_array(a.copy())
    assert mutad.jvp(copies_a_view_of_its_own_array, (a,), (np.ones(4),))[0] == \
        copies_a_view_of_its_own_array(a.copy())
    mutad.check_grads(copies_a_view_of_its_own_array, a, order=2)
    replaying = mutad.grad(copies_a_view_of_its_own_array, replay=True)
    for scale in (1.0, 2.0):
        assert replaying(a * scale).tobytes() == \
            mutad.grad(copies_a_view_of_its_own_array)(a * scale).tobytes()


def bases_as_numpys(u):
    """NumPy's .base of the views a program checks: an argument's, a real array's .real (the
    array itself), a sliding window's (not the array: NumPy's own intermediate)."""
    y = u * 1.0
    total = (u * u).sum()
    total += u.sum() * (2.0 if u[::2].base is u else 1.0)                            # True
    total += u.sum() * (3.0 if y.real is y else 1.0)                                 # True
    window = np.lib.stride_tricks.sliding_window_view(y, 2)
    total += u.sum() * (5.0 if window.base is y else 1.0)                            # False
    return total


def test_a_views_base_is_numpys_for_arguments_and_special_views():
    u = np.array([1.0, 2.0, 3.0, 4.0])
    value, g = mutad.value_and_grad(bases_as_numpys)(u)
    assert value == bases_as_numpys(u.copy())
    assert g.tolist() == (2 * u + 2.0 + 3.0 + 1.0).tolist()
    assert mutad.jvp(bases_as_numpys, (u,), (np.ones(4),))[1] == g.sum()


def bases_of_function_views(u):
    y = u * 1.0
    total = (u * u).sum()
    for view in (y.reshape(2, 2), y.T, np.ravel(y), y.reshape(2, 2).diagonal(),
                 np.broadcast_to(y, (2, 4)), *np.split(y, 2)):
        total += u.sum() * (2.0 if view.base is y else 1.0)  # NumPy: True for each
    return total


def bases_of_zero_dimensional_views(u):
    """Views of 0-d arrays the function made (an element's copy, a sum): NumPy's ``.base`` is
    the 0-d array for each, and the traced engine notes the owner of a 0-d result only when
    it is first viewed."""
    y = np.copy(u[0])  # a 0-d array, not NumPy's scalar
    z = np.add(u[1], u[2], out=np.zeros(()))
    total = (u * u).sum()
    for owner, view in ((y, y.reshape(1)), (y, y[None]), (z, z.reshape(1, 1)), (z, z[...])):
        total += u.sum() * (2.0 if view.base is owner else 1.0)  # NumPy: True for each
        total += (view * u[1]).sum()
    return total


@pytest.mark.parametrize("program", [bases_of_function_views, bases_of_zero_dimensional_views])
def test_the_base_of_a_view_a_function_makes_is_numpys_in_both_modes(program):
    u = np.array([1.0, 2.0, 3.0, 4.0])
    expected = program(u.copy())
    assert mutad.value_and_grad(program)(u)[0] == expected
    assert mutad.jvp(program, (u,), (np.ones(4),))[0] == expected
    mutad.check_grads(program, u)


def returns_its_argument(u, identity=True):
    y = np.exp(u)
    v = np.atleast_1d(y)  # NumPy: y itself
    v *= 2.0              # so y is doubled too
    return (y * u).sum() + (u[0] * (v is y) if identity else 0.0)


ITSELF = {  # functions NumPy answers with their argument itself, for a real 1-d array
    "np.atleast_1d": np.atleast_1d, "np.real": np.real, "np.squeeze": np.squeeze,
    "np.asarray": np.asarray, "a.conj()": lambda a: a.conj(), "a.real": lambda a: a.real,
    "np.require": np.require, "a.astype(copy=False)": lambda a: a.astype(a.dtype, copy=False),
    "np.broadcast_arrays": lambda a: np.broadcast_arrays(a, a)[0]}


@pytest.mark.parametrize("name", ITSELF)
def test_functions_numpy_answers_with_the_argument_itself(name):
    """``np.real(a) is a`` and ``np.squeeze(a) is a`` in NumPy (a real array, nothing to
    squeeze); mutad's reverse mode gave a view, so ``is`` took the other branch, and so did
    every such function under a nested differentiation (the second derivative of another
    branch than the value's)."""
    def f(u):
        y = np.exp(u)
        v = ITSELF[name](y)
        v *= 2.0
        return (y * u).sum() + u[0] * (3.0 if v is y else 5.0)

    u = np.array([0.1, 0.2, 0.3])
    expected = f(u.copy())
    assert mutad.value_and_grad(f)(u)[0] == expected
    assert mutad.jvp(f, (u,), (np.ones(3),))[0] == expected
    mutad.check_grads(f, u, order=2)


def test_a_function_numpy_answers_with_its_argument_gives_the_argument():
    """np.atleast_1d(y) is y in NumPy; under mutad it was a view of y (v is y False, and with
    .base the owner, a defensive copy took the other branch)."""
    u = np.array([0.1, 0.2, 0.3])
    assert mutad.value_and_grad(returns_its_argument)(u)[0] == returns_its_argument(u.copy())
    assert mutad.jvp(returns_its_argument, (u,), (np.ones(3),))[0] == returns_its_argument(u)
    mutad.check_grads(lambda u: returns_its_argument(u, identity=False), u, order=2)
    replaying = mutad.grad(returns_its_argument, replay=True)
    for scale in (1.0, 2.0):
        assert replaying(u * scale).tobytes() == \
            mutad.grad(returns_its_argument)(u * scale).tobytes()


OUTSIDE = np.arange(4.0)


@pytest.mark.parametrize("other", [
    lambda x: 3.0, lambda x: np.float32(2.5), lambda x: OUTSIDE, lambda x: np.ones((2, 1)),
], ids=["python float", "numpy scalar", "global array", "new array"])
def test_broadcast_arrays_of_a_constant_beside_a_traced_array(other):
    """Regression: the broadcast of a plain argument beside a traced one (the output of a
    number, of an array made before the differentiation or inside it) came back a new traced
    array, recorded as a result of the traced one; it is a constant, as on constants alone, and
    NumPy's values. A replay redoes the number's array."""
    def f(x, c=1.0):
        a, b = np.broadcast_arrays(x, other(x) * c if np.ndim(other(x)) == 0 else other(x))
        # (reverse mode's traced arrays show their buffer: a constant's is marked so)
        assert not hasattr(a, "buffer") or not a.buffer.constant
        assert not hasattr(b, "buffer") or b.buffer.constant
        w = b.copy()
        w[..., 0] = x[1]  # a constant takes a traced value
        return (a * w).sum()

    x = np.array([1.0, 2.0, 3.0, 4.0])
    before = x.tobytes()
    # (f is of degree two: central differences are exact but for rounding)
    expected = np.array([(f(x + d) - f(x - d)) / 2.0 for d in np.eye(4)])
    (g,) = mutad.gradient(f, x)
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    np.testing.assert_allclose(mutad.jvp(f, (x,), (np.eye(4)[1],))[1], expected[1], rtol=1e-6)
    replayed = mutad.grad(f, replay=True)
    for c in (1.0, 2.0, 2.0):
        np.testing.assert_allclose(replayed(x, c=c), mutad.gradient(lambda x: f(x, c), x)[0])
    assert x.tobytes() == before
