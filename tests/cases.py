"""Case tables and the kinds of case the family tests loop over.

``UFUNC_CASES`` has one row per differentiable ufunc in ``mutad/rules/ufuncs.py`` with the
domain of each input; ``COMPLEX_UFUNC_CASES`` the rows of those mutad differentiates for
complex values, on complex domains (``strategies.ComplexDomain``). ``UNARY_SCENARIOS`` and
``BINARY_SCENARIOS`` are the ways a program can apply a ufunc: out of place, ``out=`` into a
traced buffer, in place on its own input, into a slice, with broadcasting, and with operands
that alias each other. The test crosses the two.

The other families write their tables in their own test files, with the same :class:`Case`:
drawn by shape (reductions, shape functions), or by a sampler of the whole argument tuple
built from ``normal``, ``fixed`` and ``arguments`` (indexing, linalg). ``case_id`` names a
case for pytest. ``COMPLEX`` makes a case drawn by shape complex, ``complexified`` gives an
imaginary part to every float argument of a case, and ``check_complex`` checks one in both
modes (at order 1) or to order 2.
"""

import operator
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np
import scipy.special as special
from scipy.special._ufuncs import _lambertw  # scipy.special.lambertw(z, k, tol)'s ufunc
from scipy.special._ufuncs import _zeta  # scipy.special.zeta(x, q)'s ufunc
from scipy.special._ufuncs import _riemann_zeta  # scipy.special.zeta(x)'s ufunc
from scipy.special._ufuncs import _beta_ppf  # scipy.stats.beta.ppf(q, a, b)'s ufunc
# scipy.stats.kstwobign's and ksone's distribution functions and their inverses
from scipy.special._ufuncs import _kolmogc, _kolmogci, _smirnovc, _smirnovci
from scipy.special._ufuncs import (  # scipy.stats' own invgauss, ncx2, nct, skewnorm functions
    _invgauss_isf, _invgauss_ppf, _ncf_isf, _ncf_pdf, _ncf_sf, _nct_isf, _nct_pdf, _nct_sf,
    _ncx2_isf, _ncx2_pdf, _ncx2_sf, _scaled_exp1, _skewnorm_isf, _skewnorm_ppf)

from strategies import (
    Domain,
    above_one,
    between_one_and_two,
    complex_distinct,
    complex_nonzero,
    complex_plane,
    complex_right,
    complex_right_of_one,
    complex_small,
    distinct,
    is_complex_domain,
    nonzero,
    open_unit_interval,
    positive,
    real,
    small,
)


def standard_normal(rng, shape):
    """The default domain of a case drawn by shape: standard normal values."""
    return rng.standard_normal(shape)


@dataclass(frozen=True)
class Case:
    """One row of a case table: a function, how its arguments are drawn, and how to check it.

    Arguments are drawn one of three ways:

    * a ufunc row, ``Case(np.arccosh, (above_one,))``: the domain of each input; the scenarios
      choose the shapes and the aliasing. ``alias`` is the domain of a buffer that feeds every
      operand at once (``a *= a``), for binary ufuncs whose operands' domains differ;
      ``settings`` are ``(position, value)`` pairs of inputs held constant (a Bessel function's
      order), the case then being the function of the other inputs; ``label`` tells apart two
      rows of one ufunc.
    * by shape, ``Case(np.sum, shapes=((2, 3, 4),), kwargs=dict(axis=0))``: one array per shape,
      drawn from ``domains`` (functions ``(rng, shape) -> array``; the last one serves the
      remaining shapes) in ``dtype``.
    * by a sampler of the whole argument tuple, ``Case.named("dot-2d", np.dot,
      arguments(normal(2, 3), normal(3, 4)))``.

    ``args`` and ``kwargs`` are settings passed after the drawn arguments (``program`` puts
    them in place). ``symmetric`` lists the positions of symmetric matrices (perturbed along
    symmetric directions), ``align(output, reference)`` fixes sign choices (of eigenvectors)
    before outputs are differenced, ``rule`` is the forward rule when the function's own is
    not the one in the table, and ``fd=False`` skips finite differences at ties and kinks,
    which only the transpose check can judge. ``second=False``: a row whose second derivative
    in a drawn argument mutad refuses (an incomplete gamma function's in its parameter).
    """

    function: object
    domains: tuple = ()
    alias: Domain = None
    settings: tuple = ()
    label: str = ""
    shapes: tuple = ((3, 4),)
    name: str = ""
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    dtype: type = np.float64
    sampler: Callable = None
    symmetric: tuple = ()
    align: Callable = None
    rule: Callable = None
    fd: bool = True
    second: bool = True

    @classmethod
    def named(cls, name, function, sampler, **options):
        return cls(function, name=name, sampler=sampler, **options)

    @property
    def is_ufunc_row(self):
        return isinstance(self.function, np.ufunc)

    @property
    def arity(self):
        return len(self.domains)

    @property
    def alias_domain(self):
        return self.alias or self.domains[0]

    @property
    def id(self):
        if self.sampler is not None:
            return self.name
        name = self.name or getattr(self.function, "__name__", None) or repr(self.function)
        if self.is_ufunc_row:
            return (name + "".join(f"-{value!r}" for _, value in self.settings)
                    + (f"-{self.label}" if self.label else ""))
        parts = [name, "x".join(str(s) for s in self.shapes)]
        parts += [repr(a) for a in self.args]
        parts += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        parts += [d.__name__ for d in self.domains]
        if self.dtype is not np.float64:
            parts.append(np.dtype(self.dtype).name)
        return "-".join(parts)

    def sample(self, rng):
        """The drawn arguments (a ufunc row's come from ``sample_arguments``)."""
        if self.sampler is not None:
            return tuple(self.sampler(rng))
        domains = self.domains or (standard_normal,)
        return [domains[min(i, len(domains) - 1)](rng, shape).astype(self.dtype)
                for i, shape in enumerate(self.shapes)]

    def __call__(self, *drawn, **kwargs):
        return self.program(*drawn, **kwargs)

    @property
    def program(self):
        """The function of the drawn arguments, the settings in their places."""
        if not (self.settings or self.args or self.kwargs):
            return self.function
        function, settings, args, kwargs = self.function, dict(self.settings), self.args, self.kwargs
        count = len(self.settings) + len(self.domains)

        def with_settings(*drawn, **more):
            drawn = iter(drawn)
            inputs = [settings[i] if i in settings else next(drawn) for i in range(count)] \
                if settings else list(drawn)
            return function(*inputs, *args, **kwargs, **more)

        with_settings.__name__ = self.id
        return with_settings


