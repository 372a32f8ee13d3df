//! Building layer weights from checkpoint tensors, deciding each linear's format from
//! the tensors present (ModelOpt NVFP4: `weight` U8 + `weight_scale` + `weight_scale_2`;
//! FP8: `weight` F8_E4M3 + `weight_scale`; otherwise F32/BF16/F16).

use crate::checkpoint::{Checkpoint, TensorView};
use crate::{ModelError, Result};
use edge_core::DType;
use edge_quant::fp8::kv::KvScales;
use edge_quant::linear::{ActivationQuant, Linear, LinearWeight};
use edge_quant::{Fp8Tensor, Nvfp4Tensor};

/// How activations entering the linear layers are treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ActivationMode {
    /// f32 activations against the exact (dequantized) weights. The default, and the
    /// mode the transformers parity fixtures are checked in.
    #[default]
    None,
    /// Every linear input rounded to bf16 (W16A16 / W8A16 / W4A16 as a GPU runs them).
    /// Prompts then take the packed bf16 GEMM (AVX-512 BF16 or AVX2), the fast prefill path.
    Bf16,
    /// Quantize activations of NVFP4 linears to NVFP4 with each layer's `input_scale`,
    /// emulating a W4A4 Blackwell kernel; other linears keep f32 activations.
    Nvfp4,
    /// W4A8, the fast CPU mode for NVFP4 checkpoints: activations of NVFP4 linears are
    /// quantized to int8 at run time (one scale per 256 elements, no calibration) and
    /// multiplied with integer instructions; other linears (e.g. a bf16 `lm_head`)
    /// take bf16 activations as in [`ActivationMode::Bf16`].
    Int8,
    /// The fastest CPU mode whose accuracy is documented for each linear's format
    /// (docs/NUMERICS.md): W4A8 for NVFP4 linears ([`ActivationMode::Int8`]), bf16
    /// activations for the others ([`ActivationMode::Bf16`]). So an NVFP4 checkpoint
    /// runs W4A8 and a bf16 one bf16 activations. The CLI's default.
    Fastest,
}

impl ActivationMode {
    /// This mode as a model for `device` should load: on a GPU
    /// [`ActivationMode::Fastest`] means bf16 activations (the tensor-core kernels; the
    /// CPU's W4A8 has no GPU kernel); other modes are kept.
    pub fn on_device(self, device: edge_core::Device) -> Self {
        match (device, self) {
            (d, ActivationMode::Fastest) if d.is_cuda() => ActivationMode::Bf16,
            (_, mode) => mode,
        }
    }
}

impl std::str::FromStr for ActivationMode {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(ActivationMode::None),
            "bf16" => Ok(ActivationMode::Bf16),
            "nvfp4" => Ok(ActivationMode::Nvfp4),
            "int8" => Ok(ActivationMode::Int8),
            "auto" => Ok(ActivationMode::Fastest),
            _ => Err(ModelError::UnknownValue {
                what: "activation quantization",
                value: s.to_string(),
                expected: "auto, none, bf16, nvfp4 or int8",
            }),
        }
    }
}

/// Options for loading a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Activation treatment of NVFP4 linears.
    pub activations: ActivationMode,
}

/// Reads layer weights out of a checkpoint.
pub(crate) struct WeightReader<'a> {
    pub ckpt: &'a Checkpoint,
    pub activations: ActivationMode,
}

