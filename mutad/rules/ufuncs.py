"""Elementwise ufuncs: partial derivatives and exact inverses.

Each row gives, per input, the derivative of the output (from the output ``y`` and the inputs);
the core multiplies it by the cotangent and sums over broadcast axes. The same row serves
``np.f(x)``, ``np.f(x, out=z)``, ``x += ...`` and slice targets through the core's one in-place
path. An inverse puts the overwritten target back in place of a checkpoint; it is listed only
where it is one correctly rounded operation. The core runs it on the values at hand before
each write and saves the elements it would not give back to within 2 ulps
(``writes._verify``). Because of that rounding, a partial that branches (which operand a
maximum took, a sign at 0) reads a decision taken when the ufunc ran, never its inputs as the
reverse pass restored them.
"""

import math

import numpy as np
import scipy.special

from ..core.devices import is_device, namespace
from ..core.errors import UnsupportedOperationError
from ..core.registry import (ONE, Applied, Constant, Normwise, Operand, complex_aware,
                             complex_ufunc, defcomposite, defjvp, defrule, elementwise,
                             holomorphic)
from ..core.views import memory
from ..engines.products import times
from ._helpers import as_float, logistic, sech_squared, sign_of, unbroadcast

LN2 = np.log(2.0)
LN10 = np.log(10.0)


_largest, _smallest = np.maximum.reduce, np.minimum.reduce


def _largest_magnitude(a):
    """The largest ``|a|`` over the elements of a real ``a`` (0 for none, NaN where one is), by
    reductions (the ufuncs' own: the core measures a long write a piece at a time), without
    temporaries."""
    return max(_largest(a, axis=None, initial=0.0), -_smallest(a, axis=None, initial=0.0))


def _absorbed(t, others):
    """``absorption``'s measures: the largest ``|t|`` and ``|o|``."""
    t, o = memory(t), memory(others[0])  # the magnitudes only: plain values, never recorded
    if t.dtype.kind == "c":
        t = np.abs(t)
    if type(o) is complex or getattr(o, "dtype", None) is not None and o.dtype.kind == "c":
        o = np.abs(o)
    return float(_largest_magnitude(t)), float(_largest_magnitude(o))


def _absorption_bound(measures):
    size_t, size_o = measures
    if not size_t:
        return 1.0
    with np.errstate(over="ignore"):  # an infinite growth forces a checkpoint: right
        return 1.0 + float(np.float64(size_o) / size_t)


def _absorbed_quietly(measures, dtype):
    """Whether ``t ± o`` raises no floating-point exception where the largest ``|t|`` and
    ``|o|`` are ``measures`` (``_absorbed``'s): both are finite (no invalid operation: no
    infinity or NaN among the operands) and their sum is at most half the largest float (no
    overflow); a sum never underflows (a result below the normal range is exact)."""
    size_t, size_o = measures  # (a NaN: finite no longer, the comparison false)
    return size_t + size_o <= _HALF_LARGEST[dtype]


_HALF_LARGEST = {np.dtype(t): float(np.finfo(t).max) / 2 for t in (np.float64, np.float32)}


absorption = Normwise(_absorbed, _absorption_bound, _absorbed_quietly)
"""How much undoing ``t ± o`` can amplify an error already in ``t``: rounding errors of about
eps |o| come back on a ``t`` that may be much smaller, so ``1 + max|o| / max|t|``. The inverse
itself is exact (verified per element), so this only matters for a later restoration of the
same buffer that is not exact (an in-place solve), which the tape checkpoints when the product
grows too large. An all-zero ``t`` comes back exactly. Norm-wise, computed by reductions."""


