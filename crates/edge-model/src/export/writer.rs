//! The export itself: quantize every planned linear, copy everything else, shard the
//! output, write the metadata.

use super::plan::{QuantFormat, QuantizePlan};
use crate::checkpoint::{Checkpoint, TensorView};
use crate::config::Qwen35Config;
use crate::{ModelError, Result};
use edge_core::DType;
use edge_quant::nvfp4::quantize::global_scale_for;
use edge_quant::{Fp8Tensor, Nvfp4Tensor};
use half::bf16;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Scales measured by calibration, by module prefix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CalibrationScales {
    /// Input amax of each linear (members of a fused group are unified by the export).
    pub input_amax: BTreeMap<String, f32>,
    /// Amax of keys (after norm and RoPE) per attention module (`…self_attn`).
    pub k_amax: BTreeMap<String, f32>,
    /// Amax of values per attention module.
    pub v_amax: BTreeMap<String, f32>,
}

/// How to export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Target weight format.
    pub format: QuantFormat,
    /// Calibrated activation scales; without them no `input_scale` / KV scales are
    /// written (the checkpoint then serves W4A16 / W8A16 only).
    pub calibration: Option<CalibrationScales>,
    /// Start a new output shard once this many bytes are buffered.
    pub max_shard_bytes: usize,
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportReport {
    /// Linears quantized.
    pub quantized: usize,
    /// Tensors copied unchanged.
    pub copied: usize,
    /// Output safetensors files.
    pub files: Vec<PathBuf>,
}

/// A tensor to write: name, dtype, shape, little-endian bytes.
pub(super) type Tensor = (String, safetensors::Dtype, Vec<usize>, Vec<u8>);

/// Tensors written out in files of about `limit` bytes as they come, named and indexed
/// as HF does by [`Shards::finish`].
pub(super) struct Shards<'a> {
    dir: &'a Path,
    limit: usize,
    pending: Vec<Tensor>,
    pending_bytes: usize,
    files: Vec<PathBuf>,
    names: Vec<Vec<String>>,
}

