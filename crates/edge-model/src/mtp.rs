//! The built-in multi-token-prediction head (spec §7): one extra gated-attention block
//! that combines the main model's final-normed hidden state at position t with the
//! embedding of token t+1 and predicts token t+2 through the shared `lm_head`.

use crate::config::Qwen35Config;
use crate::layers::norm::rms_norm_zero_centred_into;
use crate::layers::scratch::Scratch;
use crate::model::{DecoderLayer, Logits, Mixer, load_attention, load_mlp};
use crate::state::{AttentionState, LayerState};
use crate::weights::{Embedding, WeightReader};
use crate::{ModelError, Result};
use edge_quant::linear::Linear;

/// The MTP head's own weights (embedding and `lm_head` are the main model's).
#[derive(Debug)]
pub struct MtpHead {
    fc: Linear,
    pre_fc_norm_embedding: Vec<f32>,
    pre_fc_norm_hidden: Vec<f32>,
    norm: Vec<f32>,
    layer: DecoderLayer,
    eps: f32,
    hidden: usize,
}

/// What [`MtpHead::forward`] returns.
#[derive(Clone, Debug)]
pub struct MtpOutput {
    /// `[rows, vocab]` draft logits (1 or all rows, per [`Logits`]).
    pub logits: Vec<f32>,
    /// `[tokens, hidden]` outputs after `mtp.norm`: the hidden input of the next draft
    /// step when drafting more than one token.
    pub hidden: Vec<f32>,
}

impl MtpHead {
    pub(crate) fn load(r: &WeightReader, c: &Qwen35Config) -> Result<Self> {
        let h = c.hidden_size;
        let p = "mtp.layers.0";
        let layer = DecoderLayer {
            input_norm: r.vector(&format!("{p}.input_layernorm.weight"), h)?,
            post_norm: r.vector(&format!("{p}.post_attention_layernorm.weight"), h)?,
            mixer: Mixer::Attention(Box::new(load_attention(r, c, &format!("{p}.self_attn"))?)),
            mlp: load_mlp(r, c, &format!("{p}.mlp"))?,
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

    /// A fresh KV cache for the MTP block.
    pub fn new_state(c: &Qwen35Config) -> LayerState {
        LayerState::Attention(AttentionState::new(c.num_key_value_heads, c.head_dim))
    }

    /// Runs the head over `next_tokens.len()` consecutive positions, continuing `state`
    /// (whose length is the position of the first row). Row i combines `hidden` row i
    /// (the hidden state at that position) with the embedding of `next_tokens[i]`. The
    /// layer's work buffers come from `scratch`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        embed: &Embedding,
        lm_head: &Linear,
        next_tokens: &[u32],
        hidden: &[f32],
        state: &mut LayerState,
        logits: Logits,
        scratch: &mut Scratch,
    ) -> Result<MtpOutput> {
        let (h, t) = (self.hidden, next_tokens.len());
        if t == 0 || hidden.len() != t * h {
            return Err(ModelError::InvalidInput(format!(
                "MTP needs one hidden row of {h} per token: got {} tokens and {} values",
                t,
                hidden.len()
            )));
        }
        let mut combined = vec![0.0; t * 2 * h];
        let mut e = vec![0.0; h];
        for (i, &tok) in next_tokens.iter().enumerate() {
            embed.lookup(tok, &mut e)?;
            let row = &mut combined[i * 2 * h..][..2 * h];
            rms_norm_zero_centred_into(&e, &self.pre_fc_norm_embedding, self.eps, &mut row[..h]);
            rms_norm_zero_centred_into(
                &hidden[i * h..][..h],
                &self.pre_fc_norm_hidden,
                self.eps,
                &mut row[h..],
            );
        }
        let mut x = vec![0.0; t * h];
        self.fc.forward(&combined, t, &mut x)?;
        self.layer.forward(&mut x, t, state, self.eps, scratch)?;
        let mut normed = vec![0.0; t * h];
        rms_norm_zero_centred_into(&x, &self.norm, self.eps, &mut normed);
        let (rows, input) = match logits {
            Logits::Last => (1, &normed[(t - 1) * h..]),
            Logits::All => (t, &normed[..]),
        };
        let mut out = vec![0.0; rows * lm_head.out_features()];
        lm_head.forward(input, rows, &mut out)?;
        Ok(MtpOutput {
            logits: out,
            hidden: normed,
        })
    }
}
