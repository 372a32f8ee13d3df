//! The causal depthwise conv (+ SiLU) of the Gated DeltaNet mixer, one channel range
//! at a time: the mixer runs one range per q, k and v head on the team's threads
//! (spec §4.2).

use super::norm::silu;
use super::simd::dispatch;

/// One channel range's share of a conv: where it starts, its carried history and where
/// its output goes.
pub struct ConvRange<'a> {
    /// First channel of the range in the `[tokens, channels]` input.
    pub first: usize,
    /// The range's rows of the carried pre-conv history, oldest first (`kernel − 1`
    /// rows of the range's width); updated in place.
    pub history: Vec<&'a mut [f32]>,
    /// `[tokens, width]`: the conv + SiLU output of the range.
    pub out: &'a mut [f32],
}

/// Conv + SiLU of `tokens` rows of `input` (`[tokens, channels]`) over `range`, with
/// `taps` tap-major (`[kernel, channels]`), continuing from and updating the range's
/// history.
pub fn conv_range(input: &[f32], tokens: usize, taps: &[f32], range: &mut ConvRange<'_>) {
    let channels = input.len() / tokens.max(1);
    let width = range.out.len() / tokens.max(1);
    let dims = (channels, range.first, width);
    let history = &mut range.history;
    let out = &mut *range.out;
    dispatch!(conv_portable, (input: &[f32], tokens: usize, taps: &[f32], dims: (usize, usize, usize), history: &mut [&mut [f32]], out: &mut [f32]) {
        conv_body(input, tokens, taps, dims, history, out)
    })
}

/// [`conv_range`]'s loops, inlined into each [`dispatch!`] variant.
#[inline(always)]
fn conv_body(
    input: &[f32],
    tokens: usize,
    taps: &[f32],
    (channels, first, width): (usize, usize, usize),
    history: &mut [&mut [f32]],
    out: &mut [f32],
) {
    let hist = history.len();
    let kernel = hist + 1;
    for (t, o) in out.chunks_exact_mut(width).enumerate() {
        o.fill(0.0);
        for i in 0..kernel {
            let w = &taps[i * channels + first..][..width];
            // Row t + i of the virtual `[hist + tokens, width]` input: the history,
            // then the new rows.
            let r = t + i;
            let x: &[f32] = match r < hist {
                true => history[r],
                false => &input[(r - hist) * channels + first..][..width],
            };
            for ((oc, &wc), &xc) in o.iter_mut().zip(w).zip(x) {
                *oc += wc * xc;
            }
        }
        o.iter_mut().for_each(|v| *v = silu(*v));
    }
    // The new history is the last `hist` virtual rows; ascending, each row reads a
    // later one, not yet overwritten.
    for i in 0..hist {
        let src = i + tokens;
        if src < hist {
            let (done, rest) = history.split_at_mut(src);
            done[i].copy_from_slice(rest[0]);
        } else {
            history[i].copy_from_slice(&input[(src - hist) * channels + first..][..width]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conv + SiLU of channels `first..first + width` straight from the definition:
    /// zero history, all `rows` at once.
    fn naive(
        input: &[f32],
        channels: usize,
        taps: &[f32],
        kernel: usize,
        first: usize,
        width: usize,
    ) -> Vec<f32> {
        let rows = input.len() / channels;
        let mut out = vec![0.0; rows * width];
        for t in 0..rows {
            for j in 0..width {
                let ch = first + j;
                let mut acc = 0.0;
                for i in 0..kernel {
                    // Tap i meets the input `kernel − 1 − i` rows back.
                    if let Some(r) = (t + i).checked_sub(kernel - 1) {
                        acc += taps[i * channels + ch] * input[r * channels + ch];
                    }
                }
                out[t * width + j] = silu(acc);
            }
        }
        out
    }

    #[test]
    fn pieces_with_carried_history_match_one_pass() {
        let (channels, kernel, first, width) = (24, 4, 8, 10);
        let rows = 15;
        let input: Vec<f32> = (0..rows * channels)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
            .collect();
        let taps: Vec<f32> = (0..kernel * channels)
            .map(|i| ((i * 13 % 17) as f32 - 8.0) / 9.0)
            .collect();
        let want = naive(&input, channels, &taps, kernel, first, width);
        let mut history = vec![vec![0.0f32; width]; kernel - 1];
        let mut got = Vec::new();
        let mut start = 0;
        // Pieces shorter and longer than the history, one token among them.
        for piece in [1, 2, 5, 1, 6] {
            let mut out = vec![0.0; piece * width];
            let mut range = ConvRange {
                first,
                history: history.iter_mut().map(|r| r.as_mut_slice()).collect(),
                out: &mut out,
            };
            conv_range(
                &input[start * channels..(start + piece) * channels],
                piece,
                &taps,
                &mut range,
            );
            got.extend(out);
            start += piece;
        }
        assert_eq!(start, rows);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() < 1e-5, "element {i}: {g} vs {w}");
        }
    }
}