def _scaled(t, others):
    """``scaling``'s measures: the largest ``|o|``, and the smallest non-zero one, negated
    (-inf where there is none, or ``o`` is a number)."""
    o = memory(others[0])
    if np.ndim(o) == 0:
        return 0.0, -np.inf
    if o.dtype.kind != "f":  # magnitudes of complex numbers; integers, as floats
        o = np.abs(o, dtype=np.float64) if o.dtype.kind == "c" else o.astype(np.float64)
    # by reductions, not reductions where= a mask of the signs, which mispredict on mixed
    # signs (about 30 times slower); the core measures a long contiguous write a piece at a
    # time, in cache, and a write into a strided view whole (a temporary of 9 bytes per
    # element). Of an operand of one sign, as most pieces are, the extremes are the measures;
    # of another, those of its magnitudes, masked only where one is zero or NaN.
    if o.size:
        low, high = _smallest(o, axis=None), _largest(o, axis=None)  # (a NaN: NaN)
        if low > 0:
            return float(high), -float(low)
        if high < 0:
            return float(-low), float(high)
    magnitude = np.abs(o)
    largest = _largest(magnitude, axis=None, initial=0.0)  # (a NaN: NaN)
    smallest = _smallest(magnitude, axis=None, initial=np.inf)
    if not smallest > 0:  # zeros and NaNs are left out
        left_out = magnitude > 0
        np.logical_not(left_out, out=left_out)
        np.copyto(magnitude, np.inf, where=left_out)
        smallest = _smallest(magnitude, axis=None, initial=np.inf)
    return float(largest), -float(smallest)


def _scaling_bound(measures):
    largest, smallest = measures[0], -measures[1]
    if not np.isfinite(smallest):
        return 1.0  # no element left: every one is saved, o is all zeros, or a number
    with np.errstate(over="ignore"):  # an infinite or NaN o: inf or NaN, a checkpoint next
        return float(np.float64(largest) / smallest)


scaling = Normwise(_scaled, _scaling_bound)
"""How much undoing ``t * o`` or ``t / o`` can amplify an error already in ``t``, norm-wise
(as ``absorption``, so that the two compound in one measure): the ratio of the largest to
the smallest ``|o|``. A relative error per element would not grow, but it is not what a
later ``t ± o`` preserves: an element scaled down, then absorbed, comes back with its error
scaled up (a spectral step's decay of the high modes, then a reaction term). Elements of
``o`` that are zero are left out: the write saves those elements of ``t``."""


def bounded_where_normal(inverse):
    """Mark an inverse made of two correctly rounded operations whose relative errors do not
    grow (``t * o / o``, ``t / o * o``): it gives back every element within 2 units in the last
    place (relative error at most 2^-52) wherever the forward result is a normal float, so the
    core checks only that, not each element (``writes._verify``)."""
    inverse.bounded_where_normal = True
    return inverse


def negated(d):
    """``-d``, reusing ``d``'s memory when it is an array (0-d inputs give NumPy scalars)."""
    return np.negative(d, out=d) if type(d) is np.ndarray else -d


def minus_sin(x):
    return negated(np.sin(x))


def factored_one_minus_square(x):
    """1 - x², for real x as (1 - x)(1 + x), whose factors are exact where x nears ±1 and the
    difference cancels (arctanh's derivative at 1 - 1e-8: a relative error of 5e-10)."""
    return 1.0 - x * x if np.iscomplexobj(x) else (1.0 - x) * (1.0 + x)


def square_plus_one(x, sign):
    """``sign * x * x + 1``; for complex ``x``, its imaginary part's zero signed as that of
    ``2 sign Re(x) Im(x)``. NumPy's arcsin, arccos and arcsinh take a point of their cut (a real
    ``x`` beyond 1 in size, an imaginary one for arcsinh) from the side its zero part's sign
    says: the square root of this, whose imaginary zero the addition would make +0 either way,
    would give the derivative of the other side."""
    if not np.iscomplexobj(x):
        return factored_one_minus_square(x) if sign < 0 else 1.0 + x * x
    w = 1.0 + sign * (x * x)
    flipped = np.signbit(np.imag(w)) != np.signbit(sign * (np.real(x) * np.imag(x)))
    return np.where(flipped, np.conjugate(w), w)


def root_of_square_plus_one(x):
    """√(x² + 1), for real x by hypot: x² overflows beyond 1.34e154, where the root does not
    (arcsinh's derivative there is 1/|x|, not 0)."""
    return np.sqrt(square_plus_one(x, 1.0)) if np.iscomplexobj(x) else np.hypot(1.0, x)


