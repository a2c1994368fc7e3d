"""The engines: the array layer both modes share (``arraylike``, ``products``, ``recompute``,
``elementwise``, ``writes``), reverse mode's tracing (``reverse``, ``inplace``, ``operations``,
``tracing``) and forward mode's duals (apart: neither imports the other), the replay of
recorded programs with its compiled blocks, and a differentiation from start to end in either
mode (``session``): the import layers 2 to 4 but the rules (tests/test_layers.py).
"""
