"""mutad.make_tape: the recorded program as a Wengert list, pinned for a few small programs and
run on every example's differentiated function."""

import runpy
from pathlib import Path

import numpy as np
import pytest

import mutad
from mutad.linalg import cholesky_

EXAMPLES = Path(__file__).parent.parent / "examples"


def pure(x):
    return (np.sin(x) * 2.0 + x).sum()


def leapfrog_kick(u, v):
    dt = 0.1
    u += dt * v
    return (u * u).sum()


def slice_assignment(u, v):
    u[1:3] = v[:2]
    return (u * v).sum()


def scatter_add(x, y):
    np.add.at(x, [0, 0, 2], y)
    return (x * x).sum()


def in_place_cholesky(A):
    L = A.copy()
    cholesky_(L)
    return L.sum()


def copying_writes(a, b):
    # Each recipe names the settings of its write: indices, mode, key, mask.
    np.put(a, [0, 2], b[:2], mode="clip")
    a[[1, 1]] = b[1:3]
    np.copyto(a, a[::-1], where=b > 0)
    return a.sum()


def filled_in_a_loop(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] * x[i]
    return y.sum()


def complex_parts(z):
    # Regression: the real and imaginary parts were both listed as <+0 [3] strides [1]>.
    z.real *= 2.0
    z.imag += 1.0
    w = z.real[::2]
    w *= 3.0
    return (np.abs(z) ** 2).sum()


PINNED = {
    pure: ((np.arange(3.0),), """\
pure(%0: f64[3]):
  # test_make_tape.py:{1}  return (np.sin(x) * 2.0 + x).sum()
  %1 = np.sin(%0)                   0 B
  %2 = np.multiply(%1, 2.0)         0 B
  %3 = np.add(%2, %0)               0 B
  %4 = np.sum(%3)                   0 B
  return %4"""),
    leapfrog_kick: ((np.ones(3), np.arange(3.0)), """\
leapfrog_kick(%0: f64[3], %1: f64[3]):
  # test_make_tape.py:{2}  u += dt * v
  %2 = np.multiply(0.1, %1)         0 B
  %0 <- np.add(%0, %2)             24 B  inverse
  # test_make_tape.py:{3}  return (u * u).sum()
  %3 = np.multiply(%0, %0)          0 B
  %4 = np.sum(%3)                   0 B
  return %4"""),
    slice_assignment: ((np.zeros(4), np.arange(4.0)), """\
slice_assignment(%0: f64[4], %1: f64[4]):
  # test_make_tape.py:{1}  u[1:3] = v[:2]
  %0[1:3] <- assign(%1[:2])        16 B  checkpoint
  # test_make_tape.py:{2}  return (u * v).sum()
  %2 = np.multiply(%0, %1)          0 B
  %3 = np.sum(%2)                   0 B
  return %3"""),
    scatter_add: ((np.zeros(3), np.ones(3)), """\
scatter_add(%0: f64[3], %1: f64[3]):
  # test_make_tape.py:{1}  np.add.at(x, [0, 0, 2], y)
  %0 <- np.add.at(%0, [0, 0, 2], %1)        24 B  checkpoint
  # test_make_tape.py:{2}  return (x * x).sum()
  %2 = np.multiply(%0, %0)                   0 B
  %3 = np.sum(%2)                            0 B
  return %3"""),
    in_place_cholesky: ((np.array([[4.0, 1.0], [1.0, 3.0]]),), """\
in_place_cholesky(%0: f64[2, 2]):
  # test_make_tape.py:{1}  L = A.copy()
  %1 = np.copy(%0, order='C')         0 B
  # test_make_tape.py:{2}  cholesky_(L)
  %1 <- _cholesky_(%1)               32 B  inverse
  # test_make_tape.py:{3}  return L.sum()
  %2 = np.sum(%1)                     0 B
  return %2"""),
    copying_writes: ((np.arange(1.0, 4.0), np.array([0.5, -1.0, 2.0])), """\
copying_writes(%0: f64[3], %1: f64[3]):
  # test_make_tape.py:{2}  np.put(a, [0, 2], b[:2], mode="clip")
  %0 <- np.put(%0, %1[:2], ind=[0, 2], mode='clip')                           24 B  checkpoint
  # test_make_tape.py:{3}  a[[1, 1]] = b[1:3]
  %0 <- setitem(%0, %1[1:], key=[1, 1])                                       12 B  checkpoint
  # test_make_tape.py:{4}  np.copyto(a, a[::-1], where=b > 0)
  %0 <- np.copyto(%0, %0[2::-1], casting='same_kind', where=<bool[3]>)        27 B  checkpoint
  # test_make_tape.py:{5}  return a.sum()
  %2 = np.sum(%0)                                                              0 B
  return %2"""),
    filled_in_a_loop: ((np.arange(1.0, 4.0),), """\
filled_in_a_loop(%0: f64[3]):
  # test_make_tape.py:{3}  y[i] = x[i] * x[i]
  %1 = np.multiply(%0[0], %0[0])        16 B
  %2[0] <- assign(%1)                    8 B  checkpoint
  %1 = np.multiply(%0[1], %0[1])        16 B
  %2[1] <- assign(%1)                    8 B  checkpoint
  %1 = np.multiply(%0[2], %0[2])        16 B
  %2[2] <- assign(%1)                    8 B  checkpoint
  # test_make_tape.py:{4}  return y.sum()
  %3 = np.sum(%2)                        0 B
  return %3"""),
    complex_parts: ((np.array([1 + 2j, 3 + 4j, 5 + 6j]),), """\
complex_parts(%0: c128[3]):
  # test_make_tape.py:{2}  z.real *= 2.0
  %0<f64 +0 [3] strides [2]> <- np.multiply(%0<f64 +0 [3] strides [2]>, 2.0)         0 B  inverse
  # test_make_tape.py:{3}  z.imag += 1.0
  %0<f64 +1 [3] strides [2]> <- np.add(%0<f64 +1 [3] strides [2]>, 1.0)              0 B  inverse
  # test_make_tape.py:{5}  w *= 3.0
  %0<f64 +0 [2] strides [4]> <- np.multiply(%0<f64 +0 [2] strides [4]>, 3.0)         0 B  inverse
  # test_make_tape.py:{6}  return (np.abs(z) ** 2).sum()
  %1 = np.absolute(%0)                                                              48 B
  %2 = np.square(%1)                                                                24 B
  %3 = np.sum(%2)                                                                    0 B
  return %3"""),
}


