//! The dataflow: one differential computation per `run` or `watch`.
//!
//! Inputs are the plan's edges; each stage is a `reduce` keyed by the instance key (see
//! [`RunStage`]); joins connect each stage to its parents' results; kernel-tune requests are
//! made `distinct` so that every pruned model with the same structure shares one tuning; and
//! `reduce` keeps the aggregates (best kernel per format/shape/backend/device, the Pareto front).
//! Each worker keeps a view of the rows it owns and writes its own Parquet parts.

mod aggregates;
mod run_stage;
mod view;

pub use aggregates::Aggregates;
pub use run_stage::RunStage;
pub use view::{Schemas, Stats, View};

use crate::engine::Engine;
use crate::key::AnyKey;
use crate::plan::Edges;
use differential_dataflow::input::InputSession;
use differential_dataflow::VecCollection;
use results::{Row, Value};
use std::sync::Arc;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

/// The input sessions of the dataflow, one per kind of edge.
pub struct Inputs {
    datasets: InputSession<u64, AnyKey, isize>,
    trains: InputSession<u64, (AnyKey, AnyKey), isize>,
    prunes: InputSession<u64, (AnyKey, AnyKey), isize>,
    prune_tunes: InputSession<u64, (AnyKey, AnyKey), isize>,
    root_tunes: InputSession<u64, AnyKey, isize>,
    evals: InputSession<u64, (AnyKey, AnyKey), isize>,
    eval_tunes: InputSession<u64, (AnyKey, AnyKey), isize>,
}

impl Inputs {
    /// Feeds the difference between two plans' edges (insertions and retractions).
    pub fn feed(&mut self, old: &Edges, new: &Edges) {
        fn diff<T>(
            s: &mut InputSession<u64, T, isize>,
            old: &std::collections::BTreeSet<T>,
            new: &std::collections::BTreeSet<T>,
        ) where
            T: differential_dataflow::Data,
        {
            for x in old.difference(new) {
                s.remove(x.clone());
            }
            for x in new.difference(old) {
                s.insert(x.clone());
            }
        }
        diff(&mut self.datasets, &old.datasets, &new.datasets);
        diff(&mut self.trains, &old.trains, &new.trains);
        diff(&mut self.prunes, &old.prunes, &new.prunes);
        diff(&mut self.prune_tunes, &old.prune_tunes, &new.prune_tunes);
        diff(&mut self.root_tunes, &old.root_tunes, &new.root_tunes);
        diff(&mut self.evals, &old.evals, &new.evals);
        diff(&mut self.eval_tunes, &old.eval_tunes, &new.eval_tunes);
    }

    /// Moves every input to `epoch` and flushes.
    pub fn advance_to(&mut self, epoch: u64) {
        self.datasets.advance_to(epoch);
        self.trains.advance_to(epoch);
        self.prunes.advance_to(epoch);
        self.prune_tunes.advance_to(epoch);
        self.root_tunes.advance_to(epoch);
        self.evals.advance_to(epoch);
        self.eval_tunes.advance_to(epoch);
        self.datasets.flush();
        self.trains.flush();
        self.prunes.flush();
        self.prune_tunes.flush();
        self.root_tunes.flush();
        self.evals.flush();
        self.eval_tunes.flush();
    }
}

/// What the driver holds after building the dataflow.
pub struct Built {
    /// Inputs (fed by worker 0 only; other workers drop theirs).
    pub inputs: Inputs,
    /// Probe over every output, aggregates and statistics included.
    pub probe: ProbeHandle<u64>,
    /// This worker's rows per stage.
    pub view: View,
    /// Aggregates (complete on worker 0).
    pub aggregates: Aggregates,
    /// Per-epoch counts (complete on worker 0).
    pub stats: Stats,
    /// Union schemas of the tables (complete on every worker).
    pub schemas: Schemas,
}

