"""``out=`` arrays NumPy refuses: every engine raises NumPy's own error, before any write,
and leaves the caller's arrays as they were."""
import warnings

import numpy as np
import pytest

import mutad
from mutad.testing import check_grads


def _read_only(shape):
    out = np.zeros(shape)
    out.flags.writeable = False
    return out


REFUSED = {
    "dot Fortran-ordered": lambda a, b: np.dot(a, b, out=np.asfortranarray(np.zeros((3, 3)))),
    "dot float32": lambda a, b: np.dot(a, b, out=np.zeros((3, 3), np.float32)),
    "dot strided": lambda a, b: np.dot(a, b, out=np.zeros((3, 6))[:, ::2]),
    "dot read-only": lambda a, b: np.dot(a, b, out=_read_only((3, 3))),
    "dot positional": lambda a, b: np.dot(a, b, np.zeros((3, 6))[:, ::2]),
    "einsum integer": lambda a, b: np.einsum("ij,jk->ik", a, b, out=np.zeros((3, 3), int)),
    "clip integer": lambda a, b: np.clip(a, 0, 5, out=np.zeros((3, 3), int)),
    "concatenate integer": lambda a, b: np.concatenate([a, b], out=np.zeros((6, 3), int)),
    "sum extra dimension": lambda a, b: np.sum(a * b, axis=0, out=np.zeros((1, 3))),
    "add.reduce extra dimension": lambda a, b: np.add.reduce(a * b, axis=0,
                                                             out=np.zeros((1, 3))),
    "take extra dimension": lambda a, b: np.take(a * b, [0, 1], out=np.zeros((1, 2))),
    "matmul integer": lambda a, b: np.matmul(a, b, out=np.zeros((3, 3), int)),
}


def _summed(write):
    def f(a, b):
        return np.sum(write(a, b)) * 1.0
    return f


def _numpy_error(f, a, b):
    with pytest.raises(Exception) as raised:
        f(a.copy(), b.copy())
    assert isinstance(raised.value, (ValueError, TypeError))
    return raised.value


def _calls(f, a, b):
    return {
        "gradient": lambda: mutad.gradient(f, a, b),
        "jvp": lambda: mutad.jvp(f, (a, b), (np.ones((3, 3)), np.ones((3, 3)))),
        "replay": lambda: mutad.value_and_grad(f, argnums=(0, 1), replay=True)(a, b),
    }


