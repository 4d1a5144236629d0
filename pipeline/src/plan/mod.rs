//! The plan: every stage instance of an experiment, keyed, with its parents, and the records
//! the dataflow is fed with.
//!
//! A plan is computed from the experiment file alone (and the data files' digests), before
//! anything runs: `cotune plan` prints it against the store, `run` feeds its edges into the
//! dataflow, and `watch` diffs two plans into insertions and retractions. Each stage of the
//! [`crate::stage::StageTable`] adds its own instances through the [`Planner`].

mod planner;

pub use planner::Planner;

use crate::experiment::ExperimentError;
use crate::key::{AnyKey, CanonConfig};
use crate::stage::{AnyPlanned, Planned, StageKind};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Why an experiment could not be planned: an [`ExperimentError`] (`path:line:col`, exit 2).
pub type PlanError = ExperimentError;

/// One stage instance.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its key.
    pub key: AnyKey,
    /// Its stage.
    pub stage: &'static str,
    /// Keys of its inputs, in the order the key covers them.
    pub parents: Vec<AnyKey>,
    /// Stage version the key covers.
    pub version: u32,
    /// Canonical config the key covers.
    pub canon: CanonConfig,
    pub(crate) planned: Arc<dyn AnyPlanned>,
}

impl Node {
    /// The typed instance, if the node is of stage `K`.
    pub fn planned<K: StageKind>(&self) -> Option<Arc<Planned<K>>> {
        if self.stage != K::NAME {
            return None;
        }
        self.planned
            .clone()
            .into_any()
            .downcast::<Planned<K>>()
            .ok()
    }

    /// The trial's short label.
    pub fn label(&self) -> String {
        self.planned.label()
    }
}

impl PartialEq for Node {
    // The key covers the stage, version, config and inputs.
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

/// How an instance enters the dataflow.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum EdgeKind {
    /// It has no inputs and nobody requests it: it runs as soon as it is planned.
    Root,
    /// `from` is one of its inputs: it runs when all of them are done, and fails if one failed.
    Input,
    /// `from` requests it: it runs once one of its requesters has succeeded.
    Request,
}

/// One input record of the dataflow.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Edge {
    /// The stage (table index) of `to`.
    pub stage: u8,
    /// The stage (table index) of `from`.
    pub from_stage: u8,
    /// How `to` depends on `from`.
    pub kind: EdgeKind,
    /// The input or requester (`to` itself for a root).
    pub from: AnyKey,
    /// The instance.
    pub to: AnyKey,
}

/// A whole experiment, expanded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Experiment name.
    pub experiment: String,
    /// Every instance by key.
    pub nodes: BTreeMap<AnyKey, Node>,
    /// The dataflow's input records.
    pub edges: BTreeSet<Edge>,
}

impl Plan {
    /// Digest of the experiment's meaning: blake3 over its sorted keys (cosmetic edits keep it).
    pub fn digest(&self) -> String {
        let mut h = blake3::Hasher::new_derive_key("cotune 2026-11 experiment digest v1");
        h.update(self.experiment.as_bytes());
        for k in self.nodes.keys() {
            h.update(k.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    /// Number of instances per stage.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for n in self.nodes.values() {
            *out.entry(n.stage).or_insert(0) += 1;
        }
        out
    }
}
