//! The planner: what each stage's `plan` adds instances through.

use super::{Edge, EdgeKind, Node, Plan, PlanError};
use crate::experiment::{Experiment, SourceMap};
use crate::key::{stage_key, AnyKey, Key};
use crate::stage::{AnyPlanned, Parents, Planned, StageKind, StageTable, Trial};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// Collects the instances the stages plan, in table order.
pub struct Planner<'a> {
    exp: &'a Experiment,
    map: &'a SourceMap,
    table: &'a StageTable,
    plan: Plan,
    order: Vec<AnyKey>,
    requests: BTreeMap<AnyKey, Vec<AnyKey>>,
    unknown: Option<&'static str>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(exp: &'a Experiment, map: &'a SourceMap, table: &'a StageTable) -> Self {
        Planner {
            exp,
            map,
            table,
            plan: Plan {
                experiment: exp.name.clone(),
                ..Plan::default()
            },
            order: vec![],
            requests: BTreeMap::new(),
            unknown: None,
        }
    }

    /// The validated experiment.
    pub fn experiment(&self) -> &'a Experiment {
        self.exp
    }

    /// An error at a span of the experiment file (`0..0`: its start).
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> PlanError {
        self.map.error(span, message)
    }

    /// An error at the header of table `[section]` of the experiment file, prefixed with it;
    /// `section.key` puts it at that key of the table instead (at the header, prefixed, if
    /// the table does not set the key).
    pub fn section_error(&self, section: &str, message: impl std::fmt::Display) -> PlanError {
        if let Some((table, key)) = section.split_once('.') {
            let span = self.map.key(table, key);
            if span != self.map.section(table) {
                return self.map.error(span, message.to_string());
            }
            return self.section_error(table, message);
        }
        self.map
            .error(self.map.section(section), format!("[{section}]: {message}"))
    }

    fn index(&mut self, stage: &'static str) -> u8 {
        self.table.index(stage).unwrap_or_else(|| {
            self.unknown.get_or_insert(stage);
            0
        })
    }

    /// Adds an instance of `K` (once: an equal instance is the same key) and returns its key.
    pub fn add<K: StageKind>(&mut self, trial: K::Trial, parents: K::Parents) -> Key<K> {
        let version = self.table.version(K::NAME).unwrap_or_else(|| {
            self.unknown.get_or_insert(K::NAME);
            0
        });
        let canon = trial.canon();
        let inputs = parents.keys();
        let keys: Vec<AnyKey> = inputs.iter().map(|(k, _)| *k).collect();
        let key = stage_key::<K>(version, &canon, &keys);
        let any = key.any();
        if self.plan.nodes.contains_key(&any) {
            return key;
        }
        let stage = self.index(K::NAME);
        for (from, from_stage) in inputs {
            let from_stage = self.index(from_stage);
            self.plan.edges.insert(Edge {
                stage,
                from_stage,
                kind: EdgeKind::Input,
                from,
                to: any,
            });
        }
        let planned: Arc<dyn AnyPlanned> = Arc::new(Planned::<K> { trial, parents });
        self.plan.nodes.insert(
            any,
            Node {
                key: any,
                stage: K::NAME,
                parents: keys,
                version,
                canon,
                planned,
            },
        );
        self.order.push(any);
        key
    }

    /// Records that `by` requests `key` (see [`StageKind::REQUESTED_BY`]).
    pub fn request<K: StageKind, R: StageKind>(&mut self, by: Key<R>, key: Key<K>) {
        let (stage, from_stage) = (self.index(K::NAME), self.index(R::NAME));
        self.plan.edges.insert(Edge {
            stage,
            from_stage,
            kind: EdgeKind::Request,
            from: by.any(),
            to: key.any(),
        });
        self.requests.entry(by.any()).or_default().push(key.any());
    }

    /// The instances of `K` planned so far, in the order they were added.
    pub fn instances<K: StageKind>(&self) -> Vec<(Key<K>, Arc<Planned<K>>)> {
        self.order
            .iter()
            .filter_map(|k| {
                let p = self.plan.nodes.get(k)?.planned::<K>()?;
                Some((k.typed::<K>(), p))
            })
            .collect()
    }

    /// The instances of `K` that `by` requested, in request order (repeats kept).
    pub fn requested_by<K: StageKind>(&self, by: AnyKey) -> Vec<(Key<K>, Arc<Planned<K>>)> {
        self.requests
            .get(&by)
            .into_iter()
            .flatten()
            .filter_map(|k| {
                let p = self.plan.nodes.get(k)?.planned::<K>()?;
                Some((k.typed::<K>(), p))
            })
            .collect()
    }

    /// A planned instance.
    pub fn planned<K: StageKind>(&self, key: Key<K>) -> Option<Arc<Planned<K>>> {
        self.plan.nodes.get(&key.any())?.planned::<K>()
    }

    /// The plan, with a root record for every instance that has no inputs and no requester.
    pub(crate) fn finish(mut self) -> Result<Plan, PlanError> {
        if let Some(stage) = self.unknown {
            return Err(self.map.error(
                0..0,
                format!(
                    "a stage planned `{stage}` instances, but `{stage}` is not in the stage table"
                ),
            ));
        }
        let requested: std::collections::BTreeSet<&AnyKey> =
            self.requests.values().flatten().collect();
        let roots: Vec<(AnyKey, &'static str)> = self
            .plan
            .nodes
            .values()
            .filter(|n| n.parents.is_empty() && !requested.contains(&n.key))
            .map(|n| (n.key, n.stage))
            .collect();
        for (key, stage) in roots {
            let i = self.index(stage);
            self.plan.edges.insert(Edge {
                stage: i,
                from_stage: i,
                kind: EdgeKind::Root,
                from: key,
                to: key,
            });
        }
        Ok(self.plan)
    }
}
