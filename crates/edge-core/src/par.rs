//! Data-parallel loops for the CPU path: rayon's pool, or a spinning team for the many
//! short parallel regions of a decode step.
//!
//! A one-token forward pass opens a few hundred parallel regions of 10–200 µs each.
//! On rayon, an idle worker goes to sleep within microseconds and the next region
//! must wake it (a futex wake, which in a virtual machine is an inter-processor
//! interrupt and a VM exit): on a 2-vCPU KVM guest, W4A8 decode of the 0.53B
//! benchmark model ran at 37.6–38.0 tok/s on rayon against 41.7–42.0 with the other
//! worker spinning (alternating runs). [`spinning`] keeps the pool's other workers
//! polling for the duration of one closure (a forward pass) and [`for_each`] hands
//! them its items; outside [`spinning`], [`for_each`] is rayon's parallel iterator.
//!
//! The team lives only inside [`spinning`]: no thread spins between forward passes,
//! and there is no global state beyond rayon's own pool. While a team is active, the
//! other workers are busy in it, so rayon loops that do not go through [`for_each`]
//! run on the calling thread only: use [`spinning`] for passes whose parallel work all
//! goes through [`for_each`].

use rayon::prelude::*;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Calls `f` on every item, in parallel: on the team of the enclosing [`spinning`]
/// call of this thread if there is one, else on rayon's pool. Items are handed out
/// one at a time, so uneven items balance across threads.
pub fn for_each<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync + Send) {
    if items.len() <= 1 {
        items.into_iter().for_each(f);
        return;
    }
    let team = TEAM.with(Cell::get);
    if team.is_null() {
        items.into_par_iter().for_each(f);
        return;
    }
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    let task = |i: usize| {
        // Each index is claimed once, so each slot is taken once; a poisoned slot
        // (a panic in another task) still holds its item.
        let item = slots[i].lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(item) = item {
            f(item);
        }
    };
    // SAFETY: `team` was set by `spinning` on this thread and points to its `Team`,
    // which outlives the closure that is running this call.
    unsafe { &*team }.run(slots.len(), &task);
}

/// Runs `f` on the calling thread while the rest of rayon's pool spins, waiting for
/// the items of [`for_each`] calls made by `f` on this thread. On a thread outside the
/// pool, or with a pool of one thread, this is just `f()`. Nested calls reuse the
/// outer team.
pub fn spinning<R>(f: impl FnOnce() -> R) -> R {
    let Some(owner) = rayon::current_thread_index() else {
        return f();
    };
    if !TEAM.with(Cell::get).is_null() || rayon::current_num_threads() < 2 {
        return f();
    }
    let team = Team::new(owner);
    rayon::in_place_scope(|scope| {
        for _ in 1..rayon::current_num_threads() {
            scope.spawn(|_| team.help());
        }
        // Stops the helpers even if `f` unwinds: the scope waits for them.
        let _stop = Stop(&team);
        let _installed = Installed::new(&team);
        f()
    })
}

thread_local! {
    /// The team of the innermost active [`spinning`] call on this thread, or null.
    static TEAM: Cell<*const Team> = const { Cell::new(std::ptr::null()) };
}

/// Sets [`TEAM`] to the team while alive, and back to the value it held before when
/// dropped.
struct Installed(*const Team);

impl Installed {
    fn new(team: &Team) -> Self {
        Installed(TEAM.with(|t| t.replace(team)))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        TEAM.with(|t| t.set(self.0));
    }
}

/// Tells the helpers to leave when dropped.
struct Stop<'a>(&'a Team);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::Release);
    }
}

/// One parallel loop: `n` indices for `task`, claimed through `next`.
struct Job<'a> {
    task: &'a (dyn Fn(usize) + Sync),
    n: usize,
    next: AtomicUsize,
    /// Distinguishes this loop from an earlier one at the same address.
    serial: u64,
}

impl Job<'_> {
    /// Claims and runs indices until none are left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            (self.task)(i);
        }
    }
}

/// The state shared by the owner of a [`spinning`] call and its helpers.
struct Team {
    /// The current loop (a `Job` on the owner's stack), or null between loops.
    job: AtomicPtr<Job<'static>>,
    /// Helpers that may hold a pointer read from `job`.
    readers: AtomicUsize,
    serial: AtomicU64,
    stop: AtomicBool,
    /// The owner's rayon thread index: a helper job that the owner itself picks up
    /// (while it waits inside some rayon call) must return at once, or the owner would
    /// wait on itself.
    owner: usize,
}

impl Team {
    fn new(owner: usize) -> Self {
        Team {
            job: AtomicPtr::new(std::ptr::null_mut()),
            readers: AtomicUsize::new(0),
            serial: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            owner,
        }
    }

