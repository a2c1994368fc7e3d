"""Every example runs as a user runs it, ``python examples/NAME.py``, and succeeds.

Each runs in a fresh interpreter without the thread settings CI exports, so that the example's
own limit on BLAS and OpenMP threads is what is tested: set inside a process that has already
imported NumPy, it would do nothing.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The slow kind (every example script, in a fresh interpreter): not in the fast subset,
# python -m pytest -m "not slow".
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

# No test reads a clock to decide (a busy laptop must pass): an example whose BLAS threads would
# fight over busy cores is caught by reading its source (``limits_threads_first``), not by
# timing it; how long the examples take is for the benchmarks to say.


def user_environment():
    """This process's environment without the thread settings, and with the checkout's mutad
    first on the path, as the rest of the tests import it."""
    env = {name: value for name, value in os.environ.items() if name not in THREAD_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, tmp_path):
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=user_environment(),
                         capture_output=True, text=True)
    assert run.returncode == 0, f"{path.name} failed:\n{run.stdout}\n{run.stderr}"
    assert run.stdout.strip(), f"{path.name} printed nothing"


def limits_threads_first(source):
    """Whether ``os.environ.setdefault`` gives each thread variable a value in the statements
    before the first import of anything but ``os``: NumPy's BLAS reads them once, when NumPy is
    first imported."""
    tree = ast.parse(source)
    before = []
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            imported = {alias.name for alias in statement.names}
        elif isinstance(statement, ast.ImportFrom):
            imported = {statement.module}
        else:
            imported = set()
        if imported - {"os"}:
            break
        before.append(ast.get_source_segment(source, statement))
    text = "\n".join(before)
    return "os.environ.setdefault" in text and all(f'"{name}"' in text for name in THREAD_VARIABLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_limits_threads_before_importing_numpy(path):
    assert limits_threads_first(path.read_text()), \
        f"{path.name} must set {THREAD_VARIABLES} with os.environ.setdefault before other imports"


def test_the_thread_check_can_fail():
    limit = ('for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):\n'
             '    os.environ.setdefault(name, "1")\n')
    assert limits_threads_first("import os\n" + limit + "import numpy\n")
    assert not limits_threads_first("import os\nimport numpy\n" + limit)
    assert not limits_threads_first("import os\n" + limit.replace("MKL", "XYZ") + "import numpy\n")
