"""The import layers of mutad: every module imports only from its own layer and those below,
the two engines never import each other, and no import circle exists.

The layers, lowest first (CONTRIBUTING.md, "Architecture", says what each holds):

    0  errors tape levels registry         the leaves; no NumPy at import (errors takes only
       devices                              NumPy's LinAlgError, as a base class); device
                                            libraries' arrays (CuPy's), their namespace and memory
    1  views shadows trees allocation      NumPy plumbing, and the caller's side of a
       arguments debug                      differentiation; source lines, warnings, anomalies
    2  arraylike products recompute        the array layer both engines share,
       elementwise writes                   recomputation, and the records of elementwise
                                            operations and of writes (their undo)
    3  tracing | forward                   the engines, reverse and forward: apart
    4  custom rules rules.* replay         rules, and the functions users give rules to;
       blocks session                       recorded programs, replayed and compiled; a
                                            differentiation from start to end, either mode
    5  api listing testing linalg        what users call; the linear algebra families
       linalg.* scipy scipy.*              (linalg.*: NumPy's and SciPy's rules of a function
       distributed                          side by side, on SciPy's wrappers)
    6  mutad bench bench.*                 the package itself, and its tools

Every import counts: at the top of a module or inside a function, absolute or relative. A
module missing from the table fails the test, so a new one is placed on purpose.
"""

import ast
from pathlib import Path

import mutad

LAYERS = [
    ("errors", "tape", "levels", "registry", "devices"),
    ("views", "shadows", "trees", "allocation", "arguments", "debug"),
    ("arraylike", "products", "recompute", "elementwise", "writes"),
    ("tracing", "forward"),
    ("custom", "rules", "rules.*", "replay", "blocks", "session"),
    ("api", "listing", "testing", "linalg", "linalg.*", "scipy", "scipy.*", "distributed"),
    ("mutad", "bench", "bench.*"),
]
APART = {3}
"""Layers whose modules may not import each other."""
NO_NUMPY = ("tape", "levels", "registry")
"""Modules that import no NumPy at import time (tape none at all: tests/test_tape.py)."""

PACKAGE = Path(mutad.__file__).parent


def _name(path):
    """``rules.linalg`` for mutad/rules/linalg.py, ``mutad`` for the package itself."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts).removeprefix("mutad.")


def _file(absolute):
    """The file of module ``absolute`` (``mutad.rules.linalg``), or None if it is not one."""
    base = PACKAGE.parent.joinpath(*absolute.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def imports(name, source):
    """What module ``name`` (as in ``LAYERS``) imports from mutad and NumPy, as ``(module,
    line, whether at top level)``: every import statement, inside functions too, relative or
    absolute; ``numpy`` for any NumPy module."""
    absolute = "mutad" if name == "mutad" else f"mutad.{name}"
    path = _file(absolute)
    package = absolute if path is not None and path.name == "__init__.py" else (
        absolute.rpartition(".")[0])
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            # ``from . import tracing`` names a module; ``from .tape import Tape`` an attribute.
            targets = [f"{target}.{alias.name}" if _file(f"{target}.{alias.name}") else target
                       for alias in node.names]
        else:
            continue
        for target in targets:
            root = target.split(".")[0]
            if root in ("mutad", "numpy"):
                module = "numpy" if root == "numpy" else target.removeprefix("mutad.")
                found.append((module, node.lineno, id(node) in top))
    return found


def layer_of(module):
    for number, names in enumerate(LAYERS):
        if module in names or any(n.endswith(".*") and module.startswith(n[:-1])
                                  for n in names):
            return number
    return None


def graph():
    """``{module: [(imported module, line, at top level)]}`` for every module of mutad."""
    return {_name(path): imports(_name(path), path.read_text())
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_walker_sees_every_kind_of_import():
    source = """
from .. import tracing
from ..tape import Tape
from .linalg import rule_for
import mutad.levels
import numpy as np

def f():
    from ..forward import Dual
    from mutad.scipy import special
"""
    found = {(module, top) for module, _, top in imports("rules.indexing", source)}
    assert found == {("tracing", True), ("tape", True), ("rules.linalg", True),
                     ("levels", True), ("numpy", True), ("forward", False),
                     ("scipy.special", False)}
    assert {m for m, _, _ in imports("mutad", "from . import rules\nfrom .api import grad\n")} \
        == {"rules", "api"}


def test_every_module_has_a_layer():
    assert [m for m in graph() if layer_of(m) is None] == []


def test_no_module_imports_from_a_layer_above_it():
    upward = []
    for module, edges in graph().items():
        for target, line, _ in edges:
            if target == "numpy" or target == module:
                continue
            mine, theirs = layer_of(module), layer_of(target)
            if theirs > mine or (theirs == mine and mine in APART):
                upward.append(f"{module}:{line} imports {target} (layer {mine} -> {theirs})")
    assert upward == []


def test_no_import_circle():
    edges = {m: {t for t, _, _ in e if t != "numpy" and t != m} for m, e in graph().items()}
    done, path = set(), []

    def visit(module):
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(edges.get(module, ())):
            circle = visit(target)
            if circle:
                return circle
        path.pop()
        done.add(module)
        return None

    circles = [c for c in (visit(m) for m in sorted(edges)) if c]
    assert circles == [], " -> ".join(circles[0])


def test_the_leaves_import_no_numpy_at_import_time():
    found = graph()
    assert [(m, line) for m in NO_NUMPY for t, line, top in found[m] if t == "numpy" and top] \
        == []
