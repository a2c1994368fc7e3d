"""``scipy.stats`` distributions mutad differentiates, with every parameter traced.

>>> import numpy as np, mutad
>>> from mutad.scipy import stats
>>> def loss(mu, sigma):
...     return -stats.norm.logpdf(np.array([0.5, 1.5]), mu, sigma).sum()
>>> [float(g) for g in mutad.gradient(loss, 1.0, 2.0)]
[0.0, 0.9375]

Each distribution is used as SciPy's is: ``stats.norm.logpdf(x, loc, scale)``, or frozen,
``stats.norm(loc, scale).logpdf(x)``. Called with plain arguments a method is SciPy's own.
Called with traced arguments (or forward-mode duals) its value is still SciPy's own call's,
bit for bit, its asymptotic branches and log-space tails included; its derivatives are those
of a composition of functions mutad differentiates (ufuncs, ``scipy.special`` rows, ``np.where``
and the accurate forms of ``mutad.scipy._numerics``), so reverse and forward mode and every
order come from their rules. The compositions are written to keep their derivatives where
SciPy keeps its values (Student's t for large ``df``, Cauchy's far tails, the gamma density
for a large shape). They follow SciPy's conventions: ``nan`` for invalid parameters
(``scale <= 0``, a shape parameter out of range), the values outside the support (a density 0,
a log-density ``-inf``, a distribution function 0 or 1), with no gradient there; their
parameters are substituted by valid ones before the formula is evaluated, so that neither the
value nor the gradient of the valid entries meets a ``nan``. Every parameter is differentiated,
``binom``'s number of trials excepted, an integer (refused when traced); the shapes of the
gamma, chi-squared, beta and inverse gamma distribution functions and quantiles, and
``nbinom``'s ``n`` in its distribution function (incomplete gamma and beta functions and their
inverses, differentiated in their parameters by their series differentiated term by term), once
only: a second derivative there is refused with a ``MutadError``; the skew normal distribution
function has its derivatives in closed form beside SciPy's Owen's T. Where SciPy's quantile
functions are closed forms, ``ppf`` and ``isf`` are ``loc + scale * f(q, *shapes)``.
Student's t distribution function has its derivative in ``df``, by
quadrature (``scipy.special.stdtr``).

The other continuous distributions (``f``, ``genlogistic``, ``halfcauchy``, ``lomax``, ...,
and a user's own ``rv_continuous`` subclass) have ``pdf``, ``logpdf``, ``cdf``, ``logcdf``,
``sf``, ``logsf``, ``ppf`` and ``isf``, and the other discrete ones (``geom``, ``logser``,
``betabinom``, ``bernoulli``, ...) ``pmf``, ``logpmf``, ``cdf``, ``logcdf``, ``sf`` and
``logsf`` (differentiated in their real shapes), by SciPy's own standardised formulas
(``_logpdf``, ``_cdf``, ``_ppf``, ``_logpmf``, ...), which
are compositions of functions mutad differentiates: SciPy's value, with their derivatives,
SciPy's checks of the shapes and its support decided on the plain values. The buffers SciPy's
private code allocates and the formulas fill (``apply_where``'s, ``_lazyselect``'s, a frozen
distribution's support of its shapes) are followed while they run
(``allocation.library_allocation``). Shapes outside their domain are refused (there is no
valid stand-in to put in their place), and so is a formula that does not run on traced arrays
(a MutadError names the step: an incomplete gamma function's shape, SciPy's compiled code,
``np.nditer``).

``entropy`` (of frozen distributions too) is SciPy's value with the derivatives of SciPy's
closed form (its ``_entropy``, the asymptotic branches decided on the plain parameters as
SciPy decides them) plus ``log(scale)``; of the other continuous distributions (``f``,
``genextreme``, ``vonmises``, ...) with the derivatives of SciPy's own ``_entropy`` followed on
each element of the shapes (the distribution's own ``_entropy``); SciPy's generic quadrature of
the density (``skewnorm``, ``nct``: its integrand's derivative is infinite where the density
underflows to 0) and the discrete ones' (a sum over the support) are refused. ``vonmises.cdf`` (SciPy's compiled series)
has the derivatives of its series and normal approximation. ``norm.fit``, ``expon.fit`` and
``uniform.fit`` are SciPy's closed-form maximum likelihood fits, its steps on the
differentiated data (``floc`` and ``fscale`` too); a fit a distribution's class writes itself (``gamma`` with ``floc`` or
``method='MM'``, ``lognorm``, ``invgauss``, ``beta``, ...) is SciPy's code followed, its root
findings differentiated by their solutions; the fits SciPy computes by numerical
optimisation (``rv_continuous.fit``, reached by ``super().fit`` too) are refused. The other
moments' methods (``median``, ``interval``, ``moment``, ``expect``) and ``nnlf`` of
distributions without rules of their own for them are SciPy's code followed.

``multivariate_normal``'s ``logpdf``, ``pdf`` and ``entropy``, and ``multivariate_t``'s
``logpdf`` and ``pdf`` (finite ``df``), are differentiated in all their arguments (points and
parameters given as arrays or as lists); ``dirichlet``'s ``mean``, ``var`` and ``entropy``, and
``wishart``'s ``logpdf`` and ``pdf``, are SciPy's own code run on the traced parameters, and
so are ``vonmises_fisher``'s ``logpdf``, ``pdf`` and ``entropy`` (in ``x``, ``mu`` and
``kappa``; SciPy's checks on the plain values);
``multivariate_normal``'s ``cdf`` and ``logcdf`` (SciPy's integral) in ``x`` and ``mean`` with
a constant ``cov``, to the first order: ``∂Φ/∂xᵢ`` is the density of ``xᵢ`` times SciPy's integral of
the conditional distribution of the others, of one dimension fewer.

The descriptive statistics and tests (``skew``, ``zscore``, ``pearsonr``, ``ttest_ind``, ...)
are SciPy's steps on traced arrays, in ``mutad.scipy._descriptive``; they are importable from
here too.

``gaussian_kde`` of a dataset, weights or scalar bandwidth a differentiation follows (and
SciPy's own estimate called at followed points) is differentiated in all of them and in the
points: ``evaluate``, calling it, ``pdf``, ``logpdf`` and ``integrate_box_1d`` (in its limits
too) give SciPy's own estimate's values,
and so do its attributes ``factor``, ``covariance``, ``inv_cov``, ``cho_cov``, ``log_det``,
``weights`` and ``neff``; their derivatives are those of the same estimate written with
functions mutad differentiates: the weighted covariance of the data (``np.cov``) times the
bandwidth factor squared (Scott's or Silverman's of the effective sample size, the data's
own, a scalar, or the user's function of the estimate, called on mutad's estimate), then the
weighted sum of the Gaussian kernels (its log by ``logsumexp``). Its other methods
(``resample``, the integrals, ``marginal``) are refused by name: build the estimate from
plain values for them.

``mutad.registry.defmethod`` gives one rule per method of SciPy's distribution classes and of
their frozen classes (facet ``method``), so that a differentiation can route
``scipy.stats.norm.logpdf(x, mu, sigma)``, called by SciPy's names, here.
"""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats as _stats
from scipy.stats._continuous_distns import FitDataError as _FitDataError
from scipy.stats._continuous_distns import (
    FitUniformFixedScaleDataError as _FitUniformFixedScaleDataError)
from scipy.stats._continuous_distns import _remove_optimizer_parameters
from scipy.stats._distn_infrastructure import (rv_continuous_frozen, rv_discrete_frozen, rv_frozen,
                                               rv_generic)
from scipy.stats import _kde
from scipy.stats import _stats as _compiled
from scipy.stats._multivariate import (dirichlet_frozen, dirichlet_gen, invwishart_frozen,
                                       invwishart_gen, multinomial_frozen, multinomial_gen,
                                       multivariate_normal_frozen, multivariate_normal_gen,
                                       multivariate_t_frozen, multivariate_t_gen,
                                       vonmises_fisher_frozen, vonmises_fisher_gen, wishart_frozen,
                                       wishart_gen)

from ..api import stop_gradient
from ..core.allocation import holds_wrapped, library_allocation, lists_as_arrays
from ..engines.arraylike import carries_derivative, settled
from ..custom import Adjoint
from ..core.errors import MutadError, UnsupportedOperationError
from ..core.levels import Tracer, innermost
from ..core.registry import defmethod, defroute
from ..core.views import memory
from . import _descriptive, _numerics, linalg
from ._descriptive import *  # noqa: F403
from ._adjoints import (Elementwise, Value, following_scipys_code, not_replayed, refused_attribute,
                        scipys_value)
from ._numerics import both
from .special import (betainc, betaincc, betaln, erf, expit, gammainc, gammaincc, gammaln,
                      i0e, i1e, log_expit, log_ndtr, logit, ndtr, ndtri, psi, stdtr, xlog1py,
                      xlogy)
from .special import logsumexp as _logsumexp

DISTRIBUTIONS = ("beta", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gumbel_r",
                 "halfnorm", "invgamma", "invwishart", "laplace", "logistic", "lognorm", "multinomial",
                 "multivariate_normal",
                 "multivariate_t", "nbinom", "norm", "pareto", "poisson", "rayleigh", "skewnorm",
                 "t", "truncnorm", "uniform", "vonmises_fisher", "weibull_min", "wishart")
