//! Prefix reuse is exact: random request sequences sharing random prefixes (an
//! extension, a branch at any point, a repeat, a whole-prompt hit), run through an
//! engine with the prefix cache and through one without, give the same tokens and the
//! same logits bit for bit, under a roomy and a tiny budget, for f32, bf16 and FP8
//! pages and with MTP rows in the cache. No page outlives its last user.

#[macro_use]
#[path = "../../../tests/support/mod.rs"]
mod support;

use edge_core::Device;
use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Backend, Cpu, Qwen35Model};
use edge_runtime::{Engine, EngineConfig, GenerateRequest, ReusePolicy, SamplingParams};
use edge_spec::SpecConfig;
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A token that ends a "message": requests mark the position after each one as a
/// reuse point, as the chat path marks message ends, so requests sharing a prefix
/// share its marks.
const END: u32 = 7;

fn model() -> Arc<Qwen35Model<Cpu>> {
    static MODEL: OnceLock<Arc<Qwen35Model<Cpu>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/qwen35-tiny-f32");
            Arc::new(Qwen35Model::load(&dir, ActivationMode::None).unwrap())
        })
        .clone()
}

/// How the next prompt relates to an earlier one.
#[derive(Clone, Debug)]
enum Next {
    /// A fresh prompt.
    Fresh(Vec<u32>),
    /// An earlier prompt again (a whole-prompt hit).
    Repeat(usize),
    /// An earlier prompt, cut to `keep` of its tokens (all of them: a repeat or an
    /// extension), followed by `tail`.
    From {
        earlier: usize,
        keep: usize,
        tail: Vec<u32>,
    },
}

fn tokens(max: usize) -> impl Strategy<Value = Vec<u32>> {
    // Tokens 0..16, END among them often enough to make several messages.
    prop::collection::vec(0u32..16, 0..max)
}

fn next() -> impl Strategy<Value = Next> {
    prop_oneof![
        1 => tokens(40).prop_map(|mut t| { t.push(1); Next::Fresh(t) }),
        1 => any::<usize>().prop_map(Next::Repeat),
        4 => (any::<usize>(), any::<usize>(), tokens(20))
            .prop_map(|(earlier, keep, tail)| Next::From { earlier, keep, tail }),
    ]
}

#[derive(Clone, Debug)]
struct Setup {
    block_size: usize,
    chunk: usize,
    stride: usize,
    dtype: KvDType,
    /// Budget in blocks (a tiny one evicts all the time).
    budget_blocks: usize,
    speculate: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        1..9usize,
        3..20usize,
        0..3usize,
        prop_oneof![
            Just(KvDType::F32),
            Just(KvDType::Bf16),
            Just(KvDType::Fp8E4M3)
        ],
        prop_oneof![Just(10_000usize), 12..40usize],
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(block_size, chunk, stride, dtype, budget_blocks, speculate)| Setup {
                block_size,
                chunk,
                stride,
                dtype,
                budget_blocks,
                speculate,
            },
        )
}

fn engine<B: Backend>(
    model: &Arc<Qwen35Model<B>>,
    backend: B,
    s: &Setup,
    prefix_cache: bool,
) -> Engine<B> {
    let mut cache = CacheConfig {
        block_size: s.block_size,
        kv_dtype: s.dtype,
        budget_bytes: 0,
        prefix_cache,
        // One request at a time (the CUDA memory's pools need a limit).
        max_sequences: Some(1),
    };
    let spec = model.cache_spec(&cache);
    cache.budget_bytes = s.budget_blocks * spec.block_bytes() + 4 * spec.state_bytes() + 4096;
    let config = EngineConfig {
        cache,
        prefill_chunk: s.chunk,
        snapshot_stride: s.stride,
        reuse: ReusePolicy::Exact,
        speculation: s.speculate.then_some(SpecConfig::tree(2, 2, 3)),
        ..EngineConfig::default()
    };
    Engine::with_backend(model.clone(), backend, config).unwrap()
}

fn marks(prompt: &[u32]) -> Vec<usize> {
    (prompt.iter().enumerate())
        .filter(|&(_, &t)| t == END)
        .map(|(i, _)| i + 1)
        .collect()
}

