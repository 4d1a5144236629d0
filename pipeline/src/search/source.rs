//! The unified search as a plan source: round 0 plans the dense reference and the cheap
//! proxies (whose prunings request every layer × format tuning); after each round it observes
//! the round (`round`) and plans the trials it chose. Each round is a new epoch of the
//! same dataflow: its plan is the last one plus the chosen trials, fed as insertions.

use super::front::{Objectives, ACCURACY_MARGIN};
use super::measure;
use super::space::{Candidate, Space};
use crate::driver::PlanSource;
use crate::experiment::{Experiment, SearchSpec, SourceMap};
use crate::kinds::{PrunePoint, SearchNote};
use crate::plan::{Plan, PlanError};
use crate::stage::StageTable;
use crate::store::Store;
use kernels::Pattern;
use results::{ResultsError, Row, RunSummary, TableMeta, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What a finished search tells the command line.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Lines saying which constraints no trial met, each with the best trial found for it.
    pub unmet: Vec<String>,
}

/// One planned pruning of the search.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) point: PrunePoint,
    pub(super) role: Role,
}

#[derive(Clone, Debug)]
pub(super) enum Role {
    Dense,
    Proxy { layer: usize, pattern: Pattern },
    Trial(Box<Candidate>),
}

/// A candidate's prediction.
#[derive(Clone, Copy, Debug)]
pub(super) struct Prediction {
    pub(super) drop: f64,
    pub(super) gemm_us: f64,
    pub(super) objectives: Objectives,
}

/// The unified search.
pub struct Unified {
    pub(super) exp: Experiment,
    pub(super) map: SourceMap,
    pub(super) table: Arc<StageTable>,
    pub(super) store: measure::Reader,
    pub(super) spec: SearchSpec,
    pub(super) space: Space,
    pub(super) entries: Vec<Entry>,
    pub(super) plan: Option<Plan>,
    pub(super) round: u64,
    pub(super) pending: Vec<Entry>,
    pub(super) records: Vec<Row>,
    pub(super) stop: Option<String>,
    pub(super) verdict: Arc<Mutex<Verdict>>,
    pub(super) print: bool,
}

pub(super) fn note(round: u64, reason: String, predicted: Option<&Prediction>) -> SearchNote {
    SearchNote {
        round,
        proxy: false,
        predicted_accuracy: predicted.map(|p| p.objectives.accuracy),
        predicted_latency_us: predicted.map(|p| p.objectives.latency_us),
        reason,
    }
}

impl Unified {
    /// Plans round 0 of the unified search of `exp` (errors at `path:line:col`).
    pub fn new(
        exp: Experiment,
        map: SourceMap,
        table: Arc<StageTable>,
        store: Store,
        print: bool,
    ) -> Result<(Unified, Plan), PlanError> {
        let spec = exp
            .search
            .clone()
            .ok_or_else(|| map.error(0..0, "not a unified search"))?;
        let grid = table.plan(&exp, &map)?;
        let space = Space::new(&exp, &spec, &map, &grid)?;
        let mut dense = PrunePoint::dense();
        dense.note = Some(note(
            0,
            "reference: the dense model (the hypervolume's reference point and the cost outside the GEMMs)".into(),
            None,
        ));
        let mut entries = vec![Entry {
            point: dense,
            role: Role::Dense,
        }];
        for (_, layer, pattern, point) in space.proxies() {
            entries.push(Entry {
                point,
                role: Role::Proxy { layer, pattern },
            });
        }
        let mut u = Unified {
            exp,
            map,
            table,
            store: measure::Reader::new(store),
            spec,
            space,
            entries,
            plan: None,
            round: 0,
            pending: vec![],
            records: vec![],
            stop: None,
            verdict: Arc::new(Mutex::new(Verdict::default())),
            print,
        };
        let plan = u.plan_entries()?;
        u.plan = Some(plan.clone());
        Ok((u, plan))
    }

    /// Shared with the caller: filled in as the search ends.
    pub fn verdict(&self) -> Arc<Mutex<Verdict>> {
        self.verdict.clone()
    }

    /// What `cotune plan` says about the rounds after round 0.
    pub fn later_rounds(&self) -> String {
        format!(
            "unified search: this is round 0 (the dense reference, {} one-shot proxies, and every layer × format tuning they request); later rounds depend on its results: each chooses up to {} fine-tuned trials of {} epochs, within budget_epochs = {}. The grid of this space runs {} trials and {} fine-tune epochs.",
            self.entries.len() - 1,
            self.spec.per_round,
            self.space.finetune_epochs,
            self.spec.budget_epochs,
            self.space.grid_trials,
            self.space.grid_epochs()
        )
    }