# The descriptive statistics and tests stand in for SciPy's (registry.defroute) from their module.
__all__ = [*DISTRIBUTIONS, *_descriptive.__all__, "gaussian_kde"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_PI = math.log(math.pi)
_LOG_2 = math.log(2.0)


def _is_traced(args, kwargs):
    """Whether a differentiation (reverse or forward) follows any of these arguments."""
    return innermost((*args, *kwargs.values())) is not None


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _scipys_value(value, composition):
    """SciPy's own ``value`` with the derivatives of ``composition``: ``value`` plus the
    composition minus its own value as a constant (0, exactly, wherever it is finite). SciPy's
    algorithms keep values the composition may round differently (an asymptotic branch, a
    log-space tail), while the composition is written so that its derivatives hold there."""
    constant = stop_gradient(composition)
    finite = np.isfinite(constant)
    return value + (np.where(finite, composition, 0.0) - np.where(finite, constant, 0.0))


# ----------------------------------------------------------------------------------------------
# Univariate distributions: the standardised functions of z = (x - loc) / scale and the shapes


class Univariate:
    """One of SciPy's univariate distributions (``scipy``: its generator, ``scipy.stats.norm``).

    ``functions`` maps a method (``"logpdf"``, ``"cdf"``, ...) to its standardised form
    ``f(z, *shapes)``; ``valid(*shapes)`` says which shape parameters are in range (SciPy's
    ``_argcheck``); ``safe`` are valid stand-ins for the shapes, and ``inside`` (a number, or a
    function of the shapes) for ``z``, where an entry is out of range or outside the support;
    ``support`` is ``(low, high)`` of ``z``, or ``bounds(*shapes)`` where it depends on the
    shapes; ``quantiles`` maps ``"ppf"`` and ``"isf"`` to their standardised forms
    ``f(q, *shapes)``.
    """

    discrete = False

    # The methods common to every distribution, set on each instance by __init__ (declared here
    # for type checkers); a continuous one has pdf and logpdf beside them, a discrete one pmf and
    # logpmf.
    cdf: Callable[..., Any]
    logcdf: Callable[..., Any]
    sf: Callable[..., Any]
    logsf: Callable[..., Any]

    def __init__(self, scipy, functions, valid=None, safe=(), support=(-np.inf, np.inf),
                 inside=0.0, bounds=None, quantiles=None):
        self.scipy = scipy
        self.functions = functions
        self.valid = valid
        self.safe = safe
        self.support = support
        self.inside = inside
        self.bounds = bounds  # the support as a function of the shapes, where it depends on them
        self.quantiles = quantiles or {}  # "ppf", "isf": the standardised f(q, *shapes)
        # SciPy's own value of each method, a function of the traced arguments with no
        # derivative of its own (what the composition's derivatives are added to).
        self.values = {name: Value(getattr(scipy, name), f"scipy.stats.{scipy.name}.{name}")
                       for name in self.methods()}
        for name in self.methods():
            setattr(self, name, self._method(name))

    def methods(self):
        names = ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf")
        names = tuple(n.replace("pdf", "pmf") for n in names) if self.discrete else names
        return names + tuple(self.quantiles)

    def _method(self, name):
        def method(*args, **kwargs):
            if not _is_traced(args, kwargs):
                return getattr(self.scipy, name)(*args, **kwargs)
            return self.evaluate(name, *args, **kwargs)

        method.__name__ = name
        method.__qualname__ = f"{self.scipy.name}.{name}"
        method.__doc__ = f"``scipy.stats.{self.scipy.name}.{name}``, differentiable."
        return method

    def __call__(self, *args, **kwargs):
        """The frozen distribution: ``norm(loc, scale).logpdf(x)``."""
        return Frozen(self, args, kwargs)

    def entropy(self, *args, **kwargs):
        """``entropy(*shapes, loc, scale)``: SciPy's value, with the derivatives of SciPy's
        closed form (``_entropy``) plus ``log(scale)``; NaN (no derivative) for invalid
        parameters."""
        if not _is_traced(args, kwargs):
            return self.scipy.entropy(*args, **kwargs)
        formula = ENTROPIES.get(self.scipy.name)
        if formula is None:
            if self.discrete:
                raise UnsupportedOperationError(
                    f"scipy.stats.{self.scipy.name}.entropy of differentiated parameters: SciPy "
                    "computes it by a sum over the support, which mutad does not follow; it "
                    "follows the closed forms of the continuous distributions.")
            if type(self.scipy)._entropy is _stats.rv_continuous._entropy:
                # (the integrand -p log p has an infinite derivative where the density
                # underflows to 0, in the tails: its derivative there is not the limit's)
                raise UnsupportedOperationError(
                    f"scipy.stats.{self.scipy.name}.entropy of differentiated parameters: SciPy "
                    "computes it by quadrature of the density, which mutad does not "
                    "differentiate; it follows the distributions' own closed forms.")
            formula = self._scipys_entropy
        shapes, loc, scale = self.scipy._parse_args(*args, **kwargs)
        value = _ENTROPY_VALUES.setdefault(self.scipy.name, Value(
            self.scipy.entropy, f"scipy.stats.{self.scipy.name}.entropy"))(*shapes, loc, scale)
        valid = both(scale > 0, True if self.valid is None else self.valid(*shapes),
                     loc == loc)
        shapes = self._valid_shapes(shapes, valid)
        composition = formula(*shapes) + _log(np.where(valid, scale, 1.0))
        result = _scipys_value(value, np.where(valid, composition, np.nan))
        return result[()] if np.ndim(result) == 0 else result

    def _scipys_entropy(self, *shapes):
        """The entropy of the standard distribution by SciPy's own ``_entropy`` of the
        distribution, followed on each element of the shapes, as SciPy calls it
        (``np.vectorize``)."""
        if not shapes:
            return following_scipys_code(self.scipy._entropy, (), {})
        shape = np.broadcast_shapes(*(np.shape(s) for s in shapes))
        shapes = [np.broadcast_to(s, shape) for s in shapes]  # (a constant one stays constant)
        with library_allocation():  # (the buffers SciPy's formulas fill)
            entropies = [following_scipys_code(self.scipy._entropy, [s[index] for s in shapes],
                                               {}) for index in np.ndindex(shape)]
        return np.reshape(np.stack(entropies), shape)

    def fit(self, data, *args, **kwargs):
        """``fit(data)`` where SciPy's is a closed form (``norm``, ``expon``, ``uniform``):
        SciPy's steps on the differentiated data; otherwise ``_scipys_fit``."""
        if not _is_traced((data, *args), kwargs):
            return self.scipy.fit(data, *args, **kwargs)
        formula = FITS.get(self.scipy.name)
        method = kwargs.get("method", "mle")
        if formula is None or not isinstance(method, str) or method.lower() != "mle":
            return _scipys_fit(self.scipy, data, args, kwargs)
        return formula(data, *args, **kwargs)

    def _parse(self, x, args, kwargs):
        shapes, loc, scale = self.scipy._parse_args(*args, **kwargs)
        return x, shapes, loc, scale

    def evaluate(self, name, x, *args, **kwargs):
        """Method ``name``: SciPy's value, with the derivatives of its composition."""
        x, shapes, loc, scale = self._parse(x, args, kwargs)
        if type(x) in (list, tuple):  # points given as a list: the array SciPy reads
            x = lists_as_arrays([x])[0] if holds_wrapped(x) else np.asarray(x)
        parameters = (*shapes, loc) if self.discrete else (*shapes, loc, scale)
        composition = (self.quantile if name in self.quantiles else self.composition)(
            name, x, shapes, loc, scale)
        result = _scipys_value(self.values[name](x, *parameters), composition)
        return result[()] if np.ndim(result) == 0 else result

    def composition(self, name, x, shapes, loc, scale):
        """Method ``name`` as a composition, SciPy's conventions included."""
        valid = both(scale > 0, True if self.valid is None else self.valid(*shapes))
        z = (x - loc) / np.where(valid, scale, 1.0)
        valid = both(valid, np.logical_not(np.isnan(z)))
        low, high = self.support if self.bounds is None else self.bounds(*shapes)
        if self.discrete:
            integral = np.floor(z)  # no gradient in k: the distribution is piecewise constant
            if name in ("pmf", "logpmf"):
                inside = both(valid, z == integral, z >= low, z <= high)
            else:
                inside = both(valid, z >= low, z < high)
            z = integral
        elif name in ("pdf", "logpdf"):
            inside = both(valid, z >= low, z <= high)
        else:
            inside = both(valid, z > low, z < high)
        shapes = self._valid_shapes(shapes, valid)
        z = np.where(inside, z, self.inside(*shapes) if callable(self.inside) else self.inside)
        base = name[3:] if name.startswith("log") else name
        density = base in ("pdf", "pmf")
        logged = name.startswith("log")
        if density:
            value = self.functions["logpdf"](z, *shapes)
            if not self.discrete:
                value = value - _log(np.where(valid, scale, 1.0))
            if not logged:
                value = np.exp(value)
        else:
            value = self.functions[name if name in self.functions else base](z, *shapes)
            if logged and name not in self.functions:
                value = _log(value)
        outside = self._outside(name, x, loc, np.where(valid, scale, 1.0), low, high)
        return np.where(inside, value, np.where(valid, outside, np.nan))

    def _valid_shapes(self, shapes, valid):
        """The shapes, each invalid one replaced by its safe stand-in, broadcast with ``valid``
        (the entries' validity), as SciPy's formulas receive them: decided on the shapes
        alone, so that constant shapes stay constant beside a differentiated scale or point
        (a shape whose derivative mutad does not have, a noncentral distribution's degrees of
        freedom, may then be given); where the scale or point is invalid, the result is NaN
        whatever the shapes."""
        own = True if self.valid is None else self.valid(*shapes)
        own = np.logical_and(own, np.ones(np.shape(valid), bool))  # (plain: so are constants)
        return [np.where(own, s, safe) for s, safe in zip(shapes, self.safe, strict=True)]

    def quantile(self, name, q, shapes, loc, scale):
        """``ppf`` or ``isf`` as a composition, ``loc + scale * f(q, *shapes)``, inside
        (0, 1); SciPy's values at 0 and 1 (the ends of the support) and its ``nan`` elsewhere
        have no derivative."""
        valid = both(scale > 0, True if self.valid is None else self.valid(*shapes))
        inside = both(valid, q > 0, q < 1)
        shapes = self._valid_shapes(shapes, valid)
        value = self.quantiles[name](np.where(inside, q, 0.5), *shapes)
        return np.where(inside, loc + np.where(valid, scale, 1.0) * value, np.nan)

    def _outside(self, name, x, loc, scale, low, high):
        """The constant value of method ``name`` outside the support."""
        zero, one = (-np.inf, 0.0) if name.startswith("log") else (0.0, 1.0)
        if name.endswith(("pdf", "pmf")):
            return zero
        z = (x - loc) / scale  # compared only: plain results
        above = z >= high if not self.discrete else z >= high
        if name.endswith("cdf"):
            return np.where(above, one, zero)
        return np.where(above, zero, one)  # sf


class Continuous(Univariate):
    """A continuous distribution (``scipy.stats.norm``): its densities are ``pdf`` and
    ``logpdf``."""

    pdf: Callable[..., Any]
    logpdf: Callable[..., Any]


class Discrete(Univariate):
    """A discrete distribution (``scipy.stats.poisson``): its masses are ``pmf`` and
    ``logpmf``."""

    discrete = True
    pmf: Callable[..., Any]
    logpmf: Callable[..., Any]

    def _parse(self, x, args, kwargs):
        shapes, loc, _ = self.scipy._parse_args(*args, **kwargs)
        return x, shapes, loc, 1.0


class Frozen:
    """A distribution with its parameters fixed, as ``scipy.stats.norm(loc, scale)``."""

    def __init__(self, distribution, args, kwargs):
        self.distribution = distribution
        self.args = args
        self.kwds = kwargs

    def __getattr__(self, name):
        distribution = self.distribution
        if name in _AT_POINTS and hasattr(distribution, name):
            method = getattr(distribution, name)
            return lambda x, *args, **kwargs: method(x, *self.args, *args, **self.kwds, **kwargs)
        if name in _OF_PARAMETERS and hasattr(distribution, name):
            method = getattr(distribution, name)
            return lambda: method(*self.args, **self.kwds)
        if name.startswith("__") or not _is_traced(self.args, self.kwds):
            # (constant parameters: SciPy's own frozen distribution's mean(), rvs(), ...)
            return getattr(distribution.scipy(*self.args, **self.kwds), name)
        followed = [n for n in _AT_POINTS if hasattr(distribution, n)]
        followed += [f"{n}()" for n in _OF_PARAMETERS if hasattr(distribution, n)]
        refused_attribute(name, f"{name} of a frozen scipy.stats distribution with "
                          "differentiated parameters is not followed (mutad follows its "
                          f"{', '.join(followed)}): compute it from the parameters.")


_AT_POINTS = ("pdf", "logpdf", "pmf", "logpmf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf")
"""The methods of a frozen distribution that take points (or probabilities) first."""

_OF_PARAMETERS = ("entropy", "mean", "var")
"""The methods of a frozen distribution of its parameters alone (of a multivariate one's, those
its class in this module has)."""


def _laplace_tail(z):
    """``0.5 exp(-|z|)``, with the derivative at 0 of the branch the distribution functions
    take there (``z <= 0``: ``0.5 exp(z)``), not ``abs``'s 0 (the density at the centre is
    not 0)."""
    return 0.5 * np.exp(np.where(z > 0, -z, z))


def _laplace_ppf(q):
    upper = q > 0.5  # each side's logarithm of an argument kept inside (0, 1]
    return np.where(upper, -np.log(2.0 * (1.0 - np.where(upper, q, 0.75))),
                    np.log(2.0 * np.where(upper, 0.25, q)))


def _cauchy_logpdf(z):
    """-log π - log(1 + z²), as SciPy writes it for |z| ≥ 1 (-log π - 2 log|z| - log1p(1/z²)),
    whose derivative -2z/(1+z²) does not overflow to 0 for large |z|."""
    inner = np.abs(z) < 1.0
    zi = np.where(inner, z, 0.0)
    zo = np.where(inner, 1.0, z)
    return np.where(inner, -_LOG_PI - np.log1p(zi * zi),
                    -_LOG_PI - 2.0 * np.log(np.abs(zo)) - np.log1p((1.0 / zo) ** 2))


def _cauchy_logcdf_value(z):
    with np.errstate(divide="ignore"):
        return np.log(np.arctan2(1.0, -np.asarray(z, dtype=float)) / np.pi)


def _cauchy_hazard_value(z):
    """d/dz log F(z) = 1 / ((1 + z²) arctan2(1, -z)); for z < -1, with u = -1/z,
    u (u / arctan u) / (1 + u²), which keeps its value (about 1/|z|) where z² overflows."""
    z = np.asarray(z, dtype=float)
    left = z < -1.0
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        u = np.where(left, -1.0 / np.where(left, z, -2.0), 0.5)
        far = u * (u / np.arctan(u)) / (1.0 + u * u)
        zn = np.where(left, 0.0, z)
        near = 1.0 / ((1.0 + zn * zn) * np.arctan2(1.0, -zn))
    result = np.where(left, far, near)
    return result[()] if result.ndim == 0 else result


def _cauchy_hazard_derivative(h, z):
    """d/dz of the hazard h: -(2z arctan2(1, -z) + 1) h², where for z < -1 the bracket is
    1 - 2 arctan(u)/u, u = -1/z (no product that overflows)."""
    left = z < -1.0
    u = np.reciprocal(np.where(left, -z, 2.0))
    far = 1.0 - 2.0 * (np.arctan(u) / u)
    zn = np.where(left, 0.0, z)
    near = 2.0 * zn * np.arctan2(1.0, -zn) + 1.0
    return -np.where(left, far, near) * h * h


_cauchy_hazard = Elementwise(_cauchy_hazard_value, _cauchy_hazard_derivative,
                             name="cauchy_hazard")
_cauchy_logcdf = Elementwise(_cauchy_logcdf_value, lambda y, z: _cauchy_hazard(z),
                             name="cauchy_logcdf")


def _logistic_logpdf(z):
    """-z - 2 log(1 + e^-z) as log σ(z) + log σ(-z), whose derivative σ(-z) - σ(z) and second
    derivative -2 σ(z) σ(-z) hold in the tails; near 0, as -2 log(2 cosh(z/2)), whose
    derivative -tanh(z/2) keeps its digits where σ(-z) - σ(z) cancels."""
    near = np.abs(z) < 1.0
    zn = np.where(near, z, 0.0)
    zf = np.where(near, 1.0, z)
    return np.where(near, -2.0 * np.log(np.cosh(0.5 * zn)) - 2.0 * _LOG_2,
                    log_expit(zf) + log_expit(-zf))


def _log_gauss_mass(a, b):
    """log(Φ(b) - Φ(a)), a < b, as SciPy's truncnorm takes it: with both bounds in a tail,
    from the log-probabilities of that tail, which do not cancel."""
    right, left = a > 0, b < 0  # both in the right tail: Φ(-a) - Φ(-b); both in the left one
    central = np.logical_not(np.logical_or(right, left))
    ar, br = np.where(right, a, 1.0), np.where(right, b, 2.0)
    al, bl = np.where(left, a, -2.0), np.where(left, b, -1.0)
    ac, bc = np.where(central, a, -1.0), np.where(central, b, 1.0)
    upper = log_ndtr(-ar) + np.log1p(-np.exp(log_ndtr(-br) - log_ndtr(-ar)))
    lower = log_ndtr(bl) + np.log1p(-np.exp(log_ndtr(al) - log_ndtr(bl)))
    middle = np.log1p(-ndtr(ac) - ndtr(-bc))
    return np.where(right, upper, np.where(left, lower, middle))



def _between(a, b):
    """A point inside (a, b), either end infinite."""
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    middle = 0.5 * (np.where(finite_a, a, 0.0) + np.where(finite_b, b, 0.0))
    return np.where(both(finite_a, finite_b), middle,
                    np.where(finite_a, a + 1.0, np.where(finite_b, b - 1.0, 0.0)))


def _skewnorm_cdf_value(z, a):
    return _stats.skewnorm.cdf(z, a)


def _skewnorm_cdf_in_a(y, z, a):
    """d/da of the skew-normal distribution function Φ(z) - 2 T(z, a) (Owen's T):
    -exp(-z² (1 + a²) / 2) / (π (1 + a²))."""
    s = 1.0 + a * a
    return -np.exp(-0.5 * z * z * s) / (np.pi * s)


_skewnorm_cdf = Elementwise(
    _skewnorm_cdf_value,
    lambda y, z, a: 2.0 * np.exp(-0.5 * z * z - 0.5 * _LOG_2PI) * ndtr(a * z),
    _skewnorm_cdf_in_a, name="skewnorm_cdf")
"""SciPy's skew-normal distribution function (Owen's T, which mutad does not differentiate),
with its derivatives in closed form: the density in z, and the one above in a."""


# SciPy's von Mises distribution function (its compiled ``von_mises_cdf(k, x)``, x taken to
# [-π, π] plus whole turns): below k = 50 the series 1/2 + x/2π + V/π, V = Σ_n<p R_n (sin nx / n
# + ...) by its ratios R_n = 1 / (2n/k + R_(n+1)), p = ⌊29 + k/2 - 100/(k + 5)⌋ terms; above, the
# normal approximation Φ(b sin(x/2)), b = √(2/π) / i0e(k). Its derivatives are those of the same
# formulas: in x the density the series sums (e^(k(cos x - 1)) / 2π i0e(k)) or φ(z) b cos(x/2)/2,
# in k the series' ratios differentiated term by term, or φ(z) sin(x/2) b'.
_VON_MISES_SERIES = 50.0
_VON_MISES_TERMS = 52  # the most terms below k = 50
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _von_mises_parts(k, x):
    """Where the series holds (k < 50), a safe k for each branch, x on [-π, π], and the normal
    approximation's b and z."""
    turns = np.round(x / (2.0 * math.pi))  # (piecewise constant: no derivative)
    x = x - turns * (2.0 * math.pi)
    series = k < _VON_MISES_SERIES
    small = np.where(series, k, 1.0)
    large = np.where(series, _VON_MISES_SERIES, k)
    b = _SQRT_2_OVER_PI / i0e(large)
    return series, small, large, x, b, b * np.sin(0.5 * x)


def _normal_density(z):
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _von_mises_cdf_dk(y, k, x):
    series, small, large, x, b, z = _von_mises_parts(k, x)
    terms = np.trunc(29.0 + 0.5 * small - 100.0 / (small + 5.0))
    ratio = d_ratio = total = d_total = 0.0
    for n in range(_VON_MISES_TERMS - 1, 0, -1):
        inside = n < terms
        new_ratio = 1.0 / (2.0 * n / small + ratio)
        new_d_ratio = new_ratio * new_ratio * (2.0 * n / (small * small) - d_ratio)
        term = np.sin(n * x) / n + total
        new_total, new_d_total = new_ratio * term, new_d_ratio * term + new_ratio * d_total
        ratio, d_ratio = np.where(inside, new_ratio, ratio), np.where(inside, new_d_ratio, d_ratio)
        total, d_total = np.where(inside, new_total, total), np.where(inside, new_d_total, d_total)
    d_b = -_SQRT_2_OVER_PI * (i1e(large) - i0e(large)) / (i0e(large) * i0e(large))
    return np.where(series, d_total / math.pi, _normal_density(z) * np.sin(0.5 * x) * d_b)


def _von_mises_cdf_dx(y, k, x):
    series, small, large, x, b, z = _von_mises_parts(k, x)
    density = np.exp(small * (np.cos(x) - 1.0)) / (2.0 * math.pi * i0e(small))
    return np.where(series, density, _normal_density(z) * b * (0.5 * np.cos(0.5 * x)))


_von_mises_cdf = Elementwise(_compiled.von_mises_cdf, _von_mises_cdf_dk, _von_mises_cdf_dx,
                             name="von_mises_cdf")


def _vonmises_standard_cdf(self, x, kappa):  # (SciPy's vonmises._cdf, whose function is compiled)
    return _von_mises_cdf(kappa, x)


# (of constants too: SciPy's compiled function does not read them, and its generic quantile
# solver evaluates the distribution function on the constants its quantile's broadcast made)
_vonmises_standard_cdf.on_constants = True  # type: ignore[attr-defined]

defmethod(type(_stats.vonmises), "_cdf", _vonmises_standard_cdf)


def _integral_count(n):
    """The number of trials of the binomial distribution: an integer, with no derivative."""
    if carries_derivative(n):
        raise UnsupportedOperationError(
            "scipy.stats.binom with a differentiated number of trials n: n is an integer, and "
            "the distribution has no derivative in it. Pass n as a constant.")
    return n


def _binom_logpmf(k, n, p):
    n = _integral_count(n)
    return (gammaln(n + 1.0) - (gammaln(k + 1.0) + gammaln(n - k + 1.0)) + xlogy(k, p)
            + xlog1py(n - k, -p))


# fmt: off
norm = Continuous(_stats.norm, {
    "logpdf": lambda z: -0.5 * z * z - 0.5 * _LOG_2PI,
    "cdf":    lambda z: ndtr(z),
    "logcdf": lambda z: log_ndtr(z),
    "sf":     lambda z: ndtr(-z),
    "logsf":  lambda z: log_ndtr(-z),
}, quantiles={"ppf": lambda q: ndtri(q), "isf": lambda q: -ndtri(q)})
t = Continuous(_stats.t, {
    "logpdf": lambda z, df: _numerics.t_log_density(z, df),
    "cdf":    lambda z, df: stdtr(df, z),
    "sf":     lambda z, df: stdtr(df, -z),
}, valid=lambda df: df > 0, safe=(1.0,))
gamma = Continuous(_stats.gamma, {
    "logpdf": lambda z, a: _numerics.gamma_log_density(z, a),
    "cdf":    lambda z, a: gammainc(a, z),
    "sf":     lambda z, a: gammaincc(a, z),
}, valid=lambda a: a > 0, safe=(1.0,), support=(0.0, np.inf), inside=1.0)
chi2 = Continuous(_stats.chi2, {
    "logpdf": lambda z, df: _numerics.gamma_log_density(0.5 * z, 0.5 * df) - _LOG_2,
    "cdf":    lambda z, df: gammainc(0.5 * df, 0.5 * z),
    "sf":     lambda z, df: gammaincc(0.5 * df, 0.5 * z),
}, valid=lambda df: df > 0, safe=(1.0,), support=(0.0, np.inf), inside=1.0)
beta = Continuous(_stats.beta, {
    "logpdf": lambda z, a, b: xlog1py(b - 1.0, -z) + xlogy(a - 1.0, z) - betaln(a, b),
    "cdf":    lambda z, a, b: betainc(a, b, z),
    "sf":     lambda z, a, b: betaincc(a, b, z),
}, valid=lambda a, b: both(a > 0, b > 0), safe=(1.0, 1.0), support=(0.0, 1.0), inside=0.5)
expon = Continuous(_stats.expon, {
    "logpdf": lambda z: -z,
    "cdf":    lambda z: -np.expm1(-z),
    "sf":     lambda z: np.exp(-z),
    "logsf":  lambda z: -z,
}, support=(0.0, np.inf), inside=1.0,
   quantiles={"ppf": lambda q: -np.log1p(-q), "isf": lambda q: -np.log(q)})
laplace = Continuous(_stats.laplace, {
    "logpdf": lambda z: -np.abs(z) - _LOG_2,
    "cdf":    lambda z: np.where(z > 0, 1.0 - _laplace_tail(z), _laplace_tail(z)),
    "sf":     lambda z: np.where(z > 0, _laplace_tail(z), 1.0 - _laplace_tail(z)),
    "logcdf": lambda z: np.where(z > 0, np.log1p(-_laplace_tail(z)), z - _LOG_2),
    "logsf":  lambda z: np.where(z > 0, -z - _LOG_2, np.log1p(-_laplace_tail(z))),
}, quantiles={"ppf": lambda q: _laplace_ppf(q), "isf": lambda q: -_laplace_ppf(q)})
logistic = Continuous(_stats.logistic, {
    "logpdf": _logistic_logpdf,
    "cdf":    lambda z: expit(z),
    "sf":     lambda z: expit(-z),
    "logcdf": lambda z: log_expit(z),
    "logsf":  lambda z: log_expit(-z),
}, quantiles={"ppf": lambda q: logit(q), "isf": lambda q: -logit(q)})
cauchy = Continuous(_stats.cauchy, {
    "logpdf": _cauchy_logpdf,
    "cdf":    lambda z: np.arctan2(1.0, -z) / np.pi,
    "sf":     lambda z: np.arctan2(1.0, z) / np.pi,
    "logcdf": lambda z: _cauchy_logcdf(z),
    "logsf":  lambda z: _cauchy_logcdf(-z),
}, quantiles={"ppf": lambda q: np.tan(np.pi * q - np.pi / 2.0),
              "isf": lambda q: np.tan(np.pi / 2.0 - np.pi * q)})
poisson = Discrete(_stats.poisson, {
    "logpdf": lambda k, mu: xlogy(k, mu) - gammaln(k + 1.0) - mu,
    "cdf":    lambda k, mu: gammaincc(k + 1.0, mu),
    "sf":     lambda k, mu: gammainc(k + 1.0, mu),
}, valid=lambda mu: mu >= 0, safe=(1.0,), support=(0.0, np.inf))
binom = Discrete(_stats.binom, {
    "logpdf": _binom_logpmf,
    "cdf":    lambda k, n, p: betainc(_integral_count(n) - k, k + 1.0, 1.0 - p),
    "sf":     lambda k, n, p: betainc(k + 1.0, _integral_count(n) - k, p),
}, valid=lambda n, p: both(n >= 0, n == np.floor(n), p >= 0, p <= 1), safe=(1.0, 0.5),
   bounds=lambda n, p: (0.0, n))
nbinom = Discrete(_stats.nbinom, {
    "logpdf": lambda k, n, p: (gammaln(n + k) - gammaln(k + 1.0) - gammaln(n) + n * np.log(p)
                               + xlog1py(k, -p)),
    "cdf":    lambda k, n, p: betainc(n, k + 1.0, p),
    "sf":     lambda k, n, p: betaincc(n, k + 1.0, p),
}, valid=lambda n, p: both(n > 0, p > 0, p <= 1), safe=(1.0, 0.5), support=(0.0, np.inf))
lognorm = Continuous(_stats.lognorm, {
    "logpdf": lambda z, s: -0.5 * (np.log(z) / s)**2 - np.log(s) - np.log(z) - 0.5 * _LOG_2PI,
    "cdf":    lambda z, s: ndtr(np.log(z) / s),
    "logcdf": lambda z, s: log_ndtr(np.log(z) / s),
    "sf":     lambda z, s: ndtr(-np.log(z) / s),
    "logsf":  lambda z, s: log_ndtr(-np.log(z) / s),
}, valid=lambda s: s > 0, safe=(1.0,), support=(0.0, np.inf), inside=1.0,
   quantiles={"ppf": lambda q, s: np.exp(s * ndtri(q)), "isf": lambda q, s: np.exp(-s * ndtri(q))})
uniform = Continuous(_stats.uniform, {
    "logpdf": lambda z: 0.0 * z,
    "cdf":    lambda z: z,
    "sf":     lambda z: 1.0 - z,
    "logcdf": lambda z: np.log(z),
    "logsf":  lambda z: np.log1p(-z),
}, support=(0.0, 1.0), inside=0.5, quantiles={"ppf": lambda q: q, "isf": lambda q: 1.0 - q})
halfnorm = Continuous(_stats.halfnorm, {
    "logpdf": lambda z: 0.5 * math.log(2.0 / math.pi) - 0.5 * z * z,
    "cdf":    lambda z: erf(z / math.sqrt(2.0)),
    "sf":     lambda z: 2.0 * ndtr(-z),
    "logsf":  lambda z: _LOG_2 + log_ndtr(-z),
}, support=(0.0, np.inf), inside=1.0,
   quantiles={"ppf": lambda q: ndtri((1.0 + q) / 2.0), "isf": lambda q: -ndtri(q / 2.0)})
truncnorm = Continuous(_stats.truncnorm, {
    "logpdf": lambda z, a, b: -0.5 * z * z - 0.5 * _LOG_2PI - _log_gauss_mass(a, b),
    "cdf":    lambda z, a, b: np.exp(_log_gauss_mass(a, z) - _log_gauss_mass(a, b)),
    "sf":     lambda z, a, b: np.exp(_log_gauss_mass(z, b) - _log_gauss_mass(a, b)),
    "logcdf": lambda z, a, b: _log_gauss_mass(a, z) - _log_gauss_mass(a, b),
    "logsf":  lambda z, a, b: _log_gauss_mass(z, b) - _log_gauss_mass(a, b),
}, valid=lambda a, b: a < b, safe=(-1.0, 1.0), bounds=lambda a, b: (a, b), inside=_between)
weibull_min = Continuous(_stats.weibull_min, {
    "logpdf": lambda z, c: np.log(c) + xlogy(c - 1.0, z) - z**c,
    "cdf":    lambda z, c: -np.expm1(-z**c),
    "sf":     lambda z, c: np.exp(-z**c),
    "logsf":  lambda z, c: -z**c,
}, valid=lambda c: c > 0, safe=(1.0,), support=(0.0, np.inf), inside=1.0,
   quantiles={"ppf": lambda q, c: (-np.log1p(-q))**(1.0 / c),
              "isf": lambda q, c: (-np.log(q))**(1.0 / c)})
invgamma = Continuous(_stats.invgamma, {
    "logpdf": lambda z, a: -(a + 1.0) * np.log(z) - gammaln(a) - 1.0 / z,
    "cdf":    lambda z, a: gammaincc(a, 1.0 / z),
    "sf":     lambda z, a: gammainc(a, 1.0 / z),
}, valid=lambda a: a > 0, safe=(1.0,), support=(0.0, np.inf), inside=1.0)
gumbel_r = Continuous(_stats.gumbel_r, {
    "logpdf": lambda z: -z - np.exp(-z),
    "cdf":    lambda z: np.exp(-np.exp(-z)),
    "logcdf": lambda z: -np.exp(-z),
    "sf":     lambda z: -np.expm1(-np.exp(-z)),
}, quantiles={"ppf": lambda q: -np.log(-np.log(q)), "isf": lambda q: -np.log(-np.log1p(-q))})
rayleigh = Continuous(_stats.rayleigh, {
    "logpdf": lambda z: np.log(z) - 0.5 * z * z,
    "cdf":    lambda z: -np.expm1(-0.5 * z * z),
    "sf":     lambda z: np.exp(-0.5 * z * z),
    "logsf":  lambda z: -0.5 * z * z,
}, support=(0.0, np.inf), inside=1.0,
   quantiles={"ppf": lambda q: np.sqrt(-2.0 * np.log1p(-q)),
              "isf": lambda q: np.sqrt(-2.0 * np.log(q))})
pareto = Continuous(_stats.pareto, {
    "logpdf": lambda z, b: np.log(b) - (b + 1.0) * np.log(z),
    "cdf":    lambda z, b: -np.expm1(-b * np.log(z)),
    "sf":     lambda z, b: np.exp(-b * np.log(z)),
    "logsf":  lambda z, b: -b * np.log(z),
}, valid=lambda b: b > 0, safe=(1.0,), support=(1.0, np.inf), inside=2.0,
   quantiles={"ppf": lambda q, b: (1.0 - q)**(-1.0 / b), "isf": lambda q, b: q**(-1.0 / b)})
skewnorm = Continuous(_stats.skewnorm, {
    "logpdf": lambda z, a: _LOG_2 - 0.5 * z * z - 0.5 * _LOG_2PI + log_ndtr(a * z),
    "cdf":    lambda z, a: _skewnorm_cdf(z, a),
    "sf":     lambda z, a: _skewnorm_cdf(-z, -a),
}, valid=lambda a: np.isfinite(a), safe=(0.0,))
# fmt: on

UNIVARIATE = (norm, t, gamma, chi2, beta, expon, laplace, logistic, cauchy, poisson, binom,
              nbinom, lognorm, uniform, halfnorm, truncnorm, weibull_min, invgamma, gumbel_r,
              rayleigh, pareto, skewnorm)


# ----------------------------------------------------------------------------------------------
# Entropies: SciPy's closed forms (its _entropy), their branches decided on the plain values


def _branches(take, x, first, second, first_safe, second_safe):
    """``first(x)`` where ``take``, else ``second(x)``, each evaluated at a safe stand-in where
    it is not taken, so that no NaN or infinity of the other branch enters a derivative."""
    return np.where(take, first(np.where(take, x, first_safe)),
                    second(np.where(take, second_safe, x)))


def _gamma_entropy(a):
    return _branches(
        a < 250, a, lambda a: psi(a) * (1 - a) + a + gammaln(a),
        lambda a: (0.5 * (1. + np.log(2 * np.pi) + np.log(a)) - 1 / (3 * a) - (a**-2.) / 12
                   - (a**-3.) / 90 + (a**-4.) / 120), 1.0, 250.0)


def _chi2_entropy(df):
    return _branches(
        0.5 * df < 125, 0.5 * df,
        lambda h: h + np.log(2) + gammaln(h) + (1 - h) * psi(h),
        lambda h: ((0.5 / h) * (-2 / 3 + (0.5 / h) * (-1 / 3 + (0.5 / h) * (-4 / 45 + (0.5 / h)
                                                                         / 7.5)))
                   + 0.5 * np.log(h) + np.log(2) + 0.5 * (1 + np.log(2 * np.pi))), 1.0, 125.0)


def _invgamma_entropy(a):
    return _branches(
        a >= 200, a,
        lambda a: ((1 - 3 * np.log(a) + np.log(2) + np.log(np.pi)) / 2 + 2 / 3 * a**-1.
                   + a**-2. / 12 - a**-3. / 90 - a**-4. / 120),
        lambda a: a - (a + 1.0) * psi(a) + gammaln(a), 200.0, 1.0)


_NORM_ENTROPY = 0.5 * (np.log(2 * np.pi) + 1)


def _t_entropy(df):
    finite = np.isfinite(df)  # SciPy's norm entropy at df = inf
    df = np.where(finite, df, 1.0)
    h = _branches(
        df >= 100, df,
        lambda df: (_NORM_ENTROPY + 1 / df + (df**-2.) / 4 - (df**-3.) / 6 - (df**-4.) / 8
                    + 3 / 10 * (df**-5.) + (df**-6.) / 4),
        lambda df: ((df + 1) / 2 * (psi((df + 1) / 2) - psi(df / 2))
                    + 0.5 * np.log(df) + betaln(df / 2, 0.5)), 100.0, 1.0)
    return np.where(finite, h, _NORM_ENTROPY)


def _beta_entropy(a, b):
    """SciPy's four forms, chosen as SciPy's ``_lazyselect`` chooses them (the first that
    holds), on the plain values."""
    def regular(a, b):
        return betaln(a, b) - (a - 1) * psi(a) - (b - 1) * psi(b) + (a + b - 2) * psi(a + b)

    def ab_large(a, b):
        sum_ab = a + b
        log_term = 0.5 * (np.log(2 * np.pi) + np.log(a) + np.log(b) - 3 * np.log(sum_ab) + 1)
        t1 = 110 / sum_ab + 20 * sum_ab**-2.0 + sum_ab**-3.0 - 2 * sum_ab**-4.0
        t2 = -50 / a - 10 * a**-2.0 - a**-3.0 + a**-4.0
        t3 = -50 / b - 10 * b**-2.0 - b**-3.0 + b**-4.0
        return log_term + (t1 + t2 + t3) / 120

    def b_large(a, b):
        sum_ab = a + b
        t1 = gammaln(a) - (a - 1) * psi(a)
        t2 = (- 1 / (2 * b) + 1 / (12 * b) - b**-2.0 / 12 - b**-3.0 / 120 + b**-4.0 / 120
              + b**-5.0 / 252 - b**-6.0 / 252 + 1 / sum_ab - 1 / (12 * sum_ab)
              + sum_ab**-2.0 / 6 + sum_ab**-3.0 / 120 - sum_ab**-4.0 / 60
              - sum_ab**-5.0 / 252 + sum_ab**-6.0 / 126)
        log_term = sum_ab * np.log1p(a / b) + np.log(b) - 2 * np.log(sum_ab)
        return t1 + t2 + log_term

    def threshold(v):  # a decision: on the plain values
        v = stop_gradient(v)
        with np.errstate(divide="ignore"):
            j = np.floor(np.log10(v))
        d = np.floor(np.divide(v, np.power(10.0, j))) + 2
        return np.where(np.not_equal(v, 1.0), np.multiply(d, np.power(10.0, np.add(7.0, j))),
                        1000.0)

    conditions = [both(a >= 4.96e6, b >= 4.96e6),
                  both(a <= 4.9e6, b - a >= 1e6, b >= threshold(a)),
                  both(b <= 4.9e6, a - b >= 1e6, a >= threshold(b)),
                  both(a < 4.9e6, b < 4.9e6)]
    forms = [ab_large, b_large, lambda a, b: b_large(b, a), regular]
    result, taken = np.nan, False
    for condition, form in zip(conditions, forms, strict=True):
        take = both(condition, np.logical_not(taken))
        value = form(np.where(take, a, 2.0), np.where(take, b, 2.0))
        result = np.where(take, value, result)
        taken = np.logical_or(taken, take)
    return result


def _truncnorm_entropy(a, b):
    A, B = ndtr(a), ndtr(b)
    Z = B - A
    C = np.log(np.sqrt(2 * np.pi * np.e) * Z)

    def a_density(x):  # x φ(x), 0 at an infinite bound (SciPy's NaN there has no derivative)
        finite = np.isfinite(x)
        x = np.where(finite, x, 0.0)
        return np.where(finite, x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi), 0.0)

    return C + (a_density(a) - a_density(b)) / (2 * Z)


