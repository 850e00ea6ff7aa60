"""nvfp4-overlay: the FlashInfer call sites whose CUDA version decides what nvcc compiles.

Data for cuda.py: a get_cuda_version() or is_cuda_version_at_least() call from a function listed
here gets the toolkit's release, as upstream answers it; every other call gets torch's. Keys are
module names (one '*' stands for any run of characters: 0.7.4 copies one loader, cake_build.py, into
53 generated packages), values the calling functions' qualified names. This is the "toolkit" column
of the audit of every call site of all carried releases (docs/audit/cuda_versions.json, the table in
docs/patches.md); tests/test_cuda_audit.py holds the two to each other and to the releases' code.
"""

NVCC_FACING = {
    'flashinfer.*cake_build': frozenset({
        '_local_cuda_version',
    }),
    'flashinfer.__main__': frozenset({
        '<module>',
        '_detect_cuda_version',
    }),
    'flashinfer.aot': frozenset({
        'detect_sm_capabilities',
        'detect_sm_capabilities.<locals>.has_sm',
        'gen_all_modules',
    }),
    'flashinfer.cake_dcp': frozenset({
        '_is_cuda_version_at_least',
    }),
    'flashinfer.cake_fmha': frozenset({
        '_cake_fmha_target',
        '_cake_fmha_target_of',
        '_decode_program_toolkit_at_least',
        'context_nvfp4_programs_unavailable',
    }),
    'flashinfer.collect_env': frozenset({
        '_get_cuda_toolkit_info.<locals>._fi_cuda',
    }),
    'flashinfer.compilation_context': frozenset({
        'CompilationContext._normalize_cuda_arch',
    }),
    'flashinfer.concat_ops': frozenset({
        'cake_concat_mla_k_target',
    }),
    'flashinfer.diffusion_ops.minimax_h3': frozenset({
        '_check_runtime_support',
    }),
    'flashinfer.experimental.cake_lm_head_loss.cake_jit': frozenset({
        'toolchain_runs_hidden_count',
        'toolchain_workaround_flags',
    }),
    'flashinfer.experimental.cake_mla_nvfp4_paged_decode.cake_jit': frozenset({
        'select_program',
        'toolkit_supports',
    }),
    'flashinfer.experimental.cake_mxfp8_megamoe_ep16.jit': frozenset({
        '_has_min_cuda',
    }),
    'flashinfer.fp4_quantization': frozenset({
        'gen_fp4_quantization_module',
    }),
    'flashinfer.fused_moe.cake_w4a16': frozenset({
        'cake_w4a16_toolkit_unavailable',
    }),
    'flashinfer.fused_moe.core': frozenset({
        'cutlass_fused_moe',
    }),
    'flashinfer.fused_moe.runners': frozenset({
        '_CutlassRunnerBase._check_support',
    }),
    'flashinfer.gemm.routergemm': frozenset({
        '_tinygemm2_sm100_enabled',
        '_tinygemm2_tcgen05_enabled',
        '_use_tinygemm2_sm100',
    }),
    'flashinfer.jit.cake_concat_mla_k': frozenset({
        'cake_concat_mla_k_target',
    }),
    'flashinfer.jit.cake_dsv4': frozenset({
        'gen_cake_dsv4_module',
    }),
    'flashinfer.jit.cake_minimax_h3_bf16_pre_attention': frozenset({
        'gen_minimax_h3_bf16_pre_attention_module',
    }),
    'flashinfer.jit.cake_minimax_h3_sm120_quant_fc1_swiglu': frozenset({
        'gen_minimax_h3_sm120_quant_fc1_swiglu_module',
    }),
    'flashinfer.jit.cake_minimax_h3_sm120_quant_mlp': frozenset({
        'gen_minimax_h3_sm120_quant_mlp_module',
    }),
    'flashinfer.jit.cpp_ext': frozenset({
        'build_cuda_cflags',
    }),
    'flashinfer.jit.fp4_quantization': frozenset({
        'gen_fp4_quantization_module',
    }),
    'flashinfer.jit.fused_moe': frozenset({
        'gen_alphamoe_fused_router_module',
        'gen_alphamoe_sm100_module',
        'gen_cutlass_fused_moe_sm89_module',
        'gen_cutlass_fused_moe_sm90_module',
    }),
    'flashinfer.jit.gemm.cutlass.generate_kernels': frozenset({
        'generate_sm90_mixed_type_grouped_gemm_operations',
    }),
    'flashinfer.jit.gemm.fp8_blockscale': frozenset({
        'gen_fp8_blockscale_gemm_sm90_module',
    }),
    'flashinfer.jit.minimax_h3_fc1_swiglu': frozenset({
        'gen_minimax_h3_fc1_swiglu_module',
    }),
    'flashinfer.jit.minimax_h3_mlp': frozenset({
        'gen_minimax_h3_mlp_module',
    }),
    'flashinfer.jit.minimax_h3_out_proj': frozenset({
        'gen_minimax_h3_out_proj_module',
    }),
    'flashinfer.jit.tinygemm2': frozenset({
        'gen_tinygemm2_sm100_module',
    }),
    'flashinfer.kda_kernels.cake_packed_kda_decode': frozenset({
        '_target_for_device',
    }),
    'flashinfer.kda_kernels.recurrent_kda': frozenset({
        '_frozen_decode_module',
        '_run_flash_kda_decode',
    }),
    'flashinfer.kda_prefill': frozenset({
        '_is_cuda_version_at_least',
    }),
    'flashinfer.locality_domain': frozenset({
        '_get_cuda_version',
    }),
    'flashinfer.mla._sparse_mla_sm120.cake_dsv41_mixed': frozenset({
        '_direct_cvt_toolchain',
    }),
    'flashinfer.mla.cake_dsv4': frozenset({
        '_oversized_smem_launchable',
    }),
    'flashinfer.mla.cake_trtllm_mla_blackwell': frozenset({
        'trtllm_mla_blackwell_decode',
    }),
    'flashinfer.moe_ep.kernel_src.sm90.push_style_megamoe.shim.gemm': frozenset({
        '_module_flags',
        'gen_sm90_push_fp8_moe_gemm_module',
    }),
    'flashinfer.msa_ops._blackwell_sm100': frozenset({
        '_cuda_version_at_least',
        '_device_facts',
    }),
    'flashinfer.msa_ops._nvfp4_prefill_sm100': frozenset({
        'toolkit_decline_reason',
    }),
    'flashinfer.quantization.fp4_quantization': frozenset({
        'gen_fp4_quantization_module',
    }),
}