# fmt: off
UFUNC_CASES = [
    Case(np.negative,    (real,)),
    Case(np.positive,    (real,)),
    Case(np.conjugate,   (real,)),
    Case(np.exp,         (real,)),
    Case(np.expm1,       (real,)),
    Case(np.exp2,        (real,)),
    Case(np.log,         (positive,)),
    Case(np.log1p,       (positive,)),
    Case(np.log2,        (positive,)),
    Case(np.log10,       (positive,)),
    Case(np.sqrt,        (positive,)),
    Case(np.cbrt,        (nonzero,)),             # infinite slope at 0
    Case(np.square,      (real,)),
    Case(np.reciprocal,  (nonzero,)),
    Case(np.absolute,    (nonzero,)),             # kink at 0
    Case(np.fabs,        (nonzero,)),
    Case(np.sin,         (real,)),
    Case(np.cos,         (real,)),
    Case(np.tan,         (small,)),               # poles at ±pi/2
    Case(np.arcsin,      (open_unit_interval,)),
    Case(np.arccos,      (open_unit_interval,)),
    Case(np.arctan,      (real,)),
    Case(np.sinh,        (real,)),
    Case(np.cosh,        (real,)),
    Case(np.tanh,        (real,)),
    Case(np.arcsinh,     (real,)),
    Case(np.arccosh,     (above_one,)),
    Case(np.arctanh,     (open_unit_interval,)),
    Case(np.deg2rad,     (real,)),
    Case(np.rad2deg,     (real,)),

    Case(np.add,         (real, real)),
    Case(np.subtract,    (real, real)),
    Case(np.multiply,    (real, real)),
    Case(np.divide,      (real, nonzero),         alias=nonzero),
    Case(np.power,       (positive, small),       alias=positive),
    Case(np.remainder,   (between_one_and_two, between_one_and_two)),  # jumps where a/b is whole
    Case(np.fmod,        (between_one_and_two, between_one_and_two)),
    Case(np.maximum,     (distinct, distinct)),   # kinks where a == b
    Case(np.minimum,     (distinct, distinct)),
    Case(np.fmax,        (distinct, distinct)),
    Case(np.fmin,        (distinct, distinct)),
    Case(np.hypot,       (nonzero, nonzero)),     # kink at the origin
    Case(np.arctan2,     (nonzero, nonzero)),     # branch cut along y == 0, x < 0
    Case(np.logaddexp,   (real, real)),
    Case(np.logaddexp2,  (real, real)),
    Case(np.float_power, (positive, small),       alias=positive),
    Case(np.copysign,    (nonzero, nonzero)),     # kink at 0, jump where b changes sign
    Case(np.ldexp,       (real,),                 settings=((1, 3),)),
    Case(np.nextafter,   (real,),                 settings=((1, 10.0),)),
    Case(np.radians,     (real,)),
    Case(np.degrees,     (real,)),
]

# scipy.special: x > 0 away from the poles and zeros where finite differences would misjudge
unit_interior = Domain("unit_interior", 0.1, 0.9)
above_half = Domain("above_half", 0.6, 3.0)
bessel_argument = Domain("bessel_argument", 0.5, 3.0)
exponent = Domain("exponent", -1.5, 1.5)
probability = Domain("probability", 0.05, 0.95)
both_halves = Domain("both_halves", 0.6, 0.9)  # (above_half and probability both)
negative_non_integer = Domain("negative_non_integer", -2.8, -2.2)
elliptic_parameter = Domain("elliptic_parameter", -1.5, 0.9)

