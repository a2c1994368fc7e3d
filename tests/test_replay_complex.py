"""Random complex programs replayed against tracing, bit for bit, where an array outside argnums
(``c``) holds complex values: the recording follows ``c`` as an input while tracing holds it a
constant, so every product of one complex element must round the same whichever inputs are
traced (NumPy's product of one complex element written over an operand rounds otherwise than
into memory of its own: its loop without fused multiply-adds). The programs mix 0-d values
(elements read), one-element slices and small arrays, products, quotients, ``np.exp``,
``np.conj``, ``np.abs``, ``np.real``, ``np.imag`` and in-place ``*=`` and ``/=``; each is called
several times on changing inputs (``x`` and ``c``), each call against a fresh traced call:
value, gradient and the caller's arrays. Forward mode likewise: a tangent of ``x`` alone
against tangents of ``x`` and ``c`` (zero)."""

import numpy as np
import pytest

import mutad

SIZE = 3


def _program(rng):
    """A random program: the elements of ``x`` and ``c`` it reads first (``SIZE`` each: 0-d or
    one-element slices), and its statements on a pool of values (``x``, ``c``, those elements,
    then each statement's result)."""
    reads = [(int(rng.integers(2)), int(rng.integers(SIZE)), bool(rng.integers(2)))
             for _ in range(SIZE)]
    statements, count = [], 2 + len(reads)
    for _ in range(int(rng.integers(4, 9))):
        kind = str(rng.choice(["mul", "div", "add", "mul", "div", "exp", "conj", "abs", "real",
                               "imag", "imul", "idiv", "element", "slice"]))
        statements.append((kind, int(rng.integers(count)), int(rng.integers(count)),
                           int(rng.integers(SIZE))))
        count += 1
    return reads, statements


def _run(program, x, c):
    reads, statements = program
    pool = [x, c]
    for which, k, whole in reads:
        pool.append((x, c)[which][k:k + 1] if whole else (x, c)[which][k])
    for kind, i, j, k in statements:
        a, b = pool[i], pool[j]
        if kind == "mul":
            v = a * b
        elif kind == "div":
            v = a / b
        elif kind == "add":
            v = a + b
        elif kind == "exp":
            v = np.exp(a * 0.25)
        elif kind == "conj":
            v = np.conj(a)
        elif kind == "abs":
            v = np.abs(a)
        elif kind == "real":
            v = np.real(a)
        elif kind == "imag":
            v = np.imag(a) + np.real(a)
        elif kind in ("imul", "idiv"):
            v = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), np.complex128)
            v += a
            if kind == "imul":
                v *= b
            else:
                v /= b
        elif kind == "element":
            v = a[k % a.size] if np.ndim(a) == 1 else a
        else:  # one element as an array of its own
            v = a[k % a.size:k % a.size + 1] if np.ndim(a) == 1 else a
        pool.append(v)
    last, other = pool[-1], pool[-2]
    return np.sum(np.real(last * np.conj(last))) + np.sum(np.real(other))


def _inputs(rng, complex_x):
    x = rng.normal(size=SIZE)
    if complex_x:
        x = x + 1j * rng.normal(size=SIZE)
    return x, rng.normal(size=SIZE) + 1j * rng.normal(size=SIZE)


def _bits(v):
    return np.asarray(v).tobytes(), np.asarray(v).dtype


@pytest.mark.parametrize("seed", range(8))
def test_replayed_complex_programs_are_the_traced_ones(seed):
    rng = np.random.default_rng(seed)
    replayed = 0
    for n in range(12):
        statements, complex_x = _program(rng), bool(n % 2)

        def f(x, c):
            return _run(statements, x, c)

        replaying = mutad.value_and_grad(f, argnums=0, replay=True)
        traced = []
        trace = replaying.trace
        replaying.trace = lambda *a, **k: (traced.append(1), trace(*a, **k))[1]
        calls = [_inputs(rng, complex_x) for _ in range(4)]
        calls.append(calls[0])
        for x, c in calls:
            mine = (x.copy(), c.copy())
            got = replaying(*mine)
            assert mine[0].tobytes() == x.tobytes() and mine[1].tobytes() == c.tobytes()
            expected = mutad.value_and_grad(f, argnums=0)(x.copy(), c.copy())
            assert _bits(got[0]) == _bits(expected[0]), (statements, x, c)
            assert _bits(got[1]) == _bits(expected[1]), (statements, x, c)
        assert not any("complex" in r for r in replaying.reasons.values()), replaying.reasons
        replayed += len(traced) == 1
    assert replayed >= 10  # replayed after its recording, not traced on every call


@pytest.mark.parametrize("seed", range(4))
def test_forward_mode_is_the_same_whichever_inputs_carry_tangents(seed):
    rng = np.random.default_rng(100 + seed)
    for n in range(12):
        statements, complex_x = _program(rng), bool(n % 2)

        def f(x, c):
            return _run(statements, x, c)

        x, c = _inputs(rng, complex_x)
        tx = _inputs(rng, complex_x)[0]
        alone = mutad.jvp(f, (x, c), (tx, None))
        both = mutad.jvp(f, (x, c), (tx, np.zeros_like(c)))
        assert _bits(alone[0]) == _bits(both[0]), (statements, x, c)
        assert _bits(alone[1]) == _bits(both[1]), (statements, x, c, tx)


