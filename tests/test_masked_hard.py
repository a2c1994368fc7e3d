"""Hard masks of masked arrays of differentiated values (``rules.masked``): ``harden_mask``,
``soften_mask``, ``hardmask`` and ``hard_mask=`` as NumPy's; a result's hardness is the one
NumPy gives it (the first masked operand's, a view's or copy's, soft for ``sum``, ``max`` and a
masked ``mean``), and writes into a hard-masked array keep its masked elements and never
unmask. Each is compared with NumPy's masked array (data, mask, ``hardmask``), its gradient
with finite differences, the caller's array bit for bit.
"""

import warnings

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.45, 0.9, -0.2])
MASK = [0, 1, 0, 0, 1, 0]
SOFT = np.ma.masked_array(np.array([0.5, 0.25, -1.5, 2.0, 0.75, 1.25]),
                          mask=[1, 0, 0, 0, 0, 1])


def hard(x):
    return np.ma.masked_array(x, mask=MASK).harden_mask()


def grid(x):
    return np.ma.masked_array(x.reshape(2, 3), mask=[[0, 1, 0], [0, 0, 0]]).harden_mask()


RESULTS = {
    "m + 1": lambda x: hard(x) + 1.0,
    "1 + m": lambda x: 1.0 + hard(x),
    "m + soft": lambda x: hard(x) + SOFT,
    "soft + m": lambda x: SOFT + hard(x),
    "-m": lambda x: -hard(x),
    "np.sin(m)": lambda x: np.sin(hard(x)),
    "np.add(2, m)": lambda x: np.add(2.0, hard(x)),
    "np.ma.sqrt": lambda x: np.ma.sqrt(hard(x)),
    "2 / m": lambda x: 2.0 / hard(x),
    "m ** 2": lambda x: hard(x) ** 2,
    "2 ** m": lambda x: 2.0 ** hard(x),
    "np.ma.power(soft, m)": lambda x: np.ma.power(SOFT, hard(x)),
    "m[1:]": lambda x: hard(x)[1:],
    "m[[0, 1]]": lambda x: hard(x)[[0, 1]],
    "ravel": lambda x: grid(x).ravel(),
    "reshape": lambda x: hard(x).reshape(3, 2),
    "T": lambda x: grid(x).T,
    "copy": lambda x: hard(x).copy(),
    "sum(0)": lambda x: grid(x).sum(0),
    "max(0)": lambda x: grid(x).max(0),
    "mean(0)": lambda x: grid(x).mean(0),
    "mean(0), no mask": lambda x: np.ma.masked_array(x.reshape(2, 3)).harden_mask().mean(0),
    "var(0)": lambda x: grid(x).var(0),
    "std(0), no mask": lambda x: np.ma.masked_array(x.reshape(2, 3)).harden_mask().std(0),
    "anom": lambda x: hard(x).anom(),
    "anom(1)": lambda x: grid(x).anom(1),
    "m < 0.5": lambda x: (hard(x) < 0.5) * 1.0,
    "masked_array(m)": lambda x: np.ma.masked_array(hard(x), mask=[1, 0, 0, 0, 0, 0]),
    "masked_array(m, copy=True)": lambda x: np.ma.masked_array(hard(x), copy=True),
    "masked_array(m, hard_mask=False)": lambda x: np.ma.masked_array(hard(x), hard_mask=False),
    "hard_mask=True": lambda x: np.ma.masked_array(x, mask=MASK, hard_mask=True),
    "masked_where": lambda x: np.ma.masked_where(x > 1.0, hard(x)),
    "masked_less": lambda x: np.ma.masked_less(hard(x), 0.0),
    "soften_mask": lambda x: hard(x).soften_mask() * 2.0,
    "zeros_like + m": lambda x: np.ma.zeros_like(hard(x)) + x,
}


