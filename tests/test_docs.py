"""Every code snippet of the documentation site runs, so the pages cannot drift from the code.

Each page's ```python blocks are executed in order in one namespace (as a reader pastes them
into one session), in a fresh working directory; where every ``print(...)`` line of a block ends
in a ``# -> output`` comment, what the block prints must be those outputs. ```pycon blocks are
doctests whose printed output must match. Blocks inside directives (a ``{note}``, a ``{tab}``) count too. Fences of
any other language (``text``, ``console``, ``bash``) are for reading only.
"""

import contextlib
import doctest
import importlib
import importlib.util
import io
import re
import warnings
from pathlib import Path

import pytest

import mutad
import mutad.scipy

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})(?P<info>.*)$")


def snippets(text):
    """The (language, line number of its first line, source) of each fenced block, directives
    opened up."""
    return list(_blocks(text.splitlines(), 1))


def _blocks(lines, first_line):
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = lines[i + 1:end]
        if info.startswith("{"):  # a directive: its body may hold code blocks of its own
            yield from _blocks(_without_options(body), first_line + i + 1)
        else:
            language = info.split()[0] if info else ""
            yield language, first_line + i + 1, "\n".join(body) + "\n"
        i = end + 1


def _closes(line, fence):
    stripped = line.strip()
    return stripped.startswith(fence) and set(stripped) == {fence[0]}


def _without_options(body):
    """A directive's body without its ``:option: value`` lines, blanked to keep line numbers."""
    return ["" if re.match(r"^:\w[\w-]*:", line) else line for line in body]


def promised_output(source):
    """The lines a block says it prints, or None where a ``print`` line says nothing."""
    promised = []
    for line in source.splitlines():
        if line.lstrip().startswith("print("):
            printed, arrow, output = line.partition("# -> ")
            if not arrow:
                return None
            promised.append(output.strip())
    return promised


def test_the_fence_reader():
    text = "\n".join([
        "# page", "```python", "x = 1", "```", "````{note}", ":class: tip", "```pycon",
        ">>> x", "1", "```", "````", "```text", "not run", "```", "```", "no language", "```",
    ])
    assert snippets(text) == [("python", 3, "x = 1\n"), ("pycon", 8, ">>> x\n1\n"),
                              ("text", 13, "not run\n"), ("", 16, "no language\n")]


def test_promised_output():
    assert promised_output("x = 1\nprint(x)  # -> 1\n  print(2)   # -> 2\n") == ["1", "2"]
    assert promised_output("print(x)\nprint(y)  # -> 2\n") is None
    assert promised_output("x = 1\n") == []


def test_the_site_has_its_pages():
    names = {str(p.relative_to(DOCS)) for p in PAGES}
    assert {"index.md", "getting-started.md", "api.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_snippets_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for language, line, source in snippets(page.read_text()):
        where = f"{page.relative_to(DOCS)}:{line}"
        if language == "python":
            # Padded so that a traceback's line numbers are the page's.
            code = compile("\n" * (line - 1) + source, str(page), "exec")
            printed = io.StringIO()
            with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
                warnings.simplefilter("error")  # a snippet that warns shows the reader a warning
                exec(code, namespace)
            promised = promised_output(source)
            if promised:
                said = [" ".join(out.split()) for out in printed.getvalue().splitlines()]
                assert said == [" ".join(out.split()) for out in promised], \
                    f"the block at {where} prints something else than its comments say"
        elif language == "pycon":
            test = doctest.DocTestParser().get_doctest(source, namespace, where, where, line)
            result = runner.run(test, clear_globs=False)
            assert result.failed == 0, f"the doctest at {where} printed something else"


PUBLIC_MODULES = ["mutad", "mutad.errors", "mutad.testing", "mutad.linalg", "mutad.scipy"] + [
    f"mutad.scipy.{name}" for name in mutad.scipy.__all__] + (
    ["mutad.distributed"] if importlib.util.find_spec("distributed") else [])
AUTODOC = re.compile(r"^\.\. auto(?P<kind>\w+):: (?P<target>[\w.]+)")


def documented(page):
    """The objects the API page documents: ``auto*`` targets, and the ``__all__`` of each module
    shown with ``:members:`` (the site's configuration lists the SciPy modules' names)."""
    names = set()
    lines = page.read_text().splitlines()
    for i, line in enumerate(lines):
        directive = AUTODOC.match(line.strip())
        if not directive:
            continue
        target = directive["target"]
        names.add(target)
        options = []
        for option in lines[i + 1:]:
            if not option.strip().startswith(":"):
                break
            options.append(option.strip())
        if directive["kind"] == "module":
            if target == "mutad.distributed" and not importlib.util.find_spec("distributed"):
                continue  # an optional dependency's module, not installed
            module = importlib.import_module(target)
            if ":members:" in options or target.startswith("mutad.scipy."):
                names.update(f"{target}.{name}" for name in module.__all__)
    return names


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_the_api_page_documents_every_public_name(module_name):
    module = importlib.import_module(module_name)
    names = documented(DOCS / "api.md")
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        # A name re-exported from another public module may be documented there instead.
        home = obj.__name__ if isinstance(obj, type(module)) else \
            f"{getattr(obj, '__module__', module_name)}.{name}"
        if f"{module_name}.{name}" not in names and home not in names:
            missing.append(name)
    assert not missing, f"docs/api.md does not document {module_name}: {missing}"


REPOSITORY = DOCS.parent
MARKDOWN_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("document", ["README.md", "CONTRIBUTING.md", "benchmarks/RESULTS.md",
                                      "benchmarks/RESULTS-solvers.md",
                                      "benchmarks/RESULTS-kernels.md"])
def test_links_stay_inside_the_repository(document):
    """The project documents itself: each relative link of its Markdown files names a file of
    the repository (the site's pages are checked by its strict build)."""
    path = REPOSITORY / document
    for link in MARKDOWN_LINK.finditer(path.read_text()):
        target = link["target"]
        if re.match(r"^[a-z]+:", target):  # a web address
            continue
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to(REPOSITORY) and resolved.exists(), \
            f"{document} links to {target}, which is not a file of the repository"


def table_mismatches(text):
    """The line numbers of tables whose separator row has another number of columns than
    their header: Markdown then shows the table as a paragraph of pipes."""
    lines = text.splitlines()
    return [i + 1 for i in range(1, len(lines))
            if re.match(r"^\s*\|?\s*:?-{3,}", lines[i]) and "|" in lines[i]
            and _cells(lines[i]) != _cells(lines[i - 1])]


def _cells(row):
    return len(row.strip().strip("|").split("|"))


def test_table_mismatches():
    assert table_mismatches("| a | b |\n|---|---|\n| 1 | 2 |") == []
    assert table_mismatches("| a | b | c |\n|---|---|\n| 1 | 2 | 3 |") == [2]


@pytest.mark.parametrize("page", PAGES + [REPOSITORY / "README.md", REPOSITORY / "CONTRIBUTING.md",
                                          REPOSITORY / "benchmarks" / "RESULTS.md",
                                          REPOSITORY / "benchmarks" / "RESULTS-solvers.md",
                                          REPOSITORY / "benchmarks" / "RESULTS-kernels.md"],
                         ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_tables_have_as_many_columns_as_headers(page):
    assert table_mismatches(page.read_text()) == []
