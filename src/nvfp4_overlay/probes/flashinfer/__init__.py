"""The FlashInfer probes: the trace ladder of the FP4/MXFP8 entry points, the fakes against upstream's
wrapper (at every rank, and over the explored space), FlashInfer's own compile list, the JIT plan and
load, and the CUDA-version grid.

The probes (``flashinfer_trace``, ``fake_shapes``, ``fake_space``, ``compile_list``, ``jit_plan``,
``jit_load``, ``cuda_grid``) and their parts (``jit_build``, ``compile_harness``, ``compile_plugin``,
``routed``) sit here, each imported by name in the child interpreter (probes/serve.py); what they call
is in ``tables/`` (the case tables), what stands in for the GPU's libraries in ``stubs/``. This face
imports nothing, so that a probe imports only what it runs.
"""
