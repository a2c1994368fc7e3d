"""``registry.explain``: what it says of one function of each family is what its Rule holds,
and, for a function without a rule, the error a differentiation of it really raises."""

import io
import re

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.sparse.linalg

import mutad
from mutad.core import registry
from mutad.core.registry import explain


def facts(text):
    """``{label: text}`` of an explanation's paragraphs (labels indented two spaces)."""
    found, label = {}, None
    for line in text.splitlines()[1:]:
        match = re.match(r"^  (\S[^:]*): (.*)$", line)
        if match and not line.startswith("      "):
            label = match[1]
            found[label] = match[2]
        elif label is not None:
            found[label] += " " + line.strip()
    return found


def where(rule):
    """``path:line`` of a rule's definition, as explain names it."""
    import inspect

    rule = inspect.unwrap(rule)
    path = inspect.getsourcefile(rule).replace("\\", "/")
    return f"{path[path.rindex('mutad/'):]}:{inspect.getsourcelines(rule)[1]}"


def test_a_ufunc_its_row_partials_and_inverses():
    text = explain(np.add)
    assert text.splitlines()[0] == "np.add: a NumPy ufunc that mutad differentiates"
    said = facts(text)
    assert said["facets"].startswith("elementwise, complex (registry.RULES[np.add])")
    assert "facet elementwise" in said["elementwise"]
    assert said["partial 0"].startswith("1") and said["partial 1"].startswith("1")
    assert "np.subtract(t, o[0], out=t)" in said["in place"]  # the inverse of x += y
    assert said["complex values"].startswith("holomorphic")
    said = facts(explain(np.sin))
    assert said["partial 0"] == "np.cos(x) (registry.Applied)"
    said = facts(explain(np.tanh))
    assert said["partial 0"].startswith("sech_squared(x) (registry.Applied: ")
    assert facts(explain(np.exp))["partial 0"] == "lambda y, x: y"
    assert "from a saved copy" in said["in place"]


def test_a_ufunc_that_is_not_complex_differentiable():
    said = facts(explain(np.absolute))
    back, forward = registry.RULES[np.absolute].complex_rules
    assert where(back) in said["complex operands"] and where(forward) in said["complex operands"]
    assert said["complex values"].startswith("written for complex values")
    assert "decision" in said["partials read"]


def test_a_reduction_with_its_rule_its_linear_forward_rule_and_its_method():
    said = facts(explain(np.cumsum))
    assert said["facets"] == "reverse, forward, complex (registry.RULES[np.cumsum])"
    assert where(registry.RULES[np.cumsum].reverse) in said["reverse"]
    assert "leading=1" in said["reverse"]
    assert "deflinear" in said["forward"] and "(0,)" in said["forward"]
    assert said["recomputable"].startswith("no")
    assert "out=" in said["in place"]
    assert "x.cumsum()" in said["methods"]
    said = facts(explain(np.sum))
    assert "initial" in said["forward"]  # an offset of deflinear, kept out of the tangent


def test_recomputable_and_multilinear_come_from_their_facets():
    recomputable = next(f for f in registry.table("recomputable") if not isinstance(f, tuple))
    assert facts(explain(recomputable))["recomputable"].startswith("yes")
    said = facts(explain(np.matmul))
    assert "defmultilinear" in said["forward"]


def test_linear_algebra_with_and_without_a_forward_rule():
    said = facts(explain(np.linalg.solve))
    assert where(registry.RULES[np.linalg.solve].reverse) in said["reverse"]
    assert where(registry.RULES[np.linalg.solve].forward) in said["forward"]
    assert "holomorphic" in said["complex values"]


def test_linear_algebra_without_a_forward_rule(monkeypatch):
    # Every pure rule has a forward rule today: take one away, as a rule declared without
    # its defjvp would be, and explain says the error forward mode then raises.
    monkeypatch.setattr(registry.RULES[np.linalg.solve], "forward", None)
    said = facts(explain(np.linalg.solve))
    assert where(registry.RULES[np.linalg.solve].reverse) in said["reverse"]
    with pytest.raises(mutad.errors.UnsupportedFunctionError) as raised:
        mutad.jvp(lambda a: np.linalg.solve(a, np.ones(2)), (np.eye(2),), (np.eye(2),))
    assert said["forward"] == f"none: duals raise UnsupportedFunctionError: {raised.value}"
    assert "use mutad.gradient" in said["forward"]


def test_a_join_of_a_sequence_of_arrays():
    said = facts(explain(np.concatenate))
    assert "joins" in said["facets"] and "facet joins" in said["joins"]


def test_a_composite():
    said = facts(explain(np.trapezoid))
    assert where(registry.RULES[np.trapezoid].composite) in said["composite"]
    assert "np.sum" in said["composite"]


