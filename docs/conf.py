"""Sphinx configuration of mutad's documentation site.

Pages are Markdown (MyST), so the README's style carries over; the API reference is generated
from the docstrings by autodoc. ``sphinx-build -W -n`` treats every warning as an error and
checks every cross-reference.
"""

import importlib
import sys
from pathlib import Path

# The checkout's own package, so that the site documents the code beside it, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mutad  # noqa: E402
import mutad.scipy  # noqa: E402

project = "mutad"
author = "The mutad developers"
copyright = "2026, the mutad developers"
release = mutad.__version__
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_generated"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True

# Names from other libraries in signatures and docstrings: the site is built without network
# access, so their inventories are not fetched; only mutad's own references are checked.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|scipy|collections|typing|types|contextlib|abc)(\..*)?"),
    ("py:class", r"(Callable|Any|Sequence|Iterator|Iterable|Mapping|ArrayLike|NDArray|TypeVar)(\[.*)?"),
    # Type variables in signatures (stop_gradient(x: T) -> T): placeholders, not objects.
    ("py:class", r"mutad(\.\w+)+\.(T|Rule)"),
]
# Shown as written, not expanded into NumPy's definitions of them.
autodoc_type_aliases = {"NDArray": "numpy.typing.NDArray", "ArrayLike": "numpy.typing.ArrayLike"}

html_theme = "furo"
html_title = "mutad"
html_static_path = []


def _scipy_names():
    """The API page's list of the SciPy functions mutad differentiates, made from the modules'
    ``__all__`` at each build so that it cannot fall behind them."""
    lines = []
    for name in mutad.scipy.__all__:
        module = importlib.import_module(f"mutad.scipy.{name}")
        names = ", ".join(f"`{member}`" for member in sorted(module.__all__))
        lines.append(f"- `mutad.scipy.{name}`: {names}")
    target = Path(__file__).parent / "_generated" / "scipy-names.md"
    target.parent.mkdir(exist_ok=True)
    text = "\n".join(lines) + "\n"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


_scipy_names()
