//! Moving a loaded model onto another backend: checkpoints load on the CPU (the
//! reference), and [`Qwen35Model::to_backend`] rebuilds the same model with every weight
//! in the target backend's form, through the three conversions of [`WeightUpload`]. The
//! structure (layers, mixers, the MTP head) is walked once, here, for every backend.

use crate::Result;
use crate::backend::Backend;
use crate::cpu::Cpu;
use crate::layers::attention::GatedAttention;
use crate::layers::gdn::GatedDeltaNet;
use crate::layers::mlp::Mlp;
use crate::model::{DecoderLayer, Mixer, Qwen35Model};
use crate::mtp::MtpHead;
use crate::weights::Embedding;
use edge_quant::linear::{Linear, LinearWeight};

/// A backend that can take the CPU model's weights. A weight format or activation mode
/// the backend has no kernel for is an error naming the layer's format, never a silent
/// conversion.
pub trait WeightUpload: Backend {
    /// A linear layer (weights, format and activation mode).
    fn upload_linear(&mut self, linear: &Linear) -> Result<Self::Linear>;
    /// The vocabulary projection; `tied` is the uploaded embedding table where `linear`
    /// is that very table (tied embeddings), which a backend may read in place instead of
    /// holding a second copy. By default it is uploaded like any linear layer.
    fn upload_lm_head(
        &mut self,
        linear: &Linear,
        tied: Option<&Self::Embedding>,
    ) -> Result<Self::Linear> {
        let _ = tied;
        self.upload_linear(linear)
    }
    /// A parameter vector.
    fn upload_vector(&mut self, values: &[f32]) -> Result<Self::Vector>;
    /// The token embedding table.
    fn upload_embedding(&mut self, table: &Embedding) -> Result<Self::Embedding>;
}

impl Qwen35Model<Cpu> {
    /// The same model with its weights on `be`.
    pub fn to_backend<B: WeightUpload>(&self, be: &mut B) -> Result<Qwen35Model<B>> {
        let embed = be.upload_embedding(&self.embed)?;
        let lm_head =
            be.upload_lm_head(&self.lm_head, self.lm_head_is_embedding().then_some(&embed))?;
        Ok(Qwen35Model {
            config: self.config.clone(),
            embed,
            layers: (self.layers.iter())
                .map(|l| layer(be, l))
                .collect::<Result<_>>()?,
            norm: be.upload_vector(&self.norm)?,
            lm_head,
            mtp: self.mtp.as_ref().map(|m| mtp(be, m)).transpose()?,
        })
    }

    /// Whether `lm_head` reads the embedding table's own bytes (tied embeddings, loaded
    /// by [`Embedding::as_linear`]), not a copy or a separate tensor.
    pub(crate) fn lm_head_is_embedding(&self) -> bool {
        let (_, table) = self.embed.stored();
        matches!(self.lm_head.weight(), LinearWeight::Bf16(w)
            if std::ptr::eq(w.as_ptr(), table.as_ptr()) && w.len() == table.len())
    }
}

fn layer<B: WeightUpload>(be: &mut B, l: &DecoderLayer<Cpu>) -> Result<DecoderLayer<B>> {
    Ok(DecoderLayer {
        input_norm: be.upload_vector(&l.input_norm)?,
        post_norm: be.upload_vector(&l.post_norm)?,
        mixer: match &l.mixer {
            Mixer::Gdn(g) => Mixer::Gdn(Box::new(gdn(be, g)?)),
            Mixer::Attention(a) => Mixer::Attention(Box::new(attention(be, a)?)),
        },
        mlp: Mlp {
            gate: be.upload_linear(&l.mlp.gate)?,
            up: be.upload_linear(&l.mlp.up)?,
            down: be.upload_linear(&l.mlp.down)?,
        },
        cache_layer: l.cache_layer,
    })
}

