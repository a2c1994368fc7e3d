"""NumPy programs that stopped with an error where NumPy gives a value: each checked as
``test_scipy_stops.check`` does (NumPy's value bit for bit, reverse mode, forward mode and a
replay against central differences, the caller's arrays unchanged)."""

import numpy as np
import pytest

from test_scipy_stops import check


# ----------------------------------------------------------------------------------------------
# np.convolve of 0-d operands, which NumPy takes as 1-element vectors

def _convolve_scalar_first(x):
    return np.convolve(x[0], x).sum() + np.convolve(x[0], x)[1] ** 2


def _convolve_scalar_second(x):
    return (np.convolve(x, 2.0 * x[1], mode="same") ** 2).sum()


def _convolve_scalars(x):
    return np.convolve(x[0], x[1], mode="valid")[0] + np.convolve(x[1], 3.0)[0]


@pytest.mark.parametrize("f", [_convolve_scalar_first, _convolve_scalar_second,
                               _convolve_scalars])
def test_convolve_of_0d_operands(f):
    check(f, np.array([0.3, -0.7, 1.1]))
