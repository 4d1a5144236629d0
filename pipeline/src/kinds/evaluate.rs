//! The evaluate stage kind: one pruned model run end to end through its layers' tuned kernels
//! on one backend.

use super::kernel_tune::{DeviceState, KernelTune};
use super::prune::Prune;
use crate::fields::{canon_u64s, Fields, Tag};
use crate::key::{CanonValue, Key};
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use results::Value;
use stages::kernel_tune::Backend;

/// The evaluate stage.
pub enum Evaluate {}

impl StageKind for Evaluate {
    const NAME: &'static str = "evaluate";
    type Trial = EvalTrial;
    /// The pruned model, then the tunings of its layers (per layer, per batch tokens).
    type Parents = (Key<Prune>, Vec<Key<KernelTune>>);
}

/// One evaluation of one pruned model on one backend.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalTrial {
    /// Backend.
    pub backend: Backend,
    /// Batch sizes at which latency is measured.
    pub batch_sizes: Vec<u64>,
    /// The device.
    pub device: DeviceState,
    /// Run layers through their dense kernel where their sparse kernel loses (`[evaluate]
    /// dense_where_faster`; CPU only). In the key only when set, so that the evaluations of
    /// files without it keep their keys.
    pub dense_where_faster: bool,
}

impl Trial for EvalTrial {
    fn describe(&self, f: &mut Fields) {
        f.both("backend", "evaluate.backend", &Tag(self.backend));
        f.key_only("batch_sizes", || {
            canon_u64s(self.batch_sizes.iter().copied())
        });
        f.both("device", "device", &self.device);
        if self.dense_where_faster {
            f.key_only("dense_where_faster", || CanonValue::Bool(true));
        }
        f.column_only("evaluate.dense_where_faster", || {
            Value::Bool(self.dense_where_faster)
        });
    }

    fn label(&self) -> String {
        format!("{} batch sizes {:?}", self.backend, self.batch_sizes)
    }
}

/// Plans one evaluation per (prune, backend), reading the tunings that prune requested on
/// that backend. `device` is the backend's device as the kernel-tune stage found it.
pub fn plan(p: &mut Planner, device: impl Fn(Backend) -> DeviceState) -> Result<(), PlanError> {
    let exp = p.experiment();
    for (prune, planned) in p.instances::<Prune>() {
        // The unified search's accuracy proxies are measured by their pruning alone.
        if planned.trial.note.as_ref().is_some_and(|n| n.proxy) {
            continue;
        }
        let requested = p.requested_by::<KernelTune>(prune.any());
        for &backend in &exp.backends {
            // Layers of one format share a tuning: each tuning once, in first-request order.
            let mut tunings: Vec<Key<KernelTune>> = vec![];
            for (k, t) in &requested {
                if t.trial.backend == backend && !tunings.contains(k) {
                    tunings.push(*k);
                }
            }
            let trial = EvalTrial {
                backend,
                batch_sizes: exp.batch_sizes.clone(),
                device: device(backend),
                dense_where_faster: exp.dense_where_faster,
            };
            p.add::<Evaluate>(trial, (prune, tunings));
        }
    }
    Ok(())
}
