//! Greedy chain speculation with the MTP head.

use crate::{Result, SpecError};
use edge_model::{LayerState, Logits, Qwen35Model};
use std::time::Instant;

/// Speculation settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecConfig {
    /// Tokens drafted per target forward (`k`).
    pub draft_tokens: usize,
}

impl Default for SpecConfig {
    fn default() -> Self {
        SpecConfig { draft_tokens: 3 }
    }
}

/// Counters of one speculative generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Target verification forwards (the prompt prefill is not counted).
    pub verify_forwards: usize,
    /// Extra target forwards re-running an accepted prefix after a rejection (rollback).
    pub recompute_forwards: usize,
    /// Draft tokens proposed.
    pub drafted: usize,
    /// Draft tokens accepted.
    pub accepted: usize,
}

impl SpecStats {
    /// Tokens emitted per verification forward (each emits the accepted drafts plus
    /// one token of its own).
    pub fn tokens_per_verify(&self) -> f64 {
        if self.verify_forwards == 0 {
            0.0
        } else {
            (self.accepted + self.verify_forwards) as f64 / self.verify_forwards as f64
        }
    }
}

/// The result of [`generate_greedy`].
#[derive(Clone, Debug)]
pub struct SpecOutput {
    /// Generated tokens (identical to plain greedy decoding).
    pub tokens: Vec<u32>,
    /// Counters.
    pub stats: SpecStats,
    /// Prompt forward wall time, ms.
    pub prefill_ms: f64,
    /// Wall time after the prompt forward, ms.
    pub decode_ms: f64,
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// Greedy generation with MTP chain speculation. The output equals plain greedy
/// decoding's (up to float ties); only the number of target forwards changes.
pub fn generate_greedy(
    model: &Qwen35Model,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_tokens: &[u32],
    cfg: SpecConfig,
) -> Result<SpecOutput> {
    if model.mtp().is_none() {
        return Err(SpecError::InvalidRequest(
            "the model has no MTP head to draft with".into(),
        ));
    }
    if prompt.is_empty() || cfg.draft_tokens == 0 {
        return Err(SpecError::InvalidRequest(
            "need a non-empty prompt and draft_tokens ≥ 1".into(),
        ));
    }
    let vocab = model.config().vocab_size;
    let ctx = model.config().max_position_embeddings;
    let mut stats = SpecStats::default();
    let mut out = Vec::new();
    let t0 = Instant::now();
    let mut state = model.new_state();
    let pre = model.forward(prompt, &mut state, Logits::Last)?;
    let prefill_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    let mut tok = argmax(&pre.logits[..vocab]);
    out.push(tok);

    // MTP first pass over the prompt: row t pairs h_t with token t+1.
    let mut next: Vec<u32> = prompt[1..].to_vec();
    next.push(tok);
    let mut mtp_state = model.new_mtp_state();
    let mut draft = model.mtp_forward(&next, &pre.hidden, &mut mtp_state, Logits::Last)?;
    let h = model.config().hidden_size;

    while out.len() < max_new_tokens && !stop_tokens.contains(&tok) {
        let pos = state.position; // position of `tok`
        let room = ctx.saturating_sub(pos + 1);
        let k = cfg.draft_tokens.min(max_new_tokens - out.len()).min(room);
        // Draft k tokens: the first from the last MTP pass, the rest by chaining.
        let mut drafts = vec![argmax(&draft.logits[..vocab])];
        let mut hid = draft.hidden[draft.hidden.len() - h..].to_vec();
        while drafts.len() < k {
            let last = *drafts.last().unwrap_or(&tok);
            let o = model.mtp_forward(&[last], &hid, &mut mtp_state, Logits::Last)?;
            drafts.push(argmax(&o.logits[..vocab]));
            hid = o.hidden;
        }
        drafts.truncate(k);
        stats.drafted += drafts.len();

        // Verify [tok, d1..dk] in one target forward.
        let checkpoint = state.checkpoint();
        let mut input = vec![tok];
        input.extend_from_slice(&drafts);
        let v = model.forward(&input, &mut state, Logits::All)?;
        stats.verify_forwards += 1;
        let mut accepted = 0;
        while accepted < drafts.len()
            && argmax(&v.logits[accepted * vocab..][..vocab]) == drafts[accepted]
        {
            accepted += 1;
        }
        let bonus = argmax(&v.logits[accepted * vocab..][..vocab]);
        stats.accepted += accepted;
        if accepted < drafts.len() {
            // The GDN state ran past the accepted prefix: roll back and re-run it.
            state.rollback(&checkpoint)?;
            model.forward(&input[..=accepted], &mut state, Logits::Last)?;
            stats.recompute_forwards += 1;
        }
        // Emit accepted drafts, then the target's own token, stopping where asked.
        let mut emitted: Vec<u32> = drafts[..accepted].to_vec();
        emitted.push(bonus);
        for &t in &emitted {
            if out.len() >= max_new_tokens {
                break;
            }
            out.push(t);
            if stop_tokens.contains(&t) {
                break;
            }
        }
        tok = *out.last().unwrap_or(&bonus);
        if out.len() >= max_new_tokens || stop_tokens.contains(&tok) || state.position >= ctx {
            break;
        }
        // Replace the provisional MTP rows with ones from the verified hidden states.
        if let LayerState::Attention(a) = &mut mtp_state {
            a.truncate(pos);
        }
        draft = model.mtp_forward(
            &emitted,
            &v.hidden[..(accepted + 1) * h],
            &mut mtp_state,
            Logits::Last,
        )?;
    }
    Ok(SpecOutput {
        tokens: out,
        stats,
        prefill_ms,
        decode_ms: t1.elapsed().as_secs_f64() * 1e3,
    })
}
