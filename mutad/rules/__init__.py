"""The rule families. Importing this package registers every rule, in a fixed order."""

from . import composites, creation, indexing, linalg, nondiff, reductions, shape, ufuncs  # noqa: F401