@pytest.mark.parametrize("f", list(PINNED), ids=lambda f: f.__name__)
def test_listing_of_a_small_program_is_pinned(f, inverting):  # the inverses shown
    args, expected = PINNED[f]
    # Each group of records is headed by its line of f: {k} is the k-th line after "def".
    expected = expected.format(*(f.__code__.co_firstlineno + k for k in range(10)))
    before = [a.tobytes() for a in args]
    assert str(mutad.make_tape(f, *args)) == expected
    assert [a.tobytes() for a in args] == before


def _example(name):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))


def _burgers():
    m = _example("burgers_finite_volume")
    x = (np.arange(m["CELLS"]) + 0.5) / m["CELLS"]
    return m["misfit"], (0.5 + 0.4 * np.sin(2 * np.pi * x), 0.5 + 0.4 * np.sin(2 * np.pi * x))


def _heat_explicit():
    m = _example("heat_explicit")
    return m["misfit"], (*m["make_problem"](20), 5)


def _heat_scalar():
    m = _example("heat_scalar")
    return m["misfit"], (*m["make_problem"](6), 2)


def _implicit_heat():
    m = _example("implicit_heat")
    return m["loss"], (*m["make_problem"](n=8, ensemble=2), 3)


def _kalman():
    m = _example("kalman_minimize")
    return m["negative_loglik"], (np.zeros(2), m["simulate"](1.0, 0.5, steps=10))


def _newton():
    m = _example("newton_gaussian_mle")
    data = np.random.default_rng(0).standard_normal((20, m["DIMENSION"]))
    about = data - data[0]
    rows, columns = np.tril_indices(m["DIMENSION"])
    start = np.concatenate([data[0], (about.T @ about / len(data))[rows, columns]])
    return m["negative_log_likelihood"], (start, data)


def _rk4():
    m = _example("rk4_fit")
    rates, y0 = np.array([0.8, 0.6, 0.9, 0.3]), np.array([1.5, 1.0])
    return m["trajectory_misfit"], (rates, y0, m["observations_of"](rates, y0))


def _spectral_heat():
    example = _example("spectral_heat")
    u0, observations = example["make_problem"]()
    return example["misfit"], (np.log(0.05), u0, observations)


def _ode_fit():
    m = _example("ode_fit")
    counts = m["solve_ivp"](m["lotka_volterra"], (0.0, m["TIMES"][-1]), m["START"],
                            t_eval=m["TIMES"], args=(np.array([1.0, 0.1, 0.075, 1.5]),)).y
    return m["misfit"], (np.log(np.array([0.9, 0.11, 0.07, 1.6])), counts)


def _sparse_heat_fit():
    m = _example("sparse_heat_fit")
    u0 = np.exp(-80.0 * (m["X"] - 0.4) ** 2)
    u0[[0, -1]] = 0.0
    measured = m["simulate"](np.array([-0.5, 1.0, -1.5]), u0)
    return m["misfit"], (np.zeros(3), u0, measured)


def _distributed_fit():
    m = _example("distributed_fit")
    return m["misfit"], (np.log(np.array([0.3, 1.0])), *m["experiments"](np.zeros(2))[0])


def _leapfrog_memory():
    m = _example("leapfrog_memory")
    return m["energy_after"], (*m["initial_state"](20), 3)


def _add_sum(name):
    return lambda: (_example(name)["add_sum"], (np.zeros(3), np.ones(3)))


PROGRAMS = {"add_vecs": _add_sum("add_vecs"), "burgers_finite_volume": _burgers,
            "distributed_fit": _distributed_fit,
            "heat_explicit": _heat_explicit, "heat_scalar": _heat_scalar,
            "implicit_heat": _implicit_heat,
            "kalman_minimize": _kalman, "leapfrog_memory": _leapfrog_memory,
            "newton_gaussian_mle": _newton, "ode_fit": _ode_fit, "rk4_fit": _rk4,
            "sparse_heat_fit": _sparse_heat_fit, "spectral_heat": _spectral_heat,
            "zygote120": _add_sum("zygote120")}


def test_every_example_has_a_program_here():
    assert sorted(PROGRAMS) == sorted(p.stem for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_listing_of_every_example(name):
    f, args = PROGRAMS[name]()
    before = [a.tobytes() for a in args if isinstance(a, np.ndarray)]
    tape = mutad.make_tape(f, *args)
    lines = [line for line in str(tape).splitlines() if not line.startswith("  # ")]
    assert len(lines) == len(tape.records) + 2
    assert lines[0].startswith(f"{f.__name__}(%0: f64[")
    assert lines[-1].startswith("  return %")
    assert all(" = " in line or " <- " in line for line in lines[1:-1])
    assert [a.tobytes() for a in args if isinstance(a, np.ndarray)] == before
