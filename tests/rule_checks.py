"""Forward rules called directly, checked by mutad.testing's stencil and transpose check.

``check_forward_rule(case, rng)`` runs a primitive's forward rule on a case's arguments and
checks that its output is the function's own (same type, same bits), that its tangent matches
the finite differences of the function along the tangents (``mutad.testing.directional_fd``),
and, with ``transpose=True``, that it is the transpose of the primitive's reverse rule
(``mutad.testing.check_transpose``), which also pins down the conventions at ties and kinks.
"""

import inspect

import numpy as np

import mutad

from cases import Case, arguments
from mutad.core.registry import RULES, lookup
from mutad.testing import check_transpose, directional_fd


class Const:
    """An argument that carries no tangent."""

    def __init__(self, value):
        self.value = value


def given(*args):
    """A sampler of exactly ``args`` (arrays drawn once, ``Const`` markers kept)."""
    return lambda rng: args


def rule_case(key, *args, fd=True, **kwargs):
    """A case of ``key``'s forward rule at ``args`` (``Const`` marks those without a tangent),
    named after the function, the shapes of its leading arrays, and its settings."""
    name = key if type(key) is str else (f"{key[0].__name__}.{key[1]}" if type(key) is tuple
                                         else key.__name__)
    if any(type(a) is np.ndarray for a in args[:2]):
        name += "".join(f"[{'x'.join(map(str, a.shape))}]" for a in args if type(a) is np.ndarray)
    settings = ",".join(f"{k}={v!r}"[:20] for k, v in kwargs.items())
    return Case.named(f"{name}({settings})", key, given(*args), kwargs=kwargs, fd=fd)


def is_decorated(f):
    """Whether ``f`` is a function decorated with ``mutad.adjoint`` or ``mutad.inplace_adjoint``."""
    return hasattr(f, "pure_rule") and hasattr(f, "forward_rule")


def callable_of(key):
    """The function a rule table's key stands for."""
    if is_decorated(key):
        return key.fn
    return getattr(*key) if type(key) is tuple else key


def rules_of(case):
    """``(forward rule, reverse rule or None)`` of the case's function."""
    key = case.function
    if is_decorated(key):
        return case.rule or key.forward_rule, key.pure_rule
    return case.rule or RULES[key].forward, lookup(key).reverse


def split_tangents(args, rng, symmetric=()):
    """Plain arguments and tangents: one for each float array not marked ``Const`` (symmetric
    at the positions ``symmetric``), laid out as its primal, as the core lays tangents out."""
    def split(x, position):
        if type(x) is Const:
            return x.value, None
        if type(x) in (list, tuple):
            pairs = [split(item, None) for item in x]
            tangents = [t for _, t in pairs]
            return type(x)(p for p, _ in pairs), (None if all(t is None for t in tangents)
                                                    else tangents)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            t = np.empty_like(x)
            t[...] = rng.standard_normal(x.shape)
            if position in symmetric:
                t[...] = 0.5 * (t + np.swapaxes(t, -1, -2))
            return x, t
        return x, None

    # At rule level each argument is a value: an array passed twice is two arrays, so the finite
    # differences, which keep the aliasing of arrays, move each by its own tangent.
    seen = set()

    def distinct(x):
        if isinstance(x, Const):
            return Const(distinct(x.value))
        if type(x) in (list, tuple):
            return type(x)(distinct(item) for item in x)
        if isinstance(x, np.ndarray):
            x = x.copy(order="K") if id(x) in seen else x
            seen.add(id(x))
        return x

    pairs = [split(distinct(x), i) for i, x in enumerate(args)]
    return [p for p, _ in pairs], tuple(t for _, t in pairs)


def outputs(y):
    return list(y) if type(y) in (list, tuple) or isinstance(y, tuple) else [y]


def assert_same(y, expected):
    """``y`` is what the function returns: same type, same values."""
    assert type(y) is type(expected)
    if isinstance(y, (tuple, list)):
        for a, b in zip(y, expected, strict=True):
            assert_same(a, b)
    else:
        np.testing.assert_array_equal(y, expected)


def assert_tangent(dy, expected, rtol=1e-6, atol=None):
    """``dy`` matches the finite differences ``expected`` where they are finite; ``atol=None``
    scales the absolute tolerance with the largest difference (at least 1)."""
    if isinstance(expected, (tuple, list)):
        dy = [None] * len(expected) if dy is None else dy
        assert isinstance(dy, (tuple, list)) and len(dy) == len(expected)
        for a, b in zip(dy, expected, strict=True):
            assert_tangent(a, b, rtol, atol)
    elif dy is None:  # an output without a tangent: an integer, or a piecewise constant
        assert expected is None or not np.any(expected[np.isfinite(expected)])
    elif expected is not None:
        assert np.shape(dy) == np.shape(expected)
        finite = np.isfinite(expected)
        scale = rtol * np.max(np.abs(expected[finite]), initial=1.0) if atol is None else atol
        np.testing.assert_allclose(np.asarray(dy)[finite], expected[finite], rtol=rtol, atol=scale)