    /// The plan of the search as the store holds it: every round replayed from the stored
    /// measurements, without running anything (what `store gc --keep` keeps). A result the
    /// store lacks counts as failed, as in a run; so a finished search replays exactly, and an
    /// interrupted one plans at most some rounds more than it ran.
    pub fn replay(mut self) -> Plan {
        loop {
            let plan = self.plan.clone().unwrap_or_default();
            self.observe();
            if PlanSource::next(&mut self, false, &|| false).is_none() {
                return plan;
            }
        }
    }

    fn plan_entries(&self) -> Result<Plan, PlanError> {
        let mut exp = self.exp.clone();
        exp.prune_points = self.entries.iter().map(|e| e.point.clone()).collect();
        self.table.plan(&exp, &self.map)
    }

    pub(super) fn backend(&self) -> stages::kernel_tune::Backend {
        self.exp.backends[0]
    }
}

/// On a cluster process other than 0: the same rounds, replayed from the shared store.
impl crate::engine::LaterRounds for Unified {
    fn round(&self) -> u64 {
        self.round
    }

    fn advance(&mut self) -> Option<Plan> {
        self.observe();
        PlanSource::next(self, false, &|| false)
    }
}

impl PlanSource for Unified {
    fn next(&mut self, first: bool, _stopped: &dyn Fn() -> bool) -> Option<Plan> {
        if first {
            return self.plan.clone();
        }
        if self.stop.is_some() || self.pending.is_empty() {
            return None;
        }
        self.entries.append(&mut self.pending);
        self.round += 1;
        match self.plan_entries() {
            Ok(plan) => {
                self.plan = Some(plan.clone());
                Some(plan)
            }
            Err(e) => {
                tell!(
                    "unified search: round {} could not be planned: {e}",
                    self.round
                );
                None
            }
        }
    }

    fn cumulative(&self) -> bool {
        true
    }

    fn finish_epoch(
        &mut self,
        dir: &Path,
        meta: &TableMeta,
        summary: &mut RunSummary,
    ) -> Result<(), ResultsError> {
        let row = self.observe();
        self.records.push(row);
        results::write_parquet(&dir.join("search.parquet"), &self.records, meta)?;
        let last = self.records.last().cloned().unwrap_or_default();
        // Plain JSON numbers and strings (the store's tagged encoding is for round trips).
        let j = |k: &str| match last.get(k) {
            Some(Value::I64(x)) => serde_json::Value::from(*x),
            Some(Value::F64(x)) => serde_json::Value::from(*x),
            Some(Value::Str(x)) => serde_json::Value::from(x.clone()),
            _ => serde_json::Value::Null,
        };
        summary.extra.insert(
            "search".into(),
            serde_json::json!({
                "strategy": "unified",
                "per_layer": self.spec.per_layer,
                "batch_size": self.spec.batch_size,
                "rounds": self.round + 1,
                "budget_epochs": self.spec.budget_epochs,
                "budget_epochs_used": j("budget_epochs_used"),
                "trials": j("trials_total"),
                "cheap_prunes": j("cheap_prunes"),
                "kernel_tunes": j("kernel_tunes"),
                "hypervolume": j("hypervolume"),
                "reference": {
                    "accuracy": j("reference_accuracy"),
                    "latency_us": j("reference_latency_us"),
                    "weight_bytes": j("reference_weight_bytes"),
                    "what": format!("the dense model's accuracy less {ACCURACY_MARGIN}, its latency at batch {} and its weight bytes", self.spec.batch_size),
                },
                "grid": {
                    "trials": self.space.grid_trials,
                    "finetune_epochs": self.space.grid_epochs(),
                },
                "stop": j("stop"),
            }),
        );
        Ok(())
    }

    fn epoch_done(&mut self, summary: &RunSummary, pareto: &[Row], failed: u64) {
        if !self.print {
            return;
        }
        let last = self.records.last().cloned().unwrap_or_default();
        let f = |k: &str| last.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        say!(
            "round {}: {} new trial(s); budget {}/{} epochs; front {} point(s), hypervolume {:.5}",
            self.round,
            f("trials_this_round"),
            f("budget_epochs_used"),
            self.spec.budget_epochs,
            f("front_size"),
            f("hypervolume"),
        );
        if let Some(Value::Str(stop)) = last.get("stop") {
            say!("search stopped: {stop}\n");
            crate::cli::print_summary(summary, pareto, failed, &self.table.names());
        }
    }
}
