"""What a user of the installed package relies on: one version, type information that mypy
accepts, and public modules that export exactly their API.

The public modules are ``PUBLIC``. The others are internal: ``api``, ``custom``, ``trees`` and
``allocation`` implement the functions ``mutad`` exports (users import them from ``mutad``),
and hold the core's helpers beside them; the rest is the core (tape, engines, rule families,
replay) and the benchmark command's implementation. Internal modules need no ``__all__``.
"""

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.fft
import scipy.special

import mutad
import mutad.scipy
from mutad.custom import Adjoint, InplaceAdjoint

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = ("mutad", "mutad.errors", "mutad.testing", "mutad.linalg", "mutad.scipy",
          "mutad.scipy.fft", "mutad.scipy.integrate", "mutad.scipy.interpolate", "mutad.scipy.linalg",
          "mutad.scipy.ndimage", "mutad.scipy.optimize", "mutad.scipy.signal", "mutad.scipy.sparse",
          "mutad.scipy.spatial",
          "mutad.scipy.special", "mutad.scipy.stats", "mutad.distributed")

INTERNAL = ("mutad.api", "mutad.custom", "mutad.registry", "mutad.listing", "mutad.core",
            "mutad.engines", "mutad.rules", "mutad.linalg._common", "mutad.linalg.dense",
            "mutad.linalg.equations", "mutad.linalg.factorizations", "mutad.linalg.functions",
            "mutad.linalg.inplace", "mutad.linalg.lapack", "mutad.linalg.norms",
            "mutad.linalg.spectral", "mutad.linalg.structured", "mutad.scipy._adjoints",
            "mutad.scipy._devices",
            "mutad.scipy._numerics", "mutad.scipy._descriptive", "mutad.bench")
"""Internal modules; a package here stands for its submodules too."""

NOT_EXPORTED = {
    **{("mutad.scipy.stats", name): "the class of distribution objects, which are used as "
       "SciPy's are (stats.norm.logpdf(x, mu, sigma)) and never built by users"
       for name in ("Univariate", "Continuous", "Discrete", "Frozen", "MultivariateNormal",
                    "MultivariateT", "Dirichlet", "Multinomial", "VonMisesFisher", "Wishart")},
}
"""Public-looking functions and classes of public modules that are not exported, and why."""

ALSO_ANNOTATED = (Adjoint, InplaceAdjoint)
"""Classes not exported whose methods users call: what ``mutad.adjoint`` and
``mutad.inplace_adjoint`` return (``@f.rule``, ``@f.jvp_rule``)."""


def _public_modules():
    # mutad.distributed needs Dask's distributed scheduler, an optional dependency
    return [importlib.import_module(name) for name in PUBLIC
            if name != "mutad.distributed" or importlib.util.find_spec("distributed")]


def _is_mutads(obj):
    """Whether ``obj`` is mutad's own: a module, function or class of mutad, or an object of
    one of its classes (a ``mutad.adjoint`` wrapper, a distribution)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.startswith("mutad.")
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return obj.__module__.startswith("mutad")
    return type(obj).__module__.startswith("mutad.")


def _reexported(module, name, obj):
    """The names a public module exports on purpose that are not mutad's own objects."""
    if module.__name__ == "mutad.scipy.special":
        # SciPy's ufuncs, which mutad differentiates by their rows: importing them from here
        # or from SciPy is the same.
        return isinstance(obj, np.ufunc) and getattr(scipy.special, name) is obj
    if module.__name__ == "mutad.scipy.fft":
        # The shifts are rolls: NumPy's functions stand in for SciPy's.
        return name in ("fftshift", "ifftshift") and getattr(np.fft, name) is obj
    return False


# ----------------------------------------------------------------------------------------------
# The version


def _pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once():
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", mutad.__version__)
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mutad.__version__"}


def _installed():
    """mutad's installed distribution; not the metadata a build leaves in the checkout
    (``mutad.egg-info``), which lists the sources, not what was installed."""
    for distribution in importlib.metadata.distributions(name="mutad"):
        if Path(distribution.locate_file("")).resolve() != ROOT:
            return distribution
    pytest.skip("mutad is not installed (pip install .): no metadata to compare with")


