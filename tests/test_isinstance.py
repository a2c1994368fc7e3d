"""``isinstance`` of differentiated values answers as of NumPy's: a program that branches on
``isinstance(x, np.ndarray)``, ``isinstance(x[0], float)`` or ``isinstance(k, np.generic)``
takes NumPy's branch in every mode, so its value is NumPy's and its derivative that of what
NumPy computed. mutad's, NumPy's and SciPy's own code still tell a traced array from the
array it wraps (``type(x)`` is mutad's class everywhere).
"""

import collections
import copy
import functools
import math
import numbers

import numpy as np
import pytest

import mutad

CLASSES = (np.ndarray, np.generic, np.number, np.inexact, np.floating, np.complexfloating,
           np.float64, np.float32, np.complex128, float, complex, int, numbers.Number,
           numbers.Real, numbers.Complex, np.matrix, list)


def classes(v):
    """Which of ``CLASSES`` ``isinstance`` says ``v`` is an instance of."""
    return tuple(isinstance(v, c) for c in CLASSES)


def derived(x, k):
    """Values a program computes from array ``x`` (at least two elements) and number ``k``:
    arrays, views, NumPy scalars, Python numbers, 0-d arrays, arrays it allocates."""
    s = x[0]
    work = np.zeros(2)
    work[0] = s
    return [x, k, s, x[-1], x.sum(), x[1:], x.T, x * 2.0, s * 2.0, s + k, k * k, -k,
            s.item(), x.sum().item() * 2.0, math.exp(s.real), np.sin(s), np.sin(k),
            x.reshape(-1, 1)[0], np.zeros(()), np.asarray(s), np.float64(s), work,
            np.zeros(3), np.array([s, s]), list(x)[0], x.max(), np.dot(x, x),
            # a NumPy scalar's methods, and the functions that call them, return scalars
            s.copy(), s.astype(np.float32), s.astype(s.dtype), s.reshape(()), s.T, s.view(),
            s.squeeze(), s.transpose(), s.real, s.imag, s.conj(), np.transpose(s),
            np.reshape(s, ()), np.squeeze(s), np.real(s), np.imag(s), np.moveaxis(s, [], []),
            np.angle(s), np.real_if_close(s), np.real_if_close(work), (s * 2.0).copy()]


def observed(x, k, seen):
    """A program that notes what ``isinstance`` says of its values, then computes with them."""
    seen.append([classes(v) for v in derived(x, k)])
    return (np.sin(x) * k).real.sum()


ARGUMENTS = {
    "float64, Python float": (np.array([0.3, -1.2, 2.0]), 0.7),
    "float64, np.float64": (np.array([0.3, -1.2, 2.0]), np.float64(0.7)),
    "float64, 0-d array": (np.array([0.3, -1.2, 2.0]), np.array(0.7)),
    "float32, Python float": (np.array([0.3, -1.2, 2.0], np.float32), 0.7),
    "float32, np.float32": (np.array([0.3, -1.2, 2.0], np.float32), np.float32(0.7)),
    "complex128, Python float": (np.array([0.3 + 1j, -1.2, 2.0 - 0.5j]), 0.7),
}


def numpy_answers(x, k):
    seen = []
    observed(np.copy(x), copy.copy(k), seen)
    return seen[0]


def under(transform, x, k):
    """What ``observed`` saw under ``transform`` (a call of mutad's on ``observed``)."""
    seen = []
    transform(functools.partial(observed, seen=seen), x, k)
    assert seen
    return seen[0]


