"""The entry point of hack/sources/serve: puts hack/sources on sys.path and runs the command line.

(Explicit, because the tests run Python with PYTHONSAFEPATH=1, which keeps the script's directory
off sys.path.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sourceservers.cli import main

if __name__ == "__main__":
    sys.exit(main())
