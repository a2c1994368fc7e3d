"""``scipy.special`` functions mutad differentiates: import them from here instead of SciPy.

>>> import numpy as np, mutad
>>> from mutad.scipy import special
>>> mutad.gradient(lambda x: special.gammaln(x).sum(), np.array([1.0, 2.0]))[0].round(4)
array([-0.5772,  0.4228])

Called with plain arrays each function is SciPy's own; called with traced arrays it runs its rule.
Each has a forward rule too (``@f.jvp_rule``). Forward rules, reverse rules and their pullbacks
all compute with these wrappers and NumPy, never with SciPy directly, so that an enclosing
differentiation can differentiate them again: a reverse pass over forward mode (``mutad.hvp``)
or over reverse mode (a gradient of a function that calls ``mutad.gradient``).
"""

import math

import numpy as np
import scipy.special as _special

from ..registry import adjoint
from ..tracing import unbroadcast
from ._adjoints import scipy_adjoint

gammaln = adjoint(_special.gammaln)
digamma = adjoint(_special.digamma)
polygamma = adjoint(_special.polygamma)
erf = adjoint(_special.erf)
erfc = adjoint(_special.erfc)
expit = adjoint(_special.expit)
logit = adjoint(_special.logit)
xlogy = adjoint(_special.xlogy)
logsumexp = scipy_adjoint(_special.logsumexp)

__all__ = ["digamma", "erf", "erfc", "expit", "gammaln", "logit", "logsumexp", "polygamma",
           "xlogy"]


def _elementwise(function, derivative):
    """Attach the rule of a unary elementwise ``function`` whose derivative at ``x`` is
    ``derivative(x, y)``, ``y`` being the function's value there."""

    @function.rule
    def rule(x):
        y = function(x)  # SciPy's own on plain x; under nested reverse mode x is traced

        def back(dy):
            return (dy * derivative(x, y),)

        return y, back

    @function.jvp_rule
    def jvp(tangents, x):
        y = function(x)
        return y, tangents[0] * derivative(x, y)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# fmt: off
# The derivatives call the wrappers, so that a reverse pass over a forward rule (hvp) can
# differentiate them.
for _function, _derivative in [
    # function  d y / d x, from (x, y)
    (gammaln,   lambda x, y: digamma(x)),                    # d log|Γ(x)| = ψ(x) dx, also for x < 0
    (digamma,   lambda x, y: polygamma(1, x)),               # ψ' is the trigamma function
    (erf,       lambda x, y: _TWO_OVER_SQRT_PI * np.exp(-x * x)),
    (erfc,      lambda x, y: -_TWO_OVER_SQRT_PI * np.exp(-x * x)),
    (expit,     lambda x, y: y * (1.0 - y)),
    (logit,     lambda x, y: 1.0 / (x * (1.0 - x))),
]:
    _elementwise(_function, _derivative)
# fmt: on


@polygamma.rule
def _polygamma_rule(n, x):
    y = polygamma(n, x)
    return y, lambda dy: (None, unbroadcast(dy * polygamma(n + 1, x), np.shape(x)))


@polygamma.jvp_rule
def _polygamma_jvp(tangents, n, x):
    return polygamma(n, x), tangents[1] * polygamma(n + 1, x)


def _xlogy_zeros(x, y):
    """Where x is 0, and where both are: the branches of ``_xlogy_partials``, taken when z is
    computed (a pullback may see x and y restored up to rounding, where a 0 may not survive)."""
    x_zero = x == 0
    return x_zero, x_zero & (y == 0)


def _xlogy_partials(x, y, zeros):
    """The partial derivatives of z = x log y. z = 0 wherever x = 0 (SciPy's convention, even
    at y = 0). There the y-derivative x / y is taken as its limit 0, and at x = y = 0, where
    x log y is -inf for every x != 0, the x-derivative as 0 too, so a zero entry does not turn
    the gradient into nan. The masked entries are computed from safe values (1 for y), so that
    differentiating these partials again (hvp) gives no nan either."""
    x_zero, both_zero = zeros
    with np.errstate(divide="ignore"):
        dz_dx = np.where(both_zero, 0.0, np.log(np.where(both_zero, 1.0, y)))
        dz_dy = np.where(x_zero, 0.0, x / np.where(x_zero, 1.0, y))
    return dz_dx, dz_dy


