//! The prune stage: magnitude or OBS pruning of a trained model into a pattern of the kernels
//! crate, one-shot or gradual, with fine-tuning under fixed masks (pruned weights stay exactly
//! `+0.0`). Every layer whose shape can take the pattern is pruned; the others are kept dense and
//! reported with the reason (DESIGN.md, "Pruning").

mod calibrate;
mod linalg;
mod obs;
mod oneshot;
mod schedule;
mod sparsegpt;
mod study;

pub use calibrate::{output_error, LayerInputs};
pub use oneshot::prune_layer;
pub use schedule::{Schedule, ScheduleKind, GRADUAL_STEPS_DEFAULT};
pub use study::{gaussian, gaussian_inputs, study_layer, LayerStudy};

use datasets::Dataset;
use kernels::{build_mask, Mask, Pattern, SparseMatrix};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::model::net::Net;
use crate::train::{check_fits, fit, net_accuracy, stream_seed, FitConfig};
use crate::{Optimizer, StageError, Weights};

/// OBS defaults (an experiment file may set each): gradients G, block size B, dampening λ.
pub const OBS_DEFAULTS: (usize, usize, f64) = (256, 64, 1e-2);

/// One-shot defaults (an experiment file may set each): calibration samples (512: a sample of a
/// classifier is one token, where SparseGPT's 128 sequences of an LLM are 262k; on the
/// quickstart's digits 128 samples over-fit the Hessian), SparseGPT's dampening λ (relative to
/// the mean Hessian diagonal) and its lazy-update block size.
pub const ONE_SHOT_DEFAULTS: (usize, f64, usize) = (512, 1e-2, 128);

keytag::tagged_enum! {
    /// The family of a [`Method`], without its parameters.
    pub enum MethodKind {
        /// [`Method::Magnitude`].
        Magnitude = "magnitude",
        /// [`Method::Obs`].
        Obs = "obs",
        /// [`Method::SparseGpt`].
        SparseGpt = "sparsegpt",
        /// [`Method::Wanda`].
        Wanda = "wanda",
    }
}

keytag::tagged_enum! {
    /// How an unstructured sparsity is spread over a layer by the one-shot methods: over the
    /// whole layer (SparseGPT: over each block of columns), or the same in every output row
    /// (as Wanda does).
    pub enum Scope {
        /// Over the layer.
        Layer = "layer",
        /// Per output row.
        Row = "row",
    }
}

keytag::tagged_enum! {
    /// Which model the one-shot methods run their calibration samples through.
    pub enum CalibrationInputs {
        /// The model pruned so far: each layer sees the outputs of the layers before it as
        /// pruned, layer by layer in order (as SparseGPT does).
        Sequential = "sequential",
        /// The model before this pruning step.
        Dense = "dense",
    }
}

/// Where the one-shot methods take each layer's inputs from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Training samples drawn (a seeded shuffle of the training split).
    pub samples: usize,
    /// Which model they run through.
    pub inputs: CalibrationInputs,
}

impl Calibration {
    /// Whether each layer's inputs come from the model pruned so far.
    pub fn sequential(&self) -> bool {
        self.inputs == CalibrationInputs::Sequential
    }
}

/// How weights are scored for removal.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Score `|w|`; removed weights are simply zeroed.
    Magnitude,
    /// Second-order (OBS / oBERT): saliency `w² / (2 [F⁻¹]ᵢᵢ)` from a block-diagonal empirical
    /// Fisher, then the OBS update of the kept weights (see `prune/obs.rs`). Each pruning step
    /// recomputes the Fisher in sub-steps that at most halve the density (no training between).
    Obs {
        /// Per-sample gradients G in the empirical Fisher.
        grads: usize,
        /// Block size B of the block-diagonal Fisher.
        block: usize,
        /// Dampening λ relative to the mean Fisher diagonal of the layer.
        damp: f64,
    },
    /// SparseGPT (Frantar & Alistarh, ICML'23): per layer, the Hessian `2XXᵀ/n` of its
    /// calibration inputs; columns in order, each weight's saliency `w²/[H⁻¹]ᵢᵢ²` choosing the
    /// mask (per block of columns, per group for N:M and V:N:M) and the OBS update of the columns
    /// to its right, batched lazily per `block` columns (see `prune/sparsegpt.rs`).
    SparseGpt {
        /// Calibration inputs.
        calibration: Calibration,
        /// Dampening λ relative to the mean Hessian diagonal.
        damp: f64,
        /// Columns per lazy update (rounded down to a multiple of M for N:M and V:N:M).
        block: usize,
        /// How an unstructured sparsity is spread.
        scope: Scope,
    },
    /// Wanda (Sun et al., ICLR'24): saliency `|w|·‖x_j‖₂` with `x_j` the calibration inputs of
    /// the weight's input; no weight update.
    Wanda {
        /// Calibration inputs.
        calibration: Calibration,
        /// How an unstructured sparsity is spread.
        scope: Scope,
    },
}

