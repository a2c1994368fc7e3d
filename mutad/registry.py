"""What mutad knows of each function (the rule index is the core's, ``mutad.core.registry``).

``RULES[func]`` is the one :class:`Rule` of a function the core intercepts (a NumPy function, a
ufunc, a SciPy function, a method of a library's class), whose facets say how each engine
differentiates it; ``explain(func)`` prints it.

>>> import numpy as np, mutad
>>> mutad.registry.RULES[np.cumsum].reverse is not None
True
"""

from .core.registry import RULES, Rule, explain, lookup

__all__ = ["RULES", "Rule", "explain", "lookup"]
