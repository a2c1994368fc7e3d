"""Programs written as scientists write them, with their state in objects (a solver holding
its work arrays and a step counter, a layer with caches, an optimiser's moments): each
differentiated in reverse mode, forward mode and as a Hessian, its value NumPy's bit for bit,
its gradient against central differences, and the state the function changed left as NumPy's
one run of it leaves it, plain NumPy values (docs/sharp-bits.md, 'What the function leaves in
your state'). Each program is made afresh (``make``) for every run, NumPy's and mutad's."""

import copy
import ctypes
import dataclasses
import functools
import io
import pickle

import numpy as np
import pytest
import scipy.sparse

import mutad


def _central(make, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (make()[0](x + e) - make()[0](x - e)) / (2 * h)
    return g


def _plain(state):
    """``state`` (arrays, numbers, lists of them) as bytes and types, to compare bit for bit."""
    if isinstance(state, (list, tuple)):
        return [_plain(s) for s in state]
    assert type(state) in (np.ndarray, np.float64, float, int), type(state)
    return type(state), np.asarray(state).tobytes()


def check(make, x, passes=False):
    """``make()`` gives ``(f, state)``: a fresh program and a function reading the state it
    changes. Each mode's value, derivative, and the state after it against NumPy's run.
    ``passes``: f's Python side effects (an append) happen once per pass of the Hessian's,
    which may take several: its state is not compared."""
    f, state = make()
    given = x.tobytes()
    expected = f(x.copy())
    left = _plain(state())
    fd = _central(make, x)
    direction = np.cos(np.arange(x.size)).reshape(x.shape)
    for run in (lambda f: mutad.value_and_gradient(f, x),
                lambda f: mutad.jvp(f, (x,), (direction,)),
                lambda f: (mutad.pullback(f, x)[0], mutad.pullback(make()[0], x)[1](1.0))):
        f, state = make()
        value, derivative = run(f)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        if isinstance(derivative, tuple):
            np.testing.assert_allclose(derivative[0], fd, rtol=1e-6, atol=1e-8)
        else:
            np.testing.assert_allclose(derivative, np.sum(fd * direction), rtol=1e-6, atol=1e-8)
        assert x.tobytes() == given
        assert _plain(state()) == left
    f, state = make()
    mutad.hessian(f, x)
    assert passes or _plain(state()) == left


X = np.array([0.3, -0.7, 1.1, 0.5])


# ----------------------------------------------------------------------------------------------
# Work arrays an object's methods write, reached through its other methods, its __call__ and
# other special methods, an override calling its base's, a property, a class method, a
# partial's keyword: all were UntracedWriteError (mutad looked at the attributes the function's own code names alone)

class Heat:
    def __init__(self, n):
        self.u = np.zeros(n)
        self.work = np.empty(n)
        self.step_count = 0

    def step(self, dt):
        self.work[1:-1] = self.u[:-2] - 2 * self.u[1:-1] + self.u[2:]
        self.work[0] = self.work[-1] = 0.0
        self.u += dt * self.work
        self.step_count += 1

    def run(self, x):
        self.u[:] = x
        for _ in range(3):
            self.step(0.1)
        return (self.u ** 2).sum() * self.step_count

    def __call__(self, x):
        return self.run(x)


class DampedHeat(Heat):
    def step(self, dt):
        super().step(dt)
        self.u *= 0.9


class Buffered:
    def __init__(self):
        self._w = np.ones(4)

    @property
    def w(self):
        return self._w

    def f(self, x):
        self.w[:] = x * 2
        return (self.w * x).sum()


class Table:
    W = np.zeros(4)

    @classmethod
    def apply(cls, x):
        cls.W[:] = np.sin(x)
        return cls.W


class Field:
    """A container of the user's over a work array, written through its special methods."""

    def __init__(self, n):
        self.data = np.zeros(n)

    def __getitem__(self, k):
        return self.data[k]

    def __setitem__(self, k, v):
        self.data[k] = v

    def __iadd__(self, other):
        self.data += other
        return self


def _container():
    field = Field(4)

    def f(x):
        field[:] = x
        field[1:] = field[1:] * field[:-1]
        return (field[:] ** 2).sum()

    return f, lambda: [field.data]


def _augmented():
    field = Field(4)

    def f(x):
        acc = field
        acc += np.sin(x)
        return (field[:] * x).sum()

    return f, lambda: [field.data]


def _solver_method():
    s = Heat(4)
    return s.run, lambda: [s.u, s.work, s.step_count]


def _solver_called():
    s = Heat(4)
    return (lambda x: s(x)), lambda: [s.u, s.work, s.step_count]


def _solver_as_f():
    s = Heat(4)
    return s, lambda: [s.u, s.work, s.step_count]


def _override_calling_super():
    s = DampedHeat(4)
    return s, lambda: [s.u, s.work, s.step_count]


def _property():
    b = Buffered()
    return b.f, lambda: [b._w]


def _class_method():
    Table.W = np.zeros(4)
    return (lambda x: (Table.apply(x) * x).sum()), lambda: [Table.W]


def _partial_keyword():
    work = np.zeros(4)

    def g(x, w):
        w[:] = x ** 2
        return w.sum() * x[0]

    return functools.partial(g, w=work), lambda: [work]


@pytest.mark.parametrize("make", [_solver_method, _solver_called, _solver_as_f,
                                  _override_calling_super, _property, _class_method,
                                  _partial_keyword, _container, _augmented],
                         ids=lambda m: m.__name__)
def test_work_arrays_of_objects(make):
    check(make, X)


# ----------------------------------------------------------------------------------------------
# What the function stores: NumPy's plain values after the differentiation, never traced ones
# (a lazily made buffer, a cache, a history list, a counter), as NumPy's one run leaves them

class Lazy:
    def __init__(self):
        self.buf = None
        self.calls = 0

    def f(self, x):
        if self.buf is None:
            self.buf = np.zeros_like(x)
        self.buf[:] = x ** 2
        self.calls += 1
        self.last = self.buf.sum()
        return self.last * x[0]


class Dense:
    def __init__(self):
        self.W = np.random.default_rng(0).standard_normal((4, 3))
        self.cache = None
        self.calls = 0

    def __call__(self, X):
        self.cache = X
        self.calls += 1
        self.out = np.tanh(X @ self.W)
        return self.out


@dataclasses.dataclass
class State:
    u: np.ndarray
    k: int = 0


def _lazy_buffer():
    m = Lazy()
    return m.f, lambda: [m.buf, m.calls, m.last]


def _layer_called():
    layer = Dense()
    return (lambda x: (layer(x) ** 2).sum()), lambda: [layer.cache, layer.out, layer.calls]


def _layer_dunder_call():
    layer = Dense()
    return ((lambda x: (layer.__call__(x) ** 2).sum()),
            lambda: [layer.cache, layer.out, layer.calls])


def _history():
    history = []

    def f(x):
        u = np.cumsum(x)
        history.append(u)
        history.append(u.sum())
        return (u ** 2).sum()

    return f, lambda: history


def _dataclass_counter():
    st = State(np.zeros(4))

    def f(x):
        st.u += x
        st.k += 1
        return (st.u ** 3).sum()

    return f, lambda: [st.u, st.k]


@pytest.mark.parametrize("make", [_lazy_buffer, _layer_called, _layer_dunder_call, _history,
                                  _dataclass_counter], ids=lambda m: m.__name__)
def test_what_the_function_stores_is_plain(make):
    check(make, X, passes=make is _history)


def test_a_layer_called_or_its_dunder_called_leaves_the_same_state():
    """``layer(X)`` and ``layer.__call__(X)`` ran differently: the first wrote its state as
    NumPy does (mutad did not follow it), the second put it back."""
    states = []
    for call in (lambda layer, x: layer(x), lambda layer, x: layer.__call__(x)):
        layer = Dense()
        layer.W_before = layer.W.copy()

        def f(x, layer=layer, call=call):
            layer.W += 0.1 * x[:3]      # an update of the weights, written in place
            return (call(layer, x) ** 2).sum()

        mutad.gradient(f, X)
        assert type(layer.out) is np.ndarray and layer.calls == 1
        states.append((layer.W.tobytes(), layer.out.tobytes(), layer.cache is X))
    assert states[0] == states[1]
    assert states[0][2]  # the argument itself, as NumPy's run stores it


class Interior:
    def __init__(self):
        self.u = np.zeros(5)

    def f(self, x):
        self.u[:] = x
        self.interior = self.u[1:-1]  # a view of the state, stored
        self.interior *= 2.0
        return (self.u ** 2).sum()


def test_a_view_of_written_state_stored_is_a_view_of_the_callers_array():
    x = np.arange(1.0, 6.0)
    expected = Interior()
    expected.f(x)
    for differentiate in (lambda f: mutad.gradient(f, x), lambda f: mutad.jvp(f, (x,), (x,))):
        s = Interior()
        differentiate(s.f)
        assert type(s.interior) is np.ndarray and np.shares_memory(s.interior, s.u)
        assert s.u.tobytes() == expected.u.tobytes()
        assert s.interior.tobytes() == expected.interior.tobytes()
        s.interior[0] = 100.0  # writable, as NumPy's view, and a view
        assert s.u[1] == 100.0


def test_a_replay_leaves_plain_values_it_reads_on_the_next_call():
    """The buffer a first call made (``self.buf``) was left traced: the next call raised
    EscapedTracerError."""
    m = Lazy()
    replayed = mutad.grad(m.f, replay=True)
    reference = Lazy()
    for x in (X, X * 1.5, X - 0.25):
        np.testing.assert_array_equal(replayed(x), mutad.gradient(reference.f, x)[0])
        assert type(m.buf) is np.ndarray and m.buf.tobytes() == reference.buf.tobytes()


def test_a_raising_function_puts_its_arrays_back_and_leaves_plain_values():
    m = Lazy()
    m.buf = np.zeros(4)

    def f(x):
        m.buf[:] = x
        m.kept = x * 2.0
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        mutad.gradient(f, X)
    assert not m.buf.any() and type(m.kept) is np.ndarray
    assert m.kept.tobytes() == (X * 2.0).tobytes()


def test_jacobian_passes_start_from_the_state_before_the_call():
    """``jacobian`` and ``hessian`` run f once per pass: each starts from the arrays' bytes
    before the call, and the state ends as after one run."""
    gains = np.array([1.0, 0.5, 2.0, -1.0])

    def f(x):
        gains[...] *= x
        return gains ** 2

    J = mutad.jacobian(f, X)
    np.testing.assert_allclose(J, np.diag(2 * X * np.array([1.0, 0.5, 2.0, -1.0]) ** 2),
                               rtol=1e-14)
    assert gains.tobytes() == (np.array([1.0, 0.5, 2.0, -1.0]) * X).tobytes()


# ----------------------------------------------------------------------------------------------
# Compiled code that needs an array's own memory: refused, saying how to make the array plain


def test_the_memory_of_an_array_made_in_the_function_refused_with_what_to_do():
    def through_memoryview(x):
        w = np.zeros(4)
        return (x * np.frombuffer(memoryview(w))).sum()

    def through_ctypes(x):
        w = np.ones(4)
        return (x * w.ctypes.data_as(ctypes.POINTER(ctypes.c_double))[0]).sum()

    for f in (through_memoryview, through_ctypes):
        with pytest.raises(mutad.MutadError, match="plain_allocation"):
            mutad.gradient(f, X)

    def planned(x):
        with mutad.plain_allocation():
            w = np.ones(4)
        return (x * w.ctypes.data_as(ctypes.POINTER(ctypes.c_double))[0]
                + x * np.frombuffer(memoryview(w))).sum()

    assert mutad.gradient(planned, X)[0].tolist() == [2.0] * 4


def test_jacfwd_runs_a_small_function_once():
    """jacfwd ran f once for the shapes of its outputs and once more per batch of directions:
    a counter f keeps counted two; the first batch gives the outputs' shapes now."""
    s = Heat(4)

    def f(x):
        s.run(x)
        return s.u * s.step_count

    J = mutad.jacfwd(f)(X)
    assert s.step_count == 3
    reference = Heat(4)
    columns = []
    for e in np.eye(4):  # (each column's run from the state before the call, and 3 steps)
        probe = Heat(4)
        columns.append(mutad.jvp(lambda x: (probe.run(x), probe.u * probe.step_count)[1],
                                 (X,), (e,))[1])
    np.testing.assert_allclose(J, np.array(columns).T, rtol=1e-13)
    reference.run(X)
    assert s.u.tobytes() == reference.u.tobytes()


# ----------------------------------------------------------------------------------------------
# New arrays made by calls the mode does not follow, from plain values, that one local name
# alone holds: an augmented assignment to the name writes traced values into them (they were
# UntracedWriteError)

SPARSE = scipy.sparse.csr_matrix(np.arange(1.0, 17.0).reshape(4, 4) % 5)


def _column_sums_raveled(x):
    d = np.asarray(SPARSE.sum(axis=0)).ravel()  # SciPy's np.matrix, seen as an array
    d *= x
    d += x * x
    return (d * d).sum()


def _column_sums_a1(x):
    d = SPARSE.sum(axis=0).A1
    d *= x
    return (d * x).sum()


def _column_sums_get_a(x):
    d = SPARSE.sum(axis=0).getA()
    d *= x
    return (d ** 2).sum()


def _unpickled(x):
    y = pickle.loads(pickle.dumps(np.linspace(1.0, 2.0, 4)))
    y *= x
    y -= np.sin(x)
    return (y ** 2).sum()


def _deep_copied(x):
    y = copy.deepcopy(np.linspace(1.0, 2.0, 4))
    y *= x
    return (y ** 2).sum()


def _loaded_from_bytes(x):
    saved = io.BytesIO()
    np.save(saved, np.linspace(1.0, 2.0, 4))
    saved.seek(0)
    y = np.load(saved)
    y *= x
    return (y ** 2).sum()


def _from_a_bytearray(x):
    y = np.frombuffer(bytearray(np.linspace(1.0, 2.0, 4).tobytes()))
    y *= x
    return (y ** 2).sum()


def _matrix_kept(x):
    m = SPARSE.sum(axis=0)
    d = np.asarray(m).ravel()  # a view of the matrix m, which the
    # function reads after: the matrix, made by a followed sparse method, is followed too
    d *= x
    return d.sum() + m.sum()


@pytest.mark.parametrize("f", [_column_sums_raveled, _column_sums_a1, _column_sums_get_a,
                               _unpickled, _deep_copied, _loaded_from_bytes,
                               _from_a_bytearray, _matrix_kept])
def test_an_augmented_assignment_into_a_new_array_only_its_name_holds(f):
    check(lambda: (f, lambda: [SPARSE.data, SPARSE.indices, SPARSE.indptr]), X)
    replayed = mutad.grad(f, replay=True)
    for k in range(4):
        x = X * (1.0 + 0.3 * k) - 0.1 * k
        given = x.tobytes()
        assert replayed(x).tobytes() == mutad.gradient(f, x)[0].tobytes()
        assert x.tobytes() == given


def _held_by_another_name(x):
    y = np.ma.getdata(np.ma.masked_array([1.0, 1.0, 1.0, 1.0]))
    z = y
    y *= x
    return (y + z).sum()


def _written_by_out(x):
    y = np.ma.getdata(np.ma.masked_array([1.0, 1.0, 1.0, 1.0]))
    np.multiply(y, x, out=y)
    return y.sum()


def _viewed(x):
    y = np.ma.getdata(np.ma.masked_array([1.0, 1.0, 1.0, 1.0]))
    v = y[:2]
    y *= x
    return y.sum() + v.sum()


CACHED = {}


def _cached(x):
    y = CACHED.setdefault("y", np.ma.getdata(np.ma.masked_array([1.0, 1.0, 1.0, 1.0])))
    y *= x
    return y.sum()


@pytest.mark.parametrize("f", [_held_by_another_name, _written_by_out, _viewed, _cached])
def test_a_write_into_a_new_array_something_else_holds_refused_with_what_to_do(f):
    """Another name, a view, a dict, a buffer would read the array's old values."""
    for differentiate in (lambda: mutad.gradient(f, X), lambda: mutad.jvp(f, (X,), (X,))):
        CACHED.clear()  # (an array in it made before the call is adopted: followed)
        with pytest.raises(mutad.errors.UntracedWriteError, match=r"\(y \*= x\).*np\.array"):
            differentiate()


# ----------------------------------------------------------------------------------------------
# An array of records made before the call, reached by a name: its fields written are followed
# as a float array's (was UntracedWriteError)

class Particles:
    def __init__(self):
        self.s = np.zeros(4, dtype=[("pos", float), ("vel", float)])
        self.s["vel"] = [1.0, -2.0, 0.5, 3.0]

    def f(self, x):
        self.s["pos"] = x
        self.s["vel"] *= x
        self.s["pos"] += 0.1 * self.s["vel"]
        return (self.s["pos"] ** 2 * self.s["vel"]).sum()


def _records(p):
    return [p.s["pos"].copy(), p.s["vel"].copy()]


def test_the_fields_of_records_made_before_the_call_written():
    reference = Particles()
    expected = reference.f(X.copy())
    fd = _central(lambda: (Particles().f,), X)
    direction = np.cos(np.arange(4.0))
    for run in (lambda f: mutad.value_and_gradient(f, X),
                lambda f: mutad.jvp(f, (X,), (direction,))):
        p = Particles()
        value, derivative = run(p.f)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        expected_derivative = fd if isinstance(derivative, tuple) else fd @ direction
        np.testing.assert_allclose(np.squeeze(derivative), expected_derivative, rtol=1e-6)
        assert type(p.s) is np.ndarray and p.s.tobytes() == reference.s.tobytes()
    p, reference = Particles(), Particles()
    replayed = mutad.grad(p.f, replay=True)
    for k in range(4):
        x = X * (1.0 + 0.3 * k)
        given = x.tobytes()
        assert replayed(x).tobytes() == mutad.gradient(reference.f, x)[0].tobytes()
        assert p.s.tobytes() == reference.s.tobytes() and x.tobytes() == given


def test_the_fields_of_records_made_before_written_under_nesting_refused():
    p = Particles()
    before = p.s.tobytes()
    with pytest.raises(mutad.errors.UnsupportedOperationError,
                       match="records .* made before and written under nested"):
        mutad.hessian(p.f, X)
    assert p.s.tobytes() == before


RECORDS = np.array([(1.0, 0.5), (2.0, 0.25), (3.0, 2.0), (4.0, 1.0)],
                   dtype=[("pos", float), ("vel", float)])


def test_records_made_before_read_under_nesting_as_numpys():
    """Sorted or gathered, records made before the call that f reaches by a name stand in as
    float arrays do: the records made of them under a Hessian are NumPy's, as they were."""
    before = RECORDS.tobytes()
    for read in (lambda: np.sort(RECORDS, order="vel")["pos"],
                 lambda: RECORDS[[3, 1, 2, 0]]["pos"], lambda: RECORDS.copy()["vel"]):
        w = read()
        np.testing.assert_allclose(mutad.hessian(lambda x: (x @ read()) ** 2, X),
                                   2 * np.outer(w, w), rtol=1e-14)
        assert RECORDS.tobytes() == before
