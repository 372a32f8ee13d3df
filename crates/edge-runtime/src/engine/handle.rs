//! [`EngineHandle`]: an engine on its own thread behind a bounded queue, shared by any
//! number of callers (`Send + Sync`). Each request comes back as a stream of events;
//! dropping the stream cancels the request and frees its pages.

use super::Engine;
use super::active::{Event, EventSink};
use super::request::{EngineStats, GenerateRequest};
use super::schedule::PROBE_INTERVAL;
use crate::{Result, RuntimeError};
use edge_kvcache::{CacheUsage, SequenceCache};
use edge_model::Backend;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A request for the engine thread's queue.
struct Submission(GenerateRequest, mpsc::Sender<Event>);

/// What callers ask of the engine thread besides requests (answered between steps,
/// whether or not the queue has room).
enum Control {
    Status(mpsc::Sender<EngineStatus>),
    Shutdown,
}

/// How long an idle engine thread waits on its queue before looking at its controls.
const IDLE_POLL: Duration = Duration::from_millis(5);

/// A snapshot of a running engine (for health checks and metrics).
#[derive(Clone, Debug)]
pub struct EngineStatus {
    /// Requests decoding, prefilling, or waiting inside the engine for room in the
    /// cache.
    pub in_flight: usize,
    /// Of those, the ones waiting for room (preempted, or placed next).
    pub waiting: usize,
    /// Totals over the requests served.
    pub stats: EngineStats,
    /// The cache's bytes and pages by kind.
    pub cache: CacheUsage,
    /// Bytes of one KV page (a block of tokens across every attention layer), to
    /// count [`EngineStatus::cache`]'s bytes in pages.
    pub page_bytes: usize,
    /// Whether every page's reference count matches its holders.
    pub refcounts_ok: bool,
}

/// An engine running on its own thread.
pub struct EngineHandle {
    commands: Sender<Submission>,
    control: mpsc::Sender<Control>,
    capacity: usize,
    /// [`Engine::max_request_tokens`] of the engine.
    max_request_tokens: usize,
    /// Requests submitted and not yet admitted (in the channel or the thread's queue).
    queued: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// The events of one request, in order, ending with [`Event::Finished`]. Dropping it
/// before then cancels the request.
#[derive(Debug)]
pub struct RequestStream {
    events: Receiver<Event>,
}

impl Iterator for RequestStream {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        loop {
            match self.events.recv().ok()? {
                Event::Alive => continue,
                e => return Some(e),
            }
        }
    }
}

/// What [`RequestStream::poll`] found.
#[derive(Debug)]
pub enum Polled {
    /// The request's next event.
    Event(Event),
    /// Nothing yet (the request is queued, prefilling or between tokens).
    Pending,
    /// The stream has ended.
    Ended,
}

impl RequestStream {
    /// The next event, or [`Polled::Pending`] once `wait` has passed without one (or
    /// when the engine only checked that the stream is still wanted): a caller that
    /// serves a client can then see whether the client is still there, and drop the
    /// stream (which cancels the request) if not.
    pub fn poll(&mut self, wait: Duration) -> Polled {
        match self.events.recv_timeout(wait) {
            Ok(Event::Alive) | Err(mpsc::RecvTimeoutError::Timeout) => Polled::Pending,
            Ok(e) => Polled::Event(e),
            Err(mpsc::RecvTimeoutError::Disconnected) => Polled::Ended,
        }
    }
}

impl EngineHandle {
    /// Starts `engine` on a thread. Up to `queue` submitted requests wait while the
    /// engine has [`super::EngineConfig::max_sequences`] in flight; more are refused
    /// with [`RuntimeError::QueueFull`].
    pub fn spawn<B>(engine: Engine<B>, queue: usize) -> Result<Self>
    where
        B: Backend + 'static,
        Engine<B>: Send,
    {
        let capacity = queue.max(1);
        let max_request_tokens = engine.max_request_tokens();
        let (commands, inbox) = mpsc::channel();
        let (control, controls) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let waiting = Waiting {
            inbox,
            queue: VecDeque::new(),
            count: queued.clone(),
            probed: Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name("edge-engine".into())
            .spawn(move || run(engine, waiting, controls))
            .map_err(|e| RuntimeError::Internal(format!("cannot start the engine thread: {e}")))?;
        Ok(EngineHandle {
            commands,
            control,
            capacity,
            max_request_tokens,
            queued,
            thread: Some(thread),
        })
    }

    /// Queues a request; its events arrive on the returned stream as the engine runs
    /// it. A malformed request, or one the cache cannot hold, ends with an error event.
    pub fn submit(&self, req: GenerateRequest) -> Result<RequestStream> {
        // Take a queue slot, or refuse: the count covers the channel and the thread's
        // own queue, so slots of callers that left come back when the thread drops
        // their requests.
        let taken = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(RuntimeError::QueueFull {
                capacity: self.capacity,
            });
        }
        let (tx, rx) = mpsc::channel();
        match self.commands.send(Submission(req, tx)) {
            Ok(()) => Ok(RequestStream { events: rx }),
            Err(_) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                Err(RuntimeError::ShutDown)
            }
        }
    }
}

