"""Replays that answered otherwise than tracing and NumPy on fresh programs: each program's
replaying function is called on inputs that change one decision the recording made, each call
compared with a traced one, bit for bit, with NumPy's value, and the caller's data."""

import builtins
import functools
import operator
import sys
import types

import numpy as np
import pytest

import mutad

from test_replay import program_count, same


def replayed_like_numpy(f, makers, argnums=0):
    """Call ``value_and_grad(f, replay=True)`` on the arguments each of ``makers`` makes, and
    check each call against a traced one and NumPy's value on arguments made afresh, and that
    the caller's arrays are as they were."""
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    for make in makers:
        args = make()
        before = [a.copy() for a in args]
        got = replaying(*args)
        assert all(same(a, b) for a, b in zip(args, before))
        expected = mutad.value_and_grad(f, argnums=argnums)(*make())
        assert same(got[0], expected[0]) and same(got[1], expected[1])
        assert same(got[0], f(*make()))
    return replaying


# ----------------------------------------------------------------------------------------------
# id(), operator.is_ and operator.is_not, and type() under another name, told the recording's
# stand-ins for NumPy's integers and booleans from NumPy's own, as `is` does: the recording
# took the other branch, and every replay ran it (10.5 for NumPy's 5.25). Only `is` and
# type() named as such were found; a function reaching any of them is now traced on every
# call, whether its own code names it, a helper module's does, or it holds it as a value


HELPERS = """
import operator
import sys
import numpy as np

as_type = type


def positive(b):
    return operator.is_(b, np.True_)


def same_object(b):
    return id(b) == id(np.True_)


def is_an_int64(i):
    return as_type(i) == np.int64
"""

helpers = types.ModuleType("replay_helpers")
exec(compile(HELPERS, "replay_helpers.py", "exec"), helpers.__dict__)


def traced_on_every_call(f, value, *reasons):
    """f, whose answer at x = [1, 0.5, 2] is ``value``, called with its branch's input changed
    and back: every call traced (no program recorded), like NumPy, for one of ``reasons``."""
    assert f(np.array([1.0, 0.5, 2.0])) == value
    replaying = replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),)] * 2 + [
        lambda: (np.array([-1.0, 0.5, -2.0]),), lambda: (np.array([1.0, 0.5, 2.0]),)])
    assert program_count(replaying) == 0
    why = " ".join(replaying.reasons.values())
    assert any(reason in why for reason in reasons), why


def _operator_is(x):
    return (x ** 2).sum() if operator.is_(x[0] > 0, np.True_) else (3 * x).sum()


def _operator_is_not(x):
    return (x ** 2).sum() if operator.is_not(x[0] > 0, np.False_) else (3 * x).sum()


def _ids(x):
    return (x ** 2).sum() if id(x[0] > 0) == id(np.True_) else (3 * x).sum()


_is_true = functools.partial(operator.is_, np.True_)


def _partial_of_is(x):
    return (x ** 2).sum() if _is_true(x[0] > 0) else (3 * x).sum()


def _mapped_is(x):
    return (x ** 2).sum() if all(map(operator.is_, [x[0] > 0], [np.True_])) else (3 * x).sum()


def _helper_is(x):
    return (x ** 2).sum() if helpers.positive(x[0] > 0) else (3 * x).sum()


def _helper_id(x):
    return (x ** 2).sum() if helpers.same_object(x[0] > 0) else (3 * x).sum()


def _helper_type_renamed(x):
    return (x ** 2).sum() if helpers.is_an_int64(np.argmax(x)) else (3 * x).sum()


@pytest.mark.parametrize("f", [_operator_is, _operator_is_not, _ids, _partial_of_is,
                               _mapped_is, _helper_is, _helper_id, _helper_type_renamed])
def test_identity_read_by_other_routes_is_traced(f):
    traced_on_every_call(f, 5.25, "a recording would answer otherwise than NumPy")


# ----------------------------------------------------------------------------------------------
# The recording's stand-ins have methods NumPy's integers and booleans lack (__len__,
# __iter__): isinstance of collections.abc's Iterable or Sized, which test a class for them,
# and hasattr(b, "__len__") answered True where NumPy answers False, and every replay took that
# branch. A function whose code reads those attributes by name or reaches those classes is
# traced on every call


def _iterable(x):
    import collections.abc
    return (x ** 2).sum() if isinstance(x[0] > 0, collections.abc.Iterable) else (3 * x).sum()


def _sized(x):
    import typing
    return (x ** 2).sum() if isinstance(np.argmax(x), typing.Sized) else (3 * x).sum()


def _has_a_length(x):
    return (x ** 2).sum() if hasattr(np.argmax(x), "__len__") else (3 * x).sum()


@pytest.mark.parametrize("f", [_iterable, _sized, _has_a_length])
def test_what_a_stand_in_has_and_numpys_scalars_lack_is_traced(f):
    traced_on_every_call(f, 10.5, "a recording would answer otherwise than NumPy")


# ----------------------------------------------------------------------------------------------
# And the other way: NumPy's scalars have a buffer (memoryview), an array interface and
# attributes the stand-ins lack (numerator), and cannot be referred to weakly, where a stand-in
# can; sys.getsizeof tells their sizes apart


