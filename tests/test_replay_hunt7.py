"""Replays that answered otherwise than tracing and NumPy on fresh programs: each program's
replaying function is called on inputs that change one decision the recording made, each call
compared with a traced one, bit for bit, with NumPy's value, and the caller's bytes."""

import numpy as np

import mutad

from test_replay import same


def replayed_like_numpy(f, makers, argnums=0):
    """Call ``value_and_grad(f, replay=True)`` on the arguments each of ``makers`` makes (a
    maker, not a tuple: arguments that share memory must share it in every copy), and check
    each call against a traced one and NumPy's value on arguments made afresh, and the
    caller's bytes."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for make in makers:
        args = make()
        before = [a.tobytes() for a in args]
        got = replaying(*args)
        assert [a.tobytes() for a in args] == before
        expected = mutad.value_and_grad(f, argnums=argnums)(*make())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(*make()))
    return replaying


# ----------------------------------------------------------------------------------------------
# Integer and boolean arrays among the arguments: their values pick a program, and so do their
# layout and the memory they share


def _points():
    return np.array([1.0, 2.0, 3.0])


def test_an_integer_argument_that_is_another_one_reads_the_other_ones_write():
    """k += 1, then x[k2]: where k2 is k it reads the incremented indices. The signature held
    the integer arrays' values alone, so a program recorded for f(x, k, k) was replayed for
    f(x, k, k.copy()), and the other way round."""
    def gathered(x, k, k2):
        k += 1
        return (x[k2] * x[k % 3]).sum()

    def shared():
        k = np.array([0, 1])
        return _points(), k, k

    def apart():
        return _points(), np.array([0, 1]), np.array([0, 1])

    replayed_like_numpy(gathered, [shared, shared, apart, apart, shared, apart])
    replayed_like_numpy(gathered, [apart, apart, shared, shared, apart, shared])


def test_integer_arguments_that_overlap_read_each_others_writes():
    """k and k2 overlapping views of one integer array, f writing into k2 and reading k."""
    def gathered(x, k, k2):
        k2[0] = 2
        return x[k].sum() * 2 + x[k2].sum()

    def overlapping():
        k = np.array([0, 1, 1])
        return _points(), k[:2], k[1:]

    def apart():
        return _points(), np.array([0, 1]), np.array([1, 1])

    replayed_like_numpy(gathered, [overlapping, overlapping, apart, apart, overlapping])
    replayed_like_numpy(gathered, [apart, apart, overlapping, overlapping, apart])


def test_an_integer_arguments_memory_order_picks_a_program():
    """k.ravel(order='K') follows k's memory: a C- and an F-ordered k of the same values give
    other indices, and the signature held the values alone."""
    def gathered(x, k):
        return (x[k.ravel(order="K")] * np.arange(4)).sum()

    def c_ordered():
        return np.array([1.0, 2.0, 3.0, 4.0]), np.array([[0, 1], [2, 3]])

    def f_ordered():
        return np.array([1.0, 2.0, 3.0, 4.0]), np.asfortranarray([[0, 1], [2, 3]])

    replayed_like_numpy(gathered, [c_ordered, c_ordered, f_ordered, f_ordered, c_ordered])


# ----------------------------------------------------------------------------------------------
# An index computed by NumPy (np.argmax), which a recording holds as a value of its own: NumPy
# indexes with its scalar, a basic index, whose result is a view f may write through


def _rows(*rows):
    return [lambda row=row: (np.array(row),) for row in rows]


WEIGHTS = np.arange(9.0).reshape(3, 3)


def test_a_row_at_an_argmax_is_a_view_written_through():
    """v = M[np.argmax(x)]; v *= 2 doubles a row of M, as NumPy's M[np.intp(1)] is a view. The
    recording held the argmax as a 0-d array, to NumPy an advanced index, whose row is a copy:
    its first call and every replay left M as it was (168.0 where NumPy gives 243.0)."""
    def doubled(x):
        m = np.outer(x, x)
        v = m[np.argmax(x)]
        v *= 2
        return (m * WEIGHTS).sum()

    replayed_like_numpy(doubled, _rows([1.0, 3.0, 2.0], [1.0, 3.0, 2.0], [1.0, 3.0, 2.0],
                                       [3.0, 1.0, 2.0], [1.0, 1.0, 1.0], [1.0, 3.0, 2.0]))


def test_keys_holding_an_argmax_give_views_as_numpys():
    """The same index in a tuple (M[i, :], M[..., i], T[:, i][i]) and an element written
    through a row (M[i][i] = 7.0)."""
    def written(x):
        m = np.outer(x, x)
        i = np.argmax(x)
        row = m[i, :]
        row[...] = np.diagonal(m)[::-1]
        column = m[..., np.argmin(x)]
        column -= 1.0
        m[i][i] = 7.0
        return (m * WEIGHTS).sum()

    replayed_like_numpy(written, _rows([1.0, 3.0, 2.0], [1.0, 3.0, 2.0], [1.0, 3.0, 2.0],
                                       [3.0, 1.0, 2.0], [2.0, 3.0, 3.0], [1.0, 3.0, 2.0]))


def test_an_integer_a_scalars_method_made_indexes_as_numpys_scalar():
    """i = s.astype(int) of a scalar s computed from x: NumPy's scalar, so M[i] is a view. Traced
    it was a 0-d array (a copy: v *= 2 was lost, 168.0 where NumPy gives 243.0); recorded, a
    step copied the scalar, whose copy a replay held as a 0-d array, a copy again where the
    row it picked began M's memory, as the recorded view's did."""
    def doubled(x):
        m = np.outer(x, x)
        i = (x[0] * 0.0 + np.argmax(x)).astype(int)
        v = m[i]
        v *= 2
        return (m * WEIGHTS).sum()

    replayed_like_numpy(doubled, _rows([1.0, 3.0, 2.0], [1.0, 3.0, 2.0], [1.0, 3.0, 2.0],
                                       [3.0, 1.0, 2.0], [3.0, 1.0, 2.0], [1.0, 3.0, 2.0]))


# ----------------------------------------------------------------------------------------------
# Python's round() of a Python float


def test_round_of_a_python_float_to_digits_is_pythons():
    """round(a, 2) of a = x[0].item(): Python rounds the decimal a float is exactly, 2.675 to
    2.67 (2.675 is 2.67499...), and keeps 1.7976931348623157e308; NumPy's round scales,
    rounds and scales back, 2.68, and overflows to inf. Traced, in forward mode and replayed
    (where the value changes, as the step computes it again) the value was NumPy's."""
    def rounded(x):
        a = x[0].item()
        return x[1] * round(a, 2) + x[1] * round(a * 10.0, -1)

    for row in ([2.675, 1.0], [4.35, 2.0], [1.7976931348623157e308, 0.5]):
        x = np.array(row)
        assert mutad.jvp(rounded, (x,), (np.ones(2),))[0] == rounded(x)
    replayed_like_numpy(rounded, _rows([2.675, 1.0], [2.675, 1.0], [2.675, 1.0], [4.35, 2.0],
                                       [1.7976931348623157e307, 0.5], [2.675, 1.0]))


