//! Evaluation rows as the Pareto front compares them: objectives with a latency interval.

use crate::{MeasuredPoint, Objectives, Row, Value};
use std::collections::BTreeMap;

fn f(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Each evaluation's latency as the front compares it, with its interval. Rows measured in
/// pairs against a dense model (`dense_model`, `speedup_vs_dense`, `speedup_ci_*`) are compared
/// through their speedups: the latency is the median dense latency of all rows of that dense
/// model divided by the row's speedup (and its interval by the speedup's), so that the drift
/// of the machine between two rows' measurements, which their paired speedups cancel, does
/// not decide the front. Other rows keep their own latency, exactly.
pub fn measured_points(rows: &[&Row]) -> Vec<MeasuredPoint> {
    let text = |r: &Row, c: &str| match r.get(c) {
        Some(Value::Str(s)) => Some(s.clone()),
        _ => None,
    };
    let paired = |r: &Row| {
        let s = [
            f(r, "speedup_vs_dense"),
            f(r, "speedup_ci_lo"),
            f(r, "speedup_ci_hi"),
        ];
        let finite = s.iter().all(|x| x.is_finite() && *x > 0.0) && f(r, "dense_latency_us") > 0.0;
        text(r, "dense_model").filter(|_| finite).map(|m| (m, s))
    };
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
                        latency_lo: d / hi,
                        latency_hi: d / lo,
                    }
                }
                None => MeasuredPoint::exact(o),
            }
        })
        .collect()
}
