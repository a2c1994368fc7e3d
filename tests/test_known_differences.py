"""Behaviours where a differentiated program once differed from NumPy's and SciPy's own, each
compared with the same program run on plain NumPy/SciPy objects: a masked result's fill value,
the types users see of reductions and elements, values standing for Python floats, the
warnings of scalar powers, SciPy's sparse formats, and the warnings of composite statistics.
"""

import operator
import warnings

import numpy as np
import pytest

import mutad

# ----------------------------------------------------------------------------------------------
# A masked result's fill value and hardness: the first masked operand's (``_update_from``),
# whether that operand is NumPy's masked array or one mutad follows.

MASKED_OPERATIONS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "**": operator.pow, "<": operator.lt, "==": operator.eq, "np.add": np.add,
    "np.divide": np.divide, "np.arctan2": np.arctan2, "np.ma.multiply": np.ma.multiply,
    "np.ma.divide": np.ma.divide, "np.ma.power": np.ma.power,
}


def _masked(data, fill):
    return np.ma.masked_array(data, mask=[0, 1, 0], fill_value=fill, hard_mask=fill == 7.0)


@pytest.mark.parametrize("name", MASKED_OPERATIONS)
@pytest.mark.parametrize("fills", [(None, 5.0), (7.0, None), (7.0, 5.0), (7.0, 0.0), (0.0, 5.0)])
@pytest.mark.parametrize("followed_first", [False, True])
def test_masked_result_takes_first_masked_operands_fill_value(name, fills, followed_first):
    op = MASKED_OPERATIONS[name]
    y = np.array([2.0, 0.5, 4.0])

    def apply(plain, followed):
        return op(followed, plain) if followed_first else op(plain, followed)

    plain = _masked(np.array([1.0, 2.0, 3.0]), fills[0])
    with np.errstate(all="ignore"):
        want = apply(plain, _masked(y.copy(), fills[1]))
    plain = _masked(np.array([1.0, 2.0, 3.0]), fills[0])
    seen = []

    def f(y):
        with np.errstate(all="ignore"):
            r = apply(plain, _masked(y, fills[1]))
        seen.append((r._fill_value is None, r.fill_value, type(r.fill_value), r.hardmask))
        return np.sum(r.filled(0.0)) if r.dtype.kind == "f" else np.sum(y)

    mutad.gradient(f, y.copy())
    assert plain._fill_value is None or fills[0] is not None  # (read without being set)
    assert seen == [(want._fill_value is None, want.fill_value, type(want.fill_value),
                     want.hardmask)]
