//! Column bands of a row-major matrix: one task writes its own output columns of a
//! `[tokens, out]` result in place, while other tasks write theirs.
//!
//! A prompt GEMM task owns a range of output rows of the weight, which are columns of
//! the `[tokens, out]` result; without bands each task fills a `[rows, tokens]` tile
//! that is transposed afterwards (a zeroed buffer and a pass over it per layer).

use core::marker::PhantomData;
use core::ops::Range;

/// Columns `cols` of a row-major `[rows, width]` f32 matrix, exclusively writable
/// through this value (the other columns may belong to other bands).
pub(crate) struct ColumnBand<'a> {
    ptr: *mut f32,
    rows: usize,
    width: usize,
    cols: Range<usize>,
    _matrix: PhantomData<&'a mut [f32]>,
}

// SAFETY: a band only reaches its own columns, which no other band reaches, so moving
// it to another thread shares nothing.
unsafe impl Send for ColumnBand<'_> {}

impl<'a> ColumnBand<'a> {
    /// Splits `matrix` (`[rows, width]`, `rows = matrix.len() / width`) into bands at
    /// `ranges`, which must be ascending, disjoint and within `width` (panics
    /// otherwise: the callers derive them from their own row tiling).
    pub(crate) fn split(
        matrix: &'a mut [f32],
        width: usize,
        ranges: impl IntoIterator<Item = Range<usize>>,
    ) -> Vec<ColumnBand<'a>> {
        assert!(width > 0 && matrix.len().is_multiple_of(width));
        let rows = matrix.len() / width;
        let ptr = matrix.as_mut_ptr();
        let mut end = 0;
        ranges
            .into_iter()
            .map(|cols| {
                assert!(
                    end <= cols.start && cols.start <= cols.end && cols.end <= width,
                    "column bands must be ordered, disjoint and inside the row"
                );
                end = cols.end;
                ColumnBand {
                    ptr,
                    rows,
                    width,
                    cols,
                    _matrix: PhantomData,
                }
            })
            .collect()
    }

    /// Rows of the matrix.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the band.
    pub(crate) fn width(&self) -> usize {
        self.cols.len()
    }

    /// The band's part of row `r`: `matrix[r·width + cols]`.
    pub(crate) fn row_mut(&mut self, r: usize) -> &mut [f32] {
        assert!(r < self.rows);
        // SAFETY: `split` checked that the columns lie within the row and that no
        // other band of the matrix has them; the matrix is borrowed mutably for 'a,
        // and `&mut self` keeps this slice the band's only live one.
        unsafe {
            let start = self.ptr.add(r * self.width + self.cols.start);
            core::slice::from_raw_parts_mut(start, self.cols.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_write_their_own_columns() {
        let mut m = vec![0.0f32; 3 * 5];
        let mut bands = ColumnBand::split(&mut m, 5, [0..2, 2..2, 2..5]);
        for (b, band) in bands.iter_mut().enumerate() {
            assert_eq!(band.rows(), 3);
            for r in 0..3 {
                for (c, v) in band.row_mut(r).iter_mut().enumerate() {
                    *v = (100 * b + 10 * r + c) as f32;
                }
            }
        }
        drop(bands);
        let want = [
            0., 1., 200., 201., 202., 10., 11., 210., 211., 212., 20., 21., 220., 221., 222.,
        ];
        assert_eq!(m, want);
    }

    #[test]
    #[should_panic(expected = "column bands must be ordered, disjoint and inside the row")]
    fn overlapping_bands_are_refused() {
        let mut m = vec![0.0f32; 8];
        ColumnBand::split(&mut m, 4, [0..3, 2..4]);
    }
}
