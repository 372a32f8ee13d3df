//! The Qwen3.5/3.6 text model: embedding, hybrid decoder stack, final norm, lm_head.

use crate::checkpoint::Checkpoint;
use crate::config::{LayerType, Qwen35Config};
use crate::layers::attention::GatedAttention;
use crate::layers::gdn::GatedDeltaNet;
use crate::layers::mlp::Mlp;
use crate::layers::norm::{add_in_place, rms_norm_zero_centred_into};
use crate::layers::rope::Rope;
use crate::layers::scratch::Scratch;
use crate::mtp::{MtpHead, MtpOutput};
use crate::state::{LayerState, SequenceState};
use crate::weights::{ActivationMode, Embedding, LoadOptions, WeightReader};
use crate::{ModelError, Result};
use edge_core::par;
use edge_quant::linear::Linear;
use std::path::Path;

/// A layer's token mixer.
#[derive(Debug)]
pub enum Mixer {
    /// Gated DeltaNet.
    Gdn(Box<GatedDeltaNet>),
    /// Gated full attention.
    Attention(Box<GatedAttention>),
}

/// One pre-norm decoder block.
#[derive(Debug)]
pub struct DecoderLayer {
    /// `input_layernorm` (zero-centred).
    pub input_norm: Vec<f32>,
    /// `post_attention_layernorm` (zero-centred).
    pub post_norm: Vec<f32>,
    /// The mixer.
    pub mixer: Mixer,
    /// The MLP.
    pub mlp: Mlp,
}

impl DecoderLayer {
    /// Applies the block to `tokens` rows of the residual stream `x`, in place, with
    /// its work buffers from `scratch`.
    pub fn forward(
        &self,
        x: &mut [f32],
        tokens: usize,
        state: &mut LayerState,
        eps: f32,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let (mut normed, mut delta) = (scratch.take(x.len()), scratch.take(x.len()));
        rms_norm_zero_centred_into(x, &self.input_norm, eps, &mut normed);
        match (&self.mixer, state) {
            (Mixer::Gdn(m), LayerState::Gdn(s)) => {
                m.forward(&normed, tokens, s, &mut delta, scratch)?
            }
            (Mixer::Attention(m), LayerState::Attention(s)) => {
                m.forward(&normed, tokens, s, &mut delta, scratch)?
            }
            _ => {
                return Err(ModelError::InvalidInput(
                    "sequence state does not match the model's layer pattern".into(),
                ));
            }
        }
        add_in_place(x, &delta);
        rms_norm_zero_centred_into(x, &self.post_norm, eps, &mut normed);
        self.mlp.forward(&normed, tokens, &mut delta, scratch)?;
        add_in_place(x, &delta);
        scratch.give_all([normed, delta]);
        Ok(())
    }
}

/// Which rows of logits a forward pass computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (scoring, speculative verification).
    All,
}

/// What a forward pass returns.
#[derive(Clone, Debug)]
pub struct ForwardOutput {
    /// `[rows, vocab]` logits (rows = 1 or the token count, per [`Logits`]).
    pub logits: Vec<f32>,
    /// `[tokens, hidden]` final-normed hidden states (the MTP head's input).
    pub hidden: Vec<f32>,
}

/// The loaded model.
#[derive(Debug)]
pub struct Qwen35Model {
    config: Qwen35Config,
    embed: Embedding,
    layers: Vec<DecoderLayer>,
    norm: Vec<f32>,
    lm_head: Linear,
    mtp: Option<MtpHead>,
}

