"""The bindings a ``library_allocation()`` block makes in the ``numpy`` module: swapped in and
back exactly, however often blocks are entered, whatever the code rebinds around them."""

import sys
import threading

import numpy as np
import scipy.stats

import mutad
from mutad.core import allocation
from mutad.core.allocation import library_allocation
from mutad.core.registry import RULES


def _block_zeros():
    with library_allocation():
        return np.zeros


def test_blocks_bind_and_restore_numpys_own():
    own, r_ = np.zeros, np.r_
    for _ in range(3):  # (the second and later blocks reuse what the first computed)
        with library_allocation():
            following = np.zeros
            assert following is not own and following.__wrapped__ is own
            assert RULES[following] is RULES[own]
            assert np.r_ is not r_
        assert np.zeros is own and np.r_ is r_
        assert following not in RULES


def test_a_name_rebound_before_a_block_is_wrapped_and_restored():
    own = np.zeros

    def user_zeros(*args, **kwargs):
        return own(*args, **kwargs)

    _block_zeros()
    np.zeros = user_zeros
    try:
        assert _block_zeros().__wrapped__ is user_zeros
        assert np.zeros is user_zeros
    finally:
        np.zeros = own
    assert _block_zeros().__wrapped__ is own
    assert np.zeros is own


def test_a_name_rebound_in_a_block_keeps_its_new_binding():
    own, ones = np.zeros, np.ones

    def user_zeros(*args, **kwargs):
        return own(*args, **kwargs)

    _block_zeros()
    try:
        with library_allocation():
            np.zeros = user_zeros
        assert np.zeros is user_zeros and np.ones is ones  # (the others restored)
    finally:
        np.zeros = own
    with library_allocation():
        assert np.zeros.__wrapped__ is own
    assert np.zeros is own and np.ones is ones


def test_a_rule_changed_between_blocks_is_the_one_a_block_gives():
    own = np.zeros
    _block_zeros()
    rule = RULES[own]
    replacement = RULES[own] = type(rule)(own)
    try:
        with library_allocation():
            assert RULES[np.zeros] is replacement
    finally:
        RULES[own] = rule
    with library_allocation():
        assert RULES[np.zeros] is rule
    with library_allocation():  # (a rule made in the block is not kept for the next)
        RULES[own] = replacement
    try:
        with library_allocation():
            assert RULES[np.zeros] is replacement
    finally:
        RULES[own] = rule


def test_blocks_in_threads_restore_once_the_last_ends():
    own = np.zeros
    inside, release = threading.Event(), threading.Event()

    def other():
        with library_allocation():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    with library_allocation():
        pass
    assert np.zeros is not own  # (the other thread's block still runs)
    release.set()
    thread.join()
    assert np.zeros is own
    assert allocation._LIBRARY["depth"] == 0


def test_scipys_formulas_in_a_loop_differentiate_as_one_call():
    x, own = np.array([0.3, 1.2, 2.5]), np.zeros

    def loss(x):
        return sum(scipy.stats.genextreme.logpdf(x, 0.3 + 0.01 * i).sum() for i in range(5))

    (g,) = mutad.gradient(loss, x)
    def step(i):
        return lambda x: scipy.stats.genextreme.logpdf(x, 0.3 + 0.01 * i).sum()

    expected = sum(mutad.gradient(step(i), x)[0] for i in range(5))
    np.testing.assert_allclose(g, expected, rtol=1e-13)
    assert np.zeros is own


def test_another_thread_calls_scipys_own_functions_while_scipys_code_is_followed():
    """Regression: while a differentiation followed SciPy's code (``fixed_quad``, whose
    module's names the mode binds to their stand-ins meanwhile), another thread running no
    differentiation read ``scipy.integrate.trapezoid`` as mutad's stand-in, which reached
    itself through those names: RecursionError. It reads and calls SciPy's own function."""
    import scipy.integrate

    own, xs = scipy.integrate.trapezoid, np.linspace(0.0, 1.0, 9)
    expected = own(np.exp(xs), xs)
    inside, release, seen = threading.Event(), threading.Event(), []

    def waiting(t):
        inside.set()
        release.wait(10)
        return np.cos(t)

    def f(a):
        return scipy.integrate.fixed_quad(waiting, 0.0, a[0], n=3)[0] * a[1]

    thread = threading.Thread(target=lambda: seen.append(mutad.gradient(f, np.ones(2))))
    thread.start()
    try:
        inside.wait(10)
        assert scipy.integrate.trapezoid is own
        found = scipy.integrate.trapezoid(np.exp(xs), xs)
        swapped = vars(sys.modules["scipy.integrate._quadrature"])["trapezoid"]
        assert swapped(np.exp(xs), xs) == expected  # (a stand-in bound there meanwhile)
    finally:
        release.set()
        thread.join()
    assert found.tobytes() == expected.tobytes() and len(seen) == 1
