//! Continuous batching and the engine handle: requests in flight together get the
//! tokens they get alone, streams deliver them in order, a full queue refuses with a
//! typed error, dropping a stream or the handle cancels, and the pages come back.

#[macro_use]
#[path = "../../../tests/support/mod.rs"]
mod support;

use edge_core::Device;
use edge_model::{ActivationMode, Backend, Cpu, Qwen35Model};
use edge_runtime::{
    Engine, EngineConfig, EngineHandle, Event, GenerateOutput, GenerateRequest, RuntimeError,
    StopReason,
};
use edge_spec::SpecConfig;
use std::path::PathBuf;
use std::sync::Arc;

fn model() -> Arc<Qwen35Model<Cpu>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-f32");
    Arc::new(Qwen35Model::load(&dir, ActivationMode::None).unwrap())
}

fn engine(
    model: &Arc<Qwen35Model<Cpu>>,
    max_sequences: usize,
    spec: Option<SpecConfig>,
) -> Engine<Cpu> {
    let config = EngineConfig {
        max_sequences,
        prefill_chunk: 16,
        speculation: spec,
        ..EngineConfig::default()
    };
    Engine::new(model.clone(), config).unwrap()
}

fn request(seed: u32, len: usize, n: usize) -> GenerateRequest {
    GenerateRequest {
        prompt: (0..len as u32)
            .map(|i| (i * 29 + seed * 7 + 3) % 250)
            .collect(),
        max_new_tokens: n,
        ..GenerateRequest::default()
    }
}

fn requests() -> Vec<GenerateRequest> {
    vec![
        request(1, 40, 20),
        request(2, 5, 12),
        request(3, 70, 25),
        request(4, 1, 8),
        request(5, 33, 0),
    ]
}

/// Every request's output, run through one engine at once.
fn together<B: Backend>(engine: &mut Engine<B>, reqs: &[GenerateRequest]) -> Vec<GenerateOutput> {
    let outs = Arc::new(std::sync::Mutex::new(vec![None; reqs.len()]));
    for (i, r) in reqs.iter().enumerate() {
        let outs = outs.clone();
        let sink = Box::new(move |e: Event| {
            if let Event::Finished(r) = e {
                outs.lock().unwrap()[i] = Some(r.unwrap());
            }
            true
        });
        engine.submit(r.clone(), Some(sink)).unwrap();
    }
    while engine.step() {}
    let outs = outs.lock().unwrap();
    outs.iter().map(|o| o.clone().unwrap()).collect()
}

/// On every device (the bf16 fixture, bf16 activations): requests in flight together,
/// plain and with a token tree, get their tokens alone; a cancelled request ends and
/// every page comes back.
fn batching_and_cancellation(on: Device) {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-bf16-vl");
    let host = Qwen35Model::load(&dir, ActivationMode::Bf16).unwrap();
    on_device!(arc on, host, |model, backend| {
        let engine = |max_sequences: usize, spec: Option<SpecConfig>| {
            let mut config = EngineConfig {
                max_sequences,
                prefill_chunk: 16,
                speculation: spec,
                ..EngineConfig::default()
            };
            config.cache.max_sequences = Some(max_sequences);
            Engine::with_backend(model.clone(), backend(), config).unwrap()
        };
        // Four at once: a cache with a sequence limit (as the CUDA engine's pools need)
        // refuses a fifth submit instead of queueing it.
        let reqs = &requests()[..4];
        for spec in [None, Some(SpecConfig::tree(3, 2, 6))] {
            let alone: Vec<Vec<u32>> = (reqs.iter())
                .map(|r| engine(1, spec).generate(r).unwrap().tokens)
                .collect();
            let mut e = engine(4, spec);
            let outs = together(&mut e, reqs);
            for (i, (o, want)) in outs.iter().zip(&alone).enumerate() {
                assert_eq!(&o.tokens, want, "{on} {spec:?}: request {i}");
            }
            assert_eq!(e.cache().usage().sequences, 0, "every sequence released");
            e.cache().verify_refcounts().unwrap();
        }
        cancel_one_of_three(&mut engine(4, None));
    });
}

edge_core::device_test!(batching_and_cancellation);

#[test]
fn requests_in_flight_together_get_their_tokens_alone() {
    let model = model();
    let reqs = requests();
    for spec in [None, Some(SpecConfig::tree(3, 2, 6))] {
        let alone: Vec<Vec<u32>> = (reqs.iter())
            .map(|r| engine(&model, 1, spec).generate(r).unwrap().tokens)
            .collect();
        let mut e = engine(&model, 4, spec);
        let outs = together(&mut e, &reqs);
        for (i, (o, want)) in outs.iter().zip(&alone).enumerate() {
            assert_eq!(&o.tokens, want, "{spec:?}: request {i}");
        }
        assert_eq!(e.in_flight(), 0);
        assert_eq!(e.cache().usage().sequences, 0, "every sequence released");
        e.cache().verify_refcounts().unwrap();
        assert_eq!(e.stats().requests, reqs.len() as u64);
    }
}