    /// The owner's side of one loop: publish it, work on it, and return only once no
    /// helper can still touch it.
    fn run(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Job {
            task,
            n,
            next: AtomicUsize::new(0),
            serial,
        };
        /// Unpublishes the loop and waits for its readers, also when a task panics:
        /// the helpers must be done with `job` before it leaves the stack.
        struct Retire<'a>(&'a Team);
        impl Drop for Retire<'_> {
            fn drop(&mut self) {
                self.0.job.store(std::ptr::null_mut(), Ordering::SeqCst);
                while self.0.readers.load(Ordering::SeqCst) != 0 {
                    std::hint::spin_loop();
                }
            }
        }
        let retire = Retire(self);
        // The lifetime is erased for publication only; `Retire` above guarantees that
        // no helper dereferences the pointer after this function returns.
        let ptr = (&raw const job).cast::<Job<'static>>().cast_mut();
        self.job.store(ptr, Ordering::SeqCst);
        // A `for_each` inside a task is a loop of its own, not one for the team (whose
        // helpers are busy with this one): detach the team from the thread meanwhile.
        let team = TEAM.with(|t| t.replace(std::ptr::null()));
        let _reattach = Installed(team);
        job.work();
        drop(retire);
    }

    /// A helper's loop: poll for published loops and work on them until stopped.
    fn help(&self) {
        if rayon::current_thread_index() == Some(self.owner) {
            return;
        }
        let mut last = 0u64;
        while !self.stop.load(Ordering::Acquire) {
            // Poll without writing shared lines until a loop newer than the last one
            // worked on is published.
            if self.serial.load(Ordering::Relaxed) == last
                || self.job.load(Ordering::Relaxed).is_null()
            {
                std::hint::spin_loop();
                continue;
            }
            // Announce the read before loading the pointer (both SeqCst): the owner
            // unpublishes before it checks `readers`, so either this load sees null
            // or the owner waits for the matching decrement.
            self.readers.fetch_add(1, Ordering::SeqCst);
            let _leave = Leave(&self.readers);
            let ptr = self.job.load(Ordering::SeqCst);
            if ptr.is_null() {
                continue;
            }
            // SAFETY: non-null `job` points to the owner's live `Job`, which the owner
            // keeps until `readers` drops to zero (see `Team::run`), and this thread
            // is counted in `readers` until `_leave` drops.
            let job = unsafe { &*ptr };
            if job.serial != last {
                last = job.serial;
                job.work();
            }
        }
    }
}

/// Decrements the reader count when dropped (also on unwinding).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool")
    }

    /// Every item is visited exactly once, through the team and through rayon, with
    /// many short loops in a row (the decode pattern) and loops of 0, 1 and 2 items.
    #[test]
    fn each_item_once() {
        for threads in [1, 2, 3] {
            pool(threads).install(|| {
                for team in [false, true] {
                    let body = || {
                        for n in (0..200).chain([0, 1, 2, 1000]) {
                            let mut out = vec![0u32; n];
                            let items: Vec<(usize, &mut u32)> =
                                out.iter_mut().enumerate().collect();
                            for_each(items, |(i, o)| *o += i as u32 + 1);
                            let want: Vec<u32> = (1..=n as u32).collect();
                            assert_eq!(out, want, "{threads} threads, team {team}, {n} items");
                        }
                    };
                    if team { spinning(body) } else { body() }
                }
            });
        }
    }

    /// Helpers really take part: with two threads and items that wait for each other
    /// in pairs, the loop can only finish if two threads run it.
    #[test]
    fn helpers_run_items() {
        pool(2).install(|| {
            spinning(|| {
                let seen = AtomicUsize::new(0);
                let threads = Mutex::new(std::collections::HashSet::new());
                for_each((0..64).collect::<Vec<_>>(), |_| {
                    threads.lock().unwrap().insert(std::thread::current().id());
                    seen.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                });
                assert_eq!(seen.load(Ordering::Relaxed), 64);
                assert_eq!(
                    threads.lock().unwrap().len(),
                    2,
                    "the helper never ran an item"
                );
            })
        });
    }

    /// Rayon loops inside a team still complete (on the calling thread), and nested
    /// `spinning` calls and calls from outside the pool are plain calls.
    #[test]
    fn rayon_inside_and_nesting() {
        assert_eq!(spinning(|| 7), 7);
        pool(2).install(|| {
            let total: u64 = spinning(|| {
                let s: u64 = (0..10_000u64).into_par_iter().sum();
                s + spinning(|| 1)
            });
            assert_eq!(total, 49_995_001);
        });
    }

    /// A panicking item propagates out of `spinning` instead of hanging the team.
    #[test]
    fn panic_propagates() {
        let caught = std::panic::catch_unwind(|| {
            pool(2).install(|| {
                spinning(|| {
                    for_each((0..32).collect::<Vec<u32>>(), |i| {
                        assert!(i != 17, "item 17 fails");
                    })
                })
            })
        });
        let payload = caught.expect_err("the panic reaches the caller");
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        assert_eq!(message, Some("item 17 fails"));
    }
}
