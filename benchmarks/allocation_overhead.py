"""What the allocation mode costs outside a differentiation, and per differentiation.

``python benchmarks/allocation_overhead.py`` times ``np.zeros(3)``, ``np.eye(3)`` and
``np.array([1.0, 2.0])`` called from a user module in fresh interpreters, alternately without
mutad and with mutad imported after a gradient has run (so the mode was installed and then
undone), and prints the median of the best-of-7 times over the rounds and the ratio. It also
prints what entering and leaving the mode costs per differentiation, next to the time of the
smallest gradient.
"""

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sys, timeit
import numpy as np
if sys.argv[1] == "mutad":
    sys.path.insert(0, sys.argv[2])
    import mutad
    mutad.gradient(lambda x: (np.zeros(3) + x).sum(), np.ones(3))
for stmt, number in (("np.zeros(3)", 200000), ("np.eye(3)", 50000),
                     ("np.array([1.0, 2.0])", 100000)):
    best = min(timeit.repeat(stmt, globals=globals(), number=number, repeat=7)) / number
    print(stmt, best * 1e9)
"""

MODE = """
import sys, timeit
sys.path.insert(0, sys.argv[1])
import numpy as np, mutad
from mutad.core.allocation import mode
f = lambda x: (x * x).sum()
x = np.ones(3)
mutad.gradient(f, x)

def enter_and_leave():
    with mode(f):
        pass

for name, call in (("enter and leave the mode", enter_and_leave),
                   ("gradient of (x * x).sum()", lambda: mutad.gradient(f, x))):
    print(name, min(timeit.repeat(call, number=2000, repeat=7)) / 2000 * 1e6)
"""


def run(code, *args):
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True).stdout
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in out.splitlines()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    without, with_mutad = [], []
    for _ in range(rounds):
        without.append(run(CHILD, "numpy"))
        with_mutad.append(run(CHILD, "mutad", str(ROOT)))
    print(f"{'call':24s} {'numpy (ns)':>11s} {'mutad (ns)':>11s} {'ratio':>6s}")
    for stmt in without[0]:
        a = statistics.median(r[stmt] for r in without)
        b = statistics.median(r[stmt] for r in with_mutad)
        print(f"{stmt:24s} {a:11.1f} {b:11.1f} {b / a:6.2f}")
    for name, value in run(MODE, str(ROOT)).items():
        print(f"{name:30s} {value:8.1f} us")


if __name__ == "__main__":
    main()