# Decisions (``ElementwiseRule.decide``): what a partial branches on is decided from the inputs
# when the operation runs and kept, small, for the pullback, which may see the inputs restored
# by inversion: equal up to rounding, so a tie or a zero would not survive.

FIRST_SHARE = np.array([0.0, 1.0, 0.0, 0.5])
SECOND_SHARE = np.array([0.0, 0.0, 1.0, 0.5])
"""By ``winner`` code: the share of the cotangent each operand of a maximum or minimum takes.
A tie splits it in halves (the average of the one-sided derivatives); where a NaN made the
result, neither takes any (fmax and fmin pass over a NaN to the other operand)."""


def winner(first, second):
    """One byte per element: 1 where the first operand was taken, 2 the second, 3 both (a
    tie), 0 neither (a NaN)."""
    return np.add(first, np.multiply(second, 2, dtype=np.uint8), dtype=np.uint8)


def taken(wins):
    """The decision of an extreme's rows (np.maximum's): ``winner`` of ``wins(a, b)``, where
    the first operand is taken, and ``wins(b, a)``. NumPy compares complex values with a NaN
    part raising an invalid value, which NumPy's np.maximum of them does not: there silently."""
    def decide(a, b):
        if not (_real(a) and _real(b)) and (np.iscomplexobj(a) or np.iscomplexobj(b)):
            with np.errstate(invalid="ignore"):
                return winner(wins(a, b), wins(b, a))
        return winner(wins(a, b), wins(b, a))
    return decide


def _real(x):
    """Whether ``x`` is a real NumPy array or a Python float or int, asked first, quickly
    (``np.iscomplexobj``'s answer for them; every maximum the program computes asks it)."""
    kind = type(x)
    return kind is float or kind is int or kind is np.ndarray and x.dtype.kind != "c"


def _anywhere(mask):
    """``np.any(mask)``, by NumPy's own method of a NumPy array or bool, where np.any's Python
    layers cost as much as the comparisons that made ``mask`` (a decision of every hypot and
    power the program computes)."""
    kind = type(mask)
    return mask.any() if kind is np.ndarray or kind is np.bool_ else np.any(mask)


_ON_DEVICES = {}  # (id(table), namespace) -> the table in that device library's memory


def _table(table, won):
    """``table``, where the codes ``won`` live: a copy of it on their device if they are a
    device's (made once)."""
    if type(won) is np.ndarray or not is_device(won):
        return table
    xp = namespace(won)
    key = (id(table), xp)
    if key not in _ON_DEVICES:
        _ON_DEVICES[key] = xp.asarray(table)
    return _ON_DEVICES[key]


def first_share(y, a, b, won):
    return _table(FIRST_SHARE, won)[won]


def second_share(y, a, b, won):
    return _table(SECOND_SHARE, won)[won]


def origin(a, b):
    """Where hypot's arguments are both 0 (None if nowhere): its partials take 0 there, the
    subgradient np.linalg.norm takes at 0."""
    at_origin = np.logical_and(np.equal(a, 0), np.equal(b, 0))
    return at_origin if _anywhere(at_origin) else None


def over_hypot(x, y, at_origin):
    if at_origin is None:
        return x / y
    return np.where(at_origin, 0.0, x / np.where(at_origin, 1.0, y))


def arctan_derivative(x):
    """1 / (1 + x²), as (1/x)/x beyond |x| = 1e8, where 1 + x² rounds to x²: x * x overflows
    from 1.34e154 on, where the derivative is a float down to 4.9e-324 (and a normal one to
    1.34e154)."""
    large = np.abs(x) > 1e8
    far, near = np.where(large, x, 1.0), np.where(large, 0.0, x)
    return np.where(large, np.divide(1.0, far) / far, 1.0 / (1.0 + near * near))


