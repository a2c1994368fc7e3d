"""Wrong answers found by differential hunting: replayed calls compared with traced ones and
with NumPy, bit for bit, on inputs that change the recorded call's decisions, and the caller's
data."""

import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

import mutad
from mutad.errors import UnsupportedOperationError


def _outcome(call):
    """``call()``'s value, or its exception's type."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 (the outcome compared, whatever it is)
        return type(error)


def _same(a, b):
    """Bit for bit, types included, through tuples."""
    if type(a) is tuple:
        return type(b) is tuple and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, type):
        return a is b
    return type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype \
        and np.shape(a) == np.shape(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _replayed_as_traced(f, inputs):
    """Each input three times through one replaying function, each call's value and gradient
    (or error) against a traced call's, the value against NumPy's, and the caller's array left
    as it was."""
    replaying = mutad.value_and_grad(f, replay=True)
    for x in inputs:
        for _ in range(3):
            given = x.copy()
            got = _outcome(lambda: replaying(given))
            assert given.tobytes() == x.tobytes()
            traced = _outcome(lambda: mutad.value_and_grad(f)(x.copy()))
            assert _same(got, traced), (x, got, traced)
            if type(traced) is tuple:
                assert _same(traced[0], f(x.copy()))


# ----------------------------------------------------------------------------------------------
# np.unique's index, inverse and counts, and the first occurrences its values are gathered
# from, were computed from the plain values inside its rule, which a recording does not see:
# a replay kept the recorded call's (x[first] gathered at the recorded positions, the counts
# and inverse as constants), so a later call whose values repeat otherwise got another value
# and gradient than NumPy's and tracing's. They are a step of their own now, computed again
# on each replay, and the refusal of first occurrences that differ in their bits is guarded


def _counted(x):
    u, counts = np.unique(x, return_counts=True)
    return (u * counts).sum()


def _inverted(x):
    u, inverse = np.unique(x, return_inverse=True)
    return (u[inverse] * x).sum()


def _indexed(x):
    u, index = np.unique(x, return_index=True)
    return (u * index).sum()


def _all_of_them(x):
    u, index, inverse, counts = np.unique(x * x[0], True, True, True)
    return (u * counts).sum() + (u[inverse] * x).sum() + index.sum()


def _rows(x):
    u, inverse = np.unique(x.reshape(3, 2), axis=0, return_inverse=True)
    return (u * u).sum() + (u[inverse.ravel()] * x.reshape(3, 2)).sum()


def _unsorted(x):
    u, index = np.unique(x, sorted=False, return_index=True)
    return (u * index).sum()


_REPEATS = [np.array([1., 2., 2., 3., 0.5, 4.]), np.array([1., 2., 3., 4., 5., 6.]),
            np.array([4., 1., 1., 1., 3., 1.]), np.array([6., 5., 4., 3., 2., 1.]),
            np.array([2., 2., 2., 2., 2., 2.]), np.array([-1., 0., 3.5, 3.5, -1., 7.])]


@pytest.mark.parametrize("f", [_counted, _inverted, _indexed, _all_of_them, _rows, _unsorted])
def test_the_decisions_of_unique_are_the_calls_own(f):
    _replayed_as_traced(f, _REPEATS)


def test_a_replayed_unique_refuses_signed_zeros_as_tracing():
    """Recorded where the first occurrences hold NumPy's bits, a later call's 0.0 and -0.0 are
    refused as tracing refuses them."""
    with_zeros = np.array([1.0, 1.0, 0.0, -0.0, 0.0, 2.0])
    _replayed_as_traced(_counted, [_REPEATS[0], with_zeros, _REPEATS[2]])
    with pytest.raises(UnsupportedOperationError, match="differ in their bits"):
        mutad.value_and_grad(_counted, replay=True)(with_zeros)


@pytest.mark.parametrize("f", [_counted, _inverted, _all_of_them, _rows, _unsorted])
def test_unique_gradients_against_finite_differences(f):
    """Repeated elements that are copies of one value (``np.concatenate``) keep their counts
    under a perturbation: the derivative is the first occurrence's."""
    def of_copies(x):
        return f(np.concatenate([x, x[1:3]]))
    mutad.check_grads(of_copies, np.array([0.3, 1.2, -0.7, 2.5]))


# ----------------------------------------------------------------------------------------------
# The moments of scipy.stats' distributions (gamma.mean, t.var, beta.stats) test their
# parameters against the distribution's domain on the plain values and refuse those outside
# it (SciPy gives NaN there); that test was not a step, so a replay recorded on parameters
# inside the domain computed its formulas on a later call's parameters outside it: gamma.var
# of a negative scale gave 4.0 and a gradient where tracing refuses (SciPy: NaN). The test is
# a step of its own now (a value without derivative), its outcome a guarded decision