def test_rows_swapped_through_views_at_a_pivot_an_argmax_found():
    """Gaussian elimination with partial pivoting, its rows swapped through views of them
    (rk = A[k]; rp = A[p]; rk[:], rp[:] = rp.copy(), rk.copy()) at p = k + np.argmax(...): the
    recording's rows at p were copies, the swap lost, on its first call and every replay."""
    def solved(a):
        m = a.reshape(3, 3).copy()
        b = np.array([1.0, 2.0, 3.0])
        for k in range(2):
            p = k + np.argmax(np.abs(m[k:, k]))
            if p != k:
                rk, rp = m[k], m[p]
                rk[:], rp[:] = rp.copy(), rk.copy()
                b[[k, p]] = b[[p, k]]
            for i in range(k + 1, 3):
                factor = m[i, k] / m[k, k]
                m[i, k:] -= factor * m[k, k:]
                b[i] -= factor * b[k]
        x = np.zeros(3)
        for i in range(2, -1, -1):
            x[i] = (b[i] - m[i, i + 1:] @ x[i + 1:]) / m[i, i]
        return x.sum()

    first = [4.0, 1.0, 2.0, 1.0, 3.0, 0.5, 2.0, 1.0, 5.0]
    replayed_like_numpy(solved, _rows(first, first, first,
                                      [1.0, 4.0, 2.0, 3.0, 1.0, 0.5, 2.0, 1.0, 5.0],
                                      [1.0, 2.0, 3.0, 6.0, 5.0, 4.0, 9.0, 7.0, 8.0], first))
