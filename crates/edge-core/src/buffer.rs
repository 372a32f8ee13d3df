use crate::{Bytes, CoreError, DType, Result, Shape};
use half::{bf16, f16};

/// A host-side tensor: raw little-endian bytes (owned or memory-mapped) with a dtype and a shape.
///
/// The byte length always equals `dtype.storage_bytes(shape.elements())`; the
/// constructors check it. Decoding of the 8-bit and 4-bit float formats lives in
/// `edge-quant`, which knows their scales; this type only converts the formats that
/// need no scale.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBuffer {
    dtype: DType,
    shape: Shape,
    bytes: Bytes,
}

impl HostBuffer {
    /// Wraps raw bytes, checking their length against the dtype and shape.
    pub fn from_bytes(dtype: DType, shape: Shape, bytes: impl Into<Bytes>) -> Result<Self> {
        let bytes = bytes.into();
        let expected =
            dtype
                .storage_bytes(shape.elements())
                .ok_or_else(|| CoreError::InvalidShape {
                    shape: shape.dims().to_vec(),
                    reason: "byte size overflows usize",
                })?;
        if bytes.len() != expected {
            return Err(CoreError::BufferSize {
                dtype,
                shape: shape.dims().to_vec(),
                expected,
                got: bytes.len(),
            });
        }
        Ok(HostBuffer {
            dtype,
            shape,
            bytes,
        })
    }

    /// An f32 buffer from values.
    pub fn from_f32(shape: Shape, values: &[f32]) -> Result<Self> {
        Self::from_bytes(DType::F32, shape, bytemuck::cast_slice(values).to_vec())
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The shared byte storage (cheap to clone).
    pub fn storage(&self) -> &Bytes {
        &self.bytes
    }

    /// Decodes F32, BF16 or F16 elements to f32 values (exact for all three).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>> {
        decode_to_f32(self.dtype, &self.bytes).ok_or(CoreError::UnsupportedDType {
            op: "HostBuffer::to_f32_vec",
            dtype: self.dtype,
        })
    }
}

/// Decodes little-endian F32, BF16 or F16 bytes to f32; `None` for other dtypes.
/// Works on unaligned bytes (memory-mapped checkpoints give no alignment promise).
pub fn decode_to_f32(dtype: DType, bytes: &[u8]) -> Option<Vec<f32>> {
    Some(match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::BF16 => bytes
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_length() {
        let shape = Shape::new([2, 3]).unwrap();
        assert!(HostBuffer::from_bytes(DType::BF16, shape.clone(), vec![0; 12]).is_ok());
        let err = HostBuffer::from_bytes(DType::BF16, shape.clone(), vec![0; 11]).unwrap_err();
        assert!(err.to_string().contains("12 bytes"), "{err}");
        assert!(HostBuffer::from_bytes(DType::Nvfp4, shape, vec![0; 3]).is_ok());
    }

    #[test]
    fn decodes_half_formats_exactly() {
        let values = [1.0f32, -2.5, 0.0, 65504.0];
        let bf: Vec<u8> = values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect();
        let buf = HostBuffer::from_bytes(DType::BF16, Shape::new([4]).unwrap(), bf).unwrap();
        assert_eq!(buf.to_f32_vec().unwrap()[..3], values[..3]);
        let f = HostBuffer::from_f32(Shape::new([4]).unwrap(), &values).unwrap();
        assert_eq!(f.to_f32_vec().unwrap(), values);
        let fp8 =
            HostBuffer::from_bytes(DType::F8E4M3, Shape::new([1]).unwrap(), vec![0x38]).unwrap();
        assert!(matches!(
            fp8.to_f32_vec(),
            Err(crate::CoreError::UnsupportedDType { .. })
        ));
    }
}