/// A greedy request without logprobs gets its token from the pass's greedy rows (the
/// argmax where the logits are), the others from their logits rows: both give the
/// tokens the full rows give, in one batch.
#[test]
fn greedy_rows_and_logit_rows_choose_the_same_tokens() {
    let model = model();
    let with_logprobs = |r: &GenerateRequest| GenerateRequest {
        logprobs: Some(1),
        ..r.clone()
    };
    let reqs = requests();
    // The reference: every request alone, its token sampled from full logits rows.
    let want: Vec<Vec<u32>> = (reqs.iter())
        .map(|r| {
            engine(&model, 1, None)
                .generate(&with_logprobs(r))
                .unwrap()
                .tokens
        })
        .collect();
    // Together, every other request on the greedy rows.
    let mixed: Vec<GenerateRequest> = (reqs.iter().enumerate())
        .map(|(i, r)| {
            if i % 2 == 0 {
                r.clone()
            } else {
                with_logprobs(r)
            }
        })
        .collect();
    let outs = together(&mut engine(&model, 4, None), &mixed);
    for (i, (o, want)) in outs.iter().zip(&want).enumerate() {
        assert_eq!(&o.tokens, want, "request {i}");
        let logprobs = o.logprobs.as_ref().map_or(0, Vec::len);
        assert_eq!(
            logprobs,
            if i % 2 == 0 { 0 } else { o.tokens.len() },
            "request {i}"
        );
    }
}

/// A sampled request limited by `top_k` gets its token from the pass's top rows (the
/// `top_k` most likely tokens) and draws what the full rows give it, seed for seed.
#[test]
fn top_rows_sample_what_full_rows_sample() {
    let model = model();
    let sampled = |r: &GenerateRequest, seed: u64, logprobs: Option<usize>| GenerateRequest {
        sampling: edge_spec::SamplingParams {
            temperature: 0.9,
            top_k: 20,
            top_p: 0.95,
            seed,
            ..Default::default()
        },
        logprobs,
        ..r.clone()
    };
    let reqs = requests();
    let want: Vec<Vec<u32>> = (reqs.iter().enumerate())
        .map(|(i, r)| {
            let full = sampled(r, i as u64, Some(1));
            engine(&model, 1, None).generate(&full).unwrap().tokens
        })
        .collect();
    let reduced: Vec<GenerateRequest> = (reqs.iter().enumerate())
        .map(|(i, r)| sampled(r, i as u64, None))
        .collect();
    let outs = together(&mut engine(&model, 4, None), &reduced);
    for (i, (o, want)) in outs.iter().zip(&want).enumerate() {
        assert_eq!(&o.tokens, want, "request {i}");
    }
}

#[test]
fn cancelling_ends_a_request_and_frees_its_pages() {
    cancel_one_of_three(&mut engine(&model(), 4, None));
}

/// Three requests in flight, the first cancelled after two steps: it ends, the others
/// finish, and every page comes back.
fn cancel_one_of_three<B: Backend>(e: &mut Engine<B>) {
    let ids: Vec<_> = (requests().into_iter().take(3))
        .map(|r| e.submit(r, None).unwrap())
        .collect();
    e.step();
    e.step();
    e.cancel(ids[0]);
    assert_eq!(e.in_flight(), 2);
    while e.step() {}
    assert_eq!(e.cache().usage().sequences, 0);
    e.cache().verify_refcounts().unwrap();
}

