use crate::{CoreError, Result};

/// A row-major tensor shape. Construction checks that the element count fits `usize`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: Vec<usize>,
    elements: usize,
}

impl Shape {
    /// Builds a shape; fails if the element count overflows.
    pub fn new(dims: impl Into<Vec<usize>>) -> Result<Self> {
        let dims = dims.into();
        let elements = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| CoreError::InvalidShape {
                shape: dims.clone(),
                reason: "element count overflows usize",
            })?;
        Ok(Shape { dims, elements })
    }

    /// A scalar (zero-dimensional) shape with one element.
    pub fn scalar() -> Self {
        Shape {
            dims: Vec::new(),
            elements: 1,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Total number of elements.
    pub fn elements(&self) -> usize {
        self.elements
    }

    /// The dimensions as `(rows, cols)` when the shape is 2-D.
    pub fn as_matrix(&self) -> Option<(usize, usize)> {
        match self.dims[..] {
            [r, c] => Some((r, c)),
            _ => None,
        }
    }

    /// Checks that this shape equals `expected`, naming `op` in the error.
    pub fn expect(&self, op: &'static str, expected: &[usize]) -> Result<()> {
        if self.dims == expected {
            Ok(())
        } else {
            Err(CoreError::ShapeMismatch {
                op,
                expected: expected.to_vec(),
                got: self.dims.clone(),
            })
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_checks() {
        let s = Shape::new([3, 4]).unwrap();
        assert_eq!(s.elements(), 12);
        assert_eq!(s.as_matrix(), Some((3, 4)));
        assert!(s.expect("t", &[3, 4]).is_ok());
        assert!(matches!(
            s.expect("t", &[4, 3]),
            Err(crate::CoreError::ShapeMismatch { .. })
        ));
        assert_eq!(Shape::scalar().elements(), 1);
        assert!(matches!(
            Shape::new([usize::MAX, 2]),
            Err(crate::CoreError::InvalidShape { .. })
        ));
    }
}
