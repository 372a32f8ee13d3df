//! Writing quantized checkpoints in NVIDIA ModelOpt's layout, so edge-llm and
//! vLLM-style loaders read them: per quantized linear `weight` (+ `weight_scale`,
//! `weight_scale_2` for NVFP4) and, when calibrated, `input_scale`; FP8 KV scales
//! (`k_proj.k_scale`, `v_proj.v_scale`); `hf_quant_config.json` and a
//! `quantization_config` block in `config.json`. Weight bytes are identical to what
//! ModelOpt 0.47 produces for the same weights.

mod calibrate;
mod plan;
#[cfg(feature = "bench")]
mod random;
mod writer;

pub use calibrate::calibrate;
pub use plan::{FusedGroup, QuantFormat, QuantizePlan};
#[cfg(feature = "bench")]
pub use random::write_random_nvfp4_checkpoint;
pub use writer::{CalibrationScales, ExportOptions, ExportReport, quantize_checkpoint};
