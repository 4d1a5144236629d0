//! The engine's shared state within one process, and the execution of one stage instance
//! through the store (called from inside the dataflow's `reduce` operators).

use crate::key::AnyKey;
use crate::plan::{Node, Spec};
use crate::progress::Progress;
use crate::stage::{Ctx, Input, Outcome, StageError, StageSet, TunedLayer};
use crate::store::{EntryState, MeasureLock, Meta, Provenance, Store};
use results::{Row, Value};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

/// A parent's status as its children see it: (key, error if it failed).
pub type Parent = (AnyKey, Option<String>);

/// The cotune version written into results and entries.
pub const COTUNE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Process-wide state shared by the timely workers of one process.
pub struct Engine {
    /// The store.
    pub store: Store,
    /// The stage implementations.
    pub stages: Arc<dyn StageSet>,
    /// Every node planned in this session (watch adds to it before feeding new records).
    pub registry: RwLock<BTreeMap<AnyKey, Node>>,
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
}

fn s(v: impl Into<String>) -> Value {
    Value::Str(v.into())
}

impl Engine {
    fn node(&self, key: &AnyKey) -> Option<Node> {
        self.registry.read().ok()?.get(key).cloned()
    }

    fn meta(&self, key: &AnyKey) -> Result<(Meta, std::path::PathBuf), String> {
        match self.store.read(key) {
            EntryState::Valid(m) => Ok((*m, self.store.entry_dir(key))),
            EntryState::Missing => Err(format!("input {} is missing from the store", key.short())),
            EntryState::Damaged(why) => Err(format!(
                "input {} is damaged in the store: {why}",
                key.short()
            )),
        }
    }

