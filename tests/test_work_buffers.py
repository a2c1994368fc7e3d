"""Work arrays made before the differentiation and written inside the function.

A float array the function reaches by a name (a module-level buffer, a closure's, a default
argument's, ``self.u`` of a method, a class attribute, an entry of a dict reached so) is
adopted by the function's first write into it: taken as an argument outside argnums is, its
values before the call are constants, the reverse pass reads the values each record needs,
and after the call it holds what NumPy's one run of the function leaves in it, bit for bit
(the bytes it held before where the function raised). Each test checks the value against
NumPy's bit for bit, the gradient against finite differences, and the buffer's bytes after the
call.
"""

import collections
import types

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

import mutad
from mutad import errors
from mutad.testing import directional_fd


def _restoring(f, buffers):
    """``f`` run by NumPy alone, the buffers' bytes put back after each call (as mutad leaves
    them), so that every call starts from the same buffers."""
    def g(*args):
        kept = [b.copy() for b in buffers]
        try:
            return f(*args)
        finally:
            for b, k in zip(buffers, kept, strict=True):
                b[...] = k
    return g


def _copies(args):
    return [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]


def left_by_numpy(f, args, buffers):
    """The buffers' bytes as NumPy's one run of ``f`` leaves them (which mutad leaves too),
    and the buffers as they were (``put_back``)."""
    kept = [b.copy() for b in buffers]
    f(*_copies(args))
    left = [b.tobytes() for b in buffers]
    put_back(buffers, kept)
    return left, kept


def put_back(buffers, kept):
    for b, k in zip(buffers, kept, strict=True):
        b[...] = k


def check(f, *args, buffers, rtol=1e-7, policy="restore"):
    """Value bit for bit against NumPy's, gradient against finite differences, the buffers'
    bytes after the call NumPy's after its run, the arguments' as they were."""
    numpy_f = _restoring(f, buffers)
    before = [b.tobytes() for b in buffers]
    given = [np.asarray(a).tobytes() for a in args]
    expected = numpy_f(*_copies(args))
    assert [b.tobytes() for b in buffers] == before
    left, kept = left_by_numpy(f, args, buffers)
    value, grads = mutad.value_and_gradient(f, *args, policy=policy)
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    assert [b.tobytes() for b in buffers] == left
    put_back(buffers, kept)
    assert [np.asarray(a).tobytes() for a in args] == given
    rng = np.random.default_rng(0)
    directions = [rng.standard_normal(np.shape(a)) for a in args]
    directions = [d if np.ndim(a) else float(d) for a, d in zip(args, directions, strict=True)]
    fd = directional_fd(numpy_f, args, directions)
    along = sum(np.vdot(g, d) for g, d in zip(grads, directions, strict=True))
    np.testing.assert_allclose(along, fd, rtol=rtol, atol=1e-9)
    return value, grads


# ----------------------------------------------------------------------------------------------
# Where the buffer lives


class Model:
    def __init__(self, n):
        self.u = np.zeros(n)
        self.work = np.empty(n)

    def step(self, k):
        self.u += 0.1 * k * self.u + k
        return self.u.sum()


MODEL = Model(5)


def model_run(k):
    MODEL.u[:] = 1.0
    for _ in range(3):
        s = MODEL.step(k)
    return s


def test_an_objects_state_written_by_its_methods():
    check(model_run, 0.5, buffers=[MODEL.u, MODEL.work])
    check(model_run, 0.5, buffers=[MODEL.u, MODEL.work], policy="checkpoint")


WORK = np.zeros(4)


def module_buffer(x):
    WORK[:] = x ** 2
    WORK[1:] += WORK[:-1] * x[1:]
    np.sin(WORK, out=WORK)
    return (WORK * x).sum()


def test_a_module_level_work_buffer():
    check(module_buffer, np.array([0.3, -0.7, 1.1, 0.2]), buffers=[WORK])


def test_a_work_buffer_read_before_it_is_written():
    """Read as a constant by a record, then written: the reverse pass puts back the bytes
    that record read before it runs."""
    WORK[:] = [1.0, 2.0, 3.0, 4.0]

    def f(x):
        y = x * WORK          # a record keeps the buffer as it is now
        WORK[:] = 0.0         # plain values: the record's constant must come back
        WORK[::2] = x[::2] ** 3
        return (y * y).sum() + (WORK * x).sum()

    for policy in ("restore", "checkpoint"):
        check(f, np.array([0.3, -0.7, 1.1, 0.2]), buffers=[WORK], policy=policy)
    assert WORK.flags.writeable
    WORK[:] = 0.0


def default_buffer(x, buf=np.zeros(3)):  # noqa: B008 (the default is the point)
    buf[:] = x
    buf *= x
    return buf.sum() + buf[0] * x[2]


def test_a_default_arguments_buffer():
    buffer = default_buffer.__defaults__[0]
    check(default_buffer, np.array([0.5, 1.5, -2.0]), buffers=[buffer])


class Scratch:
    space = np.zeros(3)  # a class attribute, shared by every instance


def test_a_class_attribute():
    def f(x):
        Scratch.space[:] = np.cos(x)
        Scratch.space[0] *= x[1]
        return (Scratch.space ** 2).sum()

    check(f, np.array([0.5, 1.5, -2.0]), buffers=[Scratch.space])


BUFFERS = {"w": np.zeros(3), "v": np.ones(3)}


def test_a_dict_of_buffers_reached_by_a_name():
    def f(x):
        BUFFERS["w"][:] = x * BUFFERS["v"]
        BUFFERS["v"] += BUFFERS["w"]
        return BUFFERS["v"] @ x

    check(f, np.array([0.5, 1.5, -2.0]), buffers=list(BUFFERS.values()))


