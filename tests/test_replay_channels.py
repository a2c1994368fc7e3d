"""Every channel through which a value computed from the arguments, or read from what ``f``
reaches, can steer Python is guarded by a replay, or makes the signature traced: a replayed
call returns the gradient of the program this call runs. Each case calls the replaying
function on inputs that flip the decision, and compares every call with a fresh traced one,
bit for bit, with the caller's bytes intact (``replayed_like_traced``)."""

import collections
import functools
import json
import math
import warnings

import numpy as np
import pytest

import mutad
from test_replay import program_count, replayed_like_traced, same


def flips(*rows):
    return [(np.array(row, dtype=float),) for row in rows]


# ----------------------------------------------------------------------------------------------
# Python reading a traced value: formats, strings, hashes, methods of NumPy's scalars


CHANNELS = {
    "format": lambda x: (x * len(f"{x[0]:.0f}")).sum(),
    "%-format": lambda x: (x * len("%.0f" % x[0])).sum(),
    "str": lambda x: (x * len(str(x[0]))).sum(),
    "repr": lambda x: (x * len(repr(x[0]))).sum(),
    "repr of a Python number": lambda x: (x * len(repr(x[0].item()))).sum(),
    "str of a list": lambda x: (x * len(str(x.tolist()))).sum(),
    "json": lambda x: (x * len(json.dumps([x[0].item(), x[1]]))).sum(),
    "str of an array": lambda x: (x * len(str(x))).sum(),
    "hash as a dict key": lambda x: (x * {1.0: 10.0, 10.0: 3.0}.get(x[0], 0.0)).sum(),
    "in a set": lambda x: (x * (x[0] in {1.0})).sum(),
    "is_integer": lambda x: (x * (2.0 if x[0].is_integer() else 3.0)).sum(),
    "hex": lambda x: (x * len(x[0].hex())).sum(),
}


@pytest.mark.parametrize("name", CHANNELS)
def test_what_python_reads_of_a_traced_value_is_guarded(name):
    replayed_like_traced(CHANNELS[name], flips([1.0, 2.0], [10.0, 2.0], [100.5, 2.0],
                                               [1.0, 2.0]), replayed=False)


def test_printf_style_formatting_and_logging_write_the_digits():
    """"%.3f" % loss and logging's "loss %.4f" read a float of the value to write its
    digits, as format() does; complex() stays refused (it would cut the gradient)."""
    import logging

    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("mutad-test-formatting")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    seen = []

    def f(x):
        loss = (x * x).sum()
        seen.append("%.3f %8.2e" % (loss, x[0]))
        text = "%g"
        text %= x[1]
        seen.append(text)
        logger.info("loss %.4f", loss)
        return loss

    try:
        x = np.array([1.5, 2.0])
        assert mutad.gradient(f, x)[0].tolist() == [3.0, 4.0]
        assert mutad.jvp(f, (x,), (np.ones(2),))[1] == 7.0
    finally:
        logger.removeHandler(handler)
    assert seen == ["6.250 1.50e+00", "2"] * 2 and records == ["loss 6.2500"] * 2
    with pytest.raises(mutad.errors.ConversionError, match=r"by complex\(\)"):
        mutad.gradient(lambda x: complex((x * x).sum() * 1j).real * x[0], x)


def test_strings_and_hashes_are_numpys():
    seen = {}

    def f(x):
        seen.update(str=str(x[0]), format=f"{x[1]:.2f}", array=str(x), hash=hash(x[0]),
                    integer=x[0].is_integer(), hex=x[1].hex())
        return x.sum()

    x = np.array([1.0, 2.5])
    mutad.gradient(f, x)
    assert seen == dict(str=str(x[0]), format=f"{x[1]:.2f}", array=str(x), hash=hash(x[0]),
                        integer=True, hex=x[1].hex())
    with pytest.raises(TypeError, match="unhashable"):
        mutad.gradient(lambda x: hash(x) * x.sum(), x)


def reprs(x):
    y = x * 2.0
    z = x[:2] + 1j * x[2:]
    return [repr(x[0]), repr(x[0].item()), str(x.tolist()), repr(y), repr(x.sum()),
            repr(np.float32(1.0) * x[0]), repr(z[0]), repr(z[0].item()), str(z.tolist()),
            repr(x.reshape(2, 2)[0]), repr(x.sum(keepdims=True).reshape(())), f"{x.tolist()}"]