_first = partial(Case, second=False)
UFUNC_CASES += [
    Case(special.gamma,     (above_half,)),
    Case(special.gamma,     (negative_non_integer,), label="negative"),
    Case(special.rgamma,    (above_half,)),
    Case(special.rgamma,    (negative_non_integer,), label="negative"),
    Case(special.gammaln,   (positive,)),
    Case(special.gammaln,   (negative_non_integer,), label="negative"),
    Case(special.loggamma,  (positive,)),
    Case(special.psi,       (above_half,)),
    Case(special.beta,      (above_half, above_half)),
    Case(special.betaln,    (positive, positive)),
    Case(special.betainc,   (unit_interior,), settings=((0, 2.5), (1, 1.5))),
    Case(special.betaincc,  (unit_interior,), settings=((0, 0.7), (1, 3.0))),
    Case(special.gammainc,  (positive,),      settings=((0, 1.7),)),
    Case(special.gammaincc, (positive,),      settings=((0, 2.5),)),
    Case(special.stdtr,     (real,),          settings=((0, 3.5),)),
    Case(special.stdtr,     (above_half, real),    alias=above_half, label="df"),
    Case(special.erf,       (real,)),
    Case(special.erfc,      (real,)),
    Case(special.erfcx,     (real,)),
    Case(special.erfinv,    (open_unit_interval,)),
    Case(special.erfcinv,   (Domain("erfc_range", 0.1, 1.9),)),
    Case(special.ndtr,      (real,)),
    Case(special.ndtri,     (probability,)),
    Case(special.log_ndtr,  (real,)),
    Case(special.expit,     (real,)),
    Case(special.log_expit, (real,)),
    Case(special.logit,     (probability,)),
    Case(special.xlogy,     (real, positive),      alias=positive),
    Case(special.xlog1py,   (real, above_half),    alias=positive),
    Case(special.entr,      (positive,)),
    Case(special.rel_entr,  (positive, positive)),
    Case(special.j0,        (real,)),
    Case(special.j1,        (real,)),
    Case(special.jv,        (bessel_argument,),    settings=((0, 1.5),)),
    Case(special.jv,        (real,),               settings=((0, 2.0),)),
    Case(special.y0,        (bessel_argument,)),
    Case(special.y1,        (bessel_argument,)),
    Case(special.yn,        (bessel_argument,),    settings=((0, 2),)),
    Case(special.yn,        (bessel_argument,),    settings=((0, 0.5),), label="truncated"),
    Case(special.yv,        (bessel_argument,),    settings=((0, 0.7),)),
    Case(special.jve,       (bessel_argument,),    settings=((0, 1.5),)),
    Case(special.yve,       (bessel_argument,),    settings=((0, 0.7),)),
    Case(special.i0,        (real,)),
    Case(special.i1,        (real,)),
    Case(special.iv,        (bessel_argument,),    settings=((0, 1.3),)),
    Case(special.i0e,       (nonzero,)),           # kink of e^-|x| at 0
    Case(special.i1e,       (nonzero,)),
    Case(special.ive,       (bessel_argument,),    settings=((0, 2.5),)),
    Case(special.k0,        (bessel_argument,)),
    Case(special.k1,        (bessel_argument,)),
    Case(special.kv,        (bessel_argument,),    settings=((0, 0.4),)),
    Case(special.k0e,       (bessel_argument,)),
    Case(special.k1e,       (bessel_argument,)),
    Case(special.kve,       (bessel_argument,),    settings=((0, 1.5),)),
    # K_v in its order, by the trapezoidal rule of its integral (x held constant: the second
    # derivatives through the x partial's own quadrature cost seconds)
    Case(special.kv,        (Domain("order", -3.0, 3.0),), settings=((1, 1.7),)),
    Case(special.kve,       (Domain("order", -3.0, 3.0),), settings=((1, 0.6),)),
    # J_v, Y_v and I_v in their order (a first derivative: their series or integrals), where
    # the series serves (small x), where the integrals do, and an order in (-1, 0)
    _first(special.jv,      (Domain("order", -0.9, 3.0),), settings=((1, 1.7),), label="order"),
    _first(special.jv,      (Domain("order", 0.0, 3.0),), settings=((1, 9.5),),
           label="order-oscillating"),
    _first(special.yv,      (Domain("order", -3.0, 3.0),), settings=((1, 2.2),), label="order"),
    _first(special.jve,     (Domain("order", 0.0, 3.0),), settings=((1, 0.4),), label="order"),
    _first(special.yve,     (Domain("order", 0.0, 3.0),), settings=((1, 12.0),), label="order"),
    _first(special.iv,      (Domain("order", -0.9, 3.0),), settings=((1, 1.3),), label="order"),
    _first(special.ive,     (Domain("order", -0.9, 3.0),), settings=((1, 30.0),), label="order"),
    _first(special.ive,     (Domain("order", 6.0, 9.0),), settings=((1, 0.5),),
           label="order-small-x"),
    Case(special.huber,     (above_half, real),    alias=above_half),
    Case(special.pseudo_huber, (above_half, real), alias=above_half),
    Case(special.boxcox,    (above_half, exponent), alias=above_half),
    Case(special.boxcox1p,  (above_half, exponent), alias=above_half),
    # at x = 0 (boxcox1p's x = -1), y = -1/λ for λ > 0 (its λ-derivative was NaN)
    Case(special.boxcox,    (above_half,),         settings=((0, 0.0),), label="at zero"),
    Case(special.boxcox1p,  (above_half,),         settings=((0, -1.0),), label="at zero"),
    Case(special.inv_boxcox, (unit_interior, Domain("mild_exponent", -0.5, 0.5))),
    Case(special.inv_boxcox1p, (unit_interior, Domain("mild_exponent", -0.5, 0.5))),
    Case(special.exprel,    (real,)),
    Case(special.exprel,    (Domain("near_zero", -5e-3, 5e-3),), label="near-zero"),
    Case(special.exp1,      (positive,)),
    Case(special.expi,      (above_half,)),
    Case(special.expn,      (positive,),           settings=((0, 2),)),
    Case(special.exp10,     (exponent,)),
    Case(special.exp2,      (real,)),
    Case(special.cbrt,      (nonzero,)),
    Case(special.sindg,     (real,)),
    Case(special.cosdg,     (real,)),
    Case(special.binom,     (Domain("count", 4.2, 6.8), above_half), alias=above_half),
    Case(special.poch,      (above_half, above_half)),
    Case(special.kl_div,    (positive, positive)),
    Case(special.log1p,     (positive,)),
    Case(special.expm1,     (real,)),
    Case(special.dawsn,     (real,)),
    Case(special.ellipk,    (elliptic_parameter,)),
    Case(special.ellipk,    (Domain("near_zero", -5e-4, 5e-4),), label="near-zero"),
    Case(special.ellipe,    (elliptic_parameter,)),
    Case(special.ellipkm1,  (Domain("complement", 0.1, 2.5),)),
    Case(special.ellipkm1,  (Domain("near_one", 1.0 - 5e-4, 1.0 + 5e-4),), label="near-one"),
    Case(special.ellipe,    (Domain("near_zero", -5e-4, 5e-4),), label="near-zero"),
    Case(special.spence,    (positive,)),
    Case(special.erfi,      (real,)),
    Case(special.ndtri_exp, (Domain("log_probability", -6.0, -0.1),)),
    Case(special.voigt_profile, (real, above_half), settings=((2, 0.4),), label="x sigma"),
    Case(special.voigt_profile, (real, above_half), settings=((1, 0.6),), label="x gamma"),
    Case(special.powm1,     (above_half, exponent)),
    Case(special.hyp1f1,    (real,),               settings=((0, 0.5), (1, 1.5))),
    # the Kolmogorov distributions by SciPy's derivatives (a first derivative); smirnov's d
    # between SciPy's breaks at multiples of 1/n
    _first(special.kolmogorov, (Domain("statistic", 0.3, 2.5),)),
    _first(_kolmogc, (Domain("statistic", 0.3, 2.5),)),
    _first(special.kolmogi, (probability,)),
    _first(_kolmogci, (probability,)),
    _first(special.smirnov, (Domain("statistic", 0.22, 0.38),), settings=((0, 5),)),
    _first(_smirnovc, (Domain("statistic", 0.22, 0.38),),
           settings=((0, 5),)),
    _first(special.smirnovi, (Domain("probability", 0.15, 0.4),), settings=((0, 5),)),
    _first(_smirnovci, (Domain("probability", 0.6, 0.85),),
           settings=((0, 5),)),
    _first(special.hyp2f1,  (Domain("parameter", -0.5, 2.0),), settings=((1, 1.5), (2, 2.5),
                                                                         (3, -0.6)), label="a"),
    _first(special.hyp2f1,  (Domain("parameter", 0.5, 3.0),), settings=((0, 0.7), (1, 1.2),
                                                                        (3, 0.8)), label="c"),
    _first(special.hyp1f1,  (Domain("parameter", -0.5, 2.0),), settings=((1, 1.5), (2, -0.8)),
           label="a"),
    _first(special.hyp1f1,  (Domain("parameter", 0.5, 3.0),), settings=((0, 0.7), (2, 2.5)),
           label="b"),
    Case(special.hyperu,    (positive,),           settings=((0, 0.5), (1, 1.5))),
    Case(special.gammaincinv, (probability,),      settings=((0, 2.5),)),
    Case(special.gammainccinv, (probability,),     settings=((0, 2.5),)),
    Case(special.betaincinv, (probability,),       settings=((0, 2.0), (1, 3.0))),
    Case(special.betainccinv, (probability,),      settings=((0, 2.5), (1, 1.5))),
    Case(special.chdtr,     (above_half,),         settings=((0, 3.0),)),
    Case(special.chdtrc,    (above_half,),         settings=((0, 3.0),)),
    Case(special.gdtr,      (above_half, above_half), settings=((1, 2.0),)),
    Case(special.gdtrc,     (above_half, above_half), settings=((1, 2.0),)),
    Case(special.ellipkinc, (exponent,),           settings=((1, 0.4),)),
    Case(special.ellipeinc, (exponent,),           settings=((1, -0.3),)),
    Case(special.spence,    (Domain("near_one", 0.9995, 1.0005),), label="near-one"),
    Case(special.owens_t,   (real, real)),
    Case(special.cosm1,     (real,)),
    Case(special.tandg,     (Domain("degrees", -80.0, 80.0),)),
    Case(special.cotdg,     (Domain("degrees_inside", 10.0, 170.0),)),
    Case(special.kn,        (above_half,),         settings=((0, 2),)),
    Case(special.kn,        (above_half,),         settings=((0, -1.5),), label="truncated"),
    Case(special.pdtr,      (above_half,),         settings=((0, 2),)),
    Case(special.pdtrc,     (above_half,),         settings=((0, 3.5),)),
    Case(special.bdtr,      (unit_interior,),      settings=((0, np.int64(3)), (1, np.int64(10)))),
    Case(special.bdtrc,     (unit_interior,),      settings=((0, np.int64(4)), (1, np.int64(9)))),
    Case(special.bdtr,      (unit_interior,),      settings=((0, np.int64(6)), (1, np.int64(6))),
         label="k >= n"),  # (integers: SciPy deprecates a float n, which float32 p casts to)
    Case(special.nbdtr,     (unit_interior,),      settings=((0, np.int64(3)), (1, np.int64(5)))),
    Case(special.nbdtrc,    (unit_interior,),      settings=((0, np.int64(2)), (1, np.int64(4)))),
    Case(special.fdtr,      (above_half,),         settings=((0, 3.0), (1, 5.0))),
    Case(special.fdtrc,     (above_half,),         settings=((0, 2.5), (1, 7.0))),
    Case(special.stdtrit,   (above_half, probability), alias=Domain("df_and_p", 0.6, 0.9)),
    # the incomplete gamma and beta functions in their parameters: their series and continued
    # fractions differentiated term by term, whose own derivatives there mutad refuses
    _first(special.gammainc,  (above_half, positive), label="a"),
    _first(special.gammaincc, (above_half, positive), label="a"),
    _first(special.betainc,   (above_half, unit_interior), settings=((1, 1.5),),
           alias=unit_interior),
    _first(special.betainc,   (above_half, unit_interior), settings=((0, 2.5),),
           alias=unit_interior),
    _first(special.betaincc,  (above_half, unit_interior), settings=((1, 0.7),),
           alias=unit_interior),
    _first(special.betaincc,  (above_half, unit_interior), settings=((0, 0.8),),
           alias=unit_interior),
    _first(special.gammaincinv,  (above_half, probability), alias=probability, label="a"),
    _first(special.gammainccinv, (above_half, probability), alias=probability, label="a"),
    _first(special.betaincinv,  (above_half, probability), settings=((1, 3.0),), alias=probability),
    _first(special.betaincinv,  (above_half, probability), settings=((0, 2.0),), alias=probability),
    _first(special.betainccinv, (above_half, probability), settings=((1, 1.5),), alias=probability),
    _first(special.betainccinv, (above_half, probability), settings=((0, 2.5),), alias=probability),
    _first(_beta_ppf,         (probability, above_half), settings=((2, 3.0),), alias=probability),
    _first(_beta_ppf,         (probability, above_half), settings=((1, 2.0),), alias=probability),
    _first(special.chdtr,     (above_half, above_half), label="v"),
    _first(special.chdtrc,    (above_half, above_half), label="v"),
    _first(special.gdtr,      (above_half, above_half), settings=((0, 1.3),), label="b"),
    _first(special.gdtrc,     (above_half, above_half), settings=((0, 0.7),), label="b"),
    _first(special.fdtr,      (above_half, above_half), settings=((2, 1.2),)),
    _first(special.fdtrc,     (above_half, above_half), settings=((2, 0.8),)),
    # the noncentral chi-squared and t functions, in x (or the probability) and the
    # noncentrality, their degrees of freedom held constant
    Case(_ncx2_pdf,         (above_half, above_half), settings=((1, 3.5),)),
    Case(_ncx2_sf,          (above_half, above_half), settings=((1, 3.5),)),
    Case(special.chndtr,    (above_half, above_half), settings=((1, 2.5),)),
    Case(_ncx2_isf,         (probability, above_half), settings=((1, 3.5),), alias=both_halves),
    Case(special.chndtrix,  (probability, above_half), settings=((1, 2.5),), alias=both_halves),
    # in the degrees of freedom too (a first derivative: the Poisson mixture's terms)
    _first(_ncx2_pdf,       (above_half,), settings=((0, 2.0), (2, 1.5)), label="df"),
    _first(_ncx2_sf,        (above_half, above_half), settings=((0, 1.5),), label="df"),
    _first(special.chndtr,  (above_half, above_half), settings=((2, 0.5),), label="df"),
    _first(_ncx2_isf,       (probability, above_half), settings=((2, 1.5),), label="df"),
    _first(special.chndtrix, (probability, above_half), settings=((2, 0.5),), label="df"),
    # the noncentral F functions, in x (or the probability) and the noncentrality
    Case(_ncf_pdf,          (above_half, above_half), settings=((1, 3.5), (2, 6.0))),
    Case(_ncf_sf,           (above_half, above_half), settings=((1, 2.5), (2, 7.0))),
    Case(special.ncfdtr,    (above_half, above_half), settings=((0, 3.5), (1, 6.0))),
    Case(_ncf_isf,          (probability, above_half), settings=((1, 3.5), (2, 6.0)),
         alias=both_halves),
    Case(special.ncfdtri,   (above_half, probability), settings=((0, 2.5), (1, 7.0)),
         alias=both_halves),
    Case(_nct_pdf,          (real, real),          settings=((1, 4.5),)),
    Case(_nct_sf,           (real, real),          settings=((1, 4.5),)),
    Case(special.nctdtr,    (real, real),          settings=((0, 5.5),)),
    Case(_nct_isf,          (probability, real),   settings=((1, 4.5),), alias=probability),
    Case(special.nctdtrit,  (real, probability),   settings=((0, 5.5),), alias=probability),
    # inverse distribution functions, in every argument
    # (their second derivatives in a degree of freedom are refused, as chdtr's and fdtr's)
    Case(special.chdtri,    (probability,), settings=((0, 2.5),)),
    _first(special.chdtri,  (above_half, probability), alias=both_halves),
    Case(special.fdtri,     (probability,), settings=((0, 3.0), (1, 5.0))),
    _first(special.fdtri,   (above_half, probability), settings=((1, 5.0),), alias=both_halves),
    _first(special.fdtri,   (above_half, probability), settings=((0, 3.0),), alias=both_halves),
    Case(_skewnorm_ppf,     (probability, real), settings=((1, 0.3), (2, 1.4)),
         alias=probability),
    Case(_skewnorm_ppf,     (real, above_half), settings=((0, 0.4), (3, 0.7)),
         alias=above_half),
    # (the quantiles' partials in loc and scale are _skewnorm_ppf's; _invgauss_ppf's in q
    # _invgauss_isf's but for the sign)
    Case(_skewnorm_isf,     (probability, real), settings=((1, -0.2), (2, 0.8)),
         alias=probability),
    Case(_invgauss_ppf,     (above_half, above_half), settings=((0, 0.3),)),
    Case(_invgauss_isf,     (probability, above_half), settings=((2, 1.5),), alias=probability),
    Case(_scaled_exp1,      (positive,)),   # (invgauss.entropy's x e^x E_1(x))
    Case(special.struve,    (bessel_argument,),    settings=((0, 1.3),)),
    Case(special.struve,    (real,),               settings=((0, 2.0),)),
    # (at v = -5/2, a pole of Γ(v + 3/2) in the derivative's last term, which is zero there)
    Case(special.struve,    (bessel_argument,),    settings=((0, -2.5),), label="pole"),
    Case(special.modstruve, (bessel_argument,),    settings=((0, 1.3),)),
    Case(special.hyp0f1,    (real,),               settings=((0, 1.7),)),
    Case(special.agm,       (above_half, above_half)),
    Case(special.wright_bessel,     (positive,),  settings=((0, 0.5), (1, 1.2))),
    Case(special.log_wright_bessel, (positive,),  settings=((0, 0.5), (1, 1.2))),
    Case(special.hyp2f1,    (Domain("hypergeometric_argument", -0.8, 0.8),),
         settings=((0, 0.7), (1, 1.3), (2, 2.1))),
    Case(_zeta,             (above_half,),         settings=((0, 2.5),)),
    Case(_zeta,             (above_one,),          settings=((1, 0.7),)),
    Case(_riemann_zeta,     (above_one,)),
    Case(special.zetac,     (above_one,)),
    Case(special.radian,    (real, real),          settings=((2, 30.0),)),
    Case(special.radian,    (real, real),          settings=((0, 10.0),)),
    Case(special.lpmv,             (open_unit_interval,), settings=((0, 1), (1, 3))),
    Case(special.lpmv,             (open_unit_interval,), settings=((0, 0), (1, 2.5))),
    Case(special.eval_legendre,    (open_unit_interval,), settings=((0, 3),)),
    Case(special.eval_legendre,    (open_unit_interval,), settings=((0, 2.5),)),
    Case(special.eval_legendre,    (open_unit_interval,), settings=((0, 0),)),
    Case(special.eval_chebyt,      (open_unit_interval,), settings=((0, 4),)),
    Case(special.eval_chebyu,      (open_unit_interval,), settings=((0, 3),)),
    Case(special.eval_chebyc,      (real,),               settings=((0, 3),)),
    Case(special.eval_chebys,      (real,),               settings=((0, 3),)),
    Case(special.eval_sh_legendre, (unit_interior,),      settings=((0, 3),)),
    Case(special.eval_sh_chebyt,   (unit_interior,),      settings=((0, 3),)),
    Case(special.eval_sh_chebyu,   (unit_interior,),      settings=((0, 3),)),
    Case(special.eval_laguerre,    (real,),               settings=((0, 3),)),
    Case(special.eval_hermite,     (real,),               settings=((0, 3),)),
    Case(special.eval_hermite,     (real,),               settings=((0, 0),)),
    Case(special.eval_hermitenorm, (real,),               settings=((0, 4),)),
    Case(special.eval_gegenbauer,  (open_unit_interval,), settings=((0, 3), (1, 0.8))),
    Case(special.eval_genlaguerre, (real,),               settings=((0, 3), (1, 0.8))),
    Case(special.eval_genlaguerre, (above_half, real),   settings=((0, 4),), label="alpha"),
    Case(special.eval_jacobi,      (open_unit_interval,), settings=((0, 3), (1, 0.8), (2, 0.3))),
]
# fmt: on


