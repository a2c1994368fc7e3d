"""The cost of a Hessian-vector product relative to a gradient, on 10^6-element in-place programs.

For each program the script times, in one process and round by round, the plain NumPy
forward, ``mutad.gradient``, ``mutad.hvp`` (reverse mode over forward mode) and the same
product as forward mode over reverse mode (``jvp`` of the gradient: one Hessian column of
``mutad.hessian``); for the W5 chain, with JAX installed, also JAX's jitted gradient and
``jvp(grad(f))`` of the out-of-place equivalent. It reports the median over rounds of each ratio (computed within a round, since these machines
are shared and noisy) with its [min-max], and checks the hvp against finite differences of the
gradient before timing. One BLAS thread.

    python benchmarks/hvp_cost.py [--n 1000000] [--rounds 7]
"""

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import mutad  # noqa: E402
from mutad.bench.workloads import big_elementwise, explicit_heat, explicit_heat_inputs  # noqa: E402

HEAT_STEPS = 20


def heat_loss(u, target, weights):
    return explicit_heat(u, target, weights, HEAT_STEPS)


def programs(n):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, n)
    u0, target, weights = explicit_heat_inputs(n)
    return {
        "W5 elementwise chain (5 in-place writes)": (big_elementwise, (x,)),
        f"explicit heat, {HEAT_STEPS} slice updates": (heat_loss, (u0, target, weights)),
    }


def jax_calls(x, v):
    """JAX's gradient and its idiomatic Hessian-vector product (forward over reverse, jitted)
    of the out-of-place W5 chain, or None without JAX."""
    from mutad.bench import peers

    if not peers.installed("jax"):
        return None
    jax = peers._jax()
    loss = peers._big_elementwise_loss(jax.numpy)
    x, v = jax.numpy.asarray(x), jax.numpy.asarray(v)
    grad = jax.jit(jax.grad(loss))
    hvp = jax.jit(lambda x, v: jax.jvp(jax.grad(loss), (x,), (v,))[1])
    return {"JAX gradient": lambda: jax.block_until_ready(grad(x)),
            "JAX hvp": lambda: jax.block_until_ready(hvp(x, v))}


def timed(call):
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def check(f, args, v):
    """The hvp against a central difference of the gradient along v."""
    h = 1e-6
    grad = lambda x: mutad.gradient(f, x, *args[1:], argnums=0)  # noqa: E731
    numeric = (grad(args[0] + h * v) - grad(args[0] - h * v)) / (2 * h)
    analytic = mutad.hvp(lambda x: f(x, *args[1:]), (args[0],), (v,))
    error = np.abs(analytic - numeric).max() / max(np.abs(numeric).max(), 1e-30)
    assert error < 1e-5, f"hvp disagrees with finite differences: {error:.2e}"
    return error


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    print(f"n = {options.n}, {options.rounds} rounds, medians [min-max] of per-round ratios")
    for name, (f, args) in programs(options.n).items():
        v = np.random.default_rng(1).standard_normal(args[0].shape)
        error = check(f, args, v) if options.n <= 1_000_000 else float("nan")
        rest = args[1:]
        calls = {
            "numpy forward": lambda: f(args[0].copy(), *rest),
            "gradient": lambda: mutad.gradient(f, *args, argnums=0),
            "hvp": lambda: mutad.hvp(lambda x: f(x, *rest), (args[0],), (v,)),
            "jvp of gradient": lambda: mutad.jvp(
                lambda x: mutad.gradient(f, x, *rest, argnums=0), (args[0],), (v,)),
        }
        if f is big_elementwise:
            calls.update(jax_calls(args[0], v) or {})
        for call in calls.values():  # warm-up (and JAX's compilation)
            call()
        times = {key: [] for key in calls}
        for _ in range(options.rounds):
            for key, call in calls.items():
                times[key].append(timed(call))
        ratio = lambda a, b: np.array(times[a]) / np.array(times[b])  # noqa: E731
        print(f"\n{name} (hvp vs finite differences: {error:.1e})")
        pairs = [("gradient", "numpy forward"), ("hvp", "numpy forward"),
                 ("hvp", "gradient"), ("jvp of gradient", "gradient")]
        if "JAX hvp" in calls:
            pairs += [("JAX gradient", "numpy forward"), ("JAX hvp", "numpy forward"),
                      ("JAX hvp", "JAX gradient")]
        for a, b in pairs:
            r = ratio(a, b)
            print(f"  {a} / {b}: {np.median(r):.2f}x [{r.min():.2f}-{r.max():.2f}]")


if __name__ == "__main__":
    main()