impl Method {
    /// The method's family.
    pub fn kind(&self) -> MethodKind {
        match self {
            Method::Magnitude => MethodKind::Magnitude,
            Method::Obs { .. } => MethodKind::Obs,
            Method::SparseGpt { .. } => MethodKind::SparseGpt,
            Method::Wanda { .. } => MethodKind::Wanda,
        }
    }

    /// The calibration of a one-shot method.
    pub fn calibration(&self) -> Option<Calibration> {
        match self {
            Method::SparseGpt { calibration, .. } | Method::Wanda { calibration, .. } => {
                Some(*calibration)
            }
            _ => None,
        }
    }
}

/// One prune trial (the engine has expanded the `[prune]` axes into a point).
#[derive(Clone, Debug, PartialEq)]
pub struct PruneSpec {
    /// Target pattern.
    pub pattern: Pattern,
    /// Scoring method (`None` exactly for the dense pattern, which scores nothing).
    pub method: Option<Method>,
    /// One-shot or gradual (`None` exactly for the dense pattern).
    pub schedule: Option<Schedule>,
    /// Fine-tune epochs in total (shared out over gradual steps).
    pub finetune_epochs: usize,
    /// Fine-tune learning rate.
    pub finetune_lr: f64,
    /// Fine-tune batch size.
    pub batch_size: usize,
    /// Fine-tune optimiser (fresh moments: none carried over from training).
    pub optimizer: Optimizer,
    /// Globs of the layers kept dense whatever the pattern; `None` keeps the model's own
    /// choice ([`Weights::kept_dense`]: a transformer's embedding and head).
    pub keep_dense: Option<Vec<String>>,
    /// Per-layer points: the named layers take their own pattern instead of `pattern`
    /// ([`Pattern::Dense`] leaves a layer dense). Empty for a uniform pruning. Every layer in
    /// it must exist in the model (checked by [`prune`]).
    pub layer_patterns: Vec<(String, Pattern)>,
}

impl PruneSpec {
    /// Why layer `i` of `w` stays dense whatever the pattern, if it does.
    pub fn kept_dense(&self, w: &Weights, i: usize) -> Option<String> {
        match &self.keep_dense {
            Some(globs) => globs
                .iter()
                .find(|g| crate::model::glob_matches(g, &w.layers[i].name))
                .map(|g| format!("kept dense by keep_dense `{g}`")),
            None => w.kept_dense(i).map(str::to_string),
        }
    }

    /// The pattern the layer named `layer` is asked to take: its per-layer point, else the
    /// trial's pattern.
    pub fn pattern_of(&self, layer: &str) -> &Pattern {
        self.layer_patterns
            .iter()
            .find(|(name, _)| name == layer)
            .map_or(&self.pattern, |(_, p)| p)
    }

    /// Whether layer `i` of `w` takes its pattern: `Err` with why it stays dense (kept dense,
    /// dense in a per-layer point, or a shape the pattern does not fit).
    pub fn layer_fits(&self, w: &Weights, i: usize) -> Result<(), String> {
        if let Some(why) = self.kept_dense(w, i) {
            return Err(why);
        }
        let l = &w.layers[i];
        let pattern = self.pattern_of(&l.name);
        if *pattern == Pattern::Dense && self.pattern != Pattern::Dense {
            return Err("dense in this per-layer point".into());
        }
        pattern
            .validate_for(l.rows(), l.cols())
            .map_err(|e| e.to_string())
    }

    /// Each layer's pattern in forward order: its own where it takes one, dense where it does
    /// not (kept dense, dense in the point, or a shape the pattern does not fit).
    pub fn layer_pattern_list(&self, w: &Weights) -> Vec<Pattern> {
        (0..w.layers.len())
            .map(|i| match self.layer_fits(w, i) {
                Ok(()) => self.pattern_of(&w.layers[i].name).clone(),
                Err(_) => Pattern::Dense,
            })
            .collect()
    }