# Complex rows: every ufunc above that NumPy (or SciPy) computes for complex values and that
# mutad differentiates for them, on complex domains away from branch cuts and poles (the real
# rows' domains moved into the plane), and the binary ones again with one operand real. The
# scenarios are the real rows' (``scenarios_for``): a slice target (``FREE``) is complex, a
# Python float a Python complex; a mixed row runs those NumPy runs (``runs_on_numpy``: not an
# ``out=`` into its real operand). Left out, refused for complex values (ComplexInputError)
# (test_ufuncs.COMPLEX_UFUNCS_LEFT_OUT): scipy.special.ive, jve, yve (not complex-differentiable, their
# e^-|Re z| and e^-|Im z| scalings), rgamma and psi (their partials call functions with no complex loop),
# gamma and loggamma (their second derivatives call polygamma, which has none).
between_grid = Domain("between_grid", 0.075, 2.0, symmetric=True, spacing=0.05)
"""Real values 0.025 away from every real part ``complex_distinct`` draws: a mixed maximum
never meets a tie in NumPy's complex order."""

# fmt: off
COMPLEX_UFUNC_CASES = [
    Case(np.negative,    (complex_plane,),        label="complex"),
    Case(np.positive,    (complex_plane,),        label="complex"),
    Case(np.conjugate,   (complex_plane,),        label="complex"),   # not holomorphic
    Case(np.exp,         (complex_plane,),        label="complex"),
    Case(np.expm1,       (complex_plane,),        label="complex"),
    Case(np.exp2,        (complex_plane,),        label="complex"),
    Case(np.log,         (complex_right,),        label="complex"),
    Case(np.log1p,       (complex_right,),        label="complex"),
    Case(np.log2,        (complex_right,),        label="complex"),
    Case(np.log10,       (complex_right,),        label="complex"),
    Case(np.sqrt,        (complex_right,),        label="complex"),
    Case(np.square,      (complex_plane,),        label="complex"),
    Case(np.reciprocal,  (complex_nonzero,),      label="complex"),
    Case(np.absolute,    (complex_nonzero,),      label="complex"),   # real output, kink at 0
    Case(np.sign,        (complex_nonzero,),      label="complex"),   # z / |z|
    Case(np.sin,         (complex_plane,),        label="complex"),
    Case(np.cos,         (complex_plane,),        label="complex"),
    Case(np.tan,         (complex_small,),        label="complex"),
    Case(np.arcsin,      (complex_small,),        label="complex"),
    Case(np.arccos,      (complex_small,),        label="complex"),
    Case(np.arctan,      (complex_small,),        label="complex"),
    Case(np.sinh,        (complex_plane,),        label="complex"),
    Case(np.cosh,        (complex_plane,),        label="complex"),
    Case(np.tanh,        (complex_small,),        label="complex"),
    Case(np.arcsinh,     (complex_small,),        label="complex"),
    Case(np.arccosh,     (complex_right_of_one,), label="complex"),
    Case(np.arctanh,     (complex_small,),        label="complex"),

    Case(np.add,         (complex_plane, complex_plane),      label="complex"),
    Case(np.subtract,    (complex_plane, complex_plane),      label="complex"),
    Case(np.multiply,    (complex_plane, complex_plane),      label="complex"),
    Case(np.divide,      (complex_plane, complex_nonzero),    label="complex",
         alias=complex_nonzero),
    Case(np.power,       (complex_right, complex_small),      label="complex", alias=complex_right),
    Case(np.float_power, (complex_right, complex_small),      label="complex", alias=complex_right),
    Case(np.maximum,     (complex_distinct, complex_distinct), label="complex"),
    Case(np.minimum,     (complex_distinct, complex_distinct), label="complex"),
    Case(np.fmax,        (complex_distinct, complex_distinct), label="complex"),
    Case(np.fmin,        (complex_distinct, complex_distinct), label="complex"),

    Case(np.add,         (complex_plane, real),               label="complex-real"),
    Case(np.add,         (real, complex_plane),               label="real-complex"),
    Case(np.subtract,    (complex_plane, real),               label="complex-real"),
    Case(np.subtract,    (real, complex_plane),               label="real-complex"),
    Case(np.multiply,    (complex_plane, real),               label="complex-real"),
    Case(np.multiply,    (real, complex_plane),               label="real-complex"),
    Case(np.divide,      (complex_plane, nonzero),            label="complex-real"),
    Case(np.divide,      (real, complex_nonzero),             label="real-complex"),
    Case(np.power,       (complex_right, small),              label="complex-real"),
    Case(np.power,       (positive, complex_small),           label="real-complex"),
    Case(np.float_power, (positive, complex_small),           label="real-complex"),
    Case(np.maximum,     (complex_distinct, between_grid),    label="complex-real"),
    Case(np.minimum,     (between_grid, complex_distinct),    label="real-complex"),

    Case(special.erf,     (complex_small,),                   label="complex"),
    Case(special.erfc,    (complex_small,),                   label="complex"),
    Case(special.ndtr,    (complex_small,),                   label="complex"),
    Case(special.log_ndtr, (complex_small,),                  label="complex"),
    Case(special.xlogy,   (complex_plane, complex_right),     label="complex", alias=complex_right),
    Case(special.xlog1py, (complex_plane, complex_right),     label="complex", alias=complex_right),
    Case(special.jv,      (complex_right,),  settings=((0, 1.5),), label="complex"),
    Case(special.yv,      (complex_right,),  settings=((0, 0.7),), label="complex"),
    Case(special.iv,      (complex_right,),  settings=((0, 1.3),), label="complex"),
    Case(special.kv,      (complex_right,),  settings=((0, 0.4),), label="complex"),
    Case(special.kve,     (complex_right,),  settings=((0, 1.5),), label="complex"),
    Case(special.log1p,   (complex_right,),                   label="complex"),
    Case(special.expm1,   (complex_small,),                   label="complex"),
    Case(special.dawsn,   (complex_small,),                   label="complex"),
    Case(special.erfi,    (complex_small,),                   label="complex"),
    Case(special.wofz,    (complex_small,),                   label="complex"),
    Case(special.hankel1, (complex_right,),  settings=((0, 1.5),), label="complex"),
    Case(special.hankel2, (complex_right,),  settings=((0, 0.5),), label="complex"),
    Case(_lambertw,       (complex_right,),  settings=((1, 0), (2, 1e-8)), label="complex"),
    Case(_lambertw,       (complex_right,),  settings=((1, -1), (2, 1e-8)), label="complex k=-1"),
    Case(_lambertw,       (complex_small,),  settings=((1, 1), (2, 1e-8)), label="complex k=1"),
]
# fmt: on