TRANSFORMS = {
    "gradient": lambda f, x, k: mutad.gradient(f, x, k),
    "grad of x": lambda f, x, k: mutad.grad(f)(x, k),
    "value_and_grad": lambda f, x, k: mutad.value_and_grad(f, argnums=(0, 1))(x, k),
    "vjp": lambda f, x, k: mutad.vjp(f, x, k)[1](1.0),
    "jvp": lambda f, x, k: mutad.jvp(f, (x, k), (np.ones_like(x), np.ones_like(k))),
    "jacfwd": lambda f, x, k: mutad.jacfwd(f)(x, k),
    "jacrev": lambda f, x, k: mutad.jacrev(f)(x, k),
    "hessian": lambda f, x, k: mutad.hessian(f, x, k),
    "hvp": lambda f, x, k: mutad.hvp(f, (x, k), (np.ones_like(x), np.ones_like(k))),
    "grad of grad": lambda f, x, k: mutad.gradient(
        lambda x, k: mutad.gradient(f, x, k)[0].sum(), x, k),
    "replay": lambda f, x, k: mutad.grad(f, replay=True)(x, k),
}
REAL_ONLY = {"jvp", "jacfwd", "jacrev", "hessian", "hvp", "grad of grad"}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_isinstance_answers_as_of_numpys_values(transform, arguments):
    x, k = ARGUMENTS[arguments]
    if transform in REAL_ONLY and x.dtype.kind == "c":
        pytest.skip("derivatives of complex arguments in these forms are not what this checks")
    before = (x.tobytes(), np.asarray(k).tobytes(), type(k))
    assert under(TRANSFORMS[transform], x, k) == numpy_answers(x, k)
    assert (x.tobytes(), np.asarray(k).tobytes(), type(k)) == before


def typed(x, k, seen):
    """A program that notes what ``type()`` gives of its values, then computes with them."""
    seen.append([type(v) for v in derived(x, k)])
    return (np.sin(x) * k).real.sum()


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("arguments", ["float64, Python float", "float32, np.float32"])
def test_type_answers_as_of_numpys_values(transform, arguments):
    """``type()`` called by the user's code gives the class of NumPy's value, as ``isinstance``
    does: ``type(x) is np.ndarray``, ``type(x.sum()) is np.float64`` and ``type(k) is float``
    take NumPy's branch (they took the other, and the value was not NumPy's)."""
    x, k = ARGUMENTS[arguments]
    expected = []
    typed(np.copy(x), copy.copy(k), expected)
    seen = []
    TRANSFORMS[transform](functools.partial(typed, seen=seen), x, k)
    assert seen[0] == expected[0]


def branching_on_type(x):
    """Branches on ``type()`` of its values, as code written for arrays and scalars does."""
    if type(x) is not np.ndarray:
        return 0.0 * x[0]
    s = x.sum()
    if type(s) == np.float64 and type(s.item()) is float:
        s = s * x[0]
    return s + (type(x[1:]).__name__ == "ndarray") * x[1]


def test_a_branch_on_type_gives_numpys_value_and_its_derivative():
    x = np.array([0.3, -1.2, 2.0])
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(branching_on_type, x)
    assert value == branching_on_type(x.copy()) == x.sum() * x[0] + x[1]
    assert np.allclose(g, [x.sum() + x[0], x[0] + 1.0, x[0]], rtol=1e-15)
    y, t = mutad.jvp(branching_on_type, (x,), (np.ones(3),))
    assert y == value and np.isclose(t, g.sum(), rtol=1e-15)
    assert np.allclose(mutad.hvp(branching_on_type, (x,), (np.ones(3),)), [4.0, 1.0, 1.0],
                       rtol=1e-15)
    assert x.tobytes() == before


def converts_then_compares(x):
    """Calls NumPy's scalar type (the mode's stands in for it) and compares a type with it by
    ``==`` and ``!=``, which its stand-in answers as NumPy's type."""
    y = np.float32(x[0]) * 2
    if type(y) != np.float32 or not type(y) == np.float32:
        return 0.0 * x[0]
    return y * x[1]


def test_a_scalar_types_stand_in_compares_unequal_as_numpys():
    x = np.array([1.5, 2.5])
    value, (g,) = mutad.value_and_gradient(converts_then_compares, x)  # (!= raised TypeError)
    assert value == converts_then_compares(x.copy()) == 7.5 and g.tolist() == [5.0, 3.0]


LOADS_TYPE = """
def f(x):
    return x.sum() * isinstance(np.ndarray, type) + (type(x) is np.ndarray)
"""


