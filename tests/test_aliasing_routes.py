"""Arrays viewing the memory of an array made before the call by a route other than NumPy's
views and indexing (``np.frombuffer(W.data)``, ``np.ndarray(shape, buffer=W)``,
``np.asarray(memoryview(W))``, an object's ``__array_interface__``, ``W.__array__()``,
``np.ndarray.__getitem__(W, k)``, ``as_strided(W, ...)``, ``np.ctypeslib.as_array`` of
``W.ctypes``) are that array's views to the differentiation: a write through either name is
seen through the other, as in NumPy. Each stood for memory of its own, so that a traced write
into ``W`` was read through the other name as a constant, or a write through it went where
mutad did not look: a silently wrong gradient (and, in forward mode, a wrong value)."""

import ctypes

import numpy as np
import pytest

import mutad


class _Interface:
    def __init__(self, a):
        self.__array_interface__ = dict(a.__array_interface__)


ROUTES = {
    "frombuffer(memoryview)": lambda w: np.frombuffer(memoryview(w), dtype=np.float64),
    "frombuffer(data)": lambda w: np.frombuffer(w.data, dtype=np.float64),
    "frombuffer(cast)": lambda w: np.frombuffer(memoryview(w).cast("B"), dtype=np.float64),
    "frombuffer": lambda w: np.frombuffer(w, dtype=np.float64),
    "ndarray(buffer=w)": lambda w: np.ndarray(w.shape, np.float64, buffer=w),
    "ndarray(buffer=memoryview)": lambda w: np.ndarray((3,), np.float64, buffer=memoryview(w)),
    "asarray(memoryview)": lambda w: np.asarray(memoryview(w)),
    "array(memoryview, copy=False)": lambda w: np.array(memoryview(w), copy=False),
    "asarray(interface)": lambda w: np.asarray(_Interface(w)),
    "__array__": lambda w: w.__array__(),
    "ndarray.view": lambda w: np.ndarray.view(w, np.ndarray),
    "ndarray.__getitem__": lambda w: np.ndarray.__getitem__(w, slice(None)),
    "as_strided": lambda w: np.lib.stride_tricks.as_strided(w, shape=(3,), strides=(8,)),
    "ctypeslib.as_array": lambda w: np.ctypeslib.as_array(
        w.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), shape=(3,)),
    "ctypeslib.as_array(from_address)": lambda w: np.ctypeslib.as_array(
        (ctypes.c_double * 3).from_address(w.ctypes.data)),
}


def _write_then_read_the_view(w, v, x):
    w[:] = x * x
    return (v * v).sum() + v[1] * x[0]


def _write_the_view_read_w(w, v, x):
    v *= x
    return (w * x).sum()


def _constant_through_the_view(w, v, x):
    w *= x
    v[0] = 5.0
    return (w * x).sum()


def _read_only(w, v, x):
    return (v * x).sum() + (w * x).sum()


PROGRAMS = [_write_then_read_the_view, _write_the_view_read_w, _constant_through_the_view,
            _read_only]

W0 = np.array([1.25, -0.5, 2.0])
W = W0.copy()


def _function(route, program):
    make = ROUTES[route]

    def f(x):
        return program(W, make(W), x)

    return f


def _numpy(f, x):
    """f's value and what it leaves in W, run by NumPy from W0."""
    W[:] = W0
    y = f(x.copy())
    left = W.copy()
    W[:] = W0
    return y, left