def _gamma_moments(p):
    return scipy.stats.gamma.mean(p[0]) + scipy.stats.gamma.var(p[0], scale=p[1])


def _t_deviation(p):
    return scipy.stats.t.std(p[2], loc=p[1])


def _beta_moments(p):
    return sum(scipy.stats.beta.stats(p[0], p[2], moments="mv"))


_MOMENTS = [_gamma_moments, _t_deviation, _beta_moments]


@pytest.mark.parametrize("f", _MOMENTS)
@pytest.mark.parametrize("outside", [[2.0, -1.0, 3.0], [-2.0, 1.0, 3.0], [2.0, 1.0, -1.0],
                                     [2.0, np.nan, 3.0]])
def test_moments_of_parameters_outside_the_domain_are_refused_as_tracing(f, outside):
    inside = np.array([2.0, 1.0, 3.0])
    _replayed_as_traced(f, [inside, np.array(outside), inside * 1.5])


@pytest.mark.parametrize("f", _MOMENTS)
def test_moments_against_finite_differences(f):
    mutad.check_grads(f, np.array([2.0, 1.5, 3.0]))


# ----------------------------------------------------------------------------------------------
# SciPy's warning of a catastrophic cancellation in its moments (scipy.stats.skew, variation,
# moment, tvar of nearly equal values) was decided on the plain values and issued by mutad's
# composition, outside any step: a replay never issued it (recorded on a call that warned or
# not), and tracing issued it at a line of mutad's, not the caller's. A step of its own issues
# it now, at the caller's line, which a replay runs again on its values


def _shape_statistics(x):
    return scipy.stats.skew(x) + scipy.stats.variation(x) + scipy.stats.tvar(x)


