"""The SGLang probe: the compiled regions of a release's own SGLang that reach FlashInfer, on a faked server.

Each module is a probe or a part of one, imported by name in the child interpreter
(probes/serve.py); this face imports nothing, so that a probe imports only what it runs.
"""
