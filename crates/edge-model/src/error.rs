use std::path::PathBuf;

/// Errors raised by `edge-model`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON file that does not parse.
    #[error("{path} is not valid JSON: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A config field that is missing, of the wrong type, or inconsistent.
    #[error("config field `{field}`: {reason}")]
    Config {
        /// The field, as a JSON path (e.g. `text_config.layer_types[3]`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A safetensors file whose header or data is malformed or truncated.
    #[error("checkpoint file {path} is malformed: {reason}")]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    #[error("tensor `{name}` is missing from the checkpoint")]
    MissingTensor {
        /// The (normalised) tensor name.
        name: String,
    },
    /// A tensor with an unexpected shape.
    #[error("tensor `{name}` has shape {got:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor name.
        name: String,
        /// The shape the config implies.
        expected: Vec<usize>,
        /// The shape in the file.
        got: Vec<usize>,
    },
    /// A tensor stored in a dtype the model cannot use there.
    #[error("tensor `{name}` has dtype {got}, expected {expected}")]
    TensorDType {
        /// The tensor name.
        name: String,
        /// What is accepted.
        expected: String,
        /// What the file has.
        got: String,
    },
    /// A request the model cannot serve (e.g. a prompt longer than the context).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A weight format, activation mode or operation a backend has no kernel for.
    #[error("the {backend} backend does not support {what}")]
    Unsupported {
        /// The backend (`"cuda"`).
        backend: &'static str,
        /// What it lacks, naming the layer or operation.
        what: String,
    },
    /// An error from the cache (a budget it cannot hold, an unknown sequence).
    #[error(transparent)]
    Cache(#[from] edge_kvcache::KvCacheError),
    /// An error from the quantization crate.
    #[error(transparent)]
    Quant(#[from] edge_quant::QuantError),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-model`.
pub type Result<T> = std::result::Result<T, ModelError>;

impl ModelError {
    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ModelError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// `v` as the u32 a device kernel or a flat plan array takes, or an
/// [`ModelError::InvalidInput`] naming `op` and `what`.
#[cfg(feature = "cuda")]
pub(crate) fn dim_u32(op: &str, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v)
        .map_err(|_| ModelError::InvalidInput(format!("{op}: {what} = {v} exceeds u32")))
}
