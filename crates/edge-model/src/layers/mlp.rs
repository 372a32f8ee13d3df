//! SwiGLU MLP: `down(silu(gate(x)) ⊙ up(x))`.

use crate::Result;
use crate::backend::{Backend, Gate, LinearShape};

/// The dense MLP of every layer (and of the MTP block).
#[derive(Debug)]
pub struct Mlp<B: Backend> {
    /// Gate projection `[intermediate, hidden]`.
    pub(crate) gate: B::Linear,
    /// Up projection `[intermediate, hidden]`.
    pub(crate) up: B::Linear,
    /// Down projection `[hidden, intermediate]`.
    pub(crate) down: B::Linear,
}

impl<B: Backend> Mlp<B> {
    /// Applies the MLP to `rows` rows of `x`, writing `out` (`[rows, hidden]`).
    pub fn forward(&self, be: &mut B, x: &B::Buf, rows: usize, out: &mut B::Buf) -> Result<()> {
        let inter = self.gate.out_features();
        let (mut g, mut u) = (be.alloc(rows * inter)?, be.alloc(rows * inter)?);
        be.linear(&[&self.gate, &self.up], x, rows, &mut [&mut g, &mut u])?;
        be.gate(Gate::Silu, &g, &mut u)?;
        be.linear(&[&self.down], &u, rows, &mut [out])?;
        be.free(g);
        be.free(u);
        Ok(())
    }
}
