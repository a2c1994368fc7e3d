"""The tests of ``tests/test_device_arrays.py`` on CuPy and a GPU, where there is one.

The same programs, with CuPy in place of the stand-in (``device_array``): gradients on the
device, no implicit conversion to NumPy, and the NumPy gradients of the same programs, to a
relative ``RTOL`` rather than bit for bit (a GPU's math library and the order of its
reductions round otherwise than NumPy's). Skipped where ``cupy`` cannot be imported or finds
no device; marked ``cupy``, so ``python -m pytest -m cupy`` runs these alone.
"""

import inspect
import sys

import pytest

pytestmark = pytest.mark.cupy


def _cupy_with_a_device():
    try:
        import cupy
    except ImportError:
        return None
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except Exception:  # noqa: BLE001 - no driver, no device: CuPy raises its own errors
        return None
    return cupy


cupy = _cupy_with_a_device()
if cupy is None:
    pytest.skip("cupy cannot be imported, or finds no GPU", allow_module_level=True)

import test_device_arrays  # noqa: E402

_source = inspect.getsource(test_device_arrays).replace(
    "import device_array as xp\n", "import cupy as xp\n").replace(
    "EXACT = True\n", "EXACT = False\n")
exec(compile(_source, inspect.getsourcefile(test_device_arrays), "exec"),  # noqa: S102
     sys.modules[__name__].__dict__)
pytestmark = pytest.mark.cupy
