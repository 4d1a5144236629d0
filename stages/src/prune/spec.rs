//! What a prune trial asks for: the method and its calibration, the schedule, the pattern (or
//! each layer's), and which layers stay dense.

use kernels::Pattern;

use super::Schedule;
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
    /// it must exist in the model (checked by [`crate::prune()`]).
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
