"""``numpy.polynomial`` (mutad/rules/polynomial.py): the six kinds' ``*val``, ``*vander`` and
``*fit`` and the series classes on traced values, NumPy's values bit for bit, their derivatives
against finite differences in both modes and under both policies, and replayed."""

import numpy as np
import numpy.polynomial as P
import pytest

import mutad
from test_replay import replayed_like_traced, same

KINDS = [(P.polynomial, "poly", P.Polynomial), (P.chebyshev, "cheb", P.Chebyshev),
         (P.legendre, "leg", P.Legendre), (P.hermite, "herm", P.Hermite),
         (P.hermite_e, "herme", P.HermiteE), (P.laguerre, "lag", P.Laguerre)]
IDS = [prefix for _, prefix, _ in KINDS]


def functions(module, prefix):
    return (getattr(module, prefix + "val"), getattr(module, prefix + "vander"),
            getattr(module, prefix + "fit"))


def calculus(module, prefix):
    return getattr(module, prefix + "der"), getattr(module, prefix + "int")


def _leading(c):
    """Coefficients whose leading one is well away from 0 (the roots stay finite)."""
    c[-1] = 2.0 + abs(c[-1])
    return c


def programs(module, prefix):
    """Realistic uses, each a function of float arrays: (name, f, argument sampler)."""
    val, vander, fit = functions(module, prefix)
    der, integ = calculus(module, prefix)
    roots = getattr(module, prefix + "roots")
    add, sub, mul, mulx, div, power = (getattr(module, prefix + name) for name in (
        "add", "sub", "mul", "mulx", "div", "pow"))
    xs = np.linspace(-0.9, 0.8, 11)
    pair = lambda r: (r.standard_normal(5), _leading(r.standard_normal(3)))  # noqa: E731
    return [
        ("add-sub", lambda a, b: np.concatenate([add(a, b), add(b[:2], a), sub(a, b),
                                                 sub(b[:2], a), sub([1.0, 2.0], b)]), pair),
        ("mul", lambda a, b: np.concatenate([mul(a, b), mul(b[:1], a), mul(a, 2.0),
                                             mul([0.0, 0.0, 1.0], b)]), pair),
        ("mulx", lambda a: mulx(a), lambda r: (r.standard_normal(5),)),
        ("div", lambda a, b: np.concatenate(div(a, b) + div(a, b[:1]) + div(b, a)), pair),
        ("pow", lambda a: np.concatenate([power(a, 3), power(a, 0), power(a, 1)]),
         lambda r: (r.standard_normal(4),)),
        ("roots", lambda c: (lambda r: r.real * 2.0 + r.imag)(roots(c) + 0j),
         lambda r: (_leading(r.standard_normal(6)),)),
        ("roots-abs", lambda c: np.abs(roots(c)), lambda r: (_leading(r.standard_normal(4)),)),
        ("roots-linear", lambda c: roots(c), lambda r: (_leading(r.standard_normal(2)),)),
        ("der", lambda c: der(c), lambda r: (r.standard_normal(7),)),
        ("der-twice-scaled", lambda c: der(c, 2, scl=1.5), lambda r: (r.standard_normal(7),)),
        ("der-past-degree", lambda c: der(c, 4), lambda r: (r.standard_normal(3),)),
        ("der-axis", lambda c: der(c, 1, axis=1), lambda r: (r.standard_normal((3, 5)),)),
        ("int", lambda c: integ(c), lambda r: (r.standard_normal(6),)),
        ("int-k-lbnd-scl", lambda c, k: integ(c, 2, k=[k[0]], lbnd=0.3, scl=2.0),
         lambda r: (r.standard_normal(6), r.standard_normal(1))),
        ("int-axis-k", lambda c, k: integ(c, 1, k=[k], axis=1),
         lambda r: (r.standard_normal((3, 4)), r.standard_normal(3))),
        ("int-of-zero", lambda c, k: integ(c * 0, 1, k=k[0]),
         lambda r: (r.standard_normal(1), r.standard_normal(1))),
        ("val-c", lambda c: val(xs, c), lambda r: (r.standard_normal(5),)),
        ("val-x", lambda x: val(x, [0.5, -1.0, 2.0, 0.25]), lambda r: (r.uniform(-1, 1, 6),)),
        ("val-both-2d", lambda x, c: val(x, c), lambda r: (r.uniform(-1, 1, (2, 3)),
                                                            r.standard_normal((4, 2)))),
        ("val-untensored", lambda x, c: val(x, c, tensor=False),
         lambda r: (r.uniform(-1, 1, 2), r.standard_normal((3, 2)))),
        ("val-short", lambda x, c: val(x, c[:2]) + val(x, c[:1]),
         lambda r: (r.uniform(-1, 1, 3), r.standard_normal(3))),
        ("vander", lambda x: vander(x, 4), lambda r: (r.uniform(-1, 1, 5),)),
        ("fit-y", lambda y: fit(xs, 2.0 * y, 3), lambda r: (r.standard_normal(11),)),
        ("fit-x", lambda x, y: fit(x, y, 2),
         lambda r: (np.sort(r.uniform(-1, 1, 7)), r.standard_normal(7))),
        ("fit-weights-2d", lambda y, w: fit(xs, y, 2, w=w),
         lambda r: (r.standard_normal((11, 2)), r.uniform(0.5, 2.0, 11))),
        ("fit-degrees", lambda y: fit(xs, y, [0, 2, 3]), lambda r: (r.standard_normal(11),)),
        ("fit-full", lambda y: fit(xs, y, 2, full=True)[0] + fit(xs, y, 2, full=True)[1][0],
         lambda r: (r.standard_normal(11),)),
        ("fit-then-val", lambda y: val(np.linspace(-1, 1, 4), fit(xs, np.cos(y), 4)),
         lambda r: (r.standard_normal(11),)),
    ] + ([] if prefix == "poly" else [
        # the basis conversions, of 6, 2 and 1 coefficients (NumPy's shortcuts of short ones)
        (name, lambda c, convert=getattr(module, name): np.concatenate(
            [convert(c), convert(c[:2]), convert(c[:1])]), lambda r: (r.standard_normal(6),))
        for name in (prefix + "2poly", "poly2" + prefix)])


