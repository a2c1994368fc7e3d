"""Random programs of NumPy's writing functions, to compare mutad with NumPy: each program
``f(x)`` writes into a work array ``u`` (a copy of ``x``, or ``x`` itself: the caller's array)
by a few operations drawn from ``WRITES`` (repeated fancy indices, ``ufunc.at``, ``np.put``,
``np.putmask``, ``np.place``, ``np.copyto(where=)``, ufuncs with ``where=`` and ``out=``,
masks, accumulations into their operand, in-place sorts and partitions, ``flat``, ``reduceat``,
overlapping assignments, ``fill``, writable sliding windows, ``real`` views, ``einsum`` and
``matmul`` with ``out=``, ``linalg.solve`` written back, ``nditer``, ``clip(out=)``), with
thresholds that make its masks and orders depend on the data. ``differences`` calls it with
NumPy and with mutad, traced and replayed, on a few inputs, and lists what differs: values and
gradients bit for bit (a replay against the traced call), the caller's bytes, the warnings and
exceptions, and the derivatives against finite differences (``mutad.check_grads``)."""

import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import mutad

N = 8


def _indices(rng, k):
    return [int(i) for i in rng.integers(-N, N, k)]


def _mask(rng):
    return (rng.random(N) < 0.5).tolist()


def _fancy_update(rng):
    i, a, c = _indices(rng, 3), int(rng.integers(0, N - 3)), float(rng.normal())
    return f"u[{i}] += {c} * x[{a}:{a + 3}]", lambda u, x: u.__setitem__(i, u[i] + c * x[a:a + 3])


def _fancy_augmented(rng):
    i, a = _indices(rng, 3), int(rng.integers(0, N - 3))

    def write(u, x):
        u[i] *= x[a:a + 3]
    return f"u[{i}] *= x[{a}:{a + 3}]", write


def _ufunc_at(rng):
    i, a = _indices(rng, 4), int(rng.integers(0, N - 4))
    ufunc = (np.add, np.multiply, np.maximum, np.subtract)[int(rng.integers(4))]
    return (f"np.{ufunc.__name__}.at(u, {i}, x[{a}:{a + 4}])",
            lambda u, x: ufunc.at(u, i, x[a:a + 4]))


def _put(rng):
    i, mode = _indices(rng, 3), ("raise", "wrap", "clip")[int(rng.integers(3))]
    return (f"np.put(u, {i}, x[:2] * 2, mode={mode!r})",
            lambda u, x: np.put(u, i, x[:2] * 2, mode=mode))


def _putmask(rng):
    t = float(rng.normal())
    return f"np.putmask(u, u > {t}, x[:3] ** 2)", lambda u, x: np.putmask(u, u > t, x[:3] ** 2)


def _place(rng):
    t = float(rng.normal())
    return f"np.place(u, u < {t}, x[1:3] * 3)", lambda u, x: np.place(u, u < t, x[1:3] * 3)


def _copyto_where(rng):
    m, reversed_ = _mask(rng), bool(rng.random() < 0.5)
    return (f"np.copyto(u, {'u[::-1]' if reversed_ else 'x * u'}, where={m})",
            lambda u, x: np.copyto(u, u[::-1] if reversed_ else x * u, where=m))


def _ufunc_where(rng):
    m, ufunc = _mask(rng), (np.sin, np.exp, np.negative, np.tanh)[int(rng.integers(4))]
    return f"np.{ufunc.__name__}(u, out=u, where={m})", lambda u, x: ufunc(u, out=u, where=m)


def _binary_where(rng):
    m = _mask(rng)
    return (f"np.multiply(u, x, out=u, where={m})",
            lambda u, x: np.multiply(u, x, out=u, where=m))


def _masked_write(rng):
    t = float(rng.normal())

    def write(u, x):
        k = u > t
        u[k] = u[k] * x[k]
    return f"k = u > {t}; u[k] = u[k] * x[k]", write


def _masked_update(rng):
    t = float(rng.normal())

    def write(u, x):
        u[u < t] += 1.5
    return f"u[u < {t}] += 1.5", write


def _accumulated(rng):
    function = (np.cumsum, np.cumprod, np.maximum.accumulate,
                np.add.accumulate)[int(rng.integers(4))]
    return f"{function.__name__}(u, out=u)", lambda u, x: function(u, out=u)


def _accumulated_backwards(rng):
    return "np.cumsum(u[::-1], out=u[::-1])", lambda u, x: np.cumsum(u[::-1], out=u[::-1])


def _sorted(rng):
    k, which = int(rng.integers(0, N)), int(rng.integers(3))
    writes = (lambda u, x: u.sort(), lambda u, x: u.partition(k),
              lambda u, x: u.__setitem__(slice(None), np.sort(u)[::-1]))
    return ("u.sort()", f"u.partition({k})", "u[:] = np.sort(u)[::-1]")[which], writes[which]


def _flat(rng):
    i = [int(j) for j in rng.integers(0, N, 2)]

    def write(u, x):
        u.reshape(2, -1).flat[i] = x[3:5] + u[0]
    return f"u.reshape(2, -1).flat[{i}] = x[3:5] + u[0]", write


def _reduceat(rng):
    i = sorted(int(j) for j in rng.integers(0, N, 3))
    ufunc = (np.add, np.multiply, np.maximum)[int(rng.integers(3))]
    return (f"u[:3] = np.{ufunc.__name__}.reduceat(u, {i})",
            lambda u, x: u.__setitem__(slice(0, 3), ufunc.reduceat(u, i)))


def _overlapping(rng):
    which = int(rng.integers(3))
    writes = (lambda u, x: u.__setitem__(slice(1, None), u[:-1]),
              lambda u, x: u[:-2].__iadd__(u[2:]),
              lambda u, x: u.__setitem__(slice(None), u[::-1]))
    return ("u[1:] = u[:-1]", "u[:-2] += u[2:]", "u[:] = u[::-1]")[which], writes[which]


