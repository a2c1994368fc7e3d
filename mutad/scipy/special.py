"""``scipy.special`` functions mutad differentiates: import them from here instead of SciPy.

>>> import numpy as np, mutad
>>> from mutad.scipy import special
>>> mutad.gradient(lambda x: special.gammaln(x).sum(), np.array([1.0, 2.0]))[0].round(4)
array([-0.5772,  0.4228])

Called with plain arrays each function is SciPy's own; called with traced arrays it runs its rule.
"""

import math

import numpy as np
import scipy.special as _special

from ..registry import adjoint
from ..tracing import unbroadcast
from ._adjoints import scipy_adjoint

gammaln = adjoint(_special.gammaln)
digamma = adjoint(_special.digamma)
erf = adjoint(_special.erf)
erfc = adjoint(_special.erfc)
expit = adjoint(_special.expit)
logit = adjoint(_special.logit)
xlogy = adjoint(_special.xlogy)
logsumexp = scipy_adjoint(_special.logsumexp)

__all__ = ["digamma", "erf", "erfc", "expit", "gammaln", "logit", "logsumexp", "xlogy"]


def _elementwise(function, derivative):
    """Attach the rule of a unary elementwise ``function`` whose derivative at ``x`` is
    ``derivative(x, y)``, ``y`` being the function's value there."""

    @function.rule
    def rule(x):
        y = function.fn(x)

        def back(dy):
            return (dy * derivative(x, y),)

        return y, back


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# fmt: off
for _function, _derivative in [
    # function  d y / d x, from (x, y)
    (gammaln,   lambda x, y: _special.digamma(x)),           # d log|Γ(x)| = ψ(x) dx, also for x < 0
    (digamma,   lambda x, y: _special.polygamma(1, x)),      # ψ' is the trigamma function
    (erf,       lambda x, y: _TWO_OVER_SQRT_PI * np.exp(-x * x)),
    (erfc,      lambda x, y: -_TWO_OVER_SQRT_PI * np.exp(-x * x)),
    (expit,     lambda x, y: y * (1.0 - y)),
    (logit,     lambda x, y: 1.0 / (x * (1.0 - x))),
]:
    _elementwise(_function, _derivative)
# fmt: on


@xlogy.rule
def _xlogy_rule(x, y):
    # SciPy names the arguments x and y, so the output is z here.
    z = _special.xlogy(x, y)

    def back(dz):
        # z = x log y, and z = 0 wherever x = 0 (SciPy's convention, even at y = 0). There the
        # y-derivative x / y is taken as its limit 0, and at x = y = 0, where x log y is -inf
        # for every x != 0, the x-derivative as 0 too, so a zero entry does not turn the
        # gradient into nan.
        with np.errstate(divide="ignore", invalid="ignore"):
            dz_dx = np.where((x == 0) & (y == 0), 0.0, np.log(y))
            dz_dy = np.where(x == 0, 0.0, x / y)
        return unbroadcast(dz * dz_dx, np.shape(x)), unbroadcast(dz * dz_dy, np.shape(y))

    return z, back


@logsumexp.rule
def _logsumexp_rule(a, axis=None, b=None, keepdims=False, return_sign=False):
    result = _special.logsumexp(a, axis, b, keepdims, return_sign)
    y, sign = result if return_sign else (result, None)
    ndim = len(np.broadcast_shapes(np.shape(a), np.shape(b)))
    axes = tuple(range(ndim)) if axis is None else tuple(
        int(i) % ndim for i in np.atleast_1d(axis))

    def kept(value):
        return value if keepdims else np.expand_dims(value, axes)

    def back(dresult):
        dy = dresult[0] if return_sign else dresult  # the sign is piecewise constant
        # y = log|s|, s = Σ b_i e^(a_i): dy/da_i = sign · b_i e^(a_i - y), dy/db_i =
        # sign · e^(a_i - y). With |b_i| folded into the exponent it is at most 0 when every
        # b_i has one sign, so the weights never overflow (the softmax trick). Where every
        # term vanished (y = -inf) no entry has any weight.
        y_kept = kept(y)
        finite_y = np.where(np.isfinite(y_kept), y_kept, 0.0)
        scale = kept(dy) if sign is None else kept(dy) * kept(sign)
        with np.errstate(divide="ignore"):
            magnitude = 0.0 if b is None else np.log(np.abs(b))
        da = scale * np.exp(a + magnitude - finite_y)
        if b is not None:
            da = da * np.sign(b)
        da = np.where(np.isneginf(y_kept), 0.0, da)
        db = None
        if b is not None:
            db = np.where(np.isneginf(y_kept), 0.0, scale * np.exp(a - finite_y))
            db = unbroadcast(np.broadcast_to(db, np.broadcast_shapes(db.shape, np.shape(b))),
                             np.shape(b))
        da = unbroadcast(np.broadcast_to(da, np.broadcast_shapes(da.shape, np.shape(a))),
                         np.shape(a))
        return da, None, db

    return result, back