_EULER = float(np.euler_gamma)
ENTROPIES = {
    "norm": lambda: _NORM_ENTROPY, "expon": lambda: 1.0, "cauchy": lambda: np.log(4 * np.pi),
    "gumbel_r": lambda: _EULER + 1., "halfnorm": lambda: 0.5 * np.log(np.pi / 2.0) + 0.5,
    "laplace": lambda: np.log(2) + 1, "logistic": lambda: 2.0,
    "rayleigh": lambda: _EULER / 2.0 + 1 - 0.5 * np.log(2), "uniform": lambda: 0.0,
    "lognorm": lambda s: 0.5 * (1 + np.log(2 * np.pi) + 2 * np.log(s)),
    "pareto": lambda b: 1 + 1.0 / b - np.log(b),
    "weibull_min": lambda c: -_EULER / c - np.log(c) + _EULER + 1,
    "gamma": _gamma_entropy, "chi2": _chi2_entropy, "invgamma": _invgamma_entropy,
    "t": _t_entropy, "beta": _beta_entropy, "truncnorm": _truncnorm_entropy,
}
"""SciPy's closed forms of the entropy of the standard distribution, by name."""
_ENTROPY_VALUES: dict[str, Any] = {}


# ----------------------------------------------------------------------------------------------
# Fits: SciPy's closed-form maximum likelihood fits, its steps on the differentiated data


