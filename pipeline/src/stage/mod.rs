//! The seam between the engine and the stages: one trait per stage kind, typed inputs and
//! outputs, and one table that wires them.
//!
//! - A **stage kind** ([`StageKind`]) is a marker type that names the stage, its [`Trial`]
//!   (the config its key covers and its rows show, declared once in [`Trial::describe`]) and its
//!   [`Parents`] (typed parent keys such as `Key<Train>`, whose results it reads).
//! - A **stage** ([`Stage`]) implements a kind: its version, how it plans its instances from the
//!   experiment and the instances planned before it, and how it runs one instance from its trial
//!   and its resolved inputs ([`Done`]; their own inputs' configs through [`Upstream`]). The
//!   product's stages are in [`crate::real`]; the engine's tests bring their own
//!   implementations of the same kinds.
//! - A **stage table** ([`StageTable`]) lists the stages in pipeline order. The planner, the
//!   dataflow, the progress bars and the result tables all come from it: adding a stage is one
//!   module and one line of the table.

mod error;
mod parents;
mod table;

pub use error::{RunError, StageError};
pub use parents::{Done, Parents, Resolver, Upstream};
pub use table::{StageTable, TableError};

use crate::fields::Fields;
use crate::key::{AnyKey, CanonConfig};
use crate::plan::{PlanError, Planner};
use crate::store::{MeasureGuard, MeasureLock};
use kernels::{CpuWait, Waited};
use results::Row;
use std::fmt::Debug;
use std::path::Path;
use std::sync::Mutex;

/// A stage kind: its name, its trial type and its parents. Implemented by marker types
/// (`enum Train {}`) next to their trial.
pub trait StageKind: 'static + Send + Sync {
    /// The stage's name: in keys, the store, the result folders and the progress bars.
    const NAME: &'static str;
    /// The config of one instance.
    type Trial: Trial;
    /// The typed keys of its inputs.
    type Parents: Parents;
    /// Stages whose successful instances ask for this stage's instances without being inputs
    /// of their keys (a kernel tuning is shared by every pruned model of the same structure, so
    /// it is requested by prunes, never keyed by them). An instance nobody requests and that has
    /// no parents runs as a root.
    const REQUESTED_BY: &'static [&'static str] = &[];
}

/// The config of one stage instance, with its fields declared once.
pub trait Trial: Clone + Debug + PartialEq + Send + Sync + 'static {
    /// Visits every field in key order: what the key covers and what the rows show.
    fn describe(&self, f: &mut Fields);
    /// A short human label (`cotune plan`, logs).
    fn label(&self) -> String;

    /// The canonical config the key covers.
    fn canon(&self) -> CanonConfig {
        let mut c = CanonConfig::new();
        self.describe(&mut Fields::key(&mut c));
        c
    }

    /// Writes the config columns of a row.
    fn columns(&self, row: &mut Row) {
        self.describe(&mut Fields::columns(row));
    }
}

/// The trial type of a kind.
pub type TrialOf<K> = <K as StageKind>::Trial;
/// The resolved inputs of a kind.
pub type InputsOf<K> = <<K as StageKind>::Parents as Parents>::Resolved;

/// A planned instance: its trial and its typed parents.
pub struct Planned<K: StageKind> {
    /// The config.
    pub trial: K::Trial,
    /// The inputs.
    pub parents: K::Parents,
}

// By hand: a derive would ask the marker `K` itself for Clone, Debug and PartialEq.
impl<K: StageKind> Clone for Planned<K> {
    fn clone(&self) -> Self {
        Planned {
            trial: self.trial.clone(),
            parents: self.parents.clone(),
        }
    }
}

impl<K: StageKind> Debug for Planned<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(K::NAME)
            .field("trial", &self.trial)
            .field("parents", &self.parents)
            .finish()
    }
}

impl<K: StageKind> PartialEq for Planned<K> {
    fn eq(&self, other: &Self) -> bool {
        self.trial == other.trial && self.parents == other.parents
    }
}

/// What a stage instance produced besides its artifacts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The instance's metrics (one result row).
    pub metrics: Row,
    /// Extra rows: kernel_tune has one per measured point (the metrics row then summarises).
    pub rows: Vec<Row>,
}

/// Run-time context of one stage instance.
pub struct RunCtx<'a> {
    /// Empty folder for the instance's artifacts.
    pub out_dir: &'a Path,
    pub(crate) measure: &'a MeasureLock,
    /// The measurement lock held shared while the instance runs (given up while it holds it
    /// exclusively, [`RunCtx::measuring`]).
    pub(crate) shared: Mutex<Option<MeasureGuard>>,
    /// What the process's threads ran and waited for a CPU while the instance held the
    /// measurement lock ([`RunCtx::measuring`]); `None` until it is held, or where the system
    /// does not say.
    pub(crate) waited: Mutex<Option<Waited>>,
}

impl<'a> RunCtx<'a> {
    pub(crate) fn new(out_dir: &'a Path, measure: &'a MeasureLock) -> Self {
        RunCtx {
            out_dir,
            measure,
            shared: Mutex::new(None),
            waited: Mutex::new(None),
        }
    }

    /// Holds the measurement lock shared for the rest of the instance (the engine does, around
    /// every stage's `run`): no timing on this host overlaps its work.
    pub(crate) fn hold_shared(&self) -> Result<(), StageError> {
        let guard = self.measure.shared().map_err(StageError::MeasureLock)?;
        *self.shared.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
        Ok(())
    }

