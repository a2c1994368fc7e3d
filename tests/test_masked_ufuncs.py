"""A ufunc with ``where=`` and ``out=`` (the safe division ``np.divide(a, b,
out=np.zeros_like(a), where=b != 0)``): NumPy computes the selected elements only and leaves
the others of ``out`` as they were, and so does mutad, in both modes, to second order and under
replay (``arraylike.masked_ufunc``): NumPy's values bit for bit, no derivative taken where the
mask leaves the ufunc out, the caller's arrays back bit for bit."""

import warnings

import numpy as np
import pytest

import mutad
from mutad.errors import UnsupportedOperationError
from test_replay import replayed_like_traced

A = np.array([1.5, -0.5, 2.0, 0.25, -1.25, 3.0])
B = np.array([0.5, 0.0, -2.0, 0.0, 1.5, 4.0])  # zeros: the division is left out there


def safe_division(a, b):
    out = np.zeros_like(a)
    np.divide(a, b, out=out, where=b != 0)
    return out


def in_place(a, b):
    y = a * 1.0
    np.multiply(y, b, out=y, where=y > 0)
    return y


def logarithm_into_a_filled_array(a, b):
    out = np.full(6, -5.0)
    np.log(a, out=out, where=a > 0)
    return out * b


def broadcast_mask_and_operands(a, b):
    out = np.outer(a[:3], b[:2]).T.copy()  # 2 x 3, written where the row mask selects
    np.add(out, a[3:], out=out, where=np.array([[True], [False]]))
    np.power(out, 2.0, out=out, where=out > 0)
    return out


def into_float32(a, b):
    out = np.zeros(6, np.float32)
    np.subtract(a, 1.0, out=out, where=b >= 0)
    return out.astype(np.float64) * 3.0


def into_the_argument(a, b):
    np.multiply(a, 3.0, out=a, where=a > 0)  # the caller's array: put back after
    np.log(a, out=a, where=a > 1)
    return a * b


def nothing_selected(a, b):
    out = a * 2.0
    np.divide(a, b, out=out, where=np.zeros(6, bool))
    return out


FORMS = {f.__name__: f for f in (safe_division, in_place, logarithm_into_a_filled_array,
                                 broadcast_mask_and_operands, into_float32, into_the_argument,
                                 nothing_selected)}


@pytest.mark.parametrize("form", FORMS)
def test_a_masked_ufunc_is_numpys_and_differentiated_where_it_computes(form):
    f = FORMS[form]
    a, b = A.copy(), B.copy()

    def loss(a, c):
        # b's zeros kept (a mask b != 0 is a decision at them): its other entries differentiated
        return np.sum(np.sin(f(a, np.where(B != 0, c, 0.0))))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero, no log of a negative number
        y, back = mutad.pullback(f, a, b)
        expected = f(A.copy(), B.copy())
        assert y.dtype == expected.dtype and y.tobytes() == expected.tobytes()
        back(np.ones_like(y))  # puts the arguments back
        assert mutad.jvp(f, (a, b), (np.ones(6), np.ones(6)))[0].tobytes() == expected.tobytes()
        if form != "into_float32":  # float32 values: too coarse for finite differences
            for policy in ("restore", "checkpoint"):
                mutad.check_grads(loss, a, b, policy=policy, order=2)
    assert a.tobytes() == A.tobytes() and b.tobytes() == B.tobytes()  # the caller's arrays


def test_the_gradient_is_the_selected_elements():
    (ga, gb) = mutad.gradient(lambda a, b: safe_division(a, b).sum(), A.copy(), B.copy())
    selected = B != 0
    assert np.array_equal(ga, np.where(selected, 1.0 / np.where(selected, B, 1.0), 0.0))
    assert np.array_equal(gb[~selected], np.zeros(2))
    (g32,) = mutad.gradient(lambda a: into_float32(a, B).sum(), A.copy())
    assert np.array_equal(g32, np.where(B >= 0, 3.0, 0.0))


def test_masked_ufuncs_replay_as_traced():
    def f(a, b):
        return np.sum(safe_division(a, b) ** 2) + np.sum(in_place(a, b))

    # (each call selects another number of elements than the last, 4, 2 and 4 where y > 0:
    # the selected elements are gathered, whose count the replay guards, so each records)
    replayed_like_traced(f, [(A, B), (A * -1.0, B), (A, np.roll(B, 1))], replayed=False)


def test_numpys_errors_and_a_mask_without_out():
    def casting(a):
        out = np.zeros(6, np.int64)
        np.divide(a, 2.0, out=out, where=a > 0)
        return out.sum() + a.sum()

    with pytest.raises(TypeError) as numpys:
        casting(A.copy())
    with pytest.raises(type(numpys.value)):
        mutad.gradient(casting, A.copy())
    with pytest.raises(UnsupportedOperationError, match="without out="):
        mutad.gradient(lambda a: np.divide(1.0, a, where=a > 0).sum(), A.copy())


UFUNCS = [u for u in (getattr(np, name) for name in dir(np))
          if isinstance(u, np.ufunc) and u.nout == 1 and u.nin <= 2 and u.signature is None]


@pytest.mark.parametrize("step", [1, 2], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_numpys_masked_loops_give_each_element_as_the_gathered_call(dtype, step):
    # What masked_ufunc's values rest on: NumPy's where= loop hands the selected runs to the
    # same elementwise loop, whose value at an element does not depend on its neighbours (not
    # so for float16, which masked_ufunc refuses).
    rng = np.random.default_rng(3)
    for ufunc in UFUNCS:
        for threshold in (0.05, 0.3, 0.9):
            xs = [(3.0 * rng.standard_normal(1037 * step)).astype(dtype)[::step]
                  for _ in range(ufunc.nin)]
            mask = rng.random(1037) > threshold
            try:
                with np.errstate(all="ignore"):
                    out = np.zeros_like(ufunc(*xs))
                    ufunc(*xs, out=out, where=mask)
                    gathered = ufunc(*[x[mask] for x in xs])
            except (TypeError, ValueError):  # a loop NumPy has not for this dtype
                continue
            assert out[mask].tobytes() == gathered.astype(out.dtype).tobytes(), ufunc


def test_a_generalized_ufunc_with_where_is_numpys_error():
    def f(a):
        out = np.zeros((2, 2))
        np.matmul(a.reshape(2, 3), a.reshape(3, 2), out=out, where=np.array([True, False]))
        return out.sum()

    with pytest.raises(TypeError, match="where"):  # NumPy's: matmul takes no where=
        f(A.copy())
    with pytest.raises(TypeError, match="where"):
        mutad.gradient(f, A.copy())


def test_a_masked_ufunc_computing_in_float16_is_refused():
    """Regression: NumPy's masked float16 loop on strided data rounds some elements otherwise
    than its loop of the selected elements (np.log10 at 1 of 4,000): a value off NumPy's."""
    def f(a):
        z = a.astype(np.float16)
        out = np.zeros(z[::2].shape, np.float16)
        np.log10(z[::2], out=out, where=z[::2] > 0)
        return out.astype(np.float64).sum() + a.sum()

    with pytest.raises(UnsupportedOperationError, match="float16"):
        mutad.gradient(f, np.linspace(0.1, 4.0, 40))