def rounding_of_difference(a, b):
    """(a - b) - fl(a - b), exact (Knuth's two-sum) where both are finite, from the operands'
    plain values: a constant to an enclosing differentiation, for which the difference moves as
    its rounded value does. 0 where it is not finite."""
    a, b = memory(a), memory(b)
    xp = namespace(a if is_device(a) else b)  # (NumPy, or the device library of its memory)
    dtype = xp.result_type(a, b, 1.0)
    a, b = xp.asarray(a, dtype=dtype), xp.negative(xp.asarray(b, dtype=dtype))
    with np.errstate(invalid="ignore", over="ignore"):
        d = a + b
        b_part = d - a
        error = (a - (d - b_part)) + (b - b_part)
    return xp.where(xp.isfinite(error), error, 0.0)


def log_sum_shares(power, log_base):
    """The partials of ``log(power(a) + power(b))`` (np.logaddexp, np.logaddexp2): the shares
    ``1 / (1 + power(b - a))`` and ``1 / (1 + power(a - b))``, not ``power(a - y)``, which is
    NaN where ``y`` is infinite (by ``logistic``, which keeps the subnormal shares where
    ``power`` of the difference overflows). At a = +inf beside a finite b they are 1 and 0;
    at a = b (two equal infinities too) 1/2 each, as at every tie; NaN only beside a NaN.
    A small share, ≈ power(a - b), takes the rounding of the difference |a - b| times over
    (407 ulps at a - b = -534.42): it is carried, σ(d + δ) ≈ σ(d) (1 + δ log_base σ(-d))."""
    def share(a, b):
        with np.errstate(invalid="ignore"):  # inf - inf: a tie, set to 0 below
            d = np.subtract(a, b)
        # (only there: a - b at a finite tie is 0 already, and moves with a and b)
        s = logistic(np.where(np.logical_and(np.equal(a, b), np.isinf(a)), 0.0, d), power)
        return s * (1.0 + (log_base * rounding_of_difference(a, b)) * (1.0 - s))

    return (lambda y, a, b: share(a, b), lambda y, a, b: share(b, a))


def floored_quotient(a, b):
    """``a // b``, whose negation is np.remainder's partial by ``b``: a decision of mutad's, so
    it raises no floating-point event (NumPy's remainder of a zero divisor warns of an invalid
    value, not of a division by zero, and under ``np.errstate(divide="raise")`` returns)."""
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


def truncated_quotient(a, b):
    """``trunc(a / b)``, np.fmod's as ``floored_quotient`` is np.remainder's, as silent."""
    with np.errstate(all="ignore"):
        return np.trunc(np.divide(a, b))


def zero_base(a, b):
    """Where a power's base is 0 (None if nowhere), and where its exponent is 0 as well:
    d(a**b)/db is taken as 0 at a zero base, and d(a**b)/da is 0 where a**b is 0**0 = 1 (a
    constant), not 0 * inf."""
    zero = np.equal(a, 0)
    return (zero, np.logical_and(zero, np.equal(b, 0))) if _anywhere(zero) else None


def base_away_from(a, zero, at):
    """``a``, with 1 where ``zero[at]`` holds: a base whose terms there are multiplied by 0."""
    return a if zero is None else np.where(zero[at], 1.0, a)


# (np.power, not **: NumPy's scalars compute ** in their own math, its arrays by the ufunc;
# the partials take the same bits whether the engine holds a 0-d array or NumPy's scalar)
def power_by_base(y, a, b, zero):
    return b * np.power(base_away_from(a, zero, 1), b - 1.0)


def power_by_exponent(y, a, b, zero):
    return np.log(base_away_from(a, zero, 0)) * np.power(a, b)


def float_power_by_base(a, b, zero):
    return b * np.float_power(base_away_from(a, zero, 1), b - 1.0)


def float_power_by_exponent(a, b, zero):
    return np.log(base_away_from(a, zero, 0)) * np.float_power(a, b)


def minus(quotient):
    """The partial ``-quotient``, new memory: the record keeps ``quotient``."""
    return np.negative(quotient)


