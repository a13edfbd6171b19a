"""`python -m crayon_hf ...` runs the `crayon` command line."""

import sys

from crayon_hf.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m crayon_hf"))
