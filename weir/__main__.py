"""``python -m weir``: the same as the ``weir`` command."""

import sys

from weir.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