def test_a_closures_buffer():
    work = np.linspace(0.0, 1.0, 4)

    def f(x):
        work[1:3] = x[:2] * work[1:3]
        return np.sum(work * x)

    check(f, np.array([0.3, -0.7, 1.1, 0.2]), buffers=[work])


# ----------------------------------------------------------------------------------------------
# Views, sharing, arguments, errors


class Grid:
    def __init__(self, n):
        self.u = np.linspace(0.0, 1.0, n)
        self.interior = self.u[1:-1]  # a view, stored on the object before the call

    def smooth(self, k):
        self.interior[:] = 0.5 * self.interior + k * (self.u[:-2] + self.u[2:])
        return self.u @ self.u


GRID = Grid(6)


def test_views_of_the_buffer_stored_on_the_object():
    def f(k):
        for _ in range(2):
            s = GRID.smooth(k)
        return s + GRID.u[1]

    check(f, 0.3, buffers=[GRID.u])


class Stepper:
    def __init__(self, state):
        self.state = state

    def advance(self, k):
        self.state *= k
        return self.state.sum()


SHARED = np.array([1.0, 2.0, 3.0])
FIRST, SECOND = Stepper(SHARED), Stepper(SHARED)


def test_two_objects_sharing_one_buffer():
    def f(k):
        a = FIRST.advance(k)
        b = SECOND.advance(k)  # sees the first one's write, as in NumPy
        return a * b + FIRST.state[0]

    check(f, 0.7, buffers=[SHARED])


def test_the_buffer_comes_back_when_the_function_raises():
    before = WORK.tobytes()

    def f(x):
        WORK[:] = x
        WORK[0] = 5.0
        raise KeyError("stop")

    with pytest.raises(KeyError):
        mutad.gradient(f, np.ones(4))
    assert WORK.tobytes() == before and WORK.flags.writeable
    with pytest.raises(KeyError):
        mutad.jvp(f, (np.ones(4),), (np.ones(4),))
    assert WORK.tobytes() == before


def test_a_buffer_also_passed_as_the_differentiated_argument_is_refused():
    """Writing the argument's memory through the name: two arrays of one memory, one traced
    and one read as a constant; refused as before, with the advice."""
    state = np.array([0.5, 1.5, 2.5])

    def f(x):
        state[0] = 2.0 * x[1]
        return (x * x).sum()

    before = state.tobytes()
    with pytest.raises(errors.ConstantModifiedError, match="Write into the argument itself"):
        mutad.gradient(f, state)
    assert state.tobytes() == before


def test_a_buffer_reached_only_through_a_deque_is_still_refused_with_the_fix():
    held = collections.deque([np.zeros(3)])

    def f(x):
        held[0][:] = x
        return held[0].sum()

    with pytest.raises(errors.UntracedWriteError) as caught:
        mutad.gradient(f, np.ones(3))
    message = str(caught.value)
    assert "mutad does not look into" in message and "Allocate it inside" in message
    assert "pass it as an argument" in message
    assert held[0].tolist() == [0.0, 0.0, 0.0]


def test_the_function_returns_the_buffer_it_wrote():
    def f(x):
        WORK[:] = x * 2.0
        return WORK

    x = np.array([0.3, -0.7, 1.1, 0.2])
    y, dy = mutad.jvp(f, (x,), (np.ones(4),))
    assert y.tobytes() == (x * 2.0).tobytes() and dy.tolist() == [2.0] * 4
    value, aux = mutad.value_and_grad(lambda x: (f(x).sum(), f(x)), has_aux=True)(x)[0]
    assert aux.tobytes() == (x * 2.0).tobytes()
    assert WORK.tobytes() == (x * 2.0).tobytes()  # as NumPy's run of f leaves it
    WORK[:] = 0.0


# ----------------------------------------------------------------------------------------------
# Other modes and policies