#[test]
fn the_handle_streams_queues_refuses_and_shuts_down() {
    let model = model();
    let handle = EngineHandle::spawn(engine(&model, 1, None), 1).unwrap();
    // Streams from several threads at once, each in order and whole.
    let want: Vec<Vec<u32>> = (requests().iter())
        .map(|r| engine(&model, 1, None).generate(r).unwrap().tokens)
        .collect();
    let handle = Arc::new(handle);
    let threads: Vec<_> = (requests().into_iter().enumerate())
        .map(|(i, r)| {
            let h = handle.clone();
            std::thread::spawn(move || {
                let stream = loop {
                    match h.submit(r.clone()) {
                        Ok(s) => break s,
                        Err(RuntimeError::QueueFull { .. }) => {
                            std::thread::sleep(std::time::Duration::from_millis(2))
                        }
                        Err(e) => panic!("{e}"),
                    }
                };
                let mut tokens = Vec::new();
                let mut finished = None;
                for event in stream {
                    match event {
                        Event::Token { id, .. } => tokens.push(id),
                        Event::Finished(out) => finished = Some(out.unwrap()),
                        Event::Alive => unreachable!("the stream skips liveness probes"),
                    }
                }
                let out = finished.expect("a stream ends with Finished");
                assert_eq!(out.tokens, tokens, "request {i}: streamed = final");
                (i, tokens)
            })
        })
        .collect();
    for t in threads {
        let (i, tokens) = t.join().unwrap();
        assert_eq!(tokens, want[i], "request {i}");
    }
    // One request in flight, one queued: a third is refused with a typed error.
    let mut long = request(9, 10, 400);
    long.max_new_tokens = 400;
    let mut first = handle.submit(long.clone()).unwrap();
    assert!(
        matches!(first.next(), Some(Event::Token { .. })),
        "admitted"
    );
    let queued = handle.submit(long.clone()).unwrap();
    let refused = handle.submit(long.clone()).unwrap_err();
    assert!(
        matches!(refused, RuntimeError::QueueFull { capacity: 1 }),
        "{refused}"
    );
    // Dropping a stream cancels its request; the queued one then runs.
    drop(first);
    let mut queued = queued;
    assert!(matches!(queued.next(), Some(Event::Token { .. })));
    let status = handle.status().unwrap();
    assert_eq!(status.in_flight, 1);
    assert!(status.refcounts_ok);
    // Shutting down cancels what is in flight.
    let handle = Arc::try_unwrap(handle).unwrap();
    drop(handle);
    let last = queued.last().unwrap();
    match last {
        Event::Finished(Ok(out)) => assert_eq!(out.stop, StopReason::Cancelled),
        other => panic!("{other:?}"),
    }
}

/// The builder's defaults (fastest activations, prefix reuse, speculation as measured
/// fastest), its setters, and its typed errors.
#[test]
fn the_builder_has_a_users_defaults_and_typed_errors() {
    use edge_runtime::EngineBuilder;
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-f32");
    let e = EngineBuilder::new(&dir).build().unwrap();
    let c = e.config();
    assert!(c.cache.prefix_cache);
    assert_eq!(c.max_sequences, EngineConfig::default().max_sequences);
    assert!(
        c.speculation.is_none(),
        "a cache-resident model decodes token by token"
    );
    let spec = SpecConfig::tree(3, 2, 6);
    let e = EngineBuilder::new(&dir)
        .speculation(Some(spec))
        .max_sequences(2)
        .prefix_cache(false)
        .build()
        .unwrap();
    assert_eq!(e.config().speculation, Some(spec));
    assert_eq!(e.config().max_sequences, 2);
    assert!(!e.config().cache.prefix_cache);
    let err = EngineBuilder::new(&dir)
        .device(edge_core::Device::Cuda(0))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("cuda"), "{err}");
    if !cfg!(feature = "cuda") {
        let err = EngineBuilder::new(&dir)
            .device(edge_core::Device::Cuda(0))
            .spawn()
            .unwrap_err();
        assert!(err.to_string().contains("`cuda` feature"), "{err}");
    }
    assert!(matches!(
        EngineBuilder::new("/nonexistent-model").build(),
        Err(edge_runtime::RuntimeError::Model(_))
    ));
    let handle = EngineBuilder::new(&dir).queue(2).spawn().unwrap();
    let events: Vec<Event> = handle.submit(request(1, 8, 4)).unwrap().collect();
    assert!(matches!(events.last(), Some(Event::Finished(Ok(_)))));
}

/// A caller that leaves during a long prefill is noticed at the next chunk's liveness
/// probe: the request ends there (cancelled, its sequence released) instead of
/// prefilling the rest, so the prefix cache holds only what ran.
#[test]
fn a_prefill_whose_caller_left_stops_within_a_chunk() {
    let model = model();
    let mut e = engine(&model, 1, None);
    let prompt = request(6, 400, 4);
    let probes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = probes.clone();
    // Gone after the first chunk's probe.
    let sink = Box::new(move |event: Event| match event {
        Event::Alive => seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0,
        _ => false,
    });
    e.submit(prompt.clone(), Some(sink)).unwrap();
    let mut steps = 0;
    while e.step() {
        steps += 1;
    }
    assert_eq!(probes.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert!(steps <= 3, "{steps} steps for a prompt of 25 chunks");
    assert_eq!(e.cache().usage().sequences, 0);
    e.cache().verify_refcounts().unwrap();
    // Only the first two chunks reached the cache.
    let again = e.generate(&prompt).unwrap();
    assert!(again.cached_tokens <= 32, "{} cached", again.cached_tokens);
}
