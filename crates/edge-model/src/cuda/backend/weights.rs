//! The model's weights in the CUDA backend's form ([`WeightUpload`] for
//! [`CudaBackend`]): each linear layer bound to the one kernel family that computes its
//! format and activation mode, parameter vectors as f32, the embedding table as bf16.

use super::CudaBackend;
use crate::backend::LinearShape;
use crate::upload::WeightUpload;
use crate::weights::Embedding;
use crate::{ModelError, Result};
use edge_core::DType;
use edge_core::cuda::DeviceSlice;
use edge_quant::cuda::{
    CudaBf16Matrix, CudaNvfp4Tensor, bf16_linear_tc_into, nvfp4_linear_into, nvfp4_linear_tc_into,
};
use edge_quant::linear::{ActivationQuant, Linear, LinearWeight};
use std::sync::Arc;

/// A linear layer on the device, with the product that matches its CPU twin's
/// numerics.
pub enum CudaLinear {
    /// NVFP4 weights × f32 activations (the CPU's [`ActivationQuant::None`]): the
    /// dequantizing GEMV/small-batch kernel.
    Nvfp4F32(CudaNvfp4Tensor),
    /// NVFP4 weights × bf16-rounded activations ([`ActivationQuant::Bf16`]): the tensor-core
    /// kernel.
    Nvfp4Bf16(CudaNvfp4Tensor),
    /// bf16 weights × bf16-rounded activations ([`ActivationQuant::Bf16`]): the tensor-core
    /// kernel.
    Bf16(CudaBf16Matrix),
}

impl std::fmt::Debug for CudaLinear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            CudaLinear::Nvfp4F32(_) => "nvfp4 × f32",
            CudaLinear::Nvfp4Bf16(_) => "nvfp4 × bf16",
            CudaLinear::Bf16(_) => "bf16 × bf16",
        };
        write!(
            f,
            "CudaLinear({kind}, {}×{})",
            self.out_features(),
            self.in_features()
        )
    }
}

impl LinearShape for CudaLinear {
    fn out_features(&self) -> usize {
        match self {
            CudaLinear::Nvfp4F32(w) | CudaLinear::Nvfp4Bf16(w) => w.rows(),
            CudaLinear::Bf16(w) => w.rows(),
        }
    }

    fn in_features(&self) -> usize {
        match self {
            CudaLinear::Nvfp4F32(w) | CudaLinear::Nvfp4Bf16(w) => w.cols(),
            CudaLinear::Bf16(w) => w.cols(),
        }
    }

    fn weight_bytes(&self) -> usize {
        match self {
            CudaLinear::Nvfp4F32(w) | CudaLinear::Nvfp4Bf16(w) => w.storage_bytes(),
            CudaLinear::Bf16(w) => w.storage_bytes(),
        }
    }
}

impl CudaLinear {
    /// `y = x · Wᵀ` for `rows` rows (`x` holds exactly `rows · in_features` values, `y`
    /// `rows · out_features`).
    pub(super) fn forward(
        &self,
        be: &CudaBackend,
        x: &DeviceSlice<f32>,
        rows: usize,
        y: &mut DeviceSlice<f32>,
    ) -> Result<()> {
        let dev = be.device();
        match self {
            CudaLinear::Nvfp4F32(w) => nvfp4_linear_into(dev, w, x, rows, y)?,
            CudaLinear::Nvfp4Bf16(w) => nvfp4_linear_tc_into(dev, w, x, rows, y)?,
            CudaLinear::Bf16(w) => bf16_linear_tc_into(dev, w, x, rows, y)?,
        }
        Ok(())
    }
}

/// A parameter vector on the device.
pub struct CudaVector(pub(super) DeviceSlice<f32>);

impl std::fmt::Debug for CudaVector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaVector({})", self.0.len())
    }
}

/// The token embedding table on the device, as bf16 bits (`[vocab, hidden]`); a tied
/// `lm_head` shares it.
pub struct CudaEmbedding {
    pub(in crate::cuda) table: Arc<DeviceSlice<u16>>,
    pub(super) hidden: usize,
}

