"""Python's ``float`` as the mode shows it to the differentiated code (``float(x[0])`` followed
as ``x.item()`` is): where that cannot give Python's answer, Python's own stays."""

import numpy as np
import pytest

import mutad
from mutad.errors import ConversionError


# (a module of their own: code reading ``type`` beside ``float`` keeps Python's float for the
# whole module, the test below of this one included)
_TYPED = {"__name__": "typed_user_code"}
exec(compile("""
def compared_by_equality(x):
    return x[0] * (2.0 if type(float(x[1])) == float else 3.0)

def as_a_subclass(x):
    return x[0] * (2.0 if issubclass(type(float(x[1])), float) else 3.0)

def by_name(x):
    return float(x[0] * x[1]) * (2.0 if type(float(x[1])).__name__ == "float" else 3.0)
""", "typed_user_code", "exec"), _TYPED)


@pytest.mark.parametrize("name", ["compared_by_equality", "as_a_subclass", "by_name"])
def test_float_beside_types_of_values_keeps_pythons(name):
    """``type()`` of the value standing for a Python float is mutad's class, so a function that
    reads ``type`` beside ``float`` keeps Python's float, whose ``float()`` of a traced value
    is refused (it gave 3.0 * x[0] where NumPy gives 2.0 * x[0], silently)."""
    x = np.array([0.3, -1.2, 2.5])
    before = x.tobytes()
    with pytest.raises(ConversionError):
        mutad.gradient(_TYPED[name], x)
    assert x.tobytes() == before



# A module whose code reads ``type`` only to show a name or to call it: no type is compared
# with float there, and ``float(loss)`` of a traced loss is followed as ``loss.item()``.
_SHOWN = {"__name__": "shown_user_code"}
exec(compile("""
import logging
import numpy as np

class Model:
    def __init__(self, n):
        self.w = np.zeros(n, dtype=float)

    def __repr__(self):
        return f"{type(self).__name__}(n={self.w.size})"

def main():
    try:
        model = Model(3)
        logging.getLogger("shown").debug("%s: %s", type(model).__name__, model)
    except Exception as e:
        print(type(e).__name__, float("nan"))
        raise TypeError(f"could not build a {type(e).__name__}") from e
    return type(model.w)(model.w)

def loss(x):
    value = np.sum(x ** 2)
    return float(value) * 2.0
""", "shown_user_code", "exec"), _SHOWN)


def test_float_beside_type_shown_or_called_follows_float():
    """Reading ``type`` to print, format or log a name, or to call what it gives, compares no
    type with float: ``float(value)`` in the module is followed, not refused."""
    x = np.array([0.3, -1.2, 2.5])
    before = x.tobytes()
    (g,) = mutad.gradient(_SHOWN["loss"], x)
    np.testing.assert_array_equal(g, 4.0 * x)
    assert x.tobytes() == before


@pytest.mark.parametrize("comparison", [
    "type(v) == float", "type(v) is float", "issubclass(type(v), float)",
    "type(v) in (float, int)", "type(v).__name__ == 'float'", "type(v) != float",
    "f'{type(v).__name__}' == 'float'", "'{}'.format(type(v).__name__) == 'float'",
    "str(type(v)) == \"<class 'float'>\"", "KINDS.get(type(v).__name__) == 1",
    "(lambda t: t == float)(type(v))"])
def test_a_type_compared_with_float_beside_shown_ones_keeps_pythons(comparison):
    """Code that also compares a type with float, however its other reads of ``type`` only
    show it, keeps Python's float (the mode's would take the other branch): refused."""
    namespace = {"__name__": "compared_user_code"}
    exec(compile(f"""
import numpy as np
KINDS = {{"float": 1}}

def describe(e):
    print(type(e).__name__)

def loss(x):
    v = float(x[1])
    return float(np.sum(x ** 2)) * (2.0 if {comparison} else 3.0)
""", "compared_user_code", "exec"), namespace)
    x = np.array([0.3, -1.2, 2.5])
    before = x.tobytes()
    with pytest.raises(ConversionError):
        mutad.gradient(namespace["loss"], x)
    assert x.tobytes() == before


SEEN = {}


def _derives_from_float_and_float64(x):
    class Scaled(float):
        def squared(self):
            return self * self

    class Tagged(np.float64):
        pass

    s, t = Scaled(3.0), Tagged(2.0)
    SEEN.update(Scaled=Scaled, s=s, Tagged=Tagged, t=t)
    return x[0] * s.squared() * float(x[1]) * np.float64(x[0])


