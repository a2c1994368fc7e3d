"""The seed case (Zygote.jl issue #120): a gradient that reaches the output only through memory.

`add_vecs` adds b into a in place and returns nothing, so b influences the sum only because a's
memory changed. A system that passes gradients around as values reports d/db = 0; the right
answer is ones for both arguments. The second spelling rebinds a to the helper's result.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad


def add_vecs(a, b):
    a += b


def add_sum(a, b):
    add_vecs(a, b)  # mutates a, returns nothing
    return a.sum()


def add_vecs_returning(a, b):
    a += b
    return a


def add_sum_rebinding(a, b):
    a = add_vecs_returning(a, b)
    return a.sum()


if __name__ == "__main__":
    a, b = np.zeros(3), np.ones(3)
    for f in (add_sum, add_sum_rebinding):
        da, db = mutad.gradient(f, a, b)
        print(f"{f.__name__}: d/da = {da}, d/db = {db}")
        assert np.array_equal(da, np.ones(3)) and np.array_equal(db, np.ones(3))
    assert np.array_equal(a, np.zeros(3)), "the caller's array must come back as it was"
    print(f"a after both gradients: {a} (unchanged)")
