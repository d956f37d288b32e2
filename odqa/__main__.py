"""`python -m odqa ...`: the `odqa` command (the same parser, the same exit codes) where no script is installed."""

import sys

from odqa.cli import main

if __name__ == "__main__":
    sys.exit(main())
