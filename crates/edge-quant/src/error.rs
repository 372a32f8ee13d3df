/// Errors raised by `edge-quant`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuantError {
    /// A dimension the format cannot represent (e.g. NVFP4 columns not divisible by 16).
    #[error("{what} must be a multiple of {multiple}, got {got}")]
    NotMultiple {
        /// Which dimension.
        what: &'static str,
        /// The required multiple.
        multiple: usize,
        /// The value given.
        got: usize,
    },
    /// A buffer whose length does not match the shape it is said to hold.
    #[error("{what}: expected {expected} elements/bytes, got {got}")]
    LengthMismatch {
        /// Which buffer.
        what: &'static str,
        /// The length the shape implies.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// Shapes of two operands disagree.
    #[error("shape mismatch in {op}: {detail}")]
    ShapeMismatch {
        /// The operation.
        op: &'static str,
        /// What disagreed.
        detail: String,
    },
    /// NaN or infinity in data to quantize (ModelOpt's scales would be meaningless).
    #[error("{what} contains a non-finite value ({value}) at index {index}")]
    NonFinite {
        /// Which input.
        what: &'static str,
        /// Flat index of the first offending element.
        index: usize,
        /// The value.
        value: f32,
    },
    /// A scale that is zero, negative, or not finite where a positive one is required.
    #[error("invalid {what}: {value} (must be finite and > 0)")]
    InvalidScale {
        /// Which scale.
        what: &'static str,
        /// The value.
        value: f32,
    },
    /// An operation not available for this weight format or configuration.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An error from the foundation crate (including CUDA errors).
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-quant`.
pub type Result<T> = std::result::Result<T, QuantError>;

/// Returns the first non-finite element of `data`, as an error naming `what`.
pub(crate) fn check_finite(what: &'static str, data: &[f32]) -> Result<()> {
    // A branch-free sweep first (it vectorizes; this runs on every activation row),
    // the position only when something is wrong.
    if data.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return Ok(());
    }
    match data.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(QuantError::NonFinite {
            what,
            index,
            value: data[index],
        }),
        None => Ok(()),
    }
}

/// Checks `got == expected`.
pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(QuantError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}
