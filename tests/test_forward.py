"""Forward mode's core: tangents mutated alongside primals, views, out=, writes, custom rules."""

import numpy as np
import pytest

import mutad
from mutad import errors

jvp = mutad.jvp


def test_tangents_follow_in_place_updates_and_views():
    def f(a, b):
        a += b              # ȧ += ḃ
        view = a[1:]
        view *= a[:-1]      # through a view: overlapping operands
        np.exp(a, out=a)
        a[0] = 2.0 * b[0]   # element assignment
        return a

    a, b = np.array([0.1, 0.2, 0.3]), np.array([0.5, -0.5, 1.0])
    before = a.tobytes(), b.tobytes()
    mutad.check_jvp(f, a, b)
    y, dy = jvp(f, (a, b), (np.ones(3), np.zeros(3)))
    assert (a.tobytes(), b.tobytes()) == before
    h = 1e-6
    fd = (f(a + h, b.copy()) - f(a - h, b.copy())) / (2 * h)
    np.testing.assert_allclose(dy, fd, rtol=1e-7)


def test_arguments_that_share_memory_have_one_tangent_the_sum():
    x = np.array([1.0, 2.0, 3.0])
    y, dy = jvp(lambda a, b: a * 1.0, (x, x), (np.ones(3), np.full(3, 2.0)))
    np.testing.assert_array_equal(dy, [3.0, 3.0, 3.0])
    # the transpose of gradient's convention: <J v, w> = <v, J^T w> place by place
    f = lambda a, b: (a * b).sum()  # noqa: E731
    ga, gb = mutad.gradient(f, x, x)
    _, d = jvp(f, (x, x), (np.ones(3), np.full(3, 2.0)))
    assert d == pytest.approx(ga.sum() + 2 * gb.sum())


def test_out_arguments_and_functions_that_write():
    def f(x):
        out = np.zeros_like(x)
        np.multiply(x, x, out=out)
        np.add.at(out, [0, 0, 2], x[:3])
        np.copyto(out, 3.0 * x, where=x > 0.5)
        np.put(out, [1], x[2:3])
        np.matmul(x[:2, None], x[None, :2], out=out[:4].reshape(2, 2))
        return out

    mutad.check_jvp(f, np.array([0.2, 0.7, 0.4, 0.9, 0.1]))


PLAIN = np.zeros(3)  # allocated before jvp ran


def test_a_tangent_written_into_a_plain_array_is_refused():
    def f(x):
        PLAIN[0] = x[0]
        return PLAIN

    with pytest.raises(errors.UntracedWriteError, match="Allocate that array inside"):
        jvp(f, (np.ones(3),), (np.ones(3),))

    def g(x):
        np.sin(x, out=PLAIN)

    with pytest.raises(errors.UntracedWriteError, match="inside the function jvp"):
        jvp(g, (np.ones(3),), (np.ones(3),))
    assert PLAIN.tolist() == [0.0, 0.0, 0.0]


def test_a_tangent_written_into_an_array_allocated_inside_is_kept():
    def f(x):
        out = np.zeros(3)
        out[0] = x[0]
        np.sin(x[1:], out=out[1:])
        return out

    mutad.check_jvp(f, np.array([0.2, 0.7, 0.4]))


def test_conversions_and_missing_rules_are_clear():
    with pytest.raises(errors.ConversionError):
        jvp(lambda x: float(x[0]), (np.ones(2),), (np.ones(2),))

    @mutad.adjoint
    def cube(x):
        return x ** 3

    @cube.rule
    def _cube_rule(x):
        return cube(x), lambda dy: (3 * x * x * dy,)

    with pytest.raises(errors.UnsupportedFunctionError, match="jvp_rule"):
        jvp(cube, (np.ones(2),), (np.ones(2),))


def test_a_decorated_function_with_a_forward_rule():
    @mutad.adjoint
    def cube(x):
        return x ** 3

    @cube.jvp_rule
    def _cube_forward(tangents, x):
        (dx,) = tangents
        return x ** 3, 3 * x * x * dx   # NumPy operations: reverse mode can follow them

    x = np.array([1.0, 2.0])
    y, dy = jvp(lambda x: cube(x) * 2.0, (x,), (np.array([1.0, 0.5]),))
    np.testing.assert_allclose(dy, [6.0, 12.0])
    # its forward rule is differentiated again by reverse mode: second derivatives
    np.testing.assert_allclose(mutad.hvp(lambda x: cube(x).sum(), (x,), (np.ones(2),)),
                               6 * x)


def test_an_in_place_decorated_function_with_a_forward_rule():
    @mutad.inplace_adjoint(writes=("a",))
    def add_vecs_(a, b):
        a += b
        return a

    @add_vecs_.jvp_rule
    def _add_vecs_forward(tangents, a, b):
        da, db = tangents
        add_vecs_(a, b)
        if db is not None:
            da += db         # tangents are updated in place, alongside the primals
        return a

    def f(a, b):
        result = add_vecs_(a, b)
        assert result is a
        return a * a

    mutad.check_jvp(f, np.array([1.0, 2.0]), np.array([0.5, -1.0]))


def test_jvp_structure_and_argument_checks():
    y, dy = jvp(lambda t: (t[0] * 2.0, {"k": t[1] * t[1]}),
                ((1.0, np.array([3.0])),), ((1.0, np.array([1.0])),))
    assert y[0] == 2.0 and dy[0] == 2.0
    np.testing.assert_array_equal(dy[1]["k"], [6.0])
    with pytest.raises(mutad.MutadError, match="tuples"):
        jvp(lambda x: x, np.ones(2), np.ones(2))
    with pytest.raises(mutad.MutadError, match="shape"):
        jvp(lambda x: x, (np.ones(2),), (np.ones(3),))


def test_float32_stays_float32():
    x = np.array([1.0, 2.0], dtype=np.float32)
    y, dy = jvp(lambda x: np.sin(x) * x, (x,), (np.ones(2, np.float32),))
    assert y.dtype == np.float32 and dy.dtype == np.float32


def test_integer_arrays_come_back_too():
    index = np.array([0, 1])

    def f(x, index):
        index[0] = 1        # the program may scribble on its integer arguments
        return x[index]

    y, dy = jvp(f, (np.array([1.0, 2.0]), index), (np.ones(2), None))
    np.testing.assert_array_equal(index, [0, 1])
    np.testing.assert_array_equal(y, [2.0, 2.0])


def test_a_dual_that_escaped_its_jvp_is_refused():
    kept = []
    jvp(lambda x: kept.append(x) or x * 2.0, (np.ones(2),), (np.ones(2),))
    with pytest.raises(mutad.MutadError, match="outside the jvp"):
        kept[0] + 1.0
