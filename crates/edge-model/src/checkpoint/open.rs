//! Opening and validating safetensors files.

use super::{TensorView, normalise_name};
use crate::{ModelError, Result};
use edge_core::{Bytes, DType};
use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Tensors = BTreeMap<String, TensorView>;

pub(super) fn open_dir(dir: &Path) -> Result<(Vec<PathBuf>, Tensors)> {
    let index = dir.join("model.safetensors.index.json");
    let single = dir.join("model.safetensors");
    let mut tensors = Tensors::new();
    if index.exists() {
        let weight_map = read_index(&index)?;
        let shards: BTreeSet<&String> = weight_map.values().collect();
        let mut files = Vec::new();
        for shard in shards {
            let path = dir.join(shard);
            open_file(&path, &mut tensors)?;
            files.push(path);
        }
        for (name, shard) in &weight_map {
            if let Some(norm) = normalise_name(name)
                && !tensors.contains_key(&norm)
            {
                return Err(ModelError::Checkpoint {
                    path: dir.join(shard),
                    reason: format!("the index lists `{name}` in this shard but the file lacks it"),
                });
            }
        }
        Ok((files, tensors))
    } else if single.exists() {
        open_file(&single, &mut tensors)?;
        Ok((vec![single], tensors))
    } else {
        Err(ModelError::Io {
            path: single,
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither model.safetensors nor model.safetensors.index.json exists",
            ),
        })
    }
}

fn read_index(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|source| ModelError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| ModelError::Checkpoint {
            path: path.to_path_buf(),
            reason: "missing the `weight_map` object".into(),
        })?;
    map.iter()
        .map(|(k, f)| match f.as_str() {
            Some(f) if !f.contains('/') && !f.contains('\\') => Ok((k.clone(), f.to_string())),
            _ => Err(ModelError::Checkpoint {
                path: path.to_path_buf(),
                reason: format!("weight_map entry for `{k}` is not a plain file name: {f}"),
            }),
        })
        .collect()
}

fn open_file(path: &Path, tensors: &mut Tensors) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // SAFETY: the mapping is read-only; edge-llm never writes checkpoint files, and a
    // checkpoint replaced on disk while it is being served is outside what any
    // memory-mapping loader (HF safetensors included) can protect against.
    let mmap = unsafe { Mmap::map(&file) }.map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    add_tensors(path, Arc::new(mmap), tensors)
}

/// Parses one safetensors image held by `backing` and adds its tensors, which keep
/// pointing into `backing`. `path` names the source in errors.
pub(super) fn add_tensors<B>(path: &Path, backing: Arc<B>, tensors: &mut Tensors) -> Result<()>
where
    B: AsRef<[u8]> + Send + Sync + 'static,
{
    let malformed = |reason: String| ModelError::Checkpoint {
        path: path.to_path_buf(),
        reason,
    };
    let bytes: &[u8] = (*backing).as_ref();
    let st = SafeTensors::deserialize(bytes).map_err(|e| malformed(e.to_string()))?;
    let base = bytes.as_ptr() as usize;
    for (name, view) in st.iter() {
        let Some(norm) = normalise_name(name) else {
            continue;
        };
        let dtype = map_dtype(view.dtype()).ok_or_else(|| {
            malformed(format!(
                "tensor `{name}` has unsupported dtype {:?}",
                view.dtype()
            ))
        })?;
        let start = view.data().as_ptr() as usize - base;
        let data = Bytes::from_shared(backing.clone(), start..start + view.data().len())?;
        let shape = view.shape().to_vec();
        if tensors.contains_key(&norm) {
            return Err(malformed(format!(
                "tensor `{norm}` appears twice (check for both plain and VL-wrapper names)"
            )));
        }
        tensors.insert(
            norm.clone(),
            TensorView {
                name: norm,
                dtype,
                shape,
                data,
            },
        );
    }
    Ok(())
}

fn map_dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::BF16 => DType::BF16,
        Dtype::F16 => DType::F16,
        Dtype::F8_E4M3 => DType::F8E4M3,
        Dtype::F8_E5M2 => DType::F8E5M2,
        Dtype::U8 => DType::U8,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        _ => return None,
    })
}
