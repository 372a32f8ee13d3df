//! Admission by pages: a request reserves its prompt and a decode allowance, grows as
//! it decodes, and when the budget runs short the newest request is preempted and
//! later resumes by recomputation. Every request completes with the tokens it gets
//! alone; only a request the whole budget could never hold is an error.

use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Cpu, Qwen35Model};
use edge_runtime::{
    Engine, EngineConfig, Event, GenerateOutput, GenerateRequest, RuntimeError, SamplingParams,
};
use edge_spec::SpecConfig;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

fn model() -> Arc<Qwen35Model<Cpu>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-f32");
    Arc::new(Qwen35Model::load(&dir, ActivationMode::None).unwrap())
}

/// An engine whose budget holds `blocks` 4-token pages and 4 state slots, reserving
/// `decode_reserve` tokens for decoding at placement.
fn engine(
    model: &Arc<Qwen35Model<Cpu>>,
    blocks: usize,
    decode_reserve: usize,
    speculation: Option<SpecConfig>,
) -> Engine<Cpu> {
    let mut cache = CacheConfig {
        block_size: 4,
        kv_dtype: KvDType::F32,
        budget_bytes: 0,
        prefix_cache: true,
        max_sequences: None,
    };
    let spec = model.cache_spec(&cache);
    cache.budget_bytes = blocks * spec.block_bytes() + 4 * spec.state_bytes();
    let config = EngineConfig {
        max_sequences: 4,
        cache,
        prefill_chunk: 8,
        decode_reserve,
        speculation,
        ..EngineConfig::default()
    };
    Engine::new(model.clone(), config).unwrap()
}

fn request(seed: u32, len: usize, n: usize, sampling: SamplingParams) -> GenerateRequest {
    GenerateRequest {
        prompt: (0..len as u32)
            .map(|i| (i * 31 + seed * 11 + 5) % 250)
            .collect(),
        max_new_tokens: n,
        sampling,
        ..GenerateRequest::default()
    }
}

/// Runs `reqs` through `e` at once; each output, and the tokens its stream carried.
fn together(e: &mut Engine<Cpu>, reqs: &[GenerateRequest]) -> Vec<(GenerateOutput, Vec<u32>)> {
    let outs = Arc::new(Mutex::new(vec![None; reqs.len()]));
    let streamed = Arc::new(Mutex::new(vec![Vec::new(); reqs.len()]));
    for (i, r) in reqs.iter().enumerate() {
        let (outs, streamed) = (outs.clone(), streamed.clone());
        let sink = Box::new(move |e: Event| {
            match e {
                Event::Token { id, .. } => streamed.lock().unwrap()[i].push(id),
                Event::Finished(r) => outs.lock().unwrap()[i] = Some(r.unwrap()),
                Event::Alive => {}
            }
            true
        });
        e.submit(r.clone(), Some(sink)).unwrap();
    }
    while e.step() {}
    let outs = outs.lock().unwrap();
    let streamed = streamed.lock().unwrap();
    (outs.iter().zip(streamed.iter()))
        .map(|(o, s)| (o.clone().expect("every request finished"), s.clone()))
        .collect()
}

/// Four requests whose prompts fit together but whose generations do not: the newest
/// are preempted as the oldest grow, wait, and resume; each gets the tokens it gets
/// alone (greedy and seeded sampling, plain and speculating), streams each token once,
/// and every page comes back.
#[test]
fn requests_past_the_budget_are_preempted_and_resume_with_their_tokens() {
    let model = model();
    let sampled = SamplingParams {
        temperature: 0.8,
        top_k: 40,
        seed: 9,
        ..SamplingParams::default()
    };
    let reqs: Vec<GenerateRequest> = (0..4)
        .map(|i| {
            let sampling = if i % 2 == 0 {
                SamplingParams::default()
            } else {
                sampled
            };
            request(i, 14 + 3 * i as usize, 36, sampling)
        })
        .collect();
    for spec in [None, Some(SpecConfig::tree(2, 2, 3))] {
        let alone: Vec<Vec<u32>> = (reqs.iter())
            .map(|r| engine(&model, 1000, 256, spec).generate(r).unwrap().tokens)
            .collect();
        // 30 pages: each request alone needs at most 16 (50 + lookahead rows and a
        // copy-on-write page), all four about 50.
        let mut e = engine(&model, 30, 4, spec);
        let outs = together(&mut e, &reqs);
        for (i, ((out, streamed), want)) in outs.iter().zip(&alone).enumerate() {
            assert_eq!(&out.tokens, want, "{spec:?}: request {i}");
            assert_eq!(
                streamed, want,
                "{spec:?}: request {i} streamed each token once"
            );
        }
        assert!(e.stats().preemptions > 0, "{spec:?}: {:?}", e.stats());
        assert_eq!(e.stats().requests, 4);
        assert_eq!((e.in_flight(), e.waiting()), (0, 0));
        assert_eq!(e.cache().usage().sequences, 0, "every sequence released");
        e.cache().verify_refcounts().unwrap();
    }
}

/// A request submitted while the budget is held waits instead of failing, and runs
/// once room comes back; cancelling a waiting request ends it at once.
#[test]
fn a_request_without_room_waits_and_a_waiting_one_can_be_cancelled() {
    let model = model();
    let mut e = engine(&model, 14, 40, None);
    let first = e.submit(request(1, 20, 30, SamplingParams::default()), None);
    let second = e.submit(request(2, 20, 30, SamplingParams::default()), None);
    let third = e.submit(request(3, 20, 30, SamplingParams::default()), None);
    let (_first, second, third) = (first.unwrap(), second.unwrap(), third.unwrap());
    assert_eq!((e.in_flight(), e.waiting()), (3, 2));
    assert!(
        !e.has_room(),
        "a handle keeps later requests in its own queue"
    );
    e.cancel(third);
    assert_eq!((e.in_flight(), e.waiting()), (2, 1));
    let _ = second;
    while e.step() {}
    assert_eq!(e.stats().requests, 3, "the cancelled one counts as served");
    assert_eq!(e.cache().usage().sequences, 0);
    e.cache().verify_refcounts().unwrap();
}

/// Only a request the whole budget could never hold is refused, with a typed error
/// naming the rows; the longest request the engine takes is what the budget holds.
#[test]
fn a_request_larger_than_the_whole_budget_is_a_typed_error() {
    let model = model();
    let mut e = engine(&model, 14, 4, None);
    let max_rows = e.cache().max_rows();
    assert!(
        max_rows < 512,
        "the budget, not the context, limits this engine"
    );
    assert_eq!(e.max_request_tokens(), max_rows);
    let too_long = request(1, 20, max_rows - 19, SamplingParams::default());
    let err = e.submit(too_long, None).unwrap_err();
    assert!(
        matches!(err, RuntimeError::ExceedsCache { rows, max_rows: m } if rows == max_rows + 1 && m == max_rows),
        "{err}"
    );
    assert_eq!(e.in_flight(), 0);
    let fits = request(1, 20, max_rows - 20, SamplingParams::default());
    let out = e.generate(&fits).unwrap();
    assert_eq!(out.tokens.len() + out.prompt_tokens, max_rows);
    let spec = engine(&model, 14, 4, Some(SpecConfig::tree(2, 2, 3)));
    assert!(
        spec.max_request_tokens() < max_rows,
        "the lookahead rows count"
    );
}