    /// Checks values no model can fix.
    pub fn validate(&self) -> Result<(), StageError> {
        self.pattern.validate()?;
        let bad = |m: String| Err(StageError::InvalidConfig(format!("prune: {m}")));
        if self.batch_size == 0 || !(self.finetune_lr.is_finite() && self.finetune_lr > 0.0) {
            return bad(format!(
                "batch_size must be >= 1 and finetune_lr > 0, got {} and {}",
                self.batch_size, self.finetune_lr
            ));
        }
        let dense = self.pattern == Pattern::Dense;
        if dense != self.method.is_none() || dense != self.schedule.is_none() {
            return bad(format!(
                "the dense pattern takes no method or schedule and every other pattern takes both; \
                 got {} with method {:?} and schedule {:?}",
                self.pattern, self.method, self.schedule
            ));
        }
        if let Some(Method::Obs { grads, block, damp }) = self.method {
            if grads == 0 || block == 0 || !(damp.is_finite() && damp > 0.0) {
                return bad(format!(
                    "obs needs grads >= 1, block >= 1, damp > 0; got {grads}, {block}, {damp}"
                ));
            }
        }
        if let Some(Method::SparseGpt { damp, block, .. }) = self.method {
            if block == 0 || !(damp.is_finite() && damp > 0.0) {
                return bad(format!(
                    "sparsegpt needs block >= 1 and damp > 0; got {block}, {damp}"
                ));
            }
        }
        if self
            .method
            .as_ref()
            .and_then(Method::calibration)
            .is_some_and(|c| c.samples == 0)
        {
            return bad("calibration needs at least 1 sample".into());
        }
        if self.schedule == Some(Schedule::Gradual { steps: 0 }) {
            return bad("gradual needs steps >= 1".into());
        }
        if !self.layer_patterns.is_empty() && dense {
            return bad("per-layer points need a non-dense trial pattern and a method".into());
        }
        for (_, p) in &self.layer_patterns {
            p.validate()?;
        }
        Ok(())
    }
}

/// What happened to one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LayerStatus {
    /// Pruned into the trial's pattern.
    Pruned,
    /// Left dense because the pattern does not fit this layer's shape.
    KeptDense {
        /// Why (e.g. "V = 64 does not divide the 10 rows").
        reason: String,
    },
}

/// Per-layer metrics of a prune trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerReport {
    /// Layer name.
    pub name: String,
    /// Weight matrix rows.
    pub rows: usize,
    /// Weight matrix columns.
    pub cols: usize,
    /// Pruned or kept dense (with the reason).
    pub status: LayerStatus,
    /// Fraction of the layer's weights removed by its mask.
    pub sparsity: f64,
    /// ‖w ⊙ mask‖₁ / ‖w‖₁ over the trained (input) weights; 1 for a dense layer.
    pub retained_l1: f64,
    /// The layer's relative output error `‖(W − W⊙mask)X‖/‖WX‖` on the calibration inputs,
    /// without the method's update (of the last pruning step; `None` for a layer kept dense).
    pub output_error_before: Option<f64>,
    /// The same with the method's update (`‖(W − Ŵ)X‖/‖WX‖`).
    pub output_error_after: Option<f64>,
}

/// A pruned, fine-tuned model.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruned {
    /// The trial's pattern.
    pub pattern: Pattern,
    /// Each layer's pattern (forward order; dense for a layer kept dense).
    pub layer_patterns: Vec<Pattern>,
    /// Dense weights with exact `+0.0` where masks drop weights.
    pub weights: Weights,
    /// Per layer (forward order): the keep-mask, `None` for a layer kept dense.
    pub masks: Vec<Option<Mask>>,
    /// Per-layer metrics.
    pub layers: Vec<LayerReport>,
    /// Test accuracy of the input model.
    pub accuracy_before: f64,
    /// Test accuracy right after the (last) pruning step, before its fine-tuning.
    pub accuracy_after_prune: f64,
    /// Test accuracy after fine-tuning.
    pub accuracy_after_finetune: f64,
    /// Fraction of all weights removed (dense-kept layers count as unpruned).
    pub sparsity: f64,
    /// ‖w ⊙ mask‖₁ / ‖w‖₁ over all layers' trained weights together.
    pub retained_l1: f64,
    /// Mean training loss of each fine-tune epoch, all steps in order.
    pub finetune_loss_curve: Vec<f32>,
}

