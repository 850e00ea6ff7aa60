"""nvfp4-overlay: what nvfp4-overlay adds to FlashInfer, one source for every release.

- cuda.py: get_cuda_path, get_cuda_version and is_cuda_version_at_least without a process,
  in place of jit/cpp_ext.py's (patch 0001); cuda_sites.py lists the run-time call sites (torch's CUDA).
- opaque.py: route(), the decorator patch 0002 puts on each public entry point: while dynamo
  traces, a call becomes one torch.library custom op whose schema is the release's signature
  (ops.py defines it, traced.py writes the path dynamo traces); entries.py says which entry points
  and which values stay upstream's path (codecs.py carries the values no schema type takes). An op's
  fake is upstream's own function with the JIT layer stood in for (faking.py), what it returns read
  off its result (forms.py); fakes.py holds the few written by hand, results.py reads the results
  entries.py declares for them.

The modules adapt to the release they land in by what they read there (signatures, where a
function lives), so no release carries a copy of its own. This package imports nothing of
FlashInfer at import time: flashinfer/jit/cpp_ext.py imports it while flashinfer is loading.
"""