def test_json_of_traced_numbers_is_numpys():
    """Regression: json.dumps(x[0].item()) raised a TypeError (a traced value is no float):
    json writes Python's floats and NumPy's float64 scalars, and refuses other types."""
    x = np.array([1.5, 0.1, np.pi])
    expected, seen = json.dumps([x[0].item(), x[1], {"a": x.sum().item()}, x.tolist()]), []

    def f(x):
        seen.append(json.dumps([x[0].item(), x[1], {"a": x.sum().item()}, x.tolist()]))
        return x.sum()

    mutad.gradient(f, x)
    mutad.jvp(f, (x,), (np.ones(3),))
    assert seen == [expected] * 2
    with pytest.raises(TypeError, match="Object of type float32 is not JSON serializable"):
        mutad.gradient(lambda x: len(json.dumps(x[0].astype(np.float32))) * x.sum(), x)
    assert json.JSONEncoder.default.__module__ == "json.encoder"  # json's own again


def test_reprs_and_lists_of_traced_values_are_numpys():
    """Regression: repr() of a traced element was ``Traced(array(1.5))`` where NumPy's is
    ``np.float64(1.5)`` (of ``x[0].item()``, Python's ``1.5``), and so ``str(x.tolist())``
    differed from NumPy's string."""
    x = np.array([1.5, 2.25, 3.0, 0.1])
    expected, seen = reprs(x), []

    def f(x):
        seen.append(reprs(x))
        return x.sum()

    replaying = mutad.grad(f, replay=True)
    mutad.gradient(f, x)
    mutad.jvp(f, (x,), (np.ones(4),))
    for _ in range(2):
        replaying(x)
    assert seen == [expected] * len(seen) and len(seen) == 4
    assert x.tolist() == [1.5, 2.25, 3.0, 0.1]


INTEGERS = {
    "int": lambda x: (x * int(x[0] * 2.0)).sum(),
    "round": lambda x: (x * round(x[0])).sum(),
    "math.floor": lambda x: (x * math.floor(x[0])).sum(),
    "math.ceil": lambda x: (x * math.ceil(x[0])).sum(),
    "math.trunc": lambda x: (x * math.trunc(x[0])).sum(),
}


@pytest.mark.parametrize("name", INTEGERS)
def test_integers_of_a_traced_value_are_guarded(name):
    replayed_like_traced(INTEGERS[name], flips([1.0, 2.0], [1.2, 2.0], [2.6, 2.0], [1.0, 2.0]),
                         replayed=False)


def test_as_integer_ratio_of_a_traced_value_is_refused():
    with pytest.raises(mutad.errors.ConversionError):
        mutad.gradient(lambda x: x[0].as_integer_ratio()[0] * x.sum(), np.array([1.5]))


# ----------------------------------------------------------------------------------------------
# Functions whose results Python decides on: booleans, integers, and of lists of traced values


DECISIONS = {
    "allclose": lambda x: (x * 2).sum() if np.allclose(x, 1.0) else (x * 3).sum(),
    "array_equal": lambda x: (x * 2).sum() if np.array_equal(x, np.ones(2)) else (x * 3).sum(),
    "array_equiv": lambda x: (x * 2).sum() if np.array_equiv(x, 1.0) else (x * 3).sum(),
    "count_nonzero": lambda x: (x * np.count_nonzero(x > 1.5)).sum(),
    "lexsort": lambda x: (x[np.lexsort((x,))] * np.arange(2)).sum(),
    "argmin of a tuple": lambda x: (x * np.argmin((x[0], x[1]))).sum(),
    "argmax of a list": lambda x: (x * np.argmax([x[0], x[1]])).sum(),
    "argsort of a list": lambda x: (x * np.argsort([x[0], x[1]])).sum(),
    "nonzero of a list": lambda x: (x * len(np.nonzero([x[0] > 1.5, x[1] > 1.5])[0])).sum(),
    "searchsorted of a list": lambda x: (x * np.searchsorted([x[0], x[1]], 1.5)).sum(),
    "isclose of a list": lambda x: (x * np.isclose([x[0]], 1.0)).sum(),
    "argmax into an array": lambda x: _argmax_into(x),
}


def _argmax_into(x):
    k = np.zeros((), dtype=np.intp)
    np.argmax(x, out=k)  # the decision lands in k, which the program reads afterwards
    y = np.zeros(2)
    y[k] = x[k] ** 2
    return (y * x).sum()