def test_type_stays_pythons_in_a_module_that_loads_it_otherwise():
    """A module whose code loads ``type`` other than to call it (``isinstance(c, type)``, here
    of another module, whose names this one's functions would read) keeps Python's, which the
    mode's, a function, would not pass for."""
    namespace = {"__name__": "loads_type", "np": np}
    exec(LOADS_TYPE, namespace)
    value, (g,) = mutad.value_and_gradient(namespace["f"], np.ones(2))
    assert value == 2.0 and g.tolist() == [1.0, 1.0]


def test_the_answers_checked_are_numpys():
    """What the table above holds: NumPy's answers differ between its values."""
    x, k = ARGUMENTS["float64, Python float"]
    answers = dict(zip(("x", "k", "s"), numpy_answers(x, k)))
    assert answers["x"][:2] == (True, False)  # an ndarray, not a scalar
    assert answers["k"][CLASSES.index(float)] and not answers["k"][1]  # a Python float
    assert answers["s"][CLASSES.index(float)] and answers["s"][1]  # NumPy's float64
    x32, _ = ARGUMENTS["float32, Python float"]
    assert not numpy_answers(x32, k)[2][CLASSES.index(float)]  # float32 is no Python float


# ----------------------------------------------------------------------------------------------
# Branches on isinstance: NumPy's value, and the derivative of what NumPy computed


def branching(x, k):
    """Takes one branch or the other on what its values are, as code written for several
    kinds of input does."""
    if isinstance(x, np.ndarray):
        x *= 2.0  # the caller's array: mutad gives it back as it was
    else:
        x = x * 3.0
    s = x[0]
    if isinstance(s, float) and isinstance(s, np.generic) and not isinstance(s, np.ndarray):
        s = s * x[1]
    else:
        s = s * 5.0
    if isinstance(k, float) and not isinstance(k, np.generic):  # a Python float
        x[1:] += k * s
    elif isinstance(k, np.ndarray):
        x[1:] -= k * s
    else:
        x[1:] *= k
    if isinstance(x.sum(), np.floating) and isinstance(s.item(), float):
        x = x / (1.0 + s * s)
    return np.sin(x)


def numpys_branch(x, k, k_kind):
    """``branching`` with the branches NumPy takes for a float64 ``x`` and ``k`` of
    ``k_kind`` written out."""
    x *= 2.0
    s = x[0] * x[1]
    if k_kind == "python":
        x[1:] += k * s
    elif k_kind == "array":
        x[1:] -= k * s
    else:
        x[1:] *= k
    return np.sin(x / (1.0 + s * s))


def loss(x, k):
    return (branching(x, k) ** 2).sum()


KS = {"python": 0.7, "numpy": np.float64(0.7), "array": np.array(0.7)}
X = np.array([0.3, -1.2, 2.0, 0.9])


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kind", KS)
def test_a_branch_on_isinstance_gives_numpys_value(kind):
    k = KS[kind]
    expected = branching(X.copy(), copy.copy(k))
    assert same(expected, numpys_branch(X.copy(), copy.copy(k), kind))
    x = X.copy()
    value, back = mutad.vjp(branching, x, k)
    back(np.ones(4))  # (which gives the caller's array back)
    assert same(value, expected) and same(x, X)
    value, _ = mutad.jvp(branching, (x, k), (np.ones_like(x), np.ones_like(k)))
    assert same(value, expected) and same(x, X)
    value, _ = mutad.value_and_grad(loss)(x, k)
    assert same(value, loss(X.copy(), copy.copy(k))) and same(x, X)


