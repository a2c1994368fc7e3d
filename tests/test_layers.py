"""The import layers of mutad: every module imports only from its own layer and those below,
the two engines never import each other, and no import circle exists.

The layers, lowest first (CONTRIBUTING.md, "Architecture", says what each holds), and the
folders that hold them (core/, engines/, rules/, the public faces at the top, bench/):

    0  core engines (folders: empty)
       core.errors core.tape           the leaves; no NumPy at import (errors takes only
       core.levels core.registry        NumPy's LinAlgError, as a base class); device
       core.devices                     libraries' arrays (CuPy's), their namespace and memory
    1  core.views core.shadows         NumPy plumbing, and the caller's side of a
       core.trees core.allocation       differentiation; source lines, warnings, anomalies
       core.arguments core.debug        (saves of traced values, and the reads of them:
       core.written                     refused)
    2  engines.arraylike               the array layer both engines share,
       engines.products                 recomputation, and the records of elementwise
       engines.recompute                operations and of writes (their undo)
       engines.elementwise engines.writes
    3  engines.reverse                 the engines, reverse and forward: apart; reverse
       engines.inplace                  mode's in four modules, each importing only those
       engines.operations               before it (the tape and the traced array, writes,
       engines.tracing                  operations, the traced array's dispatch)
       | engines.forward
    4  custom rules rules.*            rules, and the functions users give rules to;
       engines.replay engines.blocks    recorded programs, replayed and compiled; a
       engines.session                  differentiation from start to end, either mode
    5  api listing testing linalg      what users call; the linear algebra families
       linalg.* scipy scipy.*           (linalg.*: NumPy's and SciPy's rules of a function
       distributed errors registry      side by side, on SciPy's wrappers); the faces of
                                        the core's errors and rule index
    6  mutad bench bench.*             the package itself, and its tools

Every import counts: at the top of a module or inside a function, absolute or relative. A
module missing from the table fails the test, so a new one is placed on purpose.
"""

import ast
import functools
from pathlib import Path

import mutad

LAYERS = [
    ("core", "engines", "core.errors", "core.tape", "core.levels", "core.registry",
     "core.devices"),
    ("core.views", "core.shadows", "core.trees", "core.allocation", "core.arguments",
     "core.debug", "core.written"),
    ("engines.arraylike", "engines.products", "engines.recompute", "engines.elementwise",
     "engines.writes"),
    ("engines.reverse", "engines.inplace", "engines.operations", "engines.tracing",
     "engines.forward"),
    ("custom", "rules", "rules.*", "engines.replay", "engines.blocks", "engines.session"),
    ("api", "listing", "testing", "linalg", "linalg.*", "scipy", "scipy.*", "distributed",
     "errors", "registry"),
    ("mutad", "bench", "bench.*"),
]
APART = {3: [("engines.reverse", "engines.inplace", "engines.operations", "engines.tracing"),
             ("engines.forward",)]}
"""Layers of sides apart: a module of such a layer imports no module of another side, and of
its own side only those before it."""
NO_NUMPY = ("core.tape", "core.levels", "core.registry")
"""Modules that import no NumPy at import time (tape none at all: tests/test_tape.py)."""

PACKAGE = Path(mutad.__file__).parent


def _name(path):
    """``rules.contractions`` for mutad/rules/contractions.py, ``mutad`` for the package itself."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts).removeprefix("mutad.")


def _file(absolute):
    """The file of module ``absolute`` (``mutad.rules.contractions``), or None if it is not one."""
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


def before(target, module, sides):
    """Whether ``target`` comes before ``module`` on one of ``sides``."""
    return any(module in side and target in side[:side.index(module)] for side in sides)


@functools.cache  # (parsing every module takes seconds; the four tests read one graph)
def graph():
    """``{module: [(imported module, line, at top level)]}`` for every module of mutad."""
    return {_name(path): imports(_name(path), path.read_text())
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_walker_sees_every_kind_of_import():
    source = """
from ..engines import tracing
from ..core.tape import Tape
from .contractions import rule_for
import mutad.core.levels
import numpy as np

def f():
    from ..engines.forward import Dual
    from mutad.scipy import special
"""
    found = {(module, top) for module, _, top in imports("rules.indexing", source)}
    assert found == {("engines.tracing", True), ("core.tape", True),
                     ("rules.contractions", True), ("core.levels", True), ("numpy", True),
                     ("engines.forward", False), ("scipy.special", False)}
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
            if theirs > mine or (theirs == mine and mine in APART
                                 and not before(target, module, APART[mine])):
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