def _fit_settings(name, data, args, kwargs, positional):
    if args and not positional:
        raise TypeError(f"{name}.fit() takes 2 positional arguments but {2 + len(args)} were "
                        "given")
    if args:
        raise TypeError("Too many arguments.")
    kwargs = dict(kwargs)
    floc, fscale = kwargs.pop("floc", None), kwargs.pop("fscale", None)
    _remove_optimizer_parameters(kwargs)
    if floc is not None and fscale is not None:
        raise ValueError("All parameters fixed. There is nothing to optimize.")
    data = _as_array(data)
    if not np.all(np.isfinite(data)):
        raise ValueError("The data contains non-finite values.")
    return data, floc, fscale


def _as_array(data):
    (data,) = lists_as_arrays((data,))
    return data if hasattr(data, "dtype") else np.asarray(data)


def _norm_fit(data, *args, **kwargs):
    data, floc, fscale = _fit_settings("norm", data, args, kwargs, positional=False)
    loc = data.mean() if floc is None else floc
    scale = np.sqrt(((data - loc)**2).mean()) if fscale is None else fscale
    return loc, scale


def _expon_fit(data, *args, **kwargs):
    data, floc, fscale = _fit_settings("expon", data, args, kwargs, positional=True)
    data_min = data.min()
    if floc is None:
        loc = data_min
    else:
        loc = floc
        if data_min < loc:
            raise _FitDataError("expon", lower=floc, upper=np.inf)
    scale = data.mean() - loc if fscale is None else fscale
    # SciPy returns Python floats: 0-d float64 arrays here, which carry the derivatives
    return loc * 1.0, scale * 1.0


def _uniform_fit(data, *args, **kwargs):
    data, floc, fscale = _fit_settings("uniform", data, args, kwargs, positional=True)
    if fscale is None:
        if floc is None:
            loc, scale = data.min(), np.ptp(data)
        else:
            loc, scale = floc, data.max() - floc
            if data.min() < loc:
                raise _FitDataError("uniform", lower=loc, upper=loc + scale)
    else:
        ptp = np.ptp(data)
        if ptp > fscale:
            raise _FitUniformFixedScaleDataError(ptp=ptp, fscale=fscale)
        loc, scale = data.min() - 0.5 * (fscale - ptp), fscale
    return loc * 1.0, scale * 1.0  # (as expon's: SciPy's Python floats)


FITS = {"norm": _norm_fit, "expon": _expon_fit, "uniform": _uniform_fit}
"""SciPy's closed-form fits, by name."""


# ----------------------------------------------------------------------------------------------
# Multivariate distributions


def _squeezed(y):
    y = np.squeeze(y)
    return y[()] if np.ndim(y) == 0 else y


