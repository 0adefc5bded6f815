"""Entry point: ``python hack/democrm ...`` or, with PYTHONPATH=hack, ``python -m democrm ...``."""

import sys
from pathlib import Path

if not __package__:
    # Run as a folder: sys.path[0] is this folder (absent under -P / PYTHONSAFEPATH). Import the
    # package by its name from hack/ instead, so its modules never shadow top-level names.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from democrm import cli

if __name__ == "__main__":
    raise SystemExit(cli.main())
