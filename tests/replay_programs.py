"""Random programs whose control flow and writes depend on the data, to test replay apart from
the engine's own random programs: each program is Python source of a function ``f(x, y)``
built from statements that decide on values in every way Python can (branches, loops, ties,
argmax writes, masks, sorts, exceptions under ``np.errstate``, strings, hashes, Python bools
and integers from NumPy functions, a global array changed between calls) and write in every
way the replay compiles or runs again (elements, slices and strided views, scatters and
``ufunc.at``, ``np.copyto``, ``np.put``, ``np.putmask``, ``np.place``, ``out=`` functions and
reductions, SciPy's ``overwrite_a``, complex parts; operations run again that make their
result: ``np.piecewise``, ``np.bincount``), and decide on values taken out of the
differentiation (``mutad.stop_gradient``), on counts and positions the data picks (a mask's
indices, a slice's end, a shift, a search), on ties after an inexact undo, on Python's
lists, dicts and orders built from the data, and inside a library function mutad follows
(``scipy.stats.siegelslopes``: which points tie). ``check`` calls
``value_and_grad(f, replay=True)`` on a sequence of inputs drawn from a few values, so that the
decisions flip from call to call, and compares every call with a fresh traced one, bit for bit,
and the caller's bytes."""

import textwrap

import numpy as np
import scipy.linalg
import scipy.stats

import mutad

N = 4
VALUES = (-1.0, 0.0, 0.5, 1.0, 2.0)
"""Inputs are drawn from these (ties, zeros, signs) and sometimes perturbed."""