class MultivariateNormal:
    """``scipy.stats.multivariate_normal``: ``logpdf`` and ``pdf`` through a Cholesky factor
    of the covariance (which, as SciPy's, reads its lower triangle)."""

    scipy = _stats.multivariate_normal
    _logpdf = Value(_stats.multivariate_normal.logpdf, "scipy.stats.multivariate_normal.logpdf")
    _entropy = Value(_stats.multivariate_normal.entropy,
                     "scipy.stats.multivariate_normal.entropy")

    def __call__(self, mean=None, cov=1, allow_singular=False, seed=None):
        return Frozen(self, (mean, cov, allow_singular), {})

    def _parameters(self, x, mean, cov):
        # (the lists of plain numbers lists_as_arrays leaves: the arrays SciPy makes of them)
        x, mean, cov = (np.asarray(v) if type(v) in (list, tuple) else v for v in (x, mean, cov))
        cov_ndim, mean_ndim = np.ndim(cov), 0 if mean is None else np.ndim(mean)
        dim = np.shape(cov)[0] if cov_ndim else np.shape(mean)[0] if mean_ndim else 1
        if cov_ndim == 0:
            cov = cov * np.eye(dim)
        elif cov_ndim == 1:
            cov = np.diag(cov)
        if mean is None:
            mean = np.zeros(dim)
        x = x if np.ndim(x) else x * np.ones(1)
        if np.ndim(x) == 1:
            x = x[:, None] if dim == 1 else x[None, :]
        return x, mean, cov, dim

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        if not _is_traced((x, mean, cov), {}):
            return self.scipy.logpdf(x, mean, cov, allow_singular)
        x, mean, cov = lists_as_arrays((x, mean, cov))  # (mean=[mu, 0.0])
        given_x, given_mean, given_cov = x, mean, cov
        x, mean, cov, dim = self._parameters(x, mean, cov)
        try:
            factor = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            if allow_singular:
                raise UnsupportedOperationError(
                    "multivariate_normal with a singular covariance that is differentiated: "
                    "its density lives on a subspace whose derivative mutad does not "
                    "compute. Regularise the covariance (cov + eps * np.eye(n)).") from None
            raise
        residual = x - mean
        points = np.reshape(residual, (-1, dim))
        z = linalg.solve_triangular(factor, np.transpose(points), lower=True)
        mahalanobis = np.reshape(np.sum(z * z, axis=0), np.shape(residual)[:-1])
        log_det = 2.0 * np.sum(np.log(np.diagonal(factor)))
        composition = _squeezed(-0.5 * (dim * _LOG_2PI + log_det + mahalanobis))
        return _scipys_value(self._logpdf(given_x, given_mean, given_cov), composition)

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        if not _is_traced((x, mean, cov), {}):
            return self.scipy.pdf(x, mean, cov, allow_singular)
        return np.exp(self.logpdf(x, mean, cov, allow_singular))

    def cdf(self, x, mean=None, cov=1, *args, **kwargs):
        return self._cdf(x, mean, cov, args, kwargs, False)

    def logcdf(self, x, mean=None, cov=1, *args, **kwargs):
        return self._cdf(x, mean, cov, args, kwargs, True)

    def _cdf(self, x, mean, cov, args, kwargs, log):
        """SciPy's integral ``Φ(x - mean; cov)`` (its log), differentiated in ``x`` and ``mean``
        (first order) by ``∂Φ/∂xᵢ = φ(aᵢ; Σᵢᵢ) Φ(a₋ᵢ - Σ₋ᵢ,ᵢ aᵢ/Σᵢᵢ; Σ₋ᵢ,₋ᵢ - Σ₋ᵢ,ᵢ Σᵢ,₋ᵢ/Σᵢᵢ)``
        (``a = x - mean``; the conditional integral SciPy's too, of one dimension fewer)."""
        function = self.scipy.logcdf if log else self.scipy.cdf
        if not _is_traced((x, mean, cov, *args), kwargs):
            return function(x, mean, cov, *args, **kwargs)
        name = f"scipy.stats.multivariate_normal.{'logcdf' if log else 'cdf'}"
        x, mean, cov = lists_as_arrays((x, mean, cov))
        if any(carries_derivative(v) for v in (cov, *args, *kwargs.values())) \
                or kwargs.get("lower_limit") is not None:
            raise UnsupportedOperationError(
                f"{name} of a differentiated covariance or with a lower_limit: mutad "
                "differentiates it in x and mean, with a constant cov and lower_limit=None.")
        # (a constant's value, which a replay checks again: one the function computes, of
        # its arguments, changes from call to call)
        cov = np.array(settled(cov, f"{name} of a covariance computed in the function")) \
            if isinstance(cov, Tracer) else cov
        _, _, plain_cov, dim = self._parameters(0.0, None if mean is None else memory(mean),
                                                cov)
        problem = _NormalIntegral(function, cov, args, kwargs, np.asarray(plain_cov, float),
                                  dim, log)
        zero = np.zeros(dim)
        return _normal_integral(x, zero if mean is None else mean, problem)

    def entropy(self, mean=None, cov=1, allow_singular=False):  # (the last: a frozen one's)
        if not _is_traced((mean, cov), {}):
            return self.scipy.entropy(mean, cov)
        mean, cov = lists_as_arrays((mean, cov))
        given_mean, given_cov = mean, cov
        _, _, cov, dim = self._parameters(0.0, mean, cov)
        log_det = 2.0 * np.sum(np.log(np.diagonal(np.linalg.cholesky(cov))))
        return _scipys_value(self._entropy(given_mean, given_cov),
                            0.5 * (dim * (_LOG_2PI + 1.0) + log_det))


class _NormalIntegral:
    """The constant part of a ``multivariate_normal.cdf``: SciPy's function, settings and
    covariance, and the gradient of the integral in its upper limits."""

    def __init__(self, function, cov, args, kwargs, plain_cov, dim, log):
        self.function, self.cov, self.args, self.kwargs = function, cov, args, kwargs
        self.plain_cov, self.dim, self.log = plain_cov, dim, log

    def value(self, x, mean):
        return self.function(x, mean, self.cov, *self.args, **self.kwargs)

    def gradient(self, x, mean):
        """∂Φ/∂x at each point (its log's, divided by Φ), of the shape of ``x - mean``."""
        a = np.asarray(x, float) - np.asarray(mean, float)
        points = np.reshape(a, (-1, self.dim))
        S, g = self.plain_cov, np.empty(points.shape)
        settings = dict(self.kwargs)
        for i in range(self.dim):
            rest = np.arange(self.dim) != i
            density = _stats.norm.pdf(points[:, i], scale=np.sqrt(S[i, i]))
            if self.dim == 1:
                g[:, i] = density
                continue
            shift = np.outer(points[:, i], S[rest, i] / S[i, i])
            conditional = S[np.ix_(rest, rest)] - np.outer(S[rest, i], S[i, rest]) / S[i, i]
            g[:, i] = density * np.reshape(_stats.multivariate_normal.cdf(
                points[:, rest] - shift, None, conditional, *self.args, **settings), (-1,))
        if self.log:
            g /= np.reshape(_stats.multivariate_normal.cdf(points, None, S, *self.args,
                                                           **settings), (-1, 1))
        return np.reshape(g, np.shape(a))


def _normal_integral_value(x, mean, problem):
    return problem.value(x, mean)


_normal_integral = Adjoint(_normal_integral_value)
_normal_integral.complex_values = None


def _first_order(*items):
    if any(carries_derivative(v) for v in items if v is not None):
        raise UnsupportedOperationError(
            "scipy.stats.multivariate_normal.cdf under a differentiation of a differentiation "
            "(a hessian): its rule is of the first order.")


def _to_shape(g, shape):
    """``g`` summed down to ``shape`` (NumPy's broadcasting undone)."""
    while np.ndim(g) > len(shape):
        g = np.sum(g, axis=0)
    return np.reshape(np.sum(g, axis=tuple(i for i, n in enumerate(shape) if n == 1),
                             keepdims=True), shape)


@_normal_integral.rule
def _normal_integral_rule(x, mean, problem):
    _first_order(x, mean)
    gradient = problem.gradient(x, mean)

    def back(dy):
        _first_order(dy)
        g = gradient * np.reshape(np.asarray(dy, float), np.shape(gradient)[:-1] + (1,)) \
            if np.ndim(gradient) > 1 else gradient * np.asarray(dy, float)
        return _to_shape(g, np.shape(x)), _to_shape(-g, np.shape(mean)), None

    return problem.value(x, mean), back


@_normal_integral.jvp_rule
def _normal_integral_jvp(tangents, x, mean, problem):
    _first_order(x, mean, *tangents[:2])
    y = problem.value(x, mean)
    dx, dmean = tangents[0], tangents[1]
    if dx is None and dmean is None:
        return y, None
    change = (0.0 if dx is None else np.asarray(dx, float)) - (
        0.0 if dmean is None else np.asarray(dmean, float))
    gradient = problem.gradient(x, mean)
    return y, np.reshape(np.sum(gradient * change, axis=-1), np.shape(y))


def _log_beta_value(alpha):
    return np.sum(gammaln(alpha)) - gammaln(np.sum(alpha))


_log_beta = Adjoint(_log_beta_value)
"""log B(α) = Σ log Γ(α_i) - log Γ(Σ α), whose gradient ψ(α_i) - ψ(Σ α) is taken as
-_numerics.psi_difference(α_i, Σ_{j≠i} α_j): for large α the two digammas nearly cancel."""
_log_beta.complex_values = None


def _others(alpha):
    """Σ_{j≠i} α_j for each i, as sums of the others (a prefix and a suffix sum), not
    Σ α - α_i, which loses the small ones next to a large one."""
    none = np.zeros_like(alpha[:1])
    before = np.concatenate([none, np.cumsum(alpha)[:-1]])
    after = np.concatenate([np.cumsum(alpha[::-1])[::-1][1:], none])
    return before + after


@_log_beta.rule
def _log_beta_rule(alpha):
    y = _log_beta(alpha)
    return y, lambda dy: (-dy * _numerics.psi_difference(alpha, _others(alpha)),)


@_log_beta.jvp_rule
def _log_beta_jvp(tangents, alpha):
    return _log_beta(alpha), -np.sum(tangents[0] * _numerics.psi_difference(alpha, _others(alpha)))


_SCIPYS_METHODS = {f"{kind.__name__.removesuffix('_gen')}.{name}": getattr(kind, name)
                   for kind, names in ((dirichlet_gen, ("mean", "var", "entropy")),
                                       (wishart_gen, ("logpdf", "pdf")),
                                       (wishart_frozen, ("logpdf", "pdf")),
                                       (invwishart_gen, ("logpdf", "pdf")),
                                       (invwishart_frozen, ("logpdf", "pdf"))) for name in names}
"""SciPy's methods that rules run as SciPy's own code, read before a differentiation installs the
rules in their place."""


class Dirichlet:
    """``scipy.stats.dirichlet``: ``logpdf`` and ``pdf``, with SciPy's checks of ``alpha`` and
    of ``x`` (components along the first axis, the last one optionally left out)."""

    scipy = _stats.dirichlet
    _logpdf = Value(_stats.dirichlet.logpdf, "scipy.stats.dirichlet.logpdf")

    def __call__(self, alpha, seed=None):
        return Frozen(self, (alpha,), {})

    def logpdf(self, x, alpha):
        if not _is_traced((x, alpha), {}):
            return self.scipy.logpdf(x, alpha)
        x, alpha = lists_as_arrays((x, alpha))  # (alpha=[a, b, 1.0])
        given_x = x
        if np.min(alpha) <= 0:
            raise ValueError("All parameters must be greater than 0")
        if np.ndim(alpha) != 1:
            raise ValueError(f"Parameter vector 'a' must be one dimensional, but a.shape = "
                             f"{np.shape(alpha)}.")
        k = np.shape(alpha)[0]
        if np.shape(x)[0] not in (k, k - 1):
            raise ValueError("Vector 'x' must have either the same number of entries as, or "
                             "one entry fewer than, parameter vector 'a'.")
        if np.shape(x)[0] == k - 1:
            x = np.concatenate([x, (1.0 - np.sum(x, axis=0))[None]], axis=0)
        if np.min(x) < 0 or np.max(x) > 1:
            raise ValueError("Each entry in 'x' must lie in [0, 1].")
        a = np.reshape(alpha, (k,) + (1,) * (np.ndim(x) - 1))
        if np.any(both(x == 0, a < 1)):
            raise ValueError("Each entry in 'x' must be greater than zero if its alpha is "
                             "less than one.")
        if np.any(np.abs(np.sum(x, axis=0) - 1.0) > 10e-10):
            raise ValueError("The input vector 'x' must lie within the normal simplex.")
        log_b = _log_beta(alpha)
        composition = _squeezed(np.sum(xlogy(a - 1.0, x), axis=0) - log_b)
        return _scipys_value(self._logpdf(given_x, alpha), composition)

    def pdf(self, x, alpha):
        if not _is_traced((x, alpha), {}):
            return self.scipy.pdf(x, alpha)
        return np.exp(self.logpdf(x, alpha))

    # (closed forms of alpha: SciPy's own code, run on the traced parameters)
    def mean(self, alpha):
        return following_scipys_code(_SCIPYS_METHODS["dirichlet.mean"], (self.scipy, alpha), {})

    def var(self, alpha):
        return following_scipys_code(_SCIPYS_METHODS["dirichlet.var"], (self.scipy, alpha), {})

    def entropy(self, alpha):
        return following_scipys_code(_SCIPYS_METHODS["dirichlet.entropy"], (self.scipy, alpha),
                                     {})


