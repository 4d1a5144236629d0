//! The plan: every stage instance of an experiment, keyed, with its parents.
//!
//! A plan is computed from the experiment file alone (and the data files' digests), before
//! anything runs: `cotune plan` prints it against the store, `run` feeds its edges into the
//! dataflow, and `watch` diffs two plans into insertions and retractions.

use crate::key::{AnyKey, CanonConfig};
use crate::trial::{DatasetTrial, EvalTrial, LayerFormat, PruneTrial, TrainTrial, TuneTrial};
use std::collections::{BTreeMap, BTreeSet};

/// A stage instance's config.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    /// Dataset.
    Dataset(DatasetTrial),
    /// Training.
    Train(TrainTrial),
    /// Pruning, with the format each layer takes.
    Prune(PruneTrial, Vec<LayerFormat>),
    /// Kernel tuning.
    Tune(TuneTrial),
    /// Evaluation.
    Eval(EvalTrial),
}

impl Spec {
    /// Stage name.
    pub fn stage(&self) -> &'static str {
        match self {
            Spec::Dataset(_) => "dataset",
            Spec::Train(_) => "train",
            Spec::Prune(..) => "prune",
            Spec::Tune(_) => "kernel_tune",
            Spec::Eval(_) => "evaluate",
        }
    }
}

/// One stage instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its config.
    pub spec: Spec,
    /// Keys of its inputs, in the order the key covers them (evaluate: prune key, then the
    /// tunings of its layers).
    pub parents: Vec<AnyKey>,
    /// Stage version the key covers.
    pub version: u32,
    /// Canonical config the key covers.
    pub canon: CanonConfig,
}

/// The dataflow's input records, derived from the nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edges {
    /// Dataset keys.
    pub datasets: BTreeSet<AnyKey>,
    /// (dataset, train).
    pub trains: BTreeSet<(AnyKey, AnyKey)>,
    /// (train, prune).
    pub prunes: BTreeSet<(AnyKey, AnyKey)>,
    /// (prune, tune): tunings a pruned model's layers need.
    pub prune_tunes: BTreeSet<(AnyKey, AnyKey)>,
    /// Tunings with no prune parent (kernel-only studies).
    pub root_tunes: BTreeSet<AnyKey>,
    /// (prune, eval).
    pub evals: BTreeSet<(AnyKey, AnyKey)>,
    /// (tune, eval).
    pub eval_tunes: BTreeSet<(AnyKey, AnyKey)>,
}

/// A whole experiment, expanded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Experiment name.
    pub experiment: String,
    /// Every instance by key.
    pub nodes: BTreeMap<AnyKey, Node>,
    /// The dataflow's input records.
    pub edges: Edges,
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
            *out.entry(n.spec.stage()).or_insert(0) += 1;
        }
        out
    }
}
