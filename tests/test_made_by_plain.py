"""Float arrays the function makes from plain arrays, then writes traced values into: arrays of
integers, booleans, text or dates made before the differentiation and reached by a name (a
module's index grid ``idx = np.arange(n)``, a mask), from which the function computes a float
work array. The work array is followed as one NumPy's factories make: values bit for bit as
NumPy's, gradients as finite differences give, on traced and replayed calls, and the module's
arrays left as they were."""

import numpy as np
import pytest
from rule_checks import central_differences

import mutad


def _program(source, **arrays):
    """The function ``f`` defined by ``source`` in a module of its own holding ``arrays``."""
    namespace = {"np": np, **arrays}
    exec(source, namespace)  # noqa: S102 (a test's own module)
    return namespace["f"], namespace


def _finite_differences(f, x):
    return central_differences(f, x, 1e-6)


PROGRAMS = {
    "integer index grid": ("""
def f(x):
    w = I * 0.5
    w[0] = x[0]
    return (w * x).sum()
""", {"I": np.arange(4)}),
    "boolean mask": ("""
def f(x):
    w = np.where(M, 2.0, 1.0)
    w[M] = x[M] ** 2
    w[1:3] += x[:2]
    return (w * np.sin(x)).sum()
""", {"M": np.array([True, False, True, False])}),
    "unsigned integers": ("""
def f(x):
    w = U / 3
    w[2:] = x[:2] * w[2:]
    return (w ** 2).sum() + w @ x
""", {"U": np.array([3, 1, 4, 1], dtype=np.uint8)}),
    "text": ("""
def f(x):
    w = S.astype(float)
    w[::2] = x[1::2]
    return np.prod(w + x)
""", {"S": np.array(["1.5", "2", "-3", "0.25"])}),
    "dates": ("""
def f(x):
    w = (D - D[0]) / np.timedelta64(1, "D")
    w[1] *= x[1]
    w[3] = x[0] * x[3]
    return (w * x).sum()
""", {"D": np.array(["2024-01-01", "2024-01-03", "2024-02-01", "2024-03-01"],
                    dtype="datetime64[D]")}),
    "integer grid reshaped": ("""
def f(x):
    g = (J.reshape(2, 2) + 1.0)
    g[:, 0] = x[:2]
    g[1] *= x[2:]
    return np.sum(g * g.T)
""", {"J": np.arange(4, dtype=np.int32)}),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("replay", [False, True])
def test_work_array_from_plain_global(name, replay):
    source, arrays = PROGRAMS[name]
    before = {k: (a.tobytes(), a.dtype, a.shape, a.strides, a.flags.writeable)
              for k, a in arrays.items()}
    f, namespace = _program(source, **{k: a.copy() for k, a in arrays.items()})
    differentiate = mutad.value_and_grad(f, replay=replay)
    for x in (np.array([0.3, -1.2, 2.5, 0.7]), np.array([1.1, 0.4, -0.6, 2.0]),
              np.array([-0.5, 0.9, 1.3, -2.2])):
        kept = x.copy()
        value, gradient = differentiate(x)
        assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
        np.testing.assert_allclose(gradient, _finite_differences(f, x), rtol=1e-6, atol=1e-6)
        assert x.tobytes() == kept.tobytes()
        for k, a in arrays.items():
            b = namespace[k]
            assert (b.tobytes(), b.dtype, b.shape, b.strides, b.flags.writeable) == before[k]


def test_replay_sees_the_global_as_changed():
    """A replay of a program whose work array is made from an integer global gives what NumPy
    gives after the module changes that global between calls."""
    f, namespace = _program(PROGRAMS["integer index grid"][0], I=np.arange(4))
    differentiate = mutad.value_and_grad(f, replay=True)
    x = np.array([0.3, -1.2, 2.5, 0.7])
    for step in range(3):
        namespace["I"][1] = 5 + step
        value, gradient = differentiate(x)
        assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
        np.testing.assert_allclose(gradient, _finite_differences(f, x), rtol=1e-6, atol=1e-6)


def test_write_into_integer_global_is_numpys():
    """The function writing into a module's integer array changes it as NumPy does."""
    f, namespace = _program("""
def f(x):
    K[0] += 1
    w = K * 1.0
    w[1] = x[1]
    return (w * x).sum()
""", K=np.arange(4))
    x = np.array([0.3, -1.2, 2.5, 0.7])
    value, gradient = mutad.value_and_grad(f)(x)
    assert namespace["K"].tolist() == [1, 1, 2, 3]
    expected = np.array([1, 1, 2, 3.0]) * x
    expected[1] = x[1] ** 2
    assert value == expected.sum()
    np.testing.assert_allclose(gradient, [1, 2 * x[1], 2, 3])


def test_closure_default_and_attribute_arrays():
    """An index grid held by a closure, a mask given as a default and an integer array an
    object's attribute holds are stood in for as a module's global is."""
    def make():
        idx = np.arange(4)

        def f(x, mask=np.array([True, False, True, True])):
            w = idx * 0.5
            w[0] = x[0]
            v = mask * 1.0
            v[1] = x[1]
            return (w * x).sum() + (v * x).sum()
        return f

    class Grid:
        def __init__(self):
            self.idx = np.arange(4)

        def f(self, x):
            w = self.idx * 0.5
            w[0] = x[0]
            return (w * x).sum()

    x = np.array([1.0, 2.0, 3.0, 4.0])
    grid = Grid()
    for f in (make(), grid.f):
        for replay in (False, True):
            differentiate = mutad.value_and_grad(f, replay=replay)
            for _ in range(3):
                value, gradient = differentiate(x)
                assert np.asarray(value).tobytes() == np.asarray(f(x.copy())).tobytes()
                np.testing.assert_allclose(gradient, _finite_differences(f, x), rtol=1e-6)
    assert grid.idx.tolist() == [0, 1, 2, 3] and x.tolist() == [1.0, 2.0, 3.0, 4.0]