impl Pruned {
    /// Each layer's weights packed in the format of its pattern (dense for layers kept dense),
    /// in forward order; `to_dense()` of each equals the layer's weights bit for bit.
    pub fn packed(&self) -> Result<Vec<(String, SparseMatrix)>, StageError> {
        self.weights
            .layers
            .iter()
            .zip(&self.masks)
            .zip(&self.layer_patterns)
            .map(|((l, m), pattern)| {
                let packed = match m {
                    Some(m) => SparseMatrix::from_masked(pattern, &l.weight, m)?,
                    None => SparseMatrix::from_masked(
                        &Pattern::Dense,
                        &l.weight,
                        &Mask::full(l.rows(), l.cols()),
                    )?,
                };
                Ok((l.name.clone(), packed))
            })
            .collect()
    }
}

/// Prunes every layer that can take its pattern (`patterns`, per layer): scores, masks,
/// updates (OBS) and zeroes the weights in place; returns the masks (`None` where `prunable` is
/// false). OBS goes there in recomputation steps that each at most halve the density
/// ([`schedule::obs_substeps`]).
fn prune_step(
    data: &Dataset,
    weights: &mut Weights,
    patterns: &[Pattern],
    prunable: &[bool],
    method: &Method,
    rng: &mut ChaCha8Rng,
    calibration: &[f32],
) -> Result<Vec<Option<Mask>>, StageError> {
    let substeps = match method {
        Method::SparseGpt { .. } | Method::Wanda { .. } => {
            return oneshot::prune_network(weights, patterns, prunable, method, calibration);
        }
        Method::Magnitude => vec![patterns.to_vec()],
        Method::Obs { .. } => {
            let (nonzero, total) = weights
                .layers
                .iter()
                .zip(prunable)
                .filter(|(_, &p)| p)
                .fold((0usize, 0usize), |(nz, t), (l, _)| {
                    (
                        nz + l.weight.iter().filter(|&&w| w != 0.0).count(),
                        t + l.weight.len(),
                    )
                });
            let density = nonzero as f64 / total.max(1) as f64;
            schedule::layer_substeps(patterns, density)
        }
    };
    let mut masks = Vec::new();
    for step in &substeps {
        masks = prune_substep(data, weights, step, prunable, method, rng)?;
    }
    Ok(masks)
}

