"""The FlashInfer probes: the trace ladder of the FP4/MXFP8 entry points, its call tables and stubs, the fakes
against upstream's wrapper (at every rank, and over the explored space), and the CUDA-version grid.

Each module is a probe or a part of one, imported by name in the child interpreter
(probes/serve.py); this face imports nothing, so that a probe imports only what it runs.
"""
