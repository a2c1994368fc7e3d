"""The traced engine's fast paths (``operations.fast_ufunc``, the dispatch's calls of it,
``operations._fast_function``, ``operations.assign`` of one element, the views of rows and
slices: ``tracing._row_or_slice``) do what its general path does: the same records, the same
gradients bit for bit, the caller's arrays back bit for bit, on programs whose operands change
the paths' decisions (every operand traced or not, real or complex, float32, a view or a whole
array, one loop's step after another)."""

import math
import sys
import types
import warnings

import numpy as np
import pytest

import mutad
from mutad.core.shadows import Buffer, Place, Shadows
from mutad.core import tape as tape_module
from mutad.core.tape import Write
from mutad.core.trees import flatten
from mutad.core import allocation, views
from mutad.engines import elementwise, inplace, operations, reverse, tracing
from mutad.engines.recompute import Held, current_region
from mutad.engines import products
from mutad.engines.products import times
from mutad.engines.session import ReverseDifferentiation
from mutad.rules import contractions


def _general_path_only(monkeypatch):
    """Every ufunc call and assignment takes the general path: no fast plan is made, no
    element is assigned as one."""
    monkeypatch.setattr(operations, "_FAST", {})
    monkeypatch.setattr(operations, "_fast_plan", lambda ufunc, pattern, count: False)
    monkeypatch.setattr(operations, "_FAST_WRITES", {})
    monkeypatch.setattr(operations, "_FAST_OUTS", {})
    monkeypatch.setattr(operations, "_fast_write_plan", lambda ufunc, pattern, apart=False: False)
    monkeypatch.setattr(operations, "_function_plan", lambda func, rule, args, tape: None)
    monkeypatch.setattr(operations, "_constant_plan", lambda func, rule, args, tape: None)
    monkeypatch.setattr(operations, "_number_into", lambda target, value: False)
    monkeypatch.setattr(tracing, "assign", _as_the_engines(
        lambda target, value, element=False: operations.assign(target, value)))
    monkeypatch.setattr(tracing, "_element_read", lambda x, key: None)
    monkeypatch.setattr(tracing, "_row_or_slice", lambda x, key: False)
    monkeypatch.setattr(tracing, "_element_written", lambda x, key, value: False)
    monkeypatch.setattr(tracing, "_region_written", lambda x, key, value: False)
    monkeypatch.setattr(tracing, "assigned_back", lambda x, key, value: False)
    monkeypatch.setattr(tracing, "_read_before", lambda x: None)


def _as_the_engines(function):
    """``function``, its frame taken for one of the engine's: the line a record names is the
    differentiated code's, above it."""
    return types.FunctionType(function.__code__.replace(co_filename=operations.__file__),
                              function.__globals__, None, None, function.__closure__)