@pytest.mark.parametrize("name", DECISIONS)
def test_integer_and_boolean_results_are_guarded(name):
    replayed_like_traced(DECISIONS[name], flips([1.0, 2.0], [1.0, 1.0], [3.0, 2.0],
                                                [1.0, 2.0]), replayed=False)


# ----------------------------------------------------------------------------------------------
# Exceptions and floating-point error handling


def test_control_flow_through_a_floating_point_exception_is_traced():
    def f(x):
        try:
            with np.errstate(divide="raise"):
                return (1.0 / x).sum()
        except FloatingPointError:
            return (x * x).sum()

    replaying = replayed_like_traced(f, flips([1.0, 2.0], [0.0, 2.0], [1.0, 2.0]), replayed=False)
    assert "np.errstate" in next(iter(replaying.reasons.values()))


def test_an_exception_a_replayed_step_raises_traces_the_call():
    def f(x):
        A = np.outer(x, x) + np.eye(2) * x[0]
        try:
            return np.linalg.cholesky(A).sum()
        except np.linalg.LinAlgError:
            return (x * x).sum()

    replayed_like_traced(f, flips([1.0, 1.0], [-3.0, 1.0], [1.0, 1.0], [-3.0, 1.0]), replayed=False)


def test_an_exception_caught_while_recording_traces_the_signature():
    def f(x):
        try:
            np.linalg.cholesky(np.outer(x, x) - np.eye(2))
        except np.linalg.LinAlgError:
            return (x * x).sum()
        return x.sum()

    replaying = replayed_like_traced(f, flips([1.0, 1.0], [3.0, 1.0]), replayed=False)
    assert "LinAlgError" in next(iter(replaying.reasons.values()))


def test_warnings_python_may_act_on_are_the_recorded_ones():
    def f(x):
        with warnings.catch_warnings(record=True) as heard:
            warnings.simplefilter("always")
            y = np.log(x)
        return (y * 2).sum() if heard else (y * 3).sum()

    with np.errstate(divide="warn"):
        replayed_like_traced(f, flips([1.0, 2.0], [0.0, 2.0], [1.0, 2.0], [0.0, 2.0]),
                             replayed=False)


def test_a_replay_warns_as_the_traced_call_did():
    def f(x):
        return np.where(x > 0, np.log(np.abs(x)), 0.0).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([0.0, 2.0])
    for _ in range(3):
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            replaying(x)
    assert program_count(replaying) == 1 and not replaying.reasons


