//! The generic fast-path driver: rayon tiling over output rows of the layers that
//! share an input, and the per-row segment loop over one [`Isa`]'s kernels (the
//! activations come from [`super::prepare`]).

#[cfg(target_arch = "x86_64")]
use super::Perm;
use super::band::ColumnBand;
use super::gemm::{self, GEMM_MIN_TOKENS, PortableKernel};
use super::prepare::{Act, prepare, same_activations};
use super::{Isa, Nvfp4Rows, PAIR_MIN_INPUTS, SEG, SimdLevel, portable::Portable, segments};
use crate::error::{QuantError, Result};
use crate::linear::{ActivationQuant, Linear, LinearWeight};
use edge_core::par;
use edge_core::simd::Token;

/// Multiply-adds below which a task is not worth sending to another thread.
const MIN_TASK_MACS: usize = 1 << 16;
/// Token counts up to which [`row_tiles_many`] sizes tasks by guided scheduling.
const GUIDED_MAX_TOKENS: usize = 4;
/// Fewest rows of a guided task (where the layer has that many): the one-token kernels
/// take one row from each quarter of a task.
const MIN_GUIDED_ROWS: usize = 32;

/// Runs `lin` on `x` with the kernels of `level`; shapes are already checked.
pub(crate) fn forward(
    lin: &Linear,
    level: SimdLevel,
    x: &[f32],
    tokens: usize,
    out: &mut [f32],
) -> Result<()> {
    if gemm_eligible(lin, level, tokens) && run_gemm(level, &[lin], x, tokens, &mut [out])? {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if gemv_eligible(lin, tokens)
        && let Some(kernel) = bf16_gemv(level)
    {
        run_gemv_chunked(kernel, lin, x, tokens, out);
        return Ok(());
    }
    run_rows(level, &[lin], x, tokens, &mut [out])
}

/// The row kernels of `level` for `layers` sharing the input `x`: activations prepared
/// per layer, then one parallel loop over the output rows of all of them (one
/// fork-join instead of one per layer; the small GDN gate projections ride along).
fn run_rows(
    level: SimdLevel,
    layers: &[&Linear],
    x: &[f32],
    tokens: usize,
    outs: &mut [&mut [f32]],
) -> Result<()> {
    match token(level)? {
        Token::Portable => run(Portable, layers, x, tokens, outs),
        #[cfg(target_arch = "x86_64")]
        Token::Avx2(isa) => run(isa, layers, x, tokens, outs),
        #[cfg(target_arch = "x86_64")]
        Token::Avx512(isa) => run(isa, layers, x, tokens, outs),
        #[cfg(target_arch = "aarch64")]
        Token::Neon => run(super::aarch64::Neon, layers, x, tokens, outs),
        #[cfg(target_arch = "aarch64")]
        Token::NeonDotprod(isa) => run(isa, layers, x, tokens, outs),
        #[cfg(target_arch = "aarch64")]
        Token::NeonI8mm(isa) => run(isa, layers, x, tokens, outs),
    }
}

/// `level`'s proof token; [`QuantError::Unsupported`] where this CPU or build lacks it
/// (never for the levels [`edge_core::simd::level`] gives).
fn token(level: SimdLevel) -> Result<Token> {
    level.token().ok_or_else(|| {
        QuantError::Unsupported(format!(
            "SIMD level {level} is not available on this CPU or build"
        ))
    })
}

/// The bf16 dot-product kernels, where `level` is AVX-512 and this CPU has AVX-512
/// BF16.
#[cfg(target_arch = "x86_64")]
fn bf16_gemv(level: SimdLevel) -> Option<super::x86::Bf16Gemv> {
    let bf16 = level.token()?.avx512()?.bf16()?;
    Some(super::x86::Bf16Gemv::new(bf16))
}

/// Runs layers sharing the input `x` (shapes already checked): the ones that take the
/// bf16 GEMM together (one packing of `x`, one parallel loop), the ones that take the
/// row kernels together (one parallel loop over all their rows).
pub(crate) fn forward_group(
    layers: &[&Linear],
    level: SimdLevel,
    x: &[f32],
    tokens: usize,
    outs: &mut [&mut [f32]],
) -> Result<()> {
    let (mut gemm, mut gemm_outs) = (Vec::new(), Vec::new());
    let (mut rows, mut rows_outs) = (Vec::new(), Vec::new());
    for (lin, out) in layers.iter().zip(outs.iter_mut()) {
        if gemm_eligible(lin, level, tokens) {
            gemm.push(*lin);
            gemm_outs.push(&mut **out);
        } else if gemv_eligible_here(lin, level, tokens) {
            forward(lin, level, x, tokens, out)?;
        } else {
            rows.push(*lin);
            rows_outs.push(&mut **out);
        }
    }
    if !gemm.is_empty() && !run_gemm(level, &gemm, x, tokens, &mut gemm_outs)? {
        rows.extend(gemm);
        rows_outs.extend(gemm_outs);
    }
    if rows.is_empty() {
        return Ok(());
    }
    run_rows(level, &rows, x, tokens, &mut rows_outs)
}

/// Whether [`forward`] would take the AVX-512 BF16 dot-product kernels for `lin`.
fn gemv_eligible_here(lin: &Linear, level: SimdLevel, tokens: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        gemv_eligible(lin, tokens) && bf16_gemv(level).is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (lin, level, tokens);
        false
    }
}