impl<'a> Shards<'a> {
    pub(super) fn new(dir: &'a Path, limit: usize) -> Self {
        Shards {
            dir,
            limit,
            pending: Vec::new(),
            pending_bytes: 0,
            files: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Adds `tensors`, writing a file once the pending ones reach the limit.
    pub(super) fn push(&mut self, tensors: Vec<Tensor>) -> Result<()> {
        for t in tensors {
            self.pending_bytes += t.3.len();
            self.pending.push(t);
        }
        if self.pending_bytes >= self.limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = (self.dir).join(format!("model-{:05}.safetensors", self.files.len() + 1));
        write_safetensors(&path, &self.pending)?;
        self.names
            .push(self.pending.iter().map(|t| t.0.clone()).collect());
        self.files.push(path);
        self.pending.clear();
        self.pending_bytes = 0;
        Ok(())
    }

    /// Writes the rest and gives the files their final names; returns them.
    pub(super) fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.flush()?;
        finish_files(self.dir, &mut self.files, &self.names)?;
        Ok(self.files)
    }
}

/// Quantizes the checkpoint in `src` into `dst` (created if missing).
/// `progress(done, total)` is called after each tensor.
pub fn quantize_checkpoint(
    src: &Path,
    dst: &Path,
    opts: &ExportOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ExportReport> {
    let config = Qwen35Config::from_dir(src)?;
    let ckpt = Checkpoint::open(src)?;
    let plan = QuantizePlan::modelopt_default(&config);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { path, source }
    };
    std::fs::create_dir_all(dst).map_err(io(dst))?;

    // Global (NVFP4) and input scales are shared across each fused group.
    let mut shared = BTreeMap::new();
    for group in &plan.groups {
        let mut amax = 0.0f32;
        for m in &group.members {
            amax = amax.max(weight_amax(ckpt.require(&format!("{m}.weight"))?)?);
        }
        let input = opts.calibration.as_ref().and_then(|c| {
            group
                .members
                .iter()
                .filter_map(|m| c.input_amax.get(m).copied())
                .reduce(f32::max)
        });
        for m in &group.members {
            shared.insert(m.clone(), (global_scale_for(amax), input));
        }
    }

    let names: Vec<&TensorView> = ckpt.tensors().collect();
    let total = names.len();
    let mut shards = Shards::new(dst, opts.max_shard_bytes);
    let mut report = ExportReport {
        quantized: 0,
        copied: 0,
        files: Vec::new(),
    };
    for (done, t) in names.iter().enumerate() {
        let prefix = t.name.strip_suffix(".weight").unwrap_or(&t.name);
        let out: Vec<Tensor> = if t.name.ends_with(".weight") && plan.is_quantized(prefix) {
            report.quantized += 1;
            let (global, input_amax) = shared[prefix];
            quantize_linear(t, prefix, opts.format, global, input_amax)?
        } else {
            report.copied += 1;
            vec![(
                t.name.clone(),
                st_dtype(t.dtype),
                t.shape.clone(),
                t.data.to_vec(),
            )]
        };
        shards.push(out)?;
        progress(done + 1, total);
    }
    let kv = kv_scale_tensors(opts.calibration.as_ref())?;
    let kv_fp8 = !kv.is_empty();
    shards.push(kv)?;
    let files = shards.finish()?;
    write_metadata(src, dst, &plan, opts.format, kv_fp8)?;
    report.files = files;
    Ok(report)
}

fn weight_amax(t: &TensorView) -> Result<f32> {
    Ok(t.to_f32()?.iter().fold(0.0f32, |m, v| m.max(v.abs())))
}

fn quantize_linear(
    t: &TensorView,
    prefix: &str,
    format: QuantFormat,
    global: f32,
    input_amax: Option<f32>,
) -> Result<Vec<Tensor>> {
    let [rows, cols] = t.shape[..] else {
        return Err(ModelError::TensorShape {
            name: t.name.clone(),
            expected: vec![0, 0],
            got: t.shape.clone(),
        });
    };
    let scalar = |name: String, v: f32| {
        (
            name,
            safetensors::Dtype::F32,
            vec![],
            v.to_le_bytes().to_vec(),
        )
    };
    let bf16_values = || -> Vec<bf16> {
        t.data
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]))
            .collect()
    };
    let mut out = Vec::new();
    match format {
        QuantFormat::Nvfp4 => {
            let q = match t.dtype {
                DType::BF16 => Nvfp4Tensor::quantize_bf16_with_global_scale(
                    rows,
                    cols,
                    &bf16_values(),
                    global,
                )?,
                _ => Nvfp4Tensor::quantize_with_global_scale(rows, cols, &t.to_f32()?, global)?,
            };
            out.push((
                t.name.clone(),
                safetensors::Dtype::U8,
                vec![rows, cols / 2],
                q.codes().to_vec(),
            ));
            out.push((
                format!("{prefix}.weight_scale"),
                safetensors::Dtype::F8_E4M3,
                vec![rows, cols / 16],
                q.scales().to_vec(),
            ));
            out.push(scalar(format!("{prefix}.weight_scale_2"), q.global_scale()));
            if let Some(a) = input_amax {
                out.push(scalar(format!("{prefix}.input_scale"), global_scale_for(a)));
            }
        }
        QuantFormat::Fp8 => {
            let q = match t.dtype {
                DType::BF16 => Fp8Tensor::quantize_bf16(rows, cols, &bf16_values())?,
                _ => Fp8Tensor::quantize(rows, cols, &t.to_f32()?)?,
            };
            out.push((
                t.name.clone(),
                safetensors::Dtype::F8_E4M3,
                vec![rows, cols],
                q.codes().to_vec(),
            ));
            out.push(scalar(format!("{prefix}.weight_scale"), q.scale()));
            if let Some(a) = input_amax {
                out.push(scalar(
                    format!("{prefix}.input_scale"),
                    edge_quant::fp8::quantize::scale_for(a),
                ));
            }
        }
    }
    Ok(out)
}

