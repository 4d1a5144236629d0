//! The prune stage's steps: score, mask and update every layer to its pattern (OBS in
//! recomputation steps), repeat along the schedule, and fine-tune with the masks fixed.

use datasets::Dataset;
use kernels::{Mask, Pattern};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::net::Net;
use crate::train::{check_fits, fit, net_accuracy, stream_seed, FitConfig};
use crate::{StageError, Weights};

use super::schedule::{self, Target};
use super::{calibrate, obs, oneshot};
use super::{
    Calibration, CalibrationInputs, LayerReport, LayerStatus, Method, PruneSpec, Pruned,
    ONE_SHOT_DEFAULTS,
};

/// Prunes every layer that can take its step's target (`targets`, per layer): scores, masks,
/// updates (OBS) and zeroes the weights in place; returns the masks (`None` where `prunable` is
/// false). OBS goes there in recomputation steps that each at most halve the density
/// ([`schedule::obs_substeps`]).
fn prune_step(
    data: &Dataset,
    weights: &mut Weights,
    targets: &[Target],
    prunable: &[bool],
    method: &Method,
    rng: &mut ChaCha8Rng,
    calibration: &[f32],
) -> Result<Vec<Option<Mask>>, StageError> {
    let substeps = match method {
        Method::SparseGpt { .. } | Method::Wanda { .. } => {
            return oneshot::prune_network(weights, targets, prunable, method, calibration);
        }
        Method::Magnitude => vec![targets.to_vec()],
        Method::Obs { .. } => {
            // Each layer's non-zero weights, counted once: its own density, and over the
            // prunable layers the density every other pattern's steps start from.
            let counts: Vec<(usize, usize)> = weights
                .layers
                .iter()
                .map(|l| {
                    (
                        l.weight.iter().filter(|&&w| w != 0.0).count(),
                        l.weight.len(),
                    )
                })
                .collect();
            let (nonzero, total) = counts
                .iter()
                .zip(prunable)
                .filter(|(_, &p)| p)
                .fold((0, 0), |(nz, t), (c, _)| (nz + c.0, t + c.1));
            let density = nonzero as f64 / total.max(1) as f64;
            let own: Vec<f64> = counts
                .iter()
                .map(|&(nz, len)| nz as f64 / len.max(1) as f64)
                .collect();
            schedule::layer_substeps(targets, density, &own)
        }
    };
    let mut masks = Vec::new();
    for step in &substeps {
        masks = prune_substep(data, weights, step, prunable, method, rng)?;
    }
    Ok(masks)
}

/// One scoring + masking pass (one OBS recomputation) to each layer's target.
fn prune_substep(
    data: &Dataset,
    weights: &mut Weights,
    targets: &[Target],
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
        let target = &targets[i];
        let mask = match (method, fishers.as_ref().and_then(|f| f[i].as_ref())) {
            (Method::Obs { block, damp, .. }, Some(fisher)) => {
                let inverses = fisher.inverses(*damp)?;
                let scores = obs::saliencies(&layer.weight, *block, &inverses);
                // A weight removed by an earlier step has saliency 0: it stays removed.
                let mask = target.mask(&scores, rows, cols)?;
                obs::obs_update(&mut layer.weight, mask.as_slice(), *block, &inverses);
                mask
            }
            _ => {
                let scores: Vec<f32> = layer.weight.iter().map(|w| w.abs()).collect();
                target.mask(&scores, rows, cols)?
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
        for (k, (targets, epochs)) in steps.iter().enumerate() {
            // The output errors are the last step's: keep the weights it starts from.
            let before = (k == last).then(|| current.clone());
            masks = prune_step(
                data,
                &mut current,
                targets,
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