def test_an_in_place_method_of_arrays():
    text = explain(np.ndarray.sort)
    assert text.splitlines()[0] == "np.ndarray.sort: a method of NumPy arrays that mutad differentiates"
    said = facts(text)
    assert "self[...] = np.sort(" in said["ArrayMethods.sort"]
    assert said["it calls"].startswith("np.sort")
    assert where(registry.RULES[np.sort].reverse) in text
    assert explain(np.ones(2).sort) == text  # a bound method is the same method


def test_a_ufunc_method_that_writes_in_place():
    said = facts(explain(np.add.at))
    assert where(registry.RULES[np.add, "at"].inplace) in said["in place"]
    assert where(registry.RULES[np.add, "at"].forward) in said["forward"]
    assert "convention" in said["complex values"]


@pytest.mark.parametrize("fn, stand_in_module", [
    (scipy.sparse.linalg.spsolve, "mutad.scipy.sparse"),
    (scipy.integrate.solve_ivp, "mutad.scipy.integrate"),
])
def test_a_scipy_route(fn, stand_in_module):
    text = explain(fn)
    stand_in = registry.RULES[fn].route
    assert text.splitlines()[0].endswith("a SciPy function that mutad differentiates")
    said = facts(text)
    assert "facet route" in said["routed"] and where(stand_in) in said["routed"]
    assert stand_in_module in said["routed"]


def test_a_scipy_function_with_the_rules_of_its_wrapper():
    text = explain(scipy.linalg.expm)
    assert text.startswith("scipy.linalg.expm: a SciPy function")
    said = facts(text)
    stand_in = registry.RULES[scipy.linalg.expm].route
    assert "ScipyAdjoint" in said["routed"]
    assert where(stand_in.pure_rule) in said["reverse"]
    assert where(stand_in.forward_rule) in said["forward"]
    assert said["complex values"].startswith("holomorphic (registry.holomorphic)")
    said = facts(explain(scipy.linalg.logm))
    assert said["complex values"].startswith("refused: complex values raise ComplexInputError")


def test_an_unknown_function_names_the_error_a_differentiation_raises():
    text = explain(np.busday_count)
    assert text.splitlines()[0] == "np.busday_count: a NumPy function that mutad has no rule for"
    said = facts(text)
    with pytest.raises(mutad.errors.UnsupportedFunctionError) as reverse:
        mutad.gradient(lambda x: np.busday_count(x, x).sum() * x.sum(), np.ones(2))
    with pytest.raises(mutad.errors.UnsupportedFunctionError) as forward:
        mutad.jvp(lambda x: np.busday_count(x, x).sum() * x.sum(), (np.ones(2),), (np.ones(2),))
    assert said["on traced arrays"].endswith(f"UnsupportedFunctionError: {reverse.value}")
    assert said["on duals (forward mode)"] == f"UnsupportedFunctionError: {forward.value}"
    assert "defrule" in said["to add a rule"] and "mutad.adjoint" in said["to add a rule"]


def test_an_unknown_ufunc_method_names_its_error():
    said = facts(explain(np.hypot.reduceat))
    with pytest.raises(mutad.errors.UnsupportedFunctionError) as raised:
        mutad.gradient(lambda x: np.hypot.reduceat(x, [0, 2]).sum(), np.ones(3))
    assert said["on traced arrays"].endswith(str(raised.value))


def test_a_python_function_mutad_does_not_see():
    def mine(x):
        return x

    said = facts(explain(mine))
    assert "ConversionError" in said["on traced arrays"]
    assert "to add a rule" in said


def test_a_nondifferentiable_function():
    said = facts(explain(np.argmax))
    assert "facet nondifferentiable" in said["no gradient"]


def test_the_text_is_returned_and_printed_to_a_file():
    out = io.StringIO()
    text = explain(np.cumsum, file=out)
    assert out.getvalue() == text + "\n"
    assert all(len(line) <= 100 for line in text.splitlines())


LABELS = {"elementwise": "elementwise", "reverse": "reverse", "forward": "forward",
          "inplace": "in place", "composite": "composite", "nondifferentiable": "no gradient",
          "shaped": "shaped",
          "recomputable": "recomputable", "joins": "joins", "complex": "complex values",
          "complex_rules": "complex operands", "user": "reverse", "route": "routed",
          "batched": "batched"}
"""The paragraph of ``explain`` that tells each facet of a Rule (``method``: a routed method's)."""


@pytest.mark.parametrize("facet", registry.FACETS)
def test_every_facet_has_its_paragraph(facet):
    import scipy.stats

    if facet == "method":
        said = facts(explain(scipy.stats.norm.logpdf))
        assert "method" in said["facets"] and "facet method" in said["routed method"]
        return
    registry.load_rule_modules()
    key = next(k for k, rule in registry.RULES.items() if registry._has(getattr(rule, facet))
               and type(k) is not tuple and (facet != "user" or not rule.route))
    said = facts(explain(key))
    assert facet in said["facets"] and LABELS[facet] in said
