use crate::CoreError;

/// Element types edge-llm stores or computes with.
///
/// `Nvfp4` is the packed E2M1 format: two 4-bit codes per byte, the even element in the
/// low nibble. Its block scales and global scale live beside the codes (see
/// `edge-quant`); the dtype only describes the code storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// bfloat16.
    BF16,
    /// IEEE-754 binary16.
    F16,
    /// FP8 E4M3 "fn" (OCP E4M3: no infinities, max 448).
    F8E4M3,
    /// FP8 E5M2 (IEEE-like, with infinities).
    F8E5M2,
    /// Packed NVFP4 (E2M1) codes, two per byte.
    Nvfp4,
    /// Unsigned bytes.
    U8,
    /// 32-bit signed integers (token ids, indices).
    I32,
    /// 64-bit signed integers (token ids as PyTorch writes them).
    I64,
}

impl DType {
    /// All dtypes, for exhaustive tests and listings.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::Nvfp4,
        DType::U8,
        DType::I32,
        DType::I64,
    ];

    /// Storage bits per element (4 for NVFP4).
    pub const fn bits(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 32,
            DType::BF16 | DType::F16 => 16,
            DType::F8E4M3 | DType::F8E5M2 | DType::U8 => 8,
            DType::Nvfp4 => 4,
            DType::I64 => 64,
        }
    }

    /// Bytes needed to store `elements` elements, or `None` on overflow.
    /// NVFP4 rounds an odd count up to a whole byte.
    pub fn storage_bytes(self, elements: usize) -> Option<usize> {
        elements
            .checked_mul(self.bits())
            .map(|bits| bits.div_ceil(8))
    }

    /// True for the floating-point formats (including the packed and 8-bit ones).
    pub const fn is_float(self) -> bool {
        !matches!(self, DType::U8 | DType::I32 | DType::I64)
    }

    /// The name safetensors uses for this dtype, where it has one.
    /// NVFP4 codes are stored as `U8` in checkpoints, so it has none.
    pub const fn safetensors_name(self) -> Option<&'static str> {
        Some(match self {
            DType::F32 => "F32",
            DType::BF16 => "BF16",
            DType::F16 => "F16",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E5M2 => "F8_E5M2",
            DType::U8 => "U8",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::Nvfp4 => return None,
        })
    }

    /// Parses a safetensors dtype name (`F32`, `BF16`, `F8_E4M3`, ...).
    pub fn from_safetensors_name(name: &str) -> Result<Self, CoreError> {
        DType::ALL
            .into_iter()
            .find(|d| d.safetensors_name() == Some(name))
            .ok_or_else(|| CoreError::UnknownDType(name.to_string()))
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::Nvfp4 => "nvfp4",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
        };
        f.write_str(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_sizes() {
        assert_eq!(DType::Nvfp4.storage_bytes(32), Some(16));
        assert_eq!(DType::Nvfp4.storage_bytes(3), Some(2));
        assert_eq!(DType::BF16.storage_bytes(3), Some(6));
        assert_eq!(DType::F32.storage_bytes(usize::MAX), None);
    }

    #[test]
    fn safetensors_names_round_trip() {
        for d in DType::ALL {
            if let Some(name) = d.safetensors_name() {
                assert_eq!(DType::from_safetensors_name(name).unwrap(), d);
            }
        }
        assert!(matches!(
            DType::from_safetensors_name("F4"),
            Err(crate::CoreError::UnknownDType(_))
        ));
    }
}
