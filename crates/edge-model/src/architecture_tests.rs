//! The crate's layering, checked on its sources: the backend interface knows nothing of
//! the model, and the orchestration knows nothing of the CPU backend (so the import
//! graph has no cycle through `backend/`).

use std::path::{Path, PathBuf};

/// The code of a source file: comments (and so doc links) removed.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file of this crate");
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn sources(relative: &[&str]) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in relative {
        let path = src.join(entry);
        if path.is_dir() {
            for file in std::fs::read_dir(&path).expect("a source folder") {
                files.push(file.expect("a directory entry").path());
            }
        } else {
            files.push(path);
        }
    }
    assert!(!files.is_empty());
    files
}

/// Every `needle` found in the code of `files`, as `file: needle`.
fn uses(files: &[PathBuf], needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let code = code(file);
        for needle in needles {
            if code.contains(needle) {
                found.push(format!("{}: {needle}", file.display()));
            }
        }
    }
    found
}

#[test]
fn the_backend_interface_names_nothing_of_the_model() {
    let model_modules = [
        "crate::cpu",
        "crate::cuda",
        "crate::layers",
        "crate::model",
        "crate::mtp",
        "crate::tree",
        "crate::session",
        "crate::load",
        "crate::upload",
        "crate::Cpu",
        "crate::Qwen35Model",
        "GatedAttention",
        "GatedDeltaNet",
    ];
    let found = uses(&sources(&["backend"]), &model_modules);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_orchestration_names_no_backend() {
    let orchestration = sources(&[
        "layers",
        "model.rs",
        "tree.rs",
        "session.rs",
        "mtp.rs",
        "batch.rs",
        "rope.rs",
        "logits.rs",
        "math.rs",
    ]);
    let found = uses(
        &orchestration,
        &["crate::cpu", "crate::cuda", "Cpu", "CudaBackend"],
    );
    assert!(found.is_empty(), "{found:#?}");
}