def _has_a_buffer(x):
    try:
        memoryview(x[0] > 0)
    except TypeError:
        return (3 * x).sum()
    return (x ** 2).sum()


def _has_an_array_interface(x):
    return (x ** 2).sum() if hasattr(np.argmax(x), "__array_interface__") else (3 * x).sum()


def _has_a_numerator(x):
    return (x ** 2).sum() if getattr(np.argmax(x), "numerator", None) == 2 else (3 * x).sum()


def _not_weakly_held(x):
    import weakref
    try:
        weakref.ref(x[0] > 0)
    except TypeError:
        return (x ** 2).sum()
    return (3 * x).sum()


def _sized_by_python(x):
    import sys
    return (x ** 2).sum() if sys.getsizeof(np.argmax(x)) < 100 else (3 * x).sum()


@pytest.mark.parametrize("f", [_has_a_buffer, _has_an_array_interface, _has_a_numerator,
                               _not_weakly_held, _sized_by_python])
def test_what_numpys_scalars_have_and_a_stand_in_lacks_is_traced(f):
    traced_on_every_call(f, 5.25, "a recording would answer otherwise than NumPy")


# ----------------------------------------------------------------------------------------------
# A module f imports in its body and nobody imported before the first call: the walk made
# before that call could not see what f reads of it (here operator.is_ in its code), and the
# walk kept from then on read only what it had met, so every call answered otherwise than
# NumPy. A call that will import a module of the user's is traced until it is imported


LATE_MODULE = """
import operator
import sys
import numpy as np


def positive(b):
    return operator.is_(b, np.True_)
"""


def test_a_module_imported_by_the_first_call_is_walked(tmp_path, monkeypatch):
    (tmp_path / "replay_late_module.py").write_text(LATE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "replay_late_module", raising=False)

    def f(x):
        import replay_late_module
        return (x ** 2).sum() if replay_late_module.positive(x[0] > 0) else (3 * x).sum()

    replaying = replayed_like_numpy(f, [lambda: (np.array([1.0, 0.5, 2.0]),)] * 3 + [
        lambda: (np.array([-1.0, 0.5, -2.0]),)])
    assert program_count(replaying) == 0
    assert "a recording would answer otherwise than NumPy" in " ".join(replaying.reasons.values())
    sys.modules.pop("replay_late_module", None)


# ----------------------------------------------------------------------------------------------
# The builtins module met as an object (builtins.id, builtins.type: the walk compared them by
# identity alone, taking the code to name them as globals, which its instructions show), and
# code f builds and runs (eval, exec), whose comparisons no scan of f's code sees


def _builtins_id(x):
    return (x ** 2).sum() if builtins.id(x[0] > 0) == builtins.id(np.True_) else (3 * x).sum()


def _builtins_type(x):
    return (x ** 2).sum() if builtins.type(np.argmax(x)) == np.int64 else (3 * x).sum()


BUILDING = """
import numpy as np


def evaluated(x):
    return (x ** 2).sum() if eval("b is np.True_", {"b": x[0] > 0, "np": np}) else (3 * x).sum()


def executed(x):
    namespace = {"b": x[0] > 0, "np": np}
    exec("r = type(b) is np.bool_", namespace)
    return (x ** 2).sum() if namespace["r"] else (3 * x).sum()
"""

building = types.ModuleType("replay_building")  # (eval: f's globals are held whole)
exec(compile(BUILDING, "replay_building.py", "exec"), building.__dict__)


@pytest.mark.parametrize("f", [_builtins_id, _builtins_type, building.evaluated,
                               building.executed])
def test_the_builtins_module_and_code_built_are_traced(f):
    traced_on_every_call(f, 5.25, "a recording would answer otherwise than NumPy", "eval, exec")


def _scaled_by_a_module_imported_in_f(x):
    import replay_settings
    return (x * replay_settings.SCALE).sum()


def test_a_module_imported_anew_between_calls_is_read_again(monkeypatch):
    """A module f imports in its body, imported anew between calls (taken out of sys.modules
    and imported again, as a notebook reloads its settings): the walk kept from the first
    call compared the old module's namespace, and every replay gave the first scale."""
    replaying = mutad.value_and_grad(_scaled_by_a_module_imported_in_f, replay=True)
    x = np.array([1.0, 0.5, 2.0])
    for scale in (1.0, 1.0, 3.0, 3.0, 5.0):
        settings = types.ModuleType("replay_settings")
        settings.SCALE = scale
        monkeypatch.setitem(sys.modules, "replay_settings", settings)
        got = replaying(x)
        assert same(got, mutad.value_and_grad(_scaled_by_a_module_imported_in_f)(x))
        assert same(got[0], (x * scale).sum())


def _squared_where_positive(x):
    y = x * 2.0
    if operator.is_(x[0] > 0, np.True_):
        y = y * x
    return y


def test_jacrev_which_replays_its_rows_reads_identity_as_numpy():
    """jacrev records the first row's program and replays it for the others: with
    operator.is_ answered by the recording's stand-in, every row took the other branch
    (the Jacobian of 2x for NumPy's 2x**2)."""
    x = np.array([1.0, 0.5, 2.0])
    assert same(mutad.jacrev(_squared_where_positive)(x), np.diag(4 * x))
