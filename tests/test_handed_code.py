"""Functions and objects of the user's handed to the differentiated function as arguments (a
model handed to the loss, ``loss(theta, model)``; a simulation object; a callable potential):
their code is followed as that of those the function reaches by a name, so that ``float()``
in their module and the work arrays they write (a module's global, an attribute) are the
mode's. They stopped: ``float()`` was Python's (a ConversionError), and the work arrays were
plain arrays mutad did not follow (an UntracedWriteError). Each gives NumPy's value bit for
bit, the derivative of central differences, and leaves the caller's arrays and the models'
work arrays as NumPy's one run leaves them."""

import functools

import numpy as np
import pytest

import mutad

# (a module of the models' own: no code of the tests' module binds its ``float``)
MODELS = """
W = np.zeros(4)


def model_float(theta):
    return float(np.sum(theta ** 2))


def model_work(theta):
    W[:] = theta * 2
    return np.sum(W ** 2)


def model_scaled(scale, theta):
    return float(np.sum(scale * theta ** 3))


class Simulation:
    def __init__(self):
        self.buf = np.zeros(4)

    def run(self, theta):
        self.buf[:] = np.sin(theta)
        return float(self.buf.sum())


class Potential:
    def __call__(self, theta):
        return float(np.sum(np.cos(theta))) * 2
"""


def _models():
    namespace = {"np": np, "__name__": "handed_models"}
    exec(MODELS, namespace)  # noqa: S102 (the test's own source)
    return namespace


def loss(theta, model):
    return model(theta) * 1.5


def loss_of_an_object(theta, simulation):
    return simulation.run(theta) + np.sum(simulation.buf ** 2)


def loss_of_terms(theta, terms):
    return sum(term(theta) for term in terms["terms"])


# (the last entry: whether the models' work arrays come back as they were, as the arrays of
# every argument do, an object's attributes too; otherwise as NumPy's run leaves them, as
# those of what the function reaches by a name, a bound method's object too)
HANDED = {
    "function_calling_float": (loss, lambda ns: ns["model_float"], False),
    "function_writing_a_global": (loss, lambda ns: ns["model_work"], False),
    "partial": (loss, lambda ns: functools.partial(ns["model_scaled"], 2.0), False),
    "bound_method": (loss, lambda ns: ns["Simulation"]().run, False),
    "callable_object": (loss, lambda ns: ns["Potential"](), True),
    "object_whose_method_f_calls": (loss_of_an_object, lambda ns: ns["Simulation"](), True),
    "objects_in_a_list_in_a_dict": (
        loss_of_terms, lambda ns: {"terms": [ns["Potential"](), ns["model_float"]]}, True),
}


def _state(handed, namespace):
    """The bytes of the models' work arrays: the module's global, the object's attribute."""
    owner = getattr(handed, "__self__", handed)
    return namespace["W"].tobytes(), getattr(owner, "buf", np.zeros(0)).tobytes()


@pytest.mark.parametrize("name", list(HANDED))
def test_code_handed_as_an_argument_is_followed(name):
    f, make, restored = HANDED[name]
    theta = np.array([0.3, -0.7, 1.1, 0.4])

    def plain(t):  # NumPy's run, on models of its own
        namespace = _models()
        handed = make(namespace)
        return f(t.copy(), handed), _state(handed, namespace)

    value, state = plain(theta)
    namespace = _models()
    handed = make(namespace)
    before, held = theta.tobytes(), _state(handed, namespace)
    got, g = mutad.value_and_gradient(f, theta, handed, argnums=0)
    assert theta.tobytes() == before
    assert np.asarray(got).tobytes() == np.asarray(value).tobytes()
    assert _state(handed, namespace) == (held if restored else state)
    h = 1e-6
    central = np.array([(plain(theta + h * e)[0] - plain(theta - h * e)[0]) / (2 * h)
                        for e in np.eye(theta.size)])
    np.testing.assert_allclose(g, central, rtol=1e-6, atol=1e-7)
    direction = np.cos(np.arange(theta.size))
    _, tangent = mutad.jvp(f, (theta, handed), (direction, None))
    np.testing.assert_allclose(tangent, central @ direction, rtol=1e-6, atol=1e-7)
    assert theta.tobytes() == before


def test_a_model_handed_by_keyword():
    namespace = _models()
    theta = np.array([0.3, -0.7, 1.1, 0.4])
    g = mutad.grad(lambda t, *, model: model(t))(theta, model=namespace["model_float"])
    np.testing.assert_array_equal(g, 2 * theta)


# ----------------------------------------------------------------------------------------------
# An object the function reaches by a name whose work arrays other functions write, handed
# it as a parameter (``step(state, k)`` writing ``state.u``): the attributes any code read
# names are looked into (they were only those the code holding the name names: a stop)

PROCEDURAL = """
class State:
    def __init__(self, n):
        self.u = np.zeros(n)
        self.tmp = np.zeros(n)

    def total(self):
        return float(self.u.sum())


class Slotted:
    __slots__ = ("u", "tmp")

    def __init__(self, n):
        self.u = np.zeros(n)
        self.tmp = np.zeros(n)

    def total(self):
        return float(self.u.sum())


def step(state, k):
    state.tmp[1:-1] = state.u[1:-1] + k * (state.u[2:] - 2 * state.u[1:-1] + state.u[:-2])
    state.u[:] = state.tmp


def run(state, k):
    state.u[:] = np.sin(np.linspace(0.0, 3.0, len(state.u)))
    for _ in range(4):
        step(state, k)
    return state.total()


SIM = State(8)
SLOTTED = Slotted(8)


def loss(k):
    return run(SIM, k)


def loss_of_slots(k):
    return run(SLOTTED, k)
"""


def _procedural():
    namespace = {"np": np, "__name__": "procedural_models"}
    exec(PROCEDURAL, namespace)  # noqa: S102 (the test's own source)
    return namespace


@pytest.mark.parametrize("name", ["loss", "loss_of_slots", "closure"])
def test_an_objects_arrays_written_by_the_functions_it_is_handed_to(name):
    def function(namespace):
        if name == "closure":
            state = namespace["State"](8)
            return (lambda k: namespace["run"](state, k)), state
        return namespace[name], namespace["SIM" if name == "loss" else "SLOTTED"]

    def plain(k):
        f, state = function(_procedural())
        return f(k), (state.u.tobytes(), state.tmp.tobytes())

    value, arrays = plain(0.2)
    f, state = function(_procedural())
    got, g = mutad.value_and_gradient(f, 0.2)
    assert np.asarray(got).tobytes() == np.asarray(value).tobytes()
    assert (state.u.tobytes(), state.tmp.tobytes()) == arrays
    h = 1e-6
    np.testing.assert_allclose(g, (plain(0.2 + h)[0] - plain(0.2 - h)[0]) / (2 * h), rtol=1e-6)
    _, tangent = mutad.jvp(f, (0.2,), (1.0,))
    np.testing.assert_allclose(tangent, g, rtol=1e-12)
