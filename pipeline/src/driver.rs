//! Drives the dataflow: starts timely workers (threads, or a cluster of processes), feeds the
//! plan's edges on worker 0 (the only one holding inputs), steps until each epoch completes,
//! and has every worker write its own Parquet parts into the epoch's generation folder; worker
//! 0 then writes the aggregates and `run.json` there and publishes the generation (one atomic
//! switch of `<out>/<experiment>`, see [`results::Generation`]).

use crate::abort::{guarded, Abort};
use crate::cluster::{Cluster, ClusterError};
use crate::dataflow::{self, Built};
use crate::engine::{Engine, COTUNE_VERSION};
use crate::plan::{Edge, Plan};
use results::{Row, RunSummary, StageCounts, TableMeta, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use timely::worker::Worker;

/// Where results go.
#[derive(Clone, Debug)]
pub struct Output {
    /// `--out` folder (the experiment's tables go in `<out>/<experiment>/`).
    pub out: PathBuf,
}

/// Produces the plans of successive epochs on worker 0: `run` yields one, `watch` one per save
/// of the experiment file. `None` ends the computation.
pub trait PlanSource: Send + 'static {
    /// Blocks until the next plan (or the end). A source that waits (a watch waiting for the
    /// file's next save) gives up, returning `None`, once `stopped()` says a worker of this
    /// process has panicked.
    fn next(&mut self, first: bool, stopped: &dyn Fn() -> bool) -> Option<Plan>;
    /// Called after each epoch's outputs are written, with its summary and Pareto front.
    fn epoch_done(&mut self, summary: &RunSummary, pareto: &[Row], failed: u64);
    /// Whether `run.json` counts every epoch so far (a search's rounds) rather than the last
    /// one alone (a watch's edits).
    fn cumulative(&self) -> bool {
        false
    }
    /// Called once an epoch's tables are written and before its `run.json`: the source may add
    /// tables of its own to the generation folder `dir` and entries to the summary.
    fn finish_epoch(
        &mut self,
        _dir: &std::path::Path,
        _meta: &TableMeta,
        _summary: &mut RunSummary,
    ) -> Result<(), results::ResultsError> {
        Ok(())
    }
}

/// What a finished computation reports.
#[derive(Debug, Default)]
pub struct Report {
    /// Failed instances in the final view (all workers of this process).
    pub failed: u64,
    /// Errors writing results.
    pub errors: Vec<results::ResultsError>,
}

/// Why a computation could not run to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The cluster could not be formed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// timely could not start the workers (its message).
    #[error("timely: {0}")]
    Start(String),
    /// A worker thread stopped with a panic (its message).
    #[error("worker stopped: {0}")]
    Worker(String),
}

/// Runs the dataflow to completion.
pub fn execute(
    engine: Arc<Engine>,
    cluster: &Cluster,
    output: Output,
    source: Box<dyn PlanSource>,
) -> Result<Report, DriverError> {
    let source = Arc::new(Mutex::new(Some(source)));
    let cluster_c = cluster.clone();
    let (builders, others) = cluster.allocators()?;
    let config = timely::WorkerConfig::default();
    let abort = Abort::default();
    let guards = timely::execute::execute_from(builders, others, config, move |worker| {
        guarded(worker, &abort, |worker| {
            let built = dataflow::build(worker, engine.clone());
            let src = if worker.index() == 0 {
                source.lock().ok().and_then(|mut s| s.take())
            } else {
                None
            };
            match src {
                Some(src) => lead(worker, built, &engine, &output, &cluster_c, src, &abort),
                None => follow(worker, built, &engine, &output, &abort),
            }
        })
    })
    .map_err(DriverError::Start)?;
    let mut report = Report::default();
    let mut stopped = vec![];
    for r in guards.join() {
        match r.map_err(DriverError::Worker)? {
            Ok(r) => {
                report.failed += r.failed;
                report.errors.extend(r.errors);
            }
            Err(why) => stopped.push(why),
        }
    }
    if !stopped.is_empty() {
        return Err(DriverError::Worker(stopped.join("; ")));
    }
    Ok(report)
}

