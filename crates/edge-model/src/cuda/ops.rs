//! Launch wrappers of `kernels/model/elementwise.cu`.
//!
//! Every wrapper checks its buffers' lengths against the shape it is given and returns
//! a typed error ([`ModelError::OperandLength`], [`ModelError::RowWidth`],
//! [`ModelError::IndexOutOfRange`], [`ModelError::TokenOutOfVocab`]) before launching
//! anything; CUDA failures arrive as [`ModelError::Core`].

use crate::backend::Gate;
use crate::kernel_sources::ELEMENTWISE;
use crate::{ModelError, Result};
use edge_core::cuda::LaunchConfig;
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// Threads per block of the element-wise kernels (`EQ_EW_THREADS`).
const EW_THREADS: u32 = 256;
/// Threads per block of the per-row kernels (`EQ_ROW_THREADS`, `EQ_ARGMAX_THREADS`,
/// `EQ_TOPK_THREADS`).
const ROW_THREADS: u32 = 256;
/// Grid cap of the element-wise kernels (they loop grid-stride beyond it).
const EW_MAX_BLOCKS: usize = 4096;

/// Fails unless `got == want` for the buffer `what` of `op`.
pub(super) fn check_len(
    op: &'static str,
    what: &'static str,
    want: usize,
    got: usize,
) -> Result<()> {
    if want == got {
        Ok(())
    } else {
        Err(ModelError::OperandLength {
            op,
            what,
            got,
            expected: want,
        })
    }
}

pub(super) use crate::error::dim_u32;

