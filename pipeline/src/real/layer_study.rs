//! The layer-study stage: every studied tensor of a checkpoint pruned alone to the trial's
//! point, on its calibration inputs (the user's, or i.i.d. Gaussian); one row per tensor, its
//! masks in the store.

use super::checkpoint::{CALIBRATION, TENSORS};
use super::{masks, rows};
use crate::kinds::Checkpoint;
use crate::kinds::{layer_study, LayerStudy, StudyTrial};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use stages::model::{checkpoint_from_bytes, checkpoint_names, read_checkpoint};
use stages::prune::{gaussian_inputs, study_layer, LayerInputs};
use stages::Method;

/// The layer-study stage.
pub struct LayerStudyStage;

/// What one tensor's study found, as the rows record it.
pub struct TensorStudy {
    /// Tensor name.
    pub name: String,
    /// Matrix rows and columns.
    pub shape: (usize, usize),
    /// `pruned`, or `kept dense: why`.
    pub status: String,
    /// Fraction removed.
    pub sparsity: f64,
    /// ‖W ⊙ mask‖₁ / ‖W‖₁.
    pub retained_l1: f64,
    /// ‖W‖₁.
    pub l1: f64,
    /// Output error without and with the method's update.
    pub output_error: (f64, f64),
    /// `file` or `gaussian`, and the tokens.
    pub calibration: (&'static str, usize),
}

/// An error naming tensor `name`'s first non-finite value, if it has one: a study of weights or
/// inputs with a NaN or an infinity gave rows that looked fine (a retained L1 of 1, no output
/// error) and meant nothing.
fn finite(name: &str, what: &str, values: &[f32], cols: usize) -> Result<(), StageError> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(StageError::Failed(format!(
            "tensor {name}: its {what} hold {} non-finite values, the first {} at row {}, column {}: a study needs finite numbers",
            values.iter().filter(|v| !v.is_finite()).count(),
            values[i],
            i / cols.max(1),
            i % cols.max(1),
        ))),
    }
}

/// A seed per tensor name, so that two tensors of one width get different Gaussian inputs.
fn tensor_seed(seed: u64, name: &str) -> u64 {
    let h = blake3::hash(name.as_bytes());
    seed ^ u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

impl Stage for LayerStudyStage {
    type Kind = LayerStudy;

    fn version(&self) -> u32 {
        // 2: every tensor row carries the point's summary (`point_sparsity`, `point_retained_l1`).
        // 3: a tensor's status is `layer_status` (as `status` the engine's ok/failed hid it);
        // a tensor with non-finite weights fails the study even where it is kept dense (its
        // L1 weighs the point's retained L1); an output error with ‖WX‖ = 0 is infinite
        // unless (W − Ŵ)X = 0 too.
        3
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        layer_study::plan(p)
    }

    fn run(
        &self,
        ctx: &RunCtx,
        s: &StudyTrial,
        checkpoint: Done<Checkpoint>,
    ) -> Result<Outcome, StageError> {
        let c = checkpoint.trial();
        let all = ["*".to_string()];
        let tensors = read_checkpoint(&checkpoint.artifact(TENSORS), &all, false)?;
        let calibration_path = checkpoint.artifact(CALIBRATION);
        // Calibration inputs for the tensors the file names (it may name none of the studied
        // ones: those, like the rest, take Gaussian inputs).
        let inputs = if c.calibration.is_some() && calibration_path.exists() {
            let bytes = std::fs::read(&calibration_path).map_err(|source| StageError::Io {
                path: calibration_path.clone(),
                source,
            })?;
            if checkpoint_names(&bytes, &calibration_path)?.is_empty() {
                vec![]
            } else {
                checkpoint_from_bytes(&bytes, &calibration_path, &all, false)?
            }
        } else {
            vec![]
        };
        let mut studies = vec![];
        let mut masks = vec![];
        for layer in &s.layers {
            let Some(t) = tensors.iter().find(|t| t.name == layer.layer) else {
                return Err(StageError::Artifact {
                    path: checkpoint.artifact(TENSORS),
                    what: format!("no tensor {}", layer.layer),
                });
            };
            let (x, from) = match inputs.iter().find(|x| x.name == t.name) {
                Some(x) => (
                    LayerInputs {
                        p: x.values.clone(),
                        tokens: x.rows,
                        cols: x.cols,
                    },
                    "file",
                ),
                None => (
                    gaussian_inputs(c.tokens as usize, t.cols, tensor_seed(c.seed, &t.name)),
                    "gaussian",
                ),
            };
            // Every tensor's L1 weighs the point's retained L1, so each must be finite.
            finite(&t.name, "weights", &t.values, t.cols)?;
            let method = s.method.clone().unwrap_or(Method::Magnitude);
            let (status, study) = match (&layer.skipped, &layer.pattern) {
                (Some(why), _) => (format!("kept dense: {why}"), None),
                (None, kernels::Pattern::Dense) => ("dense".to_string(), None),
                // Calibration inputs only where they are used.
                (None, p) => {
                    finite(&t.name, "calibration inputs", &x.p, x.cols)?;
                    (
                        "pruned".to_string(),
                        Some(study_layer(
                            &t.name, &t.values, t.rows, t.cols, p, &method, &x,
                        )?),
                    )
                }
            };
            studies.push(TensorStudy {
                name: t.name.clone(),
                shape: (t.rows, t.cols),
                status,
                sparsity: study.as_ref().map_or(0.0, |s| s.sparsity),
                retained_l1: study.as_ref().map_or(1.0, |s| s.retained_l1),
                l1: t.values.iter().map(|v| f64::from(v.abs())).sum(),
                output_error: study.as_ref().map_or((0.0, 0.0), |s| {
                    (s.output_error_before, s.output_error_after)
                }),
                calibration: (from, x.tokens),
            });
            masks.push(study.map(|s| s.mask));
        }
        masks::save(&ctx.out_dir.join(masks::MASKS), &masks)?;
        Ok(rows::layer_study(&studies))
    }
}