impl WeightReader<'_> {
    /// A `[out, inp]` linear at `prefix` (without `.weight`).
    pub fn linear(&self, prefix: &str, out: usize, inp: usize) -> Result<Linear> {
        let name = format!("{prefix}.weight");
        let w = self.ckpt.require(&name)?;
        let scale_name = format!("{prefix}.weight_scale");
        if w.dtype == DType::U8 && self.ckpt.contains(&scale_name) {
            return self.nvfp4(prefix, w, out, inp);
        }
        w.expect_shape(&[out, inp])?;
        let weight = match w.dtype {
            DType::F8E4M3 => {
                let scale = self.ckpt.require(&scale_name)?.scalar_f32()?;
                LinearWeight::Fp8(Fp8Tensor::from_parts(out, inp, w.data.clone(), scale)?)
            }
            DType::BF16 => LinearWeight::Bf16(w.data.clone()),
            DType::F32 | DType::F16 => LinearWeight::F32(w.to_f32()?),
            other => {
                return Err(ModelError::TensorDType {
                    name,
                    expected: "f32, bf16, f16, f8e4m3, or u8 with NVFP4 scales".into(),
                    got: other.to_string(),
                });
            }
        };
        self.with_mode(Linear::new(out, inp, weight)?)
    }

    /// Applies the mode to a non-NVFP4 linear: bf16 activations in the bf16 and int8
    /// modes (W4A4 and W4A8 apply to NVFP4 linears only).
    pub fn with_mode(&self, linear: Linear) -> Result<Linear> {
        match self.activations {
            ActivationMode::Bf16 | ActivationMode::Int8 | ActivationMode::Fastest => {
                Ok(linear.with_activation_quant(ActivationQuant::Bf16)?)
            }
            ActivationMode::None | ActivationMode::Nvfp4 => Ok(linear),
        }
    }

    fn nvfp4(&self, prefix: &str, w: &TensorView, out: usize, inp: usize) -> Result<Linear> {
        if !inp.is_multiple_of(16) {
            return Err(ModelError::Nvfp4Width {
                tensor: prefix.to_string(),
                in_features: inp,
            });
        }
        w.expect_shape(&[out, inp / 2])?;
        let scales = self.ckpt.require(&format!("{prefix}.weight_scale"))?;
        if scales.dtype != DType::F8E4M3 {
            return Err(ModelError::TensorDType {
                name: scales.name.clone(),
                expected: "f8e4m3".into(),
                got: scales.dtype.to_string(),
            });
        }
        scales.expect_shape(&[out, inp / 16])?;
        let global = self
            .ckpt
            .require(&format!("{prefix}.weight_scale_2"))?
            .scalar_f32()?;
        let tensor =
            Nvfp4Tensor::from_parts(out, inp, w.data.clone(), scales.data.clone(), global)?;
        let linear = Linear::new(out, inp, LinearWeight::Nvfp4(tensor))?;
        match self.activations {
            ActivationMode::None => Ok(linear),
            ActivationMode::Bf16 => Ok(linear.with_activation_quant(ActivationQuant::Bf16)?),
            ActivationMode::Int8 | ActivationMode::Fastest => {
                Ok(linear.with_activation_quant(ActivationQuant::Int8)?)
            }
            ActivationMode::Nvfp4 => {
                let input_scale = self
                    .ckpt
                    .require(&format!("{prefix}.input_scale"))?
                    .scalar_f32()?;
                Ok(linear.with_activation_quant(ActivationQuant::Nvfp4 { input_scale })?)
            }
        }
    }

    /// FP8 KV scales of the attention module at `prefix` (`…self_attn`):
    /// `k_proj.k_scale`, `v_proj.v_scale`, or a legacy `kv_scale`; 1.0 where absent
    /// (as vLLM does).
    pub fn kv_scales(&self, prefix: &str) -> Result<KvScales> {
        let scalar = |name: String| self.ckpt.get(&name).map(|t| t.scalar_f32()).transpose();
        if let Some(legacy) = scalar(format!("{prefix}.kv_scale"))? {
            return Ok(KvScales::from_legacy(legacy)?);
        }
        let k = scalar(format!("{prefix}.k_proj.k_scale"))?;
        let v = scalar(format!("{prefix}.v_proj.v_scale"))?;
        Ok(KvScales::from_checkpoint(k, v)?)
    }

    /// A float vector of exactly `len` elements.
    pub fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let t = self.ckpt.require(name)?;
        t.expect_shape(&[len])?;
        t.to_f32()
    }

    /// A float tensor of the given shape, flattened.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let t = self.ckpt.require(name)?;
        t.expect_shape(shape)?;
        t.to_f32()
    }
}

/// The token embedding table, kept in its stored dtype (f32/bf16/f16), rows decoded on
/// lookup.
#[derive(Clone, Debug)]
pub struct Embedding {
    view: TensorView,
    vocab: usize,
    hidden: usize,
}

impl Embedding {
    pub(crate) fn new(view: &TensorView, vocab: usize, hidden: usize) -> Result<Self> {
        view.expect_shape(&[vocab, hidden])?;
        if !matches!(view.dtype, DType::F32 | DType::BF16 | DType::F16) {
            return Err(ModelError::TensorDType {
                name: view.name.clone(),
                expected: "f32, bf16 or f16".into(),
                got: view.dtype.to_string(),
            });
        }
        Ok(Embedding {
            view: view.clone(),
            vocab,
            hidden,
        })
    }

    /// Writes the embedding of `token` into `out` (`hidden` values).
    pub fn lookup(&self, token: u32, out: &mut [f32]) -> Result<()> {
        let t = token as usize;
        if t >= self.vocab {
            return Err(ModelError::TokenOutOfVocab {
                token,
                vocab: self.vocab,
            });
        }
        let width = self.view.dtype.bits() / 8;
        let bytes = &self.view.data[t * self.hidden * width..][..self.hidden * width];
        let row = edge_core::decode_to_f32(self.view.dtype, bytes).unwrap_or_default();
        out.copy_from_slice(&row);
        Ok(())
    }

    /// Rows (tokens) of the table.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Width of a row.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The stored element type and little-endian bytes (`[vocab, hidden]`), for a device
    /// upload in the stored form.
    pub fn stored(&self) -> (DType, &[u8]) {
        (self.view.dtype, &self.view.data)
    }

    /// The table as a linear weight (for a tied `lm_head`), sharing the stored bytes.
    pub fn as_linear(&self) -> Result<Linear> {
        let weight = match self.view.dtype {
            DType::BF16 => LinearWeight::Bf16(self.view.data.clone()),
            _ => LinearWeight::F32(self.view.to_f32()?),
        };
        Ok(Linear::new(self.vocab, self.hidden, weight)?)
    }
}

#[cfg(test)]
mod tests {
    use super::ActivationMode;
    use edge_core::Device;

    /// On a GPU `auto` means bf16 activations; every other mode, and every mode on the
    /// CPU, is kept.
    #[test]
    fn the_fastest_mode_depends_on_the_device() {
        let all = [
            ActivationMode::None,
            ActivationMode::Bf16,
            ActivationMode::Nvfp4,
            ActivationMode::Int8,
            ActivationMode::Fastest,
        ];
        for mode in all {
            assert_eq!(mode.on_device(Device::Cpu), mode);
            let gpu = match mode {
                ActivationMode::Fastest => ActivationMode::Bf16,
                m => m,
            };
            assert_eq!(mode.on_device(Device::Cuda(1)), gpu);
        }
    }
}
