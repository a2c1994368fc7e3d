import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# The same programs run every time, so the test command passes or fails on the code alone,
# never on a new random draw; MUTAD_EXPLORE=1 draws new ones (as the soak command does, longer).
settings.register_profile(
    "default", max_examples=100, deadline=None,
    derandomize=not os.environ.get("MUTAD_EXPLORE"),
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")

# A replay that fails on a mistake of mutad's own raises it, rather than tracing the call
import mutad.engines.replay  # noqa: E402

mutad.engines.replay.STRICT = True


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def inverting(monkeypatch):
    """Writes of any size undone by their inverses where exact (by default a write of a few
    KiB is copied instead: ``mutad.core.tape.SMALL_WRITE``), for tests of the inverses that use
    small arrays."""
    import mutad.core.tape

    monkeypatch.setattr(mutad.core.tape, "SMALL_WRITE", 0)


@pytest.fixture
def fresh_process():
    """Runs a Python script in a new process, this checkout first on its path (what a process
    has imported decides what a test of imports sees); fails where the script fails, with its
    error output."""
    def run(script):
        root = Path(__file__).resolve().parent.parent
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                cwd=root, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                    filter(None, [str(root), os.environ.get("PYTHONPATH")]))})
        assert result.returncode == 0, result.stderr
    return run
