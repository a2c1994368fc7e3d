"""mutad.adjoint and mutad.inplace_adjoint, proven with mutad.testing.check_rule."""

import numpy as np
import pytest
import scipy.special

import mutad
from mutad.testing import GradientCheckError, check_rule

gammaln = mutad.adjoint(scipy.special.gammaln)


@gammaln.rule
def _gammaln_rule(x):
    def back(dy):
        return (dy * scipy.special.digamma(x),)

    return gammaln(x), back


@mutad.inplace_adjoint(writes=("a",))
def add_vecs_(a, b):
    a += b
    return a


@add_vecs_.rule
def _add_vecs_rule(a, b):
    add_vecs_(a, b)

    def back(da, db):
        if a is b:
            a[...] *= 0.5
        else:
            a[...] -= b
        db += da

    return back


@mutad.inplace_adjoint(writes=("a",))
def scale_by_(a, s):
    """a *= s, elementwise and in place."""
    a *= s
    return a


@scale_by_.rule
def _scale_by_rule(a, s):
    if np.may_share_memory(a, s):
        raise mutad.MutadError("scale_by_(a, s) with s overlapping a cannot be restored")
    scale_by_(a, s)

    def back(da, ds):
        a[...] /= s          # restore first: both lines below need the old a
        ds += da * a         # accumulate, never assign
        da *= s

    return back


@mutad.inplace_adjoint(writes=("a",))
def clamp_(a, low):
    np.maximum(a, low, out=a)


@clamp_.rule(checkpoint=("a",))
def _clamp_rule(a, low):
    above = a > low  # the maximum forgets a where it was below: not invertible, so checkpointed
    clamp_(a, low)

    def back(da, dlow):
        dlow += np.where(above, 0.0, da).sum()
        da *= above

    return back


def test_pure_rule_wraps_a_third_party_function(rng):
    x = rng.uniform(0.5, 3.0, 5)
    assert np.array_equal(gammaln(x), scipy.special.gammaln(x))  # plain arrays: it just runs
    check_rule(gammaln, x)
    mutad.check_grads(lambda x: gammaln(x * x).sum() * x, x)


def test_in_place_rule_restores_by_inversion(rng):
    a, b = rng.standard_normal(6), rng.standard_normal(6)
    assert check_rule(add_vecs_, a, b) < 1e-15
    s = rng.uniform(0.5, 2.0, 6)
    error = check_rule(scale_by_, a, s)
    assert 0.0 <= error < 1e-15


def test_in_place_rule_with_a_declared_checkpoint(rng):
    a = rng.standard_normal(8)
    assert check_rule(clamp_, a, 0.1) == 0.0


def test_in_place_rule_on_views_and_under_both_policies(rng):
    x, s = rng.standard_normal(7), rng.uniform(0.5, 2.0, 7)

    def f(x, s):
        scale_by_(x[1:], s[:-1])
        add_vecs_(x[:3], x[4:])
        return np.sin(x)

    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, s, policy=policy)


def test_the_function_returns_the_same_traced_object():
    def f(a, b):
        assert add_vecs_(a, b) is a
        return a.sum()

    assert all(np.array_equal(g, np.ones(3)) for g in mutad.gradient(f, np.zeros(3), np.ones(3)))


def test_zygote_120_with_an_in_place_rule():
    def add_sum(a, b):
        add_vecs_(a, b)
        return a.sum()

    a, b = np.zeros(4), np.ones(4)
    da, db = mutad.gradient(add_sum, a, b)
    assert np.array_equal(da, np.ones(4)) and np.array_equal(db, np.ones(4))
    assert np.array_equal(a, np.zeros(4))


def test_a_function_without_a_rule_names_the_fix():
    undecided = mutad.adjoint(np.sinc)
    with pytest.raises(mutad.MutadError, match="@sinc.rule"):
        mutad.gradient(lambda x: undecided(x).sum(), np.ones(2))


def test_an_in_place_rule_returning_a_new_array_is_refused():
    @mutad.inplace_adjoint
    def doubled_copy(a):
        return a * 2.0

    @doubled_copy.rule
    def _rule(a):
        doubled_copy(a)
        return lambda da: None

    x = np.ones(2)
    with pytest.raises(mutad.MutadError, match="pure rule"):
        mutad.gradient(lambda a: doubled_copy(a).sum(), x)
    assert np.array_equal(x, np.ones(2))


def add_into_with_pullback(back):
    """``a += b`` as a fresh in-place function whose rule's pullback is ``back(a, b, da, db)``:
    a deliberately wrong one, for check_rule to catch."""

    @mutad.inplace_adjoint(writes=("a",))
    def add_into_(a, b):
        a += b

    @add_into_.rule
    def _rule(a, b):
        add_into_(a, b)
        return lambda da, db: back(a, b, da, db)

    return add_into_


