"""nvfp4-overlay: which FlashInfer calls get torch's CUDA release instead of upstream's answer.

Data for cuda.py, rendered from patches/flashinfer-python/audit-cuda-versions.json (make docs;
tests/unit/test_cuda_scan.py holds the two equal). A get_cuda_version() or is_cuda_version_at_least()
call gets what upstream answers (the toolkit's release) unless the call is in RUN_TIME. TOOLKIT names
the calls the audit read and found nvcc-facing (they get upstream's answer and no warning); a
FlashInfer call in neither table, also one inside a function that lists others, gets upstream's
answer and warns once. A call in FORWARDERS is answered for its function's caller. Keys are module
names (one '*' stands for any run of characters: 0.7.4 copies one loader, cake_build.py, into 53
generated packages), then the calling functions' qualified names; values are the calls, each as its
source text and how many calls of that text come before it in the function.
"""

RUN_TIME = {
    'flashinfer.fused_moe.cute_dsl.b12x_moe': {
        'B12xMoEWrapper.__init__': frozenset({
            ('get_cuda_version()', 0),
            ('get_cuda_version()', 1),
        }),
        'b12x_fused_moe': frozenset({
            ('get_cuda_version()', 0),
            ('get_cuda_version()', 1),
        }),
    },
    'flashinfer.fused_moe.runners': {
        'SM12xFp8Runner._check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
        'SM12xMxfp8Mxfp4Runner._check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
        'SM12xNvfp4Bf16Runner._check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
        'SM12xNvfp4Runner._check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
        '_B12xRunner._check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
        '_B12xRunner.check_support': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.gemm.gemm_base': {
        '_b12x_gemm_fp4_requirement': frozenset({
            ('get_cuda_version()', 0),
            ('get_cuda_version()', 1),
        }),
        '_heuristic_func_mm_fp4': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.gemm.gemm_mm_mxfp8_cute_dsl': {
        '_b12x_gemm_mxfp8_requirement': frozenset({
            ('get_cuda_version()', 0),
            ('get_cuda_version()', 1),
        }),
    },
    'flashinfer.gemm.gemm_svdquant': {
        '_cake_nvfp4_svdquant_requirement': frozenset({
            ('get_cuda_version()', 0),
        }),
        '_cute_dsl_nvfp4_svdquant_requirement': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.gemm.specialized_kernels._utils': {
        'is_cuda_13_or_newer': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.kda_kernels.packed_kda_decode_cute': {
        '_check_b200': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.kda_kernels.recurrent_kda': {
        '_t1_fast_path_mode': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.moe_ep.core.validation.common': {
        'is_bf16_mxfp8_cutedsl_supported': frozenset({
            ('get_cuda_version()', 0),
        }),
        'validate_bf16_mxfp8_cutedsl_cuda': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
}

TOOLKIT = {
    'flashinfer.*cake_build': {
        'jit_spec': frozenset({
            ('_local_cuda_version(get_cuda_version)', 0),
        }),
        'jit_specs': frozenset({
            ('_local_cuda_version(get_cuda_version)', 0),
        }),
        'record_cuda_version': frozenset({
            ('_local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.__main__': {
        '<module>': frozenset({
            ('get_cuda_version()', 0),
            ('get_cuda_version()', 1),
        }),
        '_detect_cuda_version': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.aot': {
        'detect_sm_capabilities': frozenset({
            ('get_cuda_version()', 0),
        }),
        'detect_sm_capabilities.<locals>.has_sm': frozenset({
            ('get_cuda_version()', 0),
        }),
        'gen_all_modules': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.cake_dcp': {
        '_select_target': frozenset({
            ('_is_cuda_version_at_least("12.8")', 0),
            ('_is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.cake_fmha': {
        '_cake_fmha_target': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
        }),
        '_cake_fmha_target_of': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
        }),
        'context_nvfp4_programs_unavailable': frozenset({
            ('get_cuda_version()', 0),
            ('is_cuda_version_at_least(CONTEXT_NVFP4_PROGRAMS_MIN_CUDA)', 0),
        }),
        'select_cake_fmha_decode_route': frozenset({
            ('_decode_program_toolkit_at_least("13.4")', 0),
        }),
    },
    'flashinfer.collect_env': {
        '_get_cuda_toolkit_info.<locals>._fi_cuda': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.compilation_context': {
        'CompilationContext._normalize_cuda_arch': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
            ('is_cuda_version_at_least("12.9")', 1),
        }),
    },
    'flashinfer.concat_ops': {
        'cake_concat_mla_k_target': frozenset({
            ('is_cuda_version_at_least("13.0")', 0),
        }),
    },
    'flashinfer.diffusion_ops.minimax_h3': {
        '_check_runtime_support': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.experimental.cake.cake_moe_grouped_gemm.cake_backend': {
        '_jit_cuda_version': frozenset({
            ('_local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.experimental.cake_gdn_det_train_kcp.cake_backend': {
        'test_jit_spec': frozenset({
            ('cake_build._local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.experimental.cake_gdn_train_kcp.cake_backend': {
        'test_jit_spec': frozenset({
            ('cake_build._local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.experimental.cake_kda_det_train_kcp.cake_kcp_jit': {
        'test_jit_spec': frozenset({
            ('cake_build._local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.experimental.cake_kda_train_kcp.cake_kcp_jit': {
        'test_jit_spec': frozenset({
            ('cake_build._local_cuda_version(get_cuda_version)', 0),
        }),
    },
    'flashinfer.experimental.cake_lm_head_loss.cake_jit': {
        'toolchain_runs_hidden_count': frozenset({
            ('get_cuda_version()', 0),
        }),
        'toolchain_workaround_flags': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.experimental.cake_mla_nvfp4_paged_decode.cake_jit': {
        'select_program': frozenset({
            ('get_cuda_version()', 0),
        }),
        'toolkit_supports': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.experimental.cake_mxfp8_megamoe_ep16.jit': {
        '_has_min_cuda': frozenset({
            ('is_cuda_version_at_least(minimum)', 0),
        }),
    },
    'flashinfer.fp4_quantization': {
        'gen_fp4_quantization_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.8")', 1),
        }),
    },
    'flashinfer.fused_moe.cake_w4a16': {
        'cake_w4a16_toolkit_unavailable': frozenset({
            ('get_cuda_version()', 0),
            ('is_cuda_version_at_least(CAKE_W4A16_MIN_CUDA)', 0),
        }),
    },
    'flashinfer.fused_moe.core': {
        'cutlass_fused_moe': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.fused_moe.runners': {
        '_CutlassRunnerBase._check_support': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.gemm.routergemm': {
        '_tinygemm2_sm100_enabled': frozenset({
            ('is_cuda_version_at_least("13.4")', 0),
        }),
        '_tinygemm2_tcgen05_enabled': frozenset({
            ('is_cuda_version_at_least("13.4")', 0),
        }),
        '_use_tinygemm2_sm100': frozenset({
            ('is_cuda_version_at_least("13.4")', 0),
        }),
    },
    'flashinfer.jit.cake_concat_mla_k': {
        'cake_concat_mla_k_target': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.cake_dsv4': {
        'gen_cake_dsv4_module': frozenset({
            ('get_cuda_version()', 0),
            ('is_cuda_version_at_least(required)', 0),
        }),
    },
    'flashinfer.jit.cake_minimax_h3_bf16_pre_attention': {
        'gen_minimax_h3_bf16_pre_attention_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.cake_minimax_h3_sm120_quant_fc1_swiglu': {
        'gen_minimax_h3_sm120_quant_fc1_swiglu_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.cake_minimax_h3_sm120_quant_mlp': {
        'gen_minimax_h3_sm120_quant_mlp_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.cpp_ext': {
        'build_cuda_cflags': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.jit.fp4_quantization': {
        'gen_fp4_quantization_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.8")', 1),
        }),
    },
    'flashinfer.jit.fused_moe': {
        'gen_alphamoe_fused_router_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
        }),
        'gen_alphamoe_sm100_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
        }),
        'gen_cutlass_fused_moe_sm89_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
        'gen_cutlass_fused_moe_sm90_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.8")', 1),
        }),
    },
    'flashinfer.jit.gemm.cutlass.generate_kernels': {
        'generate_sm90_mixed_type_grouped_gemm_operations': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.jit.gemm.fp8_blockscale': {
        'gen_fp8_blockscale_gemm_sm90_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.jit.minimax_h3_fc1_swiglu': {
        'gen_minimax_h3_fc1_swiglu_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.minimax_h3_mlp': {
        'gen_minimax_h3_mlp_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.minimax_h3_out_proj': {
        'gen_minimax_h3_out_proj_module': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.jit.tinygemm2': {
        'gen_tinygemm2_sm100_module': frozenset({
            ('is_cuda_version_at_least("13.4")', 0),
        }),
    },
    'flashinfer.kda_kernels.cake_packed_kda_decode': {
        '_target_for_device': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
            ('is_cuda_version_at_least("12.9")', 1),
            ('is_cuda_version_at_least("13.0")', 0),
        }),
    },
    'flashinfer.kda_kernels.recurrent_kda': {
        '_frozen_decode_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
            ('is_cuda_version_at_least("12.9")', 1),
        }),
        '_run_flash_kda_decode': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
            ('is_cuda_version_at_least("12.9")', 1),
        }),
    },
    'flashinfer.kda_prefill': {
        '_select_cake_kda_prefill_target': frozenset({
            ('_is_cuda_version_at_least("12.8")', 0),
            ('_is_cuda_version_at_least("12.9")', 0),
        }),
        '_select_flash_kda_prefill_target': frozenset({
            ('_is_cuda_version_at_least("12.8")', 0),
            ('_is_cuda_version_at_least("12.9")', 0),
            ('_is_cuda_version_at_least("12.9")', 1),
        }),
    },
    'flashinfer.locality_domain': {
        '_preflight': frozenset({
            ('_get_cuda_version()', 0),
        }),
    },
    'flashinfer.mla._sparse_mla_sm120.cake_dsv41_mixed': {
        '_direct_cvt_toolchain': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.mla.cake_dsv4': {
        '_oversized_smem_launchable': frozenset({
            ('get_cuda_version()', 0),
            ('is_cuda_version_at_least(_OVERSIZED_SMEM_CUDA_VERSION)', 0),
        }),
    },
    'flashinfer.mla.cake_trtllm_mla_blackwell': {
        'trtllm_mla_blackwell_decode': frozenset({
            ('is_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.moe_ep.kernel_src.sm90.push_style_megamoe.shim.gemm': {
        '_module_flags': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
        'gen_sm90_push_fp8_moe_gemm_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
        }),
    },
    'flashinfer.msa_ops._blackwell_sm100': {
        '_device_facts': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.9")', 0),
        }),
        '_select_target': frozenset({
            ('_cuda_version_at_least("12.8")', 0),
            ('_cuda_version_at_least("12.9")', 0),
        }),
    },
    'flashinfer.msa_ops._nvfp4_prefill_sm100': {
        'toolkit_decline_reason': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.quantization.fp4_quantization': {
        'gen_fp4_quantization_module': frozenset({
            ('is_cuda_version_at_least("12.8")', 0),
            ('is_cuda_version_at_least("12.8")', 1),
        }),
    },
}

FORWARDERS = {
    'flashinfer.*cake_build': {
        '_local_cuda_version': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.cake_dcp': {
        '_is_cuda_version_at_least': frozenset({
            ('is_cuda_version_at_least(version)', 0),
        }),
    },
    'flashinfer.cake_fmha': {
        '_decode_program_toolkit_at_least': frozenset({
            ('is_cuda_version_at_least(version)', 0),
        }),
    },
    'flashinfer.jit.cpp_ext': {
        'is_cuda_version_at_least': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.kda_prefill': {
        '_is_cuda_version_at_least': frozenset({
            ('is_cuda_version_at_least(version)', 0),
        }),
    },
    'flashinfer.locality_domain': {
        '_get_cuda_version': frozenset({
            ('get_cuda_version()', 0),
        }),
    },
    'flashinfer.msa_ops._blackwell_sm100': {
        '_cuda_version_at_least': frozenset({
            ('is_cuda_version_at_least(version)', 0),
        }),
    },
}
