"""The rule declarations: settings passed positionally get no cotangent, Rules are keyed by
the objects NumPy dispatches on, one per function, and rule families share helpers through one
module."""

import ast
from pathlib import Path

import numpy as np
import pytest

import mutad
from mutad.core import registry

PACKAGE = Path(mutad.__file__).parent
FAMILIES = {"composites", "creation", "indexing", "linalg", "nondiff", "reductions", "shape",
            "ufuncs"}


@pytest.mark.parametrize("f", [
    lambda x: np.copy(x, "C") * x,                  # order passed positionally
    lambda x: np.nan_to_num(x, True) * x,           # copy passed positionally
    lambda x: np.full_like(x, x[0], float) * x,     # dtype passed positionally
    lambda x: np.squeeze(x) * x,                    # NumPy hands x itself back
    lambda x: np.median(x, 0),                      # axis passed positionally
    lambda x: np.quantile(x, 0.3, 0),
    lambda x: np.nanpercentile(x, 30.0, 0),
    lambda x: np.sum(x * x, 0, None, None, True),   # out positionally, keepdims after it
    lambda x: np.cumsum(x * x, 0, None, None) * x,  # out positionally, at the end
    lambda x: np.dot(x, x, None),                   # out=None positionally
], ids=["copy-order", "nan_to_num-copy", "full_like-dtype", "squeeze-itself", "median-axis",
        "quantile-axis", "nanpercentile-axis", "sum-out-keepdims", "cumsum-out", "dot-out"])
def test_settings_passed_positionally_get_no_cotangent(f):
    x = np.array([0.5, 1.5, 2.5])
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)


@pytest.mark.parametrize("f", [
    lambda x: (np.diff(x, prepend=x[2], append=x[:2]) ** 2).sum(),
    lambda x: (np.diff(x, 2, append=x[1:] * 3.0) ** 2).sum(),
    lambda x: (np.linspace(start=x[0], stop=x[1], num=4) ** 2).sum(),
    lambda x: (np.clip(x, a_min=x[0] * 0.9, a_max=x[2] * 0.9) ** 2).sum(),
    lambda x: np.interp([0.2, -1.0, 5.0], [0.0, 1.0, 2.0], x, left=x[1] * 2.0, right=x[0]).sum(),
    # keyword-only arguments the rules take at a position
    lambda x: (np.clip(x, min=x[0] * 0.9) ** 2).sum(),
    lambda x: (np.clip(x, max=x[2] * 0.9) ** 2).sum(),
    lambda x: (np.clip(x, min=x[0] * 1.1, max=x[2] * 0.9) ** 2).sum(),
    lambda x: (np.pad(x, 2, constant_values=x[1]) ** 2).sum(),
    lambda x: (np.pad(x * x[:, None], ((1, 0), (2, 1)), constant_values=((x[0], x[1]), (x[2], 2.0)))
               ** 3).sum(),
    lambda x: (np.pad(x, (1, 2), constant_values=x[1:]) ** 3).sum(),
    lambda x: (np.pad(x * x[:, None], 1, constant_values=x[:2, None]) ** 3).sum(),
], ids=["diff-ends", "diff-append", "linspace-start-stop", "clip-bounds", "interp-left-right",
        "clip-min", "clip-max", "clip-min-max", "pad-value", "pad-pairs-of-scalars", "pad-pair",
        "pad-pair-per-axis"])
def test_differentiated_values_passed_by_keyword_go_to_their_positions(f):
    # the rules differentiate these positions; given by keyword, they are moved there
    x = np.array([0.5, 1.5, 2.5])
    for policy in ("restore", "checkpoint"):
        mutad.check_grads(f, x, policy=policy)
    mutad.check_jvp(f, x)


def test_keyword_only_bounds_mixed_with_their_positional_names_are_not_moved():
    # NumPy refuses np.clip(x, a_min=0, max=b): mutad does not compute it either
    for f in (lambda x: np.clip(x, a_min=0.2, max=x[2]).sum(),
              lambda x: np.clip(x, 0.2, max=x[2]).sum()):
        with pytest.raises((TypeError, mutad.MutadError)):
            f(np.ones(3))
        with pytest.raises((TypeError, mutad.MutadError)):
            mutad.gradient(f, np.ones(3))


