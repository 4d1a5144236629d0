//! The engine's shared state within one process, and the execution of one stage instance
//! through the store (called from inside the dataflow's `reduce` operators).

use crate::key::AnyKey;
use crate::plan::{Node, Plan};
use crate::progress::Progress;
use crate::stage::{Outcome, Resolver, RunCtx, RunError, StageTable};
use crate::store::{MeasureLock, Meta, Provenance, Store};
use results::{Row, Value};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock};

/// A parent's status as its children see it: (key, error if it failed).
pub type Parent = (AnyKey, Option<String>);

/// The cotune version written into results and entries.
pub const COTUNE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Process-wide state shared by the timely workers of one process.
pub struct Engine {
    /// The store.
    pub store: Store,
    /// The stages.
    pub table: StageTable,
    /// Every node planned in this session (watch adds to it before feeding new records).
    pub registry: Arc<RwLock<BTreeMap<AnyKey, Node>>>,
    /// Per-host measurement lock.
    pub measure: MeasureLock,
    /// Experiment name.
    pub experiment: String,
    /// Progress bars.
    pub progress: Progress,
    /// Host name.
    pub host: String,
    /// Digest of the experiment as currently planned (written into every table).
    pub digest: RwLock<String>,
    /// A unified search's later rounds, on a cluster process that does not lead the search.
    pub later_rounds: Option<Mutex<Box<dyn LaterRounds>>>,
}

/// A unified search replayed on a cluster process other than 0. Process 0 plans each round
/// from the last one's results and feeds it into the dataflow, but only its own registry
/// learns the round's nodes; the other processes plan the same rounds again from the shared
/// store, which holds every result of a round before any work of the next reaches them (the
/// next round is planned only once the dataflow has finished the last, everywhere), so that
/// they plan exactly what process 0 planned.
pub trait LaterRounds: Send {
    /// The round planned last (0 at the start).
    fn round(&self) -> u64;
    /// Observes the last round's results in the store and plans the next round; `None` where
    /// the search ends there.
    fn advance(&mut self) -> Option<Plan>;
}

fn s(v: impl Into<String>) -> Value {
    Value::Str(v.into())
}

impl Engine {
    /// The planned node of `key`; on a process that replays a unified search, planning the
    /// rounds up to the one that has it.
    fn node(&self, key: &AnyKey) -> Option<Node> {
        let known = || self.registry.read().ok()?.get(key).cloned();
        if let Some(node) = known() {
            return Some(node);
        }
        let mut rounds = self.later_rounds.as_ref()?.lock().ok()?;
        loop {
            if let Some(node) = known() {
                return Some(node);
            }
            let plan = rounds.advance()?;
            self.adopt(&plan);
        }
    }

    /// On a process that replays a unified search, plans the rounds up to `round` (the
    /// generation whose tables it is about to write), so that the tables carry that round's
    /// plan digest as process 0's do.
    pub(crate) fn catch_up(&self, round: u64) {
        let Some(Ok(mut rounds)) = self.later_rounds.as_ref().map(Mutex::lock) else {
            return;
        };
        while rounds.round() < round {
            match rounds.advance() {
                Some(plan) => self.adopt(&plan),
                None => return,
            }
        }
    }

    fn adopt(&self, plan: &Plan) {
        if let Ok(mut registry) = self.registry.write() {
            registry.extend(plan.nodes.iter().map(|(k, n)| (*k, n.clone())));
        }
        if let Ok(mut digest) = self.digest.write() {
            *digest = plan.digest();
        }
    }

    fn resolver(&self) -> Resolver {
        Resolver {
            registry: self.registry.clone(),
            store: self.store.clone(),
        }
    }