def _gradient_fd(f, x, h=1e-6):
    return np.array([(_numpy(f, x + h * e)[0] - _numpy(f, x - h * e)[0]) / (2 * h)
                     for e in np.eye(x.size)])


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("mode", ["gradient", "jvp", "hessian", "replay"])
def test_a_view_by_another_route_is_the_arrays_view(route, program, mode):
    f = _function(route, program)
    x = np.array([0.5, 1.5, -2.5])
    caller = x.copy()
    if mode == "gradient":
        W[:] = W0
        value, grad = mutad.value_and_gradient(f, caller)
        left = W.copy()
        expected, numpy_left = _numpy(f, x)
        assert value == expected and left.tobytes() == numpy_left.tobytes()
        np.testing.assert_allclose(grad[0], _gradient_fd(f, x), rtol=1e-6, atol=1e-6)
    elif mode == "jvp":
        t = np.array([0.3, -0.7, 1.1])
        W[:] = W0
        value, tangent = mutad.jvp(f, (caller,), (t,))
        left = W.copy()
        expected, numpy_left = _numpy(f, x)
        assert value == expected and left.tobytes() == numpy_left.tobytes()
        np.testing.assert_allclose(tangent, _gradient_fd(f, x) @ t, rtol=1e-6, atol=1e-6)
    elif mode == "hessian":
        W[:] = W0
        hessian = mutad.hessian(f, caller)
        left = W.copy()
        h = 1e-4
        fd = np.array([(_gradient_fd(f, x + h * e) - _gradient_fd(f, x - h * e)) / (2 * h)
                       for e in np.eye(x.size)])
        assert left.tobytes() == _numpy(f, x)[1].tobytes()
        np.testing.assert_allclose(hessian, fd, rtol=1e-3, atol=1e-3)
    else:
        g = mutad.value_and_grad(f, replay=True)
        for k in range(3):
            xk = x + 0.25 * k
            caller = xk.copy()
            W[:] = W0
            value, grad = g(caller)
            left = W.copy()
            expected, numpy_left = _numpy(f, xk)
            assert value == expected and left.tobytes() == numpy_left.tobytes()
            np.testing.assert_allclose(grad, _gradient_fd(f, xk), rtol=1e-6, atol=1e-6)
            assert caller.tobytes() == xk.tobytes()
    if mode != "replay":
        assert caller.tobytes() == x.tobytes()
    W[:] = W0


def test_a_replay_writing_through_ndarray_buffer_of_a_traced_array():
    """``np.ndarray(shape, buffer=w)`` of an array f made is a view the replay holds no slot
    for: a write through it ended the recording with an AttributeError; now the program is
    traced on every call, its values NumPy's."""
    def f(x):
        w = x * 1.0
        v = np.ndarray(w.shape, np.float64, buffer=w)
        v *= x
        return (w * x).sum()

    g = mutad.value_and_grad(f, replay=True)
    for k in range(3):
        x0 = np.array([0.5, 1.5, -2.5]) + k
        x = x0.copy()
        value, grad = g(x)
        assert value == f(x0.copy())
        np.testing.assert_array_equal(grad, 3 * x0 * x0, strict=True)
        assert x.tobytes() == x0.tobytes()


SOURCES = {
    "argument": lambda x, w0: x,
    "argument outside argnums": lambda x, w0: w0,
    "temporary": lambda x, w0: x * 1.0,
    "constant": lambda x, w0: np.ones(3),
}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.strip("_"))
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mode", ["gradient", "jvp", "hessian", "replay"])
def test_array_method_of_a_traced_array_is_the_array(source, program, mode):
    """``w.__array__()`` in the function's code is ``w`` itself, as NumPy's. Of an array the
    function made or was given outside argnums it was the plain array of its memory, which
    read the traced values later written into ``w`` as constants (wrong gradients, and wrong
    values under jvp); of a traced argument it was refused."""
    def f(x, w0):
        w = SOURCES[source](x, w0)
        return program(w, w.__array__(), x * 1.0)

    def numpy_f(x):
        return f(x.copy(), W0.copy())

    for k in range(3 if mode == "replay" else 1):
        x0 = np.array([0.5, 1.5, -2.5]) + 0.25 * k
        x, w0 = x0.copy(), W0.copy()
        if mode == "gradient":
            value, grad = mutad.value_and_gradient(f, x, w0, argnums=0)
        elif mode == "jvp":
            t = np.array([0.3, -0.7, 1.1])
            value, tangent = mutad.jvp(f, (x, w0), (t, np.zeros(3)))
        elif mode == "hessian":
            hessian = mutad.hessian(f, x, w0, argnums=0)
            h = 1e-4
            fd = np.array([(_gradient_fd(numpy_f, x0 + h * e) - _gradient_fd(numpy_f, x0 - h * e))
                           / (2 * h) for e in np.eye(3)])
            np.testing.assert_allclose(hessian, fd, rtol=1e-3, atol=1e-3)
        else:
            if k == 0:
                g = mutad.value_and_grad(f, argnums=0, replay=True)
            value, grad = g(x, w0)
        if mode != "hessian":
            assert value == numpy_f(x0)
        if mode in ("gradient", "replay"):
            np.testing.assert_allclose(grad, _gradient_fd(numpy_f, x0), rtol=1e-6, atol=1e-6)
        if mode == "jvp":
            np.testing.assert_allclose(tangent, _gradient_fd(numpy_f, x0) @ t, rtol=1e-6,
                                       atol=1e-6)
        assert x.tobytes() == x0.tobytes() and w0.tobytes() == W0.tobytes()