# fmt: off
# One row per ufunc: the partial derivative of the output with respect to each input, from
# (y, *inputs[, decision]), then by keyword what the partials read (uses=: "x", "y" or "xy";
# reads=: which inputs each partial reads), the exact inverse of a write into each input
# (inverse=), when that inverse is exact enough (is_safe=), how much it can amplify an error
# already in the target (growth=), and the decision the partials branch on (decide=), taken
# when the ufunc runs.
# ufunc           partials                                               keywords
elementwise(np.negative,   lambda y, x: -1.0, reads=((),), inverse=(lambda t, o: np.negative(t, out=t),))
elementwise(np.positive,   ONE, reads=((),),                                           inverse=(lambda t, o: None,))
elementwise(np.conjugate,  ONE, reads=((),),                                           inverse=(lambda t, o: None,))
elementwise(np.exp,        lambda y, x: y,                                uses="y")
elementwise(np.expm1,      Applied(np.exp))  # not y + 1, which is 0 where exp(x) < ε
elementwise(np.exp2,       lambda y, x: y * LN2,                          uses="y")
elementwise(np.log,        lambda y, x: np.divide(1.0, x))
elementwise(np.log1p,      lambda y, x: np.divide(1.0, 1.0 + x))
elementwise(np.log2,       lambda y, x: 1.0 / (x * LN2))
elementwise(np.log10,      lambda y, x: 1.0 / (x * LN10))
elementwise(np.sqrt,       lambda y, x: 0.5 / y,                          uses="y")
elementwise(np.cbrt,       lambda y, x: 1.0 / (3.0 * y * y),              uses="y")
elementwise(np.square,     lambda y, x: 2.0 * x)
elementwise(np.reciprocal, lambda y, x: -(y * y),                         uses="y")
elementwise(np.absolute,   lambda y, x, sign: as_float(sign),             reads=((),), decide=sign_of)
elementwise(np.fabs,       lambda y, x, sign: as_float(sign),             reads=((),), decide=sign_of)
elementwise(np.sin,        Applied(np.cos))
elementwise(np.cos,        Applied(minus_sin))
elementwise(np.tan,        lambda y, x: 1.0 + y * y,                      uses="y")
elementwise(np.arcsin,     lambda y, x: 1.0 / np.sqrt(square_plus_one(x, -1.0)))
elementwise(np.arccos,     lambda y, x: -1.0 / np.sqrt(square_plus_one(x, -1.0)))
elementwise(np.arctan,     lambda y, x: arctan_derivative(x))
elementwise(np.sinh,       Applied(np.cosh))
elementwise(np.cosh,       Applied(np.sinh))
elementwise(np.tanh,       Applied(sech_squared))
elementwise(np.arcsinh,    lambda y, x: 1.0 / root_of_square_plus_one(x))
# complex x too, its imaginary zero's sign kept: x + 1.0 would make -0 +0, x - -1.0 keeps it
elementwise(np.arccosh,    lambda y, x: 1.0 / (np.sqrt(x - 1.0) * np.sqrt(x - -1.0)))
elementwise(np.arctanh,    lambda y, x: np.divide(1.0, factored_one_minus_square(x)))
elementwise(np.deg2rad,    Constant(np.pi / 180.0),                       reads=((),))
elementwise(np.rad2deg,    Constant(180.0 / np.pi),                       reads=((),))
elementwise(np.radians,    Constant(np.pi / 180.0),                       reads=((),))
elementwise(np.degrees,    Constant(180.0 / np.pi),                       reads=((),))

elementwise(np.add,        ONE, ONE,                                      reads=((), ()),
            inverse=(lambda t, o: np.subtract(t, o[0], out=t),
                     lambda t, o: np.subtract(t, o[0], out=t)), growth=absorption)
elementwise(np.subtract,   ONE, Constant(-1.0),                           reads=((), ()),
            inverse=(lambda t, o: np.add(t, o[0], out=t),
                     lambda t, o: np.subtract(o[0], t, out=t)), growth=absorption)
elementwise(np.multiply,   Operand(1), Operand(0),                        reads=((1,), (0,)),
            inverse=(bounded_where_normal(lambda t, o: np.divide(t, o[0], out=t)),
                     bounded_where_normal(lambda t, o: np.divide(t, o[0], out=t))),
            growth=scaling)
