"""python -m nvfp4_overlay.cli: the command line."""

import sys

from . import main

sys.exit(main())
