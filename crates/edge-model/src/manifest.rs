//! The tensors a Qwen3.5 checkpoint holds for a given config (plain `model.*` names),
//! with the role of each — used to validate checkpoints, to choose what to quantize, and
//! to synthesise random checkpoints for tests and benchmarks.

use crate::config::{LayerType, Qwen35Config};

/// What a tensor is for; decides initialisation and quantization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorRole {
    /// A `[out, in]` projection.
    Linear,
    /// The token embedding table.
    Embedding,
    /// A zero-centred RMSNorm weight (stored as an offset around 0).
    ZeroCentredNorm,
    /// The GDN gated-norm weight (plain, around 1).
    GatedNorm,
    /// The GDN depthwise conv weight `[channels, 1, kernel]`.
    Conv,
    /// GDN `A_log`.
    ALog,
    /// GDN `dt_bias`.
    DtBias,
}

/// One tensor of the manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Plain-layout name.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Role.
    pub role: TensorRole,
}

/// Every tensor of the text model (and of the MTP head when the config has one).
pub fn tensor_manifest(c: &Qwen35Config) -> Vec<TensorSpec> {
    let mut out = Vec::new();
    let mut push =
        |name: String, shape: Vec<usize>, role| out.push(TensorSpec { name, shape, role });
    let (h, v) = (c.hidden_size, c.vocab_size);
    push(
        "model.embed_tokens.weight".into(),
        vec![v, h],
        TensorRole::Embedding,
    );
    for (i, kind) in c.layer_types.iter().enumerate() {
        let p = format!("model.layers.{i}");
        block(&mut push, c, &p, *kind);
    }
    push(
        "model.norm.weight".into(),
        vec![h],
        TensorRole::ZeroCentredNorm,
    );
    if !c.tie_word_embeddings {
        push("lm_head.weight".into(), vec![v, h], TensorRole::Linear);
    }
    if c.mtp_num_hidden_layers > 0 {
        push("mtp.fc.weight".into(), vec![h, 2 * h], TensorRole::Linear);
        for n in ["pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"] {
            push(
                format!("mtp.{n}.weight"),
                vec![h],
                TensorRole::ZeroCentredNorm,
            );
        }
        block(&mut push, c, "mtp.layers.0", LayerType::FullAttention);
    }
    out
}

fn block(
    push: &mut impl FnMut(String, Vec<usize>, TensorRole),
    c: &Qwen35Config,
    p: &str,
    kind: LayerType,
) {
    let (h, f) = (c.hidden_size, c.intermediate_size);
    push(
        format!("{p}.input_layernorm.weight"),
        vec![h],
        TensorRole::ZeroCentredNorm,
    );
    push(
        format!("{p}.post_attention_layernorm.weight"),
        vec![h],
        TensorRole::ZeroCentredNorm,
    );
    match kind {
        LayerType::LinearAttention => {
            let a = format!("{p}.linear_attn");
            let (hv, dv) = (c.linear_num_value_heads, c.linear_value_head_dim);
            let ch = c.linear_conv_channels();
            push(
                format!("{a}.in_proj_qkv.weight"),
                vec![ch, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.in_proj_z.weight"),
                vec![hv * dv, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.in_proj_b.weight"),
                vec![hv, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.in_proj_a.weight"),
                vec![hv, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.conv1d.weight"),
                vec![ch, 1, c.linear_conv_kernel_dim],
                TensorRole::Conv,
            );
            push(format!("{a}.dt_bias"), vec![hv], TensorRole::DtBias);
            push(format!("{a}.A_log"), vec![hv], TensorRole::ALog);
            push(format!("{a}.norm.weight"), vec![dv], TensorRole::GatedNorm);
            push(
                format!("{a}.out_proj.weight"),
                vec![h, hv * dv],
                TensorRole::Linear,
            );
        }
        LayerType::FullAttention => {
            let a = format!("{p}.self_attn");
            let (nq, nkv, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim);
            push(
                format!("{a}.q_proj.weight"),
                vec![nq * 2 * d, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.k_proj.weight"),
                vec![nkv * d, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.v_proj.weight"),
                vec![nkv * d, h],
                TensorRole::Linear,
            );
            push(
                format!("{a}.o_proj.weight"),
                vec![h, nq * d],
                TensorRole::Linear,
            );
            push(
                format!("{a}.q_norm.weight"),
                vec![d],
                TensorRole::ZeroCentredNorm,
            );
            push(
                format!("{a}.k_norm.weight"),
                vec![d],
                TensorRole::ZeroCentredNorm,
            );
        }
    }
    for (n, shape) in [
        ("gate_proj", [f, h]),
        ("up_proj", [f, h]),
        ("down_proj", [h, f]),
    ] {
        push(
            format!("{p}.mlp.{n}.weight"),
            shape.to_vec(),
            TensorRole::Linear,
        );
    }
}
