"""The rule families. Importing this package registers every rule, in a fixed order."""

from . import creation, nondiff, reductions, ufuncs  # noqa: F401
