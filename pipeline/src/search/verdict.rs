//! What a unified search says when no trial meets its constraints: for each constraint, the
//! best trial found on it.

use super::measure::Measured;
use crate::experiment::Constraints;

/// One line per constraint (none when there are no constraints), each naming the best of the
/// `measured` (id, objectives) on that constraint's metric. The caller calls it only when no
/// trial meets them all.
pub fn unmet(
    c: &Constraints,
    measured: &[(String, Measured)],
    dense_latency: Option<f64>,
) -> Vec<String> {
    let best = |key: &dyn Fn(&Measured) -> f64| {
        measured
            .iter()
            .max_by(|a, b| key(&a.1).total_cmp(&key(&b.1)))
    };
    let none = || "no trial was measured".to_string();
    let mut out = vec![];
    if let Some(x) = c.min_accuracy {
        let b = best(&|m| m.accuracy);
        out.push(format!(
            "min_accuracy = {x}: {}",
            b.map_or_else(none, |(id, m)| format!(
                "best accuracy {:.4} ({id})",
                m.accuracy
            ))
        ));
    }
    if let Some(x) = c.max_latency_us {
        let b = best(&|m| -m.latency_us);
        out.push(format!(
            "max_latency_us = {x}: {}",
            b.map_or_else(none, |(id, m)| format!(
                "best latency {:.1} µs ({id})",
                m.latency_us
            ))
        ));
    }
    if let Some(x) = c.min_speedup {
        let speedup = |m: &Measured| dense_latency.map_or(0.0, |d| d / m.latency_us);
        let b = best(&speedup);
        out.push(format!(
            "min_speedup = {x}: {}",
            b.map_or_else(none, |(id, m)| format!(
                "best speedup {:.3}× ({id})",
                speedup(m)
            ))
        ));
    }
    out
}