impl Qwen35Model {
    /// Loads `config.json` and the checkpoint from a model directory.
    pub fn load(dir: &Path, activations: ActivationMode) -> Result<Self> {
        Self::load_with(
            dir,
            LoadOptions {
                activations,
                ..LoadOptions::default()
            },
        )
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
            kv_cache: options.kv_cache,
        };
        let h = config.hidden_size;
        let embed = Embedding::new(
            ckpt.require("model.embed_tokens.weight")?,
            config.vocab_size,
            h,
        )?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| load_layer(&r, &config, i))
            .collect::<Result<Vec<_>>>()?;
        let norm = r.vector("model.norm.weight", h)?;
        let lm_head = if config.tie_word_embeddings && !ckpt.contains("lm_head.weight") {
            r.with_mode(embed.as_linear()?)?
        } else {
            r.linear("lm_head", config.vocab_size, h)?
        };
        // The MTP head is optional: checkpoints with it stripped still load.
        let mtp = if config.mtp_num_hidden_layers > 0 && ckpt.contains("mtp.fc.weight") {
            Some(MtpHead::load(&r, &config)?)
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

    /// The configuration.
    pub fn config(&self) -> &Qwen35Config {
        &self.config
    }

    /// The decoder layers.
    pub fn layers(&self) -> &[DecoderLayer] {
        &self.layers
    }

    /// The output projection.
    pub fn lm_head(&self) -> &Linear {
        &self.lm_head
    }

    /// The embedding table.
    pub fn embedding(&self) -> &Embedding {
        &self.embed
    }

    /// Every decoder-layer linear with its module name (`model.layers.{i}.…`), for
    /// calibration.
    pub fn layer_linears_mut(&mut self) -> Vec<(String, &mut Linear)> {
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

    /// Weight bytes one decode step reads: every decoder-layer linear plus `lm_head`
    /// (the memory traffic that bounds decode speed).
    pub fn weight_bytes_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                let mixer = match &l.mixer {
                    Mixer::Gdn(m) => [
                        &m.in_proj_qkv,
                        &m.in_proj_z,
                        &m.in_proj_b,
                        &m.in_proj_a,
                        &m.out_proj,
                    ]
                    .iter()
                    .map(|x| x.weight_bytes())
                    .sum::<usize>(),
                    Mixer::Attention(m) => [&m.q_proj, &m.k_proj, &m.v_proj, &m.o_proj]
                        .iter()
                        .map(|x| x.weight_bytes())
                        .sum(),
                };
                mixer
                    + l.mlp.gate.weight_bytes()
                    + l.mlp.up.weight_bytes()
                    + l.mlp.down.weight_bytes()
            })
            .sum();
        layers + self.lm_head.weight_bytes()
    }

    /// Every full-attention mixer with its module name (`model.layers.{i}.self_attn`).
    pub fn attention_mut(&mut self) -> Vec<(String, &mut GatedAttention)> {
        self.layers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, l)| match &mut l.mixer {
                Mixer::Attention(m) => Some((format!("model.layers.{i}.self_attn"), &mut **m)),
                Mixer::Gdn(_) => None,
            })
            .collect()
    }

    /// The MTP head, when the checkpoint has one.
    pub fn mtp(&self) -> Option<&MtpHead> {
        self.mtp.as_ref()
    }

    /// Runs the MTP head (see [`MtpHead::forward`]) with this model's embedding and
    /// `lm_head`.
    pub fn mtp_forward(
        &self,
        next_tokens: &[u32],
        hidden: &[f32],
        state: &mut LayerState,
        logits: Logits,
    ) -> Result<MtpOutput> {
        let head = self.mtp.as_ref().ok_or_else(|| {
            ModelError::InvalidInput("this checkpoint has no MTP head (mtp.* tensors)".into())
        })?;
        if let Some(&bad) = next_tokens
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(ModelError::InvalidInput(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        on_worker(next_tokens.len(), || {
            head.forward(
                &self.embed,
                &self.lm_head,
                next_tokens,
                hidden,
                state,
                logits,
                &mut Scratch::new(),
            )
        })
    }

    /// A fresh KV cache for the MTP head.
    pub fn new_mtp_state(&self) -> LayerState {
        MtpHead::new_state(&self.config)
    }

    /// A fresh per-sequence state.
    pub fn new_state(&self) -> SequenceState {
        SequenceState::new(&self.config)
    }

    /// Runs `tokens` after what `state` holds, updating it.
    ///
    /// Every input error (empty input, an id outside the vocabulary, a sequence past the
    /// context, a state of another model) is found before any layer runs, so it leaves
    /// the state untouched. Shapes are fixed at load time, so no later step can fail on
    /// user input; the state is not snapshotted per call, which would copy the whole KV
    /// cache on every decode step.
    pub fn forward(
        &self,
        tokens: &[u32],
        state: &mut SequenceState,
        logits: Logits,
    ) -> Result<ForwardOutput> {
        self.forward_with_scratch(tokens, state, logits, &mut Scratch::new())
    }

    /// [`Qwen35Model::forward`] with the layers' work buffers from `scratch`, which a
    /// caller may keep from one call to the next (they then cost no allocation).
    pub fn forward_with_scratch(
        &self,
        tokens: &[u32],
        state: &mut SequenceState,
        logits: Logits,
        scratch: &mut Scratch,
    ) -> Result<ForwardOutput> {
        self.validate(tokens, state)?;
        on_worker(tokens.len(), || {
            self.forward_validated(tokens, state, logits, scratch)
        })
    }

    fn forward_validated(
        &self,
        tokens: &[u32],
        state: &mut SequenceState,
        logits: Logits,
        scratch: &mut Scratch,
    ) -> Result<ForwardOutput> {
        let h = self.config.hidden_size;
        let t = tokens.len();
        let mut x = vec![0.0; t * h];
        for (row, &tok) in x.chunks_exact_mut(h).zip(tokens) {
            self.embed.lookup(tok, row)?;
        }
        for (layer, layer_state) in self.layers.iter().zip(state.layers.iter_mut()) {
            layer.forward(&mut x, t, layer_state, self.config.rms_norm_eps, scratch)?;
        }
        let mut normed = vec![0.0; t * h];
        rms_norm_zero_centred_into(&x, &self.norm, self.config.rms_norm_eps, &mut normed);
        let (rows, input) = match logits {
            Logits::Last => (1, &normed[(t - 1) * h..]),
            Logits::All => (t, &normed[..]),
        };
        let mut out = vec![0.0; rows * self.config.vocab_size];
        self.lm_head.forward(input, rows, &mut out)?;
        state.position += t;
        Ok(ForwardOutput {
            logits: out,
            hidden: normed,
        })
    }

    fn validate(&self, tokens: &[u32], state: &SequenceState) -> Result<()> {
        if tokens.is_empty() {
            return Err(ModelError::InvalidInput("no tokens to run".into()));
        }
        if let Some(&bad) = tokens
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(ModelError::InvalidInput(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        let end = state.position + tokens.len();
        if end > self.config.max_position_embeddings {
            return Err(ModelError::InvalidInput(format!(
                "{} tokens after {} cached would reach position {end}, past the context of {}",
                tokens.len(),
                state.position,
                self.config.max_position_embeddings
            )));
        }
        if state.layers.len() != self.layers.len() {
            return Err(ModelError::InvalidInput(format!(
                "sequence state has {} layers, the model {}",
                state.layers.len(),
                self.layers.len()
            )));
        }
        Ok(())
    }
}

/// Forward passes of at most this many tokens (decode steps, short verification
/// batches) run with a spinning team ([`par::spinning`]): their parallel regions are
/// short enough that waking a sleeping rayon worker for each costs more than the other
/// core spinning. Longer passes keep rayon, whose prompt loops (the bf16 GEMM, prompt
/// attention) do not go through [`par::for_each`].
const SPIN_MAX_TOKENS: usize = 4;

/// Runs a forward pass of `tokens` tokens, `f`, on a rayon worker thread. A forward
/// pass opens a few hundred parallel regions; started from a thread outside the pool,
/// each would park the caller and wake a worker (two context switches per region,
/// measured at ~15% of decode time on two cores). From a worker, regions run inline
/// and only split work is stolen.
fn on_worker<R: Send>(tokens: usize, f: impl FnOnce() -> R + Send) -> R {
    let pass = || {
        if tokens <= SPIN_MAX_TOKENS {
            par::spinning(f)
        } else {
            f()
        }
    };
    if rayon::current_thread_index().is_some() {
        pass()
    } else {
        rayon::scope(|_| pass())
    }
}

fn load_layer(r: &WeightReader, c: &Qwen35Config, i: usize) -> Result<DecoderLayer> {
    let p = format!("model.layers.{i}");
    let h = c.hidden_size;
    let mixer = match c.layer_types[i] {
        LayerType::LinearAttention => {
            Mixer::Gdn(Box::new(load_gdn(r, c, &format!("{p}.linear_attn"))?))
        }
        LayerType::FullAttention => {
            let prefix = format!("{p}.self_attn");
            let mut attn = load_attention(r, c, &prefix)?;
            attn.kv_fp8 = r.kv_scales(&prefix)?;
            Mixer::Attention(Box::new(attn))
        }
    };
    Ok(DecoderLayer {
        input_norm: r.vector(&format!("{p}.input_layernorm.weight"), h)?,
        post_norm: r.vector(&format!("{p}.post_attention_layernorm.weight"), h)?,
        mixer,
        mlp: load_mlp(r, c, &format!("{p}.mlp"))?,
    })
}

pub(crate) fn load_mlp(r: &WeightReader, c: &Qwen35Config, p: &str) -> Result<Mlp> {
    let (h, f) = (c.hidden_size, c.intermediate_size);
    Ok(Mlp {
        gate: r.linear(&format!("{p}.gate_proj"), f, h)?,
        up: r.linear(&format!("{p}.up_proj"), f, h)?,
        down: r.linear(&format!("{p}.down_proj"), h, f)?,
    })
}

pub(crate) fn load_attention(
    r: &WeightReader,
    c: &Qwen35Config,
    p: &str,
) -> Result<GatedAttention> {
    let (h, d) = (c.hidden_size, c.head_dim);
    let (nq, nkv) = (c.num_attention_heads, c.num_key_value_heads);
    Ok(GatedAttention {
        q_proj: r.linear(&format!("{p}.q_proj"), nq * 2 * d, h)?,
        k_proj: r.linear(&format!("{p}.k_proj"), nkv * d, h)?,
        v_proj: r.linear(&format!("{p}.v_proj"), nkv * d, h)?,
        o_proj: r.linear(&format!("{p}.o_proj"), h, nq * d)?,
        q_norm: r.vector(&format!("{p}.q_norm.weight"), d)?,
        k_norm: r.vector(&format!("{p}.k_norm.weight"), d)?,
        heads: nq,
        kv_heads: nkv,
        head_dim: d,
        eps: c.rms_norm_eps,
        rope: Rope::new(c.rotary_dim(), c.rope_theta),
        kv_observer: None,
        kv_fp8: None,
    })
}

fn load_gdn(r: &WeightReader, c: &Qwen35Config, p: &str) -> Result<GatedDeltaNet> {
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
        conv_taps: GatedDeltaNet::conv_taps_from_checkpoint(
            &r.tensor(&format!("{p}.conv1d.weight"), &[channels, 1, kernel])?,
            channels,
            kernel,
        ),
        neg_a: a_log.iter().map(|a| -a.exp()).collect(),
        dt_bias: r.vector(&format!("{p}.dt_bias"), hv)?,
        norm_weight: r.vector(&format!("{p}.norm.weight"), dv)?,
        out_proj: r.linear(&format!("{p}.out_proj"), h, hv * dv)?,
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
        kernel,
        eps: c.rms_norm_eps,
    })
}