/// (key, its failure if it failed) of each instance's rows.
fn statuses(rows: Rows<'_>) -> VecCollection<'_, u64, (AnyKey, Option<String>), isize> {
    rows.map(|(k, row)| (k, status(&row)))
}

fn status(row: &Row) -> Option<String> {
    match row.get("status") {
        Some(Value::Str(s)) if s == "ok" => None,
        _ => Some(match row.get("error") {
            Some(Value::Str(e)) => e.clone(),
            _ => "failed".into(),
        }),
    }
}

type Rows<'s> = VecCollection<'s, u64, (AnyKey, Row), isize>;

/// Builds the dataflow on one worker.
pub fn build(worker: &mut Worker, engine: Arc<Engine>) -> Built {
    let index = worker.index();
    let mut inputs = Inputs {
        datasets: InputSession::new(),
        trains: InputSession::new(),
        prunes: InputSession::new(),
        prune_tunes: InputSession::new(),
        root_tunes: InputSession::new(),
        evals: InputSession::new(),
        eval_tunes: InputSession::new(),
    };
    let view = View::default();
    let aggregates = Aggregates::default();
    let stats = Stats::default();
    let schemas = Schemas::default();
    let probe = ProbeHandle::new();
    let (v, a, st, sc, pr) = (
        view.clone(),
        aggregates.clone(),
        stats.clone(),
        schemas.clone(),
        probe.clone(),
    );
    worker.dataflow::<u64, _, _>(|scope| {
        let e = || engine.clone();
        // dataset
        let datasets = inputs.datasets.to_collection(scope);
        let ds_out: Rows =
            datasets
                .map(|k| (k, (k, None::<String>)))
                .run_stage("dataset", e(), index);
        // train
        let ds_status = statuses(ds_out.clone());
        let trains = inputs.trains.to_collection(scope);
        let tr_out = trains
            .join(ds_status)
            .map(|(dk, (tk, s)): (AnyKey, (AnyKey, Option<String>))| (tk, (dk, s)))
            .run_stage("train", e(), index);
        // prune
        let tr_status = statuses(tr_out.clone());
        let prunes = inputs.prunes.to_collection(scope);
        let pr_out = prunes
            .join(tr_status)
            .map(|(tk, (pk, s)): (AnyKey, (AnyKey, Option<String>))| (pk, (tk, s)))
            .run_stage("prune", e(), index);
        // kernel tune: requested by successful prunes (and kernel-only roots), made distinct
        let pr_status = statuses(pr_out.clone());
        let pr_ok = pr_status
            .clone()
            .filter(|(_, s)| s.is_none())
            .map(|(k, _)| (k, ()));
        let demanded = inputs
            .prune_tunes
            .to_collection(scope)
            .join(pr_ok)
            .map(|(_, (tk, ())): (AnyKey, (AnyKey, ()))| tk)
            .concat(inputs.root_tunes.to_collection(scope))
            .distinct();
        let tune_out =
            demanded
                .map(|k| (k, (k, None::<String>)))
                .run_stage("kernel_tune", e(), index);
        let tune_best = aggregates::best_per_key(tune_out.clone());
        // evaluate: joins the pruned model and the best config of each of its layers' tunings
        let tune_status = statuses(tune_best.clone());
        let from_prune = inputs
            .evals
            .to_collection(scope)
            .join(pr_status)
            .map(|(pk, (ek, s)): (AnyKey, (AnyKey, Option<String>))| (ek, (pk, s)));
        let from_tunes = inputs
            .eval_tunes
            .to_collection(scope)
            .join(tune_status)
            .map(|(tk, (ek, s)): (AnyKey, (AnyKey, Option<String>))| (ek, (tk, s)));
        let ev_out = from_prune
            .concat(from_tunes)
            .run_stage("evaluate", e(), index);

        let outputs = [
            ("dataset", ds_out),
            ("train", tr_out),
            ("prune", pr_out),
            ("kernel_tune", tune_out),
            ("evaluate", ev_out.clone()),
        ];
        for (stage, rows) in outputs {
            let (v, st) = (v.clone(), st.clone());
            let counted = rows
                .clone()
                .inspect(move |((_, row), _, diff)| v.update(stage, row, *diff));
            counted.probe_with(&pr);
            view::stats_stream(stage, rows.clone(), st).probe_with(&pr);
            view::schema_stream(stage, rows, sc.clone()).probe_with(&pr);
        }
        aggregates::best_kernels(tune_best, a.clone()).probe_with(&pr);
        aggregates::pareto(ev_out, a).probe_with(&pr);
    });
    Built {
        inputs,
        probe,
        view,
        aggregates,
        stats,
        schemas,
    }
}