def test_the_installed_metadata_has_the_packages_version():
    assert _installed().version == mutad.__version__


def test_the_installed_package_ships_py_typed():
    distribution = _installed()
    direct = json.loads(distribution.read_text("direct_url.json") or "{}")
    if direct.get("dir_info", {}).get("editable"):
        # An editable install points at the checkout, whose package has the marker itself.
        assert (Path(mutad.__file__).parent / "py.typed").is_file()
    else:
        assert "mutad/py.typed" in {str(f).replace("\\", "/") for f in distribution.files}


def test_a_fresh_import_of_mutad_differentiates_array_operations():
    """``import mutad`` alone, in a new interpreter, gives traced arrays their operations (the
    engine's dispatch, installed as ``engines.tracing`` is imported): no module of the package
    may count on another's importing it for some other name."""
    program = ("import numpy as np, mutad\n"
               "f = lambda b: np.sum(b * b.astype(np.float32))\n"
               "print(mutad.grad(f)(np.arange(3.0)).tolist())")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0.0, 2.0, 4.0]"


SCIPY_IMPORTED_LATER = """
import json, sys
import numpy as np
import mutad
from mutad.engines.replay import Program

print(json.dumps([name for name in ("scipy.integrate", "scipy.interpolate", "scipy.optimize",
                                    "scipy.signal", "scipy.sparse", "scipy.stats")
                  if name in sys.modules]))
x = np.linspace(0.1, 1.0, 4)
before = x.tobytes()
mutad.grad(lambda x: np.sin(x).sum())(x)  # (a first differentiation, before SciPy's modules)


def f(x):
    import scipy.signal, scipy.stats  # (the first import of each: in the function's body)
    return scipy.stats.norm.logpdf(scipy.signal.lfilter([1.0, 0.5], [1.0], x)).sum()


traced = mutad.grad(f)(x)
import scipy.integrate  # (between two differentiations)


def g(x):
    return scipy.integrate.trapezoid(x * x) + f(x)


replaying = mutad.value_and_grad(g, replay=True)
replaying(x)
value, replayed = replaying(x)
program, = replaying.programs.values()
assert type(program) is Program and program.replays == 1
assert x.tobytes() == before
print(traced.tolist())
print((replayed - 2 * x * [0.5, 1.0, 1.0, 0.5]).tolist())
"""