@xlogy.rule
def _xlogy_rule(x, y):
    # SciPy names the arguments x and y, so the output is z here.
    z = xlogy(x, y)
    zeros = _xlogy_zeros(x, y)

    def back(dz):
        dz_dx, dz_dy = _xlogy_partials(x, y, zeros)
        return unbroadcast(dz * dz_dx, np.shape(x)), unbroadcast(dz * dz_dy, np.shape(y))

    return z, back


@xlogy.jvp_rule
def _xlogy_jvp(tangents, x, y):
    z = xlogy(x, y)
    partials = _xlogy_partials(x, y, _xlogy_zeros(x, y))
    terms = [t * partial for t, partial in zip(tangents, partials, strict=True) if t is not None]
    return z, np.broadcast_to(sum(terms), np.shape(z))


def _reduced_axes(a, axis, b):
    ndim = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
    return tuple(range(ndim)) if axis is None else tuple(int(i) % ndim for i in np.atleast_1d(axis))


def _logsumexp_limits(y_kept):
    """Where y is finite and where it is -inf: the branches of ``_logsumexp_partials``, taken
    when y is computed (a pullback may see y restored up to rounding)."""
    return np.isfinite(y_kept), np.isneginf(y_kept)


def _logsumexp_partials(a, b, y_kept, sign_kept, limits):
    """``dy/da`` and ``dy/db`` (None without ``b``) of ``y = logsumexp(a, b=b)``, with ``y``
    and its sign (None: 1) kept as reduced axes of length 1.

    y = log|s|, s = Σ b_i e^(a_i): dy/da_i = sign · b_i e^(a_i - y), dy/db_i = sign · e^(a_i - y).
    With |b_i| folded into the exponent it is at most 0 when every b_i has one sign, so the
    weights never overflow (the softmax trick). Where every term vanished (y = -inf) no entry
    has any weight.
    """
    finite, vanished = limits
    finite_y = np.where(finite, y_kept, 0.0)
    sign = 1.0 if sign_kept is None else sign_kept
    with np.errstate(divide="ignore"):
        magnitude = 0.0 if b is None else np.log(np.abs(b))
    da = sign * np.exp(a + magnitude - finite_y)
    if b is not None:
        da = da * np.sign(b)
    da = np.where(vanished, 0.0, da)
    db = None if b is None else np.where(vanished, 0.0, sign * np.exp(a - finite_y))
    return da, db


@logsumexp.rule
def _logsumexp_rule(a, axis=None, b=None, keepdims=False, return_sign=False):
    result = logsumexp(a, axis, b, keepdims, return_sign)
    y, sign = result if return_sign else (result, None)
    axes = _reduced_axes(a, axis, b)

    def kept(value):
        return value if keepdims or value is None else np.expand_dims(value, axes)

    limits = _logsumexp_limits(kept(y))

    def back(dresult):
        dy = dresult[0] if return_sign else dresult  # the sign is piecewise constant
        partial_a, partial_b = _logsumexp_partials(a, b, kept(y), kept(sign), limits)
        da = kept(dy) * partial_a
        db = None
        if b is not None:
            db = kept(dy) * partial_b
            db = unbroadcast(np.broadcast_to(db, np.broadcast_shapes(db.shape, np.shape(b))),
                             np.shape(b))
        da = unbroadcast(np.broadcast_to(da, np.broadcast_shapes(da.shape, np.shape(a))),
                         np.shape(a))
        return da, None, db

    return result, back


@logsumexp.jvp_rule
def _logsumexp_jvp(tangents, a, axis=None, b=None, keepdims=False, return_sign=False):
    result = logsumexp(a, axis, b, keepdims, return_sign)
    y, sign = result if return_sign else (result, None)
    axes = _reduced_axes(a, axis, b)

    def kept(value):
        return value if keepdims or value is None else np.expand_dims(value, axes)

    partials = _logsumexp_partials(a, b, kept(y), kept(sign), _logsumexp_limits(kept(y)))
    da, db = tangents[0], tangents[2]
    terms = [t * partial for t, partial in zip((da, db), partials) if t is not None]
    dy = np.sum(sum(terms), axis=axes, keepdims=keepdims)
    return result, (dy, None) if return_sign else dy
