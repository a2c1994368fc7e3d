"""Float arrays bound to a module's names that a replayed function reads (``data = load(i)``
at module level between calls, an optimiser rebinding ``A``): from the first call that
rebinds one, each is an input of the program (``replay._as_inputs``), traced while it records
as an argument outside argnums is, and read afresh by each replay, so that a rebinding
replays. Each call here gives the values, gradients and warnings of a fresh traced call, bit
for bit, and leaves the module's arrays as that call leaves them, on rebindings that change
what the program decides (another dtype, shape or layout, a view of another array, values
written in place, a value a branch reads, a rebinding to a number)."""

import types

import numpy as np
import pytest

import mutad

X = np.array([0.3, -0.7, 1.1])


def _module(source, **names):
    module = types.ModuleType("replayed_globals")
    module.__dict__.update(np=np, **names)
    exec(source, module.__dict__)  # noqa: S102 (a test's own module)
    return module


def _same(a, b):
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _calls(f, module, name, values, argnums=0):
    """Each of ``values`` bound to ``module``'s ``name`` (a callable: called with the array
    bound before, it changes it, or gives what to bind), then ``f`` called on ``X`` replayed
    and traced, from the same bytes: the same answers, and the name bound as the traced call
    leaves it. Returns how many calls replayed."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    tracing = mutad.value_and_grad(f, argnums=argnums)
    trace, traced = replaying.trace, []
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    for value in values:
        if callable(value):
            value = value(getattr(module, name))
        if value is not None:
            setattr(module, name, value)
        bound = getattr(module, name)
        before = bound.copy() if isinstance(bound, np.ndarray) else None
        expected = tracing(X.copy())
        left = getattr(module, name)
        after = left.copy() if isinstance(left, np.ndarray) else left
        if before is not None:
            np.copyto(bound, before)
        setattr(module, name, bound)
        got = replaying(X.copy())
        assert _same(got, expected), (value, got, expected)
        now = getattr(module, name)
        assert type(now) is type(left) and (now is bound) == (left is bound) and _same(now, after)
    return len(values) - len(traced)


def _written(ufunc):
    """Writes into the array bound, in place, between calls."""
    return lambda a: (ufunc(a, 2.0, out=a), None)[1]


PRODUCT = """
def f(x):
    y = np.sin(x) * B
    return (y * y).sum() + y.sum()
"""

bases = [np.linspace(0.5, 2.0 + k, 12) for k in range(3)]


@pytest.mark.parametrize("values, replayed", [
    ([np.linspace(0.1, 1.0, 3) + k for k in range(5)], 3),  # a new array on each call
    ([bases[0][:3], bases[1][:3], bases[2][:3], bases[0][::4], bases[1][::4]], 2),  # views
    ([np.float32([1, 2, 3]), np.float32([2, 3, 4]), np.array([1.0, 2.0, 3.0]),
      np.float32([5, 6, 7])], 1),  # another dtype: another signature
    ([np.ones(3), np.full((2, 3), 2.0), np.ones((2, 3)).T.copy().T, np.ones(1),
      np.full((2, 3), 3.0)], 1),  # other shapes and layouts
    ([np.ones(3), 2 * np.ones(3), _written(np.add), _written(np.multiply), np.ones(3),
      _written(np.add)], 4),  # written in place between calls
    ([np.ones(3), 2.5, 2 * np.ones(3), 3 * np.ones(3), 2.5, 4 * np.ones(3), 5 * np.ones(3)],
     2),  # rebound to a number
    ([np.array(1.0), np.array(2.0), np.array(-3.0), np.float64(4.0), np.array(5.0)], 1),  # 0-d
])
def test_a_rebound_global_is_an_input_of_the_program(values, replayed):
    module = _module(PRODUCT, B=np.ones(3))
    assert _calls(module.f, module, "B", values) == replayed


def test_a_branch_on_a_rebound_global_is_a_guard():
    module = _module("""
def f(x):
    if B[0] > 1.0:
        return (x * B).sum()
    s = 0.0
    for i in range(B.shape[0]):  # (a shape read into Python's ints)
        s = s + np.cos(x[i % x.size]) * B[i]
    return s
""", B=np.ones(3))
    assert _calls(module.f, module, "B", [
        np.array([0.5, 2.0, 3.0]), np.array([0.6, 2.0, 3.0]), np.array([0.4, 2.0, 3.0]),
        np.array([1.5, 2.0, 3.0]), np.array([0.7, 1.0]), np.array([0.8, 1.0]),
        np.array([1.7, 1.0, 3.0])]) == 3


def test_a_global_written_by_f_stays_written_as_numpy_leaves_it():
    module = _module("""
def f(x):
    W[0] += 1.0
    return (W * np.sin(x)).sum()
""", W=np.ones(3))
    _calls(module.f, module, "W", [np.ones(3), np.full(3, 2.0), None, np.full(3, 3.0), None])


def test_a_name_code_rebinds_and_a_module_attribute():
    """A name some code f reaches rebinds (``global B; B = ...``) stays compared as before
    (bound to a traced array it would leak one); a module's attribute f reads
    (``cfg.A``) is an input as a global is."""
    cfg = _module("")
    cfg.A = np.ones(3)
    module = _module("""
