"""nvfp4-overlay: the FlashInfer call sites whose CUDA version decides what nvcc compiles.

Data for cuda.py. A call of get_cuda_version() or is_cuda_version_at_least() from a function named
here gets the toolkit's release, as upstream answers it; every other call gets torch's. Keys are
module names (one '*' stands for any run of characters, for the loader that 0.7.x copies into each
generated package), values the names of the calling functions (``co_name``). The audit in
docs/patches.md gives, for every call site of every carried release, what it decides and why it is
listed here or not; tests/test_cuda_versions.py holds this table to that audit.
"""

NVCC_FACING = {
    # the -gencode architecture suffix (SM12x: 120f needs nvcc >= 12.9, 120a 12.8)
    "flashinfer.compilation_context": frozenset({"_normalize_cuda_arch"}),
    # -static-global-template-stub=false, an nvcc >= 12.8 flag
    "flashinfer.jit.cpp_ext": frozenset({"build_cuda_cflags"}),
    # -DENABLE_FP4 in the FP4-quantize JIT specs
    "flashinfer.fp4_quantization": frozenset({"gen_fp4_quantization_module"}),
    "flashinfer.quantization.fp4_quantization": frozenset({"gen_fp4_quantization_module"}),
    "flashinfer.jit.fp4_quantization": frozenset({"gen_fp4_quantization_module"}),
    # -DENABLE_FP8_BLOCK_SCALE / -DENABLE_FP4 in the CUTLASS fused-MoE and FP8 block-scale GEMM specs
    "flashinfer.jit.fused_moe": frozenset(
        {"gen_cutlass_fused_moe_sm89_module", "gen_cutlass_fused_moe_sm90_module"}
    ),
    "flashinfer.jit.gemm.fp8_blockscale": frozenset({"gen_fp8_blockscale_gemm_sm90_module"}),
    # CUTLASS kernel generation
    "flashinfer.jit.gemm.cutlass.generate_kernels": frozenset(
        {"generate_sm90_mixed_type_grouped_gemm_operations"}
    ),
    # the AOT module list
    "flashinfer.aot": frozenset({"detect_sm_capabilities", "has_sm", "gen_all_modules"}),
    # 0.7.x: the generated packages' loader picks nvcc flags and skips what the toolkit cannot build
    "flashinfer.*cake_build": frozenset({"_local_cuda_version"}),
}

# Wrappers that only pass the question on: their caller's name decides.
THROUGH: dict = {}