def test_forward_mode_and_hessians():
    x = np.array([0.3, -0.7, 1.1, 0.2])
    before = WORK.tobytes()
    direction = np.array([1.0, -0.5, 0.25, 2.0])
    y, dy = mutad.jvp(module_buffer, (x,), (direction,))
    assert y.tobytes() == _restoring(module_buffer, [WORK])(x.copy()).tobytes()
    fd = directional_fd(_restoring(module_buffer, [WORK]), (x,), (direction,))
    np.testing.assert_allclose(dy, fd, rtol=1e-7)
    left = left_by_numpy(module_buffer, (x,), [WORK])[0][0]
    assert WORK.tobytes() == left  # as NumPy's run leaves it
    WORK[:] = np.frombuffer(before)
    H = mutad.hessian(module_buffer, x)
    assert WORK.tobytes() == left
    WORK[:] = np.frombuffer(before)
    columns = [directional_fd(lambda v: mutad.gradient(module_buffer, v)[0], (x,), (e,))
               for e in np.eye(4)]
    np.testing.assert_allclose(H, np.array(columns).T, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    WORK[:] = np.frombuffer(before)  # (the gradients of the differences left theirs)

    def kept(x):  # (NumPy's runs of the finite differences write WORK: put back after each)
        before = WORK.copy()
        y = module_buffer(x)
        WORK[:] = before
        return y

    mutad.check_grads(kept, x, order=2)
    assert WORK.tobytes() == before
    WORK[:] = 0.0


def _positions(x):
    """Positions read from the buffer by its methods once the function wrote into it."""
    WORK[:] = x * x
    i, j = WORK.argmax(), WORK.argmin()
    order = WORK.argsort()
    k = WORK.argpartition(2)[2]
    return WORK[i] * 3.0 + WORK[j] + WORK[order] @ np.arange(4.0) + WORK[k] * x[0]


def _iterated(x):
    WORK[:] = x * x
    total = sum(v * w for v, w in zip(np.nditer(WORK), x, strict=True))
    for index, v in np.ndenumerate(WORK):
        total = total + v * index[0]
    for v in np.nditer(WORK, op_flags=["readwrite"]):
        v[...] = v * 2.0
    return total + WORK @ x


READERS = {"positions": _positions, "iterators": _iterated}


@pytest.mark.parametrize("name", READERS)
def test_a_written_buffer_read_by_its_methods_and_iterators(name):
    """In forward mode, WORK.argmax(), argmin(), argsort() and argpartition(), np.nditer(WORK)
    and np.ndenumerate(WORK) read the caller's memory, which forward mode does not write (it
    works on its own copy of the buffer): the positions and the elements were those of the
    values before the call (all 0 here), a wrong value, jvp and Hessian; the reverse pass
    missed the derivative through the iterators. They now read the differentiation's array,
    as WORK.max() does."""
    f = READERS[name]
    x = np.array([0.3, -0.7, 1.1, 0.2])
    for direction in np.eye(4)[[0, 2]]:
        value, tangent = mutad.jvp(f, (x,), (direction,))
        assert np.asarray(value).tobytes() == _restoring(f, [WORK])(x.copy()).tobytes()
        fd = directional_fd(_restoring(f, [WORK]), (x,), (direction,))
        np.testing.assert_allclose(tangent, fd, rtol=1e-7)
        assert WORK.tobytes() == left_by_numpy(f, (x,), [WORK])[0][0]
        WORK[:] = 0.0
    check(f, x, buffers=[WORK])
    WORK[:] = 0.0
    np.testing.assert_allclose(mutad.jacfwd(f)(x), mutad.gradient(f, x)[0], rtol=1e-14)
    WORK[:] = 0.0
    if name == "positions":
        # (6 x2² + x3² + x0² + 2 x1² + x1² x0 at x, where the positions are 2, 3, [3 0 1 2], 1)
        expected = [[2.0, 2 * x[1], 0, 0], [2 * x[1], 4 + 2 * x[0], 0, 0], [0, 0, 12, 0],
                    [0, 0, 0, 2]]
        np.testing.assert_allclose(mutad.hessian(f, x), expected, rtol=1e-12)
        WORK[:] = 0.0


@pytest.mark.parametrize("convert, error, words", [
    (lambda: np.frombuffer(bytes(WORK)), errors.ConversionError, "bytes"),
    (lambda: np.asmatrix(WORK), errors.UnsupportedOperationError, "matrix"),
], ids=["bytes", "matrix"])
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # (np.matrix's)
def test_a_written_buffer_converted_by_its_memory_is_refused(convert, error, words):
    """bytes(WORK) and np.asmatrix(WORK) (a view as another subclass) read the memory NumPy
    exports: in forward mode the values before the call, and the reverse pass lost the
    derivative silently (for bytes, Python asked the stand-in's __index__ first, which raised
    an AttributeError in forward mode). They are refused, as for an array made in the
    function."""
    def f(x):
        WORK[:] = x * x
        return convert().sum()

    for differentiate in (lambda: mutad.gradient(f, np.ones(4)),
                          lambda: mutad.jvp(f, (np.ones(4),), (np.ones(4),))):
        with pytest.raises(error, match=words):
            differentiate()
        assert not WORK.any()


def _logpdf_of_the_buffer(x):
    WORK[:] = x * x
    return scipy.stats.norm.logpdf(WORK).sum() + scipy.stats.norm(0.5, 2.0).cdf(WORK) @ x


def _root_given_the_buffer(x):
    WORK[:] = x * x
    return scipy.optimize.brentq(lambda t, w: t - w.sum() * 0.1, -10, 10, args=(WORK,))


def _buffer_after_a_root(x):
    WORK[:] = x * x
    return scipy.optimize.brentq(lambda t: t - 1.0, -10, 10) * WORK.sum()


@pytest.mark.parametrize("f", [_logpdf_of_the_buffer, _root_given_the_buffer,
                               _buffer_after_a_root], ids=["distribution", "args=", "after"])
def test_a_written_buffer_given_to_scipy(f):
    """A written buffer given to a distribution's method (norm.logpdf(WORK)) was converted by
    SciPy's own method, not its rule: the gradient through it was lost (zero) and forward
    mode's value was that of the values before the call. After a solve, forward mode took
    the buffer's values for what the solver's functions wrote, and lost its tangent."""
    x = np.array([0.3, -0.7, 1.1, 0.2])
    check(f, x, buffers=[WORK])
    WORK[:] = 0.0
    direction = np.array([1.0, -0.5, 0.25, 2.0])
    value, tangent = mutad.jvp(f, (x,), (direction,))
    expected = _restoring(f, [WORK])(x.copy())
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    fd = directional_fd(_restoring(f, [WORK]), (x,), (direction,))
    np.testing.assert_allclose(tangent, fd, rtol=1e-7)
    WORK[:] = 0.0


def test_a_written_buffer_read_by_a_solvers_function_from_a_global_is_refused():
    """The solver runs its functions on plain numbers: one reading a buffer the function
    wrote from a global read the stand-in's memory (in forward mode the values before the
    call) and lost the derivative, silently. Refused, saying to pass it with args=."""
    def f(x):
        WORK[:] = x * x
        return scipy.optimize.brentq(lambda t: t - WORK.sum() * 0.1, -10, 10)

    for differentiate in (lambda: mutad.gradient(f, np.ones(4)),
                          lambda: mutad.jvp(f, (np.ones(4),), (np.ones(4),))):
        with pytest.raises(errors.UnsupportedOperationError, match="args="):
            differentiate()
        assert not WORK.any()


def test_a_write_by_another_way_to_the_memory_is_refused():
    """The buffer reached by a name and through a deque: the deque's array, the caller's own,
    is read-only once the function wrote through the name (mutad would not see that write)."""
    held = collections.deque([WORK])

    def f(x):
        WORK[:] = x
        held[0][0] = 5.0
        return WORK @ x

    for differentiate in (lambda: mutad.gradient(f, np.ones(4)),
                          lambda: mutad.jvp(f, (np.ones(4),), (np.ones(4),))):
        with pytest.raises(errors.ConstantModifiedError, match="another way"):
            differentiate()
        assert not WORK.any() and WORK.flags.writeable


class Pairs:
    """A buffer and views of it that ``as_strided`` and ``sliding_window_view`` made: NumPy will
    not set such a view's WRITEABLE flag back once it is cleared."""

    def __init__(self):
        self.u = np.zeros(8)
        self.pairs = np.lib.stride_tricks.as_strided(self.u, (4, 2), (16, 8))
        self.windows = np.lib.stride_tricks.sliding_window_view(self.u, 3, writeable=True)


PAIRS = Pairs()


def test_views_made_by_stride_tricks_stay_writable_and_a_write_by_another_way_is_refused():
    """Such views are read-only while the function runs, as the buffer's other objects are,
    and writable again after it: before, the caller's view stayed read-only after a gradient,
    and forward mode raised NumPy's ValueError when it ended. A write through them by another
    way (a deque) is refused."""
    views = [PAIRS.u, PAIRS.pairs, PAIRS.windows]

    def f(x):
        PAIRS.pairs[:, 0] = x[:4]
        PAIRS.windows[1:3, 1] *= x[4:6]
        return (PAIRS.u ** 3 * x).sum()

    check(f, np.arange(1.0, 9.0), buffers=[PAIRS.u])
    _, tangent = mutad.jvp(f, (np.arange(1.0, 9.0),), (np.ones(8),))
    assert tangent == pytest.approx(mutad.gradient(f, np.arange(1.0, 9.0))[0].sum())
    assert all(v.flags.writeable for v in views)
    held = collections.deque([PAIRS.pairs])

    def g(x):
        PAIRS.pairs[:, 0] = x[:4]
        held[0][:, 1] = 2.0  # not seen by mutad: refused
        return (PAIRS.u ** 3 * x).sum()

    left = PAIRS.u.tobytes()
    for differentiate in (lambda: mutad.gradient(g, np.ones(8)),
                          lambda: mutad.jvp(g, (np.ones(8),), (np.ones(8),))):
        with pytest.raises(errors.ConstantModifiedError, match="another way"):
            differentiate()
        assert PAIRS.u.tobytes() == left and all(v.flags.writeable for v in views)


def test_nested_gradients_writing_one_buffer():
    def inner(x):
        WORK[:] = x * x
        return WORK.sum()

    def outer(x):
        WORK[:] = 1.0                       # the outer one's write
        g = mutad.gradient(inner, x)[0]     # the inner one's: it leaves x * x, as NumPy's run
        return (g * WORK).sum() + WORK @ x  # 2 x . x ** 2 + x ** 2 . x

    x = np.array([0.3, -0.7, 1.1, 0.2])
    np.testing.assert_allclose(mutad.gradient(outer, x)[0], 9.0 * x ** 2, rtol=1e-14)
    assert WORK.tobytes() == (x * x).tobytes()
    WORK[:] = 0.0


def test_the_outer_write_after_a_nested_gradient_is_what_the_buffer_holds():
    """The inner differentiation writes the buffer first, the outer one after it: the buffer
    ends holding the outer one's write, as NumPy's run leaves it (it held the inner one's)."""
    def inner(x):
        WORK[:2] = 3.0 * x[:2]
        return x @ x

    def outer(x):
        g = mutad.gradient(inner, x)[0]
        WORK[2] = 5.0
        WORK[:2] = 7.0 * x[:2]
        return g.sum() + WORK.sum()

    x = np.array([0.3, -0.7, 1.1, 0.2])
    for differentiate in (lambda: mutad.value_and_gradient(outer, x)[0],
                          lambda: mutad.jvp(outer, (x,), (np.ones(4),))[0]):
        assert differentiate() == outer(x.copy())
        left = WORK.tobytes()
        WORK[:] = 0.0
        differentiate()
        assert WORK.tobytes() == left
        WORK[:] = 0.0
    assert x.tolist() == [0.3, -0.7, 1.1, 0.2]


def test_a_memory_budget():
    x = np.array([0.3, -0.7, 1.1, 0.2])
    before = WORK.tobytes()
    expected = mutad.gradient(module_buffer, x)[0]
    assert mutad.gradient(module_buffer, x, memory=0)[0].tobytes() == expected.tobytes()
    assert WORK.tobytes() == left_by_numpy(module_buffer, (x,), [WORK])[0][0]
    WORK[:] = np.frombuffer(before)


def test_pullback_writes_back_as_for_arguments():
    """As the arguments: left as f left them until back() runs, which puts them back; read-only
    until then, as the constants back() reads."""
    x = np.array([0.3, -0.7, 1.1, 0.2])
    before = WORK.tobytes()
    left = _restoring(lambda x: (module_buffer(x), WORK.copy())[1], [WORK])(x.copy())
    y, back = mutad.pullback(module_buffer, x)
    assert WORK.tobytes() == left.tobytes()
    assert back(1.0)[0].tobytes() == mutad.gradient(module_buffer, x)[0].tobytes()
    assert WORK.tobytes() == left.tobytes()  # back() leaves what f left, as NumPy's run
    WORK[:] = np.frombuffer(before)
    y, back = mutad.pullback(module_buffer, x)
    with pytest.raises(ValueError, match="read-only"):
        WORK[0] = 7.0
    del back
    WORK[0] = 7.0  # (a back never called lets go of it)
    WORK[:] = 0.0


# ----------------------------------------------------------------------------------------------
# replay=True: each call is traced, with the reason


def test_replay_traces_every_call_and_says_why():
    state = np.array([1.0, 2.0, 3.0])

    def f(x):
        y = (state * x).sum()   # the buffer's contents before the call are an input
        state[:] = x * 3.0      # and f leaves it otherwise than it found it, in NumPy
        return y + (state * x).sum()

    replaying = mutad.value_and_grad(f, replay=True)
    x = np.array([0.5, -1.0, 2.0])
    for contents in ([1.0, 2.0, 3.0], [-4.0, 0.5, 7.0], [-4.0, 0.5, 7.0], [0.0, 0.0, 1.0]):
        state[:] = contents
        expected = _restoring(f, [state])(x.copy())
        value, grad = replaying(x)
        assert state.tobytes() == (x * 3.0).tobytes()  # as NumPy's run leaves it
        state[:] = contents
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        np.testing.assert_allclose(grad, np.array(contents) + 6.0 * x, rtol=1e-12)
    reasons = list(replaying.reasons.values())
    assert reasons and "reaches by a name" in reasons[0]


# ----------------------------------------------------------------------------------------------
# Views NumPy makes by an attribute or a method of the buffer


SPECTRUM = np.array([0.5 - 1.0j, 2.0 + 0.25j, -1.0 + 3.0j])
TABLE = np.array([[1.0, -2.0], [0.5, 4.0]])
ROW = np.array([3.0, -1.0, 0.25])


def test_the_real_and_imaginary_parts_of_a_complex_buffer():
    """``U.imag``, ``U.real`` of a complex buffer (NumPy's views of the float parts of its
    memory), read or written before or after the first write: the buffer's memory followed,
    not another memory of their own (the gradient was 0)."""
    def f(x):
        parts = SPECTRUM.imag       # taken before the write that adopts the buffer
        SPECTRUM[:] = x * (1.0 + 2.0j)
        SPECTRUM[...] *= np.exp(1j * x)
        return np.abs(SPECTRUM).sum() + SPECTRUM.real.sum() + (parts * x).sum()

    def g(x):
        SPECTRUM.real[:] = x        # the first write, into the real parts
        SPECTRUM.imag[:] = x * x
        return (SPECTRUM * SPECTRUM).real.sum()

    def accumulating(x):
        SPECTRUM.imag[...] += x     # the first write: an augmented one, into a view of a part
        SPECTRUM.real[:] = SPECTRUM.imag * 2.0
        return (np.abs(SPECTRUM) ** 2).sum()

    x = np.array([0.3, -0.5, 1.2])
    check(f, x, buffers=[SPECTRUM])
    check(g, x, buffers=[SPECTRUM])
    check(accumulating, x, buffers=[SPECTRUM])
    before = SPECTRUM.copy()
    left = left_by_numpy(f, (x,), [SPECTRUM])[0]
    assert mutad.jvp(f, (x,), (np.ones(3),))[1] == pytest.approx(
        directional_fd(_restoring(f, [SPECTRUM]), [x], [np.ones(3)]), rel=1e-7)
    assert [SPECTRUM.tobytes()] == left
    SPECTRUM[...] = before

    def h(x):
        SPECTRUM.view(np.float64)[:] = np.repeat(x, 2)  # neither part: refused
        return SPECTRUM.real.sum()

    with pytest.raises(errors.MutadError, match="U.real or U.imag"):
        mutad.gradient(h, x)
    assert SPECTRUM.tobytes() == before.tobytes()  # (f raised: the caller's bytes)


def test_views_made_by_attributes_and_methods_of_the_buffer():
    """``U.view()``, ``U.mT``, ``U.flat`` and the reductions ``U.mean()``, ``U.std()``,
    ``U.var()`` of a buffer after a write adopted it: the followed array's (the views' gradient
    was 0, and ``U.mean()`` was refused as a conversion)."""
    weights = np.array([[1.0, 2.0], [3.0, 4.0]])

    def f(x):
        TABLE[:] = x.reshape(2, 2)
        return (TABLE.mT * weights).sum() + TABLE.view().sum() ** 2 + sum(TABLE.flat) ** 3

    def g(x):
        ROW[:] = x
        ROW.flat[1] = 3.0
        return ROW.mean() + ROW.std() + ROW.var() + ROW.max() * ROW.min() + ROW.prod()

    check(f, np.array([0.3, -0.5, 1.2, -0.7]), buffers=[TABLE])
    check(g, np.array([0.3, -0.5, 1.2]), buffers=[ROW])


def test_reshaping_an_adopted_buffer_in_place_is_refused():
    """``U.shape = ...`` after a write adopted ``U``: the followed array keeps its shape, so
    the reshape is refused (it reshaped the caller's array alone, and the gradient was wrong)."""
    def f(x):
        ROW[:] = x
        ROW.shape = (3, 1)
        return (ROW @ ROW.T).sum()

    before = ROW.tobytes()
    with pytest.raises(errors.MutadError):
        mutad.gradient(f, np.ones(3))
    assert ROW.tobytes() == before and ROW.shape == (3,)


class PingPong:
    """Two work arrays swapped after each step, as a stencil code keeps its old and new
    fields."""

    def __init__(self):
        self.old, self.new = np.zeros(4), np.zeros(4)

    def step(self):
        self.new[1:-1] = 0.5 * (self.old[:-2] + self.old[2:])
        self.new[0], self.new[-1] = self.old[0], self.old[-1]
        self.old, self.new = self.new, self.old


PING = PingPong()


def test_buffers_the_function_swaps_between_names():
    """``self.old, self.new = self.new, self.old``: after the call each name holds the caller's
    array NumPy leaves there, not mutad's stand-in for it (which stayed on the object)."""
    first, second = PING.old, PING.new

    def f(x):
        PING.old[:] = x
        for _ in range(3):
            PING.step()
        return (PING.old ** 2).sum() + PING.new[1]

    def restored(x):  # NumPy's run, the names and bytes put back as mutad leaves the bytes
        value = _restoring(f, [first, second])(x)
        names = PING.old, PING.new
        PING.old, PING.new = first, second
        return value, names

    x = np.array([0.3, -0.5, 1.2, -0.7])
    left, kept = left_by_numpy(f, (x,), [first, second])
    PING.old, PING.new = first, second
    value, names = restored(x.copy())
    assert names[0] is second and names[1] is first
    got, grad = mutad.value_and_gradient(f, x)
    assert PING.old is second and PING.new is first
    assert [first.tobytes(), second.tobytes()] == left  # as NumPy's run leaves them
    put_back([first, second], kept)
    assert np.asarray(got).tobytes() == np.asarray(value).tobytes()
    fd = directional_fd(lambda x: restored(x)[0], [x], [np.ones(4)])
    np.testing.assert_allclose(np.sum(grad), fd, rtol=1e-7)
    PING.old, PING.new = first, second


TOTAL = np.array(0.0)


def test_an_arrays_method_writing_into_a_buffer_by_out():
    """``X.cumsum(out=W)``, ``X.take(idx, out=W)``, ``W.mean(out=T)``: the method's out= is
    a write into the buffer, which adopts it as NumPy's function of the same call does (the
    method wrote past mutad: the caller's buffer was left changed)."""
    table = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        table.cumsum(out=WORK)
        s = (WORK * x).sum()
        table.take([1, 0, 3, 2], out=WORK)
        s = s + (WORK * x).sum()
        WORK[:] = x * x
        WORK.cumsum(out=WORK)
        WORK.mean(out=TOTAL)
        return s + (WORK * x).sum() + TOTAL * 2.0

    check(f, np.array([0.3, -0.5, 1.2, -0.7]), buffers=[WORK, TOTAL])


GAINS = np.array([1.0, 0.5, 2.0])


def test_hessians_writing_into_a_buffer_through_a_view():
    """A hessian (a gradient inside forward mode) whose function writes into a buffer through
    a view of all of it (``W[...] *= x``): followed (an AttributeError before); through a view
    of part of it (``W[1:] *= x``, ``W[::2]``): followed too (refused before, the forward
    level holding the buffer as a whole)."""
    x = np.array([2.1, 1.5, 2.7])

    def f(x):
        GAINS[...] *= x
        return (GAINS ** 3).sum()

    def local(x):
        gains = np.array([1.0, 0.5, 2.0])
        gains[...] *= x
        return (gains ** 3).sum()

    before = GAINS.copy()
    np.testing.assert_allclose(mutad.hessian(f, x), mutad.hessian(local, x), rtol=1e-12)
    assert GAINS.tobytes() == (before * x).tobytes()  # as NumPy's run leaves it
    GAINS[...] = before

    def part(x):
        GAINS[1:] *= x[1:]
        GAINS[::2] += x[0] * GAINS[1]
        return (GAINS ** 3).sum() + GAINS[2] * x[0]

    def part_local(x):
        gains = np.array([1.0, 0.5, 2.0])
        gains[1:] *= x[1:]
        gains[::2] += x[0] * gains[1]
        return (gains ** 3).sum() + gains[2] * x[0]

    left = left_by_numpy(part, (x,), [GAINS])[0]
    np.testing.assert_allclose(mutad.hessian(part, x), mutad.hessian(part_local, x),
                               rtol=1e-12)
    assert [GAINS.tobytes()] == left and GAINS.flags.writeable
    GAINS[...] = before
    h = 1e-5

    def gradient_from_before(v):  # (each gradient leaves GAINS as NumPy's run: put back)
        g = mutad.gradient(part, v)[0]
        GAINS[...] = before
        return g

    differences = [(gradient_from_before(x + h * e) - gradient_from_before(x - h * e))
                   / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(mutad.hessian(part, x), differences, rtol=1e-6)
    assert [GAINS.tobytes()] == left
    GAINS[...] = before


def test_the_transpose_of_a_buffer():
    """``W.T`` taken before the write that adopts ``W`` and read after it, and ``W.T[0] = x``
    as the first write: a view of the buffer that mutad follows (was handed out as a plain
    array: refused as a constant read after the write, and the write went past mutad)."""
    square = np.zeros((3, 3))
    ramp = np.arange(3.0)

    def f(x):
        t = square.T
        square[:] = np.outer(x, ramp)
        return (t @ x).sum()

    def g(x):
        square.T[0] = x
        return (square @ x).sum() + square[1, 0]

    x = np.array([2.1, 1.5, 2.7])
    check(f, x, buffers=[square])
    check(g, x, buffers=[square])


FLAT = np.zeros((2, 3))
PLAIN_VIEWED = np.zeros(4)


def test_a_write_through_flat_adopts_the_buffer():
    """``W.flat[:] = x`` as the first write into a buffer: adopts it, as ``W[...] = x`` does
    (refused before: the flatiter was the plain array's), and reads through the same
    flatiter after it are the followed values."""
    def f(x):
        flat = FLAT.flat
        flat[:] = np.tile(x, 2) * 2.0
        FLAT.flat[4] = x[0] ** 3
        return (FLAT ** 2).sum() + flat[1] * np.sin(flat[4])

    value, (g,) = check(f, np.array([0.3, -0.5, 1.2]), buffers=[FLAT])
    before = FLAT.copy()
    left = left_by_numpy(f, (np.array([0.3, -0.5, 1.2]),), [FLAT])[0]
    np.testing.assert_allclose(mutad.hessian(f, np.array([0.3, -0.5, 1.2])),
                               mutad.jacobian(lambda x: mutad.gradient(f, x)[0],
                                              np.array([0.3, -0.5, 1.2])), rtol=1e-12)
    assert [FLAT.tobytes()] == left  # as NumPy's runs leave it
    FLAT[...] = before

    def converted(x):  # np.asarray of the flatiter once adopted: refused, not a constant
        FLAT.flat[:3] = x
        return np.asarray(FLAT.flat).sum()

    with pytest.raises(errors.ConversionError):
        mutad.gradient(converted, np.array([0.3, -0.5, 1.2]))
    assert FLAT.tobytes() == before.tobytes()


def test_a_buffer_viewed_as_ndarray():
    """``W.view(np.ndarray)`` of an adopted buffer reads the followed values (a silently zero
    gradient before: the plain array's memory, read as a constant), and a write through such a
    view taken before the first adopts the buffer."""
    def after(x):
        PLAIN_VIEWED[:] = x
        v = PLAIN_VIEWED.view(np.ndarray)
        return (v * v).sum() + PLAIN_VIEWED.view(type=np.ndarray)[1] * x[0]

    def before(x):
        v = PLAIN_VIEWED.view(np.ndarray)
        v[1:] = x[1:] ** 2
        return (PLAIN_VIEWED * x).sum()

    for f in (after, before):
        check(f, np.array([0.3, -0.5, 1.2, 0.8]), buffers=[PLAIN_VIEWED])


MODULE_BUFFERS = types.ModuleType("buffers_of_a_model")  # a module of the user's, as ``import buffers``
MODULE_BUFFERS.W = np.zeros(6)
MODULE_BUFFERS.C = np.zeros(4, dtype=complex)


def test_buffers_of_another_module():
    """``buffers.W`` of a module the function reaches by a name: followed as a module-level
    name of its own module is (refused before: the attribute of a module was not looked at),
    and its methods with ``out=`` (``W.clip(..., out=W)``: refused, the ufunc NumPy's
    ``ndarray.clip`` calls having no rule)."""
    def f(x):
        MODULE_BUFFERS.W.fill(0.0)
        np.add(x[1:], x[:-1], out=MODULE_BUFFERS.W[1:])
        np.cumsum(MODULE_BUFFERS.W, out=MODULE_BUFFERS.W)
        MODULE_BUFFERS.W.clip(-1.0, 1.0, out=MODULE_BUFFERS.W)
        C = MODULE_BUFFERS.C
        C[:] = np.fft.fft(MODULE_BUFFERS.W[:4])
        C *= np.exp(1j * x[:4])
        return MODULE_BUFFERS.W @ x + np.abs(np.fft.ifft(C)).sum()

    check(f, np.array([0.3, -1.2, 2.5, 0.7, 0.1, -0.4]), buffers=[MODULE_BUFFERS.W, MODULE_BUFFERS.C])
    assert type(MODULE_BUFFERS.W) is np.ndarray


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, n):
        self.a, self.b = np.zeros(n), np.ones(n)

    def run(self, x):
        self.a[:] = x
        self.b[...] = self.a * self.a
        return self.b.sum() + self.a.clip(x[0], 1.0) @ x


SLOTTED = Slotted(4)


def test_buffers_in_slots():
    """Arrays in an object's ``__slots__``, reached by a name or as a method's ``self``:
    followed as those in its ``__dict__`` are (refused before)."""
    def f(x):
        SLOTTED.a[:] = x
        return (SLOTTED.a * SLOTTED.b).sum()

    for g in (f, SLOTTED.run):
        check(g, np.array([0.3, -1.2, 2.5, 0.7]), buffers=[SLOTTED.a, SLOTTED.b])
        assert type(SLOTTED.a) is np.ndarray and type(SLOTTED.b) is np.ndarray


class Stages:
    """An integrator keeping its stage buffers in a list, and its work pair in a tuple."""

    def __init__(self, n):
        self.k = [np.zeros(n) for _ in range(2)]
        self.pair = (np.zeros(n), np.zeros(n))

    def step(self, y, h):
        self.k[0][:] = -y ** 3
        self.pair[0][:] = y + 0.5 * h * self.k[0]
        self.k[1][:] = -self.pair[0] ** 3
        y += h * self.k[1]


STAGES = Stages(4)
LIST_OF_BUFFERS = [np.zeros(4), np.zeros(4)]


def test_buffers_held_in_lists_and_tuples():
    """Float arrays made before the call in a list or a tuple the function reaches by a name
    (``self.k[0][:] = ...``): followed as those reached by a name are, and written back
    (refused before); the lists hold the caller's arrays again afterwards, also where the
    function moved them, and the tuples are the caller's own."""
    def f(x):
        y = x.copy()
        for _ in range(3):
            STAGES.step(y, 0.1)
        LIST_OF_BUFFERS[0][:] = np.tanh(y)
        return y @ y + LIST_OF_BUFFERS[0] @ x

    held = [*STAGES.k, *LIST_OF_BUFFERS]
    pair = STAGES.pair
    check(f, np.array([0.3, -1.2, 0.8, 0.5]), buffers=[*held, *pair])
    assert all(a is b for a, b in zip([*STAGES.k, *LIST_OF_BUFFERS], held, strict=True))
    assert STAGES.pair is pair

    def swaps(x):  # the function moves them: they are left moved, as NumPy's run leaves them
        LIST_OF_BUFFERS[0][:] = x
        LIST_OF_BUFFERS[0], LIST_OF_BUFFERS[1] = LIST_OF_BUFFERS[1], LIST_OF_BUFFERS[0]
        return LIST_OF_BUFFERS[1] @ x

    assert mutad.gradient(swaps, np.ones(4))[0].tolist() == [2.0] * 4
    assert LIST_OF_BUFFERS[0] is held[3] and LIST_OF_BUFFERS[1] is held[2]
    assert held[2].tolist() == [1.0] * 4  # as NumPy's run leaves it
    held[2][:] = 0.0


ROWS = [np.zeros(4), np.zeros(4)]


@pytest.mark.parametrize("read", [
    lambda: np.array(ROWS).ravel(), lambda: np.asarray(tuple(ROWS)).ravel(),
    lambda: np.sum(ROWS, axis=0), lambda: np.sin(ROWS).ravel(),
    lambda: np.einsum("ij->j", ROWS), lambda: np.dot(ROWS, np.arange(4.0)),
    lambda: np.random.default_rng(3).normal(ROWS[0], 0.5) * ROWS[1],
    lambda: np.full((2, 4), ROWS[1]).ravel(), lambda: np.fromiter(ROWS[0], float),
    lambda: np.array([v * v for v in np.nditer(ROWS[1])]),
    lambda: np.stack(np.meshgrid(ROWS[0], ROWS[1][:2])).ravel(),
], ids=["array", "asarray", "sum", "ufunc", "einsum", "dot", "draw's parameters", "full",
        "fromiter", "nditer", "meshgrid"])
def test_buffers_written_then_read_through_a_list(read):
    """Buffers made before the call, written inside it, then read as items of a list or tuple
    that NumPy makes one array of (``np.array(rows)``, ``np.sum(rows)``, a draw's parameters),
    or by a call that does not dispatch (``np.full``'s fill, ``np.fromiter``, ``np.nditer``):
    read as the arrays the writes adopted, not as the buffers' plain bytes, whose derivative
    is zero (silently, before; ``np.meshgrid`` of them stopped)."""
    def f(x):
        ROWS[0][:] = x
        ROWS[1][:] = np.cumsum(x) * x
        return (read() * np.linspace(0.5, 2.0, np.size(read()))).sum()

    check(f, np.array([0.3, -1.2, 0.8, 0.5]), buffers=ROWS)


def test_pickling_a_written_buffer_pickles_what_was_written():
    """A pickle round trip of a buffer made before and written inside the function is a copy
    of what was written, as of a traced array (it was plain numbers: its derivative was
    silently zero before)."""
    import pickle

    def f(x):
        ROWS[0][:] = x * x
        return pickle.loads(pickle.dumps(ROWS[0])) @ x

    check(f, np.array([0.3, -1.2, 0.8, 0.5]), buffers=ROWS)


@pytest.mark.parametrize("read", [
    lambda: np.random.default_rng(3).normal(ROWS[0], 0.5) * ROWS[1],
    lambda: np.stack(np.meshgrid(ROWS[0], ROWS[1][:2])).ravel(),
], ids=["draw's parameters", "meshgrid"])
def test_buffers_written_then_read_through_a_list_forward_and_hessian(read):
    """The same reads of adopted buffers under jvp, jacfwd and a Hessian (forward over
    reverse): a draw's parameters and np.meshgrid's (which stopped there before)."""
    def f(x):
        ROWS[0][:] = x
        ROWS[1][:] = np.cumsum(x) * x
        return read()

    x = np.array([0.3, -1.2, 0.8, 0.5])
    _restored = _restoring(f, ROWS)
    jac = np.stack([(_restored(x + 1e-6 * e) - _restored(x - 1e-6 * e)) / 2e-6
                    for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(mutad.jacfwd(f)(x), jac, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mutad.jvp(f, (x,), (np.ones(4),))[1], jac.sum(axis=1),
                               rtol=1e-6, atol=1e-8)
    weights = np.linspace(0.5, 2.0, jac.shape[0])
    grad = mutad.grad(lambda x: f(x) @ weights)
    fd = np.stack([(grad(x + 1e-6 * e) - grad(x - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
    left, kept = left_by_numpy(f, [x], ROWS)
    np.testing.assert_allclose(mutad.hessian(lambda x: f(x) @ weights, x), fd, rtol=1e-5,
                               atol=1e-7)
    assert [b.tobytes() for b in ROWS] == left  # as NumPy's one run leaves them
    put_back(ROWS, kept)
