#!/usr/bin/env python3
"""odqa entry point: `python run_qa.py --help`."""

import sys

from odqa.cli import main

if __name__ == "__main__":
    sys.exit(main())
