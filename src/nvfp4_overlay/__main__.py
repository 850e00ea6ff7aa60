"""`python -m nvfp4_overlay`: the command line, as the installed `nvfp4-overlay` runs it."""

import sys

from nvfp4_overlay.cli import main

sys.exit(main(prog="python -m nvfp4_overlay"))
