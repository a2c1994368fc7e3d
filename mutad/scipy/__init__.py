"""SciPy functions mutad differentiates, by SciPy's names: import them from here instead of
from SciPy (as ``jax.scipy`` and ``autograd.scipy``).

>>> import numpy as np, mutad
>>> from mutad.scipy import linalg
>>> mutad.gradient(lambda a: linalg.inv(a).sum(), np.array([[2.0]]))[0]
array([[-0.25]])

Each function is SciPy's own when called with plain arrays, and runs its rule when called with
traced ones inside a differentiated function.
"""

from . import (fft, integrate, interpolate, linalg, ndimage, optimize, signal, sparse, spatial,
               special, stats)

__all__ = ["fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]