/// Token counts up to which layers the bf16 dot-product kernels serve run them in
/// chunks of at most [`super::x86::GEMV_MAX_TOKENS`] rather than through the GEMM:
/// each chunk streams the weights once, and for a few chunks that beats packing them
/// (tree verification's 8 to 16 rows; measured on the 0.53B shape: 8 rows took 105 ms
/// through the GEMM against a 27 ms one-token step).
#[cfg(target_arch = "x86_64")]
const CHUNKED_GEMV_MAX_TOKENS: usize = 16;

/// Whether `lin` takes the bf16 GEMM for `tokens` rows at `level` (when the CPU has a
/// kernel).
fn gemm_eligible(lin: &Linear, level: SimdLevel, tokens: usize) -> bool {
    lin.activation_quant() == ActivationQuant::Bf16
        && tokens >= GEMM_MIN_TOKENS
        && gemm::supports(lin.weight())
        && !chunked_gemv_here(lin, level, tokens)
}

/// Whether the chunked dot-product kernels take `tokens` rows of `lin` at `level`.
fn chunked_gemv_here(lin: &Linear, level: SimdLevel, tokens: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        tokens <= CHUNKED_GEMV_MAX_TOKENS
            && gemv_eligible(lin, tokens)
            && bf16_gemv(level).is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (lin, level, tokens);
        false
    }
}

/// Whether `lin` takes the bf16 dot-product kernels for a few tokens (decode steps):
/// bf16 activations, bf16 or NVFP4 weights, fewer tokens than the GEMM takes.
#[cfg(target_arch = "x86_64")]
fn gemv_eligible(lin: &Linear, tokens: usize) -> bool {
    lin.activation_quant() == ActivationQuant::Bf16
        && (1..=CHUNKED_GEMV_MAX_TOKENS).contains(&tokens)
        && matches!(lin.weight(), LinearWeight::Bf16(_) | LinearWeight::Nvfp4(_))
}

/// [`run_gemv`] over chunks of at most [`super::x86::GEMV_MAX_TOKENS`] rows, as even
/// as possible.
#[cfg(target_arch = "x86_64")]
fn run_gemv_chunked(
    kernel: super::x86::Bf16Gemv,
    lin: &Linear,
    x: &[f32],
    tokens: usize,
    out: &mut [f32],
) {
    let (n_out, n_in) = (lin.out_features(), lin.in_features());
    let chunks = tokens.div_ceil(super::x86::GEMV_MAX_TOKENS);
    let per = tokens.div_ceil(chunks);
    let mut t0 = 0;
    while t0 < tokens {
        let t1 = (t0 + per).min(tokens);
        let (xs, ys) = (&x[t0 * n_in..t1 * n_in], &mut out[t0 * n_out..t1 * n_out]);
        run_gemv(kernel, lin, xs, t1 - t0, ys);
        t0 = t1;
    }
}