class VonMisesFisher:
    """``scipy.stats.vonmises_fisher``: ``logpdf``, ``pdf`` and ``entropy``, in ``x``, ``mu``
    and ``kappa``. SciPy checks the parameters with ``np.isscalar(kappa)``, which a traced
    number fails: its checks run on the plain values (a 0-d ``kappa``'s number), then its own
    code (``_logpdf``, ``_entropy``: ``ive`` of ``kappa``) on the traced ones."""

    scipy = _stats.vonmises_fisher

    def __call__(self, mu=None, kappa=1, seed=None):
        return Frozen(self, (mu, kappa), {})

    def _dim(self, mu, kappa):
        mu, kappa = lists_as_arrays((mu, kappa))
        # SciPy's checks read the values (a unit mu, a positive kappa): each is a decision a
        # replay takes again (where one changes, the call is traced, and SciPy's check raises
        # its error), where the plain values' would hold as recorded
        for v, holds in ((mu, _unit), (kappa, _positive)):
            if isinstance(v, Tracer):
                v._decided(holds)
        mu, kappa = (np.asarray(memory(v)) for v in (mu, kappa))
        return self.scipy._process_parameters(mu, kappa[()] if kappa.ndim == 0 else kappa)[0]

    def logpdf(self, x, mu=None, kappa=1):
        if not _is_traced((x, mu, kappa), {}):
            return self.scipy.logpdf(x, mu, kappa)
        x, mu = lists_as_arrays((x, mu))
        return following_scipys_code(vonmises_fisher_gen._logpdf,
                                     (self.scipy, x, self._dim(mu, kappa), mu, kappa), {})

    def pdf(self, x, mu=None, kappa=1):
        if not _is_traced((x, mu, kappa), {}):
            return self.scipy.pdf(x, mu, kappa)
        return np.exp(self.logpdf(x, mu, kappa))

    def entropy(self, mu=None, kappa=1):
        if not _is_traced((mu, kappa), {}):
            return self.scipy.entropy(mu, kappa)
        return following_scipys_code(vonmises_fisher_gen._entropy,
                                     (self.scipy, self._dim(mu, kappa), kappa), {})


def _unit(mu):
    return bool(np.allclose(np.linalg.norm(mu), 1.0))  # (SciPy's test)


def _positive(kappa):
    return bool(np.all(kappa > 0))


class MultivariateT(MultivariateNormal):
    """``scipy.stats.multivariate_t``: ``logpdf`` and ``pdf`` through a Cholesky factor of the
    shape matrix, as the normal's: Γ((ν + p)/2) / (Γ(ν/2) (νπ)^{p/2} |Σ|^{1/2})
    (1 + δ/ν)^{-(ν + p)/2}, ``δ`` the Mahalanobis distance; differentiated in ``x``, ``loc``,
    ``shape`` and ``df``."""

    scipy = _stats.multivariate_t
    _logpdf = Value(_stats.multivariate_t.logpdf, "scipy.stats.multivariate_t.logpdf")

    def __call__(self, loc=None, shape=1, df=1, allow_singular=False, seed=None):
        return Frozen(self, (loc, shape, df), {})

    def logpdf(self, x, loc=None, shape=1, df=1):
        if not _is_traced((x, loc, shape, df), {}):
            return self.scipy.logpdf(x, loc, shape, df)
        x, loc, shape = lists_as_arrays((x, loc, shape))
        if not np.all(np.isfinite(memory(df))) or np.any(memory(df) <= 0):
            raise UnsupportedOperationError(
                "scipy.stats.multivariate_t of differentiated values with df=inf (or not "
                "positive): take multivariate_normal for the infinite df.")
        given = (x, loc, shape, df)
        x, loc, shape, dim = self._parameters(x, loc, shape)
        factor = np.linalg.cholesky(shape)
        points = np.reshape(x - loc, (-1, dim))
        z = linalg.solve_triangular(factor, np.transpose(points), lower=True)
        mahalanobis = np.reshape(np.sum(z * z, axis=0), np.shape(x - loc)[:-1])
        log_det = 2.0 * np.sum(np.log(np.diagonal(factor)))
        half = (df + dim) / 2.0
        composition = _squeezed(gammaln(half) - gammaln(df / 2.0)
                                - dim / 2.0 * np.log(df * math.pi) - 0.5 * log_det
                                - half * np.log1p(mahalanobis / df))
        return _scipys_value(self._logpdf(*given), composition)

    def pdf(self, x, loc=None, shape=1, df=1):
        if not _is_traced((x, loc, shape, df), {}):
            return self.scipy.pdf(x, loc, shape, df)
        return np.exp(self.logpdf(x, loc, shape, df))


class Multinomial:
    """``scipy.stats.multinomial``: ``logpmf`` and ``pmf``, differentiated in the
    probabilities ``p`` (the counts ``x`` and ``n`` are integers): SciPy's value, with the
    derivatives of Σ xᵢ log pᵢ of the probabilities SciPy uses, whose last one is
    ``1 - Σ`` of the others in a row whose sum is not 1 within SciPy's tolerance (a decision
    on the plain values)."""

    scipy = _stats.multinomial
    discrete = True
    _logpmf = Value(_stats.multinomial.logpmf, "scipy.stats.multinomial.logpmf")

    def __call__(self, n, p, seed=None):
        return Frozen(self, (n, p), {})

    def logpmf(self, x, n, p):
        if not _is_traced((x, n, p), {}):
            return self.scipy.logpmf(x, n, p)
        x, p = lists_as_arrays((x, p))
        if carries_derivative(x) or carries_derivative(n):
            raise UnsupportedOperationError(
                "scipy.stats.multinomial.logpmf of differentiated counts x or n: they are "
                "integers; differentiate in p.")
        value = self._logpmf(x, n, p)  # (SciPy's errors, and its warning, once)
        # SciPy's adjustment of a row not summing to 1: a comparison of the traced values, a
        # decision a replay takes again
        p = p.astype(np.float64)
        adjusted = np.abs(1 - np.sum(p, axis=-1)) > np.finfo(np.float64).eps * 10
        last = np.where(adjusted, 1.0 - np.sum(p[..., :-1], axis=-1), p[..., -1])
        used = np.concatenate([p[..., :-1], last[..., None]], axis=-1)
        composition = np.sum(xlogy(np.multiply(x, 1.0), used), axis=-1)
        # (where SciPy's value is -inf or nan, x or the parameters out of their domain: none)
        return _scipys_value(value, np.where(np.isfinite(value), composition, 0.0))

    def pmf(self, x, n, p):
        if not _is_traced((x, n, p), {}):
            return self.scipy.pmf(x, n, p)
        return np.exp(self.logpmf(x, n, p))


class Wishart:
    """``scipy.stats.wishart`` (or ``invwishart``) frozen with differentiated parameters:
    SciPy's checks of them where it freezes, its density (SciPy's own code, below) where it is
    asked for. (SciPy's frozen distribution converts them to plain arrays.)"""

    def __init__(self, scipy):
        self.scipy = scipy

    def __call__(self, df=None, scale=None, seed=None):
        # SciPy's errors where SciPy raises them, of the plain values (a traced number: NumPy's
        # scalar, for SciPy's np.isscalar(df))
        plain_df = np.asarray(memory(df))[()] if _is_traced((df,), {}) else df
        self.scipy._process_parameters(plain_df, *_plain((scale,)))
        return Frozen(self, (), {"df": df, "scale": scale})

    def logpdf(self, x, df=None, scale=None):
        return self.scipy.logpdf(x, df, scale)

    def pdf(self, x, df=None, scale=None):
        return self.scipy.pdf(x, df, scale)


multivariate_normal = MultivariateNormal()
multivariate_t = MultivariateT()
vonmises_fisher = VonMisesFisher()
dirichlet = Dirichlet()
multinomial = Multinomial()
wishart = Wishart(_stats.wishart)
invwishart = Wishart(_stats.invwishart)


# ----------------------------------------------------------------------------------------------
# The rules a differentiation routes SciPy's methods to (registry.defmethod)


def _generator_rule(distribution, name):
    def rule(self, *args, **kwargs):
        support, standard = ((getattr(d, "a", None), getattr(d, "b", None))
                             for d in (self, distribution.scipy))
        if support != standard:  # (bernoulli, a binom of n = 1; a truncated instance)
            if isinstance(self, (_stats.rv_continuous, _stats.rv_discrete)) \
                    and hasattr(_formulas(self), name):
                return getattr(_formulas(self), name)(*args, **kwargs)  # SciPy's formulas
            raise UnsupportedOperationError(
                f"scipy.stats.{self.name}.{name} of an instance made with its own support "
                f"{support}: mutad's rule is for SciPy's standard one.")
        return getattr(distribution, name)(*args, **kwargs)

    return rule


def _frozen_rule(name):
    """A method of SciPy's univariate frozen classes: the distribution's, with the frozen
    parameters (``self.dist``, ``self.args``, ``self.kwds``)."""

    def rule(self, x, *args, **kwargs):
        distribution = BY_GENERATOR.get(type(self.dist))
        if (distribution is None or not hasattr(distribution, name)) \
                and isinstance(self.dist, (_stats.rv_continuous, _stats.rv_discrete)) \
                and hasattr(_formulas(self.dist), name):
            distribution = _formulas(self.dist)  # (gamma's ppf: SciPy's formula, as unfrozen)
        if distribution is None:
            raise UnsupportedOperationError(
                f"scipy.stats.{self.dist.name}.{name}: mutad has no rule for this distribution; "
                f"those it differentiates are {', '.join(DISTRIBUTIONS)}.")
        if not hasattr(distribution, name):
            raise UnsupportedOperationError(
                f"scipy.stats.{self.dist.name}.{name}: mutad has no rule for this method of "
                f"this distribution; it has {', '.join(distribution.methods())}.")
        return getattr(distribution, name)(x, *self.args, *args, **self.kwds, **kwargs)

    return rule


def _moments_rule(name):
    """``stats``, ``mean``, ``var`` and ``std`` of a univariate distribution with traced
    parameters, as SciPy computes them (``rv_generic.stats``): its own ``_stats`` of the shape
    parameters (closed forms in NumPy's and SciPy's functions, which dispatch), moved and
    scaled by loc and scale, and those ``_stats`` leaves out from the raw moments of its own
    ``_munp`` (``_moments_from_raw``). Parameters outside the distribution's domain (SciPy's
    NaN), and the moments SciPy computes by numerical integration (its generic ``_munp``),
    are refused."""

    def rule(self, *args, **kwds):
        if name == "std":
            return np.sqrt(rule_of["var"](self, *args, **kwds))
        if name in ("mean", "var"):
            kwds["moments"] = name[0]
        shapes, loc, scale, moments = self._parse_args_stats(*args, **kwds)
        # (a decision on the parameters' values, taken on every call: a step of its own)
        cond = _accepted(self, *shapes, loc, scale)
        if not np.all(cond):
            raise UnsupportedOperationError(
                f"scipy.stats.{self.name}.{name} of traced parameters outside the "
                "distribution's domain (SciPy gives NaN there).")
        with library_allocation():  # (invgamma's fills buffers it allocates: apply_where)
            if self._stats_has_moments:
                mu, mu2, g1, g2 = self._stats(*shapes, moments=moments)
            else:
                mu, mu2, g1, g2 = self._stats(*shapes)
            needed = {"m": mu, "v": mu2, "s": g1, "k": g2}
            if any(needed[m] is None for m in moments):
                mu, mu2, g1, g2 = _moments_from_raw(self, shapes, moments, mu, mu2, g1, g2)
        values = {"m": lambda: mu * scale + loc, "v": lambda: mu2 * scale * scale,
                  "s": lambda: g1, "k": lambda: g2}
        output = [np.broadcast_to(values[m](), np.shape(cond)).astype(np.float64)
                  for m in moments]
        if name in ("mean", "var"):
            return output[0][()] if np.ndim(output[0]) == 0 else output[0]
        return output[0] if len(output) == 1 else tuple(output)

    rule_of[name] = rule
    return rule


def _moments_from_raw(distribution, shapes, moments, mu, mu2, g1, g2):
    """The moments ``_stats`` left out (None), from the raw moments ``_munp(n, *shapes)`` as
    SciPy's ``rv_generic.stats`` forms them, where the distribution writes ``_munp`` itself (a
    closed form: weibull_min's Γ(1 + n/c)); SciPy's generic one integrates the density
    numerically, and is refused."""
    owner = next(c for c in type(distribution).__mro__ if "_munp" in c.__dict__)
    if owner in (rv_generic, _stats.rv_continuous, _stats.rv_discrete):
        raise UnsupportedOperationError(
            f"scipy.stats.{distribution.name}: SciPy computes these moments of the "
            "distribution by numerical integration, which mutad does not differentiate.")
    munp = distribution._munp  # (SciPy's steps, for its values bit for bit)

    def lower(mu, mu2):  # the mean and variance the higher moments need
        if mu is None:
            mu = munp(1, *shapes)
        return mu, munp(2, *shapes) - mu * mu if mu2 is None else mu2

    with np.errstate(invalid="ignore"):
        if "m" in moments and mu is None:
            mu = munp(1, *shapes)
        if "v" in moments and mu2 is None:
            mu2p = munp(2, *shapes)
            if mu is None:
                mu = munp(1, *shapes)
            mu2 = np.where(~np.isinf(mu), mu2p - mu**2, np.inf)  # an infinite mean: infinite
        if "s" in moments and g1 is None:
            mu, mu2 = lower(mu, mu2)
            g1 = ((-mu * mu - 3 * mu2) * mu + munp(3, *shapes)) / np.power(mu2, 1.5)
        if "k" in moments and g2 is None:
            mu, mu2 = lower(mu, mu2)
            if g1 is None:
                mu3 = (-mu * mu - 3 * mu2) * mu + munp(3, *shapes)
            else:
                mu3 = g1 * np.power(mu2, 1.5)
            g2 = (((-mu**2 - 6 * mu2) * mu - 4 * mu3) * mu + munp(4, *shapes)) / mu2**2.0 - 3.0
    return mu, mu2, g1, g2