CASES = [(module, prefix, *program) for module, prefix, _ in KINDS
         for program in programs(module, prefix)]
CASE_IDS = [f"{prefix}-{name}" for _, prefix, name, _, _ in CASES]


@pytest.mark.parametrize("module, prefix, name, f, sample", CASES, ids=CASE_IDS)
def test_values_bit_for_bit(module, prefix, name, f, sample):
    """NumPy's steps on traced values: NumPy's values bit for bit over many draws, and the
    caller's arrays untouched."""
    rng = np.random.default_rng(1)
    for _ in range(25):
        args = sample(rng)
        before = [a.tobytes() for a in args]
        y, _ = mutad.pullback(f, *args)
        expected = f(*args)
        assert same(y, expected), name
        assert [a.tobytes() for a in args] == before
        _, tangent = mutad.jvp(f, args, tuple(np.ones_like(a) for a in args))
        assert same(_, expected)


@pytest.mark.parametrize("policy", ["restore", "checkpoint"])
@pytest.mark.parametrize("module, prefix, name, f, sample", CASES, ids=CASE_IDS)
def test_gradients(module, prefix, name, f, sample, policy, rng):
    mutad.check_grads(f, *sample(rng), policy=policy)


@pytest.mark.parametrize("module, prefix, name, f, sample", CASES, ids=CASE_IDS)
def test_jvp(module, prefix, name, f, sample, rng):
    mutad.check_jvp(f, *sample(rng))


@pytest.mark.slow  # second order: the first-order cases stay fast
@pytest.mark.parametrize("module, prefix, name, f, sample", CASES, ids=CASE_IDS)
def test_second_derivatives(module, prefix, name, f, sample, rng):
    mutad.check_grads(f, *sample(rng), order=2)


@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_replayed_like_traced(module, prefix, cls, rng):
    val, _, fit = functions(module, prefix)
    xs = np.linspace(0.0, 3.0, 9)

    def loss(y, x):
        coef = fit(x, y * y, 3)
        series = cls.fit(xs, y, 2)
        return (np.sum(val(xs, coef) ** 2) + np.sum(series(xs)) + np.sum(cls(coef)(0.5 * xs))
                + np.sum(series.deriv()(xs)) + np.sum(series.integ(lbnd=1.0)(xs))
                + np.sum(np.abs(getattr(module, prefix + "roots")(coef + [0, 0, 0, 5.0]))))

    calls = [(rng.standard_normal(9), np.sort(rng.uniform(0, 3, 9))) for _ in range(3)]
    # (not every call replays: legroots's are real on the first and third calls, complex on
    # the second, a decision the replay guards)
    replayed_like_traced(loss, calls, argnums=(0, 1), replayed=False)