def _statements(rng):
    """One statement's source (lines, indented by four), drawn at random; ``s`` is the work
    array, ``k`` an integer counter, ``W`` a global array."""
    i, j = rng.integers(N, size=2)
    c = rng.choice(VALUES)
    choices = [
        f"if x[{i}] > {c}:\n    s = s * x\nelse:\n    s = s + y",
        f"if (x > {c}).sum() >= {rng.integers(1, N)}:\n    s = np.sin(s)",
        f"s[np.argmax(x)] = y[{j}] * 2.0",
        f"s[np.argmin(s)] += x[{j}]",
        f"m = x > {c}\ns = np.where(m, s * y, s)",
        f"s[y < {c}] = 0.0",
        "s = np.sort(s)",
        "s = s[np.argsort(x)]",
        f"k = 0\nwhile s.sum() < {c + 3.0} and k < 3:\n    s = s * 1.5 + x\n    k += 1",
        f"try:\n    with np.errstate(divide='raise', invalid='raise'):\n"
        f"        s = s / (x - {c})\nexcept FloatingPointError:\n    s = s * 2.0",
        f"if np.allclose(x, y, atol={abs(c)}):\n    s = s * y",
        f"s = s * len(str(x[{i}]))",
        f"s = s * len(f'{{x[{i}]:.1f}}')",
        f"if x[{i}] in {{0.0, 1.0}}:\n    s = s - y",
        f"s = s * {{-1.0: 2.0, 2.0: 3.0}}.get(x[{i}], 1.0)",
        f"s = s * int(np.count_nonzero(x > {c}))",
        "s = np.maximum(s, y)",
        "s = s * np.argmin((x[0], x[1]))",
        "if W[0] > 0:\n    s = s * W\nelse:\n    s = s + W",
        f"if np.array_equal(x > {c}, y > {c}):\n    s = s + 1.0",
        f"if x[{i}].is_integer():\n    s = s * 0.5",
        f"s = s * (x[{i}] if x[{i}] > y[{j}] else y[{j}])",
        f"np.multiply(s, np.abs(x), out=s)\nif s[{i}] == 0.0:\n    s += y",
        "with np.errstate(divide='ignore', invalid='ignore'):\n"
        "    s = np.where(x > 0, np.log(np.abs(x)), s)",
        # compiled blocks: a function's output laid out as its operand (F-ordered), read by an
        # elementwise step; dot products and element writes in a loop; a division by a number
        f"t = np.clip(np.outer(x, y).T, -1.0, {c})\ns = s + (np.ones(({N}, {N})) * t).sum(axis=0)",
        f"for r in range(1, {N}):\n    s[r] -= s[:r] @ y[:r] * {c}",
        "s[1:] += x[:-1] / 3.0",
        # views of the work array in 2-D, transposed, strided and reversed, written in loops
        f"m = s.reshape(2, 2)\nfor r in range(2):\n    m[r, 1] = m[r, 0] * {c}\n"
        "    m[:, r] += y[:2]",
        f"m = s.reshape(2, 2).T\nm[0] *= x[1:3]\nm[1, 0] = {c}",
        f"s[::2] *= y[1::2]\ns[::-1][0] = {c}\ns[1::2] -= x[::2] * 0.5",
        # an F-ordered temporary written in place; a recurrence of element writes in 2-D
        f"t = np.asfortranarray(np.outer(x, s))\nt[1:, :] -= {c} * t[:-1, :]\n"
        "s = t.sum(axis=0)",
        f"m = np.outer(x, y) + 1.0\nfor r in range(1, {N}):\n    for q in range(1, {N}):\n"
        "        m[r, q] = (m[r - 1, q] + m[r, q - 1]) * 0.5\ns = s + m[:, -1]",
        # complex values made in the program, their real and imaginary parts written
        f"z = s + 1j * y\nz.real[{i}] = {c}\nz.imag[1:] *= x[1:]\ns = np.abs(z) + z.real",
        # writes into an argument, which the caller gets back as it was
        f"x[{i}] = s[{j}]\nx[1:] += s[:-1] * {c}",
        # a temporary past the compiled blocks' size, written in place
        f"big = np.tile(s, 3000)\nbig[1:-1] += {c} * big[2:]\n"
        f"s = s + big.reshape(-1, {N}).sum(axis=0) * 1e-3",
        # products of small matrices in a loop: whole temporaries, a transposed view and a
        # constant of the program among the operands
        f"m = np.outer(x, s) * {c} + np.eye({N})\nfor r in range(2):\n    m = m @ m.T * 0.5\n"
        f"s = s + m @ y + (np.ones((1, {N})) @ m @ x)[0]",
        # numbers assigned to elements in a loop, read again by the next turn
        f"for r in range({N - 1}):\n    s[{i}] = {c}\n    s[r + 1] += s[r] * y[r]\n"
        f"    s[{N - 1}] = {int(c * 2)}",
        # functions and matmul writing through out=, into a new array, a view and the work
        # array itself, and into an array of constants
        f"t = np.empty({N})\nnp.dot(np.outer(x, y), s, out=t)\nnp.clip(t, -{abs(c) + 1}, 2.0, "
        f"out=s)\nnp.cumsum(x * {c}, out=s[::-1])",
        f"m = np.zeros((2, {N}))\nnp.matmul(np.outer(y, x), s, out=m[0])\n"
        f"np.matmul(np.ones(({N}, {N})), np.ones({N}), out=m[1])\ns = s + m.sum(axis=0)",
        # scatters through index arrays the data picks, repeated indices among them, and
        # ufunc.at, into the work array and into a complex temporary
        f"k = np.argsort(x)[[0, 0, {i}]]\ns[k] += y[:3] * {c}\ns[k[1:]] = x[1:3]",
        f"np.add.at(s, np.argsort(y)[[0, 0, {j}]], x[:3])\n"
        f"np.multiply.at(s, [{i}, {i}], {c} + 1.5)\nnp.maximum.at(s, np.argmax(x), y[{j}])",
        f"z = s + 1j * y\nz[np.argsort(x)[[0, 0]]] -= x[:2] * 1j\nnp.add.at(z, [{i}, {i}], y[:2])\n"
        "s = np.abs(z) + z.imag",
        # NumPy's writing functions: copyto, put, putmask and place, with masks of the data
        f"np.copyto(s, y * {c}, where=x > {c})\nnp.copyto(s[:2], x[{i}])",
        f"np.put(s, np.argsort(x)[:2], y[:2] * 2.0)\nnp.putmask(s, s > {c}, y)\n"
        f"np.place(s, x < {c}, y[::-1])",
        # reductions into out=, of a new array and of a view of the work array
        f"t = np.empty({N})\nnp.sum(np.outer(x, s), axis=0, out=t)\n"
        "np.max(np.outer(s, y), axis=1, out=s)\nnp.prod(np.outer(y, t) * 0.5, axis=1, out=s[::-1])",
        # a vector of numbers of the data (np.array of traced scalars, one of them twice), read
        # by elementwise steps and, through a view, by a product, in a loop
        f"for r in range(2):\n    v = np.array([s[{i}] * y[{j}], s[{j}] - {c}, s[{i}]])\n"
        f"    s[:3] += v * 0.5\n    s = s + np.outer(x, v[:2]).sum(axis=1) * {c}",
        # SciPy factoring a matrix of the data in place (overwrite_a) and solving with it
        f"m = np.asfortranarray(np.outer(x, y) + {5 * N} * np.eye({N}))\n"
        "factors = scipy.linalg.lu_factor(m, overwrite_a=True)\n"
        "s = s + scipy.linalg.lu_solve(factors, s) + m.sum(axis=0)",
        # values taken out of the differentiation (mutad.stop_gradient), decided on and read
        # as numbers
        f"s = s * float(mutad.stop_gradient(s[{i}]))",
        f"c = mutad.stop_gradient(s)\nif c[{i}] > c[{j}]:\n    s = s[::-1] * x",
        # Python's arithmetic on a number of the data, on a branch of its sign; a list of the
        # data sorted by Python
        f"v = float(s[{i}])\ns = s * (v ** 0.5 if v > 0 else -v)",
        "s = s + np.array(sorted(s.tolist(), key=abs))",
        # lengths, counts and positions the data picks: a slice's end, the indices of a mask
        # (how many there are), a shift, a search in sorted values, a sorted table's knots
        f"n = int(np.clip(np.nan_to_num(np.floor(x[{i}] + 2.0)), 0, {N}))\ns[:n] *= y[{j}]",
        f"idx = np.nonzero(x > {c})[0]\ns[idx] *= y[idx]",
        "s = np.roll(s, int(np.argmax(x)))",
        f"s = np.sort(s)\ns[np.searchsorted(s, {c}) % {N}] += y[{j}]",
        "s = s + np.interp(x, np.sort(y), s)",
        # masks and ties of functions that choose: where=, select, piecewise, running maxima,
        # a clip into the work array
        f"np.maximum(s, y, out=s, where=x > {c})",
        f"s = np.select([x > {c}, x < -{c}], [s, y], default=1.0) * s",
        "s = np.piecewise(s, [s < 0, s >= 0], [lambda t: t * t, lambda t: 2.0 * t])",
        # an operation run again that makes its result (piecewise's, bincount's), the result
        # written in place after; functions closing over the call's values (recorded as steps)
        f"p = np.piecewise(s, [s < {c}], [np.sin, {c}])\np *= y\np[1:] += p[:-1] * 0.5\n"
        "s = s + p",
        f"s = s + np.bincount(np.argsort(x) % 3, weights=s * y, minlength={N})",
        f"p = np.piecewise(s, [x < {c}], [lambda t: t * y[{j}], lambda t: t - x[{i}]])\n"
        "s = s + p",
        "s = np.maximum.accumulate(s)",
        f"np.clip(s, -1.0, {c}, out=s)",
        # a write the restore policy undoes by an inverse that does not give the bytes back,
        # then a tie decided on them
        "s += x * 0.1\ns -= x * 0.1\ns = np.maximum(s, y)",
        "with np.errstate(all='ignore'):\n    s = np.nan_to_num(s / x)",
        # Python's containers built from the data: a list's length and sum, a dict's keys,
        # indices as a list, an order Python sorts by the values
        f"lst = [v for v in s if v > {c}]\ns = s * (len(lst) + 1.0)\nif lst:\n    s[0] += sum(lst)",
        f"d = {{}}\nfor r in range({N}):\n    d[bool(x[r] > {c})] = d.get(bool(x[r] > {c}), 0.0) + s[r]\n"
        "for key in sorted(d):\n    s = s + d[key] * (2.0 if key else 0.5)",
        f"for r in np.where(x > {c})[0].tolist():\n    s[r] += y[r]",
        f"order = sorted(range({N}), key=lambda r: s[r])\ns = s[order] * x",
        # an element loop whose branch the data picks, each turn reading the last turn's write
        f"for r in range(1, {N}):\n    if s[r - 1] > {c}:\n        s[r] = s[r - 1] * y[r]\n"
        "    else:\n        s[r] += x[r]",
        # a library's decisions on the data inside a function mutad follows (which points tie)
        "if np.isfinite(s).all() and np.isfinite(x).all():\n"
        "    r = scipy.stats.siegelslopes(s, x)\n    s = s * r.slope + r.intercept",
    ]
    return choices[rng.integers(len(choices))]