def is_complex_case(case):
    return any(is_complex_domain(d) for d in case.domains)


def runs_on_numpy(case, scenario, rng):
    """Whether plain NumPy runs ``scenario`` of ``case`` (a mixed row's ``out=`` into its real
    operand is a casting error; its aliased scenarios are those of a complex row)."""
    if any(spec[-1] == "alias" for spec in scenario.arguments) and not all(
            is_complex_domain(d) for d in case.domains):
        return False
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error")
            scenario.make(case.program)(*sample_arguments(case, scenario, rng))
    except (TypeError, ValueError, Warning):
        return False
    return True


def case_id(case):
    """The pytest id of a case of any kind."""
    return case.id


def under_alternating_policies(cases, policies=("restore", "checkpoint")):
    """``(case, policy)`` parameters for a table's second-order test: each case under one
    policy, alternating along the table, so that each policy meets half of the cases (the
    first-order test runs every case under every policy)."""
    import pytest

    chosen = [(case, policies[i % len(policies)]) for i, case in enumerate(cases)]
    return [pytest.param(case, policy, id=f"{case.id}-{policy}") for case, policy in chosen]


def curved(function, complex_outputs=False):
    """``function`` with ``np.sin`` applied to each of its float outputs.

    For second derivatives (``check_grads(order=2)``): the gradient of a function that is
    linear in its outputs' cotangents hands every pullback a constant cotangent, so nested
    reverse mode would only run them on plain arrays; through the sine each cotangent depends on
    the arguments, and every pullback runs on cotangents the outer differentiation traces.
    ``complex_outputs``: complex outputs too (sin is complex-differentiable).
    """
    from mutad.core.trees import flatten

    def curved_function(*args):
        leaves, rebuild = flatten(function(*args))
        kinds = "fc" if complex_outputs else "f"
        # (the dtype asked first: isinstance asks a traced value's __class__, which is slow)
        return rebuild([np.sin(y) if getattr(y, "dtype", None) is not None
                        and y.dtype.kind in kinds or isinstance(y, float) or complex_outputs
                        and isinstance(y, complex) else y for y in leaves])

    curved_function.__name__ = f"sin_of_{getattr(function, '__name__', 'function')}"
    return curved_function


