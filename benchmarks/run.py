"""Run the benchmarks from a checkout: the same as the ``mutad-bench`` command.

    python benchmarks/run.py                       # the quick suite
    python benchmarks/run.py --full --systems all  # what benchmarks/RESULTS.md records

The workloads, the measurement protocol and the CLI live in ``mutad/bench/`` so that an
installed mutad has them; ``python benchmarks/run.py --help`` lists the options.
"""

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: use the checkout's mutad
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mutad.bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
