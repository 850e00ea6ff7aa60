"""nvfp4-overlay: which FlashInfer call sites get torch's CUDA release instead of upstream's answer.

Data for cuda.py, rendered from patches/flashinfer-python/audit-cuda-versions.json (make docs;
tests/test_cuda_audit.py holds the two equal). A get_cuda_version() or is_cuda_version_at_least()
call gets what upstream answers (the toolkit's release) unless its calling function is in RUN_TIME.
TOOLKIT names the sites the audit read and found nvcc-facing (they get upstream's answer and no
warning); a FlashInfer caller in neither table gets upstream's answer and warns once. A call from a
function in FORWARDERS is answered for that function's caller. Keys are module names (one '*' stands
for any run of characters: 0.7.4 copies one loader, cake_build.py, into 53 generated packages),
values the calling functions' qualified names.
"""

RUN_TIME = {
    'flashinfer.fused_moe.cute_dsl.b12x_moe': frozenset({
        'B12xMoEWrapper.__init__',
        'b12x_fused_moe',
    }),
    'flashinfer.fused_moe.runners': frozenset({
        'SM12xFp8Runner._check_support',
        'SM12xMxfp8Mxfp4Runner._check_support',
        'SM12xNvfp4Bf16Runner._check_support',
        'SM12xNvfp4Runner._check_support',
        '_B12xRunner._check_support',
        '_B12xRunner.check_support',
    }),
    'flashinfer.gemm.gemm_base': frozenset({
        '_b12x_gemm_fp4_requirement',
        '_heuristic_func_mm_fp4',
    }),
    'flashinfer.gemm.gemm_mm_mxfp8_cute_dsl': frozenset({
        '_b12x_gemm_mxfp8_requirement',
    }),
    'flashinfer.gemm.gemm_svdquant': frozenset({
        '_cake_nvfp4_svdquant_requirement',
        '_cute_dsl_nvfp4_svdquant_requirement',
    }),
    'flashinfer.gemm.specialized_kernels._utils': frozenset({
        'is_cuda_13_or_newer',
    }),
    'flashinfer.kda_kernels.packed_kda_decode_cute': frozenset({
        '_check_b200',
    }),
    'flashinfer.kda_kernels.recurrent_kda': frozenset({
        '_t1_fast_path_mode',
    }),
    'flashinfer.moe_ep.core.validation.common': frozenset({
        'is_bf16_mxfp8_cutedsl_supported',
        'validate_bf16_mxfp8_cutedsl_cuda',
    }),
}

TOOLKIT = {
    'flashinfer.*cake_build': frozenset({
        'jit_spec',
        'jit_specs',
        'record_cuda_version',
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
        '_select_target',
    }),
    'flashinfer.cake_fmha': frozenset({
        '_cake_fmha_target',
        '_cake_fmha_target_of',
        'context_nvfp4_programs_unavailable',
        'select_cake_fmha_decode_route',
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
    'flashinfer.experimental.cake.cake_moe_grouped_gemm.cake_backend': frozenset({
        '_jit_cuda_version',
    }),
    'flashinfer.experimental.cake_gdn_det_train_kcp.cake_backend': frozenset({
        'test_jit_spec',
    }),
    'flashinfer.experimental.cake_gdn_train_kcp.cake_backend': frozenset({
        'test_jit_spec',
    }),
    'flashinfer.experimental.cake_kda_det_train_kcp.cake_kcp_jit': frozenset({
        'test_jit_spec',
    }),
    'flashinfer.experimental.cake_kda_train_kcp.cake_kcp_jit': frozenset({
        'test_jit_spec',
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
        '_select_cake_kda_prefill_target',
        '_select_flash_kda_prefill_target',
    }),
    'flashinfer.locality_domain': frozenset({
        '_preflight',
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
        '_device_facts',
        '_select_target',
    }),
    'flashinfer.msa_ops._nvfp4_prefill_sm100': frozenset({
        'toolkit_decline_reason',
    }),
    'flashinfer.quantization.fp4_quantization': frozenset({
        'gen_fp4_quantization_module',
    }),
}

FORWARDERS = {
    'flashinfer.*cake_build': frozenset({
        '_local_cuda_version',
    }),
    'flashinfer.cake_dcp': frozenset({
        '_is_cuda_version_at_least',
    }),
    'flashinfer.cake_fmha': frozenset({
        '_decode_program_toolkit_at_least',
    }),
    'flashinfer.jit.cpp_ext': frozenset({
        'is_cuda_version_at_least',
    }),
    'flashinfer.kda_prefill': frozenset({
        '_is_cuda_version_at_least',
    }),
    'flashinfer.locality_domain': frozenset({
        '_get_cuda_version',
    }),
    'flashinfer.msa_ops._blackwell_sm100': frozenset({
        '_cuda_version_at_least',
    }),
}