    /// Runs (or fetches) one stage instance and returns its result rows.
    pub fn execute(&self, key: AnyKey, parents: &[Parent], worker: usize) -> Vec<Row> {
        let Some(node) = self.node(&key) else {
            return vec![self.failed_row(key, None, worker, &RunError::NotPlanned { key })];
        };
        let stage = node.stage;
        let failed_parent = parents.iter().find_map(|(k, e)| e.as_ref().map(|e| (k, e)));
        if let Some((pk, err)) = failed_parent {
            let e = RunError::InputFailed {
                stage: self.node(pk).map_or("input", |n| n.stage),
                key: *pk,
                error: err.clone(),
            };
            self.progress.finish(stage, false, true);
            return vec![self.failed_row(key, Some(&node), worker, &e)];
        }
        let started = crate::store::unix_now();
        let t0 = std::time::Instant::now();
        let fetched = self.store.get_or_compute(&key, |dir| {
            let outcome = catch_unwind(AssertUnwindSafe(|| self.compute(&node, dir)))
                .unwrap_or_else(|p| Err(RunError::Panicked(panic_message(p.as_ref()))))?;
            Ok::<_, RunError>(Meta {
                key: key.hex(),
                stage: stage.to_owned(),
                version: node.version,
                inputs: node.parents.iter().map(|k| k.hex()).collect(),
                config: node.canon.clone(),
                metrics: outcome.metrics,
                rows: outcome.rows,
                artifacts: BTreeMap::new(),
                provenance: Provenance {
                    host: self.host.clone(),
                    started_at: started,
                    duration_s: t0.elapsed().as_secs_f64(),
                    cotune_version: COTUNE_VERSION.to_owned(),
                },
            })
        });
        let fetched = match fetched.map_err(RunError::from).and_then(|r| r) {
            Ok(f) => f,
            Err(e) => {
                self.progress.finish(stage, false, true);
                return vec![self.failed_row(key, Some(&node), worker, &e)];
            }
        };
        if let Some(why) = &fetched.repaired {
            self.progress.println(&format!(
                "store: entry {} was damaged ({why}); recomputed",
                key.short()
            ));
        }
        self.progress.finish(stage, fetched.cached, false);
        let meta = fetched.meta;
        let mut base = self.base_row(key, Some(&node), worker, None);
        base.insert("cached".into(), Value::Bool(fetched.cached));
        base.insert("host".into(), s(meta.provenance.host.clone()));
        base.insert("started_at".into(), Value::F64(meta.provenance.started_at));
        base.insert("duration_s".into(), Value::F64(meta.provenance.duration_s));
        base.insert(
            "cotune_version".into(),
            s(meta.provenance.cotune_version.clone()),
        );
        let merge = |extra: &Row| {
            let mut row = base.clone();
            for (k, v) in extra {
                row.entry(k.clone()).or_insert_with(|| v.clone());
            }
            row
        };
        if meta.rows.is_empty() {
            vec![merge(&meta.metrics)]
        } else {
            meta.rows.iter().map(merge).collect()
        }
    }

    fn failed_row(&self, key: AnyKey, node: Option<&Node>, worker: usize, e: &RunError) -> Row {
        self.base_row(key, node, worker, Some(e.to_string()))
    }

    /// The columns every row of an instance has: keys, status, config (its own and its primary
    /// ancestors'), provenance.
    fn base_row(
        &self,
        key: AnyKey,
        node: Option<&Node>,
        worker: usize,
        error: Option<String>,
    ) -> Row {
        let mut row = Row::new();
        row.insert("key".into(), s(key.hex()));
        row.insert("experiment".into(), s(self.experiment.clone()));
        row.insert(
            "status".into(),
            s(if error.is_some() { "failed" } else { "ok" }),
        );
        row.insert("error".into(), error.map_or(Value::Null, Value::Str));
        row.insert("worker".into(), Value::I64(worker as i64));
        row.insert("host".into(), s(self.host.clone()));
        row.insert("cached".into(), Value::Bool(false));
        row.insert("cotune_version".into(), s(COTUNE_VERSION));
        let Some(node) = node else { return row };
        // Farthest ancestor first, so that a nearer stage's column wins a shared name.
        if let Ok(registry) = self.registry.read() {
            let mut chain = vec![];
            let mut up = node.planned.primary();
            while let Some(n) = up.and_then(|k| registry.get(&k)) {
                up = n.planned.primary();
                chain.push(n);
            }
            for ancestor in chain.iter().rev() {
                ancestor.planned.trial_columns(&mut row);
            }
        }
        node.planned.parent_columns(&mut row);
        node.planned.trial_columns(&mut row);
        row
    }

    /// Runs the node's stage (inside the store's temporary folder).
    fn compute(&self, node: &Node, dir: &std::path::Path) -> Result<Outcome, RunError> {
        let stage = self
            .table
            .get(node.stage)
            .ok_or(RunError::NoSuchStage { stage: node.stage })?;
        let ctx = RunCtx::new(dir, &self.measure);
        stage.run(node, &self.resolver(), &ctx)
    }
}

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}
