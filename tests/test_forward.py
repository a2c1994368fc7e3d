"""Forward mode's core: tangents mutated alongside primals, views, out=, writes, custom rules."""

import collections
import warnings

import numpy as np
import pytest

import mutad
from mutad import errors
from mutad.core.registry import lookup, table
from mutad.scipy import signal, special
from mutad.testing import check_jvp, directional_fd
from rule_checks import RNG, V, is_decorated, normal_array

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


def test_an_operand_over_the_target_is_read_before_the_target_tangent_changes():
    """``np.subtract(a[:-1], a[1:], out=a[1:])``: the target's own tangent is scaled in place
    (by -1) before the other operand's tangent, which overlaps it, is added: that one is read
    as it was (``writes.over_target``). The function is linear, so its tangent is the function
    of the direction, as NumPy computes it, bit for bit."""
    def f(a):
        a = a * 1.0
        np.subtract(a[:-1], a[1:], out=a[1:])
        return a

    a, v = np.arange(1.0, 7.0), np.linspace(0.3, 1.1, 6)
    before = a.tobytes(), v.tobytes()
    y, dy = jvp(f, (a,), (v,))
    assert y.tobytes() == f(a).tobytes() and dy.tobytes() == f(v).tobytes()
    assert (a.tobytes(), v.tobytes()) == before


def test_arguments_that_share_memory_have_one_tangent_the_sum():
    x = np.array([1.0, 2.0, 3.0])
    y, dy = jvp(lambda a, b: a * 1.0, (x, x), (np.ones(3), np.full(3, 2.0)))
    np.testing.assert_array_equal(dy, [3.0, 3.0, 3.0])
    # the transpose of gradient's convention: <J v, w> = <v, J^T w> place by place
    f = lambda a, b: (a * b).sum()  # noqa: E731
    ga, gb = mutad.gradient(f, x, x)
    _, d = jvp(f, (x, x), (np.ones(3), np.full(3, 2.0)))
    assert d == pytest.approx(ga.sum() + 2 * gb.sum())