@pytest.mark.parametrize("module, prefix, cls", KINDS[1:], ids=IDS[1:])
def test_basis_conversions_replayed_like_traced(module, prefix, cls, rng):
    to_power, from_power = getattr(module, prefix + "2poly"), getattr(module, "poly2" + prefix)

    def loss(c):
        p = from_power(c * c)
        return np.sum(to_power(p) * np.arange(1.0, 6.0)) + np.sum(to_power(c[:2]) ** 2)

    replayed_like_traced(loss, [(rng.standard_normal(5),) for _ in range(4)])


@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_series_classes(module, prefix, cls, rng):
    """``cls.fit`` of traced ``y``, ``cls(coef)`` of traced coefficients, ``p(x)`` at traced
    points: NumPy's values and objects, derivatives checked."""
    x = np.linspace(2.0, 5.0, 10)
    y = rng.standard_normal(10)

    def fitted(y):
        p = cls.fit(x, np.sin(y), 3, domain=[1.0, 6.0] if prefix == "herm" else None)
        return p(np.linspace(2.0, 5.0, 4)) + p.coef.sum()

    def made(c, t):
        p = cls(c, domain=[0.0, 2.0])
        return p(t) * p(0.25)

    def calculus(c, t):  # deriv() and integ() on the series' domain
        p = cls(c, domain=[0.0, 2.0])
        return p.deriv(2)(t) + p.integ(lbnd=0.5, k=t[0])(t) + p.deriv().coef.sum()

    def arithmetic(c, t):  # of series of traced coefficients, a list holding one too
        p, q = cls(c, domain=[0.0, 2.0]), cls([1.0, t[0], 2.5], domain=[0.0, 2.0])
        quo, rem = divmod(p * p, q)
        series = ((p * q - 2 * p) ** 2 + 1.0 - q, quo, rem, p / 2.0, -p, p // 3.0, 1.5 * q)
        return np.concatenate([s.coef for s in series])

    def rooted(c):
        r = cls(c, domain=[0.0, 2.0]).roots() + 0j
        return r.real * 2.0 + r.imag

    c, t = rng.standard_normal(4), rng.uniform(0, 2, 3)
    for f, args in ((fitted, (y,)), (made, (c, t)), (calculus, (c, t)), (arithmetic, (c, t)),
                    (rooted, (_leading(c.copy()),))):
        y_traced, _ = mutad.pullback(f, *args)
        assert same(y_traced, f(*args))
        mutad.check_grads(f, *args)
        mutad.check_jvp(f, *args)

    def kept(c):
        p = cls(c)
        c[0] = 100.0  # the series copied its coefficients, as NumPy's does
        assert type(p) is cls and p.coef[0] != 100.0
        return p(0.5)

    assert same(mutad.pullback(kept, c.copy())[0], kept(c.copy()))
    mutad.check_grads(kept, c)


@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_a_fit_of_traced_x_by_the_class_is_refused(module, prefix, cls):
    """The class's fit maps x to its domain, which would follow a traced x: refused, naming
    the module's fit, which follows it."""
    x, y = np.linspace(0, 1, 6), np.ones(6)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match=prefix + "fit|polyfit"):
        mutad.gradient(lambda x: cls.fit(x, y, 2).coef.sum(), x)


