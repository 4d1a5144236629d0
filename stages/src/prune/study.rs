//! A layer study: one weight matrix pruned alone, without a network around it (a user's
//! checkpoint, or a synthetic layer): its mask under a pattern and method, the L1 norm it
//! retains, and the relative output error it leaves on calibration inputs, from a file or
//! i.i.d. Gaussian.

use kernels::{build_mask, Mask, Pattern};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::calibrate::{output_error, LayerInputs};
use super::{oneshot, Method};
use crate::model::{Layer, LayerKind};
use crate::StageError;

/// What pruning one matrix found.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerStudy {
    /// The keep-mask.
    pub mask: Mask,
    /// Fraction of the weights removed.
    pub sparsity: f64,
    /// ‖W ⊙ mask‖₁ / ‖W‖₁.
    pub retained_l1: f64,
    /// ‖(W − W ⊙ mask)X‖/‖WX‖ on the calibration inputs.
    pub output_error_before: f64,
    /// ‖(W − Ŵ)X‖/‖WX‖ with the method's update of the kept weights (equal to the above for
    /// the methods that update nothing).
    pub output_error_after: f64,
}

/// `len` i.i.d. standard normal values from a ChaCha8 stream seeded by `seed` (Box–Muller on
/// 53-bit uniforms, so the values depend on the seed alone).
pub fn gaussian(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut uniform = move || ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    (0..len)
        .map(|_| {
            let (a, b) = (uniform(), uniform());
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
        })
        .collect()
}

/// `tokens` calibration inputs for a layer of `cols` inputs, i.i.d. standard normal, seeded.
pub fn gaussian_inputs(tokens: usize, cols: usize, seed: u64) -> LayerInputs {
    LayerInputs {
        p: gaussian(tokens * cols, seed),
        tokens,
        cols,
    }
}

/// Prunes the `rows × cols` matrix `weight` to `pattern` by `method` (magnitude, SparseGPT or
/// Wanda; OBS needs a network's gradients) on the inputs `x`.
pub fn study_layer(
    name: &str,
    weight: &[f32],
    rows: usize,
    cols: usize,
    pattern: &Pattern,
    method: &Method,
    x: &LayerInputs,
) -> Result<LayerStudy, StageError> {
    if x.cols != cols {
        return Err(StageError::InvalidConfig(format!(
            "{name}: calibration inputs of {} columns for a layer of {cols}",
            x.cols
        )));
    }
    let mut layer = Layer {
        name: name.to_string(),
        kind: LayerKind::Linear,
        shape: vec![rows, cols],
        weight: weight.to_vec(),
        bias: vec![0.0; rows],
    };
    let mask = match method {
        Method::Magnitude => {
            let scores: Vec<f32> = weight.iter().map(|w| w.abs()).collect();
            let mask = build_mask(pattern, &scores, rows, cols)?;
            layer.weight = mask.apply(weight)?;
            mask
        }
        Method::SparseGpt { .. } | Method::Wanda { .. } => {
            oneshot::prune_layer(&mut layer, x, pattern, method)?
        }
        Method::Obs { .. } => {
            return Err(StageError::InvalidConfig(format!(
                "{name}: OBS scores weights by a network's gradients; a layer study takes magnitude, sparsegpt or wanda"
            )))
        }
    };
    let (mut kept, mut total) = (0f64, 0f64);
    for (w, &k) in weight.iter().zip(mask.as_slice()) {
        total += f64::from(w.abs());
        if k {
            kept += f64::from(w.abs());
        }
    }
    let masked = mask.apply(weight)?;
    Ok(LayerStudy {
        sparsity: 1.0 - mask.density(),
        retained_l1: if total > 0.0 { kept / total } else { 1.0 },
        output_error_before: output_error(weight, &masked, rows, x),
        output_error_after: output_error(weight, &layer.weight, rows, x),
        mask,
    })
}
