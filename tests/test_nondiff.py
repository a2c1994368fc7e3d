"""Functions whose outputs carry no gradient (``mutad/rules/nondiff.py``, and SciPy's in
``mutad/scipy/special.py``): they run on plain values in both modes, and a program using them
is differentiated through its other operations."""

import numpy as np
import pytest
import scipy.special

import mutad

PROGRAMS = {
    "iscomplex": lambda x: x * (1.0 + np.iscomplex(x)) + np.sin(x) * np.iscomplex(x * x),
    "isreal": lambda x: np.sin(x) * np.isreal(x) + x * np.sum(np.isreal(2.0 * x)),
    "gammasgn": lambda x: x * scipy.special.gammasgn(x) + scipy.special.gammasgn(-x) * x * x,
}


@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_predicates_and_signs_are_plain_in_both_modes(program):
    x = np.array([0.7, -1.3, 2.2])
    mutad.check_grads(program, x)
    mutad.check_jvp(program, x)
    mutad.check_grads(program, x, order=2)
    mutad.check_grads(program, 0.4)
