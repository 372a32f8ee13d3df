//! Partial rotary embedding, NeoX (rotate-half) style, on the first `rotary_dim`
//! channels of each head (spec §5.3).

/// Precomputed inverse frequencies for one rotary width.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
}

impl Rope {
    /// `inv_freq_i = 1 / θ^(2i / rotary_dim)`, computed in f32 as HF does.
    pub fn new(rotary_dim: usize, theta: f32) -> Self {
        let inv_freq = (0..rotary_dim / 2)
            .map(|i| 1.0 / theta.powf((2 * i) as f32 / rotary_dim as f32))
            .collect();
        Rope { inv_freq }
    }

    /// The inverse frequencies, one per rotated pair (what a device kernel uploads).
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Rotated channels per head.
    pub fn rotary_dim(&self) -> usize {
        2 * self.inv_freq.len()
    }

    /// Rotates every `head_dim`-wide head in `x` (one token) for position `pos`.
    pub fn apply(&self, x: &mut [f32], head_dim: usize, pos: usize) {
        let half = self.inv_freq.len();
        let (cos, sin): (Vec<f32>, Vec<f32>) = self
            .inv_freq
            .iter()
            .map(|&f| {
                let angle = pos as f32 * f;
                (angle.cos(), angle.sin())
            })
            .unzip();
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (x1, x2) = (head[i], head[i + half]);
                head[i] = x1 * cos[i] - x2 * sin[i];
                head[i + half] = x2 * cos[i] + x1 * sin[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_identity_and_tail_untouched() {
        let rope = Rope::new(4, 10000.0);
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        rope.apply(&mut x, 6, 0);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        rope.apply(&mut x, 6, 7);
        assert_eq!(&x[4..], &[5.0, 6.0]);
        // Rotation preserves the norm of each rotated pair.
        let n0 = 1.0f32 + 9.0;
        assert!((x[0] * x[0] + x[2] * x[2] - n0).abs() < 1e-4);
    }

    #[test]
    fn relative_positions_give_equal_dot_products() {
        let rope = Rope::new(8, 100.0);
        let q0: Vec<f32> = (0..8).map(|i| (i as f32).sin()).collect();
        let k0: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).cos()).collect();
        let dot_at = |pq: usize, pk: usize| {
            let (mut q, mut k) = (q0.clone(), k0.clone());
            rope.apply(&mut q, 8, pq);
            rope.apply(&mut k, 8, pk);
            q.iter().zip(&k).map(|(a, b)| a * b).sum::<f32>()
        };
        assert!((dot_at(5, 2) - dot_at(13, 10)).abs() < 1e-4);
    }
}
