"""The traced ufunc short path (``operations.fast_ufunc``) decides from its operands' types and
dtypes whether a complex operand sends the call to the general path: each kind of operand that
could change that answer gives the general path's value and gradient, bit for bit (a replay's
first call records, and so takes the general path), and the derivative."""

import numpy as np
import pytest

import mutad
from cases import replays_as_traced

X = np.linspace(0.2, 1.1, 5)
C = np.array([1 + 2j, -0.5j, 3.0, 0.25 - 1j, 2j])

OPERANDS = {
    "complex128 array": C,
    "complex array, big-endian": C.astype(">c16"),
    "complex64 array": C.astype(np.complex64),
    "Python complex": 1.5 - 2j,
    "NumPy complex scalar": np.complex128(0.5 + 1j),
    "list of complex": [1j, 2.0, -1 + 1j, 0.5, 3j],
    "float64 array": C.real.copy(),
    "float array, big-endian": C.imag.astype(">f8"),
    "float32 array": C.imag.astype(np.float32),
    "int array": np.arange(1, 6),
    "Python float": 2.5,
    "Python int": 3,
    "list of floats": [1.0, 2.0, -1.0, 0.5, 3.0],
}


@pytest.mark.parametrize("name", list(OPERANDS))
@pytest.mark.parametrize("ufunc", [np.multiply, np.add])
@pytest.mark.parametrize("first", [True, False])
def test_an_operand_of_any_kind_gives_the_general_paths_bits(name, ufunc, first):
    c = OPERANDS[name]

    def loss(x):
        y = ufunc(x, c) if first else ufunc(c, x)
        return np.sum(np.abs(np.sin(y)) ** 2)

    replays_as_traced(loss, [(X.copy(),), (X + 0.1,)])
    mutad.check_grads(loss, X.copy(), modes=("rev",))
