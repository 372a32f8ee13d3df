//! The built-in multi-token-prediction head (spec §7): one extra gated-attention block
//! that combines the main model's final-normed hidden state at position t with the
//! embedding of token t+1 and predicts token t+2 through the shared `lm_head`. Its
//! keys and values sit in the cache as the last attention layer, at the rows of the
//! positions they belong to.

use crate::backend::{Backend, ForwardPlan};
use crate::batch::StepBatch;
use crate::layers::attention::GatedAttention;
use crate::model::{DecoderLayer, Mixer, Qwen35Model};
use crate::{ModelError, Result};

/// The MTP head's own weights (embedding and `lm_head` are the main model's).
#[derive(Debug)]
pub struct MtpHead<B: Backend> {
    pub(crate) fc: B::Linear,
    pub(crate) pre_fc_norm_embedding: B::Vector,
    pub(crate) pre_fc_norm_hidden: B::Vector,
    pub(crate) norm: B::Vector,
    pub(crate) layer: DecoderLayer<B>,
    pub(crate) eps: f32,
    pub(crate) hidden: usize,
}

impl<B: Backend> MtpHead<B> {
    /// The head's attention mixer.
    pub(crate) fn attention(&self) -> &GatedAttention<B> {
        match &self.layer.mixer {
            Mixer::Attention(a) => a,
            Mixer::Gdn(_) => unreachable!("the MTP block is loaded with an attention mixer"),
        }
    }

    /// The head over the rows of `batch` (next tokens) and `hidden` (`[rows, hidden]`);
    /// returns its `[rows, hidden]` outputs after `mtp.norm`, the input of a next draft
    /// step and of `lm_head`.
    pub(crate) fn forward(
        &self,
        be: &mut B,
        model: &Qwen35Model<B>,
        batch: &StepBatch,
        plan: &ForwardPlan,
        hidden: &B::Buf,
        memory: &mut B::Memory,
    ) -> Result<B::Buf> {
        let (h, t) = (self.hidden, batch.len());
        if be.buf_len(hidden) != t * h {
            return Err(ModelError::OperandLength {
                op: "mtp_forward",
                what: "hidden (one row per token)",
                got: be.buf_len(hidden),
                expected: t * h,
            });
        }
        let mut e = be.alloc(t * h)?;
        be.embed(model.embedding(), batch.tokens(), &mut e)?;
        let (mut en, mut hn) = (be.alloc(t * h)?, be.alloc(t * h)?);
        be.rms_norm(&e, &self.pre_fc_norm_embedding, self.eps, &mut en)?;
        be.rms_norm(hidden, &self.pre_fc_norm_hidden, self.eps, &mut hn)?;
        // Embedding first, hidden second.
        let mut combined = be.alloc(t * 2 * h)?;
        be.concat_rows(&en, &hn, h, &mut combined)?;
        for buf in [e, en, hn] {
            be.free(buf);
        }
        let mut x = be.alloc(t * h)?;
        be.linear(&[&self.fc], &combined, t, &mut [&mut x])?;
        be.free(combined);
        self.layer.forward(be, &mut x, plan, memory, self.eps, h)?;
        let mut out = be.alloc(t * h)?;
        be.rms_norm(&x, &self.norm, self.eps, &mut out)?;
        be.free(x);
        Ok(out)
    }
}
