//! `RunStage`: a stage as a `reduce` keyed by the instance's key, going through the store.
//!
//! `reduce` is the right place for stage work: it runs once per key and time whose input
//! changed, not for every update like `map` or `join` closures, and it is not called when a
//! key's input becomes empty (its output is simply retracted). Re-inserting a key calls it
//! again, and the store makes that a hit.

use crate::engine::{Engine, Parent};
use crate::key::AnyKey;
use differential_dataflow::VecCollection;
use results::Row;
use std::sync::Arc;

/// Runs a stage on a collection of (instance key, parent status).
pub trait RunStage<'scope> {
    /// Each key's instance is executed (or fetched) once its parents are known; the output
    /// holds its result rows.
    fn run_stage(
        self,
        name: &str,
        engine: Arc<Engine>,
        worker: usize,
    ) -> VecCollection<'scope, u64, (AnyKey, Row), isize>;
}

impl<'scope> RunStage<'scope> for VecCollection<'scope, u64, (AnyKey, Parent), isize> {
    fn run_stage(
        self,
        name: &str,
        engine: Arc<Engine>,
        worker: usize,
    ) -> VecCollection<'scope, u64, (AnyKey, Row), isize> {
        self.reduce_named(&format!("Run {name}"), move |key, parents, out| {
            let parents: Vec<Parent> = parents.iter().map(|(p, _)| (*p).clone()).collect();
            for row in engine.execute(*key, &parents, worker) {
                out.push((row, 1));
            }
        })
    }
}