/// How long worker 0 waits for the other workers' parts of a generation.
const PARTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn lead(
    worker: &mut Worker,
    built: Built,
    engine: &Engine,
    output: &Output,
    cluster: &Cluster,
    mut source: Box<dyn PlanSource>,
    abort: &Abort,
) -> Report {
    let Built {
        mut inputs,
        probe,
        view,
        aggregates,
        stats,
        schemas,
        ..
    } = built;
    // Generation tokens sort in time order across runs: this run's start, then its epoch.
    let run_id = format!("{:020}", crate::store::nanos());
    let mut current: BTreeSet<Edge> = BTreeSet::new();
    let mut old_nodes = std::collections::BTreeSet::new();
    let mut epoch = 0u64;
    let mut report = Report::default();
    let mut totals_so_far: std::collections::BTreeMap<String, StageCounts> = Default::default();
    let run_t0 = Instant::now();
    while let Some(plan) = source.next(epoch == 0, &|| abort.raised()) {
        let t0 = Instant::now();
        let started_at = rfc3339_now();
        let mut totals = std::collections::BTreeMap::new();
        for (k, n) in &plan.nodes {
            if !old_nodes.contains(k) {
                *totals.entry(n.stage).or_insert(0) += 1;
            }
        }
        old_nodes = plan.nodes.keys().copied().collect();
        if let Ok(mut d) = engine.digest.write() {
            *d = plan.digest();
        }
        if let Ok(mut reg) = engine.registry.write() {
            reg.extend(plan.nodes.iter().map(|(k, n)| (*k, n.clone())));
        }
        engine.progress.start(&totals);
        inputs.feed(&current, &plan.edges);
        current = plan.edges.clone();
        let token = format!("{run_id}-{epoch:06}");
        inputs.set_generation(&token);
        epoch += 1;
        inputs.advance_to(epoch);
        // Parked while it has nothing to do (timely wakes it when another worker or process
        // sends it something): spinning here took a core from the measurements of other
        // workers and of the other processes of a cluster on this host.
        while probe.less_than(&epoch) && !abort.raised() {
            worker.step_or_park(Some(IDLE_PARK));
        }
        if abort.raised() {
            return report;
        }
        engine.progress.done();
        let digest = plan.digest();
        let generation = match results::Generation::new(&output.out, &engine.experiment, &token) {
            Ok(g) => g,
            Err(e) => {
                report.errors.push(e);
                continue;
            }
        };
        report = write_parts(worker, &view, &schemas, engine, &generation, &digest);
        let mut summary = RunSummary {
            experiment: engine.experiment.clone(),
            experiment_digest: digest.clone(),
            cotune_version: COTUNE_VERSION.into(),
            started_at,
            wall_s: 0.0,
            workers: cluster.workers as u64,
            processes: cluster.processes as u64,
            ..RunSummary::default()
        };
        summary
            .extra
            .insert("generation".into(), serde_json::Value::from(token.clone()));
        for stage in engine.table.names() {
            let c = stats
                .epoch(epoch - 1)
                .get(stage)
                .copied()
                .unwrap_or_default();
            let mut counts = StageCounts {
                executed: c.executed,
                cached: c.cached,
                failed: c.failed,
                duration_s: c.duration_s,
                busy: c.busy,
                cpu_wait_max: c.cpu_wait_max,
            };
            if source.cumulative() {
                let t = totals_so_far.entry(stage.into()).or_default();
                t.executed += counts.executed;
                t.cached += counts.cached;
                t.failed += counts.failed;
                t.duration_s += counts.duration_s;
                t.busy += counts.busy;
                t.cpu_wait_max = t.cpu_wait_max.max(counts.cpu_wait_max);
                counts = t.clone();
            }
            summary.stages.insert(stage.into(), counts);
        }
        // Every process's failures, not only this worker's: the counts are gathered on worker 0.
        let failed_total: u64 = summary
            .stages
            .values()
            .map(|c| c.failed)
            .sum::<u64>()
            .max(count_failed(&view, engine));
        report.failed = report.failed.max(failed_total);
        let pareto = aggregates.pareto();
        let meta = table_meta(engine, &digest, &token, results::TableSchema::new());
        let dir = generation.dir();
        // The step is published only whole: every worker's parts, the aggregates and run.json;
        // not at all when this worker's own parts failed (the errors say why).
        let since = if source.cumulative() { run_t0 } else { t0 };
        // Set before publishing (which may fail before run.json), again just before run.json.
        summary.wall_s = since.elapsed().as_secs_f64();
        let published = if report.errors.is_empty() {
            generation
                .wait_written(worker.peers(), PARTS_TIMEOUT, || abort.raised())
                .and_then(|()| results::write_parquet(&dir.join("pareto.parquet"), &pareto, &meta))
                .and_then(|()| {
                    let best = aggregates.best_kernels();
                    results::write_parquet(&dir.join("kernel_best.parquet"), &best, &meta)
                })
                .and_then(|()| source.finish_epoch(dir, &meta, &mut summary))
                .and_then(|()| {
                    summary.wall_s = since.elapsed().as_secs_f64();
                    results::write_run_json(&dir.join("run.json"), &summary)
                })
                .and_then(|()| generation.publish())
        } else {
            Ok(None)
        };
        match published {
            Err(e) => report.errors.push(e),
            // Not removed (it may hold more than tables), but the user should know it moved.
            Ok(Some(aside)) => tell!(
                "note: {} was not cotune's link to its tables; moved it to {}",
                output.out.join(&engine.experiment).display(),
                aside.display()
            ),
            Ok(None) => {}
        }
        source.epoch_done(&summary, &pareto, failed_total);
    }
    drop(inputs);
    while !probe.done() && !abort.raised() {
        worker.step_or_park(Some(IDLE_PARK));
    }
    report
}