def _parameters_accepted(distribution, *parameters):
    """SciPy's test of the ``parameters`` of ``distribution``'s moments (shapes, loc, scale),
    per element: its ``_argcheck`` of the shapes, a positive scale, a loc that is not NaN."""
    *shapes, loc, scale = _plain(parameters)
    return np.asarray(distribution._argcheck(*shapes) & (scale > 0) & (loc == loc))


_accepted = Value(_parameters_accepted, "scipy.stats's test of a distribution's parameters")

rule_of: dict[str, Callable[..., Any]] = {}

BY_GENERATOR = {type(d.scipy): d for d in UNIVARIATE}

for _name in ("stats", "mean", "var", "std"):
    _moments_rule(_name)
for _distribution in UNIVARIATE:
    for _name in _distribution.methods():
        defmethod(type(_distribution.scipy), _name, _generator_rule(_distribution, _name))
    for _name in ("stats", "mean", "var", "std"):
        defmethod(type(_distribution.scipy), _name, rule_of[_name])
    for _name in ("entropy", "fit"):
        if hasattr(_distribution.scipy, _name):  # (discrete distributions have no fit)
            defmethod(type(_distribution.scipy), _name, _generator_rule(_distribution, _name))
for _name in (*norm.methods(), "ppf", "isf"):
    defmethod(rv_continuous_frozen, _name, _frozen_rule(_name))
for _name in poisson.methods():
    defmethod(rv_discrete_frozen, _name, _frozen_rule(_name))

for _generator, _frozen, _distribution, _names in (
        (multivariate_normal_gen, multivariate_normal_frozen, multivariate_normal,
         ("logpdf", "pdf", "cdf", "logcdf", "entropy")),
        (dirichlet_gen, dirichlet_frozen, dirichlet, ("logpdf", "pdf", "mean", "var", "entropy")),
        (multinomial_gen, multinomial_frozen, multinomial, ("logpmf", "pmf")),
        (multivariate_t_gen, multivariate_t_frozen, multivariate_t, ("logpdf", "pdf")),
        (vonmises_fisher_gen, vonmises_fisher_frozen, vonmises_fisher,
         ("logpdf", "pdf", "entropy")),
        (wishart_gen, None, wishart, ()), (invwishart_gen, None, invwishart, ())):
    defmethod(_generator, "__call__", _generator_rule(_distribution, "__call__"))
    for _name in _names:
        defmethod(_generator, _name, _generator_rule(_distribution, _name))
defmethod(multivariate_normal_frozen, "logpdf", lambda self, x: multivariate_normal.logpdf(
    x, self.mean, self.cov_object.covariance))
defmethod(multivariate_normal_frozen, "pdf", lambda self, x: multivariate_normal.pdf(
    x, self.mean, self.cov_object.covariance))
defmethod(multivariate_t_frozen, "logpdf", lambda self, x: multivariate_t.logpdf(
    x, self.loc, self.shape, self.df))
defmethod(multivariate_t_frozen, "pdf", lambda self, x: multivariate_t.pdf(
    x, self.loc, self.shape, self.df))
defmethod(dirichlet_frozen, "logpdf", lambda self, x: dirichlet.logpdf(x, self.alpha))
defmethod(dirichlet_frozen, "pdf", lambda self, x: dirichlet.pdf(x, self.alpha))
for _name in ("mean", "var", "entropy"):
    defmethod(dirichlet_frozen, _name, lambda self, _name=_name: getattr(dirichlet, _name)(
        self.alpha))
# wishart's and invwishart's densities, and those of SciPy's frozen ones (constant parameters)
# at differentiated points: SciPy's own code (its Cholesky factors by scipy.linalg, invwishart's
# triangular solves by BLAS's trsm, routed)
for _generator in (wishart_gen, wishart_frozen, invwishart_gen, invwishart_frozen):
    for _name in ("logpdf", "pdf"):
        defmethod(_generator, _name, lambda self, *args, _method=_SCIPYS_METHODS[
            f"{_generator.__name__.removesuffix('_gen')}.{_name}"], **kwargs:
            following_scipys_code(_method, (self, *args), kwargs))
for _name in ("logpdf", "pdf"):
    defmethod(vonmises_fisher_frozen, _name, lambda self, x, _name=_name: getattr(
        vonmises_fisher, _name)(x, self.mu, self.kappa))
defmethod(vonmises_fisher_frozen, "entropy", lambda self: vonmises_fisher.entropy(self.mu,
                                                                                  self.kappa))
defmethod(multinomial_frozen, "logpmf", lambda self, x: multinomial.logpmf(x, self.n, self.p))
defmethod(multinomial_frozen, "pmf", lambda self, x: multinomial.pmf(x, self.n, self.p))
del _distribution, _name, _generator, _frozen, _names


# ----------------------------------------------------------------------------------------------
# Kernel density estimation: SciPy's values, the derivatives of its sum of Gaussian kernels


def _scipy_kde(dataset, weights, bandwidth, bw_method):
    """SciPy's own estimate, made as the user made it (``bandwidth``: a scalar's number)."""
    if isinstance(bandwidth, np.ndarray):  # a traced number's value comes as a 0-d array
        bandwidth = bandwidth[()]
    given = bandwidth if isinstance(bw_method, str) and bw_method == "use constant" \
        else bw_method
    return _kde.gaussian_kde(dataset, bw_method=given, weights=weights)


_kde_value = Value(
    lambda dataset, weights, bandwidth, bw_method, method, *points: getattr(
        _scipy_kde(dataset, weights, bandwidth, bw_method), method)(*points),
    "scipy.stats.gaussian_kde")
_kde_attribute = Value(
    lambda dataset, weights, bandwidth, bw_method, name: np.asarray(getattr(
        _scipy_kde(dataset, weights, bandwidth, bw_method), name)),
    "scipy.stats.gaussian_kde")
_kde_object_value = Value(lambda kde, method, *points: getattr(kde, method)(*points),
                          "scipy.stats.gaussian_kde")
_kde_object_attribute = Value(lambda kde, name: np.asarray(getattr(kde, name)),
                              "scipy.stats.gaussian_kde")


class _TracedKDE:
    """``gaussian_kde`` of a dataset, weights or scalar bandwidth a differentiation follows, or
    SciPy's own estimate called at points it follows. Its values are SciPy's own estimate's;
    its derivatives those of the same estimate written with functions mutad differentiates:
    the weighted data covariance (``np.cov``), scaled by the bandwidth factor squared (Scott's
    or Silverman's of the effective sample size, a scalar, or the user's function of the
    estimate), and the Gaussian kernels' weighted sum, its log by ``logsumexp``."""

    def __init__(self, dataset, bw_method=None, weights=None, *, scipy_object=None):
        self._object = scipy_object
        self.dataset = np.atleast_2d(dataset)
        if not np.size(self.dataset) > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        self.d, self.n = np.shape(self.dataset)
        self._given_weights = weights
        self._compositions = {"weights": np.ones(self.n) / self.n}
        if weights is not None:
            weights = np.atleast_1d(weights) * 1.0
            self._compositions["weights"] = weights / np.sum(weights)
            if np.ndim(weights) != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != self.n:
                raise ValueError("`weights` input should be of length n")
        self._compositions["neff"] = 1 / np.dot(self._compositions["weights"],
                                                self._compositions["weights"])
        if self.d > self.n:
            raise ValueError("Number of dimensions is greater than number of samples: see "
                             "scipy.stats.gaussian_kde.")
        self.set_bandwidth(bw_method)

    weights = property(lambda self: self._attribute("weights"))
    neff = property(lambda self: self._attribute("neff"))

    def scotts_factor(self):
        """Scott's factor, ``neff ** (-1 / (d + 4))``."""
        return np.power(self.neff, -1.0 / (self.d + 4))

    def silverman_factor(self):
        """Silverman's factor, ``(neff (d + 2) / 4) ** (-1 / (d + 4))``."""
        return np.power(self.neff * (self.d + 2.0) / 4.0, -1.0 / (self.d + 4))

    covariance_factor = scotts_factor

    def set_bandwidth(self, bw_method=None):
        """SciPy's choices: ``'scott'``, ``'silverman'``, a scalar (traced too) or a callable
        of the estimate."""
        if bw_method is None:
            pass
        elif isinstance(bw_method, str) and bw_method == "scott":
            self.covariance_factor = self.scotts_factor
            self._bw_method = bw_method
        elif isinstance(bw_method, str) and bw_method == "silverman":
            self.covariance_factor = self.silverman_factor
            self._bw_method = bw_method
        elif (np.isscalar(bw_method) or isinstance(bw_method, Tracer) and np.ndim(bw_method) == 0
              ) and not isinstance(bw_method, str):
            self._bw_method, self._bandwidth = "use constant", bw_method
            self.covariance_factor = lambda: bw_method
        elif callable(bw_method):
            self._bw_method = bw_method
            self.covariance_factor = lambda: self._bw_method(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar or a "
                             "callable.")
        factor = self.covariance_factor()
        weights = self._compositions["weights"]
        data_covariance = np.atleast_2d(np.cov(self.dataset, rowvar=1, bias=False,
                                               aweights=weights))
        covariance = data_covariance * factor ** 2
        cho_cov = np.linalg.cholesky(covariance)
        # SciPy's values of the attributes, the derivatives of these compositions
        self._compositions.update({
            "factor": factor, "covariance": covariance, "inv_cov": np.linalg.inv(covariance),
            "cho_cov": cho_cov,
            "log_det": 2 * np.log(np.diagonal(cho_cov * np.sqrt(2 * np.pi))).sum()})

    factor = property(lambda self: self._attribute("factor"))
    covariance = property(lambda self: self._attribute("covariance"))
    inv_cov = property(lambda self: self._attribute("inv_cov"))
    cho_cov = property(lambda self: self._attribute("cho_cov"))
    log_det = property(lambda self: self._attribute("log_det"))

    def _settings(self):
        return (self.dataset, self._given_weights, getattr(self, "_bandwidth", None),
                getattr(self, "_bw_method", None))

    def _attribute(self, name):
        value = (_kde_object_attribute(self._object, name) if self._object is not None else
                 _kde_attribute(*self._settings(), name))
        return scipys_value(value, self._compositions[name])

    def _points(self, x):
        points = np.atleast_2d(x)
        d, m = np.shape(points)
        if d != self.d:
            if d == 1 and m == self.d:
                points = np.reshape(points, (self.d, 1))
            else:
                raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return points

    def _energies(self, points):
        """(x_i - y_j)ᵀ Σ⁻¹ (x_i - y_j) for every data point i and query j."""
        diff = self.dataset[:, :, None] - points[:, None, :]
        shape = np.shape(diff)
        scaled = np.reshape(self._compositions["inv_cov"] @ np.reshape(diff, (self.d, -1)),
                            shape)
        return np.sum(diff * scaled, axis=0)

    def _value(self, method, *points):
        if self._object is not None:
            return _kde_object_value(self._object, method, *points)
        return _kde_value(*self._settings(), method, *points)

    def evaluate(self, points):
        """The estimated density at ``points``."""
        energies = self._energies(self._points(points))
        kernels = self._compositions["weights"][:, None] * np.exp(-0.5 * energies)
        composition = kernels.sum(axis=0) * np.exp(-0.5 * self._compositions["log_det"])
        return scipys_value(self._value("evaluate", points), composition)

    __call__ = evaluate
    pdf = evaluate

    def logpdf(self, x):
        """The log of the estimated density at ``x``."""
        energies = self._energies(self._points(x))
        logs = np.log(self._compositions["weights"])[:, None] - 0.5 * energies
        composition = _logsumexp(logs, axis=0) - 0.5 * self._compositions["log_det"]
        return scipys_value(self._value("logpdf", x), composition)

    def integrate_box_1d(self, low, high):
        """The estimate's mass between ``low`` and ``high`` (one dimension): SciPy's sum of
        the kernels' normal distribution functions."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        stdev = np.ravel(np.sqrt(self._compositions["covariance"]))[0]
        masses = (ndtr(np.ravel((high - self.dataset) / stdev))
                  - ndtr(np.ravel((low - self.dataset) / stdev)))
        composition = np.sum(self._compositions["weights"] * masses)
        return scipys_value(self._value("integrate_box_1d", low, high), composition)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.stats.gaussian_kde(...).{name}: this estimate was built from (or called "
            "at) values a differentiation follows, and mutad differentiates evaluate, pdf, "
            "logpdf, calling it, integrate_box_1d, and its bandwidth attributes only. Build it "
            "from plain values (mutad.stop_gradient) for the others (resample, the other "
            "integrals, marginal).",
            private="_")


class _KDEClass(type):
    """The stand-in for SciPy's ``gaussian_kde`` while a differentiation runs: a
    :class:`_TracedKDE` from followed values, SciPy's own otherwise, and for ``isinstance``
    SciPy's class."""

    def __call__(cls, dataset, bw_method=None, weights=None):
        if innermost((dataset, bw_method, weights)) is None:
            return _kde.gaussian_kde(dataset, bw_method=bw_method, weights=weights)
        return _TracedKDE(dataset, bw_method, weights)

    def __instancecheck__(cls, instance):
        return isinstance(instance, (_kde.gaussian_kde, _TracedKDE))

    def __subclasscheck__(cls, subclass):
        return issubclass(subclass, _kde.gaussian_kde)

    def __getattr__(cls, name):
        return getattr(_kde.gaussian_kde, name)


