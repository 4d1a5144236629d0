//! The kernel-tune stage: tunes one format signature on one backend, ranking with its family's
//! calibration on this device when it has one; writes `tuned.txt`.

use super::{calibrate, rows};
use crate::kinds::{
    kernel_tune, Calibrate, CalibrateTrial, DeviceState, KernelTune, TuneFacts, TuneTrial,
};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use kernels::cuda::Gpu;
use kernels::{KernelFamily, Pattern};
use stages::kernel_tune::{self as tune, Backend, TuneSpec};

/// Seconds spent measuring each kernel configuration in a tuning.
const SECONDS_PER_POINT: f64 = 0.05;

/// The kernel-tune stage.
pub struct KernelTuneStage;

/// The device of a backend on this machine, or why there is none.
pub(super) fn device(backend: Backend) -> DeviceState {
    match backend {
        Backend::Cpu => DeviceState::Ready(kernels::cpu_fingerprint()),
        Backend::Cuda => match tune::cuda::shared_device() {
            Ok(d) => DeviceState::Ready(d.info().fingerprint()),
            Err(e) => DeviceState::Unavailable(e.to_string()),
        },
    }
}

/// Fails a trial whose backend could not be opened when it was planned.
pub(super) fn ready(backend: Backend, device: &DeviceState) -> Result<(), StageError> {
    match device {
        DeviceState::Ready(_) => Ok(()),
        DeviceState::Unavailable(why) => Err(StageError::Unavailable {
            backend,
            why: why.clone(),
        }),
    }
}

/// The `isa` column of a backend's rows: the CPU's SIMD level, or the CUDA target (`sm_90`).
pub(super) fn isa(backend: Backend) -> Result<String, StageError> {
    match backend {
        Backend::Cpu => Ok(kernels::isa().to_string()),
        Backend::Cuda => tune::cuda::shared_device()
            .map(|d| d.info().arch.to_owned())
            .map_err(|e| StageError::Unavailable {
                backend,
                why: e.to_string(),
            }),
    }
}

/// The kernel version a tuning's key covers: the families it measures (the format's kernel and
/// the dense baseline, [`tune::families`]), each with its digest from `digest` (the digests
/// this binary was built from, or, in tests, those of edited sources).
pub fn kernel_version_with(
    backend: Backend,
    pattern: &Pattern,
    rows: u64,
    cols: u64,
    digest: impl Fn(KernelFamily) -> String,
) -> String {
    let families = tune::families(backend, pattern, rows as usize, cols as usize);
    kernels::family::family_version_with(&families, digest)
}

impl TuneFacts for KernelTuneStage {
    fn device(&self, backend: Backend) -> DeviceState {
        device(backend)
    }

    fn dtype(&self, backend: Backend, pattern: &Pattern, rows: u64, cols: u64) -> String {
        match backend {
            Backend::Cpu => "f32".into(),
            Backend::Cuda => tune::cuda::dtype(pattern, rows as usize, cols as usize).into(),
        }
    }

    fn kernel_version(&self, backend: Backend, pattern: &Pattern, rows: u64, cols: u64) -> String {
        kernels::family_version(&tune::families(
            backend,
            pattern,
            rows as usize,
            cols as usize,
        ))
    }

    fn calibration(
        &self,
        backend: Backend,
        pattern: &Pattern,
        rows: u64,
        cols: u64,
    ) -> Option<CalibrateTrial> {
        calibrate::trial(backend, pattern, rows, cols)
    }
}

impl Stage for KernelTuneStage {
    type Kind = KernelTune;
    const MEASURES: bool = true;

    fn version(&self) -> u32 {
        // 3: points measured in interleaved rounds (`stages::kernel_tune::rounds`).
        // 4: a dense format is its own baseline (measured once; it was measured twice and read
        // up to 1.3x faster than itself); the library baseline's rows say `isa = library`.
        4
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        kernel_tune::plan(p, self)
    }

    fn run(
        &self,
        ctx: &RunCtx,
        t: &TuneTrial,
        cal: Option<Done<Calibrate>>,
    ) -> Result<Outcome, StageError> {
        ready(t.backend, &t.device)?;
        let sig =
            kernels::FormatSignature::for_pattern(&t.pattern, t.rows as usize, t.cols as usize)?;
        let n = t.batch_tokens as usize;
        let spec = TuneSpec {
            sig,
            n,
            strategy: t.strategy.clone(),
            seconds_per_point: SECONDS_PER_POINT,
            backend: t.backend,
            calibration: cal.as_ref().map(calibrate::read).transpose()?,
        };
        let tuned = {
            let _timing = ctx.measuring()?;
            tune::tune(&spec)?
        };
        let cpu = t.backend == Backend::Cpu;
        let (metrics, points) = rows::tune(&tuned, &sig, n, (&isa(t.backend)?, cpu));
        let text = format!(
            "{}\n{}\n",
            tune::format_params(&tuned.best().params),
            tune::format_params(&tuned.dense_best().params)
        );
        let path = ctx.out_dir.join("tuned.txt");
        std::fs::write(&path, text).map_err(StageError::io(&path))?;
        Ok(Outcome {
            metrics,
            rows: points,
        })
    }
}
