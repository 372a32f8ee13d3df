//! SwiGLU MLP: `down(silu(gate(x)) ⊙ up(x))`.

use super::norm::{Gate, gate_in_place};
use super::scratch::Scratch;
use crate::Result;
use edge_quant::linear::Linear;

/// The dense MLP of every layer (and of the MTP block).
#[derive(Debug)]
pub struct Mlp {
    /// Gate projection `[intermediate, hidden]`.
    pub gate: Linear,
    /// Up projection `[intermediate, hidden]`.
    pub up: Linear,
    /// Down projection `[hidden, intermediate]`.
    pub down: Linear,
}

impl Mlp {
    /// Applies the MLP to `tokens` rows of `x`, writing `out` (`[tokens, hidden]`),
    /// with its work buffers from `scratch`.
    pub fn forward(
        &self,
        x: &[f32],
        tokens: usize,
        out: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let inter = self.gate.out_features();
        let (mut g, mut u) = (scratch.take(tokens * inter), scratch.take(tokens * inter));
        Linear::forward_shared(&[&self.gate, &self.up], x, tokens, &mut [&mut g, &mut u])?;
        gate_in_place(Gate::Silu, &g, &mut u);
        self.down.forward(&u, tokens, out)?;
        scratch.give_all([g, u]);
        Ok(())
    }
}
