"""Arrays made before the differentiation and reached by a name (a module's global, a closure's
array) that the function reads again and again: the engines read one plain view of each
(``allocation.read_plain``), not a new one per read, and the operators read it on their short
path (``tracing._read_before``). These programs give the same values,
gradients and errors, bit for bit, with a new view per read (the path before it), and leave
the arrays, their bytes and their flags, as they found them, when the function returns or
raises."""

import numpy as np

import mutad
from mutad.core import allocation
from mutad.engines import operations, tracing


def _view_per_read(monkeypatch):
    """The engines read a new plain view of a stand-in's memory on every read, and the
    operators take a stand-in by their general path."""
    monkeypatch.setattr(allocation, "read_plain", allocation.plain_memory)
    monkeypatch.setattr(tracing, "_read_before", lambda x: None)


def _program(source, **arrays):
    """The function ``f`` defined by ``source`` in a module of its own holding ``arrays``."""
    namespace = {"np": np, **arrays}
    exec(source, namespace)  # noqa: S102 (a test's own module)
    return namespace["f"], namespace


def _state(arrays):
    return {name: (a.tobytes(), a.shape, a.strides, a.flags.writeable, a.flags.owndata)
            for name, a in arrays.items()}


def _outcome(differentiate, f, namespace, names, *args):
    """What ``differentiate(f, *args)`` gives (its bits) or raises, and the state of the
    module's arrays ``names`` afterwards."""
    try:
        result = differentiate(f, *args)
        leaves = result if isinstance(result, tuple) else (result,)
        got = ("returned", [np.asarray(leaf).tobytes() for leaf in leaves])
    except Exception as error:  # noqa: BLE001 (the error is the outcome compared)
        got = ("raised", type(error), str(error))
    return got, _state({name: namespace[name] for name in names})


def _both_paths(monkeypatch, source, arrays, calls, differentiate=mutad.value_and_gradient):
    """The outcomes of ``calls`` (argument tuples) of the program ``source`` over fresh copies
    of ``arrays``, one view per stand-in and a view per read; they must be the same."""
    outcomes = []
    for per_read in (False, True):
        with monkeypatch.context() as patch:
            if per_read:
                _view_per_read(patch)
            copies = {name: a.copy() for name, a in arrays.items()}
            f, namespace = _program(source, **copies)
            outcomes.append([_outcome(differentiate, f, namespace, list(arrays), *args)
                             for args in calls])
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


G = np.linspace(0.0, 1.0, 12)
X = np.linspace(0.5, 1.5, 12)
GRID = np.linspace(0.0, 1.0, 12)  # (a global the function reshapes and gives its shape back)


SOURCE_READ_ON_EVERY_STEP = """
def f(w):
    y = w
    for _ in range(50):
        y = y + w * G
        y = np.add(y, G)
    return (y * G).sum()
"""


def test_a_global_read_on_every_step(monkeypatch):
    outcomes = _both_paths(monkeypatch, SOURCE_READ_ON_EVERY_STEP, {"G": G}, [(X,)])
    assert outcomes[0][0][0] == "returned"
    f, _ = _program(SOURCE_READ_ON_EVERY_STEP, G=G)
    assert np.allclose(mutad.gradient(f, X), G * (1.0 + 50 * G))  # (y = w + 50 (w + 1) G)


def test_globals_viewing_each_other(monkeypatch):
    whole = np.linspace(-1.0, 1.0, 24)
    _both_paths(monkeypatch, """
def f(w):
    y = w.copy()
    for k in range(20):
        y = y * HALF + np.sin(WHOLE[::2]) * w - EVERY[k % 2] * y
    return (y * WHOLE[1::2]).sum()
""", {"WHOLE": whole, "HALF": whole[12:], "EVERY": whole.reshape(2, 12)}, [(X,)])


def test_a_closures_array(monkeypatch):
    _both_paths(monkeypatch, """
def make():
    grid = np.linspace(0.0, 2.0, 12)
    def f(w):
        y = w
        for _ in range(30):
            y = np.tanh(y * grid) + w
        return y.sum()
    return f
f = make()
""", {}, [(X,)])


def test_a_global_written_after_reads(monkeypatch):
    outcomes = _both_paths(monkeypatch, """
def f(w):
    y = w * G
    y = y + w * G
    G[:3] = w[:3]  # a write into the global: followed from here on
    return (y * G).sum() + (w * G).sum()
""", {"G": G}, [(X,)])
    assert outcomes[0][0][0] == "returned"


def test_a_write_refused_after_reads(monkeypatch):
    counts = np.arange(12.0)
    outcomes = _both_paths(monkeypatch, """
def f(w):
    y = w * C
    y = y * C
    C[0] = 1.0
    np.multiply(w, 2.0, out=COUNTS, casting="unsafe")
    return (y * C).sum()
""", {"C": counts, "COUNTS": np.zeros(12, int)}, [(X,)])
    assert outcomes[0][0][0] == "raised" and outcomes[0][0][1] is mutad.errors.UntracedWriteError


