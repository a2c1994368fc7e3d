"""mutad: reverse-mode automatic differentiation for NumPy code that mutates arrays in place.

>>> import numpy as np, mutad
>>> def f(u):
...     u[1:-1] += 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
...     return (u * u).sum()
>>> grad, = mutad.gradient(f, np.linspace(0.0, 1.0, 5))
>>> grad.round(3).tolist()
[0.05, 0.5, 1.0, 1.3, 2.15]
"""

from . import rules  # noqa: F401  (registers every rule family)
from .api import (grad, gradient, hessian, hvp, jacfwd, jacobian, jacrev, jvp, make_tape,
                  pullback, stop_gradient, value_and_grad, value_and_gradient, vjp)
from .core.errors import MutadError
from .core.allocation import plain_allocation
from .core.trees import register_pytree
from .custom import adjoint, inplace_adjoint
from .core.debug import detect_anomaly
from . import errors, linalg, registry, testing
from .testing import check_grads, check_jvp

# The one place the version is written: the package's metadata takes it from here (pyproject.toml
# names this attribute; setuptools parses the assignment without importing the package).
__version__ = "0.1.0"

__all__ = ["MutadError", "adjoint", "check_grads", "check_jvp", "detect_anomaly", "errors", "grad",
           "gradient",
           "hessian", "hvp", "inplace_adjoint", "jacfwd", "jacobian", "jacrev", "jvp", "linalg",
           "make_tape", "plain_allocation", "pullback", "register_pytree", "stop_gradient",
           "testing", "value_and_grad", "value_and_gradient", "vjp"]
