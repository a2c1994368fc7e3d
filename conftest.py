"""Loaded by pytest before any test module, and so before NumPy: one BLAS thread.

The tests use small matrices, for which threaded BLAS only adds synchronisation; on a busy
machine its threads wait on each other and a one-second suite takes minutes.
"""

import os

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