@pytest.mark.slow
def test_the_rules_of_a_scipy_module_imported_after_mutad_and_in_the_function_apply():
    """``import mutad`` imports none of SciPy's modules that it has rules for but linalg and
    special (which NumPy's own rules use): a differentiation loads the rules of those imported
    before it starts, and an import that code running in it makes (the function's own
    ``import scipy.stats``) loads them as it returns. So the gradients are the same whether
    SciPy's modules were imported before ``import mutad``, after a first differentiation or
    in the function's body, traced and replayed."""
    result = subprocess.run([sys.executable, "-c", SCIPY_IMPORTED_LATER], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    imported, traced, replayed = map(json.loads, result.stdout.splitlines())
    assert imported == []
    import scipy.signal
    import scipy.stats

    x = np.linspace(0.1, 1.0, 4)
    expected = mutad.grad(lambda x: scipy.stats.norm.logpdf(
        scipy.signal.lfilter([1.0, 0.5], [1.0], x)).sum())(x)
    assert traced == expected.tolist()
    np.testing.assert_allclose(replayed, expected, rtol=1e-13)


# ----------------------------------------------------------------------------------------------
# Type information


@pytest.mark.slow
def test_mypy_finds_no_error(tmp_path):
    # Its configuration (pyproject.toml) names the files; the cache goes to tmp_path, so a run
    # starts cold and leaves nothing in the checkout.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "mypy_cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert re.search(r"no issues found in [1-9]\d* source files", report), report


def _unannotated(function):
    """The parameters of ``function`` without an annotation, and ``return`` if it has none."""
    signature = inspect.signature(function)
    missing = [name for name, p in signature.parameters.items()
               if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_the_public_api_is_annotated():
    functions = {}
    for module in _public_modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__.startswith("mutad"):
                functions[f"{module.__name__}.{name}"] = obj
            elif inspect.isclass(obj) and obj.__module__.startswith("mutad"):
                functions.update(_methods(obj))
    for cls in ALSO_ANNOTATED:
        functions.update(_methods(cls))
    assert len(functions) > 30
    missing = {name: m for name, f in functions.items() if (m := _unannotated(f))}
    assert missing == {}


def _methods(cls):
    """The public methods (and property getters) ``cls`` defines itself, and ``__init__`` and
    ``__call__``."""
    out = {}
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        function = member.fget if isinstance(member, property) else member
        if inspect.isfunction(function):
            out[f"{cls.__module__}.{cls.__qualname__}.{name}"] = function
    return out


# ----------------------------------------------------------------------------------------------
# What each public module exports


def test_every_module_is_public_or_internal():
    found = [m.name for m in pkgutil.walk_packages(mutad.__path__, "mutad.")]
    unclassified = [name for name in found if name not in PUBLIC and not any(
        name == i or name.startswith(i + ".") for i in INTERNAL)]
    assert unclassified == []


def test_each_public_module_defines_all():
    for module in _public_modules():
        exported = module.__dict__.get("__all__")
        assert isinstance(exported, list), module.__name__
        assert all(isinstance(name, str) for name in exported), module.__name__
        assert len(set(exported)) == len(exported), module.__name__


def test_every_exported_name_exists_and_is_mutads():
    wrong = []
    for module in _public_modules():
        for name in module.__all__:
            if not hasattr(module, name):
                wrong.append(f"{module.__name__}.{name}: missing")
                continue
            obj = getattr(module, name)
            if not (_is_mutads(obj) or _reexported(module, name, obj)):
                wrong.append(f"{module.__name__}.{name}: {obj!r} is not mutad's")
    assert wrong == []


def test_star_import_gives_exactly_all():
    for module in _public_modules():
        namespace = {}
        exec(f"from {module.__name__} import *", namespace)
        assert set(namespace) - {"__builtins__"} == set(module.__all__), module.__name__


def test_every_public_function_and_class_is_exported():
    # A public module's own functions and classes, and the wrappers and distributions it makes
    # (callable objects of mutad's classes); for the package, whatever it imports from mutad.
    forgotten = []
    for module in _public_modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or isinstance(obj, types.ModuleType):
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                own = (obj.__module__ == module.__name__ or module is mutad and _is_mutads(obj))
            else:
                own = callable(obj) and _is_mutads(obj)
            if own and name not in module.__all__ and (module.__name__, name) not in NOT_EXPORTED:
                forgotten.append(f"{module.__name__}.{name}")
    assert forgotten == []


def test_no_leaked_internals():
    # What the modules import for themselves stays out of what they export.
    for module in _public_modules():
        exported = set(module.__all__)
        assert not exported & {"np", "numpy", "scipy", "Traced", "get_lapack_funcs",
                               "get_blas_funcs", "functools", "math"}, module.__name__


def test_every_exported_name_has_a_docstring():
    for module in _public_modules():
        undocumented = [name for name in module.__all__
                        if not (getattr(getattr(module, name), "__doc__", None) or "").strip()]
        assert undocumented == [], module.__name__


def test_the_readme_api_table_lists_mutads_exports():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The API"):]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert set(re.findall(r"\bmutad\.(\w+)", table)) == set(mutad.__all__)


def test_mutad_scipy_exports_each_public_submodule():
    submodules = {m.name for m in pkgutil.iter_modules(mutad.scipy.__path__)
                  if not m.name.startswith("_")}
    assert set(mutad.scipy.__all__) == submodules


def test_mutad_scipy_fft_exports_every_transform_it_has_stages_for():
    from mutad.rules.fft import HERMITIAN_ND, STAGES
    from mutad.scipy import fft

    transforms = set(fft.__all__) - {"fftshift", "ifftshift", "fht", "ifht"}  # (SciPy's steps)
    real_to_real = {"dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn"}
    assert transforms == set(STAGES) | set(HERMITIAN_ND) | real_to_real
    assert all(getattr(fft, name).fn is getattr(scipy.fft, name) for name in transforms)