def source(seed, length=None):
    """The source of program ``seed``."""
    rng = np.random.default_rng(seed)
    length = length or int(rng.integers(2, 7))
    body = ["s = x * y + 1.0"] + [_statements(rng) for _ in range(length)]
    body.append("return (s * s).sum() + (x * y).sum()")
    return "def f(x, y):\n" + textwrap.indent("\n".join(body), "    ") + "\n"


def make(seed):
    namespace = {"np": np, "scipy": scipy, "mutad": mutad, "W": np.ones(N)}
    exec(compile(source(seed), f"<replay program {seed}>", "exec"), namespace)  # noqa: S102
    return namespace["f"], namespace["W"]


SPECIAL = (-0.0, np.inf, -np.inf, np.nan)
"""One input in six holds one of these (a zero's sign, infinities, a NaN's sign and bits)."""


def inputs(rng):
    """Arguments drawn from ``VALUES``, one in three perturbed, one in six with an element of
    ``SPECIAL``."""
    x, y = (rng.choice(VALUES, size=N) for _ in range(2))
    if rng.random() < 1 / 3:
        x = x + rng.normal(scale=0.1, size=N)
    if rng.random() < 1 / 6:
        x[rng.integers(N)] = rng.choice(SPECIAL)
    return x, y


class Mismatch(AssertionError):
    pass


