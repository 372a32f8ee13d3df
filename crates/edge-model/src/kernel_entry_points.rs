// The `extern "C"` entry points of edge-model's kernel sources, by source name. Plain data,
// `include!`d by src/kernel_sources.rs and by build.rs (which compiles each entry point
// for the emulated CUDA device).

/// The entry points of each model source (checked against the text by a test).
pub const ENTRY_POINTS: &[(&str, &[&str])] = &[
    (
        "edge_model_elementwise",
        &[
            "eq_add_f32",
            "eq_gate_silu_f32",
            "eq_gate_sigmoid_f32",
            "eq_concat_rows_f32",
            "eq_gather_rows_f32",
            "eq_embed_bf16",
            "eq_rms_norm_f32",
            "eq_gated_rms_norm_f32",
        ],
    ),
    ("edge_model_sampling", &["eq_argmax_f32", "eq_topk_f32"]),
    (
        "edge_model_gdn",
        &[
            "eq_gdn_conv_f32",
            "eq_gdn_recurrence_f32",
            "eq_gdn_chunked_f32",
        ],
    ),
    (
        "edge_model_attention",
        &[
            "eq_attn_rows_fp8_d32",
            "eq_attn_rows_fp8_d64",
            "eq_attn_rows_fp8_d128",
            "eq_attn_rows_fp8_d256",
            "eq_attn_rows_bf16_d32",
            "eq_attn_rows_bf16_d64",
            "eq_attn_rows_bf16_d128",
            "eq_attn_rows_bf16_d256",
            "eq_attn_rows_f32_d32",
            "eq_attn_rows_f32_d64",
            "eq_attn_rows_f32_d128",
            "eq_attn_rows_f32_d256",
            "eq_attn_combine",
        ],
    ),
    (
        "edge_model_attention_tiles",
        &[
            "eq_attn_tile_fp8_d32",
            "eq_attn_tile_fp8_d64",
            "eq_attn_tile_fp8_d128",
            "eq_attn_tile_fp8_d256",
            "eq_attn_tile_bf16_d32",
            "eq_attn_tile_bf16_d64",
            "eq_attn_tile_bf16_d128",
            "eq_attn_tile_bf16_d256",
        ],
    ),
    ("edge_model_rope", &["eq_attn_inputs_f32"]),
    (
        "edge_model_kv_store",
        &[
            "eq_kv_store_fp8",
            "eq_kv_store_bf16",
            "eq_kv_store_f32",
            "eq_kv_copy_rows_fp8",
            "eq_kv_copy_rows_bf16",
            "eq_kv_copy_rows_f32",
        ],
    ),
];
