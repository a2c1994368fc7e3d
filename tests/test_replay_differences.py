"""The compiled reverse pass of a difference of two regions of one array (``d[1:] - d[:-1]``,
a stencil's): the second region's cotangent is added negated into its shadow, as the traced
engine's pullback of a short array adds it, with the traced gradient's bits: signed zeros,
infinities and NaNs of either sign and payload. (Subtracting it, ``shadow -= dy``, keeps
another NaN where the shadow holds one too: ``test_replay_hunt16``.)"""

import collections

import numpy as np
import pytest

from mutad.engines import blocks
from test_replay_stretches import MODES, replayed_like_traced


def stencil(q, p):
    for _ in range(2):
        padded = np.concatenate((np.zeros(1, q.dtype), q, np.zeros(1, q.dtype)))
        d = padded[1:] - padded[:-1]
        cube = d * d * d
        p += 0.25 * ((d[1:] - d[:-1]) + 0.1 * (cube[1:] - cube[:-1]))
        q += 0.5 * p
    return np.sum(q * q) + np.sum(p * p)


def _nan(bits):
    return np.array([bits], np.uint64).view(np.float64)[0]


def _with(a, index, value):
    a = a.copy()
    a[index] = value
    return a


def _calls(dtype):
    q = np.linspace(-1.0, 1.5, 9).astype(dtype)
    p = np.linspace(0.5, -0.7, 9).astype(dtype)
    flips = [(_with(q, 2, -0.0), _with(p, 3, 0.0)), (_with(q, 4, np.inf), p),
             (q, _with(p, 1, -np.inf)), (_with(q, 0, np.nan), p),
             (np.zeros_like(q), -np.zeros_like(p))]
    if dtype == np.float64:
        flips += [(_with(q, 3, _nan(0xFFF8000000000002)), _with(p, 5, _nan(0x7FF8000000000001)))]
    calls = [(q, p)] * 3  # recorded, replayed, then compiled
    for flip in flips:
        calls += [flip, (q, p), flip, (q, p)]
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("mode", ["default", "all-ignore"])
def test_a_difference_of_regions_adds_its_negated_cotangent_with_the_traced_bits(
        dtype, mode, capfd, monkeypatch):
    monkeypatch.setattr(blocks, "TEMPLATES", collections.OrderedDict())
    replayed_like_traced(stencil, _calls(dtype), MODES[mode], capfd)