impl EngineHandle {
    /// The most tokens (prompt and generated) one request can hold
    /// ([`Engine::max_request_tokens`]).
    pub fn max_request_tokens(&self) -> usize {
        self.max_request_tokens
    }

    /// Requests submitted and not yet admitted (of at most the queue's capacity).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// The most requests that may be queued ([`EngineHandle::queued`]); one more is
    /// refused with [`RuntimeError::QueueFull`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the engine thread is still running (it stops when the handle drops, or
    /// if it panicked): without it every request would fail.
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The engine's state, answered between steps (it waits for the current step).
    pub fn status(&self) -> Result<EngineStatus> {
        let (tx, rx) = mpsc::channel();
        self.control
            .send(Control::Status(tx))
            .map_err(|_| RuntimeError::ShutDown)?;
        rx.recv().map_err(|_| RuntimeError::ShutDown)
    }
}

impl Drop for EngineHandle {
    /// Stops the engine: requests in flight are cancelled, queued ones refused.
    fn drop(&mut self) {
        let _ = self.control.send(Control::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The requests waiting for room, in order: the channel's, moved into the thread's
/// own queue, where the ones whose callers left can be found and dropped.
struct Waiting {
    inbox: Receiver<Submission>,
    queue: VecDeque<Submission>,
    /// Shared with the handle: submitted, not yet admitted or dropped.
    count: Arc<AtomicUsize>,
    probed: Instant,
}

impl Waiting {
    /// Moves what the channel holds into the queue; `false` once every handle is gone
    /// and nothing waits.
    fn gather(&mut self, wait: Option<Duration>) -> bool {
        if let Some(wait) = wait.filter(|_| self.queue.is_empty()) {
            match self.inbox.recv_timeout(wait) {
                Ok(s) => self.queue.push_back(s),
                Err(mpsc::RecvTimeoutError::Timeout) => return true,
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        self.queue.extend(self.inbox.try_iter());
        true
    }

    /// The next request to admit.
    fn pop(&mut self) -> Option<Submission> {
        let s = self.queue.pop_front()?;
        self.count.fetch_sub(1, Ordering::AcqRel);
        Some(s)
    }

    /// Drops the queued requests whose callers left (at most every [`PROBE_INTERVAL`]).
    fn probe(&mut self) {
        if self.probed.elapsed() < PROBE_INTERVAL || self.queue.is_empty() {
            return;
        }
        self.probed = Instant::now();
        let before = self.queue.len();
        self.queue
            .retain(|Submission(_, events)| events.send(Event::Alive).is_ok());
        self.count
            .fetch_sub(before - self.queue.len(), Ordering::AcqRel);
    }
}

/// The engine thread: answer controls, admit queued requests while there is room, step
/// while there is work, wait on the queue when idle.
fn run<B: Backend>(mut engine: Engine<B>, mut waiting: Waiting, controls: Receiver<Control>) {
    loop {
        while let Ok(control) = controls.try_recv() {
            match control {
                Control::Status(reply) => {
                    let _ = reply.send(EngineStatus {
                        in_flight: engine.in_flight(),
                        waiting: engine.waiting(),
                        stats: engine.stats(),
                        cache: engine.cache().usage(),
                        page_bytes: engine.cache().spec().block_bytes(),
                        refcounts_ok: engine.cache().verify_refcounts().is_ok(),
                    });
                }
                Control::Shutdown => return shut_down(engine, waiting),
            }
        }
        let idle = engine.in_flight() == 0;
        if !waiting.gather(idle.then_some(IDLE_POLL)) {
            return;
        }
        if idle && waiting.queue.is_empty() {
            continue;
        }
        waiting.probe();
        while engine.has_room() {
            let Some(Submission(req, events)) = waiting.pop() else {
                break;
            };
            let sink_events = events.clone();
            let sink: EventSink = Box::new(move |e| sink_events.send(e).is_ok());
            if let Err(e) = engine.submit(req, Some(sink)) {
                let _ = events.send(Event::Finished(Err(e)));
            }
        }
        engine.step();
    }
}

/// Cancels what is in flight and refuses what is queued.
fn shut_down<B: Backend>(mut engine: Engine<B>, mut waiting: Waiting) {
    engine.refuse_waiting(|| RuntimeError::ShutDown);
    engine.cancel_all();
    waiting.gather(None);
    while let Some(Submission(_, events)) = waiting.pop() {
        let _ = events.send(Event::Finished(Err(RuntimeError::ShutDown)));
    }
}
