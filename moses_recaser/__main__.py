"""``python -m moses_recaser``: the ``moses-recaser`` command."""

import sys

from moses_recaser.cli.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