/// [`gemv_eligible`] layers: activations rounded to bf16 once (in the kernel's element
/// order for NVFP4), then the kernels over rayon tiles of output rows.
#[cfg(target_arch = "x86_64")]
fn run_gemv(kernel: super::x86::Bf16Gemv, lin: &Linear, x: &[f32], tokens: usize, out: &mut [f32]) {
    let (n_out, n_in) = (lin.out_features(), lin.in_features());
    let perm = match lin.weight() {
        LinearWeight::Nvfp4(_) => Perm::Nibble32x4,
        _ => Perm::Natural,
    };
    let mut xs = vec![0u16; tokens * n_in];
    let mut natural = vec![0u16; n_in];
    for (src, dst) in x.chunks_exact(n_in).zip(xs.chunks_exact_mut(n_in)) {
        for (b, &v) in natural.iter_mut().zip(src) {
            // The upper half of the rounded pattern is zero: the cast keeps every bit.
            *b = gemm::bf16_bits(v) as u16;
        }
        perm.apply(&natural, dst);
    }
    row_tiles(n_out, n_in, tokens, out, |r0, tile| {
        let rows = tile.len() / tokens;
        match lin.weight() {
            LinearWeight::Bf16(b) => {
                let w = &b[2 * r0 * n_in..2 * (r0 + rows) * n_in];
                kernel.bf16_rows(w, n_in, &xs, tokens, tile);
            }
            LinearWeight::Nvfp4(t) => {
                let w = Nvfp4Rows::of(t, r0, rows);
                kernel.nvfp4_rows(w.codes, w.scales, n_in, &xs, tokens, tile);
                let scale = t.global_scale() * 256.0;
                tile.iter_mut().for_each(|y| *y *= scale);
            }
            _ => unreachable!("gemv_eligible admits bf16 and NVFP4 weights only"),
        }
    });
}

/// Runs `layers` through the bf16 GEMM at `level`; `false` when the level has no
/// GEMM kernel on this CPU (nothing was written).
fn run_gemm(
    level: SimdLevel,
    layers: &[&Linear],
    x: &[f32],
    tokens: usize,
    outs: &mut [&mut [f32]],
) -> Result<bool> {
    match token(level)? {
        Token::Portable => {
            gemm::forward_group(Portable, PortableKernel, layers, x, tokens, outs);
            Ok(true)
        }
        #[cfg(target_arch = "x86_64")]
        Token::Avx512(isa) => match isa.bf16() {
            Some(kernel) => {
                gemm::forward_group(isa, kernel, layers, x, tokens, outs);
                Ok(true)
            }
            None => Ok(false),
        },
        // The token is both the ISA (panel decoding) and the micro-kernel.
        #[cfg(target_arch = "x86_64")]
        Token::Avx2(isa) => {
            gemm::forward_group(isa, isa, layers, x, tokens, outs);
            Ok(true)
        }
        // `bfmmla` where the CPU has FEAT_BF16; the token decodes the panels.
        #[cfg(target_arch = "aarch64")]
        Token::NeonI8mm(isa) => match isa.bf16() {
            Some(kernel) => {
                gemm::forward_group(isa, kernel, layers, x, tokens, outs);
                Ok(true)
            }
            None => Ok(false),
        },
        // No bf16 GEMM kernel yet: the row kernels on rounded activations.
        #[allow(unreachable_patterns)]
        _ => Ok(false),
    }
}

fn run<I: Isa>(
    isa: I,
    layers: &[&Linear],
    x: &[f32],
    tokens: usize,
    outs: &mut [&mut [f32]],
) -> Result<()> {
    if tokens == 0 {
        return Ok(());
    }
    // Layers that read `x` the same way share one preparation (the fused q/k/v and z
    // projections of a GDN mixer, gate and up of an MLP): `act_of[i]` indexes `acts`.
    let mut acts: Vec<Act<'_>> = Vec::with_capacity(layers.len());
    let mut act_of: Vec<usize> = Vec::with_capacity(layers.len());
    for (i, lin) in layers.iter().enumerate() {
        if let Some(j) = layers[..i].iter().position(|p| same_activations(p, lin)) {
            act_of.push(act_of[j]);
            continue;
        }
        let mut act = prepare(isa, lin, x, tokens)?;
        if let Act::A4(a, _) = &mut act {
            isa.pack_a4(a, lin.in_features(), tokens);
        }
        act_of.push(acts.len());
        acts.push(act);
    }
    let shapes: Vec<_> = layers
        .iter()
        .map(|l| (l.out_features(), l.in_features()))
        .collect();
    // Prompt kernels that finish each output in one pass write it in place (one token
    // has no tiles to transpose: nothing to decide, nothing allocated).
    let mut direct: Vec<bool> = Vec::new();
    if tokens > 1 {
        direct = layers
            .iter()
            .zip(&act_of)
            .map(|(lin, &a)| match &acts[a] {
                Act::A4(act, _) => isa.a4_writes_columns(act, lin.in_features(), tokens),
                Act::F32(_) => false,
            })
            .collect();
    }
    row_tiles_many(
        isa,
        &shapes,
        tokens,
        outs,
        &direct,
        |i, r0, out| match out {
            RowsOut::Tile(tile) => compute_rows(isa, layers[i], &acts[act_of[i]], tokens, r0, tile),
            RowsOut::Columns(mut band) => {
                compute_columns(isa, layers[i], &acts[act_of[i]], r0, &mut band)
            }
        },
    );
    Ok(())
}

