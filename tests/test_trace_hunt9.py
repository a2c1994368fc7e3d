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
