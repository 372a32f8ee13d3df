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
    /// A batch with no tokens to run (the caller's input).
    #[error("the batch has no tokens to run")]
    EmptyBatch,
    /// A token id at or past the vocabulary (the caller's input).
    #[error("token id {token} is outside the vocabulary of {vocab}")]
    TokenOutOfVocab {
        /// The offending id.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// Tokens that would run past the model's context (the caller's input).
    #[error(
        "{tokens} tokens from position {first} would reach position {end}, past the \
         context of {context}"
    )]
    PastContext {
        /// Tokens of the span.
        tokens: usize,
        /// Position of its first token.
        first: usize,
        /// Position one past its last token.
        end: usize,
        /// The model's context (`max_position_embeddings`).
        context: usize,
    },
    /// A span that does not continue its sequence where the sequence ends (the
    /// caller's input: positions out of order).
    #[error(
        "sequence {seq:?} holds {len} tokens; a span must continue at position {len}, \
         not {first}"
    )]
    PositionGap {
        /// The sequence.
        seq: edge_kvcache::SeqId,
        /// Tokens the sequence holds (the position a span must start at).
        len: usize,
        /// Where the span starts.
        first: usize,
    },
    /// A batch whose spans, chains or token trees are malformed (the caller's input).
    #[error("batch span {span}: {reason}")]
    MalformedBatch {
        /// The span at fault.
        span: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// An MTP operation on a checkpoint without an MTP head (`mtp.*` tensors).
    #[error("this checkpoint has no MTP head (mtp.* tensors)")]
    NoMtpHead,
    /// A name (of a mode or format) that is not one of the accepted values.
    #[error("unknown {what} `{value}` (expected {expected})")]
    UnknownValue {
        /// What was named (e.g. `"activation quantization"`).
        what: &'static str,
        /// The name given.
        value: String,
        /// The accepted names.
        expected: &'static str,
    },
    /// Calibration without any non-empty prompt.
    #[error("calibration needs at least one non-empty prompt")]
    NoCalibrationPrompts,
    /// An NVFP4 linear whose input width is not a multiple of the 16-value block.
    #[error("{tensor}: NVFP4 needs in_features divisible by 16, the config gives {in_features}")]
    Nvfp4Width {
        /// The linear's tensor prefix.
        tensor: String,
        /// Its input width.
        in_features: usize,
    },
    /// An operand of a backend operation of the wrong length (an internal error: the
    /// model's own plan disagrees with a buffer).
    #[error("{op}: {what} holds {got} values, expected {expected}")]
    OperandLength {
        /// The operation.
        op: &'static str,
        /// The operand.
        what: &'static str,
        /// Values it holds.
        got: usize,
        /// Values the operation needs.
        expected: usize,
    },
    /// A buffer that is not whole rows of the operation's width (internal).
    #[error("{op}: {len} values are not rows of width {width}")]
    RowWidth {
        /// The operation.
        op: &'static str,
        /// Values the buffer holds.
        len: usize,
        /// The row width.
        width: usize,
    },
    /// An index (a row, page, slot) outside what it indexes (internal).
    #[error("{op}: {what} {index} is outside 0..{len}")]
    IndexOutOfRange {
        /// The operation.
        op: &'static str,
        /// What is indexed (`"row"`, `"page"`, `"cache slot"`).
        what: &'static str,
        /// The index.
        index: usize,
        /// How many there are.
        len: usize,
    },
    /// Operands of a backend operation that do not fit together (internal).
    #[error("{op}: {reason}")]
    OperandMismatch {
        /// The operation.
        op: &'static str,
        /// How they disagree.
        reason: String,
    },
    /// A dimension past the u32 a device kernel or a flat plan array takes (internal).
    #[error("{op}: {what} = {value} exceeds u32")]
    ExceedsU32 {
        /// The operation.
        op: &'static str,
        /// The dimension.
        what: &'static str,
        /// Its value.
        value: usize,
    },
    /// A forward plan (attention or recurrent rows, a tree commit) whose parts
    /// disagree (internal: the model's planning or its caller broke an invariant).
    #[error("{op}: {reason}")]
    InvalidPlan {
        /// The plan or step (`"attention rows"`, `"gdn rows"`, `"commit_tree"`).
        op: &'static str,
        /// What does not hold.
        reason: String,
    },
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
/// [`ModelError::ExceedsU32`] naming `op` and `what`.
#[cfg(feature = "cuda")]
pub(crate) fn dim_u32(op: &'static str, what: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| ModelError::ExceedsU32 { op, what, value: v })
}