# NumPy squares a complex scalar (``np.square(z[0])``) by a loop of its own, without the fused
# multiply-adds of the loop of arrays, so the two round apart in the last bit: tracing took the
# square of the element from the arrays' loop, where NumPy (and a replay, which holds the
# element as NumPy's scalar) computes the scalar's. The value is NumPy's scalar's in every mode.

def _squared_elements(x):
    z = x + 1j * x[::-1]
    return np.square(z[0]).real + 2.0 * np.square(z[1]).real + np.square(z[1:]).real.sum()


def _squares_as_numpys(f, calls):
    """``f`` of each array of ``calls`` replayed as traced (``replayed_as_traced``), its
    traced value and its tangent NumPy's value, bit for bit."""
    replayed_as_traced(f, [(v,) for v in calls])
    for v in calls:
        numpys = f(v.copy())
        assert _bits(mutad.value_and_grad(f)(v.copy())[0]) == _bits(numpys), v
        assert _bits(mutad.jvp(f, (v,), (np.ones(3),))[0]) == _bits(numpys), v


def test_the_square_of_a_complex_element_is_numpys_scalars():
    np.square(np.complex128(1j))  # (NumPy's first square of a complex scalar takes the loop)
    x = np.array([2.09868411346781, 1.25, 0.5449101394377727])
    assert np.square(np.complex128(2.09868411346781 + 0.5449101394377727j)).tobytes() != \
        np.square(np.array([2.09868411346781 + 0.5449101394377727j])).tobytes()
    _squares_as_numpys(_squared_elements, [x, x * 1.5, x + 0.25, x,
                                           np.random.default_rng(0).normal(size=3)])


# The partials of an operation of complex elements (np.reciprocal's ``-(y * y)``) read the
# values a replay holds as NumPy's complex scalars, which multiply by NumPy's scalar math, where
# tracing holds 0-d arrays, which multiply by the loops (with fused multiply-adds): the replayed
# gradients differed from the traced ones in the last bit. The partials read 0-d arrays there too.

def _reciprocal_element(x, y):
    z = x + 1j * y
    w = np.reciprocal(z[1]) * z[0]
    return (w * np.conj(w)).real


def replayed_as_traced(f, calls, argnums=0):
    """Calls ``value_and_grad(f, argnums, replay=True)`` on each tuple of arrays of ``calls``,
    each against a fresh traced call, bit for bit, with the caller's arrays unchanged; only
    the first call (the recording) is traced."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    traced = []
    trace = replaying.trace
    replaying.trace = lambda *a, **k: (traced.append(1), trace(*a, **k))[1]
    for args in calls:
        mine = [a.copy() for a in args]
        got = replaying(*mine)
        assert [m.tobytes() for m in mine] == [a.tobytes() for a in args]
        expected = mutad.value_and_grad(f, argnums=argnums)(*[a.copy() for a in args])
        assert _bits(got[0]) == _bits(expected[0]), args
        gradients = (got[1], expected[1]) if type(argnums) is tuple else ([got[1]], [expected[1]])
        assert [_bits(g) for g in gradients[0]] == [_bits(g) for g in gradients[1]], args
    assert len(traced) == 1  # the recording alone: the others replayed


def test_the_partials_of_complex_elements_are_the_traced_ones():
    calls = [(np.array([1.0, -1.0, 0.5]), np.array([-0.0, 0.5, 1.0])),
             (np.array([1.5, -1.0, 0.5]), np.array([0.25, 0.5, 1.0])),
             (np.array([1.0, -1.0, 0.5]), np.array([-0.0, 0.5, 1.0])),
             (np.array([0.3, 0.7, 0.5]), np.array([1.1, -2.3, 1.0]))]
    replayed_as_traced(_reciprocal_element, calls, (0, 1))


# NumPy takes its complex scalar's square only where the call has no keyword: with ``out=None``
# written out (which NumPy drops before ``__array_ufunc__``, so the engines saw no keyword) it
# takes the loop's, and traced, replayed and forward values had the scalar's square.

def _squared_elements_out_none(x):
    z = x + 1j * x[::-1]
    return np.square(z[0], out=None).real + 2.0 * np.square(z[1], out=(None,)).real


def test_the_square_of_a_complex_element_with_out_none_is_the_loops():
    np.square(np.complex128(1j))  # (NumPy's first square of a complex scalar takes the loop)
    x = np.array([2.09868411346781, 1.25, 0.5449101394377727])
    _squares_as_numpys(_squared_elements_out_none,
                       [x, x * 1.5, x, np.random.default_rng(0).normal(size=3)])


# ``.imag`` of a complex element's product is a view 8 bytes into the read-only 0-d array
# tracing holds; a replay holds NumPy's scalar there, whose ``.imag`` is an array of its own:
# the step's layout guard failed on every call, and the signature was traced each time.

def _imaginary_part_of_a_product(x):
    z = x + 1j * x[::-1]
    return (z[1] * z[2]).imag + (z[0] * z[1]).real


def test_the_imaginary_part_of_a_complex_elements_product_is_replayed():
    rng = np.random.default_rng(0)
    replayed_as_traced(_imaginary_part_of_a_product, [(rng.normal(size=3),) for _ in range(3)])