fn kv_scale_tensors(cal: Option<&CalibrationScales>) -> Result<Vec<Tensor>> {
    let Some(cal) = cal else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (module, &k) in &cal.k_amax {
        let v = cal.v_amax.get(module).copied().unwrap_or(k);
        let scales = edge_quant::fp8::kv::KvScales::from_amax(k, v)?;
        for (proj, name, scale) in [
            ("k_proj", "k_scale", scales.k_scale),
            ("v_proj", "v_scale", scales.v_scale),
        ] {
            out.push((
                format!("{module}.{proj}.{name}"),
                safetensors::Dtype::F32,
                vec![],
                scale.to_le_bytes().to_vec(),
            ));
        }
    }
    Ok(out)
}

fn st_dtype(d: DType) -> safetensors::Dtype {
    match d {
        DType::F32 => safetensors::Dtype::F32,
        DType::BF16 => safetensors::Dtype::BF16,
        DType::F16 => safetensors::Dtype::F16,
        DType::F8E4M3 => safetensors::Dtype::F8_E4M3,
        DType::F8E5M2 => safetensors::Dtype::F8_E5M2,
        DType::I32 => safetensors::Dtype::I32,
        DType::I64 => safetensors::Dtype::I64,
        DType::U8 | DType::Nvfp4 => safetensors::Dtype::U8,
    }
}

fn write_safetensors(path: &Path, tensors: &[Tensor]) -> Result<()> {
    let err = |reason: String| ModelError::Checkpoint {
        path: path.to_path_buf(),
        reason,
    };
    let views = tensors
        .iter()
        .map(|(n, d, s, b)| {
            safetensors::tensor::TensorView::new(*d, s.clone(), b).map(|v| (n.clone(), v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    safetensors::serialize_to_file(views, None, path).map_err(|e| err(e.to_string()))
}

/// One shard is named `model.safetensors`; several get HF's `-0000i-of-0000n` names
/// and an index.
fn finish_files(dst: &Path, files: &mut [PathBuf], shards: &[Vec<String>]) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { path, source }
    };
    let n = files.len();
    let mut weight_map = serde_json::Map::new();
    for (i, file) in files.iter_mut().enumerate() {
        let name = if n == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{n:05}.safetensors", i + 1)
        };
        let target = dst.join(&name);
        std::fs::rename(&*file, &target).map_err(io(&target))?;
        *file = target;
        for t in &shards[i] {
            weight_map.insert(t.clone(), serde_json::json!(name));
        }
    }
    if n > 1 {
        let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
        let path = dst.join("model.safetensors.index.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&index).unwrap_or_default(),
        )
        .map_err(io(&path))?;
    }
    Ok(())
}

fn write_metadata(
    src: &Path,
    dst: &Path,
    plan: &QuantizePlan,
    format: QuantFormat,
    kv_fp8: bool,
) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { path, source }
    };
    let cfg_path = src.join("config.json");
    let text = std::fs::read_to_string(&cfg_path).map_err(io(&cfg_path))?;
    let mut cfg: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| ModelError::Json {
            path: cfg_path,
            source,
        })?;
    cfg["quantization_config"] = plan.quantization_config(format, kv_fp8);
    let out = dst.join("config.json");
    std::fs::write(&out, serde_json::to_string_pretty(&cfg).unwrap_or_default())
        .map_err(io(&out))?;
    let hq = dst.join("hf_quant_config.json");
    std::fs::write(
        &hq,
        serde_json::to_string_pretty(&plan.hf_quant_config(format, kv_fp8)).unwrap_or_default(),
    )
    .map_err(io(&hq))?;
    // Tokenizer and generation files travel with the model.
    for f in [
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    ] {
        let from = src.join(f);
        if from.exists() {
            std::fs::copy(&from, dst.join(f)).map_err(io(&from))?;
        }
    }
    Ok(())
}
