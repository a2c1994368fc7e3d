"""How calls of decorated functions (``mutad/custom.py``) are dispatched: plain, reverse or
forward by the innermost level among the arguments, each call's state its own."""

import threading

import numpy as np

import mutad
from mutad.custom import dispatch


def test_a_plain_call_in_another_thread_does_not_reach_a_running_rule():
    # The rule notes what its own call of the function returned; a plain call of the same
    # function in another thread, while the rule runs, must not be taken for it (it was, when
    # the note lived on the shared decorated object: the gradient then failed).
    inside, proceed = threading.Event(), threading.Event()

    @mutad.inplace_adjoint(writes=("a",))
    def scale_(a, s):
        a *= s
        return a

    @scale_.rule
    def _scale_rule(a, s):
        scale_(a, s)
        if threading.current_thread() is main:
            inside.set()
            assert proceed.wait(10)

        def back(da, ds):
            a[...] /= s
            da *= s

        return back

    main = threading.current_thread()

    def elsewhere():
        assert inside.wait(10)
        scale_(np.ones(2), 3.0)
        proceed.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()

    def f(x):
        y = scale_(x, 2.0)
        return (y * y).sum()

    x = np.array([1.0, 2.0])
    before = x.tobytes()
    try:
        (g,) = mutad.gradient(f, x)
    finally:
        proceed.set()
        thread.join(10)
    np.testing.assert_allclose(g, 8.0 * np.array([1.0, 2.0]))
    assert x.tobytes() == before


def test_dispatch_follows_the_innermost_level():
    calls = []

    @mutad.adjoint
    def double(x):
        calls.append("plain")
        return 2.0 * x

    @double.rule
    def _double_rule(x):
        calls.append("reverse")
        return double(x), lambda dy: (2.0 * dy,)

    @double.jvp_rule
    def _double_jvp(tangents, x):
        calls.append("forward")
        return double(x), 2.0 * tangents[0]

    x = np.array([1.0, 3.0])
    assert dispatch(double, (x,), {}).tolist() == [2.0, 6.0] and calls == ["plain"]
    calls.clear()
    mutad.gradient(lambda x: double(x).sum(), x)
    assert calls == ["reverse", "plain"]
    calls.clear()
    mutad.jvp(lambda x: double(x), (x,), (np.ones(2),))
    assert calls == ["forward", "plain"]
    calls.clear()
    # A jvp inside a gradient: the dual is innermost, so forward mode takes the call (its
    # values are traced by the gradient, which records the plain function's operations).
    g = mutad.gradient(lambda x: mutad.jvp(double, (x,), (np.ones(2),))[1].sum(), x)[0]
    assert calls[0] == "forward" and g.tolist() == [0.0, 0.0]
    calls.clear()
    # A gradient inside a jvp: the traced array is innermost, so reverse mode takes it.
    mutad.jvp(lambda x: mutad.gradient(lambda z: (double(z) * z).sum(), x)[0],
              (x,), (np.ones(2),))
    assert calls[0] == "reverse"
