"""Every MutadError path: raised, names the fix, and leaves the caller's arrays as they were."""

import collections
import dataclasses
import functools
import importlib
import io
import operator
import pickle
import struct
import traceback

import numpy as np
import pytest
import scipy.fftpack
import scipy.linalg
import scipy.signal
import scipy.sparse
import scipy.special
import scipy.stats

import mutad
from mutad import errors


def mutate_then(action):
    """A function that first changes its argument in place, then does ``action``."""

    def f(x):
        x *= 2.0
        x[0] = -1.0
        return action(x)

    return f


HELD = collections.deque([np.zeros(4)])  # allocated before any differentiation, held by a
# deque:
# mutad cannot follow it (one reached by a name is adopted: tests/test_work_buffers.py)


def untraced_setitem(x):
    HELD[0][0] = x[1]
    return HELD[0].sum()


def untraced_out(x):
    np.sin(x, out=HELD[0])
    return HELD[0].sum()


def untraced_augmented(x):
    HELD[0][...] += x
    return HELD[0].sum()


def untraced_function_out(x):
    np.cumsum(x, out=HELD[0])
    return HELD[0].sum()


# made before the differentiation, held by a deque (one reached by a name is followed)
PARTICLES = collections.deque([np.zeros(4, dtype=[("pos", float), ("vel", float)])])


def array_module_buffer(x):
    import array
    values = array.array("d", [0.0] * len(x))
    for i, v in enumerate(x):
        values[i] = v * 2
    return np.asarray(values).sum()


def structured_fields(x):
    PARTICLES[0]["pos"] = x
    return PARTICLES[0]["pos"].sum()


# an integer array a SciPy object holds (a global integer array is stood in for and followed)
GRAPH = scipy.sparse.csr_array(np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 4.0]]))

