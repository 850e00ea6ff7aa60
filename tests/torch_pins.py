"""The torch each stack's SGLang release pins (its wheel's Requires-Dist), and the releases to trace under it.

`make test-torch TORCH=X` and the weekly workflow run the trace ladder and the CUDA grid of the
flashinfer-python releases whose stacks pin torch X (every carried release for a torch no stack
pins, such as the newest): `python tests/torch_pins.py 2.9.1` prints them, space-separated.
tests/releases/test_torch_pins.py holds the table to the SGLang wheels' METADATA.
"""

from __future__ import annotations

import sys

TORCH_PINS = {  # SGLang release -> torch==
    "0.5.8": "2.9.1", "0.5.8.post1": "2.9.1", "0.5.9": "2.9.1", "0.5.10": "2.9.1", "0.5.10.post1": "2.9.1",
    "0.5.11": "2.11.0", "0.5.12": "2.11.0", "0.5.12.post1": "2.11.0", "0.5.13": "2.11.0", "0.5.13.post1": "2.11.0",
    "0.5.14": "2.11.0", "0.5.15": "2.11.0", "0.5.15.post1": "2.11.0", "0.5.16": "2.11.0", "0.5.17": "2.11.0",
    "0.5.18": "2.13.0", "0.5.19": "2.13.0", "0.5.20": "2.13.0", "0.5.21": "2.13.0",
    "0.5.22": "2.14.1", "0.5.23": "2.14.1",
}


def releases_under(torch: str) -> list[str]:
    """The flashinfer-python releases of the stacks whose SGLang pins `torch`; all carried ones if none does."""
    from helpers import PATCHES, flashinfer_releases

    from nvfp4_overlay.patch.manifest import load_stacks

    public = torch.split("+", 1)[0]
    chosen = set()
    for stack in load_stacks(PATCHES).stacks:
        sglang = [t.version for t in stack.targets if t.dist == "sglang"] + [t.version for t in stack.upstream
                                                                             if t.dist == "sglang"]
        if any(TORCH_PINS.get(v) == public for v in sglang):
            chosen.update(t.version for t in stack.targets if t.dist == "flashinfer-python")
    every = flashinfer_releases()
    return [v for v in every if v in chosen] or every


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    if len(sys.argv) != 2:
        print("usage: python tests/torch_pins.py TORCH_VERSION", file=sys.stderr)
        sys.exit(2)
    print(" ".join(releases_under(sys.argv[1])))