/// The longest a waiting worker sleeps before it looks again (for an abort, or a wake-up
/// it missed).
const IDLE_PARK: std::time::Duration = std::time::Duration::from_millis(20);

fn follow(
    worker: &mut Worker,
    built: Built,
    engine: &Engine,
    output: &Output,
    abort: &Abort,
) -> Report {
    let Built {
        inputs,
        probe,
        view,
        schemas,
        generations,
        ..
    } = built;
    drop(inputs);
    let mut written: Option<u64> = None;
    let mut report = Report::default();
    loop {
        worker.step_or_park(Some(IDLE_PARK));
        let frontier = probe.with_frontier(|f| f.first().copied());
        // Everything before the frontier is final: write this worker's parts of the
        // generation fed at the last complete time.
        if let Some(f) = frontier.filter(|&f| f > 0 && written.is_none_or(|w| w < f)) {
            if let Some(token) = generations.at(f - 1) {
                engine.catch_up(f - 1);
                let digest = engine.digest.read().map(|d| d.clone()).unwrap_or_default();
                report = match results::Generation::new(&output.out, &engine.experiment, &token) {
                    Ok(g) => write_parts(worker, &view, &schemas, engine, &g, &digest),
                    Err(e) => Report {
                        failed: count_failed(&view, engine),
                        errors: vec![e],
                    },
                };
            }
            written = frontier;
            // Plan the next round now, from the same store that process 0 is about to plan it
            // from, rather than when its work arrives: a run sharing the store could change
            // what it holds meanwhile (a no-op without a unified search to replay).
            engine.catch_up(f);
        }
        if probe.done() || abort.raised() {
            break;
        }
    }
    report
}

fn count_failed(view: &dataflow::View, engine: &Engine) -> u64 {
    let mut keys = std::collections::BTreeSet::new();
    for stage in engine.table.names() {
        for row in view.rows(stage) {
            if !matches!(row.get("status"), Some(Value::Str(s)) if s == "ok") {
                keys.insert(format!("{:?}", row.get("key")));
            }
        }
    }
    keys.len() as u64
}

fn table_meta(
    engine: &Engine,
    digest: &str,
    generation: &str,
    schema: results::TableSchema,
) -> TableMeta {
    TableMeta {
        experiment: engine.experiment.clone(),
        experiment_digest: digest.to_owned(),
        cotune_version: COTUNE_VERSION.into(),
        schema_version: results::SCHEMA_VERSION,
        extra: [("cotune.generation".to_owned(), generation.to_owned())].into(),
        schema,
    }
}

/// Writes this worker's part of every stage table into `generation`, then marks it written.
fn write_parts(
    worker: &Worker,
    view: &dataflow::View,
    schemas: &dataflow::Schemas,
    engine: &Engine,
    generation: &results::Generation,
    digest: &str,
) -> Report {
    let mut report = Report {
        failed: count_failed(view, engine),
        errors: vec![],
    };
    for stage in engine.table.names() {
        let rows = view.rows(stage);
        let meta = table_meta(engine, digest, generation.token(), schemas.schema(stage));
        if let Err(e) = generation.write_part(stage, worker.index(), &rows, &meta) {
            report.errors.push(e);
        }
    }
    if report.errors.is_empty() {
        if let Err(e) = generation.mark_written(worker.index()) {
            report.errors.push(e);
        }
    } else {
        // Best effort: worker 0 then gives up on this generation at once; if even the marker
        // cannot be written, it waits out its timeout.
        let _ = generation.mark_failed(worker.index());
    }
    report
}

fn rfc3339_now() -> String {
    let secs = crate::store::unix_now() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