@pytest.mark.parametrize("kind", KS)
def test_a_branch_on_isinstance_gives_the_derivative_of_numpys_branch(kind):
    k = KS[kind]
    x = X.copy()
    explicit = functools.partial(numpys_branch, k_kind=kind)

    def explicit_loss(x, k):
        return (explicit(x, k) ** 2).sum()

    for of_branching, of_explicit in [
            (mutad.gradient(loss, x, k), mutad.gradient(explicit_loss, x, k)),
            (mutad.grad(loss)(x, k), mutad.grad(explicit_loss)(x, k)),
            (mutad.value_and_gradient(loss, x, k), mutad.value_and_gradient(explicit_loss, x, k)),
            (mutad.vjp(branching, x, k)[1](np.ones(4)), mutad.vjp(explicit, x, k)[1](np.ones(4))),
            (mutad.jvp(branching, (x, k), (np.ones(4), np.ones_like(k)))[1],
             mutad.jvp(explicit, (x, k), (np.ones(4), np.ones_like(k)))[1]),
            (mutad.jacfwd(branching)(x, k), mutad.jacfwd(explicit)(x, k)),
            (mutad.jacrev(branching)(x, k), mutad.jacrev(explicit)(x, k)),
            (mutad.hessian(loss, x, k), mutad.hessian(explicit_loss, x, k)),
            (mutad.hvp(loss, (x, k), (X, 1.0)), mutad.hvp(explicit_loss, (x, k), (X, 1.0)))]:
        assert _same_tree(of_branching, of_explicit)
    assert same(x, X)
    # and against finite differences (which move k as a NumPy scalar: the branch of a Python
    # float is checked with k a constant)
    mutad.check_grads(explicit, x, k, order=2)
    mutad.check_grads(functools.partial(branching, k=k), x, order=2)
    assert same(x, X)


def _same_tree(a, b):
    if type(a) in (tuple, list):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_tree, a, b))
    return type(a) is type(b) and same(a, b)


def test_a_replay_takes_the_branch_of_each_calls_arguments():
    """The kinds ``isinstance`` tells apart are those of the arguments and of how the program
    computes, never values: a replay recorded for one kind of ``k`` gives, for another, the
    gradient of that one's branch."""
    replaying = mutad.value_and_grad(loss, argnums=(0, 1), replay=True)
    for kind in ["python", "numpy", "python", "array", "numpy", "array", "python"]:
        for x in (X, X[::-1].copy(), X.astype(np.float32)):
            k = KS[kind]
            before = x.tobytes()
            value, grads = replaying(x, k)
            assert x.tobytes() == before
            assert same(value, loss(x.copy(), copy.copy(k)))
            expected = mutad.value_and_grad(loss, argnums=(0, 1))(x.copy(), copy.copy(k))
            assert _same_tree(grads, expected[1])


def constructing(x, seen):
    """Calls NumPy's raw constructor and a scalar type, for which the allocation mode stands
    in with types of its own: ``isinstance`` of them answers as NumPy's too."""
    work = np.ndarray((2,))
    work[:] = x[:2]
    v = np.float64(x[0])
    values = (x, work, v, x[0], x.sum(), x.sum().item())
    seen.append([isinstance(w, t) for w in values for t in (np.ndarray, np.float64, float)])
    return (work * v).sum()


def test_the_allocation_modes_stand_in_types_answer_as_numpys():
    expected, seen = [], []
    constructing(X.copy(), expected)
    mutad.gradient(functools.partial(constructing, seen=seen), X.copy())
    mutad.jvp(functools.partial(constructing, seen=seen), (X.copy(),), (X,))
    assert seen == expected * 2


_FLOAT64, _NDARRAY = np.float64, np.ndarray


def _numpys_own_types(seen):
    def f(x):  # (by vars: code that names the types gets NumPy's own, as it compares them)
        seen.append((vars(np)["float64"] is _FLOAT64, vars(np)["ndarray"] is _NDARRAY))
        return x.sum()
    return f


def _calling_the_types(x):
    a = np.ndarray((2,), dtype=float)  # (called, never compared: the mode's constructor)
    a[:] = x[:2]
    return np.float64(a.sum()) * 2.0


def test_a_function_after_one_that_called_the_stand_in_types_sees_numpys_own():
    # (the mode binds NumPy's own types back only where its module changed since it did)
    seen: list = []
    for f in (_numpys_own_types(seen), _calling_the_types, _numpys_own_types(seen),
              _numpys_own_types(seen)):
        mutad.gradient(f, X.copy())
    assert seen == [(True, True)] * 3


def unbound_methods(x):
    y = x * 2.0
    y = np.ndarray.__iadd__(y, x)
    y = np.ndarray.__imul__(y, x[::-1])
    x[0] = 3.0
    np.ndarray.__isub__(x, y)
    return np.ndarray.sum(y * y) + np.ndarray.dot(x, x) + np.ndarray.__add__(x, 1.0)[1]