def test_check_rule_catches_assignment_instead_of_accumulation(rng):
    def back(a, b, da, db):
        a[...] -= b
        db[...] = da  # wrong: drops what db already held

    with pytest.raises(GradientCheckError):
        check_rule(add_into_with_pullback(back), rng.standard_normal(3), rng.standard_normal(3))


def test_check_rule_catches_a_rule_that_does_not_restore(rng):
    def back(a, b, da, db):
        db += da  # forgot to restore a

    with pytest.raises(GradientCheckError):
        check_rule(add_into_with_pullback(back), rng.standard_normal(3), rng.standard_normal(3))


def test_check_rule_catches_a_wrong_pure_gradient(rng):
    wrong = mutad.adjoint(np.sin)

    @wrong.rule
    def _rule(x):
        return np.sin(x), lambda dy: (dy * np.sin(x),)

    with pytest.raises(GradientCheckError, match="mismatch"):
        check_rule(wrong, rng.standard_normal(3))


def test_check_rule_catches_a_wrong_forward_rule(rng):
    def back(a, b, da, db):
        a[...] -= b
        db += da

    add_into_ = add_into_with_pullback(back)

    @add_into_.jvp_rule
    def _forward(tangents, a, b):
        da, db = tangents
        add_into_(a, b)
        if db is not None:
            da -= db  # wrong sign
        return a

    with pytest.raises(GradientCheckError, match="jvp mismatch"):
        check_rule(add_into_, rng.standard_normal(3), rng.standard_normal(3))


# ----------------------------------------------------------------------------------------------
# Regressions


def test_the_growth_of_a_restoration_is_taken_of_the_primal_values():
    """Regression: ``growth`` was called on the arguments' values as the rule's level holds
    them, arrays an enclosing differentiation traces under second derivatives, and its
    ``float()`` raised ConversionError (check_grads(order=2), hessian, hvp)."""
    @mutad.inplace_adjoint(writes=("x",))
    def scale_(x, s):
        x *= s

    seen = []

    def growth(x, s):
        seen.append(type(s))
        return float(abs(s)) + 1.0  # a plain number only of plain values

    @scale_.rule(growth=growth)
    def _rule(x, s):
        scale_(x, s)

        def back(dx, ds):
            x[...] /= s
            if ds is not None:
                ds += np.vdot(dx, x)
            dx *= s

        return back

    def f(x, s):
        y = x * x
        scale_(y, s)
        return (y * y).sum()

    x, s = np.array([1.0, 2.0]), np.array(3.0)
    mutad.check_grads(f, x, s, order=2)
    np.testing.assert_allclose(mutad.hessian(f, x, s), np.diag(12.0 * 9.0 * x * x))
    np.testing.assert_allclose(mutad.hvp(f, (x, s), (np.ones(2), np.array(0.0)))[0],
                               12.0 * 9.0 * x * x)
    assert set(seen) == {np.ndarray}


def test_a_checkpointed_in_place_rule_takes_complex_values_as_a_plain_one_does():
    """Regression: a rule attached with ``@f.rule(checkpoint=...)`` was not declared to take
    complex values, unlike one attached with ``@f.rule``; and the core did not check the
    declaration of in-place rules at all."""
    def make(checkpoint):
        @mutad.inplace_adjoint(writes=("x",))
        def scale_(x, s):
            x *= s

        def rule(x, s):
            scale_(x, s)

            def back(dx, ds):
                if not checkpoint:
                    x[...] /= s
                dx *= np.conj(s)   # mutad's convention: the adjoint

            return back

        if checkpoint:
            scale_.rule(checkpoint=("x",))(rule)
        else:
            scale_.rule(rule)
        return scale_

    z = np.array([1.0 + 2.0j, -0.5j])
    for scale_ in (make(False), make(True)):
        def f(z):
            y = z * 1.0
            scale_(y, 2.0 - 1.0j)
            return (np.abs(y) ** 2).sum()

        mutad.check_grads(f, z, order=2)

    class RealOnly(mutad.custom.InplaceAdjoint):
        complex_values = None  # its rules take real values only

    real_only = RealOnly(lambda x, s: x.__imul__(s))
    real_only.rule(checkpoint=("x",))(lambda x, s: (real_only(x, s), lambda dx, ds: None)[1])
    with pytest.raises(mutad.errors.ComplexInputError):
        mutad.gradient(lambda z: (np.abs(real_only(z * 1.0, 2.0)) ** 2).sum(), z)


def test_a_wrapped_ufunc_is_named_by_its_name():
    """Regression: ``mutad.adjoint(scipy.special.dawsn)`` called itself ``<ufunc 'dawsn'>``."""
    dawsn = mutad.adjoint(scipy.special.dawsn)

    @dawsn.rule
    def _rule(x):
        y = scipy.special.dawsn(x)
        return y, lambda dy: ((1.0 - 2.0 * x * y) * dy,)

    with pytest.raises(mutad.errors.UnsupportedFunctionError,
                       match=r"^dawsn was given dual arrays .* @dawsn\.jvp_rule"):
        mutad.jvp(lambda x: dawsn(x), (np.ones(2),), (np.ones(2),))


