//! `bench decode --streams N`: N requests decoding at once through the engine's
//! continuous batching, measured at steady state.

use crate::cli_error::CliError;
use edge_model::Backend;
use edge_runtime::{Engine, Event, GenerateRequest};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Steady-state decode speed of `prompts.len()` concurrent requests of
/// `decode_tokens` tokens each: from the step where every request has its first token
/// to the step where the first one ends, the tokens all of them produced per second.
/// Returns the aggregate rate of each of `runs` runs.
pub fn aggregate_decode<B: Backend>(
    engine: &mut Engine<B>,
    prompts: &[Vec<u32>],
    decode_tokens: usize,
    runs: usize,
) -> Result<Vec<f64>, CliError> {
    let mut rates = Vec::new();
    for _ in 0..runs.max(1) {
        let counts: Vec<Arc<AtomicUsize>> = prompts
            .iter()
            .map(|_| Arc::new(AtomicUsize::new(0)))
            .collect();
        let finished = Arc::new(AtomicUsize::new(0));
        for (p, count) in prompts.iter().zip(&counts) {
            let (count, finished) = (count.clone(), finished.clone());
            let sink = Box::new(move |e: Event| {
                match e {
                    Event::Token { .. } => count.fetch_add(1, Ordering::Relaxed),
                    Event::Finished(_) => finished.fetch_add(1, Ordering::Relaxed),
                    Event::Alive => 0,
                };
                true
            });
            let req = GenerateRequest {
                prompt: p.clone(),
                max_new_tokens: decode_tokens + 1,
                ..GenerateRequest::default()
            };
            engine.submit(req, Some(sink))?;
        }
        let total = || {
            counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<usize>()
        };
        let mut start: Option<(Instant, usize)> = None;
        let mut rate = None;
        while engine.step() {
            if start.is_none() && counts.iter().all(|c| c.load(Ordering::Relaxed) > 0) {
                start = Some((Instant::now(), total()));
            }
            if let Some((t0, n0)) = start
                && rate.is_none()
                && finished.load(Ordering::Relaxed) > 0
            {
                rate = Some((total() - n0) as f64 / t0.elapsed().as_secs_f64());
            }
        }
        rates.push(rate.unwrap_or(0.0));
    }
    Ok(rates)
}
