"""Derivatives of special functions to a few ulps of the exact derivative, where it is well
conditioned and its textbook formula cancels (dawsn' = 1 - 2x D(x), erfcx' = 2x erfcx(x) -
2/√π, the scaled Bessel functions' recurrences).

The references are constants, each computed once with mpmath at 80 digits from closed forms
of the derivatives, for example for Dawson's integral D = √π/2 exp(-x²) erfi(x):
D' = 1 - 2x D and D'' = -2D - 2x D'.
"""

import numpy as np
import pytest
import scipy.special as sc

import mutad


def ulps(ours, exact, dtype=np.float64):
    return abs(float(ours) - exact) / float(np.spacing(dtype(abs(exact))))


def derivatives(f, x):
    """First derivatives (reverse, forward) and second (forward over reverse, reverse over
    forward) of f at the scalar x."""
    reverse, = mutad.gradient(f, x)
    _, forward = mutad.jvp(f, (x,), (np.ones_like(x),))
    hessian = mutad.hessian(f, x)
    hvp = mutad.hvp(f, (x,), (np.ones_like(x),))
    return (reverse, forward), (hessian, np.asarray(hvp[0] if isinstance(hvp, tuple) else hvp))


# (x, f'(x), f''(x)): mpmath at 80 digits, D' = 1 - 2x D, D'' = -2D - 2x D' with
# D = sqrt(pi)/2 exp(-x²) erfi(x); erfcx' = 2x E - 2/sqrt(pi), erfcx'' = 2E + 2x erfcx' with
# E = exp(x²) erfc(x).
DAWSN = [
    (0.7, 0.28529431941707556, -1.4204201623023693),
    (2.5, -0.1154186108371774, 0.13092560985101606),
    (4.0, -0.03478400988804092, 0.019576076632317165),
    (6.29382, -0.013133541698063638, 0.004347540324841567),
    (7.9, -0.008212270873549466, 0.002132073362391781),
    (-6.3, -0.013106715681893099, -0.004334027801076364),
    (10.0, -0.005076943751970561, 0.001031180664214157),
]
ERFCX = [
    (0.7, -0.39207669480629526, 0.5029533019700686),
    (2.5, -0.07434734678979467, 0.04987599417331381),
    (4.0, -0.032383506095021455, 0.014930866489951141),
    (6.1577, -0.01432645909884695, 0.0044841893483548246),
    (7.9, -0.008831024690637856, 0.0021847646227161365),
    (12.0, -0.003877862738062271, 0.0006397363162930207),
]
# i0e, i1e: the scaled derivatives of I_v e^-|x|, (I_(v-1) + I_(v+1))/2 - sign(x) I_v times
# e^-|x| and the next, (I_(v-2) + 2 I_v + I_(v+2))/4 - sign(x) (I_(v-1) + I_(v+1)) + I_v, by
# mpmath's besseli at 80 digits.
I0E = [
    (5.0, -0.019568545664785997, 0.006342637940663521),
    (20.0, -0.0022740897015373564, 0.0001728682939102792),
    (35.4693, -0.0009545395692194177, 4.066490529280858e-05),
    (-30.0, 0.0012296158835897392, 6.202074722455996e-05),
    (49.9, -0.0005702213759053128, 1.722949718102182e-05),
]
I1E = [
    (3.0, -0.01943526356790907, 0.0016096787034987584),
    (20.0, -0.002101221407627077, 0.0001509583319292963),
    (35.2065, -0.0009238930943973153, 3.846942703478395e-05),
    (-30.0, -0.0011675951363651794, -5.680612465277664e-05),
    (49.9, -0.000552991878724291, 1.6361788056531182e-05),
]
# k0e, k1e, kve(2.5, x): (K_v - (K_(v-1) + K_(v+1))/2) e^x and the next,
# ((K_(v-2) + 2 K_v + K_(v+2))/4 - (K_(v-1) + K_(v+1)) + K_v) e^x, by mpmath's besselk at 60
# digits.
K0E = [
    (1.0, -0.49169040645636325, 0.6527726733505318),
    (10.0, -0.019134636159190085, 0.0028073847411987044),
    (47.6867, -0.0018883000424651803, 5.9095055160320446e-05),
]
K1E = [
    (1.0, -1.144463079806895, 2.1278438927196213),
    (10.0, -0.02194202090038879, 0.003494483054798062),
    (35.0, -0.0031222889063266747, 0.00013651308612073904),
]
KVE = [
    (1.0, -15.666426716443754, 47.93926575231789),
    (10.0, -0.040624104800461615, 0.008471612098632848),
    (40.0, -0.0030576450831140125, 0.0001297563941916421),
]


def kve_half_odd(x):
    return sc.kve(2.5, x)


CASES = [pytest.param(f, *case, id=f"{f.__name__}({case[0]})")
         for f, cases in ((sc.dawsn, DAWSN), (sc.erfcx, ERFCX), (sc.i0e, I0E), (sc.i1e, I1E),
                          (sc.k0e, K0E), (sc.k1e, K1E), (kve_half_odd, KVE))
         for case in cases]


@pytest.mark.parametrize("f, x, first, second", CASES)
def test_derivatives_to_a_few_ulps(f, x, first, second):
    """Where 1 - 2x D(x) and 2x erfcx(x) - 2/√π cancel (by 2x²: 220 and 198 ulps near 6.3
    from the functions' values rounded), the Taylor series about nodes and the asymptotic
    series give the derivative to rounding, and their own derivatives the second; where the
    scaled Bessel functions' recurrences do (by about 2x: 183 and 257 ulps near 35 for i0e
    and i1e, 395 for k0e at 47.7), the trapezoidal rule of an integral of one sign."""
    firsts, seconds = derivatives(lambda v: f(v), np.float64(x))
    for d in firsts:
        assert ulps(d, first) <= 2, (d, first)
    for d in seconds:
        assert ulps(d, second) <= 4, (d, second)


@pytest.mark.parametrize("f", [sc.dawsn, sc.erfcx], ids=["dawsn", "erfcx"])
@pytest.mark.parametrize("x, dawsn_first, erfcx_first", [
    (7.0, -0.010533645215308089, -0.011178406487371504),
    (100.0, -5.000750187565654e-05, -5.6410497625993184e-05),
    (1e10, -5e-21, -5.6418958354775626e-21)])
def test_float32_asymptotic_series_is_finite(f, x, dawsn_first, erfcx_first):
    """In float32 the asymptotic series' coefficients ((2k+1)!!, up to 1e58) overflowed: the
    derivative was -inf from 6.4 on. It is summed in doubles, and rounded to float32."""
    first = dawsn_first if f is sc.dawsn else erfcx_first
    x = np.float32(x)
    firsts, _ = derivatives(lambda v: f(v), x)
    for d in firsts:
        assert np.isfinite(d) and ulps(d, first, np.float32) <= 1, (d, first)