/// The launch shape of an element-wise kernel over `n` items.
fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(EW_THREADS as usize).clamp(1, EW_MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (EW_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One block per row.
pub(super) fn per_row(rows: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows, 1, 1),
        block_dim: (ROW_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `x += y`.
pub fn add(dev: &CudaDevice, x: &mut DeviceSlice<f32>, y: &DeviceSlice<f32>) -> Result<()> {
    check_len("add", "y", x.len(), y.len())?;
    if x.is_empty() {
        return Ok(());
    }
    let n = x.len() as u64;
    let func = dev.function(&ELEMENTWISE, "eq_add_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(x).arg(y).arg(&n);
    // SAFETY: eq_add_f32(float*, const float*, u64 n); both buffers hold n values
    // (checked) and the kernel touches indices < n only.
    unsafe { launch.launch(elementwise(n as usize)) }?;
    Ok(())
}

/// `x ← f(g) · x` element-wise, `f` the [`Gate`]'s function.
pub fn gate(
    dev: &CudaDevice,
    kind: Gate,
    g: &DeviceSlice<f32>,
    x: &mut DeviceSlice<f32>,
) -> Result<()> {
    check_len("gate", "g", x.len(), g.len())?;
    if x.is_empty() {
        return Ok(());
    }
    let name = match kind {
        Gate::Silu => "eq_gate_silu_f32",
        Gate::Sigmoid => "eq_gate_sigmoid_f32",
    };
    let n = x.len() as u64;
    let func = dev.function(&ELEMENTWISE, name)?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(g).arg(x).arg(&n);
    // SAFETY: eq_gate_*_f32(const float* g, float* x, u64 n); both hold n values.
    unsafe { launch.launch(elementwise(n as usize)) }?;
    Ok(())
}

/// Row `i` of `out` is row `i` of `a` followed by row `i` of `b` (both `width` wide).
pub fn concat_rows(
    dev: &CudaDevice,
    a: &DeviceSlice<f32>,
    b: &DeviceSlice<f32>,
    width: usize,
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "concat_rows";
    if width == 0 || !a.len().is_multiple_of(width) {
        return Err(ModelError::RowWidth {
            op: OP,
            len: a.len(),
            width,
        });
    }
    let rows = a.len() / width;
    check_len(OP, "b", a.len(), b.len())?;
    check_len(OP, "out", 2 * a.len(), out.len())?;
    let width_u32 = dim_u32(OP, "width", width)?;
    let rows_u64 = rows as u64;
    let func = dev.function(&ELEMENTWISE, "eq_concat_rows_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(a).arg(b).arg(out).arg(&width_u32).arg(&rows_u64);
    // SAFETY: eq_concat_rows_f32(const float* a, const float* b, float* out, u32 width,
    // u64 rows); a and b hold rows·width and out 2·rows·width values (checked).
    unsafe { launch.launch(elementwise(2 * a.len())) }?;
    Ok(())
}

/// `out[i] = x[rows[i]]` for `width`-wide rows; every index must name a row of `x`
/// (`rows_host` is the same list on the host, checked before the launch).
pub fn gather_rows(
    dev: &CudaDevice,
    x: &DeviceSlice<f32>,
    width: usize,
    rows: &DeviceSlice<u32>,
    rows_host: &[u32],
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "gather_rows";
    check_len(OP, "rows", rows_host.len(), rows.len())?;
    check_len(OP, "out", rows_host.len() * width, out.len())?;
    let have = x.len().checked_div(width).unwrap_or(0);
    if let Some(&bad) = rows_host.iter().find(|&&r| r as usize >= have) {
        return Err(ModelError::IndexOutOfRange {
            op: OP,
            what: "row",
            index: bad as usize,
            len: have,
        });
    }
    if out.is_empty() {
        return Ok(());
    }
    let width_u32 = dim_u32(OP, "width", width)?;
    let n = rows_host.len() as u64;
    let cfg = elementwise(out.len());
    let func = dev.function(&ELEMENTWISE, "eq_gather_rows_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(x).arg(rows).arg(out).arg(&width_u32).arg(&n);
    // SAFETY: eq_gather_rows_f32(const float* x, const u32* idx, float* out, u32 width,
    // u64 n); idx holds n indices < rows of x (checked on the host copy), out n·width.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// Embeddings of `ids` from a bf16 table (raw bits, `[vocab, width]`) into `out`
/// (`[ids, width]`, f32); `ids_host` is the same list on the host, checked against the
/// vocabulary before the launch.
pub fn embed_bf16(
    dev: &CudaDevice,
    table: &DeviceSlice<u16>,
    width: usize,
    ids: &DeviceSlice<u32>,
    ids_host: &[u32],
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "embed";
    check_len(OP, "ids", ids_host.len(), ids.len())?;
    check_len(OP, "out", ids_host.len() * width, out.len())?;
    let vocab = table.len().checked_div(width).unwrap_or(0);
    if let Some(&bad) = ids_host.iter().find(|&&t| t as usize >= vocab) {
        return Err(ModelError::TokenOutOfVocab { token: bad, vocab });
    }
    if out.is_empty() {
        return Ok(());
    }
    let width_u32 = dim_u32(OP, "width", width)?;
    let n = ids_host.len() as u64;
    let cfg = elementwise(out.len());
    let func = dev.function(&ELEMENTWISE, "eq_embed_bf16")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(table).arg(ids).arg(out).arg(&width_u32).arg(&n);
    // SAFETY: eq_embed_bf16(const u16* table, const u32* ids, float* out, u32 width,
    // u64 tokens); ids < vocab (checked on the host copy), out holds tokens·width.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// Rows of `x` as a multiple of `width`, as u32 (a grid dimension).
pub(super) fn rows_of(op: &'static str, len: usize, width: usize) -> Result<u32> {
    if width == 0 || !len.is_multiple_of(width) {
        return Err(ModelError::RowWidth { op, len, width });
    }
    dim_u32(op, "rows", len / width)
}

/// Zero-centred RMSNorm of each `weight`-wide row of `x` into `out`:
/// `x · rsqrt(mean(x²) + eps) · (1 + w)`.
pub fn rms_norm(
    dev: &CudaDevice,
    x: &DeviceSlice<f32>,
    weight: &DeviceSlice<f32>,
    eps: f32,
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "rms_norm";
    let rows = rows_of(OP, x.len(), weight.len())?;
    check_len(OP, "out", x.len(), out.len())?;
    if rows == 0 {
        return Ok(());
    }
    let width = dim_u32(OP, "width", weight.len())?;
    let func = dev.function(&ELEMENTWISE, "eq_rms_norm_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(x).arg(weight).arg(out).arg(&width).arg(&eps);
    // SAFETY: eq_rms_norm_f32(const float* x, const float* w, float* out, u32 width,
    // float eps), one block of ROW_THREADS per row; x and out hold rows·width values and
    // w width (checked).
    unsafe { launch.launch(per_row(rows)) }?;
    Ok(())
}

/// The Gated DeltaNet output norm over each `weight`-wide head row of `o`, in place:
/// `o · rsqrt(mean(o²) + eps) · w · silu(z)` (the plain weight, no +1). Only the
/// tests run it: the backend fuses this norm into the recurrence kernel.
#[cfg(test)]
pub fn gated_rms_norm(
    dev: &CudaDevice,
    o: &mut DeviceSlice<f32>,
    z: &DeviceSlice<f32>,
    weight: &DeviceSlice<f32>,
    eps: f32,
) -> Result<()> {
    const OP: &str = "gated_rms_norm";
    let rows = rows_of(OP, o.len(), weight.len())?;
    check_len(OP, "z", o.len(), z.len())?;
    if rows == 0 {
        return Ok(());
    }
    let width = dim_u32(OP, "width", weight.len())?;
    let func = dev.function(&ELEMENTWISE, "eq_gated_rms_norm_f32")?;
    let mut launch = dev.launch_builder(&func);
    launch.arg(o).arg(z).arg(weight).arg(&width).arg(&eps);
    // SAFETY: eq_gated_rms_norm_f32(float* o, const float* z, const float* w, u32 width,
    // float eps), one block per row; o and z hold rows·width values, w width (checked).
    unsafe { launch.launch(per_row(rows)) }?;
    Ok(())
}
