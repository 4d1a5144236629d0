//! Progress bars per stage: done/total, cached, failed, ETA. Hidden when stdout is not a
//! terminal. Workers update them from any thread.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counts of one stage in the current epoch.
#[derive(Debug, Default)]
struct Counts {
    executed: AtomicU64,
    cached: AtomicU64,
    failed: AtomicU64,
}

/// Progress of a run.
pub struct Progress {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<&'static str, ProgressBar>>,
    counts: BTreeMap<&'static str, Counts>,
    stages: Vec<&'static str>,
    visible: bool,
}

impl Progress {
    /// Bars for `stages` on stderr when stdout is a terminal (and `quiet` is false), else hidden.
    pub fn new(quiet: bool, stages: Vec<&'static str>) -> Progress {
        use std::io::IsTerminal;
        let visible = !quiet && std::io::stdout().is_terminal();
        let multi = MultiProgress::with_draw_target(if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let counts = stages.iter().map(|&s| (s, Counts::default())).collect();
        Progress {
            multi,
            bars: Mutex::new(BTreeMap::new()),
            counts,
            stages,
            visible,
        }
    }

    /// Starts an epoch: one bar per stage with its number of instances.
    pub fn start(&self, totals: &BTreeMap<&'static str, usize>) {
        let style =
            ProgressStyle::with_template("{prefix:>12} {bar:30} {pos}/{len} {msg} ETA {eta}")
                .expect("static template")
                .progress_chars("=> ");
        let mut bars = self.bars.lock().expect("progress lock");
        for b in bars.values() {
            b.finish_and_clear();
        }
        bars.clear();
        for c in self.counts.values() {
            c.executed.store(0, Ordering::Relaxed);
            c.cached.store(0, Ordering::Relaxed);
            c.failed.store(0, Ordering::Relaxed);
        }
        for &stage in &self.stages {
            let total = totals.get(stage).copied().unwrap_or(0) as u64;
            if total == 0 {
                continue;
            }
            let bar = self.multi.add(ProgressBar::new(total));
            bar.set_style(style.clone());
            bar.set_prefix(stage);
            bars.insert(stage, bar);
        }
    }

    /// Records one finished instance.
    pub fn finish(&self, stage: &str, cached: bool, failed: bool) {
        let Some(c) = self.counts.get(stage) else {
            return;
        };
        let counter = if failed {
            &c.failed
        } else if cached {
            &c.cached
        } else {
            &c.executed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(bar) = self.bars.lock().ok().and_then(|b| b.get(stage).cloned()) {
            bar.inc(1);
            bar.set_message(format!(
                "cached {} failed {}",
                c.cached.load(Ordering::Relaxed),
                c.failed.load(Ordering::Relaxed)
            ));
        }
    }

    /// Clears the bars at the end of an epoch.
    pub fn done(&self) {
        if let Ok(mut bars) = self.bars.lock() {
            for b in bars.values() {
                b.finish_and_clear();
            }
            bars.clear();
        }
    }

    /// Prints a line above the bars (or to stderr when they are hidden).
    pub fn println(&self, line: &str) {
        if self.visible {
            let _ = self.multi.println(line);
        } else {
            tell!("{line}");
        }
    }
}