def test_ignored_events_inside_f_replay():
    def f(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(x > 0, np.log(np.abs(x)), 0.0)
        return y.sum()

    replaying = replayed_like_traced(f, flips([0.0, 2.0], [1.0, 2.0], [0.0, 3.0], [1.0, 3.0]))
    assert program_count(replaying) == 1 and not replaying.reasons


def test_the_callers_error_handling_picks_the_program():
    f = lambda x: (1.0 / x).sum()  # noqa: E731
    replaying = mutad.grad(f, replay=True)
    with np.errstate(divide="ignore"):
        replaying(np.array([0.0, 1.0]))
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        replaying(np.array([0.0, 1.0]))


def log_unless_it_warns(x):
    try:
        y = np.log(x)
    except RuntimeWarning:
        y = x * 2.0
    return np.where(np.isfinite(y), y, 0.0).sum()


def test_the_callers_warnings_filters_pick_the_program():
    """Under warnings.simplefilter("error") a floating-point warning raises inside f, which
    may catch it: the replay of a program recorded under the default filters, which warns
    once its program has run, is not that call."""
    f = log_unless_it_warns
    x = np.array([0.0, 1.0, 2.0])
    replaying = mutad.value_and_grad(f, replay=True)
    for action in ("default", "default", "error", "default", "error", "error"):
        with warnings.catch_warnings(), np.errstate(divide="warn"):
            warnings.simplefilter(action)
            got, expected = replaying(x.copy()), mutad.value_and_grad(f)(x.copy())
        assert same(got[0], expected[0]) and same(got[1], expected[1])


def test_a_warnings_filter_replaced_in_place_picks_the_program():
    """The filters are told by their contents, not by the list that holds them: one replaced
    in place, the list as long as it was, picks another program."""
    f = log_unless_it_warns
    x = np.array([0.0, 1.0, 2.0])
    replaying = mutad.value_and_grad(f, replay=True)
    with warnings.catch_warnings(), np.errstate(divide="warn"):
        warnings.simplefilter("ignore")
        for action in ("ignore", "ignore", "error", "ignore", "error", "error"):
            warnings.filters[0] = (action, *warnings.filters[0][1:])
            got, expected = replaying(x.copy()), mutad.value_and_grad(f)(x.copy())
            assert same(got[0], expected[0]) and same(got[1], expected[1])


# ----------------------------------------------------------------------------------------------
# What f reaches besides its arguments


W = np.array([1.0])


def branch_on_global(x):
    if W[0] > 0:
        return (x * W[0]).sum()
    return (x * x * W[0]).sum()


def test_a_branch_on_a_global_array_changed_in_place_is_followed():
    replaying = mutad.grad(branch_on_global, replay=True)
    x = np.array([1.0, 2.0])
    try:
        for value in (1.0, -1.0, 2.0, -2.0):
            W[0] = value
            assert replaying(x).tolist() == mutad.grad(branch_on_global)(x).tolist()
    finally:
        W[0] = 1.0


def test_a_replaced_code_object_is_followed():
    def f(x):
        return (x * 2).sum()

    replaying = mutad.grad(f, replay=True)
    replaying(np.ones(2))
    replaying(np.ones(2))
    f.__code__ = (lambda x: (x * 3).sum()).__code__
    assert replaying(np.ones(2)).tolist() == [3.0, 3.0]


class Model:
    def __init__(self):
        self.w = np.ones(2)
        self.settings = {"scale": np.ones(1)}

    def loss(self, x):
        return self.helper(x) * self.settings["scale"][0]

    def helper(self, x):
        return (x * self.w).sum()


def test_a_bound_methods_object_is_followed():
    model = Model()
    replaying = mutad.grad(model.loss, replay=True)
    x = np.ones(2)
    replaying(x)
    replaying(x)
    model.w = np.full(2, 5.0)  # rebound, as an optimiser's step does
    assert replaying(x).tolist() == [5.0, 5.0]
    model.w *= 2  # changed in place
    assert replaying(x).tolist() == [10.0, 10.0]
    model.settings["scale"][0] = 3.0  # inside a container
    assert replaying(x).tolist() == [30.0, 30.0]


def test_a_closure_reshaped_in_place_is_followed():
    w = np.arange(4.0)

    def f(x):
        return (w[:2] * x).sum()

    replaying = mutad.grad(f, replay=True)
    replaying(np.ones(2))
    replaying(np.ones(2))
    w.shape = (2, 2)
    assert replaying(np.ones(2)).tolist() == mutad.grad(f)(np.ones(2)).tolist() == [2.0, 4.0]


def test_a_constant_reshaped_in_place_before_the_reverse_pass_is_refused():
    held = collections.deque([np.ones(4)])  # not a stand-in of the mode (allocation.Preexisting)

    def f(x):
        w = held[0]
        w.shape = (2, 2)
        y = (w @ x).sum()
        w.shape = (4,)
        return y

    for replay in (False, True):
        with pytest.raises(mutad.errors.ConstantModifiedError, match="x.shape = "):
            mutad.grad(f, replay=replay)(np.ones(2))
        assert held[0].shape == (4,) and held[0].tolist() == [1.0] * 4


def test_an_array_the_function_reaches_reshaped_in_place_is_the_callers_too():
    w = np.arange(4.0)

    def f(x, back):
        w.shape = (2, 2)  # the stand-in's view and the caller's array, as NumPy's
        y = (w @ x).sum()
        if back:
            w.shape = (4,)
        return y

    for replay in (False, True):
        assert mutad.grad(f, replay=replay)(np.ones(2), True).tolist() == [2.0, 4.0]
        assert w.shape == (4,)
    mutad.grad(f)(np.ones(2), False)
    assert w.shape == (2, 2) and w.ravel().tolist() == [0.0, 1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------------------------
# Crashes on the recording call, now NumPy's values


WRITES = {
    "assignment at argmax": lambda x: _assigned(x, lambda y: y.__setitem__(np.argmax(x), 0.0)),
    "increment at argmax": lambda x: _assigned(x, lambda y: y.__setitem__(
        x.argmax(), y[x.argmax()] + 1.0)),
    "at a 0-d integer array": lambda x: _assigned(x, lambda y: y.__setitem__(np.array(1), 0.0)),
    "~ of a mask": lambda x: (x * ~(x > 1.5)).sum(),
    "& and | of masks": lambda x: (x * ((x > 1.5) & (x < 2.5) | (x < 0.0))).sum(),
    "np.diag of a list": lambda x: np.diag([x[0], 1.0]).sum() * x[1],
}


def _assigned(x, write):
    y = x * 1.0
    write(y)
    return (y * y).sum()


@pytest.mark.parametrize("name", WRITES)
def test_decisions_written_into_arrays(name):
    replayed_like_traced(WRITES[name], flips([1.0, 3.0, 2.0], [3.0, 1.0, 2.0],
                                             [1.0, 2.0, 3.0]), replayed=False)
    x = np.array([1.0, 3.0, 2.0])
    mutad.check_grads(WRITES[name], x)


def test_the_attributes_of_an_object_with_slots_are_followed():
    import dataclasses

    @dataclasses.dataclass(slots=True)
    class Params:
        w: np.ndarray

        def loss(self, x):
            return (x * self.w).sum()

    params = Params(np.ones(2))
    replaying = mutad.grad(params.loss, replay=True)
    replaying(np.ones(2))
    replaying(np.ones(2))
    params.w = np.full(2, 4.0)
    assert replaying(np.ones(2)).tolist() == [4.0, 4.0]


def test_a_reach_that_changes_on_every_call_is_traced_and_says_why():
    class Counting:
        def __init__(self):
            self.w = np.ones(2)
            self.calls = 0

        def loss(self, x):
            self.calls += 1
            return (x * self.w).sum()

    model = Counting()
    replaying = mutad.grad(model.loss, replay=True)
    for _ in range(6):
        assert replaying(np.ones(2)).tolist() == [1.0, 1.0]
    assert model.calls == 6  # traced every call: f ran
    assert "int rebound" in replaying.reasons["what f reaches"]


@functools.lru_cache(maxsize=None)
def cached_weights(n):
    return np.linspace(1.0, 2.0, n)


def test_a_function_cached_between_calls_traces_the_call():
    """A cached result changed in place (or a cache cleared after a global changed) is what
    NumPy's next call reads; the replay cannot see into the cache, so it does not replay."""
    def f(x):
        y = x * cached_weights(x.shape[0])
        y += np.sin(x)
        return (y * y).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([0.3, 0.5, 0.7])
    try:
        for value in (None, None, 5.0, -1.0):
            if value is not None:
                cached_weights(3)[1] = value
            assert replaying(x).tolist() == mutad.grad(f)(x).tolist()
        assert "lru_cache" in replaying.reasons["what f reaches"]
    finally:
        cached_weights.cache_clear()


SCALE = [2.0]


class Energy:
    def __init__(self):
        self.w = np.array([1.0, 2.0, 3.0])

    def _energy(self, x, p):
        return (self.w * x * x).sum() * p * SCALE[0]

    energy = functools.partialmethod(_energy, p=3.0)


def test_a_partialmethods_function_is_followed():
    model = Energy()

    def f(x):
        y = x.copy()
        y *= 1.5
        return model.energy(y)

    replaying = mutad.grad(f, replay=True)
    x = np.array([0.3, 0.5, 0.7])
    try:
        for scale in (2.0, 2.0, 5.0, 5.0):
            SCALE[0] = scale
            assert replaying(x).tolist() == mutad.grad(f)(x).tolist()
        model.w[0] = 7.0
        assert replaying(x).tolist() == mutad.grad(f)(x).tolist()
    finally:
        SCALE[0] = 2.0


def test_a_rule_attached_again_is_followed():
    @mutad.adjoint
    def cube(x):
        return x ** 3

    @cube.rule
    def _(x):
        return x ** 3, lambda g: (g * 3 * x ** 2,)

    def f(x):
        y = x.copy()
        y *= 2.0
        return cube(y).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([0.3, 0.5, 0.7])
    replaying(x)
    replaying(x)

    @cube.rule
    def _(x):  # (a wrong rule: what matters is that the replay runs the rule attached now)
        return x ** 3, lambda g: (g * 30 * x ** 2,)

    assert replaying(x).tolist() == mutad.grad(f)(x).tolist()
    np.testing.assert_allclose(replaying(x), 240 * x ** 2)


# ----------------------------------------------------------------------------------------------
# Random generators that live between calls


GENERATOR = np.random.default_rng(0)


@pytest.mark.parametrize("draw", (
    lambda: np.random.rand(2),
    lambda: GENERATOR.standard_normal(2),
    lambda: np.full(2, __import__("random").random()),
), ids=("numpy's global", "a generator f reaches", "the random module"))
def test_a_random_draw_from_a_lasting_generator_traces_the_call(draw):
    replaying = mutad.grad(lambda x: (x * draw()).sum(), replay=True)
    grads = [replaying(np.ones(2)).tolist() for _ in range(3)]
    assert grads[0] != grads[1] != grads[2]  # each call drew its own numbers
    assert "random draw" in next(iter(replaying.reasons.values()))


def test_a_generator_seeded_inside_f_is_replayed():
    f = lambda x: (x * np.random.default_rng(1).standard_normal(2)).sum()  # noqa: E731
    replaying = replayed_like_traced(f, flips([1.0, 2.0], [3.0, 4.0], [1.0, 2.0]))
    assert program_count(replaying) == 1 and not replaying.reasons


def test_a_memory_mapped_global_changed_between_calls_is_followed(tmp_path):
    mapped = np.memmap(tmp_path / "w.dat", dtype=float, mode="w+", shape=(2,))
    mapped[:] = 1.0

    def f(x):
        if mapped[0] > 0:
            return (x * mapped).sum()
        return (x * x).sum()

    replaying = mutad.grad(f, replay=True)
    x = np.array([1.0, 2.0])
    replaying(x)
    replaying(x)
    mapped[0] = -1.0
    assert replaying(x).tolist() == mutad.grad(f)(x).tolist() == [2.0, 4.0]


def _follows_changes(f, change, values):
    """``f`` replayed on the same argument while ``change`` sets each of ``values`` in what
    it reaches: every call is the traced one."""
    replaying = mutad.grad(f, replay=True)
    x = np.array([1.0, 2.0, 3.0])
    for value in values:
        change(value)
        assert same(replaying(x), mutad.grad(f)(x))


def test_the_mask_and_fill_value_of_a_masked_global_are_followed():
    """A masked array's mask and fill value are attributes of the array, not its bytes."""
    masked = np.ma.array([1.0, 2.0, 3.0], mask=[False, False, False])
    f = lambda x: (x * masked.filled(masked.fill_value)).sum()  # noqa: E731

    def change(value):
        masked.mask[1] = value > 1.0
        masked.fill_value = value

    _follows_changes(f, change, (1.0, 1.0, 2.0, 1.0, 3.0))


def test_the_attributes_of_an_array_subclass_are_followed():
    class Scaled(np.ndarray):
        pass

    w = np.ones(3).view(Scaled)
    w.scale = 1.0
    f = lambda x: (x * np.asarray(w) * w.scale).sum()  # noqa: E731
    _follows_changes(f, lambda value: setattr(w, "scale", value), (1.0, 1.0, 2.0, 1.0))


def test_the_slots_of_a_librarys_object_are_followed():
    """SciPy's PPoly (a CubicSpline) holds its coefficients in __slots__, not a __dict__."""
    from scipy.interpolate import CubicSpline

    spline = CubicSpline([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 0.0, 1.0])
    f = lambda x: (x * spline(0.5)).sum()  # noqa: E731
    _follows_changes(f, lambda value: spline.c.__setitem__((0, 0), value), (1.0, 1.0, 2.0, 3.0))


def test_a_librarys_object_held_by_a_librarys_object_is_followed():
    """aslinearoperator(S) holds the sparse matrix S, whose values change in place."""
    import scipy.sparse
    import scipy.sparse.linalg

    S = scipy.sparse.csr_matrix(np.eye(3))
    operator = scipy.sparse.linalg.aslinearoperator(S)
    f = lambda x: (operator.matvec(x) * x).sum()  # noqa: E731
    _follows_changes(f, lambda value: S.data.__setitem__(0, value), (1.0, 1.0, 2.0, 3.0))


def test_the_library_objects_a_librarys_object_holds_in_a_tuple_are_followed():
    """A sum of LinearOperators holds its operands in a tuple (``args``)."""
    import scipy.sparse
    import scipy.sparse.linalg

    S = scipy.sparse.csr_matrix(np.eye(3))
    operator = (scipy.sparse.linalg.aslinearoperator(S)
                + scipy.sparse.linalg.aslinearoperator(scipy.sparse.eye(3, format="csr")))
    f = lambda x: (operator.matvec(x) * x).sum()  # noqa: E731
    _follows_changes(f, lambda value: S.data.__setitem__(0, value), (1.0, 1.0, 2.0, 3.0))