    /// Runs (or fetches) one stage instance and returns its result rows.
    pub fn execute(&self, key: AnyKey, parents: &[Parent], worker: usize) -> Vec<Row> {
        let Some(node) = self.node(&key) else {
            return vec![self.base_row(
                key,
                None,
                worker,
                Some(format!("internal: no plan entry for key {}", key.short())),
            )];
        };
        let stage = node.spec.stage();
        let failed_parent = parents.iter().find_map(|(k, e)| e.as_ref().map(|e| (k, e)));
        if let Some((pk, err)) = failed_parent {
            let stage_of = self.node(pk).map_or("input", |n| n.spec.stage());
            let msg = format!("{stage_of} {} failed: {err}", pk.short());
            self.progress.finish(stage, false, true);
            return vec![self.base_row(key, Some(&node), worker, Some(msg))];
        }
        let started = crate::store::unix_now();
        let t0 = std::time::Instant::now();
        let fetched = self.store.get_or_compute(&key, |dir| {
            let outcome = catch_unwind(AssertUnwindSafe(|| self.compute(&node, dir)))
                .unwrap_or_else(|p| {
                    Err(StageError::new(format!(
                        "stage panicked: {}",
                        panic_message(p.as_ref())
                    )))
                })?;
            Ok::<_, StageError>(Meta {
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
        let fetched = match fetched {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => {
                self.progress.finish(stage, false, true);
                return vec![self.base_row(key, Some(&node), worker, Some(e.0))];
            }
            Err(e) => {
                self.progress.finish(stage, false, true);
                return vec![self.base_row(key, Some(&node), worker, Some(e.to_string()))];
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

    /// The columns every row of an instance has: keys, status, config, provenance.
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
        row.insert("cotune_version".into(), s(crate::engine::COTUNE_VERSION));
        let Some(node) = node else { return row };
        let reg = self.registry.read().ok();
        let parent = |i: usize| {
            node.parents
                .get(i)
                .map(|k| s(k.hex()))
                .unwrap_or(Value::Null)
        };
        let node_of = |k: &AnyKey| reg.as_ref().and_then(|r| r.get(k).cloned());
        match &node.spec {
            Spec::Dataset(d) => d.columns(&mut row),
            Spec::Train(t) => {
                row.insert("dataset_key".into(), parent(0));
                t.columns(&mut row);
            }
            Spec::Prune(p, _) => {
                row.insert("train_key".into(), parent(0));
                if let Some(Spec::Train(t)) = node.parents.first().and_then(node_of).map(|n| n.spec)
                {
                    t.columns(&mut row);
                }
                p.columns(&mut row);
            }
            Spec::Tune(t) => t.columns(&mut row),
            Spec::Eval(e) => {
                row.insert("prune_key".into(), parent(0));
                row.insert(
                    "kernel_tune_keys".into(),
                    Value::ListStr(node.parents.iter().skip(1).map(|k| k.hex()).collect()),
                );
                if let Some(pn) = node.parents.first().and_then(node_of) {
                    if let Spec::Prune(p, _) = &pn.spec {
                        if let Some(Spec::Train(t)) =
                            pn.parents.first().and_then(node_of).map(|n| n.spec)
                        {
                            t.columns(&mut row);
                        }
                        p.columns(&mut row);
                    }
                }
                e.columns(&mut row);
            }
        }
        row
    }

    /// Calls the stage implementation (inside the store's temporary folder).
    fn compute(&self, node: &Node, dir: &std::path::Path) -> Result<Outcome, StageError> {
        let ctx = Ctx {
            out_dir: dir,
            measure: &self.measure,
        };
        let parent_node = |i: usize| -> Result<(AnyKey, Node), StageError> {
            let k = *node
                .parents
                .get(i)
                .ok_or_else(|| StageError::new("internal: missing parent"))?;
            let n = self
                .node(&k)
                .ok_or_else(|| StageError::new("internal: parent not planned"))?;
            Ok((k, n))
        };
        let dataset_of = |train: &Node| -> Result<crate::trial::DatasetTrial, StageError> {
            let dk = *train
                .parents
                .first()
                .ok_or_else(|| StageError::new("internal: train without dataset"))?;
            match self.node(&dk).map(|n| n.spec) {
                Some(Spec::Dataset(d)) => Ok(d),
                _ => Err(StageError::new("internal: dataset not planned")),
            }
        };
        let compute_guard = || {
            self.measure
                .shared()
                .map_err(|e| StageError::new(format!("measurement lock: {e}")))
        };
        match &node.spec {
            Spec::Dataset(d) => {
                let _g = compute_guard()?;
                self.stages.run_dataset(&ctx, d)
            }
            Spec::Train(t) => {
                let (_, dn) = parent_node(0)?;
                let Spec::Dataset(d) = &dn.spec else {
                    return Err(StageError::new("internal: bad parent"));
                };
                let _g = compute_guard()?;
                self.stages.run_train(&ctx, t, d)
            }
            Spec::Prune(p, _) => {
                let (tk, tn) = parent_node(0)?;
                let Spec::Train(t) = &tn.spec else {
                    return Err(StageError::new("internal: bad parent"));
                };
                let d = dataset_of(&tn)?;
                let (meta, dir) = self.meta(&tk).map_err(StageError)?;
                let _g = compute_guard()?;
                self.stages.run_prune(
                    &ctx,
                    p,
                    t,
                    &Input {
                        dir: &dir,
                        metrics: &meta.metrics,
                    },
                    &d,
                )
            }
            Spec::Tune(t) => self.stages.run_kernel_tune(&ctx, t),
            Spec::Eval(e) => {
                let (pk, pn) = parent_node(0)?;
                let Spec::Prune(p, _) = &pn.spec else {
                    return Err(StageError::new("internal: bad parent"));
                };
                let tn = self
                    .node(
                        pn.parents
                            .first()
                            .ok_or_else(|| StageError::new("internal"))?,
                    )
                    .ok_or_else(|| StageError::new("internal: train not planned"))?;
                let Spec::Train(t) = &tn.spec else {
                    return Err(StageError::new("internal: bad parent"));
                };
                let d = dataset_of(&tn)?;
                let (pmeta, pdir) = self.meta(&pk).map_err(StageError)?;
                let mut tunes = vec![];
                for tk in node.parents.iter().skip(1) {
                    let Some(Spec::Tune(trial)) = self.node(tk).map(|n| n.spec) else {
                        return Err(StageError::new("internal: tuning not planned"));
                    };
                    let (meta, dir) = self.meta(tk).map_err(StageError)?;
                    tunes.push((trial, meta, dir));
                }
                let tuned: Vec<TunedLayer> = tunes
                    .iter()
                    .map(|(trial, meta, dir)| TunedLayer {
                        trial,
                        input: Input {
                            dir,
                            metrics: &meta.metrics,
                        },
                    })
                    .collect();
                self.stages.run_evaluate(
                    &ctx,
                    e,
                    p,
                    t,
                    &Input {
                        dir: &pdir,
                        metrics: &pmeta.metrics,
                    },
                    &d,
                    &tuned,
                )
            }
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}
