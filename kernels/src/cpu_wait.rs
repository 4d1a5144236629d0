//! How busy the machine was while something was timed: the share of its runnable time this
//! process's threads spent waiting for a CPU, from Linux's per-thread scheduler statistics.
//!
//! A busy machine does not slow every measurement alike: a product of 10 ms is nearly always
//! preempted, one of 0.1 ms mostly not, so under load the long dense products read slower and
//! the short sparse ones' speedups grow (on a 2-core VM at load average ~97, 2:100 read 70–84×
//! against an ideal of 50; quiet, 28–38×). Timings cannot see this; the scheduler can.

use std::collections::HashMap;

/// The scheduler's running and waiting time of every thread of this process at one moment.
#[derive(Clone, Debug)]
pub struct CpuWait {
    /// Thread id → (nanoseconds on a CPU, nanoseconds runnable but waiting for one).
    threads: HashMap<u32, (u64, u64)>,
}

impl CpuWait {
    /// This process's threads' times now, or `None` where the system does not provide them
    /// (not Linux, or `/proc/<pid>/task/<tid>/schedstat` unreadable).
    pub fn now() -> Option<CpuWait> {
        let mut threads = HashMap::new();
        for entry in std::fs::read_dir("/proc/self/task").ok()? {
            let entry = entry.ok()?;
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            // A thread that ended since the folder was listed has no file: it is left out.
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue;
            };
            threads.insert(tid, parse(&text)?);
        }
        (!threads.is_empty()).then_some(CpuWait { threads })
    }

    /// The time since `earlier` that this process's threads ran and were runnable but waited
    /// for a CPU, summed over the threads seen now (a thread started since counts from zero;
    /// one that ended is left out).
    pub fn since(&self, earlier: &CpuWait) -> Waited {
        let mut w = Waited::default();
        for (tid, &(r, q)) in &self.threads {
            let (r0, q0) = earlier.threads.get(tid).copied().unwrap_or((0, 0));
            w.run_ns += r.saturating_sub(r0);
            w.wait_ns += q.saturating_sub(q0);
        }
        w
    }
}

/// Running and waiting time of a process's threads over some span (nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waited {
    /// Time on a CPU.
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU.
    pub wait_ns: u64,
}

/// The least runnable time (summed over the threads) over which [`Waited::share`] means
/// something: Linux updates a running thread's time at scheduler ticks (1–4 ms), so over a few
/// milliseconds one context switch read as a 50 % share, and over 56 ms as 6 % on a quiet VM.
pub const MIN_RUNNABLE_NS: u64 = 100_000_000;

/// The share above which a measurement was taken on a busy machine. On a quiet 2-core VM
/// (Zen 4, 2026-12-07) the quickstart's calibrations read 0.2–0.3 %, its evaluations 0.1–2 %,
/// its tunings of over 100 ms of runnable time under 2 %; with one other busy process on the
/// VM, tunings read 48–50 %.
pub const BUSY_SHARE: f64 = 0.10;

impl Waited {
    /// The share of the runnable time spent waiting: waiting / (running + waiting). 0 on a
    /// quiet machine; NaN where the threads were runnable for less than [`MIN_RUNNABLE_NS`].
    pub fn share(&self) -> f64 {
        let runnable = self.run_ns + self.wait_ns;
        if runnable < MIN_RUNNABLE_NS {
            return f64::NAN;
        }
        self.wait_ns as f64 / runnable as f64
    }
}

impl std::ops::AddAssign for Waited {
    fn add_assign(&mut self, o: Waited) {
        self.run_ns += o.run_ns;
        self.wait_ns += o.wait_ns;
    }
}

/// The first two fields of a schedstat line: time on a CPU and time waiting on a run queue
/// (nanoseconds).
fn parse(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// Measures [`Waited::share`] over `f`: `f`'s result and the share (NaN where the system does
/// not provide it).
pub fn cpu_wait_during<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let before = CpuWait::now();
    let out = f();
    let share = match (before, CpuWait::now()) {
        (Some(b), Some(a)) => a.since(&b).share(),
        _ => f64::NAN,
    };
    (out, share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse_and_bad_ones_do_not() {
        assert_eq!(parse("555927701 213626 30\n"), Some((555927701, 213626)));
        assert_eq!(parse("12"), None);
        assert_eq!(parse("x 1 2"), None);
    }

    #[test]
    fn the_share_counts_new_threads_from_zero_and_leaves_ended_ones_out() {
        let at = |v: &[(u32, u64, u64)]| CpuWait {
            threads: v.iter().map(|&(t, r, w)| (t, (r, w))).collect(),
        };
        let before = at(&[(1, 100, 10), (2, 50, 50)]);
        let after = at(&[(1, 170, 40), (3, 20, 10)]);
        // Thread 1: 70 run, 30 wait; thread 3 (new): 20 run, 10 wait; thread 2 ended.
        let w = after.since(&before);
        assert_eq!(
            w,
            Waited {
                run_ns: 90,
                wait_ns: 40
            }
        );
        // Too short a span to say anything.
        assert!(w.share().is_nan());
        let long = Waited {
            run_ns: 90_000_000,
            wait_ns: 40_000_000,
        };
        assert_eq!(long.share(), 40.0 / 130.0);
    }

    /// Where Linux provides the statistics, a thread spinning for 150 ms was runnable
    /// (running or waiting, on a busy machine) for about that long.
    #[test]
    fn a_spinning_thread_is_seen_running() {
        let Some(before) = CpuWait::now() else {
            return;
        };
        let start = std::time::Instant::now();
        while start.elapsed().as_millis() < 150 {
            std::hint::black_box(0);
        }
        let after = CpuWait::now().unwrap();
        let w = after.since(&before);
        let runnable = w.run_ns + w.wait_ns;
        assert!(runnable >= 120_000_000, "runnable {runnable} ns in 150 ms");
        let share = w.share();
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
