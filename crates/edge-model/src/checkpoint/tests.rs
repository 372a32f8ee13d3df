use super::*;
use safetensors::tensor::TensorView as StView;
use std::collections::HashMap;

/// The test's own folder (tests run in parallel), removed when dropped.
fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn write(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: HashMap<String, StView> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), StView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(&views, None, path).unwrap();
}

use safetensors::Dtype;

fn bf16_bytes(vals: &[f32]) -> Vec<u8> {
    vals.iter()
        .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
        .collect()
}

#[test]
fn normalises_vl_layout_and_skips_vision() {
    let tmp = temp_dir();
    let d = tmp.path();
    write(
        &d.join("model.safetensors"),
        &[
            (
                "model.language_model.norm.weight",
                Dtype::BF16,
                vec![2],
                bf16_bytes(&[1.0, -2.0]),
            ),
            (
                "model.visual.patch.weight",
                Dtype::BF16,
                vec![1],
                bf16_bytes(&[0.0]),
            ),
            (
                "mtp.fc.weight",
                Dtype::F32,
                vec![1],
                3.0f32.to_le_bytes().to_vec(),
            ),
        ],
    );
    let c = Checkpoint::open(d).unwrap();
    let t = c.require("model.norm.weight").unwrap();
    assert_eq!(t.to_f32().unwrap(), vec![1.0, -2.0]);
    assert!(c.get("model.visual.patch.weight").is_none());
    assert_eq!(
        c.require("mtp.fc.weight").unwrap().scalar_f32().unwrap(),
        3.0
    );
    assert_eq!(c.tensors().count(), 2);
    let err = c
        .require("model.embed_tokens.weight")
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.embed_tokens.weight"), "{err}");
    let err = t.expect_shape(&[3]).unwrap_err().to_string();
    assert!(err.contains("[2]") && err.contains("[3]"), "{err}");
}

#[test]
fn opens_sharded_checkpoints() {
    let tmp = temp_dir();
    let d = tmp.path();
    write(
        &d.join("a.safetensors"),
        &[("x", Dtype::F32, vec![1], 1f32.to_le_bytes().to_vec())],
    );
    write(
        &d.join("b.safetensors"),
        &[("y", Dtype::F32, vec![1], 2f32.to_le_bytes().to_vec())],
    );
    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"metadata": {}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}"#,
    )
    .unwrap();
    let c = Checkpoint::open(d).unwrap();
    assert_eq!(c.files().len(), 2);
    assert_eq!(c.require("y").unwrap().scalar_f32().unwrap(), 2.0);

    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map": {"x": "a.safetensors", "z": "b.safetensors"}}"#,
    )
    .unwrap();
    let err = Checkpoint::open(d).unwrap_err().to_string();
    assert!(err.contains("`z`"), "{err}");

    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map": {"x": "../a"}}"#,
    )
    .unwrap();
    assert!(matches!(
        Checkpoint::open(d),
        Err(crate::ModelError::Checkpoint { .. })
    ));
}

#[test]
fn truncated_and_missing_files_are_errors() {
    let tmp = temp_dir();
    let d = tmp.path();
    let err = Checkpoint::open(d).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    let path = d.join("model.safetensors");
    write(&path, &[("w", Dtype::F32, vec![64], vec![0; 256])]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = Checkpoint::open(d).unwrap_err();
    assert!(matches!(err, ModelError::Checkpoint { .. }), "{err}");
    std::fs::write(&path, b"garbage").unwrap();
    assert!(matches!(
        Checkpoint::open(d).unwrap_err(),
        ModelError::Checkpoint { .. }
    ));
}

#[test]
fn unsupported_dtype_and_duplicates_are_errors() {
    let tmp = temp_dir();
    let d = tmp.path();
    write(
        &d.join("model.safetensors"),
        &[("w", Dtype::F64, vec![1], vec![0; 8])],
    );
    let err = Checkpoint::open(d).unwrap_err().to_string();
    assert!(err.contains("`w`") && err.contains("F64"), "{err}");
    write(
        &d.join("model.safetensors"),
        &[
            ("model.norm.weight", Dtype::F32, vec![1], vec![0; 4]),
            (
                "model.language_model.norm.weight",
                Dtype::F32,
                vec![1],
                vec![0; 4],
            ),
        ],
    );
    let err = Checkpoint::open(d).unwrap_err().to_string();
    assert!(err.contains("appears twice"), "{err}");
}

#[test]
fn non_float_tensor_to_f32_is_error() {
    let tmp = temp_dir();
    let d = tmp.path();
    write(
        &d.join("model.safetensors"),
        &[("q", Dtype::U8, vec![2], vec![1, 2])],
    );
    let c = Checkpoint::open(d).unwrap();
    assert!(matches!(
        c.require("q").unwrap().to_f32(),
        Err(ModelError::TensorDType { .. })
    ));
    assert!(matches!(
        c.require("q").unwrap().scalar_f32(),
        Err(crate::ModelError::TensorShape { .. })
    ));
}
