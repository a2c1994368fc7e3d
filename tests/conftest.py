import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Under CI the same programs run every time, so a submission never fails on a new random draw;
# locally each run explores new ones.
settings.register_profile(
    "default", max_examples=100, deadline=None, derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