def test_a_class_derived_from_float_in_f_is_its_own():
    """``class Scaled(float)`` inside the differentiated function derives from Python's float
    (it derived from the mode's, whose call gives a plain float: Scaled(3.0).squared() raised
    AttributeError, and isinstance(2.0, Scaled) was True), and ``class Tagged(np.float64)``
    from NumPy's (np.float64(x[0]) of the same function was refused)."""
    x = np.array([0.5, 2.0])
    before = x.tobytes()
    (g,) = mutad.gradient(_derives_from_float_and_float64, x)
    assert x.tobytes() == before
    np.testing.assert_array_equal(g, [2 * 9.0 * 2.0 * 0.5, 9.0 * 0.5 * 0.5])
    Scaled, s, Tagged, t = SEEN["Scaled"], SEEN["s"], SEEN["Tagged"], SEEN["t"]
    assert Scaled.__bases__ == ((1.0).__class__,) and Tagged.__bases__ == (np.float64,)
    assert s.__class__ == Scaled and t.__class__ == Tagged
    assert not isinstance(2.0, Scaled) and not isinstance(np.float64(1.0), Tagged)
    assert _derives_from_float_and_float64(x.copy()) == 0.5 * 9.0 * 2.0 * 0.5


# a Python int that no double holds, nearer to a float32 tie than the double NumPy rounds it to
# first: NumPy's assignment gives 2**63 in float32, a cast from int64 the float32 above
BETWEEN = 2 ** 63 + 2 ** 39 + 1
WRITES = {
    "element": lambda y: y.__setitem__(0, BETWEEN),
    "slice": lambda y: y.__setitem__(slice(0, 2), BETWEEN),
    "list": lambda y: y.__setitem__(slice(0, 2), [BETWEEN, BETWEEN]),
    "past int64": lambda y: y.__setitem__(1, 2 ** 70),
}


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_python_int_written_is_numpys_nearest_double_first(write, dtype):
    """A Python int written into floats is NumPy's: the nearest double, then the array's dtype
    (it was np.positive's cast from int64, which rounds once: a float32 one ulp above NumPy's,
    silently, and it refused an int past int64 with a UFuncTypeError)."""
    def f(x):
        y = x.astype(dtype)
        WRITES[write](y)
        return (y.astype(np.complex128).real * x).sum()

    x = np.array([1.0, 2.0, 3.0])
    before = x.tobytes()
    expected = f(x.copy())
    replayed = mutad.value_and_grad(f, replay=True)
    for value, _ in [mutad.value_and_grad(f)(x), replayed(x), replayed(x),
                     mutad.jvp(f, (x,), (np.ones(3),))]:
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    assert x.tobytes() == before


def test_a_python_int_past_the_doubles_raises_numpys_overflow():
    """(f catches it: it was a UFuncTypeError)"""
    def f(x):
        y = x.copy()
        try:
            y[0] = 10 ** 400
        except OverflowError:
            y[0] = 3 * x[1]
        return (y * x).sum()

    x = np.array([1.0, 2.0])
    (g,) = mutad.gradient(f, x)
    np.testing.assert_array_equal(g, [6.0, 7.0])  # of 3 x1 x0 + x1 x1


def _reads_a_view_of_an_index_then_writes_the_index(x, c):
    i = np.argsort(c)
    v = i[1:]
    a = x[v]
    i[:] = 0
    return (a * np.array([1.0, 2.0, 3.0])).sum()


def test_a_view_of_an_index_f_writes_after_a_read_is_replayed_as_traced():
    """A replay records ``np.argsort(c)`` as a constant: its view ``i[1:]`` is the same buffer,
    so ``i[:] = 0`` after ``x[v]`` read it is undone for that read's reverse (the view had a
    buffer of its own: the gather's reverse read the zeros, a gradient [6, 0, 0, 0] on every
    call)."""
    f = _reads_a_view_of_an_index_then_writes_the_index
    replayed = mutad.value_and_grad(f, argnums=0, replay=True)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x, c = rng.standard_normal(4), rng.standard_normal(4)
        before = (x.tobytes(), c.tobytes())
        expected = np.zeros(4)
        expected[np.argsort(c)[1:]] = [1.0, 2.0, 3.0]
        traced = mutad.value_and_grad(f, argnums=0)(x, c)
        value, g = replayed(x, c)
        np.testing.assert_array_equal(traced[1], expected)
        assert g.tobytes() == expected.tobytes() and value == traced[0] == f(x, c)
        assert (x.tobytes(), c.tobytes()) == before
