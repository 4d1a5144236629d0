//! Wiring the dataflow on one worker from the stage table: each stage's `reduce` over its
//! roots, its finished inputs and its requests, then the views, statistics and aggregates
//! over every stage's rows.

use super::{aggregates, view, Aggregates, Generations, Inputs, RunStage, Schemas, Stats, View};
use crate::engine::Engine;
use crate::key::AnyKey;
use crate::kinds::{Evaluate, KernelTune};
use crate::plan::EdgeKind;
use crate::stage::StageKind;
use differential_dataflow::input::InputSession;
use differential_dataflow::VecCollection;
use results::{Row, Value};
use std::sync::Arc;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

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
    /// Generation tokens (complete on every worker).
    pub generations: Generations,
}

type Rows<'s> = VecCollection<'s, u64, (AnyKey, Row), isize>;
type Statuses<'s> = VecCollection<'s, u64, (AnyKey, Option<String>), isize>;

/// (key, its failure if it failed) of each instance's rows (a tuning's many rows give as many
/// equal records: joins carry the multiplicity and a `reduce` sees each parent once).
fn statuses(rows: Rows<'_>) -> Statuses<'_> {
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

/// Builds the dataflow on one worker.
pub fn build(worker: &mut Worker, engine: Arc<Engine>) -> Built {
    let index = worker.index();
    let mut inputs = Inputs {
        edges: InputSession::new(),
        generation: InputSession::new(),
        current: None,
    };
    let generations = Generations::default();
    let gens = generations.clone();
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
        {
            use differential_dataflow::AsCollection;
            use timely::dataflow::operators::vec::Broadcast;
            inputs
                .generation
                .to_collection(scope)
                .inner
                .broadcast()
                .as_collection()
                .inspect(move |(token, time, diff)| {
                    if *diff > 0 {
                        gens.tokens.borrow_mut().insert(*time, token.clone());
                    }
                })
                .probe_with(&pr);
        }
        let edges = inputs.edges.to_collection(scope);
        let table = &engine.table;
        let mut status: Vec<Statuses> = vec![];
        let mut outputs: Vec<(&'static str, Rows)> = vec![];
        for (i, stage) in table.entries().iter().enumerate() {
            let i = i as u8;
            let mine = edges.clone().filter(move |e| e.stage == i);
            let mut requests = mine
                .clone()
                .filter(|e| e.kind == EdgeKind::Root)
                .map(|e| (e.to, (e.to, None::<String>)));
            let index_of = |name: &str| table.index(name).map(usize::from);
            let mut inputs = None;
            for p in stage.parent_stages().iter().filter_map(|s| index_of(s)) {
                let from = p as u8;
                let done = mine
                    .clone()
                    .filter(move |e| e.kind == EdgeKind::Input && e.from_stage == from)
                    .map(|e| (e.from, e.to))
                    .join(status[p].clone())
                    .map(|(pk, (ck, s)): (AnyKey, (AnyKey, Option<String>))| (ck, (pk, s)));
                inputs = Some(match inputs {
                    Some(i) => done.concat(i),
                    None => done,
                });
            }
            let mut asked_by_any = None;
            for r in stage.requested_by().iter().filter_map(|s| index_of(s)) {
                let from = r as u8;
                let ok = status[r]
                    .clone()
                    .filter(|(_, s)| s.is_none())
                    .map(|(k, _)| (k, ()));
                let asked = mine
                    .clone()
                    .filter(move |e| e.kind == EdgeKind::Request && e.from_stage == from)
                    .map(|e| (e.from, e.to))
                    .join(ok)
                    .map(|(_, (ck, ())): (AnyKey, (AnyKey, ()))| ck)
                    .distinct();
                requests = requests.concat(asked.clone().map(|k| (k, (k, None::<String>))));
                asked_by_any = Some(match asked_by_any {
                    Some(a) => asked.concat(a),
                    None => asked,
                });
            }
            if let Some(mut inputs) = inputs {
                // An instance that is requested waits for a request as well as its inputs: a
                // tuning whose requesting prunes all failed does not run because its
                // calibration is done.
                if let Some(asked) = asked_by_any {
                    let unasked = mine
                        .clone()
                        .filter(|e| e.kind == EdgeKind::Request)
                        .map(|e| e.to)
                        .distinct()
                        .concat(asked.distinct().negate());
                    inputs = inputs.antijoin(unasked);
                }
                requests = requests.concat(inputs);
            }
            let out = requests.run_stage(stage.name(), engine.clone(), index);
            status.push(statuses(out.clone()));
            outputs.push((stage.name(), out));
        }
        for (stage, rows) in &outputs {
            let (v, st, stage) = (v.clone(), st.clone(), *stage);
            rows.clone()
                .inspect(move |((_, row), _, diff)| v.update(stage, row, *diff))
                .probe_with(&pr);
            view::stats_stream(stage, rows.clone(), st).probe_with(&pr);
            view::schema_stream(stage, rows.clone(), sc.clone()).probe_with(&pr);
        }
        let output = |name: &str| {
            outputs
                .iter()
                .find(|(s, _)| *s == name)
                .map(|(_, r)| r.clone())
        };
        if let Some(tunes) = output(KernelTune::NAME) {
            let best = aggregates::best_per_key(tunes);
            aggregates::best_kernels(best, a.clone()).probe_with(&pr);
        }
        if let Some(evals) = output(Evaluate::NAME) {
            aggregates::pareto(evals, a).probe_with(&pr);
        }
    });
    Built {
        inputs,
        probe,
        view,
        aggregates,
        stats,
        schemas,
        generations,
    }
}