def test_ndarrays_methods_called_unbound_are_the_values_own():
    """Regression: ``np.ndarray.__iadd__(y, x)`` of a traced ``y`` raised NumPy's TypeError
    (its descriptor requires an ndarray): the allocation mode's ndarray stood in only where
    the code called ``np.ndarray(...)`` itself."""
    expected = unbound_methods(X.copy())
    replaying = mutad.value_and_grad(unbound_methods, replay=True)
    for _ in range(2):
        x = X.copy()
        value, g = mutad.value_and_grad(unbound_methods)(x)
        assert value == expected and np.array_equal(x, X)
        assert mutad.jvp(unbound_methods, (X.copy(),), (X,))[0] == expected
        again, h = replaying(x)
        assert again == value and np.array_equal(h, g) and np.array_equal(x, X)
    mutad.check_grads(unbound_methods, X.copy())


# ----------------------------------------------------------------------------------------------
# What else asks a value's class


def test_singledispatch_takes_numpys_registration():
    @functools.singledispatch
    def scale(v):
        return v * 7.0

    @scale.register
    def _(v: np.ndarray):
        return v * 2.0

    @scale.register
    def _(v: float):
        return v * 3.0

    def f(x):
        return scale(x).sum() + scale(x[0]) + scale(x[1].item())

    x = X.copy()
    assert same(mutad.gradient(f, x)[0], np.array([5.0, 5.0, 2.0, 2.0]))
    assert same(mutad.value_and_grad(f)(x)[0], f(X.copy()))


def test_traced_sparse_matrices_are_instances_of_scipys_classes():
    """Of SciPy's classes and of their ``np.matrix`` results, by the names the user's code
    binds (``scipy.sparse.csr_matrix`` is routed: its stand-in asks for the caller)."""
    import scipy.sparse
    from scipy.sparse import csr_array, csr_matrix, sparray, spmatrix

    kinds = (csr_matrix, csr_array, sparray, spmatrix, scipy.sparse.csr_matrix,
             scipy.sparse.csc_matrix, np.ndarray, np.matrix)

    def f(x, seen):
        a, b = csr_matrix(np.diag(x)), scipy.sparse.csc_array(np.diag(x))
        m = a.sum(axis=0)  # SciPy's np.matrix
        seen.append([isinstance(v, c) for v in (a, b, m, m.A) for c in kinds])
        return np.asarray(m).sum() + b.sum()

    expected, seen = [], []
    f(X.copy(), expected)
    mutad.gradient(functools.partial(f, seen=seen), X.copy())
    assert seen == expected and expected[0][0] and expected[0][2 * len(kinds) + 7]


INTERNAL_CODE = """
def probe(v):
    return (isinstance(v, np.ndarray), isinstance(v[0], numbers.Number), v.__class__, type(v))
"""


def test_numpys_scipys_and_mutads_own_code_see_mutads_class():
    """Their Python code tells a traced array from the array it wraps by its class (NumPy's
    ``isinstance(a, np.ndarray)`` before reading its buffer), as before, also through Python's
    ``abc`` (``isinstance(v, numbers.Number)``): only the user's code is shown NumPy's class,
    by ``type()`` too where it calls it (``test_type_answers_as_of_numpys_values``)."""
    probes = {}
    for module in ("numpy._probe", "scipy._probe", "mutad._probe", "user_module"):
        namespace = {"__name__": module, "np": np, "numbers": numbers}
        exec(INTERNAL_CODE, namespace)
        probes[module] = namespace["probe"]
    seen = {}
    box = collections.deque([seen])  # (what f stores where it reaches by a name is NumPy's after)

    def f(x):
        seen = box[0]
        seen.update((module, probe(x)) for module, probe in probes.items())
        seen["copies"] = [copy.copy(x), copy.deepcopy(x)]
        return (x * x).sum()

    mutad.gradient(f, X.copy())
    kind = seen["numpy._probe"][-1]
    assert kind is not np.ndarray and seen["user_module"] == (True, True, np.ndarray, np.ndarray)
    for module in ("numpy._probe", "scipy._probe", "mutad._probe"):  # (numbers' ABC: theirs)
        assert seen[module] == (False, False, kind, kind)
    assert all(type(c) is kind and c.__class__ is np.ndarray for c in seen["copies"])