def _filled(rng):
    a, b = sorted(int(j) for j in rng.integers(0, N, 2))
    return f"u[{a}:{b}].fill(x[0])", lambda u, x: u[a:b].fill(x[0])


def _window(rng):
    def write(u, x):
        sliding_window_view(u, 3, writeable=True)[2] *= 1.5
    return "sliding_window_view(u, 3, writeable=True)[2] *= 1.5", write


def _real_part(rng):
    def write(u, x):
        u.real[::2] += u[1::2]
    return "u.real[::2] += u[1::2]", write


def _einsum_out(rng):
    def write(u, x):
        np.einsum("ij,jk->ik", u[:4].reshape(2, 2), x[4:].reshape(2, 2),
                  out=u[4:].reshape(2, 2))
    return "np.einsum('ij,jk->ik', u[:4] (2, 2), x[4:] (2, 2), out=u[4:] (2, 2))", write


def _matmul_out(rng):
    def write(u, x):
        a = u[:4].reshape(2, 2)
        np.matmul(a, x[:4].reshape(2, 2), out=a)
    return "a = u[:4] (2, 2); np.matmul(a, x[:4] (2, 2), out=a)", write


def _solved(rng):
    def write(u, x):
        u[2:5] = np.linalg.solve(np.outer(x[:3], x[:3]) + 3 * np.eye(3), u[:3])
    return "u[2:5] = np.linalg.solve(outer(x[:3]) + 3 I, u[:3])", write


def _element(rng):
    i, j = (int(k) for k in rng.integers(0, N, 2))

    def write(u, x):
        u[i] = u[j] * x[i] + 0.5
    return f"u[{i}] = u[{j}] * x[{i}] + 0.5", write


def _iterated(rng):
    def write(u, x):
        with np.nditer(u[::2], op_flags=["readwrite"]) as it:
            for v in it:
                v[...] = v * 0.5 + 1.0
    return "nditer(u[::2], readwrite): v[...] = v * 0.5 + 1.0", write


def _taken(rng):
    i = _indices(rng, 3)
    return (f"u[{i}] = np.take(u, {i[::-1]}) * 2",
            lambda u, x: u.__setitem__(i, np.take(u, i[::-1]) * 2))


def _clipped(rng):
    a = float(rng.normal())
    return f"np.clip(u, {a}, {a + 1}, out=u)", lambda u, x: np.clip(u, a, a + 1, out=u)


WRITES = (_fancy_update, _fancy_augmented, _ufunc_at, _put, _putmask, _place, _copyto_where,
          _ufunc_where, _binary_where, _masked_write, _masked_update, _accumulated,
          _accumulated_backwards, _sorted, _flat, _reduceat, _overlapping, _filled, _window,
          _real_part, _einsum_out, _matmul_out, _solved, _element, _iterated, _taken, _clipped)


def program(seed, writes=4):
    """``(f, text)``: the program of ``seed`` and its description."""
    rng = np.random.default_rng(seed)
    steps = [WRITES[int(rng.integers(len(WRITES)))](rng) for _ in range(writes)]
    in_place = bool(rng.random() < 0.5)
    weights = rng.normal(size=N)

    def f(x):
        u = x if in_place else x * 1.0
        for _, write in steps:
            write(u, x)
        return (u * weights).sum() + 0.1 * (x * x).sum()
    return f, ("u = x; " if in_place else "u = x * 1.0; ") + "; ".join(t for t, _ in steps)


def _outcome(function, x):
    """``function(x)``'s result (None where it raised), the class of what it raised, and the
    messages of the warnings it issued (those of a gradient left out: NumPy has none)."""
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        try:
            result, raised = function(x), None
        except mutad.MutadError:
            raise
        except Exception as error:  # noqa: BLE001 (NumPy's, compared)
            result, raised = None, type(error)
    return result, raised, sorted({str(w.message) for w in issued
                                   if "in the gradient of" not in str(w.message)})


def _bits(y):
    return np.asarray(y).dtype, np.asarray(y).tobytes()


def differences(seed, calls=4):
    """What differs between NumPy and mutad on the program of ``seed`` (empty: nothing), on
    ``calls`` inputs: each call traced and replayed, and the derivatives of the first call
    checked in reverse and forward mode. A program mutad refuses (a MutadError) has none."""
    f, _ = program(seed)
    rng = np.random.default_rng(10_000 + seed)
    replaying = mutad.value_and_grad(f, replay=True)
    found = []
    try:
        for k in range(calls):
            x = rng.normal(size=N)
            value, raised, issued = _outcome(f, x.copy())
            traced = None
            for name, run in (("traced", mutad.value_and_grad(f)), ("replayed", replaying)):
                caller = x.copy()
                got, got_raised, got_issued = _outcome(run, caller)
                if caller.tobytes() != x.tobytes():
                    found.append((k, name, "the caller's array changed"))
                if (got_raised, got_issued) != (raised, issued):
                    found.append((k, name, "raised or warned", got_raised, got_issued))
                elif raised is None:
                    if _bits(got[0]) != _bits(value):
                        found.append((k, name, "value", got[0], value))
                    if traced is not None and _bits(got[1]) != _bits(traced):
                        found.append((k, name, "gradient", got[1], traced))
                    traced = got[1]
            if k == 0 and raised is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        mutad.check_grads(f, x.copy(), modes=("rev", "fwd"))
                    except AssertionError as error:
                        found.append((k, "derivatives", str(error)))
    except mutad.MutadError as error:
        if isinstance(error, AssertionError):
            raise
        return []
    return found
