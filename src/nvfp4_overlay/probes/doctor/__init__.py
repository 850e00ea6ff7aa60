"""doctor's probe: an environment's facts and its live trace, run in the examined interpreter.

Each module is a probe or a part of one, imported by name in the child interpreter
(probes/serve.py); this face imports nothing, so that a probe imports only what it runs.
"""