def test_a_device_arrays_values_are_its_librarys_arrays():
    """Of a device library's arrays (CuPy's, here its stand-in), its array class, whose
    reductions and elements are 0-d arrays too."""
    import device_array as xp
    from mutad.core import devices
    devices.register(xp.ndarray, xp)

    def f(x, seen):
        s = x.sum()
        seen.append([isinstance(v, c) for v in (x, s, x[0]) for c in (xp.ndarray, np.ndarray,
                                                                      np.generic, float)])
        return s

    x = xp.asarray(X)
    expected, seen = [], []
    f(x, expected)
    mutad.gradient(functools.partial(f, seen=seen), x)
    mutad.jvp(functools.partial(f, seen=seen), (x,), (x,))
    assert seen == expected * 2 and expected[0][0]


# ----------------------------------------------------------------------------------------------
# NumPy's scalars are values: what their methods return is one of its own


SCALAR_RESULTS = {
    "x[1].copy()": lambda a: a[1].copy(),
    "x[1].astype(np.float64)": lambda a: a[1].astype(np.float64),
    "x[1].astype(np.float32)": lambda a: a[1].astype(np.float32),
    "x[1].reshape(())": lambda a: a[1].reshape(()),
    "x[1].T": lambda a: a[1].T,
    "x[1].squeeze()": lambda a: a[1].squeeze(),
    "np.transpose(x[1])": lambda a: np.transpose(a[1]),
    "np.squeeze(x[1])": lambda a: np.squeeze(a[1]),
    "z[1].real": lambda a: (a * (1 + 2j))[1].real,
    "np.imag(z[1])": lambda a: np.imag((a * (1 + 2j))[1]),
    "x.sum().copy()": lambda a: a.sum().copy(),
    "copy.copy(x[1])": lambda a: copy.copy(a[1]),
    "copy.deepcopy(x.sum())": lambda a: copy.deepcopy(a.sum()),
}


def written_through_another_name(method):
    def f(x):
        v = method(x)
        w = v  # another name for the same value
        v += 1.0  # a new value for v: w keeps the old one, as Python does with numbers
        v *= 3.0
        return w * x[0] + v
    return f


@pytest.mark.parametrize("name", SCALAR_RESULTS)
def test_a_numpy_scalars_methods_return_values_of_their_own(name):
    """``x[1].copy()``, ``x[1].astype(...)`` and the other methods of a NumPy scalar (and the
    functions that call them, ``np.transpose(s)``) return a scalar, as immutable as it is: an
    augmented assignment rebinds the name. mutad returned a 0-d array, which the assignment
    wrote in place, changing the value under the other name (a wrong value and gradient), or
    a read-only view, which it refused."""
    f = written_through_another_name(SCALAR_RESULTS[name])
    x = np.array([0.3, -1.2, 2.0])
    before = x.tobytes()
    value, grad = mutad.value_and_grad(f)(x)
    assert value == f(x.copy()) and x.tobytes() == before
    if "float32" not in name:  # (finite differences of float32 roundings are not its derivative)
        mutad.check_grads(f, x, order=2)
    y, dy = mutad.jvp(f, (x,), (np.ones(3),))
    assert y == value and np.isclose(dy, grad.sum())
    assert mutad.grad(f, replay=True)(x).tolist() == grad.tolist()


def test_a_real_arrays_conj_is_the_array_itself():
    """``x.conj()`` and ``x.conjugate()`` of a real array return the array itself (as NumPy's
    methods do; ``np.conj(x)`` is a new array): a write into it is a write into ``x``."""
    def f(x):
        y = x.conj()
        y *= 2.0
        x.conjugate()[0] = 5.0
        return (x * x).sum() * (2.0 if x.conj() is x else 3.0) + np.conj(x).sum()

    x = np.array([0.3, -1.2, 2.0])
    value, grad = mutad.value_and_grad(f)(x)
    assert value == f(x.copy())
    assert grad.tolist() == [0.0, 2 * 2 * 2 * 2 * -1.2 + 2.0, 2 * 2 * 2 * 2 * 2.0 + 2.0]
    assert mutad.jvp(f, (x,), (np.ones(3),))[1] == grad.sum()