def scaled():
    global B
    B = B * 1.0
    return B

def f(x):
    return (scaled() * np.sin(x)).sum() + (cfg.A * x).sum()
""", B=np.ones(3), cfg=cfg)
    assert _calls(module.f, module, "B", [np.full(3, 1.0 + k) for k in range(4)]) == 0
    module = _module("""
def f(x):
    return (cfg.A * np.sin(x)).sum()
""", cfg=cfg)
    assert _calls(module.f, cfg, "A", [np.full(3, 1.0 + k) for k in range(5)]) == 3


def test_a_global_reached_another_way_or_sharing_an_arguments_memory():
    """A global f reaches through another name too (a list), or that views an argument's
    memory, is compared as before."""
    module = _module("""
def f(x):
    return (B * np.sin(x)).sum() + (HELD[0] * x).sum()
""", B=np.ones(3))
    module.HELD = [module.B]
    assert _calls(module.f, module, "B", [
        lambda B, k=k: module.HELD.__setitem__(0, np.full(3, 1.0 + k)) or module.HELD[0]
        for k in range(3)]) == 0
    module = _module("""
def f(x, y):
    return (B * np.sin(x)).sum() + (y * x).sum()
""", B=np.ones(3))
    shared = np.arange(6.0)
    replaying = mutad.value_and_grad(module.f, replay=True)
    for k in range(4):
        module.B = shared[k % 2:k % 2 + 3]
        expected = mutad.value_and_grad(module.f)(X.copy(), shared[:3])
        assert _same(replaying(X.copy(), shared[:3]), expected)


def test_no_recording_binds_a_name_while_another_thread_of_the_programs_runs():
    """A recording binds the traced inputs to their names while f runs: another thread
    reading them then would meet them, so it is traced instead while one runs."""
    import threading
    module = _module(PRODUCT, B=np.ones(3))
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    thread.start()
    try:
        assert _calls(module.f, module, "B", [np.full(3, 1.0 + k) for k in range(4)]) == 0
    finally:
        done.set()
        thread.join()
    assert _calls(module.f, module, "B", [np.full(3, 1.0 + k) for k in range(4)]) == 2


def test_a_recording_that_raises_leaves_the_name_bound_as_it_was():
    module = _module("""
def f(x):
    y = (B * np.sin(x)).sum()
    if y < 0:
        raise ValueError("negative")
    return y
""", B=np.ones(3))
    replaying = mutad.value_and_grad(module.f, replay=True)
    for k in (1.0, 2.0, -1.0, 3.0, -2.0):
        module.B = bound = np.full(3, k)
        if k < 0:
            with pytest.raises(ValueError, match="negative"):
                replaying(X.copy())
        else:
            assert _same(replaying(X.copy()), mutad.value_and_grad(module.f)(X.copy()))
        assert module.B is bound and _same(bound, np.full(3, k))


def test_a_rebound_global_beside_an_argument_of_a_class_of_the_users():
    """The classes of the arguments are reached on each call, with what f reaches again:
    the inputs are left out of that walk's answer as out of the first's."""
    class Params:
        def __init__(self, w):
            self.w = w

        def scale(self, x):
            return self.w * x

    module = _module("""
def f(x, p):
    return (p.scale(B) * np.sin(x)).sum()
""", B=np.ones(3))
    p = Params(2.0)
    replaying = mutad.value_and_grad(module.f, replay=True)
    trace, traced = replaying.trace, []
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    for k in range(5):
        module.B = np.full(3, 1.0 + k)
        expected = mutad.value_and_grad(module.f)(X.copy(), p)
        got = replaying(X.copy(), p)
        assert _same(got[0], expected[0]) and _same(got[1][0], expected[1][0])
    assert len(traced) == 2


FILTERED = """
def f(x):
    out = np.empty_like(IMG, dtype=float)
    WRITE
    a = scipy.ndimage.sobel(out, 0)
    return (a * a).sum() + (out * x[0]).sum()
"""


@pytest.mark.parametrize("write, dtype", [
    ("np.multiply(IMG, x[1], out=out)", float),
    ("scipy.ndimage.gaussian_filter(IMG * x[1], 1.0, output=out)", float),
    ("out[...] = IMG; out *= x[1]", float),
    ("np.multiply(IMG, x[1], out=out)", int),  # (an integer array's stand-in)
])
def test_an_allocation_like_a_global_is_plain_in_each_replay(write, dtype):
    """``np.empty_like(IMG, dtype=float)`` of a module's array: the factory hands NumPy the stand-in of
    ``IMG``, whose plain view makes a plain array; a replay makes it from that view too, not
    from the stand-in (which, called from the replay, gave a constant of its tape: a traced
    array where the recording held a plain one, escaping into a filter's pullback)."""
    import scipy.ndimage
    img = (np.random.RandomState(1).rand(6, 6) * 10).astype(dtype)
    given = img.copy()
    module = _module(FILTERED.replace("WRITE", write), IMG=img, scipy=scipy)
    assert _calls(module.f, module, "IMG", [None, None, None]) == 2
    assert module.IMG is img and _same(img, given)
