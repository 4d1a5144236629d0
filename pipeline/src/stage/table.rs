//! The stage table: the stages in pipeline order, each behind one erased interface that the
//! planner, the engine and the dataflow use.

use super::error::RunError;
use super::parents::Resolver;
use super::{Outcome, Parents, Planned, RunCtx, Stage, StageKind};
use crate::experiment::{Experiment, SourceMap};
use crate::plan::{Node, Plan, PlanError, Planner};
use std::sync::Arc;

/// A stage with its kind erased.
pub(crate) trait ErasedStage: Send + Sync {
    fn name(&self) -> &'static str;
    fn version(&self) -> u32;
    fn parent_stages(&self) -> Vec<&'static str>;
    fn requested_by(&self) -> &'static [&'static str];
    fn plan(&self, planner: &mut Planner) -> Result<(), PlanError>;
    fn run(&self, node: &Node, resolver: &Resolver, ctx: &RunCtx) -> Result<Outcome, RunError>;
}

struct Entry<S>(S);

impl<S: Stage> ErasedStage for Entry<S> {
    fn name(&self) -> &'static str {
        S::Kind::NAME
    }
    fn version(&self) -> u32 {
        self.0.version()
    }
    fn parent_stages(&self) -> Vec<&'static str> {
        <<S::Kind as StageKind>::Parents as Parents>::stages()
    }
    fn requested_by(&self) -> &'static [&'static str] {
        S::Kind::REQUESTED_BY
    }
    fn plan(&self, planner: &mut Planner) -> Result<(), PlanError> {
        self.0.plan(planner)
    }
    fn run(&self, node: &Node, resolver: &Resolver, ctx: &RunCtx) -> Result<Outcome, RunError> {
        let planned: Arc<Planned<S::Kind>> =
            node.planned::<S::Kind>().ok_or(RunError::WrongStage {
                key: node.key,
                found: node.stage,
                expected: S::Kind::NAME,
            })?;
        let inputs = planned.parents.resolve(resolver)?;
        // Compute work holds the measurement lock shared: it waits while another stage on this
        // host times something, and timings wait for it. A measuring stage's work outside its
        // timings too (an evaluation's accuracy pass ran beside another worker's tuning, whose
        // threads then waited for a CPU 15 % of the time).
        ctx.hold_shared()?;
        let outcome = self.0.run(ctx, &planned.trial, inputs);
        ctx.release();
        let mut outcome = outcome?;
        // A measuring stage's rows say how busy the machine was while it measured.
        let waited = if S::MEASURES {
            ctx.cpu_wait()
        } else {
            f64::NAN
        };
        if waited.is_finite() {
            for row in std::iter::once(&mut outcome.metrics).chain(&mut outcome.rows) {
                row.insert("cpu_wait".into(), results::Value::F64(waited));
            }
        }
        Ok(outcome)
    }
}

/// A stage table that does not wire up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// Two stages share a name.
    #[error("stage table: `{0}` appears twice")]
    Duplicate(&'static str),
    /// A stage reads or is requested by a stage that does not come before it.
    #[error("stage table: `{stage}` needs `{needs}` earlier in the table")]
    Order {
        /// The stage.
        stage: &'static str,
        /// What it needs before it.
        needs: &'static str,
    },
    /// More stages than the dataflow's records can index.
    #[error("stage table: at most 255 stages")]
    TooMany,
}

/// The stages of a build, in pipeline order.
#[derive(Clone, Default)]
pub struct StageTable {
    entries: Vec<Arc<dyn ErasedStage>>,
}

impl StageTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a stage (its parents and requesters must come earlier; [`Self::check`] says).
    pub fn with<S: Stage>(mut self, stage: S) -> Self {
        self.entries.push(Arc::new(Entry(stage)));
        self
    }

    /// Checks that names are unique and that every stage comes after the stages it reads and
    /// the stages that request it.
    pub fn check(&self) -> Result<(), TableError> {
        if self.entries.len() > usize::from(u8::MAX) {
            return Err(TableError::TooMany);
        }
        for (i, e) in self.entries.iter().enumerate() {
            let before: Vec<&str> = self.entries[..i].iter().map(|x| x.name()).collect();
            if before.contains(&e.name()) {
                return Err(TableError::Duplicate(e.name()));
            }
            // Parents must come earlier; so must the requesters the table holds (a table
            // without a requester's stage simply never plans its requests).
            let all = self.names();
            let requesters = e.requested_by().iter().copied().filter(|r| all.contains(r));
            for n in e.parent_stages().into_iter().chain(requesters) {
                if !before.contains(&n) {
                    return Err(TableError::Order {
                        stage: e.name(),
                        needs: n,
                    });
                }
            }
        }
        Ok(())
    }

    /// Stage names, in pipeline order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.name()).collect()
    }

    /// The index of a stage (the dataflow's records name stages by it).
    pub fn index(&self, name: &str) -> Option<u8> {
        self.entries
            .iter()
            .position(|e| e.name() == name)
            .and_then(|i| u8::try_from(i).ok())
    }

    /// The version of a stage.
    pub fn version(&self, name: &str) -> Option<u32> {
        self.get(name).map(|e| e.version())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&dyn ErasedStage> {
        self.entries
            .iter()
            .find(|e| e.name() == name)
            .map(|e| e.as_ref())
    }

    pub(crate) fn entries(&self) -> &[Arc<dyn ErasedStage>] {
        &self.entries
    }

    /// Plans an experiment: every stage adds its instances, in table order.
    pub fn plan(&self, exp: &Experiment, map: &SourceMap) -> Result<Plan, PlanError> {
        let mut planner = Planner::new(exp, map, self);
        for e in &self.entries {
            e.plan(&mut planner)?;
        }
        planner.finish()
    }
}
