use crate::{CoreError, Result};
use std::ops::{Deref, Range};
use std::sync::Arc;

/// A cheaply clonable, immutable byte slice that is either owned or borrowed from a
/// shared backing store such as a memory-mapped checkpoint file.
///
/// Weights keep pointing into the mapping instead of being copied; a clone or a
/// sub-slice only bumps a reference count.
#[derive(Clone)]
pub struct Bytes {
    backing: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl Bytes {
    /// Takes ownership of a vector.
    pub fn from_vec(v: Vec<u8>) -> Self {
        let len = v.len();
        Bytes {
            backing: Arc::new(v),
            start: 0,
            len,
        }
    }

    /// A view of `range` within a shared backing store (e.g. `Arc<memmap2::Mmap>`).
    pub fn from_shared<B>(backing: Arc<B>, range: Range<usize>) -> Result<Self>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        let total = (*backing).as_ref().len();
        check_range(&range, total)?;
        Ok(Bytes {
            backing,
            start: range.start,
            len: range.end - range.start,
        })
    }

    /// A sub-slice sharing the same backing store.
    pub fn slice(&self, range: Range<usize>) -> Result<Self> {
        check_range(&range, self.len)?;
        Ok(Bytes {
            backing: self.backing.clone(),
            start: self.start + range.start,
            len: range.end - range.start,
        })
    }
}

fn check_range(range: &Range<usize>, total: usize) -> Result<()> {
    if range.start <= range.end && range.end <= total {
        Ok(())
    } else {
        Err(CoreError::InvalidShape {
            shape: vec![range.start, range.end, total],
            reason: "byte range [start, end) lies outside the backing store of the given size",
        })
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &(*self.backing).as_ref()[self.start..self.start + self.len]
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes::from_vec(v)
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_backing() {
        let b = Bytes::from_vec((0u8..10).collect());
        let s = b.slice(2..6).unwrap();
        assert_eq!(&*s, &[2, 3, 4, 5]);
        assert_eq!(&*s.slice(1..3).unwrap(), &[3, 4]);
        assert!(matches!(
            s.slice(3..5),
            Err(crate::CoreError::InvalidShape { .. })
        ));
        let shared = Arc::new(vec![9u8; 4]);
        assert_eq!(&*Bytes::from_shared(shared.clone(), 1..3).unwrap(), &[9, 9]);
        assert!(matches!(
            Bytes::from_shared(shared, 3..9),
            Err(crate::CoreError::InvalidShape { .. })
        ));
    }
}
