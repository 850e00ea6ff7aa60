"""The FlashInfer probes' case tables: what each probe calls, and with what (no probe runs from here).

``cases`` (the trace ladder's calls of every routed entry point, by release; ``quant_cases`` and
``moe_cases`` its tables of the quantize and MoE entry points, ``rows`` what a row is), ``compile_cases``
(FlashInfer's own compile list and its calls) and ``space`` (the explored space a fake is held to
upstream's wrapper on). A host wing may read them by module path; this face imports nothing.
"""