def test_angle_of_a_real_array_has_numpys_dtype():
    """``np.angle`` of a real float32 array is float32, as NumPy's ``arctan2(0, x)`` gives
    (mutad's was float64), and of an element a NumPy scalar."""
    x = np.array([0.3, -1.2, 2.0], np.float32)
    seen = []

    def f(x):
        a, s = np.angle(x), np.angle(x[1], deg=True)
        seen.append((a.dtype, isinstance(s, np.float32)))
        return (a * x).sum() + s * x[1]

    value, grad = mutad.value_and_grad(f)(x)
    assert value == f(x.copy()) and seen[0] == seen[1] == (np.float32, True)
    assert grad.tolist() == [0.0, np.float32(np.pi) + np.float32(180.0), 0.0]


def test_float_in_code_that_compares_types_by_identity_stays_pythons():
    """Code that may compare a type with ``float`` by identity keeps Python's float, which no
    stand-in passes, and float() of a traced value is refused there, as in a library's code."""
    def f(x):
        v = float(x[0])
        return v * x[1] if type(v) is float else x.sum()

    with pytest.raises(mutad.errors.ConversionError, match=r"float\(\)"):
        mutad.gradient(f, np.array([0.5, 2.0]))
    assert f(np.array([0.5, 2.0])) == 1.0 and "float" not in globals()  # (this module compares so)


def test_a_nested_differentiation_does_not_scan_a_module_for_float_comparisons_again(
        monkeypatch):
    """Regression: a nested differentiation found the mode's float bound in the module (one
    name more) and scanned all of its code again, and so did the outer one after it (one name
    fewer): on every entry, the most of the cost of a second derivative of a small function."""
    import types

    import mutad.core.allocation as allocation

    module = types.ModuleType("a_users_module_with_float")
    exec(compile("import numpy as np\n"
                 "def loss(x):\n"
                 "    return float(2.0) * np.sum(np.sin(x) ** 2)\n",
                 "a_users_module_with_float.py", "exec"), vars(module))
    scans = []
    own_codes = allocation._own_codes
    monkeypatch.setattr(allocation, "_own_codes",
                        lambda namespace: scans.append(namespace) or own_codes(namespace))
    x = np.array([0.3, -1.2])
    mutad.hessian(module.loss, x)
    assert scans.count(vars(module)) == 1
    np.testing.assert_allclose(mutad.hessian(module.loss, x), np.diag(4 * np.cos(2 * x)))
    assert scans.count(vars(module)) == 1 and "float" not in vars(module)


def test_float_stays_pythons_in_a_module_some_code_of_which_compares_it_by_identity():
    """The mode's float is bound as a module's global, which all its code reads: a function the
    differentiation reaches only through a container (not by a name its code reads) that
    compares with ``float`` by identity must see Python's, so the module keeps it."""
    import types

    module = types.ModuleType("a_users_module")
    exec(compile("def is_python_float(v):\n"
                 "    return type(v) is float\n"
                 "CHECKS = {}\n"
                 "def loss(x):\n"
                 "    v = float(x[0])\n"
                 "    assert CHECKS['float'](1.5)\n"
                 "    return v * x[1]\n", "a_users_module.py", "exec"), vars(module))
    module.CHECKS["float"] = module.is_python_float
    with pytest.raises(mutad.errors.ConversionError, match=r"float\(\)"):
        mutad.gradient(module.loss, np.array([0.5, 2.0]))
    assert "float" not in vars(module)
    module.CHECKS["float"] = bool  # no code of it compares now: float() followed
    del module.is_python_float
    np.testing.assert_array_equal(mutad.gradient(module.loss, np.array([0.5, 2.0]))[0],
                                  [2.0, 0.5])