# ----------------------------------------------------------------------------------------------
# Cases of the other families: the tables are in their test files.


def normal(*shape):
    """A sampler of one standard normal array of ``shape``."""
    return lambda rng: rng.standard_normal(shape)


def complex_normal(*shape):
    """A sampler of one complex array of ``shape``, real and imaginary parts standard normal."""
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def standard_complex(rng, shape):
    """The complex domain of a case drawn by shape (``dtype=np.complex128``): real and
    imaginary parts standard normal."""
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


COMPLEX = dict(dtype=np.complex128, domains=(standard_complex,))
"""The options of a case drawn by shape that make it complex: ``Case(np.sum, **COMPLEX)``."""


def check_complex(case, arguments, policy, order=1):
    """``check_grads`` of a complex case: both modes at order 1; at order 2 with ``sin`` of
    every output, complex ones too (see ``curved``)."""
    import mutad

    if order == 1:
        mutad.check_grads(case, *arguments, policy=policy, modes=("rev", "fwd"))
    else:
        mutad.check_grads(curved(case, complex_outputs=True), *arguments, policy=policy, order=2)


def complexified(case):
    """``case`` on complex arrays: each float array argument gains an imaginary part; float64
    arguments that view one buffer view one complex buffer the same way."""

    def sampler(rng):
        buffers = {}

        def complex_of(a):
            if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
                return a
            base = a
            while isinstance(base.base, np.ndarray):
                base = base.base
            if a.dtype != np.float64 or not (base.flags.c_contiguous or base.flags.f_contiguous):
                return a + 1j * rng.standard_normal(a.shape)
            if id(base) not in buffers:
                buffers[id(base)] = base + 1j * rng.standard_normal(base.shape)  # same layout
            offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            return np.ndarray(a.shape, np.complex128, buffers[id(base)], 2 * offset,
                              tuple(2 * stride for stride in a.strides))

        return tuple(complex_of(a) for a in case.sample(rng))

    return Case.named(f"{case.name}-complex", case.function, sampler)


