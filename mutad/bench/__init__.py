"""mutad-bench: the workloads W1-W6, the measurement protocol and the CLI.

``workloads`` defines what is computed, ``peers`` each system's version of it (mutad's
policies and its replay, plain NumPy, PyTorch, JAX, HIPS autograd), ``harness`` how one
configuration is measured in a fresh interpreter, ``report`` the tables and files, ``cli`` the
command ``mutad-bench`` (also ``python -m mutad.bench``). The workloads page of the
documentation, docs/workloads.md, defines the workloads; docs/benchmarks.md describes the
measurement.
"""