@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_roots_of_trimmed_differentiated_zeros_are_refused(module, prefix, cls):
    """NumPy trims trailing zeros before taking roots: zeros that carry a derivative are
    refused (roots go to infinity as they leave 0); a series of one coefficient has none."""
    roots = getattr(module, prefix + "roots")
    c = np.array([1.0, -2.0, 0.5])
    with pytest.raises(mutad.MutadError, match="trailing coefficients are zeros"):
        mutad.gradient(lambda c: np.abs(roots(c * np.array([1.0, 1.0, 0.0]))).sum(), c)
    empty, _ = mutad.pullback(lambda c: roots(c[:1]), c)
    assert empty.shape == (0,) and empty.dtype == roots(c[:1]).dtype


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_roots_of_single_precision_coefficients_are_numpys(module, prefix, cls, dtype):
    """float32 (complex64) coefficients: NumPy's companion matrix in their dtype, its last
    column updated in place by float64 scales (Chebyshev, Legendre, Hermite), so its roots in
    that precision, bit for bit; mutad's column was float64, its roots float64 numbers."""
    roots = getattr(module, prefix + "roots")
    c = getattr(module, prefix + "fromroots")([0.1, 0.5, -0.7, 0.9]).astype(dtype)
    expected = roots(c.copy())
    got, _ = mutad.pullback(roots, c.copy())
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("module, prefix, cls", KINDS, ids=IDS)
def test_calculus_of_single_precision_coefficients_is_numpys(module, prefix, cls, dtype):
    """float32 (complex64) coefficients scaled by float64 numbers (a series' deriv and integ
    on a domain, *der and *int given NumPy's float64 scl, k and lbnd): NumPy's updates in place
    keep the coefficients' dtype, rounding each step; mutad's were float64 numbers."""
    der, integ = calculus(module, prefix)
    c = np.array([0.3, -1.2, 0.7, 2.5]).astype(dtype)
    forms = [lambda c: cls(c, domain=[-2.0, 3.0]).deriv(2).coef,
             lambda c: cls(c, domain=[-2.0, 3.0]).integ(2, k=[0.5], lbnd=0.25).coef,
             lambda c: der(c, 1, scl=np.float64(0.3)),
             lambda c: integ(c, 1, k=np.float64(0.7), lbnd=np.float64(0.2), scl=np.float64(3.0)),
             lambda c: integ(c[:1] * 0, 1, k=np.float64(0.7), scl=np.float64(3.0))]
    for form in forms:
        expected = form(c.copy())
        got, _ = mutad.pullback(form, c.copy())
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_series_arithmetic_that_cancels_exactly_is_refused_by_name():
    """Legendre division by [1, t, 2]: a step of NumPy's (the product of a unit series) cancels
    to a zero NumPy trims, in an array that carries a derivative. NumPy's operator would turn
    the refusal into NotImplemented (a TypeError of unsupported operands): it is raised."""
    def f(c, t):
        return divmod(P.Legendre(c), P.Legendre([1.0, t[0], 2.0]))[0].coef.sum()

    with pytest.raises(mutad.MutadError, match="trailing coefficients are zeros"):
        mutad.gradient(f, np.array([0.5, -1.0, 2.0, 0.3, 0.2, -0.4, 1.1]), np.array([0.7]),
                       argnums=(0, 1))
    mixed = lambda c: (P.Legendre(c) * P.Chebyshev(c)).coef.sum()  # noqa: E731
    for call in (lambda: mixed(np.ones(3)), lambda: mutad.gradient(mixed, np.ones(3))):
        with pytest.raises(TypeError, match="Polynomial types differ"):  # NumPy's own, kept
            call()


def test_plain_calls_stay_numpys_while_differentiating():
    """Constants reach NumPy's own functions and methods, which the stand-ins call; the user's
    code receives the new float array of such a call as a constant it may write traced values
    into, as np.polyfit's (test_numpy_stops.py writes into them)."""
    x = np.linspace(-1, 1, 5)

    def f(a):
        p = P.Chebyshev.fit(x, np.cos(x), 3)
        q = P.chebyshev.chebfit(x, np.cos(x), 3)
        assert type(p.coef) is np.ndarray and isinstance(q, np.ndarray)
        return a * p(0.3) + a * P.chebyshev.chebval(0.3, q)

    assert mutad.gradient(f, 2.0)[0] == f(1.0)