gaussian_kde = _KDEClass("gaussian_kde", (), {
    "__doc__": "``scipy.stats.gaussian_kde``, of a differentiated dataset, weights or bandwidth "
               "too (see the module).", "__module__": __name__, "__qualname__": "gaussian_kde"})
defroute(_kde.gaussian_kde, gaussian_kde)


def _kde_at_points(method):
    """A method of SciPy's own estimate called at traced points."""
    def rule(self, points):
        traced = _TracedKDE(self.dataset, self.factor, self.weights, scipy_object=self)
        return getattr(traced, method)(points)
    return rule


for _name in ("evaluate", "__call__", "pdf", "logpdf"):
    defmethod(_kde.gaussian_kde, _name,
              _kde_at_points("logpdf" if _name == "logpdf" else "evaluate"))
del _name


# ----------------------------------------------------------------------------------------------
# The other continuous distributions: SciPy's own standardised formulas (its private _logpdf,
# _cdf, ...), which are compositions of NumPy's and SciPy's functions that dispatch


class _ScipysFormulas:
    """A distribution mutad has no composition of its own for (``scipy.stats.f``,
    ``genextreme``, ``geom``, ...): SciPy's value, with the derivatives of SciPy's own
    standardised formulas (``_logpdf``, ``_cdf``, ``_sf``, ``_logcdf``, ``_logsf``, ``_ppf``,
    ``_isf``; a discrete one's ``_logpmf``), evaluated at points inside the support
    (``_get_support``) and shapes SciPy accepts (``_argcheck``). Shapes outside their range,
    which have no stand-in here, are refused; so is a formula that does not dispatch (SciPy's
    numerical integration of ``_pdf`` for a ``_cdf`` it lacks, say). With ``Continuous`` or
    ``Discrete``, whose compositions these run."""

    scipy: Any

    # SciPy's checks of the shapes and its support, decisions: taken on the plain values
    def _valid(self, *shapes):
        return self.scipy._argcheck(*_plain(shapes))

    def _bounds(self, *shapes):
        return tuple(np.asarray(b, dtype=float) for b in self.scipy._get_support(*_plain(shapes)))

    def _checked(self, name, shapes):
        """This distribution with ``shapes`` as their own stand-ins, once SciPy accepts them."""
        if any(carries_derivative(s) for s in shapes):
            not_replayed(f"scipy.stats.{self.scipy.name}.{name} of differentiated shapes, "
                         "whose checks are taken on their plain values")
        if not np.all(self._valid(*shapes)):
            raise UnsupportedOperationError(
                f"scipy.stats.{self.scipy.name}.{name} of differentiated arguments with shape "
                "parameters outside the distribution's domain (SciPy gives NaN there): mutad "
                "follows this distribution's formulas inside its domain.")
        variant = copy.copy(self)
        variant.safe = tuple(shapes)  # (all valid: none is substituted)
        return variant

    # (SciPy's formulas fill buffers they allocate: library_allocation)
    def composition(self, name, x, shapes, loc, scale):
        variant = self._checked(name, shapes)
        with library_allocation():
            return Univariate.composition(variant, name, x, shapes, loc, scale)

    def quantile(self, name, q, shapes, loc, scale):
        variant = self._checked(name, shapes)
        with library_allocation():
            return Univariate.quantile(variant, name, q, shapes, loc, scale)

    def entropy(self, *args, **kwargs):
        if not _is_traced(args, kwargs):
            return self.scipy.entropy(*args, **kwargs)
        variant = self._checked("entropy", self.scipy._parse_args(*args, **kwargs)[0])
        with library_allocation():
            return Univariate.entropy(variant, *args, **kwargs)


class _Formulas(_ScipysFormulas, Continuous):
    """A continuous distribution by SciPy's formulas (``_ScipysFormulas``)."""

    def __init__(self, scipy):
        super().__init__(scipy, {name: _formula(scipy, name) for name in (
            "logpdf", "cdf", "sf", "logcdf", "logsf")},
            valid=self._valid, bounds=self._bounds, inside=self._inside,
            quantiles={name: _formula(scipy, name) for name in ("ppf", "isf")})

    def _inside(self, *shapes):
        """A point inside the support, for the entries outside it (their value is constant)."""
        return _between(*self._bounds(*shapes))


class _DiscreteFormulas(_ScipysFormulas, Discrete):
    """A discrete distribution by SciPy's formulas (``_ScipysFormulas``): its masses and
    distribution functions, piecewise constant in the points and ``loc`` (no derivative
    there), differentiated in the shapes. Its quantile functions have integer values."""

    def __init__(self, scipy):
        super().__init__(scipy, {
            "logpdf": _formula(scipy, "logpmf"),
            **{name: _formula(scipy, name) for name in ("cdf", "sf", "logcdf", "logsf")}},
            valid=self._valid, bounds=self._bounds, inside=self._inside)

    def _inside(self, *shapes):
        """A point of the support (its lower end, where it has one)."""
        low, high = self._bounds(*shapes)
        return np.where(np.isfinite(low), low, np.where(np.isfinite(high), high, 0.0))


def _formula(scipy, name):
    """SciPy's standardised formula ``_<name>`` of distribution ``scipy``, called on valid
    shapes and points inside the support: a ``TypeError`` or ``AttributeError`` there is its
    code meeting arrays mutad follows (``np.nditer``, a compiled function), said as such."""
    formula = getattr(scipy, f"_{name}")

    def run(z, *shapes):
        # (SciPy calls its formulas with the arguments broadcast together, each raveled, as
        # ``argsreduce`` gives them: some read them so, norminvgauss._sf's zip(x, a, b))
        shape = np.broadcast_shapes(np.shape(z), *(np.shape(s) for s in shapes))
        try:
            value = formula(*(np.ravel(v) for v in np.broadcast_arrays(z, *shapes)))
        except MutadError:
            raise
        except (TypeError, AttributeError) as error:
            raise UnsupportedOperationError(
                f"scipy.stats.{scipy.name}.{name} of differentiated arguments: SciPy's formula "
                f"for it does not run on arrays mutad follows ({error}). Pass the arguments "
                "through mutad.stop_gradient, or write the function with NumPy.") from error
        return value if np.ndim(value) == 0 else np.reshape(value, shape)

    return run


def _plain(values):
    return [np.asarray(memory(v)) for v in values]


_FORMULAS: dict[int, _ScipysFormulas] = {}


def _formulas(generator):
    """The ``_Formulas`` of SciPy's continuous distribution ``generator`` (an instance: its
    support may be its own), or the ``_DiscreteFormulas`` of a discrete one, made once."""
    found = _FORMULAS.get(id(generator))
    if found is None or found.scipy is not generator:
        kind = _DiscreteFormulas if isinstance(generator, _stats.rv_discrete) else _Formulas
        found = _FORMULAS[id(generator)] = kind(generator)
    return found


def _formulas_rule(name):
    def rule(self, *args, **kwargs):
        return getattr(_formulas(self), name)(*args, **kwargs)

    rule.subclasses = True  # (a user's distribution: its own _pdf, _argcheck, ... are read)
    return rule


# (the distributions above have their own rules, on their own classes)
for _name in ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "entropy"):
    defmethod(_stats.rv_continuous, _name, _formulas_rule(_name))
for _name in ("pmf", "logpmf", "cdf", "logcdf", "sf", "logsf"):
    defmethod(_stats.rv_discrete, _name, _formulas_rule(_name))




def _refused_fit(generator, method="mle"):
    return UnsupportedOperationError(
        f"scipy.stats.{generator.name}.fit of differentiated data"
        + ("" if str(method).lower() == "mle" else f" with method={method!r}")
        + ": SciPy fits it by numerical optimisation, which mutad does not follow; it follows "
        "SciPy's closed forms and root findings (norm and expon, gamma with floc given, ...). "
        "Fit with scipy.optimize.minimize of the negative log-likelihood (logpdf), whose "
        "solution mutad differentiates.")


def _scipys_fit(generator, data, args, kwargs):
    """``generator.fit(data, *args, **kwargs)`` of differentiated data by the fit its own class
    defines, SciPy's code followed step by step (its closed forms, and its root findings of
    the likelihood equations, which mutad differentiates by their solutions: gamma's with floc
    given); where that code falls back on ``rv_continuous.fit``'s numerical optimisation (or
    the class has no fit of its own), refused (``_generic_fit``)."""
    own = next(vars(owner)["fit"] for owner in type(generator).__mro__ if "fit" in vars(owner))
    own = getattr(own, "__wrapped__", own)  # (SciPy's, where the mode installed a rule)
    fitting = _FITTING.__dict__.setdefault("generators", [])
    if own is _GENERIC_FIT or any(g is generator for g in fitting):  # (its super().fit)
        raise _refused_fit(generator, kwargs.get("method", "mle"))
    fitting.append(generator)
    try:
        return following_scipys_code(own.__get__(generator, type(generator)), (data, *args),
                                     kwargs)
    finally:
        fitting.pop()


_FITTING = threading.local()
"""The distributions whose own fit ``_scipys_fit`` follows in this thread: a fit of one of
them called meanwhile is its class's ``super().fit``, the numerical optimisation."""


_GENERIC_FIT = vars(_stats.rv_continuous)["fit"]
_GENERIC_FIT = getattr(_GENERIC_FIT, "__wrapped__", _GENERIC_FIT)  # (SciPy's own)


def _fit_rule():
    def rule(self, data, *args, **kwargs):
        return _scipys_fit(self, data, args, kwargs)

    rule.subclasses = True  # (the numerical optimisation, reached by super().fit too)
    return rule


defmethod(_stats.rv_continuous, "fit", _fit_rule())
for _generator in map(type, vars(_stats.distributions).values()):  # (SciPy's own fits)
    if issubclass(_generator, _stats.rv_continuous) and "fit" in vars(_generator) \
            and _generator not in BY_GENERATOR:
        defmethod(_generator, "fit", _fit_rule())


def _scipys_moments_rule(original):
    """SciPy's own ``original`` (a moment's method of ``rv_generic``, or its negative
    log-likelihood ``nnlf``) of a distribution without rules of its own for it, followed step
    by step: its ``_stats``, ``_munp``, ``ppf`` or ``_logpdf`` of the traced values, which
    mutad differentiates."""
    def rule(self, *args, **kwargs):
        return following_scipys_code(original.__get__(self, type(self)), args, kwargs)

    rule.subclasses = True  # (a user's distribution: SciPy's code reads its own _pdf, _stats)
    return rule


# (the distributions above have their own moments' rules, on their own classes)
for _name in ("stats", "mean", "var", "std", "median", "interval", "moment", "nnlf", "expect"):
    for _kind in (_stats.rv_continuous, _stats.rv_discrete):
        defmethod(_kind, _name, _scipys_moments_rule(getattr(_kind, _name)))

_FROZEN_INIT = rv_frozen.__init__


def _frozen_init(self, dist, *args, **kwds):
    """Freezing a distribution of traced parameters (``scipy.stats.kappa4(h, k)``): SciPy's own
    ``__init__``, whose support of the shapes (``_get_support``) may fill buffers it allocates
    (``_lazyselect``)."""
    with library_allocation():
        _FROZEN_INIT(self, dist, *args, **kwds)


defmethod(rv_frozen, "__init__", _frozen_init)

_HISTOGRAM_INIT = _stats.rv_histogram.__init__


def _histogram_init(self, histogram, *args, **kwargs):
    """``rv_histogram`` of traced counts (or densities): SciPy's own ``__init__`` followed, its
    normalisation (``float(np.sum(...))`` of the traced counts: the value standing for that
    number) and cumulative sums of the traced values, which its ``_pdf``, ``_cdf`` and ``_ppf``
    read."""
    following_scipys_code(_HISTOGRAM_INIT.__get__(self, type(self)), (histogram, *args), kwargs)


defmethod(_stats.rv_histogram, "__init__", _histogram_init)


def _histogram_rule(name):
    """Method ``name`` of an ``rv_histogram``: where the histogram holds traced values (its
    ``_hpdf``, ``_hcdf`` made by ``_histogram_init``), SciPy's own code followed, which reads
    them, whatever the arguments (``d.mean()`` has none); else ``rv_continuous``'s (routed by
    its arguments)."""
    scipys = getattr(_stats.rv_continuous, name)  # (SciPy's own, before any routing)

    def rule(self, *args, **kwargs):
        if not holds_wrapped([getattr(self, "_hpdf", None), getattr(self, "_hcdf", None),
                              getattr(self, "_hbins", None)]):
            return getattr(_stats.rv_continuous, name)(self, *args, **kwargs)
        return following_scipys_code(scipys.__get__(self, type(self)), args, kwargs)

    rule.always = True
    return rule


for _name in ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "stats", "mean",
              "var", "std", "median", "interval", "moment", "expect", "entropy"):
    defmethod(_stats.rv_histogram, _name, _histogram_rule(_name))