def fixed(value):
    """A sampler that always gives ``value`` as a float array."""
    return lambda rng: np.array(value, dtype=float)


def constant(value):
    """A sampler that always gives ``value`` as it is (a setting: an axis, a flag, a string)."""
    return lambda rng: value


def arguments(*samplers):
    """A sampler of an argument tuple, one argument per sampler."""
    return lambda rng: tuple(sample(rng) for sample in samplers)


AUGMENTED_OPERATORS = {
    np.add: operator.iadd,
    np.subtract: operator.isub,
    np.multiply: operator.imul,
    np.divide: operator.itruediv,
    np.power: operator.ipow,
    np.remainder: operator.imod,
}
"""The ufuncs Python's augmented assignments call: ``a += b`` is ``a = operator.iadd(a, b)``."""


def update(ufunc, a, b):
    """``a op= b`` through the operator when the ufunc has one, else ``ufunc(a, b, out=a)``."""
    augmented = AUGMENTED_OPERATORS.get(ufunc)
    if augmented is None:
        return ufunc(a, b, out=a)
    return augmented(a, b)


def update_subscript(ufunc, a, key, b):
    """``a[key] op= b`` exactly as Python runs it: read the item, update it, store it back."""
    item = a[key]
    item = update(ufunc, item, b)
    a[key] = item


# ----------------------------------------------------------------------------------------------
# Scenarios: how a program applies the ufunc. Each has a program ``make(ufunc) -> f`` and the
# argument shapes, each shape paired with the index of the case's domain it is drawn from
# ("alias" for the domain of a buffer feeding every operand). A shape ``float`` is a Python
# float argument.


@dataclass(frozen=True)
class Scenario:
    name: str
    make: object
    arguments: tuple


def _unary(name, arguments):
    def register(make):
        UNARY_SCENARIOS.append(Scenario(name, make, arguments))
        return make
    return register


def _binary(name, arguments):
    def register(make):
        BINARY_SCENARIOS.append(Scenario(name, make, arguments))
        return make
    return register


UNARY_SCENARIOS = []
BINARY_SCENARIOS = []

FREE = "free"
"""The domain of an argument that only receives values (a slice target): any real."""


@_unary("out_of_place", [((3, 4), 0)])
def _(ufunc):
    return lambda x: ufunc(x)


@_unary("out_into_zeros_like", [((3, 4), 0)])
def _(ufunc):
    def f(x):
        z = np.zeros_like(x)
        ufunc(x, out=z)
        return z
    return f


@_unary("in_place", [((3, 4), 0)])
def _(ufunc):
    def f(x):
        ufunc(x, out=x)
        return x
    return f


@_unary("in_place_on_transposed_argument", [("transposed", (4, 3), 0)])
def _(ufunc):
    def f(x):
        ufunc(x, out=x)
        return x
    return f


@_unary("slice_assignment", [((5,), FREE), ((5,), 0)])
def _(ufunc):
    def f(a, b):
        a[1:] = ufunc(b[:-1])
        return a
    return f


@_unary("out_into_strided_slice", [((6,), FREE), ((6,), 0)])
def _(ufunc):
    def f(a, b):
        ufunc(b[1::2], out=a[::2])
        return a
    return f


@_unary("element_assignment", [((3, 3), 0)])
def _(ufunc):
    def f(x):
        x[1, 2] = ufunc(x[2, 1])
        return x
    return f


@_unary("python_float", [(float, 0)])
def _(ufunc):
    return lambda s: ufunc(s)


@_unary("self_aliased_shifted", [((6,), 0)])
def _(ufunc):
    def f(a):
        ufunc(a[:-1], out=a[1:])
        return a
    return f


@_unary("self_aliased_reversed", [((6,), 0)])
def _(ufunc):
    def f(a):
        ufunc(a[::-1], out=a)
        return a
    return f


@_unary("self_aliased_other_stride", [((6,), 0)])
def _(ufunc):
    def f(a):
        ufunc(a[:3], out=a[::2])  # reads a[2] after a[::2] wrote it, unless NumPy buffers
        return a
    return f


@_unary("empty", [((0,), 0)])
def _(ufunc):
    return lambda x: ufunc(x)


@_unary("empty_in_place", [((0, 3), 0)])
def _(ufunc):
    def f(x):
        ufunc(x, out=x)
        return x
    return f


@_unary("empty_slice_of_a_buffer", [((4,), FREE), ((4,), 0)])
def _(ufunc):
    def f(a, b):  # the last step of a textbook loop: nothing left to update
        a[4:] = ufunc(b[4:])
        return a
    return f


@_binary("out_of_place", [((3, 4), 0), ((3, 4), 1)])
def _(ufunc):
    return lambda a, b: ufunc(a, b)


@_binary("out_into_zeros_like", [((3, 4), 0), ((3, 4), 1)])
def _(ufunc):
    def f(a, b):
        z = np.zeros_like(a)
        ufunc(a, b, out=z)
        return z
    return f


@_binary("in_place_first", [((3, 4), 0), ((3, 4), 1)])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


@_binary("in_place_second", [((3, 4), 0), ((3, 4), 1)])
def _(ufunc):
    def f(a, b):
        ufunc(a, b, out=b)
        return b
    return f


@_binary("in_place_on_transposed_argument", [("transposed", (4, 3), 0), ((4, 3), 1)])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


@_binary("into_strided_slice", [((6,), 0), ((6,), 1)])
def _(ufunc):
    def f(a, b):
        update_subscript(ufunc, a, slice(None, None, 2), b[1::2])
        return a
    return f


@_binary("slice_assignment", [((5,), FREE), ((5,), 0), ((5,), 1)])
def _(ufunc):
    def f(a, b, c):
        a[1:] = ufunc(b[:-1], c[1:])
        return a
    return f


@_binary("broadcast_outer", [((3, 1), 0), ((1, 4), 1)])
def _(ufunc):
    return lambda a, b: ufunc(a, b)


@_binary("broadcast_leading_axis", [((4,), 0), ((2, 3, 4), 1)])
def _(ufunc):
    return lambda a, b: ufunc(a, b)


@_binary("broadcast_row_in_place", [((3, 4), 0), ((4,), 1)])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


@_binary("broadcast_column_in_place", [((3, 4), 0), ((3, 1), 1)])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


@_binary("empty", [((0,), 0), ((0,), 1)])
def _(ufunc):
    return lambda a, b: ufunc(a, b)


@_binary("empty_broadcast", [((0, 1), 0), ((1, 4), 1)])
def _(ufunc):
    return lambda a, b: ufunc(a, b)


