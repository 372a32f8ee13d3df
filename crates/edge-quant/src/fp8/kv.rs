//! FP8 (E4M3) KV-cache quantization with per-tensor scales, as ModelOpt exports them
//! (`kv_cache_quant_algo: "FP8"`) and vLLM/SGLang apply them.
//!
//! - Checkpoint tensors: `<attn>.k_proj.k_scale` and `<attn>.v_proj.v_scale`, f32
//!   scalars = amax/448 (ModelOpt 0.47 does not clamp them to ≥ 1; older exports did).
//!   A legacy single `kv_scale` applies to both.
//! - With no scale tensors (e.g. the `kv_fp8_cast` recipes), both scales are 1.0, as
//!   vLLM defaults them.
//! - The cache stores `e4m3_satfinite(x / scale)` (CUDA `__NV_SATFINITE`); reading gives
//!   `x ≈ e4m3(q) · scale`.
//!
//! NaN in the data is not an error here (this mirrors a run-time kernel): it is stored as
//! the E4M3 NaN byte 0x7F, exactly as `__nv_cvt_float_to_fp8` does. ±Inf saturates to
//! ±448.

use crate::error::{QuantError, Result, check_len};
use crate::formats::e4m3;

/// Per-tensor dequantization scales of the K and V caches (`x = e4m3 · scale`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvScales {
    /// Scale of the key cache (`k_proj.k_scale`).
    pub k_scale: f32,
    /// Scale of the value cache (`v_proj.v_scale`).
    pub v_scale: f32,
}

impl Default for KvScales {
    /// Both scales 1.0: what vLLM uses when a checkpoint has no scale tensors.
    fn default() -> Self {
        KvScales::UNIT
    }
}

impl KvScales {
    /// Both scales 1.0.
    pub const UNIT: KvScales = KvScales {
        k_scale: 1.0,
        v_scale: 1.0,
    };

    /// Checked construction: both scales must be finite and > 0.
    pub fn new(k_scale: f32, v_scale: f32) -> Result<Self> {
        check_scale("KV cache k_scale", k_scale)?;
        check_scale("KV cache v_scale", v_scale)?;
        Ok(KvScales { k_scale, v_scale })
    }

    /// Scales from calibrated absolute maxima, `amax / 448` each (ModelOpt 0.47).
    ///
    /// A zero amax (a cache that calibration never saw, or all zeros) gives 1.0, the
    /// vLLM default, instead of the zero scale ModelOpt would write.
    ///
    /// Errors: [`QuantError::InvalidScale`] for a negative or non-finite amax.
    pub fn from_amax(k_amax: f32, v_amax: f32) -> Result<Self> {
        Ok(KvScales {
            k_scale: scale_from_amax("KV cache k amax", k_amax)?,
            v_scale: scale_from_amax("KV cache v amax", v_amax)?,
        })
    }

    /// Scales as found in a checkpoint: a missing tensor (`None`) defaults to 1.0, as
    /// vLLM does; a present one must be finite and > 0.
    pub fn from_checkpoint(k_scale: Option<f32>, v_scale: Option<f32>) -> Result<Self> {
        KvScales::new(k_scale.unwrap_or(1.0), v_scale.unwrap_or(1.0))
    }

    /// A legacy single `kv_scale`, used for both caches.
    pub fn from_legacy(kv_scale: f32) -> Result<Self> {
        KvScales::new(kv_scale, kv_scale)
    }
}

/// `amax / 448`, with a zero amax (or an underflowing quotient) giving 1.0.
fn scale_from_amax(what: &'static str, amax: f32) -> Result<f32> {
    if !(amax.is_finite() && amax >= 0.0) {
        return Err(QuantError::InvalidScale { what, value: amax });
    }
    let s = amax / e4m3::MAX;
    Ok(if s > 0.0 { s } else { 1.0 })
}

/// Rejects a scale that is not finite and positive.
fn check_scale(what: &'static str, scale: f32) -> Result<()> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(QuantError::InvalidScale { what, value: scale })
    }
}

/// Quantizes `x` into `out` as `e4m3_satfinite(x / scale)`.
///
/// Errors: [`QuantError::InvalidScale`] unless `scale` is finite and > 0,
/// [`QuantError::LengthMismatch`] if `out.len() != x.len()`.
pub fn quantize_kv(x: &[f32], scale: f32, out: &mut [u8]) -> Result<()> {
    check_scale("KV cache scale", scale)?;
    check_len("KV cache codes (output)", x.len(), out.len())?;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = e4m3::encode(v / scale);
    }
    Ok(())
}

/// Dequantizes cache bytes into `out` as `e4m3(q) · scale`.
///
/// Errors: [`QuantError::InvalidScale`] unless `scale` is finite and > 0,
/// [`QuantError::LengthMismatch`] if `out.len() != codes.len()`.
pub fn dequantize_kv(codes: &[u8], scale: f32, out: &mut [f32]) -> Result<()> {
    check_scale("KV cache scale", scale)?;
    check_len("KV cache values (output)", codes.len(), out.len())?;
    for (o, &q) in out.iter_mut().zip(codes) {
        *o = e4m3::decode(q) * scale;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_constructors() {
        assert_eq!(KvScales::default(), KvScales::UNIT);
        let s = KvScales::from_checkpoint(Some(0.5), None).unwrap();
        assert_eq!((s.k_scale, s.v_scale), (0.5, 1.0));
        assert!(matches!(
            KvScales::from_checkpoint(Some(0.0), None),
            Err(crate::QuantError::InvalidScale { .. })
        ));
        assert!(matches!(
            KvScales::new(1.0, f32::NAN),
            Err(crate::QuantError::InvalidScale { .. })
        ));
        assert_eq!(KvScales::from_legacy(2.0).unwrap().v_scale, 2.0);
        let a = KvScales::from_amax(448.0, 0.0).unwrap();
        assert_eq!((a.k_scale, a.v_scale), (1.0, 1.0));
        assert_eq!(
            KvScales::from_amax(0.576, 1.0).unwrap().k_scale,
            0.576 / 448.0
        );
        assert!(matches!(
            KvScales::from_amax(-1.0, 1.0),
            Err(crate::QuantError::InvalidScale { .. })
        ));
    }

    #[test]
    fn quantize_saturates_and_round_trips() {
        let x = [0.0, 1.0, -2.5, 1e9, f32::NEG_INFINITY, f32::NAN];
        let mut q = [0u8; 6];
        quantize_kv(&x, 0.5, &mut q).unwrap();
        assert_eq!(q, [0x00, 0x40, 0xca, 0x7e, 0xfe, 0x7f]);
        let mut back = [0f32; 6];
        dequantize_kv(&q, 0.5, &mut back).unwrap();
        assert_eq!(&back[..5], &[0.0, 1.0, -2.5, 224.0, -224.0]);
        assert!(back[5].is_nan());
        assert!(matches!(
            quantize_kv(&x, 0.0, &mut q),
            Err(crate::QuantError::InvalidScale { .. })
        ));
        assert!(matches!(
            quantize_kv(&x, 1.0, &mut q[..5]),
            Err(crate::QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            dequantize_kv(&q, f32::INFINITY, &mut back),
            Err(crate::QuantError::InvalidScale { .. })
        ));
    }
}
