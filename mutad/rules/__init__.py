"""The rule families. Importing this package registers every rule, in a fixed order.

Families share helpers through ``_helpers``, never by importing one another. The matrix
functions of ``np.linalg`` are rules of ``mutad.linalg``'s families, beside SciPy's (layer 5).
"""

import numpy as np

from ..core.registry import complex_aware, defcomposite, lookup, table
from . import (composites, contractions, creation, fft, indexing, masked, nondiff, polynomial,
               records, reductions, shape, ufuncs)

FAMILIES = (composites, contractions, creation, fft, indexing, masked, nondiff, polynomial,
            records, reductions, shape, ufuncs)
"""The rule families, each registering its rules as it is imported (in this order)."""

# ``ufunc.at`` of every elementwise row, once all rows are in: ``np.add.at`` and
# ``np.subtract.at`` have handlers of their own; the others apply their occurrences in rounds.
# ``ufunc.outer`` of every row of two operands: the ufunc of the first operand reshaped
# against the second, which broadcasting makes the same values; ``ufunc.accumulate`` where no
# rule of its own is written: the ufunc applied step by step, as NumPy's loop applies it, and
# ``ufunc.reduce`` the same fold (checked against NumPy's reduction: its order may differ);
# ``ufunc.reduceat`` of the selections, segment by segment.
for _ufunc in table("elementwise"):
    if _ufunc.nout == 1 and lookup((_ufunc, "at")).inplace is None:
        defcomposite((_ufunc, "at"))(indexing.at_in_rounds(_ufunc))
        complex_aware((_ufunc, "at"))  # each round is the ufunc's own call
    if _ufunc.nin == 2 and _ufunc.nout == 1:
        defcomposite((_ufunc, "outer"))(shape.outer_of(_ufunc))
        complex_aware((_ufunc, "outer"))  # the ufunc's own call
        if lookup((_ufunc, "accumulate")).reverse is None:  # np.maximum.accumulate: step by step
            defcomposite((_ufunc, "accumulate"))(shape.accumulate_of(_ufunc))
        if lookup((_ufunc, "reduce")).reverse is None:  # np.logaddexp.reduce: fold by fold
            defcomposite((_ufunc, "reduce"))(shape.reduce_of(_ufunc))
            complex_aware((_ufunc, "reduce"))  # the ufunc's own calls
for _ufunc in (np.maximum, np.minimum):  # selections: the same value in any order
    defcomposite((_ufunc, "reduceat"))(shape.reduceat_of(_ufunc))
del _ufunc