/// One scoring + masking pass (one OBS recomputation) to each layer's pattern.
fn prune_substep(
    data: &Dataset,
    weights: &mut Weights,
    patterns: &[Pattern],
    prunable: &[bool],
    method: &Method,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Option<Mask>>, StageError> {
    let fishers = match *method {
        Method::Magnitude | Method::SparseGpt { .. } | Method::Wanda { .. } => None,
        Method::Obs { grads, block, .. } => Some(obs::layer_fishers(
            data, weights, prunable, grads, block, rng,
        )?),
    };
    let mut masks = Vec::with_capacity(weights.layers.len());
    for (i, layer) in weights.layers.iter_mut().enumerate() {
        if !prunable[i] {
            masks.push(None);
            continue;
        }
        let (rows, cols) = (layer.rows(), layer.cols());
        let pattern = &patterns[i];
        let mask = match (method, fishers.as_ref().and_then(|f| f[i].as_ref())) {
            (Method::Obs { block, damp, .. }, Some(fisher)) => {
                let inverses = fisher.inverses(*damp)?;
                let scores = obs::saliencies(&layer.weight, *block, &inverses);
                // A weight removed by an earlier step has saliency 0: it stays removed.
                let mask = build_mask(pattern, &scores, rows, cols)?;
                obs::obs_update(&mut layer.weight, mask.as_slice(), *block, &inverses);
                mask
            }
            _ => {
                let scores: Vec<f32> = layer.weight.iter().map(|w| w.abs()).collect();
                build_mask(pattern, &scores, rows, cols)?
            }
        };
        layer.weight = mask.apply(&layer.weight)?;
        masks.push(Some(mask));
    }
    Ok(masks)
}

/// Prunes `weights` (trained on `data`) as `spec` says and fine-tunes with the masks fixed.
/// Deterministic in (`data`, `weights`, `spec`, `seed`).
pub fn prune(
    data: &Dataset,
    weights: &Weights,
    spec: &PruneSpec,
    seed: u64,
) -> Result<Pruned, StageError> {
    spec.validate()?;
    check_fits(data, weights)?;
    for (name, _) in &spec.layer_patterns {
        if !weights.layers.iter().any(|l| &l.name == name) {
            return Err(StageError::InvalidConfig(format!(
                "prune: the per-layer point names `{name}`, which is not a layer of the model"
            )));
        }
    }
    let fits: Vec<Result<(), String>> = (0..weights.layers.len())
        .map(|i| spec.layer_fits(weights, i))
        .collect();
    let layer_patterns = spec.layer_pattern_list(weights);
    let prunable: Vec<bool> = layer_patterns
        .iter()
        .map(|p| *p != Pattern::Dense)
        .collect();
    let accuracy_before = net_accuracy(&Net::from_weights(weights)?, data)?;

    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, 2));
    let mut current = weights.clone();
    let mut masks = vec![None; weights.layers.len()];
    let mut errors = vec![None; weights.layers.len()];
    let mut accuracy_after_prune = accuracy_before;
    let mut finetune_loss_curve = Vec::new();
    let how = spec.method.as_ref().zip(spec.schedule.as_ref());
    if let Some((method, sched)) = how.filter(|_| prunable.iter().any(|&p| p)) {
        // The one-shot methods calibrate on their own sample count; every method's output
        // errors are measured on the same draw.
        let calibration = match method.calibration() {
            Some(c) => c,
            None => Calibration {
                samples: ONE_SHOT_DEFAULTS.0.min(data.n_train()),
                inputs: CalibrationInputs::Sequential,
            },
        };
        let batch = calibrate::batch(data, calibration.samples, seed)?;
        let steps = schedule::layer_plan(&layer_patterns, sched, spec.finetune_epochs);
        let last = steps.len() - 1;
        for (k, (patterns, epochs)) in steps.iter().enumerate() {
            // The output errors are the last step's: keep the weights it starts from.
            let before = (k == last).then(|| current.clone());
            masks = prune_step(
                data,
                &mut current,
                patterns,
                &prunable,
                method,
                &mut rng,
                &batch,
            )?;
            let net = Net::from_weights(&current)?;
            if let Some(before) = before {
                accuracy_after_prune = net_accuracy(&net, data)?;
                errors = oneshot::output_errors(
                    &before,
                    &current,
                    &masks,
                    &batch,
                    calibration.sequential(),
                )?;
            }
            let cfg = FitConfig {
                epochs: *epochs,
                batch_size: spec.batch_size,
                lr: spec.finetune_lr,
                optimizer: spec.optimizer,
                weight_decay: 0.0,
                masks: Some(&masks),
            };
            finetune_loss_curve.extend(fit(&net, data, &cfg, &mut rng)?.loss_curve);
            current = net.to_weights()?;
        }
    }
    let accuracy_after_finetune = if finetune_loss_curve.is_empty() {
        accuracy_after_prune
    } else {
        net_accuracy(&Net::from_weights(&current)?, data)?
    };

    let mut removed = 0usize;
    let (mut kept_l1, mut total_l1) = (0f64, 0f64);
    let layers = weights
        .layers
        .iter()
        .zip(&masks)
        .zip(fits)
        .zip(errors)
        .map(|(((l, m), fit), error)| {
            let (sparsity, retained_l1) = match m {
                Some(m) => {
                    removed += m.as_slice().len() - m.count();
                    let total: f64 = l.weight.iter().map(|w| w.abs() as f64).sum();
                    let kept: f64 = l
                        .weight
                        .iter()
                        .zip(m.as_slice())
                        .filter(|(_, &k)| k)
                        .map(|(w, _)| w.abs() as f64)
                        .sum();
                    kept_l1 += kept;
                    total_l1 += total;
                    let retained = if total > 0.0 { kept / total } else { 1.0 };
                    (1.0 - m.density(), retained)
                }
                None => {
                    let total: f64 = l.weight.iter().map(|w| w.abs() as f64).sum();
                    kept_l1 += total;
                    total_l1 += total;
                    (0.0, 1.0)
                }
            };
            let status = match (m, fit) {
                (Some(_), _) | (None, Ok(())) => LayerStatus::Pruned,
                (None, Err(reason)) => LayerStatus::KeptDense { reason },
            };
            LayerReport {
                name: l.name.clone(),
                rows: l.rows(),
                cols: l.cols(),
                status,
                sparsity,
                retained_l1,
                output_error_before: error.map(|e| e.0),
                output_error_after: error.map(|e| e.1),
            }
        })
        .collect();
    Ok(Pruned {
        pattern: spec.pattern.clone(),
        layer_patterns,
        sparsity: removed as f64 / weights.n_weights().max(1) as f64,
        retained_l1: if total_l1 > 0.0 {
            kept_l1 / total_l1
        } else {
            1.0
        },
        weights: current,
        masks,
        layers,
        accuracy_before,
        accuracy_after_prune,
        accuracy_after_finetune,
        finetune_loss_curve,
    })
}