# Partials by quotients, not squares: b * b overflows for |b| > 1e154 (and loses digits in the
# subnormals) where -a / b / b is the number.


def _by_dividend(y, a, b):
    return np.divide(1.0, b)


def _by_divisor(y, a, b):
    return -np.divide(a, b) / b


# For NumPy's float64 scalars, what a compiled replay computes in their place (``scalar``: the
# expression of the operands, and those that must be such scalars): NumPy's scalar division,
# the ufunc's bits at a tenth of its call's cost (a loop of divisions by a pivot)
setattr(_by_dividend, "scalar", ("1.0 / {1}", (1,)))
setattr(_by_divisor, "scalar", ("-({0} / {1}) / {1}", ()))  # (its own expression)
elementwise(np.divide,     _by_dividend, _by_divisor,                     reads=((1,), (0, 1)),
            inverse=(bounded_where_normal(lambda t, o: np.multiply(t, o[0], out=t)),),
            growth=scaling)
elementwise(np.power,      power_by_base, power_by_exponent, decide=zero_base)
elementwise(np.remainder,  ONE, lambda y, a, b, q: minus(q),             reads=((), ()),
            decide=floored_quotient)
elementwise(np.fmod,       ONE, lambda y, a, b, q: minus(q),             reads=((), ()),
            decide=truncated_quotient)
elementwise(np.maximum,    first_share, second_share,                     reads=((), ()),
            decide=taken(lambda a, b: np.greater_equal(a, b)))
elementwise(np.minimum,    first_share, second_share,                     reads=((), ()),
            decide=taken(lambda a, b: np.less_equal(a, b)))
elementwise(np.fmax,       first_share, second_share,                     reads=((), ()),
            decide=taken(lambda a, b: np.greater_equal(a, b) | np.isnan(b)))
elementwise(np.fmin,       first_share, second_share,                     reads=((), ()),
            decide=taken(lambda a, b: np.less_equal(a, b) | np.isnan(b)))
elementwise(np.hypot,      lambda y, a, b, at_origin: over_hypot(a, y, at_origin),
                           lambda y, a, b, at_origin: over_hypot(b, y, at_origin), uses="xy",
            decide=origin)
elementwise(np.arctan2,    lambda y, a, b: b / np.hypot(a, b) / np.hypot(a, b),
                           lambda y, a, b: -a / np.hypot(a, b) / np.hypot(a, b))
elementwise(np.logaddexp,  *log_sum_shares(np.exp, 1.0), uses="xy")
elementwise(np.float_power, lambda y, a, b, zero: float_power_by_base(a, b, zero),
                           lambda y, a, b, zero: float_power_by_exponent(a, b, zero), decide=zero_base)
elementwise(np.copysign,   lambda y, a, b, signs: as_float(signs), None, reads=((), ()),
            decide=lambda a, b: sign_of(a) * sign_of(np.copysign(1.0, b)))  # b: only its sign
elementwise(np.ldexp,      lambda y, x, i: np.ldexp(1.0, i), None)                  # i: an integer
elementwise(np.nextafter,  ONE, None)                                               # one ulp away
elementwise(np.logaddexp2, *log_sum_shares(np.exp2, math.log(2.0)), uses="xy")
# fmt: on


# The ufuncs that are not complex-differentiable, for complex operands (the rows above serve
# real ones): rules in mutad's convention, a cotangent being dL/dx + i dL/dy.


def conjugate(z, **kwargs):
    return np.conjugate(z, **kwargs), lambda dy: (np.conjugate(dy),)


def conjugate_jvp(tangents, z, **kwargs):
    return np.conjugate(z, **kwargs), np.conjugate(tangents[0])


def unit(z, magnitude):
    """``z / |z|``, 0 where ``z`` is 0: the direction in which |z| grows fastest, and at 0 the
    subgradient the real rows take there (the sign of 0 is 0). Each part is divided by the
    real magnitude: NumPy's complex division multiplies by ``1 / |z|``, which overflows where
    |z| is subnormal and makes the direction NaN."""
    zero = magnitude == 0
    safe = np.where(zero, 1.0, magnitude)
    return np.where(zero, 0.0, np.real(z) / safe + 1j * (np.imag(z) / safe))


