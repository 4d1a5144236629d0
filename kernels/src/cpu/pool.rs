//! The kernels' threads: a pool whose workers spin for a while after each job before they park,
//! and whose caller works on the job too.
//!
//! Inside a model pass a layer's product follows host work (bias, activations, attention)
//! during which the other cores are idle. Rayon's workers park almost at once, and waking a
//! parked worker cost 80–100 µs on the 2-core VMs this project runs on (`examples/handoff_cost`:
//! a 256×256×256 V:N:M product took 53 µs on two threads back to back and 137–183 µs after
//! 200 µs of single-threaded work; on one thread 93 µs either way), so a layer tuned at two
//! threads ran at half its tuned speed in the pass. Here the workers spin for [`SPIN`] after
//! their last part, which covers the gaps between the layers of a pass (OpenMP runtimes do the
//! same: `KMP_BLOCKTIME`), and the caller claims parts itself instead of handing the whole job
//! over and sleeping until it is done.
//!
//! One job runs at a time; a caller that finds the pool busy (another thread's job) runs its
//! parts itself, one after another.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a worker spins after its last part before it parks.
const SPIN: Duration = Duration::from_millis(2);

/// One job: `parts` calls of `f`, claimed one by one by whoever is awake; `seats` workers may
/// join the caller.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    parts: usize,
    next: AtomicUsize,
    seats: AtomicUsize,
    panicked: AtomicBool,
}

impl Job<'_> {
    /// A worker's share: nothing if the job's seats are taken.
    fn join(&self) {
        if self
            .seats
            .fetch_update(SeqCst, SeqCst, |s| s.checked_sub(1))
            .is_ok()
        {
            self.work();
        }
    }

    /// Claims and runs parts until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            if i >= self.parts {
                return;
            }
            if catch_unwind(AssertUnwindSafe(|| (self.f)(i))).is_err() {
                self.panicked.store(true, SeqCst);
            }
        }
    }
}

struct Pool {
    /// The open job, or null. Workers read it only between raising and lowering `active`.
    current: AtomicPtr<Job<'static>>,
    /// Bumped when a job is posted.
    epoch: AtomicU64,
    /// Workers between reading `current` and finishing with it.
    active: AtomicUsize,
    /// Workers parked (or about to park) on `wake`.
    sleepers: AtomicUsize,
    /// Serialises jobs.
    submit: Mutex<()>,
    park: Mutex<()>,
    wake: Condvar,
    workers: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            current: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            submit: Mutex::new(()),
            park: Mutex::new(()),
            wake: Condvar::new(),
            workers: cores.saturating_sub(1),
        }));
        for i in 0..pool.workers {
            // A worker that cannot be spawned just leaves its share to the caller.
            let _ = std::thread::Builder::new()
                .name(format!("kernels-{i}"))
                .spawn(move || worker(pool));
        }
        pool
    })
}

fn worker(pool: &'static Pool) {
    let mut seen = pool.epoch.load(SeqCst);
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        while pool.epoch.load(SeqCst) == seen {
            // The clock only every 256 spins: reading it each time was most of the spin.
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) || start.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let mut guard = pool.park.lock().unwrap_or_else(|e| e.into_inner());
            pool.sleepers.fetch_add(1, SeqCst);
            while pool.epoch.load(SeqCst) == seen {
                guard = pool.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            pool.sleepers.fetch_sub(1, SeqCst);
        }
        seen = pool.epoch.load(SeqCst);
        pool.active.fetch_add(1, SeqCst);
        let job = pool.current.load(SeqCst);
        if !job.is_null() {
            // SAFETY: the caller clears `current` before waiting for `active` to fall to zero,
            // and this worker raised `active` before reading `current` (both SeqCst): either it
            // read null, or the caller waits until it lowers `active` below, so the job (on the
            // caller's stack) outlives this use.
            unsafe { (*job).join() };
        }
        pool.active.fetch_sub(1, SeqCst);
    }
}

/// Runs `f(0)`, …, `f(parts − 1)` on up to `threads` threads (the caller one of them), each
/// part once, and returns when all are done.
///
/// # Panics
/// If a part panicked (after every part has run).
pub(crate) fn run_parts(parts: usize, threads: usize, f: &(dyn Fn(usize) + Sync)) {
    let job = Job {
        f,
        parts,
        next: AtomicUsize::new(0),
        seats: AtomicUsize::new(threads.saturating_sub(1)),
        panicked: AtomicBool::new(false),
    };
    let pool = if threads > 1 && parts > 1 {
        Some(pool())
    } else {
        None
    };
    let lock = pool.and_then(|p| p.submit.try_lock().ok().map(|g| (p, g)));
    match &lock {
        Some((p, _)) if p.workers > 0 => {
            // SAFETY (of the lifetime erased here): `current` is cleared and `active` drained
            // below before `job` goes out of scope; see `worker`.
            let erased: *const Job<'static> = (&job as *const Job<'_>).cast();
            p.current.store(erased.cast_mut(), SeqCst);
            p.epoch.fetch_add(1, SeqCst);
            if p.sleepers.load(SeqCst) > 0 {
                let _guard = p.park.lock().unwrap_or_else(|e| e.into_inner());
                p.wake.notify_all();
            }
            job.work();
            p.current.store(std::ptr::null_mut(), SeqCst);
            while p.active.load(SeqCst) != 0 {
                std::hint::spin_loop();
            }
        }
        _ => job.work(),
    }
    drop(lock);
    assert!(!job.panicked.load(SeqCst), "a kernel part panicked");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_part_runs_exactly_once_from_many_callers() {
        let callers: Vec<_> = (0..4)
            .map(|c| {
                std::thread::spawn(move || {
                    for round in 0..200 {
                        let parts = 1 + (c + round) % 7;
                        let hits: Vec<AtomicU32> = (0..parts).map(|_| AtomicU32::new(0)).collect();
                        run_parts(parts, 2, &|i| {
                            hits[i].fetch_add(1, SeqCst);
                        });
                        assert!(hits.iter().all(|h| h.load(SeqCst) == 1));
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
    }

    #[test]
    fn a_part_that_panics_is_reported_after_the_rest_ran() {
        let hits = AtomicU32::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            run_parts(4, 2, &|i| {
                hits.fetch_add(1, SeqCst);
                assert!(i != 2, "part 2 fails");
            })
        }));
        assert!(r.is_err());
        assert_eq!(hits.load(SeqCst), 4);
        // The pool still works.
        let n = AtomicU32::new(0);
        run_parts(3, 2, &|_| {
            n.fetch_add(1, SeqCst);
        });
        assert_eq!(n.load(SeqCst), 3);
    }
}