impl std::fmt::Debug for CudaEmbedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vocab = self.table.len() / self.hidden.max(1);
        write!(f, "CudaEmbedding({vocab}×{})", self.hidden)
    }
}

/// Little-endian bf16 bytes (possibly unaligned, from a memory map) as bits.
fn bf16_bits(bytes: &[u8]) -> Vec<u16> {
    (bytes.chunks_exact(2))
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

fn unsupported(what: String) -> ModelError {
    ModelError::Unsupported {
        backend: "cuda",
        what,
    }
}

impl WeightUpload for CudaBackend {
    /// NVFP4 weights with f32 or bf16 activations, and bf16 weights with bf16
    /// activations (load the model with [`crate::ActivationMode::Bf16`]). The CPU-only
    /// activation modes (W4A8 int8, W4A4 emulation), FP8 and f32 weights are refused.
    fn upload_linear(&mut self, linear: &Linear) -> Result<CudaLinear> {
        let (rows, cols) = (linear.out_features(), linear.in_features());
        let act = linear.activation_quant();
        let dev = self.device();
        match (linear.weight(), act) {
            (LinearWeight::Nvfp4(t), ActivationQuant::None) => {
                Ok(CudaLinear::Nvfp4F32(CudaNvfp4Tensor::upload(dev, t)?))
            }
            (LinearWeight::Nvfp4(t), ActivationQuant::Bf16) => {
                Ok(CudaLinear::Nvfp4Bf16(CudaNvfp4Tensor::upload(dev, t)?))
            }
            (LinearWeight::Bf16(b), ActivationQuant::Bf16) => Ok(CudaLinear::Bf16(
                CudaBf16Matrix::upload(dev, &bf16_bits(b), rows, cols)?,
            )),
            (w, act) => Err(unsupported(format!(
                "a {rows}×{cols} linear with {} weights and {act:?} activations (NVFP4 weights \
                 take f32 or bf16 activations, bf16 weights bf16 activations: load with \
                 ActivationMode::Bf16)",
                w.format_name()
            ))),
        }
    }

    /// A tied bf16 `lm_head` with bf16 activations reads the embedding table's device
    /// copy (for Qwen3.5's small tied checkpoints, a 248,320-row table is 0.5–1 GB);
    /// anything else is uploaded as [`upload_linear`](WeightUpload::upload_linear) does.
    fn upload_lm_head(
        &mut self,
        linear: &Linear,
        tied: Option<&CudaEmbedding>,
    ) -> Result<CudaLinear> {
        match (tied, linear.weight(), linear.activation_quant()) {
            (Some(embed), LinearWeight::Bf16(_), ActivationQuant::Bf16) => {
                Ok(CudaLinear::Bf16(CudaBf16Matrix::from_shared(
                    Arc::clone(&embed.table),
                    linear.out_features(),
                    linear.in_features(),
                )?))
            }
            _ => self.upload_linear(linear),
        }
    }

    fn upload_vector(&mut self, values: &[f32]) -> Result<CudaVector> {
        if values.is_empty() {
            return Err(unsupported("an empty parameter vector".into()));
        }
        Ok(CudaVector(self.device().upload(values)?))
    }

    /// A bf16 table as stored; an f32 or f16 table would have to be rounded, which is
    /// refused rather than done silently.
    fn upload_embedding(&mut self, table: &Embedding) -> Result<CudaEmbedding> {
        match table.stored() {
            (DType::BF16, bytes) if table.hidden() > 0 && table.vocab() > 0 => Ok(CudaEmbedding {
                table: Arc::new(self.device().upload(&bf16_bits(bytes))?),
                hidden: table.hidden(),
            }),
            (dtype, _) => Err(unsupported(format!(
                "a {dtype} embedding table of {}×{} (bf16 only)",
                table.vocab(),
                table.hidden()
            ))),
        }
    }
}