CASES = [
    # (what the function does after mutating x, error class, words the message must contain)
    (lambda x: x * 2.0, errors.NonScalarOutputError, ["scalar", "sum", "pullback"]),
    (untraced_setitem, errors.UntracedWriteError, ["before the differentiation", "inside"]),
    (untraced_out, errors.UntracedWriteError, ["np.sin", "Allocate it inside"]),
    (untraced_augmented, errors.UntracedWriteError, ["np.add", "Allocate it inside"]),
    (untraced_function_out, errors.UntracedWriteError, ["np.cumsum", "Allocate it inside"]),
    (lambda x: scipy.stats.shapiro(x).statistic, errors.UnsupportedOperationError,
     ["scipy.stats.shapiro", "step by step", "mutad.adjoint"]),
    (lambda x: complex(x[0] * 1j).imag * 2.0, errors.ConversionError, ["complex()"]),
    (lambda x: scipy.special.wrightomega(x).sum(), errors.UnsupportedFunctionError,
     ["scipy.special.wrightomega", "mutad.adjoint"]),
    (lambda x: scipy.special.struve(x, 2.0).sum(), errors.UnsupportedOperationError,
     ["scipy.special.struve", "order", "constant"]),
    (lambda x: scipy.special.hyperu(1.5, x, 0.3).sum(), errors.UnsupportedOperationError,
     ["scipy.special.hyperu", "parameter b", "constant"]),
    (lambda x: np.add(x, 1.0, where=x > 0).sum(), errors.UnsupportedOperationError,
     ["where=", "out=", "np.where"]),
    pytest.param(lambda x: float(np.matrix(x.reshape(2, 2), dtype=np.float32).sum()),
                 errors.ConversionError, ["np.matrix", "float64", "A @ B"],  # numpy.matrixlib
                 # is not numpy.ma: no masked arrays' advice
                 marks=pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")),
    (lambda x: np.ma.masked_less(x, 1.0).torecords() * x[0], errors.UnsupportedOperationError,
     ["MaskedArray.torecords", "m.filled("]),
    # regressions: the advice was generic (a library's conversion; a write into a plain array)
    (lambda x: np.gradient(np.ma.masked_less(x, 1.0)).sum(),
     errors.UnsupportedOperationError, ["np.gradient", "np.where(mask"]),
    (lambda x: np.frompyfunc(lambda a: 2 * a, 1, 1)(x, out=np.empty(4, object)).sum(),
     errors.UnsupportedOperationError, ["np.frompyfunc", "keyword", "np.vectorize"]),
    (structured_fields, errors.UntracedWriteError, ["structured array", "np.zeros(n, dtype=",
                                                    "array of its own"]),
    # a plain array's method converts its traced argument: the function dispatches to mutad
    (lambda x: GRAPH.indices.choose([x, 2 * x, 3 * x, 4 * x]).sum(), errors.ConversionError,
     ["GRAPH.indices.choose()", "np.choose(GRAPH.indices, ...)"]),
    # regressions: an AttributeError of Python's, and advice that did not fit the call
    (lambda x: (x * 2).__array_interface__["shape"][0] * x.sum(),
     errors.UnsupportedAttributeError, ["__array_interface__", "x.shape", "mutad.adjoint"]),
    (lambda x: x.sum() * len(x.tobytes()), errors.ConversionError,
     ["x.tobytes()", "mutad.stop_gradient(x).tobytes()"]),
    (lambda x: pickle.dump(x * 2, io.BytesIO()) or x.sum(), errors.ConversionError,
     ["pickle.dump()", "copy.deepcopy(x)"]),
    # bytearray(x), which asks an array that hands out no buffer for an index, then iterates
    # it: Python's TypeError of a float element's index
    (lambda x: x.sum() + len(bytearray(x)), errors.ConversionError,
     ["bytearray()", "mutad.stop_gradient(x).tobytes()"]),
    (lambda x: x.sum() + len(bytearray(np.ones(3))), errors.UnsupportedOperationError,
     ["bytearray(x.tobytes())"]),
    (lambda x: (x * 2).setflags(align=False), errors.UnsupportedOperationError,
     ["x.setflags", "mutad.stop_gradient(x).copy()"]),
    (lambda x: x.sum() + len(memoryview(x)), errors.ConversionError,
     ["memoryview: a bytes-like object", "hands out no buffer",
      "memoryview(mutad.stop_gradient(x))"]),
    (lambda x: struct.unpack("2d", struct.pack("2d", *x[:2]))[0] + x.sum(),
     errors.ConversionError, ["struct.pack()", "bytes, which have no derivative"]),
    (array_module_buffer, errors.UntracedWriteError, ["array.array", "Collect traced values"]),
    # (code that compares a type with np.matrix by identity keeps NumPy's np.asmatrix)
    pytest.param(lambda x: (np.asmatrix(x.reshape(2, 2)) * 2).sum() * (type(x) is not np.matrix),
                 errors.ConversionError, ["np.asmatrix()", "isinstance(m, np.matrix)", "A @ B"],
                 marks=pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")),
]


def test_the_fixes_advised_for_memory_bytes_and_flags_work():
    """What the errors above advise runs, and the gradient flows through the rest."""
    def f(x):
        y = x * 2
        key = mutad.stop_gradient(y).tobytes()
        saved = pickle.loads(pickle.dumps(mutad.stop_gradient(y)))
        locked = mutad.stop_gradient(y).copy()
        locked.setflags(write=False)
        if y.shape != (3,) or y.strides != (8,) or not y.flags.c_contiguous or len(key) != 24:
            raise ValueError("not NumPy's layout")
        return (y * y).sum() + (saved * locked).sum()

    x = np.array([0.5, -1.0, 2.0])
    before = x.tobytes()
    assert np.array_equal(mutad.gradient(f, x)[0], 8.0 * x) and x.tobytes() == before
    replaying = mutad.grad(f, replay=True)
    for _ in range(2):
        assert np.array_equal(replaying(x), 8.0 * x) and x.tobytes() == before



@pytest.mark.parametrize("action, error, words", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_error_names_the_fix_and_restores_arguments(action, error, words):
    x = np.linspace(0.5, 1.5, 4)
    before = x.tobytes()
    with pytest.raises(error) as caught:
        mutad.gradient(mutate_then(action), x)
    assert isinstance(caught.value, mutad.MutadError)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert x.tobytes() == before


@pytest.mark.parametrize("action, error, words", [
    case for case in CASES if any("bytearray(" in word for word in case[2] or ())])
def test_bytearray_of_a_forward_mode_value_is_refused_as_in_reverse_mode(action, error, words):
    """A forward-mode value has no ``__index__``, which bytearray(x) asks first: Python then
    iterates it, and its iteration refuses as reverse mode's index does, not with Python's
    TypeError of an element's index."""
    x = np.linspace(0.5, 1.5, 4)
    before = x.tobytes()
    with pytest.raises(error) as caught:
        mutad.jvp(mutate_then(action), (x,), (np.ones(4),))
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert x.tobytes() == before


def test_a_complex_valued_function_has_no_gradient():
    z = np.ones(2, complex)
    before = z.tobytes()
    with pytest.raises(errors.ComplexInputError, match="real-valued"):
        mutad.gradient(lambda z: z.sum(), z)
    with pytest.raises(errors.ComplexInputError, match="np.abs"):
        mutad.gradient(lambda a, c: (a * c).sum(), np.ones(2), 1j)
    assert z.tobytes() == before


def test_a_rule_written_for_real_values_refuses_complex_ones():
    z = np.array([[2.0, 1j], [-1j, 3.0]])
    before = z.tobytes()
    with pytest.raises(errors.ComplexInputError, match="np.nanvar"):
        mutad.gradient(lambda z: np.nanvar(z), z)
    with pytest.raises(errors.ComplexInputError, match="np.nanvar"):
        mutad.jvp(lambda z: np.nanvar(z), (z,), (np.ones_like(z),))
    with pytest.raises(errors.ComplexInputError, match="np.cov"):
        mutad.gradient(lambda z: np.abs(np.cov(z)).sum(), z)
    assert z.tobytes() == before


def test_unknown_policy():
    x = np.ones(2)
    with pytest.raises(errors.PolicyError, match="checkpoint"):
        mutad.gradient(lambda x: x.sum(), x, policy="fastest")


def test_traced_array_escaping_its_differentiation():
    leaked = collections.deque()  # where mutad does not look (a list is left NumPy's values)

    def f(x):
        leaked.append(x * 2.0)
        return x.sum()

    mutad.gradient(f, np.ones(2))
    with pytest.raises(mutad.MutadError, match="outside the differentiation"):
        leaked[0] + 1.0


def test_every_error_class_is_documented():
    for name in dir(errors):
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.MutadError):
            assert cls.__doc__ and len(cls.__doc__) > 40, name


W = np.empty(4)  # allocated before any differentiation, reached by a name
M = np.ones((4, 4))


def refill_constant(x):
    for k in range(3):
        W[:] = np.cos(k + np.arange(x.size))  # the same work array, refilled
        x = x * W
    return x.sum()


def reuse_matrix(x):
    M[...] = 1.0
    y = np.dot(M, x)
    M[...] += 1.0  # the product's pullback needs the first M
    return (np.dot(M, y)).sum()


@pytest.mark.parametrize("f", [refill_constant, reuse_matrix], ids=lambda f: f.__name__)
def test_overwriting_a_global_a_record_read_is_followed(f):
    """A work array made before the call and reached by a name, refilled after a record read
    it: the write adopts its memory (the reverse pass puts its bytes back before that record
    runs), and it is left as NumPy's run leaves it."""
    x = np.linspace(0.5, 1.5, 4)
    before, work = x.tobytes(), (W.copy(), M.copy())
    f(x.copy())
    left = (W.tobytes(), M.tobytes())
    W[...], M[...] = work
    mutad.gradient(f, x)
    assert x.tobytes() == before and (W.tobytes(), M.tobytes()) == left
    mutad.check_grads(f, x)


def test_overwriting_a_constant_held_in_a_deque_a_record_reads_is_refused():
    held = collections.deque([np.ones((4, 4))])  # reached through a deque: not followed

    def f(x):
        y = np.dot(held[0], x)
        held[0][...] += 1.0
        return (np.dot(held[0], y)).sum()

    x = np.linspace(0.5, 1.5, 4)
    before = x.tobytes()
    with pytest.raises(errors.ConstantModifiedError, match="Allocate it inside"):
        mutad.gradient(f, x)
    assert x.tobytes() == before and held[0].tolist() == np.ones((4, 4)).tolist()


def test_constants_are_writable_again_after_the_gradient():
    w = np.ones(3)
    mutad.gradient(lambda x: (x * w).sum(), np.ones(3))
    w[0] = 2.0
    _, back = mutad.pullback(lambda x: x * w, np.ones(3))
    with pytest.raises(ValueError):
        w[0] = 3.0  # back still needs w
    del back
    w[0] = 3.0


def test_constants_only_copied_into_a_traced_array_stay_writable():
    t = np.linspace(0.0, 1.0, 4)

    def f(x):
        work = np.empty(4)
        total = np.zeros_like(x)
        for k in range(3):
            work[:] = np.cos(k * t)   # refilled: only ever copied into total, never read later
            total[:] = work
            total += x * k
        return total.sum()

    assert np.allclose(mutad.gradient(f, np.ones(4))[0], 2.0)


# ----------------------------------------------------------------------------------------------
# Constants a record reads are protected as memory, not as the view object it was handed


def _constant_views():
    S = np.array([1.0, 2.0, 3.0, 4.0])
    inner = S[1:]
    return S, inner


def test_writing_the_owner_of_a_constant_view_is_followed():
    """The owner, reached by a name, written after a record read a view of it: the write
    adopts its memory, whose bytes the reverse pass puts back before that record runs."""
    S = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        y = x[:2] * S[::2]
        S[:] = 0
        return (y * y).sum()

    for policy in ("restore", "checkpoint"):
        x = np.ones(4)
        assert mutad.gradient(f, x, policy=policy)[0].tolist() == [2.0, 18.0, 0.0, 0.0]
        assert x.tobytes() == np.ones(4).tobytes()
        assert S.tolist() == [0.0] * 4 and S.flags.writeable  # as NumPy's run leaves it
        S[:] = [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("write", [
    lambda S, inner, view: S.__setitem__(slice(None), 0.0),        # the owner
    lambda S, inner, view: S[1:].__setitem__(0, 9.0),              # a view made afterwards
    lambda S, inner, view: view.__setitem__(0, 9.0),               # the view read
    lambda S, inner, view: view[1:].__setitem__(0, 9.0),           # a view of it
    lambda S, inner, view: np.multiply(S, 2.0, out=S),             # out=
], ids=["owner", "later-view", "view-read", "view-of-view-read", "out"])
def test_every_way_to_the_memory_of_a_constant_view_is_followed(write):
    S, inner = _constant_views()
    write(S, inner, inner[::2])  # NumPy's run of the write
    left = S.tolist()
    S[:] = [1.0, 2.0, 3.0, 4.0]

    def f(x):
        view = inner[::2]
        y = x * view
        write(S, inner, view)
        return (y * y).sum()

    assert mutad.gradient(f, np.ones(2))[0].tolist() == [8.0, 32.0]
    assert S.tolist() == left
    assert S.flags.writeable and inner.flags.writeable and inner[::2].flags.writeable


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_writing_a_constant_through_a_view_made_before_is_caught_before_the_replay(policy):
    S = np.array([1.0, 2.0, 3.0, 4.0])
    earlier = collections.deque([S[::-1]])  # NumPy does not make views made before read-only
    # with their owner

    def f(x):
        y = x * S[:2]
        earlier[0][:] = 0.0  # in a deque: not a stand-in of the mode (allocation.Preexisting)
        return (y * y).sum()

    x = np.array([0.5, 1.5])
    before = x.tobytes()
    with pytest.raises(errors.ConstantModifiedError, match="view of its memory made before"):
        mutad.gradient(f, x, policy=policy)
    assert x.tobytes() == before
    assert S.flags.writeable and earlier[0].flags.writeable


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_writing_a_constant_through_a_view_the_function_reaches_is_followed(policy):
    S = np.array([1.0, 2.0, 3.0, 4.0])
    earlier = S[::-1]  # a stand-in in the mode: a write adopts the memory it views

    def f(x):
        y = x * S[:2]
        earlier[:] = 0.0
        return (y * y).sum()

    x = np.array([0.5, 1.5])
    before = x.tobytes()
    assert mutad.gradient(f, x, policy=policy)[0].tolist() == [1.0, 12.0]
    assert x.tobytes() == before and S.tolist() == [0.0] * 4  # as NumPy's run leaves it
    assert S.flags.writeable and earlier.flags.writeable


def test_a_pullback_checks_its_constants_when_called():
    S = np.array([1.0, 2.0, 3.0])
    earlier = S[:]
    y, back = mutad.pullback(lambda x: x * S, np.ones(3))
    earlier[1] = 7.0
    with pytest.raises(errors.ConstantModifiedError):
        back(np.ones(3))
    assert S.flags.writeable


def test_constants_read_through_fresh_slices_on_every_step_are_summed_once():
    c = np.linspace(0.5, 1.5, 6)

    def f(x):
        for _ in range(50):
            x = x[1:] * c[:-1] + x[:-1] * c[1:] * 0.5 + np.concatenate((x[:1], x[:0]))[:0].sum()
            x = np.concatenate((x, x[-1:]))
        return (x * x).sum()

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, np.linspace(-1.0, 1.0, 6), policy=policy)
    assert c.flags.writeable


# ----------------------------------------------------------------------------------------------
# An argument's memory reached through a global


def alias_programs():
    """Programs that read, from a global, an array sharing memory with their argument, and
    write into the argument before or after: ``(name, f, argument, owner)``."""
    base = np.arange(1.0, 5.0)
    window = base[1:3]   # a global view overlapping the argument base[:2]

    def write_then_read(x):
        x *= 2.0
        return (x * window).sum()

    def read_then_write(x):
        y = (x * window).sum()
        x *= 2.0
        return y + x.sum()

    def copy_alias(x):
        x[0] = 1.0
        w = np.zeros(2)
        w[:] = window    # plain values of the argument's memory into a constant
        return (w * x).sum()

    whole = np.arange(1.0, 4.0)   # the argument is the owner; the global a view of it
    head = whole[:2]

    def owner_read_then_write(x):
        y = (x[:2] * head).sum()  # head is read-only from here on, and so is its owner
        x *= 2.0
        return y + x.sum()

    def owner_write_then_read(x):
        x *= 2.0
        return (x[:2] * head).sum()

    return [(f.__name__, f, argument, owner) for f, argument, owner in (
        (write_then_read, base[:2], base), (read_then_write, base[:2], base),
        (copy_alias, base[:2], base),
        (owner_read_then_write, whole, whole), (owner_write_then_read, whole, whole))]


@pytest.mark.parametrize("name, f, argument, owner", alias_programs(),
                         ids=[p[0] for p in alias_programs()])
@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_writing_an_argument_whose_memory_a_global_views_is_refused(name, f, argument, owner,
                                                                    policy):
    """Regression: a global viewing the argument's memory, read as a constant while the
    argument was written, gave NumPy's read-only ValueError in the reverse pass, a
    ReadOnlyError blaming np.diagonal, or, under the checkpoint policy, a wrong gradient."""
    before = owner.tobytes()
    with pytest.raises(errors.ConstantModifiedError, match="shares"):
        mutad.gradient(f, argument, policy=policy)
    assert owner.tobytes() == before and owner.flags.writeable
    if "write_then_read" in name:  # forward mode works on a copy: the global holds old values
        with pytest.raises(errors.ConstantModifiedError, match="wrote into"):
            mutad.jvp(f, (argument,), (np.ones(argument.shape),))
        assert owner.tobytes() == before


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
def test_a_global_view_apart_from_the_argument_it_shares_an_owner_with(policy):
    """Regression: the argument is ``G[4:]`` and ``f`` reads ``G[:2]``, other bytes of the
    same owner, as a constant: freezing the constant made the owner read-only, and the write
    into the argument (or its undo in the reverse pass) raised NumPy's read-only ValueError.
    The owner stays writable; a change of the bytes read is still refused, and put back."""
    G = np.arange(8.0)
    before = G.tobytes()

    def write_then_read(x):
        x *= 2.0
        return (x ** 2).sum() + (G[:2] * x[:2]).sum()

    def read_then_write(x):
        y = (G[:2] * x[:2]).sum()
        x *= 2.0
        x[1:3] = np.sin(x[:2])
        return (x ** 2).sum() + y

    for f in (write_then_read, read_then_write):
        # the argument in memory of its own: the same program, G[:2] a constant as before
        expected = mutad.gradient(f, G[4:].copy(), policy=policy)[0]
        assert mutad.gradient(f, G[4:], policy=policy)[0].tobytes() == expected.tobytes()
        assert G.tobytes() == before and G.flags.writeable
        mutad.check_grads(f, G[4:], policy=policy)
        assert G.tobytes() == before

    def changes_what_it_read(x):
        y = write_then_read(x)
        G[0] = 100.0
        return y

    # G[0], apart from the argument, written after a record read it: adopted, as the
    # argument's memory, and put back before that record runs in the reverse pass
    expected = mutad.gradient(write_then_read, G[4:].copy(), policy=policy)[0]
    got = mutad.gradient(changes_what_it_read, G[4:], policy=policy)[0]
    assert got.tobytes() == expected.tobytes()
    assert G.tobytes() == before and G.flags.writeable


def test_a_global_viewing_an_argument_that_is_not_written_is_a_constant():
    """Reading the argument's values through a closure without writing them is the usual
    idiom ``gradient(lambda y: g(y, x), x)``: the closure's array is a constant."""
    x = np.array([0.5, -1.0, 2.0])
    before = x.tobytes()
    assert np.array_equal(mutad.gradient(lambda y: (np.sin(y) * x).sum(), x)[0],
                          np.cos(x) * x)
    assert np.array_equal(mutad.jvp(lambda y: (y * x).sum(), (x,), (np.ones(3),))[1], x.sum())
    assert x.tobytes() == before


def test_an_operation_reading_a_global_view_of_the_memory_it_writes():
    """Regression: ``x += window``, ``window`` a global over ``x``'s memory, was undone under
    the restore policy by ``x -= window``, which reads the values written: NumPy's read-only
    ValueError in the reverse pass. The constant is read as the write reads it, the write is
    checkpointed, and both policies agree."""
    base = np.arange(1.0, 5.0)
    window = base[1:3]

    def f(x):
        x += window
        return (x * x).sum()

    plain = base.copy()
    plain[:2] += plain[1:3]
    before = base.tobytes()
    for policy in ("restore", "checkpoint"):
        value, (g,) = mutad.value_and_gradient(f, base[:2], policy=policy)
        assert value == (plain[:2] ** 2).sum() and g.tolist() == (2 * plain[:2]).tolist()
        assert base.tobytes() == before


def plain_alias_programs():
    """Programs that read or write, by NumPy alone (no traced value among the operands), a
    global sharing memory with their argument ``base[:3]``: ``(name, f, refused in forward
    mode too)``."""
    base = np.arange(1.0, 6.0)
    G = base[1:4]   # overlaps the argument base[:3]

    def sum_after_write(x):
        x *= 2.0
        return G.sum() + (x ** 2).sum()

    def element_after_write(x):
        x *= 2.0
        return float(G[0]) + (x ** 2).sum()

    def tolist_after_write(x):
        x *= 2.0
        return sum(G.tolist()) + (x ** 2).sum()

    def function_after_write(x):
        x *= 2.0
        return np.dot(G, G) + (x ** 2).sum()

    def setitem(x):
        G[0] = 5.0
        return (x ** 2).sum()

    def out_keyword(x):
        np.multiply(G, 2.0, out=G)
        return (x ** 2).sum()

    def ufunc_at(x):
        np.add.at(G, [0, 0], 1.0)
        return (x ** 2).sum()

    def copyto(x):
        np.copyto(G, 0.0)
        return (x ** 2).sum()

    def fill(x):
        G.fill(3.0)
        return (x ** 2).sum()

    programs = (sum_after_write, element_after_write, tolist_after_write, function_after_write,
                setitem, out_keyword, ufunc_at, copyto, fill)
    return base, [(f.__name__, f) for f in programs]


@pytest.mark.parametrize("name", [name for name, _ in plain_alias_programs()[1]])
def test_a_global_view_of_the_argument_read_or_written_by_numpy_alone_is_refused(name):
    """Regression: a global viewing the argument's memory, read by NumPy alone after the
    argument was written (``G.sum()``, ``float(G[0])``), gave a gradient without the
    derivative through the write (and forward mode, on a copy, NumPy's value before it); one
    written by NumPy alone (``G[0] = 5.0``, ``out=G``) changed the argument behind the
    differentiation's back: a wrong gradient, and the caller's array left changed."""
    base, programs = plain_alias_programs()
    f = dict(programs)[name]
    before = base.tobytes()
    modes = {"gradient": lambda: mutad.gradient(f, base[:3]),
             "replayed": lambda: mutad.grad(f, replay=True)(base[:3]),
             "checkpoint": lambda: mutad.gradient(f, base[:3], policy="checkpoint"),
             "jvp": lambda: mutad.jvp(f, (base[:3],), (np.ones(3),))}
    for mode, run in modes.items():
        with pytest.raises(errors.ConstantModifiedError, match="shares memory"):
            run()
        assert base.tobytes() == before, mode


def test_a_global_view_apart_from_the_argument_written_or_read_by_numpy_alone():
    """What NumPy alone reads of a global before the argument is written is a constant; a
    plain write into other bytes of the argument's owner is followed and written back, as the
    argument's own bytes are."""
    G = np.arange(6.0)

    def f(x):
        s = G[:4].sum()       # read before the write: a constant
        x *= 2.0
        G[0] = 10.0           # apart from the argument G[3:]
        return s + (x ** 2).sum() + G[:2].sum()

    expected = 8 * G[3:]
    assert np.array_equal(mutad.gradient(f, G[3:])[0], expected)
    assert G.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def routed_alias_programs():
    """Programs that give a global sharing memory with their argument ``base[:4]`` to a routed
    library function, which converts it itself (``np.asarray``: no NumPy protocol sees it):
    read after the argument was written, or written into by the library."""
    import scipy.ndimage
    import scipy.signal
    import scipy.sparse

    base = np.arange(1.0, 7.0)
    G = base[:4]    # the argument's memory
    A = G.reshape(2, 2)
    F = G.reshape((2, 2), order="F")
    H = np.ones(4)  # apart from the argument
    b = np.array([1.0, 2.0])

    def solve(x):
        x *= 2.0
        return scipy.linalg.solve(A, b).sum() + (x ** 2).sum()

    def gaussian_filter(x):
        x *= 2.0
        return scipy.ndimage.gaussian_filter(G, 1.0).sum() + (x ** 2).sum()

    def lfilter(x):
        x *= 2.0
        return scipy.signal.lfilter([1.0, 0.5], [1.0], G).sum() + (x ** 2).sum()

    def csr_matrix(x):
        x *= 2.0
        return scipy.sparse.csr_matrix(A).sum() + (x ** 2).sum()

    def routed_method(x):
        x *= 2.0
        return scipy.stats.norm.logpdf(G).sum() + (x ** 2).sum()

    def overwrite_a(x):   # (LAPACK's order: SciPy writes into it)
        return scipy.linalg.solve(F, b, overwrite_a=True).sum() + (x ** 2).sum()

    def overwrite_by_position(x):
        return scipy.linalg.lu_factor(F, True)[0].sum() + (x ** 2).sum()

    def output(x):
        scipy.ndimage.gaussian_filter(H, 1.0, output=G)
        return (x ** 2).sum()

    programs = (solve, gaussian_filter, lfilter, csr_matrix, routed_method, overwrite_a,
                overwrite_by_position, output)
    return base, [(f.__name__, f) for f in programs]


@pytest.mark.parametrize("name", [name for name, _ in routed_alias_programs()[1]])
def test_a_global_view_of_the_argument_given_to_a_routed_function_is_refused(name):
    """Regression: a global viewing the argument's memory given to a routed SciPy function
    (``scipy.linalg.solve(G, b)``) after the argument was written gave a gradient without the
    derivative through the write (and forward mode, on a copy, SciPy's value of the old
    values): SciPy converts the stand-in itself, which no NumPy protocol sees. Written by the
    library (``overwrite_a=True``, ``output=G``), it changed the argument behind the
    differentiation's back."""
    base, programs = routed_alias_programs()
    f = dict(programs)[name]
    before = base.tobytes()
    replayed = mutad.grad(f, replay=True)
    modes = {"gradient": lambda: mutad.gradient(f, base[:4]),
             "replayed": lambda: replayed(base[:4]),
             "checkpoint": lambda: mutad.gradient(f, base[:4], policy="checkpoint"),
             "jvp": lambda: mutad.jvp(f, (base[:4],), (np.ones(4),))}
    for mode, run in [*modes.items(), ("replayed again", modes["replayed"])]:
        with pytest.raises(errors.ConstantModifiedError, match="shares memory"):
            run()
        assert base.tobytes() == before, mode


def test_a_global_view_given_to_a_routed_function_before_the_write_or_apart_from_it():
    """What a routed function reads of a global before the argument is written is a constant,
    as is what it reads of memory apart from the argument, after the write too."""
    import scipy.ndimage

    G = np.arange(1.0, 7.0)
    b = np.array([1.0, 2.0])

    def f(x):
        s = scipy.linalg.solve(G[2:].reshape(2, 2), b).sum()   # before the write
        x *= 2.0
        t = scipy.ndimage.gaussian_filter(G[:2], 1.0).sum()    # apart from the argument
        return s + t + (x ** 2).sum()

    before = G.tobytes()
    expected = 8 * G[2:]
    assert np.array_equal(mutad.gradient(f, G[2:])[0], expected)
    replayed = mutad.grad(f, replay=True)
    for _ in range(3):
        assert np.array_equal(replayed(G[2:]), expected)
    assert np.array_equal(mutad.gradient(f, G[2:], policy="checkpoint")[0], expected)
    assert np.array_equal(mutad.jvp(f, (G[2:],), (np.ones(4),))[1], expected.sum())
    assert G.tobytes() == before


def test_another_thread_writing_a_constant_fails_while_the_gradient_runs():
    import threading

    w = np.array([1.0, 2.0, 3.0])
    failures = []

    def writer():
        try:
            w[0] = 5.0
        except ValueError as error:
            failures.append(error)

    def f(x):
        y = x * w
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join()
        return y.sum()

    assert mutad.gradient(f, np.ones(3))[0].tolist() == [1.0, 2.0, 3.0]
    assert len(failures) == 1 and "read-only" in str(failures[0])
    w[0] = 5.0  # writable again once the gradient returned


# Every class derives from the built-in a Python user expects, and its traceback shows the
# user's line that caused it


BUILT_INS = {
    errors.NonScalarOutputError: TypeError,
    errors.UntracedWriteError: TypeError,
    errors.ConversionError: TypeError,
    errors.EscapedTracerError: TypeError,
    errors.UnsupportedArgumentError: TypeError,
    errors.ComplexInputError: TypeError,
    errors.RuleError: TypeError,
    errors.InvalidArgumentError: ValueError,
    errors.PolicyError: ValueError,
    errors.ArgnumsError: ValueError,
    errors.ConstantModifiedError: ValueError,
    errors.ReadOnlyError: ValueError,
    errors.UnsupportedArrayError: TypeError,
    errors.NotPositiveDefiniteError: ValueError,
    errors.UnsupportedFunctionError: NotImplementedError,
    errors.UnsupportedOperationError: NotImplementedError,
    errors.UnsupportedAttributeError: AttributeError,
    errors.PullbackReusedError: RuntimeError,
    errors.GradientCheckError: AssertionError,
    errors.NonFiniteError: FloatingPointError,
}


def test_every_class_derives_from_its_built_in():
    classes = {c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.MutadError)} - {errors.MutadError}
    assert classes == set(BUILT_INS)
    assert mutad.testing.GradientCheckError is errors.GradientCheckError


# allocated before any differentiation, held by deques: mutad cannot follow them
ELEMENT_BUFFER = collections.deque([np.ones(3)])
UFUNC_BUFFER = collections.deque([np.ones(2)])
CONSTANT = collections.deque([np.ones((2, 2))])


def write_element(x):
    ELEMENT_BUFFER[0][0] = x[1]  # CAUSE
    return ELEMENT_BUFFER[0].sum()


def write_ufunc(x):
    np.sin(x, out=UFUNC_BUFFER[0])  # CAUSE
    return UFUNC_BUFFER[0].sum()


def convert(x):
    y = complex(x[1] * 1j).imag  # CAUSE
    return y


def call_scipy(x):
    return scipy.stats.genhyperbolic.logpdf(x, 0.5, 1.5, 0.3).sum()  # CAUSE


def no_rule(x):
    return scipy.special.tklmbda(x, 0.2).sum()  # CAUSE


def unsupported(x):
    return np.add(x, 1.0, where=x > 0).sum()  # CAUSE


def overwrite_constant(x):
    y = np.dot(CONSTANT[0], x)
    CONSTANT[0][...] += 1.0  # CAUSE
    return np.dot(CONSTANT[0], y).sum()


def nested_conversion(x):
    return mutad.gradient(lambda y: complex(y[0] * x[0] * 1j).imag, x)[0].sum()  # CAUSE


@mutad.inplace_adjoint(writes=("a",))
def scale_(a):
    a *= 2.0
    return a


@scale_.rule
def _scale_rule(a):
    scale_(a)  # returns no back function: a RuleError


def bad_rule(x):
    return scale_(x).sum()  # CAUSE


def not_a_pair(x):
    return x.sum()


@pytest.mark.parametrize("f, error", [
    (write_element, errors.UntracedWriteError),
    (write_ufunc, errors.UntracedWriteError),
    (convert, errors.ConversionError),
    (call_scipy, errors.ConversionError),
    (no_rule, errors.UnsupportedFunctionError),
    (unsupported, errors.UnsupportedOperationError),
    (overwrite_constant, errors.ConstantModifiedError),
    (nested_conversion, errors.ConversionError),
    (bad_rule, errors.RuleError),
], ids=lambda c: getattr(c, "__name__", ""))
@pytest.mark.parametrize("mode", ["gradient", "jvp"])
def test_traceback_shows_the_users_line(f, error, mode):
    if mode == "jvp" and f in (overwrite_constant, nested_conversion, bad_rule):
        pytest.skip("reverse mode only")
    x = np.linspace(0.5, 1.5, 2)
    before = x.tobytes()
    with pytest.raises(error) as caught:
        if mode == "gradient":
            mutad.gradient(mutate_then(f), x)
        else:
            mutad.jvp(mutate_then(f), (x,), (np.ones(2),))
    assert isinstance(caught.value, BUILT_INS[error])
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(frame.name == f.__name__ and "# CAUSE" in frame.line for frame in frames), frames
    assert x.tobytes() == before


def raises_at_this_line(error, action):
    """Run ``action`` (a lambda written on the line that makes the call) and check the error's
    traceback holds that line."""
    with pytest.raises(error) as caught:
        action()
    assert isinstance(caught.value, BUILT_INS[error])
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(frame.filename == __file__ and frame.name == "<lambda>"
               and frame.lineno == action.__code__.co_firstlineno for frame in frames), frames
    return caught.value


def test_errors_raised_by_the_api_show_the_calling_line():
    x = np.ones(2)
    raises_at_this_line(errors.NonScalarOutputError, lambda: mutad.gradient(lambda x: x, x))
    raises_at_this_line(errors.NonScalarOutputError,
                        lambda: mutad.gradient(not_a_pair, x, has_aux=True))
    raises_at_this_line(errors.ComplexInputError, lambda: mutad.gradient(np.sum, x + 1j))
    raises_at_this_line(errors.PolicyError, lambda: mutad.gradient(not_a_pair, x, policy="no"))
    raises_at_this_line(errors.ArgnumsError, lambda: mutad.gradient(not_a_pair, x, argnums=3))
    raises_at_this_line(errors.InvalidArgumentError, lambda: mutad.jvp(not_a_pair, x, x))
    raises_at_this_line(errors.InvalidArgumentError,
                        lambda: mutad.jvp(not_a_pair, (x,), (np.ones(3),)))
    raises_at_this_line(errors.InvalidArgumentError,
                        lambda: mutad.linalg.cholesky_(np.ones((2, 3))))
    raises_at_this_line(errors.InvalidArgumentError, lambda: mutad.check_grads(
        not_a_pair, x, order=3))
    raises_at_this_line(errors.UnsupportedArgumentError,
                        lambda: mutad.gradient(lambda x, g: x.sum(), x, (y for y in [x])))
    raises_at_this_line(errors.NotPositiveDefiniteError, lambda: mutad.linalg.cholesky_(
        np.array([[1.0, 2.0], [2.0, 1.0]])))
    _, back = mutad.pullback(lambda x: x * 2.0, x)
    back(np.ones(2))
    raises_at_this_line(errors.PullbackReusedError, lambda: back(np.ones(2)))
    _, back = mutad.pullback(lambda x: x * 2.0, x)
    raises_at_this_line(errors.InvalidArgumentError, lambda: back(np.ones(3)))
    leaked = collections.deque()
    mutad.gradient(lambda x: leaked.append(x * 2.0) or x.sum(), x)
    raises_at_this_line(errors.EscapedTracerError, lambda: leaked[0] + 1.0)
    leaked.clear()
    mutad.jvp(lambda x: leaked.append(x * 2.0) or x.sum(), (x,), (x,))
    raises_at_this_line(errors.EscapedTracerError, lambda: leaked[0] + 1.0)

    wrong = mutad.adjoint(lambda x: x * 2.0)

    @wrong.rule
    def _wrong_rule(x):
        return x * 2.0, lambda dy: (-2.0 * dy,)

    raises_at_this_line(errors.GradientCheckError, lambda: mutad.check_grads(
        lambda x: wrong(x).sum(), x))
    assert x.tobytes() == np.ones(2).tobytes()


def test_messages_name_what_the_user_wrote_and_the_mutad_equivalent():
    x = np.linspace(0.5, 1.5, 2)
    def copy_without_the_mode(x):
        numpy_itself = importlib.import_module("numpy")  # the allocation mode does not see it

        return numpy_itself.array(x).sum()

    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(copy_without_the_mode, x)
    assert "numpy_itself.array()" in str(caught.value) and "np.asarray" not in str(caught.value)
    assert "x.copy()" in str(caught.value)
    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(call_scipy, x)
    assert "scipy.stats.genhyperbolic" in str(caught.value) and "mutad.adjoint" in str(caught.value)

    class Held:  # SciPy's expm kept where the allocation mode does not rebind names
        expm = staticmethod(scipy.linalg.expm)

    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(lambda x: Held.expm(x[:, None] * x).sum(), x)
    assert "Held.expm" in str(caught.value)
    assert "mutad.scipy.linalg.expm" in str(caught.value)
    with pytest.raises(errors.ConversionError, match="stop_gradient"):
        mutad.gradient(lambda x: complex(x[0] * 1j).imag, x)


def test_integers_of_a_traced_value_are_numpys_with_no_gradient():
    """``round(x[0])``, ``int()``, ``math.floor``/``ceil``/``trunc`` of a traced scalar (a count
    or an index: ``int(T / dt) + 1``) are NumPy's Python ints; their derivative is zero, so the
    rest of the gradient flows. (``round()`` once raised a plain TypeError.)"""
    import math

    x = np.array([1.5, 2.25])
    before = x.tobytes()
    f = lambda x: (round(x[0]) + int(x[1]) + math.floor(x[1]) + math.ceil(x[1])  # noqa: E731
                   + math.trunc(x[0])) * x[1]
    assert mutad.gradient(f, x)[0].tolist() == [0.0, f(x) / x[1]]
    assert mutad.jvp(f, (x,), (np.ones(2),))[1] == f(x) / x[1]
    assert x.tobytes() == before
    # round() with ndigits is np.round, as for NumPy's scalars; an array has no round(), and
    # float() is Python's float followed as .item() is (not a decision: its derivative flows)
    g = mutad.gradient(lambda x: np.round(x).sum() + round(x[1], 1) * x[0], x)[0]
    assert g.tolist() == [round(2.25, 1), 0.0]
    with pytest.raises(TypeError, match="__round__"):
        mutad.gradient(lambda x: round(x).sum(), x)
    assert mutad.gradient(lambda x: float(x[0]) * x[1], x)[0].tolist() == [2.25, 1.5]


def test_a_read_work_array_refilled_through_a_plain_view_is_explained():
    import scipy.ndimage

    data = np.arange(5.0)

    def f(x):
        w = np.zeros(5)
        s = (w * x).sum()  # w read by a recorded operation: its values are needed
        scipy.ndimage.generic_filter(data, np.mean, 3, output=w)  # into np.asarray(w)
        return s + (w * x).sum()

    x = np.ones(5)
    with pytest.raises(errors.ConstantModifiedError, match="allocated in the differentiated "
                       "function was read") as caught:
        mutad.gradient(f, x)
    assert "np.empty_like" in str(caught.value) and x.tolist() == [1.0] * 5


def test_tracebacks_leave_out_mutads_frames(monkeypatch):
    """As JAX's: the traceback runs from the caller's line to the line of f that caused the
    error, with no frame of mutad's between them but the one that re-raises; a note says so,
    and MUTAD_TRACEBACKS=full shows every frame."""
    import os

    import mutad.core.debug

    package = os.path.dirname(mutad.__file__)

    def f(x):
        return complex(x[0] * 1j).imag * x.sum()  # CAUSE

    for call in (lambda: mutad.gradient(f, np.ones(2)), lambda: mutad.grad(f)(np.ones(2)),
                 lambda: mutad.jvp(f, (np.ones(2),), (np.ones(2),)),
                 lambda: mutad.grad(f, replay=True)(np.ones(2))):
        with pytest.raises(errors.ConversionError) as caught:
            call()
        frames = traceback.extract_tb(caught.value.__traceback__)
        ours = [frame for frame in frames if frame.filename.startswith(package)]
        assert [frame.name for frame in ours] == ["calling"], frames
        assert "# CAUSE" in frames[-1].line
        if hasattr(caught.value, "add_note"):  # Python 3.11 and newer
            assert mutad.core.debug.HIDDEN_NOTE in caught.value.__notes__
    monkeypatch.setenv("MUTAD_TRACEBACKS", "full")
    with pytest.raises(errors.ConversionError) as caught:
        mutad.gradient(f, np.ones(2))
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert len([frame for frame in frames if frame.filename.startswith(package)]) > 3


def test_a_scipy_ufunc_is_named_by_its_module_in_refusals():
    """Regression: ``scipy.special.expit(x, where=...)`` was refused as "np.expit"."""
    import scipy.special

    with pytest.raises(errors.UnsupportedOperationError, match=r"^scipy\.special\.expit\("):
        mutad.gradient(lambda x: scipy.special.expit(x, where=x > 0).sum(), np.ones(3))


def _falls_back_from_complex(x):
    x = x * 3.0
    try:
        scale = complex(x[0] * 1j).imag  # NumPy converts; mutad refuses
    except TypeError:        # ... and would go on down another path than NumPy's
        scale = 1.0
    return np.sum(x) * scale


@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay"])
def test_a_refused_conversion_the_function_catches_is_not_let_pass(mode):
    """Regression: ``try: float(v) except TypeError: ...`` (then refused) took the fallback under mutad alone
    (its ConversionError is a TypeError), giving another value than NumPy's, silently."""
    x = np.array([1.0, 2.0])
    before = x.tobytes()
    with pytest.raises(errors.ConversionError, match="caught an error mutad raised") as caught:
        if mode == "gradient":
            mutad.value_and_gradient(_falls_back_from_complex, x)
        elif mode == "jvp":
            mutad.jvp(_falls_back_from_complex, (x,), (np.ones(2),))
        else:
            mutad.value_and_grad(_falls_back_from_complex, replay=True)(x)
    assert "complex()" in str(caught.value)  # the conversion it caught, and where
    assert isinstance(caught.value.__cause__, errors.ConversionError)
    assert x.tobytes() == before


def _falls_back_from_hyperu(x):
    try:
        z = scipy.special.hyperu(2.0 + x[0], 1.5, 0.3)  # mutad refuses its derivative in a
    except Exception:  # ... and the program would go on down another path than NumPy's
        z = 0.0
    return z + np.sum(x)


@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay"])
def test_a_refused_operation_the_function_catches_is_not_let_pass(mode):
    """Regression: ``try: scipy.special.hyperu(2 + x[0], ...) except Exception: z = 0.0`` (mutad
    refuses the derivative in the parameter a) took the fallback under mutad alone, giving
    another value and gradient than NumPy's, silently."""
    x = np.array([0.7, 1.3, 0.9])
    before = x.tobytes()
    with pytest.raises(errors.UnsupportedOperationError,
                       match="caught an error mutad raised") as caught:
        if mode == "gradient":
            mutad.value_and_gradient(_falls_back_from_hyperu, x)
        elif mode == "jvp":
            mutad.jvp(_falls_back_from_hyperu, (x,), (np.ones(3),))
        else:
            mutad.value_and_grad(_falls_back_from_hyperu, replay=True)(x)
    assert "hyperu" in str(caught.value)  # what was refused
    assert isinstance(caught.value.__cause__, errors.UnsupportedOperationError)
    assert x.tobytes() == before


def test_a_refusal_caught_inside_a_nested_differentiation_is_not_let_pass():
    """A refusal raised out of an inner differentiation into the outer function, which catches
    it, ends the outer one as it ends a differentiation it is raised in."""
    def outer(x):
        try:
            inner = mutad.gradient(_hyperu_of_first, x * 2.0)
        except mutad.MutadError:
            inner = np.zeros(3)
        return np.sum(inner * x)

    with pytest.raises(errors.UnsupportedOperationError, match="caught an error mutad raised"):
        mutad.gradient(outer, np.array([0.7, 1.3, 0.9]))


def _hyperu_of_first(x):
    return scipy.special.hyperu(2.0 + x[0], 1.5, 0.3) + np.sum(x)


def _calling_back(callback, x):
    """A routine of the kind SciPy's optimizers are, without a rule in mutad: it converts what
    its callback returns, and raises an error of its own from the failure."""
    try:
        return complex(callback(x) * 1j).imag
    except TypeError as error:
        raise RuntimeError("the callback must return a number") from error


def _global_minimum(a):
    return _calling_back(lambda z: np.sum((z - a) ** 2), np.zeros(2))


@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay"])
def test_a_library_error_raised_from_a_refusal_is_the_refusal(mode):
    """Regression: differential_evolution of a traced function (before it had a rule) raised
    SciPy's RuntimeError ("The map-like callable must be of the form f(func, iterable)...")
    where the cause, a conversion mutad refused, says what happened and what to do."""
    a = np.array([0.3, -0.2])
    before = a.tobytes()
    with pytest.raises(errors.ConversionError, match="complex"):
        if mode == "gradient":
            mutad.gradient(_global_minimum, a)
        elif mode == "jvp":
            mutad.jvp(_global_minimum, (a,), (np.ones(2),))
        else:
            mutad.grad(_global_minimum, replay=True)(a)
    assert a.tobytes() == before


def _numpys_own_refusal(x):
    """Conversions NumPy refuses too, caught: the program goes on as on NumPy's arrays."""
    try:
        s = float(x)  # several elements: NumPy's TypeError
    except TypeError:
        s = 2.0
    try:
        t = x.item()  # NumPy's ValueError
    except ValueError:
        t = 3.0
    try:
        k = operator.index(x[0])  # a float is no index
    except TypeError:
        k = 4
    return (x * (s + t + k)).sum()


def _complex_scalar_conversions(x):
    z = x.astype(complex) * (1 + 1j)
    try:
        r = round(z[0], 2)  # NumPy's complex scalars have no round(): its TypeError
    except TypeError:
        r = 5.0
    return (z * r).real.sum()


@pytest.mark.parametrize("mode", ["gradient", "jvp"])
def test_conversions_of_a_complex_scalar_are_numpys(mode):
    """Regression: round(z[0], 2) of a complex element gave np.round's value where NumPy
    raises TypeError (the program took another path), and float(z[0]), NumPy's real part
    with a warning, raised a plain TypeError (float() of the 0-d array) instead of mutad's
    refusal."""
    x = np.array([0.5, 2.0])
    expected = _complex_scalar_conversions(x.copy())
    if mode == "gradient":
        value, _ = mutad.value_and_gradient(_complex_scalar_conversions, x)
    else:
        value, _ = mutad.jvp(_complex_scalar_conversions, (x,), (np.ones(2),))
    assert value == expected
    with pytest.raises(errors.ConversionError, match="float()"):
        if mode == "gradient":
            mutad.gradient(lambda v: float(v.astype(complex)[0]) * v.sum(), x)
        else:
            mutad.jvp(lambda v: float(v.astype(complex)[0]) * v.sum(), (x,), (np.ones(2),))


@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay", "hessian"])
def test_a_conversion_numpy_refuses_too_raises_numpys_error(mode):
    """Regression: once a caught refusal ended the differentiation, these programs, which go
    down NumPy's own path, were ended too."""
    x = np.linspace(0.1, 1.2, 6)
    if mode == "gradient":
        assert mutad.gradient(_numpys_own_refusal, x)[0].tolist() == [9.0] * 6
    elif mode == "jvp":
        assert mutad.jvp(_numpys_own_refusal, (x,), (np.ones(6),))[1] == 54.0
    elif mode == "replay":
        for _ in range(3):
            assert mutad.grad(_numpys_own_refusal, replay=True)(x).tolist() == [9.0] * 6
    else:
        assert not np.any(mutad.hessian(_numpys_own_refusal, x))


def test_frompyfunc_gets_the_same_advice_in_forward_mode():
    doubled = np.frompyfunc(lambda a: 2 * a, 1, 1)
    x = np.array([1.0, 2.0])
    for differentiate in (lambda f: mutad.gradient(f, x),
                          lambda f: mutad.jvp(f, (x,), (np.ones(2),))):
        with pytest.raises(errors.UnsupportedOperationError, match="np.frompyfunc.*np.vectorize"):
            differentiate(lambda x: doubled(x, out=np.empty(2, object)).astype(float).sum())
    assert x.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("differentiate", [
    lambda f, a: mutad.grad(f)(a), lambda f, a: mutad.jacobian(f, a),
    lambda f, a: mutad.jvp(f, (a,), (1.0,))[1], lambda f, a: mutad.grad(f, replay=True)(a)],
    ids=["grad", "jacobian", "jvp", "replay"])
def test_a_cached_differentiated_function_is_differentiated_past_its_cache(differentiate):
    # The cache, keyed on the number the differentiated value stands for, handed back the
    # plain call's result, or an earlier differentiation's: a derivative of 0, silently.
    @functools.lru_cache(maxsize=None)
    def f(a):
        return np.sin(a) * a

    class Model:
        @functools.cache
        def loss(self, t):
            return np.cos(t) * t

    model = Model()
    assert f(0.5) == np.sin(0.5) * 0.5 and model.loss(0.5) == np.cos(0.5) * 0.5
    for _ in range(2):
        assert np.isclose(differentiate(f, 0.5), np.cos(0.5) * 0.5 + np.sin(0.5), rtol=1e-14)
        assert np.isclose(differentiate(model.loss, 0.5), np.cos(0.5) - 0.5 * np.sin(0.5),
                          rtol=1e-14)
    assert f.cache_info().currsize == 1 and f.cache_info().misses == 1  # left as it was
    assert f(0.5) == np.sin(0.5) * 0.5


def _decay(n, a):
    return np.exp(-a) * n


_cached_decay = functools.lru_cache(maxsize=None)(_decay)


def _decayed(x):
    return _cached_decay(3, float(x[0])) * x[1]


def _decayed_past_cache(x):
    return _decay(3, float(x[0])) * x[1]


def _closure_loss(cache):
    @cache
    def square(a):
        return a * a * np.ones(2)

    return (lambda x: (square(x[0]) * x).sum()), square


def _method_loss(cache):
    class Model:
        @cache
        def weight(self, t):
            return np.sin(t) * 2.0

        def loss(self, x):
            return self.weight(t=float(x[0])) * x[1]

    return Model().loss, Model.weight


def _static_loss(cache):
    class Model:
        @staticmethod
        @cache
        def weight(t):
            return np.sin(t) * 2.0

        def loss(self, x):
            return self.weight(x[0]) * x[1]

    return Model().loss, Model.weight


@dataclasses.dataclass(frozen=True)
class _Rate:  # hashes and compares by its value
    a: float


def _dataclass_loss(cache):
    @cache
    def decay(rate):
        return np.exp(-rate.a)

    return (lambda x: decay(_Rate(float(x[0]))) * x[1]), decay


@pytest.mark.parametrize("form", ["module", "closure", "method", "static", "dataclass"])
@pytest.mark.parametrize("differentiate", [
    lambda f, x: mutad.gradient(f, x)[0], lambda f, x: mutad.jvp(f, (x,), (np.ones(2),))[1]],
    ids=["gradient", "jvp"])
def test_a_helpers_cache_is_passed_by_a_differentiated_value(form, differentiate):
    # A helper f reaches by a name, cached by functools.lru_cache or functools.cache (a
    # module-level function, a closure's, a class's cached or static method), called with a
    # differentiated number after a plain call with that number filled its cache: the cache
    # answered (a traced scalar hashes and compares as its number) with the plain value, a
    # derivative of 0 through it, silently (and of a frozen dataclass holding the number).
    # Called past its cache, the cache left as it was.
    if form == "module":
        _cached_decay.cache_clear()
        (f, cached), uncached = (_decayed, _cached_decay), _decayed_past_cache
    else:
        make = {"closure": _closure_loss, "method": _method_loss, "static": _static_loss,
                "dataclass": _dataclass_loss}[form]
        (f, cached), uncached = make(functools.lru_cache(maxsize=None)), make(lambda g: g)[0]
    x = np.array([0.7, 1.3])
    plain = f(x)  # fills the cache under 0.7
    info, expected = cached.cache_info(), differentiate(uncached, x)
    for _ in range(2):
        np.testing.assert_allclose(differentiate(f, x), expected, rtol=1e-14)
        assert x.tolist() == [0.7, 1.3]
    assert cached.cache_info() == info  # neither looked up nor filled
    assert f(x) == plain and cached.cache_info().hits == info.hits + 1
    assert type(f(x)) is np.float64


def test_a_cache_keyed_on_a_differentiated_value_is_named_when_its_result_escapes():
    @functools.lru_cache(maxsize=None)
    def stiffness(k):  # a cache keyed on the parameter, where mutad does not look (in a
        return k * np.array([[2.0, -1.0], [-1.0, 2.0]])  # deque): the second hit is stale

    held = collections.deque([stiffness])

    def f(k):
        return np.linalg.solve(held[0](k[0]), np.ones(2)).sum()

    k = np.array([1.5])
    np.testing.assert_allclose(mutad.gradient(f, k)[0], -np.ones(2).sum() / 1.5**2)
    with pytest.raises(errors.EscapedTracerError, match="functools.lru_cache"):
        mutad.gradient(f, k)
    assert k.tolist() == [1.5]
