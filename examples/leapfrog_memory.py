"""The memory of a gradient through an invertible time stepper does not grow with its steps.

A chain of masses joined by anharmonic springs (the FPU-beta chain), integrated by velocity
Verlet as integrators are written: three in-place updates per step,

    p += 0.5 * dt * force(q)
    q += dt * p
    p += 0.5 * dt * force(q)

The reverse pass needs, at every step, the values that step read. Saving what each update
overwrites (``policy="checkpoint"``) costs memory in proportion to the number of steps T: the
three arrays each step overwrites. mutad's default policy, ``"restore"``, undoes each update
instead (``p -= ...`` undoes ``p += ...``, checked element by element), and recomputes the
temporaries (``force(q)``'s arrays) from their restored inputs in the reverse pass rather than
keeping them. Then no array is kept per step; what grows with T is the tape's bookkeeping, a
few KiB per step.

The script measures the peak memory of ``mutad.gradient`` with ``tracemalloc`` (which counts
NumPy's array data as well as Python's objects) at T and 4T steps under both policies. It checks
the gradient against finite differences with ``mutad.check_grads``, that the two policies'
gradients agree, and that the caller's arrays come back as they were.

Run it with ``python examples/leapfrog_memory.py``; it takes a second or two.
"""

import os

# NumPy's BLAS (and OpenMP) start one thread per core. On a busy machine those threads wait for
# each other and a run of seconds can take minutes; at these sizes one thread is as fast. Set
# before NumPy is first imported, which reads them once; setdefault keeps a value you exported.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import tracemalloc

import numpy as np

import mutad

MASSES = 50_000  # 0.4 MB per array: temporaries under 4 KiB would be kept, not recomputed
STEPS = 10  # T; the gradient is measured at T and at 4T steps
BETA = 0.1  # the springs' cubic term
DT = 0.01


def force(q):
    """The force on each mass, with both ends of the chain held fixed."""
    padded = np.concatenate((np.zeros(1), q, np.zeros(1)))
    stretch = padded[1:] - padded[:-1]
    cube = stretch * stretch * stretch
    return (stretch[1:] - stretch[:-1]) + BETA * (cube[1:] - cube[:-1])


def energy_after(q, p, steps):
    """``steps`` velocity-Verlet steps of positions ``q`` and momenta ``p``, in place; then a
    quadratic energy of the final state."""
    for _ in range(steps):
        p += 0.5 * DT * force(q)
        q += DT * p
        p += 0.5 * DT * force(q)
    return np.sum(q * q) + np.sum(p * p)


def initial_state(masses=MASSES):
    x = np.arange(masses) / masses
    return 0.5 * np.sin(7 * np.pi * x), 0.2 * np.cos(3 * np.pi * x)


def peak_bytes(call):
    """``call()``'s result, and the peak of the memory allocated while it ran, in bytes."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main():
    q0, p0 = initial_state()
    caller = q0.tobytes(), p0.tobytes()
    array_mib = q0.nbytes / 2**20
    print(f"FPU chain of {MASSES} masses: q and p are {array_mib:.2f} MiB each")
    print(f"{'policy':>10}  {'T':>3}  {'peak MiB':>8}  {'in arrays of q':>14}")
    peaks, gradients = {}, {}
    for policy in ("restore", "checkpoint"):
        for steps in (STEPS, 4 * STEPS):
            gradients[policy, steps], peak = peak_bytes(lambda: mutad.gradient(
                energy_after, q0, p0, steps, argnums=(0, 1), policy=policy))
            peaks[policy, steps] = peak / 2**20
            print(f"{policy:>10}  {steps:>3}  {peak / 2**20:>8.2f}  {peak / q0.nbytes:>14.1f}")

    def growth_per_step(policy):
        return (peaks[policy, 4 * STEPS] - peaks[policy, STEPS]) / (3 * STEPS)

    restore, checkpoint = growth_per_step("restore"), growth_per_step("checkpoint")
    print(f"each step more adds {restore * 1024:.0f} KiB to the restore policy's peak "
          f"({restore / array_mib:.2f} arrays), {checkpoint * 1024:.0f} KiB to the checkpoint "
          f"policy's ({checkpoint / array_mib:.2f} arrays: the three each step overwrites)")
    assert restore < 0.1 * checkpoint, "the restore policy's memory grew like the saved arrays"

    dq, dp = gradients["restore", 4 * STEPS]
    dq_saved, dp_saved = gradients["checkpoint", 4 * STEPS]
    agreement = max(np.max(np.abs(dq - dq_saved)) / np.max(np.abs(dq_saved)),
                    np.max(np.abs(dp - dp_saved)) / np.max(np.abs(dp_saved)))
    print(f"restore and checkpoint policies agree to {agreement:.1e} (relative)")
    assert agreement < 1e-10
    mutad.check_grads(energy_after, q0, p0, STEPS)  # raises if finite differences disagree
    print("mutad.check_grads: the gradient agrees with finite differences")
    assert (q0.tobytes(), p0.tobytes()) == caller, "the caller's arrays must come back as they were"
    print("q0 and p0 after every gradient are bit-for-bit the arrays passed in")


if __name__ == "__main__":
    main()
