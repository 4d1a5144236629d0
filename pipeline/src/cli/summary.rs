//! The run's summary as printed: per-stage counts, the busy-machine note, and the Pareto
//! front as a small table with its notes (ties, drift, session spread).

use crate::kinds::prune::PER_LAYER;
use results::{Row, RunSummary, Value};

fn cell(row: &Row, col: &str) -> String {
    match row.get(col) {
        Some(Value::F64(x)) => format!("{x:.4}"),
        Some(Value::I64(x)) => x.to_string(),
        Some(Value::Str(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "-".into(),
    }
}

/// The dense drift ([`results::dense_drift`]) above which the printed front says so: the
/// quickstart's own rows, timed in one run on a quiet 2-core VM, drifted by 13 % and 17 %
/// (two fresh runs, Intel Emerald Rapids, 2026-12-05).
const DRIFT_NOTE: f64 = 0.25;

/// Says which measurements were taken on a busy machine (`cpu_wait` above
/// [`kernels::BUSY_SHARE`]), if any were.
fn busy_note(summary: &RunSummary, stages: &[&str]) {
    let busy: Vec<String> = stages
        .iter()
        .filter_map(|&s| summary.stages.get(s).map(|c| (s, c)))
        .filter(|(_, c)| c.busy > 0)
        .map(|(s, c)| format!("{s} {}", c.busy))
        .collect();
    if busy.is_empty() {
        return;
    }
    let most = summary
        .stages
        .values()
        .map(|c| c.cpu_wait_max)
        .fold(0.0, f64::max);
    say!(
        "(measured on a busy machine: {} instance(s), their threads waiting for a CPU up to \
         {:.0} % of the time they could run (column `cpu_wait`). Another process took the \
         cores: long products are preempted more than short ones, so their speedups read high. \
         Their entries are in the store as measured; a fresh --store on a quiet machine \
         measures them again)",
        busy.join(", "),
        100.0 * most
    );
}

/// Prints the per-stage counts and the Pareto front as a small table.
pub fn print_summary(summary: &RunSummary, pareto: &[Row], failed: u64, stages: &[&str]) {
    say!(
        "{:<12} {:>9} {:>7} {:>7} {:>10}",
        "stage",
        "executed",
        "cached",
        "failed",
        "seconds"
    );
    for &stage in stages {
        let Some(c) = summary.stages.get(stage) else {
            continue;
        };
        say!(
            "{stage:<12} {:>9} {:>7} {:>7} {:>10.2}",
            c.executed,
            c.cached,
            c.failed,
            c.duration_s
        );
    }
    say!(
        "wall time {:.2} s; {failed} failed instance(s)",
        summary.wall_s
    );
    busy_note(summary, stages);
    if pareto.is_empty() {
        return;
    }
    let mut rows: Vec<&Row> = pareto.iter().collect();
    let latency = |r: &Row| {
        ["front.latency_us", "latency_us_median"]
            .iter()
            .find_map(|c| r.get(*c).and_then(Value::as_f64))
            .unwrap_or(f64::INFINITY)
    };
    rows.sort_by(|a, b| latency(a).total_cmp(&latency(b)));
    say!("\nPareto front (accuracy ↑, latency ↓, weight bytes ↓):");
    let ties = rows
        .iter()
        .filter(|r| matches!(r.get("front.tie"), Some(Value::Bool(true))))
        .count();
    let cols = [
        "prune.pattern",
        "prune.n",
        "prune.m",
        "prune.v",
        "prune.sparsity",
        "prune.method",
        "accuracy",
        "latency_us",
        "speedup_vs_dense",
        "speedup 95% CI",
        "weight_bytes",
        "tie",
    ];
    say!(
        "{}",
        cols.iter()
            .map(|c| format!("{:>18}", c.trim_start_matches("prune.")))
            .collect::<Vec<_>>()
            .join("")
    );
    for r in rows {
        let cell = |c: &str| match c {
            "speedup 95% CI" => match (r.get("speedup_ci_lo"), r.get("speedup_ci_hi")) {
                (Some(Value::F64(lo)), Some(Value::F64(hi))) => format!("{lo:.3}–{hi:.3}"),
                _ => "-".into(),
            },
            "latency_us" => format!("{:.1}", latency(r)),
            "tie" => match r.get("front.tie") {
                Some(Value::Bool(true)) => "tie".into(),
                _ => "".into(),
            },
            c => cell(r, c),
        };
        // A per-layer point has no one pattern: its layers' follow the row.
        let layers = match r.get("prune.layer_patterns") {
            Some(Value::ListStr(l)) if cell("prune.pattern") == PER_LAYER => {
                format!("  [{}]", l.join(", "))
            }
            _ => String::new(),
        };
        say!(
            "{}{layers}",
            cols.iter()
                .map(|c| format!("{:>18}", cell(c)))
                .collect::<Vec<_>>()
                .join("")
        );
    }
    say!(
        "(latency_us is the one the front compares, at the largest batch size: the median \
         latency of the dense model the rows were timed against, over each row's paired speedup)"
    );
    if ties > 0 {
        say!(
            "({ties} point(s) marked `tie`: another point may dominate them within the 95 % \
             intervals of the speedups; a new measurement may drop them from the front)"
        );
    }
    let front: Vec<&Row> = pareto.iter().collect();
    let drift = results::dense_drift(&front);
    if drift > DRIFT_NOTE {
        say!(
            "(the front's rows were timed in different states of the machine: their dense \
             model's pass read up to {:.0} % apart, in this run or in the runs their cached rows \
             come from; their speedups are each paired with it, but compare them with care)",
            100.0 * drift
        );
    }
    let spread = pareto
        .iter()
        .find_map(|r| r.get("front.session_spread").and_then(Value::as_f64))
        .unwrap_or(0.0);
    if spread > 0.0 {
        say!(
            "(the intervals are widened by the run's session spread, {:.1} %: two models that \
             ran the same kernels read that far apart in their evaluations)",
            100.0 * spread
        );
    }
}