def test_poly1d_of_traced_coefficients_and_trim_zeros():
    """``np.poly1d`` trims its coefficients with ``np.trim_zeros``, which converted them (a
    stop): now a view of the traced values, bounds read from them and guarded in a replay.
    Zeros trimmed from differentiated values are refused: the polynomial's value still moves
    with its leading coefficient, which the trimmed program's derivative would miss (so
    ``np.polymul``, which trimmed them silently, refuses them too)."""
    c = np.array([1.5, 2.0, -1.0, 0.5, 0.25])
    programs = [lambda c: np.poly1d(c)(0.5),
                lambda c: (np.poly1d(c) * np.poly1d(c[:2]))(0.7) + np.poly1d(c).deriv()(0.2),
                lambda c: np.trim_zeros(c, "b")[-1] * np.trim_zeros(c).sum()]
    for f in programs:
        value, _ = mutad.value_and_gradient(f, c)
        assert value == f(c)
        mutad.check_grads(f, c)
        replayed_like_traced(f, [(c + k,) for k in range(3)], replayed=False)
        zero = c.copy()
        zero[0] = 0.0
        with pytest.raises(mutad.MutadError, match="np.trim_zeros of differentiated values"):
            mutad.gradient(f, zero)
    with pytest.raises(mutad.MutadError, match="np.trim_zeros"):
        mutad.gradient(lambda c: np.polymul(c, [1.0, 2.0]).sum(), np.array([0.0, 1.0]))
    # constant zeros are NumPy's to trim
    assert mutad.gradient(lambda a: np.poly1d(np.array([0.0, 1.0, 2.0]) * 1.0)(a), 0.5) == (
        pytest.approx(1.0),)


def test_poly1d_of_a_list_of_traced_numbers():
    """``np.poly1d([a, b, c])`` of traced numbers: NumPy's constructor converted the list (a
    stop); now the array NumPy makes of it, NumPy's values, evaluated by calling it and by
    np.polyval, in both modes, replayed."""
    programs = [lambda x: np.poly1d([x[0], x[1], x[2]])(2.0),
                lambda x: np.polyval(np.poly1d([x[0], 2.0, x[2] * x[1]]), x[1]),
                lambda x: np.poly1d((x[0], x[1]))(0.3) + np.poly1d([x[2], 1.0]).deriv()(1.0),
                lambda x: (np.poly1d([x[0], x[1]]) * np.poly1d([1.0, x[2]])).coeffs.sum()]
    x = np.array([1.5, -0.5, 0.75])
    for f in programs:
        value, _ = mutad.value_and_gradient(f, x)
        assert same(value, f(x))
        mutad.check_grads(f, x, modes=("rev", "fwd"))
        replayed_like_traced(f, [(x,), (x * 1.5 + 0.25,)])


@pytest.mark.parametrize("f, x", [
    (np.poly, np.array([1.5, -0.5, 0.75])),
    (lambda r: np.poly1d(r, r=True)(0.3), np.array([1.5, -0.5, 0.75])),
    (lambda r: np.poly1d([r[0], r[1]], r=True).coeffs, np.array([1.5, -0.5])),
    (np.poly, np.array([[2.0, 1.0], [0.5, 0.5]])),  # real eigenvalues
    (np.poly, np.array([[2.0, 1.0], [-1.0, 0.5]])),  # a conjugate pair: NumPy's real part
    (lambda r: np.poly(np.array([1.0 + 2j, 1.0 - 2j, 0.5j]) * r[0]).imag, np.array([1.5])),
], ids=["roots", "poly1d of roots", "poly1d of a list of roots", "matrix", "complex pair",
        "complex"])
def test_poly_of_traced_roots(f, x):
    """np.poly (and np.poly1d(r, r=True), which calls it) of traced roots or of a traced
    matrix's eigenvalues (a stop: no rule): NumPy's convolutions, its values and dtype bit for
    bit, in both modes, replayed; the caller's array unchanged (check_grads)."""
    y, _ = mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
    assert same(y, f(x))
    mutad.check_grads(f, x.copy(), modes=("rev", "fwd"))
    # (the roots 1.5, -0.5, 0.75 give a coefficient exactly 0, which np.poly1d's trim_zeros
    # counts (np.argwhere): the second call's count differs, and it records again)
    replayed_like_traced(lambda x: np.sum(f(x) ** 2), [(x,), (x * 1.5 + 0.25,)], replayed=False)


def test_polymul_keeps_numpys_untrimmed_product():
    """NumPy's polymul trims its operands, not their product: [0.] times [1., 2.] is [0., 0.];
    mutad's trimmed the product too (one coefficient)."""
    c = np.array([1.0, 2.0])
    for f in (lambda c: np.polymul(np.array([0.0]), c), lambda c: np.polymul(c[:0], c),
              lambda c: np.polymul(c, np.array([0.0, 0.0, 3.0]))):
        y, _ = mutad.pullback(f, c)
        assert same(y, f(c))
        mutad.check_grads(lambda c: (f(c) * np.arange(1.0, f(c).size + 1.0)).sum(), c)