@pytest.mark.parametrize("engine", ["gradient", "jvp", "replay"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_out_raises_numpys_error(case, engine):
    f = _summed(REFUSED[case])
    a0, b0 = np.arange(1.0, 10.0).reshape(3, 3), np.eye(3) + 0.5
    expected = _numpy_error(f, a0, b0)
    a, b = a0.copy(), b0.copy()
    with pytest.raises(type(expected)) as raised:
        _calls(f, a, b)[engine]()
    assert str(raised.value) == str(expected)
    assert not isinstance(raised.value, mutad.MutadError)
    np.testing.assert_array_equal(a, a0, strict=True)
    np.testing.assert_array_equal(b, b0, strict=True)


def test_accepted_out_layouts_still_differentiate():
    """The judgement refuses nothing NumPy takes: a C-contiguous ``out`` of the result's dtype
    for ``np.dot``, a strided one for a ufunc and a reduction, an ``out`` that is an operand."""
    def f(a, b):
        work = np.zeros((3, 6))
        np.dot(a, b, out=work[:, :3].copy())
        c = np.empty((3, 3))
        np.dot(a, b, out=c)
        np.multiply(c, a, out=work[:, ::2])
        np.sum(c, axis=1, out=work[:, 1])
        np.matmul(c, b, out=c)
        return np.sum(work) + np.sum(c)

    a, b = np.arange(1.0, 10.0).reshape(3, 3), np.eye(3) + 0.5
    a0, b0 = a.copy(), b.copy()
    value, grads = mutad.value_and_grad(f, argnums=(0, 1))(a, b)
    assert value == f(a0.copy(), b0.copy())
    np.testing.assert_array_equal(a, a0, strict=True)
    np.testing.assert_array_equal(b, b0, strict=True)
    check_grads(f, a, b)
    tangent = mutad.jvp(f, (a, b), (np.ones((3, 3)), np.zeros((3, 3))))[1]
    assert np.isclose(tangent, np.sum(grads[0]))


def test_judgement_issues_no_warning_of_its_own():
    """NumPy's warnings of a call with ``out=`` are issued once, by the call itself."""
    def f(a):
        out = np.zeros(3)
        np.mean(a[:0], axis=0, out=out)
        return np.sum(out) + np.sum(a)

    def messages(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        return [str(w.message) for w in caught]

    a = np.ones((2, 3))
    assert messages(lambda: mutad.gradient(f, a)) == messages(lambda: f(a.copy()))


@pytest.mark.parametrize("engine", ["gradient", "jvp", "replay"])
def test_a_layout_accepted_once_does_not_accept_another(engine):
    """NumPy's judgement is kept per layout: a loop's ``np.dot(a, b, out=c)`` is judged once,
    and an ``out`` of the same shape laid out otherwise, or of another dtype, after it is
    still refused as NumPy refuses it."""
    accepted = _summed(lambda a, b: np.dot(a, b, out=np.zeros((3, 3))))
    a0, b0 = np.arange(1.0, 10.0).reshape(3, 3), np.eye(3) + 0.5
    a, b = a0.copy(), b0.copy()
    for _ in range(2):
        _calls(accepted, a, b)[engine]()
    for case in ("dot Fortran-ordered", "dot float32", "dot strided", "dot read-only"):
        f = _summed(REFUSED[case])
        expected = _numpy_error(f, a0, b0)
        with pytest.raises(type(expected)) as raised:
            _calls(f, a, b)[engine]()
        assert str(raised.value) == str(expected)
    np.testing.assert_array_equal(a, a0, strict=True)
    np.testing.assert_array_equal(b, b0, strict=True)


INTEGER_OUTS = {
    "add.accumulate int64": (lambda x, o: np.add.accumulate(x, out=o), (4,), np.int64),
    "add.accumulate int8": (lambda x, o: np.add.accumulate(x, out=o), (4,), np.int8),
    "add.accumulate bool": (lambda x, o: np.add.accumulate(x, out=o), (4,), np.bool_),
    "multiply.accumulate int64": (lambda x, o: np.multiply.accumulate(x, out=o), (4,),
                                  np.int64),
    "add.reduce int64": (lambda x, o: np.add.reduce(x, out=o), (), np.int64),
    "add.reduceat int64": (lambda x, o: np.add.reduceat(x, [0, 2], out=o), (2,), np.int64),
}


@pytest.mark.parametrize("engine", ["gradient", "jvp", "replay"])
@pytest.mark.parametrize("case", list(INTEGER_OUTS))
def test_a_reduction_into_integers_casts_as_numpy(case, engine):
    """A ufunc's reduction into an integer ``out`` f made computes in the promotion of the
    operand's dtype and ``out``'s and casts into ``out`` (NumPy refuses no kind there, unlike
    the ufunc's call): its values NumPy's bit for bit, their derivative zero. It was refused
    as a traced value written into an array mutad does not follow."""
    write, shape, dtype = INTEGER_OUTS[case]

    def f(x):
        o = np.zeros(shape, dtype)
        write(x, o)
        return (x[:o.size] * o).sum() if o.ndim else x.sum() * o

    def numpy_gradient(x):
        o = np.zeros(shape, dtype)
        write(x, o)
        g = np.zeros_like(x)
        if o.ndim:
            g[:o.size] = o
        else:
            g[:] = o
        return g

    for k in range(3 if engine == "replay" else 1):
        x0 = np.array([0.5, 1.5, 2.5, -1.25]) + 0.75 * k
        x = x0.copy()
        expected = f(x0.copy())
        if engine == "jvp":
            value, tangent = mutad.jvp(f, (x,), (np.ones(4),))
            assert value == expected and tangent == numpy_gradient(x0).sum()
        else:
            if k == 0:
                g = mutad.value_and_grad(f, replay=engine == "replay")
            value, grad = g(x)
            assert value == expected
            np.testing.assert_array_equal(grad, numpy_gradient(x0), strict=True)
        np.testing.assert_array_equal(x, x0, strict=True)


FUNCTION_INTEGER_OUTS = {
    "clip unsafe": (lambda x, o: np.clip(x * 2, -1, 3, out=o, casting="unsafe"), (4,)),
    "clip traced bounds": (lambda x, o: np.clip(x * 2, x[0], x[2] + 1, out=o,
                                                casting="unsafe"), (4,)),
    "cumsum": (lambda x, o: np.cumsum(x * 2, out=o), (4,)),
    "sum": (lambda x, o: np.sum(x * 3, out=o), ()),
    "mean": (lambda x, o: np.mean(x * 3, out=o), ()),
    "einsum unsafe": (lambda x, o: np.einsum("i,i->i", x, x, out=o, casting="unsafe"), (4,)),
    "concatenate unsafe": (lambda x, o: np.concatenate([x, x * 2], out=o, casting="unsafe"),
                           (8,)),
}


@pytest.mark.parametrize("engine", ["gradient", "jvp", "replay"])
@pytest.mark.parametrize("case", list(FUNCTION_INTEGER_OUTS))
def test_a_function_into_integers_casts_as_numpy(case, engine):
    """A function with a rule (``np.clip``, ``np.cumsum``, ``np.mean``) writing values with a
    derivative into an integer ``out`` f made casts them as NumPy does (its values NumPy's,
    their derivative zero), as a ufunc's call does. It was refused as a write into an array
    mutad does not follow when traced, and raised NumPy's casting error of a copy when
    replayed."""
    write, shape = FUNCTION_INTEGER_OUTS[case]

    def f(x):
        o = np.zeros(shape, np.int64)
        write(x, o)
        return (x * o[:4]).sum() if o.ndim else x.sum() * o

    def numpy_gradient(x):
        o = np.zeros(shape, np.int64)
        write(x, o)
        return (o[:4] if o.ndim else np.full(4, o)).astype(float)

    x0 = np.array([0.3, 1.7, 2.5, -1.2])
    if engine == "jvp":
        x = x0.copy()
        value, tangent = mutad.jvp(f, (x,), (np.ones(4),))
        assert value == f(x0.copy()) and tangent == numpy_gradient(x0).sum()
        np.testing.assert_array_equal(x, x0, strict=True)
        return
    g = mutad.value_and_grad(f, replay=engine == "replay")
    for k in range(2 if engine == "replay" else 1):
        x1 = x0 + 0.001 * k  # (the same integers: the replay's guard holds)
        x = x1.copy()
        replays = sum(p.replays for p in g.programs.values()) if engine == "replay" else 0
        value, grad = g(x)
        assert value == f(x1.copy())
        np.testing.assert_array_equal(grad, numpy_gradient(x1), strict=True)
        np.testing.assert_array_equal(x, x1, strict=True)
        if k:
            assert sum(p.replays for p in g.programs.values()) == replays + 1, g.reasons
