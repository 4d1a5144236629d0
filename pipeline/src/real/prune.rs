//! The prune stage: prunes (and fine-tunes) a trained model; writes its weights and masks.

use super::train::WEIGHTS;
use super::{masks, rows, Datasets};
use crate::experiment::limits;
use crate::kinds::{prune, DatasetTrial, LayerFormat, Prune, PruneTrial, Train};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use kernels::Pattern;
use stages::{ModelSpec, PruneSpec, Weights};
use std::sync::Arc;

/// The prune stage.
pub struct PruneStage(pub(super) Arc<Datasets>);

impl PruneStage {
    /// The format each layer of `model` takes under `pattern` on `data`: the pattern where it
    /// fits the layer's shape, dense (with the reason) where it does not. An error names the
    /// table of the experiment file it comes from.
    fn layer_formats(
        &self,
        data: &DatasetTrial,
        model: &ModelSpec,
        spec: &PruneSpec,
        largest_batch: u64,
    ) -> Result<Vec<LayerFormat>, (&'static str, String)> {
        let ds = self.0.load(data).map_err(|e| ("dataset", e.to_string()))?;
        // The layers the file's sizes alone could not bound (the data set's features and
        // classes are known only now), before their weights are allocated.
        if let ModelSpec::Mlp { hidden } = model {
            let (features, classes) = (ds.n_features as u64, ds.n_classes as u64);
            let widths: Vec<u64> = std::iter::once(features)
                .chain(hidden.iter().map(|&h| h as u64))
                .chain(std::iter::once(classes))
                .collect();
            let too_big = |(a, b): (u64, u64)| a.saturating_mul(b) > limits::ELEMENTS_MAX;
            if let Some(w) = widths.windows(2).find(|w| too_big((w[0], w[1]))) {
                return Err((
                    "model",
                    format!(
                        "a layer from width {} to {} (the data set has {features} features and {classes} classes) would hold more than {} values in one matrix",
                        w[0],
                        w[1],
                        limits::ELEMENTS_MAX
                    ),
                ));
            }
            if too_big((features, largest_batch)) {
                return Err((
                    "dataset",
                    format!(
                        "{features} features at batch {largest_batch} would hold more than {} values in one matrix",
                        limits::ELEMENTS_MAX
                    ),
                ));
            }
        }
        // The patches' fit with the data set is known only now: named at the key.
        if let ModelSpec::Transformer { patch, .. } = model {
            stages::model::patch_grid(*patch, ds.n_features, ds.image_shape)
                .map_err(|e| ("model.patch", e))?;
        }
        let w = Weights::init(model, ds.n_features, ds.image_shape, ds.n_classes, 0)
            .map_err(|e| ("model", e.to_string()))?;
        // Known now, so an error before anything runs rather than a failed trial per point.
        if let Some(c) = spec.method.as_ref().and_then(stages::Method::calibration) {
            let n = ds.n_train();
            if c.samples > n {
                return Err((
                    "prune",
                    format!(
                        "calibration_samples = {} is more than the {n} samples of the training split (the default is 512)",
                        c.samples
                    ),
                ));
            }
        }
        // SparseGPT inverts a cols × cols Hessian per layer it prunes.
        if let Some(stages::Method::SparseGpt { .. }) = spec.method {
            let pruned = |i: &usize| {
                spec.layer_fits(&w, *i).is_ok()
                    && *spec.pattern_of(&w.layers[*i].name) != Pattern::Dense
            };
            let too_big = |l: &&stages::Layer| {
                (l.cols() as u64).saturating_mul(l.cols() as u64) > limits::ELEMENTS_MAX
            };
            if let Some(l) = (0..w.layers.len())
                .filter(pruned)
                .map(|i| &w.layers[i])
                .find(too_big)
            {
                return Err((
                    "prune",
                    format!(
                        "SparseGPT's Hessian of layer {} would hold {} × {} values, more than {} (4 GiB of f32) in one matrix",
                        l.name,
                        l.cols(),
                        l.cols(),
                        limits::ELEMENTS_MAX
                    ),
                ));
            }
        }
        for g in spec.keep_dense.iter().flatten() {
            if !w
                .layers
                .iter()
                .any(|l| stages::model::glob_matches(g, &l.name))
            {
                let names: Vec<&str> = w.layers.iter().map(|l| l.name.as_str()).collect();
                return Err((
                    "prune",
                    format!(
                        "keep_dense: `{g}` matches no layer of the model (its layers: {names:?})"
                    ),
                ));
            }
        }
        Ok(w.layers
            .iter()
            .zip(w.layer_tokens())
            .enumerate()
            .map(|(i, (l, tokens))| {
                let (rows, cols) = (l.rows() as u64, l.cols() as u64);
                let (pattern, skipped) = match spec.layer_fits(&w, i) {
                    Ok(()) => (spec.pattern_of(&l.name).clone(), None),
                    Err(e) => (Pattern::Dense, Some(e)),
                };
                LayerFormat {
                    layer: l.name.clone(),
                    pattern,
                    rows,
                    cols,
                    tokens: tokens as u64,
                    skipped,
                }
            })
            .collect())
    }
}

impl Stage for PruneStage {
    type Kind = Prune;

    fn version(&self) -> u32 {
        1
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        let exp = p.experiment();
        let largest_batch = exp
            .batch_sizes
            .iter()
            .chain(&exp.batch_tokens)
            .copied()
            .max()
            .unwrap_or(1);
        prune::plan(p, |data, model, spec| {
            self.layer_formats(data, model, spec, largest_batch)
        })
    }

    fn run(
        &self,
        ctx: &RunCtx,
        p: &PruneTrial,
        trained: Done<Train>,
    ) -> Result<Outcome, StageError> {
        let ds = self.0.load(trained.upstream().parent()?.trial())?;
        let weights = Weights::load(&trained.artifact(WEIGHTS))?;
        let pruned = stages::prune(&ds, &weights, &p.spec, trained.trial().seed)?;
        pruned.weights.save(&ctx.out_dir.join(WEIGHTS))?;
        masks::save(&ctx.out_dir.join(masks::MASKS), &pruned.masks)?;
        Ok(Outcome {
            metrics: rows::prune(&pruned),
            rows: vec![],
        })
    }
}