def absolute(z, **kwargs):
    y = np.absolute(z, **kwargs)
    with np.errstate(all="ignore"):  # (the pullback's, taken now: inf / inf raises no event)
        direction = unit(z, y)
    # (``times``: a zero cotangent beside the NaN direction of an infinite z contributes zero)
    return y, lambda dy: (times(dy, direction),)


def absolute_jvp(tangents, z, **kwargs):
    y = np.absolute(z, **kwargs)
    return y, np.real(times(tangents[0], np.conjugate(unit(z, y))))


def sign(z, **kwargs):
    """``z / |z|``, which moves with ``z``'s direction only: a change ``dz`` moves it by
    ``(dz - y Re(conj(y) dz)) / |z|``, and a cotangent comes back by the same projection."""
    y = np.sign(z, **kwargs)
    with np.errstate(all="ignore"):  # (the pullback's, taken now: 1 / |z| may underflow)
        magnitude = np.absolute(z)
        scale = np.where(magnitude == 0, 0.0, 1.0 / np.where(magnitude == 0, 1.0, magnitude))
    return y, lambda dy: (scale * (dy - y * np.real(np.conjugate(y) * dy)),)


def sign_jvp(tangents, z, **kwargs):
    y, back = sign(z, **kwargs)
    return y, back(tangents[0])[0]  # the projection is self-adjoint


# The rows above whose partials are complex derivatives, for the ufuncs NumPy computes for
# complex values (facet complex); the extremes select an operand, in NumPy's complex order.
holomorphic(np.negative, np.positive, np.conjugate, np.exp, np.expm1, np.exp2, np.log,
            np.log1p, np.log2, np.log10, np.sqrt, np.square, np.reciprocal, np.sin, np.cos,
            np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh, np.arcsinh,
            np.arccosh, np.arctanh, np.add, np.subtract, np.multiply, np.divide, np.power,
            np.float_power, np.maximum, np.minimum, np.fmax, np.fmin)
complex_ufunc(np.conjugate, conjugate, conjugate_jvp)
complex_ufunc(np.absolute, absolute, absolute_jvp)
complex_ufunc(np.sign, sign, sign_jvp)


# Elementwise functions that NumPy writes in Python rather than as ufuncs: (co)tangent times
# derivative as the rows' (``times``: a zero one contributes zero beside a NaN derivative).


def near_zero(x):
    """Where ``sinc_derivative`` takes the series: decided when sinc runs."""
    return np.abs(x) < 1e-3


def sinc_derivative(x, near_zero):
    """d/dx sin(πx)/(πx) = (cos(πx) - sinc(x)) / x. Near 0, where that cancels, its Taylor
    series -π²x/3 + π⁴x³/30 (next term below 1e-15 for |x| < 1e-3), whose own derivative is
    right too, so second derivatives through this rule are right at 0."""
    safe = np.where(near_zero, 1.0, x)
    series = x * (-np.pi ** 2 / 3 + (np.pi ** 4 / 30) * x * x)
    return np.where(near_zero, series, (np.cos(np.pi * safe) - np.sinc(safe)) / safe)


@defrule(np.sinc)
def sinc(x):
    near = near_zero(x)
    return np.sinc(x), lambda dy: (times(dy, sinc_derivative(x, near)),)


@defjvp(np.sinc)
def sinc_jvp(tangents, x):
    (dx,) = tangents
    return np.sinc(x), times(dx, sinc_derivative(x, near_zero(x)))


holomorphic(np.sinc)  # the series and the quotient hold for complex x


@defrule(np.i0)
def i0(x):
    """NumPy's modified Bessel function of order 0 (its own Chebyshev series, real x alone);
    I0' = I1, SciPy's, itself differentiated to any order."""
    return np.i0(x), lambda dy: (times(dy, scipy.special.i1(x)),)


@defjvp(np.i0)
def i0_jvp(tangents, x):
    (dx,) = tangents
    return np.i0(x), times(dx, scipy.special.i1(x))