/// [`row_tiles_many`] for one layer: `task(r0, tile)`.
#[cfg(target_arch = "x86_64")]
fn row_tiles(
    n_out: usize,
    n_in: usize,
    tokens: usize,
    out: &mut [f32],
    task: impl Fn(usize, &mut [f32]) + Sync,
) {
    // The bf16 kernels of this path are AVX-512 only: transpose with the portable
    // blocks, as measured there.
    row_tiles_many(
        Portable,
        &[(n_out, n_in)],
        tokens,
        &mut [out],
        &[false],
        |_, r0, out| match out {
            RowsOut::Tile(tile) => task(r0, tile),
            RowsOut::Columns(_) => unreachable!("no layer here writes columns"),
        },
    );
}

/// Where a task of [`row_tiles_many`] puts its output rows.
enum RowsOut<'a> {
    /// A row-major `[rows, tokens]` tile (transposed into the output afterwards where
    /// there are several tokens).
    Tile(&'a mut [f32]),
    /// The rows' columns of the `[tokens, n_out]` output itself.
    Columns(ColumnBand<'a>),
}

/// Splits the output rows of layers with `shapes[i] = (n_out, n_in)` into rayon tasks
/// of one parallel loop: `task(i, r0, out)` fills rows `r0..r0 + rows` of layer `i`
/// (tasks own disjoint rows). For several tokens, layers with `direct[i]` (read only
/// then) get their columns of `outs[i]` (`[tokens, n_out]`); the others fill row-major
/// `[rows, tokens]` tiles, which are then transposed into `outs[i]`. For one token the
/// tiles are the outputs themselves.
fn row_tiles_many<I: Isa>(
    isa: I,
    shapes: &[(usize, usize)],
    tokens: usize,
    outs: &mut [&mut [f32]],
    direct: &[bool],
    task: impl Fn(usize, usize, RowsOut<'_>) + Sync,
) {
    let threads = rayon::current_num_threads().max(1);
    // Each layer's row ranges: decode steps take guided sizes, each task 1/(2·threads)
    // of the rows left (at least MIN_GUIDED_ROWS), so the last tasks of the loop are
    // small and the threads finish close together; with equal eighths the owner waited
    // on average half a task at the end of every loop (2.4% of decode samples, 1.4%
    // guided). Prompts keep four equal tasks per thread: a GEMM task streams every
    // token's activations once, so small tasks cost (135 → 117 tok/s guided).
    let ranges = |&(n_out, n_in): &(usize, usize)| {
        let min_rows = MIN_TASK_MACS.div_ceil(n_in * tokens).max(1);
        let guided = tokens <= GUIDED_MAX_TOKENS;
        let equal = n_out.div_ceil(4 * threads).max(min_rows);
        let mut r0 = 0;
        core::iter::from_fn(move || {
            let left = n_out - r0;
            if left == 0 {
                return None;
            }
            let rows = match guided {
                true => left
                    .div_ceil(2 * threads)
                    .max(min_rows.max(MIN_GUIDED_ROWS)),
                false => equal,
            }
            .min(left);
            r0 += rows;
            Some(r0 - rows..r0)
        })
    };
    let transposes = |i: usize| tokens > 1 && !direct[i];
    // No buffers (and no allocation) for one token, where the tiles are the outputs.
    let mut transposed: Vec<Vec<f32>> = Vec::new();
    if tokens > 1 {
        transposed = (0..shapes.len())
            .map(|i| match transposes(i) {
                true => vec![0.0; shapes[i].0 * tokens],
                false => Vec::new(),
            })
            .collect();
    }
    let mut buffers = transposed.iter_mut();
    let mut tasks = Vec::new();
    for (i, (shape, out)) in shapes.iter().zip(outs.iter_mut()).enumerate() {
        let buf = buffers.next();
        if tokens > 1 && direct[i] {
            let bands = ColumnBand::split(out, shape.0, ranges(shape));
            tasks.extend(
                bands
                    .into_iter()
                    .zip(ranges(shape))
                    .map(|(band, rows)| (i, rows.start, RowsOut::Columns(band))),
            );
            continue;
        }
        let mut rest: &mut [f32] = match buf {
            Some(buf) if transposes(i) => buf,
            _ => out,
        };
        for rows in ranges(shape) {
            let (tile, tail) = rest.split_at_mut(rows.len() * tokens);
            tasks.push((i, rows.start, RowsOut::Tile(tile)));
            rest = tail;
        }
    }
    // On the spinning team during a decode step (see `edge_core::par`).
    par::for_each(tasks, |(i, r0, out)| task(i, r0, out));
    for (i, (t, out)) in transposed.iter().zip(outs.iter_mut()).enumerate() {
        if transposes(i) {
            transpose_tiles(isa, t, tokens, out);
        }
    }
}

/// `out[tok·n_out + r] = tiles[r·tokens + tok]`, in parallel over blocks of tokens and,
/// within one, in 8 × 8 blocks ([`Isa::transpose8x8`]): eight source and eight
/// destination cache lines at a time, few enough that the large power-of-two-ish
/// strides do not evict them (a row-by-row scatter took 12% of a W4A8 prompt GEMM,
/// 16 × 16 blocks 17%).
fn transpose_tiles<I: Isa>(isa: I, tiles: &[f32], tokens: usize, out: &mut [f32]) {
    const BLOCK: usize = 8;
    let n_out = out.len() / tokens;
    let blocks: Vec<_> = out.chunks_mut(n_out * BLOCK).enumerate().collect();
    par::for_each(blocks, |(b, o)| {
        let t0 = b * BLOCK;
        let nt = o.len() / n_out;
        for r0 in (0..n_out).step_by(BLOCK) {
            let nr = BLOCK.min(n_out - r0);
            if nr == BLOCK && nt == BLOCK {
                isa.transpose8x8(&tiles[r0 * tokens + t0..], tokens, &mut o[r0..], n_out);
                continue;
            }
            for (k, dst) in o.chunks_exact_mut(n_out).enumerate() {
                for (r, d) in dst[r0..r0 + nr].iter_mut().enumerate() {
                    *d = tiles[(r0 + r) * tokens + t0 + k];
                }
            }
        }
    });
}

/// Computes output rows `r0..r0 + band.width()` of an NVFP4 layer with 8-bit
/// activations straight into their columns of the output ([`Isa::a4_rows_into`]).
fn compute_columns<I: Isa>(
    isa: I,
    lin: &Linear,
    act: &Act<'_>,
    r0: usize,
    band: &mut ColumnBand<'_>,
) {
    let (LinearWeight::Nvfp4(t), Act::A4(a, factor)) = (lin.weight(), act) else {
        unreachable!("only integer NVFP4 layers write columns (`Isa::a4_writes_columns`)");
    };
    let w = Nvfp4Rows::of(t, r0, band.width());
    isa.a4_rows_into(w, a, factor * t.global_scale(), band);
}

/// Runs `row(r, acc)` for each row of `tile` (`[rows, tokens]`, first row `r0`) and
/// stores `scale · acc`.
fn each_row(
    tile: &mut [f32],
    tokens: usize,
    r0: usize,
    scale: f32,
    mut row: impl FnMut(usize, &mut [f32]),
) {
    let mut acc = vec![0.0f32; tokens];
    for (i, y) in tile.chunks_exact_mut(tokens).enumerate() {
        acc.fill(0.0);
        row(r0 + i, &mut acc);
        for (o, a) in y.iter_mut().zip(&acc) {
            *o = a * scale;
        }
    }
}

/// Inputs `[k0, k0 + len)` of row `r` of an f32, bf16 or FP8 weight as f32 (FP8 with
/// the 2⁻⁸ unit, see [`row_scale`]): borrowed for f32, decoded into `buf` otherwise.
#[allow(clippy::too_many_arguments)]
fn row_segment<'a, I: Isa>(
    isa: I,
    w: &'a LinearWeight,
    r: usize,
    n_in: usize,
    k0: usize,
    len: usize,
    buf: &'a mut [f32],
) -> &'a [f32] {
    let e = r * n_in + k0;
    let dst = &mut buf[..len];
    match w {
        LinearWeight::F32(v) => return &v[e..e + len],
        LinearWeight::Bf16(b) => isa.decode_bf16(&b[2 * e..2 * (e + len)], dst),
        LinearWeight::Fp8(t) => isa.decode_fp8(&t.codes()[e..e + len], dst),
        LinearWeight::Nvfp4(_) => unreachable!("NVFP4 rows use Isa::nvfp4_rows"),
    }
    dst
}

