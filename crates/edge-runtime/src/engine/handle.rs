//! [`EngineHandle`]: an engine on its own thread behind a bounded queue, shared by any
//! number of callers (`Send + Sync`). Each request comes back as a stream of events;
//! dropping the stream cancels the request and frees its pages.

use super::Engine;
use super::active::{Event, EventSink, RequestId};
use super::request::{EngineStats, GenerateRequest};
use crate::{Result, RuntimeError};
use edge_kvcache::CacheUsage;
use edge_model::Backend;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// A request for the engine thread's queue.
struct Submission(GenerateRequest, mpsc::Sender<Event>);

/// What callers ask of the engine thread besides requests (answered between steps,
/// whether or not the queue has room).
enum Control {
    Status(mpsc::Sender<EngineStatus>),
    Shutdown,
}

/// How long an idle engine thread waits on its queue before looking at its controls.
const IDLE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// A snapshot of a running engine (for health checks and metrics).
#[derive(Clone, Debug)]
pub struct EngineStatus {
    /// Requests decoding or prefilling.
    pub in_flight: usize,
    /// Totals over the requests served.
    pub stats: EngineStats,
    /// The cache's bytes and pages by kind.
    pub cache: CacheUsage,
    /// Whether every page's reference count matches its holders.
    pub refcounts_ok: bool,
}

/// An engine running on its own thread.
pub struct EngineHandle {
    commands: SyncSender<Submission>,
    control: mpsc::Sender<Control>,
    capacity: usize,
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
        self.events.recv().ok()
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
        let (commands, inbox) = mpsc::sync_channel(capacity);
        let (control, controls) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("edge-engine".into())
            .spawn(move || run(engine, inbox, controls))
            .map_err(|e| RuntimeError::Internal(format!("cannot start the engine thread: {e}")))?;
        Ok(EngineHandle {
            commands,
            control,
            capacity,
            thread: Some(thread),
        })
    }

    /// Queues a request; its events arrive on the returned stream as the engine runs
    /// it. A malformed request, or one the cache cannot hold, ends with an error event.
    pub fn submit(&self, req: GenerateRequest) -> Result<RequestStream> {
        let (tx, rx) = mpsc::channel();
        match self.commands.try_send(Submission(req, tx)) {
            Ok(()) => Ok(RequestStream { events: rx }),
            Err(TrySendError::Full(_)) => Err(RuntimeError::QueueFull {
                capacity: self.capacity,
            }),
            Err(TrySendError::Disconnected(_)) => Err(RuntimeError::ShutDown),
        }
    }
}

impl EngineHandle {
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

/// The engine thread: answer controls, admit queued requests while there is room, step
/// while there is work, wait on the queue when idle.
fn run<B: Backend>(
    mut engine: Engine<B>,
    inbox: Receiver<Submission>,
    controls: Receiver<Control>,
) {
    let mut next: Option<Submission> = None;
    loop {
        while let Ok(control) = controls.try_recv() {
            match control {
                Control::Status(reply) => {
                    let _ = reply.send(EngineStatus {
                        in_flight: engine.in_flight(),
                        stats: engine.stats(),
                        cache: engine.cache().usage(),
                        refcounts_ok: engine.cache().verify_refcounts().is_ok(),
                    });
                }
                Control::Shutdown => return shut_down(engine, inbox, next),
            }
        }
        if next.is_none() && engine.in_flight() == 0 {
            match inbox.recv_timeout(IDLE_POLL) {
                Ok(s) => next = Some(s),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        while engine.has_room() {
            let Some(Submission(req, events)) = next.take().or_else(|| inbox.try_recv().ok())
            else {
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
fn shut_down<B: Backend>(
    mut engine: Engine<B>,
    inbox: Receiver<Submission>,
    next: Option<Submission>,
) {
    let ids: Vec<RequestId> = engine.active.iter().map(|a| a.id).collect();
    for id in ids {
        engine.cancel(id);
    }
    for Submission(_, events) in next.into_iter().chain(inbox.try_iter()) {
        let _ = events.send(Event::Finished(Err(RuntimeError::ShutDown)));
    }
}
