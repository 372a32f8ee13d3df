//! Memory-mapped safetensors checkpoints: single file or sharded, plain (`model.*`) or
//! VL-wrapper (`model.language_model.*`) key layouts.
//!
//! Tensor names are normalised to the plain layout; `model.visual.*` is skipped;
//! `mtp.*` and `lm_head.*` are kept. Tensor data stays in the mapping: a
//! [`TensorView`]'s bytes borrow from it without copying.

mod open;

use crate::{ModelError, Result};
use edge_core::{Bytes, DType, decode_to_f32};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One tensor of a checkpoint.
#[derive(Clone, Debug)]
pub struct TensorView {
    /// Normalised name (plain `model.*` layout).
    pub name: String,
    /// Stored element type.
    pub dtype: DType,
    /// Stored shape.
    pub shape: Vec<usize>,
    /// Raw little-endian bytes (borrowed from the memory map).
    pub data: Bytes,
}

impl TensorView {
    /// Errors unless the shape is exactly `expected`.
    pub fn expect_shape(&self, expected: &[usize]) -> Result<&Self> {
        if self.shape == expected {
            Ok(self)
        } else {
            Err(ModelError::TensorShape {
                name: self.name.clone(),
                expected: expected.to_vec(),
                got: self.shape.clone(),
            })
        }
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// Decodes an F32, BF16 or F16 tensor to f32 values.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        decode_to_f32(self.dtype, &self.data).ok_or_else(|| ModelError::TensorDType {
            name: self.name.clone(),
            expected: "f32, bf16 or f16".into(),
            got: self.dtype.to_string(),
        })
    }

    /// Reads a scalar (shape `[]` or `[1]`) F32/BF16/F16 tensor.
    pub fn scalar_f32(&self) -> Result<f32> {
        if self.elements() != 1 {
            return Err(ModelError::TensorShape {
                name: self.name.clone(),
                expected: vec![],
                got: self.shape.clone(),
            });
        }
        Ok(self.to_f32()?[0])
    }
}

/// An opened checkpoint: every tensor by normalised name.
#[derive(Debug)]
pub struct Checkpoint {
    dir: PathBuf,
    files: Vec<PathBuf>,
    tensors: BTreeMap<String, TensorView>,
}

impl Checkpoint {
    /// Opens `dir/model.safetensors`, or the shards listed in
    /// `dir/model.safetensors.index.json`.
    pub fn open(dir: &Path) -> Result<Self> {
        let (files, tensors) = open::open_dir(dir)?;
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            files,
            tensors,
        })
    }

    /// A checkpoint from one in-memory safetensors image (e.g. a model embedded in a
    /// binary with `include_bytes!`); tensors borrow from it without copying.
    pub fn from_static(label: &str, image: &'static [u8]) -> Result<Self> {
        let mut tensors = BTreeMap::new();
        let path = PathBuf::from(label);
        open::add_tensors(&path, std::sync::Arc::new(image), &mut tensors)?;
        Ok(Checkpoint {
            dir: path.clone(),
            files: vec![path],
            tensors,
        })
    }

    /// The directory it was opened from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The safetensors files read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// A tensor by normalised name, if present.
    pub fn get(&self, name: &str) -> Option<&TensorView> {
        self.tensors.get(name)
    }

    /// A tensor by normalised name, or [`ModelError::MissingTensor`].
    pub fn require(&self, name: &str) -> Result<&TensorView> {
        self.get(name).ok_or_else(|| ModelError::MissingTensor {
            name: name.to_string(),
        })
    }

    /// True when a tensor is present.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// All tensors, sorted by name.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorView> {
        self.tensors.values()
    }

    /// Total stored bytes per dtype.
    pub fn bytes_by_dtype(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for t in self.tensors.values() {
            *out.entry(t.dtype.to_string()).or_insert(0) += t.data.len();
        }
        out
    }
}

/// Maps a stored name to the plain layout, or `None` for tensors edge-llm skips
/// (the vision tower of the VL wrapper).
pub fn normalise_name(name: &str) -> Option<String> {
    if name.starts_with("model.visual.") || name.starts_with("visual.") {
        return None;
    }
    Some(match name.strip_prefix("model.language_model.") {
        Some(rest) => format!("model.{rest}"),
        None => name.to_string(),
    })
}

#[cfg(test)]
mod tests;