/// The factor that turns [`row_segment`] dot products into outputs.
fn row_scale(w: &LinearWeight) -> f32 {
    match w {
        LinearWeight::Fp8(t) => t.scale() * 256.0,
        _ => 1.0,
    }
}

/// Computes output rows `r0..r0 + tile.len()/tokens` for all tokens.
fn compute_rows<I: Isa>(
    isa: I,
    lin: &Linear,
    act: &Act<'_>,
    tokens: usize,
    r0: usize,
    tile: &mut [f32],
) {
    let n_in = lin.in_features();
    if tokens == 1
        && let (LinearWeight::Bf16(b), Act::F32(xs)) = (lin.weight(), act)
        && isa.bf16_rows_one_token(&b[2 * r0 * n_in..][..2 * tile.len() * n_in], n_in, xs, tile)
    {
        return;
    }
    // The f32-activation paths decode weight segments into this; the integer paths need
    // none (so a decode step allocates nothing per task there).
    let mut buf = match act {
        Act::F32(_) => vec![0.0f32; SEG.min(n_in)],
        Act::A4(..) => Vec::new(),
    };
    match (lin.weight(), act) {
        (LinearWeight::Nvfp4(t), Act::F32(xs)) => {
            let w = Nvfp4Rows::of(t, r0, tile.len() / tokens);
            isa.nvfp4_rows(w.codes, w.scales, n_in, xs, tokens, tile, &mut buf);
            let scale = t.global_scale() * 256.0;
            tile.iter_mut().for_each(|y| *y *= scale);
        }
        (w, Act::F32(xs))
            if tokens == 1 && (n_in >= PAIR_MIN_INPUTS || matches!(w, LinearWeight::F32(_))) =>
        {
            // One token: rows in pairs, so each activation load serves two rows (and f32
            // weights, read straight from memory, get two streams in flight).
            let mut buf2 = vec![0.0f32; SEG.min(n_in)];
            for (i, y) in tile.chunks_mut(2).enumerate() {
                let r = r0 + 2 * i;
                let mut acc = [0.0f32; 2];
                for (k0, len) in segments(n_in) {
                    let x = &xs[k0..k0 + len];
                    let w0 = row_segment(isa, w, r, n_in, k0, len, &mut buf);
                    if y.len() == 2 {
                        let w1 = row_segment(isa, w, r + 1, n_in, k0, len, &mut buf2);
                        let [a, b] = isa.dot2(w0, w1, x);
                        acc[0] += a;
                        acc[1] += b;
                    } else {
                        isa.dot(w0, x, n_in, &mut acc[..1]);
                    }
                }
                for (o, a) in y.iter_mut().zip(acc) {
                    *o = a * row_scale(w);
                }
            }
        }
        (w, Act::F32(xs)) => each_row(tile, tokens, r0, row_scale(w), |r, acc| {
            for (k0, len) in segments(n_in) {
                let w0 = row_segment(isa, w, r, n_in, k0, len, &mut buf);
                isa.dot(w0, &xs[k0..], n_in, acc);
            }
        }),
        (LinearWeight::Nvfp4(t), Act::A4(a, factor)) => {
            let w = Nvfp4Rows::of(t, r0, tile.len() / tokens);
            isa.a4_rows(w.codes, w.scales, n_in, a, tokens, tile);
            let scale = factor * t.global_scale();
            tile.iter_mut().for_each(|y| *y *= scale);
        }
        (_, Act::A4(..)) => unreachable!("A4 activations are only prepared for NVFP4 weights"),
    }
}
