//! Building the CPU model from a checkpoint, and the CPU-only hooks (calibration).

use crate::Result;
use crate::backend::{AttentionShape, GdnShape};
use crate::checkpoint::Checkpoint;
use crate::config::{LayerType, Qwen35Config};
use crate::cpu::Cpu;
use crate::layers::attention::GatedAttention;
use crate::layers::gdn::{GatedDeltaNet, conv_taps_from_checkpoint};
use crate::layers::mlp::Mlp;
use crate::model::{DecoderLayer, Mixer, Qwen35Model};
use crate::mtp::MtpHead;
use crate::rope::Rope;
use crate::weights::{ActivationMode, Embedding, LoadOptions, WeightReader};
#[cfg(feature = "export")]
use edge_quant::linear::Linear;
use std::path::Path;

impl Qwen35Model<Cpu> {
    /// Loads `config.json` and the checkpoint from a model directory.
    pub fn load(dir: &Path, activations: ActivationMode) -> Result<Self> {
        Self::load_with(dir, LoadOptions { activations })
    }

    /// Loads with explicit options.
    pub fn load_with(dir: &Path, options: LoadOptions) -> Result<Self> {
        let config = Qwen35Config::from_dir(dir)?;
        let ckpt = Checkpoint::open(dir)?;
        Self::from_checkpoint(config, &ckpt, options)
    }

    /// Builds the model from an opened checkpoint.
    pub fn from_checkpoint(
        config: Qwen35Config,
        ckpt: &Checkpoint,
        options: LoadOptions,
    ) -> Result<Self> {
        let r = WeightReader {
            ckpt,
            activations: options.activations,
        };
        let h = config.hidden_size;
        let embed = Embedding::new(
            ckpt.require("model.embed_tokens.weight")?,
            config.vocab_size,
            h,
        )?;
        let cache_layers = Self::assign_cache_layers(&config.layer_types);
        let layers = (0..config.num_hidden_layers)
            .map(|i| load_layer(&r, &config, i, cache_layers[i]))
            .collect::<Result<Vec<_>>>()?;
        let norm = r.vector("model.norm.weight", h)?;
        let lm_head = if config.tie_word_embeddings && !ckpt.contains("lm_head.weight") {
            r.with_mode(embed.as_linear()?)?
        } else {
            r.linear("lm_head", config.vocab_size, h)?
        };
        // The MTP head is optional: checkpoints with it stripped still load. Its
        // attention layer comes after the decoder's in the cache.
        let attention_layers = (config.layer_types.iter())
            .filter(|t| **t == LayerType::FullAttention)
            .count();
        let mtp = if config.mtp_num_hidden_layers > 0 && ckpt.contains("mtp.fc.weight") {
            Some(load_mtp(&r, &config, attention_layers)?)
        } else {
            None
        };
        Ok(Qwen35Model {
            config,
            embed,
            layers,
            norm,
            lm_head,
            mtp,
        })
    }

    /// Every decoder-layer linear with its module name (`model.layers.{i}.…`), for
    /// calibration.
    #[cfg(feature = "export")]
    pub(crate) fn layer_linears_mut(&mut self) -> Vec<(String, &mut Linear)> {
        let mut out = Vec::new();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let p = format!("model.layers.{i}");
            match &mut layer.mixer {
                Mixer::Gdn(m) => {
                    out.push((format!("{p}.linear_attn.in_proj_qkv"), &mut m.in_proj_qkv));
                    out.push((format!("{p}.linear_attn.in_proj_z"), &mut m.in_proj_z));
                    out.push((format!("{p}.linear_attn.in_proj_b"), &mut m.in_proj_b));
                    out.push((format!("{p}.linear_attn.in_proj_a"), &mut m.in_proj_a));
                    out.push((format!("{p}.linear_attn.out_proj"), &mut m.out_proj));
                }
                Mixer::Attention(m) => {
                    out.push((format!("{p}.self_attn.q_proj"), &mut m.q_proj));
                    out.push((format!("{p}.self_attn.k_proj"), &mut m.k_proj));
                    out.push((format!("{p}.self_attn.v_proj"), &mut m.v_proj));
                    out.push((format!("{p}.self_attn.o_proj"), &mut m.o_proj));
                }
            }
            out.push((format!("{p}.mlp.gate_proj"), &mut layer.mlp.gate));
            out.push((format!("{p}.mlp.up_proj"), &mut layer.mlp.up));
            out.push((format!("{p}.mlp.down_proj"), &mut layer.mlp.down));
        }
        out
    }

    /// Every full-attention mixer with its module name (`model.layers.{i}.self_attn`).
    #[cfg(feature = "export")]
    pub(crate) fn attention_mut(&mut self) -> Vec<(String, &mut GatedAttention<Cpu>)> {
        self.layers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, l)| match &mut l.mixer {
                Mixer::Attention(m) => Some((format!("model.layers.{i}.self_attn"), &mut **m)),
                Mixer::Gdn(_) => None,
            })
            .collect()
    }
}