def test_a_rule_that_returns_other_than_its_leading_cotangents_is_refused():
    def rule(a, axis=None):
        return np.sum(a, axis), lambda dy: (dy, None)  # two cotangents: declared one

    padded = registry.padded(rule, leading=1)
    y, back = padded(np.ones(3), 0)
    with pytest.raises(TypeError, match="leading=1"):
        back(1.0)


def test_rules_are_keyed_by_what_numpy_dispatches_on():
    """No string pseudo-primitives: a key is a function, a ufunc or ``(ufunc, method)``."""
    for facet in ("reverse", "forward", "inplace", "composite"):
        for key in registry.table(facet):
            assert callable(key) or (type(key) is tuple and callable(getattr(*key))), key


def _imported_modules(path):
    """Every module ``path`` imports from within mutad, as dotted names, at any depth."""
    package = ("mutad." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)).split(".")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:-node.level]
            module = base + (node.module.split(".") if node.module else [])
            if node.module:
                yield ".".join(module)
            yield from (".".join(module + [alias.name]) for alias in node.names)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_rule_family(path):
    """Rule families share helpers through ``rules._helpers``, never by importing one
    another (the linear algebra families, a layer above, share theirs through
    ``linalg._common``)."""
    if path == PACKAGE / "rules" / "__init__.py":
        return  # registers every family
    families = {f"mutad.rules.{family}" for family in FAMILIES}
    assert not families & set(_imported_modules(path))


def test_one_rule_per_function_with_optional_facets():
    """``registry.RULES``: one Rule per function, whose facets hold everything mutad knows of it;
    the rule objects the engines hold are answered for by the Rule that holds them."""
    rule = registry.RULES[np.cumsum]
    assert rule.key is np.cumsum and set(rule.facets()) == {"reverse", "forward", "complex"}
    assert repr(rule) == "Rule(np.cumsum: reverse, forward, complex)"
    assert registry.complex_kind(rule.reverse) == registry.complex_kind(rule.forward) \
        == registry.HOLOMORPHIC
    assert registry.lookup(np.busday_count) is registry.NO_RULE
    assert not registry.NO_RULE.facets()
    with pytest.raises(TypeError, match="NO_RULE"):
        registry.NO_RULE.reverse = rule.reverse
    back, jvp = registry.RULES[np.absolute].complex_rules
    assert registry.complex_kind(back) == registry.complex_kind(jvp) == registry.CONVENTION
    assert registry.complex_kind(registry.RULES[np.absolute].elementwise) is None
    recomputable = registry.RULES[np.reshape]
    assert recomputable.recomputable and registry.is_recomputable(recomputable.reverse)
    assert not registry.is_recomputable(recomputable.forward)
    assert registry.RULES[np.concatenate].joins and registry.RULES[np.argmax].nondifferentiable


def test_a_user_rule_is_a_facet_of_its_adjoints_rule():
    @mutad.adjoint
    def double(x):
        return 2.0 * x

    @double.rule
    def _double_rule(x):
        return double(x), lambda dy: (2.0 * dy,)

    rule = registry.RULES[double]
    assert rule.user and rule.complex == registry.CONVENTION
    assert registry.is_user_rule(_double_rule) and not registry.is_user_rule(
        registry.RULES[np.sum].reverse)
    assert registry.complex_kind(_double_rule) == registry.CONVENTION


def test_a_rule_object_serves_one_function():
    """What the engines ask of a rule object they hold is read from the one Rule holding it."""
    taken = registry.RULES[np.cumsum].reverse
    with pytest.raises(ValueError, match="already a rule of Rule.np.cumsum"):
        registry.Rule(np.busday_count, reverse=taken)
    assert registry.OWNER[taken] is registry.RULES[np.cumsum]