fn attention<B: WeightUpload>(be: &mut B, a: &GatedAttention<Cpu>) -> Result<GatedAttention<B>> {
    Ok(GatedAttention {
        q_proj: be.upload_linear(&a.q_proj)?,
        k_proj: be.upload_linear(&a.k_proj)?,
        v_proj: be.upload_linear(&a.v_proj)?,
        o_proj: be.upload_linear(&a.o_proj)?,
        q_norm: be.upload_vector(&a.q_norm)?,
        k_norm: be.upload_vector(&a.k_norm)?,
        shape: a.shape,
        eps: a.eps,
        rope: a.rope.clone(),
        kv_scales: a.kv_scales,
        kv_observer: a.kv_observer.clone(),
    })
}

fn gdn<B: WeightUpload>(be: &mut B, g: &GatedDeltaNet<Cpu>) -> Result<GatedDeltaNet<B>> {
    Ok(GatedDeltaNet {
        in_proj_qkv: be.upload_linear(&g.in_proj_qkv)?,
        in_proj_z: be.upload_linear(&g.in_proj_z)?,
        in_proj_b: be.upload_linear(&g.in_proj_b)?,
        in_proj_a: be.upload_linear(&g.in_proj_a)?,
        conv_taps: be.upload_vector(&g.conv_taps)?,
        neg_a: be.upload_vector(&g.neg_a)?,
        dt_bias: be.upload_vector(&g.dt_bias)?,
        norm_weight: be.upload_vector(&g.norm_weight)?,
        out_proj: be.upload_linear(&g.out_proj)?,
        shape: g.shape,
        eps: g.eps,
    })
}

fn mtp<B: WeightUpload>(be: &mut B, m: &MtpHead<Cpu>) -> Result<MtpHead<B>> {
    Ok(MtpHead {
        fc: be.upload_linear(&m.fc)?,
        pre_fc_norm_embedding: be.upload_vector(&m.pre_fc_norm_embedding)?,
        pre_fc_norm_hidden: be.upload_vector(&m.pre_fc_norm_hidden)?,
        norm: be.upload_vector(&m.norm)?,
        layer: layer(be, &m.layer)?,
        eps: m.eps,
        hidden: m.hidden,
    })
}

#[cfg(test)]
mod tests {
    use crate::synthetic::{
        SyntheticDType, tiny_config, write_predictable_checkpoint, write_random_checkpoint,
    };
    use crate::{ActivationMode, Cpu, LogitRows, Qwen35Model, Session};
    use edge_kvcache::CacheConfig;

    /// The walk rebuilds every weight: the copy gives the original's logits, bit for bit,
    /// for a prompt, a decode step and the MTP head.
    #[test]
    fn to_backend_on_the_cpu_is_the_same_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_predictable_checkpoint(dir, &tiny_config(256), SyntheticDType::Bf16, 5).unwrap();
        let model = Qwen35Model::load(dir, ActivationMode::default()).unwrap();
        let copy = model.to_backend(&mut Cpu::new()).unwrap();
        assert!(copy.mtp().is_some(), "the MTP head is carried over");
        let run = |m: &Qwen35Model<Cpu>| {
            let mut s = Session::new(m, CacheConfig::default()).unwrap();
            let prompt = s.forward(&[3, 17, 4, 9], LogitRows::All).unwrap();
            let step = s.forward(&[11], LogitRows::Last).unwrap();
            let mtp = s
                .mtp_forward(&[12], &step.hidden, 4, LogitRows::Last)
                .unwrap();
            (prompt.logits, step.logits, mtp.logits)
        };
        let (a, b) = (run(&model), run(&copy));
        assert_eq!(a, b);
    }

    /// A tied `lm_head` is recognised as the embedding table (so a device backend can
    /// share its copy); an untied checkpoint's is not.
    #[test]
    fn a_tied_lm_head_is_the_embedding_table() {
        for tied in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let mut config = tiny_config(64);
            config["tie_word_embeddings"] = tied.into();
            write_random_checkpoint(dir, &config, SyntheticDType::Bf16, 5).unwrap();
            let model = Qwen35Model::load(dir, ActivationMode::Bf16).unwrap();
            assert_eq!(model.lm_head_is_embedding(), tied);
            let copy = model.to_backend(&mut Cpu::new()).unwrap();
            assert_eq!(
                copy.lm_head_is_embedding(),
                tied,
                "the CPU copy shares bytes"
            );
        }
    }
}