W = np.array([1.0, 2.0, 3.0])


def test_an_array_a_rule_returns_is_never_written():
    """Regression: a cotangent (or tangent) that a user's rule returned, but keeps (a global),
    was adopted as the shadow (or tangent) and accumulated into: the global changed."""
    @mutad.adjoint
    def dot_w(x):
        return (W * x).sum()

    @dot_w.rule
    def _dot_rule(x):
        return dot_w(x), lambda dy: (W,)   # dy is 1: W itself is the cotangent

    @mutad.adjoint
    def weigh(x):
        return W * x.sum()

    @weigh.jvp_rule
    def _weigh_jvp(tangents, x):
        total = tangents[0].sum()
        return weigh(x), W if total == 1.0 else W * total  # a shortcut: W itself

    before = W.tobytes()

    def f(x):
        y = (x * x).sum()               # x's shadow is first reached by dot_w's cotangent
        return y + dot_w(x) + dot_w(x)

    x = np.array([0.5, -1.0, 2.0])
    for policy in ("restore", "checkpoint"):
        np.testing.assert_allclose(mutad.gradient(f, x, policy=policy)[0], 2 * x + 2 * W)
        assert W.tobytes() == before
    g = mutad.grad(f, replay=True)
    for _ in range(3):
        np.testing.assert_allclose(g(x), 2 * x + 2 * W)
        assert W.tobytes() == before

    def forward(x):
        y = weigh(x)                    # its tangent is W itself for this direction
        y *= 2.0                        # a write into the output's tangent
        return y

    _, dy = mutad.jvp(forward, (x,), (np.full(3, 1.0 / 3.0),))
    np.testing.assert_allclose(dy, 2 * W)
    assert W.tobytes() == before


# A rule whose back gives a differentiated argument no cotangent (None), or whose forward rule
# never reads its tangent, dropped that derivative: a silent zero (savgol_filter's traced
# delta was one, a setting after the rule's leading arguments, which ScipyAdjoint's padding
# gives None). Refused by name, unless the rule declares the derivative zero.
def _rules_dropping_s(fn, declare=lambda rule: rule):
    """``fn(x, s)`` as a user's function and as a SciPy function (``padded``), each with rules
    that differentiate ``x`` alone (``x * fn(1, s)`` is linear in ``x``)."""
    from mutad.scipy._adjoints import ScipyAdjoint

    user, padded = mutad.adjoint(fn), ScipyAdjoint(fn)

    @user.rule
    @declare
    def _rule(x, s):
        return fn(x, s), lambda dy: (dy * fn(1.0, s), None)

    @user.jvp_rule
    @declare
    def _forward(tangents, x, s):
        return fn(x, s), tangents[0] * fn(1.0, s)

    @padded.rule
    @declare
    def _leading(x, s):
        return fn(x, s), lambda dy: (dy * fn(1.0, s),)  # (padded: None for s)

    @padded.jvp_rule
    @declare
    def _padded_forward(tangents, x, s):
        return fn(x, s), tangents[0] * fn(1.0, s)

    return user, padded


def _scaled(x, s):
    return x * s


def _floored(x, s):
    return x * np.floor(s)


@pytest.mark.parametrize("which", [0, 1], ids=["user", "padded"])
def test_a_setting_a_rule_does_not_differentiate_is_refused_not_a_zero(which):
    scaled = _rules_dropping_s(_scaled)[which]
    x0 = np.arange(3.0)

    def f(a):
        return np.sum(scaled(x0 * a, a))  # d/da = 2 a sum(x0): the rule drops half

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="argument 's'"):
        mutad.gradient(f, 2.0)
    with pytest.raises(mutad.errors.UnsupportedOperationError, match="argument 's'"):
        mutad.jvp(f, (2.0,), (1.0,))
    assert mutad.gradient(lambda a: np.sum(scaled(x0 * a, 2.0)), 2.0)[0] == 6.0  # s constant


@pytest.mark.parametrize("which", [0, 1], ids=["user", "padded"])
def test_a_setting_declared_of_zero_derivative_may_have_none(which):
    from mutad.core.registry import zero_derivative
    x0 = np.arange(3.0)
    for declare in (zero_derivative("s"), None):
        floored = _rules_dropping_s(_floored, *[declare] if declare else [])[which]

        def f(a):  # floor(a): piecewise constant, its derivative zero
            return np.sum(floored(x0 * a, a))

        if declare is None:  # the same rules undeclared: refused
            with pytest.raises(mutad.errors.UnsupportedOperationError, match="argument 's'"):
                mutad.gradient(f, 2.2)
            continue
        assert mutad.gradient(f, 2.2)[0] == 6.0
        assert mutad.jvp(f, (2.2,), (1.0,))[1] == 6.0
