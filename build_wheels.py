#!/usr/bin/env python3
"""Build patched FlashInfer and SGLang wheels: `python build_wheels.py build`, see --help."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from nvfp4_overlay.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
