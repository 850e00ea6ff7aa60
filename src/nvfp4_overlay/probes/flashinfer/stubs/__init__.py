"""The FlashInfer probes' stand-ins: what a CPU machine lacks, made to record what FlashInfer hands it.

``serving_stubs`` (a warm cubin cache, a recording AutoTuner, kernels that answer), ``cudnn_stub`` (cuDNN's
frontend), ``cute_dsl_stub`` (the CuTe DSL), ``recording`` (what they share: describe(), a recording
kernel, the placeholder a stood-in library answers with) and ``cuda_control`` (the CUDA grid's control: a
JIT module the audit has never seen). This face imports nothing.
"""
