"""The whole-layer probes: SGLang's own decoder layer, or a whole tiny model, compiled as its piecewise runner compiles it, on a CPU.

``probe`` (one rank), ``tp_probe`` (tensor parallel N) and ``pin_probe`` (0.5.21's pinned MXFP8 tactic) are
run as ``python -m nvfp4_overlay.probes.sglang.layer.<probe>``; the other modules are their parts. This
face imports nothing, so that a probe imports only what it runs.
"""
