"""The library modules whose class the allocation mode switches: those at the top of their
family and those a namespace binds by a name are switched on every entry; the others (SciPy's
deprecated modules, ``scipy.linalg.basic``) as code running in the mode reaches them. However
the function reaches one, its routed functions are routed and its other functions' new arrays
are followed, and outside a differentiation every module is NumPy's and SciPy's own again."""

import importlib
import sys
from importlib import import_module
import types
import warnings

import numpy as np
import pytest
import scipy.linalg

import mutad
from mutad.core import allocation

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

BASIC = "scipy.linalg.basic"
"""A deprecated module of SciPy's, which no namespace binds: reached as its package's
attribute alone (switched only once it is reached, at first)."""

SPECIAL_MATRICES = "scipy.linalg.special_matrices"


def _deprecated(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _all_plain():
    return all(type(module) is types.ModuleType
               for module, _ in allocation.MODE.switched.values())


@pytest.fixture(autouse=True)
def _not_reached_yet():
    """Each test reaches the deprecated modules afresh: none is switched on entry at first
    (an earlier test's call reached it, which switches it on every entry after); as they
    were after it."""
    bound = dict(allocation.MODE.bound)
    for name in (BASIC, SPECIAL_MATRICES):
        allocation.MODE.bound.pop(id(_deprecated(name)), None)
    allocation.MODE.entered_of = None
    yield
    allocation.MODE.bound.update(bound)
    allocation.MODE.entered_of = None


def test_a_deprecated_module_is_not_switched_on_entry_until_reached():
    mutad.gradient(lambda x: (x * x).sum(), np.ones(2))
    basic = _deprecated(BASIC)
    assert all(module is not basic for module, _ in allocation.MODE.entered)
    mutad.gradient(_reached_by_attributes, np.ones(3))
    mutad.gradient(lambda x: (x * x).sum(), np.ones(2))
    assert any(module is basic for module, _ in allocation.MODE.entered)


class _Holder:
    pass


HOLDER = _Holder()


def _reached_by_attributes(x):
    return scipy.linalg.basic.solve(np.eye(3) * 2.0, x).sum()


def _imported_inside(x):
    from scipy.linalg.basic import solve
    return solve(np.eye(3) * 2.0, x).sum()


def _imported_as_inside(x):
    import scipy.linalg.basic as basic
    return basic.solve(np.eye(3) * 2.0, x).sum()


def _through_getattr(x):
    module = getattr(getattr(scipy, "linalg"), "basic")
    return getattr(module, "solve")(np.eye(3) * 2.0, x).sum()


def _by_import_module(x):
    return importlib.import_module(BASIC).solve(np.eye(3) * 2.0, x).sum()


def _by_import_module_bound(x):
    return import_module(BASIC).solve(np.eye(3) * 2.0, x).sum()


def _held_by_an_object(x):
    return HOLDER.basic.solve(np.eye(3) * 2.0, x).sum()


def _through_a_callback(x, solve=lambda a, b: scipy.linalg.basic.solve(a, b)):
    return solve(np.eye(3) * 2.0, x).sum()


@pytest.mark.parametrize("f", [_reached_by_attributes, _imported_inside, _imported_as_inside,
                               _through_getattr, _held_by_an_object, _through_a_callback,
                               _by_import_module, _by_import_module_bound])
def test_a_routed_function_of_a_module_reached_in_the_function_is_routed(f):
    HOLDER.basic = _deprecated(BASIC)
    x = np.array([1.0, -2.0, 0.5])
    before = x.tobytes()
    for _ in range(2):  # (reached on the first call, switched on every entry after it)
        (g,) = mutad.gradient(f, x)
        assert g.tolist() == [0.5, 0.5, 0.5]
        assert x.tobytes() == before and _all_plain()
    assert type(sys.modules[BASIC]) is types.ModuleType


def _filled(x):
    K = scipy.linalg.special_matrices.toeplitz(np.array([1.0, 0.5, 0.25]))
    K[0] = x  # a new array of SciPy's: followed, as np.zeros' is
    return (K @ x).sum()


def test_the_new_array_of_a_module_reached_in_the_function_is_followed():
    x = np.array([0.3, -0.2, 0.7])
    mutad.check_grads(_filled, x)
    assert _all_plain()


def test_a_module_bound_to_a_name_while_the_function_ran_is_switched_after():
    # f binds the deprecated module to a global on its first call (by an import, which reads
    # it through its package); later calls read it by that name, with no package between.
    namespace = {"np": np}
    exec("def f(x):\n"
         "    global basic\n"
         "    if 'basic' not in globals():\n"
         "        import scipy.linalg.basic as basic\n"
         "    return basic.solve(np.eye(3) * 2.0, x).sum()\n", namespace)
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(3):
        assert mutad.gradient(namespace["f"], x)[0].tolist() == [0.5, 0.5, 0.5]
        assert _all_plain()


def test_every_module_is_its_own_outside_a_differentiation_after_errors():
    def f(x):
        scipy.linalg.basic.solve(np.eye(3), x)
        raise ValueError("f's own")

    with pytest.raises(ValueError, match="f's own"):
        mutad.gradient(f, np.ones(3))
    assert _all_plain()
    assert scipy.linalg.basic.solve is scipy.linalg._basic.solve


_RESCANNED = '''
import numpy as np

def f(x):
    return np.sum(np.sin(x) * np.sin(x))
'''

_A_SITE_BOUND_LATER = '''
from numpy import zeros

def g(x):
    z = zeros(4)
    z[:] = x  # (a traced value written: NumPy's own zeros would refuse it)
    return np.sum(z * z)
'''


def test_a_rescan_that_finds_the_same_sites_keeps_the_swaps_and_finds_a_new_site():
    """The function's module gaining a name that no swap concerns is scanned again, and the
    swaps of every namespace made before are kept (not made again, and slow, on the next
    entry); a name bound later that is a site (a factory imported by name) is swapped."""
    module = types.ModuleType("a_script_binding_names_between_calls")
    exec(_RESCANNED, module.__dict__)
    x = np.linspace(0.0, 1.0, 4)
    expected = 2 * np.sin(x) * np.cos(x)
    for _ in range(2):
        assert np.array_equal(mutad.grad(module.f)(x), expected)
    swaps = allocation.MODE.swaps
    module.answer = 42
    assert np.array_equal(mutad.grad(module.f)(x), expected)
    assert allocation.MODE.swaps is swaps and swaps is not None
    exec(_A_SITE_BOUND_LATER, module.__dict__)
    assert np.array_equal(mutad.grad(module.g)(x), 2 * x)
    assert allocation.MODE.swaps is not swaps
    assert module.zeros is np.zeros and module.np is np


def test_a_routed_function_its_modules_code_reads_only_as_an_attribute_is_routed():
    # numpy.ma.core's code names zeros and sum only as attributes (``self.sum()``): the
    # mode's class of the module routes them, as it is read, with no swap of its namespace
    outside = np.ma.core.zeros
    assert "zeros" not in allocation._own_names(vars(np.ma.core))
    seen = []

    def f(x):
        seen.append(type(np.ma.core.zeros) is allocation._Route  # (``outside``, a cell, too)
                    and np.ma.core.zeros is np.ma.zeros)
        z = np.ma.core.zeros(3)
        z[:] = x * x
        return np.ma.core.sum(z)

    x = np.array([0.5, 1.5, 2.0])
    before = x.copy()
    (g,) = mutad.gradient(f, x)
    assert seen == [True]
    np.testing.assert_array_equal(g, 2.0 * before)
    assert x.tobytes() == before.tobytes()
    assert np.ma.core.zeros is outside and vars(np.ma.core)["zeros"] is outside


def test_the_global_names_read_from_instructions_are_those_dis_reads():
    import dis
    source = "def many(x):\n    return " + " + ".join(f"g{i}" for i in range(300)) + \
             "\nclass C:\n    y = g0\n    del y\n"
    codes = [compile(source, "<many>", "exec")]  # (index past 255: EXTENDED_ARG; a class body)
    codes += allocation._own_codes(vars(np.ma.core)) + allocation._own_codes(vars(scipy.linalg))
    operations = {"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME",
                  "DELETE_NAME", "LOAD_FROM_DICT_OR_GLOBALS"}
    for code in codes:
        for c in allocation._codes(code):
            found: set = set()
            allocation._global_names(c, found)
            assert found == {i.argval for i in dis.get_instructions(c) if i.opname in operations}


def test_no_module_of_mutads_own_is_switched():
    """mutad's own modules bind no routed function to a name that their code reads only as an
    attribute (a loop's name left bound, a constant of NumPy's function): the mode would switch
    such a module's class on every entry, a cost to every differentiation, to route a name no
    user code reads."""
    # (mutad's SciPy modules too: imported with their SciPy library, their names routed then)
    import mutad.scipy.interpolate, mutad.scipy.signal, mutad.scipy.spatial  # noqa: F401

    x = np.array([1.0, 2.0])
    before = x.copy()
    assert mutad.gradient(lambda x: (x * x).sum(), x)[0].tolist() == [2.0, 4.0]
    assert x.tobytes() == before.tobytes()
    assert [module.__name__ for module, _ in allocation.MODE.switched.values()
            if str(module.__dict__.get("__name__")).startswith("mutad.")] == []


RULES_LOADED_IN_A_DIFFERENTIATION = """
import sys
import numpy as np
import scipy.sparse.linalg as ssl
import mutad
assert "scipy.interpolate" not in sys.modules

def imports_in_its_body(x):
    import scipy.interpolate  # noqa: F401  (its rules load inside the differentiation)
    return (x * 2.0).sum()

mutad.gradient(imports_in_its_body, np.ones(3))
rules = sys.modules["mutad.scipy.interpolate"]
assert rules.spsolve is ssl.spsolve, rules.spsolve
from scipy.interpolate import RegularGridInterpolator
grid = np.linspace(0.0, 1.0, 6)
point = np.array([[0.3, 0.4]])
f = lambda v: RegularGridInterpolator((grid, grid), v, method="cubic",
                                      solver=ssl.spsolve)(point).sum()
v = np.add.outer(grid ** 2, grid)
(g,) = mutad.gradient(f, v)
assert mutad.value_and_gradient(f, v)[0] == f(v)
"""


@pytest.mark.slow  # (a new process: its imports)
def test_rule_modules_loaded_in_a_differentiation_bind_the_libraries_functions(fresh_process):
    """A library the differentiated function imports in its body loads its rule module in
    the mode: what that module imports from the library is the library's function, not the
    mode's stand-in (which SciPy's ``solver != ssl.spsolve`` told apart from its own, for good:
    RegularGridInterpolator's direct solver taken for an iterative one)."""
    fresh_process(RULES_LOADED_IN_A_DIFFERENTIATION)


ALPHA = 1.5
HELPERS = [np.polynomial.chebyshev.chebpow]


def _gemm(C, A, B):
    C *= ALPHA
    C += ALPHA * (A @ B)


def _through_helper(c):
    return HELPERS[0](c, 2).sum()


@pytest.mark.parametrize("f, arguments, plain", [
    (lambda x: (x * x).sum(), ([np.ones(3)], {}), True),
    (lambda x: np.sum(np.sin(x) * ALPHA), ([np.ones(3)], {}), True),
    (lambda C, A, B: (_gemm(C, A, B), C.sum())[1], ([np.ones((2, 2))] * 3, {}), True),
    (lambda x: sum(v for v in zip(x, range(3)))[0], ([np.ones(3)], {}), True),
    (eval("lambda x: np.sin(x).sum()", {"np": np}), ([np.ones(3)], {}), True),  # (exec's)
    (eval("lambda x: np.ma.sum(x)", {"np": np}), ([np.ones(3)], {}), False),
    # what reaches NumPy's or SciPy's modules: their sides stay swapped in
    (lambda x: np.ma.sum(x), ([np.ones(3)], {}), False),
    (lambda x: np.polynomial.chebyshev.chebpow(x, 2).sum(), ([np.ones(3)], {}), False),
    (_through_helper, ([np.ones(3)], {}), False),
    (lambda x: x.__array_namespace__().ma.sum(x), ([np.ones(3)], {}), False),
    (lambda x: getattr(np, "ma").sum(x), ([np.ones(3)], {}), False),
    (lambda x: scipy.linalg.norm(x), ([np.ones(3)], {}), False),
    (lambda x, m: (x * m).sum(), ([np.ones(3), np.ma.ones(3)], {}), False),
    (lambda x, h: h(x), ([np.ones(3), np.polynomial.chebyshev.chebval], {}), False),
    (lambda x: [np][0].ma.sum(x), ([np.ones(3)], {}), False),
    (lambda x: np.diff(x).sum(), ([np.ones(3)], {}), False),  # (numpy.lib's: not looked into)
    (lambda x: x.sum(), ([np.array([1.0, None], dtype=object)], {}), False),
])
def test_a_function_reaching_no_librarys_module_is_told_apart(f, arguments, plain):
    """The mode leaves NumPy's and SciPy's own modules' names and classes alone only around a
    function that cannot reach those modules, through its code, the values it holds, the
    user's functions it calls or its arguments."""
    assert allocation._reaches_no_library(f, arguments) is plain


def test_a_function_reaching_a_library_after_one_that_reaches_none():
    """A differentiation of a function that reaches a library's module, after one of a function
    that reaches none (whose mode left the libraries' side alone), runs with that side swapped
    in; the caller's array is unchanged and every module is its own afterwards."""
    c = np.array([0.5, -1.0, 2.0])
    before = c.copy()
    assert np.array_equal(mutad.gradient(lambda c: (c * c).sum(), c)[0], 2 * c)
    g = mutad.gradient(lambda c: np.polynomial.chebyshev.chebpow(c, 2).sum(), c)[0]
    assert np.allclose(g, mutad.gradient(_through_helper, c)[0])
    assert np.array_equal(c, before)
    assert not allocation.MODE.libraries_in and not allocation.MODE.depth
    assert type(np.ma) is types.ModuleType and type(scipy.linalg) is types.ModuleType