def held(r, value=lambda a: a):
    """What a masked result holds: its data's bytes, its mask's and its hardness."""
    return (np.asarray(value(r.data)).tobytes(), np.ma.getmaskarray(r).tobytes()
            if isinstance(r, np.ma.MaskedArray) else np.broadcast_to(r.mask, r.shape).tobytes(),
            r.hardmask)


def loss_of(program, seen=None):
    def loss(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r = program(x)
        if seen is not None:
            seen["result"] = held(r, mutad.stop_gradient)
        return np.sum(r.filled(0.5) * np.arange(1.0, r.size + 1).reshape(r.shape))
    return loss


@pytest.mark.parametrize("name", RESULTS)
def test_a_results_hardness_is_numpys(name):
    """Regression: harden_mask raised MissingAttributeError, hard_mask=True was refused."""
    program = RESULTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = held(program(X.copy()))
    seen = {}
    x = X.copy()
    value, _ = mutad.value_and_gradient(loss_of(program, seen), x)
    assert seen["result"] == expected
    assert x.tobytes() == X.tobytes()
    assert np.asarray(value).tobytes() == np.asarray(loss_of(program)(X.copy())).tobytes()
    if "sqrt" not in name and "2 / m" not in name:  # (masked where x <= 0 or near 0)
        mutad.check_grads(loss_of(program), X.copy(), modes=("rev",))


def _written(x):
    m = hard(x * 2.0)
    m[1] = 5.0 * x[0]                 # a masked element: neither written nor unmasked
    m[0] = 3.0 * x[2]                 # an unmasked one: written
    m[2:5] = x[:3] ** 2               # a slice over a masked element
    m[3] = np.ma.masked
    return m.filled(0.25).sum() + m.data.sum() * 2 + m.count()


def _a_view_written(x):
    m = hard(x * 1.5)
    v = m[1:]                          # hard as m is; its data and mask are m's
    v[0] = x[5]
    v[:] = np.ma.masked_array(x[:5] * 3.0, mask=[0, 0, 1, 0, 0])
    return m.filled(0.5).sum() + m.data.sum() * 3 + v.count()


def _written_through_booleans(x):
    m = hard(x - 0.1)
    m[m.data > 0] = 7.0 * x[1]         # a plain boolean index: masked elements left
    n = hard(x + 0.2)
    n[n > 0.6] = np.ma.masked_array(x[0] * 2.0, mask=False)  # a masked boolean index
    return m.filled(0.5).sum() + m.data.sum() * 2 + n.data.sum() * 3 + n.count()


def _mask_set(x):
    m = hard(x)
    m.mask = np.array([1, 0, 0, 0, 0, 0], bool)  # joined, never unmasking
    m.mask = False
    s = m.filled(0.5).sum() + m.count()
    m.soften_mask()
    m[1] = x[3] * 4.0                  # soft again: unmasked
    m.mask = [0, 0, 0, 1, 0, 0]                   # soft: replaced
    return s + m.filled(0.25).sum() * 2 + m.count()


def _made_hard(x):
    m = np.ma.masked_array(x * 2.0, mask=MASK, hard_mask=True)
    c = m.copy()                       # hard too
    c[4] = x[0]
    m[0] = x[5] ** 2
    p = -m
    p[1] = 9.0
    return m.filled(0.5).sum() + c.data.sum() * 2 + p.data.sum() * 3


@pytest.mark.parametrize("program", [_written, _a_view_written, _written_through_booleans,
                                     _mask_set, _made_hard])
def test_writes_into_a_hard_mask_are_numpys(program):
    check(program, X.copy())


def test_the_reported_gradient():
    f = lambda x: np.ma.masked_array(x, mask=[0, 1, 0, 0]).harden_mask().sum()  # noqa: E731
    x = np.array([0.3, -0.7, 1.1, 0.4])
    (g,) = mutad.gradient(f, x)
    assert g.tolist() == [1.0, 0.0, 1.0, 1.0]
    assert x.tolist() == [0.3, -0.7, 1.1, 0.4]
