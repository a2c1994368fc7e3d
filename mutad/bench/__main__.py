"""``python -m mutad.bench``: the same as the ``mutad-bench`` command."""

import sys

from mutad.bench.cli import main

if __name__ == "__main__":  # not when a doctest collector imports the module
    sys.exit(main())
