"""An in-place primitive with a rule of its own: the seed case of the design.

`add_vecs_` writes into its first argument. Its rule runs it, then returns `back`, which
restores `a` by subtracting `b` again (no copy of `a` is kept) and accumulates the gradients
into the shadows it is handed. It also has a forward rule, which updates the tangent of
`a` in place. `mutad.testing.check_rule` proves both right: the forward rule and the gradient
against finite differences, accumulation into non-zero shadows, restoration, and the aliased
call `add_vecs_(a, a)`.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np

import mutad
from mutad.testing import check_rule


@mutad.inplace_adjoint(writes=("a",))
def add_vecs_(a, b):
    """a += b, in place."""
    a += b
    return a


@add_vecs_.rule
def _add_vecs_rule(a, b):  # a, b: the plain arrays behind the traced ones
    add_vecs_(a, b)  # plain arrays in, so this just runs

    def back(da, db):  # the shadows of a and b, updated in place
        if a is b:
            a[...] *= 0.5  # add_vecs_(a, a) doubled a
        else:
            a[...] -= b  # restore a to its value before the call
        db += da  # dL/db += dL/da; dL/da (before) = dL/da (after)

    return back


@add_vecs_.jvp_rule
def _add_vecs_forward(tangents, a, b):  # forward mode: tangents ride alongside
    da, db = tangents  # da is always an array (a is written); db is None for a constant b
    add_vecs_(a, b)
    if db is not None:
        da += db  # the tangent is updated in place, as the primal is
    return a


def add_sum(a, b):
    add_vecs_(a, b)  # b reaches the sum only through a's memory
    return a.sum()


if __name__ == "__main__":
    a, b = np.zeros(3), np.ones(3)
    da, db = mutad.gradient(add_sum, a, b)
    print(f"d add_sum / da = {da}, d add_sum / db = {db}")
    assert np.array_equal(da, np.ones(3)) and np.array_equal(db, np.ones(3))
    assert np.array_equal(a, np.zeros(3)), "the caller's a is as it was"
    print(f"add_vecs_ on plain arrays just runs: {add_vecs_(np.zeros(2), np.ones(2))}")
    _, tangent = mutad.jvp(add_sum, (a, b), (np.zeros(3), np.ones(3)))
    print(f"forward mode: d add_sum along b = ones: {tangent}")
    assert tangent == 3.0
    error = check_rule(add_vecs_, np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -3.0]))
    print(f"check_rule passed; worst relative restoration error {error:.1e}")