def test_the_function_raises_after_reads(monkeypatch):
    outcomes = _both_paths(monkeypatch, """
def f(w):
    y = w
    for _ in range(5):
        y = y * G
    raise ValueError("stopped")
""", {"G": G}, [(X,)])
    assert outcomes[0][0][0] == "raised" and outcomes[0][0][1] is ValueError


def test_a_global_reshaped_in_place_between_reads(monkeypatch):
    _both_paths(monkeypatch, """
def f(w):
    y = (w.reshape(3, 4) * G.reshape(3, 4)).sum()
    a = (w * G).sum()
    G.shape = (3, 4)
    b = (w.reshape(3, 4) * G).sum()
    G.shape = (12,)
    return y + a + b + (w * G).sum()
""", {"G": G}, [(X,)])


def test_replayed_calls_see_the_global_as_the_caller_changed_it(monkeypatch):
    source = """
def f(w):
    y = w
    for _ in range(10):
        y = y * 0.5 + w * G
    return (y * y).sum()
"""
    for per_read in (False, True):
        with monkeypatch.context() as patch:
            if per_read:
                _view_per_read(patch)
            f, namespace = _program(source, G=G.copy())
            replaying, tracing = mutad.value_and_grad(f, replay=True), mutad.value_and_grad(f)
            for k in range(3):
                (value, gradient), (expected, traced) = replaying(X), tracing(X)
                assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
                assert gradient.tobytes() == traced.tobytes()
                assert namespace["G"].flags.writeable
                namespace["G"][k] += 1.0  # between calls, in place


def test_second_order_and_forward(monkeypatch):
    source = """
def f(w):
    y = w
    for _ in range(6):
        y = np.sin(y) * G + w * G
    return (y * y).sum()
"""
    _both_paths(monkeypatch, source, {"G": G}, [(X,)], mutad.hessian)
    _both_paths(monkeypatch, source, {"G": G}, [((X,), (G,))], mutad.jvp)


def test_one_view_per_global_while_its_layout_holds():
    """The reads of a global in one call are of one plain view (what the records keep and
    ``reverse.freeze`` protects once), a new one once the global's layout changed."""
    views = []

    def f(w):
        for _ in range(3):
            views.append(allocation.stand_in_value(GRID))
            w = w * GRID
        GRID.shape = (3, 4)
        views.append(allocation.stand_in_value(GRID))
        GRID.shape = (12,)
        return w.sum()

    mutad.gradient(f, X)
    assert GRID.shape == (12,) and GRID.flags.writeable
    assert views[0] is views[1] is views[2] and views[3].shape == (3, 4)
    assert all(type(view) is np.ndarray for view in views)


def test_one_view_per_global_read_by_the_ufunc_protocol(monkeypatch):
    """A global that NumPy hands on by its ufunc protocol (on the left of an operator,
    ``GRID * w``, or an operand of ``np.multiply``) is read as the operators read it: the one
    plain view the engines read for it, which every step's record keeps (and
    ``reverse.freeze`` protects once), not a new view per step."""
    kept = []

    def keeping(tape, x, value):
        kept.append(value)
        return keep(tape, x, value)

    keep = operations.keep
    monkeypatch.setattr(operations, "keep", keeping)

    def f(w):
        for _ in range(3):
            w = GRID * w
            w = np.multiply(GRID, w) + np.add(w, GRID)
        return w.sum()

    mutad.gradient(f, X)
    read = [view for view in kept if view is not None]  # (a sum's partials read neither)
    assert len(kept) == 9 and len(read) == 6 and all(view is read[0] for view in read)
    assert type(read[0]) is np.ndarray and GRID.flags.writeable


def test_operands_that_change_the_operators_path(monkeypatch):
    """Globals of other dtypes, of no dimension, broadcast, on either side of an operator, an
    integer index f made, an operation NumPy's error handling stops."""
    outcomes = _both_paths(monkeypatch, """
def f(w):
    y = w * F32 + w * C64 - (w * ZERO_D) / (1.0 + G)
    y = y * GRID_2D[1] + (GRID_2D * w).sum(axis=0) + G * w - (G - w) * w
    y = y.real * (w * np.arange(12)) + w / (1.0 + G) ** 2
    return (y * y).sum()
""", {"G": G, "F32": G.astype(np.float32), "C64": G * (1 + 2j), "ZERO_D": np.array(3.0),
      "GRID_2D": np.outer(G, G)[:3]}, [(X,)])
    assert outcomes[0][0][0] == "returned"
    outcomes = _both_paths(monkeypatch, """
def f(w):
    with np.errstate(over="raise"):
        return (w * HUGE).sum()
""", {"HUGE": np.full(12, 1e308)}, [(X + 1.0,)])
    assert outcomes[0][0][:2] == ("raised", FloatingPointError)
