//! SwiGLU MLP: `down(silu(gate(x)) ⊙ up(x))`.

use super::norm::{Gate, gate_in_place};
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
    /// Applies the MLP to `tokens` rows of `x`, writing `out` (`[tokens, hidden]`).
    pub fn forward(&self, x: &[f32], tokens: usize, out: &mut [f32]) -> Result<()> {
        let inter = self.gate.out_features();
        let mut g = vec![0.0; tokens * inter];
        let mut u = vec![0.0; tokens * inter];
        Linear::forward_shared(&[&self.gate, &self.up], x, tokens, &mut [&mut g, &mut u])?;
        gate_in_place(Gate::Silu, &g, &mut u);
        self.down.forward(&u, tokens, out)?;
        Ok(())
    }
}