def test_lagrange_with_its_nodes_allocated_in_the_function():
    """lagrange divides each basis polynomial by x[j] - x[k], NumPy's scalar, for which
    poly1d's division scales the coefficients; of nodes allocated in the function that
    difference is a traced constant, which np.isscalar does not take, and the division became
    np.polydiv's pair (a ValueError)."""
    import scipy.interpolate

    def f(w):
        return scipy.interpolate.lagrange(np.array([0.0, 1.0, 2.0]), w)(0.5)

    w = np.array([1.5, -2.0, 0.7])
    value, _ = mutad.value_and_gradient(f, w)
    assert value == f(w)
    mutad.check_grads(f, w)


def test_numpy_functions_of_a_poly1d_of_traced_coefficients():
    """np.polyval(p, x) of a poly1d holding traced coefficients (scipy.interpolate.lagrange's),
    and NumPy's other functions reading it as an array: its coefficients (its __array__
    converted them), NumPy's values, in both modes, replayed."""
    import scipy.interpolate

    nodes = np.array([0.0, 0.4, 1.1, 2.0])

    def f(w):
        p = np.poly1d(w[:3])
        q = scipy.interpolate.lagrange(nodes, w)
        return (np.polyval(p, 0.3) + np.polyval(q, np.array([0.2, 0.7])).sum() + np.sum(p)
                + np.polyval(q.deriv(), w[0]))

    w = np.array([1.5, -2.0, 0.7, 0.25])
    value, _ = mutad.value_and_grad(f)(w)
    assert same(value, f(w))
    mutad.check_grads(f, w, modes=("rev", "fwd"))
    replayed_like_traced(f, [(w,), (w * 0.5,)], replayed=False)


# ----------------------------------------------------------------------------------------------
# The rest of each kind's functions: *companion, *fromroots, *line, *trim, *val2d, *val3d,
# *grid2d, *grid3d, *vander2d and *vander3d of traced values (they converted them), checked as
# test_scipy_stops.check does; and a routed function the program binds to a name of its own
# (f = polyder), called on plain coefficients too (it recursed into itself)

_PREFIXES = [(P.polynomial, "poly"), (P.chebyshev, "cheb"), (P.legendre, "leg"),
             (P.hermite, "herm"), (P.hermite_e, "herme"), (P.laguerre, "lag")]


def _more_functions(module, prefix):
    def f(name):
        return getattr(module, prefix + name)
    return [
        lambda x: np.abs(f("companion")(x)).sum(),
        lambda x: (f("fromroots")(x) ** 2).sum() + f("fromroots")([x[0], 0.5])[1],
        lambda x: f("line")(x[0], x[1]).sum() + f("line")(x[2], 0.0).sum(),
        lambda x: (f("trim")(x * np.array([1.0, 1.0, 0.1, 0.2]), 0.25) ** 2).sum(),
        lambda x: f("val2d")(x[0], 0.2, x.reshape(2, 2)) + f("val3d")(x[0], 0.2, x[1],
                                                                       x.reshape(2, 2, 1)),
        lambda x: f("grid2d")([0.3, x[1]], [0.2], x.reshape(2, 2)).sum()
        + f("grid3d")([0.3, x[1]], [0.2], x[:1], x.reshape(2, 2, 1)).sum(),
        lambda x: f("vander2d")(x, x[::-1], [1, 2]).sum()
        + (f("vander3d")(x, x[::-1], x ** 2, [1, 2, 1]) ** 2).sum(),
    ]


@pytest.mark.parametrize("module, prefix", _PREFIXES)
def test_the_other_functions_of_each_kind(module, prefix):
    from test_scipy_stops import check
    for f in _more_functions(module, prefix):
        check(f, np.array([0.3, -0.7, 1.1, 0.45]))


_polyder = P.polynomial.polyder  # a module's own name for a routed function


def test_a_routed_function_bound_to_a_name_of_the_programs():
    plain = np.array([1.0, 2.0, 3.0])

    def loss(x):
        return (_polyder(x) ** 2).sum() + _polyder(plain).sum() \
            + P.polynomial.polycompanion(plain).sum()

    from test_scipy_stops import check
    check(loss, np.array([0.3, -0.7, 1.1, 0.45]))
