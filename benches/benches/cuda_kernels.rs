//! The CUDA kernels on GPU 0, at Qwen3.6-27B shapes:
//!
//! - `nvfp4-mlp-27b`: one pass over 16 distinct MLP matrices (gate/up 5120 → 17408, down
//!   17408 → 5120; 0.80 GB of NVFP4, far above L2, so weights stream from DRAM) with bf16
//!   activations, the CUDA-core product (`nvfp4_linear_bf16_into`) against the tensor-core
//!   one (`nvfp4_linear_tc_bf16_into`) at 1 to 64 tokens, beside `copy-1GiB`, the
//!   device-to-device copy (read + write) the products are bounded by. Throughput is
//!   weight bytes per pass.
//! - `nvfp4-linear-{out}x{in}`: `nvfp4_linear` at the two MLP decode shapes, 1 and 16
//!   tokens, f32 and bf16 activations (throughput: weight bytes), and the dequantize and
//!   quantize kernels (throughput: NVFP4 and f32 bytes read and written).
//! - `model-27b-4-layers`: a random NVFP4 checkpoint of the 27B's shape cut to one
//!   block of its 3:1 pattern (three Gated DeltaNet layers and one attention layer,
//!   vocabulary 8192) on `CudaBackend` with bf16 activations and bf16 KV pages, 4096
//!   tokens deep: a 512-token prompt chunk (the attention tile kernel and the chunked
//!   GDN kernel) and a one-token decode step. Throughput is tokens.
//!
//! Every timed iteration waits for the device, so the times are the kernels'. Without a
//! GPU the bench says so and measures nothing: the emulated device is for correctness,
//! not speed.
//!
//! Run: `cargo bench -p edge-benches --features cuda --bench cuda_kernels`.

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use edge_benches::{DECODE_SHAPES, values};
use edge_core::cuda::CudaDevice;
use edge_core::rng::SeededRng;
use edge_kvcache::{CacheConfig, KvDType, PagedCache};
use edge_model::cuda::CudaBackend;
use edge_model::{ActivationMode, Backend, LoadOptions, LogitRows, Qwen35Model, StepBatch};
use edge_quant::Nvfp4Tensor;
use edge_quant::cuda::{self as qc, CudaNvfp4Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tokens of the model's cached prefix, and of its prompt chunk.
const DEPTH: usize = 4096;
const CHUNK: usize = 512;

/// bf16 bits of `x`, rounded to nearest even.
fn bf16_bits(x: &[f32]) -> Vec<u16> {
    x.iter()
        .map(|&v| half::bf16::from_f32(v).to_bits())
        .collect()
}

/// A random NVFP4 matrix: uniform codes, block scales in 0.125 .. 4 (E4M3 0x28..0x48),
/// so the kernels see realistic magnitudes.
fn random_nvfp4(
    dev: &Arc<CudaDevice>,
    rows: usize,
    cols: usize,
    rng: &mut SeededRng,
) -> (Nvfp4Tensor, CudaNvfp4Tensor) {
    let scales: Vec<u8> = (0..rows * cols / 16)
        .map(|_| 0x28 + rng.below(32) as u8)
        .collect();
    let w = Nvfp4Tensor::from_parts(rows, cols, rng.bytes(rows * cols / 2), scales, 1e-3).unwrap();
    let gw = CudaNvfp4Tensor::upload(dev, &w).unwrap();
    (w, gw)
}

fn mlp_sweep(c: &mut Criterion, dev: &Arc<CudaDevice>) {
    let mut rng = SeededRng::from_seed(27);
    let mats: Vec<CudaNvfp4Tensor> = (0..16)
        .map(|i| {
            let (rows, cols) = if i % 3 == 2 {
                (5120, 17408)
            } else {
                (17408, 5120)
            };
            random_nvfp4(dev, rows, cols, &mut rng).1
        })
        .collect();
    let weight_bytes: usize = mats.iter().map(|m| m.storage_bytes()).sum();
    let mut g = c.benchmark_group("nvfp4-mlp-27b");
    // A pass takes well under a millisecond: a second of samples is thousands of passes.
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));

    let src = dev.zeros::<u8>(1 << 30).unwrap();
    let mut dst = dev.zeros::<u8>(1 << 30).unwrap();
    g.throughput(Throughput::Bytes(2 << 30));
    g.bench_function("copy-1GiB", |b| {
        b.iter(|| {
            dev.copy(&src, 0..src.len(), &mut dst, 0).unwrap();
            dev.synchronize().unwrap();
        })
    });
    drop((src, dst));

    g.throughput(Throughput::Bytes(weight_bytes as u64));
    for tokens in [1, 2, 4, 8, 16, 32, 64] {
        let bits = bf16_bits(&values(tokens as u64, tokens * 17408));
        // Activations for both input widths, uploaded once, outside the timing.
        let x5120 = dev.upload(&bits[..tokens * 5120]).unwrap();
        let x17408 = dev.upload(&bits).unwrap();
        let x_of = |w: &CudaNvfp4Tensor| if w.cols() == 5120 { &x5120 } else { &x17408 };
        let mut ys: Vec<_> = mats
            .iter()
            .map(|m| dev.zeros::<f32>(tokens * m.rows()).unwrap())
            .collect();
        g.bench_function(BenchmarkId::new("cuda-cores", tokens), |b| {
            b.iter(|| {
                for (w, y) in mats.iter().zip(ys.iter_mut()) {
                    qc::nvfp4_linear_bf16_into(dev, w, x_of(w), tokens, y).unwrap();
                }
                dev.synchronize().unwrap();
            })
        });
        g.bench_function(BenchmarkId::new("tensor-cores", tokens), |b| {
            b.iter(|| {
                for (w, y) in mats.iter().zip(ys.iter_mut()) {
                    qc::nvfp4_linear_tc_bf16_into(dev, w, x_of(w), tokens, y).unwrap();
                }
                dev.synchronize().unwrap();
            })
        });
    }
    g.finish();
}