def _outcome(call, args):
    try:
        return "value", call(*args)
    except Exception as error:  # noqa: BLE001 - compared with what tracing raises
        return "raised", type(error)


def _same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def laid_out(a, kind):
    """``a``'s values laid out in one of ``LAYOUTS`` ways: an array of its own (0), reversed
    (a negative stride, 1), every other element of a larger array (2), a column of a 2-D
    array (3), a slice past the start of a larger array (4)."""
    if kind == 0:
        return a.copy()
    if kind == 1:
        return a[::-1].copy()[::-1]
    if kind == 3:
        base = np.zeros((a.size, 3))
        base[:, 1] = a
        return base[:, 1]
    base = np.zeros(2 * a.size if kind == 2 else a.size + 3)
    view = base[::2] if kind == 2 else base[3:]
    view[...] = a
    return view


LAYOUTS = 5


def check(seed, calls=8, policy="restore", memory=None, layouts=False):
    """Replay program ``seed`` on ``calls`` inputs that flip its decisions (and the global
    ``W``'s sign on some calls); raise :class:`Mismatch` where a replayed call differs from
    a traced one or leaves the caller's arrays changed. Both under the memory budget
    ``memory`` (None: none); with ``layouts``, each argument laid out in one of the ways of
    :func:`laid_out`, drawn anew on some calls (a signature of its own, the same for both).
    Returns the replaying function."""
    f, W = make(seed)
    rng = np.random.default_rng(seed + 1)
    replaying = mutad.value_and_grad(f, argnums=(0, 1), policy=policy, memory=memory,
                                     replay=True)
    traced = mutad.value_and_grad(f, argnums=(0, 1), policy=policy, memory=memory)
    previous = inputs(rng)
    kinds = [0, 0]
    for call in range(calls):
        args = previous if rng.random() < 0.3 else inputs(rng)  # repeats replay, others flip
        previous = args
        if rng.random() < 0.2:
            W *= -1.0
        if layouts and (call == 0 or rng.random() < 0.3):  # (kept else: replayed in them)
            kinds = [int(k) for k in rng.integers(LAYOUTS, size=len(args))]
        mine = [laid_out(a, kind) for a, kind in zip(args, kinds)]
        got = _outcome(replaying, mine)
        if any(a.tobytes() != b.tobytes() for a, b in zip(mine, args)):
            raise Mismatch(f"program {seed}, call {call}: the caller's arrays changed\n"
                           + source(seed))
        expected = _outcome(traced, [laid_out(a, kind) for a, kind in zip(args, kinds)])
        if got[0] != expected[0] or (got[0] == "raised" and got[1] is not expected[1]) or (
                got[0] == "value" and not _same(got[1], expected[1])):
            raise Mismatch(f"program {seed}, call {call} on x={args[0]!r}, y={args[1]!r}, "
                           f"W={W!r}, laid out as {kinds}: replayed {got}, traced {expected}\n"
                           + source(seed))
    return replaying
