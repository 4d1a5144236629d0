//! Evaluation rows as the Pareto front compares them: objectives with a latency interval.

use crate::{MeasuredPoint, Objectives, Row, Value};
use std::collections::BTreeMap;

fn f(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// A row measured in pairs against a dense model: that model and the speedup with its
/// interval (`speedup_vs_dense`, `speedup_ci_lo`, `speedup_ci_hi`).
fn paired(r: &Row) -> Option<(String, [f64; 3])> {
    let s = [
        f(r, "speedup_vs_dense"),
        f(r, "speedup_ci_lo"),
        f(r, "speedup_ci_hi"),
    ];
    let finite = s.iter().all(|x| x.is_finite() && *x > 0.0) && f(r, "dense_latency_us") > 0.0;
    match r.get("dense_model") {
        Some(Value::Str(m)) if finite => Some((m.clone(), s)),
        _ => None,
    }
}

/// How far apart two measurements of the same computation fell in these rows: the largest
/// `max / min − 1` of the speedups of rows that ran the same kernels (the same dense model and
/// the same non-empty `kernel_tune_keys`, which cover each layer's format signature, so the same
/// structure up to where the kept weights lie), or 0 when no two rows did.
///
/// A row's interval comes from the rounds of one evaluation, a second or so; the machine
/// changes more than that between evaluations. On the 2-vCPU VMs this project runs on, model
/// passes slow down by up to 2× in phases of seconds (kernels/BENCH.md): the quickstart's
/// 2:8 magnitude and 2:8 OBS models, which run the same kernels on the same structure, read
/// 1.55× and 1.90× over dense in one run, each with an interval under ±2 % (issue 18). Two rows
/// of one computation are the run's own measure of that.
pub fn session_spread(rows: &[&Row]) -> f64 {
    widest_gap(rows.iter().filter_map(|r| {
        let keys = match r.get("kernel_tune_keys") {
            Some(Value::ListStr(k)) if !k.is_empty() => k.clone(),
            _ => return None,
        };
        let (m, [s, ..]) = paired(r)?;
        Some(((m, keys), s))
    }))
}

/// The largest `max / min − 1` of the values within each group, or 0 without a group of two.
fn widest_gap<K: Ord>(values: impl Iterator<Item = (K, f64)>) -> f64 {
    let mut groups: BTreeMap<K, (f64, f64)> = BTreeMap::new();
    for (k, x) in values {
        let g = groups.entry(k).or_insert((x, x));
        *g = (g.0.min(x), g.1.max(x));
    }
    groups
        .values()
        .map(|(lo, hi)| hi / lo - 1.0)
        .fold(0.0, f64::max)
}

/// How far apart the machine's states were when these rows were timed: the largest
/// `max / min − 1` of the dense latencies of rows paired with the same dense model (its pass is
/// one computation, timed anew in each evaluation), or 0 when no two rows share one.
///
/// The paired speedups cancel the machine's drift to first order; what they do not cancel (a
/// busy neighbour slows a dense pass and a sparse pass unequally) grows with it. Rows cached
/// from an earlier run, on a quieter or busier machine, show here: a per-layer search's new
/// trials timed on a loaded VM read their dense pass at 288 µs beside cached rows at 206 µs.
pub fn dense_drift(rows: &[&Row]) -> f64 {
    widest_gap(
        rows.iter()
            .filter_map(|r| Some((paired(r)?.0, f(r, "dense_latency_us")))),
    )
}

/// Each evaluation's latency as the front compares it, with its interval. Rows measured in
/// pairs against a dense model (`dense_model`, `speedup_vs_dense`, `speedup_ci_*`) are compared
/// through their speedups: the latency is the median dense latency of all rows of that dense
/// model divided by the row's speedup, so that the drift of the machine between two rows'
/// measurements, which their paired speedups cancel, does not decide the front. Its interval is
/// the speedup's, widened by the run's [`session_spread`] `τ` (by `√(1 + τ)` each way, so that
/// two rows of one computation that fell `τ` apart overlap): the front does not claim a
/// dominance that a second measurement of the same computation could reverse. Other rows keep
/// their own latency, exactly.
pub fn measured_points(rows: &[&Row]) -> Vec<MeasuredPoint> {
    let widen = (1.0 + session_spread(rows)).sqrt();
    let mut dense: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows {
        if let Some((m, _)) = paired(r) {
            dense.entry(m).or_default().push(f(r, "dense_latency_us"));
        }
    }
    let reference: BTreeMap<String, f64> = dense
        .into_iter()
        .map(|(m, mut d)| {
            d.sort_by(f64::total_cmp);
            (m, d[d.len() / 2])
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut o = Objectives {
                accuracy: f(r, "accuracy"),
                latency_us: f(r, "latency_us_median"),
                weight_bytes: f(r, "weight_bytes"),
            };
            match paired(r) {
                Some((m, [s, lo, hi])) => {
                    let d = reference[&m];
                    o.latency_us = d / s;
                    MeasuredPoint {
                        objectives: o,
                        latency_lo: d / (hi * widen),
                        latency_hi: d * widen / lo,
                    }
                }
                None => MeasuredPoint::exact(o),
            }
        })
        .collect()
}
