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

/// The best measured row of each tuning (its failure row if it failed).
pub fn best_per_key(tunes: Rows<'_>) -> Rows<'_> {
    tunes.reduce_named("Best config per tuning", |_key, rows, out| {
        if let Some(best) = min_latency(rows.iter().map(|(r, _)| *r)) {
            out.push((best.clone(), 1));
        }
    })
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
