"""The core: what both engines stand on and nothing above them knows of NumPy's functions.

Errors, the tape and its records (``tape``), the differentiation levels, the rule index
(``registry``), device arrays, views of memory and the shadows that hold cotangents, pytrees,
the allocation mode that follows arrays made inside ``f``, the checks of arguments, and
debugging (source lines, warnings, anomalies): the import layers 0 and 1 (tests/test_layers.py).
"""