@pytest.mark.parametrize("source", ["constant", "argument outside argnums"])
@pytest.mark.parametrize("read_first", [False, True])
@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay"])
def test_a_plain_array_converted_from_memory_later_traced_is_refused(source, read_first, mode):
    """A conversion not written ``w.__array__()`` (``getattr(w, "__array__")()``, compiled code)
    hands out a plain array of ``w``'s memory, which reads the traced values later written
    into ``w`` as constants. jvp returned a wrong tangent (0.5 instead of NumPy's finite
    difference, 1.0), and the gradient a raw ``ValueError`` from its reverse pass: both modes
    now refuse with a MutadError that says what to write instead."""
    def f(x, w0):
        w = SOURCES[source](x, w0) * 1.0 if source == "constant" else w0
        v = getattr(w, "__array__")()
        y = (v * x).sum() if read_first else 0.0
        w *= x
        return y + (v * x).sum()

    x0, t = np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])
    x, w0 = x0.copy(), W0.copy()
    # (of an argument's memory, reverse mode's check of arrays viewing arguments refuses first)
    match = "plain ndarray of the same memory" if source == "constant" or mode == "jvp" \
        else "shares memory with an argument|an argument of shape"
    with pytest.raises(mutad.MutadError, match=match):
        if mode == "gradient":
            mutad.gradient(f, x, w0, argnums=0)
        elif mode == "jvp":
            mutad.jvp(f, (x, w0), (t, np.zeros(3)))
        else:
            mutad.value_and_grad(f, argnums=0, replay=True)(x, w0)
    assert x.tobytes() == x0.tobytes() and w0.tobytes() == W0.tobytes()


def test_a_plain_array_converted_from_memory_never_traced_is_followed():
    """The refusal above is of traced writes only: a conversion of memory that stays constant
    is NumPy's plain array, values and derivatives NumPy's."""
    def f(x):
        w = np.ones(3)
        v = getattr(w, "__array__")()
        w *= 2.0
        return (v * x * x).sum()

    x0 = np.array([1.0, 2.0, 3.0])
    x = x0.copy()
    value, grad = mutad.value_and_grad(f)(x)
    assert value == f(x0.copy())
    np.testing.assert_array_equal(grad, 4.0 * x0, strict=True)
    _, tangent = mutad.jvp(f, (x,), (np.array([1.0, -1.0, 0.5]),))
    assert tangent == 4.0 * (1.0 - 2.0 + 1.5)
    assert x.tobytes() == x0.tobytes()


def test_a_plain_array_converted_from_memory_not_read_after_a_traced_write_is_followed():
    """Only a read of the plain array once its memory carries a derivative is refused: one
    read before the write alone is a constant, as NumPy's values are."""
    def f(x):
        w = np.ones(3)
        v = getattr(w, "__array__")()
        y = (v * x).sum()
        w[:] = x * x
        return y + (w * x).sum()

    x0, t = np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])
    x = x0.copy()
    value, tangent = mutad.jvp(f, (x,), (t,))
    assert value == f(x0.copy())
    assert tangent == ((1.0 + 3.0 * x0 ** 2) * t).sum()
    assert x.tobytes() == x0.tobytes()