@_binary("empty_in_place", [((0, 3), 0), ((3,), 1)])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


@_binary("python_float_right", [((3, 4), 0), (float, 1)])
def _(ufunc):
    return lambda a, s: ufunc(a, s)


@_binary("python_float_left", [(float, 0), ((3, 4), 1)])
def _(ufunc):
    return lambda s, b: ufunc(s, b)


@_binary("python_float_in_place", [((3, 4), 0), (float, 1)])
def _(ufunc):
    def f(a, s):
        a = update(ufunc, a, s)
        return a
    return f


@_binary("self_operands", [((6,), "alias")])
def _(ufunc):
    return lambda a: ufunc(a, a)


@_binary("self_in_place", [((6,), "alias")])
def _(ufunc):
    def f(a):
        a = update(ufunc, a, a)
        return a
    return f


@_binary("self_shifted", [((6,), "alias")])
def _(ufunc):
    def f(a):
        update_subscript(ufunc, a, slice(1, None), a[:-1])
        return a
    return f


@_binary("self_reversed", [((6,), "alias")])
def _(ufunc):
    def f(a):
        update_subscript(ufunc, a, slice(None, None, -1), a)
        return a
    return f


@_binary("self_out_overlapping_inputs", [((6,), "alias")])
def _(ufunc):
    def f(a):
        ufunc(a[1:], a[:-1], out=a[:-1])
        return a
    return f


@_binary("self_transposed", [((3, 3), "alias")])
def _(ufunc):
    def f(a):
        a = update(ufunc, a, a.T)
        return a
    return f


@_binary("argument_passed_twice", [("twice", (6,), "alias")])
def _(ufunc):
    def f(a, b):
        a = update(ufunc, a, b)
        return a
    return f


ROW_SCENARIOS = {"out_of_place", "in_place", "in_place_first", "in_place_second",
                 "slice_assignment", "broadcast_outer", "python_float", "self_operands",
                 "self_in_place", "empty", "empty_broadcast"}
"""The scenarios that exercise a row itself (its partials out of place and in place, broadcast
and with aliased operands): those the rows of ``scipy.special`` run. The others exercise the
core's paths, which the rows of NumPy's ufuncs cover."""


def scenarios_for(case):
    """The scenarios ``case`` runs."""
    scenarios = UNARY_SCENARIOS if case.arity == 1 else BINARY_SCENARIOS
    if getattr(np, case.function.__name__, None) is case.function:
        return scenarios
    return [scenario for scenario in scenarios if scenario.name in ROW_SCENARIOS]


def sample_arguments(case, scenario, rng):
    """The arguments of ``scenario`` for ``case``: arrays (or Python floats) in their domains.

    Arguments drawn from a spaced domain are drawn together, so that their values are distinct
    across arguments too (no ``a == b`` at a kink of maximum, no ``a / b == 1`` in remainder).
    """
    specs = []
    for spec in scenario.arguments:
        layout = spec[0] if spec[0] in ("transposed", "twice") else None
        shape, which = spec[-2], spec[-1]
        if which == FREE:
            domain = complex_plane if is_complex_case(case) else real
        elif which == "alias":
            domain = case.alias_domain
        else:
            domain = case.domains[which]
        specs.append((layout, () if shape is float else shape, shape is float, domain))

    pools = {}
    for _, shape, _, domain in specs:
        pools[domain] = pools.get(domain, 0) + int(np.prod(shape, dtype=int))
    pools = {domain: iter(domain.sample(rng, (size,))) for domain, size in pools.items()}

    arguments = []
    for layout, shape, is_float, domain in specs:
        values = np.array([next(pools[domain]) for _ in range(int(np.prod(shape, dtype=int)))])
        if is_float:
            arguments.append(values[0].item())  # a Python float, or complex
        elif layout == "transposed":
            # A view whose buffer is not passed: its shadow is a transposed view of the buffer's.
            arguments.append(values.reshape(shape[::-1]).T)
        elif layout == "twice":
            array = values.reshape(shape)
            arguments.extend([array, array])
        else:
            arguments.append(values.reshape(shape))
    return arguments


def replays_as_traced(f, calls, argnums=0, replayed=None):
    """``f`` differentiated with ``replay=True`` on each argument tuple of ``calls`` gives the
    traced call's value and gradient bit for bit; returns the replaying function.
    ``replayed``: also that so many of the calls replayed (traced nothing)."""
    import mutad  # (the module imports no mutad at import time)

    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    tracing = mutad.value_and_grad(f, argnums=argnums)
    trace, traced = replaying.trace, []  # (a call that never traces is a replay)
    replaying.trace = lambda *args, **kwargs: (traced.append(1), trace(*args, **kwargs))[1]
    untraced = 0
    for args in calls:
        count = len(traced)
        (value, gradient), (traced_value, traced_gradient) = replaying(*args), tracing(*args)
        untraced += len(traced) == count
        assert np.asarray(value).tobytes() == np.asarray(traced_value).tobytes()
        pairs = zip(gradient, traced_gradient, strict=True) if type(gradient) is tuple \
            else [(gradient, traced_gradient)]
        for mine, expected in pairs:
            assert np.asarray(mine).tobytes() == np.asarray(expected).tobytes()
    assert replayed is None or untraced == replayed, \
        f"{untraced} calls replayed, not {replayed}: {replaying.reasons}"
    return replaying


def numpys_bits_in_every_mode(f, x):
    """``f(x)`` (an array function of float32 data, say) gives NumPy's dtype and bits in forward
    mode, and its sum's value NumPy's bits traced and replayed (twice each)."""
    import mutad  # (the module imports no mutad at import time)

    expected = np.asarray(f(x.copy()))
    y, _ = mutad.jvp(f, (x,), (np.ones_like(x),))
    assert np.asarray(y).dtype == expected.dtype
    assert np.asarray(y).tobytes() == expected.tobytes()

    def loss(v):
        return np.sum(f(v))

    for differentiate in (mutad.value_and_grad(loss), mutad.value_and_grad(loss, replay=True)):
        for _ in range(2):
            value, _ = differentiate(x)
            assert np.asarray(value).tobytes() == np.asarray(loss(x.copy())).tobytes()
    return expected


def followed_as_scipy(f, x, other, rtol=None, step=1e-4):
    """``f``, a SciPy call on ``x`` that mutad follows: its value SciPy's bit for bit, its
    derivatives in both modes those of central differences of ``step`` (``x`` unchanged), and
    a replay recorded at ``x`` and run at ``other`` the traced call's bits."""
    import mutad  # (the module imports no mutad at import time)

    expected = np.asarray(f(x.copy())).tobytes()
    assert np.asarray(mutad.value_and_gradient(f, x)[0]).tobytes() == expected
    mutad.check_grads(f, x, modes=("rev", "fwd"), rtol=rtol, step=step)
    replays_as_traced(f, [(x,), (other,), (x,)])
