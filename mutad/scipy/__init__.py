"""SciPy functions mutad differentiates, by SciPy's names: import them from here instead of
from SciPy (as ``jax.scipy`` and ``autograd.scipy``).

>>> import numpy as np, mutad
>>> from mutad.scipy import linalg
>>> mutad.gradient(lambda a: linalg.inv(a).sum(), np.array([[2.0]]))[0]
array([[-0.25]])

Each function is SciPy's own when called with plain arrays, and runs its rule when called with
traced ones inside a differentiated function.
"""

import importlib


def __getattr__(name):
    """Each module on its first read (``mutad.scipy.stats``), not by ``import mutad``: each
    imports its SciPy module, and SciPy's are slow to import (a second for all of them). A
    differentiation loads the rules of the SciPy modules the program imported, before it or
    while it runs (``registry.RULE_MODULES``)."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})


__all__ = ["fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]
