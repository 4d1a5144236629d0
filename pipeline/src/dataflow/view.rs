//! Per-worker views of the dataflow's outputs: the rows each worker owns (its Parquet parts),
//! and per-epoch counts gathered on worker 0 (for `run.json`).

use crate::key::AnyKey;
use differential_dataflow::{AsCollection, VecCollection};
use results::{Row, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use timely::dataflow::operators::Exchange;

/// Adds `diff` to the count of `record`, dropping it at zero (a differential update applied to
/// a materialised view).
pub(crate) fn accumulate<K: Ord + Clone>(map: &mut BTreeMap<K, isize>, record: &K, diff: isize) {
    let count = map.entry(record.clone()).or_insert(0);
    *count += diff;
    if *count == 0 {
        map.remove(record);
    }
}

/// The rows of each stage that this worker holds, as accumulated updates.
#[derive(Clone, Default)]
pub struct View {
    rows: Rc<RefCell<BTreeMap<&'static str, BTreeMap<Row, isize>>>>,
}

impl View {
    pub(crate) fn update(&self, stage: &'static str, row: &Row, diff: isize) {
        accumulate(self.rows.borrow_mut().entry(stage).or_default(), row, diff);
    }

    /// The current rows of a stage on this worker.
    pub fn rows(&self, stage: &str) -> Vec<Row> {
        self.rows
            .borrow()
            .get(stage)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// Counts of one stage in one epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpochCounts {
    /// Instances computed.
    pub executed: u64,
    /// Instances found in the store.
    pub cached: u64,
    /// Instances failed.
    pub failed: u64,
    /// Seconds spent computing the executed ones.
    pub duration_s: f64,
    /// Instances, executed or cached, measured on a busy machine (`cpu_wait` above
    /// [`kernels::BUSY_SHARE`]).
    pub busy: u64,
    /// The largest `cpu_wait` among the instances (0 where none has one).
    pub cpu_wait_max: f64,
}

/// Per-epoch, per-stage counts (complete on worker 0).
#[derive(Clone, Default)]
pub struct Stats {
    counts: Rc<RefCell<BTreeMap<(u64, String), EpochCounts>>>,
}

impl Stats {
    /// Counts of an epoch, by stage.
    pub fn epoch(&self, epoch: u64) -> BTreeMap<String, EpochCounts> {
        self.counts
            .borrow()
            .iter()
            .filter(|((e, _), _)| *e == epoch)
            .map(|((_, s), c)| (s.clone(), *c))
            .collect()
    }
}

/// (stage, key, cached, failed, microseconds computing, `cpu_wait` in parts per million,
/// busy).
type StatRecord = (String, AnyKey, bool, bool, u64, u64, bool);

/// Counts instances (not rows: a tuning has many) inserted in each epoch, on worker 0.
pub fn stats_stream<'s>(
    stage: &'static str,
    rows: VecCollection<'s, u64, (AnyKey, Row), isize>,
    stats: Stats,
) -> VecCollection<'s, u64, StatRecord, isize> {
    rows.map(move |(k, row)| {
        let cached = matches!(row.get("cached"), Some(Value::Bool(true)));
        let failed = !matches!(row.get("status"), Some(Value::Str(s)) if s == "ok");
        let micros = match (cached, row.get("duration_s")) {
            (false, Some(Value::F64(d))) => (d * 1e6) as u64,
            _ => 0,
        };
        let (wait_ppm, busy) = match row.get("cpu_wait") {
            Some(Value::F64(w)) if w.is_finite() => {
                ((w * 1e6).round() as u64, *w > kernels::BUSY_SHARE)
            }
            _ => (0, false),
        };
        (stage.to_owned(), k, cached, failed, micros, wait_ppm, busy)
    })
    .distinct()
    .inner
    .exchange(|_| 0)
    .as_collection()
    .inspect(
        move |((stage, _, cached, failed, micros, wait_ppm, busy), time, diff)| {
            if *diff <= 0 {
                return;
            }
            let mut counts = stats.counts.borrow_mut();
            let c = counts.entry((*time, stage.clone())).or_default();
            c.cpu_wait_max = c.cpu_wait_max.max(*wait_ppm as f64 / 1e6);
            c.busy += u64::from(*busy);
            if *failed {
                c.failed += 1;
            } else if *cached {
                c.cached += 1;
            } else {
                c.executed += 1;
                c.duration_s += *micros as f64 / 1e6;
            }
        },
    )
}

/// The union schema of each stage's table across all workers, broadcast to every worker so
/// that all Parquet parts of a table share one schema.
#[derive(Clone, Default)]
pub struct Schemas {
    columns: Rc<RefCell<BTreeMap<SchemaRecord, isize>>>,
}

impl Schemas {
    /// The schema of a stage's table.
    pub fn schema(&self, stage: &str) -> results::TableSchema {
        let mut schema = results::TableSchema::new();
        for ((s, col, ty), _) in self.columns.borrow().iter() {
            if s == stage {
                // Conflicting types are reported by the writer, which sees the rows.
                let _ = schema.add(col, *ty);
            }
        }
        schema
    }
}

type SchemaRecord = (String, String, Option<results::ColumnType>);

/// Gathers the (column, type) pairs of a stage's rows on every worker.
pub fn schema_stream<'s>(
    stage: &'static str,
    rows: VecCollection<'s, u64, (AnyKey, Row), isize>,
    schemas: Schemas,
) -> VecCollection<'s, u64, SchemaRecord, isize> {
    use timely::dataflow::operators::vec::Broadcast;
    rows.flat_map(move |(_, row)| {
        row.into_iter()
            .map(move |(col, v)| (stage.to_owned(), col, v.column_type()))
            .collect::<Vec<_>>()
    })
    .distinct()
    .inner
    .broadcast()
    .as_collection()
    .inspect(move |(rec, _, diff)| accumulate(&mut schemas.columns.borrow_mut(), rec, *diff))
}