def _heard(call, x):
    """``call(x)``'s value (or error type) and its warnings' messages and places."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        value = _outcome(lambda: call(x.copy()))
    return value, [(str(w.message), w.filename, w.lineno) for w in heard]


def test_the_warning_of_a_cancellation_is_scipys_replayed_or_traced():
    replaying = mutad.value_and_grad(_shape_statistics, replay=True)
    nearly_equal = np.array([1e10, 1e10 + 1e-5, 1e10, 1e10])
    spread = np.array([1.0, 2.0, 3.0, 5.0])
    for x in (nearly_equal, nearly_equal, nearly_equal, spread, spread, spread, nearly_equal):
        replayed, replayed_heard = _heard(replaying, x)
        traced, traced_heard = _heard(mutad.value_and_grad(_shape_statistics), x)
        scipys, scipys_heard = _heard(_shape_statistics, x)
        assert _same(replayed, traced) and _same(traced[0], scipys)
        assert replayed_heard == traced_heard == scipys_heard
        assert len(scipys_heard) == (3 if x is nearly_equal else 0)


# ----------------------------------------------------------------------------------------------
# A warning an operation issued inside f's own ``warnings.catch_warnings()`` block (no record
# of its own: f's filters only) was taken as one f heard or silenced, which a replay does not
# issue again; but f's filters let it through to the caller, who saw NumPy's "divide by zero
# encountered in log" from the traced call and nothing from the second call on. Such a
# recording is refused now: the call is traced, and warns as NumPy's


def _logs_under_own_filters(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        y = np.log(x)
    return y.sum()


def _logs_in_a_bare_block(x):
    with warnings.catch_warnings():
        y = np.log(x)
    return (y * x).sum()


def _logs_silenced(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = np.log(x)
    return y.sum()


@pytest.mark.parametrize("f", [_logs_under_own_filters, _logs_in_a_bare_block, _logs_silenced,
                               _shape_statistics])
def test_warnings_f_lets_through_its_own_filters_reach_the_caller_replayed(f):
    replaying = mutad.value_and_grad(f, replay=True)
    zero = np.array([0.0, 1e10 + 1e-5, 1e10, 1e10])
    for x in (zero, zero, zero, zero + 1.0, zero):
        replayed, replayed_heard = _heard(replaying, x)
        traced, traced_heard = _heard(mutad.value_and_grad(f), x)
        assert _same(replayed, traced) and _same(traced[0], f(x.copy()))
        assert replayed_heard == traced_heard


# ----------------------------------------------------------------------------------------------
# np.histogramdd's (np.histogram2d's) bin edges and range given as constants the program
# computes (mutad.stop_gradient of the samples' own) were read as plain values inside its
# composition, which a recording does not see: a replay kept the recorded call's edges, so a
# later call's counts and edges were the recorded ones'. The recording is refused now (as for
# np.insert's positions), and the calls are traced


def _edges_of_the_samples(x):
    edges = mutad.stop_gradient(np.linspace(x.min(), x.max(), 3))
    hist, (found,) = np.histogramdd(x[:, None], bins=[edges], weights=x * x)
    return hist.sum() + found.sum()


def _range_of_the_samples(x):
    ends = mutad.stop_gradient(x)
    hist, (found,) = np.histogramdd(x[:, None], bins=2, range=[(ends[0], ends[2])],
                                    weights=x * x)
    return hist.sum() + found.sum()


def _edges_of_2d(x):
    edges = mutad.stop_gradient(np.linspace(x.min(), x.max(), 4))
    hist, first, second = np.histogram2d(x, 2.0 * x, bins=edges, weights=x * x)
    return hist.sum() + first.sum() + second.sum()


@pytest.mark.parametrize("f", [_edges_of_the_samples, _range_of_the_samples, _edges_of_2d])
def test_histogram_edges_the_program_computes_are_the_calls_own(f):
    _replayed_as_traced(f, [np.array([1.0, -2.0, 3.0]), np.array([1.0, 2.0, 5.0]),
                            np.array([-1.0, -2.0, 3.0])])


# ----------------------------------------------------------------------------------------------
# scipy.integrate's decisions on traced coordinates and limits were taken on their plain
# values, which a recording does not see: cumulative_simpson's refusal of coordinates that do
# not increase (a replay recorded on increasing ones integrated a later call's decreasing ones
# where SciPy raises), and quad(complex_func=True)'s order of the limits (a replay kept the
# recorded order: the integral's sign flipped). They are decisions on the traced values now,
# each a replay's guard


def _simpson_of_coordinates(p):
    x = np.cumsum(p)
    return scipy.integrate.cumulative_simpson(x ** 2, x=x).sum()


def _complex_quad(p):
    return np.real(scipy.integrate.quad(lambda t: (1 + 2j) * t * p[0], p[2], p[1],
                                        complex_func=True)[0])


@pytest.mark.parametrize("f, inputs", [
    (_simpson_of_coordinates, [np.array([1.0, 0.5, 2.0, 1.0]), np.array([1.0, -0.5, 2.0, 1.0])]),
    (_complex_quad, [np.array([1.0, 2.0, 0.0]), np.array([1.0, 0.0, 2.0]),
                     np.array([1.0, 1.0, 1.0])])])
def test_integrate_decisions_on_traced_coordinates_are_the_calls_own(f, inputs):
    _replayed_as_traced(f, inputs)


# ----------------------------------------------------------------------------------------------
# scipy.special's factorial (exact=False) took SciPy's value of the plain argument inside its
# stand-in, and comb, perm and factorial with exact=True SciPy's integer of the plain values:
# a replay kept the recorded call's value (factorial(7.5) answered as factorial(5.0)). SciPy's
# factorial is a step of its own now, computed again on every replay; an exact integer of
# values the program computes refuses the recording


def _factorials(p):
    return scipy.special.factorial(p, exact=False).sum() + scipy.special.factorial(p[0])


def _exact_counts(p):
    n = mutad.stop_gradient(p[:1]).astype(int)
    return p[1] * (scipy.special.comb(n[0], 2, exact=True) + scipy.special.perm(n[0], 2,
                                                                                  exact=True)
                   + scipy.special.factorial(n, exact=True).sum())


@pytest.mark.parametrize("f", [_factorials, _exact_counts])
def test_special_values_of_the_plain_arguments_are_the_calls_own(f):
    _replayed_as_traced(f, [np.array([5.0, 2.0]), np.array([7.5, 2.5]), np.array([-1.0, 2.0])])


# SciPy's value beside a traced composition (scipys_value) that is a plain array while a replay
# records was computed outside any step (a step's value is traced there): the recording is
# refused, so that a stand-in that takes SciPy's value of the plain arguments is traced
# rather than replayed with the recorded call's value


def _value_of_the_plain_arguments(x):
    from mutad.core.views import memory
    from mutad.scipy._adjoints import scipys_value
    return scipys_value(np.exp(memory(x)), np.exp(x)).sum()


def test_a_plain_scipy_value_beside_a_traced_composition_refuses_the_recording():
    _replayed_as_traced(_value_of_the_plain_arguments, [np.array([1.0, 2.0]),
                                                        np.array([0.5, 3.0])])