fn run<B: Backend>(
    model: &Arc<Qwen35Model<B>>,
    backend: impl Fn() -> B,
    s: Setup,
    steps: Vec<(Next, usize, u64)>,
) {
    let mut cached = engine(model, backend(), &s, true);
    let mut plain = engine(model, backend(), &s, false);
    let mut prompts: Vec<Vec<u32>> = Vec::new();
    for (next, max_new, seed) in steps {
        let mut prompt = match next {
            Next::Fresh(t) => t,
            Next::From { .. } | Next::Repeat(_) if prompts.is_empty() => vec![1, 2, END, 3],
            Next::Repeat(earlier) => prompts[earlier % prompts.len()].clone(),
            Next::From {
                earlier,
                keep,
                tail,
            } => {
                let base = &prompts[earlier % prompts.len()];
                let mut p = base[..keep % (base.len() + 1)].to_vec();
                p.extend(tail);
                p
            }
        };
        if prompt.is_empty() {
            prompt.push(2);
        }
        let req = GenerateRequest {
            prompt: prompt.clone(),
            reuse_points: marks(&prompt),
            max_new_tokens: max_new,
            sampling: SamplingParams {
                temperature: if s.speculate || seed % 3 != 0 {
                    0.0
                } else {
                    0.8
                },
                seed,
                ..SamplingParams::default()
            },
            record_logits: !s.speculate,
            ..GenerateRequest::default()
        };
        let want = plain.generate(&req).unwrap();
        let got = cached.generate(&req).unwrap();
        assert_eq!(
            got.tokens, want.tokens,
            "{prompt:?}, cached {}",
            got.cached_tokens
        );
        if let (Some(g), Some(w)) = (&got.logits, &want.logits) {
            let first = g
                .iter()
                .zip(w)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(
                first.is_none() && g.len() == w.len(),
                "{prompt:?}, cached {}: logit {first:?} differs",
                got.cached_tokens
            );
        }
        assert_eq!(want.cached_tokens, 0);
        // A prompt seen before in full is served whole from a roomy cache.
        if s.budget_blocks == 10_000 && prompts.contains(&prompt) {
            assert_eq!(got.cached_tokens, prompt.len(), "{prompt:?}");
        }
        cached.cache().verify_refcounts().unwrap();
        let usage = cached.cache().usage();
        assert!(usage.total() <= usage.budget, "{usage:?}");
        assert_eq!(usage.sequences, 0);
        prompts.push(prompt);
    }
    cached.clear_prefix_cache();
    assert_eq!(cached.cache().pages_in_use(), 0, "pages leaked");
    assert_eq!(cached.cache().usage().snapshots, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reuse_gives_exactly_the_uncached_tokens_and_logits(
        s in setup(),
        steps in prop::collection::vec((next(), 1..5usize, any::<u64>()), 1..10),
    ) {
        run(&model(), edge_model::Cpu::new, s, steps);
    }
}

/// The same property on every device, with bf16 activations on the bf16 fixture and
/// fewer cases on the emulated device.
fn reuse_is_exact(on: Device) {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-bf16-vl");
    let host = Qwen35Model::load(&dir, ActivationMode::Bf16).unwrap();
    let cases = if on.is_cpu() { 16 } else { 12 };
    on_device!(arc on, host, |model, backend| {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
        let steps = prop::collection::vec((next(), 1..5usize, any::<u64>()), 1..10);
        runner
            .run(&(setup(), steps), |(s, steps)| {
                run(model, backend, s, steps);
                Ok(())
            })
            .unwrap();
    });
}

edge_core::device_test!(reuse_is_exact);

/// The fixed scenario of an agentic conversation: each turn resends the whole history
/// plus a little new text, marking message ends. All but the new text is cached.
#[test]
fn a_growing_conversation_is_served_from_the_cache() {
    let model = model();
    let s = Setup {
        block_size: 4,
        chunk: 16,
        stride: 0,
        dtype: KvDType::F32,
        budget_blocks: 10_000,
        speculate: false,
    };
    let mut e = engine(&model, edge_model::Cpu::new(), &s, true);
    let mut history: Vec<u32> = vec![1, 5, 9, 2, END];
    let mut total = (0, 0);
    for turn in 0..6u32 {
        history.extend([3 + turn % 5, 11, 12, END]);
        let mut prompt = history.clone();
        // The generation prompt: after the last message, not part of later history.
        prompt.extend([13, 14]);
        let req = GenerateRequest {
            reuse_points: marks(&prompt),
            prompt,
            max_new_tokens: 3,
            ..GenerateRequest::default()
        };
        let out = e.generate(&req).unwrap();
        if turn > 0 {
            // Everything up to the previous turn's last message end is reused.
            assert_eq!(out.cached_tokens, history.len() - 4, "turn {turn}");
        }
        total.0 += out.prompt_tokens;
        total.1 += out.cached_tokens;
    }
    let stats = e.stats();
    assert_eq!(
        (stats.prompt_tokens as usize, stats.cached_tokens as usize),
        total
    );
    assert!(stats.hot_cache_ratio() > 0.6, "{stats:?}");
}

/// The `Longest` policy reuses an earlier prompt's unmarked end too; the result then
/// differs from an uncached run only by f32 summation order.
#[test]
fn longest_reuse_takes_unmarked_prompt_ends_within_tolerance() {
    let model = model();
    let s = Setup {
        block_size: 4,
        chunk: 64,
        stride: 0,
        dtype: KvDType::F32,
        budget_blocks: 10_000,
        speculate: false,
    };
    let first: Vec<u32> = (0..30).map(|i| (i * 5 % 13) as u32).collect();
    let mut second = first.clone();
    second.extend([4, 4, 9, 1]);
    let req = |prompt: &[u32]| GenerateRequest {
        prompt: prompt.to_vec(),
        max_new_tokens: 4,
        record_logits: true,
        ..GenerateRequest::default()
    };
    let mut exact = engine(&model, edge_model::Cpu::new(), &s, true);
    exact.generate(&req(&first)).unwrap();
    assert_eq!(exact.generate(&req(&second)).unwrap().cached_tokens, 0);

    let mut longest = engine(&model, edge_model::Cpu::new(), &s, true);
    let mut config = *longest.config();
    config.reuse = ReusePolicy::Longest;
    longest = Engine::new(model.clone(), config).unwrap();
    longest.generate(&req(&first)).unwrap();
    let got = longest.generate(&req(&second)).unwrap();
    assert_eq!(got.cached_tokens, 30);
    let want = engine(&model, edge_model::Cpu::new(), &s, false)
        .generate(&req(&second))
        .unwrap();
    assert_eq!(got.tokens, want.tokens);
    let (g, w) = (got.logits.unwrap(), want.logits.unwrap());
    let worst = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst < 1e-3, "{worst}");
}
