"""The rule families. Importing this package registers every rule, in a fixed order.

Families share helpers through ``_helpers`` (and the factorisations' derivatives through
``factorizations``), never by importing one another.
"""

from . import composites, creation, indexing, linalg, nondiff, reductions, shape, ufuncs  # noqa: F401