def check_forward_rule(case, rng, step=1e-4, atol=1e-8, transpose=True):
    """Run the case's forward rule; check ``y``, ``dy`` against the function, the finite
    differences (unless ``case.fd`` is False) and, with ``transpose``, the reverse rule."""
    call = callable_of(case.function)
    args, kwargs = case.sample(rng), dict(case.kwargs)
    if isinstance(getattr(case.function, "signature", None), inspect.Signature):
        # a SciPy wrapper's rules see every parameter in its place
        bound = case.function.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args, bound.kwargs
    args, tangents = split_tangents(args, rng, case.symmetric)
    forward_rule, reverse_rule = rules_of(case)
    y, dy = forward_rule(tangents, *args, **kwargs)
    reference = call(*args, **kwargs)
    assert_same(y, reference)
    for yi, di in zip(outputs(y), outputs(dy) if dy is not None else [None] * len(outputs(y)),
                      strict=True):
        assert di is None or np.shape(di) == np.shape(yi)
    if not any(t is not None for t in tangents):
        return
    if case.fd:
        def aligned(*xs):
            out = call(*xs, **kwargs)
            return out if case.align is None else case.align(out, reference)

        expected = directional_fd(aligned, args, tangents, step=step)
        assert_tangent(dy, expected, atol=atol)
    if transpose and reverse_rule is not None:
        single = any(np.result_type(yi) == np.float32 for yi in outputs(y))
        check_transpose(forward_rule, reverse_rule, *args, tangents=tangents,
                        rtol=1e-5 if single else 1e-9, seed=int(rng.integers(2 ** 31)), **kwargs)


# ----------------------------------------------------------------------------------------------
# Arrays the forward-rule tables of several families share, drawn once

RNG = np.random.default_rng(7)


def central_differences(f, x, h):
    """Central differences of scalar ``f`` at array ``x``, one coordinate at a time, step ``h``."""
    grad = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        grad.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


def normal_array(*shape):
    return RNG.standard_normal(shape)


def positive_array(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def with_nans(x, every=3):
    x = x.copy()
    x.reshape(-1)[::every] = np.nan
    return x


X = normal_array(3, 4)
X3 = normal_array(2, 3, 4)
P = positive_array(3, 4)
WHERE = RNG.uniform(size=(3, 4)) < 0.7
TIES = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, -1.0, 2.0, 0.0], [0.0, 0.1, -0.2, 0.3]])
V = normal_array(5)
V4 = normal_array(4)
XF = np.asfortranarray(X)


def through_reverse_mode(function):
    """A reverse rule ``(*args, **kwargs) -> (y, back)`` made of mutad's reverse mode of
    ``function``: the transpose check then judges a forward rule against the engine."""
    def reverse_rule(*args, **kwargs):
        return mutad.pullback(lambda *xs: function(*xs, **kwargs), *args)

    return reverse_rule


def weighted_objective(case, args, tangents, rng):
    """The positions of the arguments with tangents, and ``<w, f>`` as a function of them, for
    random weights ``w`` on the float outputs (sign choices aligned to those at ``args``)."""
    reference = case.function(*args, **case.kwargs)
    weights = [rng.standard_normal(np.shape(y)) if np.result_type(y).kind == "f" else None
               for y in outputs(reference)]
    positions = [i for i, t in enumerate(tangents) if t is not None]

    def objective(*xs):
        full = list(args)
        for i, x in zip(positions, xs, strict=True):
            full[i] = x
        out = case.function(*full, **case.kwargs)
        out = out if case.align is None else case.align(out, reference)
        return sum(np.sum(w * y) for w, y in zip(weights, outputs(out), strict=True)
                   if w is not None)

    return positions, objective


# ----------------------------------------------------------------------------------------------
# The linear-algebra forward tables: their samplers and their kind of case


def forward_case(name, function, samplers, kwargs=None, **options):
    """A case of ``function``'s forward rule; ``samplers`` has one sampler per argument, or is
    one sampler of the whole argument tuple."""
    sampler = samplers if callable(samplers) else arguments(*samplers)
    return Case.named(name, function, sampler, kwargs=kwargs or {}, **options)


def dominant(*shape):
    """A (stack of) square matrices with a dominant diagonal, 2n·I: far from singular."""
    n = shape[-1]
    return lambda rng: rng.standard_normal(shape) + 2 * n * np.eye(n)


def spd(*shape):
    def sample(rng):
        m = rng.standard_normal(shape)
        return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])

    return sample


def align_columns(v, reference):
    """``v`` with each column's sign chosen to point as ``reference``'s does: LAPACK may flip
    an eigenvector or singular pair between nearby matrices."""
    return v * np.sign(np.sum(v * reference, axis=-2, keepdims=True))


def align_eigh(result, reference):
    return type(result)(result[0], align_columns(result[1], reference[1]))


def align_svd(result, reference):
    signs = np.sign(np.sum(result[0] * reference[0], axis=-2, keepdims=True))
    return type(result)(result[0] * signs, result[1], result[2] * np.swapaxes(signs, -1, -2))


def check_transposed_by_reverse_mode(case, rng):
    """``<w, J t> = <t, Jᵀ w>``: the forward rule against mutad's reverse mode of the function."""
    args, tangents = split_tangents(case.sample(rng), rng, case.symmetric)
    check_transpose(rules_of(case)[0], through_reverse_mode(case.function), *args,
                    tangents=tangents, seed=int(rng.integers(2 ** 31)), **case.kwargs)


def check_reverse_over_forward(case, rng):
    """``hvp`` differentiates the forward rule again by reverse mode (its computations
    dispatch): against finite differences of the gradient."""
    args, tangents = split_tangents(case.sample(rng), rng, case.symmetric)
    positions, objective = weighted_objective(case, args, tangents, rng)
    xs, vs = tuple(args[i] for i in positions), tuple(tangents[i] for i in positions)
    hv = mutad.hvp(objective, xs, vs)
    expected = directional_fd(lambda *xs: mutad.gradient(objective, *xs), xs, vs, step=1e-3)
    assert_tangent((hv,) if len(xs) == 1 else hv, expected, rtol=1e-5)