@defcomposite(np.sort_complex)
def sort_complex(a):
    """NumPy's: a sorted copy (complex values by their real parts, then their imaginary
    ones), as complex; of real values, the sort cast as NumPy casts it."""
    b = np.sort(a, axis=-1)
    if b.dtype.kind == "c":
        return b
    return b.astype(np.complex64 if b.dtype.char in "bhBH" else
                    np.clongdouble if b.dtype.char == "g" else np.complex128)


complex_aware(np.sort_complex)  # np.sort's own rule, which orders complex values as NumPy


@defcomposite(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NumPy's steps: a copy (or, with ``copy=False``, the array itself, written in place),
    whose NaNs and infinities (of the real and imaginary parts of a complex array) are
    replaced by masked ``np.copyto`` of constants, which carry no derivative."""
    if copy:
        x = np.copy(x)
    if np.dtype(x.dtype).kind not in "fc":
        return x[()] if np.ndim(x) == 0 else x
    dest = (np.real(x), np.imag(x)) if np.dtype(x.dtype).kind == "c" else (x,)
    info = np.finfo(np.real(x).dtype)
    maxf = info.max if posinf is None else posinf
    minf = info.min if neginf is None else neginf
    for d in dest:
        idx_nan, idx_posinf, idx_neginf = np.isnan(d), np.isposinf(d), np.isneginf(d)
        np.copyto(d, nan, where=idx_nan)
        np.copyto(d, maxf, where=idx_posinf)
        np.copyto(d, minf, where=idx_neginf)
    return x[()] if np.ndim(x) == 0 else x


complex_aware(np.nan_to_num)  # NumPy's steps, on the real and imaginary parts


# ----------------------------------------------------------------------------------------------
# NumPy's ufuncs of two outputs, computed by NumPy: modf's fraction moves with x (its integral
# part is piecewise constant), divmod's remainder as np.remainder's (its quotient is piecewise
# constant), frexp's mantissa as x 2^-e (its exponent is an integer).


def _two_outputs(name, kwargs):
    if kwargs:
        raise UnsupportedOperationError(
            f"{name}(..., {', '.join(kwargs)}=...) of differentiated values: call it without "
            "them and write the outputs where they belong.")


@defrule(np.modf)
def modf(x, **kwargs):
    _two_outputs("np.modf", kwargs)
    return np.modf(x), lambda dys: (dys[0],)


@defrule(np.divmod)
def divmod_(x1, x2, **kwargs):
    _two_outputs("np.divmod", kwargs)
    quotient, remainder = np.divmod(x1, x2)

    def back(dys):
        dr = dys[1]
        return (unbroadcast(dr, np.shape(x1)),
                unbroadcast(times(dr, np.negative(quotient)), np.shape(x2)))

    return (quotient, remainder), back


@defrule(np.frexp)
def frexp(x, **kwargs):
    _two_outputs("np.frexp", kwargs)
    mantissa, exponent = np.frexp(x)
    return (mantissa, exponent), lambda dys: (times(dys[0], np.ldexp(1.0, -exponent)),)


@defjvp(np.modf)
def modf_jvp(tangents, x, **kwargs):
    _two_outputs("np.modf", kwargs)
    (dx,) = tangents
    return np.modf(x), (dx, times(dx, 0.0))


@defjvp(np.divmod)
def divmod_jvp(tangents, x1, x2, **kwargs):
    _two_outputs("np.divmod", kwargs)
    quotient, remainder = np.divmod(x1, x2)
    d1, d2 = tangents
    terms = [t for t in (d1, None if d2 is None else times(d2, np.negative(quotient)))
             if t is not None]
    dr = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    return (quotient, remainder), (times(dr, 0.0), dr)


@defjvp(np.frexp)
def frexp_jvp(tangents, x, **kwargs):
    _two_outputs("np.frexp", kwargs)
    (dx,) = tangents
    mantissa, exponent = np.frexp(x)
    return (mantissa, exponent), (times(dx, np.ldexp(1.0, -exponent)), None)
