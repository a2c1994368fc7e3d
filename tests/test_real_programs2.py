"""Whole programs as research code writes them (classes holding state, work buffers reached by
a name, SciPy solvers called with a bound method), each of which once stopped or gave a wrong
answer: NumPy's value bit for bit, the derivative of that program against finite differences,
the caller's arrays back bit for bit and the function's own state left as NumPy's run leaves
it."""

import numpy as np
import pytest
from scipy.integrate import odeint, solve_ivp

import mutad
from mutad.testing import directional_fd


def _check(make, x, rtol=1e-5):
    """``make()`` -> (f, state): the value, the gradient, the argument and ``state`` (the
    arrays f writes besides its argument) as a plain run of a second ``make()`` leaves them."""
    f_plain, state_plain = make()
    expected = f_plain(x.copy())
    f, state = make()
    before = x.tobytes()
    value, (g,) = mutad.value_and_gradient(f, x)
    assert x.tobytes() == before
    assert np.asarray(value).tobytes() == np.asarray(expected).tobytes()
    for a, b in zip(state(), state_plain(), strict=True):
        assert a.tobytes() == b.tobytes()
    v = np.linspace(-1.0, 1.0, x.size)
    fd = directional_fd(lambda z: make()[0](z), (x,), (v,))
    assert np.isclose(g @ v, fd, rtol=rtol, atol=1e-8)
    again, (g2,) = mutad.value_and_gradient(f, x)  # the state the first call left: same program
    assert np.allclose(g2, g, rtol=1e-12) and again == value


class _Chain:
    """Oscillators whose right-hand side fills a work buffer the object holds and returns it."""

    def __init__(self, n, k):
        self.n, self.k = n, k
        self.dy = np.zeros(2 * n)

    def rhs(self, t, y):
        n = self.n
        self.dy[:n] = y[n:]
        self.dy[n:] = -self.k * y[:n]
        self.dy[n + 1:] += 0.5 * (y[:n - 1] - y[1:n])
        return self.dy

    def rhs_odeint(self, y, t):
        return self.rhs(t, y)


def _ivp_with_work_buffer():
    chain = _Chain(3, 1.5)

    def loss(y0):
        sol = solve_ivp(chain.rhs, (0.0, 1.0), y0, rtol=1e-10, atol=1e-12)
        return np.sum(sol.y[:, -1] ** 2)
    return loss, lambda: [chain.dy]


def _odeint_with_work_buffer():
    chain = _Chain(3, 1.5)

    def loss(y0):
        Y = odeint(chain.rhs_odeint, y0, [0.0, 0.5, 1.0], rtol=1e-10, atol=1e-12)
        return np.sum(Y[-1] ** 2) + np.sum(Y[:, 0])
    return loss, lambda: [chain.dy]


_DY = np.empty(3)


def _lorenz(t, y, s, r, b):
    _DY[0] = s * (y[1] - y[0])
    _DY[1] = y[0] * (r - y[2]) - y[1]
    _DY[2] = y[0] * y[1] - b * y[2]
    return _DY.copy()


def _lorenz_end(y0):
    sol = solve_ivp(_lorenz, (0.0, 0.3), y0, args=(10.0, 28.0, 8 / 3), rtol=1e-10, atol=1e-12)
    return np.sum(sol.y[:, -1])


@pytest.mark.parametrize("make", [_ivp_with_work_buffer, _odeint_with_work_buffer])
def test_ode_right_hand_side_writing_its_own_work_buffer(make):
    """A right-hand side that fills ``self.dy`` (a work buffer the object holds) and returns
    it: the buffer, written in the forward solve, is state mutad adopts and keeps read-only
    while it differentiates, and the adjoint, which evaluates the right-hand side again,
    stopped with "assignment destination is read-only" (solve_ivp's discrete adjoint) or
    refused the array written "besides its arguments" (odeint's continuous adjoint, a replayed
    gradient of the right-hand side). Those writes are now let through, the buffer's bytes put
    back after the adjoint."""
    _check(make, np.array([1.0, 0.5, -0.2, 0.0, 0.1, 0.0]), rtol=1e-4)


def test_ode_right_hand_side_writing_a_module_work_buffer():
    """The same with a module-level work buffer the right-hand side fills and copies."""
    f = _lorenz_end
    expected = f(np.array([1.0, 1.0, 1.0]))
    left = _DY.copy()
    x = np.array([1.0, 1.0, 1.0])
    value, (g,) = mutad.value_and_gradient(f, x)
    assert value == expected and _DY.tobytes() == left.tobytes()
    assert x.tobytes() == np.ones(3).tobytes()
    v = np.array([0.3, -0.5, 0.2])
    assert np.isclose(g @ v, directional_fd(f, (x,), (v,)), rtol=1e-4)