fn decode_shapes(c: &mut Criterion, dev: &Arc<CudaDevice>) {
    for &(rows, cols) in &DECODE_SHAPES[..2] {
        let mut rng = SeededRng::from_seed(rows as u64);
        let gw = random_nvfp4(dev, rows, cols, &mut rng).1;
        let mut g = c.benchmark_group(format!("nvfp4-linear-{rows}x{cols}"));
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        g.throughput(Throughput::Bytes(gw.storage_bytes() as u64));
        for tokens in [1, 16] {
            let x = values(tokens as u64, tokens * cols);
            let (xf, xb) = (dev.upload(&x).unwrap(), dev.upload(&bf16_bits(&x)).unwrap());
            let mut y = dev.zeros::<f32>(tokens * rows).unwrap();
            g.bench_function(BenchmarkId::new("f32-act", tokens), |b| {
                b.iter(|| {
                    qc::nvfp4_linear_into(dev, &gw, &xf, tokens, &mut y).unwrap();
                    dev.synchronize().unwrap();
                })
            });
            g.bench_function(BenchmarkId::new("bf16-act", tokens), |b| {
                b.iter(|| {
                    qc::nvfp4_linear_bf16_into(dev, &gw, &xb, tokens, &mut y).unwrap();
                    dev.synchronize().unwrap();
                })
            });
        }
        let mut wf = dev.zeros::<f32>(rows * cols).unwrap();
        g.throughput(Throughput::Bytes(
            (gw.storage_bytes() + rows * cols * 4) as u64,
        ));
        g.bench_function("dequantize", |b| {
            b.iter(|| {
                qc::nvfp4_dequantize_into(dev, &gw, &mut wf).unwrap();
                dev.synchronize().unwrap();
            })
        });
        // Its result is allocated per call and it reads one status word back, as a
        // caller quantizing a tensor pays.
        g.bench_function("quantize", |b| {
            b.iter(|| {
                drop(qc::nvfp4_quantize(dev, rows, cols, &wf, 1e-3).unwrap());
                dev.synchronize().unwrap();
            })
        });
        g.finish();
    }
}

/// The 27B config cut to one 3:1 block, with a small vocabulary and no MTP head: the
/// layers measured are the 27B's own, in a checkpoint quick to write.
fn block_config() -> serde_json::Value {
    let mut config = edge_model::synthetic::qwen36_27b_config();
    config["num_hidden_layers"] = 4.into();
    config["vocab_size"] = 8192.into();
    config["bos_token_id"] = 1.into();
    config["eos_token_id"] = 1.into();
    config["mtp_num_hidden_layers"] = 0.into();
    config
}

fn model_passes(c: &mut Criterion, gpu: &mut CudaBackend) {
    let dir = tempfile::tempdir().unwrap();
    edge_model::synthetic::write_random_nvfp4_checkpoint(dir.path(), &block_config(), 5).unwrap();
    let options = LoadOptions {
        activations: ActivationMode::Bf16,
    };
    let model = Qwen35Model::load_with(dir.path(), options)
        .unwrap()
        .to_backend(gpu)
        .unwrap();
    let config = CacheConfig {
        kv_dtype: KvDType::Bf16,
        prefix_cache: false,
        ..CacheConfig::default()
    };
    let memory = gpu
        .cache_memory(&model.cache_spec(&config), &config)
        .unwrap();
    let mut cache = PagedCache::with_memory(memory, config).unwrap();
    let seq = cache.new_sequence(DEPTH + CHUNK).unwrap();
    let vocab = model.config().vocab_size as u32;
    let tokens: Vec<u32> = (0..(DEPTH + CHUNK) as u32)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    for (i, chunk) in tokens[..DEPTH].chunks(CHUNK).enumerate() {
        let batch = StepBatch::single(seq, chunk, i * CHUNK, LogitRows::None);
        let out = model.forward(gpu, &batch, &mut cache).unwrap();
        gpu.free(out.hidden);
    }
    let saved = cache.save_state(seq).unwrap();

    let mut g = c.benchmark_group("model-27b-4-layers");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, rows) in [("prompt-chunk-512-at-4096", CHUNK), ("decode-at-4096", 1)] {
        g.throughput(Throughput::Elements(rows as u64));
        let batch = StepBatch::single(seq, &tokens[DEPTH..][..rows], DEPTH, LogitRows::Last);
        // Only the pass is timed; rolling the sequence back to the prefix is not.
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let out = model.forward(gpu, &batch, &mut cache).unwrap();
                    gpu.synchronize().unwrap();
                    spent += start.elapsed();
                    gpu.free(out.hidden);
                    cache.truncate(seq, DEPTH).unwrap();
                    cache.restore_state(seq, &saved).unwrap();
                }
                spent
            })
        });
    }
    g.finish();
}

fn main() {
    let mut gpu = match CudaBackend::with_default_cache(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("cuda_kernels: no GPU ({e}); nothing measured");
            return;
        }
    };
    let dev = gpu.device().clone();
    eprintln!("device: {dev:?}");
    let mut c = Criterion::default().configure_from_args();
    mlp_sweep(&mut c, &dev);
    decode_shapes(&mut c, &dev);
    model_passes(&mut c, &mut gpu);
    c.final_summary();
}
