"""The SGLang probes: the compiled regions of a release's own SGLang that reach FlashInfer, on a faked server.

Each module is a probe or a part of one, imported by name in the child interpreter
(probes/serve.py); layer/ holds the whole-layer probes, which build on this folder's machinery. This
face imports nothing, so that a probe imports only what it runs.
"""
