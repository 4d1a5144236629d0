//! Aggregates kept by `reduce`: the best measured config of each tuning, the best kernel per
//! (format, shape, backend, device), and the Pareto front of evaluations (accuracy ↑,
//! latency ↓, weight bytes ↓). The last two are gathered on worker 0, which writes them.

use crate::key::AnyKey;
use differential_dataflow::{AsCollection, VecCollection};
use results::{Row, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use timely::dataflow::operators::Exchange;

type Rows<'s> = VecCollection<'s, u64, (AnyKey, Row), isize>;

/// Aggregate tables (complete on worker 0).
#[derive(Clone, Default)]
pub struct Aggregates {
    best: Rc<RefCell<BTreeMap<Row, isize>>>,
    pareto: Rc<RefCell<BTreeMap<Row, isize>>>,
}

fn acc(map: &RefCell<BTreeMap<Row, isize>>, row: &Row, diff: isize) {
    super::view::accumulate(&mut map.borrow_mut(), row, diff);
}

impl Aggregates {
    /// Best kernel per (format, shape, backend, device).
    pub fn best_kernels(&self) -> Vec<Row> {
        self.best.borrow().keys().cloned().collect()
    }

    /// The Pareto front.
    pub fn pareto(&self) -> Vec<Row> {
        self.pareto.borrow().keys().cloned().collect()
    }
}

fn f(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn ok(row: &Row) -> bool {
    matches!(row.get("status"), Some(Value::Str(s)) if s == "ok")
}

/// Measured latency of a row; failed, unmeasured and dense-baseline rows (`baseline = true`,
/// measured beside every tuning) sort last.
fn latency(row: &Row) -> f64 {
    let l = f(row, "latency_us_median");
    let baseline = matches!(row.get("baseline"), Some(Value::Bool(true)));
    if ok(row) && !baseline && l.is_finite() {
        l
    } else {
        f64::INFINITY
    }
}

fn min_latency<'a>(rows: impl Iterator<Item = &'a Row>) -> Option<&'a Row> {
    rows.min_by(|a, b| latency(a).total_cmp(&latency(b)).then_with(|| a.cmp(b)))
}

/// The row a tuning chose (`is_best`, not a baseline): among its confirmed points, on all
/// their samples.
fn chosen<'a>(rows: impl Iterator<Item = &'a Row>) -> Option<&'a Row> {
    rows.filter(|r| ok(r) && latency(r).is_finite())
        .find(|r| matches!(r.get("is_best"), Some(Value::Bool(true))))
}

/// The best row of each tuning: the point it chose, else (rows without `is_best`) its
/// fastest measured one; its failure row if it failed. The lowest median of all its rows
/// could be a point measured only in the first rounds, a lucky median the tuner's
/// confirmation rounds did not repeat.
pub fn best_per_key(tunes: Rows<'_>) -> Rows<'_> {
    tunes.reduce_named("Best config per tuning", |_key, rows, out| {
        let rows: Vec<&Row> = rows.iter().map(|(r, _)| *r).collect();
        if let Some(best) = tuning_best(&rows) {
            out.push((best.clone(), 1));
        }
    })
}

/// [`best_per_key`]'s choice among one tuning's rows.
fn tuning_best<'a>(rows: &[&'a Row]) -> Option<&'a Row> {
    chosen(rows.iter().copied()).or_else(|| min_latency(rows.iter().copied()))
}

/// Best kernel per (format, shape, backend, device) across tunings, gathered on worker 0.
pub fn best_kernels<'s>(
    best: Rows<'s>,
    agg: Aggregates,
) -> VecCollection<'s, u64, (String, Row), isize> {
    best.filter(|(_, row)| ok(row))
        .map(|(_, row)| {
            let group = [
                "format.pattern",
                "format.n",
                "format.m",
                "format.v",
                "format.sparsity",
                "format.rows",
                "format.cols",
                "kernel_tune.batch_tokens",
                "kernel_tune.backend",
                "device",
            ]
            .iter()
            .map(|c| format!("{:?}", row.get(*c).unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join("|");
            (group, row)
        })
        .reduce_named("Best kernel per format", |_g, rows, out| {
            if let Some(best) = min_latency(rows.iter().map(|(r, _)| *r)) {
                out.push((best.clone(), 1));
            }
        })
        .inner
        .exchange(|_| 0)
        .as_collection()
        .inspect(move |((_, row), _, diff)| acc(&agg.best, row, *diff))
}

/// The Pareto front of successful evaluations under their measured latency intervals
/// ([`results::pareto_front_with_ties`]), gathered on worker 0. Each front row gains
/// `front.latency_us` (the latency the front compared, see [`results::measured_points`]),
/// `front.tie` (true where another row may dominate it within the measured intervals, so
/// that another measurement may drop it from the front) and `front.session_spread` (how far
/// two rows of the same kernels fell apart in the run, by which those intervals were widened:
/// [`results::session_spread`]).
pub fn pareto<'s>(evals: Rows<'s>, agg: Aggregates) -> VecCollection<'s, u64, ((), Row), isize> {
    evals
        .filter(|(_, row)| ok(row))
        .map(|(_, row)| ((), row))
        .reduce_named("Pareto front", |_, rows, out| {
            let rows: Vec<&Row> = rows.iter().map(|(r, _)| *r).collect();
            let points = results::measured_points(&rows);
            let spread = results::session_spread(&rows);
            for (i, tie) in results::pareto_front_with_ties(&points) {
                let mut row = rows[i].clone();
                row.insert(
                    "front.latency_us".into(),
                    Value::F64(points[i].objectives.latency_us),
                );
                row.insert("front.tie".into(), Value::Bool(tie));
                row.insert("front.session_spread".into(), Value::F64(spread));
                out.push((row, 1));
            }
        })
        .inner
        .exchange(|_| 0)
        .as_collection()
        .inspect(move |((_, row), _, diff)| acc(&agg.pareto, row, *diff))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(latency: f64, best: Option<bool>, baseline: bool) -> Row {
        let mut r: Row = [
            ("status", Value::Str("ok".into())),
            ("latency_us_median", Value::F64(latency)),
            ("baseline", Value::Bool(baseline)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(b) = best {
            r.insert("is_best".into(), Value::Bool(b));
        }
        r
    }

    /// The tuning's confirmed choice, not a lower median of a point measured only in its
    /// first rounds (nor the baseline's best); rows without `is_best`: the fastest.
    #[test]
    fn a_tuning_s_best_is_the_point_it_chose() {
        let lucky = point(8.9, Some(false), false);
        let chose = point(11.5, Some(true), false);
        let dense = point(5.0, Some(true), true);
        assert_eq!(tuning_best(&[&lucky, &dense, &chose]), Some(&chose));
        let (a, b) = (point(3.0, None, false), point(2.0, None, false));
        assert_eq!(tuning_best(&[&a, &b]), Some(&b));
    }
}