def _cholesky_in_place(A):
    """The rows of a Cholesky factor, written as PolyBench's NumPy version writes them: a dot
    product of two slices per element, in place."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[j, :j]
            A[i, j] /= A[j, j]
        A[i, i] -= A[i, :i] @ A[i, :i]
        A[i, i] = np.sqrt(A[i, i])
    return np.sum(np.tril(A) * np.arange(1.0, n * n + 1).reshape(n, n))


def _lu_in_place(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return np.sum(A * A)


def _products(a, b):
    """Every shape of operands the rule has a plain ``back`` for, a batch, one operand a
    constant of the program, and a product whose operand is then overwritten."""
    c = np.linspace(0.5, 1.5, 3)  # a plain array: not every operand traced
    m = b.reshape(3, 3)
    y = a @ a + np.sum(a @ m) + np.sum(m @ a) + np.sum(m @ m.T @ a) + np.sum(m @ c)
    y = y + np.matmul(a, a)
    stack = np.stack([m, 2 * m])
    y = y + (stack @ m).sum() + (stack @ a).sum()
    a[1:] = m[0, 1:] @ m[1:, 1:]  # the operand written after the product read it
    return y + np.sum(a * b[:3])


def _outer_products(a, b):
    """np.outer of traced vectors (the general path's rule), of a traced and a constant one,
    of a matrix (flattened), and dot products of rows of the result, as a loop reads them."""
    c = np.linspace(0.5, 1.5, 3)
    o = np.outer(a[:3], b[:3]) + np.outer(c, a[:3]) + np.outer(b.reshape(3, 3), a[:3])[3:6]
    s = 0.0
    for i in range(3):
        s = s + o[i, :i] @ o[:i, i] + o[i] @ a[:3]
    return s + np.sum(o * o)


def _complex_products(a, b):
    z = a + 1j * b[:3]
    return np.real(np.sum((z @ z) * np.conj(z @ b.reshape(3, 3))))


def _float32_products(a, b):
    a32, m32 = a.astype(np.float32), b.reshape(3, 3).astype(np.float32)
    c = np.zeros(2, np.float32)
    c[0] = a32[1] * a32[2]  # an element of a float32 array
    return np.sum(a32 @ m32 @ a32) + np.sum(c * c)


def _seidel_in_place(A):
    n = A.shape[0]
    for _ in range(2):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j] + A[i, j] + A[i + 1, j]) / 3.0
    return np.sum(A * A)


def _element_writes(a, b):
    """Elements written with every kind of value: a traced one of the target's dtype into a
    traced array, into arrays the function allocated (constants until then), of float32 and
    complex targets (float32: ``_float32_products``), a Python number, an augmented
    assignment, an element of the target."""
    z = np.zeros((3, 3))
    z[1, 1] = a[0] * 2.0
    z[0, 2] = a[1]
    z[2, 2] = 4.0
    w = np.zeros(2, complex)
    w[1] = a[2] * 1j
    b[1] -= a[0] * b[2]
    b[2] = b[0]
    b[0] /= 2.0
    a[1] = a[2] + b[1]
    return np.sum(z * z) + np.real(np.sum(w * np.conj(w))) + np.sum(a * b)


def _numbers_into_elements(a, b):
    """Python numbers written into elements of traced arrays: floats and an int into float64,
    a float into float32 (rounded as NumPy rounds it), over elements records read before (put
    back for them), in a loop; into a complex array (the general path's)."""
    a32 = a.astype(np.float32)
    a32[0] = 0.1
    s = a[0] * b[0]
    a[0] = 0.5
    b[1] = 3
    for i in range(3):
        b[i] = 0.25 * i if i else b[i] * a[1]
        a[2] = a[2] * b[i] + 1.0
        a[1] = 0.75
    z = a + 1j * b
    z[1] = 2.0
    # (float32's part weighted down: its rounding is larger than a finite difference's error)
    return np.sum(a * b) + s + 1e-4 * np.sum(a32 * a32) + np.real(np.sum(z * np.conj(z)))


def _aliased_elements(a, b):
    """Elements written from themselves, from a view of their own array and from elements of
    another dtype, with NaN, infinities and signed zeros among the values: the writes an
    element's own path must refuse or leave to NumPy's assignment exactly as the general
    path does."""
    a[1] = b[0] * 0.5  # an argument's first write: its caller's bytes are kept before it,
    a *= 3.0           # for they come back from this one by an inverse, within rounding
    m = np.outer(a, b)
    m[1, 1] = m[1, 1]  # itself: nothing to do
    v = m[1]
    m[1, 2] = v[0]  # an element of a view of the target's own array
    m[0, 0] = m[0, 0:1][0] * 2.0
    m[2, 0] = np.inf
    m[2, 1] = -0.0
    m[0, 1] = np.nan
    m[0, 2] = 7  # an int
    m[2, 2] = m[0, 1] + a[0]  # NaN
    m32 = m.astype(np.float32)
    m32[1, 0] = m[1, 1]  # a float64 value into a float32 element: rounded (general path)
    m32[0, 0] = -np.inf
    m[1, 0] = m32[1, 1] * 1e-6  # a float32 value into a float64 element (general path)
    finite = np.where(np.isfinite(m), m, 0.0)
    # (float32's part weighted down: its rounding is larger than a finite difference's error)
    return np.sum(finite * finite) + 1e-6 * np.sum(np.where(np.isfinite(m32), m32, 0.0))


def _overwritten_elements(a, b):
    """Elements overwritten in arrays of each kind an element's undo tells apart (``inplace.
    record_element_write``): an argument and a temporary of more than ``recompute.SMALL``
    bytes, found through their buffers' references when put back; a small temporary and one
    laid out in Fortran's order, which the undo holds; of float64, float32 and float16. The
    arrays are read whole before they are written (products whose pullbacks read them), so
    the gradient needs every element's bits put back; ``a`` may hold NaN, infinities, signed
    zeros and subnormals."""
    big = np.zeros(600) + b[0]
    small = np.zeros(3) + b[1]
    fortran = np.zeros((3, 2), order="F") + b[2]
    low, half = a.astype(np.float32), a.astype(np.float16)
    before = (np.sum(a * a) + np.sum(big * big) + np.sum(small * small)
              + np.sum(fortran * fortran) + 1e-6 * np.sum(low * low) + 1e-6 * np.sum(half * half))
    for x in (a, big, small, low, half):
        for i in range(2):
            x[i] = x[i + 1] * x[2]
    fortran[1, 0] = fortran[0, 1] * fortran[2, 1]
    after = (np.sum(a * b) + np.sum(big) + np.sum(small * small) + np.sum(fortran)
             + 1e-6 * np.sum(low * low) + 1e-6 * np.sum(half * half))
    return before + after


def _negative_indices(m, v):
    """Elements written and updated by negative indices, and by indices past the middle, into
    an argument, a Fortran-ordered temporary and a float32 one: each element's place found from
    its key (``operations.write_into_element``) is its view's."""
    fortran = np.zeros((3, 4), order="F") + v[0]
    low = m.astype(np.float32)
    for x in (m, fortran, low):
        for i in range(-3, 3):
            x[i, -1 - i] -= x[i, 1] * v[i]
            x[-1, i] = v[i + 1]
            x[i, i - 1] = 0.5
    return np.sum(m * m) + np.sum(fortran * fortran) + np.sum(low.astype(float) * v[1])


def _elements_read(a, b):
    """Elements read and used at once, as scalar loops do, of each kind the folding of reads
    into the operation that uses them (``elementwise.fold_reads``) tells apart: one element
    read twice (by an operation whose partials differ), negative indices, two arrays, a chain of operations, a view's elements,
    complex and float32 elements; and the reads it must leave as they are: a value kept in a
    variable, reads under an ``np.errstate`` block of their own."""
    z = a * 1.0
    c = b + 1j * a
    low = a.astype(np.float32)
    s = 0.0
    for i in range(3):
        s = s + a[i] * a[i] + np.arctan2(a[i], a[i])  # partials p and -p: their order shows
        s = s + (z[i - 1] - b[2 - i]) * 0.5
        kept = b[i]
        s = s + kept * a[i] + kept
        view = a[1:][::-1]
        s = s + view[i % 2] / 3.0
        t = c[i] * c[i - 1]
        s = s + np.real(t * np.conj(t))
        s = s + 1e-3 * (low[i] * low[i - 1])
        a[i] += a[i - 1]
        with np.errstate(divide="ignore"):
            s = s + z[i] / a[0]
    return s + np.sum(a * b)


def _reads_beside_values(a, b):
    """Elements read and used at once beside values computed, by an operation one of whose
    inputs takes no gradient (np.nextafter's second), the read at each position: the value
    computed keeps its cotangent whichever input is the read folded in."""
    s = 0.0
    for i in range(3):
        y = a[i] * 3.0
        s = s + np.nextafter(y, b[i]) + 2.0 * np.nextafter(b[i], y)
        s = s + np.nextafter(a[i], b[i - 1]) * y
    return s + np.sum(a * b)


def _read_chains(a, b):
    """Chains of operations on elements read, each on the value the one before made, whose
    reverse pass hands that value's cotangent on (``elementwise.reverse_folded``); among them
    a value kept and used twice, a value viewed, float32 elements, and partials that are not
    Python's products (a square root's)."""
    low = b.astype(np.float32)
    s = 0.0
    for i in range(3):
        s = s + (a[i] + a[i + 1] + b[i] * a[i] - b[i + 1]) / 3.0
        t = a[i] * b[i] + a[i - 1]
        s = s + (t + a[i]) * (t - b[i])
        u = a[i] + b[i]
        s = s + (u[...] + a[i + 1]) * 0.5
        s = s + (low[i] + low[i + 1] * low[i]) * 2.0
        s = s + np.sqrt(a[i] * a[i] + b[i] * b[i]) + a[i + 1]
    return s + np.sum(a * b)


def _values_written(a, b):
    """Values computed and written into elements at once, with the values an element's write
    must leave their buffers: one kept in a variable and used after the write, one written
    twice, one that is a read element itself (no operation made it)."""
    z = np.zeros(4)
    for i in range(3):
        z[i] = a[i] * b[i]
        z[i + 1] += a[i] / 3.0
        v = a[i] + b[i]
        z[i] = v
        a[i] = v * v
        b[i] = a[i + 1]
    return np.sum(z * z) + np.sum(a * b)


def _scalar_statements(A, v):
    """A scalar loop's statements in each form the element paths (``tracing._element_read``,
    ``tracing._element_written``, an augmented assignment of a value standing for NumPy's
    scalar) take or leave to the general path: negative and 1-d keys, a NumPy integer key,
    elements of views (a row, the transpose), of a temporary and of an array the function
    allocated (a constant until written), a value kept and used after its write, a scalar
    updated in place and used again, an element's own value written back, float32 and
    complex elements, a float64 value into a float32 element, a writeable 0-d array, and
    Python numbers into traced arrays and into a constant."""
    n = A.shape[0]
    T = A * 1.0
    Z = np.zeros((n, n))
    row, At = A[1], A.T
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            A[i, j] += A[i, j - 1]
            A[i, j] /= 3.0
            A[-i, -j] -= v[j] * A[i, j]
            T[i, j] = (T[i - 1, j] + A[i, j] + T[i + 1, j]) / 3.0
            Z[i, j] = A[i, j] * T[i, j]
            row[j] *= 1.0001
            At[j, i] = At[i, j] + 0.5
        v[i] = v[i - 1] * v[i]
        v[np.int64(i)] += A[i, i]
        kept = A[i, i] * 2.0
        A[i, i] = kept
        v[0] = kept + v[0]
        s = A[i, 1]
        s *= 2.0
        s -= v[i]
        A[0, i] = s + A[i, 1]
        Z[i, i] = Z[i, i]
        T[i, 0] = T[i, 0] + 0.0
    A32 = A.astype(np.float32)
    A32[1, 1] = A32[0, 0] * A32[1, 2]
    A32[1, 2] = A[1, 2]
    C = A + 1j * T
    C[1, 1] *= C[0, 1]
    C[2, 1] = C[1, 2] - A[0, 0]
    w = np.zeros(())
    w[()] = A[2, 2] * 0.5
    A[1, 1] = w
    A[n - 1, 0] = 0.5
    v[-1] = 3
    K = np.ones(3) * 2.0  # a constant: a number written into it stays one
    K[1] = 0.25
    A32[0, 0] = -0.0
    return (np.sum(A * A) + np.sum(T * Z) + np.sum(v * v) + 1e-4 * np.sum(A32 * A32)
            + np.real(np.sum(C * np.conj(C))) + np.sum(K * v[:3]))


def _operations_on_arrays(a, b):
    """Operators and one-operand ufuncs on each kind of operand the dispatch's short paths
    (``tracing._fast_operator``, ``__array_ufunc__``'s one operand) take or leave to the general
    path: Python floats, ints and bools on either side, NumPy's float64 scalar, traced arrays,
    constants of the tape (float and integer), plain arrays, 0-d arrays on either side (real
    and complex: NumPy's scalar math rounds complex products otherwise), views
    (strided, reversed, transposed: a result in Fortran's order), broadcasting, an array
    twice, float32 and complex operands (promotion), products (``@``), a division by zero
    under ``np.errstate``, and ``out=`` and ``where=``. Each on a line of its own: the records
    name the lines."""
    c = np.linspace(0.5, 1.5, 3)  # a plain array
    z = np.zeros(3) + 1.5  # a constant of the tape
    n = np.zeros(3, int) + 2  # an integer one
    a0 = a[0]  # 0-d
    m = np.outer(a, b)
    a32 = a.astype(np.float32)
    w = a + 1j * b
    t = [a * 2.0, 2.0 * a, a - 1, 1 - a, a / 3, 3 / a, a + b, a * b, b - a, a / b,
         a + True, a * np.float64(2.0), a * c, c * a, a * z, z * a, z * 2.0, a * n, n - a,
         a0 * 2.0, a * a0, a0 * a, a0 - a0, 3 - a0, a0 / 3, a0 * a0, a0 % 0.7, 2.0 * a0,
         w[0] * 2.0, 2.0 * w[0], w[0] * w[1], a0 * w[0], w[0] - a0, w[0] * w, a0 / w[1],
         a32[1] * 2.0, a32[1] + a0, 1.5 * a32[2],
         a[1:] * b[:2], a[::-1] + 1.0, m.T * 2.0, m.T - m, m * a, a[:, None] * b,
         a * a, m[0] * m[:, 0], a % 1.5, a // 2.0, a ** 2, 2.0 ** a, a @ b, m @ a,
         a32 * 0.1, a32 * a, 1 + a32, a32 / a32,
         w * 2.0, w * a, a - w, w * w,
         np.sin(a), np.sin(a[1:]), np.sin(a0), np.sqrt(a32 * a32), np.exp(w), np.sin(z),
         np.cos(m.T), np.tanh(m[:, 1])]
    with np.errstate(divide="ignore"):
        infinite = a / (b - b)  # (no gradient reaches it: its partials would be infinite)
    t.append(np.isinf(infinite) * 1.0)
    out = np.zeros(3)
    np.multiply(a, 2.0, out=out)
    t.append(out)
    t.append(np.add(a, b, where=b > 0, out=np.ones(3)))
    total = 0.0
    for v in t:
        total = total + np.sum(np.real(v * np.conj(v)))
    return total


READ_G = np.random.default_rng(21).standard_normal((3, 3))
READ_V = np.linspace(-1.0, 2.0, 3)
READ_F32 = READ_V.astype(np.float32)
READ_N = np.arange(3)
READ_C = READ_V + 0.5j
READ_0 = np.array(1.25)
READ_WRITTEN = np.ones(4)


def _reads_of_globals(a, b):
    """Ufuncs and operators of arrays made before the call (globals, whose stand-ins hand
    the engine their plain views: ``tracing._read_beside``) beside traced arrays, on either
    side and in each form that changes its decisions: broadcasting either way, a view of a
    global (strided, transposed), float32, integer and complex globals, a 0-d global, a
    constant of the tape, a value standing for a number, a global written by the function
    (read through its adopted memory after), one read on every step of a loop. Each on a line
    of its own: the records name the lines."""
    m = b.reshape(3, 3)
    z = np.zeros(3) + 1.5  # a constant of the tape
    t = [READ_V * a, a * READ_V, READ_V - a, a / READ_V, np.multiply(a, READ_V),
         np.multiply(READ_V, a), np.maximum(READ_V, a), np.arctan2(a, READ_V),
         READ_G * a, a * READ_G, READ_G * m, m - READ_G, READ_V[:, None] * a,
         READ_G[::2, 1:] * m[:2, :2], READ_G.T * m, READ_V[::-1] + a, READ_G @ a, a @ READ_G,
         READ_F32 * a, a * READ_F32, READ_F32 * a.astype(np.float32), READ_N * a, a - READ_N,
         READ_C * a, READ_0 * a, a * READ_0, READ_V * z, z + READ_V, READ_V * a[0], a[1] * READ_V,
         READ_V * a[1].item(), READ_F32 - a[2].item(), READ_V * 2.0]
    READ_WRITTEN[1:3] = 0.5  # (the same bytes on every call)
    t += [READ_WRITTEN * m[0, 0], READ_WRITTEN[:3] * a, a + READ_WRITTEN[1:], READ_WRITTEN[1:] - a]
    total = 0.0
    for step in range(3):
        total = total + np.sum(READ_G[step] * a) + np.sum(m[step] / READ_V)
    for v in t:
        total = total + np.sum(np.real(v * np.conj(v)))
    return total


def _functions(a, b):
    """NumPy functions with pure rules on traced arrays: reductions, products, one giving a
    view of its operand, one giving its operand itself, one of several outputs (a named
    tuple), one giving a Python float, one complex results of real operands, and the same
    beside a constant or with a setting (the general path's)."""
    m = b.reshape(3, 3)
    s = m + m.T
    w, v = np.linalg.eigh(s)
    spectrum = np.fft.fft(a)
    y = (np.sum(a) * np.mean(m) + np.dot(a, a) + np.sum(np.outer(a, a[::-1]))
         + np.sum(np.reshape(m, 9)[:4]) + np.sum(np.atleast_1d(a)) + np.sum(w * w)
         + np.sum(v[0] ** 2) + np.linalg.norm(m) + np.sum(np.abs(spectrum) ** 2)
         + np.sum(m, axis=0) @ a + np.sum(a * np.linspace(0.5, 1.5, 3)) + np.prod(a))
    a[1:] = np.cumsum(m[0, 1:])  # an operand written after a function read it
    return y + np.sum(a * b[:3]) + np.mean(np.tanh(np.concatenate([a, b])))


def _stencils(u, v):
    """Slices read, combined and written (a heat equation's step, its boundaries assigned
    numbers, whole rows of numbers and of arrays), on a vector and a matrix."""
    r = 0.25
    for _ in range(3):
        u[1:-1] += r * (u[2:] - 2 * u[1:-1] + u[:-2])
        u[0] = 0.0
        u[-1] = 1
        u[2:4] = 0.5
    m = v.reshape(3, 3)
    m[1:, :] = 0.5 * (m[1:, :] + m[:-1, :])
    m[0, :] = -1.5
    m[:, 1:] -= 0.7 * (m[:, 1:] - m[:, :-1])
    return np.sum(u * u) + np.sum(m * m)


def _slice_updates(A, v):
    """Augmented assignments of slices and assignments to slices, in each form the elementwise
    writes' short paths (``operations.fast_write``, ``fast_assign``) take or leave to the
    general path: rows and columns of an argument updated by Python floats and ints, by traced
    rows, by a row of the same array (over the target) and by a broadcast column; a
    temporary's and a Fortran-ordered temporary's rows (their undo finds them, or holds them);
    a constant of the function updated by a traced value (traced from then on) and read by a
    write into a traced array, then overwritten (its bytes put back for that record); float32
    and complex targets; whole arrays; a write too large to save (its inverse taken); rows
    and columns assigned from other arrays, from the target's own (apart from, the same as
    and over the region written), into a constant, a 0-d value, np.copyto; Python floats and
    ints assigned to rows, columns and strided slices of an argument, a temporary, a constant
    (its write not recorded as a traced one), float32 and complex targets and a region too
    large to save."""
    n = A.shape[0]
    T = A * 1.5
    F = np.zeros((n, n), order="F") + v[0]
    K = np.ones(n)  # a constant of the tape
    big = np.zeros((n, 9000)) + v[1]  # more bytes than a small write's copy
    Z = np.zeros((n, n))
    for i in range(n):
        A[i, :] *= 1.0001
        A[i, :i + 1] += 0.5 * A[i, 0] * A[:i + 1, 1]
        A[:, i] -= 2
        T[i, 1:] += A[i - 1, :-1]
        T[1:, i] /= 3.0
        F[i, :] -= v * F[i - 1, :]
        A[i, :] *= K  # a constant read
        big[i, :] *= 1.25
        T[i, :] = A[i - 1, :]  # assignments: from another array, from a row of the target's
        A[i, :2] = A[i - 2, 2:]
        F[:, i] = T[:, i]
        Z[i, 1:] = F[i, :-1]  # into a constant (traced from then on)
        A[i, :] = A[i, :]  # itself: nothing to do
        T[i, ::2] = 0.25  # numbers: into an argument's, a temporary's, a constant's regions
        F[1:, i] = -2
        A[i, 1:3] = 1.5
        K[i:] = 0.5
        big[i, :] = 0.75
    T[1:3, :] = A[0, :]  # broadcast along the region's first axis
    T[3, :] = F[None, 2, :]  # a leading length-1 axis dropped (the general path)
    T[0:2, 1:3] = T[1:3, 2:4]  # over the target (the general path)
    F[::-1, 2] = A[:, 3]  # a reversed column
    A[1:, 0] = A[:-1, 0]  # over the target: NumPy's own assignment
    A[0, :] = A[1, 1]  # a 0-d value
    np.copyto(T[2, :], A[3, :])
    A[1:, :] += A[:-1, :]  # an operand over the target
    T[:, :] += v[:, None]
    K *= 2.0  # overwritten after a record read it: put back for that record
    K += v  # a traced value into a constant: traced from now on
    W = np.zeros(9000)
    W += v[0]  # the same, too large to save
    A *= 0.5
    A32 = A.astype(np.float32)
    A32[1, :] += A32[0, :]
    A32[2, 1:] = 0.5
    C = A + 1j * T
    C[0, :] *= 2.0
    C[1, :2] = 3.0
    T **= 2
    A[2, 1:] -= T[2:, 0] @ T[2:, 1:]
    return (np.sum(A * A) + np.sum(T * F) + np.sum(K * v) + 1e-4 * np.sum(A32 * A32)
            + np.real(np.sum(C * np.conj(C))) + np.sum(big[:, :4]) + np.sum(W[:3])
            + np.sum(Z * A))


def _outs(a, b):
    """``out=`` calls in each form ``operations.fast_out`` takes or leaves to the general path:
    into a new array (a constant, traced from then on), into an operand (the first:
    ``fast_write``'s; the second), into a view, into an argument, of one operand and of two,
    with Python numbers, a constant operand, float32 targets of float32 and float64 operands,
    a rule whose partials read the values written (``np.exp``),
    a write too large to keep, a rule that decides (``np.maximum``), a 0-d value, an operand
    over the target, a complex target, and a loop's steps."""
    n = a.size
    c = np.empty_like(a)
    np.multiply(a, b, out=c)
    np.add(c, b, out=c)
    np.subtract(b, c, out=c)  # into its second operand
    np.exp(a, out=c)
    np.sin(c, out=c)
    z = np.zeros(2 * n)
    np.multiply(a, c, out=z[::2])
    np.add(a, 2.0, out=c)
    np.multiply(3, c, out=c)
    K = np.ones(n)  # a constant operand
    np.multiply(K, a, out=z[1::2])
    np.divide(c, z[1::2], out=c)
    np.multiply(z[1:], z[:-1], out=z[:-1])  # an operand over the target
    a32 = a.astype(np.float32)
    o32 = np.empty_like(a32)
    np.multiply(a32, a32, out=o32)
    np.add(a, b, out=o32)  # float64 operands into float32
    np.maximum(a, c, out=z[:n])
    np.exp(np.sum(a), out=c[1:2])  # a 0-d value
    big = np.zeros(9000) + a[0]
    W = np.empty(9000)
    np.multiply(big, big, out=W)
    np.cos(big, out=W)
    C = a + 1j * b
    np.multiply(C, 2.0, out=C)
    u, w = a * 1.0, np.zeros(n)
    for _ in range(3):
        np.multiply(u, b, out=w)
        np.add(u, w, out=u)
        np.tanh(w, out=u)
    np.multiply(a, a, out=b)  # into an argument
    np.sin(b[1:], out=b[1:])
    np.exp(b, out=b)  # (its partials read the values written)
    s = np.ones(())
    s *= np.sum(b)
    np.sin(s, out=s)  # 0-d
    np.sin(K, out=K)  # a constant
    big += 1.0
    np.tanh(big, out=big)  # too large a write to save: inverted
    return (np.sum(c * c) + np.sum(z) + 1e-3 * np.sum(o32) + np.sum(W[:3])
            + np.real(np.sum(C * np.conj(C))) + np.sum(u * w) + np.sum(b) + s + np.sum(K)
            + np.sum(big[:3]))


def _reductions(a, b):
    """NumPy's functions of traced arrays alone with no keyword argument, which
    ``apply_array_function`` asks first, beside the calls it does not take there: a starting
    value with a derivative (np.sum's composite takes it), keyword arguments, ``out`` given by
    position, a constant operand."""
    s = np.sum(a) + np.prod(b) + np.max(a * b) + np.mean(a) + np.dot(a, b) + np.sum(a, 0)
    t = np.sum(a, initial=b[0]) + np.max(b, initial=a[1]) + np.sum(a, axis=0)
    c = np.cumsum(a * b)
    m = np.outer(a[:2], b[:2])
    product = m * 0.5
    np.dot(m, m, product)  # (out by position, traced as the operands are)
    return s + t + np.sum(c * c) + np.dot(np.arange(4.0), b) + np.sum(product * m)


def _settings(a, b):
    """NumPy's functions of traced arrays with plain settings (``operations._plain_settings``),
    which ``apply_array_function`` asks first, by method and by function: an axis, negative or
    a tuple, ``keepdims``, ``ddof``, ``axis=None`` and ``dtype=None`` given, of a view, over an
    empty axis; beside the settings it does not take there (NumPy's integer as an axis, a
    dtype, ``where=``, ``initial=``, ``out=``) and operands it does not (integers, booleans,
    complex values, a constant)."""
    m = a.reshape(3, 4)
    v = b.reshape(3, 4)[:, ::2]
    s = m.sum(axis=0) @ v.sum(axis=1, keepdims=True)[:2, 0].repeat(2) \
        + np.sum(m * v.mean(axis=-1, keepdims=True), axis=(0, 1)) \
        + m.max(axis=1).sum() + np.min(v, axis=0, keepdims=False).prod(axis=None) \
        + np.var(m, axis=0, ddof=1).sum() + m.std(axis=1, ddof=0).sum() \
        + np.cumsum(v, axis=1).sum(axis=None, dtype=None) + np.mean(m[:0], axis=1).sum() \
        + np.prod(v, axis=-2, keepdims=True).sum()
    t = m.sum(axis=np.int64(1)).sum() + np.sum(m, axis=0, dtype=np.float32).sum() \
        + np.sum(m, axis=1, where=m > 0).sum() + m.sum(axis=0, initial=1.5).sum() \
        + np.max(v, axis=0, initial=b[0]).sum()
    k = np.arange(12).reshape(3, 4)
    t = t + np.sum(k, axis=0) @ m[0] + np.sum(k > 5, axis=1).sum() * m[1, 1] \
        + np.real(np.sum(m * (1 + 2j), axis=0) @ np.sum(v + 1j, axis=1)[:2].repeat(2)) \
        + np.sum(np.ones((2, 2)), axis=0) @ m[0, :2]
    out = np.zeros(4)
    np.sum(m * m, axis=0, out=out)
    return s + t + np.sum(out, axis=0, keepdims=True)[0]


PROGRAMS = {
    "settings": (_settings, lambda rng: (rng.standard_normal(12), rng.standard_normal(12))),
    "reductions": (_reductions, lambda rng: (rng.standard_normal(4), rng.standard_normal(4))),
    "outs": (_outs, lambda rng: (rng.standard_normal(4), rng.standard_normal(4))),
    "slices": (_slice_updates, lambda rng: (rng.standard_normal((4, 4)), rng.standard_normal(4))),
    "operations": (_operations_on_arrays, lambda rng: (rng.standard_normal(3),
                                                       rng.standard_normal(3))),
    "aliases": (_aliased_elements, lambda rng: (rng.standard_normal(3), rng.standard_normal(3))),
    "cholesky": (_cholesky_in_place, lambda rng: (
        (lambda r: r @ r.T + 6 * np.eye(6))(rng.standard_normal((6, 6))),)),
    "lu": (_lu_in_place, lambda rng: (rng.standard_normal((6, 6)) + 6 * np.eye(6),)),
    "products": (_products, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
    "complex": (_complex_products, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
    "seidel": (_seidel_in_place, lambda rng: (rng.standard_normal((5, 5)),)),
    "elements": (_element_writes, lambda rng: (rng.standard_normal(3), rng.standard_normal(3))),
    "float32": (_float32_products, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
    "numbers": (_numbers_into_elements, lambda rng: (rng.standard_normal(3),
                                                     rng.standard_normal(3))),
    "functions": (_functions, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
    "stencils": (_stencils, lambda rng: (rng.standard_normal(8), rng.standard_normal(9))),
    "outer": (_outer_products, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
    "written": (_values_written, lambda rng: (rng.standard_normal(4), rng.standard_normal(4))),
    "read": (_elements_read, lambda rng: (rng.standard_normal(4), rng.standard_normal(4))),
    "chains": (_read_chains, lambda rng: (rng.standard_normal(4), rng.standard_normal(4))),
    "beside": (_reads_beside_values, lambda rng: (rng.standard_normal(4),
                                                  rng.standard_normal(4))),
    "overwritten": (_overwritten_elements, lambda rng: (rng.standard_normal(4),
                                                        rng.standard_normal(4))),
    "statements": (_scalar_statements, lambda rng: (rng.standard_normal((5, 5)),
                                                    rng.standard_normal(5))),
    "negative": (_negative_indices, lambda rng: (rng.standard_normal((3, 4)),
                                                 rng.standard_normal(4))),
    "globals": (_reads_of_globals, lambda rng: (rng.standard_normal(3), rng.standard_normal(9))),
}


def _program(name, seed, special=False):
    """The program ``name`` of ``PROGRAMS`` and its arguments drawn from ``seed``, with NaN (a
    payload), infinities and signed zeros among them if ``special``."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(seed))
    return f, _with_special_values(args) if special else args


def _gradient(f, args):
    """Value and gradient of ``f`` at copies of ``args``, checking the caller's copies come back
    bit for bit."""
    given = [np.copy(a) for a in args]
    value, grads = mutad.value_and_grad(f, argnums=tuple(range(len(args))))(*given)
    for a, g in zip(args, given, strict=True):
        assert np.array_equal(a, g) and a.dtype == g.dtype
    return value, grads


def _described(f, args):
    """The records of ``f(*args)`` as data: what ran, on which places (their kinds, shapes and
    offsets), the outputs' shapes, what each keeps and the line that ran it."""

    def place(p):
        if type(p) in (list, tuple):
            return [place(e) for e in p]
        if type(p) is Buffer:
            return ("buffer", p.shape, p.dtype)
        if type(p) is Place:
            return ("place", p.offset, p.shape, p.strides, p.dtype)
        return ("value", np.asarray(p).tobytes() if isinstance(p, np.ndarray) else p)

    def setting(v):  # (a stand-in of what the record does not keep: its kind alone)
        if type(v) in (list, tuple):
            return [setting(e) for e in v]
        return v if isinstance(v, (int, float, type(None), np.generic, np.dtype, type)) \
            else type(v).__name__

    with ReverseDifferentiation("restore") as d:
        d.call(f, d.wrap([np.copy(a) for a in args]))
        return [(repr(r.primitive), place(r.inputs or ()),
                 None if r.settings is None else {k: setting(v) for k, v in r.settings.items()},
                 [b.shape for b in r.outputs], r.undo_kind, r.line,
                 None if r.kept is None else [k is None for k in r.kept],
                 type(r.state).__name__ if type(r.state) is not tuple else len(r.state))
                for r in d.tape.records]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fast_paths_give_the_general_paths_records_and_gradients(name, monkeypatch):
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(7))
    fast_value, fast = _gradient(f, args)
    with monkeypatch.context() as patched:  # (a product with a constant operand records the
        # traced one alone: ``test_products_with_a_constant_...``)
        patched.setattr(operations, "_traced_back", lambda back, pattern: None)
        fast_records = _described(f, args)
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        value, general = _gradient(f, args)
        general_records = _described(f, args)
    assert np.array_equal(fast_value, value)
    for g_fast, g in zip(fast, general, strict=True):
        assert g_fast.dtype == g.dtype and np.array_equal(g_fast, g)
    assert fast_records == general_records


def _large_operands(a, b):
    """Operations on arrays large enough to be recomputed (``recompute.SMALL``): their records
    hold stand-ins for what they read, beside small arrays kept as they are."""
    s = np.sin(a)
    small = a[:4] * s[:4]  # (a record keeps this part of ``s``: its buffer is marked kept)
    t = s * b + a * a
    u = np.tanh(t) * s
    return np.sum(u * t) + np.sum(small * small)


def _held(f, args):
    """What the records of ``f(*args)`` hold after its forward pass: for each, the kind of
    each value it keeps (an array, a stand-in, a number) and of the reference each buffer it
    names holds to its array (``Buffer.ref``: none, tracked, kept by a record, held)."""

    def buffers(items):
        for p in items:
            if type(p) in (list, tuple):
                yield from buffers(p)
            elif type(p) in (Buffer, Place):
                yield p.buffer

    with ReverseDifferentiation("restore") as d:
        d.call(f, d.wrap([np.copy(a) for a in args]))
        return [([type(k).__name__ for k in r.kept or ()],
                 [type(b.ref).__name__ for b in (*buffers(r.inputs or ()), *r.outputs)])
                for r in d.tape.records]


@pytest.mark.parametrize("name", sorted(PROGRAMS) + ["large"])
def test_the_fast_paths_keep_and_reference_what_the_general_paths_do(name, monkeypatch):
    f, make = PROGRAMS[name] if name != "large" else (
        _large_operands, lambda rng: (rng.standard_normal(1000), rng.standard_normal(1000)))
    args = make(np.random.default_rng(3))
    with monkeypatch.context() as patched:  # (a product with a constant operand names the
        # traced one alone: ``test_products_with_a_constant_...``)
        patched.setattr(operations, "_traced_back", lambda back, pattern: None)
        fast = _held(f, args)
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        general = _held(f, args)
    assert fast == general


def _reads_of_globals_outside_a_tape(a, b):
    """Reads of globals beside values of an inner differentiation, of an outer one, and of a
    jvp's (no tape of its own: the short path's general one)."""
    y = mutad.grad(lambda u: np.sum(READ_V * np.sin(u) * a))(b[:3])
    _, tangent = mutad.jvp(lambda u: READ_V * u * u, (b[3:6],), (READ_V,))
    return np.sum(y * a) + np.sum(READ_V * a) + np.sum(tangent * READ_V)


def test_reads_of_globals_take_the_short_path_and_give_its_absences_records(monkeypatch):
    """``tracing._read_beside`` is taken and its records, what they keep and the gradients
    are those of the stand-in's general path, bit for bit; nested differentiations too."""
    read_beside = allocation.READ_BESIDE[reverse.Traced]
    for f, args in ((_reads_of_globals, PROGRAMS["globals"][1](np.random.default_rng(2))),
                    (_reads_of_globals_outside_a_tape, (np.linspace(0.5, 1.5, 3),
                                                        np.linspace(-1.0, 1.0, 9)))):
        taken = []

        def counted(ufunc, inputs):
            y = read_beside(ufunc, inputs)
            taken.append(y is not None)
            return y

        def seen():
            value, grads = _gradient(f, args)
            hvp = mutad.hvp(f, args, [np.ones_like(a) for a in args])[1]
            return ([np.asarray(v).tobytes() for v in (value, *grads, *hvp)],
                    _described(f, args), _held(f, args))

        seen()  # (the products' plans specialize on a first call: ``_constant_product``)
        with monkeypatch.context() as patched:
            patched.setitem(allocation.READ_BESIDE, reverse.Traced, _as_the_engines(counted))
            short = seen()
        assert any(taken) and not all(taken)
        with monkeypatch.context() as patched:
            patched.delitem(allocation.READ_BESIDE, reverse.Traced)
            assert short == seen()


@pytest.mark.parametrize("name", ["cholesky", "lu", "products"])
def test_the_dot_products_of_a_loop_take_the_fast_path_and_are_right(name, monkeypatch):
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(3))
    taken = []
    fast_function = operations._fast_function

    def counted(*arguments):
        taken.append(arguments[0])
        return fast_function(*arguments)

    monkeypatch.setattr(operations, "_fast_function", counted)
    mutad.check_grads(f, *args)
    assert np.matmul in taken  # (and the functions of whole arrays, np.sum, np.tril)


@pytest.mark.parametrize("name, pattern", [("seidel", 1), ("elements", 1), ("cholesky", 1),
                                           ("elements", 0), ("numbers", 0), ("aliases", 1),
                                           ("aliases", 0), ("overwritten", 1)])
def test_the_elements_a_loop_writes_are_assigned_as_elements_and_are_right(name, pattern,
                                                                            monkeypatch):
    """Pattern 1: traced values written into elements; 0: Python numbers. Each is recorded by
    the element's own write (``inplace.record_element_write``), the plan's partials its state
    (None for a number, whose value no gradient reaches)."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(4))
    record_element_write = operations.record_element_write
    patterns = []

    def counted(*arguments):
        record = record_element_write(*arguments)
        patterns.append(int(record.state is not None))
        return record

    monkeypatch.setattr(operations, "record_element_write", counted)
    mutad.check_grads(f, *args)
    assert pattern in patterns


def test_the_slices_a_loop_updates_take_the_writes_short_path_and_are_right(monkeypatch):
    """``operations.fast_write`` records the augmented assignments of slices whose bytes it
    saves, called by the operator's own short path (``tracing._fast_operator``, not through
    the general operator), and leaves the others (complex, too large to save, into a constant)
    to the general path; ``operations.fast_assign`` the assignments of rows and columns."""
    f, make = PROGRAMS["slices"]
    args = make(np.random.default_rng(5))
    fast_write = tracing.fast_write
    taken, left, callers = [], [], set()

    def counted(ufunc, target, other, *skip):
        written = fast_write(ufunc, target, other, *skip)
        (left if written is None else taken).append((ufunc, target.dtype.type, target.size))
        if written is not None:
            callers.add(sys._getframe(1).f_code.co_name)
        return written

    monkeypatch.setattr(tracing, "fast_write", counted)
    fast_assign = operations.fast_assign
    assigned = []

    def assigning(target, value):
        written = fast_assign(target, value)
        assigned.append((type(value) is float, target.shape, written is not None))
        return written

    monkeypatch.setattr(operations, "fast_assign", assigning)
    mutad.check_grads(f, *args)
    assert {(False, (4,), True), (False, (2,), True), (False, (3,), True)} <= set(assigned)
    # (numbers: into an argument's row, a temporary's column, and a region larger than a
    # small write's copy: an assignment offers no inverse, so its bytes are saved)
    assert {(True, (2,), True), (True, (3,), True), (True, (9000,), True)} <= set(assigned)
    assert {u for u, _, _ in taken} == {np.multiply, np.add, np.subtract, np.true_divide}
    assert {(np.multiply, np.complex128, 4), (np.multiply, np.float64, 9000),
            (np.multiply, np.float64, 4)} <= set(left)  # (the last: ``K *= 2.0``)
    assert (np.add, np.float32, 4) in taken
    assert callers == {"method"}  # (``_fast_operator``'s, not ``_binary``'s ``inplace``)


def test_out_calls_take_the_writes_short_path_and_give_the_general_paths_bits(monkeypatch):
    """``operations.fast_out`` records the ``out=`` calls of real operands into a traced array
    apart from them (an array, a view, an argument) and leaves the others to the general path;
    against that path, by every mode, with NaN, infinities and signed zeros among the
    operands: the same values and derivatives bit for bit, the caller's arrays unchanged."""
    f, make = PROGRAMS["outs"]
    taken = []
    fast_out = tracing.fast_out

    def counted(ufunc, inputs, out):
        written = fast_out(ufunc, inputs, out)
        taken.append((ufunc, out.dtype.type, written is not None))
        return written

    for special in (False, True):
        args = _program("outs", 3, special)[1]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            with monkeypatch.context() as patched:
                patched.setattr(tracing, "fast_out", _as_the_engines(counted))
                fast = _bits(_by_every_mode(f, args))
            with monkeypatch.context() as patched:
                _general_path_only(patched)
                general = _bits(_by_every_mode(f, args))
        assert fast == general
    assert {(np.multiply, np.float64, True), (np.add, np.float64, True),
            (np.exp, np.float64, False), (np.tanh, np.float64, True),
            (np.add, np.float32, True), (np.multiply, np.float32, True),
            (np.cos, np.float64, True), (np.subtract, np.float64, False),
            (np.sin, np.float64, True), (np.maximum, np.float64, False),
            (np.multiply, np.complex128, False)} <= set(taken)


def _counting_assigned_back(monkeypatch):
    """``tracing.assigned_back``'s answers, in the order it gave them."""
    assigned_back = tracing.assigned_back
    answers = []

    def counted(x, key, value):
        answers.append(assigned_back(x, key, value))
        return answers[-1]

    monkeypatch.setattr(tracing, "assigned_back", counted)
    return answers


def test_an_augmented_assignment_of_a_slice_assigns_its_view_back_as_nothing(monkeypatch):
    """``x[key] op= v`` ends with Python's ``x[key] = view`` of the view it updated, which
    ``tracing.assigned_back`` knows for the no-op it is, also where the right-hand side read
    other views of ``x`` first; the records and gradients are the general path's."""
    def f(u, a):
        u = u * 1.0
        for _ in range(3):
            u[1:-1] += a * (u[2:] - 2 * u[1:-1] + u[:-2])
            u[0, 1:] *= a
            rows = slice(1, None)  # (one key object: ``u[1:]`` makes one on each use)
            v = u[rows]
            u[:2] -= 1.0
            u[rows] = v  # (written through another view first: still the same memory)
        return (u * u).sum()

    args = (np.linspace(0.5, 2.0, 12).reshape(4, 3), 0.25)
    answers = _counting_assigned_back(monkeypatch)
    fast = mutad.gradient(f, *args)
    assert answers.count(True) == 4 * 3 and not answers.count(False)
    mutad.check_grads(f, *args)
    _general_path_only(monkeypatch)
    general = mutad.gradient(f, *args)
    for g, h in zip(fast, general):
        assert np.asarray(g).tobytes() == np.asarray(h).tobytes()


def test_an_assignment_back_of_a_view_whose_region_may_have_changed_is_not_nothing(
        monkeypatch):
    """``assigned_back`` leaves to the general path ``x[key] = view`` where ``key`` or ``x``
    may no longer name the view's region: a slice bounded by 0-d arrays written after the
    view was read (NumPy then copies the view to its new place), ``x`` reshaped in place
    (NumPy's error), another key, another array of the same buffer, a view given a shape of
    its own."""
    def bounds(u):
        u = u * 1.0
        start, stop = np.array(1), np.array(3)
        key = slice(start, stop)
        v = u[key]
        start[...], stop[...] = 2, 4
        u[key] = v  # u[2:4] = (the values of u[1:3])
        return (u * np.arange(1.0, 6.0)).sum()

    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    answers = _counting_assigned_back(monkeypatch)
    assert mutad.value_and_grad(bounds)(x)[0] == bounds(x)
    assert answers == [False]
    mutad.check_grads(bounds, x)

    def reshaped(u):
        u = u * 1.0
        v = u[1:]
        u.shape = (3, 2)
        u[1:] = v  # (1, 3) into (2, 2)
        return u.sum()

    with pytest.raises(ValueError) as numpys:
        reshaped(np.ones((2, 3)))
    answers.clear()
    with pytest.raises(ValueError) as mutads:
        mutad.gradient(reshaped, np.ones((2, 3)))
    assert str(mutads.value) == str(numpys.value) and answers == [False]

    def others(u):
        u = u * 1.0
        w = u[:]  # (another traced array of u's memory)
        k = slice(1, 3)
        v = u[k]
        u[slice(2, 4)] = v  # (another key)
        v = u[k]
        w[k] = v
        t = u[k]
        t.shape = (1, 2)  # (another array of the view's memory)
        u[k] = t
        return (u * np.arange(1.0, 7.0)).sum()

    answers.clear()
    y = np.arange(6.0)
    assert mutad.value_and_grad(others)(y)[0] == others(y)
    assert answers == [False, False, False]
    mutad.check_grads(others, y)


def test_operators_and_functions_of_one_array_take_the_dispatchs_short_paths(monkeypatch):
    taken = []
    fast_ufunc = tracing.fast_ufunc

    def counted(ufunc, *arguments):
        taken.append(ufunc)
        return fast_ufunc(ufunc, *arguments)

    monkeypatch.setattr(tracing, "fast_ufunc", counted)

    def f(a, b):
        return np.sum(np.sin(a) * 2.0 + 1.5 * (a - b) + np.tanh(a) / 3 - a @ b)

    mutad.check_grads(f, np.linspace(0.5, 1.5, 4), np.linspace(-1.0, 1.0, 4))
    assert {np.sin, np.tanh, np.multiply, np.subtract, np.true_divide, np.matmul} <= set(taken)


def test_operations_on_python_numbers_give_the_general_paths_gradients(monkeypatch):
    """A float argument stands for a Python number (weak): operators on it and on arrays, and
    functions of it, take the general path, with the arrays' own beside them."""

    def f(a, k, n):
        y = a * k + k * a + np.sin(k) * a + a * (k * k) - a / k + a * n + n * a + np.sin(k * a)
        return np.sum(y * y) + k * k

    args = (np.linspace(0.5, 1.5, 3), 0.7, 3)
    fast = mutad.value_and_grad(f, argnums=(0, 1))(*args)
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        general = mutad.value_and_grad(f, argnums=(0, 1))(*args)
    assert fast[0] == general[0]
    assert np.array_equal(fast[1][0], general[1][0]) and fast[1][1] == general[1][1]
    assert type(fast[1][1]) is type(general[1][1])


def test_a_product_with_a_constant_operand_takes_its_own_path_and_a_recording_the_traced_one(
        monkeypatch):
    taken = []
    fast_function, constant_product = operations._fast_function, operations._constant_product

    def counted(*arguments):
        taken.append((str(arguments[4].primitive), False))
        return fast_function(*arguments)

    def constants(plan, *arguments):
        taken.append((str(plan.primitive), True))  # (constant operands)
        return constant_product(plan, *arguments)

    monkeypatch.setattr(operations, "_fast_function", counted)
    monkeypatch.setattr(operations, "_constant_product", constants)
    c = np.linspace(0.5, 1.5, 3)

    def f(a):
        return np.sum((a @ c) * (c @ a.reshape(1, 3).T))  # a constant operand each time

    assert np.allclose(mutad.gradient(f, np.ones(3)), 2 * (c @ np.ones(3)) * c)
    assert taken.count(("np.matmul", True)) == 2 and ("np.matmul", False) not in taken
    taken.clear()
    g = mutad.value_and_grad(lambda a: np.sum(a @ a), replay=True)
    for _ in range(3):  # recorded, then replayed
        assert np.array_equal(g(np.arange(3.0))[1], 2 * np.arange(3.0))
    # the recording's product of traced operands alone (``observed_ufunc``), the replays' none
    # (np.sum of the products takes it too)
    assert [t for t in taken if t[0] == "np.matmul"] == [("np.matmul", False)]


def test_nested_differentiations_of_products_match_the_general_path(monkeypatch):
    """An inner differentiation's products are arrays the outer tape traces: the inner tape takes
    the general path, the outer one may take the fast one."""
    m = np.random.default_rng(5).standard_normal((3, 3))

    def f(a):
        return np.sum((a @ m @ a) * (a @ a)) + np.sum(np.sin(a) @ np.cos(a))

    x = np.random.default_rng(6).standard_normal(3)
    fast = mutad.hessian(f, np.copy(x))
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        general = mutad.hessian(f, np.copy(x))
    assert np.array_equal(fast, general)
    mutad.check_grads(f, x, order=2, modes=["rev"])


@pytest.mark.parametrize("n", [9, 20_000], ids=["short", "long"])
def test_a_difference_of_slices_gives_the_bits_of_adding_the_negated_cotangent(n):
    # Long cotangents of subtract's second operand are subtracted into the shadow, and a first
    # cotangent into a run of a shadow is written there with zeros around it
    # (``elementwise_cotangents``, ``Shadows.subtract``, ``Shadows._fresh_run``); short ones are
    # negated and added into a zero-filled shadow. Both give that path's bits: signed zeros
    # included (0.0 + -0.0 is +0.0), with an infinite cotangent, traced and replayed.
    rng = np.random.default_rng(3)
    w = rng.standard_normal(n - 1)
    w[::3] = 0.0
    w[1::5] = -0.0
    w[-1] = np.inf
    x0 = rng.standard_normal(n)

    def f(x):
        d = x[1:] - x[:-1]
        e = 1.5 - d  # the negated operand is the only one traced: it takes dy's memory
        return np.sum(w * d) + np.sum(w[::-1] * e)

    # the reverse pass: e's cotangent negated into d's new shadow, w * d's added, then d's
    # into x: negated into the run x[:-1] of a zero-filled shadow, then added at x[1:]
    d_bar = np.multiply(w[::-1], -1.0) + w
    expected = np.zeros(n)
    expected[:-1] += np.multiply(d_bar, -1.0)
    expected[1:] += d_bar
    before = x0.copy()
    (g,) = mutad.gradient(f, x0)
    assert x0.tobytes() == before.tobytes()
    replayed = mutad.grad(f, replay=True)
    for _ in range(3):
        assert replayed(x0).tobytes() == g.tobytes()
    assert g.tobytes() == expected.tobytes()


@pytest.mark.parametrize("n", [9, 20_000], ids=["short", "long"])
@pytest.mark.parametrize("special", [False, True], ids=["finite", "zeros-and-inf"])
def test_the_two_factors_of_a_square_give_the_bits_of_two_products(n, special):
    # The cotangents of x * x into its two factors, one place and the same values, are one
    # product added twice (``elementwise._twin_product``) where long: into a whole buffer with
    # no shadow yet (which must not become that product itself), into a run of one, into an
    # existing shadow; the bits of two products added in turn, traced and replayed.
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal(n)
    w, v = rng.standard_normal(n), rng.standard_normal(n - 1)
    if special:
        x0[::4] = 0.0
        x0[1::7] = -0.0
        w[2] = np.inf

    def f(x):
        return np.sum(w * (x * x)) + np.sum(v * (x[1:] * x[1:]))

    with np.errstate(invalid="ignore"):
        # (with an infinite w, every zero factor's product is +0.0: products.times' mask)
        g1, g2 = times(w, x0), times(v, x0[1:])
        expected = np.zeros(n)
        expected[1:] += g2
        expected[1:] += g2
        expected += g1
        expected += g1
        (g,) = mutad.gradient(f, x0)
        replayed = mutad.grad(f, replay=True)
        for _ in range(3):
            assert replayed(x0).tobytes() == g.tobytes()
        (alone,) = mutad.gradient(lambda x: np.sum(w * (x * x)), x0)  # a whole new shadow
    assert g.tobytes() == expected.tobytes()
    assert alone.tobytes() == (g1 + g1).tobytes()


def _by_every_mode(f, args):
    """``f``'s results by every mode that reaches the write of an element: the gradient by
    each policy, under a memory budget (rebuilt, not saved) and anomaly detection, recorded
    then replayed, the Hessian of its first argument (nested), forward mode's derivative;
    each checks the caller's arrays come back bit for bit."""
    results = []

    def given():
        return [np.copy(a) for a in args]

    def unchanged(copies):
        for a, c in zip(args, copies, strict=True):
            assert a.tobytes() == c.tobytes()

    for options in ({"policy": "restore"}, {"policy": "checkpoint"}, {"memory": 64.0}):
        copies = given()
        results.append(mutad.value_and_grad(f, argnums=tuple(range(len(args))),
                                            **options)(*copies))
        unchanged(copies)
    copies = given()
    with mutad.detect_anomaly():  # (which watches each write: record_write's own)
        try:
            results.append(mutad.value_and_grad(f, argnums=tuple(range(len(args))))(*copies))
        except mutad.MutadError as error:  # a NaN made on purpose: the same report
            results.append(str(error))
    unchanged(copies)
    replayed = mutad.value_and_grad(f, argnums=tuple(range(len(args))), replay=True)
    for _ in range(3):  # recorded, then replayed
        copies = given()
        results.append(replayed(*copies))
        unchanged(copies)
    copies = given()
    results.append(mutad.hessian(f, *copies))
    unchanged(copies)
    copies = given()
    results.append(mutad.jvp(f, copies, [np.ones_like(a) for a in copies]))
    unchanged(copies)
    return results


def _bits(results):
    """Each leaf of ``results`` as its dtype and bytes."""
    return [(np.asarray(leaf).dtype, np.asarray(leaf).tobytes())
            for leaf in flatten(results)[0]]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("name", ["seidel", "lu", "cholesky", "elements", "numbers", "aliases",
                                  "overwritten"])
def test_an_elements_own_write_gives_the_general_paths_bits_in_every_mode(name, monkeypatch):
    """The element's own write (``inplace.record_element_write``) against ``record_write``, by
    each policy, under a budget (which it leaves to ``record_write``), in a recording and its
    replays, nested and beside forward mode: the same values and derivatives bit for bit."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(11))
    lean = _bits(_by_every_mode(f, args))
    with monkeypatch.context() as patched:
        patched.setattr(operations, "record_element_write", lambda *arguments: None)
        general = _bits(_by_every_mode(f, args))
    assert lean == general


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("name", ["statements", "seidel", "lu", "cholesky", "elements",
                                  "numbers", "aliases", "written", "read", "overwritten"])
def test_the_element_paths_give_the_general_paths_bits_in_every_mode(name, monkeypatch):
    """A scalar loop's reads and writes of elements, and its augmented assignments of values
    standing for NumPy's scalars, by their one-function paths (``tracing._element_read``,
    ``tracing._element_written``, ``tracing._fast_operator``'s), against the general paths:
    the same values and derivatives bit for bit, by each policy, under a budget and anomaly
    detection, recorded and replayed, nested and beside forward mode. The paths are taken."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(15))
    taken = []
    read, written = tracing._element_read, tracing._element_written

    def counted_read(x, key):
        y = read(x, key)
        taken.append(("read", y is not None))
        return y

    def counted_written(x, key, value):
        done = written(x, key, value)
        taken.append(("written", done))
        return done

    with np.errstate(all="ignore"):
        with monkeypatch.context() as patched:
            # (as the engine's functions: the lines records name are the program's, above)
            patched.setattr(tracing, "_element_read", _as_the_engines(counted_read))
            patched.setattr(tracing, "_element_written", _as_the_engines(counted_written))
            fast = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            _general_path_only(patched)
            assert _bits(_by_every_mode(f, args)) == fast
    assert ("read", True) in taken
    if name not in ("read",):
        assert ("written", True) in taken


def _taken_by_a_view(shadows, place, key=None):
    """``Shadows.take`` by the view of ``place`` alone (no element found by its index)."""
    if place.whole and key is None:
        return shadows.pop(place.buffer)
    view = shadows.get(place)
    if view is None:
        return None
    if key is None:
        dy = view.copy()
        view[...] = 0
    else:
        dy = view[key]
        view[key] = 0
    return dy


def _put_back_through_a_view(undo):
    """``ElementWrite.__call__`` through the element's 0-d view alone."""
    region = undo.region
    if type(region) is not np.ndarray:
        region = current_region(region)
        if region is None:
            return
    region[()] = undo.saved


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("name, special", [("overwritten", False), ("overwritten", True),
                                           ("aliases", True)])
def test_element_writes_reversed_by_their_index_give_the_bits_of_their_views(
        name, special, monkeypatch):
    """The reverse pass of an element's write, the cotangent taken and the element put back
    by its index in the flat shadow and in the array (``Shadows.take``, ``ElementWrite``),
    against the 0-d views they stand for: the same values and derivatives bit for bit in
    every mode, over arrays of each kind an element's undo tells apart (float64, float32,
    float16, Fortran-ordered, followed or held) and NaN (a payload), infinities, signed zeros
    and subnormals."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(23))
    if special:
        payload = np.array([0x7FF8_0000_0000_0321], np.uint64).view(np.float64)[0]
        args = tuple(np.concatenate([[payload, -0.0, np.inf, 5e-324], a.ravel()])[:a.size]
                     .reshape(a.shape) for a in args)
    with np.errstate(all="ignore"):
        lean = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            patched.setattr(Shadows, "take", _taken_by_a_view)
            patched.setattr(elementwise.ElementWrite, "__call__", _put_back_through_a_view)
            assert _bits(_by_every_mode(f, args)) == lean


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
def test_an_element_write_keeps_numpys_scalar_of_the_element_and_puts_back_its_bits(
        monkeypatch):
    """The undo of an element's own write keeps the element as NumPy's scalar of its dtype (no
    0-d copy), holding the region where no reference follows its buffer, else its place; what
    it puts back is every bit the element held: a NaN's payload, -0.0, a subnormal, which the
    products recorded before the writes read in the reverse pass, as the general path's
    copies give them back."""
    payload = np.array([0x7FF8_0000_0000_0123], np.uint64).view(np.float64)[0]
    a = np.array([payload, -0.0, 5e-324, -np.inf])
    b = np.array([0.5, -0.0, np.inf, 2.0])
    with ReverseDifferentiation("restore") as d:
        d.call(_overwritten_elements, d.wrap([np.copy(a), np.copy(b)]))
        undos = [r.undo for r in d.tape.records if type(r.undo) is elementwise.ElementWrite]
    assert len(undos) == 11
    assert {type(u.region) is np.ndarray for u in undos} == {True, False}  # held, found
    assert {u.saved.dtype for u in undos} == {np.dtype(t) for t in ("f8", "f4", "f2")}
    assert all(isinstance(u.saved, np.generic) for u in undos)
    lean = _bits(_by_every_mode(_overwritten_elements, (a, b)))
    with monkeypatch.context() as patched:
        patched.setattr(operations, "record_element_write", lambda *arguments: None)
        general = _bits(_by_every_mode(_overwritten_elements, (a, b)))
    assert lean == general


def test_reads_are_folded_only_where_nothing_else_can_reach_their_values():
    """The reads of elements used at once are folded into the operation that used them; a read
    whose value a variable keeps, or that ran under an ``np.errstate`` block of its own, keeps
    its record (of the three steps of the loop: one kept value, the block's two reads)."""
    args = PROGRAMS["read"][1](np.random.default_rng(1))
    with ReverseDifferentiation("restore") as d:
        d.call(_elements_read, d.wrap([np.copy(a) for a in args]))
        kinds = [type(r).__name__ for r in d.tape.records]
    assert kinds.count("Gathered") == 3 * 3
    assert kinds.count("ElementsRead") == 3 * 8


def test_the_reads_of_an_arguments_element_share_one_pair_of_place_and_key():
    """The records of the reads of one element of an argument, on every step of a loop, hold
    one ``(place, key)`` pair (as its views share one place); reads of an element of a
    temporary, and reads by other keys, hold pairs of their own."""
    def reads(a):
        z = a * 1.0
        s = 0.0
        for _ in range(3):
            s = s + a[1] * a[-1] + a[1:][0] + z[1]
            kept = a[1]
            s = s + kept + z[1]
        return s

    with ReverseDifferentiation("restore") as d:
        d.call(reads, d.wrap([np.arange(1.0, 5.0)]))
        pairs = [inputs for r in d.tape.records
                 for inputs in ([r.inputs] if type(r) is elementwise.Gathered else
                                [x for x in r.inputs if type(x) is tuple])]
    held = [pair for pair in pairs if type(pair[0].buffer.ref) is Held]
    whole = [pair for pair in held if pair[0].whole]
    assert sorted(pair[1] for pair in whole) == [-1] * 3 + [1] * 6  # a[1], a[-1], kept
    assert len({id(pair) for pair in whole}) == 2
    view = [pair for pair in held if not pair[0].whole]
    assert len(view) == 3 and len({id(pair) for pair in view}) == 1  # a[1:][0]
    temporary = [pair for pair in pairs if type(pair[0].buffer.ref) is not Held]
    assert len(temporary) == 6 and len({id(pair) for pair in temporary}) == 6  # z[1]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("name", ["read", "seidel", "lu", "cholesky", "elements", "aliases"])
def test_shared_pairs_of_reads_give_the_bits_of_pairs_of_their_own_in_every_mode(
        name, monkeypatch):
    """The reads of an argument's elements sharing their pairs against each read's own pair
    (no buffer taken as an argument's): the same values and derivatives bit for bit, by each
    policy, under a budget and anomaly detection, recorded and replayed, nested and beside
    forward mode."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(14))
    with np.errstate(all="ignore"):
        shared = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            patched.setattr(tracing, "Held", type("Other", (), {}))
            assert _bits(_by_every_mode(f, args)) == shared


def test_a_value_written_at_once_passes_its_cotangent_through_a_stand_in():
    """The values the loop computes and writes at once have no buffer of their own on the
    tape: the record that made each and the write share the stand-in (``elementwise.
    fold_written``); a value kept in a variable and written twice keeps its buffer."""
    args = (np.arange(1.0, 5.0), np.arange(2.0, 6.0))
    with ReverseDifferentiation("restore") as d:
        d.call(_values_written, d.wrap([np.copy(a) for a in args]))
        inputs = [r.inputs[0] for r in d.tape.records
                  if type(r).__name__ in ("Write", "ElementWrite") and r.written.shape == ()]
        assert len(inputs) == 5 * 3
        stand_in = elementwise._stand_in(np.dtype(float), "written")
        assert sum(x is stand_in for x in inputs) == 3 * 3  # z[i] = a * b, z[i + 1] += ..., v * v
        assert sum(type(x) is Buffer and x is not stand_in for x in inputs) == 2 * 3


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
@pytest.mark.parametrize("name", ["read", "beside", "chains", "written", "seidel", "lu",
                                  "cholesky", "elements", "numbers", "aliases", "overwritten"])
def test_folded_reads_and_writes_give_the_bits_of_their_own_records_in_every_mode(
        name, special, monkeypatch):
    """An operation with the reads of its elements folded in (``elementwise.ElementsRead``),
    and a value written through a stand-in (``elementwise.fold_written``), against the records
    of those reads and of the operation, and the value's own buffer: the same values and
    derivatives bit for bit, by each policy, under a budget and anomaly detection, recorded
    and replayed, nested and beside forward mode; with NaN (a payload), infinities and signed
    zeros too."""
    f, args = _program(name, 12, special)
    with np.errstate(all="ignore"):
        folded = _bits(_by_every_mode(f, args))
        for unfolded in ("fold_reads", "fold_written"):
            with monkeypatch.context() as patched:
                patched.setattr(reverse, unfolded, lambda records, errors_of=None: None)
                assert _bits(_by_every_mode(f, args)) == folded, unfolded


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
@pytest.mark.parametrize("name", ["chains", "read", "beside", "seidel", "statements"])
def test_cotangents_handed_along_a_chain_give_the_bits_of_shadows_in_every_mode(
        name, special, monkeypatch):
    """A run of folded records reversed in one loop, each handing the cotangent of the value
    the next one made on as Python's float (``elementwise.reverse_folded``), against the same
    loop handing nothing on, which makes that cotangent a shadow the next one takes: the same
    values and derivatives bit for bit, by each policy, under a budget and anomaly detection,
    recorded and replayed, nested and beside forward mode. (Against records of their own,
    unfolded: ``test_folded_reads_and_writes_give_the_bits_of_their_own_records_in_every_mode``.)"""
    f, args = _program(name, 13, special)
    handed = []
    scalar_back = elementwise._scalar_back

    def noted(*arguments):
        done = scalar_back(*arguments)
        if type(done) is tuple:
            handed.append(done)
        return done

    def never_handing(shadows, state, d, inputs, kept, positions, handing=None):
        return scalar_back(shadows, state, d, inputs, kept, positions)

    with np.errstate(all="ignore"):
        with monkeypatch.context() as patched:
            patched.setattr(elementwise, "_scalar_back", noted)
            chained = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            patched.setattr(elementwise, "_scalar_back", never_handing)
            assert _bits(_by_every_mode(f, args)) == chained
    if name in ("chains", "seidel") and not special:  # (their chains hand cotangents on)
        assert handed


@pytest.mark.parametrize("operands", ["twice", "viewed", "read from"])
def test_a_cotangent_is_handed_on_only_where_the_record_names_its_buffer_once(operands):
    """``elementwise._scalar_back`` hands a cotangent on (``reverse_folded``) only into a
    buffer its record names once, as an operand that is no read: where it names it twice, or
    a view or a read names it too, those add to its shadow as well, so the shadow is made as
    without a buffer to hand to, bit for bit. (A ufunc of three operands: no NumPy ufunc the
    engine folds reads into has so many, so the record is made here.)"""
    from mutad.core.registry import ONE, ElementwiseRule

    rule = ElementwiseRule((ONE, ONE, ONE))
    handing = Buffer(np.array(0.0))
    other = Buffer(np.zeros(3))
    view = Place(handing, False, 0, (), (), handing.dtype)
    second, source = {"twice": (handing, other), "viewed": (view, other),
                      "read from": (handing, handing)}[operands]
    inputs = (handing, second, (source, 1 if source is other else ()))

    def shadows_after(hand):
        shadows = Shadows()
        shadows.entries[other.key] = [other, np.arange(3.0), None, None]
        done = elementwise._scalar_back(shadows, (rule, (0, 1, 2)), 0.375, inputs,
                                        (None,) * 3, (2,), hand)
        return done, [(key, entry[1].tobytes()) for key, entry in shadows.entries.items()]

    assert shadows_after(handing) == shadows_after(None)
    assert shadows_after(handing)[0] is True


def _gathered_back_by_the_shadows_view(gathered_back):
    """``gathered_back`` (``elementwise._gathered_back``) by ``Shadows.of`` alone: a buffer
    read from is named by a place that is all of it (no shadow found by the buffer's key)."""

    def general(shadows, dy, inputs, repeats):
        source, key = inputs
        if type(source) is Buffer:
            source = Place(source, True, 0, source.shape, source.strides, source.dtype)
        gathered_back(shadows, dy, (source, key), repeats)

    return general


_NEVER_LENT = np.empty((0, 0, 0, 0), np.int8)
"""A spare of ``Shadows`` no cotangent is like (``Shadows.empty_like`` never takes it)."""


def _write_pullback_through_its_cotangents(write_pullback):
    """``write_pullback`` (``elementwise.write_pullback``) by ``write_cotangents`` for every
    undo: with a spare lent before, which it lets go of after the cotangents (not this one,
    which no cotangent takes)."""

    def general(record, shadows, dy):
        if shadows.spare is None:
            shadows.spare = _NEVER_LENT
        try:
            write_pullback(record, shadows, dy)
        finally:
            if shadows.spare is _NEVER_LENT:
                shadows.spare = None

    return general


def _with_special_values(args):
    """``args`` with their first elements a NaN (with a payload), -0.0 and infinity."""
    payload = np.array([0x7FF8_0000_0000_0321], np.uint64).view(np.float64)[0]
    return tuple(np.concatenate([[payload, -0.0, np.inf], a.ravel()])[:a.size]
                 .reshape(a.shape) for a in args)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
@pytest.mark.parametrize("name", ["statements", "read", "written", "seidel", "cholesky",
                                  "aliases", "overwritten"])
def test_the_reverse_shortcuts_of_elements_give_the_general_paths_bits_in_every_mode(
        name, special, monkeypatch):
    """The reverse pass's shortcuts for a scalar loop, a read's cotangent added into its
    buffer's shadow found by key (``elementwise._gathered_back``) and a write's pullback
    straight to its cotangents where nothing is lent (``elementwise.write_pullback``), against
    ``Shadows.of`` and ``write_cotangents`` for every one: the same values and derivatives bit
    for bit, by each policy, under a budget and anomaly detection, recorded and replayed,
    nested and beside forward mode; with NaN (a payload), infinities and signed zeros too."""
    f, args = _program(name, 16, special)
    with np.errstate(all="ignore"):
        lean = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            patched.setattr(elementwise, "_gathered_back",
                            _gathered_back_by_the_shadows_view(elementwise._gathered_back))
            # (plans made afresh: each holds the pullback it was made with)
            patched.setattr(operations, "write_pullback",
                            _write_pullback_through_its_cotangents(operations.write_pullback))
            patched.setattr(operations, "_ELEMENT_PLANS", {})
            patched.setattr(operations.WritePlan, "_shared", {})
            assert _bits(_by_every_mode(f, args)) == lean


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
def test_plain_settings_take_the_fast_path_and_give_the_general_paths_bits_in_every_mode(
        monkeypatch):
    """NumPy's functions of traced arrays with plain settings (``x.sum(axis=0)``) are
    ``_fast_function``'s, handed their settings, the others the general path's; against the
    general path for every call: the same values and derivatives bit for bit, by each policy,
    under a budget and anomaly detection, recorded and replayed, nested and beside forward
    mode, with NaN (a payload), infinities and signed zeros among the operands. (Of finite
    ones, the records too: ``test_the_fast_paths_give_the_general_paths_records_...``.)"""
    f, args = _program("settings", 17, True)
    taken = []
    fast_function = operations._fast_function

    def noted(*arguments):
        taken.append(arguments[6] if len(arguments) > 6 else None)
        return fast_function(*arguments)

    with np.errstate(all="ignore"):
        with monkeypatch.context() as patched:
            patched.setattr(operations, "_fast_function", noted)
            fast = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            _general_path_only(patched)
            general = _bits(_by_every_mode(f, args))
    assert fast == general
    for settings in ({"axis": 0}, {"axis": 1, "keepdims": True}, {"axis": (0, 1)},
                     {"axis": 0, "ddof": 1}, {"axis": None, "dtype": None}):
        assert settings in taken
    for settings in filter(None, taken):  # (not a dtype, NumPy's integer, where=, initial=)
        assert all(type(v) in (int, bool, tuple, type(None)) for v in settings.values())
        assert not {"where", "initial", "out"}.intersection(settings)


def test_products_of_traced_operands_are_recorded_as_their_plain_functions():
    """A product whose operands are all traced is recorded with the plain ``back`` its rule
    offers (``operations.Product``), on the fast path and the general one (np.outer); one
    with a constant operand too, from the second product of its shapes on (the first, the
    general path's, finds its output small enough to need no recipe), the traced operand's
    alone; one with a batch or complex values keeps the record of the rule's closure."""
    def kinds(f, args):
        with ReverseDifferentiation("restore") as d:
            d.call(f, d.wrap([np.copy(a) for a in args]))
            return [(repr(r.primitive), type(r).__name__) for r in d.tape.records
                    if repr(r.primitive) in ("np.matmul", "np.outer")]

    rng = np.random.default_rng(2)
    products = kinds(_products, PROGRAMS["products"][1](rng))
    assert ("np.matmul", "Product") in products and ("np.matmul", "Record") in products
    args = PROGRAMS["outer"][1](rng)
    kinds(_outer_products, args)
    outer = kinds(_outer_products, args)
    assert outer.count(("np.outer", "Product")) == 3
    assert {kind for _, kind in kinds(_complex_products, PROGRAMS["complex"][1](rng))} \
        == {"Record"}


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
@pytest.mark.parametrize("name", ["products", "outer", "complex", "float32", "lu", "cholesky"])
def test_products_by_plain_functions_give_the_bits_of_the_rules_closures_in_every_mode(
        name, special, monkeypatch):
    """A product recorded with its rule's plain ``back`` (``operations.Product``: arguments
    that are parts of buffers add their cotangents without asking whose memory they are)
    against the record of the rule's closure, its products by ``product_times``' general
    path (no short check): the same values and derivatives bit for bit in every mode that
    reaches it, with NaN, infinities and signed zeros too."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(13))
    if special:
        args = tuple(np.concatenate([[np.nan, -0.0, np.inf], a.ravel()])[:a.size]
                     .reshape(a.shape) for a in args)
    with np.errstate(all="ignore"):
        plain = _bits(_by_every_mode(f, args))
        with monkeypatch.context() as patched:
            patched.setattr(operations, "_plain_functions", lambda rule, values, kwargs: None)
            _products_checked_in_full(patched)
            closures = _bits(_by_every_mode(f, args))
    assert plain == closures


def _warned(function, *args):
    """``function(*args)``'s bits and the warnings it gave, every one heard."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        result = function(*args)
    return _bits(result), [(w.category, str(w.message), w.lineno) for w in heard]


def _products_checked_in_full(patched):
    """Every check of ``products`` that a product is finite finds it may not be (BLAS's dot
    product, ``_vdot``, says NaN): the general path of ``product_times`` and ``unmasked``."""
    patched.setattr(products, "_vdot", lambda p, q: math.nan)


_SPECIALS = [1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300, -1e-300, 5e-324]


@pytest.mark.parametrize("dy", _SPECIALS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_dot_products_cotangents_are_the_bits_of_the_general_products(dy, dtype, monkeypatch):
    # ``product_times``' first answer for a short real product (the product, where finite),
    # against its general path: the same bits and warnings with zeros, signed zeros,
    # infinities, NaNs of either sign, products past the floats.
    with np.errstate(over="ignore"):  # (float32's casts)
        a = np.array([1.0, -0.0, 0.0, np.inf, -np.inf, np.nan, 1e300, -3.0, 5e-324, 7.0], dtype)
        b = np.array([2.0, np.inf, -np.nan, 0.0, -1e300, -np.nan, 1e10, -0.0, 0.5, -0.0],
                     dtype)
        d = np.array(dy, dtype)
    for u, v in ((a, b), (a[:7:3], b[1:4]), (a[-3:], b[-3:])):
        fast = _warned(contractions._dot_back, d, u, v)
        with monkeypatch.context() as patched:  # (no product short: NumPy's sum checks it)
            patched.setattr(products, "UNTHREADED", 0)
            assert _warned(contractions._dot_back, d, u, v) == fast
            # and every product by ``product_times``' general path (a finite, non-zero
            # float64 cotangent's are NumPy's products, asked nothing: the same bits, and
            # NumPy's warnings, which the general path's second pass over the finite parts
            # may repeat)
            _products_checked_in_full(patched)
            general = _warned(lambda dy, p, q: (products.product_times(np.multiply, dy, q),
                                                products.product_times(np.multiply, p, dy)),
                              d, u, v)
        assert general[0] == fast[0]
        assert {w[:2] for w in general[1]} == {w[:2] for w in fast[1]}


def test_a_short_finite_product_is_answered_without_the_general_check(monkeypatch):
    def refused(p):
        raise AssertionError("the general check of a finite product")

    monkeypatch.setattr(products, "_finite", refused)
    b = np.linspace(-1.0, 1.0, 7)
    da, db = contractions._dot_back(np.array(0.5), b[::-1], b)
    assert da.tobytes() == (0.5 * b).tobytes() and db.tobytes() == (b[::-1] * 0.5).tobytes()


def _repeated_operands(a, b):
    """Elementwise operations whose cotangents meet: an operand twice (``a + a``, ``a * a``,
    ``a - a``), a shadow made earlier in the reverse pass or not yet, a partial of one and
    one that is not in one operation, broadcasting (a sum over the stretched axis), views, a
    0-d operand, float32 and complex operands, a value reused by every step of a chain."""
    s = a + a
    p = a * a - b
    t = np.hypot(a, a) + np.tanh(s) * p
    m = a[:, None] + b
    v = a[1:] * a[:-1] + b[1:] - b[:-1]
    z = a + 1j * b
    w = np.sin(z) * z
    a32 = a.astype(np.float32)
    h = a32 * a32 + a32
    r = a[0] - a[0] * b[0]
    x = b
    for _ in range(4):
        x = np.sin(x) * 0.5 + x * a - x
    return (np.sum(t * t) + np.sum(m * m) + np.sum(v) + np.real(np.sum(w * np.conj(w)))
            + np.sum(h) + r + np.sum(x))


class _Deferred:
    """The shadows as ``_small_cotangents`` sees them, adding each product it owns
    (``owned=True``) only once every one is made (``flush``): the order in which it added
    them before it added each as soon as it was made."""

    def __init__(self, shadows):
        self.shadows = shadows
        self.rows = []

    def has(self, place):
        return self.shadows.has(place)

    def add(self, place, g, owned=False):
        if owned:
            self.rows.append((place, g))
        else:
            self.shadows.add(place, g)

    def flush(self):
        for place, g in self.rows:
            self.shadows.add(place, g, owned=True)


def test_small_cotangents_added_as_made_give_the_bits_of_adding_them_after(monkeypatch):
    """The cotangents of small elementwise records (``elementwise._small_cotangents``) added
    as each is made, against the same products added once all are made, in every mode: the
    same bits (a later product reads no shadow)."""
    args = (np.random.default_rng(5).standard_normal(6),
            np.random.default_rng(6).standard_normal(6))
    small = elementwise._small_cotangents
    calls = []

    def counted(shadows, *arguments):
        calls.append(arguments[-1])
        return small(shadows, *arguments)

    def deferred(shadows, *arguments):
        rows = _Deferred(shadows)
        small(rows, *arguments)
        rows.flush()

    monkeypatch.setattr(elementwise, "_small_cotangents", counted)
    lean = _bits(_by_every_mode(_repeated_operands, args))
    assert (0, 1) in calls and (0,) in calls  # both operands traced, and one
    with monkeypatch.context() as patched:
        patched.setattr(elementwise, "_small_cotangents", deferred)
        after = _bits(_by_every_mode(_repeated_operands, args))
    assert lean == after


def _chains_between_writes(a, b):
    """Runs of small elementwise operations between writes into their operands: a traced 0-d
    value broadcast against them (its cotangent summed), views of an array as operands, an
    operand whose shadow exists when its record is reversed and one whose shadow does not,
    a partial that is infinite where the cotangent is zero (``products.times``' mask)."""
    c = a[0] * b[0]  # a traced 0-d value
    x = b.copy()
    for k in range(3):
        u = np.sin(x) * c + x * a
        v = u - x
        q = np.sqrt(x * 0.0)  # an infinite partial, the cotangent that reaches it zero
        x = v * 1.5 + q * 0.0 + u
        x[1:] += x[:-1] * a[1:]  # a write between runs, of views
        x = np.tanh(x) + x[::-1] * c
    return np.sum(x * a) + np.sum(_repeated_operands(a, b))


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # sqrt's partial at 0
@pytest.mark.parametrize("name", ["repeated", "chains"])
def test_runs_of_small_records_reversed_in_one_loop_give_the_bits_of_their_pullbacks(
        name, monkeypatch):
    """The traced reverse pass's loop over a run of elementwise records
    (``elementwise.reverse_elementwise``), whose float64 products are added to whole buffers'
    shadows directly (``_lean_cotangents``), against each record's own pullback one at a time
    (anomaly detection checks each record: no run) and against ``_small_cotangents``: the
    same bits in every mode."""
    f = {"repeated": _repeated_operands, "chains": _chains_between_writes}[name]
    args = (np.random.default_rng(8).standard_normal(6),
            np.random.default_rng(9).standard_normal(6))
    lean = elementwise._lean_cotangents
    patterns = []

    def counted(shadows, entries, rule, dy, y, places, values, traced):
        patterns.append(traced)
        return lean(shadows, entries, rule, dy, y, places, values, traced)

    monkeypatch.setattr(elementwise, "_lean_cotangents", counted)
    results = _by_every_mode(f, args)
    assert (0, 1) in patterns and (0,) in patterns  # both operands traced, and one
    restore, anomaly = _bits(results[0]), _bits(results[3])
    assert restore == anomaly
    with monkeypatch.context() as patched:
        patched.setattr(elementwise, "_lean_cotangents",
                        lambda shadows, entries, *rest: elementwise._small_cotangents(
                            shadows, *rest))
        assert _bits(_by_every_mode(f, args)) == _bits(results)


def _one_at_a_time(records, shadows, watch):
    """``reverse_elementwise`` as the general loop of ``ReverseTape.replay`` reverses a pure
    record: its pullback, then its output forgets its recipe; one record."""
    record = watch.record = records.pop()
    record.pullback(record, shadows, None)
    record.output.origin = None
    if type(record.output.ref) is reverse.Written:
        record.output.ref = record.output.ref.was


def _chains(x, y, w):
    """Runs of elementwise operations on whole arrays between other records: a shadow made by
    a run, then added into through a view or by both operands of ``d + d``, products with
    non-finite partials (a mask), float32 cotangents."""
    a = np.sin(x) * 0.5 + x * 1.5
    b = a * a + np.tanh(a)  # ``a`` read twice: its shadow made, then added into
    c = b[1:] * 2.0  # a view's cotangent added into the whole shadow of ``b``
    d = np.exp(b) - b
    e = d + d  # one cotangent for both operands
    f = np.sum(e) + np.sum(c * w) + np.sum(w * np.sqrt(a[1:] * a[1:]))  # w: inf, -inf, 0.0
    g = (np.cos(y) * np.float32(3.0) + y).astype(float)  # float32 cotangents
    h = x @ np.ones((x.size, 2))  # a record that is not elementwise, between runs
    return f + np.sum(g) + np.sum(np.sqrt(h * h + 1.0))


def _ordered(x, y, w):
    """Elementwise runs on an F-ordered array and on a transposed one (cotangents laid out
    as they are), beside C-ordered ones of 400 elements."""
    m = np.asfortranarray(np.outer(x, x[:3]))
    t = np.sin(m) * m + m.T.T
    r = np.tile(x, 60)
    return np.sum(t * 2.0) + np.sum(np.tanh(t.T) * 3.0) + np.sum(np.exp(r) * r - r)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf * 0.0 by design
@pytest.mark.parametrize("program", [_chains, _ordered])
def test_the_runs_of_elementwise_records_reverse_as_each_record_does(program, monkeypatch):
    """``reverse_elementwise`` (and its shadows known to be small float64 arrays of their own,
    marked by ``_lean_cotangents``) against each record's own pullback: the same gradients bit
    for bit, by each policy and under a memory budget, the caller's arrays unchanged."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=7), rng.normal(size=5).astype(np.float32)
    w = np.array([1.0, np.inf, 0.0, 2.0, -np.inf, 3.0])
    taken = []

    def gradients():
        results = []
        for options in ({"policy": "restore"}, {"policy": "checkpoint"}, {"memory": 64.0}):
            copies = [x.copy(), y.copy(), w.copy()]
            results.append(mutad.value_and_gradient(program, *copies, argnums=(0, 1),
                                                    **options))
            assert [c.tobytes() for c in copies] == [x.tobytes(), y.tobytes(), w.tobytes()]
        return _bits(results)

    def counted(records, shadows, watch):
        taken.append(None)
        return runs(records, shadows, watch)

    runs = reverse.reverse_elementwise
    with monkeypatch.context() as patched:
        patched.setattr(reverse, "reverse_elementwise", counted)
        by_runs = gradients()
    assert taken  # (the runs were reversed by it)
    with monkeypatch.context() as patched:
        patched.setattr(reverse, "reverse_elementwise", _one_at_a_time)
        assert gradients() == by_runs


def test_an_element_write_of_all_of_its_buffer_is_left_to_the_general_write():
    """The element's own write (``inplace.record_element_write``) skips ``Tape.copied``, which
    ends the drift of a buffer written whole: its targets are views, never all of their
    buffer. A whole target is left by ``operations.write_element`` to ``record_write``, which
    records a ``tape.Write`` and ends the drift."""
    written = []

    def write(x):
        tape = x.tape
        value = x * 3.0
        count = len(tape.records)
        tape.drift[x.buffer.key] = 3.0
        operations.write_element(x, value, value.value)
        written.append(x.whole and x.value.tobytes() == np.array(6.0).tobytes()
                       and len(tape.records) == count + 1
                       and type(tape.records[-1]) is Write
                       and x.buffer.key not in tape.drift)
        return value

    with ReverseDifferentiation("restore") as d:
        d.call(write, d.wrap([np.array(2.0)]))
    assert written == [True]


@pytest.mark.parametrize("name", ["seidel", "cholesky", "lu"])
def test_folded_records_hand_their_cotangents_on_without_giving_stand_ins_shadows(
        name, monkeypatch):
    """A value written through the stand-in (``elementwise.fold_written``) and the elements an
    operation read (``elementwise.ElementsRead``) pass their cotangents on as they are
    (``ElementWrite.reverse``, ``_small_cotangents``' ``handed``): in these float64 loops no
    stand-in is given a shadow by ``Shadows.add``, which would make it the same array (the
    bits are the unfolded records':
    ``test_folded_reads_and_writes_give_the_bits_of_their_own_records_in_every_mode``)."""
    f, make = PROGRAMS[name]
    args = make(np.random.default_rng(5))
    added = []
    add = Shadows.add

    def counted(self, place, g, owned=False):
        added.append(place.buffer)
        return add(self, place, g, owned)

    monkeypatch.setattr(Shadows, "add", counted)
    folded = []
    pullback = elementwise.ElementsRead.pullback

    def counted_pullback(record, shadows, dy):
        folded.append(record)
        return pullback(record, shadows, dy)

    monkeypatch.setattr(elementwise.ElementsRead, "pullback", staticmethod(counted_pullback))
    run = reverse.reverse_folded

    def counted_run(records, shadows, watch, d=None):  # (a run of them, in one loop)
        folded.append(records[-1])
        return run(records, shadows, watch, d)

    monkeypatch.setattr(reverse, "reverse_folded", counted_run)
    _gradient(f, args)
    stand_ins = {id(b) for b in elementwise._STAND_INS.values()}
    assert folded and added
    assert not [b for b in added if id(b) in stand_ins]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("zero, other", [(0.0, np.inf), (-0.0, -np.inf), (0.0, np.nan)])
def test_a_zero_cotangent_times_a_non_finite_element_is_zero_as_for_arrays(zero, other):
    """A scalar loop's product of two elements read (``x[0] * x[1]``), whose cotangent is an
    exact zero and one of whose factors is infinite or NaN: each factor's cotangent is the
    masked product (``products.times``), zero, as for the same product of one-element views,
    whose check of finiteness is a dot product (``elementwise._small_product``)."""

    def elements(x):
        return zero * (x[0] * x[1])

    def views(x):
        return np.sum(zero * (x[0:1] * x[1:2]))

    x = np.array([2.0, other])
    (by_elements,) = mutad.gradient(elements, x.copy())
    (by_views,) = mutad.gradient(views, x.copy())
    assert by_elements.tobytes() == by_views.tobytes()
    assert by_elements[0] == 0.0


_SLICE_STATEMENTS = (
    "x[{i}, {j}] -= x[{i}, {k}] * x[{k}, {j}]", "x[{i}, :{c}] += x[{j}, {k}] * y[:{c}]",
    "x[{a}:{b}] = (x[{a}:{b}] - y[{k}]) * 0.5", "x[::-2] *= x[{i}, {j}]", "y[{s}] /= 1.5",
    "v = x[{i}]\n    v[{s}] -= y[{s}]\n    y[{j}] += x[{i}, {k}]",
    "t = np.asfortranarray(x * 1.0)\n    t[{i}, {s}] -= y[{s}]\n    x[:, {j}] += t[:, {k}]",
    "z = x.T\n    z[{i}, {s}] *= y[{s}]", "x[{i}] = y", "y[:] = x[:, {j}]",
    "x[{i}, {j}] = x[{k}, {i}] / y[{j}]", "w = x[1:, ::-1][::2]\n    w[...] += x[{i}, {j}]",
    "x[{a}:{b}] = x[{a}:{b}][::-1] * 1.0", "x[:, {i}] = x[:, {j}]", "x[{i}] *= x[{j}]")
"""Statements of a loop's slices and elements: augmented and plain assignments of rows,
columns, reversed and strided slices, negative indices, views of views written then their
array read, a Fortran-ordered temporary (``fast_write``, ``fast_assign``, ``_scalar_back``)."""


def _slice_program(seed):
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(8):
        i, j, k = (int(v) for v in rng.integers(-4, 4, 3))
        a, b = sorted(int(v) for v in rng.integers(0, 5, 2))
        s = str(rng.choice([f"{a}:{b}", "::-1", f"{a - 4}:", ":"]))
        statement = _SLICE_STATEMENTS[int(rng.integers(len(_SLICE_STATEMENTS)))]
        lines.append(statement.format(i=i, j=j, k=k, a=a, b=b, s=s, c=abs(j)))
    source = "def f(x, y):\n" + "".join(f"    {line}\n" for line in lines) \
        + "    return np.sum(x * np.arange(1.0, 17.0).reshape(4, 4)) + np.sum(y * y)\n"
    namespace = {"np": np}
    exec(compile(source, f"<slices {seed}>", "exec"), namespace)
    return namespace["f"]


def _slice_arguments(seed, layout):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, (4, 4)) * rng.choice([-1.0, 1.0], (4, 4))
    y = rng.uniform(0.5, 2.0, 4)
    x[seed % 4, seed // 4 % 4] = [0.0, -0.0, 5e-324, 1e308, np.inf, np.nan][seed % 6]
    if layout == "F":
        return np.asfortranarray(x), y
    if layout == "strided":
        return np.repeat(x, 2, axis=1)[:, ::2], np.repeat(y, 2)[1::2]
    return x, y


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("seed", range(6))
def test_random_slice_programs_give_numpys_values_and_the_general_paths_bits(seed, layout,
                                                                             monkeypatch):
    """Random loops of slice and element statements, at special values, with small writes
    copied and (their allowance spent) inverted: NumPy's value bit for bit, the caller's
    arrays back, and the gradient of the general paths (no ``_scalar_back`` either)."""
    f = _slice_program(seed)
    for allowance in (tape_module.SMALL_COPIES, 64):
        monkeypatch.setattr(tape_module, "SMALL_COPIES", allowance)
        x, y = _slice_arguments(seed, layout)
        x0, y0 = x.copy(), y.copy()
        with np.errstate(all="ignore"):
            expected = f(x.copy(), y.copy())
            value, grads = mutad.value_and_gradient(f, x, y)
        assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
        assert x.tobytes() == x0.tobytes() and y.tobytes() == y0.tobytes()
        with monkeypatch.context() as general:
            _general_path_only(general)
            general.setattr(elementwise, "_scalar_back", lambda *arguments: False)
            with np.errstate(all="ignore"):
                general_value, general_grads = mutad.value_and_gradient(f, x, y)
        assert np.asarray(general_value).tobytes() == np.asarray(value).tobytes()
        for g, h in zip(grads, general_grads, strict=True):
            assert g.tobytes() == h.tobytes()


def _sums(a, b):
    """Sums over every axis the way losses end: of whole arrays, views, a 0-d value, float32 and
    float16 copies, one of an array then overwritten, one whose operand another sum reads too,
    and by the method, the function and ``np.add.reduce`` (which has no plain functions)."""
    m = b.reshape(3, 3)
    y = np.sum(a * a) + (m @ a).sum() + m[1:, ::2].sum() + np.sum(m.T)
    s = np.sum(a)
    y = y + np.sum(s * s) + s.sum()  # (a 0-d operand)
    w = a * 2.0
    y = y + w.sum() * np.sum(w)  # (one operand, two sums: one shadow, added twice)
    w[1:] = m[0, 1:]  # (overwritten after its sum)
    y = y + np.sum(w) + np.add.reduce(w * w)
    y = y + np.float64(np.sum(a.astype(np.float32) * 3)) + np.float64(np.sum(b.astype(np.float16)))
    return y


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")  # float16 of an infinity
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
def test_a_sum_run_as_its_plain_functions_gives_the_rules_bits_in_every_mode(special,
                                                                             monkeypatch):
    """``np.sum(x)`` of a traced array, run as the plain functions its rule offers
    (``np.add.reduce`` and ``np.full`` of the cotangent, with ``held``: the operand's layout),
    against the rule and its closure's broadcast: the same records, values and derivatives
    bit for bit by each policy, under a budget, in a recording and its replays, nested (where
    the plain functions are not taken) and beside forward mode."""
    args = (np.random.default_rng(12).standard_normal(3),
            np.random.default_rng(13).standard_normal(9))
    args = _with_special_values(args) if special else args
    lean = _bits(_by_every_mode(_sums, args))
    lean_records = _described(_sums, args)
    with monkeypatch.context() as patched:  # (the rule's closure, as before plain sums)
        patched.setattr(operations, "_fit", lambda plain, values: len(plain) == 2)
        general = _bits(_by_every_mode(_sums, args))
        general_records = _described(_sums, args)
    assert lean == general
    assert [r[:-1] for r in lean_records] == [r[:-1] for r in general_records]
    # (the sums' records: the plain back and the layout it reads, against the closure's five)
    plain = [r for r, g in zip(lean_records, general_records, strict=True) if r[-1] != g[-1]]
    assert len(plain) == 12 and all(r[0] == "np.sum" and r[-1] == 2 for r in plain)


def _views(a, b):
    """Rows and slices read the ways a program reads them: of an argument, a result, an array
    made in the function (a constant until a traced value is written into it), complex and
    float32 arrays; views of views, reversed, with new axes and Ellipsis, overlapping reads of
    one array, and reads of a region after a write into it."""
    m = b.reshape(3, 3)
    y = np.sum(a[1:] * a[:-1]) + np.sum(m[1, :] * m[:, 2]) + np.sum(m[::-1, ::2][1:])
    y = y + np.sum(m[..., 0] * m[None, 1][0]) + np.sum(a[:, None] * m[:, None, 1])
    work = np.zeros((3, 3))
    y = y + np.sum(work[1:] + 1.0)  # (of a constant)
    work[1, :] = a * 2.0
    y = y + np.sum(work[1:, ::-1] * work[:-1])
    c = (a + 1j * a[::-1])[1:]
    y = y + np.sum((c[::-1] * c).real)
    s = a.astype(np.float32)
    y = y + np.float64(np.sum(s[1:] * s[:-1]))
    u = a * 1.0
    u[1:] += u[:-1]  # (an update of a region read in its own statement)
    return y + np.sum(u[1:] * u[:2]) + np.sum(m[2][1:])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NaN met by design
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-zeros"])
def test_rows_and_slices_read_at_once_give_the_general_paths_bits_in_every_mode(special,
                                                                               monkeypatch):
    """``tracing._row_or_slice``'s reads against ``__getitem__``'s questions: the same records,
    values and derivatives bit for bit by each policy, under a budget, in a recording and its
    replays, nested and beside forward mode."""
    args = (np.random.default_rng(14).standard_normal(3),
            np.random.default_rng(15).standard_normal(9))
    args = _with_special_values(args) if special else args
    lean, lean_records = _bits(_by_every_mode(_views, args)), _described(_views, args)
    with monkeypatch.context() as patched:
        patched.setattr(tracing, "_row_or_slice", lambda x, key: False)
        general, general_records = _bits(_by_every_mode(_views, args)), _described(_views, args)
    assert lean == general and lean_records == general_records


# Products with a constant operand (``operations._constant_product``): a global (whose stand-in
# hands the ufunc a plain view), an array made inside the function, a NumPy array the program
# holds; every step of a loop after the first takes the short path, whose record computes the
# traced operand's cotangent alone.
CONSTANT_W = np.random.default_rng(11).standard_normal((5, 5))
CONSTANT_V = np.random.default_rng(12).standard_normal(5)
CONSTANT_W32 = CONSTANT_W.astype(np.float32)
CONSTANT_C = CONSTANT_W + 1j * CONSTANT_W.T


def _steps(product):
    """``f(A)``: a loop of ``product(A, step)`` summed, and the rows of ``A`` written after."""

    def f(A):
        total = 0.0
        for step in range(3):
            total = total + np.sum(product(A, step))
        A[1] *= 2.0  # (the traced operand written after: its record read it before)
        return total + np.sum(A * A)

    return f


def _made_inside(A, step):
    W = np.cos(np.arange(25.0)).reshape(5, 5)  # a constant of the tape
    y = W @ A[step]
    W[:] = 7.0  # (written after the product read it: its record reads the values before)
    return y


def _held_constant(A, step, held=np.random.default_rng(13).standard_normal((5, 5))):
    return A[step] @ held


CONSTANT_PRODUCTS = {
    "global @ row": lambda A, step: CONSTANT_W @ A[step],
    "row @ global": lambda A, step: A[step] @ CONSTANT_W,
    "global vector @ row": lambda A, step: CONSTANT_V @ A[step],
    "global @ matrix": lambda A, step: CONSTANT_W @ A[:, :step + 1],
    "matrix @ global": lambda A, step: A[step:] @ CONSTANT_W,
    "made inside": _made_inside,
    "held": _held_constant,
    "np.matmul": lambda A, step: np.matmul(CONSTANT_W, A[step]),
    "np.outer": lambda A, step: np.outer(CONSTANT_V, A[step]),
    "np.outer second": lambda A, step: np.outer(A[step], CONSTANT_V[:step + 1]),
    "float32 constant": lambda A, step: CONSTANT_W32 @ A[step],
    "float32 both": lambda A, step: CONSTANT_W32 @ A[step].astype(np.float32),
    "complex constant": lambda A, step: np.abs(CONSTANT_C @ A[step]),
    "integer constant": lambda A, step: np.arange(5) @ A[step],
    "batched": lambda A, step: np.stack([CONSTANT_W, CONSTANT_W.T]) @ A[step],
    "broadcast": lambda A, step: CONSTANT_W[None] @ A[:, :, None].reshape(5, 5, 1)[step:],
    "0-d outer": lambda A, step: np.outer(np.float64(2.0), A[step]),
    "the argument itself": lambda A, step: A.T @ A[step],
    "large output": lambda A, step: np.outer(np.tile(CONSTANT_V, 30), A[step]),
    # np.dot of vectors and matrices: np.dot itself, with matmul's back (its rule's)
    "np.dot global, row": lambda A, step: np.dot(CONSTANT_W, A[step]),
    "np.dot row, global": lambda A, step: np.dot(A[step], CONSTANT_W),
    "np.dot global vector, row": lambda A, step: np.dot(CONSTANT_V, A[step]),
    "np.dot global, matrix": lambda A, step: np.dot(CONSTANT_W, A[:, :step + 1]),
    "np.dot matrix, global": lambda A, step: np.dot(A[step:], CONSTANT_W.T),
    "np.dot made inside": lambda A, step: np.dot(A[step], np.cos(np.arange(25.0)).reshape(5, 5)),
    "np.dot float32 constant": lambda A, step: np.dot(A[step], CONSTANT_W32),
    "np.dot float32 both": lambda A, step: np.dot(CONSTANT_W32, A[step].astype(np.float32)),
    "np.dot list": lambda A, step: np.dot(A[step], [1.0, -0.0, 2.0, np.inf, 3.0]),
    "np.dot traced both": lambda A, step: np.dot(A[step], A),
    "np.dot 0-d": lambda A, step: np.dot(np.float64(2.0), A[step]),
    "np.dot batched": lambda A, step: np.dot(np.stack([CONSTANT_W, CONSTANT_W.T]), A[step]),
}


def _gradient_bytes(f, args):
    """The bytes of the value and gradient of ``f`` at copies of ``args`` (NaN among them),
    checking the caller's copies come back bit for bit."""
    given = [np.copy(a) for a in args]
    value, grads = mutad.value_and_grad(f, argnums=tuple(range(len(args))))(*given)
    assert [a.tobytes() for a in args] == [g.tobytes() for g in given]
    return [(np.asarray(v).dtype, np.asarray(v).tobytes()) for v in (value, *grads)]


@pytest.mark.parametrize("name", sorted(CONSTANT_PRODUCTS))
def test_products_with_a_constant_give_the_general_paths_values_and_gradients(name,
                                                                              monkeypatch):
    f = _steps(CONSTANT_PRODUCTS[name])
    args = (np.random.default_rng(5).standard_normal((5, 5)),)
    for given in (args, _with_special_values(args)):
        w = CONSTANT_W.copy()
        fast = _gradient_bytes(f, given)
        with monkeypatch.context() as patched:
            _general_path_only(patched)
            general = _gradient_bytes(f, given)
        assert fast == general
        assert np.array_equal(CONSTANT_W, w)


def test_a_global_product_of_the_differentiated_array_itself(monkeypatch):
    """The global is the array differentiated: its product is its stand-in's, traced, as on
    the general path."""
    def f(A):
        return sum(np.sum(CONSTANT_W @ A[i]) + np.sum(A[i] @ CONSTANT_W) for i in range(3))

    fast = _gradient_bytes(f, (CONSTANT_W,))
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        assert _gradient_bytes(f, (CONSTANT_W,)) == fast


@pytest.mark.parametrize("name", ["global @ row", "made inside", "np.outer", "row @ global",
                                  "np.dot global, row", "np.dot row, global"])
def test_products_with_a_constant_compute_the_traced_operands_cotangent_alone(name,
                                                                            monkeypatch):
    """After a loop's first step (the general path's, which finds the output small), a
    product's record names the traced operand alone and its pullback computes no other
    cotangent."""
    made = []
    constant_product = operations._constant_product

    def counted(*arguments):
        result = constant_product(*arguments)
        made.append(type(result.tape.records[-1]) is operations.Product)
        return result

    monkeypatch.setattr(operations, "_constant_product", counted)
    f = _steps(CONSTANT_PRODUCTS[name])
    mutad.check_grads(f, np.random.default_rng(6).standard_normal((5, 5)))
    assert made and all(made[1:3])


def test_a_region_assigned_a_value_that_does_not_fit_raises_numpys_error_on_either_path(
        monkeypatch):
    """``tracing._region_written`` asks ``_fits`` where ``setitem`` does: the error of a value
    that does not broadcast to the region is NumPy's assignment's, on the short path and the
    general one, and the target is left as it was."""

    def f(x):
        y = x * 2.0
        y[1:3] = y[:3] * 1.5
        return y.sum()

    x = np.arange(4.0)
    with pytest.raises(ValueError) as plain:
        f(x.copy())
    with pytest.raises(ValueError) as fast:
        mutad.gradient(f, x)
    with monkeypatch.context() as patched:
        _general_path_only(patched)
        with pytest.raises(ValueError) as general:
            mutad.gradient(f, x)
    assert str(fast.value) == str(general.value) == str(plain.value)
    assert np.array_equal(x, np.arange(4.0))


def test_regions_assigned_take_the_short_path_where_setitem_would_assign_their_view(
        monkeypatch):
    """``tracing._region_written`` takes rows, columns and blocks assigned numbers or traced
    arrays of the tape apart from them, and leaves to the general path a value with a leading
    length-1 axis, a value over the region, a constant target, and one element."""
    taken = []
    region_written = tracing._region_written

    def counted(x, key, value):
        done = region_written(x, key, value)
        taken.append((key, done))
        return done

    monkeypatch.setattr(tracing, "_region_written", counted)
    f, make = PROGRAMS["slices"]
    mutad.check_grads(f, *make(np.random.default_rng(6)))
    done = {repr(key): d for key, d in taken}  # (the last write of each key; a slice is
    # hashed from Python 3.12 on)
    assert done[repr((slice(1, 3), slice(None)))] and done[repr((slice(None, None, -1), 2))]
    assert done[repr((0, slice(None)))]  # A[0, :] = A[1, 1]: a 0-d value, broadcast
    assert not done[repr((3, slice(None)))]  # T[3, :] = F[None, 2, :]
    assert not done[repr((slice(0, 2), slice(1, 3)))]  # over the target
    assert not done[repr((slice(1, None), 0))]  # A[1:, 0] = A[:-1, 0]: over the target


def _views_over_one_another(A, z):
    """Writes from views of the target's own memory: apart from the region though within its
    bounds (interleaved columns, every other element, a broadcast column, through setitem's
    view and advanced paths and np.copyto), over it (reversed, strided views that share
    elements), and the region itself."""
    A = A * 1.0
    A[1:-1, 2] = A[2:, 3]  # another column: apart
    A[:, ::2] = A[:, 1::2] * 1.0
    A[:, ::2] = A[:, 1::2]  # interleaved columns: apart
    A[:, 1:3] = np.broadcast_to(A[:, 4:5], (A.shape[0], 2))  # a broadcast column: apart
    A[:, 0] = A[::-1, 0]  # reversed: over it
    A[1:, 1] = A[:-1, 1]  # shifted: over it
    flat = A.reshape(-1)
    flat[:12:2] = flat[:18:3]  # strided views that share elements
    flat[:24:4] = flat[1:24:4]  # strided views that share none
    A[:, 3] = A[:, 3]  # the region itself
    A[2] = A[2]
    B, C = A[:, ::2], A[:, 1::2]
    B[[0, 2]] = C[1:3]  # advanced index into a view: apart
    B[[1, 3]] = B[2:4] * 2.0
    B[[4, 0]] = B[3:5]  # over it
    np.copyto(A[:, ::2], A[:, 1::2])  # apart
    np.copyto(A[:, ::2], A[:, 1::2] + 1.0, where=A[:, ::2] > 0)
    np.copyto(A[1:, ::2], A[:-1, ::2])  # over it
    z = z * 1.0
    z.real[1:] = z.imag[:-1]  # the other half of each complex element: apart
    z.imag[:] = z.real[::-1]  # the real parts reversed: apart
    A[0, :z.size] += (z * z).real
    return np.sum(A * A * np.arange(1.0, A.size + 1).reshape(A.shape))


def test_views_apart_within_the_targets_bounds_give_the_bounds_tests_bits(monkeypatch):
    """``inplace.overlaps`` asks of bytes (``views.may_share``), not of bounds: a write from
    a view apart from its region though within its bounds (another column) is assigned as a
    value apart, where the bounds' answer copied it as NumPy's copy does. Against the bounds'
    answer, by every mode: the same values and derivatives bit for bit, the caller's arrays
    unchanged, on views apart, over the region and the region itself; and the answers differ."""
    rng = np.random.default_rng(12)
    args = [rng.standard_normal((6, 8)), rng.standard_normal(5) + 1j * rng.standard_normal(5)]
    may_share = inplace.may_share
    answers = []

    def counted(a, b):
        shared = may_share(a, b)
        answers.append((shared, views.may_overlap(a, b)))
        return shared

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        expected = _views_over_one_another(*[np.copy(a) for a in args])
        with monkeypatch.context() as patched:
            patched.setattr(inplace, "may_share", counted)
            exact = _bits(_by_every_mode(_views_over_one_another, args))
        with monkeypatch.context() as patched:
            patched.setattr(inplace, "may_share", views.may_overlap)
            bounds = _bits(_by_every_mode(_views_over_one_another, args))
    assert exact == bounds
    assert exact[0] == _bits([expected])[0]
    assert {(False, True), (True, True), (False, False)} <= set(answers)


_ELEMENTWISE_STATEMENTS = (
    "{n} = np.{unary}({p})", "{n} = {p} {op} {q}", "{n} = {c} {op} {p}", "{n} = {p} {op} {c}",
    "{n} = np.{binary}({p}, {q})", "{n} = {p} ** 2.0", "{n} = np.abs({p}) ** {q}",
    "{n} = {p} * np.flip({p})", "{n} = {p} * np.arange(5)", "{n} = {p} * np.ones(5, np.float32)",
    "{n} = {p}.astype(np.float32) * {q}", "{n} = np.abs({p} + 1j * {q})",
    "{n} = np.exp(1j * {p}).imag * {q}", "{n} = {p} * 1.0\n    m = {n} * {q}\n    {n} += m",
    "{n} = np.{unary}({p}, out=np.empty_like({p}))", "{n} = {p} {op} np.float64({c})")
"""Elementwise statements of traced arrays of five elements and of none (0-d), the operators
and ufuncs of one and two operands, with Python's and NumPy's numbers on either side,
integer and float32 operands, complex intermediates, an operand beside its own view, a value
written after a product read it."""

_UNARY = ("sin", "exp", "tanh", "sqrt", "log", "abs", "negative", "square", "reciprocal",
          "cos", "log1p", "cbrt")
_BINARY = ("maximum", "hypot", "arctan2", "multiply", "subtract", "fmin", "copysign")
_NUMBERS = ("2.0", "3", "-0.0", "np.float32(1.5)", "np.inf", "0.5", "0")


def _elementwise_program(seed):
    """A random program of ``_ELEMENTWISE_STATEMENTS`` on ``x``, ``y`` (5 elements) and ``t``
    (0-d), each statement's operands among the values made so far."""
    rng = np.random.default_rng(seed)
    names, lines = ["x", "y", "t"], []
    for k in range(10):
        statement = _ELEMENTWISE_STATEMENTS[int(rng.integers(len(_ELEMENTWISE_STATEMENTS)))]
        p, q = (names[int(i)] for i in rng.integers(len(names), size=2))
        lines.append(statement.format(
            n=f"v{k}", p=p, q=q, op=rng.choice(["+", "-", "*", "/"]),
            unary=rng.choice(_UNARY), binary=rng.choice(_BINARY), c=rng.choice(_NUMBERS)))
        names.append(f"v{k}")
    loss = " + ".join(f"np.sum(np.real({v}) * {i + 1.0})" for i, v in enumerate(names))
    source = "def f(x, y, t):\n" + "".join(f"    {line}\n" for line in lines) \
        + f"    return {loss}\n"
    namespace = {"np": np}
    exec(compile(source, f"<elementwise {seed}>", "exec"), namespace)
    return namespace["f"]


def _elementwise_arguments(seed):
    """Arguments of an ``_elementwise_program``, with a NaN, an infinity, zeros of both signs
    and a negative value among them at some seeds."""
    rng = np.random.default_rng(seed)
    x, y, t = rng.uniform(0.5, 2.0, 5), rng.uniform(-2.0, 2.0, 5), np.array(rng.uniform(0.5, 2))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0]
    if seed % 2:
        x[seed % 5] = specials[seed % 6]
        y[(seed + 2) % 5] = specials[(seed + 3) % 6]
    return x, y, t


def _outcome(f, args, handling):
    """Value and gradient of ``f`` at ``args`` under ``np.errstate(all=handling)``, with the
    warnings it gave (category and message), or the error it raised (type and message); the
    caller's arrays checked back bit for bit."""
    given = [np.copy(a) for a in args]
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=handling):
        warnings.simplefilter("always")
        try:
            value, grads = mutad.value_and_gradient(f, *given)
            result = [np.asarray(value).tobytes(), *(np.asarray(g).tobytes() for g in grads)]
        except Exception as error:  # noqa: BLE001 (compared between the paths)
            result = (type(error), str(error))
    for a, g in zip(args, given, strict=True):
        assert a.tobytes() == g.tobytes()
    return result, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("seed", range(12))
def test_random_elementwise_programs_give_the_general_paths_bits_warnings_and_errors(
        seed, monkeypatch):
    """Random programs of elementwise operations (``_elementwise_program``) at values that
    change the fast paths' decisions (NaN, infinities, signed zeros, negative bases, integer,
    float32 and complex operands, 0-d values beside arrays, numbers on either side, views of an
    operand beside it, writes after reads): NumPy's value, and the general path's value,
    gradient, warnings and errors, bit for bit, under each floating-point handling."""
    f, args = _elementwise_program(seed), _elementwise_arguments(seed)
    for handling in ("ignore", "warn", "raise"):
        with np.errstate(all=handling), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = np.asarray(f(*(np.copy(a) for a in args))).tobytes()
            except FloatingPointError:
                expected = None
        fast = _outcome(f, args, handling)
        if expected is not None and type(fast[0]) is list:
            assert fast[0][0] == expected
        elif expected is not None:  # (NumPy's error raised by a product of the reverse pass)
            assert fast[0][0] is FloatingPointError and "in the gradient of" in fast[0][1]
        with monkeypatch.context() as general:
            _general_path_only(general)
            assert _outcome(f, args, handling) == fast


def test_mode_ufuncs_of_traced_operands_alone_call_the_engine_at_once(monkeypatch):
    """A ufunc the program calls in the allocation mode with traced operands alone, no
    keyword (``np.sin(x)``), calls the engine's function itself (``allocation.DISPATCHED``),
    without NumPy's dispatch and the mode's frame: the same values, gradients and warning
    lines as through NumPy's dispatch, for whole arrays, views, 0-d values, a binary ufunc,
    a ufunc NumPy's dispatch then refuses, and a nested differentiation; the caller's array
    unchanged."""

    def f(x):
        a = np.sin(x)
        b = np.log(x[1:] - 0.5)  # (negative values: NumPy's warning, at this line)
        c = np.tanh(np.sum(x))
        d = np.hypot(x, a)
        e = np.sqrt(x - x[0])  # (a zero: its pullback's warning, at the line of its record)
        return a.sum() + np.nansum(b) + c + d.sum() + e.sum()

    def nested(x):
        return mutad.gradient(lambda y: np.sin(y).sum() * np.cos(y[0]), x)[0].sum()

    x = np.linspace(0.1, 1.0, 4)
    before = x.tobytes()
    calls = []
    engine = allocation.DISPATCHED[reverse.Traced]

    def counted(ufunc, inputs):
        calls.append(ufunc)
        return engine(ufunc, inputs)

    def run():
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            value, grad = mutad.value_and_grad(f)(x)
        second = mutad.gradient(nested, x)[0]
        return value, grad.tobytes(), second.tobytes(), [w.lineno for w in heard]

    monkeypatch.setitem(allocation.DISPATCHED, reverse.Traced, counted)
    run()  # (its warning's line is this test's function between: the lines are compared next)
    assert np.sin in calls and np.hypot in calls and np.log in calls
    monkeypatch.setitem(allocation.DISPATCHED, reverse.Traced, engine)
    direct = run()
    monkeypatch.delitem(allocation.DISPATCHED, reverse.Traced)
    assert run() == direct
    assert len(set(direct[3])) == 2 and x.tobytes() == before  # (log's line, sqrt's)
    with pytest.raises(TypeError):  # NumPy's refusal, as without the engine's function
        mutad.gradient(lambda x: np.bitwise_and(x, x).sum(), x)


_NUMBERS_BESIDE = [1.5, 2, -1, 0.0, math.nan, math.inf, True, 0.5j, np.float32(1.5),
                   np.float64(2.0), np.int64(3)]
"""Operands beside a traced array in ``test_mode_ufuncs_of_traced_arrays_and_numbers``: Python
floats and ints (the engine's own route), NaN and infinity, and those it leaves to NumPy's
dispatch (a bool, a complex, NumPy's scalars)."""
_TRACED_AS = {"float64": lambda x: x, "float32": lambda x: x.astype(np.float32),
              "0-d": lambda x: x[1], "complex": lambda x: x * (1 + 1j),
              "int": lambda x: (x * 3).astype(np.int64), "second": lambda x: x[::-1] * 0.5}


@pytest.mark.parametrize("ufunc", [np.maximum, np.power, np.hypot, np.true_divide])
def test_mode_ufuncs_of_traced_arrays_and_numbers(monkeypatch, ufunc):
    """A ufunc the program calls in the allocation mode on a traced array and a Python float
    or int, or on two traced arrays (``np.maximum(x, 0.0)``, ``np.hypot(x, y)``), takes
    ``fast_ufunc`` from the engine's function (``allocation.DISPATCHED``), without NumPy's
    dispatch and ``__array_ufunc__``: against NumPy's dispatch, the same values (NumPy's
    promotion of Python's numbers beside float32, ints, 0-d values), gradients, warnings with
    their lines, and errors (``np.errstate(all="raise")``), each bit for bit; a bool, a complex
    and NumPy's scalars are left to NumPy's dispatch."""
    x = np.array([0.0, -1.5, 2.0, 0.5])
    before = x.tobytes()
    entered = []
    general = reverse.Traced.__array_ufunc__

    def counted(self, *args, **kwargs):
        entered.append(1)
        return general(self, *args, **kwargs)

    def outcome(kind, number, left, raising):
        def f(x):
            t = _TRACED_AS[kind](x)
            other = x * 0.5 if kind == "second" else number
            with np.errstate(all="raise" if raising else "warn"):
                y = ufunc(t, other) if left else ufunc(other, t)
            return np.real(y).sum() + np.imag(y).sum() + x.sum()

        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            try:
                value, grad = mutad.value_and_grad(f)(x)
            except Exception as error:  # noqa: BLE001 (compared below)
                return type(error), str(error)
        heard = [(w.category, str(w.message), w.lineno) for w in heard]
        return np.asarray(value).tobytes(), np.dtype(type(value)), grad.tobytes(), heard

    engine = allocation.DISPATCHED[reverse.Traced]
    for kind in _TRACED_AS:
        for number in [None] if kind == "second" else _NUMBERS_BESIDE:
            for left in (True, False):
                for raising in (False, True):
                    direct = outcome(kind, number, left, raising)
                    monkeypatch.delitem(allocation.DISPATCHED, reverse.Traced)
                    assert outcome(kind, number, left, raising) == direct, (kind, number)
                    monkeypatch.setitem(allocation.DISPATCHED, reverse.Traced, engine)
                    if raising:
                        continue
                    monkeypatch.setattr(reverse.Traced, "__array_ufunc__", counted)
                    entered.clear()
                    outcome(kind, number, left, raising)
                    monkeypatch.setattr(reverse.Traced, "__array_ufunc__", general)
                    real = kind in ("float64", "float32", "0-d", "second")
                    if real and (number is None or type(number) in (float, int)):
                        assert not entered, (kind, number, left)  # the engine's route
                    elif real:
                        assert entered, (kind, number, left)  # NumPy's dispatch
    assert x.tobytes() == before
