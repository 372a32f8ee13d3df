//! On-device token choice (`kernels/model/sampling.cu`): [`argmax`] for greedy decoding
//! and [`top_k`] candidates for sampling, so a step downloads one index or `k` values
//! per row instead of the vocabulary.

use super::ops::{check_len, dim_u32, per_row, rows_of};
use crate::kernel_sources::SAMPLING;
use crate::{ModelError, Result};
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// The most candidates [`top_k`] returns per row (`EQ_TOPK_MAX`).
pub const MAX_TOP_K: usize = 256;

/// The greedy choice of each `vocab`-wide row of `logits` into `out` (one index per
/// row), as [`crate::argmax`]: the first maximum, NaN never chosen, 0 for a row of NaN.
pub fn argmax(
    dev: &CudaDevice,
    logits: &DeviceSlice<f32>,
    vocab: usize,
    out: &mut DeviceSlice<u32>,
) -> Result<()> {
    const OP: &str = "argmax";
    let rows = rows_of(OP, logits.len(), vocab)?;
    check_len(OP, "out", rows as usize, out.len())?;
    if rows == 0 {
        return Ok(());
    }
    let vocab_u32 = dim_u32(OP, "vocab", vocab)?;
    let func = dev.function(&SAMPLING, "eq_argmax_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(logits).arg(out).arg(&vocab_u32);
    // SAFETY: eq_argmax_f32(const float* logits, u32* out, u32 vocab), one block of
    // ROW_THREADS (the kernel's EQ_ARGMAX_THREADS) per row; logits hold rows·vocab
    // values and out rows (checked).
    unsafe { launch.launch(per_row(rows)) }?;
    Ok(())
}

/// Each row's top-`k` candidates, on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct TopK {
    /// Candidates per row (the `k` asked for).
    pub k: usize,
    /// `[rows, k]` logits, descending (ties by the lower id); past a row's count, −∞.
    pub values: Vec<f32>,
    /// `[rows, k]` token ids; past a row's count, `u32::MAX`.
    pub ids: Vec<u32>,
    /// Per row: `min(k, non-NaN logits)`; below `k`, the candidates are the whole row
    /// (`edge_spec::sampling::Candidates::complete`).
    pub counts: Vec<u32>,
    /// Per row: the largest logit (0 for a row of NaN).
    pub max: Vec<f32>,
    /// Per row: `Σ exp((l − max) / temperature)` over its non-NaN logits (`l == max`
    /// counts 1), the full softmax's denominator.
    pub sum: Vec<f32>,
}

/// The `k` largest logits of each `vocab`-wide row of `logits` (NaN never chosen) with
/// their ids, and each row's softmax statistics at `temperature` (> 0), downloaded.
/// Candidate `j`'s probability under the full softmax is
/// `exp((values[j] − max) / temperature) / sum`, which tells whether a top-p nucleus
/// closes inside the candidates.
pub fn top_k(
    dev: &CudaDevice,
    logits: &DeviceSlice<f32>,
    vocab: usize,
    k: usize,
    temperature: f32,
) -> Result<TopK> {
    const OP: &str = "top_k";
    let rows = rows_of(OP, logits.len(), vocab)?;
    if !((1..=MAX_TOP_K).contains(&k) && temperature.is_finite() && temperature > 0.0) {
        return Err(ModelError::Unsupported {
            backend: "cuda",
            what: format!(
                "{OP} with k = {k} (1..={MAX_TOP_K}) and temperature {temperature} (finite, \
                 > 0)"
            ),
        });
    }
    let n = rows as usize;
    let mut values = dev.zeros::<f32>((n * k).max(1))?;
    let mut ids = dev.zeros::<u32>((n * k).max(1))?;
    let mut counts = dev.zeros::<u32>(n.max(1))?;
    let mut max = dev.zeros::<f32>(n.max(1))?;
    let mut sum = dev.zeros::<f32>(n.max(1))?;
    if rows > 0 {
        let (vocab_u32, k_u32) = (dim_u32(OP, "vocab", vocab)?, k as u32);
        let inv_temp = 1.0 / temperature;
        let func = dev.function(&SAMPLING, "eq_topk_f32")?;
        let mut launch = dev.launch_builder(&func);
        launch
            .arg(logits)
            .arg(&vocab_u32)
            .arg(&k_u32)
            .arg(&inv_temp)
            .arg(&mut values)
            .arg(&mut ids)
            .arg(&mut counts)
            .arg(&mut max)
            .arg(&mut sum);
        // SAFETY: eq_topk_f32(const float* logits, u32 vocab, u32 k, float inv_temp, float*
        // vals, u32* ids, u32* count, float* max, float* sum): one block of 256 threads
        // (EQ_TOPK_THREADS, as per_row launches) per row; logits hold rows·vocab values,
        // vals and ids rows·k, the rest rows (allocated above); k ≤ EQ_TOPK_MAX.
        unsafe { launch.launch(per_row(rows)) }?;
    }
    let take = |v: Vec<f32>, len: usize| v.into_iter().take(len).collect::<Vec<_>>();
    Ok(TopK {
        k,
        values: take(dev.download(&values)?, n * k),
        ids: dev.download(&ids)?.into_iter().take(n * k).collect(),
        counts: dev.download(&counts)?.into_iter().take(n).collect(),
        max: take(dev.download(&max)?, n),
        sum: take(dev.download(&sum)?, n),
    })
}
