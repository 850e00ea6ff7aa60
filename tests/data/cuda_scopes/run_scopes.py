"""Run every case of flashinfer/scopes.py and flashinfer/other.py under the tables a plan gives.

``python run_scopes.py < plan.json`` (the directory holding flashinfer/ first on sys.path, CUDA_HOME a
toolkit of release 13.0) prints one JSON document: per mode, what each case was answered ("torch",
"toolkit") and the warnings the overlay gave. A mode sets cuda_sites.py's RUN_TIME, TOOLKIT and
FORWARDERS (module -> qualname -> [call text, ordinal] pairs), and ``search`` runs the Python 3.10
way of naming a frame (without co_qualname, the call known by its line alone).
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings

import torch

torch.version.cuda = "12.8"
from flashinfer._nvfp4_overlay import cuda, cuda_calls, cuda_sites  # noqa: E402

ANSWERS = {"12.8": "torch", "13.0": "toolkit", "False": "torch", "True": "toolkit"}


def run_mode(mode: dict) -> dict:
    for table in ("RUN_TIME", "TOOLKIT", "FORWARDERS"):
        getattr(cuda_sites, table).clear()
        getattr(cuda_sites, table).update({m: {q: frozenset(tuple(c) for c in calls) for q, calls in qs.items()}
                                           for m, qs in mode[table.lower()].items()})
    for cache in (cuda._sites, cuda._answers, cuda._code_names, cuda._warned, cuda_calls._files):
        cache.clear()
    cuda._qualname = cuda.qualname_by_search if mode["search"] else cuda.qualname_from_code
    cuda_calls._call_end = cuda_calls.call_end_unknown if mode["search"] else cuda_calls.call_end_from_code
    answers = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("flashinfer.scopes", "flashinfer.other"):
            module = importlib.reload(importlib.import_module(name))  # module-level sites run again
            for case in sorted(n for n in vars(module) if n.startswith("case_")):
                for _ in range(2):  # twice: a site warns once
                    answers[f"{name}.{case}"] = ANSWERS.get(str(getattr(module, case)()), "?")
    return {"answers": answers, "warnings": [str(w.message) for w in caught
                                             if issubclass(w.category, cuda.UnauditedCudaVersionCall)]}


plan = json.load(sys.stdin)
json.dump({mode["name"]: run_mode(mode) for mode in plan["modes"]}, sys.stdout)
