//! The calibrate stage kind: the CPU cost model's corrections for one kernel family on one
//! device, fitted on a fixed sample measured there. Keyed by the family, the device
//! fingerprint, the family's kernel version and the sample plan, never by an experiment, so
//! one calibration serves every tuning of that family on that machine, in every experiment
//! that shares the store, and its cost is paid once. An input of those tunings' keys;
//! requested by the prunes and layer studies that request them (a root in a kernel-only
//! study).

use super::kernel_tune::DeviceState;
use super::layer_study::LayerStudy;
use super::prune::Prune;
use crate::fields::{Fields, Tag};
use crate::key::CanonValue;
use crate::stage::{StageKind, Trial};
use stages::kernel_tune::calibrate::CalibrationPlan;

/// The calibrate stage.
pub enum Calibrate {}

impl StageKind for Calibrate {
    const NAME: &'static str = "calibrate";
    type Trial = CalibrateTrial;
    type Parents = ();
    const REQUESTED_BY: &'static [&'static str] = &[Prune::NAME, LayerStudy::NAME];
}

/// One calibration: a kernel family's sample ([`CalibrationPlan`], which names the family) on
/// a device.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrateTrial {
    /// What is measured, and for which family.
    pub plan: CalibrationPlan,
    /// The device.
    pub device: DeviceState,
    /// The family's kernel version (its source digest).
    pub kernel_version: String,
}

impl Trial for CalibrateTrial {
    fn describe(&self, f: &mut Fields) {
        f.both("family", "calibrate.family", &Tag(self.plan.family));
        f.both("device", "device", &self.device);
        f.key_only("kernel_digest", || {
            CanonValue::Str(self.kernel_version.clone())
        });
        f.both("plan", "calibrate.plan", &self.plan.describe());
    }

    fn label(&self) -> String {
        format!("{} on {}", self.plan.family, self.device.text())
    }
}
