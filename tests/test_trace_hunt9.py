"""Wrong answers found in traced, forward and second-order differentiation at special values;
every one failed before its fix."""

import numpy as np
import pytest

import mutad


# np.logaddexp's and np.logaddexp2's shares took the difference of their operands as 0 at every
# tie, so as to make inf - inf a tie: a constant 0 there, whose derivative is 0, so that the
# second derivative at a finite tie (x = 0 of logaddexp(x, 0.3 x)) lost the shares' slope.

@pytest.mark.parametrize("ufunc, scale", [(np.logaddexp, 1.0), (np.logaddexp2, np.log(2.0))])
def test_the_second_derivative_of_logaddexp_at_a_tie(ufunc, scale):
    x = np.array([0.0, 0.0])
    caller = x.copy()

    def f(v):
        return (ufunc(v, 0.3 * v) * np.array([1.0, 2.0])).sum()

    h = np.asarray(mutad.hessian(f, caller))
    assert caller.tobytes() == x.tobytes()
    # d/dx of the share 1 / (1 + b^(-0.7 x)) times 0.7, at 0: 0.7² ln b / 4
    np.testing.assert_allclose(np.diag(h), np.array([1.0, 2.0]) * 0.49 * scale / 4, rtol=1e-14)
    for tie in (np.inf, -np.inf):  # ties of infinities: half each, not NaN
        _, g = mutad.value_and_gradient(lambda v: ufunc(v, v * 1.0).sum(), np.array([tie, 1.0]))
        assert g[0].tolist() == [1.0, 1.0]


# An array made before the call and reached under two names (``V = W``, a list holding it twice,
# two attributes) got a stand-in per name, so ``V is W`` was False inside the differentiation
# and f took the other branch: the value 10.5 where NumPy gives 8.0, in every mode.

W_SHARED = np.array([1.0, 2.0, 3.0])
V_SHARED = W_SHARED
BOTH_SHARED = [W_SHARED, W_SHARED]


class _Holder:
    pass


HOLDER = _Holder()
HOLDER.a = HOLDER.b = W_SHARED


def _names_of_one_array(x):
    same = V_SHARED is W_SHARED and BOTH_SHARED[0] is BOTH_SHARED[1] and HOLDER.a is HOLDER.b
    return (x * W_SHARED).sum() if same else (3 * x).sum()


@pytest.mark.parametrize("mode", ["gradient", "jvp", "replay"])
def test_two_names_of_an_array_made_before_are_one_object(mode):
    x = np.array([1.0, 0.5, 2.0])
    caller, kept = x.copy(), W_SHARED.copy()
    expected = _names_of_one_array(x)
    assert expected == 8.0
    if mode == "jvp":
        value, tangent = mutad.jvp(_names_of_one_array, (caller,), (np.ones(3),))
        assert (value, tangent) == (expected, 6.0)
    else:
        g = mutad.value_and_grad(_names_of_one_array, replay=mode == "replay")
        for _ in range(3 if mode == "replay" else 1):
            value, grad = g(caller)
            assert value == expected
            assert grad.tolist() == W_SHARED.tolist()
    assert caller.tobytes() == x.tobytes() and W_SHARED.tobytes() == kept.tobytes()
    assert V_SHARED is W_SHARED and BOTH_SHARED[0] is W_SHARED and HOLDER.b is W_SHARED
