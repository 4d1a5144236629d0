//! The calibrate stage: measures a kernel family's calibration sample on this CPU and fits the
//! cost model's corrections; writes `calibration.txt` ([`kernels::Calibration::to_text`]) and
//! `sample.csv` (every measured point with both models' predictions).

use super::kernel_tune::{device, isa, ready};
use super::rows;
use crate::kinds::{Calibrate, CalibrateTrial};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use kernels::{Calibration, Pattern};
use stages::kernel_tune::calibrate::{calibrate_cpu, CalibrationPlan};
use stages::kernel_tune::{self as tune, Backend};

/// The artifact a calibration writes and its tunings read.
const ARTIFACT: &str = "calibration.txt";

/// The calibrate stage.
pub struct CalibrateStage;

/// The calibration a CPU tuning of `pattern` ranks with: its sparse family's, on this CPU (the
/// dense baseline and the CUDA backend do not calibrate).
pub(super) fn trial(
    backend: Backend,
    pattern: &Pattern,
    rows: u64,
    cols: u64,
) -> Option<CalibrateTrial> {
    let family = *tune::families(backend, pattern, rows as usize, cols as usize).first()?;
    Some(CalibrateTrial {
        plan: CalibrationPlan::cpu(family)?,
        device: device(backend),
        kernel_version: kernels::family_version(&[family]),
    })
}

/// The calibration of a finished calibrate entry.
pub(super) fn read(done: &Done<Calibrate>) -> Result<Calibration, StageError> {
    let path = done.artifact(ARTIFACT);
    let text = std::fs::read_to_string(&path).map_err(StageError::io(&path))?;
    Calibration::from_text(&text)
        .map_err(|e| StageError::Failed(format!("{}: {e}", path.display())))
}

impl Stage for CalibrateStage {
    type Kind = Calibrate;
    const MEASURES: bool = true;

    fn version(&self) -> u32 {
        // 2: each shape's sample measured in rounds, times relative to each round's median.
        2
    }

    /// Planned by the kernel-tune stage, with the tunings that read them.
    fn plan(&self, _p: &mut Planner) -> Result<(), PlanError> {
        Ok(())
    }

    fn run(&self, ctx: &RunCtx, t: &CalibrateTrial, (): ()) -> Result<Outcome, StageError> {
        ready(Backend::Cpu, &t.device)?;
        let done = {
            let _timing = ctx.measuring()?;
            calibrate_cpu(&t.plan)?
        };
        let path = ctx.out_dir.join(ARTIFACT);
        std::fs::write(&path, done.calibration.to_text()).map_err(StageError::io(&path))?;
        let path = ctx.out_dir.join("sample.csv");
        std::fs::write(&path, rows::calibration_sample_csv(&done))
            .map_err(StageError::io(&path))?;
        Ok(Outcome {
            metrics: rows::calibrate(&done, &isa(Backend::Cpu)?),
            rows: vec![],
        })
    }
}