    /// Gives up the shared hold (at the end of the instance).
    pub(crate) fn release(&self) {
        drop(self.shared.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Holds the per-host measurement lock exclusively (for a stage with
    /// [`Stage::MEASURES`], around its timings only), in place of the instance's shared hold,
    /// which it takes back when done. While it is held, the engine watches how long the
    /// process's threads wait for a CPU: the instance's rows get `cpu_wait`. One at a time:
    /// an instance that held two at once (nested, or from two threads) would wait for itself.
    pub fn measuring(&self) -> Result<Measuring<'_>, StageError> {
        // Its own shared hold (another open file of the lock) would keep the exclusive one
        // waiting for ever.
        let had_shared = self
            .shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some();
        let lock = self.measure.exclusive().map_err(StageError::MeasureLock)?;
        Ok(Measuring {
            since: CpuWait::now(),
            into: &self.waited,
            lock: Some(lock),
            back: had_shared.then_some((self.measure, &self.shared)),
        })
    }

    /// The share of their runnable time the process's threads waited for a CPU while the
    /// measurement lock was held (NaN where it never was, or the system does not say).
    pub(crate) fn cpu_wait(&self) -> f64 {
        let w = self.waited.lock().unwrap_or_else(|e| e.into_inner());
        w.map_or(f64::NAN, |w| w.share())
    }
}

/// The measurement lock, held ([`RunCtx::measuring`]). Released on drop, when what the
/// process's threads ran and waited meanwhile is added to the instance's.
pub struct Measuring<'a> {
    since: Option<CpuWait>,
    into: &'a Mutex<Option<Waited>>,
    lock: Option<MeasureGuard>,
    /// Where to take the instance's shared hold back to, if it had one.
    back: Option<(&'a MeasureLock, &'a Mutex<Option<MeasureGuard>>)>,
}

impl Drop for Measuring<'_> {
    fn drop(&mut self) {
        if let (Some(before), Some(now)) = (self.since.take(), CpuWait::now()) {
            let mut w = self.into.lock().unwrap_or_else(|e| e.into_inner());
            *w.get_or_insert_with(Waited::default) += now.since(&before);
        }
        drop(self.lock.take());
        // Where the shared hold cannot be taken back, the rest of the instance goes on
        // without it, as it would have before shared holds existed.
        if let Some((measure, slot)) = self.back {
            if let Ok(guard) = measure.shared() {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
            }
        }
    }
}

/// A stage: the implementation of a kind.
pub trait Stage: Send + Sync + 'static {
    /// The kind it implements.
    type Kind: StageKind;
    /// True when the stage times things: it takes the measurement lock exclusively
    /// ([`RunCtx::measuring`]) around its timings, and its rows get `cpu_wait`. Every stage's
    /// `run` otherwise holds the lock shared (the engine takes it), so that no stage's work
    /// overlaps a timing on this host (the engine's own reading, hashing and writing of store
    /// entries and tables does not hold it).
    const MEASURES: bool = false;

    /// The stage version its keys cover: bump it when its results change meaning.
    fn version(&self) -> u32;

    /// Adds this stage's instances to the plan, from the experiment and the instances of the
    /// stages before it in the table.
    fn plan(&self, planner: &mut Planner) -> Result<(), PlanError>;

    /// Runs one instance. `inputs` are its parents' finished entries.
    fn run(
        &self,
        ctx: &RunCtx,
        trial: &TrialOf<Self::Kind>,
        inputs: InputsOf<Self::Kind>,
    ) -> Result<Outcome, StageError>;
}

/// A node's planned instance with its type erased (the registry and the dataflow hold these).
pub(crate) trait AnyPlanned: Debug + Send + Sync + 'static {
    /// The trial's config columns.
    fn trial_columns(&self, row: &mut Row);
    /// The parent-key columns (`train_key`, `kernel_tune_keys`, …).
    fn parent_columns(&self, row: &mut Row);
    /// The parent whose config columns rows inherit.
    fn primary(&self) -> Option<AnyKey>;
    /// The trial's label.
    fn label(&self) -> String;
    /// For downcasting to `Planned<K>`.
    fn into_any(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync>;
}

impl<K: StageKind> AnyPlanned for Planned<K> {
    fn trial_columns(&self, row: &mut Row) {
        self.trial.columns(row);
    }
    fn parent_columns(&self, row: &mut Row) {
        self.parents.columns(row);
    }
    fn primary(&self) -> Option<AnyKey> {
        self.parents.primary()
    }
    fn label(&self) -> String {
        self.trial.label()
    }
    fn into_any(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

#[cfg(test)]
mod measuring_tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A measuring instance gives up its shared hold while it times (or it would wait for
    /// itself), waits for another instance's work to finish, and takes the hold back after.
    #[test]
    fn a_timing_waits_for_other_work_and_takes_its_shared_hold_back() {
        let dir = tempfile::tempdir().unwrap();
        let lock = MeasureLock::at(dir.path().join("measure.lock"));
        let (a, b) = (
            RunCtx::new(dir.path(), &lock),
            RunCtx::new(dir.path(), &lock),
        );
        a.hold_shared().unwrap();
        b.hold_shared().unwrap();
        let b_done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(200));
                b_done.store(true, Ordering::SeqCst);
                b.release();
            });
            let timing = a.measuring().unwrap();
            assert!(b_done.load(Ordering::SeqCst), "timed while other work ran");
            assert!(a.shared.lock().unwrap().is_none());
            drop(timing);
        });
        assert!(
            a.shared.lock().unwrap().is_some(),
            "the shared hold is back"
        );
        a.release();
        // With no hold of its own (a stage run outside the engine), none is taken after.
        drop(a.measuring().unwrap());
        assert!(a.shared.lock().unwrap().is_none());
    }
}