fn load_layer(
    r: &WeightReader,
    c: &Qwen35Config,
    i: usize,
    cache_layer: usize,
) -> Result<DecoderLayer<Cpu>> {
    let p = format!("model.layers.{i}");
    let h = c.hidden_size;
    let mixer = match c.layer_types[i] {
        LayerType::LinearAttention => {
            Mixer::Gdn(Box::new(load_gdn(r, c, &format!("{p}.linear_attn"))?))
        }
        LayerType::FullAttention => {
            Mixer::Attention(Box::new(load_attention(r, c, &format!("{p}.self_attn"))?))
        }
    };
    Ok(DecoderLayer {
        input_norm: r.vector(&format!("{p}.input_layernorm.weight"), h)?,
        post_norm: r.vector(&format!("{p}.post_attention_layernorm.weight"), h)?,
        mixer,
        mlp: load_mlp(r, c, &format!("{p}.mlp"))?,
        cache_layer,
    })
}

fn load_mtp(r: &WeightReader, c: &Qwen35Config, cache_layer: usize) -> Result<MtpHead<Cpu>> {
    let h = c.hidden_size;
    let p = "mtp.layers.0";
    let layer = DecoderLayer {
        input_norm: r.vector(&format!("{p}.input_layernorm.weight"), h)?,
        post_norm: r.vector(&format!("{p}.post_attention_layernorm.weight"), h)?,
        mixer: Mixer::Attention(Box::new(load_attention(r, c, &format!("{p}.self_attn"))?)),
        mlp: load_mlp(r, c, &format!("{p}.mlp"))?,
        cache_layer,
    };
    Ok(MtpHead {
        fc: r.linear("mtp.fc", h, 2 * h)?,
        pre_fc_norm_embedding: r.vector("mtp.pre_fc_norm_embedding.weight", h)?,
        pre_fc_norm_hidden: r.vector("mtp.pre_fc_norm_hidden.weight", h)?,
        norm: r.vector("mtp.norm.weight", h)?,
        layer,
        eps: c.rms_norm_eps,
        hidden: h,
    })
}

fn load_mlp(r: &WeightReader, c: &Qwen35Config, p: &str) -> Result<Mlp<Cpu>> {
    let (h, f) = (c.hidden_size, c.intermediate_size);
    Ok(Mlp {
        gate: r.linear(&format!("{p}.gate_proj"), f, h)?,
        up: r.linear(&format!("{p}.up_proj"), f, h)?,
        down: r.linear(&format!("{p}.down_proj"), h, f)?,
    })
}

fn load_attention(r: &WeightReader, c: &Qwen35Config, p: &str) -> Result<GatedAttention<Cpu>> {
    let (h, d) = (c.hidden_size, c.head_dim);
    let (nq, nkv) = (c.num_attention_heads, c.num_key_value_heads);
    Ok(GatedAttention {
        q_proj: r.linear(&format!("{p}.q_proj"), nq * 2 * d, h)?,
        k_proj: r.linear(&format!("{p}.k_proj"), nkv * d, h)?,
        v_proj: r.linear(&format!("{p}.v_proj"), nkv * d, h)?,
        o_proj: r.linear(&format!("{p}.o_proj"), h, nq * d)?,
        q_norm: r.vector(&format!("{p}.q_norm.weight"), d)?,
        k_norm: r.vector(&format!("{p}.k_norm.weight"), d)?,
        shape: AttentionShape {
            heads: nq,
            kv_heads: nkv,
            head_dim: d,
        },
        eps: c.rms_norm_eps,
        rope: Rope::new(c.rotary_dim(), c.rope_theta),
        kv_scales: r.kv_scales(p)?,
        kv_observer: None,
    })
}

fn load_gdn(r: &WeightReader, c: &Qwen35Config, p: &str) -> Result<GatedDeltaNet<Cpu>> {
    let h = c.hidden_size;
    let (hk, hv) = (c.linear_num_key_heads, c.linear_num_value_heads);
    let (dk, dv) = (c.linear_key_head_dim, c.linear_value_head_dim);
    let channels = c.linear_conv_channels();
    let kernel = c.linear_conv_kernel_dim;
    let a_log = r.vector(&format!("{p}.A_log"), hv)?;
    Ok(GatedDeltaNet {
        in_proj_qkv: r.linear(&format!("{p}.in_proj_qkv"), channels, h)?,
        in_proj_z: r.linear(&format!("{p}.in_proj_z"), hv * dv, h)?,
        in_proj_b: r.linear(&format!("{p}.in_proj_b"), hv, h)?,
        in_proj_a: r.linear(&format!("{p}.in_proj_a"), hv, h)?,
        conv_taps: conv_taps_from_checkpoint(
            &r.tensor(&format!("{p}.conv1d.weight"), &[channels, 1, kernel])?,
            channels,
            kernel,
        ),
        neg_a: a_log.iter().map(|a| -a.exp()).collect(),
        dt_bias: r.vector(&format!("{p}.dt_bias"), hv)?,
        norm_weight: r.vector(&format!("{p}.norm.weight"), dv)?,
        out_proj: r.linear(&format!("{p}.out_proj"), h, hv * dv)?,
        shape: GdnShape {
            key_heads: hk,
            value_heads: hv,
            key_dim: dk,
            value_dim: dv,
            kernel,
        },
        eps: c.rms_norm_eps,
    })
}
