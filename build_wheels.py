#!/usr/bin/env python3
"""Build patched FlashInfer and SGLang wheels: `python build_wheels.py build`, see --help."""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "src"))

try:
    from nvfp4_overlay.cli import main
except ImportError as exc:  # unidiff or packaging missing from this interpreter
    venv_python = HERE / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.prefix).resolve() != venv_python.parent.parent.resolve():
        os.execv(str(venv_python), [str(venv_python), *sys.argv])  # the environment `make wheels` made
    print(f"error: {exc}; run 'make wheels' once (it makes .venv), or 'pip install -e .'", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