def test_an_argument_whose_places_share_memory_has_one_tangent_per_element_the_sum():
    """Regression: an argument whose elements share memory (np.broadcast_to, a sliding
    window) took one place's tangent per element of memory (NumPy's += through such a view),
    where the places' tangents add up as for arguments that share memory: jvp and jacfwd
    disagreed with the gradient."""
    from numpy.lib.stride_tricks import sliding_window_view

    rng = np.random.default_rng(0)
    f = lambda x: (np.sin(x) * x).sum() + x[0, 1] * x[1, 0]  # noqa: E731
    for x in (np.broadcast_to(rng.random(3), (2, 3)), sliding_window_view(rng.random(6), 3),
              sliding_window_view(rng.random(6), 3)[::-1]):
        before = x.copy()
        t = rng.standard_normal(x.shape)
        g = mutad.gradient(f, x)[0]
        _, d = jvp(f, (x,), (t,))
        assert d == pytest.approx((g * t).sum(), rel=1e-12)
        np.testing.assert_allclose(mutad.jacfwd(f)(x), g, rtol=1e-12)
        np.testing.assert_array_equal(x, before)
    # against finite differences in the memory itself
    b = rng.random(3)
    u = rng.standard_normal(3)
    h = 1e-6
    fd = (f(np.broadcast_to(b + h * u, (2, 3))) - f(np.broadcast_to(b - h * u, (2, 3)))) / (2 * h)
    _, d = jvp(f, (np.broadcast_to(b, (2, 3)),), (np.stack([u, 0 * u]),))
    assert d == pytest.approx(fd, rel=1e-7)
    # nested in a gradient, the tangent an enclosing level's array
    t = rng.standard_normal((2, 3))

    def outer(w):
        return jvp(f, (np.broadcast_to(w, (2, 3)),), (t * w[0],))[1]

    g = mutad.gradient(outer, b)[0]
    fd = [(outer(b + h * e) - outer(b - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


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


PLAIN = np.zeros(3)  # allocated before jvp ran, reached by a name
HELD = collections.deque([np.zeros(3)])  # reached only through a deque


def test_a_tangent_written_into_an_array_made_before_is_kept_on_a_copy():
    """An array made before jvp ran and reached by a name: a write adopts it, a private copy
    with a zero tangent, as an argument's; the caller's array is left as NumPy's run leaves it."""
    def f(x):
        PLAIN[0] = x[0]
        return PLAIN

    y, dy = jvp(f, (np.ones(3),), (np.ones(3),))
    assert y.tolist() == [1.0, 0.0, 0.0] and dy.tolist() == [1.0, 0.0, 0.0]

    def g(x):
        np.sin(x, out=PLAIN)
        return PLAIN * 2.0

    y, dy = jvp(g, (np.ones(3),), (np.ones(3),))
    assert y.tobytes() == (np.sin(np.ones(3)) * 2.0).tobytes()
    assert dy.tobytes() == (np.cos(np.ones(3)) * 2.0).tobytes()
    assert PLAIN.tobytes() == np.sin(np.ones(3)).tobytes()
    PLAIN[:] = 0.0


def test_a_tangent_written_into_a_plain_array_is_refused():
    def f(x):
        HELD[0][0] = x[0]
        return HELD[0]

    with pytest.raises(errors.UntracedWriteError, match="Allocate it inside"):
        jvp(f, (np.ones(3),), (np.ones(3),))

    def g(x):
        np.sin(x, out=HELD[0])

    with pytest.raises(errors.UntracedWriteError, match="inside the function jvp"):
        jvp(g, (np.ones(3),), (np.ones(3),))
    assert HELD[0].tolist() == [0.0, 0.0, 0.0]


def test_a_tangent_written_into_an_array_allocated_inside_is_kept():
    def f(x):
        out = np.zeros(3)
        out[0] = x[0]
        np.sin(x[1:], out=out[1:])
        return out

    mutad.check_jvp(f, np.array([0.2, 0.7, 0.4]))


@pytest.mark.parametrize("write", ["ufunc", "augmented", "setitem"])
def test_a_write_whose_elements_share_memory_is_refused_as_in_reverse_mode(write):
    # Which of the writes to a shared element wins is NumPy's order, and the tangent's writes
    # need not follow the same one: both modes refuse it, before anything is written.
    def f(x):
        y = x * 1.0
        v = np.lib.stride_tricks.sliding_window_view(y, 3, writeable=True)
        w = np.arange(9.0).reshape(3, 3) * x[0]
        if write == "ufunc":
            np.multiply(v, w, out=v)
        elif write == "augmented":
            v += w
        else:
            v[...] = w
        return y

    x = np.linspace(0.5, 1.5, 5)
    before = x.copy()
    with pytest.raises(errors.UnsupportedOperationError, match="share memory"):
        jvp(f, (x,), (np.ones(5),))
    with pytest.raises(errors.UnsupportedOperationError, match="share memory"):
        mutad.gradient(lambda x: f(x).sum(), x)
    assert x.tobytes() == before.tobytes()


def test_conversions_and_missing_rules_are_clear():
    with pytest.raises(errors.ConversionError):
        jvp(lambda x: complex(x[0] * 1j), (np.ones(2),), (np.ones(2),))

    @mutad.adjoint
    def cube(x):
        return x ** 3

    @cube.rule
    def _cube_rule(x):
        return cube(x), lambda dy: (3 * x * x * dy,)

    with pytest.raises(errors.UnsupportedFunctionError, match="jvp_rule"):
        jvp(cube, (np.ones(2),), (np.ones(2),))


def test_integer_and_boolean_conversions_of_duals_are_numpys_casts():
    # np.int64(x[0]) and np.asarray(x, int) have derivative zero, as in reverse mode, which
    # takes them; forward mode (jvp, hvp over it) refused them as conversions
    def f(x):
        k = np.int64(x[0] * 3)
        mask = np.asarray(x > 0.5, dtype=bool) & np.asarray(x, dtype=bool)
        return (x * k).sum() + (x ** 2 * mask).sum() + x[np.asarray(x[1], dtype=np.intp)]

    x, v = np.array([1.2, 0.7, -0.3]), np.array([1.0, -2.0, 0.5])
    y, tangent = jvp(f, (x,), (v,))
    gradient = mutad.grad(f)(x)
    assert np.asarray(y).tobytes() == np.asarray(f(x.copy())).tobytes()
    assert np.isclose(tangent, gradient @ v, rtol=1e-14, atol=0)
    assert np.allclose(mutad.hvp(f, (x,), (v,)), 2 * v * (x > 0.5), rtol=1e-14, atol=0)


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
    kept = collections.deque()  # where mutad does not look (a list is left NumPy's values)
    jvp(lambda x: kept.append(x) or x * 2.0, (np.ones(2),), (np.ones(2),))
    with pytest.raises(mutad.MutadError, match="outside the jvp"):
        kept[0] + 1.0


# ----------------------------------------------------------------------------------------------
# Every function the families differentiate in reverse mode has a forward rule

FAMILIES = ("reductions", "shape", "creation", "ufuncs")
GATHER_FUNCTIONS = (np.take, np.take_along_axis, np.compress, np.extract, np.sort, np.partition,
                    np.choose, np.select, np.diff, np.interp)


def test_every_rule_of_these_families_has_a_forward_rule():
    keys = [key for key, rule in table("reverse").items()
            if rule.__module__.rsplit(".", 1)[-1] in FAMILIES] + list(GATHER_FUNCTIONS)
    assert not [key for key in keys if lookup(key).forward is None]
    adjoints = [f for module in (special, signal) for f in map(module.__dict__.get, module.__all__)
                if is_decorated(f)]
    assert all(f.forward_rule is not None for f in adjoints)


# ----------------------------------------------------------------------------------------------
# End to end: mutad.jvp, and mutad.hvp (reverse mode over the families' forward rules)

XP_CONSTANT = np.linspace(-2.0, 2.0, 7)
FP_CONSTANT = np.cos(XP_CONSTANT)


def reductions_program(x):
    rows = np.sum(x * x, axis=1) + np.mean(np.sin(x)) * np.max(x, axis=0)[:3]
    return rows * np.var(x, axis=0, ddof=1)[1:] + np.std(x) * np.prod(x[0] + 2.0) - np.ptp(x, 1)


def scans_in_place(x):
    z = np.zeros_like(x)
    z[...] = np.cumsum(x, axis=0)
    z[1:] *= np.cumprod(x[:-1] + 1.5, axis=1)
    return np.min(z, axis=1) + np.amax(np.exp(z), axis=0)[:3]


def rearranging(x):
    y = np.transpose(x).reshape(-1)
    y = np.concatenate([y, np.flip(y)])
    parts = np.split(y, 4)
    return np.stack(parts[::-1]) ** 2 + np.triu(np.diag(y[:6]), 1)[:4]


def selecting(x):
    padded = np.pad(x, 1, "reflect")
    y = np.where(x > 0, padded[1:-1, 2:], np.roll(x, 1, 0)) * np.clip(x, -0.5, 0.5)
    return np.append(y, np.broadcast_to(x[0], (2, 4))) * np.tile(x[1, :2], 10)


def gathering(x):
    order = np.argsort(x, axis=1)
    sorted_rows = np.sort(x, axis=1) * np.take_along_axis(x, order, 1)
    steps = np.diff(x, axis=0, prepend=np.ones((1, 4)))
    return sorted_rows + steps + np.interp(np.sin(x), XP_CONSTANT, FP_CONSTANT)


def creating(x):
    buffer = np.empty_like(x)
    buffer[...] = x.astype(np.float64)
    buffer[0] = np.linspace(x[0, 0], x[0, 1], 4)
    filled = np.full_like(x, x[1, 1])
    return np.copy(buffer) * filled + np.ones_like(x) * np.asarray(x, like=x) ** 3


def skipping_nans(x):
    holes = np.where(np.abs(x) < 0.3, np.nan, x)
    return (np.nansum(holes * holes, axis=0) + np.nanmean(holes) * np.nanmax(holes, axis=0)
            + np.sum(np.nan_to_num(np.log(np.abs(holes))), axis=0) + np.sinc(x[0]))


def special_functions(x):
    z = special.gammaln(x * x + 1.0) + special.digamma(np.exp(x)) * special.erf(x)
    z = z + special.xlogy(special.expit(x), np.exp(x)) + special.logit(special.expit(x) * 0.5)
    return z[0] + special.logsumexp(x, 0, np.exp(x[::-1]))


def filtering(x):
    y, final = signal.lfilter(x[0, :3], x[1, :2] + 2.0, x[2] * x[1], -1, x[0, 2:])
    return np.concatenate([y, final * 3.0]) ** 2


PROGRAMS = [reductions_program, scans_in_place, rearranging, selecting, gathering, creating,
            skipping_nans, special_functions, filtering]
# Its own generator: drawn from the shared RNG, the point depended on which test modules were
# imported before, and some orders put a near-tie of np.max within the finite differences' step.
POINT = np.random.default_rng(263).uniform(-1.5, 1.5, (3, 4))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_jvp_end_to_end(program):
    check_jvp(program, POINT)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_hvp_end_to_end(program):
    """Reverse mode over the forward rules: <u, H v> against differences of the gradient."""
    u, v = normal_array(3, 4), normal_array(3, 4)
    w = normal_array(*np.shape(program(POINT)))

    def scalar(x):
        return np.sum(program(x) * w)

    analytic = np.sum(u * mutad.hvp(scalar, (POINT,), (v,)))
    numeric = np.sum(u * directional_fd(lambda x: mutad.gradient(scalar, x)[0], (POINT,), (v,)))
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


def test_buffers_created_like_a_dual_carry_tangents():
    def program(x):
        buffer = np.zeros(x.shape, like=x)
        buffer[1:] = x[:-1] * 2.0
        return buffer * np.array([1.0, 2.0, 3.0, 4.0, 5.0], like=x) + np.eye(5, like=x)[0]

    check_jvp(program, V)


def test_second_derivative_of_sinc_at_zero():
    """-π²/3: the rule's derivative near 0 is a series whose own derivative is right."""
    x = np.array([0.0, 1e-5, 0.3])
    h = mutad.hvp(lambda x: np.sum(np.sinc(x)), (x,), (np.ones(3),))
    exact = [-np.pi ** 2 / 3, -np.pi ** 2 / 3, None]
    np.testing.assert_allclose(h[:2], exact[:2], rtol=1e-8)


def _made_inside_at_zero(b):
    root = np.sqrt(np.zeros(3))  # its partial, 1 / (2 sqrt(0)), is infinite
    np.sqrt(root, out=root)
    root[0] = b[0] ** 2  # a constant's result takes a tangent written into it
    return np.sum(root + b)


@pytest.mark.parametrize("mode", ["jvp", "hvp", "hessian"])
def test_operations_on_constants_alone_compute_no_partials(mode):
    # An array the function makes (np.zeros) is a dual with a zero tangent, into which a value
    # with one may be written later; until then it is a constant, which reverse mode records
    # no rule for: its infinite partial times its zero tangent must not warn.
    b = np.array([1.0, 2.0, 3.0])
    kept = b.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if mode == "jvp":
            value, tangent = mutad.jvp(_made_inside_at_zero, (b,), (np.ones(3),))
            assert (value, tangent) == (_made_inside_at_zero(b), 5.0)
        elif mode == "hvp":
            assert mutad.hvp(_made_inside_at_zero, (b,), (np.ones(3),)).tolist() == [2, 0, 0]
        else:
            assert mutad.hessian(_made_inside_at_zero, b).tolist() == [[2, 0, 0], [0, 0, 0],
                                                                      [0, 0, 0]]
    np.testing.assert_array_equal(b, kept, strict=True)
    assert b.tobytes() == kept.tobytes()


def test_an_infinite_partial_of_an_operand_with_a_tangent_still_warns():
    b = np.array([1.0, 2.0, 3.0])
    with pytest.warns(RuntimeWarning, match="divide by zero encountered in divide, in a tangent"):
        _, tangent = mutad.jvp(lambda b: np.sqrt(b - np.array([1.0, 0.0, 0.0])), (b,),
                               (np.ones(3),))
    assert tangent[0] == np.inf


_ORDERS = np.array([1.5, 2.5])


def _bessel_of_made_order(x):
    o = np.array([1.5, 2.5])  # made in f: a constant, whose tangent is zero
    return np.sum(special.jv(o - 3.0, x))


def _bessel_of_closure_order(x):
    return np.sum(special.jv(_ORDERS - 3.0, x))


@pytest.mark.parametrize("f", [_bessel_of_made_order, _bessel_of_closure_order])
def test_a_constant_operands_refused_partial_is_left_out(f):
    """jv(o - 3.0, x) of a constant order o (made in f, or read from a closure) at v <= -1,
    differentiated in x alone: forward mode refused, as mutad refuses the partial in the order
    below v = -1, though the order's tangent is zero (reverse mode computes no cotangent for a
    constant). jvp, jacfwd and the hessian are those of x's partial alone."""
    x = np.array([0.7, 1.3])
    v = _ORDERS - 3.0
    slope = 0.5 * (special.jv(v - 1.0, x) - special.jv(v + 1.0, x))  # ∂J_v/∂x
    np.testing.assert_allclose(mutad.gradient(f, x)[0], slope, rtol=1e-12)
    np.testing.assert_allclose(mutad.jvp(f, (x,), (np.ones(2),))[1], np.sum(slope), rtol=1e-12)
    np.testing.assert_allclose(mutad.jacfwd(f)(x), slope, rtol=1e-12)
    curvature = 0.25 * (special.jv(v - 2.0, x) - 2 * special.jv(v, x) + special.jv(v + 2.0, x))
    np.testing.assert_allclose(mutad.hessian(f, x), np.diag(curvature), rtol=1e-10, atol=1e-14)
